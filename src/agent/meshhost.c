/*
 * meshhost.c: the node's service-mesh proxy, hosted by the agent (issue #10:
 * one proxy per node inside the agent, not a sidecar per replica).
 *
 * One thread: it waits until the node has registered, starts the proxy
 * (iod_mesh_proxy_start with the control-plane source, so the proxy serves
 * every Service on its loopback VIP and follows Endpoint reports), then
 * refreshes the proxy's view whenever the control plane's watch reports a
 * Service, Endpoint or Node change (a push: an endpoint marked unhealthy
 * leaves the proxy's rotation within milliseconds), and every
 * MESH_RESYNC_MS regardless; while the watch fails it polls every
 * MESH_REFRESH_MS. When the API server it
 * reads from fails it moves to the next one of cfg->servers. Stopping joins
 * the thread and stops the proxy (listeners closed, workers joined).
 *
 * A shell piece: it decides nothing (the mesh's pure cores do) and never
 * blocks the agent loop: the blocking GETs run on this thread only.
 */
#include "internal.h"
#include "iod/config.h"
#include "iod/mesh_proxy.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MESH_REFRESH_MS 200    /* poll period when the control plane's watch fails */
#define MESH_RESYNC_MS 5000    /* full re-read even without pushes (lost-watch fallback) */
#define MESH_RETRY_MS 500      /* between failed proxy starts (API not answering) */
#define MESH_SVID_LOOK_MS 1000 /* mTLS: SVID files re-read at least this often */

struct iod_agent_mesh {
	const struct iod_agent_config *cfg; /* settings (outlive us) */
	struct iod_agent_cluster *cluster;  /* registration state */
	struct iod_mesh_api_source src;     /* the proxy's view of the cluster */
	struct iod_mesh_proxy *proxy;       /* NULL until started */
	uint32_t server_i;                  /* which of cfg->servers src reads */
	pthread_t thread;                   /* the host thread */
	bool thread_started;                /* thread to join */
	pthread_mutex_t mu;                 /* guards stop */
	pthread_cond_t cv;                  /* signals stop */
	bool stop;                          /* thread exits */
	int stop_flag;                      /* the same, read without mu (atomic) */
	/* proxy-to-proxy mTLS (cfg->mesh_mtls): the SVIDs of local services */
	bool mtls;                       /* on */
	struct iod_api_client svid_cl;   /* issues them (the node's certificate) */
	bool svid_cl_open;               /* svid_cl to close */
	uint64_t svid_next_s;            /* unix s: look at them again */
	struct iod_mesh_svc_id *svc_ids; /* IOD_MESH_MTLS_IDS_MAX scratch */
	bool rdma_device;                /* this node has one (transport reasons) */
};

/* The node's applied service_mesh.transport (iod config; tcp when unset). */
static enum iod_mesh_tp_want live_transport(void)
{
	char buf[16];
	enum iod_mesh_tp_want w;
	if (iod_mesh_tp_want_parse(
	        iod_config_live_str("service_mesh.transport", "tcp", buf, sizeof(buf)), &w))
		w = IOD_MESH_TP_TCP;
	return w;
}

/* iod config applied a revision (the watcher thread, before it acks): the
 * proxy takes the node's transport for new connections at once. */
static void config_applied(void *ctx)
{
	struct iod_agent_mesh *m = ctx;
	pthread_mutex_lock(&m->mu);
	if (m->proxy)
		iod_mesh_proxy_transport_set(m->proxy, live_transport(), m->rdma_device);
	pthread_mutex_unlock(&m->mu);
}

/* The i-th address of "a,b,c" (wrapping) into buf. */
static void nth_server(const char *list, uint32_t i, char *buf, size_t len)
{
	uint32_t n = 1;
	for (const char *p = list; *p; p++)
		n += *p == ',';
	i %= n;
	const char *s = list;
	while (i--)
		s = strchr(s, ',') + 1;
	size_t l = strcspn(s, ",");
	if (l >= len)
		l = len - 1;
	memcpy(buf, s, l);
	buf[l] = 0;
}

