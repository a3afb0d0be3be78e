/*
 * test_flow.c: the flow engine: every pipe kind (basic, control, lpm, acl,
 * hash, ct), the entry queue and its status callbacks, forwarding (port,
 * pipe, drop, RSS, miss), actions (decap, encap, NAT, set meta, dscp, TTL,
 * MAC, ARP reply, LB, sport override), monitors (counters, meters, aging,
 * mirror), the exact-match cache agreeing with the uncached walk, and the
 * stateful overlay pipeline (SG + conntrack + LB) end to end.
 */
#include "harness.h"
#include "iod/net_debug.h"
#include "iod/flow.h"

#include <stdlib.h>

#define HEADROOM 128

struct buf {
	uint8_t mem[HEADROOM + 2048]; /* headroom + frame */
	struct iod_pkt pkt;           /* describes mem */
};

static const uint8_t MAC_A[6] = {0x02, 0, 0, 0, 0, 0x0a};
static const uint8_t MAC_B[6] = {0x02, 0, 0, 0, 0, 0x0b};

static void mkpkt(struct buf *b, uint16_t port, uint8_t proto, uint32_t src, uint16_t sport,
                  uint32_t dst, uint16_t dport, uint8_t tcp_flags)
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
	s.payload_bytes = 16;
	memset(&b->pkt, 0, sizeof(b->pkt));
	b->pkt.data = b->mem + HEADROOM;
	b->pkt.headroom = HEADROOM;
	int n = iod_net_pkt_build(&s, b->pkt.data, sizeof(b->mem) - HEADROOM);
	b->pkt.len = (uint32_t)n;
	b->pkt.port_in = port;
}

static void run1(struct iod_flow_pipeline *pl, struct buf *b, uint64_t now)
{
	struct iod_pkt *p = &b->pkt;
	iod_flow_burst(pl, 0, &p, 1, now);
}

struct status_log {
	int n;               /* callbacks */
	int last_op;         /* last op */
	int last_status;     /* its status */
	uint32_t last_entry; /* its entry */
};

static void status_cb(void *ctx, uint32_t pipe, uint32_t entry, enum iod_flow_op op, int status)
{
	struct status_log *l = ctx;
	IOD_UNUSED(pipe);
	if (!l)
		return;
	l->n++;
	l->last_op = (int)op;
	l->last_status = status;
	l->last_entry = entry;
}

static struct iod_flow_pipeline *mkpl(uint16_t ports, struct iod_net_ct *ct,
                                      struct iod_net_lb_service *svc, uint32_t svc_n)
{
	struct iod_flow_pipeline_cfg c = {.cores = 1,
	                                  .ports = ports,
	                                  .ct = ct,
	                                  .services = svc,
	                                  .services_n = svc_n,
	                                  .status_cb = status_cb};
	struct iod_flow_pipeline *pl = NULL;
	struct iod_err e;
	if (iod_flow_pipeline_create(&pl, &c, &e))
		return NULL;
	return pl;
}

static struct iod_flow_fwd to_port(uint16_t p)
{
	return (struct iod_flow_fwd){.type = IOD_FLOW_FWD_PORT, .port = p};
}
static struct iod_flow_fwd to_pipe(uint32_t p)
{
	return (struct iod_flow_fwd){.type = IOD_FLOW_FWD_PIPE, .pipe = p};
}
static struct iod_flow_fwd drop(void)
{
	return (struct iod_flow_fwd){.type = IOD_FLOW_FWD_DROP};
}

