/*
 * invariants.c: the bank and append checkers of `iod chaos` (include/iod/
 * chaos.h), pure: a parsed history in, counts and the first findings out.
 *
 * Neither needs a search. Bank (Jepsen's): transfers move money between
 * two accounts in one compare-and-set transaction, so every read of all
 * accounts must sum to the opening total, with no account negative. Append
 * (a per-key list, appended to with compare-and-set): lists only grow, so
 * every read of a key is a prefix of its final read; real time orders the
 * acknowledged appends (one acknowledged before another was invoked comes
 * first) and bounds the reads (one that began after an append was
 * acknowledged holds it).
 */
#include "iod/chaos.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- bank ------------------------------------------------------------------ */

static bool bank_read_ok(const struct iod_chaos_history *h, const struct iod_chaos_op *o,
                         uint32_t accounts, int64_t total, int64_t *sum)
{
	bool ok = o->set_n == accounts;
	*sum = 0;
	for (uint32_t j = 0; j < o->set_n; j++) {
		int64_t b = h->vals[o->set_off + j];
		ok &= b >= 0;
		*sum += b;
	}
	return ok && *sum == total;
}

int iod_chaos_check_bank(const struct iod_chaos_history *h, uint32_t accounts, int64_t total,
                         struct iod_chaos_bank_result *r, struct iod_err *e)
{
	(void)e;
	memset(r, 0, sizeof(*r));
	r->first_bad = IOD_CHAOS_NONE;
	for (uint32_t i = 0; i < h->n; i++) {
		const struct iod_chaos_op *o = &h->ops[i];
		if (o->f == IOD_CHAOS_TRANSFER && o->res == IOD_CHAOS_OK)
			r->acknowledged++;
		if (o->f != IOD_CHAOS_READ || o->res != IOD_CHAOS_OK || !o->is_set)
			continue;
		r->reads++;
		int64_t sum;
		if (bank_read_ok(h, o, accounts, total, &sum))
			continue;
		if (r->bad_reads++ == 0) {
			r->first_bad = i;
			r->first_total = sum;
		}
	}
	r->no_read = r->reads == 0;
	r->ok = !r->no_read && r->bad_reads == 0;
	return 0;
}

/* ---- append ---------------------------------------------------------------- */

const char *iod_chaos_append_anomaly_name(enum iod_chaos_append_anomaly a)
{
	static const char *const names[] = {"lost",       "reordered", "duplicate",
	                                    "unexpected", "diverged",  "stale"};
	return (unsigned)a < IOD_CHAOS_APP_KINDS ? names[a] : "?";
}

static void found(struct iod_chaos_append_result *r, enum iod_chaos_append_anomaly k, uint32_t key,
                  int64_t v, uint32_t op, uint32_t other)
{
	r->count[k]++;
	if (r->nfound < IOD_CHAOS_APPEND_FINDINGS)
		r->found[r->nfound++] = (struct iod_chaos_append_finding){k, key, v, op, other};
}

/* A value and where it sits in the final list. */
struct vpos {
	int64_t v;
	uint32_t pos;
};

static int cmp_vpos(const void *a, const void *b)
{
	int64_t x = ((const struct vpos *)a)->v, y = ((const struct vpos *)b)->v;
	return (x > y) - (x < y);
}

/* Position of v in the sorted index, or UINT32_MAX. */
static uint32_t pos_of(const struct vpos *ix, uint32_t n, int64_t v)
{
	struct vpos k = {v, 0};
	const struct vpos *p = n ? bsearch(&k, ix, n, sizeof(k), cmp_vpos) : NULL;
	return p ? p->pos : UINT32_MAX;
}

/* An acknowledged append: when it completed, where the final read has it. */
struct acked {
	uint32_t cmp, pos, op;
};

static int cmp_acked(const void *a, const void *b)
{
	uint32_t x = ((const struct acked *)a)->cmp, y = ((const struct acked *)b)->cmp;
	return (x > y) - (x < y);
}

/* The acked append (completed before event ev) that the final list holds
 * furthest along: its index into a (sorted by cmp, with prefix maxima in
 * best[]), or UINT32_MAX when none completed before ev. */
