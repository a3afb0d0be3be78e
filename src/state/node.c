/*
 * node.c: one control-plane member: canonical raft over its libuv backend,
 * with the state machine as its FSM.
 *
 * This is the shell around the pure state machine: it creates the data
 * directory, starts raft's disk and TCP I/O, bootstraps the initial
 * configuration, proposes commands and hands their results back, runs the
 * leader's lease clock, changes membership and stops gracefully (leadership
 * transfer first, so a planned restart costs one round trip instead of an
 * election timeout). It never decides what a command does: iod_state does.
 */
#include "internal.h"

#include <raft.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

/* Apply-latency histogram bucket bounds, microseconds. */
static const uint64_t lat_bounds_us[] = {250,   500,   1000,   2000,   5000,   10000,
                                         25000, 50000, 100000, 250000, 1000000};
#define LAT_BUCKETS (sizeof(lat_bounds_us) / sizeof(lat_bounds_us[0]))

/* One proposed command, queued until the loop iteration ends (group commit). */
struct proposal {
	iod_node_apply_cb cb; /* caller's completion */
	void *data;           /* caller's argument */
	uint64_t t0_ns;       /* when proposed, for the latency histogram */
	size_t len;           /* command bytes */
	char cmd[];           /* the command (JSON text) */
};

/* One Raft entry in flight: a single command or a batch of them. */
struct batch {
	struct raft_apply req; /* raft's request (req.data = this) */
	struct iod_node *node; /* owner */
	uint32_t n;            /* commands */
	uint64_t term;         /* term it was proposed in */
	struct proposal *p[];  /* the commands, in log order */
};

/* Raft appends in flight, timed for the disk-latency metric. */
#define APPENDS_TIMED 256

struct timed_append {
	struct raft_io_append *req; /* raft's request, NULL = free slot */
	raft_io_append_cb cb;       /* raft's callback */
	uint64_t t0_ns;             /* when raft asked */
};

struct change {
	struct raft_change req;       /* raft's request */
	struct iod_node *node;        /* owner */
	uint64_t id;                  /* server being added/removed */
	bool assign_next;             /* add done: now assign voter */
	bool remove;                  /* a removal (else an addition) */
	char raft_addr[IOD_ADDR_MAX]; /* addition: the server's Raft address */
	uint64_t deadline_ns;         /* parked: give up retrying after this */
	iod_node_done_cb cb;          /* caller's completion */
	void *data;                   /* caller's argument */
};

struct iod_node {
	struct iod_server_config cfg;  /* as started */
	uv_loop_t *loop;               /* not owned */
	struct raft_io io;             /* iod's raft I/O (rio.c): log + transport */
	struct raft_fsm fsm;           /* our FSM vtable */
	struct raft raft;              /* the raft instance */
	struct iod_state *state;       /* the replicated state */
	struct iod_state_fsm_ctx ctx;  /* FSM context */
	uv_timer_t tick;               /* leader duties: leases, member record */
	uv_idle_t wake;                /* deferred on_apply notification */
	bool wake_pending;             /* wake is armed */
	void (*on_apply)(void *);      /* watch wake-up */
	void *on_apply_data;           /* its argument */
	uint32_t pending;              /* proposals in flight */
	bool expire_in_flight;         /* one lease_expire at a time */
	bool refresh_in_flight;        /* the new leader's lease_refresh */
	uint64_t refresh_term;         /* term whose lease_refresh applied */
	uint64_t refresh_propose_term; /* term it was proposed in */
	bool member_in_flight;         /* one member record at a time */
	bool stopping;                 /* stop requested */
	struct raft_transfer transfer; /* graceful leadership transfer */
	uint64_t transfer_t0_ns;       /* when the transfer began */
	uint64_t drain_deadline_ns;    /* stopping: wait for in-flight writes until */
	void (*stop_done)(void *);     /* stop's completion */
	void *stop_data;               /* its argument */
	int closing_handles;           /* uv handles still closing */
	/* metrics */
	uint64_t proposals;                   /* commands proposed */
	uint64_t commits;                     /* commands committed+applied here as leader */
	uint64_t rejected_not_leader;         /* proposals refused: not leader */
	uint64_t outcome_unknown;             /* proposed, then failed by raft */
	uint64_t lat_bucket[LAT_BUCKETS + 1]; /* apply latency histogram (+Inf last) */
	uint64_t lat_sum_us;                  /* sum of latencies */
	uint64_t leader_changes;              /* observed leader id changes */
	uint64_t last_leader;                 /* for leader_changes */
	uint64_t barrier_term;                /* term whose leadership barrier was proposed */
	uint64_t ready_term;                  /* term whose barrier has been applied */
	struct raft_barrier barrier;          /* the leadership barrier request */
	bool barrier_in_flight;               /* barrier outstanding */
	uint64_t ticks;                       /* tick count (lease checks every few) */
	/* group commit: commands proposed during this loop iteration */
	struct proposal *queue[IOD_STATE_BATCH_MAX]; /* in proposal order */
	uint32_t queue_n;                            /* queued */
	size_t queue_bytes;                          /* their command bytes */
	uv_prepare_t flush_prep;                     /* flush before the loop blocks */
	uv_check_t flush_check;                      /* flush after I/O callbacks */
	uint64_t batches;                            /* entries proposed */
	uint64_t batched_cmds;                       /* commands in them */
	/* instrumentation of raft's I/O (wrapped vtable) */
	int (*io_start)(struct raft_io *, unsigned, raft_io_tick_cb, raft_io_recv_cb); /* rio's */
	int (*io_send)(struct raft_io *, struct raft_io_send *, const struct raft_message *,
	               raft_io_send_cb); /* rio's */
	int (*io_append)(struct raft_io *, struct raft_io_append *, const struct raft_entry[],
	                 unsigned, raft_io_append_cb); /* rio's */
	raft_io_tick_cb raft_tick;                     /* raft's tick callback */
	raft_io_recv_cb raft_recv;                     /* raft's receive callback */
	struct timed_append appends[APPENDS_TIMED];    /* appends in flight */
	bool timed;                                    /* registered in timed_nodes */
	uint64_t append_count;                         /* appends completed */
	uint64_t append_sum_us;                        /* their total latency */
	uint64_t append_max_us;                        /* the slowest */
	uint64_t append_slow;                          /* appends over 10 ms */
	uint64_t last_tick_ns;                         /* previous tick, for loop lag */
	uint64_t lag_max_us;                           /* worst loop lag seen by the tick timer */
	uint64_t lag_slow;                             /* ticks late by more than 10 ms */
	uint64_t leader_msg_ns;                        /* last AppendEntries from the leader */
	int last_state;                                /* raft state at the last check */
	bool was_fresh;                                /* leader known and heard from */
	bool in_election;                              /* vote requests sent, no leader yet */
	uint64_t handover_id;                          /* leader this one handed over to */
	struct change *change_wait; /* a membership change waiting for the previous one */
	uint64_t votes_unstuck;     /* vote requests let past a silent leader */
	int (*io_set_term)(struct raft_io *, raft_term); /* rio's */
	int (*io_set_vote)(struct raft_io *, raft_id);   /* rio's */
	uint64_t meta_writes;                            /* term/vote writes (synchronous) */
	uint64_t meta_max_us;                            /* the slowest of them */
	int (*fsm_snapshot)(struct raft_fsm *, struct raft_buffer **, unsigned *); /* ours */
	uint64_t snap_max_us;      /* slowest snapshot serialisation (on the loop) */
	uint64_t snap_sum_us;      /* their total */
	uint64_t snap_count;       /* snapshots serialised (timed) */
	void (*on_leader)(void *); /* leader known again / changed */
	void *on_leader_data;      /* its argument */
	/* failover timeline (Unix us, 0 = not in this episode) */
	uint64_t tl_leader_msg_us;     /* last message from the previous leader */
	uint64_t tl_prevote_us;        /* first pre-vote request sent */
	uint64_t tl_vote_us;           /* first real vote request sent */
	uint64_t tl_leader_us;         /* became leader */
	uint64_t tl_ready_us;          /* leadership barrier applied */
	uint64_t tl_refresh_us;        /* lease_refresh applied */
	uint64_t tl_first_write_us;    /* first client command committed */
	uint64_t tl_term;              /* term these belong to */
	uint64_t tl_leader_msg_cur_us; /* last message from the current leader */
};

