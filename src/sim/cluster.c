/*
 * cluster.c: the whole-cluster simulator's event loop (`iod sim --nodes N
 * --gpus G`).
 *
 * One queue of events in virtual nanoseconds (src/sim/queue.c's heap, ties
 * in push order), one seed (iod_rng forks for start latencies, stragglers,
 * faults), and the production cores at work on simulated hardware:
 *   - the control plane's state machine (src/state/state.c): nodes register
 *     under leases with the agent's TTL and renew them every third of it;
 *     the leader's lease check (its production period) proposes
 *     lease_expire, which deletes a silent node's Node object;
 *   - the controller (src/ctrl): the deploy plan and, when a node is lost,
 *     the rescheduling plan, both over the topology-aware scheduler
 *     (src/sched), their commands applied to the state as the API would;
 *   - per node the agent's cores: desired replicas from the state
 *     (src/agent/desired.c) and the reconciler (src/agent/reconcile.c),
 *     whose START/STOP/KILL actions become simulated processes with a start
 *     latency, crashes and exits;
 *   - the mesh's load balancer and outlier detection (src/mesh/lb.c,
 *     outlier.c) over requests to the job's service;
 *   - a data-parallel training job over the ranks the scheduler placed
 *     (train.c's calibration and ring all-reduce), with checkpoints.
 * The control plane's writes go through canonical raft's deterministic
 * fixture (raft/fixture.h), one iod_state FSM per server, with the
 * production election and heartbeat timers; the fixture's clock follows the
 * loop's (it steps while its time is behind the next event), so a write
 * commits when Raft commits it and a server or leader kill costs an
 * election. With servers = 0 a write commits after timers.commit_ns (the
 * large-scale runs). A watch reaches agents timers.watch_ns after the write.
 * With disk faults in the config each server's log is also mirrored into
 * iod's real log (src/state/wal.c) on a memory file system after every
 * fixture step (src/state/simdisk.c); a disk fault damages it and the
 * restart is wal.c's verdict: a repaired torn tail rejoins, a refused log
 * keeps the server down until it is rebuilt from the most up-to-date peer.
 *
 * A baseline (the Kubernetes default) swaps the placement (count-only GPU
 * picking, a random node among those that fit, no CPU/NUMA/NIC pinning) and
 * the timers (kubelet status, node-monitor grace, eviction toleration,
 * CrashLoopBackOff) and goes through the same state, agents and job.
 *
 * Every event is written to a log line, hashed with SHA-256 as it goes:
 * the same config gives the same hash. Pure: no clock, no I/O, no rand().
 */
#include "iod/agent.h"
#include "iod/ar.h"
#include "iod/ctrl.h"
#include "iod/mesh.h"
#include "iod/objects.h"
#include "iod/sched.h"
#include "iod/sim.h"
#include "iod/sim_cluster.h"
#include "iod/state.h"
#include "iod/topo.h"

#include <gnutls/crypto.h>
#include <raft.h>
#include <raft/fixture.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- defaults ------------------------------------------------------------------ */

/* NCCL's IB transport: a work request is retransmitted NCCL_IB_RETRY_CNT
 * (7) times, each after 4.096 us x 2^NCCL_IB_TIMEOUT (20); then the queue
 * pair fails and NCCL aborts the communicator. */
static uint64_t nccl_ib_timeout_ns(void)
{
	return (uint64_t)(4096.0 * (double)(1u << 20) * (7 + 1));
}

void iod_simc_timers_iod(struct iod_simc_timers *t, uint64_t lease_ttl_ms, uint64_t lease_check_ms,
                         uint64_t heartbeat_ms, uint64_t stateful_grace_ms,
                         uint64_t restart_base_ns, uint64_t restart_max_ns)
{
	memset(t, 0, sizeof(*t));
	t->lease_ttl_ns = lease_ttl_ms * IOD_NS_PER_MS;
	t->renew_ns = IOD_MAX(lease_ttl_ms / 3, 1) * IOD_NS_PER_MS; /* agent/cluster.c */
	t->check_ns = lease_check_ms * IOD_NS_PER_MS;
	t->evict_ns = 0;
	t->stateful_grace_ns = stateful_grace_ms * IOD_NS_PER_MS;
	t->restart_base_ns = restart_base_ns;
	t->restart_max_ns = restart_max_ns;
	/* a write commits after one heartbeat round trip at most; a watch
	 * answers as soon as the change is applied */
	t->commit_ns = heartbeat_ms * IOD_NS_PER_MS;
	t->watch_ns = heartbeat_ms * IOD_NS_PER_MS;
	t->heartbeat_ms = (uint32_t)heartbeat_ms;
	t->election_ms = (uint32_t)(10 * heartbeat_ms); /* the server's: heartbeat = T/10 */
	t->heartbeat_ms = (uint32_t)heartbeat_ms;
	t->election_ms = (uint32_t)(10 * heartbeat_ms); /* server config: heartbeat = T/10 */
	/* the data plane's adaptive routing (src/net/ar.c): a path whose probes
	 * go unanswered for the probe timeout is left at the next probe */
	struct iod_ar_config ar;
	iod_ar_config_default(&ar, IOD_AR_MINRTT);
	t->reroute_ns = ar.probe_timeout_ns + ar.probe_interval_ns;
	t->transport_timeout_ns = nccl_ib_timeout_ns();
}

void iod_simc_timers_k8s(struct iod_simc_timers *t)
{
	memset(t, 0, sizeof(*t));
	t->lease_ttl_ns =
	    50 * IOD_NS_PER_S;            /* kube-controller-manager --node-monitor-grace-period */
	t->renew_ns = 10 * IOD_NS_PER_S;  /* kubelet --node-status-update-frequency */
	t->check_ns = 5 * IOD_NS_PER_S;   /* --node-monitor-period */
	t->evict_ns = 300 * IOD_NS_PER_S; /* default not-ready/unreachable tolerationSeconds */
	t->stateful_grace_ns = 0;
	t->restart_base_ns = 10 * IOD_NS_PER_S; /* kubelet CrashLoopBackOff: 10 s doubling */
	t->restart_max_ns = 300 * IOD_NS_PER_S; /* ... to 5 min */
	/* etcd: 100 ms heartbeat; a write commits within one */
	t->commit_ns = 100 * IOD_NS_PER_MS;
	t->watch_ns = 100 * IOD_NS_PER_MS;
	t->heartbeat_ms = 100; /* etcd --heartbeat-interval */
	t->election_ms = 1000; /* etcd --election-timeout */
	t->heartbeat_ms = 100; /* etcd --heartbeat-interval */
	t->election_ms = 1000; /* etcd --election-timeout */
	t->reroute_ns = 0;     /* ECMP only: a black-holed path stays hashed */
	t->transport_timeout_ns = nccl_ib_timeout_ns();
}

void iod_simc_config_default(struct iod_simc_config *c)
{
	memset(c, 0, sizeof(*c));
	c->nodes = 4;
	c->gpus_per_node = 4;
	iod_simc_job_default(&c->job);
	c->seed = 1;
	c->policy = IOD_SIMC_POLICY_IOD;
	c->alpha.s[IOD_SIMC_LINK_NVLINK] = 0; /* 0: the topology's link latency */
	c->alpha.s[IOD_SIMC_LINK_PCIE] = 0;
	c->alpha.s[IOD_SIMC_LINK_NIC] = 5e-6;
	c->nic_efficiency = 0.9;
	c->overlap = 1.0;
	c->bucket_bytes = 25ull << 20; /* PyTorch DDP bucket_cap_mb = 25 */
	c->proc_start_ns = 20 * IOD_NS_PER_S;
	c->proc_start_jitter = 0.25;
	c->ckpt_Bps = 2e9;
	c->straggler_max = 0;
	/* Llama 3 (Dubey et al. 2024, section 3.3.4): 419 unexpected
	 * interruptions in 54 days on 16,384 GPUs; 58.7% of them GPU issues */
	c->fault_per_gpu_hour = 419.0 / (54.0 * 24.0 * 16384.0);
	c->fault_gpu_share = 0.587;
	/* ... its Table 5: network switch and cable 35 of 419, NIC 7 */
	c->fault_link_share = 35.0 / 419.0;
	c->fault_nic_share = 7.0 / 419.0;
	c->node_repair_ns = 3600 * IOD_NS_PER_S;
	c->server_repair_ns = 60 * IOD_NS_PER_S;
	c->servers = 3;
	c->net_latency_ms = 1;
	c->disk_latency_ms = 1;
	c->server_repair_ns = 60 * IOD_NS_PER_S;
	c->servers = 3;
	c->net_latency_ms = 1;
	c->disk_latency_ms = 1;
	c->horizon_ns = 7 * 24 * 3600 * IOD_NS_PER_S;
	c->requests_per_s = 20;
	c->packet_every = 100;
	c->rack_nodes = 4;
	c->calibrate = true;
}

/* ---- the simulation's state ---------------------------------------------------- */

enum ev_kind {
	EV_REGISTER,   /* arg node: grant a lease, put the Node */
	EV_RENEW,      /* arg node, data gen: renew the lease */
	EV_CHECK,      /* the leader's lease check */
	EV_DEPLOY,     /* the job's deploy request */
	EV_SYNC,       /* arg node: a watch delivered; rebuild the desired set */
	EV_REC,        /* arg node, data token: the reconciler's timer */
	EV_STARTED,    /* arg node, data gen<<16|slot: a process is up */
	EV_EXITED,     /* arg node, data gen<<16|slot: a process ended (stop/kill) */
	EV_CTRL,       /* the controller reacts to a node change */
	EV_EVICT,      /* k8s: toleration over, evict what is on lost nodes */
	EV_FAULT,      /* arg fault index (scripted) or UINT32_MAX (random) */
	EV_NODE_UP,    /* arg node: repaired */
	EV_RESTORED,   /* data epoch: checkpoint loaded */
	EV_CHUNK,      /* data epoch: a run of steps finished */
	EV_CKPT,       /* data epoch: checkpoint written */
	EV_COMMIT,     /* arg proposal: (no Raft) the write commits now */
	EV_APPLIED,    /* arg proposal: Raft applied it at the leader */
	EV_REVIVE,     /* arg server: a killed server comes back */
	EV_MESH,       /* the proxies' endpoint list follows the Replica objects */
	EV_REQ,        /* a request from the client node to the job's service */
	EV_REROUTED,   /* data epoch: the stalled ring's flows are on a live path again */
	EV_NCCL_ABORT, /* arg node, data epoch: the transport gave up on a dead path */
	EV_NIC_UP,     /* arg node: a failed NIC is replaced */
	EV_RECOVER,    /* arg server, data disk entry: rebuild a refused log from a peer */
	EV_KINDS
};

static const char *const ev_names[EV_KINDS] = {
    "register", "renew",  "check", "deploy", "sync",     "rec",        "started", "exited",
    "ctrl",     "evict",  "fault", "up",     "restored", "chunk",      "ckpt",    "commit",
    "applied",  "revive", "mesh",  "req",    "rerouted", "nccl_abort", "nic_up",  "recover",
};

struct proc {
	bool starting, alive; /* a START is in flight / a process runs */
	char name[IOD_NAME_MAX];
};

struct node {
	char name[IOD_NAME_MAX];   /* "n0".. */
	bool up;                   /* powered and its agent running */
	bool registered;           /* its Node object exists (as far as it knows) */
	uint64_t gen;              /* bumped when it goes down: stale events drop */
	uint64_t lease_id;         /* its lease */
	struct iod_agent_rec *rec; /* its reconciler */
	uint64_t rec_at;           /* when the reconciler's timer is due (UINT64_MAX: none) */
	uint64_t rec_token;        /* the pending timer's token */
	struct proc proc[IOD_SIMC_NODE_REPLICAS_MAX]; /* per reconciler slot */
	double speed[64];                             /* per GPU compute time factor (>= 1) */
	uint32_t nics_down;                           /* its failed NICs */
	bool cut;                                     /* lost its last NIC: cut off */
};

/* J_STALL: the ring waits on a black-holed path (a link fault) */
enum job_state { J_PENDING, J_WAIT, J_RESTORE, J_RUN, J_CKPT, J_STALL, J_DONE };

struct rank {
	uint32_t node; /* node index */
	uint32_t gpu;  /* GPU index on it */
};

/* What a write is for: its continuation when it commits. */
enum prop_kind { P_GRANT, P_NODE, P_RENEW, P_EXPIRE, P_REFRESH, P_DEPLOY, P_MOVE };

struct sim;
/* One control-plane write in flight. */
struct prop {
	bool used;                   /* slot taken */
	bool waiting;                /* no leader yet: submit when there is one */
	enum prop_kind kind;         /* continuation */
	uint32_t arg;                /* node index */
	uint64_t data;               /* node generation, term */
	char name[IOD_NAME_MAX];     /* the replica a move writes */
	char *cmd;                   /* the command until submitted */
	struct raft_apply req;       /* Raft's request */
	struct sim *s;               /* owner */
	int status;                  /* Raft's status (0 applied) */
	struct iod_state_result res; /* the state machine's result */
};

/* One control-plane server: the state machine as a raft FSM. */
struct srv {
	struct raft_fsm fsm;          /* what raft calls */
	struct iod_state_fsm_ctx ctx; /* its iod_state */
};

