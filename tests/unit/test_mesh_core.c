/*
 * test_mesh_core.c: the mesh's pure cores: LB policies (distribution within
 * tolerance, locality, panic), outlier detection timing (Envoy semantics),
 * circuit breakers, retry budget and backoff, timeouts, registry and config.
 */
#include "harness.h"
#include "iod/mesh.h"

#include <stdlib.h>

static struct iod_mesh_service *svc_new(uint32_t n, enum iod_mesh_lb lb)
{
	struct iod_mesh_service *s = malloc(sizeof(*s));
	iod_mesh_service_defaults(s);
	snprintf(s->name, sizeof(s->name), "web");
	s->port = 80;
	s->lb = lb;
	s->locality = false;
	s->eps_n = n;
	for (uint32_t i = 0; i < n; i++) {
		struct iod_mesh_endpoint *ep = &s->eps[i];
		snprintf(ep->id, sizeof(ep->id), "web-%u", i);
		ep->ip4 = 0x7f000001;
		ep->port = (uint16_t)(8000 + i);
		ep->weight = 1;
		ep->healthy = true;
		snprintf(ep->node, sizeof(ep->node), "n%u", i % 3);
		snprintf(ep->rack, sizeof(ep->rack), "r%u", (i % 3) / 2);
	}
	return s;
}

/* Pick `count` times with keys i (hash policies) and count per host. */
static void run_picks(struct iod_mesh_service *s, struct iod_mesh_lb_state *lb,
                      struct iod_mesh_outlier *o, uint32_t count, uint32_t *hits, bool hashed)
{
	struct iod_rng rng;
	bool panic;
	iod_rng_seed(&rng, 42);
	for (uint32_t i = 0; i < count; i++) {
		int h = iod_mesh_lb_pick(lb, s, o, "", "", hashed ? iod_hash_u64(i) : 0, UINT32_MAX,
		                         &rng, &panic);
		if (h >= 0)
			hits[h]++;
	}
}

TEST(lb_round_robin_exact)
{
	struct iod_mesh_service *s = svc_new(4, IOD_MESH_LB_ROUND_ROBIN);
	struct iod_mesh_lb_state lb = {0};
	struct iod_mesh_outlier o;
	uint32_t hits[4] = {0};
	iod_mesh_outlier_init(&o, 4);
	CHECK_EQ(iod_mesh_lb_build(&lb, s), 0);
	run_picks(s, &lb, &o, 4000, hits, false);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(hits[i], 1000);
	iod_mesh_lb_free(&lb);
	free(s);
}

TEST(lb_weighted_proportional_and_smooth)
{
	struct iod_mesh_service *s = svc_new(3, IOD_MESH_LB_WEIGHTED);
	struct iod_mesh_lb_state lb = {0};
	struct iod_mesh_outlier o;
	uint32_t hits[3] = {0};
	struct iod_rng rng;
	bool panic;
	s->eps[0].weight = 5;
	s->eps[1].weight = 1;
	s->eps[2].weight = 1;
	iod_mesh_outlier_init(&o, 3);
	CHECK_EQ(iod_mesh_lb_build(&lb, s), 0);
	run_picks(s, &lb, &o, 7000, hits, false);
	CHECK_EQ(hits[0], 5000);
	CHECK_EQ(hits[1], 1000);
	CHECK_EQ(hits[2], 1000);
	/* Smooth: the heavy host never takes all 5 of its turns in a row
	 * (nginx's cycle is a a b a c a a, so runs are at most 4 across cycles). */
	iod_rng_seed(&rng, 1);
	int run = 0, max_run = 0;
	for (int i = 0; i < 70; i++) {
		int h = iod_mesh_lb_pick(&lb, s, &o, "", "", 0, UINT32_MAX, &rng, &panic);
		run = h == 0 ? run + 1 : 0;
		max_run = run > max_run ? run : max_run;
	}
	CHECK(max_run <= 4);
	iod_mesh_lb_free(&lb);
	free(s);
}

TEST(lb_least_request_p2c_prefers_idle)
{
	struct iod_mesh_service *s = svc_new(4, IOD_MESH_LB_LEAST_REQUEST);
	struct iod_mesh_lb_state lb = {0};
	struct iod_mesh_outlier o;
	uint32_t hits[4] = {0};
	iod_mesh_outlier_init(&o, 4);
	CHECK_EQ(iod_mesh_lb_build(&lb, s), 0);
	/* Uniform load: roughly even (each 25% +- 3%). */
	run_picks(s, &lb, &o, 40000, hits, false);
	for (int i = 0; i < 4; i++)
		CHECK_MSG(hits[i] > 8800 && hits[i] < 11200, "host %d got %u", i, hits[i]);
	/* Host 0 has many requests in flight: P2C only picks it when both
	 * choices are host 0, which cannot happen (distinct choices). */
	memset(hits, 0, sizeof(hits));
	o.hosts[0].active_requests = 50;
	run_picks(s, &lb, &o, 10000, hits, false);
	CHECK_EQ(hits[0], 0);
	/* A busy-but-not-hopeless host still gets some: 2 requests vs 0 others. */
	memset(hits, 0, sizeof(hits));
	o.hosts[0].active_requests = 0;
	o.hosts[1].active_requests = 1;
	run_picks(s, &lb, &o, 12000, hits, false);
	CHECK(hits[1] == 0);
	CHECK(hits[0] > 3000 && hits[2] > 3000 && hits[3] > 3000);
	iod_mesh_lb_free(&lb);
	free(s);
}

static void hash_policy(enum iod_mesh_lb pol, double tol)
{
	struct iod_mesh_service *s = svc_new(5, pol);
	struct iod_mesh_lb_state lb = {0};
	struct iod_mesh_outlier o;
	uint32_t hits[5] = {0};
	struct iod_rng rng;
	bool panic;
	iod_mesh_outlier_init(&o, 5);
	CHECK_EQ(iod_mesh_lb_build(&lb, s), 0);
	run_picks(s, &lb, &o, 50000, hits, true);
	for (int i = 0; i < 5; i++)
		CHECK_MSG(hits[i] > 10000 * (1 - tol) && hits[i] < 10000 * (1 + tol),
		          "%s host %d got %u of 50000", iod_mesh_lb_name(pol), i, hits[i]);
	/* Affinity: the same key always lands on the same host. */
	iod_rng_seed(&rng, 3);
	int first[200];
	for (int k = 0; k < 200; k++)
		first[k] = iod_mesh_lb_pick(&lb, s, &o, "", "", iod_hash_u64((uint64_t)k),
		                            UINT32_MAX, &rng, &panic);
	for (int k = 0; k < 200; k++)
		CHECK_EQ(iod_mesh_lb_pick(&lb, s, &o, "", "", iod_hash_u64((uint64_t)k), UINT32_MAX,
		                          &rng, &panic),
		         first[k]);
	/* Minimal disruption: eject host 2: only its keys move. */
	o.hosts[2].ejected_until_ns = 1;
	o.ejected = 1;
	int moved = 0;
	for (int k = 0; k < 200; k++) {
		int h = iod_mesh_lb_pick(&lb, s, &o, "", "", iod_hash_u64((uint64_t)k), UINT32_MAX,
		                         &rng, &panic);
		CHECK(h != 2);
		if (first[k] != 2)
			CHECK_EQ(h, first[k]);
		else
			moved++;
	}
	CHECK(moved > 0);
	iod_mesh_lb_free(&lb);
	free(s);
}

