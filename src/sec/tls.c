/*
 * tls.c: mutual TLS sessions on non-blocking sockets (GnuTLS), for the
 * connections iod makes between its own processes: Raft between servers
 * (through the transport's stream seam), the mesh between proxies, and
 * the agents' checkpoint chunk servers (src/storage/peer.c).
 *
 * Both sides present a certificate from the cluster CA and both verify
 * the other's, then the peer's identity (its spiffe:// URI) is what callers
 * authorise on, not a host name: a Raft peer must be "server <id>", a mesh
 * peer a service of the cluster. Credentials are reference counted and
 * replaceable: a rotated certificate is used by sessions opened after the
 * swap while open sessions keep the one they started with, so rotation
 * drops no connection.
 *
 * Shell code (sockets through GnuTLS); it reads the wall clock only to
 * check the peer certificate's validity. It never blocks: every call
 * returns -EAGAIN with the direction to wait for.
 */
#include "iod/sec.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* TLS 1.3 and 1.2 only, GnuTLS' NORMAL cipher suites otherwise. */
#define TLS_PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* One certificate + key + CA as GnuTLS credentials (shared by sessions). */
struct creds {
	gnutls_certificate_credentials_t x509; /* our chain and the CA to trust */
	unsigned refs;                         /* sessions + the holder */
};

struct iod_sec_tls_creds {
	pthread_mutex_t mu;     /* guards cur (rotation vs. new sessions) */
	struct creds *cur;      /* what new sessions use */
	struct iod_sec_ca *ca;  /* verification of peers (cluster and chain) */
	gnutls_priority_t prio; /* TLS versions and suites */
	uint64_t rotations;     /* times the certificate was replaced */
};

struct iod_sec_tls {
	gnutls_session_t s;              /* the session */
	struct iod_sec_tls_creds *owner; /* where the credentials came from */
	struct creds *cr;                /* the credentials this session holds */
	bool handshaken;                 /* handshake done and peer verified */
	bool client;                     /* we dialled: the peer must be a TLS server */
	struct iod_sec_cert_info peer;   /* the peer's verified identity */
	/* buffered sessions (iod_sec_tls_open_buffered): no fd, the caller's
	 * event loop moves the ciphertext */
	iod_sec_tls_push_fn push;      /* where ciphertext goes */
	void *push_ctx;                /* its argument */
	unsigned char *in;             /* ciphertext fed, not yet read */
	size_t in_off, in_len, in_cap; /* unread = in[in_off, in_len) */
};

static void creds_unref(struct iod_sec_tls_creds *o, struct creds *c)
{
	bool last;
	pthread_mutex_lock(&o->mu);
	last = --c->refs == 0;
	pthread_mutex_unlock(&o->mu);
	if (last) {
		gnutls_certificate_free_credentials(c->x509);
		free(c);
	}
}

static int creds_make(const char *ca_pem, const char *cert_pem, const char *key_pem,
                      struct creds **out, struct iod_err *e)
{
	struct creds *c = calloc(1, sizeof(*c));
	int rc;
	if (!c || gnutls_certificate_allocate_credentials(&c->x509)) {
		free(c);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	gnutls_datum_t ca = {(unsigned char *)ca_pem, (unsigned)strlen(ca_pem)};
	/* no certificate: a client that trusts the CA and proves itself
	 * another way (a bearer token in the request) */
	gnutls_datum_t crt = {(unsigned char *)cert_pem, cert_pem ? (unsigned)strlen(cert_pem) : 0};
	gnutls_datum_t key = {(unsigned char *)key_pem, key_pem ? (unsigned)strlen(key_pem) : 0};
	if ((rc = gnutls_certificate_set_x509_trust_mem(c->x509, &ca, GNUTLS_X509_FMT_PEM)) < 1 ||
	    (cert_pem && (rc = gnutls_certificate_set_x509_key_mem(c->x509, &crt, &key,
	                                                           GNUTLS_X509_FMT_PEM)) < 0)) {
		gnutls_certificate_free_credentials(c->x509);
		free(c);
		return iod_err_set(e, -EINVAL, "TLS credentials: %s",
		                   rc < 0 ? gnutls_strerror(rc) : "no CA certificate");
	}
	c->refs = 1;
	*out = c;
	return 0;
}

int iod_sec_tls_creds_new(const char *ca_pem, const char *cert_pem, const char *key_pem,
                          struct iod_sec_tls_creds **out, struct iod_err *e)
{
	struct iod_sec_tls_creds *o = calloc(1, sizeof(*o));
	int rc;

