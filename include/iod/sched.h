/*
 * sched.h: the topology-aware scheduler, a pure core.
 *
 * Input: nodes (a topology shape, free capacity, labels, rack and zone) and
 * services (replicas and what each replica needs: GPUs, how they must be
 * linked, CPUs, memory, NIC bandwidth, a NUMA policy, pack or spread,
 * anti-affinity, gang). Output: for every replica a placement (node, GPU ids,
 * CPU set, NUMA node for memory, NIC) or a precise reason it cannot be
 * placed, and for every decision the top candidates with each score term.
 *
 * The scheduler filters nodes, scores the feasible ones with weighable terms
 * and binds the best. A node's best GPU set is an exact search over the
 * combinations of its free GPUs (at most IOD_SCHED_NODE_GPUS_MAX), memoized
 * per shape and free mask, so 10,000 replicas onto 1,000 nodes take well
 * under a second on one core. See docs/scheduler.md.
 *
 * It never reads the clock, does no I/O, draws no randomness and iterates in
 * index order: the same input gives byte-identical output. Replica names are
 * "<service>-<ordinal>" with 0-based ordinals.
 */
#ifndef IOD_SCHED_H
#define IOD_SCHED_H

#include "iod/base.h"

struct iod_spec_service;
struct iod_topo_node;

/* ---- policies ----------------------------------------------------------- */

/* NUMA alignment policies, as Kubernetes' Topology Manager names them. */
#define IOD_SCHED_NUMA_POLICIES(X)                                                       \
	X(NONE, "none")               /* no alignment: CPUs and memory from anywhere */  \
	X(BEST_EFFORT, "best-effort") /* prefer aligned; place anyway */                 \
	X(RESTRICTED, "restricted")   /* GPUs on the fewest NUMA nodes possible and    \
	                                 CPUs/memory/NIC from those nodes, or refuse */ \
	X(SINGLE, "single-numa-node") /* everything on one NUMA node, or refuse */

enum iod_sched_numa {
#define X(n, s) IOD_SCHED_NUMA_##n,
	IOD_SCHED_NUMA_POLICIES(X)
#undef X
};
const char *iod_sched_numa_name(enum iod_sched_numa p);
int iod_sched_numa_parse(const char *s, enum iod_sched_numa *out);

/* How a replica's GPUs must be linked. */
enum iod_sched_link {
	IOD_SCHED_LINK_ANY,    /* any set; the best-connected one is preferred */
	IOD_SCHED_LINK_NVLINK, /* every pair of the set joined by a direct NVLink */
	IOD_SCHED_LINK_PCIE,   /* no NVLink needed: GPUs without NVLink preferred */
};

/* Failure domains, for anti-affinity and spread. */
enum iod_sched_domain {
	IOD_SCHED_DOMAIN_NONE,
	IOD_SCHED_DOMAIN_NODE,
	IOD_SCHED_DOMAIN_RACK,
	IOD_SCHED_DOMAIN_ZONE,
};
const char *iod_sched_domain_name(enum iod_sched_domain d);

/* ---- score terms --------------------------------------------------------- */

/*
 * Every term scores a candidate from 0 (worst) to IOD_SCHED_TERM_MAX (best);
 * a candidate's total is the weighted sum. Terms that do not apply to a
 * request (numa under policy none, nic for a replica without GPUs or NIC
 * bandwidth) score the maximum for every candidate, so they never decide.
 */
#define IOD_SCHED_TERM_MAX 1000
#define IOD_SCHED_TERMS(X)                                                                \
	X(GPU, "gpu-set", 3)   /* average pair score of the GPU set / best in cluster */  \
	X(NUMA, "numa", 2)     /* CPUs, memory, NIC on the GPUs' NUMA nodes; few nodes */ \
	X(FRAG, "frag", 2)     /* free GPUs left in NVLink islands this breaks */         \
	X(SPREAD, "spread", 3) /* stateful/spread: few replicas of the service nearby */  \
	X(PACK, "pack", 1)     /* pack: fuller nodes first; spread: emptier first */      \
	X(NIC, "nic", 1)       /* NIC on the GPUs' PCIe switch, NUMA node, elsewhere */

