/*
 * tier.c: placement, draining and eviction of checkpoints across storage
 * tiers (pure; include/iod/storage.h). Every decision works on a copy of the
 * pool and is committed whole, so a refused admission changes nothing.
 */
#include "iod/storage.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static const char *const medium_names[IOD_STOR_MEDIA_N] = {"DRAM", "PMem", "NVMe",
                                                           "SSD",  "HDD",  "object"};

int iod_stor_medium_parse(const char *s, enum iod_stor_medium *m, struct iod_err *e)
{
	for (int i = 0; i < IOD_STOR_MEDIA_N; i++) {
		if (s && !strcasecmp(s, medium_names[i])) {
			*m = (enum iod_stor_medium)i;
			return 0;
		}
	}
	return iod_err_set(e, -EINVAL,
	                   "storage medium \"%.60s\" is not known; use DRAM, PMem, NVMe, SSD, "
	                   "HDD or object",
	                   s ? s : "");
}

const char *iod_stor_medium_name(enum iod_stor_medium m)
{
	return (unsigned)m < IOD_STOR_MEDIA_N ? medium_names[m] : "?";
}

static int cfg_check(const struct iod_stor_cfg *c, struct iod_err *e)
{
	uint32_t sum = 0;
	if (c->tiers_n == 0 || c->tiers_n > IOD_STOR_TIERS_MAX)
		return iod_err_set(e, -EINVAL, "storage needs 1 to %d tiers, not %u",
		                   IOD_STOR_TIERS_MAX, c->tiers_n);
	if (c->capacity_bytes == 0)
		return iod_err_set(e, -EINVAL,
		                   "storage capacity is 0 bytes; configure the node's checkpoint "
		                   "capacity (e.g. 100GB)");
	if (c->fast_keep == 0 || c->keep_max == 0)
		return iod_err_set(
		    e, -EINVAL,
		    "storage must keep at least 1 checkpoint (fast_keep %u, keep_max %u)",
		    c->fast_keep, c->keep_max);
	for (uint32_t i = 0; i < c->tiers_n; i++) {
		const struct iod_stor_tier_cfg *t = &c->tiers[i];
		if ((unsigned)t->medium >= IOD_STOR_MEDIA_N)
			return iod_err_set(e, -EINVAL, "storage tier %u: unknown medium %d", i + 1,
			                   (int)t->medium);
		if (t->quota_bp == 0)
			return iod_err_set(e, -EINVAL,
			                   "storage tier %u (%s): quota must be above 0%%", i + 1,
			                   medium_names[t->medium]);
		for (uint32_t j = 0; j < i; j++)
			if (c->tiers[j].medium == t->medium)
				return iod_err_set(e, -EINVAL,
				                   "storage tier %u: medium %s is listed twice "
				                   "(tiers %u and %u)",
				                   i + 1, medium_names[t->medium], j + 1, i + 1);
		sum += t->quota_bp;
		if (sum > 10000)
			return iod_err_set(
			    e, -EINVAL,
			    "storage tier quotas add up to more than 100%% (%u.%02u%% "
			    "after tier %u, %s); lower them",
			    sum / 100, sum % 100, i + 1, medium_names[t->medium]);
	}
	return 0;
}

int iod_stor_pool_init(struct iod_stor_pool *p, const struct iod_stor_cfg *c, struct iod_err *e)
{
	int rc = cfg_check(c, e);
	if (rc)
		return rc;
	memset(p, 0, sizeof(*p));
	p->fast_keep = c->fast_keep;
	p->keep_max = c->keep_max;
	/* fastest first: insertion by medium rank (each medium at most once) */
	for (int m = 0; m < IOD_STOR_MEDIA_N; m++) {
		for (uint32_t i = 0; i < c->tiers_n; i++) {
			if ((int)c->tiers[i].medium != m)
				continue;
			struct iod_stor_tier *t = &p->tiers[p->tiers_n++];
			t->medium = c->tiers[i].medium;
			t->quota_bp = c->tiers[i].quota_bp;
			/* exact: capacity < 2^64 / 10^4 is not assumed */
			t->quota_bytes = c->capacity_bytes / 10000 * t->quota_bp +
			                 c->capacity_bytes % 10000 * t->quota_bp / 10000;
		}
	}
	return 0;
}