TEST(lb_ring_hash_distribution_and_affinity)
{
	hash_policy(IOD_MESH_LB_RING_HASH, 0.35);
}

TEST(lb_maglev_distribution_and_affinity)
{
	hash_policy(IOD_MESH_LB_MAGLEV, 0.05);
}

TEST(lb_locality_node_then_rack_then_any)
{
	/* eps: 0 n0 r0, 1 n1 r0, 2 n2 r1, 3 n0 r0, 4 n1 r0, 5 n2 r1 */
	struct iod_mesh_service *s = svc_new(6, IOD_MESH_LB_ROUND_ROBIN);
	struct iod_mesh_lb_state lb = {0};
	struct iod_mesh_outlier o;
	struct iod_rng rng;
	bool panic;
	s->locality = true;
	iod_mesh_outlier_init(&o, 6);
	iod_rng_seed(&rng, 9);
	CHECK_EQ(iod_mesh_lb_build(&lb, s), 0);
	for (int i = 0; i < 20; i++) {
		int h = iod_mesh_lb_pick(&lb, s, &o, "n2", "r1", 0, UINT32_MAX, &rng, &panic);
		CHECK(h == 2 || h == 5);
	}
	/* Both local replicas down: same rack has none left -> wait, rack r1
	 * is only n2; so any host. */
	s->eps[2].healthy = false;
	s->eps[5].healthy = false;
	uint32_t seen = 0;
	for (int i = 0; i < 20; i++) {
		int h = iod_mesh_lb_pick(&lb, s, &o, "n2", "r1", 0, UINT32_MAX, &rng, &panic);
		CHECK(h != 2 && h != 5);
		seen |= 1u << h;
	}
	CHECK_EQ(seen, 0x1b);
	/* Node n9 unknown, rack r0: only r0 hosts. */
	for (int i = 0; i < 20; i++) {
		int h = iod_mesh_lb_pick(&lb, s, &o, "n9", "r0", 0, UINT32_MAX, &rng, &panic);
		CHECK(h == 0 || h == 1 || h == 3 || h == 4);
	}
	iod_mesh_lb_free(&lb);
	free(s);
}

TEST(lb_panic_threshold_uses_all_hosts)
{
	struct iod_mesh_service *s = svc_new(4, IOD_MESH_LB_ROUND_ROBIN);
	struct iod_mesh_lb_state lb = {0};
	struct iod_mesh_outlier o;
	struct iod_rng rng;
	bool panic;
	iod_mesh_outlier_init(&o, 4);
	iod_rng_seed(&rng, 9);
	CHECK_EQ(iod_mesh_lb_build(&lb, s), 0);
	/* 2 of 4 usable = 50%: not below the 50% threshold: only healthy. */
	s->eps[0].healthy = false;
	s->eps[1].healthy = false;
	for (int i = 0; i < 8; i++) {
		int h = iod_mesh_lb_pick(&lb, s, &o, "", "", 0, UINT32_MAX, &rng, &panic);
		CHECK(!panic && (h == 2 || h == 3));
	}
	/* 1 of 4 = 25% < 50%: panic, all four hosts take traffic. */
	s->eps[2].healthy = false;
	uint32_t seen = 0;
	for (int i = 0; i < 8; i++) {
		int h = iod_mesh_lb_pick(&lb, s, &o, "", "", 0, UINT32_MAX, &rng, &panic);
		CHECK(panic);
		seen |= 1u << h;
	}
	CHECK_EQ(seen, 0xf);
	/* Exclude: a retry avoids the host that just failed when it can. */
	s->eps[0].healthy = s->eps[1].healthy = s->eps[2].healthy = true;
	for (int i = 0; i < 8; i++)
		CHECK(iod_mesh_lb_pick(&lb, s, &o, "", "", 0, 1, &rng, &panic) != 1);
	/* No endpoints at all. */
	s->eps_n = 0;
	CHECK_EQ(iod_mesh_lb_build(&lb, s), 0);
	iod_mesh_outlier_init(&o, 0);
	CHECK_EQ(iod_mesh_lb_pick(&lb, s, &o, "", "", 0, UINT32_MAX, &rng, &panic), -EHOSTUNREACH);
	iod_mesh_lb_free(&lb);
	free(s);
}

