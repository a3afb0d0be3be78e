/*
 * transport.c: the simulated hosts' transports and VXLAN edge.
 *
 * Two window transports good enough for flow-completion-time studies:
 * DCTCP-like (ECN-capable packets, per-packet ECN echo, alpha = running
 * fraction of marked packets, cut cwnd by alpha/2 at most once per window)
 * and NewReno-like (no ECN; halve on three duplicate ACKs; fast recovery
 * until the recovery point). Both: one ACK per packet, cumulative ACKs, a
 * receiver that discards out-of-order packets (so recovery is go-back-N),
 * a fixed minimum RTO with exponential backoff, and a line-rate start
 * (initial window = one path BDP) so an empty network gives the ideal FCT.
 * What they do not model (SACK, delayed ACKs, pacing, TSO, receive windows,
 * RTT-based RTO) is listed in docs/simulator.md.
 *
 * Every packet leaves through the host edge: the inner 5-tuple is hashed
 * and a path policy (default: static ECMP, i.e. what VXLAN does) picks the
 * outer UDP source port that the switches hash on. Nothing here reads a
 * clock or allocates: time is s->now_ns, packets come from the pool.
 */
#include "internal.h"
#include "iod/net.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ---- the VXLAN edge ------------------------------------------------------ */

/* The edge is iod's data plane (include/iod/net.h): the same flow hash and
 * the same outer source port as `iod dp` puts on the wire. */
_Static_assert(IOD_SIM_VXLAN_OVERHEAD_BYTES == IOD_NET_VXLAN_OVERHEAD,
               "the simulator charges what the real encap adds");
_Static_assert(IOD_SIM_VXLAN_SPORT_MIN == IOD_NET_VXLAN_SPORT_MIN &&
                   IOD_SIM_VXLAN_SPORT_MAX == IOD_NET_VXLAN_SPORT_MAX,
               "same source-port range as the real encap");

uint64_t iod_sim_edge_flow_hash(const struct iod_sim_tuple *t)
{
	struct iod_net_tuple k;
	memset(&k, 0, sizeof(k));
	k.src.v4 = t->src_ip;
	k.dst.v4 = t->dst_ip;
	k.sport = t->sport;
	k.dport = t->dport;
	k.proto = t->proto;
	k.family = IOD_NET_AF_V4;
	return iod_net_tuple_hash(&k);
}