static uint64_t tier_free(const struct iod_stor_pool *p, uint32_t t)
{
	const struct iod_stor_tier *x = &p->tiers[t];
	return x->used_bytes >= x->quota_bytes ? 0 : x->quota_bytes - x->used_bytes;
}

static int64_t latest_idx(const struct iod_stor_pool *p)
{
	for (uint32_t i = p->n; i-- > 0;)
		if (p->ck[i].state == IOD_STOR_COMPLETE)
			return i;
	return -1;
}

const struct iod_stor_ckpt *iod_stor_latest(const struct iod_stor_pool *p)
{
	int64_t i = latest_idx(p);
	return i < 0 ? NULL : &p->ck[i];
}

const struct iod_stor_ckpt *iod_stor_find(const struct iod_stor_pool *p, uint64_t step)
{
	for (uint32_t i = 0; i < p->n; i++)
		if (p->ck[i].step == step)
			return &p->ck[i];
	return NULL;
}

static int push(struct iod_stor_acts *a, enum iod_stor_act_kind k, const struct iod_stor_ckpt *c,
                uint32_t from, uint32_t to)
{
	if (a->n >= IOD_STOR_ACTS_MAX)
		return -ENOBUFS;
	a->a[a->n++] = (struct iod_stor_act){k, c->step, c->bytes, from, to};
	return 0;
}

static void remove_at(struct iod_stor_pool *p, uint32_t i)
{
	p->tiers[p->ck[i].tier].used_bytes -= p->ck[i].bytes;
	memmove(&p->ck[i], &p->ck[i + 1], sizeof(p->ck[0]) * (p->n - i - 1));
	p->n--;
}

static int evict(struct iod_stor_pool *p, uint32_t i, struct iod_stor_acts *a)
{
	int rc = push(a, IOD_STOR_ACT_EVICT, &p->ck[i], p->ck[i].tier, p->ck[i].tier);
	if (!rc)
		remove_at(p, i);
	return rc;
}

static int make_room(struct iod_stor_pool *p, uint32_t t, uint64_t need, struct iod_stor_acts *a);

/* Move checkpoint i one tier or more down, making room there; the pool and
 * actions are changed only on success. */
static int move_down(struct iod_stor_pool *p, uint32_t i, struct iod_stor_acts *a)
{
	struct iod_stor_pool trial, *q = &trial; /* recursion is at most a tier deep */
	uint32_t from = p->ck[i].tier;
	for (uint32_t to = from + 1; to < p->tiers_n; to++) {
		uint32_t an = a->n;
		if (p->ck[i].bytes > p->tiers[to].quota_bytes)
			continue;
		*q = *p;
		/* the moving checkpoint keeps its place in the table: find it by step */
		uint64_t step = p->ck[i].step;
		if (make_room(q, to, p->ck[i].bytes, a) == 0) {
			const struct iod_stor_ckpt *c = iod_stor_find(q, step);
			uint32_t k = (uint32_t)(c - q->ck);
			if (push(a, IOD_STOR_ACT_MOVE, c, from, to) == 0) {
				q->tiers[from].used_bytes -= c->bytes;
				q->tiers[to].used_bytes += c->bytes;
				q->ck[k].tier = to;
				*p = *q;
				return 0;
			}
		}
		a->n = an;
	}
	return -ENOSPC;
}

/* Free `need` bytes in tier t: the oldest complete checkpoints there move down
 * or, where no slower tier takes them, are evicted; never the newest complete
 * one (it may move) and never one being written. */
