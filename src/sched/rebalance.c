/*
 * rebalance.c: propose a bounded list of moves that improves a stated goal.
 *
 * Goals: free whole NVLink islands (so large jobs fit again), or drain a
 * node. A move re-places one replica with the same filters as a fresh
 * placement, so it never breaks anti-affinity, a NUMA policy or a capacity.
 * Work is bounded by max_moves (<= IOD_SCHED_MOVES_MAX) and by the number of
 * islands. Without `apply` the cluster is restored exactly. Pure: no clock,
 * no I/O, deterministic order (node index, island mask, replica id).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Re-apply a saved replica exactly (used to undo a tentative move). */
static void replica_restore(struct iod_sched_cluster *c, uint32_t id, const struct replica *saved)
{
	/* take id off the free stack */
	for (uint32_t i = c->free_n; i-- > 0;) {
		if (c->free_ids[i] == id) {
			memmove(&c->free_ids[i], &c->free_ids[i + 1],
			        (c->free_n - i - 1) * sizeof(uint32_t));
			c->free_n--;
			break;
		}
	}
	struct node *n = &c->nodes[saved->node];
	const struct shape *sh = &c->shapes[n->shape];
	IOD_ASSERT((n->gpu_free & saved->gpu_mask) == saved->gpu_mask);
	n->gpu_free &= ~saved->gpu_mask;
	IOD_ASSERT((n->acc_free & saved->acc_mask) == saved->acc_mask);
	n->acc_free &= ~saved->acc_mask;
	for (uint32_t i = 0; i < sh->s.numa_n; i++) {
		struct iod_bitmap mine = saved->cpus;
		iod_bitmap_and(&mine, &sh->s.numa_cpus[i]);
		n->numa_cpu_free[i] -= iod_bitmap_count(&mine);
		n->numa_mem_free[i] -= saved->mem_take[i];
	}
	iod_bitmap_andnot(&n->cpu_free, &saved->cpus);
	if (saved->nic >= 0)
		n->nic_free[saved->nic] -= saved->nic_bw_bps;
	n->replicas++;
	c->services[saved->service].live++;
	c->replicas[id] = *saved;
	c->replicas[id].live = true;
}

/* Move replica id to the best other place; false (and unchanged) if none. */
static bool move_one(struct iod_sched_cluster *c, uint32_t id, uint32_t skip_node,
                     bool keep_islands, uint32_t block_node, uint32_t block_mask, uint32_t *blocked,
                     struct iod_sched_move *mv)
{
	struct replica saved = c->replicas[id];
	const struct service *sv = &c->services[saved.service];
	struct iod_sched_weights w;
	iod_sched_weights_default(&w);
	sched_unbind(c, id);
	if (block_mask) {
		*blocked |= c->nodes[block_node].gpu_free & block_mask;
		c->nodes[block_node].gpu_free &= ~block_mask;
	}
	sched_counts_load(c, saved.service);
	struct cand best;
	if (!sched_best(c, &sv->req, &w, skip_node, keep_islands, 0, false, &best, NULL)) {
		if (block_mask && saved.node == block_node) {
			/* its own GPUs were blocked with the island: hand them back */
			c->nodes[block_node].gpu_free |= *blocked & saved.gpu_mask;
			*blocked &= ~saved.gpu_mask;
		}
		replica_restore(c, id, &saved);
		return false;
	}
	uint32_t nid;
	int rc = sched_bind(c, saved.service, saved.ordinal, &best, &nid);
	IOD_ASSERT(rc == 0 && nid == id);
	mv->replica = id;
	snprintf(mv->name, sizeof(mv->name), "%s-%u", sv->req.service, saved.ordinal);
	mv->from_node = saved.node;
	mv->from_gpus = saved.gpu_mask;
	mv->to_node = best.pub.node;
	mv->to_gpus = best.pub.gpu_mask;
	return true;
}

struct island_cand {
	uint32_t node;     /* node id */
	uint32_t mask;     /* island GPUs */
	uint32_t replicas; /* replicas touching it */
	uint32_t used;     /* GPUs used in it */
};

static int island_cmp(const void *a, const void *b)
{
	const struct island_cand *x = a, *y = b;
	if (x->replicas != y->replicas)
		return x->replicas < y->replicas ? -1 : 1;
	if (x->used != y->used)
		return x->used < y->used ? -1 : 1;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return x->mask < y->mask ? -1 : x->mask > y->mask;
}