TEST(basic_pipe_queue_status_and_counters)
{
	struct iod_flow_pipeline *pl = mkpl(2, NULL, NULL, 0);
	CHECK(pl);
	struct iod_flow_pipe_cfg pc = {.name = "l3",
	                               .kind = IOD_FLOW_PIPE_BASIC,
	                               .is_root = true,
	                               .port = 0,
	                               .entries_max = 8};
	pc.mask.dst.v4 = 0xffffffff;
	pc.mask.dport = 0xffff;
	pc.fwd = to_port(1);
	pc.fwd_miss = drop();
	pc.monitor.flags = IOD_FLOW_MON_COUNT;
	struct iod_err e;
	int pipe = iod_flow_pipe_create(pl, &pc, &e);
	CHECK_EQ(pipe, 0);
	struct iod_flow_entry_cfg ec = {0};
	ec.match.dst.v4 = 0x0a000002;
	ec.match.dport = 80;
	struct status_log log = {0};
	uint32_t id;
	CHECK_EQ(iod_flow_entry_add(pl, 0, &ec, &log, &id), 0);
	struct buf b;
	mkpkt(&b, 0, 6, 0x0a000001, 1000, 0x0a000002, 80, 0);
	run1(pl, &b, 1);
	CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_DROP); /* queued, not yet applied */
	CHECK_EQ(log.n, 0);
	CHECK_EQ(iod_flow_entries_process(pl, 0, 0), 1);
	CHECK_EQ(log.n, 1);
	CHECK_EQ(log.last_op, IOD_FLOW_OP_ADD);
	CHECK_EQ(log.last_status, 0);
	mkpkt(&b, 0, 6, 0x0a000001, 1000, 0x0a000002, 80, 0);
	run1(pl, &b, 2);
	CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_PORT);
	CHECK_EQ(b.pkt.port_out, 1);
	mkpkt(&b, 0, 6, 0x0a000001, 1000, 0x0a000002, 81, 0);
	run1(pl, &b, 3);
	CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_DROP);
	/* A duplicate key is refused at process time. */
	uint32_t dup;
	CHECK_EQ(iod_flow_entry_add(pl, 0, &ec, &log, &dup), 0);
	iod_flow_entries_process(pl, 0, 0);
	CHECK_EQ(log.last_status, -EEXIST);
	struct iod_flow_stats st;
	CHECK_EQ(iod_flow_entry_stats(pl, 0, id, &st), 0);
	CHECK_U64(st.packets, 1);
	CHECK_U64(st.bytes, b.pkt.len);
	uint64_t hits, misses;
	iod_flow_pipe_stats(pl, 0, &hits, &misses);
	CHECK_U64(hits, 1);
	CHECK_U64(misses, 2);
	/* Update changes the forward; remove makes it miss. */
	ec.fwd = drop();
	CHECK_EQ(iod_flow_entry_update(pl, 0, id, &ec, &log), 0);
	iod_flow_entries_process(pl, 0, 0);
	CHECK_EQ(log.last_op, IOD_FLOW_OP_UPDATE);
	mkpkt(&b, 0, 6, 0x0a000001, 1000, 0x0a000002, 80, 0);
	run1(pl, &b, 4);
	CHECK_EQ(b.pkt.verdict, IOD_FLOW_V_DROP);
	CHECK_EQ(iod_flow_entry_remove(pl, 0, id, &log), 0);
	iod_flow_entries_process(pl, 0, 0);
	CHECK_EQ(log.last_op, IOD_FLOW_OP_REMOVE);
	CHECK_EQ(iod_flow_entry_stats(pl, 0, id, &st), -ENOENT);
	/* Capacity is explicit. */
	for (int i = 0; i < 8; i++) {
		ec.match.dport = (uint16_t)(100 + i);
		CHECK_EQ(iod_flow_entry_add(pl, 0, &ec, NULL, NULL), 0);
	}
	CHECK_EQ(iod_flow_entry_add(pl, 0, &ec, NULL, NULL), -ENOSPC);
	iod_flow_pipeline_destroy(pl);
}

TEST(pipe_errors_are_explicit)
{
	struct iod_flow_pipeline *pl = mkpl(2, NULL, NULL, 0);
	struct iod_err e = {0};
	struct iod_flow_pipe_cfg pc = {.name = "x", .kind = IOD_FLOW_PIPE_BASIC, .entries_max = 4};
	pc.fwd = to_port(5);
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "port 5");
	pc.fwd = to_port(1);
	pc.kind = IOD_FLOW_PIPE_CT;
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "conntrack");
	pc.kind = IOD_FLOW_PIPE_BASIC;
	pc.entries_max = 0;
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), -EINVAL);
	pc.entries_max = 4;
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), 0);
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), -EEXIST);
	iod_flow_pipeline_destroy(pl);
}

TEST(control_and_acl_priorities_and_ranges)
{
	struct iod_flow_pipeline *pl = mkpl(4, NULL, NULL, 0);
	struct iod_err e;
	struct iod_flow_pipe_cfg pc = {
	    .name = "acl", .kind = IOD_FLOW_PIPE_ACL, .is_root = true, .entries_max = 16};
	pc.fwd_miss = drop();
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), 0);
	/* prio 10: 10.0.0.0/8 tcp dport 80-443 -> port 1; prio 5: src 10.9.0.0/16 -> drop;
	 * prio 20: anything tcp -> port 2 */
	struct iod_flow_entry_cfg a = {0}, b = {0}, c = {0};
	a.match.src.v4 = 0x0a000000;
	a.mask.src.v4 = 0xff000000;
	a.match.proto = 6;
	a.mask.proto = 0xff;
	a.dport_min = 80;
	a.dport_max = 443;
	a.priority = 10;
	a.fwd = to_port(1);
	b.match.src.v4 = 0x0a090000;
	b.mask.src.v4 = 0xffff0000;
	b.priority = 5;
	b.fwd = drop();
	c.match.proto = 6;
	c.mask.proto = 0xff;
	c.priority = 20;
	c.fwd = to_port(2);
	iod_flow_entry_add(pl, 0, &c, NULL, NULL);
	iod_flow_entry_add(pl, 0, &a, NULL, NULL);
	iod_flow_entry_add(pl, 0, &b, NULL, NULL);
	iod_flow_entries_process(pl, 0, 0);
	struct buf p;
	mkpkt(&p, 0, 6, 0x0a010101, 5, 0x0b000001, 443, 0);
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.port_out, 1);
	mkpkt(&p, 0, 6, 0x0a010101, 5, 0x0b000001, 444, 0);
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.port_out, 2);
	mkpkt(&p, 0, 6, 0x0a090101, 5, 0x0b000001, 80, 0);
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_DROP);
	mkpkt(&p, 0, 17, 0x0a010101, 5, 0x0b000001, 80, 0);
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_DROP); /* udp: miss */
	iod_flow_pipeline_destroy(pl);
}

