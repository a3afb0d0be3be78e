/*
 * state.h: the cluster state machine (pure) and the replicated control plane
 * around it (Raft glue, server).
 *
 * The state is a set of JSON documents keyed by kind/name: Node, Service,
 * Replica, Endpoint, Policy, Config (docs/control-plane.md lists their
 * fields). Every change is a command, a small JSON document that Raft
 * replicates; iod_state_apply() applies one command deterministically: the
 * same sequence of commands gives the same state, revision for revision, on
 * every server. The state machine never reads the clock (lease expiry is a
 * command carrying the time the leader chose), never does I/O and never
 * allocates without a bound (limits in limits.h, section state).
 *
 * Revisions: the cluster has one revision counter, raised by one for every
 * command that changes something (like etcd). Each object remembers the
 * revision that created it and the one that last changed it; compare-and-swap
 * compares against the latter. A bounded history of changes serves watches;
 * a watch from a revision older than the history answers -ESTALE ("revision
 * compacted").
 */
#ifndef IOD_STATE_H
#define IOD_STATE_H

#include "iod/base.h"

/* Object kinds: enum, singular name (in URLs and keys), plural (lists). */
#define IOD_STATE_KINDS(X)                         \
	X(NODE, "node", "nodes")                   \
	X(SERVICE, "service", "services")          \
	X(REPLICA, "replica", "replicas")          \
	X(ENDPOINT, "endpoint", "endpoints")       \
	X(POLICY, "policy", "policies")            \
	X(CONFIG, "config", "configs")             \
	X(TOKEN, "token", "tokens")                \
	X(SECRET, "secret", "secrets")             \
	X(REVOCATION, "revocation", "revocations") \
	X(FAULT, "fault", "faults")                \
	X(CHECKPOINT, "checkpoint", "checkpoints") \
	X(XFERPEER, "xferpeer", "xferpeers")       \
	X(NETPOLICY, "netpolicy", "netpolicies")

enum iod_state_kind {
#define X(n, s, p) IOD_STATE_##n,
	IOD_STATE_KINDS(X)
#undef X
	    IOD_STATE_KIND_COUNT
};

const char *iod_state_kind_name(enum iod_state_kind k);
const char *iod_state_kind_plural(enum iod_state_kind k);
/* Accepts singular or plural ("node", "nodes"); -EINVAL otherwise. */
int iod_state_kind_parse(const char *s, enum iod_state_kind *out);
/* Object names: 1..IOD_NAME_MAX-1 of [A-Za-z0-9._-], not starting with '.'. */
bool iod_state_name_valid(const char *name);

struct iod_state;

/*
 * The outcome of one command. code is 0 or a negative errno:
 *   -ENOENT     delete/cas/renew of something that does not exist
 *   -ECANCELED  compare-and-swap failed (cur_rev says what is there now)
 *   -EINVAL     malformed command (msg says what)
 *   -ENOSPC     a limit was reached (objects, leases, value size)
 * A failed command changes nothing and does not raise the revision.
 */
struct iod_state_result {
	int code;                  /* 0 or negative errno */
	uint64_t rev;              /* cluster revision after the command */
	uint64_t cur_rev;          /* on -ECANCELED: the object's mod revision (0 = absent) */
	uint64_t lease_id;         /* lease_grant: the new lease's id */
	uint32_t changed;          /* objects put or deleted by this command */
	char msg[IOD_ERR_MSG_MAX]; /* human text when code != 0 */
};

int iod_state_new(struct iod_state **out);
void iod_state_free(struct iod_state *s);

/*
 * Apply one command (JSON text, see "Commands" in docs/control-plane.md).
 * Always fills res; returns res->code. Deterministic: depends only on the
 * state and the bytes of cmd.
 */
int iod_state_apply(struct iod_state *s, const void *cmd, size_t len, struct iod_state_result *res);
/*
 * The same in two steps: parse (no state: any thread; NULL with res filled
 * for text over IOD_STATE_CMD_MAX or not JSON), then apply the parsed
 * command (not consumed). The Raft log's worker thread parses large
 * commands ahead of their apply (issue 15: parsing a 2,000-replica deploy
 * was 40 ms on every server's loop); apply_parsed gives what apply gives.
 */
