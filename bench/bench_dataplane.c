/*
 * bench_dataplane.c: data-plane benchmarks (make bench-dataplane): one core,
 * mem ports, 64 B and 1500 B tenant frames: a bare mac-swap loop (the upper
 * bound of the I/O path), L2 forward through the engine, VXLAN encap, VXLAN
 * decap, and the full overlay pipeline (decap + security group + conntrack
 * + service LB + encap) with 1 K, 100 K and 1 M flows; the full pipeline
 * at 100 K and 1 M flows on two cores, RSS-style (full_rss2_*: the flows
 * hashed to a core, one engine state and thread per core, against the
 * one-core figure of the same run); then conntrack with 10 M sessions
 * (bytes per session, new sessions per second).
 *
 * Prints its parameters, then one `BENCH dataplane.<figure> key=value...`
 * line per figure. IOD_BENCH_SECONDS (default 1) sets the time per figure;
 * IOD_BENCH_CT_SESSIONS (default 10000000) the conntrack scale;
 * IOD_BENCH_ONLY (substrings of figure names, comma-separated, e.g.
 * dpdk,full_60B_1000000) runs only the figures whose names contain one of
 * them (for profiling one case), plus the
 * mac-swap loop their ratios need; IOD_BENCH_WARM_PASSES the warm-up passes;
 * IOD_BENCH_PACKETS a fixed number of measured packets per figure instead
 * of IOD_BENCH_SECONDS (for callgrind: the measured window is dumped as its
 * own profile, "measured").
 */
#include "iod/io.h"

#include <stdlib.h>
#include <string.h>

