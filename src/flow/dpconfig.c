/*
 * dpconfig.c: the YAML file of `iod dp run` (see docs/dataplane.md) into a
 * struct iod_flow_dp_config, with errors that name file:line:col, the
 * object and what to write instead.
 *
 * The text is read through iod's one YAML layer (src/base/yaml.c: a
 * bounded tree, IOD_YAML_NODES_MAX, aliases refused), and every
 * independent problem is reported, not only the first: each top-level key,
 * each list item (network, service, security group) and each key of an
 * item is checked on its own, and the messages go into e one a line
 * (first first).
 *
 * Parsing only: no pipes are built here, nothing is opened but the file.
 * Every list is bounded by limits.h; the parser is fuzzed
 * (tests/fuzz/fuzz_dpconfig.c).
 */
#include "iod/flow.h"
#include "iod/yaml.h"

#include <stdlib.h>
#include <string.h>

struct ctx {
	const char *name;  /* file name for messages */
	struct iod_err *e; /* where errors go: the first sets it, later ones are appended */
	uint32_t errors;   /* problems found so far */
	uint32_t dropped;  /* of those, how many did not fit in e->msg */
};

/* Record one problem: the first is e's message and code, each later one a
 * further line of it while it fits. */
static int note(struct ctx *x, const char *line)
{
	x->errors++;
	if (!x->e)
		return -EINVAL;
	if (x->errors == 1)
		return iod_err_set(x->e, -EINVAL, "%s", line);
	size_t used = strlen(x->e->msg), need = strlen(line) + 1;
	if (used + need + 1 > sizeof(x->e->msg) - 32) { /* room for the "more" line */
		x->dropped++;
		return -EINVAL;
	}
	x->e->msg[used] = '\n';
	memcpy(x->e->msg + used + 1, line, need);
	return -EINVAL;
}

