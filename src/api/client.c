/*
 * client.c: a small blocking HTTP/1.1 client for the iod API.
 *
 * Commands (`iod get`, `iod deploy`), the node agent and the benchmarks talk
 * to the control plane through this file. It keeps one connection alive,
 * bounds every wait with poll(), reads Content-Length and chunked bodies,
 * and follows the leader: a 503 answer carrying {"leader": "host:port"}
 * sends the retry there. It must never block without a timeout and never
 * retry forever.
 */
#include "iod/api.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RESP_HEADER_MAX 8192

static uint64_t mono_ms(void)
{
	return iod_clock_now(iod_clock_monotonic()) / IOD_NS_PER_MS;
}

static void add_server(struct iod_api_client *c, const char *a, size_t n)
{
	while (n && (*a == ' ')) {
		a++;
		n--;
	}
	if (!n || c->servers_n >= IOD_ARRAY_LEN(c->servers) || n >= IOD_ADDR_MAX)
		return;
	for (uint32_t i = 0; i < c->servers_n; i++)
		if (strlen(c->servers[i]) == n && !strncmp(c->servers[i], a, n))
			return;
	memcpy(c->servers[c->servers_n], a, n);
	c->servers[c->servers_n][n] = 0;
	c->servers_n++;
}

int iod_api_client_init(struct iod_api_client *c, const char *servers, struct iod_err *e)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->timeout_ms = 5000;
	c->retry_ms = 10000;
	c->retry_sleep_ms = 2;
	if (!servers || !servers[0])
		servers = getenv("IOD_SERVER");
	if (!servers || !servers[0])
		servers = IOD_API_DEFAULT_SERVER;
	for (const char *p = servers; *p;) {
		const char *q = strchr(p, ',');
		size_t n = q ? (size_t)(q - p) : strlen(p);
		add_server(c, p, n);
		p += n + (q ? 1 : 0);
	}
	for (uint32_t i = 0; i < c->servers_n; i++)
		if (!strrchr(c->servers[i], ':'))
			return iod_err_set(e, -EINVAL, "server address \"%s\" needs HOST:PORT",
			                   c->servers[i]);
	if (!c->servers_n)
		return iod_err_set(e, -EINVAL, "no server address given");
	return 0;
}

