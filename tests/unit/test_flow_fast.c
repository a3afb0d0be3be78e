/*
 * test_flow_fast.c: the flow engine's compiled fast path (a flow's verdict,
 * conntrack session and action program in one lookup) against the slow
 * walk: the same traffic through the overlay data plane with and without
 * caches gives the same packets, the same per-entry counters and meter
 * colours, the same conntrack sessions; and every change that alters a
 * verdict (an entry updated or removed, a backend going down, a session
 * deleted, replaced or timed out) takes effect on the very next burst.
 */
#include "harness.h"
#include "iod/net_debug.h"
#include "iod/flow.h"

#include <pthread.h>
#include <stdlib.h>

#define HEADROOM 128

struct buf {
	uint8_t mem[HEADROOM + 2048]; /* headroom + frame */
	struct iod_pkt pkt;           /* describes mem */
};

static const uint8_t MAC_A[6] = {0x02, 0, 0, 0, 0, 0x0a};
static const uint8_t MAC_B[6] = {0x02, 0, 0, 0, 0, 0x0b};
static const uint8_t VTEP_MAC[6] = {0x02, 0, 0, 0, 0xaa, 0x01};
static const uint8_t GW_MAC[6] = {0x02, 0, 0, 0, 0xaa, 0xfe};

#define VTEP 0x0a0a0001u /* 10.10.0.1 */
#define PEER 0x0a0a0002u /* 10.10.0.2 */
#define VIP 0xc0a80064u  /* 192.168.0.100 */
#define VNI 100u

/* A tenant frame; wrapped in VXLAN from PEER when vxlan. */
static void mkpkt(struct buf *b, uint16_t port, bool vxlan, uint8_t proto, uint32_t src,
                  uint16_t sport, uint32_t dst, uint16_t dport, uint8_t tcp_flags, uint16_t payload)
{
	struct iod_net_pkt_spec s = {0};
	memcpy(s.dst_mac, MAC_B, 6);
	memcpy(s.src_mac, MAC_A, 6);
	s.t.family = IOD_NET_AF_V4;
	s.t.proto = proto;
	s.t.src.v4 = src;
	s.t.dst.v4 = dst;
	s.t.sport = sport;
	s.t.dport = dport;
	s.tcp_flags = tcp_flags;
	s.payload_bytes = payload;
	memset(&b->pkt, 0, sizeof(b->pkt));
	b->pkt.data = b->mem + HEADROOM;
	b->pkt.headroom = HEADROOM;
	int n = iod_net_pkt_build(&s, b->pkt.data, sizeof(b->mem) - HEADROOM);
	b->pkt.len = (uint32_t)n;
	b->pkt.port_in = port;
	if (vxlan) {
		struct iod_net_vxlan_tunnel t = {0};
		memcpy(t.outer_dst_mac, VTEP_MAC, 6);
		memcpy(t.outer_src_mac, GW_MAC, 6);
		t.outer_src_ip = PEER;
		t.outer_dst_ip = VTEP;
		t.vni = VNI;
		t.udp_csum = true;
		struct iod_net_meta m;
		iod_net_parse(b->pkt.data, b->pkt.len, 0, &m);
		iod_net_vxlan_encap(&b->pkt.data, &b->pkt.len, b->pkt.headroom, &t, m.hash, 0);
		b->pkt.headroom -= IOD_NET_VXLAN_OVERHEAD;
	}
}

/* The overlay of `iod dp run`: decap, SG (stateful), conntrack, LB, QoS
 * (meter + DSCP), route (encap to remote VTEPs, MACs for a local one). */
static struct iod_flow_dp_config *overlay_cfg(bool caches_off)
{
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	c->vtep_ip = VTEP;
	memcpy(c->vtep_mac, VTEP_MAC, 6);
	memcpy(c->underlay_gw_mac, GW_MAC, 6);
	c->udp_csum = true;
	c->ct_sessions = 4096;
	c->emc_slots = 256; /* small: slots collide and evict */
	c->caches_off = caches_off;
	c->networks_n = 1;
	struct iod_flow_dp_network *n = &c->networks[0];
	snprintf(n->name, sizeof(n->name), "blue");
	n->vni = VNI;
	n->subnet = 0xc0a80000u;
	n->prefix_len = 16;
	n->gateway = 0xc0a80001u;
	memcpy(n->gateway_mac, GW_MAC, 6);
	n->sg = 0;
	n->rate_bytes_per_s = 1500000; /* the meter drops some packets */
	n->burst_bytes = 3000;
	n->dscp = 10;
	c->sgs_n = 1;
	struct iod_net_sg_rule r;
	snprintf(c->sgs[0].name, sizeof(c->sgs[0].name), "web");
	c->sgs[0].member_ip = 0xc0a80000u;
	c->sgs[0].member_prefix_len = 16;
	iod_net_sg_rule_parse("tcp any 22", false, &r, NULL);
	iod_net_sg_add(&c->sgs[0], &r);
	iod_net_sg_rule_parse("udp any 80", false, &r, NULL);
	iod_net_sg_add(&c->sgs[0], &r);
	iod_net_sg_rule_parse("any any", true, &r, NULL);
	iod_net_sg_add(&c->sgs[0], &r);
	c->services_n = 1;
	c->services[0].network = 0;
	iod_net_lb_service_init(&c->services[0].lb, "api", VIP, 80, IOD_NET_PROTO_UDP);
	for (uint32_t b = 0; b < 3; b++) {
		iod_net_lb_backend_add(&c->services[0].lb, 0xc0a80100u + b + 1, 8080, 1);
		struct iod_flow_dp_endpoint *ep = &n->endpoints[n->endpoints_n++];
		ep->ip = 0xc0a80100u + b + 1;
		ep->vtep_ip = PEER + 1 + b;
	}
	struct iod_flow_dp_endpoint *lo = &n->endpoints[n->endpoints_n++];
	lo->ip = 0xc0a80002u;
	memcpy(lo->mac, MAC_B, 6);
	lo->local = true;
	return c;
}

