/*
 * server.c: `iod server`: the HTTP/JSON API (libmicrohttpd) in front of a
 * replicated node (raft + state machine), all on one libuv loop.
 *
 * MHD runs in its external-loop epoll mode: its epoll descriptor is watched
 * by a uv_poll handle and MHD_run is called from the loop, so request
 * handlers, raft callbacks and the state machine share one thread and need no
 * locks (raft's libuv backend is single-threaded too). A write is proposed to
 * raft and its connection suspended (MHD suspend/resume) until the entry is
 * committed and applied; a watch is suspended until the state passes its
 * revision or its timeout. Every error answer is a JSON body
 * {"error": "..."} with a 4xx/5xx code; a bad request never stops the server.
 *
 * This file is the HTTP glue: connection deadlines (slowloris), answers,
 * routing, MHD on the loop, joining a cluster and the life cycle. Writes
 * and redirects are in server_write.c, watches in server_watch.c, work off
 * the loop in server_job.c, security in server_sec.c (server_internal.h).
 *
 * It must never block the loop (no synchronous network calls here) and never
 * answer a write before it is committed.
 */
#include "server_internal.h"

#include "iod/obs.h"

#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>

/* ---- slowloris deadlines ------------------------------------------------ */

static void conns_unlink(struct server *s, struct conn_ctx *cc)
{
	if (!cc->prev && s->conns != cc)
		return; /* not on the list */
	if (cc->prev)
		cc->prev->next = cc->next;
	else
		s->conns = cc->next;
	if (cc->next)
		cc->next->prev = cc->prev;
	else
		s->conns_tail = cc->prev;
	cc->prev = cc->next = NULL;
	s->conns_n--;
}

static void conns_append(struct server *s, struct conn_ctx *cc)
{
	cc->next = NULL;
	cc->prev = s->conns_tail;
	if (s->conns_tail)
		s->conns_tail->next = cc;
	else
		s->conns = cc;
	s->conns_tail = cc;
	s->conns_n++;
}

/* Enter a phase. PHASE_HEAD moves the connection to the list's end (the
 * list stays ordered by when each entered it); PHASE_BODY's deadline grows
 * with the body's declared length. NULL (no context) is a no-op. */
static void conn_phase_set(struct conn_ctx *cc, enum conn_phase ph, uint64_t body_bytes)
{
	uint64_t now = mono_ms();
	if (!cc || cc->phase == ph)
		return;
	if (ph == PHASE_HEAD) {
		conns_unlink(cc->srv, cc);
		conns_append(cc->srv, cc);
		cc->deadline_ms = now + IOD_API_HEADER_TIMEOUT_S * 1000ull;
	} else if (ph == PHASE_BODY) {
		if (body_bytes > IOD_API_BODY_MAX)
			body_bytes = IOD_API_BODY_MAX;
		cc->deadline_ms = now + IOD_API_BODY_TIMEOUT_S * 1000ull +
		                  body_bytes * 1000ull / IOD_API_BODY_RATE_MIN_BPS;
	}
	cc->phase = ph;
}

/* Close a connection from under MHD: shutdown() makes its next read see
 * end of file, and MHD closes it (and tells conn_notify) on its next run. */
static void conn_shut(struct conn_ctx *cc)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(cc->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (cc->closing || !ci)
		return;
	shutdown(ci->connect_fd, SHUT_RDWR);
	cc->closing = true;
	api__mhd_kick(cc->srv);
}

/* When few slots are left: close the n oldest connections still sending
 * their heads (other than cc, a new one), those that have been for
 * IOD_API_EVICT_HEAD_AGE_MS. One per new connection, and the excess at each
 * sweep, so that the table never stays full of connections that trickle
 * their heads. kept: kept-alive connections between requests (answered,
 * idle until the client asks again) count too, else only first heads. */
static void conns_make_room(struct server *s, struct conn_ctx *cc, uint32_t n, bool kept)
{
	const uint64_t head_ms = IOD_API_HEADER_TIMEOUT_S * 1000ull;
	uint64_t now = mono_ms();
	uint32_t shut = 0;
	for (struct conn_ctx *o = s->conns; o && o != cc && shut < n; o = o->next) {
		if (o->phase != PHASE_HEAD || o->closing || (o->kept_alive && !kept))
			continue;
		/* the list is in order of entering PHASE_HEAD: the rest are younger */
		if (o->deadline_ms - head_ms + IOD_API_EVICT_HEAD_AGE_MS > now)
			break;
		conn_shut(o);
		s->evicted++;
		shut++;
	}
}

/* Connections over mark, not counting those already closing. */
static uint32_t conns_excess(const struct server *s, uint32_t mark)
{
	uint32_t live = 0;
	for (const struct conn_ctx *o = s->conns; o; o = o->next)
		live += !o->closing;
	return live > mark ? live - mark : 0;
}

/*
 * Room for new clients. First heads (a connection not yet answered: a
 * slowloris trickles these) are closed, oldest first, to keep
 * IOD_API_CONNECTIONS_SPARE slots free. A kept-alive connection between
 * requests has been answered and is idle until its client asks again (a
 * watcher reading another answer first, a CLI between commands): it is
 * closed only to keep the last slot free, which MHD needs to accept a new
 * connection at all (it refuses at IOD_API_CONNECTIONS_MAX, before
 * conn_notify could make room). Closing those by the spare mark cost the
 * 1,000-watcher flood exactly 40 watchers (1,000 - 960) that asked again
 * more than IOD_API_EVICT_HEAD_AGE_MS after a first answer, with 24 slots
 * free and no one waiting for them. cc: a new connection (not closed), or
 * NULL at a sweep.
 */
static void conns_keep_room(struct server *s, struct conn_ctx *cc)
{
	const uint32_t mark = IOD_API_CONNECTIONS_MAX - IOD_API_CONNECTIONS_SPARE;
	if (s->conns_n <= mark)
		return;
	conns_make_room(s, cc, cc ? 1 : conns_excess(s, mark), false);
	uint32_t full = conns_excess(s, IOD_API_CONNECTIONS_MAX - 1);
	if (full)
		conns_make_room(s, cc, full, true);
}

/* Close every connection past its head or body deadline. At most
 * IOD_API_CONNECTIONS_MAX entries, every IOD_API_DEADLINE_SWEEP_MS. */
void api__conns_sweep(struct server *s, uint64_t now)
{
	if (now < s->sweep_at_ms)
		return;
	s->sweep_at_ms = now + IOD_API_DEADLINE_SWEEP_MS;
	for (struct conn_ctx *cc = s->conns; cc; cc = cc->next) {
		if (cc->closing || cc->phase == PHASE_ANSWER || now < cc->deadline_ms)
			continue;
		if (cc->phase == PHASE_HEAD)
			s->closed_head++;
		else
			s->closed_body++;
		conn_shut(cc);
	}
	/* a burst that filled the table (its heads too young to close when
	 * it arrived): keep IOD_API_CONNECTIONS_SPARE slots for new clients */
	conns_keep_room(s, NULL);
}

