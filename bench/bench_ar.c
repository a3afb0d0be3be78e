/*
 * bench_ar.c: adaptive routing (net/ar) reproduced in the fabric simulator.
 *
 *   1. doca:   DOCA-AR. Two edges (h0 -> h1, 100 Gbps NICs), 4 equal 25 Gbps
 *              paths (2 leaves x 4 spines), an unresponsive elephant at 40 %
 *              of one path (h2 -> h3, on whichever path its port hashes to);
 *              10 and 50 flows of 5 MB start together; max FCT averaged over
 *              seeds for ecmp and minrtt.
 *   1b. doca_testbed: the same race as the testbed likely ran it: 4 x 100
 *              Gbps paths (REFERENCES: 100 GbE), a 40 Gbps UDP elephant
 *              sending line-rate bursts (1 ms period; --tb-burst-us 0 for
 *              Poisson), NewReno without ECN, 300 KB drop-tail queues,
 *              200 ms minimum RTO, initial window 10; 10 and 50 flows.
 *   2. clove_asym: 2 leaves x 2 spines, 2 x 40 Gbps per leaf-spine pair,
 *              16 x 10 Gbps hosts per leaf, one spine-leaf 40G link down;
 *              web-search flows between the leaves at 10-90 % of the NICs;
 *              average FCT normalised to ECMP per policy, < 100 KB, > 10 MB.
 *   3. clove_sym: the same with every link up.
 *   4. allreduce: 16 hosts alternating between two leaves in a ring
 *              all-reduce, one spine-leaf link degraded to 10 Gbps: bus
 *              bandwidth per policy as a fraction of the ideal (the NIC).
 *
 * usage: bench_ar [--full] [--newreno] [--gap-us N] [--load PCT] [--dur-ms N] [--tb-buffer-kb N] [--tb-path-gbps N] [--tb-burst-us N] [--tb-seeds N] [--tb-flows N] [--tb-iw N] [--tie-us N] [--ecn-mask] [--ecn-pkts N] [--outer-ect] [--variants] [--variant NAME] [--only doca|doca_testbed|clove_asym|clove_sym|allreduce]
 *   --ecn-mask: clove-ecn's edges hide CE from the inner flow unless every
 *   path is congested (the paper's design; off = the inner DCTCP sees every
 *   mark, as before); --ecn-pkts: switch ECN threshold (default 65);
 *   --outer-ect (with --newreno): packets ECN-capable outside, so the edge
 *   sees marks the loss-based inner flow ignores. --variants: ar.clove_asym
 *   under each model change, one at a time, each with its own ECMP run
 *   (`BENCH ar.clove_asym_model`); --variant NAME runs one of them.
 *   default: 10 seeds (doca), loads 30,50,70,90 (asym) and 80 (sym) with 1
 *   seed and 50 ms of arrivals (clove), 16 MB all-reduce. --full: 30 seeds,
 *   loads 10..90 step 10 with 3 seeds and 100 ms, 64 MB, 3 seeds (hours on
 *   2 cores). --only, --load, --dur-ms, --gap-us, --newreno narrow or vary a
 *   run. Prints one `BENCH ar.<case> ...` line
 *   per figure. The simulator is deterministic: the same flags print the same
 *   numbers; only wall_s (to stderr) varies.
 */
#include "iod/ar.h"
#include "iod/sim.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const struct iod_err *e, const char *what)
{
	fprintf(stderr, "bench_ar: %s: %s\n", what, e->msg);
	exit(1);
}

/* A sim with policy p, ready for flows; the caller runs and destroys it. */
struct run {
	struct iod_sim *s;
	struct iod_sim_ar *ar;
	struct iod_sim_path_policy pol;
};

static enum iod_sim_transport g_transport = IOD_SIM_DCTCP;
static uint64_t g_gap_ns;  /* flowlet gap; 0 = the core's default */
static const int *g_loads; /* --load N: one load only */
static int g_load_one;
static uint64_t g_dur_ns;     /* --dur-ms: arrival window of the Clove cases */
static bool g_ecn_mask;       /* --ecn-mask: clove-ecn's edges mask CE from the inner flow */
static uint32_t g_ecn_pkts;   /* --ecn-pkts: switch ECN threshold (0 = the topology's 65) */
static bool g_outer_ect;      /* --outer-ect: every packet ECT outside (for --newreno) */
static bool g_variants;       /* --variants: the Clove model variants, one at a time */
static const char *g_variant; /* --variant NAME: only that one */
static uint32_t g_seeds;      /* --seeds N: seeds of the variants (default 3) */

static bool g_scatter;        /* minrtt probes pseudo-random ports (run_open) */
static uint64_t g_rto_min_ns; /* 0 = the simulator's default (1 ms) */
static uint32_t g_init_cwnd;  /* 0 = one BDP (line-rate start) */
static uint64_t g_tie_ns;     /* minrtt tie window (0 = the first reply wins) */
static uint64_t g_tie_window_ns = 5 * IOD_NS_PER_US; /* --tie-us: for the minrtt_tie runs */