static void cfg_free(struct iod_flow_dp_config *c)
{
	iod_flow_dp_config_free(c);
	free(c);
}

/* Every entry's counters and the ct pipe's hits agree between two pipelines. */
static int stats_agree(struct iod_flow_pipeline *a, struct iod_flow_pipeline *b, int pipe_ct)
{
	int bad = 0;
	for (uint32_t p = 0; p < iod_flow_pipes_n(a); p++) {
		uint32_t pos = 0, e;
		while (iod_flow_entry_next(a, p, &pos, &e, NULL)) {
			struct iod_flow_stats sa, sb;
			iod_flow_entry_stats(a, p, e, &sa);
			if (iod_flow_entry_stats(b, p, e, &sb) || sa.packets != sb.packets ||
			    sa.bytes != sb.bytes || sa.green != sb.green ||
			    sa.yellow != sb.yellow || sa.red != sb.red) {
				fprintf(stderr,
				        "  pipe %u entry %u: %llu/%llu packets %llu/%llu bytes "
				        "red %llu/%llu\n",
				        p, e, (unsigned long long)sa.packets,
				        (unsigned long long)sb.packets,
				        (unsigned long long)sa.bytes, (unsigned long long)sb.bytes,
				        (unsigned long long)sa.red, (unsigned long long)sb.red);
				bad++;
			}
		}
	}
	uint64_t ha, ma, hb, mb;
	iod_flow_pipe_stats(a, (uint32_t)pipe_ct, &ha, &ma);
	iod_flow_pipe_stats(b, (uint32_t)pipe_ct, &hb, &mb);
	if (ha != hb) {
		fprintf(stderr, "  ct pipe hits %llu/%llu\n", (unsigned long long)ha,
		        (unsigned long long)hb);
		bad++;
	}
	return bad;
}

/* Packet i of the random traffic: UDP to the VIP (LB), TCP to a remote
 * endpoint's port 22 with flags that walk the state machine, UDP to a denied
 * port, replies from the backends, a host-side endpoint's egress. */
static void traffic(struct iod_rng *rng, struct buf *b, uint32_t backend_hint)
{
	uint32_t kind = (uint32_t)iod_rng_below(rng, 10);
	uint32_t c = 0xc0a81000u + (uint32_t)iod_rng_below(rng, 24);
	uint16_t cp = (uint16_t)(40000 + iod_rng_below(rng, 4));
	uint16_t pl = (uint16_t)(16 + 64 * iod_rng_below(rng, 3));
	if (kind < 5) {
		mkpkt(b, IOD_DP_PORT_FABRIC, true, IOD_NET_PROTO_UDP, c, cp, VIP, 80, 0, pl);
	} else if (kind < 8) {
		static const uint8_t fl[] = {IOD_NET_TCP_SYN,
		                             IOD_NET_TCP_ACK,
		                             IOD_NET_TCP_ACK,
		                             IOD_NET_TCP_ACK,
		                             IOD_NET_TCP_FIN | IOD_NET_TCP_ACK,
		                             IOD_NET_TCP_RST};
		uint8_t f = fl[iod_rng_below(rng, sizeof(fl))];
		mkpkt(b, IOD_DP_PORT_FABRIC, true, IOD_NET_PROTO_TCP, c, cp, 0xc0a80101u, 22, f,
		      pl);
	} else if (kind < 9) {
		mkpkt(b, IOD_DP_PORT_FABRIC, true, IOD_NET_PROTO_UDP, c, cp, 0xc0a80101u, 81, 0,
		      pl);
	} else {
		/* the local endpoint talks to a remote one (egress: any) */
		mkpkt(b, IOD_DP_PORT_HOST, false, IOD_NET_PROTO_UDP, 0xc0a80002u, cp,
		      0xc0a80101u + backend_hint % 3, 5000, 0, pl);
	}
}

