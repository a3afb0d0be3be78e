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
 *
 * This header holds the pure parts (phases, replica records, desired state,
 * the address allocator, the reconciler); the shells are in agent_run.h.
 */
#ifndef IOD_AGENT_H
#define IOD_AGENT_H

#include "iod/base.h"
#include "iod/objects.h"
#include "iod/net.h"
#include "iod/spec.h"
#include "iod/storage.h"

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
	/* the Secret objects it mounts at /run/secrets/<name> (secrets.c),
	 * comma-separated; "" = none */
	char secrets[IOD_SEC_SECRETS_PER_SERVICE_MAX * IOD_NAME_MAX];
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
	char addr[IOD_ADDR_MAX];                 /* overlay address the control plane chose */
	struct iod_agent_health health;          /* readiness + liveness check */
	struct iod_agent_sandbox sandbox;        /* how it is confined */
	/* its checkpoint store (stateful, in a spec with storage:): the tiers,
	 * fastest first; ckpt_tiers_n 0 = none. The agent makes one directory
	 * per tier in its data dir and passes them as $IOD_CKPT_TIERS. */
	struct iod_stor_tier_cfg ckpt_tiers[IOD_STOR_TIERS_MAX];
	uint32_t ckpt_tiers_n;
	uint32_t ckpt_replicas;          /* storage.replicas; 0 = not written */
	bool ckpt_volume;                /* storage.volume: its data directory rides in each
	                                    checkpoint ($IOD_CKPT_VOLUME, docs/storage.md) */
	char fail[IOD_AGENT_REASON_MAX]; /* why it cannot be built ("" = it can):
	                                            marked failed, never started */
	char svid_tenant[IOD_NAME_MAX];  /* its service's tenant once the agent holds
	                                   the service's SVID for it ("" = no
	                                   credentials of its own) */
};

/* Append one argument / one NAME=value; -E2BIG when the buffer is full. */
int iod_agent_replica_add_arg(struct iod_agent_replica *r, const char *arg);
int iod_agent_replica_add_env(struct iod_agent_replica *r, const char *name, const char *value);
/* Replace (or add) one environment entry NAME=value: what the agent rewrites
 * after the desired state (a checkpoint peer behind a relay). -E2BIG: full. */
int iod_agent_replica_set_env(struct iod_agent_replica *r, const char *name, const char *value);
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
	char owner[IOD_AGENT_IPAM_MAX][IOD_NAME_MAX]; /* slot -> replica; "" = free */
	/* slot -> its address when the control plane chose it (host order);
	 * 0 = the slot's own, net + 2 + slot (what alloc hands out) */
	uint32_t addr[IOD_AGENT_IPAM_MAX];
};
/* -EINVAL (with what is wrong) for a malformed CIDR or a prefix outside /16../29. */
int iod_agent_ipam_init(struct iod_agent_ipam *m, const char *cidr, struct iod_err *e);
/* The gateway (bridge) address, host order. */
uint32_t iod_agent_ipam_gateway(const struct iod_agent_ipam *m);
/* The address of name (its own if it has one, else the lowest free one) and
 * its host index; -ENOSPC when the subnet is exhausted (e says which). */
int iod_agent_ipam_alloc(struct iod_agent_ipam *m, const char *name, uint32_t *addr,
                         uint32_t *index, struct iod_err *e);
/*
 * name takes addr, the address the control plane's IPAM gave it (the
 * Replica's "addr", src/ctrl/ipam.c): inside the subnet or not (a stateful
 * replica keeps the address of the node it came from, and the overlay
 * routes it by replica). A slot (its veth index) of its own, or the one it
 * has. -EADDRINUSE (e names who) when another replica holds addr, -ENOSPC
 * when no slot is free; m unchanged then.
 */
int iod_agent_ipam_claim(struct iod_agent_ipam *m, const char *name, uint32_t addr, uint32_t *index,
                         struct iod_err *e);
