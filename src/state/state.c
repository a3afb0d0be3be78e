/*
 * state.c: the cluster state machine: objects, revisions, leases, history.
 *
 * This is the pure core Raft replicates. A command is a JSON document; apply
 * parses it, checks every condition first, then changes the object table,
 * raises the revision once and appends the changes to a bounded history ring
 * that serves watches. Nothing here reads a clock (lease times arrive inside
 * commands), does I/O, or iterates in an order that depends on memory
 * addresses: lists and snapshots are sorted by kind and name.
 *
 * It must never change anything when a command fails: validation happens
 * before the first mutation, and limits are checked up front.
 */
#include "internal.h"
#include "iod/objects.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {
#define X(n, s, p) s,
    IOD_STATE_KINDS(X)
#undef X
};
static const char *const kind_plurals[] = {
#define X(n, s, p) p,
    IOD_STATE_KINDS(X)
#undef X
};

const char *iod_state_kind_name(enum iod_state_kind k)
{
	return (unsigned)k < IOD_STATE_KIND_COUNT ? kind_names[k] : "?";
}

const char *iod_state_kind_plural(enum iod_state_kind k)
{
	return (unsigned)k < IOD_STATE_KIND_COUNT ? kind_plurals[k] : "?";
}

int iod_state_kind_parse(const char *s, enum iod_state_kind *out)
{
	for (unsigned i = 0; i < IOD_STATE_KIND_COUNT; i++) {
		if (!strcmp(s, kind_names[i]) || !strcmp(s, kind_plurals[i])) {
			*out = (enum iod_state_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

bool iod_state_name_valid(const char *name)
{
	size_t n = 0;

	if (!name || !name[0] || name[0] == '.')
		return false;
	for (const char *p = name; *p; p++, n++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		          (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
		if (!ok || n + 1 >= IOD_NAME_MAX)
			return false;
	}
	return true;
}

/* ---- object table: chained hash on (kind, name) -------------------------- */

static uint64_t obj_hash(enum iod_state_kind k, const char *name)
{
	return iod_hash_str(name) ^ iod_hash_u64((uint64_t)k + 1);
}

struct iod_state_obj *iod_state_find(const struct iod_state *s, enum iod_state_kind k,
                                     const char *name)
{
	uint64_t h = obj_hash(k, name);
	for (struct iod_state_obj *o = s->buckets[h & (s->buckets_n - 1)]; o; o = o->next)
		if (o->kind == k && !strcmp(o->name, name))
			return o;
	return NULL;
}

static int table_grow(struct iod_state *s)
{
	uint32_t n = s->buckets_n * 2;
	struct iod_state_obj **b = calloc(n, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->buckets_n; i++) {
		struct iod_state_obj *o = s->buckets[i], *next;
		for (; o; o = next) {
			next = o->next;
			uint64_t h = obj_hash(o->kind, o->name);
			o->next = b[h & (n - 1)];
			b[h & (n - 1)] = o;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->buckets_n = n;
	return 0;
}

static void table_unlink(struct iod_state *s, struct iod_state_obj *x)
{
	uint64_t h = obj_hash(x->kind, x->name);
	struct iod_state_obj **pp = &s->buckets[h & (s->buckets_n - 1)];
	while (*pp && *pp != x)
		pp = &(*pp)->next;
	IOD_ASSERT(*pp == x);
	*pp = x->next;
	s->count[x->kind]--;
	s->total--;
}

size_t iod_state_value_bytes(const json_t *v)
{
	return v ? json_dumpb(v, NULL, 0, JSON_COMPACT) : 0;
}

static void obj_free(struct iod_state_obj *o)
{
	json_decref(o->value);
	free(o);
}

/* ---- history ------------------------------------------------------------ */

static void history_push(struct iod_state *s, uint8_t type, enum iod_state_kind k, const char *name,
                         json_t *value)
{
	struct iod_state_event *ev;

	if (s->hist_n == IOD_STATE_HISTORY_MAX) {
		ev = &s->hist[s->hist_head];
		/* Dropping the oldest event: watches must now start at or after it. */
		if (ev->rev > s->hist_floor)
			s->hist_floor = ev->rev;
		json_decref(ev->value);
		s->hist_head = (s->hist_head + 1) % IOD_STATE_HISTORY_MAX;
		s->hist_n--;
	}
	ev = &s->hist[(s->hist_head + s->hist_n) % IOD_STATE_HISTORY_MAX];
	ev->rev = s->rev + 1; /* the revision being applied */
	ev->type = type;
	ev->kind = k;
	iod_strlcpy(ev->name, name, sizeof(ev->name));
	ev->value = value ? json_incref(value) : NULL;
	s->hist_n++;
}

static void history_clear(struct iod_state *s)
{
	for (uint32_t i = 0; i < s->hist_n; i++)
		json_decref(s->hist[(s->hist_head + i) % IOD_STATE_HISTORY_MAX].value);
	s->hist_head = 0;
	s->hist_n = 0;
}

/* ---- life cycle --------------------------------------------------------- */

int iod_state_new(struct iod_state **out)
{
	struct iod_state *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->buckets_n = 1024;
	s->bytes_max = IOD_STATE_BYTES_MAX;
	s->buckets = calloc(s->buckets_n, sizeof(*s->buckets));
	s->hist = calloc(IOD_STATE_HISTORY_MAX, sizeof(*s->hist));
	s->leases = calloc(IOD_STATE_LEASES_MAX, sizeof(*s->leases));
	if (!s->buckets || !s->hist || !s->leases) {
		iod_state_free(s);
		return -ENOMEM;
	}
	s->next_lease = 1;
	*out = s;
	return 0;
}

static void objects_clear(struct iod_state *s)
{
	for (uint32_t i = 0; i < s->buckets_n; i++) {
		struct iod_state_obj *o = s->buckets[i], *next;
		for (; o; o = next) {
			next = o->next;
			obj_free(o);
		}
		s->buckets[i] = NULL;
	}
	memset(s->count, 0, sizeof(s->count));
	s->total = 0;
}

void iod_state_free(struct iod_state *s)
{
	if (!s)
		return;
	if (s->buckets)
		objects_clear(s);
	if (s->hist)
		history_clear(s);
	free(s->buckets);
	free(s->hist);
	free(s->leases);
	free(s);
}

uint64_t iod_state_rev(const struct iod_state *s)
{
	return s->rev;
}

uint32_t iod_state_count(const struct iod_state *s, enum iod_state_kind k)
{
	return (unsigned)k < IOD_STATE_KIND_COUNT ? s->count[k] : 0;
}

uint32_t iod_state_total(const struct iod_state *s)
{
	return s->total;
}

uint64_t iod_state_history_floor(const struct iod_state *s)
{
	return s->hist_floor;
}

/* ---- leases ------------------------------------------------------------- */

struct iod_state_lease *iod_state_lease_find(const struct iod_state *s, uint64_t id)
{
	/* Leases are few (bounded) and kept sorted by id: binary search. */
	uint32_t lo = 0, hi = s->leases_n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (s->leases[mid].id == id)
			return &s->leases[mid];
		if (s->leases[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

uint64_t iod_state_lease_next_deadline_ms(const struct iod_state *s)
{
	uint64_t best = 0;
	for (uint32_t i = 0; i < s->leases_n; i++)
		if (!best || s->leases[i].deadline_ms < best)
			best = s->leases[i].deadline_ms;
	return best;
}

void iod_state_set_bytes_max(struct iod_state *s, uint64_t bytes)
{
	s->bytes_max = bytes;
}

uint64_t iod_state_bytes(const struct iod_state *s)
{
	return s->bytes;
}

uint32_t iod_state_lease_count(const struct iod_state *s)
{
	return s->leases_n;
}

/* ---- mutation primitives (conditions already checked) ------------------- */

/* Put value (its iod_state_value_bytes: bytes) under k/name. */
static int do_put_sized(struct iod_state *s, enum iod_state_kind k, const char *name, json_t *value,
                        size_t bytes, uint64_t lease)
{
	struct iod_state_obj *o = iod_state_find(s, k, name);

	if (!o) {
		if (s->total >= IOD_STATE_OBJECTS_MAX)
			return -ENOSPC;
		if (s->total >= s->buckets_n * 2 && s->buckets_n < (1u << 20) && table_grow(s))
			return -ENOMEM;
		o = calloc(1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		o->kind = k;
		iod_strlcpy(o->name, name, sizeof(o->name));
		o->create_rev = s->rev + 1;
		uint64_t h = obj_hash(k, name);
		o->next = s->buckets[h & (s->buckets_n - 1)];
		s->buckets[h & (s->buckets_n - 1)] = o;
		s->count[k]++;
		s->total++;
	} else {
		json_decref(o->value);
		s->bytes -= o->bytes;
	}
	o->value = json_incref(value);
	o->bytes = bytes;
	s->bytes += o->bytes;
	o->rev = s->rev + 1;
	o->lease = lease;
	history_push(s, IOD_STATE_EV_PUT, k, name, value);
	return 0;
}

static void do_delete(struct iod_state *s, struct iod_state_obj *o)
{
	s->bytes -= o->bytes;
	history_push(s, IOD_STATE_EV_DELETE, o->kind, o->name, NULL);
	table_unlink(s, o);
	obj_free(o);
}

/* ---- command parsing ---------------------------------------------------- */

static int fail(struct iod_state_result *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct iod_state_result *r, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	r->code = code;
	return code;
}

/* A parsed put/delete with its condition. */
struct op {
	bool is_put;           /* put (else delete) */
	enum iod_state_kind k; /* object kind */
	const char *name;      /* object name (borrowed from the command) */
	json_t *value;         /* put: the value (borrowed) */
	uint64_t lease;        /* put: lease id or 0 */
	bool has_prev;         /* a compare-and-swap condition is present */
	uint64_t prev_rev;     /* 0 = must not exist; else must be at this rev */
	bool if_exists;        /* delete: absence is not an error (deploy pruning) */
	size_t bytes;          /* put: iod_state_value_bytes(value), measured once */
};

static int parse_op(const struct iod_state *s, json_t *j, bool is_put, struct op *op,
                    struct iod_state_result *r)
{
	const char *kind = NULL;
	json_t *prev;

	memset(op, 0, sizeof(*op));
	op->is_put = is_put;
	if (iod_json_get_str(j, "kind", &kind) || iod_state_kind_parse(kind, &op->k))
		return fail(r, -EINVAL,
		            "command needs \"kind\": one of node, service, replica, "
		            "endpoint, policy, config");
	if (iod_json_get_str(j, "name", &op->name) || !iod_state_name_valid(op->name))
		return fail(r, -EINVAL,
		            "command needs a valid \"name\" (1-%d of A-Z a-z 0-9 . _ -)",
		            IOD_NAME_MAX - 1);
	if (is_put) {
		op->value = json_object_get(j, "value");
		if (!json_is_object(op->value))
			return fail(r, -EINVAL, "%s/%s: \"value\" must be a JSON object",
			            kind_names[op->k], op->name);
		json_t *l = json_object_get(j, "lease");
		if (l && (!json_is_integer(l) || json_integer_value(l) < 0))
			return fail(r, -EINVAL, "\"lease\" must be a lease id");
		op->lease = l ? (uint64_t)json_integer_value(l) : 0;
		if (op->lease && !iod_state_lease_find(s, op->lease))
			return fail(r, -ENOENT, "lease %llu does not exist (expired or revoked)",
			            (unsigned long long)op->lease);
	}
	prev = json_object_get(j, "prev_rev");
	if (prev && !json_is_null(prev)) {
		if (!json_is_integer(prev) || json_integer_value(prev) < 0)
			return fail(r, -EINVAL, "\"prev_rev\" must be a revision >= 0");
		op->has_prev = true;
		op->prev_rev = (uint64_t)json_integer_value(prev);
	}
	return 0;
}

/* Check an op's condition against the current state. */
static int check_op(const struct iod_state *s, const struct op *op, struct iod_state_result *r)
{
	const struct iod_state_obj *o = iod_state_find(s, op->k, op->name);
	uint64_t cur = o ? o->rev : 0;

	if (op->has_prev && cur != op->prev_rev) {
		r->cur_rev = cur;
		return fail(r, -ECANCELED,
		            "%s/%s: revision is %llu, not %llu (changed by someone else: read it "
		            "again and retry)",
		            kind_names[op->k], op->name, (unsigned long long)cur,
		            (unsigned long long)op->prev_rev);
	}
	if (!op->is_put && !o && !op->has_prev && !op->if_exists)
		return fail(r, -ENOENT, "%s/%s not found", kind_names[op->k], op->name);
	return 0;
}

static int exec_op(struct iod_state *s, const struct op *op)
{
	if (op->is_put)
		return do_put_sized(s, op->k, op->name, op->value, op->bytes, op->lease);
	struct iod_state_obj *o = iod_state_find(s, op->k, op->name);
	if (o) {
		do_delete(s, o);
		return 1;
	}
	return 0;
}

/* How much a put op would grow the state's bytes (negative: shrink). Its
 * value's size is measured here once (a dump without output; a 512 KiB
 * value is ~1 ms on the loop), or taken from known (measured on the log's
 * worker, iod_state_cmd_sizes), and kept in op for the put. */
static int64_t put_delta(const struct iod_state *s, struct op *op, const size_t *known)
{
	const struct iod_state_obj *o = iod_state_find(s, op->k, op->name);
	op->bytes = known ? *known : iod_state_value_bytes(op->value);
	return (int64_t)op->bytes - (o ? (int64_t)o->bytes : 0);
}

static int bytes_check(const struct iod_state *s, int64_t grow, struct iod_state_result *r)
{
	if (grow <= 0 || s->bytes + (uint64_t)grow <= s->bytes_max)
		return 0;
	return fail(r, -ENOSPC,
	            "the state holds %llu bytes of values; this write adds %lld and the quota "
	            "is %llu (IOD_STATE_BYTES_MAX)",
	            (unsigned long long)s->bytes, (long long)grow,
	            (unsigned long long)s->bytes_max);
}

/* ---- commands ----------------------------------------------------------- */

/* known: the value's size, or NULL (measured here). */
static int cmd_single(struct iod_state *s, json_t *j, bool is_put, const size_t *known,
                      struct iod_state_result *r)
{
	struct op op;
	int rc = parse_op(s, j, is_put, &op, r);
	if (rc)
		return rc;
	if ((rc = check_op(s, &op, r)))
		return rc;
	if (is_put && !iod_state_find(s, op.k, op.name) && s->total >= IOD_STATE_OBJECTS_MAX)
		return fail(r, -ENOSPC, "the state holds %d objects, its limit",
		            IOD_STATE_OBJECTS_MAX);
	if (is_put && (rc = bytes_check(s, put_delta(s, &op, known), r)))
		return rc;
	rc = exec_op(s, &op);
	if (rc < 0)
		return fail(r, rc, "out of memory");
	r->changed = 1;
	return 0;
}

/* {"op":"txn","ops":[{"op":"put"|"delete",...}...]}: all conditions, then all
 * changes. known: the sizes of its ops' values (one per op), or NULL. */
static int cmd_txn(struct iod_state *s, json_t *j, const size_t *known, struct iod_state_result *r)
{
	json_t *ops = json_object_get(j, "ops");
	size_t n = json_array_size(ops), puts = 0;
	struct op *v;
	int rc = 0;

	if (!json_is_array(ops) || n == 0)
		return fail(r, -EINVAL, "txn needs a non-empty \"ops\" array");
	if (n > IOD_STATE_TXN_OPS_MAX)
		return fail(r, -ENOSPC, "txn has %zu operations; the limit is %d", n,
		            IOD_STATE_TXN_OPS_MAX);
	v = calloc(n, sizeof(*v));
	if (!v)
		return fail(r, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !rc; i++) {
		json_t *o = json_array_get(ops, i);
		const char *name = NULL;
		if (iod_json_get_str(o, "op", &name) ||
		    (strcmp(name, "put") && strcmp(name, "delete")))
			rc = fail(r, -EINVAL, "txn op %zu: \"op\" must be put or delete", i);
		else if (!(rc = parse_op(s, o, !strcmp(name, "put"), &v[i], r)))
			rc = check_op(s, &v[i], r);
		puts += v[i].is_put;
	}
	if (!rc && s->total + puts > IOD_STATE_OBJECTS_MAX)
		rc = fail(r, -ENOSPC, "txn would exceed %d objects", IOD_STATE_OBJECTS_MAX);
	int64_t grow = 0;
	for (size_t i = 0; i < n && !rc; i++)
		if (v[i].is_put)
			grow += put_delta(s, &v[i], known ? &known[i] : NULL);
	if (!rc)
		rc = bytes_check(s, grow, r);
	for (size_t i = 0; i < n && !rc; i++) {
		int x = exec_op(s, &v[i]);
		if (x < 0)
			rc = fail(r, x, "out of memory during txn");
		r->changed += 1;
	}
	free(v);
	return rc;
}

static bool replica_of(const struct iod_state_obj *o, const char *svc)
{
	const char *v = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, o->value, IOD_OBJ_REPLICA_SERVICE);
	return o->kind == IOD_STATE_REPLICA && v && !strcmp(v, svc);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The stored replicas of the deploy's services that its replica list no
 * longer names, in name order: O(n log n) (a loop over both lists was
 * 210 ms on the loop for a 2,000-replica redeploy). */
static int deploy_prune(const struct iod_state *s, json_t *svcs, json_t *reps,
                        struct iod_state_obj ***out, size_t *out_n, struct iod_state_result *r)
{
	size_t ns = json_array_size(svcs), nr = json_array_size(reps);
	struct iod_state_obj **all = NULL;
	uint32_t all_n = iod_state_sorted(s, IOD_STATE_REPLICA, &all);
	const char **names = malloc((ns + nr + 1) * sizeof(*names));
	struct iod_state_obj **prune = calloc(all_n + 1, sizeof(*prune));

	if ((all_n && !all) || !names || !prune) {
		free(all);
		free(names);
		free(prune);
		return fail(r, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < ns + nr; i++) {
		names[i] = "";
		iod_json_get_str(json_array_get(i < ns ? svcs : reps, i < ns ? i : i - ns), "name",
		                 &names[i]);
	}
	qsort(names, ns, sizeof(*names), name_cmp);      /* the services */
	qsort(names + ns, nr, sizeof(*names), name_cmp); /* the replicas kept */
	*out_n = 0;
	for (uint32_t a = 0; a < all_n; a++) {
		const char *svc =
		    iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, all[a]->value, IOD_OBJ_REPLICA_SERVICE);
		const char *key = all[a]->name;
		if (svc && bsearch(&svc, names, ns, sizeof(*names), name_cmp) &&
		    !bsearch(&key, names + ns, nr, sizeof(*names), name_cmp))
			prune[(*out_n)++] = all[a];
	}
	free(all);
	free(names);
	*out = prune;
	return 0;
}

/*
 * {"op":"deploy","services":[{"name","value"}...],"replicas":[{"name","value"}...],
 *  "netpolicies":[{"name","value"}...]}
 * Puts every service and replica, and the spec's security groups (optional;
 * a group the spec no longer has stays until `iod policy delete`); deletes
 * the replicas (and their endpoints) of those services that the new set no
 * longer names. One revision.
 */
/* The deploy command's shape: every object named, valid, a value, a service. */
static int deploy_check(json_t *svcs, json_t *reps, struct iod_state_result *r)
{
	size_t ns = json_array_size(svcs), nr = json_array_size(reps);

	if (!json_is_array(svcs) || ns == 0 || (reps && !json_is_array(reps)))
		return fail(r, -EINVAL,
		            "deploy needs \"services\" (non-empty) and \"replicas\" arrays");
	if (ns + nr > IOD_STATE_TXN_OPS_MAX)
		return fail(r, -ENOSPC, "deploy has %zu objects; the limit is %d", ns + nr,
		            IOD_STATE_TXN_OPS_MAX);
	for (size_t i = 0; i < ns + nr; i++) {
		json_t *o = i < ns ? json_array_get(svcs, i) : json_array_get(reps, i - ns);
		const char *name = NULL, *svc = NULL;
		if (iod_json_get_str(o, "name", &name) || !iod_state_name_valid(name) ||
		    !json_is_object(json_object_get(o, "value")))
			return fail(r, -EINVAL,
			            "deploy %s %zu needs a valid \"name\" and an object "
			            "\"value\"",
			            i < ns ? "service" : "replica", i < ns ? i : i - ns);
		if (i >= ns &&
		    !(svc = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, json_object_get(o, "value"),
		                             IOD_OBJ_REPLICA_SERVICE)))
			return fail(r, -EINVAL, "deploy replica %s: value needs \"service\"", name);
	}
	return 0;
}

static int cmd_deploy(struct iod_state *s, json_t *j, const size_t *known, size_t known_n,
                      struct iod_state_result *r)
{
	json_t *svcs = json_object_get(j, "services"), *reps = json_object_get(j, "replicas");
	size_t ns = json_array_size(svcs), nr = json_array_size(reps), i;
	int rc = deploy_check(svcs, reps, r);

	if (rc)
		return rc;
	/* Which existing replicas the new topology drops (deterministic: sorted). */
	struct iod_state_obj **prune = NULL;
	size_t prune_n = 0;
	if ((rc = deploy_prune(s, svcs, reps, &prune, &prune_n, r)))
		return rc;
	json_t *nps = json_object_get(j, "netpolicies");
	size_t nn = json_array_size(nps);
	if (nps && (!json_is_array(nps) || ns + nr + nn > IOD_STATE_TXN_OPS_MAX)) {
		free(prune);
		return fail(r, -EINVAL, "deploy \"netpolicies\" is an array of at most %zu",
		            IOD_STATE_TXN_OPS_MAX - ns - nr);
	}
	for (i = 0; i < nn; i++) {
		const char *name = NULL;
		json_t *o = json_array_get(nps, i);
		if (iod_json_get_str(o, "name", &name) || !iod_state_name_valid(name) ||
		    !json_is_object(json_object_get(o, "value"))) {
			free(prune);
			return fail(r, -EINVAL,
			            "deploy netpolicy %zu needs a valid \"name\" and an object "
			            "\"value\"",
			            i);
		}
	}
	if (s->total + ns + nr + nn > IOD_STATE_OBJECTS_MAX) {
		free(prune);
		return fail(r, -ENOSPC, "deploy would exceed %d objects", IOD_STATE_OBJECTS_MAX);
	}
	/* each value's size once (a dump without output): the quota check and
	 * the put use it (a 2,000-replica deploy measured them twice) */
	size_t *bytes = malloc((ns + nr) * sizeof(*bytes));
	int64_t grow = 0;
	for (i = 0; bytes && i < ns + nr; i++) {
		json_t *o = i < ns ? json_array_get(svcs, i) : json_array_get(reps, i - ns);
		const char *name = NULL;
		iod_json_get_str(o, "name", &name);
		const struct iod_state_obj *old =
		    iod_state_find(s, i < ns ? IOD_STATE_SERVICE : IOD_STATE_REPLICA, name);
		bytes[i] = known && known_n == ns + nr
		               ? known[i]
		               : iod_state_value_bytes(json_object_get(o, "value"));
		grow += (int64_t)bytes[i] - (old ? (int64_t)old->bytes : 0);
	}
	for (i = 0; i < nn; i++) {
		const char *name = NULL;
		json_t *o = json_array_get(nps, i);
		iod_json_get_str(o, "name", &name);
		const struct iod_state_obj *old = iod_state_find(s, IOD_STATE_NETPOLICY, name);
		grow += (int64_t)iod_state_value_bytes(json_object_get(o, "value")) -
		        (old ? (int64_t)old->bytes : 0);
	}
	if (!bytes || (rc = bytes_check(s, grow, r))) {
		free(bytes);
		free(prune);
		return bytes ? rc : fail(r, -ENOMEM, "out of memory");
	}
	for (i = 0; i < prune_n; i++) {
		struct iod_state_obj *ep = iod_state_find(s, IOD_STATE_ENDPOINT, prune[i]->name);
		if (ep)
			do_delete(s, ep);
		do_delete(s, prune[i]);
		r->changed += 1;
	}
	free(prune);
	for (i = 0; i < ns + nr && !rc; i++) {
		json_t *o = i < ns ? json_array_get(svcs, i) : json_array_get(reps, i - ns);
		const char *name = NULL;
		iod_json_get_str(o, "name", &name);
		rc = do_put_sized(s, i < ns ? IOD_STATE_SERVICE : IOD_STATE_REPLICA, name,
		                  json_object_get(o, "value"), bytes[i], 0);
		if (rc)
			rc = fail(r, rc, "deploy: out of memory");
		r->changed += 1;
	}
	for (i = 0; i < nn && !rc; i++) {
		json_t *o = json_array_get(nps, i), *v = json_object_get(o, "value");
		const char *name = NULL;
		iod_json_get_str(o, "name", &name);
		rc = do_put_sized(s, IOD_STATE_NETPOLICY, name, v, iod_state_value_bytes(v), 0);
		if (rc)
			rc = fail(r, rc, "deploy: out of memory");
		r->changed += 1;
	}
	free(bytes);
	return rc;
}

/* {"op":"undeploy","service":NAME}: the service, its replicas and their endpoints. */
static int cmd_undeploy(struct iod_state *s, json_t *j, struct iod_state_result *r)
{
	const char *svc = NULL;
	struct iod_state_obj **all = NULL, *so;
	uint32_t n;

	if (iod_json_get_str(j, "service", &svc) || !iod_state_name_valid(svc))
		return fail(r, -EINVAL, "undeploy needs a valid \"service\"");
	so = iod_state_find(s, IOD_STATE_SERVICE, svc);
	if (!so)
		return fail(r, -ENOENT, "service/%s not found", svc);
	n = iod_state_sorted(s, IOD_STATE_REPLICA, &all);
	if (n && !all)
		return fail(r, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		if (!replica_of(all[i], svc))
			continue;
		struct iod_state_obj *ep = iod_state_find(s, IOD_STATE_ENDPOINT, all[i]->name);
		if (ep)
			do_delete(s, ep);
		do_delete(s, all[i]);
		r->changed++;
	}
	free(all);
	do_delete(s, so);
	r->changed++;
	return 0;
}

static int lease_insert(struct iod_state *s, uint64_t id, uint64_t ttl_ms, uint64_t deadline_ms)
{
	uint32_t i = s->leases_n;
	if (s->leases_n >= IOD_STATE_LEASES_MAX)
		return -ENOSPC;
	while (i > 0 && s->leases[i - 1].id > id) {
		s->leases[i] = s->leases[i - 1];
		i--;
	}
	s->leases[i] =
	    (struct iod_state_lease){.id = id, .ttl_ms = ttl_ms, .deadline_ms = deadline_ms};
	s->leases_n++;
	return 0;
}

/* Remove a lease and delete every object attached to it (sorted order). */
static void lease_drop(struct iod_state *s, uint64_t id, struct iod_state_result *r)
{
	struct iod_state_lease *l = iod_state_lease_find(s, id);
	if (!l)
		return;
	uint32_t at = (uint32_t)(l - s->leases);
	memmove(&s->leases[at], &s->leases[at + 1], (s->leases_n - at - 1) * sizeof(*l));
	s->leases_n--;
	for (unsigned k = 0; k < IOD_STATE_KIND_COUNT; k++) {
		struct iod_state_obj **all = NULL;
		uint32_t n = iod_state_sorted(s, (enum iod_state_kind)k, &all);
		for (uint32_t i = 0; i < n && all; i++) {
			if (all[i]->lease == id) {
				do_delete(s, all[i]);
				r->changed++;
			}
		}
		free(all);
	}
}

static int cmd_lease(struct iod_state *s, const char *op, json_t *j, struct iod_state_result *r)
{
	uint64_t id = 0, ttl = 0, now = 0;

	if (!strcmp(op, "lease_grant")) {
		if (iod_json_get_u64(j, "ttl_ms", &ttl) || ttl == 0 ||
		    iod_json_get_u64(j, "now_ms", &now))
			return fail(r, -EINVAL, "lease_grant needs \"ttl_ms\" > 0 and \"now_ms\"");
		const char *owner_s = NULL;
		json_t *nj = json_object_get(j, "node");
		bool node = json_is_true(nj);
		uint64_t owner = 0;
		if (!iod_json_get_str(j, "owner", &owner_s) && owner_s[0])
			owner = iod_hash_str(owner_s) | 1;
		if (s->leases_n >= IOD_STATE_LEASES_MAX)
			return fail(r, -ENOSPC, "%d leases exist, the limit", IOD_STATE_LEASES_MAX);
		if (!node) {
			uint32_t general = 0, mine = 0;
			for (uint32_t i = 0; i < s->leases_n; i++) {
				general += !s->leases[i].node;
				mine += owner && s->leases[i].owner == owner && !s->leases[i].node;
			}
			if (general >= IOD_STATE_LEASES_MAX - IOD_STATE_LEASES_NODE_RESERVED)
				return fail(
				    r, -ENOSPC,
				    "%u leases exist; the other %d are kept for node agents "
				    "(IOD_STATE_LEASES_NODE_RESERVED)",
				    general, IOD_STATE_LEASES_NODE_RESERVED);
			if (mine >= IOD_STATE_LEASES_PER_CLIENT_MAX)
				return fail(r, -ENOSPC,
				            "%s holds %u leases, the per-client quota "
				            "(IOD_STATE_LEASES_PER_CLIENT_MAX)",
				            owner_s, mine);
		}
		id = s->next_lease++;
		lease_insert(s, id, ttl, now + ttl);
		struct iod_state_lease *nl = iod_state_lease_find(s, id);
		if (nl) {
			nl->owner = owner;
			nl->node = node;
		}
		r->lease_id = id;
		r->changed = 1;
		return 0;
	}
	if (!strcmp(op, "lease_renew")) {
		if (iod_json_get_u64(j, "id", &id) || iod_json_get_u64(j, "now_ms", &now))
			return fail(r, -EINVAL, "lease_renew needs \"id\" and \"now_ms\"");
		struct iod_state_lease *l = iod_state_lease_find(s, id);
		if (!l)
			return fail(r, -ENOENT, "lease %llu not found (expired?): grant a new one",
			            (unsigned long long)id);
		l->deadline_ms = now + l->ttl_ms;
		r->lease_id = id;
		r->changed = 1;
		return 0;
	}
	if (!strcmp(op, "lease_revoke")) {
		if (iod_json_get_u64(j, "id", &id))
			return fail(r, -EINVAL, "lease_revoke needs \"id\"");
		if (!iod_state_lease_find(s, id))
			return fail(r, -ENOENT, "lease %llu not found", (unsigned long long)id);
		lease_drop(s, id, r);
		r->changed++;
		return 0;
	}
	if (!strcmp(op, "lease_refresh")) {
		/* A new leader's first duty (as etcd's lessor does on promotion):
		 * every lease lives at least one TTL from now, so leases that could
		 * not be renewed while there was no leader are not expired for it. */
		if (iod_json_get_u64(j, "now_ms", &now))
			return fail(r, -EINVAL, "lease_refresh needs \"now_ms\"");
		for (uint32_t i = 0; i < s->leases_n; i++) {
			uint64_t d = now + s->leases[i].ttl_ms;
			if (d > s->leases[i].deadline_ms) {
				s->leases[i].deadline_ms = d;
				r->changed = 1;
			}
		}
		return 0;
	}
	/* lease_expire: every lease whose deadline is at or before now_ms. */
	if (iod_json_get_u64(j, "now_ms", &now))
		return fail(r, -EINVAL, "lease_expire needs \"now_ms\"");
	for (uint32_t i = 0; i < s->leases_n;) {
		if (s->leases[i].deadline_ms <= now) {
			lease_drop(s, s->leases[i].id, r);
			r->changed++;
		} else {
			i++;
		}
	}
	return 0;
}

json_t *iod_state_cmd_parse(const void *cmd, size_t len, struct iod_state_result *r)
{
	json_error_t je;
	json_t *j;

	memset(r, 0, sizeof(*r));
	if (len > IOD_STATE_CMD_MAX) {
		fail(r, -E2BIG, "command of %zu bytes exceeds %u", len, IOD_STATE_CMD_MAX);
		return NULL;
	}
	j = json_loadb(cmd, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		fail(r, -EINVAL, "command is not JSON: %s", je.text);
	return j;
}

int iod_state_apply(struct iod_state *s, const void *cmd, size_t len, struct iod_state_result *r)
{
	json_t *j = iod_state_cmd_parse(cmd, len, r);
	if (!j) {
		r->rev = s->rev;
		return r->code;
	}
	int rc = iod_state_apply_parsed(s, j, r);
	json_decref(j);
	return rc;
}

int iod_state_cmd_sizes(const json_t *j, size_t **bytes, size_t *n)
{
	const char *op = NULL;
	const json_t *svcs = json_object_get(j, "services"), *reps = json_object_get(j, "replicas");
	const json_t *ops = json_object_get(j, "ops");
	size_t ns = json_array_size(svcs), nr = json_array_size(reps);

	*bytes = NULL;
	*n = 0;
	if (iod_json_get_str(j, "op", &op))
		return 0;
	if (!strcmp(op, "put")) {
		ns = 1; /* the value itself */
		nr = 0;
	} else if (!strcmp(op, "txn")) {
		ns = json_array_size(ops); /* one per op (0 for a delete) */
		nr = 0;
	} else if (strcmp(op, "deploy")) {
		return 0;
	}
	if (ns + nr == 0)
		return 0;
	if (!(*bytes = malloc((ns + nr) * sizeof(**bytes))))
		return -ENOMEM;
	for (size_t i = 0; i < ns + nr; i++) {
		const json_t *o = j; /* a put: its value */
		if (!strcmp(op, "txn"))
			o = json_array_get(ops, i);
		else if (!strcmp(op, "deploy"))
			o = i < ns ? json_array_get(svcs, i) : json_array_get(reps, i - ns);
		(*bytes)[i] = iod_state_value_bytes(json_object_get(o, "value"));
	}
	*n = ns + nr;
	return 0;
}

int iod_state_apply_parsed(struct iod_state *s, json_t *j, struct iod_state_result *r)
{
	return iod_state_apply_sized(s, j, NULL, 0, r);
}

int iod_state_apply_sized(struct iod_state *s, json_t *j, const size_t *bytes, size_t bytes_n,
                          struct iod_state_result *r)
{
	const char *op = NULL;
	int rc;

	memset(r, 0, sizeof(*r));
	r->rev = s->rev;
	if (iod_json_get_str(j, "op", &op)) {
		rc = fail(r, -EINVAL, "command needs \"op\"");
	} else if (!strcmp(op, "put") || !strcmp(op, "delete")) {
		rc = cmd_single(s, j, !strcmp(op, "put"), bytes && bytes_n == 1 ? bytes : NULL, r);
	} else if (!strcmp(op, "txn")) {
		rc = cmd_txn(s, j,
		             bytes && bytes_n == json_array_size(json_object_get(j, "ops")) ? bytes
		                                                                            : NULL,
		             r);
	} else if (!strcmp(op, "deploy")) {
		rc = cmd_deploy(s, j, bytes, bytes_n, r);
	} else if (!strcmp(op, "undeploy")) {
		rc = cmd_undeploy(s, j, r);
	} else if (iod_str_has_prefix(op, "lease_") &&
	           (!strcmp(op, "lease_grant") || !strcmp(op, "lease_renew") ||
	            !strcmp(op, "lease_revoke") || !strcmp(op, "lease_expire") ||
	            !strcmp(op, "lease_refresh"))) {
		rc = cmd_lease(s, op, j, r);
	} else {
		rc = fail(r, -EINVAL, "unknown command op \"%s\"", op);
	}
	/* A change raises the revision once, whatever it touched. */
	if (rc == 0 && r->changed)
		s->rev++;
	r->rev = s->rev;
	return rc;
}

/* ---- reads -------------------------------------------------------------- */

static int obj_cmp(const void *a, const void *b)
{
	const struct iod_state_obj *x = *(const struct iod_state_obj *const *)a;
	const struct iod_state_obj *y = *(const struct iod_state_obj *const *)b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->name, y->name);
}

uint32_t iod_state_sorted(const struct iod_state *s, int kind, struct iod_state_obj ***out)
{
	uint32_t n = kind < 0 ? s->total : s->count[kind], at = 0;
	struct iod_state_obj **v;

	*out = NULL;
	if (n == 0)
		return 0;
	v = malloc(n * sizeof(*v));
	if (!v)
		return n; /* caller sees n > 0 with NULL: out of memory */
	for (uint32_t i = 0; i < s->buckets_n; i++)
		for (struct iod_state_obj *o = s->buckets[i]; o; o = o->next)
			if (kind < 0 || o->kind == (enum iod_state_kind)kind)
				v[at++] = o;
	IOD_ASSERT(at == n);
	qsort(v, n, sizeof(*v), obj_cmp);
	*out = v;
	return n;
}

json_t *iod_state_obj_json(const struct iod_state_obj *o)
{
	return json_pack("{s:s, s:s, s:I, s:I, s:I, s:O}", "kind", kind_names[o->kind], "name",
	                 o->name, "rev", (json_int_t)o->rev, "create_rev",
	                 (json_int_t)o->create_rev, "lease", (json_int_t)o->lease, "value",
	                 o->value);
}

json_t *iod_state_get(const struct iod_state *s, enum iod_state_kind k, const char *name)
{
	const struct iod_state_obj *o = iod_state_find(s, k, name);
	return o ? iod_state_obj_json(o) : NULL;
}

const json_t *iod_state_value(const struct iod_state *s, enum iod_state_kind k, const char *name)
{
	const struct iod_state_obj *o = iod_state_find(s, k, name);
	return o ? o->value : NULL;
}

json_t *iod_state_list(const struct iod_state *s, enum iod_state_kind k)
{
	struct iod_state_obj **v = NULL;
	uint32_t n = iod_state_sorted(s, (int)k, &v);
	json_t *items = json_array();

	if ((n && !v) || !items) {
		free(v);
		json_decref(items);
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(items, iod_state_obj_json(v[i]));
	free(v);
	return json_pack("{s:I, s:o}", "rev", (json_int_t)s->rev, "items", items);
}

int iod_state_items(const struct iod_state *s, enum iod_state_kind k, const char *after,
                    struct iod_state_item **out)
{
	uint32_t n = s->count[k], at = 0;
	struct iod_state_item *v;

	*out = NULL;
	if (n == 0)
		return 0;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->buckets_n; i++)
		for (struct iod_state_obj *o = s->buckets[i]; o; o = o->next) {
			if (o->kind != k || (after && after[0] && strcmp(o->name, after) <= 0))
				continue;
			IOD_ASSERT(at < n);
			memcpy(v[at].name, o->name, sizeof(v[at].name));
			v[at].rev = o->rev;
			v[at].create_rev = o->create_rev;
			v[at].lease = o->lease;
			v[at].value = json_incref(o->value);
			at++;
		}
	*out = v;
	return (int)at;
}

static int item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct iod_state_item *)a)->name,
	              ((const struct iod_state_item *)b)->name);
}

/* json_dump_callback sink: append, indenting every line after the first by
 * the depth of an item's value in a list (three levels of two spaces). The
 * dump's newlines are all structural: newlines in strings are escaped. */
static int dump_indented(const char *buf, size_t size, void *data)
{
	struct iod_buf *b = data;
	for (const char *p = buf, *end = buf + size; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t k = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (iod_buf_append(b, p, k) || (nl && iod_buf_append(b, "\n      ", 7)))
			return -1;
		p += k + (nl ? 1 : 0);
	}
	return 0;
}

void iod_state_items_sort(struct iod_state_item *v, uint32_t n)
{
	if (n)
		qsort(v, n, sizeof(*v), item_cmp);
}

json_t *iod_state_item_json(enum iod_state_kind k, const struct iod_state_item *it)
{
	return json_pack("{s:s, s:s, s:I, s:I, s:I, s:O}", "kind", kind_names[k], "name", it->name,
	                 "rev", (json_int_t)it->rev, "create_rev", (json_int_t)it->create_rev,
	                 "lease", (json_int_t)it->lease, "value", it->value);
}

int iod_state_items_dump(enum iod_state_kind k, uint64_t rev, struct iod_state_item *v, uint32_t n,
                         uint32_t limit, struct iod_buf *out)
{
	uint32_t take = limit && limit < n ? limit : n;
	int rc = 0;

	iod_state_items_sort(v, n);
	/* the text json_dumps(JSON_INDENT(2) | JSON_PRESERVE_ORDER) gives for
	 * iod_state_list's answer, written without building that tree (32k
	 * objects of it cost ~30 MB); names need no escaping (name rules) */
	rc = iod_buf_printf(out, "{\n  \"rev\": %llu,\n  \"items\": [", (unsigned long long)rev);
	for (uint32_t i = 0; !rc && i < take; i++) {
		rc = iod_buf_printf(
		    out,
		    "%s\n    {\n      \"kind\": \"%s\",\n      \"name\": \"%s\",\n"
		    "      \"rev\": %llu,\n      \"create_rev\": %llu,\n"
		    "      \"lease\": %llu,\n      \"value\": ",
		    i ? "," : "", kind_names[k], v[i].name, (unsigned long long)v[i].rev,
		    (unsigned long long)v[i].create_rev, (unsigned long long)v[i].lease);
		if (!rc && json_dump_callback(v[i].value, dump_indented, out,
		                              JSON_INDENT(2) | JSON_PRESERVE_ORDER))
			rc = -ENOMEM;
		if (!rc)
			rc = iod_buf_append(out, "\n    }", 6);
	}
	if (!rc)
		rc = iod_buf_printf(out, "%s]", take ? "\n  " : "");
	if (!rc && take < n)
		rc = iod_buf_printf(out, ",\n  \"continue\": \"%s\"", v[take - 1].name);
	if (!rc)
		rc = iod_buf_append(out, "\n}\n", 3);
	for (uint32_t i = 0; i < n; i++)
		json_decref(v[i].value);
	free(v);
	return rc ? -ENOMEM : 0;
}

int iod_state_watch(const struct iod_state *s, enum iod_state_kind k, bool all_kinds,
                    uint64_t after_rev, uint32_t max, json_t **events, struct iod_err *e)
{
	json_t *a;

	*events = NULL;
	if (after_rev < s->hist_floor)
		return iod_err_set(e, -ESTALE,
		                   "revision %llu compacted: history starts after revision %llu; "
		                   "list again and watch from the list's revision",
		                   (unsigned long long)after_rev,
		                   (unsigned long long)s->hist_floor);
	if (after_rev > s->rev)
		return iod_err_set(e, -EINVAL, "revision %llu is in the future (current is %llu)",
		                   (unsigned long long)after_rev, (unsigned long long)s->rev);
	a = json_array();
	if (!a)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->hist_n && json_array_size(a) < max; i++) {
		const struct iod_state_event *ev =
		    &s->hist[(s->hist_head + i) % IOD_STATE_HISTORY_MAX];
		if (ev->rev <= after_rev || (!all_kinds && ev->kind != k))
			continue;
		json_t *o = json_pack("{s:I, s:s, s:s, s:s}", "rev", (json_int_t)ev->rev, "type",
		                      ev->type == IOD_STATE_EV_PUT ? "put" : "delete", "kind",
		                      kind_names[ev->kind], "name", ev->name);
		if (o && ev->value)
			json_object_set(o, "value", ev->value);
		json_array_append_new(a, o);
	}
	*events = a;
	return 0;
}

/* ---- command builders --------------------------------------------------- */

static char *dump_new(json_t *j)
{
	char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return t;
}

static void set_prev(json_t *j, int64_t prev_rev)
{
	if (j && prev_rev >= 0)
		json_object_set_new(j, "prev_rev", json_integer(prev_rev));
}

char *iod_state_cmd_put(enum iod_state_kind k, const char *name, const json_t *value,
                        uint64_t lease_id, int64_t prev_rev)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:O}", "op", "put", "kind", iod_state_kind_name(k),
	                      "name", name, "value", value);
	if (j && lease_id)
		json_object_set_new(j, "lease", json_integer((json_int_t)lease_id));
	set_prev(j, prev_rev);
	return dump_new(j);
}

char *iod_state_cmd_delete(enum iod_state_kind k, const char *name, int64_t prev_rev)
{
	json_t *j = json_pack("{s:s, s:s, s:s}", "op", "delete", "kind", iod_state_kind_name(k),
	                      "name", name);
	set_prev(j, prev_rev);
	return dump_new(j);
}

char *iod_state_cmd_lease_grant(uint64_t ttl_ms, uint64_t now_ms)
{
	return iod_state_cmd_lease_grant_for(ttl_ms, now_ms, NULL, false);
}

char *iod_state_cmd_lease_grant_for(uint64_t ttl_ms, uint64_t now_ms, const char *owner, bool node)
{
	json_t *j = json_pack("{s:s, s:I, s:I}", "op", "lease_grant", "ttl_ms", (json_int_t)ttl_ms,
	                      "now_ms", (json_int_t)now_ms);
	if (j && owner && owner[0])
		json_object_set_new(j, "owner", json_string(owner));
	if (j && node)
		json_object_set_new(j, "node", json_true());
	return dump_new(j);
}

char *iod_state_cmd_lease_renew(uint64_t lease_id, uint64_t now_ms)
{
	return dump_new(json_pack("{s:s, s:I, s:I}", "op", "lease_renew", "id",
	                          (json_int_t)lease_id, "now_ms", (json_int_t)now_ms));
}

char *iod_state_cmd_lease_revoke(uint64_t lease_id)
{
	return dump_new(json_pack("{s:s, s:I}", "op", "lease_revoke", "id", (json_int_t)lease_id));
}

char *iod_state_cmd_lease_refresh(uint64_t now_ms)
{
	return dump_new(
	    json_pack("{s:s, s:I}", "op", "lease_refresh", "now_ms", (json_int_t)now_ms));
}

char *iod_state_cmd_lease_expire(uint64_t now_ms)
{
	return dump_new(
	    json_pack("{s:s, s:I}", "op", "lease_expire", "now_ms", (json_int_t)now_ms));
}
