/*
 * drops.c: the node's virtual switch's dropped flows with the rule that
 * dropped them, and verdict counters per rule (pure): `iod trace --drops`
 * shows the records the way `hubble observe --verdict DROPPED` does, and
 * iod_dp_sg_verdicts_total{rule,verdict} counts them (docs/network.md).
 *
 * The pipeline (src/flow/dp.c) says only that a packet was dropped; which
 * rule did it follows from the config it ran, walked here the way dp.c
 * composes it: the packet's network (by VNI from the fabric, by source
 * endpoint on the host side), then the security groups bound to its
 * endpoints (NetPolicy objects, sg.c: iod_flow_dp_acl_verdict names the
 * deny or default deny, "<policy>/<rule>"), then the tenant's default:
 * its own replicas' addresses are routed ("allow-same-tenant"), any other
 * overlay address is not ("deny-other-tenants"), nor is anything outside
 * the overlay ("no-route"). A drop of a routable destination (a meter's
 * red, an invalid conntrack state) is no policy's: counted, not recorded.
 * Frames on the VTEP that are neither VXLAN nor overlay-addressed are the
 * host's own underlay traffic (the switch sees a copy): not drops.
 * Bounded: IOD_AGENT_DROPS_MAX records, IOD_AGENT_DROP_RULES_MAX rules.
 * It must never do I/O or read the clock.
 */
#include "iod/agent.h"
#include "iod/flow.h"
#include "iod/obs.h"

#include <string.h>

/* A repeat of a recorded flow within this long counts on its record. */
#define DEDUP_MS 1000
#define SPOOF_RULE "switch/anti-spoofing" /* the rule anti-spoofing drops are recorded on */
/* How many of the newest records a repeat is looked for in. */
#define DEDUP_SCAN 16

static struct iod_agent_drop_rule *rule_of(struct iod_agent_drops *d, const char *name)
{
	for (uint32_t i = 0; i < d->rules_n; i++)
		if (!strcmp(d->rules[i].rule, name))
			return &d->rules[i];
	if (d->rules_n == IOD_AGENT_DROP_RULES_MAX)
		return NULL; /* bounded: later rules go uncounted */
	struct iod_agent_drop_rule *r = &d->rules[d->rules_n++];
	memset(r, 0, sizeof(*r));
	iod_strlcpy(r->rule, name, sizeof(r->rule));
	return r;
}

static bool has_endpoint(const struct iod_flow_dp_network *n, uint32_t ip)
{
	for (uint32_t i = 0; i < n->endpoints_n; i++)
		if (n->endpoints[i].ip == ip)
			return true;
	return false;
}

static const struct iod_agent_overlay_ep *by_ip(const struct iod_agent_overlay_table *t,
                                                uint32_t ip)
{
	for (uint32_t i = 0; t && i < t->n; i++)
		if (t->eps[i].ip == ip)
			return &t->eps[i];
	return NULL;
}

/* The network the pipeline put the packet in; -1 none. */
static int network_of(const struct iod_flow_dp_config *c, const struct iod_flow_key *k,
                      bool from_fabric)
{
	for (uint32_t n = 0; n < c->networks_n; n++) {
		const struct iod_flow_dp_network *net = &c->networks[n];
		if (from_fabric && !net->local_only && net->vni == k->vni)
			return (int)n;
		if (!from_fabric && net->local_only && net->gateway &&
		    (k->src.v4 == net->gateway || k->dst.v4 == net->gateway))
			return (int)n;
	}
	/* the host side by its source; the fabric's after decap (no VNI left in
	 * the key) by its local destination */
	uint32_t ip = from_fabric ? k->dst.v4 : k->src.v4;
	for (uint32_t n = 0; (!from_fabric || !k->vni) && n < c->networks_n; n++) {
		const struct iod_flow_dp_network *net = &c->networks[n];
		for (uint32_t i = 0; !net->local_only && i < net->endpoints_n; i++)
			if (net->endpoints[i].local && net->endpoints[i].ip == ip)
				return (int)n;
	}
	return -1;
}

