/*
 * bench_storage.c: the checkpoint store's figures (docs/storage.md), with
 * fio from Debian as the reference on the same directories in the same run.
 *
 *   BENCH storage.tier medium=M dir=D mode=W size_bytes=N gbps=G fio_gbps=F frac_fio=R
 *         snapshot_ms=S runs=K
 *     libiod-ckpt's persist of one checkpoint (phase 2, from the end of
 *     save to the end of wait: XXH3 of every chunk, chunk files, fsyncs,
 *     manifest, rename, directory fsync) against `fio --rw=write --bs=4M
 *     --end_fsync=1` on the same directory (io_uring on NVMe, psync on the
 *     PMem tier), taking turns K times; medians. gbps is Gbit/s.
 *     snapshot_ms is phase 1 (the in-memory copy), not a write to the tier.
 *     Target frac_fio >= 0.9.
 *   BENCH storage.stall step_ms=S params_bytes=N every=10 stall_pct=P sync_stall_pct=Q
 *         overhead_pct=O sync_overhead_pct=O2 stall_ms_per_ckpt=X
 *     a training loop (a compute phase over the parameters of S ms per step)
 *     that checkpoints every 10 steps: stall_pct is the time the loop is
 *     blocked in iod_ckpt_save (two-phase: the snapshot) as a share of the
 *     loop's compute time, sync_stall_pct the same for a synchronous save
 *     (save + wait); overhead_pct is the loop's wall time against the same
 *     loop without checkpoints (the persist competes for the CPUs and the
 *     memory bus). Target stall_pct < 1.
 *   BENCH storage.restore source=local medium=M size_bytes=N seconds=S bound_s=B read_gbps=R
 *     iod_ckpt_restore (read and verify every chunk) of one checkpoint from
 *     the NVMe tier against 1.2 x size / (fio sequential read bandwidth of
 *     the same directory) + 100 ms. source=local: restore from a peer needs
 *     the replication shell, which is not built; no peer figure is printed.
 *
 *   BENCH storage.replicated copies=3 min_size=2 ... gbps=G raw_gbps=R frac_raw=F
 *     a save to the NVMe tier and two peers over HTTP (loopback, same disk)
 *     against fio's raw single-disk rate. Target >= 0.5.
 *   BENCH storage.restore source=peer ... seconds=S bound_s=B
 *     a restore from a peer over HTTP, every chunk verified.
 *
 * Not printed: storage.nodeloss (node loss needs a cluster: leases, the
 * rescheduler, agents); tests/integration/ckpt_nodeloss.sh prints its phases.
 *
 * Directories: $IOD_BENCH_STORAGE_PMEM (default /dev/shm/iod-bench-storage.PID,
 * a tmpfs: PMem is emulated, and the line says so) and $IOD_BENCH_STORAGE_NVME
 * (default /var/tmp/iod-bench-storage.PID). Size per checkpoint:
 * $IOD_BENCH_STORAGE_MB (default 256). Everything written is removed.
 */
#include "bench.h"
#include "iod/ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define RUNS 5

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 10) : dflt;
}

static void rm_rf(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_storage: could not remove %s\n", dir);
}

/* fio's bandwidth in bytes/s for `rw` (write|read) from its JSON output; 0 on failure. */
static double fio_bw(const char *dir, const char *rw, const char *engine, uint64_t bytes)
{
	char cmd[1024], buf[4096];
	const char *sect = strcmp(rw, "read") ? "\"write\" :" : "\"read\" :";
	double bw = 0;
	snprintf(cmd, sizeof(cmd),
	         "fio --name=seq --directory='%s' --rw=%s --bs=4M --size=%" PRIu64
	         " --ioengine=%s --iodepth=32 --end_fsync=1 --fallocate=none"
	         " --output-format=json 2>/dev/null",
	         dir, rw, bytes, engine);
	FILE *p = popen(cmd, "r");
	if (!p)
		return 0;
	/* the JSON is long; keep it whole to find the section */
	size_t cap = 1 << 20, n = 0;
	char *all = malloc(cap);
	if (!all) {
		pclose(p);
		return 0;
	}
	while (fgets(buf, sizeof(buf), p)) {
		size_t l = strlen(buf);
		if (n + l + 1 < cap) {
			memcpy(all + n, buf, l);
			n += l;
		}
	}
	all[n] = 0;
	int rc = pclose(p);
	char *s = strstr(all, sect);
	char *b = s ? strstr(s, "\"bw_bytes\" :") : NULL;
	if (rc == 0 && b)
		bw = strtod(b + strlen("\"bw_bytes\" :"), NULL);
	free(all);
	return bw;
}