TEST(lpm_longest_prefix_wins)
{
	struct iod_flow_pipeline *pl = mkpl(4, NULL, NULL, 0);
	struct iod_err e;
	struct iod_flow_pipe_cfg pc = {
	    .name = "rt", .kind = IOD_FLOW_PIPE_LPM, .is_root = true, .entries_max = 16};
	pc.fwd_miss = to_port(0);
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), 0);
	struct {
		uint32_t net;
		uint8_t len;
		uint16_t port;
	} r[] = {{0x0a000000, 8, 1}, {0x0a010000, 16, 2}, {0x0a010200, 24, 3}, {0, 0, 0}};
	for (int i = 0; i < 3; i++) {
		struct iod_flow_entry_cfg ec = {0};
		ec.match.dst.v4 = r[i].net;
		ec.prefix_len = r[i].len;
		ec.fwd = to_port(r[i].port);
		CHECK_EQ(iod_flow_entry_add(pl, 0, &ec, NULL, NULL), 0);
	}
	iod_flow_entries_process(pl, 0, 0);
	uint32_t dsts[] = {0x0a010203, 0x0a01ff01, 0x0aff0001, 0x0b000001};
	uint16_t want[] = {3, 2, 1, 0};
	for (int i = 0; i < 4; i++) {
		struct buf p;
		mkpkt(&p, 0, 17, 1, 1, dsts[i], 1, 0);
		run1(pl, &p, 0);
		CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
		CHECK_EQ(p.pkt.port_out, want[i]);
	}
	iod_flow_pipeline_destroy(pl);
}

TEST(hash_pipe_spreads_and_is_stable)
{
	struct iod_flow_pipeline *pl = mkpl(4, NULL, NULL, 0);
	struct iod_err e;
	struct iod_flow_pipe_cfg pc = {
	    .name = "ecmp", .kind = IOD_FLOW_PIPE_HASH, .is_root = true, .entries_max = 4};
	pc.mask.src.v4 = pc.mask.dst.v4 = 0xffffffff;
	pc.mask.sport = pc.mask.dport = 0xffff;
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), 0);
	for (uint16_t i = 0; i < 4; i++) {
		struct iod_flow_entry_cfg ec = {0};
		ec.fwd = to_port(i);
		iod_flow_entry_add(pl, 0, &ec, NULL, NULL);
	}
	iod_flow_entries_process(pl, 0, 0);
	int per[4] = {0};
	for (uint16_t f = 0; f < 4000; f++) {
		struct buf p;
		mkpkt(&p, 0, 17, 0x0a000001, (uint16_t)(1000 + f), 0x0a000002, 53, 0);
		run1(pl, &p, 0);
		CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
		per[p.pkt.port_out]++;
		uint16_t first = p.pkt.port_out;
		mkpkt(&p, 0, 17, 0x0a000001, (uint16_t)(1000 + f), 0x0a000002, 53, 0);
		run1(pl, &p, 0);
		CHECK_EQ(p.pkt.port_out, first);
	}
	for (int i = 0; i < 4; i++)
		CHECK_MSG(per[i] > 800 && per[i] < 1200, "port %d got %d", i, per[i]);
	iod_flow_pipeline_destroy(pl);
}

TEST(rss_fwd_and_mirror_and_set_meta_chain)
{
	struct iod_flow_pipeline *pl = mkpl(4, NULL, NULL, 0);
	struct iod_err e;
	struct iod_flow_pipe_cfg p0 = {
	    .name = "classify", .kind = IOD_FLOW_PIPE_BASIC, .is_root = true, .entries_max = 4};
	p0.mask.dport = 0xffff;
	p0.actions.flags = IOD_FLOW_ACT_SET_META;
	struct iod_flow_pipe_cfg p1 = {
	    .name = "by_meta", .kind = IOD_FLOW_PIPE_BASIC, .entries_max = 4};
	p1.mask.meta = 0xffffffff;
	p1.fwd_miss = drop();
	CHECK_EQ(iod_flow_pipe_create(pl, &p0, &e), 0);
	CHECK_EQ(iod_flow_pipe_create(pl, &p1, &e), 1);
	struct iod_flow_entry_cfg ec = {0};
	ec.match.dport = 53;
	ec.actions.flags = IOD_FLOW_ACT_SET_META;
	ec.actions.meta = 7;
	ec.fwd = to_pipe(1);
	iod_flow_entry_add(pl, 0, &ec, NULL, NULL);
	struct iod_flow_entry_cfg e1 = {0};
	e1.match.meta = 7;
	e1.fwd = (struct iod_flow_fwd){.type = IOD_FLOW_FWD_RSS, .rss_queues = 4};
	e1.monitor.flags = IOD_FLOW_MON_MIRROR;
	e1.monitor.mirror_port = 3;
	iod_flow_entry_add(pl, 1, &e1, NULL, NULL);
	iod_flow_entries_process(pl, 0, 0);
	int queues[4] = {0};
	for (uint16_t f = 0; f < 400; f++) {
		struct buf p;
		mkpkt(&p, 0, 17, 0x0a000001, (uint16_t)(2000 + f), 0x0a000002, 53, 0);
		run1(pl, &p, 0);
		CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_RSS);
		CHECK(p.pkt.queue < 4);
		CHECK_EQ(p.pkt.mirror_port, 3);
		queues[p.pkt.queue]++;
	}
	for (int i = 0; i < 4; i++)
		CHECK(queues[i] > 50);
	iod_flow_pipeline_destroy(pl);
}

