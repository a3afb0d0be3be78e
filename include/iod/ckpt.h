/*
 * ckpt.h: libiod-ckpt, the workload's checkpoint API, and the manifest codec.
 *
 * A store (src/storage/store.c) keeps one rank's checkpoints in the tier
 * directories of include/iod/storage.h's pool. save() is two-phase: it copies
 * the caller's regions into an in-memory snapshot and returns; a worker thread
 * persists the snapshot (chunk files checksummed with xxHash XXH3-64, then the
 * manifest, written to a temporary name, fsync'd and renamed). A checkpoint is
 * visible (list, restore) only once its manifest is renamed: a torn save is
 * never visible. On-disk layout: docs/storage.md.
 *
 * The manifest codec (src/storage/manifest.c) is pure.
 */
#ifndef IOD_CKPT_H
#define IOD_CKPT_H

#include "iod/base.h"
#include "iod/limits.h"
#include "iod/storage.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the manifest (pure) ---- */

struct iod_ckpt_mregion {
	char name[IOD_CKPT_NAME_MAX]; /* [A-Za-z0-9._-], 1..63 characters */
	uint64_t bytes;
	uint32_t chunk0, chunks; /* its chunks: chunks[chunk0 .. chunk0 + chunks) */
};

struct iod_ckpt_mchunk {
	uint32_t region, index; /* region number, chunk number within it */
	uint32_t len;           /* chunk_bytes, the region's last one shorter */
	uint64_t xxh3;          /* XXH3-64 of the chunk's bytes */
};

struct iod_ckpt_manifest {
	uint64_t step;
	uint32_t rank, chunk_bytes;
	struct iod_ckpt_mregion regions[IOD_CKPT_REGIONS_MAX];
	uint32_t regions_n;
	struct iod_ckpt_mchunk *chunks; /* chunks_n, owned (iod_ckpt_manifest_free) */
	uint32_t chunks_n;
	uint64_t bytes; /* sum of the regions */
};

/*
 * Lay out a manifest's regions and chunks (hashes zero) for regions of the
 * given names and sizes. -EINVAL for a bad name or size, -E2BIG beyond the
 * limits, -ENOMEM.
 */
int iod_ckpt_manifest_plan(struct iod_ckpt_manifest *m, uint64_t step, uint32_t rank,
                           uint32_t chunk_bytes, const char *const *names, const uint64_t *bytes,
                           uint32_t n, struct iod_err *e);
/* Text form (malloc'd into *out, *len bytes, NUL-terminated). */
int iod_ckpt_manifest_format(const struct iod_ckpt_manifest *m, char **out, size_t *len,
                             struct iod_err *e);
/* Parse and check the text form whole; -EBADMSG names the line and the fault. */
int iod_ckpt_manifest_parse(const char *text, size_t len, struct iod_ckpt_manifest *m,
                            struct iod_err *e);
void iod_ckpt_manifest_free(struct iod_ckpt_manifest *m);

/* ---- the store (shell) ---- */

struct iod_ckpt;

/* What the commit hook is told about a checkpoint whose chunks and manifest
 * are durable in this store. */
struct iod_ckpt_commit {
	uint64_t step, bytes;
	uint32_t rank, chunks, chunk_bytes;
	uint64_t manifest_xxh3;                  /* XXH3-64 of the manifest's text */
	const char *medium;                      /* the tier it was written to */
	uint32_t peers_n;                        /* peers it was sent to (iod_ckpt_opts.peers) */
	bool peer_ok[IOD_STOR_REPLICAS_MAX - 1]; /* peer i holds it (its manifest was taken) */
	const char *const *peers;                /* their addresses */
};

/*
 * Called by the worker after a save is durable here and before it becomes
 * visible (list, restore, the next save's retention): the place to wait for
 * the replicas' quorum and commit the manifest through Raft
 * (iod_ckpt_raft_commit). A failure fails the save: its files are removed
 * and iod_ckpt_wait returns the hook's error.
 */
typedef int (*iod_ckpt_commit_fn)(void *ctx, const struct iod_ckpt_commit *c, struct iod_err *e);
/*
 * Called by the worker when the tier core evicts a complete checkpoint
 * (retention, or room for a new one), before its files are removed: the
 * place to delete its Checkpoint object (iod_ckpt_raft_evict). The files go
 * whatever it returns (the room is needed).
 */
