/*
 * run.c: `iod chaos run`'s shell: workload clients against a running `iod
 * up` cluster, a nemesis that injects faults through the same records and
 * keeper as `iod chaos <action>`, a JSON-lines history, and the checks of
 * check.c over it.
 *
 * Clients talk to the API through the one API client (src/api/client.c).
 * A register is one config object, written with a one-op POST /v1/txn (a
 * POST is never retried once sent, so every write happens at most once and
 * an unanswered one is recorded as indeterminate) and read with
 * ?consistent=1 (a read fence on the leader). A set is one config object per
 * added element, read as the list of configs. Events are appended under one
 * mutex, so their order in the history is a real-time order: an invocation
 * is recorded before its request is sent and a completion after its answer
 * came back.
 *
 * IOD_TEST_BROKEN_READS=1 (tests only) makes register reads skip the fence
 * and go to one fixed server each: a partitioned follower then serves stale
 * values, and the checker must say so. It changes nothing in the server.
 */
#include "iod/api.h"
#include "iod/chaos.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum ev_type { EV_INVOKE, EV_OK, EV_FAIL, EV_INFO };

struct ev {
	uint32_t client; /* the client thread */
	uint8_t type;    /* enum ev_type */
	uint8_t f;       /* enum iod_chaos_f */
	bool has_value;  /* false: null */
	int64_t value;   /* written, added or read value */
	int64_t *set;    /* a set read's values (malloc'd) */
	uint32_t set_n;  /* entries in set */
	uint32_t key;    /* append: which list */
	uint64_t t_ns;   /* monotonic time it was recorded */
};

struct run {
	const struct iod_chaos_run_cfg *cfg;
	struct iod_chaos_cluster *c;
	pthread_mutex_t mu;            /* guards evs */
	struct ev *evs;                /* the history, in real-time order */
	uint32_t nevs, cap;            /* entries, allocated */
	bool oom;                      /* an event could not be stored */
	atomic_bool stop;              /* clients: finish the current op and return */
	uint64_t t0_ns;                /* run start (monotonic) */
	char reg_name[IOD_NAME_MAX];   /* the register's config name */
	char set_prefix[IOD_NAME_MAX]; /* the set's config name prefix */
	char prefix[IOD_NAME_MAX];     /* chaos-<run>-: bank and append objects */
	int broken;                    /* IOD_TEST_BROKEN_READS */
	int broken_bank;               /* IOD_TEST_BROKEN_BANK */
	int broken_append;             /* IOD_TEST_BROKEN_APPEND */
};

static uint64_t now_ns(void)
{
	return iod_clock_now_ns();
}

static void record(struct run *r, const struct ev *e)
{
	pthread_mutex_lock(&r->mu);
	if (r->nevs == r->cap) {
		uint32_t cap = r->cap ? r->cap * 2 : 4096;
		struct ev *v = realloc(r->evs, cap * sizeof(*v));
		if (!v) {
			r->oom = true;
			pthread_mutex_unlock(&r->mu);
			free(e->set);
			return;
		}
		r->evs = v;
		r->cap = cap;
	}
	r->evs[r->nevs] = *e;
	r->evs[r->nevs].t_ns = now_ns();
	r->nevs++;
	pthread_mutex_unlock(&r->mu);
}

struct client {
	struct run *r;            /* the run */
	uint32_t id;              /* client number */
	struct iod_api_client w;  /* writes (and fenced reads): follows the leader */
	struct iod_api_client rd; /* broken reads only: one fixed server */
	pthread_t th;             /* its thread */
	/* IOD_TEST_BROKEN_APPEND: each list as this client last wrote it */
	json_t *cache[IOD_CHAOS_APPEND_KEYS];
};

/* A txn of ops (a JSON array, taken): ok, fail (surely not applied) or
 * info (unknown). */
static enum ev_type txn_ops(struct iod_api_client *c, json_t *ops)
{
	json_t *j = ops ? json_pack("{s:o}", "ops", ops) : NULL;
	char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	struct iod_api_response rs = {0};
	struct iod_err e = {0};
	json_decref(j);
	if (!body)
		return EV_FAIL;
	int rc =
	    iod_api_request(c, "POST", "/v1/txn", "application/json", body, strlen(body), &rs, &e);
	free(body);
	enum ev_type t;
	if (rc == -EINPROGRESS)
		t = EV_INFO; /* sent, never answered */
	else if (rc)
		t = EV_FAIL; /* never reached a leader: -ENOTCONN, -EHOSTUNREACH */
	else if (rs.status == 200)
		t = EV_OK;
	else if (rs.status >= 400 && rs.status < 500)
		t = EV_FAIL; /* 409: a compare-and-set lost */
	else
		t = EV_INFO; /* 504 outcome_unknown and any other 5xx */
	iod_api_response_free(&rs);
	return t;
}

/* A put of config name = {"v": value (taken)}; prev_rev >= 0 makes it a
 * compare-and-set (0: must not exist yet). */
static json_t *put_op(const char *name, json_t *value, int64_t prev_rev)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:{s:o}}", "op", "put", "kind", "config", "name",
	                      name, "value", "v", value);
	if (o && prev_rev >= 0)
		json_object_set_new(o, "prev_rev", json_integer(prev_rev));
	return o;
}

static enum ev_type txn(struct iod_api_client *c, const char *name, int64_t v)
{
	return txn_ops(c, json_pack("[o]", put_op(name, json_integer(v), -1)));
}

/* Read the register: ok with the value in has and v, or fail. */
static enum ev_type reg_read(struct client *cl, bool *has, int64_t *v)
{
	struct run *r = cl->r;
	char path[160];
	struct iod_api_response rs = {0};
	struct iod_err e = {0};
	snprintf(path, sizeof(path), "/v1/config/%s%s", r->reg_name,
	         r->broken ? "" : "?consistent=1");
	int rc = iod_api_request(r->broken ? &cl->rd : &cl->w, "GET", path, NULL, NULL, 0, &rs, &e);
	enum ev_type t = EV_FAIL;
	*has = false;
	if (!rc && rs.status == 404) {
		t = EV_OK;
	} else if (!rc && rs.status == 200) {
		json_t *val = json_object_get(json_object_get(rs.json, "value"), "v");
		if (json_is_integer(val)) {
			*has = true;
			*v = json_integer_value(val);
			t = EV_OK;
		}
	}
	iod_api_response_free(&rs);
	return t;
}

