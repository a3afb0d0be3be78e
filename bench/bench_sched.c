/*
 * bench_sched.c: the scheduler's speed and placement quality.
 *
 *  1. throughput: 10,000 replicas (mixed 1/2/4/8-GPU requests, all four NUMA
 *     policies, CPUs, memory, NIC bandwidth) onto 1,000 nodes x 8 GPUs of
 *     mixed models (dgx-h100, hgx-a100-8, pcie-8gpu), one deploy; target
 *     < 1 s on one core.
 *  2. single-node quality: random nodes with random GPUs already taken; the
 *     chosen GPU set's pair score against the brute-force optimum over every
 *     feasible set; target 100% optimal.
 *  3. cluster quality: a seeded arrival/departure trace replayed with iod,
 *     first-fit and random placement: stranded GPUs over time and the share
 *     of 8-GPU requests placed.
 *
 * Every figure is one `BENCH sched.<figure> key=value ...` line. Seeds are
 * fixed: reruns place identically; only the timings vary with the machine.
 */
#include "iod/sched.h"
#include "iod/topo.h"
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const models[] = {"dgx-h100", "hgx-a100-8", "pcie-8gpu"};
#define MODELS_N 3

static int load_shapes(struct iod_sched_shape *shapes)
{
	static struct iod_topo_node t;
	struct iod_err e = {0};
	for (unsigned i = 0; i < MODELS_N; i++) {
		if (iod_topo_model_load(models[i], &t, &e) ||
		    iod_sched_shape_from_topo(&t, &shapes[i], &e)) {
			fprintf(stderr, "bench_sched: model %s: %s\n", models[i], e.msg);
			return -1;
		}
	}
	return 0;
}

static struct iod_sched_cluster *cluster(const struct iod_sched_shape *shapes, uint32_t nodes,
                                         uint32_t replicas_max)
{
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t ids[MODELS_N], nid;
	if (iod_sched_cluster_new(nodes, replicas_max, &c, &e))
		return NULL;
	for (unsigned i = 0; i < MODELS_N; i++)
		if (iod_sched_shape_add(c, &shapes[i], &ids[i], &e))
			return NULL;
	for (uint32_t i = 0; i < nodes; i++) {
		char name[32], rack[32];
		snprintf(name, sizeof(name), "n%u", i);
		snprintf(rack, sizeof(rack), "rack%u", i / 16);
		struct iod_sched_node_spec ns = {
		    .name = name, .shape = ids[i % MODELS_N], .rack = rack};
		if (iod_sched_node_add(c, &ns, &nid, &e))
			return NULL;
	}
	return c;
}

static uint32_t pick_gpus(struct iod_rng *r)
{
	uint64_t x = iod_rng_below(r, 100);
	return x < 40 ? 1 : x < 65 ? 2 : x < 85 ? 4 : 8;
}

/* ---- 1. throughput ------------------------------------------------------ */

