/*
 * cluster.c: the agent's link to the control plane (shell).
 *
 * Two threads, each with its own blocking API client, so that neither a
 * long-poll nor a slow write ever stalls the agent loop:
 *   - the watcher long-polls /v1/watch; after every change it lists nodes,
 *     services, replicas and netpolicies, computes this node's desired
 *     replicas (desired.c) and hands them to the agent loop (mailbox +
 *     eventfd), and the overlay table and security groups to the virtual
 *     switch (a round that changed only netpolicies or endpoints lists those
 *     alone). If
 *     this node is the first live node by name it is also the rescheduler:
 *     it applies src/ctrl/reschedule.c's plan with compare-and-swap puts.
 *   - the writer registers the node (a lease of lease_ttl_ms and a Node
 *     object bound to it), renews the lease every third of its TTL (a lease
 *     that expired means this node was declared lost: register again), and
 *     writes what the agent loop reports: the Replica's phase, readiness,
 *     reason and restarts, and its Endpoint (address, healthy).
 * Reports are coalesced per replica (the latest wins), so the queue is
 * bounded by the replica limit. A replica that is no longer placed on this
 * node is never written: a node that comes back does not overwrite the
 * replica's new home.
 */
#include "internal.h"
#include "iod/ckpt.h"
#include "iod/config.h"
#include "iod/ctrl.h"
#include "iod/objects.h"

#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct report {
	bool used;                   /* slot holds a pending report */
	struct iod_agent_action act; /* what to publish */
	char service[IOD_NAME_MAX];  /* replica's service */
	uint16_t port;               /* replica's port */
	char addr[IOD_ADDR_MAX];     /* its own address (netns), "" = the node's */
	uint32_t uid;                /* the uid its sandbox runs it as (0 = none of its own) */
};

struct iod_agent_cluster {
	const struct iod_agent_config *cfg; /* settings (outlive us) */
	int wake_fd;                        /* eventfd the agent loop polls */
	pthread_t watcher, writer;          /* the two threads */
	bool watcher_started, writer_started;
	pthread_mutex_t mu; /* guards everything below */
	pthread_cond_t cv;  /* writer: reports or stop */
	bool stop;          /* threads exit */
	/* mailbox to the agent loop */
	struct iod_agent_replica *desired; /* IOD_AGENT_REPLICAS_MAX */
	uint32_t desired_n;
	bool desired_new; /* not yet taken */
	bool resync;      /* registered (again): report everything */
	/* from the agent loop */
	struct report *reports;                  /* IOD_AGENT_REPLICAS_MAX, coalesced by name */
	uint64_t lease_id;                       /* current lease, 0 = not registered */
	char addr[IOD_ADDR_MAX];                 /* this node's address for endpoints */
	struct iod_agent_seccomp_store *seccomp; /* services' own filters go here */
	struct iod_agent_secrets *secrets;       /* secret values of our replicas */
	struct iod_agent_vswitch *vswitch;       /* overlay: gets the table; NULL = none */
	struct iod_ckpt_peer *ckpt_peer;         /* the node's checkpoint chunk server */
	/* relays to chunk servers from the replicas' gateway (watcher only) */
	struct iod_ckpt_relay *relays[IOD_CKPT_PEERS_MAX + 1];
	uint32_t relays_n;
	char relay_gw[20];  /* the gateway address; "" = replicas reach the servers */
	bool relay_gw_done; /* relay_gw worked out */
};

/*
 * The node's checkpoint chunk server (docs/storage.md, "Peers run by the
 * agents"): other nodes' stateful replicas keep their copies here, one
 * namespace (directory) per replica under <data dir>/ckpt-peer, on the
 * node's own address. On a loopback address (`iod up`: every node on one
 * host) it is plain HTTP; on any other it is mutual TLS with the node's
 * certificate (a client needs one from the cluster CA), and without node
 * credentials there is none (no listener beyond loopback without
 * authentication and TLS). Failing to start it only warns: the node then
 * holds no copies for others.
 */
