/*
 * test_spec.c: the spec loader: every field and its default, the seed's
 * examples, and the normalized JSON. Error cases live in test_spec_errors.c.
 */
#include "harness.h"
#include "iod/objects.h"
#include "iod/spec.h"

#include <stdlib.h>

static struct iod_spec_diags diags;

static int load(const char *text, struct iod_spec **s)
{
	return iod_spec_load_buffer("t.yaml", text, strlen(text), s, &diags);
}

/* All diagnostics on one line, for failure messages. */
static const char *dump(void)
{
	static char b[8192];
	size_t off = 0;
	b[0] = 0;
	for (uint32_t i = 0; i < diags.n && off < sizeof(b); i++)
		off += (size_t)snprintf(b + off, sizeof(b) - off, "[%u:%u %s] ",
		                        (unsigned)diags.d[i].line, (unsigned)diags.d[i].col,
		                        diags.d[i].msg);
	return b;
}

#define LOAD_OK(text, s)                                                          \
	do {                                                                      \
		int rc_ = load(text, s);                                          \
		CHECK_MSG(rc_ == 0 && *(s), "load failed (%d): %s", rc_, dump()); \
	} while (0)

TEST(seed_service_topology)
{
	struct iod_spec *s;
	LOAD_OK("services:\n"
	        "  - name: parameter-server\n"
	        "    type: stateful\n"
	        "    resources: {gpu: 1, mem: 32GB}\n"
	        "    replicas: 3\n"
	        "  - name: worker-node\n"
	        "    type: stateless\n"
	        "    resources: {gpu: 4, mem: 128GB}\n"
	        "    replicas: 8\n",
	        &s);
	CHECK_EQ(s->services_n, 2);
	const struct iod_spec_service *ps = &s->services[0], *w = &s->services[1];
	CHECK_STR(ps->name, "parameter-server");
	CHECK_EQ(ps->type, IOD_SERVICE_STATEFUL);
	CHECK_EQ(ps->res.gpu, 1);
	CHECK_U64(ps->res.mem_bytes, 32000000000ull);
	CHECK_EQ(ps->replicas, 3);
	CHECK_EQ(ps->line, 2);
	CHECK_EQ(ps->col, 5);
	CHECK_STR(w->name, "worker-node");
	CHECK_EQ(w->type, IOD_SERVICE_STATELESS);
	CHECK_EQ(w->res.gpu, 4);
	CHECK_U64(w->res.mem_bytes, 128000000000ull);
	CHECK_EQ(w->replicas, 8);
	CHECK(iod_spec_find_service(s, "worker-node") == w);
	CHECK(iod_spec_find_service(s, "worker") == NULL);
	CHECK(!s->has_resources && !s->has_mesh && s->tiers_n == 0);
	iod_spec_free(s);
}

TEST(service_defaults)
{
	struct iod_spec *s;
	LOAD_OK("services: [{name: a, type: stateless}]\n", &s);
	const struct iod_spec_service *a = &s->services[0];
	CHECK_EQ(a->replicas, 1);
	CHECK_EQ(a->restart, IOD_RESTART_ALWAYS);
	CHECK_EQ(a->gang, false);
	CHECK_EQ(a->placement.spread, IOD_SPREAD_DEFAULT);
	CHECK_EQ(a->placement.anti, IOD_ANTI_NONE);
	CHECK_EQ(a->placement.gpu_link, IOD_GPU_LINK_ANY);
	CHECK_EQ(a->placement.numa, IOD_NUMA_ANY);
	CHECK_EQ(a->health.kind, IOD_HEALTH_NONE);
	CHECK_U64(a->health.interval_ns, 10 * IOD_NS_PER_S);
	CHECK_U64(a->health.timeout_ns, IOD_NS_PER_S);
	CHECK_EQ(a->health.healthy_threshold, 1);
	CHECK_EQ(a->health.unhealthy_threshold, 3);
	CHECK(a->command == NULL && a->args_n == 0 && a->env_n == 0 && a->ports_n == 0);
	CHECK(a->depends_n == 0);
	CHECK_EQ(a->res.gpu, 0);
	CHECK_EQ(a->res.cpu_millis, 0);
	CHECK_U64(a->res.mem_bytes, 0);
	CHECK_EQ(a->res.compute.type, IOD_COMPUTE_NONE);
	CHECK(!a->res.network.has_latency && a->res.network.bandwidth_bps == 0);
	iod_spec_free(s);
}

TEST(seed_resources)
{
	struct iod_spec *s;
	LOAD_OK("resources:\n"
	        "  compute: {type: tensor-core, count: 8, memory: 64GB}\n"
	        "  network: {bandwidth: 100Gbps, latency: <5us}\n",
	        &s);
	CHECK(s->has_resources);
	CHECK_EQ(s->resources.compute.type, IOD_COMPUTE_TENSOR_CORE);
	CHECK_EQ(s->resources.compute.count, 8);
	CHECK_U64(s->resources.compute.mem_bytes, 64000000000ull);
	CHECK_EQ(s->resources.gpu, 8); /* tensor cores are GPUs */
	CHECK_U64(s->resources.gpu_mem_bytes, 64000000000ull);
	CHECK_U64(s->resources.network.bandwidth_bps, 100000000000ull);
	CHECK(s->resources.network.has_latency);
	CHECK_EQ(s->resources.network.latency_ns.op, IOD_CMP_LT);
	CHECK_U64(s->resources.network.latency_ns.value, 5000);
	iod_spec_free(s);
}

