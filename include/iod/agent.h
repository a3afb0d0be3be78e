/*
 * agent.h: the node agent: what runs each replica placed on this node, keeps
 * it running and says how it is doing.
 *
 * Three parts, in the house shape (pure core, thin shells):
 *   - the reconciler (pure): desired replicas against the processes that
 *     run, fed observations (started, exited, probe passed/failed) and the
 *     time, answers actions (start, stop, kill, probe, report). It never
 *     forks, reads the clock or touches a file.
 *   - the executor (shell): a replica is a child process in its own sandbox
 *     (PID, mount, UTS and IPC namespaces where permitted, a network
 *     namespace with a veth pair when root and configured, cgroup limits,
 *     CPU affinity, NUMA memory policy, GPU visibility, identity and peers
 *     in the environment, rotating log files, a data directory for stateful
 *     replicas); health probes (exec, TCP connect, HTTP GET) on a bounded
 *     thread pool.
 *   - the agent loop (shell): feeds the reconciler from a desired-state
 *     source, runs its actions, publishes phases as revisioned events.
 *
 * Nothing here talks to the control plane directly: a source of desired
 * replicas and a sink of reports are the seams (docs/runtime.md).
 */
#ifndef IOD_AGENT_H
#define IOD_AGENT_H

#include "iod/base.h"
#include "iod/spec.h"

#include <sys/types.h>

/* ---- phases ------------------------------------------------------------ */

/*
 * A replica's life: pending -> starting -> running -> healthy | unhealthy
 * -> stopping -> exited | failed. "running" means the process is up and its
 * health is not known yet (or it has no check); failed replicas that the
 * restart policy restarts go back to pending after their backoff.
 */
#define IOD_AGENT_PHASES(X)       \
	X(PENDING, "pending")     \
	X(STARTING, "starting")   \
	X(RUNNING, "running")     \
	X(HEALTHY, "healthy")     \
	X(UNHEALTHY, "unhealthy") \
	X(STOPPING, "stopping")   \
	X(EXITED, "exited")       \
	X(FAILED, "failed")

enum iod_agent_phase {
#define X(n, s) IOD_AGENT_##n,
	IOD_AGENT_PHASES(X)
#undef X
	    IOD_AGENT_PHASE_COUNT
};
const char *iod_agent_phase_name(enum iod_agent_phase p);
int iod_agent_phase_parse(const char *s, enum iod_agent_phase *out);

/* ---- one replica as this node must run it ------------------------------ */

/* A health check with its own storage (the spec's strings are borrowed). */
struct iod_agent_health {
	enum iod_health_kind kind;       /* NONE = no check */
	char command[IOD_AGENT_CMD_MAX]; /* exec: run with /bin/sh -c */
	uint16_t port;                   /* tcp/http: 0 = the replica's port */
	char path[IOD_AGENT_PATH_MAX];   /* http: request path, "/" default */
	uint64_t interval_ns;            /* between checks */
	uint64_t timeout_ns;             /* one check */
	uint32_t healthy_threshold;      /* passes in a row to be healthy */
	uint32_t unhealthy_threshold;    /* failures in a row to be unhealthy */
};

/*
 * The sandbox a replica asks for (the spec's sandbox: block; docs/security.md
 * says what each part guarantees). Everything not asked for is the default:
 * a uid of its own, no capabilities, no_new_privs, the default seccomp
 * allowlist, its own root, PID, mount, UTS, IPC and cgroup namespaces.
 */
struct iod_agent_sandbox {
	enum iod_spec_user user;       /* dynamic | id | root */
	uint32_t uid, gid;             /* ID: as written; DYNAMIC: set by the agent at start */
	uint64_t caps;                 /* capabilities kept (bit = CAP number) */
	enum iod_spec_seccomp seccomp; /* default | profile | unconfined */
	uint32_t seccomp_id;           /* PROFILE: its filter in the agent's store */
	enum iod_spec_netmode network; /* auto | node | private | none */
	bool best_effort;              /* run without a hardening this node lacks */
};

/*
 * What the node must run for one replica: identity, program, placement,
 * limits, health. Fixed-size so that the agent allocates its table once.
 */