static void run_open(struct run *r, const struct iod_sim_topo *t, enum iod_ar_policy p,
                     uint64_t seed)
{
	struct iod_err e = {0};
	struct iod_ar_config ac;
	struct iod_sim_config sc;

	iod_ar_config_default(&ac, p);
	ac.sport_min = IOD_SIM_VXLAN_SPORT_MIN;
	ac.sport_max = IOD_SIM_VXLAN_SPORT_MAX;
	ac.flows_max = 4096;
	ac.dests_max = 64;
	ac.probe_interval_ns = 500 * IOD_NS_PER_US; /* per (host, dest, path): HULA's
	                                               200 us per ToR pair would be
	                                               20 Gbps of probes here */
	ac.seed = seed;
	if (g_gap_ns)
		ac.flowlet_gap_ns = g_gap_ns;
	ac.minrtt_scatter = g_scatter;
	ac.minrtt_tie_ns = g_tie_ns;
	if (iod_sim_ar_create(&ac, iod_sim_topo_host_count(t), 0, 0, &r->ar, &r->pol, &e))
		die(&e, "adaptive routing");
	iod_sim_config_default(&sc);
	sc.seed = seed;
	sc.transport = g_transport;
	sc.rto_min_ns = g_rto_min_ns;
	sc.init_cwnd_pkts = g_init_cwnd;
	sc.packets_max = 1u << 20;
	sc.flows_max = 1u << 16;
	sc.outer_ect = g_outer_ect;
	if (g_ecn_mask && p == IOD_AR_CLOVE_ECN)
		r->pol.inner_ecn = iod_sim_ar_inner_ecn; /* else the inner flow sees every CE */
	sc.policy = &r->pol;
	if (iod_sim_create(&r->s, t, &sc, &e))
		die(&e, "simulator");
}

static void run_close(struct run *r)
{
	iod_sim_destroy(r->s);
	iod_sim_ar_destroy(r->ar);
}

static void add_node(struct iod_sim_topo *t, const char *name, enum iod_sim_node_kind k,
                     uint32_t *idx)
{
	struct iod_err e = {0};
	if (iod_sim_topo_add_node(t, name, k, idx, &e))
		die(&e, "topology");
}

static uint32_t add_link(struct iod_sim_topo *t, uint32_t a, uint32_t b, uint64_t bps)
{
	struct iod_err e = {0};
	if (iod_sim_topo_add_link(t, a, b, bps, IOD_NS_PER_US, &e))
		die(&e, "topology");
	return t->n_links - 1;
}

/* ---- 1. DOCA-AR ----------------------------------------------------------- */

/* DOCA-AR's fabric: 100 Gbps NICs, 4 paths of path_bps, drop-tail queues of
 * buffer bytes, ECN marking at ecn_pkts (0 = off). */
static void doca_topo(struct iod_sim_topo *t, uint64_t path_bps, uint64_t buffer, uint32_t ecn_pkts)
{
	uint32_t h[4], l[2], sp[4];
	char n[32];
	iod_sim_topo_init(t);
	for (int i = 0; i < 4; i++) {
		snprintf(n, sizeof(n), "h%d", i);
		add_node(t, n, IOD_SIM_HOST, &h[i]);
	}
	add_node(t, "leaf0", IOD_SIM_SWITCH, &l[0]);
	add_node(t, "leaf1", IOD_SIM_SWITCH, &l[1]);
	for (int i = 0; i < 4; i++) {
		snprintf(n, sizeof(n), "spine%d", i);
		add_node(t, n, IOD_SIM_SWITCH, &sp[i]);
	}
	/* h0, h2 on leaf0; h1, h3 on leaf1 */
	for (int i = 0; i < 4; i++)
		add_link(t, h[i], l[i % 2], 100000000000ull);
	for (int i = 0; i < 4; i++) {
		add_link(t, l[0], sp[i], path_bps);
		add_link(t, sp[i], l[1], path_bps);
	}
	t->buffer_bytes = buffer;
	t->ecn_pkts = ecn_pkts;
	snprintf(t->name, sizeof(t->name), "doca-ar");
}

struct doca_res {
	double max_ms;     /* the slowest flow's FCT */
	uint32_t timeouts; /* RTO expiries over all flows */
	uint64_t drops;    /* packets dropped in the fabric */
};

static uint64_t
    g_burst_ns; /* elephant: 0 = Poisson, else on/off at the NIC's rate with this period */

