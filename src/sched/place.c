/*
 * place.c: the scheduler's entry point: filter -> score -> bind for every
 * replica of a deploy, choosing the best candidate (the other parts of the
 * core: shapes.c, search.c, eval.c, bind.c, diagnose.c; internal.h).
 *
 * It exists so that every replica lands on the best GPUs, CPUs and NIC a
 * cluster can give it, fast, with a reason for every decision. It must never
 * read the clock, do I/O, draw randomness or iterate in an order that depends
 * on anything but its input: the same input gives byte-identical output.
 *
 * The GPU-set search is exact (every k-subset of a node's free GPUs), as
 * NVIDIA's go-gpuallocator partitions rather than picks greedily; its result
 * depends only on (shape, free mask, k, link), so it is memoized per shape
 * and a node evaluation is one hash lookup plus a few counters.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- choosing ------------------------------------------------------------ */

static void top_insert(struct iod_sched_explain *x, uint32_t keep, const struct cand *cd)
{
	uint32_t pos = x->cand_n;
	while (pos > 0 && cd->pub.total > x->cand[pos - 1].total)
		pos--;
	if (pos >= keep)
		return;
	uint32_t last = IOD_MIN(x->cand_n, keep - 1);
	for (uint32_t i = last; i > pos; i--)
		x->cand[i] = x->cand[i - 1];
	x->cand[pos] = cd->pub;
	if (x->cand_n < keep)
		x->cand_n++;
}

static bool anti_blocked(const struct iod_sched_cluster *c, uint32_t i,
                         const struct iod_sched_request *r)
{
	const struct node *n = &c->nodes[i];
	return (r->anti == IOD_SCHED_DOMAIN_NODE && c->cnt_node[i]) ||
	       (r->anti == IOD_SCHED_DOMAIN_RACK && c->cnt_rack[n->rack]) ||
	       (r->anti == IOD_SCHED_DOMAIN_ZONE && c->cnt_zone[n->zone]);
}

bool sched_best(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                const struct iod_sched_weights *w, uint32_t skip, bool keep_islands, uint32_t keep,
                bool use_cache, struct cand *best, struct iod_sched_explain *x)
{
	bool found = false;
	const bool spreads = r->stateful || r->spread;
	keep = IOD_MIN(keep, (uint32_t)IOD_SCHED_EXPLAIN_TOP);
	if (x) {
		x->cand_n = 0;
		x->evaluated = 0;
		x->feasible = 0;
		x->weights = *w;
	}
	for (uint32_t i = 0; i < c->nodes_n; i++) {
		if (i == skip)
			continue;
		/* cheap pre-filters before the full evaluation */
		if (popc(c->nodes[i].gpu_free) < r->gpus || popc(c->nodes[i].acc_free) < r->accs ||
		    anti_blocked(c, i, r))
			continue;
		struct cand cd;
		struct near nr;
		if (x)
			x->evaluated++;
		if (use_cache) {
			struct cache_ent *ce = &c->cache[i];
			if (ce->gen != c->cache_gen) {
				ce->stage = sched_eval_node(c, i, r, w, &ce->cd, &nr);
				ce->base =
				    ce->cd.pub.total - (int64_t)w->w[IOD_SCHED_TERM_SPREAD] *
				                           ce->cd.pub.terms[IOD_SCHED_TERM_SPREAD];
				ce->gen = c->cache_gen;
			}
			if (ce->stage != ST_OK)
				continue;
			cd = ce->cd;
			if (spreads) {
				int32_t t = (int32_t)sched_spread_term(c, i);
				cd.pub.terms[IOD_SCHED_TERM_SPREAD] = t;
				cd.pub.total = ce->base + (int64_t)w->w[IOD_SCHED_TERM_SPREAD] * t;
			}
		} else if (sched_eval_node(c, i, r, w, &cd, &nr) != ST_OK) {
			continue;
		}
		if (keep_islands && (cd.pub.gpu_mask & sched_whole_islands(c, i)))
			continue;
		if (x) {
			x->feasible++;
			if (keep)
				top_insert(x, keep, &cd);
		}
		if (!found || cd.pub.total > best->pub.total) {
			*best = cd;
			found = true;
		}
	}
	return found;
}

