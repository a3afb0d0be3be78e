/*
 * fsm.c: the state machine as a canonical raft FSM.
 *
 * Raft calls apply for every committed command entry, in log order, on every
 * server; snapshot when it wants to compact the log; restore when a server
 * installs a snapshot. This file only translates between raft's buffers and
 * iod_state: it must never fail an apply (a rejected command is committed
 * and answered as an error, or servers could diverge on error paths).
 */
#include "internal.h"

#include <raft.h>
#include <stdlib.h>
#include <string.h>

/* ---- commands parsed ahead of their apply ---------------------------------- */

struct iod_state_preparsed *iod_state_preparse(const void *base, size_t len, uint64_t index)
{
	const char *p = base;
	size_t n = len;
	struct iod_state_result r;

	if (len < IOD_STATE_PREPARSE_MIN || iod_state_batch_is(p, len))
		return NULL;
	while (n && p[n - 1] == 0)
		n--; /* padding, as fsm_apply strips it */
	struct iod_state_preparsed *pp = calloc(1, sizeof(*pp));
	if (!pp)
		return NULL;
	pp->base = base;
	pp->len = len;
	pp->index = index;
	if (!(pp->cmd = iod_state_cmd_parse(p, n, &r)) ||
	    iod_state_cmd_sizes(pp->cmd, &pp->bytes, &pp->bytes_n)) {
		iod_state_preparsed_free(pp);
		return NULL; /* parsed (and refused) at apply, as without this */
	}
	return pp;
}

void iod_state_preparsed_free(struct iod_state_preparsed *p)
{
	if (!p)
		return;
	json_decref(p->cmd);
	free(p->bytes);
	free(p);
}

void iod_state_fsm_prepared(struct iod_state_fsm_ctx *c, struct iod_state_preparsed *p)
{
	if (c->pre_n == IOD_STATE_PREPARSED_MAX) {
		iod_state_preparsed_free(c->pre[0]);
		memmove(c->pre, c->pre + 1, (c->pre_n - 1) * sizeof(c->pre[0]));
		c->pre_n--;
	}
	c->pre[c->pre_n++] = p;
}

void iod_state_fsm_prepared_flush(struct iod_state_fsm_ctx *c)
{
	for (uint32_t i = 0; i < c->pre_n; i++)
		iod_state_preparsed_free(c->pre[i]);
	c->pre_n = 0;
}

/* The parsed command of the entry at buf, taken out of the cache, or NULL. */
static struct iod_state_preparsed *prepared_take(struct iod_state_fsm_ctx *c,
                                                 const struct raft_buffer *buf)
{
	for (uint32_t i = 0; i < c->pre_n; i++) {
		struct iod_state_preparsed *p = c->pre[i];
		if (p->base != buf->base || p->len != buf->len)
			continue;
		memmove(c->pre + i, c->pre + i + 1, (c->pre_n - i - 1) * sizeof(c->pre[0]));
		c->pre_n--;
		return p;
	}
	return NULL;
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
	struct iod_state_fsm_ctx *c = fsm->data;
	const char *p = buf->base;
	size_t len = buf->len;

	/* Commands are padded with NULs to a multiple of 8 bytes (raft's libuv
	 * backend reloads unaligned entries wrongly; see member_propose.c). A command is
	 * JSON text, which has no NUL bytes: trailing NULs are padding. */
	if (iod_state_batch_is(p, len)) {
		/* group commit: the commands in order, one result each */
		iod_state_apply_batch(c->state, p, len, c->batch, IOD_STATE_BATCH_MAX, &c->batch_n);
		c->applied += c->batch_n;
		*result = c->batch;
		if (c->on_apply)
			c->on_apply(c->on_apply_data);
		return 0;
	}
	struct iod_state_preparsed *pre = c->pre_n ? prepared_take(c, buf) : NULL;
	if (pre) {
		iod_state_apply_sized(c->state, pre->cmd, pre->bytes, pre->bytes_n, &c->last);
		iod_state_preparsed_free(pre);
		c->pre_hits++;
	} else {
		while (len && p[len - 1] == 0)
			len--;
		iod_state_apply(c->state, p, len, &c->last);
	}
	if (c->last.code)
		IOD_DEBUG("state", "command rejected: %s", c->last.msg);
	c->applied++;
	*result = &c->last;
	if (c->on_apply)
		c->on_apply(c->on_apply_data);
	return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
	struct iod_state_fsm_ctx *c = fsm->data;
	struct raft_buffer *b = calloc(1, sizeof(*b));
	void *data = NULL;
	size_t len = 0;

	if (!b)
		return RAFT_NOMEM;
	if (iod_state_snapshot(c->state, &data, &len)) {
		free(b);
		return RAFT_NOMEM;
	}
	b->base = data;
	b->len = len;
	*bufs = b;
	*n = 1;
	c->snapshots++;
	return 0;
}