TEST(outlier_ejection_timing_envoy)
{
	struct iod_mesh_outlier o;
	struct iod_mesh_outlier_cfg c = {.consecutive_5xx = 5,
	                                 .consecutive_connect_fail = 3,
	                                 .interval_ns = 10 * IOD_NS_PER_S,
	                                 .base_ejection_ns = 30 * IOD_NS_PER_S,
	                                 .max_ejection_ns = 300 * IOD_NS_PER_S,
	                                 .max_ejection_bp = 1000,
	                                 .panic_bp = 5000};
	uint64_t t = 1000;
	iod_mesh_outlier_init(&o, 10);
	/* 4 5xx, then a success resets the streak. */
	for (int i = 0; i < 4; i++)
		CHECK(!iod_mesh_outlier_report(&o, &c, 0, IOD_MESH_HTTP_5XX, t));
	CHECK(!iod_mesh_outlier_report(&o, &c, 0, IOD_MESH_OK, t));
	for (int i = 0; i < 4; i++)
		CHECK(!iod_mesh_outlier_report(&o, &c, 0, IOD_MESH_HTTP_5XX, t));
	CHECK(iod_mesh_outlier_report(&o, &c, 0, IOD_MESH_HTTP_5XX, t)); /* the 5th */
	CHECK(iod_mesh_outlier_ejected(&o, 0));
	/* First ejection: 30 s. Not back at 29.9 s, back at 30 s. */
	CHECK_EQ(iod_mesh_outlier_tick(&o, &c, t + 29900 * IOD_NS_PER_MS), 0);
	CHECK(iod_mesh_outlier_ejected(&o, 0));
	CHECK_EQ(iod_mesh_outlier_tick(&o, &c, t + 30 * IOD_NS_PER_S), 1);
	CHECK(!iod_mesh_outlier_ejected(&o, 0));
	/* Second ejection soon after: 2 x 30 s = 60 s. */
	t += 31 * IOD_NS_PER_S;
	for (int i = 0; i < 3; i++)
		iod_mesh_outlier_report(&o, &c, 0, IOD_MESH_CONNECT_FAIL, t);
	CHECK(iod_mesh_outlier_ejected(&o, 0));
	CHECK_U64(o.hosts[0].ejected_until_ns, t + 60 * IOD_NS_PER_S);
	iod_mesh_outlier_tick(&o, &c, t + 60 * IOD_NS_PER_S);
	CHECK(!iod_mesh_outlier_ejected(&o, 0));
	/* Max ejection 10% of 10 hosts = 1: a second bad host stays in. */
	t += 61 * IOD_NS_PER_S;
	for (int i = 0; i < 5; i++)
		iod_mesh_outlier_report(&o, &c, 1, IOD_MESH_HTTP_5XX, t);
	CHECK(iod_mesh_outlier_ejected(&o, 1));
	for (int i = 0; i < 5; i++)
		CHECK(!iod_mesh_outlier_report(&o, &c, 2, IOD_MESH_HTTP_5XX, t));
	CHECK(!iod_mesh_outlier_ejected(&o, 2));
	CHECK_EQ(o.ejected, 1);
	/* Host 0's multiplier (2) decays one per healthy interval. */
	CHECK_EQ(o.hosts[0].ejections, 2);
	uint64_t t0 = t;
	iod_mesh_outlier_tick(&o, &c, t0 + 10 * IOD_NS_PER_S);
	iod_mesh_outlier_tick(&o, &c, t0 + 20 * IOD_NS_PER_S);
	CHECK_EQ(o.hosts[0].ejections, 0);
	/* ... so its next ejection is base time again, and the cap holds. */
	CHECK_EQ(o.hosts[0].ejections_total, 2);
}

TEST(outlier_max_ejection_cap)
{
	struct iod_mesh_outlier o;
	struct iod_mesh_outlier_cfg c = {.consecutive_5xx = 1,
	                                 .base_ejection_ns = 100 * IOD_NS_PER_S,
	                                 .max_ejection_ns = 250 * IOD_NS_PER_S,
	                                 .max_ejection_bp = 10000};
	uint64_t t = 1;
	iod_mesh_outlier_init(&o, 2);
	for (int k = 1; k <= 5; k++) {
		CHECK(iod_mesh_outlier_report(&o, &c, 0, IOD_MESH_RESET, t));
		uint64_t want = IOD_MIN((uint64_t)k * 100, 250) * IOD_NS_PER_S;
		CHECK_U64(o.hosts[0].ejected_until_ns - t, want);
		t = o.hosts[0].ejected_until_ns;
		iod_mesh_outlier_tick(&o, &c, t);
	}
}

TEST(breaker_limits_and_trips)
{
	struct iod_mesh_breaker b = {0};
	struct iod_mesh_breaker_cfg c = {
	    .max_connections = 2, .max_pending = 1, .max_requests = 3, .max_retries = 1};
	CHECK_EQ(iod_mesh_breaker_acquire(&b, &c, IOD_MESH_BRK_CONNECTIONS), 0);
	CHECK_EQ(iod_mesh_breaker_acquire(&b, &c, IOD_MESH_BRK_CONNECTIONS), 0);
	CHECK_EQ(iod_mesh_breaker_acquire(&b, &c, IOD_MESH_BRK_CONNECTIONS), -EBUSY);
	CHECK_U64(b.trips[IOD_MESH_BRK_CONNECTIONS], 1);
	iod_mesh_breaker_release(&b, IOD_MESH_BRK_CONNECTIONS);
	CHECK_EQ(iod_mesh_breaker_acquire(&b, &c, IOD_MESH_BRK_CONNECTIONS), 0);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(iod_mesh_breaker_acquire(&b, &c, IOD_MESH_BRK_REQUESTS), 0);
	CHECK_EQ(iod_mesh_breaker_acquire(&b, &c, IOD_MESH_BRK_REQUESTS), -EBUSY);
	CHECK_EQ(iod_mesh_breaker_acquire(&b, &c, IOD_MESH_BRK_PENDING), 0);
	CHECK_EQ(iod_mesh_breaker_acquire(&b, &c, IOD_MESH_BRK_PENDING), -EBUSY);
	CHECK_STR(iod_mesh_breaker_name(IOD_MESH_BRK_PENDING), "pending");
}

TEST(retry_budget_and_count)
{
	struct iod_mesh_breaker b = {0};
	struct iod_mesh_breaker_cfg bc = {.max_connections = 1000,
	                                  .max_pending = 1000,
	                                  .max_requests = 1000,
	                                  .max_retries = 1000};
	struct iod_mesh_retry_cfg rc = {
	    .max_per_request = 2, .budget_bp = 2000, .min_concurrency = 3};
	CHECK(!iod_mesh_retry_allowed(&b, &bc, &rc, 3)); /* past max_per_request */
	CHECK(!iod_mesh_retry_allowed(&b, &bc, &rc, 0));
	/* 100 requests in flight, 20% budget = 20 retries in flight. */
	b.open[IOD_MESH_BRK_REQUESTS] = 100;
	int ok = 0;
	for (int i = 0; i < 50; i++)
		ok += iod_mesh_retry_allowed(&b, &bc, &rc, 1);
	CHECK_EQ(ok, 20);
	CHECK_U64(b.trips[IOD_MESH_BRK_RETRIES], 30);
	/* Few requests: the minimum concurrency (3) still allows retries. */
	memset(&b, 0, sizeof(b));
	b.open[IOD_MESH_BRK_REQUESTS] = 2;
	ok = 0;
	for (int i = 0; i < 10; i++)
		ok += iod_mesh_retry_allowed(&b, &bc, &rc, 1);
	CHECK_EQ(ok, 3);
	/* The retries breaker limits too. */
	memset(&b, 0, sizeof(b));
	bc.max_retries = 1;
	b.open[IOD_MESH_BRK_REQUESTS] = 100;
	CHECK(iod_mesh_retry_allowed(&b, &bc, &rc, 1));
	CHECK(!iod_mesh_retry_allowed(&b, &bc, &rc, 1));
	iod_mesh_breaker_release(&b, IOD_MESH_BRK_RETRIES);
	CHECK(iod_mesh_retry_allowed(&b, &bc, &rc, 2));
}