json_t *iod_state_cmd_parse(const void *cmd, size_t len, struct iod_state_result *res);
int iod_state_apply_parsed(struct iod_state *s, json_t *cmd, struct iod_state_result *res);
/* ... with the sizes of its values known: a put's value (1), a txn's ops'
 * (one per op), a deploy's objects (services, then replicas); NULL, or a
 * count that does not match: measured here. Each value is measured once
 * either way (the bytes quota and the put share it). */
int iod_state_apply_sized(struct iod_state *s, json_t *cmd, const size_t *bytes, size_t bytes_n,
                          struct iod_state_result *res);
/* Those sizes: *bytes malloc'd (NULL for other commands). */
int iod_state_cmd_sizes(const json_t *cmd, size_t **bytes, size_t *n);

/*
 * Group commit: several commands in one Raft entry (src/state/batch.c).
 * encode writes "\x01BT1", a u32 count and count x (u32 length, command)
 * into out (cap bytes; iod_state_batch_size() says how many are needed):
 * -EINVAL for 0 or more than IOD_STATE_BATCH_MAX commands or an empty one,
 * -E2BIG when cap is too small. apply_batch validates the whole frame first
 * (a malformed one changes nothing: -EINVAL, one error result), then applies
 * the commands in order exactly as separate entries: one result each in
 * res[0..*n). Trailing NUL padding is accepted.
 */
bool iod_state_batch_is(const void *buf, size_t len);
size_t iod_state_batch_size(uint32_t n, size_t cmd_bytes);
int iod_state_batch_encode(void *out, size_t cap, const char *const cmds[], const size_t lens[],
                           uint32_t n, size_t *len);
int iod_state_apply_batch(struct iod_state *s, const void *buf, size_t len,
                          struct iod_state_result *res, uint32_t res_max, uint32_t *n);

/* The cluster revision: the revision of the last change. */
uint64_t iod_state_rev(const struct iod_state *s);
/* Objects of a kind, and in total. */
uint32_t iod_state_count(const struct iod_state *s, enum iod_state_kind k);
uint32_t iod_state_total(const struct iod_state *s);

/*
 * One object as {"kind","name","rev","create_rev","lease","value"} (a new
 * reference the caller releases), or NULL when absent.
 */
json_t *iod_state_get(const struct iod_state *s, enum iod_state_kind k, const char *name);
/* The borrowed value of an object, or NULL. Valid until the next apply. */
const json_t *iod_state_value(const struct iod_state *s, enum iod_state_kind k, const char *name);
/* All objects of a kind, sorted by name: {"rev": R, "items": [...]}. */
json_t *iod_state_list(const struct iod_state *s, enum iod_state_kind k);

/*
 * A list answered off the loop (issue 15: serialising 32k objects held the
 * Raft/API loop 170-345 ms). iod_state_items copies, in O(n) and without
 * sorting, the objects of kind k whose names sort after `after` (NULL or ""
 * for all), each with a reference to its value; values are never changed
 * once stored and jansson's reference counts are atomic, so a worker thread
 * may then sort, serialise and release them with iod_state_items_dump.
 */
struct iod_state_item {
	char name[IOD_NAME_MAX]; /* object name */
	uint64_t rev;            /* revision of its last change */
	uint64_t create_rev;     /* revision that created it */
	uint64_t lease;          /* lease it dies with, 0 = none */
	json_t *value;           /* a reference to its value */
};
/* *out (malloc'd, NULL when none) gets the copies; returns how many, or -ENOMEM. */
int iod_state_items(const struct iod_state *s, enum iod_state_kind k, const char *after,
                    struct iod_state_item **out);