/* Random overlay traffic through a pipeline with caches and fast path (a)
 * and one without (b), bursts spread over `cores` cores (each with its own
 * caches, programs and conntrack table); at least 1/min_fp_share_div of
 * the packets must have taken the fast path. */
static void compare_run(uint32_t cores, uint64_t seed, uint64_t min_fp_share_div)
{
	struct iod_flow_dp_config *ca = overlay_cfg(false), *cb = overlay_cfg(true);
	struct iod_flow_dp a, b;
	struct iod_err e;
	CHECK_EQ(iod_flow_dp_build(ca, cores, &a, &e), 0);
	CHECK_EQ(iod_flow_dp_build(cb, cores, &b, &e), 0);
	struct iod_rng rng;
	iod_rng_seed(&rng, seed);
	static struct buf ba[IOD_FLOW_BURST_MAX], bb[IOD_FLOW_BURST_MAX];
	uint64_t now = IOD_NS_PER_S;
	int mismatch = 0;
	for (int burst = 0; burst < 1500 && !mismatch; burst++) {
		uint32_t n = 1 + (uint32_t)iod_rng_below(&rng, IOD_FLOW_BURST_MAX);
		struct iod_pkt *pa[IOD_FLOW_BURST_MAX], *pb[IOD_FLOW_BURST_MAX];
		for (uint32_t i = 0; i < n; i++) {
			struct iod_rng r2 = rng;
			traffic(&rng, &ba[i], (uint32_t)burst);
			traffic(&r2, &bb[i], (uint32_t)burst);
			pa[i] = &ba[i].pkt;
			pb[i] = &bb[i].pkt;
		}
		uint32_t core = (uint32_t)burst % cores;
		iod_flow_burst(a.pl, core, pa, n, now);
		iod_flow_burst(b.pl, core, pb, n, now);
		for (uint32_t i = 0; i < n; i++) {
			if (pa[i]->verdict != pb[i]->verdict ||
			    pa[i]->port_out != pb[i]->port_out || pa[i]->len != pb[i]->len ||
			    pa[i]->ct_state != pb[i]->ct_state || pa[i]->color != pb[i]->color ||
			    memcmp(pa[i]->data, pb[i]->data, pa[i]->len)) {
				fprintf(
				    stderr,
				    "  burst %d packet %u differs: verdict %u/%u port %u/%u len "
				    "%u/%u ct %#x/%#x color %u/%u\n",
				    burst, i, pa[i]->verdict, pb[i]->verdict, pa[i]->port_out,
				    pb[i]->port_out, pa[i]->len, pb[i]->len, pa[i]->ct_state,
				    pb[i]->ct_state, pa[i]->color, pb[i]->color);
				for (uint32_t k = 0; k < pa[i]->len && k < pb[i]->len; k++)
					if (pa[i]->data[k] != pb[i]->data[k])
						fprintf(stderr, "    byte %u: %02x/%02x\n", k,
						        pa[i]->data[k], pb[i]->data[k]);
				mismatch++;
			}
		}
		/* Time moves: mostly milliseconds, sometimes past the UDP timeout. */
		now += iod_rng_below(&rng, 50) == 0 ? 31 * IOD_NS_PER_S
		                                    : iod_rng_below(&rng, 3) * IOD_NS_PER_MS;
		/* Control-path changes, the same on both, between bursts. */
		if (burst == 500) { /* a backend goes down */
			iod_net_lb_backend_set_up(&a.services[0], 1, false);
			iod_net_lb_backend_set_up(&b.services[0], 1, false);
			iod_flow_pipeline_invalidate(a.pl);
			iod_flow_pipeline_invalidate(b.pl);
		}
		if (burst == 800) { /* a route entry goes away */
			uint32_t pos = 0, ent;
			CHECK(iod_flow_entry_next(a.pl, (uint32_t)a.pipe_route, &pos, &ent, NULL));
			CHECK_EQ(iod_flow_entry_remove(a.pl, (uint32_t)a.pipe_route, ent, NULL), 0);
			CHECK_EQ(iod_flow_entry_remove(b.pl, (uint32_t)b.pipe_route, ent, NULL), 0);
			iod_flow_entries_process(a.pl, 0, now);
			iod_flow_entries_process(b.pl, 0, now);
		}
		if (burst == 1100) { /* conntrack expiry between bursts */
			for (uint32_t c = 0; c < cores; c++) {
				iod_net_ct_expire(a.ct[c], now + 20 * IOD_NS_PER_S, 4096, NULL,
				                  NULL);
				iod_net_ct_expire(b.ct[c], now + 20 * IOD_NS_PER_S, 4096, NULL,
				                  NULL);
			}
		}
	}
	CHECK_EQ(mismatch, 0);
	CHECK_EQ(stats_agree(a.pl, b.pl, a.pipe_ct), 0);
	for (uint32_t c = 0; c < cores; c++)
		CHECK_EQ(iod_net_ct_count(a.ct[c]), iod_net_ct_count(b.ct[c]));
	struct iod_flow_engine_stats sa, sb;
	iod_flow_engine_stats(a.pl, &sa);
	iod_flow_engine_stats(b.pl, &sb);
	fprintf(stderr, "  %llu packets, %llu on the fast path\n", (unsigned long long)sa.packets,
	        (unsigned long long)sa.fp_hits);
	CHECK(sa.fp_hits > sa.packets / min_fp_share_div); /* it did much of the work */
	CHECK_U64(sb.fp_hits, 0);
	/* The meter coloured both ways (its drops were compared too). */
	int qos = iod_flow_pipe_find(a.pl, "qos");
	uint32_t pos = 0, qe;
	struct iod_flow_stats qs;
	CHECK(qos >= 0 && iod_flow_entry_next(a.pl, (uint32_t)qos, &pos, &qe, NULL));
	CHECK_EQ(iod_flow_entry_stats(a.pl, (uint32_t)qos, qe, &qs), 0);
	CHECK(qs.green > 1000 && qs.red > 100);
	CHECK_U64(sa.drops, sb.drops);
	iod_flow_dp_destroy(&a);
	iod_flow_dp_destroy(&b);
	cfg_free(ca);
	cfg_free(cb);
}