TEST(retry_backoff_full_jitter)
{
	struct iod_mesh_retry_cfg rc = {.backoff_base_ns = 25 * IOD_NS_PER_MS,
	                                .backoff_max_ns = 250 * IOD_NS_PER_MS};
	struct iod_rng rng;
	iod_rng_seed(&rng, 5);
	for (uint32_t a = 1; a <= 6; a++) {
		uint64_t cap = IOD_MIN(rc.backoff_base_ns << (a - 1), rc.backoff_max_ns);
		uint64_t lo = UINT64_MAX, hi = 0;
		for (int i = 0; i < 2000; i++) {
			uint64_t d = iod_mesh_retry_backoff_ns(&rc, a, &rng);
			CHECK(d < cap);
			lo = IOD_MIN(lo, d);
			hi = IOD_MAX(hi, d);
		}
		CHECK(lo < cap / 10 && hi > cap - cap / 10); /* spread over the range */
	}
	/* Deterministic for a seed. */
	struct iod_rng r1, r2;
	iod_rng_seed(&r1, 77);
	iod_rng_seed(&r2, 77);
	CHECK_U64(iod_mesh_retry_backoff_ns(&rc, 2, &r1), iod_mesh_retry_backoff_ns(&rc, 2, &r2));
	CHECK(iod_mesh_http_idempotent("GET", 3));
	CHECK(iod_mesh_http_idempotent("PUT", 3));
	CHECK(!iod_mesh_http_idempotent("POST", 4));
	CHECK(!iod_mesh_http_idempotent("PATCH", 5));
}

TEST(timeouts)
{
	struct iod_mesh_timeouts t = {.connect_ns = 100, .request_ns = 1000, .idle_ns = 5000};
	CHECK_EQ(iod_mesh_timeout_check(&t, 10, 0, 10, 109), IOD_MESH_T_NONE);
	CHECK_EQ(iod_mesh_timeout_check(&t, 10, 0, 10, 110), IOD_MESH_T_CONNECT);
	CHECK_EQ(iod_mesh_timeout_check(&t, 0, 50, 900, 1049), IOD_MESH_T_NONE);
	CHECK_EQ(iod_mesh_timeout_check(&t, 0, 50, 900, 1050), IOD_MESH_T_REQUEST);
	CHECK_EQ(iod_mesh_timeout_check(&t, 0, 0, 900, 5899), IOD_MESH_T_NONE);
	CHECK_EQ(iod_mesh_timeout_check(&t, 0, 0, 900, 5900), IOD_MESH_T_IDLE);
	t.idle_ns = 0;
	CHECK_EQ(iod_mesh_timeout_check(&t, 0, 0, 900, 1u << 30), IOD_MESH_T_NONE);
}

/* The head deadline is not moved by bytes that trickle in (issue 15). */
TEST(head_deadline)
{
	struct iod_mesh_timeouts t = {.idle_ns = 5000, .head_ns = 1000};
	CHECK(!iod_mesh_head_expired(&t, 0, 1u << 30)); /* between requests: none */
	CHECK(!iod_mesh_head_expired(&t, 100, 1099));
	CHECK(iod_mesh_head_expired(&t, 100, 1100));
	t.head_ns = 0;
	CHECK(!iod_mesh_head_expired(&t, 100, 1u << 30)); /* 0 = off */
}

/* Per-client counts against a model, through enough clients (half the
 * table) and churn that probe runs wrap and backward-shift deletes move
 * entries; the limit holds per client. */
TEST(client_limits_table)
{
	static struct iod_mesh_clients t;
	enum { KEYS = IOD_MESH_CLIENT_SLOTS / 2 };
	static uint32_t model[KEYS];
	struct iod_rng rng;
	iod_rng_seed(&rng, 7);
	memset(&t, 0, sizeof(t));
	for (uint32_t step = 0; step < 400000; step++) {
		uint32_t k = (uint32_t)(iod_rng_next(&rng) % KEYS);
		uint32_t ip = 0x7f000000u | (k % 97), uid = k / 97 ? 1000 + k / 97 : UINT32_MAX;
		if (iod_rng_next(&rng) % 2 && model[k]) {
			iod_mesh_clients_release(&t, ip, uid);
			model[k]--;
		} else {
			int rc = iod_mesh_clients_take(&t, ip, uid, 3);
			CHECK_EQ(rc, model[k] < 3 ? 0 : -EBUSY);
			model[k] += rc == 0;
		}
		if (step % 50000 == 0)
			for (uint32_t j = 0; j < KEYS; j++)
				CHECK_EQ(
				    iod_mesh_clients_count(&t, 0x7f000000u | (j % 97),
				                           j / 97 ? 1000 + j / 97 : UINT32_MAX),
				    model[j]);
	}
	uint32_t used = 0;
	for (uint32_t j = 0; j < KEYS; j++)
		used += model[j] > 0;
	CHECK_EQ(t.used, used);
	CHECK(t.limited > 0);
	/* a full table refuses a new client, never an existing one */
	memset(&t, 0, sizeof(t));
	for (uint32_t j = 0; j < IOD_MESH_CLIENT_SLOTS / 2; j++)
		CHECK_EQ(iod_mesh_clients_take(&t, j, 0, 8), 0);
	CHECK_EQ(iod_mesh_clients_take(&t, 0xffffffffu, 0, 8), -EBUSY);
	CHECK_EQ(iod_mesh_clients_take(&t, 5, 0, 8), 0);
	CHECK_EQ(iod_mesh_clients_count(&t, 5, 0), 2u);
}

/* Standalone configs: endpoints behind another proxy ("mtls"), callers by
 * uid and policies (what the API source reads from Endpoints and Policy
 * objects); re-parsing replaces them. */
