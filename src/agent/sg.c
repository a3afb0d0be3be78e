/*
 * sg.c: the node's virtual switch's security groups (pure): NetPolicy
 * objects (include/iod/objects.h) as the watch lists them, into the
 * overlay table's groups, and the groups of this node's replicas into the
 * data plane's endpoint-bound entries (struct iod_flow_dp_acl; src/flow/dp.c
 * puts them in its "sg" and "sgin" pipes, with conntrack in front, so
 * replies of an admitted session pass and only new sessions are checked).
 *
 * A group guards the replicas of one service. Per member and direction
 * with rules: first an allow of the node's host stack (its gateway
 * address: the agent's health checks and the mesh proxy must reach every
 * replica), then the rules in order (a peer service becomes one entry per
 * replica of it, of the group's tenant, that has an address, and for an
 * egress rule one more for the peer's VIP: the "sg" pipe runs before the
 * VIP's DNAT, so without it a client dialling the VIP would be checked
 * against the VIP, which no rule by service names), then the group's
 * "<name>/default-deny". A direction without rules keeps the
 * tenant default (docs/network.md).
 *
 * The l7 path: a service whose VIP leads to the node's mesh proxy is
 * reached by a connection the proxy opens from the host stack, which the
 * callee's ingress group admits (its gateway allow). So its ingress group
 * is checked at the caller's switch instead: for each local replica the
 * group refuses (its rules in order, the first that names the caller by
 * service or address and covers the VIP decides; none: default-deny), an
 * egress deny of the VIP's port, ahead of every other entry, under the
 * deciding rule's name. A caller the group admits gets no entry, so its
 * own egress group still decides. The tenant default itself is the
 * route table's (overlay.c): a group can narrow what a tenant may reach,
 * never widen it. Deterministic: groups in name order, members in the
 * order of the local ports, rules in the object's order. It must never do
 * I/O or read the clock.
 */
#include "iod/agent.h"
#include "iod/flow.h"
#include "iod/objects.h"

#include <stdlib.h>
#include <string.h>

static int by_sg_name(const void *a, const void *b)
{
	return strcmp(((const struct iod_agent_sg *)a)->name,
	              ((const struct iod_agent_sg *)b)->name);
}

/* Append a rule named "<sg>/<name>" to t; -ENOSPC when full. */
static int rule_add(struct iod_agent_overlay_table *t, const char *sg, const char *name,
                    bool egress, const struct iod_obj_netpolicy_rule *r)
{
	if (t->sg_rules_n == IOD_AGENT_SG_RULES_MAX)
		return -ENOSPC;
	struct iod_agent_sg_rule *x = &t->sg_rules[t->sg_rules_n++];
	memset(x, 0, sizeof(*x));
	snprintf(x->name, sizeof(x->name), "%s/%s", sg, name);
	x->egress = egress;
	if (r)
		x->r = *r;
	return 0;
}

/* Object o (its name and value) into group t->sgs[t->sgs_n]. */
static int sg_add(struct iod_agent_overlay_table *t, const char *name, const json_t *v,
                  struct iod_err *e)
{
	struct iod_obj_netpolicy p;
	int rc = iod_obj_netpolicy_from_json(v, &p, e);
	if (!rc)
		rc = iod_obj_netpolicy_check(&p, e);
	if (rc) {
		iod_obj_netpolicy_free(&p);
		iod_err_wrap(e, "netpolicy/%s (not enforced)", name);
		return -EINVAL;
	}
	uint32_t rules0 = t->sg_rules_n;
	struct iod_agent_sg *g = &t->sgs[t->sgs_n];
	memset(g, 0, sizeof(*g));
	iod_strlcpy(g->name, name, sizeof(g->name));
	iod_strlcpy(g->tenant, p.tenant[0] ? p.tenant : "default", sizeof(g->tenant));
	iod_strlcpy(g->service, p.service, sizeof(g->service));
	g->rules_first = (uint16_t)t->sg_rules_n;
	const json_t *dirs[2] = {p.ingress, p.egress};
	for (int d = 0; d < 2 && !rc; d++)
		for (size_t i = 0; i < json_array_size(dirs[d]) && !rc; i++) {
			struct iod_obj_netpolicy_rule r;
			iod_obj_netpolicy_rule_parse(json_array_get(dirs[d], i), &r, NULL);
			rc = rule_add(t, name, r.name, d == 1, &r);
			if (d)
				g->egress = true;
			else
				g->ingress = true;
		}
	g->rules_n = (uint16_t)(t->sg_rules_n - g->rules_first);
	g->deny_rule = (uint16_t)t->sg_rules_n;
	if (!rc)
		rc = rule_add(t, name, "default-deny", false, NULL);
	iod_obj_netpolicy_free(&p);
	if (rc) {
		t->sg_rules_n = rules0;
		return iod_err_set(e, -ENOSPC,
		                   "netpolicy/%s: more than %d security-group rules on the node "
		                   "(IOD_AGENT_SG_RULES_MAX): not enforced",
		                   name, IOD_AGENT_SG_RULES_MAX);
	}
	t->sgs_n++;
	return 0;
}

