/*
 * test_agent_reconcile.c: the agent's pure core with a hand-advanced clock:
 * phases, restarts with exponential backoff, health thresholds, liveness
 * restarts, graceful stop then kill, removal, capacity limits, and the
 * manifest parser.
 */
#include "harness.h"
#include "iod/agent_run.h"

#include <stdlib.h>

#define MS IOD_NS_PER_MS

static struct iod_agent_replica mk(const char *name, enum iod_health_kind kind)
{
	struct iod_agent_replica r;
	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "%s", name);
	snprintf(r.service, sizeof(r.service), "svc");
	r.numa_node = -1;
	r.restart = IOD_RESTART_ALWAYS;
	iod_agent_replica_add_arg(&r, "/bin/true");
	r.health.kind = kind;
	r.health.interval_ns = 10 * MS;
	r.health.timeout_ns = 5 * MS;
	r.health.healthy_threshold = 2;
	r.health.unhealthy_threshold = 2;
	return r;
}

static struct iod_agent_rec *rec_new(void)
{
	struct iod_agent_rec_config c;
	struct iod_agent_rec *r = NULL;
	iod_agent_rec_config_default(&c);
	c.backoff_base_ns = 100 * MS;
	c.backoff_max_ns = 800 * MS;
	c.backoff_reset_ns = 10000 * MS;
	c.stop_grace_ns = 1000 * MS;
	c.liveness_failures = 2;
	c.startup_grace_ns = 0;
	if (iod_agent_rec_new(&c, 4, &r))
		return NULL;
	return r;
}

/* Run one step; count actions of a kind (for name, or any when NULL). */
struct stepped {
	struct iod_agent_action a[IOD_AGENT_ACTIONS_MAX];
	uint32_t n;
	uint64_t next;
};
static void step(struct iod_agent_rec *r, uint64_t now, struct stepped *s)
{
	iod_agent_rec_step(r, now, s->a, IOD_AGENT_ACTIONS_MAX, &s->n, &s->next);
}
static int count(const struct stepped *s, enum iod_agent_action_kind k)
{
	int c = 0;
	for (uint32_t i = 0; i < s->n; i++)
		c += s->a[i].kind == k;
	return c;
}
static const struct iod_agent_action *report(const struct stepped *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->a[i].kind == IOD_AGENT_ACT_REPORT)
			return &s->a[i];
	return NULL;
}

TEST(start_to_running_without_check)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w = mk("a-0", IOD_HEALTH_NONE);
	struct stepped s;
	CHECK(r);
	CHECK_EQ(iod_agent_rec_set_desired(r, &w, 1, 0, NULL), 0);
	step(r, 0, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 1);
	CHECK_EQ(report(&s)->phase, IOD_AGENT_STARTING);
	CHECK_EQ(iod_agent_rec_on_started(r, "a-0", 1 * MS), 0);
	step(r, 1 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 0);
	CHECK_EQ(report(&s)->phase, IOD_AGENT_RUNNING);
	CHECK(report(&s)->ready);
	CHECK_U64(s.next, UINT64_MAX); /* nothing to wait for */
	/* No change, no report. */
	step(r, 2 * MS, &s);
	CHECK_EQ(s.n, 0);
	iod_agent_rec_free(r);
}

TEST(health_thresholds_and_ready)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w = mk("a-0", IOD_HEALTH_TCP);
	struct stepped s;
	CHECK(r);
	iod_agent_rec_set_desired(r, &w, 1, 0, NULL);
	step(r, 0, &s);
	iod_agent_rec_on_started(r, "a-0", 0);
	step(r, 0, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_PROBE), 1);
	CHECK(!report(&s)->ready);
	/* While a probe is in flight no second one is issued. */
	step(r, 50 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_PROBE), 0);
	iod_agent_rec_on_probe(r, "a-0", true, NULL, 1 * MS);
	step(r, 1 * MS, &s);
	CHECK_EQ(s.n, 0); /* one pass of two: still running, not ready */
	CHECK_U64(s.next, 11 * MS);
	step(r, 11 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_PROBE), 1);
	iod_agent_rec_on_probe(r, "a-0", true, NULL, 11 * MS);
	step(r, 11 * MS, &s);
	CHECK_EQ(report(&s)->phase, IOD_AGENT_HEALTHY);
	CHECK(report(&s)->ready);
	/* One failure is tolerated, the second marks unhealthy. */
	step(r, 21 * MS, &s);
	iod_agent_rec_on_probe(r, "a-0", false, "connection refused", 21 * MS);
	step(r, 21 * MS, &s);
	CHECK(report(&s) == NULL);
	step(r, 31 * MS, &s);
	iod_agent_rec_on_probe(r, "a-0", false, "connection refused", 31 * MS);
	step(r, 31 * MS, &s);
	CHECK_EQ(report(&s)->phase, IOD_AGENT_UNHEALTHY);
	CHECK(!report(&s)->ready);
	CHECK_CONTAINS(report(&s)->reason, "connection refused");
	/* Recovery. */
	for (uint64_t t = 41; t <= 51; t += 10) {
		step(r, t * MS, &s);
		iod_agent_rec_on_probe(r, "a-0", true, NULL, t * MS);
	}
	step(r, 51 * MS, &s);
	CHECK_EQ(report(&s)->phase, IOD_AGENT_HEALTHY);
	iod_agent_rec_free(r);
}

