/*
 * proxy_http.c: L7 forwarding for HTTP/1.1 services: each request is
 * balanced on its own, sent over a keep-alive connection from a per-worker,
 * per-endpoint pool, retried on another endpoint when the attempt fails and
 * retrying is safe (connect failures always; 5xx, resets and timeouts for
 * idempotent methods, after jittered backoff, within the retry budget), and
 * traced: the proxy adds or continues a W3C `traceparent` and records a span.
 *
 * Bodies of any size stream both ways through the two connections' fixed
 * buffers (IOD_MESH_HTTP_BUF each) with backpressure: a side is read only
 * while the buffer it fills has room, so a slow reader stops the writer
 * instead of growing memory. A request is forwarded as soon as its head is
 * in; while all of it still sits in the client's buffer it can be resent
 * (retries), once the body outgrew the buffer it cannot. Only the head is
 * limited (431). Never allocates: buffers belong to connection slots.
 *
 * A connection closed after an answer while the client may still be sending
 * closes lingering (client_linger): closing with unread input would reset it
 * and could destroy the answer in flight.
 */
#include "internal.h"

#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

enum { H_READ, H_UPSTREAM, H_RESP, H_CLOSING, H_LINGER };
enum { U_CONNECTING, U_WAIT_HEAD, U_BODY, U_DONE, U_IDLE };

/* Longest request head read: the rest of the buffer is room for the
 * traceparent the proxy writes into the head (13 + 55 + 2 bytes). */
#define HEAD_MAX (IOD_MESH_HTTP_BUF - 128)

/* Why an attempt failed (what the client gets if it is not retried). */
enum fail { F_CONNECT, F_RESET, F_TIMEOUT, F_BADRESP, F_STALE };

static struct wsvc *svc_of(struct worker *w, struct conn *c)
{
	return &w->svcs[c->slot];
}

/* Does the client side still stream request body bytes into its buffer? */
static bool body_wanted(const struct conn *c)
{
	return (c->state == H_UPSTREAM || c->state == H_RESP) && !c->req_done &&
	       c->len < IOD_MESH_HTTP_BUF;
}

/* Client interest while a request body streams: read while the buffer has
 * room (backpressure otherwise), write while a response piece is pending. */
static void client_rearm(struct worker *w, struct conn *c)
{
	iod_mesh_conn_watch(w, c, (c->out_len ? EPOLLOUT : 0) | (body_wanted(c) ? EPOLLIN : 0));
}

/* Upstream interest: read the response unless the client has not taken the
 * last piece yet (it lives in u->buf), write while request bytes wait. */
static void up_rearm(struct worker *w, struct conn *u)
{
	const struct conn *c = u->peer;
	uint32_t ev = 0;
	if ((u->state == U_WAIT_HEAD || u->state == U_BODY) && !(c && c->out_len))
		ev |= EPOLLIN | EPOLLRDHUP;
	if (c && !u->send_done && u->state != U_CONNECTING && c->sent < c->req_len)
		ev |= EPOLLOUT;
	if (u->tls && (ev & EPOLLIN) && iod_sec_tls_pending(u->tls))
		iod_mesh_again_add(w, u); /* decrypted already: epoll will not say so */
	iod_mesh_conn_watch(w, u, ev);
}

static void brk_release(struct wsvc *s, struct conn *c, bool *held, enum iod_mesh_breaker_kind k)
{
	if (*held && c->life == s->life && s->active)
		iod_mesh_breaker_release(&s->breaker, k);
	*held = false;
}

static void release_ep(struct wsvc *s, struct conn *c)
{
	if (!c->ep_active)
		return;
	c->ep_active = false;
	if (c->svc_gen == s->gen && s->active && c->ep < s->outlier.n) {
		IOD_ASSERT_HOT(s->outlier.hosts[c->ep].active_requests > 0);
		s->outlier.hosts[c->ep].active_requests--;
		STAT_ADD(s->eps[c->ep].active, (uint64_t)-1);
	}
}

/* Close an upstream connection that will not be reused. */
static void up_close(struct worker *w, struct conn *u)
{
	struct wsvc *s = svc_of(w, u);
	brk_release(s, u, &u->holds_cx, IOD_MESH_BRK_CONNECTIONS);
	if (u->peer)
		u->peer->peer = NULL;
	iod_mesh_conn_put(w, u);
}

static void pool_unlink(struct wsvc *s, struct conn *u)
{
	struct conn **pp = &s->idle[u->ep];
	for (uint32_t k = 0; *pp && k <= IOD_MESH_POOL_IDLE_MAX; k++, pp = &(*pp)->next_idle) {
		if (*pp == u) {
			*pp = u->next_idle;
			s->idle_n[u->ep]--;
			return;
		}
	}
}

void iod_mesh_http_up_revoked(struct worker *w, struct conn *u)
{
	u->peer_revoked = true;
	if (u->state == U_IDLE) {
		pool_unlink(svc_of(w, u), u);
		up_close(w, u);
	}
}

static void span_finish(struct worker *w, struct conn *c, uint16_t status)
{
	struct wsvc *s = svc_of(w, c);
	struct iod_mesh_span *sp = &c->span;

	sp->status = status;
	sp->attempts = c->attempts;
	sp->end_unix_ns = iod_mesh_unix_ns(w);
	if (c->ep != UINT32_MAX)
		iod_mesh_addr_format(c->ep_ip4, c->ep_port, sp->peer, sizeof(sp->peer));
	iod_mesh_span_ring_push(w->spans, sp);
	STAT_ADD(s->st.bytes_in, sp->bytes_in);
	STAT_ADD(s->st.bytes_out, sp->bytes_out);
	if (status >= 500 || status == 0)
		STAT_INC(s->st.errors);
	iod_mesh_latency_observe(&s->st, w->now_ns - c->req_start_ns);
}

/* The request is over (answered or abandoned): give back what it held. */
static void request_end(struct worker *w, struct conn *c)
{
	struct wsvc *s = svc_of(w, c);
	brk_release(s, c, &c->holds_request, IOD_MESH_BRK_REQUESTS);
	brk_release(s, c, &c->holds_retry, IOD_MESH_BRK_RETRIES);
	brk_release(s, c, &c->holds_pending, IOD_MESH_BRK_PENDING);
	release_ep(s, c);
	c->retry_at_ns = 0;
	c->fault_abort = 0;
}

