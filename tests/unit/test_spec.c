/*
 * test_spec.c: the spec loader: every field and its default, the seed's
 * examples, and the normalized JSON. Error cases live in test_spec_errors.c.
 */
#include "harness.h"
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
	CHECK_CONTAINS(a, "\"latency_ns\":5000");
	CHECK_CONTAINS(a, "\"quota_bp\":10000");
	CHECK_CONTAINS(a, "\"restart\":\"always\"");
	CHECK_CONTAINS(a, "\"service_mesh\":null");
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
