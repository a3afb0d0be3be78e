/*
 * snapshot.c: versioned, checksummed snapshots of the cluster state.
 *
 * Raft compacts its log by asking the state machine for a snapshot and
 * restores followers (and restarted servers) from one. The format is a
 * fixed 32-byte header ("IODSNAP\0", format version, body length, 64-bit
 * checksum of the body) followed by a JSON body sorted by kind and name, so
 * the same state always gives the same bytes (and the same digest).
 * Restore checks everything before it replaces anything: a corrupt or
 * foreign snapshot never leaves a half-restored state.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define SNAP_MAGIC "IODSNAP"
#define SNAP_VERSION 1u
#define SNAP_HEADER_BYTES 32u
#define SNAP_SEED 0x696f64736e6170ull /* "iodsnap" */

/* The state at one moment: O(n) copies of the objects (references to their
 * values, iod_state_items) and the leases; sorting and serialising wait for
 * iod_state_snapshot_encode, on any thread. */
struct iod_state_snap {
	uint64_t rev;                                       /* state revision */
	uint64_t next_lease;                                /* next lease id */
	json_t *leases;                                     /* [[id, ttl, deadline, owner, node]] */
	struct iod_state_item *items[IOD_STATE_KIND_COUNT]; /* objects by kind, unsorted */
	uint32_t n[IOD_STATE_KIND_COUNT];                   /* ... how many */
};

struct iod_state_snap *iod_state_snapshot_take(const struct iod_state *s)
{
	struct iod_state_snap *t = calloc(1, sizeof(*t));

	if (!t || !(t->leases = json_array()))
		goto oom;
	t->rev = s->rev;
	t->next_lease = s->next_lease;
	for (int k = 0; k < IOD_STATE_KIND_COUNT; k++) {
		int n = iod_state_items(s, (enum iod_state_kind)k, NULL, &t->items[k]);
		if (n < 0)
			goto oom;
		t->n[k] = (uint32_t)n;
	}
	for (uint32_t i = 0; i < s->leases_n; i++)
		if (json_array_append_new(t->leases,
		                          json_pack("[I,I,I,I,b]", (json_int_t)s->leases[i].id,
		                                    (json_int_t)s->leases[i].ttl_ms,
		                                    (json_int_t)s->leases[i].deadline_ms,
		                                    (json_int_t)(s->leases[i].owner >> 1),
		                                    s->leases[i].node)))
			goto oom;
	return t;
oom:
	iod_state_snapshot_free(t);
	return NULL;
}

void iod_state_snapshot_free(struct iod_state_snap *t)
{
	if (!t)
		return;
	for (int k = 0; k < IOD_STATE_KIND_COUNT; k++) {
		for (uint32_t i = 0; i < t->n[k]; i++)
			json_decref(t->items[k][i].value);
		free(t->items[k]);
	}
	json_decref(t->leases);
	free(t);
}

/* The body: revision, leases, then the objects sorted by kind and name. */
static json_t *body_json(struct iod_state_snap *t)
{
	json_t *objs = json_array();

	if (!objs)
		return NULL;
	for (int k = 0; k < IOD_STATE_KIND_COUNT; k++) {
		iod_state_items_sort(t->items[k], t->n[k]);
		for (uint32_t i = 0; i < t->n[k]; i++)
			if (json_array_append_new(objs, iod_state_item_json((enum iod_state_kind)k,
			                                                    &t->items[k][i]))) {
				json_decref(objs);
				return NULL;
			}
	}
	return json_pack("{s:I, s:I, s:O, s:o}", "rev", (json_int_t)t->rev, "next_lease",
	                 (json_int_t)t->next_lease, "leases", t->leases, "objects", objs);
}

static void put_u64(unsigned char *p, uint64_t x)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(x >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t x = 0;
	for (int i = 0; i < 8; i++)
		x |= (uint64_t)p[i] << (8 * i);
	return x;
}