static void client_close(struct worker *w, struct conn *c)
{
	struct wsvc *s = svc_of(w, c);
	if (c->peer)
		up_close(w, c->peer);
	if (c->state == H_UPSTREAM || c->state == H_RESP)
		span_finish(w, c, 0); /* abandoned: the client sees no status */
	if (c->state == H_LINGER) {
		IOD_ASSERT_HOT(w->lingering > 0);
		w->lingering--;
	}
	request_end(w, c);
	STAT_ADD(s->st.cx_active, (uint64_t)-1);
	iod_mesh_conn_put(w, c);
}

static void try_request(struct worker *w, struct conn *c);

/* Close after an answer that went out whole. When the client may still be
 * sending (the request body is unread, or more bytes wait), close lingering
 * (RFC 9112 9.6): closing a socket with unread input makes the kernel send
 * RST, and the RST can destroy the answer before the client reads it. So
 * shut our side (the answer is followed by FIN), read and discard input
 * until EOF, IOD_MESH_LINGER_MS or IOD_MESH_LINGER_BYTES_MAX (linger_read,
 * iod_mesh_http_timer), then close. Never blocks: the loop does the reads. */
static void client_linger(struct worker *w, struct conn *c)
{
	int pending = 0;

	IOD_ASSERT_HOT(c->out_len == 0);
	if (c->peer)
		up_close(w, c->peer);
	request_end(w, c);
	bool more = !c->req_done || c->len > c->req_len ||
	            (ioctl(c->fd, FIONREAD, &pending) == 0 && pending > 0);
	if (!more || w->lingering >= IOD_MESH_LINGER_MAX || shutdown(c->fd, SHUT_WR) ||
	    iod_mesh_conn_watch(w, c, EPOLLIN | EPOLLRDHUP)) {
		client_close(w, c);
		return;
	}
	c->state = H_LINGER;
	c->linger_until_ns = w->now_ns + (uint64_t)IOD_MESH_LINGER_MS * IOD_NS_PER_MS;
	c->linger_bytes = 0;
	w->lingering++;
	IOD_ASSERT_HOT(w->lingering <= IOD_MESH_LINGER_MAX);
}

/* Discard what a lingering client sends; close at EOF, an error or the cap.
 * A few reads per event, so one fast sender cannot hold the worker. */
static void linger_read(struct worker *w, struct conn *c, uint32_t ev)
{
	for (int k = 0; k < 8; k++) {
		ssize_t n = read(c->fd, c->buf, IOD_MESH_HTTP_BUF);
		if (n < 0 && errno == EAGAIN && !(ev & EPOLLERR))
			return;
		if (n <= 0) {
			client_close(w, c); /* EOF: the client is done; or an error */
			return;
		}
		c->linger_bytes += (uint32_t)n;
		if (c->linger_bytes >= IOD_MESH_LINGER_BYTES_MAX) {
			client_close(w, c); /* it ignores the answer: reset it */
			return;
		}
	}
}

/* Write c->out; true when all of it went. */
static bool client_flush(struct worker *w, struct conn *c)
{
	while (c->out_len) {
		ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
		if (n > 0) {
			c->out += n;
			c->out_len -= (uint32_t)n;
			c->last_io_ns = w->now_ns;
		} else if (n < 0 && errno == EAGAIN) {
			iod_mesh_conn_watch(w, c, EPOLLOUT | (body_wanted(c) ? EPOLLIN : 0));
			if (c->peer)
				up_rearm(w, c->peer);
			return false;
		} else {
			client_close(w, c);
			return false;
		}
	}
	return true;
}

/* Drop the finished request from the buffer; read the next one. */
static void next_request(struct worker *w, struct conn *c)
{
	if (!c->keep_alive) {
		client_linger(w, c);
		return;
	}
	uint32_t left = c->len - c->req_len;
	memmove(c->buf, c->buf + c->req_len, left);
	c->len = left;
	c->req_len = 0;
	c->sent = 0;
	c->committed = false;
	c->req_done = false;
	c->state = H_READ;
	c->ep = UINT32_MAX;
	/* a pipelined head is due from now; otherwise from its first byte */
	c->head_start_ns = c->len ? w->now_ns : 0;
	iod_mesh_conn_watch(w, c, EPOLLIN);
	if (c->len)
		try_request(w, c);
}

#define ERR_RESP(code, text, body)                                                    \
	"HTTP/1.1 " code " " text "\r\ncontent-type: text/plain\r\nx-iod-mesh: " body \
	"\r\ncontent-length: %zu\r\n%s\r\n" body "\n"

/* Answer the request ourselves (no upstream could), then go on or close. */
static void respond(struct worker *w, struct conn *c, uint16_t code, bool close_after)
{
	const char *fmt;
	static __thread char resp[512];

	switch (code) {
	case 400: fmt = ERR_RESP("400", "Bad Request", "malformed request"); break;
	case 408: fmt = ERR_RESP("408", "Request Timeout", "request head not sent in time"); break;
	case 431:
		fmt = ERR_RESP("431", "Request Header Fields Too Large", "request head too large");
		break;
	case 502: fmt = ERR_RESP("502", "Bad Gateway", "upstream reset or bad response"); break;
	case 504: fmt = ERR_RESP("504", "Gateway Timeout", "upstream timed out"); break;
	case 503:
	default: fmt = ERR_RESP("503", "Service Unavailable", "no healthy upstream"); break;
	}
	/* body length = the x-iod-mesh text + newline: find it from the format */
	const char *b = strstr(fmt, "x-iod-mesh: ") + 12;
	size_t blen = (size_t)(strchr(b, '\r') - b) + 1;
	if (close_after || !c->req_done)
		c->keep_alive = false; /* unread body bytes would be taken for a request */
	int n =
	    snprintf(resp, sizeof(resp), fmt, blen, c->keep_alive ? "" : "connection: close\r\n");
	if (c->state == H_UPSTREAM) {
		c->span.bytes_out += (uint64_t)n;
		span_finish(w, c, code);
	} else {
		STAT_INC(svc_of(w, c)->st.errors);
	}
	request_end(w, c);
	if (c->req_len == 0)
		c->req_len = c->len; /* unparsable: drop everything read */
	c->state = c->keep_alive ? H_READ : H_CLOSING;
	c->out = resp;
	c->out_len = (uint32_t)n;
	if (!client_flush(w, c))
		return;
	next_request(w, c);
}