static uint64_t now_ns(void)
{
	return iod_clock_now_ns();
}

static void wake_cb(uv_idle_t *h)
{
	struct iod_node *n = h->data;
	uv_idle_stop(h);
	n->wake_pending = false;
	if (n->on_apply)
		n->on_apply(n->on_apply_data);
}

static void fsm_applied(void *data)
{
	struct iod_node *n = data;
	if (!n->wake_pending && !n->stopping) {
		n->wake_pending = true;
		uv_idle_start(&n->wake, wake_cb);
	}
}

void iod_node_set_on_apply(struct iod_node *n, void (*fn)(void *), void *data)
{
	n->on_apply = fn;
	n->on_apply_data = data;
}

static int map_raft_status(int status)
{
	switch (status) {
	case 0: return 0;
	case RAFT_NOTLEADER:
	case RAFT_LEADERSHIPLOST: return -ENOTCONN;
	case RAFT_NOMEM: return -ENOMEM;
	case RAFT_SHUTDOWN: return -ESHUTDOWN;
	case RAFT_TOOBIG: return -E2BIG;
	default: return -EIO;
	}
}

static uint64_t unix_us(void)
{
	return iod_time_unix_ns() / 1000;
}

static void record_latency(struct iod_node *n, uint64_t us)
{
	unsigned b = 0;
	while (b < LAT_BUCKETS && us > lat_bounds_us[b])
		b++;
	n->lat_bucket[b]++;
	n->lat_sum_us += us;
}

/* Hand one command's outcome to its proposer and free it. */
static void complete(struct iod_node *n, struct proposal *p, int status,
                     const struct iod_state_result *result)
{
	struct iod_state_result res;

	n->pending--;
	if (status == 0 && result) {
		res = *result;
		n->commits++;
		record_latency(n, (now_ns() - p->t0_ns) / 1000);
	} else if (status > 0 || (status == 0 && !result)) {
		/* raft took it (raft_apply returned 0), then failed it: the entry
		 * is in this server's log and maybe in others', so a later leader
		 * may still commit it */
		memset(&res, 0, sizeof(res));
		res.code = IOD_NODE_OUTCOME_UNKNOWN;
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
	struct iod_node *n = b->node;
	const struct iod_state_result *res = result;

	if (status == 0 && b->term == n->raft.current_term && !n->tl_first_write_us &&
	    n->tl_term == b->term)
		n->tl_first_write_us = unix_us();
	/* a batch's results are ctx.batch[0..n); a single command's is ctx.last */
	if (status == 0 && b->n > 1 && (res != n->ctx.batch || n->ctx.batch_n != b->n))
		status = RAFT_CORRUPT; /* cannot happen: the frame was ours */
	for (uint32_t i = 0; i < b->n; i++)
		complete(n, b->p[i], status, status == 0 && res ? &res[b->n > 1 ? i : 0] : NULL);
	free(b);
}

/* Fail every queued command with status (a negative errno). */
static void queue_fail(struct iod_node *n, int status)
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
static void queue_flush(struct iod_node *n)
{
	struct raft_buffer buf = {0};
	struct batch *b;
	uint32_t k = n->queue_n;
	int rv;

	if (!k)
		return;
	if (n->stopping) {
		queue_fail(n, -ESHUTDOWN);
		return;
	}
	if (raft_state(&n->raft) != RAFT_LEADER) {
		n->rejected_not_leader += k;
		queue_fail(n, -ENOTCONN);
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
		queue_fail(n, -ENOMEM);
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
			complete(n, b->p[i], map_raft_status(rv), NULL);
		free(b);
		return;
	}
	n->batches++;
	n->batched_cmds += k;
}

static void flush_prep_cb(uv_prepare_t *h)
{
	queue_flush(h->data);
}

static void flush_check_cb(uv_check_t *h)
{
	queue_flush(h->data);
}

int iod_node_propose(struct iod_node *n, const char *cmd, size_t len, iod_node_apply_cb cb,
                     void *data)
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
		queue_flush(n);
	p = malloc(sizeof(*p) + len);
	if (!p)
		return -ENOMEM;
	memcpy(p->cmd, cmd, len);
	p->len = len;
	p->cb = cb;
	p->data = data;
	p->t0_ns = now_ns();
	n->queue[n->queue_n++] = p;
	n->queue_bytes += len;
	n->pending++;
	n->proposals++;
	return 0;
}

struct fence {
	struct raft_barrier req; /* raft's request */
	iod_node_done_cb cb;     /* caller's completion */
	void *data;              /* its argument */
};

static void fence_cb(struct raft_barrier *req, int status)
{
	struct fence *f = req->data;
	f->cb(f->data, status ? map_raft_status(status) : 0);
	free(f);
}

int iod_node_read_fence(struct iod_node *n, iod_node_done_cb cb, void *data)
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
		return map_raft_status(rv);
	}
	return 0;
}

bool iod_node_is_leader(struct iod_node *n)
{
	return raft_state(&n->raft) == RAFT_LEADER;
}

