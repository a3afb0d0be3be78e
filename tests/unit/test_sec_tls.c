/*
 * test_sec_tls.c: mutual TLS sessions over a socketpair: both sides see
 * the other's identity; a peer from another CA is refused; rotating the
 * certificate leaves an open session working and gives new sessions the
 * new certificate.
 */
#include "harness.h"
#include "iod/sec.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct party {
	struct iod_sec_ca *ca;
	struct iod_sec_tls_creds *creds;
};

static int issue(struct iod_sec_ca *ca, enum iod_sec_kind kind, const char *name,
                 struct iod_sec_pem *pem)
{
	struct iod_sec_cert_req rq;
	struct iod_err e = {0};
	memset(&rq, 0, sizeof(rq));
	rq.id.kind = kind;
	rq.id.role = kind == IOD_SEC_KIND_SERVER ? IOD_SEC_ROLE_SERVER : IOD_SEC_ROLE_NONE;
	snprintf(rq.id.name, sizeof(rq.id.name), "%s", name);
	snprintf(rq.id.tenant, sizeof(rq.id.tenant), "default");
	rq.server = iod_sec_kind_serves(kind); /* what every issuing path does */
	rq.not_before_s = (uint64_t)time(NULL);
	rq.ttl_s = 3600;
	return iod_sec_ca_issue(ca, &rq, pem, &e);
}

static struct iod_sec_tls_creds *creds_for(struct iod_sec_ca *ca, enum iod_sec_kind kind,
                                           const char *name)
{
	struct iod_sec_pem pem;
	struct iod_sec_tls_creds *c = NULL;
	struct iod_err e = {0};
	if (issue(ca, kind, name, &pem))
		return NULL;
	iod_sec_tls_creds_new(iod_sec_ca_cert_pem(ca), pem.cert, pem.key, &c, &e);
	iod_sec_pem_free(&pem);
	return c;
}

/* Run both handshakes to completion; returns (client rc, server rc) packed. */
static void handshake_both(struct iod_sec_tls *a, struct iod_sec_tls *b, int fa, int fb, int *ra,
                           int *rb, struct iod_err *ea, struct iod_err *eb)
{
	*ra = *rb = -EAGAIN;
	for (int i = 0; i < 1000 && (*ra == -EAGAIN || *rb == -EAGAIN); i++) {
		unsigned wa = POLLIN, wb = POLLIN;
		if (*ra == -EAGAIN)
			*ra = iod_sec_tls_handshake(a, &wa, ea);
		if (*rb == -EAGAIN)
			*rb = iod_sec_tls_handshake(b, &wb, eb);
		struct pollfd p[2] = {{.fd = fa, .events = (short)wa},
		                      {.fd = fb, .events = (short)wb}};
		poll(p, 2, 10);
	}
}