enum iod_sched_term {
#define X(n, s, w) IOD_SCHED_TERM_##n,
	IOD_SCHED_TERMS(X)
#undef X
	    IOD_SCHED_TERMS_N
};
const char *iod_sched_term_name(enum iod_sched_term t);

struct iod_sched_weights {
	uint32_t w[IOD_SCHED_TERMS_N]; /* weight of each term; 0 switches it off */
};
/* The defaults from IOD_SCHED_TERMS. */
void iod_sched_weights_default(struct iod_sched_weights *w);

/* ---- node topology as the scheduler sees it ----------------------------- */

struct iod_sched_nic {
	char name[IOD_NAME_MAX]; /* "mlx5_0" */
	int32_t numa;            /* NUMA node it hangs off; -1 unknown */
	uint32_t gpu_mask;       /* GPUs on its PCIe switch (GPUDirect RDMA peers) */
	uint64_t bw_bps;         /* line rate */
};

/* Accelerator units other than GPUs that a replica can be given whole. */
enum iod_sched_acc_type {
	IOD_SCHED_ACC_NONE, /* no accelerator requested */
	IOD_SCHED_ACC_DPU,  /* a DPU (BlueField): its Arm cores and DRAM */
	IOD_SCHED_ACC_FPGA, /* an FPGA card */
};
const char *iod_sched_acc_type_name(enum iod_sched_acc_type t);

struct iod_sched_acc {
	char name[IOD_NAME_MAX];      /* "NIC8" / "FPGA0" as topo labels it */
	char os_name[IOD_NAME_MAX];   /* "mlx5_8"; "" unknown */
	char pci[16];                 /* "0000:1d:00.0" */
	enum iod_sched_acc_type type; /* DPU or FPGA */
	int32_t numa;                 /* NUMA node; -1 unknown */
	uint64_t mem_bytes;           /* device memory; 0 unknown */
};

/*
 * A node model reduced to what placement needs. Built from a topo/ model by
 * iod_sched_shape_from_topo(), or by hand (tests). Nodes of the same model
 * share one shape, and the GPU-set search is memoized per shape.
 */
struct iod_sched_shape {
	char model[IOD_NAME_MAX]; /* model name */
	uint32_t gpus_n;          /* GPUs */
	uint32_t numa_n;          /* NUMA nodes */
	uint32_t nics_n;          /* NICs */
	uint16_t pair_score[IOD_SCHED_NODE_GPUS_MAX]
	                   [IOD_SCHED_NODE_GPUS_MAX]; /* go-gpuallocator pair scores */
	uint32_t nvlink[IOD_SCHED_NODE_GPUS_MAX];     /* bit j: GPU i and j share a direct NVLink */
	uint32_t island[IOD_SCHED_NODE_GPUS_MAX];     /* GPUs of GPU i's NVLink island (incl. i) */
	int32_t gpu_numa[IOD_SCHED_NODE_GPUS_MAX];    /* NUMA node of each GPU */
	struct iod_bitmap numa_cpus[IOD_SCHED_NUMA_MAX]; /* PUs of each NUMA node */
	uint64_t numa_mem_bytes[IOD_SCHED_NUMA_MAX];     /* memory of each NUMA node */
	struct iod_sched_nic nics[IOD_SCHED_NICS_MAX];   /* NICs in PCI order */
	uint64_t gpu_mem_bytes[IOD_SCHED_NODE_GPUS_MAX]; /* memory of each GPU; 0 unknown */
	uint32_t accs_n;                                 /* accelerators */
	struct iod_sched_acc accs[IOD_SCHED_ACCS_MAX];   /* DPUs and FPGAs in PCI order */
};

