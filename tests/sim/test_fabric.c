/*
 * test_fabric.c: the fabric simulator checked against theory and against
 * what ECMP must do. Each test builds a small fabric, runs it in virtual time
 * and compares with a formula: M/D/1 waiting time, line rate for one flow,
 * Jain fairness for DCTCP, the ideal FCT, ECMP spreading and collision
 * probability, polarisation, failure rerouting, ring all-reduce bandwidth,
 * and byte-identical output for a seed. The numbers are in
 * docs/simulator-validation.md.
 */
#include "harness.h"
#include "iod/sim.h"

#include <math.h>
#include <stdlib.h>

static struct iod_sim *mk(const char *topo, enum iod_sim_transport tr, uint64_t seed)
{
	struct iod_sim_topo t;
	struct iod_sim_config c;
	struct iod_sim *s = NULL;
	struct iod_err e = {0};
	if (iod_sim_topo_builtin(&t, topo, &e)) {
		fprintf(stderr, "topology %s: %s\n", topo, e.msg);
		return NULL;
	}
	iod_sim_config_default(&c);
	c.seed = seed;
	c.transport = tr;
	c.packets_max = 1u << 16;
	c.flows_max = 1u << 14;
	if (iod_sim_create(&s, &t, &c, &e))
		fprintf(stderr, "create: %s\n", e.msg);
	iod_sim_topo_free(&t);
	return s;
}

/* The port from node a to node b (first one). */
static uint32_t port_between(const struct iod_sim *s, const char *a, const char *b)
{
	for (uint32_t p = 0; p < iod_sim_port_count(s); p++) {
		struct iod_sim_port_stats st;
		iod_sim_port_stats(s, p, &st);
		if (!strcmp(iod_sim_node_name(s, st.node), a) &&
		    !strcmp(iod_sim_node_name(s, st.peer), b))
			return p;
	}
	return UINT32_MAX;
}

TEST(md1_mean_wait_matches_theory)
{
	/* Poisson packets of 1250 B into a 10 Gbps queue: D = 1 us. */
	struct iod_sim *s =
	    mk("dumbbell:hosts=2,host_rate=10Gbps,bottleneck=40Gbps", IOD_SIM_DCTCP, 1);
	struct iod_err e = {0};
	CHECK(s);
	double rho = 0.7, d_ns = 1000;
	CHECK_EQ(iod_sim_raw_add(s, 0, 1, 1250, rho / d_ns * 1e9, 0, 200 * IOD_NS_PER_MS, &e), 0);
	CHECK_EQ(iod_sim_run(s, UINT64_MAX, &e), 0);
	struct iod_sim_port_stats st;
	iod_sim_port_stats(s, port_between(s, "h0", "left"), &st);
	double w = (double)st.wait_ns_sum / (double)st.tx_pkts;
	double theory = rho * d_ns / (2 * (1 - rho)); /* Pollaczek-Khinchine, M/D/1 */
	fprintf(stderr,
	        "  M/D/1 rho=%.2f: %" PRIu64 " packets, mean wait %.1f ns, theory %.1f ns "
	        "(%.2f%%)\n",
	        rho, st.tx_pkts, w, theory, 100 * (w - theory) / theory);
	CHECK(st.tx_pkts > 130000);
	CHECK_MSG(fabs(w - theory) / theory < 0.03, "wait %.1f vs %.1f", w, theory);
	iod_sim_destroy(s);
}

TEST(raw_burst_source_sends_only_in_its_on_periods)
{
	/* 10 Gbps of 1250 B packets (1 us apart) on for 40 us of every 100 us,
	 * for 1 ms: 10 bursts of 40 packets; the queue sees them back to back. */
	struct iod_sim *s =
	    mk("dumbbell:hosts=2,host_rate=10Gbps,bottleneck=40Gbps", IOD_SIM_DCTCP, 1);
	struct iod_err e = {0};
	CHECK(s);
	CHECK_EQ(iod_sim_raw_add(s, 0, 1, 1250, 1e6, 0, IOD_NS_PER_MS, &e), 0);
	CHECK_EQ(iod_sim_raw_burst(s, 1, 40000, 100000, &e), -EINVAL);  /* no such source */
	CHECK_EQ(iod_sim_raw_burst(s, 0, 200000, 100000, &e), -EINVAL); /* on > period */
	CHECK_EQ(iod_sim_raw_burst(s, 0, 40000, 100000, &e), 0);
	CHECK_EQ(iod_sim_run(s, 50 * IOD_NS_PER_US, &e), 0);
	struct iod_sim_port_stats st;
	uint32_t port = port_between(s, "h0", "left");
	iod_sim_port_stats(s, port, &st);
	CHECK_EQ(st.tx_pkts, 40u); /* the first burst, and nothing in its off time */
	CHECK_EQ(iod_sim_run(s, UINT64_MAX, &e), 0);
	iod_sim_port_stats(s, port, &st);
	CHECK_EQ(st.tx_pkts, 400u);
	iod_sim_destroy(s);
}