TEST(liveness_failure_restarts)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w = mk("a-0", IOD_HEALTH_HTTP);
	struct stepped s;
	uint64_t t = 0;
	CHECK(r);
	iod_agent_rec_set_desired(r, &w, 1, 0, NULL);
	step(r, 0, &s);
	iod_agent_rec_on_started(r, "a-0", 0);
	/* unhealthy after 2, restart after 2 more (liveness_failures). */
	for (int i = 0; i < 4; i++, t += 10) {
		step(r, t * MS, &s);
		CHECK_EQ(count(&s, IOD_AGENT_ACT_PROBE), 1);
		iod_agent_rec_on_probe(r, "a-0", false, "HTTP 500", t * MS);
	}
	step(r, t * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_STOP), 1);
	CHECK_EQ(report(&s)->phase, IOD_AGENT_STOPPING);
	CHECK_CONTAINS(report(&s)->reason, "liveness");
	iod_agent_rec_on_exited(r, "a-0", 0, 15, t * MS);
	step(r, t * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 1);
	CHECK_EQ(report(&s)->restarts, 1);
	iod_agent_rec_free(r);
}

TEST(startup_grace_waits_for_first_pass)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w = mk("slow-0", IOD_HEALTH_TCP);
	struct stepped s;
	CHECK(r);
	/* rec_new() has no grace: make one of 100 ms for this test */
	struct iod_agent_rec_config c;
	iod_agent_rec_config_default(&c);
	c.startup_grace_ns = 100 * MS;
	c.liveness_failures = 1;
	iod_agent_rec_free(r);
	CHECK_EQ(iod_agent_rec_new(&c, 2, &r), 0);
	iod_agent_rec_set_desired(r, &w, 1, 0, NULL);
	step(r, 0, &s);
	iod_agent_rec_on_started(r, "slow-0", 0);
	for (uint64_t t = 0; t < 100; t += 10) {
		step(r, t * MS, &s);
		CHECK_EQ(count(&s, IOD_AGENT_ACT_STOP), 0);
		iod_agent_rec_on_probe(r, "slow-0", false, "refused", t * MS);
	}
	step(r, 100 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_STOP), 0);
	const struct iod_agent_slot *sl = iod_agent_rec_slot(r, 0);
	CHECK_EQ(sl->phase, IOD_AGENT_RUNNING);
	CHECK_CONTAINS(sl->reason, "waiting for a passed check");
	/* past the grace, failures count: unhealthy, then a liveness restart */
	iod_agent_rec_on_probe(r, "slow-0", false, "refused", 100 * MS);
	step(r, 110 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_STOP), 1);
	iod_agent_rec_free(r);
}