/* A shape with gpus_n GPUs, no links, numa_n NUMA nodes and nothing else. */
void iod_sched_shape_init(struct iod_sched_shape *s, const char *model, uint32_t gpus_n,
                          uint32_t numa_n);
/* Derive islands from nvlink[] (connected components); call after editing links. */
void iod_sched_shape_finish(struct iod_sched_shape *s);
/* Reduce a topo/ model. -E2BIG when it exceeds the scheduler's limits. */
int iod_sched_shape_from_topo(const struct iod_topo_node *t, struct iod_sched_shape *out,
                              struct iod_err *e);

/* ---- nodes --------------------------------------------------------------- */

struct iod_sched_label {
	char key[IOD_NAME_MAX];   /* "gpu" */
	char value[IOD_NAME_MAX]; /* "h100" */
};

struct iod_sched_node_spec {
	const char *name;                     /* unique node name */
	uint32_t shape;                       /* from iod_sched_shape_add() */
	const char *rack;                     /* failure domain; NULL = its own rack */
	const char *zone;                     /* failure domain; NULL = zone "default" */
	const struct iod_sched_label *labels; /* labels_n of them */
	uint32_t labels_n;
	bool cordoned;      /* takes no new replicas */
	uint32_t gpus_used; /* GPUs already taken outside the scheduler (mask) */
	uint32_t accs_used; /* accelerators already taken (mask over shape accs) */
};

/* ---- requests ------------------------------------------------------------ */

/* What every replica of one service needs, and how they are placed. */
struct iod_sched_request {
	char service[IOD_NAME_MAX]; /* service name; replicas are "<service>-<ordinal>" */
	uint32_t replicas;          /* how many */
	uint32_t gpus;              /* GPUs per replica, all on one node */
	uint64_t gpu_mem_bytes;     /* memory each of its GPUs must have; 0 = any */
	enum iod_sched_link gpu_link;
	enum iod_sched_acc_type acc_type; /* accelerators wanted besides GPUs */
	uint32_t accs;                    /* how many, whole, on the same node */
	uint64_t acc_mem_bytes;           /* memory each must have; 0 = any */
	uint32_t cpus;                    /* exclusive CPUs (PUs) per replica */
	uint64_t mem_bytes;               /* host memory per replica */
	uint64_t nic_bw_bps;              /* NIC bandwidth per replica; 0 = none reserved */
	enum iod_sched_numa numa;         /* Topology Manager policy */
	bool spread;                      /* spread over nodes instead of packing */
	bool stateful;                    /* spread across failure domains (soft) */
	enum iod_sched_domain anti;       /* hard: at most one replica per domain */
	bool gang;                        /* all replicas or none */
	struct iod_sched_label selector[IOD_SCHED_LABELS_MAX]; /* node must have all */
	uint32_t selector_n;
};

/*
 * From a spec service: gpu (or compute.count of tensor-/cuda-cores) and
 * gpu_mem (or compute.memory), compute.count of dpu/fpga units, cpu
 * rounded up to whole CPUs, mem, network.bandwidth; placement.numa single ->
 * single-numa-node, any -> best-effort, none, restricted; spread;
 * anti-affinity; gang;
 * stateful from type.
 */
int iod_sched_request_from_spec(const struct iod_spec_service *s, struct iod_sched_request *out,
                                struct iod_err *e);

/* ---- results ------------------------------------------------------------- */