struct iod_agent_replica {
	char name[IOD_NAME_MAX];                 /* "<service>-<ordinal>", stable */
	char service[IOD_NAME_MAX];              /* its service */
	uint32_t ordinal;                        /* 0-based index in the service */
	uint64_t generation;                     /* a change recreates the process */
	bool stateful;                           /* keeps a data directory across restarts */
	enum iod_restart restart;                /* always | on-failure | never */
	char argv_buf[IOD_AGENT_ARGV_BYTES_MAX]; /* argc NUL-terminated strings: program, args */
	uint32_t argc;                           /* strings in argv_buf; 0 = nothing to run */
	char env_buf[IOD_AGENT_ENV_BYTES_MAX];   /* envc "NAME=value" NUL-terminated strings */
	uint32_t envc;                           /* strings in env_buf */
	struct iod_bitmap cpus;                  /* placed CPU set; empty = any */
	struct iod_bitmap gpus;                  /* placed GPU indexes; empty = none */
	int32_t numa_node;                       /* bind memory here; -1 = no policy */
	uint32_t cpu_millis;                     /* CPU limit in 1/1000 core; 0 = none */
	uint64_t mem_bytes;                      /* memory limit; 0 = none */
	uint16_t port;                           /* the replica's port on this node; 0 = none */
	struct iod_agent_health health;          /* readiness + liveness check */
	struct iod_agent_sandbox sandbox;        /* how it is confined */
	char fail[IOD_AGENT_REASON_MAX];         /* why it cannot be built ("" = it can):
	                                            marked failed, never started */
};

/* Append one argument / one NAME=value; -E2BIG when the buffer is full. */
int iod_agent_replica_add_arg(struct iod_agent_replica *r, const char *arg);
int iod_agent_replica_add_env(struct iod_agent_replica *r, const char *name, const char *value);
/* The i-th string of a buffer of NUL-terminated strings (NULL past the end). */
const char *iod_agent_strv_at(const char *buf, size_t buf_len, uint32_t n, uint32_t i);

/*
 * Desired replicas as JSON (the node's manifest, or the control plane's
 * Replica objects): {"replicas":[{"name","service","ordinal","generation",
 * "type":"stateful|stateless","restart","command":[...],"env":{...},
 * "cpus":"0-3","gpus":"0,1","numa":0,"cpu_millis","mem_bytes","port",
 * "health":{"kind":"tcp|http|exec","port","path","command","interval_ms",
 * "timeout_ms","healthy_threshold","unhealthy_threshold"}}]}.
 * Fills up to max replicas; -E2BIG past max, -EINVAL with the object and
 * field named in e. In a manifest, a replica that has a name but is
 * otherwise invalid comes back with its reason in `fail` (it fails alone);
 * only one without a usable name, or a name used twice, rejects the file.
 */
int iod_agent_replica_from_json(const json_t *obj, struct iod_agent_replica *r, struct iod_err *e);
int iod_agent_manifest_parse(const char *text, size_t len, struct iod_agent_replica *out,
                             uint32_t max, uint32_t *n, struct iod_err *e);
json_t *iod_agent_replica_to_json(const struct iod_agent_replica *r);

/* ---- from cluster state (pure) ------------------------------------------ */

/* The port a replica listens on ($IOD_PORT), derived from its name. */
uint16_t iod_agent_replica_port(const char *name);

/*
 * The replicas placed on node, from the control plane's lists (each
 * {"rev","items":[{"name","value":{...}}]}): program and limits from the
 * Service spec, placement (gpus, cpus, numa) from the Replica, identity and
 * the addresses of peers (IOD_PEERS) and dependencies (IOD_DEP_<SERVICE>) in
 * the environment. Each Service is re-validated by the spec loader first.
 * A replica that cannot be built is returned with its reason in `fail`
 * (and nothing to run); the others are unaffected. Replicas of a deleted
 * service are skipped. Past max: the first max are filled and -E2BIG says
 * how many more there were.
 */
struct iod_agent_profile_sink {
	/* compile profile (canonical JSON) for caps; 0 with *id, or why */
	int (*add)(void *ctx, const char *profile, uint64_t caps, uint32_t *id, char *why,
	           size_t why_len);
	void *ctx;
};
/* profiles: where services' own seccomp profiles go (NULL: such a replica
 * fails with the reason). */
int iod_agent_desired_from_state(const char *node, const json_t *nodes, const json_t *services,
                                 const json_t *replicas,
                                 const struct iod_agent_profile_sink *profiles,
                                 struct iod_agent_replica *out, uint32_t max, uint32_t *n,
                                 struct iod_err *e);

