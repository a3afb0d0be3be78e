/*
 * proxy_mtls.c: proxy-to-proxy mutual TLS. When an endpoint sits behind
 * another node's proxy (the endpoint's "mtls" address), the sending proxy
 * does not dial it: it dials that proxy over mutual TLS, presenting the
 * SVID of the calling service (spiffe://<cluster>/ns/<tenant>/svc/<name>),
 * checks that the peer is the node it meant to reach, and names the
 * endpoint in a one-line preamble. The receiving proxy checks the peer's
 * certificate against the cluster CA, authorises the call by the SVID's
 * identity (the same service policies as for local callers, whose identity
 * is their socket's uid), and connects to its local endpoint.
 *
 * The L4 and HTTP code stays as it is: its upstream socket is one end of a
 * socketpair, and this file relays between the other end and the TLS
 * connection (two connection slots, CK_MTLS_P and CK_MTLS_T, each with
 * its 16 KiB buffer: the bytes read from it, waiting to be written to its
 * peer). A buffer is read only when empty, so a slow side stops the other
 * (backpressure) and nothing is allocated per request. Decrypted bytes the
 * TLS session still holds are not signalled by epoll: a relay that stops
 * with some left goes on the worker's "again" list, run after each burst.
 *
 * Credentials are re-read when their files change and swapped in for new
 * sessions; open sessions keep theirs, so rotation drops nothing.
 */
#include "internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <unistd.h>

/* "IOD-MESH/1 <service> <ip:port>\n": what the sender wants reached. */
#define PREAMBLE "IOD-MESH/1 "
#define PREAMBLE_MAX 160

/* TLS side states. */
enum { T_CONNECTING, T_HANDSHAKE, T_PREAMBLE, T_RELAY };
/* Plain side states (the receiver's connection to its endpoint). */
enum { P_CONNECTING, P_RELAY };

/* ---- credentials --------------------------------------------------------- */

static int64_t mtime_ns(const char *path)
{
	struct stat st;
	if (stat(path, &st))
		return -1;
	return (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
}

/* Load base.crt/.key with dir/ca.crt into *c (new) or rotate *c. */
static int load_pair(const char *dir, const char *base, struct iod_sec_tls_creds **c,
                     int64_t *mtime, struct iod_err *e)
{
	char ca_path[4096], crt[4096], key[4096];
	char *ca = NULL, *cert = NULL, *k = NULL;
	int rc;

	snprintf(ca_path, sizeof(ca_path), "%s/ca.crt", dir);
	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, base);
	snprintf(key, sizeof(key), "%s/%s.key", dir, base);
	int64_t m = mtime_ns(crt);
	if (m < 0)
		return iod_err_set(e, -ENOENT, "mTLS: %s: %s", crt, strerror(errno));
	if (*c && m == *mtime)
		return 0;
	if ((rc = iod_sec_read_file(ca_path, false, &ca, e)) ||
	    (rc = iod_sec_read_file(crt, false, &cert, e)) ||
	    (rc = iod_sec_read_file(key, true, &k, e)))
		goto out;
	rc = *c ? iod_sec_tls_creds_rotate(*c, cert, k, e)
	        : iod_sec_tls_creds_new(ca, cert, k, c, e);
	if (!rc)
		*mtime = m;
out:
	free(ca);
	free(cert);
	if (k)
		memset(k, 0, strlen(k));
	free(k);
	return rc;
}

/* Find (or load) the SVID of tenant/service: its ids index, or -errno. */
static int ident_get(struct iod_mesh_proxy *p, const char *tenant, const char *service,
                     struct iod_err *e)
{
	struct mtls *m = p->mtls;
	int idx = -1;
	pthread_mutex_lock(&m->mu);
	for (uint32_t i = 0; i < m->ids_n && idx < 0; i++)
		if (!strcmp(m->ids[i].tenant, tenant) && !strcmp(m->ids[i].service, service))
			idx = (int)i;
	if (idx < 0 && m->ids_n >= IOD_MESH_MTLS_IDS_MAX)
		idx = iod_err_set(e, -ENOSPC, "mTLS: more than %d SVIDs", IOD_MESH_MTLS_IDS_MAX);
	if (idx == -1) {
		/* first use: read its files (once per identity, then cached) */
		struct mtls_id *id = &m->ids[m->ids_n];
		char base[2 * IOD_NAME_MAX + 2];
		memset(id, 0, sizeof(*id));
		iod_strlcpy(id->tenant, tenant, sizeof(id->tenant));
		iod_strlcpy(id->service, service, sizeof(id->service));
		snprintf(base, sizeof(base), "%s/%s", tenant, service);
		idx = load_pair(p->opts.mtls_dir, base, &id->creds, &id->mtime_ns, e);
		if (!idx)
			idx = (int)m->ids_n++;
	}
	pthread_mutex_unlock(&m->mu);
	return idx;
}