static int bench_throughput(const struct iod_sched_shape *shapes)
{
	const uint32_t nodes = 1000, services = 100, per = 100;
	struct iod_sched_request *reqs = calloc(services, sizeof(*reqs));
	struct iod_rng rng;
	iod_rng_seed(&rng, 42);
	uint64_t demand = 0;
	for (uint32_t i = 0; i < services; i++) {
		struct iod_sched_request *r = &reqs[i];
		snprintf(r->service, sizeof(r->service), "svc%u", i);
		r->replicas = per;
		r->gpus = pick_gpus(&rng);
		r->numa = (enum iod_sched_numa)(i % 4);
		r->cpus = 4 * r->gpus;
		r->mem_bytes = 32000000000ull * r->gpus;
		r->nic_bw_bps = r->gpus >= 4 ? 100000000000ull : 0;
		r->gpu_link =
		    r->gpus >= 2 && i % 3 == 0 ? IOD_SCHED_LINK_NVLINK : IOD_SCHED_LINK_ANY;
		r->stateful = i % 10 == 0;
		demand += (uint64_t)per * r->gpus;
	}
	struct iod_sched_cluster *c = cluster(shapes, nodes, services * per);
	struct iod_sched_result res;
	struct iod_sched_opts o;
	struct iod_err e = {0};
	iod_sched_opts_default(&o);
	if (!c || iod_sched_result_init(&res, services * per, services))
		return -1;
	double t0 = bench_now_s();
	int rc = iod_sched_place(c, reqs, services, &o, &res, &e);
	double dt = bench_now_s() - t0;
	if (rc) {
		fprintf(stderr, "bench_sched: %s\n", e.msg);
		return -1;
	}
	uint64_t used = 0;
	for (uint32_t i = 0; i < res.n; i++)
		if (res.p[i].placed)
			used += (uint64_t)__builtin_popcount(res.p[i].gpu_mask);
	printf("throughput: %u replicas of %u services (1/2/4/8 GPUs, 4 NUMA policies) onto %u "
	       "nodes x 8 GPUs (%s, %s, %s); GPU demand %llu vs %u GPUs, so most 4/8-GPU "
	       "replicas are refused with a reason\n",
	       services * per, services, nodes, models[0], models[1], models[2],
	       (unsigned long long)demand, nodes * 8);
	printf("BENCH sched.throughput replicas=%u nodes=%u seconds=%.3f per_s=%.0f placed=%u "
	       "unplaced=%u gpus_used=%llu gpus_total=%u target_s=1\n",
	       res.n, nodes, dt, res.n / dt, res.placed_n, res.unplaced_n, (unsigned long long)used,
	       nodes * 8);
	/* the same without the per-node cache and failure reuse (same output) */
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
	c = cluster(shapes, nodes, services * per);
	if (!c || iod_sched_result_init(&res, services * per, services))
		return -1;
	o.no_cache = true;
	t0 = bench_now_s();
	rc = iod_sched_place(c, reqs, services, &o, &res, &e);
	dt = bench_now_s() - t0;
	o.no_cache = false;
	printf("BENCH sched.throughput_nocache replicas=%u nodes=%u seconds=%.3f per_s=%.0f "
	       "placed=%u unplaced=%u\n",
	       res.n, nodes, dt, res.n / dt, res.placed_n, res.unplaced_n);
	/* a second deploy that fits: the cluster emptied, 1-GPU and CPU-only replicas */
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
	c = cluster(shapes, nodes, services * per);
	for (uint32_t i = 0; i < services; i++) {
		reqs[i].gpus = i % 5 == 0 ? 0 : 1; /* 8,000 GPU replicas + 2,000 CPU-only */
		reqs[i].gpu_link = IOD_SCHED_LINK_ANY;
		reqs[i].nic_bw_bps = 0;
		reqs[i].cpus = 4;
		reqs[i].mem_bytes = 16000000000ull;
	}
	if (!c || iod_sched_result_init(&res, services * per, services))
		return -1;
	t0 = bench_now_s();
	rc = iod_sched_place(c, reqs, services, &o, &res, &e);
	dt = bench_now_s() - t0;
	printf("BENCH sched.throughput_fit replicas=%u nodes=%u seconds=%.3f per_s=%.0f placed=%u "
	       "unplaced=%u target_s=1\n",
	       res.n, nodes, dt, res.n / dt, res.placed_n, res.unplaced_n);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
	free(reqs);
	return rc;
}

/* ---- 2. single-node quality --------------------------------------------- */

struct best {
	uint32_t score; /* highest pair-score sum */
	bool any;       /* a feasible set exists */
};

static void brute(const struct iod_sched_shape *s, uint32_t free_mask, uint32_t k, bool nvlink,
                  bool single, uint32_t from, uint32_t set, uint32_t depth, struct best *b)
{
	if (depth == k) {
		uint32_t sc = 0, numa = 0;
		for (uint32_t i = 0; i < s->gpus_n; i++) {
			if (!(set >> i & 1))
				continue;
			numa |= 1u << s->gpu_numa[i];
			for (uint32_t j = i + 1; j < s->gpus_n; j++) {
				if (!(set >> j & 1))
					continue;
				if (nvlink && !(s->nvlink[i] >> j & 1))
					return;
				sc += s->pair_score[i][j];
			}
		}
		if (single && __builtin_popcount(numa) != 1)
			return;
		if (!b->any || sc > b->score)
			b->score = sc;
		b->any = true;
		return;
	}
	for (uint32_t g = from; g < s->gpus_n; g++)
		if (free_mask >> g & 1)
			brute(s, free_mask, k, nvlink, single, g + 1, set | 1u << g, depth + 1, b);
}

