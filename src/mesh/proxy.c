/*
 * proxy.c: the per-node mesh proxy's skeleton: worker threads (one epoll
 * set each, SO_REUSEPORT listeners on every service's loopback VIP), the
 * connection pool allocated at start-up, view updates from an
 * iod_mesh_source, timers (timeouts, retry backoff, outlier un-ejection)
 * and Prometheus metrics. L4 and HTTP forwarding live in proxy_l4.c and
 * proxy_http.c; the admin endpoint and DNS responder in proxy_admin.c.
 *
 * This is a shell: it does I/O and reads the clock, and hands every
 * decision (which endpoint, eject or not, retry or not) to the pure cores.
 * It never allocates per request: connections and buffers come from
 * per-worker pools sized by IOD_MESH_CONNS_MAX.
 */
#include "internal.h"

#include "iod/obs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Timer scan period: timeouts and backoff have this resolution. */
#define TICK_NS (5 * IOD_NS_PER_MS)
/* Events handled per epoll_wait: a burst, as in OVS/DPDK. */
#define EVENTS_BURST 64
/* Accepts per listener event, so one busy service cannot starve others. */
#define ACCEPT_BURST 64

const double iod_mesh_latency_le[IOD_MESH_LATENCY_BUCKETS] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};

void iod_mesh_latency_observe(struct svc_stats *st, uint64_t ns)
{
	double s = (double)ns / 1e9;
	uint32_t i = 0;
	while (i < IOD_MESH_LATENCY_BUCKETS && s > iod_mesh_latency_le[i])
		i++;
	STAT_INC(st->lat[i]);
	STAT_ADD(st->lat_sum_ns, ns);
}

/* ---- connections ------------------------------------------------------- */

struct conn *iod_mesh_conn_get(struct worker *w, enum conn_kind kind, int fd)
{
	if (!w->free_n)
		return NULL;
	uint32_t i = w->free_conns[--w->free_n];
	struct conn *c = &w->conns[i];
	struct l4dir keep[2] = {c->d[0], c->d[1]}; /* pipes survive reuse */

	IOD_ASSERT_HOT(!c->in_use);
	memset(c, 0, sizeof(*c));
	c->tag = TAG_CONN;
	c->kind = (uint8_t)kind;
	c->in_use = true;
	c->fd = fd;
	c->index = i;
	c->ep = UINT32_MAX;
	c->buf = w->bufs + (size_t)i * IOD_MESH_HTTP_BUF;
	for (int k = 0; k < 2; k++) {
		c->d[k].pipe_r = keep[k].pipe_r;
		c->d[k].pipe_w = keep[k].pipe_w;
	}
	c->last_io_ns = w->now_ns;
	c->next_used = w->used;
	if (w->used)
		w->used->prev_used = c;
	w->used = c;
	return c;
}

void iod_mesh_conn_client(struct worker *w, struct conn *c, const struct accepted *a)
{
	IOD_ASSERT_HOT(!c->cl_counted);
	c->cl_ip4 = a->ip4;
	c->cl_uid = a->key_uid;
	c->cl_counted = true;
	c->tp = a->tp;
	c->span.tp_down = a->tp;
	c->peer_known = a->peer_known;
	c->peer_uid = a->peer_uid;
	iod_strlcpy(c->client_addr, a->client, sizeof(c->client_addr));
}

void iod_mesh_conn_put(struct worker *w, struct conn *c)
{
	IOD_ASSERT_HOT(c->in_use);
	if (c->tls) /* mTLS relays and HTTP upstreams behind another node's proxy */
		iod_sec_tls_close(c->tls);
	c->tls = NULL;
	if (c->again) { /* off the again list before the slot is reused */
		struct conn **pp = &w->again;
		while (*pp && *pp != c)
			pp = &(*pp)->next_again;
		if (*pp)
			*pp = c->next_again;
		c->again = false;
	}
	if (c->cl_counted)
		iod_mesh_clients_release(w->clients, c->cl_ip4, c->cl_uid);
	c->cl_counted = false;
	if (c->fd >= 0)
		close(c->fd); /* also leaves the epoll set */
	c->fd = -1;
	c->in_use = false;
	if (c->prev_used)
		c->prev_used->next_used = c->next_used;
	else
		w->used = c->next_used;
	if (c->next_used)
		c->next_used->prev_used = c->prev_used;
	w->free_conns[w->free_n++] = c->index;
	IOD_ASSERT_HOT(w->free_n <= IOD_MESH_CONNS_MAX);
}

int iod_mesh_conn_watch(struct worker *w, struct conn *c, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = c};
	int op = EPOLL_CTL_MOD;

	/* The high bit of c->events means "registered": skip the syscall when
	 * the interest set does not change (the common case per request). */
	if ((c->events & 0x80000000u) && (c->events & ~0x80000000u) == events)
		return 0;
	if (!(c->events & 0x80000000u))
		op = EPOLL_CTL_ADD;
	if (epoll_ctl(w->epfd, op, c->fd, &ev))
		return -errno;
	c->events = events | 0x80000000u;
	return 0;
}

int iod_mesh_connect(uint32_t ip4, uint16_t port)
{
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(ip4)};
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

void iod_mesh_ep_done(struct worker *w, struct wsvc *s, struct conn *c, enum iod_mesh_result r)
{
	if (c->ep == UINT32_MAX || c->svc_gen != s->gen || !s->active)
		return; /* the endpoint list changed meanwhile: its state was remapped */
	struct ep_stats *es = &s->eps[c->ep];
	STAT_INC(es->requests);
	if (r != IOD_MESH_OK)
		STAT_INC(es->errors);
	if (iod_mesh_outlier_report(&s->outlier, &s->svc.outlier, c->ep, r, w->now_ns)) {
		STAT_INC(es->ejections);
		IOD_WARN(
		    "mesh", "service %s: ejected endpoint %s for %llu ms (%s)", s->svc.name,
		    s->svc.eps[c->ep].id,
		    (unsigned long long)((s->outlier.hosts[c->ep].ejected_until_ns - w->now_ns) /
		                         IOD_NS_PER_MS),
		    r == IOD_MESH_CONNECT_FAIL ? "connect failures" : "5xx/resets");
	}
}

/* ---- listeners and the view -------------------------------------------- */

