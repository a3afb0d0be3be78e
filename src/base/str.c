/*
 * str.c: string helpers: bounded copy, "did you mean" suggestions (bounded
 * Levenshtein distance), and a growable output buffer.
 */
#include "iod/base.h"

#include <stdlib.h>
#include <string.h>

int iod_strlcpy(char *dst, const char *src, size_t len)
{
	size_t n = strlen(src);

	if (!len)
		return -ENOSPC;
	if (n >= len) {
		memcpy(dst, src, len - 1);
		dst[len - 1] = 0;
		return -ENOSPC;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

bool iod_str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool iod_str_name_chars(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

unsigned iod_edit_distance(const char *a, const char *b, unsigned max)
{
	enum { W = 64 };
	unsigned row[W + 1];
	size_t la = strlen(a), lb = strlen(b);

	if (la > W || lb > W)
		return max;
	for (unsigned j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		unsigned diag = row[0], best = row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned up = row[j];
			unsigned cost = a[i - 1] == b[j - 1] ? 0 : 1;
			unsigned v = IOD_MIN(IOD_MIN(row[j] + 1, row[j - 1] + 1), diag + cost);
			row[j] = v;
			diag = up;
			best = IOD_MIN(best, v);
		}
		if (best >= max)
			return max;
	}
	return IOD_MIN(row[lb], max);
}

const char *iod_suggest(const char *word, const char *const *candidates, size_t n)
{
	const char *best = NULL;
	unsigned best_d = 3;

	for (size_t i = 0; i < n; i++) {
		unsigned d = iod_edit_distance(word, candidates[i], 3);
		if (d < best_d) {
			best_d = d;
			best = candidates[i];
		}
	}
	if (!best && strlen(word) >= 3) {
		for (size_t i = 0; i < n; i++)
			if (iod_str_has_prefix(candidates[i], word))
				return candidates[i];
	}
	return best;
}

void iod_buf_init(struct iod_buf *b)
{
	b->data = NULL;
	b->len = b->cap = 0;
}

void iod_buf_free(struct iod_buf *b)
{
	free(b->data);
	iod_buf_init(b);
}

static int reserve(struct iod_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int iod_buf_append(struct iod_buf *b, const void *data, size_t len)
{
	int rc = reserve(b, len);
	if (rc)
		return rc;
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = 0;
	return 0;
}

int iod_buf_printf(struct iod_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	int rc = reserve(b, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int iod_buf_read_file(struct iod_buf *b, const char *path, size_t max_bytes, struct iod_err *e)
{
	char chunk[65536];
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	size_t n;

	if (!f)
		return iod_err_set(e, -errno, "%s: %s", path, strerror(errno));
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b->len + n > max_bytes) {
			if (f != stdin)
				fclose(f);
			return iod_err_set(e, -EFBIG, "%s: larger than the limit of %zu bytes",
			                   path, max_bytes);
		}
		if (iod_buf_append(b, chunk, n)) {
			if (f != stdin)
				fclose(f);
			return iod_err_set(e, -ENOMEM, "%s: out of memory", path);
		}
	}
	int bad = ferror(f);
	if (f != stdin)
		fclose(f);
	if (bad)
		return iod_err_set(e, -EIO, "%s: read error", path);
	if (!b->data && iod_buf_append(b, "", 0))
		return iod_err_set(e, -ENOMEM, "%s: out of memory", path);
	return 0;
}

int iod_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void iod_hex_encode(const void *buf, size_t len, char *out)
{
	static const char d[] = "0123456789abcdef";
	const uint8_t *p = buf;
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * len] = 0;
}

ssize_t iod_hex_decode(const char *hex, size_t hex_len, void *out, size_t cap)
{
	uint8_t *p = out;
	if (hex_len % 2)
		return -EINVAL;
	if (hex_len / 2 > cap)
		return -ENOSPC;
	for (size_t i = 0; i < hex_len / 2; i++) {
		int hi = iod_hex_digit(hex[2 * i]), lo = iod_hex_digit(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		p[i] = (uint8_t)(hi << 4 | lo);
	}
	return (ssize_t)(hex_len / 2);
}
