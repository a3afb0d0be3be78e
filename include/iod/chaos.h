/*
 * chaos.h: the pure core of `iod chaos` (issue 20): a history of client
 * operations in, a verdict out. No clock, no I/O, no threads.
 *
 * A history is what clients saw: each operation has a client, a kind, a
 * value, the event index of its invocation and of its completion (or
 * IOD_CHAOS_NONE: indeterminate, it may or may not have taken effect) and a
 * result. Two checkers read it: register linearizability (Wing-Gong search
 * with Lowe's memoisation, as Knossos and Porcupine do) and set invariants.
 */
#ifndef IOD_CHAOS_H
#define IOD_CHAOS_H

#include "iod/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "iod/limits.h"

#define IOD_CHAOS_NONE UINT32_MAX
#define IOD_CHAOS_MAX_OPS 100000u        /* a parsed history holds at most this many */
#define IOD_CHAOS_DEFAULT_STATES 100000u /* default bound on explored states */

enum iod_chaos_f {
	IOD_CHAOS_READ,
	IOD_CHAOS_WRITE,
	IOD_CHAOS_ADD,
	IOD_CHAOS_TRANSFER, /* bank: value [from, to, amount] */
	IOD_CHAOS_APPEND,   /* append: value appended to the list under key */
};
enum iod_chaos_res { IOD_CHAOS_OK, IOD_CHAOS_FAIL, IOD_CHAOS_INFO };

struct iod_chaos_op {
	uint32_t client;
	enum iod_chaos_f f;
	enum iod_chaos_res res;
	bool has_value;   /* false: null (a read of the initial, unwritten register) */
	int64_t value;    /* written, added or read (register) value */
	uint32_t set_off; /* set read: its values are vals[set_off, set_off+set_n) */
	uint32_t set_n;
	bool is_set;   /* the value is a list (a set read) */
	uint32_t inv;  /* event index of the invocation */
	uint32_t cmp;  /* event index of the completion, or IOD_CHAOS_NONE */
	uint32_t line; /* line of the invocation in the parsed file, 0 if built */
	uint32_t key;  /* append: which list (the event's "key", default 0) */
};

struct iod_chaos_history {
	struct iod_chaos_op *ops;
	uint32_t n, cap;
	int64_t *vals; /* set read values */
	uint32_t nvals, vcap;
	uint32_t events; /* number of events (invocations and completions) */
};

void iod_chaos_history_free(struct iod_chaos_history *h);

/* Appends an op (ops are kept in invocation order by the parser); 0 or -ENOMEM. */
int iod_chaos_history_add(struct iod_chaos_history *h, const struct iod_chaos_op *op);

/*
 * Parses JSON lines, one event a line:
 *   {"client":1,"type":"invoke|ok|fail|info","f":"read|write|add","value":V}
 * V is an integer, null, or (a set read's result) a list of integers. An
 * invoke opens the client's operation; ok, fail or info completes it (info:
 * indeterminate). An operation still open at the end is indeterminate. Blank
 * lines are skipped. Returns 0, or -EINVAL with "line N: ..." in e.
 */
int iod_chaos_history_parse(const char *text, size_t len, struct iod_chaos_history *h,
                            struct iod_err *e);

enum iod_chaos_verdict {
	IOD_CHAOS_LINEARIZABLE,
	IOD_CHAOS_NOT_LINEARIZABLE,
	IOD_CHAOS_UNKNOWN, /* the bound on explored states was hit, or no op was
	                    * acknowledged (nothing to check) */
};

const char *iod_chaos_verdict_name(enum iod_chaos_verdict v);

struct iod_chaos_lin_result {
	enum iod_chaos_verdict verdict;
	uint64_t states; /* distinct (linearized set, state) pairs explored */
	/* not linearizable: the shortest prefix of events that cannot be
	 * linearized, and the op whose completion ends it (index into ops) */
	uint32_t fail_events;
	uint32_t fail_op;
};

/* The ops of h that completed ok. None: a run checked nothing, and no
 * checker may call it valid (iod_chaos_check_register says unknown; `iod
 * chaos run|check` report unknown, exit 4, whatever the workload). */
uint32_t iod_chaos_history_acknowledged(const struct iod_chaos_history *h);