static int listener_open(struct worker *w, struct wsvc *s, uint32_t slot, struct iod_err *e)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(s->svc.port),
	                         .sin_addr.s_addr = htonl(s->svc.vip4)};
	int one = 1;
	char addr[32];
	struct listener *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	iod_mesh_addr_format(s->svc.vip4, s->svc.port, addr, sizeof(addr));
	l->tag = TAG_LISTENER;
	l->slot = slot;
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		goto fail;
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	/* on the overlay: only what the node's switch delivers to its host
	 * stack (the local replicas of the VIP's tenant), never the underlay */
	const char *dev = w->p->opts.listen_dev;
	if (dev && setsockopt(l->fd, SOL_SOCKET, SO_BINDTODEVICE, dev, (socklen_t)strlen(dev)))
		goto fail;
	if (bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(l->fd, 4096))
		goto fail;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, l->fd, &ev))
		goto fail;
	s->lst = l;
	return 0;
fail:;
	int rc = -errno;
	iod_err_set(e, rc, "service %s: cannot listen on %s: %s (is another proxy running?)",
	            s->svc.name, addr, strerror(errno));
	if (l->fd >= 0)
		close(l->fd);
	free(l);
	return rc;
}

/* The worker's mTLS listener (SO_REUSEPORT: one per worker, as VIPs). */
static int mtls_listen(struct iod_mesh_proxy *p, struct worker *w, struct iod_err *e)
{
	uint32_t ip4;
	uint16_t port;
	int one = 1;
	if (iod_mesh_addr_parse(p->opts.mtls_listen, &ip4, &port, true))
		return iod_err_set(e, -EINVAL, "--mtls-listen %s: want IPv4:port",
		                   p->opts.mtls_listen);
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(ip4)};
	w->mtls_lst.tag = TAG_MTLS_LISTENER;
	w->mtls_lst.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (w->mtls_lst.fd < 0)
		return iod_err_set(e, -errno, "mTLS listener: %s", strerror(errno));
	setsockopt(w->mtls_lst.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(w->mtls_lst.fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &w->mtls_lst};
	if (bind(w->mtls_lst.fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(w->mtls_lst.fd, 4096) || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->mtls_lst.fd, &ev))
		return iod_err_set(e, -errno, "mTLS listener on %s: %s", p->opts.mtls_listen,
		                   strerror(errno));
	return 0;
}

static void listener_close(struct wsvc *s)
{
	if (!s->lst)
		return;
	close(s->lst->fd);
	free(s->lst);
	s->lst = NULL;
}

void iod_mesh_unix_dirs(const char *dir)
{
	char ep[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
	mkdir(dir, 0755); /* EEXIST is fine; a bind or connect says the rest */
	snprintf(ep, sizeof(ep), "%s/ep", dir);
	/* replicas under uids of their own create their sockets here: sticky,
	 * like /tmp, so none can remove another's (docs/mesh.md: a replica
	 * could still take a name no replica holds yet) */
	if (!mkdir(ep, 01777))
		chmod(ep, 01777); /* past the umask */
}

int iod_mesh_unix_path(const char *dir, const char *name, bool ep, char *buf, size_t len)
{
	size_t cap = IOD_MIN(len, sizeof(((struct sockaddr_un *)0)->sun_path));
	int n = snprintf(buf, cap, "%s/%s%s.sock", dir, ep ? "ep/" : "", name);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* The AF_UNIX listener of a service whose transport is not tcp (worker 0
 * only: SO_REUSEPORT does not spread AF_UNIX accepts over workers). */
static void unix_listener_close(struct iod_mesh_proxy *p, struct wsvc *s)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	if (!s->ulst)
		return;
	close(s->ulst->fd);
	free(s->ulst);
	s->ulst = NULL;
	if (!iod_mesh_unix_path(p->opts.unix_dir, s->svc.name, false, path, sizeof(path)))
		unlink(path); /* callers that try it now fall back to the VIP */
}

static int unix_listener_open(struct worker *w, struct wsvc *s, uint32_t slot)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (iod_mesh_unix_path(w->p->opts.unix_dir, s->svc.name, false, sa.sun_path,
	                       sizeof(sa.sun_path)))
		return -ENAMETOOLONG;
	struct listener *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->tag = TAG_LISTENER;
	l->slot = slot;
	l->unix_ = true;
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int rc = l->fd < 0 ? -errno : 0;
	mkdir(w->p->opts.unix_dir, 0755); /* EEXIST is fine; bind says the rest */
	unlink(sa.sun_path);              /* a socket left by a proxy that died */
	/* callers are replicas under their own uids: the socket is open to
	 * all, as the VIP is; policies still name callers (SO_PEERCRED) */
	if (!rc && (bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(sa.sun_path, 0777) ||
	            listen(l->fd, 4096)))
		rc = -errno;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
	if (!rc && epoll_ctl(w->epfd, EPOLL_CTL_ADD, l->fd, &ev))
		rc = -errno;
	if (rc) {
		IOD_WARN("mesh", "service %s: cannot listen on %s: %s (its callers use the VIP)",
		         s->svc.name, sa.sun_path, strerror(-rc));
		if (l->fd >= 0)
			close(l->fd);
		free(l);
		return rc;
	}
	s->ulst = l;
	return 0;
}

static void pool_drain(struct worker *w, struct wsvc *s)
{
	for (uint32_t i = 0; i < IOD_MESH_ENDPOINTS_MAX; i++) {
		while (s->idle[i]) {
			struct conn *u = s->idle[i];
			s->idle[i] = u->next_idle;
			if (u->holds_cx && u->life == s->life)
				iod_mesh_breaker_release(&s->breaker, IOD_MESH_BRK_CONNECTIONS);
			iod_mesh_conn_put(w, u);
		}
		s->idle_n[i] = 0;
	}
}

static uint32_t share(uint32_t limit, uint32_t n)
{
	return limit ? (limit + n - 1) / n : 0;
}

/* Carry per-endpoint state across a change of the endpoint list, by id. */
static void remap_endpoints(struct wsvc *s, const struct iod_mesh_service *nv)
{
	static __thread struct iod_mesh_outlier o;
	static __thread struct ep_stats st[IOD_MESH_ENDPOINTS_MAX];

	iod_mesh_outlier_init(&o, nv->eps_n);
	memset(st, 0, sizeof(st));
	for (uint32_t i = 0; i < nv->eps_n; i++) {
		for (uint32_t j = 0; j < s->svc.eps_n; j++) {
			if (strcmp(nv->eps[i].id, s->svc.eps[j].id))
				continue;
			o.hosts[i] = s->outlier.hosts[j];
			o.hosts[i].active_requests =
			    0; /* requests in flight are not counted back */
			if (o.hosts[i].ejected_until_ns)
				o.ejected++;
			st[i] = s->eps[j];
			st[i].active = 0;
			break;
		}
	}
	s->outlier = o;
	memcpy(s->eps, st, sizeof(st));
}