TEST(config_mtls_callers_policies)
{
	struct iod_mesh_registry r;
	struct iod_err e = {0};
	const char *ok =
	    "{\"callers\":[{\"uid\":40002,\"service\":\"b\",\"tenant\":\"red\"},"
	    "{\"uid\":40001,\"service\":\"a\"}],"
	    "\"policies\":[{\"name\":\"p\",\"from\":\"red/b\",\"to\":\"web\",\"action\":\"deny\"}],"
	    "\"services\":[{\"name\":\"web\",\"port\":80,\"endpoints\":[{\"addr\":\"10.0.0.5:80\","
	    "\"node\":\"n2\",\"mtls\":\"10.0.0.2:15008\"}]}]}";
	CHECK_EQ(iod_mesh_registry_init(&r, 0), 0);
	CHECK_EQ(iod_mesh_config_parse(ok, strlen(ok), &r, &e), 0);
	CHECK(r.authz);
	CHECK_EQ(r.callers_n, 2u);
	CHECK_EQ(r.callers[0].uid, 40001u); /* sorted for lookups */
	CHECK_STR(r.callers[0].tenant, "default");
	CHECK_STR(iod_mesh_caller_find(&r, 40002)->tenant, "red");
	CHECK(!iod_mesh_caller_find(&r, 7));
	CHECK(r.policies && r.policies->n == 1);
	struct iod_sec_verdict v;
	iod_mesh_authz_decide(&r, true, 40002, &r.svcs[0], "GET", &v);
	CHECK(!v.allow);
	CHECK_STR(v.policy, "p");
	CHECK_EQ(r.svcs[0].eps[0].mtls_ip4, 0x0a000002u);
	CHECK_EQ(r.svcs[0].eps[0].mtls_port, 15008);
	const char *plain = "{\"services\":[{\"name\":\"web\",\"port\":80}]}";
	CHECK_EQ(iod_mesh_config_parse(plain, strlen(plain), &r, &e), 0);
	CHECK(!r.authz && !r.callers_n && !r.policies);
	const char *bad[] = {
	    "{\"callers\":[{\"uid\":0,\"service\":\"a\"}],\"services\":[]}",
	    "{\"callers\":[{\"uid\":5,\"service\":\"a\"},{\"uid\":5,\"service\":\"b\"}],"
	    "\"services\":[]}",
	    "{\"policies\":[{\"from\":\"a\"}],\"services\":[]}",
	    "{\"services\":[{\"name\":\"a\",\"port\":1,\"endpoints\":[{\"addr\":\"1.2.3.4:5\","
	    "\"mtls\":\"x\"}]}]}",
	};
	const char *want[] = {"callers[0]", "twice", "policies", "mtls must be"};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		memset(&e, 0, sizeof(e));
		CHECK_MSG(iod_mesh_config_parse(bad[i], strlen(bad[i]), &r, &e) < 0, "accepted %s",
		          bad[i]);
		CHECK_CONTAINS(e.msg, want[i]);
	}
	iod_mesh_registry_free(&r);
}

TEST(registry_vips_env_and_order)
{
	struct iod_mesh_registry r;
	struct iod_mesh_service *s = svc_new(0, IOD_MESH_LB_ROUND_ROBIN);
	struct iod_err e = {0};
	char env[64];
	CHECK_EQ(iod_mesh_registry_init(&r, 4), 0);
	const char *names[] = {"param-server", "worker", "api", "db"};
	for (int i = 0; i < 4; i++) {
		snprintf(s->name, sizeof(s->name), "%s", names[i]);
		CHECK_EQ(iod_mesh_registry_add(&r, s, &e), 0);
	}
	CHECK_EQ(iod_mesh_registry_add(&r, s, &e), -ENOSPC);
	CHECK_STR(r.svcs[0].name, "api");
	CHECK_STR(r.svcs[3].name, "worker");
	iod_mesh_registry_assign_vips(&r);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(r.svcs[i].vip4 >> 24, 127);
		CHECK((r.svcs[i].vip4 & 255) != 0 && (r.svcs[i].vip4 & 255) != 255);
		for (int j = 0; j < i; j++)
			CHECK(r.svcs[i].vip4 != r.svcs[j].vip4);
	}
	/* Stable: a name's VIP does not depend on the others. */
	CHECK_U64(iod_mesh_registry_find(&r, "worker")->vip4, iod_mesh_vip_for("worker"));
	CHECK(iod_mesh_registry_find(&r, "nope") == NULL);
	CHECK_EQ(iod_mesh_env_name("param-server", env, sizeof(env)), 0);
	CHECK_STR(env, "IOD_SVC_PARAM_SERVER_ADDR");
	CHECK_EQ(iod_mesh_env_name("x", env, 8), -ENOSPC);
	iod_mesh_registry_free(&r);
	free(s);
}

TEST(config_parse_and_errors)
{
	struct iod_mesh_registry r;
	struct iod_err e = {0};
	const char *ok =
	    "{\"node\":\"n1\",\"rack\":\"r1\",\"services\":[{\"name\":\"web\",\"port\":80,"
	    "\"mode\":\"http\",\"lb\":\"maglev\",\"outlier\":{\"consecutive_5xx\":3,"
	    "\"base_ejection_time\":\"2s\",\"max_ejection_percent\":\"50%\"},"
	    "\"retry\":{\"max_per_request\":3,\"backoff_base\":\"1ms\"},"
	    "\"endpoints\":[{\"addr\":\"127.0.0.1:8080\",\"node\":\"n1\"},"
	    "{\"addr\":\"127.0.0.2:8080\",\"weight\":3,\"healthy\":false}]},"
	    "{\"name\":\"db\",\"port\":5432,\"mode\":\"tcp\",\"vip\":\"127.1.2.3\"}]}";
	CHECK_EQ(iod_mesh_registry_init(&r, 0), 0);
	CHECK_EQ(iod_mesh_config_parse(ok, strlen(ok), &r, &e), 0);
	CHECK_EQ(r.svcs_n, 2);
	CHECK_STR(r.node, "n1");
	struct iod_mesh_service *w = iod_mesh_registry_find(&r, "web");
	CHECK(w && w->lb == IOD_MESH_LB_MAGLEV && w->eps_n == 2);
	CHECK_EQ(w->outlier.consecutive_5xx, 3);
	CHECK_U64(w->outlier.base_ejection_ns, 2 * IOD_NS_PER_S);
	CHECK_EQ(w->outlier.max_ejection_bp, 5000);
	CHECK_EQ(w->outlier.panic_bp, 5000); /* default kept */
	CHECK_U64(w->retry.backoff_base_ns, IOD_NS_PER_MS);
	CHECK_EQ(w->eps[1].weight, 3);
	CHECK(!w->eps[1].healthy);
	CHECK_EQ(w->eps[0].ip4, 0x7f000001);
	CHECK_STR(w->eps[0].id, "127.0.0.1:8080");
	CHECK_U64(iod_mesh_registry_find(&r, "db")->vip4, 0x7f010203);
	CHECK_EQ(iod_mesh_registry_find(&r, "db")->mode, IOD_MESH_MODE_TCP);

	struct {
		const char *text, *want;
	} bad[] = {
	    {"[]", "JSON object"},
	    {"{\"services\":[{\"name\":\"a b\",\"port\":1}]}", "services[0]: name"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":0}]}", "service a: port"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":1,\"lb\":\"fastest\"}]}", "lb must be"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":1,\"endpoints\":[{\"addr\":\"x\"}]}]}",
	     "service a endpoint 0: addr"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":1,\"vip\":\"10.0.0.1\"}]}", "127.x.y.z"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":1,\"outlier\":{\"interval\":5}}]}",
	     "interval must be a duration"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":1},{\"name\":\"a\",\"port\":2}]}",
	     "defined twice"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":1,\"vip\":\"127.0.0.9\"},"
	     "{\"name\":\"b\",\"port\":1,\"vip\":\"127.0.0.9\"}]}",
	     "same vip"},
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		memset(&e, 0, sizeof(e));
		CHECK_MSG(iod_mesh_config_parse(bad[i].text, strlen(bad[i].text), &r, &e) < 0,
		          "accepted %s", bad[i].text);
		CHECK_CONTAINS(e.msg, bad[i].want);
	}
	iod_mesh_registry_free(&r);
}

