/*
 * wire.c: libiod-xfer's wire format (include/iod/xfer.h): the metadata blob
 * peers exchange to meet, and the notification that follows a batch.
 *
 * Both come from another process and maybe another machine, so decoding
 * checks every length against what is left before reading, and says at
 * which byte and which field a message went wrong. Pure: no I/O, no clock;
 * decoded pointers refer into the caller's buffer.
 */
#include "iod/xfer.h"

#include <string.h>

/* A cursor over a buffer: reads past the end set bad instead of reading. */
struct cur {
	const uint8_t *p; /* the buffer */
	size_t len;       /* its bytes */
	size_t off;       /* next byte */
	const char *bad;  /* the first field that did not fit, NULL if none */
};

static bool need(struct cur *c, size_t n, const char *field)
{
	if (c->bad)
		return false;
	if (n > c->len - c->off) {
		c->bad = field;
		return false;
	}
	return true;
}

static uint64_t get_le(struct cur *c, unsigned bytes, const char *field)
{
	uint64_t v = 0;
	if (!need(c, bytes, field))
		return 0;
	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)c->p[c->off + i] << (8 * i);
	c->off += bytes;
	return v;
}

static const uint8_t *get_bytes(struct cur *c, size_t n, const char *field)
{
	if (!need(c, n, field))
		return NULL;
	const uint8_t *r = c->p + c->off;
	c->off += n;
	return r;
}

/* A writer: writes past cap set full. */
struct out {
	uint8_t *p; /* the buffer */
	size_t cap; /* its bytes */
	size_t off; /* next byte */
	bool full;  /* something did not fit */
};

static void put_le(struct out *o, uint64_t v, unsigned bytes)
{
	if (o->full || bytes > o->cap - o->off) {
		o->full = true;
		return;
	}
	for (unsigned i = 0; i < bytes; i++)
		o->p[o->off + i] = (uint8_t)(v >> (8 * i));
	o->off += bytes;
}

static void put_bytes(struct out *o, const void *b, size_t n)
{
	if (o->full || n > o->cap - o->off) {
		o->full = true;
		return;
	}
	if (n)
		memcpy(o->p + o->off, b, n);
	o->off += n;
}

static int finish(struct out *o, struct iod_err *e)
{
	if (o->full)
		return iod_err_set(e, -ENOSPC, "xfer: message needs more than %zu bytes", o->cap);
	/* body_len: everything after the header */
	uint64_t body = o->off - IOD_XFER_HDR_BYTES;
	for (unsigned i = 0; i < 4; i++)
		o->p[8 + i] = (uint8_t)(body >> (8 * i));
	return (int)o->off;
}

static void header(struct out *o, enum iod_xfer_kind kind)
{
	put_le(o, IOD_XFER_MAGIC, 4);
	put_le(o, IOD_XFER_WIRE_VERSION, 1);
	put_le(o, kind, 1);
	put_le(o, 0, 2);
	put_le(o, 0, 4); /* body_len, filled by finish() */
}

static int name_check(const char *name, struct iod_err *e)
{
	size_t n = strlen(name);
	if (n == 0 || n >= IOD_NAME_MAX)
		return iod_err_set(e, -EINVAL, "xfer: agent name must be 1..%d bytes, got %zu",
		                   IOD_NAME_MAX - 1, n);
	return 0;
}

int iod_xfer_wire_md_encode(const struct iod_xfer_wire_md *m, uint8_t *buf, size_t cap,
                            struct iod_err *e)
{
	IOD_ASSERT(m && buf);
	int rv = name_check(m->name, e);
	if (rv)
		return rv;
	if (m->addr_len > IOD_XFER_ADDR_BYTES_MAX || m->nregions > IOD_XFER_REGIONS_MAX)
		return iod_err_set(e, -EINVAL,
		                   "xfer: address of %u bytes or %u regions past the limit",
		                   m->addr_len, m->nregions);
	struct out o = {buf, cap, 0, false};
	header(&o, IOD_XFER_KIND_MD);
	size_t nl = strlen(m->name);
	put_le(&o, nl, 1);
	put_bytes(&o, m->name, nl);
	put_le(&o, m->addr_len, 2);
	put_bytes(&o, m->addr, m->addr_len);
	put_le(&o, m->nregions, 2);
	for (unsigned i = 0; i < m->nregions; i++) {
		const struct iod_xfer_wire_region *r = &m->regions[i];
		if (r->rkey_len > IOD_XFER_RKEY_BYTES_MAX || r->id == 0)
			return iod_err_set(e, -EINVAL, "xfer: region %u: id 0 or key of %u bytes",
			                   i, r->rkey_len);
		put_le(&o, r->id, 4);
		put_le(&o, r->addr, 8);
		put_le(&o, r->len, 8);
		put_le(&o, r->mem, 1);
		put_le(&o, r->rkey_len, 2);
		put_bytes(&o, r->rkey, r->rkey_len);
	}
	return finish(&o, e);
}

