/*
 * objects.c: the one place that knows the keys of the cluster's objects
 * (include/iod/objects.h).
 *
 * Each kind is a table of rows {key, type, offset, size, min, max,
 * default} built from its X-macro list, in the nginx style: reading,
 * writing, setting and clearing are one generic walk over the table, so a
 * new field is one row and one struct member. Old shapes that still load
 * (the Endpoint's "address" and "health") are read here and nowhere else.
 *
 * Pure: JSON in, values out; no I/O, no clock.
 */
#include "iod/objects.h"
#include "iod/net.h"
#include "iod/state.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One field of one kind. */
struct field {
	const char *key;        /* its JSON key */
	enum iod_obj_type type; /* how it is stored */
	size_t offset;          /* of its member in the kind's struct */
	size_t size;            /* of that member */
	int64_t min, max;       /* integer bounds */
	int64_t def;            /* an absent integer reads as this */
};

/* One kind: its struct's size and its rows. */
struct kind {
	const char *name;      /* "replica", for messages */
	size_t size;           /* sizeof its struct */
	const struct field *f; /* rows in write order */
	unsigned n;            /* rows */
};

#define ROW(S, f, k, t, m, lo, hi, d) \
	{k,                           \
	 IOD_OBJ_##t,                 \
	 offsetof(struct S, m),       \
	 sizeof(((struct S *)0)->m),  \
	 (int64_t)(lo),               \
	 (int64_t)(hi),               \
	 (int64_t)(d)},

#define NODE_ROW(f, k, t, m, lo, hi, d) ROW(iod_obj_node, f, k, t, m, lo, hi, d)
static const struct field node_fields[] = {IOD_OBJ_NODE_FIELDS(NODE_ROW)};
#define SERVICE_ROW(f, k, t, m, lo, hi, d) ROW(iod_obj_service, f, k, t, m, lo, hi, d)
static const struct field service_fields[] = {IOD_OBJ_SERVICE_FIELDS(SERVICE_ROW)};
#define MEMBER_ROW(f, k, t, m, lo, hi, d) ROW(iod_obj_member, f, k, t, m, lo, hi, d)
static const struct field member_fields[] = {IOD_OBJ_MEMBER_FIELDS(MEMBER_ROW)};
#define REPLICA_ROW(f, k, t, m, lo, hi, d) ROW(iod_obj_replica, f, k, t, m, lo, hi, d)
static const struct field replica_fields[] = {IOD_OBJ_REPLICA_FIELDS(REPLICA_ROW)};
#define ENDPOINT_ROW(f, k, t, m, lo, hi, d) ROW(iod_obj_endpoint, f, k, t, m, lo, hi, d)
static const struct field endpoint_fields[] = {IOD_OBJ_ENDPOINT_FIELDS(ENDPOINT_ROW)};
#define FAULT_ROW(f, k, t, m, lo, hi, d) ROW(iod_obj_fault, f, k, t, m, lo, hi, d)
static const struct field fault_fields[] = {IOD_OBJ_FAULT_FIELDS(FAULT_ROW)};
#define CHECKPOINT_ROW(f, k, t, m, lo, hi, d) ROW(iod_obj_checkpoint, f, k, t, m, lo, hi, d)
static const struct field checkpoint_fields[] = {IOD_OBJ_CHECKPOINT_FIELDS(CHECKPOINT_ROW)};
#define XFERPEER_ROW(f, k, t, m, lo, hi, d) ROW(iod_obj_xferpeer, f, k, t, m, lo, hi, d)
static const struct field xferpeer_fields[] = {IOD_OBJ_XFERPEER_FIELDS(XFERPEER_ROW)};
#define NETPOLICY_ROW(f, k, t, m, lo, hi, d) ROW(iod_obj_netpolicy, f, k, t, m, lo, hi, d)
static const struct field netpolicy_fields[] = {IOD_OBJ_NETPOLICY_FIELDS(NETPOLICY_ROW)};