static int cmp_d(const void *a, const void *b)
{
	return bench_cmp_double(a, b);
}

static int open_one(enum iod_stor_medium m, const char *dir, uint64_t cap, uint32_t keep,
                    struct iod_ckpt **ck)
{
	struct iod_ckpt_opts o = {
	    .tiers = {.tiers_n = 1, .capacity_bytes = cap, .fast_keep = 1, .keep_max = keep},
	    .dirs = {dir}};
	struct iod_err e = {0};
	o.tiers.tiers[0] = (struct iod_stor_tier_cfg){m, 10000};
	int rc = iod_ckpt_open(&o, ck, &e);
	if (rc)
		fprintf(stderr, "bench_storage: open %s: %s\n", dir, e.msg);
	return rc;
}

/* One save + wait of `bytes`: the persist's bandwidth in bytes/s (0 on
 * failure) and the snapshot's seconds. */
static double iod_write_bw(struct iod_ckpt *ck, uint8_t *buf, uint64_t bytes, uint64_t step,
                           double *snap_s)
{
	struct iod_err e = {0};
	struct iod_ckpt_region r = {"params", buf, bytes};
	buf[0] = (uint8_t)step;
	double t0 = bench_now_s();
	int rc = iod_ckpt_save(ck, step, &r, 1, &e);
	double t1 = bench_now_s();
	if (rc || iod_ckpt_wait(ck, &e)) {
		fprintf(stderr, "bench_storage: save: %s\n", e.msg);
		return 0;
	}
	*snap_s = t1 - t0;
	return (double)bytes / (bench_now_s() - t1);
}

/*
 * fio and iod take turns, RUNS each, on the same directory (the machine may
 * be shared: interleaving gives both the same weather); medians. iod's
 * retention is set so that no eviction runs inside the timed saves (fio
 * deletes nothing either).
 */
static double bench_tier(enum iod_stor_medium m, const char *dir, uint8_t *buf, uint64_t bytes)
{
	char fdir[600], cdir[600], mk[700];
	struct iod_ckpt *ck = NULL;
	double f[RUNS], w[RUNS], sn[RUNS];
	const char *engine = m >= IOD_STOR_NVME ? "io_uring" : "psync";
	snprintf(fdir, sizeof(fdir), "%s/fio", dir);
	snprintf(cdir, sizeof(cdir), "%s/ckpt", dir);
	snprintf(mk, sizeof(mk), "mkdir -p '%s'", fdir);
	if (system(mk) != 0 || open_one(m, cdir, bytes * (RUNS + 1), RUNS + 1, &ck))
		return 0;
	for (int i = 0; i < RUNS; i++) {
		f[i] = fio_bw(fdir, "write", engine, bytes);
		rm_rf(fdir);
		if (system(mk) != 0)
			f[i] = 0;
		w[i] = iod_write_bw(ck, buf, bytes, (uint64_t)i + 1, &sn[i]);
	}
	char mode[32];
	snprintf(mode, sizeof(mode), "%s", iod_ckpt_tier_mode(ck, 0));
	for (char *p = mode; *p; p++)
		if (*p == ' ' || *p == '(' || *p == ')')
			*p = *p == ' ' ? '_' : '-';
	iod_ckpt_close(ck);
	rm_rf(cdir);
	rm_rf(fdir);
	qsort(f, RUNS, sizeof(f[0]), cmp_d);
	qsort(w, RUNS, sizeof(w[0]), cmp_d);
	qsort(sn, RUNS, sizeof(sn[0]), cmp_d);
	if (f[0] <= 0 || w[0] <= 0) {
		bench_line("BENCH storage.tier medium=%s error=%s", iod_stor_medium_name(m),
		           f[0] <= 0 ? "fio_failed" : "save_failed");
		return 0;
	}
	bench_line("BENCH storage.tier medium=%s dir=%s mode=%s size_bytes=%" PRIu64
	           " gbps=%.2f fio_gbps=%.2f frac_fio=%.3f snapshot_ms=%.1f runs=%d",
	           iod_stor_medium_name(m), dir, mode, bytes, w[RUNS / 2] * 8 / 1e9,
	           f[RUNS / 2] * 8 / 1e9, w[RUNS / 2] / f[RUNS / 2], sn[RUNS / 2] * 1e3, RUNS);
	return f[RUNS / 2];
}