static int fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
	(void)fsm;
	for (unsigned i = 0; i < *n; i++)
		free((*bufs)[i].base);
	free(*bufs);
	*bufs = NULL;
	*n = 0;
	return 0;
}

/* Async snapshots, loop: copy the state (O(n), references to the values);
 * the buffer is filled by fsm_snapshot_encode. raft takes one snapshot at a
 * time. */
static int fsm_snapshot_take(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
	struct iod_state_fsm_ctx *c = fsm->data;
	struct raft_buffer *b = calloc(1, sizeof(*b));

	IOD_ASSERT(!c->snap);
	if (!b)
		return RAFT_NOMEM;
	if (!(c->snap = iod_state_snapshot_take(c->state))) {
		free(b);
		return RAFT_NOMEM;
	}
	*bufs = b;
	*n = 1;
	c->snapshots++;
	return 0;
}

/* Async snapshots, a worker: sort and serialise what was taken on the loop
 * (the take is only read here; the loop frees it in finalize). */
static int fsm_snapshot_encode(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
	struct iod_state_fsm_ctx *c = fsm->data;
	void *data = NULL;
	size_t len = 0;

	IOD_ASSERT(*n == 1 && c->snap);
	if (iod_state_snapshot_encode(c->snap, &data, &len))
		return RAFT_NOMEM;
	(*bufs)[0].base = data;
	(*bufs)[0].len = len;
	return 0;
}

/* Async snapshots, loop, always after the worker (or a failed take): the
 * take goes with the buffer. */
static int fsm_snapshot_finalize_async(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                                       unsigned *n)
{
	struct iod_state_fsm_ctx *c = fsm->data;
	iod_state_snapshot_free(c->snap);
	c->snap = NULL;
	return fsm_snapshot_finalize(fsm, bufs, n);
}

void iod_state_fsm_set_async_snapshots(struct raft_fsm *fsm)
{
	fsm->version = 3;
	fsm->snapshot = fsm_snapshot_take;
	fsm->snapshot_async = fsm_snapshot_encode;
	fsm->snapshot_finalize = fsm_snapshot_finalize_async;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
	struct iod_state_fsm_ctx *c = fsm->data;
	struct iod_err e = {0};

	iod_state_fsm_prepared_flush(c);
	if (iod_state_restore(c->state, buf->base, buf->len, &e)) {
		IOD_ERROR("state", "restoring a snapshot failed: %s", e.msg);
		return RAFT_CORRUPT;
	}
	raft_free(buf->base); /* on success the FSM owns the buffer */
	c->restores++;
	if (c->on_apply)
		c->on_apply(c->on_apply_data);
	return 0;
}

void iod_state_fsm_init(struct raft_fsm *fsm, struct iod_state_fsm_ctx *ctx)
{
	memset(fsm, 0, sizeof(*fsm));
	fsm->version = 2;
	fsm->data = ctx;
	fsm->apply = fsm_apply;
	fsm->snapshot = fsm_snapshot;
	fsm->snapshot_finalize = fsm_snapshot_finalize;
	fsm->restore = fsm_restore;
}
