/*
 * member_propose.c: proposing commands. Commands proposed during one loop
 * iteration are queued and go out as one Raft entry (group commit, flushed
 * from the loop's prepare and check phases); each proposer gets its own
 * result, or an "outcome unknown" when raft took the entry and then lost
 * it. Also the linearizable read fence (a raft barrier). What a command
 * does is decided by the state machine (state.c), never here.
 */
#include "member_internal.h"

#include <stdlib.h>
#include <string.h>

static void record_latency(struct iod_raft_member *n, uint64_t us)
{
	unsigned b = 0;
	while (b < IOD_MEMBER_LAT_BUCKETS && us > iod_member__lat_bounds_us[b])
		b++;
	n->lat_bucket[b]++;
	n->lat_sum_us += us;
}

/* Hand one command's outcome to its proposer and free it. */
static void complete(struct iod_raft_member *n, struct proposal *p, int status,
                     const struct iod_state_result *result)
{
	struct iod_state_result res;

	n->pending--;
	if (status == 0 && result) {
		res = *result;
		n->commits++;
		n->trace.propose_ns = p->t0_ns;
		n->trace.flush_ns = p->flush_ns;
		n->trace.apply_ns = iod_clock_now_ns();
		record_latency(n, (n->trace.apply_ns - p->t0_ns) / 1000);
	} else if (status > 0 || (status == 0 && !result)) {
		/* raft took it (raft_apply returned 0), then failed it: the entry
		 * is in this server's log and maybe in others', so a later leader
		 * may still commit it */
		memset(&res, 0, sizeof(res));
		res.code = IOD_RAFT_MEMBER_OUTCOME_UNKNOWN;
		n->outcome_unknown++;
		snprintf(
		    res.msg, sizeof(res.msg),
		    "outcome unknown: proposed, then %s before it committed; it may or may not "
		    "be applied (read it back before retrying a non-idempotent request)",
		    status ? raft_strerror(status) : "the server stopped");
	} else {
		memset(&res, 0, sizeof(res));
		res.code = status;
		snprintf(res.msg, sizeof(res.msg), "not committed: %s", strerror(-status));
	}
	if (p->cb)
		p->cb(p->data, status == 0 && result ? 0 : res.code, &res);
	free(p);
}

static void apply_cb(struct raft_apply *req, int status, void *result)
{
	struct batch *b = req->data;
	struct iod_raft_member *n = b->node;
	const struct iod_state_result *res = result;

	if (status == 0 && b->term == n->raft.current_term && !n->tl_first_write_us &&
	    n->tl_term == b->term)
		n->tl_first_write_us = iod_member__unix_us();
	/* a batch's results are ctx.batch[0..n); a single command's is ctx.last */
	if (status == 0 && b->n > 1 && (res != n->ctx.batch || n->ctx.batch_n != b->n))
		status = RAFT_CORRUPT; /* cannot happen: the frame was ours */
	for (uint32_t i = 0; i < b->n; i++)
		complete(n, b->p[i], status, status == 0 && res ? &res[b->n > 1 ? i : 0] : NULL);
	free(b);
}

/* Fail every queued command with status (a negative errno). */
void iod_member__queue_fail(struct iod_raft_member *n, int status)
{
	while (n->queue_n) {
		uint32_t k = n->queue_n;
		struct proposal *ps[IOD_STATE_BATCH_MAX];
		memcpy(ps, n->queue, k * sizeof(ps[0]));
		n->queue_n = 0;
		n->queue_bytes = 0;
		for (uint32_t i = 0; i < k; i++)
			complete(n, ps[i], status, NULL);
	}
}

/*
 * Group commit: everything proposed since the last flush becomes one Raft
 * entry (one command as itself, several as a batch frame), so one disk
 * append and one AppendEntries per follower carry them all. Runs from the
 * loop's prepare and check phases: a proposal waits at most for the rest of
 * the current loop iteration, never for I/O.
 */