/*
 * Replicated: the NVMe tier plus two peers (chunk servers over HTTP on
 * loopback, in this process, their directories on the same disk), quorum 2
 * of 3; the persist's bandwidth against the raw single-disk rate (fio's
 * sequential write on that directory, from bench_tier). On one machine all
 * three copies share one disk, so 1/3 is the disk-bound ceiling here; on
 * three nodes each copy has its own.
 */
static void bench_replicated(const char *dir, uint8_t *buf, uint64_t bytes, double raw_bps)
{
	char cdir[600], d1[600], d2[600];
	struct iod_ckpt_peer *p1 = NULL, *p2 = NULL;
	struct iod_ckpt *ck = NULL;
	struct iod_err e = {0};
	double w[RUNS], sn;
	snprintf(cdir, sizeof(cdir), "%s/repl", dir);
	snprintf(d1, sizeof(d1), "%s/peer1", dir);
	snprintf(d2, sizeof(d2), "%s/peer2", dir);
	if (raw_bps <= 0)
		return;
	if (iod_ckpt_peer_start("127.0.0.1:0", d1, &p1, &e) ||
	    iod_ckpt_peer_start("127.0.0.1:0", d2, &p2, &e)) {
		bench_line("BENCH storage.replicated error=peer_start");
		fprintf(stderr, "bench_storage: %s\n", e.msg);
		iod_ckpt_peer_stop(p1);
		return;
	}
	struct iod_ckpt_opts o = {.tiers = {.tiers_n = 1,
	                                    .capacity_bytes = bytes * (RUNS + 1),
	                                    .fast_keep = 1,
	                                    .keep_max = RUNS + 1},
	                          .dirs = {cdir},
	                          .peers = {iod_ckpt_peer_addr(p1), iod_ckpt_peer_addr(p2)},
	                          .peers_n = 2,
	                          .min_size = 2};
	o.tiers.tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, 10000};
	int rc = iod_ckpt_open(&o, &ck, &e);
	for (int i = 0; !rc && i < RUNS; i++)
		if ((w[i] = iod_write_bw(ck, buf, bytes, (uint64_t)i + 1, &sn)) <= 0)
			rc = -EIO;
	if (ck)
		iod_ckpt_close(ck);
	iod_ckpt_peer_stop(p1);
	iod_ckpt_peer_stop(p2);
	rm_rf(cdir);
	rm_rf(d1);
	rm_rf(d2);
	if (rc) {
		bench_line("BENCH storage.replicated error=save_failed");
		return;
	}
	qsort(w, RUNS, sizeof(w[0]), cmp_d);
	bench_line("BENCH storage.replicated copies=3 min_size=2 transport=http_loopback "
	           "same_disk=1 size_bytes=%" PRIu64 " gbps=%.2f raw_gbps=%.2f frac_raw=%.3f",
	           bytes, w[RUNS / 2] * 8 / 1e9, raw_bps * 8 / 1e9, w[RUNS / 2] / raw_bps);
}

/* Restore from a peer (HTTP on loopback, every chunk verified) against
 * 1.2 x size / (fio's sequential read of the peer's directory) + 100 ms. */
