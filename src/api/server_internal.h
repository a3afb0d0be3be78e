/*
 * server_internal.h: the private structures of `iod server`'s HTTP API
 * (src/api/server*.c) and the functions its files share (named api__x).
 * Everything here runs on the server's one libuv loop thread, except a
 * job's worker function (server_job.c), which touches only its job.
 */
#ifndef IOD_API_SERVER_INTERNAL_H
#define IOD_API_SERVER_INTERNAL_H

#include "auth.h"
#include "validate.h"
#include "iod/api.h"
#include "iod/ctrl.h"

#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <time.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
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
struct wenc;

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

/* One HTTP request (MHD's per-connection context). */
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
	bool parsed;                     /* its large body is back from the worker */
	json_t *body_value;              /* ... parsed (owned), or NULL with body_error */
	json_t *body_error;              /* ... why it did not parse (owned) */
	char *body_cmd;                  /* ... a txn's or a put's command, encoded there
	                                    (owned) */
	int txn_status;                  /* ... or why not (400, 413; 0 = fine) */
	size_t body_counted;             /* bytes of body counted in srv->body_bytes */
	unsigned body_bucket;            /* its client's slot in srv->client_body_bytes */
	bool body_refused;               /* over the buffered-bodies limits: 503 at the end */
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
	struct wenc *wenc;             /* its answer is being serialised off the loop */
	struct shared_text *pending;   /* its answer, serialised, waiting its turn (a ref) */
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
	/* the per-write trace (CLOCK_MONOTONIC ns, 0 = not reached): the phase
	 * histograms on /metrics, and the answer's "trace" with ?trace=1 */
	bool trace;            /* ?trace=1: the answer carries the stamps */
	uint64_t t_head_ns;    /* request head parsed (the handler's first call) */
	uint64_t t_propose_ns; /* proposed (iod_raft_member_trace) */
	uint64_t t_flush_ns;   /* its entry handed to raft (group commit) */
	uint64_t t_apply_ns;   /* committed and applied */
	uint64_t t_answer_ns;  /* answer queued to MHD */
};

/* Phases of a write on the leader (the per-write trace), see api__wp_record. */
enum api_write_phase {
	API_WP_READ,   /* head parsed -> proposed (body, routing, encoding) */
	API_WP_BATCH,  /* proposed -> handed to raft (group-commit wait) */
	API_WP_COMMIT, /* handed to raft -> committed and applied (disk, quorum) */
	API_WP_ANSWER, /* applied -> answer queued (resume, the next MHD_run) */
	API_WP_SEND,   /* answer queued -> MHD done sending it */
	API_WP_TOTAL,  /* head parsed -> sent */
	API_WP_COUNT
};
#define API_WP_BUCKETS 14

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
	bool kept_alive;                 /* a request answered on it: PHASE_HEAD is idle */
	struct conn_ctx *prev, *next;    /* server's list links */
	int last_status;                 /* status of the last answer queued */
	bool have_cert_id;               /* cert_id is valid */
	struct iod_sec_identity cert_id; /* from the client certificate */
	uint64_t cert_not_after_s;       /* ... valid until (Unix s): re-checked after */
	char remote[IOD_ADDR_MAX];       /* peer address */
};