static struct doca_res doca_one(const struct iod_sim_topo *t, enum iod_ar_policy p, uint32_t nflows,
                                uint64_t seed, double elephant_bps, uint64_t horizon_ns)
{
	struct iod_err e = {0};
	struct run r;
	struct doca_res res = {0};
	run_open(&r, t, p, seed);
	/* the unresponsive elephant in 1500-byte packets, for the horizon */
	double pps = elephant_bps / (1500 * 8);
	if (g_burst_ns) {
		/* line-rate bursts (100 GbE NIC) for the duty cycle of the rate */
		const double nic_bps = 100e9;
		pps = nic_bps / (1500 * 8);
		if (iod_sim_raw_add(r.s, 2, 3, 1500, pps, 0, horizon_ns, &e) ||
		    iod_sim_raw_burst(r.s, 0,
		                      (uint64_t)((double)g_burst_ns * elephant_bps / nic_bps),
		                      g_burst_ns, &e))
			die(&e, "elephant");
	} else if (iod_sim_raw_add(r.s, 2, 3, 1500, pps, 0, horizon_ns, &e)) {
		die(&e, "elephant");
	}
	/* the flows start together at 1 ms, once the elephant's queue settled,
	 * each within 20 us (a script starting them; a few RTTs here) */
	struct iod_rng jr;
	iod_rng_seed(&jr, seed * 104729);
	for (uint32_t i = 0; i < nflows; i++)
		if (iod_sim_flow_add(r.s, 0, 1, 5000000,
		                     IOD_NS_PER_MS + iod_rng_below(&jr, 20 * IOD_NS_PER_US), i,
		                     NULL, &e))
			die(&e, "flow");
	/* run until every flow finished (the elephant ends at the horizon) */
	for (uint64_t until = 10 * IOD_NS_PER_MS;
	     iod_sim_flows_done(r.s) < nflows && until <= horizon_ns; until += 10 * IOD_NS_PER_MS)
		if (iod_sim_run(r.s, until, &e))
			die(&e, "run");
	for (uint32_t i = 0; i < nflows; i++) {
		const struct iod_sim_flow_rec *f = iod_sim_flow(r.s, i);
		double ms = f->done ? (double)f->fct_ns / 1e6 : (double)horizon_ns / 1e6;
		if (ms > res.max_ms)
			res.max_ms = ms;
		res.timeouts += f->timeouts;
	}
	struct iod_sim_summary sum;
	if (iod_sim_summarize(r.s, &sum) == 0)
		res.drops = sum.drops;
	run_close(&r);
	return res;
}

static void bench_doca(bool full)
{
	struct iod_sim_topo t;
	uint32_t seeds = full ? 30 : 10;
	static const uint32_t counts[2] = {10, 50};
	static const double pub_ecmp[2] = {921, 1857}, pub_minrtt[2] = {34, 335};

	doca_topo(&t, 25000000000ull, 1000000, 65);
	for (int c = 0; c < 2; c++) {
		double sum[4] = {0, 0, 0, 0};
		uint32_t tie_wins = 0; /* seeds where the tie window beat plain minrtt */
		double t0 = wall_now();
		const double el = 0.4 * 25e9;
		const uint64_t hz = 2 * IOD_NS_PER_S;
		for (uint32_t sd = 1; sd <= seeds; sd++) {
			sum[0] += doca_one(&t, IOD_AR_ECMP, counts[c], sd, el, hz).max_ms;
			double last_minrtt =
			    doca_one(&t, IOD_AR_MINRTT, counts[c], sd, el, hz).max_ms;
			sum[1] += last_minrtt;
			g_scatter = true;
			sum[2] += doca_one(&t, IOD_AR_MINRTT, counts[c], sd, el, hz).max_ms;
			g_scatter = false;
			g_tie_ns = g_tie_window_ns;
			double tie = doca_one(&t, IOD_AR_MINRTT, counts[c], sd, el, hz).max_ms;
			g_tie_ns = 0;
			sum[3] += tie;
			tie_wins += tie < last_minrtt;
		}
		double ecmp = sum[0] / seeds, mr = sum[1] / seeds, ms = sum[2] / seeds,
		       mt = sum[3] / seeds;
		printf(
		    "BENCH ar.doca flows=%u seeds=%u ecmp_max_fct_ms=%.2f minrtt_max_fct_ms=%.2f "
		    "ratio=%.2f minrtt_scatter_max_fct_ms=%.2f ratio_scatter=%.2f "
		    "minrtt_tie_max_fct_ms=%.2f ratio_tie=%.2f tie_window_us=%.1f "
		    "tie_better_seeds=%u/%u "
		    "published_ecmp_ms=%.0f published_minrtt_ms=%.0f published_ratio=%.2f\n",
		    counts[c], seeds, ecmp, mr, ecmp / mr, ms, ecmp / ms, mt, ecmp / mt,
		    (double)g_tie_window_ns / 1e3, tie_wins, seeds, pub_ecmp[c], pub_minrtt[c],
		    pub_ecmp[c] / pub_minrtt[c]);
		fflush(stdout);
		fprintf(stderr, "  (doca %u flows: %.1f s wall)\n", counts[c], wall_now() - t0);
	}
	iod_sim_topo_free(&t);
}

/*
 * 1b. DOCA-AR, testbed-like. What the published ECMP tail (921 ms for 10 x
 * 5 MB over 100 GbE, ~4 ms ideal) points at: TCP flows sharing a path with
 * an unresponsive 40 Gb/s UDP elephant lose packets and wait for Linux's
 * 200 ms minimum RTO. So: loss-based TCP (NewReno), no ECN, shallow
 * drop-tail queues, a 200 ms RTO floor, Linux's initial window of 10
 * packets; 100 GbE hosts. Two fabrics: 4 x 100 Gbps paths with the 40 Gbps
 * elephant (REFERENCES: 100 GbE, a 40 Gb/s elephant on one path; the issue:
 * 40 % of one path), and the old 4 x 25 Gbps paths with a 10 Gbps elephant
 * (also 40 %), where the paths together, not each, match the NIC.
 */
static uint64_t g_tb_buffer = 300000;          /* --tb-buffer-kb: 200 x 1500 B per queue */
static uint64_t g_tb_path_gbps = 100;          /* --tb-path-gbps */
static uint64_t g_tb_burst_ns = IOD_NS_PER_MS; /* --tb-burst-us: iperf3's 1 ms pacing timer;
                                                  0 = a Poisson elephant */
