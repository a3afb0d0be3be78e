/*
 * rio.c: iod's own raft_io for canonical raft's core: the log of wal.c on a
 * worker thread, a TCP transport, the tick timer and time, on a libuv loop.
 *
 * Why not libraft's libuv backend (raft_uv): 0.15 is archived upstream and
 * its backend is where the control plane's crash paths were (SIGSEGV on a
 * truncated open segment, strlen(NULL) connecting to a server whose address
 * it lost, "raft start: " with no reason when the port is taken), and it set
 * damaged segments aside and started empty. raft's core (election,
 * replication, membership) is kept: it reaches disk, network and time only
 * through struct raft_io, which this file implements.
 *
 * Disk: append, truncate and snapshot_put are queued in raft's order and run
 * one batch at a time on libuv's thread pool (consecutive appends share one
 * write and one fdatasync); their callbacks come back on the loop in order.
 * Term and vote are stored synchronously, as raft requires.
 *
 * Network: one outgoing connection per peer, opened on the first send,
 * announced by a handshake (id, address), then length-prefixed frames. A
 * send never fails synchronously (raft would stop on an error returned from
 * a receive handler); failures come back through the callback, and every
 * failure is logged once with its reason. Queues are bounded
 * (IOD_RAFT_SEND_QUEUE_BYTES_MAX); frames over IOD_RAFT_MSG_MAX are refused
 * before anything is allocated.
 *
 * TLS (with credentials, which `iod server --pki` always gives unless
 * --raft-plaintext): every connection both ways is mutual TLS 1.3/1.2 with
 * the cluster CA (src/sec/tls.c, buffered sessions: libuv moves the
 * ciphertext). Before any Raft byte is read or written the peer must have
 * presented a certificate of the cluster naming a server
 * (spiffe://<cluster>/server/<id>); an outgoing connection also requires
 * the id it dialled, and an incoming one a handshake naming the id of its
 * certificate. Anything else (a plaintext client, another CA, a node's or a
 * user's certificate) is logged and closed.
 *
 * It never decides anything about Raft: raft's core does.
 */
#include "internal.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <raft.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "iod/sec.h"

#define HELLO_MAGIC 0x31485249u /* "IRH1" */
#define FRAME_MAGIC 0x314d5249u /* "IRM1" */
#define FRAME_HDR_BYTES 16
#define HELLO_FIXED_BYTES 18
#define READ_CHUNK 65536
/* Frames outside raft's message types: a recovering server asks a peer for
 * a copy of its durable log (--recover-from-peers), the peer answers. */
#define FRAME_LOG_REQUEST 100
#define FRAME_LOG_COPY 101
#define LOG_MAGIC 0x314c5249u /* "IRL1" */

enum { OP_APPEND = 1, OP_TRUNCATE, OP_SNAP_PUT };

/* One queued disk operation, in raft's order. */
struct rio_op {
	struct rio_op *next;              /* FIFO */
	int kind;                         /* OP_* */
	int status;                       /* result (raft code) */
	struct raft_io_append *append;    /* OP_APPEND: raft's request */
	const struct raft_entry *entries; /* its entries (raft keeps them) */
	unsigned n;                       /* how many */
	uint64_t index;                   /* OP_TRUNCATE: first index removed */
	struct raft_io_snapshot_put *put; /* OP_SNAP_PUT: raft's request */
	const struct raft_snapshot *snap; /* the snapshot (raft keeps it) */
	unsigned trailing;                /* entries to keep before it; 0 = installed */
	struct iod_state_preparsed **pre; /* OP_APPEND: its commands parsed (worker), or NULL */
};

struct rio_get {
	uv_work_t work;                   /* on the thread pool */
	struct rio *r;                    /* owner */
	struct raft_io_snapshot_get *req; /* raft's request */
	struct raft_snapshot *snap;       /* result */
	struct iod_err err;               /* why not */
};

enum { PEER_IDLE, PEER_CONNECTING, PEER_UP, PEER_CLOSING };

/* A connection's TLS session and the ciphertext it produced that waits for
 * one uv_write (tls_flush). */
struct tls_side {
	struct iod_sec_tls *tls; /* NULL: plaintext */
	unsigned char *ob;       /* ciphertext to write */
	size_t on, ocap;         /* its bytes, its capacity */
};

struct rio_send {
	uv_write_t w;             /* libuv's request */
	struct rio_send *next;    /* pending list (connecting) / failed list */
	struct rio_peer *peer;    /* where to */
	struct raft_io_send *req; /* raft's request */
	raft_io_send_cb cb;       /* raft's callback */
	int status;               /* for the failed list */
	unsigned char *head;      /* frame header + fixed fields (owned) */
	uv_buf_t bufs[4];         /* head, then raft's memory (entries: see nbufs) */
	uv_buf_t *bufv;           /* bufs, or a malloc'd array for many entries */
	unsigned nbufs;           /* in bufv */
	size_t bytes;             /* total, for the queue bound */
};

struct rio_peer {
	struct rio_peer *next;      /* list */
	struct rio *r;              /* owner */
	uint64_t id;                /* raft id */
	char addr[IOD_ADDR_MAX];    /* host:port */
	uv_tcp_t tcp;               /* valid unless PEER_IDLE */
	uv_connect_t creq;          /* connect request */
	int state;                  /* PEER_* */
	struct rio_send *pend_head; /* sends waiting for the connection */
	struct rio_send *pend_tail; /* their tail */
	size_t queued_bytes;        /* pending + written but not completed */
	uint64_t fail_ms;           /* loop time of the last failure */
	char why[160];              /* the last failure, logged once */
	bool was_up;                /* connected once (the first is logged) */
	uint64_t connect_ms;        /* loop time the connection was started */
	unsigned char hello[HELLO_FIXED_BYTES + IOD_ADDR_MAX]; /* handshake */
	uv_write_t hello_w;                                    /* its write */
	char rbuf[READ_CHUNK];                                 /* reads: EOF, TLS records */
	struct tls_side ts;                                    /* with TLS */
};

enum { CONN_HELLO, CONN_HDR, CONN_BODY };

struct rio_conn {
	struct rio_conn *next;                               /* list */
	struct rio *r;                                       /* owner */
	uv_tcp_t tcp;                                        /* accepted */
	int stage;                                           /* CONN_* */
	bool closing;                                        /* uv_close called */
	unsigned char hdr[HELLO_FIXED_BYTES + IOD_ADDR_MAX]; /* handshake / frame header */
	size_t hdr_got;                                      /* bytes of hdr */
	size_t hdr_need;                                     /* bytes hdr must hold */
	uint64_t id;                                         /* the peer's id (handshake) */
	char addr[IOD_ADDR_MAX + 1];                         /* its address (handshake) */
	uint16_t type;                                       /* frame type */
	unsigned char *body;                                 /* frame payload (raft_malloc'd) */
	size_t body_len, body_got;                           /* its size, received */
	char rbuf[READ_CHUNK];                               /* libuv reads here */
	struct tls_side ts;                                  /* with TLS */
	char pbuf[16384];                                    /* decrypted TLS records */
	char from[IOD_ADDR_MAX + 8];                         /* the remote address */
	uint64_t accepted_ms;                                /* loop time of the accept */
};

struct rio {
	struct raft_io *io;            /* the vtable this implements */
	uv_loop_t *loop;               /* not owned */
	struct iod_wal *wal;           /* the log */
	struct iod_wal_load ld;        /* loaded at init, handed to raft by load */
	uint64_t id;                   /* this server */
	char addr[IOD_ADDR_MAX];       /* its Raft address */
	raft_io_tick_cb tick;          /* raft's */
	raft_io_recv_cb recv;          /* raft's */
	uv_timer_t timer;              /* the tick */
	uv_tcp_t listener;             /* incoming connections */
	uv_idle_t failer;              /* fires failed sends' callbacks */
	struct rio_send *failed;       /* sends to fail from the idle handle */
	struct rio_peer *peers;        /* outgoing */
	struct rio_conn *conns;        /* incoming */
	unsigned conns_n;              /* how many */
	struct rio_op *q_head;         /* disk ops waiting */
	struct rio_op *q_tail;         /* their tail */
	struct rio_op *in_worker;      /* the batch being run */
	uv_work_t work;                /* its work request */
	unsigned gets;                 /* snapshot_get in flight */
	unsigned works;                /* async_work in flight (FSM snapshots) */
	bool started;                  /* io->start ran */
	bool closing;                  /* io->close ran */
	raft_io_close_cb close_cb;     /* raft's */
	unsigned handles;              /* uv handles open */
	uint64_t rng;                  /* xorshift state */
	uint32_t retry_ms;             /* between connection attempts to a peer */
	struct iod_sec_tls_creds *tls; /* mutual TLS (not owned); NULL = plaintext */
	struct iod_rio_prep prep;      /* large commands parsed after their write */
	bool (*revoked)(void *data, const char *server); /* iod revoke server (NULL: none) */
	void *revoked_data;                              /* its argument */
	char refused_why[200];                           /* the last refusal logged */
	uint64_t refused_ms;                             /* when (loop time) */
	uint64_t sweep_ms;           /* last handshake-deadline sweep (loop time) */
	uint64_t handshake_timeouts; /* connections closed by that deadline */
	unsigned refused_n;          /* the same refusals not logged since */
};