TEST(crash_restarts_with_exponential_backoff)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w = mk("a-0", IOD_HEALTH_NONE);
	struct stepped s;
	uint64_t t = 0, want_delay[] = {100, 200, 400, 800, 800};
	CHECK(r);
	iod_agent_rec_set_desired(r, &w, 1, 0, NULL);
	step(r, 0, &s);
	for (unsigned i = 0; i < IOD_ARRAY_LEN(want_delay); i++) {
		iod_agent_rec_on_started(r, "a-0", t * MS);
		t += 5;
		iod_agent_rec_on_exited(r, "a-0", 1, 0, t * MS);
		step(r, t * MS, &s);
		CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 0);
		CHECK_EQ(report(&s)->phase, IOD_AGENT_FAILED);
		CHECK(!report(&s)->ready);
		CHECK_CONTAINS(report(&s)->reason, "exit status 1");
		CHECK_U64(s.next, (t + want_delay[i]) * MS);
		step(r, (t + want_delay[i]) * MS - 1, &s);
		CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 0);
		t += want_delay[i];
		step(r, t * MS, &s);
		CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 1);
		CHECK_EQ(report(&s)->restarts, i + 1);
	}
	/* A long run resets the delay to base. */
	iod_agent_rec_on_started(r, "a-0", t * MS);
	t += 20000;
	iod_agent_rec_on_exited(r, "a-0", 0, 9, t * MS);
	step(r, t * MS, &s);
	CHECK_U64(s.next, (t + 100) * MS);
	CHECK_CONTAINS(report(&s)->reason, "signal 9");
	iod_agent_rec_free(r);
}

TEST(restart_policies)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w[2] = {mk("never-0", IOD_HEALTH_NONE),
	                                 mk("onfail-0", IOD_HEALTH_NONE)};
	struct stepped s;
	CHECK(r);
	w[0].restart = IOD_RESTART_NEVER;
	w[1].restart = IOD_RESTART_ON_FAILURE;
	iod_agent_rec_set_desired(r, w, 2, 0, NULL);
	step(r, 0, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 2);
	iod_agent_rec_on_started(r, "never-0", 0);
	iod_agent_rec_on_started(r, "onfail-0", 0);
	iod_agent_rec_on_exited(r, "never-0", 3, 0, MS);
	iod_agent_rec_on_exited(r, "onfail-0", 0, 0, MS);
	step(r, MS, &s);
	CHECK_EQ(s.n, 2);
	CHECK_EQ(s.a[0].phase, IOD_AGENT_FAILED);
	CHECK_EQ(s.a[1].phase, IOD_AGENT_EXITED);
	CHECK_CONTAINS(s.a[1].reason, "keeps it down");
	CHECK_U64(s.next, UINT64_MAX);
	step(r, 10000 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 0);
	iod_agent_rec_free(r);
}

TEST(removal_stops_then_kills_then_forgets)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w = mk("a-0", IOD_HEALTH_NONE);
	struct stepped s;
	CHECK(r);
	iod_agent_rec_set_desired(r, &w, 1, 0, NULL);
	step(r, 0, &s);
	iod_agent_rec_on_started(r, "a-0", 0);
	step(r, 0, &s);
	CHECK_EQ(iod_agent_rec_set_desired(r, NULL, 0, 10 * MS, NULL), 0);
	step(r, 10 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_STOP), 1);
	CHECK_EQ(report(&s)->phase, IOD_AGENT_STOPPING);
	CHECK_U64(s.next, 1010 * MS);
	step(r, 500 * MS, &s);
	CHECK_EQ(s.n, 0);
	step(r, 1010 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_KILL), 1);
	step(r, 1020 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_KILL), 0); /* once */
	iod_agent_rec_on_exited(r, "a-0", 0, 9, 1030 * MS);
	step(r, 1030 * MS, &s);
	CHECK_EQ(report(&s)->phase, IOD_AGENT_EXITED);
	CHECK(report(&s)->removed);
	CHECK_EQ(iod_agent_rec_find(r, "a-0"), -ENOENT);
	CHECK_EQ(iod_agent_rec_on_exited(r, "a-0", 0, 0, 0), -ENOENT);
	iod_agent_rec_free(r);
}

/* A replica removed from this node and placed on it again while its old
 * process is still stopping (move_netns.sh: a frozen node resumes and
 * stops the replicas that moved away; the next move brings one back
 * within the stop): when the old process exits, it starts again at once.
 * Before, the stop's "no restart" stood and the replica stayed exited on
 * the node it was placed on, never answering. */
TEST(placed_again_while_stopping_starts_again)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w = mk("a-0", IOD_HEALTH_NONE);
	struct stepped s;
	CHECK(r);
	iod_agent_rec_set_desired(r, &w, 1, 0, NULL);
	step(r, 0, &s);
	iod_agent_rec_on_started(r, "a-0", 0);
	step(r, 0, &s);
	CHECK_EQ(iod_agent_rec_set_desired(r, NULL, 0, 10 * MS, NULL), 0);
	step(r, 10 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_STOP), 1);
	/* back before it exited: the same generation */
	CHECK_EQ(iod_agent_rec_set_desired(r, &w, 1, 20 * MS, NULL), 0);
	step(r, 20 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 0); /* the old one still runs */
	iod_agent_rec_on_exited(r, "a-0", 0, 15, 30 * MS);
	step(r, 30 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 1);
	CHECK(!report(&s) || !report(&s)->removed);
	const struct iod_agent_slot *sl =
	    iod_agent_rec_slot(r, (uint32_t)iod_agent_rec_find(r, "a-0"));
	CHECK(sl && sl->desired);
	iod_agent_rec_free(r);
}