	*out = NULL;
	if (!o)
		return iod_err_set(e, -ENOMEM, "out of memory");
	pthread_mutex_init(&o->mu, NULL);
	if ((rc = iod_sec_ca_load(ca_pem, NULL, &o->ca, e)) ||
	    (rc = creds_make(ca_pem, cert_pem, key_pem, &o->cur, e))) {
		iod_sec_tls_creds_free(o);
		return rc;
	}
	if (gnutls_priority_init(&o->prio, TLS_PRIORITY, NULL)) {
		iod_sec_tls_creds_free(o);
		return iod_err_set(e, -EIO, "GnuTLS does not know priority %s", TLS_PRIORITY);
	}
	*out = o;
	return 0;
}

int iod_sec_tls_creds_rotate(struct iod_sec_tls_creds *o, const char *cert_pem, const char *key_pem,
                             struct iod_err *e)
{
	struct creds *c = NULL, *old;
	int rc = creds_make(iod_sec_ca_cert_pem(o->ca), cert_pem, key_pem, &c, e);
	if (rc)
		return rc;
	pthread_mutex_lock(&o->mu);
	old = o->cur;
	o->cur = c;
	o->rotations++;
	pthread_mutex_unlock(&o->mu);
	creds_unref(o, old); /* open sessions keep theirs until they close */
	return 0;
}

uint64_t iod_sec_tls_creds_rotations(struct iod_sec_tls_creds *o)
{
	pthread_mutex_lock(&o->mu);
	uint64_t n = o->rotations;
	pthread_mutex_unlock(&o->mu);
	return n;
}

const struct iod_sec_ca *iod_sec_tls_creds_ca(const struct iod_sec_tls_creds *o)
{
	return o->ca;
}

void iod_sec_tls_creds_free(struct iod_sec_tls_creds *o)
{
	if (!o)
		return;
	if (o->cur)
		creds_unref(o, o->cur);
	if (o->prio)
		gnutls_priority_deinit(o->prio);
	iod_sec_ca_free(o->ca);
	pthread_mutex_destroy(&o->mu);
	free(o);
}

int iod_sec_tls_open(struct iod_sec_tls_creds *o, int fd, bool client, struct iod_sec_tls **out,
                     struct iod_err *e)
{
	struct iod_sec_tls *t = calloc(1, sizeof(*t));
	int rc;

	*out = NULL;
	if (!t)
		return iod_err_set(e, -ENOMEM, "out of memory");
	if ((rc = gnutls_init(&t->s, (client ? GNUTLS_CLIENT : GNUTLS_SERVER) | GNUTLS_NONBLOCK |
	                                 GNUTLS_NO_SIGNAL))) {
		free(t);
		return iod_err_set(e, -ENOMEM, "TLS session: %s", gnutls_strerror(rc));
	}
	pthread_mutex_lock(&o->mu);
	t->cr = o->cur;
	t->cr->refs++;
	pthread_mutex_unlock(&o->mu);
	t->owner = o;
	t->client = client;
	gnutls_priority_set(t->s, o->prio);
	gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, t->cr->x509);
	if (!client)
		gnutls_certificate_server_set_request(t->s, GNUTLS_CERT_REQUIRE);
	gnutls_transport_set_int(t->s, fd);
	*out = t;
	return 0;
}

static ssize_t buf_push(gnutls_transport_ptr_t p, const void *buf, size_t n)
{
	struct iod_sec_tls *t = p;
	if (t->push(t->push_ctx, buf, n)) {
		gnutls_transport_set_errno(t->s, EPIPE);
		return -1;
	}
	return (ssize_t)n;
}

static ssize_t buf_pull(gnutls_transport_ptr_t p, void *buf, size_t n)
{
	struct iod_sec_tls *t = p;
	size_t k = t->in_len - t->in_off;
	if (!k) {
		gnutls_transport_set_errno(t->s, EAGAIN);
		return -1;
	}
	if (k > n)
		k = n;
	memcpy(buf, t->in + t->in_off, k);
	t->in_off += k;
	if (t->in_off == t->in_len)
		t->in_off = t->in_len = 0;
	return (ssize_t)k;
}