static int make_room(struct iod_stor_pool *p, uint32_t t, uint64_t need, struct iod_stor_acts *a)
{
	if (need > p->tiers[t].quota_bytes)
		return -ENOSPC;
	while (tier_free(p, t) < need) {
		int64_t newest = latest_idx(p);
		int64_t v = -1;
		for (uint32_t i = 0; i < p->n && v < 0; i++)
			if (p->ck[i].tier == t && p->ck[i].state == IOD_STOR_COMPLETE)
				v = i;
		if (v < 0)
			return -ENOSPC;
		if (move_down(p, (uint32_t)v, a) == 0)
			continue;
		if (v == newest || evict(p, (uint32_t)v, a))
			return -ENOSPC;
	}
	return 0;
}

static int why_full(const struct iod_stor_pool *p, uint64_t step, uint64_t bytes, struct iod_err *e)
{
	const struct iod_stor_tier *t = &p->tiers[0];
	uint32_t writing = 0;
	const struct iod_stor_ckpt *l = iod_stor_latest(p);
	uint64_t biggest = 0;
	for (uint32_t i = 0; i < p->tiers_n; i++)
		if (p->tiers[i].quota_bytes > biggest)
			biggest = p->tiers[i].quota_bytes;
	for (uint32_t i = 0; i < p->n; i++)
		writing += p->ck[i].state == IOD_STOR_WRITING;
	if (bytes > biggest)
		return iod_err_set(e, -ENOSPC,
		                   "checkpoint step %llu (%llu bytes) is larger than every storage "
		                   "tier (largest quota %llu bytes); raise the node's capacity",
		                   (unsigned long long)step, (unsigned long long)bytes,
		                   (unsigned long long)biggest);
	return iod_err_set(e, -ENOSPC,
	                   "storage is full: no tier can take checkpoint step %llu (%llu bytes); "
	                   "%s holds %llu of %llu bytes, %u checkpoint(s) being written, newest "
	                   "complete step %llu is kept; wait for the save in flight to finish "
	                   "(nothing was evicted)",
	                   (unsigned long long)step, (unsigned long long)bytes,
	                   iod_stor_medium_name(t->medium), (unsigned long long)t->used_bytes,
	                   (unsigned long long)t->quota_bytes, writing,
	                   l ? (unsigned long long)l->step : 0ull);
}

static int insert(struct iod_stor_pool *p, uint64_t step, uint64_t bytes, uint32_t tier,
                  enum iod_stor_state st, struct iod_err *e)
{
	uint32_t at = p->n;
	if (p->n >= IOD_STOR_CKPTS_MAX)
		return iod_err_set(e, -ENOBUFS,
		                   "storage holds %d checkpoints already (IOD_STOR_CKPTS_MAX)",
		                   IOD_STOR_CKPTS_MAX);
	while (at > 0 && p->ck[at - 1].step > step)
		at--;
	if (at > 0 && p->ck[at - 1].step == step)
		return iod_err_set(e, -EEXIST, "checkpoint step %llu exists already",
		                   (unsigned long long)step);
	memmove(&p->ck[at + 1], &p->ck[at], sizeof(p->ck[0]) * (p->n - at));
	p->ck[at] = (struct iod_stor_ckpt){step, bytes, tier, st};
	p->n++;
	p->tiers[tier].used_bytes += bytes;
	return 0;
}

int iod_stor_admit(struct iod_stor_pool *p, uint64_t step, uint64_t bytes,
                   struct iod_stor_acts *acts, struct iod_err *e)
{
	struct iod_stor_pool q;
	acts->n = 0;
	if (p->n && p->ck[p->n - 1].step >= step)
		return iod_err_set(e, -ERANGE,
		                   "checkpoint step %llu is not after the newest one (%llu); steps "
		                   "only go forward",
		                   (unsigned long long)step,
		                   (unsigned long long)p->ck[p->n - 1].step);
	if (p->n >= IOD_STOR_CKPTS_MAX)
		return insert(p, step, bytes, 0, IOD_STOR_WRITING, e);
	for (uint32_t t = 0; t < p->tiers_n; t++) {
		q = *p;
		acts->n = 0;
		if (make_room(&q, t, bytes, acts) ||
		    insert(&q, step, bytes, t, IOD_STOR_WRITING, e))
			continue;
		if (push(acts, IOD_STOR_ACT_WRITE, &q.ck[q.n - 1], t, t))
			continue;
		*p = q;
		return 0;
	}
	acts->n = 0;
	return why_full(p, step, bytes, e);
}