/* The address of slot i (held or not). */
uint32_t iod_agent_ipam_slot_addr(const struct iod_agent_ipam *m, uint32_t i);
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
/* One variable of an environment rewrite: fn writes the new value of
 * var (var_len bytes, not terminated; its value val) into out and returns
 * 1, or returns 0 to keep it. */
typedef int (*iod_agent_env_fn)(void *ctx, const char *var, size_t var_len, const char *val,
                                char *out, size_t out_len);
/* r's environment with each variable passed through fn, in order; -E2BIG
 * (r unchanged) when the result would not fit, -EINVAL for a broken
 * list, -ENOMEM. The one loop env_localize and the overlay's VIPs share. */
int iod_agent_env_rewrite(struct iod_agent_replica *r, iod_agent_env_fn fn, void *ctx);

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

/* The shells (executor, sandbox, probes, agent loop): include/iod/agent_run.h. */

/* ---- the underlay of `iod up --netns` (underlay.c pure, underlay_run.c) -- */

/*
 * A leaf-spine fabric of network namespaces (docs/network.md): each node
 * agent runs in its own "host" namespace <prefix>-h<N> with one link u0 to
 * its leaf <prefix>-l<L> (L = (N-1) % leaves + 1) and the address
 * 10.254.<L>.<k>; each leaf bridges its hosts (br0, 10.254.<L>.254) and
 * links to every spine <prefix>-s<S> over a /30 in 10.253.<L>.0/24; leaves
 * route other leaves' /24s over all spines (Linux ECMP, L4 hash). The
 * control plane is the root namespace: link <prefix> (10.254.0.1) to leaf
 * 1 (10.254.0.254), route 10.254.0.0/16 from there. A rate limits every
 * spine link with tbf; a slow spine gets its own rate.
 */
struct iod_agent_underlay_cfg {
	char prefix[16];     /* "iodu<6 hex>": every namespace and the root link */
	uint32_t leaves;     /* 1..IOD_UNDERLAY_LEAVES_MAX */
	uint32_t spines;     /* 1..IOD_UNDERLAY_SPINES_MAX */
	uint32_t hosts;      /* 1..IOD_UP_NODES_MAX */
	char rate[24];       /* tbf rate of every spine link ("1gbit"); "" = none */
	uint32_t slow_spine; /* 1-based spine with slow_rate; 0 = none */
	char slow_rate[24];  /* its rate */
};
/* One step: `ip -n NS -batch -` (tool "ip"), `tc -n NS -batch -` ("tc"), or
 * sysctl lines "key=value" written inside NS ("sysctl"); ns "" = root. */
struct iod_agent_underlay_step {
	char tool[8];                       /* "ip", "tc", "sysctl" */
	char ns[32];                        /* namespace, "" = the root one */
	char text[IOD_UNDERLAY_STEP_BYTES]; /* the batch */
};
/* Parse "leaves=2,spines=2,rate=1gbit,slow=2:20mbit" over c's values. */
int iod_agent_underlay_parse(const char *s, struct iod_agent_underlay_cfg *c, struct iod_err *e);
/* The steps that build c's underlay, in order (pure). */
int iod_agent_underlay_plan(const struct iod_agent_underlay_cfg *c,
                            struct iod_agent_underlay_step *steps, uint32_t max, uint32_t *n,
                            struct iod_err *e);
/* Host N's (1-based) leaf and underlay address; the control plane's. */
uint32_t iod_agent_underlay_leaf(const struct iod_agent_underlay_cfg *c, uint32_t host);
uint32_t iod_agent_underlay_host_ip(const struct iod_agent_underlay_cfg *c, uint32_t host);
uint32_t iod_agent_underlay_cp_ip(void);
/* The MAC of leaf L's bridge: a host's next hop on the underlay. */
void iod_agent_underlay_leaf_mac(uint32_t leaf, uint8_t mac[6]);
/* Host N's namespace name. */
void iod_agent_underlay_host_ns(const struct iod_agent_underlay_cfg *c, uint32_t host, char *buf,
                                size_t len);
