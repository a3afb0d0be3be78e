/*
 * backend.c: the HTTP test backend (`iod proxy backend`): a small HTTP/1.1
 * server the mesh tests and benchmarks put behind the proxy. It answers
 * every request with its name and a body of --size bytes (or a file,
 * chunked if asked), can read request bodies slowly and write them to a
 * sink, and with --call makes a call of its own to the next hop carrying
 * the request's traceparent (one HTTP client, src/http/). Request framing
 * is the one HTTP codec (iod_http_parse, iod_http_body_decode).
 *
 * A shell: one thread per connection, no limits beyond the codec's; a
 * test fixture, not a server to expose.
 */
#include "iod/demo.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* A one-line error on stderr; returns the exit status code. */
static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "iod proxy backend: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

/* The running backend's settings (its connection threads read them). */
static struct iod_demo_backend be;

/* The backend's --call to the next hop gives up after this (a test backend
 * that waited forever on a stuck hop would hold its connection). */
#define CALL_TIMEOUT_MS 30000

/* GET the --call URL with traceparent (one HTTP client, src/http/);
 * returns the status or -1. */
static int call_next(const char *traceparent)
{
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	char addr[32], tp[128];
	const char *hdrs[3] = {"Host: next", NULL, NULL};
	struct in_addr ip = {.s_addr = htonl(be.call_ip)};
	char ipbuf[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &ip, ipbuf, sizeof(ipbuf));
	snprintf(addr, sizeof(addr), "%s:%u", ipbuf, be.call_port);
	if (traceparent) {
		snprintf(tp, sizeof(tp), "traceparent: %s", traceparent);
		hdrs[1] = tp;
	}
	iod_http_conn_init(&c);
	if (be.call_path[0] != '/')
		return -1;
	int rc = iod_http_request(&c, addr, "GET", be.call_path, hdrs, NULL, NULL, 0,
	                          CALL_TIMEOUT_MS, &r, &e);
	iod_http_conn_close(&c);
	if (rc)
		return -1;
	int status = r.status;
	iod_http_response_free(&r);
	return status;
}

/* Where a request's decoded body goes: counted, and written to --sink. */
struct sink {
	int fd;         /* --sink file or -1 */
	uint64_t bytes; /* payload bytes seen */
	bool failed;    /* a write to the sink failed */
};

