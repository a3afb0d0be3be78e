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
 * It must never block the loop (no synchronous network calls here) and never
 * answer a write before it is committed.
 */
#include "auth.h"
#include "validate.h"
#include "iod/api.h"
#include "iod/ctrl.h"

#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <time.h>
#include <netdb.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

/* Lists are serialised on a worker thread while the loop goes on: safe
 * because stored values are never changed and jansson 2.13+ neither marks
 * values while dumping them (it used a "visited" flag before) nor counts
 * references non-atomically. */
#if defined(JANSSON_VERSION_HEX) && JANSSON_VERSION_HEX < 0x020d00
#error "iod needs jansson 2.13 or later (thread-safe json_dumps of shared values)"
#endif

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

#define STATUS_CODES 600

struct server;
struct job;

/* One HTTP request (MHD's per-connection context). */
/*
 * A serialised watch answer, shared by every watcher it answers: 1,000
 * watchers woken by one 1 MiB write used to serialise (and hold) 1,000
 * copies (the leader went from 15 to 1,034 MB). Reference counted; the last
 * HTTP response that sends it frees it. Loop thread only.
 */
struct shared_text {
	unsigned refs; /* holders: the cache, prepared answers, MHD responses */
	size_t len;    /* bytes */
	char data[];   /* the JSON text */
};

static void shared_unref(void *cls)
{
	struct shared_text *t = cls;
	if (t && --t->refs == 0)
		free(t);
}

/* Answers serialised during one wake-up of the watchers, by what they
 * depend on: the same state, kind filter, visibility and start revision
 * give the same answer. Bounded: a wake-up is one pass over the watchers. */
#define WATCH_CACHE_SLOTS 8
struct watch_cache {
	struct {
		int kind;                 /* kind watched */
		bool all;                 /* all kinds */
		bool sensitive;           /* sees tokens and secrets */
		uint64_t after_rev;       /* events after this */
		uint64_t state_rev;       /* the state's revision when serialised */
		struct shared_text *text; /* the answer (a ref), NULL = free slot */
	} slot[WATCH_CACHE_SLOTS];
	unsigned next; /* slot to replace next */
};

struct req {
	struct server *srv;              /* owner */
	struct MHD_Connection *conn;     /* MHD connection */
	struct iod_buf body;             /* request body, bounded by IOD_API_BODY_MAX */
	bool too_big;                    /* body exceeded the limit: answer 413 */
	bool framing_bad;                /* Content-Length and Transfer-Encoding: answer 400 */
	bool suspended;                  /* waiting for raft or a watch */
	bool ready;                      /* answer prepared, to be queued on resume */
	int status;                      /* prepared answer's code */
	json_t *answer;                  /* prepared answer (owned) */
	struct shared_text *answer_text; /* or a watch answer shared with others (a ref) */
	json_t *extra;                   /* deploy: the plan to merge into the answer */
	bool planned;                    /* deploy: its plan is back from the worker */
	bool deploy_turn;                /* deploy: holds the server's one deploy turn */
	int plan_rc;                     /* deploy: the plan's result */
	char *plan_cmd;                  /* deploy: the command to propose (owned) */
	char plan_msg[IOD_ERR_MSG_MAX];  /* deploy: why the plan failed */
	/* watch */
	bool watching;                 /* on the watch list */
	bool watch_all;                /* all kinds */
	enum iod_state_kind kind;      /* watched kind */
	uint64_t after_rev;            /* changes after this revision */
	uint64_t deadline_ms;          /* answer empty at this time */
	struct req *wprev, *wnext;     /* watch list links */
	bool deferred;                 /* its answer is large and waits its turn */
	bool large;                    /* its large answer is being sent (counted) */
	uint64_t large_until_ms;       /* ... and counts until then at most */
	const char *op;                /* what a write did, for its answer */
	bool fence_list;               /* consistent read: a list (else one object) */
	uint32_t list_limit;           /* list: page size (0 = all) */
	char list_after[IOD_NAME_MAX]; /* list: names after this ("continue") */
	struct job *job;               /* list: its job, queued or running */
	/* held while no leader is known (answered when one is, or at the deadline) */
	bool holding;              /* on the held list */
	uint64_t hold_deadline_ms; /* answer "no leader" after this (0 = never held) */
	struct req *hprev, *hnext; /* held list links */
	char name[IOD_NAME_MAX];   /* object of a write */
	/* security (auth.c): who sent it, and whether its answer is audited */
	bool authed;                /* identity checked and request authorised */
	bool audit;                 /* a write (or a denial): recorded when answered */
	struct iod_sec_identity id; /* the caller */
	char method[8];             /* for the audit record */
	char url[IOD_SEC_AUDIT_PATH_MAX];
	char detail[IOD_ERR_MSG_MAX]; /* why it was refused (audit) */
};

/*
 * Where a connection is in its current request, for the slowloris deadlines
 * (MHD's own idle timeout is reset by every byte): the head must be whole
 * IOD_API_HEADER_TIMEOUT_S after accept or after the previous request, the
 * body by a deadline that grows with its declared length. Answering (a
 * write waiting for Raft, a long-poll watch, sending) has no deadline here.
 */
enum conn_phase {
	PHASE_HEAD,   /* waiting for (the rest of) a request head */
	PHASE_BODY,   /* head complete, body arriving */
	PHASE_ANSWER, /* request complete: being answered */
};

/* Per TCP connection (MHD's socket context): what the audit needs to know
 * about the last answer, the client certificate's identity, verified once
 * per connection, and the phase deadlines. On the server's list of
 * connections, in the order they last entered PHASE_HEAD. */
struct conn_ctx {
	struct server *srv;              /* owner */
	struct MHD_Connection *conn;     /* MHD's connection */
	enum conn_phase phase;           /* see above */
	uint64_t deadline_ms;            /* PHASE_HEAD/BODY must end by then (mono) */
	bool closing;                    /* shut down here; MHD closes it next run */
	struct conn_ctx *prev, *next;    /* server's list links */
	int last_status;                 /* status of the last answer queued */
	bool have_cert_id;               /* cert_id is valid */
	struct iod_sec_identity cert_id; /* from the client certificate */
	uint64_t cert_not_after_s;       /* ... valid until (Unix s): re-checked after */
	char remote[IOD_ADDR_MAX];       /* peer address */
};

struct server {
	struct iod_server_config cfg;    /* as started */
	uv_loop_t loop;                  /* the one loop */
	struct iod_raft_member *node;    /* raft + state */
	struct MHD_Daemon *mhd;          /* HTTP daemon */
	uv_poll_t mhd_poll;              /* MHD's epoll fd */
	uv_timer_t mhd_timer;            /* MHD's timeouts and kicks */
	uv_timer_t watch_timer;          /* watch timeouts */
	uv_signal_t sigterm, sigint;     /* graceful stop */
	struct req *watchers;            /* suspended watches */
	struct req *held;                /* requests waiting for a leader */
	uint32_t held_n;                 /* on that list */
	uint64_t held_total;             /* requests ever held */
	uint32_t watchers_n;             /* on the list */
	bool stopping;                   /* stop in progress */
	bool node_closed;                /* raft is closed: nothing more to wait for */
	uint64_t requests[STATUS_CODES]; /* answers by status code */
	uint64_t watch_answers;          /* watches answered */
	struct watch_cache *wcache;      /* serialised answers (points at wcache_store) */
	struct watch_cache wcache_store; /* ... kept while their state revision lasts */
	uint32_t large_inflight;         /* large watch answers being sent */
	struct req *large_q[IOD_API_WATCH_LARGE_MAX]; /* ... they (NULL = free) */
	uint32_t deferred_n;                          /* watchers whose large answer waits */
	uint64_t watch_deferred;                      /* watch answers that waited their turn */
	uv_timer_t admit_timer; /* answers waiting watchers when a large one is sent */
	uint64_t watch_shared;  /* watch answers served from wcache */
	struct iod_api_sec sec; /* TLS material, authentication, audit (auth.c) */
	struct tel_entry *tel;  /* node telemetry summaries (memory only, not Raft) */
	uint32_t tel_n;         /* entries in tel */
	/* connections, for the slowloris deadlines (PHASE_HEAD oldest first) */
	struct conn_ctx *conns, *conns_tail; /* list ends */
	uint32_t conns_n;                    /* on the list */
	uint64_t sweep_at_ms;                /* next deadline sweep */
	uint64_t closed_head;                /* closed: head not complete in time */
	uint64_t closed_body;                /* closed: body not complete in time */
	uint64_t evicted;                    /* closed to make room for a new connection */
	/* work off the loop (lists): running and waiting their turn */
	struct job *jobs, *jobs_tail; /* FIFO, running ones first */
	uint32_t jobs_running;        /* handed to libuv's pool, <= IOD_API_JOBS_MAX */
	uint64_t jobs_done;           /* finished */
	uint64_t job_max_us;          /* longest job's worker time */
	bool deploy_busy;             /* a deploy is planning or its write is in flight */
	uint64_t deploys_planned;     /* deploy plans made off the loop */
	uint64_t deploy_max_us;       /* longest deploy plan's worker time */
};

/*
 * A list answered off the loop. The loop copies the objects (O(n), no sort:
 * iod_state_items) when the job starts; a pool thread sorts, serialises and
 * releases them; the loop then answers with the text. A job never touches
 * its request from the worker; a job whose request is gone (the server
 * stopping) is finished and freed without answering.
 */