TEST(compute_types)
{
	static const struct {
		const char *name;
		enum iod_compute_type t;
	} cases[] = {{"tensor-core", IOD_COMPUTE_TENSOR_CORE},
	             {"cuda-core", IOD_COMPUTE_CUDA_CORE},
	             {"fpga", IOD_COMPUTE_FPGA},
	             {"dpu", IOD_COMPUTE_DPU},
	             {"cpu", IOD_COMPUTE_CPU}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[128];
		struct iod_spec *s;
		snprintf(text, sizeof(text), "resources: {compute: {type: %s, count: 2}}\n",
		         cases[i].name);
		LOAD_OK(text, &s);
		CHECK_EQ(s->resources.compute.type, cases[i].t);
		CHECK_EQ(s->resources.compute.count, 2);
		CHECK_STR(iod_compute_type_name(cases[i].t), cases[i].name);
		enum iod_compute_type back;
		CHECK_EQ(iod_compute_type_parse(cases[i].name, &back), 0);
		CHECK_EQ(back, cases[i].t);
		/* gpu types count as GPUs, cpu as cores, the rest only as compute */
		bool gpu =
		    cases[i].t == IOD_COMPUTE_TENSOR_CORE || cases[i].t == IOD_COMPUTE_CUDA_CORE;
		CHECK_EQ(s->resources.gpu, gpu ? 2 : 0);
		CHECK_EQ(s->resources.cpu_millis, cases[i].t == IOD_COMPUTE_CPU ? 2000 : 0);
		iod_spec_free(s);
	}
	enum iod_compute_type t;
	CHECK_EQ(iod_compute_type_parse("none", &t), -EINVAL);
	CHECK_EQ(iod_compute_type_parse("gpu", &t), -EINVAL);
}

TEST(cpu_forms)
{
	static const struct {
		const char *v;
		uint32_t millis;
	} cases[] = {{"2", 2000},     {"0.5", 500}, {"\"500m\"", 500}, {"1.25", 1250},
	             {"250m", 250},   {"0.001", 1}, {"1024", 1024000}, {"0", 0},
	             {"\"3\"", 3000}, {"+1", 1000}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[128];
		struct iod_spec *s;
		snprintf(text, sizeof(text), "services: [{name: a, type: stateless, cpu: %s}]\n",
		         cases[i].v);
		int rc = load(text, &s);
		CHECK_MSG(rc == 0, "cpu %s: %s", cases[i].v, dump());
		CHECK_MSG(s->services[0].res.cpu_millis == cases[i].millis, "cpu %s gave %u",
		          cases[i].v, (unsigned)s->services[0].res.cpu_millis);
		iod_spec_free(s);
	}
	struct iod_spec *s;
	LOAD_OK("services: [{name: a, type: stateless, resources: {cpu: 1.5}}]\n", &s);
	CHECK_EQ(s->services[0].res.cpu_millis, 1500);
	iod_spec_free(s);
}

TEST(every_service_field)
{
	struct iod_spec *s;
	LOAD_OK("services:\n"
	        "  - name: ps\n"
	        "    type: stateful\n"
	        "    replicas: 0\n"
	        "    resources: {gpu: 2, gpu_mem: 80GiB, mem: 1.5GB, cpu: 4,\n"
	        "                network: {bandwidth: 25Gbps, latency: 10us}}\n"
	        "    command: [/usr/bin/python3, -m, ps]\n"
	        "    args: [--port, 7000, --fast]\n"
	        "    env: {B: 2, A: \"x y\", C: true}\n"
	        "    ports: [7000, {name: metrics, port: 9100, protocol: udp}]\n"
	        "    health: {http: {port: 7000, path: /healthz}, interval: 500ms, timeout: "
	        "100ms,\n"
	        "             healthy_threshold: 2, unhealthy_threshold: 5}\n"
	        "    placement: {strategy: pack, anti_affinity: zone, gpu_link: nvlink, numa: "
	        "single}\n"
	        "    restart: on-failure\n"
	        "    gang: true\n"
	        "  - name: w\n"
	        "    type: stateless\n"
	        "    depends_on: [ps]\n"
	        "    cpu: 250m\n"
	        "    network: {bandwidth: \">=1Tbps\"}\n"
	        "    command: run  --fast   now\n"
	        "    args: [later]\n"
	        "    health: {exec: \"test -f /tmp/ok\"}\n"
	        "    placement: {strategy: spread, anti_affinity: rack, gpu_link: pcie}\n"
	        "    restart: never\n"
	        "    gang: false\n"
	        "  - {name: t, type: stateless, health: {tcp: 8080}, placement: {anti_affinity: "
	        "node}}\n",
	        &s);
	const struct iod_spec_service *ps = &s->services[0];
	CHECK_EQ(ps->replicas, 0);
	CHECK_EQ(ps->res.gpu, 2);
	CHECK_U64(ps->res.gpu_mem_bytes, 80ull << 30);
	CHECK_U64(ps->res.mem_bytes, 1500000000ull);
	CHECK_EQ(ps->res.cpu_millis, 4000);
	CHECK_U64(ps->res.network.bandwidth_bps, 25000000000ull);
	CHECK_EQ(ps->res.network.latency_ns.op, IOD_CMP_LE); /* a bare latency is a maximum */
	CHECK_U64(ps->res.network.latency_ns.value, 10000);
	CHECK_STR(ps->command, "/usr/bin/python3");
	CHECK_EQ(ps->args_n, 5);
	CHECK_STR(ps->args[0], "-m");
	CHECK_STR(ps->args[1], "ps");
	CHECK_STR(ps->args[2], "--port");
	CHECK_STR(ps->args[3], "7000");
	CHECK_STR(ps->args[4], "--fast");
	CHECK_EQ(ps->env_n, 3);
	CHECK_STR(ps->env[0].name, "B"); /* file order, not sorted */
	CHECK_STR(ps->env[0].value, "2");
	CHECK_STR(ps->env[1].name, "A");
	CHECK_STR(ps->env[1].value, "x y");
	CHECK_STR(ps->env[2].value, "true");
	CHECK_EQ(ps->ports_n, 2);
	CHECK_EQ(ps->ports[0].port, 7000);
	CHECK(ps->ports[0].name == NULL);
	CHECK_EQ(ps->ports[0].proto, IOD_PROTO_TCP);
	CHECK_STR(ps->ports[1].name, "metrics");
	CHECK_EQ(ps->ports[1].port, 9100);
	CHECK_EQ(ps->ports[1].proto, IOD_PROTO_UDP);
	CHECK_EQ(ps->health.kind, IOD_HEALTH_HTTP);
	CHECK_EQ(ps->health.port, 7000);
	CHECK_STR(ps->health.path, "/healthz");
	CHECK_U64(ps->health.interval_ns, 500 * IOD_NS_PER_MS);
	CHECK_U64(ps->health.timeout_ns, 100 * IOD_NS_PER_MS);
	CHECK_EQ(ps->health.healthy_threshold, 2);
	CHECK_EQ(ps->health.unhealthy_threshold, 5);
	CHECK_EQ(ps->placement.spread, IOD_SPREAD_PACK);
	CHECK_EQ(ps->placement.anti, IOD_ANTI_ZONE);
	CHECK_EQ(ps->placement.gpu_link, IOD_GPU_LINK_NVLINK);
	CHECK_EQ(ps->placement.numa, IOD_NUMA_SINGLE);
	CHECK_EQ(ps->restart, IOD_RESTART_ON_FAILURE);
	CHECK(ps->gang);

	const struct iod_spec_service *w = &s->services[1];
	CHECK_EQ(w->depends_n, 1);
	CHECK_STR(w->depends_on[0], "ps");
	CHECK_EQ(w->res.cpu_millis, 250);
	CHECK_U64(w->res.network.bandwidth_bps, 1000000000000ull);
	CHECK(!w->res.network.has_latency);
	CHECK_STR(w->command, "run");
	CHECK_EQ(w->args_n, 3);
	CHECK_STR(w->args[0], "--fast");
	CHECK_STR(w->args[1], "now");
	CHECK_STR(w->args[2], "later");
	CHECK_EQ(w->health.kind, IOD_HEALTH_EXEC);
	CHECK_STR(w->health.command, "test -f /tmp/ok");
	CHECK_EQ(w->placement.spread, IOD_SPREAD_SPREAD);
	CHECK_EQ(w->placement.anti, IOD_ANTI_RACK);
	CHECK_EQ(w->placement.gpu_link, IOD_GPU_LINK_PCIE);
	CHECK_EQ(w->restart, IOD_RESTART_NEVER);
	CHECK(!w->gang);

	const struct iod_spec_service *t = &s->services[2];
	CHECK_EQ(t->health.kind, IOD_HEALTH_TCP);
	CHECK_EQ(t->health.port, 8080);
	CHECK_EQ(t->placement.anti, IOD_ANTI_NODE);
	iod_spec_free(s);
}

