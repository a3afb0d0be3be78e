/*
 * simdisk.c: a simulated server's disk: iod's real Raft log (wal.c) on a
 * memory file system (walfs.c), for the whole-cluster simulator.
 *
 * Why it exists: the simulator's servers run canonical raft on its fixture
 * (in-memory I/O), so without this no simulated server ever wrote, damaged
 * or reopened a log, and the verdict that decides whether a server with a
 * damaged disk may rejoin (wal.c: a torn tail is repaired, anything else is
 * refused) was never exercised by the simulation. Here each server's log
 * is mirrored into wal.c as raft holds it (term, vote, entries, where its
 * snapshot is), after every step of the fixture; a disk fault damages the
 * files the way disks do, and the restart is iod_wal_open's real verdict.
 * A refused log is rebuilt as `iod server --recover-from-peers` does
 * (recover.c, wal.c iod_wal_rebuild): the most up-to-date peer's stored
 * log, at a term above every term seen, voting for itself.
 *
 * What it is not: the fixture keeps its own in-memory copy of the log, so
 * a server revived after a disk fault continues from raft's memory, not
 * from what wal.c loaded; the mirror then writes raft's state back. A
 * snapshot file holds a marker, not the state machine (the fixture keeps
 * that). What the simulation checks with it: the verdicts, the time a
 * server is out, and that every acknowledged write is on a majority of the
 * disks as wal.c would load them.
 *
 * Pure: no clock, no I/O, no randomness (the damage is placed by rule).
 */
#include "internal.h"

#include <raft.h>
#include <stdlib.h>
#include <string.h>

struct iod_simdisk {
	struct iod_walfs *fs;   /* the memory file system */
	char dir[IOD_NAME_MAX]; /* the data directory's name on it */
	struct iod_wal *w;      /* the open log, NULL while the server is down */
	uint64_t seg_bytes;     /* segment size (small: faults hit closed ones) */
	uint64_t term, vote;    /* what the meta holds */
	uint64_t snap_index;    /* the newest snapshot file's index (0: none) */
	uint64_t first;         /* index of terms[0] */
	uint64_t *terms;        /* the term of each entry first.. in the log */
	size_t n, cap;          /* entries known, allocated */
};

static const char marker[] = "iod-sim: the fixture holds the state";

/* ---- the entries' terms, as the log holds them ----------------------------- */

static uint64_t last_index(const struct iod_simdisk *d)
{
	return d->first + d->n - 1;
}

static uint64_t term_at(const struct iod_simdisk *d, uint64_t index)
{
	return index >= d->first && index < d->first + d->n ? d->terms[index - d->first] : 0;
}

static int terms_push(struct iod_simdisk *d, uint64_t term)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 256;
		uint64_t *t = realloc(d->terms, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		d->terms = t;
		d->cap = cap;
	}
	d->terms[d->n++] = term;
	return 0;
}

/* Forget terms below index (the log dropped them or a snapshot covers them). */
static void terms_drop_below(struct iod_simdisk *d, uint64_t index)
{
	if (index <= d->first)
		return;
	uint64_t k = IOD_MIN(index - d->first, (uint64_t)d->n);
	memmove(d->terms, d->terms + k, (size_t)(d->n - k) * sizeof(*d->terms));
	d->n -= (size_t)k;
	d->first += k;
}

/* ---- raft's log, as the fixture's server holds it --------------------------- */

static uint64_t r_first(const struct raft *r)
{
	return r->log.offset + 1;
}

static uint64_t r_count(const struct raft *r)
{
	const struct raft_log *l = &r->log;
	return l->back >= l->front ? l->back - l->front : l->size - l->front + l->back;
}

static const struct raft_entry *r_entry(const struct raft *r, uint64_t index)
{
	const struct raft_log *l = &r->log;
	return &l->entries[(l->front + (index - r_first(r))) % l->size];
}

static uint64_t r_term_at(const struct raft *r, uint64_t index)
{
	if (index >= r_first(r) && index < r_first(r) + r_count(r))
		return r_entry(r, index)->term;
	if (index && index == r->log.snapshot.last_index)
		return r->log.snapshot.last_term;
	return 0;
}

/* ---- open, close ------------------------------------------------------------- */

