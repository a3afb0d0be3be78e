/*
 * peer.c: checkpoint copies on peers over HTTP (docs/storage.md).
 *
 * The peer side is a small chunk server over one directory, laid out as a
 * tier directory (step-N/rR-G-I.chunk, step-N/rR.manifest), so a peer's
 * copy can be opened as a store and scrubbed, repaired or restored like a
 * local one. It takes:
 *
 *   PUT /ckpt/<step>/<file>   a chunk (x-iod-xxh3: its XXH3-64, checked
 *                             before it is kept) or the manifest, accepted
 *                             only when it parses and every chunk it names
 *                             is there with its hash: a peer "holds" a
 *                             checkpoint exactly when its manifest exists;
 *   GET /ckpt/<step>/<file>   the file.
 *
 * Requests are framed by the one HTTP codec (src/http/http.c); answers to
 * GETs are read with the one HTTP client. One thread per connection (at
 * most PEER_CONNS_MAX; stopping the server ends them and waits).
 *
 * Two transports. Plain HTTP (iod_ckpt_peer_start) only on a loopback
 * address: no listener beyond loopback without authentication and TLS.
 * Mutual TLS (iod_ckpt_peer_start_tls) on any address, through the one TLS
 * layer (src/sec/tls.c): the server presents its certificate (an agent's
 * node certificate) and requires one from the cluster CA of every client,
 * so a peer without one is refused at the handshake. The sender
 * (iod_ckpt_peer_put) and the readers (iod_ckpt_fetch, _get_chunk,
 * _latest) are the clients; they speak TLS when the process has set its
 * client credentials (iod_ckpt_peer_client_creds).
 */
#include "internal.h"

#include "iod/http.h"
#include "iod/sec.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* The biggest body a peer takes: a chunk or a manifest. */
#define PEER_BODY_MAX ((size_t)64 << 20)
#define PEER_HEAD_MAX 8192

/* Connections a server holds at most; more wait in the listen backlog. */
#define PEER_CONNS_MAX 64

/* How long a TLS connection may wait for a peer's bytes (an idle kept-alive
 * connection is closed after it). */
#define PEER_TLS_WAIT_MS 60000
/* How long a client has to finish its TLS handshake (a silent or slow one
 * would hold a connection slot otherwise), as Raft's. */
#define PEER_TLS_HANDSHAKE_MS 2000
/* Refused connections are logged at most once per this. */
#define PEER_WARN_EVERY_MS 10000

struct iod_ckpt_peer {
	int lfd;
	struct iod_sec_tls_creds *creds; /* NULL: plain HTTP (loopback); not owned */
	_Atomic uint64_t warned_ms;      /* when a refusal was last logged (monotonic) */
	pthread_t th;
	volatile int stop;
	/* open connections: stop shuts them down and waits for their threads,
	 * which read p, before freeing it */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int conn_fd[PEER_CONNS_MAX]; /* -1: free */
	uint32_t conns;
	char dir[PATH_MAX];
	char addr[IOD_ADDR_MAX];
};

/* "r<digits>" then ".manifest", or "-<digits>-<digits>.chunk". */
static const char *digits(const char *p)
{
	const char *q = p;
	while (*q >= '0' && *q <= '9' && q - p < 10)
		q++;
	return q > p ? q : NULL;
}

static bool file_name_ok(const char *f, bool *manifest)
{
	const char *p = f[0] == 'r' ? digits(f + 1) : NULL;
	*manifest = false;
	if (!p)
		return false;
	if (!strcmp(p, ".manifest"))
		return (*manifest = true);
	for (int i = 0; i < 2 && p; i++)
		p = *p == '-' ? digits(p + 1) : NULL;
	return p && !strcmp(p, ".chunk");
}

/* One accepted connection: the socket and, with mTLS, its session. */
struct pconn {
	int fd;
	struct iod_sec_tls *tls; /* NULL: plain HTTP */
};

static uint64_t deadline_ms(void)
{
	return iod_clock_now_ns() / IOD_NS_PER_MS + PEER_TLS_WAIT_MS;
}