static const struct kind kinds[IOD_OBJ_KIND_COUNT] = {
    [IOD_OBJ_KIND_NODE] = {"node", sizeof(struct iod_obj_node), node_fields,
                           IOD_OBJ_NODE_FIELD_COUNT},
    [IOD_OBJ_KIND_SERVICE] = {"service", sizeof(struct iod_obj_service), service_fields,
                              IOD_OBJ_SERVICE_FIELD_COUNT},
    [IOD_OBJ_KIND_MEMBER] = {"member", sizeof(struct iod_obj_member), member_fields,
                             IOD_OBJ_MEMBER_FIELD_COUNT},
    [IOD_OBJ_KIND_REPLICA] = {"replica", sizeof(struct iod_obj_replica), replica_fields,
                              IOD_OBJ_REPLICA_FIELD_COUNT},
    [IOD_OBJ_KIND_ENDPOINT] = {"endpoint", sizeof(struct iod_obj_endpoint), endpoint_fields,
                               IOD_OBJ_ENDPOINT_FIELD_COUNT},
    [IOD_OBJ_KIND_FAULT] = {"fault", sizeof(struct iod_obj_fault), fault_fields,
                            IOD_OBJ_FAULT_FIELD_COUNT},
    [IOD_OBJ_KIND_CHECKPOINT] = {"checkpoint", sizeof(struct iod_obj_checkpoint), checkpoint_fields,
                                 IOD_OBJ_CHECKPOINT_FIELD_COUNT},
    [IOD_OBJ_KIND_XFERPEER] = {"xferpeer", sizeof(struct iod_obj_xferpeer), xferpeer_fields,
                               IOD_OBJ_XFERPEER_FIELD_COUNT},
    [IOD_OBJ_KIND_NETPOLICY] = {"netpolicy", sizeof(struct iod_obj_netpolicy), netpolicy_fields,
                                IOD_OBJ_NETPOLICY_FIELD_COUNT},
};

_Static_assert(IOD_OBJ_REPLICA_FIELD_COUNT <= IOD_OBJ_FIELDS_MAX,
               "a Replica's presence bits are one uint64_t");
_Static_assert(IOD_OBJ_ENDPOINT_FIELD_COUNT <= IOD_OBJ_FIELDS_MAX,
               "an Endpoint's presence bits are one uint64_t");
_Static_assert(IOD_OBJ_CHECKPOINT_FIELD_COUNT <= IOD_OBJ_FIELDS_MAX,
               "a Checkpoint's presence bits are one uint64_t");
_Static_assert(IOD_OBJ_FIELDS_MAX <= 64, "presence bits are one uint64_t");
_Static_assert(IOD_OBJ_NODE_FIELD_COUNT <= IOD_OBJ_FIELDS_MAX &&
                   IOD_OBJ_SERVICE_FIELD_COUNT <= IOD_OBJ_FIELDS_MAX &&
                   IOD_OBJ_MEMBER_FIELD_COUNT <= IOD_OBJ_FIELDS_MAX &&
                   IOD_OBJ_FAULT_FIELD_COUNT <= IOD_OBJ_FIELDS_MAX &&
                   IOD_OBJ_XFERPEER_FIELD_COUNT <= IOD_OBJ_FIELDS_MAX &&
                   IOD_OBJ_NETPOLICY_FIELD_COUNT <= IOD_OBJ_FIELDS_MAX,
               "presence bits are one uint64_t");
_Static_assert(offsetof(struct iod_obj_replica, head) == 0 &&
                   offsetof(struct iod_obj_endpoint, head) == 0 &&
                   offsetof(struct iod_obj_node, head) == 0 &&
                   offsetof(struct iod_obj_service, head) == 0 &&
                   offsetof(struct iod_obj_member, head) == 0 &&
                   offsetof(struct iod_obj_fault, head) == 0,
               "every object starts with its head");

static const struct kind *kind_of(enum iod_obj_kind k)
{
	IOD_ASSERT((unsigned)k < IOD_OBJ_KIND_COUNT && kinds[k].f);
	return &kinds[k];
}

static void *member(void *obj, const struct field *f)
{
	return (char *)obj + f->offset;
}

static int64_t int_read(const void *p, size_t size, bool is_signed)
{
	switch (size) {
	case 1: return is_signed ? (int64_t) * (const int8_t *)p : (int64_t) * (const uint8_t *)p;
	case 2: return is_signed ? (int64_t) * (const int16_t *)p : (int64_t) * (const uint16_t *)p;
	case 4: return is_signed ? (int64_t) * (const int32_t *)p : (int64_t) * (const uint32_t *)p;
	default: return *(const int64_t *)p;
	}
}

static void int_write(void *p, size_t size, int64_t v)
{
	switch (size) {
	case 1: *(uint8_t *)p = (uint8_t)v; break;
	case 2: *(uint16_t *)p = (uint16_t)v; break;
	case 4: *(uint32_t *)p = (uint32_t)v; break;
	default: *(int64_t *)p = v; break;
	}
}

