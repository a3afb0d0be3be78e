/*
 * proxy_admin.c: the proxy's admin endpoint and DNS responder, each on its
 * own thread, off the forwarding path.
 *
 * Admin (HTTP/1.1, one request per connection, loopback by default):
 *   GET /metrics                  Prometheus text (per service and endpoint)
 *   GET /spans?service=S&after=C  recent spans as OTLP span objects, and a
 *                                 cursor C to ask for newer ones (`iod trace`)
 *   GET /v1/traces?service=S      an OTLP/JSON export document
 *   GET /registry                 services, VIPs, endpoints, ejections
 *   GET /healthz                  "ok"
 * DNS (UDP): "<service>.iod" A queries answered with the service's VIP.
 *
 * Reads worker state only through relaxed atomic loads and span seqlocks;
 * never blocks a worker.
 */
#include "internal.h"

#include "iod/obs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Spans one /spans answer carries at most (per worker ring read). */
#define SPANS_PER_REPLY 512

static int bind_addr(const char *addr, int type, const char *dev, struct iod_err *e)
{
	uint32_t ip;
	uint16_t port;
	int one = 1;

	if (iod_mesh_addr_parse(addr, &ip, &port, true))
		return iod_err_set(e, -EINVAL, "%s: expected IPv4:port", addr);
	/* plain HTTP and DNS, no authentication: no listener beyond loopback
	 * without authentication and TLS (docs/security.md), except one bound
	 * to the device of the node's switch path (dev: the host stack's port
	 * of the virtual switch), which only the node's own replicas reach */
	if ((ip >> 24) != 127 && !dev)
		return iod_err_set(e, -EPERM,
		                   "%s is not a loopback address: it is served without TLS or "
		                   "authentication, so 127.x.y.z only",
		                   addr);
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(ip)};
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return iod_err_set(e, -errno, "%s: %s", addr, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (dev && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, (socklen_t)strlen(dev))) {
		int rc = -errno;
		close(fd);
		return iod_err_set(e, rc, "%s: bind to device %s: %s", addr, dev, strerror(-rc));
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    (type == SOCK_STREAM && listen(fd, 64))) {
		int rc = -errno;
		close(fd);
		return iod_err_set(e, rc, "cannot listen on %s: %s", addr, strerror(-rc));
	}
	return fd;
}

/* Query parameter value (URL-decoding not needed: names are [A-Za-z0-9_-]). */
static bool query_get(const char *target, const char *key, char *out, size_t len)
{
	const char *q = strchr(target, '?');
	size_t kl = strlen(key);
	while (q) {
		q++;
		if (!strncmp(q, key, kl) && q[kl] == '=') {
			const char *v = q + kl + 1;
			size_t n = strcspn(v, "&");
			if (n >= len)
				n = len - 1;
			memcpy(out, v, n);
			out[n] = 0;
			return true;
		}
		q = strchr(q, '&');
	}
	return false;
}

static int cmp_span_start(const void *a, const void *b)
{
	const struct iod_mesh_span *x = a, *y = b;
	if (x->start_unix_ns != y->start_unix_ns)
		return x->start_unix_ns < y->start_unix_ns ? -1 : 1;
	return 0;
}

/* Collect spans of a service newer than the cursor "c0,c1,..." (one per worker). */
static uint32_t collect(struct iod_mesh_proxy *p, const char *service, const char *cursor,
                        struct iod_mesh_span *out, uint32_t max, char *next, size_t next_len,
                        uint64_t *read, uint64_t *lost)
{
	static struct iod_mesh_span tmp[SPANS_PER_REPLY];
	uint32_t n = 0;
	size_t o = 0;
	const char *cp = cursor;

	next[0] = 0;
	for (uint32_t k = 0; k < p->workers_n; k++) {
		uint64_t after = 0;
		if (cp && *cp) {
			after = strtoull(cp, NULL, 10);
			cp = strchr(cp, ',');
			if (cp)
				cp++;
		}
		uint32_t got =
		    iod_mesh_span_ring_read(p->workers[k].spans, after, tmp, SPANS_PER_REPLY);
		/* what the ring overwrote since the cursor: `iod trace` says "N of M" */
		*lost += iod_mesh_span_ring_lost(p->workers[k].spans, after);
		*read += got;
		uint64_t last = after;
		for (uint32_t i = 0; i < got; i++) {
			last = tmp[i].seq;
			if (service && *service && strcmp(tmp[i].service, service))
				continue;
			if (n < max)
				out[n++] = tmp[i];
		}
		o += (size_t)snprintf(next + o, next_len - o, "%s%llu", k ? "," : "",
		                      (unsigned long long)last);
		if (o >= next_len)
			break;
	}
	qsort(out, n, sizeof(*out), cmp_span_start);
	return n;
}