TEST(actions_nat_dscp_ttl_mac_and_checksums)
{
	struct iod_flow_pipeline *pl = mkpl(2, NULL, NULL, 0);
	struct iod_err e;
	struct iod_flow_pipe_cfg pc = {
	    .name = "rw", .kind = IOD_FLOW_PIPE_BASIC, .is_root = true, .entries_max = 4};
	pc.mask.dst.v4 = 0xffffffff;
	pc.fwd = to_port(1);
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), 0);
	struct iod_flow_entry_cfg ec = {0};
	ec.match.dst.v4 = 0x0a000002;
	ec.actions.flags = IOD_FLOW_ACT_NAT_DST | IOD_FLOW_ACT_SET_DSCP | IOD_FLOW_ACT_DEC_TTL |
	                   IOD_FLOW_ACT_SET_MAC;
	ec.actions.nat_ip = 0xac100001;
	ec.actions.nat_port = 9090;
	ec.actions.dscp = 46;
	memcpy(ec.actions.dst_mac, MAC_A, 6);
	memcpy(ec.actions.src_mac, MAC_B, 6);
	iod_flow_entry_add(pl, 0, &ec, NULL, NULL);
	iod_flow_entries_process(pl, 0, 0);
	struct buf p;
	mkpkt(&p, 0, 6, 0x0a000001, 1000, 0x0a000002, 80, 0);
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
	struct iod_net_meta m;
	iod_net_parse(p.pkt.data, p.pkt.len, 0, &m);
	CHECK_U64(m.key.dst.v4, 0xac100001);
	CHECK_EQ(m.key.dport, 9090);
	CHECK_EQ(m.ip_tos >> 2, 46);
	CHECK_EQ(p.pkt.data[14 + 8], 63);
	CHECK(memcmp(p.pkt.data, MAC_A, 6) == 0);
	CHECK(iod_net_csums_ok(p.pkt.data, p.pkt.len));
	iod_flow_pipeline_destroy(pl);
}

TEST(encap_decap_sport_override_and_arp)
{
	struct iod_flow_pipeline *pl = mkpl(2, NULL, NULL, 0);
	struct iod_err e;
	/* port 0 (host side): encap to a VTEP; port 1 (fabric): decap VNI 100. */
	struct iod_flow_pipe_cfg enc = {.name = "encap",
	                                .kind = IOD_FLOW_PIPE_BASIC,
	                                .is_root = true,
	                                .port = 0,
	                                .entries_max = 4};
	enc.mask.dst.v4 = 0xffffffff;
	enc.mask.eth_type = 0xffff;
	enc.fwd = to_port(1);
	struct iod_flow_pipe_cfg dec = {.name = "decap",
	                                .kind = IOD_FLOW_PIPE_BASIC,
	                                .is_root = true,
	                                .port = 1,
	                                .entries_max = 4};
	dec.mask.vni = 0xffffff;
	dec.mask.outer_dst_ip = 0xffffffff;
	dec.actions.flags = IOD_FLOW_ACT_DECAP;
	dec.fwd = to_port(0);
	CHECK_EQ(iod_flow_pipe_create(pl, &enc, &e), 0);
	CHECK_EQ(iod_flow_pipe_create(pl, &dec, &e), 1);
	struct iod_flow_entry_cfg ee = {0};
	ee.match.dst.v4 = 0xc0a80002;
	ee.match.eth_type = IOD_NET_ETH_P_IPV4;
	ee.actions.flags = IOD_FLOW_ACT_ENCAP;
	ee.actions.encap = (struct iod_net_vxlan_tunnel){
	    .outer_src_ip = 0x0a0a0001, .outer_dst_ip = 0x0a0a0002, .vni = 100, .udp_csum = true};
	uint32_t enc_id;
	iod_flow_entry_add(pl, 0, &ee, NULL, &enc_id);
	/* ARP for the overlay gateway 192.168.0.1 is answered back out port 0. */
	struct iod_flow_entry_cfg arp = {0};
	arp.match.eth_type = IOD_NET_ETH_P_ARP;
	arp.match.dst.v4 = 0xc0a80001; /* ARP keys carry the target address */
	arp.actions.flags = IOD_FLOW_ACT_ARP_REPLY;
	arp.actions.arp_ip = 0xc0a80001;
	memcpy(arp.actions.src_mac, MAC_B, 6);
	arp.fwd = to_port(0);
	iod_flow_entry_add(pl, 0, &arp, NULL, NULL);
	struct iod_flow_entry_cfg de = {0};
	de.match.vni = 100;
	de.match.outer_dst_ip = 0x0a0a0002;
	iod_flow_entry_add(pl, 1, &de, NULL, NULL);
	iod_flow_entries_process(pl, 0, 0);

	struct buf p;
	mkpkt(&p, 0, 6, 0xc0a80001, 33000, 0xc0a80002, 22, 0);
	uint32_t inner_len = p.pkt.len;
	uint8_t inner[256];
	memcpy(inner, p.pkt.data, inner_len);
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
	CHECK_EQ(p.pkt.len, inner_len + 50);
	struct iod_net_meta m;
	iod_net_parse(p.pkt.data, p.pkt.len, 0, &m);
	CHECK(m.flags & IOD_NET_F_VXLAN);
	CHECK_EQ(m.vni, 100);
	CHECK(m.outer.sport >= 49152);
	CHECK(iod_net_csums_ok(p.pkt.data, p.pkt.len));
	uint16_t hashed = m.outer.sport;

	/* Adaptive routing pins the flow's outer source port. */
	ee.actions.flags |= IOD_FLOW_ACT_SET_SPORT;
	ee.actions.encap.src_port = 50123;
	iod_flow_entry_update(pl, 0, enc_id, &ee, NULL);
	iod_flow_entries_process(pl, 0, 0);
	mkpkt(&p, 0, 6, 0xc0a80001, 33000, 0xc0a80002, 22, 0);
	run1(pl, &p, 0);
	iod_net_parse(p.pkt.data, p.pkt.len, 0, &m);
	CHECK_EQ(m.outer.sport, 50123);
	CHECK(hashed != 50123);
	CHECK(iod_net_csums_ok(p.pkt.data, p.pkt.len));

	/* Back in on the fabric port: decapsulated byte for byte. */
	p.pkt.port_in = 1;
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
	CHECK_EQ(p.pkt.port_out, 0);
	CHECK_EQ(p.pkt.len, inner_len);
	CHECK(memcmp(p.pkt.data, inner, inner_len) == 0);
	CHECK_EQ(p.pkt.headroom, HEADROOM);

	/* ARP */
	static const uint8_t zero[6] = {0};
	memset(&p.pkt, 0, sizeof(p.pkt));
	p.pkt.data = p.mem + HEADROOM;
	p.pkt.headroom = HEADROOM;
	p.pkt.len =
	    (uint32_t)iod_net_build_arp(p.pkt.data, 64, 1, MAC_A, 0xc0a80005, zero, 0xc0a80001);
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
	CHECK_EQ(p.pkt.port_out, 0);
	CHECK_EQ(iod_net_be16(p.pkt.data + 20), 2);
	CHECK(memcmp(p.pkt.data + 22, MAC_B, 6) == 0);
	iod_flow_pipeline_destroy(pl);
}