/* Any thread: sort copies by name; one as iod_state_obj_json writes it. */
void iod_state_items_sort(struct iod_state_item *v, uint32_t n);
json_t *iod_state_item_json(enum iod_state_kind k, const struct iod_state_item *it);
/*
 * Sort v by name and append to out the first `limit` of them (0 = all) as
 * the text of iod_state_list's answer at revision rev (indented, a newline
 * at the end), with "continue": the last name, when more followed; then
 * release every value and free v. Thread safe (touches nothing but its
 * arguments). 0, or -ENOMEM (out is then incomplete).
 */
int iod_state_items_dump(enum iod_state_kind k, uint64_t rev, struct iod_state_item *v, uint32_t n,
                         uint32_t limit, struct iod_buf *out);

/*
 * Changes after revision after_rev, oldest first, at most max of them, for one
 * kind (or all kinds when all_kinds): a JSON array of
 * {"rev","type":"put"|"delete","kind","name","value"}. *events may be an
 * empty array (nothing newer yet: the caller waits). -ESTALE when after_rev
 * is older than the history kept (message in e: re-list, then watch from the
 * list's revision). -EINVAL when after_rev is in the future.
 */
int iod_state_watch(const struct iod_state *s, enum iod_state_kind k, bool all_kinds,
                    uint64_t after_rev, uint32_t max, json_t **events, struct iod_err *e);
/* Oldest revision a watch can start after (changes after it are all kept). */
uint64_t iod_state_history_floor(const struct iod_state *s);

/* Earliest lease deadline (Unix ms) or 0 when there is no lease: the leader
 * proposes lease_expire when its clock passes it. */
uint64_t iod_state_lease_next_deadline_ms(const struct iod_state *s);
uint32_t iod_state_lease_count(const struct iod_state *s);

/*
 * Snapshots: "IODSNAP" magic, format version, length and a 64-bit checksum
 * over the body, then the body (JSON: revision, leases, objects). snapshot
 * returns a malloc'd buffer the caller frees. restore replaces the whole state
 * (history restarts at the snapshot's revision); on any error (-EINVAL: bad
 * magic, version, length or checksum) the state is left unchanged.
 */
int iod_state_snapshot(const struct iod_state *s, void **buf, size_t *len);
/* The same in two steps, so that the costly one can leave the loop: take
 * copies the state where it lives (O(n): the objects' names and revisions,
 * references to their values; NULL when out of memory); encode (sorting,
 * serialising, framing, checksumming: any thread, stored values are never
 * changed) gives the bytes iod_state_snapshot gave at the take, whatever was
 * applied since. free releases the take (the loop's thread: it drops
 * references). iod_state_snapshot is take + encode + free. */
struct iod_state_snap;
struct iod_state_snap *iod_state_snapshot_take(const struct iod_state *s);
int iod_state_snapshot_encode(struct iod_state_snap *t, void **buf, size_t *len);
void iod_state_snapshot_free(struct iod_state_snap *t);
int iod_state_restore(struct iod_state *s, const void *buf, size_t len, struct iod_err *e);
/* Bytes of object values held (the IOD_STATE_BYTES_MAX quota); tests may
 * lower the quota. */
uint64_t iod_state_bytes(const struct iod_state *s);
void iod_state_set_bytes_max(struct iod_state *s, uint64_t bytes);
/* A 64-bit digest of the whole state (objects, leases, revision): equal on
 * servers that applied the same commands. For tests and `iod status`. */
uint64_t iod_state_digest(const struct iod_state *s);

/*
 * Command builders: return a malloc'd JSON text (caller frees) or NULL on
 * out-of-memory. prev_rev < 0 means "no condition"; 0 means "must not
 * exist"; > 0 means "must be at this mod revision" (compare-and-swap).
 */
char *iod_state_cmd_put(enum iod_state_kind k, const char *name, const json_t *value,
                        uint64_t lease_id, int64_t prev_rev);
char *iod_state_cmd_delete(enum iod_state_kind k, const char *name, int64_t prev_rev);
char *iod_state_cmd_lease_grant(uint64_t ttl_ms, uint64_t now_ms);
/* A grant counted against owner's quota (IOD_STATE_LEASES_PER_CLIENT_MAX),
 * or, node: a node agent's lease from the reserved pool. */
