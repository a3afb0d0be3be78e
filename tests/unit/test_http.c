/*
 * test_http.c: the one HTTP client (src/http/client.c) against a scripted
 * server on a loopback socket: chunked bodies, a kept-alive connection,
 * the deadline, the body limit, the stop flag, status-only reads.
 */
#include "harness.h"
#include "iod/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The scripted server: answers every request on a connection with `answer`
 * (NULL: never answers), counting connections. */
struct server {
	int lfd;            /* listening socket */
	uint16_t port;      /* its port */
	const char *answer; /* what every request gets */
	size_t answer_len;  /* its bytes */
	int accepted;       /* connections accepted */
	int requests;       /* request heads received, on every connection */
	int drop_nth;       /* the n-th request of a connection is read and the
	                       connection closed unanswered (a server killed after
	                       reading it); 0 = never */
	int close_after;    /* close a connection after this many answers (an
	                       idle keep-alive timeout); 0 = never */
	char head[2048];    /* the last request head received */
	volatile int stop;  /* the thread ends */
	pthread_t thread;
};

static void *serve(void *arg)
{
	struct server *s = arg;
	while (!s->stop) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			break;
		__atomic_add_fetch(&s->accepted, 1, __ATOMIC_RELAXED);
		char buf[4096];
		size_t have = 0;
		int nth = 0;
		for (;;) {
			ssize_t r = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
			if (r <= 0)
				break;
			have += (size_t)r;
			buf[have] = 0;
			char *end = strstr(buf, "\r\n\r\n");
			if (!end)
				continue;
			iod_strlcpy(s->head, buf, sizeof(s->head));
			have = 0; /* one request (no bodies in these tests) */
			__atomic_add_fetch(&s->requests, 1, __ATOMIC_RELAXED);
			if (++nth == s->drop_nth)
				break;
			if (!s->answer) {
				while (!s->stop)
					usleep(10000);
				break;
			}
			if (send(fd, s->answer, s->answer_len, MSG_NOSIGNAL) < 0)
				break;
			if (nth == s->close_after)
				break;
		}
		close(fd);
	}
	return NULL;
}

static void server_start_with(struct server *s, const char *answer, size_t len, int drop_nth,
                              int close_after)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	memset(s, 0, sizeof(*s));
	s->drop_nth = drop_nth;
	s->close_after = close_after;
	s->answer = answer;
	s->answer_len = len;
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	IOD_ASSERT(s->lfd >= 0 && !bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) &&
	           !listen(s->lfd, 8) && !getsockname(s->lfd, (struct sockaddr *)&a, &l));
	s->port = ntohs(a.sin_port);
	pthread_create(&s->thread, NULL, serve, s);
}

static void server_start(struct server *s, const char *answer, size_t len)
{
	server_start_with(s, answer, len, 0, 0);
}

static void server_stop(struct server *s)
{
	s->stop = 1;
	shutdown(s->lfd, SHUT_RDWR);
	close(s->lfd);
	pthread_join(s->thread, NULL);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";

TEST(chunked_answer_on_one_kept_connection)
{
	struct server s;
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	char addr[32];
	server_start(&s, chunked, strlen(chunked));
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);
	iod_http_conn_init(&c);
	for (int i = 0; i < 3; i++) {
		CHECK_MSG(
		    iod_http_request(&c, addr, "GET", "/x", NULL, NULL, NULL, 0, 2000, &r, &e) == 0,
		    "%s", e.msg);
		CHECK_EQ(r.status, 200);
		CHECK_EQ(r.len, 11);
		CHECK_STR(r.body, "hello world");
		iod_http_response_free(&r);
	}
	CHECK_EQ(__atomic_load_n(&s.accepted, __ATOMIC_RELAXED), 1); /* kept alive */
	iod_http_conn_close(&c);
	server_stop(&s);
}