struct job {
	uv_work_t w;                  /* libuv work request */
	bool deploy;                  /* a deploy plan (else a list) */
	struct server *srv;           /* owner */
	struct req *q;                /* request it answers; NULL once detached */
	bool running;                 /* handed to the pool */
	struct job *prev, *next;      /* srv->jobs links */
	enum iod_state_kind kind;     /* what to list */
	uint32_t limit;               /* page size, 0 = all */
	char after[IOD_NAME_MAX];     /* list names after this ("" = from the start) */
	uint64_t rev;                 /* state revision of the copy */
	struct iod_state_item *items; /* the copy (worker: released) */
	int n;                        /* items */
	struct shared_text *text;     /* worker: the answer */
	uint64_t worker_us;           /* worker time */
	/* deploy: the spec, the state's objects it is planned against, and the
	 * plan (iod_ctrl_deploy_plan_view); the loop proposes only the result */
	struct iod_buf body;       /* the spec (moved from the request) */
	struct iod_ctrl_view view; /* taken when the job starts */
	char *cmd;                 /* worker: the command (NULL: nothing placeable) */
	json_t *plan;              /* worker: the answer (or the spec's errors) */
	int rc;                    /* worker: the plan's result */
	struct iod_err err;        /* worker: why it failed */
};

/* One node's latest telemetry summary, as its agent last sent it. */
struct tel_entry {
	char node[IOD_NAME_MAX]; /* node name */
	json_t *value;           /* the summary */
	uint64_t at_ms;          /* wall clock when it arrived */
};

static uint64_t mono_ms(void)
{
	return iod_clock_now_ns() / IOD_NS_PER_MS;
}

static void mhd_kick(struct server *s);
static bool sees_sensitive(const struct req *q);
static struct conn_ctx *conn_ctx_of(struct MHD_Connection *c);
static void job_start_next(struct server *s);
static void deploy_turn_end(struct server *s);
static MHD_RESULT job_deploy(struct req *q);

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
	mhd_kick(cc->srv);
}

/* When few slots are left: close the n oldest connections still sending
 * their heads (other than cc, a new one), those that have been for
 * IOD_API_EVICT_HEAD_AGE_MS. One per new connection, and the excess at each
 * sweep, so that the table never stays full of connections that trickle
 * their heads. */
static void conns_make_room(struct server *s, struct conn_ctx *cc, uint32_t n)
{
	const uint64_t head_ms = IOD_API_HEADER_TIMEOUT_S * 1000ull;
	uint64_t now = mono_ms();
	for (struct conn_ctx *o = s->conns; o && o != cc && n; o = o->next) {
		if (o->phase != PHASE_HEAD || o->closing)
			continue;
		/* the list is in order of entering PHASE_HEAD: the rest are younger */
		if (o->deadline_ms - head_ms + IOD_API_EVICT_HEAD_AGE_MS > now)
			return;
		conn_shut(o);
		s->evicted++;
		n--;
	}
}

/* Connections over the eviction mark, not counting those already closing. */
static uint32_t conns_excess(const struct server *s)
{
	uint32_t live = 0;
	for (const struct conn_ctx *o = s->conns; o; o = o->next)
		live += !o->closing;
	return live > IOD_API_CONNECTIONS_MAX - IOD_API_CONNECTIONS_SPARE
	           ? live - (IOD_API_CONNECTIONS_MAX - IOD_API_CONNECTIONS_SPARE)
	           : 0;
}

/* Close every connection past its head or body deadline. At most
 * IOD_API_CONNECTIONS_MAX entries, every IOD_API_DEADLINE_SWEEP_MS. */
static void conns_sweep(struct server *s, uint64_t now)
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
	if (s->conns_n > IOD_API_CONNECTIONS_MAX - IOD_API_CONNECTIONS_SPARE)
		conns_make_room(s, NULL, conns_excess(s));
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

static MHD_RESULT queue_json(struct server *s, struct MHD_Connection *c, int status, json_t *j)
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

static json_t *err_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *err_json(const char *fmt, ...)
{
	char msg[IOD_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s}", "error", msg);
}

static MHD_RESULT queue_err(struct server *s, struct MHD_Connection *c, int status, json_t *j)
{
	return queue_json(s, c, status, j);
}

static int code_for(int err)
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

static json_t *not_leader_json(struct server *s)
{
	const char *api = "";
	uint64_t id = iod_raft_member_leader(s->node, &api);
	return json_pack("{s:s, s:b, s:I, s:s}", "error",
	                 id ? "this server is not the leader; send writes to \"leader\""
	                    : "no leader elected right now; retry shortly",
	                 "not_leader", 1, "leader_id", (json_int_t)id, "leader", api);
}

static void held_unlink(struct req *q)
{
	struct server *s = q->srv;
	if (!q->holding)
		return;
	if (q->hprev)
		q->hprev->hnext = q->hnext;
	else
		s->held = q->hnext;
	if (q->hnext)
		q->hnext->hprev = q->hprev;
	q->hprev = q->hnext = NULL;
	q->holding = false;
	s->held_n--;
}

/*
 * This server cannot take the request (not the leader). When it knows a
 * leader it has heard from lately, answer 503 with that leader's address;
 * when there is none (an election is running, or the leader went silent),
 * hold the request for up to IOD_API_LEADER_WAIT_MS and run it again as
 * soon as a leader is known: the client is pointed at the new leader the
 * moment it exists instead of polling (or following a dead leader's
 * address) through the election.
 */
/* Suspend q on the held list unless its wait is over; true when held. */
static bool hold(struct req *q)
{
	struct server *s = q->srv;
	uint64_t now = mono_ms();

	if (!q->hold_deadline_ms)
		q->hold_deadline_ms = now + IOD_API_LEADER_WAIT_MS;
	if (now >= q->hold_deadline_ms)
		return false;
	q->holding = true;
	q->hnext = s->held;
	if (s->held)
		s->held->hprev = q;
	s->held = q;
	s->held_n++;
	s->held_total++;
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return true;
}

static MHD_RESULT not_leader(struct req *q)
{
	struct server *s = q->srv;

	if (!s->stopping && !iod_raft_member_leader_fresh(s->node) && hold(q))
		return MHD_YES;
	return queue_json(s, q->conn, 503, not_leader_json(s));
}

/* Resume a held request without an answer: the handler routes it again. */
static void held_rerun(struct req *q)
{
	held_unlink(q);
	if (q->suspended) {
		q->suspended = false;
		MHD_resume_connection(q->conn);
		mhd_kick(q->srv);
	}
}

/* The node knows a leader again (or a new one): rerun what was held. */
static void leader_known(void *data)
{
	struct server *s = data;
	while (s->held)
		held_rerun(s->held);
}

/* Prepare an answer for a suspended request and resume it. */
static void finish(struct req *q, int status, json_t *answer)
{
	q->status = status;
	json_decref(q->answer);
	q->answer = answer;
	q->ready = true;
	if (q->suspended) {
		q->suspended = false;
		MHD_resume_connection(q->conn);
		mhd_kick(q->srv);
	}
}

/* ---- writes ------------------------------------------------------------- */

static void deploy_turn_release(struct req *q);

static void write_done(void *data, int status, const struct iod_state_result *res)
{
	struct req *q = data;
	struct server *s = q->srv;
	json_t *a;

	deploy_turn_release(q); /* a deploy's write is applied (or lost) */

	if (status == -ENOTCONN) {
		finish(q, 503, not_leader_json(s));
		return;
	}
	if (status == IOD_RAFT_MEMBER_OUTCOME_UNKNOWN) {
		/* not "not the leader": the write is in the log and a later
		 * leader may commit it; a blind retry could apply it twice */
		finish(q, 504,
		       json_pack("{s:s, s:b, s:s}", "error", res->msg, "outcome_unknown", 1, "code",
		                 "outcome_unknown"));
		return;
	}
	if (status) {
		finish(q, code_for(status), err_json("%s", res->msg));
		return;
	}
	if (res->code) {
		a = json_pack("{s:s, s:I}", "error", res->msg, "rev", (json_int_t)res->rev);
		if (res->code == -ECANCELED)
			json_object_set_new(a, "cur_rev", json_integer((json_int_t)res->cur_rev));
		finish(q, code_for(res->code), a);
		return;
	}
	a = q->extra ? json_incref(q->extra) : json_object();
	json_object_set_new(a, "rev", json_integer((json_int_t)res->rev));
	json_object_set_new(a, "changed", json_integer(res->changed));
	if (res->lease_id)
		json_object_set_new(a, "lease", json_integer((json_int_t)res->lease_id));
	finish(q, 200, a);
}

/* Propose cmd (owned) for q; answers now on refusal, else suspends q. */
static MHD_RESULT propose(struct req *q, char *cmd)
{
	struct server *s = q->srv;
	int rc;

	if (!cmd)
		return queue_err(s, q->conn, 500, err_json("out of memory"));
	size_t len = strlen(cmd);
	rc = iod_raft_member_propose(s->node, cmd, len, write_done, q);
	free(cmd);
	if (rc == -ENOTCONN)
		return not_leader(q);
	if (rc == -EBUSY)
		return queue_err(s, q->conn, 503,
		                 err_json("overloaded: %d writes in flight; retry shortly",
		                          IOD_API_PENDING_MAX));
	if (rc == -E2BIG)
		return queue_err(
		    s, q->conn, 413,
		    err_json("the command is %zu bytes, over IOD_STATE_CMD_MAX (%u bytes, "
		             "one Raft entry); split it (deploy fewer replicas at once)",
		             len, IOD_STATE_CMD_MAX));
	if (rc)
		return queue_err(s, q->conn, code_for(rc),
		                 err_json("proposing: %s", strerror(-rc)));
	if (q->ready) {
		/* answered already (a batch that could not be proposed) */
		json_t *a = q->answer;
		q->answer = NULL;
		q->ready = false;
		return queue_json(s, q->conn, q->status, a);
	}
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return MHD_YES;
}

