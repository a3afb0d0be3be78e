/*
 * test_spec_errors.c: every way a spec can be wrong gives an error at the
 * exact line:col with a message that says what to do, and the spec is
 * rejected as a whole (out stays NULL). Limits are exercised at and past
 * their bound.
 */
#include "harness.h"
#include "iod/spec.h"

#include <stdlib.h>

static struct iod_spec_diags diags;

static const char *dump(void)
{
	static char b[16384];
	size_t off = 0;
	b[0] = 0;
	for (uint32_t i = 0; i < diags.n && off < sizeof(b); i++)
		off += (size_t)snprintf(b + off, sizeof(b) - off, "[%u:%u %s] ",
		                        (unsigned)diags.d[i].line, (unsigned)diags.d[i].col,
		                        diags.d[i].msg);
	return b;
}

static int load_len(const char *text, size_t len)
{
	struct iod_spec *s = (struct iod_spec *)1;
	int rc = iod_spec_load_buffer("t.yaml", text, len, &s, &diags);
	if (rc == 0)
		iod_spec_free(s);
	else if (s != NULL)
		return -9999; /* a rejected spec must not be handed out */
	return rc;
}

static int load(const char *text)
{
	return load_len(text, strlen(text));
}

static bool has(uint32_t line, uint32_t col, const char *frag)
{
	for (uint32_t i = 0; i < diags.n; i++)
		if (diags.d[i].line == line && diags.d[i].col == col &&
		    strstr(diags.d[i].msg, frag))
			return true;
	return false;
}

/* The spec is rejected and one diagnostic at line:col contains frag. */
#define CHECK_ERR(text, line, col, frag)                                                       \
	do {                                                                                   \
		int rc_ = load(text);                                                          \
		CHECK_MSG(rc_ == -EINVAL, "expected -EINVAL, got %d: %s", rc_, dump());        \
		CHECK_MSG(has(line, col, frag), "no \"%s\" at %d:%d; got %s", frag, line, col, \
		          dump());                                                             \
	} while (0)

#define SVC "services:\n  - name: a\n    type: stateless\n"

TEST(yaml_syntax_errors_have_positions)
{
	CHECK_ERR("services:\n  - name: a\n   type: x\n", 3, 4, "did not find expected '-'");
	CHECK_ERR("services: [{name: a\n", 2, 1, "YAML syntax error");
	CHECK_ERR("a: b: c\n", 1, 5, "mapping values are not allowed");
	CHECK_ERR("services:\n\t- name: a\n", 2, 1, "YAML syntax error");
	CHECK_ERR("services: \"abc\n", 2, 1, "unexpected end of stream");
	CHECK_EQ(diags.n, 1); /* one syntax error, no noise after it */
}

TEST(invalid_utf8_and_nul)
{
	CHECK_ERR("service_mesh:\n  transport: t\xff\n", 2, 15, "invalid text");
	CHECK_ERR("services:\n  - name: \"a\\0b\"\n    type: stateless\n", 2, 11, "NUL");
}

TEST(aliases_tags_and_documents)
{
	CHECK_ERR("x: &d {gpu: 1}\nservices:\n  - {name: a, type: stateless, resources: *d}\n", 3,
	          43, "aliases are not supported");
	CHECK_ERR("service_mesh: {transport: !!int 3}\n", 1, 27, "tag");
	CHECK_ERR("service_mesh: {transport: tcp}\n---\nservice_mesh: {transport: shm}\n", 2, 1,
	          "one YAML document");
	/* an anchor nobody refers to is harmless, and !!str is a plain string */
	CHECK_EQ(load("service_mesh: &m {transport: !!str tcp}\n"), 0);
}

TEST(empty_and_wrong_shaped_files)
{
	CHECK_ERR("", 1, 1, "the spec is empty");
	CHECK_ERR("# only a comment\n", 1, 1, "the spec is empty");
	CHECK_ERR("~\n", 1, 1, "the spec is empty");
	CHECK_ERR("- a\n- b\n", 1, 1, "the spec must be a mapping");
	CHECK_ERR("hello\n", 1, 1, "the spec must be a mapping");
	CHECK_ERR("{}\n", 1, 1, "none of services:");
}