/* The same when the old process exited before the step forgot its slot. */
TEST(placed_again_after_its_stop_starts_again)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w = mk("a-0", IOD_HEALTH_NONE);
	struct stepped s;
	CHECK(r);
	iod_agent_rec_set_desired(r, &w, 1, 0, NULL);
	step(r, 0, &s);
	iod_agent_rec_on_started(r, "a-0", 0);
	step(r, 0, &s);
	iod_agent_rec_set_desired(r, NULL, 0, 10 * MS, NULL);
	step(r, 10 * MS, &s);
	iod_agent_rec_on_exited(r, "a-0", 0, 15, 20 * MS);
	CHECK_EQ(iod_agent_rec_set_desired(r, &w, 1, 25 * MS, NULL), 0);
	step(r, 30 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 1);
	CHECK(!report(&s) || !report(&s)->removed);
	iod_agent_rec_free(r);
}

TEST(new_generation_recreates)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w = mk("a-0", IOD_HEALTH_NONE);
	struct stepped s;
	CHECK(r);
	iod_agent_rec_set_desired(r, &w, 1, 0, NULL);
	step(r, 0, &s);
	iod_agent_rec_on_started(r, "a-0", 0);
	w.generation = 2;
	iod_agent_rec_set_desired(r, &w, 1, MS, NULL);
	step(r, MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_STOP), 1);
	iod_agent_rec_on_exited(r, "a-0", 0, 15, 2 * MS);
	step(r, 2 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 1);
	CHECK_U64(iod_agent_rec_slot(r, (uint32_t)iod_agent_rec_find(r, "a-0"))->want.generation,
	          2);
	iod_agent_rec_free(r);
}

TEST(capacity_and_duplicates_are_errors)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w[5];
	struct iod_err e = {0};
	struct stepped s;
	CHECK(r);
	for (int i = 0; i < 5; i++) {
		char n[16];
		snprintf(n, sizeof(n), "a-%d", i);
		w[i] = mk(n, IOD_HEALTH_NONE);
	}
	/* one replica too many never holds back the others: four are taken,
	 * the fifth waits for a free slot */
	CHECK_EQ(iod_agent_rec_set_desired(r, w, 5, 0, &e), -ENOSPC);
	CHECK_CONTAINS(e.msg, "1 new replicas wait for room");
	CHECK(iod_agent_rec_find(r, "a-0") >= 0);
	CHECK(iod_agent_rec_find(r, "a-3") >= 0);
	CHECK_EQ(iod_agent_rec_find(r, "a-4"), -ENOENT);
	step(r, 0, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 4);
	/* a-0 leaves; once its slot is free, offering the set again takes a-4 */
	CHECK_EQ(iod_agent_rec_set_desired(r, w + 1, 4, MS, &e), -ENOSPC);
	iod_agent_rec_on_start_failed(r, "a-0", "gone", MS);
	step(r, 2 * MS, &s);
	CHECK_EQ(iod_agent_rec_find(r, "a-0"), -ENOENT);
	CHECK_EQ(iod_agent_rec_set_desired(r, w + 1, 4, 2 * MS, &e), 0);
	CHECK(iod_agent_rec_find(r, "a-4") >= 0);
	w[2] = w[1];
	CHECK_EQ(iod_agent_rec_set_desired(r, w + 1, 2, 3 * MS, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "twice");
	iod_agent_rec_free(r);
}

