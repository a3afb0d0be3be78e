/*
 * test_state_wal.c: iod's Raft log on disk (src/state/wal.c) under damage.
 *
 * Each case writes a real log (several segments, a snapshot), damages one
 * file the way disks and people do (a flipped byte, a cut at several
 * offsets, zeros, a deleted file, trailing garbage), and reopens it. The
 * store must either refuse, naming the file and the offset, or (only for an
 * interrupted write at the end of the open segment) repair it and hand back
 * an exact prefix of what was written. It must never come back empty, and
 * never crash. These are the cases libraft 0.15's backend crashed on
 * (SIGSEGV on a truncated open segment) or set aside and started empty.
 *
 * Every damage case runs twice: on the real disk (POSIX, the daemon's
 * file system) and on the memory file system (src/state/walfs.c) that the
 * simulator damages, so both reach the same verdicts. The crash cases run
 * on the memory file system only: the power goes at each sync in turn,
 * unsynced bytes are lost, and every append that returned 0 must be there.
 */
#include "harness.h"
#include "state/internal.h"

#include <fcntl.h>
#include <raft.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENTRIES 120
#define SEG_BYTES 2048 /* several segments of ~20 entries each */

static char dir[512];
static struct iod_walfs *mfs; /* the memory file system, NULL: the real disk */
static bool prealloc;         /* build() preallocates segments (as the daemon does) */

static struct iod_walfs *fs(void)
{
	return mfs ? mfs : iod_walfs_posix();
}