/* Read the set: ok with the values, or fail. */
static enum ev_type set_read(struct run *r, struct iod_api_client *c, int64_t **out, uint32_t *n)
{
	struct iod_api_response rs = {0};
	struct iod_err e = {0};
	size_t pl = strlen(r->set_prefix), i;
	json_t *it;
	*out = NULL;
	*n = 0;
	int rc = iod_api_request(c, "GET", "/v1/configs?consistent=1", NULL, NULL, 0, &rs, &e);
	if (rc || rs.status != 200 || !json_is_array(json_object_get(rs.json, "items"))) {
		iod_api_response_free(&rs);
		return EV_FAIL;
	}
	json_t *items = json_object_get(rs.json, "items");
	int64_t *v = calloc(json_array_size(items) + 1, sizeof(*v));
	if (!v) {
		iod_api_response_free(&rs);
		return EV_FAIL;
	}
	json_array_foreach(items, i, it)
	{
		const char *name = NULL;
		json_t *x = json_object_get(json_object_get(it, "value"), "v");
		if (!iod_json_get_str(it, "name", &name) && !strncmp(name, r->set_prefix, pl) &&
		    json_is_integer(x))
			v[(*n)++] = json_integer_value(x);
	}
	iod_api_response_free(&rs);
	*out = v;
	return EV_OK;
}

/* ---- bank: accounts moved between with compare-and-set transfers ---------- */

/* Every account from one list page (the API lists at one revision): ok
 * with the balances and revisions of those found (*n of them). */
static enum ev_type bank_read(struct run *r, struct iod_api_client *c, int64_t *bal, uint64_t *rev,
                              uint32_t *n)
{
	char path[IOD_NAME_MAX + 96], pre[IOD_NAME_MAX + 8];
	struct iod_api_response rs = {0};
	struct iod_err e = {0};
	size_t i;
	json_t *it;
	*n = 0;
	snprintf(pre, sizeof(pre), "%sbank-", r->prefix);
	/* names sort after "<prefix>bank" and the accounts come first */
	snprintf(path, sizeof(path), "/v1/configs?consistent=1&limit=%d&continue=%sbank",
	         IOD_CHAOS_BANK_ACCOUNTS, r->prefix);
	int rc = iod_api_request(c, "GET", path, NULL, NULL, 0, &rs, &e);
	json_t *items = rc ? NULL : json_object_get(rs.json, "items");
	if (rs.status != 200 || !json_is_array(items)) {
		iod_api_response_free(&rs);
		return EV_FAIL;
	}
	json_array_foreach(items, i, it)
	{
		const char *name = NULL;
		json_t *x = json_object_get(json_object_get(it, "value"), "v");
		uint64_t rv = 0;
		char *end;
		if (iod_json_get_str(it, "name", &name) || strncmp(name, pre, strlen(pre)) ||
		    !json_is_integer(x) || iod_json_get_u64(it, "rev", &rv))
			continue;
		unsigned long k = strtoul(name + strlen(pre), &end, 10);
		if (*end || k >= IOD_CHAOS_BANK_ACCOUNTS)
			continue;
		bal[*n] = json_integer_value(x);
		rev[*n] = rv;
		(*n)++;
	}
	iod_api_response_free(&rs);
	return EV_OK;
}

/* Create the accounts (each IOD_CHAOS_BANK_BALANCE) before the clients
 * start; retried, and done once a read finds them all. */
static int bank_setup(struct run *r, struct iod_api_client *c, struct iod_err *e)
{
	uint64_t give_up = now_ns() + 10 * IOD_NS_PER_S;
	do {
		int64_t bal[IOD_CHAOS_BANK_ACCOUNTS];
		uint64_t rev[IOD_CHAOS_BANK_ACCOUNTS];
		uint32_t n = 0;
		if (bank_read(r, c, bal, rev, &n) == EV_OK && n == IOD_CHAOS_BANK_ACCOUNTS)
			return 0;
		json_t *ops = json_array();
		for (uint32_t k = 0; ops && k < IOD_CHAOS_BANK_ACCOUNTS; k++) {
			char name[IOD_NAME_MAX];
			snprintf(name, sizeof(name), "%sbank-%u", r->prefix, k);
			json_array_append_new(
			    ops, put_op(name, json_integer(IOD_CHAOS_BANK_BALANCE), 0));
		}
		if (txn_ops(c, ops) != EV_OK)
			usleep(100000);
	} while (now_ns() < give_up);
	return iod_err_set(e, -ETIMEDOUT, "bank: cannot create the %d accounts in 10 s",
	                   IOD_CHAOS_BANK_ACCOUNTS);
}

/* IOD_TEST_BROKEN_BANK: the two halves of a transfer as two blind puts, so
 * a read between them, or a concurrent transfer, sees money made or lost. */
static enum ev_type bank_transfer_broken(struct run *r, struct iod_api_client *c, uint32_t from,
                                         uint32_t to, int64_t bf, int64_t bt, int64_t amount)
{
	char nf[IOD_NAME_MAX], nt[IOD_NAME_MAX];
	snprintf(nf, sizeof(nf), "%sbank-%u", r->prefix, from);
	snprintf(nt, sizeof(nt), "%sbank-%u", r->prefix, to);
	enum ev_type t = txn_ops(c, json_pack("[o]", put_op(nf, json_integer(bf - amount), -1)));
	if (t != EV_OK)
		return t;
	return txn_ops(c, json_pack("[o]", put_op(nt, json_integer(bt + amount), -1))) == EV_OK
	           ? EV_OK
	           : EV_INFO;
}

/* One bank op: a read of every account, or a transfer of 1..5 between two
 * (prepared by a read that is not in the history; the transfer is one
 * transaction conditioned on both accounts' revisions). */
