/*
 * io.c: the checkpoint store's files (docs/storage.md, "On disk"): the
 * worker that persists a snapshot and carries out the tier core's moves and
 * evictions, the start-up scan, restore and scrub.
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
#include <unistd.h>
#include <xxhash.h>

static int sys_err(struct iod_err *e, const char *what, const char *path)
{
	int rc = -errno;
	return iod_err_set(e, rc ? rc : -EIO, "checkpoint: %s %s: %s", what, path,
	                   strerror(rc ? -rc : EIO));
}

static int pwrite_all(int fd, const uint8_t *p, size_t len, off_t off)
{
	while (len) {
		ssize_t w = pwrite(fd, p, len, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w, len -= (size_t)w, off += w;
	}
	return 0;
}

static int pread_all(int fd, uint8_t *p, size_t len, off_t off)
{
	while (len) {
		ssize_t r = pread(fd, p, len, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ENODATA;
		p += r, len -= (size_t)r, off += r;
	}
	return 0;
}

int ckpt_fsync_dir(const char *dir, struct iod_err *e)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	if (fd < 0 || fsync(fd))
		rc = sys_err(e, "fsync of directory", dir);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Remove this rank's files of a step directory: the manifest first, so the
 * checkpoint stops being visible before any chunk goes. */
static void rm_step(const struct iod_ckpt *c, const char *dir)
{
	char path[PATH_MAX + 64], pre[32];
	struct dirent *d;
	DIR *dh;
	ckpt_file(dir, c->rank, NULL, path, sizeof(path));
	unlink(path);
	if (!(dh = opendir(dir)))
		return;
	snprintf(pre, sizeof(pre), "r%u", c->rank);
	while ((d = readdir(dh)) != NULL) {
		size_t k = strlen(pre);
		if (!strncmp(d->d_name, pre, k) && (d->d_name[k] == '-' || d->d_name[k] == '.')) {
			snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
			unlink(path);
		}
	}
	closedir(dh);
	rmdir(dir); /* fails while other ranks' files remain */
}

int ckpt_read_manifest(const struct iod_ckpt *c, const char *dir, uint64_t step,
                       struct iod_ckpt_manifest *m, struct iod_err *e)
{
	char path[PATH_MAX + 64];
	struct iod_buf b;
	int rc;
	ckpt_file(dir, c->rank, NULL, path, sizeof(path));
	iod_buf_init(&b);
	rc = iod_buf_read_file(&b, path, IOD_CKPT_MANIFEST_MAX + 1, e);
	if (!rc && (rc = iod_ckpt_manifest_parse(b.data, b.len, m, e)))
		iod_err_wrap(e, "%s", path);
	iod_buf_free(&b);
	if (!rc && (m->step != step || m->rank != c->rank)) {
		iod_ckpt_manifest_free(m);
		rc = iod_err_set(e, -EBADMSG,
		                 "%s: manifest of step %" PRIu64 " rank %u, expected step "
		                 "%" PRIu64 " rank %u",
		                 path, m->step, m->rank, step, c->rank);
	}
	return rc;
}

