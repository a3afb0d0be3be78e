/*
 * wal.c: the Raft log on disk, in iod's own checksummed format.
 *
 * Why it exists: libraft 0.15's libuv backend (archived upstream) crashed
 * on a truncated open segment and, on a closed segment with one flipped
 * byte, renamed it aside and started with an empty log, which can vote and
 * so lose acknowledged writes. This store detects every kind of damage and
 * either repairs what is provably a torn write or refuses to start, naming
 * the file, the offset and what is wrong. It never sets data aside.
 *
 * Layout of a data directory:
 *   meta          64 bytes, rewritten in place with one fdatasync: term,
 *                 vote, and the live segment range [seg_first, seg_next).
 *   seg-N         segment N: a 40-byte header (magic, seq, first index,
 *                 CRC-32C) then records: a 40-byte header (index, term,
 *                 type, length, data CRC-32C, header CRC-32C) and the data
 *                 padded with zeros to 8 bytes. The last live segment is
 *                 the open one; appends are written and fdatasync'd before
 *                 raft is told they are stored. With preallocation (rio.c
 *                 turns it on) the open segment is fallocate'd to the
 *                 segment size when it is created and appends overwrite its
 *                 zeros, so an fdatasync does not change the file's size
 *                 (etcd preallocates its WAL files for the same reason);
 *                 its end is the first invalid record followed only by
 *                 zeros. A segment is cut to its last record before the
 *                 next one is created: closed segments have no tail.
 *   snap-N        the snapshot at index N: header with CRC, configuration,
 *                 state, body CRC. Written as a .tmp, fsync'd, renamed.
 *
 * What is repaired: only the tail of the open segment after the last valid
 * record, when it looks like an interrupted write (a partial header, a
 * record longer than the file, a zero-filled 512-byte block in the record)
 * and no valid record follows it. Only zeros after the last valid record
 * are no damage: that is the end (a preallocated segment). Bytes in such a
 * zero tail are judged as if the file ended after the last non-zero one.
 * Everything else (a bad checksum elsewhere, trailing bytes or zeros in a
 * closed segment, a missing, empty or misnumbered segment, a segment
 * starting at index 0, a gap between segments or with the snapshot, a
 * damaged meta or snapshot) is refused.
 *
 * Threads: iod_wal_open runs before the loop; append, truncate and
 * snapshot_put run one at a time on a worker thread (rio.c serialises
 * them); meta_set runs on the loop thread and snapshot_get on another
 * worker, so the meta record and the snapshot file name are under a mutex.
 * Nothing here touches raft's in-memory state.
 */
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <raft.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define META_MAGIC 0x314154454d444f49ull /* "IODMETA1" */
#define SEG_MAGIC 0x3130474553444f49ull  /* "IODSEG01" */
#define SNAP_MAGIC 0x31504e53444f49ull   /* "IODSNP1" */
#define REC_MAGIC 0x31434552u            /* "REC1" */
#define WAL_VERSION 1
#define META_BYTES 64
#define SEG_HDR_BYTES 40
#define REC_HDR_BYTES 40
#define SNAP_HDR_BYTES 64
#define TORN_BLOCK 512

struct wal_seg {
	uint64_t seq;         /* file seg-<seq> */
	uint64_t first_index; /* index of its first record */
	uint64_t n;           /* records in it */
};

struct iod_wal {
	char dir[IOD_PATH_MAX];  /* the data directory */
	struct iod_walfs *fs;    /* its file system (walfs.c: POSIX or memory) */
	int dir_fd;              /* for fsync after rename/unlink */
	int meta_fd;             /* meta, -1 until first written */
	pthread_mutex_t mu;      /* meta record, snapshot file name */
	uint64_t term;           /* durable current term */
	uint64_t vote;           /* durable vote in that term */
	uint64_t seg_first;      /* live segments are [seg_first, seg_next) */
	uint64_t seg_next;       /* seq of the next segment created */
	struct wal_seg *segs;    /* live segments, in order */
	size_t segs_n, segs_cap; /* used, allocated */
	int open_fd;             /* the last live segment, -1 = none open */
	uint64_t open_size;      /* its bytes: the end of its last record */
	uint64_t open_alloc;     /* the file's size (past open_size: zeros) */
	bool prealloc;           /* preallocate the open segment */
	uint64_t next_index;     /* index the next appended entry gets */
	uint64_t snap_index;     /* newest snapshot on disk, 0 = none */
	uint64_t segment_bytes;  /* roll over to a new segment past this */
	uint64_t torn_bytes;     /* iod_wal_open dropped a torn tail of this many bytes */
};

/* ---- bytes -------------------------------------------------------------- */

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/* CRC of a header of len bytes whose CRC lives at bytes [12, 16). */
static uint32_t hdr_crc(const unsigned char *p, size_t len)
{
	uint32_t c = iod_crc32c(0, p, 12);
	return iod_crc32c(c, p + 16, len - 16);
}

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* ---- configuration encoding (snapshots and the transport) ---------------- */

size_t iod_raft_conf_size(const struct raft_configuration *c)
{
	size_t n = 4;
	for (unsigned i = 0; i < c->n; i++)
		n += 12 + strlen(c->servers[i].address);
	return n;
}

void iod_raft_conf_encode(const struct raft_configuration *c, unsigned char *p)
{
	put32(p, c->n);
	p += 4;
	for (unsigned i = 0; i < c->n; i++) {
		size_t l = strlen(c->servers[i].address);
		put64(p, c->servers[i].id);
		p[8] = (unsigned char)c->servers[i].role;
		p[9] = 0;
		put16(p + 10, (uint16_t)l);
		memcpy(p + 12, c->servers[i].address, l);
		p += 12 + l;
	}
}

int iod_raft_conf_decode(const unsigned char *p, size_t len, struct raft_configuration *c)
{
	const unsigned char *end = p + len;
	char addr[IOD_ADDR_MAX + 1];

	raft_configuration_init(c);
	if (len < 4)
		return -EINVAL;
	uint32_t n = get32(p);
	p += 4;
	if (n > 64)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (end - p < 12)
			goto bad;
		uint64_t id = get64(p);
		int role = p[8];
		size_t l = get16(p + 10);
		if (l > IOD_ADDR_MAX || (size_t)(end - p - 12) < l || !id || role > RAFT_SPARE)
			goto bad;
		memcpy(addr, p + 12, l);
		addr[l] = 0;
		if (memchr(addr, 0, l) || raft_configuration_add(c, id, addr, role))
			goto bad;
		p += 12 + l;
	}
	if (p != end)
		goto bad;
	return 0;
bad:
	raft_configuration_close(c);
	raft_configuration_init(c);
	return -EINVAL;
}

/* ---- files -------------------------------------------------------------- */

static int write_all(struct iod_wal *w, int fd, const void *buf, size_t len, uint64_t off)
{
	return w->fs->ops->write(w->fs, fd, buf, len, off);
}