TEST(unknown_keys_suggest)
{
	CHECK_ERR("servics: []\n", 1, 1,
	          "unknown key \"servics\" in the spec; did you mean \"services\"?");
	CHECK_ERR(SVC "    replica: 3\n", 4, 5,
	          "service \"a\": unknown key \"replica\"; did you mean \"replicas\"?");
	CHECK_ERR(SVC "    resources: {gpus: 1}\n", 4, 17, "did you mean \"gpu\"?");
	CHECK_ERR(SVC "    placement: {stratgy: pack}\n", 4, 17, "did you mean \"strategy\"?");
	CHECK_ERR(SVC "    health: {tcp: 80, intervall: 1s}\n", 4, 23,
	          "did you mean \"interval\"?");
	CHECK_ERR(SVC "    network: {bandwith: 1Gbps}\n", 4, 15, "did you mean \"bandwidth\"?");
	CHECK_ERR("resources: {compute: {type: fpga, cnt: 1}}\n", 1, 35, "did you mean \"count\"?");
	CHECK_ERR("storage: {tiers: [{medium: HDD, qota: 100%}]}\n", 1, 33,
	          "did you mean \"quota\"?");
	CHECK_ERR("service_mesh: {transprt: tcp}\n", 1, 16, "did you mean \"transport\"?");
	/* no close match: the valid keys are listed */
	CHECK_ERR(SVC "    zzz: 1\n", 4, 5, "valid keys: name, type, replicas");
	/* top-level resources is the unified form only */
	CHECK_ERR("resources: {gpu: 1}\n", 1, 13, "valid keys: compute, network");
}

TEST(duplicate_keys)
{
	CHECK_ERR(SVC "    replicas: 1\n    replicas: 2\n", 5, 5,
	          "duplicate key \"replicas\" (first written at line 4)");
	CHECK_ERR("service_mesh: {transport: tcp, transport: shm}\n", 1, 32,
	          "duplicate key \"transport\" in service_mesh");
}

TEST(wrong_types)
{
	CHECK_ERR("services: {name: a}\n", 1, 11, "services must be a list");
	CHECK_ERR("services:\n  - just-a-name\n", 2, 5, "must be a mapping");
	CHECK_ERR(SVC "    resources: 4\n", 4, 16,
	          "resources must be a mapping (key: value), not 4");
	CHECK_ERR(SVC "    replicas: [3]\n", 4, 15, "replicas must be a whole number, not a list");
	CHECK_ERR(SVC "    replicas: \"3\"\n", 4, 15, "not the quoted string \"3\"");
	CHECK_ERR(SVC "    replicas:\n", 4, 14, "replicas has no value");
	CHECK_ERR("services:\n  - name: {x: 1}\n    type: stateless\n", 2, 11,
	          "name must be a string, not a mapping");
	CHECK_ERR(SVC "    gang: yes\n", 4, 11, "gang must be true or false, not yes");
	CHECK_ERR(SVC "    gang: \"true\"\n", 4, 11, "gang must be true or false");
	CHECK_ERR(SVC "    env: [A=1]\n", 4, 10, "env must be a mapping of NAME: value");
	CHECK_ERR(SVC "    ports: \"80\"\n", 4, 12, "ports must be a list");
	CHECK_ERR(SVC "    depends_on: b\n", 4, 17, "depends_on must be a list");
	CHECK_ERR(SVC "    args: --x\n", 4, 11, "args must be a list");
	CHECK_ERR("services:\n  - name: a\n    type: [stateful]\n", 3, 11,
	          "type must be a name, not a list");
	CHECK_ERR("storage: {tiers: {medium: HDD}}\n", 1, 18, "storage.tiers must be a list");
	CHECK_ERR("service_mesh: rdma\n", 1, 15, "service_mesh must be a mapping");
	CHECK_ERR("services:\n  - {[a]: 1}\n", 2, 6, "keys in the service must be plain names");
}

TEST(missing_required_fields)
{
	CHECK_ERR("services:\n  - type: stateless\n", 2, 5, "service needs a name");
	CHECK_ERR("services:\n  - name: a\n", 2, 5, "service \"a\": service needs a type");
	CHECK_ERR("resources: {compute: {count: 2}}\n", 1, 22, "needs a type");
	CHECK_ERR("storage: {tiers: [{quota: 100%}]}\n", 1, 19, "needs a medium");
	CHECK_ERR("storage: {tiers: [{medium: NVMe}]}\n", 1, 19, "needs a quota");
	CHECK_ERR("storage: {}\n", 1, 10, "storage needs tiers");
	CHECK_ERR(SVC "    ports: [{name: web}]\n", 4, 13, "ports entry needs a port");
	CHECK_ERR(SVC "    health: {interval: 1s}\n", 4, 13, "health needs one check");
	CHECK_ERR(SVC "    health: {http: {path: /x}}\n", 4, 20, "health.http needs a port");
}

