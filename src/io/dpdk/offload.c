/*
 * offload.c (dpdk): the DPDK half of the offload translator: rules from
 * iod_flow_offload_translate() become rte_flow attributes, pattern items
 * and actions; each is checked with rte_flow_validate on the port and
 * created with rte_flow_create when the port accepts it. The template API
 * (rte_flow_info_get / rte_flow_configure) is probed first and reported;
 * rules go through validate/create either way. What the port rejects stays
 * in software, with the port's own message as the reason.
 *
 * Control path only. Linked into build/iod and benchmarks (see io.h).
 */
#include "iod/io.h"

#include <rte_ethdev.h>
#include <rte_flow.h>
#include <stdlib.h>
#include <string.h>

#define REASON_MAX 160

struct off_entry {
	int8_t state;            /* -1 not translated, 0 software, 1 offloaded */
	char reason[REASON_MAX]; /* why it stays in software, or the rule it became */
	struct rte_flow *flow;   /* created rule */
};

struct iod_io_offload {
	uint16_t port;                                        /* DPDK port */
	char port_name[64];                                   /* its name */
	int template_rc;                                      /* rte_flow_info_get result */
	uint32_t pipes_n;                                     /* pipes */
	uint32_t entries_max[IOD_FLOW_PIPES_MAX];             /* per pipe */
	struct off_entry *e[IOD_FLOW_PIPES_MAX];              /* per pipe, entries_max */
	uint32_t rules, offloaded, software, validate_errors; /* counts */
};

/* Everything one rte_flow rule needs, kept alive while validating. */
struct rule_buf {
	struct rte_flow_attr attr;
	struct rte_flow_item items[12];
	struct rte_flow_action actions[24];
	struct rte_flow_item_eth eth_s, eth_m, ieth_s, ieth_m;
	struct rte_flow_item_ipv4 ip_s, ip_m, iip_s, iip_m;
	struct rte_flow_item_udp udp_s, udp_m, iudp_s, iudp_m;
	struct rte_flow_item_tcp itcp_s, itcp_m, tcp_s, tcp_m;
	struct rte_flow_item_vxlan vx_s, vx_m;
	struct rte_flow_item_meta meta_s, meta_m;
	struct rte_flow_action_jump jump;
	struct rte_flow_action_port_id port_id, mirror_port;
	struct rte_flow_action_rss rss;
	uint16_t queues[16];
	struct rte_flow_action_set_meta set_meta;
	struct rte_flow_action_set_tag set_tag;
	struct rte_flow_action_set_ipv4 set_dst, set_src;
	struct rte_flow_action_set_tp set_dport, set_sport;
	struct rte_flow_action_set_mac set_dmac, set_smac;
	struct rte_flow_action_set_dscp dscp;
	struct rte_flow_action_count count;
	struct rte_flow_action_meter meter;
	struct rte_flow_action_age age;
	struct rte_flow_action_sample sample;
	struct rte_flow_action sample_acts[2];
	struct rte_flow_action_vxlan_encap encap;
	struct rte_flow_item encap_items[5];
	struct rte_flow_item_eth en_eth;
	struct rte_flow_item_ipv4 en_ip;
	struct rte_flow_item_udp en_udp;
	struct rte_flow_item_vxlan en_vx;
};

static void vni_bytes(uint32_t vni, uint8_t out[3])
{
	out[0] = (uint8_t)(vni >> 16);
	out[1] = (uint8_t)(vni >> 8);
	out[2] = (uint8_t)vni;
}