TEST(health_http_default_path_and_tcp_map)
{
	struct iod_spec *s;
	LOAD_OK("services:\n"
	        "  - {name: a, type: stateless, health: {http: {port: 80}}}\n"
	        "  - {name: b, type: stateless, health: {tcp: {port: 81}, timeout: 10s}}\n",
	        &s);
	CHECK_STR(s->services[0].health.path, "/");
	CHECK_EQ(s->services[0].health.port, 80);
	CHECK_EQ(s->services[1].health.port, 81);
	CHECK_U64(s->services[1].health.timeout_ns, 10 * IOD_NS_PER_S); /* = interval: ok */
	iod_spec_free(s);
}

TEST(storage_tiers_and_mesh)
{
	struct iod_spec *s;
	LOAD_OK("storage: {tiers: [{medium: PMem, quota: 20%}, {medium: NVMe, quota: 80%}]}\n"
	        "service_mesh: {transport: rdma}\n",
	        &s);
	CHECK_EQ(s->tiers_n, 2);
	CHECK_STR(s->tiers[0].medium, "PMem");
	CHECK_EQ(s->tiers[0].quota_bp, 2000);
	CHECK_STR(s->tiers[1].medium, "NVMe");
	CHECK_EQ(s->tiers[1].quota_bp, 8000);
	CHECK(s->has_mesh);
	CHECK_EQ(s->transport, IOD_TRANSPORT_RDMA);
	iod_spec_free(s);

	/* media are matched without case and normalized; fractions of a percent */
	LOAD_OK("storage:\n  tiers:\n    - {medium: pmem, quota: 12.5%}\n"
	        "    - {medium: nvme, quota: 87.5%}\n"
	        "service_mesh: {transport: shm}\n",
	        &s);
	CHECK_STR(s->tiers[0].medium, "PMem");
	CHECK_EQ(s->tiers[0].quota_bp, 1250);
	CHECK_STR(s->tiers[1].medium, "NVMe");
	CHECK_EQ(s->transport, IOD_TRANSPORT_SHM);
	iod_spec_free(s);

	LOAD_OK("service_mesh: {}\n", &s);
	CHECK(s->has_mesh);
	CHECK_EQ(s->transport, IOD_TRANSPORT_TCP); /* the default */
	iod_spec_free(s);

	/* a volume alone: its copies are the checkpoints', in one NVMe tier */
	LOAD_OK("storage: {volume: {replicas: 3}}\n", &s);
	CHECK_EQ(s->storage_volume_replicas, 3);
	CHECK_EQ(s->storage_replicas, 3);
	CHECK_EQ(s->tiers_n, 1);
	CHECK_STR(s->tiers[0].medium, "NVMe");
	CHECK_EQ(s->tiers[0].quota_bp, 10000);
	json_t *j = iod_spec_to_json(s);
	CHECK_EQ(json_integer_value(json_object_get(
	             json_object_get(json_object_get(j, "storage"), "volume"), "replicas")),
	         3);
	json_decref(j);
	iod_spec_free(s);
	LOAD_OK(
	    "storage: {replicas: 2, volume: {replicas: 2}, tiers: [{medium: PMem, quota: 100%}]}\n",
	    &s);
	CHECK_EQ(s->storage_volume_replicas, 2);
	CHECK_STR(s->tiers[0].medium, "PMem");
	iod_spec_free(s);
}

TEST(document_markers_and_comments)
{
	struct iod_spec *s;
	LOAD_OK("# a comment\n---\nservice_mesh:\n  transport: tcp # inline\n...\n", &s);
	CHECK_EQ(s->transport, IOD_TRANSPORT_TCP);
	iod_spec_free(s);
}

