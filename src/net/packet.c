/*
 * packet.c: wire formats of iod's data plane: the parse-once parser,
 * checksums (full and RFC 1624 incremental), frame builders, VXLAN encap and
 * decap, the ARP responder and NAT rewrites.
 *
 * Everything here is pure and allocation-free: it reads and writes caller
 * buffers only. The parser must never read past the length it is given
 * (tests/fuzz/fuzz_packet.c holds it to that); builders never write past
 * their capacity.
 */
#include "iod/net_debug.h"
#include "iod/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- checksums --------------------------------------------------------- */

uint32_t iod_net_csum_add(uint32_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t s = sum;
	while (len >= 2) {
		s += (uint32_t)(p[0] << 8 | p[1]);
		p += 2;
		len -= 2;
	}
	if (len)
		s += (uint32_t)p[0] << 8;
	while (s >> 32)
		s = (s & 0xffffffffu) + (s >> 32);
	return (uint32_t)s;
}

uint16_t iod_net_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint16_t iod_net_ipv4_csum(const struct iod_net_ipv4 *ip)
{
	unsigned hl = (ip->ver_ihl & 0x0f) * 4u;
	uint32_t s = iod_net_csum_add(0, ip, 10);
	s = iod_net_csum_add(s, (const uint8_t *)ip + 12, hl - 12);
	return iod_net_csum_fold(s);
}

uint16_t iod_net_l4_csum_v4(const struct iod_net_ipv4 *ip, const void *l4, uint16_t l4_len)
{
	uint8_t ph[12];
	memcpy(ph, &ip->src_be, 4);
	memcpy(ph + 4, &ip->dst_be, 4);
	ph[8] = 0;
	ph[9] = ip->proto;
	iod_net_put16(ph + 10, l4_len);
	return iod_net_csum_fold(iod_net_csum_add(iod_net_csum_add(0, ph, 12), l4, l4_len));
}

uint16_t iod_net_l4_csum_v6(const struct iod_net_ipv6 *ip, uint8_t proto, const void *l4,
                            uint32_t l4_len)
{
	uint8_t ph[40];
	memcpy(ph, ip->src, 16);
	memcpy(ph + 16, ip->dst, 16);
	iod_net_put32(ph + 32, l4_len);
	ph[36] = ph[37] = ph[38] = 0;
	ph[39] = proto;
	return iod_net_csum_fold(iod_net_csum_add(iod_net_csum_add(0, ph, 40), l4, l4_len));
}