/* An acknowledged Replica write: its revision must survive (V6). */
struct ack {
	char name[IOD_NAME_MAX]; /* replica */
	uint64_t rev;            /* revision it was acknowledged at */
};
struct sim {
	const struct iod_simc_config *c;
	struct iod_simc_result *r;
	struct iod_simc_timers t;                       /* the timers in force */
	struct iod_sim_queue q;                         /* pending events */
	uint64_t now;                                   /* virtual time */
	struct iod_rng rng_start, rng_fault, rng_place; /* forks of the seed */
	struct iod_state *st;                           /* the control plane's state */
	struct iod_topo_node *topo;                     /* every node's hardware (one model) */
	struct node *nodes;                             /* c->nodes */
	uint32_t gpn;                                   /* GPUs per node (the model's) */
	uint32_t nics;                                  /* NICs per node the collective uses */
	struct iod_agent_replica *want;                 /* scratch for desired sets */
	gnutls_hash_hd_t sha;                           /* the event log's hash */
	struct iod_buf log;                             /* the log text (keep_log) */
	char line[512];                                 /* one log line */
	int err;                                        /* first fatal error */
	struct iod_err *e;                              /* its message */
	/* the job */
	enum job_state js;
	uint64_t epoch;                                     /* bumped at every interruption */
	uint32_t replicas;                                  /* the job's replicas */
	uint32_t gpr;                                       /* GPUs per replica */
	uint64_t steps_total, steps_done, ckpt_steps;       /* progress, last checkpoint */
	uint64_t chunk_steps;                               /* steps in the running chunk */
	uint64_t chunk_start;                               /* when it started */
	double chunk_step_s, chunk_exposed_s, chunk_comm_s; /* one step of the chunk */
	/* the ring's inter-node part, for packet-level samples: the nodes in
	 * ring order (each sends S/n to the next per step), the ranks, the
	 * slowest intra-node edge's step */
	uint32_t *ring_nodes, ring_m, ring_n;
	double ring_intra_step_s, ring_last_ratio;
	/* calibration: per link class, packet-level step / alpha-beta step (1:
	 * none yet); the NIC steps of the flow model are scaled by it. Only NIC
	 * edges are packet-simulated, so only that class learns. */
	double link_cal[IOD_SIMC_LINK_CLASSES];
	double ring_nic_step_ab_s; /* the slowest NIC edge's step, alpha-beta, uncalibrated */
	double comm_ab_s;          /* the placement's all-reduce, alpha-beta, uncalibrated */
	struct iod_rng rng_pkt;    /* the fabric simulator's seeds */
	double step_s, compute_s, exposed_s, comm_s; /* the current placement's step */
	double compute_sum_s;                        /* sum over ranks of per-step compute */
	uint32_t nranks;                             /* ranks of the current placement */
	double nic_bytes_step;                       /* NIC bytes per step, all nodes */
	uint32_t nodes_used;                         /* nodes of the current placement */
	uint64_t ckpt_bytes;                         /* one checkpoint */
	bool have_ckpt;                              /* a checkpoint exists */
	bool first_placed;                           /* result's placement filled */
	double gpu_busy_s, gpu_compute_s, nic_bytes, comm_busy_s; /* totals */
	double nic_bytes_per_node; /* NIC bytes, per node of the placement at the time */
	/* the recovery being measured */
	bool rec_open;
	struct iod_simc_recovery cur;
	uint64_t t_detect, t_decide, t_start; /* absolute phase ends */
	uint32_t pending_k8s_evict;           /* evictions scheduled */
	/* the control plane */
	bool raft;                                      /* servers on the fixture (else direct) */
	struct raft_fixture f;                          /* the servers */
	struct srv srv[IOD_SIMC_SERVERS_MAX];           /* their FSMs */
	struct iod_simdisk *disk[IOD_SIMC_SERVERS_MAX]; /* their logs in wal.c (disk faults) */
	bool disks;                                     /* disk faults: the mirror runs */
	uint64_t *committed;        /* disk faults: Raft indexes of writes answered OK (ACKS_MAX) */
	uint32_t committed_n;       /* entries */
	uint32_t nsrv;              /* servers */
	int leader;                 /* index of the leader, -1 none */
	uint64_t leader_term;       /* its term */
	uint64_t leaderless_since;  /* when the last leader was lost (0: has one) */
	struct iod_map term_leader; /* term -> leader id (V6) */
	struct prop *props;         /* IOD_SIMC_PROPS_MAX */
	uint32_t *props_free;       /* free slot stack */
	uint32_t props_free_n;      /* entries on it */
	uint32_t waiting_n;         /* proposals waiting for a leader */
	bool expire_in_flight;      /* a lease_expire is proposed */
	bool refresh_in_flight;     /* a lease_refresh is proposed */
	uint64_t refresh_term;      /* term whose lease_refresh applied */
	bool need_ctrl;             /* replicas wait for capacity: rerun on joins */
	uint64_t sync_at;           /* a sync_all is pending at this time */
	/* the mesh: the job's service as the node proxies see it */
	struct iod_mesh_service *svc; /* endpoints = the job's replicas */
	struct iod_mesh_lb_state lb;  /* the real picker (src/mesh/lb.c) */
	struct iod_mesh_outlier out;  /* the real outlier detection */
	bool lb_built;                /* lb holds tables */
	bool serving;                 /* requests started (the job ran once) */
	struct iod_rng rng_mesh;      /* the picker's randomness */
	struct ack *acks;             /* IOD_SIMC_ACKS_MAX */
	uint32_t acks_n;              /* entries */
};

/* ---- the event log -------------------------------------------------------------- */

