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
#include "iod/mesh_proxy.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MESH_REFRESH_MS 200 /* poll period when the control plane's watch fails */
#define MESH_RESYNC_MS 5000 /* full re-read even without pushes (lost-watch fallback) */
#define MESH_RETRY_MS 500   /* between failed proxy starts (API not answering) */

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
};

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

static void *mesh_main(void *arg)
{
	struct iod_agent_mesh *m = arg;
	const struct iod_agent_config *cfg = m->cfg;
	struct iod_mesh_proxy_opts o = {.workers = cfg->mesh_workers ? cfg->mesh_workers : 1,
	                                .admin_addr = cfg->mesh_admin[0] ? cfg->mesh_admin : NULL,
	                                .seed = iod_hash_str(cfg->name)};
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
		if (!iod_mesh_proxy_start(&m->proxy, &o, &m->src.src, &e))
			break;
		m->proxy = NULL;
		if (!warned)
			IOD_WARN("agent", "node %s: mesh proxy not started yet: %s (retrying)",
			         cfg->name, e.msg);
		warned = true;
		if (e.code != -EADDRINUSE && e.code != -EACCES)
			next_server(m);
		if (wait_stop(m, MESH_RETRY_MS))
			return NULL;
	}
	IOD_INFO("agent", "node %s: mesh proxy up (view from %s%s%s)", cfg->name, m->src.server,
	         o.admin_addr ? ", admin http://" : "", o.admin_addr ? o.admin_addr : "");
	for (;;) {
		memset(&e, 0, sizeof(e));
		if (iod_mesh_proxy_wait(m->proxy, MESH_REFRESH_MS, MESH_RESYNC_MS, &m->stop_flag,
		                        &e))
			IOD_DEBUG("agent", "mesh: watch: %s (polling)", e.msg);
		if (__atomic_load_n(&m->stop_flag, __ATOMIC_RELAXED))
			break;
		memset(&e, 0, sizeof(e));
		int rc = iod_mesh_proxy_refresh(m->proxy, &e);
		if (rc && rc != -EAGAIN) {
			IOD_WARN("agent", "mesh: keeping the previous view: %s", e.msg);
			next_server(m);
		}
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
	pthread_mutex_init(&m->mu, NULL);
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
	if (m->thread_started)
		pthread_join(m->thread, NULL);
	if (m->proxy) {
		iod_mesh_proxy_stop(m->proxy);
		IOD_INFO("agent", "node %s: mesh proxy stopped", m->cfg->name);
	}
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->cv);
	free(m);
}