static void random_shape(struct iod_rng *r, struct iod_sched_shape *s)
{
	/* 16 GPUs, 2 NUMA nodes, random PCIe scores, random NVLink bonds */
	static const uint16_t pcie[] = {10, 20, 30, 40, 50, 60};
	iod_sched_shape_init(s, "random-16", 16, 2);
	for (uint32_t i = 0; i < 16; i++)
		for (uint32_t j = i + 1; j < 16; j++) {
			uint16_t sc = pcie[iod_rng_below(r, 6)];
			if (iod_rng_below(r, 3) == 0) {
				sc = (uint16_t)(sc + 100 * (1 + iod_rng_below(r, 4)));
				s->nvlink[i] |= 1u << j;
				s->nvlink[j] |= 1u << i;
			}
			s->pair_score[i][j] = s->pair_score[j][i] = sc;
		}
	iod_bitmap_set_range(&s->numa_cpus[0], 0, 31);
	iod_bitmap_set_range(&s->numa_cpus[1], 32, 63);
	s->numa_mem_bytes[0] = s->numa_mem_bytes[1] = 1ull << 40;
	iod_sched_shape_finish(s);
}

static int bench_quality_node(const struct iod_sched_shape *shapes)
{
	const uint32_t instances = 2000;
	struct iod_rng rng;
	iod_rng_seed(&rng, 7);
	uint32_t optimal = 0, compared = 0, agree_infeasible = 0;
	double worst_gap = 0;
	double t_iod = 0;
	for (uint32_t it = 0; it < instances; it++) {
		struct iod_sched_shape rs;
		const struct iod_sched_shape *s;
		if (it % 4 == 3) {
			random_shape(&rng, &rs);
			s = &rs;
		} else {
			s = &shapes[it % MODELS_N];
		}
		uint32_t all = (uint32_t)((1ull << s->gpus_n) - 1);
		uint32_t taken = (uint32_t)iod_rng_next(&rng) & all;
		if (iod_rng_below(&rng, 4) == 0)
			taken = 0;
		uint32_t free_n = (uint32_t)__builtin_popcount(all & ~taken);
		if (free_n == 0)
			continue;
		uint32_t k = 1 + (uint32_t)iod_rng_below(&rng, free_n);
		bool nvlink = iod_rng_below(&rng, 3) == 0;
		bool single = iod_rng_below(&rng, 4) == 0;

		struct iod_sched_cluster *c;
		struct iod_err e = {0};
		uint32_t sid, nid;
		if (iod_sched_cluster_new(1, 4, &c, &e) || iod_sched_shape_add(c, s, &sid, &e))
			return -1;
		struct iod_sched_node_spec ns = {.name = "n0", .shape = sid, .gpus_used = taken};
		iod_sched_node_add(c, &ns, &nid, &e);
		struct iod_sched_request r;
		memset(&r, 0, sizeof(r));
		snprintf(r.service, sizeof(r.service), "q");
		r.replicas = 1;
		r.gpus = k;
		r.gpu_link = nvlink ? IOD_SCHED_LINK_NVLINK : IOD_SCHED_LINK_ANY;
		r.numa = single ? IOD_SCHED_NUMA_SINGLE : IOD_SCHED_NUMA_BEST_EFFORT;
		struct iod_sched_result res;
		struct iod_sched_opts o;
		iod_sched_opts_default(&o);
		iod_sched_result_init(&res, 1, 1);
		double t0 = bench_now_s();
		iod_sched_place(c, &r, 1, &o, &res, &e);
		t_iod += bench_now_s() - t0;
		struct best b = {0, false};
		brute(s, all & ~taken, k, nvlink, single, 0, 0, 0, &b);
		if (!b.any) {
			if (!res.p[0].placed)
				agree_infeasible++;
			else
				fprintf(stderr, "bench_sched: instance %u placed but infeasible\n",
				        it);
		} else {
			compared++;
			uint32_t got = 0;
			if (res.p[0].placed) {
				uint32_t m = res.p[0].gpu_mask;
				for (uint32_t i = 0; i < s->gpus_n; i++)
					for (uint32_t j = i + 1; j < s->gpus_n; j++)
						if ((m >> i & 1) && (m >> j & 1))
							got += s->pair_score[i][j];
			}
			if (res.p[0].placed && got == b.score)
				optimal++;
			double gap = b.score ? (double)(b.score - IOD_MIN(got, b.score)) / b.score
			                     : (res.p[0].placed ? 0.0 : 1.0);
			if (gap > worst_gap)
				worst_gap = gap;
		}
		iod_sched_result_free(&res);
		iod_sched_cluster_free(c);
	}
	printf("single-node quality: %u random instances (dgx-h100, hgx-a100-8, pcie-8gpu and "
	       "random 16-GPU shapes; random GPUs taken; k random; NVLink and single-NUMA "
	       "constraints on a third/quarter), brute force over every feasible set\n",
	       instances);
	printf("BENCH sched.quality_node instances=%u compared=%u optimal=%u share_optimal=%.4f "
	       "worst_gap=%.4f infeasible_agreed=%u iod_seconds=%.3f target_share=1\n",
	       compared + agree_infeasible, compared, optimal,
	       compared ? (double)optimal / compared : 1.0, worst_gap, agree_infeasible, t_iod);
	return 0;
}