/* Read a whole file (up to max bytes) into a malloc'd buffer. */
static int read_file(struct iod_wal *w, const char *name, unsigned char **out, size_t *len,
                     size_t max)
{
	const struct iod_walfs_ops *o = w->fs->ops;
	uint64_t size = 0;
	int fd = o->open(w->fs, w->dir_fd, name, IOD_WALFS_READ);
	if (fd < 0)
		return fd;
	int rv = o->size(w->fs, fd, &size);
	if (rv) {
		o->close(w->fs, fd);
		return rv;
	}
	if (size > max) {
		o->close(w->fs, fd);
		return -EFBIG;
	}
	size_t n = (size_t)size, got = 0;
	unsigned char *b = malloc(n ? n : 1);
	if (!b) {
		o->close(w->fs, fd);
		return -ENOMEM;
	}
	while (got < n) {
		ssize_t k = o->read(w->fs, fd, b + got, n - got, got);
		if (k <= 0) {
			rv = k < 0 ? (int)k : -EIO;
			free(b);
			o->close(w->fs, fd);
			return rv;
		}
		got += (size_t)k;
	}
	o->close(w->fs, fd);
	*out = b;
	*len = n;
	return 0;
}

/* Write name atomically: name.tmp, fsync, rename, fsync the directory.
 * alloc > 0: the file is first allocated to alloc bytes (zeros after). */
static int write_atomic(struct iod_wal *w, const char *name, const void *a, size_t alen,
                        const void *b, size_t blen, const void *c, size_t clen, uint64_t alloc)
{
	const struct iod_walfs_ops *o = w->fs->ops;
	char tmp[128];
	int fd, rv;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = o->open(w->fs, w->dir_fd, tmp, IOD_WALFS_CREATE);
	if (fd < 0)
		return fd;
	rv = write_all(w, fd, a, alen, 0);
	if (!rv && blen)
		rv = write_all(w, fd, b, blen, alen);
	if (!rv && clen)
		rv = write_all(w, fd, c, clen, alen + blen);
	if (!rv && alloc)
		rv = o->allocate(w->fs, fd, alloc);
	if (!rv)
		rv = o->sync(w->fs, fd, false);
	o->close(w->fs, fd);
	if (!rv)
		rv = o->rename(w->fs, w->dir_fd, tmp, name);
	if (!rv)
		rv = o->sync(w->fs, w->dir_fd, false);
	if (rv)
		o->unlink(w->fs, w->dir_fd, tmp);
	return rv;
}

/* ---- meta --------------------------------------------------------------- */

static void meta_encode(unsigned char *p, uint64_t term, uint64_t vote, uint64_t first,
                        uint64_t next)
{
	memset(p, 0, META_BYTES);
	put64(p, META_MAGIC);
	put32(p + 8, WAL_VERSION);
	put64(p + 16, term);
	put64(p + 24, vote);
	put64(p + 32, first);
	put64(p + 40, next);
	put32(p + 12, hdr_crc(p, META_BYTES));
}

/* Store the meta record (caller holds mu). One in-place write of one
 * 512-byte-aligned block and an fdatasync, like raft_uv's metadata: on the
 * loop for term and vote, as raft requires them durable before it acts. */
static int meta_store(struct iod_wal *w, uint64_t term, uint64_t vote, uint64_t first,
                      uint64_t next)
{
	unsigned char rec[META_BYTES];
	int rv;

	meta_encode(rec, term, vote, first, next);
	if (w->meta_fd < 0) {
		rv = write_atomic(w, "meta", rec, sizeof(rec), NULL, 0, NULL, 0, 0);
		if (rv)
			return rv;
		w->meta_fd = w->fs->ops->open(w->fs, w->dir_fd, "meta", IOD_WALFS_WRITE);
		if (w->meta_fd < 0) {
			rv = w->meta_fd;
			w->meta_fd = -1;
			return rv;
		}
	} else {
		if ((rv = write_all(w, w->meta_fd, rec, sizeof(rec), 0)))
			return rv;
		if ((rv = w->fs->ops->sync(w->fs, w->meta_fd, true)))
			return rv;
	}
	w->term = term;
	w->vote = vote;
	w->seg_first = first;
	w->seg_next = next;
	return 0;
}

int iod_wal_meta_set(struct iod_wal *w, uint64_t term, uint64_t vote)
{
	pthread_mutex_lock(&w->mu);
	int rv = meta_store(w, term, vote, w->seg_first, w->seg_next);
	pthread_mutex_unlock(&w->mu);
	return rv;
}

static int meta_ranges(struct iod_wal *w, uint64_t first, uint64_t next)
{
	pthread_mutex_lock(&w->mu);
	int rv = meta_store(w, w->term, w->vote, first, next);
	pthread_mutex_unlock(&w->mu);
	return rv;
}

void iod_wal_meta(const struct iod_wal *w, uint64_t *term, uint64_t *vote)
{
	*term = w->term;
	*vote = w->vote;
}

/* ---- records ------------------------------------------------------------ */

/* Why the record at off is not valid, or NULL. *rec_len is its length. */
static const char *rec_check(const unsigned char *b, size_t len, size_t off, uint64_t index,
                             size_t *rec_len)
{
	if (len - off < REC_HDR_BYTES)
		return "partial record header";
	const unsigned char *h = b + off;
	if (get32(h) != REC_MAGIC)
		return "bad record magic";
	if (get32(h + 4) != iod_crc32c(0, h + 8, REC_HDR_BYTES - 8))
		return "record header checksum mismatch";
	if (get64(h + 8) != index)
		return "record out of sequence (wrong index)";
	uint16_t type = get16(h + 24);
	if (type < RAFT_COMMAND || type > RAFT_CHANGE || get16(h + 26) || get32(h + 36))
		return "bad record type or reserved bytes";
	size_t dlen = get32(h + 28);
	if (dlen > IOD_RAFT_ENTRY_MAX)
		return "record length over the entry limit";
	if (len - off - REC_HDR_BYTES < pad8(dlen))
		return "record data runs past the end of the file";
	const unsigned char *d = h + REC_HDR_BYTES;
	if (get32(h + 32) != iod_crc32c(0, d, dlen))
		return "record data checksum mismatch";
	for (size_t i = dlen; i < pad8(dlen); i++)
		if (d[i])
			return "non-zero record padding";
	*rec_len = REC_HDR_BYTES + pad8(dlen);
	return NULL;
}

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* One past the last non-zero byte of b[off, len), or off when all are zero. */
static size_t nonzero_end(const unsigned char *b, size_t off, size_t len)
{
	while (len > off && !b[len - 1])
		len--;
	return len;
}

/*
 * Is the damage at off an interrupted write of the last append? Such a
 * write leaves a prefix of the records it carried (possibly with whole
 * blocks still zero), never a valid record after the damage.
 */