/* ---- placing a deploy ---------------------------------------------------- */

int iod_sched_result_init(struct iod_sched_result *r, uint32_t cap, uint32_t svc_cap)
{
	memset(r, 0, sizeof(*r));
	r->p = calloc(IOD_MAX(cap, 1u), sizeof(*r->p));
	r->svc = calloc(IOD_MAX(svc_cap, 1u), sizeof(*r->svc));
	if (!r->p || !r->svc) {
		iod_sched_result_free(r);
		return -ENOMEM;
	}
	r->cap = cap;
	r->svc_cap = svc_cap;
	return 0;
}

void iod_sched_result_free(struct iod_sched_result *r)
{
	free(r->p);
	free(r->svc);
	memset(r, 0, sizeof(*r));
}

int sched_request_check(const struct iod_sched_request *r, struct iod_err *e)
{
	if (!r->service[0] || strnlen(r->service, IOD_NAME_MAX) >= IOD_NAME_MAX - 8)
		return iod_err_set(e, -EINVAL, "a service needs a name of 1..%d characters",
		                   IOD_NAME_MAX - 9);
	if (r->gpus > IOD_SCHED_NODE_GPUS_MAX)
		return iod_err_set(e, -EINVAL,
		                   "service %s: %u GPUs per replica exceed the limit of %u",
		                   r->service, r->gpus, IOD_SCHED_NODE_GPUS_MAX);
	if (r->selector_n > IOD_SCHED_LABELS_MAX)
		return iod_err_set(e, -EINVAL, "service %s: %u selector labels (at most %u)",
		                   r->service, r->selector_n, IOD_SCHED_LABELS_MAX);
	if (r->accs > IOD_SCHED_ACCS_MAX || (r->accs && r->acc_type == IOD_SCHED_ACC_NONE) ||
	    (unsigned)r->acc_type > IOD_SCHED_ACC_FPGA)
		return iod_err_set(e, -EINVAL,
		                   "service %s: %u accelerators of type %u (at most %u, of a type)",
		                   r->service, r->accs, (unsigned)r->acc_type, IOD_SCHED_ACCS_MAX);
	if ((unsigned)r->numa > IOD_SCHED_NUMA_SINGLE ||
	    (unsigned)r->anti > IOD_SCHED_DOMAIN_ZONE ||
	    (unsigned)r->gpu_link > IOD_SCHED_LINK_PCIE)
		return iod_err_set(e, -EINVAL, "service %s: invalid policy value", r->service);
	return 0;
}

/* Undo every placement of request index `req` made in this call. */
static void rollback_request(struct iod_sched_cluster *c, struct iod_sched_result *res,
                             uint32_t req, enum iod_sched_reason reason, const char *why)
{
	for (uint32_t i = res->n; i-- > 0;) {
		struct iod_sched_placement *p = &res->p[i];
		if (p->request != req)
			continue;
		if (p->placed) {
			sched_unbind(c, p->replica);
			p->placed = false;
			res->placed_n--;
			res->unplaced_n++;
		}
		if (p->reason == IOD_SCHED_REASON_NONE || reason == IOD_SCHED_REASON_TRANSACTION ||
		    reason == IOD_SCHED_REASON_GANG) {
			if (p->reason == IOD_SCHED_REASON_NONE) {
				p->reason = reason;
				iod_strlcpy(p->why, why, sizeof(p->why));
			}
		}
	}
	res->svc[req].placed = 0;
}