int iod_simdisk_new(struct iod_simdisk **out, const char *dir, uint64_t segment_bytes)
{
	struct iod_simdisk *d = calloc(1, sizeof(*d));
	if (!d || !(d->fs = iod_walfs_mem_new())) {
		free(d);
		return -ENOMEM;
	}
	iod_strlcpy(d->dir, dir, sizeof(d->dir));
	d->seg_bytes = segment_bytes;
	d->first = 1;
	*out = d;
	return 0;
}

void iod_simdisk_free(struct iod_simdisk *d)
{
	if (!d)
		return;
	iod_wal_close(d->w);
	iod_walfs_mem_free(d->fs);
	free(d->terms);
	free(d);
}

/* Open the log (wal.c's verdict); on success d knows what it holds. */
static int disk_open(struct iod_simdisk *d, struct iod_simdisk_verdict *v, struct iod_err *e)
{
	struct iod_wal_load ld;
	int rv = iod_wal_open_fs(&d->w, d->fs, d->dir, &ld, e);
	if (v) {
		memset(v, 0, sizeof(*v));
		v->rc = rv;
		if (rv)
			iod_strlcpy(v->why, e->msg, sizeof(v->why));
	}
	if (rv) {
		d->w = NULL;
		return rv;
	}
	iod_wal_set_segment_bytes(d->w, d->seg_bytes);
	d->term = ld.term;
	d->vote = ld.vote;
	d->snap_index = ld.snapshot ? ld.snapshot->index : 0;
	d->n = 0;
	d->first = ld.start_index ? ld.start_index : 1;
	for (size_t i = 0; i < ld.n && !rv; i++)
		rv = terms_push(d, ld.entries[i].term);
	if (v) {
		v->entries = ld.n;
		v->torn_bytes = ld.torn_bytes;
		v->last_index = ld.n ? last_index(d) : d->snap_index;
	}
	iod_wal_load_free(&ld);
	return rv;
}

int iod_simdisk_open(struct iod_simdisk *d, struct iod_err *e)
{
	return disk_open(d, NULL, e);
}

/* ---- the mirror ---------------------------------------------------------------- */

static int put_snapshot(struct iod_simdisk *d, const struct raft *r, unsigned trailing)
{
	struct raft_snapshot s = {0};
	struct raft_buffer buf = {.base = (void *)marker, .len = sizeof(marker)};
	s.index = r->log.snapshot.last_index;
	s.term = r->log.snapshot.last_term;
	s.configuration = r->configuration;
	s.configuration_index = r->configuration_index;
	if (!s.configuration_index || s.configuration_index > s.index)
		s.configuration_index = 1;
	s.bufs = &buf;
	s.n_bufs = 1;
	int rv = iod_wal_snapshot_put(d->w, trailing, &s);
	if (rv)
		return rv;
	d->snap_index = s.index;
	if (!trailing) {
		d->n = 0;
		d->first = s.index + 1;
	}
	return 0;
}

/* Append raft's entries from..to (inclusive) in one write. */
static int append_range(struct iod_simdisk *d, const struct raft *r, uint64_t from, uint64_t to)
{
	struct raft_entry es[64];
	int rv = 0;
	while (from <= to && !rv) {
		unsigned k = 0;
		for (; k < 64 && from + k <= to; k++)
			es[k] = *r_entry(r, from + k);
		rv = iod_wal_append(d->w, es, k);
		for (unsigned i = 0; i < k && !rv; i++)
			rv = terms_push(d, es[i].term);
		from += k;
	}
	return rv;
}

