/*
 * client.c: iod's one blocking HTTP/1.1 client (include/iod/http.h).
 *
 * Every request is bounded: a deadline for the whole exchange, a limit on
 * the answer's size, and an optional stop flag that aborts it from another
 * thread. The answer is read with the codec of http.c (the same strict
 * framing the proxy applies). With credentials the connection is HTTPS
 * through src/sec/tls.c: the server must prove it is a server of the
 * cluster (or the kind the connection names: an agent's checkpoint peer), and a rotated certificate opens a new connection. One
 * connection is kept alive between requests to the same server; a
 * kept-alive one that the server closed is retried once on a fresh one,
 * unless the request may not be sent twice (POST, PATCH, or conn->once) and
 * it was written: a server that died after reading it may have applied it.
 * A kept-alive connection with something to read before the request (the
 * server closed it while idle) is dropped first, so that case needs no
 * retry.
 *
 * Hand-written rather than libcurl: a libcurl GET cost 27-31 us of client
 * CPU against 16 us here, and control-plane writes with 16 and 64 clients
 * were about 25% slower through it (issue 14's measurement).
 *
 * Never prints; the reason for a failure goes into the caller's error.
 */
#include "iod/http.h"
#include "iod/sec.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
	return iod_clock_now_ns() / IOD_NS_PER_MS;
}

static bool stopped(const struct iod_http_conn *c)
{
	return c->stop && __atomic_load_n(c->stop, __ATOMIC_RELAXED);
}

void iod_http_conn_init(struct iod_http_conn *c)
{
	memset(c, 0, sizeof(*c));
}

void iod_http_conn_close(struct iod_http_conn *c)
{
	if (c->tls)
		iod_sec_tls_close(c->tls);
	c->tls = NULL;
	if (c->open)
		close(c->fd);
	c->open = false;
	c->fd = -1;
	c->addr[0] = 0;
}