static bool in_subnet(const struct iod_flow_dp_network *n, uint32_t ip)
{
	uint32_t mask = n->prefix_len ? ~0u << (32 - n->prefix_len) : 0;
	return (ip & mask) == (n->subnet & mask);
}

/* Whether ip is in some network's subnet (an overlay address). */
static bool overlay_addr(const struct iod_flow_dp_config *c, uint32_t ip)
{
	for (uint32_t n = 0; n < c->networks_n; n++)
		if (in_subnet(&c->networks[n], ip))
			return true;
	return false;
}

/* The record of drop k at now_ms: NULL when it repeats a recent one (same
 * 5-tuple within DEDUP_MS; with spoofer, also the anti-spoofing rule and that
 * replica), whose count it adds to; else a new record, the ring's next slot,
 * with the tuple, times and count filled in. */
static struct iod_agent_drop *record(struct iod_agent_drops *d, const struct iod_flow_key *k,
                                     const char *spoofer, uint64_t now_ms)
{
	for (uint32_t i = 0; i < d->n && i < DEDUP_SCAN; i++) {
		struct iod_agent_drop *x =
		    &d->ring[(d->head + IOD_AGENT_DROPS_MAX - 1 - i) % IOD_AGENT_DROPS_MAX];
		if (spoofer && (strcmp(x->rule, SPOOF_RULE) || strcmp(x->src_name, spoofer)))
			continue;
		if (x->src == k->src.v4 && x->dst == k->dst.v4 && x->sport == k->sport &&
		    x->dport == k->dport && x->proto == k->proto &&
		    now_ms - x->last_ms < DEDUP_MS) {
			x->count++;
			x->last_ms = now_ms;
			return NULL;
		}
	}
	struct iod_agent_drop *x = &d->ring[d->head];
	memset(x, 0, sizeof(*x));
	x->seq = ++d->seq;
	x->first_ms = x->last_ms = now_ms;
	x->count = 1;
	x->src = k->src.v4;
	x->dst = k->dst.v4;
	x->sport = k->sport;
	x->dport = k->dport;
	x->proto = k->proto;
	x->tcp_flags = k->tcp_flags;
	d->head = (d->head + 1) % IOD_AGENT_DROPS_MAX;
	if (d->n < IOD_AGENT_DROPS_MAX)
		d->n++;
	return x;
}