static bool torn_tail(const unsigned char *b, size_t len, size_t off)
{
	size_t rest = len - off;
	size_t span = rest;

	for (size_t o = off + 8; o + REC_HDR_BYTES <= len; o += 8) {
		const unsigned char *h = b + o;
		if (get32(h) == REC_MAGIC &&
		    get32(h + 4) == iod_crc32c(0, h + 8, REC_HDR_BYTES - 8))
			return false; /* a valid header after the damage: not a torn tail */
	}
	if (rest < REC_HDR_BYTES || all_zero(b + off, rest))
		return true;
	const unsigned char *h = b + off;
	if (get32(h) == REC_MAGIC && get32(h + 4) == iod_crc32c(0, h + 8, REC_HDR_BYTES - 8)) {
		size_t need = REC_HDR_BYTES + pad8(get32(h + 28));
		if (need > rest)
			return true; /* the record was being written when it stopped */
		span = need;
	}
	/* a block of the record that never reached the disk */
	for (size_t o = (off + TORN_BLOCK - 1) / TORN_BLOCK * TORN_BLOCK; o < off + span;
	     o += TORN_BLOCK) {
		size_t n = IOD_MIN((size_t)TORN_BLOCK, len - o);
		if (all_zero(b + o, n))
			return true;
	}
	return false;
}

/* ---- open --------------------------------------------------------------- */