static void bank_op(struct client *cl, struct iod_rng *rng)
{
	struct run *r = cl->r;
	int64_t bal[IOD_CHAOS_BANK_ACCOUNTS];
	uint64_t rev[IOD_CHAOS_BANK_ACCOUNTS];
	uint32_t n = 0;
	struct ev in = {.client = cl->id, .type = EV_INVOKE, .f = IOD_CHAOS_READ}, out;
	if (iod_rng_below(rng, 2) == 0) {
		record(r, &in);
		out = in;
		out.type = (uint8_t)bank_read(r, &cl->w, bal, rev, &n);
		if (out.type == EV_OK && (out.set = malloc((n + 1) * sizeof(*out.set)))) {
			memcpy(out.set, bal, n * sizeof(*bal));
			out.set_n = n;
		}
		record(r, &out);
		return;
	}
	if (bank_read(r, &cl->w, bal, rev, &n) != EV_OK || n != IOD_CHAOS_BANK_ACCOUNTS)
		return;
	uint32_t from = (uint32_t)iod_rng_below(rng, IOD_CHAOS_BANK_ACCOUNTS);
	uint32_t to = (from + 1 + (uint32_t)iod_rng_below(rng, IOD_CHAOS_BANK_ACCOUNTS - 1)) %
	              IOD_CHAOS_BANK_ACCOUNTS;
	int64_t amount = 1 + (int64_t)iod_rng_below(rng, 5);
	if (amount > bal[from])
		amount = bal[from];
	if (amount <= 0 || !(in.set = malloc(3 * sizeof(*in.set))))
		return;
	in.f = IOD_CHAOS_TRANSFER;
	in.set[0] = from;
	in.set[1] = to;
	in.set[2] = amount;
	in.set_n = 3;
	record(r, &in);
	out = in;
	out.set = NULL;
	out.set_n = 0;
	if (r->broken_bank) {
		out.type =
		    (uint8_t)bank_transfer_broken(r, &cl->w, from, to, bal[from], bal[to], amount);
	} else {
		char nf[IOD_NAME_MAX], nt[IOD_NAME_MAX];
		snprintf(nf, sizeof(nf), "%sbank-%u", r->prefix, from);
		snprintf(nt, sizeof(nt), "%sbank-%u", r->prefix, to);
		out.type = (uint8_t)txn_ops(
		    &cl->w,
		    json_pack("[o, o]",
		              put_op(nf, json_integer(bal[from] - amount), (int64_t)rev[from]),
		              put_op(nt, json_integer(bal[to] + amount), (int64_t)rev[to])));
	}
	record(r, &out);
}

/* ---- append: per-key lists, appended to with compare-and-set --------------- */

/* Read list key: ok with its values (malloc'd) and revision (0: none yet). */
static enum ev_type append_read(struct run *r, struct iod_api_client *c, uint32_t key,
                                int64_t **out, uint32_t *n, uint64_t *rev)
{
	char path[IOD_NAME_MAX + 64];
	struct iod_api_response rs = {0};
	struct iod_err e = {0};
	*out = NULL;
	*n = 0;
	*rev = 0;
	snprintf(path, sizeof(path), "/v1/config/%sappend-%u?consistent=1", r->prefix, key);
	int rc = iod_api_request(c, "GET", path, NULL, NULL, 0, &rs, &e);
	enum ev_type t = EV_FAIL;
	json_t *v = json_object_get(json_object_get(rs.json, "value"), "v");
	if (!rc && rs.status == 404) {
		t = (*out = calloc(1, sizeof(**out))) ? EV_OK : EV_FAIL;
	} else if (!rc && rs.status == 200 && json_is_array(v) &&
	           !iod_json_get_u64(rs.json, "rev", rev) &&
	           (*out = calloc(json_array_size(v) + 1, sizeof(**out)))) {
		size_t i;
		json_t *x;
		t = EV_OK;
		json_array_foreach(v, i, x)
		{
			(*out)[(*n)++] = json_integer_value(x);
		}
	}
	iod_api_response_free(&rs);
	return t;
}

/* One append op on a random key: a read, or an append of a fresh value
 * (the list read, one value added, written back conditioned on the
 * revision read). IOD_TEST_BROKEN_APPEND: each client appends to the list
 * as it last wrote it itself and writes it back blind, so whatever others
 * appended in between is lost. */
static void append_op(struct client *cl, struct iod_rng *rng, int64_t *seq)
{
	struct run *r = cl->r;
	uint32_t key = (uint32_t)iod_rng_below(rng, IOD_CHAOS_APPEND_KEYS);
	struct ev in = {.client = cl->id, .type = EV_INVOKE, .f = IOD_CHAOS_READ, .key = key}, out;
	int64_t *vals;
	uint32_t n;
	uint64_t rev;
	if (iod_rng_below(rng, 2) == 0) {
		record(r, &in);
		out = in;
		out.type = (uint8_t)append_read(r, &cl->w, key, &out.set, &out.set_n, &rev);
		record(r, &out);
		return;
	}
	json_t *list = r->broken_append && cl->cache[key] ? json_deep_copy(cl->cache[key]) : NULL;
	if (!list) {
		if (append_read(r, &cl->w, key, &vals, &n, &rev) != EV_OK)
			return;
		list = json_array();
		for (uint32_t i = 0; list && i < n; i++)
			json_array_append_new(list, json_integer(vals[i]));
		free(vals);
	}
	in.f = IOD_CHAOS_APPEND;
	in.has_value = true;
	in.value = (int64_t)(cl->id + 1) * 1000000 + ++*seq;
	json_array_append_new(list, json_integer(in.value));
	char name[IOD_NAME_MAX];
	snprintf(name, sizeof(name), "%sappend-%u", r->prefix, key);
	if (r->broken_append) {
		json_decref(cl->cache[key]);
		cl->cache[key] = json_deep_copy(list);
	}
	record(r, &in);
	out = in;
	out.type = (uint8_t)txn_ops(
	    &cl->w, json_pack("[o]", put_op(name, list, r->broken_append ? -1 : (int64_t)rev)));
	record(r, &out);
}