static struct rio *rio_of(struct raft_io *io)
{
	return io->impl;
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void maybe_closed(struct rio *r);

/* ---- addresses ---------------------------------------------------------- */

/* "host:port" or "[v6]:port" to a socket address. */
static int resolve(const char *addr, struct sockaddr_storage *ss, char *why, size_t why_cap)
{
	char host[IOD_ADDR_MAX];
	const char *colon = strrchr(addr, ':');
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;

	if (!colon || colon == addr || !colon[1] || (size_t)(colon - addr) >= sizeof(host)) {
		snprintf(why, why_cap, "\"%s\" is not HOST:PORT", addr);
		return -EINVAL;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = 0;
	}
	int rv = getaddrinfo(host, colon + 1, &hints, &res);
	if (rv || !res) {
		snprintf(why, why_cap, "cannot resolve \"%s\": %s", addr, gai_strerror(rv));
		return -EINVAL;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

/* ---- disk --------------------------------------------------------------- */

static void disk_pump(struct rio *r);

/* Worker: parse op's large commands (entries from index first) for their
 * apply (iod_state_preparse), while the loop goes on. */
static void prepare(struct rio_op *op, uint64_t first)
{
	for (unsigned i = 0; i < op->n; i++) {
		const struct raft_entry *en = &op->entries[i];
		if (en->type != RAFT_COMMAND || en->buf.len < IOD_STATE_PREPARSE_MIN)
			continue;
		if (!op->pre && !(op->pre = calloc(op->n, sizeof(*op->pre))))
			return;
		op->pre[i] = iod_state_preparse(en->buf.base, en->buf.len, first + i);
	}
}

static void disk_work(uv_work_t *w)
{
	struct rio *r = w->data;
	struct rio_op *op = r->in_worker;

	while (op) {
		if (op->kind == OP_APPEND) {
			/* consecutive appends: one write, one fdatasync */
			unsigned total = 0;
			struct rio_op *end = op;
			while (end && end->kind == OP_APPEND) {
				total += end->n;
				end = end->next;
			}
			struct raft_entry *all = total ? malloc(total * sizeof(*all)) : NULL;
			int rv = total && !all ? -ENOMEM : 0;
			uint64_t first = iod_wal_next_index(r->wal);
			if (all) {
				unsigned k = 0;
				for (struct rio_op *o = op; o != end; o = o->next) {
					memcpy(all + k, o->entries, o->n * sizeof(*all));
					k += o->n;
				}
				rv = iod_wal_append(r->wal, all, total);
				free(all);
			}
			if (rv)
				IOD_ERROR("raft", "appending %u entries to the log: %s", total,
				          strerror(-rv));
			for (struct rio_op *o = op; o != end; o = o->next) {
				o->status = rv ? RAFT_IOERR : 0;
				if (!rv && r->prep.ready)
					prepare(o, first);
				first += o->n;
			}
			op = end;
			continue;
		}
		int rv = op->kind == OP_TRUNCATE
		             ? iod_wal_truncate(r->wal, op->index)
		             : iod_wal_snapshot_put(r->wal, op->trailing, op->snap);
		if (rv)
			IOD_ERROR("raft", "%s: %s",
			          op->kind == OP_TRUNCATE ? "truncating the log"
			                                  : "storing a snapshot",
			          strerror(-rv));
		op->status = rv ? (rv == -E2BIG ? RAFT_TOOBIG : RAFT_IOERR) : 0;
		op = op->next;
	}
}

/* Loop: hand op's parsed commands on (before raft hears the append is
 * done, so before their commit); a truncation or an installed snapshot
 * drops every one kept (their buffers go). */
static void op_prepared(struct rio *r, struct rio_op *op, int status)
{
	if (op->kind == OP_APPEND) {
		for (unsigned i = 0; op->pre && i < op->n; i++) {
			if (op->pre[i] && !status && r->prep.ready)
				r->prep.ready(r->prep.data, op->pre[i]);
			else
				iod_state_preparsed_free(op->pre[i]);
		}
		free(op->pre);
		op->pre = NULL;
	} else if ((op->kind == OP_TRUNCATE || !op->trailing) && r->prep.flush) {
		r->prep.flush(r->prep.data);
	}
}

void iod_rio_set_prep(struct raft_io *io, const struct iod_rio_prep *p)
{
	rio_of(io)->prep = *p;
}

void iod_rio_set_revoked(struct raft_io *io, bool (*fn)(void *data, const char *server), void *data)
{
	struct rio *r = rio_of(io);
	r->revoked = fn;
	r->revoked_data = data;
}

static void op_done(struct rio_op *op, int status)
{
	if (op->kind == OP_APPEND && op->append->cb)
		op->append->cb(op->append, status);
	else if (op->kind == OP_SNAP_PUT && op->put->cb)
		op->put->cb(op->put, status);
	free(op);
}

static void disk_after(uv_work_t *w, int status)
{
	struct rio *r = w->data;
	struct rio_op *op = r->in_worker;

	r->in_worker = NULL;
	while (op) {
		struct rio_op *next = op->next;
		op_prepared(r, op, status ? RAFT_CANCELED : op->status);
		op_done(op, status ? RAFT_CANCELED : op->status);
		op = next;
	}
	disk_pump(r);
	maybe_closed(r);
}

static void disk_pump(struct rio *r)
{
	if (r->in_worker || !r->q_head)
		return;
	if (r->closing) {
		while (r->q_head) {
			struct rio_op *op = r->q_head;
			r->q_head = op->next;
			op_done(op, RAFT_CANCELED);
		}
		r->q_tail = NULL;
		return;
	}
	r->in_worker = r->q_head;
	r->q_head = r->q_tail = NULL;
	r->work.data = r;
	int rv = uv_queue_work(r->loop, &r->work, disk_work, disk_after);
	IOD_ASSERT(rv == 0);
}

static void disk_queue(struct rio *r, struct rio_op *op)
{
	op->next = NULL;
	if (r->q_tail)
		r->q_tail->next = op;
	else
		r->q_head = op;
	r->q_tail = op;
	disk_pump(r);
}

static int io_append(struct raft_io *io, struct raft_io_append *req,
                     const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
	struct rio *r = rio_of(io);
	struct rio_op *op;

	if (r->closing)
		return RAFT_CANCELED;
	for (unsigned i = 0; i < n; i++)
		if (entries[i].buf.len > IOD_RAFT_ENTRY_MAX)
			return RAFT_TOOBIG;
	if (!(op = calloc(1, sizeof(*op))))
		return RAFT_NOMEM;
	req->cb = cb;
	op->kind = OP_APPEND;
	op->append = req;
	op->entries = entries;
	op->n = n;
	disk_queue(r, op);
	return 0;
}

static int io_truncate(struct raft_io *io, raft_index index)
{
	struct rio *r = rio_of(io);
	struct rio_op *op;

	if (r->closing)
		return RAFT_CANCELED;
	if (!(op = calloc(1, sizeof(*op))))
		return RAFT_NOMEM;
	op->kind = OP_TRUNCATE;
	op->index = index;
	disk_queue(r, op);
	return 0;
}

static int io_snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
                           const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
	struct rio *r = rio_of(io);
	struct rio_op *op;

	if (r->closing)
		return RAFT_CANCELED;
	if (!(op = calloc(1, sizeof(*op))))
		return RAFT_NOMEM;
	req->cb = cb;
	op->kind = OP_SNAP_PUT;
	op->put = req;
	op->snap = snapshot;
	op->trailing = trailing;
	disk_queue(r, op);
	return 0;
}

static void get_work(uv_work_t *w)
{
	struct rio_get *g = w->data;
	if (iod_wal_snapshot_get(g->r->wal, &g->snap, &g->err))
		g->snap = NULL;
}

static void get_after(uv_work_t *w, int status)
{
	struct rio_get *g = w->data;
	struct rio *r = g->r;

	if (!g->snap && !status)
		IOD_ERROR("raft", "reading the snapshot to send: %s", g->err.msg);
	r->gets--;
	g->req->cb(g->req, g->snap, g->snap ? 0 : RAFT_IOERR);
	free(g);
	maybe_closed(r);
}

static int io_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                           raft_io_snapshot_get_cb cb)
{
	struct rio *r = rio_of(io);
	struct rio_get *g;

	if (r->closing)
		return RAFT_CANCELED;
	if (!(g = calloc(1, sizeof(*g))))
		return RAFT_NOMEM;
	req->cb = cb;
	g->r = r;
	g->req = req;
	g->work.data = g;
	if (uv_queue_work(r->loop, &g->work, get_work, get_after)) {
		free(g);
		return RAFT_IOERR;
	}
	r->gets++;
	return 0;
}

/* raft's async work (io version 2): the FSM's snapshot serialised on
 * libuv's thread pool while the loop goes on; its callback runs on the loop,
 * also when the I/O is closing (raft then only releases the snapshot). */
struct rio_work {
	uv_work_t work;                 /* on the thread pool */
	struct rio *r;                  /* owner */
	struct raft_io_async_work *req; /* raft's request */
	raft_io_async_work_cb cb;       /* raft's callback */
	int status;                     /* req->work's result */
};

static void work_run(uv_work_t *w)
{
	struct rio_work *k = w->data;
	k->status = k->req->work(k->req);
}

static void work_after(uv_work_t *w, int status)
{
	struct rio_work *k = w->data;
	struct rio *r = k->r;

	r->works--;
	k->cb(k->req, status || r->closing ? RAFT_CANCELED : k->status);
	free(k);
	maybe_closed(r);
}

static int io_async_work(struct raft_io *io, struct raft_io_async_work *req,
                         raft_io_async_work_cb cb)
{
	struct rio *r = rio_of(io);
	struct rio_work *k;

	if (r->closing)
		return RAFT_CANCELED;
	if (!(k = calloc(1, sizeof(*k))))
		return RAFT_NOMEM;
	k->r = r;
	k->req = req;
	k->cb = cb;
	k->work.data = k;
	if (uv_queue_work(r->loop, &k->work, work_run, work_after)) {
		free(k);
		return RAFT_IOERR;
	}
	r->works++;
	return 0;
}

static int io_set_term(struct raft_io *io, raft_term term)
{
	struct rio *r = rio_of(io);
	int rv = iod_wal_meta_set(r->wal, term, 0);
	if (rv) {
		snprintf(io->errmsg, sizeof(io->errmsg), "storing term %llu: %s",
		         (unsigned long long)term, strerror(-rv));
		return RAFT_IOERR;
	}
	return 0;
}

static int io_set_vote(struct raft_io *io, raft_id id)
{
	struct rio *r = rio_of(io);
	uint64_t term, vote;
	iod_wal_meta(r->wal, &term, &vote);
	int rv = iod_wal_meta_set(r->wal, term, id);
	if (rv) {
		snprintf(io->errmsg, sizeof(io->errmsg), "storing vote %llu: %s",
		         (unsigned long long)id, strerror(-rv));
		return RAFT_IOERR;
	}
	return 0;
}

static int io_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                   struct raft_snapshot **snapshot, raft_index *start_index,
                   struct raft_entry *entries[], size_t *n_entries)
{
	struct rio *r = rio_of(io);