static int svc_apply(struct worker *w, uint32_t slot, const struct iod_mesh_service *nv,
                     struct iod_err *e)
{
	struct wsvc *s = &w->svcs[slot];
	bool fresh = !s->active;
	int rc;

	if (!fresh && !memcmp(&s->svc, nv, sizeof(*nv)))
		return 0;
	bool relisten = fresh || s->svc.vip4 != nv->vip4 || s->svc.port != nv->port ||
	                s->svc.no_listen != nv->no_listen;
	bool eps_changed = fresh || s->svc.eps_n != nv->eps_n ||
	                   memcmp(s->svc.eps, nv->eps, sizeof(nv->eps[0]) * nv->eps_n);
	if (fresh) {
		memset(&s->outlier, 0, sizeof(s->outlier));
		memset(&s->breaker, 0, sizeof(s->breaker));
		memset(&s->eps, 0, sizeof(s->eps));
		memset(&s->st, 0, sizeof(s->st));
		iod_mesh_outlier_init(&s->outlier, nv->eps_n);
		s->life++;
	} else if (eps_changed) {
		remap_endpoints(s, nv);
	}
	if (eps_changed) {
		pool_drain(w, s);
		s->gen++;
	}
	if (relisten)
		listener_close(s);
	s->svc = *nv;
	s->brk.max_connections = share(nv->breaker.max_connections, w->p->workers_n);
	s->brk.max_pending = share(nv->breaker.max_pending, w->p->workers_n);
	s->brk.max_requests = share(nv->breaker.max_requests, w->p->workers_n);
	s->brk.max_retries = share(nv->breaker.max_retries, w->p->workers_n);
	if ((rc = iod_mesh_lb_build(&s->lb, &s->svc)))
		return iod_err_set(e, rc, "service %s: building the %s balancer: %s", nv->name,
		                   iod_mesh_lb_name(nv->lb), strerror(-rc));
	s->active = true;
	if (relisten && !w->p->opts.no_vips && !nv->no_listen)
		return listener_open(w, s, slot, e);
	return 0;
}

/*
 * Bring a service's path in line with its effective service_mesh.transport
 * (its spec's, else the node's): the AF_UNIX listener (worker 0) while the
 * callers' hop may be shm, and on a change the idle pooled upstreams are
 * closed, so the next request dials on the new path. Open connections
 * finish on theirs.
 */
static void svc_transport(struct worker *w, struct wsvc *s, uint32_t slot)
{
	struct iod_mesh_proxy *p = w->p;
	enum iod_mesh_tp_want cl =
	    (enum iod_mesh_tp_want)__atomic_load_n(&p->tp_cluster, __ATOMIC_ACQUIRE);
	enum iod_mesh_tp_want want = iod_mesh_tp_effective(s->svc.transport, cl);
	struct iod_mesh_hop hop = {.same_node = true,
	                           .unix_ok = p->opts.unix_dir != NULL,
	                           .rdma_device =
	                               __atomic_load_n(&p->rdma_device, __ATOMIC_RELAXED)};
	bool listen_unix = w->id == 0 && !p->opts.no_vips && !s->svc.no_listen &&
	                   iod_mesh_tp_pick(want, &hop, NULL) == IOD_MESH_PATH_SHM;
	if (want != s->tp_want) {
		if (s->tp_want != IOD_MESH_TP_UNSET)
			IOD_INFO("mesh", "service %s: transport %s -> %s (new connections)",
			         s->svc.name, iod_mesh_tp_want_name(s->tp_want),
			         iod_mesh_tp_want_name(want));
		pool_drain(w, s);
		s->tp_want = want;
	}
	if (listen_unix && !s->ulst)
		unix_listener_open(w, s, slot); /* on failure: warned, callers use the VIP */
	else if (!listen_unix && s->ulst)
		unix_listener_close(p, s);
}

static void svc_remove(struct worker *w, struct wsvc *s)
{
	unix_listener_close(w->p, s);
	s->tp_want = IOD_MESH_TP_UNSET;
	listener_close(s);
	pool_drain(w, s);
	iod_mesh_lb_free(&s->lb);
	s->active = false;
	s->gen++;
}

/* Bring a worker's services in line with the proxy's view (control path). */
static int worker_apply_view(struct worker *w, struct iod_err *e)
{
	struct iod_mesh_proxy *p = w->p;
	bool present[IOD_MESH_SERVICES_MAX] = {false};
	int rc = 0;

	pthread_mutex_lock(&p->mu);
	for (uint32_t i = 0; i < p->view.svcs_n && !rc; i++) {
		uint32_t slot = (uint32_t)p->view_slot[i];
		present[slot] = true;
		rc = svc_apply(w, slot, &p->view.svcs[i], e);
		if (!rc)
			svc_transport(w, &w->svcs[slot], slot);
	}
	w->view_version = __atomic_load_n(&p->version, __ATOMIC_ACQUIRE);
	memcpy(w->node, p->view.node, sizeof(w->node));
	memcpy(w->rack, p->view.rack, sizeof(w->rack));
	w->authz = p->view.authz;
	pthread_mutex_unlock(&p->mu);
	for (uint32_t s = 0; s < IOD_MESH_SERVICES_MAX; s++)
		if (w->svcs[s].active && !present[s])
			svc_remove(w, &w->svcs[s]);
	if (p->mtls)
		iod_mesh_mtls_sweep(w); /* a new revocation cuts the peers it names off */
	return rc;
}

/* Give each service of a new view a stable slot (by name). Under p->mu. */
static int assign_slots(struct iod_mesh_proxy *p, struct iod_err *e)
{
	bool used[IOD_MESH_SERVICES_MAX] = {false};
	for (uint32_t i = 0; i < p->view.svcs_n; i++) {
		p->view_slot[i] = -1;
		for (uint32_t s = 0; s < IOD_MESH_SERVICES_MAX; s++)
			if (!strcmp(p->slot_name[s], p->view.svcs[i].name)) {
				p->view_slot[i] = (int32_t)s;
				used[s] = true;
				break;
			}
	}
	for (uint32_t i = 0; i < p->view.svcs_n; i++) {
		if (p->view_slot[i] >= 0)
			continue;
		for (uint32_t s = 0; s < IOD_MESH_SERVICES_MAX; s++)
			if (!used[s] && !p->slot_name[s][0]) {
				p->view_slot[i] = (int32_t)s;
				used[s] = true;
				break;
			}
		if (p->view_slot[i] < 0)
			return iod_err_set(e, -ENOSPC, "more than %d services",
			                   IOD_MESH_SERVICES_MAX);
		iod_strlcpy(p->slot_name[p->view_slot[i]], p->view.svcs[i].name, IOD_NAME_MAX);
	}
	/* Slots of services that left are freed (their counters go with them). */
	for (uint32_t s = 0; s < IOD_MESH_SERVICES_MAX; s++)
		if (!used[s])
			p->slot_name[s][0] = 0;
	return 0;
}