/*
 * Rescheduling a lost node's replicas (pure). A replica whose node is not in
 * nodes (its lease expired) is orphaned: a stateless one moves at once, a
 * stateful one once it has been lost for stateful_grace_ms (its "lost_ms" is
 * recorded first). Targets come from the topology-aware scheduler (sched/)
 * with a deploy's rules: live nodes' shapes from their models, every replica
 * on a live node adopted, each service's request from its stored spec; the
 * move gets the scheduler's node, GPUs, CPUs, NUMA node, NIC and
 * explanation. Returns a JSON array of writes [{"name","prev_rev","value"}]
 * (compare-and-swap puts of Replica objects) and, in *unplaced,
 * [{"replica","reason","why"}] (the scheduler's reason name and message)
 * for what fits nowhere; such a replica is also written once as pending
 * with that reason.
 */
json_t *iod_agent_resched_plan(const json_t *nodes, const json_t *replicas, const json_t *services,
                               uint64_t now_ms, uint64_t stateful_grace_ms, json_t **unplaced);

/* ---- replica addresses on the node's subnet (pure) --------------------- */

/*
 * The address allocator for per-replica network namespaces. The node's
 * subnet (an IPv4 CIDR, /16 to /29) gives its first host address to the
 * gateway (the node's bridge) and the rest to replicas, lowest free first,
 * so the same sequence of allocations always gives the same addresses. An
 * address belongs to a replica name until released: a replica that restarts
 * keeps its address. Pure: no I/O.
 */
struct iod_agent_ipam {
	uint32_t net;                                 /* network address, host order */
	uint32_t prefix;                              /* prefix length */
	uint32_t hosts;                               /* replica addresses (<= IPAM_MAX) */
	char owner[IOD_AGENT_IPAM_MAX][IOD_NAME_MAX]; /* host index -> replica; "" = free */
};
/* -EINVAL (with what is wrong) for a malformed CIDR or a prefix outside /16../29. */
int iod_agent_ipam_init(struct iod_agent_ipam *m, const char *cidr, struct iod_err *e);
/* The gateway (bridge) address, host order. */
uint32_t iod_agent_ipam_gateway(const struct iod_agent_ipam *m);
/* The address of name (its own if it has one, else the lowest free one) and
 * its host index; -ENOSPC when the subnet is exhausted (e says which). */
int iod_agent_ipam_alloc(struct iod_agent_ipam *m, const char *name, uint32_t *addr,
                         uint32_t *index, struct iod_err *e);
/* Give name's address back; -ENOENT when it has none. */
int iod_agent_ipam_release(struct iod_agent_ipam *m, const char *name);
/* name's address without allocating; -ENOENT when it has none. */
int iod_agent_ipam_find(const struct iod_agent_ipam *m, const char *name, uint32_t *addr,
                        uint32_t *index);
/* Addresses in use. */
uint32_t iod_agent_ipam_used(const struct iod_agent_ipam *m);
/* Dotted quad of a host-order address. */
void iod_agent_ipv4_format(uint32_t addr, char *buf, size_t len);
/*
 * Rewrite r's IOD_ADDR, IOD_PEERS and IOD_DEP_* entries: a "node_addr:port"
 * that is the port of a replica holding an address in m (this node's
 * replicas, iod_agent_replica_port) becomes "<its address>:port", so a
 * replica reaches its node's peers in their network namespaces even before
 * their addresses reach the control plane. Others stay as they are.
 * -E2BIG (r unchanged) when the result would not fit.
 */
int iod_agent_env_localize(struct iod_agent_replica *r, const char *node_addr,
                           const struct iod_agent_ipam *m);

/* ---- the reconciler (pure) --------------------------------------------- */

struct iod_agent_rec_config {
	uint64_t backoff_base_ns;   /* first restart delay after a failure */
	uint64_t backoff_max_ns;    /* cap of the doubling delay */
	uint64_t backoff_reset_ns;  /* a run this long resets the delay to base */
	uint64_t stop_grace_ns;     /* SIGTERM to SIGKILL */
	uint32_t liveness_failures; /* failures in a row past "unhealthy" that restart */
	uint64_t startup_grace_ns;  /* before a first passed check, failures only wait */
};
void iod_agent_rec_config_default(struct iod_agent_rec_config *c);

#define IOD_AGENT_ACTIONS(X) \
	X(START, "start")    \
	X(STOP, "stop")      \
	X(KILL, "kill")      \
	X(PROBE, "probe")    \
	X(REPORT, "report")

enum iod_agent_action_kind {
#define X(n, s) IOD_AGENT_ACT_##n,
	IOD_AGENT_ACTIONS(X)
#undef X
};
const char *iod_agent_action_name(enum iod_agent_action_kind k);