	*term = r->ld.term;
	*voted_for = r->ld.vote;
	*snapshot = r->ld.snapshot;
	*start_index = r->ld.start_index ? r->ld.start_index : 1;
	*entries = r->ld.entries;
	*n_entries = r->ld.n;
	memset(&r->ld, 0, sizeof(r->ld)); /* raft owns them now */
	return 0;
}

static int io_bootstrap(struct raft_io *io, const struct raft_configuration *conf)
{
	struct rio *r = rio_of(io);
	struct raft_buffer buf;
	int rv;

	if (!iod_wal_empty(r->wal) || r->ld.n)
		return RAFT_CANTBOOTSTRAP;
	rv = iod_wal_bootstrap(r->wal, conf);
	if (rv) {
		snprintf(io->errmsg, sizeof(io->errmsg), "bootstrap: %s", strerror(-rv));
		return RAFT_IOERR;
	}
	/* what load will now hand to raft: the configuration entry */
	if (raft_configuration_encode(conf, &buf))
		return RAFT_NOMEM;
	r->ld.entries = raft_malloc(sizeof(*r->ld.entries));
	if (!r->ld.entries) {
		raft_free(buf.base);
		return RAFT_NOMEM;
	}
	r->ld.entries[0] = (struct raft_entry){.term = 1, .type = RAFT_CHANGE, .buf = buf};
	r->ld.n = 1;
	r->ld.start_index = 1;
	r->ld.term = 1;
	r->ld.vote = 0;
	return 0;
}

static int io_recover(struct raft_io *io, const struct raft_configuration *conf)
{
	(void)conf;
	snprintf(io->errmsg, sizeof(io->errmsg),
	         "forcing a configuration is not supported: use iod server --recover-from-peers");
	return RAFT_NOTFOUND;
}

static raft_time io_time(struct raft_io *io)
{
	return uv_now(rio_of(io)->loop);
}

static int io_random(struct raft_io *io, int min, int max)
{
	struct rio *r = rio_of(io);
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return max > min ? min + (int)(r->rng % (uint64_t)(max - min)) : min;
}

static int io_init(struct raft_io *io, raft_id id, const char *address)
{
	struct rio *r = rio_of(io);
	r->id = id;
	iod_strlcpy(r->addr, address, sizeof(r->addr));
	r->rng ^= id * 0x9e3779b97f4a7c15ull;
	return 0;
}

/* ---- transport: TLS (buffered sessions: libuv moves the ciphertext) ------ */

static void send_written(uv_write_t *w, int status);

/* The session's ciphertext goes to ts->ob until tls_flush writes it. */
static int tls_push(void *ctx, const void *buf, size_t n)
{
	struct tls_side *ts = ctx;
	if (ts->on + n > ts->ocap) {
		size_t cap = ts->ocap ? ts->ocap : 4096;
		while (cap < ts->on + n)
			cap *= 2;
		unsigned char *b = realloc(ts->ob, cap);
		if (!b)
			return -ENOMEM;
		ts->ob = b;
		ts->ocap = cap;
	}
	memcpy(ts->ob + ts->on, buf, n);
	ts->on += n;
	return 0;
}

struct tls_write {
	uv_write_t w;          /* libuv's request */
	unsigned char *buf;    /* the ciphertext (owned) */
	struct rio_send *send; /* raft's send it completes, or NULL */
};

static void tls_written(uv_write_t *w, int status)
{
	struct tls_write *tw = w->data;
	free(tw->buf);
	if (tw->send) {
		tw->send->w.data = tw->send;
		send_written(&tw->send->w, status);
	}
	free(tw);
}

/* Write the ciphertext produced so far; send (or NULL) completes once it is
 * written. 0, or a libuv error (send then not completed). */
static int tls_flush(struct tls_side *ts, uv_stream_t *st, struct rio_send *send)
{
	if (!ts->on && !send)
		return 0;
	struct tls_write *tw = calloc(1, sizeof(*tw));
	if (!tw)
		return UV_ENOMEM;
	uv_buf_t b = uv_buf_init((char *)ts->ob, (unsigned)ts->on);
	tw->buf = ts->ob;
	tw->send = send;
	tw->w.data = tw;
	ts->ob = NULL;
	ts->on = ts->ocap = 0;
	int rv = uv_write(&tw->w, st, &b, 1, tls_written);
	if (rv) {
		free(tw->buf);
		free(tw);
	}
	return rv;
}

/* Encrypt bufs into ts->ob; small pieces are sent as one record. */
static int tls_encrypt(struct tls_side *ts, const uv_buf_t *bufs, unsigned n, struct iod_err *e)
{
	unsigned char stage[16384];
	size_t staged = 0;
	for (unsigned i = 0; i <= n; i++) {
		bool last = i == n;
		size_t len = last ? 0 : bufs[i].len;
		if (!last && staged + len <= sizeof(stage)) {
			memcpy(stage + staged, bufs[i].base, len);
			staged += len;
			continue;
		}
		/* the stage first, then (when it does not fit) this piece whole */
		for (int k = 0; k < 2; k++) {
			const unsigned char *p =
			    k ? (const unsigned char *)(last ? NULL : bufs[i].base) : stage;
			size_t left = k ? len : staged;
			while (left) {
				unsigned want = 0;
				long w = iod_sec_tls_write(ts->tls, p, left, &want, e);
				if (w == -EAGAIN)
					return iod_err_set(e, -EIO, "TLS write blocked");
				if (w <= 0)
					return w < 0 ? (int)w : -EPIPE;
				p += w;
				left -= (size_t)w;
			}
		}
		staged = 0;
	}
	return 0;
}

static void tls_side_free(struct tls_side *ts)
{
	iod_sec_tls_close(ts->tls);
	free(ts->ob);
	memset(ts, 0, sizeof(*ts));
}

/* A Raft peer must be a server of the cluster, server want_id when it is
 * not 0. 0, or -EACCES with why in e. */
static int check_server(const struct rio *r, const struct iod_sec_cert_info *ci, uint64_t want_id,
                        struct iod_err *e)
{
	char who[IOD_NAME_MAX * 3], idb[24];
	if (ci->id.kind != IOD_SEC_KIND_SERVER) {
		iod_sec_identity_format(&ci->id, who, sizeof(who));
		return iod_err_set(e, -EACCES,
		                   "it presented the certificate of %s, not of a server of "
		                   "the cluster",
		                   who);
	}
	snprintf(idb, sizeof(idb), "%llu", (unsigned long long)want_id);
	if (want_id && strcmp(ci->id.name, idb))
		return iod_err_set(e, -EACCES,
		                   "it presented the certificate of server %s, not of server %s",
		                   ci->id.name, idb);
	if (r->revoked && r->revoked(r->revoked_data, ci->id.name))
		return iod_err_set(e, -EACCES,
		                   "server %s is revoked (`iod revoke server %s`; --undo lifts it)",
		                   ci->id.name, ci->id.name);
	return 0;
}

/* ---- transport: sending ------------------------------------------------- */

static void send_free(struct rio_send *s)
{
	free(s->head);
	if (s->bufv != s->bufs)
		free(s->bufv);
	free(s);
}

static void failer_cb(uv_idle_t *h)
{
	struct rio *r = h->data;
	struct rio_send *s = r->failed;

	r->failed = NULL;
	uv_idle_stop(h);
	while (s) {
		struct rio_send *next = s->next;
		if (s->cb)
			s->cb(s->req, s->status);
		send_free(s);
		s = next;
	}
}

/* Fail a send from the idle handle (never inside raft's call). */
static void send_fail_later(struct rio *r, struct rio_send *s, int status)
{
	if (uv_is_closing((uv_handle_t *)&r->failer)) {
		if (s->cb) /* closing: raft is past its own calls */
			s->cb(s->req, status);
		send_free(s);
		return;
	}
	s->status = status;
	s->next = r->failed;
	r->failed = s;
	uv_idle_start(&r->failer, failer_cb);
}

static void peer_note(struct rio_peer *p, const char *fmt, const char *detail)
{
	char why[sizeof(p->why)];
	snprintf(why, sizeof(why), fmt, detail);
	if (strcmp(why, p->why)) {
		IOD_WARN("raft", "server %llu (%s): %s", (unsigned long long)p->id, p->addr, why);
		iod_strlcpy(p->why, why, sizeof(p->why));
	}
}