static uint32_t g_tb_seeds;                    /* --tb-seeds: 0 = 10 (30 with --full) */
static uint32_t g_tb_iw = 10;                  /* --tb-iw: initial window (Linux: 10 packets) */
static uint32_t g_tb_flows;                    /* --tb-flows: 10 or 50 only; 0 = both */

static void bench_doca_testbed(bool full)
{
	uint32_t seeds = g_tb_seeds ? g_tb_seeds : full ? 30 : 10;
	static const uint32_t counts[2] = {10, 50};
	static const double pub_ecmp[2] = {921, 1857}, pub_minrtt[2] = {34, 335};
	const uint64_t path_bps = g_tb_path_gbps * 1000000000ull;
	const double elephant_bps = 0.4 * (double)path_bps;
	const uint64_t hz = 5 * IOD_NS_PER_S; /* horizon: an unfinished flow counts 5 s */
	enum iod_sim_transport tr = g_transport;
	struct iod_sim_topo t;

	g_transport = IOD_SIM_NEWRENO;
	g_rto_min_ns = 200 * IOD_NS_PER_MS;
	g_init_cwnd = g_tb_iw;
	g_burst_ns = g_tb_burst_ns;
	doca_topo(&t, path_bps, g_tb_buffer, 0);
	t.ecn_bytes = 0;
	for (int c = 0; c < 2; c++) {
		if (g_tb_flows && counts[c] != g_tb_flows)
			continue;
		struct doca_res sum[4] = {{0}};
		uint32_t tie_wins = 0; /* seeds where the tie window beat plain minrtt */
		double t0 = wall_now();
		for (uint32_t sd = 1; sd <= seeds; sd++) {
			double run_ms[4] = {0};
			for (int v = 0; v < 4; v++) { /* ecmp, minrtt, scatter, tie window */
				g_scatter = v == 2;
				g_tie_ns = v == 3 ? g_tie_window_ns : 0;
				struct doca_res r1 = doca_one(&t, v ? IOD_AR_MINRTT : IOD_AR_ECMP,
				                              counts[c], sd, elephant_bps, hz);
				sum[v].max_ms += r1.max_ms;
				sum[v].timeouts += r1.timeouts;
				sum[v].drops += r1.drops;
				run_ms[v] = r1.max_ms;
			}
			tie_wins += run_ms[3] < run_ms[1];
		}
		g_scatter = false;
		g_tie_ns = 0;
		printf(
		    "BENCH ar.doca_testbed path_gbps=%.0f elephant_gbps=%.0f burst_us=%.0f "
		    "flows=%u seeds=%u buffer_kb=%.0f ecmp_max_fct_ms=%.2f minrtt_max_fct_ms=%.2f "
		    "ratio=%.2f minrtt_scatter_max_fct_ms=%.2f ratio_scatter=%.2f "
		    "minrtt_tie_max_fct_ms=%.2f ratio_tie=%.2f tie_window_us=%.1f "
		    "tie_better_seeds=%u/%u timeouts_per_run=%.1f/%.1f/%.1f/%.1f "
		    "drops_per_run=%.0f/%.0f/%.0f/%.0f "
		    "published_ecmp_ms=%.0f published_minrtt_ms=%.0f published_ratio=%.2f\n",
		    (double)path_bps / 1e9, elephant_bps / 1e9, (double)g_burst_ns / 1e3, counts[c],
		    seeds, (double)g_tb_buffer / 1e3, sum[0].max_ms / seeds, sum[1].max_ms / seeds,
		    sum[0].max_ms / sum[1].max_ms, sum[2].max_ms / seeds,
		    sum[0].max_ms / sum[2].max_ms, sum[3].max_ms / seeds,
		    sum[0].max_ms / sum[3].max_ms, (double)g_tie_window_ns / 1e3, tie_wins, seeds,
		    (double)sum[0].timeouts / seeds, (double)sum[1].timeouts / seeds,
		    (double)sum[2].timeouts / seeds, (double)sum[3].timeouts / seeds,
		    (double)sum[0].drops / seeds, (double)sum[1].drops / seeds,
		    (double)sum[2].drops / seeds, (double)sum[3].drops / seeds, pub_ecmp[c],
		    pub_minrtt[c], pub_ecmp[c] / pub_minrtt[c]);
		fflush(stdout);
		fprintf(stderr, "  (doca_testbed %.0fG %u flows: %.1f s wall)\n",
		        (double)path_bps / 1e9, counts[c], wall_now() - t0);
	}
	iod_sim_topo_free(&t);
	g_burst_ns = 0;
	g_transport = tr;
	g_rto_min_ns = 0;
	g_init_cwnd = 0;
}

/* ---- 2, 3. Clove ------------------------------------------------------------ */

static void clove_topo(struct iod_sim_topo *t, bool asym)
{
	struct iod_err e = {0};
	iod_sim_topo_init(t);
	if (iod_sim_topo_builtin(t,
	                         "leaf-spine:leaves=2,spines=2,hosts=32,host_rate=10Gbps,"
	                         "fabric_rate=40Gbps,links=2",
	                         &e))
		die(&e, "topology");
	if (asym) {
		/* links: 32 host links, then leaf l, spine s, copy k; fail spine0-leaf1 #0 */
		uint32_t link = 32 + (1 * 2 + 0) * 2 + 0;
		if (iod_sim_topo_add_event(t, 0, link, 0, &e))
			die(&e, "topology");
	}
	if (g_ecn_pkts) {
		t->ecn_pkts = g_ecn_pkts;
		t->ecn_bytes = 0;
	}
}