/* ---- answers ------------------------------------------------------------ */

static MHD_RESULT queue_text(struct server *s, struct MHD_Connection *c, int status,
                             const char *ctype, char *text)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_RESULT rc;

	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (status == 401)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
		                        "Bearer realm=\"iod\"");
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (ci && ci->socket_context)
		((struct conn_ctx *)ci->socket_context)->last_status = status;
	rc = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	if (status > 0 && status < STATUS_CODES)
		s->requests[status]++;
	return rc;
}

MHD_RESULT api__queue_json(struct server *s, struct MHD_Connection *c, int status, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(j);
	if (!text)
		return MHD_NO;
	size_t n = strlen(text);
	char *t2 = realloc(text, n + 2);
	if (t2) {
		t2[n] = '\n';
		t2[n + 1] = 0;
		text = t2;
	}
	return queue_text(s, c, status, "application/json", text);
}

json_t *api__err_json(const char *fmt, ...)
{
	char msg[IOD_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s}", "error", msg);
}

MHD_RESULT api__queue_err(struct server *s, struct MHD_Connection *c, int status, json_t *j)
{
	return api__queue_json(s, c, status, j);
}

int api__code_for(int err)
{
	switch (err) {
	case 0: return 200;
	case -EINVAL: return 400;
	case -ENOENT: return 404;
	case -ECANCELED: return 409;
	case -E2BIG: return 413;
	case -ENOSPC: return 507;
	case -ENOTCONN:
	case -EBUSY:
	case -ESHUTDOWN: return 503;
	default: return 500;
	}
}

/* Prepare an answer for a suspended request and resume it. */
void api__finish(struct req *q, int status, json_t *answer)
{
	q->status = status;
	json_decref(q->answer);
	q->answer = answer;
	q->ready = true;
	if (q->suspended) {
		q->suspended = false;
		MHD_resume_connection(q->conn);
		api__mhd_kick(q->srv);
	}
}

/* ---- routing ------------------------------------------------------------ */

static MHD_RESULT unknown_kind(struct server *s, struct MHD_Connection *c, const char *kind)
{
	const char *names[2 * IOD_STATE_KIND_COUNT + 8];
	size_t n = 0;
	for (unsigned i = 0; i < IOD_STATE_KIND_COUNT; i++) {
		names[n++] = iod_state_kind_name((enum iod_state_kind)i);
		names[n++] = iod_state_kind_plural((enum iod_state_kind)i);
	}
	names[n++] = "status";
	names[n++] = "deploy";
	names[n++] = "leases";
	names[n++] = "members";
	names[n++] = "txn";
	const char *sug = iod_suggest(kind, names, n);
	return api__queue_err(
	    s, c, 404,
	    api__err_json("unknown kind \"%s\"%s%s%s; kinds: nodes, services, replicas, "
	                  "endpoints, policies, configs",
	                  kind, sug ? " (did you mean \"" : "", sug ? sug : "", sug ? "\"?)" : ""));
}

/*
 * PUT/GET /v1/telemetry[/NODE]: the agents' summaries (docs/observability.md).
 * They are observations, not state: held by the leader in memory, never
 * written to Raft, replaced by each push, lost (and refilled by the next
 * push) when the leader changes. Bounded by IOD_TEL_NODES_MAX.
 */
static MHD_RESULT do_telemetry(struct req *q, const char *method, const char *name)
{
	struct server *s = q->srv;
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	uint64_t now = iod_time_unix_ns() / IOD_NS_PER_MS;

	if (!get && (strcmp(method, "PUT") || !name))
		return api__queue_err(
		    s, q->conn, 405,
		    api__err_json("telemetry: GET /v1/telemetry[/NODE], PUT /v1/telemetry/NODE"));
	if (name && !iod_state_name_valid(name))
		return api__queue_err(s, q->conn, 400,
		                      api__err_json("invalid node name \"%.64s\"", name));
	if (!iod_raft_member_is_leader(s->node))
		return api__not_leader(q);
	if (get) {
		json_t *items = json_array();
		for (uint32_t i = 0; i < s->tel_n; i++) {
			if (name && strcmp(s->tel[i].node, name))
				continue;
			json_array_append_new(
			    items, json_pack("{s:s, s:I, s:I, s:O}", "name", s->tel[i].node,
			                     "at_ms", (json_int_t)s->tel[i].at_ms, "age_ms",
			                     (json_int_t)(now - s->tel[i].at_ms), "value",
			                     s->tel[i].value));
		}
		if (name && !json_array_size(items)) {
			json_decref(items);
			return api__queue_err(s, q->conn, 404,
			                      api__err_json("no telemetry from node %s yet", name));
		}
		return api__queue_json(s, q->conn, 200, json_pack("{s:o}", "items", items));
	}
	json_t *err = NULL, *v = api__body_json(q, &err);
	if (!v)
		return api__queue_err(s, q->conn, 400, err);
	if (!json_is_object(v)) {
		json_decref(v);
		return api__queue_err(s, q->conn, 400,
		                      api__err_json("telemetry: the body must be a JSON object"));
	}
	json_object_set_new(v, "node", json_string(name));
	struct tel_entry *t = NULL;
	for (uint32_t i = 0; i < s->tel_n && !t; i++)
		if (!strcmp(s->tel[i].node, name))
			t = &s->tel[i];
	if (!t) {
		if (!s->tel && !(s->tel = calloc(IOD_TEL_NODES_MAX, sizeof(*s->tel)))) {
			json_decref(v);
			return api__queue_err(s, q->conn, 500, api__err_json("out of memory"));
		}
		if (s->tel_n < IOD_TEL_NODES_MAX) {
			t = &s->tel[s->tel_n++];
		} else { /* full: the stalest summary makes room */
			t = &s->tel[0];
			for (uint32_t i = 1; i < s->tel_n; i++)
				if (s->tel[i].at_ms < t->at_ms)
					t = &s->tel[i];
			json_decref(t->value);
		}
		iod_strlcpy(t->node, name, sizeof(t->node));
		t->value = NULL;
	}
	json_decref(t->value);
	t->value = v;
	t->at_ms = now;
	return api__queue_json(s, q->conn, 200,
	                       json_pack("{s:s, s:I}", "node", name, "at_ms", (json_int_t)now));
}

/* GET /v1/<kind>[?limit=N&continue=NAME][&consistent=1]: sorted by name,
 * serialised off the loop. */