/*
 * One thing for the shell to do. START: run slot's `want` (stateful or not);
 * STOP: SIGTERM; KILL: SIGKILL; PROBE: run the health check and call
 * iod_agent_rec_on_probe; REPORT: publish phase/reason/ready (removed: the
 * replica is gone from this node, drop its status).
 */
struct iod_agent_action {
	enum iod_agent_action_kind kind;   /* what */
	uint32_t slot;                     /* iod_agent_rec_slot() index */
	char name[IOD_NAME_MAX];           /* replica name */
	enum iod_agent_phase phase;        /* REPORT: the phase now */
	bool ready;                        /* REPORT: endpoint should receive traffic */
	bool removed;                      /* REPORT: replica no longer on this node */
	uint32_t restarts;                 /* REPORT: restarts so far */
	char reason[IOD_AGENT_REASON_MAX]; /* REPORT: why this phase */
};

/* The reconciler's record of one replica (read-only for shells). */
struct iod_agent_slot {
	bool used;                         /* slot holds a replica */
	bool desired;                      /* still placed on this node */
	struct iod_agent_replica want;     /* what runs (or will run next) */
	bool recreate;                     /* want changed: stop, then start anew */
	enum iod_agent_phase phase;        /* where it is */
	char reason[IOD_AGENT_REASON_MAX]; /* why */
	bool alive;                        /* a process exists for it */
	bool ready;                        /* endpoint should receive traffic */
	bool dirty;                        /* phase/ready changed since the last REPORT */
	bool restart_after_stop;           /* a liveness/recreate stop: start again */
	bool term_sent;                    /* SIGTERM already asked for */
	bool kill_sent;                    /* SIGKILL already asked for */
	bool ever_started;                 /* a process ran for it at least once */
	uint32_t restarts;                 /* starts after the first */
	uint64_t backoff_ns;               /* next restart delay */
	uint64_t start_at_ns;              /* pending: start no earlier than this */
	uint64_t started_ns;               /* when the process last started */
	uint64_t stop_deadline_ns;         /* stopping: SIGKILL after this */
	uint64_t probe_at_ns;              /* next health check */
	bool probe_in_flight;              /* PROBE issued, no result yet */
	uint32_t ok_streak;                /* consecutive passed checks */
	uint32_t fail_streak;              /* consecutive failed checks */
	bool passed_once;                  /* a check passed since the process started */
	uint64_t phase_since_ns;           /* when phase was entered */
};

struct iod_agent_rec;

int iod_agent_rec_new(const struct iod_agent_rec_config *c, uint32_t capacity,
                      struct iod_agent_rec **out);
void iod_agent_rec_free(struct iod_agent_rec *r);

/*
 * Replace the desired set (n replicas, unique names). New ones become
 * pending; a changed generation recreates; missing ones are stopped and then
 * forgotten. A replica with `fail` set is marked failed with that reason and
 * never started (a running one is stopped first). New replicas beyond the
 * free slots (old ones still stopping) are left out: -ENOSPC, everything
 * else applied; call again once slots free. -EINVAL (nothing changed) on a
 * duplicate name.
 */
int iod_agent_rec_set_desired(struct iod_agent_rec *r, const struct iod_agent_replica *want,
                              uint32_t n, uint64_t now_ns, struct iod_err *e);

/* Observations from the shell. -ENOENT for an unknown replica. */
int iod_agent_rec_on_started(struct iod_agent_rec *r, const char *name, uint64_t now_ns);
int iod_agent_rec_on_start_failed(struct iod_agent_rec *r, const char *name, const char *why,
                                  uint64_t now_ns);
/* exit_code >= 0 for a normal exit, or signal > 0 when killed by one. */
int iod_agent_rec_on_exited(struct iod_agent_rec *r, const char *name, int exit_code, int signal,
                            uint64_t now_ns);
int iod_agent_rec_on_probe(struct iod_agent_rec *r, const char *name, bool ok, const char *detail,
                           uint64_t now_ns);

/*
 * Decide: fill up to max actions (slot order, deterministic), set *n and
 * *next_ns (the earliest time step must run again; UINT64_MAX = only on a
 * new observation). When more than max actions are due, the rest come on
 * the next call and *next_ns = now_ns.
 */
void iod_agent_rec_step(struct iod_agent_rec *r, uint64_t now_ns, struct iod_agent_action *acts,
                        uint32_t max, uint32_t *n, uint64_t *next_ns);

uint32_t iod_agent_rec_capacity(const struct iod_agent_rec *r);
const struct iod_agent_slot *iod_agent_rec_slot(const struct iod_agent_rec *r, uint32_t i);
/* The slot index of a replica, or -ENOENT. */
int iod_agent_rec_find(const struct iod_agent_rec *r, const char *name);