static uint32_t furthest_before(const struct acked *a, const uint32_t *best, uint32_t n,
                                uint32_t ev)
{
	uint32_t lo = 0, hi = n; /* first index with cmp >= ev */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (a[mid].cmp < ev)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? best[lo - 1] : UINT32_MAX;
}

/* The state of one key's check. */
struct keyck {
	const struct iod_chaos_history *h;
	uint32_t key;
	const struct iod_chaos_op *fin; /* the final read, or NULL */
	struct vpos *ix;                /* the final read's values, sorted */
	uint32_t nix;
	struct acked *a; /* the key's acked appends in the final read, by cmp */
	uint32_t na;
	uint32_t *best; /* best[i]: index in a of the largest pos in a[0..i] */
	int64_t *w;     /* values ok or indeterminate appends wrote to the key, sorted */
	uint32_t nw;
	struct iod_chaos_append_result *r;
};

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static bool written(const struct keyck *k, int64_t v)
{
	return k->nw && bsearch(&v, k->w, k->nw, sizeof(v), cmp_i64) != NULL;
}

static void check_values(struct keyck *k, const struct iod_chaos_op *o, uint32_t i)
{
	for (uint32_t j = 0; j < o->set_n; j++)
		if (!written(k, k->h->vals[o->set_off + j]))
			found(k->r, IOD_CHAOS_APP_UNEXPECTED, k->key, k->h->vals[o->set_off + j], i,
			      IOD_CHAOS_NONE);
}

/* The final read: no value twice (ix is sorted by value), none unwritten. */
static void check_final(struct keyck *k)
{
	uint32_t i = (uint32_t)(k->fin - k->h->ops);
	for (uint32_t j = 1; j < k->nix; j++)
		if (k->ix[j].v == k->ix[j - 1].v)
			found(k->r, IOD_CHAOS_APP_DUPLICATE, k->key, k->ix[j].v, i, IOD_CHAOS_NONE);
	check_values(k, k->fin, i);
}

/* One ok read of the key against the final read and the acked appends. */
static void check_read(struct keyck *k, uint32_t i)
{
	const struct iod_chaos_history *h = k->h;
	const struct iod_chaos_op *o = &h->ops[i];
	bool prefix = o->set_n <= k->fin->set_n;
	for (uint32_t j = 0; prefix && j < o->set_n; j++)
		prefix = h->vals[o->set_off + j] == h->vals[k->fin->set_off + j];
	if (!prefix) {
		found(k->r, IOD_CHAOS_APP_DIVERGED, k->key, 0, i, IOD_CHAOS_NONE);
		check_values(k, o, i);
		return;
	}
	/* stale: an append acked before this read began sits past its end */
	uint32_t b = furthest_before(k->a, k->best, k->na, o->inv);
	if (b != UINT32_MAX && k->a[b].pos >= o->set_n)
		found(k->r, IOD_CHAOS_APP_STALE, k->key, h->vals[k->fin->set_off + k->a[b].pos], i,
		      k->a[b].op);
}

/* Acked appends of the key: lost when not in the final read, reordered
 * when one acked before it was invoked sits after it. */
static int check_appends(struct keyck *k)
{
	const struct iod_chaos_history *h = k->h;
	for (uint32_t i = 0; i < h->n; i++) {
		const struct iod_chaos_op *o = &h->ops[i];
		if (o->f != IOD_CHAOS_APPEND || o->key != k->key || o->res != IOD_CHAOS_OK)
			continue;
		k->r->acknowledged++;
		uint32_t p = k->fin ? pos_of(k->ix, k->nix, o->value) : UINT32_MAX;
		if (p == UINT32_MAX)
			found(k->r, IOD_CHAOS_APP_LOST, k->key, o->value, i,
			      k->fin ? (uint32_t)(k->fin - h->ops) : IOD_CHAOS_NONE);
		else
			k->a[k->na++] = (struct acked){o->cmp, p, i};
	}
	qsort(k->a, k->na, sizeof(*k->a), cmp_acked);
	for (uint32_t i = 0; i < k->na; i++)
		k->best[i] = i && k->a[k->best[i - 1]].pos > k->a[i].pos ? k->best[i - 1] : i;
	for (uint32_t i = 0; i < k->na; i++) {
		const struct iod_chaos_op *o = &h->ops[k->a[i].op];
		uint32_t b = furthest_before(k->a, k->best, k->na, o->inv);
		if (b != UINT32_MAX && k->a[b].pos > k->a[i].pos)
			found(k->r, IOD_CHAOS_APP_REORDERED, k->key, o->value, k->a[i].op,
			      k->a[b].op);
	}
	return 0;
}