int iod_mesh_mtls_init(struct iod_mesh_proxy *p, struct iod_err *e)
{
	const struct iod_mesh_proxy_opts *o = &p->opts;
	if (!o->mtls_dir)
		return 0;
	struct mtls *m = calloc(1, sizeof(*m));
	if (!m)
		return iod_err_set(e, -ENOMEM, "out of memory");
	pthread_mutex_init(&m->mu, NULL);
	m->fallback = -1;
	p->mtls = m;
	int rc;
	if (o->mtls_node_creds) {
		m->in = o->mtls_node_creds; /* rotated in place by its owner */
		m->in_borrowed = true;
	} else if (o->mtls_listen &&
	           (rc = load_pair(o->mtls_dir, "node", &m->in, &m->in_mtime_ns, e))) {
		return rc;
	}
	if (o->mtls_identity) {
		char tenant[IOD_NAME_MAX] = "", service[IOD_NAME_MAX] = "";
		const char *slash = strchr(o->mtls_identity, '/');
		if (slash && (size_t)(slash - o->mtls_identity) < sizeof(tenant)) {
			memcpy(tenant, o->mtls_identity, (size_t)(slash - o->mtls_identity));
			iod_strlcpy(service, slash + 1, sizeof(service));
		}
		if (!iod_sec_name_valid(tenant) || !iod_sec_name_valid(service))
			return iod_err_set(e, -EINVAL, "mTLS identity \"%s\": want TENANT/SERVICE",
			                   o->mtls_identity);
		if ((rc = ident_get(p, tenant, service, e)) < 0)
			return rc;
		m->fallback = rc;
	}
	struct iod_sec_tls_creds *any = m->in ? m->in : m->ids_n ? m->ids[0].creds : NULL;
	if (o->mtls_node_creds && !o->mtls_dir)
		return iod_err_set(e, -EINVAL,
		                   "mTLS: node credentials without a directory of SVIDs");
	if (any) {
		iod_strlcpy(m->cluster, iod_sec_ca_cluster(iod_sec_tls_creds_ca(any)),
		            sizeof(m->cluster));
	} else {
		/* neither side configured: the callers' SVIDs load on first use */
		char ca[4096];
		snprintf(ca, sizeof(ca), "%s/ca.crt", o->mtls_dir);
		if (access(ca, R_OK))
			return iod_err_set(e, -ENOENT, "mTLS: %s: %s", ca, strerror(errno));
	}
	return 0;
}

void iod_mesh_mtls_free(struct iod_mesh_proxy *p)
{
	struct mtls *m = p->mtls;
	if (!m)
		return;
	if (!m->in_borrowed)
		iod_sec_tls_creds_free(m->in);
	for (uint32_t i = 0; i < m->ids_n; i++)
		iod_sec_tls_creds_free(m->ids[i].creds);
	pthread_mutex_destroy(&m->mu);
	free(m);
	p->mtls = NULL;
}

