/*
 * test_ar.c: unit behaviour of every adaptive-routing policy (net/ar): port
 * choice, probe races, flowlet gaps, Clove weights after ECN, probe-util's
 * least-loaded choice, path failure within 3 probe intervals, aging, the
 * receiver's ECN relay, and bounds.
 */
#include "harness.h"
#include "iod/ar.h"
#include "iod/net.h"

#include <string.h>

#define MS IOD_NS_PER_MS
#define US IOD_NS_PER_US

static struct iod_ar *make(enum iod_ar_policy p, void (*tweak)(struct iod_ar_config *))
{
	struct iod_ar_config c;
	struct iod_ar *ar = NULL;
	iod_ar_config_default(&c, p);
	c.flows_max = 1024;
	c.dests_max = 16;
	if (tweak)
		tweak(&c);
	if (iod_ar_create(&c, &ar, NULL))
		return NULL;
	return ar;
}

TEST(ecmp_is_a_stable_hash_within_range)
{
	struct iod_ar *ar = make(IOD_AR_ECMP, NULL);
	CHECK(ar);
	unsigned distinct = 0;
	uint16_t seen[64] = {0};
	for (uint64_t h = 1; h <= 64; h++) {
		uint16_t p = iod_ar_select(ar, 7, h, 0, NULL);
		CHECK(p >= 32768 && p <= 60999);
		CHECK_EQ(iod_ar_select(ar, 7, h, 1000 * MS, NULL), p);
		bool dup = false;
		for (unsigned i = 0; i < distinct; i++)
			dup |= seen[i] == p;
		if (!dup)
			seen[distinct++] = p;
	}
	CHECK(distinct > 60); /* 64 flows spread over ~28k ports */
	CHECK_EQ(iod_ar_stats(ar)->probes_sent, 0);
	iod_ar_destroy(ar);
}

static struct iod_ar_probe_reply reply_to(const struct iod_ar_probe *p, uint64_t path_id)
{
	return (struct iod_ar_probe_reply){.dst = p->dst,
	                                   .sport = p->sport,
	                                   .kind = p->kind,
	                                   .flow_hash = p->flow_hash,
	                                   .sent_ns = p->sent_ns,
	                                   .path_id = path_id};
}

TEST(minrtt_first_reply_pins_the_flow)
{
	struct iod_ar *ar = make(IOD_AR_MINRTT, NULL);
	struct iod_ar_out out = {0};
	uint16_t p0 = iod_ar_select(ar, 2, 0xabc, 1000, &out);
	CHECK_EQ(out.probes_n, 4);
	for (uint32_t i = 0; i < 4; i++) {
		CHECK_EQ(out.probes[i].kind, IOD_AR_PROBE_FLOW);
		CHECK_EQ(out.probes[i].sport, p0 + i); /* sport+0..k-1 (no wrap here) */
		CHECK_U64(out.probes[i].flow_hash, 0xabc);
	}
	/* Packets are not held: they go on the hash port while probing. */
	CHECK_EQ(iod_ar_select(ar, 2, 0xabc, 2000, NULL), p0);
	/* The third probe returns first: the flow moves to its port. */
	struct iod_ar_probe_reply r = reply_to(&out.probes[2], 3);
	iod_ar_on_probe_reply(ar, &r, 1000 + 30 * US);
	CHECK_EQ(iod_ar_select(ar, 2, 0xabc, 3000 + 30 * US, NULL), out.probes[2].sport);
	CHECK_EQ(iod_ar_flow_port(ar, 2, 0xabc), out.probes[2].sport);
	/* Later replies for the same flow change nothing. */
	r = reply_to(&out.probes[0], 1);
	iod_ar_on_probe_reply(ar, &r, 1000 + 40 * US);
	CHECK_EQ(iod_ar_flow_port(ar, 2, 0xabc), out.probes[2].sport);
	CHECK_EQ(iod_ar_stats(ar)->flows_pinned, 1);
	CHECK_EQ(iod_ar_stats(ar)->probe_late, 1);
	iod_ar_destroy(ar);
}

TEST(minrtt_probing_never_blocks_other_new_flows)
{
	struct iod_ar *ar = make(IOD_AR_MINRTT, NULL);
	struct iod_ar_out out = {0};
	for (uint64_t f = 1; f <= 10; f++)
		iod_ar_select(ar, 2, f * 977, 1000, &out);
	CHECK_EQ(out.probes_n, 40); /* every new flow probes at once */
	/* Answer flow 5's probe 1 and flow 9's probe 3 independently. */
	struct iod_ar_probe_reply a = reply_to(&out.probes[4 * 4 + 1], 0);
	struct iod_ar_probe_reply b = reply_to(&out.probes[8 * 4 + 3], 0);
	iod_ar_on_probe_reply(ar, &a, 2000);
	iod_ar_on_probe_reply(ar, &b, 2001);
	CHECK_EQ(iod_ar_flow_port(ar, 2, 5 * 977), out.probes[17].sport);
	CHECK_EQ(iod_ar_flow_port(ar, 2, 9 * 977), out.probes[35].sport);
	iod_ar_destroy(ar);
}

TEST(minrtt_late_reply_is_ignored_and_flow_stays_on_hash_port)
{
	struct iod_ar *ar = make(IOD_AR_MINRTT, NULL);
	struct iod_ar_out out = {0};
	uint16_t p0 = iod_ar_select(ar, 2, 77, 0, &out);
	struct iod_ar_probe_reply r = reply_to(&out.probes[3], 0);
	iod_ar_on_probe_reply(ar, &r, 51 * MS); /* past the 50 ms bound */
	CHECK_EQ(iod_ar_select(ar, 2, 77, 52 * MS, NULL), p0);
	CHECK_EQ(iod_ar_stats(ar)->probe_late, 1);
	CHECK_EQ(iod_ar_stats(ar)->flows_pinned, 0);
	iod_ar_destroy(ar);
}

