/*
 * test_net_packet.c: unit tests for net/packet.c: parser, checksums
 * (full and incremental), builders, VXLAN encap/decap, ARP responder, NAT.
 */
#include "harness.h"
#include "iod/net_debug.h"
#include "iod/net.h"

static const uint8_t MAC_A[6] = {0x02, 0, 0, 0, 0, 0x0a};
static const uint8_t MAC_B[6] = {0x02, 0, 0, 0, 0, 0x0b};

static int build_v4(uint8_t *buf, uint32_t cap, uint8_t proto, uint32_t src, uint32_t dst,
                    uint16_t sport, uint16_t dport, uint16_t payload)
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
	s.payload_bytes = payload;
	return iod_net_pkt_build(&s, buf, cap);
}

TEST(checksum_rfc1071_example)
{
	/* RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2 (before complement). */
	const uint8_t d[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
	CHECK_EQ(iod_net_csum_fold(iod_net_csum_add(0, d, sizeof(d))), (uint16_t)~0xddf2);
}

TEST(checksum_incremental_matches_full)
{
	uint8_t hdr[20] = {0x45, 0, 0,   60, 0x1c, 0x46, 0x40, 0,  64, 6,
	                   0,    0, 172, 16, 10,   99,   172,  16, 10, 12};
	struct iod_net_ipv4 *ip = (void *)hdr;
	iod_net_put16(&ip->csum_be, iod_net_ipv4_csum(ip));
	for (uint32_t v = 1; v < 200000; v += 7919) {
		uint16_t c = iod_net_be16(&ip->csum_be);
		uint32_t old = iod_net_be32(&ip->dst_be);
		iod_net_put32(&ip->dst_be, old * 2654435761u + v);
		uint16_t inc = iod_net_csum_update32(c, old, iod_net_be32(&ip->dst_be));
		ip->csum_be = 0;
		CHECK_EQ(inc, iod_net_ipv4_csum(ip));
		iod_net_put16(&ip->csum_be, inc);
	}
}

TEST(parse_ipv4_tcp)
{
	uint8_t f[128];
	int n = build_v4(f, sizeof(f), IOD_NET_PROTO_TCP, 0x0a000001, 0x0a000002, 1234, 80, 10);
	CHECK_EQ(n, 14 + 20 + 20 + 10);
	struct iod_net_meta m;
	CHECK_EQ(iod_net_parse(f, (uint32_t)n, 0, &m), 0);
	CHECK(m.flags & IOD_NET_F_L3);
	CHECK(m.flags & IOD_NET_F_L4);
	CHECK(!(m.flags & (IOD_NET_F_VXLAN | IOD_NET_F_TRUNC)));
	CHECK_EQ(m.l3_ofs, 14);
	CHECK_EQ(m.l4_ofs, 34);
	CHECK_EQ(m.key.proto, IOD_NET_PROTO_TCP);
	CHECK_U64(m.key.src.v4, 0x0a000001);
	CHECK_EQ(m.key.sport, 1234);
	CHECK_EQ(m.key.dport, 80);
	CHECK_EQ(m.tcp_flags, IOD_NET_TCP_SYN);
	CHECK_EQ(m.hash, iod_net_tuple_hash(&m.key));
	CHECK(iod_net_csums_ok(f, (uint32_t)n));
	f[40] ^= 1; /* corrupt the payload-side of TCP */
	CHECK(!iod_net_csums_ok(f, (uint32_t)n));
}

TEST(parse_vlan_ipv6_udp)
{
	uint8_t f[256];
	struct iod_net_pkt_spec s = {0};
	s.vlan_id = 42;
	s.t.family = IOD_NET_AF_V6;
	s.t.proto = IOD_NET_PROTO_UDP;
	s.t.src.v6[0] = 0xfd;
	s.t.src.v6[15] = 1;
	s.t.dst.v6[0] = 0xfd;
	s.t.dst.v6[15] = 2;
	s.t.sport = 5000;
	s.t.dport = 53;
	s.payload_bytes = 33;
	int n = iod_net_pkt_build(&s, f, sizeof(f));
	CHECK_EQ(n, 18 + 40 + 8 + 33);
	struct iod_net_meta m;
	CHECK_EQ(iod_net_parse(f, (uint32_t)n, 0, &m), 0);
	CHECK(m.flags & IOD_NET_F_VLAN);
	CHECK_EQ(m.vlan_tci & 0xfff, 42);
	CHECK_EQ(m.key.family, IOD_NET_AF_V6);
	CHECK_EQ(m.key.dport, 53);
	CHECK_EQ(m.l4_ofs, 18 + 40);
	CHECK(iod_net_csums_ok(f, (uint32_t)n));
}

TEST(parse_truncated_never_overreads)
{
	uint8_t f[128];
	int n = build_v4(f, sizeof(f), IOD_NET_PROTO_TCP, 1, 2, 3, 4, 0);
	for (int len = 0; len < n; len++) {
		struct iod_net_meta m;
		int rc = iod_net_parse(f, (uint32_t)len, 0, &m);
		if (len < 14) {
			CHECK_EQ(rc, -EINVAL);
			continue;
		}
		CHECK_EQ(rc, 0);
		CHECK(len == n || (m.flags & IOD_NET_F_TRUNC));
	}
}

TEST(vxlan_encap_decap_roundtrip)
{
	uint8_t buf[256];
	uint8_t *inner = buf + 64;
	int n = build_v4(inner, 192, IOD_NET_PROTO_UDP, 0xc0a80001, 0xc0a80002, 1111, 2222, 20);
	CHECK(n > 0);
	struct iod_net_meta im;
	iod_net_parse(inner, (uint32_t)n, 0, &im);
	struct iod_net_vxlan_tunnel t = {0};
	memcpy(t.outer_dst_mac, MAC_B, 6);
	memcpy(t.outer_src_mac, MAC_A, 6);
	t.outer_src_ip = 0x0a010101;
	t.outer_dst_ip = 0x0a010102;
	t.vni = 0x123456;
	t.udp_csum = true;
	uint8_t *fr = inner;
	uint32_t len = (uint32_t)n;
	CHECK_EQ(iod_net_vxlan_encap(&fr, &len, 10, &t, im.hash, 0), -ENOSPC);
	CHECK_EQ(iod_net_vxlan_encap(&fr, &len, 64, &t, im.hash, 0), 0);
	CHECK_EQ(len, (uint32_t)n + IOD_NET_VXLAN_OVERHEAD);
	CHECK(fr == inner - 50);
	struct iod_net_meta m;
	CHECK_EQ(iod_net_parse(fr, len, 0, &m), 0);
	CHECK(m.flags & IOD_NET_F_VXLAN);
	CHECK(m.flags & IOD_NET_F_IN_L4);
	CHECK_U64(m.vni, 0x123456);
	CHECK_U64(m.outer.src.v4, 0x0a010101);
	CHECK_EQ(m.outer.dport, IOD_NET_VXLAN_PORT);
	CHECK_EQ(m.outer.sport, iod_net_vxlan_sport(im.hash, 0, 0));
	CHECK(m.outer.sport >= 49152);
	CHECK(iod_net_tuple_equal(&m.key, &im.key));
	CHECK_EQ(m.hash, im.hash);
	CHECK(iod_net_csums_ok(fr, len));
	/* Per-flow override (adaptive routing), then re-steer after the fact. */
	uint8_t copy[256];
	int c =
	    iod_net_vxlan_encap_copy(copy, sizeof(copy), inner, (uint32_t)n, &t, im.hash, 50000);
	CHECK_EQ(c, (int)len);
	CHECK_EQ(iod_net_be16(copy + 34), 50000);
	CHECK_EQ(iod_net_vxlan_set_sport(copy, (uint32_t)c, 50003), 0);
	CHECK_EQ(iod_net_be16(copy + 34), 50003);
	CHECK(iod_net_csums_ok(copy, (uint32_t)c));
	/* Decap gives back the inner frame byte for byte. */
	uint32_t vni = 0;
	CHECK_EQ(iod_net_vxlan_decap(&fr, &len, 0, &vni), 0);
	CHECK_U64(vni, 0x123456);
	CHECK(fr == inner);
	CHECK_EQ(len, (uint32_t)n);
	CHECK_EQ(iod_net_vxlan_decap(&fr, &len, 0, &vni), -EINVAL);
}

/* Encap from a precomputed template writes exactly what the generic encap
 * writes: random tunnels (TTL, TOS, ports, checksums on/off), lengths,
 * hashes and overrides. */
TEST(vxlan_template_encap_matches_generic)
{
	struct iod_rng rng;
	iod_rng_seed(&rng, 3);
	static uint8_t a[2048], b[2048];
	for (int i = 0; i < 2000; i++) {
		struct iod_net_vxlan_tunnel t = {0};
		for (int k = 0; k < 6; k++) {
			t.outer_dst_mac[k] = (uint8_t)iod_rng_next(&rng);
			t.outer_src_mac[k] = (uint8_t)iod_rng_next(&rng);
		}
		t.outer_src_ip = (uint32_t)iod_rng_next(&rng);
		t.outer_dst_ip = (uint32_t)iod_rng_next(&rng);
		t.vni = (uint32_t)iod_rng_below(&rng, 1u << 24);
		t.src_port = iod_rng_below(&rng, 4) ? 0 : (uint16_t)iod_rng_next(&rng);
		t.dst_port = iod_rng_below(&rng, 2) ? 0 : (uint16_t)iod_rng_next(&rng);
		t.sport_min =
		    iod_rng_below(&rng, 2) ? 0 : (uint16_t)(1000 + iod_rng_below(&rng, 1000));
		t.sport_max = t.sport_min ? (uint16_t)(t.sport_min + iod_rng_below(&rng, 5000)) : 0;
		t.ttl = (uint8_t)iod_rng_next(&rng);
		t.tos = (uint8_t)iod_rng_next(&rng);
		t.udp_csum = iod_rng_below(&rng, 2);
		uint32_t len = 14 + (uint32_t)iod_rng_below(&rng, 1500),
		         hash = (uint32_t)iod_rng_next(&rng);
		uint16_t over = iod_rng_below(&rng, 3) ? 0 : (uint16_t)iod_rng_next(&rng);
		for (uint32_t k = 0; k < len; k++)
			a[64 + k] = b[64 + k] = (uint8_t)iod_rng_next(&rng);
		struct iod_net_vxlan_tmpl tp;
		iod_net_vxlan_tmpl_init(&tp, &t);
		uint8_t *fa = a + 64, *fb = b + 64;
		uint32_t la = len, lb = len;
		CHECK_EQ(iod_net_vxlan_encap(&fa, &la, 64, &t, hash, over), 0);
		CHECK_EQ(iod_net_vxlan_encap_tmpl(&fb, &lb, 64, &tp, hash, over), 0);
		CHECK_EQ(la, lb);
		CHECK(fa == a + 14 && fb == b + 14);
		CHECK(memcmp(a, b, 64 + len) == 0);
	}
	struct iod_net_vxlan_tunnel t = {0};
	struct iod_net_vxlan_tmpl tp;
	iod_net_vxlan_tmpl_init(&tp, &t);
	uint8_t *f = a + 64;
	uint32_t len = 100;
	CHECK_EQ(iod_net_vxlan_encap_tmpl(&f, &len, 49, &tp, 0, 0), -ENOSPC);
	len = 0xffff - 49;
	CHECK_EQ(iod_net_vxlan_encap_tmpl(&f, &len, 64, &tp, 0, 0), -EMSGSIZE);
}

/* The lean parse of common frames equals the general parser, on built
 * frames (plain and in VXLAN, TCP/UDP/ICMP, v4/v6, VLAN) and on every
 * truncation and single-byte corruption of them. */
TEST(lean_parse_matches_general_parser)
{
	struct iod_rng rng;
	iod_rng_seed(&rng, 5);
	static uint8_t buf[2048];
	int fast_shapes = 0;
	for (int i = 0; i < 400; i++) {
		struct iod_net_pkt_spec s = {0};
		memcpy(s.dst_mac, MAC_B, 6);
		memcpy(s.src_mac, MAC_A, 6);
		static const uint8_t protos[] = {IOD_NET_PROTO_TCP, IOD_NET_PROTO_UDP,
		                                 IOD_NET_PROTO_ICMP};
		s.t.proto = protos[iod_rng_below(&rng, 3)];
		s.t.family = iod_rng_below(&rng, 5) ? IOD_NET_AF_V4 : IOD_NET_AF_V6;
		s.t.src.v4 = (uint32_t)iod_rng_next(&rng);
		s.t.dst.v4 = (uint32_t)iod_rng_next(&rng);
		if (s.t.family == IOD_NET_AF_V6)
			s.t.proto = IOD_NET_PROTO_UDP;
		s.t.sport = (uint16_t)iod_rng_next(&rng);
		s.t.dport = (uint16_t)iod_rng_next(&rng);
		s.tcp_flags = (uint8_t)iod_rng_next(&rng);
		s.tos = (uint8_t)iod_rng_next(&rng);
		s.vlan_id = iod_rng_below(&rng, 6) ? 0 : 7;
		s.payload_bytes = (uint16_t)iod_rng_below(&rng, 100);
		uint8_t *f = buf + 64;
		int n = iod_net_pkt_build(&s, f, sizeof(buf) - 64);
		CHECK(n > 0);
		uint32_t len = (uint32_t)n;
		if (iod_rng_below(&rng, 2)) {
			struct iod_net_vxlan_tunnel t = {0};
			t.outer_src_ip = 1;
			t.outer_dst_ip = 2;
			t.vni = 9;
			t.udp_csum = iod_rng_below(&rng, 2);
			iod_net_vxlan_encap(&f, &len, 64, &t, 1, 0);
		}
		for (uint32_t cut = 0; cut <= len; cut++) {
			struct iod_net_meta a, b;
			uint8_t keep = 0;
			uint32_t at = cut < len ? cut : 0;
			bool corrupt = cut < len && iod_rng_below(&rng, 2);
			if (corrupt) { /* flip a byte instead of cutting */
				keep = f[at];
				f[at] ^= (uint8_t)(1u << iod_rng_below(&rng, 8));
			}
			uint32_t l = corrupt ? len : cut;
			int ra = iod_net_parse(f, l, 0, &a),
			    rb = iod_net_parse_general(f, l, 0, &b);
			CHECK_EQ(ra, rb);
			if (ra == 0) {
				CHECK(iod_net_meta_equal(&a, &b));
				struct iod_net_meta c;
				CHECK_EQ(iod_net_parse_nohash(f, l, 0, &c), 0);
				CHECK_U64(c.hash, 0);
				c.hash = a.hash;
				CHECK(iod_net_meta_equal(&a, &c));
				fast_shapes += (b.flags & (IOD_NET_F_TRUNC | IOD_NET_F_VLAN)) == 0;
			}
			if (corrupt)
				f[at] = keep;
		}
	}
	CHECK(fast_shapes > 1000);
}

TEST(vxlan_sport_spread_and_range)
{
	unsigned hits[16] = {0};
	for (uint32_t i = 0; i < 16000; i++) {
		uint16_t p =
		    iod_net_vxlan_sport(iod_net_tuple_hash(&(struct iod_net_tuple){
		                            .src.v4 = i, .sport = (uint16_t)i, .proto = 6}),
		                        50000, 50015);
		CHECK(p >= 50000 && p <= 50015);
		hits[p - 50000]++;
	}
	for (int i = 0; i < 16; i++)
		CHECK_MSG(hits[i] > 800 && hits[i] < 1200, "port %d got %u of 16000", i, hits[i]);
}

TEST(arp_responder)
{
	uint8_t req[64], rep[64];
	static const uint8_t zero[6] = {0};
	int n = iod_net_build_arp(req, sizeof(req), 1, MAC_A, 0x0a000005, zero, 0x0a000001);
	CHECK_EQ(n, 42);
	CHECK_EQ(iod_net_arp_reply(req, 42, 0x0a000009, MAC_B, rep, sizeof(rep)), 0);
	CHECK_EQ(iod_net_arp_reply(req, 42, 0x0a000001, MAC_B, rep, sizeof(rep)), 42);
	CHECK(memcmp(rep, MAC_A, 6) == 0);
	CHECK(memcmp(rep + 6, MAC_B, 6) == 0);
	const struct iod_net_arp *a = (const void *)(rep + 14);
	CHECK_EQ(iod_net_be16(&a->op_be), 2);
	CHECK_U64(iod_net_be32(a->spa), 0x0a000001);
	CHECK_U64(iod_net_be32(a->tpa), 0x0a000005);
	CHECK_EQ(iod_net_arp_reply(req, 42, 0x0a000001, MAC_B, rep, 10), -ENOSPC);
}

TEST(nat_rewrites_keep_checksums_valid)
{
	uint8_t f[128];
	for (int proto = 0; proto < 3; proto++) {
		uint8_t p = proto == 0   ? IOD_NET_PROTO_TCP
		            : proto == 1 ? IOD_NET_PROTO_UDP
		                         : IOD_NET_PROTO_ICMP;
		int n = build_v4(f, sizeof(f), p, 0x0a000001, 0x0a0000fe, 40000, 80, 17);
		struct iod_net_meta m;
		iod_net_parse(f, (uint32_t)n, 0, &m);
		CHECK_EQ(iod_net_nat_dst(f, &m, 0xac100007, 8080), 0);
		CHECK_EQ(iod_net_nat_src(f, &m, 0x0afe0001, 1025), 0);
		CHECK(iod_net_csums_ok(f, (uint32_t)n));
		struct iod_net_meta m2;
		iod_net_parse(f, (uint32_t)n, 0, &m2);
		CHECK(iod_net_tuple_equal(&m.key, &m2.key));
		CHECK_U64(m2.key.dst.v4, 0xac100007);
		if (p != IOD_NET_PROTO_ICMP)
			CHECK_EQ(m2.key.dport, 8080);
		/* ICMP checksum stays valid too. */
		if (p == IOD_NET_PROTO_ICMP)
			CHECK_EQ(iod_net_csum_fold(iod_net_csum_add(0, f + 34, (size_t)n - 34)), 0);
	}
	int n = build_v4(f, sizeof(f), IOD_NET_PROTO_UDP, 1, 2, 3, 4, 0);
	/* csum_fill recomputes what a partial-checksum frame lacks. */
	f[40] = f[41] = 0x12;
	f[24] ^= 0xff;
	CHECK(!iod_net_csums_ok(f, (uint32_t)n));
	CHECK_EQ(iod_net_csum_fill(f, (uint32_t)n), 0);
	CHECK(iod_net_csums_ok(f, (uint32_t)n));
	struct iod_net_meta m;
	iod_net_parse(f, (uint32_t)n, 0, &m);
	CHECK_EQ(iod_net_ttl_dec(f, &m), 0);
	CHECK_EQ(f[22], 63);
	CHECK(iod_net_csums_ok(f, (uint32_t)n));
}

TEST(address_text)
{
	uint32_t ip;
	uint8_t pl;
	char b[64];
	CHECK_EQ(iod_net_ipv4_parse("10.1.2.3", &ip), 0);
	CHECK_U64(ip, 0x0a010203);
	CHECK_EQ(iod_net_ipv4_parse("10.1.2", &ip), -EINVAL);
	CHECK_EQ(iod_net_ipv4_parse("10.1.2.256", &ip), -EINVAL);
	CHECK_EQ(iod_net_cidr_parse("10.1.2.3/16", &ip, &pl), 0);
	CHECK_U64(ip, 0x0a010000);
	CHECK_EQ(pl, 16);
	CHECK_EQ(iod_net_cidr_parse("10.1.2.3/33", &ip, &pl), -EINVAL);
	CHECK_EQ(iod_net_cidr_parse("0.0.0.0/0", &ip, &pl), 0);
	CHECK_EQ(pl, 0);
	iod_net_ipv4_format(0xc0a80101, b, sizeof(b));
	CHECK_STR(b, "192.168.1.1");
	uint8_t mac[6];
	CHECK_EQ(iod_net_mac_parse("02:00:00:00:00:0a", mac), 0);
	CHECK(memcmp(mac, MAC_A, 6) == 0);
	CHECK_EQ(iod_net_mac_parse("02:00:00:00:00", mac), -EINVAL);
	struct iod_net_tuple t = {.family = 4,
	                          .proto = 6,
	                          .src.v4 = 0x0a000001,
	                          .dst.v4 = 0x0a000002,
	                          .sport = 1,
	                          .dport = 2};
	iod_net_tuple_format(&t, b, sizeof(b));
	CHECK_STR(b, "tcp 10.0.0.1:1 -> 10.0.0.2:2 zone 0");
}

TEST(nd_responder)
{
	uint8_t gw[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	uint8_t host[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};
	uint8_t req[128] = {0}, rep[128];
	memcpy(req, (uint8_t[6]){0x33, 0x33, 0xff, 0, 0, 1}, 6);
	memcpy(req + 6, MAC_A, 6);
	iod_net_put16(req + 12, IOD_NET_ETH_P_IPV6);
	struct iod_net_ipv6 *ip = (void *)(req + 14);
	iod_net_put32(&ip->vtc_flow_be, 6u << 28);
	iod_net_put16(&ip->plen_be, 24);
	ip->next = IOD_NET_PROTO_ICMPV6;
	ip->hop_limit = 255;
	memcpy(ip->src, host, 16);
	memcpy(ip->dst, (uint8_t[16]){0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1}, 16);
	uint8_t *ns = req + 54;
	ns[0] = 135;
	memcpy(ns + 8, gw, 16);
	iod_net_put16(ns + 2, iod_net_l4_csum_v6(ip, IOD_NET_PROTO_ICMPV6, ns, 24));
	CHECK(iod_net_csums_ok(req, 78));
	CHECK_EQ(iod_net_nd_reply(req, 78, host, MAC_B, rep, sizeof(rep)), 0); /* not for us */
	CHECK_EQ(iod_net_nd_reply(req, 78, gw, MAC_B, rep, 10), -ENOSPC);
	CHECK_EQ(iod_net_nd_reply(req, 78, gw, MAC_B, rep, sizeof(rep)), 86);
	CHECK(memcmp(rep, MAC_A, 6) == 0);
	CHECK(memcmp(rep + 6, MAC_B, 6) == 0);
	CHECK_EQ(rep[54], 136);
	CHECK(memcmp(rep + 14 + 8, gw, 16) == 0);
	CHECK(memcmp(rep + 14 + 24, host, 16) == 0);
	CHECK(memcmp(rep + 54 + 26, MAC_B, 6) == 0);
	CHECK(iod_net_csums_ok(rep, 86));
	struct iod_net_meta m;
	CHECK_EQ(iod_net_parse(rep, 86, 0, &m), 0);
	CHECK_EQ(m.key.proto, IOD_NET_PROTO_ICMPV6);
}

/* Anti-spoofing of a replica port (spoof.c): a frame passes only with the
 * port's MAC and, for IPv4 and ARP, its address; a neighbour's address,
 * an ARP reply that claims one, a VLAN tag, a truncated header are refused
 * with their reason. */
TEST(spoof_check_binds_port_to_its_address_and_mac)
{
	struct iod_net_spoof_bind b = {.ip = 0x0ac80105};
	memcpy(b.mac, MAC_A, 6);
	uint8_t f[128];
	int n = build_v4(f, sizeof(f), IOD_NET_PROTO_TCP, 0x0ac80105, 0x0ac80209, 1000, 80, 4);
	CHECK(n > 0);
	CHECK_EQ(iod_net_spoof_check(&b, f, (uint32_t)n), IOD_NET_SPOOF_OK);
	/* a neighbour's source address from this port */
	n = build_v4(f, sizeof(f), IOD_NET_PROTO_TCP, 0x0ac80106, 0x0ac80209, 1000, 80, 4);
	CHECK_EQ(iod_net_spoof_check(&b, f, (uint32_t)n), IOD_NET_SPOOF_SRC_IP);
	CHECK(strcmp(iod_net_spoof_name(IOD_NET_SPOOF_SRC_IP), "source-ip") == 0);
	/* its own address behind another MAC */
	n = build_v4(f, sizeof(f), IOD_NET_PROTO_UDP, 0x0ac80105, 0x0ac80209, 1000, 53, 4);
	f[11] ^= 1;
	CHECK_EQ(iod_net_spoof_check(&b, f, (uint32_t)n), IOD_NET_SPOOF_SRC_MAC);
	f[11] ^= 1;
	CHECK_EQ(iod_net_spoof_check(&b, f, (uint32_t)n), IOD_NET_SPOOF_OK);
	/* truncated: too short for Ethernet, or for the IPv4 header */
	CHECK_EQ(iod_net_spoof_check(&b, f, 13), IOD_NET_SPOOF_SHORT);
	CHECK_EQ(iod_net_spoof_check(&b, f, 14 + 19), IOD_NET_SPOOF_SHORT);
	CHECK_EQ(iod_net_spoof_check(&b, NULL, 0), IOD_NET_SPOOF_SHORT);
	/* a VLAN tag in front of a neighbour's address: refused as tagged */
	uint8_t t[132];
	memcpy(t, f, 12);
	iod_net_put16(t + 12, IOD_NET_ETH_P_VLAN);
	iod_net_put16(t + 14, 7);
	memcpy(t + 16, f + 12, (size_t)n - 12);
	CHECK_EQ(iod_net_spoof_check(&b, t, (uint32_t)n + 4), IOD_NET_SPOOF_TAGGED);
	iod_net_put16(t + 12, IOD_NET_ETH_P_QINQ);
	CHECK_EQ(iod_net_spoof_check(&b, t, (uint32_t)n + 4), IOD_NET_SPOOF_TAGGED);
	/* ARP: its own request passes, a probe (sender 0.0.0.0) too; a reply
	 * that claims a neighbour's address, or another sender MAC, does not */
	uint8_t a[64];
	static const uint8_t zero[6] = {0};
	n = iod_net_build_arp(a, sizeof(a), 1, MAC_A, 0x0ac80105, zero, 0x0ac80101);
	CHECK(n > 0);
	CHECK_EQ(iod_net_spoof_check(&b, a, (uint32_t)n), IOD_NET_SPOOF_OK);
	n = iod_net_build_arp(a, sizeof(a), 1, MAC_A, 0, zero, 0x0ac80105);
	CHECK_EQ(iod_net_spoof_check(&b, a, (uint32_t)n), IOD_NET_SPOOF_OK);
	n = iod_net_build_arp(a, sizeof(a), 2, MAC_A, 0, MAC_B, 0x0ac80106);
	CHECK_EQ(iod_net_spoof_check(&b, a, (uint32_t)n), IOD_NET_SPOOF_ARP);
	n = iod_net_build_arp(a, sizeof(a), 2, MAC_A, 0x0ac80106, MAC_B, 0x0ac80101);
	CHECK_EQ(iod_net_spoof_check(&b, a, (uint32_t)n), IOD_NET_SPOOF_ARP);
	CHECK(strcmp(iod_net_spoof_name(IOD_NET_SPOOF_ARP), "arp-sender") == 0);
	n = iod_net_build_arp(a, sizeof(a), 2, MAC_A, 0x0ac80105, MAC_B, 0x0ac80101);
	CHECK_EQ(iod_net_spoof_check(&b, a, (uint32_t)n), IOD_NET_SPOOF_OK);
	memcpy(a + 14 + 8, MAC_B, 6); /* the sender MAC inside: another's */
	CHECK_EQ(iod_net_spoof_check(&b, a, (uint32_t)n), IOD_NET_SPOOF_ARP);
	CHECK_EQ(iod_net_spoof_check(&b, a, 14 + 27), IOD_NET_SPOOF_SHORT);
	/* IPv6: by MAC only (the pipeline has no entry for it) */
	uint8_t v6[64] = {0};
	memcpy(v6 + 6, MAC_A, 6);
	iod_net_put16(v6 + 12, IOD_NET_ETH_P_IPV6);
	CHECK_EQ(iod_net_spoof_check(&b, v6, sizeof(v6)), IOD_NET_SPOOF_OK);
	CHECK(strcmp(iod_net_spoof_name(IOD_NET_SPOOF_N), "?") == 0);
}
