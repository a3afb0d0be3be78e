/*
 * overlay.c: the node's virtual switch's configuration (pure): from the
 * cluster state (Node, Service and Replica objects as the watch lists
 * them) to the overlay table, and from the table, this node and its local
 * replicas' ports to the data plane's config (struct iod_flow_dp_config,
 * built by src/flow/dp.c).
 *
 * A tenant is one VXLAN network (its VNI a hash of its name, never 0 and
 * never the probes' IOD_AR_PROBE_VNI). Tenants share the overlay address
 * space (each node hands out its own /24 of it), so the switch classifies
 * a local packet by its source endpoint, not its subnet: a replica reaches
 * only its own tenant's addresses; another tenant's miss the route table
 * and are dropped. The node's host stack (the gateway address: health
 * checks, the agent) is a network of its own that every local replica
 * reaches and is reached from. Deterministic: tenants in name order,
 * endpoints in list order. It must never do I/O or read the clock.
 */
#include "iod/agent.h"
#include "iod/ar.h"
#include "iod/flow.h"
#include "iod/objects.h"

#include <stdlib.h>
#include <string.h>

void iod_agent_overlay_mac(uint32_t ip, bool gateway, uint8_t mac[6])
{
	mac[0] = 0x02;
	mac[1] = gateway ? 0x1e : 0x1d;
	mac[2] = (uint8_t)(ip >> 24);
	mac[3] = (uint8_t)(ip >> 16);
	mac[4] = (uint8_t)(ip >> 8);
	mac[5] = (uint8_t)ip;
}

uint32_t iod_agent_overlay_vni(const char *tenant)
{
	/* 1 .. 0xfffffe: 0 is no VNI, 0xffffff the probes' */
	return 1 + (uint32_t)(iod_hash_str(tenant) % (IOD_AR_PROBE_VNI - 1));
}

const char *iod_agent_overlay_tenant(const json_t *value)
{
	const char *t = NULL;
	if (iod_json_get_str(value, "tenant", &t) &&
	    iod_json_get_str(json_object_get(value, "network"), "tenant", &t))
		t = NULL;
	return t && t[0] && strlen(t) < IOD_NAME_MAX ? t : "default";
}

static uint32_t parse_ip(const char *s)
{
	uint32_t ip = 0;
	return s && !iod_net_ipv4_parse(s, &ip) ? ip : 0;
}

int iod_agent_overlay_table_from_state(const json_t *nodes, const json_t *services,
                                       const json_t *replicas, const json_t *netpolicies,
                                       struct iod_agent_overlay_table *t)
{
	size_t i, j;
	json_t *x, *y;
	int rc = 0;
	t->n = 0;
	json_array_foreach(json_object_get(replicas, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *name = NULL, *node, *svc, *addr, *phase;
		if (iod_json_get_str(x, "name", &name) || strlen(name) >= IOD_NAME_MAX)
			continue;
		node = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
		svc = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_SERVICE);
		addr = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_ADDR);
		phase = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_PHASE);
		if (!node || !node[0] || strlen(node) >= IOD_NAME_MAX || !svc)
			continue;
		if (phase && !strcmp(phase, "lost"))
			continue; /* its node is gone: nothing answers there */
		if (t->n == IOD_AGENT_OVERLAY_EPS_MAX) {
			rc = -ENOSPC;
			break;
		}
		struct iod_agent_overlay_ep *ep = &t->eps[t->n];
		memset(ep, 0, sizeof(*ep));
		iod_strlcpy(ep->name, name, sizeof(ep->name));
		iod_strlcpy(ep->node, node, sizeof(ep->node));
		iod_strlcpy(ep->tenant, "default", sizeof(ep->tenant));
		iod_strlcpy(ep->service, svc, sizeof(ep->service));
		json_array_foreach(json_object_get(services, "items"), j, y)
		{
			const char *sn = NULL;
			if (!iod_json_get_str(y, "name", &sn) && !strcmp(sn, svc)) {
				iod_strlcpy(ep->tenant,
				            iod_agent_overlay_tenant(json_object_get(y, "value")),
				            sizeof(ep->tenant));
				break;
			}
		}
		ep->ip = parse_ip(addr);
		int64_t bw = 0;
		if (!iod_obj_peek_int(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NIC_BW_BPS, &bw) &&
		    bw > 0)
			ep->egress_bps = (uint64_t)bw;
		json_array_foreach(json_object_get(nodes, "items"), j, y)
		{
			const char *nn = NULL;
			if (!iod_json_get_str(y, "name", &nn) && !strcmp(nn, node)) {
				ep->vtep = parse_ip(iod_obj_peek_str(IOD_OBJ_KIND_NODE,
				                                     json_object_get(y, "value"),
				                                     IOD_OBJ_NODE_ADDR));
				break;
			}
		}
		t->n++;
	}
	/* the security groups (sg.c); a bad object is skipped there (the API
	 * refuses them: only a raw write can store one) */
	struct iod_err e = {0};
	if (iod_agent_sg_from_state(netpolicies, t, &e) == -ENOSPC && !rc)
		rc = -ENOSPC;
	return rc;
}