int iod_mesh_proxy_mtls_reload(struct iod_mesh_proxy *p, struct iod_err *e)
{
	struct mtls *m = p->mtls;
	int rc = 0;
	if (!m)
		return 0;
	if (m->in && !m->in_borrowed) {
		int64_t before = m->in_mtime_ns;
		rc = load_pair(p->opts.mtls_dir, "node", &m->in, &m->in_mtime_ns, e);
		if (m->in_mtime_ns != before)
			__atomic_add_fetch(&m->rotations, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&m->mu);
	for (uint32_t i = 0; i < m->ids_n; i++) {
		char base[2 * IOD_NAME_MAX + 2];
		int64_t before = m->ids[i].mtime_ns;
		struct iod_err e2 = {0};
		snprintf(base, sizeof(base), "%s/%s", m->ids[i].tenant, m->ids[i].service);
		int r =
		    load_pair(p->opts.mtls_dir, base, &m->ids[i].creds, &m->ids[i].mtime_ns, &e2);
		if (r && !rc) {
			rc = r;
			*e = e2;
		}
		if (m->ids[i].mtime_ns != before)
			__atomic_add_fetch(&m->rotations, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* ---- the relay ------------------------------------------------------------ */

static void again_add(struct worker *w, struct conn *c)
{
	if (c->again)
		return;
	c->again = true;
	c->next_again = w->again;
	w->again = c;
}

void iod_mesh_mtls_close(struct worker *w, struct conn *c)
{
	struct conn *q = c->peer;
	if (q) {
		q->peer = NULL;
		iod_mesh_mtls_close(w, q);
	}
	iod_mesh_conn_put(w, c); /* closes its TLS session, leaves the again list */
}

/* Interest of one side: read while its buffer is empty (and it may),
 * write while its peer's buffer has bytes for it. */
static void rearm(struct worker *w, struct conn *c)
{
	uint32_t ev = 0;
	if (c->kind == CK_MTLS_T && c->state != T_RELAY) {
		if (c->state == T_CONNECTING)
			ev = EPOLLOUT;
		else
			ev = c->tls_want_out ? EPOLLOUT : EPOLLIN;
	} else if (c->kind == CK_MTLS_P && c->state == P_CONNECTING) {
		ev = EPOLLOUT;
	} else {
		if (c->len == 0)
			ev |= EPOLLIN | EPOLLRDHUP;
		if ((c->peer && c->peer->len > c->peer->off) || c->tls_want_out)
			ev |= EPOLLOUT;
	}
	if (iod_mesh_conn_watch(w, c, ev))
		iod_mesh_mtls_close(w, c);
}

/* Can dst take bytes now? (TLS: handshake done; plain: connected) */
static bool writable(const struct conn *dst)
{
	return dst->kind == CK_MTLS_T ? dst->state == T_RELAY : dst->state == P_RELAY;
}

/* Write src's buffered bytes to dst: 1 all written, 0 would block, -1 dead. */
static int flush(struct worker *w, struct conn *src, struct conn *dst)
{
	while (src->off < src->len) {
		if (!writable(dst))
			return 0;
		long n;
		if (dst->tls) {
			unsigned want = 0;
			struct iod_err e = {0};
			/* GnuTLS: a send that said EAGAIN is retried with the same length */
			size_t len = dst->tls_wlen ? dst->tls_wlen : src->len - src->off;
			n = iod_sec_tls_write(dst->tls, src->buf + src->off, len, &want, &e);
			if (n == -EAGAIN) {
				dst->tls_wlen = (uint32_t)len;
				dst->tls_want_out = true;
				return 0;
			}
			dst->tls_wlen = 0;
			dst->tls_want_out = false;
		} else {
			n = send(dst->fd, src->buf + src->off, src->len - src->off, MSG_NOSIGNAL);
			if (n < 0 && errno == EAGAIN)
				return 0;
		}
		if (n <= 0)
			return -1;
		src->off += (uint32_t)n;
		dst->last_io_ns = w->now_ns;
	}
	src->off = src->len = 0;
	return 1;
}

/* Read from c (when its buffer is empty) and pass it on, until either
 * side would block. false when the pair was closed. */
static bool pump(struct worker *w, struct conn *c)
{
	struct conn *dst = c->peer;
	for (int k = 0; dst; k++) {
		if (c->len == 0) {
			if (k >= 64) {
				/* fairness: give the loop back; decrypted bytes the session
				 * holds wake no epoll, so come back after this burst */
				if (c->tls && iod_sec_tls_pending(c->tls))
					again_add(w, c);
				return true;
			}
			long n;
			if (c->tls) {
				unsigned want = 0;
				struct iod_err e = {0};
				n = iod_sec_tls_read(c->tls, c->buf, IOD_MESH_HTTP_BUF, &want, &e);
				if (n == -EAGAIN) {
					c->tls_want_out |= want == POLLOUT;
					return true;
				}
			} else {
				n = read(c->fd, c->buf, IOD_MESH_HTTP_BUF);
				if (n < 0 && errno == EAGAIN)
					return true;
			}
			if (n <= 0) {
				iod_mesh_mtls_close(w, c); /* EOF or error: both ends go */
				return false;
			}
			c->len = (uint32_t)n;
			c->off = 0;
			c->last_io_ns = w->now_ns;
		}
		int r = flush(w, c, dst);
		if (r < 0) {
			iod_mesh_mtls_close(w, c);
			return false;
		}
		if (r == 0)
			return true;
	}
	return true;
}

/* Both directions of a pair, then both interests. */
static void relay(struct worker *w, struct conn *c)
{
	struct conn *q = c->peer;
	if (!q || !pump(w, c) || !pump(w, q))
		return;
	rearm(w, c);
	rearm(w, q);
}

/* What event ev on c can move: readable, c's bytes to its peer; writable,
 * the peer's waiting bytes into c (and a TLS read that wanted to write).
 * Not the peer's socket otherwise: a read of it would only say EAGAIN,
 * a wasted syscall per request each way. */
static void relay_ev(struct worker *w, struct conn *c, uint32_t ev)
{
	struct conn *q = c->peer;
	bool in = ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR);
	bool out = ev & EPOLLOUT;
	if (!q)
		return;
	if (out && q->len > q->off) {
		int r = flush(w, q, c);
		if (r < 0) {
			iod_mesh_mtls_close(w, c);
			return;
		}
	}
	/* the peer's session may hold decrypted bytes its socket will not signal */
	if (out && q->len == 0 && q->tls && iod_sec_tls_pending(q->tls) && !pump(w, q))
		return;
	if ((in || (out && c->tls_want_out)) && c->peer && !pump(w, c))
		return;
	if (!c->peer)
		return;
	rearm(w, c);
	rearm(w, q);
}

void iod_mesh_again_add(struct worker *w, struct conn *c)
{
	again_add(w, c);
}

void iod_mesh_mtls_again(struct worker *w)
{
	struct conn *c = w->again;
	w->again = NULL;
	while (c) {
		struct conn *next = c->next_again;
		c->again = false;
		c->next_again = NULL;
		if (c->in_use && (c->kind == CK_MTLS_T || c->kind == CK_MTLS_P) && c->peer)
			relay(w, c);
		else if (c->in_use && c->kind == CK_HTTP_UP && c->tls)
			iod_mesh_http_event(w, c, EPOLLIN); /* decrypted bytes epoll cannot see */
		c = next;
	}
}

/* ---- the receiving side --------------------------------------------------- */

static void refuse(struct worker *w, struct conn *t, const char *why)
{
	STAT_INC(w->mtls_refused);
	IOD_DEBUG("mesh", "mTLS peer %s refused: %s", t->client_addr, why);
	iod_mesh_mtls_close(w, t);
}

/* Does the view say the verified peer of t is revoked? why gets the reason. */
static bool peer_revoked(struct worker *w, struct iod_sec_tls *t, char *why, size_t len)
{
	const struct iod_sec_cert_info *pi = iod_sec_tls_peer(t);
	if (!pi)
		return false;
	pthread_mutex_lock(&w->p->mu);
	bool r = iod_mesh_peer_revoked(&w->p->view, pi, why, len);
	pthread_mutex_unlock(&w->p->mu);
	return r;
}

/* A revoked peer: counted as refused and as revoked, closed. */
static void refuse_revoked(struct worker *w, struct conn *t, const char *why)
{
	STAT_INC(w->mtls_revoked);
	refuse(w, t, why);
}

void iod_mesh_mtls_sweep(struct worker *w)
{
	struct conn *c = w->used;
	while (c) {
		struct conn *next = c->next_used;
		char why[160];
		if (c->kind == CK_MTLS_T && c->tls &&
		    (c->state == T_PREAMBLE || c->state == T_RELAY) &&
		    peer_revoked(w, c->tls, why, sizeof(why))) {
			refuse_revoked(w, c, why);
		} else if (c->kind == CK_HTTP_UP && c->tls && c->tls_phase == 3 &&
		           !c->peer_revoked && peer_revoked(w, c->tls, why, sizeof(why))) {
			/* TLS straight on an HTTP upstream: its node proxy is revoked */
			STAT_INC(w->mtls_revoked);
			IOD_DEBUG("mesh", "mTLS upstream %s: %s", c->client_addr, why);
			iod_mesh_http_up_revoked(w, c);
		}
		/* a close may have freed next (a peer): restart from the head */
		if (next && !next->in_use)
			next = w->used;
		c = next;
	}
}

/* A policy refused the SVID's call: counted, traced, closed. */
static void deny(struct worker *w, struct conn *t, struct wsvc *s, const char *caller,
                 const struct iod_sec_verdict *v)
{
	struct iod_mesh_span sp;
	memset(&sp, 0, sizeof(sp));
	sp.kind = IOD_MESH_SPAN_FLOW;
	iod_mesh_trace_ids_new(&w->rng, sp.trace_id, 16);
	iod_mesh_trace_ids_new(&w->rng, sp.span_id, 8);
	iod_strlcpy(sp.service, s->svc.name, sizeof(sp.service));
	iod_strlcpy(sp.client, t->client_addr, sizeof(sp.client));
	iod_strlcpy(sp.denied_by, v->policy, sizeof(sp.denied_by));
	iod_strlcpy(sp.caller, caller, sizeof(sp.caller));
	sp.start_unix_ns = sp.end_unix_ns = iod_mesh_unix_ns(w);
	sp.status = EACCES;
	iod_mesh_span_ring_push(w->spans, &sp);
	STAT_INC(s->st.denied);
	STAT_INC(w->mtls_denied);
	iod_mesh_mtls_close(w, t);
}

/* The preamble is in t->buf[0..nl]: find the endpoint, authorise the
 * peer's SVID for it, connect. */
static void on_preamble(struct worker *w, struct conn *t, uint32_t nl)
{
	char line[PREAMBLE_MAX + 1], svc[IOD_NAME_MAX], addr[32];
	memcpy(line, t->buf, nl);
	line[nl] = 0;
	if (strncmp(line, PREAMBLE, strlen(PREAMBLE)) ||
	    sscanf(line + strlen(PREAMBLE), "%63s %31s", svc, addr) != 2) {
		refuse(w, t, "bad preamble");
		return;
	}
	uint32_t ip4;
	uint16_t port;
	struct wsvc *s = NULL;
	for (uint32_t i = 0; i < IOD_MESH_SERVICES_MAX && !s; i++)
		if (w->svcs[i].active && !strcmp(w->svcs[i].svc.name, svc))
			s = &w->svcs[i];
	uint32_t ep = UINT32_MAX;
	if (s && !iod_mesh_addr_parse(addr, &ip4, &port, true))
		for (uint32_t i = 0; i < s->svc.eps_n && ep == UINT32_MAX; i++)
			if (s->svc.eps[i].ip4 == ip4 && s->svc.eps[i].port == port &&
			    !s->svc.eps[i].mtls_ip4)
				ep = i;
	if (ep == UINT32_MAX) {
		/* only endpoints this proxy serves locally: no open relay */
		refuse(w, t, "no such local endpoint");
		return;
	}
	/* identity-based policy: the SVID's tenant and service; a node's
	 * certificate speaks for its own processes (what a local caller that is
	 * no replica gets: only "from: *" policies) */
	const struct iod_sec_cert_info *pi = iod_sec_tls_peer(t->tls);
	struct iod_sec_verdict v;
	char caller[2 * IOD_NAME_MAX + 8];
	bool node = pi->id.kind == IOD_SEC_KIND_NODE;
	snprintf(caller, sizeof(caller), "%s/%s", node ? "node" : pi->id.tenant, pi->id.name);
	pthread_mutex_lock(&w->p->mu);
	if (node)
		iod_mesh_authz_decide(&w->p->view, false, 0, &s->svc, NULL, &v);
	else
		iod_sec_policy_decide(w->p->view.policies, pi->id.tenant, pi->id.name,
		                      s->svc.tenant[0] ? s->svc.tenant : "default", s->svc.name,
		                      NULL, s->svc.port, &v);
	pthread_mutex_unlock(&w->p->mu);
	if (!v.allow) {
		deny(w, t, s, caller, &v);
		return;
	}
	int fd = iod_mesh_connect(ip4, port);
	struct conn *q = fd >= 0 ? iod_mesh_conn_get(w, CK_MTLS_P, fd) : NULL;
	if (!q) {
		if (fd >= 0)
			close(fd);
		refuse(w, t, "cannot reach the endpoint");
		return;
	}
	q->slot = (uint32_t)(s - w->svcs);
	q->state = P_CONNECTING;
	q->peer = t;
	t->peer = q;
	t->state = T_RELAY;
	/* bytes after the preamble are the stream's first */
	t->len -= nl + 1;
	memmove(t->buf, t->buf + nl + 1, t->len);
	t->off = 0;
	rearm(w, q);
	if (t->in_use)
		iod_mesh_conn_watch(w, t, t->len ? 0 : EPOLLIN | EPOLLRDHUP);
}

/* Read the preamble line (after the handshake). */
static void read_preamble(struct worker *w, struct conn *t)
{
	for (;;) {
		char *nl = memchr(t->buf, '\n', t->len);
		if (nl) {
			on_preamble(w, t, (uint32_t)(nl - t->buf));
			return;
		}
		if (t->len >= PREAMBLE_MAX) {
			refuse(w, t, "preamble too long");
			return;
		}
		unsigned want = 0;
		struct iod_err e = {0};
		long n =
		    iod_sec_tls_read(t->tls, t->buf + t->len, PREAMBLE_MAX - t->len, &want, &e);
		if (n == -EAGAIN) {
			t->tls_want_out = want == POLLOUT;
			rearm(w, t);
			return;
		}
		if (n <= 0) {
			refuse(w, t, "closed before its preamble");
			return;
		}
		t->len += (uint32_t)n;
	}
}

void iod_mesh_mtls_accept(struct worker *w)
{
	struct mtls *m = w->p->mtls;
	for (int k = 0; k < 64; k++) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		int one = 1;
		int fd = iod_fd_accept(w->mtls_lst.fd, (struct sockaddr *)&sa, &sl,
		                       SOCK_NONBLOCK | SOCK_CLOEXEC, &w->reserve_fd);
		if (fd == -ECONNABORTED) {
			STAT_INC(w->cx_shed); /* out of descriptors: shed, do not spin */
			continue;
		}
		if (fd < 0)
			return;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct conn *t = iod_mesh_conn_get(w, CK_MTLS_T, fd);
		struct iod_err e = {0};
		if (!t) {
			w->cx_refused++;
			close(fd);
			continue;
		}
		iod_mesh_addr_format(ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port), t->client_addr,
		                     sizeof(t->client_addr));
		t->state = T_HANDSHAKE;
		t->head_start_ns = w->now_ns; /* handshake + preamble deadline */
		if (iod_sec_tls_open(m->in, fd, false, &t->tls, &e)) {
			refuse(w, t, e.msg);
			continue;
		}
		rearm(w, t);
	}
}

/* ---- the sending side ----------------------------------------------------- */

int iod_mesh_upstream_identity(struct worker *w, const struct wsvc *s, uint32_t ep,
                               const struct conn *c)
{
	struct iod_mesh_proxy *p = w->p;
	if (!s->svc.eps[ep].mtls_ip4)
		return 0;
	if (!p->mtls)
		return -EACCES;
	int idx = -1;
	if (c && c->peer_known) {
		/* the caller's own SVID: it, not this node, is who calls */
		char tenant[IOD_NAME_MAX] = "", service[IOD_NAME_MAX] = "";
		pthread_mutex_lock(&p->mu);
		const struct iod_mesh_caller *k = iod_mesh_caller_find(&p->view, c->peer_uid);
		if (k) {
			iod_strlcpy(tenant, k->tenant[0] ? k->tenant : "default", sizeof(tenant));
			iod_strlcpy(service, k->service, sizeof(service));
		}
		pthread_mutex_unlock(&p->mu);
		struct iod_err e = {0};
		if (service[0] && (idx = ident_get(p, tenant, service, &e)) < 0)
			IOD_DEBUG("mesh", "no SVID for %s/%s: %s", tenant, service, e.msg);
		if (service[0] && idx < 0)
			return -EACCES; /* a known caller never borrows another identity */
	}
	if (idx < 0)
		idx = p->mtls->fallback;
	if (idx < 0 && p->mtls->in)
		return IOD_MESH_MTLS_NODE_ID; /* a process of this node: the node's certificate */
	return idx < 0 ? -EACCES : idx + 1;
}

/*
 * service_mesh.transport not tcp and the endpoint on this node: its
 * replica's AF_UNIX socket (DIR/ep/ENDPOINT.sock) when it listens there.
 * A connect to a path nobody listens on fails at once (ENOENT,
 * ECONNREFUSED), and so does a full backlog (EAGAIN): the caller then
 * dials TCP. -1 = not this path.
 */
static int upstream_unix(struct worker *w, const struct wsvc *s, const struct iod_mesh_endpoint *e)
{
	const struct iod_mesh_proxy_opts *o = &w->p->opts;
	struct iod_mesh_hop hop = {.same_node = e->node[0] && !strcmp(e->node, w->node),
	                           .unix_ok = o->unix_dir != NULL};
	if (iod_mesh_tp_pick(s->tp_want, &hop, NULL) != IOD_MESH_PATH_SHM)
		return -1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (iod_mesh_unix_path(o->unix_dir, e->id, true, sa.sun_path, sizeof(sa.sun_path)) ||
	    strchr(e->id, '/'))
		return -1;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	/* ep/ is shared (sticky): a socket under a uid the view gives to a
	 * replica of another service squats this endpoint's name; refuse it
	 * (TCP then). A uid the view does not name (no identities, replicas
	 * under the agent's uid) is taken as the replica's. */
	struct ucred cr = {0};
	socklen_t cl = sizeof(cr);
	if (w->authz && !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl)) {
		bool other = false;
		pthread_mutex_lock(&w->p->mu);
		for (uint32_t i = 0; i < w->p->view.callers_n; i++)
			if (w->p->view.callers[i].uid == cr.uid)
				other = strcmp(w->p->view.callers[i].service, s->svc.name) != 0;
		pthread_mutex_unlock(&w->p->mu);
		if (other) {
			IOD_WARN("mesh",
			         "service %s: %s is held by uid %u, a replica of another "
			         "service: dialling TCP",
			         s->svc.name, sa.sun_path, (unsigned)cr.uid);
			close(fd);
			return -1;
		}
	}
	return fd;
}