uint16_t iod_net_csum_update16(uint16_t csum, uint16_t old_v, uint16_t new_v)
{
	/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') */
	uint32_t s = (uint32_t)(uint16_t)~csum + (uint16_t)~old_v + new_v;
	/* At most 3 * 0xffff: two folds always finish (no loop to predict). */
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

uint16_t iod_net_csum_update32(uint16_t csum, uint32_t old_v, uint32_t new_v)
{
	csum = iod_net_csum_update16(csum, (uint16_t)(old_v >> 16), (uint16_t)(new_v >> 16));
	return iod_net_csum_update16(csum, (uint16_t)old_v, (uint16_t)new_v);
}

/* ---- parser ------------------------------------------------------------ */

/* What parsing from one Ethernet header learns. */
struct l2_parse {
	uint16_t l3_ofs;        /* L3 offset, 0 = none */
	uint16_t l4_ofs;        /* L4 offset, 0 = none */
	uint16_t l4_end;        /* end of the L3 datagram (IP length bound) */
	uint16_t ethertype;     /* after VLAN tags */
	uint16_t vlan_tci;      /* first tag */
	uint16_t flags;         /* IOD_NET_F_* relative: VLAN, L3, L4, FRAG, ARP, TRUNC, L4_OPTS */
	uint8_t tcp_flags;      /* TCP flags */
	uint8_t tos;            /* IPv4 TOS / IPv6 traffic class */
	struct iod_net_tuple t; /* the tuple */
};

static bool is_v6_ext(uint8_t nh)
{
	return nh == 0 || nh == 43 || nh == 60 || nh == 44;
}

static void parse_l4(const uint8_t *f, uint32_t end, uint32_t ofs, struct l2_parse *r)
{
	uint8_t proto = r->t.proto;
	uint32_t room = end > ofs ? end - ofs : 0;

	if (proto == IOD_NET_PROTO_TCP) {
		if (room < 20 || (f[ofs + 12] >> 4) < 5 ||
		    (uint32_t)(f[ofs + 12] >> 4) * 4 > room) {
			r->flags |= IOD_NET_F_TRUNC;
			return;
		}
		r->t.sport = iod_net_be16(f + ofs);
		r->t.dport = iod_net_be16(f + ofs + 2);
		r->tcp_flags = f[ofs + 13];
	} else if (proto == IOD_NET_PROTO_UDP) {
		if (room < 8) {
			r->flags |= IOD_NET_F_TRUNC;
			return;
		}
		r->t.sport = iod_net_be16(f + ofs);
		r->t.dport = iod_net_be16(f + ofs + 2);
	} else if (proto == IOD_NET_PROTO_ICMP || proto == IOD_NET_PROTO_ICMPV6) {
		if (room < 8) {
			r->flags |= IOD_NET_F_TRUNC;
			return;
		}
		uint8_t type = f[ofs];
		bool echo = proto == IOD_NET_PROTO_ICMP ? (type == 8 || type == 0)
		                                        : (type == 128 || type == 129);
		if (echo) {
			/* Request and reply share the tuple (ports = echo id) reversed. */
			r->t.sport = r->t.dport = iod_net_be16(f + ofs + 4);
		} else {
			r->t.sport = 0;
			r->t.dport = (uint16_t)(type << 8 | f[ofs + 1]);
		}
	} else {
		return;
	}
	r->l4_ofs = (uint16_t)ofs;
	r->flags |= IOD_NET_F_L4;
}

static void parse_l2(const uint8_t *f, uint32_t len, uint32_t ofs, struct l2_parse *r)
{
	memset(r, 0, sizeof(*r));
	if (len < ofs + 14) {
		r->flags |= IOD_NET_F_TRUNC;
		return;
	}
	uint16_t type = iod_net_be16(f + ofs + 12);
	ofs += 14;
	for (int tags = 0; (type == IOD_NET_ETH_P_VLAN || type == IOD_NET_ETH_P_QINQ) && tags < 2;
	     tags++) {
		if (len < ofs + 4) {
			r->flags |= IOD_NET_F_TRUNC;
			return;
		}
		if (!tags)
			r->vlan_tci = iod_net_be16(f + ofs);
		r->flags |= IOD_NET_F_VLAN;
		type = iod_net_be16(f + ofs + 2);
		ofs += 4;
	}
	r->ethertype = type;
	if (type == IOD_NET_ETH_P_ARP) {
		r->flags |= IOD_NET_F_ARP;
		if (len < ofs + sizeof(struct iod_net_arp)) {
			r->flags |= IOD_NET_F_TRUNC;
			return;
		}
		/* Sender and target protocol addresses, so pipes can match ARP
		 * for a gateway address; the opcode goes in dport. */
		r->t.src.v4 = iod_net_be32(f + ofs + 14);
		r->t.dst.v4 = iod_net_be32(f + ofs + 24);
		r->t.dport = iod_net_be16(f + ofs + 6);
		return;
	}
	if (type == IOD_NET_ETH_P_IPV4) {
		if (len < ofs + 20 || (f[ofs] >> 4) != 4 || (f[ofs] & 0x0f) < 5) {
			r->flags |= IOD_NET_F_TRUNC;
			return;
		}
		uint32_t hl = (f[ofs] & 0x0fu) * 4u, tot = iod_net_be16(f + ofs + 2);
		if (tot < hl || len < ofs + hl) {
			r->flags |= IOD_NET_F_TRUNC;
			return;
		}
		if (len < ofs + tot) {
			r->flags |= IOD_NET_F_TRUNC;
			tot = len - ofs;
		}
		uint16_t frag = iod_net_be16(f + ofs + 6);
		r->l3_ofs = (uint16_t)ofs;
		r->flags |= IOD_NET_F_L3;
		r->tos = f[ofs + 1];
		r->t.family = IOD_NET_AF_V4;
		r->t.proto = f[ofs + 9];
		r->t.src.v4 = iod_net_be32(f + ofs + 12);
		r->t.dst.v4 = iod_net_be32(f + ofs + 16);
		r->l4_end = (uint16_t)(ofs + tot);
		if (hl > 20)
			r->flags |= IOD_NET_F_L4_OPTS;
		if (frag & 0x3fff) {
			r->flags |= IOD_NET_F_FRAG;
			if (frag & 0x1fff)
				return; /* not the first fragment: no L4 header */
		}
		parse_l4(f, ofs + tot, ofs + hl, r);
		return;
	}
	if (type == IOD_NET_ETH_P_IPV6) {
		if (len < ofs + 40 || (f[ofs] >> 4) != 6) {
			r->flags |= IOD_NET_F_TRUNC;
			return;
		}
		uint32_t end = ofs + 40 + iod_net_be16(f + ofs + 4);
		if (end > len) {
			r->flags |= IOD_NET_F_TRUNC;
			end = len;
		}
		r->l3_ofs = (uint16_t)ofs;
		r->flags |= IOD_NET_F_L3;
		r->tos = (uint8_t)(iod_net_be16(f + ofs) >> 4);
		r->t.family = IOD_NET_AF_V6;
		memcpy(r->t.src.v6, f + ofs + 8, 16);
		memcpy(r->t.dst.v6, f + ofs + 24, 16);
		r->l4_end = (uint16_t)end;
		uint8_t nh = f[ofs + 6];
		uint32_t p = ofs + 40;
		for (int i = 0; i < 4 && is_v6_ext(nh); i++) {
			if (end < p + 8) {
				r->flags |= IOD_NET_F_TRUNC;
				return;
			}
			r->flags |= IOD_NET_F_L4_OPTS;
			uint32_t hl = nh == 44 ? 8 : (f[p + 1] + 1u) * 8u;
			if (nh == 44) {
				r->flags |= IOD_NET_F_FRAG;
				if (iod_net_be16(f + p + 2) & 0xfff8) {
					r->t.proto = f[p];
					return;
				}
			}
			nh = f[p];
			p += hl;
		}
		r->t.proto = nh;
		if (is_v6_ext(nh) || p > end) {
			r->flags |= IOD_NET_F_TRUNC;
			return;
		}
		parse_l4(f, end, p, r);
	}
}

/* An IPv4 tuple written whole (every byte of the union and the zone). */
static inline void tuple_v4(struct iod_net_tuple *t, uint8_t proto, uint32_t src, uint32_t dst,
                            uint16_t sport, uint16_t dport)
{
	t->src.w[0] = t->src.w[1] = t->dst.w[0] = t->dst.w[1] = 0;
	t->src.v4 = src;
	t->dst.v4 = dst;
	t->sport = sport;
	t->dport = dport;
	t->proto = proto;
	t->family = IOD_NET_AF_V4;
	t->zone = 0;
}

/* IPv4 without options, not a fragment, whole in [ofs, end), carrying TCP or
 * UDP whose header fits: the L4 offset and the IP datagram's end; 0 when
 * the header is anything else (the general parser takes it). */
static inline uint32_t fast_ipv4(const uint8_t *f, uint32_t ofs, uint32_t end, uint32_t *l4_end)
{
	if (end < ofs + 20 || f[ofs] != 0x45)
		return 0;
	uint32_t tot = iod_net_be16(f + ofs + 2);
	if (tot < 20 || end < ofs + tot || (iod_net_be16(f + ofs + 6) & 0x3fff))
		return 0;
	uint8_t proto = f[ofs + 9];
	uint32_t room = tot - 20, l4 = ofs + 20;
	if (proto == IOD_NET_PROTO_UDP) {
		if (room < 8)
			return 0;
	} else if (proto == IOD_NET_PROTO_TCP) {
		if (room < 20) /* before reading the data offset inside it */
			return 0;
		uint32_t doff = f[l4 + 12] >> 4;
		if (doff < 5 || doff * 4 > room)
			return 0;
	} else {
		return 0;
	}
	*l4_end = ofs + tot;
	return l4;
}

/*
 * The common shapes in one pass, every metadata field written once (no
 * zeroing first): Ethernet / IPv4 (no options, not fragmented) / TCP|UDP,
 * and the same inside VXLAN. Gives exactly what the general parser gives
 * (tests/fuzz compare them); false = not such a frame.
 */
static inline __attribute__((always_inline)) bool
parse_fast(const uint8_t *f, uint32_t len, uint16_t vxlan_port, struct iod_net_meta *m, bool hash)
{
	uint32_t end, in_end, l4, il4;
	if (len < 14 || iod_net_be16(f + 12) != IOD_NET_ETH_P_IPV4 ||
	    !(l4 = fast_ipv4(f, 14, len, &end)))
		return false;
	uint8_t proto = f[23];
	uint16_t sport = iod_net_be16(f + l4), dport = iod_net_be16(f + l4 + 2);
	m->len = (uint16_t)len;
	m->l3_ofs = 14;
	m->l4_ofs = (uint16_t)l4;
	m->ethertype = IOD_NET_ETH_P_IPV4;
	m->vlan_tci = 0;
	tuple_v4(&m->outer, proto, iod_net_be32(f + 26), iod_net_be32(f + 30), sport, dport);
	if (proto == IOD_NET_PROTO_UDP && dport == vxlan_port && end >= l4 + 16 &&
	    (f[l4 + 8] & 0x08)) {
		uint32_t in = l4 + 16;
		if (end < in + 14 || iod_net_be16(f + in + 12) != IOD_NET_ETH_P_IPV4 ||
		    !(il4 = fast_ipv4(f, in + 14, end, &in_end)))
			return false;
		uint32_t ip = in + 14;
		uint8_t ip_proto = f[ip + 9];
		m->flags = IOD_NET_F_L3 | IOD_NET_F_L4 | IOD_NET_F_VXLAN | IOD_NET_F_IN_L3 |
		           IOD_NET_F_IN_L4;
		m->vni = iod_net_be32(f + l4 + 12) >> 8;
		m->tun_ofs = (uint16_t)(l4 + 8);
		m->in_l2_ofs = (uint16_t)in;
		m->in_l3_ofs = (uint16_t)ip;
		m->in_l4_ofs = (uint16_t)il4;
		m->in_ethertype = IOD_NET_ETH_P_IPV4;
		m->tcp_flags = ip_proto == IOD_NET_PROTO_TCP ? f[il4 + 13] : 0;
		m->ip_tos = f[ip + 1];
		tuple_v4(&m->key, ip_proto, iod_net_be32(f + ip + 12), iod_net_be32(f + ip + 16),
		         iod_net_be16(f + il4), iod_net_be16(f + il4 + 2));
	} else {
		if (proto == IOD_NET_PROTO_UDP && dport == vxlan_port && end < l4 + 16)
			return false; /* a cut VXLAN header: the general parser flags it */
		m->flags = IOD_NET_F_L3 | IOD_NET_F_L4;
		m->vni = 0;
		m->tun_ofs = m->in_l2_ofs = m->in_l3_ofs = m->in_l4_ofs = 0;
		m->in_ethertype = 0;
		m->tcp_flags = proto == IOD_NET_PROTO_TCP ? f[l4 + 13] : 0;
		m->ip_tos = f[15];
		m->key = m->outer;
	}
	m->hash = hash ? iod_net_tuple_hash(&m->key) : 0;
	return true;
}

int iod_net_parse(const uint8_t *frame, uint32_t len, uint16_t vxlan_port, struct iod_net_meta *m)
{
	if (len <= 0xffff &&
	    parse_fast(frame, len, vxlan_port ? vxlan_port : IOD_NET_VXLAN_PORT, m, true))
		return 0;
	return iod_net_parse_general(frame, len, vxlan_port, m);
}

int iod_net_parse_nohash(const uint8_t *frame, uint32_t len, uint16_t vxlan_port,
                         struct iod_net_meta *m)
{
	if (len <= 0xffff &&
	    parse_fast(frame, len, vxlan_port ? vxlan_port : IOD_NET_VXLAN_PORT, m, false))
		return 0;
	int rc = iod_net_parse_general(frame, len, vxlan_port, m);
	m->hash = 0;
	return rc;
}

int iod_net_parse_general(const uint8_t *frame, uint32_t len, uint16_t vxlan_port,
                          struct iod_net_meta *m)
{
	struct l2_parse o, in;

	memset(m, 0, sizeof(*m));
	if (len < 14)
		return -EINVAL;
	if (len > 0xffff)
		len = 0xffff;
	if (!vxlan_port)
		vxlan_port = IOD_NET_VXLAN_PORT;
	parse_l2(frame, len, 0, &o);
	m->len = (uint16_t)len;
	m->flags = o.flags;
	m->l3_ofs = o.l3_ofs;
	m->l4_ofs = o.l4_ofs;
	m->ethertype = o.ethertype;
	m->vlan_tci = o.vlan_tci;
	m->tcp_flags = o.tcp_flags;
	m->ip_tos = o.tos;
	m->outer = o.t;
	m->key = o.t;
	if ((o.flags & IOD_NET_F_L4) && o.t.proto == IOD_NET_PROTO_UDP && o.t.dport == vxlan_port) {
		uint32_t v = o.l4_ofs + 8u;
		if (o.l4_end >= v + 8 && (frame[v] & 0x08)) {
			m->flags |= IOD_NET_F_VXLAN;
			m->tun_ofs = (uint16_t)v;
			m->vni = iod_net_be32(frame + v + 4) >> 8;
			m->in_l2_ofs = (uint16_t)(v + 8);
			parse_l2(frame, o.l4_end, v + 8, &in);
			if (in.flags & IOD_NET_F_VLAN)
				m->flags |= IOD_NET_F_IN_VLAN;
			if (in.flags & IOD_NET_F_L3)
				m->flags |= IOD_NET_F_IN_L3;
			if (in.flags & IOD_NET_F_L4)
				m->flags |= IOD_NET_F_IN_L4;
			m->flags |=
			    in.flags & (IOD_NET_F_TRUNC | IOD_NET_F_ARP | IOD_NET_F_L4_OPTS);
			/* The key's fragment state is the inner packet's. */
			m->flags =
			    (uint16_t)((m->flags & ~IOD_NET_F_FRAG) | (in.flags & IOD_NET_F_FRAG));
			m->in_l3_ofs = in.l3_ofs;
			m->in_l4_ofs = in.l4_ofs;
			m->in_ethertype = in.ethertype;
			m->tcp_flags = in.tcp_flags;
			m->ip_tos = in.tos;
			m->key = in.t;
		} else if (o.l4_end < v + 8) {
			m->flags |= IOD_NET_F_TRUNC;
		}
	}
	m->hash = iod_net_tuple_hash(&m->key);
	return 0;
}

bool iod_net_meta_equal(const struct iod_net_meta *a, const struct iod_net_meta *b)
{
	return a->hash == b->hash && a->vni == b->vni && a->flags == b->flags && a->len == b->len &&
	       a->l3_ofs == b->l3_ofs && a->l4_ofs == b->l4_ofs && a->tun_ofs == b->tun_ofs &&
	       a->in_l2_ofs == b->in_l2_ofs && a->in_l3_ofs == b->in_l3_ofs &&
	       a->in_l4_ofs == b->in_l4_ofs && a->ethertype == b->ethertype &&
	       a->in_ethertype == b->in_ethertype && a->vlan_tci == b->vlan_tci &&
	       a->tcp_flags == b->tcp_flags && a->ip_tos == b->ip_tos &&
	       !memcmp(&a->key, &b->key, sizeof(a->key)) &&
	       !memcmp(&a->outer, &b->outer, sizeof(a->outer));
}

/* ---- tuples ------------------------------------------------------------ */

uint32_t iod_net_tuple_hash(const struct iod_net_tuple *t)
{
	uint64_t x = t->src.w[0] * 0x9e3779b97f4a7c15ull;
	x ^= t->src.w[1] + 0x632be59bd9b4e019ull + (x << 6) + (x >> 2);
	x ^= t->dst.w[0] * 0xc2b2ae3d27d4eb4full;
	x ^= t->dst.w[1] + (x << 6) + (x >> 2);
	x ^= (uint64_t)t->sport << 48 | (uint64_t)t->dport << 32 | (uint64_t)t->proto << 24 |
	     (uint64_t)t->family << 16 | t->zone;
	return (uint32_t)(iod_hash_u64(x) >> 32);
}

void iod_net_tuple_reverse(const struct iod_net_tuple *t, struct iod_net_tuple *out)
{
	struct iod_net_tuple r = *t;
	r.src = t->dst;
	r.dst = t->src;
	r.sport = t->dport;
	r.dport = t->sport;
	*out = r;
}

bool iod_net_tuple_equal(const struct iod_net_tuple *a, const struct iod_net_tuple *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

static const char *proto_name(uint8_t p)
{
	switch (p) {
	case IOD_NET_PROTO_TCP: return "tcp";
	case IOD_NET_PROTO_UDP: return "udp";
	case IOD_NET_PROTO_ICMP: return "icmp";
	case IOD_NET_PROTO_ICMPV6: return "icmpv6";
	default: return "ip";
	}
}

static void addr_format(const union iod_net_addr *a, uint8_t family, char *buf, size_t len)
{
	if (family == IOD_NET_AF_V4) {
		iod_net_ipv4_format(a->v4, buf, len);
		return;
	}
	size_t o = 0;
	for (int i = 0; i < 16 && o + 5 < len; i += 2)
		o += (size_t)snprintf(buf + o, len - o, "%s%x", i ? ":" : "",
		                      iod_net_be16(a->v6 + i));
}

void iod_net_tuple_format(const struct iod_net_tuple *t, char *buf, size_t len)
{
	char s[48], d[48];
	addr_format(&t->src, t->family, s, sizeof(s));
	addr_format(&t->dst, t->family, d, sizeof(d));
	if (t->family == IOD_NET_AF_V6)
		snprintf(buf, len, "%s [%s]:%u -> [%s]:%u zone %u", proto_name(t->proto), s,
		         t->sport, d, t->dport, t->zone);
	else
		snprintf(buf, len, "%s %s:%u -> %s:%u zone %u", proto_name(t->proto), s, t->sport,
		         d, t->dport, t->zone);
}

int iod_net_ipv4_parse(const char *s, uint32_t *ip)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned n = 0, digits = 0;
		while (*s >= '0' && *s <= '9' && digits < 4) {
			n = n * 10 + (unsigned)(*s++ - '0');
			digits++;
		}
		if (!digits || n > 255)
			return -EINVAL;
		v = v << 8 | n;
		if (i < 3 && *s++ != '.')
			return -EINVAL;
	}
	if (*s)
		return -EINVAL;
	*ip = v;
	return 0;
}