static bool send_all(struct pconn *pc, const void *p, size_t n)
{
	const char *c = p;
	int fd = pc->fd;
	if (pc->tls) {
		struct iod_err e = {0};
		return iod_sec_tls_write_all(pc->tls, fd, p, n, deadline_ms(), &e) == 0;
	}
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

/* Bytes from the connection: > 0, 0 at its end, < 0 on an error. */
static long conn_recv(struct pconn *pc, void *buf, size_t n)
{
	if (pc->tls) {
		struct iod_err e = {0};
		return iod_sec_tls_read_wait(pc->tls, pc->fd, buf, n, deadline_ms(), &e);
	}
	return (long)recv(pc->fd, buf, n, 0);
}

static bool answer_body(struct pconn *fd, int status, const void *body, size_t len)
{
	char head[512];
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 %d %s\r\ncontent-length: %zu\r\ncontent-type: "
	                 "application/octet-stream\r\n\r\n",
	                 status, status < 300 ? "OK" : "Error", len);
	return send_all(fd, head, (size_t)n) && send_all(fd, body, len);
}

/* An answer whose body is a short text (a reason, or "held"). */
static bool answer(struct pconn *fd, int status, const char *why)
{
	return answer_body(fd, status, why, strlen(why));
}

static int write_file(const char *path, const void *p, size_t n)
{
	char tmp[PATH_MAX + 16];
	int rc = 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < n && !rc;) {
		ssize_t w = pwrite(fd, (const char *)p + off, n - off, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			rc = -errno;
		else
			off += (size_t)w;
	}
	if (!rc && fdatasync(fd))
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* Every chunk a manifest names is in dir with its hash. */
static int manifest_complete(const char *dir, const struct iod_ckpt_manifest *m, char *why,
                             size_t cap)
{
	char path[PATH_MAX + 64];
	uint8_t *buf = malloc(m->chunk_bytes ? m->chunk_bytes : 1);
	int rc = 0;
	if (!buf)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->chunks_n && !rc; i++) {
		const struct iod_ckpt_mchunk *k = &m->chunks[i];
		snprintf(path, sizeof(path), "%s/r%u-%u-%u.chunk", dir, m->rank, k->region,
		         k->index);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t got = fd >= 0 ? pread(fd, buf, k->len, 0) : -1;
		if (fd >= 0)
			close(fd);
		if (got != (ssize_t)k->len || XXH3_64bits(buf, k->len) != k->xxh3) {
			snprintf(why, cap, "chunk %u.%u is missing or damaged", k->region,
			         k->index);
			rc = -EBADMSG;
		}
	}
	free(buf);
	return rc;
}