void iod_agent_drops_note(struct iod_agent_drops *d, const struct iod_flow_dp_config *c,
                          const struct iod_agent_overlay_table *t, const struct iod_flow_key *k,
                          bool from_fabric, uint64_t now_ms)
{
	char rule[sizeof(d->ring[0].rule)], why[sizeof(d->ring[0].why)], dst[20];
	const char *tenant = "";
	bool policy = true;
	if (from_fabric && !k->tunnelled && !overlay_addr(c, k->dst.v4))
		return; /* the host's own underlay traffic (its kernel takes it): no drop */
	d->dropped++;
	d->dirty = true;
	if (k->family != IOD_NET_AF_V4)
		return; /* the overlay is IPv4: nothing else is classified */
	iod_agent_ipv4_format(k->dst.v4, dst, sizeof(dst));
	int n = network_of(c, k, from_fabric);
	const struct iod_agent_overlay_ep *de = by_ip(t, k->dst.v4);
	if (n < 0) {
		snprintf(rule, sizeof(rule), "%s",
		         from_fabric ? "vtep/unknown-vni" : "switch/unknown-source");
		snprintf(why, sizeof(why), "%s",
		         from_fabric ? "VNI of no local tenant" : "source is no local replica");
	} else {
		const struct iod_flow_dp_network *net = &c->networks[n];
		tenant = net->name;
		int a = iod_flow_dp_acl_verdict(c, k, !from_fabric);
		uint16_t ri = a >= 0 ? c->acls[a].rule : IOD_AGENT_SG_RULE_NONE;
		if (t && ri < t->sg_rules_n) {
			/* a security group's rule (sg.c): a deny, or its default */
			const struct iod_agent_sg_rule *x = &t->sg_rules[ri];
			snprintf(rule, sizeof(rule), "%s", x->name);
			snprintf(why, sizeof(why), "%s %s:%u: %s", c->acls[a].egress ? "to" : "at",
			         dst, k->dport,
			         x->r.name[0] ? "a deny rule of its security group"
			                      : "no rule of its security group allows it");
		} else if (has_endpoint(net, k->dst.v4)) {
			/* routed: no policy dropped it (a meter, an invalid state) */
			snprintf(rule, sizeof(rule), "tenant-%s/other", tenant);
			snprintf(why, sizeof(why), "not a policy drop");
			policy = false;
		} else if (in_subnet(net, k->dst.v4)) {
			snprintf(rule, sizeof(rule), "tenant-%s/deny-other-tenants", tenant);
			if (de)
				snprintf(why, sizeof(why), "%s is tenant %s's (%s), not %s's", dst,
				         de->tenant, de->name, tenant);
			else
				snprintf(why, sizeof(why), "%s is no replica of tenant %s", dst,
				         tenant);
		} else {
			snprintf(rule, sizeof(rule), "tenant-%s/no-route", tenant);
			snprintf(why, sizeof(why), "%s is outside the overlay", dst);
		}
	}
	struct iod_agent_drop_rule *r = rule_of(d, rule);
	if (r)
		r->dropped++;
	bool is_new = k->proto != IOD_NET_PROTO_TCP ||
	              ((k->tcp_flags & IOD_NET_TCP_SYN) && !(k->tcp_flags & IOD_NET_TCP_ACK));
	if (!policy || !is_new)
		return;
	/* a repeat of a recent record: its count */
	struct iod_agent_drop *x = record(d, k, NULL, now_ms);
	if (!x)
		return;
	x->from_fabric = from_fabric;
	const struct iod_agent_overlay_ep *se = by_ip(t, k->src.v4);
	if (se)
		iod_strlcpy(x->src_name, se->name, sizeof(x->src_name));
	if (de)
		iod_strlcpy(x->dst_name, de->name, sizeof(x->dst_name));
	iod_strlcpy(x->tenant, tenant, sizeof(x->tenant));
	iod_strlcpy(x->rule, rule, sizeof(x->rule));
	iod_strlcpy(x->why, why, sizeof(x->why));
}

void iod_agent_drops_spoof(struct iod_agent_drops *d, const char *replica, uint32_t bound_ip,
                           enum iod_net_spoof_verdict v, const struct iod_flow_key *k,
                           uint64_t now_ms)
{
	static const char rule[] = SPOOF_RULE;
	char b[20], src[20] = "?";
	IOD_ASSERT(v != IOD_NET_SPOOF_OK);
	d->dropped++;
	d->dirty = true;
	struct iod_agent_drop_rule *r = rule_of(d, rule);
	if (r)
		r->dropped++;
	struct iod_flow_key none = {0};
	if (!k || k->family != IOD_NET_AF_V4)
		k = &none;
	/* a repeat of a recent record: its count (a flood stays one record) */
	struct iod_agent_drop *x = record(d, k, replica, now_ms);
	if (!x)
		return;
	iod_strlcpy(x->src_name, replica, sizeof(x->src_name));
	iod_strlcpy(x->rule, rule, sizeof(x->rule));
	iod_agent_ipv4_format(bound_ip, b, sizeof(b));
	if (k->src.v4)
		iod_agent_ipv4_format(k->src.v4, src, sizeof(src));
	snprintf(x->why, sizeof(x->why), "%s: its port is bound to %s; sent from %s",
	         iod_net_spoof_name(v), b, src);
}

/* Rule's admitted new sessions as the running pipeline counts them;
 * create: count a rule not seen yet even when it admitted nothing. */
static void admitted(struct iod_agent_drops *d, const char *rule, uint64_t reading,
                     bool new_pipeline, bool create)
{
	struct iod_agent_drop_rule *r = NULL;
	for (uint32_t i = 0; i < d->rules_n && !r; i++)
		if (!strcmp(d->rules[i].rule, rule))
			r = &d->rules[i];
	if (!r && create)
		r = rule_of(d, rule);
	if (!r)
		return;
	if (new_pipeline) { /* the old pipeline's count stays counted */
		r->fwd_base += r->fwd_seen;
		r->fwd_seen = 0;
	}
	if (reading > r->fwd_seen)
		r->fwd_seen = reading;
	uint64_t f = r->fwd_base + r->fwd_seen;
	if (f != r->forwarded)
		d->dirty = true;
	r->forwarded = f;
}

