/*
 * offload.c: the hardware-neutral half of the offload translator: a live
 * entry (with its pipe's template) becomes an rte_flow-shaped rule (group,
 * priority, pattern items with spec/mask, actions), or a reason why no
 * rte_flow rule can express it, so it stays in software.
 *
 * Pure: reads the pipeline, writes the caller's struct. The DPDK half
 * (src/io/dpdk/offload.c) turns the rule into rte_flow items and actions and
 * asks the port with rte_flow_validate.
 */
#include "internal.h"

#include <string.h>

static uint32_t group_of(const struct iod_flow_pipeline *pl, uint32_t pipe)
{
	return pl->pipes[pipe].cfg.is_root ? 0 : pipe + 1;
}

int iod_flow_offload_translate(const struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t entry,
                               struct iod_flow_hw_rule *r)
{
	memset(r, 0, sizeof(*r));
	if (pipe >= pl->pipes_n)
		return -ENOENT;
	const struct pipe *p = &pl->pipes[pipe];
	if (entry >= p->cfg.entries_max || p->entries[entry].state != ENTRY_LIVE)
		return -ENOENT;
	const struct entry *en = &p->entries[entry];
	const struct iod_flow_entry_cfg *ec = &en->cfg;
	r->group = group_of(pl, pipe);
	r->port = p->cfg.port;
	switch (p->cfg.kind) {
	case IOD_FLOW_PIPE_BASIC: r->mask = p->cfg.mask; break;
	case IOD_FLOW_PIPE_LPM:
		r->mask = p->cfg.mask;
		r->mask.dst.v4 = ec->prefix_len ? ~0u << (32 - ec->prefix_len) : 0;
		break;
	case IOD_FLOW_PIPE_CONTROL:
	case IOD_FLOW_PIPE_ACL:
		r->mask = ec->mask;
		r->priority = ec->priority;
		break;
	case IOD_FLOW_PIPE_HASH:
		r->unsupported =
		    "hash pipe: entry chosen by a software hash (no rte_flow equivalent "
		    "short of one RSS rule per bucket)";
		break;
	default: r->unsupported = "ct pipe: connection state is tracked in software"; break;
	}
	/* The spec is the entry's value under the mask, plus the pipe's constants. */
	const uint8_t *v = (const uint8_t *)&ec->match, *m = (const uint8_t *)&r->mask;
	const uint8_t *pv = (const uint8_t *)&p->cfg.match,
	              *pm = (const uint8_t *)&p->cfg.const_mask;
	uint8_t *s = (uint8_t *)&r->spec, *rm = (uint8_t *)&r->mask;
	for (size_t i = 0; i < sizeof(r->spec); i++) {
		s[i] = (uint8_t)((v[i] & m[i] & ~pm[i]) | (pv[i] & pm[i]));
		rm[i] = (uint8_t)(m[i] | pm[i]);
	}

	/* An ACL range of one port is an exact match. */
	if (p->cfg.kind == IOD_FLOW_PIPE_ACL && ec->dport_min && ec->dport_min == ec->dport_max) {
		r->spec.dport = ec->dport_min;
		r->mask.dport = 0xffff;
	}

	/* Pattern items. */
	const struct iod_flow_key *k = &r->mask;
	bool tun = (k->tunnelled && r->spec.tunnelled) || k->vni || k->outer_dst_ip;
	bool l3 = k->src.v4 || k->dst.v4 || k->proto || k->dscp;
	bool l4 = k->sport || k->dport;
	r->items |= IOD_FLOW_HW_ETH;
	if (tun)
		r->items |= IOD_FLOW_HW_IPV4 | IOD_FLOW_HW_UDP | IOD_FLOW_HW_VXLAN;
	if (k->eth_type && r->spec.eth_type == IOD_NET_ETH_P_ARP)
		r->items |= IOD_FLOW_HW_ARP;
	else if (l3 || l4)
		r->items |= tun ? IOD_FLOW_HW_IN_ETH | IOD_FLOW_HW_IN_IPV4 : IOD_FLOW_HW_IPV4;
	if (l4) {
		bool tcp = r->spec.proto == IOD_NET_PROTO_TCP,
		     udp = r->spec.proto == IOD_NET_PROTO_UDP;
		if (!k->proto || (!tcp && !udp))
			r->unsupported = r->unsupported ? r->unsupported
			                                : "ports without a TCP/UDP protocol match";
		else
			r->items |= tun ? (tcp ? IOD_FLOW_HW_IN_TCP : IOD_FLOW_HW_IN_UDP)
			                : (tcp ? IOD_FLOW_HW_TCP : IOD_FLOW_HW_UDP);
	}
	if (k->meta || k->zone)
		r->items |= IOD_FLOW_HW_META;
	if (k->ct_state && !r->unsupported)
		r->unsupported = "matches conntrack state, which software tracks";
	if (k->family && r->spec.family == IOD_NET_AF_V6 && !r->unsupported)
		r->unsupported = "IPv6 keys are not translated yet";
	if (k->in_port || k->vlan || k->tcp_flags)
		r->unsupported = r->unsupported ? r->unsupported
		                                : "matches in_port/vlan/tcp_flags (not translated)";
	if (p->cfg.kind == IOD_FLOW_PIPE_ACL &&
	    ((ec->dport_min || ec->dport_max) && ec->dport_min != ec->dport_max) && !r->unsupported)
		r->unsupported = "port range: rte_flow matches a value under a mask, a range needs "
		                 "several rules";

