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

TEST(grpc_frames_are_length_prefixed_and_refuse_compression)
{
	struct iod_err e = {0};
	const uint8_t *m = NULL;
	size_t n = 0;
	const uint8_t ok[] = {0, 0, 0, 0, 2, 0x0a, 0x00, 0xee};
	CHECK_EQ(iod_grpc_frame_parse(ok, sizeof(ok), 16, &m, &n, &e), 7);
	CHECK(m == ok + 5 && n == 2);
	CHECK_EQ(iod_grpc_frame_parse(ok, 6, 16, &m, &n, &e), 0); /* half a message */
	CHECK_EQ(iod_grpc_frame_parse(ok, 4, 16, &m, &n, &e), 0);
	const uint8_t zip[] = {1, 0, 0, 0, 0};
	CHECK_EQ(iod_grpc_frame_parse(zip, sizeof(zip), 16, &m, &n, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "compressed");
	const uint8_t big[] = {0, 0, 0x01, 0, 0};
	CHECK_EQ(iod_grpc_frame_parse(big, sizeof(big), 16, &m, &n, &e), -EINVAL);
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_grpc_frame_put(&b, "\x08\x01", 2), 0);
	CHECK_EQ(b.len, 7u);
	CHECK(!memcmp(b.data, "\x00\x00\x00\x00\x02\x08\x01", 7));
	iod_buf_free(&b);
}

TEST(device_plugin_messages_encode_as_protobuf)
{
	struct iod_buf b;
	iod_buf_init(&b);
	/* RegisterRequest{version, endpoint, resource_name, options{2: true}} */
	CHECK_EQ(iod_dp_enc_register(&b, "g.sock", "iod.dev/gpu", false, true), 0);
	static const char want[] =
	    "\x0a\x07v1beta1\x12\x06g.sock\x1a\x0biod.dev/gpu\x22\x02\x10\x01";
	CHECK_EQ(b.len, sizeof(want) - 1);
	CHECK(!memcmp(b.data, want, sizeof(want) - 1));
	/* Device{ID, health, topology{nodes{ID: 1}}}; NUMA 0 is an empty NUMANode */
	struct iod_dp_device d[2] = {{"gpu0", true, 0}, {"gpu5", false, 1}};
	b.len = 0;
	CHECK_EQ(iod_dp_enc_devices(&b, d, 2), 0);
	static const char dev[] = "\x0a\x13\x0a\x04gpu0\x12\x07Healthy\x1a\x02\x0a\x00"
	                          "\x0a\x17\x0a\x04gpu5\x12\x09Unhealthy\x1a\x04\x0a\x02\x08\x01";
	CHECK_EQ(b.len, sizeof(dev) - 1);
	CHECK(!memcmp(b.data, dev, sizeof(dev) - 1));
	iod_buf_free(&b);
}

TEST(device_plugin_requests_decode_and_refuse_garbage)
{
	struct iod_dp_req *q = malloc(sizeof(*q));
	struct iod_err e = {0};
	/* PreferredAllocationRequest{container_requests{avail gpu1 gpu2, must gpu2, size 1,
	 * an unknown field 9 skipped}} */
	static const char pref[] = "\x0a\x16\x0a\x04gpu1\x0a\x04gpu2\x12\x04gpu2\x18\x01\x48\x07";
	CHECK_EQ(
	    iod_dp_req_decode(IOD_DP_REQ_PREFERRED, (const uint8_t *)pref, sizeof(pref) - 1, q, &e),
	    0);
	CHECK_EQ(q->n, 1u);
	CHECK_EQ(q->c[0].available.n, 2u);
	CHECK_STR(q->c[0].available.id[1], "gpu2");
	CHECK_EQ(q->c[0].must.n, 1u);
	CHECK_EQ(q->c[0].size, 1);
	static const char pre[] = "\x0a\x04gpu3\x0a\x04gpu4";
	CHECK_EQ(
	    iod_dp_req_decode(IOD_DP_REQ_PRESTART, (const uint8_t *)pre, sizeof(pre) - 1, q, &e),
	    0);
	CHECK_EQ(q->c[0].ids.n, 2u);
	/* truncated length, a group wire type, an empty id, an id with a newline */
	static const char *const bad[] = {"\x0a\x05gp", "\x0b", "\x0a\x02\x0a\x00",
	                                  "\x0a\x04\x0a\x02g\n"};
	static const size_t blen[] = {4, 1, 4, 6};
	for (unsigned i = 0; i < 4; i++) {
		e.msg[0] = '\0';
		CHECK_EQ(
		    iod_dp_req_decode(IOD_DP_REQ_ALLOCATE, (const uint8_t *)bad[i], blen[i], q, &e),
		    -EINVAL);
		CHECK(e.msg[0]);
	}
	free(q);
}