/* Field f to its default, without touching presence. */
static void field_reset(void *obj, const struct field *f)
{
	void *m = member(obj, f);
	switch (f->type) {
	case IOD_OBJ_STR: memset(m, 0, f->size); break;
	case IOD_OBJ_UINT:
	case IOD_OBJ_INT: int_write(m, f->size, f->def); break;
	case IOD_OBJ_BOOL: *(bool *)m = false; break;
	case IOD_OBJ_JSON:
		json_decref(*(json_t **)m);
		*(json_t **)m = NULL;
		break;
	}
}

void iod_obj_init(enum iod_obj_kind k, void *obj)
{
	const struct kind *d = kind_of(k);
	memset(obj, 0, d->size);
	for (unsigned i = 0; i < d->n; i++)
		field_reset(obj, &d->f[i]);
}

void iod_obj_free(enum iod_obj_kind k, void *obj)
{
	const struct kind *d = kind_of(k);
	struct iod_obj_head *h = obj;
	for (unsigned i = 0; i < d->n; i++)
		if (d->f[i].type == IOD_OBJ_JSON)
			field_reset(obj, &d->f[i]);
	json_decref(h->extra);
	iod_obj_init(k, obj);
}

bool iod_obj_has(const void *obj, unsigned f)
{
	IOD_ASSERT(f < IOD_OBJ_FIELDS_MAX);
	return (((const struct iod_obj_head *)obj)->has >> f) & 1;
}

const char *iod_obj_key(enum iod_obj_kind k, unsigned f)
{
	const struct kind *d = kind_of(k);
	IOD_ASSERT(f < d->n);
	return d->f[f].key;
}

/* Keep v under key in the object's extra (a key this version does not read). */
static int keep_extra(struct iod_obj_head *h, const char *key, json_t *v)
{
	if (!h->extra && !(h->extra = json_object()))
		return -ENOMEM;
	return json_object_set(h->extra, key, v) ? -ENOMEM : 0;
}

/* Read one known field; -EINVAL when v has the wrong type or is out of bounds. */
static int field_read(void *obj, const struct field *f, json_t *v)
{
	void *m = member(obj, f);
	switch (f->type) {
	case IOD_OBJ_STR: {
		if (!json_is_string(v) || json_string_length(v) >= f->size)
			return -EINVAL;
		memcpy(m, json_string_value(v), json_string_length(v) + 1);
		return 0;
	}
	case IOD_OBJ_UINT:
	case IOD_OBJ_INT: {
		if (!json_is_integer(v))
			return -EINVAL;
		json_int_t x = json_integer_value(v);
		if (x < f->min || x > f->max)
			return -EINVAL;
		int_write(m, f->size, x);
		return 0;
	}
	case IOD_OBJ_BOOL:
		if (!json_is_boolean(v))
			return -EINVAL;
		*(bool *)m = json_is_true(v);
		return 0;
	case IOD_OBJ_JSON: *(json_t **)m = json_incref(v); return 0;
	}
	return -EINVAL;
}

static const struct field *find_field(const struct kind *d, const char *key, unsigned *idx)
{
	for (unsigned i = 0; i < d->n; i++)
		if (!strcmp(d->f[i].key, key)) {
			*idx = i;
			return &d->f[i];
		}
	return NULL;
}

/* Shapes older writers stored, read into today's fields. */
static void upgrade(enum iod_obj_kind k, void *obj)
{
	if (k != IOD_OBJ_KIND_ENDPOINT)
		return;
	struct iod_obj_endpoint *ep = obj;
	json_t *x = ep->head.extra;
	const char *address = json_string_value(json_object_get(x, "address"));
	const char *health = json_string_value(json_object_get(x, "health"));
	/* "address": "host:port" (addr and port said the same) */
	if (address && !iod_obj_has(ep, IOD_OBJ_ENDPOINT_ADDR)) {
		const char *colon = strrchr(address, ':');
		size_t hl = colon ? (size_t)(colon - address) : strlen(address);
		char *end = NULL;
		unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
		if (hl < sizeof(ep->addr)) {
			memcpy(ep->addr, address, hl);
			ep->addr[hl] = 0;
			ep->head.has |= 1ull << IOD_OBJ_ENDPOINT_ADDR;
		}
		if (colon && end && !*end && port <= 65535 &&
		    !iod_obj_has(ep, IOD_OBJ_ENDPOINT_PORT)) {
			ep->port = (uint16_t)port;
			ep->head.has |= 1ull << IOD_OBJ_ENDPOINT_PORT;
		}
	}
	/* "health": "healthy" | "unhealthy" (healthy said the same) */
	if (health && !iod_obj_has(ep, IOD_OBJ_ENDPOINT_HEALTHY)) {
		ep->healthy = !strcmp(health, "healthy");
		ep->head.has |= 1ull << IOD_OBJ_ENDPOINT_HEALTHY;
	}
	json_object_del(x, "address");
	json_object_del(x, "health");
}

