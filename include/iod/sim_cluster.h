/*
 * sim_cluster.h: the whole-cluster simulator (`iod sim --nodes N --gpus G`).
 *
 * One discrete-event loop in virtual nanoseconds, driven by one seed, hosts
 * a cluster of N nodes, each an iod_topo_node from the built-in models, and
 * runs the production cores over it: the state machine (src/state), the
 * controller's deploy and lost-node rescheduling plans (src/ctrl) with the
 * topology-aware scheduler (src/sched) behind them, and per node the
 * agent's desired-set builder and reconciler (src/agent/desired.c,
 * reconcile.c) over simulated processes (start latency, crash, exit). Leases
 * and their expiry use the production timers (the agent's and server's
 * defaults, passed in by the shell). A data-parallel training job runs on
 * what the scheduler placed: per-step compute from a calibration table of
 * published figures, gradients as a ring all-reduce under an alpha-beta
 * model per link class (NVLink, PCIe, NIC) taken from the nodes' topology,
 * checkpoints, seeded faults, detection, rescheduling, restore and resume.
 *
 * Baselines are policies beside iod's own (struct iod_simc_policy): the
 * Kubernetes default (count-only GPU placement, kubelet and node-controller
 * timers) is one; no result is ever written down, every figure comes out of
 * the run.
 *
 * Everything here is a pure core: no wall clock, no I/O, no rand(). Every
 * event is appended to a log whose SHA-256 identifies the run: the same
 * config and seed give the same bytes. docs/simulation.md says what is
 * modelled and what is not.
 */
#ifndef IOD_SIM_CLUSTER_H
#define IOD_SIM_CLUSTER_H

#include "iod/base.h"

/* ---- limits ----------------------------------------------------------------- */

/* Raft servers of the simulated control plane. */
#define IOD_SIMC_SERVERS_MAX 5
/* Control-plane writes in flight at once (each node renews, registers). */
#define IOD_SIMC_PROPS_MAX (4 * IOD_SIMC_NODES_MAX + 256)
/* Acknowledged Replica writes checked at the end (V6: none lost). */
#define IOD_SIMC_ACKS_MAX 4096
/* Nodes a run holds: the scale benchmark's 1,024 with room to spare. */
#define IOD_SIMC_NODES_MAX 2048
/* GPUs one job may ask for (the scheduler places at most this many replicas). */
#define IOD_SIMC_JOB_GPUS_MAX 8192
/* Scripted faults in one config. */
#define IOD_SIMC_FAULTS_MAX 64
/* Pending events: every node keeps a handful (lease renewal, reconciler,
 * processes), the job one or two. */
#define IOD_SIMC_EVENTS_MAX (16 * IOD_SIMC_NODES_MAX + 1024)
/* Replicas one node runs (a node holds one training rank per GPU at most). */
#define IOD_SIMC_NODE_REPLICAS_MAX 16
/* Failures whose recovery phases are kept (the counts go on past it). */
#define IOD_SIMC_RECOVERIES_MAX 256

/* ---- calibration and models ------------------------------------------------- */

enum iod_simc_precision { IOD_SIMC_AMP, IOD_SIMC_TF32, IOD_SIMC_FP32 };
const char *iod_simc_precision_name(enum iod_simc_precision p);
int iod_simc_precision_parse(const char *s, enum iod_simc_precision *out);

/*
 * One published training throughput: model, GPU, precision, images per
 * second on 1 GPU and on 8 GPUs of one machine, the per-GPU batch it was
 * measured with, and where it was published. The simulator calibrates from
 * the 1-GPU figure only; the 8-GPU figure is kept to validate against (V3)
 * and never enters a prediction.
 */
struct iod_simc_calib {
	const char *model;            /* "resnet50" */
	const char *gpu;              /* "a100", "v100", "h100" */
	enum iod_simc_precision prec; /* AMP, TF32, FP32 */
	double items_per_s_1gpu;      /* published 1-GPU throughput */
	double items_per_s_8gpu;      /* published 8-GPU (one machine) throughput; 0 none */
	uint32_t batch_per_gpu;       /* the batch it was measured at */
	const char *source;           /* the publication */
};
/* The shipped table (n entries). */
const struct iod_simc_calib *iod_simc_calib_table(uint32_t *n);
/* The entry for model on gpu at prec, or NULL. */
const struct iod_simc_calib *iod_simc_calib_find(const char *model, const char *gpu,
                                                 enum iod_simc_precision prec);