static void slog(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void slog(struct sim *s, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(s->line, sizeof(s->line), "%020llu ", (unsigned long long)s->now);
	va_start(ap, fmt);
	n += vsnprintf(s->line + n, sizeof(s->line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(s->line) - 2)
		n = (int)sizeof(s->line) - 2;
	s->line[n++] = '\n';
	s->line[n] = 0;
	gnutls_hash(s->sha, s->line, (size_t)n);
	if (s->c->keep_log)
		iod_buf_append(&s->log, s->line, (size_t)n);
}

static void fail(struct sim *s, int rc, const char *what)
{
	if (!s->err) {
		s->err = rc;
		iod_err_set(s->e, rc, "%s", what);
	}
}

static void push(struct sim *s, uint64_t at, enum ev_kind k, uint32_t arg, uint64_t data)
{
	if (iod_sim_queue_push(&s->q, at, k, arg, data))
		fail(s, -ENOSPC, "the event queue is full (IOD_SIMC_EVENTS_MAX)");
}

static void violation(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(struct sim *s, const char *fmt, ...)
{
	va_list ap;
	if (s->r->invariant_violations++ == 0) {
		va_start(ap, fmt);
		vsnprintf(s->r->invariant_first, sizeof(s->r->invariant_first), fmt, ap);
		va_end(ap);
	}
}

static uint64_t now_ms(const struct sim *s)
{
	return s->now / IOD_NS_PER_MS;
}

/* ---- the control plane -------------------------------------------------------- */

/* The state clients read: the leader's (Raft), else the most advanced live
 * server's, or the one state without Raft. */
static struct iod_state *cp_state(const struct sim *s)
{
	if (!s->raft)
		return s->st;
	if (s->leader >= 0)
		return s->srv[s->leader].ctx.state;
	unsigned best = 0;
	raft_index hi = 0;
	for (unsigned i = 0; i < s->nsrv; i++) {
		struct raft *r = raft_fixture_get((struct raft_fixture *)&s->f, i);
		if (raft_last_applied(r) >= hi) {
			hi = raft_last_applied(r);
			best = i;
		}
	}
	return s->srv[best].ctx.state;
}

static uint64_t fixture_ns(struct sim *s)
{
	uint64_t t = (uint64_t)raft_fixture_time(&s->f) * IOD_NS_PER_MS;
	return t > s->now ? t : s->now;
}

static void apply_cb(struct raft_apply *req, int status, void *result)
{
	struct prop *p = req->data;
	struct sim *s = p->s;
	const struct iod_state_result *res = result;
	p->status = status;
	if (status == 0 && res)
		p->res = *res;
	else
		p->res.code = status ? -EIO : 0;
	push(s, fixture_ns(s), EV_APPLIED, (uint32_t)(p - s->props), 0);
}

static void submit(struct sim *s, struct prop *p)
{
	struct raft *r = raft_fixture_get(&s->f, (unsigned)s->leader);
	struct raft_buffer buf;
	buf.len = strlen(p->cmd);
	buf.base = raft_malloc(buf.len);
	if (!buf.base) {
		fail(s, -ENOMEM, "out of memory");
		return;
	}
	memcpy(buf.base, p->cmd, buf.len);
	p->req.data = p;
	if (raft_apply(r, &p->req, &buf, 1, apply_cb) != 0) {
		raft_free(buf.base);
		p->status = -EIO;
		p->res.code = -EIO;
		push(s, s->now, EV_APPLIED, (uint32_t)(p - s->props), 0);
	}
	free(p->cmd);
	p->cmd = NULL;
	p->waiting = false;
}

/* Propose cmd (taken); its continuation runs when it commits or fails. */
static void propose(struct sim *s, char *cmd, enum prop_kind kind, uint32_t arg, uint64_t data,
                    const char *name)
{
	if (!cmd) {
		fail(s, -ENOMEM, "out of memory building a command");
		return;
	}
	if (!s->props_free_n) {
		free(cmd);
		fail(s, -ENOSPC, "too many control-plane writes in flight (IOD_SIMC_PROPS_MAX)");
		return;
	}
	uint32_t id = s->props_free[--s->props_free_n];
	struct prop *p = &s->props[id];
	memset(p, 0, sizeof(*p));
	p->used = true;
	p->kind = kind;
	p->arg = arg;
	p->data = data;
	p->s = s;
	p->cmd = cmd;
	if (name)
		snprintf(p->name, sizeof(p->name), "%s", name);
	if (!s->raft) {
		push(s, s->now + s->t.commit_ns, EV_COMMIT, id, 0);
	} else if (s->leader >= 0) {
		submit(s, p);
	} else {
		p->waiting = true;
		s->waiting_n++;
	}
}

static void prop_release(struct sim *s, struct prop *p)
{
	free(p->cmd);
	p->cmd = NULL;
	p->used = false;
	s->props_free[s->props_free_n++] = (uint32_t)(p - s->props);
}

static void ack(struct sim *s, const char *name, uint64_t rev)
{
	s->r->writes_acked++;
	if (name && s->acks_n < IOD_SIMC_ACKS_MAX) {
		snprintf(s->acks[s->acks_n].name, sizeof(s->acks[0].name), "%s", name);
		s->acks[s->acks_n++].rev = rev;
	}
}

/* After a step: each live server's log into wal.c; a server back from a
 * disk fault that applied what was committed then has caught up. */
static void disks_step(struct sim *s)
{
	for (unsigned i = 0; i < s->nsrv; i++) {
		struct raft *r = raft_fixture_get(&s->f, i);
		if (!raft_fixture_alive(&s->f, i) || !iod_simdisk_up(s->disk[i]))
			continue;
		int rc = iod_simdisk_sync(s->disk[i], r);
		if (rc) {
			fail(s, rc, "the simulated disk's log (wal.c) failed a write");
			return;
		}
	}
	for (uint32_t k = 0; k < s->r->disk_n; k++) {
		struct iod_simc_disk *d = &s->r->disk[k];
		struct raft *r = raft_fixture_get(&s->f, d->server);
		if (d->back_ns && !d->caught_up_ns && raft_fixture_alive(&s->f, d->server) &&
		    raft_last_applied(r) >= d->target_index) {
			d->caught_up_ns = fixture_ns(s) - d->at_ns;
			slog(s, "server %u caught up index=%llu", d->server,
			     (unsigned long long)d->target_index);
		}
	}
}

/* One fixture step, then who leads (V6: one leader per term). */
static void cp_step(struct sim *s)
{
	raft_fixture_step(&s->f);
	if (s->disks)
		disks_step(s);
	int lead = -1;
	for (unsigned i = 0; i < s->nsrv; i++) {
		struct raft *r = raft_fixture_get(&s->f, i);
		if (!raft_fixture_alive(&s->f, i) || raft_state(r) != RAFT_LEADER)
			continue;
		uint64_t prev = 0;
		if (iod_map_get(&s->term_leader, r->current_term, &prev) == 0) {
			if (prev != r->id)
				violation(s, "two leaders in term %llu: %llu and %llu",
				          (unsigned long long)r->current_term,
				          (unsigned long long)prev, (unsigned long long)r->id);
		} else {
			iod_map_put(&s->term_leader, r->current_term, r->id);
		}
		if (lead < 0 ||
		    r->current_term > raft_fixture_get(&s->f, (unsigned)lead)->current_term)
			lead = (int)i;
	}
	if (lead == s->leader)
		return;
	uint64_t t = fixture_ns(s);
	if (lead < 0) {
		s->leaderless_since = t ? t : 1;
		slog(s, "raft leader lost");
	} else {
		struct raft *r = raft_fixture_get(&s->f, (unsigned)lead);
		s->r->elections++;
		if (s->leaderless_since && t - s->leaderless_since > s->r->leaderless_ns_max)
			s->r->leaderless_ns_max = t - s->leaderless_since;
		s->leaderless_since = 0;
		s->leader_term = r->current_term;
		slog(s, "raft leader server=%d term=%llu", lead,
		     (unsigned long long)r->current_term);
	}
	s->leader = lead;
	for (uint32_t i = 0; lead >= 0 && s->waiting_n && i < IOD_SIMC_PROPS_MAX; i++)
		if (s->props[i].used && s->props[i].waiting) {
			s->waiting_n--;
			submit(s, &s->props[i]);
		}
}

static int cp_init(struct sim *s, struct iod_err *e)
{
	const struct iod_simc_config *c = s->c;
	struct raft_configuration conf;
	struct iod_rng rng;
	s->leader = -1;
	s->props = calloc(IOD_SIMC_PROPS_MAX, sizeof(*s->props));
	s->props_free = calloc(IOD_SIMC_PROPS_MAX, sizeof(*s->props_free));
	s->acks = calloc(IOD_SIMC_ACKS_MAX, sizeof(*s->acks));
	if (!s->props || !s->props_free || !s->acks)
		return iod_err_set(e, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < IOD_SIMC_PROPS_MAX; i++)
		s->props_free[s->props_free_n++] = IOD_SIMC_PROPS_MAX - 1 - i;
	if (iod_map_init(&s->term_leader, 64, 0))
		return iod_err_set(e, -ENOMEM, "out of memory");
	if (c->servers == 0) {
		s->refresh_term = 1; /* one machine, one term */
		s->leader_term = 1;
		return iod_state_new(&s->st) ? iod_err_set(e, -ENOMEM, "out of memory") : 0;
	}
	if (c->servers > IOD_SIMC_SERVERS_MAX)
		return iod_err_set(e, -EINVAL, "servers must be 0..%d", IOD_SIMC_SERVERS_MAX);
	if (!s->t.election_ms || !s->t.heartbeat_ms)
		return iod_err_set(e, -EINVAL, "the timers have no Raft election/heartbeat");
	s->raft = true;
	s->nsrv = c->servers;
	iod_rng_seed(&rng, c->seed ^ 0x7261667466697874ull);
	if (raft_fixture_initialize(&s->f))
		return iod_err_set(e, -ENOMEM, "raft fixture: out of memory");
	for (unsigned i = 0; i < s->nsrv; i++) {
		struct srv *v = &s->srv[i];
		if (iod_state_new(&v->ctx.state))
			return iod_err_set(e, -ENOMEM, "out of memory");
		iod_state_fsm_init(&v->fsm, &v->ctx);
		if (raft_fixture_grow(&s->f, &v->fsm))
			return iod_err_set(e, -ENOMEM, "raft fixture: cannot add a server");
		/* randomised in [T, 2T] as raft does */
		raft_fixture_set_randomized_election_timeout(
		    &s->f, i, s->t.election_ms + (unsigned)iod_rng_below(&rng, s->t.election_ms));
		raft_fixture_set_network_latency(&s->f, i,
		                                 c->net_latency_ms ? c->net_latency_ms : 1);
		raft_fixture_set_disk_latency(&s->f, i,
		                              c->disk_latency_ms ? c->disk_latency_ms : 1);
		struct raft *r = raft_fixture_get(&s->f, i);
		raft_set_election_timeout(r, s->t.election_ms);
		raft_set_heartbeat_timeout(r, s->t.heartbeat_ms);
		raft_set_pre_vote(r, true);
		/* snapshots far more often than the server's 8192 entries: the
		 * fixture copies the leader's whole log at every step, so a long
		 * log costs time quadratically; a snapshot moves no event */
		raft_set_snapshot_threshold(r, 64);
		raft_set_snapshot_trailing(r, 16);
	}
	raft_configuration_init(&conf);
	if (raft_fixture_configuration(&s->f, s->nsrv, &conf) ||
	    raft_fixture_bootstrap(&s->f, &conf) || raft_fixture_start(&s->f)) {
		raft_configuration_close(&conf);
		return iod_err_set(e, -EIO, "raft fixture: bootstrap failed");
	}
	raft_configuration_close(&conf);
	s->leaderless_since = 1;
	for (uint32_t i = 0; i < c->faults_n; i++)
		if (c->faults[i].kind == IOD_SIMC_FAULT_DISK) {
			if (c->faults[i].node >= s->nsrv)
				return iod_err_set(e, -EINVAL,
				                   "disk fault on server %u: there are %u",
				                   c->faults[i].node, s->nsrv);
			s->disks = true;
		}
	if (s->disks && !(s->committed = calloc(IOD_SIMC_ACKS_MAX, sizeof(*s->committed))))
		return iod_err_set(e, -ENOMEM, "out of memory");
	for (unsigned i = 0; s->disks && i < s->nsrv; i++) {
		char dir[32];
		snprintf(dir, sizeof(dir), "d%u", i + 1);
		/* small segments: a simulated log has closed ones to damage */
		if (iod_simdisk_new(&s->disk[i], dir, 16384) || iod_simdisk_open(s->disk[i], e))
			return iod_err_set(e, -ENOMEM, "out of memory (a simulated disk)");
		if (iod_simdisk_sync(s->disk[i], raft_fixture_get(&s->f, i)))
			return iod_err_set(e, -EIO,
			                   "the simulated disk's log failed its bootstrap");
	}
	return 0;
}

static void cp_close(struct sim *s)
{
	for (uint32_t i = 0; s->props && i < IOD_SIMC_PROPS_MAX; i++)
		free(s->props[i].cmd);
	if (s->raft) {
		raft_fixture_close(&s->f);
		for (unsigned i = 0; i < s->nsrv; i++) {
			iod_state_free(s->srv[i].ctx.state);
			iod_simdisk_free(s->disk[i]);
		}
	} else if (s->st) {
		iod_state_free(s->st);
	}
	s->st = NULL;
	iod_map_destroy(&s->term_leader);
	free(s->props);
	free(s->props_free);
	free(s->acks);
	free(s->committed);
}

/* ---- the job's step model -------------------------------------------------------- */

static int rank_cmp(const void *a, const void *b)
{
	const struct rank *x = a, *y = b;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return x->gpu < y->gpu ? -1 : x->gpu > y->gpu;
}

static double node_nic_Bps(const struct iod_topo_node *t)
{
	return iod_simc_node_nic_Bps(t);
}

/* Node ni's NIC rate with its failed NICs left out (the NICs are alike). */
static double node_nic_up_Bps(const struct sim *s, uint32_t ni)
{
	uint32_t down = IOD_MIN(s->nodes[ni].nics_down, s->nics);
	return s->nics ? node_nic_Bps(s->topo) * (double)(s->nics - down) / s->nics : 0;
}

/* Node names are "n<index>" (setup names them): parsed, not searched. */
static uint32_t node_index(const struct sim *s, const char *name)
{
	uint32_t i = 0;
	if (!name || name[0] != 'n' || !name[1])
		return UINT32_MAX;
	for (const char *p = name + 1; *p; p++) {
		if (*p < '0' || *p > '9' || i > IOD_SIMC_NODES_MAX)
			return UINT32_MAX;
		i = i * 10 + (uint32_t)(*p - '0');
	}
	return i < s->c->nodes && !strcmp(s->nodes[i].name, name) ? i : UINT32_MAX;
}

/*
 * The step of the placement now in the state: ranks from the job's
 * Replica objects, ordered node by node (NCCL builds its rings inside a
 * node first), edges from the topology, compute from the calibration.
 */
static int step_model(struct sim *s, bool describe)
{
	const struct iod_simc_config *c = s->c;
	const struct iod_simc_model *m = iod_simc_model_find(c->job.model);
	const char *gk = iod_simc_gpu_key(s->topo->devices[s->topo->gpu[0]].model);
	const struct iod_simc_calib *cal = iod_simc_calib_find(c->job.model, gk, c->job.prec);
	/* an imported workload needs no calibration row; its batch is the job's,
	 * else 256 per GPU */
	uint32_t batch = c->job.batch_per_gpu ? c->job.batch_per_gpu
	                 : cal                ? cal->batch_per_gpu
	                                      : 256;
	struct rank *rk = calloc(c->job.gpus, sizeof(*rk));
	struct iod_simc_edge *ed = calloc(c->job.gpus, sizeof(*ed));
	uint32_t n = 0, cls_n[IOD_SIMC_LINK_CLASSES] = {0};
	bool used[IOD_SIMC_NODES_MAX] = {0};
	if (!rk || !ed) {
		free(rk);
		free(ed);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->replicas; i++) {
		char name[IOD_NAME_MAX + 16];
		snprintf(name, sizeof(name), "%s-%u", c->job.name, i);
		const json_t *v = iod_state_value(cp_state(s), IOD_STATE_REPLICA, name);
		const char *node = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
		const char *gpus = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_GPUS);
		uint32_t ni = node_index(s, node), mask = gpus ? iod_sched_mask_parse(gpus) : 0;
		if (ni == UINT32_MAX)
			continue;
		for (uint32_t g = 0; g < 32 && n < c->job.gpus; g++)
			if (mask & (1u << g))
				rk[n++] = (struct rank){ni, g};
	}
	qsort(rk, n, sizeof(*rk), rank_cmp);
	double cmax = 0, csum = 0, nic_bytes = 0;
	bool imported = c->job.step_compute_s > 0; /* an ASTRA-sim workload */
	uint64_t S = imported ? c->job.grad_bytes : m->params * m->grad_bytes;
	double c1 = imported ? c->job.step_compute_s : (double)batch / cal->items_per_s_1gpu;
	for (uint32_t i = 0; i < n; i++) {
		const struct rank *a = &rk[i], *b = &rk[(i + 1) % n];
		double ci = c1 * s->nodes[a->node].speed[a->gpu];
		cmax = ci > cmax ? ci : cmax;
		csum += ci;
		used[a->node] = true;
		if (a->node == b->node) {
			iod_simc_edge_gpus(s->topo, a->gpu, b->gpu, &c->alpha, &ed[i]);
		} else {
			ed[i].cls = IOD_SIMC_LINK_NIC;
			ed[i].bw_Bps = c->nic_efficiency * IOD_MIN(node_nic_up_Bps(s, a->node),
			                                           node_nic_up_Bps(s, b->node));
			ed[i].alpha_s = c->alpha.s[IOD_SIMC_LINK_NIC];
			/* ring all-reduce: each edge carries 2(n-1)/n * S */
			nic_bytes += 2.0 * (n - 1) / n * (double)S;
		}
		cls_n[ed[i].cls]++;
	}
	if (n < 2) { /* a single rank: no ring */
		for (uint32_t i = 0; i < n; i++)
			cls_n[ed[i].cls] = 0;
	}
	s->comm_ab_s = n >= 2 ? iod_simc_ring_allreduce_s(ed, n, S) : 0;
	s->ring_nic_step_ab_s = 0;
	for (uint32_t i = 0; n >= 2 && i < n; i++)
		if (ed[i].cls == IOD_SIMC_LINK_NIC && ed[i].bw_Bps > 0) {
			s->ring_nic_step_ab_s = IOD_MAX(
			    s->ring_nic_step_ab_s, ed[i].alpha_s + (double)S / n / ed[i].bw_Bps);
			/* the packet samples' correction: the edge's step times f */
			double f = s->link_cal[IOD_SIMC_LINK_NIC];
			if (c->calibrate && f > 0) {
				ed[i].alpha_s *= f;
				ed[i].bw_Bps /= f;
			}
		}
	double comm = iod_simc_ring_allreduce_s(ed, n, S);
	double last = iod_simc_ring_allreduce_s(ed, n, IOD_MIN(c->bucket_bytes, S));
	/* the ring's inter-node part for packet-level samples: ranks are in
	 * node order, so each NIC edge leaves a node once */
	s->ring_m = 0;
	s->ring_n = n;
	s->ring_intra_step_s = 0;
	s->ring_last_ratio = comm > 0 ? last / comm : 0;
	for (uint32_t i = 0; n >= 2 && i < n; i++) {
		if (ed[i].cls == IOD_SIMC_LINK_NIC && s->ring_m < c->nodes)
			s->ring_nodes[s->ring_m++] = rk[i].node;
		else if (ed[i].cls != IOD_SIMC_LINK_NIC && ed[i].bw_Bps > 0)
			s->ring_intra_step_s = IOD_MAX(
			    s->ring_intra_step_s, ed[i].alpha_s + (double)S / n / ed[i].bw_Bps);
	}
	double bwd = cmax * 2.0 / 3.0; /* backward is about twice the forward */
	double exposed = comm - c->overlap * bwd;
	exposed = exposed > last ? exposed : last;
	if (n < 2)
		exposed = comm = 0;
	s->nranks = n;
	s->compute_s = cmax;
	s->compute_sum_s = csum;
	s->comm_s = comm;
	s->exposed_s = exposed;
	s->step_s = cmax + exposed;
	s->nic_bytes_step = n >= 2 ? nic_bytes : 0;
	s->nodes_used = 0;
	for (uint32_t i = 0; i < c->nodes && i < IOD_SIMC_NODES_MAX; i++)
		s->nodes_used += used[i];
	s->ckpt_bytes = m->params * 12; /* FP32 weights + momentum + AMP master copy */
	if (!s->steps_total) {
		uint64_t per_step = (uint64_t)batch * c->job.gpus;
		s->steps_total = c->job.steps
		                     ? c->job.steps
		                     : (uint64_t)ceil(c->job.epochs * (double)m->dataset_items /
		                                      (double)per_step);
	}
	if (describe) {
		struct iod_simc_result *r = s->r;
		r->step_s = s->step_s;
		r->compute_s = cmax;
		r->comm_s = comm;
		r->exposed_comm_s = exposed;
		r->items_per_s = s->step_s > 0 ? (double)batch * n / s->step_s : 0;
		r->busbw_Bps = iod_simc_busbw(S, comm, n);
		r->net_line_gbps = node_nic_Bps(s->topo) * 8 / 1e9;
		r->nodes_used = s->nodes_used;
		int k = 0;
		r->ring[0] = 0;
		for (int cl = 0; cl < IOD_SIMC_LINK_CLASSES; cl++)
			if (cls_n[cl])
				k += snprintf(r->ring + k, sizeof(r->ring) - (size_t)k, "%s%s x%u",
				              k ? ", " : "", iod_simc_link_name(cl), cls_n[cl]);
	}
	slog(s, "step ranks=%u nodes=%u compute_ns=%.0f comm_ns=%.0f exposed_ns=%.0f", n,
	     s->nodes_used, cmax * 1e9, comm * 1e9, exposed * 1e9);
	free(rk);
	free(ed);
	return 0;
}

/* ---- the job ---------------------------------------------------------------------- */

static bool all_ranks_running(struct sim *s)
{
	for (uint32_t i = 0; i < s->replicas; i++) {
		char name[IOD_NAME_MAX + 16];
		snprintf(name, sizeof(name), "%s-%u", s->c->job.name, i);
		const json_t *v = iod_state_value(cp_state(s), IOD_STATE_REPLICA, name);
		uint32_t ni =
		    node_index(s, iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE));
		if (ni == UINT32_MAX || !s->nodes[ni].up)
			return false;
		struct node *nd = &s->nodes[ni];
		bool found = false;
		for (uint32_t k = 0; k < IOD_SIMC_NODE_REPLICAS_MAX && !found; k++)
			found = nd->proc[k].alive && !strcmp(nd->proc[k].name, name);
		if (!found)
			return false;
	}
	return s->replicas > 0;
}

/*
 * One iteration's ring all-reduce, its inter-node steps packet by packet:
 * one host per node of the ring behind one switch, each host's link at its
 * NIC line rate (the failed NICs left out) with half the NIC alpha as
 * propagation each way; every host sends S/n to the next at once (one ring
 * step: the steps are alike and in lockstep on a contention-free fabric,
 * so one is run and counted 2(n-1) times). A step takes the slower of the
 * last byte received and the slowest intra-node edge (alpha-beta: NVLink
 * and PCIe are not in the fabric simulator). Seconds, or -1 when the
 * fabric simulator failed (the alpha-beta figure is kept then).
 */
static double packet_allreduce_s(struct sim *s, double *nic_step_s)
{
	const struct iod_simc_config *c = s->c;
	const struct iod_simc_model *m = iod_simc_model_find(c->job.model);
	uint64_t S = c->job.step_compute_s > 0 ? c->job.grad_bytes : m->params * m->grad_bytes;
	uint64_t chunk = S / s->ring_n;
	uint32_t hm = s->ring_m, sw = 0, idx = 0;
	struct iod_sim_topo t;
	struct iod_sim_config sc;
	struct iod_sim *fab = NULL;
	struct iod_err e = {0};
	char name[IOD_NAME_MAX];
	double step = -1;
	int rc;
	iod_sim_topo_init(&t);
	rc = iod_sim_topo_add_node(&t, "sw", IOD_SIM_SWITCH, &sw, &e);
	for (uint32_t j = 0; !rc && j < hm; j++) {
		snprintf(name, sizeof(name), "h%u", j);
		uint64_t bps = (uint64_t)(node_nic_up_Bps(s, s->ring_nodes[j]) * 8);
		rc = iod_sim_topo_add_node(&t, name, IOD_SIM_HOST, &idx, &e);
		if (!rc)
			rc = iod_sim_topo_add_link(
			    &t, idx, sw, bps,
			    (uint64_t)llround(c->alpha.s[IOD_SIMC_LINK_NIC] * 1e9 / 2), &e);
	}
	iod_sim_config_default(&sc);
	sc.seed = iod_rng_next(&s->rng_pkt);
	sc.flows_max = hm;
	sc.packets_max = hm * 512 + 4096;
	if (!rc)
		rc = iod_sim_create(&fab, &t, &sc, &e);
	for (uint32_t j = 0; !rc && j < hm; j++)
		rc = iod_sim_flow_add(fab, j, (j + 1) % hm, chunk, 0, j + 1, NULL, &e);
	if (!rc)
		rc = iod_sim_run(fab, UINT64_MAX, &e);
	if (!rc && iod_sim_flows_done(fab) == hm) {
		uint64_t last = 0;
		for (uint32_t j = 0; j < hm; j++)
			last = IOD_MAX(last, iod_sim_flow(fab, j)->rcv_done_ns);
		*nic_step_s = (double)last / 1e9;
		step = IOD_MAX(*nic_step_s, s->ring_intra_step_s);
		s->r->packet_events += iod_sim_events(fab);
	}
	if (fab)
		iod_sim_destroy(fab);
	iod_sim_topo_free(&t);
	if (rc)
		slog(s, "packet sample failed: %s", e.msg);
	return step < 0 ? -1 : 2.0 * (s->ring_n - 1) * step;
}

static void next_chunk(struct sim *s)
{
	uint64_t left = s->steps_total - s->steps_done, k = left;
	uint32_t every = s->c->packet_every;
	if (s->c->job.ckpt_every_steps) {
		uint64_t to_ckpt =
		    s->c->job.ckpt_every_steps - s->steps_done % s->c->job.ckpt_every_steps;
		k = IOD_MIN(k, to_ckpt);
	}
	s->chunk_step_s = s->step_s;
	s->chunk_exposed_s = s->exposed_s;
	s->chunk_comm_s = s->comm_s;
	if (every && s->ring_m >= 2 && s->steps_done % every == 0) {
		/* a sampled iteration: its all-reduce packet by packet */
		double nic_step = 0, pc = packet_allreduce_s(s, &nic_step);
		k = 1;
		if (pc >= 0) {
			struct iod_simc_result *r = s->r;
			double bwd = s->compute_s * 2.0 / 3.0;
			double ex = IOD_MAX(pc - s->c->overlap * bwd, pc * s->ring_last_ratio);
			double ab = s->comm_ab_s;
			double d = ab > 0 ? fabs(pc - ab) / ab * 100 : 0;
			r->packet_comm_s +=
			    (pc - r->packet_comm_s) / (double)(r->packet_samples + 1);
			r->flow_comm_s += (ab - r->flow_comm_s) / (double)(r->packet_samples + 1);
			r->packet_samples++;
			r->packet_diff_pct_max = IOD_MAX(r->packet_diff_pct_max, d);
			if (s->c->calibrate && s->link_cal[IOD_SIMC_LINK_NIC] > 0) {
				/* what the calibrated model predicted for this sample */
				double dc =
				    s->comm_s > 0 ? fabs(pc - s->comm_s) / s->comm_s * 100 : 0;
				double w = (double)(r->calib_samples + 1);
				r->calib_comm_s += (s->comm_s - r->calib_comm_s) / w;
				r->calib_packet_s += (pc - r->calib_packet_s) / w;
				r->calib_abs_pct += (dc - r->calib_abs_pct) / w;
				r->calib_samples++;
				r->calib_diff_pct_max = IOD_MAX(r->calib_diff_pct_max, dc);
			}
			s->chunk_comm_s = pc;
			s->chunk_exposed_s = ex;
			s->chunk_step_s = s->compute_s + ex;
			slog(s, "packet sample step=%llu comm_ns=%.0f flow_comm_ns=%.0f",
			     (unsigned long long)s->steps_done, pc * 1e9, s->comm_s * 1e9);
			if (s->c->calibrate && s->ring_nic_step_ab_s > 0 && nic_step > 0) {
				/* learn: the NIC class's packet / alpha-beta step ratio,
				 * an average with weight 1/2 on the newest sample (a
				 * placement or NIC change moves it within two samples) */
				double ratio = nic_step / s->ring_nic_step_ab_s,
				       *f = &s->link_cal[IOD_SIMC_LINK_NIC];
				*f = *f > 0 ? (*f + ratio) / 2 : ratio;
				r->nic_cal = *f;
				if (step_model(s, false))
					fail(s, -ENOMEM, "out of memory");
			}
		}
	} else if (every && s->ring_m >= 2) {
		k = IOD_MIN(k, every - s->steps_done % every);
	}
	s->chunk_steps = k;
	s->chunk_start = s->now;
	push(s, s->now + (uint64_t)llround((double)k * s->chunk_step_s * 1e9), EV_CHUNK, 0,
	     s->epoch);
}

/* Account k steps of the running chunk (done or lost) to the totals. */
static void account(struct sim *s, double k)
{
	s->gpu_compute_s += k * s->compute_sum_s;
	s->gpu_busy_s += k * (s->compute_sum_s + s->nranks * s->chunk_exposed_s);
	s->nic_bytes += k * s->nic_bytes_step;
	s->nic_bytes_per_node += s->nodes_used ? k * s->nic_bytes_step / s->nodes_used : 0;
	s->comm_busy_s += k * s->chunk_comm_s;
}

static void close_recovery(struct sim *s)
{
	struct iod_simc_result *r = s->r;
	if (!s->rec_open)
		return;
	s->cur.restore_ns = s->now - s->t_start;
	s->cur.rework_ns = (uint64_t)llround((double)s->cur.steps_lost * s->step_s * 1e9);
	if (r->rec_n < IOD_SIMC_RECOVERIES_MAX)
		r->rec[r->rec_n++] = s->cur;
	slog(s,
	     "recovered kind=%s detect_ns=%llu decide_ns=%llu start_ns=%llu restore_ns=%llu "
	     "steps_lost=%llu",
	     iod_simc_fault_name(s->cur.kind), (unsigned long long)s->cur.detect_ns,
	     (unsigned long long)s->cur.decide_ns, (unsigned long long)s->cur.start_ns,
	     (unsigned long long)s->cur.restore_ns, (unsigned long long)s->cur.steps_lost);
	s->rec_open = false;
}

/* Called after anything that may start or stop ranks. */
static void job_update(struct sim *s)
{
	bool all = all_ranks_running(s);
	if ((s->js == J_RUN || s->js == J_CKPT || s->js == J_RESTORE || s->js == J_STALL) && !all) {
		uint64_t lost = s->steps_done - s->ckpt_steps;
		if (s->js == J_RUN) { /* the chunk's finished steps were computed, then lost */
			double part =
			    floor((double)(s->now - s->chunk_start) / 1e9 / s->chunk_step_s);
			account(s, part);
			lost += (uint64_t)part;
		}
		s->steps_done = s->ckpt_steps;
		s->epoch++;
		s->js = J_WAIT;
		if (s->rec_open)
			s->cur.steps_lost = lost;
		slog(s, "job interrupted steps_done=%llu lost=%llu",
		     (unsigned long long)s->steps_done, (unsigned long long)lost);
	} else if (s->js == J_WAIT && all) {
		if (step_model(s, !s->first_placed))
			fail(s, -ENOMEM, "out of memory");
		s->first_placed = true;
		s->js = J_RESTORE;
		double rs = s->have_ckpt ? (double)s->ckpt_bytes / s->c->ckpt_Bps : 0;
		if (s->rec_open) {
			s->t_start = s->now;
			s->cur.start_ns = s->now - (s->t_decide ? s->t_decide : s->t_detect);
		}
		slog(s, "job ranks up restore_ns=%.0f", rs * 1e9);
		push(s, s->now + (uint64_t)llround(rs * 1e9), EV_RESTORED, 0, s->epoch);
	}
}

/* ---- the control plane's lists (cached per revision) ------------------------------- */

struct lists {
	uint64_t rev;                        /* state revision they show */
	json_t *nodes, *services, *replicas; /* iod_state_list results */
};
static struct lists *lists_get(struct sim *s, struct lists *l)
{
	uint64_t rev = iod_state_rev(cp_state(s));
	if (l->nodes && l->rev == rev)
		return l;
	json_decref(l->nodes);
	json_decref(l->services);
	json_decref(l->replicas);
	l->nodes = iod_state_list(cp_state(s), IOD_STATE_NODE);
	l->services = iod_state_list(cp_state(s), IOD_STATE_SERVICE);
	l->replicas = iod_state_list(cp_state(s), IOD_STATE_REPLICA);
	l->rev = rev;
	if (!l->nodes || !l->services || !l->replicas)
		fail(s, -ENOMEM, "out of memory listing the state");
	return l;
}

/* ---- agents ---------------------------------------------------------------------- */

static void rec_run(struct sim *s, uint32_t ni);

static uint64_t start_latency(struct sim *s)
{
	double j = s->c->proc_start_jitter;
	double f = 1.0 + j * (2.0 * iod_rng_double(&s->rng_start) - 1.0);
	return (uint64_t)llround((double)s->c->proc_start_ns * (f > 0 ? f : 0));
}

static void handle_action(struct sim *s, uint32_t ni, const struct iod_agent_action *a)
{
	struct node *nd = &s->nodes[ni];
	struct proc *p = a->slot < IOD_SIMC_NODE_REPLICAS_MAX ? &nd->proc[a->slot] : NULL;
	uint64_t tag = nd->gen << 16 | a->slot;
	if (!p) {
		fail(s, -E2BIG, "a node holds more replicas than IOD_SIMC_NODE_REPLICAS_MAX");
		return;
	}
	switch (a->kind) {
	case IOD_AGENT_ACT_START:
		snprintf(p->name, sizeof(p->name), "%s", a->name);
		p->starting = true;
		slog(s, "agent %s start %s", nd->name, a->name);
		push(s, s->now + start_latency(s), EV_STARTED, ni, tag);
		break;
	case IOD_AGENT_ACT_STOP:
	case IOD_AGENT_ACT_KILL:
		slog(s, "agent %s %s %s", nd->name, iod_agent_action_name(a->kind), a->name);
		push(s, s->now + (a->kind == IOD_AGENT_ACT_STOP ? IOD_NS_PER_S : 0), EV_EXITED, ni,
		     tag | (uint64_t)(a->kind == IOD_AGENT_ACT_KILL) << 15);
		break;
	case IOD_AGENT_ACT_PROBE:
		iod_agent_rec_on_probe(nd->rec, a->name, true, "simulated", s->now);
		break;
	case IOD_AGENT_ACT_REPORT:
		/* the agent writes the Endpoint; proxies see it a watch later */
		push(s, s->now + s->t.commit_ns + s->t.watch_ns, EV_MESH, 0, 0);
		slog(s, "agent %s report %s phase=%s%s", nd->name, a->name,
		     iod_agent_phase_name(a->phase), a->removed ? " removed" : "");
		break;
	}
}

static void rec_run(struct sim *s, uint32_t ni)
{
	struct node *nd = &s->nodes[ni];
	struct iod_agent_action acts[IOD_AGENT_ACTIONS_MAX];
	uint32_t n = 0;
	uint64_t next = UINT64_MAX;
	if (!nd->up)
		return;
	for (int round = 0; round < 8; round++) {
		iod_agent_rec_step(nd->rec, s->now, acts, IOD_AGENT_ACTIONS_MAX, &n, &next);
		for (uint32_t i = 0; i < n; i++)
			handle_action(s, ni, &acts[i]);
		if (next != s->now)
			break;
	}
	if (next != UINT64_MAX && next < nd->rec_at) {
		nd->rec_at = next;
		push(s, next, EV_REC, ni, ++nd->rec_token);
	}
}

static void agent_sync(struct sim *s, uint32_t ni, struct lists *l)
{
	struct node *nd = &s->nodes[ni];
	struct iod_err e = {0};
	uint32_t n = 0;
	if (!nd->up)
		return;
	lists_get(s, l);
	int rc = iod_agent_desired_from_state(nd->name, l->nodes, l->services, l->replicas, NULL,
	                                      s->want, IOD_SIMC_NODE_REPLICAS_MAX, &n, &e);
	if (rc && rc != -E2BIG) {
		fail(s, rc, e.msg);
		return;
	}
	rc = iod_agent_rec_set_desired(nd->rec, s->want, n, s->now, &e);
	if (rc && rc != -ENOSPC)
		fail(s, rc, e.msg);
	slog(s, "agent %s desired=%u", nd->name, n);
	rec_run(s, ni);
}

static void sync_all(struct sim *s, uint64_t at)
{
	if (s->sync_at == at)
		return; /* one watch delivery covers every write of that instant */
	s->sync_at = at;
	for (uint32_t i = 0; i < s->c->nodes; i++)
		if (s->nodes[i].up)
			push(s, at, EV_SYNC, i, s->nodes[i].gen);
}

/* ---- placement ------------------------------------------------------------------- */

static char *job_spec(const struct sim *s)
{
	struct iod_buf b;
	iod_buf_init(&b);
	iod_buf_printf(&b,
	               "services:\n  - name: %s\n    type: stateless\n    replicas: %u\n"
	               "    command: iod demo-worker --role worker\n    resources: {gpu: %u}\n",
	               s->c->job.name, s->replicas, s->gpr);
	return b.data;
}

/* GPUs of node ni held by replicas other than skip (a bitmask). */
static uint32_t gpus_held(const json_t *replicas, const char *node, const char *skip)
{
	uint32_t m = 0;
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(replicas, "items"), i, x)
	{
		const char *name = json_string_value(json_object_get(x, "name"));
		const json_t *v = json_object_get(x, "value");
		const char *n = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
		const char *g = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_GPUS);
		if (n && g && !strcmp(n, node) && (!skip || !name || strcmp(name, skip)))
			m |= iod_sched_mask_parse(g);
	}
	return m;
}

