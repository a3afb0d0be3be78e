/*
 * viz_live.c: the live web view of `iod viz net-topology --live`.
 *
 * A poller thread reads the control plane every refresh (the same reads as
 * `iod top`, plus the watch API for the event feed), builds the graph with
 * src/obs/viz.c and, when it changed, publishes it. libmicrohttpd (a thread
 * per connection, at most IOD_VIZ_CONNECTIONS_MAX) serves:
 *   /, /index.html, /app.js, /style.css   the embedded page (viz_assets.c);
 *                                          any other path is a 404, a path
 *                                          with ".." a 400: nothing on disk
 *                                          is ever opened
 *   /graph.json                            the latest graph
 *   /events                                Server-Sent Events: "graph" with
 *                                          every new graph, "events" with
 *                                          new cluster events; at most
 *                                          IOD_VIZ_SSE_CLIENTS_MAX at once
 *                                          (503 beyond)
 *   /explain?replica=NAME                  the replica's placement reasons,
 *                                          `iod explain`'s text and its
 *                                          recent events
 * The page never reloads: it redraws from the SSE stream.
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

/* What the event feed keeps of a changed object, and what a click on a
 * replica shows of it (objects.h owns the keys). */
static const unsigned event_fields[] = {IOD_OBJ_REPLICA_PHASE, IOD_OBJ_REPLICA_REASON};
static const unsigned replica_fields[] = {IOD_OBJ_REPLICA_SERVICE,  IOD_OBJ_REPLICA_NODE,
                                          IOD_OBJ_REPLICA_GPUS,     IOD_OBJ_REPLICA_PHASE,
                                          IOD_OBJ_REPLICA_RESTARTS, IOD_OBJ_REPLICA_REASONS};

struct live {
	struct iod_api_client *c;     /* the control plane (poller thread only) */
	const char *mesh;             /* mesh proxy admin address, or NULL */
	uint64_t refresh_ms;          /* between reads */
	uint32_t group_over;          /* rack grouping threshold */
	pthread_mutex_t lock;         /* guards everything below */
	pthread_cond_t changed;       /* a new graph or new events */
	char *graph;                  /* the latest graph, JSON text */
	uint64_t version;             /* bumped with each new graph */
	json_t *events;               /* the last VIZ_EVENTS_KEPT events */
	uint64_t events_version;      /* bumped with each batch */
	uint64_t events_rev;          /* watch revision read up to */
	char status[IOD_ERR_MSG_MAX]; /* "" or why the cluster could not be read */
	uint32_t sse_n;               /* SSE streams open */
	uint64_t sse_total;           /* ever opened */
	uint64_t sse_refused;         /* refused over the bound */
	bool stop;                    /* leave */
};

static volatile sig_atomic_t got_signal;
static void on_signal(int s)
{
	(void)s;
	got_signal = 1;
}

/* ---- the poller -------------------------------------------------------------- */

static void read_events(struct live *l)
{
	char path[96];
	struct iod_api_response r;
	struct iod_err e = {0};
	snprintf(path, sizeof(path), "/v1/watch?rev=%llu&timeout_ms=0",
	         (unsigned long long)l->events_rev);
	if (iod_api_request(l->c, "GET", path, NULL, NULL, 0, &r, &e))
		return;
	uint64_t floor = 0;
	if (r.status == 410 && !iod_json_get_u64(r.json, "compacted_rev", &floor)) {
		l->events_rev = floor;
	} else if (r.status == 200) {
		json_t *ev = json_object_get(r.json, "events");
		uint64_t next = 0;
		iod_json_get_u64(r.json, "rev", &next);
		pthread_mutex_lock(&l->lock);
		size_t i;
		json_t *x;
		/* the first read only sets the revision: history is `iod events`' job */
		if (l->events_rev) {
			json_array_foreach(ev, i, x)
			{
				json_t *v = json_object_get(x, "value");
				json_t *s = json_pack(
				    "{s:O?, s:O?, s:O?, s:O?}", "rev", json_object_get(x, "rev"),
				    "type", json_object_get(x, "type"), "kind",
				    json_object_get(x, "kind"), "name", json_object_get(x, "name"));
				json_t *p = iod_obj_pick(IOD_OBJ_KIND_REPLICA, v, event_fields,
				                         IOD_ARRAY_LEN(event_fields));
				if (s && p)
					json_object_update(s, p);
				json_decref(p);
				json_array_append_new(l->events, s);
			}
			while (json_array_size(l->events) > VIZ_EVENTS_KEPT)
				json_array_remove(l->events, 0);
			if (json_array_size(ev)) {
				l->events_version++;
				pthread_cond_broadcast(&l->changed);
			}
		}
		if (next)
			l->events_rev = next;
		pthread_mutex_unlock(&l->lock);
	}
	iod_api_response_free(&r);
}