static void ckpt_peer_start(struct iod_agent_cluster *c)
{
	char dir[IOD_AGENT_PATH_MAX + 16], listen[IOD_ADDR_MAX + 8];
	struct iod_err e = {0};
	bool loopback = !strncmp(c->addr, "127.", 4);
	if (!loopback && !c->cfg->creds) {
		IOD_INFO("agent",
		         "no checkpoint chunk server: node address %s is not a loopback one, "
		         "and the node has no certificate for its mTLS (docs/storage.md)",
		         c->addr);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/ckpt-peer", c->cfg->data_dir);
	snprintf(listen, sizeof(listen), "%s:0", c->addr);
	if (iod_ckpt_peer_start_tls(listen, dir, loopback ? NULL : c->cfg->creds, &c->ckpt_peer,
	                            &e))
		IOD_WARN("agent", "no checkpoint chunk server: %s", e.msg);
	else
		IOD_INFO("agent", "checkpoint chunk server on %s (%s) over %s",
		         iod_ckpt_peer_addr(c->ckpt_peer), loopback ? "HTTP, loopback" : "mTLS",
		         dir);
}

/* desired.c hands services' own seccomp profiles here (watcher thread). */
static int add_profile(void *ctx, const char *profile, uint64_t caps, uint32_t *id, char *why,
                       size_t len)
{
	struct iod_agent_cluster *c = ctx;
	struct iod_err e = {0};
	if (!c->seccomp) {
		snprintf(why, len, "this agent compiles no seccomp filters");
		return -ENOTSUP;
	}
	int rc = iod_agent_seccomp_store_add(c->seccomp, profile, strlen(profile), caps, id, &e);
	if (rc)
		snprintf(why, len, "%s", e.msg);
	return rc;
}

static void wake_agent(struct iod_agent_cluster *c)
{
	uint64_t one = 1;
	(void)!write(c->wake_fd, &one, sizeof(one));
}

static int request(struct iod_api_client *cl, const char *method, const char *path,
                   const json_t *body, struct iod_api_response *r, struct iod_err *e)
{
	char *text = body ? iod_json_string(body, true) : NULL;
	int rc = iod_api_request(cl, method, path, text ? "application/json" : NULL, text,
	                         text ? strlen(text) : 0, r, e);
	free(text);
	return rc;
}

/* ---- registration and lease (writer) -------------------------------------------- */

static int register_node(struct iod_agent_cluster *c, struct iod_api_client *cl)
{
	const struct iod_agent_config *cfg = c->cfg;
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	char path[IOD_NAME_MAX + 32];
	uint64_t id = 0;
	/* a node lease: from the pool a lease flood cannot take */
	json_t *b = json_pack("{s:I, s:b}", "ttl_ms", (json_int_t)cfg->lease_ttl_ms, "node", 1);
	int rc = request(cl, "POST", "/v1/leases", b, &r, &e);
	json_decref(b);
	if (rc || r.status != 200 || iod_json_get_u64(r.json, "lease", &id)) {
		IOD_WARN("agent", "registering node %s: lease: %s", cfg->name,
		         rc ? e.msg : iod_api_error_text(&r));
		iod_api_response_free(&r);
		return rc ? rc : -EIO;
	}
	iod_api_response_free(&r);
	struct iod_obj_node o;
	iod_obj_node_init(&o);
	iod_obj_node_set_str(&o, IOD_OBJ_NODE_ADDR, c->addr);
	if (cfg->mesh && cfg->mesh_mtls[0] && cfg->creds) /* other proxies reach ours here */
		iod_obj_node_set_str(&o, IOD_OBJ_NODE_MESH_MTLS, cfg->mesh_mtls);
	if (c->ckpt_peer) /* other nodes' replicas copy their checkpoints here */
		iod_obj_node_set_str(&o, IOD_OBJ_NODE_CKPT_PEER, iod_ckpt_peer_addr(c->ckpt_peer));
	/* its telemetry listener, with the scheme its readers must speak
	 * (`iod dp dump --node`, `iod metrics --node`): none beyond loopback
	 * without the node's credentials (telemetry.c serves none there) */
	char tel_url[IOD_ADDR_MAX];
	if (cfg->telemetry_addr[0] && cfg->telemetry_interval_ns &&
	    (cfg->creds || !iod_agent_telemetry_tls(cfg->telemetry_addr)) &&
	    !iod_agent_telemetry_url(cfg->telemetry_addr, tel_url, sizeof(tel_url)))
		iod_obj_node_set_str(&o, IOD_OBJ_NODE_TELEMETRY, tel_url);
	/* on the overlay: the subnet the control plane's IPAM addresses this
	 * node's replicas from (src/ctrl/ipam.c) */
	if (cfg->overlay_dev[0] && cfg->netns_subnet[0])
		iod_obj_node_set_str(&o, IOD_OBJ_NODE_SUBNET, cfg->netns_subnet);
	iod_obj_node_set_json(&o, IOD_OBJ_NODE_GPUS, json_integer(cfg->gpus));
	iod_obj_node_set_int(&o, IOD_OBJ_NODE_CPUS, cfg->cpus);
	iod_obj_node_set_str(&o, IOD_OBJ_NODE_MODEL, cfg->model[0] ? cfg->model : "host");
	iod_obj_node_set_int(&o, IOD_OBJ_NODE_AGENT_PID, getpid());
	iod_obj_node_set_int(&o, IOD_OBJ_NODE_REGISTERED_MS,
	                     (int64_t)(iod_time_unix_ns() / IOD_NS_PER_MS));
	if (cfg->topology)
		iod_obj_node_set_json(&o, IOD_OBJ_NODE_TOPOLOGY, json_incref(cfg->topology));
	json_t *node = iod_obj_node_to_json(&o);
	iod_obj_node_free(&o);
	snprintf(path, sizeof(path), "/v1/nodes/%s?lease=%llu", cfg->name, (unsigned long long)id);
	rc = request(cl, "PUT", path, node, &r, &e);
	json_decref(node);
	if (rc || r.status != 200) {
		IOD_WARN("agent", "registering node %s: %s", cfg->name,
		         rc ? e.msg : iod_api_error_text(&r));
		iod_api_response_free(&r);
		return rc ? rc : -EIO;
	}
	iod_api_response_free(&r);
	pthread_mutex_lock(&c->mu);
	c->lease_id = id;
	c->resync = true;
	pthread_mutex_unlock(&c->mu);
	wake_agent(c);
	IOD_INFO("agent", "node %s registered (lease %llu, ttl %llu ms, %u GPUs)", cfg->name,
	         (unsigned long long)id, (unsigned long long)cfg->lease_ttl_ms, cfg->gpus);
	return 0;
}

static void renew(struct iod_agent_cluster *c, struct iod_api_client *cl)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	char path[64];
	uint64_t id;
	pthread_mutex_lock(&c->mu);
	id = c->lease_id;
	pthread_mutex_unlock(&c->mu);
	if (!id) {
		register_node(c, cl);
		return;
	}
	snprintf(path, sizeof(path), "/v1/leases/%llu", (unsigned long long)id);
	int rc = request(cl, "PUT", path, NULL, &r, &e);
	if (!rc && r.status == 404) {
		IOD_WARN("agent",
		         "node %s: lease %llu expired (this node was declared lost): "
		         "registering again",
		         c->cfg->name, (unsigned long long)id);
		pthread_mutex_lock(&c->mu);
		c->lease_id = 0;
		pthread_mutex_unlock(&c->mu);
		register_node(c, cl);
	} else if (rc) {
		IOD_WARN("agent", "node %s: renewing lease: %s", c->cfg->name, e.msg);
	}
	iod_api_response_free(&r);
}

/* ---- reports (writer) --------------------------------------------------------- */

/* The endpoint: where the replica answers and whether it should get traffic.
 * Written before the Replica: it is what load balancers act on. */