static MHD_RESULT do_list(struct req *q, enum iod_state_kind k)
{
	struct server *s = q->srv;
	uint64_t limit = 0;
	bool bad = false;
	const char *after = MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, "continue");

	if (api__query_u64(q->conn, "limit", &limit, &bad) && limit == 0)
		bad = true;
	if (bad)
		return api__queue_err(s, q->conn, 400,
		                      api__err_json("limit must be an integer from 1 to %d "
		                                    "(IOD_API_LIST_PAGE_MAX)",
		                                    IOD_API_LIST_PAGE_MAX));
	if (limit > IOD_API_LIST_PAGE_MAX)
		return api__queue_err(s, q->conn, 400,
		                      api__err_json("limit %llu is over %d objects a page "
		                                    "(IOD_API_LIST_PAGE_MAX); page with continue",
		                                    (unsigned long long)limit,
		                                    IOD_API_LIST_PAGE_MAX));
	if (after && after[0] && !iod_state_name_valid(after))
		return api__queue_err(
		    s, q->conn, 400,
		    api__err_json("continue must be a name from the previous page's "
		                  "\"continue\""));
	q->list_limit = (uint32_t)limit;
	if (after)
		iod_strlcpy(q->list_after, after, sizeof(q->list_after));
	if (api__wants_fence(q->conn))
		return api__fenced_read(q, k, true);
	return api__job_list(q, k);
}

/* ---- the per-write trace ------------------------------------------------ */

/* Phase histogram bucket bounds, microseconds. */
static const uint64_t wp_bounds_us[API_WP_BUCKETS] = {
    50, 100, 250, 500, 1000, 2000, 5000, 10000, 20000, 50000, 80000, 100000, 250000, 1000000};
static const char *const wp_names[API_WP_COUNT] = {"read",   "batch", "commit",
                                                   "answer", "send",  "total"};

static void wp_add(struct server *s, enum api_write_phase ph, uint64_t from_ns, uint64_t to_ns)
{
	uint64_t us = to_ns > from_ns ? (to_ns - from_ns) / 1000 : 0;
	unsigned b = 0;
	while (b < API_WP_BUCKETS && us > wp_bounds_us[b])
		b++;
	s->wp_bucket[ph][b]++;
	s->wp_sum_us[ph] += us;
	if (us > s->wp_max_us[ph])
		s->wp_max_us[ph] = us;
}

/* A committed write's answer was sent (MHD's completion, at done_ns): count
 * where its time went. Writes that were not applied here are not counted. */
static void wp_record(struct req *q, uint64_t done_ns)
{
	struct server *s = q->srv;
	if (!q->t_apply_ns || !q->t_answer_ns || !q->t_head_ns)
		return;
	wp_add(s, API_WP_READ, q->t_head_ns, q->t_propose_ns);
	wp_add(s, API_WP_BATCH, q->t_propose_ns, q->t_flush_ns);
	wp_add(s, API_WP_COMMIT, q->t_flush_ns, q->t_apply_ns);
	wp_add(s, API_WP_ANSWER, q->t_apply_ns, q->t_answer_ns);
	wp_add(s, API_WP_SEND, q->t_answer_ns, done_ns);
	wp_add(s, API_WP_TOTAL, q->t_head_ns, done_ns);
}

/* ?trace=1: the answer carries the write's stamps (CLOCK_MONOTONIC ns, the
 * server's; a client on the same machine can place its own beside them). */
static void wp_answer(const struct req *q, json_t *a)
{
	if (!q->trace || !q->t_apply_ns || !json_is_object(a))
		return;
	json_object_set_new(
	    a, "trace",
	    json_pack("{s:I, s:I, s:I, s:I, s:I}", "head_ns", (json_int_t)q->t_head_ns,
	              "propose_ns", (json_int_t)q->t_propose_ns, "flush_ns",
	              (json_int_t)q->t_flush_ns, "apply_ns", (json_int_t)q->t_apply_ns, "answer_ns",
	              (json_int_t)q->t_answer_ns));
}

static void metrics_write_phases(struct server *s, struct iod_buf *b)
{
	double le[API_WP_BUCKETS];
	char labels[64];
	for (unsigned i = 0; i < API_WP_BUCKETS; i++)
		le[i] = (double)wp_bounds_us[i] / 1e6;
	iod_prom_header(b, "iod_api_write_phase_seconds", "histogram",
	                "Where committed writes' time went on this server (the leader): read "
	                "(head parsed to proposed), batch (to raft, group commit), commit (to "
	                "committed and applied), answer (to the answer queued), send (to sent), "
	                "total.");
	for (unsigned p = 0; p < API_WP_COUNT; p++) {
		iod_prom_labels(labels, sizeof(labels), "phase", wp_names[p], (const char *)NULL);
		iod_prom_histogram(b, "iod_api_write_phase_seconds", labels, le, s->wp_bucket[p],
		                   API_WP_BUCKETS, (double)s->wp_sum_us[p] / 1e6);
	}
	iod_prom_header(b, "iod_api_write_phase_max_seconds", "gauge",
	                "The slowest committed write's time in each phase.");
	for (unsigned p = 0; p < API_WP_COUNT; p++) {
		iod_prom_labels(labels, sizeof(labels), "phase", wp_names[p], (const char *)NULL);
		iod_prom_f64(b, "iod_api_write_phase_max_seconds", labels,
		             (double)s->wp_max_us[p] / 1e6);
	}
}

