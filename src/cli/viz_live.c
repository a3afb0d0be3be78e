/*
 * viz_live.c: the live web view of `iod viz net-topology --live`.
 *
 * A poller thread lists the cluster once (nodes, services, replicas,
 * endpoints) into a model (src/obs/viz.c) and then follows the API's
 * watch (a long poll, as `iod events -f` does): each batch of changes is
 * applied to the model, the graph rebuilt in memory and only its delta
 * (nodes and edges added, changed, removed) published. Telemetry and the
 * mesh's counters, which are not in the watch, are re-read every
 * VIZ_SIDE_READ_MS. A compacted watch (410) lists again; a server without
 * a watch is re-listed every refresh. libmicrohttpd (a thread per
 * connection, at most IOD_VIZ_CONNECTIONS_MAX) serves:
 *   /, /index.html, /app.js, /style.css   the embedded page (viz_assets.c);
 *                                          any other path is a 404, a path
 *                                          with ".." a 400: nothing on disk
 *                                          is ever opened
 *   /graph.json                            the latest graph (with its
 *                                          "version")
 *   /events                                Server-Sent Events: one "graph"
 *                                          (the whole graph) first, then a
 *                                          "delta" per change, "events"
 *                                          with new cluster events; at
 *                                          most IOD_VIZ_SSE_CLIENTS_MAX at
 *                                          once (503 beyond); a stream
 *                                          further behind than the deltas
 *                                          kept gets the whole graph again
 *   /explain?replica=NAME                  the replica's placement reasons,
 *                                          `iod explain`'s text and its
 *                                          recent events
 *   /stats                                 streams, lists, watch answers
 * The page never reloads: it applies the deltas.
 *
 * It is a client of the API with the user's own credentials, not part of
 * `iod server`: it sees what the user may see, and a server carries no
 * web server, no page and no browser's connections (docs/observability.md).
 */
#include "iod/objects.h"
#include "iod/obs.h"
#include "iod/sched.h"
#include "viz.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if MHD_VERSION >= 0x00097002
#define VIZ_MHD_RESULT enum MHD_Result
#else
#define VIZ_MHD_RESULT int
#endif

#define VIZ_EVENTS_KEPT 256 /* recent cluster events for the feed and clicks */
/* Graph deltas kept for streams that fell behind (one per change; a stream
 * further behind gets the whole graph, which is always correct). */
#define VIZ_DELTAS_KEPT 64
/* Telemetry summaries and mesh counters are not in the watch: re-read
 * this often at least (the agents send summaries every few seconds; at
 * 1,000 nodes the summaries are megabytes, not for every refresh). */
#define VIZ_SIDE_READ_MS 2000
/* New nodes whose lease one watch batch reads (a node the watch added
 * carries no lease; past this, the next batch reads the rest). */
#define VIZ_LEASE_READS_MAX 64

/* What the event feed keeps of a changed object, and what a click on a
 * replica shows of it (objects.h owns the keys). */
static const unsigned event_fields[] = {IOD_OBJ_REPLICA_PHASE, IOD_OBJ_REPLICA_REASON};
static const unsigned replica_fields[] = {IOD_OBJ_REPLICA_SERVICE,  IOD_OBJ_REPLICA_NODE,
                                          IOD_OBJ_REPLICA_GPUS,     IOD_OBJ_REPLICA_PHASE,
                                          IOD_OBJ_REPLICA_RESTARTS, IOD_OBJ_REPLICA_REASONS};
static const char *const kinds[] = {"node", "service", "replica", "endpoint"};