static void one_long_flow(enum iod_sim_transport tr, int *failed)
{
	/* 40 Gbps hosts, a 10 Gbps bottleneck between the two switches. */
	struct iod_sim *s = mk("dumbbell:hosts=2,host_rate=40Gbps,bottleneck=10Gbps", tr, 1);
	struct iod_err e = {0};
	uint32_t id;
	if (!s || iod_sim_flow_add(s, 0, 1, 40000000, 0, 0, &id, &e) ||
	    iod_sim_run(s, UINT64_MAX, &e)) {
		*failed = 1;
		return;
	}
	const struct iod_sim_flow_rec *f = iod_sim_flow(s, id);
	struct iod_sim_port_stats st;
	iod_sim_port_stats(s, port_between(s, "left", "right"), &st);
	double util = (double)st.tx_bytes * 8 / ((double)f->fct_ns / 1e9) / 10e9;
	double good = (double)f->size_bytes * 8 / ((double)f->fct_ns / 1e9) / 1e9;
	fprintf(stderr,
	        "  one flow, %s: bottleneck utilisation %.2f%%, goodput %.3f Gbps, "
	        "FCT %.3f ms (ideal %.3f ms), %" PRIu64 " marks, %" PRIu64 " drops\n",
	        tr == IOD_SIM_DCTCP ? "dctcp" : "newreno", 100 * util, good, f->fct_ns / 1e6,
	        f->ideal_ns / 1e6, st.ecn_marks, st.drops);
	if (!f->done || util < 0.95) {
		*failed = 1;
		iod_test_fail(__FILE__, __LINE__, "utilisation %.3f", util);
	}
	iod_sim_destroy(s);
}

TEST(one_long_flow_reaches_line_rate)
{
	int failed = 0;
	one_long_flow(IOD_SIM_DCTCP, &failed);
	one_long_flow(IOD_SIM_NEWRENO, &failed);
	CHECK(!failed);
}

TEST(dctcp_flows_share_fairly)
{
	/* 4 senders on the left, 4 receivers on the right, one 10 Gbps link. */
	struct iod_sim *s =
	    mk("dumbbell:hosts=8,host_rate=10Gbps,bottleneck=10Gbps", IOD_SIM_DCTCP, 1);
	struct iod_err e = {0};
	uint64_t before[4];
	CHECK(s);
	for (uint32_t i = 0; i < 4; i++)
		CHECK_EQ(
		    iod_sim_flow_add(s, i, 4 + i, 1000000000, i * 100 * IOD_NS_PER_US, 0, NULL, &e),
		    0);
	CHECK_EQ(iod_sim_run(s, 5 * IOD_NS_PER_MS, &e), 0);
	for (uint32_t i = 0; i < 4; i++)
		before[i] = iod_sim_flow(s, i)->acked_bytes;
	CHECK_EQ(iod_sim_run(s, 25 * IOD_NS_PER_MS, &e), 0);
	double sum = 0, sq = 0;
	for (uint32_t i = 0; i < 4; i++) {
		double x = (double)(iod_sim_flow(s, i)->acked_bytes - before[i]);
		sum += x;
		sq += x * x;
		fprintf(stderr, "  flow %u: %.3f Gbps\n", i, x * 8 / 20e-3 / 1e9);
	}
	double jain = sum * sum / (4 * sq);
	fprintf(stderr, "  Jain's index %.4f, total %.3f Gbps\n", jain, sum * 8 / 20e-3 / 1e9);
	CHECK_MSG(jain >= 0.95, "Jain %.4f", jain);
	CHECK(sum * 8 / 20e-3 > 0.9 * 10e9 * 1400 / 1504);
	iod_sim_destroy(s);
}