TEST(unbuildable_replica_fails_alone_and_never_starts)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w[2] = {mk("a-0", IOD_HEALTH_NONE), mk("b-0", IOD_HEALTH_NONE)};
	struct stepped s;
	CHECK(r);
	snprintf(w[0].fail, sizeof(w[0].fail), "replica a-0: gpus: bad set \"x\"");
	w[0].argc = 0;
	CHECK_EQ(iod_agent_rec_set_desired(r, w, 2, 0, NULL), 0);
	for (uint64_t t = 0; t < 5000 * MS; t += 100 * MS) {
		step(r, t, &s);
		for (uint32_t i = 0; i < s.n; i++) {
			CHECK_MSG(
			    !(s.a[i].kind == IOD_AGENT_ACT_START && !strcmp(s.a[i].name, "a-0")),
			    "an unbuildable replica was started");
			if (s.a[i].kind == IOD_AGENT_ACT_START)
				iod_agent_rec_on_started(r, s.a[i].name, t);
		}
	}
	const struct iod_agent_slot *a =
	    iod_agent_rec_slot(r, (uint32_t)iod_agent_rec_find(r, "a-0"));
	const struct iod_agent_slot *b =
	    iod_agent_rec_slot(r, (uint32_t)iod_agent_rec_find(r, "b-0"));
	CHECK(a && b);
	CHECK_EQ(a->phase, IOD_AGENT_FAILED);
	CHECK_CONTAINS(a->reason, "gpus: bad set");
	CHECK_EQ(a->restarts, 0);
	CHECK_EQ(b->phase, IOD_AGENT_RUNNING);
	CHECK_EQ(b->restarts, 0);
	/* b-0's service turns unbuildable while it runs: stopped, then failed
	 * with the reason, and not started again */
	snprintf(w[1].fail, sizeof(w[1].fail), "service b does not validate");
	CHECK_EQ(iod_agent_rec_set_desired(r, w, 2, 6000 * MS, NULL), 0);
	step(r, 6000 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_STOP), 1);
	iod_agent_rec_on_exited(r, "b-0", 0, 15, 6001 * MS);
	step(r, 6002 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 0);
	CHECK_EQ(b->phase, IOD_AGENT_FAILED);
	CHECK_CONTAINS(b->reason, "does not validate");
	/* fixed again: it starts */
	w[1].fail[0] = 0;
	CHECK_EQ(iod_agent_rec_set_desired(r, w, 2, 7000 * MS, NULL), 0);
	step(r, 7000 * MS, &s);
	CHECK_EQ(count(&s, IOD_AGENT_ACT_START), 1);
	iod_agent_rec_free(r);
}

TEST(step_bounded_by_max_actions)
{
	struct iod_agent_rec *r = rec_new();
	struct iod_agent_replica w[4];
	struct iod_agent_action a[4];
	uint32_t n;
	uint64_t next;
	CHECK(r);
	for (int i = 0; i < 4; i++) {
		char nm[16];
		snprintf(nm, sizeof(nm), "a-%d", i);
		w[i] = mk(nm, IOD_HEALTH_NONE);
	}
	iod_agent_rec_set_desired(r, w, 4, 0, NULL);
	iod_agent_rec_step(r, 0, a, 4, &n, &next);
	CHECK_EQ(n, 4);
	CHECK_U64(next, 0); /* more due: call again now */
	iod_agent_rec_step(r, 0, a, 4, &n, &next);
	CHECK_EQ(n, 4);
	CHECK_STR(a[0].name, "a-2");
	iod_agent_rec_free(r);
}

TEST(manifest_parse_roundtrip)
{
	const char *text =
	    "{\"replicas\":[{\"name\":\"ps-0\",\"service\":\"ps\",\"ordinal\":0,"
	    "\"type\":\"stateful\",\"command\":[\"iod\",\"demo-worker\"],\"env\":{\"A\":\"1\"},"
	    "\"cpus\":\"0-1\",\"gpus\":\"2,3\",\"numa\":0,\"mem_bytes\":1000000,\"port\":7000,"
	    "\"health\":{\"kind\":\"http\",\"interval_ms\":10,\"unhealthy_threshold\":3}}]}";
	struct iod_agent_replica *r = calloc(2, sizeof(*r));
	uint32_t n = 0;
	struct iod_err e = {0};
	CHECK(r);
	CHECK_EQ(iod_agent_manifest_parse(text, strlen(text), r, 2, &n, &e), 0);
	CHECK_EQ(n, 1);
	CHECK_STR(r[0].name, "ps-0");
	CHECK(r[0].stateful);
	CHECK_EQ(r[0].argc, 2);
	CHECK_STR(iod_agent_strv_at(r[0].argv_buf, sizeof(r[0].argv_buf), 2, 1), "demo-worker");
	CHECK_STR(r[0].env_buf, "A=1");
	CHECK(iod_bitmap_test(&r[0].gpus, 3) && !iod_bitmap_test(&r[0].gpus, 1));
	CHECK_EQ(r[0].health.kind, IOD_HEALTH_HTTP);
	CHECK_STR(r[0].health.path, "/");
	CHECK_U64(r[0].health.interval_ns, 10 * MS);
	json_t *j = iod_agent_replica_to_json(&r[0]);
	char *s = iod_json_string(j, true);
	CHECK_CONTAINS(s, "\"gpus\":\"2-3\"");
	CHECK_EQ(iod_agent_replica_from_json(j, &r[1], &e), 0);
	CHECK_EQ(memcmp(&r[0], &r[1], sizeof(r[0])), 0);
	free(s);
	json_decref(j);
	free(r);
}