/*
 * Register linearizability of the read/write ops of h (initial value null).
 * Failed ops never took effect; indeterminate writes take effect at any point
 * after their invocation or never; indeterminate reads constrain nothing.
 * max_states bounds the search (0: IOD_CHAOS_DEFAULT_STATES); a history
 * with no acknowledged op is unknown (0 states). Returns 0 with r filled,
 * or -ENOMEM / -E2BIG (more than IOD_CHAOS_MAX_OPS ops).
 */
int iod_chaos_check_register(const struct iod_chaos_history *h, uint64_t max_states,
                             struct iod_chaos_lin_result *r, struct iod_err *e);

struct iod_chaos_set_result {
	bool ok;
	bool no_final_read; /* no successful read at all */
	int64_t *lost;      /* acknowledged adds missing from the final read */
	uint32_t nlost;
	int64_t *unexpected; /* values read that no ok or info add wrote */
	uint32_t nunexpected;
	uint32_t acknowledged; /* ok adds */
};

/* Set invariants over the add/read ops of h; the final read is the ok read
 * that completes last. Returns 0 or -ENOMEM. */
int iod_chaos_check_set(const struct iod_chaos_history *h, struct iod_chaos_set_result *r,
                        struct iod_err *e);
void iod_chaos_set_result_free(struct iod_chaos_set_result *r);

/* ---- bank and append (src/chaos/invariants.c), checked directly ---------- */

#define IOD_CHAOS_BANK_ACCOUNTS 5  /* `iod chaos run --workload bank`: accounts */
#define IOD_CHAOS_BANK_BALANCE 100 /* each account's opening balance */
#define IOD_CHAOS_APPEND_KEYS 4    /* `--workload append`: lists */

struct iod_chaos_bank_result {
	bool ok;
	bool no_read;          /* no successful read at all */
	uint32_t reads;        /* ok reads checked */
	uint32_t bad_reads;    /* reads with a wrong total, shape or a negative balance */
	uint32_t first_bad;    /* op index of the first bad read, or IOD_CHAOS_NONE */
	int64_t first_total;   /* that read's total */
	uint32_t acknowledged; /* ok transfers */
};

/*
 * Jepsen's bank: every ok read (a list of balances, one per account) must
 * have `accounts` entries, none negative, summing to `total`: a transfer
 * moves money between two accounts atomically, so the total is conserved
 * whatever was acknowledged. Returns 0.
 */
int iod_chaos_check_bank(const struct iod_chaos_history *h, uint32_t accounts, int64_t total,
                         struct iod_chaos_bank_result *r, struct iod_err *e);

enum iod_chaos_append_anomaly {
	IOD_CHAOS_APP_LOST,       /* an acknowledged append missing from the final read */
	IOD_CHAOS_APP_REORDERED,  /* a acked before b was invoked, yet b precedes a */
	IOD_CHAOS_APP_DUPLICATE,  /* a value twice in one list */
	IOD_CHAOS_APP_UNEXPECTED, /* a value no ok or indeterminate append wrote */
	IOD_CHAOS_APP_DIVERGED,   /* a read that is not a prefix of the final read */
	IOD_CHAOS_APP_STALE,      /* a read missing an append acked before it began */
	IOD_CHAOS_APP_KINDS
};
const char *iod_chaos_append_anomaly_name(enum iod_chaos_append_anomaly a);

struct iod_chaos_append_finding {
	enum iod_chaos_append_anomaly kind; /* what */
	uint32_t key;                       /* which list */
	int64_t value;                      /* the value it is about */
	uint32_t op;                        /* the op that shows it (a read, or the append) */
	uint32_t other;                     /* reordered: the other append; lost, stale: the
	                                       final read or the acked append; else NONE */
};

#define IOD_CHAOS_APPEND_FINDINGS 16 /* findings kept (counts are complete) */

struct iod_chaos_append_result {
	bool ok;
	uint32_t acknowledged;               /* ok appends */
	uint32_t reads;                      /* ok reads */
	uint32_t count[IOD_CHAOS_APP_KINDS]; /* anomalies of each kind */
	uint32_t nfound;                     /* entries in found */
	struct iod_chaos_append_finding found[IOD_CHAOS_APPEND_FINDINGS]; /* the first ones */
};

/*
 * Per-key lists, appended to with compare-and-set: the final read of a key
 * is its ok read that completes last; every ok read of the key must be a
 * prefix of it, hold no value twice and none that was never appended; every
 * acknowledged append is in it (not lost), after every append acknowledged
 * before it was invoked (not reordered), and in every read that began after
 * it was acknowledged (not stale). Returns 0 or -ENOMEM.
 */