/* Send an answer the proxy made itself (resp: n bytes that outlive the
 * call) for the request in flight: traced with its status, the request's
 * breaker units given back, then on to the next request or the close. */
static void answer_own(struct worker *w, struct conn *c, const char *resp, uint32_t n,
                       uint16_t code)
{
	c->span.bytes_out += n;
	span_finish(w, c, code);
	request_end(w, c);
	c->state = c->keep_alive ? H_READ : H_CLOSING;
	c->out = resp;
	c->out_len = n;
	if (!client_flush(w, c))
		return;
	next_request(w, c);
}

/* A call a policy refuses: 403 naming the policy and why, counted, traced. */
static void deny(struct worker *w, struct conn *c, const struct iod_sec_verdict *v)
{
	static __thread char resp[IOD_ERR_MSG_MAX + 512];
	char body[IOD_ERR_MSG_MAX + 128];
	int bl = snprintf(body, sizeof(body), "forbidden by policy %s: %s\n", v->policy, v->reason);
	if (bl >= (int)sizeof(body))
		bl = (int)sizeof(body) - 1;
	if (!c->req_done)
		c->keep_alive = false;
	int n = snprintf(resp, sizeof(resp),
	                 "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nx-iod-mesh: "
	                 "denied\r\nx-iod-policy: %s\r\ncontent-length: %d\r\n%s\r\n%s",
	                 v->policy, bl, c->keep_alive ? "" : "connection: close\r\n", body);
	if (n >= (int)sizeof(resp))
		n = (int)sizeof(resp) - 1;
	answer_own(w, c, resp, (uint32_t)n, 403);
}

/* A request an injected abort answers (`iod chaos abort`): the status,
 * marked as a fault so nobody mistakes it for the upstream's answer. */
static void fault_abort(struct worker *w, struct conn *c, uint16_t code)
{
	static __thread char resp[512];
	static const char body[] = "fault filter abort\n";
	const char *text = code == 503   ? "Service Unavailable"
	                   : code == 500 ? "Internal Server Error"
	                   : code == 502 ? "Bad Gateway"
	                   : code == 504 ? "Gateway Timeout"
	                   : code == 429 ? "Too Many Requests"
	                   : code == 404 ? "Not Found"
	                   : code < 300  ? "OK"
	                                 : "Fault Injected";
	STAT_INC(svc_of(w, c)->st.fault_aborts);
	if (!c->req_done)
		c->keep_alive = false; /* unread body bytes would be taken for a request */
	int n = snprintf(resp, sizeof(resp),
	                 "HTTP/1.1 %u %s\r\ncontent-type: text/plain\r\nx-iod-mesh: fault\r\n"
	                 "x-iod-fault: abort\r\ncontent-length: %zu\r\n%s\r\n%s",
	                 code, text, sizeof(body) - 1, c->keep_alive ? "" : "connection: close\r\n",
	                 body);
	answer_own(w, c, resp, (uint32_t)n, code);
}

static void dispatch(struct worker *w, struct conn *c, uint32_t exclude);
static void start_send(struct worker *w, struct conn *u);

/* End a failed attempt: close its connection, tell outlier detection. */
static void attempt_cleanup(struct worker *w, struct conn *c, enum fail f)
{
	struct wsvc *s = svc_of(w, c);
	struct conn *u = c->peer;

	if (u)
		up_close(w, u);
	c->peer = NULL;
	brk_release(s, c, &c->holds_pending, IOD_MESH_BRK_PENDING);
	if (f != F_STALE)
		iod_mesh_ep_done(w, s, c,
		                 f == F_CONNECT   ? IOD_MESH_CONNECT_FAIL
		                 : f == F_BADRESP ? IOD_MESH_HTTP_5XX
		                                  : IOD_MESH_RESET);
	release_ep(s, c);
}

/* Retry (the caller holds a retries unit): at once when nothing reached a
 * server, else after full-jitter backoff. */
static void schedule_retry(struct worker *w, struct conn *c, enum fail f)
{
	struct wsvc *s = svc_of(w, c);
	STAT_INC(s->st.retries);
	if (f == F_CONNECT || f == F_STALE) {
		dispatch(w, c, c->ep);
		return;
	}
	uint64_t d = iod_mesh_retry_backoff_ns(&s->svc.retry, c->attempts, &w->rng);
	c->retry_at_ns = w->now_ns + IOD_MAX(d, 1u);
}

/* An attempt failed: retry when safe and allowed, else answer with an error.
 * Safe: a connect failure, a reused connection that died before any response
 * byte (the server closed it while idle), or an idempotent method. */
static void attempt_failed(struct worker *w, struct conn *c, enum fail f)
{
	struct wsvc *s = svc_of(w, c);

	attempt_cleanup(w, c, f);
	brk_release(s, c, &c->holds_retry, IOD_MESH_BRK_RETRIES);
	bool safe = (f == F_CONNECT || f == F_STALE || c->idem) && !c->committed;
	if (s->active && safe &&
	    iod_mesh_retry_allowed(&s->breaker, &s->brk, &s->svc.retry, c->attempts)) {
		c->holds_retry = true;
		schedule_retry(w, c, f);
		return;
	}
	respond(w, c, f == F_CONNECT || f == F_STALE ? 503 : f == F_TIMEOUT ? 504 : 502, false);
}

