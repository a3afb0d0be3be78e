/*
 * manifest.c: a checkpoint manifest, text form (pure; include/iod/ckpt.h,
 * docs/storage.md). Line-oriented so it reads in a terminal and parses
 * without a library; its last line carries the XXH3-64 of everything before
 * it, so a torn or edited manifest is refused.
 *
 *   iod-ckpt 1
 *   step 42
 *   rank 0
 *   chunk_bytes 4194304
 *   region params 10000000
 *   chunk 0 0 4194304 0123456789abcdef
 *   ...
 *   end 0123456789abcdef
 */
#include "iod/ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static bool name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n >= IOD_CKPT_NAME_MAX)
		return false;
	return iod_str_name_chars(s, n);
}

static int alloc_chunks(struct iod_ckpt_manifest *m, struct iod_err *e)
{
	uint64_t total = 0;
	for (uint32_t r = 0; r < m->regions_n; r++) {
		struct iod_ckpt_mregion *g = &m->regions[r];
		uint64_t k = (g->bytes + m->chunk_bytes - 1) / m->chunk_bytes;
		if (k > IOD_CKPT_CHUNKS_MAX || total + k > IOD_CKPT_CHUNKS_MAX)
			return iod_err_set(
			    e, -E2BIG,
			    "checkpoint has more than %d chunks (IOD_CKPT_CHUNKS_MAX); "
			    "use larger chunks",
			    IOD_CKPT_CHUNKS_MAX);
		g->chunk0 = (uint32_t)total;
		g->chunks = (uint32_t)k;
		total += k;
	}
	m->chunks_n = (uint32_t)total;
	m->chunks = calloc(total ? total : 1, sizeof(*m->chunks));
	if (!m->chunks)
		return iod_err_set(e, -ENOMEM, "out of memory for %" PRIu64 " chunks", total);
	for (uint32_t r = 0; r < m->regions_n; r++) {
		const struct iod_ckpt_mregion *g = &m->regions[r];
		for (uint32_t i = 0; i < g->chunks; i++) {
			struct iod_ckpt_mchunk *c = &m->chunks[g->chunk0 + i];
			uint64_t left = g->bytes - (uint64_t)i * m->chunk_bytes;
			c->region = r;
			c->index = i;
			c->len = left < m->chunk_bytes ? (uint32_t)left : m->chunk_bytes;
		}
	}
	return 0;
}

int iod_ckpt_manifest_plan(struct iod_ckpt_manifest *m, uint64_t step, uint32_t rank,
                           uint32_t chunk_bytes, const char *const *names, const uint64_t *bytes,
                           uint32_t n, struct iod_err *e)
{
	memset(m, 0, sizeof(*m));
	if (chunk_bytes == 0)
		return iod_err_set(e, -EINVAL, "chunk size is 0");
	if (n == 0 || n > IOD_CKPT_REGIONS_MAX)
		return iod_err_set(
		    e, n ? -E2BIG : -EINVAL,
		    "a checkpoint has 1 to %d regions (IOD_CKPT_REGIONS_MAX), not %u",
		    IOD_CKPT_REGIONS_MAX, n);
	m->step = step;
	m->rank = rank;
	m->chunk_bytes = chunk_bytes;
	for (uint32_t i = 0; i < n; i++) {
		if (!name_ok(names[i]))
			return iod_err_set(
			    e, -EINVAL,
			    "region %u: name \"%.70s\" must be 1 to %d characters of "
			    "A-Z a-z 0-9 . _ -",
			    i, names[i] ? names[i] : "", IOD_CKPT_NAME_MAX - 1);
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(m->regions[j].name, names[i]))
				return iod_err_set(e, -EINVAL, "region \"%s\" is named twice",
				                   names[i]);
		snprintf(m->regions[i].name, sizeof(m->regions[i].name), "%s", names[i]);
		m->regions[i].bytes = bytes[i];
		if (m->bytes + bytes[i] < m->bytes)
			return iod_err_set(e, -EINVAL, "regions add up to more than 2^64 bytes");
		m->bytes += bytes[i];
	}
	m->regions_n = n;
	return alloc_chunks(m, e);
}

void iod_ckpt_manifest_free(struct iod_ckpt_manifest *m)
{
	free(m->chunks);
	m->chunks = NULL;
	m->chunks_n = 0;
}