int iod_chaos_check_append(const struct iod_chaos_history *h, struct iod_chaos_append_result *r,
                           struct iod_err *e);

/* ==== faults: the pure half of `iod chaos <action>` (src/chaos/fault.c) ====
 *
 * User input (actions, shapes, directions, targets, durations, percents)
 * parsed and bounded; a partition shape turned into a grudge (who may not
 * send to whom) from a seed; a fault record (what was done, to which
 * process identity, until when) to and from JSON; the nftables script of a
 * record. No clock, no I/O: the shell (src/chaos/nemesis.c) reads /proc,
 * runs nft, sends signals and keeps the deadline.
 */

#define IOD_CHAOS_ACTIONS(X)                                                        \
	X(PARTITION, "partition", "cut the network between groups")                 \
	X(KILL, "kill", "send a signal (default KILL), optionally restart")         \
	X(PAUSE, "pause", "SIGSTOP a process, SIGCONT at the deadline")             \
	X(LOSS, "loss", "drop a percentage of a process's packets")                 \
	X(MEMBER, "member", "remove a server from Raft, re-add it at the deadline") \
	X(DELAY, "delay", "hold what a process sends for --latency (a TCP relay)")  \
	X(ABORT, "abort", "answer a share of a service's HTTP requests (the mesh)")

enum iod_chaos_action {
#define X(n, s, d) IOD_CHAOS_ACT_##n,
	IOD_CHAOS_ACTIONS(X)
#undef X
	    IOD_CHAOS_ACT_COUNT
};

#define IOD_CHAOS_SHAPES(X)                                                                \
	X(EXPLICIT, "explicit", "--between A,B --and C")                                   \
	X(ONE, "one", "one random server alone")                                           \
	X(MAJORITY, "majority", "a random majority from the minority")                     \
	X(MAJORITIES_RING, "majorities-ring", "each server sees its own majority")         \
	X(MINORITY_THIRD, "minority-third", "a third of the servers (at least one) alone") \
	X(PRIMARIES, "primaries", "the leader alone")

enum iod_chaos_shape {
#define X(n, s, d) IOD_CHAOS_SHAPE_##n,
	IOD_CHAOS_SHAPES(X)
#undef X
	    IOD_CHAOS_SHAPE_COUNT
};

/* Which way a partition cuts, seen from group A (the --between side). */
enum iod_chaos_direction {
	IOD_CHAOS_DIR_BOTH, /* neither side hears the other */
	IOD_CHAOS_DIR_TO,   /* B -> A dropped: A hears nothing */
	IOD_CHAOS_DIR_FROM, /* A -> B dropped: nothing A says arrives */
};

enum iod_chaos_kind { IOD_CHAOS_SERVER, IOD_CHAOS_NODE, IOD_CHAOS_REPLICA };

/* Parsers: 0, or -EINVAL with what was wrong and what is accepted in e.
 * "network_partition" (the seed spelling) is an alias of partition. */
int iod_chaos_action_parse(const char *s, enum iod_chaos_action *a, struct iod_err *e);
const char *iod_chaos_action_name(enum iod_chaos_action a);
int iod_chaos_shape_parse(const char *s, enum iod_chaos_shape *sh, struct iod_err *e);
const char *iod_chaos_shape_name(enum iod_chaos_shape sh);
int iod_chaos_direction_parse(const char *s, enum iod_chaos_direction *d, struct iod_err *e);
const char *iod_chaos_direction_name(enum iod_chaos_direction d);
/* A duration from IOD_CHAOS_DURATION_MIN_MS to IOD_CHAOS_DURATION_MAX_MS
 * ("30s", "1500ms", "2m"); negative, zero, bare or huge values refused. */
int iod_chaos_duration_parse(const char *s, uint64_t *ms, struct iod_err *e);
/* A loss percentage: 1..100 (a decimal integer). */
int iod_chaos_percent_parse(const char *s, uint32_t *pct, struct iod_err *e);
/* A signal by name or number: KILL, SIGTERM, 9 ... (1..31). */
int iod_chaos_signal_parse(const char *s, int *sig, struct iod_err *e);