typedef int (*iod_ckpt_evict_fn)(void *ctx, uint32_t rank, uint64_t step, struct iod_err *e);

struct iod_ckpt_opts {
	struct iod_stor_cfg tiers;            /* media, quotas, capacity, fast_keep, keep_max */
	const char *dirs[IOD_STOR_TIERS_MAX]; /* the directory of tiers.tiers[i] */
	uint32_t rank;
	uint32_t chunk_bytes; /* 0: IOD_CKPT_CHUNK_BYTES_DEFAULT */
	bool nonblock;        /* save: -EBUSY instead of waiting for the save in flight */
	const char *peers[IOD_STOR_REPLICAS_MAX -
	                  1]; /* checkpoint peers (iod_ckpt_peer_start), host:port */
	uint32_t peers_n;
	uint32_t min_size;         /* copies (this one included) a save needs to count; 0: 1 */
	iod_ckpt_commit_fn commit; /* NULL: visible once durable here */
	void *commit_ctx;
	iod_ckpt_evict_fn evict; /* NULL: none; ctx: commit_ctx */
};

/* A region of the caller's memory: saved from, restored into. */
struct iod_ckpt_region {
	const char *name;
	void *addr;
	uint64_t bytes;
};

struct iod_ckpt_info {
	uint64_t step, bytes;
	const char *medium; /* the tier it is in */
	const char *path;   /* its directory */
};

#define IOD_CKPT_LATEST UINT64_MAX

/*
 * Open a rank's store over existing tier directories: complete checkpoints
 * are adopted, torn ones (no manifest) removed. Each tier reports how it is
 * written (iod_ckpt_tier_mode): "io_uring" for NVMe/SSD/HDD, and for PMem and
 * DRAM "emulated (tmpfs)" or "emulated (file)" — libpmem2 is not used yet.
 */
int iod_ckpt_open(const struct iod_ckpt_opts *o, struct iod_ckpt **out, struct iod_err *e);
/* Wait for the save in flight, stop the worker, free. */
void iod_ckpt_close(struct iod_ckpt *c);
const char *iod_ckpt_tier_mode(const struct iod_ckpt *c, uint32_t tier);

/*
 * Phase 1 of a save: admit (the tier core may refuse with -ENOSPC: nothing is
 * lost, try later), copy the regions into the snapshot, hand it to the worker
 * and return. Waits for the previous save's persist unless nonblock (-EBUSY).
 */
int iod_ckpt_save(struct iod_ckpt *c, uint64_t step, const struct iod_ckpt_region *r, uint32_t n,
                  struct iod_err *e);
/* Phase 2's result: wait for the save in flight; 0 once it is visible. */
int iod_ckpt_wait(struct iod_ckpt *c, struct iod_err *e);
/* The same without waiting: -EBUSY while a save is in flight, else the last
 * save's result (once; 0 after). */
int iod_ckpt_poll(struct iod_ckpt *c, struct iod_err *e);
/*
 * Restore `step` (or IOD_CKPT_LATEST) into regions of the same names and
 * sizes, verifying every chunk. -ENOENT none, -EINVAL regions differ,
 * -EBADMSG a chunk is damaged (the message names it).
 */
int iod_ckpt_restore(struct iod_ckpt *c, uint64_t step, const struct iod_ckpt_region *r, uint32_t n,
                     uint64_t *restored, struct iod_err *e);
/* Visible checkpoints, oldest first. */
int iod_ckpt_list(struct iod_ckpt *c, struct iod_ckpt_info *out, uint32_t max, uint32_t *n,
                  struct iod_err *e);
/* Verify every chunk of `step` (or every checkpoint with IOD_CKPT_LATEST... all: UINT64_MAX - 1). */
#define IOD_CKPT_ALL (UINT64_MAX - 1)
int iod_ckpt_scrub(struct iod_ckpt *c, uint64_t step, uint64_t *bytes_checked, struct iod_err *e);

/* What a repair did. */
struct iod_ckpt_repair_report {
	uint32_t chunks;      /* chunks of the checkpoint */
	uint32_t repaired[2]; /* chunk files rewritten here [0] and at the peer [1] */
	uint32_t lost;        /* chunks damaged in both copies */
};

