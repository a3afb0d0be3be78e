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
};

void ckpt_step_dir(const struct iod_ckpt *c, uint32_t tier, uint64_t step, char *out, size_t cap);
/* A chunk's file, or with k NULL the rank's manifest, in a step directory. */
void ckpt_file(const char *dir, uint32_t rank, const struct iod_ckpt_mchunk *k, char *out,
               size_t cap);
int ckpt_scan(struct iod_ckpt *c, struct iod_err *e);
void *ckpt_worker(void *arg);

#endif