	/* Actions. */
	const struct iod_flow_actions *a = &en->act;
	uint32_t f = a->flags;
	r->act = *a;
	if (f & (IOD_FLOW_ACT_CT_COMMIT | IOD_FLOW_ACT_LB | IOD_FLOW_ACT_ARP_REPLY) &&
	    !r->unsupported)
		r->unsupported = f & IOD_FLOW_ACT_LB ? "service LB: Maglev pick + conntrack NAT "
		                                       "binding are software"
		                 : f & IOD_FLOW_ACT_ARP_REPLY ? "ARP reply is built in software"
		                                              : "conntrack commit is software";
	if (f & IOD_FLOW_ACT_DECAP)
		r->actions |= IOD_FLOW_HW_A_DECAP;
	if (f & IOD_FLOW_ACT_ENCAP)
		r->actions |= IOD_FLOW_HW_A_ENCAP;
	if (f & IOD_FLOW_ACT_SET_META)
		r->actions |= IOD_FLOW_HW_A_SET_META;
	if (f & IOD_FLOW_ACT_SET_ZONE)
		r->actions |= IOD_FLOW_HW_A_SET_TAG;
	if (f & IOD_FLOW_ACT_NAT_DST)
		r->actions |= IOD_FLOW_HW_A_SET_DST;
	if (f & IOD_FLOW_ACT_NAT_SRC)
		r->actions |= IOD_FLOW_HW_A_SET_SRC;
	if (f & IOD_FLOW_ACT_DEC_TTL)
		r->actions |= IOD_FLOW_HW_A_DEC_TTL;
	if (f & IOD_FLOW_ACT_SET_MAC)
		r->actions |= IOD_FLOW_HW_A_SET_MAC;
	if (f & IOD_FLOW_ACT_MAC_SWAP)
		r->actions |= IOD_FLOW_HW_A_MAC_SWAP;
	if (f & IOD_FLOW_ACT_SET_DSCP)
		r->actions |= IOD_FLOW_HW_A_SET_DSCP;
	if (en->mon & IOD_FLOW_MON_COUNT)
		r->actions |= IOD_FLOW_HW_A_COUNT;
	if (en->mon & IOD_FLOW_MON_METER)
		r->actions |= IOD_FLOW_HW_A_METER;
	if (en->mon & IOD_FLOW_MON_AGING) {
		r->actions |= IOD_FLOW_HW_A_AGE;
		r->aging_s = en->aging_s;
	}
	if (en->mon & IOD_FLOW_MON_MIRROR) {
		r->actions |= IOD_FLOW_HW_A_MIRROR;
		r->mirror_port = ec->monitor.flags & IOD_FLOW_MON_MIRROR
		                     ? ec->monitor.mirror_port
		                     : p->cfg.monitor.mirror_port;
	}
	r->fwd = en->fwd;
	switch (en->fwd.type) {
	case IOD_FLOW_FWD_PORT: r->actions |= IOD_FLOW_HW_A_PORT; break;
	case IOD_FLOW_FWD_RSS: r->actions |= IOD_FLOW_HW_A_RSS; break;
	case IOD_FLOW_FWD_PIPE:
		r->actions |= IOD_FLOW_HW_A_JUMP;
		r->jump_group = group_of(pl, en->fwd.pipe);
		if (pl->pipes[en->fwd.pipe].cfg.kind == IOD_FLOW_PIPE_CT && !r->unsupported)
			r->unsupported = "jumps into a ct pipe: the rest of the walk is software";
		break;
	default: r->actions |= IOD_FLOW_HW_A_DROP; break;
	}
	return 0;
}

int iod_flow_offload_verdict(void *ctx, uint32_t pipe, uint32_t entry, const char **reason)
{
	const struct iod_flow_pipeline *pl = ctx;
	struct iod_flow_hw_rule r;
	if (iod_flow_offload_translate(pl, pipe, entry, &r)) {
		*reason = "not a live entry";
		return 0;
	}
	if (r.unsupported) {
		*reason = r.unsupported;
		return 0;
	}
	*reason = "translates to an rte_flow rule (not validated: no DPDK port)";
	return 2;
}
