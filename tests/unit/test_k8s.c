/*
 * test_k8s.c: the pure halves of iod's Kubernetes/Slurm pieces (src/k8s/):
 * the CNI config parser's spec error codes, the result's shape per
 * cniVersion and its prevResult merge; Slurm hostlists; topology.yaml and
 * the Topograph labels of a modelled cluster against their expected text.
 */
#include "harness.h"
#include "iod/k8s.h"

#include <stdlib.h>
#include <string.h>

static int parse_code(const char *text, enum iod_cni_cmd cmd)
{
	struct iod_cni_conf c;
	struct iod_cni_error err = {0};
	int rc = iod_cni_conf_parse(text, strlen(text), cmd, &c, &err);
	iod_cni_conf_free(&c);
	return rc ? err.code : 0;
}

#define CONF(v, rest) "{\"cniVersion\":\"" v "\",\"name\":\"pods\",\"type\":\"iod\"" rest "}"
#define IPAM ",\"ipam\":{\"type\":\"iod\",\"subnet\":\"10.22.0.0/24\"}"

TEST(cni_config_errors_carry_the_spec_codes)
{
	CHECK_EQ(parse_code(CONF("1.1.0", IPAM), IOD_CNI_ADD), 0);
	CHECK_EQ(parse_code("{nope", IOD_CNI_ADD), IOD_CNI_E_DECODE);
	CHECK_EQ(parse_code("[1]", IOD_CNI_ADD), IOD_CNI_E_DECODE);
	CHECK_EQ(parse_code(CONF("9.9.9", IPAM), IOD_CNI_ADD), IOD_CNI_E_VERSION);
	CHECK_EQ(parse_code(CONF("1.0.0", IPAM), IOD_CNI_GC), IOD_CNI_E_VERSION);
	CHECK_EQ(parse_code(CONF("0.3.1", IPAM), IOD_CNI_CHECK), IOD_CNI_E_VERSION);
	CHECK_EQ(parse_code(CONF("1.1.0", ""), IOD_CNI_ADD), IOD_CNI_E_CONFIG);
	CHECK_EQ(parse_code(CONF("1.1.0", ",\"ipam\":{\"type\":\"host-local\",\"subnet\":\"x\"}"),
	                    IOD_CNI_ADD),
	         IOD_CNI_E_FIELD);
	CHECK_EQ(parse_code(CONF("1.1.0", IPAM ",\"mtu\":70000"), IOD_CNI_ADD), IOD_CNI_E_CONFIG);
	CHECK_EQ(parse_code(CONF("1.1.0", IPAM ",\"bridge\":\"a/b\""), IOD_CNI_ADD),
	         IOD_CNI_E_CONFIG);
	CHECK_EQ(parse_code("{\"cniVersion\":\"1.1.0\",\"name\":\"-x\"" IPAM "}", IOD_CNI_ADD),
	         IOD_CNI_E_CONFIG);
	/* VERSION answers whatever the runtime speaks */
	CHECK_EQ(parse_code("{\"cniVersion\":\"9.9.9\"}", IOD_CNI_VERSION), 0);
}

TEST(cni_env_needs_its_variables)
{
	struct iod_cni_error err = {0};
	struct iod_cni_env env = {
	    .cmd = IOD_CNI_ADD, .container_id = "abc", .netns = "/x", .ifname = "eth0"};
	CHECK_EQ(iod_cni_env_check(&env, &err), 0);
	env.ifname = "a/b";
	CHECK(iod_cni_env_check(&env, &err) && err.code == IOD_CNI_E_ENV);
	env.ifname = "eth0123456789012"; /* 16 bytes: the kernel takes 15 */
	CHECK(iod_cni_env_check(&env, &err) && err.code == IOD_CNI_E_ENV);
	env.ifname = "eth0";
	env.container_id = "a b";
	CHECK(iod_cni_env_check(&env, &err) && err.code == IOD_CNI_E_ENV);
	env.container_id = "abc";
	env.netns = NULL;
	CHECK(iod_cni_env_check(&env, &err) && err.code == IOD_CNI_E_ENV);
	env.cmd = IOD_CNI_DEL; /* DEL without a netns is fine */
	CHECK_EQ(iod_cni_env_check(&env, &err), 0);
	enum iod_cni_cmd cmd;
	CHECK(iod_cni_cmd_parse("ADDX", &cmd, &err) && err.code == IOD_CNI_E_ENV);
	CHECK(!iod_cni_cmd_parse("STATUS", &cmd, &err) && cmd == IOD_CNI_STATUS);
}