int iod_ckpt_manifest_format(const struct iod_ckpt_manifest *m, char **out, size_t *len,
                             struct iod_err *e)
{
	size_t cap = 128 + (size_t)m->regions_n * 100 + (size_t)m->chunks_n * 64, n = 0;
	char *b = malloc(cap);
	if (!b)
		return iod_err_set(e, -ENOMEM, "out of memory for a manifest");
	n += (size_t)snprintf(b + n, cap - n,
	                      "iod-ckpt 1\nstep %" PRIu64 "\nrank %u\nchunk_bytes %u\n", m->step,
	                      m->rank, m->chunk_bytes);
	for (uint32_t r = 0; r < m->regions_n; r++)
		n += (size_t)snprintf(b + n, cap - n, "region %s %" PRIu64 "\n", m->regions[r].name,
		                      m->regions[r].bytes);
	for (uint32_t i = 0; i < m->chunks_n; i++) {
		const struct iod_ckpt_mchunk *c = &m->chunks[i];
		n += (size_t)snprintf(b + n, cap - n, "chunk %u %u %u %016" PRIx64 "\n", c->region,
		                      c->index, c->len, c->xxh3);
	}
	n += (size_t)snprintf(b + n, cap - n, "end %016" PRIx64 "\n", (uint64_t)XXH3_64bits(b, n));
	*out = b;
	*len = n;
	return 0;
}

/* ---- parsing ---- */

struct mp {
	const char *p, *end;
	uint32_t line;
	struct iod_err *e;
};

static int bad(struct mp *s, const char *what)
{
	return iod_err_set(s->e, -EBADMSG, "manifest line %u: %s", s->line, what);
}

/* The next line without its '\n' into buf; -EBADMSG when missing or too long. */
static int next_line(struct mp *s, char *buf, size_t cap)
{
	const char *nl;
	size_t n;
	if (s->p >= s->end)
		return bad(s, "the manifest ends early (torn?)");
	nl = memchr(s->p, '\n', (size_t)(s->end - s->p));
	if (!nl)
		return bad(s, "the last line has no newline (torn?)");
	n = (size_t)(nl - s->p);
	s->line++;
	if (n >= cap)
		return bad(s, "line too long");
	memcpy(buf, s->p, n);
	buf[n] = 0;
	if (memchr(buf, 0, n))
		return bad(s, "NUL byte");
	s->p = nl + 1;
	return 0;
}