static double secs(void)
{
	const char *s = getenv("IOD_BENCH_SECONDS");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

static double dpdk_mpps; /* the bare DPDK loop of this run, 0 = none */

/* Whether figure `name` runs (IOD_BENCH_ONLY unset: all). */
static bool wanted(const char *name)
{
	const char *only = getenv("IOD_BENCH_ONLY");
	if (!only || !only[0])
		return true;
	/* a comma-separated list: any of them */
	for (const char *p = only; *p;) {
		size_t n = strcspn(p, ",");
		char part[64];
		snprintf(part, sizeof(part), "%.*s", (int)(n < 63 ? n : 63), p);
		if (part[0] && strstr(name, part))
			return true;
		p += n + (p[n] == ',');
	}
	return false;
}

/* Whether any engine figure of this frame size runs (then its mac-swap
 * loop runs too: the ratios need it). */
static bool size_wanted(uint32_t bytes)
{
	static const char *const sc[] = {"l2fwd", "encap", "decap", "full"};
	static const uint32_t flows[] = {1, 1000, 100000, 1000000};
	char name[64];
	for (unsigned i = 0; i < 4; i++)
		for (unsigned f = 0; f < 4; f++) {
			snprintf(name, sizeof(name), "%s_%uB_%uflows", sc[i], bytes, flows[f]);
			if (wanted(name))
				return true;
		}
	return false;
}

static double load1(void)
{
	double l[3];
	return getloadavg(l, 3) >= 1 ? l[0] : -1;
}

/* The full pipeline on `cores` cores, RSS-sharded, against the one-core
 * figure of this run (one_mpps; 0 = not measured). */
static int rss(uint32_t cores, uint32_t flows, uint32_t bytes, double one_mpps)
{
	char name[64];
	snprintf(name, sizeof(name), "full_rss%u_%uB_%uflows", cores, bytes, flows);
	if (!wanted(name))
		return 0;
	struct iod_io_bench_rss_result r;
	struct iod_err e = {0};
	if (iod_io_bench_run_rss("full", flows, bytes, secs(), cores, &r, &e)) {
		fprintf(stderr, "bench_dataplane: %s: %s\n", name, e.msg);
		return 1;
	}
	printf("BENCH dataplane.%s cores=%u mpps=%.2f mpps_wall=%.2f packets=%llu "
	       "wire_bytes=%u cpu_share=%.2f fast_path_pct=%.1f",
	       name, cores, r.total.mpps, r.mpps_wall, (unsigned long long)r.total.packets,
	       r.total.wire_bytes, r.total.cpu_share,
	       r.total.packets ? 100.0 * (double)r.total.fp_hits / (double)r.total.packets : 0.0);
	for (uint32_t c = 0; c < cores; c++)
		printf(" core%u_mpps=%.2f core%u_flows=%u core%u_cpu_share=%.2f", c, r.core[c].mpps,
		       c, r.core[c].flows, c, r.core[c].cpu_share);
	if (one_mpps > 0)
		printf(" one_core_mpps=%.2f speedup_vs_1core=%.2f", one_mpps,
		       r.total.mpps / one_mpps);
	printf(" load1=%.2f\n", load1());
	fflush(stdout);
	return 0;
}

static int one(const char *sc, uint32_t flows, uint32_t bytes, double base_mpps, double *mpps)
{
	struct iod_io_bench_result r;
	struct iod_err e = {0};
	char name[64];
	snprintf(name, sizeof(name), "%s_%uB_%uflows", sc, bytes, flows);
	if (!wanted(name) && !(!strcmp(sc, "macswap") && size_wanted(bytes)))
		return 0;
	if (iod_io_bench_run(sc, flows, bytes, secs(), &r, &e)) {
		fprintf(stderr, "bench_dataplane: %s\n", e.msg);
		return 1;
	}
	printf("BENCH dataplane.%s_%uB_%uflows mpps=%.2f ns_per_pkt=%.1f packets=%llu "
	       "wire_bytes=%u cpu_share=%.2f cache_hit_pct=%.1f fast_path_pct=%.1f",
	       sc, bytes, flows, r.mpps, r.ns_per_pkt, (unsigned long long)r.packets, r.wire_bytes,
	       r.cpu_share,
	       r.cache_hits + r.walks
	           ? 100.0 * (double)r.cache_hits / (double)(r.cache_hits + r.walks)
	           : 0.0,
	       r.packets ? 100.0 * (double)r.fp_hits / (double)r.packets : 0.0);
	if (base_mpps > 0)
		printf(" ratio_vs_macswap=%.3f", r.mpps / base_mpps);
	if (dpdk_mpps > 0 && strcmp(sc, "macswap"))
		printf(" ratio_vs_dpdk_macswap=%.3f", r.mpps / dpdk_mpps);
	printf("\n");
	fflush(stdout);
	if (mpps)
		*mpps = r.mpps;
	return 0;
}

int main(void)
{
	const char *cs = getenv("IOD_BENCH_CT_SESSIONS");
	uint32_t ct_sessions = cs ? (uint32_t)strtoul(cs, NULL, 10) : 10000000u;
	printf("# bench_dataplane: one core, mem ports, %.1f s per figure, conntrack %u sessions, "
	       "%u warm-up passes, %llu packets per figure (0 = timed)\n",
	       secs(), ct_sessions, iod_io_bench_warm_passes(),
	       (unsigned long long)iod_io_bench_packets());
	printf("# sizes are tenant (inner) frames without FCS; VXLAN frames on the wire carry "
	       "50 B more (wire_bytes)\n");
	double la[3] = {-1, -1, -1};
	if (getloadavg(la, 3) < 3)
		la[0] = la[1] = la[2] = -1;
	printf("# load average at start: %.2f %.2f %.2f\n", la[0], la[1], la[2]);
	printf("# the machine is shared and noisy: rates are per CPU-second of the measuring\n"
	       "# thread (cpu_share = CPU time / wall time it got); compare within one run\n");
	int rc = 0;
	if (!wanted("dpdk_macswap_net_null")) {
		printf("# IOD_BENCH_ONLY: no dpdk_macswap figure\n");
	} else if (iod_io_dpdk_bench_macswap) {
		struct iod_err de = {0};
		if (iod_io_dpdk_bench_macswap(secs(), &dpdk_mpps, &de))
			fprintf(stderr, "bench_dataplane: DPDK: %s\n", de.msg);
		else
			printf("BENCH dataplane.dpdk_macswap_net_null mpps=%.2f ns_per_pkt=%.1f "
			       "note=bare_dpdk_loop_net_null0_to_net_null1\n",
			       dpdk_mpps, 1000.0 / dpdk_mpps);
	} else {
		printf("# DPDK not linked: no dpdk_macswap figure\n");
	}
	static const uint32_t sizes[] = {64, 1500};
	for (unsigned s = 0; s < 2; s++) {
		uint32_t b = sizes[s] == 64 ? 60 : sizes[s];
		double base = 0;
		rc |= one("macswap", 1, b, 0, &base);
		rc |= one("l2fwd", 1, b, base, NULL);
		rc |= one("encap", 1000, b, base, NULL);
		rc |= one("decap", 1000, b, base, NULL);
		static const uint32_t flows[] = {1000, 100000, 1000000};
		double full_mpps[3] = {0};
		for (unsigned f = 0; f < 3; f++) {
			if (sizes[s] == 1500 && flows[f] != 100000)
				continue; /* 1500 B: the target case only, keeps the run short */
			rc |= one("full", flows[f], b, base, &full_mpps[f]);
		}
		for (unsigned f = 1; sizes[s] == 64 && f < 3; f++)
			rc |= rss(2, flows[f], b, full_mpps[f]);
	}
	double bps, nps;
	size_t mem;
	struct iod_err e = {0};
	if (!wanted("conntrack"))
		return rc;
	if (iod_io_bench_ct(ct_sessions, &bps, &nps, &mem, &e)) {
		fprintf(stderr, "bench_dataplane: %s\n", e.msg);
		return 1;
	}
	printf("BENCH dataplane.conntrack sessions=%u mem_bytes=%zu bytes_per_session=%.1f "
	       "new_sessions_per_s=%.0f budget_bytes=%llu\n",
	       ct_sessions, mem, bps, nps, 2ull << 30);
	return rc;
}