/* The shares: after burst 800 a route is gone, and the flows to it (about
 * 30% of the traffic) are dropped at "route", after "commit": a dropped
 * packet commits no session (engine.c), so they never become established
 * and take the (cached) walk, not the fast path (29% and 19% of all
 * packets take it here, 40% and 24% when dropped packets committed). */
TEST(fast_path_matches_slow_walk_packet_for_packet_and_counter_for_counter)
{
	compare_run(1, 11, 4);
}

TEST(fast_path_matches_slow_walk_on_two_cores)
{
	compare_run(2, 12, 6); /* a flow's packets alternate cores: two sessions */
}

/* RSS sharding (bench_dataplane's full_rss2 figures): two threads run
 * cores 0 and 1 of one pipeline at the same time, each its own traffic;
 * then the same traffic runs on a second pipeline core by core on one
 * thread. Every packet and every counter must agree: the cores share no
 * state the packet path writes (their caches, flow slots, programs,
 * conntrack tables, entry and pipe counters are per core). */
#define SHARD_BURSTS 600
struct shard {
	struct iod_flow_pipeline *pl;
	uint32_t core;
	uint64_t digest[SHARD_BURSTS]; /* of each burst's packets */
};

static void shard_burst(struct iod_flow_pipeline *pl, uint32_t core, struct iod_rng *rng,
                        struct buf *bufs, uint64_t *now, int burst, uint64_t *digest)
{
	uint32_t n = 1 + (uint32_t)iod_rng_below(rng, IOD_FLOW_BURST_MAX);
	struct iod_pkt *pk[IOD_FLOW_BURST_MAX];
	for (uint32_t i = 0; i < n; i++) {
		traffic(rng, &bufs[i], (uint32_t)burst);
		pk[i] = &bufs[i].pkt;
	}
	iod_flow_burst(pl, core, pk, n, *now);
	uint64_t h = n;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t f[2] = {(uint64_t)pk[i]->verdict | (uint64_t)pk[i]->port_out << 8 |
		                     (uint64_t)pk[i]->ct_state << 24 | (uint64_t)pk[i]->color << 40,
		                 pk[i]->len};
		h = iod_hash_bytes(f, sizeof(f), h);
		h = iod_hash_bytes(pk[i]->data, pk[i]->len, h);
	}
	*digest = h;
	*now +=
	    iod_rng_below(rng, 50) == 0 ? 31 * IOD_NS_PER_S : iod_rng_below(rng, 3) * IOD_NS_PER_MS;
}

static void shard_run(struct iod_flow_pipeline *pl, uint32_t core, uint64_t *digest)
{
	static _Thread_local struct buf bufs[IOD_FLOW_BURST_MAX];
	struct iod_rng rng;
	iod_rng_seed(&rng, 100 + core);
	uint64_t now = IOD_NS_PER_S;
	for (int burst = 0; burst < SHARD_BURSTS; burst++)
		shard_burst(pl, core, &rng, bufs, &now, burst, &digest[burst]);
}

static void *shard_thread(void *arg)
{
	struct shard *s = arg;
	shard_run(s->pl, s->core, s->digest);
	return NULL;
}

