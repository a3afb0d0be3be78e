/*
 * dp_wire.c: the device plugin API's messages on the wire (pure): gRPC's
 * length-prefixed framing and the protobuf encoding of the v1beta1
 * messages iod reads and writes (src/k8s/deviceplugin.proto). Only the
 * fields iod uses are decoded; every other field is skipped by its wire
 * type, as protobuf requires. docs/kubernetes.md.
 */
#include "iod/k8s.h"

#include <string.h>

long iod_grpc_frame_parse(const uint8_t *buf, size_t len, size_t max, const uint8_t **msg,
                          size_t *mlen, struct iod_err *e)
{
	if (len < 5)
		return 0;
	if (buf[0] > 1)
		return iod_err_set(e, -EINVAL, "gRPC message flag %u (0 or 1)", buf[0]);
	if (buf[0] == 1)
		return iod_err_set(e, -EINVAL,
		                   "compressed gRPC message (no grpc-encoding offered)");
	uint32_t n =
	    (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
	if (n > max)
		return iod_err_set(e, -EINVAL, "gRPC message of %u bytes (at most %zu)", n, max);
	if (len - 5 < n)
		return 0;
	*msg = buf + 5;
	*mlen = n;
	return 5 + (long)n;
}

int iod_grpc_frame_put(struct iod_buf *out, const void *msg, size_t len)
{
	uint8_t h[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
	                (uint8_t)len};
	int rc = iod_buf_append(out, h, sizeof(h));
	return rc ? rc : (len ? iod_buf_append(out, msg, len) : 0);
}

/* ---- decoding ------------------------------------------------------------ */

struct pb {
	const uint8_t *p, *end;
};

static int varint(struct pb *r, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end)
			return -1;
		uint8_t b = *r->p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1; /* more than 10 bytes */
}

/* One field: its number and wire type; for wire type 2 the bytes. */
struct pb_field {
	uint32_t num, wt;
	uint64_t v;
	const uint8_t *b;
	size_t blen;
};