/* A decimal query number in [0, INT64_MAX] (commands carry it as a JSON
 * integer): anything else, including overflow, sets *bad. A prev_rev of
 * 2^63 or more used to wrap to -1, "no check": an unconditional write. */
static bool query_u64(struct MHD_Connection *c, const char *key, uint64_t *out, bool *bad)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
	char *end = NULL;
	if (!v)
		return false;
	for (const char *p = v; *p; p++)
		if (*p < '0' || *p > '9') {
			*bad = true;
			return false;
		}
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (!v[0] || *end || errno == ERANGE || x > (unsigned long long)INT64_MAX) {
		*bad = true;
		return false;
	}
	*out = x;
	return true;
}

static json_t *body_json(struct req *q, json_t **err)
{
	struct iod_err e = {0};
	json_t *j = NULL;
	if (!q->body.len) {
		*err = err_json("request body is empty; send a JSON object");
		return NULL;
	}
	if (iod_json_parse(q->body.data, q->body.len, &j, &e)) {
		*err = err_json("%s", e.msg);
		return NULL;
	}
	return j;
}

static MHD_RESULT do_put(struct req *q, enum iod_state_kind k, const char *name)
{
	struct server *s = q->srv;
	uint64_t prev = 0, lease = 0;
	bool bad = false, has_prev;
	json_t *err = NULL, *v;

	has_prev = query_u64(q->conn, "prev_rev", &prev, &bad);
	query_u64(q->conn, "lease", &lease, &bad);
	if (bad)
		return queue_err(s, q->conn, 400,
		                 err_json("prev_rev and lease must be integers from 0 to 2^63-1"));
	if (q->body.len > IOD_API_VALUE_MAX)
		return queue_err(
		    s, q->conn, 413,
		    err_json("%s/%s: a value of %zu bytes is over IOD_API_VALUE_MAX (%u "
		             "bytes); store large data elsewhere and reference it",
		             iod_state_kind_name(k), name, q->body.len, IOD_API_VALUE_MAX));
	if (!(v = body_json(q, &err)))
		return queue_err(s, q->conn, 400, err);
	if (!json_is_object(v)) {
		json_decref(v);
		return queue_err(s, q->conn, 400,
		                 err_json("%s/%s: the body must be a JSON object",
		                          iod_state_kind_name(k), name));
	}
	if (!iod_raft_member_is_leader(s->node)) {
		json_decref(v);
		return not_leader(q);
	}
	/* the same checks /v1/deploy makes, for what a raw PUT could smuggle in */
	struct iod_err ve = {0};
	json_t *verr = NULL;
	if (iod_api_validate_put(iod_raft_member_state(s->node), k, name, v, &verr, &ve)) {
		json_decref(v);
		json_t *a = verr ? verr : json_object();
		json_object_set_new(a, "error", json_string(ve.msg));
		return queue_json(s, q->conn, ve.code == -ENOMEM ? 500 : 400, a);
	}
	char *cmd = iod_state_cmd_put(k, name, v, lease, has_prev ? (int64_t)prev : -1);
	json_decref(v);
	return propose(q, cmd);
}

static MHD_RESULT do_delete(struct req *q, enum iod_state_kind k, const char *name)
{
	struct server *s = q->srv;
	uint64_t prev = 0;
	bool bad = false, has_prev = query_u64(q->conn, "prev_rev", &prev, &bad);
	char *cmd;

	if (bad)
		return queue_err(s, q->conn, 400,
		                 err_json("prev_rev must be an integer from 0 to 2^63-1"));
	if (k == IOD_STATE_SERVICE && !has_prev) {
		/* deleting a service removes its replicas and endpoints with it */
		json_t *j = json_pack("{s:s, s:s}", "op", "undeploy", "service", name);
		cmd = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
	} else {
		cmd = iod_state_cmd_delete(k, name, has_prev ? (int64_t)prev : -1);
	}
	return propose(q, cmd);
}

static MHD_RESULT do_txn(struct req *q)
{
	json_t *err = NULL, *j = body_json(q, &err);
	if (!j)
		return queue_err(q->srv, q->conn, 400, err);
	if (!json_is_array(json_object_get(j, "ops"))) {
		json_decref(j);
		return queue_err(q->srv, q->conn, 400,
		                 err_json("a txn body is {\"ops\": [{\"op\": \"put\"|\"delete\", "
		                          "\"kind\", \"name\", \"value\", \"prev_rev\"}...]}"));
	}
	json_object_set_new(j, "op", json_string("txn"));
	char *cmd = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return propose(q, cmd);
}

static struct conn_ctx *conn_ctx_of(struct MHD_Connection *c);

static MHD_RESULT do_lease(struct req *q, const char *method, const char *id_text)
{
	struct server *s = q->srv;
	uint64_t now_ms = iod_time_unix_ns() / IOD_NS_PER_MS, id = 0, ttl = 0;
	char *end = NULL;

	if (id_text) {
		id = strtoull(id_text, &end, 10);
		if (!id || *end)
			return queue_err(s, q->conn, 400,
			                 err_json("lease id must be a positive integer"));
	}
	if (!strcmp(method, "POST") && !id_text) {
		json_t *err = NULL, *j = body_json(q, &err);
		if (!j)
			return queue_err(s, q->conn, 400, err);
		int rc = iod_json_get_u64(j, "ttl_ms", &ttl);
		bool node = json_is_true(json_object_get(j, "node"));
		json_decref(j);
		if (rc || ttl == 0 || ttl > 24ull * 3600 * 1000)
			return queue_err(
			    s, q->conn, 400,
			    err_json("a lease body is {\"ttl_ms\": N[, \"node\": true]} with 0 < N "
			             "<= 1 day"));
		/* the reserved pool is for node agents (and admins, who may do
		 * anything; with --insecure everyone on loopback is admin) */
		if (node && q->id.kind != IOD_SEC_KIND_NODE && q->id.role != IOD_SEC_ROLE_ADMIN)
			return queue_err(s, q->conn, 403,
			                 err_json("\"node\": true leases are for node identities"));
		/* quotas are per client: its identity, else its address */
		char owner[IOD_NAME_MAX + 32];
		struct conn_ctx *cc = conn_ctx_of(q->conn);
		if (q->id.kind != IOD_SEC_KIND_ANONYMOUS && strcmp(q->id.via, "--insecure")) {
			iod_sec_identity_subject(&q->id, owner, sizeof(owner));
		} else {
			snprintf(owner, sizeof(owner), "addr:%s", cc ? cc->remote : "?");
			char *colon = strrchr(owner, ':');
			if (colon && colon > owner + 5)
				*colon = 0; /* the address, not the port */
		}
		return propose(q, iod_state_cmd_lease_grant_for(ttl, now_ms, owner, node));
	}
	if (!strcmp(method, "PUT") && id_text)
		return propose(q, iod_state_cmd_lease_renew(id, now_ms));
	if (!strcmp(method, "DELETE") && id_text)
		return propose(q, iod_state_cmd_lease_revoke(id));
	return queue_err(s, q->conn, 405,
	                 err_json("leases: POST /v1/leases, PUT or DELETE /v1/leases/ID"));
}

/* The deploy turn ends (its write answered, or nothing to propose): the
 * next deploy may be planned. */
static void deploy_turn_release(struct req *q)
{
	if (!q->deploy_turn)
		return;
	q->deploy_turn = false;
	deploy_turn_end(q->srv);
	job_start_next(q->srv);
}

/* The plan is back (job_deploy_end): answer its refusal, or propose it. */
static MHD_RESULT deploy_planned(struct req *q)
{
	struct server *s = q->srv;
	char *cmd = q->plan_cmd;
	json_t *answer = q->extra;
	MHD_RESULT r;

	q->plan_cmd = NULL;
	q->extra = NULL;
	q->planned = false;
	if (!iod_raft_member_is_leader(s->node)) {
		/* planned from a state this server no longer leads: start again */
		free(cmd);
		json_decref(answer);
		deploy_turn_release(q);
		return not_leader(q);
	}
	if (q->plan_rc) {
		json_t *j = answer ? answer : json_object();
		json_object_set_new(j, "error", json_string(q->plan_msg));
		r = queue_json(s, q->conn, code_for(q->plan_rc), j);
	} else if (!cmd) { /* nothing placeable: the reasons, nothing stored */
		r = queue_json(s, q->conn, 422, answer);
	} else {
		q->extra = answer;
		r = propose(q, cmd);
	}
	if (!q->suspended)
		deploy_turn_release(q); /* answered without a write in flight */
	return r;
}

/*
 * POST /v1/deploy: the plan (spec, scheduler, Replica objects) is made on
 * a worker thread from a view of the state (issue 15: 2,000 replicas held
 * the loop 125 ms and cost an election); the loop proposes its result. One
 * deploy at a time: the next is planned once the previous write is
 * answered, so it sees the GPUs that one took.
 */