static void gap_1ms(struct iod_ar_config *c)
{
	c->flowlet_gap_ns = 1 * MS;
}

TEST(flowlet_changes_port_only_after_a_gap)
{
	struct iod_ar *ar = make(IOD_AR_FLOWLET, gap_1ms);
	uint64_t t = 0;
	uint16_t p = iod_ar_select(ar, 1, 5, t, NULL);
	for (int i = 0; i < 100; i++) { /* back-to-back packets: same flowlet */
		t += 100 * US;
		CHECK_EQ(iod_ar_select(ar, 1, 5, t, NULL), p);
	}
	unsigned changes = 0;
	for (int i = 0; i < 50; i++) {
		t += 2 * MS; /* a gap: new flowlet, random port */
		uint16_t q = iod_ar_select(ar, 1, 5, t, NULL);
		changes += q != p;
		p = q;
	}
	CHECK(changes >= 48);
	CHECK_EQ(iod_ar_stats(ar)->flowlets, 51);
	iod_ar_destroy(ar);
}

/* The fabric in these tests: a port takes spine path hash(port) % 4 (a
 * stand-in for ECMP's hash); path i uses links {i, 8} (link 8 is shared by
 * all, as the host's uplink would be). */
static unsigned path_of(uint16_t sport)
{
	return (unsigned)(iod_hash_u64(sport) % 4);
}

static void answer_discovery(struct iod_ar *ar, const struct iod_ar_out *out, uint64_t now)
{
	for (uint32_t i = 0; i < out->probes_n; i++) {
		const struct iod_ar_probe *p = &out->probes[i];
		if (p->kind != IOD_AR_PROBE_DISCOVER)
			continue;
		struct iod_ar_probe_reply r = reply_to(p, 100 + path_of(p->sport));
		r.path_links = (1ull << path_of(p->sport)) | (1ull << 8);
		iod_ar_on_probe_reply(ar, &r, now + 10 * US + (p->sport % 7));
	}
}

TEST(clove_discovers_k_distinct_paths)
{
	struct iod_ar *ar = make(IOD_AR_CLOVE_ECN, NULL);
	struct iod_ar_out out = {0};
	iod_ar_select(ar, 3, 1, 0, &out);
	CHECK_EQ(out.probes_n, 16);
	answer_discovery(ar, &out, 0);
	struct iod_ar_path_info pi[16];
	uint32_t n = iod_ar_paths(ar, 3, pi, 16, 100 * US);
	CHECK_EQ(n, 4);
	uint64_t ids = 0;
	uint64_t wsum = 0;
	for (uint32_t i = 0; i < n; i++) {
		ids |= 1ull << (pi[i].path_id - 100);
		wsum += pi[i].weight;
		CHECK(pi[i].weight >= IOD_AR_WEIGHT_TOTAL / 4 - 1);
	}
	CHECK_U64(ids, 0xf); /* all four distinct paths */
	CHECK_U64(wsum, IOD_AR_WEIGHT_TOTAL);
	iod_ar_destroy(ar);
}

static struct iod_ar *clove_ready(struct iod_ar_path_info *pi)
{
	struct iod_ar *ar = make(IOD_AR_CLOVE_ECN, NULL);
	struct iod_ar_out out = {0};
	iod_ar_select(ar, 3, 1, 0, &out);
	answer_discovery(ar, &out, 0);
	iod_ar_paths(ar, 3, pi, 16, 0);
	return ar;
}

TEST(clove_ecn_cuts_a_third_and_spreads_it)
{
	struct iod_ar_path_info pi[16], after[16];
	struct iod_ar *ar = clove_ready(pi);
	uint64_t now = 1 * MS;
	CHECK(!iod_ar_on_ecn(ar, 3, pi[0].sport, true, now)); /* hidden from the VM */
	iod_ar_paths(ar, 3, after, 16, now);
	uint32_t cut = pi[0].weight / 3;
	CHECK_EQ(after[0].weight, pi[0].weight - cut);
	CHECK(after[0].congested);
	uint64_t sum = after[0].weight;
	for (int i = 1; i < 4; i++) {
		CHECK(after[i].weight >= pi[i].weight + cut / 3);
		CHECK(after[i].weight <= pi[i].weight + cut / 3 + 1);
		sum += after[i].weight;
	}
	CHECK_U64(sum, IOD_AR_WEIGHT_TOTAL);
	/* A clear (non-CE) report changes nothing. */
	CHECK(!iod_ar_on_ecn(ar, 3, pi[1].sport, false, now));
	/* All four congested: the mark reaches the inner flow. */
	CHECK(!iod_ar_on_ecn(ar, 3, pi[1].sport, true, now));
	CHECK(!iod_ar_on_ecn(ar, 3, pi[2].sport, true, now));
	CHECK(iod_ar_on_ecn(ar, 3, pi[3].sport, true, now));
	CHECK_EQ(iod_ar_stats(ar)->ecn_to_inner, 1);
	iod_ar_destroy(ar);
}

/* iod_ar_inner_ecn: what the simulator's edges use to mask CE from the
 * inner flow. clove-ecn: hidden while any path is clear, passed once every
 * path is congested, hidden again when the hold has passed; unknown
 * destinations and the other policies always pass it. */