TEST(enums_suggest)
{
	CHECK_ERR(SVC "    service_mesh: {mode: l8}\n", 4, 26,
	          "service \"a\": service_mesh.mode \"l8\" is not valid; did you mean");
	CHECK_ERR(SVC "    service_mesh: {mode: http}\n", 4, 26, "use l4 or l7");
	CHECK_ERR(SVC "    service_mesh: {}\n", 4, 19,
	          "service_mesh needs a mode: l4 (the VIP balanced in the node's virtual switch) "
	          "or l7 (through the node's mesh proxy)");
	/* a service's own transport (issue 22): known, and checked */
	CHECK_ERR(SVC "    service_mesh: {mode: l7, transprt: tcp}\n", 4, 30,
	          "unknown key \"transprt\" in service_mesh; did you mean \"transport\"?");
	CHECK_ERR(SVC "    service_mesh: {mode: l7, transport: tcpp}\n", 4, 41,
	          "service_mesh.transport \"tcpp\" is not valid; did you mean \"tcp\"?");
	CHECK_ERR(SVC "    service_mesh: l7\n", 4, 19, "service_mesh must be a mapping");
	CHECK_ERR(SVC "    restart: on_failure\n", 4, 14, "did you mean \"on-failure\"?");
	CHECK_ERR("services:\n  - {name: a, type: statefull}\n", 2, 21,
	          "did you mean \"stateful\"?");
	CHECK_ERR(SVC "    placement: {gpu_link: nvlnk}\n", 4, 27, "did you mean \"nvlink\"?");
	CHECK_ERR(SVC "    placement: {numa: multi}\n", 4, 23,
	          "use any, single, none, restricted, best-effort or single-numa-node");
	CHECK_ERR(SVC "    placement: {anti_affinity: host}\n", 4, 32, "node, rack or zone");
	CHECK_ERR(SVC "    placement: {strategy: balanced}\n", 4, 27,
	          "use default, spread or pack");
	CHECK_ERR("resources: {compute: {type: gpu}}\n", 1, 29,
	          "tensor-core, cuda-core, fpga, dpu or cpu");
	CHECK_ERR("service_mesh: {transport: rdm}\n", 1, 27, "did you mean \"rdma\"?");
	CHECK_ERR(SVC "    ports: [{port: 1, protocol: sctp}]\n", 4, 33, "one of tcp or udp");
}

TEST(replica_counts)
{
	CHECK_ERR(SVC "    replicas: -1\n", 4, 15, "replicas must not be negative (got -1)");
	CHECK_ERR(SVC "    replicas: 2.5\n", 4, 15, "replicas must be a whole number (got 2.5)");
	CHECK_ERR(SVC "    replicas: 3001\n", 4, 15,
	          "replicas is 3001; the most is 3000 (IOD_SPEC_REPLICAS_MAX)");
	CHECK_ERR(SVC "    replicas: 99999999999999999999999\n", 4, 15, "the most is 3000");
	CHECK_ERR(SVC "    replicas: many\n", 4, 15,
	          "replicas must be a whole number, not \"many\"");
	CHECK_ERR(SVC "    replicas: 1e3\n", 4, 15, "whole number (got 1e3)");
	CHECK_EQ(load(SVC "    replicas: 3000\n"), 0); /* the bound itself is fine */
}

TEST(bad_units)
{
	CHECK_ERR(SVC "    resources: {mem: 32XB}\n", 4, 22,
	          "resources.mem: size \"32XB\": unknown unit \"XB\"");
	CHECK_ERR(SVC "    resources: {mem: -1GB}\n", 4, 22, "negative");
	CHECK_ERR(SVC "    resources: {gpu_mem: lots}\n", 4, 26, "has no number");
	CHECK_ERR(SVC "    network: {bandwidth: 100}\n", 4, 26,
	          "network.bandwidth: bandwidth \"100\" has no unit");
	CHECK_ERR(SVC "    network: {bandwidth: <10Gbps}\n", 4, 26, "is a minimum");
	CHECK_ERR(SVC "    network: {latency: \">5us\"}\n", 4, 24, "is a maximum");
	CHECK_ERR(SVC "    network: {latency: 5}\n", 4, 24, "has no unit");
	CHECK_ERR(SVC "    health: {tcp: 1, interval: 30}\n", 4, 32,
	          "health.interval: duration \"30\" has no unit");
	CHECK_ERR(SVC "    health: {tcp: 1, interval: 3M}\n", 4, 32, "unknown unit");
	CHECK_ERR("storage: {tiers: [{medium: HDD, quota: 100}]}\n", 1, 40, "must end in %");
	CHECK_ERR("storage: {tiers: [{medium: HDD, quota: 120%}]}\n", 1, 40, "above 100%");
	CHECK_ERR("resources: {compute: {type: dpu, memory: 1.5B}}\n", 1, 42, "whole number");
	CHECK_ERR(SVC "    resources: {mem: 99999999999PB}\n", 4, 22, "too large");
}

TEST(cpu_values)
{
	CHECK_ERR(SVC "    cpu: -1\n", 4, 10, "cpu must not be negative");
	CHECK_ERR(SVC "    cpu: \"-500m\"\n", 4, 10, "cpu must not be negative");
	CHECK_ERR(SVC "    cpu: lots\n", 4, 10, "millicores like \"500m\"");
	CHECK_ERR(SVC "    cpu: 0.0001\n", 4, 10, "finer than a thousandth");
	CHECK_ERR(SVC "    cpu: 1.5m\n", 4, 10, "millicores");
	CHECK_ERR(SVC "    cpu: 1025\n", 4, 10, "the most is 1024 cores");
	CHECK_ERR(SVC "    cpu: 99999999999999\n", 4, 10, "the most is 1024 cores");
	CHECK_ERR(SVC "    resources: {gpu: 1025}\n", 4, 22,
	          "the most is 1024 (IOD_SPEC_UNITS_MAX)");
}

