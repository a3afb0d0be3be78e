/*
 * test_sim.c: unit tests of the fabric simulator's parts: the event queue,
 * the topology builders and YAML loader (with their errors), flow-size CDFs,
 * the VXLAN edge and explicit exhaustion errors.
 */
#include "harness.h"
#include "iod/sim.h"

#include <math.h>
#include <stdlib.h>

static void queue_order(enum iod_sim_queue_kind kind, int *failed)
{
	struct iod_sim_queue q;
	struct iod_sim_event ev;
	struct iod_rng r;
	uint32_t id = 0, n = 0;
	uint64_t last_t = 0, last_seq = 0, sum_pushed = 0, sum_popped = 0;

	if (iod_sim_queue_init_kind(&q, 5000, kind)) {
		*failed = 1;
		return;
	}
	iod_rng_seed(&r, 7);
	/* interleave pushes (never before the last pop) and pops */
	for (int round = 0; round < 200; round++) {
		for (int k = 0; k < 20; k++) {
			uint64_t t = last_t + iod_rng_below(&r, round % 3 ? 50 : 1u << 20);
			if (iod_sim_queue_push(&q, t, 0, id, t)) {
				*failed = 1;
				return;
			}
			sum_pushed += id++;
		}
		for (int k = 0; k < 15 && iod_sim_queue_pop(&q, &ev); k++) {
			/* (time, push order) never goes backwards */
			if (ev.t_ns < last_t || (n && ev.t_ns == last_t && ev.seq < last_seq) ||
			    ev.data != ev.t_ns)
				*failed = 1;
			last_t = ev.t_ns;
			last_seq = ev.seq;
			sum_popped += ev.arg;
			n++;
		}
	}
	while (iod_sim_queue_pop(&q, &ev)) {
		if (ev.t_ns < last_t || (ev.t_ns == last_t && ev.seq < last_seq))
			*failed = 1;
		last_t = ev.t_ns;
		last_seq = ev.seq;
		sum_popped += ev.arg;
		n++;
	}
	if (n != 4000 || sum_pushed != sum_popped || q.n)
		*failed = 1;
	iod_sim_queue_destroy(&q);
}

TEST(queue_orders_by_time_then_insertion)
{
	int failed = 0;
	queue_order(IOD_SIM_QUEUE_HEAP, &failed);
	CHECK(!failed);
	queue_order(IOD_SIM_QUEUE_RADIX, &failed);
	CHECK(!failed);
	queue_order(IOD_SIM_QUEUE_CALENDAR, &failed);
	CHECK(!failed);
	queue_order(IOD_SIM_QUEUE_AUTO, &failed);
	CHECK(!failed);
}

/*
 * The calendar queue and AUTO (heap below AUTO_UP, calendar above) pop the
 * heap's exact sequence, ties included: one seeded schedule of pushes and
 * pops drives all three. Pending grows to 180 K (AUTO switches to the
 * calendar; the calendar doubles many times and re-samples its width) and
 * falls to zero (the calendar halves; AUTO goes back to the heap).
 * Times mix many equal timestamps, small steps, far timers and pushes into
 * the past (all three kinds take any order).
 */