static uint32_t touching(const struct iod_sched_cluster *c, uint32_t node, uint32_t mask,
                         uint32_t *ids, uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->replicas_hw; i++) {
		const struct replica *r = &c->replicas[i];
		if (r->live && r->node == node && (r->gpu_mask & mask)) {
			if (n < max && ids)
				ids[n] = i;
			n++;
		}
	}
	return n;
}

/* island_list: every NVLink island of two or more GPUs that is not wholly free, into *CANDS
 * (grown as needed); the count, or -ENOMEM. */
static int island_list(const struct iod_sched_cluster *c, struct island_cand **cands, uint32_t *cap)
{
	uint32_t cn = 0;
	for (uint32_t j = 0; j < c->nodes_n; j++) {
		const struct node *nd = &c->nodes[j];
		const struct shape *sh = &c->shapes[nd->shape];
		for (uint32_t i = 0; i < sh->islands_n; i++) {
			uint32_t isl = sh->islands[i];
			if (__builtin_popcount(isl) < 2 || (isl & nd->gpu_free) == isl)
				continue;
			if (cn == *cap) {
				uint32_t ncap = *cap ? *cap * 2 : 64;
				struct island_cand *nc = realloc(*cands, ncap * sizeof(*nc));
				if (!nc)
					return -ENOMEM;
				*cands = nc;
				*cap = ncap;
			}
			struct island_cand *ic = &(*cands)[cn++];
			ic->node = j;
			ic->mask = isl;
			ic->used = (uint32_t)__builtin_popcount(isl & ~nd->gpu_free);
			ic->replicas = touching(c, j, isl, NULL, 0);
		}
	}
	return (int)cn;
}

/* island_free: move every replica off island IC, or none of them (the tentative moves are
 * undone, newest first). True when the island is now free and PLAN holds the moves. */
static bool island_free(struct iod_sched_cluster *c, const struct island_cand *ic,
                        uint32_t max_moves, struct iod_sched_plan *plan)
{
	uint32_t left = max_moves - plan->n;
	if (ic->replicas == 0 || ic->replicas > left)
		return false;
	uint32_t ids[IOD_SCHED_MOVES_MAX];
	uint32_t k = touching(c, ic->node, ic->mask, ids, IOD_SCHED_MOVES_MAX);
	if (k > left)
		return false;
	/* a replica that also holds GPUs outside the island moves whole */
	uint32_t blocked = 0, done = 0;
	struct replica saved[IOD_SCHED_MOVES_MAX];
	for (uint32_t i = 0; i < k; i++)
		saved[i] = c->replicas[ids[i]];
	for (; done < k; done++) {
		if (!move_one(c, ids[done], UINT32_MAX, true, ic->node, ic->mask, &blocked,
		              &plan->moves[plan->n + done]))
			break;
	}
	c->nodes[ic->node].gpu_free |= blocked;
	if (done == k) {
		plan->n += k;
		return true;
	}
	while (done-- > 0) {
		sched_unbind(c, ids[done]);
		replica_restore(c, ids[done], &saved[done]);
	}
	return false;
}

/* plan_islands: free one island at a time, the best candidate first, until none can be freed
 * or the move budget is spent. */
static int plan_islands(struct iod_sched_cluster *c, uint32_t max_moves,
                        struct iod_sched_plan *plan)
{
	struct island_cand *cands = NULL;
	uint32_t cap = 0;
	int rc = 0;
	for (;;) {
		int cn = island_list(c, &cands, &cap);
		if (cn < 0) {
			rc = cn;
			break;
		}
		if (cn > 1)
			qsort(cands, (size_t)cn, sizeof(*cands), island_cmp);
		bool progress = false;
		for (int ci = 0; ci < cn && !progress; ci++)
			progress = island_free(c, &cands[ci], max_moves, plan);
		if (!progress || plan->n >= max_moves)
			break;
	}
	free(cands);
	return rc;
}