/* Sleep up to ms or until stopped; returns true when stopped. */
static bool wait_stop(struct iod_agent_mesh *m, uint32_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m->mu);
	while (!m->stop && pthread_cond_timedwait(&m->cv, &m->mu, &ts) == 0)
		;
	bool stop = m->stop;
	pthread_mutex_unlock(&m->mu);
	return stop;
}

static void next_server(struct iod_agent_mesh *m)
{
	m->server_i++;
	nth_server(m->cfg->servers, m->server_i, m->src.server, sizeof(m->src.server));
}

/* Issue or renew the SVIDs of the services the view places on this node
 * (when due, or when the view changed), then let the proxy pick up changed
 * files: ours, and those other agents of this host wrote (`iod up`). */
static void svids_step(struct iod_agent_mesh *m, bool changed)
{
	struct iod_err e = {0};
	uint64_t now_s = iod_time_unix_ns() / IOD_NS_PER_S;
	uint32_t issued = 0;
	if (!m->mtls)
		return;
	if (changed || now_s >= m->svid_next_s) {
		uint32_t n = iod_mesh_proxy_node_services(m->proxy, m->cfg->name, m->svc_ids,
		                                          IOD_MESH_MTLS_IDS_MAX);
		iod_agent_svids_sync(m->cfg, &m->svid_cl, m->svc_ids, n, now_s, &m->svid_next_s,
		                     &issued, &e);
	}
	memset(&e, 0, sizeof(e));
	if (iod_mesh_proxy_mtls_reload(m->proxy, &e))
		IOD_DEBUG("agent", "mesh: keeping the current SVIDs: %s", e.msg);
}

/* How long the proxy may wait for a push before the SVIDs need a look:
 * ours when they are due, and at least every MESH_SVID_LOOK_MS for the
 * files other agents of this host renew (the proxy must swap a renewed
 * SVID in well before the old one expires). */
static uint32_t svid_wait_ms(const struct iod_agent_mesh *m)
{
	uint64_t now_s = iod_time_unix_ns() / IOD_NS_PER_S;
	if (!m->mtls)
		return MESH_RESYNC_MS;
	if (m->svid_next_s <= now_s)
		return MESH_REFRESH_MS;
	return (uint32_t)IOD_MIN((m->svid_next_s - now_s) * 1000, (uint64_t)MESH_SVID_LOOK_MS);
}