/* ---- the executor (shell) ---------------------------------------------- */

/* What the sandbox could set up on this machine (probed once). */
struct iod_agent_caps {
	bool ns_pid, ns_mount, ns_uts, ns_ipc, ns_net; /* namespaces we may create */
	bool ns_cgroup;                                /* cgroup namespaces */
	bool ns_user;                        /* user namespaces (the kernel allows them) */
	bool root;                           /* the agent is root: uids, mounts */
	bool seccomp;                        /* seccomp filters (and no_new_privs) */
	bool rootfs;                         /* a root of its own (pivot_root) */
	int cgroup_version;                  /* 2, 1, or 0 = no writable cgroups */
	char cgroup_mem[IOD_AGENT_PATH_MAX]; /* v1 memory hierarchy or v2 root */
	char cgroup_cpu[IOD_AGENT_PATH_MAX]; /* v1 cpu hierarchy or v2 root */
	char warning[IOD_ERR_MSG_MAX];       /* what is missing, for the log */
};
void iod_agent_caps_probe(struct iod_agent_caps *caps);

/* ---- seccomp filters (seccomp.c) ------------------------------------------ */

struct sock_fprog;
/*
 * Compile the default allowlist (widened by the syscalls that granted caps
 * are about) or a parsed OCI/Docker profile into a BPF program whose
 * instructions the caller frees (out->filter).
 */
int iod_agent_seccomp_default(uint64_t caps, struct sock_fprog *out, struct iod_err *e);
int iod_agent_seccomp_profile(const struct iod_seccomp_profile *p, uint64_t caps,
                              struct sock_fprog *out, struct iod_err *e);
/*
 * The agent's filters, each compiled once: entry 0 is the default filter
 * without capabilities (built by _new). add (profile NULL: the default one)
 * returns the entry for (profile, caps), compiling it the first time;
 * -ENOSPC past IOD_AGENT_SECCOMP_PROFILES_MAX. Entries never change once
 * added: get may be called from any thread without a lock.
 */
struct iod_agent_seccomp_store;
int iod_agent_seccomp_store_new(struct iod_agent_seccomp_store **out, struct iod_err *e);
int iod_agent_seccomp_store_add(struct iod_agent_seccomp_store *s, const char *profile, size_t len,
                                uint64_t caps, uint32_t *id, struct iod_err *e);
const struct sock_fprog *iod_agent_seccomp_get(const struct iod_agent_seccomp_store *s,
                                               uint32_t id);
void iod_agent_seccomp_store_free(struct iod_agent_seccomp_store *s);

/*
 * Where a running replica's processes live and what they may do: what a
 * health check needs to run "inside" it (setns into its namespaces, its
 * cgroup, its uid, capabilities and filter). Filled by the executor.
 */
struct iod_agent_jail {
	pid_t init;                          /* the sandbox's init (host pid); 0 = none */
	uint64_t init_start;                 /* its start time (/proc stat), so that a
	                                        reused pid is never entered */
	int ns;                              /* CLONE_NEW* namespaces it was given */
	uint32_t uid, gid;                   /* the workload's ids (host view) */
	uint64_t caps;                       /* capabilities it keeps */
	bool userns;                         /* the workload is in a user namespace of its own */
	const struct sock_fprog *seccomp;    /* its filter; NULL = none */
	char cgroup_mem[IOD_AGENT_PATH_MAX]; /* its cgroups ("" = none) */
	char cgroup_cpu[IOD_AGENT_PATH_MAX];
};

/*
 * In the calling (single-threaded, forked) process: become what j says:
 * supplementary groups dropped, gid and uid set, bounding, effective,
 * permitted, inheritable and ambient capabilities cut to j->caps
 * (libcap-ng), a user namespace mapping only its own uid when j->userns
 * (userns_fd >= 0: join that one, the workload's, instead of creating one),
 * no_new_privs, then the seccomp filter. Never returns to a more
 * privileged state. 0, or a negative errno with what failed in err.
 */
int iod_agent_jail_enter(const struct iod_agent_jail *j, int userns_fd, char *err, size_t len);

/*
 * A replica's own root (rootfs.c), built by its sandbox's init (root, in the
 * replica's new mount and PID namespaces) on the empty directory root, and
 * entered with pivot_root: read-only host /usr, /bin, /lib..., a few /etc
 * files, fresh /proc (masked) and /sys (read-only), a small /dev, a private
 * /tmp, the data directory read-write. err says what failed.
 */