/* The receiving proxy's policy decision from a caller's socket uid. */
TEST(authz_callers_by_uid_and_policies)
{
	struct iod_mesh_registry r;
	struct iod_mesh_caller callers[3] = {
	    {.uid = 1000, .service = "caller", .tenant = "default"},
	    {.uid = 2000, .service = "other", .tenant = "default"},
	    {.uid = 3000, .service = "intruder", .tenant = "acme"}};
	struct iod_sec_policy_set set = {0};
	struct iod_mesh_service to;
	struct iod_sec_verdict v;
	struct iod_err e = {0};

	memset(&r, 0, sizeof(r));
	memset(&to, 0, sizeof(to));
	snprintf(to.name, sizeof(to.name), "backend");
	to.port = 8080;
	r.authz = true;
	r.callers = callers;
	r.callers_n = 3;
	/* no policy: within a tenant allowed, across denied, the node's own processes allowed */
	iod_mesh_authz_decide(&r, true, 1000, &to, "GET", &v);
	CHECK(v.allow);
	CHECK_STR(v.policy, "default-same-tenant");
	iod_mesh_authz_decide(&r, true, 3000, &to, "GET", &v);
	CHECK(!v.allow);
	CHECK_STR(v.policy, "default-cross-tenant");
	iod_mesh_authz_decide(&r, true, 4242, &to, "GET", &v);
	CHECK(v.allow);
	CHECK_STR(v.policy, "default-node");
	iod_mesh_authz_decide(&r, false, 0, &to, NULL, &v);
	CHECK(v.allow);
	/* deny caller -> backend: caller refused naming the policy, other still allowed */
	json_t *j =
	    json_loads("{\"name\": \"no-caller\", \"from\": \"caller\", \"to\": \"backend\", "
	               "\"action\": \"deny\"}",
	               0, NULL);
	CHECK_EQ(iod_sec_policy_parse(j, "default", &set, &e), 0);
	json_decref(j);
	r.policies = &set;
	iod_mesh_authz_decide(&r, true, 1000, &to, "GET", &v);
	CHECK(!v.allow);
	CHECK_STR(v.policy, "no-caller");
	iod_mesh_authz_decide(&r, true, 2000, &to, "POST", &v);
	CHECK(v.allow);
	/* a policy for every caller ("*") reaches the node's own processes too */
	j = json_loads(
	    "{\"name\": \"lockdown\", \"from\": \"*\", \"to\": \"backend\", \"methods\": "
	    "[\"DELETE\"], \"action\": \"deny\"}",
	    0, NULL);
	CHECK_EQ(iod_sec_policy_parse(j, "default", &set, &e), 0);
	json_decref(j);
	iod_mesh_authz_decide(&r, false, 0, &to, "DELETE", &v);
	CHECK(!v.allow);
	CHECK_STR(v.policy, "lockdown");
	iod_mesh_authz_decide(&r, false, 0, &to, "GET", &v);
	CHECK(v.allow);
	/* an allow-listed destination (cross tenant allowed for one caller) */
	j = json_loads("{\"name\": \"acme-in\", \"from\": \"acme/intruder\", \"to\": \"backend\"}",
	               0, NULL);
	CHECK_EQ(iod_sec_policy_parse(j, "default", &set, &e), 0);
	json_decref(j);
	iod_mesh_authz_decide(&r, true, 3000, &to, "GET", &v);
	CHECK(v.allow);
	CHECK_STR(v.policy, "acme-in");
	iod_mesh_authz_decide(&r, true, 2000, &to, "GET", &v);
	CHECK(!v.allow); /* the destination is allow-listed now */
}

/* Injected faults (iod chaos delay|abort service/NAME): shares, deadlines. */
TEST(fault_roll_shares_and_deadlines)
{
	struct iod_mesh_fault f = {0};
	struct iod_rng rng;
	uint64_t d;
	uint16_t a;
	const uint64_t now = 1000 * IOD_NS_PER_S;
	iod_rng_seed(&rng, 7);
	iod_mesh_fault_roll(&f, now, &rng, &d, &a); /* none */
	CHECK(d == 0 && a == 0);
	CHECK(!iod_mesh_fault_active(&f, now));
	/* 100% delay until now+1s: every request, then none */
	f.delay_pct = 100;
	f.delay_ns = 200 * IOD_NS_PER_MS;
	f.delay_until_ns = now + IOD_NS_PER_S;
	for (int i = 0; i < 100; i++) {
		iod_mesh_fault_roll(&f, now, &rng, &d, &a);
		CHECK_U64(d, 200 * IOD_NS_PER_MS);
		CHECK_EQ(a, 0);
	}
	CHECK(iod_mesh_fault_active(&f, now + IOD_NS_PER_S - 1));
	CHECK(!iod_mesh_fault_active(&f, now + IOD_NS_PER_S));
	iod_mesh_fault_roll(&f, now + IOD_NS_PER_S, &rng, &d, &a);
	CHECK(d == 0 && a == 0);
	/* 30% abort with no end (a static config), beside the delay */
	f.abort_pct = 30;
	f.abort_status = 503;
	f.abort_until_ns = 0;
	uint32_t aborted = 0, both = 0;
	for (int i = 0; i < 10000; i++) {
		iod_mesh_fault_roll(&f, now, &rng, &d, &a);
		aborted += a == 503;
		both += a && d;
		CHECK(a == 0 || a == 503);
	}
	CHECK_MSG(aborted > 2800 && aborted < 3200, "aborted %u of 10000 at 30%%", aborted);
	CHECK_EQ(both, aborted); /* the delay hits all of them: aborts come after it */
	iod_mesh_fault_roll(&f, now + 10 * IOD_NS_PER_S, &rng, &d, &a);
	CHECK_EQ(d, 0); /* the delay ended; the abort has no end */
	CHECK(iod_mesh_fault_active(&f, UINT64_MAX));
	/* a share of 0 is off whatever else is set */
	f.abort_pct = 0;
	iod_mesh_fault_roll(&f, now + 10 * IOD_NS_PER_S, &rng, &d, &a);
	CHECK_EQ(a, 0);
}