static void *mesh_main(void *arg)
{
	struct iod_agent_mesh *m = arg;
	const struct iod_agent_config *cfg = m->cfg;
	struct iod_mesh_proxy_opts o = {.workers = cfg->mesh_workers ? cfg->mesh_workers : 1,
	                                .admin_addr = cfg->mesh_admin[0] ? cfg->mesh_admin : NULL,
	                                .seed = iod_hash_str(cfg->name),
	                                .no_vips = cfg->mesh_no_vips};
	/* iod's overlay (`iod up --netns`): the replicas are in their own
	 * namespaces behind the node's virtual switch, so the proxy serves
	 * the l7 services' overlay VIPs (the switch sends their packets to
	 * the host stack, and netns.c makes the VIP range local here) and
	 * the DNS responder listens on the gateway address, both bound to
	 * the host stack's port of the switch: only what the switch delivers
	 * from this node's replicas reaches them (docs/network.md, "The mesh
	 * proxy on the overlay") */
	char dev[16] = "", dns[32] = "";
	if (cfg->overlay_dev[0] && cfg->netns_subnet[0]) {
		struct iod_agent_ipam *ip = calloc(1, sizeof(*ip));
		struct iod_err ie = {0};
		if (ip && !iod_agent_ipam_init(ip, cfg->netns_subnet, &ie)) {
			char gw[20];
			iod_agent_ipv4_format(iod_agent_ipam_gateway(ip), gw, sizeof(gw));
			snprintf(dns, sizeof(dns), "%s:%u", gw, IOD_AGENT_OVERLAY_DNS_PORT);
			iod_agent_netns_host_kernel(cfg->name, dev, sizeof(dev));
			o.listen_dev = dev;
			o.dns_addr = dns;
		}
		free(ip);
	}
	/* service_mesh.transport shm: the AF_UNIX sockets (not on the overlay:
	 * replicas there are in their own namespaces, behind the switch) */
	if (cfg->mesh_unix_dir[0] && !o.listen_dev)
		o.unix_dir = cfg->mesh_unix_dir;
	o.transport = live_transport();
	if (m->mtls) {
		o.mtls_dir = cfg->svid_dir;
		o.mtls_listen = cfg->mesh_mtls;
		o.mtls_node_creds = cfg->creds;
	}
	struct iod_err e = {0};
	bool warned = false;
	sigset_t pipe;

	/* a write to a closed upstream must not kill the agent: SIGPIPE stays
	 * blocked on this thread and the proxy's workers (they inherit it) */
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, NULL);
	while (!iod_agent_cluster_registered(m->cluster))
		if (wait_stop(m, 50))
			return NULL;
	for (;;) {
		memset(&e, 0, sizeof(e));
		uint32_t issued = 0;
		uint64_t now_s = iod_time_unix_ns() / IOD_NS_PER_S;
		/* the SVID directory and its ca.crt before the proxy reads them */
		if (m->mtls && iod_agent_svids_sync(cfg, &m->svid_cl, NULL, 0, now_s,
		                                    &m->svid_next_s, &issued, &e))
			IOD_WARN("agent", "node %s: SVID directory %s: %s", cfg->name,
			         cfg->svid_dir, e.msg);
		memset(&e, 0, sizeof(e));
		struct iod_mesh_proxy *px = NULL;
		if (!iod_mesh_proxy_start(&px, &o, &m->src.src, &e)) {
			pthread_mutex_lock(&m->mu);
			m->proxy = px;
			/* a revision applied while it started */
			iod_mesh_proxy_transport_set(px, live_transport(), m->rdma_device);
			pthread_mutex_unlock(&m->mu);
			break;
		}
		if (!warned)
			IOD_WARN("agent", "node %s: mesh proxy not started yet: %s (retrying)",
			         cfg->name, e.msg);
		warned = true;
		if (e.code != -EADDRINUSE && e.code != -EACCES)
			next_server(m);
		if (wait_stop(m, MESH_RETRY_MS))
			return NULL;
	}
	IOD_INFO("agent", "node %s: mesh proxy up (view from %s%s%s%s%s%s%s%s%s%s)", cfg->name,
	         m->src.server, o.admin_addr ? ", admin http://" : "",
	         o.admin_addr ? o.admin_addr : "", m->mtls ? ", mTLS on " : "",
	         m->mtls ? cfg->mesh_mtls : "", o.no_vips ? ", no VIPs" : "",
	         dev[0] ? ", l7 overlay VIPs on " : "", dev, dns[0] ? ", DNS on " : "", dns);
	svids_step(m, true);
	uint64_t resync_ns = iod_clock_now_ns() + (uint64_t)MESH_RESYNC_MS * IOD_NS_PER_MS;
	for (;;) {
		memset(&e, 0, sizeof(e));
		uint32_t t = svid_wait_ms(m);
		bool changed = false;
		int wrc =
		    iod_mesh_proxy_wait(m->proxy, MESH_REFRESH_MS, t, &m->stop_flag, &e, &changed);
		if (wrc)
			IOD_DEBUG("agent", "mesh: watch: %s (polling)", e.msg);
		if (__atomic_load_n(&m->stop_flag, __ATOMIC_RELAXED))
			break;
		/* a wait that only ran out for the SVIDs' sake refreshes nothing:
		 * the view is re-read on a push, a failure, or the resync period.
		 * A push is never dropped, however late in the wait it came (the
		 * watch has moved past it: it was lost until the resync, 5 s, when
		 * this was judged by the time the wait took) */
		uint64_t now = iod_clock_now_ns();
		if (m->mtls && !changed && !wrc && now < resync_ns) {
			svids_step(m, false);
			continue;
		}
		resync_ns = now + (uint64_t)MESH_RESYNC_MS * IOD_NS_PER_MS;
		memset(&e, 0, sizeof(e));
		int rc = iod_mesh_proxy_refresh(m->proxy, &e);
		if (rc && rc != -EAGAIN) {
			IOD_WARN("agent", "mesh: keeping the previous view: %s", e.msg);
			next_server(m);
		}
		svids_step(m, rc == 0);
	}
	return NULL;
}

