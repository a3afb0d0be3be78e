/*
 * bitmap.c: fixed-size bitmaps for CPU sets and GPU sets, with the Linux
 * cpulist text form ("0-3,8,10-11") used by cgroups, taskset and iod's output.
 */
#include "iod/base.h"

#include <stdlib.h>
#include <string.h>

unsigned iod_bitmap_count(const struct iod_bitmap *b)
{
	unsigned n = 0;
	for (unsigned i = 0; i < IOD_BITMAP_WORDS; i++)
		n += (unsigned)__builtin_popcountll(b->w[i]);
	return n;
}

bool iod_bitmap_empty(const struct iod_bitmap *b)
{
	for (unsigned i = 0; i < IOD_BITMAP_WORDS; i++)
		if (b->w[i])
			return false;
	return true;
}

bool iod_bitmap_equal(const struct iod_bitmap *a, const struct iod_bitmap *b)
{
	return memcmp(a->w, b->w, sizeof(a->w)) == 0;
}

void iod_bitmap_and(struct iod_bitmap *a, const struct iod_bitmap *b)
{
	for (unsigned i = 0; i < IOD_BITMAP_WORDS; i++)
		a->w[i] &= b->w[i];
}

void iod_bitmap_or(struct iod_bitmap *a, const struct iod_bitmap *b)
{
	for (unsigned i = 0; i < IOD_BITMAP_WORDS; i++)
		a->w[i] |= b->w[i];
}

void iod_bitmap_andnot(struct iod_bitmap *a, const struct iod_bitmap *b)
{
	for (unsigned i = 0; i < IOD_BITMAP_WORDS; i++)
		a->w[i] &= ~b->w[i];
}

bool iod_bitmap_subset(const struct iod_bitmap *a, const struct iod_bitmap *b)
{
	for (unsigned i = 0; i < IOD_BITMAP_WORDS; i++)
		if (a->w[i] & ~b->w[i])
			return false;
	return true;
}

int iod_bitmap_next(const struct iod_bitmap *b, unsigned from)
{
	for (unsigned i = from / 64; i < IOD_BITMAP_WORDS; i++) {
		uint64_t w = b->w[i];
		if (i == from / 64)
			w &= ~0ull << (from % 64);
		if (w)
			return (int)(i * 64 + (unsigned)__builtin_ctzll(w));
	}
	return -1;
}

void iod_bitmap_set_range(struct iod_bitmap *b, unsigned first, unsigned last)
{
	for (unsigned i = first; i <= last && i < IOD_BITMAP_BITS; i++)
		iod_bitmap_set(b, i);
}

int iod_bitmap_format(const struct iod_bitmap *b, char *buf, size_t len)
{
	size_t n = 0;
	int i = iod_bitmap_next(b, 0);

	if (len)
		buf[0] = 0;
	while (i >= 0) {
		int j = i;
		while (j + 1 < IOD_BITMAP_BITS && iod_bitmap_test(b, (unsigned)j + 1))
			j++;
		int w = (i == j) ? snprintf(buf + n, len - n, "%s%d", n ? "," : "", i)
		                 : snprintf(buf + n, len - n, "%s%d-%d", n ? "," : "", i, j);
		if (w < 0 || (size_t)w >= len - n)
			return -ENOSPC;
		n += (size_t)w;
		i = (j + 1 < IOD_BITMAP_BITS) ? iod_bitmap_next(b, (unsigned)j + 1) : -1;
	}
	return 0;
}

int iod_bitmap_format_list(const struct iod_bitmap *b, char *buf, size_t len)
{
	size_t n = 0;

	if (len)
		buf[0] = 0;
	for (int i = iod_bitmap_next(b, 0); i >= 0;
	     i = (i + 1 < IOD_BITMAP_BITS) ? iod_bitmap_next(b, (unsigned)i + 1) : -1) {
		int w = snprintf(buf + n, len - n, "%s%d", n ? "," : "", i);
		if (w < 0 || (size_t)w >= len - n)
			return -ENOSPC;
		n += (size_t)w;
	}
	return 0;
}

static int parse_index(const char **p, unsigned *out)
{
	char *end;
	unsigned long v;

	if (**p < '0' || **p > '9')
		return -EINVAL;
	v = strtoul(*p, &end, 10);
	if (v >= IOD_BITMAP_BITS)
		return -ERANGE;
	*out = (unsigned)v;
	*p = end;
	return 0;
}

int iod_bitmap_parse(const char *s, struct iod_bitmap *b, struct iod_err *e)
{
	const char *p = s;

	iod_bitmap_zero(b);
	while (*p == ' ')
		p++;
	if (!*p)
		return 0;
	for (;;) {
		unsigned lo, hi;
		int rc = parse_index(&p, &lo);
		if (rc)
			return iod_err_set(e, rc,
			                   "bad set \"%s\": expected a number below %d at \"%s\"",
			                   s, IOD_BITMAP_BITS, p);
		hi = lo;
		if (*p == '-') {
			p++;
			rc = parse_index(&p, &hi);
			if (rc || hi < lo)
				return iod_err_set(e, -EINVAL,
				                   "bad set \"%s\": bad range end at \"%s\"", s, p);
		}
		iod_bitmap_set_range(b, lo, hi);
		if (!*p)
			return 0;
		if (*p != ',')
			return iod_err_set(e, -EINVAL, "bad set \"%s\": unexpected \"%s\"", s, p);
		p++;
	}
}