/* A target: "server-N", "node-N" (N >= 1) or "replica/NAME". */
struct iod_chaos_target {
	enum iod_chaos_kind kind;
	uint32_t index;          /* N of server-N or node-N; 0 for a replica */
	char name[IOD_NAME_MAX]; /* the spelling: server-2, node-1, or the replica's name */
};
int iod_chaos_target_parse(const char *s, struct iod_chaos_target *t, struct iod_err *e);
/* A comma list of targets; "servers" and "nodes" are not expanded here
 * (the shell knows how many there are). Returns the count or -EINVAL. */
int iod_chaos_target_list_parse(const char *s, struct iod_chaos_target *t, uint32_t max,
                                struct iod_err *e);
/* An underlay link target "link/leafL-spineS" (1-based, as the namespaces
 * <prefix>-lL and <prefix>-sS are named); 0 or -EINVAL with e. Whether the
 * cluster has that link is the shell's question (iod_agent_underlay_link). */
int iod_chaos_link_parse(const char *s, uint32_t *leaf, uint32_t *spine, struct iod_err *e);
/* A list of them, "link/leaf1-spine1,link/leaf2-spine1" (a plan's selector):
 * the count (1..max) with each one's leaf and spine (both NULL: only
 * check), or -EINVAL / -E2BIG with e; a link named twice is refused. */
int iod_chaos_links_parse(const char *sel, uint32_t *leaf, uint32_t *spine, uint32_t max,
                          struct iod_err *e);

/* Who may not send to whom: cut[i][j]: what member i sends to member j is dropped. */
struct iod_chaos_grudge {
	uint32_t n;
	bool cut[IOD_CHAOS_MEMBERS_MAX][IOD_CHAOS_MEMBERS_MAX];
	bool side_a[IOD_CHAOS_MEMBERS_MAX]; /* group A (the isolated side); majorities-ring: none */
};

/*
 * The grudge of a shape over n servers (0..n-1). leader is the index of the
 * current leader (primaries needs it; IOD_CHAOS_NONE: unknown); seed picks
 * the random members. majorities-ring needs n >= 4 (with 3, every server's
 * majority is everyone) and only cuts both ways. EXPLICIT is not a shape
 * here: use iod_chaos_groups_grudge. Returns 0 or -EINVAL with e.
 */
int iod_chaos_shape_grudge(enum iod_chaos_shape sh, uint32_t n, uint32_t leader, uint64_t seed,
                           enum iod_chaos_direction d, struct iod_chaos_grudge *g,
                           struct iod_err *e);
/* Two disjoint groups over members 0..n-1 (a[i]: i is in A; b[i]: in B). */
int iod_chaos_groups_grudge(uint32_t n, const bool *a, const bool *b, enum iod_chaos_direction d,
                            struct iod_chaos_grudge *g, struct iod_err *e);

/* One process a fault touches, with its identity at the time of the fault. */
struct iod_chaos_member {
	char name[IOD_NAME_MAX];  /* server-1, node-2, or a replica's name */
	enum iod_chaos_kind kind; /* what it is */
	int32_t pid;              /* the process; 0: none (not running) */
	uint64_t start_ticks;     /* /proc/PID/stat starttime: pid reuse is not it */
	uint16_t ports[2];        /* ports others reach it on (server: raft, API) */
	uint32_t nports;          /* entries in ports */
	/* ports[i] as its command line names it, "HOST:PORT": 127.0.0.1 on
	 * loopback, the API on 10.254.0.1 on `iod up --netns` */
	char addrs[2][IOD_ADDR_MAX];
	char cgroup[IOD_PATH_MAX];      /* its chaos cgroup as nft names it ("" none) */
	uint32_t cgroup_level;          /* that cgroup's depth under the cgroup2 root */
	char cgroup_dir[IOD_PATH_MAX];  /* the same cgroup's directory */
	char cgroup_home[IOD_PATH_MAX]; /* the cgroup2 directory to move it back to */
	/* its TCP sockets open before the fault (made before it was moved into
	 * the chaos cgroup, so cut by their port pair instead) */
	uint16_t socks[IOD_CHAOS_SOCKS_MAX][2]; /* local port, remote port */
	uint32_t nsocks;                        /* entries in socks */
	/* kill --restart-after: how to start it again */
	char argv[IOD_CHAOS_CMDLINE_MAX]; /* its /proc cmdline, NUL separated */
	uint32_t argv_len;                /* bytes of argv */
	char pidfile[IOD_PATH_MAX];       /* the pid file to rewrite ("" none) */
	char log[IOD_PATH_MAX];           /* where its output goes ("" /dev/null) */
};