static void write_endpoint(struct iod_agent_cluster *c, struct iod_api_client *cl,
                           const struct report *rp)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	char path[IOD_NAME_MAX + 64];
	const struct iod_agent_action *a = &rp->act;
	struct iod_obj_endpoint o;
	/* a replica in its own netns answers at its own address */
	const char *host = rp->addr[0] ? rp->addr : c->addr;
	iod_obj_endpoint_init(&o);
	iod_obj_endpoint_set_str(&o, IOD_OBJ_ENDPOINT_REPLICA, a->name);
	iod_obj_endpoint_set_str(&o, IOD_OBJ_ENDPOINT_SERVICE, rp->service);
	iod_obj_endpoint_set_str(&o, IOD_OBJ_ENDPOINT_NODE, c->cfg->name);
	iod_obj_endpoint_set_str(&o, IOD_OBJ_ENDPOINT_ADDR, host);
	iod_obj_endpoint_set_int(&o, IOD_OBJ_ENDPOINT_PORT, rp->port);
	iod_obj_endpoint_set_int(&o, IOD_OBJ_ENDPOINT_HEALTHY, a->ready);
	iod_obj_endpoint_set_str(&o, IOD_OBJ_ENDPOINT_PHASE, iod_agent_phase_name(a->phase));
	/* the uid that owns its connections: how the mesh knows who calls */
	if (rp->uid)
		iod_obj_endpoint_set_int(&o, IOD_OBJ_ENDPOINT_UID, rp->uid);
	json_t *ep = iod_obj_endpoint_to_json(&o);
	iod_obj_endpoint_free(&o);
	snprintf(path, sizeof(path), "/v1/endpoints/%s", a->name);
	if (request(cl, "PUT", path, ep, &r, &e))
		IOD_WARN("agent", "%s: endpoint: %s", a->name, e.msg);
	iod_api_response_free(&r);
	json_decref(ep);
}

static void write_report(struct iod_agent_cluster *c, struct iod_api_client *cl,
                         const struct report *rp)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	char path[IOD_NAME_MAX + 64];
	const struct iod_agent_action *a = &rp->act;

	for (int attempt = 0; attempt < 3; attempt++) {
		/* the replica as it is now: skip it when it is not ours any more */
		snprintf(path, sizeof(path), "/v1/replicas/%s", a->name);
		if (request(cl, "GET", path, NULL, &r, &e) || r.status != 200) {
			iod_api_response_free(&r);
			return; /* deleted (undeployed) or unreachable: nothing to update */
		}
		struct iod_obj_replica ob, *o = &ob;
		uint64_t rev = 0;
		iod_obj_replica_from_json(json_object_get(r.json, "value"), o, NULL);
		iod_json_get_u64(r.json, "rev", &rev);
		iod_api_response_free(&r);
		if (strcmp(o->node, c->cfg->name)) {
			iod_obj_replica_free(o);
			return;
		}
		if (attempt == 0)
			write_endpoint(c, cl, rp);
		iod_obj_replica_set_str(o, IOD_OBJ_REPLICA_PHASE, iod_agent_phase_name(a->phase));
		iod_obj_replica_set_int(o, IOD_OBJ_REPLICA_READY, a->ready);
		iod_obj_replica_set_str(o, IOD_OBJ_REPLICA_REASON, a->reason);
		iod_obj_replica_set_int(o, IOD_OBJ_REPLICA_RESTARTS, a->restarts);
		iod_obj_replica_set_int(o, IOD_OBJ_REPLICA_PORT, rp->port);
		if (rp->addr[0]) /* peers' IOD_PEERS / IOD_DEP_* (desired.c) */
			iod_obj_replica_set_str(o, IOD_OBJ_REPLICA_ADDR, rp->addr);
		else
			iod_obj_replica_clear(o, IOD_OBJ_REPLICA_ADDR);
		iod_obj_replica_set_int(o, IOD_OBJ_REPLICA_UPDATED_MS,
		                        (int64_t)(iod_time_unix_ns() / IOD_NS_PER_MS));
		iod_obj_replica_clear(o, IOD_OBJ_REPLICA_LOST_MS);
		json_t *nv = iod_obj_replica_to_json(o);
		iod_obj_replica_free(o);
		snprintf(path, sizeof(path), "/v1/replicas/%s?prev_rev=%llu", a->name,
		         (unsigned long long)rev);
		int rc = request(cl, "PUT", path, nv, &r, &e);
		json_decref(nv);
		int status = r.status;
		iod_api_response_free(&r);
		if (rc) {
			IOD_WARN("agent", "%s: reporting phase: %s", a->name, e.msg);
			return;
		}
		if (status == 409)
			continue; /* changed under us: read again */
		break;
	}
}

/* The node certificate's rotation (certs.c): when it is due, and when to
 * try again after a failure. */
struct cert_clock {
	uint64_t not_before_s, not_after_s; /* the current certificate's validity */
	uint64_t retry_ms;                  /* monotonic: no attempt before this */
	bool known;                         /* validity read */
	bool server_auth;                   /* it carries serverAuth (renew at once if not) */
};

