/*
 * member_io.c: a member's view of raft's I/O. raft calls its disk and
 * network through struct raft_io (rio.c); the member wraps a few entries to
 * time them and to see what a failover is made of. It also decides, after
 * raft ran, whether a leader is usable (held requests are answered then).
 * The wrappers only observe (and, with --fast-votes, mark a vote request
 * as allowed past a silent leader); they never change what raft stores.
 */
#include "member_internal.h"

#include <stddef.h>

/*
 * raft calls its I/O through struct raft_io; iod wraps four entries to see
 * what the failover is made of (when the last message from the leader came,
 * when this server asked for (pre-)votes, when it became leader) and how
 * long disk appends take, and to learn at once when a leader is known
 * again (held requests are answered then). The wrappers only observe and
 * pass everything through unchanged.
 */
static struct iod_raft_member *timed_nodes[IOD_RAFT_MEMBERS_TIMED];

static struct iod_raft_member *node_of(struct raft_io *io)
{
	return (struct iod_raft_member *)(void *)((char *)io -
	                                          offsetof(struct iod_raft_member, io));
}

bool iod_raft_member_leader_fresh(struct iod_raft_member *n)
{
	raft_id id = 0;
	const char *addr = NULL;
	uint64_t stale_ns = (uint64_t)IOD_MAX(2 * n->cfg.heartbeat_timeout_ms, 5u) * IOD_NS_PER_MS;

	if (n->stopping)
		return false;
	if (raft_state(&n->raft) == RAFT_LEADER)
		return true;
	raft_leader(&n->raft, &id, &addr);
	return id != 0 && iod_clock_now_ns() - n->leader_msg_ns <= stale_ns;
}

/* After raft ran: note role changes, tell the server when a leader is usable. */
void iod_member__after_raft(struct iod_raft_member *n)
{
	int st = raft_state(&n->raft);
	raft_id id = 0;
	const char *addr = NULL;

	if (st != n->last_state) {
		if (st == RAFT_LEADER) {
			n->tl_leader_us = iod_member__unix_us();
			n->tl_ready_us = n->tl_refresh_us = n->tl_first_write_us = 0;
			n->tl_term = n->raft.current_term;
			iod_member__leader_barrier(n); /* now, not at the next tick */
		}
		n->last_state = st;
	}
	raft_leader(&n->raft, &id, &addr);
	if (id)
		n->in_election = false;
	bool fresh = iod_raft_member_leader_fresh(n);
	if (id != n->last_leader || (fresh && !n->was_fresh)) {
		if (id != n->last_leader) {
			if (id)
				IOD_INFO("raft", "leader is now %llu (%s), term %llu",
				         (unsigned long long)id, addr ? addr : "?",
				         (unsigned long long)n->raft.current_term);
			n->leader_changes += id != 0;
			n->last_leader = id;
		}
		n->was_fresh = fresh;
		if (n->on_leader)
			n->on_leader(n->on_leader_data);
		return;
	}
	n->was_fresh = fresh;
}

/* Silence after which a follower lets vote requests past its leader: the
 * minimum election timeout, less one heartbeat so that the survivor whose
 * timer fires first is not refused by the other for heartbeat jitter. */
static uint64_t unstick_ns(const struct iod_raft_member *n)
{
	uint32_t t = n->cfg.election_timeout_ms, h = n->cfg.heartbeat_timeout_ms;
	return (uint64_t)(h < t ? t - h : t) * IOD_NS_PER_MS;
}

/* The term of entry index in raft's log (0 when it holds no such entry). */
static uint64_t log_term_of(const struct raft *r, uint64_t index)
{
	const struct raft_log *l = &r->log;
	size_t have = l->back >= l->front ? l->back - l->front : l->size - l->front + l->back;
	if (index && index == l->snapshot.last_index && index <= l->offset)
		return l->snapshot.last_term;
	if (index <= l->offset || index > l->offset + have)
		return 0;
	return l->entries[(l->front + (index - l->offset - 1)) % l->size].term;
}

