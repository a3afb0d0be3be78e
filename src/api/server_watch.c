/*
 * server_watch.c: long-poll watches. A watch is suspended until the state
 * passes its revision or its timeout; one wake-up serialises each distinct
 * answer once (shared_text, the watch cache) for every watcher it answers,
 * and large answers are sent a few at a time (IOD_API_WATCH_LARGE_MAX).
 * An answer with events is serialised on libuv's pool (struct wenc,
 * IOD_API_WATCH_ENCODES_MAX at once): the watchers it answers wait, still
 * watching, and then share the text.
 */
#include "server_internal.h"

static void admit_cb(uv_idle_t *h);
static bool watch_try(struct req *q, bool timed_out);

/*
 * A watch answer being serialised off the loop: the loop builds the answer
 * (events referring to the state's values, which are never changed) and
 * hands it to a pool thread, which only dumps it; the loop frees it. Every
 * watcher whose answer it is (the same kind filter, visibility and start
 * revision) waits on it (req.wenc) and gets the text (req.pending).
 */
struct wenc {
	uv_work_t w;              /* libuv work request */
	struct server *srv;       /* owner */
	struct wenc *next;        /* srv->wencs link */
	int kind;                 /* kind watched */
	bool all;                 /* all kinds */
	bool sensitive;           /* sees tokens and secrets */
	uint64_t after_rev;       /* events after this */
	uint64_t state_rev;       /* the state's revision when built */
	json_t *answer;           /* loop: built and freed; worker: only read */
	struct shared_text *text; /* worker: the text (one ref), NULL = out of memory */
	uint64_t worker_us;       /* worker time */
};

/* ---- watches ------------------------------------------------------------ */

void api__shared_unref(void *cls)
{
	struct shared_text *t = cls;
	if (t && --t->refs == 0)
		free(t);
}

void api__watch_unlink(struct req *q)
{
	struct server *s = q->srv;
	if (!q->watching)
		return;
	if (q->wprev)
		q->wprev->wnext = q->wnext;
	else
		s->watchers = q->wnext;
	if (q->wnext)
		q->wnext->wprev = q->wprev;
	q->wprev = q->wnext = NULL;
	q->watching = false;
	s->watchers_n--;
	if (q->deferred) {
		q->deferred = false;
		s->deferred_n--;
	}
	q->wenc = NULL; /* it goes on without q */
	api__shared_unref(q->pending);
	q->pending = NULL;
}

/* q waits its turn (a large answer's, or an encoding slot): admit_cb retries it. */
static void defer(struct req *q)
{
	if (!q->deferred) {
		q->deferred = true;
		q->srv->deferred_n++;
		q->srv->watch_deferred++;
	}
}

static void undefer(struct req *q)
{
	if (q->deferred) {
		q->deferred = false;
		q->srv->deferred_n--;
	}
}

/* A large answer for q (text t): may it be sent now? Otherwise q waits,
 * still watching, until fewer than IOD_API_WATCH_LARGE_MAX are in flight. */
static bool large_admit(struct req *q, const struct shared_text *t)
{
	struct server *s = q->srv;
	if (t->len < IOD_API_WATCH_LARGE_BYTES)
		return true;
	if (s->large_inflight >= IOD_API_WATCH_LARGE_MAX) {
		defer(q);
		return false;
	}
	for (unsigned i = 0; i < IOD_API_WATCH_LARGE_MAX; i++)
		if (!s->large_q[i]) {
			s->large_q[i] = q;
			break;
		}
	q->large = true;
	q->large_until_ms = mono_ms() + IOD_API_WATCH_LARGE_SLOT_MS;
	s->large_inflight++;
	return true;
}

/* q's large answer is sent (or it has had its IOD_API_WATCH_LARGE_SLOT_MS):
 * its place goes to a waiting watcher. */
void api__large_release(struct req *q)
{
	struct server *s = q->srv;
	if (!q->large)
		return;
	q->large = false;
	for (unsigned i = 0; i < IOD_API_WATCH_LARGE_MAX; i++)
		if (s->large_q[i] == q)
			s->large_q[i] = NULL;
	IOD_ASSERT(s->large_inflight > 0);
	s->large_inflight--;
	if (s->deferred_n && !s->stopping)
		uv_idle_start(&s->admit_idle, admit_cb);
}

