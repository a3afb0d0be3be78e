/*
 * store.c: libiod-ckpt, one rank's checkpoint store over tier directories
 * (include/iod/ckpt.h, docs/storage.md). The shell around the tier core:
 * save() snapshots into memory and hands the snapshot to a worker thread,
 * which carries out the core's actions (moves, evictions), writes the chunk
 * files (io_uring on NVMe/SSD/HDD tiers, pwrite on emulated PMem/DRAM), then
 * the manifest (temporary name, fsync, rename, directory fsync).
 *
 * Locks: `mu` guards the pool and the job; `io` is held while files that a
 * reader may use are changed (moves, evictions), and by readers.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <xxhash.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

void ckpt_step_dir(const struct iod_ckpt *c, uint32_t tier, uint64_t step, char *out, size_t cap)
{
	snprintf(out, cap, "%s/step-%020" PRIu64, c->dirs[tier], step);
}

void ckpt_file(const char *dir, uint32_t rank, const struct iod_ckpt_mchunk *k, char *out,
               size_t cap)
{
	if (k)
		snprintf(out, cap, "%s/r%u-%u-%u.chunk", dir, rank, k->region, k->index);
	else
		snprintf(out, cap, "%s/r%u.manifest", dir, rank);
}

static int tier_setup(struct iod_ckpt *c, uint32_t t, struct iod_err *e)
{
	struct statfs sf;
	enum iod_stor_medium m = c->pool.tiers[t].medium;
	if (m == IOD_STOR_OBJECT)
		return iod_err_set(e, -ENOTSUP,
		                   "storage tier object: object stores are not built yet");
	if (mkdir(c->dirs[t], 0755) && errno != EEXIST)
		return iod_err_set(e, -errno, "storage tier %s: cannot create %s: %s",
		                   iod_stor_medium_name(m), c->dirs[t], strerror(errno));
	if (statfs(c->dirs[t], &sf))
		return iod_err_set(e, -errno, "storage tier %s: %s: %s", iod_stor_medium_name(m),
		                   c->dirs[t], strerror(errno));
	c->uring[t] = m >= IOD_STOR_NVME && c->ring_ok;
	if (m <= IOD_STOR_PMEM)
		snprintf(c->mode[t], sizeof(c->mode[t]), "emulated (%s)",
		         sf.f_type == TMPFS_MAGIC ? "tmpfs" : "file");
	else
		snprintf(c->mode[t], sizeof(c->mode[t]), "%s", c->uring[t] ? "io_uring" : "pwrite");
	return 0;
}

/* Map the options' tiers (any order) to the pool's (fastest first). */
static int dirs_setup(struct iod_ckpt *c, const struct iod_ckpt_opts *o, struct iod_err *e)
{
	for (uint32_t t = 0; t < c->pool.tiers_n; t++) {
		const char *d = NULL;
		for (uint32_t i = 0; i < o->tiers.tiers_n; i++)
			if (o->tiers.tiers[i].medium == c->pool.tiers[t].medium)
				d = o->dirs[i];
		if (!d || !*d || strlen(d) >= sizeof(c->dirs[t]) - 64)
			return iod_err_set(e, -EINVAL,
			                   "storage tier %s needs a directory (at most %zu "
			                   "characters)",
			                   iod_stor_medium_name(c->pool.tiers[t].medium),
			                   sizeof(c->dirs[t]) - 65);
		snprintf(c->dirs[t], sizeof(c->dirs[t]), "%s", d);
		int rc = tier_setup(c, t, e);
		if (rc)
			return rc;
	}
	return 0;
}

int iod_ckpt_open(const struct iod_ckpt_opts *o, struct iod_ckpt **out, struct iod_err *e)
{
	struct iod_ckpt *c = calloc(1, sizeof(*c));
	int rc;
	*out = NULL;
	if (!c)
		return iod_err_set(e, -ENOMEM, "out of memory for a checkpoint store");
	if ((rc = iod_stor_pool_init(&c->pool, &o->tiers, e))) {
		free(c);
		return rc;
	}
	c->rank = o->rank;
	c->chunk_bytes = o->chunk_bytes ? o->chunk_bytes : IOD_CKPT_CHUNK_BYTES_DEFAULT;
	c->nonblock = o->nonblock;
	c->commit = o->commit;
	c->peers_n = o->peers_n;
	c->min_size = o->min_size ? o->min_size : 1;
	if (o->peers_n > IOD_STOR_REPLICAS_MAX - 1 || c->min_size > o->peers_n + 1) {
		iod_err_set(e, -EINVAL,
		            "checkpoint store: %u peers and min_size %u: at most %d peers, and "
		            "min_size at most the copies (peers + 1)",
		            o->peers_n, c->min_size, IOD_STOR_REPLICAS_MAX - 1);
		free(c);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < o->peers_n; i++) {
		if (!o->peers[i] || strlen(o->peers[i]) >= sizeof(c->peers[i])) {
			iod_err_set(e, -EINVAL, "checkpoint store: peer %u has no host:port", i);
			free(c);
			return -EINVAL;
		}
		snprintf(c->peers[i], sizeof(c->peers[i]), "%s", o->peers[i]);
		c->peer_p[i] = c->peers[i];
	}
	c->commit_ctx = o->commit_ctx;
	c->evict = o->evict;
	c->ring_ok = io_uring_queue_init(CKPT_RING_DEPTH, &c->ring, 0) == 0;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->io, NULL);
	pthread_cond_init(&c->cv, NULL);
	if ((rc = dirs_setup(c, o, e)) || (rc = ckpt_scan(c, e)) ||
	    (rc = -pthread_create(&c->th, NULL, ckpt_worker, c))) {
		if (rc && !e->msg[0])
			iod_err_set(e, rc, "cannot start the checkpoint worker");
		c->th_started = false;
		iod_ckpt_close(c);
		return rc;
	}
	c->th_started = true;
	*out = c;
	return 0;
}