int iod_xfer_wire_notif_encode(const struct iod_xfer_wire_notif *n, uint8_t *buf, size_t cap,
                               struct iod_err *e)
{
	IOD_ASSERT(n && buf);
	int rv = name_check(n->name, e);
	if (rv)
		return rv;
	if (n->msg_len > IOD_XFER_NOTIF_BYTES_MAX)
		return iod_err_set(e, -E2BIG, "xfer: notification of %u bytes, at most %d",
		                   n->msg_len, IOD_XFER_NOTIF_BYTES_MAX);
	struct out o = {buf, cap, 0, false};
	header(&o, IOD_XFER_KIND_NOTIF);
	size_t nl = strlen(n->name);
	put_le(&o, nl, 1);
	put_bytes(&o, n->name, nl);
	put_le(&o, n->seq, 8);
	put_le(&o, n->msg_len, 2);
	put_bytes(&o, n->msg, n->msg_len);
	return finish(&o, e);
}

/* The header and the body length; on success c is positioned at the body. */
static int hdr_decode(struct cur *c, enum iod_xfer_kind want, struct iod_err *e)
{
	uint64_t magic = get_le(c, 4, "magic");
	uint64_t ver = get_le(c, 1, "version");
	uint64_t kind = get_le(c, 1, "kind");
	uint64_t rsv = get_le(c, 2, "reserved");
	uint64_t body = get_le(c, 4, "body_len");
	if (c->bad)
		return iod_err_set(e, -EPROTO,
		                   "xfer: message of %zu bytes is shorter than a header", c->len);
	if (magic != IOD_XFER_MAGIC)
		return iod_err_set(e, -EPROTO, "xfer: byte 0: bad magic 0x%08llx (not libiod-xfer)",
		                   (unsigned long long)magic);
	if (ver != IOD_XFER_WIRE_VERSION)
		return iod_err_set(e, -EPROTO,
		                   "xfer: byte 4: wire version %llu, this build speaks %d",
		                   (unsigned long long)ver, IOD_XFER_WIRE_VERSION);
	if (kind != (uint64_t)want)
		return iod_err_set(e, -EPROTO, "xfer: byte 5: message kind %llu, expected %d",
		                   (unsigned long long)kind, want);
	if (rsv != 0)
		return iod_err_set(e, -EPROTO, "xfer: byte 6: reserved field is %llu, must be 0",
		                   (unsigned long long)rsv);
	if (body != c->len - IOD_XFER_HDR_BYTES)
		return iod_err_set(e, -EPROTO, "xfer: byte 8: body_len %llu but %zu bytes follow",
		                   (unsigned long long)body, c->len - IOD_XFER_HDR_BYTES);
	return 0;
}

static int name_decode(struct cur *c, char *name, struct iod_err *e)
{
	size_t at = c->off;
	uint64_t nl = get_le(c, 1, "name_len");
	const uint8_t *nm = get_bytes(c, (size_t)nl, "name");
	if (c->bad)
		return 0; /* reported by the caller */
	if (nl == 0 || nl >= IOD_NAME_MAX)
		return iod_err_set(e, -EPROTO, "xfer: byte %zu: name of %llu bytes (1..%d)", at,
		                   (unsigned long long)nl, IOD_NAME_MAX - 1);
	for (size_t i = 0; i < nl; i++)
		if (nm[i] < 0x21 || nm[i] > 0x7e)
			return iod_err_set(e, -EPROTO,
			                   "xfer: byte %zu: name has a non-printable byte",
			                   at + 1 + i);
	memcpy(name, nm, (size_t)nl);
	name[nl] = '\0';
	return 0;
}

static int short_msg(const struct cur *c, struct iod_err *e)
{
	return iod_err_set(e, -EPROTO, "xfer: byte %zu: message ends inside field %s", c->off,
	                   c->bad);
}