/* A test case run on both file systems: NAME on disk, NAME_memfs in memory. */
#define WAL_CASE(name)                           \
	static void case_##name(void);           \
	TEST(name)                               \
	{                                        \
		case_##name();                   \
	}                                        \
	TEST(name##_memfs)                       \
	{                                        \
		mfs = iod_walfs_mem_new();       \
		if (mfs)                         \
			case_##name();           \
		else                             \
			CHECK(!"out of memory"); \
		iod_walfs_mem_free(mfs);         \
		mfs = NULL;                      \
	}                                        \
	static void case_##name(void)

static void entry_text(char *out, size_t cap, unsigned i)
{
	snprintf(out, cap, "{\"op\":\"put\",\"name\":\"key-%u\",\"pad\":\"%.*s\"}", i,
	         (int)(i % 23), "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
}

/* A fresh log in dir with ENTRIES entries (index 1 = configuration). */
static int build(const char *sub)
{
	struct iod_wal *w;
	struct iod_wal_load ld;
	struct iod_err e = {0};
	struct raft_configuration conf;
	char text[128];

	snprintf(dir, sizeof(dir), "%s/%s", iod_test_tmpdir(), sub);
	if (!mfs)
		mkdir(dir, 0700);
	if (iod_wal_open_fs(&w, fs(), dir, &ld, &e))
		return -1;
	iod_wal_load_free(&ld);
	iod_wal_set_segment_bytes(w, SEG_BYTES);
	iod_wal_set_prealloc(w, prealloc);
	raft_configuration_init(&conf);
	raft_configuration_add(&conf, 1, "127.0.0.1:1", RAFT_VOTER);
	int rv = iod_wal_bootstrap(w, &conf);
	raft_configuration_close(&conf);
	for (unsigned i = 2; i <= ENTRIES && !rv; i++) {
		entry_text(text, sizeof(text), i);
		struct raft_entry en = {
		    .term = 1, .type = RAFT_COMMAND, .buf = {.base = text, .len = strlen(text)}};
		rv = iod_wal_append(w, &en, 1);
	}
	iod_wal_close(w);
	return rv;
}

/* Reopen; 0 and the entries, or the error. Checks loaded entries are an
 * exact prefix of what build() wrote. */
static int reopen(struct iod_err *e, size_t *n, int *prefix_ok)
{
	struct iod_wal *w;
	struct iod_wal_load ld;
	char text[128];

	memset(e, 0, sizeof(*e));
	int rv = iod_wal_open_fs(&w, fs(), dir, &ld, e);
	if (rv)
		return rv;
	*n = ld.n;
	*prefix_ok = ld.start_index == 1;
	for (size_t i = 1; i < ld.n && *prefix_ok; i++) {
		entry_text(text, sizeof(text), (unsigned)i + 1);
		*prefix_ok = ld.entries[i].buf.len == strlen(text) &&
		             !memcmp(ld.entries[i].buf.base, text, strlen(text));
	}
	iod_wal_load_free(&ld);
	iod_wal_close(w);
	return 0;
}

static void seg_path(char *out, size_t cap, unsigned seq)
{
	snprintf(out, cap, "%s/seg-%020u", dir, seq);
}

static bool exists(const char *p)
{
	uint64_t size;
	return mfs ? iod_walfs_mem_size(mfs, p, &size) == 0 : access(p, F_OK) == 0;
}

static unsigned last_seq(void)
{
	char p[600];
	unsigned q = 1;
	for (;;) {
		seg_path(p, sizeof(p), q + 1);
		if (!exists(p))
			return q;
		q++;
	}
}

static long file_size(const char *p)
{
	struct stat st;
	uint64_t size;
	if (mfs)
		return iod_walfs_mem_size(mfs, p, &size) ? -1 : (long)size;
	return stat(p, &st) ? -1 : (long)st.st_size;
}

static void flip(const char *p, long off)
{
	if (mfs) {
		if (iod_walfs_mem_fault(mfs, p, IOD_WALFS_FLIP, (uint64_t)off, NULL, 0))
			abort();
		return;
	}
	int fd = open(p, O_RDWR);
	unsigned char b;
	if (pread(fd, &b, 1, off) == 1) {
		b ^= 0x10;
		if (pwrite(fd, &b, 1, off) != 1)
			abort();
	}
	close(fd);
}

static void append_bytes(const char *p, const void *b, size_t n)
{
	if (mfs) {
		if (iod_walfs_mem_fault(mfs, p, IOD_WALFS_APPEND, 0, b, n))
			abort();
		return;
	}
	int fd = open(p, O_WRONLY | O_APPEND);
	if (write(fd, b, n) != (ssize_t)n)
		abort();
	close(fd);
}

static int cut(const char *p, long len)
{
	return mfs ? iod_walfs_mem_fault(mfs, p, IOD_WALFS_CUT, (uint64_t)len, NULL, 0)
	           : truncate(p, len);
}

static int remove_file(const char *p)
{
	return mfs ? iod_walfs_mem_fault(mfs, p, IOD_WALFS_DELETE, 0, NULL, 0) : unlink(p);
}

/* The refusal must name the file and an offset. */
#define CHECK_REFUSED(rv, e, file)                                                                 \
	do {                                                                                       \
		CHECK_MSG((rv) == -EUCLEAN, "expected a refusal, got %d (%s)", (rv), (e).msg);     \
		CHECK_MSG(strstr((e).msg, (file)) != NULL, "message does not name %s: %s", (file), \
		          (e).msg);                                                                \
	} while (0)

WAL_CASE(round_trip_across_segments)
{
	struct iod_err e;
	size_t n = 0;
	int ok = 0;
	CHECK(build("rt") == 0);
	CHECK(last_seq() >= 4);
	CHECK_EQ(reopen(&e, &n, &ok), 0);
	CHECK_EQ(n, ENTRIES);
	CHECK(ok);
}

WAL_CASE(closed_segment_flip_refused_at_every_region)
{
	/* segment header, record header, record data, padding */
	const long offs[] = {3, 20, 45, 60, 100, 300};
	for (unsigned k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		char sub[32], p[600];
		struct iod_err e;
		size_t n = 0;
		int ok = 0;
		snprintf(sub, sizeof(sub), "flip%u", k);
		CHECK(build(sub) == 0);
		seg_path(p, sizeof(p), 2);
		CHECK(offs[k] < file_size(p));
		flip(p, offs[k]);
		int rv = reopen(&e, &n, &ok);
		CHECK_REFUSED(rv, e, "seg-00000000000000000002");
		CHECK_MSG(strstr(e.msg, "offset") != NULL, "%s", e.msg);
	}
}

WAL_CASE(closed_segment_truncated_refused)
{
	const long cuts[] = {0, 10, 39, 41, 80, -1 /* one byte short */};
	for (unsigned k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		char sub[32], p[600];
		struct iod_err e;
		size_t n = 0;
		int ok = 0;
		snprintf(sub, sizeof(sub), "cut%u", k);
		CHECK(build(sub) == 0);
		seg_path(p, sizeof(p), 2);
		long len = cuts[k] >= 0 ? cuts[k] : file_size(p) - 1;
		CHECK(cut(p, len) == 0);
		int rv = reopen(&e, &n, &ok);
		CHECK_REFUSED(rv, e, "seg-00000000000000000002");
	}
}

WAL_CASE(closed_segment_trailing_garbage_and_zeros_refused)
{
	char p[600], junk[64];
	struct iod_err e;
	size_t n = 0;
	int ok = 0;
	CHECK(build("garb") == 0);
	seg_path(p, sizeof(p), 1);
	for (unsigned i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 37 + 11);
	append_bytes(p, junk, sizeof(junk));
	CHECK_REFUSED(reopen(&e, &n, &ok), e, "seg-00000000000000000001");

	CHECK(build("zeros") == 0);
	seg_path(p, sizeof(p), 2);
	memset(junk, 0, sizeof(junk));
	append_bytes(p, junk, sizeof(junk));
	CHECK_REFUSED(reopen(&e, &n, &ok), e, "seg-00000000000000000002");
}

WAL_CASE(missing_or_empty_segment_refused)
{
	char p[600];
	struct iod_err e;
	size_t n = 0;
	int ok = 0;
	CHECK(build("del") == 0);
	seg_path(p, sizeof(p), 2);
	CHECK(remove_file(p) == 0);
	CHECK_REFUSED(reopen(&e, &n, &ok), e, "seg-00000000000000000002");
	CHECK(strstr(e.msg, "missing") != NULL);

	CHECK(build("dellast") == 0);
	seg_path(p, sizeof(p), last_seq());
	char name[64];
	snprintf(name, sizeof(name), "seg-%020u", last_seq());
	CHECK(remove_file(p) == 0);
	CHECK_REFUSED(reopen(&e, &n, &ok), e, name);

	CHECK(build("empty") == 0);
	seg_path(p, sizeof(p), 3);
	CHECK(cut(p, 0) == 0);
	CHECK_REFUSED(reopen(&e, &n, &ok), e, "seg-00000000000000000003");
	CHECK(strstr(e.msg, "empty") != NULL);

	CHECK(build("emptylast") == 0);
	seg_path(p, sizeof(p), last_seq());
	CHECK(cut(p, 0) == 0);
	CHECK_EQ(reopen(&e, &n, &ok), -EUCLEAN);
}

WAL_CASE(meta_damage_refused)
{
	char p[600];
	struct iod_err e;
	size_t n = 0;
	int ok = 0;
	CHECK(build("meta") == 0);
	snprintf(p, sizeof(p), "%s/meta", dir);
	flip(p, 20);
	CHECK_REFUSED(reopen(&e, &n, &ok), e, "meta");
	CHECK(build("nometa") == 0);
	snprintf(p, sizeof(p), "%s/meta", dir);
	CHECK(remove_file(p) == 0);
	CHECK_REFUSED(reopen(&e, &n, &ok), e, "meta");
}

WAL_CASE(open_segment_torn_tail_repaired_to_a_prefix)
{
	/* cuts inside the last records of the open segment: an interrupted
	 * write. Repaired, the log is an exact prefix, and it stays good. */
	const long back[] = {1, 7, 20, 39, 40, 41, 55, 200};
	for (unsigned k = 0; k < sizeof(back) / sizeof(back[0]); k++) {
		char sub[32], p[600];
		struct iod_err e;
		size_t n = 0, n2 = 0;
		int ok = 0;
		snprintf(sub, sizeof(sub), "torn%u", k);
		CHECK(build(sub) == 0);
		seg_path(p, sizeof(p), last_seq());
		long len = file_size(p);
		if (len - back[k] <= 40)
			continue;
		CHECK(cut(p, len - back[k]) == 0);
		int rv = reopen(&e, &n, &ok);
		CHECK_MSG(rv == 0, "cut %ld: %s", back[k], e.msg);
		CHECK(n < ENTRIES && n >= ENTRIES - 10);
		CHECK(ok);
		CHECK_EQ(reopen(&e, &n2, &ok), 0);
		CHECK_EQ(n2, n);
	}
}

WAL_CASE(open_segment_zero_tail_repaired_but_flip_and_garbage_refused)
{
	char p[600], junk[600];
	struct iod_err e;
	size_t n = 0;
	int ok = 0;
	char name[64];

	/* zeros after the last record (a file extended, data not written) */
	CHECK(build("oz") == 0);
	seg_path(p, sizeof(p), last_seq());
	memset(junk, 0, sizeof(junk));
	append_bytes(p, junk, sizeof(junk));
	CHECK_EQ(reopen(&e, &n, &ok), 0);
	CHECK_EQ(n, ENTRIES);
	CHECK(ok);

	/* a flipped byte in an early record, valid records after it */
	CHECK(build("of") == 0);
	seg_path(p, sizeof(p), last_seq());
	snprintf(name, sizeof(name), "seg-%020u", last_seq());
	flip(p, 60);
	CHECK_REFUSED(reopen(&e, &n, &ok), e, name);

	/* garbage after the last record */
	CHECK(build("og") == 0);
	seg_path(p, sizeof(p), last_seq());
	snprintf(name, sizeof(name), "seg-%020u", last_seq());
	for (unsigned i = 0; i < 100; i++)
		junk[i] = (char)(i * 37 + 11);
	append_bytes(p, junk, 100);
	CHECK_REFUSED(reopen(&e, &n, &ok), e, name);
}

WAL_CASE(truncate_compact_and_install)
{
	struct iod_wal *w;
	struct iod_wal_load ld;
	struct iod_err e = {0};
	char text[128];
	struct raft_snapshot s = {0};
	char data[] = "state";
	struct raft_buffer buf = {.base = data, .len = sizeof(data)};

	CHECK(build(prealloc ? "ops_pre" : "ops") == 0);
	CHECK_EQ(iod_wal_open_fs(&w, fs(), dir, &ld, &e), 0);
	iod_wal_load_free(&ld);
	iod_wal_set_segment_bytes(w, SEG_BYTES);
	iod_wal_set_prealloc(w, prealloc);
	/* raft truncates a conflicting tail, then appends the leader's entries */
	CHECK_EQ(iod_wal_truncate(w, 30), 0);
	CHECK_EQ(iod_wal_next_index(w), 30);
	CHECK_EQ(iod_wal_meta_set(w, 2, 1), 0);
	for (unsigned i = 30; i <= 60; i++) {
		entry_text(text, sizeof(text), i);
		struct raft_entry en = {
		    .term = 2, .type = RAFT_COMMAND, .buf = {.base = text, .len = strlen(text)}};
		CHECK_EQ(iod_wal_append(w, &en, 1), 0);
	}
	/* a snapshot at 55 keeping 10: segments wholly at or before 45 go */
	raft_configuration_init(&s.configuration);
	raft_configuration_add(&s.configuration, 1, "127.0.0.1:1", RAFT_VOTER);
	s.index = 55;
	s.term = 2;
	s.configuration_index = 1;
	s.bufs = &buf;
	s.n_bufs = 1;
	CHECK_EQ(iod_wal_snapshot_put(w, 10, &s), 0);
	iod_wal_close(w);
	CHECK_EQ(iod_wal_open_fs(&w, fs(), dir, &ld, &e), 0);
	CHECK(ld.snapshot && ld.snapshot->index == 55);
	CHECK_MSG(ld.start_index > 1 && ld.start_index <= 46, "start %llu",
	          (unsigned long long)ld.start_index);
	CHECK_EQ(ld.start_index + ld.n - 1, 60);
	CHECK_EQ(ld.term, 2);
	CHECK_EQ(ld.vote, 1);
	CHECK_EQ(ld.entries[ld.n - 1].term, 2);
	iod_wal_load_free(&ld);
	/* an installed snapshot (trailing 0) replaces the whole log */
	s.index = 500;
	CHECK_EQ(iod_wal_snapshot_put(w, 0, &s), 0);
	entry_text(text, sizeof(text), 501);
	struct raft_entry en = {
	    .term = 2, .type = RAFT_COMMAND, .buf = {.base = text, .len = strlen(text)}};
	CHECK_EQ(iod_wal_append(w, &en, 1), 0);
	iod_wal_close(w);
	CHECK_EQ(iod_wal_open_fs(&w, fs(), dir, &ld, &e), 0);
	CHECK(ld.snapshot && ld.snapshot->index == 500);
	CHECK_EQ(ld.start_index, 501);
	CHECK_EQ(ld.n, 1);
	iod_wal_load_free(&ld);
	iod_wal_close(w);
	/* a damaged snapshot is refused, not skipped */
	char p[600];
	snprintf(p, sizeof(p), "%s/snap-%020u", dir, 500u);
	flip(p, 70);
	CHECK_EQ(iod_wal_open_fs(&w, fs(), dir, &ld, &e), -EUCLEAN);
	CHECK(strstr(e.msg, "snap-00000000000000000500") != NULL);
	raft_configuration_close(&s.configuration);
}

TEST(libraft_format_refused_with_what_to_do)
{
	char p[600];
	struct iod_wal *w;
	struct iod_wal_load ld;
	struct iod_err e = {0};
	snprintf(dir, sizeof(dir), "%s/legacy", iod_test_tmpdir());
	mkdir(dir, 0700);
	snprintf(p, sizeof(p), "%s/metadata1", dir);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	CHECK(iod_wal_open(&w, dir, &ld, &e) < 0);
	CHECK(strstr(e.msg, "--recover-from-peers") != NULL);
}

/*
 * The power goes during the k-th sync of a run of appends (for every k up
 * to past a segment roll and its meta update): what was not synced is lost.
 * Reopened, the log starts (a torn tail is repaired, nothing is refused)
 * and holds every entry whose append returned 0, as an exact prefix.
 */
static void crash_at_every_sync(void)
{
	char text[128];
	for (uint64_t k = 1; k <= 40; k++) {
		struct iod_wal *w;
		struct iod_wal_load ld;
		struct iod_err e = {0};
		char sub[32];
		size_t n = 0;
		int ok = 0;

		mfs = iod_walfs_mem_new();
		CHECK(mfs != NULL);
		snprintf(sub, sizeof(sub), "crash%llu", (unsigned long long)k);
		CHECK(build(sub) == 0);
		CHECK_EQ(iod_wal_open_fs(&w, mfs, dir, &ld, &e), 0);
		CHECK_EQ(ld.n, ENTRIES);
		iod_wal_load_free(&ld);
		iod_wal_set_segment_bytes(w, SEG_BYTES);
		iod_wal_set_prealloc(w, prealloc);
		iod_walfs_mem_die_at_sync(mfs, k);
		unsigned acked = ENTRIES;
		for (unsigned i = ENTRIES + 1; i <= ENTRIES + 60; i++) {
			entry_text(text, sizeof(text), i);
			struct raft_entry en = {.term = 1,
			                        .type = RAFT_COMMAND,
			                        .buf = {.base = text, .len = strlen(text)}};
			if (iod_wal_append(w, &en, 1))
				break;
			acked = i;
		}
		CHECK_MSG(acked < ENTRIES + 60, "k=%llu: the disk never died",
		          (unsigned long long)k);
		iod_walfs_mem_crash(mfs);
		iod_wal_close(w);
		int rv = reopen(&e, &n, &ok);
		CHECK_MSG(rv == 0, "k=%llu: %s", (unsigned long long)k, e.msg);
		CHECK_MSG(n >= acked, "k=%llu: %zu entries after the crash, %u acknowledged",
		          (unsigned long long)k, n, acked);
		CHECK(n <= acked + 1);
		CHECK(ok);
		iod_walfs_mem_free(mfs);
		mfs = NULL;
	}
}

TEST(crash_at_every_sync_keeps_every_acknowledged_entry)
{
	crash_at_every_sync();
}

/* Unsynced bytes of the open segment that did reach the disk in part (the
 * crash kept a prefix of the last write): a torn tail, repaired. */
TEST(crash_with_a_partial_last_write_is_repaired)
{
	char p[600], rec[64] = {0};
	struct iod_err e;
	size_t n = 0;
	int ok = 0;
	mfs = iod_walfs_mem_new();
	CHECK(mfs != NULL);
	CHECK(build("partial") == 0);
	seg_path(p, sizeof(p), last_seq());
	/* the first 24 bytes of the next record's header: magic, CRC, index */
	rec[0] = 0x52, rec[1] = 0x45, rec[2] = 0x43, rec[3] = 0x31;
	append_bytes(p, rec, 24);
	int rv = reopen(&e, &n, &ok);
	CHECK_MSG(rv == 0, "%s", e.msg);
	CHECK_EQ(n, ENTRIES);
	CHECK(ok);
	iod_walfs_mem_free(mfs);
	mfs = NULL;
}

/* ---- preallocated segments (what the daemon writes) ------------------------ */

#define PRE_ENTRIES (ENTRIES + 5)
#define PRE_BYTES 65536 /* the open segment's preallocation in these cases */

/* Read or write bytes of a file through the file system under test. */
static int file_io(const char *name, void *buf, size_t len, uint64_t off, bool wr)
{
	struct iod_walfs *f = fs();
	int d = f->ops->dir_open(f, dir);
	if (d < 0)
		return d;
	int fd = f->ops->open(f, d, name, wr ? IOD_WALFS_WRITE : IOD_WALFS_READ);
	int rv = fd;
	if (fd >= 0) {
		if (wr) {
			rv = f->ops->write(f, fd, buf, len, off);
			if (!rv)
				rv = f->ops->sync(f, fd, false);
		} else {
			rv = f->ops->read(f, fd, buf, len, off) == (ssize_t)len ? 0 : -EIO;
		}
		f->ops->close(f, fd);
	}
	f->ops->close(f, d);
	return rv;
}

/* Where the records of segment name end, and where its last record starts. */
static int records_end(const char *name, long *end, long *last_start)
{
	unsigned char h[40];
	long off = 40;
	*last_start = -1;
	while (file_io(name, h, sizeof(h), (uint64_t)off, false) == 0 && h[0] == 'R' &&
	       h[1] == 'E' && h[2] == 'C' && h[3] == '1') {
		uint32_t dlen = (uint32_t)h[28] | (uint32_t)h[29] << 8 | (uint32_t)h[30] << 16 |
		                (uint32_t)h[31] << 24;
		*last_start = off;
		off += 40 + (long)((dlen + 7) & ~7u);
	}
	*end = off;
	return *last_start < 0 ? -1 : 0;
}

/* Append entries from..to (entry_text) to the log in dir, preallocating
 * the open segment to PRE_BYTES. */
static int append_more(unsigned from, unsigned to)
{
	struct iod_wal *w;
	struct iod_wal_load ld;
	struct iod_err e = {0};
	char text[128];
	if (iod_wal_open_fs(&w, fs(), dir, &ld, &e))
		return -1;
	iod_wal_load_free(&ld);
	iod_wal_set_segment_bytes(w, PRE_BYTES);
	iod_wal_set_prealloc(w, true);
	int rv = 0;
	for (unsigned i = from; i <= to && !rv; i++) {
		entry_text(text, sizeof(text), i);
		struct raft_entry en = {
		    .term = 1, .type = RAFT_COMMAND, .buf = {.base = text, .len = strlen(text)}};
		rv = iod_wal_append(w, &en, 1);
	}
	iod_wal_close(w);
	return rv;
}

/* A log written as the daemon writes it: closed segments cut to their
 * records, the open one preallocated to PRE_BYTES with a zero tail. */
static int build_pre(const char *sub)
{
	prealloc = true;
	int rv = build(sub);
	prealloc = false;
	return rv ? rv : append_more(ENTRIES + 1, PRE_ENTRIES);
}

/* As the daemon reopens: entries loaded, torn bytes dropped. */
static int reopen_pre(struct iod_err *e, size_t *n, int *ok, uint64_t *torn)
{
	struct iod_wal *w;
	struct iod_wal_load ld;
	memset(e, 0, sizeof(*e));
	int rv = iod_wal_open_fs(&w, fs(), dir, &ld, e);
	if (rv)
		return rv;
	*torn = ld.torn_bytes;
	iod_wal_load_free(&ld);
	iod_wal_close(w);
	return reopen(e, n, ok);
}

WAL_CASE(prealloc_zero_tail_is_the_end_and_closed_segments_have_none)
{
	char p[600], name[64];
	struct iod_err e;
	size_t n = 0;
	int ok = 0;
	uint64_t torn = 1;
	long end, last;

	CHECK(build_pre("pz") == 0);
	unsigned q = last_seq();
	CHECK(q >= 4);
	/* every closed segment ends at its last record */
	for (unsigned i = 1; i < q; i++) {
		snprintf(name, sizeof(name), "seg-%020u", i);
		seg_path(p, sizeof(p), i);
		CHECK_EQ(records_end(name, &end, &last), 0);
		CHECK_MSG(file_size(p) == end, "%s: %ld bytes, records end at %ld", name,
		          file_size(p), end);
	}
	/* the open one is preallocated: zeros after its records */
	snprintf(name, sizeof(name), "seg-%020u", q);
	seg_path(p, sizeof(p), q);
	CHECK_EQ(records_end(name, &end, &last), 0);
	CHECK_EQ(file_size(p), PRE_BYTES);
	CHECK(end < PRE_BYTES / 2);
	/* reopened: all of it, nothing dropped, the preallocation kept */
	CHECK_EQ(reopen_pre(&e, &n, &ok, &torn), 0);
	CHECK_EQ(n, PRE_ENTRIES);
	CHECK(ok);
	CHECK_EQ(torn, 0);
	CHECK_EQ(file_size(p), PRE_BYTES);
	/* appends go on over the zeros, and survive the next reopen */
	CHECK_EQ(append_more(PRE_ENTRIES + 1, PRE_ENTRIES + 10), 0);
	CHECK_EQ(file_size(p), PRE_BYTES);
	CHECK_EQ(last_seq(), q);
	CHECK_EQ(reopen_pre(&e, &n, &ok, &torn), 0);
	CHECK_EQ(n, PRE_ENTRIES + 10);
	CHECK(ok);
	CHECK_EQ(torn, 0);
	/* a log written before preallocation (no tail) is preallocated at the
	 * next append */
	CHECK(build("pold") == 0);
	seg_path(p, sizeof(p), last_seq());
	long before = file_size(p);
	CHECK(before < PRE_BYTES);
	CHECK_EQ(append_more(ENTRIES + 1, PRE_ENTRIES), 0);
	CHECK_EQ(file_size(p), PRE_BYTES);
	CHECK_EQ(reopen_pre(&e, &n, &ok, &torn), 0);
	CHECK_EQ(n, PRE_ENTRIES);
	CHECK(ok);
}

WAL_CASE(prealloc_torn_last_record_repaired_to_a_prefix)
{
	/* The last append was interrupted inside a preallocated segment: its
	 * record's header (in part) or its data (in part) reached the disk,
	 * the rest is still the preallocation's zeros. Repaired to the
	 * entries before it; appends go on; nothing else is lost. */
	const long keep[] = {24, 40, 50}; /* bytes of the last record that landed */
	for (unsigned k = 0; k < sizeof(keep) / sizeof(keep[0]); k++) {
		char sub[32], p[600], name[64], zeros[256] = {0};
		struct iod_err e;
		size_t n = 0;
		int ok = 0;
		uint64_t torn = 0;
		long end, last;

		snprintf(sub, sizeof(sub), "ptorn%u", k);
		CHECK(build_pre(sub) == 0);
		snprintf(name, sizeof(name), "seg-%020u", last_seq());
		seg_path(p, sizeof(p), last_seq());
		CHECK_EQ(records_end(name, &end, &last), 0);
		CHECK((size_t)(end - last - keep[k]) <= sizeof(zeros));
		CHECK_EQ(file_io(name, zeros, (size_t)(end - last - keep[k]),
		                 (uint64_t)(last + keep[k]), true),
		         0);
		int rv = reopen_pre(&e, &n, &ok, &torn);
		CHECK_MSG(rv == 0, "keep %ld: %s", keep[k], e.msg);
		CHECK_EQ(n, PRE_ENTRIES - 1);
		CHECK(ok);
		CHECK(torn > 0);
		CHECK_EQ(reopen_pre(&e, &n, &ok, &torn), 0);
		CHECK_EQ(n, PRE_ENTRIES - 1);
		CHECK_EQ(torn, 0);
		CHECK_EQ(append_more(PRE_ENTRIES, PRE_ENTRIES + 3), 0);
		CHECK_EQ(file_size(p), PRE_BYTES);
		CHECK_EQ(reopen_pre(&e, &n, &ok, &torn), 0);
		CHECK_EQ(n, PRE_ENTRIES + 3);
		CHECK(ok);
	}
}

WAL_CASE(prealloc_garbage_in_the_tail_refused_as_without_it)
{
	char p[600], name[64], junk[100], rec[200];
	struct iod_err e;
	size_t n = 0;
	int ok = 0;
	uint64_t torn = 0;
	long end, last;

	for (unsigned i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 37 + 11);
	/* garbage right after the last record, zeros after it: refused, as
	 * the same garbage at the end of a file without the zeros is */
	CHECK(build_pre("pg") == 0);
	snprintf(name, sizeof(name), "seg-%020u", last_seq());
	seg_path(p, sizeof(p), last_seq());
	CHECK_EQ(records_end(name, &end, &last), 0);
	CHECK_EQ(file_io(name, junk, sizeof(junk), (uint64_t)end, true), 0);
	CHECK_REFUSED(reopen_pre(&e, &n, &ok, &torn), e, name);
	CHECK_MSG(strstr(e.msg, "offset") != NULL, "%s", e.msg);

	/* a valid record (a copy of the last one) further into the zeros:
	 * valid data after the end is not an interrupted write: refused */
	CHECK(build_pre("pv") == 0);
	CHECK_EQ(records_end(name, &end, &last), 0);
	CHECK((size_t)(end - last) <= sizeof(rec));
	CHECK_EQ(file_io(name, rec, (size_t)(end - last), (uint64_t)last, false), 0);
	CHECK_EQ(file_io(name, rec, (size_t)(end - last), (uint64_t)PRE_BYTES / 2, true), 0);
	CHECK_REFUSED(reopen_pre(&e, &n, &ok, &torn), e, name);

	/* a flipped byte in an earlier record of the open segment: refused */
	CHECK(build_pre("pf") == 0);
	seg_path(p, sizeof(p), last_seq());
	flip(p, 60);
	CHECK_REFUSED(reopen_pre(&e, &n, &ok, &torn), e, name);

	/* a closed segment with a zero tail (never written so): refused */
	CHECK(build_pre("pc") == 0);
	seg_path(p, sizeof(p), 2);
	memset(junk, 0, sizeof(junk));
	append_bytes(p, junk, sizeof(junk));
	CHECK_REFUSED(reopen_pre(&e, &n, &ok, &torn), e, "seg-00000000000000000002");

	/* bytes far into the zeros with no valid record among them: judged as
	 * they would be at the end of a file (a torn write that lost a block:
	 * repaired, every entry kept) */
	CHECK(build_pre("pj") == 0);
	for (unsigned i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 37 + 11);
	CHECK_EQ(file_io(name, junk, sizeof(junk), (uint64_t)PRE_BYTES / 2, true), 0);
	CHECK_EQ(reopen_pre(&e, &n, &ok, &torn), 0);
	CHECK_EQ(n, PRE_ENTRIES);
	CHECK(ok);
	CHECK(torn > 0);
}

/* A follower's truncation and a compaction on a preallocated log. */
TEST(prealloc_truncate_compact_and_install)
{
	prealloc = true;
	case_truncate_compact_and_install();
	prealloc = false;
}

TEST(prealloc_truncate_compact_and_install_memfs)
{
	prealloc = true;
	mfs = iod_walfs_mem_new();
	CHECK(mfs != NULL);
	case_truncate_compact_and_install();
	iod_walfs_mem_free(mfs);
	mfs = NULL;
	prealloc = false;
}

TEST(prealloc_crash_at_every_sync_keeps_every_acknowledged_entry)
{
	prealloc = true;
	crash_at_every_sync();
	prealloc = false;
}