struct iod_agent_rootfs {
	const char *root;              /* an empty directory (host path) */
	const char *data;              /* bound read-write at the same path; NULL = none */
	const char *self_exe;          /* the iod binary, read-only at its path; NULL = none */
	const struct iod_bitmap *gpus; /* /dev/nvidia<i> for these; NULL = none */
	const char *hostname;          /* the replica's name (/etc/hosts, /etc/passwd) */
	const char *home;              /* its HOME, for /etc/passwd */
	uint32_t uid, gid;             /* its ids, for /etc/passwd and /etc/group */
	uint64_t shm_bytes;            /* /dev/shm size; 0 = half of RAM */
};
int iod_agent_rootfs_enter(const struct iod_agent_rootfs *rf, char *err, size_t len);

/* Executor settings shared by every replica of an agent. */
struct iod_agent_exec_config {
	char node[IOD_NAME_MAX];                 /* node name, for IOD_NODE */
	char run_dir[IOD_AGENT_PATH_MAX];        /* logs and data: <run_dir>/replicas/<name>/ */
	char self_exe[IOD_AGENT_PATH_MAX];       /* the iod binary: program "iod" runs it */
	char cgroup_prefix[IOD_NAME_MAX * 2];    /* e.g. "iod/node-1": under each hierarchy */
	uint64_t log_max_bytes;                  /* rotate the log file past this size */
	uint32_t log_files;                      /* rotated files kept (log.1 .. log.N) */
	bool use_namespaces;                     /* false: plain child process */
	const struct iod_agent_caps *caps;       /* what is permitted */
	struct iod_agent_seccomp_store *seccomp; /* filters; NULL = default built per start */
	uint32_t uid_base;                       /* dynamic uids: base + hash of the name */
};

/* A running sandbox, as the shell tracks it. */
struct iod_agent_proc {
	pid_t pid;                           /* the sandbox's init (shim) in our namespace */
	char cgroup_mem[IOD_AGENT_PATH_MAX]; /* created cgroup dirs, "" if none */
	char cgroup_cpu[IOD_AGENT_PATH_MAX];
	char sandbox_warn[IOD_ERR_MSG_MAX]; /* what could not be applied (best effort) */
	struct iod_agent_jail jail;         /* for health checks run inside it */
};

/*
 * Start one replica: creates <run_dir>/replicas/<name>/ (log files, and data/
 * for stateful replicas, kept across restarts), the cgroup, then the sandbox.
 * The sandbox's init forwards signals to the workload, writes its output to
 * rotating log files and exits with its status. Returns 0 with p->pid set,
 * or a negative errno with what failed in e.
 */
int iod_agent_exec_start(const struct iod_agent_exec_config *c, const struct iod_agent_replica *r,
                         struct iod_agent_proc *p, struct iod_err *e);
/* A replica's own network (per-replica netns, netns.c): the sandbox's init
 * joins netns_fd before the workload starts; addr is its address. */
struct iod_agent_net {
	int netns_fd;            /* open /run/netns/<name>; -1 = the node's network */
	char addr[IOD_ADDR_MAX]; /* its veth address ("10.213.0.2"), IOD_ADDR's host */
};
/* iod_agent_exec_start in the network net (NULL: the node's network). */
int iod_agent_exec_start_net(const struct iod_agent_exec_config *c,
                             const struct iod_agent_replica *r, const struct iod_agent_net *net,
                             struct iod_agent_proc *p, struct iod_err *e);
/* A process's start time in clock ticks (/proc/PID/stat field 22); 0 if gone. */
uint64_t iod_agent_proc_start_time(pid_t pid);
/* A dynamic uid: base + 1 + (hash(name) + probe) mod (IOD_AGENT_UID_BLOCK - 2);
 * the agent probes on when two of its replicas would share one. */
uint32_t iod_agent_uid_of(uint32_t base, const char *name, uint32_t probe);
/* Signal the sandbox (SIGTERM: graceful, SIGKILL: now). */
int iod_agent_exec_signal(const struct iod_agent_proc *p, int sig);
/* Remove the replica's cgroups once it has exited. */
void iod_agent_exec_cleanup(struct iod_agent_proc *p);
/* Remove the empty replica cgroups under prefix (leftovers of a crash), then
 * the prefix itself when empty. Cgroups with processes stay. */
void iod_agent_cgroup_sweep(const struct iod_agent_caps *caps, const char *prefix);
/* Paths of a replica's files: "log" (current log), "data", "dir". -EINVAL
 * when name breaks iod_state_name_valid (it would leave the replicas
 * directory), -ENAMETOOLONG when buf is too small. */