TEST(clove_inner_ecn_only_when_every_path_is_congested)
{
	struct iod_ar_path_info pi[16];
	struct iod_ar *ar = clove_ready(pi);
	uint64_t now = 1 * MS;
	CHECK(!iod_ar_inner_ecn(ar, 3, now));
	CHECK(iod_ar_inner_ecn(ar, 99, now)); /* no paths known: pass */
	for (int i = 0; i < 3; i++) {
		iod_ar_on_ecn(ar, 3, pi[i].sport, true, now);
		CHECK(!iod_ar_inner_ecn(ar, 3, now));
	}
	iod_ar_on_ecn(ar, 3, pi[3].sport, true, now);
	CHECK(iod_ar_inner_ecn(ar, 3, now));
	CHECK(!iod_ar_inner_ecn(ar, 3, now + iod_ar_config(ar)->congestion_hold_ns));
	iod_ar_destroy(ar);
	struct iod_ar *fl = make(IOD_AR_FLOWLET, NULL);
	CHECK(iod_ar_inner_ecn(fl, 3, now));
	iod_ar_destroy(fl);
}

TEST(clove_wrr_follows_weights_per_flowlet)
{
	struct iod_ar_path_info pi[16];
	struct iod_ar *ar = clove_ready(pi);
	uint64_t now = 1 * MS;
	/* Congest path 0 twice: its weight falls to 4/9 of a quarter. */
	iod_ar_on_ecn(ar, 3, pi[0].sport, true, now);
	iod_ar_on_ecn(ar, 3, pi[0].sport, true, now);
	iod_ar_paths(ar, 3, pi, 16, now);
	unsigned count[4] = {0};
	/* 10 flows, each starting a new flowlet every 1 ms (gap 100 us). */
	for (uint64_t r = 0; r < 900; r++) {
		for (uint64_t f = 0; f < 10; f++) {
			uint16_t p = iod_ar_select(ar, 3, 1000 + f, now + r * MS, NULL);
			for (int i = 0; i < 4; i++)
				count[i] += p == pi[i].sport;
		}
	}
	for (int i = 0; i < 4; i++) {
		double expect = 9000.0 * pi[i].weight / IOD_AR_WEIGHT_TOTAL;
		CHECK_MSG(count[i] > expect * 0.97 && count[i] < expect * 1.03,
		          "path %d: %u flowlets, expected %.0f", i, count[i], expect);
	}
	iod_ar_destroy(ar);
}

TEST(probe_util_takes_the_least_loaded_path)
{
	struct iod_ar *ar = make(IOD_AR_PROBE_UTIL, NULL);
	struct iod_ar_out out = {0};
	iod_ar_select(ar, 4, 1, 0, &out);
	answer_discovery(ar, &out, 0);
	/* Periodic probes report loads 90%, 20%, 60%, 70%. */
	out.probes_n = 0;
	iod_ar_tick(ar, 1 * MS, &out);
	uint32_t loads[4] = {900000, 200000, 600000, 700000};
	struct iod_ar_path_info pi[16];
	iod_ar_paths(ar, 4, pi, 16, 1 * MS);
	unsigned path_probes = 0;
	for (uint32_t i = 0; i < out.probes_n; i++) {
		if (out.probes[i].kind != IOD_AR_PROBE_PATH)
			continue;
		path_probes++;
		struct iod_ar_probe_reply r = reply_to(&out.probes[i], 0);
		for (int j = 0; j < 4; j++)
			if (pi[j].sport == r.sport)
				r.load_ppm = loads[j];
		iod_ar_on_probe_reply(ar, &r, 1 * MS + 20 * US);
	}
	CHECK_EQ(path_probes, 4);
	for (uint64_t f = 0; f < 20; f++)
		CHECK_EQ(iod_ar_select(ar, 4, 500 + f, 2 * MS, NULL), pi[1].sport);
	iod_ar_destroy(ar);
}

TEST(failed_path_dropped_within_three_intervals_and_flows_move)
{
	struct iod_ar_path_info pi[16];
	struct iod_ar *ar = clove_ready(pi);
	uint64_t now = 0, dead_at = 0;
	/* Put 40 flows on the paths. */
	uint16_t port_of[40];
	for (uint64_t f = 0; f < 40; f++)
		port_of[f] = iod_ar_select(ar, 3, 9000 + f, now, NULL);
	/* Every interval: answer probes except those on path 0's port. */
	uint16_t dead = pi[0].sport;
	uint32_t n = 4;
	for (int step = 1; step <= 10 && n == 4; step++) {
		struct iod_ar_out out = {0};
		now = (uint64_t)step * MS;
		iod_ar_tick(ar, now, &out);
		for (uint32_t i = 0; i < out.probes_n; i++) {
			if (out.probes[i].sport == dead)
				continue;
			struct iod_ar_probe_reply r = reply_to(&out.probes[i], 0);
			iod_ar_on_probe_reply(ar, &r, now + 10 * US);
		}
		n = iod_ar_paths(ar, 3, pi, 16, now);
		if (n == 3)
			dead_at = now;
	}
	CHECK_EQ(n, 3);
	CHECK_MSG(dead_at <= 4 * MS, "path dropped at %llu ns", (unsigned long long)dead_at);
	for (uint32_t i = 0; i < n; i++)
		CHECK(pi[i].sport != dead);
	/* Flows that were on it move at their next packet; the rest stay. */
	unsigned moved = 0;
	for (uint64_t f = 0; f < 40; f++) {
		uint16_t p = iod_ar_select(ar, 3, 9000 + f, now + 1, NULL);
		CHECK(p != dead);
		moved += port_of[f] == dead;
	}
	CHECK(moved > 0);
	CHECK_EQ(iod_ar_stats(ar)->paths_failed, 1);
	CHECK(iod_ar_stats(ar)->flows_moved >= moved);
	iod_ar_destroy(ar);
}