int iod_mesh_upstream_connect(struct worker *w, const struct wsvc *s, uint32_t ep, int id)
{
	const struct iod_mesh_endpoint *e = &s->svc.eps[ep];
	struct mtls *m = w->p->mtls;
	w->up_tp = IOD_MESH_PATH_TCP;
	if (!e->mtls_ip4) {
		int fd = upstream_unix(w, s, e);
		if (fd >= 0) {
			w->up_tp = IOD_MESH_PATH_SHM;
			return fd;
		}
		return iod_mesh_connect(e->ip4, e->port);
	}
	if (!m || id < 1 || ((uint32_t)id > m->ids_n && id != IOD_MESH_MTLS_NODE_ID) ||
	    (id == IOD_MESH_MTLS_NODE_ID && !m->in))
		return -EACCES; /* behind a proxy we cannot prove ourselves to */
	pthread_mutex_lock(&m->mu);
	struct iod_sec_tls_creds *creds =
	    id == IOD_MESH_MTLS_NODE_ID ? m->in : m->ids[id - 1].creds;
	pthread_mutex_unlock(&m->mu);
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp))
		return -errno;
	int fd = iod_mesh_connect(e->mtls_ip4, e->mtls_port);
	if (fd < 0) {
		close(sp[0]);
		close(sp[1]);
		return fd;
	}
	struct conn *q = iod_mesh_conn_get(w, CK_MTLS_P, sp[1]);
	struct conn *t = q ? iod_mesh_conn_get(w, CK_MTLS_T, fd) : NULL;
	struct iod_err err = {0};
	if (!q || !t || iod_sec_tls_open(creds, fd, true, &t->tls, &err)) {
		if (t)
			iod_mesh_conn_put(w, t);
		else
			close(fd);
		if (q)
			iod_mesh_conn_put(w, q);
		else
			close(sp[1]);
		close(sp[0]);
		return -ENOMEM;
	}
	t->outbound = true;
	t->state = T_CONNECTING;
	t->head_start_ns = w->now_ns;
	t->slot = q->slot = (uint32_t)(s - w->svcs);
	iod_strlcpy(t->mtls_peer, e->node, sizeof(t->mtls_peer));
	iod_mesh_addr_format(e->mtls_ip4, e->mtls_port, t->client_addr, sizeof(t->client_addr));
	q->state = P_RELAY;
	q->peer = t;
	t->peer = q;
	/* the preamble goes first, ahead of what the upstream side writes */
	char addr[32];
	iod_mesh_addr_format(e->ip4, e->port, addr, sizeof(addr));
	q->len =
	    (uint32_t)snprintf(q->buf, IOD_MESH_HTTP_BUF, PREAMBLE "%s %s\n", s->svc.name, addr);
	q->off = 0;
	rearm(w, t);
	if (q->in_use)
		rearm(w, q);
	return sp[0];
}