static void dispatch(struct worker *w, struct conn *c, uint32_t exclude)
{
	struct wsvc *s = svc_of(w, c);
	bool panic;
	if (!s->active) {
		respond(w, c, 503, false); /* the service left the view */
		return;
	}
	int ep = iod_mesh_lb_pick(&s->lb, &s->svc, &s->outlier, w->node, w->rack, c->affinity,
	                          exclude, &w->rng, &panic);
	if (ep < 0) {
		respond(w, c, 503, false);
		return;
	}
	if (panic)
		STAT_INC(s->st.panic);
	c->ep = (uint32_t)ep;
	c->svc_gen = s->gen;
	c->ep_ip4 = s->svc.eps[ep].ip4;
	c->ep_port = s->svc.eps[ep].port;
	c->attempts++;
	c->ep_active = true;
	s->outlier.hosts[ep].active_requests++;
	STAT_INC(s->eps[ep].active);

	/* which SVID the upstream connection presents (mTLS endpoints): a pooled
	 * connection is reused only by callers of the same identity */
	int id = iod_mesh_upstream_identity(w, s, (uint32_t)ep, c);
	if (id < 0) {
		release_ep(s, c);
		respond(w, c, 503, false);
		return;
	}
	struct conn *u = s->idle[ep], **up = &s->idle[ep];
	for (uint32_t k = 0; u && u->mtls_id != id && k < IOD_MESH_POOL_IDLE_MAX; k++) {
		up = &u->next_idle;
		u = u->next_idle;
	}
	if (u && u->mtls_id != id)
		u = NULL;
	if (u) {
		*up = u->next_idle;
		s->idle_n[ep]--;
		u->next_idle = NULL;
		u->reused = true;
		u->peer = c;
		c->peer = u;
		c->span.tp_up = u->tp;
		start_send(w, u);
		return;
	}
	if (iod_mesh_breaker_acquire(&s->breaker, &s->brk, IOD_MESH_BRK_CONNECTIONS)) {
		STAT_INC(s->st.overflow);
		respond(w, c, 503, false);
		return;
	}
	if (iod_mesh_breaker_acquire(&s->breaker, &s->brk, IOD_MESH_BRK_PENDING)) {
		iod_mesh_breaker_release(&s->breaker, IOD_MESH_BRK_CONNECTIONS);
		STAT_INC(s->st.overflow);
		respond(w, c, 503, false);
		return;
	}
	c->holds_pending = true;
	/* behind another node's proxy: TLS on this very socket (no relay hop) */
	struct iod_sec_tls *tls = NULL;
	char pre[192];
	uint32_t pre_len = 0;
	bool direct_tls = s->svc.eps[c->ep].mtls_ip4 && !w->p->opts.mtls_relay;
	int fd = direct_tls ? iod_mesh_upstream_dial_tls(w, s, c->ep, id, &tls, pre, &pre_len)
	                    : iod_mesh_upstream_connect(w, s, c->ep, id);
	if (fd < 0) {
		iod_mesh_breaker_release(&s->breaker, IOD_MESH_BRK_CONNECTIONS);
		attempt_failed(w, c, F_CONNECT);
		return;
	}
	u = iod_mesh_conn_get(w, CK_HTTP_UP, fd);
	if (u && tls) {
		u->tls = tls;
		u->tls_phase = 1;
		memcpy(u->buf, pre, pre_len);
		u->pre_len = (uint16_t)pre_len;
		iod_strlcpy(u->mtls_peer, s->svc.eps[c->ep].node, sizeof(u->mtls_peer));
	}
	if (!u) {
		iod_sec_tls_close(tls);
		close(fd);
		iod_mesh_breaker_release(&s->breaker, IOD_MESH_BRK_CONNECTIONS);
		release_ep(s, c);
		respond(w, c, 503, false);
		return;
	}
	u->holds_cx = true;
	u->tp = tls ? IOD_MESH_PATH_TCP : w->up_tp;
	c->span.tp_up = u->tp;
	STAT_INC(s->st.tp_up[u->tp]);
	u->mtls_id = (uint16_t)id;
	u->life = s->life;
	u->slot = c->slot;
	u->ep = c->ep;
	u->svc_gen = s->gen;
	u->peer = c;
	c->peer = u;
	u->state = U_CONNECTING;
	u->connect_start_ns = w->now_ns;
	u->req_start_ns = w->now_ns;
	if (iod_mesh_conn_watch(w, u, EPOLLOUT))
		attempt_failed(w, c, F_CONNECT);
}

/* Write to the upstream, through its TLS session when it has one: > 0
 * bytes, -1 with errno EAGAIN (would block), or <= 0 dead. A TLS write
 * that said EAGAIN is retried with the same length (GnuTLS's rule: the
 * bytes stay where they are until they went). */
static ssize_t up_write(struct conn *u, const char *buf, size_t len)
{
	if (!u->tls)
		return send(u->fd, buf, len, MSG_NOSIGNAL);
	unsigned want = 0;
	struct iod_err e = {0};
	size_t l = u->tls_wlen ? u->tls_wlen : len;
	long n = iod_sec_tls_write(u->tls, buf, l, &want, &e);
	if (n == -EAGAIN) {
		u->tls_wlen = (uint32_t)l;
		errno = EAGAIN;
		return -1;
	}
	u->tls_wlen = 0;
	if (n < 0)
		errno = ECONNRESET;
	return n < 0 ? -1 : n;
}

/* Read from the upstream (through its TLS session): as read(2). */
static ssize_t up_recv(struct conn *u, char *buf, size_t len)
{
	if (!u->tls)
		return read(u->fd, buf, len);
	unsigned want = 0;
	struct iod_err e = {0};
	long n = iod_sec_tls_read(u->tls, buf, len, &want, &e);
	if (n == -EAGAIN) {
		errno = EAGAIN;
		return -1;
	}
	if (n < 0)
		errno = ECONNRESET;
	return n < 0 ? -1 : n;
}

/* Send what the client's buffer holds of the request; false when the
 * attempt failed (u is gone). The response may arrive meanwhile (a server
 * may answer before the body ends), so u reads while it sends. */
static bool up_send(struct worker *w, struct conn *u)
{
	struct conn *c = u->peer;
	while (c->sent < c->req_len) {
		ssize_t n = up_write(u, c->buf + c->sent, c->req_len - c->sent);
		if (n > 0) {
			c->sent += (uint32_t)n;
			u->last_io_ns = w->now_ns;
		} else if (n < 0 && errno == EAGAIN) {
			up_rearm(w, u);
			return true;
		} else {
			attempt_failed(w, c, u->reused && u->len == 0 ? F_STALE : F_RESET);
			return false;
		}
	}
	if (!c->req_done) {
		/* All of the buffer went out and more body is to come. Once the
		 * body outgrew the buffer, sent bytes are dropped and the request
		 * can no longer be resent. */
		IOD_ASSERT_HOT(c->len == c->req_len);
		if (c->sent == c->len && (c->committed || c->len == IOD_MESH_HTTP_BUF)) {
			c->len = c->req_len = c->sent = 0;
			c->committed = true;
		}
		client_rearm(w, c);
	} else {
		u->send_done = true;
	}
	up_rearm(w, u);
	return true;
}