static void sink_data(void *ctx, const char *p, size_t n)
{
	struct sink *k = ctx;
	k->bytes += n;
	while (k->fd >= 0 && n && !k->failed) {
		ssize_t w = write(k->fd, p, n);
		if (w <= 0) {
			k->failed = true;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* recv that honours --read-rate (a slow reader, for backpressure tests). */
static ssize_t be_recv(int fd, char *buf, size_t cap)
{
	if (be.read_bps) {
		size_t slice = (size_t)IOD_MAX(be.read_bps / 50, 1024u); /* 20 ms of data */
		cap = IOD_MIN(cap, slice);
	}
	ssize_t n = recv(fd, buf, cap, 0);
	if (n > 0 && be.read_bps)
		usleep((useconds_t)((uint64_t)n * 1000000u / be.read_bps));
	return n;
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Send one piece of a response body, as a chunk when --chunked. */
static bool send_piece(int fd, const char *p, size_t n)
{
	char line[32];
	if (!be.chunked)
		return send_all(fd, p, n);
	int l = snprintf(line, sizeof(line), "%zx\r\n", n);
	return send_all(fd, line, (size_t)l) && send_all(fd, p, n) && send_all(fd, "\r\n", 2);
}

/* The response body: --file's contents, else the BYTES-byte answer. */
static bool send_body(int fd, const char *body, int file_fd, uint64_t size, char *tmp,
                      size_t tmp_len)
{
	uint64_t off = 0;
	while (off < size) {
		const char *p = body + off;
		size_t n = (size_t)IOD_MIN((uint64_t)65536, size - off);
		if (file_fd >= 0) {
			n = IOD_MIN(n, tmp_len);
			ssize_t r = pread(file_fd, tmp, n, (off_t)off);
			if (r <= 0)
				return false;
			n = (size_t)r;
			p = tmp;
		}
		if (!send_piece(fd, p, n))
			return false;
		off += n;
	}
	return !be.chunked || send_all(fd, "0\r\n\r\n", 5);
}

static void *backend_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static __thread struct iod_http_msg m;
	char *buf = malloc(IOD_MESH_HTTP_BUF), *body = malloc(be.size + 1);
	char *tmp = malloc(65536);
	size_t len = 0;

	if (!buf || !body || !tmp)
		goto out;
	memset(body, 'x', be.size);
	memcpy(body, be.name, IOD_MIN(strlen(be.name), be.size));
	if (be.size)
		body[be.size - 1] = '\n';
	for (;;) {
		int rc = iod_http_parse(buf, len, false, &m);
		if (rc == -EAGAIN) {
			if (len >= IOD_MESH_HTTP_BUF)
				break;
			ssize_t n = recv(fd, buf + len, IOD_MESH_HTTP_BUF - len, 0);
			if (n <= 0)
				break;
			len += (size_t)n;
			continue;
		}
		if (rc)
			break;
		/* What the answer needs from the head: the buffer is reused for the body. */
		char tp[64] = "", hdrs[256] = "";
		bool keep_alive = m.keep_alive;
		if (m.traceparent >= 0 && m.hdr[m.traceparent].value_len < sizeof(tp)) {
			memcpy(tp, buf + m.hdr[m.traceparent].value_off,
			       m.hdr[m.traceparent].value_len);
			tp[m.hdr[m.traceparent].value_len] = 0;
		}
		/* The body, of any size: decoded through the buffer. */
		struct iod_http_body b;
		struct sink sk = {.fd = -1};
		bool done = false;
		iod_http_body_init(&b, &m, buf, NULL, 0);
		done = b.kind == IOD_HTTP_BODY_NONE;
		if (m.expect_continue && b.kind != IOD_HTTP_BODY_NONE &&
		    !send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
			break;
		if (be.sink[0] && b.kind != IOD_HTTP_BODY_NONE)
			sk.fd = open(be.sink, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		size_t pos = m.head_len;
		while (!done) {
			if (pos < len) {
				int64_t used = iod_http_body_decode(&b, buf + pos, len - pos, &done,
				                                    sink_data, &sk);
				if (used < 0)
					break;
				pos += (size_t)used;
				continue;
			}
			pos = len = 0;
			ssize_t n = be_recv(fd, buf, IOD_MESH_HTTP_BUF);
			if (n <= 0)
				break;
			len = (size_t)n;
		}
		if (sk.fd >= 0)
			close(sk.fd);
		if (!done)
			break;
		int status = be.status;
		if (be.call_ip) {
			int st = call_next(tp[0] ? tp : NULL);
			snprintf(hdrs, sizeof(hdrs), "x-iod-call-status: %d\r\n", st);
			if (st != 200 && status < 500)
				status = 502;
		}
		int file_fd = -1;
		uint64_t size = be.size;
		if (be.file[0]) {
			struct stat st;
			file_fd = open(be.file, O_RDONLY | O_CLOEXEC);
			if (file_fd < 0 || fstat(file_fd, &st)) {
				if (file_fd >= 0)
					close(file_fd);
				break;
			}
			size = (uint64_t)st.st_size;
		}
		char head[640], framing[64];
		if (be.chunked)
			snprintf(framing, sizeof(framing), "transfer-encoding: chunked\r\n");
		else
			snprintf(framing, sizeof(framing), "content-length: %llu\r\n",
			         (unsigned long long)size);
		int hn = snprintf(head, sizeof(head),
		                  "HTTP/1.1 %d %s\r\n%sx-backend: %s\r\n"
		                  "x-traceparent-seen: %s\r\nx-body-bytes: %llu\r\n%s%s\r\n",
		                  status, status < 400 ? "OK" : "Error", framing, be.name,
		                  tp[0] ? tp : "-", (unsigned long long)sk.bytes, hdrs,
		                  keep_alive ? "" : "connection: close\r\n");
		bool sent;
		if (file_fd < 0 && !be.chunked) {
			struct iovec iov[2] = {{head, (size_t)hn}, {body, be.size}};
			struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
			ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
			sent =
			    w == (ssize_t)((size_t)hn + be.size) ||
			    (w >= hn && send_all(fd, body + (w - hn), be.size - (size_t)(w - hn)));
		} else {
			sent = send_all(fd, head, (size_t)hn) &&
			       send_body(fd, body, file_fd, size, tmp, 65536);
		}
		if (file_fd >= 0)
			close(file_fd);
		if (!sent)
			break;
		memmove(buf, buf + pos, len - pos);
		len -= pos;
		if (!keep_alive)
			break;
	}
out:
	free(buf);
	free(body);
	free(tmp);
	close(fd);
	return NULL;
}

/* Connections on the --unix socket: served as those on the TCP port. */
static void *unix_accept(void *arg)
{
	int lfd = *(int *)arg;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 256 * 1024);
		if (pthread_create(&t, &a, backend_conn, (void *)(intptr_t)fd))
			close(fd);
		pthread_attr_destroy(&a);
	}
	return NULL;
}

int iod_demo_backend_run(const struct iod_demo_backend *cfg, const char *listen_addr,
                         const char *call)
{
	uint32_t ip;
	uint16_t port;
	int one = 1;

	be = *cfg;
	if (iod_mesh_addr_parse(listen_addr, &ip, &port, true))
		return fail(IOD_DEMO_EXIT_INVALID, "--listen %s: expected IPv4:port", listen_addr);
	if (call) {
		char hp[64];
		const char *h = iod_str_has_prefix(call, "http://") ? call + 7 : NULL;
		const char *slash = h ? strchr(h, '/') : NULL;
		size_t hl = h ? (slash ? (size_t)(slash - h) : strlen(h)) : 0;
		if (!h || hl >= sizeof(hp))
			return fail(IOD_DEMO_EXIT_INVALID,
			            "--call %s: expected http://IPv4:port/path", call);
		memcpy(hp, h, hl);
		hp[hl] = 0;
		if (iod_mesh_addr_parse(hp, &be.call_ip, &be.call_port, true))
			return fail(IOD_DEMO_EXIT_INVALID,
			            "--call %s: expected http://IPv4:port/path", call);
		iod_strlcpy(be.call_path, slash ? slash : "/", sizeof(be.call_path));
	}
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(ip)};
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1024))
		return fail(IOD_DEMO_EXIT_ERROR, "cannot listen on %s: %s", listen_addr,
		            strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	if (be.unix_path[0]) { /* service_mesh.transport shm: the proxy dials here */
		struct sockaddr_un su = {.sun_family = AF_UNIX};
		iod_strlcpy(su.sun_path, be.unix_path, sizeof(su.sun_path));
		char dir[sizeof(su.sun_path)];
		iod_strlcpy(dir, be.unix_path, sizeof(dir));
		/* DIR/ep may not exist yet (the agent's proxy makes them when it
		 * starts): make each directory of the path, EEXIST is fine */
		for (char *sl = strchr(dir + 1, '/'); sl; sl = strchr(sl + 1, '/')) {
			*sl = 0;
			mkdir(dir, 0755);
			*sl = '/';
		}
		unlink(su.sun_path);
		static int ufd;
		ufd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		pthread_t ut;
		if (ufd < 0 || bind(ufd, (struct sockaddr *)&su, sizeof(su)) || listen(ufd, 1024) ||
		    pthread_create(&ut, NULL, unix_accept, &ufd))
			return fail(IOD_DEMO_EXIT_ERROR, "cannot listen on %s: %s", be.unix_path,
			            strerror(errno));
		pthread_detach(ut);
	}
	IOD_INFO("mesh", "backend %s listening on %s%s%s (%zu-byte answers)", be.name, listen_addr,
	         be.unix_path[0] ? " and " : "", be.unix_path, be.size);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 256 * 1024);
		if (pthread_create(&t, &a, backend_conn, (void *)(intptr_t)fd))
			close(fd);
		pthread_attr_destroy(&a);
	}
	return 0;
}