TEST(minrtt_pinned_path_failure_reprobes_the_flow)
{
	struct iod_ar *ar = make(IOD_AR_MINRTT, NULL);
	struct iod_ar_out out = {0};
	uint16_t hash_port = iod_ar_select(ar, 2, 0x5151, 0, &out);
	CHECK_EQ(out.probes_n, 4);
	struct iod_ar_probe_reply r = reply_to(&out.probes[2], 7);
	iod_ar_on_probe_reply(ar, &r, 20 * US);
	uint16_t pinned = out.probes[2].sport;
	CHECK_EQ(iod_ar_flow_port(ar, 2, 0x5151), pinned);
	/* The pinned path stops answering its liveness probes. */
	uint64_t now = 0;
	for (int step = 1; step <= 5; step++) {
		now = (uint64_t)step * MS;
		out.probes_n = 0;
		iod_ar_tick(ar, now, &out);
	}
	CHECK_EQ(iod_ar_stats(ar)->paths_failed, 1);
	/* Its next packet leaves the dead port and races k other ports than
	 * the first race's (they may all have been on the failed path), from
	 * the first of them. */
	out.probes_n = 0;
	uint16_t p = iod_ar_select(ar, 2, 0x5151, now + 1, &out);
	CHECK(p != pinned);
	CHECK(p != hash_port);
	CHECK_EQ(out.probes_n, 4);
	CHECK_EQ(out.probes[0].kind, IOD_AR_PROBE_FLOW);
	CHECK_EQ(out.probes[0].sport, p);
	CHECK(iod_ar_stats(ar)->flows_moved >= 1);
	/* A fresh reply pins it again. */
	r = reply_to(&out.probes[1], 8);
	iod_ar_on_probe_reply(ar, &r, now + 1 + 20 * US);
	CHECK_EQ(iod_ar_flow_port(ar, 2, 0x5151), out.probes[1].sport);
	iod_ar_destroy(ar);
}

/* A race no reply wins in time leaves the flow on its port, watched: when
 * that port's path then fails the flow moves and races k fresh ports (a
 * flow whose k ports all hash onto one slow spine used to stay there). */
TEST(minrtt_unanswered_race_watches_the_port_and_moves_off_it)
{
	struct iod_ar *ar = make(IOD_AR_MINRTT, NULL);
	struct iod_ar_out out = {0};
	uint16_t first = iod_ar_select(ar, 2, 0x7777, 0, &out);
	CHECK_EQ(out.probes_n, 4);
	uint16_t raced[4];
	for (uint32_t i = 0; i < 4; i++)
		raced[i] = out.probes[i].sport;
	/* no reply within the probe timeout (50 ms) */
	CHECK_EQ(iod_ar_select(ar, 2, 0x7777, 60 * MS, NULL), first);
	struct iod_ar_path_info pi[IOD_AR_PATHS_MAX];
	CHECK_EQ(iod_ar_paths(ar, 2, pi, IOD_AR_PATHS_MAX, 60 * MS), 1);
	CHECK_EQ(pi[0].sport, first);
	CHECK_EQ(pi[0].flows, 1);
	/* its liveness probes go unanswered: dropped at the third miss */
	uint64_t now = 60 * MS;
	for (int step = 1; step <= 5; step++) {
		now += MS;
		out.probes_n = 0;
		iod_ar_tick(ar, now, &out);
	}
	CHECK_EQ(iod_ar_stats(ar)->paths_failed, 1);
	out.probes_n = 0;
	uint16_t p = iod_ar_select(ar, 2, 0x7777, now + 1, &out);
	CHECK_EQ(out.probes_n, 4);
	CHECK_EQ(iod_ar_stats(ar)->flows_moved, 1);
	bool fresh = true;
	for (uint32_t i = 0; i < 4; i++)
		for (uint32_t k = 0; k < 4; k++)
			fresh &= out.probes[i].sport != raced[k];
	CHECK(fresh);
	CHECK(p != first);
	struct iod_ar_probe_reply r = reply_to(&out.probes[3], 2);
	iod_ar_on_probe_reply(ar, &r, now + 1 + 20 * US);
	CHECK_EQ(iod_ar_flow_port(ar, 2, 0x7777), out.probes[3].sport);
	iod_ar_destroy(ar);
}

/* One liveness round at now: answer every path probe except those whose
 * port lose() says are lost. */
static void liveness_round(struct iod_ar *ar, uint64_t now, uint16_t port, bool lose)
{
	struct iod_ar_out out = {0};
	iod_ar_tick(ar, now, &out);
	for (uint32_t i = 0; i < out.probes_n; i++) {
		if (out.probes[i].kind != IOD_AR_PROBE_PATH ||
		    (lose && out.probes[i].sport == port))
			continue;
		struct iod_ar_probe_reply r = reply_to(&out.probes[i], 0);
		iod_ar_on_probe_reply(ar, &r, now + 10 * US);
	}
}

/* minrtt keeps at most IOD_AR_PATHS_MAX paths per destination: a flow
 * pinned when the set is full replaces the path pinned to least recently,
 * so its own path is watched (before, it was not tracked: its path could
 * fail and the flow never moved). */
static bool has_port(struct iod_ar *ar, uint16_t port, uint32_t *n)
{
	struct iod_ar_path_info pi[IOD_AR_PATHS_MAX];
	*n = iod_ar_paths(ar, 2, pi, IOD_AR_PATHS_MAX, 0);
	for (uint32_t i = 0; i < *n; i++)
		if (pi[i].sport == port)
			return true;
	return false;
}