/* The calibration key of a GPU from its model string ("NVIDIA A100-SXM4-80GB" ->
 * "a100"); NULL when none is known. */
const char *iod_simc_gpu_key(const char *device_model);

/* What a model's gradient exchange and data set weigh. */
struct iod_simc_model {
	const char *name;       /* "resnet50" */
	uint64_t params;        /* trainable parameters */
	uint32_t grad_bytes;    /* bytes per gradient element on the wire */
	uint64_t dataset_items; /* items in one epoch */
	const char *source;     /* where the figures come from */
};
const struct iod_simc_model *iod_simc_model_find(const char *name);

/* ---- collective model ------------------------------------------------------- */

/* Link classes of the alpha-beta model. */
#define IOD_SIMC_LINKS(X)                                      \
	X(NVLINK, "nvlink") /* NVLink or NVSwitch */           \
	X(PCIE, "pcie")     /* PCIe or the CPU interconnect */ \
	X(NIC, "nic")       /* across nodes, through the NICs */

enum iod_simc_link_class {
#define X(n, s) IOD_SIMC_LINK_##n,
	IOD_SIMC_LINKS(X)
#undef X
	    IOD_SIMC_LINK_CLASSES
};
const char *iod_simc_link_name(enum iod_simc_link_class c);

/* One edge of a ring: per-message latency and bandwidth, one direction. */
struct iod_simc_edge {
	enum iod_simc_link_class cls; /* which class */
	double alpha_s;               /* latency per step (seconds) */
	double bw_Bps;                /* bandwidth (bytes/second) */
};

/*
 * A ring all-reduce of bytes over n ranks whose ring edges are e[0..n-1]
 * (e[i] carries rank i to rank i+1 mod n): 2(n-1) steps, in each every rank
 * sends bytes/n to its neighbour at once, so a step takes the slowest edge's
 * alpha + (bytes/n)/bw. On identical edges this is the nccl-tests formula
 * 2(n-1)a + 2(n-1)/n * S/B. Seconds; 0 for n < 2.
 */
double iod_simc_ring_allreduce_s(const struct iod_simc_edge *e, uint32_t n, uint64_t bytes);
/* nccl-tests: algbw = S / t, busbw = algbw * 2(n-1)/n (bytes/second). */
double iod_simc_algbw(uint64_t bytes, double t_s);
double iod_simc_busbw(uint64_t bytes, double t_s, uint32_t n);

/* Alpha per link class (seconds); defaults in iod_simc_config_default. */
struct iod_simc_alpha {
	double s[IOD_SIMC_LINK_CLASSES]; /* indexed by enum iod_simc_link_class */
};

struct iod_topo_node;
/* The ring edge from GPU a to GPU b of one node: NVLink when bonded, else
 * PCIe (the topology's class), the topology's bandwidth, and alpha from a
 * (0 for a class: the topology's link latency). */
void iod_simc_edge_gpus(const struct iod_topo_node *t, unsigned a, unsigned b,
                        const struct iod_simc_alpha *al, struct iod_simc_edge *out);
/* A node's NIC line rate summed over its NICs and ports (bytes/second). */
double iod_simc_node_nic_Bps(const struct iod_topo_node *t);

/* ---- the job ---------------------------------------------------------------- */

/* A native training job (docs/simulation.md "Job files"). */
struct iod_simc_job {
	char name[IOD_NAME_MAX];      /* service name the job deploys as */
	char model[IOD_NAME_MAX];     /* "resnet50" */
	enum iod_simc_precision prec; /* AMP (default), TF32, FP32 */
	uint32_t gpus;                /* total GPUs (data-parallel ranks) */
	uint32_t gpus_per_replica;    /* GPUs per replica (0: the node's GPUs, capped at gpus) */
	uint32_t batch_per_gpu;       /* 0: the calibration's batch */
	uint64_t steps;               /* steps to run (0: from epochs) */
	double epochs;                /* epochs when steps is 0 */
	uint32_t dp;                  /* data-parallel degree (0 = gpus); must equal gpus */
	uint32_t tp, pp;              /* tensor/pipeline degrees: only 1 is modelled */
	uint64_t ckpt_every_steps;    /* checkpoint interval in steps (0: none) */
	/* an imported workload (iod_simc_job_apply_astra): when step_compute_s
	 * > 0 it is every rank's compute per step (times its speed factor)
	 * instead of batch / the calibrated 1-GPU rate, and grad_bytes the
	 * all-reduce per step instead of the model's parameters x 4 bytes */
	double step_compute_s;       /* 0: from the calibration table */
	uint64_t grad_bytes;         /* 0: from the model */
	char workload[IOD_NAME_MAX]; /* where it came from ("" none) */
};
void iod_simc_job_default(struct iod_simc_job *j);
/* A job file (YAML through src/base/yaml.c): errors carry file:line:col. */
int iod_simc_job_parse_yaml(struct iod_simc_job *j, const char *text, size_t len, const char *file,
                            struct iod_err *e);