struct clove_res {
	struct iod_sim_summary sum; /* FCTs */
	uint32_t flows, done;       /* added, finished */
	double spine0_share;        /* of the bytes the spines sent, spine0's (it has a
	                               third of the leaf-to-leaf capacity: ideal 0.33) */
	uint64_t marks_last_hop;    /* CE marks on leaf -> host ports */
	uint64_t marks_fabric;      /* CE marks on leaf <-> spine ports */
	uint64_t drops_last_hop;    /* drops on leaf -> host ports */
};

/* CE marks and drops on the receivers' last hop (leaf -> host) and in the
 * fabric (leaf <-> spine). */
static void mark_split(const struct iod_sim *s, struct clove_res *out)
{
	for (uint32_t p = 0; p < iod_sim_port_count(s); p++) {
		struct iod_sim_port_stats st;
		iod_sim_port_stats(s, p, &st);
		const char *n = iod_sim_node_name(s, st.node), *m = iod_sim_node_name(s, st.peer);
		if (!strncmp(n, "leaf", 4) && strncmp(m, "spine", 5)) {
			out->marks_last_hop += st.ecn_marks;
			out->drops_last_hop += st.drops;
		} else if (!strncmp(n, "leaf", 4) || !strncmp(n, "spine", 5)) {
			out->marks_fabric += st.ecn_marks;
		}
	}
}

/* The share of the bytes the spines forwarded that went through spine0. */
static double spine0_share(const struct iod_sim *s)
{
	uint64_t sp0 = 0, all = 0;
	for (uint32_t p = 0; p < iod_sim_port_count(s); p++) {
		struct iod_sim_port_stats st;
		iod_sim_port_stats(s, p, &st);
		const char *n = iod_sim_node_name(s, st.node);
		if (strncmp(n, "spine", 5))
			continue;
		all += st.tx_bytes;
		if (!strcmp(n, "spine0"))
			sp0 += st.tx_bytes;
	}
	return all ? (double)sp0 / (double)all : 0;
}

/* Poisson web-search arrivals from every host to a random host on the other
 * leaf at load x the NIC rate, for dur_ns; then drain. */
static void clove_one(const struct iod_sim_topo *t, enum iod_ar_policy p, double load,
                      uint64_t dur_ns, uint64_t seed, const struct iod_sim_cdf *cdf,
                      struct clove_res *out)
{
	struct iod_err e = {0};
	struct iod_rng rng;
	struct run r;
	double mean_gap_ns = iod_sim_cdf_mean(cdf) * 8 / (10e9 * load) * 1e9;

	run_open(&r, t, p, seed);
	/* Clove's edges know their peers: paths are discovered before traffic,
	 * which starts at 1 ms */
	iod_sim_ar_prepare_all(r.ar, 0);
	iod_rng_seed(&rng, seed * 7919 + (uint64_t)(load * 100));
	for (uint32_t h = 0; h < 32; h++) {
		double at = (double)IOD_NS_PER_MS + iod_rng_exp(&rng, mean_gap_ns);
		while (at < (double)(dur_ns + IOD_NS_PER_MS)) {
			uint32_t dst = (h < 16 ? 16 : 0) + (uint32_t)iod_rng_below(&rng, 16);
			uint64_t size = iod_sim_cdf_sample(cdf, &rng);
			if (iod_sim_flow_add(r.s, h, dst, size ? size : 1, (uint64_t)at, 0, NULL,
			                     &e))
				die(&e, "flow");
			at += iod_rng_exp(&rng, mean_gap_ns);
		}
	}
	/* drain: up to 20 x the arrival window */
	if (iod_sim_run(r.s, 20 * dur_ns, &e))
		die(&e, "run");
	if (iod_sim_summarize(r.s, &out->sum))
		die(&e, "summary");
	out->flows = iod_sim_flow_count(r.s);
	out->done = iod_sim_flows_done(r.s);
	out->spine0_share = spine0_share(r.s);
	out->marks_last_hop = out->marks_fabric = out->drops_last_hop = 0;
	mark_split(r.s, out);
	run_close(&r);
}

static const char *transport_name(void)
{
	return g_transport == IOD_SIM_NEWRENO ? (g_outer_ect ? "newreno_outer_ect" : "newreno")
	                                      : "dctcp";
}