TEST(two_threads_on_two_cores_match_the_cores_run_one_after_the_other)
{
	struct iod_flow_dp_config *ca = overlay_cfg(false), *cb = overlay_cfg(false);
	struct iod_flow_dp a, b;
	struct iod_err e;
	CHECK_EQ(iod_flow_dp_build(ca, 2, &a, &e), 0);
	CHECK_EQ(iod_flow_dp_build(cb, 2, &b, &e), 0);
	static struct shard sh[2], ref[2];
	pthread_t th[2];
	for (uint32_t c = 0; c < 2; c++) {
		sh[c].pl = a.pl;
		sh[c].core = c;
		CHECK_EQ(pthread_create(&th[c], NULL, shard_thread, &sh[c]), 0);
	}
	for (uint32_t c = 0; c < 2; c++)
		pthread_join(th[c], NULL);
	for (uint32_t c = 0; c < 2; c++)
		shard_run(b.pl, c, ref[c].digest);
	int differ = 0;
	for (uint32_t c = 0; c < 2; c++)
		for (int i = 0; i < SHARD_BURSTS; i++)
			if (sh[c].digest[i] != ref[c].digest[i] && differ++ < 3)
				fprintf(stderr, "  core %u burst %d differs\n", c, i);
	CHECK_EQ(differ, 0);
	CHECK_EQ(stats_agree(a.pl, b.pl, a.pipe_ct), 0);
	for (uint32_t c = 0; c < 2; c++)
		CHECK_EQ(iod_net_ct_count(a.ct[c]), iod_net_ct_count(b.ct[c]));
	struct iod_flow_engine_stats sa, sb;
	iod_flow_engine_stats(a.pl, &sa);
	iod_flow_engine_stats(b.pl, &sb);
	CHECK_U64(sa.fp_hits, sb.fp_hits);
	CHECK_U64(sa.drops, sb.drops);
	CHECK(sa.fp_hits > sa.packets / 6); /* the fast path ran on both threads */
	iod_flow_dp_destroy(&a);
	iod_flow_dp_destroy(&b);
	cfg_free(ca);
	cfg_free(cb);
}

/* A hand-made stateful pipeline: root (count) -> ct -> acl (established
 * passes, new UDP to the VIP: LB) -> route (basic on dst: port 1 + MACs). */
struct small {
	struct iod_flow_pipeline *pl;  /* pipeline */
	struct iod_net_ct *ct;         /* conntrack */
	struct iod_net_lb_service svc; /* VIP -> two backends */
	uint32_t route_e[2];           /* route entries of the backends */
};

static struct iod_flow_fwd to_port(uint16_t p)
{
	return (struct iod_flow_fwd){.type = IOD_FLOW_FWD_PORT, .port = p};
}

static struct iod_flow_fwd to_pipe(uint32_t p)
{
	return (struct iod_flow_fwd){.type = IOD_FLOW_FWD_PIPE, .pipe = p};
}

static int small_init(struct small *s)
{
	struct iod_err e;
	memset(s, 0, sizeof(*s));
	if (iod_net_ct_create(&s->ct, 256, NULL))
		return -1;
	iod_net_lb_service_init(&s->svc, "web", VIP, 80, IOD_NET_PROTO_UDP);
	iod_net_lb_backend_add(&s->svc, 0x0a010001, 8080, 1);
	iod_net_lb_backend_add(&s->svc, 0x0a010002, 8080, 1);
	iod_net_lb_service_build(&s->svc);
	struct iod_flow_pipeline_cfg c = {
	    .cores = 1, .ports = 2, .ct = s->ct, .services = &s->svc, .services_n = 1};
	if (iod_flow_pipeline_create(&s->pl, &c, &e))
		return -1;
	struct iod_flow_pipe_cfg root = {
	    .name = "root", .kind = IOD_FLOW_PIPE_BASIC, .is_root = true, .entries_max = 4};
	root.mask.in_port = 0xffffffff;
	root.monitor.flags = IOD_FLOW_MON_COUNT;
	root.fwd = to_pipe(1);
	struct iod_flow_pipe_cfg ctp = {.name = "ct", .kind = IOD_FLOW_PIPE_CT};
	ctp.fwd = to_pipe(2);
	struct iod_flow_pipe_cfg acl = {.name = "acl", .kind = IOD_FLOW_PIPE_ACL, .entries_max = 8};
	acl.fwd = to_pipe(3);
	struct iod_flow_pipe_cfg route = {
	    .name = "route", .kind = IOD_FLOW_PIPE_BASIC, .entries_max = 8};
	route.mask.dst.v4 = 0xffffffff;
	route.monitor.flags = IOD_FLOW_MON_COUNT;
	if (iod_flow_pipe_create(s->pl, &root, &e) != 0 ||
	    iod_flow_pipe_create(s->pl, &ctp, &e) != 1 ||
	    iod_flow_pipe_create(s->pl, &acl, &e) != 2 ||
	    iod_flow_pipe_create(s->pl, &route, &e) != 3)
		return -1;
	struct iod_flow_entry_cfg r0 = {0};
	iod_flow_entry_add(s->pl, 0, &r0, NULL, NULL);
	struct iod_flow_entry_cfg est = {0};
	est.match.ct_state = IOD_NET_CT_EST;
	est.mask.ct_state = IOD_NET_CT_EST;
	est.priority = 1;
	iod_flow_entry_add(s->pl, 2, &est, NULL, NULL);
	struct iod_flow_entry_cfg lb = {0};
	lb.match.ct_state = IOD_NET_CT_NEW;
	lb.mask.ct_state = IOD_NET_CT_NEW | IOD_NET_CT_INV;
	lb.match.dst.v4 = VIP;
	lb.mask.dst.v4 = 0xffffffff;
	lb.priority = 2;
	lb.actions.flags = IOD_FLOW_ACT_LB;
	iod_flow_entry_add(s->pl, 2, &lb, NULL, NULL);
	for (int i = 0; i < 2; i++) {
		struct iod_flow_entry_cfg rt = {0};
		rt.match.dst.v4 = 0x0a010001u + (uint32_t)i;
		rt.actions.flags = IOD_FLOW_ACT_SET_MAC;
		memcpy(rt.actions.dst_mac, MAC_B, 6);
		memcpy(rt.actions.src_mac, MAC_A, 6);
		rt.fwd = to_port(1);
		iod_flow_entry_add(s->pl, 3, &rt, NULL, &s->route_e[i]);
	}
	iod_flow_entries_process(s->pl, 0, 0);
	return 0;
}

