/*
 * check.c: the pure core of `iod chaos` (include/iod/chaos.h): a history
 * parser, a register linearizability checker (Wing-Gong search with Lowe's
 * memoisation of (linearized set, state), bounded) and set invariants.
 */
#include "iod/chaos.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void iod_chaos_history_free(struct iod_chaos_history *h)
{
	free(h->ops);
	free(h->vals);
	memset(h, 0, sizeof(*h));
}

int iod_chaos_history_add(struct iod_chaos_history *h, const struct iod_chaos_op *op)
{
	if (h->n == h->cap) {
		uint32_t cap = h->cap ? h->cap * 2 : 16;
		struct iod_chaos_op *o = realloc(h->ops, (size_t)cap * sizeof(*o));
		if (o == NULL)
			return -ENOMEM;
		h->ops = o;
		h->cap = cap;
	}
	h->ops[h->n++] = *op;
	return 0;
}

static int add_val(struct iod_chaos_history *h, int64_t v)
{
	if (h->nvals == h->vcap) {
		uint32_t cap = h->vcap ? h->vcap * 2 : 64;
		int64_t *o = realloc(h->vals, (size_t)cap * sizeof(*o));
		if (o == NULL)
			return -ENOMEM;
		h->vals = o;
		h->vcap = cap;
	}
	h->vals[h->nvals++] = v;
	return 0;
}

/* ---- parser ------------------------------------------------------------ */

static const char *const f_names[] = {"read", "write", "add", "transfer", "append"};

static int f_parse(const char *fs, enum iod_chaos_f *f, uint32_t line, struct iod_err *e)
{
	for (unsigned i = 0; i < sizeof(f_names) / sizeof(f_names[0]); i++)
		if (!strcmp(fs, f_names[i])) {
			*f = (enum iod_chaos_f)i;
			return 0;
		}
	return iod_err_set(e, -EINVAL,
	                   "line %u: unknown \"f\" \"%.32s\"; use read, write, add, transfer or "
	                   "append",
	                   line, fs);
}

/* open[i]: index of client's open op, found by a linear scan (clients are few) */
struct open_op {
	uint32_t client, op;
};

static int parse_value(struct iod_chaos_history *h, json_t *v, struct iod_chaos_op *op,
                       uint32_t line, struct iod_err *e)
{
	if (v == NULL || json_is_null(v)) {
		op->has_value = false;
		op->is_set = false;
		return 0;
	}
	if (json_is_integer(v)) {
		op->has_value = true;
		op->is_set = false;
		op->value = (int64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_array(v)) {
		op->is_set = true;
		op->has_value = true;
		op->set_off = h->nvals;
		op->set_n = 0;
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x)
		{
			if (!json_is_integer(x))
				return iod_err_set(
				    e, -EINVAL,
				    "line %u: \"value\" list holds a non-integer at %zu; "
				    "a set read is a list of integers",
				    line, i);
			if (add_val(h, (int64_t)json_integer_value(x)) < 0)
				return iod_err_set(e, -ENOMEM, "line %u: out of memory", line);
			op->set_n++;
		}
		return 0;
	}
	return iod_err_set(
	    e, -EINVAL, "line %u: \"value\" must be an integer, null or a list of integers", line);
}