static void bench_clove(bool full, bool asym)
{
	static const enum iod_ar_policy pols[4] = {IOD_AR_ECMP, IOD_AR_FLOWLET, IOD_AR_CLOVE_ECN,
	                                           IOD_AR_PROBE_UTIL};
	static const int loads_quick[] = {30, 50, 70, 90};
	static const int loads_full[] = {10, 20, 30, 40, 50, 60, 70, 80, 90};
	static const int loads_sym[] = {80};
	const int *loads =
	    asym ? (full ? loads_full : loads_quick) : (full ? loads_full : loads_sym);
	int nloads = asym ? (full ? 9 : 4) : (full ? 9 : 1);
	if (g_loads) {
		loads = g_loads;
		nloads = 1;
	}
	uint32_t seeds = full ? 3 : 1;
	uint64_t dur = g_dur_ns ? g_dur_ns : (full ? 100 : 50) * IOD_NS_PER_MS;
	struct iod_sim_topo t;
	struct iod_sim_cdf cdf;
	struct iod_err e = {0};

	if (iod_sim_cdf_load(&cdf, "web-search", &e))
		die(&e, "web-search");
	clove_topo(&t, asym);
	for (int li = 0; li < nloads; li++) {
		double avg[4] = {0}, small[4] = {0}, large[4] = {0};
		uint32_t flows[4] = {0}, done[4] = {0};
		uint64_t drops[4] = {0}, tmo[4] = {0}, masked[4] = {0};
		double t0 = wall_now();
		for (int pi = 0; pi < 4; pi++) {
			for (uint32_t sd = 1; sd <= seeds; sd++) {
				struct clove_res cr;
				clove_one(&t, pols[pi], loads[li] / 100.0, dur, sd, &cdf, &cr);
				avg[pi] += cr.sum.all.fct_avg_us / seeds;
				small[pi] += cr.sum.small.fct_avg_us / seeds;
				large[pi] += cr.sum.large.fct_avg_us / seeds;
				flows[pi] += cr.flows;
				done[pi] += cr.done;
				drops[pi] += cr.sum.drops;
				tmo[pi] += cr.sum.timeouts;
				masked[pi] += cr.sum.ecn_masked;
			}
		}
		for (int pi = 0; pi < 4; pi++)
			printf("BENCH ar.%s load=%d policy=%s seeds=%u flows=%u done=%u "
			       "fct_avg_us=%.1f fct_norm=%.3f small_norm=%.3f large_norm=%.3f "
			       "ecn_mask=%d ecn_pkts=%u transport=%s drops=%" PRIu64
			       " timeouts=%" PRIu64 " ecn_masked=%" PRIu64 "\n",
			       asym ? "clove_asym" : "clove_sym", loads[li],
			       iod_ar_policy_name(pols[pi]), seeds, flows[pi], done[pi], avg[pi],
			       avg[pi] / avg[0], small[0] > 0 ? small[pi] / small[0] : 0,
			       large[0] > 0 ? large[pi] / large[0] : 0, g_ecn_mask, t.ecn_pkts,
			       transport_name(), drops[pi], tmo[pi], masked[pi]);
		fflush(stdout);
		fprintf(stderr, "  (%s load %d: %.1f s wall)\n", asym ? "asym" : "sym", loads[li],
		        wall_now() - t0);
	}
	iod_sim_topo_free(&t);
}

/* The Clove model, one change at a time from the model before (the inner
 * flow saw every CE, ECN at 65 packets, DCTCP, 100 us flowlets), each run
 * with its own ECMP baseline: which modelling difference moves clove-ecn's
 * average FCT towards the published 0.33 of ECMP's. */
struct clove_variant {
	const char *name;
	bool mask;         /* the edge masks CE from the inner flow */
	uint32_t ecn_pkts; /* switch ECN threshold */
	bool newreno;      /* inner loss-based TCP, outer ECT (Clove's edge marks it) */
	uint64_t gap_us;   /* flowlet gap */
};

static const struct clove_variant clove_variants[] = {
    {"before", false, 65, false, 100},
    {"mask", true, 65, false, 100},
    {"ecn20", false, 20, false, 100},
    {"mask_ecn20", true, 20, false, 100},
    {"gap20us", false, 65, false, 20},
    {"gap500us", false, 65, false, 500},
    {"newreno", false, 65, true, 100},
    {"newreno_ecn20", false, 20, true, 100},
    {"mask_ecn20_gap500us", true, 20, false, 500},
};

static void clove_variant_one(const struct clove_variant *v, enum iod_ar_policy p, int load,
                              uint64_t dur, const struct iod_sim_cdf *cdf, struct clove_res *cr)
{
	struct iod_sim_topo t;
	g_ecn_mask = v->mask;
	g_ecn_pkts = v->ecn_pkts;
	g_transport = v->newreno ? IOD_SIM_NEWRENO : IOD_SIM_DCTCP;
	g_outer_ect = v->newreno;
	g_gap_ns = v->gap_us * IOD_NS_PER_US;
	clove_topo(&t, true);
	uint32_t seeds = g_seeds ? g_seeds : 3;
	memset(cr, 0, sizeof(*cr));
	for (uint32_t sd = 1; sd <= seeds; sd++) {
		struct clove_res one;
		clove_one(&t, p, load / 100.0, dur, sd, cdf, &one);
		cr->sum.all.fct_avg_us += one.sum.all.fct_avg_us / seeds;
		cr->sum.small.fct_avg_us += one.sum.small.fct_avg_us / seeds;
		cr->sum.large.fct_avg_us += one.sum.large.fct_avg_us / seeds;
		cr->sum.drops += one.sum.drops;
		cr->sum.timeouts += one.sum.timeouts;
		cr->sum.ecn_masked += one.sum.ecn_masked;
		cr->spine0_share += one.spine0_share / seeds;
		cr->marks_last_hop += one.marks_last_hop;
		cr->marks_fabric += one.marks_fabric;
		cr->drops_last_hop += one.drops_last_hop;
		cr->flows += one.flows;
		cr->done += one.done;
	}
	iod_sim_topo_free(&t);
}