TEST(ideal_fct_matches_empty_network)
{
	static const uint64_t sizes[] = {1, 1400, 1401, 20000, 100000, 1000000, 10000000};
	struct iod_sim *s = mk("leaf-spine", IOD_SIM_DCTCP, 1);
	struct iod_err e = {0};
	CHECK(s);
	/* one flow at a time: same leaf (h0->h1) and across spines (h0->h20) */
	uint64_t t = 0;
	for (size_t i = 0; i < IOD_ARRAY_LEN(sizes); i++)
		for (uint32_t dst = 1; dst <= 20; dst += 19) {
			uint32_t id;
			CHECK_EQ(iod_sim_flow_add(s, 0, dst, sizes[i], t, 0, &id, &e), 0);
			t += 20 * IOD_NS_PER_MS;
			CHECK_EQ(iod_sim_run(s, t, &e), 0);
			const struct iod_sim_flow_rec *f = iod_sim_flow(s, id);
			CHECK(f->done);
			fprintf(stderr,
			        "  %8" PRIu64 " B to h%u: FCT %" PRIu64 " ns, ideal %" PRIu64
			        " ns\n",
			        sizes[i], dst, f->fct_ns, f->ideal_ns);
			CHECK_U64(f->fct_ns, f->ideal_ns);
		}
	/* and the formula by hand for one packet across the spine: 4 hops of
	 * 1 us; 1504 B at 10,40,40,10 Gbps; the 104 B ACK back */
	uint64_t d = 1204 + 301 + 301 + 1204 + 4000 + 84 + 21 + 21 + 84 + 4000;
	CHECK_U64(iod_sim_ideal_fct(s, 0, 20, 1400), d);
	iod_sim_destroy(s);
}

TEST(ecmp_spreads_small_flows_evenly)
{
	struct iod_sim *s = mk("leaf-spine:spines=4", IOD_SIM_DCTCP, 3);
	struct iod_err e = {0};
	struct iod_rng r;
	CHECK(s);
	iod_rng_seed(&r, 9);
	for (uint32_t i = 0; i < 4000; i++) {
		uint32_t src = (uint32_t)iod_rng_below(&r, 16),
		         dst = 16 + (uint32_t)iod_rng_below(&r, 16);
		CHECK_EQ(iod_sim_flow_add(s, src, dst, 10000, i * 500, 0, NULL, &e), 0);
	}
	CHECK_EQ(iod_sim_run(s, UINT64_MAX, &e), 0);
	CHECK_EQ(iod_sim_flows_done(s), 4000);
	double b[4], sum = 0;
	for (int k = 0; k < 4; k++) {
		char sp[16];
		struct iod_sim_port_stats st;
		snprintf(sp, sizeof(sp), "spine%d", k);
		iod_sim_port_stats(s, port_between(s, "leaf0", sp), &st);
		b[k] = (double)st.tx_bytes;
		sum += b[k];
	}
	for (int k = 0; k < 4; k++) {
		fprintf(stderr, "  leaf0->spine%d: %.1f%% of bytes\n", k, 100 * b[k] / sum);
		CHECK_MSG(fabs(b[k] / sum - 0.25) < 0.025, "spine%d has %.3f", k, b[k] / sum);
	}
	iod_sim_destroy(s);
}