TEST(meter_monitor_polices_and_counts_colours)
{
	struct iod_flow_pipeline *pl = mkpl(2, NULL, NULL, 0);
	struct iod_err e;
	struct iod_flow_pipe_cfg pc = {
	    .name = "qos", .kind = IOD_FLOW_PIPE_BASIC, .is_root = true, .entries_max = 4};
	pc.mask.dst.v4 = 0xffffffff;
	pc.fwd = to_port(1);
	pc.monitor.flags = IOD_FLOW_MON_METER;
	pc.monitor.meter = (struct iod_net_meter_cfg){
	    .cir_bytes_per_s = 10000, .cbs_bytes = 1000, .ebs_bytes = 1000};
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), 0);
	struct iod_flow_entry_cfg ec = {0};
	ec.match.dst.v4 = 2;
	uint32_t id;
	iod_flow_entry_add(pl, 0, &ec, NULL, &id);
	iod_flow_entries_process(pl, 0, 0);
	int passed = 0;
	for (int i = 0; i < 100; i++) {
		struct buf p;
		mkpkt(&p, 0, 17, 1, 1, 2, 2, 0); /* 58 bytes */
		run1(pl, &p, 0);
		passed += p.pkt.verdict == IOD_FLOW_V_PORT;
	}
	struct iod_flow_stats st;
	iod_flow_entry_stats(pl, 0, id, &st);
	/* 2000 bytes of tokens at t=0: 17 green (1000/58), 17 yellow, the rest red. */
	CHECK_U64(st.green, 17);
	CHECK_U64(st.yellow, 17);
	CHECK_U64(st.red, 66);
	CHECK_EQ(passed, 34);
	iod_flow_pipeline_destroy(pl);
}

TEST(aging_removes_idle_entries_with_callback)
{
	struct iod_flow_pipeline *pl = mkpl(2, NULL, NULL, 0);
	struct iod_err e;
	struct iod_flow_pipe_cfg pc = {
	    .name = "age", .kind = IOD_FLOW_PIPE_BASIC, .is_root = true, .entries_max = 4};
	pc.mask.dst.v4 = 0xffffffff;
	pc.fwd = to_port(1);
	pc.monitor.flags = IOD_FLOW_MON_AGING;
	pc.monitor.aging_s = 10;
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), 0);
	struct status_log log = {0};
	struct iod_flow_entry_cfg ec = {0};
	ec.match.dst.v4 = 2;
	uint32_t busy, idle;
	iod_flow_entry_add(pl, 0, &ec, &log, &busy);
	ec.match.dst.v4 = 3;
	iod_flow_entry_add(pl, 0, &ec, &log, &idle);
	iod_flow_entries_process(pl, 0, 0);
	log.n = 0;
	for (uint64_t t = 1; t <= 15; t++) {
		struct buf p;
		mkpkt(&p, 0, 17, 1, 1, 2, 2, 0);
		run1(pl, &p, t * IOD_NS_PER_S);
		CHECK_EQ(iod_flow_aging_process(pl, t * IOD_NS_PER_S, 100), t == 10 ? 1u : 0u);
	}
	CHECK_EQ(log.n, 1);
	CHECK_EQ(log.last_op, IOD_FLOW_OP_AGED);
	CHECK_EQ(log.last_entry, idle);
	struct iod_flow_stats st;
	CHECK_EQ(iod_flow_entry_stats(pl, 0, busy, &st), 0);
	CHECK_EQ(iod_flow_entry_stats(pl, 0, idle, &st), -ENOENT);
	CHECK_EQ(iod_flow_aging_process(pl, 26 * IOD_NS_PER_S, 100), 1);
	iod_flow_pipeline_destroy(pl);
}

/*
 * The stateful overlay: ct -> acl (established passes; new: SG rules, LB for
 * the VIP, commit) -> out. Replies come back un-NATed.
 */
struct overlay {
	struct iod_flow_pipeline *pl;  /* pipeline */
	struct iod_net_ct *ct;         /* conntrack */
	struct iod_net_lb_service svc; /* one service */
};