TEST(deadline_and_stop_flag)
{
	struct server s;
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	char addr[32];
	server_start(&s, NULL, 0); /* never answers */
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);
	iod_http_conn_init(&c);
	uint64_t t0 = now_ms();
	CHECK_EQ(iod_http_request(&c, addr, "GET", "/", NULL, NULL, NULL, 0, 200, &r, &e),
	         -ETIMEDOUT);
	uint64_t took = now_ms() - t0;
	CHECK_MSG(took >= 190 && took < 2000, "the 200 ms deadline took %llu ms",
	          (unsigned long long)took);
	/* a stop flag already set: the request ends within a slice, not at its deadline */
	volatile int stop = 1;
	c.stop = &stop;
	t0 = now_ms();
	CHECK_EQ(iod_http_request(&c, addr, "GET", "/", NULL, NULL, NULL, 0, 10000, &r, &e),
	         -EINTR);
	took = now_ms() - t0;
	CHECK_MSG(took < 10 * IOD_HTTP_STOP_SLICE_MS, "stopping took %llu ms",
	          (unsigned long long)took);
	iod_http_conn_close(&c);
	server_stop(&s);
}

TEST(body_limit_and_status_only)
{
	struct server s;
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	char addr[32];
	size_t n = 64 * 1024;
	char *big = malloc(n + 128);
	int h = snprintf(big, 128, "HTTP/1.1 503 Busy\r\nContent-Length: %zu\r\n\r\n", n);
	memset(big + h, 'x', n);
	server_start(&s, big, (size_t)h + n);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);
	iod_http_conn_init(&c);
	c.body_max = 1024;
	CHECK_EQ(iod_http_request(&c, addr, "GET", "/", NULL, NULL, NULL, 0, 2000, &r, &e), -E2BIG);
	CHECK_CONTAINS(e.msg, "body limit");
	c.body_max = 0; /* the default limit takes it */
	CHECK_EQ(iod_http_request(&c, addr, "GET", "/", NULL, NULL, NULL, 0, 2000, &r, &e), 0);
	CHECK_EQ(r.status, 503);
	CHECK_EQ(r.len, n);
	iod_http_response_free(&r);
	/* a health check: the status line only, the body is never read */
	c.status_only = true;
	c.body_max = 1;
	CHECK_EQ(iod_http_request(&c, addr, "GET", "/healthz", NULL, NULL, NULL, 0, 2000, &r, &e),
	         0);
	CHECK_EQ(r.status, 503);
	CHECK(r.body == NULL);
	iod_http_conn_close(&c);
	server_stop(&s);
	free(big);
	/* nothing listens: refused, at once */
	iod_http_conn_init(&c);
	CHECK_EQ(iod_http_request(&c, addr, "GET", "/", NULL, NULL, NULL, 0, 2000, &r, &e),
	         -ECONNREFUSED);
	iod_http_conn_close(&c);
}

/* A caller's own Host replaces the default one (never two: the proxy
 * refuses a request with two, as RFC 9112 says); a header holding a line
 * break is refused before anything is sent. */
TEST(caller_host_replaces_default_and_no_header_injection)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct server s;
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	char addr[32];
	server_start(&s, ok, sizeof(ok) - 1);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);
	iod_http_conn_init(&c);
	const char *hdrs[] = {"Host: next", "traceparent: 00-x-y-01", NULL};
	CHECK_EQ(iod_http_request(&c, addr, "GET", "/a", hdrs, NULL, NULL, 0, 2000, &r, &e), 0);
	CHECK_EQ(r.status, 200);
	iod_http_response_free(&r);
	CHECK(strstr(s.head, "\r\nHost: next\r\n") != NULL);
	const char *first = strstr(s.head, "Host:");
	CHECK(first && !strstr(first + 1, "Host:"));
	CHECK(strstr(s.head, "\r\ntraceparent: 00-x-y-01\r\n") != NULL);
	CHECK_EQ(iod_http_request(&c, addr, "GET", "/b", NULL, NULL, NULL, 0, 2000, &r, &e), 0);
	iod_http_response_free(&r);
	char want[64];
	snprintf(want, sizeof(want), "\r\nHost: %s\r\n", addr);
	CHECK(strstr(s.head, want) != NULL);
	const char *bad[] = {"X-A: 1\r\nX-Injected: 2", NULL};
	CHECK_EQ(iod_http_request(&c, addr, "GET", "/c", bad, NULL, NULL, 0, 2000, &r, &e),
	         -EINVAL);
	CHECK(strstr(s.head, "X-Injected") == NULL);
	iod_http_conn_close(&c);
	server_stop(&s);
}