static void peer_closed(uv_handle_t *h)
{
	struct rio_peer *p = h->data;
	struct rio *r = p->r;

	p->state = PEER_IDLE;
	tls_side_free(&p->ts);
	/* sends still waiting for the connection fail now */
	while (p->pend_head) {
		struct rio_send *s = p->pend_head;
		p->pend_head = s->next;
		p->queued_bytes -= s->bytes;
		s->next = NULL;
		if (s->cb)
			s->cb(s->req, RAFT_NOCONNECTION);
		send_free(s);
	}
	p->pend_tail = NULL;
	r->handles--;
	maybe_closed(r);
}

static void peer_close(struct rio_peer *p, const char *why)
{
	if (p->state == PEER_IDLE || p->state == PEER_CLOSING)
		return;
	if (why)
		peer_note(p, "connection lost: %s", why);
	p->fail_ms = uv_now(p->r->loop);
	p->state = PEER_CLOSING;
	uv_close((uv_handle_t *)&p->tcp, peer_closed);
}

static void send_written(uv_write_t *w, int status)
{
	struct rio_send *s = w->data;
	struct rio_peer *p = s->peer;

	p->queued_bytes -= s->bytes;
	if (status && status != UV_ECANCELED)
		peer_close(p, uv_strerror(status));
	if (s->cb)
		s->cb(s->req, status ? RAFT_NOCONNECTION : 0);
	send_free(s);
}

static void send_start(struct rio_peer *p, struct rio_send *s)
{
	s->w.data = s;
	int rv;
	if (p->ts.tls) {
		struct iod_err e = {0};
		if (tls_encrypt(&p->ts, s->bufv, s->nbufs, &e)) {
			p->queued_bytes -= s->bytes;
			peer_close(p, e.msg);
			send_fail_later(p->r, s, RAFT_NOCONNECTION);
			return;
		}
		rv = tls_flush(&p->ts, (uv_stream_t *)&p->tcp, s);
	} else {
		rv = uv_write(&s->w, (uv_stream_t *)&p->tcp, s->bufv, s->nbufs, send_written);
	}
	if (rv) {
		p->queued_bytes -= s->bytes;
		peer_close(p, uv_strerror(rv));
		send_fail_later(p->r, s, RAFT_NOCONNECTION);
	}
}

static void peer_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct rio_peer *p = h->data;
	(void)hint;
	*buf = uv_buf_init(p->rbuf, sizeof(p->rbuf));
}

static void peer_up(struct rio_peer *p);

/* The TLS handshake of an outgoing connection, one step per read. */
static void peer_tls_handshake(struct rio_peer *p)
{
	struct iod_err e = {0};
	unsigned want = 0;
	int rc = iod_sec_tls_handshake(p->ts.tls, &want, &e);
	if (tls_flush(&p->ts, (uv_stream_t *)&p->tcp, NULL)) {
		peer_close(p, "TLS handshake write failed");
		return;
	}
	if (rc == -EAGAIN)
		return;
	if (!rc)
		rc = check_server(p->r, iod_sec_tls_peer(p->ts.tls), p->id, &e);
	if (rc) {
		peer_note(p, "refused: %s", e.msg);
		p->fail_ms = uv_now(p->r->loop);
		peer_close(p, NULL);
		return;
	}
	peer_up(p);
}

static void peer_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct rio_peer *p = st->data;
	struct iod_err e = {0};

	if (nread < 0) {
		peer_close(p, nread == UV_EOF ? "closed by the peer" : uv_strerror((int)nread));
		return;
	}
	if (!p->ts.tls || !nread)
		return;
	if (iod_sec_tls_feed(p->ts.tls, buf->base, (size_t)nread)) {
		peer_close(p, "out of memory for TLS");
		return;
	}
	if (p->state == PEER_CONNECTING) {
		peer_tls_handshake(p);
		return;
	}
	/* the other way carries only TLS' own records (session tickets, key
	 * updates): read through them */
	for (;;) {
		char junk[4096];
		unsigned want = 0;
		long k = iod_sec_tls_read(p->ts.tls, junk, sizeof(junk), &want, &e);
		if (k == -EAGAIN)
			break;
		if (k <= 0) {
			peer_close(p, k == 0 ? "closed by the peer" : e.msg);
			return;
		}
	}
	if (tls_flush(&p->ts, st, NULL))
		peer_close(p, "TLS write failed");
}

static void hello_written(uv_write_t *w, int status)
{
	(void)w;
	(void)status; /* a failure shows on the next write or read */
}

static void peer_connected(uv_connect_t *c, int status)
{
	struct rio_peer *p = c->data;
	struct iod_err e = {0};

	if (p->state != PEER_CONNECTING)
		return;
	if (status) {
		peer_note(p, "cannot connect: %s", uv_strerror(status));
		peer_close(p, NULL);
		return;
	}
	uv_read_start((uv_stream_t *)&p->tcp, peer_alloc, peer_read);
	if (!p->r->tls) {
		peer_up(p);
		return;
	}
	if (iod_sec_tls_open_buffered(p->r->tls, true, tls_push, &p->ts, &p->ts.tls, &e)) {
		peer_note(p, "%s", e.msg);
		peer_close(p, NULL);
		return;
	}
	peer_tls_handshake(p); /* the ClientHello */
}

/* Connected (and with TLS, the peer proven): the handshake, then what waits. */
static void peer_up(struct rio_peer *p)
{
	if (p->why[0] || !p->was_up) {
		IOD_INFO("raft", "server %llu (%s): connected%s", (unsigned long long)p->id,
		         p->addr,
		         p->ts.tls ? " (mutual TLS, its certificate verified)" : " (plaintext)");
		p->why[0] = 0;
		p->was_up = true;
	}
	p->state = PEER_UP;
	size_t al = strlen(p->r->addr);
	put32(p->hello, HELLO_MAGIC);
	put32(p->hello + 4, 1);
	put64(p->hello + 8, p->r->id);
	p->hello[16] = (unsigned char)al;
	p->hello[17] = (unsigned char)(al >> 8);
	memcpy(p->hello + HELLO_FIXED_BYTES, p->r->addr, al);
	uv_buf_t hb = uv_buf_init((char *)p->hello, (unsigned)(HELLO_FIXED_BYTES + al));
	struct iod_err e = {0};
	if (p->ts.tls
	        ? tls_encrypt(&p->ts, &hb, 1, &e) || tls_flush(&p->ts, (uv_stream_t *)&p->tcp, NULL)
	        : uv_write(&p->hello_w, (uv_stream_t *)&p->tcp, &hb, 1, hello_written)) {
		peer_close(p, "handshake write failed");
		return;
	}
	while (p->pend_head && p->state == PEER_UP) {
		struct rio_send *s = p->pend_head;
		p->pend_head = s->next;
		if (!p->pend_head)
			p->pend_tail = NULL;
		s->next = NULL;
		send_start(p, s);
	}
}

static void peer_connect(struct rio_peer *p)
{
	struct sockaddr_storage ss;
	char why[160];
	int rv;

	if (resolve(p->addr, &ss, why, sizeof(why))) {
		peer_note(p, "%s", why);
		p->fail_ms = uv_now(p->r->loop);
		return;
	}
	uv_tcp_init(p->r->loop, &p->tcp);
	p->tcp.data = p;
	p->r->handles++;
	p->state = PEER_CONNECTING;
	p->connect_ms = uv_now(p->r->loop);
	uv_tcp_nodelay(&p->tcp, 1);
	p->creq.data = p;
	rv = uv_tcp_connect(&p->creq, &p->tcp, (struct sockaddr *)&ss, peer_connected);
	if (rv) {
		peer_note(p, "cannot connect: %s", uv_strerror(rv));
		peer_close(p, NULL);
	}
}

static struct rio_peer *peer_get(struct rio *r, uint64_t id, const char *addr)
{
	struct rio_peer *p;

	for (p = r->peers; p; p = p->next)
		if (p->id == id)
			break;
	if (p && strcmp(p->addr, addr)) {
		/* the server moved: a new connection to its new address */
		peer_close(p, "address changed");
		if (p->state != PEER_IDLE)
			return NULL; /* try again once closed */
		iod_strlcpy(p->addr, addr, sizeof(p->addr));
	}
	if (!p) {
		if (!(p = calloc(1, sizeof(*p))))
			return NULL;
		p->r = r;
		p->id = id;
		iod_strlcpy(p->addr, addr, sizeof(p->addr));
		p->next = r->peers;
		r->peers = p;
	}
	return p;
}

