/*
 * dpconfig.c: the YAML file of `iod dp run` (see docs/dataplane.md) into a
 * struct iod_flow_dp_config, with errors that name file:line:col, the
 * object and what to write instead.
 *
 * Parsing only: no pipes are built here, nothing is opened but the file.
 * Every list is bounded by limits.h; the parser is fuzzed
 * (tests/fuzz/fuzz_dpconfig.c).
 */
#include "iod/flow.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct ctx {
	yaml_document_t *doc; /* the loaded document */
	const char *name;     /* file name for messages */
	struct iod_err *e;    /* where errors go */
};

static int fail(struct ctx *x, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct ctx *x, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[IOD_ERR_MSG_MAX - 64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return iod_err_set(x->e, -EINVAL, "%s:%zu:%zu: %s", x->name, n ? n->start_mark.line + 1 : 0,
	                   n ? n->start_mark.column + 1 : 0, msg);
}

static const char *scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Iterate a mapping: key text and value node. */
#define MAP_EACH(x, map, k, v)                                            \
	for (yaml_node_pair_t *p_##k = (map)->data.mapping.pairs.start;   \
	     p_##k < (map)->data.mapping.pairs.top &&                     \
	     ((k) = scalar(yaml_document_get_node((x)->doc, p_##k->key)), \
	     (v) = yaml_document_get_node((x)->doc, p_##k->value), 1);    \
	     p_##k++)

static int need_map(struct ctx *x, const yaml_node_t *n, const char *what)
{
	if (!n || n->type != YAML_MAPPING_NODE)
		return fail(x, n, "%s must be a mapping (key: value lines)", what);
	return 0;
}

static int need_seq(struct ctx *x, const yaml_node_t *n, const char *what)
{
	if (!n || n->type != YAML_SEQUENCE_NODE)
		return fail(x, n, "%s must be a list (lines starting with \"- \")", what);
	return 0;
}

static int get_str(struct ctx *x, const yaml_node_t *v, const char *key, char *out, size_t len)
{
	const char *s = scalar(v);
	if (!s)
		return fail(x, v, "%s must be a string", key);
	if (iod_strlcpy(out, s, len))
		return fail(x, v, "%s \"%s\" is longer than %zu characters", key, s, len - 1);
	return 0;
}

static int get_ip(struct ctx *x, const yaml_node_t *v, const char *key, uint32_t *ip)
{
	const char *s = scalar(v);
	if (!s || iod_net_ipv4_parse(s, ip))
		return fail(x, v, "%s must be an IPv4 address like 10.0.0.1, not \"%s\"", key,
		            s ? s : "(not a string)");
	return 0;
}

static int get_mac(struct ctx *x, const yaml_node_t *v, const char *key, uint8_t mac[6])
{
	const char *s = scalar(v);
	if (!s || iod_net_mac_parse(s, mac))
		return fail(x, v, "%s must be a MAC like 02:00:00:00:00:01, not \"%s\"", key,
		            s ? s : "(not a string)");
	return 0;
}

static int get_u64(struct ctx *x, const yaml_node_t *v, const char *key, uint64_t max,
                   uint64_t *out)
{
	const char *s = scalar(v);
	char *end;
	if (!s || !*s)
		return fail(x, v, "%s must be a number", key);
	unsigned long long n = strtoull(s, &end, 10);
	if (*end || n > max || s[0] == '-')
		return fail(x, v, "%s must be a whole number 0..%llu, not \"%s\"", key,
		            (unsigned long long)max, s);
	*out = n;
	return 0;
}

static int get_bool(struct ctx *x, const yaml_node_t *v, const char *key, bool *out)
{
	const char *s = scalar(v);
	if (s && (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")))
		*out = true;
	else if (s && (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")))
		*out = false;
	else
		return fail(x, v, "%s must be true or false", key);
	return 0;
}

static int unknown(struct ctx *x, const yaml_node_t *v, const char *key, const char *where,
                   const char *const *known, size_t n)
{
	const char *s = key ? iod_suggest(key, known, n) : NULL;
	return fail(x, v, "unknown key \"%s\" in %s%s%s%s", key ? key : "(not a string)", where,
	            s ? "; did you mean \"" : "", s ? s : "", s ? "\"?" : "");
}

static int parse_ports(struct ctx *x, const yaml_node_t *n, struct iod_flow_dp_config *c)
{
	static const char *const roles[] = {"host", "fabric"};
	static const char *const keys[] = {"backend", "iface", "pcap_in", "pcap_out"};
	int rc;
	if ((rc = need_map(x, n, "ports")))
		return rc;
	const char *k;
	yaml_node_t *v;
	MAP_EACH(x, n, k, v)
	{
		int role = !k ? -1 : !strcmp(k, "host") ? 0 : !strcmp(k, "fabric") ? 1 : -1;
		if (role < 0)
			return unknown(x, v, k, "ports (a port is host or fabric)", roles, 2);
		struct iod_flow_dp_port *p = &c->ports[role];
		snprintf(p->name, sizeof(p->name), "%s", roles[role]);
		if ((rc = need_map(x, v, roles[role])))
			return rc;
		const char *pk;
		yaml_node_t *pv;
		MAP_EACH(x, v, pk, pv)
		{
			if (pk && !strcmp(pk, "backend"))
				rc = get_str(x, pv, pk, p->backend, sizeof(p->backend));
			else if (pk && !strcmp(pk, "iface"))
				rc = get_str(x, pv, pk, p->iface, sizeof(p->iface));
			else if (pk && !strcmp(pk, "pcap_in"))
				rc = get_str(x, pv, pk, p->pcap_in, sizeof(p->pcap_in));
			else if (pk && !strcmp(pk, "pcap_out"))
				rc = get_str(x, pv, pk, p->pcap_out, sizeof(p->pcap_out));
			else
				rc = unknown(x, pv, pk, "a port", keys, IOD_ARRAY_LEN(keys));
			if (rc)
				return rc;
		}
		if (strcmp(p->backend, "mem") && strcmp(p->backend, "pcap") &&
		    strcmp(p->backend, "afpacket") && strcmp(p->backend, "dpdk"))
			return fail(x, v,
			            "port %s: backend must be mem, pcap, afpacket or dpdk, not "
			            "\"%s\"",
			            roles[role], p->backend);
	}
	return 0;
}

static int parse_sgs(struct ctx *x, const yaml_node_t *n, struct iod_flow_dp_config *c)
{
	static const char *const keys[] = {"name", "ingress", "egress"};
	int rc;
	if ((rc = need_seq(x, n, "security_groups")))
		return rc;
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
	     it++) {
		yaml_node_t *g = yaml_document_get_node(x->doc, *it);
		if (c->sgs_n >= IOD_DP_SGS_MAX)
			return fail(x, g, "more than %d security groups", IOD_DP_SGS_MAX);
		struct iod_net_sg *sg = &c->sgs[c->sgs_n++];
		if ((rc = need_map(x, g, "a security group")))
			return rc;
		const char *k;
		yaml_node_t *v;
		MAP_EACH(x, g, k, v)
		{
			if (k && !strcmp(k, "name")) {
				if ((rc = get_str(x, v, k, sg->name, sizeof(sg->name))))
					return rc;
			} else if (k && (!strcmp(k, "ingress") || !strcmp(k, "egress"))) {
				if ((rc = need_seq(x, v, k)))
					return rc;
				for (yaml_node_item_t *r = v->data.sequence.items.start;
				     r < v->data.sequence.items.top; r++) {
					yaml_node_t *rn = yaml_document_get_node(x->doc, *r);
					struct iod_net_sg_rule rule;
					struct iod_err re = {0};
					const char *s = scalar(rn);
					if (!s)
						return fail(x, rn,
						            "a rule must be a string like "
						            "\"tcp 10.0.0.0/8 80-443\"");
					if (iod_net_sg_rule_parse(s, !strcmp(k, "egress"), &rule,
					                          &re))
						return fail(x, rn, "%s", re.msg);
					if (iod_net_sg_add(sg, &rule))
						return fail(x, rn, "more than %d rules in group %s",
						            IOD_NET_SG_RULES_MAX, sg->name);
				}
			} else {
				return unknown(x, v, k, "a security group", keys,
				               IOD_ARRAY_LEN(keys));
			}
		}
		if (!sg->name[0])
			return fail(x, g, "a security group needs a name");
	}
	return 0;
}

static int parse_endpoint(struct ctx *x, const yaml_node_t *n, struct iod_flow_dp_endpoint *ep)
{
	static const char *const keys[] = {"ip", "mac", "local", "vtep"};
	int rc;
	bool has_ip = false;
	if ((rc = need_map(x, n, "an endpoint")))
		return rc;
	const char *k;
	yaml_node_t *v;
	MAP_EACH(x, n, k, v)
	{
		if (k && !strcmp(k, "ip")) {
			rc = get_ip(x, v, k, &ep->ip);
			has_ip = true;
		} else if (k && !strcmp(k, "mac")) {
			rc = get_mac(x, v, k, ep->mac);
		} else if (k && !strcmp(k, "local")) {
			rc = get_bool(x, v, k, &ep->local);
		} else if (k && !strcmp(k, "vtep")) {
			rc = get_ip(x, v, k, &ep->vtep_ip);
		} else {
			rc = unknown(x, v, k, "an endpoint", keys, IOD_ARRAY_LEN(keys));
		}
		if (rc)
			return rc;
	}
	if (!has_ip)
		return fail(x, n, "an endpoint needs ip");
	if (!ep->local && !ep->vtep_ip)
		return fail(x, n, "endpoint: give \"local: true\" or the remote \"vtep: ADDRESS\"");
	return 0;
}

static int get_dur(struct ctx *x, const yaml_node_t *v, const char *key, uint64_t *ns)
{
	const char *s = scalar(v);
	struct iod_err ue = {0};
	if (!s || iod_parse_duration(s, ns, &ue) || *ns == 0)
		return fail(x, v, "%s must be a positive duration like 10ms, not \"%s\"", key,
		            s ? s : "(not a string)");
	return 0;
}

/* adaptive_routing: {policy, paths, sport_min, sport_max, probe_interval,
 * probe_timeout, flow_idle, flowlet_gap, scatter}: net/ar's config. */
static int parse_ar(struct ctx *x, const yaml_node_t *n, struct iod_flow_dp_network *net)
{
	static const char *const keys[] = {"policy",    "paths",          "sport_min",
	                                   "sport_max", "probe_interval", "probe_timeout",
	                                   "flow_idle", "flowlet_gap",    "scatter"};
	int rc;
	if ((rc = need_map(x, n, "adaptive_routing")))
		return rc;
	const yaml_node_t *pn = NULL;
	const char *k;
	yaml_node_t *v;
	MAP_EACH(x, n, k, v)
	{
		if (k && !strcmp(k, "policy"))
			pn = v;
	}
	enum iod_ar_policy pol;
	const char *ps = scalar(pn);
	if (!pn)
		return fail(x, n,
		            "adaptive_routing needs a policy (ecmp, minrtt, flowlet, "
		            "clove-ecn or probe-util)");
	if (!ps || iod_ar_policy_parse(ps, &pol))
		return fail(x, pn,
		            "policy must be ecmp, minrtt, flowlet, clove-ecn or probe-util, not "
		            "\"%s\"",
		            ps ? ps : "(not a string)");
	struct iod_ar_config *a = &net->ar;
	iod_ar_config_default(a, pol);
	a->probe_interval_ns = 20 * IOD_NS_PER_MS; /* a software loop idles in 5 ms waits */
	MAP_EACH(x, n, k, v)
	{
		uint64_t u = 0;
		if (k && !strcmp(k, "policy")) {
			rc = 0;
		} else if (k && !strcmp(k, "paths")) {
			rc = get_u64(x, v, k, IOD_AR_PATHS_MAX, &u);
			if (!rc && u == 0)
				rc = fail(x, v, "paths must be 1..%d", IOD_AR_PATHS_MAX);
			a->paths = (uint32_t)u;
		} else if (k && !strcmp(k, "sport_min")) {
			rc = get_u64(x, v, k, 65535, &u);
			a->sport_min = (uint16_t)u;
		} else if (k && !strcmp(k, "sport_max")) {
			rc = get_u64(x, v, k, 65535, &u);
			a->sport_max = (uint16_t)u;
		} else if (k && !strcmp(k, "probe_interval")) {
			rc = get_dur(x, v, k, &a->probe_interval_ns);
		} else if (k && !strcmp(k, "probe_timeout")) {
			rc = get_dur(x, v, k, &a->probe_timeout_ns);
		} else if (k && !strcmp(k, "flow_idle")) {
			rc = get_dur(x, v, k, &a->flow_idle_ns);
		} else if (k && !strcmp(k, "flowlet_gap")) {
			rc = get_dur(x, v, k, &a->flowlet_gap_ns);
		} else if (k && !strcmp(k, "scatter")) {
			rc = get_bool(x, v, k, &a->minrtt_scatter);
		} else {
			rc = unknown(x, v, k, "adaptive_routing", keys, IOD_ARRAY_LEN(keys));
		}
		if (rc)
			return rc;
	}
	if (a->sport_min == 0 || a->sport_max < a->sport_min)
		return fail(x, n,
		            "adaptive_routing: sport_min..sport_max must be a non-empty range "
		            "of ports 1..65535 (got %u..%u)",
		            a->sport_min, a->sport_max);
	if ((uint32_t)(a->sport_max - a->sport_min) + 1 < a->paths)
		return fail(x, n,
		            "adaptive_routing: the port range %u..%u is smaller than paths %u",
		            a->sport_min, a->sport_max, a->paths);
	a->discovery_ports = 4 * a->paths < 16 ? 16 : 4 * a->paths;
	if (a->discovery_ports > IOD_AR_DISCOVERY_MAX)
		a->discovery_ports = IOD_AR_DISCOVERY_MAX;
	net->ar_enabled = true;
	return 0;
}

/* A network's endpoints lie in its subnet, each IP once (a duplicate was
 * silently dropped by the pipeline: one endpoint unreachable). */
static int check_endpoints(struct ctx *x, const struct iod_flow_dp_network *net,
                           const yaml_node_t *const *nodes, const yaml_node_t *subnet_node)
{
	uint32_t mask = net->prefix_len ? ~0u << (32 - net->prefix_len) : 0;
	char ip[16], sn[16];
	for (uint32_t i = 0; i < net->endpoints_n; i++) {
		const struct iod_flow_dp_endpoint *ep = &net->endpoints[i];
		iod_net_ipv4_format(ep->ip, ip, sizeof(ip));
		if ((ep->ip & mask) != (net->subnet & mask)) {
			iod_net_ipv4_format(net->subnet, sn, sizeof(sn));
			return fail(x, nodes[i],
			            "endpoint %s is outside network %s's subnet %s/%u (line %zu)",
			            ip, net->name, sn, net->prefix_len,
			            subnet_node ? subnet_node->start_mark.line + 1 : 0);
		}
		for (uint32_t j = 0; j < i; j++)
			if (net->endpoints[j].ip == ep->ip)
				return fail(
				    x, nodes[i],
				    "endpoint %s is given twice in network %s (first at line "
				    "%zu): each endpoint IP once",
				    ip, net->name, nodes[j]->start_mark.line + 1);
	}
	return 0;
}

static int parse_networks(struct ctx *x, const yaml_node_t *n, struct iod_flow_dp_config *c,
                          const char *sg_names[IOD_DP_NETWORKS_MAX],
                          const yaml_node_t *sg_nodes[IOD_DP_NETWORKS_MAX])
{
	static const char *const keys[] = {
	    "name", "vni",   "subnet", "gateway",   "gateway_mac",     "security_group",
	    "rate", "burst", "dscp",   "endpoints", "adaptive_routing"};
	static __thread const yaml_node_t *ep_nodes[IOD_DP_ENDPOINTS_MAX];
	int rc;
	if ((rc = need_seq(x, n, "networks")))
		return rc;
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
	     it++) {
		yaml_node_t *g = yaml_document_get_node(x->doc, *it);
		if (c->networks_n >= IOD_DP_NETWORKS_MAX)
			return fail(x, g, "more than %d networks", IOD_DP_NETWORKS_MAX);
		uint32_t ni = c->networks_n++;
		struct iod_flow_dp_network *net = &c->networks[ni];
		net->sg = -1;
		bool has_vni = false, has_subnet = false;
		const yaml_node_t *subnet_node = NULL;
		if ((rc = need_map(x, g, "a network")))
			return rc;
		const char *k;
		yaml_node_t *v;
		MAP_EACH(x, g, k, v)
		{
			uint64_t u = 0;
			struct iod_err ue = {0};
			if (k && !strcmp(k, "name")) {
				rc = get_str(x, v, k, net->name, sizeof(net->name));
			} else if (k && !strcmp(k, "vni")) {
				rc = get_u64(x, v, k, 0xffffff, &u);
				if (!rc && u == IOD_AR_PROBE_VNI)
					rc = fail(x, v,
					          "vni %u is reserved for adaptive-routing probes; "
					          "use 0..%u",
					          IOD_AR_PROBE_VNI, IOD_AR_PROBE_VNI - 1);
				net->vni = (uint32_t)u;
				has_vni = true;
			} else if (k && !strcmp(k, "subnet")) {
				const char *s = scalar(v);
				if (!s || iod_net_cidr_parse(s, &net->subnet, &net->prefix_len))
					rc =
					    fail(x, v,
					         "subnet must be an IPv4 CIDR like 192.168.0.0/24");
				else if (net->prefix_len == 0)
					rc = fail(x, v,
					          "subnet %s covers every IPv4 address: give the "
					          "network's own prefix, like 192.168.0.0/24",
					          s);
				subnet_node = v;
				has_subnet = true;
			} else if (k && !strcmp(k, "gateway")) {
				rc = get_ip(x, v, k, &net->gateway);
			} else if (k && !strcmp(k, "gateway_mac")) {
				rc = get_mac(x, v, k, net->gateway_mac);
			} else if (k && !strcmp(k, "security_group")) {
				sg_names[ni] = scalar(v);
				sg_nodes[ni] = v;
				if (!sg_names[ni])
					rc = fail(x, v, "security_group must name a group");
			} else if (k && !strcmp(k, "rate")) {
				const char *s = scalar(v);
				if (!s || iod_parse_bandwidth(s, &u, &ue))
					rc = fail(x, v, "rate: %s",
					          s ? ue.msg : "must be like 1Gbps");
				else if (u / 8 == 0)
					rc =
					    fail(x, v,
					         "rate %s would stop all traffic: give a rate like "
					         "1Gbps, or leave rate out for no limit",
					         s);
				net->rate_bytes_per_s = u / 8;
			} else if (k && !strcmp(k, "burst")) {
				const char *s = scalar(v);
				if (!s || iod_parse_size(s, &u, &ue))
					rc = fail(x, v, "burst: %s",
					          s ? ue.msg : "must be like 1MB");
				else if (u == 0)
					rc = fail(
					    x, v,
					    "burst %s lets no packet through: give a size like "
					    "1MB (at least one packet)",
					    s);
				net->burst_bytes = u;
			} else if (k && !strcmp(k, "dscp")) {
				rc = get_u64(x, v, k, 63, &u);
				net->dscp = (uint8_t)u;
			} else if (k && !strcmp(k, "adaptive_routing")) {
				rc = parse_ar(x, v, net);
			} else if (k && !strcmp(k, "endpoints")) {
				if ((rc = need_seq(x, v, k)))
					return rc;
				for (yaml_node_item_t *e = v->data.sequence.items.start;
				     e < v->data.sequence.items.top; e++) {
					yaml_node_t *en = yaml_document_get_node(x->doc, *e);
					if (net->endpoints_n >= IOD_DP_ENDPOINTS_MAX)
						return fail(x, en, "more than %d endpoints",
						            IOD_DP_ENDPOINTS_MAX);
					ep_nodes[net->endpoints_n] = en;
					rc = parse_endpoint(x, en,
					                    &net->endpoints[net->endpoints_n++]);
					if (rc)
						return rc;
				}
			} else {
				rc = unknown(x, v, k, "a network", keys, IOD_ARRAY_LEN(keys));
			}
			if (rc)
				return rc;
		}
		if (!net->name[0] || !has_vni || !has_subnet)
			return fail(x, g, "a network needs name, vni and subnet");
		if ((rc = check_endpoints(x, net, ep_nodes, subnet_node)))
			return rc;
	}
	return 0;
}

static int parse_backend(struct ctx *x, const yaml_node_t *v, struct iod_net_lb_service *s)
{
	const char *t = scalar(v);
	char ip[32];
	const char *colon = t ? strrchr(t, ':') : NULL;
	uint32_t a;
	char *end;
	if (!colon || (size_t)(colon - t) >= sizeof(ip))
		return fail(x, v, "a backend must be ADDRESS:PORT like 192.168.0.5:8080");
	memcpy(ip, t, (size_t)(colon - t));
	ip[colon - t] = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (iod_net_ipv4_parse(ip, &a) || *end || !port || port > 65535 || end == colon + 1)
		return fail(x, v,
		            "a backend must be ADDRESS:PORT like 192.168.0.5:8080, not \"%s\"", t);
	if (iod_net_lb_backend_add(s, a, (uint16_t)port, 1))
		return fail(x, v, "more than %d backends", IOD_NET_LB_BACKENDS_MAX);
	return 0;
}

static int parse_services(struct ctx *x, const yaml_node_t *n, struct iod_flow_dp_config *c)
{
	static const char *const keys[] = {"name", "network", "vip", "port", "proto", "backends"};
	int rc;
	if ((rc = need_seq(x, n, "services")))
		return rc;
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
	     it++) {
		yaml_node_t *g = yaml_document_get_node(x->doc, *it);
		if (c->services_n >= IOD_DP_SERVICES_MAX)
			return fail(x, g, "more than %d services", IOD_DP_SERVICES_MAX);
		struct iod_flow_dp_service *sv = &c->services[c->services_n++];
		struct iod_net_lb_service *s = &sv->lb;
		s->proto = IOD_NET_PROTO_TCP;
		sv->network = -1;
		if ((rc = need_map(x, g, "a service")))
			return rc;
		const char *k;
		yaml_node_t *v;
		MAP_EACH(x, g, k, v)
		{
			uint64_t u = 0;
			if (k && !strcmp(k, "name")) {
				rc = get_str(x, v, k, s->name, sizeof(s->name));
			} else if (k && !strcmp(k, "network")) {
				const char *nn = scalar(v);
				for (uint32_t i = 0; nn && i < c->networks_n; i++)
					if (!strcmp(c->networks[i].name, nn))
						sv->network = (int32_t)i;
				if (sv->network < 0)
					rc = fail(x, v,
					          "network \"%s\" is not defined under networks",
					          nn ? nn : "");
			} else if (k && !strcmp(k, "vip")) {
				rc = get_ip(x, v, k, &s->vip);
			} else if (k && !strcmp(k, "port")) {
				rc = get_u64(x, v, k, 65535, &u);
				s->port = (uint16_t)u;
			} else if (k && !strcmp(k, "proto")) {
				const char *p = scalar(v);
				if (p && !strcmp(p, "tcp"))
					s->proto = IOD_NET_PROTO_TCP;
				else if (p && !strcmp(p, "udp"))
					s->proto = IOD_NET_PROTO_UDP;
				else
					rc = fail(x, v, "proto must be tcp or udp");
			} else if (k && !strcmp(k, "backends")) {
				if ((rc = need_seq(x, v, k)))
					return rc;
				for (yaml_node_item_t *b = v->data.sequence.items.start;
				     b < v->data.sequence.items.top && !rc; b++)
					rc =
					    parse_backend(x, yaml_document_get_node(x->doc, *b), s);
			} else {
				rc = unknown(x, v, k, "a service", keys, IOD_ARRAY_LEN(keys));
			}
			if (rc)
				return rc;
		}
		if (!s->name[0] || !s->vip || !s->port || sv->network < 0 || !s->backends_n)
			return fail(x, g, "a service needs name, network, vip, port and backends");
	}
	return 0;
}

/* Every mapping in the document, any depth: a key given twice is an error
 * (libyaml keeps both and the later one would silently win). */
static int no_duplicate_keys(struct ctx *x)
{
	for (yaml_node_t *n = x->doc->nodes.start; n < x->doc->nodes.top; n++) {
		if (n->type != YAML_MAPPING_NODE)
			continue;
		for (yaml_node_pair_t *a = n->data.mapping.pairs.start;
		     a < n->data.mapping.pairs.top; a++) {
			const yaml_node_t *ka = yaml_document_get_node(x->doc, a->key);
			const char *sa = scalar(ka);
			if (!sa)
				continue;
			for (yaml_node_pair_t *b = n->data.mapping.pairs.start; b < a; b++) {
				const yaml_node_t *kb = yaml_document_get_node(x->doc, b->key);
				const char *sb = scalar(kb);
				if (sb && !strcmp(sa, sb))
					return fail(
					    x, ka,
					    "duplicate key \"%s\" (first at line %zu, column "
					    "%zu): give it once",
					    sa, kb->start_mark.line + 1, kb->start_mark.column + 1);
			}
		}
	}
	return 0;
}

int iod_flow_dp_config_parse(const char *text, size_t len, const char *name,
                             struct iod_flow_dp_config *c, struct iod_err *e)
{
	static const char *const keys[] = {
	    "vtep",      "vtep_mac", "underlay_gw_mac", "udp_csum",        "ct_sessions",
	    "emc_slots", "ports",    "networks",        "security_groups", "services"};
	yaml_parser_t parser;
	yaml_document_t doc;
	struct ctx x = {&doc, name ? name : "config", e};
	int rc = 0;
	const char *sg_names[IOD_DP_NETWORKS_MAX] = {0};
	const yaml_node_t *sg_nodes[IOD_DP_NETWORKS_MAX] = {0};

	memset(c, 0, sizeof(*c));
	c->udp_csum = true;
	if (!yaml_parser_initialize(&parser))
		return iod_err_set(e, -ENOMEM, "%s: out of memory", x.name);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = iod_err_set(e, -EINVAL, "%s:%zu:%zu: YAML syntax: %s", x.name,
		                 parser.problem_mark.line + 1, parser.problem_mark.column + 1,
		                 parser.problem ? parser.problem : "error");
		yaml_parser_delete(&parser);
		return rc;
	}
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (!root) {
		rc = iod_err_set(e, -EINVAL, "%s: empty file: expected vtep, ports, networks",
		                 x.name);
		goto out;
	}
	if ((rc = need_map(&x, root, "the file")) || (rc = no_duplicate_keys(&x)))
		goto out;
	const char *k;
	yaml_node_t *v;
	bool has_vtep = false;
	yaml_node_t *nets = NULL, *svcs = NULL, *sgs = NULL;
	MAP_EACH(&x, root, k, v)
	{
		uint64_t u = 0;
		if (k && !strcmp(k, "vtep")) {
			rc = get_ip(&x, v, k, &c->vtep_ip);
			has_vtep = true;
		} else if (k && !strcmp(k, "vtep_mac")) {
			rc = get_mac(&x, v, k, c->vtep_mac);
		} else if (k && !strcmp(k, "underlay_gw_mac")) {
			rc = get_mac(&x, v, k, c->underlay_gw_mac);
		} else if (k && !strcmp(k, "udp_csum")) {
			rc = get_bool(&x, v, k, &c->udp_csum);
		} else if (k && !strcmp(k, "ct_sessions")) {
			rc = get_u64(&x, v, k, IOD_NET_CT_SESSIONS_MAX, &u);
			c->ct_sessions = (uint32_t)u;
			if (!rc && iod_net_ct_bytes(c->ct_sessions) > IOD_DP_CT_BYTES_MAX)
				rc = fail(
				    &x, v,
				    "ct_sessions %u needs %.1f MiB of conntrack per core; the "
				    "most is %llu MiB (IOD_DP_CT_BYTES_MAX, about 6 M sessions)",
				    c->ct_sessions,
				    (double)iod_net_ct_bytes(c->ct_sessions) / (1 << 20),
				    (unsigned long long)(IOD_DP_CT_BYTES_MAX >> 20));
		} else if (k && !strcmp(k, "emc_slots")) {
			rc = get_u64(&x, v, k, IOD_FLOW_EMC_SLOTS_MAX, &u);
			c->emc_slots = (uint32_t)u;
			if (!rc && (u & (u - 1)))
				rc = fail(&x, v, "emc_slots must be a power of two");
		} else if (k && !strcmp(k, "ports")) {
			rc = parse_ports(&x, v, c);
		} else if (k && !strcmp(k, "networks")) {
			nets = v;
		} else if (k && !strcmp(k, "security_groups")) {
			sgs = v;
		} else if (k && !strcmp(k, "services")) {
			svcs = v;
		} else {
			rc = unknown(&x, v, k, "the file", keys, IOD_ARRAY_LEN(keys));
		}
		if (rc)
			goto out;
	}
	/* Order matters: groups, then networks naming them, then services. */
	if (sgs && (rc = parse_sgs(&x, sgs, c)))
		goto out;
	if (nets && (rc = parse_networks(&x, nets, c, sg_names, sg_nodes)))
		goto out;
	for (uint32_t i = 0; i < c->networks_n; i++) {
		if (!sg_names[i])
			continue;
		for (uint32_t g = 0; g < c->sgs_n; g++)
			if (!strcmp(c->sgs[g].name, sg_names[i]))
				c->networks[i].sg = (int32_t)g;
		if (c->networks[i].sg < 0) {
			rc = fail(&x, sg_nodes[i],
			          "security group \"%s\" is not defined under "
			          "security_groups",
			          sg_names[i]);
			goto out;
		}
		/* the group's members are the network */
		struct iod_net_sg *g = &c->sgs[c->networks[i].sg];
		g->member_ip = c->networks[i].subnet;
		g->member_prefix_len = c->networks[i].prefix_len;
	}
	if (svcs && (rc = parse_services(&x, svcs, c)))
		goto out;
	if (!has_vtep)
		rc = iod_err_set(e, -EINVAL,
		                 "%s: missing \"vtep: ADDRESS\" (this node's underlay IPv4)",
		                 x.name);
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}

int iod_flow_dp_config_load(const char *path, struct iod_flow_dp_config *c, struct iod_err *e)
{
	struct iod_buf b;
	iod_buf_init(&b);
	int rc = iod_buf_read_file(&b, path, IOD_DP_CONFIG_FILE_MAX, e);
	if (!rc)
		rc = iod_flow_dp_config_parse(b.data, b.len, path, c, e);
	iod_buf_free(&b);
	return rc;
}

void iod_flow_dp_config_free(struct iod_flow_dp_config *c)
{
	for (uint32_t i = 0; i < c->services_n; i++)
		iod_net_lb_service_free(&c->services[i].lb);
}