TEST(ecmp_elephants_collide_with_expected_probability)
{
	/* Two elephants from leaf0 to leaf1 over 4 spines: they share a
	 * leaf0 uplink with probability 1/4. 400 independent trials. */
	int trials = 400, collide = 0;
	for (int t = 0; t < trials; t++) {
		struct iod_sim *s = mk("leaf-spine:spines=4", IOD_SIM_DCTCP, (uint64_t)t + 1);
		struct iod_err e = {0};
		CHECK(s);
		CHECK_EQ(iod_sim_flow_add(s, 0, 16, 100000000, 0, 0, NULL, &e), 0);
		CHECK_EQ(iod_sim_flow_add(s, 1, 17, 100000000, 0, 0, NULL, &e), 0);
		CHECK_EQ(iod_sim_run(s, 50 * IOD_NS_PER_US, &e), 0);
		int used = 0;
		for (int k = 0; k < 4; k++) {
			char sp[16];
			struct iod_sim_port_stats st;
			snprintf(sp, sizeof(sp), "spine%d", k);
			iod_sim_port_stats(s, port_between(s, "leaf0", sp), &st);
			used += st.tx_pkts > 0;
		}
		CHECK(used == 1 || used == 2);
		collide += used == 1;
		iod_sim_destroy(s);
	}
	double p = (double)collide / trials;
	/* binomial(400, 0.25): sd = 0.0217; allow 3 sd */
	fprintf(stderr, "  collisions in %d of %d trials: %.3f (expected 0.250)\n", collide, trials,
	        p);
	CHECK_MSG(fabs(p - 0.25) < 0.065, "p = %.3f", p);
}

static unsigned cores_used(const char *topo)
{
	struct iod_sim *s = mk(topo, IOD_SIM_DCTCP, 1);
	unsigned used = 0;
	bool seen[4] = {0};
	if (!s)
		return 0;
	/* many flows from h0 (pod 0) to hosts in pods 1-3 */
	for (uint32_t sp = 0; sp < 4000; sp++) {
		uint32_t nodes[IOD_SIM_PATH_MAX];
		uint32_t dst = 4 + sp % 12;
		uint32_t n = iod_sim_path(s, 0, dst, iod_sim_edge_sport(iod_hash_u64(sp)), nodes,
		                          IOD_SIM_PATH_MAX);
		for (uint32_t i = 0; i < n; i++) {
			const char *name = iod_sim_node_name(s, nodes[i]);
			if (!strncmp(name, "core", 4))
				seen[name[4] - '0'] = true;
		}
	}
	for (int i = 0; i < 4; i++)
		used += seen[i];
	iod_sim_destroy(s);
	return used;
}

TEST(ecmp_hash_polarisation_appears_with_same_seed)
{
	unsigned same = cores_used("fat-tree:k=4,seed=same");
	unsigned per = cores_used("fat-tree:k=4,seed=per-switch");
	fprintf(stderr,
	        "  cores used from one edge switch: same seed %u of 4, per-switch %u of 4\n", same,
	        per);
	CHECK_EQ(same, 2);
	CHECK_EQ(per, 4);
}

TEST(link_failure_reroutes_and_degradation_slows)
{
	struct iod_sim_topo t;
	struct iod_sim_config c;
	struct iod_sim *s;
	struct iod_err e = {0};
	uint32_t id;

	/* one spine: fail its link to leaf1 at 1 ms, bring it back at 3 ms
	 * at a quarter of its rate */
	CHECK_EQ(iod_sim_topo_builtin(&t, "leaf-spine:spines=2,hosts=4", &e), 0);
	uint32_t l = UINT32_MAX;
	for (uint32_t i = 0; i < t.n_links; i++)
		if (!strcmp(t.nodes[t.links[i].a].name, "leaf1") &&
		    !strcmp(t.nodes[t.links[i].b].name, "spine0"))
			l = i;
	CHECK(l != UINT32_MAX);
	CHECK_EQ(iod_sim_topo_add_event(&t, 1 * IOD_NS_PER_MS, l, 0, &e), 0);
	CHECK_EQ(iod_sim_topo_add_event(&t, 3 * IOD_NS_PER_MS, l, 10000000000ull, &e), 0);
	iod_sim_config_default(&c);
	c.packets_max = 1 << 16;
	c.flows_max = 256;
	CHECK_EQ(iod_sim_create(&s, &t, &c, &e), 0);
	iod_sim_topo_free(&t);
	/* flows from h0 to h2 over both spines */
	for (uint32_t i = 0; i < 16; i++)
		CHECK_EQ(iod_sim_flow_add(s, i % 2, 2 + i % 2, 2000000, 0, 0, &id, &e), 0);
	CHECK_EQ(iod_sim_run(s, 2 * IOD_NS_PER_MS, &e), 0);
	struct iod_sim_port_stats down;
	iod_sim_port_stats(s, port_between(s, "spine0", "leaf1"), &down);
	CHECK_U64(down.rate_bps, 0);
	uint64_t tx_at_2ms = down.tx_pkts;
	CHECK_EQ(iod_sim_run(s, 2900 * IOD_NS_PER_US, &e), 0);
	iod_sim_port_stats(s, port_between(s, "spine0", "leaf1"), &down);
	CHECK_U64(down.tx_pkts, tx_at_2ms); /* nothing crosses a failed link */
	CHECK_EQ(iod_sim_run(s, UINT64_MAX, &e), 0);
	CHECK_EQ(iod_sim_flows_done(s), 16); /* rerouted, all finish */
	iod_sim_port_stats(s, port_between(s, "spine0", "leaf1"), &down);
	CHECK_U64(down.rate_bps, 10000000000ull);
	iod_sim_destroy(s);
}