/* The underlay's prefix of an `iod up` state dir (absolute): "iodu<6 hex>". */
void iod_agent_underlay_prefix(const char *dir, char *buf, size_t len);
/* The link of leaf L to spine S (1-based) as its leaf sees it: the leaf's
 * namespace and its interface to the spine ("<prefix>-lL", "sS"). -EINVAL
 * with e when c has no such leaf or spine. */
int iod_agent_underlay_link(const struct iod_agent_underlay_cfg *c, uint32_t leaf, uint32_t spine,
                            char *ns, size_t ns_len, char *dev, size_t dev_len, struct iod_err *e);

/* The overlay's MACs follow from addresses: 02:1d:<ip> for a replica (and
 * the host stack at the gateway address), 02:1e:<ip> for the switch's
 * gateway. */
void iod_agent_overlay_mac(uint32_t ip, bool gateway, uint8_t mac[6]);

/* ---- the node's virtual switch's configuration (overlay.c, pure) -------- */

/* One replica as the overlay sees it: where it is and whose. */
struct iod_agent_overlay_ep {
	char name[IOD_NAME_MAX];    /* replica */
	char node[IOD_NAME_MAX];    /* its node */
	char tenant[IOD_NAME_MAX];  /* its Service's tenant ("default") */
	char service[IOD_NAME_MAX]; /* its Service */
	uint32_t ip;                /* its overlay address (Replica "addr"); 0 = none yet */
	uint32_t vtep;              /* its node's underlay address (Node "addr"); 0 = unknown */
	uint64_t egress_bps;        /* its egress meter (Replica "nic_bw_bps", bits/s); 0 = none */
	uint16_t port;              /* where it answers (its Endpoint's "port", the Endpoint
	                             * naming its service at its address); 0 = unknown */
	bool healthy;               /* its Endpoint says it takes traffic */
};
/* A service with an overlay VIP (Service "vip", docs/network.md). */
struct iod_agent_overlay_svc {
	char name[IOD_NAME_MAX];   /* service */
	char tenant[IOD_NAME_MAX]; /* whose (its network) */
	uint32_t vip;              /* its overlay VIP */
	uint16_t port;             /* the VIP's port: the mesh's (first spec port, else the
	                            * default), so IOD_SVC_<NAME>_ADDR keeps its port */
	uint8_t proto;             /* IOD_NET_PROTO_TCP or _UDP (the first port's) */
	bool l7;                   /* service_mesh.mode l7: its VIP leads to the node's
	                            * mesh proxy (when the node hosts one), not Maglev */
};
/* One rule of a security group (a NetPolicy object's), with its name. */
struct iod_agent_sg_rule {
	char name[2 * IOD_NAME_MAX];     /* "<policy>/<rule>": drops' and counters' rule */
	bool egress;                     /* an egress rule (else ingress) */
	struct iod_obj_netpolicy_rule r; /* what it matches and does */
};
/* A security group: a NetPolicy object (sg.c). */
struct iod_agent_sg {
	char name[IOD_NAME_MAX];    /* the object's name */
	char tenant[IOD_NAME_MAX];  /* whose ("default") */
	char service[IOD_NAME_MAX]; /* the service it guards */
	bool ingress, egress;       /* has rules in that direction: the rest is denied */
	uint16_t rules_first;       /* its rules in the table's sg_rules, ingress first */
	uint16_t rules_n;
	uint16_t deny_rule; /* its "<name>/default-deny" in sg_rules */
};
/* Every placed replica of the cluster (list order), the security groups
 * (NetPolicy objects, name order) and the services with a VIP (name order). */