int iod_state_snapshot_encode(struct iod_state_snap *t, void **buf, size_t *len)
{
	json_t *body = body_json(t);
	char *text = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	unsigned char *out;
	size_t n;

	json_decref(body);
	if (!text)
		return -ENOMEM;
	n = strlen(text);
	out = malloc(SNAP_HEADER_BYTES + n);
	if (!out) {
		free(text);
		return -ENOMEM;
	}
	memset(out, 0, SNAP_HEADER_BYTES);
	memcpy(out, SNAP_MAGIC, 8);
	put_u64(out + 8, SNAP_VERSION);
	put_u64(out + 16, n);
	put_u64(out + 24, iod_hash_bytes(text, n, SNAP_SEED));
	memcpy(out + SNAP_HEADER_BYTES, text, n);
	free(text);
	*buf = out;
	*len = SNAP_HEADER_BYTES + n;
	return 0;
}

int iod_state_snapshot(const struct iod_state *s, void **buf, size_t *len)
{
	struct iod_state_snap *t = iod_state_snapshot_take(s);
	int rc = t ? iod_state_snapshot_encode(t, buf, len) : -ENOMEM;
	iod_state_snapshot_free(t);
	return rc;
}

uint64_t iod_state_digest(const struct iod_state *s)
{
	void *buf = NULL;
	size_t len = 0;
	uint64_t d;

	if (iod_state_snapshot(s, &buf, &len))
		return 0;
	d = get_u64((const unsigned char *)buf + 24);
	free(buf);
	return d;
}

/* Build a fresh state from a parsed body into t (empty); -EINVAL on bad data. */
static int load_body(struct iod_state *t, json_t *b, struct iod_err *e)
{
	uint64_t rev = 0, next = 0;
	json_t *objs = json_object_get(b, "objects"), *leases = json_object_get(b, "leases");
	size_t i;
	json_t *x;

	if (iod_json_get_u64(b, "rev", &rev) || iod_json_get_u64(b, "next_lease", &next) ||
	    !json_is_array(objs) || !json_is_array(leases))
		return iod_err_set(e, -EINVAL, "snapshot body lacks rev/next_lease/objects/leases");
	if (json_array_size(leases) > IOD_STATE_LEASES_MAX ||
	    json_array_size(objs) > IOD_STATE_OBJECTS_MAX)
		return iod_err_set(e, -EINVAL, "snapshot exceeds the state's limits");
	json_array_foreach(leases, i, x)
	{
		json_int_t id = 0, ttl = 0, dl = 0, owner = 0;
		int node = 0;
		/* [id, ttl, deadline] before quotas; [.., owner, node] since */
		bool bad = json_array_size(x) == 3
		               ? json_unpack(x, "[III]", &id, &ttl, &dl) != 0
		               : json_unpack(x, "[IIIIb]", &id, &ttl, &dl, &owner, &node) != 0 ||
		                     owner < 0;
		if (bad || id <= 0 || (uint64_t)id >= next ||
		    (i && t->leases[i - 1].id >= (uint64_t)id))
			return iod_err_set(e, -EINVAL, "snapshot lease %zu is malformed", i);
		t->leases[i] =
		    (struct iod_state_lease){(uint64_t)id, (uint64_t)ttl, (uint64_t)dl,
		                             owner ? ((uint64_t)owner << 1) | 1 : 0, node != 0};
		t->leases_n++;
	}
	t->rev = rev;
	t->next_lease = next;
	json_array_foreach(objs, i, x)
	{
		const char *kind = NULL, *name = NULL;
		json_int_t orev = 0, crev = 0, lease = 0;
		json_t *value = NULL;
		enum iod_state_kind k;
		if (json_unpack(x, "{s:s, s:s, s:I, s:I, s:I, s:o}", "kind", &kind, "name", &name,
		                "rev", &orev, "create_rev", &crev, "lease", &lease, "value",
		                &value) ||
		    iod_state_kind_parse(kind, &k) || !iod_state_name_valid(name) ||
		    !json_is_object(value) || orev <= 0 || (uint64_t)orev > rev ||
		    iod_state_find(t, k, name))
			return iod_err_set(e, -EINVAL, "snapshot object %zu is malformed", i);
		/* Insert through the table directly: no history, keep revisions. */
		struct iod_state_obj *o = calloc(1, sizeof(*o));
		if (!o)
			return iod_err_set(e, -ENOMEM, "out of memory restoring a snapshot");
		o->kind = k;
		iod_strlcpy(o->name, name, sizeof(o->name));
		o->rev = (uint64_t)orev;
		o->create_rev = (uint64_t)crev;
		o->lease = (uint64_t)lease;
		o->value = json_incref(value);
		o->bytes = iod_state_value_bytes(value);
		t->bytes += o->bytes;
		uint64_t h = iod_hash_str(name) ^ iod_hash_u64((uint64_t)k + 1);
		while (t->total >= t->buckets_n * 2) {
			/* grow by rehashing into a bigger table */
			uint32_t nb = t->buckets_n * 2;
			struct iod_state_obj **b2 = calloc(nb, sizeof(*b2));
			if (!b2) {
				json_decref(o->value);
				free(o);
				return iod_err_set(e, -ENOMEM,
				                   "out of memory restoring a snapshot");
			}
			for (uint32_t bi = 0; bi < t->buckets_n; bi++) {
				struct iod_state_obj *p = t->buckets[bi], *nx;
				for (; p; p = nx) {
					nx = p->next;
					uint64_t ph = iod_hash_str(p->name) ^
					              iod_hash_u64((uint64_t)p->kind + 1);
					p->next = b2[ph & (nb - 1)];
					b2[ph & (nb - 1)] = p;
				}
			}
			free(t->buckets);
			t->buckets = b2;
			t->buckets_n = nb;
		}
		o->next = t->buckets[h & (t->buckets_n - 1)];
		t->buckets[h & (t->buckets_n - 1)] = o;
		t->count[k]++;
		t->total++;
	}
	t->hist_floor = rev;
	return 0;
}

