/*
 * fuzz_raft_wal.c: libFuzzer target for iod's Raft log parsers
 * (src/state/wal.c): the input as the open segment of a data directory
 * (iod_wal_open must refuse or repair it, never crash or hand back entries
 * that were not written), as a peer's log copy (--recover-from-peers) and as
 * an encoded configuration. Then the same bytes as the start of a
 * preallocated open segment (zeros after them, on the memory file system):
 * what it accepts must reopen the same with nothing more dropped, and take
 * an append that the next open finds.
 */
#include "state/internal.h"

#include <fcntl.h>
#include <raft.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_raft_wal: could not remove %s\n", dir);
}

/* A directory whose meta makes segment 1 the live, open segment. */
static void setup(void)
{
	struct iod_wal *w;
	struct iod_wal_load ld;
	struct iod_err e = {0};
	snprintf(dir, sizeof(dir), "/tmp/iod-fuzz-wal-%d", (int)getpid());
	mkdir(dir, 0700);
	atexit(cleanup);
	if (iod_wal_open(&w, dir, &ld, &e))
		abort();
	struct raft_entry en = {.term = 1, .type = RAFT_COMMAND, .buf = {.base = "x", .len = 1}};
	iod_wal_meta_set(w, 5, 0);
	iod_wal_append(w, &en, 1); /* creates seg 1 and lists it in meta */
	iod_wal_close(w);
}

#define PRE_ZEROS 4096
#define PRE_DIR "/fz"
#define PRE_SEG "seg-00000000000000000001"

static int pre_open(struct iod_walfs *m, struct iod_wal **w, struct iod_wal_load *ld)
{
	struct iod_err e = {0};
	int rv = iod_wal_open_fs(w, m, PRE_DIR, ld, &e);
	if (rv && !e.msg[0])
		abort(); /* a refusal always says why */
	return rv;
}

/* data + PRE_ZEROS zeros as segment 1 of a log at term 5 (memory). */
static void prealloc_case(const uint8_t *data, size_t size)
{
	struct iod_walfs *m = iod_walfs_mem_new();
	struct iod_wal *w;
	struct iod_wal_load ld;
	if (!m)
		abort();
	if (pre_open(m, &w, &ld))
		abort();
	struct raft_entry en = {.term = 1, .type = RAFT_COMMAND, .buf = {.base = "x", .len = 1}};
	iod_wal_meta_set(w, 5, 0);
	iod_wal_append(w, &en, 1);
	iod_wal_close(w);
	int d = m->ops->dir_open(m, PRE_DIR);
	int fd = m->ops->open(m, d, PRE_SEG, IOD_WALFS_CREATE);
	if (fd < 0 || m->ops->write(m, fd, data, size, 0) ||
	    m->ops->allocate(m, fd, size + PRE_ZEROS) || m->ops->sync(m, fd, true))
		abort();
	m->ops->close(m, fd);
	m->ops->close(m, d);

	if (pre_open(m, &w, &ld) == 0) {
		size_t n = ld.n;
		for (size_t i = 0; i < ld.n; i++)
			if (ld.entries[i].term > 5)
				abort();
		if (ld.n && ld.start_index != 1)
			abort();
		iod_wal_load_free(&ld);
		iod_wal_close(w);
		/* accepted (repaired or not): the same again, nothing dropped */
		if (pre_open(m, &w, &ld) || ld.n != n || ld.torn_bytes)
			abort();
		iod_wal_load_free(&ld);
		/* an append over the zero tail is found by the next open */
		iod_wal_set_segment_bytes(w, 1u << 16);
		iod_wal_set_prealloc(w, true);
		struct raft_entry more = {
		    .term = 5, .type = RAFT_COMMAND, .buf = {.base = "fuzz", .len = 4}};
		int rv = iod_wal_append(w, &more, 1);
		iod_wal_close(w);
		if (!rv) {
			if (pre_open(m, &w, &ld) || ld.n != n + 1 || ld.entries[n].buf.len != 4 ||
			    memcmp(ld.entries[n].buf.base, "fuzz", 4))
				abort();
			iod_wal_load_free(&ld);
			iod_wal_close(w);
		}
	}
	iod_walfs_mem_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char p[128];
	struct iod_wal *w;
	struct iod_wal_load ld;
	struct iod_err e = {0};

	if (!dir[0])
		setup();
	snprintf(p, sizeof(p), "%s/seg-%020u", dir, 1u);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	if (iod_wal_open(&w, dir, &ld, &e) == 0) {
		if (ld.n && ld.start_index != 1)
			abort();
		for (size_t i = 0; i < ld.n; i++) {
			if (ld.entries[i].term > 5)
				abort(); /* never above the stored term */
			raft_free(ld.entries[i].buf.base);
		}
		raft_free(ld.entries);
		iod_wal_snapshot_free(ld.snapshot);
		iod_wal_close(w);
	} else if (!e.msg[0]) {
		abort(); /* a refusal always says why */
	}

	prealloc_case(data, size);

	uint64_t t, li, lt;
	iod_wal_copy_summary(data, size, &t, &li, &lt);
	struct raft_configuration c;
	if (iod_raft_conf_decode(data, size, &c) == 0)
		raft_configuration_close(&c);
	return 0;
}