static MHD_RESULT do_deploy(struct req *q)
{
	struct server *s = q->srv;

	if (q->planned)
		return deploy_planned(q);
	if (!q->body.len)
		return queue_err(s, q->conn, 400,
		                 err_json("deploy needs a spec (YAML or JSON) body"));
	if (!iod_raft_member_is_leader(s->node))
		return not_leader(q);
	return job_deploy(q);
}

/* ---- members ------------------------------------------------------------ */

static void member_done(void *data, int status)
{
	struct req *q = data;
	if (status == -ENOTCONN)
		finish(q, 503, not_leader_json(q->srv));
	else if (status)
		finish(q, code_for(status),
		       err_json("membership change failed: %s", strerror(-status)));
	else
		finish(q, 200, iod_raft_member_status(q->srv->node));
}

static MHD_RESULT do_members(struct req *q, const char *method, const char *id_text)
{
	struct server *s = q->srv;
	int rc;

	if (!strcmp(method, "GET"))
		return queue_json(
		    s, q->conn, 200,
		    json_incref(json_object_get(iod_raft_member_status(s->node), "members")));
	if (!iod_raft_member_is_leader(s->node))
		return not_leader(q);
	if (!strcmp(method, "POST") && !id_text) {
		json_t *err = NULL, *j = body_json(q, &err);
		uint64_t id = 0;
		const char *raft_addr = NULL, *api = "";
		if (!j)
			return queue_err(s, q->conn, 400, err);
		if (iod_json_get_u64(j, "id", &id) || !id ||
		    iod_json_get_str(j, "raft", &raft_addr) || !strchr(raft_addr, ':')) {
			json_decref(j);
			return queue_err(
			    s, q->conn, 400,
			    err_json("a member is {\"id\": N, \"raft\": \"HOST:PORT\", "
			             "\"api\": \"HOST:PORT\"}"));
		}
		iod_json_get_str(j, "api", &api);
		rc = iod_raft_member_member_add(s->node, id, raft_addr, api, member_done, q);
		json_decref(j);
	} else if (!strcmp(method, "DELETE") && id_text) {
		char *end = NULL;
		uint64_t id = strtoull(id_text, &end, 10);
		if (!id || *end)
			return queue_err(s, q->conn, 400,
			                 err_json("member id must be a positive integer"));
		rc = iod_raft_member_member_remove(s->node, id, member_done, q);
	} else {
		return queue_err(
		    s, q->conn, 405,
		    err_json("members: GET or POST /v1/members, DELETE /v1/members/ID"));
	}
	if (rc == -ENOTCONN)
		return queue_json(s, q->conn, 503, not_leader_json(s));
	if (rc)
		return queue_err(s, q->conn, rc == -EEXIST ? 409 : code_for(rc),
		                 err_json("membership change refused: %s", strerror(-rc)));
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return MHD_YES;
}

/* ---- watches ------------------------------------------------------------ */

static void watch_unlink(struct req *q)
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
}

/* A large answer for q (text t): may it be sent now? Otherwise q waits,
 * still watching, until fewer than IOD_API_WATCH_LARGE_MAX are in flight. */
static bool large_admit(struct req *q, const struct shared_text *t)
{
	struct server *s = q->srv;
	if (t->len < IOD_API_WATCH_LARGE_BYTES)
		return true;
	if (s->large_inflight >= IOD_API_WATCH_LARGE_MAX) {
		if (!q->deferred) {
			q->deferred = true;
			s->deferred_n++;
			s->watch_deferred++;
		}
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

static void admit_cb(uv_timer_t *t);

/* q's large answer is sent (or it has had its IOD_API_WATCH_LARGE_SLOT_MS):
 * its place goes to a waiting watcher. */
static void large_release(struct req *q)
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
		uv_timer_start(&s->admit_timer, admit_cb, 0, 0);
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

static void wcache_put(struct server *s, struct req *q, bool sens, uint64_t after,
                       struct shared_text *t)
{
	struct watch_cache *c = s->wcache;
	if (!c)
		return;
	unsigned i = c->next++ % WATCH_CACHE_SLOTS;
	shared_unref(c->slot[i].text);
	c->slot[i].kind = (int)q->kind;
	c->slot[i].all = q->watch_all;
	c->slot[i].sensitive = sens;
	c->slot[i].after_rev = after;
	c->slot[i].state_rev = iod_state_rev(iod_raft_member_state(s->node));
	c->slot[i].text = t;
	t->refs++;
}

static void finish_shared(struct req *q, struct shared_text *t)
{
	t->refs++;
	q->answer_text = t;
	finish(q, 200, NULL);
}

static bool watch_try(struct req *q, bool timed_out)
{
	const struct iod_state *st = iod_raft_member_state(q->srv->node);
	struct iod_err e = {0};
	json_t *ev = NULL;
	bool sens = sees_sensitive(q);
	uint64_t after0 = q->after_rev;
	struct shared_text **hit = wcache_find(q->srv, q, sens);

	if (hit) {
		if (!large_admit(q, *hit))
			return false;
		watch_unlink(q);
		q->srv->watch_answers++;
		q->srv->watch_shared++;
		finish_shared(q, *hit);
		return true;
	}
	int rc = iod_state_watch(st, q->kind, q->watch_all, q->after_rev, IOD_API_WATCH_EVENTS_MAX,
	                         &ev, &e);

	if (rc) {
		json_t *a = json_pack("{s:s, s:I, s:I}", "error", e.msg, "rev",
		                      (json_int_t)iod_state_rev(st), "compacted_rev",
		                      (json_int_t)iod_state_history_floor(st));
		watch_unlink(q);
		finish(q, rc == -ESTALE ? 410 : 400, a);
		return true;
	}
	if (q->watch_all && !sees_sensitive(q) && json_array_size(ev)) {
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
	json_t *a = json_pack("{s:I, s:o}", "rev", (json_int_t)next, "events", ev);
	char *text = a ? json_dumps(a, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(a);
	size_t n = text ? strlen(text) : 0;
	struct shared_text *t = text ? malloc(sizeof(*t) + n + 2) : NULL;
	if (!t) {
		free(text);
		finish(q, 500, err_json("out of memory"));
		return true;
	}
	t->refs = 0;
	t->len = n + 1;
	memcpy(t->data, text, n);
	t->data[n] = '\n';
	t->data[n + 1] = 0;
	free(text);
	if (!timed_out || t->len >= IOD_API_WATCH_LARGE_BYTES)
		wcache_put(q->srv, q, sens, after0, t);
	if (!large_admit(q, t)) {
		if (!t->refs) /* not cached (no cache): made again next time */
			free(t);
		return false;
	}
	watch_unlink(q);
	q->srv->watch_answers++;
	finish_shared(q, t);
	return true;
}

/* Queue a shared watch answer on c (takes q's reference). */
static MHD_RESULT queue_shared(struct server *s, struct MHD_Connection *c, int status,
                               struct shared_text *t)
{
	struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback_cls(
	    t->len, t->data, shared_unref, t);
	MHD_RESULT rc;
	(void)s;
	if (!r) {
		shared_unref(t);
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
			shared_unref(s->wcache_store.slot[i].text);
			s->wcache_store.slot[i].text = NULL;
		}
}

static void watchers_wake(void *data)
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
static void admit_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	uint64_t now = mono_ms();
	for (struct req *q = s->watchers, *next;
	     q && s->deferred_n && s->large_inflight < IOD_API_WATCH_LARGE_MAX; q = next) {
		next = q->wnext;
		if (q->deferred)
			watch_try(q, now >= q->deadline_ms);
	}
}

static void watch_timer_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	uint64_t now = mono_ms();
	conns_sweep(s, now);
	for (unsigned i = 0; i < IOD_API_WATCH_LARGE_MAX; i++)
		if (s->large_q[i] && now >= s->large_q[i]->large_until_ms)
			large_release(s->large_q[i]);
	for (struct req *q = s->watchers, *next; q; q = next) {
		next = q->wnext;
		if (now >= q->deadline_ms)
			watch_try(q, true);
	}
	for (struct req *q = s->held, *next; q; q = next) {
		next = q->hnext;
		if (now >= q->hold_deadline_ms)
			held_rerun(q);
	}
}

static MHD_RESULT do_watch(struct req *q, enum iod_state_kind k, bool all)
{
	struct server *s = q->srv;
	const struct iod_state *st = iod_raft_member_state(s->node);
	uint64_t rev = iod_state_rev(st), timeout_ms = IOD_API_WATCH_TIMEOUT_MS_DEFAULT;
	bool bad = false;

	query_u64(q->conn, "rev", &rev, &bad);
	query_u64(q->conn, "timeout_ms", &timeout_ms, &bad);
	if (bad)
		return queue_err(
		    s, q->conn, 400,
		    err_json("watch: rev and timeout_ms must be non-negative integers"));
	if (timeout_ms > IOD_API_WATCH_TIMEOUT_MS_MAX)
		timeout_ms = IOD_API_WATCH_TIMEOUT_MS_MAX;
	if (s->watchers_n >= IOD_API_CONNECTIONS_MAX)
		return queue_err(s, q->conn, 503, err_json("too many watches; retry later"));
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
			return queue_shared(s, q->conn, q->status, t);
		}
		json_t *a = q->answer;
		q->answer = NULL;
		return queue_json(s, q->conn, q->status, a);
	}
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return MHD_YES;
}

/* ---- work off the loop: lists -------------------------------------------- */

static void job_unlink(struct server *s, struct job *j)
{
	if (j->prev)
		j->prev->next = j->next;
	else
		s->jobs = j->next;
	if (j->next)
		j->next->prev = j->prev;
	else
		s->jobs_tail = j->prev;
	j->prev = j->next = NULL;
}