/*
 * An ASTRA-sim (1.0) text workload: line 1 the parallelism, line 2 the
 * number of layers, then one line per layer of 12 fields: name, reserved,
 * forward compute, forward comm type and size, input-gradient compute, comm
 * type and size, weight-gradient compute, comm type and size, update delay.
 * Compute times are in cycles, sizes in bytes. Only DATA parallelism is
 * modelled: forward and input-gradient comm must be NONE, weight-gradient
 * comm ALLREDUCE or NONE; anything else is refused naming the line and the
 * field (file:line: field N (what): ...). Pure: text in, sums out.
 */
struct iod_simc_astra {
	char parallel[32];         /* "DATA" */
	uint32_t layers;           /* layer lines read */
	uint64_t fwd_cycles;       /* sums over the layers */
	uint64_t ig_cycles;        /* input-gradient compute */
	uint64_t wg_cycles;        /* weight-gradient compute */
	uint64_t update_cycles;    /* the per-layer update delays */
	uint64_t allreduce_bytes;  /* the weight-gradient ALLREDUCE sizes */
	uint32_t allreduce_layers; /* layers with one */
};
int iod_simc_astra_parse(const char *text, size_t len, const char *file, struct iod_simc_astra *out,
                         struct iod_err *e);
/* The job's step from a parsed workload at cycle_ns nanoseconds per cycle:
 * compute = (fwd + ig + wg + update) cycles x cycle_ns, all-reduce = the
 * ALLREDUCE bytes. -EINVAL when it has no compute or cycle_ns <= 0. */
int iod_simc_job_apply_astra(struct iod_simc_job *j, const struct iod_simc_astra *a,
                             double cycle_ns, const char *name, struct iod_err *e);
/* Checks a job against the tables: model known, degrees supported. */
int iod_simc_job_check(const struct iod_simc_job *j, struct iod_err *e);

/* ---- policies (iod's own and the baselines) --------------------------------- */

/*
 * iod: iod's scheduler, controller and timers. k8s: the Kubernetes default
 * (count-only GPU placement, one pod at a time on a random fitting node).
 * k8s-topo: Kueue's topology-aware scheduling on Kubernetes: the job's pods
 * as one gang, packed by BestFit into the fewest topology domains (one node
 * if one fits, else one rack, else the fewest racks; rack = node /
 * rack_nodes), GPUs within a node still count-only, Kubernetes' timers,
 * ECMP only. docs/simulation.md, "Baselines".
 */
enum iod_simc_policy_kind { IOD_SIMC_POLICY_IOD, IOD_SIMC_POLICY_K8S, IOD_SIMC_POLICY_K8S_TOPO };
#define IOD_SIMC_POLICIES 3
const char *iod_simc_policy_name(enum iod_simc_policy_kind k);
/* "iod", "k8s", "k8s-topo"; -EINVAL otherwise. */
int iod_simc_policy_parse(const char *s, enum iod_simc_policy_kind *out);
/* k8s and k8s-topo: Kubernetes' timers and eviction path. */
bool iod_simc_policy_is_k8s(enum iod_simc_policy_kind k);
/*
 * Kueue TAS's BestFit over n domains of free capacity cap[] (in pods): take
 * the domain with the least capacity that holds all want pods; when none
 * does, take the one with the most and go on with the rest. take[i] gets
 * the pods put in domain i (ties: the lower index). 0, or -ENOSPC (take[]
 * then undefined) when the domains together hold fewer than want.
 */
int iod_simc_tas_bestfit(const uint32_t *cap, uint32_t n, uint32_t want, uint32_t *take);