struct live {
	struct iod_api_client *c; /* the control plane (poller thread only) */
	const char *mesh;         /* mesh proxy admin address, or NULL */
	uint64_t refresh_ms;      /* longest watch wait; relist period without a watch */
	uint32_t group_over;      /* rack grouping threshold */
	/* the poller's own */
	json_t *model;               /* the cluster's objects (iod_viz_model_*) */
	json_t *memo;                /* the graph's parts of unchanged objects (iod_viz_graph) */
	json_t *telemetry;           /* the last /v1/telemetry, or NULL */
	json_t *drops;               /* the last dropped flows (iod_ctl_drops_read), or NULL */
	char *mesh_text;             /* the last mesh /metrics, or NULL */
	json_t *spans;               /* per-edge rates' state (iod_viz_spans_add) */
	char span_cursor[1400];      /* the mesh's /spans cursor */
	uint64_t side_at_ms;         /* when telemetry and mesh were read */
	uint64_t rev;                /* the watch goes on from here */
	bool synced;                 /* the model holds a full list */
	bool no_watch;               /* the server has no watch: relist every refresh */
	pthread_mutex_t lock;        /* guards everything below */
	pthread_cond_t changed;      /* a new graph or new events */
	json_t *shown;               /* the latest graph (read-only once shown) */
	uint64_t version;            /* its version (0 = none yet) */
	char *graph_text;            /* shown as text, made when asked */
	uint64_t graph_text_version; /* the version of graph_text */
	char *delta_text[VIZ_DELTAS_KEPT];       /* delta to version v at v % KEPT */
	uint64_t delta_version[VIZ_DELTAS_KEPT]; /* which version each slot holds */
	json_t *events;                          /* the last VIZ_EVENTS_KEPT events */
	uint64_t events_total;                   /* events ever kept */
	char status[IOD_ERR_MSG_MAX];            /* "" or why the cluster could not be read */
	uint32_t sse_n;                          /* SSE streams open */
	uint64_t sse_total;                      /* ever opened */
	uint64_t sse_refused;                    /* refused over the bound */
	uint64_t lists;                          /* full lists read */
	uint64_t watch_answers;                  /* watch answers with changes */
	uint64_t deltas;                         /* deltas published */
	uint64_t rebuild_us;                     /* the last rebuild and diff took */
	bool stop;                               /* leave */
};

static volatile sig_atomic_t got_signal;
static void on_signal(int s)
{
	(void)s;
	got_signal = 1;
}

static uint64_t mono_ms(void)
{
	return iod_clock_now_ns() / IOD_NS_PER_MS;
}

/* ---- the poller -------------------------------------------------------------- */

/* Keep the feed's picked fields of a batch of watch events. */
static void keep_events(struct live *l, const json_t *ev)
{
	size_t i;
	json_t *x;
	if (!json_array_size(ev))
		return;
	pthread_mutex_lock(&l->lock);
	json_array_foreach(ev, i, x)
	{
		json_t *v = json_object_get(x, "value");
		json_t *s =
		    json_pack("{s:O?, s:O?, s:O?, s:O?}", "rev", json_object_get(x, "rev"), "type",
		              json_object_get(x, "type"), "kind", json_object_get(x, "kind"),
		              "name", json_object_get(x, "name"));
		json_t *p = iod_obj_pick(IOD_OBJ_KIND_REPLICA, v, event_fields,
		                         IOD_ARRAY_LEN(event_fields));
		if (s && p)
			json_object_update(s, p);
		json_decref(p);
		if (s) {
			json_array_append_new(l->events, s);
			l->events_total++;
		}
	}
	while (json_array_size(l->events) > VIZ_EVENTS_KEPT)
		json_array_remove(l->events, 0);
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->lock);
}

/* GET path into *out (200 only). */
static int get_json(struct live *l, const char *path, json_t **out, int *status, struct iod_err *e)
{
	struct iod_api_response r;
	*out = NULL;
	int rc = iod_api_request(l->c, "GET", path, NULL, NULL, 0, &r, e);
	if (rc)
		return rc;
	if (status)
		*status = r.status;
	if (r.status == 200 && r.json)
		*out = json_incref(r.json);
	else
		iod_err_set(e, -EIO, "GET %s: %s (HTTP %d from %s)", path, iod_api_error_text(&r),
		            r.status, r.server);
	iod_api_response_free(&r);
	return *out ? 0 : -EIO;
}

/* The mesh's spans since the last read, into the per-edge rates (a few
 * answers when the proxy has more than one holds); 1 when any came. */