/* Encode m into s: s->head holds the fixed part, raft's buffers follow. */
static int encode(struct rio_send *s, const struct raft_message *m)
{
	unsigned char *h;
	size_t fixed = 0, tail = 0;

	switch (m->type) {
	case RAFT_IO_REQUEST_VOTE: fixed = 34; break;
	case RAFT_IO_REQUEST_VOTE_RESULT: fixed = 10; break;
	case RAFT_IO_APPEND_ENTRIES: fixed = 40 + 16 * (size_t)m->append_entries.n_entries; break;
	case RAFT_IO_APPEND_ENTRIES_RESULT: fixed = 24; break;
	case RAFT_IO_INSTALL_SNAPSHOT:
		fixed = 48 + iod_raft_conf_size(&m->install_snapshot.conf);
		break;
	case RAFT_IO_TIMEOUT_NOW: fixed = 24; break;
	default: return RAFT_MALFORMED;
	}
	if (m->type == RAFT_IO_APPEND_ENTRIES)
		for (unsigned i = 0; i < m->append_entries.n_entries; i++)
			tail += m->append_entries.entries[i].buf.len;
	if (m->type == RAFT_IO_INSTALL_SNAPSHOT)
		tail = m->install_snapshot.data.len;
	if (FRAME_HDR_BYTES + fixed + tail > IOD_RAFT_MSG_MAX)
		return RAFT_TOOBIG;
	if (!(h = s->head = calloc(1, FRAME_HDR_BYTES + fixed)))
		return RAFT_NOMEM;
	put32(h, FRAME_MAGIC);
	h[4] = (unsigned char)m->type;
	put64(h + 8, fixed + tail);
	unsigned char *p = h + FRAME_HDR_BYTES;
	unsigned nb = 1;
	s->bufv = s->bufs;
	switch (m->type) {
	case RAFT_IO_REQUEST_VOTE: {
		const struct raft_request_vote *v = &m->request_vote;
		put64(p, v->term);
		put64(p + 8, v->candidate_id);
		put64(p + 16, v->last_log_index);
		put64(p + 24, v->last_log_term);
		p[32] = v->disrupt_leader;
		p[33] = v->pre_vote;
		break;
	}
	case RAFT_IO_REQUEST_VOTE_RESULT: {
		const struct raft_request_vote_result *v = &m->request_vote_result;
		put64(p, v->term);
		p[8] = v->vote_granted;
		p[9] = (unsigned char)v->pre_vote;
		break;
	}
	case RAFT_IO_APPEND_ENTRIES: {
		const struct raft_append_entries *a = &m->append_entries;
		put64(p, a->term);
		put64(p + 8, a->prev_log_index);
		put64(p + 16, a->prev_log_term);
		put64(p + 24, a->leader_commit);
		put64(p + 32, a->n_entries);
		if (a->n_entries + 1 > sizeof(s->bufs) / sizeof(s->bufs[0]) &&
		    !(s->bufv = malloc((a->n_entries + 1) * sizeof(uv_buf_t))))
			return RAFT_NOMEM;
		for (unsigned i = 0; i < a->n_entries; i++) {
			unsigned char *d = p + 40 + 16 * (size_t)i;
			put64(d, a->entries[i].term);
			d[8] = (unsigned char)a->entries[i].type;
			put32(d + 12, (uint32_t)a->entries[i].buf.len);
			if (a->entries[i].buf.len)
				s->bufv[nb++] = uv_buf_init(a->entries[i].buf.base,
				                            (unsigned)a->entries[i].buf.len);
		}
		break;
	}
	case RAFT_IO_APPEND_ENTRIES_RESULT: {
		const struct raft_append_entries_result *a = &m->append_entries_result;
		put64(p, a->term);
		put64(p + 8, a->rejected);
		put64(p + 16, a->last_log_index);
		break;
	}
	case RAFT_IO_INSTALL_SNAPSHOT: {
		const struct raft_install_snapshot *i = &m->install_snapshot;
		size_t cl = iod_raft_conf_size(&i->conf);
		put64(p, i->term);
		put64(p + 8, i->last_index);
		put64(p + 16, i->last_term);
		put64(p + 24, i->conf_index);
		put64(p + 32, cl);
		put64(p + 40, i->data.len);
		iod_raft_conf_encode(&i->conf, p + 48);
		if (i->data.len)
			s->bufv[nb++] = uv_buf_init(i->data.base, (unsigned)i->data.len);
		break;
	}
	case RAFT_IO_TIMEOUT_NOW: {
		const struct raft_timeout_now *t = &m->timeout_now;
		put64(p, t->term);
		put64(p + 8, t->last_log_index);
		put64(p + 16, t->last_log_term);
		break;
	}
	}
	s->bufv[0] = uv_buf_init((char *)h, (unsigned)(FRAME_HDR_BYTES + fixed));
	s->nbufs = nb;
	s->bytes = FRAME_HDR_BYTES + fixed + tail;
	return 0;
}

static int io_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                   raft_io_send_cb cb)
{
	struct rio *r = rio_of(io);
	struct rio_send *s;
	struct rio_peer *p;
	int rv;

	if (r->closing)
		return RAFT_CANCELED;
	if (!(s = calloc(1, sizeof(*s))))
		return RAFT_NOMEM;
	req->cb = cb;
	s->req = req;
	s->cb = cb;
	if (!m->server_address || !m->server_address[0]) {
		/* libraft's backend did strlen(NULL) here */
		IOD_WARN("raft", "server %llu: no address known: message dropped",
		         (unsigned long long)m->server_id);
		send_fail_later(r, s, RAFT_NOCONNECTION);
		return 0;
	}
	if ((rv = encode(s, m))) {
		IOD_WARN("raft", "server %llu: message of type %u not sent: %s",
		         (unsigned long long)m->server_id, m->type, raft_strerror(rv));
		send_fail_later(r, s, rv);
		return 0;
	}
	p = peer_get(r, m->server_id, m->server_address);
	if (!p) {
		send_fail_later(r, s, RAFT_NOCONNECTION);
		return 0;
	}
	s->peer = p;
	if (p->queued_bytes + s->bytes > IOD_RAFT_SEND_QUEUE_BYTES_MAX) {
		peer_note(p, "send queue over %s: messages dropped until it drains",
		          "IOD_RAFT_SEND_QUEUE_BYTES_MAX");
		send_fail_later(r, s, RAFT_NOCONNECTION);
		return 0;
	}
	if (p->state == PEER_IDLE) {
		if (p->fail_ms && uv_now(r->loop) - p->fail_ms < r->retry_ms) {
			send_fail_later(r, s, RAFT_NOCONNECTION);
			return 0;
		}
		peer_connect(p);
		if (p->state == PEER_IDLE) {
			send_fail_later(r, s, RAFT_NOCONNECTION);
			return 0;
		}
	}
	p->queued_bytes += s->bytes;
	if (p->state == PEER_UP) {
		send_start(p, s);
	} else if (p->state == PEER_CONNECTING) {
		if (p->pend_tail)
			p->pend_tail->next = s;
		else
			p->pend_head = s;
		p->pend_tail = s;
	} else { /* closing: fails in peer_closed's turn */
		p->queued_bytes -= s->bytes;
		send_fail_later(r, s, RAFT_NOCONNECTION);
	}
	return 0;
}

/* ---- transport: receiving ----------------------------------------------- */