/* 1 a field, 0 the end, -1 malformed. */
static int next(struct pb *r, struct pb_field *f)
{
	uint64_t key = 0;
	if (r->p == r->end)
		return 0;
	if (varint(r, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
		return -1;
	f->num = (uint32_t)(key >> 3);
	f->wt = (uint32_t)(key & 7);
	f->b = NULL;
	f->blen = 0;
	switch (f->wt) {
	case 0: return varint(r, &f->v) ? -1 : 1;
	case 1:
		if (r->end - r->p < 8)
			return -1;
		r->p += 8;
		return 1;
	case 5:
		if (r->end - r->p < 4)
			return -1;
		r->p += 4;
		return 1;
	case 2:
		if (varint(r, &f->v) || f->v > (uint64_t)(r->end - r->p))
			return -1;
		f->b = r->p;
		f->blen = (size_t)f->v;
		r->p += f->blen;
		return 1;
	default: /* groups (3, 4) are not in proto3; 6, 7 do not exist */ return -1;
	}
}

static int add_id(struct iod_dp_ids *ids, const struct pb_field *f, const char *what,
                  struct iod_err *e)
{
	if (f->wt != 2)
		return iod_err_set(e, -EINVAL, "%s: wire type %u (a string is 2)", what, f->wt);
	if (ids->n >= IOD_DP_IDS_MAX)
		return iod_err_set(e, -EINVAL, "%s: more than %u device ids", what, IOD_DP_IDS_MAX);
	if (f->blen == 0 || f->blen >= IOD_DP_ID_MAX)
		return iod_err_set(e, -EINVAL, "%s[%u]: device id of %zu bytes (1..%u)", what,
		                   ids->n, f->blen, IOD_DP_ID_MAX - 1);
	for (size_t i = 0; i < f->blen; i++)
		if (f->b[i] < 0x21 || f->b[i] > 0x7e)
			return iod_err_set(e, -EINVAL, "%s[%u]: device id is not printable ASCII",
			                   what, ids->n);
	memcpy(ids->id[ids->n], f->b, f->blen);
	ids->id[ids->n][f->blen] = '\0';
	ids->n++;
	return 0;
}

static int decode_creq(enum iod_dp_req_kind kind, const uint8_t *b, size_t len,
                       struct iod_dp_creq *c, struct iod_err *e)
{
	struct pb r = {b, b + len};
	struct pb_field f;
	int k = 0, rc = 0;
	while (!rc && (k = next(&r, &f)) == 1) {
		if (kind == IOD_DP_REQ_ALLOCATE) {
			if (f.num == 1)
				rc = add_id(&c->ids, &f, "devices_ids", e);
			continue;
		}
		if (f.num == 1)
			rc = add_id(&c->available, &f, "available_deviceIDs", e);
		else if (f.num == 2)
			rc = add_id(&c->must, &f, "must_include_deviceIDs", e);
		else if (f.num == 3) {
			if (f.wt != 0)
				return iod_err_set(e, -EINVAL, "allocation_size: wire type %u",
				                   f.wt);
			int64_t s = (int64_t)f.v;
			if (s < 0 || s > IOD_DP_IDS_MAX)
				return iod_err_set(e, -EINVAL, "allocation_size %lld (0..%u)",
				                   (long long)s, IOD_DP_IDS_MAX);
			c->size = (int32_t)s;
		}
	}
	if (rc)
		return rc;
	return k < 0 ? iod_err_set(e, -EINVAL, "malformed container request") : 0;
}

int iod_dp_req_decode(enum iod_dp_req_kind kind, const uint8_t *msg, size_t len,
                      struct iod_dp_req *out, struct iod_err *e)
{
	struct pb r = {msg, msg + len};
	struct pb_field f;
	int k = 0, rc = 0;
	memset(out, 0, sizeof(*out));
	if (kind == IOD_DP_REQ_PRESTART)
		out->n = 1;
	while (!rc && (k = next(&r, &f)) == 1) {
		if (f.num != 1)
			continue;
		if (kind == IOD_DP_REQ_PRESTART) {
			rc = add_id(&out->c[0].ids, &f, "devices_ids", e);
			continue;
		}
		if (f.wt != 2)
			return iod_err_set(e, -EINVAL, "container_requests: wire type %u", f.wt);
		if (out->n >= IOD_DP_CONTAINERS_MAX)
			return iod_err_set(e, -EINVAL, "more than %u container requests",
			                   IOD_DP_CONTAINERS_MAX);
		rc = decode_creq(kind, f.b, f.blen, &out->c[out->n++], e);
	}
	if (rc)
		return rc;
	return k < 0 ? iod_err_set(e, -EINVAL, "malformed protobuf message (%zu bytes)", len) : 0;
}

/* ---- encoding ------------------------------------------------------------ */

static int put_varint(struct iod_buf *o, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;
	do {
		b[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	return iod_buf_append(o, b, n);
}

static int put_key(struct iod_buf *o, uint32_t num, uint32_t wt)
{
	return put_varint(o, (uint64_t)num << 3 | wt);
}

static int put_bytes(struct iod_buf *o, uint32_t num, const void *b, size_t len)
{
	int rc = put_key(o, num, 2);
	rc = rc ? rc : put_varint(o, len);
	return rc || !len ? rc : iod_buf_append(o, b, len);
}

static int put_str(struct iod_buf *o, uint32_t num, const char *s)
{
	return put_bytes(o, num, s, strlen(s));
}

static int put_bool(struct iod_buf *o, uint32_t num, bool v)
{
	if (!v)
		return 0; /* proto3 leaves defaults out */
	int rc = put_key(o, num, 0);
	return rc ? rc : put_varint(o, 1);
}

/* A sub-message: encoded into its own buffer, then its bytes. */
static int put_msg(struct iod_buf *o, uint32_t num, const struct iod_buf *m)
{
	return put_bytes(o, num, m->data, m->len);
}

int iod_dp_enc_options(struct iod_buf *out, bool pre_start_required, bool preferred_available)
{
	int rc = put_bool(out, 1, pre_start_required);
	return rc ? rc : put_bool(out, 2, preferred_available);
}

int iod_dp_enc_register(struct iod_buf *out, const char *endpoint, const char *resource,
                        bool pre_start_required, bool preferred_available)
{
	struct iod_buf opt;
	iod_buf_init(&opt);
	int rc = put_str(out, 1, IOD_DP_API_VERSION);
	rc = rc ? rc : put_str(out, 2, endpoint);
	rc = rc ? rc : put_str(out, 3, resource);
	rc = rc ? rc : iod_dp_enc_options(&opt, pre_start_required, preferred_available);
	rc = rc ? rc : put_msg(out, 4, &opt);
	iod_buf_free(&opt);
	return rc;
}

int iod_dp_enc_devices(struct iod_buf *out, const struct iod_dp_device *d, uint32_t n)
{
	struct iod_buf dev, topo, numa;
	int rc = 0;
	iod_buf_init(&dev);
	iod_buf_init(&topo);
	iod_buf_init(&numa);
	for (uint32_t i = 0; !rc && i < n; i++) {
		dev.len = topo.len = numa.len = 0;
		rc = put_str(&dev, 1, d[i].id);
		rc = rc ? rc : put_str(&dev, 2, d[i].healthy ? "Healthy" : "Unhealthy");
		if (!rc && d[i].numa >= 0) {
			/* NUMANode{ID = 1}; ID 0 is proto3's default and is left out */
			if (d[i].numa > 0)
				rc = put_key(&numa, 1, 0) ? -ENOMEM
				                          : put_varint(&numa, (uint64_t)d[i].numa);
			rc = rc ? rc : put_msg(&topo, 1, &numa);
			rc = rc ? rc : put_msg(&dev, 3, &topo);
		}
		rc = rc ? rc : put_msg(out, 1, &dev);
	}
	iod_buf_free(&dev);
	iod_buf_free(&topo);
	iod_buf_free(&numa);
	return rc;
}

int iod_dp_enc_preferred(struct iod_buf *out, const struct iod_dp_ids *per_container, uint32_t n)
{
	struct iod_buf c;
	int rc = 0;
	iod_buf_init(&c);
	for (uint32_t i = 0; !rc && i < n; i++) {
		c.len = 0;
		for (uint32_t j = 0; !rc && j < per_container[i].n; j++)
			rc = put_str(&c, 1, per_container[i].id[j]);
		rc = rc ? rc : put_msg(out, 1, &c);
	}
	iod_buf_free(&c);
	return rc;
}

static int put_path(struct iod_buf *o, uint32_t num, const struct iod_dp_path *p, bool mount,
                    struct iod_buf *tmp)
{
	tmp->len = 0;
	int rc = put_str(tmp, 1, p->container_path);
	rc = rc ? rc : put_str(tmp, 2, p->host_path);
	if (!rc)
		rc = mount ? put_bool(tmp, 3, p->read_only) : put_str(tmp, 3, p->permissions);
	return rc ? rc : put_msg(o, num, tmp);
}

int iod_dp_enc_allocate(struct iod_buf *out, const struct iod_dp_alloc *a, uint32_t n)
{
	struct iod_buf c, t;
	int rc = 0;
	iod_buf_init(&c);
	iod_buf_init(&t);
	for (uint32_t i = 0; !rc && i < n; i++) {
		c.len = 0;
		for (uint32_t j = 0; !rc && j < a[i].nenvs; j++) { /* map<string,string> envs = 1 */
			t.len = 0;
			rc = put_str(&t, 1, a[i].envs[j].key);
			rc = rc ? rc : put_str(&t, 2, a[i].envs[j].value);
			rc = rc ? rc : put_msg(&c, 1, &t);
		}
		struct iod_buf u;
		iod_buf_init(&u);
		for (uint32_t j = 0; !rc && j < a[i].nmounts; j++)
			rc = put_path(&c, 2, &a[i].mounts[j], true, &u);
		for (uint32_t j = 0; !rc && j < a[i].ndevices; j++)
			rc = put_path(&c, 3, &a[i].devices[j], false, &u);
		iod_buf_free(&u);
		rc = rc ? rc : put_msg(out, 1, &c);
	}
	iod_buf_free(&c);
	iod_buf_free(&t);
	return rc;
}