int iod_net_cidr_parse(const char *s, uint32_t *ip, uint8_t *prefix_len)
{
	char buf[32];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned pl = 32;

	if (n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = 0;
	if (iod_net_ipv4_parse(buf, ip))
		return -EINVAL;
	if (slash) {
		char *end;
		unsigned long v = strtoul(slash + 1, &end, 10);
		if (end == slash + 1 || *end || v > 32)
			return -EINVAL;
		pl = (unsigned)v;
	}
	*prefix_len = (uint8_t)pl;
	if (pl < 32)
		*ip &= pl ? ~0u << (32 - pl) : 0;
	return 0;
}

void iod_net_ipv4_format(uint32_t ip, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

int iod_net_mac_parse(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char tail;
	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
	           &tail) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	return 0;
}

void iod_net_mac_format(const uint8_t mac[6], char *buf, size_t len)
{
	snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4],
	         mac[5]);
}

/* ---- builders ---------------------------------------------------------- */

static void put_ipv4(uint8_t *p, uint8_t tos, uint16_t tot, uint8_t ttl, uint8_t proto,
                     uint32_t src, uint32_t dst)
{
	struct iod_net_ipv4 *ip = (struct iod_net_ipv4 *)p;
	ip->ver_ihl = 0x45;
	ip->tos = tos;
	iod_net_put16(&ip->len_be, tot);
	ip->id_be = 0;
	iod_net_put16(&ip->frag_be, 0x4000); /* DF */
	ip->ttl = ttl;
	ip->proto = proto;
	iod_net_put32(&ip->src_be, src);
	iod_net_put32(&ip->dst_be, dst);
	/* The header's 16-bit words summed from the values just written (id 0,
	 * no options): the same checksum as iod_net_ipv4_csum without reading
	 * the header back byte by byte (it ran on every VXLAN encap). At most
	 * nine words: two folds are enough. */
	uint32_t s = (uint32_t)(0x45u << 8 | tos) + tot + 0x4000u + (uint32_t)(ttl << 8 | proto) +
	             (src >> 16) + (src & 0xffffu) + (dst >> 16) + (dst & 0xffffu);
	s = (s & 0xffffu) + (s >> 16);
	s = (s & 0xffffu) + (s >> 16);
	iod_net_put16(&ip->csum_be, (uint16_t)~s);
}