TEST(json_is_normalized_and_deterministic)
{
	struct iod_spec *s, *s2;
	const char *text = "services:\n"
	                   "  - {name: ps, type: stateful, replicas: 3,\n"
	                   "     resources: {gpu: 1, mem: 32GB, network: {latency: <5us}}}\n"
	                   "storage: {tiers: [{medium: PMem, quota: 100%}]}\n";
	LOAD_OK(text, &s);
	LOAD_OK(text, &s2);
	json_t *j = iod_spec_to_json(s), *j2 = iod_spec_to_json(s2);
	char *a = iod_json_string(j, true), *b = iod_json_string(j2, true);
	CHECK_STR(a, b);
	CHECK_CONTAINS(a, "\"mem_bytes\":32000000000");
	CHECK_CONTAINS(a, "\"latency\":\"<5000ns\"");
	CHECK_CONTAINS(a, "\"quota_bp\":10000");
	CHECK_CONTAINS(a, "\"restart\":\"always\"");
	CHECK(strstr(a, "service_mesh") == NULL); /* absent parts are left out */
	CHECK(strstr(a, "\"health\"") == NULL);
	/* key order is fixed: name first, then type, then replicas */
	CHECK(strstr(a, "\"name\"") < strstr(a, "\"type\""));
	CHECK(strstr(a, "\"type\"") < strstr(a, "\"replicas\""));
	free(a);
	free(b);
	json_decref(j);
	json_decref(j2);
	iod_spec_free(s);
	iod_spec_free(s2);
}

TEST(load_file_and_missing_file)
{
	char path[512];
	struct iod_spec *s;
	snprintf(path, sizeof(path), "%s/t.yaml", iod_test_tmpdir());
	FILE *f = fopen(path, "w");
	CHECK(f);
	fputs("service_mesh: {transport: rdma}\n", f);
	fclose(f);
	CHECK_EQ(iod_spec_load_file(path, &s, &diags), 0);
	CHECK_STR(s->path, path);
	CHECK_EQ(s->transport, IOD_TRANSPORT_RDMA);
	iod_spec_free(s);

	snprintf(path, sizeof(path), "%s/none.yaml", iod_test_tmpdir());
	CHECK_EQ(iod_spec_load_file(path, &s, &diags), -ENOENT);
	CHECK(s == NULL);
	CHECK_EQ(diags.n, 1);
	CHECK_CONTAINS(diags.d[0].msg, "No such file");
}

/* Load FILE, render JSON, load that JSON as a spec, render again: equal. */
static void round_trip(const char *path)
{
	struct iod_spec *s, *again;
	int rc = iod_spec_load_file(path, &s, &diags);
	CHECK_MSG(rc == 0, "%s: %s", path, dump());
	json_t *j = iod_spec_to_json(s);
	char *a = iod_json_string(j, false);
	rc = load(a, &again);
	CHECK_MSG(rc == 0, "%s: JSON did not load: %s\n%s", path, dump(), a);
	json_t *j2 = iod_spec_to_json(again);
	char *b = iod_json_string(j2, false);
	CHECK_STR(a, b);
	/* and the structs agree where it matters to consumers */
	CHECK_EQ(s->services_n, again->services_n);
	for (uint32_t i = 0; i < s->services_n; i++) {
		CHECK_STR(s->services[i].name, again->services[i].name);
		CHECK_U64(s->services[i].res.mem_bytes, again->services[i].res.mem_bytes);
		CHECK_EQ(s->services[i].args_n, again->services[i].args_n);
		CHECK_U64(s->services[i].health.timeout_ns, again->services[i].health.timeout_ns);
	}
	CHECK_EQ(s->tiers_n, again->tiers_n);
	free(a);
	free(b);
	json_decref(j);
	json_decref(j2);
	iod_spec_free(s);
	iod_spec_free(again);
}

TEST(examples_round_trip_through_json)
{
	static const char *const ex[] = {"examples/service-topology.yaml",
	                                 "examples/resources.yaml", "examples/storage-tiers.yaml",
	                                 "examples/full-topology.yaml"};
	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
		round_trip(ex[i]);
		if (iod_test_failed())
			return;
	}
}

TEST(example_service_topology_is_the_seed)
{
	struct iod_spec *s;
	CHECK_EQ(iod_spec_load_file("examples/service-topology.yaml", &s, &diags), 0);
	CHECK_EQ(s->services_n, 2);
	const struct iod_spec_service *ps = iod_spec_find_service(s, "parameter-server");
	const struct iod_spec_service *w = iod_spec_find_service(s, "worker-node");
	CHECK(ps && w);
	CHECK_EQ(ps->type, IOD_SERVICE_STATEFUL);
	CHECK_EQ(ps->res.gpu, 1);
	CHECK_U64(ps->res.mem_bytes, 32000000000ull);
	CHECK_EQ(ps->replicas, 3);
	CHECK_EQ(w->type, IOD_SERVICE_STATELESS);
	CHECK_EQ(w->res.gpu, 4);
	CHECK_U64(w->res.mem_bytes, 128000000000ull);
	CHECK_EQ(w->replicas, 8);
	CHECK_STR(w->command, "iod");
	CHECK_STR(w->args[0], "demo-worker");
	iod_spec_free(s);

	CHECK_EQ(iod_spec_load_file("examples/full-topology.yaml", &s, &diags), 0);
	CHECK_EQ(s->services_n, 4);
	CHECK(s->has_resources && s->has_mesh && s->tiers_n == 3);
	iod_spec_free(s);
}

