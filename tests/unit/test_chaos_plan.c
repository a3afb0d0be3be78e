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