int iod_simdisk_sync(struct iod_simdisk *d, const struct raft *r)
{
	int rv;
	if (!d->w)
		return 0; /* down */
	uint64_t rl = r_first(r) + r_count(r) - 1, rsnap = r->log.snapshot.last_index;
	if (d->term != r->current_term || d->vote != r->voted_for) {
		if ((rv = iod_wal_meta_set(d->w, r->current_term, r->voted_for)))
			return rv;
		d->term = r->current_term;
		d->vote = r->voted_for;
	}
	if (rsnap > d->snap_index) {
		/* compaction if the log holds the snapshot's last entry, else an
		 * installed snapshot: the whole log is replaced */
		bool held = term_at(d, rsnap) == r->log.snapshot.last_term;
		if ((rv = put_snapshot(d, r, held ? r->snapshot.trailing : 0)))
			return rv;
		if (held && rsnap > r->snapshot.trailing)
			terms_drop_below(d, rsnap - r->snapshot.trailing + 1);
	}
	/* the last index where the two logs agree (Log Matching: the same
	 * term at an index means the same entries up to it) */
	uint64_t dl = d->n ? last_index(d) : d->first - 1;
	uint64_t lo = IOD_MAX(d->first, r_first(r)), i = IOD_MIN(dl, rl);
	while (i >= lo && term_at(d, i) != r_term_at(r, i))
		i--;
	if (i < lo) {
		if (d->first >= r_first(r)) {
			i = d->first - 1; /* they agree up to the log's start */
		} else {
			/* they part before raft's memory: replace from its snapshot */
			if ((rv = put_snapshot(d, r, 0)))
				return rv;
			i = dl = rsnap;
		}
	}
	if (dl > i) {
		if ((rv = iod_wal_truncate(d->w, i + 1)))
			return rv;
		d->n = (size_t)(i + 1 - d->first);
	}
	if (rl > i)
		return append_range(d, r, i + 1, rl);
	return 0;
}

/* ---- faults ----------------------------------------------------------------------- */

