/*
 * test_sched.c: unit tests for the scheduler core: the exact GPU-set search,
 * each score term and NUMA policy, every reason for not placing, gang and
 * strict deploys, anti-affinity, determinism and rebalancing bounds.
 *
 * Shapes are built by hand here (not from topo/ models) so that each test
 * controls exactly the pair scores and NUMA layout it reasons about.
 */
#include "harness.h"
#include "iod/sched.h"
#include "iod/spec.h"
#include "iod/topo.h"

#include <stdlib.h>

/* 8 GPUs all-to-all over NVSwitch (NV18), GPU0-3 on NUMA 0, 4-7 on NUMA 1,
 * 56 PUs and 1 TB per NUMA node, one 400G NIC per GPU on its switch. */
static void shape_dgx(struct iod_sched_shape *s)
{
	iod_sched_shape_init(s, "t-dgx", 8, 2);
	for (unsigned i = 0; i < 8; i++) {
		for (unsigned j = 0; j < 8; j++) {
			if (i == j)
				continue;
			s->pair_score[i][j] =
			    (uint16_t)(1800 + (s->gpu_numa[i] == s->gpu_numa[j] ? 20 : 10));
			s->nvlink[i] |= 1u << j;
		}
	}
	iod_bitmap_set_range(&s->numa_cpus[0], 0, 55);
	iod_bitmap_set_range(&s->numa_cpus[1], 56, 111);
	s->numa_mem_bytes[0] = s->numa_mem_bytes[1] = 1000000000000ull;
	s->nics_n = 8;
	for (unsigned i = 0; i < 8; i++) {
		snprintf(s->nics[i].name, sizeof(s->nics[i].name), "mlx5_%u", i);
		s->nics[i].numa = s->gpu_numa[i];
		s->nics[i].gpu_mask = 1u << i;
		s->nics[i].bw_bps = 400000000000ull;
	}
	iod_sched_shape_finish(s);
}

/* 4 GPUs, NVLink-bridged pairs (0-1, 2-3), GPU0-1 on NUMA 0, 2-3 on NUMA 1,
 * 16 PUs and 256 GB per NUMA node, one 100G NIC per NUMA node. */
static void shape_pairs(struct iod_sched_shape *s)
{
	iod_sched_shape_init(s, "t-pairs", 4, 2);
	for (unsigned i = 0; i < 4; i++) {
		for (unsigned j = 0; j < 4; j++) {
			if (i == j)
				continue;
			bool pair = i / 2 == j / 2;
			s->pair_score[i][j] = pair ? 250 : 10;
			if (pair)
				s->nvlink[i] |= 1u << j;
		}
	}
	iod_bitmap_set_range(&s->numa_cpus[0], 0, 15);
	iod_bitmap_set_range(&s->numa_cpus[1], 16, 31);
	s->numa_mem_bytes[0] = s->numa_mem_bytes[1] = 256000000000ull;
	s->nics_n = 2;
	for (unsigned i = 0; i < 2; i++) {
		snprintf(s->nics[i].name, sizeof(s->nics[i].name), "eth%u", i);
		s->nics[i].numa = (int32_t)i;
		s->nics[i].gpu_mask = 3u << (2 * i);
		s->nics[i].bw_bps = 100000000000ull;
	}
	iod_sched_shape_finish(s);
}

/* A cluster of n nodes "n0".. of one shape; racks "r0".. by rack_of[i]. */
static struct iod_sched_cluster *mk(const struct iod_sched_shape *sh, unsigned n,
                                    const unsigned *rack_of)
{
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sid, nid;
	if (iod_sched_cluster_new(64, 4096, &c, &e))
		return NULL;
	if (iod_sched_shape_add(c, sh, &sid, &e)) {
		iod_sched_cluster_free(c);
		return NULL;
	}
	for (unsigned i = 0; i < n; i++) {
		char name[16], rack[16];
		snprintf(name, sizeof(name), "n%u", i);
		snprintf(rack, sizeof(rack), "r%u", rack_of ? rack_of[i] : i);
		struct iod_sched_node_spec ns = {.name = name, .shape = sid, .rack = rack};
		if (iod_sched_node_add(c, &ns, &nid, &e)) {
			iod_sched_cluster_free(c);
			return NULL;
		}
	}
	return c;
}

static struct iod_sched_request req(const char *name, uint32_t replicas, uint32_t gpus)
{
	struct iod_sched_request r;
	memset(&r, 0, sizeof(r));
	snprintf(r.service, sizeof(r.service), "%s", name);
	r.replicas = replicas;
	r.gpus = gpus;
	r.numa = IOD_SCHED_NUMA_BEST_EFFORT;
	return r;
}

/* Place reqs with default options into a fresh result (caller frees). */
static int place(struct iod_sched_cluster *c, const struct iod_sched_request *r, uint32_t n,
                 bool strict, struct iod_sched_result *res)
{
	struct iod_sched_opts o;
	struct iod_err e = {0};
	iod_sched_opts_default(&o);
	o.strict = strict;
	if (iod_sched_result_init(res, 4096, 64))
		return -ENOMEM;
	return iod_sched_place(c, r, n, &o, res, &e);
}

static uint32_t pair_sum(const struct iod_sched_shape *s, uint32_t set)
{
	uint32_t sum = 0;
	for (unsigned i = 0; i < 16; i++)
		for (unsigned j = i + 1; j < 16; j++)
			if ((set >> i & 1) && (set >> j & 1))
				sum += s->pair_score[i][j];
	return sum;
}

TEST(gpu_set_exact_not_greedy)
{
	/* greedy takes the best pair (0,1) and then one more GPU: 160;
	 * the optimum {1,2,3} scores 180 */
	struct iod_sched_shape s;
	iod_sched_shape_init(&s, "trap", 4, 1);
	uint16_t sc[4][4] = {{0, 100, 0, 0}, {100, 0, 60, 60}, {0, 60, 0, 60}, {0, 60, 60, 0}};
	memcpy(s.pair_score, sc, sizeof(sc));
	for (unsigned i = 0; i < 4; i++)
		for (unsigned j = 0; j < 4; j++)
			s.pair_score[i][j] = sc[i][j];
	iod_bitmap_set_range(&s.numa_cpus[0], 0, 7);
	s.numa_mem_bytes[0] = 1ull << 40;
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	CHECK(c);
	struct iod_sched_request r = req("job", 1, 3);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK(res.p[0].placed);
	CHECK_EQ(res.p[0].gpu_mask, 0xE);
	CHECK_EQ(pair_sum(&s, res.p[0].gpu_mask), 180);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(gpu_set_prefers_nvlink_pair)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	struct iod_sched_request r = req("job", 2, 2);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 2);
	CHECK_EQ(res.p[0].gpu_mask, 0x3);
	CHECK_EQ(res.p[1].gpu_mask, 0xC);
	CHECK_EQ(res.p[0].explain.cand[0].terms[IOD_SCHED_TERM_GPU], 1000);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(reason_gpu_link)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	struct iod_sched_request r = req("worker-node", 1, 4);
	r.gpu_link = IOD_SCHED_LINK_NVLINK;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK(!res.p[0].placed);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_GPU_LINK);
	CHECK_STR(res.p[0].why, "needs 4 GPUs joined by NVLink on one node; best candidate n0 "
	                        "has 2 free (GPU0, GPU1)");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(reason_gpus_names_best_candidate)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 2, NULL);
	struct iod_sched_request r[2] = {req("a", 2, 1), req("b", 1, 4)};
	r[0].stateful = true; /* spread: one per node */
	struct iod_sched_result res;
	CHECK_EQ(place(c, r, 2, false, &res), 0);
	CHECK_EQ(res.placed_n, 2);
	CHECK(res.p[0].node != res.p[1].node);
	CHECK_EQ(res.p[2].reason, IOD_SCHED_REASON_GPUS);
	CHECK_CONTAINS(res.p[2].why, "needs 4 GPUs on one node; best candidate n0 has 3 free");
	CHECK_STR(res.p[2].name, "b-0");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(reason_node_too_small_and_no_nodes)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	struct iod_sched_request r = req("big", 1, 8);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_NODE_TOO_SMALL);
	CHECK_CONTAINS(res.p[0].why, "the largest node, n0 (t-pairs), has 4");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);

	c = mk(&s, 0, NULL);
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_NO_NODES);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);

	c = mk(&s, 2, NULL);
	iod_sched_node_cordon(c, 0, true);
	iod_sched_node_cordon(c, 1, true);
	r.gpus = 1;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_NO_NODES);
	CHECK_CONTAINS(res.p[0].why, "all 2 nodes are cordoned");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

