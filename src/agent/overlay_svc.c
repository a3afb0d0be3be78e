/*
 * overlay_svc.c: service VIPs on the overlay (pure): what the node's
 * virtual switch balances, and the address a replica dials
 * (docs/network.md, "Service VIPs on the overlay").
 *
 * Each Service carries an overlay VIP the deploy chose (src/ctrl/vip.c,
 * Service "vip"). The watcher reads the Services and the Endpoints into the
 * overlay table; this file turns them into the data plane's services
 * (src/flow/dp.c's "svc" pipe: VIP:port -> Maglev pick over the backends
 * that are up -> DNAT, committed in conntrack so a connection stays on its
 * backend) for every service of a tenant the node has. A backend is a
 * replica of the service that is an endpoint of that tenant's network on
 * this node (local, or behind its node's VTEP), up when its Endpoint is
 * healthy: the control plane's health, as the agents report it, decides
 * which backends get new connections. Backends in table order (name
 * order), services in name order: the same inputs give the same config.
 * Separate from overlay.c's networks and endpoints so that the two change
 * apart. It must never do I/O or read the clock.
 */
#include "iod/agent.h"
#include "iod/flow.h"
#include "iod/mesh.h"
#include "iod/net.h"
#include "iod/objects.h"

#include <stdlib.h>
#include <string.h>

/* The protocol of a Service's first port (TCP unless it says udp). */
static uint8_t svc_proto(const json_t *value)
{
	const char *p = json_string_value(
	    json_object_get(json_array_get(json_object_get(value, "ports"), 0), "protocol"));
	return p && !strcmp(p, "udp") ? IOD_NET_PROTO_UDP : IOD_NET_PROTO_TCP;
}

int iod_agent_overlay_table_services(const json_t *services, const json_t *endpoints,
                                     struct iod_agent_overlay_table *t)
{
	size_t i;
	json_t *x;
	int rc = 0;
	t->svcs_n = 0;
	json_array_foreach(json_object_get(services, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *name = NULL,
		           *vip = iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, v, IOD_OBJ_SERVICE_VIP);
		uint32_t ip = 0;
		if (iod_json_get_str(x, "name", &name) || strlen(name) >= IOD_NAME_MAX || !vip ||
		    iod_net_ipv4_parse(vip, &ip) || !ip)
			continue; /* stored before VIPs, or not written by a deploy */
		if (t->svcs_n == IOD_AGENT_VIPS_MAX) {
			rc = -ENOSPC;
			break;
		}
		struct iod_agent_overlay_svc *s = &t->svcs[t->svcs_n++];
		memset(s, 0, sizeof(*s));
		iod_strlcpy(s->name, name, sizeof(s->name));
		iod_strlcpy(s->tenant, iod_agent_overlay_tenant(v), sizeof(s->tenant));
		s->vip = ip;
		s->port = iod_mesh_api_service_port(v);
		s->proto = svc_proto(v);
		s->l7 = iod_mesh_api_service_l7(v);
	}
	for (uint32_t k = 0; k < t->n; k++) {
		t->eps[k].port = 0;
		t->eps[k].healthy = false;
	}
	struct iod_obj_endpoint o;
	iod_obj_endpoint_init(&o);
	json_array_foreach(json_object_get(endpoints, "items"), i, x)
	{
		const char *name = NULL;
		uint32_t ip = 0;
		if (iod_json_get_str(x, "name", &name))
			continue;
		struct iod_agent_overlay_ep *ep =
		    (struct iod_agent_overlay_ep *)iod_agent_overlay_find(t, name);
		iod_obj_endpoint_free(&o);
		/* through from_json: older writers' shapes ("address", "health") too */
		if (!ep || iod_obj_endpoint_from_json(json_object_get(x, "value"), &o, NULL) ||
		    strcmp(o.service, ep->service) || !o.port)
			continue;
		/* an Endpoint written before the replica moved or got its own
		 * address is not where the replica answers now */
		if (iod_net_ipv4_parse(o.addr, &ip) || ip != ep->ip)
			continue;
		ep->port = o.port;
		ep->healthy = o.healthy;
	}
	iod_obj_endpoint_free(&o);
	return rc;
}

