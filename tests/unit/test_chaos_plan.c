/*
 * test_chaos_plan.c: chaos plans (src/chaos/plan.c): the example plan
 * parses with its defaults, every bad field is refused naming plan:line:col,
 * and Chaos Mesh's modes pick the right number of targets, the same ones
 * for the same seed.
 */
#include "harness.h"
#include "iod/chaos.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct iod_err err;

static int parse(const char *text, struct iod_chaos_plan *p)
{
	return iod_chaos_plan_parse(text, strlen(text), "p.yaml", p, &err);
}

TEST(a_plan_with_defaults)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	const char *t =
	    "duration: 40s\n"
	    "schedule: random\n"
	    "seed: 9\n"
	    "faults:\n"
	    "  - action: partition\n"
	    "    selector: leader\n"
	    "    direction: to\n"
	    "    duration: 4s\n"
	    "  - {action: loss, mode: fixed-percent, value: 34, percent: 30, duration: 2s}\n"
	    "  - {action: network_partition, duration: 1s}\n";
	CHECK_EQ(parse(t, p), 0);
	CHECK_EQ(p->duration_ms, 40000u);
	CHECK(p->random && p->has_seed && p->seed == 9);
	CHECK_EQ(p->clients, 4u);
	CHECK_EQ(p->interval_ms, 3000u);
	CHECK_EQ(p->nsteps, 3u);
	CHECK_EQ(p->steps[0].action, IOD_CHAOS_ACT_PARTITION);
	CHECK(!strcmp(p->steps[0].selector, "leader"));
	CHECK_EQ(p->steps[0].dir, IOD_CHAOS_DIR_TO);
	CHECK_EQ(p->steps[1].mode, IOD_CHAOS_MODE_FIXED_PERCENT);
	CHECK_EQ(p->steps[1].percent, 30u);
	CHECK(!strcmp(p->steps[2].selector, "servers")); /* the default */
	free(p);
}

TEST(bad_plans_name_the_place)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	static const struct {
		const char *text, *want;
	} bad[] = {
	    {"duration: 10s\nfaults:\n  - {action: melt, duration: 1s}\n", "p.yaml:3:"},
	    {"duration: 10s\nfaults:\n  - {action: kill}\n", "needs a duration"},
	    {"duration: 10s\nfaults:\n  - {action: kill, duration: -1s}\n", "negative"},
	    {"duration: 10s\nfaults:\n  - {action: kill, mode: some, duration: 1s}\n",
	     "unknown mode"},
	    {"duration: 10s\nfaults:\n  - {action: kill, mode: fixed, duration: 1s}\n",
	     "needs a value"},
	    {"duration: 10s\nfaults:\n  - {action: loss, duration: 1s}\n", "percent"},
	    {"duration: 10s\nfaults:\n  - {action: kill, selector: db, duration: 1s}\n",
	     "selector"},
	    {"duration: 10s\nfaults:\n  - {action: partition, selector: nodes, duration: 1s}\n",
	     "among the servers"},
	    {"duration: 10s\nfaults:\n  - {action: kill, colour: red, duration: 1s}\n",
	     "unknown fault field"},
	    {"duration: 10s\nfaults: []\n", "non-empty"},
	    {"faults:\n  - {action: kill, duration: 1s}\n", "needs a duration"},
	    {"duration: 10s\nclients: 1000\nfaults:\n  - {action: kill, duration: 1s}\n",
	     "clients"},
	    {"duration: 10s\nschedule: often\nfaults:\n  - {action: kill, duration: 1s}\n",
	     "schedule"},
	    {"duration: 10s\nfaults: [\n", "p.yaml:"},
	    {"- a\n- b\n", "mapping"},
	    /* complex keys have no text: they crashed the parser (fuzz_chaos_plan) */
	    {"?\n - o", "plain names"},
	    {"duration: 10s\nfaults:\n  - ? [a]\n    : 1\n", "plain names"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = 0;
		CHECK_MSG(parse(bad[i].text, p) == -EINVAL, "case %zu parsed", i);
		CHECK_MSG(strstr(err.msg, bad[i].want) != NULL, "case %zu: %s", i, err.msg);
	}
	free(p);
}