TEST(conflicting_forms)
{
	CHECK_ERR(SVC "    resources: {gpu: 2, compute: {type: tensor-core, count: 4}}\n", 4, 22,
	          "resources.gpu (2) and resources.compute.count (4) disagree");
	CHECK_ERR(SVC "    resources: {gpu_mem: 1GB, compute: {type: cuda-core, memory: 2GB}}\n", 4,
	          26, "disagree");
	CHECK_ERR(SVC "    resources: {cpu: 1, compute: {type: cpu, count: 2}}\n", 4, 22,
	          "disagree");
	CHECK_ERR(SVC "    resources: {cpu: 1}\n    cpu: 1\n", 5, 5,
	          "cpu is also set in resources");
	CHECK_ERR(SVC
	          "    resources: {network: {bandwidth: 1Gbps}}\n    network: {bandwidth: 1Gbps}\n",
	          5, 5, "network is also set in resources");
	/* agreeing forms are fine */
	CHECK_EQ(load(SVC "    resources: {gpu: 4, compute: {type: tensor-core, count: 4}}\n"), 0);
}

TEST(names)
{
	CHECK_ERR("services:\n  - {name: Worker, type: stateless}\n", 2, 12, "is not a valid name");
	CHECK_ERR("services:\n  - {name: my_svc, type: stateless}\n", 2, 12, "lowercase letters");
	CHECK_ERR("services:\n  - {name: -a, type: stateless}\n", 2, 12, "is not a valid name");
	CHECK_ERR("services:\n  - {name: \"\", type: stateless}\n", 2, 12, "is not a valid name");
	char text[256];
	snprintf(text, sizeof(text), "services:\n  - {name: %058d, type: stateless}\n", 0);
	CHECK_ERR(text, 2, 12, "1 to 57");
	snprintf(text, sizeof(text), "services:\n  - {name: %057d, type: stateless}\n", 0);
	CHECK_EQ(load(text), 0);
}

TEST(duplicate_service_names_point_at_both)
{
	CHECK_ERR("services:\n"
	          "  - name: a\n"
	          "    type: stateless\n"
	          "  - name: a\n"
	          "    type: stateful\n",
	          4, 11, "duplicate service name \"a\": first declared at t.yaml:2:11");
}

TEST(depends_on_errors)
{
	const char *cyc = "services:\n"
	                  "  - {name: a, type: stateless, depends_on: [b]}\n"
	                  "  - {name: b, type: stateless, depends_on: [c]}\n"
	                  "  - {name: c, type: stateless, depends_on: [a]}\n";
	CHECK_ERR(cyc, 4, 45, "depends_on cycle: a -> b -> c -> a");
	CHECK_EQ(diags.total, 1); /* one cycle, reported once */
	CHECK_ERR("services:\n  - {name: a, type: stateless, depends_on: [a]}\n", 2, 45,
	          "service \"a\" depends on itself");
	CHECK_ERR("services:\n"
	          "  - {name: worker, type: stateless, depends_on: [parameter-sever]}\n"
	          "  - {name: parameter-server, type: stateful}\n",
	          2, 50,
	          "depends_on \"parameter-sever\": no such service; did you mean "
	          "\"parameter-server\"?");
	CHECK_ERR("services:\n  - {name: a, type: stateless, depends_on: [zzz]}\n", 2, 45,
	          "no such service in this file");
	CHECK_ERR("services:\n"
	          "  - {name: a, type: stateless, depends_on: [b, b]}\n"
	          "  - {name: b, type: stateless}\n",
	          2, 48, "lists \"b\" twice");
	/* a diamond is not a cycle */
	CHECK_EQ(load("services:\n"
	              "  - {name: a, type: stateless, depends_on: [b, c]}\n"
	              "  - {name: b, type: stateless, depends_on: [d]}\n"
	              "  - {name: c, type: stateless, depends_on: [d]}\n"
	              "  - {name: d, type: stateless}\n"),
	         0);
}

TEST(env_ports_command_errors)
{
	CHECK_ERR(SVC "    env: {1A: x}\n", 4, 11, "env name 1A is not valid");
	CHECK_ERR(SVC "    env: {A: x, A: y}\n", 4, 17, "env A is set twice");
	CHECK_ERR(SVC "    env: {A: }\n", 4, 14, "env A has no value");
	CHECK_ERR(SVC "    ports: [0]\n", 4, 13, "between 1 and 65535, not 0");
	CHECK_ERR(SVC "    ports: [70000]\n", 4, 13, "the most is 65535");
	CHECK_ERR(SVC "    ports: [80, 80]\n", 4, 17, "port 80/tcp is listed twice");
	CHECK_EQ(load(SVC "    ports: [80, {port: 80, protocol: udp}]\n"), 0);
	CHECK_ERR(SVC "    ports: [{name: m, port: 1}, {name: m, port: 2}]\n", 4, 33,
	          "port name \"m\" is used twice");
	CHECK_ERR(SVC "    command: echo \"hi\"\n", 4, 14, "use the list form");
	CHECK_ERR(SVC "    command: []\n", 4, 14, "empty list");
	CHECK_ERR(SVC "    command: \"  \"\n", 4, 14, "command is empty");
	CHECK_ERR(SVC "    args: [x]\n", 4, 5, "args without a command");
}