/* GET /metrics: the member's raft and state metrics, then the API's own. */
static MHD_RESULT do_metrics(struct req *q)
{
	struct server *s = q->srv;
	struct MHD_Connection *c = q->conn;
	struct iod_buf b;
	iod_buf_init(&b);
	iod_raft_member_metrics(s->node, &b);
	iod_buf_printf(&b, "# HELP iod_api_requests_total API answers by HTTP status code.\n"
	                   "# TYPE iod_api_requests_total counter\n");
	s->requests[200]++; /* count this answer too */
	for (int i = 100; i < STATUS_CODES; i++)
		if (s->requests[i])
			iod_buf_printf(&b, "iod_api_requests_total{code=\"%d\"} %llu\n", i,
			               (unsigned long long)s->requests[i]);
	iod_buf_printf(
	    &b,
	    "# HELP iod_api_watches Watches waiting.\n# TYPE iod_api_watches gauge\n"
	    "iod_api_watches %u\n"
	    "# HELP iod_api_watch_answers_total Watch answers sent.\n"
	    "# TYPE iod_api_watch_answers_total counter\niod_api_watch_answers_total %llu\n"
	    "# HELP iod_api_watch_answers_shared_total Watch answers that reused another's "
	    "serialised text.\n"
	    "# TYPE iod_api_watch_answers_shared_total counter\n"
	    "iod_api_watch_answers_shared_total %llu\n"
	    "# HELP iod_api_connections HTTP connections open.\n"
	    "# TYPE iod_api_connections gauge\niod_api_connections %u\n"
	    "# HELP iod_api_connections_closed_total Connections the server closed: "
	    "head or body not complete by its deadline (slowloris), or the oldest "
	    "unfinished head closed to make room for a new connection.\n"
	    "# TYPE iod_api_connections_closed_total counter\n"
	    "iod_api_connections_closed_total{reason=\"head_timeout\"} %llu\n"
	    "iod_api_connections_closed_total{reason=\"body_timeout\"} %llu\n"
	    "iod_api_connections_closed_total{reason=\"evicted\"} %llu\n"
	    "# HELP iod_api_watch_answers_deferred_total Large watch answers that waited "
	    "for fewer than IOD_API_WATCH_LARGE_MAX in flight.\n"
	    "# TYPE iod_api_watch_answers_deferred_total counter\n"
	    "iod_api_watch_answers_deferred_total %llu\n"
	    "# HELP iod_api_watch_encodes_total Watch answers serialised off the loop "
	    "(once for all the watchers it answers).\n"
	    "# TYPE iod_api_watch_encodes_total counter\n"
	    "iod_api_watch_encodes_total %llu\n"
	    "# HELP iod_api_watch_encode_max_seconds Longest watch answer serialisation "
	    "(worker time).\n"
	    "# TYPE iod_api_watch_encode_max_seconds gauge\n"
	    "iod_api_watch_encode_max_seconds %.6f\n"
	    "# HELP iod_api_mhd_runs_total MHD_run calls on the loop (reading requests, "
	    "running handlers, sending answers).\n"
	    "# TYPE iod_api_mhd_runs_total counter\niod_api_mhd_runs_total %llu\n"
	    "# HELP iod_api_mhd_run_seconds_total Time in MHD_run on the loop.\n"
	    "# TYPE iod_api_mhd_run_seconds_total counter\n"
	    "iod_api_mhd_run_seconds_total %.6f\n"
	    "# HELP iod_api_mhd_run_max_seconds Longest MHD_run call on the loop.\n"
	    "# TYPE iod_api_mhd_run_max_seconds gauge\niod_api_mhd_run_max_seconds %.6f\n"
	    "# HELP iod_api_mhd_run_slow_total MHD_run calls over 5 ms on the loop.\n"
	    "# TYPE iod_api_mhd_run_slow_total counter\niod_api_mhd_run_slow_total %llu\n"
	    "# HELP iod_api_jobs Lists being serialised off the loop.\n"
	    "# TYPE iod_api_jobs gauge\niod_api_jobs{state=\"running\"} %u\n"
	    "# HELP iod_api_jobs_total Lists serialised off the loop.\n"
	    "# TYPE iod_api_jobs_total counter\niod_api_jobs_total %llu\n"
	    "# HELP iod_api_job_max_seconds Longest list serialisation (worker time).\n"
	    "# TYPE iod_api_job_max_seconds gauge\niod_api_job_max_seconds %.6f\n"
	    "# HELP iod_api_deploys_total Deploys planned off the loop.\n"
	    "# TYPE iod_api_deploys_total counter\niod_api_deploys_total %llu\n"
	    "# HELP iod_api_deploy_max_seconds Longest deploy plan (worker time).\n"
	    "# TYPE iod_api_deploy_max_seconds gauge\niod_api_deploy_max_seconds %.6f\n"
	    "# HELP iod_api_bodies_parsed_total Large PUT and txn bodies parsed off the loop.\n"
	    "# TYPE iod_api_bodies_parsed_total counter\niod_api_bodies_parsed_total %llu\n"
	    "# HELP iod_api_bodies_held_bytes Request bodies held while they arrive.\n"
	    "# TYPE iod_api_bodies_held_bytes gauge\niod_api_bodies_held_bytes %zu\n"
	    "# HELP iod_api_bodies_refused_total Bodies dropped and answered 503: over "
	    "IOD_API_BODIES_HELD_MAX or its per-client share.\n"
	    "# TYPE iod_api_bodies_refused_total counter\niod_api_bodies_refused_total %llu\n",
	    s->watchers_n, (unsigned long long)s->watch_answers,
	    (unsigned long long)s->watch_shared, s->conns_n, (unsigned long long)s->closed_head,
	    (unsigned long long)s->closed_body, (unsigned long long)s->evicted,
	    (unsigned long long)s->watch_deferred, (unsigned long long)s->watch_encoded,
	    (double)s->wenc_max_us / 1e6, (unsigned long long)s->mhd_runs,
	    (double)s->mhd_run_us / 1e6, (double)s->mhd_run_max_us / 1e6,
	    (unsigned long long)s->mhd_run_slow, s->jobs_running, (unsigned long long)s->jobs_done,
	    (double)s->job_max_us / 1e6, (unsigned long long)s->deploys_planned,
	    (double)s->deploy_max_us / 1e6, (unsigned long long)s->bodies_parsed, s->body_bytes,
	    (unsigned long long)s->bodies_refused);
	metrics_write_phases(s, &b);
	s->requests[200]--;
	return queue_text(s, c, 200, "text/plain; version=0.0.4", b.data ? b.data : strdup(""));
}

/* The fixed endpoints (status, deploy, txn, security, leases, members,
 * telemetry, the all-kinds watch); *handled false when seg names none. */