/*
 * Repair checkpoint `step` (or IOD_CKPT_LATEST) between this store and a
 * peer's copy of the same rank (another node's store; today a directory the
 * caller opened, the HTTP transport is not built): every chunk of both copies
 * is verified against the manifest (which must be the same in both), and the
 * repair plan (src/storage/replica.c) rewrites each missing or damaged chunk
 * from the copy that has it verified (temporary name, fdatasync, rename).
 * -EBADMSG when the manifests differ or a chunk is damaged in both copies
 * (rep->lost; the rest is repaired); -ENOENT when either lacks the step.
 */
int iod_ckpt_repair(struct iod_ckpt *c, struct iod_ckpt *peer, uint64_t step,
                    struct iod_ckpt_repair_report *rep, struct iod_err *e);

/* ---- committing through Raft (src/storage/commit.c, shell) ---- */

struct iod_api_client;

/* The commit hook's context: who saves, and the replication it needs. */
struct iod_ckpt_raft {
	struct iod_api_client *api; /* the control plane (not owned) */
	const char *service;        /* the stateful service */
	const char *replica;        /* the replica saving */
	const char *node;           /* this node: the primary copy's */
	uint32_t replicas;          /* copies wanted (storage.replicas; 0: 1) */
	uint32_t min_size;          /* the write quorum (0: 1) */
};

/* A Checkpoint object's name: "<replica>.r<rank>.s<step>". */
void iod_ckpt_raft_name(const char *replica, uint32_t rank, uint64_t step, char *out, size_t cap);
/*
 * The commit hook (iod_ckpt_opts.commit, ctx a struct iod_ckpt_raft): when
 * the copies holding the checkpoint meet min_size (the replication core's
 * health), PUT its Checkpoint object, committed through Raft; else -EAGAIN
 * naming the copies and the quorum. An API error or refusal fails the save.
 */
int iod_ckpt_raft_commit(void *ctx, const struct iod_ckpt_commit *c, struct iod_err *e);
/* The evict hook (iod_ckpt_opts.evict, ctx a struct iod_ckpt_raft): DELETE
 * the checkpoint's object, so that retention holds in Raft too; 0 when it
 * is gone (or was never committed). */
int iod_ckpt_raft_evict(void *ctx, uint32_t rank, uint64_t step, struct iod_err *e);
/* The newest committed step of a replica's rank; -ENOENT when none. */
/*
 * After a re-replication (docs/storage.md "Re-replication"): rewrite the
 * Checkpoint object of rank/step through the API (Raft) with its copies
 * now on nodes[0..n) (all holding it) and health (iod_stor_health_name),
 * naming r->node, the replica's node now. The other fields stay as the
 * object has them. -ENOENT when there is no such object.
 */
int iod_ckpt_raft_recopied(const struct iod_ckpt_raft *r, uint32_t rank, uint64_t step,
                           const char *const *nodes, uint32_t n, const char *health,
                           struct iod_err *e);
int iod_ckpt_raft_latest(struct iod_api_client *api, const char *replica, uint32_t rank,
                         uint64_t *step, struct iod_err *e);

/* ---- copies on peers over HTTP (src/storage/peer.c, shell) ---- */

struct iod_ckpt_peer;

/*
 * Serve a peer's copies from dir (a tier directory) on listen_addr over
 * plain HTTP, which must be a loopback IPv4 address (-EPERM otherwise: no
 * listener beyond loopback without authentication and TLS). Chunks are
 * checked against their XXH3 before they are kept; a manifest only when
 * every chunk it names is held.
 */
int iod_ckpt_peer_start(const char *listen_addr, const char *dir, struct iod_ckpt_peer **out,
                        struct iod_err *e);
/*
 * The same over mutual TLS on any IPv4 address: the server presents creds'
 * certificate (an agent's node certificate) and refuses at the handshake a
 * client without a certificate from creds' CA (or one of a user). creds is
 * not owned and must outlive the server; NULL is iod_ckpt_peer_start.
 */
struct iod_sec_tls_creds;
int iod_ckpt_peer_start_tls(const char *listen_addr, const char *dir,
                            struct iod_sec_tls_creds *creds, struct iod_ckpt_peer **out,
                            struct iod_err *e);
/*
 * The credentials every checkpoint peer client of this process uses
 * (iod_ckpt_peer_put, iod_ckpt_fetch, iod_ckpt_peer_get_chunk,
 * iod_ckpt_peer_latest, stores with peers): with creds, each connection is
 * mTLS and the server must prove it is a node of the cluster; NULL (the
 * default) is plain HTTP. Not owned; set it before opening stores.
 */
