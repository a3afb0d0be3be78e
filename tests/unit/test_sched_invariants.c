/*
 * test_sched_invariants.c: seeded random sequences of deploys, releases and
 * rebalancing plans on a mixed cluster built from topo/ models, with the
 * scheduler's invariants checked after every step:
 *   - no GPU, CPU or accelerator is held by two replicas, and a node's free
 *     GPUs are exactly the ones no replica holds;
 *   - every GPU has the memory its replica asked for, every replica has the
 *     accelerators it asked for;
 *   - anti-affinity is never broken (by deploys or by moves);
 *   - single-numa-node replicas have GPUs, CPUs and memory on one NUMA node;
 *     restricted replicas span the fewest NUMA nodes and take CPUs there;
 *   - a rebalancing plan never exceeds its move budget and never lowers the
 *     number of whole NVLink islands.
 * A failing seed is printed; make it a regression test.
 */
#include "harness.h"
#include "iod/sched.h"
#include "iod/topo.h"

#include <stdlib.h>

#define NODES 12
#define REPLICAS_MAX 512

static struct iod_sched_shape shapes[3];

static int load(void)
{
	static const char *const names[] = {"dgx-h100", "pcie-8gpu", "generic-4"};
	static struct iod_topo_node t;
	struct iod_err e = {0};
	for (unsigned i = 0; i < 3; i++)
		if (iod_topo_model_load(names[i], &t, &e) ||
		    iod_sched_shape_from_topo(&t, &shapes[i], &e))
			return -1;
	return 0;
}

/* Requests indexed by service: varied sizes and policies. */
static void make_request(unsigned svc, struct iod_sched_request *r)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->service, sizeof(r->service), "s%u", svc);
	static const uint32_t gpus[] = {1, 2, 4, 8, 0, 1, 2, 3};
	r->gpus = gpus[svc % 8];
	r->numa = (enum iod_sched_numa)(svc % 4);
	r->cpus = 1 + svc % 5;
	r->mem_bytes = (uint64_t)(svc % 3) * 20000000000ull;
	r->nic_bw_bps = svc % 4 == 1 ? 25000000000ull : 0;
	r->anti = svc % 5 == 2   ? IOD_SCHED_DOMAIN_NODE
	          : svc % 5 == 3 ? IOD_SCHED_DOMAIN_RACK
	                         : IOD_SCHED_DOMAIN_NONE;
	r->stateful = svc % 3 == 0;
	r->spread = svc % 7 == 4;
	r->gang = svc % 6 == 5;
	r->gpu_link = svc % 4 == 2 ? IOD_SCHED_LINK_NVLINK : IOD_SCHED_LINK_ANY;
	r->gpu_mem_bytes = svc % 11 == 7 ? 60000000000ull : 0; /* not the 48 GiB L40S */
	if (svc % 8 == 6) {
		r->acc_type = IOD_SCHED_ACC_DPU; /* dgx-h100 has one */
		r->accs = 1;
	}
}