TEST(base_unit_keys_are_accepted)
{
	struct iod_spec *s;
	LOAD_OK("services:\n"
	        "  - name: a\n"
	        "    type: stateless\n"
	        "    resources: {cpu_millis: 1500, mem_bytes: 1024, gpu_mem_bytes: 2048,\n"
	        "                compute: {type: fpga, count: 1, memory_bytes: 4096},\n"
	        "                network: {bandwidth_bps: 1000, latency: \"<=5000ns\"}}\n"
	        "    health: {exec: \"true\", interval_ns: 2000000, timeout_ns: 1000000}\n"
	        "    placement: {strategy: default}\n"
	        "    args: []\n"
	        "storage: {tiers: [{medium: SSD, quota_bp: 2500}, {medium: HDD, quota: 75%}]}\n",
	        &s);
	const struct iod_spec_service *a = &s->services[0];
	CHECK_EQ(a->res.cpu_millis, 1500);
	CHECK_U64(a->res.mem_bytes, 1024);
	CHECK_U64(a->res.gpu_mem_bytes, 2048);
	CHECK_U64(a->res.compute.mem_bytes, 4096);
	CHECK_U64(a->res.network.bandwidth_bps, 1000);
	CHECK_U64(a->health.interval_ns, 2000000);
	CHECK_U64(a->health.timeout_ns, 1000000);
	CHECK_EQ(a->placement.spread, IOD_SPREAD_DEFAULT);
	CHECK_EQ(s->tiers[0].quota_bp, 2500);
	iod_spec_free(s);
}

TEST(default_timeout_follows_a_short_interval)
{
	struct iod_spec *s;
	LOAD_OK("services: [{name: a, type: stateless, health: {tcp: 80, interval: 10ms}}]\n", &s);
	CHECK_U64(s->services[0].health.interval_ns, 10 * IOD_NS_PER_MS);
	CHECK_U64(s->services[0].health.timeout_ns, 10 * IOD_NS_PER_MS);
	iod_spec_free(s);
}

TEST(command_with_odd_program_round_trips)
{
	struct iod_spec *s, *again;
	LOAD_OK(
	    "services: [{name: a, type: stateless, command: [\"/opt/my app/run\", \"it's\"]}]\n",
	    &s);
	CHECK_STR(s->services[0].command, "/opt/my app/run");
	json_t *j = iod_spec_to_json(s);
	char *a = iod_json_string(j, true);
	CHECK_CONTAINS(a, "\"command\":[\"/opt/my app/run\"]");
	int rc = load(a, &again);
	free(a);
	json_decref(j);
	CHECK_MSG(rc == 0, "%s", dump());
	CHECK_STR(again->services[0].command, "/opt/my app/run");
	CHECK_STR(again->services[0].args[0], "it's");
	iod_spec_free(again);
	iod_spec_free(s);
}

TEST(health_flat_form)
{
	struct iod_spec *s;
	LOAD_OK("services:\n"
	        "  - {name: a, type: stateless, health: {kind: http, port: 8080, path: /ok}}\n"
	        "  - {name: b, type: stateless, health: {kind: tcp, port: 81}}\n"
	        "  - {name: c, type: stateless, health: {kind: exec, exec: \"true\"}}\n"
	        "  - {name: d, type: stateless, health: {kind: http, port: 80}}\n",
	        &s);
	CHECK_EQ(s->services[0].health.kind, IOD_HEALTH_HTTP);
	CHECK_EQ(s->services[0].health.port, 8080);
	CHECK_STR(s->services[0].health.path, "/ok");
	CHECK_EQ(s->services[1].health.kind, IOD_HEALTH_TCP);
	CHECK_EQ(s->services[1].health.port, 81);
	CHECK_EQ(s->services[2].health.kind, IOD_HEALTH_EXEC);
	CHECK_STR(s->services[2].health.command, "true");
	CHECK_STR(s->services[3].health.path, "/");
	/* -o json prints this form, with kind */
	json_t *j = iod_spec_to_json(s);
	char *a = iod_json_string(j, true);
	CHECK_CONTAINS(a, "\"health\":{\"kind\":\"http\",\"port\":8080,\"path\":\"/ok\",");
	CHECK_CONTAINS(a, "\"health\":{\"kind\":\"exec\",\"exec\":\"true\",");
	free(a);
	json_decref(j);
	iod_spec_free(s);
}

TEST(load_file_refuses_a_directory)
{
	struct iod_spec *s;
	CHECK_EQ(iod_spec_load_file(iod_test_tmpdir(), &s, &diags), -EISDIR);
	CHECK(s == NULL);
	CHECK_CONTAINS(diags.d[0].msg, "Is a directory");
}

/* placement.numa takes all four Topology Manager policies, under our short
 * names and Kubernetes' long ones, and prints the short names back. */
TEST(numa_policies_and_kubernetes_names)
{
	static const struct {
		const char *in;
		enum iod_numa_policy want;
		const char *out;
	} cases[] = {{"any", IOD_NUMA_ANY, "any"},
	             {"best-effort", IOD_NUMA_ANY, "any"},
	             {"single", IOD_NUMA_SINGLE, "single"},
	             {"single-numa-node", IOD_NUMA_SINGLE, "single"},
	             {"restricted", IOD_NUMA_RESTRICTED, "restricted"},
	             {"none", IOD_NUMA_NONE, "none"}};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(cases); i++) {
		char text[256], want[64];
		struct iod_spec *s;
		snprintf(text, sizeof(text),
		         "services:\n  - {name: a, type: stateless, placement: {numa: %s}}\n",
		         cases[i].in);
		LOAD_OK(text, &s);
		if (!s)
			continue;
		CHECK_EQ(s->services[0].placement.numa, cases[i].want);
		json_t *j = iod_spec_to_json(s);
		char *a = iod_json_string(j, true);
		snprintf(want, sizeof(want), "\"numa\":\"%s\"", cases[i].out);
		CHECK_CONTAINS(a, want);
		free(a);
		json_decref(j);
		iod_spec_free(s);
	}
	struct iod_spec *s = NULL;
	CHECK(load("services:\n  - {name: a, type: stateless, placement: {numa: nope}}\n", &s) !=
	      0);
	CHECK_CONTAINS(dump(), "placement.numa \"nope\" is not valid");
}