/* A fault: applied by `iod chaos`, healed by the keeper at deadline_ms. */
struct iod_chaos_fault {
	char id[IOD_CHAOS_ID_MAX];      /* c<hex>: the nft table is iod_chaos_<id> */
	enum iod_chaos_action action;   /* what */
	enum iod_chaos_shape shape;     /* partition: how the groups were drawn */
	enum iod_chaos_direction dir;   /* partition: which way */
	uint64_t start_ms, deadline_ms; /* unix ms: applied, to be healed */
	uint32_t percent;               /* loss */
	int signal;                     /* kill */
	bool restart;                   /* kill: start it again at the deadline */
	uint32_t n;                     /* members */
	struct iod_chaos_member m[IOD_CHAOS_MEMBERS_MAX];
	struct iod_chaos_grudge g;     /* partition */
	char desc[IOD_CHAOS_DESC_MAX]; /* one line for humans */
	/* member: the Raft member removed (m[0] is its process), re-added at the
	 * deadline through the API of apis */
	uint64_t member_id;             /* its Raft id */
	char member_raft[IOD_ADDR_MAX]; /* its Raft address */
	char member_api[IOD_ADDR_MAX];  /* its API address */
	char apis[IOD_CHAOS_APIS_MAX];  /* the cluster's API addresses */
	/* delay: what the targets (g.side_a) send to the others' ports goes
	 * through a relay process that holds it for latency_ms */
	uint32_t latency_ms;
	uint16_t relay_port;  /* where the table redirects to */
	int32_t relay_pid;    /* the relay; 0: none */
	uint64_t relay_ticks; /* its start time (/proc/PID/stat) */
	/* partition, loss of an underlay link (`link/leafL-spineS` of `iod up
	 * --netns`): no members; the table is in the leaf's namespace on its
	 * interface to the spine */
	char link[IOD_CHAOS_LINK_MAX];    /* "leaf1-spine2"; "" = not a link fault */
	char link_ns[IOD_CHAOS_LINK_MAX]; /* the leaf's namespace: iodu<hash>-l1 */
	char link_dev[16];                /* its interface to the spine: s2 */
};

/* The record as JSON (a new reference) and back; from_json checks every
 * field and bound (-EINVAL with e). */
json_t *iod_chaos_fault_to_json(const struct iod_chaos_fault *f);
int iod_chaos_fault_from_json(const json_t *j, struct iod_chaos_fault *f, struct iod_err *e);
/* Fills f->desc from the members and grudge. */
void iod_chaos_fault_describe(struct iod_chaos_fault *f);
/* "iod_chaos_<id>": the one nftables table of a partition or loss fault. */
void iod_chaos_table_name(const struct iod_chaos_fault *f, char *buf, size_t len);
/* The `nft -f` script that creates the fault's table (partition, loss).
 * Returns 0, -ENOMEM, or -EINVAL when the action has no table. */
int iod_chaos_nft_script(const struct iod_chaos_fault *f, struct iod_buf *out, struct iod_err *e);

/* Percentile p (0..100) of v[0..n) by nearest rank; sorts v. 0 when n == 0. */
uint64_t iod_chaos_percentile(uint64_t *v, uint32_t n, uint32_t p);

/* ==== the shell (src/chaos/nemesis.c): processes, nft, signals, keeper ==== */

/* An `iod up` cluster as its state dir shows it (pid files, command lines). */
struct iod_chaos_cluster {
	char dir[IOD_PATH_MAX];       /* the state dir */
	char chaos_dir[IOD_PATH_MAX]; /* dir/chaos: fault records, keeper lock and log */
	uint32_t nservers, nnodes;    /* server-N / node-N pid files found */
	struct iod_chaos_member servers[IOD_CHAOS_MEMBERS_MAX]; /* pid 0: not running */
	struct iod_chaos_member nodes[IOD_CHAOS_MEMBERS_MAX];   /* pid 0: not running */
	char apis[IOD_CHAOS_APIS_MAX]; /* the servers' API addresses as they listen, "H:P,..." */
};

uint64_t iod_chaos_now_ms(void); /* wall clock: records outlive processes */
uint64_t iod_chaos_start_ticks(int pid);
bool iod_chaos_member_alive(const struct iod_chaos_member *m); /* same pid, same start */
char iod_chaos_proc_state(int pid);                            /* 'T' when stopped; 0 when gone */
int iod_chaos_cluster_load(const char *dir, struct iod_chaos_cluster *c, struct iod_err *e);
int iod_chaos_replica_find(const struct iod_chaos_cluster *c, const char *name,
                           struct iod_chaos_member *m, struct iod_err *e);