static int seg_push(struct iod_wal *w, uint64_t seq, uint64_t first)
{
	if (w->segs_n == w->segs_cap) {
		size_t cap = w->segs_cap ? 2 * w->segs_cap : 16;
		struct wal_seg *s = realloc(w->segs, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		w->segs = s;
		w->segs_cap = cap;
	}
	w->segs[w->segs_n++] = (struct wal_seg){seq, first, 0};
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Entries loaded, grown as segments are read. */
struct loaded {
	struct raft_entry *e; /* raft_malloc'd array */
	size_t n, cap;        /* used, allocated */
};

static int loaded_push(struct loaded *l, uint64_t term, uint16_t type, const void *d, size_t len)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		struct raft_entry *e = raft_realloc(l->e, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		l->e = e;
		l->cap = cap;
	}
	void *base = raft_malloc(len ? len : 1);
	if (!base)
		return -ENOMEM;
	memcpy(base, d, len);
	l->e[l->n++] = (struct raft_entry){
	    .term = term, .type = type, .buf = {.base = base, .len = len}, .batch = NULL};
	return 0;
}

static void loaded_free(struct loaded *l)
{
	for (size_t i = 0; i < l->n; i++)
		raft_free(l->e[i].buf.base);
	raft_free(l->e);
	l->e = NULL;
	l->n = l->cap = 0;
}

/* Parse and check snapshot bytes; fill snap (configuration + one buffer). */
static const char *snap_parse(const unsigned char *b, size_t len, uint64_t want_index,
                              struct raft_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	if (len < SNAP_HDR_BYTES)
		return "shorter than its header";
	if (get64(b) != SNAP_MAGIC || get32(b + 8) != WAL_VERSION)
		return "bad magic or version";
	if (get32(b + 12) != hdr_crc(b, SNAP_HDR_BYTES))
		return "header checksum mismatch";
	uint64_t conf_len = get64(b + 40), data_len = get64(b + 48);
	if (conf_len > len || data_len > len || SNAP_HDR_BYTES + conf_len + data_len != len)
		return "length does not match the file size (truncated or trailing bytes)";
	if (get32(b + 56) != iod_crc32c(0, b + SNAP_HDR_BYTES, (size_t)(conf_len + data_len)))
		return "body checksum mismatch";
	s->index = get64(b + 16);
	s->term = get64(b + 24);
	s->configuration_index = get64(b + 32);
	if (want_index && s->index != want_index)
		return "index does not match the file name";
	if (iod_raft_conf_decode(b + SNAP_HDR_BYTES, (size_t)conf_len, &s->configuration))
		return "bad configuration";
	s->bufs = raft_malloc(sizeof(*s->bufs));
	void *data = raft_malloc(data_len ? (size_t)data_len : 1);
	if (!s->bufs || !data) {
		raft_free(s->bufs);
		raft_free(data);
		raft_configuration_close(&s->configuration);
		return "out of memory";
	}
	memcpy(data, b + SNAP_HDR_BYTES + conf_len, (size_t)data_len);
	s->bufs[0] = (struct raft_buffer){.base = data, .len = (size_t)data_len};
	s->n_bufs = 1;
	return NULL;
}

void iod_wal_load_free(struct iod_wal_load *ld)
{
	for (size_t i = 0; i < ld->n; i++)
		raft_free(ld->entries[i].buf.base);
	raft_free(ld->entries);
	iod_wal_snapshot_free(ld->snapshot);
	memset(ld, 0, sizeof(*ld));
}

void iod_wal_snapshot_free(struct raft_snapshot *s)
{
	if (!s)
		return;
	raft_configuration_close(&s->configuration);
	for (unsigned i = 0; i < s->n_bufs; i++)
		raft_free(s->bufs[i].base);
	raft_free(s->bufs);
	raft_free(s);
}

static int load_snapshot(struct iod_wal *w, uint64_t index, struct raft_snapshot **out,
                         struct iod_err *e)
{
	char name[64];
	unsigned char *b = NULL;
	size_t len = 0;
	int rv;

	snprintf(name, sizeof(name), "snap-%020llu", (unsigned long long)index);
	rv = read_file(w, name, &b, &len, (size_t)IOD_RAFT_SNAPSHOT_MAX + 65536);
	if (rv)
		return iod_err_set(e, rv, "%s/%s: cannot read: %s", w->dir, name, strerror(-rv));
	struct raft_snapshot *s = raft_malloc(sizeof(*s));
	const char *why = s ? snap_parse(b, len, index, s) : "out of memory";
	free(b);
	if (why) {
		raft_free(s);
		return iod_err_set(e, -EUCLEAN, "%s/%s offset 0: snapshot damaged: %s", w->dir,
		                   name, why);
	}
	*out = s;
	return 0;
}

/* Read and check one live segment; entries at index >= keep_from go to l. */
static int load_segment(struct iod_wal *w, struct wal_seg *sg, bool last, uint64_t expect_first,
                        struct loaded *l, uint64_t keep_from, struct iod_err *e)
{
	char name[64];
	unsigned char *b = NULL;
	size_t len = 0, off;
	int rv;

	snprintf(name, sizeof(name), "seg-%020llu", (unsigned long long)sg->seq);
	rv = read_file(w, name, &b, &len, (size_t)1 << 34);
	if (rv)
		return iod_err_set(e, rv, "%s/%s: cannot read: %s", w->dir, name, strerror(-rv));
	if (len < SEG_HDR_BYTES || get64(b) != SEG_MAGIC || get32(b + 8) != WAL_VERSION ||
	    get32(b + 12) != hdr_crc(b, SEG_HDR_BYTES) || get64(b + 16) != sg->seq) {
		const char *why =
		    len == 0                ? "empty file (no segment header)"
		    : len < SEG_HDR_BYTES   ? "shorter than a segment header"
		    : get64(b) != SEG_MAGIC ? "bad segment magic"
		    : get64(b + 16) != sg->seq && get32(b + 12) == hdr_crc(b, SEG_HDR_BYTES)
		        ? "segment number does not match the file name"
		        : "segment header checksum mismatch";
		free(b);
		return iod_err_set(e, -EUCLEAN, "%s/%s offset 0: %s", w->dir, name, why);
	}
	sg->first_index = get64(b + 24);
	if (sg->first_index == 0) {
		free(b);
		return iod_err_set(e, -EUCLEAN,
		                   "%s/%s offset 24: segment starts at index 0 (Raft's first is 1)",
		                   w->dir, name);
	}
	if (expect_first && sg->first_index != expect_first) {
		free(b);
		return iod_err_set(
		    e, -EUCLEAN,
		    "%s/%s offset 24: segment starts at index %llu, but the previous "
		    "one ends at %llu (entries missing)",
		    w->dir, name, (unsigned long long)sg->first_index,
		    (unsigned long long)expect_first - 1);
	}
	off = SEG_HDR_BYTES;
	sg->n = 0;
	while (off < len) {
		size_t rl = 0;
		uint64_t index = sg->first_index + sg->n;
		const char *why = rec_check(b, len, off, index, &rl);
		/* The open segment ends at its first invalid record. Only zeros
		 * after it: the end (the preallocated rest of the segment, or a
		 * file extended whose data never came). Bytes in that tail are
		 * judged as if the file ended after the last of them (rounded
		 * to a record's alignment), so a preallocated segment gets the
		 * verdict the same bytes in a file without the zeros get: a torn
		 * last append is repaired, anything else refused. */
		size_t tail_end = last && why ? nonzero_end(b, off, len) : len;
		if (why && last && tail_end == off)
			break;
		if (why) {
			size_t judged = IOD_MIN(len, pad8(tail_end));
			if (last && torn_tail(b, judged, off)) {
				IOD_WARN(
				    "raft",
				    "%s/%s offset %zu: %s: an interrupted write after the last "
				    "stored entry (%llu); dropping its %zu bytes",
				    w->dir, name, off, why, (unsigned long long)index - 1,
				    judged - off);
				const struct iod_walfs_ops *o = w->fs->ops;
				int fd = o->open(w->fs, w->dir_fd, name, IOD_WALFS_WRITE);
				rv = fd < 0 ? fd : o->truncate(w->fs, fd, off);
				if (!rv)
					rv = o->sync(w->fs, fd, false);
				if (fd >= 0)
					o->close(w->fs, fd);
				if (rv) {
					free(b);
					return iod_err_set(e, rv,
					                   "%s/%s: repairing the torn tail: %s",
					                   w->dir, name, strerror(-rv));
				}
				w->torn_bytes = judged - off; /* not the zeros after them */
				len = off;
				break;
			}
			free(b);
			return iod_err_set(
			    e, -EUCLEAN, "%s/%s offset %zu: entry %llu: %s%s", w->dir, name, off,
			    (unsigned long long)index, why,
			    last ? " (not an interrupted write: valid data follows or "
			           "the record is complete)"
			         : " (closed segment)");
		}
		const unsigned char *h = b + off;
		uint64_t term = get64(h + 16);
		if (term > w->term || (l->n && term < l->e[l->n - 1].term)) {
			free(b);
			return iod_err_set(
			    e, -EUCLEAN, "%s/%s offset %zu: entry %llu has term %llu (%s)", w->dir,
			    name, off, (unsigned long long)index, (unsigned long long)term,
			    term > w->term ? "newer than the stored current term"
			                   : "older than the entry before it");
		}
		if (index >= keep_from &&
		    (rv = loaded_push(l, term, get16(h + 24), h + REC_HDR_BYTES, get32(h + 28)))) {
			free(b);
			return iod_err_set(e, rv, "out of memory loading the log");
		}
		sg->n++;
		off += rl;
	}
	if (last) {
		w->open_fd = w->fs->ops->open(w->fs, w->dir_fd, name, IOD_WALFS_WRITE);
		if (w->open_fd < 0) {
			rv = w->open_fd;
			w->open_fd = -1;
			free(b);
			return iod_err_set(e, rv, "%s/%s: %s", w->dir, name, strerror(-rv));
		}
		w->open_size = off;
		w->open_alloc = len;
	}
	free(b);
	return 0;
}

static bool parse_num(const char *s, const char *prefix, uint64_t *out)
{
	size_t pl = strlen(prefix);
	char *end = NULL;
	if (strncmp(s, prefix, pl) || !s[pl] || s[pl] < '0' || s[pl] > '9')
		return false;
	unsigned long long v = strtoull(s + pl, &end, 10);
	if (*end)
		return false;
	*out = v;
	return true;
}

/* libraft's libuv backend names; a data dir holding them needs migrating. */
static bool legacy_name(const char *s)
{
	return !strcmp(s, "metadata1") || !strcmp(s, "metadata2") || !strncmp(s, "open-", 5) ||
	       !strncmp(s, "snapshot-", 9) ||
	       (s[0] >= '0' && s[0] <= '9' && strchr(s, '-') && strlen(s) == 33);
}

void iod_wal_close(struct iod_wal *w)
{
	if (!w)
		return;
	if (w->open_fd >= 0)
		w->fs->ops->close(w->fs, w->open_fd);
	if (w->meta_fd >= 0)
		w->fs->ops->close(w->fs, w->meta_fd);
	if (w->dir_fd >= 0)
		w->fs->ops->close(w->fs, w->dir_fd);
	pthread_mutex_destroy(&w->mu);
	free(w->segs);
	free(w);
}

int iod_wal_open(struct iod_wal **out, const char *dir, struct iod_wal_load *ld, struct iod_err *e)
{
	return iod_wal_open_fs(out, iod_walfs_posix(), dir, ld, e);
}

int iod_wal_open_fs(struct iod_wal **out, struct iod_walfs *fs, const char *dir,
                    struct iod_wal_load *ld, struct iod_err *e)
{
	struct iod_wal *w = calloc(1, sizeof(*w));
	uint64_t *segs = NULL, *snaps = NULL;
	size_t segs_n = 0, snaps_n = 0, cap_g = 0, cap_n = 0;
	struct loaded l = {0};
	struct raft_snapshot *snap = NULL;
	char **names = NULL;
	size_t names_n = 0;
	bool have_meta = false;
	int rv = 0;

	memset(ld, 0, sizeof(*ld));
	if (!w)
		return iod_err_set(e, -ENOMEM, "out of memory");
	pthread_mutex_init(&w->mu, NULL);
	w->fs = fs;
	w->meta_fd = w->open_fd = w->dir_fd = -1;
	w->segment_bytes = IOD_RAFT_SEGMENT_BYTES;
	if (iod_strlcpy(w->dir, dir, sizeof(w->dir))) {
		rv = iod_err_set(e, -ENAMETOOLONG, "data dir path too long");
		goto fail;
	}
	w->dir_fd = fs->ops->dir_open(fs, dir);
	if (w->dir_fd < 0) {
		rv = iod_err_set(e, w->dir_fd, "%s: %s", dir, strerror(-w->dir_fd));
		w->dir_fd = -1;
		goto fail;
	}
	if ((rv = iod_walfs_list(fs, w->dir_fd, &names, &names_n))) {
		rv = iod_err_set(e, rv, "%s: %s", dir, strerror(-rv));
		goto fail;
	}
	for (size_t ni = 0; ni < names_n; ni++) {
		const char *dn = names[ni];
		uint64_t v;
		size_t nl = strlen(dn);
		if (nl > 4 && !strcmp(dn + nl - 4, ".tmp")) {
			fs->ops->unlink(fs, w->dir_fd, dn); /* never renamed: not durable */
		} else if (!strcmp(dn, "meta")) {
			have_meta = true;
		} else if (parse_num(dn, "seg-", &v)) {
			if (segs_n == cap_g) {
				cap_g = cap_g ? 2 * cap_g : 16;
				uint64_t *p = realloc(segs, cap_g * sizeof(*p));
				if (!p)
					goto nomem;
				segs = p;
			}
			segs[segs_n++] = v;
		} else if (parse_num(dn, "snap-", &v)) {
			if (snaps_n == cap_n) {
				cap_n = cap_n ? 2 * cap_n : 4;
				uint64_t *p = realloc(snaps, cap_n * sizeof(*p));
				if (!p)
					goto nomem;
				snaps = p;
			}
			snaps[snaps_n++] = v;
		} else if (legacy_name(dn)) {
			rv =
			    iod_err_set(e, -EPROTO,
			                "%s/%s: this data directory holds a log in libraft's libuv "
			                "format, which this iod no longer reads; start the server "
			                "with --recover-from-peers to rebuild it from the other "
			                "servers",
			                dir, dn);
			goto fail;
		}
	}
	iod_walfs_names_free(names, names_n);
	names = NULL;
	names_n = 0;
	if (segs_n)
		qsort(segs, segs_n, sizeof(*segs), cmp_u64);
	if (snaps_n)
		qsort(snaps, snaps_n, sizeof(*snaps), cmp_u64);

	/* meta */
	w->seg_first = w->seg_next = 1;
	if (have_meta) {
		unsigned char *b = NULL;
		size_t len = 0;
		if ((rv = read_file(w, "meta", &b, &len, 4096))) {
			rv = iod_err_set(e, rv, "%s/meta: cannot read: %s", dir, strerror(-rv));
			goto fail;
		}
		const char *why = len != META_BYTES                         ? "wrong size"
		                  : get64(b) != META_MAGIC                  ? "bad magic"
		                  : get32(b + 8) != WAL_VERSION             ? "unknown version"
		                  : get32(b + 12) != hdr_crc(b, META_BYTES) ? "checksum mismatch"
		                                                            : NULL;
		if (!why) {
			w->term = get64(b + 16);
			w->vote = get64(b + 24);
			w->seg_first = get64(b + 32);
			w->seg_next = get64(b + 40);
			if (w->seg_first > w->seg_next)
				why = "segment range reversed";
		}
		free(b);
		if (why) {
			rv = iod_err_set(
			    e, -EUCLEAN,
			    "%s/meta offset 0: %s (%zu bytes): term and vote are unknown", dir, why,
			    len);
			goto fail;
		}
		w->meta_fd = fs->ops->open(fs, w->dir_fd, "meta", IOD_WALFS_WRITE);
		if (w->meta_fd < 0) {
			rv = iod_err_set(e, w->meta_fd, "%s/meta: %s", dir, strerror(-w->meta_fd));
			w->meta_fd = -1;
			goto fail;
		}
	} else if (segs_n || snaps_n) {
		rv =
		    iod_err_set(e, -EUCLEAN,
		                "%s/meta is missing but the directory holds %zu segment(s) and %zu "
		                "snapshot(s): term and vote are unknown",
		                dir, segs_n, snaps_n);
		goto fail;
	}

	/* segments outside the live range are leftovers of an interrupted
	 * truncation or compaction (meta, stored first, says they are dead) */
	for (size_t i = 0; i < segs_n; i++) {
		if (segs[i] >= w->seg_first && segs[i] < w->seg_next)
			continue;
		char name[64];
		snprintf(name, sizeof(name), "seg-%020llu", (unsigned long long)segs[i]);
		IOD_INFO("raft", "%s/%s: outside the live range %llu..%llu: removing", dir, name,
		         (unsigned long long)w->seg_first, (unsigned long long)w->seg_next - 1);
		fs->ops->unlink(fs, w->dir_fd, name);
	}
	for (uint64_t q = w->seg_first; q < w->seg_next; q++) {
		bool found = false;
		for (size_t i = 0; i < segs_n && !found; i++)
			found = segs[i] == q;
		if (!found) {
			rv = iod_err_set(e, -EUCLEAN,
			                 "%s/seg-%020llu is missing (meta says segments %llu..%llu "
			                 "hold the log)",
			                 dir, (unsigned long long)q,
			                 (unsigned long long)w->seg_first,
			                 (unsigned long long)w->seg_next - 1);
			goto fail;
		}
		if ((rv = seg_push(w, q, 0)))
			goto nomem;
	}

	/* newest snapshot: it must be intact (an older one is not a fallback:
	 * the log may already be compacted past it) */
	if (snaps_n) {
		w->snap_index = snaps[snaps_n - 1];
		if ((rv = load_snapshot(w, w->snap_index, &snap, e)))
			goto fail;
		if (snap->term > w->term) {
			rv = iod_err_set(
			    e, -EUCLEAN,
			    "%s/snap-%020llu: term %llu is newer than the stored current "
			    "term %llu",
			    dir, (unsigned long long)w->snap_index, (unsigned long long)snap->term,
			    (unsigned long long)w->term);
			goto fail;
		}
	}

	/* the segments: first find where they start, keep what raft needs */
	uint64_t expect = 0, keep_from = 1, snap_i = snap ? snap->index : 0;
	for (size_t i = 0; i < w->segs_n; i++) {
		rv = load_segment(w, &w->segs[i], i + 1 == w->segs_n, expect, &l, keep_from, e);
		if (rv)
			goto fail;
		if (i == 0) {
			uint64_t f = w->segs[0].first_index;
			if (f > snap_i + 1) {
				rv = iod_err_set(
				    e, -EUCLEAN,
				    "%s/seg-%020llu offset 24: the log starts at index %llu "
				    "but %s ends at %llu: entries are missing",
				    dir, (unsigned long long)w->segs[0].seq, (unsigned long long)f,
				    snap ? "the snapshot" : "an empty log",
				    (unsigned long long)snap_i);
				goto fail;
			}
		}
		expect = w->segs[i].first_index + w->segs[i].n;
	}
	ld->start_index = w->segs_n ? w->segs[0].first_index : snap_i + 1;
	w->next_index = ld->start_index + l.n;
	if (snap && l.n && w->next_index - 1 < snap_i) {
		rv = iod_err_set(e, -EUCLEAN,
		                 "%s: the log ends at index %llu, before the snapshot's %llu", dir,
		                 (unsigned long long)w->next_index - 1, (unsigned long long)snap_i);
		goto fail;
	}
	if (!w->segs_n)
		w->next_index = snap_i + 1;
	free(segs);
	free(snaps);
	ld->term = w->term;
	ld->vote = w->vote;
	ld->snapshot = snap;
	ld->entries = l.e;
	ld->n = l.n;
	ld->torn_bytes = w->torn_bytes;
	*out = w;
	return 0;

nomem:
	rv = iod_err_set(e, -ENOMEM, "out of memory reading %s", dir);
fail:
	iod_walfs_names_free(names, names_n);
	free(segs);
	free(snaps);
	loaded_free(&l);
	iod_wal_snapshot_free(snap);
	iod_wal_close(w);
	return rv;
}

void iod_wal_set_segment_bytes(struct iod_wal *w, uint64_t bytes)
{
	w->segment_bytes = bytes;
}

void iod_wal_set_prealloc(struct iod_wal *w, bool on)
{
	w->prealloc = on;
}

bool iod_wal_empty(const struct iod_wal *w)
{
	return w->term == 0 && w->segs_n == 0 && w->snap_index == 0;
}

uint64_t iod_wal_next_index(const struct iod_wal *w)
{
	return w->next_index;
}

/* ---- writes (worker thread) ---------------------------------------------- */

/* Start a new segment whose first record will be next_index. */
static int seg_roll(struct iod_wal *w)
{
	unsigned char h[SEG_HDR_BYTES] = {0};
	char name[64];
	uint64_t seq = w->seg_next;
	uint64_t alloc = w->prealloc ? IOD_MAX(w->segment_bytes, (uint64_t)SEG_HDR_BYTES) : 0;
	int rv, fd;

	/* A closed segment ends at its last record (trailing bytes there are
	 * refused): the preallocated rest goes first, so a crash at any point
	 * of the roll leaves an open segment that may have a zero tail and
	 * closed ones that have none. */
	if (w->open_fd >= 0 && w->open_alloc > w->open_size) {
		if ((rv = w->fs->ops->truncate(w->fs, w->open_fd, w->open_size)) ||
		    (rv = w->fs->ops->sync(w->fs, w->open_fd, false)))
			return rv;
		w->open_alloc = w->open_size;
	}

	put64(h, SEG_MAGIC);
	put32(h + 8, WAL_VERSION);
	put64(h + 16, seq);
	put64(h + 24, w->next_index);
	put32(h + 12, hdr_crc(h, SEG_HDR_BYTES));
	snprintf(name, sizeof(name), "seg-%020llu", (unsigned long long)seq);
	if ((rv = write_atomic(w, name, h, sizeof(h), NULL, 0, NULL, 0, alloc)))
		return rv;
	fd = w->fs->ops->open(w->fs, w->dir_fd, name, IOD_WALFS_WRITE);
	if (fd < 0)
		return fd;
	if ((rv = seg_push(w, seq, w->next_index))) {
		w->fs->ops->close(w->fs, fd);
		return rv;
	}
	/* live only once meta says so; a crash before leaves a removable file */
	if ((rv = meta_ranges(w, w->segs_n == 1 ? seq : w->seg_first, seq + 1))) {
		w->segs_n--;
		w->fs->ops->close(w->fs, fd);
		return rv;
	}
	if (w->open_fd >= 0)
		w->fs->ops->close(w->fs, w->open_fd);
	w->open_fd = fd;
	w->open_size = SEG_HDR_BYTES;
	w->open_alloc = IOD_MAX(alloc, (uint64_t)SEG_HDR_BYTES);
	return 0;
}

/* Preallocate the open segment (opened from disk, or truncated) to the
 * segment size: one fallocate and one fsync, then appends overwrite. */
static int seg_alloc(struct iod_wal *w)
{
	int rv;
	if (!w->prealloc || w->open_alloc >= w->segment_bytes || w->open_size >= w->segment_bytes)
		return 0;
	if ((rv = w->fs->ops->allocate(w->fs, w->open_fd, w->segment_bytes)) ||
	    (rv = w->fs->ops->sync(w->fs, w->open_fd, false)))
		return rv;
	w->open_alloc = w->segment_bytes;
	return 0;
}

int iod_wal_append(struct iod_wal *w, const struct raft_entry *es, unsigned n)
{
	size_t total = 0, off = 0;
	int rv;

	if (!n)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		if (es[i].buf.len > IOD_RAFT_ENTRY_MAX)
			return -E2BIG;
		total += REC_HDR_BYTES + pad8(es[i].buf.len);
	}
	if (w->open_fd < 0 || w->open_size >= w->segment_bytes)
		if ((rv = seg_roll(w)))
			return rv;
	if ((rv = seg_alloc(w)))
		return rv;
	unsigned char *b = calloc(1, total);
	if (!b)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		unsigned char *h = b + off;
		put32(h, REC_MAGIC);
		put64(h + 8, w->next_index + i);
		put64(h + 16, es[i].term);
		put16(h + 24, es[i].type);
		put32(h + 28, (uint32_t)es[i].buf.len);
		if (es[i].buf.len)
			memcpy(h + REC_HDR_BYTES, es[i].buf.base, es[i].buf.len);
		put32(h + 32, iod_crc32c(0, h + REC_HDR_BYTES, es[i].buf.len));
		put32(h + 4, iod_crc32c(0, h + 8, REC_HDR_BYTES - 8));
		off += REC_HDR_BYTES + pad8(es[i].buf.len);
	}
	rv = write_all(w, w->open_fd, b, total, w->open_size);
	free(b);
	if (!rv)
		rv = w->fs->ops->sync(w->fs, w->open_fd, true);
	if (w->open_size + total > w->open_alloc)
		w->open_alloc = w->open_size + total; /* the file grew (or may have) */
	if (rv)
		return rv; /* the tail past open_size is overwritten by the next append */
	w->open_size += total;
	w->next_index += n;
	w->segs[w->segs_n - 1].n += n;
	return 0;
}