struct iod_agent_overlay_table {
	uint32_t n;                                                 /* entries */
	struct iod_agent_overlay_ep eps[IOD_AGENT_OVERLAY_EPS_MAX]; /* entries */
	uint32_t sgs_n;                                             /* groups */
	struct iod_agent_sg sgs[IOD_AGENT_SGS_MAX];                 /* groups */
	uint32_t sg_rules_n;                                        /* rules of all groups */
	struct iod_agent_sg_rule sg_rules[IOD_AGENT_SG_RULES_MAX];  /* rules of all groups */
	uint32_t svcs_n;                                            /* services with a VIP */
	struct iod_agent_overlay_svc svcs[IOD_AGENT_VIPS_MAX];      /* those services */
	bool proxy; /* this node's agent hosts a mesh proxy that serves l7 VIPs */
};
/* A Service value's tenant: "tenant", else "network": {"tenant"};
 * "default" (borrowed from value, or the literal). */
const char *iod_agent_overlay_tenant(const json_t *value);
/* A tenant's VNI: a hash of its name in 1..0xfffffe. */
uint32_t iod_agent_overlay_vni(const char *tenant);
/* A listing ({"items": [{"name", "value"}...]}) brought up to date, in
 * place, by the watch's events of kind (each {"type": "put"|"delete",
 * "kind", "name", "value"}): a put replaces its item's value or appends
 * it, a delete removes it; other kinds are skipped. false (the listing
 * half changed: list again) when a put has no value or the listing is not
 * one. The agent applies a security-group change this way instead of
 * listing every NetPolicy again. */
bool iod_agent_list_apply_events(json_t *list, const json_t *events, const char *kind);
/* The table from the watch's lists ({"items": [...]}); -ENOSPC when the
 * cluster has more replicas than the table holds (the first ones kept).
 * netpolicies may be NULL (no security groups). */
int iod_agent_overlay_table_from_state(const json_t *nodes, const json_t *services,
                                       const json_t *replicas, const json_t *netpolicies,
                                       struct iod_agent_overlay_table *t);
/*
 * Security groups (sg.c, pure). from_state: the NetPolicy objects of the
 * watch's list into t's groups (an object that does not pass
 * iod_obj_netpolicy_check is skipped, named in e; -ENOSPC past the table's
 * bounds, the first ones kept). compile: the groups of the local replicas
 * (their service's) into c's endpoint-bound entries (struct
 * iod_flow_dp_acl): per member and direction with rules, an allow of the
 * node's host stack (health checks, the mesh proxy), the rules in order
 * (a peer service: one entry per replica of it in the group's tenant with
 * an address and, for egress, one for its VIP when the rule covers it),
 * then the group's default deny. -ENOSPC past IOD_DP_ACLS_MAX.
 * rule_covers_vip: whether a rule by peer service sv decides a connection
 * to sv's VIP: its protocol is any or the VIP's, and its ports hold the
 * VIP's port or the port of one of sv's endpoints (where the LB sends it).
 */
struct iod_agent_overlay_node;
struct iod_agent_overlay_local;
struct iod_flow_dp_config;
int iod_agent_sg_from_state(const json_t *netpolicies, struct iod_agent_overlay_table *t,
                            struct iod_err *e);
int iod_agent_sg_compile(const struct iod_agent_overlay_node *nd,
                         const struct iod_agent_overlay_table *t,
                         const struct iod_agent_overlay_local *loc, uint32_t nloc,
                         struct iod_flow_dp_config *c, struct iod_err *e);
struct iod_obj_netpolicy_rule;
struct iod_agent_overlay_svc;
bool iod_agent_sg_rule_covers_vip(const struct iod_agent_overlay_table *t,
                                  const struct iod_obj_netpolicy_rule *r,
                                  const struct iod_agent_overlay_svc *sv);
/* The rule index of acl entries that are no rule's (the host exemption). */
#define IOD_AGENT_SG_RULE_NONE UINT16_MAX
const struct iod_agent_overlay_ep *iod_agent_overlay_find(const struct iod_agent_overlay_table *t,
                                                          const char *name);