int iod_net_pkt_build(const struct iod_net_pkt_spec *s, uint8_t *out, uint32_t cap)
{
	const struct iod_net_tuple *t = &s->t;
	uint32_t l2 = s->vlan_id ? 18 : 14, l3, l4, pay = s->payload_bytes, tot;

	if (t->family == IOD_NET_AF_V4)
		l3 = 20;
	else if (t->family == IOD_NET_AF_V6)
		l3 = 40;
	else
		return -EINVAL;
	switch (t->proto) {
	case IOD_NET_PROTO_TCP: l4 = 20; break;
	case IOD_NET_PROTO_UDP: l4 = 8; break;
	case IOD_NET_PROTO_ICMP:
	case IOD_NET_PROTO_ICMPV6: l4 = 8; break;
	default: return -EINVAL;
	}
	if (s->frame_bytes > l2 + l3 + l4 + pay)
		pay = s->frame_bytes - l2 - l3 - l4;
	tot = l2 + l3 + l4 + pay;
	if (tot > cap)
		return -ENOSPC;
	if (tot > 0xffff)
		return -EINVAL;
	memcpy(out, s->dst_mac, 6);
	memcpy(out + 6, s->src_mac, 6);
	if (s->vlan_id) {
		iod_net_put16(out + 12, IOD_NET_ETH_P_VLAN);
		iod_net_put16(out + 14, s->vlan_id & 0x0fff);
	}
	iod_net_put16(out + l2 - 2,
	              t->family == IOD_NET_AF_V4 ? IOD_NET_ETH_P_IPV4 : IOD_NET_ETH_P_IPV6);
	uint8_t *l4p = out + l2 + l3, *pp = l4p + l4;
	for (uint32_t i = 0; i < pay; i++)
		pp[i] = s->payload && i < s->payload_bytes ? s->payload[i] : (uint8_t)(i * 7 + 1);
	memset(l4p, 0, l4);
	if (t->proto == IOD_NET_PROTO_TCP) {
		iod_net_put16(l4p, t->sport);
		iod_net_put16(l4p + 2, t->dport);
		iod_net_put32(l4p + 4, s->tcp_seq);
		iod_net_put32(l4p + 8, s->tcp_ack);
		l4p[12] = 5 << 4;
		l4p[13] = s->tcp_flags ? s->tcp_flags : IOD_NET_TCP_SYN;
		iod_net_put16(l4p + 14, 65535);
	} else if (t->proto == IOD_NET_PROTO_UDP) {
		iod_net_put16(l4p, t->sport);
		iod_net_put16(l4p + 2, t->dport);
		iod_net_put16(l4p + 4, (uint16_t)(l4 + pay));
	} else {
		l4p[0] = t->proto == IOD_NET_PROTO_ICMP ? 8 : 128; /* echo request */
		iod_net_put16(l4p + 4, t->sport);
	}
	uint8_t ttl = s->ttl ? s->ttl : 64;
	if (t->family == IOD_NET_AF_V4) {
		put_ipv4(out + l2, s->tos, (uint16_t)(l3 + l4 + pay), ttl, t->proto, t->src.v4,
		         t->dst.v4);
		const struct iod_net_ipv4 *ip = (const void *)(out + l2);
		uint16_t c = t->proto == IOD_NET_PROTO_ICMP
		                 ? iod_net_csum_fold(iod_net_csum_add(0, l4p, l4 + pay))
		                 : iod_net_l4_csum_v4(ip, l4p, (uint16_t)(l4 + pay));
		if (t->proto == IOD_NET_PROTO_UDP && c == 0)
			c = 0xffff;
		iod_net_put16(l4p + (t->proto == IOD_NET_PROTO_TCP   ? 16
		                     : t->proto == IOD_NET_PROTO_UDP ? 6
		                                                     : 2),
		              c);
	} else {
		struct iod_net_ipv6 *ip = (void *)(out + l2);
		iod_net_put32(&ip->vtc_flow_be, 6u << 28 | (uint32_t)s->tos << 20);
		iod_net_put16(&ip->plen_be, (uint16_t)(l4 + pay));
		ip->next = t->proto;
		ip->hop_limit = ttl;
		memcpy(ip->src, t->src.v6, 16);
		memcpy(ip->dst, t->dst.v6, 16);
		uint16_t c = iod_net_l4_csum_v6(ip, t->proto, l4p, l4 + pay);
		if (t->proto == IOD_NET_PROTO_UDP && c == 0)
			c = 0xffff;
		iod_net_put16(l4p + (t->proto == IOD_NET_PROTO_TCP   ? 16
		                     : t->proto == IOD_NET_PROTO_UDP ? 6
		                                                     : 2),
		              c);
	}
	return (int)tot;
}