int iod_xfer_wire_md_decode(const uint8_t *buf, size_t len, struct iod_xfer_wire_md *m,
                            struct iod_err *e)
{
	IOD_ASSERT(buf || len == 0);
	IOD_ASSERT(m);
	memset(m, 0, sizeof(*m));
	if (len > IOD_XFER_MD_BYTES_MAX)
		return iod_err_set(e, -EPROTO, "xfer: metadata of %zu bytes, at most %d", len,
		                   IOD_XFER_MD_BYTES_MAX);
	struct cur c = {buf, len, 0, NULL};
	int rv = hdr_decode(&c, IOD_XFER_KIND_MD, e);
	if (rv || (rv = name_decode(&c, m->name, e)))
		return rv;
	uint64_t al = get_le(&c, 2, "addr_len");
	if (!c.bad && (al == 0 || al > IOD_XFER_ADDR_BYTES_MAX))
		return iod_err_set(e, -EPROTO,
		                   "xfer: byte %zu: worker address of %llu bytes (1..%d)",
		                   c.off - 2, (unsigned long long)al, IOD_XFER_ADDR_BYTES_MAX);
	m->addr = get_bytes(&c, (size_t)al, "addr");
	m->addr_len = (uint16_t)al;
	uint64_t nr = get_le(&c, 2, "nregions");
	if (c.bad)
		return short_msg(&c, e);
	if (nr > IOD_XFER_REGIONS_MAX)
		return iod_err_set(e, -EPROTO, "xfer: byte %zu: %llu regions, at most %d",
		                   c.off - 2, (unsigned long long)nr, IOD_XFER_REGIONS_MAX);
	for (unsigned i = 0; i < nr; i++) {
		struct iod_xfer_wire_region *r = &m->regions[i];
		size_t at = c.off;
		r->id = (uint32_t)get_le(&c, 4, "region.id");
		r->addr = get_le(&c, 8, "region.addr");
		r->len = get_le(&c, 8, "region.len");
		r->mem = (uint8_t)get_le(&c, 1, "region.mem");
		r->rkey_len = (uint16_t)get_le(&c, 2, "region.rkey_len");
		if (c.bad)
			return short_msg(&c, e);
		if (r->id == 0 || r->len == 0 || r->len > IOD_XFER_REGION_BYTES_MAX ||
		    r->addr + r->len < r->addr)
			return iod_err_set(e, -EPROTO,
			                   "xfer: byte %zu: region %u: id %u, %llu bytes at 0x%llx "
			                   "(id 0, empty, past %llu bytes or wrapping)",
			                   at, i, r->id, (unsigned long long)r->len,
			                   (unsigned long long)r->addr,
			                   (unsigned long long)IOD_XFER_REGION_BYTES_MAX);
		if (r->mem > IOD_XFER_MEM_GPU || r->rkey_len == 0 ||
		    r->rkey_len > IOD_XFER_RKEY_BYTES_MAX)
			return iod_err_set(
			    e, -EPROTO,
			    "xfer: byte %zu: region %u: memory kind %u or key of %u bytes", at, i,
			    r->mem, r->rkey_len);
		for (unsigned j = 0; j < i; j++)
			if (m->regions[j].id == r->id)
				return iod_err_set(e, -EPROTO, "xfer: byte %zu: region id %u twice",
				                   at, r->id);
		r->rkey = get_bytes(&c, r->rkey_len, "region.rkey");
		if (c.bad)
			return short_msg(&c, e);
	}
	m->nregions = (uint16_t)nr;
	if (c.off != len)
		return iod_err_set(e, -EPROTO, "xfer: byte %zu: %zu bytes after the last region",
		                   c.off, len - c.off);
	return 0;
}

int iod_xfer_wire_notif_decode(const uint8_t *buf, size_t len, struct iod_xfer_wire_notif *n,
                               struct iod_err *e)
{
	IOD_ASSERT(buf || len == 0);
	IOD_ASSERT(n);
	memset(n, 0, sizeof(*n));
	struct cur c = {buf, len, 0, NULL};
	int rv = hdr_decode(&c, IOD_XFER_KIND_NOTIF, e);
	if (rv || (rv = name_decode(&c, n->name, e)))
		return rv;
	n->seq = get_le(&c, 8, "seq");
	uint64_t ml = get_le(&c, 2, "msg_len");
	if (!c.bad && ml > IOD_XFER_NOTIF_BYTES_MAX)
		return iod_err_set(e, -EPROTO,
		                   "xfer: byte %zu: notification of %llu bytes, at most %d",
		                   c.off - 2, (unsigned long long)ml, IOD_XFER_NOTIF_BYTES_MAX);
	n->msg = get_bytes(&c, (size_t)ml, "msg");
	n->msg_len = (uint16_t)ml;
	if (c.bad)
		return short_msg(&c, e);
	if (c.off != len)
		return iod_err_set(e, -EPROTO, "xfer: byte %zu: %zu bytes after the message", c.off,
		                   len - c.off);
	return 0;
}