/* This node, as its switch needs it. */
struct iod_agent_overlay_node {
	char name[IOD_NAME_MAX];    /* node name */
	uint32_t vtep_ip;           /* its underlay address */
	uint8_t vtep_mac[6];        /* its underlay device's MAC */
	uint8_t underlay_gw_mac[6]; /* the underlay next hop */
	uint32_t gateway;           /* its replicas' gateway = its host stack's address */
	uint32_t overlay_net;       /* the cluster's overlay (10.200.0.0) */
	uint32_t overlay_prefix;    /* its prefix (16) */
	int ar_policy;              /* enum iod_ar_policy of its tenants' VXLAN to other
	                               nodes (cluster config network.adaptive_routing);
	                               0 = IOD_AR_ECMP: no adaptive routing */
};
/*
 * Drops with their rule (drops.c, pure): the switch hands every packet its
 * pipeline dropped to iod_agent_drops_note, which finds the rule that
 * dropped it from the config it ran (tenants' default security group: a
 * tenant's replicas may talk, different tenants may not), keeps dropped new
 * flows (TCP SYN, any other protocol's packet; a repeat within 1 s of the
 * same flow counts on its record) in a bounded ring, and counts verdicts per
 * rule. Rules are named "tenant-<tenant>/<rule>", and a security group's
 * (NetPolicy objects, sg.c) "<policy>/<rule>" or "<policy>/default-deny".
 */
struct iod_agent_drop {
	uint64_t seq;                /* 1, 2, ... in the order recorded */
	uint64_t first_ms;           /* unix ms of the first packet */
	uint64_t last_ms;            /* of the last repeat */
	uint32_t count;              /* packets of this flow dropped */
	uint32_t src, dst;           /* inner IPv4 addresses */
	uint16_t sport, dport;       /* L4 ports */
	uint8_t proto;               /* IP protocol */
	uint8_t tcp_flags;           /* of the first */
	bool from_fabric;            /* arrived from another node */
	char src_name[IOD_NAME_MAX]; /* the replica at src ("" = unknown) */
	char dst_name[IOD_NAME_MAX]; /* the replica at dst ("" = none known) */
	char tenant[IOD_NAME_MAX];   /* the network it was classified into */
	char rule[2 * IOD_NAME_MAX]; /* "tenant-<t>/deny-other-tenants", ... */
	char why[128];               /* one line */
};
struct iod_agent_drop_rule {
	char rule[2 * IOD_NAME_MAX]; /* its name */
	uint64_t forwarded;          /* new sessions it admitted */
	uint64_t dropped;            /* packets it dropped */
	uint64_t fwd_base;           /* admitted by pipelines before the current one */
	uint64_t fwd_seen;           /* the current pipeline's last reading */
};
struct iod_agent_drops {
	uint64_t seq;                                    /* records ever made */
	uint64_t dropped;                                /* packets dropped, all causes */
	uint32_t head;                                   /* next slot of ring */
	uint32_t n;                                      /* records held */
	uint32_t rules_n;                                /* rules counted */
	bool dirty;                                      /* changed since the last publish */
	struct iod_agent_drop ring[IOD_AGENT_DROPS_MAX]; /* newest last */
	struct iod_agent_drop_rule rules[IOD_AGENT_DROP_RULES_MAX]; /* first seen first */
};
struct iod_flow_key;
struct iod_flow_dp_config;
/* One dropped packet (key from the parser) at now_ms, under config c, with
 * the overlay table t (names); from_fabric: it came in on the VTEP. */
void iod_agent_drops_note(struct iod_agent_drops *d, const struct iod_flow_dp_config *c,
                          const struct iod_agent_overlay_table *t, const struct iod_flow_key *k,
                          bool from_fabric, uint64_t now_ms);