static void conn_closed(uv_handle_t *h)
{
	struct rio_conn *c = h->data;
	struct rio *r = c->r;
	struct rio_conn **pp;

	for (pp = &r->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	r->conns_n--;
	tls_side_free(&c->ts);
	raft_free(c->body);
	free(c);
	r->handles--;
	maybe_closed(r);
}

static void conn_close(struct rio_conn *c, const char *why)
{
	if (c->closing)
		return;
	if (why)
		IOD_WARN("raft", "connection from server %llu (%s) closed: %s",
		         (unsigned long long)c->id, c->addr[0] ? c->addr : "?", why);
	c->closing = true;
	uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

struct log_reply {
	uv_write_t w;          /* libuv's request */
	unsigned char hdr[16]; /* frame header */
	unsigned char *blob;   /* the copy (malloc'd) */
	struct rio *r;         /* owner */
};

/* A copy of this server's durable log: the newest snapshot on disk and the
 * entries raft holds up to the last one stored. Blob layout: magic, term,
 * snapshot flag, start index, entry count; the snapshot (index, term,
 * configuration index, configuration and data lengths, configuration,
 * data); the entries (term, type, length, data); CRC-32C of all of it. */
static int log_export(struct rio *r, unsigned char **out, size_t *out_len, char *why,
                      size_t why_cap)
{
	struct raft *raft = r->io->data;
	const struct raft_log *log = &raft->log;
	struct raft_snapshot *snap = NULL;
	struct iod_err e = {0};
	size_t have =
	    log->back >= log->front ? log->back - log->front : log->size - log->front + log->back;
	uint64_t first = log->offset + 1, last = raft->last_stored, n, len;

	if (iod_wal_snapshot_get(r->wal, &snap, &e) && e.code != -ENOENT) {
		snprintf(why, why_cap, "%s", e.msg);
		return -EIO;
	}
	uint64_t snap_index = snap ? snap->index : 0;
	if (last > first - 1 + have)
		last = first - 1 + have;
	n = last >= first ? last - first + 1 : 0;
	if (first > snap_index + 1 && n) {
		snprintf(why, why_cap, "log starts at %llu, after the snapshot (%llu)",
		         (unsigned long long)first, (unsigned long long)snap_index);
		iod_wal_snapshot_free(snap);
		return -EAGAIN;
	}
	if (!n)
		first = snap_index + 1;
	size_t conf_len = snap ? iod_raft_conf_size(&snap->configuration) : 0;
	size_t data_len = snap ? snap->bufs[0].len : 0;
	len = 40 + (snap ? 40 + conf_len + data_len : 0) + 4;
	for (uint64_t i = 0; i < n; i++)
		len += 16 + log->entries[(log->front + i) % log->size].buf.len;
	if (len > IOD_RAFT_MSG_MAX) {
		snprintf(why, why_cap, "log copy of %llu bytes is over IOD_RAFT_MSG_MAX",
		         (unsigned long long)len);
		iod_wal_snapshot_free(snap);
		return -E2BIG;
	}
	unsigned char *b = malloc((size_t)len), *p = b;
	if (!b) {
		iod_wal_snapshot_free(snap);
		return -ENOMEM;
	}
	put32(p, LOG_MAGIC);
	put32(p + 4, 1);
	put64(p + 8, raft->current_term);
	put64(p + 16, snap != NULL);
	put64(p + 24, first);
	put64(p + 32, n);
	p += 40;
	if (snap) {
		put64(p, snap->index);
		put64(p + 8, snap->term);
		put64(p + 16, snap->configuration_index);
		put64(p + 24, conf_len);
		put64(p + 32, data_len);
		iod_raft_conf_encode(&snap->configuration, p + 40);
		memcpy(p + 40 + conf_len, snap->bufs[0].base, data_len);
		p += 40 + conf_len + data_len;
	}
	for (uint64_t i = 0; i < n; i++) {
		const struct raft_entry *en = &log->entries[(log->front + i) % log->size];
		put64(p, en->term);
		put32(p + 8, en->type);
		put32(p + 12, (uint32_t)en->buf.len);
		memcpy(p + 16, en->buf.base, en->buf.len);
		p += 16 + en->buf.len;
	}
	put32(p, iod_crc32c(0, b, (size_t)len - 4));
	iod_wal_snapshot_free(snap);
	*out = b;
	*out_len = (size_t)len;
	return 0;
}

static void log_written(uv_write_t *w, int status)
{
	struct log_reply *lr = w->data;
	(void)status;
	free(lr->blob);
	free(lr);
}

static const char *log_reply(struct rio_conn *c)
{
	struct log_reply *lr;
	char why[200] = "";
	size_t len = 0;

	if (!c->r->started || c->r->closing)
		return "log copy asked before raft started";
	if (!(lr = calloc(1, sizeof(*lr))))
		return "out of memory";
	if (log_export(c->r, &lr->blob, &len, why, sizeof(why))) {
		IOD_WARN("raft", "server %llu (%s) asked for a copy of the log: %s",
		         (unsigned long long)c->id, c->addr, why[0] ? why : "failed");
		free(lr);
		return "cannot export the log";
	}
	IOD_INFO("raft", "server %llu (%s) recovers from this server: sending %zu bytes of log",
	         (unsigned long long)c->id, c->addr, len);
	put32(lr->hdr, FRAME_MAGIC);
	lr->hdr[4] = FRAME_LOG_COPY;
	put64(lr->hdr + 8, len);
	uv_buf_t bufs[2] = {uv_buf_init((char *)lr->hdr, sizeof(lr->hdr)),
	                    uv_buf_init((char *)lr->blob, (unsigned)len)};
	lr->w.data = lr;
	if (c->ts.tls) { /* encrypted (copied) now */
		struct iod_err e = {0};
		bool bad = tls_encrypt(&c->ts, bufs, 2, &e) ||
		           tls_flush(&c->ts, (uv_stream_t *)&c->tcp, NULL);
		free(lr->blob);
		free(lr);
		return bad ? "cannot send the log copy" : NULL;
	}
	if (uv_write(&lr->w, (uv_stream_t *)&c->tcp, bufs, 2, log_written)) {
		free(lr->blob);
		free(lr);
		return "cannot send the log copy";
	}
	return NULL;
}

/* Decode the frame in c->body and hand it to raft. NULL or why not. */
static const char *deliver(struct rio_conn *c)
{
	struct rio *r = c->r;
	struct raft_message m = {0};
	const unsigned char *p = c->body;
	size_t len = c->body_len;
	bool owned = false; /* raft took c->body */

	m.type = c->type;
	m.server_id = c->id;
	m.server_address = c->addr;
	switch (c->type) {
	case FRAME_LOG_REQUEST: return log_reply(c);
	case RAFT_IO_REQUEST_VOTE:
		if (len != 34)
			return "bad RequestVote length";
		m.request_vote.term = get64(p);
		m.request_vote.candidate_id = get64(p + 8);
		m.request_vote.last_log_index = get64(p + 16);
		m.request_vote.last_log_term = get64(p + 24);
		m.request_vote.disrupt_leader = p[32] != 0;
		m.request_vote.pre_vote = p[33] != 0;
		break;
	case RAFT_IO_REQUEST_VOTE_RESULT:
		if (len != 10)
			return "bad RequestVote result length";
		m.request_vote_result.term = get64(p);
		m.request_vote_result.vote_granted = p[8] != 0;
		m.request_vote_result.pre_vote = p[9];
		break;
	case RAFT_IO_APPEND_ENTRIES_RESULT:
		if (len != 24)
			return "bad AppendEntries result length";
		m.append_entries_result.term = get64(p);
		m.append_entries_result.rejected = get64(p + 8);
		m.append_entries_result.last_log_index = get64(p + 16);
		break;
	case RAFT_IO_TIMEOUT_NOW:
		if (len != 24)
			return "bad TimeoutNow length";
		m.timeout_now.term = get64(p);
		m.timeout_now.last_log_index = get64(p + 8);
		m.timeout_now.last_log_term = get64(p + 16);
		break;
	case RAFT_IO_APPEND_ENTRIES: {
		struct raft_append_entries *a = &m.append_entries;
		if (len < 40)
			return "short AppendEntries";
		uint64_t n = get64(p + 32);
		if (n > (len - 40) / 16)
			return "AppendEntries entry count past the frame";
		size_t off = 40 + 16 * (size_t)n, data = 0;
		for (uint64_t i = 0; i < n; i++) {
			const unsigned char *d = p + 40 + 16 * i;
			if (d[8] < RAFT_COMMAND || d[8] > RAFT_CHANGE)
				return "AppendEntries entry of unknown type";
			data += get32(d + 12);
		}
		if (data != len - off)
			return "AppendEntries entry lengths do not add up to the frame";
		a->term = get64(p);
		a->prev_log_index = get64(p + 8);
		a->prev_log_term = get64(p + 16);
		a->leader_commit = get64(p + 24);
		a->n_entries = (unsigned)n;
		if (n) {
			a->entries = raft_malloc((size_t)n * sizeof(*a->entries));
			if (!a->entries)
				return "out of memory";
			for (uint64_t i = 0; i < n; i++) {
				const unsigned char *d = p + 40 + 16 * i;
				size_t l = get32(d + 12);
				a->entries[i] = (struct raft_entry){
				    .term = get64(d),
				    .type = d[8],
				    .buf = {.base = c->body + off, .len = l},
				    .batch = c->body, /* raft frees entries[0].batch */
				};
				off += l;
			}
			owned = true;
		}
		break;
	}
	case RAFT_IO_INSTALL_SNAPSHOT: {
		struct raft_install_snapshot *is = &m.install_snapshot;
		if (len < 48)
			return "short InstallSnapshot";
		uint64_t cl = get64(p + 32), dl = get64(p + 40);
		if (cl > len || dl > len || 48 + cl + dl != len)
			return "InstallSnapshot lengths do not add up to the frame";
		is->term = get64(p);
		is->last_index = get64(p + 8);
		is->last_term = get64(p + 16);
		is->conf_index = get64(p + 24);
		if (iod_raft_conf_decode(p + 48, (size_t)cl, &is->conf))
			return "InstallSnapshot with a bad configuration";
		is->data.base = raft_malloc(dl ? (size_t)dl : 1);
		if (!is->data.base) {
			raft_configuration_close(&is->conf);
			return "out of memory";
		}
		memcpy(is->data.base, p + 48 + cl, (size_t)dl);
		is->data.len = (size_t)dl;
		break;
	}
	default: return "unknown message type";
	}
	if (!r->recv || r->closing) {
		/* not started yet (or stopping): raft has not seen it */
		if (c->type == RAFT_IO_APPEND_ENTRIES && m.append_entries.entries)
			raft_free(m.append_entries.entries);
		if (c->type == RAFT_IO_INSTALL_SNAPSHOT) {
			raft_configuration_close(&m.install_snapshot.conf);
			raft_free(m.install_snapshot.data.base);
		}
		owned = false;
	} else {
		r->recv(r->io, &m);
	}
	if (owned)
		c->body = NULL;
	return NULL;
}

static void conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct rio_conn *c = h->data;
	(void)hint;
	*buf = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

/* Refuse a connection before anything of it is read as Raft. */
static void conn_refuse(struct rio_conn *c, const char *why)
{
	struct rio *r = c->r;
	uint64_t now = uv_now(r->loop);
	/* a peer that keeps retrying is logged once every 10 s */
	if (strncmp(why, r->refused_why, sizeof(r->refused_why) - 1) ||
	    now - r->refused_ms >= 10000) {
		if (r->refused_n)
			IOD_WARN("raft",
			         "refused a connection from %s: %s (and %u more like it "
			         "in the last 10 s)",
			         c->from, why, r->refused_n);
		else
			IOD_WARN("raft", "refused a connection from %s: %s", c->from, why);
		iod_strlcpy(r->refused_why, why, sizeof(r->refused_why));
		r->refused_ms = now;
		r->refused_n = 0;
	} else {
		r->refused_n++;
	}
	conn_close(c, NULL);
}

/* The plaintext stream of a connection: the handshake, then frames. */
static void conn_parse(struct rio_conn *c, const unsigned char *p, size_t n)
{
	while (n && !c->closing) {
		if (c->stage != CONN_BODY) {
			size_t k = IOD_MIN(n, c->hdr_need - c->hdr_got);
			memcpy(c->hdr + c->hdr_got, p, k);
			c->hdr_got += k;
			p += k;
			n -= k;
			if (c->hdr_got < c->hdr_need)
				continue;
			if (c->stage == CONN_HELLO) {
				if (get32(c->hdr) != HELLO_MAGIC || get32(c->hdr + 4) != 1) {
					conn_close(
					    c, "not an iod Raft handshake (another program, or an "
					       "incompatible iod version)");
					return;
				}
				size_t al = (size_t)c->hdr[16] | (size_t)c->hdr[17] << 8;
				if (al == 0 || al > IOD_ADDR_MAX) {
					conn_close(c, "handshake with a bad address length");
					return;
				}
				if (c->hdr_need == HELLO_FIXED_BYTES) {
					c->hdr_need += al;
					continue;
				}
				c->id = get64(c->hdr + 8);
				memcpy(c->addr, c->hdr + HELLO_FIXED_BYTES, al);
				c->addr[al] = 0;
				if (!c->id || memchr(c->addr, 0, al)) {
					conn_close(c, "handshake with a bad id or address");
					return;
				}
				const struct iod_sec_cert_info *ci =
				    c->ts.tls ? iod_sec_tls_peer(c->ts.tls) : NULL;
				char idb[24];
				snprintf(idb, sizeof(idb), "%llu", (unsigned long long)c->id);
				if (ci && strcmp(ci->id.name, idb)) {
					char why[IOD_NAME_MAX + 96];
					snprintf(why, sizeof(why),
					         "its handshake says server %s but its certificate "
					         "is server %s's",
					         idb, ci->id.name);
					conn_refuse(c, why);
					return;
				}
				c->stage = CONN_HDR;
				c->hdr_got = 0;
				c->hdr_need = FRAME_HDR_BYTES;
				continue;
			}
			/* frame header */
			uint64_t len = get64(c->hdr + 8);
			if (get32(c->hdr) != FRAME_MAGIC) {
				conn_close(c, "bad frame magic");
				return;
			}
			if (len > IOD_RAFT_MSG_MAX) {
				conn_close(c, "frame over IOD_RAFT_MSG_MAX");
				return;
			}
			c->type = c->hdr[4];
			c->body_len = (size_t)len;
			c->body_got = 0;
			c->body = raft_malloc(c->body_len ? c->body_len : 1);
			if (!c->body) {
				conn_close(c, "out of memory for a frame");
				return;
			}
			c->stage = CONN_BODY;
		}
		size_t k = IOD_MIN(n, c->body_len - c->body_got);
		memcpy(c->body + c->body_got, p, k);
		c->body_got += k;
		p += k;
		n -= k;
		if (c->body_got < c->body_len)
			continue;
		const char *why = deliver(c);
		raft_free(c->body);
		c->body = NULL;
		if (why) {
			conn_close(c, why);
			return;
		}
		c->stage = CONN_HDR;
		c->hdr_got = 0;
		c->hdr_need = FRAME_HDR_BYTES;
	}
}

static void conn_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct rio_conn *c = st->data;
	size_t n = nread > 0 ? (size_t)nread : 0;
	struct iod_err e = {0};

	if (nread < 0) {
		if (c->ts.tls && !iod_sec_tls_peer(c->ts.tls))
			conn_refuse(c, "closed before its TLS handshake completed");
		else
			conn_close(c, nread == UV_EOF ? NULL : uv_strerror((int)nread));
		return;
	}
	if (!c->ts.tls) {
		conn_parse(c, (const unsigned char *)buf->base, n);
		return;
	}
	if (!n)
		return;
	if (iod_sec_tls_feed(c->ts.tls, buf->base, n)) {
		conn_close(c, "out of memory for TLS");
		return;
	}
	if (!iod_sec_tls_peer(c->ts.tls)) {
		unsigned want = 0;
		int rc = iod_sec_tls_handshake(c->ts.tls, &want, &e);
		if (tls_flush(&c->ts, st, NULL)) {
			conn_close(c, "TLS handshake write failed");
			return;
		}
		if (rc == -EAGAIN)
			return;
		if (!rc)
			rc = check_server(c->r, iod_sec_tls_peer(c->ts.tls), 0, &e);
		if (rc) {
			conn_refuse(c, e.msg);
			return;
		}
	}
	for (;;) {
		unsigned want = 0;
		long k = iod_sec_tls_read(c->ts.tls, c->pbuf, sizeof(c->pbuf), &want, &e);
		if (k == -EAGAIN)
			break;
		if (k <= 0) {
			conn_close(c, k == 0 ? NULL : e.msg);
			return;
		}
		conn_parse(c, (const unsigned char *)c->pbuf, (size_t)k);
		if (c->closing)
			return;
	}
	if (tls_flush(&c->ts, st, NULL))
		conn_close(c, "TLS write failed");
}

static void conn_from(struct rio_conn *c)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	char ip[64] = "?";
	int port = 0;
	if (!uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len)) {
		if (ss.ss_family == AF_INET6) {
			uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		} else {
			uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		}
	}
	snprintf(c->from, sizeof(c->from), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip,
	         port);
}