TEST(ring_allreduce_busbw)
{
	struct iod_sim *s = mk("leaf-spine:leaves=1,spines=1,hosts=4", IOD_SIM_DCTCP, 1);
	struct iod_sim_allreduce a;
	struct iod_err e = {0};
	CHECK(s);
	CHECK_EQ(iod_sim_allreduce_start(s, &a, 4, 8000000, 0, &e), 0);
	CHECK_EQ(iod_sim_run(s, UINT64_MAX, &e), 0);
	CHECK_EQ(a.ranks_done, 4);
	CHECK_EQ(iod_sim_flow_count(s), 4 * 2 * 3);
	double alg = iod_sim_allreduce_algbw_bps(&a), bus = iod_sim_allreduce_busbw_bps(&a);
	fprintf(stderr, "  ring all-reduce 4 x 8 MB: algbw %.2f Gbps, busbw %.2f Gbps\n", alg / 1e9,
	        bus / 1e9);
	CHECK(fabs(bus - alg * 2 * 3 / 4) < 1);
	/* each link carries 2(n-1)/n x S: busbw can approach the payload rate */
	CHECK(bus < 10e9 * 1400 / 1504);
	CHECK(bus > 0.85 * 10e9 * 1400 / 1504);
	iod_sim_allreduce_free(&a);
	iod_sim_destroy(s);
}

static char *run_csv(uint64_t seed, size_t *len)
{
	struct iod_sim *s = mk("leaf-spine", IOD_SIM_DCTCP, seed);
	struct iod_sim_cdf c;
	struct iod_rng r;
	struct iod_err e = {0};
	char *buf = NULL;
	if (!s || iod_sim_cdf_load(&c, "web-search", &e))
		return NULL;
	iod_rng_seed(&r, seed);
	if (iod_sim_workload_poisson(s, &c, 0.6, 3 * IOD_NS_PER_MS, &r, &e) < 0 ||
	    iod_sim_run(s, 20 * IOD_NS_PER_MS, &e)) {
		iod_sim_destroy(s);
		return NULL;
	}
	FILE *f = open_memstream(&buf, len);
	iod_sim_write_flows_csv(s, f);
	for (uint32_t p = 0; p < iod_sim_port_count(s); p++) {
		struct iod_sim_port_stats st;
		iod_sim_port_stats(s, p, &st);
		fprintf(f, "%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", p, st.tx_bytes, st.ecn_marks,
		        st.wait_ns_sum);
	}
	fprintf(f, "events %" PRIu64 "\n", iod_sim_events(s));
	fclose(f);
	iod_sim_destroy(s);
	return buf;
}

TEST(same_seed_same_bytes_different_seed_differs)
{
	size_t la, lb, lc;
	char *a = run_csv(1, &la), *b = run_csv(1, &lb), *c = run_csv(2, &lc);
	CHECK(a && b && c);
	CHECK(la > 1000);
	CHECK(la == lb && !memcmp(a, b, la));
	CHECK(la != lc || memcmp(a, c, la));
	free(a);
	free(b);
	free(c);
}

/* A test policy: every packet on one source port; counts what it hears. */
struct pin_state {
	uint16_t sport;              /* the port it always picks */
	uint64_t acks, ecn, replies; /* feedback seen */
	uint64_t rtt_min_ns;         /* smallest probe RTT */
	uint32_t probe_calls;        /* probe() invocations */
};

