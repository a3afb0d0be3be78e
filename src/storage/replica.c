/*
 * replica.c: the replication core of checkpoint storage (include/iod/storage.h,
 * docs/storage.md): where a checkpoint's copies go (one per failure domain),
 * the health of its copies in Ceph's words (degraded, undersized, ...), when
 * its manifest may be committed (the write quorum: every chunk on min_size
 * live copies), the repair plan for missing or corrupt chunk copies, and the
 * scrub's rate.
 *
 * Pure: the shell (agents exchanging chunks over HTTP, the Raft commit of the
 * manifest) passes in what it knows and carries out what is decided. Never
 * reads a clock, a file or a socket.
 */
#include "iod/storage.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char *zone_of(const struct iod_stor_node *n)
{
	return n->zone ? n->zone : "default";
}

/* Same rack: both labelled with the same rack in the same zone. A node
 * without a rack label is its own rack (the scheduler's rule). */
static bool same_rack(const struct iod_stor_node *a, const struct iod_stor_node *b)
{
	return a == b ||
	       (a->rack && b->rack && !strcmp(a->rack, b->rack) && !strcmp(zone_of(a), zone_of(b)));
}

static bool same_zone(const struct iod_stor_node *a, const struct iod_stor_node *b)
{
	return !strcmp(zone_of(a), zone_of(b));
}

/* Is candidate c better than best b? Most free bytes, then name. */
static bool better(const struct iod_stor_node *c, const struct iod_stor_node *b)
{
	if (!b)
		return true;
	if (c->free_bytes != b->free_bytes)
		return c->free_bytes > b->free_bytes;
	return strcmp(c->name ? c->name : "", b->name ? b->name : "") < 0;
}

int iod_stor_place(const struct iod_stor_node *nodes, uint32_t n, const uint32_t *keep,
                   uint32_t keep_n, uint32_t size, uint64_t bytes, uint32_t *out, struct iod_err *e)
{
	uint32_t k = 0;
	if (size == 0 || size > IOD_STOR_REPLICAS_MAX)
		return iod_err_set(e, -EINVAL, "storage replicas must be 1 to %d, not %u",
		                   IOD_STOR_REPLICAS_MAX, size);
	if (keep_n > size)
		return iod_err_set(e, -EINVAL, "%u copies kept, more than the %u wanted", keep_n,
		                   size);
	for (uint32_t i = 0; i < keep_n; i++) {
		if (keep[i] >= n)
			return iod_err_set(e, -EINVAL, "kept copy %u: node %u of %u", i, keep[i],
			                   n);
		for (uint32_t j = 0; j < i; j++)
			if (keep[j] == keep[i])
				return iod_err_set(e, -EINVAL, "node %s holds two copies",
				                   nodes[keep[i]].name);
		out[k++] = keep[i];
	}
	while (k < size) {
		const struct iod_stor_node *best = NULL;
		uint32_t bi = 0;
		/* pass 0: a new zone; pass 1: a new rack in a used zone */
		for (int pass = 0; pass < 2 && !best; pass++) {
			for (uint32_t c = 0; c < n; c++) {
				const struct iod_stor_node *x = &nodes[c];
				bool ok = x->up && x->free_bytes >= bytes;
				for (uint32_t j = 0; ok && j < k; j++)
					ok = pass ? !same_rack(x, &nodes[out[j]])
					          : !same_zone(x, &nodes[out[j]]);
				if (ok && better(x, best))
					best = x, bi = c;
			}
		}
		if (!best) {
			uint32_t live = 0;
			for (uint32_t c = 0; c < n; c++)
				live += nodes[c].up && nodes[c].free_bytes >= bytes;
			return iod_err_set(
			    e, -ENOSPC,
			    "storage replicas %u: only %u node(s) in distinct failure "
			    "domains (rack/zone) are alive with room for %" PRIu64
			    " bytes (%u live node(s) with room of %u); the checkpoint "
			    "would be undersized",
			    size, k, bytes, live, n);
		}
		out[k++] = bi;
	}
	return 0;
}

static int view_check(const struct iod_stor_rview *v, struct iod_err *e)
{
	if (v->size == 0 || v->size > IOD_STOR_REPLICAS_MAX || v->min_size == 0 ||
	    v->min_size > v->size || v->copies_n > v->size)
		return iod_err_set(e, -EINVAL,
		                   "replication: size %u, min_size %u, %u copies: need 1 <= "
		                   "min_size <= size <= %d and copies <= size",
		                   v->size, v->min_size, v->copies_n, IOD_STOR_REPLICAS_MAX);
	if (v->chunks_n && !v->good)
		return iod_err_set(e, -EINVAL, "replication: %u chunks without copy bits",
		                   v->chunks_n);
	return 0;
}

