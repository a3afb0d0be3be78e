/*
 * storage.h: tiered checkpoint storage, the pure core (src/storage/tier.c).
 *
 * A node gives a stateful service a checkpoint capacity in bytes; the spec's
 * `storage.tiers` splits it into tiers, each a medium with a quota in basis
 * points of that capacity. The pool tracks which checkpoint (by training step)
 * lives in which tier and decides placement, draining and eviction:
 *
 *   - a new checkpoint goes to the fastest tier it fits in once older ones
 *     have drained or been evicted; it is reserved there while it is written;
 *   - the newest `fast_keep` complete checkpoints stay in the fastest tier,
 *     older ones drain to the next slower tier that has room under quota;
 *   - eviction is by age (at most `keep_max` complete checkpoints, oldest
 *     step first) and by quota (to make room), and never of the newest
 *     complete checkpoint nor of one being written;
 *   - when no tier can take a checkpoint the admission fails with -ENOSPC and
 *     a message naming the tier and what holds it: the writer must wait
 *     (backpressure) and nothing already stored is touched.
 *
 * Every decision is returned as a list of actions (write here, move this,
 * evict that) for a shell (src/storage/store.c) to carry out; the pool is
 * updated as if they had been carried out. No clock, no I/O.
 */
#ifndef IOD_STORAGE_H
#define IOD_STORAGE_H

#include "iod/base.h"
#include "iod/limits.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Media from fastest to slowest; the spec's spelling (DRAM, PMem, ...). */
enum iod_stor_medium {
	IOD_STOR_DRAM,
	IOD_STOR_PMEM,
	IOD_STOR_NVME,
	IOD_STOR_SSD,
	IOD_STOR_HDD,
	IOD_STOR_OBJECT,
	IOD_STOR_MEDIA_N
};

/* Parse a medium name without regard to case; -EINVAL names the known ones. */
int iod_stor_medium_parse(const char *s, enum iod_stor_medium *m, struct iod_err *e);
const char *iod_stor_medium_name(enum iod_stor_medium m);

/* One tier as configured: a medium and its quota in basis points. */
struct iod_stor_tier_cfg {
	enum iod_stor_medium medium;
	uint32_t quota_bp;
};

struct iod_stor_cfg {
	struct iod_stor_tier_cfg tiers[IOD_STOR_TIERS_MAX]; /* any order */
	uint32_t tiers_n;
	uint64_t capacity_bytes; /* the node's configured checkpoint capacity */
	uint32_t fast_keep;      /* newest N complete checkpoints kept in the fastest tier (>= 1) */
	uint32_t keep_max;       /* retention: at most this many complete checkpoints (>= 1) */
};

/* A tier of the pool: fastest first. */
struct iod_stor_tier {
	enum iod_stor_medium medium;
	uint32_t quota_bp;
	uint64_t quota_bytes; /* capacity_bytes * quota_bp / 10000 */
	uint64_t used_bytes;  /* stored and reserved checkpoints */
};

enum iod_stor_state {
	IOD_STOR_WRITING,  /* reserved, being written: never visible, never evicted */
	IOD_STOR_COMPLETE, /* its manifest is committed */
};

struct iod_stor_ckpt {
	uint64_t step;
	uint64_t bytes;
	uint32_t tier; /* index into pool tiers */
	enum iod_stor_state state;
};

struct iod_stor_pool {
	struct iod_stor_tier tiers[IOD_STOR_TIERS_MAX];
	uint32_t tiers_n;
	uint32_t fast_keep, keep_max;
	struct iod_stor_ckpt ck[IOD_STOR_CKPTS_MAX]; /* ascending step */
	uint32_t n;
};

enum iod_stor_act_kind {
	IOD_STOR_ACT_WRITE, /* write checkpoint `step` into tier `to` */
	IOD_STOR_ACT_MOVE,  /* copy `step` from tier `from` to `to`, then remove it from `from` */
	IOD_STOR_ACT_EVICT, /* remove `step` from tier `from` */
};

struct iod_stor_act {
	enum iod_stor_act_kind kind;
	uint64_t step, bytes;
	uint32_t from, to;
};

/* Actions of one decision, in the order they must be carried out. */
struct iod_stor_acts {
	struct iod_stor_act a[IOD_STOR_ACTS_MAX];
	uint32_t n;
};

/*
 * Build a pool from a configuration: tiers sorted fastest first, quotas in
 * bytes. -EINVAL with a precise message for quotas above 100% in total, a
 * zero quota, a medium listed twice, no tiers, zero capacity or zero
 * fast_keep/keep_max.
 */
int iod_stor_pool_init(struct iod_stor_pool *p, const struct iod_stor_cfg *c, struct iod_err *e);