/* The manifest last: temporary name, fsync, rename, fsync the directory. */
static int write_manifest(const struct iod_ckpt *c, const char *dir,
                          const struct iod_ckpt_manifest *m, uint64_t *xxh3, struct iod_err *e)
{
	char path[PATH_MAX + 64], tmp[PATH_MAX + 80], *text;
	size_t len;
	int fd, rc = iod_ckpt_manifest_format(m, &text, &len, e);
	if (rc)
		return rc;
	if (xxh3)
		*xxh3 = XXH3_64bits(text, len);
	ckpt_file(dir, c->rank, NULL, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		rc = sys_err(e, "cannot create", tmp);
	else if ((rc = pwrite_all(fd, (uint8_t *)text, len, 0)) || fsync(fd))
		rc = iod_err_set(e, rc ? rc : -errno, "checkpoint: writing %s: %s", tmp,
		                 strerror(rc ? -rc : errno));
	if (fd >= 0)
		close(fd);
	free(text);
	if (!rc && rename(tmp, path))
		rc = sys_err(e, "cannot rename to", path);
	return rc ? rc : ckpt_fsync_dir(dir, e);
}

static uint64_t region_base(const struct iod_ckpt_manifest *m, uint32_t r)
{
	uint64_t off = 0;
	for (uint32_t i = 0; i < r; i++)
		off += m->regions[i].bytes;
	return off;
}

static uint64_t chunk_off(const struct iod_ckpt_manifest *m, const struct iod_ckpt_mchunk *k)
{
	return region_base(m, k->region) + (uint64_t)k->index * m->chunk_bytes;
}

static int open_chunk(const struct iod_ckpt *c, const char *dir, const struct iod_ckpt_mchunk *k,
                      struct iod_err *e)
{
	char path[PATH_MAX + 64];
	int fd;
	ckpt_file(dir, c->rank, k, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	return fd < 0 ? sys_err(e, "cannot create", path) : fd;
}

/* One batch through io_uring: writes, then fsyncs; short writes finish with pwrite. */
static int uring_batch(struct iod_ckpt *c, const int *fd, const uint8_t *const *buf,
                       const uint32_t *len, uint32_t n, struct iod_err *e)
{
	struct io_uring_cqe *cqe;
	int rc = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t j = 0; j < n; j++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
			if (pass == 0)
				io_uring_prep_write(sqe, fd[j], buf[j], len[j], 0);
			else
				io_uring_prep_fsync(sqe, fd[j], IORING_FSYNC_DATASYNC);
			io_uring_sqe_set_data64(sqe, j);
		}
		io_uring_submit(&c->ring);
		for (uint32_t j = 0; j < n; j++) {
			int w = io_uring_wait_cqe(&c->ring, &cqe);
			if (w < 0)
				return iod_err_set(e, w, "checkpoint: io_uring: %s", strerror(-w));
			uint64_t i = io_uring_cqe_get_data64(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(&c->ring, cqe);
			if (res < 0 && !rc)
				rc = iod_err_set(e, res, "checkpoint: chunk write: %s",
				                 strerror(-res));
			else if (pass == 0 && res >= 0 && (uint32_t)res < len[i] && !rc)
				rc = pwrite_all(fd[i], buf[i] + res, len[i] - (uint32_t)res, res);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int write_chunks(struct iod_ckpt *c, const char *dir, struct iod_ckpt_manifest *m,
                        bool uring, struct iod_err *e)
{
	int fd[CKPT_RING_DEPTH];
	const uint8_t *buf[CKPT_RING_DEPTH];
	uint32_t len[CKPT_RING_DEPTH];
	int rc = 0;
	for (uint32_t i = 0; i < m->chunks_n && !rc;) {
		uint32_t n = 0;
		for (; n < CKPT_RING_DEPTH && i + n < m->chunks_n; n++) {
			struct iod_ckpt_mchunk *k = &m->chunks[i + n];
			buf[n] = c->snap + chunk_off(m, k);
			len[n] = k->len;
			k->xxh3 = XXH3_64bits(buf[n], k->len);
			if ((fd[n] = open_chunk(c, dir, k, e)) < 0) {
				rc = fd[n];
				break;
			}
		}
		if (!rc && uring)
			rc = uring_batch(c, fd, buf, len, n, e);
		for (uint32_t j = 0; !rc && !uring && j < n; j++)
			if ((rc = pwrite_all(fd[j], buf[j], len[j], 0)) ||
			    (rc = fdatasync(fd[j]) ? -errno : 0))
				iod_err_set(e, rc, "checkpoint: writing a chunk in %s: %s", dir,
				            strerror(-rc));
		for (uint32_t j = 0; j < n; j++)
			close(fd[j]);
		i += n;
	}
	return rc;
}

/* ---- copies on peers ---- */

struct peer_job {
	const struct iod_ckpt *c;
	uint32_t i;
	int rc;
	struct iod_err err;
};

static void *peer_send(void *arg)
{
	struct peer_job *j = arg;
	j->rc = iod_ckpt_peer_put(j->c->peers[j->i], &j->c->job.m, j->c->snap, &j->err);
	return NULL;
}

/* Send the snapshot to every peer at once (one thread each), then ask the
 * replication core whether the copies meet min_size. */
static int replicate(struct iod_ckpt *c, bool *ok, struct iod_err *e)
{
	struct peer_job j[IOD_STOR_REPLICAS_MAX - 1];
	pthread_t th[IOD_STOR_REPLICAS_MAX - 1];
	bool started[IOD_STOR_REPLICAS_MAX - 1] = {false};
	uint8_t good = 1;
	struct iod_stor_rview v = {.size = c->peers_n + 1,
	                           .min_size = c->min_size,
	                           .copies_n = c->peers_n + 1,
	                           .good = &good,
	                           .chunks_n = 1};
	struct iod_stor_health h;
	for (uint32_t i = 0; i < c->peers_n; i++) {
		j[i] = (struct peer_job){.c = c, .i = i};
		started[i] = pthread_create(&th[i], NULL, peer_send, &j[i]) == 0;
		if (!started[i])
			peer_send(&j[i]);
	}
	v.up[0] = true;
	for (uint32_t i = 0; i < c->peers_n; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		ok[i] = j[i].rc == 0;
		v.up[i + 1] = true;
		good |= (uint8_t)(ok[i] ? 1u << (i + 1) : 0);
	}
	int rc = iod_stor_health_get(&v, &h, e);
	if (!rc && !h.commit_ok) {
		const struct peer_job *bad = NULL;
		for (uint32_t i = 0; i < c->peers_n && !bad; i++)
			if (!ok[i])
				bad = &j[i];
		rc = iod_err_set(e, -EAGAIN,
		                 "checkpoint step %" PRIu64 ": %u of %u copies hold it, the write "
		                 "quorum is %u (%s)",
		                 c->job.step, h.copies_min, v.size, v.min_size,
		                 bad ? bad->err.msg : "?");
	}
	return rc;
}

static int persist(struct iod_ckpt *c, struct iod_err *e)
{
	char dir[PATH_MAX + 32];
	int rc;
	ckpt_step_dir(c, c->job.tier, c->job.step, dir, sizeof(dir));
	if (mkdir(dir, 0755) && errno != EEXIST)
		return sys_err(e, "cannot create", dir);
	uint64_t mh = 0;
	bool peer_ok[IOD_STOR_REPLICAS_MAX - 1] = {false};
	rc = write_chunks(c, dir, &c->job.m, c->uring[c->job.tier], e);
	if (!rc)
		rc = write_manifest(c, dir, &c->job.m, &mh, e);
	if (!rc && c->peers_n)
		rc = replicate(c, peer_ok, e);
	if (!rc && c->commit) {
		struct iod_ckpt_commit k = {
		    .peers_n = c->peers_n,
		    .peers = c->peer_p,
		    .step = c->job.step,
		    .bytes = c->job.m.bytes,
		    .rank = c->rank,
		    .chunks = c->job.m.chunks_n,
		    .chunk_bytes = c->job.m.chunk_bytes,
		    .manifest_xxh3 = mh,
		    .medium = iod_stor_medium_name(c->pool.tiers[c->job.tier].medium)};
		memcpy(k.peer_ok, peer_ok, sizeof(peer_ok));
		if ((rc = c->commit(c->commit_ctx, &k, e)) > 0)
			rc = -rc;
		if (rc && !e->msg[0])
			iod_err_set(e, rc, "checkpoint step %" PRIu64 ": the commit failed",
			            k.step);
	}
	if (rc)
		rm_step(c, dir); /* torn: never visible */
	return rc;
}

static int copy_file(const char *from, const char *to, uint8_t *buf, size_t cap, struct iod_err *e)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, rc = 0;
	off_t off = 0;
	ssize_t r;
	if (in < 0)
		return sys_err(e, "cannot open", from);
	if ((out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		rc = sys_err(e, "cannot create", to);
	while (!rc && (r = pread(in, buf, cap, off)) > 0) {
		if ((rc = pwrite_all(out, buf, (size_t)r, off)))
			iod_err_set(e, rc, "checkpoint: writing %s: %s", to, strerror(-rc));
		off += r;
	}
	if (!rc && fdatasync(out))
		rc = sys_err(e, "fsync of", to);
	close(in);
	if (out >= 0)
		close(out);
	return rc;
}

/* MOVE: copy chunks, then the manifest (visible in both tiers for a moment,
 * identical), then remove the source. */
static int move_step(struct iod_ckpt *c, const struct iod_stor_act *a, struct iod_err *e)
{
	char src[PATH_MAX + 32], dst[PATH_MAX + 32], f1[PATH_MAX + 64], f2[PATH_MAX + 64];
	struct iod_ckpt_manifest m;
	uint8_t *buf;
	int rc;
	ckpt_step_dir(c, a->from, a->step, src, sizeof(src));
	ckpt_step_dir(c, a->to, a->step, dst, sizeof(dst));
	if ((rc = ckpt_read_manifest(c, src, a->step, &m, e)))
		return rc;
	if (!(buf = malloc(m.chunk_bytes))) {
		iod_ckpt_manifest_free(&m);
		return iod_err_set(e, -ENOMEM, "out of memory for a chunk");
	}
	if (mkdir(dst, 0755) && errno != EEXIST)
		rc = sys_err(e, "cannot create", dst);
	for (uint32_t i = 0; !rc && i < m.chunks_n; i++) {
		ckpt_file(src, c->rank, &m.chunks[i], f1, sizeof(f1));
		ckpt_file(dst, c->rank, &m.chunks[i], f2, sizeof(f2));
		rc = copy_file(f1, f2, buf, m.chunk_bytes, e);
	}
	if (!rc)
		rc = write_manifest(c, dst, &m, NULL, e);
	free(buf);
	iod_ckpt_manifest_free(&m);
	rm_step(c, rc ? dst : src);
	return rc;
}

static int run_acts(struct iod_ckpt *c, const struct iod_stor_acts *acts, struct iod_err *e)
{
	char dir[PATH_MAX + 32];
	int rc = 0;
	for (uint32_t i = 0; i < acts->n && !rc; i++) {
		const struct iod_stor_act *a = &acts->a[i];
		if (a->kind == IOD_STOR_ACT_WRITE) {
			rc = persist(c, e);
			continue;
		}
		if (a->kind != IOD_STOR_ACT_MOVE && c->evict) {
			/* its object first: nothing committed names removed files */
			struct iod_err ee = {0};
			(void)c->evict(c->commit_ctx, c->rank, a->step, &ee);
		}
		pthread_mutex_lock(&c->io);
		if (a->kind == IOD_STOR_ACT_MOVE) {
			rc = move_step(c, a, e);
		} else {
			ckpt_step_dir(c, a->from, a->step, dir, sizeof(dir));
			rm_step(c, dir);
		}
		pthread_mutex_unlock(&c->io);
	}
	return rc;
}

static void run_job(struct iod_ckpt *c)
{
	struct iod_err e = {0};
	int rc = run_acts(c, &c->job.acts, &e);
	pthread_mutex_lock(&c->mu);
	if (rc)
		(void)iod_stor_abort(&c->pool, c->job.step, &e);
	else
		rc = iod_stor_commit(&c->pool, c->job.step, &c->commit_acts, &e);
	pthread_mutex_unlock(&c->mu);
	/* drains and retention after the commit; a failed drain leaves a copy behind */
	if (!rc)
		(void)run_acts(c, &c->commit_acts, &e);
	pthread_mutex_lock(&c->mu);
	c->job.rc = rc;
	c->job.err = e;
	c->busy = false;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

void *ckpt_worker(void *arg)
{
	struct iod_ckpt *c = arg;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->busy && !c->stop)
			pthread_cond_wait(&c->cv, &c->mu);
		if (!c->busy)
			break; /* stop, nothing in flight */
		pthread_mutex_unlock(&c->mu);
		run_job(c);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---- start-up ---- */

static void scan_tier(struct iod_ckpt *c, uint32_t t)
{
	char dir[PATH_MAX + 32];
	struct dirent *d;
	DIR *dh = opendir(c->dirs[t]);
	if (!dh)
		return;
	while ((d = readdir(dh)) != NULL) {
		struct iod_ckpt_manifest m;
		struct iod_err e = {0};
		char *end;
		if (strncmp(d->d_name, "step-", 5) || strlen(d->d_name) != 25)
			continue;
		uint64_t step = strtoull(d->d_name + 5, &end, 10);
		if (*end)
			continue;
		ckpt_step_dir(c, t, step, dir, sizeof(dir));
		int rc = ckpt_read_manifest(c, dir, step, &m, &e);
		if (rc == -ENOENT) {
			rm_step(c, dir); /* torn save: no manifest */
			continue;
		}
		if (rc)
			continue; /* damaged manifest: left for inspection, never visible */
		rc = iod_stor_adopt(&c->pool, step, m.bytes, t, &e);
		iod_ckpt_manifest_free(&m);
		if (rc == -EEXIST)
			rm_step(c, dir); /* the slower copy of an interrupted move */
	}
	closedir(dh);
}

int ckpt_scan(struct iod_ckpt *c, struct iod_err *e)
{
	for (uint32_t t = 0; t < c->pool.tiers_n; t++)
		scan_tier(c, t);
	return 0;
}

/* ---- restore and scrub ---- */

/* Read and verify every chunk into dst (the snapshot's layout) or a scratch buffer. */
/* Chunks first, first + stride, ... of m: read (into dst, or a scratch
 * buffer) and checked against the manifest; the first fault in that order. */
static int verify_part(const struct iod_ckpt *c, const char *dir, const struct iod_ckpt_manifest *m,
                       uint8_t *const *dst, uint32_t first, uint32_t stride, uint64_t *checked,
                       uint32_t *bad, struct iod_err *e)
{
	char path[PATH_MAX + 64];
	uint8_t *scratch = dst ? NULL : malloc(m->chunk_bytes);
	int rc = 0;
	if (!dst && !scratch)
		return iod_err_set(e, -ENOMEM, "out of memory for a chunk");
	for (uint32_t i = first; i < m->chunks_n && !rc; i += stride) {
		*bad = i;
		const struct iod_ckpt_mchunk *k = &m->chunks[i];
		uint8_t *p = dst ? dst[k->region] + (uint64_t)k->index * m->chunk_bytes : scratch;
		struct stat st;
		ckpt_file(dir, c->rank, k, path, sizeof(path));
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			rc = iod_err_set(e, -EBADMSG,
			                 "checkpoint step %" PRIu64 ": chunk %s is missing "
			                 "(%s)",
			                 m->step, path, strerror(errno));
		else if (fstat(fd, &st) || (uint64_t)st.st_size != k->len ||
		         pread_all(fd, p, k->len, 0))
			rc = iod_err_set(e, -EBADMSG,
			                 "checkpoint step %" PRIu64 ": chunk %s is %lld "
			                 "bytes, the manifest says %u (damaged)",
			                 m->step, path, (long long)st.st_size, k->len);
		else if (XXH3_64bits(p, k->len) != k->xxh3)
			rc = iod_err_set(
			    e, -EBADMSG,
			    "checkpoint step %" PRIu64 ": chunk %s is damaged: xxh3 %016" PRIx64
			    ", the manifest says %016" PRIx64 "; restore another step or "
			    "repair it from a peer",
			    m->step, path, (uint64_t)XXH3_64bits(p, k->len), k->xxh3);
		if (fd >= 0)
			close(fd);
		if (!rc && checked)
			*checked += k->len;
	}
	free(scratch);
	return rc;
}

/* A restore's chunks, read on VERIFY_THREADS threads at once (a restore
 * after a node loss reads the whole checkpoint while nothing else runs). */
#define VERIFY_THREADS 2

struct verify_job {
	const struct iod_ckpt *c;
	const char *dir;
	const struct iod_ckpt_manifest *m;
	uint8_t *const *dst;
	uint32_t first, bad;
	int rc;
	struct iod_err err;
};

static void *verify_main(void *arg)
{
	struct verify_job *j = arg;
	j->rc = verify_part(j->c, j->dir, j->m, j->dst, j->first, VERIFY_THREADS, NULL, &j->bad,
	                    &j->err);
	return NULL;
}

static int verify(const struct iod_ckpt *c, const char *dir, const struct iod_ckpt_manifest *m,
                  uint8_t *const *dst, uint64_t *checked, struct iod_err *e)
{
	uint32_t bad = 0;
	if (!dst ||
	    m->chunks_n < 2 * VERIFY_THREADS) /* the scrub paces itself: one chunk at a time */
		return verify_part(c, dir, m, dst, 0, 1, checked, &bad, e);
	struct verify_job j[VERIFY_THREADS];
	pthread_t th[VERIFY_THREADS];
	bool started[VERIFY_THREADS] = {false};
	int rc = 0;
	for (uint32_t t = 0; t < VERIFY_THREADS; t++) {
		j[t] = (struct verify_job){.c = c, .dir = dir, .m = m, .dst = dst, .first = t};
		started[t] = t > 0 && pthread_create(&th[t], NULL, verify_main, &j[t]) == 0;
		if (!started[t] && t > 0)
			verify_main(&j[t]);
	}
	verify_main(&j[0]);
	/* the fault of the lowest chunk, as one thread would have found first */
	uint32_t at = UINT32_MAX;
	for (uint32_t t = 0; t < VERIFY_THREADS; t++) {
		if (started[t])
			pthread_join(th[t], NULL);
		if (j[t].rc && j[t].bad < at) {
			at = j[t].bad;
			rc = j[t].rc;
			*e = j[t].err;
		}
	}
	if (!rc && checked)
		*checked += m->bytes;
	return rc;
}

/* The directory of a visible step (or the latest), under `io`. */
int ckpt_find_step(struct iod_ckpt *c, uint64_t step, char *dir, size_t cap, uint64_t *found,
                   struct iod_err *e)
{
	const struct iod_stor_ckpt *x;
	pthread_mutex_lock(&c->mu);
	x = step == IOD_CKPT_LATEST ? iod_stor_latest(&c->pool) : iod_stor_find(&c->pool, step);
	if (x && x->state == IOD_STOR_COMPLETE) {
		ckpt_step_dir(c, x->tier, x->step, dir, cap);
		*found = x->step;
	}
	pthread_mutex_unlock(&c->mu);
	if (!x || x->state != IOD_STOR_COMPLETE) {
		if (step == IOD_CKPT_LATEST)
			return iod_err_set(e, -ENOENT, "no complete checkpoint to restore");
		return iod_err_set(e, -ENOENT, "no complete checkpoint of step %" PRIu64, step);
	}
	return 0;
}

static int match_regions(const struct iod_ckpt_manifest *m, const struct iod_ckpt_region *r,
                         uint32_t n, uint8_t **dst, struct iod_err *e)
{
	if (n != m->regions_n)
		return iod_err_set(e, -EINVAL,
		                   "checkpoint step %" PRIu64 " has %u regions, %u given", m->step,
		                   m->regions_n, n);
	for (uint32_t i = 0; i < m->regions_n; i++) {
		uint32_t j = 0;
		while (j < n && strcmp(r[j].name ? r[j].name : "", m->regions[i].name))
			j++;
		if (j == n || r[j].bytes != m->regions[i].bytes)
			return iod_err_set(
			    e, -EINVAL,
			    "checkpoint step %" PRIu64 ": region %s of %" PRIu64
			    " bytes has no region of that name and size to restore into",
			    m->step, m->regions[i].name, m->regions[i].bytes);
		dst[i] = r[j].addr;
	}
	return 0;
}

int iod_ckpt_restore(struct iod_ckpt *c, uint64_t step, const struct iod_ckpt_region *r, uint32_t n,
                     uint64_t *restored, struct iod_err *e)
{
	char dir[PATH_MAX + 32];
	uint8_t *dst[IOD_CKPT_REGIONS_MAX];
	struct iod_ckpt_manifest m;
	uint64_t found = 0;
	int rc;
	pthread_mutex_lock(&c->io);
	rc = ckpt_find_step(c, step, dir, sizeof(dir), &found, e);
	if (!rc && !(rc = ckpt_read_manifest(c, dir, found, &m, e))) {
		rc = match_regions(&m, r, n, dst, e);
		if (!rc)
			rc = verify(c, dir, &m, dst, NULL, e);
		iod_ckpt_manifest_free(&m);
	}
	pthread_mutex_unlock(&c->io);
	if (!rc && restored)
		*restored = found;
	return rc;
}

/* The size of one region of a manifest: 0, or -ENOENT naming it. */
int ckpt_manifest_region_bytes(const struct iod_ckpt_manifest *m, const char *name, uint64_t *bytes,
                               struct iod_err *e)
{
	for (uint32_t i = 0; i < m->regions_n; i++)
		if (!strcmp(m->regions[i].name, name)) {
			*bytes = m->regions[i].bytes;
			return 0;
		}
	return iod_err_set(e, -ENOENT, "checkpoint step %" PRIu64 " has no region %s", m->step,
	                   name);
}

int iod_ckpt_region_bytes(struct iod_ckpt *c, uint64_t step, const char *name, uint64_t *bytes,
                          struct iod_err *e)
{
	char dir[PATH_MAX + 32];
	struct iod_ckpt_manifest m;
	uint64_t found = 0;
	int rc;
	pthread_mutex_lock(&c->io);
	rc = ckpt_find_step(c, step, dir, sizeof(dir), &found, e);
	if (!rc && !(rc = ckpt_read_manifest(c, dir, found, &m, e))) {
		rc = ckpt_manifest_region_bytes(&m, name, bytes, e);
		iod_ckpt_manifest_free(&m);
	}
	pthread_mutex_unlock(&c->io);
	return rc;
}

int iod_ckpt_scrub(struct iod_ckpt *c, uint64_t step, uint64_t *bytes_checked, struct iod_err *e)
{
	struct iod_ckpt_info info[IOD_STOR_CKPTS_MAX];
	uint32_t n = 0, seen = 0;
	int rc = iod_ckpt_list(c, info, IOD_STOR_CKPTS_MAX, &n, e);
	if (bytes_checked)
		*bytes_checked = 0;
	for (uint32_t i = 0; !rc && i < n; i++, seen++) {
		char dir[PATH_MAX + 32];
		struct iod_ckpt_manifest m;
		uint64_t found;
		if (step != IOD_CKPT_ALL && info[i].step != step) {
			seen--;
			continue;
		}
		pthread_mutex_lock(&c->io);
		rc = ckpt_find_step(c, info[i].step, dir, sizeof(dir), &found, e);
		if (!rc && !(rc = ckpt_read_manifest(c, dir, found, &m, e))) {
			rc = verify(c, dir, &m, NULL, bytes_checked, e);
			iod_ckpt_manifest_free(&m);
		}
		pthread_mutex_unlock(&c->io);
	}
	if (!rc && step != IOD_CKPT_ALL && seen == 0)
		rc = iod_err_set(e, -ENOENT, "no complete checkpoint of step %" PRIu64 " to scrub",
		                 step);
	return rc;
}

/* ---- repair from a peer ---- */

/* Read and verify one chunk into buf: 0, or -EBADMSG when missing or damaged. */
int ckpt_chunk_check(const struct iod_ckpt *c, const char *dir, const struct iod_ckpt_mchunk *k,
                     uint8_t *buf)
{
	char path[PATH_MAX + 64];
	struct stat st;
	int rc = -EBADMSG;
	ckpt_file(dir, c->rank, k, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -EBADMSG;
	if (!fstat(fd, &st) && (uint64_t)st.st_size == k->len && !pread_all(fd, buf, k->len, 0) &&
	    XXH3_64bits(buf, k->len) == k->xxh3)
		rc = 0;
	close(fd);
	return rc;
}

/* Replace one chunk file whole: a temporary name, fdatasync, rename. */
int ckpt_chunk_put(const struct iod_ckpt *c, const char *dir, const struct iod_ckpt_mchunk *k,
                   const uint8_t *buf, struct iod_err *e)
{
	char path[PATH_MAX + 64], tmp[PATH_MAX + 80];
	int rc = 0;
	ckpt_file(dir, c->rank, k, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.repair", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return sys_err(e, "cannot create", tmp);
	if ((rc = pwrite_all(fd, buf, k->len, 0)) || fdatasync(fd))
		rc = sys_err(e, "cannot write", tmp);
	close(fd);
	if (!rc && rename(tmp, path))
		rc = sys_err(e, "cannot rename", tmp);
	if (rc)
		unlink(tmp);
	return rc;
}

static bool manifests_agree(const struct iod_ckpt_manifest *a, const struct iod_ckpt_manifest *b)
{
	if (a->chunks_n != b->chunks_n || a->chunk_bytes != b->chunk_bytes || a->bytes != b->bytes)
		return false;
	for (uint32_t i = 0; i < a->chunks_n; i++)
		if (a->chunks[i].xxh3 != b->chunks[i].xxh3 || a->chunks[i].len != b->chunks[i].len)
			return false;
	return true;
}

int iod_ckpt_repair(struct iod_ckpt *c, struct iod_ckpt *peer, uint64_t step,
                    struct iod_ckpt_repair_report *rep, struct iod_err *e)
{
	char dir[2][PATH_MAX + 32];
	struct iod_ckpt *cs[2] = {c, peer};
	struct iod_ckpt_manifest m[2] = {{0}, {0}};
	uint8_t *good = NULL, *buf = NULL;
	struct iod_stor_repair *plan = NULL;
	uint64_t found[2] = {0, 0};
	uint32_t plan_n = 0, lost = 0;
	int rc = 0;
	memset(rep, 0, sizeof(*rep));
	if (c == peer || c->rank != peer->rank)
		return iod_err_set(e, -EINVAL, "repair needs a peer store of the same rank");
	/* both stores' io locks, in address order */
	pthread_mutex_lock(&(c < peer ? c : peer)->io);
	pthread_mutex_lock(&(c < peer ? peer : c)->io);
	for (int i = 0; i < 2 && !rc; i++)
		if (!(rc = ckpt_find_step(cs[i], step, dir[i], sizeof(dir[i]), &found[i], e)))
			rc = ckpt_read_manifest(cs[i], dir[i], found[i], &m[i], e);
	if (!rc && (found[0] != found[1] || !manifests_agree(&m[0], &m[1])))
		rc = iod_err_set(e, -EBADMSG,
		                 "checkpoint step %" PRIu64 ": the peer's manifest (step %" PRIu64
		                 ") does not match this one; it cannot repair it",
		                 found[0], found[1]);
	if (!rc && (!(good = calloc(m[0].chunks_n ? m[0].chunks_n : 1, 1)) ||
	            !(buf = malloc(m[0].chunk_bytes)) ||
	            !(plan = calloc(m[0].chunks_n ? m[0].chunks_n : 1, sizeof(*plan)))))
		rc = iod_err_set(e, -ENOMEM, "out of memory for a repair");
	for (uint32_t k = 0; !rc && k < m[0].chunks_n; k++)
		for (uint32_t r = 0; r < 2; r++)
			if (!ckpt_chunk_check(cs[r], dir[r], &m[0].chunks[k], buf))
				good[k] |= (uint8_t)(1u << r);
	if (!rc) {
		struct iod_stor_rview v = {.size = 2,
		                           .min_size = 1,
		                           .copies_n = 2,
		                           .up = {true, true},
		                           .good = good,
		                           .chunks_n = m[0].chunks_n};
		rc = iod_stor_repair_plan(&v, plan, m[0].chunks_n, &plan_n, &lost, e);
		rep->chunks = m[0].chunks_n;
	}
	for (uint32_t i = 0; !rc && i < plan_n; i++) {
		const struct iod_ckpt_mchunk *k = &m[0].chunks[plan[i].chunk];
		uint32_t from = plan[i].from, to = plan[i].to;
		if (ckpt_chunk_check(cs[from], dir[from], k, buf))
			rc = iod_err_set(e, -EIO,
			                 "checkpoint step %" PRIu64 ": chunk %u.%u changed "
			                 "during the repair",
			                 found[0], k->region, k->index);
		else if (!(rc = ckpt_chunk_put(cs[to], dir[to], k, buf, e)))
			rep->repaired[to]++;
	}
	for (int i = 0; !rc && plan_n && i < 2; i++)
		if (rep->repaired[i])
			rc = ckpt_fsync_dir(dir[i], e);
	if (!rc && lost) {
		rep->lost = lost;
		rc = iod_err_set(e, -EBADMSG,
		                 "checkpoint step %" PRIu64 ": %u chunk(s) are damaged in both "
		                 "copies; restore another step",
		                 found[0], lost);
	}
	pthread_mutex_unlock(&(c < peer ? peer : c)->io);
	pthread_mutex_unlock(&(c < peer ? c : peer)->io);
	iod_ckpt_manifest_free(&m[0]);
	iod_ckpt_manifest_free(&m[1]);
	free(good);
	free(buf);
	free(plan);
	return rc;
}