int iod_obj_from_json(enum iod_obj_kind k, const json_t *v, void *obj, struct iod_err *e)
{
	const struct kind *d = kind_of(k);
	struct iod_obj_head *h = obj;
	const char *key;
	json_t *x;
	int rc = 0;

	iod_obj_init(k, obj);
	if (!json_is_object(v))
		return iod_err_set(e, -EINVAL, "a %s must be a JSON object", d->name);
	json_object_foreach((json_t *)v, key, x)
	{
		unsigned i;
		const struct field *f = find_field(d, key, &i);
		if (!strcmp(key, "version") && json_is_integer(x) && json_integer_value(x) >= 0 &&
		    json_integer_value(x) <= UINT32_MAX) {
			h->version = (uint32_t)json_integer_value(x);
			continue;
		}
		if (f && json_is_null(x))
			continue; /* null: absent */
		if (f && !field_read(obj, f, x)) {
			h->has |= 1ull << i;
			continue;
		}
		if (f && !rc)
			rc = iod_err_set(e, -EINVAL,
			                 "%s: \"%s\" has the wrong type or is out of range",
			                 d->name, key);
		if (keep_extra(h, key, x)) {
			iod_obj_free(k, obj);
			return iod_err_set(e, -ENOMEM, "out of memory");
		}
	}
	upgrade(k, obj);
	return rc;
}