TEST(queue_calendar_and_auto_pop_as_heap)
{
	enum { K = 3 };
	enum iod_sim_queue_kind kinds[K] = {IOD_SIM_QUEUE_HEAP, IOD_SIM_QUEUE_CALENDAR,
	                                    IOD_SIM_QUEUE_AUTO};
	struct iod_sim_queue q[K];
	struct iod_rng r;
	for (int k = 0; k < K; k++)
		CHECK_EQ(iod_sim_queue_init_kind(&q[k], 200000, kinds[k]), 0);
	iod_rng_seed(&r, 2026);
	uint64_t now = 1000000, pops = 0, mism = 0, ties = 0, last_t = UINT64_MAX;
	bool auto_went_calendar = false, auto_came_back = false;
	for (int phase = 0; phase < 2; phase++) {
		bool grow = !(phase & 1);
		for (int i = 0; i < 450000; i++) {
			bool push = grow ? iod_rng_below(&r, 10) < 7 : iod_rng_below(&r, 10) < 3;
			if (push && q[0].n < 180000) {
				uint64_t t, c = iod_rng_below(&r, 100);
				if (c < 30)
					t = now; /* a tie with everything at now */
				else if (c < 80)
					t = now + iod_rng_below(&r, 4096);
				else if (c < 95)
					t = now + iod_rng_below(&r, 1u << 30); /* far timers */
				else
					t = now - iod_rng_below(&r, now); /* the past */
				uint32_t kind = (uint32_t)iod_rng_below(&r, 7);
				for (int k = 0; k < K; k++)
					CHECK_EQ(
					    iod_sim_queue_push(&q[k], t, kind, (uint32_t)i, t ^ 5),
					    0);
			} else if (q[0].n) {
				struct iod_sim_event e[K];
				uint64_t pk = iod_sim_queue_peek(&q[0]);
				for (int k = 0; k < K; k++) {
					if (iod_sim_queue_peek(&q[k]) != pk)
						mism++;
					CHECK(iod_sim_queue_pop(&q[k], &e[k]));
				}
				for (int k = 1; k < K; k++)
					if (e[k].t_ns != e[0].t_ns || e[k].seq != e[0].seq ||
					    e[k].arg != e[0].arg || e[k].kind != e[0].kind ||
					    e[k].data != e[0].data)
						mism++;
				ties += e[0].t_ns == last_t;
				last_t = e[0].t_ns;
				now = e[0].t_ns;
				pops++;
			}
			if (q[2].kind == IOD_SIM_QUEUE_CALENDAR)
				auto_went_calendar = true;
			else if (auto_went_calendar)
				auto_came_back = true;
		}
		if (!grow)
			while (q[0].n) {
				struct iod_sim_event e[K];
				for (int k = 0; k < K; k++)
					CHECK(iod_sim_queue_pop(&q[k], &e[k]));
				for (int k = 1; k < K; k++)
					if (e[k].seq != e[0].seq || e[k].t_ns != e[0].t_ns)
						mism++;
				now = e[0].t_ns;
				pops++;
			}
	}
	CHECK_U64(mism, 0);
	CHECK(pops > 400000);
	CHECK(ties > 10000);
	CHECK(auto_went_calendar && auto_came_back);
	CHECK(q[1].cal_resizes > 10);
	for (int k = 0; k < K; k++) {
		CHECK_EQ(q[k].n, 0);
		CHECK_U64(iod_sim_queue_peek(&q[k]), UINT64_MAX);
		iod_sim_queue_destroy(&q[k]);
	}
}

TEST(queue_kinds_pop_identically)
{
	struct iod_sim_queue a, b;
	struct iod_sim_event ea, eb;
	struct iod_rng r;
	CHECK_EQ(iod_sim_queue_init_kind(&a, 3000, IOD_SIM_QUEUE_HEAP), 0);
	CHECK_EQ(iod_sim_queue_init_kind(&b, 3000, IOD_SIM_QUEUE_RADIX), 0);
	iod_rng_seed(&r, 11);
	uint64_t now = 0;
	for (int i = 0; i < 20000; i++) {
		if (a.n < 2000 && (iod_rng_below(&r, 3) || !a.n)) {
			uint64_t t = now + iod_rng_below(&r, 8);
			CHECK_EQ(iod_sim_queue_push(&a, t, 0, (uint32_t)i, 0), 0);
			CHECK_EQ(iod_sim_queue_push(&b, t, 0, (uint32_t)i, 0), 0);
		} else {
			CHECK_U64(iod_sim_queue_peek(&a), iod_sim_queue_peek(&b));
			CHECK(iod_sim_queue_pop(&a, &ea) && iod_sim_queue_pop(&b, &eb));
			CHECK_U64(ea.t_ns, eb.t_ns);
			CHECK_EQ(ea.arg, eb.arg);
			now = ea.t_ns;
		}
	}
	/* the radix heap refuses the past */
	CHECK_EQ(iod_sim_queue_push(&b, now ? now - 1 : 0, 0, 0, 0), now ? -EINVAL : 0);
	iod_sim_queue_destroy(&a);
	iod_sim_queue_destroy(&b);
}