static int overlay_init(struct overlay *o, bool emc_off)
{
	struct iod_err e;
	memset(o, 0, sizeof(*o));
	if (iod_net_ct_create(&o->ct, 1024, NULL))
		return -1;
	iod_net_lb_service_init(&o->svc, "web", 0x0a60000a, 80, 6);
	iod_net_lb_backend_add(&o->svc, 0x0a010001, 8080, 1);
	iod_net_lb_backend_add(&o->svc, 0x0a010002, 8080, 1);
	iod_net_lb_service_build(&o->svc);
	struct iod_flow_pipeline_cfg c = {.cores = 1,
	                                  .ports = 2,
	                                  .ct = o->ct,
	                                  .services = &o->svc,
	                                  .services_n = 1,
	                                  .emc_off = emc_off};
	if (iod_flow_pipeline_create(&o->pl, &c, &e))
		return -1;
	struct iod_flow_pipe_cfg ctp = {.name = "ct", .kind = IOD_FLOW_PIPE_CT, .is_root = true};
	ctp.fwd = to_pipe(1);
	struct iod_flow_pipe_cfg acl = {.name = "sg", .kind = IOD_FLOW_PIPE_ACL, .entries_max = 16};
	acl.fwd_miss = drop();
	if (iod_flow_pipe_create(o->pl, &ctp, &e) != 0 ||
	    iod_flow_pipe_create(o->pl, &acl, &e) != 1)
		return -1;
	struct iod_flow_entry_cfg est = {0};
	est.match.ct_state = IOD_NET_CT_EST;
	est.mask.ct_state = IOD_NET_CT_EST;
	est.priority = 1;
	est.fwd = to_port(1);
	iod_flow_entry_add(o->pl, 1, &est, NULL, NULL);
	/* new to the VIP on 80 -> LB */
	struct iod_flow_entry_cfg lb = {0};
	lb.match.ct_state = IOD_NET_CT_NEW;
	lb.mask.ct_state = IOD_NET_CT_NEW | IOD_NET_CT_INV;
	lb.match.dst.v4 = 0x0a60000a;
	lb.mask.dst.v4 = 0xffffffff;
	lb.match.proto = 6;
	lb.mask.proto = 0xff;
	lb.dport_min = lb.dport_max = 80;
	lb.priority = 2;
	lb.actions.flags = IOD_FLOW_ACT_LB;
	lb.actions.lb_service = 0;
	lb.fwd = to_port(1);
	iod_flow_entry_add(o->pl, 1, &lb, NULL, NULL);
	/* new tcp to 10.1.0.0/16 port 22 allowed (SG rule), committed */
	struct iod_flow_entry_cfg ssh = {0};
	ssh.match.ct_state = IOD_NET_CT_NEW;
	ssh.mask.ct_state = IOD_NET_CT_NEW | IOD_NET_CT_INV;
	ssh.match.dst.v4 = 0x0a010000;
	ssh.mask.dst.v4 = 0xffff0000;
	ssh.match.proto = 6;
	ssh.mask.proto = 0xff;
	ssh.dport_min = ssh.dport_max = 22;
	ssh.priority = 3;
	ssh.actions.flags = IOD_FLOW_ACT_CT_COMMIT;
	ssh.fwd = to_port(1);
	iod_flow_entry_add(o->pl, 1, &ssh, NULL, NULL);
	iod_flow_entries_process(o->pl, 0, 0);
	return 0;
}

static void overlay_free(struct overlay *o)
{
	iod_flow_pipeline_destroy(o->pl);
	iod_net_ct_destroy(o->ct);
	iod_net_lb_service_free(&o->svc);
}