static int pair(int fds[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
		return -1;
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	return 0;
}

static int xfer(struct iod_sec_tls *from, struct iod_sec_tls *to, const char *msg, char *got,
                size_t cap)
{
	struct iod_err e = {0};
	unsigned w;
	if (iod_sec_tls_write(from, msg, strlen(msg), &w, &e) != (long)strlen(msg))
		return -1;
	for (int i = 0; i < 200; i++) {
		long n = iod_sec_tls_read(to, got, cap - 1, &w, &e);
		if (n > 0) {
			got[n] = 0;
			return 0;
		}
		usleep(1000);
	}
	return -1;
}

TEST(mtls_both_sides_see_identities)
{
	struct iod_sec_ca *ca = NULL;
	struct iod_err e = {0}, ea = {0}, eb = {0};
	int fds[2], ra, rb;
	struct iod_sec_tls *a = NULL, *b = NULL;
	char got[64];

	CHECK_EQ(iod_sec_ca_create("c1", (uint64_t)time(NULL), 86400, &ca, &e), 0);
	struct iod_sec_tls_creds *ca_srv = creds_for(ca, IOD_SEC_KIND_SERVER, "1");
	struct iod_sec_tls_creds *cb_srv = creds_for(ca, IOD_SEC_KIND_SERVER, "2");
	CHECK(ca_srv && cb_srv);
	CHECK_EQ(pair(fds), 0);
	CHECK_EQ(iod_sec_tls_open(ca_srv, fds[0], true, &a, &e), 0);
	CHECK_EQ(iod_sec_tls_open(cb_srv, fds[1], false, &b, &e), 0);
	handshake_both(a, b, fds[0], fds[1], &ra, &rb, &ea, &eb);
	CHECK_MSG(ra == 0 && rb == 0, "client %d %s / server %d %s", ra, ea.msg, rb, eb.msg);
	CHECK_STR(iod_sec_tls_peer(a)->id.name, "2");
	CHECK_EQ(iod_sec_tls_peer(a)->id.kind, IOD_SEC_KIND_SERVER);
	CHECK_STR(iod_sec_tls_peer(b)->id.name, "1");
	CHECK_EQ(xfer(a, b, "append-entries", got, sizeof(got)), 0);
	CHECK_STR(got, "append-entries");
	CHECK_EQ(xfer(b, a, "ok", got, sizeof(got)), 0);

	/* rotation: the open session goes on; a new one gets the new certificate */
	struct iod_sec_pem pem;
	CHECK_EQ(issue(ca, IOD_SEC_KIND_SERVER, "1", &pem), 0);
	CHECK_EQ(iod_sec_tls_creds_rotate(ca_srv, pem.cert, pem.key, &e), 0);
	iod_sec_pem_free(&pem);
	CHECK_EQ(iod_sec_tls_creds_rotations(ca_srv), 1);
	CHECK_EQ(xfer(a, b, "after-rotation", got, sizeof(got)), 0);
	CHECK_STR(got, "after-rotation");
	char serial_old[41];
	snprintf(serial_old, sizeof(serial_old), "%s", iod_sec_tls_peer(b)->serial);
	iod_sec_tls_close(a);
	iod_sec_tls_close(b);
	close(fds[0]);
	close(fds[1]);
	CHECK_EQ(pair(fds), 0);
	CHECK_EQ(iod_sec_tls_open(ca_srv, fds[0], true, &a, &e), 0);
	CHECK_EQ(iod_sec_tls_open(cb_srv, fds[1], false, &b, &e), 0);
	handshake_both(a, b, fds[0], fds[1], &ra, &rb, &ea, &eb);
	CHECK_EQ(ra, 0);
	CHECK_EQ(rb, 0);
	CHECK(strcmp(serial_old, iod_sec_tls_peer(b)->serial) != 0);
	iod_sec_tls_close(a);
	iod_sec_tls_close(b);
	close(fds[0]);
	close(fds[1]);
	iod_sec_tls_creds_free(ca_srv);
	iod_sec_tls_creds_free(cb_srv);
	iod_sec_ca_free(ca);
}

/* A client refuses a server whose certificate, from the same CA, is for
 * clients only (no serverAuth): a replica's SVID cannot pose as a chunk
 * server or an agent. The old code checked only the chain and identity. */
TEST(mtls_client_refuses_a_client_only_server_certificate)
{
	struct iod_sec_ca *ca = NULL;
	struct iod_err e = {0}, ea = {0}, eb = {0};
	int fds[2], ra, rb;
	struct iod_sec_tls *a = NULL, *b = NULL;

	CHECK_EQ(iod_sec_ca_create("c1", (uint64_t)time(NULL), 86400, &ca, &e), 0);
	struct iod_sec_tls_creds *node = creds_for(ca, IOD_SEC_KIND_NODE, "node-1");
	struct iod_sec_tls_creds *svc = creds_for(ca, IOD_SEC_KIND_SERVICE, "ps");
	CHECK(node && svc);
	/* the right way round: the SVID dials the node */
	CHECK_EQ(pair(fds), 0);
	CHECK_EQ(iod_sec_tls_open(svc, fds[0], true, &a, &e), 0);
	CHECK_EQ(iod_sec_tls_open(node, fds[1], false, &b, &e), 0);
	handshake_both(a, b, fds[0], fds[1], &ra, &rb, &ea, &eb);
	CHECK_MSG(ra == 0 && rb == 0, "client %d %s / server %d %s", ra, ea.msg, rb, eb.msg);
	iod_sec_tls_close(a);
	iod_sec_tls_close(b);
	close(fds[0]);
	close(fds[1]);
	/* the SVID listening: the node, as client, refuses it */
	CHECK_EQ(pair(fds), 0);
	CHECK_EQ(iod_sec_tls_open(node, fds[0], true, &a, &e), 0);
	CHECK_EQ(iod_sec_tls_open(svc, fds[1], false, &b, &e), 0);
	handshake_both(a, b, fds[0], fds[1], &ra, &rb, &ea, &eb);
	CHECK_EQ(ra, -EACCES);
	CHECK_CONTAINS(ea.msg, "serverAuth");
	CHECK_CONTAINS(ea.msg, "service/ps");
	iod_sec_tls_close(a);
	iod_sec_tls_close(b);
	close(fds[0]);
	close(fds[1]);
	iod_sec_tls_creds_free(node);
	iod_sec_tls_creds_free(svc);
	iod_sec_ca_free(ca);
}

TEST(mtls_foreign_ca_refused)
{
	struct iod_sec_ca *ca = NULL, *evil = NULL;
	struct iod_err e = {0}, ea = {0}, eb = {0};
	int fds[2], ra, rb;
	struct iod_sec_tls *a = NULL, *b = NULL;

	CHECK_EQ(iod_sec_ca_create("c1", (uint64_t)time(NULL), 86400, &ca, &e), 0);
	/* same cluster name, another CA: the classic impostor */
	CHECK_EQ(iod_sec_ca_create("c1", (uint64_t)time(NULL), 86400, &evil, &e), 0);
	struct iod_sec_tls_creds *good = creds_for(ca, IOD_SEC_KIND_SERVER, "1");
	struct iod_sec_tls_creds *bad = creds_for(evil, IOD_SEC_KIND_SERVER, "4");
	CHECK(good && bad);
	CHECK_EQ(pair(fds), 0);
	CHECK_EQ(iod_sec_tls_open(bad, fds[0], true, &a, &e), 0);
	CHECK_EQ(iod_sec_tls_open(good, fds[1], false, &b, &e), 0);
	handshake_both(a, b, fds[0], fds[1], &ra, &rb, &ea, &eb);
	CHECK(rb != 0);
	CHECK(iod_sec_tls_peer(b) == NULL);
	iod_sec_tls_close(a);
	iod_sec_tls_close(b);
	close(fds[0]);
	close(fds[1]);
	iod_sec_tls_creds_free(good);
	iod_sec_tls_creds_free(bad);
	iod_sec_ca_free(ca);
	iod_sec_ca_free(evil);
}

/* The server half, driven on its own thread while the client blocks. */
struct serve_arg {
	struct iod_sec_tls_creds *creds;
	int fd;
	int rc;
};

static void *serve(void *p)
{
	struct serve_arg *a = p;
	struct iod_sec_tls *t = NULL;
	struct iod_err e = {0};
	a->rc = iod_sec_tls_open(a->creds, a->fd, false, &t, &e);
	for (int i = 0; i < 500 && !a->rc; i++) {
		unsigned w = POLLIN;
		a->rc = iod_sec_tls_handshake(t, &w, &e);
		if (a->rc != -EAGAIN)
			break;
		a->rc = 0;
		struct pollfd pf = {.fd = a->fd, .events = (short)w};
		poll(&pf, 1, 10);
	}
	iod_sec_tls_close(t);
	return NULL;
}

/* A client of the API wants a *server* of the cluster: a node's certificate
 * from the same CA posing as the API server is refused (issue 16). */
TEST(client_connect_checks_the_peer_kind)
{
	struct iod_sec_ca *ca = NULL;
	struct iod_err e = {0};
	CHECK_EQ(iod_sec_ca_create("local", (uint64_t)time(NULL), 3600, &ca, &e), 0);
	struct iod_sec_tls_creds *server = creds_for(ca, IOD_SEC_KIND_SERVER, "1"),
	                         *node = creds_for(ca, IOD_SEC_KIND_NODE, "node-1"),
	                         *user =
	                             creds_for(ca, IOD_SEC_KIND_NODE, "node-2"); /* the client */
	CHECK(server && node && user);
	struct iod_sec_tls_creds *posers[2] = {server, node};
	for (int k = 0; k < 2; k++) {
		int fds[2];
		pthread_t th;
		struct iod_sec_tls *t = NULL;
		struct iod_err ce = {0};
		CHECK_EQ(pair(fds), 0);
		struct serve_arg a = {.creds = posers[k], .fd = fds[1]};
		CHECK_EQ(pthread_create(&th, NULL, serve, &a), 0);
		uint64_t deadline = iod_clock_now_ns() / IOD_NS_PER_MS + 3000;
		int rc = iod_sec_tls_connect(user, fds[0], IOD_SEC_KIND_SERVER, deadline, &t, &ce);
		if (k == 0) {
			CHECK_MSG(rc == 0, "%s", ce.msg);
			CHECK_EQ(iod_sec_tls_peer(t)->id.kind, IOD_SEC_KIND_SERVER);
		} else {
			CHECK_EQ(rc, -EACCES);
			CHECK_CONTAINS(ce.msg, "not a server of the cluster");
		}
		iod_sec_tls_close(t);
		close(fds[0]);
		pthread_join(th, NULL);
		close(fds[1]);
	}
	iod_sec_tls_creds_free(server);
	iod_sec_tls_creds_free(node);
	iod_sec_tls_creds_free(user);
	iod_sec_ca_free(ca);
}

/* Buffered sessions (the Raft transport's): ciphertext goes to a buffer
 * the test moves by hand, as libuv does. */
struct wire {
	unsigned char b[65536];
	size_t n;
};

static int wire_push(void *ctx, const void *buf, size_t n)
{
	struct wire *w = ctx;
	if (w->n + n > sizeof(w->b))
		return -ENOBUFS;
	memcpy(w->b + w->n, buf, n);
	w->n += n;
	return 0;
}

/* Deliver what one side wrote to the other. */
static void carry(struct wire *w, struct iod_sec_tls *to)
{
	if (w->n)
		CHECK_EQ(iod_sec_tls_feed(to, w->b, w->n), 0);
	w->n = 0;
}

TEST(buffered_sessions_handshake_and_carry_records)
{
	struct iod_sec_ca *ca = NULL, *evil = NULL;
	struct iod_err e = {0}, ea = {0}, eb = {0};
	struct iod_sec_tls *a = NULL, *b = NULL;
	struct wire ab = {0}, ba = {0};
	unsigned want;
	int ra = -EAGAIN, rb = -EAGAIN;

	CHECK_EQ(iod_sec_ca_create("c1", (uint64_t)time(NULL), 86400, &ca, &e), 0);
	CHECK_EQ(iod_sec_ca_create("c1", (uint64_t)time(NULL), 86400, &evil, &e), 0);
	struct iod_sec_tls_creds *c1 = creds_for(ca, IOD_SEC_KIND_SERVER, "1");
	struct iod_sec_tls_creds *c2 = creds_for(ca, IOD_SEC_KIND_SERVER, "2");
	struct iod_sec_tls_creds *cx = creds_for(evil, IOD_SEC_KIND_SERVER, "2");
	CHECK(c1 && c2 && cx);
	CHECK_EQ(iod_sec_tls_open_buffered(c1, true, wire_push, &ab, &a, &e), 0);
	CHECK_EQ(iod_sec_tls_open_buffered(c2, false, wire_push, &ba, &b, &e), 0);
	for (int i = 0; i < 20 && (ra || rb); i++) {
		if (ra)
			ra = iod_sec_tls_handshake(a, &want, &ea);
		carry(&ab, b);
		if (rb)
			rb = iod_sec_tls_handshake(b, &want, &eb);
		carry(&ba, a);
	}
	CHECK_MSG(ra == 0 && rb == 0, "client %d %s / server %d %s", ra, ea.msg, rb, eb.msg);
	CHECK_STR(iod_sec_tls_peer(a)->id.name, "2");
	CHECK_STR(iod_sec_tls_peer(b)->id.name, "1");
	/* nothing fed yet: -EAGAIN, not an error */
	char got[40000];
	CHECK_EQ(iod_sec_tls_read(b, got, sizeof(got), &want, &e), -EAGAIN);
	/* more than one record (16 KiB each), fed a few bytes at a time */
	static char big[30000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	size_t sent = 0;
	while (sent < sizeof(big)) {
		long w = iod_sec_tls_write(a, big + sent, sizeof(big) - sent, &want, &e);
		CHECK(w > 0);
		sent += (size_t)w;
	}
	size_t fed = 0, have = 0;
	while (fed < ab.n) {
		size_t k = IOD_MIN((size_t)777, ab.n - fed);
		CHECK_EQ(iod_sec_tls_feed(b, ab.b + fed, k), 0);
		fed += k;
		long r;
		while ((r = iod_sec_tls_read(b, got + have, sizeof(got) - have, &want, &e)) > 0)
			have += (size_t)r;
		CHECK_EQ(r, -EAGAIN);
	}
	ab.n = 0;
	CHECK_EQ(have, sizeof(big));
	CHECK(!memcmp(got, big, sizeof(big)));
	iod_sec_tls_close(a);
	iod_sec_tls_close(b);

	/* a peer of another CA: the server's handshake fails, naming the CA */
	a = b = NULL;
	ab.n = ba.n = 0;
	ra = rb = -EAGAIN;
	CHECK_EQ(iod_sec_tls_open_buffered(cx, true, wire_push, &ab, &a, &e), 0);
	CHECK_EQ(iod_sec_tls_open_buffered(c1, false, wire_push, &ba, &b, &e), 0);
	for (int i = 0; i < 20 && (ra == -EAGAIN || rb == -EAGAIN); i++) {
		if (ra == -EAGAIN)
			ra = iod_sec_tls_handshake(a, &want, &ea);
		carry(&ab, b);
		if (rb == -EAGAIN)
			rb = iod_sec_tls_handshake(b, &want, &eb);
		carry(&ba, a);
	}
	CHECK(rb != 0);
	CHECK(strstr(eb.msg, "not signed by the c1 cluster CA") != NULL);
	iod_sec_tls_close(a);
	iod_sec_tls_close(b);
	iod_sec_tls_creds_free(c1);
	iod_sec_tls_creds_free(c2);
	iod_sec_tls_creds_free(cx);
	iod_sec_ca_free(ca);
	iod_sec_ca_free(evil);
}