void iod_ckpt_peer_client_creds(struct iod_sec_tls_creds *creds);
/* May a service identity (a replica's own credential) ask the chunk
 * server for target? Only in the namespace of one of its own replicas,
 * /ckpt/<service>-<ordinal>/... (pure; every mTLS request of a service is
 * checked with it and refused with 403 otherwise). */
bool iod_ckpt_peer_service_may(const char *service, const char *target);

/*
 * A relay (relay.c) from listen_addr (port 0: the kernel's) to one chunk
 * server, target: a TCP splice that carries a replica's mTLS session end
 * to end, for replicas that cannot reach the chunk servers' addresses
 * (their own network namespace on the overlay reaches only its node's
 * gateway). It sees ciphertext only and connects only to target.
 */
struct iod_ckpt_relay;
int iod_ckpt_relay_start(const char *listen_addr, const char *target, struct iod_ckpt_relay **out,
                         struct iod_err *e);
const char *iod_ckpt_relay_addr(const struct iod_ckpt_relay *r);   /* host:port it listens on */
const char *iod_ckpt_relay_target(const struct iod_ckpt_relay *r); /* as given */
void iod_ckpt_relay_stop(struct iod_ckpt_relay *r);
void iod_ckpt_peer_stop(struct iod_ckpt_peer *p);
/* The address it listens on (with the port the kernel chose for port 0). */
const char *iod_ckpt_peer_addr(const struct iod_ckpt_peer *p);
/* Send a checkpoint (its manifest with hashes, and the snapshot in the
 * manifest's layout) to a peer: chunks, then the manifest. 0 once it holds it. */
int iod_ckpt_peer_put(const char *addr, const struct iod_ckpt_manifest *m, const uint8_t *snap,
                      struct iod_err *e);
/* Re-replication (docs/storage.md): a new copy of step of rank on the peer
 * at addr from the verified bytes the caller holds in r[0..n) (what a
 * restore fetched), chunked as a store does, hashed, then iod_ckpt_peer_put. */
int iod_ckpt_peer_copy_regions(const char *addr, uint32_t rank, uint64_t step,
                               const struct iod_ckpt_region *r, uint32_t n, struct iod_err *e);
/* Restore step of rank from a peer into regions (matched by name and size),
 * verifying every chunk: -ENOENT, -EINVAL, -EBADMSG as iod_ckpt_restore. */
int iod_ckpt_fetch(const char *addr, uint32_t rank, uint64_t step, const struct iod_ckpt_region *r,
                   uint32_t n, struct iod_err *e);

/* ---- the background scrub (src/storage/scrub.c, shell) ---- */

/* One checkpoint's scrub pass. */
struct iod_ckpt_scrub_result {
	uint64_t step;
	uint32_t rank;
	uint32_t chunks;               /* chunks verified */
	uint32_t damaged;              /* of those, missing or damaged */
	uint32_t repaired;             /* of those, rewritten from a peer's verified copy */
	uint64_t bytes;                /* read and hashed */
	uint64_t at_ms;                /* unix ms when the pass ended */
	char status[IOD_OBJ_WORD_MAX]; /* "clean", "repaired N", "damaged N" (N not repaired) */
	char why[IOD_ERR_MSG_MAX];     /* the first damage, or why a repair failed; "" clean */
};
typedef void (*iod_ckpt_scrub_fn)(void *ctx, const struct iod_ckpt_scrub_result *r);

struct iod_ckpt_scrub_opts {
	uint64_t rate_bytes_per_s; /* the bound; 0 = IOD_CKPT_SCRUB_RATE_DEFAULT */
	uint64_t interval_ns;      /* rest between passes over every checkpoint; 0 = 60 s */
	struct iod_ckpt *peer;     /* a peer store of the same rank to repair from
	                              (iod_ckpt_repair); NULL = the store's peers over HTTP */
	iod_ckpt_scrub_fn report;  /* after each checkpoint's pass, on the scrub's
	                              thread (NULL = none) */
	void *report_ctx;
};

/*
 * Start a thread that verifies every chunk of every visible checkpoint, at
 * most rate_bytes_per_s (iod_stor_scrub_budget's token bucket, one second
 * banked), a chunk at a time under the store's lock (saves and restores go
 * on between chunks). A missing or damaged chunk is repaired from the peer
 * store (iod_ckpt_repair) or the store's peers over HTTP (the first with a
 * copy that matches the manifest's XXH3), rewritten whole (temporary name,
 * fdatasync, rename). -EBUSY when one runs already.
 */
