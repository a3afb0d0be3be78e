/*
 * bench_sim_cluster.c: the whole-cluster simulator's speed (`make
 * bench-sim-cluster`; IOD_BENCH_QUICK=1 shortens the scale run to one
 * simulated hour).
 *
 *   simc.compare  the 3-node comparison (examples/sim/resnet50-3node.yaml):
 *                 every policy (iod, k8s) x its seeds, Raft on
 *   simc.gpus128  16 HGX A100 nodes, one 128-GPU ResNet-50 job, one
 *                 simulated hour, Raft on, the Llama 3 fault rate
 *   simc.scale    1,024 nodes x 8 GPUs, one 8,192-GPU job, scheduling and
 *                 the Llama 3 fault rate x 10, no Raft (writes commit after
 *                 one heartbeat), one simulated day (an hour when quick)
 *
 * Arguments name the figures to run (default all: compare gpus128 scale).
 * Each prints `BENCH simc.<figure> wall_s=... cpu_s=... events=...
 * events_per_cpu_s=...` with its own keys. simc.gpus128 runs 1 iteration in
 * 100 packet by packet (packet_per_100= counts them per 100 steps done,
 * packet_diff_pct= is the packet-level all-reduce against the alpha-beta
 * one); simc.scale is flow level only (packet_every 0), as the issue asks.
 */
#include "bench.h"
#include "iod/agent.h"
#include "iod/agent_run.h"
#include "iod/sim_cluster.h"
#include "iod/state.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int compare(void)
{
	struct iod_simc_scenario *sc = calloc(1, sizeof(*sc));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_buf b;
	struct iod_err e = {0};
	const char *file = "examples/sim/resnet50-3node.yaml";
	uint64_t events = 0;
	IOD_ASSERT(sc && r);
	iod_simc_config_default(&sc->cfg);
	iod_simc_timers_production(&sc->cfg.timers);
	sc->seeds = 1;
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, file, 1 << 20, &e) ||
	    iod_simc_scenario_parse_yaml(sc, b.data, b.len, file, &e)) {
		fprintf(stderr, "bench_sim_cluster: %s\n", e.msg);
		iod_buf_free(&b);
		free(sc);
		free(r);
		return 1;
	}
	iod_buf_free(&b);
	double w0 = bench_now_s(), c0 = bench_cpu_s();
	/* every policy: iod and the baselines (k8s, k8s-topo) */
	for (int p = 0; p < IOD_SIMC_POLICIES; p++)
		for (uint32_t k = 0; k < sc->seeds; k++) {
			struct iod_simc_config c = sc->cfg;
			c.policy = (enum iod_simc_policy_kind)p;
			c.seed = sc->cfg.seed + k;
			if (iod_simc_run(&c, r, NULL, NULL, &e)) {
				fprintf(stderr, "bench_sim_cluster: %s\n", e.msg);
				free(sc);
				free(r);
				return 1;
			}
			events += r->events + r->raft_steps;
		}
	double wall = bench_now_s() - w0, cpu = bench_cpu_s() - c0;
	bench_line("BENCH simc.compare wall_s=%.2f cpu_s=%.2f seeds=%u baselines=%d policies=%d "
	           "events=%" PRIu64 " events_per_cpu_s=%.0f",
	           wall, cpu, sc->seeds, IOD_SIMC_POLICIES - 1, IOD_SIMC_POLICIES, events,
	           cpu > 0 ? (double)events / cpu : 0);
	free(sc);
	free(r);
	return 0;
}

static int one(const char *name, struct iod_simc_config *c)
{
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	IOD_ASSERT(r);
	double w0 = bench_now_s(), c0 = bench_cpu_s();
	if (iod_simc_run(c, r, NULL, NULL, &e)) {
		fprintf(stderr, "bench_sim_cluster: %s: %s\n", name, e.msg);
		free(r);
		return 1;
	}
	double wall = bench_now_s() - w0, cpu = bench_cpu_s() - c0;
	uint64_t events = r->events + r->raft_steps;
	if (!strcmp(name, "gpus128"))
		bench_line(
		    "BENCH simc.gpus128 wall_s=%.2f cpu_s=%.2f sim_s=%.0f gpus=%u nodes=%u "
		    "steps=%" PRIu64 " faults=%u events=%" PRIu64
		    " events_per_cpu_s=%.0f packet_per_100=%.2f packet_samples=%" PRIu64
		    " packet_diff_pct=%.2f packet_events=%" PRIu64,
		    wall, cpu, (double)r->sim_ns / 1e9, c->job.gpus, c->nodes, r->steps_done,
		    r->faults, events, cpu > 0 ? (double)events / cpu : 0,
		    r->steps_done ? 100.0 * (double)r->packet_samples / (double)r->steps_done : 0,
		    r->packet_samples,
		    r->flow_comm_s > 0 ? (r->packet_comm_s - r->flow_comm_s) / r->flow_comm_s * 100
		                       : 0,
		    r->packet_events);
	else
		bench_line("BENCH simc.scale nodes=%u gpus=%u wall_s=%.2f cpu_s=%.2f sim_s=%.0f "
		           "steps=%" PRIu64 " faults=%u recoveries=%u events=%" PRIu64
		           " events_per_cpu_s=%.0f",
		           c->nodes, c->nodes * 8, wall, cpu, (double)r->sim_ns / 1e9,
		           r->steps_done, r->faults, r->rec_n, events,
		           cpu > 0 ? (double)events / cpu : 0);
	free(r);
	return 0;
}

static bool want(int argc, char **argv, const char *name)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], name))
			return true;
	return argc < 2;
}

int main(int argc, char **argv)
{
	bool quick = getenv("IOD_BENCH_QUICK") != NULL;
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	IOD_ASSERT(c);
	if (want(argc, argv, "compare") && compare()) {
		free(c);
		return 1;
	}

	iod_simc_config_model(c, "hgx-a100-8", 16, 0);
	c->job.gpus = 128;
	c->job.epochs = 1000; /* longer than the hour: the run ends at the horizon */
	c->horizon_ns = 3600 * IOD_NS_PER_S;
	if (want(argc, argv, "gpus128") && one("gpus128", c)) {
		free(c);
		return 1;
	}

	iod_simc_config_model(c, "hgx-a100-8", 1024, 0);
	c->servers = 0;
	c->job.gpus = 8184;  /* one node spare for rescheduling */
	c->job.epochs = 1e7; /* longer than the day: the run ends at the horizon */
	c->fault_per_gpu_hour *= 10;
	c->node_repair_ns = 1800 * IOD_NS_PER_S;
	c->horizon_ns = (quick ? 3600 : 86400) * IOD_NS_PER_S;
	c->packet_every = 0; /* flow level at this scale */
	int rc = want(argc, argv, "scale") ? one("scale", c) : 0;
	free(c);
	return rc;
}