static void small_free(struct small *s)
{
	iod_flow_pipeline_destroy(s->pl);
	iod_net_ct_destroy(s->ct);
	iod_net_lb_service_free(&s->svc);
}

static uint64_t fp_hits(struct iod_flow_pipeline *pl)
{
	struct iod_flow_engine_stats st;
	iod_flow_engine_stats(pl, &st);
	return st.fp_hits;
}

/* One UDP packet of client c to the VIP; returns its destination after. */
static uint32_t send_vip(struct small *s, uint32_t c, uint64_t now, struct buf *b)
{
	mkpkt(b, 0, false, IOD_NET_PROTO_UDP, 0x0a000100u + c, 5000, VIP, 80, 0, 32);
	struct iod_pkt *p = &b->pkt;
	iod_flow_burst(s->pl, 0, &p, 1, now);
	struct iod_net_meta m;
	iod_net_parse(p->data, p->len, 0, &m);
	return m.key.dst.v4;
}

TEST(fast_path_sees_every_change_on_the_next_burst)
{
	struct small s;
	CHECK_EQ(small_init(&s), 0);
	struct buf b;
	uint64_t now = IOD_NS_PER_S;
	/* NEW (LB commit), then established packets: compiled from the second. */
	uint32_t be = send_vip(&s, 1, now, &b);
	CHECK(be == 0x0a010001u || be == 0x0a010002u);
	CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_PORT);
	CHECK_U64(fp_hits(s.pl), 0);
	CHECK_U64(send_vip(&s, 1, now, &b), be); /* traced and compiled */
	CHECK_U64(fp_hits(s.pl), 0);
	for (int i = 0; i < 5; i++) {
		CHECK_U64(send_vip(&s, 1, now, &b), be);
		CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_PORT);
		CHECK_EQ(b.pkt.port_out, 1);
		CHECK(b.pkt.ct_state & IOD_NET_CT_EST);
		CHECK(iod_net_csums_ok(b.pkt.data, b.pkt.len));
	}
	CHECK_U64(fp_hits(s.pl), 5);
	uint32_t bi = be - 0x0a010001u;
	struct iod_flow_stats st;
	iod_flow_entry_stats(s.pl, 3, s.route_e[bi], &st);
	CHECK_U64(st.packets, 7);
	iod_flow_entry_stats(s.pl, 0, 0, &st);
	CHECK_U64(st.packets, 7);

	/* 1. The route entry is updated (out port 0): the next packet follows. */
	struct iod_flow_entry_cfg rt = {0};
	rt.match.dst.v4 = be;
	rt.fwd = to_port(0);
	CHECK_EQ(iod_flow_entry_update(s.pl, 3, s.route_e[bi], &rt, NULL), 0);
	iod_flow_entries_process(s.pl, 0, now);
	send_vip(&s, 1, now, &b);
	CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_PORT);
	CHECK_EQ(b.pkt.port_out, 0);
	CHECK(memcmp(b.pkt.data, MAC_B, 6) == 0); /* the updated entry sets no MACs */
	iod_flow_entry_stats(s.pl, 3, s.route_e[bi], &st);
	CHECK_U64(st.packets, 1); /* an update starts its counters afresh */

	/* 2. The route entry is removed: the next packet misses and drops. */
	CHECK_EQ(iod_flow_entry_remove(s.pl, 3, s.route_e[bi], NULL), 0);
	iod_flow_entries_process(s.pl, 0, now);
	send_vip(&s, 1, now, &b);
	CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_DROP);
	send_vip(&s, 1, now, &b);
	CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_DROP);
	struct iod_flow_entry_cfg again = {0};
	again.match.dst.v4 = be;
	again.fwd = to_port(1);
	CHECK_EQ(iod_flow_entry_add(s.pl, 3, &again, NULL, &s.route_e[bi]), 0);
	iod_flow_entries_process(s.pl, 0, now);
	send_vip(&s, 1, now, &b);
	CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_PORT);
	CHECK_EQ(b.pkt.port_out, 1);

	/* 3. The backend goes down: the established flow keeps its binding
	 * (conntrack NAT), new flows avoid it, from the next burst on. */
	uint64_t h0 = fp_hits(s.pl);
	CHECK_EQ(iod_net_lb_backend_set_up(&s.svc, bi, false), 0);
	iod_flow_pipeline_invalidate(s.pl);
	CHECK_U64(send_vip(&s, 1, now, &b), be);
	CHECK_U64(send_vip(&s, 1, now, &b), be);
	CHECK_U64(send_vip(&s, 1, now, &b), be);
	CHECK(fp_hits(s.pl) > h0); /* recompiled after the invalidation */
	for (uint32_t c = 2; c < 40; c++)
		CHECK(send_vip(&s, c, now, &b) != be);

	/* 4. The session is deleted: the next packet is NEW again (re-balanced
	 * to the backend that is up), not replayed with the old NAT. */
	struct iod_net_ct_result r;
	struct iod_net_tuple t = {.family = IOD_NET_AF_V4, .proto = IOD_NET_PROTO_UDP};
	t.src.v4 = 0x0a000101u;
	t.sport = 5000;
	t.dst.v4 = VIP;
	t.dport = 80;
	iod_net_ct_lookup(s.ct, &t, 0, NULL, NULL, now, &r);
	CHECK(r.ct_state & IOD_NET_CT_EST);
	CHECK_EQ(iod_net_ct_delete(s.ct, r.entry), 0);
	uint32_t nb = send_vip(&s, 1, now, &b);
	CHECK(nb != be);
	CHECK(b.pkt.ct_state & IOD_NET_CT_NEW);
	CHECK_U64(send_vip(&s, 1, now, &b), nb);
	CHECK_U64(send_vip(&s, 1, now, &b), nb);

	/* 5. The same session slot reused by the same tuple with another NAT:
	 * the backend comes back up, the session is replaced. */
	CHECK_EQ(iod_net_lb_backend_set_up(&s.svc, bi, true), 0);
	iod_net_ct_lookup(s.ct, &t, 0, NULL, NULL, now, &r);
	uint32_t old_entry = r.entry;
	CHECK_EQ(iod_net_ct_delete(s.ct, r.entry), 0);
	struct iod_net_ct_nat nat = {.kind = IOD_NET_CT_NAT_DST, .ip = be, .port = 8080};
	CHECK_EQ(iod_net_ct_commit(s.ct, &t, 0, &nat, 0, now, &r), 0);
	CHECK_EQ(r.entry, old_entry); /* the free stack hands the same slot back */
	CHECK_U64(send_vip(&s, 1, now, &b), be);
	CHECK_U64(send_vip(&s, 1, now, &b), be);

	/* 6. Timed out (UDP, one direction: 30 s): NEW again, not replayed. */
	now += 31 * IOD_NS_PER_S;
	send_vip(&s, 1, now, &b);
	CHECK(b.pkt.ct_state & IOD_NET_CT_NEW);
	small_free(&s);
}

