/*
 * internal.h: the scheduler's private state, shared by its source files
 * (shapes.c: names, shapes, cluster, services; search.c: the GPU-set search;
 * eval.c: filter and score one node; bind.c: bind, adopt, release; diagnose.c;
 * place.c: choosing and placing a deploy; rebalance.c; format.c; convert.c).
 * Nothing outside src/sched/ includes it.
 */
#ifndef IOD_SCHED_INTERNAL_H
#define IOD_SCHED_INTERNAL_H

#include "iod/sched.h"

/* The best GPU set of one NUMA class: sets whose GPUs span exactly numa_mask. */
struct memo_class {
	uint32_t mask;      /* the GPU set */
	uint32_t score;     /* sum of its pair scores */
	uint64_t rest;      /* what it leaves free for later requests (rest_key in
	                       search.c: higher is better; go-gpuallocator) */
	uint16_t waste;     /* free GPUs left in whole islands it breaks, a wholly
	                       free node counting as an island */
	uint16_t waste_isl; /* the same, NVLink islands only (for spread requests) */
	uint8_t numa_mask;  /* NUMA nodes its GPUs sit on */
	uint8_t span;       /* popcount(numa_mask) */
	int8_t nic;         /* nearest NIC (PCIe switch, then NUMA), -1 none */
	uint8_t nic_aff;    /* 2: NIC on a GPU's switch, 1: same NUMA, 0: other */
};

/* The search result for one (free mask, k, link) key. */
struct memo_entry {
	uint32_t n;                                 /* classes */
	struct memo_class c[IOD_SCHED_CLASSES_MAX]; /* best first within a class */
};

struct shape {
	struct iod_sched_shape s;                      /* the public description */
	uint8_t min_span[IOD_SCHED_NODE_GPUS_MAX + 1]; /* fewest NUMA nodes any k GPUs span */
	uint32_t islands[IOD_SCHED_NODE_GPUS_MAX];     /* distinct island masks */
	uint32_t islands_n;
	uint32_t numa_cpus_n[IOD_SCHED_NUMA_MAX]; /* PUs per NUMA node */
	uint32_t cpus_n;                          /* PUs in all */
	struct iod_map memo;                      /* key -> struct memo_entry * */
	struct iod_arena arena;                   /* memo entries */
	uint64_t memo_hits, memo_misses;          /* for the benchmark's report */
};

struct node {
	char name[IOD_NAME_MAX];        /* unique */
	uint32_t shape;                 /* index into shapes */
	uint32_t rack, zone;            /* interned failure domains */
	struct iod_sched_label *labels; /* labels_n, in the cluster arena */
	uint32_t labels_n;
	bool cordoned;                              /* no new replicas */
	uint32_t gpu_free;                          /* free GPUs (mask) */
	struct iod_bitmap cpu_free;                 /* free PUs */
	uint32_t numa_cpu_free[IOD_SCHED_NUMA_MAX]; /* free PUs per NUMA node */
	uint64_t numa_mem_free[IOD_SCHED_NUMA_MAX]; /* free memory per NUMA node */
	uint64_t nic_free[IOD_SCHED_NICS_MAX];      /* free NIC bandwidth */
	uint32_t acc_free;                          /* free accelerators (mask) */
	uint32_t replicas;                          /* replicas bound here */
};

struct service {
	struct iod_sched_request req; /* the latest request */
	uint32_t next_ordinal;        /* ordinals continue after existing replicas */
	uint32_t live;                /* replicas bound */
};

struct replica {
	bool live;                             /* slot in use */
	uint32_t service;                      /* index into services */
	uint32_t ordinal;                      /* 0-based */
	uint32_t node;                         /* where */
	uint32_t gpu_mask;                     /* GPUs */
	uint32_t acc_mask;                     /* accelerators */
	struct iod_bitmap cpus;                /* PUs */
	uint64_t mem_take[IOD_SCHED_NUMA_MAX]; /* memory taken per NUMA node */
	int32_t mem_numa;                      /* reported NUMA node; -1 interleaved */
	int32_t nic;                           /* NIC; -1 none */
	uint64_t nic_bw_bps;                   /* bandwidth taken on it */
};

struct iod_sched_cluster {
	struct shape *shapes; /* shapes_n, each with its memo */
	uint32_t shapes_n;
	uint32_t pair_max;  /* highest pair score of any shape (gpu term scale) */
	struct node *nodes; /* nodes_n of nodes_max */
	uint32_t nodes_n, nodes_max;
	char (*domains)[IOD_NAME_MAX]; /* interned rack and zone names */
	uint32_t domains_n;            /* racks and zones share one table */
	struct iod_map domain_ids;     /* hash(kind, name) -> index + 1 */
	struct service *services;      /* services_n of services_cap */
	uint32_t services_n, services_cap;
	struct iod_map service_ids; /* hash(name) -> index + 1 */
	struct replica *replicas;   /* replicas_max slots */
	uint32_t replicas_max;
	uint32_t replicas_hw; /* slots ever used (scan bound) */
	uint32_t *free_ids;   /* stack of freed slots */
	uint32_t free_n;
	uint16_t *cnt_node, *cnt_rack, *cnt_zone; /* scratch: one service's replicas per domain */
	struct iod_arena arena;                   /* labels, names */
	struct cache_ent *cache; /* nodes_max: per-node evaluation for one service */
	uint32_t cache_gen;      /* entries with this generation are valid */
	uint64_t version;        /* bumped on every bind and unbind */
};