void iod_member__queue_flush(struct iod_raft_member *n)
{
	struct raft_buffer buf = {0};
	struct batch *b;
	uint32_t k = n->queue_n;
	int rv;

	if (!k)
		return;
	if (n->stopping) {
		iod_member__queue_fail(n, -ESHUTDOWN);
		return;
	}
	if (raft_state(&n->raft) != RAFT_LEADER) {
		n->rejected_not_leader += k;
		iod_member__queue_fail(n, -ENOTCONN);
		return;
	}
	b = calloc(1, sizeof(*b) + k * sizeof(b->p[0]));
	size_t need = k == 1 ? n->queue[0]->len : iod_state_batch_size(k, n->queue_bytes);
	/* padded with NULs to a multiple of 8 (libraft's libuv backend needed
	 * it; iod's log does not, and keeps old logs' entries readable). The FSM
	 * strips/ignores the padding. */
	size_t padded = (need + 7) & ~(size_t)7;
	buf.base = b ? raft_malloc(padded ? padded : 8) : NULL;
	if (!b || !buf.base) {
		free(b);
		raft_free(buf.base);
		iod_member__queue_fail(n, -ENOMEM);
		return;
	}
	buf.len = padded ? padded : 8;
	memset(buf.base, 0, buf.len);
	if (k == 1) {
		memcpy(buf.base, n->queue[0]->cmd, n->queue[0]->len);
	} else {
		const char *cmds[IOD_STATE_BATCH_MAX];
		size_t lens[IOD_STATE_BATCH_MAX], len = 0;
		for (uint32_t i = 0; i < k; i++) {
			cmds[i] = n->queue[i]->cmd;
			lens[i] = n->queue[i]->len;
		}
		rv = iod_state_batch_encode(buf.base, buf.len, cmds, lens, k, &len);
		IOD_ASSERT(rv == 0);
	}
	uint64_t now_ns = iod_clock_now_ns();
	for (uint32_t i = 0; i < k; i++)
		n->queue[i]->flush_ns = now_ns;
	b->req.data = b;
	b->node = n;
	b->n = k;
	b->term = n->raft.current_term;
	memcpy(b->p, n->queue, k * sizeof(b->p[0]));
	n->queue_n = 0;
	n->queue_bytes = 0;
	rv = raft_apply(&n->raft, &b->req, &buf, 1, apply_cb);
	if (rv) {
		raft_free(buf.base);
		if (rv == RAFT_NOTLEADER || rv == RAFT_LEADERSHIPLOST)
			n->rejected_not_leader += k;
		for (uint32_t i = 0; i < k; i++) /* refused at once: never in the log */
			complete(n, b->p[i], iod_member__errno(rv), NULL);
		free(b);
		return;
	}
	n->batches++;
	n->batched_cmds += k;
}

int iod_raft_member_propose(struct iod_raft_member *n, const char *cmd, size_t len,
                            iod_raft_member_apply_cb cb, void *data)
{
	struct proposal *p;

	if (n->stopping)
		return -ESHUTDOWN;
	if (raft_state(&n->raft) != RAFT_LEADER) {
		n->rejected_not_leader++;
		return -ENOTCONN;
	}
	if (n->pending >= IOD_API_PENDING_MAX)
		return -EBUSY;
	if (len > IOD_STATE_CMD_MAX || len == 0)
		return len ? -E2BIG : -EINVAL;
	/* a full batch (count or bytes) goes out now; this one starts the next */
	if (n->queue_n == IOD_STATE_BATCH_MAX ||
	    iod_state_batch_size(n->queue_n + 1, n->queue_bytes + len) > IOD_STATE_CMD_MAX)
		iod_member__queue_flush(n);
	p = malloc(sizeof(*p) + len);
	if (!p)
		return -ENOMEM;
	memcpy(p->cmd, cmd, len);
	p->len = len;
	p->cb = cb;
	p->data = data;
	p->t0_ns = iod_clock_now_ns();
	p->flush_ns = 0;
	n->queue[n->queue_n++] = p;
	n->queue_bytes += len;
	n->pending++;
	n->proposals++;
	return 0;
}

const struct iod_raft_member_trace *iod_raft_member_trace(const struct iod_raft_member *n)
{
	return &n->trace;
}

struct fence {
	struct raft_barrier req;    /* raft's request */
	iod_raft_member_done_cb cb; /* caller's completion */
	void *data;                 /* its argument */
};

static void fence_cb(struct raft_barrier *req, int status)
{
	struct fence *f = req->data;
	f->cb(f->data, status ? iod_member__errno(status) : 0);
	free(f);
}

int iod_raft_member_read_fence(struct iod_raft_member *n, iod_raft_member_done_cb cb, void *data)
{
	struct fence *f;
	int rv;

	if (n->stopping)
		return -ESHUTDOWN;
	if (raft_state(&n->raft) != RAFT_LEADER)
		return -ENOTCONN;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->req.data = f;
	f->cb = cb;
	f->data = data;
	rv = raft_barrier(&n->raft, &f->req, fence_cb);
	if (rv) {
		free(f);
		return iod_member__errno(rv);
	}
	return 0;
}