/* Every slot is taken: close the oldest connection still in its handshake
 * for over IOD_RAFT_EVICT_HELLO_AGE_MS; true if one was. */
static bool conn_evict(struct rio *r)
{
	struct rio_conn *old = NULL;
	uint64_t now = uv_now(r->loop);
	for (struct rio_conn *c = r->conns; c; c = c->next)
		if (!c->closing && c->stage == CONN_HELLO && c->accepted_ms &&
		    now - c->accepted_ms >= IOD_RAFT_EVICT_HELLO_AGE_MS &&
		    (!old || c->accepted_ms < old->accepted_ms))
			old = c;
	if (old)
		conn_refuse(old, "closed to make room: all IOD_RAFT_CONNS_MAX slots were taken and "
		                 "it had not finished its handshake");
	return old != NULL;
}

/* A server revoked since its connection was verified loses it, both ways
 * (its certificate is refused again at every reconnect). */
static void revoked_sweep(struct rio *r)
{
	struct iod_err e = {0};
	const struct iod_sec_cert_info *ci;
	if (!r->revoked || !r->tls)
		return;
	for (struct rio_conn *c = r->conns; c; c = c->next)
		if (!c->closing && c->ts.tls && (ci = iod_sec_tls_peer(c->ts.tls)) &&
		    check_server(r, ci, 0, &e))
			conn_refuse(c, e.msg);
	for (struct rio_peer *p = r->peers; p; p = p->next)
		if (p->state == PEER_UP && p->ts.tls && (ci = iod_sec_tls_peer(p->ts.tls)) &&
		    check_server(r, ci, 0, &e)) {
			peer_note(p, "refused: %s", e.msg);
			peer_close(p, NULL);
		}
}

/* Close what has not finished its handshake in IOD_RAFT_HANDSHAKE_TIMEOUT_MS,
 * both ways (a silent or half-handshake peer must not hold a slot or a
 * peer's queue). */
static void handshake_sweep(struct rio *r)
{
	uint64_t now = uv_now(r->loop);
	char why[128];
	if (now - r->sweep_ms < IOD_RAFT_SWEEP_MS)
		return;
	r->sweep_ms = now;
	snprintf(why, sizeof(why), "no handshake within %u ms (IOD_RAFT_HANDSHAKE_TIMEOUT_MS)%s",
	         IOD_RAFT_HANDSHAKE_TIMEOUT_MS, r->tls ? ": TLS or iod's hello" : "");
	for (struct rio_conn *c = r->conns; c; c = c->next)
		if (!c->closing && c->stage == CONN_HELLO &&
		    now - c->accepted_ms > IOD_RAFT_HANDSHAKE_TIMEOUT_MS) {
			r->handshake_timeouts++;
			conn_refuse(c, why);
		}
	for (struct rio_peer *p = r->peers; p; p = p->next)
		if (p->state == PEER_CONNECTING &&
		    now - p->connect_ms > IOD_RAFT_HANDSHAKE_TIMEOUT_MS) {
			r->handshake_timeouts++;
			peer_note(p, "%s", why);
			p->fail_ms = now;
			peer_close(p, NULL);
		}
	revoked_sweep(r);
}