static bool dec(const char **q, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	const char *s = *q;
	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (x > (max - (uint64_t)(*s - '0')) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = x;
	*q = s;
	return true;
}

static bool hex16(const char **q, uint64_t *v)
{
	uint64_t x = 0;
	const char *s = *q;
	for (int i = 0; i < 16; i++, s++) {
		int d = (*s >= '0' && *s <= '9')   ? *s - '0'
		        : (*s >= 'a' && *s <= 'f') ? *s - 'a' + 10
		                                   : -1;
		if (d < 0)
			return false;
		x = x << 4 | (uint64_t)d;
	}
	*v = x;
	*q = s;
	return true;
}

/* "key <decimal>" exactly */
static int keyed(struct mp *s, const char *key, uint64_t max, uint64_t *v)
{
	char buf[96];
	size_t k = strlen(key);
	int rc = next_line(s, buf, sizeof(buf));
	const char *q = buf + k + 1;
	if (rc)
		return rc;
	if (strncmp(buf, key, k) || buf[k] != ' ' || !dec(&q, max, v) || *q)
		return iod_err_set(s->e, -EBADMSG, "manifest line %u: expected \"%s <number>\"",
		                   s->line, key);
	return 0;
}

static int parse_head(struct mp *s, struct iod_ckpt_manifest *m)
{
	char buf[32];
	uint64_t v;
	int rc = next_line(s, buf, sizeof(buf));
	if (rc)
		return rc;
	if (strcmp(buf, "iod-ckpt 1"))
		return bad(s, "not an iod checkpoint manifest (expected \"iod-ckpt 1\")");
	if ((rc = keyed(s, "step", UINT64_MAX, &m->step)) ||
	    (rc = keyed(s, "rank", UINT32_MAX, &v)))
		return rc;
	m->rank = (uint32_t)v;
	if ((rc = keyed(s, "chunk_bytes", UINT32_MAX, &v)))
		return rc;
	if (v == 0)
		return bad(s, "chunk_bytes is 0");
	m->chunk_bytes = (uint32_t)v;
	return 0;
}

static int parse_region(struct mp *s, struct iod_ckpt_manifest *m, const char *buf)
{
	const char *sp = strchr(buf + 7, ' '), *q;
	struct iod_ckpt_mregion *g = &m->regions[m->regions_n];
	size_t n;
	if (m->regions_n >= IOD_CKPT_REGIONS_MAX)
		return bad(s, "more than IOD_CKPT_REGIONS_MAX regions");
	if (!sp || (n = (size_t)(sp - (buf + 7))) == 0 || n >= IOD_CKPT_NAME_MAX)
		return bad(s, "expected \"region <name> <bytes>\"");
	memcpy(g->name, buf + 7, n);
	g->name[n] = 0;
	q = sp + 1;
	if (!name_ok(g->name) || !dec(&q, UINT64_MAX, &g->bytes) || *q)
		return bad(s,
		           "expected \"region <name> <bytes>\" with a name of A-Z a-z 0-9 . _ -");
	for (uint32_t j = 0; j < m->regions_n; j++)
		if (!strcmp(m->regions[j].name, g->name))
			return bad(s, "a region is named twice");
	if (m->bytes + g->bytes < m->bytes)
		return bad(s, "regions add up to more than 2^64 bytes");
	m->bytes += g->bytes;
	m->regions_n++;
	return 0;
}

static int parse_chunk(struct mp *s, struct iod_ckpt_mchunk *want, const char *buf)
{
	const char *q = buf + 6;
	uint64_t r, i, len, h;
	if (!dec(&q, UINT32_MAX, &r) || *q++ != ' ' || !dec(&q, UINT32_MAX, &i) || *q++ != ' ' ||
	    !dec(&q, UINT32_MAX, &len) || *q++ != ' ' || !hex16(&q, &h) || *q)
		return bad(s, "expected \"chunk <region> <index> <bytes> <16 hex digits>\"");
	if (r != want->region || i != want->index || len != want->len)
		return iod_err_set(s->e, -EBADMSG,
		                   "manifest line %u: chunk %" PRIu64 " %" PRIu64 " of %" PRIu64
		                   " bytes out of place; expected chunk %u %u of %u bytes",
		                   s->line, r, i, len, want->region, want->index, want->len);
	want->xxh3 = h;
	return 0;
}

static int parse_body(struct mp *s, struct iod_ckpt_manifest *m)
{
	char buf[160];
	int rc;
	for (;;) {
		const char *at = s->p;
		if ((rc = next_line(s, buf, sizeof(buf))))
			return rc;
		if (strncmp(buf, "region ", 7)) {
			s->p = at;
			s->line--;
			break;
		}
		if ((rc = parse_region(s, m, buf)))
			return rc;
	}
	if (m->regions_n == 0)
		return bad(s, "the manifest has no region");
	if ((rc = alloc_chunks(m, s->e)))
		return rc;
	for (uint32_t i = 0; i < m->chunks_n; i++) {
		if ((rc = next_line(s, buf, sizeof(buf))))
			return rc;
		if (strncmp(buf, "chunk ", 6))
			return bad(s, "fewer chunk lines than the regions need");
		if ((rc = parse_chunk(s, &m->chunks[i], buf)))
			return rc;
	}
	return 0;
}

static int parse_end(struct mp *s, const char *text)
{
	char buf[32];
	size_t hashed = (size_t)(s->p - text);
	const char *q = buf + 4;
	uint64_t h;
	int rc = next_line(s, buf, sizeof(buf));
	if (rc)
		return rc;
	if (strncmp(buf, "end ", 4) || !hex16(&q, &h) || *q)
		return bad(
		    s,
		    "expected \"end <16 hex digits>\" (more chunk lines than the regions need?)");
	if (h != XXH3_64bits(text, hashed))
		return bad(s, "the manifest's checksum does not match its contents (damaged)");
	if (s->p != s->end)
		return bad(s, "text after the end line");
	return 0;
}

int iod_ckpt_manifest_parse(const char *text, size_t len, struct iod_ckpt_manifest *m,
                            struct iod_err *e)
{
	struct mp s = {text, text + len, 0, e};
	int rc;
	memset(m, 0, sizeof(*m));
	if (len > IOD_CKPT_MANIFEST_MAX)
		return iod_err_set(e, -EBADMSG,
		                   "manifest is %zu bytes, above %u (IOD_CKPT_MANIFEST_MAX)", len,
		                   IOD_CKPT_MANIFEST_MAX);
	rc = parse_head(&s, m);
	if (!rc)
		rc = parse_body(&s, m);
	if (!rc)
		rc = parse_end(&s, text);
	if (rc)
		iod_ckpt_manifest_free(m);
	return rc;
}