/* Whether ip is an endpoint of network n (a backend the route pipe reaches). */
static bool routed(const struct iod_flow_dp_network *n, uint32_t ip)
{
	for (uint32_t i = 0; i < n->endpoints_n; i++)
		if (n->endpoints[i].ip == ip)
			return true;
	return false;
}

int iod_agent_overlay_dp_services(const struct iod_agent_overlay_table *t,
                                  struct iod_flow_dp_config *c, struct iod_err *e)
{
	c->services_n = 0;
	for (uint32_t s = 0; s < t->svcs_n; s++) {
		const struct iod_agent_overlay_svc *sv = &t->svcs[s];
		int32_t net = -1;
		for (uint32_t n = 0; n < c->networks_n && net < 0; n++)
			if (!c->networks[n].local_only && !strcmp(c->networks[n].name, sv->tenant))
				net = (int32_t)n;
		if (net < 0)
			continue; /* no replica of its tenant here: nobody here may dial it */
		if (c->services_n == IOD_DP_SERVICES_MAX)
			return iod_err_set(
			    e, -ENOSPC,
			    "overlay: more than %d services with a VIP in this node's "
			    "tenants: %s and the rest have no VIP here",
			    IOD_DP_SERVICES_MAX, sv->name);
		if (sv->l7 && t->proxy) {
			/* l7: the VIP is the node's host stack's, where the mesh
			 * proxy listens on it (src/agent/meshhost.c); the route
			 * sends it to the host port, and the proxy's replies, from
			 * the VIP, are this network's (the source endpoint) */
			struct iod_flow_dp_network *n = &c->networks[net];
			if (n->endpoints_n == IOD_DP_ENDPOINTS_MAX)
				return iod_err_set(e, -ENOSPC,
				                   "overlay: no room for l7 service %s's VIP in "
				                   "network %s",
				                   sv->name, n->name);
			struct iod_flow_dp_endpoint *ep = &n->endpoints[n->endpoints_n++];
			memset(ep, 0, sizeof(*ep));
			ep->ip = sv->vip;
			ep->local = true;
			iod_agent_overlay_mac(n->gateway, false, ep->mac); /* the host stack's */
			continue;
		}
		struct iod_flow_dp_service *d = &c->services[c->services_n++];
		memset(d, 0, sizeof(*d));
		d->network = net;
		iod_strlcpy(d->lb.name, sv->name, sizeof(d->lb.name));
		d->lb.vip = sv->vip;
		d->lb.port = sv->port;
		d->lb.proto = sv->proto;
		for (uint32_t i = 0; i < t->n && d->lb.backends_n < IOD_NET_LB_BACKENDS_MAX; i++) {
			const struct iod_agent_overlay_ep *ep = &t->eps[i];
			if (strcmp(ep->service, sv->name) || !ep->ip || !ep->port ||
			    !routed(&c->networks[net], ep->ip))
				continue;
			struct iod_net_lb_backend *b = &d->lb.backends[d->lb.backends_n++];
			b->ip = ep->ip;
			b->port = ep->port;
			b->up = ep->healthy;
			b->weight = 1;
		}
	}
	return 0;
}

/* IOD_SVC_<NAME>_ADDR of a service with a VIP: that VIP:port. */
static int vip_var(void *ctx, const char *var, size_t kl, const char *val, char *out, size_t len)
{
	const struct iod_agent_overlay_table *t = ctx;
	char name[IOD_NAME_MAX + 16];
	(void)val;
	for (uint32_t s = 0; s < t->svcs_n; s++)
		if (!iod_mesh_env_name(t->svcs[s].name, name, sizeof(name)) && strlen(name) == kl &&
		    !strncmp(var, name, kl)) {
			iod_mesh_addr_format(t->svcs[s].vip, t->svcs[s].port, out, len);
			return 1;
		}
	return 0;
}

int iod_agent_env_overlay_vips(struct iod_agent_replica *r, const struct iod_agent_overlay_table *t)
{
	return iod_agent_env_rewrite(r, vip_var, (void *)t);
}