static json_t *registry_json(struct iod_mesh_proxy *p)
{
	json_t *svcs = json_array();
	char addr[32];
	pthread_mutex_lock(&p->mu);
	for (uint32_t i = 0; i < p->view.svcs_n; i++) {
		const struct iod_mesh_service *s = &p->view.svcs[i];
		json_t *eps = json_array();
		for (uint32_t j = 0; j < s->eps_n; j++) {
			uint32_t ejected = 0;
			for (uint32_t k = 0; k < p->workers_n; k++) {
				const struct wsvc *ws = &p->workers[k].svcs[p->view_slot[i]];
				ejected += j < ws->outlier.n &&
				           __atomic_load_n(&ws->outlier.hosts[j].ejected_until_ns,
				                           __ATOMIC_RELAXED) != 0;
			}
			iod_mesh_addr_format(s->eps[j].ip4, s->eps[j].port, addr, sizeof(addr));
			json_t *ep =
			    json_pack("{s:s, s:s, s:s, s:s, s:i, s:b, s:i}", "id", s->eps[j].id,
			              "addr", addr, "node", s->eps[j].node, "rack", s->eps[j].rack,
			              "weight", (json_int_t)s->eps[j].weight, "healthy",
			              s->eps[j].healthy, "ejected_by_workers", (json_int_t)ejected);
			if (ep && s->eps[j].mtls_ip4) { /* reached through its node's proxy */
				iod_mesh_addr_format(s->eps[j].mtls_ip4, s->eps[j].mtls_port, addr,
				                     sizeof(addr));
				json_object_set_new(ep, "mtls", json_string(addr));
			}
			json_array_append_new(eps, ep);
		}
		char vip[32], env[IOD_NAME_MAX + 16];
		iod_mesh_addr_format(s->vip4, s->port, vip, sizeof(vip));
		iod_mesh_env_name(s->name, env, sizeof(env));
		enum iod_mesh_tp_want tp = iod_mesh_tp_effective(
		    s->transport,
		    (enum iod_mesh_tp_want)__atomic_load_n(&p->tp_cluster, __ATOMIC_ACQUIRE));
		char upath[sizeof(((struct sockaddr_un *)0)->sun_path)] = "";
		if (p->opts.unix_dir && tp != IOD_MESH_TP_TCP && !s->no_listen &&
		    !p->opts.no_vips &&
		    iod_mesh_unix_path(p->opts.unix_dir, s->name, false, upath, sizeof(upath)))
			upath[0] = 0;
		json_t *so = json_pack(
		    "{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:s}", "name", s->name, "address", vip,
		    "env", env, "mode", s->mode == IOD_MESH_MODE_TCP ? "tcp" : "http", "lb",
		    iod_mesh_lb_name(s->lb), "endpoints", eps, "transport",
		    iod_mesh_tp_want_name(tp), "transport_from", s->transport ? "spec" : "config");
		if (upath[0]) /* callers on this node may connect here instead */
			json_object_set_new(so, "unix", json_string(upath));
		json_array_append_new(svcs, so);
	}
	json_t *r = json_pack("{s:s, s:s, s:i, s:o}", "node", p->view.node, "rack", p->view.rack,
	                      "workers", (json_int_t)p->workers_n, "services", svcs);
	pthread_mutex_unlock(&p->mu);
	return r;
}

