/*
 * test_sim_plan.c: a chaos plan drives the whole-cluster simulator
 * (src/sim/plan.c, `iod sim --plan FILE`): the plan's steps become the
 * simulator's scripted faults on the schedule of `iod chaos run --plan`
 * (2 s warm-up, each after the last one's end and the interval, while one
 * fits), with the step's duration as the time down; what the simulator
 * cannot model is refused naming the step and nothing is added; a seed
 * replays the same faults; and the faults happen in a run.
 */
#include "harness.h"
#include "iod/chaos.h"
#include "iod/sim_cluster.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct iod_err err;

static void cfg_small(struct iod_simc_config *c)
{
	iod_simc_config_default(c);
	iod_simc_timers_iod(&c->timers, 2000, 50, 3, 30000, 100 * IOD_NS_PER_MS, 10 * IOD_NS_PER_S);
	c->job.steps = 300;
	c->job.epochs = 0;
	c->job.gpus = 12;
	c->fault_per_gpu_hour = 0;
}

static int plan_of(const char *text, struct iod_chaos_plan *p)
{
	return iod_chaos_plan_parse(text, strlen(text), "p.yaml", p, &err);
}

TEST(sim_plan_schedule_and_mapping)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	CHECK(p && c);
	cfg_small(c);
	CHECK_EQ(c->servers, 3u);
	CHECK_EQ(plan_of("duration: 30s\n"
	                 "interval: 2s\n"
	                 "faults:\n"
	                 "  - {action: kill, selector: leader, duration: 3s}\n"
	                 "  - {action: pause, selector: server-2, duration: 1s}\n"
	                 "  - {action: kill, mode: all, selector: nodes, duration: 4s}\n",
	                 p),
	         0);
	CHECK_MSG(iod_simc_plan_faults(p, 7, c, &err) == 0, "%s", err.msg);
	/* 2 s leader 3 s; 7 s server-2 1 s; 10 s every node 4 s; 16 s leader;
	 * 21 s server-2; 24 s every node; 30 s: 30+3+1 > 30, no more */
	CHECK_EQ(c->faults_n, 4u + 2 * c->nodes);
	CHECK_EQ(c->faults[0].kind, IOD_SIMC_FAULT_LEADER);
	CHECK_EQ(c->faults[0].at_ns, 2 * IOD_NS_PER_S);
	CHECK_EQ(c->faults[0].repair_ns, 3 * IOD_NS_PER_S);
	CHECK_EQ(c->faults[1].kind, IOD_SIMC_FAULT_SERVER);
	CHECK_EQ(c->faults[1].node, 1u); /* server-2 is index 1 */
	CHECK_EQ(c->faults[1].at_ns, 7 * IOD_NS_PER_S);
	CHECK_EQ(c->faults[1].repair_ns, 1 * IOD_NS_PER_S);
	for (uint32_t i = 0; i < c->nodes; i++) {
		CHECK_EQ(c->faults[2 + i].kind, IOD_SIMC_FAULT_NODE);
		CHECK_EQ(c->faults[2 + i].node, i);
		CHECK_EQ(c->faults[2 + i].at_ns, 10 * IOD_NS_PER_S);
		CHECK_EQ(c->faults[2 + i].repair_ns, 4 * IOD_NS_PER_S);
	}
	CHECK_EQ(c->faults[2 + c->nodes].kind, IOD_SIMC_FAULT_LEADER);
	CHECK_EQ(c->faults[2 + c->nodes].at_ns, 16 * IOD_NS_PER_S);
	CHECK_EQ(c->faults[3 + c->nodes].at_ns, 21 * IOD_NS_PER_S);
	CHECK_EQ(c->faults[4 + c->nodes].kind, IOD_SIMC_FAULT_NODE);
	CHECK_EQ(c->faults[4 + c->nodes].at_ns, 24 * IOD_NS_PER_S);

	/* random schedule, one of the servers: the seed replays it */
	struct iod_simc_fault a[IOD_SIMC_FAULTS_MAX];
	CHECK_EQ(plan_of("duration: 60s\nschedule: random\nfaults:\n"
	                 "  - {action: kill, mode: one, selector: servers, duration: 1s}\n"
	                 "  - {action: kill, mode: one, selector: nodes, duration: 2s}\n",
	                 p),
	         0);
	c->faults_n = 0;
	CHECK_EQ(iod_simc_plan_faults(p, 11, c, &err), 0);
	uint32_t n = c->faults_n;
	CHECK(n >= 10);
	memcpy(a, c->faults, n * sizeof(a[0]));
	c->faults_n = 0;
	CHECK_EQ(iod_simc_plan_faults(p, 11, c, &err), 0);
	CHECK_EQ(c->faults_n, n);
	CHECK(!memcmp(a, c->faults, n * sizeof(a[0])));
	bool servers = false, nodes = false;
	for (uint32_t i = 0; i < n; i++) {
		servers |= c->faults[i].kind == IOD_SIMC_FAULT_SERVER && c->faults[i].node < 3;
		nodes |= c->faults[i].kind == IOD_SIMC_FAULT_NODE && c->faults[i].node < c->nodes;
	}
	CHECK(servers && nodes);
	free(p);
	free(c);
}