void iod_api_client_close(struct iod_api_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

void iod_api_response_free(struct iod_api_response *r)
{
	free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

const char *iod_api_error_text(const struct iod_api_response *r)
{
	const char *msg = NULL;
	if (r->json && !iod_json_get_str(r->json, "error", &msg))
		return msg;
	if (r->body && r->len)
		return r->body;
	return "no answer";
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

static int wait_fd(int fd, short ev, uint64_t deadline_ms)
{
	for (;;) {
		uint64_t now = mono_ms();
		if (now >= deadline_ms)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = ev};
		int rc = poll(&p, 1, (int)(deadline_ms - now));
		if (rc > 0)
			return 0;
		if (rc == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int dial(const char *addr, uint64_t deadline_ms, struct iod_err *e)
{
	char host[IOD_ADDR_MAX], port[16];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int fd, rc, one = 1;

	if (split_addr(addr, host, sizeof(host), port, sizeof(port)))
		return iod_err_set(e, -EINVAL, "bad address %s (want HOST:PORT)", addr);
	if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0)
		return iod_err_set(e, -EHOSTUNREACH, "resolving %s: %s", addr, gai_strerror(rc));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return iod_err_set(e, -errno, "socket: %s", strerror(errno));
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (rc && errno != EINPROGRESS) {
		rc = -errno;
		close(fd);
		return iod_err_set(e, rc, "connecting to %s: %s", addr, strerror(-rc));
	}
	if (rc) {
		int err = 0;
		socklen_t l = sizeof(err);
		rc = wait_fd(fd, POLLOUT, deadline_ms);
		if (!rc && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err)
			rc = -err;
		if (rc) {
			close(fd);
			return iod_err_set(e, rc, "connecting to %s: %s", addr, strerror(-rc));
		}
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t n, uint64_t deadline_ms)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			int rc = wait_fd(fd, POLLOUT, deadline_ms);
			if (rc)
				return rc;
			continue;
		}
		return w < 0 ? -errno : -EPIPE;
	}
	return 0;
}

/* Read into b until it holds at least want bytes (or EOF: -EPIPE). */
static int read_more(int fd, struct iod_buf *b, size_t want, uint64_t deadline_ms)
{
	char tmp[16384];
	while (b->len < want) {
		ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
		if (r > 0) {
			if (iod_buf_append(b, tmp, (size_t)r))
				return -ENOMEM;
			continue;
		}
		if (r == 0)
			return -EPIPE;
		if (errno == EAGAIN || errno == EINTR) {
			int rc = wait_fd(fd, POLLIN, deadline_ms);
			if (rc)
				return rc;
			continue;
		}
		return -errno;
	}
	return 0;
}

static const char *find_header(const char *hdrs, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = strstr(hdrs, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
		if (!strncasecmp(p + 2, name, n) && p[2 + n] == ':') {
			const char *v = p + 3 + n;
			while (*v == ' ')
				v++;
			return v;
		}
	}
	return NULL;
}

static int read_response(int fd, struct iod_api_response *r, uint64_t deadline_ms, bool head,
                         bool *keep)
{
	struct iod_buf b;
	char *end;
	size_t hlen, body_at;
	int rc;

	iod_buf_init(&b);
	for (;;) {
		if ((rc = read_more(fd, &b, b.len + 1, deadline_ms)))
			goto out;
		end = strstr(b.data, "\r\n\r\n");
		if (end)
			break;
		if (b.len > RESP_HEADER_MAX) {
			rc = -EPROTO;
			goto out;
		}
	}
	hlen = (size_t)(end - b.data) + 2;
	body_at = hlen + 2;
	char *hdrs = malloc(hlen + 1);
	if (!hdrs) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(hdrs, b.data, hlen);
	hdrs[hlen] = 0;
	if (sscanf(hdrs, "HTTP/1.%*d %d", &r->status) != 1) {
		free(hdrs);
		rc = -EPROTO;
		goto out;
	}
	const char *cl = find_header(hdrs, "Content-Length");
	const char *te = find_header(hdrs, "Transfer-Encoding");
	const char *conn = find_header(hdrs, "Connection");
	*keep = !(conn && !strncasecmp(conn, "close", 5));
	struct iod_buf body;
	iod_buf_init(&body);
	if (head || r->status == 204 || r->status == 304) {
		/* no body */
	} else if (te && !strncasecmp(te, "chunked", 7)) {
		size_t at = body_at;
		for (;;) {
			char *nl;
			while (!(nl = strstr(b.data + at, "\r\n"))) {
				if ((rc = read_more(fd, &b, b.len + 1, deadline_ms)))
					break;
			}
			if (rc)
				break;
			unsigned long sz = strtoul(b.data + at, NULL, 16);
			size_t data_at = (size_t)(nl - b.data) + 2;
			if (sz > IOD_API_BODY_MAX * 4ul) {
				rc = -E2BIG;
				break;
			}
			if ((rc = read_more(fd, &b, data_at + sz + 2, deadline_ms)))
				break;
			if (sz == 0)
				break;
			iod_buf_append(&body, b.data + data_at, sz);
			at = data_at + sz + 2;
		}
	} else if (cl) {
		unsigned long n = strtoul(cl, NULL, 10);
		if (n > IOD_API_BODY_MAX * 4ul)
			rc = -E2BIG;
		else if (!(rc = read_more(fd, &b, body_at + n, deadline_ms)))
			iod_buf_append(&body, b.data + body_at, n);
	} else {
		/* body until EOF */
		*keep = false;
		rc = read_more(fd, &b, SIZE_MAX, deadline_ms);
		if (rc == -EPIPE)
			rc = 0;
		if (!rc)
			iod_buf_append(&body, b.data + body_at, b.len - body_at);
	}
	free(hdrs);
	if (rc) {
		iod_buf_free(&body);
		goto out;
	}
	r->body = body.data;
	r->len = body.len;
	if (r->body && r->len)
		r->json = json_loadb(r->body, r->len, 0, NULL);
out:
	iod_buf_free(&b);
	return rc;
}

int iod_api_http_once(int *fd, const char *addr, const char *method, const char *path,
                      const char *content_type, const void *body, size_t len, uint32_t timeout_ms,
                      struct iod_api_response *r, struct iod_err *e)
{
	uint64_t deadline = mono_ms() + timeout_ms;
	struct iod_buf req;
	bool keep = true, reused = *fd >= 0;
	int rc;

	memset(r, 0, sizeof(*r));
	iod_strlcpy(r->server, addr, sizeof(r->server));
	iod_buf_init(&req);
	iod_buf_printf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: iod/%s\r\n", method, path,
	               addr, IOD_VERSION);
	if (body || len || !strcmp(method, "POST") || !strcmp(method, "PUT"))
		iod_buf_printf(&req, "Content-Type: %s\r\nContent-Length: %zu\r\n",
		               content_type ? content_type : "application/json", len);
	iod_buf_printf(&req, "\r\n");
again:
	if (*fd < 0) {
		*fd = dial(addr, deadline, e);
		if (*fd < 0) {
			rc = *fd;
			*fd = -1;
			iod_buf_free(&req);
			return rc;
		}
	}
	rc = send_all(*fd, req.data, req.len, deadline);
	if (!rc && len)
		rc = send_all(*fd, body, len, deadline);
	if (!rc)
		rc = read_response(*fd, r, deadline, !strcmp(method, "HEAD"), &keep);
	if (rc) {
		close(*fd);
		*fd = -1;
		iod_api_response_free(r);
		iod_strlcpy(r->server, addr, sizeof(r->server));
		/* a kept-alive connection the server closed: one fresh try */
		if (reused && (rc == -EPIPE || rc == -ECONNRESET)) {
			reused = false;
			goto again;
		}
		iod_buf_free(&req);
		return iod_err_set(e, rc, "%s %s on %s: %s", method, path, addr,
		                   rc == -EPIPE ? "connection closed" : strerror(-rc));
	}
	if (!keep) {
		close(*fd);
		*fd = -1;
	}
	iod_buf_free(&req);
	return 0;
}

/* Is this answer "go elsewhere"? Returns the leader hint (or "") when it is. */
static const char *redirect_hint(const struct iod_api_response *r)
{
	const char *hint = "";
	if (r->status != 503 || !r->json)
		return NULL;
	if (!json_is_true(json_object_get(r->json, "not_leader")))
		return NULL;
	iod_json_get_str(r->json, "leader", &hint);
	return hint;
}

/* A request that may be sent twice with the same result: reads, and whole-
 * object PUT/DELETE without a revision check (a CAS that succeeded would
 * answer a retry with a false "conflict"). POSTs (txn, lease grant,
 * deploy) are not. */
static bool idempotent(const char *method, const char *path)
{
	if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
		return true;
	return (!strcmp(method, "PUT") || !strcmp(method, "DELETE")) && !strstr(path, "prev_rev=");
}

/* 504 outcome_unknown: proposed, then leadership was lost before commit. */
static bool outcome_unknown(const struct iod_api_response *r)
{
	return r->status == 504 && r->json &&
	       json_is_true(json_object_get(r->json, "outcome_unknown"));
}

static void use_server(struct iod_api_client *c, uint32_t i)
{
	if (c->cur != i && c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	c->cur = i;
}

int iod_api_request(struct iod_api_client *c, const char *method, const char *path,
                    const char *content_type, const void *body, size_t len,
                    struct iod_api_response *r, struct iod_err *e)
{
	uint64_t deadline = mono_ms() + c->retry_ms;
	bool any_answer = false;
	uint32_t tried_in_round = 0;
	char last_err[IOD_ERR_MSG_MAX] = "unreachable";
	int rc = -EHOSTUNREACH;
	/* servers that failed to answer during this request (a killed leader
	 * refuses connections at once): a follower that still names one as
	 * leader (it has not noticed yet) is not followed back to it */
	bool down[IOD_ARRAY_LEN(c->servers)] = {0};
	bool idem = idempotent(method, path);

	c->attempts = 0;
	for (;;) {
		struct iod_err e1 = {0};
		uint32_t now_left = (uint32_t)(deadline > mono_ms() ? deadline - mono_ms() : 0);
		uint32_t t = IOD_MIN(c->timeout_ms, IOD_MAX(now_left, 1u));
		c->attempts++;
		if (!idem && c->fd < 0) {
			/* connect first: a refused connection is safe to retry, a
			 * request that was sent and not answered is not */
			c->fd = dial(c->servers[c->cur], mono_ms() + t, &e1);
			if (c->fd < 0) {
				c->fd = -1;
				snprintf(last_err, sizeof(last_err), "%s", e1.msg);
				down[c->cur] = true;
				goto rotate;
			}
		}
		rc = iod_api_http_once(&c->fd, c->servers[c->cur], method, path, content_type, body,
		                       len, t, r, &e1);
		if (rc && !idem)
			return iod_err_set(
			    e, -EINPROGRESS,
			    "%s %s: outcome unknown: the request was sent but not "
			    "answered (%s); it may or may not have been applied, so it "
			    "is not retried (read the state back first)",
			    method, path, e1.msg);
		if (rc == 0 && outcome_unknown(r)) {
			if (!idem)
				return 0; /* the caller sees 504 and its message */
			any_answer = true;
			iod_api_response_free(r);
			goto rotate;
		}
		if (rc == 0) {
			const char *hint = redirect_hint(r);
			if (!hint)
				return 0;
			any_answer = true;
			if (hint[0]) {
				add_server(c, hint, strlen(hint));
				for (uint32_t i = 0; i < c->servers_n; i++)
					if (!strcmp(c->servers[i], hint) && i != c->cur &&
					    !down[i]) {
						use_server(c, i);
						tried_in_round = 0;
						iod_api_response_free(r);
						goto next;
					}
			}
			iod_api_response_free(r);
		} else {
			snprintf(last_err, sizeof(last_err), "%s", e1.msg);
			down[c->cur] = true;
		}
	rotate:
		use_server(c, (c->cur + 1) % c->servers_n);
		if (++tried_in_round >= c->servers_n) {
			tried_in_round = 0;
			memset(down, 0, sizeof(down)); /* a new round: anyone may be back */
			if (mono_ms() + c->retry_sleep_ms >= deadline)
				break;
			struct timespec ts = {0, (long)c->retry_sleep_ms * 1000000L};
			nanosleep(&ts, NULL);
		}
	next:
		if (mono_ms() >= deadline)
			break;
	}
	if (any_answer)
		return iod_err_set(
		    e, -ENOTCONN,
		    "the cluster has no leader right now (tried %u times over %u ms): "
		    "a majority of servers must be up",
		    c->attempts, c->retry_ms);
	return iod_err_set(e, -EHOSTUNREACH, "no server answered within %u ms; last error: %s",
	                   c->retry_ms, last_err);
}