static int parse_line(struct iod_chaos_history *h, const char *s, size_t len, uint32_t line,
                      struct open_op **open, uint32_t *nopen, struct iod_err *e)
{
	json_error_t je;
	json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
	int rc = 0;
	if (o == NULL)
		return iod_err_set(e, -EINVAL, "line %u: not JSON (col %d: %s)", line, je.column,
		                   je.text);
	if (!json_is_object(o)) {
		rc = iod_err_set(e, -EINVAL, "line %u: an event is a JSON object", line);
		goto out;
	}
	json_t *jc = json_object_get(o, "client"), *jt = json_object_get(o, "type"),
	       *jf = json_object_get(o, "f");
	if (!json_is_integer(jc) || json_integer_value(jc) < 0 ||
	    json_integer_value(jc) > (json_int_t)UINT32_MAX - 1) {
		rc = iod_err_set(e, -EINVAL, "line %u: \"client\" must be a non-negative integer",
		                 line);
		goto out;
	}
	if (!json_is_string(jt)) {
		rc = iod_err_set(e, -EINVAL,
		                 "line %u: \"type\" must be one of invoke, ok, fail, info", line);
		goto out;
	}
	if (!json_is_string(jf)) {
		rc = iod_err_set(e, -EINVAL,
		                 "line %u: \"f\" must be one of read, write, add, transfer, append",
		                 line);
		goto out;
	}
	const char *t = json_string_value(jt), *fs = json_string_value(jf);
	enum iod_chaos_f f = IOD_CHAOS_READ;
	if ((rc = f_parse(fs, &f, line, e)) < 0)
		goto out;
	json_t *jk = json_object_get(o, "key");
	if (jk && (!json_is_integer(jk) || json_integer_value(jk) < 0 ||
	           json_integer_value(jk) > (json_int_t)UINT32_MAX - 1)) {
		rc = iod_err_set(e, -EINVAL, "line %u: \"key\" must be a non-negative integer",
		                 line);
		goto out;
	}
	uint32_t client = (uint32_t)json_integer_value(jc);
	uint32_t k = 0;
	while (k < *nopen && (*open)[k].client != client)
		k++;
	uint32_t ev = h->events;
	if (strcmp(t, "invoke") == 0) {
		if (k < *nopen) {
			rc = iod_err_set(e, -EINVAL,
			                 "line %u: client %u invokes while its op from line %u is "
			                 "still open; complete it with ok, fail or info first",
			                 line, client, h->ops[(*open)[k].op].line);
			goto out;
		}
		if (h->n >= IOD_CHAOS_MAX_OPS) {
			rc = iod_err_set(e, -E2BIG, "line %u: more than %u operations", line,
			                 IOD_CHAOS_MAX_OPS);
			goto out;
		}
		struct iod_chaos_op op = {.client = client,
		                          .f = f,
		                          .res = IOD_CHAOS_INFO,
		                          .inv = ev,
		                          .cmp = IOD_CHAOS_NONE,
		                          .line = line,
		                          .key = jk ? (uint32_t)json_integer_value(jk) : 0};
		if ((rc = parse_value(h, json_object_get(o, "value"), &op, line, e)) < 0)
			goto out;
		if (f == IOD_CHAOS_TRANSFER && (!op.is_set || op.set_n != 3)) {
			rc = iod_err_set(e, -EINVAL,
			                 "line %u: a transfer's value is [from, to, amount]", line);
			goto out;
		}
		if (op.is_set && f != IOD_CHAOS_READ && f != IOD_CHAOS_TRANSFER) {
			rc = iod_err_set(e, -EINVAL,
			                 "line %u: only a read's value may be a list (or a "
			                 "transfer's: [from, to, amount])",
			                 line);
			goto out;
		}
		struct open_op *no = realloc(*open, (size_t)(*nopen + 1) * sizeof(*no));
		if (no == NULL || iod_chaos_history_add(h, &op) < 0) {
			if (no != NULL)
				*open = no;
			rc = iod_err_set(e, -ENOMEM, "line %u: out of memory", line);
			goto out;
		}
		*open = no;
		no[(*nopen)++] = (struct open_op){client, h->n - 1};
	} else {
		enum iod_chaos_res res;
		if (strcmp(t, "ok") == 0)
			res = IOD_CHAOS_OK;
		else if (strcmp(t, "fail") == 0)
			res = IOD_CHAOS_FAIL;
		else if (strcmp(t, "info") == 0)
			res = IOD_CHAOS_INFO;
		else {
			rc =
			    iod_err_set(e, -EINVAL,
			                "line %u: unknown \"type\" \"%.32s\"; use invoke, ok, fail "
			                "or info",
			                line, t);
			goto out;
		}
		if (k == *nopen) {
			rc = iod_err_set(e, -EINVAL,
			                 "line %u: client %u completes an op it never invoked",
			                 line, client);
			goto out;
		}
		struct iod_chaos_op *op = &h->ops[(*open)[k].op];
		if (op->f != f) {
			rc = iod_err_set(
			    e, -EINVAL,
			    "line %u: client %u completes a %s but invoked a %s at line %u", line,
			    client, fs, f_names[op->f], op->line);
			goto out;
		}
		op->res = res;
		op->cmp = res == IOD_CHAOS_INFO ? IOD_CHAOS_NONE : ev;
		json_t *v = json_object_get(o, "value");
		if (res == IOD_CHAOS_OK && f == IOD_CHAOS_READ &&
		    (rc = parse_value(h, v, op, line, e)) < 0)
			goto out;
		(*open)[k] = (*open)[--*nopen];
	}
	h->events++;
out:
	json_decref(o);
	return rc;
}