/* The running replicas of a service (from the agents' status), into names;
 * their count (at most max). */
uint32_t iod_chaos_service_replicas(const struct iod_chaos_cluster *c, const char *service,
                                    char names[][IOD_NAME_MAX], uint32_t max);
/* Underlay link leaf-spine of c's `iod up --netns` fabric (its namespaces
 * counted from /run/netns) into f's link, link_ns, link_dev; -ENOENT when
 * the cluster has no underlay, -EINVAL when the fabric lacks the link, with
 * e. */
int iod_chaos_link_resolve(const struct iod_chaos_cluster *c, uint32_t leaf, uint32_t spine,
                           struct iod_chaos_fault *f, struct iod_err *e);
/* Record the fault, make sure a keeper runs, then apply it; on failure
 * nothing stays applied. */
int iod_chaos_fault_apply(struct iod_chaos_cluster *c, struct iod_chaos_fault *f,
                          struct iod_err *e);
/* Undo f (idempotent, identity-checked) and remove its record. Hold
 * iod_chaos_heal_lock around it. */
int iod_chaos_fault_heal(const char *chaos_dir, const struct iod_chaos_fault *f, struct iod_err *e);
int iod_chaos_heal_lock(const char *chaos_dir); /* an fd to close, or -errno */
int iod_chaos_respawn(const struct iod_chaos_member *m, struct iod_err *e);
bool iod_chaos_table_exists(const struct iod_chaos_fault *f);
/* member: fill f's member_* and apis for server m (from GET /v1/members);
 * -ENOENT when it is not a member now, -ENOTCONN when no server answers. */
int iod_chaos_member_lookup(const struct iod_chaos_cluster *c, const struct iod_chaos_member *m,
                            struct iod_chaos_fault *f, struct iod_err *e);
/* The delay relay's loop (src/chaos/relay.c): listens on 127.0.0.1:0, writes
 * its port to port_file, exits at until_unix_ms. */
int iod_chaos_relay_run(const char *port_file, uint32_t latency_ms, uint64_t until_unix_ms);
/* The cluster's Raft members now (-1: no server answered). */
int iod_chaos_member_count(const char *apis);
/* DELETE /v1/members/ID of f's member; POST it back (409 counts as back). */
int iod_chaos_member_remove(const struct iod_chaos_fault *f, struct iod_err *e);
int iod_chaos_member_readd(const struct iod_chaos_fault *f, struct iod_err *e);
/* f's member is a voter in the leader's configuration now. */
bool iod_chaos_member_voter(const struct iod_chaos_fault *f);
int iod_chaos_record_save(const char *chaos_dir, const struct iod_chaos_fault *f,
                          struct iod_err *e);
/* Every valid record (at most IOD_CHAOS_FAULTS_MAX; free *out). */
int iod_chaos_records_load(const char *chaos_dir, struct iod_chaos_fault **out, uint32_t *n,
                           struct iod_err *e);
bool iod_chaos_keeper_running(const char *chaos_dir);
int iod_chaos_keeper_pid(const char *chaos_dir);
int iod_chaos_keeper_ensure(const char *chaos_dir, struct iod_err *e);
/* The keeper's loop: heal what is due every 20 ms; exit after idle_exit_ms
 * without records. */
int iod_chaos_keeper_run(const char *chaos_dir, uint32_t idle_exit_ms);

/* ==== L7 faults in the mesh (src/chaos/mesh.c): Fault objects on a lease ==== */

struct iod_api_client;

/* delay or abort of a share of one HTTP service's requests. */
struct iod_chaos_l7 {
	char service[IOD_NAME_MAX];  /* the service */
	bool abort;                  /* abort (answer status); else delay */
	uint32_t percent;            /* of its requests, 1..100 */
	uint32_t delay_ms;           /* delay: how long each is held */
	uint32_t status;             /* abort: the HTTP status answered */
	uint64_t duration_ms;        /* the fault's (and its lease's) length */
	char id[IOD_CHAOS_ID_MAX];   /* out: the Fault object's name */
	uint64_t start_ms, until_ms; /* out: unix ms, applied and healed by the proxies */
};
/* "delay 400ms of 50% of service/web's requests" */
void iod_chaos_l7_describe(const struct iod_chaos_l7 *f, char *buf, size_t len);
/* Check the service (it exists, the mesh carries it as HTTP), grant a lease
 * of duration_ms and write the Fault on it. 0; -EINVAL bad input (no such
 * service, an L4 one, a bad field), -ENOTCONN no server answered, -EPERM
 * not admin, -EIO other answers; e says which. */