TEST(minrtt_full_path_set_gives_up_the_least_recently_pinned)
{
	struct iod_ar *ar = make(IOD_AR_MINRTT, NULL);
	uint16_t ports[IOD_AR_PATHS_MAX + 1] = {0};
	uint32_t np = 0, n;
	uint64_t now = 1000;
	for (uint64_t h = 1; np < IOD_AR_PATHS_MAX + 1 && h < 1000; h++) {
		struct iod_ar_out out = {0};
		now += 100 * US;
		iod_ar_select(ar, 2, h * 0x9e3779b97f4a7c15ull, now, &out);
		CHECK_EQ(out.probes_n, 4);
		bool fresh = true;
		for (uint32_t i = 0; i < np; i++)
			fresh &= ports[i] != out.probes[0].sport;
		struct iod_ar_probe_reply r = reply_to(&out.probes[0], 1);
		iod_ar_on_probe_reply(ar, &r, now + 10 * US);
		if (fresh)
			ports[np++] = out.probes[0].sport;
	}
	CHECK_EQ(np, IOD_AR_PATHS_MAX + 1);
	CHECK(has_port(ar, ports[IOD_AR_PATHS_MAX], &n)); /* the newest pin is watched */
	CHECK_EQ(n, IOD_AR_PATHS_MAX);
	CHECK(!has_port(ar, ports[0], &n)); /* the oldest gave way */
	CHECK(has_port(ar, ports[1], &n));
	/* the dump's view: each path's flow and round trip */
	struct iod_ar_path_info pi[IOD_AR_PATHS_MAX];
	n = iod_ar_paths(ar, 2, pi, IOD_AR_PATHS_MAX, now);
	for (uint32_t i = 0; i < n; i++) {
		CHECK(pi[i].flows >= 1);
		CHECK_U64(pi[i].rtt_ns, 10 * US);
	}
	iod_ar_destroy(ar);
}

TEST(one_or_two_lost_probes_keep_the_path)
{
	struct iod_ar_path_info pi[16];
	struct iod_ar *ar = clove_ready(pi);
	uint16_t lossy = pi[1].sport;
	/* rounds 1..12 (1 ms apart): lose round 3's probe, then rounds 6 and 7,
	 * then 10 and 11: never three in a row */
	for (int step = 1; step <= 12; step++) {
		bool lose = step == 3 || step == 6 || step == 7 || step == 10 || step == 11;
		liveness_round(ar, (uint64_t)step * MS, lossy, lose);
		CHECK_EQ(iod_ar_paths(ar, 3, pi, 16, (uint64_t)step * MS), 4);
	}
	CHECK_U64(iod_ar_stats(ar)->paths_failed, 0);
	CHECK_U64(iod_ar_stats(ar)->probe_misses, 5);
	/* the count is visible (dump) and a reply clears it */
	liveness_round(ar, 13 * MS, lossy, true);
	liveness_round(ar, 14 * MS, lossy, true);
	uint32_t n = iod_ar_paths(ar, 3, pi, 16, 14 * MS);
	for (uint32_t i = 0; i < n; i++)
		CHECK_EQ(pi[i].misses, pi[i].sport == lossy ? 1u : 0u);
	liveness_round(ar, 15 * MS, lossy, false);
	n = iod_ar_paths(ar, 3, pi, 16, 15 * MS);
	CHECK_EQ(n, 4);
	for (uint32_t i = 0; i < n; i++)
		CHECK_EQ(pi[i].misses, 0);
	iod_ar_destroy(ar);
}

TEST(three_misses_in_a_row_drop_the_path_and_its_flows_move_once)
{
	struct iod_ar *ar = make(IOD_AR_MINRTT, NULL);
	struct iod_ar_out out = {0};
	/* 8 flows, all pinned to the port of their third probe */
	uint64_t h0 = 0x7000;
	uint16_t pinned[8];
	for (uint64_t f = 0; f < 8; f++) {
		out.probes_n = 0;
		iod_ar_select(ar, 2, h0 + f, 0, &out);
		struct iod_ar_probe_reply r = reply_to(&out.probes[2], 7);
		iod_ar_on_probe_reply(ar, &r, 20 * US);
		pinned[f] = out.probes[2].sport;
	}
	uint16_t victim = pinned[0];
	/* the victim's path loses every probe from round 2 on: misses at
	 * rounds 3 and 4 keep it, the third in a row (round 5) drops it */
	for (int step = 1; step <= 5; step++) {
		liveness_round(ar, (uint64_t)step * MS, victim, step >= 2);
		CHECK_EQ(iod_ar_stats(ar)->paths_failed, step < 5 ? 0u : 1u);
	}
	/* Its flow moves once, at its next packet, straight to the fastest
	 * path that answers (the other flows' ports here): no race, so no
	 * packet on its hash port, which might itself be the dead one; 100
	 * more packets stay there and send no probe (a moved flow that
	 * re-probed on every packet was a probe storm). */
	uint64_t sent = iod_ar_stats(ar)->probes_sent;
	out.probes_n = 0;
	uint16_t to = iod_ar_select(ar, 2, h0, 5 * MS + 1, &out);
	CHECK(to != victim);
	bool live = false;
	for (int f = 1; f < 8; f++)
		live |= to == pinned[f];
	CHECK(live);
	for (int k = 0; k < 100; k++)
		CHECK_EQ(iod_ar_select(ar, 2, h0, 5 * MS + 2 + (uint64_t)k, &out), to);
	CHECK_U64(iod_ar_stats(ar)->flows_moved, 1);
	CHECK_U64(iod_ar_stats(ar)->probes_sent, sent);
	CHECK_EQ(out.probes_n, 0);
	iod_ar_destroy(ar);
}