int iod_agent_sg_from_state(const json_t *netpolicies, struct iod_agent_overlay_table *t,
                            struct iod_err *e)
{
	size_t i;
	json_t *x;
	int rc = 0;
	t->sgs_n = 0;
	t->sg_rules_n = 0;
	json_array_foreach(json_object_get(netpolicies, "items"), i, x)
	{
		const char *name = NULL;
		if (iod_json_get_str(x, "name", &name) || strlen(name) >= IOD_NAME_MAX)
			continue;
		if (t->sgs_n == IOD_AGENT_SGS_MAX) {
			rc = iod_err_set(
			    e, -ENOSPC,
			    "more than %d netpolicies (IOD_AGENT_SGS_MAX): the rest are "
			    "not enforced",
			    IOD_AGENT_SGS_MAX);
			break;
		}
		int r = sg_add(t, name, json_object_get(x, "value"), e);
		if (r && !rc)
			rc = r; /* the first error is the one named; the rest still load */
	}
	/* name order: the groups' entries do not depend on the list's order
	 * (each group's rules stay where they are in sg_rules) */
	qsort(t->sgs, t->sgs_n, sizeof(t->sgs[0]), by_sg_name);
	return rc;
}

static int acl_add(struct iod_flow_dp_config *c, uint32_t member, bool egress, bool deny,
                   uint32_t peer, uint8_t plen, const struct iod_obj_netpolicy_rule *r,
                   uint16_t rule)
{
	if (c->acls_n == IOD_DP_ACLS_MAX)
		return -ENOSPC;
	struct iod_flow_dp_acl *a = &c->acls[c->acls_n++];
	memset(a, 0, sizeof(*a));
	a->member_ip = member;
	a->egress = egress;
	a->deny = deny;
	a->peer_ip = plen ? peer & (~0u << (32 - plen)) : 0;
	a->peer_prefix_len = plen;
	a->port_max = 65535;
	a->rule = rule;
	if (r) {
		a->proto = r->proto;
		a->port_min = r->port_min;
		a->port_max = r->port_max;
	}
	return 0;
}

/* The entries of rule x (index ri) for member: one per peer address. */
static int rule_acls(const struct iod_agent_overlay_table *t, const struct iod_agent_sg *g,
                     const struct iod_agent_sg_rule *x, uint16_t ri, uint32_t member,
                     struct iod_flow_dp_config *c)
{
	int rc = 0;
	if (!x->r.peer[0])
		return acl_add(c, member, x->egress, x->r.deny, x->r.cidr_ip, x->r.prefix_len,
		               &x->r, ri);
	for (uint32_t i = 0; i < t->n && !rc; i++) {
		const struct iod_agent_overlay_ep *ep = &t->eps[i];
		if (ep->ip && !strcmp(ep->service, x->r.peer) && !strcmp(ep->tenant, g->tenant))
			rc = acl_add(c, member, x->egress, x->r.deny, ep->ip, 32, &x->r, ri);
	}
	for (uint32_t s = 0; x->egress && s < t->svcs_n && !rc; s++) {
		const struct iod_agent_overlay_svc *sv = &t->svcs[s];
		if (strcmp(sv->name, x->r.peer) || strcmp(sv->tenant, g->tenant) ||
		    !iod_agent_sg_rule_covers_vip(t, &x->r, sv))
			continue;
		struct iod_obj_netpolicy_rule at = x->r; /* the VIP at its own port */
		at.proto = sv->proto;
		at.port_min = at.port_max = sv->port;
		rc = acl_add(c, member, true, x->r.deny, sv->vip, 32, &at, ri);
	}
	return rc;
}

bool iod_agent_sg_rule_covers_vip(const struct iod_agent_overlay_table *t,
                                  const struct iod_obj_netpolicy_rule *r,
                                  const struct iod_agent_overlay_svc *sv)
{
	if (r->proto && r->proto != sv->proto)
		return false;
	if (r->port_min <= sv->port && sv->port <= r->port_max)
		return true;
	for (uint32_t i = 0; i < t->n; i++) {
		const struct iod_agent_overlay_ep *ep = &t->eps[i];
		if (ep->port && !strcmp(ep->service, sv->name) && !strcmp(ep->tenant, sv->tenant) &&
		    r->port_min <= ep->port && ep->port <= r->port_max)
			return true;
	}
	return false;
}