static MHD_RESULT route_fixed(struct req *q, char **seg, int nseg, const char *method, bool is_get,
                              bool *handled)
{
	struct server *s = q->srv;
	struct MHD_Connection *c = q->conn;

	*handled = true;
	if (!strcmp(seg[0], "status") && nseg == 1) {
		if (!is_get)
			return api__queue_err(s, c, 405,
			                      api__err_json("status is read-only: GET /v1/status"));
		json_t *st = iod_raft_member_status(s->node);
		json_object_set_new(st, "api", json_string(s->cfg.api_addr));
		json_object_set_new(st, "watches", json_integer(s->watchers_n));
		json_object_set_new(st, "held", json_integer(s->held_n));
		return api__queue_json(s, c, 200, st);
	}
	if (!strcmp(seg[0], "deploy") && nseg == 1) {
		if (strcmp(method, "POST"))
			return api__queue_err(
			    s, c, 405, api__err_json("deploy: POST /v1/deploy with a spec body"));
		return api__do_deploy(q);
	}
	if (!strcmp(seg[0], "txn") && nseg == 1) {
		if (strcmp(method, "POST"))
			return api__queue_err(s, c, 405, api__err_json("txn: POST /v1/txn"));
		return api__do_txn(q);
	}
	if (!strcmp(seg[0], "whoami") && nseg == 1 && is_get)
		return api__do_whoami(q);
	if (!strcmp(seg[0], "ca") && nseg == 1 && is_get)
		return api__do_ca(q);
	if (!strcmp(seg[0], "audit") && nseg == 1 && is_get)
		return api__do_audit(q);
	if (!strcmp(seg[0], "certificates") && nseg == 1) {
		if (strcmp(method, "POST"))
			return api__queue_err(
			    s, c, 405,
			    api__err_json("certificates: POST /v1/certificates with a CSR"));
		return api__do_certificate(q);
	}
	if (!strcmp(seg[0], "secret-values") && nseg == 2 && is_get)
		return api__do_secret_value(q, seg[1]);
	if (!strcmp(seg[0], "tokens") && nseg == 1 && !strcmp(method, "POST"))
		return api__do_token_create(q);
	if (!strcmp(seg[0], "secrets") && nseg == 1 && !strcmp(method, "POST"))
		return api__do_secret_create(q);
	if (!strcmp(seg[0], "leases") && nseg <= 2)
		return api__do_lease(q, method, nseg == 2 ? seg[1] : NULL);
	if (!strcmp(seg[0], "members") && nseg <= 2)
		return api__do_members(q, method, nseg == 2 ? seg[1] : NULL);
	if (!strcmp(seg[0], "telemetry") && nseg <= 2)
		return do_telemetry(q, method, nseg == 2 ? seg[1] : NULL);
	if (!strcmp(seg[0], "watch") && nseg == 1 && is_get)
		return api__do_watch(q, IOD_STATE_NODE, true);
	if (!strcmp(seg[0], "extender") && nseg == 2)
		return api__do_extender(q, method, seg[1]);
	*handled = false;
	return MHD_NO;
}

/* /v1/<kind>[/<name>]: list, watch, get, put, delete. */
static MHD_RESULT route_object(struct req *q, const char *url, const char *method, bool is_get,
                               char **seg, int nseg)
{
	struct server *s = q->srv;
	struct MHD_Connection *c = q->conn;

	enum iod_state_kind k;
	if (iod_state_kind_parse(seg[0], &k))
		return unknown_kind(s, c, seg[0]);
	if (nseg == 1) {
		if (!is_get)
			return api__queue_err(
			    s, c, 405,
			    api__err_json("%s: GET lists; PUT/DELETE need /v1/%s/NAME", seg[0],
			                  iod_state_kind_name(k)));
		const char *w = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "watch");
		if (w && (!strcmp(w, "1") || !strcmp(w, "true")))
			return api__do_watch(q, k, false);
		return do_list(q, k);
	}
	if (nseg != 2)
		return api__queue_err(s, c, 404,
		                      api__err_json("path %.100s: want /v1/<kind>/<name>", url));
	if (!iod_state_name_valid(seg[1]))
		return api__queue_err(
		    s, c, 400,
		    api__err_json("invalid name \"%.64s\": 1-%d of A-Z a-z 0-9 . _ -", seg[1],
		                  IOD_NAME_MAX - 1));
	iod_strlcpy(q->name, seg[1], sizeof(q->name));
	if (is_get && api__wants_fence(c))
		return api__fenced_read(q, k, false);
	if (is_get) {
		json_t *o = iod_state_get(iod_raft_member_state(s->node), k, seg[1]);
		if (!o)
			return api__queue_err(
			    s, c, 404,
			    api__err_json("%s/%s not found", iod_state_kind_name(k), seg[1]));
		return api__queue_json(s, c, 200, o);
	}
	if (!strcmp(method, "PUT"))
		return api__do_put(q, k, seg[1]);
	if (!strcmp(method, "DELETE"))
		return api__do_delete(q, k, seg[1]);
	return api__queue_err(s, c, 405, api__err_json("method %s not allowed on %s", method, url));
}

static MHD_RESULT route(struct req *q, const char *url, const char *method)
{
	struct server *s = q->srv;
	struct MHD_Connection *c = q->conn;
	char path[256], *seg[4] = {0};
	int nseg = 0;
	bool is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	bool handled = false;

	if (!strcmp(url, "/metrics"))
		return do_metrics(q);
	if (iod_strlcpy(path, url, sizeof(path)) || strncmp(path, "/v1/", 4))
		return api__queue_err(
		    s, c, 404,
		    api__err_json("no such path %.100s; the API lives under /v1/ (see "
		                  "docs/control-plane.md)",
		                  url));
	for (char *p = path + 4, *save = NULL, *t = strtok_r(p, "/", &save); t;
	     t = strtok_r(NULL, "/", &save)) {
		if (nseg == 3)
			return api__queue_err(s, c, 404,
			                      api__err_json("path %.100s is too deep", url));
		seg[nseg++] = t;
	}
	if (nseg == 0)
		return api__queue_err(s, c, 404,
		                      api__err_json("GET /v1/status, /v1/<kind>[/<name>]"));
	MHD_RESULT rc = route_fixed(q, seg, nseg, method, is_get, &handled);
	if (handled)
		return rc;
	return route_object(q, url, method, is_get, seg, nseg);
}

/*
 * Percent-decoding of the path and query (libmicrohttpd's unescape
 * callback). A NUL or other control byte stays encoded ("%00"), so it can
 * never truncate a C string: "config/trunc%00evil" used to be stored as
 * "config/trunc"; now the name is refused by the name check (400).
 */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	char *w = s;
	(void)cls;
	(void)c;
	for (const char *r = s; *r;) {
		int hi, lo;
		if (r[0] == '%' && (hi = iod_hex_digit(r[1])) >= 0 &&
		    (lo = iod_hex_digit(r[2])) >= 0) {
			unsigned char v = (unsigned char)(hi * 16 + lo);
			if (v >= 0x20 && v != 0x7f) {
				*w++ = (char)v;
				r += 3;
				continue;
			}
		}
		*w++ = *r++;
	}
	*w = 0;
	return (size_t)(w - s);
}

/*
 * Request bodies held while they arrive (issue 15: 200 half-sent 4 MiB bodies
 * took a follower from 30 to 830 MB): all of them together at most
 * IOD_API_BODIES_HELD_MAX, one client address (by hash bucket: two that share
 * one share its budget) at most IOD_API_BODIES_HELD_PER_CLIENT_MAX; the first
 * IOD_API_BODY_ALWAYS bytes of any body always fit. A body over them is read
 * and dropped and answered 503 once it is complete; a sender that never
 * completes it is closed at its body deadline.
 */