TEST(fast_path_keeps_tcp_state_and_timestamps_per_packet)
{
	struct small s;
	CHECK_EQ(small_init(&s), 0);
	/* Allow new TCP to the backend address directly (commit). */
	struct iod_flow_entry_cfg commit = {0};
	commit.match.ct_state = IOD_NET_CT_NEW;
	commit.mask.ct_state = IOD_NET_CT_NEW | IOD_NET_CT_INV;
	commit.match.proto = IOD_NET_PROTO_TCP;
	commit.mask.proto = 0xff;
	commit.priority = 3;
	commit.actions.flags = IOD_FLOW_ACT_CT_COMMIT;
	iod_flow_entry_add(s.pl, 2, &commit, NULL, NULL);
	iod_flow_entries_process(s.pl, 0, 0);
	struct buf b;
	struct iod_pkt *p = &b.pkt;
	uint64_t now = IOD_NS_PER_S;
	mkpkt(&b, 0, false, 6, 0x0a000001, 4000, 0x0a010001, 22, IOD_NET_TCP_SYN, 0);
	iod_flow_burst(s.pl, 0, &p, 1, now);
	mkpkt(&b, 0, false, 6, 0x0a010001, 22, 0x0a000001, 4000, IOD_NET_TCP_SYN | IOD_NET_TCP_ACK,
	      0);
	iod_flow_burst(s.pl, 0, &p, 1, now);
	CHECK(b.pkt.ct_state & IOD_NET_CT_RPL);
	/* Many ACKs: compiled after the first; the session's last_ns moves. */
	for (int i = 0; i < 10; i++) {
		now += IOD_NS_PER_S;
		mkpkt(&b, 0, false, 6, 0x0a000001, 4000, 0x0a010001, 22, IOD_NET_TCP_ACK, 0);
		iod_flow_burst(s.pl, 0, &p, 1, now);
		CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_PORT);
	}
	CHECK(fp_hits(s.pl) >= 8);
	uint32_t pos = 0, ent;
	CHECK(iod_net_ct_next(s.ct, &pos, &ent));
	struct iod_net_ct_info info;
	CHECK_EQ(iod_net_ct_get(s.ct, ent, &info), 0);
	CHECK_EQ(info.tcp_state, IOD_NET_TCP_ESTABLISHED);
	CHECK_U64(info.last_ns, now);
	/* FIN both ways and the last ACK, through compiled and traced slots. */
	mkpkt(&b, 0, false, 6, 0x0a000001, 4000, 0x0a010001, 22, IOD_NET_TCP_FIN | IOD_NET_TCP_ACK,
	      0);
	iod_flow_burst(s.pl, 0, &p, 1, now);
	mkpkt(&b, 0, false, 6, 0x0a010001, 22, 0x0a000001, 4000, IOD_NET_TCP_FIN | IOD_NET_TCP_ACK,
	      0);
	iod_flow_burst(s.pl, 0, &p, 1, now);
	mkpkt(&b, 0, false, 6, 0x0a000001, 4000, 0x0a010001, 22, IOD_NET_TCP_ACK, 0);
	iod_flow_burst(s.pl, 0, &p, 1, now); /* a compiled flow key: ACK */
	CHECK_EQ(iod_net_ct_get(s.ct, ent, &info), 0);
	CHECK_EQ(info.tcp_state, IOD_NET_TCP_TIME_WAIT);
	small_free(&s);
}