/* A node takes no more replicas than its agent runs: the rest go to
 * another node, and with none left the reason names the limit. */
TEST(reason_node_full)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 2, NULL);
	struct iod_sched_request r = req("many", IOD_SCHED_NODE_REPLICAS_MAX * 2 + 3, 0);
	struct iod_sched_result res;
	uint32_t on[2] = {0, 0};
	CHECK(c);
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, IOD_SCHED_NODE_REPLICAS_MAX * 2);
	CHECK_EQ(res.unplaced_n, 3);
	for (uint32_t i = 0; i < res.n; i++)
		if (res.p[i].placed)
			on[res.p[i].node]++;
	CHECK_EQ(on[0], IOD_SCHED_NODE_REPLICAS_MAX);
	CHECK_EQ(on[1], IOD_SCHED_NODE_REPLICAS_MAX);
	const struct iod_sched_placement *last = &res.p[res.n - 1];
	CHECK(!last->placed);
	CHECK_EQ(last->reason, IOD_SCHED_REASON_NODE_FULL);
	CHECK_CONTAINS(last->why, "IOD_SCHED_NODE_REPLICAS_MAX");
	CHECK_STR(iod_sched_reason_name(last->reason), "node-full");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(reason_cpus_memory_nic_labels)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	struct iod_sched_result res;

	struct iod_sched_request r = req("cpu", 1, 1);
	r.cpus = 40;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_CPUS);
	CHECK_STR(res.p[0].why, "needs 40 CPUs; best candidate n0 has 32 free");
	iod_sched_result_free(&res);

	r = req("mem", 1, 1);
	r.mem_bytes = 600000000000ull;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_MEMORY);
	CHECK_STR(res.p[0].why, "needs 600 GB memory; best candidate n0 has 512 GB free");
	iod_sched_result_free(&res);

	r = req("net", 1, 1);
	r.nic_bw_bps = 200000000000ull;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_NIC);
	CHECK_STR(res.p[0].why,
	          "needs 200 Gbps NIC bandwidth; best candidate n0 has 100 Gbps free on eth0");
	iod_sched_result_free(&res);

	r = req("lab", 1, 1);
	r.selector_n = 1;
	snprintf(r.selector[0].key, sizeof(r.selector[0].key), "gpu");
	snprintf(r.selector[0].value, sizeof(r.selector[0].value), "h100");
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_LABELS);
	CHECK_CONTAINS(res.p[0].why, "gpu=h100");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(labels_select_nodes)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sid, nid;
	CHECK_EQ(iod_sched_cluster_new(4, 16, &c, &e), 0);
	CHECK_EQ(iod_sched_shape_add(c, &s, &sid, &e), 0);
	struct iod_sched_label l = {"gpu", "h100"};
	struct iod_sched_node_spec a = {.name = "plain", .shape = sid};
	struct iod_sched_node_spec b = {
	    .name = "tagged", .shape = sid, .labels = &l, .labels_n = 1};
	CHECK_EQ(iod_sched_node_add(c, &a, &nid, &e), 0);
	CHECK_EQ(iod_sched_node_add(c, &b, &nid, &e), 0);
	CHECK_EQ(iod_sched_node_add(c, &b, &nid, &e), -EEXIST);
	struct iod_sched_request r = req("lab", 1, 1);
	r.selector_n = 1;
	r.selector[0] = l;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK(res.p[0].placed);
	CHECK_STR(iod_sched_node_name(c, res.p[0].node), "tagged");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(numa_single_node_policy)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	struct iod_sched_request r[2] = {req("five", 1, 5), req("four", 1, 4)};
	r[0].numa = r[1].numa = IOD_SCHED_NUMA_SINGLE;
	r[1].cpus = 8;
	r[1].mem_bytes = 1000000000;
	struct iod_sched_result res;
	CHECK_EQ(place(c, r, 2, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_NUMA);
	CHECK_CONTAINS(res.p[0].why, "needs 5 GPUs on a single NUMA node");
	CHECK_CONTAINS(res.p[0].why, "has 4 free on NUMA node 0 (GPU0, GPU1, GPU2, GPU3)");
	res.p[0] = res.p[1];
	CHECK(res.p[0].placed);
	CHECK(res.p[0].gpu_mask == 0x0F || res.p[0].gpu_mask == 0xF0);
	int numa = res.p[0].gpu_mask == 0x0F ? 0 : 1;
	CHECK_EQ(res.p[0].mem_numa, numa);
	struct iod_bitmap cpus = res.p[0].cpus;
	iod_bitmap_andnot(&cpus, &s.numa_cpus[numa]);
	CHECK(iod_bitmap_empty(&cpus));
	CHECK_EQ(iod_bitmap_count(&res.p[0].cpus), 8);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(cpu_affinity_is_numa_local_without_a_cpu_request)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	/* Two 4-GPU replicas, no CPU request: each runs on its GPUs' NUMA
	 * node's PUs (shared), and nothing is reserved. */
	struct iod_sched_request r[2] = {req("a", 1, 4), req("b", 1, 4)};
	r[0].numa = r[1].numa = IOD_SCHED_NUMA_SINGLE;
	r[1].cpus = 2;
	struct iod_sched_result res;
	CHECK_EQ(place(c, r, 2, false, &res), 0);
	CHECK(res.p[0].placed && res.p[1].placed);
	CHECK(iod_bitmap_empty(&res.p[0].cpus));
	int numa = res.p[0].gpu_mask == 0x0F ? 0 : 1;
	CHECK(iod_bitmap_equal(&res.p[0].cpu_affinity, &s.numa_cpus[numa]));
	/* With exclusive PUs the affinity is exactly those. */
	CHECK_EQ(iod_bitmap_count(&res.p[1].cpus), 2);
	CHECK(iod_bitmap_equal(&res.p[1].cpu_affinity, &res.p[1].cpus));
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(numa_restricted_vs_best_effort)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	/* 4 GPUs fit one NUMA node (min span 1), but 60 CPUs do not (56 each) */
	struct iod_sched_request r = req("strict", 1, 4);
	r.cpus = 60;
	r.numa = IOD_SCHED_NUMA_RESTRICTED;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_CPUS);
	CHECK_CONTAINS(res.p[0].why, "(numa: restricted)");
	iod_sched_result_free(&res);

	r.numa = IOD_SCHED_NUMA_BEST_EFFORT;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK(res.p[0].placed);
	CHECK_EQ(iod_bitmap_count(&res.p[0].cpus), 60);
	/* best effort: all 56 local CPUs first, 4 from the other node */
	int numa = res.p[0].gpu_mask == 0x0F ? 0 : 1;
	struct iod_bitmap local = res.p[0].cpus;
	iod_bitmap_and(&local, &s.numa_cpus[numa]);
	CHECK_EQ(iod_bitmap_count(&local), 56);
	CHECK(res.p[0].explain.cand[0].terms[IOD_SCHED_TERM_NUMA] < 1000);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(numa_restricted_allows_minimal_span)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	/* 8 GPUs must span both NUMA nodes: restricted admits it, single does not */
	struct iod_sched_request r = req("eight", 1, 8);
	r.numa = IOD_SCHED_NUMA_RESTRICTED;
	r.cpus = 100;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK(res.p[0].placed);
	CHECK_EQ(res.p[0].explain.cand[0].terms[IOD_SCHED_TERM_NUMA], 1000);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(numa_none_takes_lowest_cpus)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sid, nid;
	CHECK_EQ(iod_sched_cluster_new(4, 16, &c, &e), 0);
	CHECK_EQ(iod_sched_shape_add(c, &s, &sid, &e), 0);
	/* GPU0-3 (NUMA 0) already taken: the replica's GPUs are on NUMA 1 */
	struct iod_sched_node_spec ns = {.name = "n0", .shape = sid, .gpus_used = 0x0F};
	CHECK_EQ(iod_sched_node_add(c, &ns, &nid, &e), 0);
	struct iod_sched_request r[2] = {req("none", 1, 2), req("be", 1, 2)};
	r[0].numa = IOD_SCHED_NUMA_NONE;
	r[0].cpus = r[1].cpus = 4;
	struct iod_sched_result res;
	CHECK_EQ(place(c, r, 2, false, &res), 0);
	char buf[64];
	iod_bitmap_format(&res.p[0].cpus, buf, sizeof(buf));
	CHECK_STR(buf, "0-3");
	CHECK_EQ(res.p[0].mem_numa, -1);
	iod_bitmap_format(&res.p[1].cpus, buf, sizeof(buf));
	CHECK_STR(buf, "56-59");
	CHECK_EQ(res.p[1].mem_numa, 1);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(nic_term_prefers_gpu_switch)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	struct iod_sched_request r = req("net", 1, 1);
	r.nic_bw_bps = 100000000000ull;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK(res.p[0].placed);
	/* the NIC on the chosen GPU's switch */
	CHECK_EQ(1u << res.p[0].nic, res.p[0].gpu_mask);
	CHECK_EQ(res.p[0].explain.cand[0].terms[IOD_SCHED_TERM_NIC], 1000);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(frag_keeps_nvlink_pairs_whole)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sid, nid;
	CHECK_EQ(iod_sched_cluster_new(4, 16, &c, &e), 0);
	CHECK_EQ(iod_sched_shape_add(c, &s, &sid, &e), 0);
	struct iod_sched_node_spec ns = {.name = "n0", .shape = sid, .gpus_used = 0x1};
	CHECK_EQ(iod_sched_node_add(c, &ns, &nid, &e), 0);
	/* GPU0 is taken: a 1-GPU replica takes GPU1 and leaves pair 2-3 whole */
	struct iod_sched_request r = req("one", 1, 1);
	r.numa = IOD_SCHED_NUMA_NONE;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].gpu_mask, 0x2);
	CHECK_EQ(res.p[0].explain.cand[0].terms[IOD_SCHED_TERM_FRAG], 1000);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(frag_prefers_broken_island_across_nodes)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 2, NULL);
	struct iod_sched_request big = req("big", 1, 4), one = req("one", 3, 1);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &big, 1, false, &res), 0);
	uint32_t used = res.p[0].node;
	iod_sched_result_free(&res);
	CHECK_EQ(place(c, &one, 1, false, &res), 0);
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ(res.p[i].node, used);
	/* the other DGX stays a whole 8-GPU island */
	CHECK_EQ(iod_sched_node_gpus_free(c, 1 - used), 0xFF);
	CHECK_EQ(iod_sched_islands_free(c, 2), 1);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(pack_vs_spread)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 4, NULL);
	struct iod_sched_request r = req("packed", 4, 1);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ(res.p[i].node, 0);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);

	c = mk(&s, 4, NULL);
	r = req("spread", 4, 1);
	r.spread = true;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ(res.p[i].node, i);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(stateful_spreads_across_racks)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	/* n0,n1 in r0; n2,n3 in r1 */
	unsigned racks[4] = {0, 0, 1, 1};
	struct iod_sched_cluster *c = mk(&s, 4, racks);
	struct iod_sched_request r = req("db", 2, 1);
	r.stateful = true;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 2);
	CHECK(racks[res.p[0].node] != racks[res.p[1].node]);
	CHECK(res.p[1].explain.cand[0].terms[IOD_SCHED_TERM_SPREAD] >
	      res.p[1].explain.cand[res.p[1].explain.cand_n - 1].terms[IOD_SCHED_TERM_SPREAD]);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(anti_affinity_node_and_rack)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	unsigned racks[4] = {0, 0, 1, 1};
	struct iod_sched_cluster *c = mk(&s, 4, racks);
	struct iod_sched_request r = req("ps", 3, 1);
	r.anti = IOD_SCHED_DOMAIN_RACK;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 2);
	CHECK(racks[res.p[0].node] != racks[res.p[1].node]);
	CHECK_EQ(res.p[2].reason, IOD_SCHED_REASON_ANTI_AFFINITY);
	CHECK_CONTAINS(res.p[2].why, "anti-affinity by rack");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);

	c = mk(&s, 4, racks);
	r = req("ps", 5, 1);
	r.anti = IOD_SCHED_DOMAIN_NODE;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 4);
	for (unsigned i = 0; i < 4; i++)
		for (unsigned j = i + 1; j < 4; j++)
			CHECK(res.p[i].node != res.p[j].node);
	CHECK_EQ(res.p[4].reason, IOD_SCHED_REASON_ANTI_AFFINITY);
	/* a later deploy of the same service still sees its replicas */
	iod_sched_result_free(&res);
	r.replicas = 1;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_ANTI_AFFINITY);
	CHECK_STR(res.p[0].name, "ps-5");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(anti_affinity_zone)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sid, nid;
	CHECK_EQ(iod_sched_cluster_new(8, 32, &c, &e), 0);
	CHECK_EQ(iod_sched_shape_add(c, &s, &sid, &e), 0);
	const char *zones[4] = {"za", "za", "za", "zb"};
	for (unsigned i = 0; i < 4; i++) {
		char name[8], rack[8];
		snprintf(name, sizeof(name), "n%u", i);
		snprintf(rack, sizeof(rack), "r%u", i);
		struct iod_sched_node_spec ns = {
		    .name = name, .shape = sid, .rack = rack, .zone = zones[i]};
		CHECK_EQ(iod_sched_node_add(c, &ns, &nid, &e), 0);
	}
	struct iod_sched_request r = req("z", 3, 1);
	r.anti = IOD_SCHED_DOMAIN_ZONE;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 2);
	CHECK(strcmp(zones[res.p[0].node], zones[res.p[1].node]) != 0);
	CHECK_EQ(res.p[2].reason, IOD_SCHED_REASON_ANTI_AFFINITY);
	CHECK_CONTAINS(res.p[2].why, "anti-affinity by zone");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(gang_all_or_none)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 2, NULL);
	struct iod_sched_request r = req("gang", 3, 4);
	r.gang = true;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 0);
	CHECK_EQ(res.unplaced_n, 3);
	CHECK_EQ(res.svc[0].reason, IOD_SCHED_REASON_GANG);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_GANG);
	CHECK_EQ(res.p[1].reason, IOD_SCHED_REASON_GANG);
	CHECK_EQ(res.p[2].reason, IOD_SCHED_REASON_GPUS);
	CHECK_CONTAINS(res.p[0].why, "gang: all 3 replicas or none, and gang-2 cannot be placed");
	/* nothing was left bound */
	CHECK_EQ(iod_sched_node_gpus_free(c, 0), 0xF);
	CHECK_EQ(iod_sched_node_gpus_free(c, 1), 0xF);
	iod_sched_result_free(&res);

	/* without gang, what fits is placed */
	r.gang = false;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 2);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(strict_deploy_is_one_transaction)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 2, NULL);
	struct iod_sched_request r[3] = {req("a", 2, 1), req("b", 2, 4), req("c", 1, 1)};
	struct iod_sched_result res;
	CHECK_EQ(place(c, r, 3, true, &res), 0);
	CHECK(res.rolled_back);
	CHECK_EQ(res.placed_n, 0);
	CHECK_EQ(res.svc[0].reason, IOD_SCHED_REASON_TRANSACTION);
	CHECK_EQ(res.svc[1].reason, IOD_SCHED_REASON_GPUS);
	CHECK_EQ(res.svc[2].reason, IOD_SCHED_REASON_TRANSACTION);
	CHECK_CONTAINS(res.p[0].why, "service b cannot be placed in full");
	CHECK_EQ(iod_sched_node_gpus_free(c, 0), 0xF);
	CHECK_EQ(iod_sched_node_gpus_free(c, 1), 0xF);
	iod_sched_result_free(&res);

	/* place what fits: every service that cannot be placed is reported */
	CHECK_EQ(place(c, r, 3, false, &res), 0);
	CHECK(!res.rolled_back);
	CHECK_EQ(res.svc[0].placed, 2);
	CHECK_EQ(res.svc[1].placed, 1);
	CHECK_EQ(res.svc[2].placed, 1);
	CHECK_EQ(res.svc[1].reason, IOD_SCHED_REASON_GPUS);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