/* API address of member id: the replicated member record, else --peers. */
static const char *member_api(struct iod_node *n, uint64_t id)
{
	char key[IOD_NAME_MAX];
	const char *api = NULL;

	snprintf(key, sizeof(key), "member.%llu", (unsigned long long)id);
	const json_t *v = iod_state_value(n->state, IOD_STATE_CONFIG, key);
	if (v && !iod_json_get_str(v, "api", &api) && api[0])
		return api;
	for (uint32_t i = 0; i < n->cfg.peers_n; i++)
		if (n->cfg.peers[i].id == id)
			return n->cfg.peers[i].api_addr;
	if (id == n->cfg.id)
		return n->cfg.api_addr;
	return "";
}

uint64_t iod_node_leader(struct iod_node *n, const char **api_addr)
{
	raft_id id = 0;
	const char *addr = NULL;

	if (n->handover_id) /* stopping after a transfer: raft may be closing */
		id = n->handover_id;
	else
		raft_leader(&n->raft, &id, &addr);
	if (api_addr)
		*api_addr = id ? member_api(n, id) : "";
	return id;
}

const struct iod_state *iod_node_state(struct iod_node *n)
{
	return n->state;
}

static const char *state_name(int s)
{
	switch (s) {
	case RAFT_FOLLOWER: return "follower";
	case RAFT_CANDIDATE: return "candidate";
	case RAFT_LEADER: return "leader";
	default: return "unavailable";
	}
}

static const char *role_name(int r)
{
	switch (r) {
	case RAFT_VOTER: return "voter";
	case RAFT_STANDBY: return "standby";
	case RAFT_SPARE: return "spare";
	default: return "?";
	}
}

json_t *iod_node_status(struct iod_node *n)
{
	const char *api = "";
	uint64_t leader = iod_node_leader(n, &api);
	json_t *members = json_array();

	for (unsigned i = 0; i < n->raft.configuration.n; i++) {
		const struct raft_server *sv = &n->raft.configuration.servers[i];
		json_array_append_new(members,
		                      json_pack("{s:I, s:s, s:s, s:s}", "id", (json_int_t)sv->id,
		                                "raft", sv->address, "api", member_api(n, sv->id),
		                                "role", role_name(sv->role)));
	}
	json_t *tl = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "term", (json_int_t)n->tl_term,
	    "last_leader_msg_us", (json_int_t)n->tl_leader_msg_us, "prevote_us",
	    (json_int_t)n->tl_prevote_us, "vote_us", (json_int_t)n->tl_vote_us, "leader_us",
	    (json_int_t)n->tl_leader_us, "ready_us", (json_int_t)n->tl_ready_us, "refresh_us",
	    (json_int_t)n->tl_refresh_us, "first_write_us", (json_int_t)n->tl_first_write_us);
	return json_pack(
	    "{s:o, s:b, s:I, s:s, s:I, s:s, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:b}", "timeline",
	    tl ? tl : json_object(), "leader_ready",
	    raft_state(&n->raft) == RAFT_LEADER && n->ready_term == n->raft.current_term, "id",
	    (json_int_t)n->cfg.id, "state", state_name(raft_state(&n->raft)), "leader",
	    (json_int_t)leader, "leader_api", api, "term", (json_int_t)n->raft.current_term,
	    "members", members, "commit_index", (json_int_t)n->raft.commit_index, "applied_index",
	    (json_int_t)raft_last_applied(&n->raft), "last_index",
	    (json_int_t)raft_last_index(&n->raft), "revision", (json_int_t)iod_state_rev(n->state),
	    "objects", (json_int_t)iod_state_total(n->state), "pre_vote", n->cfg.pre_vote);
}