json_t *iod_obj_to_json(enum iod_obj_kind k, const void *obj)
{
	const struct kind *d = kind_of(k);
	const struct iod_obj_head *h = obj;
	json_t *o = json_object();
	int bad = !o;

	if (o)
		bad |= json_object_set_new(o, "version", json_integer(IOD_OBJ_VERSION));
	for (unsigned i = 0; o && i < d->n; i++) {
		const struct field *f = &d->f[i];
		const void *m = (const char *)obj + f->offset;
		json_t *x = NULL;
		if (!iod_obj_has(obj, i))
			continue;
		switch (f->type) {
		case IOD_OBJ_STR: x = json_string(m); break;
		case IOD_OBJ_UINT: x = json_integer(int_read(m, f->size, false)); break;
		case IOD_OBJ_INT: x = json_integer(int_read(m, f->size, true)); break;
		case IOD_OBJ_BOOL: x = json_boolean(*(const bool *)m); break;
		case IOD_OBJ_JSON: x = json_incref(*(json_t *const *)m); break;
		}
		if (x)
			bad |= json_object_set_new(o, f->key, x);
	}
	const char *key;
	json_t *x;
	json_object_foreach(h->extra, key, x)
	{
		unsigned i;
		if (find_field(d, key, &i) && iod_obj_has(obj, i))
			continue;
		if (strcmp(key, "version"))
			bad |= json_object_set(o, key, x);
	}
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int iod_obj_set_str(enum iod_obj_kind k, void *obj, unsigned f, const char *s)
{
	const struct kind *d = kind_of(k);
	IOD_ASSERT(f < d->n && d->f[f].type == IOD_OBJ_STR);
	if (!s)
		return -EINVAL;
	size_t l = strlen(s);
	if (l >= d->f[f].size)
		return -E2BIG;
	memcpy(member(obj, &d->f[f]), s, l + 1);
	((struct iod_obj_head *)obj)->has |= 1ull << f;
	json_object_del(((struct iod_obj_head *)obj)->extra, d->f[f].key);
	return 0;
}

int iod_obj_set_int(enum iod_obj_kind k, void *obj, unsigned f, int64_t v)
{
	const struct kind *d = kind_of(k);
	const struct field *x = &d->f[f];
	IOD_ASSERT(f < d->n);
	if (x->type == IOD_OBJ_BOOL) {
		*(bool *)member(obj, x) = v != 0;
	} else {
		IOD_ASSERT(x->type == IOD_OBJ_UINT || x->type == IOD_OBJ_INT);
		if (v < x->min || v > x->max)
			return -ERANGE;
		int_write(member(obj, x), x->size, v);
	}
	((struct iod_obj_head *)obj)->has |= 1ull << f;
	json_object_del(((struct iod_obj_head *)obj)->extra, x->key);
	return 0;
}

int iod_obj_set_json(enum iod_obj_kind k, void *obj, unsigned f, json_t *v)
{
	const struct kind *d = kind_of(k);
	IOD_ASSERT(f < d->n && d->f[f].type == IOD_OBJ_JSON);
	json_t **m = member(obj, &d->f[f]);
	json_decref(*m);
	*m = v;
	((struct iod_obj_head *)obj)->has |= 1ull << f;
	json_object_del(((struct iod_obj_head *)obj)->extra, d->f[f].key);
	return v ? 0 : -ENOMEM;
}

void iod_obj_clear(enum iod_obj_kind k, void *obj, unsigned f)
{
	const struct kind *d = kind_of(k);
	IOD_ASSERT(f < d->n);
	field_reset(obj, &d->f[f]);
	((struct iod_obj_head *)obj)->has &= ~(1ull << f);
	json_object_del(((struct iod_obj_head *)obj)->extra, d->f[f].key);
}

const char *iod_obj_peek_str(enum iod_obj_kind k, const json_t *v, unsigned f)
{
	const struct kind *d = kind_of(k);
	IOD_ASSERT(f < d->n && d->f[f].type == IOD_OBJ_STR);
	return json_string_value(json_object_get(v, d->f[f].key));
}

const json_t *iod_obj_peek_json(enum iod_obj_kind k, const json_t *v, unsigned f)
{
	const struct kind *d = kind_of(k);
	IOD_ASSERT(f < d->n);
	return json_object_get(v, d->f[f].key);
}

const char *iod_obj_peek_text(enum iod_obj_kind k, const json_t *v, unsigned f)
{
	const char *s = iod_obj_peek_str(k, v, f);
	return s ? s : "";
}

double iod_obj_peek_num(enum iod_obj_kind k, const json_t *v, unsigned f)
{
	const json_t *x = iod_obj_peek_json(k, v, f);
	return json_is_number(x) ? json_number_value(x) : NAN;
}

json_t *iod_obj_pick(enum iod_obj_kind k, const json_t *v, const unsigned *fs, size_t n)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < n; i++) {
		json_t *x = (json_t *)iod_obj_peek_json(k, v, fs[i]);
		if (json_object_set_new(o, iod_obj_key(k, fs[i]),
		                        x ? json_incref(x) : json_null())) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

int iod_obj_peek_int(enum iod_obj_kind k, const json_t *v, unsigned f, int64_t *out)
{
	const struct kind *d = kind_of(k);
	IOD_ASSERT(f < d->n && (d->f[f].type == IOD_OBJ_UINT || d->f[f].type == IOD_OBJ_INT));
	const json_t *x = json_object_get(v, d->f[f].key);
	if (!x || json_is_null(x))
		return -ENOENT;
	if (!json_is_integer(x) || json_integer_value(x) < d->f[f].min ||
	    json_integer_value(x) > d->f[f].max)
		return -EINVAL;
	*out = json_integer_value(x);
	return 0;
}

/* ---- typed forms ----------------------------------------------------------- */

#define TYPED_JSON(T, K)                                                                       \
	int iod_obj_##T##_from_json(const json_t *v, struct iod_obj_##T *o, struct iod_err *e) \
	{                                                                                      \
		return iod_obj_from_json(K, v, o, e);                                          \
	}                                                                                      \
	json_t *iod_obj_##T##_to_json(const struct iod_obj_##T *o)                             \
	{                                                                                      \
		return iod_obj_to_json(K, o);                                                  \
	}
TYPED_JSON(node, IOD_OBJ_KIND_NODE)
TYPED_JSON(service, IOD_OBJ_KIND_SERVICE)
TYPED_JSON(member, IOD_OBJ_KIND_MEMBER)
TYPED_JSON(fault, IOD_OBJ_KIND_FAULT)

uint32_t iod_obj_node_gpus(const struct iod_obj_node *n)
{
	const json_t *v = n->gpus;
	if (json_is_integer(v) && json_integer_value(v) > 0)
		return (uint32_t)IOD_MIN(json_integer_value(v), IOD_BITMAP_BITS);
	if (json_is_array(v))
		return (uint32_t)IOD_MIN(json_array_size(v), IOD_BITMAP_BITS);
	return 0;
}

const char *iod_obj_node_rack(const struct iod_obj_node *n)
{
	const char *r = json_string_value(json_object_get(n->labels, "rack"));
	if (iod_obj_has(n, IOD_OBJ_NODE_RACK))
		return n->rack;
	return r ? r : "";
}

json_t *iod_obj_service_spec(const json_t *value)
{
	json_t *v = json_deep_copy(value);
	if (!v)
		return NULL;
	json_object_del(v, "version");
	json_object_del(v, iod_obj_key(IOD_OBJ_KIND_SERVICE, IOD_OBJ_SERVICE_GENERATION));
	json_object_del(v, iod_obj_key(IOD_OBJ_KIND_SERVICE, IOD_OBJ_SERVICE_GPU));
	json_object_del(v, iod_obj_key(IOD_OBJ_KIND_SERVICE, IOD_OBJ_SERVICE_VIP));
	return v;
}

int iod_obj_replica_from_json(const json_t *v, struct iod_obj_replica *r, struct iod_err *e)
{
	return iod_obj_from_json(IOD_OBJ_KIND_REPLICA, v, r, e);
}

json_t *iod_obj_replica_to_json(const struct iod_obj_replica *r)
{
	return iod_obj_to_json(IOD_OBJ_KIND_REPLICA, r);
}

int iod_obj_endpoint_from_json(const json_t *v, struct iod_obj_endpoint *ep, struct iod_err *e)
{
	return iod_obj_from_json(IOD_OBJ_KIND_ENDPOINT, v, ep, e);
}

json_t *iod_obj_endpoint_to_json(const struct iod_obj_endpoint *ep)
{
	return iod_obj_to_json(IOD_OBJ_KIND_ENDPOINT, ep);
}

void iod_obj_endpoint_address(const struct iod_obj_endpoint *ep, char *buf, size_t len)
{
	IOD_ASSERT(len > 0);
	if (!ep->addr[0])
		buf[0] = 0;
	else
		snprintf(buf, len, "%s:%u", ep->addr, ep->port);
}

int iod_obj_fault_check(const struct iod_obj_fault *f, struct iod_err *e)
{
	if (!iod_obj_has(f, IOD_OBJ_FAULT_SERVICE) || !f->service[0])
		return iod_err_set(e, -EINVAL, "fault: \"service\" is required");
	if (!strcmp(f->action, "delay")) {
		if (f->delay_ms < 1)
			return iod_err_set(e, -EINVAL, "fault: a delay needs \"delay_ms\" (1..%u)",
			                   IOD_CHAOS_LATENCY_MAX_MS);
	} else if (!strcmp(f->action, "abort")) {
		if (f->status < 200 || f->status > 599)
			return iod_err_set(e, -EINVAL,
			                   "fault: an abort needs \"status\" (an HTTP status, "
			                   "200..599), not %u",
			                   f->status);
	} else {
		return iod_err_set(e, -EINVAL, "fault: \"action\" is delay or abort, not \"%s\"",
		                   f->action);
	}
	if (!f->until_ms)
		return iod_err_set(e, -EINVAL, "fault: \"until_ms\" (unix ms) is required");
	return 0;
}

int iod_obj_checkpoint_from_json(const json_t *v, struct iod_obj_checkpoint *c, struct iod_err *e)
{
	return iod_obj_from_json(IOD_OBJ_KIND_CHECKPOINT, v, c, e);
}

json_t *iod_obj_checkpoint_to_json(const struct iod_obj_checkpoint *c)
{
	return iod_obj_to_json(IOD_OBJ_KIND_CHECKPOINT, c);
}

int iod_obj_xferpeer_from_json(const json_t *v, struct iod_obj_xferpeer *p, struct iod_err *e)
{
	return iod_obj_from_json(IOD_OBJ_KIND_XFERPEER, v, p, e);
}

json_t *iod_obj_xferpeer_to_json(const struct iod_obj_xferpeer *p)
{
	return iod_obj_to_json(IOD_OBJ_KIND_XFERPEER, p);
}

int iod_obj_xferpeer_check(const struct iod_obj_xferpeer *p, struct iod_err *e)
{
	if (!p->service[0])
		return iod_err_set(e, -EINVAL, "xferpeer: \"service\" is required");
	if (!p->replica[0])
		return iod_err_set(e, -EINVAL, "xferpeer: \"replica\" is required");
	const char *md = json_string_value(p->md);
	if (!md || !md[0])
		return iod_err_set(e, -EINVAL,
		                   "xferpeer: \"md\" (the metadata blob in hex) is required");
	size_t n = strlen(md);
	if (n % 2 || n > IOD_XFER_MD_HEX_MAX)
		return iod_err_set(e, -EINVAL,
		                   "xferpeer: \"md\" has %zu hex digits: an even number up to %d",
		                   n, IOD_XFER_MD_HEX_MAX);
	for (size_t i = 0; i < n; i++)
		if (iod_hex_digit(md[i]) < 0)
			return iod_err_set(e, -EINVAL,
			                   "xferpeer: \"md\" byte %zu is not a hex digit", i);
	return 0;
}

int iod_obj_netpolicy_from_json(const json_t *v, struct iod_obj_netpolicy *p, struct iod_err *e)
{
	return iod_obj_from_json(IOD_OBJ_KIND_NETPOLICY, v, p, e);
}

json_t *iod_obj_netpolicy_to_json(const struct iod_obj_netpolicy *p)
{
	return iod_obj_to_json(IOD_OBJ_KIND_NETPOLICY, p);
}

/* "80", "8000-8100" or 80 -> [lo, hi]. */
static int ports_parse(const json_t *j, uint16_t *lo, uint16_t *hi)
{
	if (json_is_integer(j)) {
		json_int_t v = json_integer_value(j);
		if (v < 0 || v > 65535)
			return -EINVAL;
		*lo = *hi = (uint16_t)v;
		return 0;
	}
	const char *s = json_string_value(j);
	if (!s)
		return -EINVAL;
	if (!strcmp(s, "any")) {
		*lo = 0;
		*hi = 65535;
		return 0;
	}
	char *end;
	unsigned long a = strtoul(s, &end, 10), b = a;
	if (end == s || (*end && *end != '-'))
		return -EINVAL;
	if (*end == '-') {
		const char *s2 = end + 1;
		b = strtoul(s2, &end, 10);
		if (end == s2 || *end)
			return -EINVAL;
	}
	if (a > 65535 || b > 65535 || a > b)
		return -EINVAL;
	*lo = (uint16_t)a;
	*hi = (uint16_t)b;
	return 0;
}

int iod_obj_netpolicy_rule_parse(const json_t *j, struct iod_obj_netpolicy_rule *r,
                                 struct iod_err *e)
{
	static const char *const keys[] = {"name", "action",   "service",
	                                   "cidr", "protocol", "ports"};
	const char *k, *s = NULL;
	json_t *v;
	memset(r, 0, sizeof(*r));
	r->port_max = 65535;
	if (!json_is_object(j))
		return iod_err_set(e, -EINVAL, "a rule is an object with \"name\"");
	json_object_foreach((json_t *)j, k, v)
	{
		bool known = false;
		for (size_t i = 0; i < IOD_ARRAY_LEN(keys) && !known; i++)
			known = !strcmp(k, keys[i]);
		if (!known)
			return iod_err_set(e, -EINVAL,
			                   "unknown key \"%.64s\" (name, action, service, cidr, "
			                   "protocol, ports)",
			                   k);
	}
	if (iod_json_get_str(j, "name", &s) || !s[0] || strlen(s) >= IOD_NAME_MAX ||
	    !iod_state_name_valid(s))
		return iod_err_set(e, -EINVAL, "\"name\" must be a name ([A-Za-z0-9._-], 1..%d)",
		                   IOD_NAME_MAX - 1);
	iod_strlcpy(r->name, s, sizeof(r->name));
	const char *nm = r->name;
	if ((v = json_object_get(j, "action"))) {
		s = json_string_value(v);
		if (!s || (strcmp(s, "allow") && strcmp(s, "deny")))
			return iod_err_set(e, -EINVAL, "rule %s: \"action\" is allow or deny", nm);
		r->deny = !strcmp(s, "deny");
	}
	if (json_object_get(j, "service") && json_object_get(j, "cidr"))
		return iod_err_set(e, -EINVAL,
		                   "rule %s: a peer is a \"service\" or a \"cidr\", not both", nm);
	if ((v = json_object_get(j, "service"))) {
		s = json_string_value(v);
		if (!s || !s[0] || strlen(s) >= IOD_NAME_MAX || !iod_state_name_valid(s))
			return iod_err_set(e, -EINVAL,
			                   "rule %s: \"service\" must be a service name", nm);
		iod_strlcpy(r->peer, s, sizeof(r->peer));
	}
	if ((v = json_object_get(j, "cidr"))) {
		s = json_string_value(v);
		if (!s || (strcmp(s, "any") && iod_net_cidr_parse(s, &r->cidr_ip, &r->prefix_len)))
			return iod_err_set(e, -EINVAL,
			                   "rule %s: \"cidr\" must be an IPv4 CIDR like 10.0.0.0/8",
			                   nm);
		if (r->prefix_len < 32 && r->prefix_len)
			r->cidr_ip &= ~0u << (32 - r->prefix_len);
		if (!r->prefix_len)
			r->cidr_ip = 0;
	}
	if ((v = json_object_get(j, "protocol"))) {
		s = json_string_value(v);
		if (s && !strcmp(s, "tcp"))
			r->proto = IOD_NET_PROTO_TCP;
		else if (s && !strcmp(s, "udp"))
			r->proto = IOD_NET_PROTO_UDP;
		else if (s && !strcmp(s, "icmp"))
			r->proto = IOD_NET_PROTO_ICMP;
		else if (!s || strcmp(s, "any"))
			return iod_err_set(e, -EINVAL,
			                   "rule %s: \"protocol\" is tcp, udp, icmp or any", nm);
	}
	if ((v = json_object_get(j, "ports"))) {
		if (ports_parse(v, &r->port_min, &r->port_max))
			return iod_err_set(
			    e, -EINVAL, "rule %s: \"ports\" is N or \"LOW-HIGH\" in 0..65535", nm);
		if (r->proto != IOD_NET_PROTO_TCP && r->proto != IOD_NET_PROTO_UDP &&
		    (r->port_min != 0 || r->port_max != 65535))
			return iod_err_set(e, -EINVAL,
			                   "rule %s: \"ports\" need \"protocol\": tcp or udp", nm);
	}
	return 0;
}

int iod_obj_netpolicy_check(const struct iod_obj_netpolicy *p, struct iod_err *e)
{
	if (!p->service[0] || !iod_state_name_valid(p->service))
		return iod_err_set(e, -EINVAL,
		                   "netpolicy: \"service\" (the service it guards) is "
		                   "required");
	if (p->tenant[0] && !iod_state_name_valid(p->tenant))
		return iod_err_set(e, -EINVAL, "netpolicy: \"tenant\" must be a name");
	const json_t *dirs[2] = {p->ingress, p->egress};
	const char *dn[2] = {"ingress", "egress"};
	size_t total = 0;
	for (int d = 0; d < 2; d++) {
		if (!dirs[d])
			continue;
		if (!json_is_array(dirs[d]))
			return iod_err_set(e, -EINVAL, "netpolicy: \"%s\" is a list of rules",
			                   dn[d]);
		total += json_array_size(dirs[d]);
	}
	if (total > IOD_NET_SG_RULES_MAX)
		return iod_err_set(e, -E2BIG,
		                   "netpolicy: %zu rules; at most %d (IOD_NET_SG_RULES_MAX)", total,
		                   IOD_NET_SG_RULES_MAX);
	struct iod_obj_netpolicy_rule r, o;
	for (int d = 0; d < 2; d++)
		for (size_t i = 0; i < json_array_size(dirs[d]); i++) {
			if (iod_obj_netpolicy_rule_parse(json_array_get(dirs[d], i), &r, e)) {
				iod_err_wrap(e, "netpolicy: %s[%zu]", dn[d], i);
				return -EINVAL;
			}
			if (!strcmp(r.name, "default-deny"))
				return iod_err_set(
				    e, -EINVAL,
				    "netpolicy: %s[%zu]: \"default-deny\" names what no "
				    "rule allows; choose another name",
				    dn[d], i);
			for (int d2 = 0; d2 <= d; d2++)
				for (size_t k = 0; k < (d2 < d ? json_array_size(dirs[d2]) : i);
				     k++)
					if (!iod_obj_netpolicy_rule_parse(
					        json_array_get(dirs[d2], k), &o, NULL) &&
					    !strcmp(o.name, r.name))
						return iod_err_set(
						    e, -EINVAL,
						    "netpolicy: %s[%zu]: rule name \"%s\" "
						    "is used twice",
						    dn[d], i, r.name);
		}
	return 0;
}