static int64_t index_of(const struct iod_stor_pool *p, uint64_t step)
{
	const struct iod_stor_ckpt *c = iod_stor_find(p, step);
	return c ? c - p->ck : -1;
}

int iod_stor_commit(struct iod_stor_pool *p, uint64_t step, struct iod_stor_acts *acts,
                    struct iod_err *e)
{
	int64_t i = index_of(p, step);
	uint64_t drain[IOD_STOR_CKPTS_MAX];
	uint32_t fast = 0, complete = 0, nd = 0;
	acts->n = 0;
	if (i < 0 || p->ck[i].state != IOD_STOR_WRITING)
		return iod_err_set(e, -ENOENT, "no checkpoint step %llu is being written",
		                   (unsigned long long)step);
	p->ck[i].state = IOD_STOR_COMPLETE;
	/* drain: beyond the newest fast_keep complete ones, the fast tier's move down */
	for (uint32_t k = p->n; k-- > 0;)
		if (p->ck[k].state == IOD_STOR_COMPLETE && p->ck[k].tier == 0 &&
		    ++fast > p->fast_keep)
			drain[nd++] = p->ck[k].step;
	/* oldest first; a move may evict others, so each is found again by step */
	while (nd-- > 0) {
		int64_t k = index_of(p, drain[nd]);
		if (k >= 0)
			(void)move_down(p, (uint32_t)k,
			                acts); /* stays fast when nothing has room */
	}
	/* retention by age: the oldest complete ones beyond keep_max */
	for (uint32_t k = 0; k < p->n; k++)
		complete += p->ck[k].state == IOD_STOR_COMPLETE;
	for (uint32_t k = 0; k < p->n && complete > p->keep_max;) {
		if (p->ck[k].state == IOD_STOR_COMPLETE && evict(p, k, acts) == 0)
			complete--;
		else
			k++;
	}
	return 0;
}

int iod_stor_abort(struct iod_stor_pool *p, uint64_t step, struct iod_err *e)
{
	int64_t i = index_of(p, step);
	if (i < 0 || p->ck[i].state != IOD_STOR_WRITING)
		return iod_err_set(e, -ENOENT, "no checkpoint step %llu is being written",
		                   (unsigned long long)step);
	remove_at(p, (uint32_t)i);
	return 0;
}

int iod_stor_adopt(struct iod_stor_pool *p, uint64_t step, uint64_t bytes, uint32_t tier,
                   struct iod_err *e)
{
	if (tier >= p->tiers_n)
		return iod_err_set(e, -EINVAL, "checkpoint step %llu: tier %u is not configured",
		                   (unsigned long long)step, tier);
	return insert(p, step, bytes, tier, IOD_STOR_COMPLETE, e);
}

int iod_stor_replicas_check(uint32_t replicas, uint32_t nodes, uint32_t domains, struct iod_err *e)
{
	if (replicas == 0 || replicas > IOD_STOR_REPLICAS_MAX)
		return iod_err_set(e, -EINVAL, "storage replicas must be 1 to %d, not %u",
		                   IOD_STOR_REPLICAS_MAX, replicas);
	if (replicas > nodes)
		return iod_err_set(e, -EINVAL,
		                   "storage replicas %u need %u nodes, the cluster has %u; lower "
		                   "replicas or add nodes",
		                   replicas, replicas, nodes);
	if (replicas > domains)
		return iod_err_set(e, -EINVAL,
		                   "storage replicas %u need %u failure domains (rack/zone), the "
		                   "cluster's %u nodes are in %u; lower replicas or label nodes",
		                   replicas, replicas, nodes, domains);
	return 0;
}