const char *iod_simdisk_damage_name(enum iod_simdisk_damage k)
{
	static const char *const names[] = {"flip", "torn", "zero", "missing", "garbage"};
	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

int iod_simdisk_damage_parse(const char *s, enum iod_simdisk_damage *out)
{
	for (int k = IOD_SIMDISK_FLIP; k <= IOD_SIMDISK_GARBAGE; k++)
		if (!strcmp(s, iod_simdisk_damage_name((enum iod_simdisk_damage)k))) {
			*out = (enum iod_simdisk_damage)k;
			return 0;
		}
	return -EINVAL;
}

/* The live segments' file names, oldest first: the first and the open one. */
static int segments(struct iod_simdisk *d, char *first, char *last, size_t cap)
{
	char **names = NULL;
	size_t n = 0;
	uint64_t lo = UINT64_MAX, hi = 0;
	int rv = iod_walfs_mem_names(d->fs, d->dir, &names, &n);
	if (rv)
		return rv;
	for (size_t i = 0; i < n; i++) {
		unsigned long long v;
		char tail;
		if (sscanf(names[i], "seg-%llu%c", &v, &tail) != 1)
			continue;
		lo = IOD_MIN(lo, (uint64_t)v);
		hi = IOD_MAX(hi, (uint64_t)v);
	}
	iod_walfs_names_free(names, n);
	if (!hi)
		return -ENOENT;
	snprintf(first, cap, "%s/seg-%020llu", d->dir, (unsigned long long)lo);
	snprintf(last, cap, "%s/seg-%020llu", d->dir, (unsigned long long)hi);
	return 0;
}

int iod_simdisk_damage(struct iod_simdisk *d, enum iod_simdisk_damage kind,
                       struct iod_simdisk_verdict *v, struct iod_err *e)
{
	char first[IOD_NAME_MAX + 64], last[IOD_NAME_MAX + 64];
	unsigned char junk[100];
	uint64_t size = 0;
	int rv;

	/* the server stops (a crash: the log's handles go, nothing is written) */
	iod_walfs_mem_crash(d->fs);
	iod_wal_close(d->w);
	d->w = NULL;
	if ((rv = segments(d, first, last, sizeof(first))))
		return iod_err_set(e, rv, "%s: no segment to damage", d->dir);
	switch (kind) {
	case IOD_SIMDISK_FLIP:
		/* a byte in the first record's data of the oldest live segment */
		if ((rv = iod_walfs_mem_size(d->fs, first, &size)) == 0)
			rv = iod_walfs_mem_fault(d->fs, first, IOD_WALFS_FLIP,
			                         IOD_MIN(size - 1, (uint64_t)90), NULL, 0);
		break;
	case IOD_SIMDISK_TORN:
		/* the crash cut an append after 24 bytes of its first header:
		 * raft was never told it was stored */
		memset(junk, 0, sizeof(junk));
		junk[0] = 0x52, junk[1] = 0x45, junk[2] = 0x43, junk[3] = 0x31;
		rv = iod_walfs_mem_fault(d->fs, last, IOD_WALFS_APPEND, 0, junk, 24);
		break;
	case IOD_SIMDISK_ZERO:
		rv = iod_walfs_mem_fault(d->fs, first, IOD_WALFS_ZERO, 0, NULL, 0);
		break;
	case IOD_SIMDISK_MISSING:
		rv = iod_walfs_mem_fault(d->fs, first, IOD_WALFS_DELETE, 0, NULL, 0);
		break;
	case IOD_SIMDISK_GARBAGE:
		for (unsigned i = 0; i < sizeof(junk); i++)
			junk[i] = (unsigned char)(i * 37 + 11);
		rv = iod_walfs_mem_fault(d->fs, last, IOD_WALFS_APPEND, 0, junk, sizeof(junk));
		break;
	default: rv = -EINVAL;
	}
	if (rv)
		return iod_err_set(e, rv, "%s: cannot damage the log", d->dir);
	/* the restart: wal.c decides */
	struct iod_err oe = {0};
	disk_open(d, v, &oe);
	return 0;
}

bool iod_simdisk_up(const struct iod_simdisk *d)
{
	return d->w != NULL;
}

uint64_t iod_simdisk_last_index(const struct iod_simdisk *d)
{
	return d->n ? last_index(d) : d->snap_index;
}

/* ---- recover from peers ------------------------------------------------------------ */

int iod_simdisk_recover(struct iod_simdisk *d, const struct raft *peer, uint64_t self_id,
                        struct iod_err *e)
{
	char **names = NULL;
	size_t n = 0;
	int rv;

	iod_wal_close(d->w);
	d->w = NULL;
	/* the damaged files are moved aside (here: dropped) */
	if ((rv = iod_walfs_mem_names(d->fs, d->dir, &names, &n)))
		return iod_err_set(e, rv, "%s: cannot list", d->dir);
	for (size_t i = 0; i < n; i++) {
		char p[IOD_NAME_MAX + 300];
		snprintf(p, sizeof(p), "%s/%s", d->dir, names[i]);
		iod_walfs_mem_fault(d->fs, p, IOD_WALFS_DELETE, 0, NULL, 0);
	}
	iod_walfs_names_free(names, n);
	uint64_t old_term = d->term;
	d->term = d->vote = d->snap_index = 0;
	d->n = 0;
	d->first = 1;
	if ((rv = disk_open(d, NULL, e)))
		return rv;
	/* recover.c: a term above every term it or the peer may have voted
	 * in, with its vote for itself; then the peer's stored log */
	uint64_t term = IOD_MAX(peer->current_term, old_term) + 1;
	if ((rv = iod_wal_meta_set(d->w, term, self_id)))
		goto io;
	d->term = term;
	d->vote = self_id;
	uint64_t from = r_first(peer), to = IOD_MIN(peer->last_stored, from + r_count(peer) - 1);
	if (peer->log.snapshot.last_index) {
		if ((rv = put_snapshot(d, peer, 0)))
			goto io;
		from = peer->log.snapshot.last_index + 1;
	} else {
		from = 1;
	}
	if (to >= from && (rv = append_range(d, peer, from, to)))
		goto io;
	return 0;
io:
	return iod_err_set(e, rv, "%s: rebuilding the log: %s", d->dir, strerror(-rv));
}

/* ---- the check --------------------------------------------------------------------- */

int iod_simdisk_holds(struct iod_simdisk *d, const uint64_t *index, size_t n, bool *held,
                      struct iod_err *e)
{
	struct iod_wal *w;
	struct iod_wal_load ld;
	if (d->w) {
		iod_wal_close(d->w);
		d->w = NULL;
	}
	int rv = iod_wal_open_fs(&w, d->fs, d->dir, &ld, e);
	if (rv)
		return rv;
	uint64_t snap = ld.snapshot ? ld.snapshot->index : 0;
	for (size_t i = 0; i < n; i++)
		held[i] = index[i] <= snap ||
		          (index[i] >= ld.start_index && index[i] < ld.start_index + ld.n);
	iod_wal_load_free(&ld);
	iod_wal_close(w);
	return disk_open(d, NULL, e);
}