char *iod_state_cmd_lease_grant_for(uint64_t ttl_ms, uint64_t now_ms, const char *owner, bool node);
char *iod_state_cmd_lease_renew(uint64_t lease_id, uint64_t now_ms);
char *iod_state_cmd_lease_revoke(uint64_t lease_id);
char *iod_state_cmd_lease_expire(uint64_t now_ms);
/* Extend every lease to at least now + its TTL: a new leader proposes it
 * before it expires anything, so a leaderless gap does not expire leases. */
char *iod_state_cmd_lease_refresh(uint64_t now_ms);

/* ---- Raft glue ---------------------------------------------------------- */

struct raft_fsm;

/*
 * The state machine as a canonical-raft FSM (version 2: snapshot memory is
 * ours, freed in snapshot_finalize). apply never fails the Raft entry: a
 * rejected command (CAS mismatch, bad input) is a committed no-op whose
 * iod_state_result travels to the proposer through the apply callback's
 * result pointer (pointing at *last, valid until the next apply; for a batch
 * entry at batch[0], with batch_n results).
 */
/*
 * A large command parsed ahead of its apply, on the Raft log's worker thread
 * right after the entry is written (issue 15: parsing a 2,000-replica
 * deploy, 1.7 MB, held every server's loop 40-50 ms, and sizing its values
 * 20 ms more). Keyed by the entry's buffer, which raft keeps unchanged from
 * append to apply; dropped when consumed, when the log is truncated or a
 * snapshot installed, and when its index was applied already.
 */
struct iod_state_preparsed {
	const void *base; /* the entry's buffer */
	size_t len;       /* its length */
	uint64_t index;   /* its Raft index */
	json_t *cmd;      /* parsed (owned) */
	size_t *bytes;    /* put, txn, deploy: iod_state_value_bytes of its values (owned) */
	size_t bytes_n;   /* how many */
};

struct iod_state_fsm_ctx {
	struct iod_state *state;      /* the machine (not owned) */
	struct iod_state_result last; /* result of the latest apply */
	/* a batch entry's results, one per command (the apply callback's result
	 * points at batch[0]; batch_n of them are valid until the next apply) */
	struct iod_state_result batch[IOD_STATE_BATCH_MAX];
	uint32_t batch_n;             /* results in batch[] */
	uint64_t applied;             /* commands applied */
	uint64_t snapshots;           /* snapshots taken */
	uint64_t restores;            /* snapshots restored */
	void (*on_apply)(void *data); /* called after each apply (watch wake-up), may be NULL */
	void *on_apply_data;          /* argument of on_apply */
	struct iod_state_preparsed *pre[IOD_STATE_PREPARSED_MAX]; /* waiting for their apply */
	uint32_t pre_n;                                           /* in pre[] */
	uint64_t pre_hits;                                        /* applies that used one */
	struct iod_state_snap *snap; /* async snapshot: taken on the loop, encoded off it */
};
void iod_state_fsm_init(struct raft_fsm *fsm, struct iod_state_fsm_ctx *ctx);
/* Snapshots in two steps (raft FSM version 3; the raft_io must have
 * async_work, as rio.c does): raft's snapshot call on the loop only takes the
 * body, its snapshot_async on a worker encodes it. A synchronous snapshot of
 * 16,000-80,000 objects held the loop 80-680 ms, long enough for the
 * followers to elect (docs/control-plane.md, "The write tail"). */
void iod_state_fsm_set_async_snapshots(struct raft_fsm *fsm);
/* Any thread: parse a command entry of at least IOD_STATE_PREPARSE_MIN
 * bytes (NULL for smaller ones, batch frames and text that is not JSON). */
struct iod_state_preparsed *iod_state_preparse(const void *base, size_t len, uint64_t index);
void iod_state_preparsed_free(struct iod_state_preparsed *p);
/* Loop: keep p (owned) for its apply (the oldest goes when full); drop all. */
void iod_state_fsm_prepared(struct iod_state_fsm_ctx *c, struct iod_state_preparsed *p);
void iod_state_fsm_prepared_flush(struct iod_state_fsm_ctx *c);