static void start_send(struct worker *w, struct conn *u)
{
	struct conn *c = u->peer;
	u->state = U_WAIT_HEAD;
	u->send_done = false;
	u->len = 0;
	c->sent = 0;
	u->req_start_ns = w->now_ns;
	u->connect_start_ns = 0;
	u->last_io_ns = w->now_ns;
	up_send(w, u);
}

/* The response is complete on the client side: pool or close, go on. */
static void complete(struct worker *w, struct conn *c)
{
	struct wsvc *s = svc_of(w, c);
	struct conn *u = c->peer;

	iod_mesh_ep_done(w, s, c, u->status >= 500 ? IOD_MESH_HTTP_5XX : IOD_MESH_OK);
	span_finish(w, c, u->status);
	if (u->body.kind == IOD_HTTP_BODY_CLOSE)
		c->keep_alive = false; /* the client, too, reads this body to EOF */
	if (!u->send_done)
		c->keep_alive = false; /* answered before the body ended: rest unread */
	c->peer = NULL;
	u->peer = NULL;
	if (u->resp_keep_alive && u->send_done && u->body.kind != IOD_HTTP_BODY_CLOSE &&
	    !u->peer_revoked && c->svc_gen == s->gen && u->life == s->life && s->active &&
	    s->idle_n[u->ep] < IOD_MESH_POOL_IDLE_MAX) {
		u->state = U_IDLE;
		u->next_idle = s->idle[u->ep];
		s->idle[u->ep] = u;
		s->idle_n[u->ep]++;
		u->last_io_ns = w->now_ns;
		iod_mesh_conn_watch(w, u, EPOLLIN | EPOLLRDHUP);
	} else {
		up_close(w, u);
	}
	request_end(w, c);
	/* The request is answered and recorded: closing the client now (the
	 * client or the upstream asked for it) is not an abandoned request. */
	c->state = H_READ;
	next_request(w, c);
}

/* Forward u->buf[0..n) to the client; on success continue the body. */
static void forward(struct worker *w, struct conn *c, struct conn *u, uint32_t n, bool done)
{
	c->out = u->buf;
	c->out_len = n;
	c->span.bytes_out += n;
	if (done)
		u->state = U_DONE;
	if (!client_flush(w, c))
		return;
	if (done) {
		complete(w, c);
		return;
	}
	u->len = 0;
	up_rearm(w, u);
}

static void on_head(struct worker *w, struct conn *c, struct conn *u)
{
	static __thread struct iod_http_msg m;
	struct wsvc *s = svc_of(w, c);

	for (;;) {
		int rc = iod_http_parse(u->buf, u->len, true, &m);
		if (rc == -EAGAIN) {
			if (u->len >= IOD_MESH_HTTP_BUF)
				attempt_failed(w, c, F_BADRESP);
			return;
		}
		if (rc) {
			attempt_failed(w, c, F_BADRESP);
			return;
		}
		if (m.status >= 200 || m.status == 101)
			break;
		/* Interim 1xx: drop it and look for the final response. */
		memmove(u->buf, u->buf + m.head_len, u->len - m.head_len);
		u->len -= m.head_len;
	}
	if (m.status == 101) {
		attempt_failed(w, c, F_BADRESP); /* upgrades are not proxied */
		return;
	}
	u->status = m.status;
	if (m.status >= 500 && c->idem) {
		/* Retry a 5xx before the client sees it, if the budget allows;
		 * otherwise the client gets the upstream's own answer. */
		brk_release(s, c, &c->holds_retry, IOD_MESH_BRK_RETRIES);
		if (!c->committed &&
		    iod_mesh_retry_allowed(&s->breaker, &s->brk, &s->svc.retry, c->attempts)) {
			c->holds_retry = true;
			attempt_cleanup(w, c, F_BADRESP);
			schedule_retry(w, c, F_BADRESP);
			return;
		}
	}
	iod_http_body_init(&u->body, &m, u->buf, c->method, c->method_len);
	u->resp_keep_alive = m.keep_alive;
	bool done = false;
	int64_t used =
	    iod_http_body_feed(&u->body, u->buf + m.head_len, u->len - m.head_len, &done);
	if (used < 0) {
		attempt_failed(w, c, F_BADRESP);
		return;
	}
	if (done && m.head_len + (uint32_t)used < u->len)
		u->resp_keep_alive = false; /* bytes after the response: do not reuse */
	c->state = H_RESP;
	c->resp_started = true;
	u->state = U_BODY;
	forward(w, c, u, m.head_len + (uint32_t)used, done);
}

static void up_read(struct worker *w, struct conn *u)
{
	struct conn *c = u->peer;
	ssize_t n = up_recv(u, u->buf + u->len, IOD_MESH_HTTP_BUF - u->len);

	if (n < 0 && errno == EAGAIN)
		return;
	/* more decrypted bytes than that read took: take them while there is room */
	while (n > 0 && u->tls && u->len + (uint32_t)n < IOD_MESH_HTTP_BUF &&
	       iod_sec_tls_pending(u->tls)) {
		ssize_t k =
		    up_recv(u, u->buf + u->len + n, IOD_MESH_HTTP_BUF - u->len - (uint32_t)n);
		if (k <= 0)
			break;
		n += k;
	}
	if (n <= 0) {
		if (u->state == U_WAIT_HEAD) {
			attempt_failed(w, c, u->reused && u->len == 0 ? F_STALE : F_RESET);
		} else if (u->body.kind == IOD_HTTP_BODY_CLOSE && n == 0) {
			u->resp_keep_alive = false;
			forward(w, c, u, 0, true);
		} else {
			/* Cut off mid-body: the client cannot be answered cleanly. */
			iod_mesh_ep_done(w, svc_of(w, c), c, IOD_MESH_RESET);
			client_close(w, c);
		}
		return;
	}
	u->len += (uint32_t)n;
	u->last_io_ns = w->now_ns;
	if (u->state == U_WAIT_HEAD) {
		on_head(w, c, u);
		return;
	}
	bool done = false;
	int64_t used = iod_http_body_feed(&u->body, u->buf, u->len, &done);
	if (used < 0) {
		iod_mesh_ep_done(w, svc_of(w, c), c, IOD_MESH_RESET);
		client_close(w, c);
		return;
	}
	if (done && (uint32_t)used < u->len)
		u->resp_keep_alive = false;
	forward(w, c, u, (uint32_t)used, done);
}