static unsigned body_bucket_of(struct MHD_Connection *c)
{
	struct conn_ctx *cc = api__conn_ctx_of(c);
	char host[IOD_ADDR_MAX];
	snprintf(host, sizeof(host), "%s", cc ? cc->remote : "");
	char *colon = strrchr(host, ':');
	if (colon)
		*colon = 0; /* the address, not the port */
	return (unsigned)(iod_hash_str(host) % IOD_API_BODY_CLIENT_BUCKETS);
}

static bool body_room(struct req *q, size_t more)
{
	struct server *s = q->srv;
	if (!q->body_counted)
		q->body_bucket = body_bucket_of(q->conn);
	if (q->body.len + more <= IOD_API_BODY_ALWAYS)
		return true;
	return s->body_bytes + more <= IOD_API_BODIES_HELD_MAX &&
	       s->client_body_bytes[q->body_bucket] + more <= IOD_API_BODIES_HELD_PER_CLIENT_MAX;
}

static void body_count(struct req *q, size_t n)
{
	q->body_counted += n;
	q->srv->body_bytes += n;
	q->srv->client_body_bytes[q->body_bucket] += n;
}

static void body_uncount(struct req *q)
{
	struct server *s = q->srv;
	IOD_ASSERT(s->body_bytes >= q->body_counted);
	s->body_bytes -= q->body_counted;
	s->client_body_bytes[q->body_bucket] -= q->body_counted;
	q->body_counted = 0;
}

static void body_refuse(struct req *q)
{
	body_uncount(q);
	iod_buf_free(&q->body);
	q->body_refused = true;
	q->srv->bodies_refused++;
}

static MHD_RESULT handler(void *cls, struct MHD_Connection *conn, const char *url,
                          const char *method, const char *version, const char *upload,
                          size_t *upload_size, void **con_cls)
{
	struct server *s = cls;
	struct req *q = *con_cls;
	(void)version;

	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return MHD_NO;
		q->srv = s;
		q->conn = conn;
		q->t_head_ns = iod_clock_now_ns();
		q->trace =
		    MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "trace") != NULL;
		iod_buf_init(&q->body);
		*con_cls = q;
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		                                             MHD_HTTP_HEADER_CONTENT_LENGTH);
		const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		                                             MHD_HTTP_HEADER_TRANSFER_ENCODING);
		if (cl && te) {
			/* RFC 9112 6.1: a request smuggling vector; refuse, as the
			 * mesh proxy does */
			q->framing_bad = true;
			return MHD_YES;
		}
		uint64_t declared = te ? IOD_API_BODY_MAX : 0;
		if (cl && strtoull(cl, NULL, 10) > IOD_API_BODY_MAX)
			q->too_big = true;
		else if (cl)
			declared = strtoull(cl, NULL, 10);
		conn_phase_set(api__conn_ctx_of(conn), PHASE_BODY, declared);
		return MHD_YES;
	}
	if (*upload_size) {
		if (q->framing_bad) {
			/* discarded: answered 400 at the end */
		} else if (q->body_refused) {
			/* discarded: answered 503 at the end (or closed at its deadline) */
		} else if (!q->too_big && q->body.len + *upload_size <= IOD_API_BODY_MAX) {
			if (!body_room(q, *upload_size))
				body_refuse(q);
			else if (iod_buf_append(&q->body, upload, *upload_size))
				q->too_big = true;
			else
				body_count(q, *upload_size);
		} else {
			q->too_big = true;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	conn_phase_set(api__conn_ctx_of(conn), PHASE_ANSWER, 0);
	if (q->ready) {
		json_t *a = q->answer;
		q->answer = NULL;
		q->ready = false;
		q->t_answer_ns = iod_clock_now_ns();
		wp_answer(q, a);
		if (q->answer_text) {
			struct shared_text *t = q->answer_text;
			q->answer_text = NULL;
			json_decref(a);
			return api__queue_shared(s, conn, q->status, t);
		}
		return api__queue_json(s, conn, q->status, a);
	}
	if (q->suspended)
		return MHD_YES;
	if (q->framing_bad)
		return api__queue_err(
		    s, conn, 400,
		    api__err_json("both Content-Length and Transfer-Encoding: ambiguous "
		                  "framing, refused"));
	if (q->body_refused)
		return api__queue_err(
		    s, conn, 503,
		    api__err_json("request bodies held by this server are over "
		                  "IOD_API_BODIES_HELD_MAX (%u bytes; a client address at "
		                  "most IOD_API_BODIES_HELD_PER_CLIENT_MAX, %u): retry later",
		                  IOD_API_BODIES_HELD_MAX, IOD_API_BODIES_HELD_PER_CLIENT_MAX));
	if (q->too_big)
		return api__queue_err(
		    s, conn, 413,
		    api__err_json("request body larger than %u bytes (IOD_API_BODY_MAX)",
		                  IOD_API_BODY_MAX));
	if (s->stopping) {
		/* a leader handing over: name the new leader once it is known;
		 * until then (or until raft is closed) hold, so that clients do
		 * not poll the followers, which still name this server */
		const char *api = "";
		uint64_t id = s->node_closed ? 0 : iod_raft_member_leader(s->node, &api);
		if (id && id != s->cfg.id && api[0])
			return api__queue_json(s, conn, 503, api__not_leader_json(s));
		if (!s->node_closed && api__hold(q))
			return MHD_YES;
		return api__queue_json(s, conn, 503,
		                       json_pack("{s:s, s:b, s:s}", "error",
		                                 "server is shutting down; retry another server",
		                                 "not_leader", 1, "leader", ""));
	}
	if (!q->authed) {
		MHD_RESULT rc = MHD_NO;
		if (!api__access_ok(q, url, method, &rc))
			return rc;
		q->authed = true;
	}
	return route(q, url, method);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
	struct req *q = *con_cls;
	struct conn_ctx *kc = api__conn_ctx_of(conn);
	(void)cls;
	if (kc)
		kc->kept_alive = true; /* answered: between requests from now on */
	conn_phase_set(kc, PHASE_HEAD, 0);
	if (!q)
		return;
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		wp_record(q, iod_clock_now_ns());
	if (q->audit && q->method[0]) {
		struct conn_ctx *cc = api__conn_ctx_of(conn);
		int status = cc ? cc->last_status : 0;
		const char *why = q->detail[0] ? q->detail : NULL;
		if (!why && q->answer)
			iod_json_get_str(q->answer, "error", &why);
		iod_api_sec_audit(&q->srv->sec, &q->id, q->method, q->url,
		                  toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? status : 499,
		                  cc ? cc->remote : "", why);
	}
	api__watch_unlink(q);
	api__held_unlink(q);
	api__job_detach(q);
	api__deploy_turn_release(q);
	api__large_release(q);
	body_uncount(q);
	free(q->plan_cmd);
	free(q->body_cmd);
	json_decref(q->body_value);
	json_decref(q->body_error);
	iod_buf_free(&q->body);
	api__shared_unref(q->answer_text);
	json_decref(q->answer);
	json_decref(q->extra);
	free(q);
	*con_cls = NULL;
}

/* ---- MHD on the uv loop ------------------------------------------------- */

/*
 * MHD runs again on the next turn of the loop, after it has polled: from an
 * idle handle, not a 0 ms timer. libuv (1.44) runs a timer started with 0 ms
 * from a timer callback in the same pass, before any I/O: MHD_run -> a large
 * watch answer sent -> the next one admitted -> MHD_run ... wrote all 1,000
 * answers of bench_control's loop_lag in one 570-860 ms turn in which raft
 * read nothing (an election every run, while the prober, answered inside
 * that chain, saw 5-7 ms).
 */
static void mhd_idle_cb(uv_idle_t *h);

static void mhd_timer_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	MHD_UNSIGNED_LONG_LONG to = 0;
	if (!s->mhd)
		return;
	/* timed: MHD_run is where the loop reads requests, runs handlers and
	 * sends answers (1,000 watch answers of 512 KiB are 512 MB of sends) */
	uint64_t t0 = iod_clock_now_ns();
	MHD_run(s->mhd);
	uint64_t us = (iod_clock_now_ns() - t0) / 1000;
	s->mhd_runs++;
	s->mhd_run_us += us;
	s->mhd_run_slow += us > 5000;
	if (us > s->mhd_run_max_us)
		s->mhd_run_max_us = us;
	if (MHD_get_timeout(s->mhd, &to) != MHD_YES)
		to = 100;
	if (to == 0)
		api__mhd_kick(s);
	else
		uv_timer_start(&s->mhd_timer, mhd_timer_cb, to > 100 ? 100 : to, 0);
}