/* Answer q if it has something (or its time is up); returns true if answered. */
static struct shared_text **wcache_find(struct server *s, struct req *q, bool sens)
{
	struct watch_cache *c = s->wcache;
	uint64_t rev = iod_state_rev(iod_raft_member_state(s->node));
	if (!c)
		return NULL;
	for (unsigned i = 0; i < WATCH_CACHE_SLOTS; i++)
		if (c->slot[i].text && c->slot[i].kind == (int)q->kind &&
		    c->slot[i].all == q->watch_all && c->slot[i].sensitive == sens &&
		    c->slot[i].after_rev == q->after_rev && c->slot[i].state_rev == rev)
			return &c->slot[i].text;
	return NULL;
}

static void wcache_put(struct server *s, int kind, bool all, bool sens, uint64_t after,
                       uint64_t state_rev, struct shared_text *t)
{
	struct watch_cache *c = s->wcache;
	if (!c)
		return;
	unsigned i = c->next++ % WATCH_CACHE_SLOTS;
	api__shared_unref(c->slot[i].text);
	c->slot[i].kind = kind;
	c->slot[i].all = all;
	c->slot[i].sensitive = sens;
	c->slot[i].after_rev = after;
	c->slot[i].state_rev = state_rev;
	c->slot[i].text = t;
	t->refs++;
}

/* JSON text (malloc'd, taken) as a shared answer with no holder yet, or
 * NULL. Either thread. */
static struct shared_text *text_new(char *text)
{
	size_t n = text ? strlen(text) : 0;
	struct shared_text *t = text ? malloc(sizeof(*t) + n + 2) : NULL;
	if (t) {
		t->refs = 0;
		t->len = n + 1;
		memcpy(t->data, text, n);
		t->data[n] = '\n';
		t->data[n + 1] = 0;
	}
	free(text);
	return t;
}

/* Pool thread: only the job's answer is read. */
static void wenc_work(uv_work_t *w)
{
	struct wenc *j = w->data;
	uint64_t t0 = iod_clock_now_ns();
	j->text = text_new(json_dumps(j->answer, JSON_INDENT(2) | JSON_PRESERVE_ORDER));
	if (j->text)
		j->text->refs = 1;
	j->worker_us = (iod_clock_now_ns() - t0) / 1000;
}

/* An answer is serialised: every watcher waiting on it takes the text (and
 * is answered when its turn comes); the cache keeps it for watchers that
 * come while the state is unchanged. */