static char *run_json(bool no_cache)
{
	struct iod_sched_shape a, b;
	shape_dgx(&a);
	shape_pairs(&b);
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sa, sb, nid;
	if (iod_sched_cluster_new(16, 256, &c, &e) || iod_sched_shape_add(c, &a, &sa, &e) ||
	    iod_sched_shape_add(c, &b, &sb, &e))
		return NULL;
	for (unsigned i = 0; i < 6; i++) {
		char name[8];
		snprintf(name, sizeof(name), "n%u", i);
		struct iod_sched_node_spec ns = {.name = name, .shape = i % 2 ? sb : sa};
		iod_sched_node_add(c, &ns, &nid, &e);
	}
	struct iod_sched_request r[5] = {req("ps", 3, 1), req("w", 8, 2), req("big", 3, 8),
	                                 req("one", 9, 1), req("anti", 4, 1)};
	r[0].stateful = true;
	r[1].cpus = 4;
	r[1].mem_bytes = 1000000000;
	r[1].gpu_link = IOD_SCHED_LINK_NVLINK;
	r[3].numa = IOD_SCHED_NUMA_SINGLE;
	r[3].cpus = 2;
	r[4].anti = IOD_SCHED_DOMAIN_NODE;
	r[4].spread = true;
	struct iod_sched_result res;
	struct iod_sched_opts o;
	iod_sched_opts_default(&o);
	o.no_cache = no_cache;
	if (iod_sched_result_init(&res, 256, 8) || iod_sched_place(c, r, 5, &o, &res, &e))
		return NULL;
	json_t *j = iod_sched_result_to_json(c, &res);
	char *s = iod_json_string(j, true);
	struct iod_buf t;
	iod_buf_init(&t);
	iod_sched_result_format(c, &res, &t);
	size_t len = strlen(s) + t.len + 2;
	char *both = malloc(len);
	snprintf(both, len, "%s\n%s", s, t.data);
	free(s);
	iod_buf_free(&t);
	json_decref(j);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
	return both;
}