static void bench_restore_peer(const char *dir, uint8_t *buf, uint64_t bytes)
{
	char d1[600], fdir[600], mk[700];
	struct iod_ckpt_peer *p = NULL;
	struct iod_err e = {0};
	struct iod_ckpt_manifest m;
	const char *name = "params";
	snprintf(d1, sizeof(d1), "%s/restore-peer", dir);
	snprintf(fdir, sizeof(fdir), "%s/fio-read", d1);
	snprintf(mk, sizeof(mk), "mkdir -p '%s'", fdir);
	if (iod_ckpt_peer_start("127.0.0.1:0", d1, &p, &e) || system(mk) != 0) {
		bench_line("BENCH storage.restore source=peer error=peer_start");
		iod_ckpt_peer_stop(p);
		return;
	}
	int rc =
	    iod_ckpt_manifest_plan(&m, 1, 0, IOD_CKPT_CHUNK_BYTES_DEFAULT, &name, &bytes, 1, &e);
	for (uint32_t i = 0; !rc && i < m.chunks_n; i++)
		m.chunks[i].xxh3 = XXH3_64bits(buf + (uint64_t)i * m.chunk_bytes, m.chunks[i].len);
	if (!rc)
		rc = iod_ckpt_peer_put(iod_ckpt_peer_addr(p), &m, buf, &e);
	iod_ckpt_manifest_free(&m);
	(void)fio_bw(fdir, "write", "io_uring", bytes);
	double rbw = fio_bw(fdir, "read", "io_uring", bytes);
	uint8_t *dst = rc ? NULL : malloc(bytes);
	double s = 0;
	if (dst) {
		struct iod_ckpt_region r = {"params", dst, bytes};
		double t0 = bench_now_s();
		rc = iod_ckpt_fetch(iod_ckpt_peer_addr(p), 0, 1, &r, 1, &e);
		s = bench_now_s() - t0;
		if (!rc && memcmp(dst, buf, bytes))
			rc = -EBADMSG;
		free(dst);
	}
	iod_ckpt_peer_stop(p);
	rm_rf(d1);
	if (rc || rbw <= 0) {
		bench_line("BENCH storage.restore source=peer error=%s",
		           rc ? "fetch_failed" : "fio_failed");
		if (rc)
			fprintf(stderr, "bench_storage: fetch: %s\n", e.msg);
		return;
	}
	bench_line("BENCH storage.restore source=peer transport=http_loopback medium=NVMe "
	           "size_bytes=%" PRIu64 " seconds=%.3f bound_s=%.3f read_gbps=%.2f",
	           bytes, s, 1.2 * (double)bytes / rbw + 0.1, rbw * 8 / 1e9);
}

/* One synthetic training step: multiply-adds over the parameters for step_ms. */
static void compute(float *p, size_t n, double step_ms)
{
	double t_end = bench_now_s() + step_ms / 1e3;
	size_t i = 0;
	while (bench_now_s() < t_end) {
		for (size_t k = 0; k < 65536; k++, i = (i + 1) % n)
			p[i] = p[i] * 0.999f + 0.001f;
	}
}

/* The loop; mode 0 none, 1 two-phase, 2 synchronous. Returns wall seconds. */
static double train(struct iod_ckpt *ck, float *p, size_t n, int steps, double step_ms, int mode,
                    uint64_t *step0, double *blocked_s)
{
	struct iod_ckpt_region r = {"params", p, n * sizeof(float)};
	struct iod_err e = {0};
	double t0 = bench_now_s();
	*blocked_s = 0;
	for (int s = 1; s <= steps; s++) {
		compute(p, n, step_ms);
		if (mode && s % 10 == 0) {
			double b = bench_now_s();
			if (iod_ckpt_save(ck, ++*step0, &r, 1, &e) ||
			    (mode == 2 && iod_ckpt_wait(ck, &e)))
				fprintf(stderr, "bench_storage: save: %s\n", e.msg);
			*blocked_s += bench_now_s() - b;
		}
	}
	if (mode && iod_ckpt_wait(ck, &e))
		fprintf(stderr, "bench_storage: save: %s\n", e.msg);
	return bench_now_s() - t0;
}

static void bench_stall(const char *dir, uint64_t params_bytes)
{
	const double step_ms = (double)env_u64("IOD_BENCH_STORAGE_STEP_MS", 200);
	const int steps = 40;
	size_t n = params_bytes / sizeof(float);
	float *p = malloc(n * sizeof(float));
	char cdir[600];
	struct iod_ckpt *ck = NULL;
	uint64_t step = 0;
	double b0, b1, b2;
	if (!p)
		return;
	for (size_t i = 0; i < n; i++)
		p[i] = (float)i;
	snprintf(cdir, sizeof(cdir), "%s/stall", dir);
	if (open_one(IOD_STOR_NVME, cdir, params_bytes * 4, 2, &ck)) {
		free(p);
		return;
	}
	double w0 = train(ck, p, n, steps, step_ms, 0, &step, &b0);
	double w1 = train(ck, p, n, steps, step_ms, 1, &step, &b1);
	double w2 = train(ck, p, n, steps, step_ms, 2, &step, &b2);
	double comp = steps * step_ms / 1e3;
	iod_ckpt_close(ck);
	rm_rf(cdir);
	free(p);
	bench_line("BENCH storage.stall step_ms=%.0f params_bytes=%" PRIu64
	           " every=10 stall_pct=%.3f sync_stall_pct=%.2f overhead_pct=%.2f "
	           "sync_overhead_pct=%.2f stall_ms_per_ckpt=%.2f sync_stall_ms_per_ckpt=%.1f",
	           step_ms, params_bytes, 100 * b1 / comp, 100 * b2 / comp, 100 * (w1 - w0) / w0,
	           100 * (w2 - w0) / w0, 1e3 * b1 / (steps / 10), 1e3 * b2 / (steps / 10));
}

