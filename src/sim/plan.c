/*
 * plan.c: a chaos plan (include/iod/chaos.h, src/chaos/plan.c) as the
 * whole-cluster simulator's scripted faults (include/iod/sim_cluster.h),
 * so the plan file `iod chaos run --plan` runs against a real cluster also
 * drives `iod sim --plan`. The schedule and the seeded draws are those of
 * src/chaos/run.c: the first fault 2 s in, each next one after the last
 * one's end and the plan's interval, while one fits in the plan's
 * duration; per fault one draw for its id and one for its targets.
 *
 * Pure: no clock, no I/O.
 */
#include "iod/chaos.h"
#include "iod/sim_cluster.h"

#include <errno.h>
#include <string.h>

#define PLAN_WARMUP_NS (2 * IOD_NS_PER_S) /* run.c: the nemesis' warm-up */

/* The simulator's fault vocabulary a step maps onto. */
struct cand {
	enum iod_simc_fault_kind kind; /* server, leader, node or link */
	uint32_t index;                /* server or node index */
};

static int refuse(uint32_t k, const struct iod_chaos_step *s, const char *why, struct iod_err *e)
{
	return iod_err_set(e, -EINVAL,
	                   "plan fault %u (%s, selector %.64s): the simulator cannot model %s; "
	                   "it models kill and pause of servers (servers, server-N, leader), "
	                   "kill of nodes (nodes, node-N) and partition of links "
	                   "(link/leafL-spineS)",
	                   k + 1, iod_chaos_action_name(s->action), s->selector, why);
}