/* sandbox: every key, its normal form and the privilege it asks for. */
TEST(sandbox_block)
{
	struct iod_spec *s = NULL;
	struct iod_spec_diags d;
	const char *y = "services:\n"
	                "  - name: web\n    type: stateless\n    command: [sleep, '9']\n"
	                "    sandbox:\n      user: '1000:100'\n"
	                "      capabilities: [net_bind_service, CAP_SYS_PTRACE]\n"
	                "      network: none\n      best_effort: true\n"
	                "      seccomp:\n        defaultAction: SCMP_ACT_ERRNO\n"
	                "        syscalls:\n          - names: [read, write]\n"
	                "            action: SCMP_ACT_ALLOW\n"
	                "            args: [{index: 0, value: 1, op: SCMP_CMP_EQ}]\n"
	                "  - name: plain\n    type: stateless\n    command: [sleep, '9']\n"
	                "  - name: boss\n    type: stateless\n    command: [sleep, '9']\n"
	                "    sandbox: {user: root, seccomp: unconfined}\n";
	CHECK_MSG(iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d) == 0, "%s",
	          d.n ? d.d[0].msg : "?");
	const struct iod_spec_sandbox *sb = &s->services[0].sandbox;
	CHECK(sb->set);
	CHECK_EQ(sb->user, IOD_SPEC_USER_ID);
	CHECK_EQ(sb->uid, 1000);
	CHECK_EQ(sb->gid, 100);
	CHECK_U64(sb->caps, (1ull << 10) | (1ull << 19));
	CHECK_EQ(sb->network, IOD_SPEC_NET_NONE);
	CHECK(sb->best_effort);
	CHECK_EQ(sb->seccomp, IOD_SPEC_SECCOMP_PROFILE);
	CHECK_CONTAINS(sb->seccomp_profile, "\"defaultAction\":\"SCMP_ACT_ERRNO\"");
	CHECK_CONTAINS(sb->seccomp_profile, "\"index\":0"); /* a number, not "0" */
	/* defaults: the secure ones, and nothing privileged */
	const struct iod_spec_sandbox *pl = &s->services[1].sandbox;
	CHECK(!pl->set);
	CHECK_EQ(pl->user, IOD_SPEC_USER_DYNAMIC);
	CHECK_EQ(pl->seccomp, IOD_SPEC_SECCOMP_DEFAULT);
	CHECK_EQ(pl->network, IOD_SPEC_NET_AUTO);
	CHECK_U64(pl->caps, 0);
	char why[128];
	CHECK(!iod_spec_service_privileged(&s->services[1], why, sizeof(why)));
	CHECK(iod_spec_service_privileged(&s->services[0], why, sizeof(why)));
	CHECK_CONTAINS(why, "NET_BIND_SERVICE,SYS_PTRACE");
	CHECK(iod_spec_service_privileged(&s->services[2], why, sizeof(why)));
	CHECK_STR(why, "runs as root, runs without seccomp");
	/* the normal form loads to the same thing */
	json_t *j = iod_spec_to_json(s);
	char *text = json_dumps(j, JSON_COMPACT);
	CHECK_CONTAINS(text, "\"sandbox\":{\"user\":\"1000:100\",\"capabilities\":"
	                     "[\"NET_BIND_SERVICE\",\"SYS_PTRACE\"],\"seccomp\":{");
	CHECK_CONTAINS(text, "\"network\":\"none\",\"best_effort\":true}");
	CHECK(!strstr(strstr(text, "\"plain\""), "\"sandbox\"") ||
	      strstr(strstr(text, "\"plain\""), "\"sandbox\"") > strstr(text, "\"boss\""));
	struct iod_spec *s2 = NULL;
	CHECK_EQ(iod_spec_load_buffer("t.json", text, strlen(text), &s2, &d), 0);
	CHECK_STR(s2->services[0].sandbox.seccomp_profile, sb->seccomp_profile);
	CHECK_EQ(s2->services[2].sandbox.user, IOD_SPEC_USER_ROOT);
	free(text);
	json_decref(j);
	iod_spec_free(s2);
	iod_spec_free(s);
}

TEST(sandbox_errors)
{
	struct iod_spec *s = NULL;
	struct iod_spec_diags d;
	const char *bad[] = {
	    "user: nobody",
	    "user: '-5'",
	    "user: '1:x'",
	    "user: 4294967295",
	    "capabilities: [CAP_FLY]",
	    "capabilities: [KILL, kill]",
	    "capabilities: KILL",
	    "network: bridge",
	    "best_effort: maybe",
	    "seccomp: strict",
	    "seccomp: {defaultAction: SCMP_ACT_NOTIFY}",
	    "seccomp: {defaultAction: SCMP_ACT_ERRNO, syscalls: [{names: [read]}]}",
	    "colour: red"};
	const char *want[] = {"sandbox.user",  "sandbox.user",    "sandbox.user", "sandbox.user",
	                      "CAP_FLY",       "twice",           "list",         "sandbox.network",
	                      "true or false", "sandbox.seccomp", "iod runs",     "action",
	                      "unknown key"};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		char y[512];
		snprintf(y, sizeof(y),
		         "services:\n  - name: w\n    type: stateless\n    command: true\n"
		         "    sandbox: {%s}\n",
		         bad[i]);
		/* flow form needs the inner mapping's braces balanced */
		if (strchr(bad[i], '{') || strchr(bad[i], '['))
			snprintf(y, sizeof(y),
			         "services:\n  - name: w\n    type: stateless\n    command: true\n"
			         "    sandbox:\n      %s\n",
			         bad[i]);
		int rc = iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d);
		CHECK_MSG(rc == -EINVAL, "case %u accepted", i);
		CHECK_MSG(d.n && strstr(d.d[0].msg, want[i]), "case %u: %s", i,
		          d.n ? d.d[0].msg : "?");
	}
}