void iod_node_metrics(struct iod_node *n, struct iod_buf *b)
{
	uint64_t cum = 0;

	iod_buf_printf(
	    b,
	    "# HELP iod_raft_term Current Raft term.\n# TYPE iod_raft_term gauge\n"
	    "iod_raft_term %llu\n"
	    "# HELP iod_raft_leader 1 when this server is the leader.\n"
	    "# TYPE iod_raft_leader gauge\niod_raft_leader %d\n"
	    "# HELP iod_raft_commit_index Raft commit index.\n"
	    "# TYPE iod_raft_commit_index gauge\niod_raft_commit_index %llu\n"
	    "# HELP iod_raft_applied_index Last index applied to the state machine.\n"
	    "# TYPE iod_raft_applied_index gauge\niod_raft_applied_index %llu\n"
	    "# HELP iod_raft_proposals_total Commands proposed by this server.\n"
	    "# TYPE iod_raft_proposals_total counter\niod_raft_proposals_total %llu\n"
	    "# HELP iod_raft_commits_total Commands this server proposed that committed.\n"
	    "# TYPE iod_raft_commits_total counter\niod_raft_commits_total %llu\n"
	    "# HELP iod_raft_not_leader_total Proposals refused: not the leader.\n"
	    "# TYPE iod_raft_not_leader_total counter\niod_raft_not_leader_total %llu\n"
	    "# HELP iod_raft_outcome_unknown_total Proposals raft failed after taking them "
	    "(answered 504 outcome_unknown).\n"
	    "# TYPE iod_raft_outcome_unknown_total counter\niod_raft_outcome_unknown_total %llu\n"
	    "# HELP iod_raft_leader_changes_total Leader changes observed.\n"
	    "# TYPE iod_raft_leader_changes_total counter\n"
	    "iod_raft_leader_changes_total %llu\n"
	    "# HELP iod_state_applied_total Commands applied to the state machine.\n"
	    "# TYPE iod_state_applied_total counter\niod_state_applied_total %llu\n"
	    "# HELP iod_state_revision Cluster state revision.\n"
	    "# TYPE iod_state_revision gauge\niod_state_revision %llu\n"
	    "# HELP iod_state_objects Objects in the cluster state.\n"
	    "# TYPE iod_state_objects gauge\niod_state_objects %u\n"
	    "# HELP iod_state_snapshots_total Snapshots taken.\n"
	    "# TYPE iod_state_snapshots_total counter\niod_state_snapshots_total %llu\n"
	    "# HELP iod_raft_apply_latency_seconds Propose to applied, on the leader.\n"
	    "# TYPE iod_raft_apply_latency_seconds histogram\n",
	    (unsigned long long)n->raft.current_term, iod_node_is_leader(n),
	    (unsigned long long)n->raft.commit_index,
	    (unsigned long long)raft_last_applied(&n->raft), (unsigned long long)n->proposals,
	    (unsigned long long)n->commits, (unsigned long long)n->rejected_not_leader,
	    (unsigned long long)n->outcome_unknown, (unsigned long long)n->leader_changes,
	    (unsigned long long)n->ctx.applied, (unsigned long long)iod_state_rev(n->state),
	    iod_state_total(n->state), (unsigned long long)n->ctx.snapshots);
	for (unsigned i = 0; i < LAT_BUCKETS; i++) {
		cum += n->lat_bucket[i];
		iod_buf_printf(b, "iod_raft_apply_latency_seconds_bucket{le=\"%g\"} %llu\n",
		               (double)lat_bounds_us[i] / 1e6, (unsigned long long)cum);
	}
	cum += n->lat_bucket[LAT_BUCKETS];
	iod_buf_printf(b,
	               "iod_raft_apply_latency_seconds_bucket{le=\"+Inf\"} %llu\n"
	               "iod_raft_apply_latency_seconds_sum %.6f\n"
	               "iod_raft_apply_latency_seconds_count %llu\n",
	               (unsigned long long)cum, (double)n->lat_sum_us / 1e6,
	               (unsigned long long)cum);
	iod_buf_printf(b,
	               "# HELP iod_state_preparsed_total Large commands applied from a parse "
	               "made on the log's worker thread.\n"
	               "# TYPE iod_state_preparsed_total counter\niod_state_preparsed_total %llu\n",
	               (unsigned long long)n->ctx.pre_hits);
	iod_buf_printf(
	    b,
	    "# HELP iod_raft_entries_proposed_total Raft entries proposed (group commit).\n"
	    "# TYPE iod_raft_entries_proposed_total counter\n"
	    "iod_raft_entries_proposed_total %llu\n"
	    "# HELP iod_raft_entry_commands_total Commands carried by those entries.\n"
	    "# TYPE iod_raft_entry_commands_total counter\n"
	    "iod_raft_entry_commands_total %llu\n"
	    "# HELP iod_raft_disk_appends_total Disk appends completed.\n"
	    "# TYPE iod_raft_disk_appends_total counter\niod_raft_disk_appends_total %llu\n"
	    "# HELP iod_raft_disk_append_seconds Disk append latency.\n"
	    "# TYPE iod_raft_disk_append_seconds summary\n"
	    "iod_raft_disk_append_seconds_sum %.6f\n"
	    "iod_raft_disk_append_seconds_count %llu\n"
	    "# HELP iod_raft_disk_append_max_seconds Slowest disk append.\n"
	    "# TYPE iod_raft_disk_append_max_seconds gauge\n"
	    "iod_raft_disk_append_max_seconds %.6f\n"
	    "# HELP iod_raft_disk_appends_slow_total Disk appends over 10 ms.\n"
	    "# TYPE iod_raft_disk_appends_slow_total counter\n"
	    "iod_raft_disk_appends_slow_total %llu\n"
	    "# HELP iod_raft_meta_writes_total Term/vote writes (synchronous, on the loop).\n"
	    "# TYPE iod_raft_meta_writes_total counter\niod_raft_meta_writes_total %llu\n"
	    "# HELP iod_raft_meta_write_max_seconds Slowest term/vote write.\n"
	    "# TYPE iod_raft_meta_write_max_seconds gauge\n"
	    "iod_raft_meta_write_max_seconds %.6f\n"
	    "# HELP iod_raft_votes_unstuck_total Vote requests let past a leader silent for an "
	    "election timeout.\n"
	    "# TYPE iod_raft_votes_unstuck_total counter\niod_raft_votes_unstuck_total %llu\n"
	    "# HELP iod_state_snapshot_max_seconds Slowest snapshot serialisation (on the loop).\n"
	    "# TYPE iod_state_snapshot_max_seconds gauge\n"
	    "iod_state_snapshot_max_seconds %.6f\n"
	    "# HELP iod_state_snapshot_seconds Snapshot serialisation time (on the loop).\n"
	    "# TYPE iod_state_snapshot_seconds summary\n"
	    "iod_state_snapshot_seconds_sum %.6f\n"
	    "iod_state_snapshot_seconds_count %llu\n"
	    "# HELP iod_loop_lag_max_seconds Worst lateness of the heartbeat timer.\n"
	    "# TYPE iod_loop_lag_max_seconds gauge\niod_loop_lag_max_seconds %.6f\n"
	    "# HELP iod_loop_lag_slow_total Heartbeat timer fired over 10 ms late.\n"
	    "# TYPE iod_loop_lag_slow_total counter\niod_loop_lag_slow_total %llu\n",
	    (unsigned long long)n->batches, (unsigned long long)n->batched_cmds,
	    (unsigned long long)n->append_count, (double)n->append_sum_us / 1e6,
	    (unsigned long long)n->append_count, (double)n->append_max_us / 1e6,
	    (unsigned long long)n->append_slow, (unsigned long long)n->meta_writes,
	    (double)n->meta_max_us / 1e6, (unsigned long long)n->votes_unstuck,
	    (double)n->snap_max_us / 1e6, (double)n->snap_sum_us / 1e6,
	    (unsigned long long)n->snap_count, (double)n->lag_max_us / 1e6,
	    (unsigned long long)n->lag_slow);
}

static void leader_barrier(struct iod_node *n);
static void change_retry(struct iod_node *n);

/* ---- instrumentation: raft's I/O vtable, wrapped ----------------------- */

/*
 * raft calls its I/O through struct raft_io; iod wraps four entries to see
 * what the failover is made of (when the last message from the leader came,
 * when this server asked for (pre-)votes, when it became leader) and how
 * long disk appends take, and to learn at once when a leader is known
 * again (held requests are answered then). The wrappers only observe and
 * pass everything through unchanged.
 */
/* Nodes whose appends are timed (a process runs one; tests may run a few). */
#define NODES_TIMED 8
static struct iod_node *timed_nodes[NODES_TIMED];

static struct iod_node *node_of(struct raft_io *io)
{
	return (struct iod_node *)(void *)((char *)io - offsetof(struct iod_node, io));
}

bool iod_node_leader_fresh(struct iod_node *n)
{
	raft_id id = 0;
	const char *addr = NULL;
	uint64_t stale_ns = (uint64_t)IOD_MAX(2 * n->cfg.heartbeat_timeout_ms, 5u) * IOD_NS_PER_MS;

	if (n->stopping)
		return false;
	if (raft_state(&n->raft) == RAFT_LEADER)
		return true;
	raft_leader(&n->raft, &id, &addr);
	return id != 0 && now_ns() - n->leader_msg_ns <= stale_ns;
}

