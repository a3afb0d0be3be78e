/*
 * member_internal.h: the private structure of a control-plane member
 * (struct iod_raft_member) and what its files share. Only the member's
 * files include it:
 *
 *   member.c          start, stop, free; accessors; server configuration
 *   member_propose.c  propose, group commit, results, read fence
 *   member_io.c       raft's I/O vtable wrapped: timing and failover timeline
 *   member_leader.c   leader duties: barrier, lease refresh/expiry, member record
 *   member_change.c   membership changes (one at a time, parked and retried)
 *   member_metrics.c  status JSON and Prometheus text (through src/obs/prom.c)
 *
 * Shell code: everything here runs on the member's libuv loop thread.
 */
#ifndef IOD_STATE_MEMBER_INTERNAL_H
#define IOD_STATE_MEMBER_INTERNAL_H

#include "internal.h"

#include <raft.h>
#include <uv.h>

/* Apply-latency histogram: bucket bounds, microseconds (member_metrics.c). */
#define IOD_MEMBER_LAT_BUCKETS 11
extern const uint64_t iod_member__lat_bounds_us[IOD_MEMBER_LAT_BUCKETS];

/* One proposed command, queued until the loop iteration ends (group commit). */
struct proposal {
	iod_raft_member_apply_cb cb; /* caller's completion */
	void *data;                  /* caller's argument */
	uint64_t t0_ns;              /* when proposed, for the latency histogram */
	uint64_t flush_ns;           /* when its entry went to raft (group commit flush) */
	size_t len;                  /* command bytes */
	char cmd[];                  /* the command (JSON text) */
};

/* One Raft entry in flight: a single command or a batch of them. */
struct batch {
	struct raft_apply req;        /* raft's request (req.data = this) */
	struct iod_raft_member *node; /* owner */
	uint32_t n;                   /* commands */
	uint64_t term;                /* term it was proposed in */
	struct proposal *p[];         /* the commands, in log order */
};

/* One Raft append in flight, timed for the disk-latency metric. */
struct timed_append {
	struct raft_io_append *req; /* raft's request, NULL = free slot */
	raft_io_append_cb cb;       /* raft's callback */
	uint64_t t0_ns;             /* when raft asked */
};

/* A membership change: add (then assign voter) or remove. */
struct change {
	struct raft_change req;       /* raft's request */
	struct iod_raft_member *node; /* owner */
	uint64_t id;                  /* server being added/removed */
	bool assign_next;             /* add done: now assign voter */
	bool remove;                  /* a removal (else an addition) */
	char raft_addr[IOD_ADDR_MAX]; /* addition: the server's Raft address */
	uint64_t deadline_ns;         /* parked: give up retrying after this */
	iod_raft_member_done_cb cb;   /* caller's completion */
	void *data;                   /* caller's argument */
};

/* One control-plane member (include/iod/state.h). */
/* A peer, for the pre-vote tie-break (vote.c). */
struct iod_member_pv_peer {
	uint64_t id;  /* server id, 0 = free */
	bool refused; /* it refused this server's latest pre-vote request */
};

