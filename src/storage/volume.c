/*
 * volume.c: the archive a volume is synced in (pure: no clock, no I/O).
 *
 * A replicated volume (spec storage: {volume: {replicas: N}}, docs/storage.md
 * "Volumes") is the replica's data directory packed into one region of each
 * checkpoint. The format (include/iod/ckpt.h) is text headers and raw bytes:
 *
 *   iod-vol 1
 *   d 755 logs
 *   f 644 5 logs/a.txt
 *   hello
 *   end 2
 *
 * The parser accepts exactly what iod_ckpt_vol_add writes, and checks the
 * whole archive before handing out any entry, so a cut or edited archive
 * unpacks nothing.
 */
#include "iod/ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOL_MAGIC "iod-vol 1\n"
#define VOL_LINE_MAX (IOD_CKPT_VOL_PATH_MAX + 64)

/* A relative path of plain parts: no leading or trailing '/', no empty,
 * "." or ".." part, no NUL or newline, shorter than IOD_CKPT_VOL_PATH_MAX. */
static bool path_ok(const char *p, size_t n)
{
	if (!n || n >= IOD_CKPT_VOL_PATH_MAX)
		return false;
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && (p[i] == '\0' || p[i] == '\n'))
			return false;
		if (i == n || p[i] == '/') {
			size_t len = i - start;
			if (!len || (len == 1 && p[start] == '.') ||
			    (len == 2 && p[start] == '.' && p[start + 1] == '.'))
				return false;
			start = i + 1;
		}
	}
	return true;
}