/* The candidates of step s (number k) in the simulated cluster c. */
static int candidates(uint32_t k, const struct iod_chaos_step *s, const struct iod_simc_config *c,
                      struct cand *out, struct iod_err *e)
{
	uint32_t n = 0;
	if (iod_chaos_step_link(s)) {
		/* link/leafL-spineS: the simulator has no leaves and spines; its
		 * link fault is one black-holed path of a node's (the fabric has
		 * others). Leaf L stands for node-L, the first host `iod up --netns`
		 * puts on leaf L (host h is on leaf (h-1) % leaves + 1) */
		uint32_t leaf[IOD_CHAOS_MEMBERS_MAX], spine[IOD_CHAOS_MEMBERS_MAX];
		if (s->action != IOD_CHAOS_ACT_PARTITION)
			return refuse(k, s,
			              "a lossy link (its link fault is a cut: every flow on "
			              "the path black-holed)",
			              e);
		int nl = iod_chaos_links_parse(s->selector, leaf, spine, IOD_CHAOS_MEMBERS_MAX, e);
		if (nl < 0)
			return nl;
		for (int i = 0; i < nl; i++) {
			if (leaf[i] > c->nodes)
				return iod_err_set(
				    e, -EINVAL,
				    "plan fault %u: link/leaf%u-spine%u: leaf L stands "
				    "for node-L, and the simulated cluster has %u nodes "
				    "(--nodes N)",
				    k + 1, leaf[i], spine[i], c->nodes);
			out[n++] = (struct cand){IOD_SIMC_FAULT_LINK, leaf[i] - 1};
		}
		return (int)n;
	}
	if (s->action != IOD_CHAOS_ACT_KILL && s->action != IOD_CHAOS_ACT_PAUSE) {
		char what[64];
		const char *a = iod_chaos_action_name(s->action);
		snprintf(what, sizeof(what), "%s %s", strchr("aeiou", a[0]) ? "an" : "a", a);
		return refuse(k, s, what, e);
	}
	if (iod_chaos_step_l7(s))
		return refuse(k, s, "services (requests in the mesh)", e);
	if (!strcmp(s->selector, "leader")) {
		out[0] = (struct cand){IOD_SIMC_FAULT_LEADER, 0};
		n = 1;
	} else if (!strcmp(s->selector, "servers")) {
		for (uint32_t i = 0; i < c->servers && i < IOD_CHAOS_MEMBERS_MAX; i++)
			out[n++] = (struct cand){IOD_SIMC_FAULT_SERVER, i};
	} else if (!strcmp(s->selector, "nodes")) {
		for (uint32_t i = 0; i < c->nodes && i < IOD_CHAOS_MEMBERS_MAX; i++)
			out[n++] = (struct cand){IOD_SIMC_FAULT_NODE, i};
	} else {
		struct iod_chaos_target t[IOD_CHAOS_MEMBERS_MAX];
		int nt = iod_chaos_target_list_parse(s->selector, t, IOD_CHAOS_MEMBERS_MAX, e);
		if (nt < 0)
			return nt;
		for (int i = 0; i < nt; i++) {
			if (t[i].kind == IOD_CHAOS_REPLICA)
				return refuse(k, s,
				              "a replica target (the simulated job's ranks "
				              "have no names: select their nodes)",
				              e);
			uint32_t have = t[i].kind == IOD_CHAOS_SERVER ? c->servers : c->nodes;
			if (t[i].index > have)
				return iod_err_set(
				    e, -EINVAL,
				    "plan fault %u: %s: the simulated cluster has %u "
				    "%s",
				    k + 1, t[i].name, have,
				    t[i].kind == IOD_CHAOS_SERVER ? "servers (--servers N)"
				                                  : "nodes (--nodes N)");
			out[n++] =
			    (struct cand){t[i].kind == IOD_CHAOS_SERVER ? IOD_SIMC_FAULT_SERVER
			                                                : IOD_SIMC_FAULT_NODE,
			                  t[i].index - 1};
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		if (out[i].kind != IOD_SIMC_FAULT_NODE && !c->servers)
			return iod_err_set(e, -EINVAL,
			                   "plan fault %u (%s of %.64s): the simulator runs no "
			                   "control-plane servers: give --servers N",
			                   k + 1, iod_chaos_action_name(s->action), s->selector);
		if (out[i].kind == IOD_SIMC_FAULT_NODE && s->action == IOD_CHAOS_ACT_PAUSE)
			return refuse(k, s,
			              "a paused node agent (its node fault takes the node "
			              "and its processes down)",
			              e);
	}
	if (!n)
		return iod_err_set(e, -EINVAL, "plan fault %u: selector %.64s matches nothing",
		                   k + 1, s->selector);
	return (int)n;
}

int iod_simc_plan_faults(const struct iod_chaos_plan *p, uint64_t seed, struct iod_simc_config *c,
                         struct iod_err *e)
{
	struct cand cand[IOD_CHAOS_MEMBERS_MAX];
	bool pick[IOD_CHAOS_MEMBERS_MAX];
	struct iod_rng rng;
	/* every step first: a plan the simulator cannot run adds nothing */
	for (uint32_t k = 0; k < p->nsteps; k++) {
		int n = candidates(k, &p->steps[k], c, cand, e);
		if (n < 0)
			return n;
	}
	uint32_t first = c->faults_n;
	uint64_t t = PLAN_WARMUP_NS, end = p->duration_ms * IOD_NS_PER_MS;
	iod_rng_seed(&rng, seed);
	for (uint32_t turn = 0;; turn++) {
		uint32_t k =
		    p->random ? (uint32_t)iod_rng_below(&rng, p->nsteps) : turn % p->nsteps;
		const struct iod_chaos_step *s = &p->steps[k];
		uint64_t hold = s->duration_ms * IOD_NS_PER_MS;
		if (t + hold + IOD_NS_PER_S > end)
			break;
		int n = candidates(k, s, c, cand, e);
		if (n < 0)
			return n;
		(void)iod_rng_next(&rng); /* run.c: the fault's id */
		iod_chaos_plan_pick(s, (uint32_t)n, iod_rng_next(&rng), pick);
		for (int i = 0; i < n; i++) {
			if (!pick[i])
				continue;
			if (c->faults_n >= IOD_SIMC_FAULTS_MAX) {
				c->faults_n = first;
				return iod_err_set(
				    e, -E2BIG, "the plan makes more than %d faults in %llu ms",
				    IOD_SIMC_FAULTS_MAX, (unsigned long long)p->duration_ms);
			}
			c->faults[c->faults_n++] = (struct iod_simc_fault){
			    .at_ns = t,
			    .kind = cand[i].kind,
			    .node = cand[i].index,
			    .repair_ns = hold,
			};
			if (cand[i].kind == IOD_SIMC_FAULT_LEADER)
				break; /* one leader */
		}
		t += hold + p->interval_ms * IOD_NS_PER_MS;
	}
	return 0;
}