int iod_mesh_upstream_dial_tls(struct worker *w, const struct wsvc *s, uint32_t ep, int id,
                               struct iod_sec_tls **tls, char *pre, uint32_t *pre_len)
{
	const struct iod_mesh_endpoint *e = &s->svc.eps[ep];
	struct mtls *m = w->p->mtls;
	struct iod_err err = {0};
	*tls = NULL;
	if (!m || id < 1 || ((uint32_t)id > m->ids_n && id != IOD_MESH_MTLS_NODE_ID) ||
	    (id == IOD_MESH_MTLS_NODE_ID && !m->in))
		return -EACCES;
	pthread_mutex_lock(&m->mu);
	struct iod_sec_tls_creds *creds =
	    id == IOD_MESH_MTLS_NODE_ID ? m->in : m->ids[id - 1].creds;
	pthread_mutex_unlock(&m->mu);
	int fd = iod_mesh_connect(e->mtls_ip4, e->mtls_port);
	if (fd < 0)
		return fd;
	if (iod_sec_tls_open(creds, fd, true, tls, &err)) {
		close(fd);
		return -ENOMEM;
	}
	char addr[32];
	iod_mesh_addr_format(e->ip4, e->port, addr, sizeof(addr));
	*pre_len = (uint32_t)snprintf(pre, PREAMBLE_MAX, PREAMBLE "%s %s\n", s->svc.name, addr);
	return fd;
}