/* Renew the node's certificate at two thirds of its life, in place. */
static void cert_check(struct iod_agent_cluster *c, struct iod_api_client *cl, struct cert_clock *k)
{
	struct iod_err e = {0};
	uint64_t now_s = iod_time_unix_ns() / IOD_NS_PER_S;
	if (!c->cfg->creds || !c->cfg->cert_path[0] ||
	    (iod_clock_now_ns() / IOD_NS_PER_MS) < k->retry_ms)
		return;
	if (!k->known) {
		if (iod_agent_cert_validity(c->cfg, &k->not_before_s, &k->not_after_s,
		                            &k->server_auth, &e)) {
			IOD_WARN("agent", "node certificate: %s", e.msg);
			k->retry_ms = (iod_clock_now_ns() / IOD_NS_PER_MS) + 5000;
			return;
		}
		k->known = true;
	}
	/* a node certificate from before serverAuth cannot serve TLS to new peers */
	if (k->server_auth && !iod_sec_cert_renew_due(k->not_before_s, k->not_after_s, now_s))
		return;
	if (!k->server_auth)
		IOD_INFO("agent",
		         "node %s: its certificate has no serverAuth usage (issued by an older "
		         "iod); renewing it now",
		         c->cfg->name);
	if (iod_agent_cert_renew(c->cfg, cl, &e)) {
		IOD_WARN("agent", "node %s: renewing its certificate (expires in %llds): %s",
		         c->cfg->name, (long long)k->not_after_s - (long long)now_s, e.msg);
		k->retry_ms = (iod_clock_now_ns() / IOD_NS_PER_MS) + 2000;
		return;
	}
	k->known = false;
	if (!iod_agent_cert_validity(c->cfg, &k->not_before_s, &k->not_after_s, &k->server_auth,
	                             &e))
		k->known = true;
	IOD_INFO("agent", "node %s: certificate renewed (valid until %llu, %llu rotations)",
	         c->cfg->name, (unsigned long long)k->not_after_s,
	         (unsigned long long)iod_sec_tls_creds_rotations(c->cfg->creds));
}

static void *writer_main(void *arg)
{
	struct iod_agent_cluster *c = arg;
	struct iod_api_client cl;
	struct iod_err e = {0};
	struct report *batch = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*batch));
	uint64_t period = IOD_MAX(c->cfg->lease_ttl_ms / 3, 1), next_renew = 0;
	struct cert_clock cert = {0};

	if (!batch || iod_api_client_init(&cl, c->cfg->servers, &e)) {
		IOD_ERROR("agent", "control plane client: %s", e.msg);
		free(batch);
		return NULL;
	}
	iod_api_client_set_creds(&cl, c->cfg->creds, NULL);
	cl.timeout_ms = (uint32_t)IOD_MAX(period, 100);
	cl.retry_ms = (uint32_t)IOD_MAX(period, 200);
	while (register_node(c, &cl)) {
		pthread_mutex_lock(&c->mu);
		bool stop = c->stop;
		pthread_mutex_unlock(&c->mu);
		if (stop)
			goto out;
		usleep(200000);
	}
	next_renew = (iod_clock_now_ns() / IOD_NS_PER_MS) + period;
	for (;;) {
		uint32_t n = 0;
		pthread_mutex_lock(&c->mu);
		while (!c->stop) {
			bool any = false;
			for (uint32_t i = 0; i < IOD_AGENT_REPLICAS_MAX && !any; i++)
				any = c->reports[i].used;
			if (any || (iod_clock_now_ns() / IOD_NS_PER_MS) >= next_renew)
				break;
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			uint64_t wait = next_renew - (iod_clock_now_ns() / IOD_NS_PER_MS);
			ts.tv_sec += (time_t)(wait / 1000);
			ts.tv_nsec += (long)(wait % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&c->cv, &c->mu, &ts);
		}
		bool stop = c->stop;
		for (uint32_t i = 0; i < IOD_AGENT_REPLICAS_MAX; i++)
			if (c->reports[i].used) {
				batch[n++] = c->reports[i];
				c->reports[i].used = false;
			}
		pthread_mutex_unlock(&c->mu);
		for (uint32_t i = 0; i < n; i++)
			write_report(c, &cl, &batch[i]);
		if (stop) {
			/* leave cleanly: the node goes, its replicas are rescheduled */
			struct iod_api_response r = {0};
			char path[64];
			pthread_mutex_lock(&c->mu);
			uint64_t id = c->lease_id;
			pthread_mutex_unlock(&c->mu);
			snprintf(path, sizeof(path), "/v1/leases/%llu", (unsigned long long)id);
			if (id && request(&cl, "DELETE", path, NULL, &r, &e))
				IOD_WARN("agent", "revoking lease: %s", e.msg);
			iod_api_response_free(&r);
			break;
		}
		if ((iod_clock_now_ns() / IOD_NS_PER_MS) >= next_renew) {
			renew(c, &cl);
			next_renew = (iod_clock_now_ns() / IOD_NS_PER_MS) + period;
			cert_check(c, &cl, &cert);
		}
	}
out:
	iod_api_client_close(&cl);
	free(batch);
	return NULL;
}

/* ---- watch, desired state, rescheduling (watcher) ----------------------------------- */

static json_t *list(struct iod_api_client *cl, const char *kind)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	char path[64];
	snprintf(path, sizeof(path), "/v1/%s", kind);
	if (iod_api_request(cl, "GET", path, NULL, NULL, 0, &r, &e) || r.status != 200 || !r.json) {
		iod_api_response_free(&r);
		return NULL;
	}
	json_t *j = json_incref(r.json);
	iod_api_response_free(&r);
	return j;
}

/* One of our replicas marked lost while we run it (we were away): report again. */
static bool marked_lost(const json_t *replicas, const char *me)
{
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(replicas, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *node = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
		const char *phase =
		    iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_PHASE);
		if (node && phase && !strcmp(node, me) && !strcmp(phase, "lost"))
			return true;
	}
	return false;
}

static bool first_live_node(const json_t *nodes, const char *me)
{
	const char *first = NULL;
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(nodes, "items"), i, x)
	{
		const char *n;
		if (!iod_json_get_str(x, "name", &n) && (!first || strcmp(n, first) < 0))
			first = n;
	}
	return first && !strcmp(first, me);
}