static int read_spans(struct live *l)
{
	int got = 0;
	if (!l->spans && !(l->spans = json_object()))
		return 0;
	for (int k = 0; k < 8; k++) {
		struct iod_http_conn fd = {0};
		struct iod_api_response r;
		struct iod_err e = {0};
		char path[1500];
		json_t *doc = NULL;
		snprintf(path, sizeof(path), "/spans?after=%s", l->span_cursor);
		if (!iod_api_http_once(&fd, l->mesh, "GET", path, NULL, NULL, 0, 1000, &r, &e)) {
			if (r.status == 200 && r.body)
				doc = json_loads(r.body, 0, NULL);
			iod_api_response_free(&r);
		}
		iod_http_conn_close(&fd);
		if (!doc)
			break;
		const char *cur = json_string_value(json_object_get(doc, "cursor"));
		iod_strlcpy(l->span_cursor, cur ? cur : "", sizeof(l->span_cursor));
		size_t n = json_array_size(json_object_get(doc, "spans"));
		iod_viz_spans_add(l->spans, doc, mono_ms());
		json_decref(doc);
		got |= n > 0;
		if (!n)
			break;
	}
	return got || json_object_get(l->spans, "buckets") != NULL;
}

/* Telemetry and the mesh's counters: 1 when they changed. */
static int read_side(struct live *l)
{
	struct iod_err e = {0};
	json_t *t = NULL;
	int changed = 0;
	l->side_at_ms = mono_ms();
	if (get_json(l, "/v1/telemetry", &t, NULL, &e))
		t = NULL; /* optional: an older server has none */
	if (!json_equal(t, l->telemetry) && (t || l->telemetry))
		changed = 1;
	json_decref(l->telemetry);
	l->telemetry = t;
	/* the flows the nodes' virtual switches dropped, as `iod trace --drops` */
	json_t *dr = iod_ctl_drops_read(NULL);
	if (!json_equal(dr, l->drops) && (dr || l->drops))
		changed = 1;
	json_decref(l->drops);
	l->drops = dr;
	if (l->mesh && l->mesh[0]) {
		struct iod_http_conn fd = {0};
		struct iod_api_response r;
		char *m = NULL;
		if (!iod_api_http_once(&fd, l->mesh, "GET", "/metrics", NULL, NULL, 0, 1000, &r,
		                       &e)) {
			if (r.status == 200 && r.body)
				m = strdup(r.body);
			iod_api_response_free(&r);
		}
		iod_http_conn_close(&fd);
		if ((m || l->mesh_text) && (!m || !l->mesh_text || strcmp(m, l->mesh_text)))
			changed = 1;
		free(l->mesh_text);
		l->mesh_text = m;
		if (read_spans(l))
			changed = 1;
	}
	return changed;
}

/* List every kind into the model; the watch goes on from the oldest list's
 * revision (replaying a change a later list already holds is harmless).
 * The feed starts with the last VIZ_EVENTS_KEPT events of the history. */
static int list_all(struct live *l, struct iod_err *e)
{
	uint64_t rev = UINT64_MAX;
	for (size_t i = 0; i < IOD_ARRAY_LEN(kinds); i++) {
		char path[48];
		json_t *x;
		snprintf(path, sizeof(path), "/v1/%ss", kinds[i]);
		if (get_json(l, path, &x, NULL, e))
			return -EIO;
		uint64_t r = 0;
		iod_json_get_u64(x, "rev", &r);
		rev = r < rev ? r : rev;
		int rc = iod_viz_model_load(l->model, kinds[i], x);
		json_decref(x);
		if (rc)
			return iod_err_set(e, rc, "%s: not a list", path);
	}
	bool first = !l->rev;
	l->rev = rev == UINT64_MAX ? 0 : rev;
	l->synced = true;
	pthread_mutex_lock(&l->lock);
	l->lists++;
	pthread_mutex_unlock(&l->lock);
	if (first && l->rev) {
		char path[96];
		json_t *h = NULL;
		struct iod_err he = {0};
		snprintf(
		    path, sizeof(path), "/v1/watch?rev=%llu&timeout_ms=0",
		    (unsigned long long)(l->rev > VIZ_EVENTS_KEPT ? l->rev - VIZ_EVENTS_KEPT : 0));
		if (!get_json(l, path, &h, NULL, &he))
			keep_events(l, json_object_get(h, "events"));
		json_decref(h);
	}
	return 0;
}