int iod_chaos_history_parse(const char *text, size_t len, struct iod_chaos_history *h,
                            struct iod_err *e)
{
	memset(h, 0, sizeof(*h));
	struct open_op *open = NULL;
	uint32_t nopen = 0, line = 0;
	int rc = 0;
	size_t i = 0;
	while (i < len) {
		size_t j = i;
		while (j < len && text[j] != '\n')
			j++;
		line++;
		size_t k = i;
		while (k < j && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r'))
			k++;
		if (k < j && (rc = parse_line(h, text + i, j - i, line, &open, &nopen, e)) < 0)
			break;
		i = j + 1;
	}
	free(open);
	if (rc < 0)
		iod_chaos_history_free(h);
	return rc;
}

const char *iod_chaos_verdict_name(enum iod_chaos_verdict v)
{
	switch (v) {
	case IOD_CHAOS_LINEARIZABLE: return "linearizable";
	case IOD_CHAOS_NOT_LINEARIZABLE: return "not linearizable";
	case IOD_CHAOS_UNKNOWN: return "unknown";
	}
	return "?";
}

/* ---- register linearizability ------------------------------------------- */

/* A search op: the register ops that matter, in invocation order. */
struct sop {
	uint32_t inv, cmp; /* cmp NONE: may stay unlinearized */
	bool write, has;
	int64_t v;
	uint32_t orig;
};

struct reg {
	bool has;
	int64_t v;
};

/* Memo of (linearized bitmap, state): open addressing over hashes. */
struct memo {
	uint64_t *keys; /* cap * (words + 2): bitmap words, has, value */
	uint8_t *used;
	size_t cap, n, words;
};

static uint64_t hash_key(const uint64_t *k, size_t w)
{
	uint64_t x = 1469598103934665603ull;
	for (size_t i = 0; i < w; i++) {
		x ^= k[i];
		x *= 1099511628211ull;
		x ^= x >> 29;
	}
	return x;
}

static int memo_grow(struct memo *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024, kw = m->words + 2;
	uint64_t *keys = calloc(cap, kw * sizeof(uint64_t));
	uint8_t *used = calloc(cap, 1);
	if (keys == NULL || used == NULL) {
		free(keys);
		free(used);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->used[i])
			continue;
		const uint64_t *k = m->keys + i * kw;
		size_t j = hash_key(k, kw) & (cap - 1);
		while (used[j])
			j = (j + 1) & (cap - 1);
		used[j] = 1;
		memcpy(keys + j * kw, k, kw * sizeof(uint64_t));
	}
	free(m->keys);
	free(m->used);
	m->keys = keys;
	m->used = used;
	m->cap = cap;
	return 0;
}

/* 1 if inserted, 0 if present, -ENOMEM */
static int memo_insert(struct memo *m, const uint64_t *k)
{
	size_t kw = m->words + 2;
	if ((m->n + 1) * 2 > m->cap && memo_grow(m) < 0)
		return -ENOMEM;
	size_t j = hash_key(k, kw) & (m->cap - 1);
	while (m->used[j]) {
		if (memcmp(m->keys + j * kw, k, kw * sizeof(uint64_t)) == 0)
			return 0;
		j = (j + 1) & (m->cap - 1);
	}
	m->used[j] = 1;
	memcpy(m->keys + j * kw, k, kw * sizeof(uint64_t));
	m->n++;
	return 1;
}

struct frame {
	uint32_t next, op;
	struct reg saved;
};

/* Searches ops s[0..n) whose events are all < limit (completions at or past
 * limit count as indeterminate). Returns the verdict, or -ENOMEM. */