/* Why a replica was not placed (X-macro: enum + names). */
#define IOD_SCHED_REASONS(X)                                                            \
	X(NONE, "placed")                                                               \
	X(NO_NODES, "no-nodes")             /* the cluster has no schedulable node */   \
	X(LABELS, "labels")                 /* no node has the selector's labels */     \
	X(ANTI_AFFINITY, "anti-affinity")   /* every domain with room has one */        \
	X(NODE_TOO_SMALL, "node-too-small") /* no node has that many GPUs at all */     \
	X(GPUS, "gpus")                     /* not enough free GPUs on one node */      \
	X(GPU_MEMORY, "gpu-memory")         /* not enough free GPUs with the memory */  \
	X(GPU_LINK, "gpu-link")             /* not enough NVLink-joined free GPUs */    \
	X(NUMA, "numa")                     /* the NUMA policy cannot be met */         \
	X(CPUS, "cpus")                     /* not enough free CPUs */                  \
	X(MEMORY, "memory")                 /* not enough free memory */                \
	X(NIC, "nic")                       /* not enough free NIC bandwidth */         \
	X(ACCELERATORS, "accelerators")     /* not enough free DPUs/FPGAs */            \
	X(GANG, "gang")                     /* a sibling could not be placed */         \
	X(TRANSACTION, "transaction")       /* strict deploy: another service failed */ \
	X(NODE_FULL, "node-full")           /* every node runs as many as its agent can */

enum iod_sched_reason {
#define X(n, s) IOD_SCHED_REASON_##n,
	IOD_SCHED_REASONS(X)
#undef X
	    IOD_SCHED_REASONS_N
};
const char *iod_sched_reason_name(enum iod_sched_reason r);

/* One scored candidate: a node and the GPU set it would give. */
struct iod_sched_candidate {
	uint32_t node;                    /* node id */
	uint32_t gpu_mask;                /* GPUs it would take */
	uint32_t acc_mask;                /* accelerators it would take */
	int32_t mem_numa;                 /* NUMA node for memory; -1 interleaved */
	int32_t terms[IOD_SCHED_TERMS_N]; /* each term, 0..IOD_SCHED_TERM_MAX */
	int64_t total;                    /* weighted sum */
};

/* The record `iod explain` prints: how the decision was made. */
struct iod_sched_explain {
	uint32_t evaluated; /* nodes scored (past the free-GPU and anti-affinity pre-filters) */
	uint32_t feasible;  /* nodes that passed every filter */
	uint32_t cand_n;    /* top candidates kept, best first */
	struct iod_sched_candidate cand[IOD_SCHED_EXPLAIN_TOP];
	struct iod_sched_weights weights; /* the weights in force */
};

struct iod_sched_placement {
	char name[IOD_NAME_MAX];        /* "<service>-<ordinal>" */
	uint32_t request;               /* index into svc (= the request's index
	                                    when the result was fresh) */
	uint32_t ordinal;               /* 0-based */
	bool placed;                    /* false: see reason and why */
	uint32_t replica;               /* cluster replica id (placed only) */
	uint32_t node;                  /* node id (placed only) */
	uint32_t gpu_mask;              /* GPU ids on that node */
	uint32_t acc_mask;              /* accelerators (indexes into the shape's accs) */
	struct iod_bitmap cpus;         /* exclusive PUs */
	struct iod_bitmap cpu_affinity; /* where it runs: cpus when it has exclusive
	                                   PUs, else the (shared) PUs of the NUMA
	                                   nodes of its GPUs and memory */
	int32_t mem_numa;               /* NUMA node of its memory; -1 interleaved/none */
	int32_t nic;                    /* NIC index on the node; -1 none */
	enum iod_sched_reason reason;   /* NONE when placed */
	char why[IOD_SCHED_WHY_MAX];    /* the precise reason, one line */
	struct iod_sched_explain explain;
};

/* One service's outcome in a deploy. */
struct iod_sched_service_result {
	char service[IOD_NAME_MAX];   /* name */
	uint32_t requested;           /* replicas asked for */
	uint32_t placed;              /* replicas placed (after gang/transaction rollback) */
	enum iod_sched_reason reason; /* first reason a replica was not placed */
	char why[IOD_SCHED_WHY_MAX];  /* its message */
};

struct iod_sched_result {
	struct iod_sched_placement *p;        /* n placements, request order then ordinal */
	uint32_t n;                           /* used */
	uint32_t cap;                         /* allocated */
	uint32_t placed_n;                    /* replicas placed */
	uint32_t unplaced_n;                  /* replicas not placed */
	struct iod_sched_service_result *svc; /* one per request placed */
	uint32_t svc_n;                       /* used */
	uint32_t svc_cap;                     /* allocated */
	bool rolled_back;                     /* strict deploy undone */
};