int iod_net_build_arp(uint8_t *out, uint32_t cap, uint16_t op, const uint8_t sha[6], uint32_t spa,
                      const uint8_t tha[6], uint32_t tpa)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	if (cap < 42)
		return -ENOSPC;
	memcpy(out, op == 1 ? bcast : tha, 6);
	memcpy(out + 6, sha, 6);
	iod_net_put16(out + 12, IOD_NET_ETH_P_ARP);
	struct iod_net_arp *a = (void *)(out + 14);
	iod_net_put16(&a->htype_be, 1);
	iod_net_put16(&a->ptype_be, IOD_NET_ETH_P_IPV4);
	a->hlen = 6;
	a->plen = 4;
	iod_net_put16(&a->op_be, op);
	memcpy(a->sha, sha, 6);
	iod_net_put32(a->spa, spa);
	memcpy(a->tha, tha, 6);
	iod_net_put32(a->tpa, tpa);
	return 42;
}

int iod_net_arp_reply(const uint8_t *req, uint32_t len, uint32_t gw_ip, const uint8_t gw_mac[6],
                      uint8_t *out, uint32_t cap)
{
	if (len < 42 || iod_net_be16(req + 12) != IOD_NET_ETH_P_ARP)
		return 0;
	const struct iod_net_arp *a = (const void *)(req + 14);
	if (iod_net_be16(&a->htype_be) != 1 || iod_net_be16(&a->ptype_be) != IOD_NET_ETH_P_IPV4 ||
	    a->hlen != 6 || a->plen != 4 || iod_net_be16(&a->op_be) != 1 ||
	    iod_net_be32(a->tpa) != gw_ip)
		return 0;
	uint8_t sha[6];
	memcpy(sha, a->sha, 6);
	return iod_net_build_arp(out, cap, 2, gw_mac, gw_ip, sha, iod_net_be32(a->spa));
}