/* A frame anti-spoofing refused (src/net/spoof.c) at now_ms: sent from
 * replica's port, bound to bound_ip, for reason v; k its parse (NULL: it
 * did not parse). Counted on rule "switch/anti-spoofing" and recorded
 * (deduplicated as the others) with the reason and the forged source. */
void iod_agent_drops_spoof(struct iod_agent_drops *d, const char *replica, uint32_t bound_ip,
                           enum iod_net_spoof_verdict v, const struct iod_flow_key *k,
                           uint64_t now_ms);
/* The admitted new sessions of network n's allow rule as the running
 * pipeline counts them; epoch changes when the pipeline was rebuilt. */
void iod_agent_drops_admitted(struct iod_agent_drops *d, const char *tenant, uint64_t reading,
                              bool new_pipeline);
/* The same for any rule by its name (a security group's "<policy>/<rule>"). */
void iod_agent_drops_admitted_rule(struct iod_agent_drops *d, const char *rule, uint64_t reading,
                                   bool new_pipeline);
/* {"node", "dropped", "records": [...oldest first], "rules": [...]} */
json_t *iod_agent_drops_json(const struct iod_agent_drops *d, const char *node);
/* iod_dp_sg_verdicts_total{rule=,verdict=forwarded|dropped} (src/obs/prom.c). */
int iod_agent_drops_prom(const struct iod_agent_drops *d, struct iod_buf *b);

/*
 * Service VIPs on the overlay (overlay_svc.c, pure; docs/network.md):
 *   iod_agent_overlay_table_services: the services with a VIP from the
 *     Service list, and each replica's service, port and health from the
 *     Endpoint list ({"items": [...]}), into t (after
 *     iod_agent_overlay_table_from_state); -ENOSPC past IOD_AGENT_VIPS_MAX
 *     services (the first kept);
 *   iod_agent_overlay_dp_services: the data plane's services of config c
 *     (built by iod_agent_overlay_dp_config from the same t): one per
 *     service of a tenant c has, VIP:port balanced by Maglev over the
 *     replicas of the service that are endpoints of that tenant's network
 *     here (local with a port, or behind their VTEP), each up when its
 *     Endpoint is healthy; -ENOSPC with e past IOD_DP_SERVICES_MAX (the
 *     first kept). A service with service_mesh.mode l7 on a node whose
 *     agent hosts the mesh proxy (t->proxy) gets no LB entry: its VIP
 *     becomes a local endpoint of its tenant's network at the host stack's
 *     port (the proxy listens on it there), so only that tenant's replicas
 *     of this node reach the proxy through it;
 *   iod_agent_overlay_svc_l7: whether a Service value says
 *     service_mesh: {mode: l7};
 *   iod_agent_env_overlay_vips: a replica on the overlay reaches services at
 *     their overlay VIP, so its IOD_SVC_<NAME>_ADDR values become VIP:port
 *     for every service t has; -E2BIG when the environment does not fit.
 */
int iod_agent_overlay_table_services(const json_t *services, const json_t *endpoints,
                                     struct iod_agent_overlay_table *t);
int iod_agent_overlay_dp_services(const struct iod_agent_overlay_table *t,
                                  struct iod_flow_dp_config *c, struct iod_err *e);
int iod_agent_env_overlay_vips(struct iod_agent_replica *r,
                               const struct iod_agent_overlay_table *t);

/* A local replica with a port on the switch. */
struct iod_agent_overlay_local {
	char name[IOD_NAME_MAX]; /* replica */
	uint32_t ip;             /* its address */
};
/* The data plane's config: a network per tenant of the local replicas
 * (name order) and the host network last; local replicas and the remote
 * ones of those tenants as endpoints. */
struct iod_flow_dp_config;
int iod_agent_overlay_dp_config(const struct iod_agent_overlay_node *nd,
                                const struct iod_agent_overlay_table *t,
                                const struct iod_agent_overlay_local *loc, uint32_t nloc,
                                struct iod_flow_dp_config *c, struct iod_err *e);

#endif
