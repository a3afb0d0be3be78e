/*
 * test_ar_sim.c: net/ar driven by the fabric simulator through
 * src/sim/ar_policy.c. Small fabrics, virtual time: the probes the cores ask
 * for cross the fabric and come back with the path's identity, minrtt pins
 * flows from the replies, clove-ecn discovers distinct paths and keeps
 * working around a failed link, ECN relayed by the receivers reaches the
 * senders' cores, and one scenario replays byte-identically for its seed.
 */
#include "harness.h"
#include "iod/ar.h"
#include "iod/sim.h"

#include <inttypes.h>
#include <stdlib.h>

struct world {
	struct iod_sim *s;
	struct iod_sim_ar *ar;
	struct iod_sim_path_policy pol;
};

static int world_open(struct world *w, const char *topo, enum iod_ar_policy p, uint64_t seed,
                      uint64_t fail_at_ns, uint32_t fail_link)
{
	struct iod_sim_topo t;
	struct iod_sim_config c;
	struct iod_ar_config ac;
	struct iod_err e = {0};

	iod_sim_topo_init(&t);
	if (iod_sim_topo_builtin(&t, topo, &e))
		return -1;
	if (fail_at_ns && iod_sim_topo_add_event(&t, fail_at_ns, fail_link, 0, &e))
		return -1;
	iod_ar_config_default(&ac, p);
	ac.sport_min = IOD_SIM_VXLAN_SPORT_MIN;
	ac.sport_max = IOD_SIM_VXLAN_SPORT_MAX;
	ac.flows_max = 1024;
	ac.dests_max = 16;
	ac.probe_interval_ns = 200 * IOD_NS_PER_US;
	ac.seed = seed;
	if (iod_sim_ar_create(&ac, iod_sim_topo_host_count(&t), 0, 0, &w->ar, &w->pol, &e))
		return -1;
	iod_sim_config_default(&c);
	c.seed = seed;
	c.packets_max = 1u << 16;
	c.flows_max = 1u << 12;
	c.policy = &w->pol;
	int rc = iod_sim_create(&w->s, &t, &c, &e);
	iod_sim_topo_free(&t);
	if (rc)
		fprintf(stderr, "create: %s\n", e.msg);
	return rc;
}

static void world_close(struct world *w)
{
	iod_sim_destroy(w->s);
	iod_sim_ar_destroy(w->ar);
}

/* 8 hosts, 4 on each leaf; 4 spines: 4 equal paths between the leaves. */
#define FABRIC4 "leaf-spine:leaves=2,spines=4,hosts=8,host_rate=10Gbps,fabric_rate=10Gbps"

TEST(minrtt_probes_cross_the_fabric_and_pin_flows)
{
	struct world w;
	struct iod_err e = {0};
	CHECK_EQ(world_open(&w, FABRIC4, IOD_AR_MINRTT, 1, 0, 0), 0);
	for (uint32_t i = 0; i < 8; i++)
		CHECK_EQ(iod_sim_flow_add(w.s, i % 4, 4 + i % 4, 200000, 0, i, NULL, &e), 0);
	CHECK_EQ(iod_sim_run(w.s, 50 * IOD_NS_PER_MS, &e), 0);
	CHECK_EQ(iod_sim_flows_done(w.s), 8);
	struct iod_ar_stats st;
	iod_sim_ar_stats(w.ar, &st);
	CHECK_U64(st.flows_new, 8);
	CHECK_U64(st.flows_pinned, 8); /* every flow got a reply in time */
	CHECK(st.probes_sent >= 8 * 4);
	CHECK(st.probe_replies >= 8);
	CHECK_U64(iod_sim_ar_probes_dropped(w.ar), 0);
	world_close(&w);
}

TEST(clove_discovers_distinct_paths_from_fabric_replies)
{
	struct world w;
	struct iod_err e = {0};
	CHECK_EQ(world_open(&w, FABRIC4, IOD_AR_CLOVE_ECN, 1, 0, 0), 0);
	/* a flow triggers discovery; its later flowlets use the paths */
	CHECK_EQ(iod_sim_flow_add(w.s, 0, 4, 2000000, 0, 0, NULL, &e), 0);
	CHECK_EQ(iod_sim_run(w.s, 5 * IOD_NS_PER_MS, &e), 0);
	struct iod_ar_stats st;
	iod_sim_ar_stats(w.ar, &st);
	CHECK(st.probe_replies >= 16);
	CHECK_EQ(iod_sim_flows_done(w.s), 1);
	/* k = 4 paths, told apart by the fabric's path identity: with 4
	 * spines they are 4 different paths */
	struct iod_ar_path_info pi[16];
	uint32_t n = iod_ar_paths(iod_sim_ar_edge(w.ar, 0), 4, pi, 16, iod_sim_now(w.s));
	CHECK_EQ(n, 4);
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = i + 1; j < n; j++)
			CHECK(pi[i].path_id && pi[i].path_id != pi[j].path_id);
	world_close(&w);
}

/* Link index of leaf l - spine s in the builtin leaf-spine (hosts first). */
static uint32_t ls_link(uint32_t hosts, uint32_t spines, uint32_t l, uint32_t s)
{
	return hosts + l * spines + s;
}