static int fail(struct ctx *x, const struct iod_yaml_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct ctx *x, const struct iod_yaml_node *n, const char *fmt, ...)
{
	char msg[IOD_ERR_MSG_MAX - 64], line[IOD_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(line, sizeof(line), "%s:%u:%u: %s", x->name, n ? n->line : 0, n ? n->col : 0, msg);
	return note(x, line);
}

/* A problem the YAML layer found (syntax, alias, tag, the node bound). */
static void yaml_diag(void *ctx, uint32_t line, uint32_t col, const char *msg)
{
	struct ctx *x = ctx;
	char l[IOD_ERR_MSG_MAX];
	if (line)
		snprintf(l, sizeof(l), "%s:%u:%u: %s", x->name, line, col, msg);
	else
		snprintf(l, sizeof(l), "%s: %s", x->name, msg);
	note(x, l);
}

static const char *scalar(const struct iod_yaml_node *n)
{
	return n && n->kind == IOD_YAML_SCALAR ? n->str : NULL;
}

/* Iterate a mapping: key text and value node. */
#define MAP_EACH(x, map, k, v)                                                    \
	for (const struct iod_yaml_node *p_##k = (map)->first;                    \
	     p_##k && p_##k->next && ((k) = scalar(p_##k), (v) = p_##k->next, 1); \
	     p_##k = p_##k->next->next)

/* Iterate a sequence's items. */
#define SEQ_EACH(seq, it) for (const struct iod_yaml_node *it = (seq)->first; it; it = it->next)

static int need_map(struct ctx *x, const struct iod_yaml_node *n, const char *what)
{
	if (!n || n->kind != IOD_YAML_MAP)
		return fail(x, n, "%s must be a mapping (key: value lines)", what);
	return 0;
}

static int need_seq(struct ctx *x, const struct iod_yaml_node *n, const char *what)
{
	if (!n || n->kind != IOD_YAML_SEQ)
		return fail(x, n, "%s must be a list (lines starting with \"- \")", what);
	return 0;
}

static int get_str(struct ctx *x, const struct iod_yaml_node *v, const char *key, char *out,
                   size_t len)
{
	const char *s = scalar(v);
	if (!s)
		return fail(x, v, "%s must be a string", key);
	if (iod_strlcpy(out, s, len))
		return fail(x, v, "%s \"%s\" is longer than %zu characters", key, s, len - 1);
	return 0;
}

static int get_ip(struct ctx *x, const struct iod_yaml_node *v, const char *key, uint32_t *ip)
{
	const char *s = scalar(v);
	if (!s || iod_net_ipv4_parse(s, ip))
		return fail(x, v, "%s must be an IPv4 address like 10.0.0.1, not \"%s\"", key,
		            s ? s : "(not a string)");
	return 0;
}

static int get_mac(struct ctx *x, const struct iod_yaml_node *v, const char *key, uint8_t mac[6])
{
	const char *s = scalar(v);
	if (!s || iod_net_mac_parse(s, mac))
		return fail(x, v, "%s must be a MAC like 02:00:00:00:00:01, not \"%s\"", key,
		            s ? s : "(not a string)");
	return 0;
}

static int get_u64(struct ctx *x, const struct iod_yaml_node *v, const char *key, uint64_t max,
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

static int get_bool(struct ctx *x, const struct iod_yaml_node *v, const char *key, bool *out)
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

static int unknown(struct ctx *x, const struct iod_yaml_node *v, const char *key, const char *where,
                   const char *const *known, size_t n)
{
	const char *s = key ? iod_suggest(key, known, n) : NULL;
	return fail(x, v, "unknown key \"%s\" in %s%s%s%s", key ? key : "(not a string)", where,
	            s ? "; did you mean \"" : "", s ? s : "", s ? "\"?" : "");
}

static int parse_ports(struct ctx *x, const struct iod_yaml_node *n, struct iod_flow_dp_config *c)
{
	static const char *const roles[] = {"host", "fabric"};
	static const char *const keys[] = {"backend", "iface", "pcap_in", "pcap_out"};
	int rc;
	if ((rc = need_map(x, n, "ports")))
		return rc;
	const char *k;
	const struct iod_yaml_node *v;
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
		const struct iod_yaml_node *pv;
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

/* One item of security_groups. */
static int parse_sg(struct ctx *x, const struct iod_yaml_node *g, struct iod_net_sg *sg)
{
	static const char *const keys[] = {"name", "ingress", "egress"};
	int rc;
	if ((rc = need_map(x, g, "a security group")))
		return rc;
	const char *k;
	const struct iod_yaml_node *v;
	MAP_EACH(x, g, k, v)
	{
		if (k && !strcmp(k, "name")) {
			if ((rc = get_str(x, v, k, sg->name, sizeof(sg->name))))
				return rc;
		} else if (k && (!strcmp(k, "ingress") || !strcmp(k, "egress"))) {
			if ((rc = need_seq(x, v, k)))
				return rc;
			SEQ_EACH(v, rn)
			{
				struct iod_net_sg_rule rule;
				struct iod_err re = {0};
				const char *s = scalar(rn);
				if (!s)
					return fail(x, rn,
					            "a rule must be a string like "
					            "\"tcp 10.0.0.0/8 80-443\"");
				if (iod_net_sg_rule_parse(s, !strcmp(k, "egress"), &rule, &re))
					return fail(x, rn, "%s", re.msg);
				if (iod_net_sg_add(sg, &rule))
					return fail(x, rn, "more than %d rules in group %s",
					            IOD_NET_SG_RULES_MAX, sg->name);
			}
		} else {
			return unknown(x, v, k, "a security group", keys, IOD_ARRAY_LEN(keys));
		}
	}
	if (!sg->name[0])
		return fail(x, g, "a security group needs a name");
	return 0;
}

static int parse_sgs(struct ctx *x, const struct iod_yaml_node *n, struct iod_flow_dp_config *c)
{
	int rc, bad = 0;
	if ((rc = need_seq(x, n, "security_groups")))
		return rc;
	SEQ_EACH(n, g)
	{
		if (c->sgs_n >= IOD_DP_SGS_MAX)
			return fail(x, g, "more than %d security groups", IOD_DP_SGS_MAX);
		if ((rc = parse_sg(x, g, &c->sgs[c->sgs_n++])))
			bad = rc; /* the next group is checked on its own */
	}
	return bad;
}

static int parse_endpoint(struct ctx *x, const struct iod_yaml_node *n,
                          struct iod_flow_dp_endpoint *ep)
{
	static const char *const keys[] = {"ip", "mac", "local", "vtep"};
	int rc;
	bool has_ip = false;
	if ((rc = need_map(x, n, "an endpoint")))
		return rc;
	const char *k;
	const struct iod_yaml_node *v;
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

static int get_dur(struct ctx *x, const struct iod_yaml_node *v, const char *key, uint64_t *ns)
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
static int parse_ar(struct ctx *x, const struct iod_yaml_node *n, struct iod_flow_dp_network *net)
{
	static const char *const keys[] = {"policy",    "paths",          "sport_min",
	                                   "sport_max", "probe_interval", "probe_timeout",
	                                   "flow_idle", "flowlet_gap",    "scatter"};
	int rc;
	if ((rc = need_map(x, n, "adaptive_routing")))
		return rc;
	const struct iod_yaml_node *pn = NULL;
	const char *k;
	const struct iod_yaml_node *v;
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
	iod_flow_dp_ar_config_default(a, pol);
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
                           const struct iod_yaml_node *const *nodes,
                           const struct iod_yaml_node *subnet_node)
{
	uint32_t mask = net->prefix_len ? ~0u << (32 - net->prefix_len) : 0;
	char ip[16], sn[16];
	for (uint32_t i = 0; i < net->endpoints_n; i++) {
		const struct iod_flow_dp_endpoint *ep = &net->endpoints[i];
		iod_net_ipv4_format(ep->ip, ip, sizeof(ip));
		if ((ep->ip & mask) != (net->subnet & mask)) {
			iod_net_ipv4_format(net->subnet, sn, sizeof(sn));
			return fail(x, nodes[i],
			            "endpoint %s is outside network %s's subnet %s/%u (line %u)",
			            ip, net->name, sn, net->prefix_len,
			            subnet_node ? subnet_node->line : 0);
		}
		for (uint32_t j = 0; j < i; j++)
			if (net->endpoints[j].ip == ep->ip)
				return fail(
				    x, nodes[i],
				    "endpoint %s is given twice in network %s (first at line "
				    "%u): each endpoint IP once",
				    ip, net->name, nodes[j]->line);
	}
	return 0;
}

/* One item of networks (the ni-th network). */
static int parse_network(struct ctx *x, const struct iod_yaml_node *g, struct iod_flow_dp_config *c,
                         uint32_t ni, const char *sg_names[IOD_DP_NETWORKS_MAX],
                         const struct iod_yaml_node *sg_nodes[IOD_DP_NETWORKS_MAX])
{
	static const char *const keys[] = {
	    "name", "vni",   "subnet", "gateway",   "gateway_mac",     "security_group",
	    "rate", "burst", "dscp",   "endpoints", "adaptive_routing"};
	static __thread const struct iod_yaml_node *ep_nodes[IOD_DP_ENDPOINTS_MAX];
	int rc, bad = 0;
	struct iod_flow_dp_network *net = &c->networks[ni];
	net->sg = -1;
	bool has_vni = false, has_subnet = false;
	const struct iod_yaml_node *subnet_node = NULL;
	if ((rc = need_map(x, g, "a network")))
		return rc;
	const char *k;
	const struct iod_yaml_node *v;
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
				rc = fail(x, v, "subnet must be an IPv4 CIDR like 192.168.0.0/24");
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
				rc = fail(x, v, "rate: %s", s ? ue.msg : "must be like 1Gbps");
			else if (u / 8 == 0)
				rc = fail(x, v,
				          "rate %s would stop all traffic: give a rate like "
				          "1Gbps, or leave rate out for no limit",
				          s);
			net->rate_bytes_per_s = u / 8;
		} else if (k && !strcmp(k, "burst")) {
			const char *s = scalar(v);
			if (!s || iod_parse_size(s, &u, &ue))
				rc = fail(x, v, "burst: %s", s ? ue.msg : "must be like 1MB");
			else if (u == 0)
				rc = fail(x, v,
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
			SEQ_EACH(v, en)
			{
				if (net->endpoints_n >= IOD_DP_ENDPOINTS_MAX)
					return fail(x, en, "more than %d endpoints",
					            IOD_DP_ENDPOINTS_MAX);
				ep_nodes[net->endpoints_n] = en;
				rc = parse_endpoint(x, en, &net->endpoints[net->endpoints_n++]);
				if (rc)
					return rc;
			}
		} else {
			rc = unknown(x, v, k, "a network", keys, IOD_ARRAY_LEN(keys));
		}
		if (rc)
			bad = rc; /* the next key is checked on its own */
	}
	if (bad)
		return bad;
	if (!net->name[0] || !has_vni || !has_subnet)
		return fail(x, g, "a network needs name, vni and subnet");
	if ((rc = check_endpoints(x, net, ep_nodes, subnet_node)))
		return rc;
	return 0;
}

static int parse_networks(struct ctx *x, const struct iod_yaml_node *n,
                          struct iod_flow_dp_config *c, const char *sg_names[IOD_DP_NETWORKS_MAX],
                          const struct iod_yaml_node *sg_nodes[IOD_DP_NETWORKS_MAX])
{
	int rc, bad = 0;
	if ((rc = need_seq(x, n, "networks")))
		return rc;
	SEQ_EACH(n, g)
	{
		if (c->networks_n >= IOD_DP_NETWORKS_MAX)
			return fail(x, g, "more than %d networks", IOD_DP_NETWORKS_MAX);
		uint32_t ni = c->networks_n++;
		if ((rc = parse_network(x, g, c, ni, sg_names, sg_nodes)))
			bad = rc; /* the next network is checked on its own */
	}
	return bad;
}

static int parse_backend(struct ctx *x, const struct iod_yaml_node *v, struct iod_net_lb_service *s)
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

/* One item of services. */
static int parse_service(struct ctx *x, const struct iod_yaml_node *g, struct iod_flow_dp_config *c,
                         struct iod_flow_dp_service *sv)
{
	static const char *const keys[] = {"name", "network", "vip", "port", "proto", "backends"};
	int rc, bad = 0;
	struct iod_net_lb_service *s = &sv->lb;
	s->proto = IOD_NET_PROTO_TCP;
	sv->network = -1;
	if ((rc = need_map(x, g, "a service")))
		return rc;
	const char *k;
	const struct iod_yaml_node *v;
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
				rc = fail(x, v, "network \"%s\" is not defined under networks",
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
			for (const struct iod_yaml_node *b = v->first; b && !rc; b = b->next)
				rc = parse_backend(x, b, s);
		} else {
			rc = unknown(x, v, k, "a service", keys, IOD_ARRAY_LEN(keys));
		}
		if (rc)
			bad = rc; /* the next key is checked on its own */
	}
	if (bad)
		return bad;
	if (!s->name[0] || !s->vip || !s->port || sv->network < 0 || !s->backends_n)
		return fail(x, g, "a service needs name, network, vip, port and backends");
	return 0;
}

static int parse_services(struct ctx *x, const struct iod_yaml_node *n,
                          struct iod_flow_dp_config *c)
{
	int rc, bad = 0;
	if ((rc = need_seq(x, n, "services")))
		return rc;
	SEQ_EACH(n, g)
	{
		if (c->services_n >= IOD_DP_SERVICES_MAX)
			return fail(x, g, "more than %d services", IOD_DP_SERVICES_MAX);
		if ((rc = parse_service(x, g, c, &c->services[c->services_n++])))
			bad = rc; /* the next service is checked on its own */
	}
	return bad;
}

/* Every mapping under n, any depth: a key given twice is an error (the
 * later one would silently win). Depth is bounded by the tree
 * (IOD_YAML_DEPTH_MAX). Every duplicate is reported. */
static int no_duplicate_keys(struct ctx *x, const struct iod_yaml_node *n)
{
	int bad = 0;
	if (n->kind == IOD_YAML_SCALAR)
		return 0;
	if (n->kind == IOD_YAML_MAP)
		for (const struct iod_yaml_node *ka = n->first; ka && ka->next;
		     ka = ka->next->next) {
			const char *sa = scalar(ka);
			for (const struct iod_yaml_node *kb = n->first; sa && kb != ka;
			     kb = kb->next->next) {
				const char *sb = scalar(kb);
				if (sb && !strcmp(sa, sb)) {
					bad = fail(x, ka,
					           "duplicate key \"%s\" (first at line %u, column "
					           "%u): give it once",
					           sa, kb->line, kb->col);
					break;
				}
			}
		}
	for (const struct iod_yaml_node *ch = n->first; ch; ch = ch->next)
		if (no_duplicate_keys(x, ch))
			bad = -EINVAL;
	return bad;
}

/* The top-level keys of the file into c; nets/sgs/svcs are kept for later. */
static int parse_top(struct ctx *x, const struct iod_yaml_node *root, struct iod_flow_dp_config *c,
                     bool *has_vtep, const struct iod_yaml_node **nets,
                     const struct iod_yaml_node **sgs, const struct iod_yaml_node **svcs)
{
	static const char *const keys[] = {
	    "vtep",      "vtep_mac", "underlay_gw_mac", "udp_csum",        "ct_sessions",
	    "emc_slots", "ports",    "networks",        "security_groups", "services"};
	const char *k;
	const struct iod_yaml_node *v;
	int rc = 0, bad = 0;
	MAP_EACH(x, root, k, v)
	{
		uint64_t u = 0;
		if (k && !strcmp(k, "vtep")) {
			rc = get_ip(x, v, k, &c->vtep_ip);
			*has_vtep = true;
		} else if (k && !strcmp(k, "vtep_mac")) {
			rc = get_mac(x, v, k, c->vtep_mac);
		} else if (k && !strcmp(k, "underlay_gw_mac")) {
			rc = get_mac(x, v, k, c->underlay_gw_mac);
		} else if (k && !strcmp(k, "udp_csum")) {
			rc = get_bool(x, v, k, &c->udp_csum);
		} else if (k && !strcmp(k, "ct_sessions")) {
			rc = get_u64(x, v, k, IOD_NET_CT_SESSIONS_MAX, &u);
			c->ct_sessions = (uint32_t)u;
			if (!rc && iod_net_ct_bytes(c->ct_sessions) > IOD_DP_CT_BYTES_MAX)
				rc = fail(
				    x, v,
				    "ct_sessions %u needs %.1f MiB of conntrack per core; the "
				    "most is %llu MiB (IOD_DP_CT_BYTES_MAX, about 6 M sessions)",
				    c->ct_sessions,
				    (double)iod_net_ct_bytes(c->ct_sessions) / (1 << 20),
				    (unsigned long long)(IOD_DP_CT_BYTES_MAX >> 20));
		} else if (k && !strcmp(k, "emc_slots")) {
			rc = get_u64(x, v, k, IOD_FLOW_EMC_SLOTS_MAX, &u);
			c->emc_slots = (uint32_t)u;
			if (!rc && (u & (u - 1)))
				rc = fail(x, v, "emc_slots must be a power of two");
		} else if (k && !strcmp(k, "ports")) {
			rc = parse_ports(x, v, c);
		} else if (k && !strcmp(k, "networks")) {
			*nets = v;
		} else if (k && !strcmp(k, "security_groups")) {
			*sgs = v;
		} else if (k && !strcmp(k, "services")) {
			*svcs = v;
		} else {
			rc = unknown(x, v, k, "the file", keys, IOD_ARRAY_LEN(keys));
		}
		if (rc)
			bad = rc; /* the next key is checked on its own */
		rc = 0;
	}
	return bad;
}

/* Each network's security group by name; the group's members are the
 * network. */
static int resolve_sgs(struct ctx *x, struct iod_flow_dp_config *c, const char *const *sg_names,
                       const struct iod_yaml_node *const *sg_nodes)
{
	int bad = 0;
	for (uint32_t i = 0; i < c->networks_n; i++) {
		if (!sg_names[i])
			continue;
		for (uint32_t g = 0; g < c->sgs_n; g++)
			if (!strcmp(c->sgs[g].name, sg_names[i]))
				c->networks[i].sg = (int32_t)g;
		if (c->networks[i].sg < 0) {
			bad = fail(x, sg_nodes[i],
			           "security group \"%s\" is not defined under "
			           "security_groups",
			           sg_names[i]);
			continue;
		}
		struct iod_net_sg *g = &c->sgs[c->networks[i].sg];
		g->member_ip = c->networks[i].subnet;
		g->member_prefix_len = c->networks[i].prefix_len;
	}
	return bad;
}

/* The whole document, every independent problem reported. */
static int parse_doc(struct ctx *x, const struct iod_yaml_node *root, struct iod_flow_dp_config *c)
{
	const char *sg_names[IOD_DP_NETWORKS_MAX] = {0};
	const struct iod_yaml_node *sg_nodes[IOD_DP_NETWORKS_MAX] = {0};
	const struct iod_yaml_node *nets = NULL, *svcs = NULL, *sgs = NULL;
	bool has_vtep = false;
	int rc;

	if (!root)
		return iod_err_set(x->e, -EINVAL, "%s: empty file: expected vtep, ports, networks",
		                   x->name);
	if ((rc = need_map(x, root, "the file")))
		return rc;
	no_duplicate_keys(x, root);
	parse_top(x, root, c, &has_vtep, &nets, &sgs, &svcs);
	/* Order matters: groups, then networks naming them, then services. */
	bool sgs_ok = !sgs || !parse_sgs(x, sgs, c);
	bool nets_ok = !nets || !parse_networks(x, nets, c, sg_names, sg_nodes);
	if (sgs_ok && nets_ok)
		resolve_sgs(x, c, sg_names, sg_nodes);
	/* services name networks: a broken network would only echo here */
	if (svcs && nets_ok)
		parse_services(x, svcs, c);
	if (!has_vtep) {
		char l[IOD_ERR_MSG_MAX];
		snprintf(l, sizeof(l), "%s: missing \"vtep: ADDRESS\" (this node's underlay IPv4)",
		         x->name);
		note(x, l);
	}
	return x->errors ? -EINVAL : 0;
}

int iod_flow_dp_config_parse(const char *text, size_t len, const char *name,
                             struct iod_flow_dp_config *c, struct iod_err *e)
{
	struct ctx x = {name ? name : "config", e, 0, 0};
	struct iod_arena tree;
	struct iod_yaml_node *root = NULL;
	const struct iod_yaml_opts yo = {.what = "dp config", .diag = yaml_diag, .ctx = &x};

	memset(c, 0, sizeof(*c));
	c->udp_csum = true;
	iod_arena_init(&tree, 64 * 1024, 0);
	int rc = iod_yaml_parse(&tree, text, len, &yo, &root);
	if (!rc)
		rc = parse_doc(&x, root, c);
	iod_arena_free(&tree);
	if (x.dropped && e) {
		size_t used = strlen(e->msg);
		snprintf(e->msg + used, sizeof(e->msg) - used, "\n(and %u more)", x.dropped);
	}
	if (rc && e)
		e->code = rc;
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