void iod_ckpt_close(struct iod_ckpt *c)
{
	if (!c)
		return;
	ckpt_scrub_stop(c);
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (c->th_started)
		pthread_join(c->th, NULL);
	if (c->ring_ok)
		io_uring_queue_exit(&c->ring);
	iod_ckpt_manifest_free(&c->job.m);
	free(c->snap);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->io);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

const char *iod_ckpt_tier_mode(const struct iod_ckpt *c, uint32_t tier)
{
	return tier < c->pool.tiers_n ? c->mode[tier] : "?";
}

/* ---- save: phase 1 ---- */

static int snapshot(struct iod_ckpt *c, uint64_t step, const struct iod_ckpt_region *r, uint32_t n,
                    struct iod_err *e)
{
	const char *names[IOD_CKPT_REGIONS_MAX];
	uint64_t bytes[IOD_CKPT_REGIONS_MAX], off = 0;
	int rc;
	if (n > IOD_CKPT_REGIONS_MAX)
		return iod_err_set(e, -E2BIG, "%u regions, the most is %d (IOD_CKPT_REGIONS_MAX)",
		                   n, IOD_CKPT_REGIONS_MAX);
	for (uint32_t i = 0; i < n; i++)
		names[i] = r[i].name, bytes[i] = r[i].bytes;
	iod_ckpt_manifest_free(&c->job.m);
	if ((rc = iod_ckpt_manifest_plan(&c->job.m, step, c->rank, c->chunk_bytes, names, bytes, n,
	                                 e)))
		return rc;
	if (c->job.m.bytes > c->snap_cap) {
		void *p = realloc(c->snap, c->job.m.bytes);
		if (!p)
			return iod_err_set(e, -ENOMEM,
			                   "out of memory for a %" PRIu64 "-byte snapshot",
			                   c->job.m.bytes);
		c->snap = p;
		c->snap_cap = c->job.m.bytes;
	}
	for (uint32_t i = 0; i < n; i++) {
		memcpy(c->snap + off, r[i].addr, r[i].bytes);
		off += r[i].bytes;
	}
	return 0;
}

int iod_ckpt_save(struct iod_ckpt *c, uint64_t step, const struct iod_ckpt_region *r, uint32_t n,
                  struct iod_err *e)
{
	uint64_t total = 0;
	int rc;
	for (uint32_t i = 0; i < n; i++)
		total += r[i].bytes;
	pthread_mutex_lock(&c->mu);
	if (c->busy && c->nonblock) {
		pthread_mutex_unlock(&c->mu);
		return iod_err_set(e, -EBUSY,
		                   "checkpoint step %" PRIu64 ": the previous save is "
		                   "still being written; try again",
		                   step);
	}
	while (c->busy)
		pthread_cond_wait(&c->cv, &c->mu);
	rc = iod_stor_admit(&c->pool, step, total, &c->job.acts, e);
	if (!rc && (rc = snapshot(c, step, r, n, e)))
		(void)iod_stor_abort(&c->pool, step, &c->job.err);
	if (!rc) {
		c->job.step = step;
		c->job.tier = iod_stor_find(&c->pool, step)->tier;
		c->job.rc = 0;
		c->busy = true;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int iod_ckpt_wait(struct iod_ckpt *c, struct iod_err *e)
{
	int rc;
	pthread_mutex_lock(&c->mu);
	while (c->busy)
		pthread_cond_wait(&c->cv, &c->mu);
	rc = c->job.rc;
	if (rc && e)
		*e = c->job.err;
	c->job.rc = 0;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int iod_ckpt_poll(struct iod_ckpt *c, struct iod_err *e)
{
	int rc;
	pthread_mutex_lock(&c->mu);
	if (c->busy) {
		pthread_mutex_unlock(&c->mu);
		return -EBUSY;
	}
	rc = c->job.rc;
	if (rc && e)
		*e = c->job.err;
	c->job.rc = 0;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int iod_ckpt_list(struct iod_ckpt *c, struct iod_ckpt_info *out, uint32_t max, uint32_t *n,
                  struct iod_err *e)
{
	uint32_t k = 0;
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < c->pool.n; i++) {
		const struct iod_stor_ckpt *x = &c->pool.ck[i];
		if (x->state != IOD_STOR_COMPLETE)
			continue;
		if (k == max) {
			pthread_mutex_unlock(&c->mu);
			return iod_err_set(e, -ENOBUFS, "more than %u checkpoints", max);
		}
		out[k++] = (struct iod_ckpt_info){
		    x->step, x->bytes, iod_stor_medium_name(c->pool.tiers[x->tier].medium),
		    c->dirs[x->tier]};
	}
	pthread_mutex_unlock(&c->mu);
	*n = k;
	return 0;
}