int iod_chaos_l7_apply(const char *apis, struct iod_chaos_l7 *f, struct iod_err *e);
/* DELETE /v1/faults/ID: 1 deleted, 0 not there, or a negative errno. */
int iod_chaos_l7_delete(struct iod_api_client *c, const char *id, struct iod_err *e);
/* The HTTP services of the mesh (those L7 faults can hit) into names: their
 * count (at most max), or a negative errno. */
int iod_chaos_l7_services(const char *apis, char names[][IOD_NAME_MAX], uint32_t max,
                          struct iod_err *e);

/* ==== `iod chaos run` (src/chaos/run.c): workload, nemesis, history ==== */

enum iod_chaos_workload {
	IOD_CHAOS_WL_REGISTER,
	IOD_CHAOS_WL_SET,
	IOD_CHAOS_WL_BANK,
	IOD_CHAOS_WL_APPEND,
};
const char *iod_chaos_workload_name(enum iod_chaos_workload w);
/* Nemesis kinds, combinable: partition+kill alternates them. */
#define IOD_CHAOS_NEM_PARTITION 1u
#define IOD_CHAOS_NEM_KILL 2u
#define IOD_CHAOS_NEM_PAUSE 4u
#define IOD_CHAOS_NEM_MEMBER 8u

/* "register" | "set" | "bank" | "append"; "none", "partition", "kill", "pause" and
 * '+'-joined combinations. 0 or -EINVAL with e. */
int iod_chaos_workload_parse(const char *s, enum iod_chaos_workload *w, struct iod_err *e);
int iod_chaos_nemesis_parse(const char *s, uint32_t *mask, struct iod_err *e);

struct iod_chaos_run_cfg {
	enum iod_chaos_workload workload; /* what clients do */
	uint32_t clients;                 /* client threads, 1..IOD_CHAOS_CLIENTS_MAX */
	uint32_t rate;                    /* ops/s over all clients; 0: as fast as answered */
	uint64_t duration_ms;             /* the whole run */
	uint32_t nemesis;                 /* IOD_CHAOS_NEM_* mask; 0: no faults */
	uint64_t fault_ms;                /* each fault's length (and the quiet after it) */
	uint64_t warmup_ms;               /* before the first fault */
	uint64_t seed;                    /* nemesis choices, client ops */
	uint32_t op_timeout_ms;           /* per operation: after it, fail or indeterminate */
	uint64_t final_read_ms;           /* set, bank, append: how long the final read may retry */
	bool keep;                        /* leave the run's objects in the state */
	const struct iod_chaos_plan *plan; /* faults from a plan instead of nemesis; NULL: none */
};

struct iod_chaos_run_fault {
	char id[IOD_CHAOS_ID_MAX];     /* its record id */
	char desc[IOD_CHAOS_DESC_MAX]; /* what it was */
	enum iod_chaos_action action;  /* its kind */
	uint64_t start_ms, heal_ms;    /* since the run began */
	uint64_t start_ns, heal_ns;    /* monotonic apply and heal times */
	uint64_t recovery_ms;          /* heal -> first acknowledged write; UINT64_MAX: none */
	/* the longest time without an acknowledged write from the fault's start
	 * until its recovery: what a user waits, the figure to hold against a
	 * "recovery < 100 ms" claim */
	uint64_t outage_ms;
};

struct iod_chaos_run_report {
	uint32_t attempted, ok, failed, info; /* operations and their outcomes */
	uint32_t acked_writes;                /* ok writes or adds */
	uint32_t nfaults;                     /* entries in faults */
	struct iod_chaos_run_fault faults[IOD_CHAOS_RUN_FAULTS_MAX];
	char key[IOD_NAME_MAX]; /* the config name (prefix) the run used */
	uint32_t deleted;       /* the run's objects deleted after it (not with keep) */
	struct iod_buf history; /* JSON lines (include/iod/chaos.h format) */
};

int iod_chaos_run(struct iod_chaos_cluster *c, const struct iod_chaos_run_cfg *cfg,
                  struct iod_chaos_run_report *rep, struct iod_err *e);