void iod_http_response_free(struct iod_http_response *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* Wait for ev (POLLIN/POLLOUT) on the connection until deadline, looking
 * at the stop flag every IOD_HTTP_STOP_SLICE_MS. 0, -ETIMEDOUT or -EINTR. */
static int wait_io(const struct iod_http_conn *c, unsigned ev, uint64_t deadline)
{
	for (;;) {
		if (stopped(c))
			return -EINTR;
		uint64_t now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		uint64_t t = deadline - now;
		if (c->stop && t > IOD_HTTP_STOP_SLICE_MS)
			t = IOD_HTTP_STOP_SLICE_MS;
		struct pollfd p = {.fd = c->fd, .events = (short)ev};
		int rc = poll(&p, 1, (int)t);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

static int split_addr(const char *addr, char *host, size_t hl, char *port, size_t pl)
{
	const char *colon = strrchr(addr, ':');
	if (!colon || (size_t)(colon - addr) >= hl || strlen(colon + 1) >= pl)
		return -EINVAL;
	const char *h = addr;
	size_t n = (size_t)(colon - addr);
	if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
		h++;
		n -= 2;
	}
	memcpy(host, h, n);
	host[n] = 0;
	strcpy(port, colon + 1);
	return 0;
}

static int errno_of_gai(int rc)
{
	return rc == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
}

/* Connect c to addr (and, over HTTPS, shake hands with a server of the cluster). */
static int conn_open(struct iod_http_conn *c, const char *addr, uint64_t deadline,
                     struct iod_err *e)
{
	char host[IOD_ADDR_MAX], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int fd, rc, one = 1;

	if (split_addr(addr, host, sizeof(host), port, sizeof(port)))
		return iod_err_set(e, -EINVAL, "bad address %s (want HOST:PORT)", addr);
	if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0)
		return iod_err_set(e, errno_of_gai(rc), "resolving %s: %s", addr, gai_strerror(rc));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return iod_err_set(e, -errno, "socket: %s", strerror(errno));
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (c->src_ip && c->src_ip[0]) {
		struct addrinfo sh = {.ai_family = ai->ai_family,
		                      .ai_socktype = SOCK_STREAM,
		                      .ai_flags = AI_NUMERICHOST | AI_PASSIVE},
		                *sa = NULL;
		if (getaddrinfo(c->src_ip, NULL, &sh, &sa) || !sa) {
			rc = -EINVAL;
		} else {
			rc = bind(fd, sa->ai_addr, sa->ai_addrlen) ? -errno : 0;
			freeaddrinfo(sa);
		}
		if (rc) {
			close(fd);
			freeaddrinfo(ai);
			return iod_err_set(e, rc, "binding %s to connect to %s: %s", c->src_ip,
			                   addr,
			                   rc == -EINVAL ? "not a numeric address" : strerror(-rc));
		}
	}
	rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	c->fd = fd;
	c->open = true;
	iod_strlcpy(c->addr, addr, sizeof(c->addr));
	if (rc && errno != EINPROGRESS) {
		rc = -errno;
	} else if (rc) {
		int err = 0;
		socklen_t l = sizeof(err);
		rc = wait_io(c, POLLOUT, deadline);
		if (!rc && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err)
			rc = -err;
	}
	if (rc) {
		iod_http_conn_close(c);
		return iod_err_set(e, rc, "connecting to %s: %s", addr,
		                   rc == -EINTR ? "stopped" : strerror(-rc));
	}
	if (!c->creds)
		return 0;
	struct iod_err e1 = {0};
	rc = iod_sec_tls_connect(c->creds, fd,
	                         c->tls_peer_kind ? (enum iod_sec_kind)c->tls_peer_kind
	                                          : IOD_SEC_KIND_SERVER,
	                         deadline, &c->tls, &e1);
	if (rc) {
		c->tls = NULL;
		iod_http_conn_close(c);
		return iod_err_set(e, rc, "HTTPS to %s: %s%s", addr, e1.msg,
		                   rc == -EACCES ? "" : " (is it an iod server with --pki?)");
	}
	const struct iod_sec_cert_info *peer = iod_sec_tls_peer(c->tls);
	if (c->tls_peer_name && c->tls_peer_name[0] &&
	    (!peer || strcmp(peer->id.name, c->tls_peer_name))) {
		/* the right kind of peer, but not the one dialled: nothing is sent */
		rc = iod_err_set(e, -EACCES,
		                 "HTTPS to %s: it presented the certificate of %s \"%s\", not of "
		                 "%s",
		                 addr, peer ? iod_sec_kind_name(peer->id.kind) : "nobody",
		                 peer ? peer->id.name : "", c->tls_peer_name);
		iod_http_conn_close(c);
		return rc;
	}
	c->tls_gen = iod_sec_tls_creds_rotations(c->creds);
	return 0;
}

static int send_all(struct iod_http_conn *c, const char *p, size_t n, uint64_t deadline)
{
	while (n) {
		unsigned want = POLLOUT;
		long w;
		if (c->tls) {
			struct iod_err e = {0};
			w = iod_sec_tls_write(c->tls, p, n, &want, &e);
		} else {
			w = send(c->fd, p, n, MSG_NOSIGNAL);
			if (w < 0)
				w = (errno == EAGAIN || errno == EINTR) ? -EAGAIN : -errno;
		}
		if (w > 0) {
			c->sent = true;
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w == -EAGAIN) {
			int rc = wait_io(c, want, deadline);
			if (rc)
				return rc;
			continue;
		}
		return w < 0 ? (int)w : -EPIPE;
	}
	return 0;
}

/* Append what the connection has (waiting for it) to b: 0, -EPIPE at EOF. */
static int read_some(struct iod_http_conn *c, struct iod_buf *b, uint64_t deadline)
{
	char tmp[16384];
	for (;;) {
		unsigned want = POLLIN;
		long r;
		if (c->tls) {
			struct iod_err e = {0};
			r = iod_sec_tls_read(c->tls, tmp, sizeof(tmp), &want, &e);
		} else {
			r = recv(c->fd, tmp, sizeof(tmp), 0);
			if (r < 0)
				r = (errno == EAGAIN || errno == EINTR) ? -EAGAIN : -errno;
		}
		if (r > 0)
			return iod_buf_append(b, tmp, (size_t)r) ? -ENOMEM : 0;
		if (r == 0)
			return -EPIPE;
		if (r != -EAGAIN)
			return (int)r;
		int rc = wait_io(c, want, deadline);
		if (rc)
			return rc;
	}
}

/* What the body decoder hands over: the payload, bounded. */
struct sink {
	struct iod_buf *body;
	size_t max;
	bool too_big, oom;
};

static void on_data(void *ctx, const char *p, size_t n)
{
	struct sink *s = ctx;
	if (s->too_big || s->oom)
		return;
	if (s->body->len + n > s->max) {
		s->too_big = true;
		return;
	}
	if (iod_buf_append(s->body, p, n))
		s->oom = true;
}

/* Only the status line (a health check): its code in r->status. */
static int read_status(struct iod_http_conn *c, struct iod_http_response *r, uint64_t deadline)
{
	struct iod_buf b;
	int rc = 0;
	iod_buf_init(&b);
	while (!(b.len && memchr(b.data, '\n', b.len))) {
		if (b.len > 256 || (rc = read_some(c, &b, deadline))) {
			rc = rc ? rc : -EPROTO;
			break;
		}
	}
	int code = 0;
	if (!rc && (sscanf(b.data, "HTTP/%*d.%*d %d", &code) != 1 || code < 100 || code > 999))
		rc = -EPROTO;
	r->status = code;
	iod_buf_free(&b);
	return rc;
}

/* One answer on c: head (through the codec), then the framed body. */
static int read_response(struct iod_http_conn *c, const char *method, struct iod_http_response *r,
                         uint64_t deadline, bool *keep)
{
	struct iod_buf b, body;
	struct iod_http_msg *m = malloc(sizeof(*m));
	struct sink s = {.body = &body, .max = c->body_max ? c->body_max : IOD_HTTP_BODY_MAX};
	int rc = 0;

	if (!m)
		return -ENOMEM;
	iod_buf_init(&b);
	iod_buf_init(&body);
	for (;;) {
		rc = b.len ? iod_http_parse(b.data, b.len, true, m) : -EAGAIN;
		if (rc == 0 && m->status >= 100 && m->status < 200 && m->status != 101) {
			/* an interim answer (100 Continue): the real one follows */
			memmove(b.data, b.data + m->head_len, b.len - m->head_len);
			b.len -= m->head_len;
			continue;
		}
		if (rc != -EAGAIN)
			break;
		if ((rc = read_some(c, &b, deadline)))
			goto out;
	}
	if (rc) {
		rc = rc == -E2BIG ? -E2BIG : -EPROTO;
		goto out;
	}
	r->status = m->status;
	*keep = m->keep_alive;
	struct iod_http_body fr;
	iod_http_body_init(&fr, m, b.data, method, strlen(method));
	if (fr.kind == IOD_HTTP_BODY_CLOSE)
		*keep = false;
	size_t at = m->head_len;
	bool done = fr.kind == IOD_HTTP_BODY_NONE;
	while (!done) {
		if (at < b.len) {
			int64_t used =
			    iod_http_body_decode(&fr, b.data + at, b.len - at, &done, on_data, &s);
			if (used < 0) {
				rc = -EPROTO;
				goto out;
			}
			at += (size_t)used;
			if (s.too_big || s.oom) {
				rc = s.oom ? -ENOMEM : -E2BIG;
				goto out;
			}
			if (done)
				break;
		}
		/* keep b small: what was decoded is gone */
		b.len = 0;
		at = 0;
		rc = read_some(c, &b, deadline);
		if (rc == -EPIPE && fr.kind == IOD_HTTP_BODY_CLOSE) {
			rc = 0;
			break;
		}
		if (rc)
			goto out;
	}
	if (at < b.len)
		*keep = false; /* bytes past the answer: nothing we asked for */
	r->body = body.data;
	r->len = body.len;
	iod_buf_init(&body);
out:
	iod_buf_free(&b);
	iod_buf_free(&body);
	free(m);
	return rc;
}

static int request_head(struct iod_buf *req, const struct iod_http_conn *c, const char *addr,
                        const char *method, const char *path, const char *const *headers,
                        const char *content_type, const void *body, size_t len)
{
	bool own_host = false; /* the caller names the Host itself */
	for (uint32_t i = 0; headers && headers[i] && i < IOD_HTTP_REQ_HEADERS_MAX; i++)
		own_host |= !strncasecmp(headers[i], "host:", 5);
	iod_buf_printf(req, "%s %s HTTP/1.1\r\n", method, path);
	if (!own_host)
		iod_buf_printf(req, "Host: %s\r\n", addr);
	iod_buf_printf(req, "User-Agent: iod/%s\r\n", IOD_VERSION);
	if (c->token && c->token[0])
		iod_buf_printf(req, "Authorization: Bearer %s\r\n", c->token);
	if (body || len || !strcmp(method, "POST") || !strcmp(method, "PUT"))
		iod_buf_printf(req, "Content-Type: %s\r\nContent-Length: %zu\r\n",
		               content_type ? content_type : "application/json", len);
	if (c->status_only)
		iod_buf_printf(req, "Connection: close\r\n");
	for (uint32_t i = 0; headers && headers[i] && i < IOD_HTTP_REQ_HEADERS_MAX; i++) {
		if (strpbrk(headers[i], "\r\n"))
			return -EINVAL;
		iod_buf_printf(req, "%s\r\n", headers[i]);
	}
	iod_buf_printf(req, "\r\n");
	/* a small body goes out with the head: one write, one segment */
	if (len && len <= IOD_HTTP_BODY_INLINE_MAX && iod_buf_append(req, body, len))
		return -ENOMEM;
	return req->data ? 0 : -ENOMEM;
}

/* An idle kept-alive connection has nothing to read: readable (EOF, a reset,
 * a TLS close) means the server closed it. */
static bool conn_dead(const struct iod_http_conn *c)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN | POLLRDHUP};
	return poll(&p, 1, 0) != 0;
}