int iod_ckpt_scrub_start(struct iod_ckpt *c, const struct iod_ckpt_scrub_opts *o,
                         struct iod_err *e);
/* Stop and join it (iod_ckpt_close does too). */
void iod_ckpt_scrub_stop(struct iod_ckpt *c);

struct iod_ckpt_scrub_stats {
	uint64_t passes;  /* checkpoints scrubbed */
	uint64_t chunks;  /* chunks verified */
	uint64_t bytes;   /* bytes read and hashed */
	uint64_t damaged; /* chunks found missing or damaged */
	uint64_t repaired;
	uint64_t paced_ns; /* time spent waiting for the rate bound */
};
void iod_ckpt_scrub_stats(struct iod_ckpt *c, struct iod_ckpt_scrub_stats *out);

/*
 * A scrub report hook (ctx: struct iod_ckpt_raft): writes r->status and
 * r->at_ms into the Checkpoint object's `scrub` and `scrubbed_ms` through
 * the API (read, change, PUT). -ENOENT when the checkpoint is not committed.
 * It runs on the scrub's thread: give it an API client of its own, not the
 * commit hook's (a client is one connection, not shared between threads).
 */
int iod_ckpt_raft_scrub(struct iod_ckpt_raft *raft, const struct iod_ckpt_scrub_result *s,
                        struct iod_err *e);

/* One chunk of step from a peer (iod_ckpt_peer_start) into buf (k->len
 * bytes), verified against k->xxh3: -ENOENT, -EBADMSG, -EIO. */
int iod_ckpt_peer_get_chunk(const char *addr, uint32_t rank, uint64_t step,
                            const struct iod_ckpt_mchunk *k, uint8_t *buf, struct iod_err *e);

/* The newest step of rank a peer holds whole (its manifest taken): -ENOENT
 * when none. A peer's address is host:port, or host:port/NS for the
 * namespace NS (a replica's name) of an agent's chunk server. */
int iod_ckpt_peer_latest(const char *addr, uint32_t rank, uint64_t *step, struct iod_err *e);

/* ---- the store as the agent provisions it (src/storage/env.c, pure) ---- */

/*
 * A stateful replica of a spec with `storage:` gets its tier directories
 * (created by the agent, inside its data directory) in its environment:
 * IOD_CKPT_TIERS=MEDIUM:QUOTA_BP:DIR,... (fastest first), IOD_CKPT_CAPACITY
 * (bytes), IOD_CKPT_REPLICAS (storage.replicas) and IOD_CKPT_DIR (the
 * fastest tier's directory, for a workload that takes one).
 */
struct iod_ckpt_env {
	struct iod_stor_cfg cfg; /* media, quotas, capacity; fast_keep 1, keep_max 8 */
	char dirs[IOD_STOR_TIERS_MAX][IOD_PATH_MAX];
	uint32_t replicas; /* 1 when not given */
};

/*
 * A checkpoint peer as the agent lists it: the node and its chunk server's
 * address with the replica's namespace, NODE=HOST:PORT/NS. $IOD_CKPT_PEERS
 * lists the other nodes' (comma-separated, preferred copies first: other
 * zones, then other racks); $IOD_CKPT_HERE is this node's own, the nearest
 * place to restore from after a move.
 */
struct iod_ckpt_env_peer {
	char node[IOD_NAME_MAX];
	char addr[IOD_CKPT_PEER_ADDR_MAX];
};

/* The list's text for n peers into out: -EINVAL for a node or address that
 * is empty or holds ',' or '=' (a node also ':' or '/'), -E2BIG past cap. */
int iod_ckpt_env_peers_format(const struct iod_ckpt_env_peer *p, uint32_t n, char *out, size_t cap,
                              struct iod_err *e);
/* Parse a peer list (NULL or "" is none) into at most max peers. */
int iod_ckpt_env_peers_parse(const char *list, struct iod_ckpt_env_peer *out, uint32_t max,
                             uint32_t *n, struct iod_err *e);

/* IOD_CKPT_TIERS's value for n tiers and their directories into out;
 * -EINVAL for a directory that is empty or holds ',', -E2BIG past cap. */
int iod_ckpt_env_format(const struct iod_stor_tier_cfg *t, const char *const *dirs, uint32_t n,
                        char *out, size_t cap, struct iod_err *e);