/* Live verified copies of chunk c. */
static uint32_t live_good(const struct iod_stor_rview *v, uint32_t c)
{
	uint32_t k = 0;
	for (uint32_t r = 0; r < v->copies_n; r++)
		k += v->up[r] && (v->good[c] >> r & 1u);
	return k;
}

int iod_stor_health_get(const struct iod_stor_rview *v, struct iod_stor_health *h,
                        struct iod_err *e)
{
	int rc = view_check(v, e);
	memset(h, 0, sizeof(*h));
	if (rc)
		return rc;
	for (uint32_t r = 0; r < v->copies_n; r++)
		h->up_n += v->up[r];
	h->copies_min = v->chunks_n ? UINT32_MAX : h->up_n;
	for (uint32_t c = 0; c < v->chunks_n; c++) {
		uint32_t k = live_good(v, c);
		h->chunks_degraded += k < v->size;
		h->chunks_lost += k == 0;
		if (k < h->copies_min)
			h->copies_min = k;
	}
	if (h->up_n < v->size)
		h->flags |= IOD_STOR_H_UNDERSIZED;
	if (h->up_n < v->min_size)
		h->flags |= IOD_STOR_H_INACTIVE;
	if (h->chunks_degraded || h->up_n < v->size)
		h->flags |= IOD_STOR_H_DEGRADED;
	if (h->chunks_lost)
		h->flags |= IOD_STOR_H_LOST;
	h->commit_ok = h->copies_min >= v->min_size && h->up_n >= v->min_size;
	return 0;
}

const char *iod_stor_health_name(uint32_t flags, char *buf, size_t cap)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} words[] = {{IOD_STOR_H_INACTIVE, "inactive"},
	             {IOD_STOR_H_UNDERSIZED, "undersized"},
	             {IOD_STOR_H_DEGRADED, "degraded"},
	             {IOD_STOR_H_LOST, "lost"}};
	size_t off = 0;
	if (!cap)
		return buf;
	buf[0] = 0;
	if (!flags) {
		snprintf(buf, cap, "clean");
		return buf;
	}
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (!(flags & words[i].bit))
			continue;
		int w = snprintf(buf + off, cap - off, "%s%s", off ? "+" : "", words[i].name);
		if (w < 0 || (size_t)w >= cap - off)
			break;
		off += (size_t)w;
	}
	return buf;
}

int iod_stor_repair_plan(const struct iod_stor_rview *v, struct iod_stor_repair *out, uint32_t max,
                         uint32_t *n, uint32_t *lost, struct iod_err *e)
{
	int rc = view_check(v, e);
	uint32_t k = 0;
	*n = 0;
	*lost = 0;
	if (rc)
		return rc;
	for (uint32_t c = 0; c < v->chunks_n; c++) {
		uint32_t from = UINT32_MAX;
		for (uint32_t r = 0; r < v->copies_n && from == UINT32_MAX; r++)
			if (v->up[r] && (v->good[c] >> r & 1u))
				from = r;
		if (from == UINT32_MAX) {
			++*lost;
			continue;
		}
		for (uint32_t r = 0; r < v->copies_n; r++) {
			if (!v->up[r] || (v->good[c] >> r & 1u))
				continue;
			if (k == max) {
				*n = k;
				return -EAGAIN;
			}
			out[k++] = (struct iod_stor_repair){c, from, r};
		}
	}
	*n = k;
	return 0;
}

uint64_t iod_stor_scrub_budget(uint64_t rate_bytes_per_s, uint64_t elapsed_ns,
                               uint64_t carried_bytes)
{
	/* a second or more refills the bucket; below, both products stay under 2^64 */
	if (elapsed_ns >= 1000000000ull)
		return rate_bytes_per_s;
	uint64_t add = rate_bytes_per_s / 1000000000ull * elapsed_ns +
	               rate_bytes_per_s % 1000000000ull * elapsed_ns / 1000000000ull;
	uint64_t b = carried_bytes + add;
	if (b < carried_bytes || b > rate_bytes_per_s)
		b = rate_bytes_per_s; /* at most one second of rate */
	return b;
}