TEST(device_plugin_allocates_what_iods_replicas_get)
{
	static struct iod_topo_node t;
	struct iod_err e = {0};
	struct iod_dp_alloc a;
	struct iod_dp_ids ids = {.n = 2, .id = {"gpu6", "gpu7"}};
	CHECK_EQ(iod_topo_model_load("dgx-h100", &t, &e), 0);
	CHECK_EQ(iod_dp_allocate(&t, IOD_DP_GPU, &ids, &a, &e), 0);
	CHECK_STR(a.envs[0].key, "CUDA_VISIBLE_DEVICES");
	CHECK_STR(a.envs[0].value, "6,7"); /* a list: CUDA reads no ranges */
	CHECK_STR(a.envs[2].key, "IOD_NUMA_NODE");
	CHECK_STR(a.envs[2].value, "1");
	CHECK_STR(a.devices[0].host_path, "/dev/nvidia6");
	CHECK_STR(a.devices[2].host_path, "/dev/nvidiactl");
	struct iod_dp_ids bad = {.n = 1, .id = {"gpu8"}};
	CHECK_EQ(iod_dp_allocate(&t, IOD_DP_GPU, &bad, &a, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "gpu8");
	/* the DPU: its verbs device; preferred honours must-include */
	struct iod_dp_ids dpu = {.n = 1, .id = {"dpu0"}};
	CHECK_EQ(iod_dp_allocate(&t, IOD_DP_DPU, &dpu, &a, &e), 0);
	CHECK_STR(a.envs[0].value, "dpu0");
	CHECK_STR(a.devices[0].host_path, "/dev/infiniband/uverbs0");
	struct iod_dp_creq c = {.available = dpu, .must = dpu, .size = 1};
	struct iod_dp_ids out;
	CHECK_EQ(iod_dp_preferred(&t, IOD_DP_DPU, &c, &out, &e), 0);
	CHECK_EQ(out.n, 1u);
	CHECK_STR(out.id[0], "dpu0");
	c.size = 2;
	CHECK_EQ(iod_dp_preferred(&t, IOD_DP_DPU, &c, &out, &e), -EINVAL);
	struct iod_dp_device d[IOD_DP_IDS_MAX];
	struct iod_dp_ids sick = {.n = 1, .id = {"gpu3"}};
	CHECK_EQ(iod_dp_devices(&t, IOD_DP_GPU, &sick, d, IOD_DP_IDS_MAX), 8u);
	CHECK(d[2].healthy && !d[3].healthy);
	CHECK_EQ(d[4].numa, 1);
}

static unsigned count_of(const char *hay, const char *needle)
{
	unsigned n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

TEST(dra_slice_maps_nvlink_numa_switch_and_nic)
{
	static struct iod_topo_node t;
	struct iod_err e = {0};
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_topo_model_load("pcie-4gpu-nvlink-pairs", &t, &e), 0);
	CHECK_EQ(iod_k8s_dra_slice(&t, "node-a", "iod.dev", &b, &e), 0);
	CHECK_CONTAINS(b.data, "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\n");
	CHECK_CONTAINS(b.data, "  driver: iod.dev\n  nodeName: node-a\n");
	/* two NVLink pairs: two domains of two GPUs each, each pair under its switch */
	CHECK_EQ(count_of(b.data, "string: \"node-a.nvl0\""), 2u);
	CHECK_EQ(count_of(b.data, "string: \"node-a.nvl1\""), 2u);
	CHECK_EQ(count_of(b.data, "nvlinkDomainSize:\n        int: 2\n"), 4u);
	CHECK_EQ(count_of(b.data, "pcieSwitch:"), 4u);
	CHECK_EQ(count_of(b.data, "  - name: gpu"), 4u);
	CHECK_EQ(count_of(b.data, "nearestNIC:"), 4u);
	b.len = 0;
	/* PCIe-only GPUs have no NVLink domain; DPUs are devices of type dpu */
	CHECK_EQ(iod_topo_model_load("dgx-h100", &t, &e), 0);
	CHECK_EQ(iod_k8s_dra_slice(&t, "n0", "iod.dev", &b, &e), 0);
	CHECK_EQ(count_of(b.data, "string: \"n0.nvl0\""), 8u);
	CHECK_CONTAINS(b.data,
	               "  - name: dpu0\n    attributes:\n      type:\n        string: \"dpu\"");
	CHECK_CONTAINS(b.data, "numaNode:\n        int: 1\n");
	b.len = 0;
	CHECK_EQ(iod_topo_model_load("pcie-8gpu", &t, &e), 0);
	CHECK_EQ(iod_k8s_dra_slice(&t, "n1", "iod.dev", &b, &e), 0);
	CHECK_EQ(count_of(b.data, "nvlinkDomain:"), 0u);
	CHECK_EQ(iod_k8s_dra_slice(&t, "N1", "iod.dev", &b, &e), -EINVAL);
	CHECK_EQ(iod_k8s_dra_slice(&t, "n1", "iod_dev", &b, &e), -EINVAL);
	CHECK_EQ(iod_topo_model_load("bf3-dpu", &t, &e), 0);
	CHECK_EQ(iod_k8s_dra_slice(&t, "n1", "iod.dev", &b, &e), -ENOENT);
	iod_buf_free(&b);
}