int iod_agent_replica_path(const char *run_dir, const char *name, const char *what, char *buf,
                           size_t len);

/*
 * The in-sandbox init, run in the child after clone: applies limits,
 * affinity and policy, then runs the workload. Exposed for tests.
 */
int iod_agent_sandbox_apply_affinity(const struct iod_agent_replica *r, struct iod_err *e);
int iod_agent_sandbox_apply_mempolicy(int32_t numa_node, struct iod_err *e);

/* ---- rotating log files ------------------------------------------------- */

struct iod_agent_log {
	int fd;                        /* current file, -1 when closed */
	int dirfd;                     /* path is relative to it (AT_FDCWD: plain path) */
	char path[IOD_AGENT_PATH_MAX]; /* current file */
	uint64_t size_bytes;           /* written to the current file */
	uint64_t max_bytes;            /* rotate past this */
	uint32_t files;                /* rotated files kept */
};
int iod_agent_log_open(struct iod_agent_log *l, const char *path, uint64_t max_bytes,
                       uint32_t files, struct iod_err *e);
/* The same, path relative to the directory dirfd (the caller keeps it open). */
int iod_agent_log_open_at(struct iod_agent_log *l, int dirfd, const char *path, uint64_t max_bytes,
                          uint32_t files, struct iod_err *e);
/* Append; rotates first when the write would pass max_bytes. */
int iod_agent_log_write(struct iod_agent_log *l, const void *data, size_t len);
void iod_agent_log_close(struct iod_agent_log *l);

/* ---- health probes (shell) ---------------------------------------------- */

/*
 * Run one check against host:port now, bounded by h->timeout_ns. 0 = pass;
 * a negative errno = fail, with what happened in detail (also on a pass).
 * exec runs `/bin/sh -c command` in the agent's environment.
 */
int iod_agent_probe_run(const struct iod_agent_health *h, const char *host, uint16_t port,
                        char *detail, size_t detail_len);
/* The same; an exec check runs inside the sandbox j describes (j NULL or
 * j->init 0: on the host, as the agent): its cgroups, its namespaces, its
 * uid, capabilities, no_new_privs and seccomp filter. */
int iod_agent_probe_run_in(const struct iod_agent_health *h, const struct iod_agent_jail *j,
                           const char *host, uint16_t port, char *detail, size_t detail_len);
/*
 * Wait for child pid, the leader of its own process group, until
 * deadline_ns (monotonic); then SIGKILL the whole group and reap the leader
 * (-ETIMEDOUT). After a normal end the rest of the group is killed too: a
 * check's processes never outlive it. *status gets waitpid's status.
 */
int iod_agent_wait_group(pid_t pid, uint64_t deadline_ns, int *status);

/* ---- per-replica network namespaces (shell, netns.c) -------------------- */

/*
 * With a subnet configured (and root), each replica gets a network
 * namespace "iod-<nodehash>-<replica>" with a veth pair: "eth0" inside with
 * its address from the node's subnet and a default route via the gateway,
 * the host end enslaved to the node's bridge "iodb<nodehash>", which holds
 * the gateway address. The agent, its probes and the other replicas of the
 * node reach the replica at its address. Nothing is routed beyond the
 * subnet (no forwarding or NAT is switched on). Cleanup deletes the netns
 * (which deletes the veth pair) when the replica exits, and the bridge when
 * the agent stops; a start sweeps what a crashed agent left.
 */
struct iod_agent_netns {
	char node[IOD_NAME_MAX];    /* node name */
	uint32_t tag;               /* hash of the node name: names its links and netns */
	char bridge[16];            /* "iodb<tag>" */
	struct iod_agent_ipam ipam; /* the subnet's addresses */
	bool up;                    /* bridge created */
};
/* Sweep leftovers of this node, create the bridge with the gateway address.
 * -EPERM when not permitted (not root), with what to do in e. */
int iod_agent_netns_open(struct iod_agent_netns *n, const char *node, const char *cidr,
                         struct iod_err *e);
/* Create replica name's netns and veth pair, address and routes; returns the
 * netns in net (fd to close with iod_agent_netns_put). */
int iod_agent_netns_get(struct iod_agent_netns *n, const char *name, struct iod_agent_net *net,
                        struct iod_err *e);