/* A Replica object's key for field F (objects.h): the names live there. */
#define REPLICA_KEY(F) iod_obj_key(IOD_OBJ_KIND_REPLICA, IOD_OBJ_REPLICA_##F)

/* The GPUs of node ni that replicas other than skip leave free (a bitmask). */
static uint32_t node_free(const struct sim *s, const json_t *replicas, uint32_t ni,
                          const char *skip)
{
	uint32_t held = gpus_held(replicas, s->nodes[ni].name, skip);
	return (s->gpn >= 32 ? UINT32_MAX : ((1u << s->gpn) - 1)) & ~held;
}

/*
 * The kubelet's GPUs for one replica bound to node ni: a random choice of
 * s->gpr among the free ones (the device plugin counts GPUs; Topology
 * Manager "none", no preferred allocation). No CPU, NUMA or NIC pinning.
 */
static void k8s_bind(struct sim *s, json_t *value, uint32_t ni, uint32_t freem)
{
	uint32_t got = 0;
	for (uint32_t k = 0; k < s->gpr; k++) {
		uint32_t left = (uint32_t)__builtin_popcount(freem);
		uint32_t which = (uint32_t)iod_rng_below(&s->rng_place, left);
		for (uint32_t g = 0; g < 32; g++)
			if (freem & (1u << g) && which-- == 0) {
				got |= 1u << g;
				freem &= ~(1u << g);
				break;
			}
	}
	char gl[128];
	iod_sched_mask_format(got, gl, sizeof(gl));
	json_object_set_new(value, REPLICA_KEY(NODE), json_string(s->nodes[ni].name));
	json_object_set_new(value, REPLICA_KEY(GPUS), json_string(gl));
	json_object_set_new(value, REPLICA_KEY(PHASE), json_string("pending"));
	/* no CPU, NUMA, NIC or accelerator pinning, no explanation */
	static const unsigned pinned[] = {
	    IOD_OBJ_REPLICA_CPUS,         IOD_OBJ_REPLICA_CPU_AFFINITY,
	    IOD_OBJ_REPLICA_MEM_NUMA,     IOD_OBJ_REPLICA_NUMA,
	    IOD_OBJ_REPLICA_NIC,          IOD_OBJ_REPLICA_EXPLAIN,
	    IOD_OBJ_REPLICA_ACCELERATORS, IOD_OBJ_REPLICA_ACCELERATOR_DEVICES,
	    IOD_OBJ_REPLICA_LOST_MS,      IOD_OBJ_REPLICA_REASON,
	    IOD_OBJ_REPLICA_REASONS};
	for (size_t k = 0; k < IOD_ARRAY_LEN(pinned); k++)
		json_object_del(value, iod_obj_key(IOD_OBJ_KIND_REPLICA, pinned[k]));
}

/*
 * The Kubernetes default for one replica: every live node with enough free
 * GPUs fits (the device plugin counts GPUs); the scores tie (the default
 * plugins score CPU and memory, not extended resources), so the scheduler
 * picks one of them at random; the kubelet hands out free GPUs in no
 * topology order (k8s_bind).
 */