TEST(cni_result_follows_the_version_and_keeps_prev_result)
{
	struct iod_cni_conf c;
	struct iod_cni_error err = {0};
	struct iod_cni_attach a = {.bridge = "br0",
	                           .host_if = "iodc1",
	                           .ifname = "eth0",
	                           .sandbox = "/run/netns/p",
	                           .addr = 0x0a160002,
	                           .gateway = 0x0a160001,
	                           .prefix = 24};
	const char *old = CONF("0.3.1", IPAM);
	CHECK_EQ(iod_cni_conf_parse(old, strlen(old), IOD_CNI_ADD, &c, &err), 0);
	json_t *r = iod_cni_result(&c, &a);
	json_t *ip = json_array_get(json_object_get(r, "ips"), 0);
	CHECK_STR(json_string_value(json_object_get(ip, "version")), "4");
	CHECK_STR(json_string_value(json_object_get(ip, "address")), "10.22.0.2/24");
	CHECK_EQ(json_integer_value(json_object_get(ip, "interface")), 2);
	json_decref(r);
	iod_cni_conf_free(&c);
	const char *chained = CONF("1.1.0", IPAM ",\"prevResult\":{\"interfaces\":[{\"name\":"
	                                         "\"x\"}],\"ips\":[{\"address\":\"1.2.3.4/32\"}]}");
	CHECK_EQ(iod_cni_conf_parse(chained, strlen(chained), IOD_CNI_ADD, &c, &err), 0);
	r = iod_cni_result(&c, &a);
	CHECK_EQ(json_array_size(json_object_get(r, "interfaces")), 4);
	CHECK_EQ(json_array_size(json_object_get(r, "ips")), 2);
	ip = json_array_get(json_object_get(r, "ips"), 1);
	CHECK(!json_object_get(ip, "version"));
	CHECK_EQ(json_integer_value(json_object_get(ip, "interface")), 3);
	json_decref(r);
	iod_cni_conf_free(&c);
}

static void hostlist_is(const char *const *names, uint32_t n, const char *want)
{
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_slurm_hostlist(names, n, &b), 0);
	CHECK_STR(b.len ? b.data : "", want);
	iod_buf_free(&b);
}

TEST(slurm_hostlists_compress_runs)
{
	const char *a[] = {"n0", "n1", "n2", "n3", "n7"};
	hostlist_is(a, 5, "n[0-3,7]");
	const char *b[] = {"gpu01", "gpu02", "gpu03", "login", "n9", "n10", "n11"};
	hostlist_is(b, 7, "gpu[01-03],login,n9,n[10-11]");
	const char *c[] = {"rack0"};
	hostlist_is(c, 1, "rack0");
	const char *d[] = {"a1", "b2", "a2"};
	hostlist_is(d, 3, "a1,b2,a2");
}