bool iod_mesh_mtls_peer_ok(struct worker *w, struct iod_sec_tls *t, const char *node)
{
	const struct iod_sec_cert_info *pi = iod_sec_tls_peer(t);
	char why[160];
	/* we reach a node's proxy: the one the view says runs the endpoint */
	if (pi->id.kind != IOD_SEC_KIND_NODE || (node[0] && strcmp(pi->id.name, node))) {
		STAT_INC(w->mtls_refused);
		return false;
	}
	if (peer_revoked(w, t, why, sizeof(why))) {
		/* a revoked node's proxy gets no request of ours */
		STAT_INC(w->mtls_refused);
		STAT_INC(w->mtls_revoked);
		IOD_DEBUG("mesh", "mTLS upstream node %s refused: %s", pi->id.name, why);
		return false;
	}
	STAT_INC(w->mtls_out);
	return true;
}

/* The TLS side's handshake step; on success the relay starts. */
static void handshake(struct worker *w, struct conn *t)
{
	unsigned want = 0;
	struct iod_err e = {0};
	int rc = iod_sec_tls_handshake(t->tls, &want, &e);
	if (rc == -EAGAIN) {
		t->tls_want_out = want == POLLOUT;
		rearm(w, t);
		return;
	}
	t->tls_want_out = false;
	if (rc) {
		refuse(w, t, e.msg);
		return;
	}
	const struct iod_sec_cert_info *pi = iod_sec_tls_peer(t->tls);
	if (t->outbound) {
		/* we reach a node's proxy: the one the view says runs the endpoint */
		if (pi->id.kind != IOD_SEC_KIND_NODE ||
		    (t->mtls_peer[0] && strcmp(pi->id.name, t->mtls_peer))) {
			refuse(w, t, "the peer is not the endpoint's node proxy");
			return;
		}
		char why[160];
		if (peer_revoked(w, t->tls, why, sizeof(why))) {
			refuse_revoked(w, t, why);
			return;
		}
		STAT_INC(w->mtls_out);
		t->state = T_RELAY;
		relay(w, t);
		return;
	}
	/* a proxy dials in for one of its callers: a service SVID, or its
	 * node's certificate for the node's own processes */
	if (pi->id.kind != IOD_SEC_KIND_SERVICE && pi->id.kind != IOD_SEC_KIND_NODE) {
		refuse(w, t, "the peer presents no service or node identity");
		return;
	}
	/* `iod revoke`: a revoked node's certificate, a revoked service's SVID
	 * and every SVID issued to a revoked node */
	char why[160];
	if (peer_revoked(w, t->tls, why, sizeof(why))) {
		refuse_revoked(w, t, why);
		return;
	}
	STAT_INC(w->mtls_in);
	t->state = T_PREAMBLE;
	read_preamble(w, t);
}