static int k8s_place(struct sim *s, json_t *value, const json_t *nodes, const json_t *replicas,
                     const char *name)
{
	uint32_t fit[IOD_SIMC_NODES_MAX], nfit = 0, frees[IOD_SIMC_NODES_MAX];
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(nodes, "items"), i, x)
	{
		uint32_t ni = node_index(s, json_string_value(json_object_get(x, "name")));
		if (ni == UINT32_MAX)
			continue;
		uint32_t freem = node_free(s, replicas, ni, name);
		if ((uint32_t)__builtin_popcount(freem) >= s->gpr && nfit < IOD_SIMC_NODES_MAX) {
			frees[nfit] = freem;
			fit[nfit++] = ni;
		}
	}
	if (!nfit)
		return -ENOSPC;
	uint32_t pick = (uint32_t)iod_rng_below(&s->rng_place, nfit);
	k8s_bind(s, value, fit[pick], frees[pick]);
	return 0;
}

int iod_simc_tas_bestfit(const uint32_t *cap, uint32_t n, uint32_t want, uint32_t *take)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		take[i] = 0;
		total += cap[i];
	}
	if (total < want)
		return -ENOSPC;
	while (want) {
		uint32_t fit = UINT32_MAX, big = UINT32_MAX;
		for (uint32_t i = 0; i < n; i++) {
			if (take[i] || !cap[i])
				continue;
			if (cap[i] >= want && (fit == UINT32_MAX || cap[i] < cap[fit]))
				fit = i;
			if (big == UINT32_MAX || cap[i] > cap[big])
				big = i;
		}
		if (fit != UINT32_MAX) {
			take[fit] = want;
			return 0;
		}
		take[big] = cap[big];
		want -= cap[big];
	}
	return 0;
}

/*
 * Kueue's topology-aware scheduling (TAS) for want pods of the job, as one
 * gang: the live nodes' capacity in pods (free GPUs / GPUs per pod), the
 * racks' (node / rack_nodes) the sum of their nodes'. One node that holds
 * them all if any (BestFit: the fullest that fits), else BestFit over the
 * racks, then within each chosen rack over its nodes. prefer, when set,
 * marks racks to try first on their own (a replacement stays in the
 * domain the job's other pods run in, as Kueue's failed-node replacement
 * does); when they cannot hold want, the whole cluster is searched.
 * out[k] gets pod k's node. 0, or -ENOSPC: nothing placed (a gang is
 * admitted whole or not at all).
 */
static int tas_place(struct sim *s, const json_t *nodes, const json_t *replicas, uint32_t want,
                     const bool *prefer, uint32_t *out)
{
	uint32_t n = s->c->nodes, rn = s->c->rack_nodes ? s->c->rack_nodes : 1;
	uint32_t racks = (n + rn - 1) / rn;
	int rc = -ENOSPC;
	uint32_t *cap = calloc(n, sizeof(*cap)), *take = calloc(n, sizeof(*take));
	uint32_t *rcap = calloc(racks, sizeof(*rcap)), *rtake = calloc(racks, sizeof(*rtake));
	if (!cap || !take || !rcap || !rtake)
		goto out;
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(nodes, "items"), i, x)
	{
		uint32_t ni = node_index(s, json_string_value(json_object_get(x, "name")));
		if (ni < n)
			cap[ni] = (uint32_t)__builtin_popcount(node_free(s, replicas, ni, NULL)) /
			          (s->gpr ? s->gpr : 1);
	}
	for (int pass = prefer ? 0 : 1; pass < 2 && rc; pass++) {
		for (uint32_t r = 0; r < racks; r++) {
			rcap[r] = 0;
			for (uint32_t ni = r * rn; ni < n && ni < (r + 1) * rn; ni++)
				rcap[r] += pass == 0 && !prefer[r] ? 0 : cap[ni];
		}
		if (iod_simc_tas_bestfit(rcap, racks, want, rtake))
			continue;
		/* one node anywhere in the allowed racks first (hostname level) */
		uint32_t one = UINT32_MAX;
		for (uint32_t ni = 0; ni < n; ni++)
			if ((pass == 1 || prefer[ni / rn]) && cap[ni] >= want &&
			    (one == UINT32_MAX || cap[ni] < cap[one]))
				one = ni;
		uint32_t k = 0;
		if (one != UINT32_MAX) {
			while (k < want)
				out[k++] = one;
			rc = 0;
			break;
		}
		for (uint32_t r = 0; r < racks; r++) {
			if (!rtake[r])
				continue;
			uint32_t base = r * rn, m = IOD_MIN(n, base + rn) - base;
			if (iod_simc_tas_bestfit(cap + base, m, rtake[r], take + base))
				goto out; /* cannot happen: the rack's sum holds it */
			for (uint32_t j = 0; j < m; j++)
				for (uint32_t t = 0; t < take[base + j]; t++)
					out[k++] = base + j;
		}
		rc = 0;
	}
out:
	free(cap);
	free(take);
	free(rcap);
	free(rtake);
	return rc;
}

static void record_placement(struct sim *s)
{
	struct iod_simc_result *r = s->r;
	r->place_n = 0;
	for (uint32_t i = 0; i < s->replicas && r->place_n < IOD_ARRAY_LEN(r->place); i++) {
		struct iod_simc_place *p = &r->place[r->place_n];
		snprintf(p->replica, sizeof(p->replica), "%s-%u", s->c->job.name, i);
		const json_t *v = iod_state_value(cp_state(s), IOD_STATE_REPLICA, p->replica);
		const char *g = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_GPUS);
		p->node =
		    node_index(s, iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE));
		p->gpus = g ? iod_sched_mask_parse(g) : 0;
		slog(s, "placed %s node=%s gpus=%s", p->replica,
		     p->node == UINT32_MAX ? "-" : s->nodes[p->node].name, g ? g : "-");
		r->place_n++;
	}
}

static void deploy(struct sim *s, struct lists *l)
{
	char *spec = job_spec(s), *cmd = NULL;
	json_t *answer = NULL;
	struct iod_err e = {0};
	int rc = spec ? iod_ctrl_deploy_plan(cp_state(s), spec, strlen(spec), &cmd, &answer, &e)
	              : -ENOMEM;
	free(spec);
	if (rc) {
		json_decref(answer);
		fail(s, rc, e.msg);
		return;
	}
	const json_t *unpl = json_object_get(answer, "unplaced");
	s->r->unplaced = (uint32_t)json_array_size(unpl);
	if (s->r->unplaced) {
		const char *why =
		    json_string_value(json_object_get(json_array_get(unpl, 0), "why"));
		snprintf(s->r->unplaced_why, sizeof(s->r->unplaced_why), "%s", why ? why : "?");
	}
	if (cmd && iod_simc_policy_is_k8s(s->c->policy)) {
		/* the same deploy command with the baseline's placement */
		json_t *j = json_loads(cmd, 0, NULL), *reps = json_object_get(j, "replicas");
		json_t *taken = json_pack("{s:[]}", "items");
		size_t i;
		json_t *x;
		lists_get(s, l);
		s->r->unplaced = 0;
		/* k8s-topo: Kueue TAS admits the job's pods as one gang */
		uint32_t want = (uint32_t)json_array_size(reps);
		uint32_t *at = s->c->policy == IOD_SIMC_POLICY_K8S_TOPO
		                   ? calloc(want ? want : 1, sizeof(*at))
		                   : NULL;
		bool gang = at && !tas_place(s, l->nodes, taken, want, NULL, at);
		if (at && !gang)
			snprintf(s->r->unplaced_why, sizeof(s->r->unplaced_why),
			         "TAS: no set of topology domains holds the %u pods", want);
		json_array_foreach(reps, i, x)
		{
			json_t *v = json_object_get(x, "value");
			const char *name = json_string_value(json_object_get(x, "name"));
			if (gang) {
				k8s_bind(s, v, at[i], node_free(s, taken, at[i], name));
			} else if (at || k8s_place(s, v, l->nodes, taken, name)) {
				s->r->unplaced++;
				json_object_set_new(v, REPLICA_KEY(NODE), json_string(""));
			}
			json_array_append(json_object_get(taken, "items"), x);
		}
		free(at);
		json_decref(taken);
		free(cmd);
		cmd = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(j);
	}
	json_decref(answer);
	if (!cmd) {
		slog(s, "deploy nothing placed: %s", s->r->unplaced_why);
		return;
	}
	propose(s, cmd, P_DEPLOY, 0, 0, NULL);
}

/* Is replica value v bound to a live node (one of l's Node objects)? */
static bool on_live_node(const struct lists *l, const json_t *v)
{
	const char *n = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
	size_t k;
	json_t *y;
	json_array_foreach(
	    json_object_get(l->nodes, "items"), k,
	    y) if (n && !strcmp(n, json_string_value(json_object_get(y, "name")))) return true;
	return false;
}

/* k8s-topo after an eviction: nodes for the pods not on a live node (in
 * list order, *at malloc'd), by TAS, trying first the racks of the job's
 * pods that still run. false: none placed (the gang waits). */
static bool tas_lost(struct sim *s, const struct lists *l, uint32_t **at)
{
	uint32_t rn = s->c->rack_nodes ? s->c->rack_nodes : 1, lost = 0;
	bool *prefer = calloc(s->c->nodes / rn + 1, sizeof(*prefer)), any = false;
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(l->replicas, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		if (!on_live_node(l, v)) {
			lost++;
			continue;
		}
		uint32_t ni =
		    node_index(s, iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE));
		if (prefer && ni < s->c->nodes)
			prefer[ni / rn] = any = true;
	}
	*at = calloc(lost ? lost : 1, sizeof(**at));
	bool ok = *at && prefer && lost &&
	          !tas_place(s, l->nodes, l->replicas, lost, any ? prefer : NULL, *at);
	free(prefer);
	return ok;
}

/* The controller after a node change: iod's rescheduling plan, or (k8s) an
 * eviction once the toleration is over. */
static void controller(struct sim *s, struct lists *l, bool evict_now)
{
	json_t *unplaced = NULL, *w;
	size_t i;
	json_t *x;
	uint32_t moved = 0;
	lists_get(s, l);
	if (iod_simc_policy_is_k8s(s->c->policy) && !evict_now) {
		/* the node is NotReady; pods stay bound until the toleration ends */
		bool lost = false;
		json_array_foreach(json_object_get(l->replicas, "items"), i, x)
		{
			const char *n =
			    iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, json_object_get(x, "value"),
			                     IOD_OBJ_REPLICA_NODE);
			bool live = false;
			size_t k;
			json_t *y;
			json_array_foreach(json_object_get(l->nodes, "items"), k, y) live |=
			    n && !strcmp(n, json_string_value(json_object_get(y, "name")));
			lost |= n && n[0] && !live;
			if (!n || !n[0])
				lost = true; /* a pending pod: the scheduler retries */
		}
		if (lost)
			push(s, s->now + s->t.evict_ns, EV_EVICT, 0, 0);
		return;
	}
	if (iod_simc_policy_is_k8s(s->c->policy)) {
		w = json_array();
		json_t *taken = json_deep_copy(l->replicas);
		/* k8s-topo: the lost pods as one gang, in the racks the job's other
		 * pods run in when those hold them */
		uint32_t *at = NULL, lost_k = 0;
		bool gang = false;
		if (s->c->policy == IOD_SIMC_POLICY_K8S_TOPO)
			gang = tas_lost(s, l, &at);
		json_array_foreach(json_object_get(l->replicas, "items"), i, x)
		{
			json_t *v = json_object_get(x, "value");
			const char *n =
			    iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
			const char *name = json_string_value(json_object_get(x, "name"));
			bool live = false;
			size_t k;
			json_t *y;
			json_array_foreach(json_object_get(l->nodes, "items"), k, y) live |=
			    n && !strcmp(n, json_string_value(json_object_get(y, "name")));
			if (live)
				continue;
			json_t *nv = json_deep_copy(v);
			if (gang) {
				uint32_t ni = at[lost_k++];
				k8s_bind(s, nv, ni, node_free(s, taken, ni, name));
			} else if (s->c->policy == IOD_SIMC_POLICY_K8S_TOPO ||
			           k8s_place(s, nv, l->nodes, taken, name)) {
				json_decref(nv);
				continue;
			}
			json_t *wr =
			    json_pack("{s:s, s:I, s:o}", "name", name, "prev_rev",
			              json_integer_value(json_object_get(x, "rev")), "value", nv);
			json_array_append_new(w, wr);
			/* later picks see this one's GPUs as taken */
			json_array_append_new(json_object_get(taken, "items"),
			                      json_pack("{s:s, s:O}", "name", name, "value", nv));
		}
		json_decref(taken);
		free(at);
	} else {
		w = iod_ctrl_resched_plan(l->nodes, l->replicas, l->services, now_ms(s),
		                          s->t.stateful_grace_ns / IOD_NS_PER_MS, &unplaced);
	}
	json_array_foreach(w, i, x)
	{
		const char *name = json_string_value(json_object_get(x, "name"));
		json_int_t prev = json_integer_value(json_object_get(x, "prev_rev"));
		const json_t *v = json_object_get(x, "value");
		const char *to = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
		slog(s, "ctrl move %s to=%s", name, to ? to : "-");
		propose(s, iod_state_cmd_put(IOD_STATE_REPLICA, name, v, 0, prev), P_MOVE, 0, 0,
		        name);
		moved++;
	}
	s->r->unplaced = (uint32_t)json_array_size(unplaced);
	s->need_ctrl = s->r->unplaced > 0;
	if (s->r->unplaced) {
		const char *why =
		    json_string_value(json_object_get(json_array_get(unplaced, 0), "why"));
		snprintf(s->r->unplaced_why, sizeof(s->r->unplaced_why), "%s", why ? why : "?");
		slog(s, "ctrl unplaced=%u moved=%u", s->r->unplaced, moved);
	}
	json_decref(w);
	json_decref(unplaced);
}

/* ---- the mesh: requests to the job's service through the real LB -------------- */

/* Rebuild the endpoint list from the Replica objects, as a proxy does when
 * the registry changes. */
static void mesh_rebuild(struct sim *s)
{
	struct iod_mesh_service *v = s->svc;
	iod_mesh_service_defaults(v);
	snprintf(v->name, sizeof(v->name), "%s", s->c->job.name);
	v->mode = IOD_MESH_MODE_HTTP;
	v->eps_n = 0;
	for (uint32_t i = 0; i < s->replicas && v->eps_n < IOD_MESH_ENDPOINTS_MAX; i++) {
		struct iod_mesh_endpoint *ep = &v->eps[v->eps_n];
		char name[IOD_NAME_MAX + 16];
		snprintf(name, sizeof(name), "%s-%u", s->c->job.name, i);
		const char *node = iod_obj_peek_str(
		    IOD_OBJ_KIND_REPLICA, iod_state_value(cp_state(s), IOD_STATE_REPLICA, name),
		    IOD_OBJ_REPLICA_NODE);
		uint32_t ni = node_index(s, node);
		if (ni == UINT32_MAX)
			continue;
		memset(ep, 0, sizeof(*ep));
		snprintf(ep->id, sizeof(ep->id), "%s", name);
		snprintf(ep->node, sizeof(ep->node), "%s", node);
		ep->ip4 = 0x0a000000u | ni;
		ep->port = 9000;
		ep->weight = 1;
		/* the agent's report of the replica's phase becomes the
		 * endpoint's health; a node that died cannot report */
		ep->healthy = !s->nodes[ni].up;
		for (uint32_t k = 0; k < IOD_SIMC_NODE_REPLICAS_MAX && s->nodes[ni].up; k++)
			ep->healthy |=
			    s->nodes[ni].proc[k].alive && !strcmp(s->nodes[ni].proc[k].name, name);
		v->eps_n++;
	}
	if (s->lb_built)
		iod_mesh_lb_free(&s->lb);
	s->lb_built = iod_mesh_lb_build(&s->lb, v) == 0;
	iod_mesh_outlier_init(&s->out, v->eps_n);
	slog(s, "mesh endpoints=%u", v->eps_n);
}