/*
 * The timers in force. iod's come from the production defaults (the agent's
 * lease TTL and renewal, the server's lease check, the reconciler's
 * backoff), which the shell reads and passes in; Kubernetes' from its
 * documented defaults.
 */
struct iod_simc_timers {
	uint64_t lease_ttl_ns;         /* iod: node lease TTL; k8s: node-monitor grace period */
	uint64_t renew_ns;             /* iod: lease renewal; k8s: kubelet node status update */
	uint64_t check_ns;             /* iod: leader's lease check; k8s: node monitor period */
	uint64_t evict_ns;             /* k8s: toleration before eviction (0 for iod: at once) */
	uint64_t stateful_grace_ns;    /* iod: wait before moving a stateful replica */
	uint64_t restart_base_ns;      /* first restart delay after a crash */
	uint64_t restart_max_ns;       /* cap of the doubling delay */
	uint64_t commit_ns;            /* without Raft (servers 0): a write, proposal to applied */
	uint64_t watch_ns;             /* a watch event reaching an agent or controller */
	uint32_t election_ms;          /* Raft election timeout T (randomised in [T, 2T]) */
	uint32_t heartbeat_ms;         /* Raft heartbeat interval */
	uint64_t reroute_ns;           /* iod: a black-holed path is left after this (the adaptive
	                               routing core's probe timeout + interval); 0: no rerouting
	                               (ECMP only, the baseline) */
	uint64_t transport_timeout_ns; /* NCCL's IB transport gives up on a dead path after this
	                                  (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT): the rank fails */
};

/* ---- faults ----------------------------------------------------------------- */

/* gpu: the process on that GPU crashes; node: the node goes down until
 * repaired; server: a control-plane server (index in node) is killed;
 * leader: whichever server leads is killed; link: a fabric link on the
 * node's path black-holes its flows (a gray failure: the port stays up),
 * the fabric has other paths; nic: one of the node's NICs fails (a fatal
 * device error: the ranks using it fail at once), and a node that loses
 * its only NIC is cut off from the cluster; disk: a control-plane server's
 * (index in node) Raft log is damaged (damage) and the server restarts:
 * iod's log (src/state/wal.c, on a memory file system) repairs a torn tail
 * and the server rejoins, or refuses and the server stays down until it is
 * rebuilt from a peer (--recover-from-peers). docs/simulation.md, "Faults". */
enum iod_simc_fault_kind {
	IOD_SIMC_FAULT_GPU,
	IOD_SIMC_FAULT_NODE,
	IOD_SIMC_FAULT_SERVER,
	IOD_SIMC_FAULT_LEADER,
	IOD_SIMC_FAULT_LINK,
	IOD_SIMC_FAULT_NIC,
	IOD_SIMC_FAULT_DISK
};
const char *iod_simc_fault_name(enum iod_simc_fault_kind k);
/* "gpu", "node", "server", "leader", "link", "nic", "disk"; -EINVAL otherwise. */
int iod_simc_fault_parse(const char *s, enum iod_simc_fault_kind *out);

/* A scripted fault: at at_ns, kind, on node (and GPU for a GPU fault). */
struct iod_simc_fault {
	uint64_t at_ns;                /* virtual time */
	enum iod_simc_fault_kind kind; /* GPU (process crash) or node (down) */
	uint32_t node;                 /* node index */
	uint32_t gpu;                  /* GPU index on the node (GPU faults) */
	uint64_t repair_ns;            /* server, node: down this long (0: the config's
	                                  server_repair_ns / node_repair_ns); disk: the
	                                  restart, and again the rebuild, take this long */
	uint32_t damage;               /* disk: enum iod_simdisk_damage (iod/state.h) */
};

/* A disk fault and what came of it. */
struct iod_simc_disk {
	uint32_t server;       /* its index */
	uint64_t at_ns;        /* when the log was damaged */
	uint32_t damage;       /* enum iod_simdisk_damage */
	int rc;                /* iod_wal_open at the restart: 0 starts, else refused */
	char why[256];         /* the refusal: file, offset, reason */
	uint64_t torn_bytes;   /* a torn tail's bytes repaired away */
	bool rebuilt;          /* refused, then rebuilt from a peer */
	uint64_t back_ns;      /* fault -> the server runs again (0: never in the run) */
	uint64_t caught_up_ns; /* fault -> it applied what was committed when it came back */
	uint64_t target_index; /* that commit index */
};
/* "repaired", "started" (nothing to repair), or "refused". */
const char *iod_simc_disk_verdict(const struct iod_simc_disk *d);