TEST(queue_full_is_enospc)
{
	struct iod_sim_queue q;
	for (int k = 0; k < 4; k++) {
		CHECK_EQ(iod_sim_queue_init_kind(&q, 3, (enum iod_sim_queue_kind)k), 0);
		for (int i = 0; i < 3; i++)
			CHECK_EQ(iod_sim_queue_push(&q, 10, 0, 0, 0), 0);
		CHECK_EQ(iod_sim_queue_push(&q, 11, 0, 0, 0), -ENOSPC);
		iod_sim_queue_destroy(&q);
	}
}

TEST(builtin_leaf_spine_shape)
{
	struct iod_sim_topo t;
	struct iod_err e = {0};
	CHECK_EQ(iod_sim_topo_builtin(&t, "leaf-spine:leaves=4,spines=3,hosts=16,links=2", &e), 0);
	CHECK_EQ(iod_sim_topo_host_count(&t), 16);
	CHECK_EQ(t.n_nodes, 16 + 4 + 3);
	CHECK_EQ(t.n_links, 16 + 4 * 3 * 2);
	iod_sim_topo_free(&t);
	CHECK_EQ(iod_sim_topo_builtin(&t, "fat-tree:k=4", &e), 0);
	CHECK_EQ(iod_sim_topo_host_count(&t), 16);
	CHECK_EQ(t.n_nodes, 16 + 8 + 8 + 4);
	CHECK_EQ(t.n_links, 48);
	iod_sim_topo_free(&t);
}

TEST(builtin_errors_say_what)
{
	struct iod_sim_topo t;
	struct iod_err e = {0};
	CHECK(iod_sim_topo_builtin(&t, "leaf-spine:hosts=33", &e) < 0);
	CHECK_CONTAINS(e.msg, "not a multiple of leaves");
	CHECK(iod_sim_topo_builtin(&t, "leaf-spine:colour=red", &e) < 0);
	CHECK_CONTAINS(e.msg, "unknown parameter \"colour\"");
	CHECK(iod_sim_topo_builtin(&t, "torus", &e) < 0);
	CHECK_CONTAINS(e.msg, "unknown topology \"torus\"");
	CHECK(iod_sim_topo_builtin(&t, "fat-tree:k=3", &e) < 0);
	CHECK_CONTAINS(e.msg, "must be even");
}

static const char yaml_ok[] = "name: t\n"
                              "switch: {buffer: 200KB, ecn: 30KB, hash: mix, seed: same}\n"
                              "defaults: {rate: 25Gbps, delay: 2us}\n"
                              "switches: [s0, s1]\n"
                              "hosts:\n"
                              "  - {prefix: a, count: 3, attach: s0}\n"
                              "  - b0\n"
                              "links:\n"
                              "  - {a: s0, b: s1, rate: 100Gbps, count: 2}\n"
                              "  - {a: b0, b: s1}\n"
                              "events:\n"
                              "  - {at: 1ms, a: s0, b: s1, index: 1, down: true}\n"
                              "  - {at: 2ms, a: s1, b: s0, rate: 10Gbps}\n";