/* An upstream over TLS to another node's proxy, while connecting: the
 * handshake (the peer must be the endpoint's node), then the preamble that
 * names the endpoint (in u->buf). true once the request may go. */
static bool tls_setup(struct worker *w, struct conn *u)
{
	unsigned want = 0;
	struct iod_err e = {0};
	if (u->tls_phase == 1) {
		int rc = iod_sec_tls_handshake(u->tls, &want, &e);
		if (rc == -EAGAIN) {
			iod_mesh_conn_watch(w, u, want == POLLOUT ? EPOLLOUT : EPOLLIN);
			return false;
		}
		if (rc || !iod_mesh_mtls_peer_ok(w, u->tls, u->mtls_peer)) {
			IOD_DEBUG("mesh", "mTLS upstream to node %s: %s", u->mtls_peer,
			          rc ? e.msg : "the peer is not the endpoint's node proxy");
			attempt_failed(w, u->peer, F_CONNECT);
			return false;
		}
		u->tls_phase = 2;
	}
	while (u->tls_phase == 2 && u->pre_off < u->pre_len) {
		ssize_t n = up_write(u, u->buf + u->pre_off, u->pre_len - u->pre_off);
		if (n < 0 && errno == EAGAIN) {
			iod_mesh_conn_watch(w, u, EPOLLOUT);
			return false;
		}
		if (n <= 0) {
			attempt_failed(w, u->peer, F_CONNECT);
			return false;
		}
		u->pre_off += (uint16_t)n;
	}
	u->tls_phase = 3;
	return true;
}

static void up_event(struct worker *w, struct conn *u, uint32_t ev)
{
	struct wsvc *s = svc_of(w, u);
	switch (u->state) {
	case U_IDLE:
		/* The server closed (or sent bytes nobody asked for): drop it. */
		pool_unlink(s, u);
		up_close(w, u);
		return;
	case U_CONNECTING: {
		if (!u->tls || u->tls_phase == 1) { /* the TCP connect's result, once */
			int err = 0;
			socklen_t l = sizeof(err);
			getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &l);
			if (err || (ev & (EPOLLERR | EPOLLHUP))) {
				attempt_failed(w, u->peer, F_CONNECT);
				return;
			}
		}
		if (u->tls && !tls_setup(w, u))
			return;
		brk_release(s, u->peer, &u->peer->holds_pending, IOD_MESH_BRK_PENDING);
		start_send(w, u);
		return;
	}
	case U_WAIT_HEAD:
	case U_BODY:
		if ((ev & EPOLLOUT) && u->peer && !u->send_done && !up_send(w, u))
			return;
		/* read unless the client still holds the last piece of u->buf */
		if ((ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && u->peer &&
		    !u->peer->out_len)
			up_read(w, u);
		return;
	case U_DONE: return; /* waiting for the client to take the last bytes */
	}
}