TEST(config_fault_parse_and_errors)
{
	struct iod_mesh_registry r;
	struct iod_err e = {0};
	const char *ok = "{\"services\":[{\"name\":\"web\",\"port\":80,\"mode\":\"http\","
	                 "\"fault\":{\"delay\":{\"percent\":25,\"ms\":150},"
	                 "\"abort\":{\"status\":429}}}]}";
	CHECK_EQ(iod_mesh_registry_init(&r, 0), 0);
	CHECK_EQ(iod_mesh_config_parse(ok, strlen(ok), &r, &e), 0);
	const struct iod_mesh_fault *f = &iod_mesh_registry_find(&r, "web")->fault;
	CHECK_EQ(f->delay_pct, 25);
	CHECK_U64(f->delay_ns, 150 * IOD_NS_PER_MS);
	CHECK_EQ(f->abort_pct, 100); /* the default share */
	CHECK_EQ(f->abort_status, 429);
	CHECK_U64(f->delay_until_ns, 0);
	const char *bad[][2] = {
	    {"{\"services\":[{\"name\":\"a\",\"port\":1,\"fault\":[]}]}", "fault must be"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":1,\"fault\":{\"delay\":{}}}]}",
	     "fault.delay needs ms"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":1,\"fault\":{\"abort\":{\"status\":99}}}]}",
	     "fault.abort needs status"},
	    {"{\"services\":[{\"name\":\"a\",\"port\":1,\"fault\":{\"abort\":{\"status\":503,"
	     "\"percent\":101}}}]}",
	     "percent must be an integer 0..100"},
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		memset(&e, 0, sizeof(e));
		CHECK_MSG(iod_mesh_config_parse(bad[i][0], strlen(bad[i][0]), &r, &e) < 0,
		          "accepted %s", bad[i][0]);
		CHECK_CONTAINS(e.msg, bad[i][1]);
	}
	iod_mesh_registry_free(&r);
}

/* `iod revoke` reaches the mesh: a revoked node's certificate, a revoked
 * service's SVID and every SVID issued to a revoked node (its OU) are
 * refused as mTLS peers; others are not. */
TEST(mtls_peers_refused_by_revocation)
{
	struct iod_mesh_registry r;
	struct iod_sec_cert_info node2, svid, svid_n1, svid_old, other;
	char why[160] = "";
	CHECK_EQ(iod_mesh_registry_init(&r, 4), 0);
	memset(&node2, 0, sizeof(node2));
	node2.id.kind = IOD_SEC_KIND_NODE;
	snprintf(node2.id.name, sizeof(node2.id.name), "node-2");
	memset(&svid, 0, sizeof(svid));
	svid.id.kind = IOD_SEC_KIND_SERVICE;
	snprintf(svid.id.tenant, sizeof(svid.id.tenant), "blue");
	snprintf(svid.id.name, sizeof(svid.id.name), "web");
	snprintf(svid.node, sizeof(svid.node), "node-2");
	svid_n1 = svid;
	snprintf(svid_n1.node, sizeof(svid_n1.node), "node-1");
	svid_old = svid;
	svid_old.node[0] = 0; /* made by hand: no node in it */
	other = svid_n1;
	snprintf(other.id.name, sizeof(other.id.name), "db");
	/* nothing revoked */
	CHECK(!iod_mesh_peer_revoked(&r, &node2, why, sizeof(why)));
	CHECK(!iod_mesh_peer_revoked(&r, &svid, why, sizeof(why)));
	const char *names[] = {"node.node-2", "user.vera"};
	CHECK_EQ(iod_mesh_revoked_set(&r, names, 2), 0);
	CHECK(iod_mesh_peer_revoked(&r, &node2, why, sizeof(why)));
	CHECK_CONTAINS(why, "node.node-2");
	CHECK(iod_mesh_peer_revoked(&r, &svid, why, sizeof(why)));
	CHECK_CONTAINS(why, "issued to node node-2");
	CHECK(!iod_mesh_peer_revoked(&r, &svid_n1, why, sizeof(why)));
	CHECK(!iod_mesh_peer_revoked(&r, &svid_old, why, sizeof(why)));
	/* the service itself, wherever its SVID was issued */
	const char *names2[] = {"service.blue.web"};
	CHECK_EQ(iod_mesh_revoked_set(&r, names2, 1), 0);
	CHECK(iod_mesh_peer_revoked(&r, &svid_n1, why, sizeof(why)));
	CHECK(iod_mesh_peer_revoked(&r, &svid_old, why, sizeof(why)));
	CHECK_CONTAINS(why, "service.blue.web");
	CHECK(!iod_mesh_peer_revoked(&r, &other, why, sizeof(why)));
	CHECK(!iod_mesh_peer_revoked(&r, &node2, why, sizeof(why)));
	/* the standalone config names them the same way */
	const char *cfg = "{\"revocations\": [\"node.node-1\"], \"services\": []}";
	struct iod_err e = {0};
	CHECK_MSG(iod_mesh_config_parse(cfg, strlen(cfg), &r, &e) == 0, "%s", e.msg);
	CHECK_U64(r.revoked_n, 1);
	CHECK(iod_mesh_peer_revoked(&r, &other, why, sizeof(why)));
	CHECK(!iod_mesh_peer_revoked(&r, &svid, why, sizeof(why)));
	iod_mesh_registry_free(&r);
}

/* A revoked service's replicas are refused by their own node's proxy too
 * (not only at the mTLS hop): the caller's uid names it. */