/* The deploy fits the limits and the result's room. */
static int place_check(const struct iod_sched_request *reqs, uint32_t n,
                       const struct iod_sched_result *res, struct iod_err *e)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		int rc = sched_request_check(&reqs[i], e);
		if (rc)
			return rc;
		total += reqs[i].replicas;
	}
	if (total > IOD_SCHED_DEPLOY_MAX)
		return iod_err_set(e, -E2BIG, "a deploy of %llu replicas exceeds the limit of %u",
		                   (unsigned long long)total, IOD_SCHED_DEPLOY_MAX);
	if (total > res->cap - res->n)
		return iod_err_set(e, -ENOSPC, "result has room for %u placements, deploy has %llu",
		                   res->cap - res->n, (unsigned long long)total);
	if (n > res->svc_cap - res->svc_n)
		return iod_err_set(e, -ENOSPC, "result has room for %u services, deploy has %u",
		                   res->svc_cap - res->svc_n, n);
	return 0;
}

/* What one request's replicas carry from one to the next. */
struct req_state {
	uint32_t svc;   /* the service's index in the cluster */
	uint32_t index; /* the request's index in res->svc */
	uint32_t keep;  /* candidates kept for the explanation */
	/* a replica that failed fails again until the cluster changes */
	uint64_t fail_version;
	enum iod_sched_reason fail_reason;
	char fail_why[IOD_SCHED_WHY_MAX];
	bool gang_failed;
	char gang_why[IOD_SCHED_WHY_MAX];
};

/* Bind the chosen candidate and fill the placement from the replica. */
static int place_bound(struct iod_sched_cluster *c, uint32_t ordinal, const struct cand *best,
                       struct req_state *st, struct iod_sched_result *res,
                       struct iod_sched_placement *p, struct iod_err *e)
{
	int rc = sched_bind(c, st->svc, ordinal, best, &p->replica);
	if (rc)
		return iod_err_set(e, rc, "the scheduler's replica table is full (%u)",
		                   c->replicas_max);
	const struct replica *rep = &c->replicas[p->replica];
	p->placed = true;
	p->node = rep->node;
	p->gpu_mask = rep->gpu_mask;
	p->acc_mask = rep->acc_mask;
	p->cpus = rep->cpus;
	sched_placement_affinity(c, rep, &p->cpu_affinity);
	p->mem_numa = rep->mem_numa;
	p->nic = rep->nic;
	sched_counts_add(c, rep->node, 1);
	res->placed_n++;
	res->svc[st->index].placed++;
	return 0;
}

/* Place the next replica of request r. */
static int place_replica(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                         const struct iod_sched_opts *opts, struct req_state *st,
                         struct iod_sched_result *res, struct iod_err *e)
{
	struct iod_sched_service_result *sr = &res->svc[st->index];
	struct iod_sched_placement *p = &res->p[res->n++];
	memset(p, 0, sizeof(*p));
	uint32_t ordinal = c->services[st->svc].next_ordinal++;
	snprintf(p->name, sizeof(p->name), "%s-%u", r->service, ordinal);
	p->request = st->index;
	p->ordinal = ordinal;
	p->mem_numa = -1;
	p->nic = -1;
	if (st->gang_failed) {
		p->reason = IOD_SCHED_REASON_GANG;
		iod_strlcpy(p->why, st->gang_why, sizeof(p->why));
		res->unplaced_n++;
		return 0;
	}
	struct cand best;
	if ((opts->no_cache || st->fail_version != c->version) &&
	    sched_best(c, r, &opts->weights, UINT32_MAX, false, st->keep, !opts->no_cache, &best,
	               &p->explain))
		return place_bound(c, ordinal, &best, st, res, p, e);
	p->explain.cand_n = 0;
	if (!opts->no_cache && st->fail_version == c->version) {
		p->reason = st->fail_reason;
		iod_strlcpy(p->why, st->fail_why, sizeof(p->why));
	} else {
		p->reason = sched_diagnose(c, r, &opts->weights, p->why, sizeof(p->why));
		st->fail_version = c->version;
		st->fail_reason = p->reason;
		iod_strlcpy(st->fail_why, p->why, sizeof(st->fail_why));
	}
	res->unplaced_n++;
	if (sr->reason == IOD_SCHED_REASON_NONE) {
		sr->reason = p->reason;
		snprintf(sr->why, sizeof(sr->why), "%s: %s", p->name, p->why);
	}
	if (r->gang) {
		st->gang_failed = true;
		snprintf(st->gang_why, sizeof(st->gang_why),
		         "gang: all %u replicas or none, and %s cannot be placed: %s", r->replicas,
		         p->name, p->why);
	}
	return 0;
}