int iod_sec_tls_open_buffered(struct iod_sec_tls_creds *o, bool client, iod_sec_tls_push_fn push,
                              void *ctx, struct iod_sec_tls **out, struct iod_err *e)
{
	int rc = iod_sec_tls_open(o, -1, client, out, e);
	if (rc)
		return rc;
	struct iod_sec_tls *t = *out;
	t->push = push;
	t->push_ctx = ctx;
	gnutls_transport_set_ptr(t->s, t);
	gnutls_transport_set_push_function(t->s, buf_push);
	gnutls_transport_set_pull_function(t->s, buf_pull);
	return 0;
}

int iod_sec_tls_feed(struct iod_sec_tls *t, const void *buf, size_t n)
{
	if (t->in_off && t->in_len + n > t->in_cap) { /* compact first */
		memmove(t->in, t->in + t->in_off, t->in_len - t->in_off);
		t->in_len -= t->in_off;
		t->in_off = 0;
	}
	if (t->in_len + n > t->in_cap) {
		size_t cap = t->in_cap ? t->in_cap : 16384;
		while (cap < t->in_len + n)
			cap *= 2;
		unsigned char *b = realloc(t->in, cap);
		if (!b)
			return -ENOMEM;
		t->in = b;
		t->in_cap = cap;
	}
	memcpy(t->in + t->in_len, buf, n);
	t->in_len += n;
	return 0;
}

static unsigned want_of(gnutls_session_t s)
{
	return gnutls_record_get_direction(s) ? POLLOUT : POLLIN;
}

/*
 * Verify the peer's chain against the cluster CA and map its identity,
 * then its leaf's extendedKeyUsage against the side it took: a server we
 * dialled must carry serverAuth, so a client-only certificate of the same
 * CA (a replica's SVID, a user's) cannot stand in for a listener; a client
 * must carry clientAuth.
 */
static int verify_peer(struct iod_sec_tls *t, struct iod_err *e)
{
	unsigned n = 0;
	const gnutls_datum_t *chain = gnutls_certificate_get_peers(t->s, &n);
	if (!chain || !n)
		return iod_err_set(e, -EACCES, "the peer presented no certificate");
	int rc = iod_sec_ca_verify_der(t->owner->ca, chain[0].data, chain[0].size,
	                               (uint64_t)time(NULL), &t->peer, e);
	if (rc)
		return rc;
	if (t->client && !t->peer.server_auth)
		return iod_err_set(e, -EACCES,
		                   "the peer %s/%s is not a TLS server: its certificate has no "
		                   "serverAuth extended key usage (a client-only certificate, or "
		                   "a node certificate from before serverAuth: the agent renews "
		                   "its own at start, or reissue it with `iod cert create`)",
		                   iod_sec_kind_name(t->peer.id.kind), t->peer.id.name);
	if (!t->client && !t->peer.client_auth)
		return iod_err_set(e, -EACCES,
		                   "the peer %s/%s is not a TLS client: its certificate has no "
		                   "clientAuth extended key usage",
		                   iod_sec_kind_name(t->peer.id.kind), t->peer.id.name);
	return 0;
}

int iod_sec_tls_handshake(struct iod_sec_tls *t, unsigned *want, struct iod_err *e)
{
	int rc;
	if (t->handshaken)
		return 0;
	do {
		rc = gnutls_handshake(t->s);
	} while (rc == GNUTLS_E_INTERRUPTED);
	if (rc == GNUTLS_E_AGAIN) {
		*want = want_of(t->s);
		return -EAGAIN;
	}
	if (rc < 0)
		return iod_err_set(e, -ECONNABORTED, "TLS handshake: %s", gnutls_strerror(rc));
	if ((rc = verify_peer(t, e)))
		return rc;
	t->handshaken = true;
	return 0;
}

long iod_sec_tls_read(struct iod_sec_tls *t, void *buf, size_t n, unsigned *want, struct iod_err *e)
{
	ssize_t r;
	do {
		r = gnutls_record_recv(t->s, buf, n);
	} while (r == GNUTLS_E_INTERRUPTED);
	if (r >= 0)
		return (long)r;
	if (r == GNUTLS_E_AGAIN) {
		*want = want_of(t->s);
		return -EAGAIN;
	}
	if (r == GNUTLS_E_PREMATURE_TERMINATION)
		return 0; /* the peer closed without close_notify: EOF for a stream */
	return iod_err_set(e, -ECONNRESET, "TLS read: %s", gnutls_strerror((int)r));
}