static void build(const struct iod_flow_hw_rule *r, struct rule_buf *b)
{
	memset(b, 0, sizeof(*b));
	b->attr.group = r->group;
	b->attr.priority = r->priority;
	b->attr.ingress = 1;
	int n = 0;
	const struct iod_flow_key *s = &r->spec, *m = &r->mask;
#define ITEM(t, sp, mk)                  \
	do {                             \
		b->items[n].type = (t);  \
		b->items[n].spec = (sp); \
		b->items[n].mask = (mk); \
		n++;                     \
	} while (0)
	ITEM(RTE_FLOW_ITEM_TYPE_ETH, NULL, NULL);
	if (r->items & IOD_FLOW_HW_ARP) {
		b->eth_s.hdr.ether_type = rte_cpu_to_be_16(IOD_NET_ETH_P_ARP);
		b->eth_m.hdr.ether_type = 0xffff;
		b->items[0].spec = &b->eth_s;
		b->items[0].mask = &b->eth_m;
	}
	if (r->items & IOD_FLOW_HW_VXLAN) {
		b->ip_s.hdr.dst_addr = rte_cpu_to_be_32(s->outer_dst_ip);
		b->ip_m.hdr.dst_addr = rte_cpu_to_be_32(m->outer_dst_ip);
		ITEM(RTE_FLOW_ITEM_TYPE_IPV4, &b->ip_s, &b->ip_m);
		b->udp_s.hdr.dst_port = rte_cpu_to_be_16(IOD_NET_VXLAN_PORT);
		b->udp_m.hdr.dst_port = 0xffff;
		ITEM(RTE_FLOW_ITEM_TYPE_UDP, &b->udp_s, &b->udp_m);
		vni_bytes(s->vni, b->vx_s.vni);
		vni_bytes(m->vni, b->vx_m.vni);
		ITEM(RTE_FLOW_ITEM_TYPE_VXLAN, &b->vx_s, &b->vx_m);
	}
	struct rte_flow_item_ipv4 *is = &b->ip_s, *im = &b->ip_m;
	if (r->items & IOD_FLOW_HW_IN_ETH) {
		ITEM(RTE_FLOW_ITEM_TYPE_ETH, NULL, NULL);
		is = &b->iip_s;
		im = &b->iip_m;
	}
	if (r->items & (IOD_FLOW_HW_IN_IPV4 | IOD_FLOW_HW_IPV4) &&
	    !((r->items & IOD_FLOW_HW_VXLAN) && !(r->items & IOD_FLOW_HW_IN_IPV4))) {
		is->hdr.src_addr = rte_cpu_to_be_32(s->src.v4);
		im->hdr.src_addr = rte_cpu_to_be_32(m->src.v4);
		is->hdr.dst_addr = rte_cpu_to_be_32(s->dst.v4);
		im->hdr.dst_addr = rte_cpu_to_be_32(m->dst.v4);
		is->hdr.next_proto_id = s->proto;
		im->hdr.next_proto_id = m->proto;
		ITEM(RTE_FLOW_ITEM_TYPE_IPV4, is, im);
	}
	if (r->items & (IOD_FLOW_HW_UDP | IOD_FLOW_HW_IN_UDP)) {
		struct rte_flow_item_udp *us =
		    r->items & IOD_FLOW_HW_IN_UDP ? &b->iudp_s : &b->udp_s;
		struct rte_flow_item_udp *um =
		    r->items & IOD_FLOW_HW_IN_UDP ? &b->iudp_m : &b->udp_m;
		us->hdr.src_port = rte_cpu_to_be_16(s->sport);
		um->hdr.src_port = rte_cpu_to_be_16(m->sport);
		us->hdr.dst_port = rte_cpu_to_be_16(s->dport);
		um->hdr.dst_port = rte_cpu_to_be_16(m->dport);
		ITEM(RTE_FLOW_ITEM_TYPE_UDP, us, um);
	}
	if (r->items & (IOD_FLOW_HW_TCP | IOD_FLOW_HW_IN_TCP)) {
		b->itcp_s.hdr.src_port = rte_cpu_to_be_16(s->sport);
		b->itcp_m.hdr.src_port = rte_cpu_to_be_16(m->sport);
		b->itcp_s.hdr.dst_port = rte_cpu_to_be_16(s->dport);
		b->itcp_m.hdr.dst_port = rte_cpu_to_be_16(m->dport);
		ITEM(RTE_FLOW_ITEM_TYPE_TCP, &b->itcp_s, &b->itcp_m);
	}
	if (r->items & IOD_FLOW_HW_META) {
		b->meta_s.data = s->meta;
		b->meta_m.data = m->meta;
		ITEM(RTE_FLOW_ITEM_TYPE_META, &b->meta_s, &b->meta_m);
	}
	ITEM(RTE_FLOW_ITEM_TYPE_END, NULL, NULL);
#undef ITEM

	int a = 0;
#define ACT(t, c)                         \
	do {                              \
		b->actions[a].type = (t); \
		b->actions[a].conf = (c); \
		a++;                      \
	} while (0)
	const struct iod_flow_actions *x = &r->act;
	if (r->actions & IOD_FLOW_HW_A_COUNT)
		ACT(RTE_FLOW_ACTION_TYPE_COUNT, &b->count);
	if (r->actions & IOD_FLOW_HW_A_METER) {
		b->meter.mtr_id = r->group << 16 | r->priority;
		ACT(RTE_FLOW_ACTION_TYPE_METER, &b->meter);
	}
	if (r->actions & IOD_FLOW_HW_A_AGE) {
		b->age.timeout = r->aging_s;
		ACT(RTE_FLOW_ACTION_TYPE_AGE, &b->age);
	}
	if (r->actions & IOD_FLOW_HW_A_MIRROR) {
		b->mirror_port.id = r->mirror_port;
		b->sample.ratio = 1;
		b->sample_acts[0].type = RTE_FLOW_ACTION_TYPE_PORT_ID;
		b->sample_acts[0].conf = &b->mirror_port;
		b->sample_acts[1].type = RTE_FLOW_ACTION_TYPE_END;
		b->sample.actions = b->sample_acts;
		ACT(RTE_FLOW_ACTION_TYPE_SAMPLE, &b->sample);
	}
	if (r->actions & IOD_FLOW_HW_A_DECAP)
		ACT(RTE_FLOW_ACTION_TYPE_VXLAN_DECAP, NULL);
	if (r->actions & IOD_FLOW_HW_A_SET_META) {
		b->set_meta.data = x->meta;
		b->set_meta.mask = UINT32_MAX;
		ACT(RTE_FLOW_ACTION_TYPE_SET_META, &b->set_meta);
	}
	if (r->actions & IOD_FLOW_HW_A_SET_TAG) {
		b->set_tag.data = x->zone;
		b->set_tag.mask = 0xffff;
		ACT(RTE_FLOW_ACTION_TYPE_SET_TAG, &b->set_tag);
	}
	if (r->actions & IOD_FLOW_HW_A_SET_DST) {
		b->set_dst.ipv4_addr = rte_cpu_to_be_32(x->nat_ip);
		ACT(RTE_FLOW_ACTION_TYPE_SET_IPV4_DST, &b->set_dst);
		if (x->nat_port) {
			b->set_dport.port = rte_cpu_to_be_16(x->nat_port);
			ACT(RTE_FLOW_ACTION_TYPE_SET_TP_DST, &b->set_dport);
		}
	}
	if (r->actions & IOD_FLOW_HW_A_SET_SRC) {
		b->set_src.ipv4_addr = rte_cpu_to_be_32(x->nat_ip);
		ACT(RTE_FLOW_ACTION_TYPE_SET_IPV4_SRC, &b->set_src);
		if (x->nat_port) {
			b->set_sport.port = rte_cpu_to_be_16(x->nat_port);
			ACT(RTE_FLOW_ACTION_TYPE_SET_TP_SRC, &b->set_sport);
		}
	}
	if (r->actions & IOD_FLOW_HW_A_DEC_TTL)
		ACT(RTE_FLOW_ACTION_TYPE_DEC_TTL, NULL);
	if (r->actions & IOD_FLOW_HW_A_SET_MAC) {
		memcpy(b->set_dmac.mac_addr, x->dst_mac, 6);
		memcpy(b->set_smac.mac_addr, x->src_mac, 6);
		ACT(RTE_FLOW_ACTION_TYPE_SET_MAC_DST, &b->set_dmac);
		ACT(RTE_FLOW_ACTION_TYPE_SET_MAC_SRC, &b->set_smac);
	}
	if (r->actions & IOD_FLOW_HW_A_MAC_SWAP)
		ACT(RTE_FLOW_ACTION_TYPE_MAC_SWAP, NULL);
	if (r->actions & IOD_FLOW_HW_A_SET_DSCP) {
		b->dscp.dscp = x->dscp;
		ACT(RTE_FLOW_ACTION_TYPE_SET_IPV4_DSCP, &b->dscp);
	}
	if (r->actions & IOD_FLOW_HW_A_ENCAP) {
		const struct iod_net_vxlan_tunnel *t = &x->encap;
		memcpy(b->en_eth.hdr.dst_addr.addr_bytes, t->outer_dst_mac, 6);
		memcpy(b->en_eth.hdr.src_addr.addr_bytes, t->outer_src_mac, 6);
		b->en_eth.hdr.ether_type = rte_cpu_to_be_16(IOD_NET_ETH_P_IPV4);
		b->en_ip.hdr.version_ihl = 0x45;
		b->en_ip.hdr.time_to_live = t->ttl ? t->ttl : 64;
		b->en_ip.hdr.next_proto_id = IOD_NET_PROTO_UDP;
		b->en_ip.hdr.src_addr = rte_cpu_to_be_32(t->outer_src_ip);
		b->en_ip.hdr.dst_addr = rte_cpu_to_be_32(t->outer_dst_ip);
		b->en_udp.hdr.src_port = rte_cpu_to_be_16(t->src_port); /* 0: the NIC hashes */
		b->en_udp.hdr.dst_port =
		    rte_cpu_to_be_16(t->dst_port ? t->dst_port : IOD_NET_VXLAN_PORT);
		b->en_vx.flags = 0x08;
		vni_bytes(t->vni, b->en_vx.vni);
		b->encap_items[0] =
		    (struct rte_flow_item){RTE_FLOW_ITEM_TYPE_ETH, &b->en_eth, NULL, NULL};
		b->encap_items[1] =
		    (struct rte_flow_item){RTE_FLOW_ITEM_TYPE_IPV4, &b->en_ip, NULL, NULL};
		b->encap_items[2] =
		    (struct rte_flow_item){RTE_FLOW_ITEM_TYPE_UDP, &b->en_udp, NULL, NULL};
		b->encap_items[3] =
		    (struct rte_flow_item){RTE_FLOW_ITEM_TYPE_VXLAN, &b->en_vx, NULL, NULL};
		b->encap_items[4].type = RTE_FLOW_ITEM_TYPE_END;
		b->encap.definition = b->encap_items;
		ACT(RTE_FLOW_ACTION_TYPE_VXLAN_ENCAP, &b->encap);
	}
	if (r->actions & IOD_FLOW_HW_A_JUMP) {
		b->jump.group = r->jump_group;
		ACT(RTE_FLOW_ACTION_TYPE_JUMP, &b->jump);
	} else if (r->actions & IOD_FLOW_HW_A_PORT) {
		b->port_id.id = r->fwd.port;
		ACT(RTE_FLOW_ACTION_TYPE_PORT_ID, &b->port_id);
	} else if (r->actions & IOD_FLOW_HW_A_RSS) {
		uint16_t q = IOD_MIN(r->fwd.rss_queues, (uint16_t)16);
		for (uint16_t i = 0; i < q; i++)
			b->queues[i] = i;
		b->rss.queue_num = q;
		b->rss.queue = b->queues;
		ACT(RTE_FLOW_ACTION_TYPE_RSS, &b->rss);
	} else {
		ACT(RTE_FLOW_ACTION_TYPE_DROP, NULL);
	}
	ACT(RTE_FLOW_ACTION_TYPE_END, NULL);
#undef ACT
}