static void reschedule(struct iod_agent_cluster *c, struct iod_api_client *cl, const json_t *nodes,
                       const json_t *services, const json_t *replicas)
{
	json_t *unplaced = NULL;
	json_t *w =
	    iod_ctrl_resched_plan(nodes, replicas, services, iod_time_unix_ns() / IOD_NS_PER_MS,
	                          c->cfg->stateful_grace_ms, &unplaced);
	size_t i;
	json_t *x;
	json_array_foreach(w, i, x)
	{
		struct iod_api_response r = {0};
		struct iod_err e = {0};
		const char *name;
		uint64_t prev;
		char path[IOD_NAME_MAX + 64];
		iod_json_get_str(x, "name", &name);
		iod_json_get_u64(x, "prev_rev", &prev);
		snprintf(path, sizeof(path), "/v1/replicas/%s?prev_rev=%llu", name,
		         (unsigned long long)prev);
		if (!request(cl, "PUT", path, json_object_get(x, "value"), &r, &e) &&
		    r.status == 200) {
			const char *reason = "";
			iod_json_get_str(json_object_get(x, "value"), "reason", &reason);
			IOD_INFO("agent", "%s: %s", name, reason);
		}
		iod_api_response_free(&r);
	}
	json_array_foreach(unplaced, i, x)
	{
		const char *name = "", *reason = "", *why = "";
		iod_json_get_str(x, "replica", &name);
		iod_json_get_str(x, "reason", &reason);
		iod_json_get_str(x, "why", &why);
		IOD_DEBUG("agent", "%s: cannot reschedule (%s): %s", name, reason, why);
	}
	json_decref(w);
	json_decref(unplaced);
}

/* One secret's value for replica rep (GET /v1/secret-values/NAME?replica=R). */
static int fetch_secret(struct iod_api_client *cl, const char *rep, const char *name,
                        struct iod_agent_secret_set *set, struct iod_err *e)
{
	struct iod_api_response r = {0};
	char path[2 * IOD_NAME_MAX + 48];
	const char *b64 = NULL;
	snprintf(path, sizeof(path), "/v1/secret-values/%s?replica=%s", name, rep);
	int rc = iod_api_request(cl, "GET", path, NULL, NULL, 0, &r, e);
	if (rc)
		return rc;
	if (r.status != 200 || iod_json_get_str(r.json, "data", &b64)) {
		rc = iod_err_set(e, -EIO, "secret %s: %s (HTTP %d)", name, iod_api_error_text(&r),
		                 r.status);
	} else {
		gnutls_datum_t in = {(unsigned char *)b64, (unsigned)strlen(b64)}, plain = {0};
		rc = gnutls_base64_decode2(&in, &plain) ? -EBADMSG : 0;
		if (!rc)
			rc = iod_agent_secret_set_add(set, name, plain.data, plain.size);
		if (plain.data) {
			memset(plain.data, 0, plain.size);
			gnutls_free(plain.data);
		}
		if (rc)
			iod_err_set(e, rc, "secret %s: %s", name, strerror(-rc));
	}
	if (r.body)
		memset(r.body, 0, r.len);
	iod_api_response_free(&r);
	return rc;
}

/*
 * The values of every secret the desired replicas mount, fetched once per
 * replica (and generation) into the agent's store. A replica whose secrets
 * cannot be had fails alone, with the reason.
 */
static void fetch_secrets(struct iod_agent_cluster *c, struct iod_api_client *cl,
                          struct iod_agent_replica *buf, uint32_t n)
{
	for (uint32_t i = 0; i < n && c->secrets; i++) {
		struct iod_agent_replica *r = &buf[i];
		char key[IOD_NAME_MAX + 24], names[sizeof(r->sandbox.secrets)];
		if (!r->sandbox.secrets[0] || r->fail[0])
			continue;
		snprintf(key, sizeof(key), "%s@%llu", r->name, (unsigned long long)r->generation);
		if (iod_agent_secrets_have(c->secrets, key))
			continue;
		struct iod_agent_secret_set *set = calloc(1, sizeof(*set));
		struct iod_err e = {0};
		int rc = set ? 0 : -ENOMEM;
		snprintf(names, sizeof(names), "%s", r->sandbox.secrets);
		for (char *save = NULL, *t = strtok_r(names, ",", &save); t && !rc;
		     t = strtok_r(NULL, ",", &save))
			rc = fetch_secret(cl, r->name, t, set, &e);
		if (!rc)
			rc = iod_agent_secrets_put(c->secrets, key, set);
		else
			snprintf(r->fail, sizeof(r->fail), "%s",
			         e.msg[0] ? e.msg : "out of memory");
		if (set) {
			iod_agent_secret_set_clear(set);
			free(set);
		}
	}
}

/*
 * Each desired replica's own credentials (docs/storage.md "Replica
 * credentials"): the SVID of its service, issued to this node (svid.c,
 * the same pairs the mesh proxy presents) before the replica starts;
 * sandbox.c copies it into the replica. A replica whose SVID cannot be had
 * starts without credentials of its own, and the reason is logged.
 */
static void fetch_creds(struct iod_agent_cluster *c, struct iod_api_client *cl, const json_t *svcs,
                        struct iod_agent_replica *buf, uint32_t n)
{
	uint64_t now_s = (uint64_t)time(NULL);
	if (!c->cfg->creds || !c->cfg->svid_dir[0])
		return;
	for (uint32_t i = 0; i < n; i++) {
		struct iod_agent_replica *r = &buf[i];
		struct iod_mesh_svc_id id;
		struct iod_err e = {0};
		uint64_t at = 0;
		bool issued = false;
		if (r->fail[0])
			continue;
		const json_t *sv = NULL;
		size_t k;
		json_t *x;
		json_array_foreach(json_object_get(svcs, "items"), k, x)
		{
			const char *name = NULL;
			if (!iod_json_get_str(x, "name", &name) && !strcmp(name, r->service)) {
				sv = json_object_get(x, "value");
				break;
			}
		}
		const char *tenant = sv ? iod_agent_overlay_tenant(sv) : NULL;
		memset(&id, 0, sizeof(id));
		if (iod_strlcpy(id.tenant, tenant && tenant[0] ? tenant : "default",
		                sizeof(id.tenant)) ||
		    iod_strlcpy(id.service, r->service, sizeof(id.service)))
			continue;
		if (iod_agent_svid_ensure(c->cfg, cl, &id, now_s, &at, &issued, &e)) {
			IOD_WARN("agent", "replica %s: no credentials of its own: %s", r->name,
			         e.msg);
			continue;
		}
		snprintf(r->svid_tenant, sizeof(r->svid_tenant), "%s", id.tenant);
		/* a running replica's copy, before it expires (the SVID above
		 * is renewed at two thirds of its life; the copy follows) */
		char dir[IOD_AGENT_PATH_MAX], creds[IOD_AGENT_PATH_MAX + 8];
		bool copied = false;
		if (iod_agent_replica_path(c->cfg->data_dir, r->name, "dir", dir, sizeof(dir)))
			continue;
		snprintf(creds, sizeof(creds), "%s/creds", dir);
		if (iod_agent_svid_refresh_copy(c->cfg->svid_dir, id.tenant, id.service, creds,
		                                now_s, &copied, &e))
			IOD_WARN("agent", "replica %s: refreshing its credentials: %s", r->name,
			         e.msg);
		else if (copied)
			IOD_INFO("agent", "replica %s: its credentials refreshed (%s)", r->name,
			         creds);
	}
}

