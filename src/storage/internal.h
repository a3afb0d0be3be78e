/* internal.h: private state of the checkpoint store (src/storage/store.c, io.c). */
#ifndef IOD_STORAGE_INTERNAL_H
#define IOD_STORAGE_INTERNAL_H

#include "iod/ckpt.h"

#include <liburing.h>
#include <limits.h>
#include <pthread.h>

/* Chunk writes in flight per batch: enough to keep an NVMe queue busy. */
#define CKPT_RING_DEPTH 32

struct ckpt_job {
	uint64_t step;
	uint32_t tier;
	struct iod_ckpt_manifest m; /* planned at save, hashes filled by the worker */
	struct iod_stor_acts acts;  /* the admission's moves and evictions, then the WRITE */
	int rc;                     /* the persist's result, read by iod_ckpt_wait */
	struct iod_err err;
};

struct iod_ckpt {
	pthread_mutex_t mu, io;
	pthread_cond_t cv;
	pthread_t th;
	bool th_started, stop, busy, nonblock, ring_ok;
	struct iod_stor_pool pool;
	char dirs[IOD_STOR_TIERS_MAX][PATH_MAX]; /* pool order, fastest first */
	char mode[IOD_STOR_TIERS_MAX][32];
	bool uring[IOD_STOR_TIERS_MAX];
	uint32_t rank, chunk_bytes;
	struct io_uring ring; /* the worker's */
	uint8_t *snap;        /* the in-memory snapshot of the save in flight */
	uint64_t snap_cap;
	struct ckpt_job job;
	struct iod_stor_acts commit_acts;
	char peers[IOD_STOR_REPLICAS_MAX - 1][IOD_ADDR_MAX]; /* the opts' peers */
	const char *peer_p[IOD_STOR_REPLICAS_MAX - 1];       /* pointers to them */
	uint32_t peers_n, min_size;
	iod_ckpt_commit_fn commit; /* the opts' hook */
	void *commit_ctx;
	iod_ckpt_evict_fn evict;     /* the opts' eviction hook */
	struct ckpt_scrubber *scrub; /* the background scrub (scrub.c); NULL = none */
};

void ckpt_step_dir(const struct iod_ckpt *c, uint32_t tier, uint64_t step, char *out, size_t cap);
/* A chunk's file, or with k NULL the rank's manifest, in a step directory. */
void ckpt_file(const char *dir, uint32_t rank, const struct iod_ckpt_mchunk *k, char *out,
               size_t cap);
int ckpt_scan(struct iod_ckpt *c, struct iod_err *e);
/* io.c's pieces the scrub (scrub.c) shares. Under c->io: the directory of a
 * visible step (or the latest) and its id in *found; its manifest. */
int ckpt_find_step(struct iod_ckpt *c, uint64_t step, char *dir, size_t cap, uint64_t *found,
                   struct iod_err *e);
int ckpt_read_manifest(const struct iod_ckpt *c, const char *dir, uint64_t step,
                       struct iod_ckpt_manifest *m, struct iod_err *e);
/* Read and verify one chunk into buf: 0, or -EBADMSG when missing or damaged. */
int ckpt_chunk_check(const struct iod_ckpt *c, const char *dir, const struct iod_ckpt_mchunk *k,
                     uint8_t *buf);
/* Replace one chunk file whole: a temporary name, fdatasync, rename. */
int ckpt_chunk_put(const struct iod_ckpt *c, const char *dir, const struct iod_ckpt_mchunk *k,
                   const uint8_t *buf, struct iod_err *e);
int ckpt_fsync_dir(const char *dir, struct iod_err *e);
/* Stop the background scrub (scrub.c) if it runs; iod_ckpt_close calls it. */
void ckpt_scrub_stop(struct iod_ckpt *c);
void *ckpt_worker(void *arg);

/* The size of region name in m (io.c); -ENOENT when m has none. */
int ckpt_manifest_region_bytes(const struct iod_ckpt_manifest *m, const char *name, uint64_t *bytes,
                               struct iod_err *e);

#endif