/*
 * Admit a new checkpoint of `bytes` at `step` (above every step the pool
 * holds). On success returns 0, reserves it (WRITING) and fills *acts with the
 * moves and evictions that make room, ending with its WRITE. -ENOSPC when no
 * tier can take it even after every allowed drain and eviction (the writer
 * must wait for a save in flight to finish, or the capacity is too small);
 * -EEXIST/-ERANGE for a step not above the newest; -ENOBUFS when the pool
 * holds IOD_STOR_CKPTS_MAX checkpoints. On any error the pool is unchanged.
 */
int iod_stor_admit(struct iod_stor_pool *p, uint64_t step, uint64_t bytes,
                   struct iod_stor_acts *acts, struct iod_err *e);

/*
 * The checkpoint at `step` is complete (its manifest is committed). Fills
 * *acts with the drains (newest fast_keep stay fast) and retention evictions
 * this allows. -ENOENT when the pool has no such checkpoint being written.
 */
int iod_stor_commit(struct iod_stor_pool *p, uint64_t step, struct iod_stor_acts *acts,
                    struct iod_err *e);

/* A write failed or was torn: forget the reservation. -ENOENT if unknown. */
int iod_stor_abort(struct iod_stor_pool *p, uint64_t step, struct iod_err *e);

/* Record a checkpoint found on disk at start-up (complete). Same errors as admit. */
int iod_stor_adopt(struct iod_stor_pool *p, uint64_t step, uint64_t bytes, uint32_t tier,
                   struct iod_err *e);

/* The newest complete checkpoint, or NULL. */
const struct iod_stor_ckpt *iod_stor_latest(const struct iod_stor_pool *p);
const struct iod_stor_ckpt *iod_stor_find(const struct iod_stor_pool *p, uint64_t step);

/*
 * Replication against the cluster: `replicas` copies need that many nodes in
 * distinct failure domains (at most one copy per node). -EINVAL with the
 * numbers when replicas is 0, above IOD_STOR_REPLICAS_MAX, above the nodes
 * or above the failure domains.
 */
int iod_stor_replicas_check(uint32_t replicas, uint32_t nodes, uint32_t domains, struct iod_err *e);

/* ---- replication (src/storage/replica.c, pure) ---------------------------
 *
 * A checkpoint's chunks (include/iod/ckpt.h's manifest: chunk_bytes each,
 * XXH3-64 checksummed) are held by `size` nodes, the writer's (the primary)
 * and size - 1 peers, each in its own failure domain. A write is acknowledged
 * per chunk and per copy; the manifest may be committed (through Raft) once
 * every chunk is held by `min_size` copies on live nodes: Ceph's `size 3`,
 * `min_size 2`. States use Ceph's words:
 *
 *   clean       every chunk has `size` verified copies on live nodes;
 *   degraded    some chunk has fewer (a copy missing, corrupt, or on a dead
 *               node) but at least one;
 *   undersized  fewer than `size` of the checkpoint's nodes are alive;
 *   inactive    fewer than `min_size` are alive: no new checkpoint commits;
 *   lost        some chunk has no verified copy on a live node (Ceph's
 *               "unfound"): that checkpoint cannot be restored.
 */

/* A node that may hold copies, as the scheduler labels it. */
struct iod_stor_node {
	const char *name;    /* unique */
	const char *rack;    /* failure domain; NULL: its own rack */
	const char *zone;    /* failure domain; NULL: zone "default" */
	bool up;             /* alive (the control plane's view) */
	uint64_t free_bytes; /* room for checkpoint copies */
};

/*
 * Choose the nodes of a checkpoint: the `keep_n` nodes in keep[] (indices
 * into nodes[], the primary first) stay, and size - keep_n more are chosen
 * among live nodes with room for `bytes`, each in a rack no chosen node is
 * in, a zone no chosen node is in first. Ties: most free bytes, then name.
 * out[] gets keep[] then the new ones (size entries). -EINVAL for a bad size
 * or keep; -ENOSPC with the numbers when the live nodes cannot give that
 * many distinct failure domains with room (the checkpoint would be
 * undersized).
 */
int iod_stor_place(const struct iod_stor_node *nodes, uint32_t n, const uint32_t *keep,
                   uint32_t keep_n, uint32_t size, uint64_t bytes, uint32_t *out,
                   struct iod_err *e);

/* The copies of one checkpoint as the primary tracks them. */
struct iod_stor_rview {
	uint32_t size, min_size;        /* copies wanted; write quorum */
	uint32_t copies_n;              /* the checkpoint's nodes (<= size) */
	bool up[IOD_STOR_REPLICAS_MAX]; /* copy r's node is alive */
	const uint8_t *good;            /* per chunk: bit r set when copy r is verified */
	uint32_t chunks_n;
};

enum {
	IOD_STOR_H_DEGRADED = 1u << 0,
	IOD_STOR_H_UNDERSIZED = 1u << 1,
	IOD_STOR_H_INACTIVE = 1u << 2,
	IOD_STOR_H_LOST = 1u << 3,
};