/* A node the watch added: its lease (the watch does not carry it). */
static void read_leases(struct live *l, const json_t *ev)
{
	size_t i, n = 0;
	json_t *x;
	json_array_foreach(ev, i, x)
	{
		const char *name = json_string_value(json_object_get(x, "name"));
		if (!name || !iod_viz_model_unleased(l->model, "node", name) ||
		    n++ >= VIZ_LEASE_READS_MAX || !iod_state_name_valid(name))
			continue;
		char path[IOD_NAME_MAX + 16];
		json_t *o = NULL;
		struct iod_err e = {0};
		snprintf(path, sizeof(path), "/v1/nodes/%s", name);
		json_t *item = json_object_get(json_object_get(l->model, "node"), name);
		if (!get_json(l, path, &o, NULL, &e) && item) {
			json_t *ls = json_object_get(o, "lease");
			json_object_set_new(item, "lease", ls ? json_incref(ls) : json_integer(0));
		}
		json_decref(o);
	}
}

/* One watch answer (waiting at most wait_ms): 1 the model changed, 0 not,
 * negative when the model must be listed again. */
static int watch_once(struct live *l, uint64_t wait_ms, struct iod_err *e)
{
	char path[96];
	struct iod_api_response r;
	snprintf(path, sizeof(path), "/v1/watch?rev=%llu&timeout_ms=%llu",
	         (unsigned long long)l->rev, (unsigned long long)wait_ms);
	l->c->timeout_ms = (uint32_t)(wait_ms + 3000);
	int rc = iod_api_request(l->c, "GET", path, NULL, NULL, 0, &r, e);
	l->c->timeout_ms = 2000;
	if (rc)
		return rc;
	if (r.status == 404 || r.status == 405) {
		l->no_watch = true; /* an older server: list every refresh */
		iod_api_response_free(&r);
		return -ENOTSUP;
	}
	if (r.status != 200) {
		/* 410: compacted past our revision; anything else: start over */
		iod_err_set(e, -ESTALE, "watch: HTTP %d", r.status);
		iod_api_response_free(&r);
		return -ESTALE;
	}
	json_t *ev = json_object_get(r.json, "events");
	size_t i;
	json_t *x;
	int changed = 0;
	json_array_foreach(ev, i, x)
	{
		int a = iod_viz_model_apply(l->model, x);
		if (a < 0) {
			iod_api_response_free(&r);
			return iod_err_set(e, -ESTALE, "watch: a malformed event: listing again");
		}
		changed |= a;
	}
	if (changed)
		read_leases(l, ev);
	keep_events(l, ev);
	uint64_t next = 0;
	if (!iod_json_get_u64(r.json, "rev", &next) && next)
		l->rev = next;
	iod_api_response_free(&r);
	if (changed) {
		pthread_mutex_lock(&l->lock);
		l->watch_answers++;
		pthread_mutex_unlock(&l->lock);
	}
	return changed;
}

/* Build the graph from the model and publish what changed. */
static void rebuild(struct live *l)
{
	uint64_t t0 = iod_clock_now_ns();
	json_t *lists[IOD_ARRAY_LEN(kinds)];
	for (size_t i = 0; i < IOD_ARRAY_LEN(kinds); i++)
		lists[i] = iod_viz_model_list(l->model, kinds[i]);
	json_t *rates = l->spans ? iod_viz_edge_rates(l->spans, mono_ms()) : NULL;
	struct iod_viz_input in = {.nodes = lists[0],
	                           .services = lists[1],
	                           .replicas = lists[2],
	                           .endpoints = lists[3],
	                           .telemetry = l->telemetry,
	                           .mesh_metrics = l->mesh_text,
	                           .edge_rates = rates,
	                           .drops = l->drops,
	                           .group_over = l->group_over,
	                           .memo = l->memo};
	json_t *g = iod_viz_graph(&in);
	json_decref(rates);
	for (size_t i = 0; i < IOD_ARRAY_LEN(kinds); i++)
		json_decref(lists[i]);
	if (!g)
		return;
	json_t *d = NULL;
	if (l->shown && iod_viz_graph_delta(l->shown, g, &d) <= 0) {
		json_decref(g); /* nothing changed (or no memory: the next turn tries again) */
		return;
	}
	uint64_t v = l->version + 1;
	json_object_set_new(g, "version", json_integer((json_int_t)v));
	char *dt = NULL;
	if (d) {
		json_object_set_new(d, "version", json_integer((json_int_t)v));
		json_object_set_new(d, "base", json_integer((json_int_t)v - 1));
		dt = json_dumps(d, JSON_COMPACT);
		json_decref(d);
	}
	pthread_mutex_lock(&l->lock);
	json_t *old = l->shown;
	l->shown = g;
	l->version = v;
	free(l->delta_text[v % VIZ_DELTAS_KEPT]);
	l->delta_text[v % VIZ_DELTAS_KEPT] = dt;
	l->delta_version[v % VIZ_DELTAS_KEPT] = dt ? v : 0;
	l->deltas += dt != NULL;
	l->rebuild_us = (iod_clock_now_ns() - t0) / 1000;
	l->status[0] = 0;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->lock);
	json_decref(old);
}