struct server {
	struct iod_server_config cfg;                          /* as started */
	size_t body_bytes;                                     /* request bodies held */
	size_t client_body_bytes[IOD_API_BODY_CLIENT_BUCKETS]; /* ... by client address hash */
	uint64_t bodies_refused;                               /* over those limits */
	uv_loop_t loop;                                        /* the one loop */
	struct iod_raft_member *node;                          /* raft + state */
	struct MHD_Daemon *mhd;                                /* HTTP daemon */
	uv_poll_t mhd_poll;                                    /* MHD's epoll fd */
	uv_timer_t mhd_timer;                                  /* MHD's timeouts */
	uv_idle_t mhd_idle;              /* MHD run on the next turn (kicks) */
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
	uv_idle_t admit_idle;    /* answers waiting watchers when a large one is sent */
	uint64_t watch_shared;   /* watch answers served from wcache */
	struct wenc *wencs;      /* watch answers being serialised off the loop */
	uint32_t wencs_n;        /* ... how many (<= IOD_API_WATCH_ENCODES_MAX) */
	uint64_t watch_encoded;  /* watch answers serialised off the loop */
	uint64_t wenc_max_us;    /* ... the longest (worker time) */
	uint64_t mhd_runs;       /* MHD_run calls on the loop (reads, handlers, sends) */
	uint64_t mhd_run_us;     /* ... their total time */
	uint64_t mhd_run_max_us; /* ... the longest */
	uint64_t mhd_run_slow;   /* ... over 5 ms */
	struct iod_api_sec sec;  /* TLS material, authentication, audit (auth.c) */
	struct tel_entry *tel;   /* node telemetry summaries (memory only, not Raft) */
	uint32_t tel_n;          /* entries in tel */
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
	uint64_t bodies_parsed;       /* large bodies parsed off the loop */
	uint64_t deploy_max_us;       /* longest deploy plan's worker time */
	/* committed writes' phases (histograms, microseconds; +Inf last) */
	uint64_t wp_bucket[API_WP_COUNT][API_WP_BUCKETS + 1];
	uint64_t wp_sum_us[API_WP_COUNT]; /* ... their sums */
	uint64_t wp_max_us[API_WP_COUNT]; /* ... the slowest */
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
	bool deploy;                  /* a deploy plan (else a list or a parse) */
	bool parse;                   /* a large body parsed (q's body moves here) */
	bool txn;                     /* ... a txn's: checked and encoded there too */
	json_t *parsed;               /* worker: the value (parse), or NULL */
	json_t *parse_err;            /* worker: why not */
	int txn_status;               /* worker: txn refused with this status (or 0) */
	bool put;                     /* a put's: its command encoded there too */
	enum iod_state_kind put_kind; /* ... its kind */
	char put_name[IOD_NAME_MAX];  /* ... name */
	uint64_t put_lease;           /* ... lease (0 = none) */
	int64_t put_prev;             /* ... prev_rev (-1 = none) */
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

static inline uint64_t mono_ms(void)
{
	return iod_clock_now_ns() / IOD_NS_PER_MS;
}

/* server.c: connection deadlines, answers, MHD */
void api__conns_sweep(struct server *s, uint64_t now);
MHD_RESULT api__queue_json(struct server *s, struct MHD_Connection *c, int status, json_t *j);
json_t *api__err_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
MHD_RESULT api__queue_err(struct server *s, struct MHD_Connection *c, int status, json_t *j);
int api__code_for(int err);
void api__finish(struct req *q, int status, json_t *answer);
void api__mhd_kick(struct server *s);

/* server_write.c: writes, redirects, fenced reads */
json_t *api__not_leader_json(struct server *s);
void api__held_unlink(struct req *q);
bool api__hold(struct req *q);
MHD_RESULT api__not_leader(struct req *q);
void api__held_rerun(struct req *q);
void api__leader_known(void *data);
MHD_RESULT api__propose(struct req *q, char *cmd);
bool api__query_u64(struct MHD_Connection *c, const char *key, uint64_t *out, bool *bad);
json_t *api__body_json(struct req *q, json_t **err);
MHD_RESULT api__do_put(struct req *q, enum iod_state_kind k, const char *name);
MHD_RESULT api__do_delete(struct req *q, enum iod_state_kind k, const char *name);
MHD_RESULT api__do_txn(struct req *q);
MHD_RESULT api__do_lease(struct req *q, const char *method, const char *id_text);
void api__deploy_turn_release(struct req *q);
MHD_RESULT api__do_deploy(struct req *q);
MHD_RESULT api__do_members(struct req *q, const char *method, const char *id_text);
bool api__wants_fence(struct MHD_Connection *c);
MHD_RESULT api__fenced_read(struct req *q, enum iod_state_kind k, bool list);

/* server_watch.c: watches */
void api__shared_unref(void *cls);
void api__watch_unlink(struct req *q);
void api__large_release(struct req *q);
MHD_RESULT api__queue_shared(struct server *s, struct MHD_Connection *c, int status,
                             struct shared_text *t);
void api__watchers_wake(void *data);
void api__watch_timer_cb(uv_timer_t *t);
MHD_RESULT api__do_watch(struct req *q, enum iod_state_kind k, bool all);

/* server_job.c: work off the loop */
void api__deploy_turn_end(struct server *s);
void api__job_start_next(struct server *s);
MHD_RESULT api__job_list(struct req *q, enum iod_state_kind k);
MHD_RESULT api__job_deploy(struct req *q);
MHD_RESULT api__job_parse(struct req *q, bool txn);
MHD_RESULT api__job_parse_put(struct req *q, enum iod_state_kind k, const char *name,
                              uint64_t lease, int64_t prev);
char *api__txn_encode(json_t *j, int *status, json_t **err);
void api__job_detach(struct req *q);

/* server_sec.c: security */
struct conn_ctx *api__conn_ctx_of(struct MHD_Connection *c);
bool api__access_ok(struct req *q, const char *url, const char *method, MHD_RESULT *rc);
bool api__sees_sensitive(const struct req *q);
MHD_RESULT api__do_whoami(struct req *q);
/* POST /v1/extender/{filter,prioritize} (server_extender.c) */
MHD_RESULT api__do_extender(struct req *q, const char *method, const char *verb);
MHD_RESULT api__do_ca(struct req *q);
MHD_RESULT api__do_audit(struct req *q);
MHD_RESULT api__do_certificate(struct req *q);
MHD_RESULT api__do_token_create(struct req *q);
MHD_RESULT api__do_secret_value(struct req *q, const char *name);
MHD_RESULT api__do_secret_create(struct req *q);

#endif
