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

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
	struct iod_state_fsm_ctx *c = fsm->data;
	const char *p = buf->base;
	size_t len = buf->len;

	/* Commands are padded with NULs to a multiple of 8 bytes (raft's libuv
	 * backend reloads unaligned entries wrongly; see node.c). A command is
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
	while (len && p[len - 1] == 0)
		len--;
	iod_state_apply(c->state, p, len, &c->last);
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

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
	struct iod_state_fsm_ctx *c = fsm->data;
	struct iod_err e = {0};

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