/* After raft ran: note role changes, tell the server when a leader is usable. */
static void after_raft(struct iod_node *n)
{
	int st = raft_state(&n->raft);
	raft_id id = 0;
	const char *addr = NULL;

	if (st != n->last_state) {
		if (st == RAFT_LEADER) {
			n->tl_leader_us = unix_us();
			n->tl_ready_us = n->tl_refresh_us = n->tl_first_write_us = 0;
			n->tl_term = n->raft.current_term;
			leader_barrier(n); /* now, not at the next tick */
		}
		n->last_state = st;
	}
	raft_leader(&n->raft, &id, &addr);
	if (id)
		n->in_election = false;
	bool fresh = iod_node_leader_fresh(n);
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
static uint64_t unstick_ns(const struct iod_node *n)
{
	uint32_t t = n->cfg.election_timeout_ms, h = n->cfg.heartbeat_timeout_ms;
	return (uint64_t)(h < t ? t - h : t) * IOD_NS_PER_MS;
}

static void io_tick_cb(struct raft_io *io)
{
	struct iod_node *n = node_of(io);
	n->raft_tick(io);
	after_raft(n);
}

static void io_recv_cb(struct raft_io *io, struct raft_message *m)
{
	struct iod_node *n = node_of(io);
	bool from_leader = m->type == RAFT_IO_APPEND_ENTRIES || m->type == RAFT_IO_INSTALL_SNAPSHOT;
	raft_id id0 = 0;
	const char *addr0 = NULL;

	raft_leader(&n->raft, &id0, &addr0);
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
	    n->leader_msg_ns && now_ns() - n->leader_msg_ns >= unstick_ns(n)) {
		m->request_vote.disrupt_leader = true;
		n->votes_unstuck++;
	}
	n->raft_recv(io, m);
	if (from_leader) {
		raft_id id = 0;
		const char *addr = NULL;
		raft_leader(&n->raft, &id, &addr);
		if (id && id == m->server_id) {
			n->leader_msg_ns = now_ns();
			n->tl_leader_msg_cur_us = unix_us();
		}
	}
	after_raft(n);
}

static int io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv)
{
	struct iod_node *n = node_of(io);
	n->raft_tick = tick;
	n->raft_recv = recv;
	return n->io_start(io, msecs, io_tick_cb, io_recv_cb);
}

static int io_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                   raft_io_send_cb cb)
{
	struct iod_node *n = node_of(io);
	if (m->type == RAFT_IO_REQUEST_VOTE) {
		if (!n->in_election) {
			/* a new election episode: remember what it started from */
			n->in_election = true;
			n->tl_prevote_us = n->tl_vote_us = 0;
			n->tl_leader_msg_us = n->tl_leader_msg_cur_us;
		}
		if (m->request_vote.pre_vote && !n->tl_prevote_us)
			n->tl_prevote_us = unix_us();
		else if (!m->request_vote.pre_vote && !n->tl_vote_us)
			n->tl_vote_us = unix_us();
	}
	return n->io_send(io, req, m, cb);
}

static void io_append_cb(struct raft_io_append *req, int status)
{
	struct iod_node *n = NULL;
	raft_io_append_cb cb = NULL;
	uint64_t t0 = 0;

	/* find the slot: the request pointer is the key (raft's callback gets
	 * no io pointer, so every live node's table is searched: one or two) */
	for (unsigned k = 0; k < NODES_TIMED && !cb; k++) {
		struct iod_node *m = timed_nodes[k];
		for (unsigned i = 0; m && i < APPENDS_TIMED; i++)
			if (m->appends[i].req == req) {
				n = m;
				cb = m->appends[i].cb;
				t0 = m->appends[i].t0_ns;
				m->appends[i].req = NULL;
				break;
			}
	}
	IOD_ASSERT(cb != NULL && n != NULL);
	uint64_t us = (now_ns() - t0) / 1000;
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
	struct iod_node *n = node_of(io);
	/* a full table (or a node not registered) passes through untimed */
	if (n->timed) {
		for (unsigned i = 0; i < APPENDS_TIMED; i++) {
			if (n->appends[i].req)
				continue;
			n->appends[i] = (struct timed_append){req, cb, now_ns()};
			int rv = n->io_append(io, req, entries, k, io_append_cb);
			if (rv)
				n->appends[i].req = NULL;
			return rv;
		}
	}
	return n->io_append(io, req, entries, k, cb);
}

/* rio writes term and vote synchronously (on the loop), as raft needs: timed. */
static void meta_time(struct iod_node *n, uint64_t t0)
{
	uint64_t us = (now_ns() - t0) / 1000;
	n->meta_writes++;
	if (us > n->meta_max_us)
		n->meta_max_us = us;
}

static int io_set_term(struct raft_io *io, raft_term term)
{
	struct iod_node *n = node_of(io);
	uint64_t t0 = now_ns();
	int rv = n->io_set_term(io, term);
	meta_time(n, t0);
	return rv;
}

static int io_set_vote(struct raft_io *io, raft_id id)
{
	struct iod_node *n = node_of(io);
	uint64_t t0 = now_ns();
	int rv = n->io_set_vote(io, id);
	meta_time(n, t0);
	return rv;
}

/* raft 0.15 takes FSM snapshots synchronously on the loop: timed. */
static int fsm_snapshot_timed(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *k)
{
	struct iod_state_fsm_ctx *ctx = fsm->data;
	struct iod_node *n =
	    (struct iod_node *)(void *)((char *)ctx - offsetof(struct iod_node, ctx));
	uint64_t t0 = now_ns();
	int rv = n->fsm_snapshot(fsm, bufs, k);
	uint64_t us = (now_ns() - t0) / 1000;
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
	struct iod_node *n = data;
	if (p->index <= raft_last_applied(&n->raft))
		iod_state_preparsed_free(p);
	else
		iod_state_fsm_prepared(&n->ctx, p);
}

static void prep_flush(void *data)
{
	struct iod_node *n = data;
	iod_state_fsm_prepared_flush(&n->ctx);
}

/* A Revocation object "server.<id>" (iod revoke server ID), as the API's
 * authorisation reads it: the Raft transport refuses that certificate too. */
static bool server_revoked(void *data, const char *server)
{
	struct iod_node *n = data;
	char key[IOD_NAME_MAX];
	if (snprintf(key, sizeof(key), "server.%s", server) >= (int)sizeof(key))
		return false;
	return iod_state_value(n->state, IOD_STATE_REVOCATION, key) != NULL;
}

static void io_wrap(struct iod_node *n)
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
	for (unsigned k = 0; k < NODES_TIMED; k++)
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

void iod_node_set_on_leader(struct iod_node *n, void (*fn)(void *), void *data)
{
	n->on_leader = fn;
	n->on_leader_data = data;
}

/* ---- leader duties ------------------------------------------------------ */

static void expire_cb(void *data, int status, const struct iod_state_result *res)
{
	struct iod_node *n = data;
	(void)status;
	(void)res;
	n->expire_in_flight = false;
}

static void refresh_cb(void *data, int status, const struct iod_state_result *res)
{
	struct iod_node *n = data;
	(void)res;
	n->refresh_in_flight = false;
	if (status == 0) {
		n->refresh_term = n->refresh_propose_term;
		if (n->tl_term == n->refresh_term && !n->tl_refresh_us)
			n->tl_refresh_us = unix_us();
	}
}

static void member_cb(void *data, int status, const struct iod_state_result *res)
{
	struct iod_node *n = data;
	(void)status;
	(void)res;
	n->member_in_flight = false;
}