static void reply(int fd, int code, const char *ctype, const char *body, size_t len)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %zu\r\n"
	                 "connection: close\r\n\r\n",
	                 code,
	                 code == 200   ? "OK"
	                 : code == 404 ? "Not Found"
	                               : "Bad Request",
	                 ctype, len);
	if (send(fd, head, (size_t)n, MSG_NOSIGNAL) < 0)
		return;
	size_t off = 0;
	while (off < len) {
		ssize_t w = send(fd, body + off, len - off, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		off += (size_t)w;
	}
}

static void reply_json(int fd, json_t *j)
{
	char *s = iod_json_string(j, true);
	json_decref(j);
	if (s)
		reply(fd, 200, "application/json", s, strlen(s));
	free(s);
}

static void serve(struct iod_mesh_proxy *p, int fd)
{
	static char buf[8192];
	static struct iod_http_msg m;
	static struct iod_mesh_span spans[SPANS_PER_REPLY];
	size_t len = 0;
	struct pollfd pf = {.fd = fd, .events = POLLIN};

	for (;;) {
		if (poll(&pf, 1, 2000) <= 0)
			return;
		ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (n <= 0)
			return;
		len += (size_t)n;
		int rc = iod_http_parse(buf, len, false, &m);
		if (rc == 0)
			break;
		if (rc != -EAGAIN || len >= sizeof(buf) - 1) {
			reply(fd, 400, "text/plain", "bad request\n", 12);
			return;
		}
	}
	char target[512];
	size_t tl = IOD_MIN((size_t)m.target_len, sizeof(target) - 1);
	memcpy(target, buf + m.target_off, tl);
	target[tl] = 0;
	size_t pl = strcspn(target, "?");
	char svc[IOD_NAME_MAX] = "", cursor[IOD_MESH_WORKERS_MAX * 21] = "";
	query_get(target, "service", svc, sizeof(svc));
	query_get(target, "after", cursor, sizeof(cursor));

	if (pl == 8 && !strncmp(target, "/metrics", pl)) {
		struct iod_buf b;
		iod_buf_init(&b);
		iod_mesh_proxy_metrics(p, &b);
		reply(fd, 200, IOD_PROM_CONTENT_TYPE, b.data ? b.data : "", b.len);
		iod_buf_free(&b);
	} else if (pl == 6 && !strncmp(target, "/spans", pl)) {
		char next[IOD_MESH_WORKERS_MAX * 21];
		uint64_t read = 0, lost = 0;
		uint32_t n = collect(p, svc, cursor, spans, SPANS_PER_REPLY, next, sizeof(next),
		                     &read, &lost);
		json_t *arr = json_array();
		for (uint32_t i = 0; i < n; i++)
			json_array_append_new(arr, iod_mesh_span_otlp(&spans[i]));
		/* read: ring entries past the cursor in this answer (every service);
		 * overwritten: entries past the cursor already gone */
		reply_json(fd, json_pack("{s:s, s:o, s:I, s:I, s:I}", "cursor", next, "spans", arr,
		                         "read", (json_int_t)read, "overwritten", (json_int_t)lost,
		                         "ring", (json_int_t)IOD_MESH_SPANS_MAX * p->workers_n));
	} else if (pl == 10 && !strncmp(target, "/v1/traces", pl)) {
		char next[IOD_MESH_WORKERS_MAX * 21];
		uint64_t read = 0, lost = 0;
		uint32_t n = collect(p, svc, cursor, spans, SPANS_PER_REPLY, next, sizeof(next),
		                     &read, &lost);
		reply_json(fd, iod_mesh_spans_otlp(spans, n, p->view.node));
	} else if (pl == 9 && !strncmp(target, "/registry", pl)) {
		reply_json(fd, registry_json(p));
	} else if (pl == 8 && !strncmp(target, "/healthz", pl)) {
		reply(fd, 200, "text/plain", "ok\n", 3);
	} else {
		const char *msg =
		    "not found: try /metrics, /spans, /v1/traces, /registry, /healthz\n";
		reply(fd, 404, "text/plain", msg, strlen(msg));
	}
}