TEST(modes_pick_counts_and_replay)
{
	CHECK_EQ(iod_chaos_mode_count(IOD_CHAOS_MODE_ONE, 0, 5, 0), 1u);
	CHECK_EQ(iod_chaos_mode_count(IOD_CHAOS_MODE_ALL, 0, 5, 0), 5u);
	CHECK_EQ(iod_chaos_mode_count(IOD_CHAOS_MODE_FIXED, 2, 5, 0), 2u);
	CHECK_EQ(iod_chaos_mode_count(IOD_CHAOS_MODE_FIXED, 9, 5, 0), 5u); /* at most all */
	CHECK_EQ(iod_chaos_mode_count(IOD_CHAOS_MODE_FIXED_PERCENT, 34, 3, 0), 2u); /* rounds up */
	CHECK_EQ(iod_chaos_mode_count(IOD_CHAOS_MODE_FIXED_PERCENT, 1, 3, 0), 1u);
	for (uint64_t d = 0; d < 20; d++) {
		uint32_t k = iod_chaos_mode_count(IOD_CHAOS_MODE_RANDOM_MAX_PERCENT, 60, 5, d);
		CHECK(k >= 1 && k <= 3);
	}
	CHECK_EQ(iod_chaos_mode_count(IOD_CHAOS_MODE_ALL, 0, 0, 0), 0u);
	struct iod_chaos_step s = {.mode = IOD_CHAOS_MODE_FIXED, .value = 2};
	bool a[5], b[5];
	CHECK_EQ(iod_chaos_plan_pick(&s, 5, 77, a), 2u);
	CHECK_EQ(iod_chaos_plan_pick(&s, 5, 77, b), 2u);
	CHECK(!memcmp(a, b, sizeof(a)));
	uint32_t n = 0;
	for (int i = 0; i < 5; i++)
		n += a[i];
	CHECK_EQ(n, 2u);
}

/* L7 steps (issue 20): delay and abort of services' HTTP requests through
 * the mesh, selected by services or service/NAME,...; L4 delay of servers
 * needs a latency too (it applied none before). */
TEST(l7_steps_select_services)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	const char *t = "duration: 20s\n"
	                "faults:\n"
	                "  - {action: abort, selector: services, mode: all, duration: 2s}\n"
	                "  - action: delay\n"
	                "    selector: service/web,service/api\n"
	                "    mode: fixed\n"
	                "    value: 1\n"
	                "    latency: 300ms\n"
	                "    percent: 50\n"
	                "    duration: 3s\n"
	                "  - {action: abort, selector: service/web, status: 502, percent: 10,"
	                " duration: 1s}\n"
	                "  - {action: delay, selector: servers, latency: 200ms, duration: 2s}\n";
	CHECK_EQ(parse(t, p), 0);
	CHECK_EQ(p->nsteps, 4u);
	CHECK_EQ(p->steps[0].action, IOD_CHAOS_ACT_ABORT);
	CHECK(iod_chaos_step_l7(&p->steps[0]));
	CHECK_EQ(p->steps[0].status, 503u);  /* the default */
	CHECK_EQ(p->steps[0].percent, 100u); /* every request by default */
	CHECK_EQ(p->steps[1].action, IOD_CHAOS_ACT_DELAY);
	CHECK(iod_chaos_step_l7(&p->steps[1]));
	CHECK_EQ(p->steps[1].latency_ms, 300u);
	CHECK_EQ(p->steps[1].percent, 50u);
	CHECK_EQ(p->steps[2].status, 502u);
	CHECK_EQ(p->steps[2].percent, 10u);
	CHECK(!iod_chaos_step_l7(&p->steps[3]));
	CHECK_EQ(p->steps[3].latency_ms, 200u);
	char names[4][IOD_NAME_MAX];
	CHECK_EQ(iod_chaos_services_parse(p->steps[1].selector, names, 4, &err), 2);
	CHECK(!strcmp(names[0], "web") && !strcmp(names[1], "api"));
	CHECK_EQ(iod_chaos_services_parse("services", names, 4, &err), 0);
	CHECK_EQ(iod_chaos_services_parse("service/a,service/b,service/c", names, 2, &err), -E2BIG);
	/* the modes pick among the services as among processes */
	bool pick[2];
	CHECK_EQ(iod_chaos_plan_pick(&p->steps[1], 2, 5, pick), 1u);
	CHECK(pick[0] != pick[1]);
	free(p);
}

/* Each one-step plan is refused, naming its step's place and what is wrong. */
struct bad_step {
	const char *step, *want;
};

static void refuses(const struct bad_step *bad, size_t n, struct iod_chaos_plan *p)
{
	for (size_t i = 0; i < n; i++) {
		char text[512];
		snprintf(text, sizeof(text), "duration: 10s\nfaults:\n  - %s\n", bad[i].step);
		err.msg[0] = 0;
		CHECK_MSG(parse(text, p) == -EINVAL, "case %zu parsed", i);
		CHECK_MSG(strstr(err.msg, bad[i].want) != NULL, "case %zu: %s", i, err.msg);
		CHECK_MSG(strstr(err.msg, "p.yaml:3:") != NULL, "case %zu: %s", i, err.msg);
	}
}

