/*
 * dp_ar.c: adaptive routing in the overlay data plane of `iod dp run`. It
 * glues the pure net/ar core to packets: it picks each encapsulated
 * packet's outer UDP source port (the fabric's ECMP hashes it, so the port
 * picks the path), turns the probes the core asks for into frames, reflects
 * probe requests from remote edges and hands replies back to the core.
 *
 * It exists so the shell (src/cli/cmd_dp.c) stays a loop that moves bursts.
 * It must never allocate after create, read a clock (the caller passes
 * now_ns) or do I/O: frames are written to and read from caller buffers.
 */
#include "iod/flow_debug.h"
#include "iod/flow.h"

#include <stdlib.h>
#include <string.h>

/* One network's adaptive routing. */
struct dp_ar_net {
	struct iod_ar *ar;                    /* the core; NULL: this network does not use AR */
	uint32_t vni;                         /* its VNI (outer VXLAN header of its packets) */
	uint32_t vteps_n;                     /* remote VTEPs of its endpoints */
	uint32_t vteps[IOD_DP_ENDPOINTS_MAX]; /* their addresses, first-seen order */
	struct iod_ar_out out;                /* probes asked for and not yet sent */
	uint32_t out_pos;                     /* next probe of out to turn into a frame */
	bool prepared;                        /* iod_ar_dest_prepare ran for every VTEP */
};

struct iod_flow_dp_ar {
	uint32_t nets_n;                            /* networks of the config */
	struct dp_ar_net nets[IOD_DP_NETWORKS_MAX]; /* by config index */
	struct iod_ar_wire wire;                    /* outer headers; dst_ip per probe */
	uint64_t probes_reflected;                  /* requests from remote edges answered */
	uint64_t probe_frames;                      /* probe frames handed to the shell */
};

void iod_flow_dp_ar_config_default(struct iod_ar_config *a, enum iod_ar_policy policy)
{
	iod_ar_config_default(a, policy);
	a->probe_interval_ns = 20 * IOD_NS_PER_MS; /* a software loop idles in 1-5 ms waits */
}

/* The remote VTEPs of a network's endpoints, first-seen order; their count. */
static uint32_t remote_vteps(const struct iod_flow_dp_network *net, uint32_t *vteps)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < net->endpoints_n; i++) {
		const struct iod_flow_dp_endpoint *ep = &net->endpoints[i];
		bool seen = ep->local;
		for (uint32_t k = 0; k < n && !seen; k++)
			seen = vteps[k] == ep->vtep_ip;
		if (!seen)
			vteps[n++] = ep->vtep_ip;
	}
	return n;
}

bool iod_flow_dp_ar_matches(const struct iod_flow_dp_ar *a, const struct iod_flow_dp_config *c)
{
	bool any = false;
	for (uint32_t n = 0; n < c->networks_n; n++)
		any |= c->networks[n].ar_enabled;
	if (!a || !any)
		return !a && !any;
	if (a->nets_n != c->networks_n || a->wire.src_ip != c->vtep_ip ||
	    memcmp(a->wire.src_mac, c->vtep_mac, 6) ||
	    memcmp(a->wire.dst_mac, c->underlay_gw_mac, 6))
		return false;
	uint32_t vteps[IOD_DP_ENDPOINTS_MAX];
	for (uint32_t n = 0; n < c->networks_n; n++) {
		const struct iod_flow_dp_network *net = &c->networks[n];
		const struct dp_ar_net *d = &a->nets[n];
		if (d->vni != net->vni || !d->ar != !net->ar_enabled)
			return false;
		if (!d->ar)
			continue;
		if (memcmp(iod_ar_config(d->ar), &net->ar, sizeof(net->ar)) ||
		    remote_vteps(net, vteps) != d->vteps_n ||
		    memcmp(vteps, d->vteps, d->vteps_n * sizeof(vteps[0])))
			return false;
	}
	return true;
}