static void on_connection(uv_stream_t *l, int status)
{
	struct rio *r = l->data;
	struct rio_conn *c;

	if (status) {
		IOD_WARN("raft", "accepting a connection on %s: %s", r->addr, uv_strerror(status));
		return;
	}
	if (!(c = calloc(1, sizeof(*c))))
		return;
	c->r = r;
	uv_tcp_init(r->loop, &c->tcp);
	c->tcp.data = c;
	r->handles++;
	c->next = r->conns;
	r->conns = c;
	r->conns_n++;
	c->stage = CONN_HELLO;
	c->hdr_need = HELLO_FIXED_BYTES;
	if (uv_accept(l, (uv_stream_t *)&c->tcp)) {
		conn_close(c, "accept failed");
		return;
	}
	c->accepted_ms = uv_now(r->loop);
	if (r->conns_n > IOD_RAFT_CONNS_MAX && !conn_evict(r)) {
		conn_close(c, "over IOD_RAFT_CONNS_MAX incoming connections");
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	conn_from(c);
	if (r->tls) {
		struct iod_err e = {0};
		if (iod_sec_tls_open_buffered(r->tls, false, tls_push, &c->ts, &c->ts.tls, &e)) {
			conn_close(c, e.msg);
			return;
		}
	}
	uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void timer_cb(uv_timer_t *t)
{
	struct rio *r = t->data;
	if (r->closing)
		return;
	handshake_sweep(r);
	if (r->tick)
		r->tick(r->io);
}

static int io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv)
{
	struct rio *r = rio_of(io);
	r->tick = tick;
	r->recv = recv;
	r->started = true;
	uv_timer_start(&r->timer, timer_cb, msecs, msecs);
	return 0;
}

static void handle_closed(uv_handle_t *h)
{
	struct rio *r = h->data;
	r->handles--;
	maybe_closed(r);
}

static void maybe_closed(struct rio *r)
{
	if (!r->closing)
		return;
	disk_pump(r); /* fails what is still queued */
	if (r->in_worker || r->gets || r->works || r->handles)
		return;
	if (r->close_cb) {
		raft_io_close_cb cb = r->close_cb;
		r->close_cb = NULL;
		cb(r->io);
	}
}

static void io_close(struct raft_io *io, raft_io_close_cb cb)
{
	struct rio *r = rio_of(io);

	r->closing = true;
	r->close_cb = cb;
	uv_timer_stop(&r->timer);
	for (struct rio_peer *p = r->peers; p; p = p->next)
		peer_close(p, NULL);
	for (struct rio_conn *c = r->conns; c; c = c->next)
		conn_close(c, NULL);
	uv_close((uv_handle_t *)&r->listener, handle_closed);
	uv_close((uv_handle_t *)&r->timer, handle_closed);
	/* the failer fires what is left, then closes */
	failer_cb(&r->failer);
	uv_close((uv_handle_t *)&r->failer, handle_closed);
	maybe_closed(r);
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

int iod_rio_init(struct raft_io *io, uv_loop_t *loop, const char *dir, const char *addr,
                 struct iod_sec_tls_creds *tls, uint32_t connect_retry_ms, struct iod_err *e)
{
	struct rio *r = calloc(1, sizeof(*r));
	struct sockaddr_storage ss;
	char why[160];
	int rv;

	if (!r)
		return iod_err_set(e, -ENOMEM, "out of memory");
	memset(io, 0, sizeof(*io));
	r->io = io;
	r->loop = loop;
	r->retry_ms = connect_retry_ms;
	r->tls = tls;
	r->rng = iod_time_unix_ns() | 1;
	iod_strlcpy(r->addr, addr, sizeof(r->addr));
	if ((rv = iod_wal_open(&r->wal, dir, &r->ld, e))) {
		free(r);
		return rv;
	}
	/* as etcd's WAL: an append's fdatasync then changes no file size */
	iod_wal_set_prealloc(r->wal, true);
	if (resolve(addr, &ss, why, sizeof(why))) {
		iod_err_set(e, -EINVAL, "--raft: %s", why);
		goto fail;
	}
	if (!tls && !is_loopback(&ss)) {
		iod_err_set(e, -EINVAL,
		            "--raft %s is not a loopback address: plaintext Raft there would let "
		            "anyone on that network vote and rewrite the log; give --pki DIR "
		            "(Raft is then mutual TLS)",
		            addr);
		goto fail;
	}
	/* bind and listen now, with plain calls, so that a taken port is
	 * reported here with its reason (libuv defers EADDRINUSE) */
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss,
	         ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                  : sizeof(struct sockaddr_in)) ||
	    listen(fd, 128)) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		iod_err_set(e, -err, "raft transport: cannot listen on %s: %s%s", addr,
		            strerror(err),
		            err == EADDRINUSE ? " (another process holds the port: stop it or "
		                                "choose another --raft)"
		                              : "");
		goto fail;
	}
	uv_tcp_init(loop, &r->listener);
	r->listener.data = r;
	r->handles++;
	if ((rv = uv_tcp_open(&r->listener, fd)) ||
	    (rv = uv_listen((uv_stream_t *)&r->listener, 128, on_connection))) {
		/* cannot happen on a listening socket; the process is failing */
		iod_err_set(e, -EIO, "raft transport: %s: %s", addr, uv_strerror(rv));
		return -EIO;
	}
	uv_timer_init(loop, &r->timer);
	r->timer.data = r;
	r->handles++;
	uv_idle_init(loop, &r->failer);
	r->failer.data = r;
	r->handles++;
	io->version = 2; /* async_work: FSM snapshots off the loop */
	io->impl = r;
	io->init = io_init;
	io->close = io_close;
	io->load = io_load;
	io->start = io_start;
	io->bootstrap = io_bootstrap;
	io->recover = io_recover;
	io->set_term = io_set_term;
	io->set_vote = io_set_vote;
	io->send = io_send;
	io->append = io_append;
	io->truncate = io_truncate;
	io->snapshot_put = io_snapshot_put;
	io->snapshot_get = io_snapshot_get;
	io->async_work = io_async_work;
	io->time = io_time;
	io->random = io_random;
	return 0;
fail:
	iod_wal_close(r->wal);
	iod_wal_load_free(&r->ld);
	free(r);
	return e->code ? e->code : -EIO;
}

void iod_rio_free(struct raft_io *io)
{
	struct rio *r = io->impl;
	if (!r)
		return;
	while (r->peers) {
		struct rio_peer *p = r->peers;
		r->peers = p->next;
		free(p);
	}
	iod_wal_load_free(&r->ld);
	iod_wal_close(r->wal);
	free(r);
	io->impl = NULL;
}

/* ---- recover-from-peers: fetching a peer's log (blocking, before start) -- */

static int wait_io(int fd, short ev, uint64_t deadline_ns)
{
	for (;;) {
		uint64_t now = iod_time_unix_ns();
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = fd, .events = ev};
		int rv = poll(&pfd, 1, (int)((deadline_ns - now) / 1000000 + 1));
		if (rv > 0)
			return 0;
		if (rv < 0 && errno != EINTR)
			return -errno;
	}
}

static int io_all(int fd, void *buf, size_t len, bool wr, uint64_t deadline_ns)
{
	unsigned char *p = buf;
	while (len) {
		int rv = wait_io(fd, wr ? POLLOUT : POLLIN, deadline_ns);
		if (rv)
			return rv;
		ssize_t k = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ECONNRESET;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Send or receive len bytes over TLS t on fd by deadline_ms (monotonic). */
static int tls_all(struct iod_sec_tls *t, int fd, void *buf, size_t len, bool wr,
                   uint64_t deadline_ms)
{
	struct iod_err e = {0};
	unsigned char *p = buf;
	if (wr)
		return iod_sec_tls_write_all(t, fd, buf, len, deadline_ms, &e);
	while (len) {
		long k = iod_sec_tls_read_wait(t, fd, p, len, deadline_ms, &e);
		if (k <= 0)
			return k < 0 ? (int)k : -ECONNRESET;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* One transfer, over TLS when t is set. */
static int xfer(struct iod_sec_tls *t, int fd, void *buf, size_t len, bool wr, uint64_t deadline_ns,
                uint64_t deadline_ms)
{
	return t ? tls_all(t, fd, buf, len, wr, deadline_ms)
	         : io_all(fd, buf, len, wr, deadline_ns);
}

int iod_rio_fetch_log(const char *peer_addr, uint64_t self_id, const char *self_addr,
                      struct iod_sec_tls_creds *tls, uint32_t timeout_ms, unsigned char **blob,
                      size_t *blob_len, struct iod_err *e)
{
	struct iod_sec_tls *t = NULL;
	uint64_t deadline_ms = iod_clock_now_ns() / IOD_NS_PER_MS + (uint64_t)timeout_ms;
	struct sockaddr_storage ss;
	char why[160];
	uint64_t deadline = iod_time_unix_ns() + (uint64_t)timeout_ms * 1000000ull;
	unsigned char hello[HELLO_FIXED_BYTES + IOD_ADDR_MAX], fh[FRAME_HDR_BYTES] = {0};
	size_t al = strlen(self_addr);
	int fd, rv;

	if (resolve(peer_addr, &ss, why, sizeof(why)))
		return iod_err_set(e, -EINVAL, "%s", why);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return iod_err_set(e, -errno, "socket: %s", strerror(errno));
	rv = connect(fd, (struct sockaddr *)&ss,
	             ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                      : sizeof(struct sockaddr_in));
	if (rv && errno != EINPROGRESS) {
		rv = -errno;
		goto out;
	}
	if ((rv = wait_io(fd, POLLOUT, deadline)))
		goto out;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	if (soerr) {
		rv = -soerr;
		goto out;
	}
	if (tls) {
		struct iod_err te = {0};
		if ((rv =
		         iod_sec_tls_connect(tls, fd, IOD_SEC_KIND_SERVER, deadline_ms, &t, &te))) {
			close(fd);
			return iod_err_set(e, rv, "%s: %s", peer_addr, te.msg);
		}
	}
	put32(hello, HELLO_MAGIC);
	put32(hello + 4, 1);
	put64(hello + 8, self_id);
	hello[16] = (unsigned char)al;
	hello[17] = (unsigned char)(al >> 8);
	memcpy(hello + HELLO_FIXED_BYTES, self_addr, al);
	put32(fh, FRAME_MAGIC);
	fh[4] = FRAME_LOG_REQUEST;
	if ((rv = xfer(t, fd, hello, HELLO_FIXED_BYTES + al, true, deadline, deadline_ms)) ||
	    (rv = xfer(t, fd, fh, sizeof(fh), true, deadline, deadline_ms)) ||
	    (rv = xfer(t, fd, fh, sizeof(fh), false, deadline, deadline_ms)))
		goto out;
	uint64_t len = get64(fh + 8);
	if (get32(fh) != FRAME_MAGIC || fh[4] != FRAME_LOG_COPY || len > IOD_RAFT_MSG_MAX ||
	    len < 44) {
		iod_sec_tls_close(t);
		close(fd);
		return iod_err_set(e, -EPROTO, "%s: not a log copy", peer_addr);
	}
	unsigned char *b = malloc((size_t)len);
	if (!b) {
		rv = -ENOMEM;
		goto out;
	}
	if ((rv = xfer(t, fd, b, (size_t)len, false, deadline, deadline_ms))) {
		free(b);
		goto out;
	}
	iod_sec_tls_close(t);
	close(fd);
	if (get32(b) != LOG_MAGIC || get32(b + len - 4) != iod_crc32c(0, b, (size_t)len - 4)) {
		free(b);
		return iod_err_set(e, -EPROTO, "%s: log copy fails its checksum", peer_addr);
	}
	*blob = b;
	*blob_len = (size_t)len;
	return 0;
out:
	iod_sec_tls_close(t);
	close(fd);
	return iod_err_set(e, rv, "%s: %s", peer_addr,
	                   rv == -ECONNRESET ? "closed the connection (not running, or it has "
	                                       "not started raft)"
	                                     : strerror(-rv));
}