int iod_net_nd_reply(const uint8_t *req, uint32_t len, const uint8_t gw_ip6[16],
                     const uint8_t gw_mac[6], uint8_t *out, uint32_t cap)
{
	/* Ethernet 14 + IPv6 40 + NS 24 (type, code, csum, reserved, target). */
	if (len < 78 || iod_net_be16(req + 12) != IOD_NET_ETH_P_IPV6)
		return 0;
	const uint8_t *ip = req + 14, *ns = ip + 40;
	if ((ip[0] >> 4) != 6 || ip[6] != IOD_NET_PROTO_ICMPV6 || ip[7] != 255 || ns[0] != 135 ||
	    ns[1] != 0 || memcmp(ns + 8, gw_ip6, 16))
		return 0;
	if (iod_net_be16(ip + 4) < 24 || 54u + iod_net_be16(ip + 4) > len)
		return 0;
	if (cap < 86)
		return -ENOSPC;
	static const uint8_t all_nodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	static const uint8_t unspec[16] = {0};
	bool dad = !memcmp(ip + 8, unspec, 16); /* duplicate address detection */
	uint8_t src_mac[6], src_ip[16];
	memcpy(src_mac, req + 6, 6);
	memcpy(src_ip, ip + 8, 16);
	memcpy(out, dad ? (const uint8_t[6]){0x33, 0x33, 0, 0, 0, 1} : src_mac, 6);
	memcpy(out + 6, gw_mac, 6);
	iod_net_put16(out + 12, IOD_NET_ETH_P_IPV6);
	struct iod_net_ipv6 *o6 = (void *)(out + 14);
	iod_net_put32(&o6->vtc_flow_be, 6u << 28);
	iod_net_put16(&o6->plen_be, 32);
	o6->next = IOD_NET_PROTO_ICMPV6;
	o6->hop_limit = 255;
	memcpy(o6->src, gw_ip6, 16);
	memcpy(o6->dst, dad ? all_nodes : src_ip, 16);
	uint8_t *na = out + 54;
	memset(na, 0, 32);
	na[0] = 136;
	na[4] = dad ? 0xa0 : 0xe0; /* router | solicited (not for DAD) | override */
	memcpy(na + 8, gw_ip6, 16);
	na[24] = 2; /* target link-layer address */
	na[25] = 1; /* 8 bytes */
	memcpy(na + 26, gw_mac, 6);
	iod_net_put16(na + 2, iod_net_l4_csum_v6(o6, IOD_NET_PROTO_ICMPV6, na, 32));
	return 86;
}

/* ---- VXLAN ------------------------------------------------------------- */

uint16_t iod_net_vxlan_sport(uint32_t inner_hash, uint16_t sport_min, uint16_t sport_max)
{
	uint32_t lo = sport_min ? sport_min : IOD_NET_VXLAN_SPORT_MIN;
	uint32_t hi = sport_max ? sport_max : IOD_NET_VXLAN_SPORT_MAX;
	if (hi < lo)
		hi = lo;
	/* Multiply-shift: Linux's reciprocal_scale(hash, range) + min. */
	return (uint16_t)(lo + (uint32_t)(((uint64_t)inner_hash * (hi - lo + 1)) >> 32));
}

static void write_outer(uint8_t *o, uint32_t inner_len, const struct iod_net_vxlan_tunnel *t,
                        uint32_t inner_hash, uint16_t src_port)
{
	uint16_t sport = src_port ? src_port
	                 : t->src_port
	                     ? t->src_port
	                     : iod_net_vxlan_sport(inner_hash, t->sport_min, t->sport_max);
	memcpy(o, t->outer_dst_mac, 6);
	memcpy(o + 6, t->outer_src_mac, 6);
	iod_net_put16(o + 12, IOD_NET_ETH_P_IPV4);
	put_ipv4(o + 14, t->tos, (uint16_t)(inner_len + 36), t->ttl ? t->ttl : 64,
	         IOD_NET_PROTO_UDP, t->outer_src_ip, t->outer_dst_ip);
	uint8_t *u = o + 34;
	iod_net_put16(u, sport);
	iod_net_put16(u + 2, t->dst_port ? t->dst_port : IOD_NET_VXLAN_PORT);
	iod_net_put16(u + 4, (uint16_t)(inner_len + 16));
	u[6] = u[7] = 0;
	uint8_t *v = u + 8;
	v[0] = 0x08;
	v[1] = v[2] = v[3] = 0;
	iod_net_put32(v + 4, (t->vni & 0xffffff) << 8);
}

static void outer_udp_csum(uint8_t *o, uint32_t inner_len)
{
	const struct iod_net_ipv4 *ip = (const void *)(o + 14);
	uint16_t c = iod_net_l4_csum_v4(ip, o + 34, (uint16_t)(inner_len + 16));
	iod_net_put16(o + 40, c ? c : 0xffff);
}

int iod_net_vxlan_encap(uint8_t **frame, uint32_t *len, uint32_t headroom,
                        const struct iod_net_vxlan_tunnel *t, uint32_t inner_hash,
                        uint16_t src_port)
{
	if (headroom < IOD_NET_VXLAN_OVERHEAD)
		return -ENOSPC;
	if (*len + IOD_NET_VXLAN_OVERHEAD > 0xffff)
		return -EMSGSIZE;
	uint8_t *o = *frame - IOD_NET_VXLAN_OVERHEAD;
	write_outer(o, *len, t, inner_hash, src_port);
	if (t->udp_csum)
		outer_udp_csum(o, *len);
	*frame = o;
	*len += IOD_NET_VXLAN_OVERHEAD;
	return 0;
}

void iod_net_vxlan_tmpl_init(struct iod_net_vxlan_tmpl *tp, const struct iod_net_vxlan_tunnel *t)
{
	memset(tp, 0, sizeof(*tp));
	/* The generic writer with inner length 0, a fixed source port of 0. */
	struct iod_net_vxlan_tunnel z = *t;
	z.src_port = 0;
	write_outer(tp->hdr, 0, &z, 0, 1);
	iod_net_put16(tp->hdr + 34, 0);
	iod_net_put16(tp->hdr + 16, 0);
	iod_net_put16(tp->hdr + 24, 0);
	iod_net_put16(tp->hdr + 38, 0);
	uint32_t src = t->outer_src_ip, dst = t->outer_dst_ip;
	uint8_t ttl = t->ttl ? t->ttl : 64;
	tp->ip_sum = (uint32_t)(0x45u << 8 | t->tos) + 0x4000u +
	             (uint32_t)(ttl << 8 | IOD_NET_PROTO_UDP) + (src >> 16) + (src & 0xffffu) +
	             (dst >> 16) + (dst & 0xffffu);
	tp->udp_csum = t->udp_csum;
	tp->sport_fixed = t->src_port;
	/* iod_net_vxlan_sport()'s range, precomputed. */
	uint32_t lo = t->sport_min ? t->sport_min : IOD_NET_VXLAN_SPORT_MIN;
	uint32_t hi = t->sport_max ? t->sport_max : IOD_NET_VXLAN_SPORT_MAX;
	if (hi < lo)
		hi = lo;
	tp->sport_lo = (uint16_t)lo;
	tp->sport_range = hi - lo + 1;
}

void iod_net_vxlan_outer_udp_csum(uint8_t *o, uint32_t inner_len)
{
	outer_udp_csum(o, inner_len);
}