/* More flows than flow slots: a set that three or more flows map to keeps
 * two of them compiled (one miss on a full set in 16 evicts) instead of the
 * flows evicting each other on every packet and all taking the slow path.
 * 2 sets of 2 ways, 12 flows sent round robin: at most 4 are compiled at a
 * time, so the fast path serves about 4/12 of packets once warm; evicting
 * on every miss leaves it near none. */
TEST(full_flow_slot_sets_keep_their_flows_instead_of_thrashing)
{
	struct iod_flow_pipeline *pl;
	struct iod_flow_pipeline_cfg cfg = {.cores = 1, .ports = 2, .emc_slots = 1};
	struct iod_err e = {0};
	CHECK_EQ(iod_flow_pipeline_create(&pl, &cfg, &e), 0);
	struct iod_flow_pipe_cfg pc = {
	    .name = "fwd", .kind = IOD_FLOW_PIPE_BASIC, .is_root = true, .entries_max = 2};
	pc.mask.in_port = 0xffffffff;
	pc.fwd = (struct iod_flow_fwd){.type = IOD_FLOW_FWD_PORT, .port = 1};
	pc.fwd_miss = (struct iod_flow_fwd){.type = IOD_FLOW_FWD_DROP};
	pc.actions.flags = IOD_FLOW_ACT_MAC_SWAP;
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), 0);
	struct iod_flow_entry_cfg ec = {0};
	CHECK_EQ(iod_flow_entry_add(pl, 0, &ec, NULL, NULL), 0);
	iod_flow_entries_process(pl, 0, 0);
	struct buf b;
	struct iod_pkt *p = &b.pkt;
	uint64_t warm = 0;
	for (int round = 0; round < 200; round++) {
		if (round == 20)
			warm = fp_hits(pl);
		for (uint16_t f = 0; f < 12; f++) {
			mkpkt(&b, 0, false, 17, 0x0a000001, (uint16_t)(1000 + f), 0x0a010001, 53, 0,
			      10);
			iod_flow_burst(pl, 0, &p, 1, IOD_NS_PER_S);
			CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_PORT);
		}
	}
	uint64_t hits = fp_hits(pl) - warm, packets = 180 * 12;
	CHECK(hits * 5 >= packets); /* >= 20 % (about 30 % expected) */
	CHECK(hits <= packets / 2); /* never more than the 4 slots can hold */
	iod_flow_pipeline_destroy(pl);
}