int iod_stor_rereplicate_plan(const struct iod_stor_node *nodes, uint32_t n, const uint32_t *copies,
                              uint32_t copies_n, const uint8_t *good, uint32_t chunks_n,
                              uint32_t size, uint64_t bytes, struct iod_stor_rereplica *out,
                              struct iod_stor_repair *rep, uint32_t max, uint32_t *rep_n,
                              struct iod_err *e)
{
	uint32_t keep[IOD_STOR_REPLICAS_MAX], old_of[IOD_STOR_REPLICAS_MAX], keep_n = 0;
	uint32_t placed[IOD_STOR_REPLICAS_MAX];
	*rep_n = 0;
	if (!size || size > IOD_STOR_REPLICAS_MAX || !copies_n || copies_n > size ||
	    chunks_n > IOD_CKPT_CHUNKS_MAX || (chunks_n && !good))
		return iod_err_set(
		    e, -EINVAL,
		    "re-replication: %u of %u copies, %u chunks: outside 1..%d copies "
		    "and %d chunks",
		    copies_n, size, chunks_n, IOD_STOR_REPLICAS_MAX, IOD_CKPT_CHUNKS_MAX);
	for (uint32_t r = 0; r < copies_n; r++) {
		if (copies[r] >= n)
			return iod_err_set(e, -EINVAL,
			                   "re-replication: copy %u names node %u of %u", r,
			                   copies[r], n);
		if (nodes[copies[r]].up) {
			old_of[keep_n] = r;
			keep[keep_n++] = copies[r];
		}
	}
	memset(out, 0, offsetof(struct iod_stor_rereplica, good));
	out->dead_n = copies_n - keep_n;
	/* every chunk needs a surviving verified copy to copy from */
	for (uint32_t c = 0; c < chunks_n; c++) {
		uint8_t g = 0;
		for (uint32_t k = 0; k < keep_n; k++)
			g |= (uint8_t)((good[c] >> old_of[k] & 1u) << k);
		if (!g)
			return iod_err_set(
			    e, -ENOENT,
			    "re-replication: chunk %u has no verified copy on a live "
			    "node (lost); nothing to copy from",
			    c);
		out->good[c] = g;
	}
	/* replacements: as many as the live failure domains give, up to size */
	uint32_t want = size, got = keep_n;
	struct iod_err pe = {0};
	for (; want > keep_n; want--)
		if (!iod_stor_place(nodes, n, keep, keep_n, want, bytes, placed, &pe)) {
			got = want;
			break;
		}
	if (got == keep_n) {
		if (keep_n < size)
			return iod_err_set(e, -ENOSPC,
			                   "re-replication: %u of %u copies live and no other live "
			                   "node in a new failure domain has room for %llu bytes "
			                   "(stays undersized): %s",
			                   keep_n, size, (unsigned long long)bytes, pe.msg);
		memcpy(placed, keep, keep_n * sizeof(*keep));
	}
	memcpy(out->nodes, placed, got * sizeof(*placed));
	out->nodes_n = got;
	out->kept_n = keep_n;
	out->added_n = got - keep_n;
	/* the repairs: fill the new copies from the survivors */
	struct iod_stor_rview v = {
	    .size = size, .min_size = 1, .copies_n = got, .good = out->good, .chunks_n = chunks_n};
	for (uint32_t r = 0; r < got; r++)
		v.up[r] = true;
	uint32_t lost = 0;
	return iod_stor_repair_plan(&v, rep, max, rep_n, &lost, e);
}

int iod_stor_rereplicate_result(const struct iod_stor_rereplica *p, const bool *made, uint32_t size,
                                uint32_t min_size, uint32_t *nodes_out, uint32_t *nodes_n,
                                struct iod_stor_health *h, struct iod_err *e)
{
	*nodes_n = 0;
	if (p->nodes_n > IOD_STOR_REPLICAS_MAX || p->kept_n > p->nodes_n || !size ||
	    size > IOD_STOR_REPLICAS_MAX || !min_size || min_size > size)
		return iod_err_set(e, -EINVAL,
		                   "re-replication result: %u copies (%u kept), size %u, "
		                   "min_size %u outside the limits",
		                   p->nodes_n, p->kept_n, size, min_size);
	for (uint32_t k = 0; k < p->nodes_n; k++)
		if (k < p->kept_n || made[k - p->kept_n])
			nodes_out[(*nodes_n)++] = p->nodes[k];
	/* each listed copy holds every chunk: one chunk stands for all */
	uint8_t good = (uint8_t)((1u << *nodes_n) - 1);
	struct iod_stor_rview v = {.size = IOD_MAX(size, *nodes_n),
	                           .min_size = min_size,
	                           .copies_n = *nodes_n,
	                           .good = &good,
	                           .chunks_n = 1};
	for (uint32_t k = 0; k < *nodes_n; k++)
		v.up[k] = true;
	return iod_stor_health_get(&v, h, e);
}