/* ---- the Raft log's file system (src/state/walfs.c) ----------------------- */

/*
 * The log (src/state/wal.c) does its file I/O through a struct iod_walfs:
 * POSIX for the daemon, or a pure in-memory one that tests and the
 * simulator damage. A memory file system keeps per file what a read sees
 * and what the last sync made durable; names are durable at once (as with
 * dirsync). Paths are "DIR/NAME" as the log opens them.
 */
struct iod_walfs;
struct iod_walfs *iod_walfs_posix(void);
struct iod_walfs *iod_walfs_mem_new(void); /* NULL: out of memory */
void iod_walfs_mem_free(struct iod_walfs *fs);

/* Damage to one file of a memory file system, durable at once. */
enum iod_walfs_fault {
	IOD_WALFS_FLIP,   /* flip one bit of the byte at off */
	IOD_WALFS_CUT,    /* truncate to off bytes */
	IOD_WALFS_ZERO,   /* every byte zero, size kept */
	IOD_WALFS_DELETE, /* the file is gone */
	IOD_WALFS_APPEND, /* len bytes appended */
};
int iod_walfs_mem_fault(struct iod_walfs *fs, const char *path, enum iod_walfs_fault kind,
                        uint64_t off, const void *bytes, size_t len);
/* A power loss: every file goes back to the bytes of its last sync. The
 * log open on it must be closed (closing writes nothing) and reopened. */
void iod_walfs_mem_crash(struct iod_walfs *fs);
/* The power goes during the n-th sync from now (n >= 1): it and every
 * later write, sync and name change fail with -EIO until a crash. */
void iod_walfs_mem_die_at_sync(struct iod_walfs *fs, uint64_t n);
/* A file's size (-ENOENT), and the names in dir (malloc'd, in creation
 * slot order; free with iod_walfs_names_free). */
int iod_walfs_mem_size(struct iod_walfs *fs, const char *path, uint64_t *size);
int iod_walfs_mem_names(struct iod_walfs *fs, const char *dir, char ***names, size_t *n);
void iod_walfs_names_free(char **names, size_t n);

/* ---- a simulated server's disk (src/state/simdisk.c) ---------------------- */

/*
 * The whole-cluster simulator's servers run raft on its fixture; each one's
 * log is also mirrored into iod's real log (wal.c) on a memory file system,
 * so disk faults meet wal.c's real verdict. Pure.
 */
struct raft;
struct iod_simdisk;
enum iod_simdisk_damage {
	IOD_SIMDISK_FLIP,    /* a byte of the oldest live segment's first record */
	IOD_SIMDISK_TORN,    /* a crash cut the last append: a partial record header */
	IOD_SIMDISK_ZERO,    /* the oldest live segment zeroed */
	IOD_SIMDISK_MISSING, /* the oldest live segment deleted */
	IOD_SIMDISK_GARBAGE, /* 100 bytes of garbage after the open segment's last record */
};
const char *iod_simdisk_damage_name(enum iod_simdisk_damage k);
int iod_simdisk_damage_parse(const char *s, enum iod_simdisk_damage *out);
/* What wal.c said when the damaged log was opened. */
struct iod_simdisk_verdict {
	int rc;                    /* 0: it starts; else (-EUCLEAN) refused */
	char why[IOD_ERR_MSG_MAX]; /* the refusal: file, offset, reason */
	uint64_t torn_bytes;       /* a torn tail's bytes repaired away (0: none) */
	uint64_t entries;          /* entries loaded */
	uint64_t last_index;       /* the log's last index */
};
/* A fresh disk; dir names its log on it. segment_bytes: roll sooner. */
int iod_simdisk_new(struct iod_simdisk **out, const char *dir, uint64_t segment_bytes);
void iod_simdisk_free(struct iod_simdisk *d);
/* Open the (empty) log before the first sync. */
int iod_simdisk_open(struct iod_simdisk *d, struct iod_err *e);
/* Write what r holds (term, vote, snapshot position, entries) into the log. */
int iod_simdisk_sync(struct iod_simdisk *d, const struct raft *r);
/* The server crashes, the log is damaged, and it restarts: wal.c's verdict
 * in v; refused leaves the disk down (iod_simdisk_up false). */