static void inflight_16(struct iod_ar_config *c)
{
	c->probes_inflight_max = 16; /* 4 flows of k = 4 */
	c->discovery_ports = 16;
}

TEST(probes_in_flight_per_destination_are_bounded)
{
	struct iod_ar *ar = make(IOD_AR_MINRTT, inflight_16);
	struct iod_ar_out out = {0};
	/* 20 new flows at once to one destination, no reply: only 4 race */
	for (uint64_t f = 1; f <= 20; f++) {
		uint16_t p = iod_ar_select(ar, 5, f, 1000 + f, &out);
		if (f > 4) /* the others take the hash port (ECMP), unprobed */
			CHECK_EQ(p, iod_ar_flow_port(ar, 5, f));
	}
	CHECK_EQ(out.probes_n, 16);
	CHECK_U64(iod_ar_stats(ar)->probes_suppressed, 16 * 4);
	/* another destination has its own budget */
	iod_ar_select(ar, 6, 77, 2000, &out);
	CHECK_EQ(out.probes_n, 20);
	/* an answer frees a slot's worth: one reply, still not room for 4 */
	struct iod_ar_probe_reply r = reply_to(&out.probes[0], 1);
	iod_ar_on_probe_reply(ar, &r, 3000);
	iod_ar_select(ar, 5, 100, 4000, &out);
	CHECK_EQ(out.probes_n, 20);
	/* four replies: room for one more flow's race */
	for (int i = 1; i < 4; i++) {
		r = reply_to(&out.probes[i], 1);
		iod_ar_on_probe_reply(ar, &r, 5000);
	}
	iod_ar_select(ar, 5, 101, 6000, &out);
	CHECK_EQ(out.probes_n, 24);
	/* unanswered probes count as lost after one or two timeouts (50 ms):
	 * the budget comes back, so a lossy path slows probing, never stops it */
	iod_ar_select(ar, 5, 102, 60 * MS, &out);
	CHECK_EQ(out.probes_n, 24);
	iod_ar_select(ar, 5, 103, 101 * MS, &out);
	CHECK_EQ(out.probes_n, 28);
	/* Rate: a new flow every millisecond for a second (4000 probes/s
	 * asked for), every probe lost: at most the budget per two 50 ms
	 * epochs goes out (<= 16 * 21 in 20 epochs), and probing goes on. */
	struct iod_ar *b = make(IOD_AR_MINRTT, inflight_16);
	for (uint64_t t = 0, h = 1; t < 1000 * MS; t += MS) {
		struct iod_ar_out o = {0};
		iod_ar_select(b, 9, h++, t, &o);
		iod_ar_tick(b, t, &o);
	}
	CHECK_MSG(iod_ar_stats(b)->probes_sent <= 16 * 21, "%llu probes in 1 s",
	          (unsigned long long)iod_ar_stats(b)->probes_sent);
	CHECK(iod_ar_stats(b)->probes_sent >= 16 * 10);
	iod_ar_destroy(b);
	iod_ar_destroy(ar);
}

static void tie_10us(struct iod_ar_config *c)
{
	c->minrtt_tie_ns = 10 * US;
}

TEST(minrtt_tie_window_spreads_flows_that_start_together)
{
	/* Two paths answer within 10 us of each other (ids 1 and 2), a third
	 * 50 us later (id 3, the congested one). Without a tie window every
	 * flow pins to path 1; with it, flows alternate between 1 and 2 and
	 * never take 3. */
	for (int tie = 0; tie < 2; tie++) {
		struct iod_ar *ar = make(IOD_AR_MINRTT, tie ? tie_10us : NULL);
		unsigned on[4] = {0};
		for (uint64_t f = 1; f <= 8; f++) {
			struct iod_ar_out out = {0};
			uint64_t t0 = f * 1000;
			iod_ar_select(ar, 2, f, t0, &out);
			CHECK_EQ(out.probes_n, 4);
			static const uint64_t id[4] = {1, 2, 3, 3}, rtt_us[4] = {20, 25, 70, 80};
			uint16_t port_of_id[4] = {0};
			for (int i = 0; i < 4; i++) {
				struct iod_ar_probe_reply r = reply_to(&out.probes[i], id[i]);
				port_of_id[id[i]] = out.probes[i].sport;
				iod_ar_on_probe_reply(ar, &r, t0 + rtt_us[i] * US);
			}
			/* all k replied: pinned without waiting for a packet */
			uint16_t p = iod_ar_flow_port(ar, 2, f);
			for (int k = 1; k <= 3; k++)
				on[k] += p == port_of_id[k];
		}
		CHECK_EQ(on[3], 0u);
		unsigned want1 = tie ? 4u : 8u, want2 = tie ? 4u : 0u;
		CHECK_EQ(on[1], want1);
		CHECK_EQ(on[2], want2);
		CHECK_U64(iod_ar_stats(ar)->flows_pinned, 8);
		iod_ar_destroy(ar);
	}
	/* The window closes on the next packet when not every probe returns;
	 * packets use the hash port meanwhile. */
	struct iod_ar *ar = make(IOD_AR_MINRTT, tie_10us);
	struct iod_ar_out out = {0};
	uint16_t hp = iod_ar_select(ar, 2, 77, 0, &out);
	struct iod_ar_probe_reply r = reply_to(&out.probes[1], 5);
	iod_ar_on_probe_reply(ar, &r, 20 * US);
	CHECK_EQ(iod_ar_select(ar, 2, 77, 25 * US, &out), hp);
	CHECK_EQ(iod_ar_select(ar, 2, 77, 31 * US, &out), out.probes[1].sport);
	CHECK_U64(iod_ar_stats(ar)->flows_pinned, 1);
	iod_ar_destroy(ar);
}