TEST(secrets_are_names_only)
{
	struct iod_spec *s = NULL;
	struct iod_spec_diags d;
	const char *y = "services:\n  - name: w\n    type: stateless\n    command: true\n"
	                "    secrets: [db-password, tls-key]\n";
	CHECK_EQ(iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d), 0);
	CHECK_EQ(s->services[0].secrets_n, 2u);
	CHECK_STR(s->services[0].secrets[1], "tls-key");
	json_t *j = iod_spec_to_json(s);
	char *text = json_dumps(j, JSON_COMPACT);
	CHECK_CONTAINS(text, "\"secrets\":[\"db-password\",\"tls-key\"]");
	free(text);
	json_decref(j);
	iod_spec_free(s);
	/* a value in the spec, a bad name, a repeat, a mapping: refused with why */
	const char *bad[] = {"[{name: db, value: hunter2}]", "[../etc/passwd]", "[db, db]", "db"};
	const char *want[] = {"never its value", "secrets entry", "twice", "secrets"};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		char t[512];
		snprintf(t, sizeof(t),
		         "services:\n  - name: w\n    type: stateless\n    command: true\n"
		         "    secrets: %s\n",
		         bad[i]);
		CHECK_MSG(iod_spec_load_buffer("t.yaml", t, strlen(t), &s, &d) == -EINVAL,
		          "case %u accepted", i);
		CHECK_MSG(d.n && strstr(d.d[0].msg, want[i]), "case %u: %s", i,
		          d.n ? d.d[0].msg : "?");
	}
}

/* tenant: whose a service is (mesh policy default, identity, overlay network):
 * "default" when not written, a name, written out in the normalized JSON and
 * so carried into the Service object (issue 16 item 7). */
TEST(tenant_key)
{
	struct iod_spec *s = NULL;
	struct iod_spec_diags d;
	const char *y = "services:\n  - name: a\n    type: stateless\n    tenant: blue\n"
	                "  - name: b\n    type: stateless\n";
	CHECK_EQ(iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d), 0);
	CHECK_STR(s->services[0].tenant, "blue");
	CHECK_STR(s->services[1].tenant, "default");
	json_t *j = iod_spec_to_json(s);
	CHECK_STR(json_string_value(
	              json_object_get(json_array_get(json_object_get(j, "services"), 0), "tenant")),
	          "blue");
	CHECK_STR(json_string_value(
	              json_object_get(json_array_get(json_object_get(j, "services"), 1), "tenant")),
	          "default");
	/* the normalized JSON is a spec that loads to the same tenants */
	char *text = json_dumps(j, JSON_COMPACT);
	struct iod_spec *s2 = NULL;
	CHECK_EQ(iod_spec_load_buffer("t.json", text, strlen(text), &s2, &d), 0);
	CHECK_STR(s2->services[0].tenant, "blue");
	iod_spec_free(s2);
	free(text);
	json_decref(j);
	iod_spec_free(s);
	const char *bad[] = {"Blue", "\"\"", "[a]", "a/b", "-x"};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		char t[256];
		snprintf(t, sizeof(t),
		         "services:\n  - name: w\n    type: stateless\n    tenant: %s\n", bad[i]);
		CHECK_MSG(iod_spec_load_buffer("t.yaml", t, strlen(t), &s, &d) == -EINVAL,
		          "tenant %s accepted", bad[i]);
		CHECK_MSG(d.n && strstr(d.d[0].msg, "tenant"), "case %u: %s", i,
		          d.n ? d.d[0].msg : "?");
	}
}

/* service_mesh: {mode: l4 | l7} per service: kept, written out only when
 * named (older specs' JSON is unchanged), and loaded back from the JSON. */
TEST(service_mesh_mode_key)
{
	struct iod_spec *s = NULL;
	struct iod_spec_diags d;
	const char *y =
	    "services:\n  - name: a\n    type: stateless\n    service_mesh: {mode: l7}\n"
	    "  - name: b\n    type: stateless\n    service_mesh: {mode: l4}\n"
	    "  - name: c\n    type: stateless\n";
	CHECK_EQ(iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d), 0);
	CHECK(s->services[0].mesh_mode_set && s->services[0].mesh_mode == IOD_SPEC_MESH_L7);
	CHECK(s->services[1].mesh_mode_set && s->services[1].mesh_mode == IOD_SPEC_MESH_L4);
	CHECK(!s->services[2].mesh_mode_set && s->services[2].mesh_mode == IOD_SPEC_MESH_L4);
	json_t *j = iod_spec_to_json(s);
	json_t *sv = json_object_get(j, "services");
	CHECK_STR(json_string_value(json_object_get(
	              json_object_get(json_array_get(sv, 0), "service_mesh"), "mode")),
	          "l7");
	CHECK_STR(json_string_value(json_object_get(
	              json_object_get(json_array_get(sv, 1), "service_mesh"), "mode")),
	          "l4");
	CHECK(!json_object_get(json_array_get(sv, 2), "service_mesh"));
	char *text = json_dumps(j, JSON_COMPACT);
	struct iod_spec *s2 = NULL;
	CHECK_EQ(iod_spec_load_buffer("t.json", text, strlen(text), &s2, &d), 0);
	CHECK(s2->services[0].mesh_mode == IOD_SPEC_MESH_L7);
	iod_spec_free(s2);
	free(text);
	json_decref(j);
	iod_spec_free(s);
}

/* service_mesh.transport per service (issue 22 step 5): a service's own
 * wins, else the spec's top level, else nothing is written (the cluster's
 * iod config holds); the Service value carries it, and loads back the same. */
static const char *svc_transport(json_t *sv, size_t i)
{
	return json_string_value(
	    json_object_get(json_object_get(json_array_get(sv, i), "service_mesh"), "transport"));
}