/* Place every replica of one request. */
static int place_request(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                         const struct iod_sched_opts *opts, uint32_t keep,
                         struct iod_sched_result *res, struct iod_err *e)
{
	struct req_state st = {
	    .keep = keep, .fail_version = UINT64_MAX, .fail_reason = IOD_SCHED_REASON_NONE};
	int rc = sched_service_get(c, r, &st.svc);
	if (rc)
		return iod_err_set(e, rc, "service %s: too many services (limit %u)", r->service,
		                   IOD_SCHED_SERVICES_MAX);
	sched_counts_load(c, st.svc);
	c->cache_gen++; /* a new request: every cached evaluation is stale */
	if (c->cache_gen == 0)
		c->cache_gen = 1;
	struct iod_sched_service_result *sr = &res->svc[res->svc_n++];
	memset(sr, 0, sizeof(*sr));
	iod_strlcpy(sr->service, r->service, sizeof(sr->service));
	sr->requested = r->replicas;
	st.index = res->svc_n - 1;
	for (uint32_t o = 0; o < r->replicas; o++) {
		rc = place_replica(c, r, opts, &st, res, e);
		if (rc)
			return rc;
	}
	if (st.gang_failed) {
		rollback_request(c, res, st.index, IOD_SCHED_REASON_GANG, st.gang_why);
		sr->reason = IOD_SCHED_REASON_GANG;
		iod_strlcpy(sr->why, st.gang_why, sizeof(sr->why));
	}
	return 0;
}

/* A strict deploy places every service in full or nothing. */
static void place_strict(struct iod_sched_cluster *c, struct iod_sched_result *res,
                         uint32_t first_svc)
{
	const char *failed = NULL;
	for (uint32_t i = first_svc; i < res->svc_n && !failed; i++)
		if (res->svc[i].placed < res->svc[i].requested)
			failed = res->svc[i].service;
	if (!failed)
		return;
	char why[IOD_SCHED_WHY_MAX];
	snprintf(why, sizeof(why),
	         "strict deploy (all services or none): service %s cannot be placed in full",
	         failed);
	for (uint32_t i = res->svc_n; i-- > first_svc;) {
		bool had = res->svc[i].placed > 0;
		rollback_request(c, res, i, IOD_SCHED_REASON_TRANSACTION, why);
		if (had && res->svc[i].reason == IOD_SCHED_REASON_NONE) {
			res->svc[i].reason = IOD_SCHED_REASON_TRANSACTION;
			iod_strlcpy(res->svc[i].why, why, sizeof(res->svc[i].why));
		}
	}
	res->rolled_back = true;
}

int iod_sched_place(struct iod_sched_cluster *c, const struct iod_sched_request *reqs, uint32_t n,
                    const struct iod_sched_opts *opts, struct iod_sched_result *res,
                    struct iod_err *e)
{
	struct iod_sched_opts def;
	if (!opts) {
		iod_sched_opts_default(&def);
		opts = &def;
	}
	int rc = place_check(reqs, n, res, e);
	if (rc)
		return rc;
	const uint32_t keep = IOD_MIN(opts->explain_top, (uint32_t)IOD_SCHED_EXPLAIN_TOP);
	const uint32_t first_svc = res->svc_n;
	for (uint32_t ri = 0; ri < n; ri++) {
		rc = place_request(c, &reqs[ri], opts, keep, res, e);
		if (rc)
			return rc;
	}
	if (opts->strict)
		place_strict(c, res, first_svc);
	IOD_ASSERT(res->placed_n + res->unplaced_n == res->n);
	return 0;
}