int iod_mesh_proxy_refresh(struct iod_mesh_proxy *p, struct iod_err *e)
{
	int rc;

	if (!p->next.svcs && (rc = iod_mesh_registry_init(&p->next, 0)))
		return rc;
	rc = p->src->poll(p->src->ctx, p->view.version, &p->next, e);
	if (rc)
		return rc;
	pthread_mutex_lock(&p->mu);
	struct iod_mesh_registry tmp = p->view;
	p->view = p->next;
	p->next = tmp;
	rc = assign_slots(p, e);
	__atomic_add_fetch(&p->version, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&p->mu);
	for (uint32_t i = 0; i < p->workers_n; i++) {
		uint64_t one = 1;
		if (write(p->workers[i].wakefd, &one, sizeof(one)) < 0)
			IOD_WARN("mesh", "waking worker %u: %s", i, strerror(errno));
	}
	return rc;
}

void iod_mesh_proxy_transport_set(struct iod_mesh_proxy *p, enum iod_mesh_tp_want want,
                                  bool rdma_device)
{
	__atomic_store_n(&p->rdma_device, rdma_device, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&p->tp_cluster, (uint8_t)want, __ATOMIC_ACQ_REL) == (uint8_t)want)
		return;
	/* the workers re-apply the view (their listeners and pools) at once */
	pthread_mutex_lock(&p->mu);
	__atomic_add_fetch(&p->version, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&p->mu);
	for (uint32_t i = 0; i < p->workers_n; i++) {
		uint64_t one = 1;
		if (write(p->workers[i].wakefd, &one, sizeof(one)) < 0)
			IOD_WARN("mesh", "waking worker %u: %s", i, strerror(errno));
	}
}

/* Sleep ms in short slices; true when *stop became set. */
static bool nap(uint32_t ms, const volatile int *stop)
{
	while (ms) {
		if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
			return true;
		uint32_t d = IOD_MIN(ms, 50u);
		struct timespec ts = {0, (long)d * 1000000L};
		nanosleep(&ts, NULL);
		ms -= d;
	}
	return stop && __atomic_load_n(stop, __ATOMIC_RELAXED);
}

int iod_mesh_proxy_wait(struct iod_mesh_proxy *p, uint32_t poll_ms, uint32_t resync_ms,
                        const volatile int *stop, struct iod_err *e, bool *changed)
{
	bool dummy;
	if (!changed)
		changed = &dummy;
	*changed = false;
	if (!p->src->wait) {
		nap(poll_ms, stop);
		*changed = true; /* a poll: only a refresh can tell */
		return 0;
	}
	int rc = p->src->wait(p->src->ctx, resync_ms, stop, e);
	*changed = rc == 0;
	if (rc == -ETIMEDOUT || rc == -EINTR)
		return 0; /* resync due, or stopping */
	if (rc)
		nap(poll_ms, stop); /* the watch failed: fall back to polling */
	return rc;
}

/* ---- the worker loop --------------------------------------------------- */

void iod_mesh_authz_check(struct worker *w, const struct iod_mesh_service *to, bool peer_known,
                          uint32_t peer_uid, const char *method, struct iod_sec_verdict *v,
                          char *caller, size_t caller_len)
{
	struct iod_mesh_proxy *p = w->p;
	pthread_mutex_lock(&p->mu);
	iod_mesh_authz_decide(&p->view, peer_known, peer_uid, to, method, v);
	caller[0] = 0;
	for (uint32_t i = 0; peer_known && i < p->view.callers_n; i++)
		if (p->view.callers[i].uid == peer_uid) {
			snprintf(caller, caller_len, "%s/%s", p->view.callers[i].tenant,
			         p->view.callers[i].service);
			break;
		}
	pthread_mutex_unlock(&p->mu);
}

/* An L4 connection a policy refuses: counted, recorded as a flow, closed. */
static void l4_deny(struct worker *w, struct wsvc *s, int fd, const char *client,
                    const struct iod_sec_verdict *v, const char *caller)
{
	struct iod_mesh_span sp;
	memset(&sp, 0, sizeof(sp));
	sp.kind = IOD_MESH_SPAN_FLOW;
	iod_mesh_trace_ids_new(&w->rng, sp.trace_id, 16);
	iod_mesh_trace_ids_new(&w->rng, sp.span_id, 8);
	iod_strlcpy(sp.service, s->svc.name, sizeof(sp.service));
	iod_strlcpy(sp.client, client, sizeof(sp.client));
	iod_strlcpy(sp.denied_by, v->policy, sizeof(sp.denied_by));
	iod_strlcpy(sp.caller, caller, sizeof(sp.caller));
	sp.start_unix_ns = sp.end_unix_ns = iod_mesh_unix_ns(w);
	sp.status = EACCES;
	iod_mesh_span_ring_push(w->spans, &sp);
	STAT_INC(s->st.denied);
	close(fd);
}

/* An accepted connection (a; its caller's uid when known): an l4
 * service's policy first, then the per-client limit, then the service's
 * handler. */
static void admit(struct worker *w, struct wsvc *s, int fd, struct accepted *a, bool known,
                  uint32_t uid)
{
	if (s->svc.mode == IOD_MESH_MODE_TCP && w->authz) {
		struct iod_sec_verdict v;
		char caller[2 * IOD_NAME_MAX + 2];
		iod_mesh_authz_check(w, &s->svc, known, uid, NULL, &v, caller, sizeof(caller));
		if (!v.allow) {
			l4_deny(w, s, fd, a->client, &v, caller);
			return;
		}
	}
	/* per-client limit: a client at its share is refused here, before it
	 * takes a connection slot (issue 15: a flood of slow heads from one
	 * client made the proxy reset everyone else) */
	if (iod_mesh_clients_take(w->clients, a->ip4, a->key_uid, w->client_max)) {
		STAT_INC(s->st.limited);
		close(fd);
		return;
	}
	if (s->svc.mode == IOD_MESH_MODE_TCP)
		iod_mesh_l4_accept(w, s, fd, a);
	else
		iod_mesh_http_accept(w, s, fd, a);
}

/* A caller on this node over the service's AF_UNIX socket: who it is comes
 * from SO_PEERCRED (always known), the rest as for the VIP. */