static const char ok_answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/*
 * A kept-alive connection whose server reads a request and dies before it
 * answers. A GET is tried again on a fresh connection; a POST is not: the
 * server may have applied it, and a second copy would apply it twice (issue
 * 15: a one-put txn applied twice when the leader was killed -9 after it was
 * proposed: the "one fresh try" reached the restarted server, which sent it
 * to the new leader). Before the fix the POST arrived twice.
 */
TEST(a_post_is_never_sent_twice_after_a_dead_kept_alive_connection)
{
	struct server s;
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	char addr[32];
	server_start_with(&s, ok_answer, strlen(ok_answer), 2, 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);
	iod_http_conn_init(&c);
	CHECK(iod_http_request(&c, addr, "GET", "/a", NULL, NULL, NULL, 0, 2000, &r, &e) == 0);
	iod_http_response_free(&r);
	CHECK(iod_http_request(&c, addr, "POST", "/txn", NULL, "application/json", "{}", 2, 2000,
	                       &r, &e) != 0);
	CHECK(c.sent); /* the caller knows the outcome is unknown */
	CHECK_EQ(__atomic_load_n(&s.requests, __ATOMIC_RELAXED), 2); /* GET + one POST */
	/* the same for a request the caller marks as once (a CAS PUT) */
	CHECK(iod_http_request(&c, addr, "GET", "/a", NULL, NULL, NULL, 0, 2000, &r, &e) == 0);
	iod_http_response_free(&r);
	c.once = true;
	CHECK(iod_http_request(&c, addr, "PUT", "/cas", NULL, NULL, NULL, 0, 2000, &r, &e) != 0);
	CHECK_EQ(__atomic_load_n(&s.requests, __ATOMIC_RELAXED), 4);
	c.once = false;
	/* an idempotent GET gets its fresh try, and its answer */
	CHECK(iod_http_request(&c, addr, "GET", "/a", NULL, NULL, NULL, 0, 2000, &r, &e) == 0);
	iod_http_response_free(&r);
	CHECK_MSG(iod_http_request(&c, addr, "GET", "/b", NULL, NULL, NULL, 0, 2000, &r, &e) == 0,
	          "%s", e.msg);
	CHECK_EQ(r.status, 200);
	iod_http_response_free(&r);
	CHECK_EQ(__atomic_load_n(&s.requests, __ATOMIC_RELAXED), 7); /* /b twice */
	iod_http_conn_close(&c);
	server_stop(&s);
}

/* A server that closed the idle kept-alive connection: the POST goes out on
 * a fresh one, once, and is answered (the closed connection is seen before
 * anything is written, so refusing the retry above costs no error here). */
TEST(a_post_after_an_idle_close_goes_out_once_on_a_fresh_connection)
{
	struct server s;
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	char addr[32];
	server_start_with(&s, ok_answer, strlen(ok_answer), 0, 1);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);
	iod_http_conn_init(&c);
	CHECK(iod_http_request(&c, addr, "GET", "/a", NULL, NULL, NULL, 0, 2000, &r, &e) == 0);
	iod_http_response_free(&r);
	struct pollfd p = {.fd = c.fd, .events = POLLIN | POLLRDHUP};
	CHECK(poll(&p, 1, 2000) > 0); /* the server's close reached us */
	CHECK_MSG(iod_http_request(&c, addr, "POST", "/txn", NULL, "application/json", "{}", 2,
	                           2000, &r, &e) == 0,
	          "%s", e.msg);
	CHECK_EQ(r.status, 200);
	iod_http_response_free(&r);
	CHECK_EQ(__atomic_load_n(&s.requests, __ATOMIC_RELAXED), 2);
	CHECK_EQ(__atomic_load_n(&s.accepted, __ATOMIC_RELAXED), 2);
	iod_http_conn_close(&c);
	server_stop(&s);
}