/* Pool thread: only the job's own copy is touched. The text is written
 * after room for a shared_text header, which then becomes the answer
 * without a copy. */
static void job_work(uv_work_t *w)
{
	struct job *j = w->data;
	uint64_t t0 = iod_clock_now_ns();
	struct iod_buf b;
	static const char hdr[offsetof(struct shared_text, data)];

	if (j->deploy) {
		j->rc = iod_ctrl_deploy_plan_view(&j->view, j->body.data, j->body.len, &j->cmd,
		                                  &j->plan, &j->err);
		iod_ctrl_view_free(&j->view);
		j->worker_us = (iod_clock_now_ns() - t0) / 1000;
		return;
	}
	iod_buf_init(&b);
	int rc = iod_buf_append(&b, hdr, sizeof(hdr)); /* the dump releases the items anyway */
	rc = iod_state_items_dump(j->kind, j->rev, j->items, (uint32_t)j->n, j->limit, &b) || rc;
	j->items = NULL;
	if (!rc) {
		struct shared_text *t =
		    (struct shared_text *)(void *)b.data; /* malloc'd: aligned */
		t->refs = 1;
		t->len = b.len - sizeof(hdr);
		j->text = t;
	} else {
		iod_buf_free(&b);
	}
	j->worker_us = (iod_clock_now_ns() - t0) / 1000;
}

static void job_start_next(struct server *s);

static void deploy_turn_end(struct server *s)
{
	s->deploy_busy = false;
}

/* A deploy plan is back: hand it to its request, which the handler routes
 * again (do_deploy proposes it), or drop it with the deploy turn. */
static void job_deploy_end(struct server *s, struct job *j)
{
	struct req *q = j->q;
	if (!q) {
		if (j->running)
			deploy_turn_end(s);
	} else {
		q->job = NULL;
		iod_buf_free(&q->body);
		q->body = j->body; /* back: a rerun (held, then a leader) plans again */
		iod_buf_init(&j->body);
		q->planned = true;
		q->deploy_turn = j->running;
		q->plan_rc = j->running ? j->rc : -ENOMEM;
		q->plan_cmd = j->cmd;
		j->cmd = NULL;
		json_decref(q->extra);
		q->extra = j->plan;
		j->plan = NULL;
		iod_strlcpy(q->plan_msg, j->running ? j->err.msg : "out of memory",
		            sizeof(q->plan_msg));
		if (q->suspended) {
			q->suspended = false;
			MHD_resume_connection(q->conn);
			mhd_kick(s);
		}
	}
	iod_ctrl_view_free(&j->view);
	iod_buf_free(&j->body);
	free(j->cmd);
	json_decref(j->plan);
	free(j);
}

/* Answer a job's request (if it still has one) and free the job. */
static void job_end(struct server *s, struct job *j)
{
	job_unlink(s, j);
	if (j->deploy) {
		job_deploy_end(s, j);
		return;
	}
	if (j->q) {
		struct req *q = j->q;
		q->job = NULL;
		if (j->text) {
			q->answer_text = j->text; /* the job's reference */
			j->text = NULL;
			s->requests[200]++;
			finish(q, 200, NULL);
		} else {
			finish(q, 500,
			       err_json("out of memory listing %s", iod_state_kind_name(j->kind)));
		}
	}
	shared_unref(j->text);
	for (int i = 0; j->items && i < j->n; i++)
		json_decref(j->items[i].value);
	free(j->items);
	free(j);
}

static void job_after(uv_work_t *w, int status)
{
	struct job *j = w->data;
	struct server *s = j->srv;
	(void)status;
	IOD_ASSERT(s->jobs_running > 0);
	s->jobs_running--;
	if (j->deploy) {
		s->deploys_planned++;
		if (j->worker_us > s->deploy_max_us)
			s->deploy_max_us = j->worker_us;
	} else {
		s->jobs_done++;
		if (j->worker_us > s->job_max_us)
			s->job_max_us = j->worker_us;
	}
	job_end(s, j);
	job_start_next(s);
}

/* Start waiting jobs while fewer than IOD_API_JOBS_MAX run: copy the
 * objects now (the answer is the state when its turn came, which is after
 * the request arrived, so still a correct read), sort and serialise there. */
static void job_start_next(struct server *s)
{
	for (struct job *j = s->jobs, *next; j && s->jobs_running < IOD_API_JOBS_MAX; j = next) {
		next = j->next;
		if (j->running || (j->deploy && s->deploy_busy))
			continue;
		const struct iod_state *st = iod_raft_member_state(s->node);
		j->w.data = j;
		if (j->deploy) {
			/* one deploy at a time, planned against the state that its
			 * predecessor's write has been applied to */
			if (iod_ctrl_view_take(st, &j->view) ||
			    uv_queue_work(&s->loop, &j->w, job_work, job_after)) {
				job_end(s, j); /* not running: 500 */
				continue;
			}
			s->deploy_busy = true;
		} else {
			j->rev = iod_state_rev(st);
			j->n = iod_state_items(st, j->kind, j->after, &j->items);
			if (j->n < 0 || uv_queue_work(&s->loop, &j->w, job_work, job_after)) {
				if (j->n < 0)
					j->n = 0;
				job_end(s, j); /* no text: 500 */
				continue;
			}
		}
		j->running = true;
		s->jobs_running++;
	}
}

/* Queue j for q (suspended until it is answered). */
static MHD_RESULT job_queue(struct req *q, struct job *j)
{
	struct server *s = q->srv;
	j->srv = s;
	j->q = q;
	j->prev = s->jobs_tail;
	if (s->jobs_tail)
		s->jobs_tail->next = j;
	else
		s->jobs = j;
	s->jobs_tail = j;
	q->job = j;
	if (!q->suspended) {
		q->suspended = true;
		MHD_suspend_connection(q->conn);
	}
	job_start_next(s);
	return MHD_YES;
}

static MHD_RESULT job_oom(struct req *q)
{
	if (q->suspended) {
		finish(q, 500, err_json("out of memory"));
		return MHD_YES;
	}
	return queue_err(q->srv, q->conn, 500, err_json("out of memory"));
}

/* Queue a list for q. */
static MHD_RESULT job_list(struct req *q, enum iod_state_kind k)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return job_oom(q);
	j->kind = k;
	j->limit = q->list_limit;
	memcpy(j->after, q->list_after, sizeof(j->after));
	return job_queue(q, j);
}

/* Queue q's deploy plan (its body moves to the job). */
static MHD_RESULT job_deploy(struct req *q)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return job_oom(q);
	j->deploy = true;
	j->body = q->body;
	iod_buf_init(&q->body);
	return job_queue(q, j);
}

/* A request that goes away (or a server that stops) leaves its job: a
 * waiting one is dropped, a running one finishes without answering. */
static void job_detach(struct req *q)
{
	struct job *j = q->job;
	if (!j)
		return;
	q->job = NULL;
	j->q = NULL;
	if (!j->running)
		job_end(q->srv, j);
}

/* ---- linearizable reads ------------------------------------------------- */

static void fence_done(void *data, int status)
{
	struct req *q = data;
	const struct iod_state *st = iod_raft_member_state(q->srv->node);
	json_t *o;

	if (status == -ENOTCONN) {
		finish(q, 503, not_leader_json(q->srv));
		return;
	}
	if (status) {
		finish(q, 503, err_json("read fence failed: %s; retry", strerror(-status)));
		return;
	}
	if (q->fence_list) {
		job_list(q, q->kind);
		return;
	}
	o = iod_state_get(st, q->kind, q->name);
	if (o)
		finish(q, 200, o);
	else
		finish(q, 404, err_json("%s/%s not found", iod_state_kind_name(q->kind), q->name));
}

/* ?consistent=1: answer after a barrier, from the leader only. */
static bool wants_fence(struct MHD_Connection *c)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "consistent");
	return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

static MHD_RESULT fenced_read(struct req *q, enum iod_state_kind k, bool list)
{
	struct server *s = q->srv;
	q->kind = k;
	q->fence_list = list;
	int rc = iod_raft_member_read_fence(s->node, fence_done, q);
	if (rc == -ENOTCONN)
		return not_leader(q);
	if (rc)
		return queue_err(s, q->conn, 503, err_json("read fence: %s", strerror(-rc)));
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return MHD_YES;
}

/* ---- security: who is asking, may they (auth.c, src/sec/) ---------------- */

static struct conn_ctx *conn_ctx_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static json_t *denied_json(const struct iod_sec_identity *id, int status, const char *reason)
{
	char who[IOD_NAME_MAX + 16];
	iod_sec_identity_subject(id, who, sizeof(who));
	return json_pack("{s:s, s:s, s:s, s:i}", "error", reason, "identity", who, "via",
	                 id->via[0] ? id->via : "none", "status", status);
}

/* Writes are audited, and so is every refusal; lease renewals are not
 * (every agent renews several times a second: they would drown the trail). */
static bool audited_write(const char *method, const char *url)
{
	if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
		return false;
	return !(!strcmp(method, "PUT") && !strncmp(url, "/v1/leases/", 11));
}

/*
 * Authenticate and authorise q before it is routed. Returns true when q may
 * go on (q->id set); false when an answer was queued (*rc holds it).
 */