/* Underlay links as plan steps: partition and loss of a link or a list,
 * with a direction; the selector's place kept for the shell's errors (a
 * link the cluster lacks is refused there, with file:line:col). */
TEST(link_steps_select_links)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	const char *t = "duration: 20s\n"
	                "faults:\n"
	                "  - {action: partition, selector: link/leaf1-spine2, direction: to,"
	                " duration: 2s}\n"
	                "  - action: loss\n"
	                "    mode: all\n"
	                "    selector: link/leaf1-spine1,link/leaf2-spine1\n"
	                "    percent: 30\n"
	                "    duration: 3s\n";
	CHECK_EQ(parse(t, p), 0);
	CHECK_EQ(p->nsteps, 2u);
	CHECK(iod_chaos_step_link(&p->steps[0]));
	CHECK(!iod_chaos_step_l7(&p->steps[0]));
	CHECK_EQ(p->steps[0].dir, IOD_CHAOS_DIR_TO);
	CHECK_EQ(p->steps[0].sel_line, 3u);
	CHECK_EQ(p->steps[1].sel_line, 6u);
	CHECK_EQ(p->steps[1].sel_col, 15u);
	CHECK_EQ(p->steps[1].line, 4u);
	uint32_t lf[4], sp[4];
	CHECK_EQ(iod_chaos_links_parse(p->steps[1].selector, lf, sp, 4, &err), 2);
	CHECK(lf[0] == 1 && sp[0] == 1 && lf[1] == 2 && sp[1] == 1);
	CHECK_EQ(iod_chaos_links_parse("link/leaf1-spine1,link/leaf1-spine1", lf, sp, 4, &err),
	         -EINVAL);
	CHECK_CONTAINS(err.msg, "twice");
	CHECK_EQ(iod_chaos_links_parse("link/leaf1-spine1,link/leaf2-spine1", lf, sp, 1, &err),
	         -E2BIG);
	CHECK(!iod_chaos_step_link(&(struct iod_chaos_step){.selector = "servers"}));
	static const struct bad_step bad[] = {
	    {"{action: kill, selector: link/leaf1-spine1, duration: 1s}", "not kill"},
	    {"{action: pause, selector: link/leaf1-spine1, duration: 1s}", "not pause"},
	    {"{action: delay, selector: link/leaf1-spine1, latency: 1s, duration: 1s}",
	     "not delay"},
	    {"{action: partition, selector: link/leaf0-spine1, duration: 1s}", "leafL-spineS"},
	    {"{action: partition, selector: 'link/leaf1-spine1,', duration: 1s}", "comma"},
	    {"{action: partition, selector: 'link/leaf1-spine1,server-1', duration: 1s}",
	     "leafL-spineS"},
	    {"{action: partition, selector: link/leaf17-spine1, duration: 1s}", "leafL-spineS"},
	};
	refuses(bad, sizeof(bad) / sizeof(bad[0]), p);
	free(p);
}

TEST(bad_l7_steps_are_refused)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	static const struct bad_step bad[] = {
	    {"{action: abort, duration: 1s}", "selector is services"},
	    {"{action: abort, selector: server-1, duration: 1s}", "selector is services"},
	    {"{action: delay, selector: services, duration: 1s}", "needs a latency"},
	    {"{action: delay, selector: servers, duration: 1s}", "needs a latency"},
	    {"{action: kill, selector: services, duration: 1s}", "not kill"},
	    {"{action: partition, selector: service/web, duration: 1s}", "not partition"},
	    {"{action: abort, selector: services, latency: 1s, duration: 1s}", "not a latency"},
	    {"{action: abort, selector: services, status: 99, duration: 1s}", "200..599"},
	    {"{action: abort, selector: services, status: 600, duration: 1s}", "200..599"},
	    {"{action: delay, selector: services, latency: 2m, duration: 1s}", "at most 60s"},
	    {"{action: kill, status: 503, duration: 1s}", "not of kill"},
	    {"{action: abort, selector: 'service/', duration: 1s}", "want service/NAME"},
	    {"{action: abort, selector: 'service/web,', duration: 1s}", "comma"},
	    {"{action: abort, selector: 'service/web,server-1', duration: 1s}",
	     "want service/NAME"},
	    {"{action: abort, selector: 'service/a b', duration: 1s}", "not a service name"},
	    {"{action: abort, selector: services, percent: 0, duration: 1s}", "percent"},
	};
	refuses(bad, sizeof(bad) / sizeof(bad[0]), p);
	free(p);
}