static void *admin_main(void *arg)
{
	struct iod_mesh_proxy *p = arg;
	struct pollfd pf = {.fd = p->admin_fd, .events = POLLIN};

	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		if (poll(&pf, 1, 100) <= 0)
			continue;
		int fd = iod_fd_accept(p->admin_fd, NULL, NULL, SOCK_CLOEXEC, &p->admin_reserve);
		if (fd == -EMFILE || fd == -ENFILE) {
			poll(NULL, 0, 10); /* no reserve left: back off instead of spinning */
			continue;
		}
		if (fd < 0)
			continue;
		serve(p, fd);
		close(fd);
	}
	return NULL;
}

static uint32_t dns_lookup(void *ctx, const char *name)
{
	struct iod_mesh_proxy *p = ctx;
	uint32_t ip = 0;
	pthread_mutex_lock(&p->mu);
	/* DNS names are case-insensitive; service names compare as given. */
	for (uint32_t i = 0; i < p->view.svcs_n && !ip; i++)
		if (!strcasecmp(p->view.svcs[i].name, name))
			ip = p->view.svcs[i].vip4;
	pthread_mutex_unlock(&p->mu);
	return ip;
}

static void *dns_main(void *arg)
{
	struct iod_mesh_proxy *p = arg;
	struct pollfd pf = {.fd = p->dns_fd, .events = POLLIN};
	uint8_t q[IOD_MESH_DNS_MSG_MAX], a[IOD_MESH_DNS_MSG_MAX];

	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		if (poll(&pf, 1, 100) <= 0)
			continue;
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(p->dns_fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		if (n <= 0)
			continue;
		int len = iod_mesh_dns_answer(q, (size_t)n, a, sizeof(a), dns_lookup, p);
		if (len > 0)
			sendto(p->dns_fd, a, (size_t)len, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

int iod_mesh_admin_start(struct iod_mesh_proxy *p, struct iod_err *e)
{
	int rc;
	if (p->opts.admin_addr) {
		if ((rc = bind_addr(p->opts.admin_addr, SOCK_STREAM, NULL, e)) < 0)
			return iod_err_wrap(e, "admin endpoint");
		p->admin_fd = rc;
		p->admin_reserve = iod_fd_reserve_open();
		if ((rc = pthread_create(&p->admin_thread, NULL, admin_main, p))) {
			close(p->admin_fd);
			p->admin_fd = -1;
			return iod_err_set(e, -rc, "admin thread: %s", strerror(rc));
		}
	}
	if (p->opts.dns_addr) {
		if ((rc = bind_addr(p->opts.dns_addr, SOCK_DGRAM, p->opts.listen_dev, e)) < 0) {
			iod_err_wrap(e, "DNS responder");
			iod_mesh_admin_stop(p);
			return rc;
		}
		p->dns_fd = rc;
		if ((rc = pthread_create(&p->dns_thread, NULL, dns_main, p))) {
			close(p->dns_fd);
			p->dns_fd = -1;
			iod_mesh_admin_stop(p);
			return iod_err_set(e, -rc, "DNS thread: %s", strerror(rc));
		}
	}
	return 0;
}

void iod_mesh_admin_stop(struct iod_mesh_proxy *p)
{
	bool was = __atomic_exchange_n(&p->stop, true, __ATOMIC_ACQ_REL);
	IOD_UNUSED(was);
	if (p->admin_fd >= 0) {
		pthread_join(p->admin_thread, NULL);
		close(p->admin_fd);
		p->admin_fd = -1;
	}
	if (p->admin_reserve >= 0) {
		close(p->admin_reserve);
		p->admin_reserve = -1;
	}
	if (p->dns_fd >= 0) {
		pthread_join(p->dns_thread, NULL);
		close(p->dns_fd);
		p->dns_fd = -1;
	}
}