static bool access_ok(struct req *q, const char *url, const char *method, MHD_RESULT *rc)
{
	struct server *s = q->srv;
	struct conn_ctx *cc = conn_ctx_of(q->conn);
	struct iod_sec_request rq;
	struct iod_sec_decision d;
	char name[IOD_NAME_MAX], why[IOD_ERR_MSG_MAX];
	json_t *value = NULL;
	const char *watch = MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, "watch");
	const struct iod_state *st = iod_raft_member_state(s->node);
	int c;

	snprintf(q->method, sizeof(q->method), "%s", method);
	snprintf(q->url, sizeof(q->url), "%s", url);
	q->audit = audited_write(method, url);
	c = iod_api_classify(method, url, watch, q->body.data, q->body.len, &rq, name, sizeof(name),
	                     NULL);
	if (c == -ENOENT) { /* public */
		iod_sec_identity_anonymous(&q->id);
		q->audit = false;
		return true;
	}
	bool has_auth = MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Authorization");
	int ir;
	if (!has_auth && cc && cc->have_cert_id && (uint64_t)time(NULL) < cc->cert_not_after_s) {
		q->id = cc->cert_id;
		ir = 0;
	} else {
		uint64_t until = 0;
		if (cc)
			cc->have_cert_id = false; /* expired on a kept connection: verify again */
		ir = iod_api_sec_identify(&s->sec, q->conn, st, &q->id, &until, why, sizeof(why));
		if (!ir && !has_auth && cc && q->id.kind != IOD_SEC_KIND_ANONYMOUS && until) {
			cc->cert_id = q->id;
			cc->cert_not_after_s = until;
			cc->have_cert_id = true;
		}
	}
	if (ir == -ENOENT && !iod_raft_member_is_leader(s->node)) {
		/* a token this follower has not applied yet: ask the leader */
		json_decref(value);
		q->audit = false;
		*rc = not_leader(q);
		return false;
	}
	if (ir) {
		json_decref(value);
		q->audit = true;
		snprintf(q->detail, sizeof(q->detail), "%s", why);
		*rc = queue_json(s, q->conn, 401, denied_json(&q->id, 401, why));
		return false;
	}
	if (c == 1) { /* any authenticated caller (whoami, unknown paths) */
		json_decref(value);
		if (q->id.kind != IOD_SEC_KIND_ANONYMOUS)
			return true;
		q->audit = true;
		iod_sec_authorize(&q->id, &rq, &d);
		snprintf(q->detail, sizeof(q->detail), "%s", d.reason);
		*rc = queue_json(s, q->conn, 401, denied_json(&q->id, 401, d.reason));
		return false;
	}
	rq.state = st;
	/* only a node's writes are judged by what they write */
	if (q->id.kind == IOD_SEC_KIND_NODE && rq.verb == IOD_SEC_VERB_PUT && q->body.len)
		value = json_loadb(q->body.data, q->body.len, 0, NULL);
	rq.value = value;
	struct iod_sec_identity subject;
	json_t *qv = NULL;
	if (rq.res == IOD_SEC_RES_CERTIFICATE) {
		struct iod_err e = {0};
		json_t *b = q->body.len ? json_loadb(q->body.data, q->body.len, 0, NULL) : NULL;
		int sr = iod_api_sec_cert_subject(b, s->sec.cluster, &subject, &e);
		json_decref(b);
		if (sr) {
			json_decref(value);
			*rc = queue_err(s, q->conn, 400, err_json("%s", e.msg));
			return false;
		}
		rq.subject = &subject;
	} else if (rq.res == IOD_SEC_RES_SECRET_VALUE) {
		const char *rep =
		    MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, "replica");
		qv = json_pack("{s:s}", "replica", rep ? rep : "");
		rq.value = qv;
	}
	int ar = iod_sec_authorize(&q->id, &rq, &d);
	json_decref(value);
	json_decref(qv);
	if (ar) {
		q->audit = true;
		snprintf(q->detail, sizeof(q->detail), "%s", d.reason);
		*rc = queue_json(s, q->conn, d.status, denied_json(&q->id, d.status, d.reason));
		return false;
	}
	return true;
}

/* Sensitive kinds leave watches and all-kinds lists of non-admins. */
static bool sees_sensitive(const struct req *q)
{
	return !q->srv->sec.on || q->id.role == IOD_SEC_ROLE_ADMIN;
}

static MHD_RESULT do_whoami(struct req *q)
{
	char uri[512] = "", who[IOD_NAME_MAX * 3];
	iod_sec_identity_uri(&q->id, uri, sizeof(uri));
	iod_sec_identity_format(&q->id, who, sizeof(who));
	json_t *j =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kind", iod_sec_kind_name(q->id.kind),
	              "name", q->id.name, "role", iod_sec_role_name(q->id.role), "via", q->id.via,
	              "uri", uri, "description", who);
	if (q->id.kind == IOD_SEC_KIND_SERVICE)
		json_object_set_new(j, "tenant", json_string(q->id.tenant));
	return queue_json(q->srv, q->conn, 200, j);
}

static MHD_RESULT do_ca(struct req *q)
{
	struct server *s = q->srv;
	if (!s->sec.ca_pem)
		return queue_err(s, q->conn, 404,
		                 err_json("this server runs --insecure: it has no CA"));
	json_t *j = json_pack("{s:s, s:s}", "cluster", s->sec.cluster, "ca", s->sec.ca_pem);
	return queue_json(s, q->conn, 200, j);
}

static MHD_RESULT do_audit(struct req *q)
{
	uint64_t after = 0, limit = 1000;
	bool bad = false;
	query_u64(q->conn, "after", &after, &bad);
	query_u64(q->conn, "limit", &limit, &bad);
	if (bad)
		return queue_err(q->srv, q->conn, 400,
		                 err_json("audit: after and limit must be non-negative integers"));
	json_t *j = iod_api_sec_audit_list(&q->srv->sec, after,
	                                   (uint32_t)IOD_MIN(limit, (uint64_t)IOD_SEC_AUDIT_RING));
	json_object_set_new(j, "server", json_string(q->srv->cfg.api_addr));
	return queue_json(q->srv, q->conn, 200, j);
}

static MHD_RESULT do_certificate(struct req *q)
{
	struct server *s = q->srv;
	struct iod_sec_identity subject;
	struct iod_err e = {0};
	json_t *answer = NULL, *b = NULL, *err = NULL;

	if (!(b = body_json(q, &err)))
		return queue_err(s, q->conn, 400, err);
	if (iod_api_sec_cert_subject(b, s->sec.cluster, &subject, &e)) {
		json_decref(b);
		return queue_err(s, q->conn, 400, err_json("%s", e.msg));
	}
	/* a join token cannot take over a node that is registered and alive */
	if (q->id.kind == IOD_SEC_KIND_BOOTSTRAP && subject.kind == IOD_SEC_KIND_NODE &&
	    iod_state_value(iod_raft_member_state(s->node), IOD_STATE_NODE, subject.name)) {
		json_decref(b);
		return queue_err(s, q->conn, 409,
		                 err_json("node %s is registered and alive: a join token cannot "
		                          "take over its name (revoke it first, or pick another "
		                          "--name)",
		                          subject.name));
	}
	int rc = iod_api_sec_cert_sign(&s->sec, b, &subject, (uint64_t)time(NULL), &answer, &e);
	json_decref(b);
	if (rc)
		return queue_err(s, q->conn, rc == -EPERM ? 503 : 400, err_json("%s", e.msg));
	return queue_json(s, q->conn, 200, answer);
}

static MHD_RESULT do_token_create(struct req *q)
{
	struct server *s = q->srv;
	struct iod_err e = {0};
	char id[32], token[IOD_SEC_TOKEN_LEN + 1];
	json_t *value = NULL, *err = NULL, *b;

	if (!s->sec.on)
		return queue_err(s, q->conn, 400,
		                 err_json("this server runs --insecure: tokens need --pki"));
	if (!(b = body_json(q, &err)))
		return queue_err(s, q->conn, 400, err);
	int rc = iod_api_sec_token_new(b, &q->id, iod_time_unix_ns() / IOD_NS_PER_MS, id,
	                               sizeof(id), token, sizeof(token), &value, &e);
	json_decref(b);
	if (rc)
		return queue_err(s, q->conn, 400, err_json("%s", e.msg));
	if (!iod_raft_member_is_leader(s->node)) {
		json_decref(value);
		return not_leader(q);
	}
	char *cmd = iod_state_cmd_put(IOD_STATE_TOKEN, id, value, 0, 0);
	q->extra = json_pack("{s:s, s:s, s:O}", "token", token, "id", id, "record", value);
	json_object_del(json_object_get(q->extra, "record"), "hash");
	memset(token, 0, sizeof(token));
	json_decref(value);
	return propose(q, cmd);
}

static MHD_RESULT do_secret_value(struct req *q, const char *name)
{
	struct server *s = q->srv;
	struct iod_err e = {0};
	const json_t *v = iod_state_value(iod_raft_member_state(s->node), IOD_STATE_SECRET, name);
	const char *sealed = NULL;
	void *plain = NULL;
	size_t n = 0;

	if (!v || iod_json_get_str(v, "sealed", &sealed))
		return queue_err(s, q->conn, 404, err_json("secret %s not found", name));
	if (!s->sec.has_secrets_key)
		return queue_err(s, q->conn, 503,
		                 err_json("this server has no secrets key (PKI secrets.key)"));
	if (iod_sec_open(s->sec.secrets_key, name, sealed, &plain, &n, &e))
		return queue_err(s, q->conn, 500, err_json("%s", e.msg));
	gnutls_datum_t in = {plain, (unsigned)n}, b64 = {0};
	int rc = gnutls_base64_encode2(&in, &b64);
	memset(plain, 0, n);
	free(plain);
	if (rc)
		return queue_err(s, q->conn, 500, err_json("out of memory"));
	json_t *j =
	    json_pack("{s:s, s:s#}", "name", name, "data", (const char *)b64.data, (int)b64.size);
	memset(b64.data, 0, b64.size);
	gnutls_free(b64.data);
	return queue_json(s, q->conn, 200, j);
}