/* ---- a run ------------------------------------------------------------------ */

struct iod_simc_config {
	uint32_t nodes;                   /* nodes in the cluster */
	uint32_t gpus_per_node;           /* GPUs per node (generic-G unless node_model) */
	char node_model[IOD_NAME_MAX];    /* built-in topology model; "" = generic-<G> */
	struct iod_simc_job job;          /* the training job */
	uint64_t seed;                    /* the one seed */
	enum iod_simc_policy_kind policy; /* iod or a baseline */
	struct iod_simc_timers timers;    /* iod's timers (a baseline brings its own) */
	struct iod_simc_alpha alpha;      /* per link class latency */
	double nic_efficiency;            /* share of NIC line rate a collective gets */
	double overlap;                   /* share of backward time all-reduce hides behind */
	uint64_t bucket_bytes;            /* gradient bucket (the last one is never hidden) */
	uint64_t proc_start_ns;           /* process start (container + framework init) */
	double proc_start_jitter;         /* seeded +- share of proc_start_ns */
	double ckpt_Bps;                  /* checkpoint write/read bandwidth per node */
	double straggler_max;             /* per-GPU speed factor in [1, 1+this] (seeded) */
	double fault_per_gpu_hour;        /* random fault rate (0 = none) */
	double fault_gpu_share;           /* share of random faults that are GPU faults */
	double fault_link_share;          /* ... that are link faults (network switch, cable) */
	double fault_nic_share;           /* ... that are NIC faults (the rest: node faults) */
	uint64_t node_repair_ns;          /* a failed node (or NIC) comes back after this */
	uint64_t server_repair_ns;        /* a killed server is revived after this */
	uint32_t servers;                 /* control-plane servers on Raft's fixture (0: none,
	                                     writes commit after timers.commit_ns) */
	uint32_t net_latency_ms;          /* Raft message latency between servers */
	uint32_t disk_latency_ms;         /* Raft log append (fsync) latency */
	struct iod_simc_fault faults[IOD_SIMC_FAULTS_MAX]; /* scripted faults */
	uint32_t faults_n;                                 /* used entries */
	uint64_t horizon_ns;   /* stop here even if the job is not done */
	double requests_per_s; /* requests from the last node's mesh proxy to the job's service
	                          through the real LB and outlier detection (0: none) */
	bool keep_log;         /* keep the event log text (else only its hash) */
	bool calibrate;        /* the flow model's NIC steps scaled by the packet samples' ratio
	                 * (default true; docs/simulation.md, "Packet samples") */
	uint32_t packet_every; /* 1 iteration in this many runs its ring all-reduce's
	                          inter-node steps through the packet-level fabric
	                          simulator (src/sim/fabric.c) instead of the alpha-beta
	                          model (0: never) */
	uint32_t rack_nodes;   /* the topology-rack label: node i is in rack i / rack_nodes
	                          (default 4, DGX SuperPOD's 4 systems per rack); only
	                          k8s-topo reads it (the fabric has no rack distance) */
};

/*
 * Defaults: 4 nodes x 4 GPUs, ResNet-50 AMP, seed 1, iod's policy, the
 * Llama 3 fault rate (419 interruptions in 54 days on 16,384 GPUs), the
 * model constants docs/simulation.md lists. Timers are zero: the shell
 * fills iod's from the production defaults (iod_simc_timers_iod).
 */
void iod_simc_config_default(struct iod_simc_config *c);
/*
 * A chaos plan (include/iod/chaos.h, `iod sim --plan FILE`) as scripted
 * faults, on the schedule `iod chaos run --plan` keeps (the first fault
 * 2 s in, then each after the last one's end and the plan's interval,
 * while one fits in the plan's duration; sequence or drawn from seed, with
 * the same draws). kill and pause of servers (servers, server-N, leader)
 * are server faults down for the step's duration; kill of nodes (nodes,
 * node-N) is a node fault for that long. What the simulator cannot model
 * (partition, loss, delay, member, abort, pause of nodes, replica and
 * service selectors) is refused naming the step: -EINVAL, nothing added.
 * The faults are appended to c (nodes and servers must be set).
 */
struct iod_chaos_plan;
int iod_simc_plan_faults(const struct iod_chaos_plan *p, uint64_t seed, struct iod_simc_config *c,
                         struct iod_err *e);