static const char *env_get(const struct iod_agent_replica *r, const char *name)
{
	size_t nl = strlen(name);
	for (uint32_t i = 0; i < r->envc; i++) {
		const char *v = iod_agent_strv_at(r->env_buf, sizeof(r->env_buf), r->envc, i);
		if (v && !strncmp(v, name, nl) && v[nl] == '=')
			return v + nl + 1;
	}
	return NULL;
}

/* The relay to target (host:port), started on the gateway if need be. */
static const char *relay_to(struct iod_agent_cluster *c, const char *target)
{
	for (uint32_t i = 0; i < c->relays_n; i++)
		if (!strcmp(iod_ckpt_relay_target(c->relays[i]), target))
			return iod_ckpt_relay_addr(c->relays[i]);
	char at[32];
	struct iod_err e = {0};
	if (c->relays_n == IOD_ARRAY_LEN(c->relays))
		return NULL;
	snprintf(at, sizeof(at), "%s:0", c->relay_gw);
	if (iod_ckpt_relay_start(at, target, &c->relays[c->relays_n], &e)) {
		IOD_WARN("agent", "checkpoint relay to %s: %s (retrying)", target, e.msg);
		return NULL;
	}
	IOD_INFO("agent", "checkpoint relay %s -> %s (for replicas on the overlay)",
	         iod_ckpt_relay_addr(c->relays[c->relays_n]), target);
	return iod_ckpt_relay_addr(c->relays[c->relays_n++]);
}

/*
 * Replicas in network namespaces of their own reach the node only at
 * their gateway (docs/network.md), not the chunk servers' underlay
 * addresses: each address in $IOD_CKPT_PEERS / $IOD_CKPT_HERE becomes a
 * relay on the gateway to it (relay.c: the replica's mTLS session end to
 * end). A peer whose relay cannot be had stays as it was.
 */
static void relay_ckpt_peers(struct iod_agent_cluster *c, struct iod_agent_replica *buf, uint32_t n)
{
	if (!c->relay_gw_done) {
		c->relay_gw_done = true;
		struct iod_agent_ipam *m = calloc(1, sizeof(*m));
		struct iod_err e = {0};
		if (m && c->cfg->netns_subnet[0] && c->cfg->creds &&
		    !iod_agent_ipam_init(m, c->cfg->netns_subnet, &e))
			iod_agent_ipv4_format(iod_agent_ipam_gateway(m), c->relay_gw,
			                      sizeof(c->relay_gw));
		free(m);
	}
	if (!c->relay_gw[0])
		return;
	static const char *const names[] = {"IOD_CKPT_PEERS", "IOD_CKPT_HERE"};
	struct iod_ckpt_env_peer *p = calloc(IOD_CKPT_PEERS_MAX, sizeof(*p));
	char *list = malloc(IOD_CKPT_PEERS_MAX * (IOD_CKPT_PEER_ADDR_MAX + IOD_NAME_MAX + 2));
	for (uint32_t i = 0; p && list && i < n; i++) {
		for (int k = 0; k < 2; k++) {
			struct iod_err e = {0};
			uint32_t m = 0;
			const char *v = env_get(&buf[i], names[k]);
			if (!v || iod_ckpt_env_peers_parse(v, p, IOD_CKPT_PEERS_MAX, &m, &e))
				continue;
			for (uint32_t j = 0; j < m; j++) {
				char target[IOD_CKPT_PEER_ADDR_MAX], *ns = strchr(p[j].addr, '/');
				snprintf(target, sizeof(target), "%.*s",
				         ns ? (int)(ns - p[j].addr) : (int)strlen(p[j].addr),
				         p[j].addr);
				const char *via = relay_to(c, target);
				if (!via)
					continue;
				char addr[IOD_CKPT_PEER_ADDR_MAX];
				snprintf(addr, sizeof(addr), "%s%s", via, ns ? ns : "");
				snprintf(p[j].addr, sizeof(p[j].addr), "%s", addr);
			}
			if (!iod_ckpt_env_peers_format(
			        p, m, list,
			        IOD_CKPT_PEERS_MAX * (IOD_CKPT_PEER_ADDR_MAX + IOD_NAME_MAX + 2),
			        &e))
				iod_agent_replica_set_env(&buf[i], names[k], list);
		}
	}
	free(p);
	free(list);
}

/* The last listing the switch's table came from. A watch round that changed
 * only Endpoints (a replica's health) or only NetPolicies lists those alone
 * and recompiles with the rest, so health and policy reach the switch in one
 * request, not a full re-list. */
struct overlay_seen {
	json_t *nodes, *svcs, *reps, *nps, *eps; /* owned; NULL until the first listing */
};

static void seen_put(json_t **slot, json_t *v)
{
	json_decref(*slot);
	*slot = json_incref(v);
}

static void overlay_seen_clear(struct overlay_seen *o)
{
	seen_put(&o->nodes, NULL);
	seen_put(&o->svcs, NULL);
	seen_put(&o->reps, NULL);
	seen_put(&o->nps, NULL);
	seen_put(&o->eps, NULL);
}