/* The leader records its own API address so followers can point clients at it. */
static void record_member(struct iod_node *n)
{
	char key[IOD_NAME_MAX];
	const char *api = NULL, *raft_addr = NULL;

	snprintf(key, sizeof(key), "member.%llu", (unsigned long long)n->cfg.id);
	const json_t *v = iod_state_value(n->state, IOD_STATE_CONFIG, key);
	if (v && !iod_json_get_str(v, "api", &api) && !strcmp(api, n->cfg.api_addr) &&
	    !iod_json_get_str(v, "raft", &raft_addr) && !strcmp(raft_addr, n->cfg.raft_addr))
		return;
	json_t *val = json_pack("{s:I, s:s, s:s}", "id", (json_int_t)n->cfg.id, "raft",
	                        n->cfg.raft_addr, "api", n->cfg.api_addr);
	char *cmd = iod_state_cmd_put(IOD_STATE_CONFIG, key, val, 0, -1);
	json_decref(val);
	if (cmd && !iod_node_propose(n, cmd, strlen(cmd), member_cb, n))
		n->member_in_flight = true;
	free(cmd);
}

static void barrier_cb(struct raft_barrier *req, int status)
{
	struct iod_node *n = req->data;
	n->barrier_in_flight = false;
	if (status == 0) {
		n->ready_term = n->barrier_term;
		if (n->tl_term == n->barrier_term && !n->tl_ready_us)
			n->tl_ready_us = unix_us();
	}
}

/*
 * A new leader commits nothing from earlier terms until it commits an entry
 * of its own term (Raft section 5.4.2), so an idle cluster would leave a
 * restarted leader's state machine behind. Propose a barrier at once.
 */
static void leader_barrier(struct iod_node *n)
{
	if (n->barrier_in_flight || n->barrier_term == n->raft.current_term)
		return;
	n->barrier.data = n;
	if (raft_barrier(&n->raft, &n->barrier, barrier_cb) == 0) {
		n->barrier_in_flight = true;
		n->barrier_term = n->raft.current_term;
	}
}

static void tick_cb(uv_timer_t *t)
{
	struct iod_node *n = t->data;
	uint64_t t_ns = now_ns(), period_ns = (uint64_t)n->cfg.heartbeat_timeout_ms * IOD_NS_PER_MS;

	/* loop lag: how late this timer fired (a stalled loop delays raft too) */
	if (n->last_tick_ns && t_ns - n->last_tick_ns > period_ns) {
		uint64_t lag_us = (t_ns - n->last_tick_ns - period_ns) / 1000;
		if (lag_us > n->lag_max_us)
			n->lag_max_us = lag_us;
		n->lag_slow += lag_us > 10000;
	}
	n->last_tick_ns = t_ns;
	after_raft(n);
	change_retry(n);
	if (n->stopping || raft_state(&n->raft) != RAFT_LEADER)
		return;
	leader_barrier(n);
	/* the rest runs every lease_check_ms */
	n->ticks++;
	if (n->ticks % IOD_MAX(n->cfg.lease_check_ms / n->cfg.heartbeat_timeout_ms, 1u))
		return;
	if (!n->member_in_flight)
		record_member(n);
	uint64_t due = iod_state_lease_next_deadline_ms(n->state);
	uint64_t now_ms = iod_time_unix_ns() / IOD_NS_PER_MS;
	if (n->refresh_term != n->raft.current_term) {
		/* New in this term: refresh every lease before expiring any. */
		if (!n->refresh_in_flight && n->ready_term == n->raft.current_term) {
			char *cmd = iod_state_cmd_lease_refresh(now_ms);
			n->refresh_propose_term = n->raft.current_term;
			if (cmd && !iod_node_propose(n, cmd, strlen(cmd), refresh_cb, n))
				n->refresh_in_flight = true;
			free(cmd);
		}
		return;
	}
	if (due && now_ms >= due && !n->expire_in_flight) {
		char *cmd = iod_state_cmd_lease_expire(now_ms);
		if (cmd && !iod_node_propose(n, cmd, strlen(cmd), expire_cb, n))
			n->expire_in_flight = true;
		free(cmd);
	}
}

/* ---- membership --------------------------------------------------------- */

static void change_cb(struct raft_change *req, int status)
{
	struct change *c = req->data;
	struct iod_node *n = c->node;

	if (status == 0 && c->assign_next) {
		c->assign_next = false;
		int rv = raft_assign(&n->raft, &c->req, c->id, RAFT_VOTER, change_cb);
		if (rv == 0)
			return;
		status = rv;
	}
	if (c->cb)
		c->cb(c->data, status ? map_raft_status(status) : 0);
	free(c);
}

/* raft's refusal of a membership change as an errno. */
static int change_errno(const struct change *c, int rv)
{
	if (c->remove && rv == RAFT_BADID)
		return -ENOENT;
	if (!c->remove && (rv == RAFT_DUPLICATEID || rv == RAFT_DUPLICATEADDRESS))
		return -EEXIST;
	if (rv == RAFT_CANTCHANGE)
		return -EBUSY;
	return map_raft_status(rv);
}

static int change_submit(struct iod_node *n, struct change *c)
{
	return c->remove ? raft_remove(&n->raft, &c->req, c->id, change_cb)
	                 : raft_add(&n->raft, &c->req, c->id, c->raft_addr, change_cb);
}

/*
 * raft takes one membership change at a time (RAFT_CANTCHANGE while the
 * previous one is uncommitted, e.g. a removal right after a join): such a
 * change is parked (one slot) and retried at every tick for up to
 * IOD_STATE_CHANGE_WAIT_MS before it is refused.
 */
static void change_retry(struct iod_node *n)
{
	struct change *c = n->change_wait;
	int rv;

	if (!c)
		return;
	if (n->stopping || raft_state(&n->raft) != RAFT_LEADER) {
		n->change_wait = NULL;
		if (c->cb)
			c->cb(c->data, n->stopping ? -ESHUTDOWN : -ENOTCONN);
		free(c);
		return;
	}
	rv = change_submit(n, c);
	if (rv == RAFT_CANTCHANGE && now_ns() < c->deadline_ns)
		return;
	n->change_wait = NULL;
	if (rv) {
		if (c->cb)
			c->cb(c->data, change_errno(c, rv));
		free(c);
	}
}

/* Submit c now, or park it when another change is in flight. 0 or -errno. */
static int change_start(struct iod_node *n, struct change *c)
{
	int rv = change_submit(n, c);
	if (rv == RAFT_CANTCHANGE && !n->change_wait) {
		c->deadline_ns = now_ns() + (uint64_t)IOD_STATE_CHANGE_WAIT_MS * IOD_NS_PER_MS;
		n->change_wait = c;
		return 0;
	}
	if (rv) {
		int err = change_errno(c, rv);
		free(c);
		return err;
	}
	return 0;
}