TEST(deterministic_byte_for_byte)
{
	char *a = run_json(false), *b = run_json(false);
	CHECK(a && b);
	CHECK_STR(a, b);
	CHECK_CONTAINS(a, "\"replica\":\"ps-0\"");
	CHECK_CONTAINS(a, "big-2");
	free(a);
	free(b);
}

TEST(node_cache_changes_no_decision)
{
	/* the per-node evaluation cache and failure reuse are pure speed-ups */
	char *a = run_json(false), *b = run_json(true);
	CHECK(a && b);
	CHECK_STR(a, b);
	CHECK_CONTAINS(a, "\"unplaced\":[{");
	free(a);
	free(b);
}

TEST(explain_totals_are_weighted_sums)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 3, NULL);
	struct iod_sched_request r = req("x", 1, 2);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	const struct iod_sched_explain *x = &res.p[0].explain;
	CHECK_EQ(x->cand_n, 3);
	CHECK_EQ(x->feasible, 3);
	for (unsigned i = 0; i < x->cand_n; i++) {
		int64_t sum = 0;
		for (unsigned t = 0; t < IOD_SCHED_TERMS_N; t++)
			sum += (int64_t)x->weights.w[t] * x->cand[i].terms[t];
		CHECK_EQ(sum, x->cand[i].total);
		if (i)
			CHECK(x->cand[i - 1].total >= x->cand[i].total);
	}
	CHECK_EQ(x->cand[0].node, res.p[0].node);
	json_t *j = iod_sched_explain_to_json(c, x);
	char *js = iod_json_string(j, true);
	CHECK_CONTAINS(js, "\"gpu-set\":");
	CHECK_CONTAINS(js, "\"frag\":");
	/* the persisted form prints back as text for `iod explain` */
	json_t *back;
	struct iod_err e = {0};
	CHECK_EQ(iod_json_parse(js, strlen(js), &back, &e), 0);
	struct iod_buf t;
	iod_buf_init(&t);
	CHECK_EQ(iod_sched_explain_format_json(back, &t), 0);
	CHECK_CONTAINS(t.data, "3 nodes scored, 3 feasible; weights gpu-set=3");
	char line[64];
	snprintf(line, sizeof(line), "  * %-12s total %-6lld",
	         iod_sched_node_name(c, x->cand[0].node), (long long)x->cand[0].total);
	CHECK_CONTAINS(t.data, line);
	iod_buf_free(&t);
	CHECK_EQ(iod_sched_explain_format_json(json_object_get(back, "weights"), &t), -EINVAL);
	iod_buf_free(&t);
	json_decref(back);
	free(js);
	json_decref(j);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(weights_change_the_choice)
{
	/* with pack off and spread's weight on, a spread service goes wide;
	 * with every weight 0 the first feasible node wins */
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 3, NULL);
	struct iod_sched_request r = req("w", 3, 1);
	struct iod_sched_opts o;
	iod_sched_opts_default(&o);
	memset(&o.weights, 0, sizeof(o.weights));
	struct iod_sched_result res;
	struct iod_err e = {0};
	CHECK_EQ(iod_sched_result_init(&res, 16, 4), 0);
	CHECK_EQ(iod_sched_place(c, &r, 1, &o, &res, &e), 0);
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ(res.p[i].node, 0);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(release_returns_everything)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	struct iod_sched_request r = req("x", 2, 3);
	r.cpus = 10;
	r.mem_bytes = 5000000000ull;
	r.nic_bw_bps = 400000000000ull;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 2);
	CHECK_EQ(iod_sched_release(c, res.p[0].replica), 0);
	CHECK_EQ(iod_sched_release(c, res.p[0].replica), -ENOENT);
	CHECK_EQ(iod_sched_release(c, res.p[1].replica), 0);
	CHECK_EQ(iod_sched_node_gpus_free(c, 0), 0xFF);
	iod_sched_result_free(&res);
	/* the same request again lands exactly where it did */
	r = req("y", 1, 8);
	r.cpus = 112;
	r.mem_bytes = 2000000000000ull;
	r.numa = IOD_SCHED_NUMA_NONE;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK(res.p[0].placed);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(invalid_requests_and_limits)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 1, NULL);
	struct iod_sched_request r = req("", 1, 1);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), -EINVAL);
	iod_sched_result_free(&res);
	r = req("x", 1, 17);
	CHECK_EQ(place(c, &r, 1, false, &res), -EINVAL);
	iod_sched_result_free(&res);
	r = req("x", 5000, 0);
	CHECK_EQ(place(c, &r, 1, false, &res), -ENOSPC);
	iod_sched_result_free(&res);
	r = req("x", IOD_SCHED_DEPLOY_MAX + 1, 0);
	CHECK_EQ(place(c, &r, 1, false, &res), -E2BIG);
	iod_sched_result_free(&res);
	struct iod_err e = {0};
	struct iod_sched_shape big;
	iod_sched_shape_init(&big, "big", 16, 1);
	big.gpus_n = 17;
	uint32_t id;
	CHECK_EQ(iod_sched_shape_add(c, &big, &id, &e), -E2BIG);
	CHECK_CONTAINS(e.msg, "17 GPUs exceed");
	iod_sched_cluster_free(c);
	CHECK_EQ(iod_sched_cluster_new(0, 1, &c, &e), -EINVAL);
}