void iod_mesh_mtls_event(struct worker *w, struct conn *c, uint32_t ev)
{
	if (c->kind == CK_MTLS_T && c->state == T_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err || (ev & (EPOLLERR | EPOLLHUP))) {
			refuse(w, c, "connect failed");
			return;
		}
		c->state = T_HANDSHAKE;
		handshake(w, c);
		return;
	}
	if (c->kind == CK_MTLS_T && c->state == T_HANDSHAKE) {
		handshake(w, c);
		return;
	}
	if (c->kind == CK_MTLS_T && c->state == T_PREAMBLE) {
		read_preamble(w, c);
		return;
	}
	if (c->kind == CK_MTLS_P && c->state == P_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err || (ev & (EPOLLERR | EPOLLHUP))) {
			iod_mesh_mtls_close(w, c);
			return;
		}
		c->state = P_RELAY;
	}
	if (c->peer)
		relay_ev(w, c, ev);
	else
		iod_mesh_mtls_close(w, c);
}

void iod_mesh_mtls_timer(struct worker *w, struct conn *c)
{
	/* a peer that does not finish its handshake and preamble in time
	 * (slowloris on the mTLS port) is dropped like a slow request head */
	if (c->kind == CK_MTLS_T && c->state != T_RELAY && c->head_start_ns &&
	    w->now_ns - c->head_start_ns >= (uint64_t)IOD_MESH_HEAD_TIMEOUT_MS * IOD_NS_PER_MS)
		refuse(w, c, "handshake or preamble not done in time");
}