uint16_t iod_sim_edge_sport(uint64_t flow_hash)
{
	return iod_net_vxlan_sport((uint32_t)flow_hash, 0, 0);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

/*
 * Run the real edge once per flow: write the flow's first inner frame
 * (Ethernet/IPv4/TCP), encapsulate it with iod_net_vxlan_encap_copy as a
 * host's data plane would, parse the result with iod_net_parse, and take
 * the inner flow hash and outer source port from what is on the wire.
 * Returns 0 and fills *hash and *sport, or a negative errno.
 */
int sim_edge_encap_check(const struct iod_sim_tuple *t, uint32_t vtep_src, uint32_t vtep_dst,
                         uint64_t *hash, uint16_t *sport)
{
	uint8_t inner[54], out[128];
	struct iod_net_meta m;
	memset(inner, 0, sizeof(inner));
	inner[0] = 0x02; /* locally administered MACs derived from the addresses */
	put32(inner + 2, t->dst_ip);
	inner[6] = 0x02;
	put32(inner + 8, t->src_ip);
	put16(inner + 12, 0x0800);
	uint8_t *ip = inner + 14, *tcp = inner + 34;
	ip[0] = 0x45;
	ip[1] = 0x02; /* ECT(0) */
	put16(ip + 2, 40);
	put16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = t->proto;
	put32(ip + 12, t->src_ip);
	put32(ip + 16, t->dst_ip);
	put16(tcp, t->sport);
	put16(tcp + 2, t->dport);
	tcp[12] = 5 << 4;
	tcp[13] = 0x02; /* SYN */
	put16(tcp + 14, 65535);
	if (iod_net_parse(inner, sizeof(inner), 0, &m) || !(m.flags & IOD_NET_F_L4))
		return -EINVAL;
	struct iod_net_vxlan_tunnel tun;
	memset(&tun, 0, sizeof(tun));
	tun.outer_src_ip = 0x0a800000u | vtep_src; /* underlay 10.128.0.0/9 */
	tun.outer_dst_ip = 0x0a800000u | vtep_dst;
	tun.vni = 1;
	int n = iod_net_vxlan_encap_copy(out, sizeof(out), inner, sizeof(inner), &tun, m.hash, 0);
	if (n < 0)
		return n;
	uint32_t inner_hash = m.hash;
	if (iod_net_parse(out, (uint32_t)(sizeof(inner) + IOD_NET_VXLAN_OVERHEAD), 0, &m) ||
	    !(m.flags & IOD_NET_F_VXLAN) || m.hash != inner_hash)
		return -EINVAL;
	*hash = inner_hash;
	*sport = m.outer.sport;
	return 0;
}

static uint16_t ecmp_choose(void *state, const struct iod_sim_path_query *q)
{
	(void)state;
	return iod_sim_edge_sport(q->flow_hash);
}

const struct iod_sim_path_policy iod_sim_path_ecmp = {"ecmp", NULL, ecmp_choose, NULL,
                                                      NULL,   0,    NULL};

/* ---- flows ---------------------------------------------------------------- */

int iod_sim_flow_add(struct iod_sim *s, uint32_t src, uint32_t dst, uint64_t size_bytes,
                     uint64_t start_ns, uint32_t tag, uint32_t *id, struct iod_err *e)
{
	if (src >= s->n_hosts || dst >= s->n_hosts || src == dst)
		return iod_err_set(e, -EINVAL,
		                   "flow from host %u to host %u: need two different "
		                   "hosts below %u",
		                   src, dst, s->n_hosts);
	if (!size_bytes)
		return iod_err_set(e, -EINVAL, "flow of 0 bytes");
	uint64_t npkts = (size_bytes + s->cfg.mss_bytes - 1) / s->cfg.mss_bytes;
	if (npkts >= UINT32_MAX / 2)
		return iod_err_set(e, -E2BIG, "flow of %" PRIu64 " bytes is too large", size_bytes);
	if (s->n_flows >= s->cfg.flows_max)
		return iod_err_set(e, -ENOSPC, "flow table full (%u flows); raise flows_max",
		                   s->cfg.flows_max);
	if (start_ns < s->now_ns)
		start_ns = s->now_ns;
	uint64_t ideal = iod_sim_ideal_fct(s, src, dst, size_bytes);
	if (!ideal)
		return iod_err_set(e, -EHOSTUNREACH, "no path from %s to %s",
		                   s->names[s->hosts[src]], s->names[s->hosts[dst]]);
	struct sim_flow *f = &s->flows[s->n_flows];
	memset(f, 0, sizeof(*f));
	f->rec.id = s->n_flows;
	f->rec.src = src;
	f->rec.dst = dst;
	f->rec.size_bytes = size_bytes;
	f->rec.start_ns = start_ns;
	f->rec.ideal_ns = ideal;
	f->rec.tag = tag;
	f->tuple.src_ip = 0x0a000000u | src; /* 10.0.0.0/8 overlay */
	f->tuple.dst_ip = 0x0a000000u | dst;
	f->tuple.sport = (uint16_t)(1024 + iod_rng_below(&s->rng, 64511));
	f->tuple.dport = (uint16_t)(1024 + iod_rng_below(&s->rng, 64511));
	f->tuple.proto = 6;
	f->hash = iod_sim_edge_flow_hash(&f->tuple);
	if (s->n_flows < IOD_SIM_EDGE_CHECKS) {
		/* the first flows go through the real encap: the hash and port
		 * the simulator uses are the ones on the wire */
		uint64_t wire_hash;
		uint16_t wire_sport;
		int rc = sim_edge_encap_check(&f->tuple, src, dst, &wire_hash, &wire_sport);
		if (rc)
			return iod_err_set(e, rc, "VXLAN encap of flow %u failed", s->n_flows);
		IOD_ASSERT(wire_hash == f->hash && wire_sport == iod_sim_edge_sport(f->hash));
	}
	struct iod_sim_tuple rev = {f->tuple.dst_ip, f->tuple.src_ip, f->tuple.dport,
	                            f->tuple.sport, 6};
	f->hash_rev = iod_sim_edge_flow_hash(&rev);
	f->npkts = (uint32_t)npkts;
	f->last_payload = (uint32_t)(size_bytes - (npkts - 1) * s->cfg.mss_bytes);
	if (s->cfg.init_cwnd_pkts) {
		f->cwnd = s->cfg.init_cwnd_pkts;
	} else {
		/* One BDP of full packets at the sender's rate over the base RTT of
		 * one full packet and its ACK, plus one: never window-limited on
		 * an empty network. */
		uint64_t rtt = iod_sim_ideal_fct(s, src, dst, s->cfg.mss_bytes);
		uint64_t pkt_ns =
		    sim_ser_ns(s->cfg.mss_bytes + s->cfg.hdr_bytes, iod_sim_host_rate_bps(s, src));
		f->cwnd = (double)((rtt + pkt_ns - 1) / pkt_ns + 1);
	}
	if (f->cwnd > s->cfg.max_cwnd_pkts)
		f->cwnd = s->cfg.max_cwnd_pkts;
	f->ssthresh = 1e18;
	f->alpha = 1.0;
	f->win_end = (uint32_t)f->cwnd;
	f->rto_ns = s->cfg.rto_min_ns;
	if (start_ns > s->now_ns || !s->events)
		sim_arrival_add(s, s->n_flows);
	else
		sim_push(s, start_ns, EV_FLOW_START, s->n_flows, 0);
	if (s->err)
		return iod_err_set(e, s->err, "%s", s->err_msg);
	if (id)
		*id = s->n_flows;
	s->n_flows++;
	return 0;
}

uint32_t iod_sim_flow_count(const struct iod_sim *s)
{
	return s->n_flows;
}
uint32_t iod_sim_flows_done(const struct iod_sim *s)
{
	return s->flows_done;
}
const struct iod_sim_flow_rec *iod_sim_flow(const struct iod_sim *s, uint32_t id)
{
	IOD_ASSERT(id < s->n_flows);
	return &s->flows[id].rec;
}

static void rto_arm(struct iod_sim *s, struct sim_flow *f, uint32_t id)
{
	f->rto_deadline_ns = s->now_ns + f->rto_ns;
	if (!f->rto_pending) {
		f->rto_pending = true;
		sim_push(s, f->rto_deadline_ns, EV_RTO, id, 0);
	}
}

static void flow_send(struct iod_sim *s, struct sim_flow *f, uint32_t id)
{
	uint32_t wnd = f->cwnd < 1 ? 1 : (uint32_t)f->cwnd;
	struct sim_node *host = &s->nodes[s->hosts[f->rec.src]];
	bool sent = false;

	while (f->snd_nxt < f->npkts && f->snd_nxt - f->snd_una < wnd) {
		if (host->host_q_bytes >= s->cfg.tsq_bytes) {
			/* NIC backlog full: wait for room (TCP small queues). */
			if (!f->blocked) {
				f->blocked = true;
				f->blk_next = SIM_NONE;
				if (host->blk_tail == SIM_NONE)
					host->blk_head = id;
				else
					s->flows[host->blk_tail].blk_next = id;
				host->blk_tail = id;
			}
			break;
		}
		struct sim_pkt *p = sim_pkt_alloc(s);
		if (!p)
			return;
		uint32_t seq = f->snd_nxt;
		uint32_t payload = seq + 1 == f->npkts ? f->last_payload : s->cfg.mss_bytes;
		struct iod_sim_path_query q = {f->rec.src, f->rec.dst,
		                               id,         f->hash,
		                               s->now_ns,  (uint64_t)seq * s->cfg.mss_bytes,
		                               false};
		memset(p, 0, sizeof(*p));
		p->type = PKT_DATA;
		p->flow = id;
		p->seq = seq;
		p->src = f->rec.src;
		p->dst = f->rec.dst;
		p->wire_bytes = payload + s->cfg.hdr_bytes;
		p->sent_ns = s->now_ns;
		p->sport = s->policy->choose(s->policy->state, &q);
		p->flags = s->cfg.transport == IOD_SIM_DCTCP || s->cfg.outer_ect ? PF_ECT : 0;
		if (seq < f->high)
			f->rec.retransmits++;
		else
			f->high = seq + 1;
		f->snd_nxt++;
		sent = true;
		sim_forward(s, s->hosts[f->rec.src], p);
	}
	if (sent && !f->rto_deadline_ns)
		rto_arm(s, f, id);
}

void sim_transport_wake(struct iod_sim *s, uint32_t node)
{
	struct sim_node *host = &s->nodes[node];
	/* Each waiting flow gets one turn, in arrival order; a flow that
	 * fills the NIC again goes back to the tail. Bounded by the list. */
	uint32_t tail = host->blk_tail;
	while (host->blk_head != SIM_NONE && host->host_q_bytes < s->cfg.tsq_bytes) {
		uint32_t id = host->blk_head;
		struct sim_flow *f = &s->flows[id];
		host->blk_head = f->blk_next;
		if (host->blk_head == SIM_NONE)
			host->blk_tail = SIM_NONE;
		f->blocked = false;
		if (!f->rec.done)
			flow_send(s, f, id);
		if (id == tail)
			break;
	}
}

void sim_transport_start(struct iod_sim *s, uint32_t id)
{
	struct sim_flow *f = &s->flows[id];
	f->started = true;
	flow_send(s, f, id);
}

void sim_transport_rto(struct iod_sim *s, uint32_t id)
{
	struct sim_flow *f = &s->flows[id];

	f->rto_pending = false;
	if (f->rec.done || !f->rto_deadline_ns)
		return;
	if (s->now_ns < f->rto_deadline_ns) {
		f->rto_pending = true;
		sim_push(s, f->rto_deadline_ns, EV_RTO, id, 0);
		return;
	}
	/* Timeout: back to one packet, resend from the first unacked. */
	f->rec.timeouts++;
	f->ssthresh = f->cwnd / 2 < 2 ? 2 : f->cwnd / 2;
	f->cwnd = 1;
	f->snd_nxt = f->snd_una;
	f->in_recovery = false;
	f->dupacks = 0;
	f->rto_ns = f->rto_ns * 2 > 64 * s->cfg.rto_min_ns ? 64 * s->cfg.rto_min_ns : f->rto_ns * 2;
	f->rto_deadline_ns = 0;
	flow_send(s, f, id);
	if (!f->rto_deadline_ns)
		rto_arm(s, f, id);
}

void sim_transport_data(struct iod_sim *s, const struct sim_pkt *d)
{
	struct sim_flow *f = &s->flows[d->flow];

	if (d->seq == f->rcv_nxt) {
		f->rcv_nxt++;
		if (f->rcv_nxt == f->npkts)
			f->rec.rcv_done_ns = s->now_ns;
	}
	struct sim_pkt *a = sim_pkt_alloc(s);
	if (!a)
		return;
	struct iod_sim_path_query q = {f->rec.dst, f->rec.src, d->flow, f->hash_rev,
	                               s->now_ns,  0,          true};
	memset(a, 0, sizeof(*a));
	a->type = PKT_ACK;
	a->flow = d->flow;
	a->seq = f->rcv_nxt;
	a->src = d->dst;
	a->dst = d->src;
	a->wire_bytes = s->cfg.hdr_bytes;
	a->sent_ns = d->sent_ns;
	a->data_sport = d->sport;
	a->flags = (d->flags & PF_CE) ? PF_ECE : 0;
	a->sport = s->policy->choose(s->policy->state, &q);
	sim_forward(s, s->hosts[d->dst], a);
}

static void flow_finish(struct iod_sim *s, struct sim_flow *f, uint32_t id)
{
	f->rec.done = true;
	f->rec.fct_ns = s->now_ns - f->rec.start_ns;
	f->rto_deadline_ns = 0;
	s->flows_done++;
	if (s->done_fn)
		s->done_fn(s->done_ctx, s, id);
}

void sim_transport_ack(struct iod_sim *s, const struct sim_pkt *a)
{
	uint32_t id = a->flow;
	struct sim_flow *f = &s->flows[id];
	bool ece = (a->flags & PF_ECE) != 0;
	bool dctcp = s->cfg.transport == IOD_SIM_DCTCP;

	if (f->rec.done)
		return;
	if (s->policy->feedback) {
		struct iod_sim_path_feedback fb = {IOD_SIM_FB_ACK,
		                                   f->rec.src,
		                                   f->rec.dst,
		                                   id,
		                                   a->data_sport,
		                                   ece,
		                                   s->now_ns - a->sent_ns,
		                                   s->now_ns,
		                                   0,
		                                   0,
		                                   0};
		s->policy->feedback(s->policy->state, &fb);
	}
	/* The edge may mask the mark from the inner flow (Clove). */
	if (ece && s->policy->inner_ecn &&
	    !s->policy->inner_ecn(s->policy->state, f->rec.src, f->rec.dst, s->now_ns)) {
		ece = false;
		s->ecn_masked++;
	}
	if (dctcp) {
		f->acked_win++;
		if (ece)
			f->marked_win++;
	}
	if (a->seq > f->snd_una) {
		uint32_t newly = a->seq - f->snd_una;
		/* RFC 7661 in spirit: grow only a window that was in use. */
		bool cwnd_limited = (double)(f->snd_nxt - f->snd_una) + 1 >= f->cwnd;
		f->snd_una = a->seq;
		f->rec.acked_bytes = (uint64_t)a->seq * s->cfg.mss_bytes;
		if (f->rec.acked_bytes > f->rec.size_bytes)
			f->rec.acked_bytes = f->rec.size_bytes;
		f->dupacks = 0;
		if (f->snd_nxt < f->snd_una)
			f->snd_nxt = f->snd_una;
		if (f->in_recovery && f->snd_una >= f->recover)
			f->in_recovery = false;
		if (!f->in_recovery && cwnd_limited) {
			if (f->cwnd < f->ssthresh)
				f->cwnd += newly;
			else
				f->cwnd += newly / f->cwnd;
			if (f->cwnd > s->cfg.max_cwnd_pkts)
				f->cwnd = s->cfg.max_cwnd_pkts;
		}
		f->rto_ns = s->cfg.rto_min_ns;
		if (f->snd_una == f->npkts) {
			flow_finish(s, f, id);
			return;
		}
		f->rto_deadline_ns = 0;
		if (f->snd_nxt > f->snd_una)
			rto_arm(s, f, id);
	} else if (a->seq == f->snd_una && f->snd_nxt > f->snd_una) {
		if (++f->dupacks == 3 && !f->in_recovery) {
			f->ssthresh = f->cwnd / 2 < 2 ? 2 : f->cwnd / 2;
			f->cwnd = f->ssthresh;
			f->recover = f->snd_nxt;
			f->in_recovery = true;
			f->snd_nxt = f->snd_una; /* go-back-N: the receiver kept nothing */
		}
	}
	if (dctcp) {
		if (f->snd_una >= f->win_end) {
			double frac = f->acked_win ? (double)f->marked_win / f->acked_win : 0;
			f->alpha = (1 - s->cfg.dctcp_g) * f->alpha + s->cfg.dctcp_g * frac;
			f->acked_win = f->marked_win = 0;
			f->win_end = f->snd_nxt + 1;
		}
		if (ece && f->snd_una >= f->cwr_end) {
			f->cwnd = f->cwnd * (1 - f->alpha / 2);
			if (f->cwnd < 2)
				f->cwnd = 2;
			f->ssthresh = f->cwnd;
			f->cwr_end = f->snd_nxt + 1;
		}
	}
	flow_send(s, f, id);
}