TEST(health_errors)
{
	CHECK_ERR(SVC "    health: {tcp: 1, exec: x}\n", 4, 13, "exactly one of exec, tcp or http");
	CHECK_ERR(SVC "    health: {tcp: 1, interval: 1s, timeout: 2s}\n", 4, 45,
	          "health.timeout 2s is longer than health.interval");
	CHECK_ERR(SVC "    health: {tcp: 1, timeout: 0s}\n", 4, 31, "above 0");
	CHECK_ERR(SVC "    health: {tcp: 1, interval: 100us}\n", 4, 32, "outside 1ms..1h");
	CHECK_ERR(SVC "    health: {tcp: 1, interval: 2h}\n", 4, 32, "outside 1ms..1h");
	CHECK_ERR(SVC "    health: {tcp: 1, healthy_threshold: 0}\n", 4, 41, "at least 1");
	CHECK_ERR(SVC "    health: {tcp: 1, unhealthy_threshold: 101}\n", 4, 43,
	          "the most is 100 (IOD_SPEC_THRESHOLD_MAX)");
	CHECK_ERR(SVC "    health: {http: {port: 80, path: healthz}}\n", 4, 37,
	          "must start with '/'");
	CHECK_ERR(SVC "    health: {tcp: {port: 80, path: /x}}\n", 4, 30, "valid keys: port");
}

TEST(storage_errors)
{
	CHECK_ERR("storage:\n  tiers:\n    - {medium: PMem, quota: 20%}\n"
	          "    - {medium: NVMe, quota: 70%}\n",
	          3, 5, "quotas add up to 90.00%; they must add up to 100%");
	CHECK_ERR("storage: {tiers: [{medium: NVMf, quota: 100%}]}\n", 1, 28,
	          "did you mean \"NVMe\"?");
	CHECK_ERR("storage: {tiers: [{medium: tape, quota: 100%}]}\n", 1, 28,
	          "use DRAM, PMem, NVMe, SSD, HDD or object");
	CHECK_ERR("storage: {tiers: [{medium: HDD, quota: 50%}, {medium: hdd, quota: 50%}]}\n", 1,
	          55, "storage medium HDD is listed twice");
	CHECK_ERR("storage: {tiers: [{medium: HDD, quota: 0%}, {medium: SSD, quota: 100%}]}\n", 1,
	          40, "above 0%");
	CHECK_ERR("storage: {tiers: []}\n", 1, 18, "storage.tiers is empty");
	CHECK_ERR("storage: {tiers: [{medium: PMem, quota: 30%}, {medium: NVMe, quota: 80%}]}\n", 1,
	          18, "quotas add up to 110.00%; they must add up to 100%");
	CHECK_ERR("storage: {replicas: 8, tiers: [{medium: NVMe, quota: 100%}]}\n", 1, 21,
	          "the most is 7 (IOD_STOR_REPLICAS_MAX)");
	CHECK_ERR("storage: {replicas: 0, tiers: [{medium: NVMe, quota: 100%}]}\n", 1, 21,
	          "storage.replicas must be at least 1");
	CHECK_ERR("storage: {replica: 3, tiers: [{medium: NVMe, quota: 100%}]}\n", 1, 11,
	          "did you mean \"replicas\"");
	CHECK_ERR("storage: {tiers: [{medium: HDD, quota: 1%}, {medium: HDD, quota: 1%}, {medium: "
	          "HDD, quota: 1%}, {medium: HDD, quota: 1%}, {medium: HDD, quota: 1%}, {medium: "
	          "HDD, quota: 1%}, {medium: HDD, quota: 1%}, {medium: HDD, quota: 1%}, {medium: "
	          "HDD, quota: 1%}]}\n",
	          1, 18, "the most is 8 (IOD_SPEC_TIERS_MAX)");
	/* volumes: replicas 1..7, the checkpoint's own copies, nothing else */
	CHECK_ERR("storage: {volume: {replicas: 0}}\n", 1, 30,
	          "storage.volume.replicas must be at least 1");
	CHECK_ERR("storage: {volume: {replicas: 9}}\n", 1, 30,
	          "the most is 7 (IOD_STOR_REPLICAS_MAX)");
	CHECK_ERR("storage: {volume: {}}\n", 1, 19, "storage.volume needs replicas");
	CHECK_ERR("storage: {volume: {replicas: 3, size: 1GiB}}\n", 1, 33, "size");
	CHECK_ERR("storage: {replicas: 2, volume: {replicas: 3}}\n", 1, 43,
	          "storage.volume.replicas is 3 and storage.replicas is 2");
	CHECK_ERR("storage: {volume: 3}\n", 1, 19, "storage.volume");
}