int iod_node_member_add(struct iod_node *n, uint64_t id, const char *raft_addr,
                        const char *api_addr, iod_node_done_cb cb, void *data)
{
	struct change *c;
	int rv;

	if (!iod_node_is_leader(n))
		return -ENOTCONN;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req.data = c;
	c->node = n;
	c->id = id;
	c->assign_next = true;
	c->cb = cb;
	c->data = data;
	if (iod_strlcpy(c->raft_addr, raft_addr, sizeof(c->raft_addr))) {
		free(c);
		return -EINVAL;
	}
	if ((rv = change_start(n, c)))
		return rv;
	/* record its API address too, so clients can be pointed at it */
	if (api_addr && api_addr[0]) {
		char key[IOD_NAME_MAX];
		snprintf(key, sizeof(key), "member.%llu", (unsigned long long)id);
		json_t *val = json_pack("{s:I, s:s, s:s}", "id", (json_int_t)id, "raft", raft_addr,
		                        "api", api_addr);
		char *cmd = iod_state_cmd_put(IOD_STATE_CONFIG, key, val, 0, -1);
		json_decref(val);
		if (cmd)
			iod_node_propose(n, cmd, strlen(cmd), NULL, NULL);
		free(cmd);
	}
	return 0;
}

int iod_node_member_remove(struct iod_node *n, uint64_t id, iod_node_done_cb cb, void *data)
{
	struct change *c;

	if (!iod_node_is_leader(n))
		return -ENOTCONN;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req.data = c;
	c->node = n;
	c->id = id;
	c->remove = true;
	c->cb = cb;
	c->data = data;
	return change_start(n, c);
}

/* ---- start / stop ------------------------------------------------------- */

static int mkdirs(const char *path, struct iod_err *e)
{
	char tmp[IOD_PATH_MAX];
	if (iod_strlcpy(tmp, path, sizeof(tmp)))
		return iod_err_set(e, -ENAMETOOLONG, "data dir path too long");
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return iod_err_set(e, -errno, "creating %s: %s", tmp, strerror(errno));
		*p = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return iod_err_set(e, -errno, "creating data dir %s: %s", tmp, strerror(errno));
	return 0;
}

int iod_node_start(struct iod_node **out, uv_loop_t *loop, const struct iod_server_config *c,
                   struct iod_err *e)
{
	struct iod_node *n;
	int rv;

	if (c->id == 0)
		return iod_err_set(e, -EINVAL, "--id must be a positive integer");
	if ((rv = mkdirs(c->data_dir, e)))
		return rv;
	n = calloc(1, sizeof(*n));
	if (!n)
		return iod_err_set(e, -ENOMEM, "out of memory");
	n->cfg = *c;
	n->loop = loop;
	if ((rv = iod_state_new(&n->state))) {
		free(n);
		return iod_err_set(e, rv, "out of memory");
	}
	n->ctx.state = n->state;
	n->ctx.on_apply = fsm_applied;
	n->ctx.on_apply_data = n;
	iod_state_fsm_init(&n->fsm, &n->ctx);

	/* iod's own raft_io (rio.c): the log is opened and verified and the
	 * Raft port bound here, so damage or a taken port is reported with its
	 * file, offset or reason before raft starts. A lost peer connection is
	 * retried at about an election timeout. */
	if (c->recover_from_peers && (rv = iod_node_recover_from_peers(c, e))) {
		iod_state_free(n->state);
		free(n);
		return rv;
	}
	rv = iod_rio_init(&n->io, loop, c->data_dir, c->raft_addr, c->raft_tls,
	                  IOD_MAX(c->election_timeout_ms / 2, 10u), e);
	if (rv) {
		iod_state_free(n->state);
		free(n);
		return rv;
	}
	io_wrap(n);
	rv = raft_init(&n->raft, &n->io, &n->fsm, c->id, c->raft_addr);
	if (rv) {
		iod_err_set(e, -EIO, "raft init: %s", raft_errmsg(&n->raft));
		iod_state_free(n->state);
		free(n);
		return -EIO;
	}
	n->raft.data = n;
	raft_set_election_timeout(&n->raft, c->election_timeout_ms);
	raft_set_heartbeat_timeout(&n->raft, c->heartbeat_timeout_ms);
	raft_set_snapshot_threshold(&n->raft, c->snapshot_threshold);
	raft_set_snapshot_trailing(&n->raft, c->snapshot_trailing);
	raft_set_pre_vote(&n->raft, c->pre_vote);
	/* A lagging follower is sent a snapshot after this long without reply. */
	raft_set_install_snapshot_timeout(&n->raft, IOD_MAX(10 * c->election_timeout_ms, 5000u));

	if (!c->join_addr[0]) {
		struct raft_configuration conf;
		raft_configuration_init(&conf);
		if (c->peers_n == 0) {
			rv = raft_configuration_add(&conf, c->id, c->raft_addr, RAFT_VOTER);
		} else {
			for (uint32_t i = 0; i < c->peers_n && !rv; i++)
				rv = raft_configuration_add(&conf, c->peers[i].id,
				                            c->peers[i].raft_addr, RAFT_VOTER);
		}
		if (!rv)
			rv = raft_bootstrap(&n->raft, &conf);
		raft_configuration_close(&conf);
		if (rv && rv != RAFT_CANTBOOTSTRAP) {
			iod_err_set(e, -EIO, "raft bootstrap: %s", raft_errmsg(&n->raft));
			goto fail_started;
		}
		if (rv == RAFT_CANTBOOTSTRAP)
			IOD_INFO("raft", "existing state in %s: resuming", c->data_dir);
	}
	/* raft_start may restore a snapshot, which calls back into fsm_applied:
	 * the handles it uses must exist first */
	uv_timer_init(loop, &n->tick);
	n->tick.data = n;
	uv_idle_init(loop, &n->wake);
	n->wake.data = n;
	uv_prepare_init(loop, &n->flush_prep);
	n->flush_prep.data = n;
	uv_check_init(loop, &n->flush_check);
	n->flush_check.data = n;
	uv_prepare_start(&n->flush_prep, flush_prep_cb);
	uv_check_start(&n->flush_check, flush_check_cb);
	n->last_state = RAFT_UNAVAILABLE;
	rv = raft_start(&n->raft);
	if (rv) {
		iod_err_set(e, -EIO, "raft start: %s",
		            raft_errmsg(&n->raft)[0] ? raft_errmsg(&n->raft) : raft_strerror(rv));
		goto fail_started;
	}
	/* ticks at the heartbeat: a new leader proposes its barrier promptly */
	uv_timer_start(&n->tick, tick_cb, c->heartbeat_timeout_ms, c->heartbeat_timeout_ms);
	*out = n;
	return 0;

fail_started:
	/* raft_close would need the loop to run; a failed start leaves the
	 * process, so only the cheap parts are released here. */
	return -EIO;
}