int iod_simdisk_damage(struct iod_simdisk *d, enum iod_simdisk_damage kind,
                       struct iod_simdisk_verdict *v, struct iod_err *e);
bool iod_simdisk_up(const struct iod_simdisk *d);
uint64_t iod_simdisk_last_index(const struct iod_simdisk *d);
/* --recover-from-peers: the log rebuilt from peer's stored log at a term
 * above both, voting for self_id. */
int iod_simdisk_recover(struct iod_simdisk *d, const struct raft *peer, uint64_t self_id,
                        struct iod_err *e);
/* Reopen the log as a restart would and say which of index[0..n) it holds
 * (an entry, or a snapshot covering it). */
int iod_simdisk_holds(struct iod_simdisk *d, const uint64_t *index, size_t n, bool *held,
                      struct iod_err *e);

/* ---- the replicated server (shell: libuv + raft + libmicrohttpd) -------- */

/* One initial member: raft id, Raft address, API address (may be empty). */
struct iod_server_peer {
	uint64_t id;                  /* raft server id, > 0 */
	char raft_addr[IOD_ADDR_MAX]; /* host:port of its Raft transport */
	char api_addr[IOD_ADDR_MAX];  /* host:port of its HTTP API, "" if unknown */
};

/* Everything `iod server` is configured with. */
struct iod_sec_tls_creds;
struct iod_server_config {
	uint64_t id;                  /* this server's raft id */
	char data_dir[IOD_PATH_MAX];  /* raft log + snapshots; created if missing */
	char raft_addr[IOD_ADDR_MAX]; /* host:port to bind for Raft */
	char api_addr[IOD_ADDR_MAX];  /* host:port to bind for the HTTP API */
	char join_addr[IOD_ADDR_MAX]; /* API address of a member to join, "" = none */
	struct iod_server_peer peers[IOD_STATE_PEERS_MAX]; /* initial members (bootstrap) */
	uint32_t peers_n;                                  /* 0 = single-member bootstrap or join */
	uint32_t election_timeout_ms;  /* raft election timeout T (randomised in [T, 2T]) */
	uint32_t heartbeat_timeout_ms; /* raft heartbeat interval */
	uint32_t snapshot_threshold;   /* entries between snapshots */
	uint32_t snapshot_trailing;    /* entries kept after a snapshot */
	bool pre_vote;                 /* raft pre-vote (Raft thesis 9.6) */
	bool fast_votes; /* grant votes past a leader silent for T (member_io.c; off by default) */
	bool no_vote_tiebreak;   /* --no-vote-tiebreak: answer every pre-vote (vote.c's rule off) */
	uint32_t lease_check_ms; /* how often the leader looks for expired leases */
	char pki_dir[IOD_PATH_MAX]; /* --pki: CA, keys (src/sec); "" = none */
	bool insecure;              /* --insecure: plaintext, no authentication (loopback only) */
	bool recover_from_peers;    /* rebuild the log from a peer's copy before starting */
	bool raft_plaintext; /* --raft-plaintext: Raft without TLS despite --pki (loopback) */
	/* Raft over mutual TLS: this server's certificate and the CA its peers
	 * must chain to (set by the API server from --pki; not owned); NULL =
	 * plaintext, refused on a non-loopback --raft (rio.c) */
	struct iod_sec_tls_creds *raft_tls;
};

/*
 * A control-plane member (src/state/member*.c): canonical raft over iod's
 * own I/O (rio.c) + the state machine. Shell code:
 * it owns sockets, files and timers on the loop it is given. The HTTP API
 * (src/api) is built on it.
 */
struct iod_raft_member;
struct uv_loop_s;

/* status 0: committed and applied (res says whether the command succeeded);
 * -ENOTCONN: this server is not the leader and the command was never
 * proposed: retry at the leader; IOD_RAFT_MEMBER_OUTCOME_UNKNOWN: it was proposed
 * (in the log) but leadership was lost or the server stopped before it
 * committed, so a later leader may still apply it: only an idempotent
 * command may be retried; another negative errno: not proposed (shutting
 * down, out of memory). */