/*
 * iod's timers from the production values: the agent's lease TTL and its
 * renewal (a third of it), the server's lease check, the reconciler's
 * restart backoff. The shell reads these from iod_agent_config_default()
 * and iod_server_config_default().
 */
void iod_simc_timers_iod(struct iod_simc_timers *t, uint64_t lease_ttl_ms, uint64_t lease_check_ms,
                         uint64_t heartbeat_ms, uint64_t stateful_grace_ms,
                         uint64_t restart_base_ns, uint64_t restart_max_ns);
/* iod_simc_timers_iod from the production configuration defaults (the
 * shell: src/sim/defaults.c). */
void iod_simc_timers_production(struct iod_simc_timers *t);
/*
 * A run on `nodes` nodes of the built-in topology `model` (hgx-a100-8, ...):
 * iod_simc_config_default, iod's production timers, gpus_per_node GPUs per
 * node (0: the model's) and the job on nodes x gpus_per_node of them. The
 * job's length and the fault rates are the caller's to set (the shell:
 * src/sim/defaults.c). One setup for the selftest, the tests and the bench.
 */
void iod_simc_config_model(struct iod_simc_config *c, const char *model, uint32_t nodes,
                           uint32_t gpus_per_node);
/* Kubernetes' documented defaults (docs/simulation.md cites each). */
void iod_simc_timers_k8s(struct iod_simc_timers *t);

/* One failure's recovery, phase by phase (ns). */
struct iod_simc_recovery {
	enum iod_simc_fault_kind kind; /* what failed */
	uint64_t at_ns;                /* when */
	uint64_t detect_ns;            /* fault -> the cluster knows (exit seen, lease expired) */
	uint64_t decide_ns;            /* -> a new placement is written (0: restart in place) */
	uint64_t start_ns;             /* -> every rank runs again */
	uint64_t restore_ns;           /* -> the checkpoint is loaded: training resumes */
	uint64_t rework_ns;            /* the steps since the checkpoint, computed again */
	uint64_t steps_lost;           /* those steps */
};

/* Where one replica of the job landed. */
struct iod_simc_place {
	char replica[IOD_NAME_MAX]; /* replica name */
	uint32_t node;              /* node index */
	uint64_t gpus;              /* GPU bitmask on the node */
};

