/*
 * test_cluster_sim.c: the whole-cluster simulator under many seeds with
 * faults, the way test_control_sim.c drives raft's fixture.
 *
 * Each seed draws a cluster (2-5 nodes of 4 or 8 GPUs), a job that leaves
 * room to move, a policy (iod or a Kubernetes baseline), a fault rate
 * up to 600,000 times Llama 3's and one or two scripted kills of a
 * Raft server or the leader, then runs to the end. It checks the run's own
 * invariants (V6: one leader per term, no acknowledged write lost, GPU busy
 * <= wall time, NIC <= line rate, no GPU given twice), that the job finished
 * or is still waiting for a repair, that each recovery's phases add up in
 * order, and that running the seed again gives the same event-log hash.
 *
 * IOD_SIM_SEEDS=N runs N seeds (default 20); IOD_SIM_SEED=S runs one. A seed
 * that ever fails becomes a regression test of its own here.
 */
#include "harness.h"
#include "iod/sim_cluster.h"

#include <stdlib.h>
#include <string.h>

static void draw(uint64_t seed, struct iod_simc_config *c)
{
	struct iod_rng rng;
	iod_rng_seed(&rng, seed * 7919 + 3);
	iod_simc_config_default(c);
	iod_simc_timers_iod(&c->timers, 2000, 50, 3, 30000, 100 * IOD_NS_PER_MS, 10 * IOD_NS_PER_S);
	c->seed = seed;
	c->nodes = 2 + (uint32_t)iod_rng_below(&rng, 4);
	c->gpus_per_node = iod_rng_below(&rng, 2) ? 8 : 4;
	c->job.gpus_per_replica = c->gpus_per_node / 2;
	c->job.gpus = c->job.gpus_per_replica * (1 + (uint32_t)iod_rng_below(&rng, c->nodes));
	c->job.steps = 200 + iod_rng_below(&rng, 800);
	c->job.epochs = 0;
	c->job.ckpt_every_steps = 50 + iod_rng_below(&rng, 200);
	c->policy = iod_rng_below(&rng, 4) ? IOD_SIMC_POLICY_IOD : IOD_SIMC_POLICY_K8S;
	/* every other Kubernetes seed under the topology-aware variant (from
	 * the seed, not the stream, so the other draws stay as they were) */
	if (c->policy == IOD_SIMC_POLICY_K8S && (seed & 1))
		c->policy = IOD_SIMC_POLICY_K8S_TOPO;
	c->rack_nodes = 2;
	c->fault_per_gpu_hour *= 6e5 * iod_rng_double(&rng);
	c->node_repair_ns = (30 + iod_rng_below(&rng, 270)) * IOD_NS_PER_S;
	c->server_repair_ns = (1 + iod_rng_below(&rng, 30)) * IOD_NS_PER_S;
	c->straggler_max = 0.1 * iod_rng_double(&rng);
	c->horizon_ns = 3600 * IOD_NS_PER_S;
	c->faults_n = 1 + (uint32_t)iod_rng_below(&rng, 2);
	for (uint32_t i = 0; i < c->faults_n; i++) {
		c->faults[i].at_ns = iod_rng_below(&rng, 120 * IOD_NS_PER_S);
		c->faults[i].kind =
		    iod_rng_below(&rng, 2) ? IOD_SIMC_FAULT_LEADER : IOD_SIMC_FAULT_SERVER;
		c->faults[i].node = (uint32_t)iod_rng_below(&rng, 3);
	}
}

static const char *run_seed(uint64_t seed, struct iod_simc_config *c, struct iod_simc_result *r,
                            char *why, size_t len)
{
	struct iod_err e = {0};
	char hash[65];
	draw(seed, c);
	if (iod_simc_run(c, r, NULL, NULL, &e)) {
		snprintf(why, len, "run failed: %s", e.msg);
		return why;
	}
	if (r->invariant_violations) {
		snprintf(why, len, "%u invariant violations, first: %s", r->invariant_violations,
		         r->invariant_first);
		return why;
	}
	if (!r->done && r->sim_ns < c->horizon_ns) {
		snprintf(why, len, "the run stopped at %llu ns with the job unfinished",
		         (unsigned long long)r->sim_ns);
		return why;
	}
	for (uint32_t i = 0; i < r->rec_n; i++) {
		const struct iod_simc_recovery *x = &r->rec[i];
		if (x->at_ns + x->detect_ns + x->decide_ns + x->start_ns + x->restore_ns >
		    r->sim_ns) {
			snprintf(why, len, "recovery %u ends after the run", i);
			return why;
		}
	}
	if (r->steps_done > r->steps_total) {
		snprintf(why, len, "steps %llu > %llu", (unsigned long long)r->steps_done,
		         (unsigned long long)r->steps_total);
		return why;
	}
	snprintf(hash, sizeof(hash), "%s", r->log_sha256);
	if (iod_simc_run(c, r, NULL, NULL, &e) || strcmp(hash, r->log_sha256)) {
		snprintf(why, len, "the same seed gave another event log");
		return why;
	}
	return "";
}

static void run_seeds(const uint64_t *seeds, unsigned n, unsigned *faults, unsigned *recoveries)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	char why[512];
	CHECK(c && r);
	for (unsigned i = 0; i < n; i++) {
		const char *w = run_seed(seeds[i], c, r, why, sizeof(why));
		*faults += r->faults;
		*recoveries += r->rec_n;
		if (w[0]) {
			free(c);
			free(r);
			CHECK_MSG(0, "seed %llu: %s (rerun: IOD_SIM_SEED=%llu)",
			          (unsigned long long)seeds[i], w, (unsigned long long)seeds[i]);
		}
	}
	free(c);
	free(r);
}

TEST(cluster_sim_many_seeds)
{
	const char *one = getenv("IOD_SIM_SEED"), *many = getenv("IOD_SIM_SEEDS");
	unsigned n = many ? (unsigned)atoi(many) : 20, faults = 0, recoveries = 0;
	uint64_t *seeds;
	if (one)
		n = 1;
	seeds = calloc(n ? n : 1, sizeof(*seeds));
	CHECK(seeds);
	for (unsigned i = 0; i < n; i++)
		seeds[i] = one ? strtoull(one, NULL, 10) : 1 + i;
	run_seeds(seeds, n, &faults, &recoveries);
	free(seeds);
	printf("  %u seeds: %u faults, %u recoveries\n", n, faults, recoveries);
	/* the seeds exercised failures, not only clean runs */
	CHECK(one || (faults > n && recoveries > n / 4));
}