int iod_flow_dp_ar_create(const struct iod_flow_dp_config *c, struct iod_flow_dp_ar **out,
                          struct iod_err *e)
{
	*out = NULL;
	bool any = false;
	for (uint32_t n = 0; n < c->networks_n; n++)
		any |= c->networks[n].ar_enabled;
	if (!any)
		return 0;
	struct iod_flow_dp_ar *a = calloc(1, sizeof(*a));
	if (!a)
		return iod_err_set(e, -ENOMEM, "adaptive routing: out of memory");
	a->nets_n = c->networks_n;
	memcpy(a->wire.src_mac, c->vtep_mac, 6);
	memcpy(a->wire.dst_mac, c->underlay_gw_mac, 6);
	a->wire.src_ip = c->vtep_ip;
	for (uint32_t n = 0; n < c->networks_n; n++) {
		const struct iod_flow_dp_network *net = &c->networks[n];
		struct dp_ar_net *d = &a->nets[n];
		d->vni = net->vni;
		if (!net->ar_enabled)
			continue;
		int rc = iod_ar_create(&net->ar, &d->ar, e);
		if (rc) {
			iod_flow_dp_ar_destroy(a);
			return iod_err_set(e, rc, "network %s: %s", net->name, e ? e->msg : "");
		}
		d->vteps_n = remote_vteps(net, d->vteps);
	}
	*out = a;
	return 0;
}

void iod_flow_dp_ar_destroy(struct iod_flow_dp_ar *a)
{
	if (!a)
		return;
	for (uint32_t n = 0; n < a->nets_n; n++)
		iod_ar_destroy(a->nets[n].ar);
	free(a);
}

uint32_t iod_flow_dp_ar_peers(const struct iod_flow_dp_ar *a)
{
	uint32_t n = 0;
	for (uint32_t i = 0; a && i < a->nets_n; i++)
		for (uint32_t k = 0; a->nets[i].ar && k < a->nets[i].vteps_n; k++) {
			bool seen = false;
			for (uint32_t j = 0; j < i && !seen; j++)
				for (uint32_t q = 0; a->nets[j].ar && q < a->nets[j].vteps_n; q++)
					seen |= a->nets[j].vteps[q] == a->nets[i].vteps[k];
			n += !seen;
		}
	return n;
}

struct iod_ar *iod_flow_dp_ar_core(struct iod_flow_dp_ar *a, uint32_t n)
{
	return a && n < a->nets_n ? a->nets[n].ar : NULL;
}

bool iod_flow_dp_ar_rx(struct iod_flow_dp_ar *a, struct iod_pkt *p, uint64_t now_ns)
{
	struct iod_ar_probe_reply r;
	bool reply;
	if (iod_ar_probe_frame_parse(p->data, p->len, 0, &reply, &r))
		return false;
	if (!reply) {
		/* Reflect: back to the sender through our next hop (a routed
		 * underlay), keeping the probed port so it hashes the same way. */
		if (iod_ar_probe_frame_reflect(p->data, p->len, 0)) {
			p->verdict = IOD_FLOW_V_DROP;
			return true;
		}
		memcpy(p->data, a->wire.dst_mac, 6);
		memcpy(p->data + 6, a->wire.src_mac, 6);
		p->verdict = IOD_FLOW_V_PORT;
		p->port_out = IOD_DP_PORT_FABRIC;
		p->mirror_port = UINT16_MAX;
		a->probes_reflected++;
		return true;
	}
	/* The probe does not name its network: a core whose network has no
	 * endpoint behind the reflecting VTEP never sent it. */
	for (uint32_t n = 0; n < a->nets_n; n++) {
		struct dp_ar_net *d = &a->nets[n];
		bool mine = false;
		for (uint32_t k = 0; d->ar && k < d->vteps_n && !mine; k++)
			mine = d->vteps[k] == r.dst;
		if (mine)
			iod_ar_on_probe_reply(d->ar, &r, now_ns);
	}
	p->verdict = IOD_FLOW_V_DROP;
	return true;
}

void iod_flow_dp_ar_steer(struct iod_flow_dp_ar *a, struct iod_pkt **pkts, uint32_t n,
                          uint64_t now_ns)
{
	for (uint32_t i = 0; i < n; i++) {
		struct iod_pkt *p = pkts[i];
		if (p->verdict != IOD_FLOW_V_PORT || p->port_out != IOD_DP_PORT_FABRIC ||
		    p->port_in != IOD_DP_PORT_HOST)
			continue;
		struct iod_net_meta m;
		if (iod_net_parse(p->data, p->len, 0, &m) || !(m.flags & IOD_NET_F_VXLAN))
			continue;
		struct dp_ar_net *d = NULL;
		for (uint32_t k = 0; k < a->nets_n && !d; k++)
			if (a->nets[k].ar && a->nets[k].vni == m.vni)
				d = &a->nets[k];
		if (!d)
			continue;
		uint16_t sport = iod_ar_select(d->ar, m.outer.dst.v4, m.hash, now_ns, &d->out);
		iod_net_vxlan_set_sport(p->data, p->len, sport);
	}
}