static uint16_t pin_choose(void *st, const struct iod_sim_path_query *q)
{
	(void)q;
	return ((struct pin_state *)st)->sport;
}

static void pin_feedback(void *st, const struct iod_sim_path_feedback *fb)
{
	struct pin_state *p = st;
	if (fb->kind == IOD_SIM_FB_ACK) {
		p->acks++;
		p->ecn += fb->ecn;
	} else {
		p->replies++;
		if (!p->rtt_min_ns || fb->rtt_ns < p->rtt_min_ns)
			p->rtt_min_ns = fb->rtt_ns;
	}
}

static uint32_t pin_probe(void *st, uint32_t src, uint64_t now_ns, struct iod_sim_probe *out,
                          uint32_t max)
{
	struct pin_state *p = st;
	(void)now_ns;
	p->probe_calls++;
	if (src != 0 || max < 2)
		return 0;
	out[0] = (struct iod_sim_probe){16, 50000};
	out[1] = (struct iod_sim_probe){16, 60000};
	return 2;
}

TEST(path_policy_controls_ports_and_hears_feedback)
{
	struct iod_sim_topo t;
	struct iod_sim_config c;
	struct iod_sim *s;
	struct iod_err e = {0};
	struct pin_state st = {.sport = 51234};
	struct iod_sim_path_policy pol = {
	    "pin", &st, pin_choose, pin_feedback, pin_probe, 100 * IOD_NS_PER_US, NULL};

	CHECK_EQ(iod_sim_topo_builtin(&t, "leaf-spine:spines=4", &e), 0);
	iod_sim_config_default(&c);
	c.packets_max = 1 << 16;
	c.flows_max = 1024;
	c.policy = &pol;
	CHECK_EQ(iod_sim_create(&s, &t, &c, &e), 0);
	iod_sim_topo_free(&t);
	/* an 8-to-1 incast across the spines */
	for (uint32_t i = 0; i < 8; i++)
		CHECK_EQ(iod_sim_flow_add(s, i, 16, 2000000, 0, 0, NULL, &e), 0);
	CHECK_EQ(iod_sim_run(s, UINT64_MAX, &e), 0);
	CHECK_EQ(iod_sim_flows_done(s), 8);
	/* the policy's port decides the path: leaf0 used exactly the spines
	 * that hashing (src, dst, 51234) predicts */
	bool predicted[4] = {0};
	for (uint32_t i = 0; i < 8; i++) {
		uint32_t nodes[IOD_SIM_PATH_MAX];
		uint32_t n = iod_sim_path(s, i, 16, 51234, nodes, IOD_SIM_PATH_MAX);
		CHECK_EQ(n, 5);
		predicted[iod_sim_node_name(s, nodes[2])[5] - '0'] = true;
	}
	/* and the probes, h0 -> h16 on ports 50000 and 60000 */
	for (uint32_t sp = 50000; sp <= 60000; sp += 10000) {
		uint32_t nodes[IOD_SIM_PATH_MAX];
		CHECK_EQ(iod_sim_path(s, 0, 16, (uint16_t)sp, nodes, IOD_SIM_PATH_MAX), 5);
		predicted[iod_sim_node_name(s, nodes[2])[5] - '0'] = true;
	}
	for (int k = 0; k < 4; k++) {
		char sp[16];
		struct iod_sim_port_stats ps;
		snprintf(sp, sizeof(sp), "spine%d", k);
		iod_sim_port_stats(s, port_between(s, "leaf0", sp), &ps);
		CHECK_EQ(ps.tx_pkts > 0, predicted[k]);
	}
	/* 8 x 10 Gbps into one 10 Gbps host link: ECN marks were echoed */
	CHECK(st.acks >= 8 * 1429);
	CHECK(st.ecn > 0);
	/* probes went out and came back with an RTT above the base RTT */
	CHECK(st.probe_calls > 0);
	CHECK(st.replies > 0);
	CHECK(st.rtt_min_ns >= 8000);
	fprintf(stderr,
	        "  policy: %" PRIu64 " ACKs, %" PRIu64 " ECN echoes, %" PRIu64
	        " probe replies, min probe RTT %" PRIu64 " ns\n",
	        st.acks, st.ecn, st.replies, st.rtt_min_ns);
	iod_sim_destroy(s);
}