TEST(manifest_errors_name_the_field)
{
	struct iod_agent_replica *r = calloc(2, sizeof(*r));
	uint32_t n;
	struct iod_err e = {0};
	CHECK(r);
	/* what rejects the whole file: it cannot be read, or a replica cannot
	 * be told apart from the others */
	const char *bad[] = {
	    "[]",
	    "{\"replicas\":[{\"service\":\"x\"}]}",
	    "{\"replicas\":[{\"name\":\"a\"},{\"name\":\"a\"}]}",
	    "{\"replicas\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"}]}",
	};
	const char *want[] = {"replicas", "name", "twice", "at most"};
	/* names that would leave the replicas directory (or the cgroup tree):
	 * the cluster's name rule, iod_state_name_valid, for every name */
	const char *paths[] = {
	    "{\"replicas\":[{\"name\":\"../../x\"}]}",
	    "{\"replicas\":[{\"name\":\"a/b\"}]}",
	    "{\"replicas\":[{\"name\":\"..\"}]}",
	    "{\"replicas\":[{\"name\":\".hidden\"}]}",
	};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(paths); i++) {
		int rc = iod_agent_manifest_parse(paths[i], strlen(paths[i]), r, 2, &n, &e);
		CHECK_MSG(rc < 0, "name case %u accepted", i);
		CHECK_CONTAINS(e.msg, "not valid");
	}
	/* a bad service name: the (well-named) replica fails alone */
	const char *svc = "{\"replicas\":[{\"name\":\"a\",\"service\":\"../s\"}]}";
	CHECK_EQ(iod_agent_manifest_parse(svc, strlen(svc), r, 2, &n, &e), 0);
	CHECK_CONTAINS(r[0].fail, "not valid");
	CHECK_STR(r[0].service, "a");
	char p[256];
	CHECK_EQ(iod_agent_replica_path("/run", "../../x", "log", p, sizeof(p)), -EINVAL);
	CHECK_EQ(iod_agent_replica_path("/run", "ok-0", "log", p, sizeof(p)), 0);
	CHECK_STR(p, "/run/replicas/ok-0/log");
	for (unsigned i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		int rc = iod_agent_manifest_parse(bad[i], strlen(bad[i]), r, 2, &n, &e);
		CHECK_MSG(rc < 0, "case %u accepted", i);
		CHECK_CONTAINS(e.msg, want[i]);
	}
	/* a named replica with a bad field fails alone, with the field named;
	 * the good one beside it is read as usual */
	const char *one[] = {
	    "{\"name\":\"a\",\"restart\":\"sometimes\"}",
	    "{\"name\":\"a\",\"cpus\":\"3-1\"}",
	    "{\"name\":\"a\",\"gpus\":7}",
	    "{\"name\":\"a\",\"health\":{\"kind\":\"exec\"}}",
	};
	const char *field[] = {"restart", "cpus", "gpus", "command"};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(one); i++) {
		char text[512];
		snprintf(text, sizeof(text),
		         "{\"replicas\":[%s,{\"name\":\"b\",\"command\":[\"true\"]}]}", one[i]);
		CHECK_EQ(iod_agent_manifest_parse(text, strlen(text), r, 2, &n, &e), 0);
		CHECK_EQ(n, 2);
		CHECK_STR(r[0].name, "a");
		CHECK_CONTAINS(r[0].fail, field[i]);
		CHECK_EQ(r[0].argc, 0);
		CHECK_STR(r[1].name, "b");
		CHECK_STR(r[1].fail, "");
		CHECK_EQ(r[1].argc, 1);
	}
	free(r);
}