static int search(const struct sop *all, uint32_t nall, uint32_t limit, uint64_t max_states,
                  uint64_t *states)
{
	struct sop *s = malloc(((size_t)nall + 1) * sizeof(*s));
	uint32_t n = 0, need = 0;
	if (s == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < nall; i++) {
		if (all[i].inv >= limit)
			continue;
		struct sop o = all[i];
		if (o.cmp != IOD_CHAOS_NONE && o.cmp >= limit) {
			if (!o.write)
				continue; /* an unfinished read constrains nothing */
			o.cmp = IOD_CHAOS_NONE;
		}
		if (o.cmp != IOD_CHAOS_NONE)
			need++;
		s[n++] = o;
	}
	size_t words = ((size_t)n + 63) / 64;
	uint64_t *key = calloc(words + 2, sizeof(uint64_t));
	struct frame *fr = malloc(((size_t)n + 1) * sizeof(*fr));
	struct memo m = {.words = words};
	int verdict = IOD_CHAOS_NOT_LINEARIZABLE;
	*states = 0;
	if (key == NULL || fr == NULL) {
		verdict = -ENOMEM;
		goto out;
	}
	struct reg st = {false, 0};
	uint32_t d = 0, done = 0;
	fr[0].next = 0;
	for (;;) {
		if (done == need) {
			verdict = IOD_CHAOS_LINEARIZABLE;
			break;
		}
		uint32_t minc = UINT32_MAX;
		for (uint32_t i = 0; i < n; i++)
			if (!(key[i / 64] >> (i % 64) & 1) && s[i].cmp < minc)
				minc = s[i].cmp;
		bool pushed = false;
		for (uint32_t i = fr[d].next; i < n && s[i].inv < minc; i++) {
			if (key[i / 64] >> (i % 64) & 1)
				continue;
			struct reg ns = st;
			if (s[i].write) {
				ns.has = s[i].has;
				ns.v = s[i].v;
			} else if (st.has != s[i].has || (st.has && st.v != s[i].v)) {
				continue;
			}
			key[i / 64] |= 1ull << (i % 64);
			key[words] = ns.has;
			key[words + 1] = (uint64_t)ns.v;
			int ins = memo_insert(&m, key);
			if (ins <= 0) {
				key[i / 64] &= ~(1ull << (i % 64));
				if (ins < 0) {
					verdict = -ENOMEM;
					goto out;
				}
				continue;
			}
			if (++*states > max_states) {
				verdict = IOD_CHAOS_UNKNOWN;
				goto out;
			}
			fr[d].next = i + 1;
			fr[d].op = i;
			fr[d].saved = st;
			if (s[i].cmp != IOD_CHAOS_NONE)
				done++;
			d++;
			fr[d].next = 0;
			st = ns;
			pushed = true;
			break;
		}
		if (pushed)
			continue;
		if (d == 0)
			break;
		d--;
		uint32_t i = fr[d].op;
		key[i / 64] &= ~(1ull << (i % 64));
		if (s[i].cmp != IOD_CHAOS_NONE)
			done--;
		st = fr[d].saved;
	}
out:
	free(m.keys);
	free(m.used);
	free(key);
	free(fr);
	free(s);
	return verdict;
}

uint32_t iod_chaos_history_acknowledged(const struct iod_chaos_history *h)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < h->n; i++)
		n += h->ops[i].res == IOD_CHAOS_OK && h->ops[i].cmp != IOD_CHAOS_NONE;
	return n;
}

int iod_chaos_check_register(const struct iod_chaos_history *h, uint64_t max_states,
                             struct iod_chaos_lin_result *r, struct iod_err *e)
{
	memset(r, 0, sizeof(*r));
	r->fail_op = IOD_CHAOS_NONE;
	if (iod_chaos_history_acknowledged(h) == 0) {
		/* only failed or indeterminate ops: any order explains them, so
		 * "linearizable" would say nothing */
		r->verdict = IOD_CHAOS_UNKNOWN;
		return 0;
	}
	if (max_states == 0)
		max_states = IOD_CHAOS_DEFAULT_STATES;
	if (h->n > IOD_CHAOS_MAX_OPS)
		return iod_err_set(e, -E2BIG, "history has %u ops, more than %u", h->n,
		                   IOD_CHAOS_MAX_OPS);
	struct sop *s = malloc(((size_t)h->n + 1) * sizeof(*s));
	if (s == NULL)
		return iod_err_set(e, -ENOMEM, "out of memory");
	uint32_t n = 0, limit = 0;
	for (uint32_t i = 0; i < h->n; i++) {
		const struct iod_chaos_op *o = &h->ops[i];
		if ((o->f != IOD_CHAOS_READ && o->f != IOD_CHAOS_WRITE) || o->is_set ||
		    o->res == IOD_CHAOS_FAIL)
			continue;
		bool indet = o->res == IOD_CHAOS_INFO || o->cmp == IOD_CHAOS_NONE;
		if (o->f == IOD_CHAOS_READ && indet)
			continue;
		s[n++] = (struct sop){.inv = o->inv,
		                      .cmp = indet ? IOD_CHAOS_NONE : o->cmp,
		                      .write = o->f == IOD_CHAOS_WRITE,
		                      .has = o->has_value,
		                      .v = o->value,
		                      .orig = i};
		if (o->inv + 1 > limit)
			limit = o->inv + 1;
		if (!indet && o->cmp + 1 > limit)
			limit = o->cmp + 1;
	}
	/* search() keeps invocation order: sort s by inv (ops usually are). */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && s[j - 1].inv > s[j].inv; j--) {
			struct sop t = s[j];
			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	uint64_t states = 0;
	int v = search(s, n, limit, max_states, &states);
	r->states = states;
	if (v < 0) {
		free(s);
		return iod_err_set(e, v, "out of memory checking %u ops", n);
	}
	r->verdict = (enum iod_chaos_verdict)v;
	if (v == IOD_CHAOS_NOT_LINEARIZABLE) {
		/* Not linearizable is monotone in the prefix: find the shortest one
		 * by bisection over completion events. */
		uint32_t lo = 0, hi = limit; /* prefix lo linearizable, hi not */
		while (hi - lo > 1) {
			uint32_t mid = lo + (hi - lo) / 2;
			uint64_t st2 = 0;
			int w = search(s, n, mid, max_states, &st2);
			if (w < 0) {
				free(s);
				return iod_err_set(e, w, "out of memory checking %u ops", n);
			}
			if (w == IOD_CHAOS_NOT_LINEARIZABLE)
				hi = mid;
			else
				lo = mid; /* linearizable (or unknown: keep the longer prefix) */
		}
		r->fail_events = hi;
		for (uint32_t i = 0; i < n; i++)
			if (s[i].cmp == hi - 1)
				r->fail_op = s[i].orig;
	}
	free(s);
	return 0;
}

