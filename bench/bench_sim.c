/*
 * bench_sim.c: the fabric simulator's speed.
 *
 *   1. the event queues alone (4-ary heap, radix heap, calendar queue and
 *      AUTO, the heap or the calendar by size; hold model: pop the earliest
 *      event, push one 1..4096 ns later) with 1 K, 100 K, 1 M and 4 M pending
 *      events;
 *   2. the whole simulator's events per second on the benchmark fabric;
 *   3. the wall time of a web-search sweep, loads 10-90 %, on a 2-leaf x
 *      2-spine, 32-host, 10/40 Gbps leaf-spine for 0.1 s of simulated time.
 *
 * usage: bench_sim [--quick]   (--quick: 10 ms per load, loads 0.1,0.5,0.9;
 *        also IOD_BENCH_QUICK=1 make bench-sim)
 * Prints one `BENCH sim.<figure> key=value ...` line per figure. The wall
 * clock is read here, in the benchmark, never in the simulator.
 */
#include "iod/sim.h"
#include "bench.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *kind_name(enum iod_sim_queue_kind kind)
{
	switch (kind) {
	case IOD_SIM_QUEUE_HEAP: return "heap4";
	case IOD_SIM_QUEUE_RADIX: return "radix";
	case IOD_SIM_QUEUE_CALENDAR: return "calendar";
	case IOD_SIM_QUEUE_AUTO: return "auto";
	}
	return "?";
}

/* CPU time of this process: on a shared machine, events per CPU second is
 * the per-core figure; wall time is printed too. */
static void bench_queue(enum iod_sim_queue_kind kind, uint32_t pending, uint64_t ops)
{
	struct iod_sim_queue q;
	struct iod_sim_event ev;
	struct iod_rng r;

	if (iod_sim_queue_init_kind(&q, pending + 1, kind)) {
		fprintf(stderr, "cannot allocate %u events\n", pending);
		exit(1);
	}
	iod_rng_seed(&r, 1);
	for (uint32_t i = 0; i < pending; i++)
		iod_sim_queue_push(&q, iod_rng_below(&r, 1000000), 0, i, 0);
	double t0 = bench_now_s(), c0 = bench_cpu_s();
	uint64_t sum = 0;
	for (uint64_t i = 0; i < ops; i++) {
		iod_sim_queue_pop(&q, &ev);
		sum += ev.arg;
		/* increments like a fabric's: serialisation and propagation delays */
		iod_sim_queue_push(&q, ev.t_ns + 1 + (iod_rng_next(&r) & 4095), 0, ev.arg, 0);
	}
	double dt = bench_now_s() - t0, dc = bench_cpu_s() - c0;
	printf("BENCH sim.queue kind=%s pending=%u ops=%" PRIu64
	       " events_per_s=%.0f events_per_cpu_s=%.0f ns_per_event=%.1f check=%" PRIu64 "\n",
	       kind_name(kind), pending, ops, (double)ops / dt, (double)ops / dc,
	       dt * 1e9 / (double)ops, sum % 7);
	iod_sim_queue_destroy(&q);
}

struct one {
	double wall_s;              /* run time */
	double cpu_s;               /* CPU time */
	uint64_t events;            /* processed */
	struct iod_sim_summary sum; /* FCT results */
};