/* Does group g's ingress admit caller at l7 service sv's VIP? *rule: the
 * rule that decides (g's default-deny when none matches). */
static bool ingress_admits(const struct iod_agent_overlay_table *t, const struct iod_agent_sg *g,
                           const struct iod_agent_overlay_ep *caller,
                           const struct iod_agent_overlay_svc *sv, uint16_t *rule)
{
	for (uint16_t i = 0; i < g->rules_n; i++) {
		uint16_t ri = (uint16_t)(g->rules_first + i);
		const struct iod_obj_netpolicy_rule *r = &t->sg_rules[ri].r;
		if (t->sg_rules[ri].egress)
			continue;
		bool peer =
		    r->peer[0]
		        ? !strcmp(r->peer, caller->service) && !strcmp(caller->tenant, g->tenant)
		        : !r->prefix_len ||
		              !((caller->ip ^ r->cidr_ip) & (~0u << (32 - r->prefix_len)));
		if (!peer || !iod_agent_sg_rule_covers_vip(t, r, sv))
			continue;
		*rule = ri;
		return !r->deny;
	}
	*rule = g->deny_rule;
	return false;
}

/* The l7 services' ingress groups, checked for the local callers (above). */
static int l7_ingress_acls(const struct iod_agent_overlay_table *t,
                           const struct iod_agent_overlay_local *loc, uint32_t nloc,
                           struct iod_flow_dp_config *c)
{
	int rc = 0;
	for (uint32_t m = 0; m < nloc && !rc && t->proxy; m++) {
		const struct iod_agent_overlay_ep *ep = iod_agent_overlay_find(t, loc[m].name);
		if (!ep || !loc[m].ip)
			continue;
		for (uint32_t s = 0; s < t->svcs_n && !rc; s++) {
			const struct iod_agent_overlay_svc *sv = &t->svcs[s];
			if (!sv->l7 || strcmp(sv->tenant, ep->tenant))
				continue; /* l4: the callee's switch checks; another tenant: no route */
			for (uint32_t gi = 0; gi < t->sgs_n && !rc; gi++) {
				const struct iod_agent_sg *g = &t->sgs[gi];
				uint16_t ri;
				if (!g->ingress || strcmp(g->service, sv->name) ||
				    strcmp(g->tenant, sv->tenant) ||
				    ingress_admits(t, g, ep, sv, &ri))
					continue;
				struct iod_obj_netpolicy_rule at = {
				    .proto = sv->proto, .port_min = sv->port, .port_max = sv->port};
				rc = acl_add(c, loc[m].ip, true, true, sv->vip, 32, &at, ri);
			}
		}
	}
	return rc;
}

int iod_agent_sg_compile(const struct iod_agent_overlay_node *nd,
                         const struct iod_agent_overlay_table *t,
                         const struct iod_agent_overlay_local *loc, uint32_t nloc,
                         struct iod_flow_dp_config *c, struct iod_err *e)
{
	c->acls_n = 0;
	int rc = l7_ingress_acls(t, loc, nloc, c);
	for (uint32_t s = 0; s < t->sgs_n && !rc; s++) {
		const struct iod_agent_sg *g = &t->sgs[s];
		for (uint32_t m = 0; m < nloc && !rc; m++) {
			const struct iod_agent_overlay_ep *ep =
			    iod_agent_overlay_find(t, loc[m].name);
			if (!ep || !loc[m].ip || strcmp(ep->service, g->service) ||
			    strcmp(ep->tenant, g->tenant))
				continue; /* another service's, or another tenant's of that name */
			for (int d = 0; d < 2 && !rc; d++) {
				bool egress = d == 1;
				if (egress ? !g->egress : !g->ingress)
					continue;
				rc = acl_add(c, loc[m].ip, egress, false, nd->gateway, 32, NULL,
				             IOD_AGENT_SG_RULE_NONE);
				for (uint16_t i = 0; i < g->rules_n && !rc; i++) {
					uint16_t ri = (uint16_t)(g->rules_first + i);
					if (t->sg_rules[ri].egress == egress)
						rc = rule_acls(t, g, &t->sg_rules[ri], ri,
						               loc[m].ip, c);
				}
				if (!rc)
					rc = acl_add(c, loc[m].ip, egress, true, 0, 0, NULL,
					             g->deny_rule);
			}
		}
	}
	if (rc) {
		c->acls_n = 0; /* the caller keeps the pipeline it runs */
		return iod_err_set(e, rc,
		                   "security groups: more than %d entries on node %s "
		                   "(IOD_DP_ACLS_MAX): not enforced",
		                   IOD_DP_ACLS_MAX, nd->name);
	}
	return 0;
}