/* Byte offset of entry index in segment sg (scanning record headers). */
static int seg_offset(struct iod_wal *w, const struct wal_seg *sg, uint64_t index, uint64_t *off)
{
	char name[64];
	unsigned char h[REC_HDR_BYTES];
	uint64_t o = SEG_HDR_BYTES;
	int fd;

	snprintf(name, sizeof(name), "seg-%020llu", (unsigned long long)sg->seq);
	fd = w->fs->ops->open(w->fs, w->dir_fd, name, IOD_WALFS_READ);
	if (fd < 0)
		return fd;
	for (uint64_t i = sg->first_index; i < index; i++) {
		if (w->fs->ops->read(w->fs, fd, h, sizeof(h), o) != (ssize_t)sizeof(h)) {
			w->fs->ops->close(w->fs, fd);
			return -EIO;
		}
		o += REC_HDR_BYTES + pad8(get32(h + 28));
	}
	w->fs->ops->close(w->fs, fd);
	*off = o;
	return 0;
}

int iod_wal_truncate(struct iod_wal *w, uint64_t index)
{
	size_t k;
	uint64_t off = 0;
	char name[64];
	int rv;

	if (index >= w->next_index)
		return 0;
	for (k = 0; k < w->segs_n; k++)
		if (index >= w->segs[k].first_index &&
		    index < w->segs[k].first_index + w->segs[k].n)
			break;
	if (k == w->segs_n)
		return -EINVAL; /* not in the log: raft never asks this */
	if ((rv = seg_offset(w, &w->segs[k], index, &off)))
		return rv;
	if (k + 1 < w->segs_n) {
		/* meta first: a crash then leaves only dead files behind */
		if ((rv = meta_ranges(w, w->seg_first, w->segs[k].seq + 1)))
			return rv;
		for (size_t j = k + 1; j < w->segs_n; j++) {
			snprintf(name, sizeof(name), "seg-%020llu",
			         (unsigned long long)w->segs[j].seq);
			w->fs->ops->unlink(w->fs, w->dir_fd, name);
		}
		w->fs->ops->sync(w->fs, w->dir_fd, false);
		w->segs_n = k + 1;
		if (w->open_fd >= 0)
			w->fs->ops->close(w->fs, w->open_fd);
		snprintf(name, sizeof(name), "seg-%020llu", (unsigned long long)w->segs[k].seq);
		w->open_fd = w->fs->ops->open(w->fs, w->dir_fd, name, IOD_WALFS_WRITE);
		if (w->open_fd < 0) {
			rv = w->open_fd;
			w->open_fd = -1;
			return rv;
		}
	}
	if ((rv = w->fs->ops->truncate(w->fs, w->open_fd, off)) ||
	    (rv = w->fs->ops->sync(w->fs, w->open_fd, true)))
		return rv;
	w->open_size = off;
	w->open_alloc = off; /* the next append preallocates it again */
	w->segs[k].n = index - w->segs[k].first_index;
	w->next_index = index;
	return 0;
}