TEST(services_list_limits)
{
	CHECK_ERR("services: []\n", 1, 11, "services is an empty list");
	struct iod_buf b;
	iod_buf_init(&b);
	iod_buf_printf(&b, "services:\n");
	for (int i = 0; i <= IOD_SPEC_SERVICES_MAX; i++)
		iod_buf_printf(&b, "  - {name: s%d, type: stateless}\n", i);
	CHECK_ERR(b.data, 2, 3, "services has 257 entries; the most is 256");
	iod_buf_free(&b);
}

TEST(list_limits)
{
	struct iod_buf b;
	iod_buf_init(&b);
	iod_buf_printf(&b, SVC "    args: [");
	for (int i = 0; i <= IOD_SPEC_LIST_MAX; i++)
		iod_buf_printf(&b, "%sa%d", i ? ", " : "", i);
	iod_buf_printf(&b, "]\n    command: x\n");
	CHECK_ERR(b.data, 4, 11, "args has 65 entries; the most is 64 (IOD_SPEC_LIST_MAX)");
	iod_buf_free(&b);

	char big[IOD_SPEC_STRING_MAX + 64];
	snprintf(big, sizeof(big), SVC "    env: {A: %0*d}\n", IOD_SPEC_STRING_MAX + 1, 0);
	CHECK_ERR(big, 4, 14, "the most is 4096 (IOD_SPEC_STRING_MAX)");
}

TEST(depth_nodes_and_size_limits)
{
	char deep[256];
	size_t n = 0;
	n += (size_t)snprintf(deep, sizeof(deep), "x: ");
	for (int i = 0; i < IOD_SPEC_DEPTH_MAX + 5; i++)
		deep[n++] = '[';
	deep[n] = 0;
	CHECK_ERR(deep, 1, 4 + IOD_SPEC_DEPTH_MAX - 1, "nesting is deeper than 32 levels");

	/* more nodes than IOD_SPEC_NODES_MAX, in a small file */
	size_t len = 16 + 2 * (size_t)(IOD_SPEC_NODES_MAX + 10);
	char *many = malloc(len);
	CHECK(many);
	size_t off = (size_t)snprintf(many, len, "x: [");
	for (int i = 0; i < IOD_SPEC_NODES_MAX + 2; i++) {
		many[off++] = '1';
		many[off++] = ',';
	}
	many[off++] = ']';
	many[off] = 0;
	int rc = load(many);
	free(many);
	CHECK_EQ(rc, -EINVAL);
	CHECK_CONTAINS(diags.d[0].msg, "IOD_SPEC_NODES_MAX");

	/* a buffer past IOD_SPEC_FILE_MAX is refused before parsing */
	char *huge = calloc(1, IOD_SPEC_FILE_MAX + 2);
	CHECK(huge);
	memset(huge, '#', IOD_SPEC_FILE_MAX + 1);
	rc = load_len(huge, IOD_SPEC_FILE_MAX + 1);
	free(huge);
	CHECK_EQ(rc, -EFBIG);
	CHECK_CONTAINS(diags.d[0].msg, "IOD_SPEC_FILE_MAX");
}

TEST(many_errors_in_one_pass_are_bounded)
{
	struct iod_buf b;
	iod_buf_init(&b);
	iod_buf_printf(&b, "services:\n");
	for (int i = 0; i < 30; i++)
		iod_buf_printf(&b, "  - {name: s%d, type: stateless, replicas: -%d}\n", i, i + 1);
	int rc = load(b.data);
	iod_buf_free(&b);
	CHECK_EQ(rc, -EINVAL);
	CHECK_EQ(diags.n, IOD_SPEC_ERRORS_MAX);
	CHECK_EQ(diags.total, 30);
	/* in file order */
	for (uint32_t i = 1; i < diags.n; i++)
		CHECK(diags.d[i].line > diags.d[i - 1].line);

	char *out = NULL;
	size_t outlen = 0;
	FILE *f = open_memstream(&out, &outlen);
	CHECK(f);
	iod_spec_diags_print(&diags, "x.yaml", f);
	fclose(f);
	static char text[IOD_SPEC_ERRORS_MAX * (IOD_ERR_MSG_MAX + 64)];
	snprintf(text, sizeof(text), "%s", out);
	free(out);
	CHECK_CONTAINS(text,
	               "x.yaml:2:43: service \"s0\": replicas must not be negative (got -1)\n");
	CHECK_CONTAINS(text, "x.yaml: 10 more errors not shown");
}