static void set_status(struct live *l, const char *msg)
{
	pthread_mutex_lock(&l->lock);
	bool was = l->status[0] != 0;
	snprintf(l->status, sizeof(l->status), "%s", msg);
	if (!was)
		pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->lock);
}

static bool stopping(struct live *l)
{
	pthread_mutex_lock(&l->lock);
	bool stop = l->stop;
	pthread_mutex_unlock(&l->lock);
	return stop || got_signal;
}

static void pause_ms(uint64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void *poller(void *arg)
{
	struct live *l = arg;
	while (!stopping(l)) {
		struct iod_err e = {0};
		int changed = 0;
		if (!l->synced || l->no_watch) {
			if (list_all(l, &e)) {
				set_status(l, e.msg);
				pause_ms(l->refresh_ms);
				continue;
			}
			changed = 1;
		} else {
			int rc = watch_once(l, l->refresh_ms, &e);
			if (rc == -ENOTSUP)
				continue; /* list at once, then every refresh */
			if (rc < 0) {
				l->synced = false;
				if (rc != -ESTALE) {
					set_status(l, e.msg);
					pause_ms(l->refresh_ms);
				}
				continue;
			}
			changed = rc;
		}
		if (!l->side_at_ms || mono_ms() - l->side_at_ms >= VIZ_SIDE_READ_MS)
			changed |= read_side(l);
		if (changed || !l->version)
			rebuild(l);
		else {
			pthread_mutex_lock(&l->lock);
			l->status[0] = 0;
			pthread_mutex_unlock(&l->lock);
		}
		if (l->no_watch)
			pause_ms(l->refresh_ms);
	}
	return NULL;
}

/* ---- HTTP ----------------------------------------------------------------------- */

static VIZ_MHD_RESULT answer(struct MHD_Connection *c, unsigned code, const char *ctype,
                             const void *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, mode);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", ctype);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	VIZ_MHD_RESULT rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

static VIZ_MHD_RESULT answer_text(struct MHD_Connection *c, unsigned code, const char *text)
{
	return answer(c, code, "text/plain; charset=utf-8", text, strlen(text),
	              MHD_RESPMEM_PERSISTENT);
}

/* One SSE stream's position. */
struct sse {
	struct live *l;     /* the view */
	uint64_t version;   /* graph version the page has (0 = none) */
	uint64_t ev_seen;   /* events_total already sent */
	char *pending;      /* bytes to send, malloc'd */
	size_t pending_len; /* their count */
	size_t pending_off; /* sent so far */
	bool first;         /* nothing sent yet */
};

/* The whole graph as text (made once per version, under l->lock). */
static const char *graph_text(struct live *l)
{
	if (l->shown && l->graph_text_version != l->version) {
		char *t = json_dumps(l->shown, JSON_COMPACT);
		if (!t)
			return NULL;
		free(l->graph_text);
		l->graph_text = t;
		l->graph_text_version = l->version;
	}
	return l->shown ? l->graph_text : NULL;
}

/* Whether every delta from version have+1 to the latest is kept. */
static bool deltas_kept(const struct live *l, uint64_t have)
{
	if (!have || l->version - have > VIZ_DELTAS_KEPT - 1)
		return false;
	for (uint64_t v = have + 1; v <= l->version; v++)
		if (l->delta_version[v % VIZ_DELTAS_KEPT] != v)
			return false;
	return true;
}

/* Fill s->pending with the next messages, waiting up to 2 s (then a
 * comment: writing it is how a stream whose browser went away is noticed,
 * so its slot in IOD_VIZ_SSE_CLIENTS_MAX is back within about 2 s). */
static void sse_next(struct sse *s)
{
	struct live *l = s->l;
	struct iod_buf b;
	iod_buf_init(&b);
	pthread_mutex_lock(&l->lock);
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += 2;
	while (!l->stop && !s->first && s->version == l->version && s->ev_seen == l->events_total)
		if (pthread_cond_timedwait(&l->changed, &l->lock, &until))
			break;
	if (s->version != l->version) {
		if (deltas_kept(l, s->version)) {
			for (uint64_t v = s->version + 1; v <= l->version; v++)
				iod_buf_printf(&b, "event: delta\ndata: %s\n\n",
				               l->delta_text[v % VIZ_DELTAS_KEPT]);
			s->version = l->version;
		} else {
			const char *g = graph_text(l);
			if (g) {
				iod_buf_printf(&b, "event: graph\ndata: %s\n\n", g);
				s->version = l->version;
			}
		}
	}
	if (s->ev_seen != l->events_total) {
		/* only the events this stream has not had (all kept ones at first) */
		size_t kept = json_array_size(l->events);
		uint64_t fresh = l->events_total - s->ev_seen;
		json_t *a = json_array();
		for (size_t i = fresh < kept ? kept - (size_t)fresh : 0; a && i < kept; i++)
			json_array_append(a, json_array_get(l->events, i));
		char *t = a ? json_dumps(a, JSON_COMPACT) : NULL;
		json_decref(a);
		if (t)
			iod_buf_printf(&b, "event: events\ndata: %s\n\n", t);
		free(t);
		s->ev_seen = l->events_total;
	}
	if (l->status[0])
		iod_buf_printf(&b, "event: status\ndata: {\"error\": \"cluster unreachable\"}\n\n");
	if (!b.len)
		iod_buf_printf(&b, ": keep-alive\n\n");
	s->first = false;
	pthread_mutex_unlock(&l->lock);
	free(s->pending);
	s->pending = b.data;
	s->pending_len = b.len;
	s->pending_off = 0;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *s = cls;
	(void)pos;
	if (got_signal || s->l->stop)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (s->pending_off >= s->pending_len)
		sse_next(s);
	if (!s->pending)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	size_t n = s->pending_len - s->pending_off;
	if (n > max)
		n = max;
	memcpy(buf, s->pending + s->pending_off, n);
	s->pending_off += n;
	return (ssize_t)n;
}

static void sse_free(void *cls)
{
	struct sse *s = cls;
	pthread_mutex_lock(&s->l->lock);
	s->l->sse_n--;
	pthread_mutex_unlock(&s->l->lock);
	free(s->pending);
	free(s);
}

static VIZ_MHD_RESULT explain(struct live *l, struct MHD_Connection *c)
{
	const char *name = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "replica");
	if (!name || !iod_state_name_valid(name))
		return answer_text(c, 400, "explain: want ?replica=NAME\n");
	/* its own client: the poller owns l->c */
	struct iod_api_client cl;
	struct iod_err e = {0};
	char path[IOD_NAME_MAX + 16];
	if (iod_api_client_init(&cl, NULL, &e))
		return answer_text(c, 500, "no API client\n");
	memcpy(cl.servers, l->c->servers, sizeof(cl.servers));
	cl.servers_n = l->c->servers_n;
	iod_api_client_set_creds(&cl, l->c->creds, l->c->token); /* the poller's, not owned */
	cl.timeout_ms = 2000;
	cl.retry_ms = 2000;
	snprintf(path, sizeof(path), "/v1/replica/%s", name);
	struct iod_api_response r;
	if (iod_api_request(&cl, "GET", path, NULL, NULL, 0, &r, &e)) {
		iod_api_client_close(&cl);
		return answer_text(c, 503, "cluster unreachable\n");
	}
	iod_api_client_close(&cl);
	if (r.status != 200) {
		iod_api_response_free(&r);
		return answer_text(c, 404, "no such replica\n");
	}
	json_t *v = json_object_get(r.json, "value");
	json_t *o = json_pack("{s:s}", "replica", name);
	json_t *p =
	    iod_obj_pick(IOD_OBJ_KIND_REPLICA, v, replica_fields, IOD_ARRAY_LEN(replica_fields));
	if (o && p)
		json_object_update(o, p);
	json_decref(p);
	const json_t *ex = iod_obj_peek_json(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_EXPLAIN);
	if (ex) {
		struct iod_buf b;
		iod_buf_init(&b);
		if (!iod_sched_explain_format_json(ex, &b) && b.data)
			json_object_set_new(
			    o, iod_obj_key(IOD_OBJ_KIND_REPLICA, IOD_OBJ_REPLICA_EXPLAIN),
			    json_string(b.data));
		iod_buf_free(&b);
	}
	json_t *mine = json_array();
	pthread_mutex_lock(&l->lock);
	size_t i;
	json_t *x;
	json_array_foreach(l->events, i, x)
	{
		const char *n = NULL;
		if (!iod_json_get_str(x, "name", &n) && !strcmp(n, name))
			json_array_append(mine, x);
	}
	pthread_mutex_unlock(&l->lock);
	json_object_set_new(o, "events", mine);
	iod_api_response_free(&r);
	char *t = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!t)
		return answer_text(c, 500, "out of memory\n");
	return answer(c, 200, "application/json", t, strlen(t), MHD_RESPMEM_MUST_FREE);
}