TEST(probe_util_drops_a_silent_path_and_never_picks_it)
{
	struct iod_ar *ar = make(IOD_AR_PROBE_UTIL, NULL);
	struct iod_ar_out out = {0};
	struct iod_ar_path_info pi[16];
	iod_ar_select(ar, 4, 1, 0, &out);
	answer_discovery(ar, &out, 0);
	CHECK_EQ(iod_ar_paths(ar, 4, pi, 16, 0), 4);
	/* The least-loaded path (load 0) goes silent; the others answer. */
	uint16_t silent = pi[0].sport;
	uint32_t n = 4;
	uint64_t now = 0, dropped_at = 0;
	for (int step = 1; step <= 8; step++) {
		now = (uint64_t)step * MS;
		out.probes_n = 0;
		iod_ar_tick(ar, now, &out);
		for (uint32_t i = 0; i < out.probes_n; i++) {
			if (out.probes[i].kind != IOD_AR_PROBE_PATH ||
			    out.probes[i].sport == silent)
				continue;
			struct iod_ar_probe_reply r = reply_to(&out.probes[i], 0);
			r.load_ppm = 500000;
			iod_ar_on_probe_reply(ar, &r, now + 10 * US);
		}
		n = iod_ar_paths(ar, 4, pi, 16, now);
		if (n == 3 && !dropped_at)
			dropped_at = now;
	}
	CHECK_EQ(n, 3);
	CHECK_MSG(dropped_at && dropped_at <= 4 * MS, "dropped at %llu ns",
	          (unsigned long long)dropped_at);
	for (uint64_t f = 0; f < 50; f++)
		CHECK(iod_ar_select(ar, 4, 7000 + f, now + 1, NULL) != silent);
	iod_ar_destroy(ar);
}

static void idle_1s(struct iod_ar_config *c)
{
	c->flow_idle_ns = 1 * IOD_NS_PER_S;
	c->flows_max = 100;
}

TEST(idle_flows_age_out_and_table_bound_holds)
{
	struct iod_ar *ar = make(IOD_AR_FLOWLET, idle_1s);
	for (uint64_t f = 1; f <= 100; f++)
		iod_ar_select(ar, 1, f, 0, NULL);
	/* Table full: a new flow still gets a port (the hash port), counted. */
	iod_ar_select(ar, 1, 5000, 0, NULL);
	CHECK_EQ(iod_ar_stats(ar)->flows_table_full, 1);
	/* Keep flows 1..10 busy; the others go idle and age out. */
	for (uint64_t t = 1; t <= 3; t++) {
		for (uint64_t f = 1; f <= 10; f++)
			iod_ar_select(ar, 1, f, t * 600 * MS, NULL);
		iod_ar_tick(ar, t * 600 * MS, NULL);
	}
	CHECK_EQ(iod_ar_stats(ar)->flows_aged, 90);
	iod_ar_select(ar, 1, 5001, 2 * IOD_NS_PER_S, NULL);
	CHECK_EQ(iod_ar_stats(ar)->flows_new, 101);
	iod_ar_destroy(ar);
}

TEST(receiver_relays_ecn_once_per_interval)
{
	struct iod_ar_rx *rx;
	uint16_t sport;
	bool ce;
	CHECK_EQ(iod_ar_rx_create(4, 50 * US, &rx), 0);
	CHECK(!iod_ar_rx_feedback(rx, 9, 0, &sport, &ce)); /* nothing seen yet */
	iod_ar_rx_on_packet(rx, 9, 40000, false, 0);
	iod_ar_rx_on_packet(rx, 9, 40001, true, 1);
	CHECK(iod_ar_rx_feedback(rx, 9, 10, &sport, &ce));
	CHECK_EQ(sport, 40001); /* the congested port goes first */
	CHECK(ce);
	CHECK(!iod_ar_rx_feedback(rx, 9, 20 * US, &sport, &ce)); /* within the interval */
	CHECK(iod_ar_rx_feedback(rx, 9, 61 * US, &sport, &ce));
	CHECK(!ce); /* CE was relayed once, then cleared */
	iod_ar_rx_destroy(rx);
}

static void bad_paths(struct iod_ar_config *c)
{
	c->paths = 0;
}

static void bad_range(struct iod_ar_config *c)
{
	c->sport_min = 5000;
	c->sport_max = 4000;
}