int iod_io_offload_create(struct iod_io_offload **out, const struct iod_flow_pipeline *pl,
                          const char *port_name, struct iod_err *e)
{
	int rc = iod_io_dpdk_init(port_name, e);
	if (rc)
		return rc;
	struct iod_io_offload *o = calloc(1, sizeof(*o));
	if (!o)
		return iod_err_set(e, -ENOMEM, "out of memory");
	snprintf(o->port_name, sizeof(o->port_name), "%s", port_name);
	if (rte_eth_dev_get_port_by_name(port_name, &o->port)) {
		free(o);
		return iod_err_set(e, -ENODEV, "offload: DPDK port \"%s\" does not exist",
		                   port_name);
	}
	struct rte_flow_port_info pi;
	struct rte_flow_queue_info qi;
	struct rte_flow_error fe;
	memset(&fe, 0, sizeof(fe));
	o->template_rc = rte_flow_info_get(o->port, &pi, &qi, &fe);
	o->pipes_n = iod_flow_pipes_n(pl);
	static struct rule_buf b; /* large; control path, one at a time */
	for (uint32_t p = 0; p < o->pipes_n; p++) {
		uint32_t max = iod_flow_pipe_cfg_get(pl, p)->entries_max;
		o->entries_max[p] = max;
		o->e[p] = calloc(max ? max : 1, sizeof(struct off_entry));
		if (!o->e[p]) {
			iod_io_offload_destroy(o);
			return iod_err_set(e, -ENOMEM, "out of memory");
		}
		for (uint32_t i = 0; i < max; i++)
			o->e[p][i].state = -1;
		uint32_t pos = 0, id;
		while (iod_flow_entry_next(pl, p, &pos, &id, NULL)) {
			struct iod_flow_hw_rule r;
			struct off_entry *oe = &o->e[p][id];
			iod_flow_offload_translate(pl, p, id, &r);
			o->rules++;
			if (r.unsupported) {
				oe->state = 0;
				snprintf(oe->reason, sizeof(oe->reason), "not expressible: %s",
				         r.unsupported);
				o->software++;
				continue;
			}
			build(&r, &b);
			memset(&fe, 0, sizeof(fe));
			int v = rte_flow_validate(o->port, &b.attr, b.items, b.actions, &fe);
			if (v) {
				oe->state = 0;
				snprintf(oe->reason, sizeof(oe->reason),
				         "rte_flow_validate on %s: %s (%d); runs in software",
				         port_name, fe.message ? fe.message : rte_strerror(-v), v);
				o->software++;
				o->validate_errors++;
				continue;
			}
			oe->flow = rte_flow_create(o->port, &b.attr, b.items, b.actions, &fe);
			if (!oe->flow) {
				oe->state = 0;
				snprintf(oe->reason, sizeof(oe->reason),
				         "rte_flow_create on %s: %s; runs in software", port_name,
				         fe.message ? fe.message : "failed");
				o->software++;
				continue;
			}
			oe->state = 1;
			snprintf(oe->reason, sizeof(oe->reason), "offloaded to %s group %u",
			         port_name, r.group);
			o->offloaded++;
		}
	}
	*out = o;
	return 0;
}