static VIZ_MHD_RESULT handler(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
	struct live *l = cls;
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return answer_text(c, 405, "the view is read-only: GET\n");
	if (strstr(url, "..") || strchr(url, '\\'))
		return answer_text(c, 400, "path traversal refused\n");
	const struct iod_viz_asset *a = iod_viz_asset_find(url);
	if (a)
		return answer(c, 200, a->ctype, a->data, a->len, MHD_RESPMEM_PERSISTENT);
	if (!strcmp(url, "/graph.json")) {
		pthread_mutex_lock(&l->lock);
		const char *gt = graph_text(l);
		char *g = gt ? strdup(gt) : NULL;
		pthread_mutex_unlock(&l->lock);
		if (!g)
			return answer_text(c, 503, "no graph yet: the cluster has not answered\n");
		return answer(c, 200, "application/json", g, strlen(g), MHD_RESPMEM_MUST_FREE);
	}
	if (!strcmp(url, "/explain"))
		return explain(l, c);
	if (!strcmp(url, "/events")) {
		pthread_mutex_lock(&l->lock);
		bool full = l->sse_n >= IOD_VIZ_SSE_CLIENTS_MAX;
		if (full)
			l->sse_refused++;
		else {
			l->sse_n++;
			l->sse_total++;
		}
		pthread_mutex_unlock(&l->lock);
		if (full)
			return answer_text(c, 503,
			                   "too many live views open (IOD_VIZ_SSE_CLIENTS_MAX)\n");
		struct sse *s = calloc(1, sizeof(*s));
		if (!s) {
			sse_free(&(struct sse){.l = l});
			return MHD_NO;
		}
		s->l = l;
		s->first = true;
		struct MHD_Response *r = MHD_create_response_from_callback(
		    MHD_SIZE_UNKNOWN, 64 * 1024, sse_read, s, sse_free);
		if (!r) {
			sse_free(s);
			return MHD_NO;
		}
		MHD_add_response_header(r, "Content-Type", "text/event-stream");
		MHD_add_response_header(r, "Cache-Control", "no-store");
		VIZ_MHD_RESULT rc = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
		return rc;
	}
	if (!strcmp(url, "/stats")) {
		char buf[320];
		pthread_mutex_lock(&l->lock);
		snprintf(buf, sizeof(buf),
		         "{\"sse_open\": %u, \"sse_total\": %llu, \"sse_refused\": %llu, "
		         "\"version\": %llu, \"lists\": %llu, \"watch_answers\": %llu, "
		         "\"deltas\": %llu, \"rebuild_ms\": %.1f, \"watch\": %s}",
		         l->sse_n, (unsigned long long)l->sse_total,
		         (unsigned long long)l->sse_refused, (unsigned long long)l->version,
		         (unsigned long long)l->lists, (unsigned long long)l->watch_answers,
		         (unsigned long long)l->deltas, (double)l->rebuild_us / 1000.0,
		         l->no_watch ? "false" : "true");
		pthread_mutex_unlock(&l->lock);
		char *t = strdup(buf);
		return t ? answer(c, 200, "application/json", t, strlen(t), MHD_RESPMEM_MUST_FREE)
		         : MHD_NO;
	}
	return answer_text(c, 404, "not part of the view\n");
}