TEST(replica_table_full_is_an_error)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sid, nid;
	CHECK_EQ(iod_sched_cluster_new(1, 2, &c, &e), 0);
	CHECK_EQ(iod_sched_shape_add(c, &s, &sid, &e), 0);
	struct iod_sched_node_spec ns = {.name = "n0", .shape = sid};
	CHECK_EQ(iod_sched_node_add(c, &ns, &nid, &e), 0);
	struct iod_sched_request r = req("x", 3, 0);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), -ENOSPC);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(rebalance_frees_islands_within_bound)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 4, NULL);
	/* one 1-GPU replica per node (spread): each node has one broken pair */
	struct iod_sched_request r = req("small", 4, 1);
	r.spread = true;
	r.anti = IOD_SCHED_DOMAIN_NONE;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 4);
	uint32_t before = iod_sched_islands_free(c, 2);
	CHECK_EQ(before, 4);
	struct iod_sched_plan plan;
	struct iod_err e = {0};
	for (uint32_t bound = 0; bound <= 3; bound++) {
		CHECK_EQ(iod_sched_rebalance(c, IOD_SCHED_GOAL_ISLANDS, 0, bound, false, &plan, &e),
		         0);
		CHECK(plan.n <= bound);
		CHECK(plan.islands_after >= plan.islands_before);
		CHECK_EQ(plan.islands_after - plan.islands_before, plan.n);
		/* not applied: the cluster is unchanged */
		CHECK_EQ(iod_sched_islands_free(c, 2), before);
	}
	/* two moves fill two broken pairs and free two: 6 whole pairs, then nothing helps */
	CHECK_EQ(iod_sched_rebalance(c, IOD_SCHED_GOAL_ISLANDS, 0, 3, true, &plan, &e), 0);
	CHECK_EQ(plan.n, 2);
	CHECK_EQ(iod_sched_islands_free(c, 2), 6);
	CHECK_EQ(iod_sched_rebalance(c, IOD_SCHED_GOAL_ISLANDS, 0, 65, false, &plan, &e), -EINVAL);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(rebalance_never_breaks_anti_affinity)
{
	struct iod_sched_shape s;
	shape_pairs(&s);
	struct iod_sched_cluster *c = mk(&s, 3, NULL);
	struct iod_sched_request r = req("ps", 3, 1);
	r.anti = IOD_SCHED_DOMAIN_NODE;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 3);
	struct iod_sched_plan plan;
	struct iod_err e = {0};
	/* every node holds one replica: consolidating would break anti-affinity */
	CHECK_EQ(iod_sched_rebalance(c, IOD_SCHED_GOAL_ISLANDS, 0, 10, true, &plan, &e), 0);
	for (uint32_t i = 0; i < plan.n; i++)
		CHECK(plan.moves[i].to_node == plan.moves[i].from_node);
	uint32_t nodes_seen = 0;
	for (uint32_t i = 0; i < 3; i++) {
		struct iod_sched_replica_info ri;
		CHECK_EQ(iod_sched_replica_get(c, res.p[i].replica, &ri), 0);
		CHECK(!(nodes_seen >> ri.node & 1));
		nodes_seen |= 1u << ri.node;
	}
	/* draining a node has nowhere to go */
	CHECK_EQ(iod_sched_rebalance(c, IOD_SCHED_GOAL_DRAIN, 0, 10, false, &plan, &e), 0);
	CHECK_EQ(plan.n, 0);
	CHECK_EQ(plan.stuck, 1);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(rebalance_drain_moves_everything_within_bound)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 2, NULL);
	struct iod_sched_request r = req("w", 4, 2);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_EQ(res.placed_n, 4);
	CHECK_EQ(res.p[0].node, res.p[3].node); /* packed */
	uint32_t from = res.p[0].node;
	struct iod_sched_plan plan;
	struct iod_err e = {0};
	CHECK_EQ(iod_sched_rebalance(c, IOD_SCHED_GOAL_DRAIN, from, 3, false, &plan, &e), 0);
	CHECK_EQ(plan.n, 3);
	CHECK_CONTAINS(plan.why, "1 left for a later plan");
	CHECK_EQ(iod_sched_rebalance(c, IOD_SCHED_GOAL_DRAIN, from, 8, true, &plan, &e), 0);
	CHECK_EQ(plan.n, 4);
	for (unsigned i = 0; i < 4; i++)
		CHECK(plan.moves[i].to_node != from);
	CHECK_EQ(iod_sched_node_gpus_free(c, from), 0xFF);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(request_from_spec)
{
	struct iod_spec_service sv;
	memset(&sv, 0, sizeof(sv));
	sv.name = "worker-node";
	sv.type = IOD_SERVICE_STATEFUL;
	sv.replicas = 8;
	sv.res.gpu = 4;
	sv.res.cpu_millis = 2500;
	sv.res.mem_bytes = 128000000000ull;
	sv.res.network.bandwidth_bps = 100000000000ull;
	sv.placement.numa = IOD_NUMA_SINGLE;
	sv.placement.gpu_link = IOD_GPU_LINK_NVLINK;
	sv.placement.anti = IOD_ANTI_RACK;
	sv.placement.spread = IOD_SPREAD_SPREAD;
	sv.gang = true;
	struct iod_sched_request r;
	struct iod_err e = {0};
	CHECK_EQ(iod_sched_request_from_spec(&sv, &r, &e), 0);
	CHECK_STR(r.service, "worker-node");
	CHECK_EQ(r.replicas, 8);
	CHECK_EQ(r.gpus, 4);
	CHECK_EQ(r.cpus, 3);
	CHECK_U64(r.mem_bytes, 128000000000ull);
	CHECK_U64(r.nic_bw_bps, 100000000000ull);
	CHECK_EQ(r.numa, IOD_SCHED_NUMA_SINGLE);
	CHECK_EQ(r.gpu_link, IOD_SCHED_LINK_NVLINK);
	CHECK_EQ(r.anti, IOD_SCHED_DOMAIN_RACK);
	CHECK(r.spread && r.stateful && r.gang);
	sv.res.gpu = 0;
	sv.res.compute.type = IOD_COMPUTE_TENSOR_CORE;
	sv.res.compute.count = 8;
	sv.placement.numa = IOD_NUMA_ANY;
	CHECK_EQ(iod_sched_request_from_spec(&sv, &r, &e), 0);
	CHECK_EQ(r.gpus, 8);
	CHECK_EQ(r.numa, IOD_SCHED_NUMA_BEST_EFFORT);
	sv.placement.numa = IOD_NUMA_RESTRICTED;
	CHECK_EQ(iod_sched_request_from_spec(&sv, &r, &e), 0);
	CHECK_EQ(r.numa, IOD_SCHED_NUMA_RESTRICTED);
	sv.placement.numa = IOD_NUMA_NONE;
	CHECK_EQ(iod_sched_request_from_spec(&sv, &r, &e), 0);
	CHECK_EQ(r.numa, IOD_SCHED_NUMA_NONE);
	sv.res.compute.count = 32;
	CHECK_EQ(iod_sched_request_from_spec(&sv, &r, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "32 GPUs per replica");
}

TEST(names_parse)
{
	enum iod_sched_numa p;
	CHECK_EQ(iod_sched_numa_parse("single-numa-node", &p), 0);
	CHECK_EQ(p, IOD_SCHED_NUMA_SINGLE);
	CHECK_EQ(iod_sched_numa_parse("restricted", &p), 0);
	CHECK_EQ(p, IOD_SCHED_NUMA_RESTRICTED);
	CHECK_EQ(iod_sched_numa_parse("bogus", &p), -EINVAL);
	CHECK_STR(iod_sched_reason_name(IOD_SCHED_REASON_GPU_LINK), "gpu-link");
	CHECK_STR(iod_sched_term_name(IOD_SCHED_TERM_FRAG), "frag");
	char buf[64];
	iod_sched_gpus_format(0x25, buf, sizeof(buf));
	CHECK_STR(buf, "GPU0, GPU2, GPU5");
}

TEST(shape_from_topo_models)
{
	static struct iod_topo_node t;
	struct iod_sched_shape s;
	struct iod_err e = {0};
	CHECK_EQ(iod_topo_model_load("dgx-h100", &t, &e), 0);
	CHECK_EQ(iod_sched_shape_from_topo(&t, &s, &e), 0);
	CHECK_EQ(s.gpus_n, 8);
	CHECK_EQ(s.numa_n, 2);
	for (unsigned i = 0; i < 8; i++) {
		CHECK_EQ(s.island[i], 0xFF);
		CHECK_EQ(s.nvlink[i], 0xFF & ~(1u << i));
		for (unsigned j = 0; j < 8; j++)
			if (i != j)
				CHECK_EQ(s.pair_score[i][j], iod_topo_gpu_pair_score(&t, i, j));
	}
	/* every GPU has a NIC on its PCIe switch */
	uint32_t covered = 0;
	for (unsigned k = 0; k < s.nics_n; k++)
		covered |= s.nics[k].gpu_mask;
	CHECK_EQ(covered, 0xFF);

	CHECK_EQ(iod_topo_model_generic(4, &t, &e), 0);
	CHECK_EQ(iod_sched_shape_from_topo(&t, &s, &e), 0);
	CHECK_EQ(s.gpus_n, 4);
	CHECK_EQ(s.island[0], 0x3);
	CHECK_EQ(s.island[3], 0xC);
	CHECK(s.pair_score[0][1] > s.pair_score[0][2]);
	CHECK(s.numa_mem_bytes[0] > 0);
	CHECK(!iod_bitmap_empty(&s.numa_cpus[1]));
}

/* Brute force: the best pair-score sum over every feasible k-subset. */
static bool brute_best(const struct iod_sched_shape *s, uint32_t free_mask, uint32_t k, bool nvlink,
                       bool single, uint32_t *best)
{
	bool any = false;
	for (uint32_t set = 0; set < (1u << s->gpus_n); set++) {
		if ((set & ~free_mask) || (uint32_t)__builtin_popcount(set) != k)
			continue;
		uint32_t numa = 0, sc = 0;
		bool ok = true;
		for (uint32_t i = 0; i < s->gpus_n; i++) {
			if (!(set >> i & 1))
				continue;
			numa |= 1u << s->gpu_numa[i];
			for (uint32_t j = i + 1; j < s->gpus_n; j++)
				if (set >> j & 1) {
					sc += s->pair_score[i][j];
					ok &= !nvlink || (s->nvlink[i] >> j & 1);
				}
		}
		if (!ok || (single && __builtin_popcount(numa) != 1))
			continue;
		if (!any || sc > *best)
			*best = sc;
		any = true;
	}
	return any;
}

TEST(gpu_set_matches_brute_force_random)
{
	/* the bounded, memoized search against brute force on random shapes */
	struct iod_rng rng;
	iod_rng_seed(&rng, 2024);
	for (unsigned it = 0; it < 300; it++) {
		struct iod_sched_shape s;
		uint32_t n = 6 + (uint32_t)iod_rng_below(&rng, 7); /* 6..12 GPUs */
		iod_sched_shape_init(&s, "rnd", n, 2);
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t j = i + 1; j < n; j++) {
				uint16_t sc = (uint16_t)(10 * (1 + iod_rng_below(&rng, 6)));
				if (iod_rng_below(&rng, 2)) {
					sc = (uint16_t)(sc + 100 * (1 + iod_rng_below(&rng, 3)));
					s.nvlink[i] |= 1u << j;
					s.nvlink[j] |= 1u << i;
				}
				s.pair_score[i][j] = s.pair_score[j][i] = sc;
			}
		iod_bitmap_set_range(&s.numa_cpus[0], 0, 7);
		iod_bitmap_set_range(&s.numa_cpus[1], 8, 15);
		s.numa_mem_bytes[0] = s.numa_mem_bytes[1] = 1ull << 36;
		uint32_t taken = (uint32_t)iod_rng_next(&rng) & ((1u << n) - 1) & ~1u;
		uint32_t free_mask = ((1u << n) - 1) & ~taken;
		uint32_t k =
		    1 + (uint32_t)iod_rng_below(&rng, (uint32_t)__builtin_popcount(free_mask));
		bool nvlink = iod_rng_below(&rng, 2), single = iod_rng_below(&rng, 3) == 0;

		struct iod_sched_cluster *c;
		struct iod_err e = {0};
		uint32_t sid, nid;
		CHECK_EQ(iod_sched_cluster_new(1, 2, &c, &e), 0);
		CHECK_EQ(iod_sched_shape_add(c, &s, &sid, &e), 0);
		struct iod_sched_node_spec ns = {.name = "n0", .shape = sid, .gpus_used = taken};
		CHECK_EQ(iod_sched_node_add(c, &ns, &nid, &e), 0);
		struct iod_sched_request r = req("q", 1, k);
		r.gpu_link = nvlink ? IOD_SCHED_LINK_NVLINK : IOD_SCHED_LINK_ANY;
		r.numa = single ? IOD_SCHED_NUMA_SINGLE : IOD_SCHED_NUMA_BEST_EFFORT;
		struct iod_sched_result res;
		CHECK_EQ(place(c, &r, 1, false, &res), 0);
		uint32_t best = 0;
		bool feasible = brute_best(&s, free_mask, k, nvlink, single, &best);
		CHECK_MSG(feasible == res.p[0].placed, "instance %u: feasible %d placed %d (%s)",
		          it, feasible, res.p[0].placed, res.p[0].why);
		if (feasible)
			CHECK_MSG(pair_sum(&s, res.p[0].gpu_mask) == best, "instance %u: %u < %u",
			          it, pair_sum(&s, res.p[0].gpu_mask), best);
		iod_sched_result_free(&res);
		iod_sched_cluster_free(c);
	}
}