/* One BENCH ar.clove_asym_model line: a variant's ECMP and clove-ecn runs. */
static void print_variant(const struct clove_variant *v, int load, uint64_t dur,
                          const struct clove_res *ec, const struct clove_res *cl)
{
	printf(
	    "BENCH ar.clove_asym_model variant=%s load=%d dur_ms=%" PRIu64
	    " seeds=%u ecn_mask=%d ecn_pkts=%u transport=%s gap_us=%" PRIu64
	    " flows=%u done_ecmp=%u done_clove=%u ecmp_fct_avg_us=%.1f clove_fct_avg_us=%.1f"
	    " fct_norm=%.3f small_norm=%.3f large_norm=%.3f",
	    v->name, load, (uint64_t)(dur / IOD_NS_PER_MS), g_seeds ? g_seeds : 3, v->mask,
	    v->ecn_pkts, v->newreno ? "newreno_outer_ect" : "dctcp", v->gap_us, cl->flows, ec->done,
	    cl->done, ec->sum.all.fct_avg_us, cl->sum.all.fct_avg_us,
	    cl->sum.all.fct_avg_us / ec->sum.all.fct_avg_us,
	    ec->sum.small.fct_avg_us > 0 ? cl->sum.small.fct_avg_us / ec->sum.small.fct_avg_us : 0,
	    ec->sum.large.fct_avg_us > 0 ? cl->sum.large.fct_avg_us / ec->sum.large.fct_avg_us : 0);
	printf(" ecmp_drops=%" PRIu64 " clove_drops=%" PRIu64 " ecmp_timeouts=%" PRIu64
	       " clove_timeouts=%" PRIu64 " ecn_masked=%" PRIu64
	       " ecmp_spine0_share=%.3f clove_spine0_share=%.3f ecmp_marks_last_hop=%" PRIu64
	       " ecmp_marks_fabric=%" PRIu64 " clove_marks_last_hop=%" PRIu64
	       " clove_marks_fabric=%" PRIu64 " ecmp_drops_last_hop=%" PRIu64
	       " clove_drops_last_hop=%" PRIu64 "\n",
	       ec->sum.drops, cl->sum.drops, ec->sum.timeouts, cl->sum.timeouts, cl->sum.ecn_masked,
	       ec->spine0_share, cl->spine0_share, ec->marks_last_hop, ec->marks_fabric,
	       cl->marks_last_hop, cl->marks_fabric, ec->drops_last_hop, cl->drops_last_hop);
}

static void bench_clove_variants(void)
{
	int load = g_loads ? g_loads[0] : 70;
	uint64_t dur = g_dur_ns ? g_dur_ns : 50 * IOD_NS_PER_MS;
	struct iod_sim_cdf cdf;
	struct iod_err e = {0};
	if (iod_sim_cdf_load(&cdf, "web-search", &e))
		die(&e, "web-search");
	for (size_t i = 0; i < sizeof(clove_variants) / sizeof(clove_variants[0]); i++) {
		const struct clove_variant *v = &clove_variants[i];
		struct clove_res ec, cl;
		if (g_variant && strcmp(g_variant, v->name))
			continue;
		double t0 = wall_now();
		clove_variant_one(v, IOD_AR_ECMP, load, dur, &cdf, &ec);
		clove_variant_one(v, IOD_AR_CLOVE_ECN, load, dur, &cdf, &cl);
		print_variant(v, load, dur, &ec, &cl);
		fflush(stdout);
		fprintf(stderr, "  (variant %s: %.1f s wall)\n", v->name, wall_now() - t0);
	}
}

/* ---- 4. all-reduce ---------------------------------------------------------- */

static void ring_topo(struct iod_sim_topo *t)
{
	uint32_t h[16], l[2], sp[2];
	char n[32];
	struct iod_err e = {0};
	iod_sim_topo_init(t);
	for (int i = 0; i < 16; i++) {
		snprintf(n, sizeof(n), "h%d", i);
		add_node(t, n, IOD_SIM_HOST, &h[i]);
	}
	add_node(t, "leaf0", IOD_SIM_SWITCH, &l[0]);
	add_node(t, "leaf1", IOD_SIM_SWITCH, &l[1]);
	add_node(t, "spine0", IOD_SIM_SWITCH, &sp[0]);
	add_node(t, "spine1", IOD_SIM_SWITCH, &sp[1]);
	/* ranks alternate leaves: every ring neighbour is across the fabric */
	for (int i = 0; i < 16; i++)
		add_link(t, h[i], l[i % 2], 10000000000ull);
	uint32_t degraded = 0;
	for (int s = 0; s < 2; s++)
		for (int li = 0; li < 2; li++)
			for (int k = 0; k < 2; k++) {
				uint32_t id = add_link(t, l[li], sp[s], 40000000000ull);
				if (s == 0 && li == 1 && k == 0)
					degraded = id;
			}
	t->buffer_bytes = 1000000;
	t->ecn_pkts = 65;
	if (iod_sim_topo_add_event(t, 0, degraded, 10000000000ull, &e))
		die(&e, "topology");
}