static void on_accept_unix(struct worker *w, struct listener *l)
{
	struct wsvc *s = &w->svcs[l->slot];
	for (int k = 0; k < ACCEPT_BURST; k++) {
		int fd =
		    iod_fd_accept(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC, &w->reserve_fd);
		if (fd == -ECONNABORTED) {
			STAT_INC(w->cx_shed);
			continue;
		}
		if (fd < 0)
			return;
		struct ucred cr = {0};
		socklen_t cl = sizeof(cr);
		bool known = !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl);
		char client[32];
		snprintf(client, sizeof(client), "unix/pid=%d", known ? (int)cr.pid : 0);
		STAT_INC(s->st.cx_total);
		STAT_INC(s->st.tp_down[IOD_MESH_PATH_SHM]);
		/* keyed by uid only (no address): 127.0.0.1 stands for "this node" */
		struct accepted a = {.client = client,
		                     .ip4 = 0x7f000001u,
		                     .peer_known = known && w->authz,
		                     .peer_uid = cr.uid,
		                     .key_uid = known ? cr.uid : UINT32_MAX,
		                     .tp = IOD_MESH_PATH_SHM};
		admit(w, s, fd, &a, known, cr.uid);
	}
}

static void on_accept(struct worker *w, struct listener *l)
{
	struct wsvc *s = &w->svcs[l->slot];
	if (l->unix_) {
		on_accept_unix(w, l);
		return;
	}
	for (int k = 0; k < ACCEPT_BURST; k++) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		int one = 1;
		int fd = iod_fd_accept(l->fd, (struct sockaddr *)&sa, &sl,
		                       SOCK_NONBLOCK | SOCK_CLOEXEC, &w->reserve_fd);
		if (fd == -ECONNABORTED) {
			STAT_INC(w->cx_shed); /* out of descriptors: shed, do not spin */
			continue;
		}
		if (fd < 0)
			return;
		char client[32];
		iod_mesh_addr_format(ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port), client,
		                     sizeof(client));
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		STAT_INC(s->st.cx_total);
		STAT_INC(s->st.tp_down[IOD_MESH_PATH_TCP]);
		/* who calls: the uid that owns the peer socket (peer.c) */
		struct iod_mesh_peer peer = {0};
		struct iod_err pe = {0};
		bool known = w->authz && !iod_mesh_peer_owner(fd, &peer, &pe);
		struct accepted a = {.client = client,
		                     .ip4 = ntohl(sa.sin_addr.s_addr),
		                     .peer_known = known,
		                     .peer_uid = peer.uid,
		                     .key_uid = known ? peer.uid : UINT32_MAX};
		admit(w, s, fd, &a, known, peer.uid);
	}
}

static void tick(struct worker *w)
{
	if (__atomic_load_n(&w->p->version, __ATOMIC_ACQUIRE) != w->view_version) {
		struct iod_err e = {0};
		if (worker_apply_view(w, &e))
			IOD_ERROR("mesh", "worker %u: applying the new view: %s", w->id, e.msg);
	}
	for (uint32_t s = 0; s < IOD_MESH_SERVICES_MAX; s++)
		if (w->svcs[s].active)
			iod_mesh_outlier_tick(&w->svcs[s].outlier, &w->svcs[s].svc.outlier,
			                      w->now_ns);
	/* Timers: bounded by the connection pool; a connection's handler may
	 * free it and its peer, so find the next one first. */
	struct conn *c = w->used;
	while (c) {
		struct conn *next = c->next_used;
		if (c->kind == CK_L4_CLIENT)
			iod_mesh_l4_timer(w, c);
		else if (c->kind == CK_HTTP_CLIENT || c->kind == CK_HTTP_UP)
			iod_mesh_http_timer(w, c);
		else if (c->kind == CK_MTLS_T)
			iod_mesh_mtls_timer(w, c);
		/* the handler may have freed next (a peer): restart from the head */
		if (next && !next->in_use)
			next = w->used;
		c = next;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[EVENTS_BURST];

	while (!__atomic_load_n(&w->p->stop, __ATOMIC_ACQUIRE)) {
		int n = epoll_wait(w->epfd, evs, EVENTS_BURST, (int)(TICK_NS / IOD_NS_PER_MS));
		w->now_ns = iod_clock_now_ns();
		for (int i = 0; i < n; i++) {
			uint8_t tag = *(uint8_t *)evs[i].data.ptr;
			if (tag == TAG_LISTENER) {
				on_accept(w, evs[i].data.ptr);
			} else if (tag == TAG_MTLS_LISTENER) {
				iod_mesh_mtls_accept(w);
			} else if (tag == TAG_WAKE) {
				uint64_t v;
				if (read(w->wakefd, &v, sizeof(v)) < 0)
					continue;
				w->last_tick_ns = 0; /* apply the view now */
			} else {
				struct conn *c = evs[i].data.ptr;
				if (!c->in_use)
					continue; /* freed earlier in this burst */
				if (c->kind == CK_L4_CLIENT || c->kind == CK_L4_UP)
					iod_mesh_l4_event(w, c, evs[i].events);
				else if (c->kind == CK_MTLS_T || c->kind == CK_MTLS_P)
					iod_mesh_mtls_event(w, c, evs[i].events);
				else
					iod_mesh_http_event(w, c, evs[i].events);
			}
		}
		if (w->again)
			iod_mesh_mtls_again(w);
		if (w->now_ns - w->last_tick_ns >= TICK_NS) {
			w->last_tick_ns = w->now_ns;
			tick(w);
		}
	}
	return NULL;
}

static void worker_free(struct worker *w)
{
	if (w->svcs) {
		for (uint32_t s = 0; s < IOD_MESH_SERVICES_MAX; s++)
			if (w->svcs[s].active)
				svc_remove(w, &w->svcs[s]);
	}
	if (w->conns) {
		while (w->used) {
			if (w->used->tls)
				iod_sec_tls_close(w->used->tls);
			w->used->tls = NULL;
			iod_mesh_conn_put(w, w->used);
		}
		for (uint32_t i = 0; i < IOD_MESH_CONNS_MAX; i++)
			for (int k = 0; k < 2; k++) {
				if (w->conns[i].d[k].pipe_r >= 0)
					close(w->conns[i].d[k].pipe_r);
				if (w->conns[i].d[k].pipe_w >= 0)
					close(w->conns[i].d[k].pipe_w);
			}
	}
	if (w->mtls_lst.fd >= 0)
		close(w->mtls_lst.fd);
	if (w->reserve_fd >= 0)
		close(w->reserve_fd);
	if (w->epfd >= 0)
		close(w->epfd);
	if (w->wakefd >= 0)
		close(w->wakefd);
	free(w->svcs);
	free(w->conns);
	free(w->bufs);
	free(w->free_conns);
	free(w->scratch);
	free(w->spans);
	free(w->clients);
}

static int worker_init(struct iod_mesh_proxy *p, struct worker *w, uint32_t id, struct iod_rng *rng,
                       struct iod_err *e)
{
	w->p = p;
	w->id = id;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->wake_tag = TAG_WAKE;
	w->mtls_lst.fd = -1;
	w->reserve_fd = iod_fd_reserve_open();
	iod_rng_fork(rng, &w->rng);
	w->svcs = calloc(IOD_MESH_SERVICES_MAX, sizeof(*w->svcs));
	w->conns = calloc(IOD_MESH_CONNS_MAX, sizeof(*w->conns));
	w->bufs = malloc((size_t)IOD_MESH_CONNS_MAX * IOD_MESH_HTTP_BUF);
	w->free_conns = malloc(IOD_MESH_CONNS_MAX * sizeof(*w->free_conns));
	w->scratch = malloc(IOD_MESH_HTTP_BUF);
	w->spans = malloc(sizeof(*w->spans));
	w->clients = calloc(1, sizeof(*w->clients));
	uint32_t cmax =
	    p->opts.client_conns_max ? p->opts.client_conns_max : IOD_MESH_CLIENT_CONNS_MAX;
	w->client_max = share(cmax, p->workers_n);
	if (w->epfd < 0 || w->wakefd < 0)
		return iod_err_set(e, -errno, "worker %u: %s", id, strerror(errno));
	if (!w->svcs || !w->conns || !w->bufs || !w->free_conns || !w->scratch || !w->spans ||
	    !w->clients)
		return iod_err_set(e, -ENOMEM, "worker %u: out of memory", id);
	iod_mesh_span_ring_init(w->spans);
	for (uint32_t i = 0; i < IOD_MESH_CONNS_MAX; i++) {
		w->conns[i].fd = -1;
		w->conns[i].d[0].pipe_r = w->conns[i].d[0].pipe_w = -1;
		w->conns[i].d[1].pipe_r = w->conns[i].d[1].pipe_w = -1;
		w->free_conns[i] = IOD_MESH_CONNS_MAX - 1 - i;
	}
	w->free_n = IOD_MESH_CONNS_MAX;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &w->wake_tag};
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wakefd, &ev))
		return iod_err_set(e, -errno, "worker %u: %s", id, strerror(errno));
	if (p->mtls && p->opts.mtls_listen) {
		int rc = mtls_listen(p, w, e);
		if (rc)
			return rc;
	}
	w->now_ns = iod_clock_now_ns();
	return worker_apply_view(w, e);
}