static void wenc_after(uv_work_t *w, int status)
{
	struct wenc *j = w->data;
	struct server *s = j->srv;
	struct shared_text *t = j->text;
	bool first = true;
	(void)status;
	for (struct wenc **p = &s->wencs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	IOD_ASSERT(s->wencs_n > 0);
	s->wencs_n--;
	json_decref(j->answer);
	s->watch_encoded++;
	if (j->worker_us > s->wenc_max_us)
		s->wenc_max_us = j->worker_us;
	if (t && !s->stopping)
		wcache_put(s, j->kind, j->all, j->sensitive, j->after_rev, j->state_rev, t);
	for (struct req *q = s->watchers, *next; q; q = next) {
		next = q->wnext;
		if (q->wenc != j)
			continue;
		q->wenc = NULL;
		if (!t) {
			api__watch_unlink(q);
			api__finish(q, 500, api__err_json("out of memory"));
			continue;
		}
		q->pending = t;
		t->refs++;
		if (!first)
			s->watch_shared++;
		first = false;
		watch_try(q, false);
	}
	api__shared_unref(t);
	free(j);
	if (s->deferred_n && !s->stopping)
		uv_idle_start(&s->admit_idle, admit_cb);
}

/* An encoding of q's answer already under way (it may be of an older
 * state: still a correct answer, and the watcher asks again from its rev). */
static struct wenc *wenc_find(struct server *s, const struct req *q, bool sens)
{
	for (struct wenc *j = s->wencs; j; j = j->next)
		if (j->kind == (int)q->kind && j->all == q->watch_all && j->sensitive == sens &&
		    j->after_rev == q->after_rev)
			return j;
	return NULL;
}

/* Serialise answer a (taken) for q off the loop; false if it cannot be
 * handed to the pool (the caller serialises it). */
static bool wenc_start(struct req *q, bool sens, uint64_t after, json_t *a)
{
	struct server *s = q->srv;
	struct wenc *j = calloc(1, sizeof(*j));
	if (!j)
		return false;
	j->w.data = j;
	j->srv = s;
	j->kind = (int)q->kind;
	j->all = q->watch_all;
	j->sensitive = sens;
	j->after_rev = after;
	j->state_rev = iod_state_rev(iod_raft_member_state(s->node));
	j->answer = a;
	if (uv_queue_work(&s->loop, &j->w, wenc_work, wenc_after)) {
		free(j);
		return false;
	}
	j->next = s->wencs;
	s->wencs = j;
	s->wencs_n++;
	q->wenc = j;
	undefer(q);
	return true;
}

static void finish_shared(struct req *q, struct shared_text *t)
{
	t->refs++;
	q->answer_text = t;
	api__finish(q, 200, NULL);
}

static bool watch_try(struct req *q, bool timed_out)
{
	const struct iod_state *st = iod_raft_member_state(q->srv->node);
	struct iod_err e = {0};
	json_t *ev = NULL;
	bool sens = api__sees_sensitive(q);
	uint64_t after0 = q->after_rev;
	struct shared_text **hit;

	if (q->wenc)
		return false; /* being serialised */
	if (q->pending) {
		/* serialised off the loop: sent when its turn comes */
		struct shared_text *t = q->pending;
		if (!large_admit(q, t))
			return false;
		q->pending = NULL;
		api__watch_unlink(q);
		q->srv->watch_answers++;
		q->answer_text = t; /* q's reference */
		api__finish(q, 200, NULL);
		return true;
	}
	hit = wcache_find(q->srv, q, sens);
	if (hit) {
		if (!large_admit(q, *hit))
			return false;
		api__watch_unlink(q);
		q->srv->watch_answers++;
		q->srv->watch_shared++;
		finish_shared(q, *hit);
		return true;
	}
	struct wenc *running = wenc_find(q->srv, q, sens);
	if (running) {
		q->wenc = running;
		undefer(q);
		return false;
	}
	int rc = iod_state_watch(st, q->kind, q->watch_all, q->after_rev, IOD_API_WATCH_EVENTS_MAX,
	                         &ev, &e);

	if (rc) {
		json_t *a = json_pack("{s:s, s:I, s:I}", "error", e.msg, "rev",
		                      (json_int_t)iod_state_rev(st), "compacted_rev",
		                      (json_int_t)iod_state_history_floor(st));
		api__watch_unlink(q);
		api__finish(q, rc == -ESTALE ? 410 : 400, a);
		return true;
	}
	if (q->watch_all && !api__sees_sensitive(q) && json_array_size(ev)) {
		/* tokens and sealed secrets are not a viewer's business */
		uint64_t last = (uint64_t)json_integer_value(
		    json_object_get(json_array_get(ev, json_array_size(ev) - 1), "rev"));
		for (size_t i = json_array_size(ev); i-- > 0;) {
			const char *k =
			    json_string_value(json_object_get(json_array_get(ev, i), "kind"));
			enum iod_state_kind sk;
			if (k && !iod_state_kind_parse(k, &sk) &&
			    iod_sec_resource_sensitive(iod_sec_resource_of_kind(sk)))
				json_array_remove(ev, i);
		}
		if (!json_array_size(ev) && !timed_out) {
			q->after_rev = last;
			json_decref(ev);
			return false;
		}
	}
	if (json_array_size(ev) == 0 && !timed_out) {
		json_decref(ev);
		return false;
	}
	/* rev: where the next watch starts (last event's, or now when none) */
	uint64_t next = iod_state_rev(st);
	if (json_array_size(ev) == IOD_API_WATCH_EVENTS_MAX)
		next = (uint64_t)json_integer_value(
		    json_object_get(json_array_get(ev, json_array_size(ev) - 1), "rev"));
	bool some = json_array_size(ev) > 0;
	json_t *a = json_pack("{s:I, s:o}", "rev", (json_int_t)next, "events", ev);
	if (a && some) {
		/* events (up to a 1 MiB value each): serialised off the loop */
		if (q->srv->wencs_n >= IOD_API_WATCH_ENCODES_MAX) {
			json_decref(a);
			defer(q); /* retried when the slot is free */
			return false;
		}
		if (wenc_start(q, sens, after0, a))
			return false;
	}
	struct shared_text *t =
	    text_new(a ? json_dumps(a, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL);
	json_decref(a);
	if (!t) {
		api__watch_unlink(q);
		api__finish(q, 500, api__err_json("out of memory"));
		return true;
	}
	if (!timed_out || t->len >= IOD_API_WATCH_LARGE_BYTES)
		wcache_put(q->srv, (int)q->kind, q->watch_all, sens, after0,
		           iod_state_rev(iod_raft_member_state(q->srv->node)), t);
	if (!large_admit(q, t)) {
		if (!t->refs) /* not cached (no cache): made again next time */
			free(t);
		return false;
	}
	api__watch_unlink(q);
	q->srv->watch_answers++;
	finish_shared(q, t);
	return true;
}

/* Queue a shared watch answer on c (takes q's reference). */
MHD_RESULT api__queue_shared(struct server *s, struct MHD_Connection *c, int status,
                             struct shared_text *t)
{
	struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback_cls(
	    t->len, t->data, api__shared_unref, t);
	MHD_RESULT rc;
	(void)s;
	if (!r) {
		api__shared_unref(t);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (ci && ci->socket_context)
		((struct conn_ctx *)ci->socket_context)->last_status = status;
	rc = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return rc;
}

/* Drop cached answers of older states (they can never be hit again). */
static void wcache_trim(struct server *s)
{
	uint64_t rev = iod_state_rev(iod_raft_member_state(s->node));
	for (unsigned i = 0; i < WATCH_CACHE_SLOTS; i++)
		if (s->wcache_store.slot[i].text && s->wcache_store.slot[i].state_rev != rev) {
			api__shared_unref(s->wcache_store.slot[i].text);
			s->wcache_store.slot[i].text = NULL;
		}
}

void api__watchers_wake(void *data)
{
	struct server *s = data;
	wcache_trim(s);
	for (struct req *q = s->watchers, *next; q; q = next) {
		next = q->wnext;
		watch_try(q, false);
	}
	if (!s->deferred_n)
		wcache_trim(s);
}

/* A large answer was sent: answer waiting watchers while there is room. */
static void admit_cb(uv_idle_t *h)
{
	struct server *s = h->data;
	uv_idle_stop(h);
	uint64_t now = mono_ms();
	for (struct req *q = s->watchers, *next;
	     q && s->deferred_n && s->large_inflight < IOD_API_WATCH_LARGE_MAX; q = next) {
		next = q->wnext;
		if (q->deferred)
			watch_try(q, now >= q->deadline_ms);
	}
}

void api__watch_timer_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	uint64_t now = mono_ms();
	api__conns_sweep(s, now);
	for (unsigned i = 0; i < IOD_API_WATCH_LARGE_MAX; i++)
		if (s->large_q[i] && now >= s->large_q[i]->large_until_ms)
			api__large_release(s->large_q[i]);
	for (struct req *q = s->watchers, *next; q; q = next) {
		next = q->wnext;
		if (now >= q->deadline_ms)
			watch_try(q, true);
	}
	for (struct req *q = s->held, *next; q; q = next) {
		next = q->hnext;
		if (now >= q->hold_deadline_ms)
			api__held_rerun(q);
	}
}

MHD_RESULT api__do_watch(struct req *q, enum iod_state_kind k, bool all)
{
	struct server *s = q->srv;
	const struct iod_state *st = iod_raft_member_state(s->node);
	uint64_t rev = iod_state_rev(st), timeout_ms = IOD_API_WATCH_TIMEOUT_MS_DEFAULT;
	bool bad = false;

	api__query_u64(q->conn, "rev", &rev, &bad);
	api__query_u64(q->conn, "timeout_ms", &timeout_ms, &bad);
	if (bad)
		return api__queue_err(
		    s, q->conn, 400,
		    api__err_json("watch: rev and timeout_ms must be non-negative integers"));
	if (timeout_ms > IOD_API_WATCH_TIMEOUT_MS_MAX)
		timeout_ms = IOD_API_WATCH_TIMEOUT_MS_MAX;
	if (s->watchers_n >= IOD_API_CONNECTIONS_MAX)
		return api__queue_err(s, q->conn, 503,
		                      api__err_json("too many watches; retry later"));
	q->kind = k;
	q->watch_all = all;
	q->after_rev = rev;
	q->deadline_ms = mono_ms() + timeout_ms;
	q->watching = true;
	q->wnext = s->watchers;
	if (s->watchers)
		s->watchers->wprev = q;
	s->watchers = q;
	s->watchers_n++;
	if (watch_try(q, timeout_ms == 0)) {
		/* answered at once: queue it without suspending */
		q->ready = false;
		if (q->answer_text) {
			struct shared_text *t = q->answer_text;
			q->answer_text = NULL;
			return api__queue_shared(s, q->conn, q->status, t);
		}
		json_t *a = q->answer;
		q->answer = NULL;
		return api__queue_json(s, q->conn, q->status, a);
	}
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return MHD_YES;
}