TEST(sim_plan_refuses_what_it_cannot_model)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	CHECK(p && c);
	cfg_small(c);
	static const struct {
		const char *step, *want;
	} bad[] = {
	    {"{action: partition, duration: 1s}", "cannot model a partition"},
	    {"{action: loss, percent: 5, duration: 1s}", "cannot model a loss"},
	    {"{action: delay, latency: 100ms, duration: 1s}", "cannot model a delay"},
	    {"{action: member, duration: 1s}", "cannot model a member"},
	    {"{action: abort, selector: services, duration: 1s}", "cannot model an abort"},
	    {"{action: pause, selector: nodes, duration: 1s}", "paused node"},
	    {"{action: kill, selector: replica/train-0, duration: 1s}", "replica"},
	    {"{action: kill, selector: server-9, duration: 1s}", "has 3 servers"},
	    {"{action: kill, selector: node-9, duration: 1s}", "nodes (--nodes N)"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256];
		snprintf(text, sizeof(text),
		         "duration: 20s\nfaults:\n  - {action: kill, selector: leader, duration: "
		         "1s}\n  - %s\n",
		         bad[i].step);
		CHECK_MSG(plan_of(text, p) == 0, "case %zu: %s", i, err.msg);
		c->faults_n = 0;
		err.msg[0] = 0;
		CHECK_MSG(iod_simc_plan_faults(p, 1, c, &err) == -EINVAL, "case %zu", i);
		CHECK_MSG(strstr(err.msg, bad[i].want) != NULL, "case %zu: %s", i, err.msg);
		CHECK_MSG(strstr(err.msg, "plan fault 2") != NULL, "case %zu: %s", i, err.msg);
		CHECK_EQ(c->faults_n, 0u); /* nothing added, not even step 1 */
	}
	/* no servers simulated: a server fault would do nothing */
	c->servers = 0;
	CHECK_EQ(plan_of("duration: 20s\nfaults:\n  - {action: kill, selector: leader, "
	                 "duration: 1s}\n",
	                 p),
	         0);
	CHECK_EQ(iod_simc_plan_faults(p, 1, c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "--servers N");
	free(p);
	free(c);
}

/* Underlay links: link/leafL-spineS is the simulator's link fault on node
 * L-1 (leaf L's first host under `iod up --netns`), either direction; the
 * mode picks among the listed links with the real run's draws; in a run the
 * ring stalls and iod's rerouting carries it on. */