TEST(yaml_topology_loads)
{
	struct iod_sim_topo t;
	struct iod_err e = {0};
	uint32_t a2, b0;
	CHECK_MSG(iod_sim_topo_parse_yaml(&t, yaml_ok, sizeof(yaml_ok) - 1, "t.yaml", &e) == 0,
	          "%s", e.msg);
	CHECK_STR(t.name, "t");
	CHECK_EQ(iod_sim_topo_host_count(&t), 4);
	CHECK_EQ(t.n_links, 3 + 2 + 1);
	CHECK_U64(t.buffer_bytes, 200000);
	CHECK_U64(t.ecn_bytes, 30000);
	CHECK_EQ(t.ecn_pkts, 0);
	CHECK_EQ(t.hash, IOD_SIM_HASH_MIX);
	CHECK_EQ(t.seed_mode, IOD_SIM_SEED_SAME);
	CHECK_EQ(iod_sim_topo_find(&t, "a2", &a2), 0);
	CHECK_EQ(iod_sim_topo_find(&t, "b0", &b0), 0);
	CHECK_U64(t.links[0].rate_bps, 25000000000ull);
	CHECK_U64(t.links[0].delay_ns, 2000);
	CHECK_U64(t.links[3].rate_bps, 100000000000ull);
	/* index 1 of the two s0-s1 links down, then both to 10 Gbps */
	CHECK_EQ(t.n_events, 3);
	CHECK_EQ(t.events[0].link, 4);
	CHECK_U64(t.events[0].rate_bps, 0);
	CHECK_U64(t.events[2].rate_bps, 10000000000ull);
	iod_sim_topo_free(&t);
}

static void yaml_err(const char *text, const char *want, int *failed)
{
	struct iod_sim_topo t;
	struct iod_err e = {0};
	if (iod_sim_topo_parse_yaml(&t, text, strlen(text), "f.yaml", &e) == 0) {
		iod_sim_topo_free(&t);
		*failed = 1;
		iod_test_fail(__FILE__, __LINE__, "accepted: %s", text);
		return;
	}
	if (!strstr(e.msg, want)) {
		*failed = 1;
		iod_test_fail(__FILE__, __LINE__, "\"%s\" lacks \"%s\"", e.msg, want);
	}
}

TEST(yaml_errors_have_positions)
{
	int failed = 0;
	yaml_err("switches: [s0]\nhostz: [h0]\n",
	         "f.yaml:2:1: topology: unknown key \"hostz\"; "
	         "did you mean \"hosts\"?",
	         &failed);
	yaml_err("switches: [s0]\nhosts: [h0]\nlinks:\n  - {a: h0, b: s9}\n",
	         "f.yaml:4:16: b: no node named \"s9\"", &failed);
	yaml_err("switches: [s0]\nhosts: [h0]\nlinks:\n  - {a: h0, b: s0, rate: fast}\n",
	         "f.yaml:4:26: rate:", &failed);
	yaml_err("switches: [s0, s0]\nhosts: [h0]\n", "defined twice", &failed);
	yaml_err("switches: [s0]\n", "no hosts", &failed);
	yaml_err("a: [b\n", "YAML syntax error", &failed);
	yaml_err("", "empty", &failed);
	yaml_err("switches: [s0]\nhosts: [h0]\nlinks: [{a: h0, b: s0}]\n"
	         "events: [{at: 1ms, a: h0, b: s0}]\n",
	         "exactly one of", &failed);
	yaml_err("builtin: leaf-spine:hosts=3\n", "f.yaml:1:10:", &failed);
	CHECK(!failed);
}

TEST(cdf_shipped_and_sampled)
{
	struct iod_sim_cdf c;
	struct iod_err e = {0};
	struct iod_rng r;

	CHECK_EQ(iod_sim_cdf_load(&c, "web-search", &e), 0);
	CHECK_EQ(c.n, 12);
	CHECK_U64(c.bytes[11], 30000000);
	CHECK(fabs(c.p[4] - 0.40) < 1e-12);
	double mean = iod_sim_cdf_mean(&c);
	/* sum of (dp x midpoint) over the published points */
	CHECK_MSG(fabs(mean - 1711250.0) < 1.0, "web-search mean %.0f", mean);
	iod_rng_seed(&r, 3);
	double sum = 0;
	for (int i = 0; i < 200000; i++)
		sum += (double)iod_sim_cdf_sample(&c, &r);
	CHECK_MSG(fabs(sum / 200000 - mean) / mean < 0.02, "sampled %.0f vs %.0f", sum / 200000,
	          mean);
	CHECK_EQ(iod_sim_cdf_load(&c, "data-mining", &e), 0);
	CHECK_EQ(c.n, 13);
	CHECK_U64(c.bytes[12], 1000000000ull);
	CHECK(fabs(c.p[10] - 0.95) < 1e-12);
	CHECK(iod_sim_cdf_parse(&c, "0 0\n100 50\n50 100\n", "x", &e) < 0);
	CHECK_CONTAINS(e.msg, "x:3: sizes and CDF values must not decrease");
	CHECK(iod_sim_cdf_parse(&c, "0 0\n100 0.5\n", "y", &e) < 0);
	CHECK_CONTAINS(e.msg, "last CDF value must be 1");
	CHECK(iod_sim_cdf_load(&c, "/nonexistent/cdf", &e) < 0);
	CHECK_CONTAINS(e.msg, "not web-search, data-mining or a CDF file");
}