int iod_net_vxlan_encap_copy(uint8_t *out, uint32_t cap, const uint8_t *inner, uint32_t len,
                             const struct iod_net_vxlan_tunnel *t, uint32_t inner_hash,
                             uint16_t src_port)
{
	if (len + IOD_NET_VXLAN_OVERHEAD > cap)
		return -ENOSPC;
	if (len + IOD_NET_VXLAN_OVERHEAD > 0xffff)
		return -EMSGSIZE;
	memmove(out + IOD_NET_VXLAN_OVERHEAD, inner, len);
	write_outer(out, len, t, inner_hash, src_port);
	if (t->udp_csum)
		outer_udp_csum(out, len);
	return (int)(len + IOD_NET_VXLAN_OVERHEAD);
}

/* Offset of the outer UDP header of a VXLAN frame, or -EINVAL. */
static int vxlan_udp_ofs(const uint8_t *f, uint32_t len, uint16_t port)
{
	uint32_t o = 14;
	if (len < 14)
		return -EINVAL;
	uint16_t type = iod_net_be16(f + 12);
	if (type == IOD_NET_ETH_P_VLAN) {
		if (len < 18)
			return -EINVAL;
		type = iod_net_be16(f + 16);
		o = 18;
	}
	if (type == IOD_NET_ETH_P_IPV4) {
		if (len < o + 20 || (f[o] >> 4) != 4 || f[o + 9] != IOD_NET_PROTO_UDP ||
		    (iod_net_be16(f + o + 6) & 0x3fff))
			return -EINVAL;
		o += (f[o] & 0x0fu) * 4u;
	} else if (type == IOD_NET_ETH_P_IPV6) {
		if (len < o + 40 || f[o + 6] != IOD_NET_PROTO_UDP)
			return -EINVAL;
		o += 40;
	} else {
		return -EINVAL;
	}
	if (len < o + 16 + 14 || iod_net_be16(f + o + 2) != (port ? port : IOD_NET_VXLAN_PORT) ||
	    !(f[o + 8] & 0x08))
		return -EINVAL;
	return (int)o;
}

int iod_net_vxlan_decap(uint8_t **frame, uint32_t *len, uint16_t vxlan_port, uint32_t *vni)
{
	int u = vxlan_udp_ofs(*frame, *len, vxlan_port);
	if (u < 0)
		return u;
	if (vni)
		*vni = iod_net_be32(*frame + u + 12) >> 8;
	*frame += u + 16;
	*len -= (uint32_t)u + 16;
	return 0;
}

int iod_net_vxlan_set_sport(uint8_t *frame, uint32_t len, uint16_t sport)
{
	int u = vxlan_udp_ofs(frame, len, 0);
	if (u < 0)
		return u;
	uint16_t old = iod_net_be16(frame + u), c = iod_net_be16(frame + u + 6);
	iod_net_put16(frame + u, sport);
	if (c) {
		c = iod_net_csum_update16(c, old, sport);
		iod_net_put16(frame + u + 6, c ? c : 0xffff);
	}
	return 0;
}

/* ---- rewrites ---------------------------------------------------------- */

/* HC' = ~(~HC + delta), delta = the sum of ~old + new words (at most 4 of
 * them): at most 5 * 0xffff, so two folds finish. Equal to applying
 * iod_net_csum_update16 word by word (ones'-complement addition is
 * associative; neither path yields 0 from a non-zero sum). */
static inline uint16_t csum_apply(uint16_t csum, uint32_t delta)
{
	uint32_t s = (uint32_t)(uint16_t)~csum + delta;
	s = (s & 0xffffu) + (s >> 16);
	s = (s & 0xffffu) + (s >> 16);
	return (uint16_t)~s;
}

/* The address rewrite and the IPv4 header checksum; the delta for L4. */
static inline uint32_t nat_ip(uint8_t *f, struct iod_net_meta *m, uint16_t l3, uint32_t ip,
                              bool dst)
{
	uint8_t *a = f + l3 + (dst ? 16 : 12);
	uint32_t old_ip = iod_net_be32(a);
	/* The address change as one ones'-complement delta (RFC 1624: ~m + m'
	 * per word), applied to the IP header and the L4 pseudo header alike. */
	uint32_t ip_delta =
	    (uint32_t)(uint16_t) ~(old_ip >> 16) + (uint16_t)~old_ip + (ip >> 16) + (ip & 0xffffu);
	iod_net_put32(a, ip);
	iod_net_put16(f + l3 + 10, csum_apply(iod_net_be16(f + l3 + 10), ip_delta));
	if (dst)
		m->key.dst.v4 = ip;
	else
		m->key.src.v4 = ip;
	return ip_delta;
}

/* The L4 part for TCP or UDP (ICMP is nat()'s). */
static inline void nat_tcpudp(uint8_t *p, struct iod_net_meta *m, bool udp, uint32_t ip_delta,
                              uint16_t port, bool dst)
{
	uint16_t csum_ofs = udp ? 6 : 16;
	uint16_t c = iod_net_be16(p + csum_ofs);
	bool udp0 = udp && c == 0;
	c = csum_apply(c, ip_delta); /* pseudo header */
	if (port) {
		uint8_t *pp = p + (dst ? 2 : 0);
		uint16_t old_port = iod_net_be16(pp);
		iod_net_put16(pp, port);
		if (dst)
			m->key.dport = port;
		else
			m->key.sport = port;
		c = iod_net_csum_update16(c, old_port, port);
	}
	if (!udp0)
		iod_net_put16(p + csum_ofs, udp && c == 0 ? 0xffff : c);
}

static int nat(uint8_t *f, struct iod_net_meta *m, uint32_t ip, uint16_t port, bool dst)
{
	bool tun = m->flags & IOD_NET_F_VXLAN;
	uint16_t l3 = tun ? m->in_l3_ofs : m->l3_ofs, l4 = tun ? m->in_l4_ofs : m->l4_ofs;
	bool has_l4 = m->flags & (tun ? IOD_NET_F_IN_L4 : IOD_NET_F_L4);

	if (m->key.family != IOD_NET_AF_V4 || !l3)
		return -EINVAL;
	uint32_t ip_delta = nat_ip(f, m, l3, ip, dst);
	if (!has_l4)
		return 0;
	uint8_t proto = m->key.proto;
	uint8_t *p = f + l4;
	if (proto == IOD_NET_PROTO_TCP || proto == IOD_NET_PROTO_UDP) {
		nat_tcpudp(p, m, proto == IOD_NET_PROTO_UDP, ip_delta, port, dst);
		return 0;
	}
	/* ICMP (no pseudo header; the echo id is both "ports"), ICMPv6 in IPv4 */
	uint16_t c = iod_net_be16(p + 2);
	if (proto != IOD_NET_PROTO_ICMP)
		c = csum_apply(c, ip_delta);
	if (port) {
		uint8_t *pp = proto == IOD_NET_PROTO_ICMP ? p + 4 : p + (dst ? 2 : 0);
		uint16_t old_port = iod_net_be16(pp);
		iod_net_put16(pp, port);
		if (proto == IOD_NET_PROTO_ICMP)
			m->key.sport = m->key.dport = port;
		else if (dst)
			m->key.dport = port;
		else
			m->key.sport = port;
		c = iod_net_csum_update16(c, old_port, port);
	}
	iod_net_put16(p + 2, c);
	return 0;
}