const struct iod_agent_overlay_ep *iod_agent_overlay_find(const struct iod_agent_overlay_table *t,
                                                          const char *name)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (!strcmp(t->eps[i].name, name))
			return &t->eps[i];
	return NULL;
}

/* The network of tenant name in c, added (in name order, before the host
 * network) when new; -1 when full. */
static int network_of(struct iod_flow_dp_config *c, const struct iod_agent_overlay_node *nd,
                      const char *tenant)
{
	for (uint32_t i = 0; i < c->networks_n; i++)
		if (!strcmp(c->networks[i].name, tenant))
			return (int)i;
	if (c->networks_n == IOD_DP_NETWORKS_MAX)
		return -1;
	struct iod_flow_dp_network *n = &c->networks[c->networks_n];
	memset(n, 0, sizeof(*n));
	iod_strlcpy(n->name, tenant, sizeof(n->name));
	n->vni = iod_agent_overlay_vni(tenant);
	n->subnet = nd->overlay_net;
	n->prefix_len = (uint8_t)nd->overlay_prefix;
	n->gateway = nd->gateway;
	iod_agent_overlay_mac(nd->gateway, true, n->gateway_mac);
	n->sg = -1; /* security groups: a later slice (docs/network.md) */
	n->by_endpoint = true;
	/* adaptive routing of its VXLAN to other nodes (ecmp: the hash port,
	 * no core, as before) */
	if (nd->ar_policy != IOD_AR_ECMP) {
		n->ar_enabled = true;
		iod_flow_dp_ar_config_default(&n->ar, (enum iod_ar_policy)nd->ar_policy);
	}
	return (int)c->networks_n++;
}

static int add_ep(struct iod_flow_dp_network *n, uint32_t ip, bool local, uint32_t vtep,
                  uint64_t egress_bps)
{
	if (n->endpoints_n == IOD_DP_ENDPOINTS_MAX)
		return -ENOSPC;
	struct iod_flow_dp_endpoint *ep = &n->endpoints[n->endpoints_n++];
	memset(ep, 0, sizeof(*ep));
	ep->ip = ip;
	ep->local = local;
	ep->vtep_ip = vtep;
	ep->egress_bytes_per_s = egress_bps / 8; /* the scheduler's bits/s, as bytes */
	iod_agent_overlay_mac(ip, false, ep->mac);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct iod_flow_dp_network *)a)->name,
	              ((const struct iod_flow_dp_network *)b)->name);
}