int iod_state_restore(struct iod_state *s, const void *buf, size_t len, struct iod_err *e)
{
	const unsigned char *p = buf;
	uint64_t ver, n, sum;
	struct iod_state *t = NULL;
	json_error_t je;
	json_t *b;
	int rc;

	if (len < SNAP_HEADER_BYTES || memcmp(p, SNAP_MAGIC, 8))
		return iod_err_set(e, -EINVAL, "not an iod snapshot (bad magic)");
	ver = get_u64(p + 8);
	n = get_u64(p + 16);
	sum = get_u64(p + 24);
	if (ver != SNAP_VERSION)
		return iod_err_set(e, -EINVAL,
		                   "snapshot format %llu is not supported (this iod reads %u)",
		                   (unsigned long long)ver, SNAP_VERSION);
	if (n != len - SNAP_HEADER_BYTES)
		return iod_err_set(e, -EINVAL, "snapshot length %llu does not match %zu bytes",
		                   (unsigned long long)n, len - SNAP_HEADER_BYTES);
	if (iod_hash_bytes(p + SNAP_HEADER_BYTES, n, SNAP_SEED) != sum)
		return iod_err_set(e, -EINVAL, "snapshot checksum mismatch: the file is corrupt");
	b = json_loadb((const char *)p + SNAP_HEADER_BYTES, n, JSON_REJECT_DUPLICATES, &je);
	if (!b)
		return iod_err_set(e, -EINVAL, "snapshot body is not JSON: %s", je.text);
	rc = iod_state_new(&t);
	if (!rc)
		rc = load_body(t, b, e);
	json_decref(b);
	if (rc) {
		iod_state_free(t);
		return rc;
	}
	/* Swap t's contents into s, free s's old contents through t. */
	t->bytes_max = s->bytes_max;
	struct iod_state tmp = *s;
	*s = *t;
	*t = tmp;
	iod_state_free(t);
	return 0;
}