/* A namespace (a replica's name): a letter, then [A-Za-z0-9._-], < 64. */
static bool ns_ok(const char *s, size_t n)
{
	if (n == 0 || n >= IOD_NAME_MAX ||
	    !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
		return false;
	return iod_str_name_chars(s, n);
}

/* The newest step under base holding rank's manifest; -ENOENT when none. */
static int latest_held(const char *base, unsigned rank, unsigned long long *step)
{
	char path[PATH_MAX + 96];
	struct stat st;
	struct dirent *d;
	DIR *dp = opendir(base);
	bool found = false;
	if (!dp)
		return -ENOENT;
	while ((d = readdir(dp))) {
		unsigned long long s;
		int n = 0;
		if (sscanf(d->d_name, "step-%20llu%n", &s, &n) != 1 || d->d_name[n])
			continue;
		snprintf(path, sizeof(path), "%s/%s/r%u.manifest", base, d->d_name, rank);
		if (stat(path, &st) == 0 && (!found || s > *step)) {
			*step = s;
			found = true;
		}
	}
	closedir(dp);
	return found ? 0 : -ENOENT;
}

static void handle(struct iod_ckpt_peer *p, struct pconn *fd, const char *method,
                   const char *target, const char *xxh3, const char *body, size_t len)
{
	char base[PATH_MAX + 80], dir[PATH_MAX + 112], path[PATH_MAX + 176], file[64] = "",
	                                                                     why[200];
	unsigned long long step = 0;
	unsigned rank = 0;
	bool manifest = false;
	int n = 0;
	const char *rest = strncmp(target, "/ckpt/", 6) ? NULL : target + 6;
	snprintf(base, sizeof(base), "%s", p->dir);
	if (rest && ((*rest >= 'a' && *rest <= 'z') || (*rest >= 'A' && *rest <= 'Z'))) {
		const char *sl = strchr(rest, '/');
		if (!sl || !ns_ok(rest, (size_t)(sl - rest))) {
			answer(fd, 404, "no such namespace: /ckpt/<replica>/...");
			return;
		}
		snprintf(base, sizeof(base), "%s/%.*s", p->dir, (int)(sl - rest), rest);
		rest = sl + 1;
	}
	if (rest && sscanf(rest, "latest?rank=%10u%n", &rank, &n) == 1 &&
	    (size_t)n == strlen(rest)) {
		char num[24];
		if (strcmp(method, "GET"))
			answer(fd, 405, "GET");
		else if (latest_held(base, rank, &step))
			answer(fd, 404, "no checkpoint of that rank held here");
		else {
			snprintf(num, sizeof(num), "%llu", step);
			answer(fd, 200, num);
		}
		return;
	}
	n = 0;
	if (!rest || sscanf(rest, "%20llu/%63s%n", &step, file, &n) != 2 ||
	    (size_t)n != strlen(rest) || !file_name_ok(file, &manifest)) {
		answer(fd, 404, "no such path: /ckpt/[<replica>/]<step>/<chunk or manifest>");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/step-%020llu", base, step);
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (!strcmp(method, "GET")) {
		struct iod_buf b;
		struct iod_err e = {0};
		iod_buf_init(&b);
		if (iod_buf_read_file(&b, path, PEER_BODY_MAX, &e))
			answer(fd, 404, "not held here");
		else
			answer_body(fd, 200, b.data ? b.data : "", b.len);
		iod_buf_free(&b);
		return;
	}
	if (strcmp(method, "PUT")) {
		answer(fd, 405, "PUT or GET");
		return;
	}
	if ((strcmp(base, p->dir) && mkdir(base, 0755) && errno != EEXIST) ||
	    (mkdir(dir, 0755) && errno != EEXIST)) {
		answer(fd, 500, "cannot create the step directory");
		return;
	}
	if (!manifest) {
		uint64_t want = xxh3 ? strtoull(xxh3, NULL, 16) : 0;
		if (!xxh3 || XXH3_64bits(body, len) != want) {
			answer(fd, 409, "chunk checksum (x-iod-xxh3) missing or wrong");
			return;
		}
		int rc = write_file(path, body, len);
		answer(fd, rc ? 500 : 201, rc ? strerror(-rc) : "held");
		return;
	}
	struct iod_ckpt_manifest m;
	struct iod_err e = {0};
	if (iod_ckpt_manifest_parse(body, len, &m, &e)) {
		answer(fd, 400, e.msg);
		return;
	}
	int rc = m.step != step ? -EINVAL : manifest_complete(dir, &m, why, sizeof(why));
	if (m.step != step)
		snprintf(why, sizeof(why), "manifest of step %llu under step %llu",
		         (unsigned long long)m.step, step);
	iod_ckpt_manifest_free(&m);
	if (rc) {
		answer(fd, 409, why);
		return;
	}
	rc = write_file(path, body, len);
	if (!rc) {
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0)
			(void)fsync(dfd), close(dfd);
	}
	answer(fd, rc ? 500 : 201, rc ? strerror(-rc) : "held");
}

struct conn_arg {
	struct iod_ckpt_peer *p;
	int fd;
};

/* Who may keep or read copies over mTLS: the cluster's own processes (an
 * agent's node, a replica's service identity, a server), not users. */
static bool peer_kind_ok(enum iod_sec_kind k)
{
	return k == IOD_SEC_KIND_NODE || k == IOD_SEC_KIND_SERVICE || k == IOD_SEC_KIND_SERVER;
}

bool iod_ckpt_peer_service_may(const char *service, const char *target)
{
	/* a replica's namespace is its name, <service>-<ordinal> */
	size_t n = strlen(service);
	const char *t = strncmp(target, "/ckpt/", 6) ? NULL : target + 6;
	if (!t || !n || strncmp(t, service, n) || t[n] != '-' || t[n + 1] < '0' || t[n + 1] > '9')
		return false;
	t += n + 1;
	while (*t >= '0' && *t <= '9')
		t++;
	return *t == '/';
}

static void *peer_conn(void *arg)
{
	struct conn_arg a = *(struct conn_arg *)arg;
	struct iod_http_msg *m = malloc(sizeof(*m));
	char *buf = malloc(PEER_HEAD_MAX + 1);
	char *body = NULL;
	size_t len = 0;
	struct pconn pc = {.fd = a.fd, .tls = NULL};
	char svc[IOD_NAME_MAX] = ""; /* a service identity's name: its replicas only */
	bool ok = true;
	free(arg);
	if (a.p->creds) { /* mTLS: a client certificate from the cluster CA, or nothing */
		struct iod_err e = {0};
		unsigned want = 0;
		uint64_t t0 = iod_clock_now_ns() / IOD_NS_PER_MS, now = t0;
		/* non-blocking: every wait below is bounded (poll with a deadline) */
		int rc = fcntl(a.fd, F_SETFL, fcntl(a.fd, F_GETFL) | O_NONBLOCK) < 0
		             ? -errno
		             : iod_sec_tls_open(a.p->creds, a.fd, false, &pc.tls, &e);
		while (!rc && (rc = iod_sec_tls_handshake(pc.tls, &want, &e)) == -EAGAIN) {
			struct pollfd pf = {.fd = a.fd, .events = (short)want};
			now = iod_clock_now_ns() / IOD_NS_PER_MS;
			if (a.p->stop || now >= t0 + PEER_TLS_HANDSHAKE_MS ||
			    poll(&pf, 1, (int)(t0 + PEER_TLS_HANDSHAKE_MS - now)) < 0)
				rc = iod_err_set(&e, -ETIMEDOUT, "no TLS handshake within %d ms",
				                 PEER_TLS_HANDSHAKE_MS);
			else
				rc = 0; /* go on with the handshake */
		}
		const struct iod_sec_cert_info *who = rc ? NULL : iod_sec_tls_peer(pc.tls);
		ok = who && peer_kind_ok(who->id.kind);
		if (ok && who->id.kind == IOD_SEC_KIND_SERVICE)
			snprintf(svc, sizeof(svc), "%s", who->id.name);
		now = iod_clock_now_ns() / IOD_NS_PER_MS;
		if (!ok && !a.p->stop && now >= a.p->warned_ms + PEER_WARN_EVERY_MS) {
			a.p->warned_ms = now;
			if (who)
				IOD_WARN("ckpt", "checkpoint peer %s: refused a %s's certificate",
				         a.p->addr, iod_sec_kind_name(who->id.kind));
			else
				IOD_WARN("ckpt", "checkpoint peer %s: refused a connection: %s",
				         a.p->addr, e.msg[0] ? e.msg : strerror(-rc));
		}
	}
	while (ok && m && buf && !a.p->stop) {
		int rc = iod_http_parse(buf, len, false, m);
		if (rc == -EAGAIN) {
			if (len >= PEER_HEAD_MAX)
				break;
			long n = conn_recv(&pc, buf + len, PEER_HEAD_MAX - len);
			if (n <= 0)
				break;
			len += (size_t)n;
			continue;
		}
		if (rc || m->chunked || (m->has_length && m->content_length > PEER_BODY_MAX)) {
			answer(&pc, 400, "bad request head, chunked body or body too large");
			break;
		}
		char method[8] = "", target[224] = "", xxh3[24] = "";
		if (m->method_len >= sizeof(method) || m->target_len >= sizeof(target)) {
			answer(&pc, 400, "method or path too long");
			break;
		}
		memcpy(method, buf + m->method_off, m->method_len);
		memcpy(target, buf + m->target_off, m->target_len);
		bool have_hash = false;
		for (uint32_t i = 0; i < m->hdr_n; i++)
			if (iod_http_header_is(buf, &m->hdr[i], "x-iod-xxh3") &&
			    m->hdr[i].value_len < sizeof(xxh3)) {
				memcpy(xxh3, buf + m->hdr[i].value_off, m->hdr[i].value_len);
				have_hash = true;
			}
		size_t blen = m->has_length ? (size_t)m->content_length : 0, got = 0;
		bool keep = m->keep_alive;
		free(body);
		if (!(body = malloc(blen + 1)))
			break;
		size_t have = len - m->head_len;
		if (have > blen)
			have = blen;
		memcpy(body, buf + m->head_len, have);
		got = have;
		size_t rest = len - m->head_len - have;
		memmove(buf, buf + m->head_len + have, rest);
		len = rest;
		while (got < blen) {
			long n = conn_recv(&pc, body + got, blen - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		if (got < blen)
			break;
		if (svc[0] && !iod_ckpt_peer_service_may(svc, target))
			answer(&pc, 403,
			       "a service identity keeps and reads only the copies of its own "
			       "replicas (/ckpt/<service>-<ordinal>/...)");
		else
			handle(a.p, &pc, method, target, have_hash ? xxh3 : NULL, body, blen);
		if (!keep)
			break;
	}
	free(body);
	free(buf);
	free(m);
	iod_sec_tls_close(pc.tls);
	pthread_mutex_lock(&a.p->mu);
	for (int i = 0; i < PEER_CONNS_MAX; i++)
		if (a.p->conn_fd[i] == a.fd)
			a.p->conn_fd[i] = -1;
	close(a.fd);
	a.p->conns--;
	pthread_cond_broadcast(&a.p->cv);
	pthread_mutex_unlock(&a.p->mu);
	return NULL;
}

static void *peer_accept(void *arg)
{
	struct iod_ckpt_peer *p = arg;
	while (!p->stop) {
		struct pollfd pf = {.fd = p->lfd, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		int c = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		int one = 1;
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct conn_arg *a = malloc(sizeof(*a));
		pthread_t t;
		int slot = -1;
		pthread_mutex_lock(&p->mu);
		for (int i = 0; i < PEER_CONNS_MAX && slot < 0; i++)
			if (p->conn_fd[i] < 0)
				slot = i;
		if (a && slot >= 0) {
			p->conn_fd[slot] = c;
			p->conns++;
		}
		pthread_mutex_unlock(&p->mu);
		if (!a || slot < 0) {
			free(a);
			close(c);
			continue;
		}
		*a = (struct conn_arg){p, c};
		if (pthread_create(&t, NULL, peer_conn, a)) {
			free(a);
			pthread_mutex_lock(&p->mu);
			p->conn_fd[slot] = -1;
			p->conns--;
			pthread_mutex_unlock(&p->mu);
			close(c);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

int iod_ckpt_peer_start(const char *listen_addr, const char *dir, struct iod_ckpt_peer **out,
                        struct iod_err *e)
{
	return iod_ckpt_peer_start_tls(listen_addr, dir, NULL, out, e);
}

int iod_ckpt_peer_start_tls(const char *listen_addr, const char *dir,
                            struct iod_sec_tls_creds *creds, struct iod_ckpt_peer **out,
                            struct iod_err *e)
{
	char host[64];
	const char *colon = strrchr(listen_addr, ':');
	struct sockaddr_in sa = {.sin_family = AF_INET};
	*out = NULL;
	if (!colon || (size_t)(colon - listen_addr) >= sizeof(host))
		return iod_err_set(
		    e, -EINVAL, "checkpoint peer: listen address %s is not host:port", listen_addr);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - listen_addr), listen_addr);
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return iod_err_set(e, -EINVAL, "checkpoint peer: %s is not an IPv4 address", host);
	if (!creds && (ntohl(sa.sin_addr.s_addr) >> 24) != 127)
		return iod_err_set(
		    e, -EPERM,
		    "checkpoint peer: %s is not a loopback IPv4 address; plain HTTP "
		    "is for loopback only, beyond it the peer needs mTLS credentials",
		    host);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return iod_err_set(e, -errno, "checkpoint peer: cannot create %s: %s", dir,
		                   strerror(errno));
	struct iod_ckpt_peer *p = calloc(1, sizeof(*p));
	if (!p)
		return iod_err_set(e, -ENOMEM, "out of memory");
	p->creds = creds;
	snprintf(p->dir, sizeof(p->dir), "%s", dir);
	snprintf(p->addr, sizeof(p->addr), "%s", listen_addr);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (int i = 0; i < PEER_CONNS_MAX; i++)
		p->conn_fd[i] = -1;
	int one = 1;
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0 || setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(p->lfd, 64)) {
		int rc = -errno;
		if (p->lfd >= 0)
			close(p->lfd);
		free(p);
		return iod_err_set(e, rc, "checkpoint peer: listen on %s: %s", listen_addr,
		                   strerror(-rc));
	}
	socklen_t sl = sizeof(sa);
	if (!getsockname(p->lfd, (struct sockaddr *)&sa, &sl))
		snprintf(p->addr, sizeof(p->addr), "%s:%u", host, ntohs(sa.sin_port));
	if (pthread_create(&p->th, NULL, peer_accept, p)) {
		close(p->lfd);
		free(p);
		return iod_err_set(e, -EAGAIN, "checkpoint peer: no thread");
	}
	*out = p;
	return 0;
}

const char *iod_ckpt_peer_addr(const struct iod_ckpt_peer *p)
{
	return p->addr;
}

void iod_ckpt_peer_stop(struct iod_ckpt_peer *p)
{
	if (!p)
		return;
	p->stop = 1;
	pthread_join(p->th, NULL);
	close(p->lfd);
	/* no new connections now: end the open ones, wait for their threads */
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < PEER_CONNS_MAX; i++)
		if (p->conn_fd[i] >= 0)
			shutdown(p->conn_fd[i], SHUT_RDWR);
	while (p->conns)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

/* ---- clients ---- */

/* The process' client credentials (iod_ckpt_peer_client_creds); NULL: plain. */
static struct iod_sec_tls_creds *_Atomic client_creds;

void iod_ckpt_peer_client_creds(struct iod_sec_tls_creds *c)
{
	client_creds = c;
}

/* A client connection: TLS with the process' credentials, the server an
 * agent (its node certificate). */
static void conn_init(struct iod_http_conn *c)
{
	iod_http_conn_init(c);
	c->creds = client_creds;
	c->tls_peer_kind = IOD_SEC_KIND_NODE;
}

/* "host:port[/ns]" into the host:port to connect to and the path prefix,
 * "/ckpt" or "/ckpt/<ns>". */
static int split_addr(const char *addr, char *hp, size_t hcap, char *pre, size_t pcap,
                      struct iod_err *e)
{
	const char *sl = strchr(addr, '/');
	size_t hl = sl ? (size_t)(sl - addr) : strlen(addr);
	if (hl == 0 || hl >= hcap || (sl && !ns_ok(sl + 1, strlen(sl + 1))))
		return iod_err_set(e, -EINVAL,
		                   "checkpoint peer \"%.100s\" is not host:port[/replica]", addr);
	memcpy(hp, addr, hl);
	hp[hl] = 0;
	snprintf(pre, pcap, "/ckpt%s", sl ? sl : "");
	return 0;
}

static int put_one(struct iod_http_conn *c, const char *addr, uint64_t step, const char *file,
                   const void *p, size_t n, const uint64_t *xxh3, struct iod_err *e)
{
	char path[224], hh[48], hp[IOD_ADDR_MAX], pre[IOD_NAME_MAX + 8];
	const char *hdrs[2] = {NULL, NULL};
	struct iod_http_response r = {0};
	int rc = split_addr(addr, hp, sizeof(hp), pre, sizeof(pre), e);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/%" PRIu64 "/%s", pre, step, file);
	if (xxh3) {
		snprintf(hh, sizeof(hh), "x-iod-xxh3: %016" PRIx64, *xxh3);
		hdrs[0] = hh;
	}
	rc = iod_http_request(c, hp, "PUT", path, hdrs, "application/octet-stream", p, n,
	                      IOD_CKPT_PEER_TIMEOUT_MS, &r, e);
	if (!rc && r.status / 100 != 2)
		rc = iod_err_set(e, -EIO, "peer %s: PUT %s: %d %.*s", addr, path, r.status,
		                 (int)(r.len > 150 ? 150 : r.len), r.body ? r.body : "");
	iod_http_response_free(&r);
	return rc;
}

int iod_ckpt_peer_put(const char *addr, const struct iod_ckpt_manifest *m, const uint8_t *snap,
                      struct iod_err *e)
{
	struct iod_http_conn c;
	char file[64], *text = NULL;
	size_t len = 0;
	int rc = 0;
	conn_init(&c);
	uint64_t off = 0;
	for (uint32_t r = 0, i = 0; r < m->regions_n && !rc; r++) {
		for (uint32_t k = 0; k < m->regions[r].chunks && !rc; k++, i++) {
			const struct iod_ckpt_mchunk *ch = &m->chunks[i];
			snprintf(file, sizeof(file), "r%u-%u-%u.chunk", m->rank, ch->region,
			         ch->index);
			rc = put_one(&c, addr, m->step, file,
			             snap + off + (uint64_t)k * m->chunk_bytes, ch->len, &ch->xxh3,
			             e);
		}
		off += m->regions[r].bytes;
	}
	if (!rc)
		rc = iod_ckpt_manifest_format(m, &text, &len, e);
	if (!rc) {
		snprintf(file, sizeof(file), "r%u.manifest", m->rank);
		rc = put_one(&c, addr, m->step, file, text, len, NULL, e);
	}
	free(text);
	iod_http_conn_close(&c);
	return rc;
}

int iod_ckpt_peer_copy_regions(const char *addr, uint32_t rank, uint64_t step,
                               const struct iod_ckpt_region *r, uint32_t n, struct iod_err *e)
{
	const char *names[IOD_CKPT_REGIONS_MAX];
	uint64_t bytes[IOD_CKPT_REGIONS_MAX], total = 0;
	struct iod_ckpt_manifest m;
	if (n == 0 || n > IOD_CKPT_REGIONS_MAX)
		return iod_err_set(e, -EINVAL, "copy to %s: %u regions (1..%d)", addr, n,
		                   IOD_CKPT_REGIONS_MAX);
	for (uint32_t i = 0; i < n; i++) {
		names[i] = r[i].name;
		bytes[i] = r[i].bytes;
		total += r[i].bytes;
	}
	memset(&m, 0, sizeof(m));
	int rc = iod_ckpt_manifest_plan(&m, step, rank, IOD_CKPT_CHUNK_BYTES_DEFAULT, names, bytes,
	                                n, e);
	if (rc)
		return rc;
	/* one region is its own snapshot; more are laid end to end */
	uint8_t *snap = n == 1 ? (uint8_t *)r[0].addr : malloc(total ? total : 1);
	if (!snap) {
		iod_ckpt_manifest_free(&m);
		return iod_err_set(e, -ENOMEM, "out of memory for %" PRIu64 " bytes", total);
	}
	uint64_t off = 0;
	for (uint32_t i = 0; n > 1 && i < n; i++) {
		memcpy(snap + off, r[i].addr, r[i].bytes);
		off += r[i].bytes;
	}
	off = 0;
	for (uint32_t g = 0, i = 0; g < m.regions_n; g++) {
		for (uint32_t k = 0; k < m.regions[g].chunks; k++, i++)
			m.chunks[i].xxh3 =
			    XXH3_64bits(snap + off + (uint64_t)k * m.chunk_bytes, m.chunks[i].len);
		off += m.regions[g].bytes;
	}
	rc = iod_ckpt_peer_put(addr, &m, snap, e);
	if (n > 1)
		free(snap);
	iod_ckpt_manifest_free(&m);
	return rc;
}

static int get_one(struct iod_http_conn *c, const char *addr, uint64_t step, const char *file,
                   struct iod_http_response *r, struct iod_err *e)
{
	char path[224], hp[IOD_ADDR_MAX], pre[IOD_NAME_MAX + 8];
	int rc = split_addr(addr, hp, sizeof(hp), pre, sizeof(pre), e);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/%" PRIu64 "/%s", pre, step, file);
	rc = iod_http_request(c, hp, "GET", path, NULL, NULL, NULL, 0, IOD_CKPT_PEER_TIMEOUT_MS, r,
	                      e);
	if (!rc && r->status != 200) {
		rc = iod_err_set(e, r->status == 404 ? -ENOENT : -EIO, "peer %s: GET %s: %d", addr,
		                 path, r->status);
		iod_http_response_free(r);
	}
	return rc;
}

/* Connections a restore from a peer uses at once. */
#define FETCH_CONNS 4

struct fetch_job {
	const char *addr;
	const struct iod_ckpt_manifest *m;
	uint8_t *const *dst;
	uint32_t t;
	int rc;
	struct iod_err err;
};

static void *fetch_part(void *arg)
{
	struct fetch_job *j = arg;
	struct iod_http_conn c;
	struct iod_http_response r = {0};
	char file[64];
	conn_init(&c);
	c.body_max = PEER_BODY_MAX;
	for (uint32_t i = j->t; !j->rc && i < j->m->chunks_n; i += FETCH_CONNS) {
		const struct iod_ckpt_mchunk *k = &j->m->chunks[i];
		snprintf(file, sizeof(file), "r%u-%u-%u.chunk", j->m->rank, k->region, k->index);
		if ((j->rc = get_one(&c, j->addr, j->m->step, file, &r, &j->err)))
			break;
		if (r.len != k->len || XXH3_64bits(r.body, r.len) != k->xxh3)
			j->rc = iod_err_set(&j->err, -EBADMSG,
			                    "peer %s: chunk %s of step %" PRIu64 " is damaged",
			                    j->addr, file, j->m->step);
		else
			memcpy(j->dst[k->region] + (uint64_t)k->index * j->m->chunk_bytes, r.body,
			       r.len);
		iod_http_response_free(&r);
	}
	iod_http_conn_close(&c);
	return NULL;
}

int iod_ckpt_fetch(const char *addr, uint32_t rank, uint64_t step, const struct iod_ckpt_region *rg,
                   uint32_t n, struct iod_err *e)
{
	struct iod_http_conn c;
	struct iod_http_response r = {0};
	struct iod_ckpt_manifest m;
	char file[64];
	int rc;
	conn_init(&c);
	c.body_max = PEER_BODY_MAX;
	snprintf(file, sizeof(file), "r%u.manifest", rank);
	if ((rc = get_one(&c, addr, step, file, &r, e))) {
		iod_http_conn_close(&c);
		return rc;
	}
	rc = iod_ckpt_manifest_parse(r.body ? r.body : "", r.len, &m, e);
	iod_http_response_free(&r);
	if (rc) {
		iod_http_conn_close(&c);
		return rc;
	}
	uint8_t *dst[IOD_CKPT_REGIONS_MAX];
	if (m.step != step || m.rank != rank || n != m.regions_n)
		rc = iod_err_set(e, -EINVAL,
		                 "peer %s: checkpoint step %" PRIu64 " has %u regions, %u given",
		                 addr, step, m.regions_n, n);
	for (uint32_t i = 0; !rc && i < m.regions_n; i++) {
		uint32_t j = 0;
		while (j < n && strcmp(rg[j].name ? rg[j].name : "", m.regions[i].name))
			j++;
		if (j == n || rg[j].bytes != m.regions[i].bytes)
			rc = iod_err_set(e, -EINVAL,
			                 "peer %s: region %s of %" PRIu64 " bytes has no "
			                 "region of that name and size to restore into",
			                 addr, m.regions[i].name, m.regions[i].bytes);
		else
			dst[i] = rg[j].addr;
	}
	/* chunks in parallel over FETCH_CONNS connections, chunk i on i % FETCH_CONNS */
	struct fetch_job j[FETCH_CONNS];
	pthread_t th[FETCH_CONNS];
	bool started[FETCH_CONNS] = {false};
	for (uint32_t t = 0; !rc && t < FETCH_CONNS; t++) {
		j[t] = (struct fetch_job){.addr = addr, .m = &m, .dst = dst, .t = t};
		started[t] = pthread_create(&th[t], NULL, fetch_part, &j[t]) == 0;
		if (!started[t])
			fetch_part(&j[t]);
	}
	for (uint32_t t = 0; t < FETCH_CONNS; t++) {
		if (started[t])
			pthread_join(th[t], NULL);
		if (!rc && j[t].rc) {
			rc = j[t].rc;
			*e = j[t].err;
		}
	}
	iod_ckpt_manifest_free(&m);
	iod_http_conn_close(&c);
	return rc;
}

int iod_ckpt_peer_region_bytes(const char *addr, uint32_t rank, uint64_t step, const char *name,
                               uint64_t *bytes, struct iod_err *e)
{
	struct iod_http_conn c;
	struct iod_http_response r = {0};
	struct iod_ckpt_manifest m;
	char file[64];
	int rc;
	conn_init(&c);
	c.body_max = PEER_BODY_MAX;
	snprintf(file, sizeof(file), "r%u.manifest", rank);
	rc = get_one(&c, addr, step, file, &r, e);
	if (!rc) {
		rc = iod_ckpt_manifest_parse(r.body ? r.body : "", r.len, &m, e);
		iod_http_response_free(&r);
		if (!rc) {
			rc = ckpt_manifest_region_bytes(&m, name, bytes, e);
			iod_ckpt_manifest_free(&m);
		}
	}
	iod_http_conn_close(&c);
	return rc;
}

int iod_ckpt_peer_get_chunk(const char *addr, uint32_t rank, uint64_t step,
                            const struct iod_ckpt_mchunk *k, uint8_t *buf, struct iod_err *e)
{
	struct iod_http_conn c;
	struct iod_http_response r = {0};
	char file[64];
	int rc;
	conn_init(&c);
	c.body_max = PEER_BODY_MAX;
	snprintf(file, sizeof(file), "r%u-%u-%u.chunk", rank, k->region, k->index);
	if (!(rc = get_one(&c, addr, step, file, &r, e))) {
		if (r.len != k->len || XXH3_64bits(r.body, r.len) != k->xxh3)
			rc = iod_err_set(e, -EBADMSG,
			                 "peer %s: chunk %s of step %" PRIu64
			                 " does not match the manifest",
			                 addr, file, step);
		else
			memcpy(buf, r.body, r.len);
		iod_http_response_free(&r);
	}
	iod_http_conn_close(&c);
	return rc;
}

int iod_ckpt_peer_latest(const char *addr, uint32_t rank, uint64_t *step, struct iod_err *e)
{
	struct iod_http_conn c;
	struct iod_http_response r = {0};
	char path[224], hp[IOD_ADDR_MAX], pre[IOD_NAME_MAX + 8], num[24];
	int rc = split_addr(addr, hp, sizeof(hp), pre, sizeof(pre), e);
	*step = 0;
	if (rc)
		return rc;
	conn_init(&c);
	snprintf(path, sizeof(path), "%s/latest?rank=%u", pre, rank);
	rc = iod_http_request(&c, hp, "GET", path, NULL, NULL, NULL, 0,
	                      IOD_CKPT_PEER_LATEST_TIMEOUT_MS, &r, e);
	if (!rc && r.status != 200)
		rc = iod_err_set(e, r.status == 404 ? -ENOENT : -EIO, "peer %s: GET %s: %d", addr,
		                 path, r.status);
	if (!rc) {
		snprintf(num, sizeof(num), "%.*s", (int)(r.len < 23 ? r.len : 23),
		         r.body ? r.body : "");
		char *end = NULL;
		*step = strtoull(num, &end, 10);
		if (!num[0] || !end || *end)
			rc = iod_err_set(e, -EIO, "peer %s: latest step \"%s\" is not a number",
			                 addr, num);
	}
	iod_http_response_free(&r);
	iod_http_conn_close(&c);
	return rc;
}
