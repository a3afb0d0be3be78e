/*
 * test_ckpt.c: libiod-ckpt (src/storage/store.c, io.c, manifest.c): the
 * manifest round-trips and refuses damage; save/restore across a PMem
 * (emulated) and an NVMe tier is byte-exact and restores the snapshot taken
 * at save time; a torn save is never visible; a corrupt chunk is found by the
 * scrub and refused by restore with a message naming it; a full store refuses
 * a save and keeps what it has.
 */
#include "harness.h"
#include "iod/ckpt.h"
#include "iod/sec.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

static struct iod_err err;

static int plan2(struct iod_ckpt_manifest *m, uint64_t a, uint64_t b)
{
	const char *names[] = {"params", "optim.state"};
	uint64_t bytes[] = {a, b};
	return iod_ckpt_manifest_plan(m, 42, 3, 1000, names, bytes, 2, &err);
}

TEST(manifest_round_trip)
{
	struct iod_ckpt_manifest m, p;
	char *text;
	size_t len;
	CHECK_EQ(plan2(&m, 2500, 1000), 0);
	CHECK_EQ(m.chunks_n, 4);
	CHECK_EQ(m.chunks[2].len, 500);
	CHECK_EQ(m.chunks[3].region, 1);
	CHECK_EQ(m.regions[1].chunk0, 3);
	for (uint32_t i = 0; i < m.chunks_n; i++)
		m.chunks[i].xxh3 = 0x0123456789abcdefull * (i + 1);
	CHECK_EQ(iod_ckpt_manifest_format(&m, &text, &len, &err), 0);
	CHECK(strstr(text, "region optim.state 1000\n"));
	CHECK_MSG(iod_ckpt_manifest_parse(text, len, &p, &err) == 0, "%s", err.msg);
	CHECK_U64(p.step, 42);
	CHECK_EQ(p.rank, 3);
	CHECK_U64(p.bytes, 3500);
	CHECK_EQ(p.chunks_n, 4);
	CHECK_U64(p.chunks[3].xxh3, 0x0123456789abcdefull * 4);
	iod_ckpt_manifest_free(&p);
	/* torn: every prefix is refused */
	for (size_t cut = 0; cut < len; cut += 7)
		CHECK_EQ(iod_ckpt_manifest_parse(text, cut, &p, &err), -EBADMSG);
	/* one changed digit: the end checksum refuses it */
	char *x = strstr(text, "chunk 0 1 1000");
	x[12] = '1';
	CHECK_EQ(iod_ckpt_manifest_parse(text, len, &p, &err), -EBADMSG);
	CHECK(strstr(err.msg, "out of place") || strstr(err.msg, "checksum"));
	free(text);
	iod_ckpt_manifest_free(&m);
}

TEST(manifest_refuses_garbage)
{
	struct iod_ckpt_manifest m;
	const char *bad[] = {
	    "",
	    "iod-ckpt 2\n",
	    "iod-ckpt 1\nstep -1\n",
	    "iod-ckpt 1\nstep 01\n",
	    "iod-ckpt 1\nstep 1\nrank 0\nchunk_bytes 0\n",
	    "iod-ckpt 1\nstep 1\nrank 0\nchunk_bytes 10\nend 0000000000000000\n",
	    "iod-ckpt 1\nstep 1\nrank 0\nchunk_bytes 10\nregion a/b 5\n",
	    "iod-ckpt 1\nstep 99999999999999999999\n",
	    "iod-ckpt 1\nstep 1\nrank 0\nchunk_bytes 1\nregion a 999999999999\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = iod_ckpt_manifest_parse(bad[i], strlen(bad[i]), &m, &err);
		CHECK_MSG(rc == -EBADMSG || rc == -E2BIG, "case %zu: %d", i, rc);
		CHECK(strlen(err.msg) > 10);
	}
	const char *names[] = {"ok", "bad name"};
	uint64_t bytes[] = {1, 1};
	CHECK_EQ(iod_ckpt_manifest_plan(&m, 1, 0, 10, names, bytes, 2, &err), -EINVAL);
	CHECK(strstr(err.msg, "bad name"));
	iod_ckpt_manifest_free(&m);
	names[1] = "ok";
	CHECK_EQ(iod_ckpt_manifest_plan(&m, 1, 0, 10, names, bytes, 2, &err), -EINVAL);
	CHECK(strstr(err.msg, "named twice"));
	iod_ckpt_manifest_free(&m);
}

/* ---- the store ---- */

struct fix {
	char pmem[512], nvme[512];
	struct iod_ckpt_opts o;
};

static void fix_init(struct fix *f, const char *name, uint64_t capacity)
{
	char d[300];
	snprintf(d, sizeof(d), "%s/%s", iod_test_tmpdir(), name);
	mkdir(d, 0755);
	snprintf(f->pmem, sizeof(f->pmem), "%s/pmem", d);
	snprintf(f->nvme, sizeof(f->nvme), "%s/nvme", d);
	memset(&f->o, 0, sizeof(f->o));
	f->o.tiers.tiers_n = 2;
	f->o.tiers.tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, 8000};
	f->o.tiers.tiers[1] = (struct iod_stor_tier_cfg){IOD_STOR_PMEM, 2000};
	f->o.dirs[0] = f->nvme;
	f->o.dirs[1] = f->pmem;
	f->o.tiers.capacity_bytes = capacity;
	f->o.tiers.fast_keep = 1;
	f->o.tiers.keep_max = 8;
	f->o.chunk_bytes = 64 << 10;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

enum { A_BYTES = 300000, B_BYTES = 70001 };

static int save_wait(struct iod_ckpt *c, uint64_t step, uint8_t *a, uint8_t *b)
{
	struct iod_ckpt_region r[] = {{"params", a, A_BYTES}, {"optim", b, B_BYTES}};
	int rc = iod_ckpt_save(c, step, r, 2, &err);
	return rc ? rc : iod_ckpt_wait(c, &err);
}

static int restore(struct iod_ckpt *c, uint64_t step, uint8_t *a, uint8_t *b, uint64_t *got)
{
	struct iod_ckpt_region r[] = {{"optim", b, B_BYTES}, {"params", a, A_BYTES}};
	memset(a, 0, A_BYTES);
	memset(b, 0, B_BYTES);
	return iod_ckpt_restore(c, step, r, 2, got, &err);
}