static const char expected_yaml[] = "# Slurm topology.yaml from iod's cluster topology\n"
                                    "# (iod topo --cluster -o slurm; docs/kubernetes.md)\n"
                                    "---\n"
                                    "- topology: iod-tree\n"
                                    "  cluster_default: true\n"
                                    "  tree:\n"
                                    "    switches:\n"
                                    "      - switch: core\n"
                                    "        children: zone[0-1]\n"
                                    "      - switch: zone0\n"
                                    "        children: rack[0-1]\n"
                                    "      - switch: zone1\n"
                                    "        children: rack2\n"
                                    "      - switch: rack0\n"
                                    "        nodes: n[0-1]\n"
                                    "      - switch: rack1\n"
                                    "        nodes: n[2-3]\n"
                                    "      - switch: rack2\n"
                                    "        nodes: n4\n"
                                    "- topology: iod-block\n"
                                    "  block:\n"
                                    "    block_sizes:\n"
                                    "      - 1\n"
                                    "    blocks:\n"
                                    "      - block: rack0\n"
                                    "        nodes: n[0-1]\n"
                                    "      - block: rack1\n"
                                    "        nodes: n[2-3]\n"
                                    "      - block: rack2\n"
                                    "        nodes: n4\n";

TEST(slurm_topology_and_labels_of_a_modelled_cluster)
{
	static struct iod_topo_node dgx, pcie;
	struct iod_err e = {0};
	CHECK_EQ(iod_topo_model_load("dgx-h100", &dgx, &e), 0);
	CHECK_EQ(iod_topo_model_load("pcie-8gpu", &pcie, &e), 0);
	struct iod_k8s_node nodes[] = {
	    {"n0", "rack0", "zone0", &dgx}, {"n1", "rack0", "zone0", &pcie},
	    {"n2", "rack1", "zone0", &dgx}, {"n3", "rack1", "zone0", &pcie},
	    {"n4", "rack2", "zone1", &dgx},
	};
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_slurm_topology(nodes, 5, &b, &e), 0);
	CHECK_STR(b.data, expected_yaml);
	iod_buf_free(&b);

	json_t *l = iod_k8s_labels(nodes, 5);
	json_t *n0 = json_object_get(l, "n0"), *n1 = json_object_get(l, "n1");
	CHECK_STR(json_string_value(json_object_get(n0, IOD_K8S_LABEL_ACCEL)), "n0.nvl");
	CHECK_STR(json_string_value(json_object_get(n0, IOD_K8S_LABEL_LEAF)), "rack0");
	CHECK_STR(json_string_value(json_object_get(n0, IOD_K8S_LABEL_SPINE)), "zone0");
	CHECK_STR(json_string_value(json_object_get(n0, IOD_K8S_LABEL_CORE)), "core");
	CHECK_STR(json_string_value(json_object_get(n0, "iod.dev/gpu.nvlink-largest")), "8");
	/* a PCIe box has no NVLink domain to name */
	CHECK(!json_object_get(n1, IOD_K8S_LABEL_ACCEL));
	CHECK_STR(json_string_value(json_object_get(n1, "iod.dev/gpu.count")), "8");
	CHECK_STR(json_string_value(json_object_get(n1, "iod.dev/gpu.nvlink-islands")), "0");
	CHECK_STR(json_string_value(json_object_get(n0, "iod.dev/gpu.nvlink-islands")), "1");
	json_decref(l);

	struct iod_k8s_node bad = {"n 0", "r", "z", &dgx};
	iod_buf_init(&b);
	CHECK(iod_slurm_topology(&bad, 1, &b, &e) == -EINVAL && strstr(e.msg, "n 0"));
	iod_buf_free(&b);
}

/* Every built-in model as an extender shape; nodes n0..n3 of four models. */
static struct iod_k8s_ext_shape ext_shapes[8];
static struct iod_k8s_ext_node ext_nodes[4];
static const char *const ext_models[] = {"dgx-h100", "pcie-8gpu", "hgx-a100-8",
                                         "pcie-4gpu-nvlink-pairs"};