int iod_agent_mesh_start(struct iod_agent_mesh **out, const struct iod_agent_config *cfg,
                         struct iod_agent_cluster *cluster, struct iod_err *e)
{
	char first[sizeof(((struct iod_mesh_api_source *)0)->server)];
	struct iod_agent_mesh *m = calloc(1, sizeof(*m));
	*out = NULL;
	if (!m)
		return iod_err_set(e, -ENOMEM, "out of memory");
	m->cfg = cfg;
	m->cluster = cluster;
	nth_server(cfg->servers, 0, first, sizeof(first));
	iod_mesh_api_source_init(&m->src, first, cfg->name);
	m->src.creds = cfg->creds;
	m->mtls = cfg->mesh_mtls[0] && cfg->creds;
	m->src.mtls = m->mtls;
	m->src.overlay = cfg->overlay_dev[0] && cfg->netns_subnet[0];
	pthread_mutex_init(&m->mu, NULL);
	struct iod_config_caps caps;
	iod_config_caps_probe(&caps);
	m->rdma_device = caps.rdma;
	if (m->mtls) {
		int rc = iod_api_client_init(&m->svid_cl, cfg->servers, e);
		m->svc_ids = calloc(IOD_MESH_MTLS_IDS_MAX, sizeof(*m->svc_ids));
		if (rc || !m->svc_ids) {
			free(m->svc_ids);
			if (!rc)
				iod_api_client_close(&m->svid_cl);
			pthread_mutex_destroy(&m->mu);
			free(m);
			return rc ? rc : iod_err_set(e, -ENOMEM, "out of memory");
		}
		m->svid_cl_open = true;
		iod_api_client_set_creds(&m->svid_cl, cfg->creds, NULL);
		m->svid_cl.timeout_ms = 3000;
		m->svid_cl.retry_ms = 1000;
	}
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&m->thread, NULL, mesh_main, m)) {
		iod_agent_mesh_stop(m);
		return iod_err_set(e, -EAGAIN, "cannot start the mesh thread");
	}
	m->thread_started = true;
	iod_config_node_on_apply(config_applied, m);
	*out = m;
	return 0;
}

void iod_agent_mesh_stop(struct iod_agent_mesh *m)
{
	if (!m)
		return;
	__atomic_store_n(&m->stop_flag, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&m->mu);
	m->stop = true;
	pthread_cond_signal(&m->cv);
	pthread_mutex_unlock(&m->mu);
	iod_config_node_on_apply(NULL, NULL);
	if (m->thread_started)
		pthread_join(m->thread, NULL);
	pthread_mutex_lock(&m->mu); /* a hook running now sees no proxy */
	struct iod_mesh_proxy *px = m->proxy;
	m->proxy = NULL;
	pthread_mutex_unlock(&m->mu);
	if (px) {
		iod_mesh_proxy_stop(px);
		IOD_INFO("agent", "node %s: mesh proxy stopped", m->cfg->name);
	}
	if (m->svid_cl_open)
		iod_api_client_close(&m->svid_cl);
	free(m->svc_ids);
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->cv);
	free(m);
}