/* The leader's index in c->servers, or IOD_CHAOS_NONE. */
uint32_t iod_chaos_leader(struct iod_chaos_cluster *c);
/* A fresh fault id ("c" + 12 hex digits). */
void iod_chaos_fault_id(char *buf, size_t len, uint64_t seed);

/* ==== plans (src/chaos/plan.c, pure): Chaos-Mesh-like YAML ==== */

/* Chaos Mesh's modes: how many of the selected processes a step hits. */
enum iod_chaos_mode {
	IOD_CHAOS_MODE_ONE,                /* one at random */
	IOD_CHAOS_MODE_ALL,                /* every one */
	IOD_CHAOS_MODE_FIXED,              /* value of them */
	IOD_CHAOS_MODE_FIXED_PERCENT,      /* value percent, rounded up */
	IOD_CHAOS_MODE_RANDOM_MAX_PERCENT, /* 1 .. value percent, drawn */
};
const char *iod_chaos_mode_name(enum iod_chaos_mode m);

/* One fault of a plan. */
struct iod_chaos_step {
	enum iod_chaos_action action; /* partition, kill, pause, loss */
	enum iod_chaos_mode mode;     /* how many of the selected */
	uint32_t value;               /* fixed: a count; percent modes: a percentage */
	char selector[256];           /* servers | nodes | leader | server-1,node-2 |
	                       services | service/web,service/api (delay, abort) |
	                       link/leaf1-spine1,... (partition, loss) */
	enum iod_chaos_direction dir; /* partition: the chosen side is A */
	uint64_t duration_ms;         /* how long (kill: until the restart) */
	uint32_t percent;             /* loss; delay, abort of services: share of requests */
	uint32_t latency_ms;          /* delay: how long (servers, nodes: a relay; services:
	                                 each request, in the mesh) */
	uint32_t status;              /* abort: the HTTP status answered (default 503) */
	uint32_t line, col;           /* where the step is in its file (shell's errors) */
	uint32_t sel_line, sel_col;   /* ... and its selector (0: the default, servers) */
};

struct iod_chaos_plan {
	enum iod_chaos_workload workload; /* default register */
	uint32_t clients, rate;           /* defaults 4 clients, 100 ops/s */
	uint64_t duration_ms;             /* the whole run (required) */
	uint64_t interval_ms;             /* quiet time after each fault (default 3s) */
	uint64_t seed;                    /* when has_seed */
	bool has_seed;                    /* seed given in the file (--seed overrides) */
	bool random;                      /* schedule: random (drawn from the seed) or sequence */
	uint32_t nsteps;                  /* entries in steps */
	struct iod_chaos_step steps[IOD_CHAOS_PLAN_STEPS_MAX];
};

/*
 * Parse a plan (YAML through src/base/yaml.c):
 *   workload: register | set        clients: N    rate: R    seed: S
 *   duration: 60s                   interval: 3s  schedule: sequence | random
 *   faults:
 *     - {action: partition, mode: one, selector: servers, direction: both, duration: 5s}
 *     - {action: loss, mode: fixed, value: 1, selector: servers, percent: 30, duration: 4s}
 * Errors name name:line:col. Returns 0 or -EINVAL with e.
 */
int iod_chaos_plan_parse(const char *text, size_t len, const char *name, struct iod_chaos_plan *p,
                         struct iod_err *e);
/* The step hits services' HTTP requests in the mesh (selector services or
 * service/NAME,...). */
bool iod_chaos_step_l7(const struct iod_chaos_step *s);
/* The step cuts or makes lossy underlay links (selector link/leafL-spineS,...). */
bool iod_chaos_step_link(const struct iod_chaos_step *s);
/* The names of a "service/a,service/b" selector into names (NULL: only
 * check); "services" gives 0 (every HTTP service, the shell lists them).
 * The count, or -EINVAL / -E2BIG with e. */
int iod_chaos_services_parse(const char *sel, char names[][IOD_NAME_MAX], uint32_t max,
                             struct iod_err *e);
/* How many of n a mode hits (draw: a random number for random-max-percent). */
uint32_t iod_chaos_mode_count(enum iod_chaos_mode m, uint32_t value, uint32_t n, uint64_t draw);
/* Which of n candidates step s hits, from seed: pick[i]; returns the count. */
uint32_t iod_chaos_plan_pick(const struct iod_chaos_step *s, uint32_t n, uint64_t seed, bool *pick);

#endif