/* Stages a node passes through; a node that fails stops at one. */
enum stage {
	ST_CORDONED,
	ST_FULL,
	ST_LABELS,
	ST_ANTI,
	ST_SMALL,
	ST_GPUS,
	ST_GPU_MEM,
	ST_LINK,
	ST_NUMA,
	ST_CPUS,
	ST_MEM,
	ST_NIC,
	ST_ACC,
	ST_OK,
	ST_N
};

/* A fully evaluated candidate: what binding needs. */
struct cand {
	struct iod_sched_candidate pub; /* node, GPUs, terms, total */
	uint8_t numa_mask;              /* NUMA nodes of the chosen class */
	int32_t nic;                    /* chosen NIC */
};

/*
 * A node's evaluation for the service being placed: valid while the node's
 * state is unchanged (a bind there invalidates it). The spread term is kept
 * apart because it changes with every replica placed in the node's rack or
 * zone; anti-affinity is re-checked from the counts on every use.
 */
struct cache_ent {
	uint32_t gen;   /* == cluster cache_gen: valid */
	int32_t stage;  /* enum stage reached */
	struct cand cd; /* the candidate when stage == ST_OK */
	int64_t base;   /* cd's total without the spread term */
};

/* What eval_node learns about a node that fails (for reasons). */
struct near {
	uint64_t value; /* how close: free GPUs, CPUs, bytes, bps */
	uint32_t gpus;  /* the GPUs behind value, for GPU stages */
	int32_t where;  /* NUMA node or NIC, -1 none */
};

int sched_eval_node(struct iod_sched_cluster *c, uint32_t node_id,
                    const struct iod_sched_request *r, const struct iod_sched_weights *w,
                    struct cand *out, struct near *near);
int sched_bind(struct iod_sched_cluster *c, uint32_t svc, uint32_t ordinal, const struct cand *cd,
               uint32_t *replica_id);
void sched_counts_load(struct iod_sched_cluster *c, uint32_t svc);
void sched_counts_add(struct iod_sched_cluster *c, uint32_t node_id, int delta);
/* Find the best candidate for r over all nodes except `skip` (UINT32_MAX: none). */
bool sched_best(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                const struct iod_sched_weights *w, uint32_t skip, bool keep_islands, uint32_t keep,
                bool use_cache, struct cand *best, struct iod_sched_explain *x);
/* GPUs of a node that sit in wholly free NVLink islands of 2 or more GPUs. */
uint32_t sched_whole_islands(const struct iod_sched_cluster *c, uint32_t node_id);
void sched_unbind(struct iod_sched_cluster *c, uint32_t replica_id);

static inline unsigned popc(uint32_t x)
{
	x = x - ((x >> 1) & 0x55555555u);
	x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
	x = (x + (x >> 4)) & 0x0f0f0f0fu;
	return (x * 0x01010101u) >> 24;
}

/* Free memory of a node on the NUMA nodes in mask. */
static inline uint64_t mem_in(const struct node *n, const struct shape *sh, uint8_t mask)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < sh->s.numa_n; i++)
		if (mask >> i & 1)
			sum += n->numa_mem_free[i];
	return sum;
}

/* search.c: the nearest NIC to a GPU set, and the memoized best sets. */
void sched_nearest_nic(const struct iod_sched_shape *s, uint32_t set, uint8_t numa_mask,
                       int8_t *nic, uint8_t *aff);
const struct memo_entry *sched_search_get(struct shape *sh, uint32_t free_mask, uint32_t k,
                                          bool nvlink, uint32_t span_max,
                                          struct memo_entry *scratch);
/* shapes.c: a service's index, made on first use. */
int sched_service_get(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                      uint32_t *out);
/* eval.c: the spread term of a node for the counts loaded. */
uint32_t sched_spread_term(const struct iod_sched_cluster *c, uint32_t node_id);
/* bind.c: the PUs a replica's placement has affinity to. */
void sched_placement_affinity(const struct iod_sched_cluster *c, const struct replica *rep,
                              struct iod_bitmap *out);
/* diagnose.c: why no node took r (the reason, and a line in why). */
enum iod_sched_reason sched_diagnose(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                                     const struct iod_sched_weights *w, char *why, size_t len);
/* place.c: a request's own checks. */
int sched_request_check(const struct iod_sched_request *r, struct iod_err *e);

#endif