TEST(stateful_sg_conntrack_and_lb)
{
	struct overlay o;
	CHECK_EQ(overlay_init(&o, false), 0);
	struct buf p;
	/* Denied: new TCP to port 23. */
	mkpkt(&p, 0, 6, 0x0a000001, 40000, 0x0a010001, 23, IOD_NET_TCP_SYN);
	run1(o.pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_DROP);
	/* Mid-stream ACK with no session: invalid, dropped. */
	mkpkt(&p, 0, 6, 0x0a000001, 40000, 0x0a010001, 22, IOD_NET_TCP_ACK);
	run1(o.pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_DROP);
	/* SSH: SYN allowed and committed; the SYN-ACK reply is established. */
	mkpkt(&p, 0, 6, 0x0a000001, 40000, 0x0a010001, 22, IOD_NET_TCP_SYN);
	run1(o.pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
	CHECK_EQ(iod_net_ct_count(o.ct), 1);
	mkpkt(&p, 1, 6, 0x0a010001, 22, 0x0a000001, 40000, IOD_NET_TCP_SYN | IOD_NET_TCP_ACK);
	p.pkt.port_in = 0; /* the same root pipe sees both directions */
	run1(o.pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
	CHECK(p.pkt.ct_state & IOD_NET_CT_RPL);

	/* The VIP: a client's SYN is DNATed to a backend, the reply SNATed back. */
	uint32_t chosen[2] = {0};
	for (uint16_t c = 0; c < 64; c++) {
		mkpkt(&p, 0, 6, 0x0a000100 + c, (uint16_t)(30000 + c), 0x0a60000a, 80,
		      IOD_NET_TCP_SYN);
		run1(o.pl, &p, 0);
		CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
		struct iod_net_meta m;
		iod_net_parse(p.pkt.data, p.pkt.len, 0, &m);
		CHECK(m.key.dst.v4 == 0x0a010001 || m.key.dst.v4 == 0x0a010002);
		CHECK_EQ(m.key.dport, 8080);
		CHECK(iod_net_csums_ok(p.pkt.data, p.pkt.len));
		chosen[m.key.dst.v4 - 0x0a010001]++;
		uint32_t backend = m.key.dst.v4;
		mkpkt(&p, 0, 6, backend, 8080, 0x0a000100 + c, (uint16_t)(30000 + c),
		      IOD_NET_TCP_SYN | IOD_NET_TCP_ACK);
		run1(o.pl, &p, 0);
		CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
		iod_net_parse(p.pkt.data, p.pkt.len, 0, &m);
		CHECK_U64(m.key.src.v4, 0x0a60000a);
		CHECK_EQ(m.key.sport, 80);
		CHECK(iod_net_csums_ok(p.pkt.data, p.pkt.len));
		/* Backend 0 goes down half way: new flows avoid it; existing flows stay. */
		if (c == 31) {
			iod_net_lb_backend_set_up(&o.svc, 0, false);
			iod_flow_pipeline_invalidate(o.pl); /* services changed */
		}
	}
	CHECK(chosen[0] > 5 && chosen[1] > 5);
	/* The first client's flow (whatever its backend) still goes where it went. */
	mkpkt(&p, 0, 6, 0x0a000100, 30000, 0x0a60000a, 80, IOD_NET_TCP_ACK);
	run1(o.pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
	/* New flows after the failure all go to backend 1. */
	for (uint16_t c = 0; c < 32; c++) {
		mkpkt(&p, 0, 6, 0x0a000200 + c, (uint16_t)(31000 + c), 0x0a60000a, 80,
		      IOD_NET_TCP_SYN);
		run1(o.pl, &p, 0);
		struct iod_net_meta m;
		iod_net_parse(p.pkt.data, p.pkt.len, 0, &m);
		CHECK_U64(m.key.dst.v4, 0x0a010002);
	}
	overlay_free(&o);
}

TEST(emc_agrees_with_uncached_walk)
{
	struct overlay a, b;
	CHECK_EQ(overlay_init(&a, false), 0);
	CHECK_EQ(overlay_init(&b, true), 0);
	struct iod_rng rng;
	iod_rng_seed(&rng, 7);
	for (int i = 0; i < 3000; i++) {
		uint32_t src = 0x0a000100 + (uint32_t)iod_rng_below(&rng, 16);
		uint16_t sport = (uint16_t)(30000 + iod_rng_below(&rng, 8));
		uint32_t dst = iod_rng_below(&rng, 2) ? 0x0a60000a : 0x0a010001;
		uint16_t dport = iod_rng_below(&rng, 2) ? 80 : 22;
		uint8_t fl = iod_rng_below(&rng, 3) ? IOD_NET_TCP_ACK : IOD_NET_TCP_SYN;
		struct buf pa, pb;
		mkpkt(&pa, 0, 6, src, sport, dst, dport, fl);
		mkpkt(&pb, 0, 6, src, sport, dst, dport, fl);
		run1(a.pl, &pa, (uint64_t)i);
		run1(b.pl, &pb, (uint64_t)i);
		CHECK_EQ(pa.pkt.verdict, pb.pkt.verdict);
		CHECK_EQ(pa.pkt.len, pb.pkt.len);
		CHECK(memcmp(pa.pkt.data, pb.pkt.data, pa.pkt.len) == 0);
	}
	struct iod_flow_engine_stats sa;
	iod_flow_engine_stats(a.pl, &sa);
	CHECK(sa.fp_hits + sa.emc_hits + sa.mf_hits > 1000);
	CHECK_EQ(iod_net_ct_count(a.ct), iod_net_ct_count(b.ct));
	overlay_free(&a);
	overlay_free(&b);
}

TEST(dump_json_lists_entries_with_counters)
{
	struct overlay o;
	CHECK_EQ(overlay_init(&o, false), 0);
	struct buf p;
	mkpkt(&p, 0, 6, 0x0a000001, 40000, 0x0a010001, 22, IOD_NET_TCP_SYN);
	run1(o.pl, &p, 0);
	json_t *j = iod_flow_dump_json(o.pl, NULL, NULL);
	char *s = json_dumps(j, JSON_COMPACT);
	CHECK_CONTAINS(s, "\"name\":\"sg\"");
	CHECK_CONTAINS(s, "\"kind\":\"acl\"");
	CHECK_CONTAINS(s, "\"dport_range\":\"22-22\"");
	CHECK_CONTAINS(s, "\"actions\":[\"ct_commit\"],\"fwd\":{\"type\":\"port\",\"port\":1},"
	                  "\"packets\":1");
	free(s);
	json_decref(j);
	overlay_free(&o);
}

TEST(offload_translation_marks_what_stays_in_software)
{
	struct iod_flow_pipeline *pl = mkpl(2, NULL, NULL, 0);
	struct iod_err e;
	struct iod_flow_pipe_cfg dec = {.name = "decap",
	                                .kind = IOD_FLOW_PIPE_BASIC,
	                                .is_root = true,
	                                .port = 1,
	                                .entries_max = 4};
	dec.mask.vni = 0xffffff;
	dec.mask.outer_dst_ip = 0xffffffff;
	dec.actions.flags = IOD_FLOW_ACT_DECAP;
	dec.monitor.flags = IOD_FLOW_MON_COUNT;
	dec.fwd = to_port(0);
	struct iod_flow_pipe_cfg acl = {
	    .name = "acl", .kind = IOD_FLOW_PIPE_ACL, .is_root = true, .port = 0, .entries_max = 4};
	CHECK_EQ(iod_flow_pipe_create(pl, &dec, &e), 0);
	CHECK_EQ(iod_flow_pipe_create(pl, &acl, &e), 1);
	struct iod_flow_entry_cfg de = {0};
	de.match.vni = 100;
	de.match.outer_dst_ip = 0x0a0a0001;
	uint32_t d_id, a_id, r_id;
	iod_flow_entry_add(pl, 0, &de, NULL, &d_id);
	struct iod_flow_entry_cfg ae = {0};
	ae.match.proto = 6;
	ae.mask.proto = 0xff;
	ae.dport_min = ae.dport_max = 443;
	ae.fwd = drop();
	iod_flow_entry_add(pl, 1, &ae, NULL, &a_id);
	ae.dport_min = 80;
	iod_flow_entry_add(pl, 1, &ae, NULL, &r_id);
	iod_flow_entries_process(pl, 0, 0);
	struct iod_flow_hw_rule r;
	CHECK_EQ(iod_flow_offload_translate(pl, 0, d_id, &r), 0);
	CHECK(!r.unsupported);
	CHECK_EQ(r.group, 0);
	CHECK(r.items & IOD_FLOW_HW_VXLAN);
	CHECK_EQ(r.spec.vni, 100);
	CHECK_U64(r.spec.outer_dst_ip, 0x0a0a0001);
	CHECK_EQ(r.actions, IOD_FLOW_HW_A_DECAP | IOD_FLOW_HW_A_COUNT | IOD_FLOW_HW_A_PORT);
	CHECK_EQ(iod_flow_offload_translate(pl, 1, a_id, &r), 0);
	CHECK(!r.unsupported);
	CHECK(r.items & IOD_FLOW_HW_TCP);
	CHECK_EQ(r.spec.dport, 443);
	CHECK_EQ(r.mask.dport, 0xffff);
	CHECK(r.actions & IOD_FLOW_HW_A_DROP);
	CHECK_EQ(iod_flow_offload_translate(pl, 1, r_id, &r), 0);
	CHECK_CONTAINS(r.unsupported, "port range");
	CHECK_EQ(iod_flow_offload_translate(pl, 1, 3, &r), -ENOENT);
	/* the verdict a live node's switch reports (no port to validate on) */
	const char *why = NULL;
	CHECK_EQ(iod_flow_offload_verdict(pl, 0, d_id, &why), 2);
	CHECK_CONTAINS(why, "translates to an rte_flow rule");
	CHECK_EQ(iod_flow_offload_verdict(pl, 1, r_id, &why), 0);
	CHECK_CONTAINS(why, "port range");
	CHECK_EQ(iod_flow_offload_verdict(pl, 1, 3, &why), 0);
	/* ... and as the dump writes it: "offload" per entry, "offloaded" only
	 * for a rule a port accepted */
	json_t *j = iod_flow_dump_json(pl, iod_flow_offload_verdict, pl);
	const json_t *ents =
	    json_object_get(json_array_get(json_object_get(j, "pipes"), 1), "entries");
	CHECK_EQ(json_array_size(ents), 2);
	size_t i;
	json_t *en;
	json_array_foreach(ents, i, en)
	{
		bool range = json_integer_value(json_object_get(en, "id")) == (json_int_t)r_id;
		CHECK_STR(json_string_value(json_object_get(en, "offload")),
		          range ? "software" : "translates");
		CHECK(json_is_false(json_object_get(en, "offloaded")));
	}
	json_decref(j);
	iod_flow_pipeline_destroy(pl);
}

TEST(pipe_constant_fields_gate_every_entry)
{
	struct iod_flow_pipeline *pl = mkpl(2, NULL, NULL, 0);
	struct iod_err e;
	struct iod_flow_pipe_cfg pc = {
	    .name = "tcp_only", .kind = IOD_FLOW_PIPE_BASIC, .is_root = true, .entries_max = 4};
	pc.match.proto = IOD_NET_PROTO_TCP;
	pc.const_mask.proto = 0xff;
	pc.mask.dst.v4 = 0xffffffff;
	pc.fwd = to_port(1);
	CHECK_EQ(iod_flow_pipe_create(pl, &pc, &e), 0);
	struct iod_flow_entry_cfg ec = {0};
	ec.match.dst.v4 = 2;
	iod_flow_entry_add(pl, 0, &ec, NULL, NULL);
	iod_flow_entries_process(pl, 0, 0);
	struct buf p;
	mkpkt(&p, 0, 6, 1, 1, 2, 2, 0);
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_PORT);
	mkpkt(&p, 0, 17, 1, 1, 2, 2, 0);
	run1(pl, &p, 0);
	CHECK_EQ(p.pkt.verdict, IOD_FLOW_V_DROP); /* UDP: the pipe's constant says TCP */
	struct iod_flow_hw_rule r;
	CHECK_EQ(iod_flow_offload_translate(pl, 0, 0, &r), 0);
	CHECK_EQ(r.spec.proto, IOD_NET_PROTO_TCP);
	CHECK_EQ(r.mask.proto, 0xff);
	iod_flow_pipeline_destroy(pl);
}