/* The overlay table (the VTEP table, the security groups, and the
 * services' VIPs with their endpoints' health) from the last listing, to
 * the switch. */
static void overlay_push(struct iod_agent_vswitch *vsw, const struct overlay_seen *o,
                         const struct iod_agent_config *cfg)
{
	struct iod_agent_overlay_table *ot = calloc(1, sizeof(*ot));
	if (!ot)
		return;
	if (iod_agent_overlay_table_from_state(o->nodes, o->svcs, o->reps, o->nps, ot))
		IOD_WARN("agent",
		         "overlay: more than %d replicas or %d security groups: the rest are not "
		         "reachable over the overlay or not enforced",
		         IOD_AGENT_OVERLAY_EPS_MAX, IOD_AGENT_SGS_MAX);
	if (iod_agent_overlay_table_services(o->svcs, o->eps, ot))
		IOD_WARN("agent", "overlay: more than %d services with a VIP: the rest have none",
		         IOD_AGENT_VIPS_MAX);
	/* l7 VIPs lead to this node's proxy when it hosts one serving VIPs */
	ot->proxy = cfg->mesh && !cfg->mesh_no_vips;
	iod_agent_vswitch_table(vsw, ot);
	free(ot);
}

/* Every event of the round is of kind k (and there is one). */
static bool only_kind(const json_t *events, const char *k)
{
	size_t i;
	json_t *x;
	json_array_foreach(events, i, x)
	{
		const char *xk = "";
		iod_json_get_str(x, "kind", &xk);
		if (strcmp(xk, k))
			return false;
	}
	return json_array_size(events) > 0;
}

static void *watcher_main(void *arg)
{
	struct iod_agent_cluster *c = arg;
	struct iod_api_client cl;
	struct iod_err e = {0};
	struct iod_agent_replica *buf = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*buf));
	uint64_t rev = 0;
	bool relist = true;
	struct overlay_seen seen = {0};

	if (!buf || iod_api_client_init(&cl, c->cfg->servers, &e)) {
		IOD_ERROR("agent", "control plane client: %s", e.msg);
		free(buf);
		return NULL;
	}
	iod_api_client_set_creds(&cl, c->cfg->creds, NULL);
	cl.timeout_ms = 3000;
	cl.retry_ms = 1000;
	for (;;) {
		pthread_mutex_lock(&c->mu);
		bool stop = c->stop;
		pthread_mutex_unlock(&c->mu);
		if (stop)
			break;
		if (relist) {
			/* iod config: apply and acknowledge a new revision (config.h) */
			pthread_mutex_lock(&c->mu);
			uint64_t lease = c->lease_id;
			pthread_mutex_unlock(&c->mu);
			if (iod_config_node_sync(&cl, c->cfg->name, lease, &e) && e.msg[0])
				IOD_DEBUG("agent", "config: %s", e.msg);
			/* replicas first, nodes last: a node list at least as new as the
			 * replica list never shows a live node as gone */
			json_t *reps = list(&cl, "replicas"), *svcs = list(&cl, "services"),
			       *nps = list(&cl, "netpolicies"), *nodes = list(&cl, "nodes");
			uint32_t n = 0;
			if (nodes && svcs && reps && nps) { /* never enforce a part */
				uint64_t r1 = 0, rn = 0;
				iod_json_get_u64(reps, "rev", &r1);
				iod_json_get_u64(nodes, "rev", &rn);
				rev = IOD_MAX(rev, r1);
				struct iod_agent_profile_sink sink = {add_profile, c};
				if (iod_agent_desired_from_state(c->cfg->name, nodes, svcs, reps,
				                                 &sink, buf, IOD_AGENT_REPLICAS_MAX,
				                                 &n, &e))
					IOD_WARN("agent", "desired state: %s", e.msg);
				fetch_secrets(c, &cl, buf, n);
				fetch_creds(c, &cl, svcs, buf, n);
				relay_ckpt_peers(c, buf, n);
				pthread_mutex_lock(&c->mu);
				struct iod_agent_vswitch *vsw = c->vswitch;
				pthread_mutex_unlock(&c->mu);
				if (vsw) { /* the VTEP table: every replica's node and address */
					json_t *eps = list(&cl, "endpoints");
					seen_put(&seen.nodes, nodes);
					seen_put(&seen.svcs, svcs);
					seen_put(&seen.reps, reps);
					seen_put(&seen.nps, nps);
					seen_put(&seen.eps, eps);
					overlay_push(vsw, &seen, c->cfg);
					json_decref(eps);
				}
				pthread_mutex_lock(&c->mu);
				memcpy(c->desired, buf, n * sizeof(*buf));
				c->desired_n = n;
				c->desired_new = true;
				c->resync |= marked_lost(reps, c->cfg->name);
				pthread_mutex_unlock(&c->mu);
				wake_agent(c);
				if (rn >= r1 && first_live_node(nodes, c->cfg->name))
					reschedule(c, &cl, nodes, svcs, reps);
				relist = false;
			} else {
				usleep(100000);
			}
			json_decref(nodes);
			json_decref(svcs);
			json_decref(reps);
			json_decref(nps);
			if (relist)
				continue;
		}
		/* long-poll for anything newer; a timeout re-lists too (stateful grace) */
		struct iod_api_response r = {0};
		char path[96];
		snprintf(path, sizeof(path), "/v1/watch?rev=%llu&timeout_ms=1000",
		         (unsigned long long)rev);
		if (iod_api_request(&cl, "GET", path, NULL, NULL, 0, &r, &e) || !r.json) {
			iod_api_response_free(&r);
			usleep(100000);
			relist = true;
			continue;
		}
		uint64_t next = 0;
		if (r.status == 200 && !iod_json_get_u64(r.json, "rev", &next)) {
			json_t *ev = json_object_get(r.json, "events");
			bool relevant = false, endpoints = false;
			size_t i;
			json_t *x;
			json_array_foreach(ev, i, x)
			{
				const char *k = "", *nm = "";
				iod_json_get_str(x, "kind", &k);
				iod_json_get_str(x, "name", &nm);
				/* our own endpoint writes, and nodes' config acks, change
				 * nothing we decide on */
				relevant |= strcmp(k, "endpoint") != 0 &&
				            !(!strcmp(k, "config") && iod_config_is_ack_name(nm));
				endpoints |= !strcmp(k, "endpoint");
			}
			relist = relevant || json_array_size(ev) == 0;
			rev = next;
			pthread_mutex_lock(&c->mu);
			struct iod_agent_vswitch *vsw = c->vswitch;
			pthread_mutex_unlock(&c->mu);
			/* a replica's health moved: its service's VIP follows
			 * (docs/network.md, "Service VIPs on the overlay") */
			if (!relist && endpoints && vsw && seen.reps) {
				json_t *eps = list(&cl, "endpoints");
				if (eps) {
					seen_put(&seen.eps, eps);
					overlay_push(vsw, &seen, c->cfg);
				} else {
					relist = true;
				}
				json_decref(eps);
			}
			/* only security groups changed: the rest is as last listed, and
			 * the events carry the groups (no listing: the round trip was
			 * part of net.policy_apply) */
			json_t *nps = NULL;
			if (relist && vsw && seen.reps && only_kind(ev, "netpolicy")) {
				nps = seen.nps ? json_deep_copy(seen.nps) : NULL;
				if (!nps || !iod_agent_list_apply_events(nps, ev, "netpolicy")) {
					json_decref(nps);
					nps = list(&cl, "netpolicies");
				}
			}
			if (nps) {
				seen_put(&seen.nps, nps);
				overlay_push(vsw, &seen, c->cfg);
				relist = false;
				json_decref(nps);
			}
		} else {
			relist = true; /* compacted (410) or an error: list again */
			rev = 0;
		}
		iod_api_response_free(&r);
	}
	overlay_seen_clear(&seen);
	iod_api_client_close(&cl);
	free(buf);
	return NULL;
}