/* The peer slot of server id for the pre-vote tie-break (NULL: no room). */
static struct iod_member_pv_peer *pv_peer(struct iod_raft_member *n, uint64_t id)
{
	struct iod_member_pv_peer *free_slot = NULL;
	for (size_t i = 0; i < IOD_STATE_PEERS_MAX; i++) {
		if (n->pv_peers[i].id == id)
			return &n->pv_peers[i];
		if (!n->pv_peers[i].id && !free_slot)
			free_slot = &n->pv_peers[i];
	}
	if (free_slot)
		*free_slot = (struct iod_member_pv_peer){.id = id};
	return free_slot;
}

/* Leave a simultaneous pre-candidate's request unanswered (vote.c)? */
static bool prevote_yield(struct iod_raft_member *n, const struct raft_message *m)
{
	if (m->type != RAFT_IO_REQUEST_VOTE || n->cfg.no_vote_tiebreak)
		return false;
	const struct raft_request_vote *rv = &m->request_vote;
	struct iod_member_pv_peer *p = pv_peer(n, m->server_id);
	uint64_t last = n->raft.last_stored;
	struct iod_prevote_view v = {
	    .self_pre_candidate =
	        raft_state(&n->raft) == RAFT_CANDIDATE && n->raft.candidate_state.in_pre_vote,
	    .self_candidate =
	        raft_state(&n->raft) == RAFT_CANDIDATE && !n->raft.candidate_state.in_pre_vote,
	    .self_term = n->raft.current_term,
	    .self_id = n->raft.id,
	    .self_last_index = last,
	    .self_last_term = log_term_of(&n->raft, last),
	    .pre_vote = rv->pre_vote,
	    .disrupt_leader = rv->disrupt_leader,
	    .from_id = m->server_id,
	    .from_term = rv->term,
	    .from_last_index = rv->last_log_index,
	    .from_last_term = rv->last_log_term,
	    .refused_self = !p || p->refused,
	};
	return iod_raft_prevote_yield(&v);
}

static void io_tick_cb(struct raft_io *io)
{
	struct iod_raft_member *n = node_of(io);
	n->raft_tick(io);
	iod_member__after_raft(n);
}

static void io_recv_cb(struct raft_io *io, struct raft_message *m)
{
	struct iod_raft_member *n = node_of(io);
	bool from_leader = m->type == RAFT_IO_APPEND_ENTRIES || m->type == RAFT_IO_INSTALL_SNAPSHOT;
	raft_id id0 = 0;
	const char *addr0 = NULL;

	raft_leader(&n->raft, &id0, &addr0);
	if (m->type == RAFT_IO_REQUEST_VOTE_RESULT &&
	    m->request_vote_result.pre_vote == raft_tribool_true &&
	    !m->request_vote_result.vote_granted) {
		struct iod_member_pv_peer *p = pv_peer(n, m->server_id);
		if (p)
			p->refused = true;
	}
	if (prevote_yield(n, m)) {
		n->prevotes_yielded++;
		iod_member__after_raft(n);
		return;
	}
	/*
	 * raft 0.15 refuses (pre-)votes while this follower still has a leader,
	 * until its own randomised timer (T..2T) fires, so after a leader dies
	 * the election waits for the later of the two survivors' timers. The
	 * Raft thesis (4.2.3) only asks to refuse within the minimum election
	 * timeout T of hearing from the leader: past that, mark the request as
	 * allowed to disrupt and let raft judge it on terms and logs as usual.
	 * Safety does not depend on the check (it keeps a removed or isolated
	 * server from deposing a leader others still hear, which is kept).
	 * Off by default (--fast-votes): measured, it also lets a leader stall
	 * of just over T (a loaded machine) cost an election when only the
	 * first survivor's timer has fired (an A/B at load 11-14 was inconclusive).
	 */
	if (n->cfg.fast_votes && m->type == RAFT_IO_REQUEST_VOTE &&
	    raft_state(&n->raft) == RAFT_FOLLOWER && id0 && !m->request_vote.disrupt_leader &&
	    n->leader_msg_ns && iod_clock_now_ns() - n->leader_msg_ns >= unstick_ns(n)) {
		m->request_vote.disrupt_leader = true;
		n->votes_unstuck++;
	}
	n->raft_recv(io, m);
	if (from_leader) {
		raft_id id = 0;
		const char *addr = NULL;
		raft_leader(&n->raft, &id, &addr);
		if (id && id == m->server_id) {
			n->leader_msg_ns = iod_clock_now_ns();
			n->tl_leader_msg_cur_us = iod_member__unix_us();
		}
	}
	iod_member__after_raft(n);
}