/* Parse the three variables' values (replicas may be NULL); -ENOENT when
 * tiers is unset, -EINVAL naming the entry at fault. */
int iod_ckpt_env_parse(const char *tiers, const char *capacity, const char *replicas,
                       struct iod_ckpt_env *out, struct iod_err *e);
/* Store options over it (out->dirs point into env). */
void iod_ckpt_env_opts(const struct iod_ckpt_env *env, struct iod_ckpt_opts *out);

/* ---- volumes: a data directory synced inside each checkpoint ----
 *
 * storage: {volume: {replicas: N}} (docs/storage.md "Volumes"): at each save
 * the workload packs its data directory (the checkpoint tiers in <data>/ckpt
 * left out) into one region, IOD_CKPT_VOLUME_REGION, of the same checkpoint,
 * so it is replicated, committed and never torn exactly as the checkpoint
 * is; after a move the replacement unpacks it into its new data directory.
 * The archive (pure codec, src/storage/volume.c): the line "iod-vol 1",
 * then per entry "d MODE PATH" or "f MODE SIZE PATH" followed by SIZE bytes
 * and a newline, then "end COUNT". PATH is relative, '/'-separated, without
 * empty, "." or ".." parts, < IOD_CKPT_VOL_PATH_MAX bytes; MODE is octal
 * <= 0777; a directory comes before what it holds.
 */
#define IOD_CKPT_VOLUME_REGION "volume"
#define IOD_CKPT_VOL_PATH_MAX 1024
#define IOD_CKPT_VOL_ENTRIES_MAX 65536
#define IOD_CKPT_VOL_BYTES_MAX (4ull << 30)

struct iod_ckpt_vol_entry {
	bool dir;
	uint32_t mode;       /* permission bits, <= 0777 */
	const char *path;    /* NUL-terminated (the parser's own copy, valid in the callback) */
	const uint8_t *data; /* a file's bytes (inside the archive) */
	uint64_t size;
};

/* An archive being built (malloc'd buf, grown as needed). */
struct iod_ckpt_vol_buf {
	uint8_t *buf;
	size_t len, cap;
	uint32_t entries;
};
/* Append one entry (-EINVAL for a bad path or mode, -E2BIG past the limits). */
int iod_ckpt_vol_add(struct iod_ckpt_vol_buf *b, const struct iod_ckpt_vol_entry *x,
                     struct iod_err *e);
/* Close it with its "end" line (once; then b->buf, b->len is the archive). */
int iod_ckpt_vol_finish(struct iod_ckpt_vol_buf *b, struct iod_err *e);
void iod_ckpt_vol_buf_free(struct iod_ckpt_vol_buf *b);
/* Parse an archive whole before calling fn for any entry (-EBADMSG naming
 * the entry and the fault); fn's non-zero return stops it and is returned. */
typedef int (*iod_ckpt_vol_fn)(void *ctx, const struct iod_ckpt_vol_entry *x, struct iod_err *e);
int iod_ckpt_vol_parse(const uint8_t *buf, size_t len, iod_ckpt_vol_fn fn, void *ctx,
                       struct iod_err *e);
/* Pack directory dir (regular files and directories; symbolic links and
 * other kinds are left out and counted in *skipped; the top-level entry
 * named skip, e.g. "ckpt", too) into an archive. */
int iod_ckpt_vol_pack(const char *dir, const char *skip, struct iod_ckpt_vol_buf *out,
                      uint32_t *skipped, struct iod_err *e);
/* Unpack an archive into dir: directories made, each file written to a
 * temporary name, fsync'd and renamed over; files dir holds that the archive
 * does not name are left. *files, *bytes: what was written (may be NULL). */
int iod_ckpt_vol_unpack(const char *dir, const uint8_t *buf, size_t len, uint32_t *files,
                        uint64_t *bytes, struct iod_err *e);
/* The size of region name in step's manifest (IOD_CKPT_LATEST: the newest)
 * in a store, or on the peer at addr: to size the buffer a restore of a
 * region whose size varies by step (the volume) reads into; -ENOENT when
 * the step or the region is not there. */
int iod_ckpt_region_bytes(struct iod_ckpt *c, uint64_t step, const char *name, uint64_t *bytes,
                          struct iod_err *e);
int iod_ckpt_peer_region_bytes(const char *addr, uint32_t rank, uint64_t step, const char *name,
                               uint64_t *bytes, struct iod_err *e);

#endif