TEST(service_mesh_transport_per_service)
{
	struct iod_spec *s = NULL;
	struct iod_spec_diags d;
	const char *y = "services:\n  - name: a\n    type: stateless\n"
	                "    service_mesh: {transport: tcp}\n"
	                "  - name: b\n    type: stateless\n    service_mesh: {mode: l7}\n";
	CHECK_EQ(iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d), 0);
	CHECK(s->services[0].transport_set && s->services[0].transport == IOD_TRANSPORT_TCP);
	CHECK(!s->services[1].transport_set);
	json_t *j = iod_spec_to_json(s);
	json_t *sv = json_object_get(j, "services");
	CHECK_STR(svc_transport(sv, 0), "tcp");
	CHECK(!svc_transport(sv, 1)); /* unset: the cluster's value */
	CHECK(!json_object_get(j, "service_mesh"));
	json_decref(j);
	iod_spec_free(s);

	/* the top level is the default of services that name none */
	y = "services:\n  - name: a\n    type: stateless\n    service_mesh: {transport: tcp}\n"
	    "  - name: b\n    type: stateless\n"
	    "service_mesh: {transport: shm}\n";
	CHECK_EQ(iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d), 0);
	CHECK_EQ(s->services[0].transport, IOD_TRANSPORT_TCP);
	CHECK(s->services[1].transport_set && s->services[1].transport == IOD_TRANSPORT_SHM);
	j = iod_spec_to_json(s);
	sv = json_object_get(j, "services");
	CHECK_STR(svc_transport(sv, 0), "tcp");
	CHECK_STR(svc_transport(sv, 1), "shm");
	char *text = json_dumps(j, JSON_COMPACT);
	struct iod_spec *s2 = NULL;
	CHECK_EQ(iod_spec_load_buffer("t.json", text, strlen(text), &s2, &d), 0);
	CHECK_EQ(s2->services[0].transport, IOD_TRANSPORT_TCP);
	CHECK_EQ(s2->services[1].transport, IOD_TRANSPORT_SHM);
	iod_spec_free(s2);
	free(text);
	json_decref(j);
	iod_spec_free(s);

	/* an empty top-level block sets nothing: no service takes tcp from it */
	y = "services:\n  - name: a\n    type: stateless\nservice_mesh: {}\n";
	CHECK_EQ(iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d), 0);
	CHECK(!s->services[0].transport_set && !s->transport_set);
	iod_spec_free(s);

	/* a bad value is an error at the key */
	y = "services:\n  - name: a\n    type: stateless\n    service_mesh: {transport: udp}\n";
	CHECK(iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d) != 0);
	CHECK(d.n >= 1 && strstr(d.d[0].msg, "transport"));
}

/* security_groups: each group guards a service of the spec and takes its
 * tenant; rules become NetPolicy JSON (ports 80 a number, "8000-8100" a
 * string); iod_spec_sg_to_json is the NetPolicy object's value; the
 * normalized JSON loads again to the same groups; a file of groups alone
 * (what `iod policy apply` reads) loads, its tenant "default" unless written. */
TEST(security_groups)
{
	struct iod_spec *s = NULL;
	struct iod_spec_diags d;
	const char *y = "services:\n"
	                "  - {name: web, type: stateless, tenant: blue}\n"
	                "  - {name: cli, type: stateless, tenant: blue}\n"
	                "security_groups:\n"
	                "  - name: web-in\n"
	                "    service: web\n"
	                "    ingress:\n"
	                "      - {name: http, service: cli, protocol: tcp, ports: 80}\n"
	                "      - {name: ops, cidr: 10.9.0.0/16, protocol: udp, ports: 5000-5010}\n"
	                "      - {name: no-ssh, action: deny, protocol: tcp, ports: 22}\n"
	                "    egress:\n"
	                "      - {name: dns, protocol: udp, ports: 53}\n";
	CHECK_MSG(iod_spec_load_buffer("t.yaml", y, strlen(y), &s, &d) == 0, "%s",
	          d.n ? d.d[0].msg : "?");
	CHECK_EQ(s->sgs_n, 1);
	CHECK_STR(s->sgs[0].name, "web-in");
	CHECK_STR(s->sgs[0].service, "web");
	CHECK_STR(s->sgs[0].tenant, "blue");
	CHECK_EQ(s->sgs[0].line, 5);
	CHECK_EQ(json_array_size(s->sgs[0].ingress), 3);
	CHECK_EQ(json_array_size(s->sgs[0].egress), 1);
	json_t *v = iod_spec_sg_to_json(&s->sgs[0]);
	const json_t *r0 = json_array_get(json_object_get(v, "ingress"), 0),
	             *r1 = json_array_get(json_object_get(v, "ingress"), 1);
	CHECK_STR(json_string_value(json_object_get(v, "tenant")), "blue");
	CHECK_EQ(json_integer_value(json_object_get(r0, "ports")), 80);
	CHECK_STR(json_string_value(json_object_get(r0, "service")), "cli");
	CHECK_STR(json_string_value(json_object_get(r1, "ports")), "5000-5010");
	/* the object it becomes passes the objects' own checks */
	struct iod_obj_netpolicy p;
	struct iod_err e = {0};
	CHECK_EQ(iod_obj_netpolicy_from_json(v, &p, &e), 0);
	CHECK_MSG(iod_obj_netpolicy_check(&p, &e) == 0, "%s", e.msg);
	struct iod_obj_netpolicy_rule r;
	CHECK_EQ(iod_obj_netpolicy_rule_parse(json_array_get(p.ingress, 1), &r, &e), 0);
	CHECK(r.cidr_ip == 0x0a090000 && r.prefix_len == 16 && r.proto == 17 &&
	      r.port_min == 5000 && r.port_max == 5010 && !r.deny);
	CHECK_EQ(iod_obj_netpolicy_rule_parse(json_array_get(p.ingress, 2), &r, &e), 0);
	CHECK(r.deny && r.port_min == 22 && r.port_max == 22);
	iod_obj_netpolicy_free(&p);
	json_decref(v);
	json_t *j = iod_spec_to_json(s);
	char *text = json_dumps(j, JSON_COMPACT);
	struct iod_spec *s2 = NULL;
	CHECK_MSG(iod_spec_load_buffer("t.json", text, strlen(text), &s2, &d) == 0, "%s",
	          d.n ? d.d[0].msg : "?");
	CHECK_EQ(s2->sgs_n, 1);
	CHECK(json_equal(s2->sgs[0].ingress, s->sgs[0].ingress));
	CHECK(json_equal(s2->sgs[0].egress, s->sgs[0].egress));
	iod_spec_free(s2);
	free(text);
	json_decref(j);
	iod_spec_free(s);
	const char *alone = "security_groups:\n"
	                    "  - {name: g, service: db, ingress: [{name: a, service: web}]}\n";
	CHECK_EQ(iod_spec_load_buffer("t.yaml", alone, strlen(alone), &s, &d), 0);
	CHECK_EQ(s->services_n, 0);
	CHECK_STR(s->sgs[0].tenant, "default");
	iod_spec_free(s);
}