void api__mhd_kick(struct server *s)
{
	uv_idle_start(&s->mhd_idle, mhd_idle_cb);
}

static void mhd_idle_cb(uv_idle_t *h)
{
	struct server *s = h->data;
	uv_idle_stop(h);
	mhd_timer_cb(&s->mhd_timer);
}

static void mhd_poll_cb(uv_poll_t *h, int status, int events)
{
	struct server *s = h->data;
	(void)status;
	(void)events;
	mhd_timer_cb(&s->mhd_timer);
}

/* Per-connection context: allocated when MHD accepts, freed when it closes. */
static void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe)
{
	struct server *s = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		struct conn_ctx *cc = calloc(1, sizeof(*cc));
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (cc) {
			cc->srv = s;
			cc->conn = c;
			cc->phase = PHASE_ANSWER; /* not on the list yet */
			conn_phase_set(cc, PHASE_HEAD, 0);
			conns_keep_room(s, cc);
		}
		if (cc && ci && ci->client_addr) {
			char host[INET6_ADDRSTRLEN] = "", port[8] = "";
			socklen_t l = ci->client_addr->sa_family == AF_INET6
			                  ? sizeof(struct sockaddr_in6)
			                  : sizeof(struct sockaddr_in);
			if (!getnameinfo(ci->client_addr, l, host, sizeof(host), port, sizeof(port),
			                 NI_NUMERICHOST | NI_NUMERICSERV))
				snprintf(cc->remote, sizeof(cc->remote), "%s:%s", host, port);
		}
		*socket_context = cc;
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		struct conn_ctx *cc = *socket_context;
		if (cc)
			conns_unlink(s, cc);
		free(cc);
		*socket_context = NULL;
	}
}

static int mhd_start(struct server *s, struct iod_err *e)
{
	char host[IOD_ADDR_MAX], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
	const char *colon = strrchr(s->cfg.api_addr, ':');
	int rc;

	if (!colon || (size_t)(colon - s->cfg.api_addr) >= sizeof(host) || strlen(colon) > 15)
		return iod_err_set(e, -EINVAL, "--api %s: want HOST:PORT", s->cfg.api_addr);
	memcpy(host, s->cfg.api_addr, (size_t)(colon - s->cfg.api_addr));
	host[colon - s->cfg.api_addr] = 0;
	strcpy(port, colon + 1);
	if ((rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai)))
		return iod_err_set(e, -EINVAL, "--api %s: %s", s->cfg.api_addr, gai_strerror(rc));
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
	                 (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
	if (s->sec.on) /* HTTPS; client certificates are asked for, not required (tokens) */
		s->mhd = MHD_start_daemon(
		    flags | MHD_USE_TLS, 0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR,
		    ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)IOD_API_CONNECTIONS_MAX,
		    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)IOD_API_CONNECTIONS_PER_IP_MAX,
		    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IOD_API_CONN_TIMEOUT_S,
		    MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION,
		    conn_notify, s, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
		    MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_HTTPS_MEM_KEY,
		    s->sec.key_pem, MHD_OPTION_HTTPS_MEM_CERT, s->sec.cert_pem,
		    MHD_OPTION_HTTPS_MEM_TRUST, s->sec.ca_pem, MHD_OPTION_HTTPS_PRIORITIES,
		    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2", MHD_OPTION_END);
	else
		s->mhd = MHD_start_daemon(
		    flags, 0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
		    MHD_OPTION_CONNECTION_LIMIT, (unsigned)IOD_API_CONNECTIONS_MAX,
		    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)IOD_API_CONNECTIONS_PER_IP_MAX,
		    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IOD_API_CONN_TIMEOUT_S,
		    MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION,
		    conn_notify, s, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
		    MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!s->mhd)
		return iod_err_set(e, -EADDRINUSE,
		                   "cannot serve the API on %s (address in use or not local?)",
		                   s->cfg.api_addr);
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return iod_err_set(e, -EIO, "libmicrohttpd has no epoll support");
	uv_poll_init(&s->loop, &s->mhd_poll, info->epoll_fd);
	s->mhd_poll.data = s;
	uv_poll_start(&s->mhd_poll, UV_READABLE, mhd_poll_cb);
	api__mhd_kick(s);
	return 0;
}

/* ---- joining an existing cluster ---------------------------------------- */

/* The join request is a blocking client call: it runs on libuv's thread pool. */
struct join_work {
	uv_work_t w;                     /* libuv work request */
	struct iod_server_config cfg;    /* copy: who we are, where to join */
	int rc;                          /* result */
	char msg[IOD_ERR_MSG_MAX];       /* error text */
	struct iod_sec_tls_creds *creds; /* with --pki: our server certificate (owned) */
};