static void bench_restore(const char *dir, uint8_t *buf, uint64_t bytes)
{
	char cdir[600], fdir[600], mk[700];
	struct iod_ckpt *ck = NULL;
	struct iod_err e = {0};
	uint64_t step = 0;
	snprintf(cdir, sizeof(cdir), "%s/restore", dir);
	snprintf(fdir, sizeof(fdir), "%s/fio-read", dir);
	snprintf(mk, sizeof(mk), "mkdir -p '%s'", fdir);
	if (system(mk) != 0 || open_one(IOD_STOR_NVME, cdir, bytes * 3, 2, &ck))
		return;
	struct iod_ckpt_region r = {"params", buf, bytes};
	if (iod_ckpt_save(ck, 1, &r, 1, &e) || iod_ckpt_wait(ck, &e)) {
		fprintf(stderr, "bench_storage: save: %s\n", e.msg);
		iod_ckpt_close(ck);
		rm_rf(cdir);
		return;
	}
	/* fio lays out its file (the write pass) then reads it: same page-cache
	 * state as the checkpoint just written */
	(void)fio_bw(fdir, "write", "io_uring", bytes);
	double rbw = fio_bw(fdir, "read", "io_uring", bytes);
	double t0 = bench_now_s();
	int rc = iod_ckpt_restore(ck, IOD_CKPT_LATEST, &r, 1, &step, &e);
	double s = bench_now_s() - t0;
	iod_ckpt_close(ck);
	rm_rf(cdir);
	rm_rf(fdir);
	if (rc || rbw <= 0) {
		bench_line("BENCH storage.restore source=local error=%s",
		           rc ? "restore_failed" : "fio_failed");
		if (rc)
			fprintf(stderr, "bench_storage: restore: %s\n", e.msg);
		return;
	}
	bench_line("BENCH storage.restore source=local medium=NVMe size_bytes=%" PRIu64
	           " seconds=%.3f bound_s=%.3f read_gbps=%.2f",
	           bytes, s, 1.2 * (double)bytes / rbw + 0.1, rbw * 8 / 1e9);
}

int main(void)
{
	char pmem[512], nvme[512];
	const char *ep = getenv("IOD_BENCH_STORAGE_PMEM"), *en = getenv("IOD_BENCH_STORAGE_NVME");
	uint64_t bytes = env_u64("IOD_BENCH_STORAGE_MB", 256) << 20;
	FILE *w = popen("command -v fio", "r");
	char line[256] = "";
	if (!w || !fgets(line, sizeof(line), w)) {
		if (w)
			pclose(w);
		bench_line("BENCH storage.tier error=no_fio");
		fprintf(stderr,
		        "bench_storage: fio is not installed (scripts/deps.sh installs it)\n");
		return 1;
	}
	pclose(w);
	snprintf(pmem, sizeof(pmem), "%s", ep && *ep ? ep : "");
	snprintf(nvme, sizeof(nvme), "%s", en && *en ? en : "");
	if (!*pmem)
		snprintf(pmem, sizeof(pmem), "/dev/shm/iod-bench-storage.%d", (int)getpid());
	if (!*nvme)
		snprintf(nvme, sizeof(nvme), "/var/tmp/iod-bench-storage.%d", (int)getpid());
	uint8_t *buf = malloc(bytes);
	if (!buf)
		return 1;
	for (uint64_t i = 0; i < bytes; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	bench_tier(IOD_STOR_PMEM, pmem, buf, bytes);
	double raw = bench_tier(IOD_STOR_NVME, nvme, buf, bytes);
	bench_stall(nvme, env_u64("IOD_BENCH_STORAGE_PARAMS_MB", 64) << 20);
	bench_replicated(nvme, buf, bytes, raw);
	bench_restore(nvme, buf, bytes);
	bench_restore_peer(nvme, buf, bytes);
	printf("# storage.nodeloss: not measured here (it needs a cluster); "
	       "tests/integration/ckpt_nodeloss.sh prints its phases (docs/storage.md)\n");
	free(buf);
	if (!ep || !*ep)
		rm_rf(pmem);
	if (!en || !*en)
		rm_rf(nvme);
	return 0;
}