static int io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv)
{
	struct iod_raft_member *n = node_of(io);
	n->raft_tick = tick;
	n->raft_recv = recv;
	return n->io_start(io, msecs, io_tick_cb, io_recv_cb);
}

static int io_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                   raft_io_send_cb cb)
{
	struct iod_raft_member *n = node_of(io);
	if (m->type == RAFT_IO_REQUEST_VOTE) {
		if (!n->in_election) {
			/* a new election episode: remember what it started from */
			n->in_election = true;
			n->tl_prevote_us = n->tl_vote_us = 0;
			n->tl_leader_msg_us = n->tl_leader_msg_cur_us;
		}
		if (m->request_vote.pre_vote) {
			/* a new request: whether this peer refuses it is not known */
			struct iod_member_pv_peer *p = pv_peer(n, m->server_id);
			if (p)
				p->refused = false;
		}
		if (m->request_vote.pre_vote && !n->tl_prevote_us)
			n->tl_prevote_us = iod_member__unix_us();
		else if (!m->request_vote.pre_vote && !n->tl_vote_us)
			n->tl_vote_us = iod_member__unix_us();
	}
	return n->io_send(io, req, m, cb);
}

static void io_append_cb(struct raft_io_append *req, int status)
{
	struct iod_raft_member *n = NULL;
	raft_io_append_cb cb = NULL;
	uint64_t t0 = 0;

	/* find the slot: the request pointer is the key (raft's callback gets
	 * no io pointer, so every live node's table is searched: one or two) */
	for (unsigned k = 0; k < IOD_RAFT_MEMBERS_TIMED && !cb; k++) {
		struct iod_raft_member *m = timed_nodes[k];
		for (unsigned i = 0; m && i < IOD_RAFT_APPENDS_TIMED; i++)
			if (m->appends[i].req == req) {
				n = m;
				cb = m->appends[i].cb;
				t0 = m->appends[i].t0_ns;
				m->appends[i].req = NULL;
				break;
			}
	}
	IOD_ASSERT(cb != NULL && n != NULL);
	uint64_t us = (iod_clock_now_ns() - t0) / 1000;
	n->append_count++;
	n->append_sum_us += us;
	n->append_slow += us > 10000;
	if (us > n->append_max_us)
		n->append_max_us = us;
	cb(req, status);
}

static int io_append(struct raft_io *io, struct raft_io_append *req,
                     const struct raft_entry entries[], unsigned k, raft_io_append_cb cb)
{
	struct iod_raft_member *n = node_of(io);
	/* a full table (or a node not registered) passes through untimed */
	if (n->timed) {
		for (unsigned i = 0; i < IOD_RAFT_APPENDS_TIMED; i++) {
			if (n->appends[i].req)
				continue;
			n->appends[i] = (struct timed_append){req, cb, iod_clock_now_ns()};
			int rv = n->io_append(io, req, entries, k, io_append_cb);
			if (rv)
				n->appends[i].req = NULL;
			return rv;
		}
	}
	return n->io_append(io, req, entries, k, cb);
}