int iod_wal_snapshot_put(struct iod_wal *w, unsigned trailing, const struct raft_snapshot *s)
{
	unsigned char h[SNAP_HDR_BYTES] = {0};
	size_t conf_len = iod_raft_conf_size(&s->configuration), data_len = 0;
	char name[64];
	int rv;

	for (unsigned i = 0; i < s->n_bufs; i++)
		data_len += s->bufs[i].len;
	if (data_len > IOD_RAFT_SNAPSHOT_MAX)
		return -E2BIG;
	/* one contiguous body: the snapshot as raft gave it, in its buffers */
	unsigned char *body = malloc(conf_len + data_len + 1);
	if (!body)
		return -ENOMEM;
	iod_raft_conf_encode(&s->configuration, body);
	size_t o = conf_len;
	for (unsigned i = 0; i < s->n_bufs; i++) {
		memcpy(body + o, s->bufs[i].base, s->bufs[i].len);
		o += s->bufs[i].len;
	}
	put64(h, SNAP_MAGIC);
	put32(h + 8, WAL_VERSION);
	put64(h + 16, s->index);
	put64(h + 24, s->term);
	put64(h + 32, s->configuration_index);
	put64(h + 40, conf_len);
	put64(h + 48, data_len);
	put32(h + 56, iod_crc32c(0, body, conf_len + data_len));
	put32(h + 12, hdr_crc(h, SNAP_HDR_BYTES));
	snprintf(name, sizeof(name), "snap-%020llu", (unsigned long long)s->index);
	pthread_mutex_lock(&w->mu);
	rv = write_atomic(w, name, h, sizeof(h), body, conf_len + data_len, NULL, 0, 0);
	uint64_t old = w->snap_index;
	if (!rv)
		w->snap_index = s->index;
	pthread_mutex_unlock(&w->mu);
	free(body);
	if (rv)
		return rv;
	if (old && old != s->index) {
		snprintf(name, sizeof(name), "snap-%020llu", (unsigned long long)old);
		w->fs->ops->unlink(w->fs, w->dir_fd, name);
	}
	if (trailing == 0) {
		/* installed from the leader: the whole log is replaced */
		if ((rv = meta_ranges(w, w->seg_next, w->seg_next)))
			return rv;
		for (size_t j = 0; j < w->segs_n; j++) {
			snprintf(name, sizeof(name), "seg-%020llu",
			         (unsigned long long)w->segs[j].seq);
			w->fs->ops->unlink(w->fs, w->dir_fd, name);
		}
		w->fs->ops->sync(w->fs, w->dir_fd, false);
		w->segs_n = 0;
		if (w->open_fd >= 0)
			w->fs->ops->close(w->fs, w->open_fd);
		w->open_fd = -1;
		w->next_index = s->index + 1;
		return 0;
	}
	/* compaction: whole closed segments before the trailing entries go */
	size_t drop = 0;
	while (drop + 1 < w->segs_n && s->index > trailing &&
	       w->segs[drop].first_index + w->segs[drop].n - 1 <= s->index - trailing)
		drop++;
	if (!drop)
		return 0;
	if ((rv = meta_ranges(w, w->segs[drop].seq, w->seg_next)))
		return rv;
	for (size_t j = 0; j < drop; j++) {
		snprintf(name, sizeof(name), "seg-%020llu", (unsigned long long)w->segs[j].seq);
		w->fs->ops->unlink(w->fs, w->dir_fd, name);
	}
	memmove(w->segs, w->segs + drop, (w->segs_n - drop) * sizeof(*w->segs));
	w->segs_n -= drop;
	return 0;
}