/* Room for cap placements and svc_cap services. */
int iod_sched_result_init(struct iod_sched_result *r, uint32_t cap, uint32_t svc_cap);
void iod_sched_result_free(struct iod_sched_result *r);

/* ---- the cluster and placing --------------------------------------------- */

struct iod_sched_cluster;

struct iod_sched_opts {
	struct iod_sched_weights weights; /* score weights */
	bool strict;                      /* all services or none (one transaction) */
	uint32_t explain_top; /* candidates kept per decision, <= IOD_SCHED_EXPLAIN_TOP */
	bool no_cache;        /* evaluate every node afresh for every replica (tests
	                         check the per-node cache changes no decision) */
};
void iod_sched_opts_default(struct iod_sched_opts *o);

/* Room for nodes_max nodes and replicas_max placed replicas. */
int iod_sched_cluster_new(uint32_t nodes_max, uint32_t replicas_max, struct iod_sched_cluster **out,
                          struct iod_err *e);
void iod_sched_cluster_free(struct iod_sched_cluster *c);
/* Register a shape (copied); *id names it for nodes. */
int iod_sched_shape_add(struct iod_sched_cluster *c, const struct iod_sched_shape *s, uint32_t *id,
                        struct iod_err *e);
int iod_sched_node_add(struct iod_sched_cluster *c, const struct iod_sched_node_spec *n,
                       uint32_t *id, struct iod_err *e);
uint32_t iod_sched_node_count(const struct iod_sched_cluster *c);
const char *iod_sched_node_name(const struct iod_sched_cluster *c, uint32_t node);
const struct iod_sched_shape *iod_sched_node_shape(const struct iod_sched_cluster *c,
                                                   uint32_t node);
/* Free GPUs of a node (mask). */
uint32_t iod_sched_node_gpus_free(const struct iod_sched_cluster *c, uint32_t node);
int iod_sched_node_cordon(struct iod_sched_cluster *c, uint32_t node, bool cordoned);

/*
 * Place every replica of reqs[0..n) in request order (the spec's order is
 * the deploy's priority). Placed replicas are bound into the cluster. Gang
 * services are all or none; with opts->strict the whole deploy is. Returns 0
 * whether or not everything fit (see res->unplaced_n); -EINVAL for an
 * invalid request (message in e), -ENOSPC when res or the cluster's replica
 * table is too small.
 */
int iod_sched_place(struct iod_sched_cluster *c, const struct iod_sched_request *reqs, uint32_t n,
                    const struct iod_sched_opts *opts, struct iod_sched_result *res,
                    struct iod_err *e);
/* A placement that already exists (read back from the cluster state). */
struct iod_sched_existing {
	uint32_t ordinal;       /* the replica's ordinal */
	uint32_t node;          /* node id */
	uint32_t gpu_mask;      /* its GPUs */
	uint32_t acc_mask;      /* its accelerators */
	struct iod_bitmap cpus; /* its PUs */
	int32_t mem_numa;       /* its memory's NUMA node; -1 interleaved */
	int32_t nic;            /* its NIC; -1 none */
};

/*
 * Bind an existing placement of service r (so a restarted control plane, or
 * a rebalancing plan, starts from the current state). The resources must be
 * free: -EBUSY names what is taken; -ENOENT for an unknown node or NIC.
 * Later placements of the service continue after the highest ordinal seen.
 */
int iod_sched_adopt(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                    const struct iod_sched_existing *x, uint32_t *replica, struct iod_err *e);
/* Remove a placed replica and give its resources back. */
int iod_sched_release(struct iod_sched_cluster *c, uint32_t replica);