long iod_sec_tls_write(struct iod_sec_tls *t, const void *buf, size_t n, unsigned *want,
                       struct iod_err *e)
{
	ssize_t r;
	do {
		r = gnutls_record_send(t->s, buf, n);
	} while (r == GNUTLS_E_INTERRUPTED);
	if (r >= 0)
		return (long)r;
	if (r == GNUTLS_E_AGAIN) {
		*want = want_of(t->s);
		return -EAGAIN;
	}
	return iod_err_set(e, -ECONNRESET, "TLS write: %s", gnutls_strerror((int)r));
}

size_t iod_sec_tls_pending(struct iod_sec_tls *t)
{
	return gnutls_record_check_pending(t->s);
}

const struct iod_sec_cert_info *iod_sec_tls_peer(const struct iod_sec_tls *t)
{
	return t->handshaken ? &t->peer : NULL;
}

void iod_sec_tls_close(struct iod_sec_tls *t)
{
	if (!t)
		return;
	/* best effort: a non-blocking close_notify, never waited for (not on a
	 * buffered session: its owner is closing the stream it would go to) */
	if (!t->push)
		gnutls_bye(t->s, GNUTLS_SHUT_WR);
	gnutls_deinit(t->s);
	creds_unref(t->owner, t->cr);
	free(t->in);
	free(t);
}

/* ---- blocking use, bounded by a deadline (clients) ------------------------------- */

static uint64_t mono_ms(void)
{
	return iod_clock_now_ns() / IOD_NS_PER_MS;
}

/* Wait for want on fd until deadline_ms (monotonic): 0, or -ETIMEDOUT. */
static int wait_want(int fd, unsigned want, uint64_t deadline_ms)
{
	for (;;) {
		uint64_t now = mono_ms();
		if (now >= deadline_ms)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = (short)want};
		int rc = poll(&p, 1, (int)(deadline_ms - now));
		if (rc > 0)
			return 0;
		if (rc == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

int iod_sec_tls_connect(struct iod_sec_tls_creds *c, int fd, enum iod_sec_kind want_peer,
                        uint64_t deadline_ms, struct iod_sec_tls **out, struct iod_err *e)
{
	struct iod_sec_tls *t;
	unsigned want = 0;
	int rc;

	if ((rc = iod_sec_tls_open(c, fd, true, &t, e)))
		return rc;
	while ((rc = iod_sec_tls_handshake(t, &want, e)) == -EAGAIN)
		if ((rc = wait_want(fd, want, deadline_ms))) {
			iod_err_set(e, rc, "TLS handshake: %s", strerror(-rc));
			break;
		}
	if (!rc && t->peer.id.kind != want_peer) {
		char who[IOD_NAME_MAX * 3];
		iod_sec_identity_format(&t->peer.id, who, sizeof(who));
		rc = iod_err_set(e, -EACCES, "the peer is %s, not a %s of the cluster", who,
		                 iod_sec_kind_name(want_peer));
	}
	if (rc) {
		iod_sec_tls_close(t);
		return rc;
	}
	*out = t;
	return 0;
}

int iod_sec_tls_write_all(struct iod_sec_tls *t, int fd, const void *buf, size_t n,
                          uint64_t deadline_ms, struct iod_err *e)
{
	const char *p = buf;
	while (n) {
		unsigned want = 0;
		long w = iod_sec_tls_write(t, p, n, &want, e);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w == -EAGAIN) {
			int rc = wait_want(fd, want, deadline_ms);
			if (rc)
				return rc;
			continue;
		}
		return w < 0 ? (int)w : -EPIPE;
	}
	return 0;
}

long iod_sec_tls_read_wait(struct iod_sec_tls *t, int fd, void *buf, size_t n, uint64_t deadline_ms,
                           struct iod_err *e)
{
	for (;;) {
		unsigned want = 0;
		long r = iod_sec_tls_read(t, buf, n, &want, e);
		if (r != -EAGAIN)
			return r;
		int rc = wait_want(fd, want, deadline_ms);
		if (rc)
			return rc;
	}
}