void iod_flow_dp_ar_tick(struct iod_flow_dp_ar *a, uint64_t now_ns)
{
	for (uint32_t n = 0; n < a->nets_n; n++) {
		struct dp_ar_net *d = &a->nets[n];
		if (!d->ar)
			continue;
		if (!d->prepared) {
			for (uint32_t k = 0; k < d->vteps_n; k++)
				iod_ar_dest_prepare(d->ar, d->vteps[k], now_ns, &d->out);
			d->prepared = true;
		}
		iod_ar_tick(d->ar, now_ns, &d->out);
	}
}

uint32_t iod_flow_dp_ar_probe_frame(struct iod_flow_dp_ar *a, uint8_t *buf, uint32_t cap)
{
	for (uint32_t n = 0; n < a->nets_n; n++) {
		struct dp_ar_net *d = &a->nets[n];
		while (d->out_pos < d->out.probes_n) {
			const struct iod_ar_probe *pr = &d->out.probes[d->out_pos++];
			struct iod_ar_wire w = a->wire;
			w.dst_ip = pr->dst;
			int len = iod_ar_probe_frame_build(buf, cap, &w, pr);
			if (len > 0) {
				a->probe_frames++;
				return (uint32_t)len;
			}
		}
		d->out.probes_n = 0;
		d->out_pos = 0;
	}
	return 0;
}

json_t *iod_flow_dp_ar_json(const struct iod_flow_dp_ar *a, uint64_t now_ns)
{
	json_t *j = json_object();
	json_object_set_new(j, "probes_reflected", json_integer((json_int_t)a->probes_reflected));
	json_object_set_new(j, "probe_frames", json_integer((json_int_t)a->probe_frames));
	json_t *nets = json_array();
	for (uint32_t n = 0; n < a->nets_n; n++) {
		const struct dp_ar_net *d = &a->nets[n];
		if (!d->ar)
			continue;
		const struct iod_ar_stats *s = iod_ar_stats(d->ar);
		json_t *o = json_object();
		json_object_set_new(o, "vni", json_integer(d->vni));
		json_object_set_new(o, "policy",
		                    json_string(iod_ar_policy_name(iod_ar_config(d->ar)->policy)));
		json_t *st = json_object();
#define S(f) json_object_set_new(st, #f, json_integer((json_int_t)s->f))
		S(flows_new);
		S(flows_pinned);
		S(flows_aged);
		S(flows_table_full);
		S(flowlets);
		S(probes_sent);
		S(probe_replies);
		S(probe_late);
		S(paths_failed);
		S(probe_misses);
		S(probes_suppressed);
		S(flows_moved);
		S(ecn_events);
#undef S
		json_object_set_new(o, "stats", st);
		json_t *dests = json_array();
		for (uint32_t k = 0; k < d->vteps_n; k++) {
			struct iod_ar_path_info pi[IOD_AR_PATHS_MAX];
			uint32_t np =
			    iod_ar_paths(d->ar, d->vteps[k], pi, IOD_AR_PATHS_MAX, now_ns);
			char ip[16];
			iod_net_ipv4_format(d->vteps[k], ip, sizeof(ip));
			json_t *dj = json_object(), *pa = json_array();
			json_object_set_new(dj, "vtep", json_string(ip));
			for (uint32_t q = 0; q < np; q++) {
				json_t *pj = json_object();
				json_object_set_new(pj, "sport", json_integer(pi[q].sport));
				json_object_set_new(pj, "weight", json_integer(pi[q].weight));
				json_object_set_new(pj, "load_ppm", json_integer(pi[q].load_ppm));
				json_object_set_new(pj, "alive", json_boolean(pi[q].alive));
				json_object_set_new(pj, "misses", json_integer(pi[q].misses));
				json_object_set_new(pj, "congested", json_boolean(pi[q].congested));
				json_object_set_new(
				    pj, "rtt_us", json_integer((json_int_t)(pi[q].rtt_ns / 1000)));
				json_object_set_new(pj, "flows", json_integer(pi[q].flows));
				json_array_append_new(pa, pj);
			}
			json_object_set_new(dj, "paths", pa);
			json_array_append_new(dests, dj);
		}
		json_object_set_new(o, "destinations", dests);
		json_array_append_new(nets, o);
	}
	json_object_set_new(j, "networks", nets);
	return j;
}