void iod_agent_drops_admitted(struct iod_agent_drops *d, const char *tenant, uint64_t reading,
                              bool new_pipeline)
{
	char rule[sizeof(d->rules[0].rule)];
	snprintf(rule, sizeof(rule), "tenant-%s/allow-same-tenant", tenant);
	admitted(d, rule, reading, new_pipeline, true);
}

void iod_agent_drops_admitted_rule(struct iod_agent_drops *d, const char *rule, uint64_t reading,
                                   bool new_pipeline)
{
	/* a group's rule that admitted nothing yet is not counted yet */
	admitted(d, rule, reading, new_pipeline, reading > 0);
}

json_t *iod_agent_drops_json(const struct iod_agent_drops *d, const char *node)
{
	json_t *o = json_object(), *recs = json_array(), *rules = json_array();
	char a[20], b[20];
	for (uint32_t i = 0; i < d->n; i++) {
		const struct iod_agent_drop *x =
		    &d->ring[(d->head + IOD_AGENT_DROPS_MAX - d->n + i) % IOD_AGENT_DROPS_MAX];
		iod_agent_ipv4_format(x->src, a, sizeof(a));
		iod_agent_ipv4_format(x->dst, b, sizeof(b));
		json_array_append_new(
		    recs,
		    json_pack("{s:I,s:I,s:I,s:i,s:s,s:i,s:s,s:i,s:i,s:i,s:b,s:s,s:s,s:s,s:s,s:s}",
		              "seq", (json_int_t)x->seq, "first_ms", (json_int_t)x->first_ms,
		              "last_ms", (json_int_t)x->last_ms, "count", (int)x->count, "src", a,
		              "sport", (int)x->sport, "dst", b, "dport", (int)x->dport, "proto",
		              (int)x->proto, "tcp_flags", (int)x->tcp_flags, "from_fabric",
		              x->from_fabric, "src_name", x->src_name, "dst_name", x->dst_name,
		              "tenant", x->tenant, "rule", x->rule, "why", x->why));
	}
	for (uint32_t i = 0; i < d->rules_n; i++)
		json_array_append_new(rules,
		                      json_pack("{s:s,s:I,s:I}", "rule", d->rules[i].rule,
		                                "forwarded", (json_int_t)d->rules[i].forwarded,
		                                "dropped", (json_int_t)d->rules[i].dropped));
	json_object_set_new(o, "node", json_string(node ? node : ""));
	json_object_set_new(o, "dropped", json_integer((json_int_t)d->dropped));
	json_object_set_new(o, "recorded", json_integer((json_int_t)d->seq));
	json_object_set_new(o, "records", recs);
	json_object_set_new(o, "rules", rules);
	return o;
}

int iod_agent_drops_prom(const struct iod_agent_drops *d, struct iod_buf *b)
{
	int rc = iod_prom_header(b, "iod_dp_sg_verdicts_total", "counter",
	                         "Verdicts of the virtual switch's security-group rules: new "
	                         "sessions forwarded, packets dropped");
	char labels[4 * IOD_NAME_MAX];
	for (uint32_t i = 0; i < d->rules_n && !rc; i++) {
		const struct iod_agent_drop_rule *r = &d->rules[i];
		rc = iod_prom_labels(labels, sizeof(labels), "rule", r->rule, "verdict",
		                     "forwarded", (const char *)NULL);
		if (!rc)
			rc = iod_prom_u64(b, "iod_dp_sg_verdicts_total", labels, r->forwarded);
		if (!rc)
			rc = iod_prom_labels(labels, sizeof(labels), "rule", r->rule, "verdict",
			                     "dropped", (const char *)NULL);
		if (!rc)
			rc = iod_prom_u64(b, "iod_dp_sg_verdicts_total", labels, r->dropped);
	}
	return rc;
}