/*
 * Real node shapes for GPU-set sequences: PCIe switches of two GPUs (PIX,
 * 50), GPU0-3 on NUMA 0 (NODE, 20), SYS (10) across; nv[i][j] NVLinks of
 * IOD_TOPO_SCORE_NVLINK each, as iod_topo_gpu_pair_score counts them.
 */
static void shape_8(struct iod_sched_shape *s, const char *name, const uint8_t nv[8][8])
{
	iod_sched_shape_init(s, name, 8, 2);
	for (unsigned i = 0; i < 8; i++)
		for (unsigned j = 0; j < 8; j++) {
			if (i == j)
				continue;
			unsigned pcie = i / 2 == j / 2 ? 50 : i / 4 == j / 4 ? 20 : 10;
			s->pair_score[i][j] = (uint16_t)(pcie + IOD_TOPO_SCORE_NVLINK * nv[i][j]);
			if (nv[i][j])
				s->nvlink[i] |= 1u << j;
		}
	iod_bitmap_set_range(&s->numa_cpus[0], 0, 19);
	iod_bitmap_set_range(&s->numa_cpus[1], 20, 39);
	s->numa_mem_bytes[0] = s->numa_mem_bytes[1] = 1ull << 39;
	iod_sched_shape_finish(s);
}

/* DGX-1 with P100: a hybrid cube mesh of single NVLinks (each quad all to
 * all, GPU i to i+4). */