/* rio writes term and vote synchronously (on the loop), as raft needs: timed. */
static void meta_time(struct iod_raft_member *n, uint64_t t0)
{
	uint64_t us = (iod_clock_now_ns() - t0) / 1000;
	n->meta_writes++;
	if (us > n->meta_max_us)
		n->meta_max_us = us;
}

static int io_set_term(struct raft_io *io, raft_term term)
{
	struct iod_raft_member *n = node_of(io);
	uint64_t t0 = iod_clock_now_ns();
	int rv = n->io_set_term(io, term);
	meta_time(n, t0);
	return rv;
}

static int io_set_vote(struct raft_io *io, raft_id id)
{
	struct iod_raft_member *n = node_of(io);
	uint64_t t0 = iod_clock_now_ns();
	int rv = n->io_set_vote(io, id);
	meta_time(n, t0);
	return rv;
}

/* The loop's part of an FSM snapshot (taking the body; its encoding runs
 * on a worker, fsm.c), timed. */
static int fsm_snapshot_timed(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *k)
{
	struct iod_state_fsm_ctx *ctx = fsm->data;
	struct iod_raft_member *n =
	    (struct iod_raft_member *)(void *)((char *)ctx - offsetof(struct iod_raft_member, ctx));
	uint64_t t0 = iod_clock_now_ns();
	int rv = n->fsm_snapshot(fsm, bufs, k);
	uint64_t us = (iod_clock_now_ns() - t0) / 1000;
	n->snap_sum_us += us;
	n->snap_count++;
	if (us > n->snap_max_us)
		n->snap_max_us = us;
	return rv;
}

/* A large command parsed on the log's worker (rio.c): kept for its apply
 * unless that happened already (a leader may apply before its own write
 * is done, once a majority of followers has it). */
static void prep_ready(void *data, struct iod_state_preparsed *p)
{
	struct iod_raft_member *n = data;
	if (p->index <= raft_last_applied(&n->raft))
		iod_state_preparsed_free(p);
	else
		iod_state_fsm_prepared(&n->ctx, p);
}

static void prep_flush(void *data)
{
	struct iod_raft_member *n = data;
	iod_state_fsm_prepared_flush(&n->ctx);
}

/* A Revocation object "server.<id>" (iod revoke server ID), as the API's
 * authorisation reads it: the Raft transport refuses that certificate too. */
static bool server_revoked(void *data, const char *server)
{
	struct iod_raft_member *n = data;
	char key[IOD_NAME_MAX];
	if (snprintf(key, sizeof(key), "server.%s", server) >= (int)sizeof(key))
		return false;
	return iod_state_value(n->state, IOD_STATE_REVOCATION, key) != NULL;
}

void iod_member__io_wrap(struct iod_raft_member *n)
{
	const struct iod_rio_prep prep = {.data = n, .ready = prep_ready, .flush = prep_flush};
	iod_rio_set_prep(&n->io, &prep);
	iod_rio_set_revoked(&n->io, server_revoked, n);
	n->fsm_snapshot = n->fsm.snapshot;
	n->fsm.snapshot = fsm_snapshot_timed;
	n->io_set_term = n->io.set_term;
	n->io_set_vote = n->io.set_vote;
	n->io.set_term = io_set_term;
	n->io.set_vote = io_set_vote;
	for (unsigned k = 0; k < IOD_RAFT_MEMBERS_TIMED; k++)
		if (!timed_nodes[k]) {
			timed_nodes[k] = n;
			n->timed = true;
			break;
		}
	n->io_start = n->io.start;
	n->io_send = n->io.send;
	n->io_append = n->io.append;
	n->io.start = io_start;
	n->io.send = io_send;
	n->io.append = io_append;
}

void iod_member__io_unwrap(struct iod_raft_member *n)
{
	for (unsigned k = 0; k < IOD_RAFT_MEMBERS_TIMED; k++)
		if (timed_nodes[k] == n)
			timed_nodes[k] = NULL;
	n->timed = false;
}