struct iod_raft_member {
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
	uint64_t proposals;           /* commands proposed */
	uint64_t commits;             /* commands committed+applied here as leader */
	uint64_t rejected_not_leader; /* proposals refused: not leader */
	uint64_t outcome_unknown;     /* proposed, then failed by raft */
	uint64_t lat_bucket[IOD_MEMBER_LAT_BUCKETS + 1]; /* apply latency histogram (+Inf last) */
	uint64_t lat_sum_us;                             /* sum of latencies */
	uint64_t leader_changes;                         /* observed leader id changes */
	uint64_t last_leader;                            /* for leader_changes */
	uint64_t barrier_term;       /* term whose leadership barrier was proposed */
	uint64_t ready_term;         /* term whose barrier has been applied */
	struct raft_barrier barrier; /* the leadership barrier request */
	bool barrier_in_flight;      /* barrier outstanding */
	uint64_t ticks;              /* tick count (lease checks every few) */
	/* group commit: commands proposed during this loop iteration */
	struct proposal *queue[IOD_STATE_BATCH_MAX]; /* in proposal order */
	uint32_t queue_n;                            /* queued */
	size_t queue_bytes;                          /* their command bytes */
	uv_prepare_t flush_prep;                     /* flush before the loop blocks */
	uv_check_t flush_check;                      /* flush after I/O callbacks */
	uint64_t batches;                            /* entries proposed */
	uint64_t batched_cmds;                       /* commands in them */
	struct iod_raft_member_trace trace;          /* the completing command's (in its cb) */
	/* instrumentation of raft's I/O (wrapped vtable) */
	int (*io_start)(struct raft_io *, unsigned, raft_io_tick_cb, raft_io_recv_cb); /* rio's */
	int (*io_send)(struct raft_io *, struct raft_io_send *, const struct raft_message *,
	               raft_io_send_cb); /* rio's */
	int (*io_append)(struct raft_io *, struct raft_io_append *, const struct raft_entry[],
	                 unsigned, raft_io_append_cb);       /* rio's */
	raft_io_tick_cb raft_tick;                           /* raft's tick callback */
	raft_io_recv_cb raft_recv;                           /* raft's receive callback */
	struct timed_append appends[IOD_RAFT_APPENDS_TIMED]; /* appends in flight */
	bool timed;                     /* registered for append timing (member_io.c) */
	uint64_t append_count;          /* appends completed */
	uint64_t append_sum_us;         /* their total latency */
	uint64_t append_max_us;         /* the slowest */
	uint64_t append_slow;           /* appends over 10 ms */
	uint64_t last_tick_ns;          /* previous tick, for loop lag */
	uint64_t lag_max_us;            /* worst loop lag seen by the tick timer */
	uint64_t lag_slow;              /* ticks late by more than 10 ms */
	uint64_t leader_msg_ns;         /* last AppendEntries from the leader */
	int last_state;                 /* raft state at the last check */
	bool was_fresh;                 /* leader known and heard from */
	bool in_election;               /* vote requests sent, no leader yet */
	uint64_t handover_id;           /* leader this one handed over to */
	struct change *change_wait;     /* a membership change waiting for the previous one */
	struct raft_change promote_req; /* a spare's promotion resumed by this leader */
	bool promote_in_flight;         /* promote_req is raft's */
	uint64_t spares_promoted;       /* promotions resumed (metric) */
	uint64_t votes_unstuck;         /* vote requests let past a silent leader */
	struct iod_member_pv_peer pv_peers[IOD_STATE_PEERS_MAX]; /* the tie-break's peers */
	uint64_t prevotes_yielded; /* pre-vote requests left unanswered (vote.c) */
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

/* raft's status code as a negative errno (0 stays 0). */
int iod_member__errno(int raft_status);
/* Wall clock in Unix microseconds, for the failover timeline. */
uint64_t iod_member__unix_us(void);
/* API address of member id: its replicated record, else --peers ("" = unknown). */
const char *iod_member__api(struct iod_raft_member *n, uint64_t id);

/* member_propose.c: the group-commit queue. */
void iod_member__queue_flush(struct iod_raft_member *n);
/* Fail every queued command with status (a negative errno). */
void iod_member__queue_fail(struct iod_raft_member *n, int status);

/* member_io.c: wrap raft's I/O and FSM snapshot (before raft_init), undo the
 * timing registration (at free), and note role and leader changes after raft ran. */
void iod_member__io_wrap(struct iod_raft_member *n);
void iod_member__io_unwrap(struct iod_raft_member *n);
void iod_member__after_raft(struct iod_raft_member *n);

/* member_leader.c: the heartbeat timer's callback and the term's barrier. */
void iod_member__tick_cb(uv_timer_t *t);
void iod_member__leader_barrier(struct iod_raft_member *n);

/* member_change.c: retry (or refuse, when stopping or not leading) a parked change. */
void iod_member__change_retry(struct iod_raft_member *n);

#endif