int iod_viz_live_run(struct iod_api_client *c, const char *mesh, const char *listen,
                     uint64_t refresh_ms, uint32_t group_over)
{
	char host[IOD_ADDR_MAX];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	if (iod_strlcpy(host, listen, sizeof(host)) || !strrchr(host, ':'))
		return iod_cli_fail("viz", IOD_EXIT_INVALID, "--listen %s: want IP:PORT", listen);
	char *colon = strrchr(host, ':');
	*colon = 0;
	long port = strtol(colon + 1, NULL, 10);
	if (port < 1 || port > 65535 || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return iod_cli_fail("viz", IOD_EXIT_INVALID, "--listen %s: want IPv4:PORT", listen);
	/* the view shows what the caller's credential reads, to whoever connects:
	 * no listener beyond loopback without authentication and TLS */
	if ((ntohl(sa.sin_addr.s_addr) >> 24) != 127)
		return iod_cli_fail("viz", IOD_EXIT_INVALID,
		                    "--listen %s: loopback only (127.x.y.z): the live view has no "
		                    "TLS or authentication, and shows the cluster as your "
		                    "credential reads it (tunnel to it: ssh -L)",
		                    listen);
	sa.sin_port = htons((uint16_t)port);
	iod_viz_asset_find("/"); /* build the table before any thread reads it */

	static struct live l;
	memset(&l, 0, sizeof(l));
	l.c = c;
	l.mesh = mesh;
	l.refresh_ms = refresh_ms;
	l.group_over = group_over;
	l.events = json_array();
	l.model = iod_viz_model_new();
	l.memo = json_object();
	if (!l.events || !l.model || !l.memo)
		return iod_cli_fail("viz", IOD_EXIT_ERROR, "out of memory");
	c->timeout_ms = 2000;
	c->retry_ms = 1000;
	pthread_mutex_init(&l.lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l.changed, &ca);
	pthread_condattr_destroy(&ca);

	struct sigaction sig = {0};
	sig.sa_handler = on_signal;
	sigaction(SIGINT, &sig, NULL);
	sigaction(SIGTERM, &sig, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct MHD_Daemon *d = MHD_start_daemon(
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
	    NULL, NULL, handler, &l, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)IOD_VIZ_CONNECTIONS_MAX,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)IOD_VIZ_CONNECTIONS_MAX,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
	if (!d)
		return iod_cli_fail("viz", IOD_EXIT_ERROR, "cannot listen on %s (in use?)", listen);
	pthread_t t;
	if (pthread_create(&t, NULL, poller, &l)) {
		MHD_stop_daemon(d);
		return iod_cli_fail("viz", IOD_EXIT_ERROR, "cannot start the poller thread");
	}
	printf("live view on http://%s/ (Ctrl-C stops it)\n", listen);
	fflush(stdout);
	while (!got_signal)
		pause();
	pthread_mutex_lock(&l.lock);
	l.stop = true;
	pthread_cond_broadcast(&l.changed);
	pthread_mutex_unlock(&l.lock);
	pthread_join(t, NULL);
	MHD_stop_daemon(d);
	json_decref(l.shown);
	free(l.graph_text);
	for (size_t i = 0; i < VIZ_DELTAS_KEPT; i++)
		free(l.delta_text[i]);
	json_decref(l.model);
	json_decref(l.memo);
	json_decref(l.telemetry);
	json_decref(l.drops);
	free(l.mesh_text);
	json_decref(l.spans);
	json_decref(l.events);
	return IOD_EXIT_OK;
}