int iod_mesh_proxy_start(struct iod_mesh_proxy **out, const struct iod_mesh_proxy_opts *o,
                         struct iod_mesh_source *src, struct iod_err *e)
{
	struct iod_mesh_proxy *p = calloc(1, sizeof(*p));
	struct iod_rng rng;
	int rc;

	if (!p)
		return -ENOMEM;
	p->opts = *o;
	p->src = src;
	p->admin_fd = p->dns_fd = -1;
	p->admin_reserve = -1;
	p->tp_cluster = (uint8_t)o->transport;
	if (o->unix_dir)
		iod_mesh_unix_dirs(o->unix_dir);
	p->workers_n = o->workers ? o->workers : 1;
	if (p->workers_n > IOD_MESH_WORKERS_MAX) {
		free(p);
		return iod_err_set(e, -EINVAL, "at most %d workers", IOD_MESH_WORKERS_MAX);
	}
	pthread_mutex_init(&p->mu, NULL);
	p->unix_offset_ns = (int64_t)iod_time_unix_ns() - (int64_t)iod_clock_now_ns();
	if ((rc = iod_mesh_registry_init(&p->view, 0)))
		goto fail;
	rc = src->poll(src->ctx, 0, &p->view, e);
	if (rc == -EAGAIN)
		rc = iod_err_set(e, -EINVAL, "the registry source has no view yet");
	if (rc || (rc = assign_slots(p, e)))
		goto fail;
	p->version = 1;
	if ((rc = iod_mesh_mtls_init(p, e)))
		goto fail;
	p->workers = calloc(p->workers_n, sizeof(*p->workers));
	if (!p->workers) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < p->workers_n; i++)
		p->workers[i].epfd = p->workers[i].wakefd = -1;
	iod_rng_seed(&rng, o->seed);
	for (uint32_t i = 0; i < p->workers_n; i++)
		if ((rc = worker_init(p, &p->workers[i], i, &rng, e)))
			goto fail;
	if ((rc = iod_mesh_admin_start(p, e)))
		goto fail;
	for (uint32_t i = 0; i < p->workers_n; i++) {
		if ((rc = -pthread_create(&p->workers[i].thread, NULL, worker_main,
		                          &p->workers[i]))) {
			iod_err_set(e, rc, "starting worker %u: %s", i, strerror(-rc));
			__atomic_store_n(&p->stop, true, __ATOMIC_RELEASE);
			for (uint32_t k = 0; k < i; k++)
				pthread_join(p->workers[k].thread, NULL);
			p->workers_n = i; /* only joined threads are torn down below */
			iod_mesh_admin_stop(p);
			goto fail;
		}
	}
	*out = p;
	return 0;
fail:
	if (p->workers)
		for (uint32_t i = 0; i < p->workers_n; i++)
			worker_free(&p->workers[i]);
	free(p->workers);
	iod_mesh_mtls_free(p);
	iod_mesh_registry_free(&p->view);
	pthread_mutex_destroy(&p->mu);
	free(p);
	return rc;
}