/* ---- set invariants ------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static bool has_i64(const int64_t *sorted, uint32_t n, int64_t v)
{
	return n > 0 && bsearch(&v, sorted, n, sizeof(v), cmp_i64) != NULL;
}

static int push(int64_t **a, uint32_t *n, int64_t v)
{
	int64_t *x = realloc(*a, ((size_t)*n + 1) * sizeof(*x));
	if (x == NULL)
		return -ENOMEM;
	*a = x;
	x[(*n)++] = v;
	return 0;
}

void iod_chaos_set_result_free(struct iod_chaos_set_result *r)
{
	free(r->lost);
	free(r->unexpected);
	memset(r, 0, sizeof(*r));
}

int iod_chaos_check_set(const struct iod_chaos_history *h, struct iod_chaos_set_result *r,
                        struct iod_err *e)
{
	memset(r, 0, sizeof(*r));
	int64_t *added = malloc(((size_t)h->n + 1) * sizeof(*added));
	uint32_t nadded = 0;
	const struct iod_chaos_op *fin = NULL;
	if (added == NULL)
		return iod_err_set(e, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < h->n; i++) {
		const struct iod_chaos_op *o = &h->ops[i];
		if (o->f == IOD_CHAOS_ADD && o->res != IOD_CHAOS_FAIL && o->has_value)
			added[nadded++] = o->value;
		if (o->f == IOD_CHAOS_ADD && o->res == IOD_CHAOS_OK)
			r->acknowledged++;
		if (o->f == IOD_CHAOS_READ && o->is_set && o->res == IOD_CHAOS_OK &&
		    (fin == NULL || o->cmp > fin->cmp))
			fin = o;
	}
	qsort(added, nadded, sizeof(*added), cmp_i64);
	int rc = 0;
	int64_t *fv = NULL;
	if (fin == NULL) {
		r->no_final_read = true;
	} else {
		fv = malloc(((size_t)fin->set_n + 1) * sizeof(*fv));
		if (fv == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		if (fin->set_n) /* vals is NULL when no read held a value */
			memcpy(fv, h->vals + fin->set_off, (size_t)fin->set_n * sizeof(*fv));
		qsort(fv, fin->set_n, sizeof(*fv), cmp_i64);
		for (uint32_t i = 0; i < h->n; i++) {
			const struct iod_chaos_op *o = &h->ops[i];
			if (o->f == IOD_CHAOS_ADD && o->res == IOD_CHAOS_OK && o->has_value &&
			    !has_i64(fv, fin->set_n, o->value) &&
			    (rc = push(&r->lost, &r->nlost, o->value)) < 0)
				goto out;
		}
	}
	/* unexpected: in any ok set read, never added (each value once) */
	for (uint32_t i = 0; i < h->n; i++) {
		const struct iod_chaos_op *o = &h->ops[i];
		if (o->f != IOD_CHAOS_READ || !o->is_set || o->res != IOD_CHAOS_OK)
			continue;
		for (uint32_t j = 0; j < o->set_n; j++) {
			int64_t v = h->vals[o->set_off + j];
			if (has_i64(added, nadded, v))
				continue;
			bool seen = false;
			for (uint32_t k = 0; k < r->nunexpected && !seen; k++)
				seen = r->unexpected[k] == v;
			if (!seen && (rc = push(&r->unexpected, &r->nunexpected, v)) < 0)
				goto out;
		}
	}
	r->ok = !r->no_final_read && r->nlost == 0 && r->nunexpected == 0;
out:
	free(added);
	free(fv);
	if (rc < 0) {
		iod_chaos_set_result_free(r);
		return iod_err_set(e, rc, "out of memory");
	}
	return 0;
}