static int check_all(struct iod_sched_cluster *c, const struct iod_sched_request *reqs,
                     unsigned nreqs, char *why, size_t len)
{
	uint32_t held[NODES] = {0}, held_acc[NODES] = {0};
	struct iod_bitmap cpus[NODES];
	unsigned per_node[NODES][16] = {{0}}, per_rack[NODES][16] = {{0}};
	for (unsigned i = 0; i < NODES; i++)
		iod_bitmap_zero(&cpus[i]);
	for (uint32_t id = 0; id < REPLICAS_MAX; id++) {
		struct iod_sched_replica_info ri;
		if (iod_sched_replica_get(c, id, &ri))
			continue;
		if (held[ri.node] & ri.gpu_mask) {
			snprintf(why, len, "%s: GPUs held twice on node %u", ri.name, ri.node);
			return -1;
		}
		held[ri.node] |= ri.gpu_mask;
		if (held_acc[ri.node] & ri.acc_mask) {
			snprintf(why, len, "%s: accelerators held twice on node %u", ri.name,
			         ri.node);
			return -1;
		}
		held_acc[ri.node] |= ri.acc_mask;
		struct iod_bitmap both = cpus[ri.node];
		iod_bitmap_and(&both, &ri.cpus);
		if (!iod_bitmap_empty(&both)) {
			snprintf(why, len, "%s: CPUs held twice on node %u", ri.name, ri.node);
			return -1;
		}
		iod_bitmap_or(&cpus[ri.node], &ri.cpus);
		unsigned svc = (unsigned)atoi(ri.service + 1);
		if (svc >= nreqs)
			continue;
		const struct iod_sched_request *r = &reqs[svc];
		per_node[ri.node][svc]++;
		per_rack[ri.node / 3][svc]++;
		if ((r->anti == IOD_SCHED_DOMAIN_NODE && per_node[ri.node][svc] > 1) ||
		    (r->anti == IOD_SCHED_DOMAIN_RACK && per_rack[ri.node / 3][svc] > 1)) {
			snprintf(why, len, "%s: anti-affinity broken on node %u", ri.name, ri.node);
			return -1;
		}
		if ((unsigned)__builtin_popcount(ri.gpu_mask) != r->gpus ||
		    iod_bitmap_count(&ri.cpus) != r->cpus) {
			snprintf(why, len, "%s: wrong amount of GPUs or CPUs", ri.name);
			return -1;
		}
		const struct iod_sched_shape *s = iod_sched_node_shape(c, ri.node);
		if ((unsigned)__builtin_popcount(ri.acc_mask) != r->accs) {
			snprintf(why, len, "%s: %d accelerators for %u asked", ri.name,
			         __builtin_popcount(ri.acc_mask), r->accs);
			return -1;
		}
		for (uint32_t a = 0; a < s->accs_n; a++)
			if ((ri.acc_mask >> a & 1) && s->accs[a].type != r->acc_type) {
				snprintf(why, len, "%s: accelerator of the wrong type", ri.name);
				return -1;
			}
		for (uint32_t g = 0; g < s->gpus_n; g++)
			if ((ri.gpu_mask >> g & 1) && s->gpu_mem_bytes[g] < r->gpu_mem_bytes) {
				snprintf(why, len, "%s: GPU%u has less memory than asked", ri.name,
				         g);
				return -1;
			}
		uint32_t numa = 0;
		for (uint32_t g = 0; g < s->gpus_n; g++)
			if (ri.gpu_mask >> g & 1)
				numa |= 1u << s->gpu_numa[g];
		uint32_t cpu_numa = 0;
		for (uint32_t n = 0; n < s->numa_n; n++) {
			struct iod_bitmap in = ri.cpus;
			iod_bitmap_and(&in, &s->numa_cpus[n]);
			if (!iod_bitmap_empty(&in))
				cpu_numa |= 1u << n;
		}
		if (r->numa == IOD_SCHED_NUMA_SINGLE) {
			uint32_t all =
			    numa | cpu_numa | (ri.mem_numa >= 0 ? 1u << ri.mem_numa : 0xFFu);
			if (__builtin_popcount(all) > 1) {
				snprintf(why, len, "%s: single-numa-node spans NUMA mask %#x",
				         ri.name, all);
				return -1;
			}
		}
		if (r->numa == IOD_SCHED_NUMA_RESTRICTED && r->gpus && (cpu_numa & ~numa)) {
			snprintf(why, len, "%s: restricted CPUs outside the GPUs' NUMA nodes",
			         ri.name);
			return -1;
		}
	}
	for (uint32_t i = 0; i < NODES; i++) {
		const struct iod_sched_shape *s = iod_sched_node_shape(c, i);
		uint32_t all = (uint32_t)((1ull << s->gpus_n) - 1);
		if ((held[i] | iod_sched_node_gpus_free(c, i)) != all ||
		    (held[i] & iod_sched_node_gpus_free(c, i))) {
			snprintf(why, len, "node %u: free GPUs %#x disagree with held %#x", i,
			         iod_sched_node_gpus_free(c, i), held[i]);
			return -1;
		}
	}
	return 0;
}