void iod_mesh_proxy_stop(struct iod_mesh_proxy *p)
{
	if (!p)
		return;
	__atomic_store_n(&p->stop, true, __ATOMIC_RELEASE);
	iod_mesh_admin_stop(p);
	for (uint32_t i = 0; i < p->workers_n; i++) {
		uint64_t one = 1;
		if (write(p->workers[i].wakefd, &one, sizeof(one)) < 0)
			IOD_WARN("mesh", "waking worker %u: %s", i, strerror(errno));
		pthread_join(p->workers[i].thread, NULL);
	}
	for (uint32_t i = 0; i < p->workers_n; i++)
		worker_free(&p->workers[i]);
	free(p->workers);
	iod_mesh_mtls_free(p);
	iod_mesh_registry_free(&p->view);
	iod_mesh_registry_free(&p->next);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* ---- metrics ----------------------------------------------------------- */

#define SVC_COUNTERS(X)                                                                            \
	X(requests, "iod_mesh_requests_total", "counter",                                          \
	  "HTTP requests (http services) or connections (tcp services) handled.")                  \
	X(errors, "iod_mesh_errors_total", "counter",                                              \
	  "Requests answered 5xx (incl. by the proxy), rejected as malformed or too large, or "    \
	  "failed flows.")                                                                         \
	X(retries, "iod_mesh_retries_total", "counter", "Upstream attempts after the first.")      \
	X(cx_active, "iod_mesh_downstream_connections_active", "gauge",                            \
	  "Client connections open.")                                                              \
	X(cx_total, "iod_mesh_downstream_connections_total", "counter",                            \
	  "Client connections accepted.")                                                          \
	X(bytes_in, "iod_mesh_sent_bytes_total", "counter", "Bytes sent to upstreams.")            \
	X(bytes_out, "iod_mesh_received_bytes_total", "counter", "Bytes received from upstreams.") \
	X(overflow, "iod_mesh_overflow_total", "counter",                                          \
	  "Requests refused by a circuit breaker.")                                                \
	X(panic, "iod_mesh_lb_panic_total", "counter",                                             \
	  "Picks made in panic mode (too few usable endpoints: all used).")                        \
	X(denied, "iod_mesh_denied_total", "counter",                                              \
	  "Calls refused by a service policy (403, or a closed connection for tcp services).")     \
	X(limited, "iod_mesh_client_limited_total", "counter",                                     \
	  "Connections closed at accept: their client held its connection limit.")                 \
	X(head_timeouts, "iod_mesh_head_timeouts_total", "counter",                                \
	  "Client connections that did not send a request head in time (408, closed).")            \
	X(fault_delays, "iod_mesh_fault_delays_total", "counter",                                  \
	  "Requests held by an injected delay (iod chaos delay service/NAME).")                    \
	X(fault_aborts, "iod_mesh_fault_aborts_total", "counter",                                  \
	  "Requests answered by an injected abort (iod chaos abort service/NAME).")

#define EP_COUNTERS(X)                                                                          \
	X(requests, "iod_mesh_endpoint_requests_total", "counter",                              \
	  "Requests or flows an endpoint served.")                                              \
	X(errors, "iod_mesh_endpoint_errors_total", "counter",                                  \
	  "5xx, resets and connect failures of an endpoint.")                                   \
	X(active, "iod_mesh_endpoint_active_requests", "gauge", "Requests or flows in flight.") \
	X(ejections, "iod_mesh_endpoint_ejections_total", "counter",                            \
	  "Times outlier detection ejected the endpoint.")

uint32_t iod_mesh_proxy_node_services(struct iod_mesh_proxy *p, const char *node,
                                      struct iod_mesh_svc_id *out, uint32_t max)
{
	uint32_t n = 0;
	pthread_mutex_lock(&p->mu);
	for (uint32_t i = 0; i < p->view.svcs_n && n < max; i++) {
		const struct iod_mesh_service *s = &p->view.svcs[i];
		bool here = false;
		for (uint32_t j = 0; j < s->eps_n && !here; j++)
			here = !strcmp(s->eps[j].node, node);
		if (!here)
			continue;
		iod_strlcpy(out[n].tenant, s->tenant[0] ? s->tenant : "default",
		            sizeof(out[n].tenant));
		iod_strlcpy(out[n].service, s->name, sizeof(out[n].service));
		n++;
	}
	pthread_mutex_unlock(&p->mu);
	return n;
}

int iod_mesh_proxy_metrics(struct iod_mesh_proxy *p, struct iod_buf *b)
{
	char l[256], addr[32];
	int rc = 0;

	pthread_mutex_lock(&p->mu);
	const struct iod_mesh_registry *v = &p->view;
#define X(fld, mname, mtype, mhelp)                                                            \
	iod_prom_header(b, mname, mtype, mhelp);                                               \
	for (uint32_t i = 0; i < v->svcs_n; i++) {                                             \
		uint64_t sum = 0;                                                              \
		for (uint32_t k = 0; k < p->workers_n; k++)                                    \
			sum += STAT_GET(p->workers[k].svcs[p->view_slot[i]].st.fld);           \
		iod_prom_labels(l, sizeof(l), "service", v->svcs[i].name, (const char *)NULL); \
		rc |= iod_prom_u64(b, mname, l, sum);                                          \
	}
	SVC_COUNTERS(X)
#undef X
	iod_prom_header(b, "iod_mesh_request_duration_seconds", "histogram",
	                "Time from the request (or connection) to the last response byte.");
	for (uint32_t i = 0; i < v->svcs_n; i++) {
		uint64_t counts[IOD_MESH_LATENCY_BUCKETS + 1] = {0}, sum_ns = 0;
		for (uint32_t k = 0; k < p->workers_n; k++) {
			const struct svc_stats *st = &p->workers[k].svcs[p->view_slot[i]].st;
			for (uint32_t j = 0; j <= IOD_MESH_LATENCY_BUCKETS; j++)
				counts[j] += STAT_GET(st->lat[j]);
			sum_ns += STAT_GET(st->lat_sum_ns);
		}
		iod_prom_labels(l, sizeof(l), "service", v->svcs[i].name, (const char *)NULL);
		rc |= iod_prom_histogram(b, "iod_mesh_request_duration_seconds", l,
		                         iod_mesh_latency_le, counts, IOD_MESH_LATENCY_BUCKETS,
		                         (double)sum_ns / 1e9);
	}
	iod_prom_header(b, "iod_mesh_breaker_trips_total", "counter",
	                "Acquisitions refused by a circuit breaker, by resource.");
	for (uint32_t i = 0; i < v->svcs_n; i++)
		for (int r = 0; r < IOD_MESH_BRK_KINDS; r++) {
			uint64_t sum = 0;
			for (uint32_t k = 0; k < p->workers_n; k++)
				sum +=
				    STAT_GET(p->workers[k].svcs[p->view_slot[i]].breaker.trips[r]);
			iod_prom_labels(l, sizeof(l), "service", v->svcs[i].name, "resource",
			                iod_mesh_breaker_name((enum iod_mesh_breaker_kind)r),
			                (const char *)NULL);
			rc |= iod_prom_u64(b, "iod_mesh_breaker_trips_total", l, sum);
		}
	/* service_mesh.transport: what each service runs, and its connections
	 * by hop and path (iod top's TRANSPORT column) */
	enum iod_mesh_tp_want cl =
	    (enum iod_mesh_tp_want)__atomic_load_n(&p->tp_cluster, __ATOMIC_ACQUIRE);
	iod_prom_header(b, "iod_mesh_transport_info", "gauge",
	                "1 for the service_mesh.transport each service runs (its spec's, else "
	                "the node's iod config value).");
	for (uint32_t i = 0; i < v->svcs_n; i++) {
		iod_prom_labels(
		    l, sizeof(l), "service", v->svcs[i].name, "transport",
		    iod_mesh_tp_want_name(iod_mesh_tp_effective(v->svcs[i].transport, cl)), "from",
		    v->svcs[i].transport ? "spec" : "config", (const char *)NULL);
		rc |= iod_prom_u64(b, "iod_mesh_transport_info", l, 1);
	}
	iod_prom_header(b, "iod_mesh_transport_connections_total", "counter",
	                "Connections by hop (client: caller -> proxy, upstream: proxy -> "
	                "endpoint) and path (tcp, or shm: AF_UNIX on this node).");
	for (uint32_t i = 0; i < v->svcs_n; i++)
		for (int hop = 0; hop < 2; hop++)
			for (int t = 0; t < 2; t++) {
				uint64_t sum = 0;
				for (uint32_t k = 0; k < p->workers_n; k++) {
					const struct svc_stats *st =
					    &p->workers[k].svcs[p->view_slot[i]].st;
					sum +=
					    hop ? STAT_GET(st->tp_up[t]) : STAT_GET(st->tp_down[t]);
				}
				iod_prom_labels(l, sizeof(l), "service", v->svcs[i].name, "hop",
				                hop ? "upstream" : "client", "transport",
				                iod_mesh_tp_path_name((enum iod_mesh_tp_path)t),
				                (const char *)NULL);
				rc |=
				    iod_prom_u64(b, "iod_mesh_transport_connections_total", l, sum);
			}
#define X(fld, mname, mtype, mhelp)                                                                \
	iod_prom_header(b, mname, mtype, mhelp);                                                   \
	for (uint32_t i = 0; i < v->svcs_n; i++)                                                   \
		for (uint32_t j = 0; j < v->svcs[i].eps_n; j++) {                                  \
			uint64_t sum = 0;                                                          \
			for (uint32_t k = 0; k < p->workers_n; k++)                                \
				sum += STAT_GET(p->workers[k].svcs[p->view_slot[i]].eps[j].fld);   \
			iod_mesh_addr_format(v->svcs[i].eps[j].ip4, v->svcs[i].eps[j].port, addr,  \
			                     sizeof(addr));                                        \
			iod_prom_labels(l, sizeof(l), "service", v->svcs[i].name, "endpoint",      \
			                addr, "node", v->svcs[i].eps[j].node, (const char *)NULL); \
			rc |= iod_prom_u64(b, mname, l, sum);                                      \
		}
	EP_COUNTERS(X)
#undef X
	uint64_t shed = 0;
	for (uint32_t k = 0; k < p->workers_n; k++)
		shed += STAT_GET(p->workers[k].cx_shed);
	iod_prom_header(b, "iod_mesh_accept_shed_total", "counter",
	                "Connections accepted and closed at once: the proxy was out of file "
	                "descriptors (EMFILE/ENFILE).");
	rc |= iod_prom_u64(b, "iod_mesh_accept_shed_total", "", shed);
	if (p->mtls) {
		uint64_t in = 0, out = 0, refused = 0, denied = 0, revoked = 0;
		for (uint32_t k = 0; k < p->workers_n; k++) {
			in += STAT_GET(p->workers[k].mtls_in);
			out += STAT_GET(p->workers[k].mtls_out);
			refused += STAT_GET(p->workers[k].mtls_refused);
			denied += STAT_GET(p->workers[k].mtls_denied);
			revoked += STAT_GET(p->workers[k].mtls_revoked);
		}
		iod_prom_header(b, "iod_mesh_mtls_handshakes_total", "counter",
		                "Proxy-to-proxy mutual TLS sessions established, by direction.");
		rc |= iod_prom_u64(b, "iod_mesh_mtls_handshakes_total", "direction=\"in\"", in);
		rc |= iod_prom_u64(b, "iod_mesh_mtls_handshakes_total", "direction=\"out\"", out);
		iod_prom_header(b, "iod_mesh_mtls_refused_total", "counter",
		                "Proxy-to-proxy peers refused: handshake (another CA, expired, no "
		                "certificate), identity or preamble.");
		rc |= iod_prom_u64(b, "iod_mesh_mtls_refused_total", "", refused);
		iod_prom_header(b, "iod_mesh_mtls_denied_total", "counter",
		                "Proxy-to-proxy calls refused by a policy on the caller's SVID.");
		rc |= iod_prom_u64(b, "iod_mesh_mtls_denied_total", "", denied);
		iod_prom_header(
		    b, "iod_mesh_mtls_revoked_total", "counter",
		    "Proxy-to-proxy peers refused or cut off because `iod revoke` names "
		    "them: a node's certificate, an SVID, or an SVID issued to a revoked "
		    "node (also counted in iod_mesh_mtls_refused_total).");
		rc |= iod_prom_u64(b, "iod_mesh_mtls_revoked_total", "", revoked);
		iod_prom_header(b, "iod_mesh_mtls_rotations_total", "counter",
		                "Times changed certificate files were swapped in.");
		rc |= iod_prom_u64(b, "iod_mesh_mtls_rotations_total", "",
		                   __atomic_load_n(&p->mtls->rotations, __ATOMIC_RELAXED));
	}
	iod_prom_header(b, "iod_mesh_endpoint_ejected", "gauge",
	                "Workers that currently eject the endpoint (0 = in service).");
	for (uint32_t i = 0; i < v->svcs_n; i++)
		for (uint32_t j = 0; j < v->svcs[i].eps_n; j++) {
			uint64_t n = 0;
			for (uint32_t k = 0; k < p->workers_n; k++) {
				const struct wsvc *s = &p->workers[k].svcs[p->view_slot[i]];
				n += j < s->outlier.n &&
				     __atomic_load_n(&s->outlier.hosts[j].ejected_until_ns,
				                     __ATOMIC_RELAXED) != 0;
			}
			iod_mesh_addr_format(v->svcs[i].eps[j].ip4, v->svcs[i].eps[j].port, addr,
			                     sizeof(addr));
			iod_prom_labels(l, sizeof(l), "service", v->svcs[i].name, "endpoint", addr,
			                "node", v->svcs[i].eps[j].node, (const char *)NULL);
			rc |= iod_prom_u64(b, "iod_mesh_endpoint_ejected", l, n);
		}
	pthread_mutex_unlock(&p->mu);
	return rc ? -ENOMEM : 0;
}