struct iod_simc_result {
	/* the run */
	uint64_t events;     /* events processed */
	uint64_t sim_ns;     /* virtual time at the end */
	char log_sha256[65]; /* hex SHA-256 of the event log */
	char *log;           /* the log text when keep_log (malloc'd; free with _free) */
	size_t log_len;      /* its bytes */
	/* placement (the first one) */
	struct iod_simc_place place[IOD_SIMC_NODES_MAX / 4]; /* per replica */
	uint32_t place_n;                                    /* replicas */
	uint32_t nodes_used; /* distinct nodes of the first placement */
	char ring[256];      /* the ring's edge classes, e.g. "nvlink x6, pcie x1, nic x2" */
	/* the job */
	bool done;             /* finished within the horizon */
	uint64_t steps_done;   /* steps completed (kept) */
	uint64_t steps_total;  /* steps asked for */
	uint64_t job_start_ns; /* deploy */
	uint64_t job_end_ns;   /* last step (or the horizon) */
	double step_s;         /* one step, no faults (compute + exposed comm) */
	double compute_s;      /* its compute part (slowest rank) */
	double comm_s;         /* a whole all-reduce */
	double exposed_comm_s; /* the part of it not hidden behind backward */
	double items_per_s;    /* steady-state throughput */
	double busbw_Bps;      /* the all-reduce's busbw (nccl-tests) */
	/* utilisation over the job's GPUs and the job's wall time */
	double gpu_util_busy;    /* (compute + comm) / (GPUs x job time) */
	double gpu_util_compute; /* compute / (GPUs x job time) */
	double net_gbps_avg;     /* NIC bytes / job time, per node used, Gbps */
	double net_gbps_busy;    /* the same over the all-reduce periods only */
	double net_line_gbps;    /* per node NIC line rate */
	/* failures */
	uint32_t faults;                                       /* faults that happened */
	uint32_t faults_hit;                                   /* faults that hit the job */
	struct iod_simc_recovery rec[IOD_SIMC_RECOVERIES_MAX]; /* per hit */
	uint32_t rec_n;                                        /* entries */
	uint32_t unplaced;      /* replicas the scheduler could not place (last try) */
	char unplaced_why[256]; /* the scheduler's reason */
	/* the control plane */
	uint32_t elections;         /* leaders elected (Raft) */
	uint64_t leaderless_ns_max; /* the longest time without a leader */
	uint64_t writes_acked;      /* writes the control plane acknowledged */
	uint64_t raft_steps;        /* fixture steps (Raft ticks, messages, disk writes) */
	uint32_t server_faults;     /* servers killed */
	/* the mesh */
	uint64_t mesh_requests;  /* requests picked by the LB */
	uint64_t mesh_failed;    /* those that hit a dead endpoint */
	uint32_t mesh_ejections; /* endpoints outlier detection ejected */
	/* packet-level sampled iterations (packet_every) */
	uint64_t packet_samples;    /* iterations whose all-reduce ran packet by packet */
	double packet_comm_s;       /* their all-reduce, packet level (mean) */
	double flow_comm_s;         /* the same all-reduces under the alpha-beta model (mean) */
	double packet_diff_pct_max; /* the largest |packet - flow| / flow of one sample, % */
	uint64_t packet_events;     /* the fabric simulator's events, all samples */
	/* the calibrated flow model against the samples it had not yet learned
	 * from (every sample after the first): its prediction vs the packets */
	uint64_t calib_samples;    /* samples predicted by a calibrated model */
	double calib_comm_s;       /* the calibrated model's all-reduce at them (mean) */
	double calib_packet_s;     /* the packet-level all-reduce at them (mean) */
	double calib_diff_pct_max; /* the largest |packet - calibrated| / calibrated, % */
	double calib_abs_pct;      /* the mean of |packet - calibrated| / calibrated, % */
	double nic_cal;            /* the NIC class's factor at the end (1: none) */
	/* disk faults: wal.c's verdict on each damaged log */
	struct iod_simc_disk disk[IOD_SIMC_FAULTS_MAX]; /* per disk fault, in order */
	uint32_t disk_n;                                /* entries */
	uint32_t disk_writes_checked; /* committed writes checked on the disks at the end */
	/* invariants (V6) */
	uint32_t invariant_violations; /* count */
	char invariant_first[256];     /* the first one */
};

/*
 * Run one simulation. Returns 0 (the job may still be unfinished: see
 * done), -EINVAL for a bad config (e says what), -ENOMEM, -ENOSPC when a
 * bounded queue filled. progress, when set, is called about every
 * progress_every events with the virtual time and the steps done.
 */
typedef void iod_simc_progress_fn(void *ctx, uint64_t now_ns, uint64_t events, uint64_t steps_done,
                                  uint64_t steps_total);
int iod_simc_run(const struct iod_simc_config *c, struct iod_simc_result *r,
                 iod_simc_progress_fn *progress, void *ctx, struct iod_err *e);
void iod_simc_result_free(struct iod_simc_result *r);

/* ---- scenarios (`iod sim compare --scenario FILE`) -------------------------- */

/* A published claim to print beside the simulated rows: [0] iod, [1] k8s.
 * These are the claim's numbers, shown for comparison; no result is taken
 * from them. */
struct iod_simc_claims {
	bool set;               /* the scenario carries a claim */
	double task_min[2];     /* job completion time, minutes */
	double gpu_util_pct[2]; /* GPU utilisation, % */
	double net_gbps[2];     /* network throughput, Gbps */
	double recovery_s[2];   /* failure recovery, seconds */
	char source[256];       /* where the claim is published */
};

struct iod_simc_scenario {
	char name[IOD_NAME_MAX];       /* the scenario's name */
	struct iod_simc_config cfg;    /* cluster, job, faults (timers: the shell's) */
	uint32_t seeds;                /* seeds to run (1, 2, ...); 0 = 1 */
	struct iod_simc_claims claims; /* the published figures */
};
/*
 * A scenario file (YAML): name, cluster {nodes, gpus_per_node, node_model},
 * job {...as a job file}, faults [{at, kind, node, gpu}], seeds, claim
 * {source, iod {...}, k8s {...}}. Fields not given keep what sc holds (call
 * iod_simc_config_default first). Errors carry file:line:col.
 */
int iod_simc_scenario_parse_yaml(struct iod_simc_scenario *sc, const char *text, size_t len,
                                 const char *file, struct iod_err *e);

#endif