#define IOD_RAFT_MEMBER_OUTCOME_UNKNOWN (-EINPROGRESS)
typedef void (*iod_raft_member_apply_cb)(void *data, int status,
                                         const struct iod_state_result *res);
typedef void (*iod_raft_member_done_cb)(void *data, int status);

int iod_raft_member_start(struct iod_raft_member **out, struct uv_loop_s *loop,
                          const struct iod_server_config *c, struct iod_err *e);
/* Propose a command (JSON text). -ENOTCONN not leader, -EBUSY too many in flight. */
int iod_raft_member_propose(struct iod_raft_member *n, const char *cmd, size_t len,
                            iod_raft_member_apply_cb cb, void *data);
bool iod_raft_member_is_leader(struct iod_raft_member *n);
/* Where a committed command's time went on the leader (CLOCK_MONOTONIC ns):
 * proposed, handed to raft as (part of) an entry (the group-commit flush),
 * committed and applied. The per-write trace (docs/control-plane.md). */
struct iod_raft_member_trace {
	uint64_t propose_ns; /* iod_raft_member_propose called */
	uint64_t flush_ns;   /* its entry handed to raft_apply */
	uint64_t apply_ns;   /* committed and applied: its callback runs */
};
/* The trace of the command whose apply callback is running (valid only
 * inside that callback, status 0). */
const struct iod_raft_member_trace *iod_raft_member_trace(const struct iod_raft_member *n);
/* Linearizable read fence (leader only): cb(data, 0) once a barrier entry of
 * the current term is applied, so the state reflects every write committed
 * before the call. -ENOTCONN when not the leader. */
int iod_raft_member_read_fence(struct iod_raft_member *n, iod_raft_member_done_cb cb, void *data);
/* Leader's id (0 = unknown) and the API address to send writes to ("" = unknown). */
uint64_t iod_raft_member_leader(struct iod_raft_member *n, const char **api_addr);
const struct iod_state *iod_raft_member_state(struct iod_raft_member *n);
/* id, state, leader, term, members, commit/applied index, revision. */
json_t *iod_raft_member_status(struct iod_raft_member *n);
/* Prometheus text for raft and apply metrics, appended to b. */
void iod_raft_member_metrics(struct iod_raft_member *n, struct iod_buf *b);
/* The leader is this server, or a follower knows it and heard from it within
 * two heartbeats: a redirect to it is worth following. */
bool iod_raft_member_leader_fresh(struct iod_raft_member *n);
/* Called (on the loop) when the leader changes or a follower hears from it
 * again: the server answers the requests it held while there was none. */
void iod_raft_member_set_on_leader(struct iod_raft_member *n, void (*fn)(void *data), void *data);
/* Called (on the loop) after commands were applied: wakes watches. */
void iod_raft_member_set_on_apply(struct iod_raft_member *n, void (*fn)(void *data), void *data);
/* Membership (leader only): add as voter (raft_add then raft_assign), remove. */
int iod_raft_member_member_add(struct iod_raft_member *n, uint64_t id, const char *raft_addr,
                               const char *api_addr, iod_raft_member_done_cb cb, void *data);
int iod_raft_member_member_remove(struct iod_raft_member *n, uint64_t id,
                                  iod_raft_member_done_cb cb, void *data);
/* Graceful stop: transfer leadership if leader (raft_transfer), then close.
 * done runs when everything is closed; iod_raft_member_free after it. */
void iod_raft_member_stop(struct iod_raft_member *n, void (*done)(void *data), void *data);
void iod_raft_member_free(struct iod_raft_member *n);

/* Defaults (see docs/control-plane.md "Timeouts"). */
void iod_server_config_default(struct iod_server_config *c);
/* Parse "1=127.0.0.1:7001@127.0.0.1:7401,2=..." into c->peers. */
int iod_server_peers_parse(struct iod_server_config *c, const char *s, struct iod_err *e);

#endif