/* Close net's fd and delete the replica's netns (and with it its veth). */
void iod_agent_netns_put(struct iod_agent_netns *n, const char *name, struct iod_agent_net *net);
/* Delete every netns, veth and the bridge of this node. */
void iod_agent_netns_close(struct iod_agent_netns *n);
/* The netns name of replica name ("iod-<tag>-<name>"). */
int iod_agent_netns_name(const struct iod_agent_netns *n, const char *name, char *buf, size_t len);

/* ---- concurrent health checks (shell, prober in probe.c) ------------------ */

/*
 * A fixed pool of IOD_AGENT_PROBE_WORKERS threads runs health checks, so a
 * check that hangs until its timeout delays no other replica's verdict.
 * Submit never blocks (the queue holds one check per replica); results come
 * back through iod_agent_prober_take, and fd() becomes readable when one is
 * ready.
 */
struct iod_agent_prober;
struct iod_agent_probe_result {
	uint32_t slot;           /* as submitted */
	char name[IOD_NAME_MAX]; /* replica */
	uint64_t generation;     /* as submitted: a stale result is dropped */
	bool ok;                 /* passed */
	char detail[256];        /* what happened */
};
int iod_agent_prober_new(uint32_t workers, struct iod_agent_prober **out, struct iod_err *e);
/* Queue one check (jail: the replica's sandbox, copied; NULL = none);
 * -ENOSPC when IOD_AGENT_REPLICAS_MAX checks are queued. */
int iod_agent_prober_submit(struct iod_agent_prober *p, uint32_t slot, const char *name,
                            uint64_t generation, const struct iod_agent_health *h, const char *host,
                            uint16_t port, const struct iod_agent_jail *jail);
/* Next finished check (0), or -EAGAIN when none is. */
int iod_agent_prober_take(struct iod_agent_prober *p, struct iod_agent_probe_result *out);
/* An eventfd, readable when results are waiting (read it to clear). */
int iod_agent_prober_fd(const struct iod_agent_prober *p);
/* Stop the workers (waits for checks in flight, each bounded by its timeout). */
void iod_agent_prober_free(struct iod_agent_prober *p);

/* ---- the agent (shell) --------------------------------------------------- */

struct iod_agent_config {
	char name[IOD_NAME_MAX];           /* node name */
	char data_dir[IOD_AGENT_PATH_MAX]; /* run dir: replicas/, events.jsonl, status.json */
	char manifest[IOD_AGENT_PATH_MAX]; /* desired replicas file, re-read on change */
	struct iod_agent_rec_config rec;   /* reconciler tuning */
	uint64_t log_max_bytes;            /* per replica log file */
	uint32_t log_files;                /* rotated files kept */
	bool use_namespaces;               /* sandbox replicas (default true) */
	uint64_t run_for_ns;               /* 0 = until SIGTERM/SIGINT; tests bound it */
	/* control plane (when servers is set, instead of a manifest) */
	char servers[IOD_AGENT_PATH_MAX]; /* API addresses "host:port,..." */
	char addr[IOD_ADDR_MAX];          /* this node's address for endpoints */
	uint64_t lease_ttl_ms;            /* node lease; lost when not renewed in time */
	uint64_t stateful_grace_ms;       /* lost node: wait this long to move stateful */
	uint32_t gpus;                    /* GPUs this node offers */
	uint32_t cpus;                    /* CPUs this node offers */
	char model[IOD_NAME_MAX];         /* hardware model name ("host" = discovered) */
	json_t *topology;                 /* optional topology document to register */
	/* the node's mesh proxy (with servers only; docs/mesh.md) */
	bool mesh;                     /* host it (default true) */
	char mesh_admin[IOD_ADDR_MAX]; /* its admin endpoint; "" = none */
	uint32_t mesh_workers;         /* its epoll threads (0 = 1) */
	/* per-replica network namespaces (root only; docs/runtime.md) */
	char netns_subnet
	    [IOD_ADDR_MAX]; /* node subnet CIDR; "" = replicas share the node's network */
	/* telemetry (docs/observability.md) */
	uint64_t telemetry_interval_ns;    /* sampling period; 0 = no telemetry */
	uint64_t telemetry_push_ns;        /* summary to the control plane this often */
	char telemetry_addr[IOD_ADDR_MAX]; /* serve /metrics and /v1/telemetry; "" = don't */
};
void iod_agent_config_default(struct iod_agent_config *c);

/* Run the agent until SIGTERM/SIGINT (stops every replica first). */
int iod_agent_run(const struct iod_agent_config *c, struct iod_err *e);

/* Follow/read helpers for `iod logs` and `iod events` on a local data dir. */
int iod_agent_events_path(const char *data_dir, char *buf, size_t len);

#endif