static void ext_setup(struct iod_k8s_ext *x)
{
	static struct iod_topo_node t;
	struct iod_err e = {0};
	for (uint32_t i = 0; i < 4; i++) {
		CHECK_EQ(iod_topo_model_load(ext_models[i], &t, &e), 0);
		CHECK_EQ(iod_sched_shape_from_topo(&t, &ext_shapes[i].shape, &e), 0);
		snprintf(ext_shapes[i].model, IOD_NAME_MAX, "%s", ext_models[i]);
		snprintf(ext_nodes[i].name, IOD_NAME_MAX, "n%u", i);
		snprintf(ext_nodes[i].rack, IOD_NAME_MAX, "rack%u", i);
		snprintf(ext_nodes[i].zone, IOD_NAME_MAX, "zone0");
		ext_nodes[i].shape = i;
	}
	*x = (struct iod_k8s_ext){ext_shapes, 4, ext_nodes, 4};
}

static void ext(const struct iod_k8s_ext *x, const char *verb, const char *body, int want_rc,
                json_t **out)
{
	struct iod_err e = {0};
	*out = NULL;
	CHECK_EQ(iod_k8s_ext_answer(x, verb, body, strlen(body), out, &e), want_rc);
	if (want_rc)
		CHECK(e.msg[0] && !*out);
}

#define POD(lim, ann)                                                                  \
	"{\"Pod\":{\"metadata\":{\"name\":\"p\",\"annotations\":{" ann "}},\"spec\":{" \
	"\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":{" lim "}}}]}},"

TEST(extender_filter_gives_iods_reasons)
{
	struct iod_k8s_ext x;
	json_t *r;
	ext_setup(&x);
	const char *args =
	    POD("\"nvidia.com/gpu\":\"4\"",
	        "\"iod.dev/gpu-link\":\"nvlink\"") "\"Nodes\":{\"items\":[{\"metadata\":{\"name\":"
	                                           "\"n0\"}},{\"metadata\":{\"name\":"
	                                           "\"n1\"}},{\"metadata\":{\"name\":\"x\","
	                                           "\"labels\":{\"iod.dev/model\":\"dgx-h100\"},"
	                                           "\"annotations\":{\"iod.dev/"
	                                           "gpus-used\":\"0-5\"}}},{\"metadata\":{\"name\":"
	                                           "\"ghost\"}}"
	                                           "]}}";
	ext(&x, "filter", args, 0, &r);
	CHECK(r);
	json_t *items = json_object_get(json_object_get(r, "Nodes"), "items");
	CHECK_EQ(json_array_size(items), 1);
	CHECK_STR(json_string_value(json_object_get(
	              json_object_get(json_array_get(items, 0), "metadata"), "name")),
	          "n0");
	json_t *failed = json_object_get(r, "FailedNodes");
	CHECK(strstr(json_string_value(json_object_get(failed, "n1")), "gpu-link"));
	CHECK(strstr(json_string_value(json_object_get(failed, "x")), "iod: gpus:"));
	CHECK(json_object_get(json_object_get(r, "FailedAndUnresolvableNodes"), "ghost"));
	CHECK_STR(json_string_value(json_object_get(r, "Error")), "");
	json_decref(r);
}