/* One request from the last node's proxy (the spare, when there is one:
 * the picker prefers a local endpoint): pick, connect (fails on a dead
 * process or node), report to outlier detection. */
static void mesh_request(struct sim *s)
{
	struct iod_simc_result *r = s->r;
	bool panic = false;
	if (s->c->requests_per_s > 0 && s->js != J_DONE)
		push(s, s->now + (uint64_t)llround(1e9 / s->c->requests_per_s), EV_REQ, 0, 0);
	const struct node *cl = &s->nodes[s->c->nodes - 1];
	if (!s->lb_built || !s->svc->eps_n || !cl->up)
		return;
	iod_mesh_outlier_tick(&s->out, &s->svc->outlier, s->now);
	int h = iod_mesh_lb_pick(&s->lb, s->svc, &s->out, cl->name, "", iod_rng_next(&s->rng_mesh),
	                         UINT32_MAX, &s->rng_mesh, &panic);
	r->mesh_requests++;
	if (h < 0) {
		r->mesh_failed++;
		return;
	}
	const struct iod_mesh_endpoint *ep = &s->svc->eps[h];
	uint32_t ni = node_index(s, ep->node);
	bool alive = false;
	for (uint32_t k = 0; ni != UINT32_MAX && s->nodes[ni].up && k < IOD_SIMC_NODE_REPLICAS_MAX;
	     k++)
		alive |= s->nodes[ni].proc[k].alive && !strcmp(s->nodes[ni].proc[k].name, ep->id);
	if (!alive)
		r->mesh_failed++;
	if (iod_mesh_outlier_report(&s->out, &s->svc->outlier, (uint32_t)h,
	                            alive ? IOD_MESH_OK : IOD_MESH_CONNECT_FAIL, s->now)) {
		r->mesh_ejections++;
		slog(s, "mesh ejected %s", ep->id);
	}
}

/* ---- faults --------------------------------------------------------------------- */

static void open_recovery(struct sim *s, enum iod_simc_fault_kind k)
{
	s->r->faults_hit++;
	if (s->rec_open) /* a fault during a recovery: measured as one */
		return;
	memset(&s->cur, 0, sizeof(s->cur));
	s->cur.kind = k;
	s->cur.at_ns = s->now;
	s->rec_open = true;
	s->t_detect = s->t_decide = s->t_start = 0;
}

static bool job_uses(struct sim *s, uint32_t ni, int gpu)
{
	for (uint32_t k = 0; k < IOD_SIMC_NODE_REPLICAS_MAX; k++) {
		struct proc *p = &s->nodes[ni].proc[k];
		if (!p->alive && !p->starting)
			continue;
		if (gpu < 0)
			return true;
		const json_t *v = iod_state_value(cp_state(s), IOD_STATE_REPLICA, p->name);
		const char *g = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_GPUS);
		if (g && iod_sched_mask_parse(g) & (1u << gpu))
			return true;
	}
	return false;
}

/* A node (or its NIC) is repaired: a fresh agent registers again. */
static void node_register(struct sim *s, uint32_t ni);
static void node_up(struct sim *s, uint32_t ni)
{
	struct node *nd = &s->nodes[ni];
	struct iod_agent_rec_config rc;
	memset(&rc, 0, sizeof(rc));
	rc.backoff_base_ns = s->t.restart_base_ns;
	rc.backoff_max_ns = s->t.restart_max_ns;
	rc.backoff_reset_ns = 10 * IOD_NS_PER_S;
	rc.stop_grace_ns = 5 * IOD_NS_PER_S;
	rc.liveness_failures = 3;
	rc.startup_grace_ns = 30 * IOD_NS_PER_S;
	iod_agent_rec_free(nd->rec);
	nd->rec = NULL;
	if (iod_agent_rec_new(&rc, IOD_SIMC_NODE_REPLICAS_MAX, &nd->rec)) {
		fail(s, -ENOMEM, "out of memory");
		return;
	}
	nd->up = true;
	nd->rec_at = UINT64_MAX;
	slog(s, "node %s repaired", nd->name);
	node_register(s, ni);
	push(s, s->now + s->t.commit_ns + s->t.watch_ns, EV_CTRL, 0, 0);
	push(s, s->now + s->t.commit_ns + s->t.watch_ns, EV_SYNC, ni, nd->gen);
}

/* The job's processes on node ni (on GPU gpu, or all of them for -1) fail;
 * the agent sees them exit at once (SIGCHLD): detection takes 0. */
static void kill_ranks(struct sim *s, uint32_t ni, int gpu)
{
	struct node *nd = &s->nodes[ni];
	uint32_t killed = 0;
	for (uint32_t k = 0; k < IOD_SIMC_NODE_REPLICAS_MAX; k++) {
		struct proc *p = &nd->proc[k];
		const json_t *v = iod_state_value(cp_state(s), IOD_STATE_REPLICA, p->name);
		const char *g = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_GPUS);
		if (!p->alive || !g || (gpu >= 0 && !(iod_sched_mask_parse(g) & (1u << gpu))))
			continue;
		p->alive = false;
		iod_agent_rec_on_exited(nd->rec, p->name, 1, 0, s->now);
		killed++;
	}
	if (killed && s->rec_open && !s->t_detect) {
		s->t_detect = s->now;
		s->cur.detect_ns = s->now - s->cur.at_ns;
	}
	rec_run(s, ni);
}

/*
 * A fabric link on node ni's path black-holes the flows hashed onto it.
 * The ring stops at once (every rank waits on its neighbour). iod's
 * adaptive routing leaves the path after reroute_ns and the ring goes on,
 * no rank restarts; without rerouting (ECMP) the transport retries until
 * NCCL gives up (transport_timeout_ns), the ranks on the node fail and
 * restart in place, their new connections hashed anew. A job whose ring
 * does not leave one node, or that is not computing steps, is not hit.
 */
static void link_fault(struct sim *s, uint32_t ni)
{
	if (s->js != J_RUN || s->nodes_used < 2 || !job_uses(s, ni, -1))
		return;
	open_recovery(s, IOD_SIMC_FAULT_LINK);
	/* the step in flight is not done (its chunk's end, a checkpoint
	 * boundary, is still to come even at a tie) */
	double part = floor((double)(s->now - s->chunk_start) / 1e9 / s->chunk_step_s);
	part = IOD_MIN(part, s->chunk_steps ? (double)(s->chunk_steps - 1) : 0);
	account(s, part);
	s->steps_done += (uint64_t)part;
	s->epoch++;
	s->js = J_STALL;
	slog(s, "job stalled steps_done=%llu", (unsigned long long)s->steps_done);
	if (s->t.reroute_ns && s->t.reroute_ns < s->t.transport_timeout_ns)
		push(s, s->now + s->t.reroute_ns, EV_REROUTED, 0, s->epoch);
	else
		push(s, s->now + s->t.transport_timeout_ns, EV_NCCL_ABORT, ni, s->epoch);
}

/*
 * Server i's log is damaged: the server crashes (unsynced bytes are lost),
 * the damage is done to its files, and it restarts after restart_ns with
 * wal.c's verdict. A log that starts (a torn tail repaired) rejoins with
 * what it holds; a refused one stays down, and after restart_ns more it is
 * rebuilt from a peer (--recover-from-peers).
 */
static void disk_fault(struct sim *s, uint32_t i, uint32_t damage, uint64_t restart_ns)
{
	struct iod_simdisk_verdict v;
	struct iod_err e = {0};
	slog(s, "fault disk server=%u damage=%s", i,
	     iod_simdisk_damage_name((enum iod_simdisk_damage)damage));
	if (!s->disks || i >= s->nsrv || s->r->disk_n >= IOD_SIMC_FAULTS_MAX ||
	    !iod_simdisk_up(s->disk[i]))
		return;
	if (raft_fixture_alive(&s->f, i))
		raft_fixture_kill(&s->f, i);
	s->r->server_faults++;
	uint64_t stored = raft_fixture_get(&s->f, i)->last_stored;
	struct iod_simc_disk *d = &s->r->disk[s->r->disk_n++];
	memset(d, 0, sizeof(*d));
	d->server = i;
	d->at_ns = s->now;
	d->damage = damage;
	if (iod_simdisk_damage(s->disk[i], (enum iod_simdisk_damage)damage, &v, &e)) {
		fail(s, e.code, e.msg);
		return;
	}
	d->rc = v.rc;
	d->torn_bytes = v.torn_bytes;
	iod_strlcpy(d->why, v.why, sizeof(d->why));
	slog(s, "disk server=%u verdict=%s entries=%llu torn_bytes=%llu%s%s", i,
	     iod_simc_disk_verdict(d), (unsigned long long)v.entries,
	     (unsigned long long)v.torn_bytes, v.rc ? " why=" : "", v.rc ? v.why : "");
	/* a log that starts holds everything raft was told is stored */
	if (!v.rc && v.last_index < stored)
		violation(s, "server %u's log starts with index %llu last, but %llu were stored", i,
		          (unsigned long long)v.last_index, (unsigned long long)stored);
	if (v.rc)
		push(s, s->now + 2 * restart_ns, EV_RECOVER, i, s->r->disk_n - 1);
	else
		push(s, s->now + restart_ns, EV_REVIVE, i, 0);
}

/* The server runs again: it has caught up once it applied what any live
 * server knew committed at this moment. */
static void disk_back(struct sim *s, struct iod_simc_disk *d)
{
	d->back_ns = s->now - d->at_ns;
	for (unsigned k = 0; k < s->nsrv; k++) {
		struct raft *r = raft_fixture_get(&s->f, k);
		if (raft_fixture_alive(&s->f, k))
			d->target_index = IOD_MAX(d->target_index, r->commit_index);
	}
}

/* --recover-from-peers for server i: the most up-to-date live peer's log
 * (last term, then last index: Raft's comparison), else try again later. */
static void disk_recover(struct sim *s, uint32_t i, uint32_t k)
{
	struct iod_err e = {0};
	int best = -1;
	for (unsigned j = 0; j < s->nsrv; j++) {
		if (j == i || !raft_fixture_alive(&s->f, j) || !iod_simdisk_up(s->disk[j]))
			continue;
		struct raft *r = raft_fixture_get(&s->f, j), *b;
		if (best < 0 || (b = raft_fixture_get(&s->f, (unsigned)best),
		                 raft_last_index(r) > raft_last_index(b)))
			best = (int)j;
	}
	if (best < 0) {
		slog(s, "server %u: no peer to recover from; retrying", i);
		push(s, s->now + s->c->server_repair_ns, EV_RECOVER, i, k);
		return;
	}
	struct raft *self = raft_fixture_get(&s->f, i);
	if (iod_simdisk_recover(s->disk[i], raft_fixture_get(&s->f, (unsigned)best), self->id,
	                        &e)) {
		fail(s, e.code ? e.code : -EIO, e.msg);
		return;
	}
	s->r->disk[k].rebuilt = true;
	/* the rebuilt log, as wal.c loads it, holds every write committed so far */
	bool *held = calloc(s->committed_n ? s->committed_n : 1, sizeof(*held));
	if (!held || iod_simdisk_holds(s->disk[i], s->committed, s->committed_n, held, &e)) {
		fail(s, -EIO, held ? e.msg : "out of memory");
		free(held);
		return;
	}
	for (uint32_t j = 0; j < s->committed_n; j++)
		if (!held[j]) {
			violation(s, "server %u rebuilt from server %d lacks committed index %llu",
			          i, best, (unsigned long long)s->committed[j]);
			break;
		}
	free(held);
	slog(s, "server %u rebuilt from server %d last_index=%llu", i, best,
	     (unsigned long long)iod_simdisk_last_index(s->disk[i]));
	push(s, s->now, EV_REVIVE, i, 0);
}

/* repair_ns: how long a server or node stays down (0: the config's) */
static void fault(struct sim *s, enum iod_simc_fault_kind kind, uint32_t ni, uint32_t gpu,
                  uint64_t repair_ns, uint32_t damage)
{
	struct node *nd;
	s->r->faults++;
	if (kind == IOD_SIMC_FAULT_DISK) {
		disk_fault(s, ni, damage, repair_ns ? repair_ns : s->c->server_repair_ns);
		return;
	}
	if (kind == IOD_SIMC_FAULT_SERVER || kind == IOD_SIMC_FAULT_LEADER) {
		int i = kind == IOD_SIMC_FAULT_LEADER ? s->leader : (int)ni;
		slog(s, "fault %s server=%d", iod_simc_fault_name(kind), i);
		if (!s->raft || i < 0 || (unsigned)i >= s->nsrv ||
		    !raft_fixture_alive(&s->f, (unsigned)i))
			return;
		raft_fixture_kill(&s->f, (unsigned)i);
		s->r->server_faults++;
		push(s, s->now + (repair_ns ? repair_ns : s->c->server_repair_ns), EV_REVIVE,
		     (uint32_t)i, 0);
		return;
	}
	nd = &s->nodes[ni];
	slog(s, "fault %s node=%s gpu=%u", iod_simc_fault_name(kind), nd->name, gpu);
	if (!nd->up)
		return;
	if (kind == IOD_SIMC_FAULT_LINK) {
		link_fault(s, ni);
		return;
	}
	bool cut = false;
	if (kind == IOD_SIMC_FAULT_NIC) {
		nd->nics_down++;
		push(s, s->now + s->c->node_repair_ns, EV_NIC_UP, ni, 0);
		/* the last NIC: the agent cannot reach the servers any more, the
		 * ranks lose their peers; the control plane sees a lost node */
		cut = nd->nics_down >= s->nics;
		nd->cut = cut;
	}
	/* a NIC the ring does not cross (the job on one node) hits nothing */
	bool hit = s->js != J_PENDING && s->js != J_DONE &&
	           job_uses(s, ni, kind == IOD_SIMC_FAULT_GPU ? (int)gpu : -1) &&
	           (kind != IOD_SIMC_FAULT_NIC || cut || s->nodes_used >= 2);
	if (hit)
		open_recovery(s, kind);
	if (kind == IOD_SIMC_FAULT_NODE || cut) {
		nd->up = false;
		nd->gen++;
		for (uint32_t k = 0; k < IOD_SIMC_NODE_REPLICAS_MAX; k++)
			nd->proc[k].alive = nd->proc[k].starting = false;
		if (!cut)
			push(s, s->now + (repair_ns ? repair_ns : s->c->node_repair_ns), EV_NODE_UP,
			     ni, 0);
	} else if (kind == IOD_SIMC_FAULT_NIC) {
		/* a fatal device error on the NIC: every rank of the job on the
		 * node has queue pairs on it and fails at once; NCCL picks the
		 * remaining NICs when the ranks start again */
		if (hit)
			kill_ranks(s, ni, -1);
	} else {
		/* an Xid-style GPU error kills the process on that GPU; the agent
		 * sees it exit at once (SIGCHLD) */
		kill_ranks(s, ni, (int)gpu);
	}
	job_update(s);
}