int iod_http_request(struct iod_http_conn *c, const char *addr, const char *method,
                     const char *path, const char *const *headers, const char *content_type,
                     const void *body, size_t len, uint32_t timeout_ms, struct iod_http_response *r,
                     struct iod_err *e)
{
	uint64_t deadline = now_ms() + IOD_MAX(timeout_ms, 1u);
	struct iod_buf req;
	bool keep = true;
	int rc;

	IOD_ASSERT(addr && method && path && path[0] == '/');
	memset(r, 0, sizeof(*r));
	c->sent = false;
	if (strlen(addr) >= sizeof(c->addr))
		return iod_err_set(e, -EINVAL, "address %s is longer than %d bytes", addr,
		                   IOD_ADDR_MAX - 1);
	if (strpbrk(path, " \r\n") || strpbrk(method, " \r\n"))
		return iod_err_set(e, -EINVAL, "%s %s: a blank or line break in the request line",
		                   method, path);
	iod_buf_init(&req);
	if ((rc = request_head(&req, c, addr, method, path, headers, content_type, body, len))) {
		iod_buf_free(&req);
		return iod_err_set(e, rc, "%s %s: %s", method, path,
		                   rc == -EINVAL ? "a header holds a line break" : "out of memory");
	}
	/* another server, or a rotated certificate: a new connection (the old
	 * certificate may expire while a kept-alive connection still carries it) */
	if (c->open && (strcmp(c->addr, addr) || c->status_only ||
	                (c->tls && c->tls_gen != iod_sec_tls_creds_rotations(c->creds))))
		iod_http_conn_close(c);
	if (c->open && conn_dead(c))
		iod_http_conn_close(c);
	bool reused = c->open;
	bool once = c->once || !strcmp(method, "POST") || !strcmp(method, "PATCH");
again:
	if (!c->open && (rc = conn_open(c, addr, deadline, e))) {
		iod_buf_free(&req);
		return rc;
	}
	rc = send_all(c, req.data, req.len, deadline);
	if (!rc && len > IOD_HTTP_BODY_INLINE_MAX)
		rc = send_all(c, body, len, deadline);
	if (!rc)
		rc = c->status_only ? read_status(c, r, deadline)
		                    : read_response(c, method, r, deadline, &keep);
	if (rc) {
		iod_http_conn_close(c);
		iod_http_response_free(r);
		/* a kept-alive connection the server closed: one fresh try, if
		 * a second copy cannot be applied twice */
		if (reused && (rc == -EPIPE || rc == -ECONNRESET) && !(once && c->sent)) {
			reused = false;
			goto again;
		}
		iod_buf_free(&req);
		return iod_err_set(e, rc, "%s %s on %s: %s", method, path, addr,
		                   rc == -EPIPE    ? "connection closed"
		                   : rc == -E2BIG  ? "the answer is over the body limit"
		                   : rc == -EPROTO ? "not a valid HTTP answer"
		                   : rc == -EINTR  ? "stopped"
		                                   : strerror(-rc));
	}
	if (!keep || c->status_only)
		iod_http_conn_close(c);
	iod_buf_free(&req);
	return 0;
}

int iod_http_get(const char *addr, const char *path, uint32_t timeout_ms, char **body, size_t *len)
{
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	iod_http_conn_init(&c);
	int rc = iod_http_request(&c, addr, "GET", path, NULL, NULL, NULL, 0, timeout_ms, &r, &e);
	iod_http_conn_close(&c);
	if (rc)
		return rc;
	*body = r.body;
	*len = r.len;
	return r.status;
}