static void *client_main(void *arg)
{
	struct client *cl = arg;
	struct run *r = cl->r;
	struct iod_rng rng;
	uint64_t gap_ns = r->cfg->rate ? IOD_NS_PER_S * r->cfg->clients / r->cfg->rate : 0;
	int64_t seq = 0;
	iod_rng_seed(&rng, r->cfg->seed * 1000003u + cl->id);
	while (!atomic_load(&r->stop)) {
		uint64_t t_start = now_ns();
		struct ev in = {.client = cl->id, .type = EV_INVOKE}, out;
		if (r->cfg->workload == IOD_CHAOS_WL_REGISTER) {
			bool write = iod_rng_below(&rng, 2) == 0;
			if (write) {
				int64_t v = (int64_t)(cl->id + 1) * 1000000 + ++seq;
				in.f = IOD_CHAOS_WRITE;
				in.has_value = true;
				in.value = v;
				record(r, &in);
				out = in;
				out.type = (uint8_t)txn(&cl->w, r->reg_name, v);
				record(r, &out);
			} else {
				in.f = IOD_CHAOS_READ;
				record(r, &in);
				out = in;
				out.type = (uint8_t)reg_read(cl, &out.has_value, &out.value);
				record(r, &out);
			}
		} else if (r->cfg->workload == IOD_CHAOS_WL_BANK) {
			bank_op(cl, &rng);
		} else if (r->cfg->workload == IOD_CHAOS_WL_APPEND) {
			append_op(cl, &rng, &seq);
		} else {
			char name[IOD_NAME_MAX];
			int64_t v = (int64_t)(cl->id + 1) * 1000000 + ++seq;
			snprintf(name, sizeof(name), "%s%lld", r->set_prefix, (long long)v);
			in.f = IOD_CHAOS_ADD;
			in.has_value = true;
			in.value = v;
			record(r, &in);
			out = in;
			out.type = (uint8_t)txn(&cl->w, name, v);
			record(r, &out);
		}
		uint64_t spent = now_ns() - t_start;
		if (gap_ns > spent) {
			/* jitter the pace so clients do not march in step */
			uint64_t wait = gap_ns - spent;
			wait = wait / 2 + iod_rng_below(&rng, wait + 1);
			struct timespec ts = {(time_t)(wait / IOD_NS_PER_S),
			                      (long)(wait % IOD_NS_PER_S)};
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static void sleep_until(struct run *r, uint64_t t_ns)
{
	for (;;) {
		uint64_t n = now_ns();
		if (n >= t_ns)
			return;
		uint64_t d = t_ns - n > 20 * IOD_NS_PER_MS ? 20 * IOD_NS_PER_MS : t_ns - n;
		struct timespec ts = {0, (long)d};
		nanosleep(&ts, NULL);
		(void)r;
	}
}

/* The leader's index (server-N is index N-1) or IOD_CHAOS_NONE. */
uint32_t iod_chaos_leader(struct iod_chaos_cluster *c)
{
	struct iod_api_client cl;
	struct iod_api_response rs = {0};
	struct iod_err e = {0};
	uint64_t id = 0;
	uint32_t out = IOD_CHAOS_NONE;
	if (iod_api_client_init_config(&cl, c->apis, &e))
		return out;
	cl.timeout_ms = 500;
	cl.retry_ms = 1000;
	for (uint32_t i = 0; i < c->nservers && out == IOD_CHAOS_NONE; i++) {
		cl.cur = i;
		iod_http_conn_close(&cl.conn);
		if (!iod_api_http_once(&cl.conn, cl.servers[i], "GET", "/v1/status", NULL, NULL, 0,
		                       500, &rs, &e) &&
		    rs.status == 200 && !iod_json_get_u64(rs.json, "leader", &id) && id >= 1 &&
		    id <= c->nservers)
			out = (uint32_t)id - 1;
		iod_api_response_free(&rs);
	}
	iod_api_client_close(&cl);
	return out;
}

static int64_t fault_id_counter;

void iod_chaos_fault_id(char *buf, size_t len, uint64_t seed)
{
	uint64_t x = iod_hash_bytes(&seed, sizeof(seed),
	                            iod_time_unix_ns() ^ ((uint64_t)getpid() << 32) ^
	                                (uint64_t)++fault_id_counter);
	snprintf(buf, len, "c%012llx", (unsigned long long)(x & 0xffffffffffffull));
}

/* One fault of the nemesis; 0 and f filled, or an error (logged, skipped). */
static int nemesis_fault(struct run *r, enum iod_chaos_action act, struct iod_rng *rng,
                         uint64_t hold_ms, struct iod_chaos_fault *f, struct iod_err *e)
{
	struct iod_chaos_cluster *c = r->c;
	int rc = iod_chaos_cluster_load(c->dir, c, e);
	if (rc)
		return rc;
	memset(f, 0, sizeof(*f));
	iod_chaos_fault_id(f->id, sizeof(f->id), iod_rng_next(rng));
	f->action = act;
	f->start_ms = iod_chaos_now_ms();
	f->deadline_ms = f->start_ms + hold_ms;
	uint32_t leader = iod_chaos_leader(c);
	if (act == IOD_CHAOS_ACT_PARTITION) {
		static const enum iod_chaos_shape shapes[] = {
		    IOD_CHAOS_SHAPE_ONE, IOD_CHAOS_SHAPE_MAJORITY, IOD_CHAOS_SHAPE_PRIMARIES};
		f->shape = shapes[iod_rng_below(rng, 3)];
		if (f->shape == IOD_CHAOS_SHAPE_PRIMARIES && leader == IOD_CHAOS_NONE)
			f->shape = IOD_CHAOS_SHAPE_ONE;
		f->n = c->nservers;
		memcpy(f->m, c->servers, c->nservers * sizeof(f->m[0]));
		if ((rc = iod_chaos_shape_grudge(f->shape, f->n, leader, iod_rng_next(rng),
		                                 IOD_CHAOS_DIR_BOTH, &f->g, e)))
			return rc;
	} else {
		/* the leader half the time: that is where recovery is slowest */
		uint32_t k = leader != IOD_CHAOS_NONE && iod_rng_below(rng, 2)
		                 ? leader
		                 : (uint32_t)iod_rng_below(rng, c->nservers);
		f->n = 1;
		f->m[0] = c->servers[k];
		if (act == IOD_CHAOS_ACT_KILL) {
			f->signal = 9;
			f->restart = true;
		}
		if (act == IOD_CHAOS_ACT_MEMBER &&
		    (rc = iod_chaos_member_lookup(c, &f->m[0], f, e)))
			return rc;
	}
	return iod_chaos_fault_apply(c, f, e);
}

/* The candidates of a plan step's selector, among running processes. */
static uint32_t candidates(struct iod_chaos_cluster *c, const char *sel, uint32_t leader,
                           struct iod_chaos_member *out)
{
	uint32_t n = 0;
	if (!strcmp(sel, "servers") || !strcmp(sel, "nodes")) {
		bool srv = sel[0] == 's';
		const struct iod_chaos_member *g = srv ? c->servers : c->nodes;
		for (uint32_t i = 0; i < (srv ? c->nservers : c->nnodes); i++)
			if (g[i].pid > 0)
				out[n++] = g[i];
		return n;
	}
	if (!strcmp(sel, "leader")) {
		if (leader != IOD_CHAOS_NONE && c->servers[leader].pid > 0)
			out[n++] = c->servers[leader];
		return n;
	}
	struct iod_chaos_target t[IOD_CHAOS_MEMBERS_MAX];
	struct iod_err e = {0};
	int k = iod_chaos_target_list_parse(sel, t, IOD_CHAOS_MEMBERS_MAX, &e);
	for (int i = 0; i < k; i++) {
		const struct iod_chaos_member *g =
		    t[i].kind == IOD_CHAOS_SERVER ? c->servers : c->nodes;
		uint32_t gn = t[i].kind == IOD_CHAOS_SERVER ? c->nservers : c->nnodes;
		if (t[i].kind != IOD_CHAOS_REPLICA && t[i].index >= 1 && t[i].index <= gn &&
		    g[t[i].index - 1].pid > 0)
			out[n++] = g[t[i].index - 1];
	}
	return n;
}

/* One fault of a plan step: its selector, mode and value pick the targets. */
static int plan_fault(struct run *r, const struct iod_chaos_step *s, struct iod_rng *rng,
                      struct iod_chaos_fault *f, struct iod_err *e)
{
	struct iod_chaos_cluster *c = r->c;
	struct iod_chaos_member *cand = calloc(IOD_CHAOS_MEMBERS_MAX, sizeof(*cand));
	bool pick[IOD_CHAOS_MEMBERS_MAX] = {0};
	int rc = cand ? iod_chaos_cluster_load(c->dir, c, e) : -ENOMEM;
	if (rc) {
		free(cand);
		return rc;
	}
	memset(f, 0, sizeof(*f));
	iod_chaos_fault_id(f->id, sizeof(f->id), iod_rng_next(rng));
	f->action = s->action;
	f->start_ms = iod_chaos_now_ms();
	f->deadline_ms = f->start_ms + s->duration_ms;
	uint32_t n = candidates(c, s->selector, iod_chaos_leader(c), cand);
	if (!n) {
		free(cand);
		return iod_err_set(e, -ESRCH, "selector %s matches no running process",
		                   s->selector);
	}
	iod_chaos_plan_pick(s, n, iod_rng_next(rng), pick);
	if (s->action == IOD_CHAOS_ACT_PARTITION) {
		bool a[IOD_CHAOS_MEMBERS_MAX] = {0}, b[IOD_CHAOS_MEMBERS_MAX] = {0};
		for (uint32_t i = 0; i < n; i++)
			if (pick[i]) {
				a[f->n] = true;
				f->m[f->n++] = cand[i];
			}
		for (uint32_t i = 0; i < c->nservers; i++) {
			bool in_a = false;
			for (uint32_t k = 0; k < f->n; k++)
				in_a |= !strcmp(f->m[k].name, c->servers[i].name);
			if (!in_a && c->servers[i].pid > 0 && f->n < IOD_CHAOS_MEMBERS_MAX) {
				b[f->n] = true;
				f->m[f->n++] = c->servers[i];
			}
		}
		f->shape = IOD_CHAOS_SHAPE_EXPLICIT;
		f->dir = s->dir;
		rc = iod_chaos_groups_grudge(f->n, a, b, s->dir, &f->g, e);
	} else if (s->action == IOD_CHAOS_ACT_MEMBER) {
		/* one server: the first picked */
		for (uint32_t i = 0; i < n && !f->n; i++)
			if (pick[i] && cand[i].kind == IOD_CHAOS_SERVER)
				f->m[f->n++] = cand[i];
		rc = f->n ? iod_chaos_member_lookup(c, &f->m[0], f, e)
		          : iod_err_set(e, -EINVAL, "member: selector %s picked no server",
		                        s->selector);
	} else {
		for (uint32_t i = 0; i < n; i++)
			if (pick[i])
				f->m[f->n++] = cand[i];
		f->signal = 9;
		f->restart = s->action == IOD_CHAOS_ACT_KILL;
		f->percent = s->percent;
		f->latency_ms = s->latency_ms;
	}
	free(cand);
	return rc ? rc : iod_chaos_fault_apply(c, f, e);
}

/* A link step (selector link/leafL-spineS,...): its mode picks among the
 * listed links, each gets a fault of its own (its table in its leaf's
 * namespace); 0 with fs[0..*n), or an error with the applied ones healed.
 * Two draws, as every step: the id, then the pick (src/sim/plan.c follows). */
static int plan_links(struct run *r, const struct iod_chaos_step *s, struct iod_rng *rng,
                      struct iod_chaos_fault *fs, uint32_t *n, char *desc, size_t desc_len,
                      struct iod_err *e)
{
	uint32_t leaf[IOD_CHAOS_MEMBERS_MAX], spine[IOD_CHAOS_MEMBERS_MAX];
	bool pick[IOD_CHAOS_MEMBERS_MAX] = {0};
	int k = iod_chaos_links_parse(s->selector, leaf, spine, IOD_CHAOS_MEMBERS_MAX, e);
	uint64_t id = iod_rng_next(rng);
	*n = 0;
	if (k < 0)
		return k;
	iod_chaos_plan_pick(s, (uint32_t)k, iod_rng_next(rng), pick);
	size_t off = 0;
	desc[0] = 0;
	int rc = 0;
	uint64_t now = iod_chaos_now_ms();
	for (uint32_t i = 0; i < (uint32_t)k && !rc; i++) {
		if (!pick[i])
			continue;
		struct iod_chaos_fault *f = &fs[*n];
		memset(f, 0, sizeof(*f));
		iod_chaos_fault_id(f->id, sizeof(f->id), id + i);
		f->action = s->action;
		f->shape = IOD_CHAOS_SHAPE_EXPLICIT;
		f->dir = s->dir;
		f->percent = s->percent;
		f->start_ms = now;
		f->deadline_ms = now + s->duration_ms;
		if ((rc = iod_chaos_link_resolve(r->c, leaf[i], spine[i], f, e)) ||
		    (rc = iod_chaos_fault_apply(r->c, f, e)))
			break;
		(*n)++;
		if (off + 2 < desc_len)
			off += (size_t)snprintf(desc + off, desc_len - off, "%s%s", off ? "; " : "",
			                        f->desc);
		if (off >= desc_len)
			off = desc_len - 1;
	}
	return rc;
}

/* An L7 step (selector services or service/NAME,...): its mode picks
 * among the HTTP services, each gets a Fault object; 0 with l7[0..*n), or
 * an error (nothing stays applied: the ones written are deleted). */
static int plan_l7(struct run *r, const struct iod_chaos_step *s, struct iod_rng *rng,
                   struct iod_chaos_l7 *l7, uint32_t *n, char *desc, size_t desc_len,
                   struct iod_err *e)
{
	char(*names)[IOD_NAME_MAX] = calloc(IOD_CHAOS_MEMBERS_MAX, IOD_NAME_MAX);
	bool pick[IOD_CHAOS_MEMBERS_MAX] = {0};
	int k = names ? iod_chaos_services_parse(s->selector, names, IOD_CHAOS_MEMBERS_MAX, e)
	              : -ENOMEM;
	*n = 0;
	if (k == 0)
		k = iod_chaos_l7_services(r->c->apis, names, IOD_CHAOS_MEMBERS_MAX, e);
	if (k == 0)
		k = iod_err_set(e, -ESRCH, "selector %s matches no HTTP service of the mesh",
		                s->selector);
	if (k < 0) {
		free(names);
		return k;
	}
	iod_chaos_plan_pick(s, (uint32_t)k, iod_rng_next(rng), pick);
	size_t off = 0;
	desc[0] = 0;
	int rc = 0;
	for (uint32_t i = 0; i < (uint32_t)k && !rc; i++) {
		if (!pick[i])
			continue;
		struct iod_chaos_l7 *f = &l7[*n];
		memset(f, 0, sizeof(*f));
		snprintf(f->service, sizeof(f->service), "%s", names[i]);
		f->abort = s->action == IOD_CHAOS_ACT_ABORT;
		f->percent = s->percent;
		f->delay_ms = s->latency_ms;
		f->status = s->status;
		f->duration_ms = s->duration_ms;
		if ((rc = iod_chaos_l7_apply(r->c->apis, f, e)))
			break;
		(*n)++;
		char one[IOD_CHAOS_DESC_MAX];
		iod_chaos_l7_describe(f, one, sizeof(one));
		if (off + 2 < desc_len)
			off += (size_t)snprintf(desc + off, desc_len - off, "%s%s", off ? "; " : "",
			                        one);
		if (off >= desc_len)
			off = desc_len - 1;
	}
	free(names);
	return rc;
}

/* Delete the Fault objects of an L7 step (the proxies stopped at until_ms). */
static void heal_l7(struct run *r, const struct iod_chaos_l7 *l7, uint32_t n)
{
	struct iod_api_client c;
	struct iod_err e = {0};
	if (!n || iod_api_client_init_config(&c, r->c->apis, &e))
		return;
	for (uint32_t i = 0; i < n; i++)
		if (iod_chaos_l7_delete(&c, l7[i].id, &e) < 0)
			fprintf(stderr, "iod chaos run: %s\n", e.msg);
	iod_api_client_close(&c);
}

static void heal_now(struct run *r, const struct iod_chaos_fault *f)
{
	struct iod_err e = {0};
	int hl = iod_chaos_heal_lock(r->c->chaos_dir);
	char path[IOD_PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s.json", r->c->chaos_dir, f->id);
	if (!access(path, F_OK) && iod_chaos_fault_heal(r->c->chaos_dir, f, &e))
		fprintf(stderr, "iod chaos run: heal %s: %s\n", f->id, e.msg);
	if (hl >= 0)
		close(hl);
}

static void history_write(struct run *r, struct iod_buf *b)
{
	static const char *const types[] = {"invoke", "ok", "fail", "info"};
	static const char *const fs[] = {"read", "write", "add", "transfer", "append"};
	for (uint32_t i = 0; i < r->nevs; i++) {
		const struct ev *e = &r->evs[i];
		iod_buf_printf(b, "{\"client\":%u,", e->client);
		if (r->cfg->workload == IOD_CHAOS_WL_APPEND)
			iod_buf_printf(b, "\"key\":%u,", e->key);
		iod_buf_printf(b, "\"type\":\"%s\",\"f\":\"%s\",\"value\":", types[e->type],
		               fs[e->f]);
		if (e->set || (e->f == IOD_CHAOS_READ && e->type == EV_OK &&
		               r->cfg->workload != IOD_CHAOS_WL_REGISTER)) {
			iod_buf_printf(b, "[");
			for (uint32_t k = 0; k < e->set_n; k++)
				iod_buf_printf(b, "%s%lld", k ? "," : "", (long long)e->set[k]);
			iod_buf_printf(b, "]");
		} else if (e->has_value) {
			iod_buf_printf(b, "%lld", (long long)e->value);
		} else {
			iod_buf_printf(b, "null");
		}
		iod_buf_printf(b, ",\"time_us\":%llu}\n",
		               (unsigned long long)((e->t_ns - r->t0_ns) / IOD_NS_PER_US));
	}
}

/* Recovery of each fault: heal -> the first write acknowledged after it. */
static void recovery(struct run *r, struct iod_chaos_run_report *rep)
{
	for (uint32_t k = 0; k < rep->nfaults; k++) {
		struct iod_chaos_run_fault *f = &rep->faults[k];
		f->recovery_ms = UINT64_MAX;
		for (uint32_t i = 0; i < r->nevs; i++) {
			const struct ev *e = &r->evs[i];
			if (e->type != EV_OK || e->f == IOD_CHAOS_READ || e->t_ns < f->heal_ns)
				continue;
			f->recovery_ms = (e->t_ns - f->heal_ns) / IOD_NS_PER_MS;
			break;
		}
		/* outage: the longest gap between acknowledged writes from the
		 * fault's start to its recovery (the start counts as one) */
		uint64_t last = f->start_ns, worst = 0;
		uint64_t until = f->recovery_ms == UINT64_MAX
		                     ? UINT64_MAX
		                     : f->heal_ns + f->recovery_ms * IOD_NS_PER_MS;
		for (uint32_t i = 0; i < r->nevs; i++) {
			const struct ev *e = &r->evs[i];
			if (e->type != EV_OK || e->f == IOD_CHAOS_READ || e->t_ns < f->start_ns)
				continue;
			if (e->t_ns > until)
				break;
			if (e->t_ns - last > worst)
				worst = e->t_ns - last;
			last = e->t_ns;
		}
		f->outage_ms = worst / IOD_NS_PER_MS;
	}
}

/* One final read (of list key for append), retried until it succeeds or
 * final_read_ms passes, once the cluster is whole again. */
static void final_read(struct run *r, struct iod_api_client *c, uint32_t key)
{
	struct ev in = {.client = r->cfg->clients,
	                .type = EV_INVOKE,
	                .f = IOD_CHAOS_READ,
	                .key = key},
	          out;
	uint64_t give_up = now_ns() + r->cfg->final_read_ms * IOD_NS_PER_MS;
	do {
		int64_t bal[IOD_CHAOS_BANK_ACCOUNTS];
		uint64_t rev[IOD_CHAOS_BANK_ACCOUNTS];
		out = in;
		record(r, &in);
		if (r->cfg->workload == IOD_CHAOS_WL_SET) {
			out.type = (uint8_t)set_read(r, c, &out.set, &out.set_n);
		} else if (r->cfg->workload == IOD_CHAOS_WL_APPEND) {
			out.type = (uint8_t)append_read(r, c, key, &out.set, &out.set_n, rev);
		} else {
			out.type = (uint8_t)bank_read(r, c, bal, rev, &out.set_n);
			if (out.type == EV_OK &&
			    (out.set = malloc((out.set_n + 1) * sizeof(*out.set))))
				memcpy(out.set, bal, out.set_n * sizeof(*bal));
		}
		record(r, &out);
		if (out.type == EV_OK)
			break;
		usleep(200000);
	} while (now_ns() < give_up);
}

static void final_reads(struct run *r, struct iod_api_client *c)
{
	enum iod_chaos_workload w = r->cfg->workload;
	for (uint32_t k = 0; w != IOD_CHAOS_WL_REGISTER &&
	                     k < (w == IOD_CHAOS_WL_APPEND ? IOD_CHAOS_APPEND_KEYS : 1);
	     k++)
		final_read(r, c, k);
}

static bool delete_config(struct iod_api_client *c, const char *name)
{
	char path[IOD_NAME_MAX + 32];
	struct iod_api_response rs = {0};
	struct iod_err e = {0};
	snprintf(path, sizeof(path), "/v1/config/%s", name);
	bool ok = !iod_api_request(c, "DELETE", path, NULL, NULL, 0, &rs, &e) && rs.status == 200;
	iod_api_response_free(&rs);
	return ok;
}

/* Delete the run's objects (a set's: those of its final read, in
 * transactions of up to 1,000), so runs do not pile up in the state.
 * Returns how many were deleted. */
static uint32_t cleanup(struct run *r, struct iod_api_client *c)
{
	char name[IOD_NAME_MAX];
	uint32_t n = 0;
	switch (r->cfg->workload) {
	case IOD_CHAOS_WL_REGISTER: return delete_config(c, r->reg_name);
	case IOD_CHAOS_WL_BANK:
	case IOD_CHAOS_WL_APPEND: {
		bool bank = r->cfg->workload == IOD_CHAOS_WL_BANK;
		for (uint32_t k = 0; k < (bank ? IOD_CHAOS_BANK_ACCOUNTS : IOD_CHAOS_APPEND_KEYS);
		     k++) {
			snprintf(name, sizeof(name), "%s%s-%u", r->prefix, bank ? "bank" : "append",
			         k);
			n += delete_config(c, name);
		}
		return n;
	}
	case IOD_CHAOS_WL_SET: break;
	}
	const struct ev *fin = NULL;
	for (uint32_t i = 0; i < r->nevs; i++)
		if (r->evs[i].f == IOD_CHAOS_READ && r->evs[i].type == EV_OK)
			fin = &r->evs[i];
	for (uint32_t i = 0; fin && i < fin->set_n; i += 1000) {
		json_t *ops = json_array();
		uint32_t k = i;
		for (; ops && k < fin->set_n && k < i + 1000; k++) {
			snprintf(name, sizeof(name), "%s%lld", r->set_prefix,
			         (long long)fin->set[k]);
			json_array_append_new(ops, json_pack("{s:s, s:s, s:s}", "op", "delete",
			                                     "kind", "config", "name", name));
		}
		if (txn_ops(c, ops) == EV_OK)
			n += k - i;
	}
	return n;
}

int iod_chaos_run(struct iod_chaos_cluster *c, const struct iod_chaos_run_cfg *cfg,
                  struct iod_chaos_run_report *rep, struct iod_err *e)
{
	struct run r;
	struct client *cl = calloc(cfg->clients, sizeof(*cl));
	int rc = 0;
	memset(&r, 0, sizeof(r));
	memset(rep, 0, sizeof(*rep));
	if (!cl)
		return iod_err_set(e, -ENOMEM, "out of memory");
	r.cfg = cfg;
	r.c = c;
	pthread_mutex_init(&r.mu, NULL);
	const char *b = getenv("IOD_TEST_BROKEN_READS");
	r.broken = b && !strcmp(b, "1");
	b = getenv("IOD_TEST_BROKEN_BANK");
	r.broken_bank = b && !strcmp(b, "1");
	b = getenv("IOD_TEST_BROKEN_APPEND");
	r.broken_append = b && !strcmp(b, "1");
	char rid[IOD_CHAOS_ID_MAX];
	iod_chaos_fault_id(rid, sizeof(rid), cfg->seed);
	snprintf(r.reg_name, sizeof(r.reg_name), "chaos-%s-register", rid);
	snprintf(r.set_prefix, sizeof(r.set_prefix), "chaos-%s-set-", rid);
	snprintf(r.prefix, sizeof(r.prefix), "chaos-%s-", rid);
	snprintf(rep->key, sizeof(rep->key), "%s%s",
	         cfg->workload == IOD_CHAOS_WL_REGISTER ? r.reg_name
	         : cfg->workload == IOD_CHAOS_WL_SET    ? r.set_prefix
	                                                : r.prefix,
	         cfg->workload == IOD_CHAOS_WL_BANK     ? "bank"
	         : cfg->workload == IOD_CHAOS_WL_APPEND ? "append"
	                                                : "");
	uint32_t started = 0;
	for (uint32_t i = 0; i < cfg->clients; i++) {
		cl[i].r = &r;
		cl[i].id = i;
		if ((rc = iod_api_client_init_config(&cl[i].w, c->apis, e)))
			break;
		cl[i].w.timeout_ms = cfg->op_timeout_ms;
		cl[i].w.retry_ms = cfg->op_timeout_ms;
		cl[i].w.retry_sleep_ms = 20;
		cl[i].w.cur = i % cl[i].w.servers_n;
		if (r.broken) {
			/* pinned: a GET without a fence is answered by whoever gets it */
			char one[IOD_ADDR_MAX];
			snprintf(one, sizeof(one), "%s", cl[i].w.servers[i % cl[i].w.servers_n]);
			if ((rc = iod_api_client_init_config(&cl[i].rd, one, e)))
				break;
			cl[i].rd.timeout_ms = cfg->op_timeout_ms;
			cl[i].rd.retry_ms = cfg->op_timeout_ms;
		}
	}
	if (!rc && cfg->workload == IOD_CHAOS_WL_BANK)
		rc = bank_setup(&r, &cl[0].w, e);
	r.t0_ns = now_ns();
	for (uint32_t i = 0; !rc && i < cfg->clients; i++) {
		if (pthread_create(&cl[i].th, NULL, client_main, &cl[i])) {
			rc = iod_err_set(e, -EAGAIN, "cannot start client thread %u", i);
			break;
		}
		started++;
	}
	/* the nemesis: a fault for fault_ms, then as long again to recover */
	struct iod_rng rng;
	iod_rng_seed(&rng, cfg->seed);
	uint64_t end_ns = r.t0_ns + cfg->duration_ms * IOD_NS_PER_MS;
	uint64_t t = r.t0_ns + cfg->warmup_ms * IOD_NS_PER_MS;
	uint32_t turn = 0;
	const struct iod_chaos_plan *plan = cfg->plan;
	for (;;) {
		const struct iod_chaos_step *step = NULL;
		/* a nemesis fault is followed by as long a quiet time */
		uint64_t hold_ms = cfg->fault_ms, quiet_ms = hold_ms;
		if (plan) {
			step = &plan->steps[plan->random ? iod_rng_below(&rng, plan->nsteps)
			                                 : turn % plan->nsteps];
			hold_ms = step->duration_ms;
			quiet_ms = plan->interval_ms;
		}
		if (rc || (!cfg->nemesis && !plan) ||
		    t + (hold_ms + 1000) * IOD_NS_PER_MS > end_ns ||
		    rep->nfaults >= IOD_CHAOS_RUN_FAULTS_MAX)
			break;
		sleep_until(&r, t);
		enum iod_chaos_action kinds[5], act;
		uint32_t nk = 0;
		if (cfg->nemesis & IOD_CHAOS_NEM_PARTITION)
			kinds[nk++] = IOD_CHAOS_ACT_PARTITION;
		if (cfg->nemesis & IOD_CHAOS_NEM_KILL)
			kinds[nk++] = IOD_CHAOS_ACT_KILL;
		if (cfg->nemesis & IOD_CHAOS_NEM_PAUSE)
			kinds[nk++] = IOD_CHAOS_ACT_PAUSE;
		if (cfg->nemesis & IOD_CHAOS_NEM_MEMBER)
			kinds[nk++] = IOD_CHAOS_ACT_MEMBER;
		act = step ? step->action : kinds[turn % nk];
		turn++;
		struct iod_chaos_fault *f = calloc(1, sizeof(*f));
		struct iod_err fe = {0};
		if (!f)
			break;
		uint64_t t_apply = now_ns();
		bool l7 = step && iod_chaos_step_l7(step), lk = step && iod_chaos_step_link(step);
		uint32_t nl7 = 0, nlk = 0;
		struct iod_chaos_l7 *l7s = l7 ? calloc(IOD_CHAOS_MEMBERS_MAX, sizeof(*l7s)) : NULL;
		struct iod_chaos_fault *lks =
		    lk ? calloc(IOD_CHAOS_MEMBERS_MAX, sizeof(*lks)) : NULL;
		int frc =
		    l7   ? (l7s ? plan_l7(&r, step, &rng, l7s, &nl7, f->desc, sizeof(f->desc), &fe)
		                : -ENOMEM)
		    : lk ? (lks ? plan_links(&r, step, &rng, lks, &nlk, f->desc, sizeof(f->desc),
		                             &fe)
		                : -ENOMEM)
		    : step ? plan_fault(&r, step, &rng, f, &fe)
		           : nemesis_fault(&r, act, &rng, hold_ms, f, &fe);
		if (frc) {
			fprintf(stderr, "iod chaos run: %s fault skipped: %s\n",
			        iod_chaos_action_name(act), fe.msg);
			heal_l7(&r, l7s, nl7);
			for (uint32_t i = 0; i < nlk; i++)
				heal_now(&r, &lks[i]);
			free(l7s);
			free(lks);
			free(f);
			t += hold_ms * IOD_NS_PER_MS;
			continue;
		}
		if (l7)
			snprintf(f->id, sizeof(f->id), "%s", nl7 ? l7s[0].id : "");
		if (lk)
			snprintf(f->id, sizeof(f->id), "%s", nlk ? lks[0].id : "");
		struct iod_chaos_run_fault *rf = &rep->faults[rep->nfaults++];
		snprintf(rf->id, sizeof(rf->id), "%s", f->id);
		snprintf(rf->desc, sizeof(rf->desc), "%s", f->desc);
		rf->action = act;
		rf->start_ms = (t_apply - r.t0_ns) / IOD_NS_PER_MS;
		rf->start_ns = t_apply;
		sleep_until(&r, t_apply + hold_ms * IOD_NS_PER_MS);
		rf->heal_ns = now_ns();
		if (l7)
			heal_l7(&r, l7s, nl7);
		else if (lk)
			for (uint32_t i = 0; i < nlk; i++)
				heal_now(&r, &lks[i]);
		else
			heal_now(&r, f);
		free(l7s);
		free(lks);
		rf->heal_ms = (rf->heal_ns - r.t0_ns) / IOD_NS_PER_MS;
		free(f);
		t = rf->heal_ns + quiet_ms * IOD_NS_PER_MS;
	}
	sleep_until(&r, end_ns);
	atomic_store(&r.stop, true);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(cl[i].th, NULL);
	if (!rc)
		final_reads(&r, &cl[0].w);
	if (!rc && !cfg->keep)
		rep->deleted = cleanup(&r, &cl[0].w);
	for (uint32_t i = 0; i < cfg->clients; i++) {
		iod_api_client_close(&cl[i].w);
		iod_api_client_close(&cl[i].rd);
		for (uint32_t k = 0; k < IOD_CHAOS_APPEND_KEYS; k++)
			json_decref(cl[i].cache[k]);
	}
	free(cl);
	if (rc)
		goto out;
	if (r.oom) {
		rc = iod_err_set(e, -ENOMEM, "out of memory recording the history");
		goto out;
	}
	/* counts */
	for (uint32_t i = 0; i < r.nevs; i++) {
		const struct ev *x = &r.evs[i];
		if (x->type == EV_INVOKE)
			rep->attempted++;
		else if (x->type == EV_OK)
			rep->ok++;
		else if (x->type == EV_FAIL)
			rep->failed++;
		else
			rep->info++;
		if (x->type == EV_OK && x->f != IOD_CHAOS_READ)
			rep->acked_writes++;
	}
	recovery(&r, rep);
	/* the history as a user would feed it to `iod chaos check` */
	iod_buf_init(&rep->history);
	history_write(&r, &rep->history);
out:
	for (uint32_t i = 0; i < r.nevs; i++)
		free(r.evs[i].set);
	free(r.evs);
	pthread_mutex_destroy(&r.mu);
	return rc;
}