static void next_random_fault(struct sim *s)
{
	double rate_per_s = s->c->fault_per_gpu_hour * s->c->nodes * s->gpn / 3600.0;
	if (!(rate_per_s > 0))
		return;
	double dt = iod_rng_exp(&s->rng_fault, 1.0 / rate_per_s);
	if (dt * 1e9 > (double)s->c->horizon_ns)
		return;
	push(s, s->now + (uint64_t)llround(dt * 1e9), EV_FAULT, UINT32_MAX, 0);
}

/* ---- events ---------------------------------------------------------------------- */

/* The agent registers: a node lease, then its Node object bound to it. */
static void node_register(struct sim *s, uint32_t ni)
{
	struct node *nd = &s->nodes[ni];
	if (!nd->up)
		return;
	propose(s,
	        iod_state_cmd_lease_grant_for(s->t.lease_ttl_ns / IOD_NS_PER_MS, now_ms(s),
	                                      nd->name, true),
	        P_GRANT, ni, nd->gen, NULL);
}

static void put_node(struct sim *s, uint32_t ni)
{
	struct node *nd = &s->nodes[ni];
	char model[IOD_NAME_MAX];
	snprintf(model, sizeof(model), "%s", s->topo->model);
	json_t *v =
	    json_pack("{s:s, s:i, s:i, s:s, s:I}", "addr", nd->name, "gpus", (int)s->gpn, "cpus",
	              (int)s->topo->pus, "model", model, "registered_ms", (json_int_t)now_ms(s));
	propose(s, iod_state_cmd_put(IOD_STATE_NODE, nd->name, v, nd->lease_id, -1), P_NODE, ni,
	        nd->gen, NULL);
	json_decref(v);
}

/* The leader's lease check (src/state/member_leader.c): a new term refreshes every
 * lease first; then lease_expire once the earliest deadline has passed. */
static void lease_check(struct sim *s)
{
	push(s, s->now + s->t.check_ns, EV_CHECK, 0, 0);
	if (s->raft && s->leader < 0)
		return;
	if (s->refresh_term != s->leader_term) {
		if (!s->refresh_in_flight) {
			s->refresh_in_flight = true;
			propose(s, iod_state_cmd_lease_refresh(now_ms(s)), P_REFRESH, 0,
			        s->leader_term, NULL);
		}
		return;
	}
	uint64_t due = iod_state_lease_next_deadline_ms(cp_state(s));
	if (due && now_ms(s) >= due && !s->expire_in_flight) {
		s->expire_in_flight = true;
		propose(s, iod_state_cmd_lease_expire(now_ms(s)), P_EXPIRE, 0, 0, NULL);
	}
}

/* A write committed (or failed): what the proposer does next. */
static void finish(struct sim *s, struct prop *p)
{
	struct node *nd = p->arg < s->c->nodes ? &s->nodes[p->arg] : NULL;
	bool ok = p->status == 0 && p->res.code == 0;
	bool mine = nd && nd->up && nd->gen == p->data;
	/* committed (a CAS that lost is committed too): it must survive */
	if (s->disks && p->status == 0 && p->req.index && s->committed_n < IOD_SIMC_ACKS_MAX)
		s->committed[s->committed_n++] = p->req.index;
	switch (p->kind) {
	case P_GRANT:
		if (ok && mine) {
			nd->lease_id = p->res.lease_id;
			put_node(s, p->arg);
		} else if (mine) {
			push(s, s->now + s->t.renew_ns, EV_REGISTER, p->arg, 0);
		}
		break;
	case P_NODE:
		if (ok && mine) {
			nd->registered = true;
			slog(s, "register %s lease=%llu", nd->name,
			     (unsigned long long)nd->lease_id);
			push(s, s->now + s->t.renew_ns, EV_RENEW, p->arg, nd->gen);
			if (s->need_ctrl)
				push(s, s->now + s->t.watch_ns, EV_CTRL, 0, 0);
		} else if (mine) {
			push(s, s->now + s->t.renew_ns, EV_REGISTER, p->arg, 0);
		}
		break;
	case P_RENEW:
		/* the lease expired under it: register again, as the agent does */
		if (mine && p->status == 0 && p->res.code == -ENOENT) {
			slog(s, "renew %s: lease gone, registering again", nd->name);
			push(s, s->now, EV_REGISTER, p->arg, 0);
		}
		break;
	case P_REFRESH:
		s->refresh_in_flight = false;
		if (ok)
			s->refresh_term = p->data;
		break;
	case P_EXPIRE:
		s->expire_in_flight = false;
		if (ok && p->res.changed) {
			slog(s, "lease expired changed=%u nodes=%u", p->res.changed,
			     iod_state_count(cp_state(s), IOD_STATE_NODE));
			if (s->rec_open && !s->t_detect) {
				s->t_detect = s->now;
				s->cur.detect_ns = s->t_detect - s->cur.at_ns;
			}
			push(s, s->now + s->t.watch_ns, EV_CTRL, 0, 0);
		}
		break;
	case P_DEPLOY:
		if (!ok) {
			slog(s, "deploy failed (%d): retrying",
			     p->status ? p->status : p->res.code);
			push(s, s->now + IOD_NS_PER_S, EV_DEPLOY, 0, 0);
			break;
		}
		slog(s, "deploy rev=%llu unplaced=%u", (unsigned long long)p->res.rev,
		     s->r->unplaced);
		for (uint32_t i = 0; i < s->replicas; i++) {
			char name[IOD_NAME_MAX + 16];
			snprintf(name, sizeof(name), "%s-%u", s->c->job.name, i);
			ack(s, name, p->res.rev);
		}
		record_placement(s);
		s->js = J_WAIT;
		push(s, s->now + s->t.watch_ns, EV_MESH, 0, 0);
		sync_all(s, s->now + s->t.watch_ns);
		break;
	case P_MOVE:
		if (p->status) { /* not committed: the controller tries again */
			push(s, s->now + s->t.watch_ns, EV_CTRL, 0, 0);
			break;
		}
		if (p->res.code)
			break; /* compare-and-swap lost: someone else moved it */
		ack(s, p->name, p->res.rev);
		if (s->rec_open && !s->t_decide && s->t_detect) {
			s->t_decide = s->now;
			s->cur.decide_ns = s->t_decide - s->t_detect;
		}
		{
			/* every agent gets the watch event; only the target's
			 * desired set changes (a generation is what restarts a
			 * replica), so only it is rebuilt: at 1,024 nodes a rebuild
			 * of every agent per move would dominate the run */
			uint32_t to = node_index(
			    s, iod_obj_peek_str(
			           IOD_OBJ_KIND_REPLICA,
			           iod_state_value(cp_state(s), IOD_STATE_REPLICA, p->name),
			           IOD_OBJ_REPLICA_NODE));
			if (to != UINT32_MAX && s->nodes[to].up)
				push(s, s->now + s->t.watch_ns, EV_SYNC, to, s->nodes[to].gen);
			push(s, s->now + s->t.watch_ns, EV_MESH, 0, 0);
		}
		break;
	}
	prop_release(s, p);
}

static void handle(struct sim *s, const struct iod_sim_event *ev, struct lists *l)
{
	struct node *nd = ev->arg < s->c->nodes ? &s->nodes[ev->arg] : NULL;
	switch ((enum ev_kind)ev->kind) {
	case EV_REGISTER: node_register(s, ev->arg); break;
	case EV_RENEW:
		if (!nd->up || ev->data != nd->gen)
			break;
		propose(s, iod_state_cmd_lease_renew(nd->lease_id, now_ms(s)), P_RENEW, ev->arg,
		        nd->gen, NULL);
		push(s, s->now + s->t.renew_ns, EV_RENEW, ev->arg, nd->gen);
		break;
	case EV_CHECK: lease_check(s); break;
	case EV_DEPLOY:
		slog(s, "deploy %s replicas=%u gpus_per_replica=%u", s->c->job.name, s->replicas,
		     s->gpr);
		s->r->job_start_ns = s->now;
		deploy(s, l);
		break;
	case EV_SYNC:
		if (nd->up && ev->data == nd->gen)
			agent_sync(s, ev->arg, l);
		break;
	case EV_REC:
		if (!nd->up || ev->data != nd->rec_token)
			break;
		nd->rec_at = UINT64_MAX;
		rec_run(s, ev->arg);
		break;
	case EV_STARTED: {
		uint32_t slot = (uint32_t)(ev->data & 0x7fff);
		if (!nd->up || ev->data >> 16 != nd->gen || !nd->proc[slot].starting)
			break;
		nd->proc[slot].starting = false;
		nd->proc[slot].alive = true;
		slog(s, "proc %s up %s", nd->name, nd->proc[slot].name);
		iod_agent_rec_on_started(nd->rec, nd->proc[slot].name, s->now);
		rec_run(s, ev->arg);
		job_update(s);
		break;
	}
	case EV_EXITED: {
		uint32_t slot = (uint32_t)(ev->data & 0x7fff);
		bool killed = ev->data >> 15 & 1;
		struct proc *p = &nd->proc[slot];
		if (!nd->up || ev->data >> 16 != nd->gen || (!p->alive && !p->starting))
			break;
		p->alive = p->starting = false;
		slog(s, "proc %s exit %s", nd->name, p->name);
		iod_agent_rec_on_exited(nd->rec, p->name, -1, killed ? 9 : 15, s->now);
		rec_run(s, ev->arg);
		job_update(s);
		break;
	}
	case EV_CTRL: controller(s, l, false); break;
	case EV_EVICT:
		slog(s, "evict");
		controller(s, l, true);
		break;
	case EV_FAULT:
		if (ev->arg == UINT32_MAX) {
			uint32_t ni = (uint32_t)iod_rng_below(&s->rng_fault, s->c->nodes);
			uint32_t g = (uint32_t)iod_rng_below(&s->rng_fault, s->gpn ? s->gpn : 1);
			double u = iod_rng_double(&s->rng_fault), g_sh = s->c->fault_gpu_share;
			double l_sh = g_sh + s->c->fault_link_share;
			enum iod_simc_fault_kind k = u < g_sh   ? IOD_SIMC_FAULT_GPU
			                             : u < l_sh ? IOD_SIMC_FAULT_LINK
			                             : u < l_sh + s->c->fault_nic_share
			                                 ? IOD_SIMC_FAULT_NIC
			                                 : IOD_SIMC_FAULT_NODE;
			fault(s, k, ni, g, 0, 0);
			next_random_fault(s);
		} else {
			const struct iod_simc_fault *f = &s->c->faults[ev->arg];
			fault(s, f->kind, f->node, f->gpu, f->repair_ns, f->damage);
		}
		break;
	case EV_NODE_UP: node_up(s, ev->arg); break;
	case EV_NIC_UP:
		if (nd->nics_down)
			nd->nics_down--;
		slog(s, "node %s nic replaced", nd->name);
		if (nd->cut) {
			nd->cut = false;
			node_up(s, ev->arg);
		}
		break;
	case EV_REROUTED:
		if (ev->data != s->epoch || s->js != J_STALL)
			break;
		slog(s, "job rerouted");
		if (s->rec_open && !s->t_detect) {
			s->t_detect = s->t_start = s->now;
			s->cur.detect_ns = s->now - s->cur.at_ns;
			close_recovery(s);
		}
		s->js = J_RUN;
		next_chunk(s);
		break;
	case EV_NCCL_ABORT:
		if (ev->data != s->epoch || s->js != J_STALL)
			break;
		slog(s, "nccl abort node=%s", nd->name);
		kill_ranks(s, ev->arg, -1);
		job_update(s);
		break;
	case EV_RESTORED:
		if (ev->data != s->epoch || s->js != J_RESTORE)
			break;
		close_recovery(s);
		if (!s->serving && s->c->requests_per_s > 0)
			push(s, s->now, EV_REQ, 0, 0); /* the service answers from now on */
		s->serving = true;
		s->js = J_RUN;
		slog(s, "job running steps_done=%llu", (unsigned long long)s->steps_done);
		next_chunk(s);
		break;
	case EV_CHUNK:
		if (ev->data != s->epoch || s->js != J_RUN)
			break;
		account(s, (double)s->chunk_steps);
		s->steps_done += s->chunk_steps;
		if (s->steps_done >= s->steps_total) {
			s->js = J_DONE;
			s->r->done = true;
			s->r->job_end_ns = s->now;
			slog(s, "job done steps=%llu", (unsigned long long)s->steps_done);
			break;
		}
		if (!s->c->job.ckpt_every_steps || s->steps_done % s->c->job.ckpt_every_steps) {
			next_chunk(s); /* a packet-level sample ended, not a checkpoint interval */
			break;
		}
		s->js = J_CKPT;
		push(s, s->now + (uint64_t)llround((double)s->ckpt_bytes / s->c->ckpt_Bps * 1e9),
		     EV_CKPT, 0, s->epoch);
		break;
	case EV_CKPT:
		if (ev->data != s->epoch || s->js != J_CKPT)
			break;
		s->ckpt_steps = s->steps_done;
		s->have_ckpt = true;
		slog(s, "ckpt steps=%llu", (unsigned long long)s->steps_done);
		s->js = J_RUN;
		next_chunk(s);
		break;
	case EV_COMMIT: {
		struct prop *p = &s->props[ev->arg];
		p->status = 0;
		iod_state_apply(s->st, p->cmd, strlen(p->cmd), &p->res);
		finish(s, p);
		break;
	}
	case EV_APPLIED: finish(s, &s->props[ev->arg]); break;
	case EV_REVIVE:
		/* a server whose log was refused waits for its rebuild */
		if (s->raft && ev->arg < s->nsrv && !raft_fixture_alive(&s->f, ev->arg) &&
		    (!s->disks || iod_simdisk_up(s->disk[ev->arg]))) {
			raft_fixture_revive(&s->f, ev->arg);
			slog(s, "server %u revived", ev->arg);
			for (uint32_t k = 0; k < s->r->disk_n; k++)
				if (s->r->disk[k].server == ev->arg && !s->r->disk[k].back_ns)
					disk_back(s, &s->r->disk[k]);
		}
		break;
	case EV_RECOVER: disk_recover(s, ev->arg, (uint32_t)ev->data); break;
	case EV_MESH: mesh_rebuild(s); break;
	case EV_REQ: mesh_request(s); break;
	case EV_KINDS: break;
	}
}

/* ---- setup and the loop ---------------------------------------------------------- */