struct iod_stor_health {
	uint32_t flags;           /* IOD_STOR_H_*; 0 is clean */
	uint32_t up_n;            /* copies on live nodes */
	uint32_t chunks_degraded; /* chunks below size live verified copies */
	uint32_t chunks_lost;     /* chunks with none */
	uint32_t copies_min;      /* the fewest live verified copies of any chunk */
	bool commit_ok;           /* every chunk has >= min_size: the manifest may commit */
};

/* Health of a checkpoint's copies. -EINVAL for a view outside the limits. */
int iod_stor_health_get(const struct iod_stor_rview *v, struct iod_stor_health *h,
                        struct iod_err *e);
/* Ceph's spelling of the flags: "clean", "undersized+degraded", "lost", ... */
const char *iod_stor_health_name(uint32_t flags, char *buf, size_t cap);

/* One repair: copy chunk `chunk` from copy `from` to copy `to`. */
struct iod_stor_repair {
	uint32_t chunk, from, to;
};

/*
 * The repair plan: for every chunk, each live copy without a verified copy
 * gets it from a live copy that has one (the lowest-numbered such copy, the
 * primary first, so a plan is deterministic). At most `max` repairs (the
 * scrub's bounded work per pass); *n gets the count, *lost the chunks no
 * live copy can repair. Returns 0, or -EAGAIN when more repairs remain than
 * fit in `max` (call again after carrying them out).
 */
int iod_stor_repair_plan(const struct iod_stor_rview *v, struct iod_stor_repair *out, uint32_t max,
                         uint32_t *n, uint32_t *lost, struct iod_err *e);

/*
 * Re-replication after a loss (Ceph's backfill): a checkpoint whose copies
 * sit on nodes[copies[0..copies_n)] (the primary first) and some of those
 * nodes are dead. The plan keeps the live copies (in their order), asks
 * iod_stor_place for replacements on live nodes in new failure domains
 * (as many as can be had, up to size), and lists the repairs that fill
 * each new copy from a surviving verified one (iod_stor_repair_plan over
 * the new copies). good[c] bit r: copy r (old numbering) holds chunk c
 * verified. Once the repairs are carried out the checkpoint is clean
 * (added_n == the dead copies) or still undersized (fewer nodes to be had).
 */
struct iod_stor_rereplica {
	uint32_t nodes[IOD_STOR_REPLICAS_MAX]; /* after: survivors, then the new (into nodes[]) */
	uint32_t nodes_n;                      /* entries in nodes */
	uint32_t kept_n;                       /* of them, survivors (copy numbers 0..kept_n) */
	uint32_t added_n;                      /* new copies: nodes[kept_n..nodes_n) */
	uint32_t dead_n;                       /* copies lost with their nodes */
	uint8_t good[IOD_CKPT_CHUNKS_MAX];     /* per chunk: verified copies, new numbering
	                                      (64 KiB: allocate it, do not stack it) */
};

/*
 * 0 with the plan in *out and its repairs in rep[0..*rep_n) (copy numbers
 * of the new placement; at most max); -EAGAIN when more repairs remain than
 * max (carry these out, mark them verified, plan again); -ENOSPC (nothing
 * changed) when no replacement node can be had, with the numbers; -ENOENT
 * when some chunk has no surviving verified copy (lost: nothing to copy
 * from); -EINVAL for arguments outside the limits (chunks_n above
 * IOD_CKPT_CHUNKS_MAX included).
 */
int iod_stor_rereplicate_plan(const struct iod_stor_node *nodes, uint32_t n, const uint32_t *copies,
                              uint32_t copies_n, const uint8_t *good, uint32_t chunks_n,
                              uint32_t size, uint64_t bytes, struct iod_stor_rereplica *out,
                              struct iod_stor_repair *rep, uint32_t max, uint32_t *rep_n,
                              struct iod_err *e);

/*
 * What a re-replication leaves, for the Checkpoint object (its "copies" and
 * "health", rewritten through Raft): the survivors p->nodes[0..kept_n) and
 * each new copy k (p->nodes[kept_n + k]) for which made[k] (its chunks were
 * all sent and taken), as node indices in nodes_out[0..*nodes_n), and the
 * health of that placement against size copies with quorum min_size (every
 * listed copy live and whole). -EINVAL for a plan outside the limits. Pure.
 */
int iod_stor_rereplicate_result(const struct iod_stor_rereplica *p, const bool *made, uint32_t size,
                                uint32_t min_size, uint32_t *nodes_out, uint32_t *nodes_n,
                                struct iod_stor_health *h, struct iod_err *e);

/*
 * The scrub's bounded rate: bytes it may verify now, given the rate, the
 * time since its last pass and the bytes carried over (a token bucket
 * holding at most one second of rate). Pure: the caller passes the time.
 */
uint64_t iod_stor_scrub_budget(uint64_t rate_bytes_per_s, uint64_t elapsed_ns,
                               uint64_t carried_bytes);

#endif