TEST(clove_survives_a_failed_spine_link)
{
	struct world w;
	struct iod_err e = {0};
	/* spine 1 - leaf 1 fails at 2 ms, while flows run */
	CHECK_EQ(
	    world_open(&w, FABRIC4, IOD_AR_CLOVE_ECN, 3, 2 * IOD_NS_PER_MS, ls_link(8, 4, 1, 1)),
	    0);
	for (uint32_t i = 0; i < 16; i++)
		CHECK_EQ(iod_sim_flow_add(w.s, i % 4, 4 + (i / 4) % 4, 1000000,
		                          (uint64_t)i * 200 * IOD_NS_PER_US, i, NULL, &e),
		         0);
	CHECK_EQ(iod_sim_run(w.s, 500 * IOD_NS_PER_MS, &e), 0);
	CHECK_EQ(iod_sim_flows_done(w.s), 16);
	struct iod_ar_stats st;
	iod_sim_ar_stats(w.ar, &st);
	/* the fabric reroutes around the link; clove's paths stay alive
	 * because probes on every port still return, on the new route */
	CHECK(st.probe_replies > 0);
	world_close(&w);
}

TEST(receivers_relay_ecn_to_senders_under_incast_load)
{
	struct world w;
	struct iod_err e = {0};
	CHECK_EQ(world_open(&w, FABRIC4, IOD_AR_CLOVE_ECN, 1, 0, 0), 0);
	/* a small flow per sender discovers the paths; then 4 senders on
	 * leaf0 to one receiver on leaf1: its port congests */
	for (uint32_t i = 0; i < 4; i++)
		CHECK_EQ(iod_sim_flow_add(w.s, i, 4, 1000, 0, i, NULL, &e), 0);
	for (uint32_t i = 0; i < 4; i++)
		CHECK_EQ(iod_sim_flow_add(w.s, i, 4, 3000000, IOD_NS_PER_MS, i, NULL, &e), 0);
	CHECK_EQ(iod_sim_run(w.s, 200 * IOD_NS_PER_MS, &e), 0);
	CHECK_EQ(iod_sim_flows_done(w.s), 8);
	struct iod_ar_stats st;
	iod_sim_ar_stats(w.ar, &st);
	CHECK(st.ecn_events > 0);
	/* each sender heard CE on the port its flow used and cut that path's
	 * weight (Clove cannot tell that the receiver's link, common to all
	 * paths, is the bottleneck: each sender sees one congested path) */
	unsigned cut = 0;
	for (uint32_t h = 0; h < 4; h++) {
		struct iod_ar_path_info pi[16];
		uint32_t n = iod_ar_paths(iod_sim_ar_edge(w.ar, h), 4, pi, 16, iod_sim_now(w.s));
		CHECK_MSG(n >= 2, "host %u: %u paths, replies %llu failed %llu late %llu", h, n,
		          (unsigned long long)iod_ar_stats(iod_sim_ar_edge(w.ar, h))->probe_replies,
		          (unsigned long long)iod_ar_stats(iod_sim_ar_edge(w.ar, h))->paths_failed,
		          (unsigned long long)iod_ar_stats(iod_sim_ar_edge(w.ar, h))->probe_late);
		for (uint32_t i = 0; i < n; i++)
			cut += pi[i].weight < IOD_AR_WEIGHT_TOTAL / n - 1;
	}
	CHECK(cut > 0);
	world_close(&w);
}

/* The scenario whose output must replay: per-flow records and core counters. */
static char *scenario(enum iod_ar_policy p, uint64_t seed, size_t *len)
{
	struct world w;
	struct iod_err e = {0};
	struct iod_sim_cdf cdf;
	struct iod_rng r;
	char *buf = NULL;

	if (world_open(&w, "leaf-spine:leaves=2,spines=2,hosts=8,links=2", p, seed, 0, 0) ||
	    iod_sim_cdf_load(&cdf, "web-search", &e))
		return NULL;
	iod_rng_seed(&r, seed);
	if (iod_sim_workload_poisson(w.s, &cdf, 0.5, 2 * IOD_NS_PER_MS, &r, &e) < 0 ||
	    iod_sim_run(w.s, 20 * IOD_NS_PER_MS, &e)) {
		world_close(&w);
		return NULL;
	}
	FILE *f = open_memstream(&buf, len);
	iod_sim_write_flows_csv(w.s, f);
	struct iod_ar_stats st;
	iod_sim_ar_stats(w.ar, &st);
	fprintf(f,
	        "new %" PRIu64 " flowlets %" PRIu64 " probes %" PRIu64 " replies %" PRIu64
	        " ecn %" PRIu64 " events %" PRIu64 "\n",
	        st.flows_new, st.flowlets, st.probes_sent, st.probe_replies, st.ecn_events,
	        iod_sim_events(w.s));
	fclose(f);
	world_close(&w);
	return buf;
}

TEST(same_seed_replays_byte_identically)
{
	static const enum iod_ar_policy pols[] = {IOD_AR_MINRTT, IOD_AR_FLOWLET, IOD_AR_CLOVE_ECN,
	                                          IOD_AR_PROBE_UTIL};
	for (unsigned i = 0; i < sizeof(pols) / sizeof(pols[0]); i++) {
		size_t la = 0, lb = 0, lc = 0;
		char *a = scenario(pols[i], 7, &la), *b = scenario(pols[i], 7, &lb),
		     *c = scenario(pols[i], 8, &lc);
		CHECK(a && b && c);
		if (a && b && c) {
			CHECK_MSG(la == lb && !memcmp(a, b, la), "policy %s differs between runs",
			          iod_ar_policy_name(pols[i]));
			CHECK_MSG(la != lc || memcmp(a, c, la), "policy %s ignores the seed",
			          iod_ar_policy_name(pols[i]));
			CHECK(la > 100);
		}
		free(a);
		free(b);
		free(c);
	}
}