static int setup(struct sim *s, const struct iod_simc_config *c, struct iod_err *e)
{
	char model[IOD_NAME_MAX];
	struct iod_rng root;
	if (c->nodes == 0 || c->nodes > IOD_SIMC_NODES_MAX)
		return iod_err_set(e, -EINVAL, "--nodes must be 1..%d (got %u)", IOD_SIMC_NODES_MAX,
		                   c->nodes);
	if (iod_simc_job_check(&c->job, e))
		return -EINVAL;
	s->topo = calloc(1, sizeof(*s->topo));
	if (!s->topo)
		return iod_err_set(e, -ENOMEM, "out of memory");
	if (c->node_model[0])
		snprintf(model, sizeof(model), "%s", c->node_model);
	else
		snprintf(model, sizeof(model), "generic-%u", c->gpus_per_node);
	int rc = iod_topo_model_load(model, s->topo, e);
	if (rc)
		return rc;
	s->gpn = s->topo->ngpus;
	/* the NICs iod_simc_node_nic_Bps counts: the plain ones, else the DPUs */
	for (unsigned i = 0, dpus = 0; i < s->topo->nnics; i++) {
		bool plain = s->topo->devices[s->topo->nic[i]].kind == IOD_TOPO_DEV_NIC;
		s->nics += plain;
		dpus += !plain;
		if (i + 1 == s->topo->nnics && !s->nics)
			s->nics = dpus;
	}
	if (s->gpn == 0 || s->gpn > 32)
		return iod_err_set(e, -EINVAL,
		                   "node model %s has %u GPUs; the simulator needs 1..32", model,
		                   s->gpn);
	if (c->node_model[0] && c->gpus_per_node && c->gpus_per_node != s->gpn)
		return iod_err_set(e, -EINVAL, "node model %s has %u GPUs, not %u", model, s->gpn,
		                   c->gpus_per_node);
	const char *gk = iod_simc_gpu_key(s->topo->devices[s->topo->gpu[0]].model);
	if (!(c->job.step_compute_s > 0) && !iod_simc_calib_find(c->job.model, gk, c->job.prec))
		return iod_err_set(e, -EINVAL,
		                   "no calibration for %s on %s GPUs at %s (node model %s); "
		                   "docs/simulation.md lists the published figures shipped",
		                   c->job.model, gk ? gk : s->topo->devices[s->topo->gpu[0]].model,
		                   iod_simc_precision_name(c->job.prec), model);
	s->gpr = c->job.gpus_per_replica ? c->job.gpus_per_replica : IOD_MIN(c->job.gpus, s->gpn);
	if (s->gpr > s->gpn)
		return iod_err_set(e, -EINVAL, "gpus_per_replica %u exceeds the node's %u GPUs",
		                   s->gpr, s->gpn);
	if (c->job.gpus % s->gpr)
		return iod_err_set(e, -EINVAL,
		                   "the job's %u GPUs do not split into replicas of %u (the node's "
		                   "GPUs); set gpus_per_replica",
		                   c->job.gpus, s->gpr);
	s->replicas = c->job.gpus / s->gpr;
	if (c->job.gpus > (uint64_t)c->nodes * s->gpn)
		return iod_err_set(e, -EINVAL,
		                   "the job asks for %u GPUs; the cluster has %u x %u = %u",
		                   c->job.gpus, c->nodes, s->gpn, c->nodes * s->gpn);
	if (iod_simc_policy_is_k8s(c->policy))
		iod_simc_timers_k8s(&s->t);
	else
		s->t = c->timers;
	if (!s->t.lease_ttl_ns || !s->t.renew_ns || !s->t.check_ns)
		return iod_err_set(e, -EINVAL,
		                   "the config has no timers (call iod_simc_timers_iod)");
	if (!(c->ckpt_Bps > 0) || !(c->nic_efficiency > 0) || c->nic_efficiency > 1)
		return iod_err_set(e, -EINVAL, "ckpt bandwidth and NIC efficiency must be > 0");
	if (iod_sim_queue_init(&s->q, IOD_SIMC_EVENTS_MAX))
		return iod_err_set(e, -ENOMEM, "out of memory");
	rc = cp_init(s, e);
	if (rc)
		return rc;
	s->nodes = calloc(c->nodes, sizeof(*s->nodes));
	s->want = calloc(IOD_SIMC_NODE_REPLICAS_MAX, sizeof(*s->want));
	s->svc = calloc(1, sizeof(*s->svc));
	if (!s->svc)
		return iod_err_set(e, -ENOMEM, "out of memory");
	if (!s->nodes || !s->want)
		return iod_err_set(e, -ENOMEM, "out of memory");
	iod_rng_seed(&root, c->seed);
	iod_rng_fork(&root, &s->rng_start);
	iod_rng_fork(&root, &s->rng_fault);
	iod_rng_fork(&root, &s->rng_place);
	iod_rng_fork(&root, &s->rng_mesh);
	struct iod_rng rng_speed;
	iod_rng_fork(&root, &rng_speed);
	iod_rng_fork(&root, &s->rng_pkt);
	s->ring_nodes = calloc(c->nodes, sizeof(*s->ring_nodes));
	if (!s->ring_nodes)
		return iod_err_set(e, -ENOMEM, "out of memory");
	struct iod_agent_rec_config rcfg;
	memset(&rcfg, 0, sizeof(rcfg));
	rcfg.backoff_base_ns = s->t.restart_base_ns ? s->t.restart_base_ns : 100 * IOD_NS_PER_MS;
	rcfg.backoff_max_ns = s->t.restart_max_ns ? s->t.restart_max_ns : 10 * IOD_NS_PER_S;
	rcfg.backoff_reset_ns = 10 * IOD_NS_PER_S;
	rcfg.stop_grace_ns = 5 * IOD_NS_PER_S;
	rcfg.liveness_failures = 3;
	rcfg.startup_grace_ns = 30 * IOD_NS_PER_S;
	s->t.restart_base_ns = rcfg.backoff_base_ns;
	s->t.restart_max_ns = rcfg.backoff_max_ns;
	for (uint32_t i = 0; i < c->nodes; i++) {
		struct node *nd = &s->nodes[i];
		snprintf(nd->name, sizeof(nd->name), "n%u", i);
		nd->up = true;
		nd->rec_at = UINT64_MAX;
		if (iod_agent_rec_new(&rcfg, IOD_SIMC_NODE_REPLICAS_MAX, &nd->rec))
			return iod_err_set(e, -ENOMEM, "out of memory");
		for (uint32_t g = 0; g < 64; g++)
			nd->speed[g] = 1.0 + c->straggler_max * iod_rng_double(&rng_speed);
	}
	if (gnutls_hash_init(&s->sha, GNUTLS_DIG_SHA256))
		return iod_err_set(e, -ENOMEM, "SHA-256 unavailable");
	iod_buf_init(&s->log);
	return 0;
}

static void teardown(struct sim *s)
{
	for (uint32_t i = 0; s->nodes && i < s->c->nodes; i++)
		iod_agent_rec_free(s->nodes[i].rec);
	free(s->nodes);
	free(s->ring_nodes);
	free(s->want);
	if (s->lb_built)
		iod_mesh_lb_free(&s->lb);
	free(s->svc);
	free(s->topo);
	cp_close(s);
	iod_sim_queue_destroy(&s->q);
	iod_buf_free(&s->log);
}

int iod_simc_run(const struct iod_simc_config *c, struct iod_simc_result *r,
                 iod_simc_progress_fn *progress, void *ctx, struct iod_err *e)
{
	struct sim *s = calloc(1, sizeof(*s));
	struct lists l = {0};
	struct iod_sim_event ev;
	unsigned char digest[32];
	int rc;
	if (!s)
		return iod_err_set(e, -ENOMEM, "out of memory");
	memset(r, 0, sizeof(*r));
	s->c = c;
	s->r = r;
	s->e = e;
	rc = setup(s, c, e);
	if (rc) {
		if (s->sha)
			gnutls_hash_deinit(s->sha, NULL);
		teardown(s);
		free(s);
		return rc;
	}
	slog(s, "sim nodes=%u model=%s gpus_per_node=%u policy=%s seed=%llu job=%s gpus=%u",
	     c->nodes, s->topo->model, s->gpn, iod_simc_policy_name(c->policy),
	     (unsigned long long)c->seed, c->job.model, c->job.gpus);
	if (c->policy == IOD_SIMC_POLICY_K8S_TOPO)
		slog(s, "tas levels=rack,hostname rack_nodes=%u", c->rack_nodes);
	if (c->job.step_compute_s > 0)
		slog(s, "workload %s compute_ns=%.0f grad_bytes=%llu", c->job.workload,
		     c->job.step_compute_s * 1e9, (unsigned long long)c->job.grad_bytes);
	/* nodes join over the first second, in a seeded order of latencies */
	for (uint32_t i = 0; i < c->nodes; i++)
		push(s, iod_rng_below(&s->rng_start, IOD_NS_PER_S), EV_REGISTER, i, 0);
	push(s, s->t.check_ns, EV_CHECK, 0, 0);
	push(s, 2 * IOD_NS_PER_S, EV_DEPLOY, 0, 0);
	/* a server fault's node is the server's index, not a node's */
	for (uint32_t i = 0; i < c->faults_n; i++)
		if (c->faults[i].node < c->nodes || c->faults[i].kind == IOD_SIMC_FAULT_SERVER ||
		    c->faults[i].kind == IOD_SIMC_FAULT_LEADER ||
		    c->faults[i].kind == IOD_SIMC_FAULT_DISK)
			push(s, c->faults[i].at_ns, EV_FAULT, i, 0);
	next_random_fault(s);
	while (!s->err && s->js != J_DONE) {
		uint64_t next = iod_sim_queue_peek(&s->q);
		/* the servers catch up with the loop: Raft's own events (ticks,
		 * messages, disk writes) run while its clock is behind */
		if (s->raft && (uint64_t)raft_fixture_time(&s->f) * IOD_NS_PER_MS < next &&
		    (uint64_t)raft_fixture_time(&s->f) * IOD_NS_PER_MS <= c->horizon_ns) {
			cp_step(s);
			r->raft_steps++;
			continue;
		}
		if (!iod_sim_queue_pop(&s->q, &ev) || ev.t_ns > c->horizon_ns)
			break;
		IOD_ASSERT(ev.t_ns >= s->now);
		s->now = ev.t_ns;
		r->events++;
		if (ev.kind != EV_CHECK && ev.kind != EV_RENEW)
			slog(s, "ev %s arg=%u", ev_names[ev.kind < EV_KINDS ? ev.kind : 0], ev.arg);
		handle(s, &ev, &l);
		if (progress && r->events % 65536 == 0)
			progress(ctx, s->now, r->events, s->steps_done, s->steps_total);
	}
	r->sim_ns = s->now;
	if (!r->done)
		r->job_end_ns = s->now;
	r->steps_done = s->steps_done;
	r->steps_total = s->steps_total;
	/* utilisation over the job's wall time, deploy to end */
	double job_s = (double)(r->job_end_ns - r->job_start_ns) / 1e9;
	if (job_s > 0 && c->job.gpus) {
		r->gpu_util_busy = s->gpu_busy_s / (c->job.gpus * job_s);
		r->gpu_util_compute = s->gpu_compute_s / (c->job.gpus * job_s);
		r->net_gbps_avg = s->nic_bytes_per_node * 8 / 1e9 / job_s;
		r->net_gbps_busy =
		    s->comm_busy_s > 0 ? s->nic_bytes_per_node * 8 / 1e9 / s->comm_busy_s : 0;
	}
	/* every committed write is on the disks, as wal.c loads them at a
	 * restart (a server still refused holds nothing): on at least one, and
	 * on a majority once every log starts again */
	if (s->disks && s->committed_n && !s->err) {
		uint32_t *on = calloc(s->committed_n, sizeof(*on));
		bool *held = calloc(s->committed_n, sizeof(*held));
		struct iod_err de = {0};
		for (unsigned k = 0; on && held && k < s->nsrv; k++) {
			if (!iod_simdisk_up(s->disk[k]))
				continue;
			if (iod_simdisk_holds(s->disk[k], s->committed, s->committed_n, held,
			                      &de)) {
				violation(s, "server %u's log does not reopen: %s", k, de.msg);
				continue;
			}
			for (uint32_t i = 0; i < s->committed_n; i++)
				on[i] += held[i];
		}
		/* lost: on no disk; with every server up: on fewer than a majority */
		unsigned up = 0;
		for (unsigned k = 0; k < s->nsrv; k++)
			up += iod_simdisk_up(s->disk[k]);
		for (uint32_t i = 0; on && held && i < s->committed_n; i++)
			if (on[i] == 0 || (up == s->nsrv && on[i] <= s->nsrv / 2))
				violation(
				    s,
				    "committed write at index %llu is on %u of %u servers' disks",
				    (unsigned long long)s->committed[i], on[i], s->nsrv);
		r->disk_writes_checked = s->committed_n;
		free(on);
		free(held);
	}
	/* V6: every acknowledged Replica write is still there (or newer) */
	for (uint32_t i = 0; i < s->acks_n; i++) {
		json_t *o = iod_state_get(cp_state(s), IOD_STATE_REPLICA, s->acks[i].name);
		uint64_t rev = 0;
		if (o)
			iod_json_get_u64(o, "rev", &rev);
		if (!o || rev < s->acks[i].rev)
			violation(s, "acknowledged write of %s at rev %llu lost", s->acks[i].name,
			          (unsigned long long)s->acks[i].rev);
		json_decref(o);
	}
	if (s->leaderless_since && s->now - s->leaderless_since > r->leaderless_ns_max)
		r->leaderless_ns_max = s->now - s->leaderless_since;
	/* V6 invariants */
	if (r->gpu_util_busy > 1.0 + 1e-9)
		violation(s, "GPU busy %.4f of wall time > 1", r->gpu_util_busy);
	if (r->net_line_gbps > 0 && r->net_gbps_busy > r->net_line_gbps * (1 + 1e-9))
		violation(s, "NIC at %.1f Gbps over its %.1f Gbps line rate", r->net_gbps_busy,
		          r->net_line_gbps);
	if (r->steps_done > r->steps_total)
		violation(s, "steps done %llu > total %llu", (unsigned long long)r->steps_done,
		          (unsigned long long)r->steps_total);
	for (uint32_t i = 0; i < r->place_n; i++)
		for (uint32_t j = i + 1; j < r->place_n; j++)
			if (r->place[i].node == r->place[j].node &&
			    r->place[i].node != UINT32_MAX && (r->place[i].gpus & r->place[j].gpus))
				violation(s, "%s and %s share a GPU on node %u",
				          r->place[i].replica, r->place[j].replica,
				          r->place[i].node);
	slog(s, "end events=%llu done=%d steps=%llu/%llu violations=%u",
	     (unsigned long long)r->events, r->done, (unsigned long long)r->steps_done,
	     (unsigned long long)r->steps_total, r->invariant_violations);
	gnutls_hash_deinit(s->sha, digest);
	for (int i = 0; i < 32; i++)
		snprintf(r->log_sha256 + 2 * i, 3, "%02x", digest[i]);
	if (c->keep_log) {
		r->log = s->log.data;
		r->log_len = s->log.len;
		iod_buf_init(&s->log);
	}
	rc = s->err;
	json_decref(l.nodes);
	json_decref(l.services);
	json_decref(l.replicas);
	teardown(s);
	free(s);
	return rc;
}

void iod_simc_result_free(struct iod_simc_result *r)
{
	free(r->log);
	r->log = NULL;
}