static void *poller(void *arg)
{
	struct live *l = arg;
	for (;;) {
		pthread_mutex_lock(&l->lock);
		bool stop = l->stop;
		pthread_mutex_unlock(&l->lock);
		if (stop)
			break;
		struct iod_ctl_cluster f;
		struct iod_err e = {0};
		if (iod_ctl_cluster_read(l->c, l->mesh, &f, &e)) {
			pthread_mutex_lock(&l->lock);
			snprintf(l->status, sizeof(l->status), "%s", e.msg);
			pthread_mutex_unlock(&l->lock);
		} else {
			struct iod_viz_input in = {.nodes = f.nodes,
			                           .services = f.services,
			                           .replicas = f.replicas,
			                           .endpoints = f.endpoints,
			                           .telemetry = f.telemetry,
			                           .mesh_metrics = f.mesh,
			                           .group_over = l->group_over};
			json_t *g = iod_viz_graph(&in);
			iod_ctl_cluster_free(&f);
			char *text = g ? json_dumps(g, JSON_COMPACT) : NULL;
			json_decref(g);
			pthread_mutex_lock(&l->lock);
			l->status[0] = 0;
			if (text && (!l->graph || strcmp(text, l->graph))) {
				free(l->graph);
				l->graph = text;
				text = NULL;
				l->version++;
				pthread_cond_broadcast(&l->changed);
			}
			pthread_mutex_unlock(&l->lock);
			free(text);
			read_events(l);
		}
		struct timespec ts = {(time_t)(l->refresh_ms / 1000),
		                      (long)(l->refresh_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
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
	struct live *l;      /* the view */
	uint64_t version;    /* graph version sent */
	uint64_t ev_version; /* events version sent */
	size_t ev_sent;      /* events of the kept list already sent (by count) */
	char *pending;       /* bytes to send, malloc'd */
	size_t pending_len;  /* their count */
	size_t pending_off;  /* sent so far */
	bool first;          /* nothing sent yet */
};

/* Fill s->pending with the next message, waiting up to 2 s (then a comment:
 * writing it is how a stream whose browser went away is noticed, so its
 * slot in IOD_VIZ_SSE_CLIENTS_MAX is back within about 2 s). */
static void sse_next(struct sse *s)
{
	struct live *l = s->l;
	struct iod_buf b;
	iod_buf_init(&b);
	pthread_mutex_lock(&l->lock);
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += 2;
	while (!l->stop && !s->first && s->version == l->version &&
	       s->ev_version == l->events_version)
		if (pthread_cond_timedwait(&l->changed, &l->lock, &until))
			break;
	if (s->version != l->version && l->graph) {
		iod_buf_printf(&b, "event: graph\ndata: %s\n\n", l->graph);
		s->version = l->version;
	}
	if (s->ev_version != l->events_version) {
		char *t = json_dumps(l->events, JSON_COMPACT);
		if (t)
			iod_buf_printf(&b, "event: events\ndata: %s\n\n", t);
		free(t);
		s->ev_version = l->events_version;
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
		char *g = l->graph ? strdup(l->graph) : NULL;
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
		char buf[160];
		pthread_mutex_lock(&l->lock);
		snprintf(buf, sizeof(buf),
		         "{\"sse_open\": %u, \"sse_total\": %llu, \"sse_refused\": %llu}", l->sse_n,
		         (unsigned long long)l->sse_total, (unsigned long long)l->sse_refused);
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
	sa.sin_port = htons((uint16_t)port);
	iod_viz_asset_find("/"); /* build the table before any thread reads it */

	static struct live l;
	memset(&l, 0, sizeof(l));
	l.c = c;
	l.mesh = mesh;
	l.refresh_ms = refresh_ms;
	l.group_over = group_over;
	l.events = json_array();
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
	free(l.graph);
	json_decref(l.events);
	return IOD_EXIT_OK;
}