TEST(authz_revoked_caller_is_denied)
{
	struct iod_mesh_registry r;
	struct iod_mesh_caller callers[2] = {
	    {.uid = 1000, .service = "caller", .tenant = ""},
	    {.uid = 2000, .service = "other", .tenant = "default"}};
	struct iod_mesh_service to;
	struct iod_sec_verdict v;
	memset(&r, 0, sizeof(r));
	memset(&to, 0, sizeof(to));
	snprintf(to.name, sizeof(to.name), "backend");
	r.authz = true;
	r.callers = callers;
	r.callers_n = 2;
	const char *names[] = {"service.default.caller"};
	CHECK_EQ(iod_mesh_revoked_set(&r, names, 1), 0);
	iod_mesh_authz_decide(&r, true, 1000, &to, "GET", &v);
	CHECK(!v.allow);
	CHECK_STR(v.policy, "revoked");
	CHECK_CONTAINS(v.reason, "default/caller is revoked");
	iod_mesh_authz_decide(&r, true, 2000, &to, "GET", &v);
	CHECK(v.allow);
	/* the node's own processes are no service: not revoked by it */
	iod_mesh_authz_decide(&r, true, 4242, &to, "GET", &v);
	CHECK(v.allow);
	free(r.revoked);
}

/* service_mesh.transport (issue 22 steps 4-5): the spec's value wins over
 * the cluster's, which wins over tcp; a hop runs shm (AF_UNIX) only when it
 * stays on this node and its far end takes AF_UNIX; rdma, device or not,
 * runs tcp across nodes (the proxy has no RDMA path) and shm on one. */
TEST(transport_choice_default_override_capability)
{
	enum iod_mesh_tp_want w;
	CHECK_EQ(iod_mesh_tp_want_parse("shm", &w), 0);
	CHECK_EQ(w, IOD_MESH_TP_SHM);
	CHECK_EQ(iod_mesh_tp_want_parse("", &w), 0);
	CHECK_EQ(w, IOD_MESH_TP_UNSET);
	CHECK_EQ(iod_mesh_tp_want_parse(NULL, &w), 0);
	CHECK_EQ(iod_mesh_tp_want_parse("udp", &w), -EINVAL);
	for (int i = IOD_MESH_TP_TCP; i <= IOD_MESH_TP_AUTO; i++) {
		CHECK_EQ(
		    iod_mesh_tp_want_parse(iod_mesh_tp_want_name((enum iod_mesh_tp_want)i), &w), 0);
		CHECK_EQ((int)w, i);
	}

	/* the cluster's value is the default; a service's own wins */
	CHECK_EQ(iod_mesh_tp_effective(IOD_MESH_TP_UNSET, IOD_MESH_TP_UNSET), IOD_MESH_TP_TCP);
	CHECK_EQ(iod_mesh_tp_effective(IOD_MESH_TP_UNSET, IOD_MESH_TP_SHM), IOD_MESH_TP_SHM);
	CHECK_EQ(iod_mesh_tp_effective(IOD_MESH_TP_TCP, IOD_MESH_TP_SHM), IOD_MESH_TP_TCP);
	CHECK_EQ(iod_mesh_tp_effective(IOD_MESH_TP_SHM, IOD_MESH_TP_TCP), IOD_MESH_TP_SHM);
	CHECK_EQ(iod_mesh_tp_effective(IOD_MESH_TP_AUTO, IOD_MESH_TP_UNSET), IOD_MESH_TP_AUTO);

	const char *why;
	struct iod_mesh_hop local = {.same_node = true, .unix_ok = true};
	struct iod_mesh_hop local_no_unix = {.same_node = true, .unix_ok = false};
	struct iod_mesh_hop remote = {.same_node = false, .unix_ok = true};
	struct iod_mesh_hop remote_rdma = {
	    .same_node = false, .unix_ok = true, .rdma_device = true};
	CHECK_EQ(iod_mesh_tp_pick(IOD_MESH_TP_TCP, &local, &why), IOD_MESH_PATH_TCP);
	CHECK_EQ(iod_mesh_tp_pick(IOD_MESH_TP_UNSET, &local, NULL), IOD_MESH_PATH_TCP);
	CHECK_EQ(iod_mesh_tp_pick(IOD_MESH_TP_SHM, &local, &why), IOD_MESH_PATH_SHM);
	CHECK(strstr(why, "AF_UNIX"));
	CHECK_EQ(iod_mesh_tp_pick(IOD_MESH_TP_AUTO, &local, NULL), IOD_MESH_PATH_SHM);
	CHECK_EQ(iod_mesh_tp_pick(IOD_MESH_TP_RDMA, &local, NULL), IOD_MESH_PATH_SHM);
	CHECK_EQ(iod_mesh_tp_pick(IOD_MESH_TP_SHM, &local_no_unix, &why), IOD_MESH_PATH_TCP);
	CHECK(strstr(why, "no AF_UNIX"));
	CHECK_EQ(iod_mesh_tp_pick(IOD_MESH_TP_SHM, &remote, &why), IOD_MESH_PATH_TCP);
	CHECK_EQ(iod_mesh_tp_pick(IOD_MESH_TP_RDMA, &remote, &why), IOD_MESH_PATH_TCP);
	CHECK_EQ(iod_mesh_tp_pick(IOD_MESH_TP_RDMA, &remote_rdma, &why), IOD_MESH_PATH_TCP);
	CHECK(strstr(why, "no RDMA path"));
	CHECK_STR(iod_mesh_tp_path_name(IOD_MESH_PATH_SHM), "shm");
	CHECK_STR(iod_mesh_tp_path_name(IOD_MESH_PATH_TCP), "tcp");

	/* a standalone config names it per service; a bad value is refused */
	struct iod_mesh_registry r;
	struct iod_err e = {0};
	const char *ok = "{\"services\":[{\"name\":\"web\",\"port\":80,\"transport\":\"shm\"},"
	                 "{\"name\":\"db\",\"port\":81}]}";
	CHECK_EQ(iod_mesh_registry_init(&r, 0), 0);
	CHECK_EQ(iod_mesh_config_parse(ok, strlen(ok), &r, &e), 0);
	CHECK_EQ(iod_mesh_registry_find(&r, "web")->transport, IOD_MESH_TP_SHM);
	CHECK_EQ(iod_mesh_registry_find(&r, "db")->transport, IOD_MESH_TP_UNSET);
	const char *bad = "{\"services\":[{\"name\":\"web\",\"port\":80,\"transport\":\"udp\"}]}";
	CHECK(iod_mesh_config_parse(bad, strlen(bad), &r, &e) < 0);
	CHECK(strstr(e.msg, "transport must be"));
	iod_mesh_registry_free(&r);
}