static const uint8_t nv_dgx1p[8][8] = {{0, 1, 1, 1, 1, 0, 0, 0}, {1, 0, 1, 1, 0, 1, 0, 0},
                                       {1, 1, 0, 1, 0, 0, 1, 0}, {1, 1, 1, 0, 0, 0, 0, 1},
                                       {1, 0, 0, 0, 0, 1, 1, 1}, {0, 1, 0, 0, 1, 0, 1, 1},
                                       {0, 0, 1, 0, 1, 1, 0, 1}, {0, 0, 0, 1, 1, 1, 1, 0}};
/* DGX-1 with V100: six links per GPU, some pairs doubled (nvidia-smi topo -m
 * of a DGX-1V). */
static const uint8_t nv_dgx1v[8][8] = {{0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0},
                                       {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
                                       {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
                                       {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0}};
/* A PCIe server with NVLink bridges between the GPUs of each switch. */
static const uint8_t nv_pairs8[8][8] = {{0, 2, 0, 0, 0, 0, 0, 0}, {2, 0, 0, 0, 0, 0, 0, 0},
                                        {0, 0, 0, 2, 0, 0, 0, 0}, {0, 0, 2, 0, 0, 0, 0, 0},
                                        {0, 0, 0, 0, 0, 2, 0, 0}, {0, 0, 0, 0, 2, 0, 0, 0},
                                        {0, 0, 0, 0, 0, 0, 0, 2}, {0, 0, 0, 0, 0, 0, 2, 0}};
/* Eight PCIe GPUs, no NVLink. */
static const uint8_t nv_none8[8][8] = {{0}};

/* The greedy reference: the best-scoring set of the free GPUs, lowest ids
 * on ties (what the scheduler fell back to before). */
static uint32_t greedy_set(const struct iod_sched_shape *s, uint32_t free_mask, uint32_t k)
{
	uint32_t best = 0, best_sc = 0;
	for (uint32_t set = 1; set < 256; set++) {
		if ((set & ~free_mask) || (uint32_t)__builtin_popcount(set) != k)
			continue;
		uint32_t sc = pair_sum(s, set);
		if (!best || sc > best_sc)
			best = set, best_sc = sc;
	}
	return best;
}

struct seq_stats {
	uint32_t seqs, better, worse; /* sequences run, above greedy, below it */
	uint64_t total, greedy;       /* summed pair scores over all sequences */
};

/* Place the requests of sizes ks[0..n) one after another on one fresh node;
 * add the sequence's total score (and greedy's) to st. */
static void run_seq(const struct iod_sched_shape *s, const uint32_t *ks, uint32_t n,
                    struct seq_stats *st)
{
	struct iod_sched_cluster *c = mk(s, 1, NULL);
	uint32_t free_g = 0xFF, total = 0, greedy = 0;
	for (uint32_t i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "s%u", i);
		struct iod_sched_request r = req(name, 1, ks[i]);
		struct iod_sched_result res;
		CHECK_EQ(place(c, &r, 1, false, &res), 0);
		CHECK(res.p[0].placed);
		total += pair_sum(s, res.p[0].gpu_mask);
		if (getenv("IOD_TEST_SEQ_TRACE"))
			printf("    %s k=%u -> %#x (%u)\n", s->model, ks[i], res.p[0].gpu_mask,
			       pair_sum(s, res.p[0].gpu_mask));
		iod_sched_result_free(&res);
		uint32_t g = greedy_set(s, free_g, ks[i]);
		greedy += pair_sum(s, g);
		free_g &= ~g;
	}
	st->seqs++;
	st->total += total;
	st->greedy += greedy;
	st->better += total > greedy;
	st->worse += total < greedy;
	iod_sched_cluster_free(c);
	char seq[32];
	size_t o = 0;
	for (uint32_t i = 0; i < n; i++)
		o += (size_t)snprintf(seq + o, sizeof(seq) - o, "%s%u", i ? "," : "", ks[i]);
	CHECK_MSG(total >= greedy, "%s: sequence %s below greedy (%u < %u)", s->model, seq, total,
	          greedy);
}

/* Every sequence of requests of 1, 2, 3 or 4 GPUs that fits in 8. */
static void all_seqs(const struct iod_sched_shape *s, uint32_t *ks, uint32_t n, uint32_t used,
                     struct seq_stats *st)
{
	if (n)
		run_seq(s, ks, n, st);
	for (uint32_t k = 1; k <= 4 && used + k <= 8; k++) {
		ks[n] = k;
		all_seqs(s, ks, n + 1, used + k, st);
	}
}

TEST(gpu_set_sequences_never_below_greedy)
{
	const struct {
		const char *name;
		const uint8_t (*nv)[8];
		uint32_t min_better; /* sequences that must beat greedy */
	} shapes[] = {{"dgx1-p100", nv_dgx1p, 1},
	              {"dgx1-v100", nv_dgx1v, 1},
	              {"pcie-nvlink-pairs", nv_pairs8, 1},
	              {"pcie-8", nv_none8, 0}};
	for (size_t i = 0; i < IOD_ARRAY_LEN(shapes); i++) {
		struct iod_sched_shape s;
		shape_8(&s, shapes[i].name, shapes[i].nv);
		struct seq_stats st = {0};
		uint32_t ks[8];
		all_seqs(&s, ks, 0, 0, &st);
		printf("  %s: %u sequences, %u above greedy, %u below; score %llu vs greedy %llu\n",
		       shapes[i].name, st.seqs, st.better, st.worse, (unsigned long long)st.total,
		       (unsigned long long)st.greedy);
		CHECK_EQ(st.worse, 0u);
		CHECK(st.better >= shapes[i].min_better);
	}
}

TEST(gpu_set_tie_keeps_nvlink_island_free)
{
	/* DGX-1 P100 with GPU6-7 taken: pairs 0-1, 2-3 and 4-5 score the same
	 * (NVLink + PCIe switch); 4-5 leaves the all-NVLink quad 0-3 free, so
	 * the next 4-GPU request gets it (780) instead of 2,3,4,5 (340). */
	struct iod_sched_shape s;
	shape_8(&s, "dgx1-p100", nv_dgx1p);
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sid, nid;
	CHECK_EQ(iod_sched_cluster_new(1, 8, &c, &e), 0);
	CHECK_EQ(iod_sched_shape_add(c, &s, &sid, &e), 0);
	struct iod_sched_node_spec ns = {.name = "n0", .shape = sid, .gpus_used = 0xC0};
	CHECK_EQ(iod_sched_node_add(c, &ns, &nid, &e), 0);
	struct iod_sched_request two = req("two", 1, 2), four = req("four", 1, 4);
	struct iod_sched_result res;
	CHECK_EQ(place(c, &two, 1, false, &res), 0);
	CHECK_EQ(res.p[0].gpu_mask, 0x30);
	iod_sched_result_free(&res);
	CHECK_EQ(place(c, &four, 1, false, &res), 0);
	CHECK_EQ(res.p[0].gpu_mask, 0x0F);
	CHECK_EQ(pair_sum(&s, res.p[0].gpu_mask), 780);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(adopt_existing_placements)
{
	struct iod_sched_shape s;
	shape_dgx(&s);
	struct iod_sched_cluster *c = mk(&s, 2, NULL);
	struct iod_sched_request r = req("w", 1, 4);
	r.cpus = 2;
	r.mem_bytes = 10000000000ull;
	r.anti = IOD_SCHED_DOMAIN_NODE;
	struct iod_sched_existing x = {
	    .ordinal = 4, .node = 0, .gpu_mask = 0x0F, .mem_numa = 0, .nic = 0};
	iod_bitmap_set_range(&x.cpus, 0, 1);
	uint32_t id;
	struct iod_err e = {0};
	CHECK_EQ(iod_sched_adopt(c, &r, &x, &id, &e), 0);
	CHECK_EQ(iod_sched_node_gpus_free(c, 0), 0xF0);
	/* the same GPUs again are taken */
	x.ordinal = 5;
	CHECK_EQ(iod_sched_adopt(c, &r, &x, &id, &e), -EBUSY);
	CHECK_CONTAINS(e.msg, "GPU0, GPU1, GPU2, GPU3 on n0 not free");
	x.gpu_mask = 0xF0;
	CHECK_EQ(iod_sched_adopt(c, &r, &x, &id, &e), -EBUSY);
	CHECK_CONTAINS(e.msg, "CPUs 0-1 on n0 not free");
	x.node = 9;
	CHECK_EQ(iod_sched_adopt(c, &r, &x, &id, &e), -ENOENT);
	/* new replicas continue the ordinals and respect anti-affinity with it */
	struct iod_sched_result res;
	r.replicas = 2;
	CHECK_EQ(place(c, &r, 1, false, &res), 0);
	CHECK_STR(res.p[0].name, "w-5");
	CHECK_EQ(res.p[0].node, 1);
	CHECK_EQ(res.p[1].reason, IOD_SCHED_REASON_ANTI_AFFINITY);
	iod_sched_result_free(&res);
	CHECK_EQ(iod_sched_release(c, id), 0);
	CHECK_EQ(iod_sched_node_gpus_free(c, 0), 0xFF);
	iod_sched_cluster_free(c);
}

TEST(pcie_link_leaves_nvlink_nodes_free)
{
	/* a replica that needs no NVLink takes the PCIe node, not the DGX */
	struct iod_sched_shape a, b;
	shape_dgx(&a);
	iod_sched_shape_init(&b, "t-pcie", 8, 2);
	for (unsigned i = 0; i < 8; i++)
		for (unsigned j = 0; j < 8; j++)
			if (i != j)
				b.pair_score[i][j] = i / 2 == j / 2 ? 50 : 20;
	iod_bitmap_set_range(&b.numa_cpus[0], 0, 15);
	iod_bitmap_set_range(&b.numa_cpus[1], 16, 31);
	b.numa_mem_bytes[0] = b.numa_mem_bytes[1] = 1ull << 38;
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sa, sb, nid;
	CHECK_EQ(iod_sched_cluster_new(4, 16, &c, &e), 0);
	CHECK_EQ(iod_sched_shape_add(c, &a, &sa, &e), 0);
	CHECK_EQ(iod_sched_shape_add(c, &b, &sb, &e), 0);
	struct iod_sched_node_spec n0 = {.name = "dgx", .shape = sa};
	struct iod_sched_node_spec n1 = {.name = "pcie", .shape = sb};
	CHECK_EQ(iod_sched_node_add(c, &n0, &nid, &e), 0);
	CHECK_EQ(iod_sched_node_add(c, &n1, &nid, &e), 0);
	struct iod_sched_request r[2] = {req("p", 1, 2), req("any", 1, 2)};
	r[0].gpu_link = IOD_SCHED_LINK_PCIE;
	struct iod_sched_result res;
	CHECK_EQ(place(c, r, 2, false, &res), 0);
	CHECK_STR(iod_sched_node_name(c, res.p[0].node), "pcie");
	CHECK_EQ(res.p[0].gpu_mask, 0x3);
	CHECK_STR(iod_sched_node_name(c, res.p[1].node), "dgx");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}