void iod_net_nat_tcpudp4(uint8_t *frame, struct iod_net_meta *m, bool udp, bool dst, uint32_t ip,
                         uint16_t port)
{
	bool tun = m->flags & IOD_NET_F_VXLAN;
	uint16_t l3 = tun ? m->in_l3_ofs : m->l3_ofs, l4 = tun ? m->in_l4_ofs : m->l4_ofs;
	uint32_t ip_delta = nat_ip(frame, m, l3, ip, dst);
	nat_tcpudp(frame + l4, m, udp, ip_delta, port, dst);
}

int iod_net_nat_dst(uint8_t *frame, struct iod_net_meta *m, uint32_t ip, uint16_t port)
{
	return nat(frame, m, ip, port, true);
}

int iod_net_nat_src(uint8_t *frame, struct iod_net_meta *m, uint32_t ip, uint16_t port)
{
	return nat(frame, m, ip, port, false);
}

int iod_net_ttl_dec(uint8_t *frame, const struct iod_net_meta *m)
{
	if (m->outer.family != IOD_NET_AF_V4 || !m->l3_ofs)
		return -EINVAL;
	uint8_t *ip = frame + m->l3_ofs;
	if (ip[8] <= 1)
		return -EINVAL;
	uint16_t old = iod_net_be16(ip + 8);
	ip[8]--;
	iod_net_put16(ip + 10,
	              iod_net_csum_update16(iod_net_be16(ip + 10), old, iod_net_be16(ip + 8)));
	return 0;
}

void iod_net_mac_swap(uint8_t *frame)
{
	uint8_t t[6];
	memcpy(t, frame, 6);
	memcpy(frame, frame + 6, 6);
	memcpy(frame + 6, t, 6);
}

int iod_net_csum_fill(uint8_t *frame, uint32_t len)
{
	struct iod_net_meta m;
	if (iod_net_parse(frame, len, 0, &m) || !(m.flags & IOD_NET_F_L3) ||
	    (m.flags & (IOD_NET_F_FRAG | IOD_NET_F_TRUNC)))
		return -EINVAL;
	uint8_t *l3 = frame + m.l3_ofs, *l4 = frame + m.l4_ofs;
	uint8_t proto = m.outer.proto;
	if (m.outer.family == IOD_NET_AF_V4) {
		struct iod_net_ipv4 *ip = (void *)l3;
		ip->csum_be = 0;
		iod_net_put16(&ip->csum_be, iod_net_ipv4_csum(ip));
	}
	if (!(m.flags & IOD_NET_F_L4) || (proto != IOD_NET_PROTO_TCP && proto != IOD_NET_PROTO_UDP))
		return -EINVAL;
	uint32_t ofs = proto == IOD_NET_PROTO_TCP ? 16 : 6, l4_len;
	if (m.outer.family == IOD_NET_AF_V4) {
		const struct iod_net_ipv4 *ip = (const void *)l3;
		l4_len = iod_net_be16(&ip->len_be) - (ip->ver_ihl & 0x0fu) * 4u;
		if (m.l4_ofs + l4_len > len)
			return -EINVAL;
		l4[ofs] = l4[ofs + 1] = 0;
		uint16_t c = iod_net_l4_csum_v4(ip, l4, (uint16_t)l4_len);
		iod_net_put16(l4 + ofs, proto == IOD_NET_PROTO_UDP && !c ? 0xffff : c);
	} else {
		const struct iod_net_ipv6 *ip = (const void *)l3;
		uint32_t end = m.l3_ofs + 40u + iod_net_be16(&ip->plen_be);
		if (end > len || end < m.l4_ofs)
			return -EINVAL;
		l4_len = end - m.l4_ofs;
		l4[ofs] = l4[ofs + 1] = 0;
		uint16_t c = iod_net_l4_csum_v6(ip, proto, l4, l4_len);
		iod_net_put16(l4 + ofs, proto == IOD_NET_PROTO_UDP && !c ? 0xffff : c);
	}
	return 0;
}

/* ---- verification ------------------------------------------------------ */

static bool l3l4_ok(const uint8_t *f, uint32_t len, uint16_t l3, uint16_t l4, uint8_t proto,
                    bool has_l4)
{
	if (!l3)
		return true;
	if ((f[l3] >> 4) == 4) {
		const struct iod_net_ipv4 *ip = (const void *)(f + l3);
		uint32_t hl = (ip->ver_ihl & 0x0fu) * 4u, tot = iod_net_be16(&ip->len_be);
		if (iod_net_csum_fold(iod_net_csum_add(0, ip, hl)) != 0)
			return false;
		if (!has_l4 || l3 + tot > len || proto == IOD_NET_PROTO_ICMP)
			return true;
		uint16_t l4_len = (uint16_t)(tot - hl);
		if (proto == IOD_NET_PROTO_UDP && iod_net_be16(f + l4 + 6) == 0)
			return true;
		if (proto == IOD_NET_PROTO_TCP || proto == IOD_NET_PROTO_UDP)
			return iod_net_l4_csum_v4(ip, f + l4, l4_len) == 0;
		return true;
	}
	const struct iod_net_ipv6 *ip6 = (const void *)(f + l3);
	uint32_t end = l3 + 40u + iod_net_be16(&ip6->plen_be);
	if (!has_l4 || end > len || end < l4)
		return true;
	if (proto == IOD_NET_PROTO_TCP || proto == IOD_NET_PROTO_UDP ||
	    proto == IOD_NET_PROTO_ICMPV6)
		return iod_net_l4_csum_v6(ip6, proto, f + l4, end - l4) == 0;
	return true;
}

bool iod_net_csums_ok(const uint8_t *frame, uint32_t len)
{
	struct iod_net_meta m;
	if (iod_net_parse(frame, len, 0, &m))
		return false;
	if (!l3l4_ok(frame, len, m.l3_ofs, m.l4_ofs, m.outer.proto, m.flags & IOD_NET_F_L4))
		return false;
	if (m.flags & IOD_NET_F_VXLAN)
		return l3l4_ok(frame, len, m.in_l3_ofs, m.in_l4_ofs, m.key.proto,
		               m.flags & IOD_NET_F_IN_L4);
	return true;
}