TEST(sim_plan_links_are_link_faults)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	CHECK(p && c && r);
	cfg_small(c);
	c->keep_log = true;
	CHECK_MSG(plan_of("duration: 14s\ninterval: 3s\nfaults:\n"
	                  "  - {action: partition, selector: link/leaf2-spine1, direction: to,"
	                  " duration: 2s}\n"
	                  "  - {action: partition, mode: all,"
	                  " selector: 'link/leaf1-spine1,link/leaf3-spine2', duration: 1s}\n",
	                  p) == 0,
	          "%s", err.msg);
	CHECK_MSG(iod_simc_plan_faults(p, 1, c, &err) == 0, "%s", err.msg);
	/* 2 s leaf 2 for 2 s; 7 s leaves 1 and 3 for 1 s; 11 s leaf 2 (11+2+1
	 * fits in 14); 16 s: no more */
	CHECK_EQ(c->faults_n, 4u);
	CHECK_EQ(c->faults[3].node, 1u);
	CHECK_EQ(c->faults[3].at_ns, 11 * IOD_NS_PER_S);
	CHECK_EQ(c->faults[0].kind, IOD_SIMC_FAULT_LINK);
	CHECK_EQ(c->faults[0].node, 1u);
	CHECK_EQ(c->faults[0].at_ns, 2 * IOD_NS_PER_S);
	CHECK_EQ(c->faults[1].kind, IOD_SIMC_FAULT_LINK);
	CHECK_EQ(c->faults[1].node, 0u);
	CHECK_EQ(c->faults[2].node, 2u);
	CHECK_EQ(c->faults[2].at_ns, 7 * IOD_NS_PER_S);
	/* mode one among two links: the seed picks one, and replays it */
	CHECK_EQ(plan_of("duration: 5s\nfaults:\n"
	                 "  - {action: partition, selector: 'link/leaf1-spine1,link/leaf2-spine1',"
	                 " duration: 1s}\n",
	                 p),
	         0);
	c->faults_n = 0;
	CHECK_EQ(iod_simc_plan_faults(p, 5, c, &err), 0);
	CHECK_EQ(c->faults_n, 1u);
	uint32_t first = c->faults[0].node;
	c->faults_n = 0;
	CHECK_EQ(iod_simc_plan_faults(p, 5, c, &err), 0);
	CHECK_EQ(c->faults[0].node, first);
	/* a run: the link fault stalls the ring, the job still finishes */
	CHECK_EQ(plan_of("duration: 8s\nfaults:\n"
	                 "  - {action: partition, selector: link/leaf1-spine1, duration: 2s}\n",
	                 p),
	         0);
	c->faults_n = 0;
	CHECK_EQ(iod_simc_plan_faults(p, 1, c, &err), 0);
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &err) == 0, "%s", err.msg);
	CHECK(r->done);
	CHECK_EQ(r->faults, 1u);
	CHECK_EQ(r->invariant_violations, 0u);
	CHECK_CONTAINS(r->log, "fault link node=n0");
	iod_simc_result_free(r);
	free(p);
	free(c);
	free(r);
}

/* The plan's faults happen: a leader killed at 2 s and a node lost at 10 s,
 * both for the step's duration; the job still finishes. */
TEST(sim_plan_faults_happen_in_a_run)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	CHECK(p && c && r);
	cfg_small(c);
	c->keep_log = true;
	CHECK_EQ(plan_of("duration: 14s\ninterval: 5s\nfaults:\n"
	                 "  - {action: kill, selector: leader, duration: 3s}\n"
	                 "  - {action: kill, selector: node-2, duration: 2s}\n",
	                 p),
	         0);
	CHECK_EQ(iod_simc_plan_faults(p, 1, c, &err), 0);
	CHECK_EQ(c->faults_n, 2u);
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &err) == 0, "%s", err.msg);
	CHECK(r->done);
	CHECK_EQ(r->server_faults, 1u);
	CHECK_EQ(r->faults, 2u);
	CHECK_EQ(r->invariant_violations, 0u);
	CHECK_CONTAINS(r->log, "fault leader");
	CHECK_CONTAINS(r->log, "fault node node=n1");
	iod_simc_result_free(r);
	free(p);
	free(c);
	free(r);
}