TEST(extender_priorities_order_nodes_as_iod_schedule_does)
{
	struct iod_k8s_ext x;
	json_t *r;
	ext_setup(&x);
	const char *args =
	    POD("\"iod.dev/gpu\":2", "") "\"NodeNames\":[\"n0\",\"n1\",\"n2\",\"n3\"]}";
	ext(&x, "prioritize", args, 0, &r);
	CHECK(r);
	CHECK_EQ(json_array_size(r), 4);
	/* the node iod's scheduler picks over the whole cluster scores 10 */
	struct iod_sched_cluster *c = NULL;
	struct iod_err e = {0};
	struct iod_sched_opts o;
	struct iod_sched_result res;
	iod_sched_opts_default(&o);
	CHECK_EQ(iod_sched_cluster_new(4, 4, &c, &e), 0);
	for (uint32_t i = 0; i < 4; i++) {
		uint32_t id;
		CHECK_EQ(iod_sched_shape_add(c, &ext_shapes[i].shape, &id, &e), 0);
	}
	for (uint32_t i = 0; i < 4; i++) {
		uint32_t id;
		struct iod_sched_node_spec ns = {.name = ext_nodes[i].name,
		                                 .shape = i,
		                                 .rack = ext_nodes[i].rack,
		                                 .zone = "zone0"};
		CHECK_EQ(iod_sched_node_add(c, &ns, &id, &e), 0);
	}
	struct iod_sched_request q = {
	    .service = "pod", .replicas = 1, .gpus = 2, .numa = IOD_SCHED_NUMA_BEST_EFFORT};
	CHECK_EQ(iod_sched_result_init(&res, 1, 1), 0);
	CHECK_EQ(iod_sched_place(c, &q, 1, &o, &res, &e), 0);
	CHECK(res.p[0].placed);
	const char *best = iod_sched_node_name(c, res.p[0].node);
	int64_t top = -1;
	const char *top_host = NULL;
	for (size_t i = 0; i < 4; i++) {
		json_t *h = json_array_get(r, i);
		int64_t s = json_integer_value(json_object_get(h, "Score"));
		CHECK(s >= 0 && s <= IOD_K8S_EXT_SCORE_MAX);
		if (s > top) {
			top = s;
			top_host = json_string_value(json_object_get(h, "Host"));
		}
	}
	CHECK_EQ(top, IOD_K8S_EXT_SCORE_MAX);
	CHECK_STR(top_host, best);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
	json_decref(r);
}

TEST(extender_refuses_bad_args_with_a_reason)
{
	struct iod_k8s_ext x;
	json_t *r;
	ext_setup(&x);
	ext(&x, "filter", "{garbage", -EINVAL, &r);
	ext(&x, "filter", "[]", -EINVAL, &r);
	ext(&x, "filter", "{\"Pod\":{}}", -EINVAL, &r); /* no nodes */
	ext(&x, "bind", "{}", -ENOENT, &r);
	ext(&x, "prioritize", POD("\"nvidia.com/gpu\":\"two\"", "") "\"NodeNames\":[]}", -EINVAL,
	    &r);
	ext(&x, "filter", POD("", "\"iod.dev/gpu-link\":\"fast\"") "\"NodeNames\":[]}", -EINVAL,
	    &r);
	ext(&x, "filter", POD("", "") "\"NodeNames\":[\"\"]}", -EINVAL, &r);
}

TEST(preferred_allocation_takes_the_best_nvlink_set)
{
	static struct iod_topo_node t;
	struct iod_err e = {0};
	uint32_t out = 0;
	CHECK_EQ(iod_topo_model_load("pcie-4gpu-nvlink-pairs", &t, &e), 0);
	/* two GPUs: an NVLink pair, never one GPU of each pair */
	CHECK_EQ(iod_k8s_preferred(&t, 0xf, 0, 2, &out, &e), 0);
	CHECK(out == 0x3 || out == 0xc);
	/* GPU 1 must be in: its NVLink partner joins it */
	CHECK_EQ(iod_k8s_preferred(&t, 0xf, 0x2, 2, &out, &e), 0);
	CHECK_EQ(out, 0x3);
	/* GPU 0 taken: the other pair, not the lone GPU 1 with a stranger */
	CHECK_EQ(iod_k8s_preferred(&t, 0xe, 0, 2, &out, &e), 0);
	CHECK_EQ(out, 0xc);
	CHECK_EQ(iod_k8s_preferred(&t, 0x3, 0, 3, &out, &e), -EINVAL);
	CHECK_EQ(iod_k8s_preferred(&t, 0x3, 0x4, 2, &out, &e), -EINVAL);
	CHECK_EQ(iod_topo_model_load("dgx-h100", &t, &e), 0);
	CHECK_EQ(iod_k8s_preferred(&t, 0xff, 0, 8, &out, &e), 0);
	CHECK_EQ(out, 0xff);
}