static void bench_allreduce(bool full)
{
	static const enum iod_ar_policy pols[5] = {IOD_AR_ECMP, IOD_AR_MINRTT, IOD_AR_FLOWLET,
	                                           IOD_AR_CLOVE_ECN, IOD_AR_PROBE_UTIL};
	uint64_t size = (full ? 64 : 16) * 1000000ull;
	uint32_t seeds = full ? 3 : 1;
	struct iod_sim_topo t;
	struct iod_err e = {0};
	/* ideal: every rank at its NIC's payload rate */
	struct iod_sim_config sc;
	iod_sim_config_default(&sc);
	double ideal_bps = 10e9 * sc.mss_bytes / (sc.mss_bytes + sc.hdr_bytes);

	ring_topo(&t);
	for (int pi = 0; pi < 5; pi++) {
		double bus = 0;
		for (uint32_t sd = 1; sd <= seeds; sd++) {
			struct iod_sim_allreduce a;
			struct run r;
			run_open(&r, &t, pols[pi], sd);
			if (iod_sim_allreduce_start(r.s, &a, 16, size, 0, &e))
				die(&e, "all-reduce");
			if (iod_sim_run(r.s, 10 * IOD_NS_PER_S, &e))
				die(&e, "run");
			bus += a.end_ns ? iod_sim_allreduce_busbw_bps(&a) / seeds : 0;
			iod_sim_allreduce_free(&a);
			run_close(&r);
		}
		printf("BENCH ar.allreduce policy=%s ranks=16 size_bytes=%" PRIu64
		       " seeds=%u busbw_gbps=%.2f ideal_gbps=%.2f frac_ideal=%.3f\n",
		       iod_ar_policy_name(pols[pi]), size, seeds, bus / 1e9, ideal_bps / 1e9,
		       bus / ideal_bps);
		fflush(stdout);
	}
	iod_sim_topo_free(&t);
}

int main(int argc, char **argv)
{
	bool full = false;
	const char *only = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--full")) {
			full = true;
		} else if (!strcmp(argv[i], "--gap-us") && i + 1 < argc) {
			g_gap_ns = strtoull(argv[++i], NULL, 10) * IOD_NS_PER_US;
		} else if (!strcmp(argv[i], "--load") && i + 1 < argc) {
			g_load_one = atoi(argv[++i]);
			g_loads = &g_load_one;
		} else if (!strcmp(argv[i], "--dur-ms") && i + 1 < argc) {
			g_dur_ns = strtoull(argv[++i], NULL, 10) * IOD_NS_PER_MS;
		} else if (!strcmp(argv[i], "--ecn-mask")) {
			g_ecn_mask = true;
		} else if (!strcmp(argv[i], "--ecn-pkts") && i + 1 < argc) {
			g_ecn_pkts = (uint32_t)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--outer-ect")) {
			g_outer_ect = true;
		} else if (!strcmp(argv[i], "--variants")) {
			g_variants = true;
		} else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
			g_seeds = (uint32_t)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--variant") && i + 1 < argc) {
			g_variants = true;
			g_variant = argv[++i];
		} else if (!strcmp(argv[i], "--newreno")) {
			g_transport = IOD_SIM_NEWRENO;
		} else if (!strcmp(argv[i], "--tb-buffer-kb") && i + 1 < argc) {
			g_tb_buffer = strtoull(argv[++i], NULL, 10) * 1000;
		} else if (!strcmp(argv[i], "--tb-path-gbps") && i + 1 < argc) {
			g_tb_path_gbps = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--tb-burst-us") && i + 1 < argc) {
			g_tb_burst_ns = strtoull(argv[++i], NULL, 10) * IOD_NS_PER_US;
		} else if (!strcmp(argv[i], "--tb-seeds") && i + 1 < argc) {
			g_tb_seeds = (uint32_t)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--tb-iw") && i + 1 < argc) {
			g_tb_iw = (uint32_t)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--tb-flows") && i + 1 < argc) {
			g_tb_flows = (uint32_t)strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--tie-us") && i + 1 < argc) {
			g_tie_window_ns = strtoull(argv[++i], NULL, 10) * IOD_NS_PER_US;
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			only = argv[++i];
		} else {
			fprintf(
			    stderr,
			    "usage: bench_ar [--full] [--newreno] [--gap-us N] [--load "
			    "PCT] [--dur-ms N] "
			    "[--tb-buffer-kb N] [--tb-path-gbps N] [--tb-burst-us N] [--tie-us "
			    "N] [--ecn-mask] [--ecn-pkts N] [--outer-ect] [--variants] [--variant "
			    "NAME] [--only doca|doca_testbed|clove_asym|clove_sym|allreduce]\n");
			return 2;
		}
	}
	printf("bench_ar: %s scale (deterministic; shared, noisy 2-core machine: wall times "
	       "vary)\n",
	       full ? "published (--full)" : "quick");
	double t0 = wall_now();
	if (g_variants) {
		bench_clove_variants();
		fprintf(stderr, "bench_ar: %.1f s wall\n", wall_now() - t0);
		return 0;
	}
	if (!only || !strcmp(only, "doca"))
		bench_doca(full);
	if (!only || !strcmp(only, "doca_testbed"))
		bench_doca_testbed(full);
	if (!only || !strcmp(only, "clove_asym"))
		bench_clove(full, true);
	if (!only || !strcmp(only, "clove_sym"))
		bench_clove(full, false);
	if (!only || !strcmp(only, "allreduce"))
		bench_allreduce(full);
	fprintf(stderr, "bench_ar: %.1f s wall\n", wall_now() - t0);
	return 0;
}