TEST(config_errors_are_explained)
{
	struct iod_ar_config c;
	struct iod_ar *ar;
	struct iod_err e = {0};
	iod_ar_config_default(&c, IOD_AR_MINRTT);
	bad_paths(&c);
	CHECK_EQ(iod_ar_create(&c, &ar, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "paths");
	iod_ar_config_default(&c, IOD_AR_MINRTT);
	bad_range(&c);
	CHECK_EQ(iod_ar_create(&c, &ar, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "empty");
	enum iod_ar_policy p;
	CHECK_EQ(iod_ar_policy_parse("clove-ecn", &p), 0);
	CHECK_EQ(p, IOD_AR_CLOVE_ECN);
	CHECK_STR(iod_ar_policy_name(IOD_AR_PROBE_UTIL), "probe-util");
	CHECK_EQ(iod_ar_policy_parse("conga", &p), -EINVAL);
}

/* ---- probes on the wire ------------------------------------------------- */

static const struct iod_ar_wire wire = {.src_mac = {2, 0, 0, 0, 0, 1},
                                        .dst_mac = {2, 0, 0, 0, 0, 2},
                                        .src_ip = 0x0a000001,
                                        .dst_ip = 0x0a000002,
                                        .tos = 2};

TEST(probe_frame_round_trip_and_reflection)
{
	uint8_t f[128];
	struct iod_ar_probe p = {.dst = 0x0a000002,
	                         .sport = 51234,
	                         .kind = IOD_AR_PROBE_FLOW,
	                         .flow_hash = 0x1122334455667788ull,
	                         .sent_ns = 123456789};
	int n = iod_ar_probe_frame_build(f, sizeof(f), &wire, &p);
	CHECK_EQ(n, IOD_AR_PROBE_FRAME_BYTES);
	/* the fabric sees VXLAN from the probed source port, like the flow's
	 * data, for the reserved probe VNI */
	CHECK_EQ(f[12], 0x08);
	CHECK_EQ(f[23], 17);
	CHECK_EQ((f[34] << 8) | f[35], 51234);
	CHECK_EQ((f[36] << 8) | f[37], IOD_NET_VXLAN_PORT);
	CHECK_EQ(f[42], 0x08); /* VXLAN I flag */
	CHECK_EQ((uint32_t)(f[46] << 16 | f[47] << 8 | f[48]), IOD_AR_PROBE_VNI);
	bool reply = true;
	struct iod_ar_probe_reply r;
	CHECK_EQ(iod_ar_probe_frame_parse(f, (uint32_t)n, 0, &reply, &r), 0);
	CHECK(!reply);
	CHECK_EQ(r.dst, 0x0a000001); /* a request comes from the prober */
	/* the remote edge reflects it in place; a reply is not reflected again */
	CHECK_EQ(iod_ar_probe_frame_reflect(f, (uint32_t)n, 0), 0);
	CHECK_EQ(iod_ar_probe_frame_reflect(f, (uint32_t)n, 0), -EINVAL);
	CHECK_EQ(iod_ar_probe_frame_parse(f, (uint32_t)n, 0, &reply, &r), 0);
	CHECK(reply);
	CHECK_EQ(r.dst, 0x0a000002); /* the reply names the reflecting edge */
	CHECK_EQ(r.sport, 51234);
	CHECK_EQ(r.kind, IOD_AR_PROBE_FLOW);
	CHECK_U64(r.flow_hash, 0x1122334455667788ull);
	CHECK_U64(r.sent_ns, 123456789);
	CHECK_EQ(f[0], 2);
	CHECK_EQ(f[5], 1); /* MACs swapped: back to the prober */
	/* and it drives the core like any reply */
	struct iod_ar *ar = make(IOD_AR_MINRTT, NULL);
	struct iod_ar_out out = {0};
	iod_ar_select(ar, 0x0a000002, 0x99, 1000, &out);
	CHECK_EQ(iod_ar_probe_frame_build(f, sizeof(f), &wire, &out.probes[3]),
	         IOD_AR_PROBE_FRAME_BYTES);
	CHECK_EQ(iod_ar_probe_frame_reflect(f, IOD_AR_PROBE_FRAME_BYTES, 0), 0);
	CHECK_EQ(iod_ar_probe_frame_parse(f, IOD_AR_PROBE_FRAME_BYTES, 0, &reply, &r), 0);
	iod_ar_on_probe_reply(ar, &r, 1000 + 20 * US);
	CHECK_EQ(iod_ar_flow_port(ar, 0x0a000002, 0x99), out.probes[3].sport);
	iod_ar_destroy(ar);
}

TEST(probe_frame_rejects_what_is_not_a_probe)
{
	uint8_t f[128];
	bool reply;
	struct iod_ar_probe_reply r;
	struct iod_ar_probe p = {.sport = 50000, .kind = IOD_AR_PROBE_PATH};
	CHECK_EQ(iod_ar_probe_frame_build(f, 40, &wire, &p), -ENOSPC);
	int n = iod_ar_probe_frame_build(f, sizeof(f), &wire, &p);
	CHECK_EQ(n, IOD_AR_PROBE_FRAME_BYTES);
	/* truncated at every length */
	for (int len = 0; len < n; len++)
		CHECK_EQ(iod_ar_probe_frame_parse(f, (uint32_t)len, 0, &reply, &r), -EINVAL);
	/* another VXLAN port */
	CHECK_EQ(iod_ar_probe_frame_parse(f, (uint32_t)n, 4790, &reply, &r), -EINVAL);
	CHECK_EQ(iod_ar_probe_frame_parse(f, (uint32_t)n, 4789, &reply, &r), 0);
	/* a bad VXLAN flag or VNI (a network's data), magic, version or kind */
	uint8_t g[128];
	static const int bad[] = {42, 46, 47, 48, 50, 51, 52, 53, 54, 56};
	for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
		int off = bad[b];
		memcpy(g, f, (size_t)n);
		g[off] ^= 0x88; /* clears the I flag at 42 */
		CHECK_EQ(iod_ar_probe_frame_parse(g, (uint32_t)n, 0, &reply, &r), -EINVAL);
		CHECK_EQ(iod_ar_probe_frame_reflect(g, (uint32_t)n, 0), -EINVAL);
	}
	/* not IPv4/UDP */
	memcpy(g, f, (size_t)n);
	g[23] = 6;
	CHECK_EQ(iod_ar_probe_frame_parse(g, (uint32_t)n, 0, &reply, &r), -EINVAL);
}