TEST(random_operations_keep_invariants)
{
	CHECK_EQ(load(), 0);
	struct iod_sched_request reqs[16];
	for (unsigned i = 0; i < 16; i++)
		make_request(i, &reqs[i]);
	uint64_t placed = 0, moved = 0, refused = 0;
	for (uint64_t seed = 1; seed <= 25; seed++) {
		struct iod_rng rng;
		iod_rng_seed(&rng, seed);
		struct iod_sched_cluster *c;
		struct iod_err e = {0};
		uint32_t ids[3], nid;
		CHECK_EQ(iod_sched_cluster_new(NODES, REPLICAS_MAX, &c, &e), 0);
		for (unsigned i = 0; i < 3; i++)
			CHECK_EQ(iod_sched_shape_add(c, &shapes[i], &ids[i], &e), 0);
		for (unsigned i = 0; i < NODES; i++) {
			char name[8], rack[8];
			snprintf(name, sizeof(name), "n%u", i);
			snprintf(rack, sizeof(rack), "r%u", i / 3);
			struct iod_sched_node_spec ns = {
			    .name = name, .shape = ids[i % 3], .rack = rack};
			CHECK_EQ(iod_sched_node_add(c, &ns, &nid, &e), 0);
		}
		struct iod_sched_opts o;
		iod_sched_opts_default(&o);
		struct iod_sched_result res;
		CHECK_EQ(iod_sched_result_init(&res, 64, 4), 0);
		char why[256];
		for (unsigned step = 0; step < 120; step++) {
			uint64_t op = iod_rng_below(&rng, 10);
			if (op < 6) {
				struct iod_sched_request r[2];
				unsigned n = 1 + (unsigned)iod_rng_below(&rng, 2);
				for (unsigned i = 0; i < n; i++) {
					r[i] = reqs[iod_rng_below(&rng, 16)];
					r[i].replicas = 1 + (uint32_t)iod_rng_below(&rng, 4);
				}
				o.strict = iod_rng_below(&rng, 4) == 0;
				res.n = res.svc_n = res.placed_n = res.unplaced_n = 0;
				res.rolled_back = false;
				CHECK_EQ(iod_sched_place(c, r, n, &o, &res, &e), 0);
				CHECK(res.placed_n + res.unplaced_n == res.n);
				placed += res.placed_n;
				refused += res.unplaced_n;
				if (res.rolled_back)
					CHECK_EQ(res.placed_n, 0);
			} else if (op < 9) {
				uint32_t id = (uint32_t)iod_rng_below(&rng, REPLICAS_MAX);
				for (uint32_t k = 0; k < REPLICAS_MAX; k++)
					if (iod_sched_release(c, (id + k) % REPLICAS_MAX) == 0)
						break;
			} else {
				struct iod_sched_plan plan;
				uint32_t budget = (uint32_t)iod_rng_below(&rng, 6);
				bool drain = iod_rng_below(&rng, 2);
				uint32_t before = iod_sched_islands_free(c, 2);
				CHECK_EQ(iod_sched_rebalance(
				             c,
				             drain ? IOD_SCHED_GOAL_DRAIN : IOD_SCHED_GOAL_ISLANDS,
				             (uint32_t)iod_rng_below(&rng, NODES), budget,
				             iod_rng_below(&rng, 2), &plan, &e),
				         0);
				CHECK(plan.n <= budget);
				moved += plan.n;
				if (!drain)
					CHECK(plan.islands_after >= before);
			}
			CHECK_MSG(check_all(c, reqs, 16, why, sizeof(why)) == 0,
			          "seed %llu step %u: %s", (unsigned long long)seed, step, why);
		}
		iod_sched_result_free(&res);
		iod_sched_cluster_free(c);
	}
	/* the run exercised what it checks */
	CHECK_MSG(placed > 500 && refused > 50 && moved > 10, "placed %llu refused %llu moved %llu",
	          (unsigned long long)placed, (unsigned long long)refused,
	          (unsigned long long)moved);
}