TEST(errors_in_every_section_in_one_pass)
{
	CHECK_ERR("services:\n"
	          "  - {name: a, type: stateles}\n"
	          "resources: {compute: {type: tpu}}\n"
	          "storage: {tiers: [{medium: HDD, quota: 50%}]}\n"
	          "service_mesh: {transport: udp}\n",
	          2, 21, "stateless");
	CHECK(has(3, 29, "tpu"));
	CHECK(has(4, 18, "add up to 50.00%"));
	CHECK(has(5, 27, "udp"));
	CHECK_EQ(diags.total, 4);
}

/* Found by fuzz_spec: an invalid name must not be kept, or the duplicate
 * check compares it and dereferences a position that was never recorded. */
TEST(regress_invalid_name_then_duplicate)
{
	CHECK_ERR("services:\n"
	          "  - {name: \"b:p\", type: stateless}\n"
	          "  - {name: \"b:p\", type: stateless}\n",
	          3, 12, "is not a valid name");
	CHECK_EQ(diags.total, 2); /* two bad names, no bogus duplicate */
}

TEST(base_unit_keys_conflict_and_bounds)
{
	CHECK_ERR(SVC "    resources: {mem: 1GB, mem_bytes: 1000000000}\n", 4, 38,
	          "resources.mem and resources.mem_bytes say the same thing");
	CHECK_ERR(SVC "    resources: {cpu: 1, cpu_millis: 1000}\n", 4, 37, "say the same thing");
	CHECK_ERR(SVC "    resources: {cpu_millis: 1024001}\n", 4, 29, "the most is 1024000");
	CHECK_ERR(SVC "    resources: {mem_bytes: 9223372036854775808}\n", 4, 28,
	          "the most is 9223372036854775807");
	CHECK_ERR(SVC "    resources: {mem: 10000PB}\n", 4, 22, "too large (the most is 2^63-1");
	CHECK_ERR(SVC "    network: {bandwidth: 1Gbps, bandwidth_bps: 1}\n", 4, 48,
	          "say the same thing");
	CHECK_ERR(SVC "    health: {tcp: 1, interval: 1s, interval_ns: 1000}\n", 4, 49,
	          "say the same thing");
	CHECK_ERR("storage: {tiers: [{medium: HDD, quota: 100%, quota_bp: 10000}]}\n", 1, 56,
	          "say the same thing");
	CHECK_ERR("storage: {tiers: [{medium: HDD, quota_bp: 0}]}\n", 1, 43, "above 0");
	CHECK_ERR(SVC "    command: [\"\"]\n", 4, 15, "empty program");
}

TEST(health_flat_form_errors)
{
	CHECK_ERR(SVC "    health: {kind: tcp, tcp: 80}\n", 4, 30, "say the same thing");
	CHECK_ERR(SVC "    health: {kind: grpc, port: 80}\n", 4, 20, "use exec, tcp or http");
	CHECK_ERR(SVC "    health: {kind: exec}\n", 4, 20, "kind exec needs exec: COMMAND");
	CHECK_ERR(SVC "    health: {kind: exec, exec: x, port: 1}\n", 4, 41,
	          "does not apply to kind exec");
	CHECK_ERR(SVC "    health: {kind: tcp}\n", 4, 20, "kind tcp needs port:");
	CHECK_ERR(SVC "    health: {kind: tcp, port: 1, path: /x}\n", 4, 40,
	          "applies to kind http only");
	CHECK_ERR(SVC "    health: {kind: http, port: 1, exec: x}\n", 4, 41,
	          "does not apply to kind http");
	CHECK_ERR(SVC "    health: {kind: http, port: 1, path: x}\n", 4, 41, "must start with '/'");
	CHECK_ERR(SVC "    health: {tcp: 1, port: 2}\n", 4, 28, "health.port without kind:");
}

TEST(messages_stay_valid_utf8)
{
	/* a long name of 2-byte characters is cut inside the message */
	struct iod_buf b;
	iod_buf_init(&b);
	iod_buf_printf(&b, "services:\n  - name: x"); /* odd: %.80s cuts a character */
	for (int i = 0; i < 100; i++)
		iod_buf_printf(&b, "\xc3\xa9");
	iod_buf_printf(&b, "\n    type: stateless\n");
	int rc = load(b.data);
	iod_buf_free(&b);
	CHECK_EQ(rc, -EINVAL);
	for (uint32_t i = 0; i < diags.n; i++) {
		json_t *m = json_string(diags.d[i].msg);
		CHECK_MSG(m != NULL, "not UTF-8: %s", diags.d[i].msg);
		json_decref(m);
	}
	CHECK_CONTAINS(diags.d[0].msg, "is not a valid name");
	CHECK_ERR(SVC "    health: {exec: \" \"}\n", 4, 20, "health.exec is empty");
}

/* The limits a node agent enforces are checked when the spec is validated,
 * each error naming its limit, so a deploy never reports "placed" for a
 * replica no agent can build. */