int iod_agent_overlay_dp_config(const struct iod_agent_overlay_node *nd,
                                const struct iod_agent_overlay_table *t,
                                const struct iod_agent_overlay_local *loc, uint32_t nloc,
                                struct iod_flow_dp_config *c, struct iod_err *e)
{
	memset(c, 0, sizeof(*c));
	c->vtep_ip = nd->vtep_ip;
	memcpy(c->vtep_mac, nd->vtep_mac, 6);
	memcpy(c->underlay_gw_mac, nd->underlay_gw_mac, 6);
	c->udp_csum = false; /* RFC 7348: zero outer UDP checksum over IPv4 */
	c->ct_sessions = IOD_AGENT_OVERLAY_CT_SESSIONS;
	/* tenants first, in name order (the indexes are the conntrack zones) */
	for (uint32_t i = 0; i < nloc; i++) {
		const struct iod_agent_overlay_ep *ep = iod_agent_overlay_find(t, loc[i].name);
		if (ep && network_of(c, nd, ep->tenant) < 0)
			return iod_err_set(e, -ENOSPC, "overlay: more than %d tenants on node %s",
			                   IOD_DP_NETWORKS_MAX - 1, nd->name);
	}
	qsort(c->networks, c->networks_n, sizeof(c->networks[0]), by_name);
	for (uint32_t i = 0; i < c->networks_n; i++)
		for (uint32_t k = 0; k < i; k++)
			if (c->networks[k].vni == c->networks[i].vni)
				return iod_err_set(
				    e, -EEXIST, "overlay: tenants %s and %s hash to one VNI %u",
				    c->networks[k].name, c->networks[i].name, c->networks[i].vni);
	if (c->networks_n == IOD_DP_NETWORKS_MAX)
		return iod_err_set(e, -ENOSPC, "overlay: no room for the host network");
	struct iod_flow_dp_network *host = &c->networks[c->networks_n++];
	memset(host, 0, sizeof(*host));
	iod_strlcpy(host->name, "host", sizeof(host->name));
	host->subnet = nd->overlay_net;
	host->prefix_len = (uint8_t)nd->overlay_prefix;
	host->gateway = nd->gateway;
	iod_agent_overlay_mac(nd->gateway, true, host->gateway_mac);
	host->sg = -1;
	host->local_only = true;
	int rc = add_ep(host, nd->gateway, true, 0, 0);
	/* local endpoints: in their tenant's network and the host's */
	for (uint32_t i = 0; i < nloc && !rc; i++) {
		const struct iod_agent_overlay_ep *ep = iod_agent_overlay_find(t, loc[i].name);
		if (!ep || !loc[i].ip)
			continue; /* its tenant not known yet: the next watch round */
		int n = network_of(c, nd, ep->tenant);
		IOD_ASSERT(n >= 0 && n < (int)c->networks_n - 1);
		/* its egress meter: one per address (the pipeline's "egress"
		 * pipe matches the source, whichever network it sends into) */
		rc = add_ep(&c->networks[n], loc[i].ip, true, 0, ep->egress_bps);
		if (!rc)
			rc = add_ep(host, loc[i].ip, true, 0, ep->egress_bps);
	}
	/* remote endpoints of the tenants this node has: behind their VTEP */
	for (uint32_t i = 0; i < t->n && !rc; i++) {
		const struct iod_agent_overlay_ep *ep = &t->eps[i];
		if (!strcmp(ep->node, nd->name) || !ep->ip || !ep->vtep || ep->vtep == nd->vtep_ip)
			continue;
		for (uint32_t n = 0; n + 1 < c->networks_n; n++)
			if (!strcmp(c->networks[n].name, ep->tenant))
				rc = add_ep(&c->networks[n], ep->ip, false, ep->vtep, 0);
	}
	if (rc)
		return iod_err_set(e, rc, "overlay: more than %d endpoints in one network",
		                   IOD_DP_ENDPOINTS_MAX);
	return iod_agent_sg_compile(nd, t, loc, nloc, c, e);
}

bool iod_agent_list_apply_events(json_t *list, const json_t *events, const char *kind)
{
	json_t *items = json_object_get(list, "items");
	if (!json_is_array(items))
		return false;
	size_t i;
	json_t *ev;
	json_array_foreach(events, i, ev)
	{
		const char *k = "", *type = "", *name = NULL;
		iod_json_get_str(ev, "kind", &k);
		if (strcmp(k, kind))
			continue;
		iod_json_get_str(ev, "type", &type);
		if (iod_json_get_str(ev, "name", &name))
			return false;
		json_t *value = json_object_get(ev, "value");
		bool put = !strcmp(type, "put");
		if ((put && !json_is_object(value)) || (!put && strcmp(type, "delete")))
			return false;
		size_t j, at = SIZE_MAX;
		json_t *x;
		json_array_foreach(items, j, x)
		{
			const char *xn = NULL;
			if (!iod_json_get_str(x, "name", &xn) && !strcmp(xn, name)) {
				at = j;
				break;
			}
		}
		if (!put) {
			if (at != SIZE_MAX)
				json_array_remove(items, at);
			continue;
		}
		if (at != SIZE_MAX) {
			if (json_object_set(json_array_get(items, at), "value", value))
				return false;
		} else if (json_array_append_new(
		               items, json_pack("{s:s, s:O}", "name", name, "value", value))) {
			return false;
		}
	}
	return true;
}