static int grow(struct iod_ckpt_vol_buf *b, size_t more, struct iod_err *e)
{
	if (b->len + more > IOD_CKPT_VOL_BYTES_MAX)
		return iod_err_set(e, -E2BIG, "volume archive: more than %llu bytes",
		                   (unsigned long long)IOD_CKPT_VOL_BYTES_MAX);
	if (b->len + more <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	uint8_t *nb = realloc(b->buf, cap);
	if (!nb)
		return iod_err_set(e, -ENOMEM, "volume archive: out of memory for %zu bytes", cap);
	b->buf = nb;
	b->cap = cap;
	return 0;
}

static int put(struct iod_ckpt_vol_buf *b, const void *p, size_t n, struct iod_err *e)
{
	int rc = grow(b, n, e);
	if (!rc && n) {
		memcpy(b->buf + b->len, p, n);
		b->len += n;
	}
	return rc;
}

int iod_ckpt_vol_add(struct iod_ckpt_vol_buf *b, const struct iod_ckpt_vol_entry *x,
                     struct iod_err *e)
{
	char line[VOL_LINE_MAX];
	int rc, w;
	if (!x->path || !path_ok(x->path, strlen(x->path)))
		return iod_err_set(e, -EINVAL,
		                   "volume archive: path \"%.80s\" is not a relative "
		                   "path of plain parts",
		                   x->path ? x->path : "");
	if (x->mode > 0777)
		return iod_err_set(e, -EINVAL, "volume archive: %s: mode %o is more than 0777",
		                   x->path, x->mode);
	if (b->entries >= IOD_CKPT_VOL_ENTRIES_MAX)
		return iod_err_set(e, -E2BIG, "volume archive: more than %u entries",
		                   (unsigned)IOD_CKPT_VOL_ENTRIES_MAX);
	if (!b->len && (rc = put(b, VOL_MAGIC, strlen(VOL_MAGIC), e)))
		return rc;
	if (x->dir)
		w = snprintf(line, sizeof(line), "d %o %s\n", x->mode, x->path);
	else
		w = snprintf(line, sizeof(line), "f %o %" PRIu64 " %s\n", x->mode, x->size,
		             x->path);
	if ((rc = put(b, line, (size_t)w, e)))
		return rc;
	if (!x->dir && ((rc = grow(b, x->size + 1, e)) || (rc = put(b, x->data, x->size, e)) ||
	                (rc = put(b, "\n", 1, e))))
		return rc;
	b->entries++;
	return 0;
}

int iod_ckpt_vol_finish(struct iod_ckpt_vol_buf *b, struct iod_err *e)
{
	char line[32];
	int rc;
	if (!b->len && (rc = put(b, VOL_MAGIC, strlen(VOL_MAGIC), e)))
		return rc;
	int w = snprintf(line, sizeof(line), "end %u\n", b->entries);
	return put(b, line, (size_t)w, e);
}

void iod_ckpt_vol_buf_free(struct iod_ckpt_vol_buf *b)
{
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

/* A decimal or octal number of the line, then one space (or the line's end
 * when last): no sign, no leading zero but "0", within max. */
static bool number(const char **p, const char *end, unsigned base, uint64_t max, bool last,
                   uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (s >= end || *s < '0' || *s >= (char)('0' + base) ||
	    (*s == '0' && s + 1 < end && s[1] != ' ' && s[1] != '\n'))
		return false;
	while (s < end && *s >= '0' && *s < (char)('0' + base)) {
		uint64_t d = (uint64_t)(*s - '0');
		if (v > (max - d) / base)
			return false;
		v = v * base + d;
		s++;
	}
	if (last ? (s != end) : (s >= end || *s != ' '))
		return false;
	*p = last ? s : s + 1;
	*out = v;
	return true;
}

/* One pass: check everything (fn NULL), or hand out the entries. */
static int walk(const uint8_t *buf, size_t len, iod_ckpt_vol_fn fn, void *ctx, struct iod_err *e)
{
	const char *b = (const char *)buf;
	size_t off = strlen(VOL_MAGIC);
	uint32_t n = 0;
	char path[IOD_CKPT_VOL_PATH_MAX];
	if (len < off || memcmp(b, VOL_MAGIC, off))
		return iod_err_set(e, -EBADMSG,
		                   "volume archive: does not start with \"iod-vol 1\"");
	for (;;) {
		const char *ls = b + off, *nl = memchr(ls, '\n', len - off);
		if (!nl)
			return iod_err_set(e, -EBADMSG,
			                   "volume archive: entry %u: cut short (no end line)", n);
		const char *p = ls + 2;
		uint64_t mode = 0, size = 0, count = 0;
		if (nl - ls >= 4 && !memcmp(ls, "end ", 4)) {
			p = ls + 4;
			if (!number(&p, nl, 10, UINT32_MAX, true, &count) || count != n)
				return iod_err_set(
				    e, -EBADMSG,
				    "volume archive: the end line does not say %u entries", n);
			if ((size_t)(nl + 1 - b) != len)
				return iod_err_set(e, -EBADMSG,
				                   "volume archive: %zu bytes after the end line",
				                   len - (size_t)(nl + 1 - b));
			return 0;
		}
		if (n >= IOD_CKPT_VOL_ENTRIES_MAX)
			return iod_err_set(e, -E2BIG, "volume archive: more than %u entries",
			                   (unsigned)IOD_CKPT_VOL_ENTRIES_MAX);
		bool dir = nl - ls >= 2 && ls[0] == 'd' && ls[1] == ' ';
		if (!dir && !(nl - ls >= 2 && ls[0] == 'f' && ls[1] == ' '))
			return iod_err_set(
			    e, -EBADMSG,
			    "volume archive: entry %u: not a \"d\", \"f\" or \"end\" line", n);
		if (!number(&p, nl, 8, 0777, false, &mode) ||
		    (!dir && !number(&p, nl, 10, IOD_CKPT_VOL_BYTES_MAX, false, &size)))
			return iod_err_set(e, -EBADMSG,
			                   "volume archive: entry %u: a bad mode or size", n);
		size_t plen = (size_t)(nl - p);
		if (!path_ok(p, plen))
			return iod_err_set(
			    e, -EBADMSG,
			    "volume archive: entry %u: the path is not a relative path "
			    "of plain parts",
			    n);
		memcpy(path, p, plen);
		path[plen] = 0;
		off = (size_t)(nl + 1 - b);
		const uint8_t *data = buf + off;
		if (!dir) {
			if (size > len - off || len - off - size < 1 || b[off + size] != '\n')
				return iod_err_set(e, -EBADMSG,
				                   "volume archive: entry %u (%s): its %" PRIu64
				                   " bytes are cut short",
				                   n, path, size);
			off += size + 1;
		}
		struct iod_ckpt_vol_entry x = {dir, (uint32_t)mode, path, data, size};
		int rc = fn ? fn(ctx, &x, e) : 0;
		if (rc)
			return rc;
		n++;
	}
}

int iod_ckpt_vol_parse(const uint8_t *buf, size_t len, iod_ckpt_vol_fn fn, void *ctx,
                       struct iod_err *e)
{
	int rc = walk(buf, len, NULL, NULL, e);
	return rc ? rc : walk(buf, len, fn, ctx, e);
}