static void handle_closed(uv_handle_t *h)
{
	struct iod_node *n = h->data;
	if (--n->closing_handles == 0 && n->stop_done)
		n->stop_done(n->stop_data);
}

static void raft_closed(struct raft *r)
{
	struct iod_node *n = r->data;
	iod_rio_free(&n->io);
	queue_fail(n, -ESHUTDOWN);
	n->closing_handles = 4;
	uv_close((uv_handle_t *)&n->tick, handle_closed);
	uv_close((uv_handle_t *)&n->wake, handle_closed);
	uv_close((uv_handle_t *)&n->flush_prep, handle_closed);
	uv_close((uv_handle_t *)&n->flush_check, handle_closed);
}

static void close_later_cb(uv_timer_t *t)
{
	struct iod_node *n = t->data;
	raft_close(&n->raft, raft_closed);
}

static void transfer_done(struct raft_transfer *req)
{
	struct iod_node *n = req->data;
	raft_id leader = 0;
	const char *addr = NULL;
	raft_leader(&n->raft, &leader, &addr);
	IOD_INFO("raft", "leadership transfer %s in %.1f ms (leader now %llu)",
	         leader && leader != n->cfg.id ? "done" : "did not complete",
	         (double)(now_ns() - n->transfer_t0_ns) / 1e6, (unsigned long long)leader);
	if (leader && leader != n->cfg.id) {
		/* tell the server now, not after raft has closed: the requests it
		 * holds go to the new leader at once */
		n->handover_id = leader;
		if (n->on_leader)
			n->on_leader(n->on_leader_data);
		/* closing raft's files takes tens of ms on the loop (measured
		 * 30-40 ms: the held requests were answered only after it);
		 * let the server answer them first: the new leader is in charge */
		uv_timer_start(&n->tick, close_later_cb, 5, 0);
		return;
	}
	raft_close(&n->raft, raft_closed);
}

/* Transfer leadership (when leading others), then close raft. */
static void stop_transfer(struct iod_node *n)
{
	if (raft_state(&n->raft) == RAFT_LEADER && n->raft.configuration.n > 1) {
		n->transfer.data = n;
		n->transfer_t0_ns = now_ns();
		if (raft_transfer(&n->raft, &n->transfer, 0, transfer_done) == 0)
			return;
	}
	raft_close(&n->raft, raft_closed);
}

/* A planned stop lets the writes already in the log commit first (bounded
 * by an election timeout): answered 200 instead of 504 outcome_unknown. */
static void drain_cb(uv_timer_t *t)
{
	struct iod_node *n = t->data;
	if (n->pending && now_ns() < n->drain_deadline_ns && raft_state(&n->raft) == RAFT_LEADER)
		return;
	uv_timer_stop(t);
	stop_transfer(n);
}

void iod_node_stop(struct iod_node *n, void (*done)(void *), void *data)
{
	if (n->stopping)
		return;
	n->stopping = true;
	n->stop_done = done;
	n->stop_data = data;
	uv_timer_stop(&n->tick);
	queue_fail(n, -ESHUTDOWN); /* never proposed: safe to retry elsewhere */
	change_retry(n);           /* stopping: a parked change is refused */
	if (n->pending && raft_state(&n->raft) == RAFT_LEADER) {
		n->drain_deadline_ns =
		    now_ns() + (uint64_t)IOD_MAX(n->cfg.election_timeout_ms, 50u) * IOD_NS_PER_MS;
		uv_timer_start(&n->tick, drain_cb, 1, 1);
		return;
	}
	stop_transfer(n);
}

void iod_node_free(struct iod_node *n)
{
	if (!n)
		return;
	for (unsigned k = 0; k < NODES_TIMED; k++)
		if (timed_nodes[k] == n)
			timed_nodes[k] = NULL;
	iod_state_fsm_prepared_flush(&n->ctx);
	iod_state_free(n->state);
	free(n);
}

/* ---- configuration ------------------------------------------------------ */

void iod_server_config_default(struct iod_server_config *c)
{
	memset(c, 0, sizeof(*c));
	c->id = 1;
	snprintf(c->raft_addr, sizeof(c->raft_addr), "127.0.0.1:7300");
	snprintf(c->api_addr, sizeof(c->api_addr), "127.0.0.1:7400");
	/* Loopback/LAN defaults measured in docs/control-plane.md: the failover
	 * target (p99 < 100 ms) needs election T = 30 ms (measured: 40 ms gave p99 ~140 ms); heartbeats at
	 * T/10 keep followers from timing out under load. */
	c->election_timeout_ms = 30;
	c->heartbeat_timeout_ms = 3;
	c->snapshot_threshold = 8192;
	c->snapshot_trailing = 2048;
	c->pre_vote = true;
	c->lease_check_ms = 50;
}

/* "ID=RAFT_ADDR[@API_ADDR]" entries, comma-separated. */
int iod_server_peers_parse(struct iod_server_config *c, const char *s, struct iod_err *e)
{
	char buf[IOD_STATE_PEERS_MAX * (2 * IOD_ADDR_MAX + 24)];
	char *save = NULL, *tok;

	if (iod_strlcpy(buf, s, sizeof(buf)))
		return iod_err_set(e, -EINVAL, "--peers is too long");
	c->peers_n = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct iod_server_peer *p;
		char *eq = strchr(tok, '='), *at, *end = NULL;
		if (c->peers_n >= IOD_STATE_PEERS_MAX)
			return iod_err_set(e, -E2BIG, "--peers names more than %d members",
			                   IOD_STATE_PEERS_MAX);
		p = &c->peers[c->peers_n];
		memset(p, 0, sizeof(*p));
		if (!eq)
			return iod_err_set(
			    e, -EINVAL,
			    "--peers entry \"%s\": expected ID=HOST:PORT[@API_HOST:PORT]", tok);
		*eq = 0;
		unsigned long long id = strtoull(tok, &end, 10);
		if (!id || *end)
			return iod_err_set(
			    e, -EINVAL, "--peers entry id \"%s\" is not a positive integer", tok);
		p->id = id;
		at = strchr(eq + 1, '@');
		if (at)
			*at = 0;
		if (!strchr(eq + 1, ':') ||
		    iod_strlcpy(p->raft_addr, eq + 1, sizeof(p->raft_addr)) ||
		    (at && (!strchr(at + 1, ':') ||
		            iod_strlcpy(p->api_addr, at + 1, sizeof(p->api_addr)))))
			return iod_err_set(e, -EINVAL,
			                   "--peers entry %llu: addresses must be HOST:PORT", id);
		for (uint32_t i = 0; i < c->peers_n; i++)
			if (c->peers[i].id == id)
				return iod_err_set(e, -EINVAL, "--peers names id %llu twice", id);
		c->peers_n++;
	}
	return 0;
}