int iod_wal_snapshot_get(struct iod_wal *w, struct raft_snapshot **out, struct iod_err *e)
{
	pthread_mutex_lock(&w->mu);
	uint64_t index = w->snap_index;
	int rv = index ? load_snapshot(w, index, out, e)
	               : iod_err_set(e, -ENOENT, "%s: no snapshot", w->dir);
	pthread_mutex_unlock(&w->mu);
	return rv;
}

int iod_wal_bootstrap(struct iod_wal *w, const struct raft_configuration *conf)
{
	struct raft_buffer buf;
	struct raft_entry ent;
	int rv;

	if (!iod_wal_empty(w))
		return -EEXIST;
	if (raft_configuration_encode(conf, &buf))
		return -ENOMEM;
	if ((rv = iod_wal_meta_set(w, 1, 0)))
		goto out;
	w->next_index = 1;
	ent = (struct raft_entry){.term = 1, .type = RAFT_CHANGE, .buf = buf};
	rv = iod_wal_append(w, &ent, 1);
out:
	raft_free(buf.base);
	return rv;
}

/* ---- recover-from-peers: a peer's log copy -------------------------------- */

/* The parts of a log copy (rio.c's log_export), pointing into the blob. */
struct log_copy {
	uint64_t term;             /* the peer's current term */
	bool has_snap;             /* a snapshot is included */
	struct raft_snapshot s;    /* it (configuration decoded, one buffer into the blob) */
	struct raft_buffer sbuf;   /* its data */
	uint64_t start, n;         /* entries start..start+n-1 */
	const unsigned char *ents; /* first entry */
	size_t ents_len;           /* bytes of entries */
};