/* Read and parse a request; send it on when it is whole. */
static void try_request(struct worker *w, struct conn *c)
{
	static __thread struct iod_http_msg m;
	struct wsvc *s = svc_of(w, c);
	struct iod_mesh_traceparent tp;
	bool done = false;

	int rc = iod_http_parse(c->buf, c->len, false, &m);
	if (rc == -EAGAIN) {
		if (c->len >= HEAD_MAX)
			respond(w, c, 431, true);
		return;
	}
	if (rc) {
		respond(w, c, rc == -E2BIG ? 431 : 400, true);
		return;
	}
	iod_http_body_init(&c->req_body, &m, c->buf, NULL, 0);
	int64_t used =
	    iod_http_body_feed(&c->req_body, c->buf + m.head_len, c->len - m.head_len, &done);
	if (used < 0) {
		respond(w, c, 400, true);
		return;
	}
	/* A body not yet complete is streamed: the head goes out now. */
	c->req_done = done;
	c->committed = false;
	uint32_t req_len = m.head_len + (uint32_t)used;

	/* Trace context (W3C level 2): continue the caller's trace when it sent
	 * exactly one valid traceparent, else start one; its tracestate goes on
	 * only with a continued trace, and only when the whole list is valid. */
	struct iod_mesh_span *sp = &c->span;
	memset(sp, 0, sizeof(*sp));
	sp->kind = IOD_MESH_SPAN_HTTP;
	sp->tp_down = c->tp;
	uint8_t flags = 1;
	bool continued = false;
	if (m.traceparent >= 0 && m.traceparent_n == 1) {
		const struct iod_http_header *h = &m.hdr[m.traceparent];
		if (!iod_mesh_traceparent_parse(c->buf + h->value_off, h->value_len, &tp)) {
			memcpy(sp->trace_id, tp.trace_id, 16);
			memcpy(sp->parent_id, tp.span_id, 8);
			flags = tp.flags;
			continued = true;
		}
	}
	if (!continued)
		iod_mesh_trace_ids_new(&w->rng, sp->trace_id, 16);
	iod_mesh_trace_ids_new(&w->rng, sp->span_id, 8);
	memcpy(tp.trace_id, sp->trace_id, 16);
	memcpy(tp.span_id, sp->span_id, 8);
	tp.flags = flags;
	static __thread char ts_in[IOD_MESH_HTTP_BUF], ts_out[IOD_MESH_HTTP_BUF];
	int ts_len = 0;
	if (continued && m.tracestate_n) {
		size_t tn = 0;
		for (uint32_t i = 0; i < m.hdr_n; i++) {
			const struct iod_http_header *h = &m.hdr[i];
			if (!iod_http_header_is(c->buf, h, "tracestate"))
				continue;
			if (tn)
				ts_in[tn++] = ','; /* RFC 9110 5.3: fields combine with ',' */
			memcpy(ts_in + tn, c->buf + h->value_off, h->value_len);
			tn += h->value_len;
		}
		ts_len = iod_mesh_tracestate_clean(ts_in, tn, ts_out, sizeof(ts_out));
		if (ts_len < 0)
			ts_len = 0; /* invalid: dropped whole */
	}

	/* Rewrite: the head without any traceparent or tracestate, then ours,
	 * then the body and what follows. */
	char *o = w->scratch;
	uint32_t head_end = m.head_len - 2; /* before the blank line */
	uint32_t rest = c->len - req_len;
	uint32_t k = m.hdr_n ? m.hdr[0].name_off : head_end;
	memcpy(o, c->buf, k);
	for (uint32_t i = 0; i < m.hdr_n; i++) {
		const struct iod_http_header *h = &m.hdr[i];
		uint32_t e = h->value_off + h->value_len;
		while (e + 1 < m.head_len && !(c->buf[e] == '\r' && c->buf[e + 1] == '\n'))
			e++;
		e += 2;
		if (iod_http_header_is(c->buf, h, "traceparent") ||
		    iod_http_header_is(c->buf, h, "tracestate"))
			continue;
		memcpy(o + k, c->buf + h->name_off, e - h->name_off);
		k += e - h->name_off;
	}
	uint32_t total =
	    k + 13 + 55 + 2 + (ts_len ? 12 + (uint32_t)ts_len + 2 : 0) + 2 + (uint32_t)used + rest;
	if (total > IOD_MESH_HTTP_BUF) {
		respond(w, c, 431, true);
		return;
	}
	memcpy(o + k, "traceparent: ", 13);
	k += 13;
	char tpv[56];
	iod_mesh_traceparent_format(&tp, tpv);
	memcpy(o + k, tpv, 55);
	k += 55;
	memcpy(o + k, "\r\n", 2);
	k += 2;
	if (ts_len) {
		memcpy(o + k, "tracestate: ", 12);
		k += 12;
		memcpy(o + k, ts_out, (size_t)ts_len);
		k += (uint32_t)ts_len;
		memcpy(o + k, "\r\n", 2);
		k += 2;
	}
	memcpy(o + k, "\r\n", 2);
	k += 2;
	memcpy(o + k, c->buf + m.head_len, (size_t)used + rest);
	IOD_ASSERT_HOT(k + used + rest == total);
	memcpy(c->buf, o, total);
	c->req_len = k + (uint32_t)used;
	c->len = total;

	c->method_len = (uint8_t)IOD_MIN(m.method_len, sizeof(c->method) - 1);
	memcpy(c->method, c->buf + m.method_off, c->method_len);
	c->method[c->method_len] = 0;
	memcpy(sp->method, c->method, c->method_len + 1);
	size_t pl = IOD_MIN((size_t)m.target_len, sizeof(sp->path) - 1);
	memcpy(sp->path, c->buf + m.target_off, pl);
	sp->path[pl] = 0;
	iod_strlcpy(sp->service, s->svc.name, sizeof(sp->service));
	iod_strlcpy(sp->client, c->client_addr, sizeof(sp->client));
	sp->start_unix_ns = iod_mesh_unix_ns(w);
	sp->bytes_in = c->req_len;
	c->idem = iod_mesh_http_idempotent(c->method, c->method_len);
	c->keep_alive = m.keep_alive;
	c->resp_started = false;
	c->attempts = 0;
	c->req_start_ns = w->now_ns;
	c->state = H_UPSTREAM;
	STAT_INC(s->st.requests);
	/* the receiving side's policy check, per request (methods may differ) */
	if (w->authz) {
		struct iod_sec_verdict v;
		iod_mesh_authz_check(w, &s->svc, c->peer_known, c->peer_uid, c->method, &v,
		                     sp->caller, sizeof(sp->caller));
		if (!v.allow) {
			iod_strlcpy(sp->denied_by, v.policy, sizeof(sp->denied_by));
			STAT_INC(s->st.denied);
			deny(w, c, &v);
			return;
		}
	}
	/* The client stays registered for EPOLLIN: re-arming per request would
	 * cost two epoll_ctl calls; pipelined bytes defer it (client_event). */
	if (iod_mesh_breaker_acquire(&s->breaker, &s->brk, IOD_MESH_BRK_REQUESTS)) {
		STAT_INC(s->st.overflow);
		respond(w, c, 503, false);
		return;
	}
	c->holds_request = true;
	if (!done && m.expect_continue && m.minor == 1) {
		/* Let the client send its body now (as nginx does) rather than
		 * after its own wait: the proxy streams it either way. */
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		if (send(c->fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(cont) - 1) {
			client_close(w, c);
			return;
		}
	}
	/* injected faults (Envoy's fault filter sits here, before the router):
	 * a delay holds the request on the retry timer, an abort answers it */
	uint64_t fdelay;
	uint16_t fabort;
	iod_mesh_fault_roll(&s->svc.fault, sp->start_unix_ns, &w->rng, &fdelay, &fabort);
	if (fdelay) {
		STAT_INC(s->st.fault_delays);
		c->fault_abort = fabort;
		c->ep = UINT32_MAX;
		c->retry_at_ns = w->now_ns + fdelay;
	} else if (fabort) {
		fault_abort(w, c, fabort);
		return;
	} else {
		dispatch(w, c, UINT32_MAX);
	}
	if (!done && c->in_use && c->kind == CK_HTTP_CLIENT && c->state == H_UPSTREAM)
		client_rearm(w, c);
}

/* Read more of a streaming request body (room permitting) and pass it on. */
static void body_read(struct worker *w, struct conn *c)
{
	size_t room = IOD_MESH_HTTP_BUF - c->len;
	bool done = false;

	if (!body_wanted(c)) {
		client_rearm(w, c);
		return;
	}
	if (c->req_body.kind == IOD_HTTP_BODY_LENGTH)
		room = (size_t)IOD_MIN((uint64_t)room, c->req_body.remaining);
	ssize_t n = read(c->fd, c->buf + c->len, room);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		client_close(w, c); /* the client gave up mid-body */
		return;
	}
	int64_t used = iod_http_body_feed(&c->req_body, c->buf + c->len, (size_t)n, &done);
	if (used < 0) {
		/* Bad chunked framing mid-stream: the upstream has a part of the
		 * request and is cut off; the client gets a 400 and a close unless
		 * a response is already on its way (then both are cut). */
		if (c->state == H_UPSTREAM && !c->resp_started) {
			if (c->peer)
				up_close(w, c->peer);
			c->peer = NULL;
			respond(w, c, 400, true);
		} else {
			client_close(w, c);
		}
		return;
	}
	c->len += (uint32_t)n;
	c->req_len += (uint32_t)used;
	c->span.bytes_in += (uint64_t)used;
	c->req_done = done;
	c->last_io_ns = w->now_ns;
	struct conn *u = c->peer;
	if (u && (u->state == U_WAIT_HEAD || u->state == U_BODY) && !u->send_done) {
		if (!up_send(w, u))
			return;
	}
	client_rearm(w, c);
}