/* A placed replica as the cluster holds it. */
struct iod_sched_replica_info {
	char name[IOD_NAME_MAX]; /* "<service>-<ordinal>" */
	uint32_t node;           /* node id */
	uint32_t gpu_mask;       /* GPUs */
	uint32_t acc_mask;       /* accelerators */
	struct iod_bitmap cpus;  /* PUs */
	int32_t mem_numa;        /* memory NUMA node; -1 interleaved */
	int32_t nic;             /* NIC index; -1 none */
	const char *service;     /* its service's name (owned by the cluster) */
};
/* 0 and *out for a live replica id, -ENOENT otherwise. */
int iod_sched_replica_get(const struct iod_sched_cluster *c, uint32_t replica,
                          struct iod_sched_replica_info *out);

/* ---- rebalancing --------------------------------------------------------- */

enum iod_sched_goal {
	IOD_SCHED_GOAL_ISLANDS, /* free as many whole NVLink islands as possible */
	IOD_SCHED_GOAL_DRAIN,   /* move every replica off one node */
};

struct iod_sched_move {
	uint32_t replica;        /* replica id */
	char name[IOD_NAME_MAX]; /* replica name */
	uint32_t from_node;      /* where it runs */
	uint32_t from_gpus;      /* its GPUs there */
	uint32_t to_node;        /* where it should run */
	uint32_t to_gpus;        /* its GPUs there */
};

struct iod_sched_plan {
	struct iod_sched_move moves[IOD_SCHED_MOVES_MAX]; /* n moves, in order */
	uint32_t n;
	uint32_t islands_before;     /* whole free NVLink islands before the moves */
	uint32_t islands_after;      /* and after */
	uint32_t stuck;              /* drain: replicas that have nowhere to go */
	char why[IOD_SCHED_WHY_MAX]; /* what the plan achieves or why it is short */
};

/*
 * Propose at most max_moves (<= IOD_SCHED_MOVES_MAX) moves that improve the
 * goal; never breaks anti-affinity or a NUMA policy. With apply the moves are
 * bound into the cluster; otherwise the cluster is left as it was.
 */
int iod_sched_rebalance(struct iod_sched_cluster *c, enum iod_sched_goal goal, uint32_t drain_node,
                        uint32_t max_moves, bool apply, struct iod_sched_plan *plan,
                        struct iod_err *e);
/* Whole free NVLink islands in the cluster (a GPU without NVLink is an island). */
uint32_t iod_sched_islands_free(const struct iod_sched_cluster *c, uint32_t min_size);

/* ---- output -------------------------------------------------------------- */

/* The placement table and the unplaced replicas with reasons, as text. */
int iod_sched_result_format(const struct iod_sched_cluster *c, const struct iod_sched_result *r,
                            struct iod_buf *out);
/* The same as JSON, with each decision's explanation. */
json_t *iod_sched_result_to_json(const struct iod_sched_cluster *c,
                                 const struct iod_sched_result *r);
/* One placement's explanation as JSON (what the control plane persists). */
json_t *iod_sched_explain_to_json(const struct iod_sched_cluster *c,
                                  const struct iod_sched_explain *x);
/* Print a persisted explanation (the JSON above) as text for `iod explain`:
 * one line per candidate with every term; -EINVAL if it is not one. */
int iod_sched_explain_format_json(const json_t *explain, struct iod_buf *out);
/* A node's accelerators in mask as a JSON array of {name, type, os_name, pci}. */
json_t *iod_sched_accs_to_json(const struct iod_sched_cluster *c, uint32_t node, uint32_t mask);
/* A mask as an index list ("0-3,6"), as Replica objects store GPUs, and
 * back (indexes 32 and up ignored; 0 for NULL or a list that does not parse). */
void iod_sched_mask_format(uint32_t mask, char *buf, size_t len);
uint32_t iod_sched_mask_parse(const char *list);
/* A GPU mask as "GPU0, GPU3" (or "none"). */
void iod_sched_gpus_format(uint32_t mask, char *buf, size_t len);

#endif