/* ---- 3. cluster quality -------------------------------------------------- */

static const char *weights_arg; /* "g,n,f,s,p,nic" to try other weights */

enum policy { POL_IOD, POL_FIRST_FIT, POL_RANDOM, POL_N };
static const char *const pol_names[] = {"iod", "first-fit", "random"};

struct job {
	double end;       /* departure time */
	uint32_t node;    /* baselines: node */
	uint32_t mask;    /* baselines: GPUs */
	uint32_t replica; /* iod: replica id */
	bool live;        /* placed and not departed */
};

/* Free GPUs on nodes that cannot take an 8-GPU job (8-GPU nodes here). */
static uint32_t stranded(const uint32_t *free_mask, uint32_t nodes)
{
	uint32_t s = 0;
	for (uint32_t i = 0; i < nodes; i++) {
		uint32_t f = (uint32_t)__builtin_popcount(free_mask[i]);
		if (f < 8)
			s += f;
	}
	return s;
}

static int bench_quality_cluster(const struct iod_sched_shape *shapes)
{
	const uint32_t nodes = 64, arrivals = 20000, samples = 10;
	const double mean_life = 100.0;
	/* offered load ~90% of 512 GPUs: rate * mean_gpus * life = 0.9 * 512 */
	const double mean_gpus = 0.40 * 1 + 0.25 * 2 + 0.20 * 4 + 0.15 * 8;
	const double rate = 0.9 * nodes * 8 / (mean_gpus * mean_life);
	printf("cluster quality: %u arrivals (40%% 1-GPU, 25%% 2, 20%% 4, 15%% 8; exponential "
	       "lifetimes, mean %.0f) at %.0f%% offered load onto %u nodes x 8 GPUs (%s, %s, %s), "
	       "seed 1; a request that does not fit is dropped\n",
	       arrivals, mean_life, 90.0, nodes, models[0], models[1], models[2]);
	for (int pol = 0; pol < POL_N; pol++) {
		struct iod_rng rng, prng;
		iod_rng_seed(&rng, 1);
		iod_rng_seed(&prng, 99);
		struct job *jobs = calloc(arrivals, sizeof(*jobs));
		uint32_t free_mask[64];
		for (uint32_t i = 0; i < nodes; i++)
			free_mask[i] = 0xFF;
		struct iod_sched_cluster *c = pol == POL_IOD ? cluster(shapes, nodes, 4096) : NULL;
		struct iod_sched_opts o;
		iod_sched_opts_default(&o);
		o.explain_top = 0;
		if (weights_arg) {
			unsigned w[IOD_SCHED_TERMS_N];
			if (sscanf(weights_arg, "%u,%u,%u,%u,%u,%u", &w[0], &w[1], &w[2], &w[3],
			           &w[4], &w[5]) == 6)
				for (unsigned i = 0; i < IOD_SCHED_TERMS_N; i++)
					o.weights.w[i] = w[i];
		}
		struct iod_sched_result res;
		iod_sched_result_init(&res, 1, 1);
		double t = 0, stranded_sum = 0;
		uint64_t stranded_n = 0;
		uint32_t placed8 = 0, asked8 = 0, placed = 0, placeable8 = 0;
		uint64_t score_sum = 0, score_pairs = 0;
		uint32_t multi = 0, nv_joined = 0;
		char series[256] = "";
		size_t soff = 0;
		for (uint32_t a = 0; a < arrivals; a++) {
			t += iod_rng_exp(&rng, 1.0 / rate);
			uint32_t k = pick_gpus(&rng);
			double life = iod_rng_exp(&rng, mean_life);
			/* departures up to t (scan: bounded by arrivals) */
			for (uint32_t j = 0; j < a; j++) {
				if (!jobs[j].live || jobs[j].end > t)
					continue;
				jobs[j].live = false;
				if (pol == POL_IOD)
					iod_sched_release(c, jobs[j].replica);
				free_mask[jobs[j].node] |= jobs[j].mask;
			}
			if (a >= arrivals / 10) { /* after warm-up */
				bool any8 = false;
				for (uint32_t i = 0; i < nodes && !any8; i++)
					any8 = free_mask[i] == 0xFF;
				placeable8 += any8;
				stranded_sum += stranded(free_mask, nodes);
				stranded_n++;
			}
			struct job *jb = &jobs[a];
			jb->end = t + life;
			bool ok = false;
			if (pol == POL_IOD) {
				struct iod_sched_request r;
				struct iod_err e = {0};
				memset(&r, 0, sizeof(r));
				snprintf(r.service, sizeof(r.service), "gpu%u", k);
				r.replicas = 1;
				r.gpus = k;
				r.numa = IOD_SCHED_NUMA_BEST_EFFORT;
				res.n = res.svc_n = res.placed_n = res.unplaced_n = 0;
				iod_sched_place(c, &r, 1, &o, &res, &e);
				if (res.p[0].placed) {
					ok = true;
					jb->node = res.p[0].node;
					jb->mask = res.p[0].gpu_mask;
					jb->replica = res.p[0].replica;
				}
			} else {
				uint32_t cands[64], cn = 0;
				for (uint32_t i = 0; i < nodes; i++)
					if ((uint32_t)__builtin_popcount(free_mask[i]) >= k)
						cands[cn++] = i;
				if (cn) {
					uint32_t nd = pol == POL_FIRST_FIT
					                  ? cands[0]
					                  : cands[iod_rng_below(&prng, cn)];
					uint32_t m = 0, f = free_mask[nd];
					if (pol == POL_FIRST_FIT) {
						for (uint32_t g = 0;
						     g < 8 && (uint32_t)__builtin_popcount(m) < k;
						     g++)
							if (f >> g & 1)
								m |= 1u << g;
					} else {
						while ((uint32_t)__builtin_popcount(m) < k) {
							uint32_t g =
							    (uint32_t)iod_rng_below(&prng, 8);
							if (f >> g & 1)
								m |= 1u << g;
						}
					}
					ok = true;
					jb->node = nd;
					jb->mask = m;
				}
			}
			if (k == 8)
				asked8++;
			if (ok) {
				jb->live = true;
				free_mask[jb->node] &= ~jb->mask;
				placed++;
				placed8 += k == 8;
				/* set quality: every pair NVLink-joined, and the mean pair score */
				const struct iod_sched_shape *s = &shapes[jb->node % MODELS_N];
				bool all_nv = true;
				for (uint32_t i = 0; i < 8; i++)
					for (uint32_t j = i + 1; j < 8; j++)
						if ((jb->mask >> i & 1) && (jb->mask >> j & 1)) {
							score_sum += s->pair_score[i][j];
							score_pairs++;
							all_nv &= (s->nvlink[i] >> j & 1) != 0;
						}
				if (k >= 2) {
					multi++;
					nv_joined += all_nv;
				}
			}
			if ((a + 1) % (arrivals / samples) == 0 && soff < sizeof(series))
				soff +=
				    (size_t)snprintf(series + soff, sizeof(series) - soff, "%s%u",
				                     soff ? "," : "", stranded(free_mask, nodes));
		}
		printf("BENCH sched.quality_cluster policy=%s arrivals=%u placed=%u "
		       "placed_8gpu_share=%.3f placeable_8gpu_share=%.3f stranded_gpus_avg=%.1f "
		       "nvlink_joined_share=%.3f pair_score_avg=%.0f stranded_series=%s\n",
		       pol_names[pol], arrivals, placed, asked8 ? (double)placed8 / asked8 : 0.0,
		       stranded_n ? (double)placeable8 / stranded_n : 0.0,
		       stranded_n ? stranded_sum / stranded_n : 0.0,
		       multi ? (double)nv_joined / multi : 0.0,
		       score_pairs ? (double)score_sum / score_pairs : 0.0, series);
		iod_sched_result_free(&res);
		iod_sched_cluster_free(c);
		free(jobs);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct iod_sched_shape shapes[MODELS_N];
	const char *only = argc > 1 ? argv[1] : NULL;
	weights_arg = argc > 2 ? argv[2] : NULL;
	printf("bench_sched: one core, release build (-O2); timings on a shared machine vary\n");
	if (load_shapes(shapes))
		return 1;
	if ((!only || !strcmp(only, "throughput")) && bench_throughput(shapes))
		return 1;
	if ((!only || !strcmp(only, "node")) && bench_quality_node(shapes))
		return 1;
	if ((!only || !strcmp(only, "cluster")) && bench_quality_cluster(shapes))
		return 1;
	return 0;
}