TEST(vxlan_edge_source_port)
{
	struct iod_sim_tuple t = {0x0a000001, 0x0a000002, 40000, 5001, 6};
	uint64_t h = iod_sim_edge_flow_hash(&t);
	uint16_t p = iod_sim_edge_sport(h);
	CHECK(p >= IOD_SIM_VXLAN_SPORT_MIN);
	CHECK_EQ(iod_sim_edge_flow_hash(&t), h);
	/* the inner flow decides the port: other flows spread over the range */
	unsigned lo = 0, hi = 0;
	for (uint16_t sp = 1; sp < 2000; sp++) {
		t.sport = sp;
		uint16_t q = iod_sim_edge_sport(iod_sim_edge_flow_hash(&t));
		CHECK(q >= IOD_SIM_VXLAN_SPORT_MIN);
		if (q < 57344)
			lo++;
		else
			hi++;
	}
	CHECK(lo > 850 && hi > 850);
}

TEST(packet_pool_exhaustion_is_an_error)
{
	struct iod_sim_topo t;
	struct iod_sim_config c;
	struct iod_sim *s;
	struct iod_err e = {0};

	CHECK_EQ(iod_sim_topo_builtin(&t, "dumbbell", &e), 0);
	iod_sim_config_default(&c);
	c.packets_max = 8;
	c.flows_max = 4;
	CHECK_EQ(iod_sim_create(&s, &t, &c, &e), 0);
	CHECK_EQ(iod_sim_flow_add(s, 0, 1, 10000000, 0, 0, NULL, &e), 0);
	CHECK_EQ(iod_sim_run(s, UINT64_MAX, &e), -ENOMEM);
	CHECK_CONTAINS(e.msg, "packet pool exhausted");
	iod_sim_destroy(s);
	/* the flow table is bounded too */
	CHECK_EQ(iod_sim_create(&s, &t, &c, &e), 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(iod_sim_flow_add(s, 0, 1, 1000, 0, 0, NULL, &e), 0);
	CHECK_EQ(iod_sim_flow_add(s, 0, 1, 1000, 0, 0, NULL, &e), -ENOSPC);
	CHECK_CONTAINS(e.msg, "flow table full");
	CHECK(iod_sim_flow_add(s, 0, 0, 1000, 0, 0, NULL, &e) < 0);
	iod_sim_destroy(s);
	iod_sim_topo_free(&t);
}

#include "sim/internal.h"

TEST(edge_is_the_data_planes_vxlan_encap)
{
	/* the hash and port the simulator uses are those of a frame built,
	 * encapsulated and parsed by iod's data plane (src/net) */
	struct iod_rng r;
	iod_rng_seed(&r, 5);
	for (int i = 0; i < 200; i++) {
		struct iod_sim_tuple t = {0x0a000000u | (uint32_t)iod_rng_below(&r, 1000),
		                          0x0a000000u | (uint32_t)iod_rng_below(&r, 1000),
		                          (uint16_t)(1024 + iod_rng_below(&r, 60000)),
		                          (uint16_t)(1024 + iod_rng_below(&r, 60000)), 6};
		uint64_t h;
		uint16_t sp;
		CHECK_EQ(sim_edge_encap_check(&t, 1, 2, &h, &sp), 0);
		CHECK_U64(h, iod_sim_edge_flow_hash(&t));
		CHECK_EQ(sp, iod_sim_edge_sport(h));
	}
}