static int check_key(const struct iod_chaos_history *h, uint32_t key,
                     struct iod_chaos_append_result *r)
{
	struct keyck k = {.h = h, .key = key, .r = r};
	for (uint32_t i = 0; i < h->n; i++) {
		const struct iod_chaos_op *o = &h->ops[i];
		if (o->f == IOD_CHAOS_READ && o->key == key && o->res == IOD_CHAOS_OK &&
		    o->is_set && (k.fin == NULL || o->cmp > k.fin->cmp))
			k.fin = o;
	}
	uint32_t nfin = k.fin ? k.fin->set_n : 0;
	int rc = 0;
	k.ix = malloc(((size_t)nfin + 1) * sizeof(*k.ix));
	k.a = malloc(((size_t)h->n + 1) * sizeof(*k.a));
	k.best = malloc(((size_t)h->n + 1) * sizeof(*k.best));
	k.w = malloc(((size_t)h->n + 1) * sizeof(*k.w));
	if (!k.ix || !k.a || !k.best || !k.w) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < h->n; i++) {
		const struct iod_chaos_op *o = &h->ops[i];
		if (o->f == IOD_CHAOS_APPEND && o->key == key && o->res != IOD_CHAOS_FAIL &&
		    o->has_value)
			k.w[k.nw++] = o->value;
	}
	qsort(k.w, k.nw, sizeof(*k.w), cmp_i64);
	for (uint32_t j = 0; j < nfin; j++)
		k.ix[k.nix++] = (struct vpos){h->vals[k.fin->set_off + j], j};
	qsort(k.ix, k.nix, sizeof(*k.ix), cmp_vpos);
	check_appends(&k);
	if (k.fin)
		check_final(&k);
	for (uint32_t i = 0; k.fin && i < h->n; i++) {
		const struct iod_chaos_op *o = &h->ops[i];
		if (o->f == IOD_CHAOS_READ && o->key == key && o->res == IOD_CHAOS_OK &&
		    o->is_set && o != k.fin)
			check_read(&k, i);
	}
out:
	free(k.ix);
	free(k.a);
	free(k.best);
	free(k.w);
	return rc;
}

int iod_chaos_check_append(const struct iod_chaos_history *h, struct iod_chaos_append_result *r,
                           struct iod_err *e)
{
	memset(r, 0, sizeof(*r));
	/* the keys, each once (a history has few) */
	uint32_t *keys = malloc(((size_t)h->n + 1) * sizeof(*keys)), nk = 0;
	if (!keys)
		return iod_err_set(e, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < h->n; i++) {
		const struct iod_chaos_op *o = &h->ops[i];
		if (o->f != IOD_CHAOS_APPEND && o->f != IOD_CHAOS_READ)
			continue;
		if (o->f == IOD_CHAOS_READ && o->res == IOD_CHAOS_OK && o->is_set)
			r->reads++;
		uint32_t j = 0;
		while (j < nk && keys[j] != o->key)
			j++;
		if (j == nk)
			keys[nk++] = o->key;
	}
	for (uint32_t j = 0; j < nk; j++)
		if (check_key(h, keys[j], r) < 0) {
			free(keys);
			return iod_err_set(e, -ENOMEM, "out of memory");
		}
	free(keys);
	r->ok = true;
	for (int k = 0; k < IOD_CHAOS_APP_KINDS; k++)
		r->ok &= r->count[k] == 0;
	return 0;
}