static int run_load(const struct iod_sim_topo *t, const struct iod_sim_cdf *c, double load,
                    uint64_t dur_ns, struct one *o)
{
	struct iod_sim_config cfg;
	struct iod_sim *s;
	struct iod_rng r;
	struct iod_err e = {0};

	iod_sim_config_default(&cfg);
	cfg.flows_max = 1 << 18;
	if (iod_sim_create(&s, t, &cfg, &e)) {
		fprintf(stderr, "create: %s\n", e.msg);
		return -1;
	}
	iod_rng_seed(&r, 1);
	double t0 = bench_now_s(), c0 = bench_cpu_s();
	if (iod_sim_workload_poisson(s, c, load, dur_ns, &r, &e) < 0 ||
	    iod_sim_run(s, dur_ns, &e)) {
		fprintf(stderr, "run: %s\n", e.msg);
		iod_sim_destroy(s);
		return -1;
	}
	/* drain: let flows finish, at most 1 s more */
	if (iod_sim_drain(s, dur_ns + IOD_NS_PER_S, 10 * IOD_NS_PER_MS, &e)) {
		fprintf(stderr, "run: %s\n", e.msg);
		iod_sim_destroy(s);
		return -1;
	}
	o->wall_s = bench_now_s() - t0;
	o->cpu_s = bench_cpu_s() - c0;
	o->events = iod_sim_events(s);
	iod_sim_summarize(s, &o->sum);
	iod_sim_destroy(s);
	return 0;
}

int main(int argc, char **argv)
{
	const char *env = getenv("IOD_BENCH_QUICK");
	bool quick = (argc > 1 && !strcmp(argv[1], "--quick")) || (env && *env && *env != '0');
	struct iod_sim_topo t;
	struct iod_sim_cdf c;
	struct iod_err e = {0};
	double loads_full[] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
	double loads_quick[] = {0.1, 0.5, 0.9};
	double *loads = quick ? loads_quick : loads_full;
	unsigned n = quick ? 3 : 9;
	uint64_t dur = quick ? 10 * IOD_NS_PER_MS : 100 * IOD_NS_PER_MS;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("bench_sim: %s; fabric leaf-spine 2 leaves x 2 spines, 32 hosts, 10/40 Gbps, "
	       "1 us links, DCTCP, ECMP; web-search; %.3f s simulated per load\n",
	       quick ? "quick" : "full", (double)dur / 1e9);
	printf("note: one core of a shared, noisy 2-core machine\n");
	for (int k = 0; k < 4; k++) {
		enum iod_sim_queue_kind kind = (enum iod_sim_queue_kind)k;
		bench_queue(kind, 1000, quick ? 5000000 : 20000000);
		bench_queue(kind, 100000, quick ? 3000000 : 10000000);
		bench_queue(kind, 1000000, quick ? 3000000 : 10000000);
		bench_queue(kind, 4000000, quick ? 3000000 : 10000000);
	}

	if (iod_sim_topo_builtin(&t, "leaf-spine", &e) || iod_sim_cdf_load(&c, "web-search", &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 1;
	}
	double total = 0, total_cpu = 0;
	uint64_t events = 0;
	printf("%5s %7s %7s %9s %9s %9s %9s %12s %8s %12s\n", "load", "flows", "done", "slow_avg",
	       "slow_p99", "small_p99", "large_avg", "events", "wall_s", "events/s");
	for (unsigned i = 0; i < n; i++) {
		struct one o;
		if (run_load(&t, &c, loads[i], dur, &o))
			return 1;
		total += o.wall_s;
		total_cpu += o.cpu_s;
		events += o.events;
		printf("%5.2f %7u %7u %9.2f %9.2f %9.2f %9.2f %12" PRIu64 " %8.2f %12.0f\n",
		       loads[i], o.sum.flows, o.sum.done, o.sum.all.slow_avg, o.sum.all.slow_p99,
		       o.sum.small.slow_p99, o.sum.large.slow_avg, o.events, o.wall_s,
		       (double)o.events / o.wall_s);
		fflush(stdout);
	}
	printf("BENCH sim.fabric events=%" PRIu64
	       " wall_s=%.2f cpu_s=%.2f events_per_s=%.0f events_per_cpu_s=%.0f\n",
	       events, total, total_cpu, (double)events / total, (double)events / total_cpu);
	printf("BENCH sim.sweep loads=%u sim_s_per_load=%.3f wall_s=%.2f cpu_s=%.2f\n", n,
	       (double)dur / 1e9, total, total_cpu);
	iod_sim_topo_free(&t);
	return 0;
}