/*
 * POST /v1/secrets {"name": NAME, "data": BASE64}: seal the value with the
 * cluster's secrets key (AES-256-GCM, the name as associated data) and store
 * only the ciphertext: the plaintext is in no Raft entry, snapshot, log or
 * answer (docs/security.md).
 */
static MHD_RESULT do_secret_create(struct req *q)
{
	struct server *s = q->srv;
	struct iod_err e = {0};
	json_t *err = NULL, *b;
	const char *name = NULL, *data = NULL;
	uint8_t nonce[12];
	char *sealed = NULL, who[IOD_NAME_MAX + 16];

	if (!s->sec.on || !s->sec.has_secrets_key)
		return queue_err(s, q->conn, 400,
		                 err_json("secrets need a server with --pki and its secrets.key"));
	if (!(b = body_json(q, &err)))
		return queue_err(s, q->conn, 400, err);
	if (iod_json_get_str(b, "name", &name) || !iod_sec_name_valid(name) ||
	    iod_json_get_str(b, "data", &data)) {
		json_decref(b);
		return queue_err(s, q->conn, 400,
		                 err_json("a secret is {\"name\": NAME, \"data\": BASE64}"));
	}
	gnutls_datum_t in = {(unsigned char *)data, (unsigned)strlen(data)}, plain = {0};
	if (gnutls_base64_decode2(&in, &plain) || plain.size > IOD_SEC_SECRET_MAX) {
		if (plain.data) {
			memset(plain.data, 0, plain.size);
			gnutls_free(plain.data);
		}
		json_decref(b);
		return queue_err(s, q->conn, 400,
		                 err_json("\"data\" must be base64 of at most %u bytes "
		                          "(IOD_SEC_SECRET_MAX)",
		                          IOD_SEC_SECRET_MAX));
	}
	int rc = iod_sec_random(nonce, sizeof(nonce));
	if (!rc)
		rc = iod_sec_seal(s->sec.secrets_key, nonce, name, plain.data, plain.size, &sealed,
		                  &e);
	size_t bytes = plain.size;
	memset(plain.data, 0, plain.size);
	gnutls_free(plain.data);
	if (rc) {
		json_decref(b);
		return queue_err(s, q->conn, 500, err_json("sealing: %s", e.msg));
	}
	if (!iod_raft_member_is_leader(s->node)) {
		free(sealed);
		json_decref(b);
		return not_leader(q);
	}
	iod_sec_identity_subject(&q->id, who, sizeof(who));
	json_t *value = json_pack(
	    "{s:s, s:I, s:I, s:s}", "sealed", sealed, "bytes", (json_int_t)bytes, "created_ms",
	    (json_int_t)(iod_time_unix_ns() / IOD_NS_PER_MS), "created_by", who);
	free(sealed);
	char *cmd = iod_state_cmd_put(IOD_STATE_SECRET, name, value, 0, 0);
	q->extra = json_pack("{s:s, s:I}", "name", name, "bytes", (json_int_t)bytes);
	json_decref(value);
	json_decref(b);
	return propose(q, cmd);
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
	return queue_err(s, c, 404,
	                 err_json("unknown kind \"%s\"%s%s%s; kinds: nodes, services, replicas, "
	                          "endpoints, policies, configs",
	                          kind, sug ? " (did you mean \"" : "", sug ? sug : "",
	                          sug ? "\"?)" : ""));
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
		return queue_err(
		    s, q->conn, 405,
		    err_json("telemetry: GET /v1/telemetry[/NODE], PUT /v1/telemetry/NODE"));
	if (name && !iod_state_name_valid(name))
		return queue_err(s, q->conn, 400, err_json("invalid node name \"%.64s\"", name));
	if (!iod_raft_member_is_leader(s->node))
		return not_leader(q);
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
			return queue_err(s, q->conn, 404,
			                 err_json("no telemetry from node %s yet", name));
		}
		return queue_json(s, q->conn, 200, json_pack("{s:o}", "items", items));
	}
	json_t *err = NULL, *v = body_json(q, &err);
	if (!v)
		return queue_err(s, q->conn, 400, err);
	if (!json_is_object(v)) {
		json_decref(v);
		return queue_err(s, q->conn, 400,
		                 err_json("telemetry: the body must be a JSON object"));
	}
	json_object_set_new(v, "node", json_string(name));
	struct tel_entry *t = NULL;
	for (uint32_t i = 0; i < s->tel_n && !t; i++)
		if (!strcmp(s->tel[i].node, name))
			t = &s->tel[i];
	if (!t) {
		if (!s->tel && !(s->tel = calloc(IOD_TEL_NODES_MAX, sizeof(*s->tel)))) {
			json_decref(v);
			return queue_err(s, q->conn, 500, err_json("out of memory"));
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
	return queue_json(s, q->conn, 200,
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

	if (query_u64(q->conn, "limit", &limit, &bad) && limit == 0)
		bad = true;
	if (bad)
		return queue_err(s, q->conn, 400,
		                 err_json("limit must be an integer from 1 to %d "
		                          "(IOD_API_LIST_PAGE_MAX)",
		                          IOD_API_LIST_PAGE_MAX));
	if (limit > IOD_API_LIST_PAGE_MAX)
		return queue_err(s, q->conn, 400,
		                 err_json("limit %llu is over %d objects a page "
		                          "(IOD_API_LIST_PAGE_MAX); page with continue",
		                          (unsigned long long)limit, IOD_API_LIST_PAGE_MAX));
	if (after && after[0] && !iod_state_name_valid(after))
		return queue_err(s, q->conn, 400,
		                 err_json("continue must be a name from the previous page's "
		                          "\"continue\""));
	q->list_limit = (uint32_t)limit;
	if (after)
		iod_strlcpy(q->list_after, after, sizeof(q->list_after));
	if (wants_fence(q->conn))
		return fenced_read(q, k, true);
	return job_list(q, k);
}

static MHD_RESULT route(struct req *q, const char *url, const char *method)
{
	struct server *s = q->srv;
	struct MHD_Connection *c = q->conn;
	char path[256], *seg[4] = {0};
	int nseg = 0;
	bool is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD");

	if (!strcmp(url, "/metrics")) {
		struct iod_buf b;
		iod_buf_init(&b);
		iod_raft_member_metrics(s->node, &b);
		iod_buf_printf(&b,
		               "# HELP iod_api_requests_total API answers by HTTP status code.\n"
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
		    "# HELP iod_api_jobs Lists being serialised off the loop.\n"
		    "# TYPE iod_api_jobs gauge\niod_api_jobs{state=\"running\"} %u\n"
		    "# HELP iod_api_jobs_total Lists serialised off the loop.\n"
		    "# TYPE iod_api_jobs_total counter\niod_api_jobs_total %llu\n"
		    "# HELP iod_api_job_max_seconds Longest list serialisation (worker time).\n"
		    "# TYPE iod_api_job_max_seconds gauge\niod_api_job_max_seconds %.6f\n"
		    "# HELP iod_api_deploys_total Deploys planned off the loop.\n"
		    "# TYPE iod_api_deploys_total counter\niod_api_deploys_total %llu\n"
		    "# HELP iod_api_deploy_max_seconds Longest deploy plan (worker time).\n"
		    "# TYPE iod_api_deploy_max_seconds gauge\niod_api_deploy_max_seconds %.6f\n",
		    s->watchers_n, (unsigned long long)s->watch_answers,
		    (unsigned long long)s->watch_shared, s->conns_n,
		    (unsigned long long)s->closed_head, (unsigned long long)s->closed_body,
		    (unsigned long long)s->evicted, (unsigned long long)s->watch_deferred,
		    s->jobs_running, (unsigned long long)s->jobs_done, (double)s->job_max_us / 1e6,
		    (unsigned long long)s->deploys_planned, (double)s->deploy_max_us / 1e6);
		s->requests[200]--;
		return queue_text(s, c, 200, "text/plain; version=0.0.4",
		                  b.data ? b.data : strdup(""));
	}
	if (iod_strlcpy(path, url, sizeof(path)) || strncmp(path, "/v1/", 4))
		return queue_err(s, c, 404,
		                 err_json("no such path %.100s; the API lives under /v1/ (see "
		                          "docs/control-plane.md)",
		                          url));
	for (char *p = path + 4, *save = NULL, *t = strtok_r(p, "/", &save); t;
	     t = strtok_r(NULL, "/", &save)) {
		if (nseg == 3)
			return queue_err(s, c, 404, err_json("path %.100s is too deep", url));
		seg[nseg++] = t;
	}
	if (nseg == 0)
		return queue_err(s, c, 404, err_json("GET /v1/status, /v1/<kind>[/<name>]"));
	if (!strcmp(seg[0], "status") && nseg == 1) {
		if (!is_get)
			return queue_err(s, c, 405,
			                 err_json("status is read-only: GET /v1/status"));
		json_t *st = iod_raft_member_status(s->node);
		json_object_set_new(st, "api", json_string(s->cfg.api_addr));
		json_object_set_new(st, "watches", json_integer(s->watchers_n));
		json_object_set_new(st, "held", json_integer(s->held_n));
		return queue_json(s, c, 200, st);
	}
	if (!strcmp(seg[0], "deploy") && nseg == 1) {
		if (strcmp(method, "POST"))
			return queue_err(s, c, 405,
			                 err_json("deploy: POST /v1/deploy with a spec body"));
		return do_deploy(q);
	}
	if (!strcmp(seg[0], "txn") && nseg == 1) {
		if (strcmp(method, "POST"))
			return queue_err(s, c, 405, err_json("txn: POST /v1/txn"));
		return do_txn(q);
	}
	if (!strcmp(seg[0], "whoami") && nseg == 1 && is_get)
		return do_whoami(q);
	if (!strcmp(seg[0], "ca") && nseg == 1 && is_get)
		return do_ca(q);
	if (!strcmp(seg[0], "audit") && nseg == 1 && is_get)
		return do_audit(q);
	if (!strcmp(seg[0], "certificates") && nseg == 1) {
		if (strcmp(method, "POST"))
			return queue_err(
			    s, c, 405, err_json("certificates: POST /v1/certificates with a CSR"));
		return do_certificate(q);
	}
	if (!strcmp(seg[0], "secret-values") && nseg == 2 && is_get)
		return do_secret_value(q, seg[1]);
	if (!strcmp(seg[0], "tokens") && nseg == 1 && !strcmp(method, "POST"))
		return do_token_create(q);
	if (!strcmp(seg[0], "secrets") && nseg == 1 && !strcmp(method, "POST"))
		return do_secret_create(q);
	if (!strcmp(seg[0], "leases") && nseg <= 2)
		return do_lease(q, method, nseg == 2 ? seg[1] : NULL);
	if (!strcmp(seg[0], "members") && nseg <= 2)
		return do_members(q, method, nseg == 2 ? seg[1] : NULL);
	if (!strcmp(seg[0], "telemetry") && nseg <= 2)
		return do_telemetry(q, method, nseg == 2 ? seg[1] : NULL);
	if (!strcmp(seg[0], "watch") && nseg == 1 && is_get)
		return do_watch(q, IOD_STATE_NODE, true);

	enum iod_state_kind k;
	if (iod_state_kind_parse(seg[0], &k))
		return unknown_kind(s, c, seg[0]);
	if (nseg == 1) {
		if (!is_get)
			return queue_err(s, c, 405,
			                 err_json("%s: GET lists; PUT/DELETE need /v1/%s/NAME",
			                          seg[0], iod_state_kind_name(k)));
		const char *w = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "watch");
		if (w && (!strcmp(w, "1") || !strcmp(w, "true")))
			return do_watch(q, k, false);
		return do_list(q, k);
	}
	if (nseg != 2)
		return queue_err(s, c, 404, err_json("path %.100s: want /v1/<kind>/<name>", url));
	if (!iod_state_name_valid(seg[1]))
		return queue_err(s, c, 400,
		                 err_json("invalid name \"%.64s\": 1-%d of A-Z a-z 0-9 . _ -",
		                          seg[1], IOD_NAME_MAX - 1));
	iod_strlcpy(q->name, seg[1], sizeof(q->name));
	if (is_get && wants_fence(c))
		return fenced_read(q, k, false);
	if (is_get) {
		json_t *o = iod_state_get(iod_raft_member_state(s->node), k, seg[1]);
		if (!o)
			return queue_err(
			    s, c, 404, err_json("%s/%s not found", iod_state_kind_name(k), seg[1]));
		return queue_json(s, c, 200, o);
	}
	if (!strcmp(method, "PUT"))
		return do_put(q, k, seg[1]);
	if (!strcmp(method, "DELETE"))
		return do_delete(q, k, seg[1]);
	return queue_err(s, c, 405, err_json("method %s not allowed on %s", method, url));
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
		conn_phase_set(conn_ctx_of(conn), PHASE_BODY, declared);
		return MHD_YES;
	}
	if (*upload_size) {
		if (q->framing_bad) {
			/* discarded: answered 400 at the end */
		} else if (!q->too_big && q->body.len + *upload_size <= IOD_API_BODY_MAX) {
			if (iod_buf_append(&q->body, upload, *upload_size))
				q->too_big = true;
		} else {
			q->too_big = true;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	conn_phase_set(conn_ctx_of(conn), PHASE_ANSWER, 0);
	if (q->ready) {
		json_t *a = q->answer;
		q->answer = NULL;
		q->ready = false;
		if (q->answer_text) {
			struct shared_text *t = q->answer_text;
			q->answer_text = NULL;
			json_decref(a);
			return queue_shared(s, conn, q->status, t);
		}
		return queue_json(s, conn, q->status, a);
	}
	if (q->suspended)
		return MHD_YES;
	if (q->framing_bad)
		return queue_err(s, conn, 400,
		                 err_json("both Content-Length and Transfer-Encoding: ambiguous "
		                          "framing, refused"));
	if (q->too_big)
		return queue_err(s, conn, 413,
		                 err_json("request body larger than %u bytes (IOD_API_BODY_MAX)",
		                          IOD_API_BODY_MAX));
	if (s->stopping) {
		/* a leader handing over: name the new leader once it is known;
		 * until then (or until raft is closed) hold, so that clients do
		 * not poll the followers, which still name this server */
		const char *api = "";
		uint64_t id = s->node_closed ? 0 : iod_raft_member_leader(s->node, &api);
		if (id && id != s->cfg.id && api[0])
			return queue_json(s, conn, 503, not_leader_json(s));
		if (!s->node_closed && hold(q))
			return MHD_YES;
		return queue_json(s, conn, 503,
		                  json_pack("{s:s, s:b, s:s}", "error",
		                            "server is shutting down; retry another server",
		                            "not_leader", 1, "leader", ""));
	}
	if (!q->authed) {
		MHD_RESULT rc = MHD_NO;
		if (!access_ok(q, url, method, &rc))
			return rc;
		q->authed = true;
	}
	return route(q, url, method);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
	struct req *q = *con_cls;
	(void)cls;
	conn_phase_set(conn_ctx_of(conn), PHASE_HEAD, 0);
	if (!q)
		return;
	if (q->audit && q->method[0]) {
		struct conn_ctx *cc = conn_ctx_of(conn);
		int status = cc ? cc->last_status : 0;
		const char *why = q->detail[0] ? q->detail : NULL;
		if (!why && q->answer)
			iod_json_get_str(q->answer, "error", &why);
		iod_api_sec_audit(&q->srv->sec, &q->id, q->method, q->url,
		                  toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? status : 499,
		                  cc ? cc->remote : "", why);
	}
	watch_unlink(q);
	held_unlink(q);
	job_detach(q);
	deploy_turn_release(q);
	large_release(q);
	free(q->plan_cmd);
	iod_buf_free(&q->body);
	shared_unref(q->answer_text);
	json_decref(q->answer);
	json_decref(q->extra);
	free(q);
	*con_cls = NULL;
}

/* ---- MHD on the uv loop -------------------------------------------------- */

static void mhd_timer_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	MHD_UNSIGNED_LONG_LONG to = 0;
	if (!s->mhd)
		return;
	MHD_run(s->mhd);
	if (MHD_get_timeout(s->mhd, &to) == MHD_YES)
		uv_timer_start(&s->mhd_timer, mhd_timer_cb, to > 100 ? 100 : to, 0);
	else
		uv_timer_start(&s->mhd_timer, mhd_timer_cb, 100, 0);
}

static void mhd_kick(struct server *s)
{
	uv_timer_start(&s->mhd_timer, mhd_timer_cb, 0, 0);
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
			if (s->conns_n > IOD_API_CONNECTIONS_MAX - IOD_API_CONNECTIONS_SPARE)
				conns_make_room(s, cc, 1);
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
	mhd_kick(s);
	return 0;
}

/* ---- joining an existing cluster ----------------------------------------- */

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
		watch_unlink(q);
		finish(q, 503, err_json("server is shutting down; watch another server"));
	}
	while (s->held)
		held_rerun(s->held); /* s->stopping: answered "shutting down" */
	for (struct job *j = s->jobs, *next; j; j = next) {
		next = j->next;
		struct req *q = j->q;
		if (!q)
			continue;
		job_detach(q);
		finish(q, 503, err_json("server is shutting down; retry another server"));
	}
	for (int i = 0; i < 3 && s->mhd; i++)
		MHD_run(s->mhd);
	uv_poll_stop(&s->mhd_poll);
	uv_close((uv_handle_t *)&s->mhd_poll, closed_noop);
	MHD_stop_daemon(s->mhd);
	s->mhd = NULL;
	uv_close((uv_handle_t *)&s->mhd_timer, closed_noop);
	uv_close((uv_handle_t *)&s->watch_timer, closed_noop);
	uv_close((uv_handle_t *)&s->admit_timer, closed_noop);
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
	uv_timer_init(&s->loop, &s->admit_timer);
	s->admit_timer.data = s;
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
	iod_raft_member_set_on_apply(s->node, watchers_wake, s);
	iod_raft_member_set_on_leader(s->node, leader_known, s);
	rc = mhd_start(s, e);
	if (rc)
		goto fail;
	uv_timer_start(&s->watch_timer, watch_timer_cb, 50, 50);
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
		shared_unref(s->wcache_store.slot[i].text);
	free(s);
	return 0;
fail:
	/* raft may hold the loop's handles: leave without tearing down (we exit) */
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	return rc;
}