static void client_event(struct worker *w, struct conn *c, uint32_t ev)
{
	if (c->state == H_LINGER) {
		linger_read(w, c, ev);
		return;
	}
	if (c->out_len) {
		if (!client_flush(w, c))
			return;
		if (c->state == H_CLOSING) {
			client_linger(w, c);
		} else if (c->state == H_RESP) {
			struct conn *u = c->peer;
			if (u->state == U_DONE) {
				complete(w, c);
			} else {
				u->len = 0;
				if (c->req_done)
					iod_mesh_conn_watch(w, c, EPOLLIN);
				else
					client_rearm(w, c);
				up_rearm(w, u);
			}
		} else {
			next_request(w, c);
		}
		return;
	}
	if ((c->state == H_UPSTREAM || c->state == H_RESP) && !c->req_done) {
		if (ev & (EPOLLERR | EPOLLHUP))
			client_close(w, c);
		else
			body_read(w, c);
		return;
	}
	if (c->state != H_READ) {
		/* Not reading while a request is in flight: a hang-up ends it;
		 * pipelined bytes wait (stop polling until the response is done). */
		if (ev & (EPOLLERR | EPOLLHUP))
			client_close(w, c);
		else
			iod_mesh_conn_watch(w, c, 0);
		return;
	}
	if (c->len >= HEAD_MAX) {
		try_request(w, c); /* answers 431 */
		return;
	}
	ssize_t n = read(c->fd, c->buf + c->len, HEAD_MAX - c->len);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		client_close(w, c);
		return;
	}
	if (!c->head_start_ns)
		c->head_start_ns = w->now_ns; /* a keep-alive connection's next head */
	c->len += (uint32_t)n;
	c->last_io_ns = w->now_ns;
	try_request(w, c);
}

void iod_mesh_http_accept(struct worker *w, struct wsvc *s, int fd, const struct accepted *a)
{
	struct conn *c = iod_mesh_conn_get(w, CK_HTTP_CLIENT, fd);
	if (!c) {
		w->cx_refused++;
		iod_mesh_clients_release(w->clients, a->ip4, a->key_uid);
		close(fd);
		return;
	}
	iod_mesh_conn_client(w, c, a);
	c->slot = (uint32_t)(s - w->svcs);
	c->life = s->life;
	c->state = H_READ;
	c->head_start_ns = w->now_ns; /* the first head is due from accept (nginx) */
	c->peer_known = a->peer_known;
	c->peer_uid = a->peer_uid;
	const char *client = a->client, *colon = strrchr(client, ':');
	c->affinity = iod_hash_bytes(client, colon ? (size_t)(colon - client) : strlen(client), 0);
	STAT_INC(s->st.cx_active);
	if (iod_mesh_conn_watch(w, c, EPOLLIN))
		client_close(w, c);
}

void iod_mesh_http_event(struct worker *w, struct conn *c, uint32_t ev)
{
	if (c->kind == CK_HTTP_CLIENT)
		client_event(w, c, ev);
	else
		up_event(w, c, ev);
}

void iod_mesh_http_timer(struct worker *w, struct conn *c)
{
	struct wsvc *s = svc_of(w, c);
	const struct iod_mesh_timeouts *t = &s->svc.timeout;

	if (c->kind == CK_HTTP_UP) {
		if (c->state == U_IDLE) {
			if (iod_mesh_timeout_check(t, 0, 0, c->last_io_ns, w->now_ns) ==
			    IOD_MESH_T_IDLE) {
				pool_unlink(s, c);
				up_close(w, c);
			}
			return;
		}
		if (c->state == U_DONE || !c->peer)
			return;
		enum iod_mesh_timer k =
		    iod_mesh_timeout_check(t, c->state == U_CONNECTING ? c->connect_start_ns : 0,
		                           c->req_start_ns, 0, w->now_ns);
		if (k == IOD_MESH_T_CONNECT)
			attempt_failed(w, c->peer, F_CONNECT);
		else if (k == IOD_MESH_T_REQUEST && c->state != U_BODY)
			attempt_failed(w, c->peer, F_TIMEOUT);
		else if (k == IOD_MESH_T_REQUEST) {
			iod_mesh_ep_done(w, s, c->peer, IOD_MESH_RESET);
			client_close(w, c->peer);
		}
		return;
	}
	if (c->state == H_LINGER) {
		if (w->now_ns >= c->linger_until_ns)
			client_close(w, c); /* lingered long enough */
		return;
	}
	if (c->retry_at_ns && w->now_ns >= c->retry_at_ns) {
		c->retry_at_ns = 0;
		if (c->fault_abort) { /* an injected delay, then its abort */
			uint16_t code = c->fault_abort;
			c->fault_abort = 0;
			fault_abort(w, c, code);
			return;
		}
		dispatch(w, c, c->ep);
		return;
	}
	if (c->state != H_READ)
		return;
	/* a head must be complete by its deadline however its bytes trickle
	 * (slowloris: the idle timer alone is reset by every byte) */
	if (iod_mesh_head_expired(t, c->head_start_ns, w->now_ns)) {
		STAT_INC(s->st.head_timeouts);
		c->head_start_ns = 0;
		respond(w, c, 408, true);
		return;
	}
	if (c->len == 0 &&
	    iod_mesh_timeout_check(t, 0, 0, c->last_io_ns, w->now_ns) == IOD_MESH_T_IDLE)
		client_close(w, c);
}