/* ---- the agent loop's side ------------------------------------------------------ */

int iod_agent_cluster_start(struct iod_agent_cluster **out, const struct iod_agent_config *cfg,
                            int wake_fd, struct iod_agent_seccomp_store *seccomp,
                            struct iod_agent_secrets *secrets, struct iod_err *e)
{
	struct iod_agent_cluster *c = calloc(1, sizeof(*c));
	if (!c)
		return iod_err_set(e, -ENOMEM, "out of memory");
	c->cfg = cfg;
	c->seccomp = seccomp;
	c->secrets = secrets;
	c->wake_fd = wake_fd;
	snprintf(c->addr, sizeof(c->addr), "%s", cfg->addr[0] ? cfg->addr : "127.0.0.1");
	ckpt_peer_start(c);
	c->desired = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*c->desired));
	c->reports = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*c->reports));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	if (!c->desired || !c->reports) {
		iod_agent_cluster_stop(c);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	/* threads must not take the agent's signals (signalfd in the agent loop) */
	if (pthread_create(&c->writer, NULL, writer_main, c) == 0)
		c->writer_started = true;
	if (pthread_create(&c->watcher, NULL, watcher_main, c) == 0)
		c->watcher_started = true;
	if (!c->writer_started || !c->watcher_started) {
		iod_agent_cluster_stop(c);
		return iod_err_set(e, -EAGAIN, "cannot start the control-plane threads");
	}
	*out = c;
	return 0;
}

bool iod_agent_cluster_take(struct iod_agent_cluster *c, struct iod_agent_replica *out, uint32_t *n,
                            bool *resync)
{
	bool fresh;
	pthread_mutex_lock(&c->mu);
	fresh = c->desired_new;
	if (fresh) {
		memcpy(out, c->desired, c->desired_n * sizeof(*out));
		*n = c->desired_n;
		c->desired_new = false;
	}
	*resync = c->resync;
	c->resync = false;
	pthread_mutex_unlock(&c->mu);
	return fresh;
}

void iod_agent_cluster_report(struct iod_agent_cluster *c, const struct iod_agent_action *a,
                              const char *service, uint16_t port, const char *addr, uint32_t uid)
{
	int free_i = -1, at = -1;
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < IOD_AGENT_REPLICAS_MAX; i++) {
		if (c->reports[i].used && !strcmp(c->reports[i].act.name, a->name)) {
			at = i;
			break;
		}
		if (!c->reports[i].used && free_i < 0)
			free_i = i;
	}
	if (at < 0)
		at = free_i;
	if (at >= 0) { /* at < 0 cannot happen: one slot per replica at most */
		c->reports[at].used = true;
		c->reports[at].act = *a;
		c->reports[at].port = port;
		c->reports[at].uid = uid;
		snprintf(c->reports[at].addr, sizeof(c->reports[at].addr), "%s", addr ? addr : "");
		snprintf(c->reports[at].service, sizeof(c->reports[at].service), "%s", service);
	}
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

void iod_agent_cluster_set_vswitch(struct iod_agent_cluster *c, struct iod_agent_vswitch *v)
{
	pthread_mutex_lock(&c->mu);
	c->vswitch = v;
	pthread_mutex_unlock(&c->mu);
}

bool iod_agent_cluster_registered(struct iod_agent_cluster *c)
{
	pthread_mutex_lock(&c->mu);
	bool r = c->lease_id != 0;
	pthread_mutex_unlock(&c->mu);
	return r;
}

void iod_agent_cluster_stop(struct iod_agent_cluster *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (c->writer_started)
		pthread_join(c->writer, NULL);
	if (c->watcher_started)
		pthread_join(c->watcher, NULL);
	iod_ckpt_peer_stop(c->ckpt_peer);
	for (uint32_t i = 0; i < c->relays_n; i++)
		iod_ckpt_relay_stop(c->relays[i]);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c->desired);
	free(c->reports);
	free(c);
}