static void plan_drain(struct iod_sched_cluster *c, uint32_t node, uint32_t max_moves,
                       struct iod_sched_plan *plan, uint32_t *left)
{
	bool was = c->nodes[node].cordoned;
	c->nodes[node].cordoned = true;
	*left = 0;
	for (uint32_t i = 0; i < c->replicas_hw; i++) {
		const struct replica *r = &c->replicas[i];
		if (!r->live || r->node != node)
			continue;
		if (plan->n >= max_moves) {
			(*left)++;
			continue;
		}
		if (move_one(c, i, node, false, 0, 0, NULL, &plan->moves[plan->n]))
			plan->n++;
		else
			plan->stuck++;
	}
	c->nodes[node].cordoned = was;
}

/* What a dry-run plan restores: the nodes, the replica table and its free list. */
struct sched_snapshot {
	struct node *nodes;
	struct replica *reps;
	uint32_t *free_ids;
	uint32_t hw, free_n;
};

static int snapshot_take(const struct iod_sched_cluster *c, struct sched_snapshot *s)
{
	s->hw = c->replicas_hw;
	s->free_n = c->free_n;
	s->nodes = malloc(IOD_MAX(c->nodes_n, 1u) * sizeof(*s->nodes));
	s->reps = malloc(IOD_MAX(s->hw, 1u) * sizeof(*s->reps));
	s->free_ids = malloc(IOD_MAX(c->replicas_max, 1u) * sizeof(*s->free_ids));
	if (!s->nodes || !s->reps || !s->free_ids) {
		free(s->nodes);
		free(s->reps);
		free(s->free_ids);
		return -ENOMEM;
	}
	memcpy(s->nodes, c->nodes, c->nodes_n * sizeof(*s->nodes));
	memcpy(s->reps, c->replicas, s->hw * sizeof(*s->reps));
	memcpy(s->free_ids, c->free_ids, s->free_n * sizeof(*s->free_ids));
	return 0;
}

static void snapshot_restore(struct iod_sched_cluster *c, struct sched_snapshot *s)
{
	memcpy(c->nodes, s->nodes, c->nodes_n * sizeof(*s->nodes));
	memcpy(c->replicas, s->reps, s->hw * sizeof(*s->reps));
	memcpy(c->free_ids, s->free_ids, s->free_n * sizeof(*s->free_ids));
	c->replicas_hw = s->hw;
	c->free_n = s->free_n;
	free(s->nodes);
	free(s->reps);
	free(s->free_ids);
}

int iod_sched_rebalance(struct iod_sched_cluster *c, enum iod_sched_goal goal, uint32_t drain_node,
                        uint32_t max_moves, bool apply, struct iod_sched_plan *plan,
                        struct iod_err *e)
{
	memset(plan, 0, sizeof(*plan));
	if (max_moves > IOD_SCHED_MOVES_MAX)
		return iod_err_set(e, -EINVAL, "at most %u moves per plan (asked for %u)",
		                   IOD_SCHED_MOVES_MAX, max_moves);
	if (goal == IOD_SCHED_GOAL_DRAIN && drain_node >= c->nodes_n)
		return iod_err_set(e, -ENOENT, "drain: no node %u", drain_node);
	struct sched_snapshot snap = {0};
	if (!apply && snapshot_take(c, &snap))
		return iod_err_set(e, -ENOMEM, "out of memory planning moves");
	plan->islands_before = iod_sched_islands_free(c, 2);
	int rc = 0;
	uint32_t left = 0;
	if (goal == IOD_SCHED_GOAL_DRAIN)
		plan_drain(c, drain_node, max_moves, plan, &left);
	else
		rc = plan_islands(c, max_moves, plan);
	plan->islands_after = iod_sched_islands_free(c, 2);
	IOD_ASSERT(plan->n <= max_moves);
	if (goal == IOD_SCHED_GOAL_DRAIN)
		snprintf(
		    plan->why, sizeof(plan->why),
		    "drain %s: %u move%s; %u replica%s with nowhere to go; %u left for a later "
		    "plan (move budget %u)",
		    c->nodes[drain_node].name, plan->n, plan->n == 1 ? "" : "s", plan->stuck,
		    plan->stuck == 1 ? "" : "s", left, max_moves);
	else
		snprintf(
		    plan->why, sizeof(plan->why),
		    "free NVLink islands: %u whole before, %u after, with %u move%s (budget %u)",
		    plan->islands_before, plan->islands_after, plan->n, plan->n == 1 ? "" : "s",
		    max_moves);
	if (!apply)
		snapshot_restore(c, &snap);
	if (rc)
		return iod_err_set(e, rc, "out of memory planning moves");
	return 0;
}