static void join_run(uv_work_t *w)
{
	struct join_work *j = w->data;
	struct iod_api_client c;
	struct iod_api_response r;
	struct iod_err e = {0};
	char body[3 * IOD_ADDR_MAX];

	if ((j->rc = iod_api_client_init(&c, j->cfg.join_addr, &e))) {
		snprintf(j->msg, sizeof(j->msg), "%s", e.msg);
		return;
	}
	/* a server joins as itself: its certificate may add only itself */
	iod_api_client_set_creds(&c, j->creds, NULL);
	c.retry_ms = 30000;
	snprintf(body, sizeof(body), "{\"id\":%llu,\"raft\":\"%s\",\"api\":\"%s\"}",
	         (unsigned long long)j->cfg.id, j->cfg.raft_addr, j->cfg.api_addr);
	j->rc = iod_api_request(&c, "POST", "/v1/members", "application/json", body, strlen(body),
	                        &r, &e);
	if (j->rc)
		snprintf(j->msg, sizeof(j->msg), "%s", e.msg);
	else if (r.status != 200 && r.status != 409) {
		j->rc = -EIO;
		snprintf(j->msg, sizeof(j->msg), "HTTP %d: %s", r.status, iod_api_error_text(&r));
	}
	if (!j->rc)
		iod_api_response_free(&r);
	iod_api_client_close(&c);
}

static void join_done(uv_work_t *w, int status)
{
	struct join_work *j = w->data;
	(void)status;
	if (j->rc)
		IOD_ERROR("server", "joining through %s failed: %s", j->cfg.join_addr, j->msg);
	else
		IOD_INFO("server", "joined the cluster through %s as voter %llu", j->cfg.join_addr,
		         (unsigned long long)j->cfg.id);
	iod_sec_tls_creds_free(j->creds);
	free(j);
}

/* ---- life cycle --------------------------------------------------------- */

static void closed_noop(uv_handle_t *h)
{
	(void)h;
}

static void node_stopped(void *data)
{
	struct server *s = data;
	s->node_closed = true;
	/* answer what is left, let MHD flush, then stop it */
	for (struct req *q = s->watchers, *next; q; q = next) {
		next = q->wnext;
		api__watch_unlink(q);
		api__finish(q, 503, api__err_json("server is shutting down; watch another server"));
	}
	while (s->held)
		api__held_rerun(s->held); /* s->stopping: answered "shutting down" */
	for (struct job *j = s->jobs, *next; j; j = next) {
		next = j->next;
		struct req *q = j->q;
		if (!q)
			continue;
		api__job_detach(q);
		api__finish(q, 503, api__err_json("server is shutting down; retry another server"));
	}
	for (int i = 0; i < 3 && s->mhd; i++)
		MHD_run(s->mhd);
	uv_poll_stop(&s->mhd_poll);
	uv_close((uv_handle_t *)&s->mhd_poll, closed_noop);
	MHD_stop_daemon(s->mhd);
	s->mhd = NULL;
	uv_close((uv_handle_t *)&s->mhd_timer, closed_noop);
	uv_close((uv_handle_t *)&s->watch_timer, closed_noop);
	uv_close((uv_handle_t *)&s->admit_idle, closed_noop);
	uv_close((uv_handle_t *)&s->mhd_idle, closed_noop);
	uv_close((uv_handle_t *)&s->sigterm, closed_noop);
	uv_close((uv_handle_t *)&s->sigint, closed_noop);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct server *s = h->data;
	if (s->stopping)
		return;
	IOD_INFO("server", "signal %d: stopping (leadership transfer if leader)", signum);
	s->stopping = true;
	iod_raft_member_stop(s->node, node_stopped, s);
}

int iod_api_server_run(const struct iod_server_config *c, struct iod_err *e)
{
	struct server *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return iod_err_set(e, -ENOMEM, "out of memory");
	s->cfg = *c;
	/* a peer or client that vanishes must cost an EPIPE, not the process */
	signal(SIGPIPE, SIG_IGN);
	uv_loop_init(&s->loop);
	uv_timer_init(&s->loop, &s->mhd_timer);
	s->mhd_timer.data = s;
	uv_timer_init(&s->loop, &s->watch_timer);
	s->watch_timer.data = s;
	uv_idle_init(&s->loop, &s->admit_idle);
	s->admit_idle.data = s;
	uv_idle_init(&s->loop, &s->mhd_idle);
	s->mhd_idle.data = s;
	s->wcache = &s->wcache_store;
	uv_signal_init(&s->loop, &s->sigterm);
	uv_signal_init(&s->loop, &s->sigint);
	s->sigterm.data = s->sigint.data = s;

	if ((rc = iod_api_sec_init(&s->sec, c, e))) {
		free(s);
		return rc;
	}
	if (!s->sec.on)
		IOD_WARN("server",
		         "--insecure: plaintext API on %s, everyone on this machine is "
		         "admin",
		         c->api_addr);
	struct iod_server_config nc = *c;
	nc.raft_tls = s->sec.raft_tls; /* --pki: Raft over mutual TLS */
	rc = iod_raft_member_start(&s->node, &s->loop, &nc, e);
	if (rc)
		goto fail;
	iod_raft_member_set_on_apply(s->node, api__watchers_wake, s);
	iod_raft_member_set_on_leader(s->node, api__leader_known, s);
	rc = mhd_start(s, e);
	if (rc)
		goto fail;
	uv_timer_start(&s->watch_timer, api__watch_timer_cb, 50, 50);
	uv_signal_start(&s->sigterm, on_signal, SIGTERM);
	uv_signal_start(&s->sigint, on_signal, SIGINT);
	if (c->join_addr[0]) {
		struct join_work *j = calloc(1, sizeof(*j));
		if (j) {
			j->w.data = j;
			j->cfg = *c;
			if (s->sec.on && iod_sec_tls_creds_new(s->sec.ca_pem, s->sec.cert_pem,
			                                       s->sec.key_pem, &j->creds, e)) {
				free(j);
				rc = e->code ? e->code : -EINVAL;
				goto fail;
			}
			uv_queue_work(&s->loop, &j->w, join_run, join_done);
		}
	}
	IOD_INFO("server", "id %llu: raft %s, API %s://%s/v1/status, data %s%s%s",
	         (unsigned long long)c->id, c->raft_addr, s->sec.on ? "https" : "http", c->api_addr,
	         c->data_dir, s->sec.on ? ", cluster " : "", s->sec.cluster);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	uv_loop_close(&s->loop);
	iod_raft_member_free(s->node);
	iod_api_sec_free(&s->sec);
	for (uint32_t i = 0; i < s->tel_n; i++)
		json_decref(s->tel[i].value);
	free(s->tel);
	for (unsigned i = 0; i < WATCH_CACHE_SLOTS; i++)
		api__shared_unref(s->wcache_store.slot[i].text);
	free(s);
	return 0;
fail:
	/* raft may hold the loop's handles: leave without tearing down (we exit) */
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	return rc;
}