TEST(save_restore_across_tiers_byte_exact)
{
	static uint8_t a1[A_BYTES], b1[B_BYTES], a2[A_BYTES], b2[B_BYTES], ra[A_BYTES], rb[B_BYTES];
	struct fix f = {0};
	struct iod_ckpt *c;
	struct iod_ckpt_info info[8];
	uint32_t n;
	uint64_t got;
	fix_init(&f, "save_restore", 2000000); /* PMem 400 kB: one checkpoint of 370 kB */
	CHECK_MSG(iod_ckpt_open(&f.o, &c, &err) == 0, "%s", err.msg);
	CHECK(strstr(iod_ckpt_tier_mode(c, 0), "emulated"));
	fill(a1, A_BYTES, 1), fill(b1, B_BYTES, 2), fill(a2, A_BYTES, 3), fill(b2, B_BYTES, 4);
	/* phase 1 returns with a snapshot: changing the memory afterwards is safe */
	struct iod_ckpt_region r[] = {{"params", a1, A_BYTES}, {"optim", b1, B_BYTES}};
	CHECK_MSG(iod_ckpt_save(c, 10, r, 2, &err) == 0, "%s", err.msg);
	a1[0] ^= 0xff;
	CHECK_MSG(iod_ckpt_wait(c, &err) == 0, "%s", err.msg);
	a1[0] ^= 0xff;
	CHECK_MSG(save_wait(c, 20, a2, b2) == 0, "%s", err.msg);
	CHECK_EQ(iod_ckpt_list(c, info, 8, &n, &err), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(info[0].medium, "NVMe"); /* step 10 drained */
	CHECK_STR(info[1].medium, "PMem");
	CHECK_EQ(restore(c, 10, ra, rb, &got), 0);
	CHECK(got == 10 && !memcmp(ra, a1, A_BYTES) && !memcmp(rb, b1, B_BYTES));
	CHECK_EQ(restore(c, IOD_CKPT_LATEST, ra, rb, &got), 0);
	CHECK(got == 20 && !memcmp(ra, a2, A_BYTES) && !memcmp(rb, b2, B_BYTES));
	iod_ckpt_close(c);
	/* reopened: both adopted from disk in their tiers */
	CHECK_MSG(iod_ckpt_open(&f.o, &c, &err) == 0, "%s", err.msg);
	CHECK_EQ(iod_ckpt_list(c, info, 8, &n, &err), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(info[0].medium, "NVMe");
	CHECK_EQ(restore(c, 10, ra, rb, &got), 0);
	CHECK(!memcmp(ra, a1, A_BYTES) && !memcmp(rb, b1, B_BYTES));
	/* wrong regions: a clear refusal */
	struct iod_ckpt_region wrong[] = {{"params", ra, A_BYTES - 1}, {"optim", rb, B_BYTES}};
	CHECK_EQ(iod_ckpt_restore(c, 10, wrong, 2, &got, &err), -EINVAL);
	CHECK(strstr(err.msg, "region params"));
	CHECK_EQ(iod_ckpt_restore(c, 11, wrong, 2, &got, &err), -ENOENT);
	iod_ckpt_close(c);
}

TEST(a_torn_save_is_never_visible)
{
	static uint8_t a[A_BYTES], b[B_BYTES];
	struct fix f = {0};
	struct iod_ckpt *c;
	struct iod_ckpt_info info[8];
	uint32_t n;
	uint64_t got;
	char path[1200];
	fix_init(&f, "a_torn_save_", 2000000);
	CHECK_EQ(iod_ckpt_open(&f.o, &c, &err), 0);
	fill(a, A_BYTES, 5), fill(b, B_BYTES, 6);
	CHECK_EQ(save_wait(c, 5, a, b), 0);
	iod_ckpt_close(c);
	/* a crash mid-save: chunks and a temporary manifest, no manifest */
	snprintf(path, sizeof(path), "%s/step-%020d", f.pmem, 6);
	CHECK_EQ(mkdir(path, 0755), 0);
	CHECK_EQ(iod_test_sh("head -c 65536 /dev/urandom > %s/r0-0-0.chunk && "
	                     "head -c 100 /dev/urandom > %s/r0.manifest.tmp",
	                     path, path),
	         0);
	/* and a manifest cut short (a disk that lied about fsync) */
	snprintf(path, sizeof(path), "%s/step-%020d", f.nvme, 7);
	CHECK_EQ(mkdir(path, 0755), 0);
	CHECK_EQ(iod_test_sh("printf 'iod-ckpt 1\\nstep 7\\nrank 0\\n' > %s/r0.manifest", path), 0);
	CHECK_EQ(iod_ckpt_open(&f.o, &c, &err), 0);
	CHECK_EQ(iod_ckpt_list(c, info, 8, &n, &err), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(info[0].step, 5);
	CHECK_EQ(restore(c, IOD_CKPT_LATEST, a, b, &got), 0);
	CHECK_EQ(got, 5);
	snprintf(path, sizeof(path), "%s/step-%020d", f.pmem, 6);
	CHECK(access(path, F_OK) != 0); /* the torn one was cleaned up */
	/* steps go on after the torn one */
	CHECK_EQ(save_wait(c, 8, a, b), 0);
	iod_ckpt_close(c);
}

TEST(corrupt_chunk_detected_by_scrub)
{
	static uint8_t a[A_BYTES], b[B_BYTES];
	struct fix f = {0};
	struct iod_ckpt *c;
	uint64_t got, checked;
	char path[1200];
	fix_init(&f, "corrupt_chun", 2000000);
	CHECK_EQ(iod_ckpt_open(&f.o, &c, &err), 0);
	fill(a, A_BYTES, 7), fill(b, B_BYTES, 8);
	CHECK_EQ(save_wait(c, 1, a, b), 0);
	CHECK_EQ(save_wait(c, 2, a, b), 0);
	CHECK_MSG(iod_ckpt_scrub(c, IOD_CKPT_ALL, &checked, &err) == 0, "%s", err.msg);
	CHECK_U64(checked, 2ull * (A_BYTES + B_BYTES));
	/* flip one byte of step 1's third chunk (now on NVMe) */
	snprintf(path, sizeof(path), "%s/step-%020d/r0-0-2.chunk", f.nvme, 1);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	uint8_t x;
	CHECK_EQ(pread(fd, &x, 1, 1000), 1);
	x ^= 0x20;
	CHECK_EQ(pwrite(fd, &x, 1, 1000), 1);
	close(fd);
	CHECK_EQ(iod_ckpt_scrub(c, IOD_CKPT_ALL, &checked, &err), -EBADMSG);
	CHECK_MSG(strstr(err.msg, "step 1") && strstr(err.msg, "r0-0-2.chunk is damaged") &&
	              strstr(err.msg, "xxh3"),
	          "%s", err.msg);
	CHECK_EQ(iod_ckpt_scrub(c, 2, &checked, &err), 0);
	CHECK_EQ(iod_ckpt_scrub(c, 3, &checked, &err), -ENOENT);
	CHECK_EQ(restore(c, 1, a, b, &got), -EBADMSG);
	CHECK_EQ(restore(c, 2, a, b, &got), 0);
	/* a chunk cut short */
	snprintf(path, sizeof(path), "%s/step-%020d/r0-1-0.chunk", f.pmem, 2);
	CHECK_EQ(truncate(path, 10), 0);
	CHECK_EQ(iod_ckpt_scrub(c, 2, &checked, &err), -EBADMSG);
	CHECK(strstr(err.msg, "the manifest says 65536"));
	iod_ckpt_close(c);
}

TEST(full_store_refuses_and_keeps)
{
	static uint8_t a[A_BYTES], b[B_BYTES];
	struct fix f = {0};
	struct iod_ckpt *c;
	uint64_t got;
	fix_init(&f, "full_store_r", 500000); /* NVMe 400 kB, PMem 100 kB: one checkpoint at most */
	CHECK_EQ(iod_ckpt_open(&f.o, &c, &err), 0);
	fill(a, A_BYTES, 9), fill(b, B_BYTES, 10);
	CHECK_EQ(save_wait(c, 1, a, b), 0);
	CHECK_EQ(save_wait(c, 2, a, b), -ENOSPC);
	CHECK_MSG(strstr(err.msg, "storage is full") && strstr(err.msg, "newest complete step 1"),
	          "%s", err.msg);
	CHECK_EQ(restore(c, IOD_CKPT_LATEST, a, b, &got), 0);
	CHECK_EQ(got, 1);
	iod_ckpt_close(c);
}

static void flip(const char *dir, uint64_t step, const char *chunk, off_t at)
{
	char path[1200];
	uint8_t x = 0;
	snprintf(path, sizeof(path), "%s/step-%020llu/%s", dir, (unsigned long long)step, chunk);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &x, 1, at), 1);
	x ^= 0x01;
	CHECK_EQ(pwrite(fd, &x, 1, at), 1);
	close(fd);
}

TEST(corrupt_chunk_repaired_from_a_peer)
{
	static uint8_t a[A_BYTES], b[B_BYTES], ra[A_BYTES], rb[B_BYTES];
	struct fix fa = {0}, fb = {0}, fc = {0};
	struct iod_ckpt *ca, *cb, *cc;
	struct iod_ckpt_repair_report rep;
	uint64_t got, checked;
	char path[1200];
	fix_init(&fa, "repair_node_a", 2000000);
	fix_init(&fb, "repair_node_b", 2000000);
	fix_init(&fc, "repair_node_c", 2000000);
	CHECK_EQ(iod_ckpt_open(&fa.o, &ca, &err), 0);
	CHECK_EQ(iod_ckpt_open(&fb.o, &cb, &err), 0);
	CHECK_EQ(iod_ckpt_open(&fc.o, &cc, &err), 0);
	fill(a, A_BYTES, 11), fill(b, B_BYTES, 12);
	/* the same checkpoint on two nodes (what replication leaves behind) */
	CHECK_EQ(save_wait(ca, 3, a, b), 0);
	CHECK_EQ(save_wait(cb, 3, a, b), 0);
	/* clean copies: nothing to do */
	CHECK_MSG(iod_ckpt_repair(ca, cb, 3, &rep, &err) == 0, "%s", err.msg);
	CHECK(rep.chunks == 7 && rep.repaired[0] == 0 && rep.repaired[1] == 0);
	/* node A: a flipped bit in chunk 0.2; node B: chunk 1.0 missing */
	flip(fa.pmem, 3, "r0-0-2.chunk", 4242);
	snprintf(path, sizeof(path), "%s/step-%020d/r0-1-0.chunk", fb.pmem, 3);
	CHECK_EQ(unlink(path), 0);
	CHECK_EQ(iod_ckpt_scrub(ca, 3, &checked, &err), -EBADMSG);
	CHECK_EQ(iod_ckpt_scrub(cb, 3, &checked, &err), -EBADMSG);
	CHECK_MSG(iod_ckpt_repair(ca, cb, IOD_CKPT_LATEST, &rep, &err) == 0, "%s", err.msg);
	CHECK_EQ(rep.repaired[0], 1);
	CHECK_EQ(rep.repaired[1], 1);
	CHECK_EQ(rep.lost, 0);
	CHECK_MSG(iod_ckpt_scrub(ca, 3, &checked, &err) == 0, "%s", err.msg);
	CHECK_MSG(iod_ckpt_scrub(cb, 3, &checked, &err) == 0, "%s", err.msg);
	CHECK_EQ(restore(ca, 3, ra, rb, &got), 0);
	CHECK(!memcmp(ra, a, A_BYTES) && !memcmp(rb, b, B_BYTES));
	CHECK_EQ(restore(cb, 3, ra, rb, &got), 0);
	CHECK(!memcmp(ra, a, A_BYTES) && !memcmp(rb, b, B_BYTES));
	/* the same chunk damaged in both: lost, named, the others still repaired */
	flip(fa.pmem, 3, "r0-0-1.chunk", 7);
	flip(fb.pmem, 3, "r0-0-1.chunk", 9);
	flip(fb.pmem, 3, "r0-0-4.chunk", 9);
	CHECK_EQ(iod_ckpt_repair(ca, cb, 3, &rep, &err), -EBADMSG);
	CHECK_EQ(rep.lost, 1);
	CHECK_EQ(rep.repaired[1], 1);
	CHECK_CONTAINS(err.msg, "damaged in both copies");
	/* a peer whose checkpoint of that step holds other data cannot repair */
	fill(a, A_BYTES, 13);
	CHECK_EQ(save_wait(cc, 3, a, b), 0);
	CHECK_EQ(iod_ckpt_repair(ca, cc, 3, &rep, &err), -EBADMSG);
	CHECK_CONTAINS(err.msg, "does not match");
	CHECK_EQ(iod_ckpt_repair(ca, cc, 4, &rep, &err), -ENOENT);
	CHECK_EQ(iod_ckpt_repair(ca, ca, 3, &rep, &err), -EINVAL);
	iod_ckpt_close(ca);
	iod_ckpt_close(cb);
	iod_ckpt_close(cc);
}

/* Issue 23: copies on two peers over HTTP, the 2-of-3 quorum, restore from
 * a peer, and the peer's checks. */
TEST(replicated_save_to_peers_quorum_and_restore_from_a_peer)
{
	static uint8_t a[A_BYTES], b[B_BYTES], ra[A_BYTES], rb[B_BYTES];
	struct fix f = {0}, fp1 = {0};
	struct iod_ckpt *c, *pc;
	struct iod_ckpt_peer *p1, *p2;
	char d1[600], d2[600];
	uint64_t got, checked;
	snprintf(d1, sizeof(d1), "%s/peer1", iod_test_tmpdir());
	snprintf(d2, sizeof(d2), "%s/peer2", iod_test_tmpdir());
	CHECK_EQ(iod_ckpt_peer_start("0.0.0.0:0", d1, &p1, &err), -EPERM);
	CHECK_CONTAINS(err.msg, "not a loopback");
	CHECK_MSG(iod_ckpt_peer_start("127.0.0.1:0", d1, &p1, &err) == 0, "%s", err.msg);
	CHECK_MSG(iod_ckpt_peer_start("127.0.0.1:0", d2, &p2, &err) == 0, "%s", err.msg);
	fix_init(&f, "replicated", 2000000);
	f.o.peers[0] = iod_ckpt_peer_addr(p1);
	f.o.peers[1] = iod_ckpt_peer_addr(p2);
	f.o.peers_n = 2;
	f.o.min_size = 2;
	CHECK_MSG(iod_ckpt_open(&f.o, &c, &err) == 0, "%s", err.msg);
	fill(a, A_BYTES, 21), fill(b, B_BYTES, 22);
	CHECK_MSG(save_wait(c, 7, a, b) == 0, "%s", err.msg);
	/* both peers hold it, byte-exact, verified chunk by chunk */
	struct iod_ckpt_region r[] = {{"params", ra, A_BYTES}, {"optim", rb, B_BYTES}};
	CHECK_MSG(iod_ckpt_fetch(iod_ckpt_peer_addr(p2), 0, 7, r, 2, &err) == 0, "%s", err.msg);
	CHECK(!memcmp(ra, a, A_BYTES) && !memcmp(rb, b, B_BYTES));
	memset(ra, 0, A_BYTES);
	CHECK_EQ(iod_ckpt_fetch(iod_ckpt_peer_addr(p1), 0, 7, r, 2, &err), 0);
	CHECK(!memcmp(ra, a, A_BYTES));
	CHECK_EQ(iod_ckpt_fetch(iod_ckpt_peer_addr(p1), 0, 8, r, 2, &err), -ENOENT);
	/* a peer's directory opens as a store: scrub it, repair the primary from it */
	memset(&fp1.o, 0, sizeof(fp1.o));
	fp1.o.tiers = f.o.tiers;
	fp1.o.tiers.tiers_n = 1;
	fp1.o.tiers.tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, 10000};
	fp1.o.dirs[0] = d1;
	CHECK_MSG(iod_ckpt_open(&fp1.o, &pc, &err) == 0, "%s", err.msg);
	CHECK_MSG(iod_ckpt_scrub(pc, 7, &checked, &err) == 0, "%s", err.msg);
	CHECK_U64(checked, A_BYTES + B_BYTES);
	flip(f.pmem, 7, "r0-0-3.chunk", 100);
	struct iod_ckpt_repair_report rep;
	CHECK_MSG(iod_ckpt_repair(c, pc, 7, &rep, &err) == 0, "%s", err.msg);
	CHECK_EQ(rep.repaired[0], 1);
	CHECK_EQ(restore(c, 7, ra, rb, &got), 0);
	CHECK(!memcmp(ra, a, A_BYTES));
	iod_ckpt_close(pc);
	/* a damaged chunk on the peer: the fetch refuses it, naming it */
	flip(d1, 7, "r0-0-1.chunk", 5);
	CHECK_EQ(iod_ckpt_fetch(iod_ckpt_peer_addr(p1), 0, 7, r, 2, &err), -EBADMSG);
	CHECK_CONTAINS(err.msg, "r0-0-1.chunk of step 7 is damaged");
	/* one peer down: 2 of 3 still meet the quorum */
	iod_ckpt_peer_stop(p2);
	CHECK_MSG(save_wait(c, 8, a, b) == 0, "%s", err.msg);
	/* both down: 1 of 3, the save fails, nothing new is visible */
	iod_ckpt_peer_stop(p1);
	CHECK_EQ(save_wait(c, 9, a, b), -EAGAIN);
	CHECK_CONTAINS(err.msg, "write quorum is 2");
	CHECK_EQ(restore(c, IOD_CKPT_LATEST, ra, rb, &got), 0);
	CHECK_EQ(got, 8);
	iod_ckpt_close(c);
	/* bad options */
	f.o.min_size = 4;
	CHECK_EQ(iod_ckpt_open(&f.o, &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "min_size");
}

/* Credentials of kind/name: a certificate signed by ca, trusting trust's CA. */
static struct iod_sec_tls_creds *creds_of(struct iod_sec_ca *ca, struct iod_sec_ca *trust,
                                          enum iod_sec_kind kind, const char *name)
{
	struct iod_sec_cert_req rq;
	struct iod_sec_pem pem;
	struct iod_sec_tls_creds *c = NULL;
	memset(&rq, 0, sizeof(rq));
	rq.id.kind = kind;
	rq.id.role = kind == IOD_SEC_KIND_USER ? IOD_SEC_ROLE_ADMIN : IOD_SEC_ROLE_NONE;
	snprintf(rq.id.name, sizeof(rq.id.name), "%s", name);
	snprintf(rq.id.tenant, sizeof(rq.id.tenant), "default");
	rq.server = iod_sec_kind_serves(kind);
	rq.not_before_s = (uint64_t)time(NULL);
	rq.ttl_s = 3600;
	if (iod_sec_ca_issue(ca, &rq, &pem, &err))
		return NULL;
	iod_sec_tls_creds_new(iod_sec_ca_cert_pem(trust), pem.cert, pem.key, &c, &err);
	iod_sec_pem_free(&pem);
	return c;
}

/* The agents' chunk server over mTLS (docs/storage.md): a replica with a
 * certificate of the cluster saves to it, reads its latest step and
 * restores byte-exact; the server listens beyond loopback only with
 * credentials; a plain client, or one without a certificate, gets nothing. */
TEST(peer_copies_over_mtls_with_cluster_certificates)
{
	static uint8_t a[A_BYTES], b[B_BYTES], ra[A_BYTES], rb[B_BYTES];
	struct iod_sec_ca *ca = NULL;
	struct fix f = {0};
	struct iod_ckpt *c;
	struct iod_ckpt_peer *p, *any;
	char d[600], ns[IOD_CKPT_PEER_ADDR_MAX];
	uint64_t step = 0;
	CHECK_EQ(iod_sec_ca_create("c1", (uint64_t)time(NULL), 86400, &ca, &err), 0);
	struct iod_sec_tls_creds *node = creds_of(ca, ca, IOD_SEC_KIND_NODE, "node-2");
	struct iod_sec_tls_creds *svc = creds_of(ca, ca, IOD_SEC_KIND_SERVICE, "ps");
	struct iod_sec_tls_creds *nocert = NULL;
	CHECK(node && svc);
	CHECK_EQ(iod_sec_tls_creds_new(iod_sec_ca_cert_pem(ca), NULL, NULL, &nocert, &err), 0);
	snprintf(d, sizeof(d), "%s/tlspeer", iod_test_tmpdir());
	/* beyond loopback: refused plain, taken with mTLS */
	CHECK_EQ(iod_ckpt_peer_start("0.0.0.0:0", d, &any, &err), -EPERM);
	CHECK_MSG(iod_ckpt_peer_start_tls("0.0.0.0:0", d, node, &any, &err) == 0, "%s", err.msg);
	iod_ckpt_peer_stop(any);
	CHECK_MSG(iod_ckpt_peer_start_tls("127.0.0.1:0", d, node, &p, &err) == 0, "%s", err.msg);
	snprintf(ns, sizeof(ns), "%s/ps-0", iod_ckpt_peer_addr(p));
	iod_ckpt_peer_client_creds(svc);
	CHECK_EQ(iod_ckpt_peer_latest(ns, 0, &step, &err), -ENOENT);
	fix_init(&f, "tlsprimary", 2000000);
	f.o.peers[0] = ns;
	f.o.peers_n = 1;
	f.o.min_size = 2;
	CHECK_MSG(iod_ckpt_open(&f.o, &c, &err) == 0, "%s", err.msg);
	fill(a, A_BYTES, 41), fill(b, B_BYTES, 42);
	CHECK_MSG(save_wait(c, 4, a, b) == 0, "%s", err.msg);
	iod_ckpt_close(c);
	CHECK_MSG(iod_ckpt_peer_latest(ns, 0, &step, &err) == 0, "%s", err.msg);
	CHECK_U64(step, 4);
	struct iod_ckpt_region r[] = {{"params", ra, A_BYTES}, {"optim", rb, B_BYTES}};
	CHECK_MSG(iod_ckpt_fetch(ns, 0, 4, r, 2, &err) == 0, "%s", err.msg);
	CHECK(!memcmp(ra, a, A_BYTES) && !memcmp(rb, b, B_BYTES));
	/* a plain HTTP client, and a TLS client without a certificate: nothing */
	iod_ckpt_peer_client_creds(NULL);
	CHECK(iod_ckpt_peer_latest(ns, 0, &step, &err) != 0);
	iod_ckpt_peer_client_creds(nocert);
	CHECK(iod_ckpt_peer_latest(ns, 0, &step, &err) != 0);
	/* a server with a service's (client-only) certificate is refused for
	 * its usage; one with a server's certificate because the client wants
	 * a node */
	struct iod_ckpt_peer *q;
	char d2[600];
	snprintf(d2, sizeof(d2), "%s/tlspeer-svc", iod_test_tmpdir());
	CHECK_MSG(iod_ckpt_peer_start_tls("127.0.0.1:0", d2, svc, &q, &err) == 0, "%s", err.msg);
	iod_ckpt_peer_client_creds(node);
	CHECK_EQ(iod_ckpt_peer_latest(iod_ckpt_peer_addr(q), 0, &step, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "serverAuth");
	iod_ckpt_peer_stop(q);
	struct iod_sec_tls_creds *srv = creds_of(ca, ca, IOD_SEC_KIND_SERVER, "1");
	CHECK(srv != NULL);
	CHECK_MSG(iod_ckpt_peer_start_tls("127.0.0.1:0", d2, srv, &q, &err) == 0, "%s", err.msg);
	CHECK_EQ(iod_ckpt_peer_latest(iod_ckpt_peer_addr(q), 0, &step, &err), -EACCES);
	CHECK_CONTAINS(err.msg, "not a node of the cluster");
	iod_ckpt_peer_stop(q);
	iod_sec_tls_creds_free(srv);
	iod_ckpt_peer_client_creds(NULL);
	iod_ckpt_peer_stop(p);
	iod_sec_tls_creds_free(nocert);
	iod_sec_tls_creds_free(svc);
	iod_sec_tls_creds_free(node);
	iod_sec_ca_free(ca);
}

/* A client whose certificate is from another CA (it trusts the cluster's,
 * so only the server can refuse it) is refused at the handshake: its
 * chunks are never kept, nothing it asks for is read; nor is a user of the
 * cluster served, nor a client that never finishes its handshake. */
TEST(peer_over_mtls_refuses_a_foreign_ca)
{
	static uint8_t a[A_BYTES];
	struct iod_sec_ca *ca = NULL, *other = NULL;
	struct iod_ckpt_peer *p;
	struct iod_ckpt_manifest m;
	char d[600], ns[IOD_CKPT_PEER_ADDR_MAX], path[800];
	uint64_t step = 0;
	struct stat st;
	CHECK_EQ(iod_sec_ca_create("c1", (uint64_t)time(NULL), 86400, &ca, &err), 0);
	CHECK_EQ(iod_sec_ca_create("c1", (uint64_t)time(NULL), 86400, &other, &err), 0);
	struct iod_sec_tls_creds *node = creds_of(ca, ca, IOD_SEC_KIND_NODE, "node-2");
	struct iod_sec_tls_creds *foreign = creds_of(other, ca, IOD_SEC_KIND_SERVICE, "ps");
	struct iod_sec_tls_creds *user = creds_of(ca, ca, IOD_SEC_KIND_USER, "alice");
	CHECK_MSG(node && foreign && user, "%s", err.msg);
	snprintf(d, sizeof(d), "%s/tlspeer-foreign", iod_test_tmpdir());
	CHECK_MSG(iod_ckpt_peer_start_tls("127.0.0.1:0", d, node, &p, &err) == 0, "%s", err.msg);
	snprintf(ns, sizeof(ns), "%s/ps-0", iod_ckpt_peer_addr(p));
	const char *names[] = {"params"};
	uint64_t bytes[] = {A_BYTES};
	fill(a, A_BYTES, 51);
	CHECK_EQ(iod_ckpt_manifest_plan(&m, 3, 0, 65536, names, bytes, 1, &err), 0);
	for (uint32_t i = 0; i < m.chunks_n; i++)
		m.chunks[i].xxh3 = XXH3_64bits(a + (uint64_t)i * 65536, m.chunks[i].len);
	/* the same copy from a node of the cluster is kept */
	iod_ckpt_peer_client_creds(node);
	CHECK_MSG(iod_ckpt_peer_put(ns, &m, a, &err) == 0, "%s", err.msg);
	snprintf(ns, sizeof(ns), "%s/ps-1", iod_ckpt_peer_addr(p));
	iod_ckpt_peer_client_creds(foreign);
	CHECK(iod_ckpt_peer_put(ns, &m, a, &err) != 0);
	CHECK(iod_ckpt_peer_latest(ns, 0, &step, &err) != 0);
	snprintf(path, sizeof(path), "%s/ps-1", d);
	CHECK(stat(path, &st) != 0); /* not even the namespace was made */
	iod_ckpt_peer_client_creds(user);
	CHECK(iod_ckpt_peer_put(ns, &m, a, &err) != 0);
	CHECK(stat(path, &st) != 0);
	iod_ckpt_peer_client_creds(NULL);
	/* a client that never starts its handshake does not hold its slot:
	 * closed after PEER_TLS_HANDSHAKE_MS (2 s) */
	struct sockaddr_in sa = {.sin_family = AF_INET};
	const char *colon = strrchr(iod_ckpt_peer_addr(p), ':');
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval tv = {.tv_sec = 6};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CHECK_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	char junk[256]; /* at most a TLS alert, then the end */
	uint64_t t0 = iod_clock_now_ns();
	ssize_t got_n;
	while ((got_n = recv(fd, junk, sizeof(junk), 0)) > 0)
		;
	CHECK_EQ(got_n, 0);
	uint64_t waited_ms = (iod_clock_now_ns() - t0) / IOD_NS_PER_MS;
	CHECK_MSG(waited_ms >= 1500 && waited_ms < 5000, "closed after %llu ms",
	          (unsigned long long)waited_ms);
	close(fd);
	iod_ckpt_manifest_free(&m);
	iod_ckpt_peer_stop(p);
	iod_sec_tls_creds_free(user);
	iod_sec_tls_creds_free(foreign);
	iod_sec_tls_creds_free(node);
	iod_sec_ca_free(other);
	iod_sec_ca_free(ca);
}

TEST(provisioned_store_env_round_trip_and_errors)
{
	const struct iod_stor_tier_cfg t[2] = {{IOD_STOR_PMEM, 2000}, {IOD_STOR_NVME, 8000}};
	const char *dirs[2] = {"/d/ckpt/PMem", "/d/a:b/ckpt/NVMe"};
	struct iod_ckpt_env env;
	struct iod_ckpt_opts o;
	char buf[256];

	CHECK_EQ(iod_ckpt_env_format(t, dirs, 2, buf, sizeof(buf), &err), 0);
	CHECK_STR(buf, "PMem:2000:/d/ckpt/PMem,NVMe:8000:/d/a:b/ckpt/NVMe");
	CHECK_EQ(iod_ckpt_env_parse(buf, "1000000", "3", &env, &err), 0);
	CHECK_EQ(env.cfg.tiers_n, 2);
	CHECK_EQ(env.cfg.tiers[0].medium, IOD_STOR_PMEM);
	CHECK_EQ(env.cfg.tiers[1].quota_bp, 8000);
	CHECK_STR(env.dirs[1], "/d/a:b/ckpt/NVMe");
	CHECK_U64(env.cfg.capacity_bytes, 1000000);
	CHECK_EQ(env.replicas, 3);
	iod_ckpt_env_opts(&env, &o);
	CHECK_STR(o.dirs[0], "/d/ckpt/PMem");
	CHECK_EQ(o.tiers.tiers_n, 2);
	/* replicas absent: one copy */
	CHECK_EQ(iod_ckpt_env_parse("NVMe:10000:/x", "5", NULL, &env, &err), 0);
	CHECK_EQ(env.replicas, 1);
	/* a directory with ',' cannot be listed; a short buffer is -E2BIG */
	dirs[0] = "/d,e";
	CHECK_EQ(iod_ckpt_env_format(t, dirs, 1, buf, sizeof(buf), &err), -EINVAL);
	dirs[0] = "/d";
	CHECK_EQ(iod_ckpt_env_format(t, dirs, 1, buf, 8, &err), -E2BIG);
	/* each fault named */
	CHECK_EQ(iod_ckpt_env_parse(NULL, "5", NULL, &env, &err), -ENOENT);
	CHECK_EQ(iod_ckpt_env_parse("NVMe:10000:/x", "0", NULL, &env, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "IOD_CKPT_CAPACITY");
	CHECK_EQ(iod_ckpt_env_parse("NVMe:10000:/x", "5", "9", &env, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "IOD_CKPT_REPLICAS");
	CHECK_EQ(iod_ckpt_env_parse("NVMe:10000:/x,Tape:1:/y", "5", NULL, &env, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "entry 2");
	CHECK_EQ(iod_ckpt_env_parse("NVMe:100000:/x", "5", NULL, &env, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "basis points");
	CHECK_EQ(iod_ckpt_env_parse("NVMe:100:", "5", NULL, &env, &err), -EINVAL);
	CHECK_EQ(iod_ckpt_env_parse("NVMe/x", "5", NULL, &env, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "MEDIUM:QUOTA_BP:DIR");
}

/* A replica's own credential (its service's SVID) reaches only its
 * service's replicas' namespaces on a chunk server, never another's or
 * the namespace-less paths (docs/storage.md "Replica credentials"). */
TEST(service_identity_reaches_only_its_replicas_namespaces)
{
	CHECK(iod_ckpt_peer_service_may("ps", "/ckpt/ps-0/42/r0.manifest"));
	CHECK(iod_ckpt_peer_service_may("ps", "/ckpt/ps-12/latest?rank=0"));
	CHECK(!iod_ckpt_peer_service_may("ps", "/ckpt/psx-0/42/r0.manifest"));
	CHECK(!iod_ckpt_peer_service_may("ps", "/ckpt/web-0/42/r0.manifest"));
	CHECK(!iod_ckpt_peer_service_may("ps", "/ckpt/ps-/42/r0.manifest"));
	CHECK(!iod_ckpt_peer_service_may("ps", "/ckpt/ps-0x/42/r0.manifest"));
	CHECK(!iod_ckpt_peer_service_may("ps", "/ckpt/42/r0.manifest"));
	CHECK(!iod_ckpt_peer_service_may("ps", "/ckpt/ps-0"));
	CHECK(iod_ckpt_peer_service_may("ps-0", "/ckpt/ps-0-1/1/r0.manifest"));
	CHECK(!iod_ckpt_peer_service_may("ps", "/ckpt/ps-0-1/1/r0.manifest"));
	CHECK(!iod_ckpt_peer_service_may("", "/ckpt/-0/1/r0.manifest"));
	CHECK(!iod_ckpt_peer_service_may("ps", "/other/ps-0/1/r0.manifest"));
}

/* The agents' chunk servers: one per node, a namespace (directory) per
 * replica; $IOD_CKPT_PEERS / $IOD_CKPT_HERE name them (docs/storage.md). */
TEST(namespaced_peer_copies_latest_and_peer_list_codec)
{
	static uint8_t a[A_BYTES], b[B_BYTES], ra[A_BYTES], rb[B_BYTES];
	struct fix f = {0};
	struct iod_ckpt *c;
	struct iod_ckpt_peer *p;
	char d[600], ns[IOD_CKPT_PEER_ADDR_MAX], path[800], list[512];
	uint64_t step = 0;
	struct stat st;
	snprintf(d, sizeof(d), "%s/agentpeer", iod_test_tmpdir());
	CHECK_MSG(iod_ckpt_peer_start("127.0.0.1:0", d, &p, &err) == 0, "%s", err.msg);
	snprintf(ns, sizeof(ns), "%s/ps-0", iod_ckpt_peer_addr(p));
	CHECK_EQ(iod_ckpt_peer_latest(ns, 0, &step, &err), -ENOENT);
	fix_init(&f, "nsprimary", 2000000);
	f.o.peers[0] = ns;
	f.o.peers_n = 1;
	f.o.min_size = 2;
	CHECK_MSG(iod_ckpt_open(&f.o, &c, &err) == 0, "%s", err.msg);
	fill(a, A_BYTES, 31), fill(b, B_BYTES, 32);
	CHECK_MSG(save_wait(c, 5, a, b) == 0, "%s", err.msg);
	CHECK_MSG(save_wait(c, 9, a, b) == 0, "%s", err.msg);
	iod_ckpt_close(c);
	/* the copy is in the replica's directory of the server's */
	snprintf(path, sizeof(path), "%s/ps-0/step-%020d/r0.manifest", d, 9);
	CHECK_EQ(stat(path, &st), 0);
	CHECK_MSG(iod_ckpt_peer_latest(ns, 0, &step, &err) == 0, "%s", err.msg);
	CHECK_U64(step, 9);
	CHECK_EQ(iod_ckpt_peer_latest(ns, 1, &step, &err), -ENOENT); /* no rank 1 */
	struct iod_ckpt_region r[] = {{"params", ra, A_BYTES}, {"optim", rb, B_BYTES}};
	CHECK_MSG(iod_ckpt_fetch(ns, 0, 9, r, 2, &err) == 0, "%s", err.msg);
	CHECK(!memcmp(ra, a, A_BYTES) && !memcmp(rb, b, B_BYTES));
	/* another namespace holds nothing; the bare address is the server's root */
	snprintf(ns, sizeof(ns), "%s/ps-1", iod_ckpt_peer_addr(p));
	CHECK_EQ(iod_ckpt_fetch(ns, 0, 9, r, 2, &err), -ENOENT);
	CHECK_EQ(iod_ckpt_peer_latest(iod_ckpt_peer_addr(p), 0, &step, &err), -ENOENT);
	snprintf(ns, sizeof(ns), "%s/../x", iod_ckpt_peer_addr(p));
	CHECK_EQ(iod_ckpt_peer_latest(ns, 0, &step, &err), -EINVAL);
	/* stopping with a connection open (an agent stopping while a replica
	 * is connected): the server ends it and waits for its thread, which
	 * reads the server, before freeing it */
	struct sockaddr_in sa = {.sin_family = AF_INET};
	const char *colon = strrchr(iod_ckpt_peer_addr(p), ':');
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	struct timeval tv = {.tv_sec = 3};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	const char *req =
	    "GET /ckpt/latest?rank=0 HTTP/1.1\r\nhost: x\r\nconnection: keep-alive\r\n\r\n";
	CHECK_EQ(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
	char ans[256];
	CHECK(recv(fd, ans, sizeof(ans), 0) > 0); /* its thread runs, idle now */
	iod_ckpt_peer_stop(p);
	ssize_t got;
	while ((got = recv(fd, ans, sizeof(ans), 0)) > 0) /* the rest of the answer */
		;
	CHECK_EQ(got, 0); /* then ended by the server */
	close(fd);
	usleep(20000);
	/* the peer list's codec */
	struct iod_ckpt_env_peer pe[3] = {{"n2", "127.0.0.2:4000/ps-0"},
	                                  {"n3", "127.0.0.3:4000/ps-0"}};
	uint32_t n = 9;
	CHECK_EQ(iod_ckpt_env_peers_format(pe, 2, list, sizeof(list), &err), 0);
	CHECK_STR(list, "n2=127.0.0.2:4000/ps-0,n3=127.0.0.3:4000/ps-0");
	CHECK_EQ(iod_ckpt_env_peers_parse(list, pe + 1, 2, &n, &err), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(pe[2].node, "n3");
	CHECK_STR(pe[2].addr, "127.0.0.3:4000/ps-0");
	CHECK_EQ(iod_ckpt_env_peers_parse(list, pe, 1, &n, &err), -E2BIG);
	CHECK_EQ(iod_ckpt_env_peers_parse(NULL, pe, 3, &n, &err), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(iod_ckpt_env_peers_parse("n2=127.0.0.2:1,n3", pe, 3, &n, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "peer 2 is not NODE=HOST:PORT/NS");
	CHECK_EQ(iod_ckpt_env_peers_parse("n/2=127.0.0.2:1", pe, 3, &n, &err), -EINVAL);
	CHECK_EQ(iod_ckpt_env_peers_parse("n2=nocolon", pe, 3, &n, &err), -EINVAL);
	snprintf(pe[0].addr, sizeof(pe[0].addr), "127.0.0.1:1,x");
	CHECK_EQ(iod_ckpt_env_peers_format(pe, 1, list, sizeof(list), &err), -EINVAL);
	snprintf(pe[0].addr, sizeof(pe[0].addr), "127.0.0.1:1");
	CHECK_EQ(iod_ckpt_env_peers_format(pe, 1, list, 8, &err), -E2BIG);
}

/* ---- the background scrub ---- */

struct scrub_log {
	pthread_mutex_t mu;
	uint32_t n;
	struct iod_ckpt_scrub_result last[8]; /* by step % 8 */
	uint64_t first_ns;                    /* when the first report came */
};

static void scrub_seen(void *ctx, const struct iod_ckpt_scrub_result *r)
{
	struct scrub_log *l = ctx;
	pthread_mutex_lock(&l->mu);
	if (!l->n++)
		l->first_ns = iod_clock_now_ns();
	l->last[r->step % 8] = *r;
	pthread_mutex_unlock(&l->mu);
}

/* Wait (up to 10 s) for a report of step whose status is want. */
static bool scrub_wait(struct scrub_log *l, uint64_t step, const char *want,
                       struct iod_ckpt_scrub_result *out)
{
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&l->mu);
		*out = l->last[step % 8];
		pthread_mutex_unlock(&l->mu);
		if (out->step == step && !strcmp(out->status, want))
			return true;
		usleep(10000);
	}
	return false;
}

/* Issue 23: corrupt a chunk, the background scrub finds it, repairs it from
 * the peer store, and says so; rate-bounded. */
TEST(background_scrub_repairs_a_corrupt_chunk_from_a_peer)
{
	static uint8_t a[A_BYTES], b[B_BYTES], ra[A_BYTES], rb[B_BYTES];
	static struct scrub_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct fix fa = {0}, fb = {0};
	struct iod_ckpt *ca, *cb;
	struct iod_ckpt_scrub_result res;
	struct iod_ckpt_scrub_stats st;
	uint64_t got, checked;
	fix_init(&fa, "bgscrub_a", 2000000);
	fix_init(&fb, "bgscrub_b", 2000000);
	CHECK_EQ(iod_ckpt_open(&fa.o, &ca, &err), 0);
	CHECK_EQ(iod_ckpt_open(&fb.o, &cb, &err), 0);
	fill(a, A_BYTES, 31), fill(b, B_BYTES, 32);
	CHECK_EQ(save_wait(ca, 3, a, b), 0);
	CHECK_EQ(save_wait(cb, 3, a, b), 0);
	/* the bound: 1 MB/s, the bucket starts empty, so the first pass over
	 * 370001 bytes takes at least 0.37 s */
	struct iod_ckpt_scrub_opts so = {.rate_bytes_per_s = 1000000,
	                                 .interval_ns = 20 * IOD_NS_PER_MS,
	                                 .peer = cb,
	                                 .report = scrub_seen,
	                                 .report_ctx = &l};
	uint64_t t0 = iod_clock_now_ns();
	CHECK_MSG(iod_ckpt_scrub_start(ca, &so, &err) == 0, "%s", err.msg);
	CHECK_EQ(iod_ckpt_scrub_start(ca, &so, &err), -EBUSY);
	CHECK(scrub_wait(&l, 3, "clean", &res));
	CHECK(l.first_ns - t0 >= 330 * IOD_NS_PER_MS);
	CHECK_EQ(res.chunks, 7);
	CHECK_U64(res.bytes, A_BYTES + B_BYTES);
	CHECK(res.at_ms > 0);
	iod_ckpt_scrub_stats(ca, &st);
	CHECK(st.paced_ns > 0);
	iod_ckpt_scrub_stop(ca);
	/* faster now; a flipped bit in chunk 0.2 */
	flip(fa.pmem, 3, "r0-0-2.chunk", 4242);
	CHECK_EQ(iod_ckpt_scrub(ca, 3, &checked, &err), -EBADMSG);
	so.rate_bytes_per_s = 100000000;
	CHECK_MSG(iod_ckpt_scrub_start(ca, &so, &err) == 0, "%s", err.msg);
	CHECK(scrub_wait(&l, 3, "repaired 1", &res));
	CHECK_EQ(res.damaged, 1);
	CHECK_EQ(res.repaired, 1);
	CHECK_CONTAINS(res.why, "r0-0-2");
	CHECK_MSG(iod_ckpt_scrub(ca, 3, &checked, &err) == 0, "%s", err.msg);
	CHECK_EQ(restore(ca, 3, ra, rb, &got), 0);
	CHECK(!memcmp(ra, a, A_BYTES) && !memcmp(rb, b, B_BYTES));
	/* the next passes find it clean again */
	CHECK(scrub_wait(&l, 3, "clean", &res));
	iod_ckpt_scrub_stats(ca, &st);
	CHECK(st.damaged >= 1 && st.repaired >= 1);
	/* damaged in both copies: reported as damaged, not repaired */
	flip(fa.pmem, 3, "r0-1-0.chunk", 3);
	flip(fb.pmem, 3, "r0-1-0.chunk", 3);
	CHECK(scrub_wait(&l, 3, "damaged 1", &res));
	CHECK_CONTAINS(res.why, "damaged in both copies");
	iod_ckpt_close(ca); /* stops the scrub */
	iod_ckpt_close(cb);
}

/* The same with the store's peers over HTTP: the chunk comes from the first
 * peer whose copy matches the manifest. */
TEST(background_scrub_repairs_from_an_http_peer)
{
	static uint8_t a[A_BYTES], b[B_BYTES], ra[A_BYTES], rb[B_BYTES];
	static struct scrub_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct fix f = {0};
	struct iod_ckpt *c;
	struct iod_ckpt_peer *p1, *p2;
	struct iod_ckpt_scrub_result res;
	char d1[600], d2[600];
	uint64_t got;
	snprintf(d1, sizeof(d1), "%s/bgpeer1", iod_test_tmpdir());
	snprintf(d2, sizeof(d2), "%s/bgpeer2", iod_test_tmpdir());
	CHECK_MSG(iod_ckpt_peer_start("127.0.0.1:0", d1, &p1, &err) == 0, "%s", err.msg);
	CHECK_MSG(iod_ckpt_peer_start("127.0.0.1:0", d2, &p2, &err) == 0, "%s", err.msg);
	fix_init(&f, "bgscrub_http", 2000000);
	f.o.peers[0] = iod_ckpt_peer_addr(p1);
	f.o.peers[1] = iod_ckpt_peer_addr(p2);
	f.o.peers_n = 2;
	f.o.min_size = 2;
	CHECK_MSG(iod_ckpt_open(&f.o, &c, &err) == 0, "%s", err.msg);
	fill(a, A_BYTES, 41), fill(b, B_BYTES, 42);
	CHECK_MSG(save_wait(c, 5, a, b) == 0, "%s", err.msg);
	/* the first peer's copy of the chunk is damaged too: the second's is used */
	flip(f.pmem, 5, "r0-0-1.chunk", 77);
	flip(d1, 5, "r0-0-1.chunk", 78);
	struct iod_ckpt_scrub_opts so = {.rate_bytes_per_s = 100000000,
	                                 .interval_ns = 20 * IOD_NS_PER_MS,
	                                 .report = scrub_seen,
	                                 .report_ctx = &l};
	CHECK_MSG(iod_ckpt_scrub_start(c, &so, &err) == 0, "%s", err.msg);
	CHECK(scrub_wait(&l, 5, "repaired 1", &res));
	CHECK_EQ(restore(c, 5, ra, rb, &got), 0);
	CHECK(!memcmp(ra, a, A_BYTES) && !memcmp(rb, b, B_BYTES));
	/* no peer has it: damaged, and the reason */
	iod_ckpt_peer_stop(p2);
	flip(f.pmem, 5, "r0-0-1.chunk", 79);
	CHECK(scrub_wait(&l, 5, "damaged 1", &res));
	CHECK_CONTAINS(res.why, "repair of chunk r0-0-1");
	iod_ckpt_close(c);
	iod_ckpt_peer_stop(p1);
	/* bad options */
	f.o.peers_n = 0;
	f.o.min_size = 0;
	CHECK_MSG(iod_ckpt_open(&f.o, &c, &err) == 0, "%s", err.msg);
	so.peer = c;
	CHECK_EQ(iod_ckpt_scrub_start(c, &so, &err), -EINVAL);
	iod_ckpt_close(c);
}

/* Retention reaches the commit side: the evict hook hears of each evicted
 * checkpoint while its files are still there, then they go. */
struct evict_log {
	const char *dir;
	uint64_t steps[16];
	bool present[16];
	uint32_t n;
};

static int evicted(void *ctx, uint32_t rank, uint64_t step, struct iod_err *e)
{
	struct evict_log *l = ctx;
	char path[1200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/step-%020llu/r%u.manifest", l->dir,
	         (unsigned long long)step, rank);
	if (l->n < 16) {
		l->present[l->n] = stat(path, &st) == 0;
		l->steps[l->n++] = step;
	}
	return iod_err_set(e, -EIO, "the control plane is away"); /* the files go anyway */
}

TEST(evicted_checkpoints_reach_the_evict_hook_first)
{
	static uint8_t a[A_BYTES], b[B_BYTES];
	struct fix f = {0};
	struct iod_ckpt *c;
	struct evict_log l = {0};
	struct iod_ckpt_info info[8];
	uint32_t n = 0;
	fix_init(&f, "evict_hook", 2000000);
	f.o.tiers.tiers_n = 1;
	f.o.tiers.tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, 10000};
	f.o.tiers.keep_max = 2;
	f.o.evict = evicted;
	f.o.commit_ctx = &l;
	l.dir = f.nvme;
	CHECK_EQ(iod_ckpt_open(&f.o, &c, &err), 0);
	fill(a, A_BYTES, 51), fill(b, B_BYTES, 52);
	for (uint64_t s = 1; s <= 4; s++)
		CHECK_MSG(save_wait(c, s, a, b) == 0, "%s", err.msg);
	CHECK_EQ(iod_ckpt_list(c, info, 8, &n, &err), 0);
	CHECK_EQ(n, 2);
	CHECK_U64(info[0].step, 3);
	CHECK_EQ(l.n, 2);
	CHECK_U64(l.steps[0], 1);
	CHECK_U64(l.steps[1], 2);
	CHECK(l.present[0] && l.present[1]);
	iod_ckpt_close(c);
}

/* A file of the volume tests: write it whole. */
static void put_file(const char *dir, const char *rel, const char *text)
{
	char p[900];
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static bool file_is(const char *dir, const char *rel, const char *text)
{
	char p[900], got[256] = "";
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	FILE *f = fopen(p, "r");
	if (!f)
		return false;
	size_t n = fread(got, 1, sizeof(got) - 1, f);
	fclose(f);
	got[n] = 0;
	return !strcmp(got, text);
}

/*
 * A volume (docs/storage.md "Volumes"): a data directory packed into a
 * region of a checkpoint saved with a peer copy (min_size 2), fetched from
 * the peer (the replacement's path after a node loss) and unpacked into a
 * fresh directory: the files written before the save are there byte for
 * byte, with their modes and subdirectories; one written after the save is
 * not (the recovery point is the save); the store's ckpt/ and a symbolic
 * link are left out. A cut or traversing archive unpacks nothing.
 */
TEST(volume_rides_in_a_checkpoint_and_comes_back_on_another_node)
{
	static uint8_t a[A_BYTES], ra[A_BYTES];
	struct fix f = {0};
	struct iod_ckpt *c;
	struct iod_ckpt_peer *p;
	struct iod_ckpt_vol_buf vb = {0};
	char d[600], data[600], fresh[600], ns[IOD_CKPT_PEER_ADDR_MAX], sub[700];
	uint32_t skipped = 0, files = 0;
	uint64_t vbytes = 0, bytes = 0;
	struct stat st;
	snprintf(d, sizeof(d), "%s/volpeer", iod_test_tmpdir());
	snprintf(data, sizeof(data), "%s/voldata", iod_test_tmpdir());
	snprintf(fresh, sizeof(fresh), "%s/volfresh", iod_test_tmpdir());
	mkdir(data, 0755);
	mkdir(fresh, 0755);
	snprintf(sub, sizeof(sub), "%s/db", data);
	mkdir(sub, 0750);
	snprintf(sub, sizeof(sub), "%s/ckpt", data);
	mkdir(sub, 0755);
	put_file(data, "notes.txt", "written before the sync\n");
	put_file(data, "db/wal-0001", "row 1\nrow 2\n");
	put_file(data, "ckpt/not-this", "the store's own\n");
	snprintf(sub, sizeof(sub), "%s/db/wal-0001", data);
	chmod(sub, 0600);
	snprintf(sub, sizeof(sub), "%s/link", data);
	CHECK_EQ(symlink("/etc/passwd", sub), 0);

	CHECK_MSG(iod_ckpt_vol_pack(data, "ckpt", &vb, &skipped, &err) == 0, "%s", err.msg);
	CHECK_EQ(skipped, 1); /* the link */
	CHECK(memmem(vb.buf, vb.len, "d 750 db\n", 9));
	CHECK(!memmem(vb.buf, vb.len, "not-this", 8));

	CHECK_MSG(iod_ckpt_peer_start("127.0.0.1:0", d, &p, &err) == 0, "%s", err.msg);
	snprintf(ns, sizeof(ns), "%s/db-0", iod_ckpt_peer_addr(p));
	fix_init(&f, "volprimary", 4000000);
	f.o.peers[0] = ns;
	f.o.peers_n = 1;
	f.o.min_size = 2;
	CHECK_MSG(iod_ckpt_open(&f.o, &c, &err) == 0, "%s", err.msg);
	fill(a, A_BYTES, 41);
	struct iod_ckpt_region r[] = {{"params", a, A_BYTES},
	                              {IOD_CKPT_VOLUME_REGION, vb.buf, vb.len}};
	CHECK_MSG(iod_ckpt_save(c, 7, r, 2, &err) == 0, "%s", err.msg);
	iod_ckpt_vol_buf_free(&vb); /* phase 1 took its copy */
	put_file(data, "late.txt", "written after the sync\n");
	CHECK_MSG(iod_ckpt_wait(c, &err) == 0, "%s", err.msg);
	CHECK_MSG(
	    iod_ckpt_region_bytes(c, IOD_CKPT_LATEST, IOD_CKPT_VOLUME_REGION, &vbytes, &err) == 0,
	    "%s", err.msg);
	CHECK_EQ(iod_ckpt_region_bytes(c, 7, "nothing", &bytes, &err), -ENOENT);
	iod_ckpt_close(c);

	/* the replacement: from the peer, sized by the peer's manifest */
	CHECK_MSG(iod_ckpt_peer_region_bytes(ns, 0, 7, IOD_CKPT_VOLUME_REGION, &bytes, &err) == 0,
	          "%s", err.msg);
	CHECK_U64(bytes, vbytes);
	uint8_t *vol = malloc(bytes);
	CHECK(vol);
	struct iod_ckpt_region rr[] = {{"params", ra, A_BYTES},
	                               {IOD_CKPT_VOLUME_REGION, vol, bytes}};
	CHECK_MSG(iod_ckpt_fetch(ns, 0, 7, rr, 2, &err) == 0, "%s", err.msg);
	CHECK(!memcmp(ra, a, A_BYTES));
	CHECK_MSG(iod_ckpt_vol_unpack(fresh, vol, bytes, &files, NULL, &err) == 0, "%s", err.msg);
	CHECK_EQ(files, 2);
	CHECK(file_is(fresh, "notes.txt", "written before the sync\n"));
	CHECK(file_is(fresh, "db/wal-0001", "row 1\nrow 2\n"));
	snprintf(sub, sizeof(sub), "%s/db/wal-0001", fresh);
	CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0600);
	snprintf(sub, sizeof(sub), "%s/db", fresh);
	CHECK(stat(sub, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0750);
	snprintf(sub, sizeof(sub), "%s/late.txt", fresh);
	CHECK(stat(sub, &st) != 0); /* after the recovery point */
	snprintf(sub, sizeof(sub), "%s/link", fresh);
	CHECK(lstat(sub, &st) != 0);
	snprintf(sub, sizeof(sub), "%s/ckpt", fresh);
	CHECK(stat(sub, &st) != 0);

	/* damage: every cut is refused and writes nothing; so is a path out */
	char cutdir[640];
	snprintf(cutdir, sizeof(cutdir), "%s/volcut", iod_test_tmpdir());
	mkdir(cutdir, 0755);
	for (uint64_t cut = 0; cut < bytes; cut += 5)
		CHECK_EQ(iod_ckpt_vol_unpack(cutdir, vol, cut, &files, NULL, &err), -EBADMSG);
	CHECK_EQ(files, 0);
	static const char evil[] = "iod-vol 1\nf 644 2 ../escape\nhi\nend 1\n";
	CHECK_EQ(
	    iod_ckpt_vol_unpack(cutdir, (const uint8_t *)evil, strlen(evil), &files, NULL, &err),
	    -EBADMSG);
	CHECK_CONTAINS(err.msg, "entry 0: the path is not a relative path");
	struct iod_ckpt_vol_entry x = {false, 0644, "/abs", (const uint8_t *)"x", 1};
	CHECK_EQ(iod_ckpt_vol_add(&vb, &x, &err), -EINVAL);
	iod_ckpt_vol_buf_free(&vb);
	free(vol);
	iod_ckpt_peer_stop(p);
}