int iod_io_offload_state(void *ctx, uint32_t pipe, uint32_t entry, const char **reason)
{
	const struct iod_io_offload *o = ctx;
	if (pipe >= o->pipes_n || entry >= o->entries_max[pipe] || o->e[pipe][entry].state < 0) {
		*reason = "added after the offload pass";
		return 0;
	}
	*reason = o->e[pipe][entry].reason;
	return o->e[pipe][entry].state;
}

json_t *iod_io_offload_summary(const struct iod_io_offload *o)
{
	json_t *j = json_object();
	json_object_set_new(j, "port", json_string(o->port_name));
	json_object_set_new(j, "template_api",
	                    json_string(o->template_rc == 0 ? "supported (rules still use "
	                                                      "rte_flow_validate/create)"
	                                                    : "not supported by this port; "
	                                                      "rte_flow_create path"));
	json_object_set_new(j, "template_api_rc", json_integer(o->template_rc));
	json_object_set_new(j, "rules", json_integer(o->rules));
	json_object_set_new(j, "offloaded", json_integer(o->offloaded));
	json_object_set_new(j, "software", json_integer(o->software));
	json_object_set_new(j, "validate_errors", json_integer(o->validate_errors));
	return j;
}

void iod_io_offload_destroy(struct iod_io_offload *o)
{
	if (!o)
		return;
	struct rte_flow_error fe;
	for (uint32_t p = 0; p < o->pipes_n; p++) {
		for (uint32_t i = 0; o->e[p] && i < o->entries_max[p]; i++)
			if (o->e[p][i].flow)
				rte_flow_destroy(o->port, o->e[p][i].flow, &fe);
		free(o->e[p]);
	}
	free(o);
}