TEST(agent_limits_are_spec_errors)
{
	struct iod_buf b;
	/* argv over IOD_AGENT_ARGV_BYTES_MAX: 8 args of 4000 bytes */
	iod_buf_init(&b);
	iod_buf_printf(&b, SVC "    command: true\n    args: [");
	for (int i = 0; i < 8; i++)
		iod_buf_printf(&b, "%s%04000d", i ? ", " : "", i);
	iod_buf_printf(&b, "]\n");
	CHECK_ERR(b.data, 5, 11, "IOD_AGENT_ARGV_BYTES_MAX");
	iod_buf_free(&b);
	/* a health command longer than the agent runs */
	iod_buf_init(&b);
	iod_buf_printf(&b, SVC "    command: true\n    health: {exec: \"");
	for (int i = 0; i < 600; i++)
		iod_buf_printf(&b, "x");
	iod_buf_printf(&b, "\"}\n");
	CHECK_ERR(b.data, 5, 20, "IOD_AGENT_CMD_MAX");
	iod_buf_free(&b);
	/* 2000 replicas: IOD_PEERS of each would not fit the environment */
	CHECK_ERR(SVC "    replicas: 2000\n    command: true\n", 2, 11, "IOD_AGENT_ENV_BYTES_MAX");
	CHECK_ERR(SVC "    replicas: 2000\n    command: true\n", 2, 11, "IOD_PEERS");
	/* ... nor of a service that depends on them */
	CHECK_ERR("services:\n  - name: ps\n    type: stateless\n    replicas: 800\n"
	          "    command: true\n"
	          "  - name: qs\n    type: stateless\n    replicas: 700\n    command: true\n"
	          "  - name: u\n    type: stateless\n    command: true\n    depends_on: [qs, ps]\n",
	          10, 11, "the longest is ps with 800");
	/* without a command nothing runs: no environment, no limit */
	CHECK_EQ(load(SVC "    replicas: 3000\n"), 0);
	CHECK_EQ(load(SVC "    replicas: 1000\n    command: true\n"), 0);
}

/* security_groups: every rule error at its place, with what to write. */
TEST(security_group_errors)
{
#define SG SVC "security_groups:\n  - name: g\n    service: a\n    ingress:\n"
	CHECK_ERR(SG "      - {name: r, prot: tcp}\n", 8, 19, "did you mean \"protocol\"");
	CHECK_ERR(SG "      - {name: r, protocol: icmp, ports: 80}\n", 8, 42,
	          "\"ports\" need \"protocol\": tcp or udp");
	CHECK_ERR(SG "      - {name: r, protocol: tcp, ports: 90-80}\n", 8, 41, "LOW-HIGH");
	CHECK_ERR(SG "      - {name: r, protocol: sctp}\n", 8, 29, "tcp, udp, icmp or any");
	CHECK_ERR(SG "      - {name: r, cidr: 10.0.0.0/33}\n", 8, 25, "IPv4 CIDR");
	CHECK_ERR(SG "      - {name: r, cidr: 10.0.0.0/8, service: a}\n", 8, 25, "not both");
	CHECK_ERR(SG "      - {name: r, action: drop}\n", 8, 27, "allow or deny");
	CHECK_ERR(SG "      - {protocol: tcp}\n", 8, 9, "needs a name");
	CHECK_ERR(SG "      - {name: r}\n      - {name: r}\n", 9, 9, "used twice");
	CHECK_ERR(SG "      - {name: default-deny}\n", 8, 9, "choose another name");
	CHECK_ERR(SVC "security_groups:\n  - name: g\n    service: b\n    ingress: []\n", 6, 14,
	          "does not declare");
	CHECK_ERR(SVC "security_groups:\n  - name: g\n    service: a\n", 5, 5,
	          "no ingress: or egress:");
	CHECK_ERR(SVC "security_groups:\n  - name: g\n    service: a\n    tenant: red\n"
	              "    ingress: []\n",
	          7, 13, "tenant default's, not red's");
	CHECK_ERR(SVC "  - {name: b, type: stateless, tenant: red}\n"
	              "security_groups:\n  - name: g\n    service: a\n    ingress:\n"
	              "      - {name: r, service: b}\n",
	          9, 9, "peer service b is tenant red's");
	CHECK_ERR(SVC "security_groups:\n  - {name: g, service: a, egress: [{name: x}]}\n"
	              "  - {name: g, service: a, egress: [{name: y}]}\n",
	          6, 5, "security group name \"g\" is used twice");
	CHECK_ERR("security_groups: {name: g}\n", 1, 18, "must be a list");
	/* a service with errors (no name) is no group's (the fuzzer's find) */
	CHECK_ERR("services:\n  - {jame: a, type: stateless}\nsecurity_groups:\n"
	          "  - {name: g, service: a, ingress: [{name: r, service: a}]}\n",
	          2, 6, "unknown key");
#undef SG
}