static const char *copy_parse(const unsigned char *b, size_t len, struct log_copy *lc)
{
	const unsigned char *p = b + 40, *end = b + len - 4;

	memset(lc, 0, sizeof(*lc));
	if (len < 44 || get32(b) != 0x314c5249u || get32(b + 4) != 1)
		return "not a log copy";
	if (get32(end) != iod_crc32c(0, b, len - 4))
		return "checksum mismatch";
	lc->term = get64(b + 8);
	lc->has_snap = get64(b + 16) != 0;
	lc->start = get64(b + 24);
	lc->n = get64(b + 32);
	if (lc->has_snap) {
		if (end - p < 40)
			return "short snapshot";
		uint64_t cl = get64(p + 24), dl = get64(p + 32);
		if (cl > (uint64_t)(end - p) || dl > (uint64_t)(end - p) ||
		    40 + cl + dl > (uint64_t)(end - p))
			return "snapshot past the end";
		lc->s.index = get64(p);
		lc->s.term = get64(p + 8);
		lc->s.configuration_index = get64(p + 16);
		if (iod_raft_conf_decode(p + 40, (size_t)cl, &lc->s.configuration))
			return "bad snapshot configuration";
		lc->sbuf.base = (void *)(p + 40 + cl);
		lc->sbuf.len = (size_t)dl;
		lc->s.bufs = &lc->sbuf;
		lc->s.n_bufs = 1;
		p += 40 + cl + dl;
	}
	lc->ents = p;
	lc->ents_len = (size_t)(end - p);
	const unsigned char *q = p;
	for (uint64_t i = 0; i < lc->n; i++) {
		if (end - q < 16 || get32(q + 12) > (uint64_t)(end - q - 16))
			return "entries past the end";
		if (get32(q + 8) < RAFT_COMMAND || get32(q + 8) > RAFT_CHANGE)
			return "entry of unknown type";
		q += 16 + get32(q + 12);
	}
	if (q != end)
		return "trailing bytes";
	uint64_t si = lc->has_snap ? lc->s.index : 0;
	if (lc->n && lc->start > si + 1)
		return "entries do not follow the snapshot";
	return NULL;
}

int iod_wal_copy_summary(const unsigned char *b, size_t len, uint64_t *term, uint64_t *last_index,
                         uint64_t *last_term)
{
	struct log_copy lc;
	if (copy_parse(b, len, &lc))
		return -EINVAL;
	*term = lc.term;
	*last_index = lc.n ? lc.start + lc.n - 1 : lc.has_snap ? lc.s.index : 0;
	*last_term = lc.has_snap ? lc.s.term : 0;
	const unsigned char *q = lc.ents;
	for (uint64_t i = 0; i < lc.n; i++) {
		*last_term = get64(q);
		q += 16 + get32(q + 12);
	}
	if (lc.has_snap)
		raft_configuration_close(&lc.s.configuration);
	return 0;
}

/* Is name one of the log's files (iod's or libraft's)? */
static bool log_file(const char *s)
{
	uint64_t v;
	size_t n = strlen(s);
	return !strcmp(s, "meta") || parse_num(s, "seg-", &v) || parse_num(s, "snap-", &v) ||
	       (n > 4 && !strcmp(s + n - 4, ".tmp")) || legacy_name(s);
}

uint64_t iod_wal_peek_term(const char *dir)
{
	char p[IOD_PATH_MAX + 8];
	unsigned char b[META_BYTES];
	uint64_t term = 0;
	snprintf(p, sizeof(p), "%s/meta", dir);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (pread(fd, b, sizeof(b), 0) == (ssize_t)sizeof(b) && get64(b) == META_MAGIC &&
	    get32(b + 12) == hdr_crc(b, META_BYTES))
		term = get64(b + 16);
	close(fd);
	return term;
}

int iod_wal_set_aside(const char *dir, char *where, size_t where_cap, struct iod_err *e)
{
	char sub[IOD_PATH_MAX + 64];
	DIR *d = opendir(dir);
	unsigned moved = 0;

	if (!d)
		return iod_err_set(e, -errno, "%s: %s", dir, strerror(errno));
	snprintf(sub, sizeof(sub), "%s/damaged-%llu", dir,
	         (unsigned long long)(iod_time_unix_ns() / 1000000000ull));
	for (struct dirent *de; (de = readdir(d));) {
		char from[IOD_PATH_MAX + 300], to[IOD_PATH_MAX + 400];
		if (!log_file(de->d_name))
			continue;
		if (!moved && mkdir(sub, 0700) && errno != EEXIST) {
			int rv = -errno;
			closedir(d);
			return iod_err_set(e, rv, "%s: %s", sub, strerror(-rv));
		}
		snprintf(from, sizeof(from), "%s/%s", dir, de->d_name);
		snprintf(to, sizeof(to), "%s/%s", sub, de->d_name);
		if (rename(from, to)) {
			int rv = -errno;
			closedir(d);
			return iod_err_set(e, rv, "moving %s aside: %s", from, strerror(-rv));
		}
		moved++;
	}
	closedir(d);
	iod_strlcpy(where, moved ? sub : "", where_cap);
	return 0;
}

int iod_wal_rebuild(const char *dir, const unsigned char *b, size_t len, uint64_t self_id,
                    uint64_t min_term, struct iod_err *e)
{
	struct log_copy lc;
	struct iod_wal *w;
	struct iod_wal_load ld;
	const char *why = copy_parse(b, len, &lc);
	int rv;

	if (why)
		return iod_err_set(e, -EPROTO, "log copy: %s", why);
	if ((rv = iod_wal_open(&w, dir, &ld, e)))
		goto out;
	if (!iod_wal_empty(w)) {
		iod_wal_close(w);
		rv = iod_err_set(e, -EEXIST, "%s still holds a log", dir);
		goto out;
	}
	/* A term above every term this server may have voted in (its own,
	 * if readable, and its peers'), with its vote for itself: it can never
	 * vote twice in a term it forgot. */
	uint64_t term = IOD_MAX(lc.term, min_term) + 1;
	if ((rv = iod_wal_meta_set(w, term, self_id)))
		goto io;
	uint64_t si = 0;
	if (lc.has_snap) {
		if ((rv = iod_wal_snapshot_put(w, 0, &lc.s)))
			goto io;
		si = lc.s.index;
	} else {
		w->next_index = 1;
	}
	const unsigned char *q = lc.ents;
	for (uint64_t i = 0; i < lc.n; i++) {
		struct raft_entry en = {.term = get64(q),
		                        .type = (unsigned short)get32(q + 8),
		                        .buf = {.base = (void *)(q + 16), .len = get32(q + 12)}};
		if (lc.start + i > si && (rv = iod_wal_append(w, &en, 1)))
			goto io;
		q += 16 + get32(q + 12);
	}
	iod_wal_close(w);
	rv = 0;
	goto out;
io:
	iod_wal_close(w);
	rv = iod_err_set(e, rv, "rebuilding the log in %s: %s", dir, strerror(-rv));
out:
	if (lc.has_snap)
		raft_configuration_close(&lc.s.configuration);
	return rv;
}
