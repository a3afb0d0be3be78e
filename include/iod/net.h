/*
 * net.h: packet formats, parse-once metadata, checksums, the VXLAN overlay,
 * connection tracking, stateful security groups, the service load balancer
 * and QoS of iod's data plane.
 *
 * Why: every data-plane component (the flow engine, the fabric simulator's
 * host edges, adaptive routing, the tests' golden packets) needs the same
 * wire formats and the same overlay rules; they live here once.
 *
 * The packet functions in the first half are pure and allocation-free: they
 * read and write caller-owned buffers, never the clock, never the heap, and
 * they never read past the length they are given (the parser is fuzzed).
 * Multi-byte header fields are in network byte order in the wire structs;
 * every function argument and metadata field is in host byte order unless
 * its name ends in _be.
 */
#ifndef IOD_NET_H
#define IOD_NET_H

#include "iod/base.h"

/* ---- wire formats ------------------------------------------------------ */

#define IOD_NET_ETH_P_IPV4 0x0800
#define IOD_NET_ETH_P_ARP 0x0806
#define IOD_NET_ETH_P_VLAN 0x8100
#define IOD_NET_ETH_P_QINQ 0x88a8
#define IOD_NET_ETH_P_IPV6 0x86dd

#define IOD_NET_PROTO_ICMP 1
#define IOD_NET_PROTO_TCP 6
#define IOD_NET_PROTO_UDP 17
#define IOD_NET_PROTO_ICMPV6 58

/* IANA-assigned VXLAN port (RFC 7348 section 5). */
#define IOD_NET_VXLAN_PORT 4789
/* Outer source ports: RFC 7348 recommends the dynamic range 49152-65535. */
#define IOD_NET_VXLAN_SPORT_MIN 49152
#define IOD_NET_VXLAN_SPORT_MAX 65535
/* Bytes VXLAN-over-IPv4 adds: outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8. */
#define IOD_NET_VXLAN_OVERHEAD 50

#define IOD_NET_TCP_FIN 0x01
#define IOD_NET_TCP_SYN 0x02
#define IOD_NET_TCP_RST 0x04
#define IOD_NET_TCP_PSH 0x08
#define IOD_NET_TCP_ACK 0x10

struct iod_net_eth {
	uint8_t dst[6];   /* destination MAC */
	uint8_t src[6];   /* source MAC */
	uint16_t type_be; /* EtherType, network order */
} __attribute__((packed));

struct iod_net_vlan {
	uint16_t tci_be;  /* PCP(3) DEI(1) VID(12), network order */
	uint16_t type_be; /* EtherType that follows */
} __attribute__((packed));

struct iod_net_arp {
	uint16_t htype_be; /* 1 = Ethernet */
	uint16_t ptype_be; /* 0x0800 = IPv4 */
	uint8_t hlen;      /* 6 */
	uint8_t plen;      /* 4 */
	uint16_t op_be;    /* 1 request, 2 reply */
	uint8_t sha[6];    /* sender MAC */
	uint8_t spa[4];    /* sender IPv4, network order bytes */
	uint8_t tha[6];    /* target MAC */
	uint8_t tpa[4];    /* target IPv4 */
} __attribute__((packed));

struct iod_net_ipv4 {
	uint8_t ver_ihl;  /* version 4 << 4 | header length in 32-bit words */
	uint8_t tos;      /* DSCP << 2 | ECN */
	uint16_t len_be;  /* total length including this header */
	uint16_t id_be;   /* identification */
	uint16_t frag_be; /* flags(3) fragment offset(13) */
	uint8_t ttl;      /* time to live */
	uint8_t proto;    /* IOD_NET_PROTO_* */
	uint16_t csum_be; /* header checksum */
	uint32_t src_be;  /* source address */
	uint32_t dst_be;  /* destination address */
} __attribute__((packed));

struct iod_net_ipv6 {
	uint32_t vtc_flow_be; /* version 6 << 28 | traffic class << 20 | flow label */
	uint16_t plen_be;     /* payload length (after this header) */
	uint8_t next;         /* next header */
	uint8_t hop_limit;    /* hop limit */
	uint8_t src[16];      /* source address */
	uint8_t dst[16];      /* destination address */
} __attribute__((packed));

struct iod_net_udp {
	uint16_t sport_be; /* source port */
	uint16_t dport_be; /* destination port */
	uint16_t len_be;   /* header + payload */
	uint16_t csum_be;  /* 0 = none (IPv4 only) */
} __attribute__((packed));

struct iod_net_tcp {
	uint16_t sport_be; /* source port */
	uint16_t dport_be; /* destination port */
	uint32_t seq_be;   /* sequence number */
	uint32_t ack_be;   /* acknowledgement number */
	uint8_t off;       /* data offset << 4 */
	uint8_t flags;     /* IOD_NET_TCP_* */
	uint16_t win_be;   /* window */
	uint16_t csum_be;  /* checksum over the pseudo header */
	uint16_t urg_be;   /* urgent pointer */
} __attribute__((packed));

struct iod_net_icmp {
	uint8_t type;     /* 8 echo request, 0 echo reply, 3 unreachable... */
	uint8_t code;     /* per type */
	uint16_t csum_be; /* over the ICMP message */
	uint16_t id_be;   /* echo identifier (the "port" conntrack uses) */
	uint16_t seq_be;  /* echo sequence */
} __attribute__((packed));

struct iod_net_vxlan {
	uint8_t flags;       /* 0x08: the VNI is valid (RFC 7348) */
	uint8_t rsvd1[3];    /* reserved, zero */
	uint32_t vni_rsv_be; /* VNI << 8 | reserved byte */
} __attribute__((packed));

static inline uint16_t iod_net_be16(const void *p)
{
	const uint8_t *b = p;
	return (uint16_t)(b[0] << 8 | b[1]);
}
static inline uint32_t iod_net_be32(const void *p)
{
	const uint8_t *b = p;
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}
static inline void iod_net_put16(void *p, uint16_t v)
{
	uint8_t *b = p;
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}
static inline void iod_net_put32(void *p, uint32_t v)
{
	uint8_t *b = p;
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

/* ---- checksums (RFC 1071, incremental RFC 1624) ------------------------ */

/* Add bytes to a 32-bit one's-complement accumulator (odd lengths padded). */
uint32_t iod_net_csum_add(uint32_t sum, const void *data, size_t len);
/* Fold to 16 bits and complement: the value to store (host order). */
uint16_t iod_net_csum_fold(uint32_t sum);
/* IPv4 header checksum of hdr (ihl words), as stored (host order). */
uint16_t iod_net_ipv4_csum(const struct iod_net_ipv4 *ip);
/* TCP/UDP/ICMPv6 checksum with the IPv4 / IPv6 pseudo header; l4 is the
 * whole segment with its checksum field zeroed or included as-is (the
 * verifier passes it as-is and expects 0). */
uint16_t iod_net_l4_csum_v4(const struct iod_net_ipv4 *ip, const void *l4, uint16_t l4_len);
uint16_t iod_net_l4_csum_v6(const struct iod_net_ipv6 *ip, uint8_t proto, const void *l4,
                            uint32_t l4_len);
/* RFC 1624 eqn. 3: a stored checksum after one 16-bit / 32-bit field changed. */
uint16_t iod_net_csum_update16(uint16_t csum, uint16_t old_v, uint16_t new_v);
uint16_t iod_net_csum_update32(uint16_t csum, uint32_t old_v, uint32_t new_v);

/* ---- parse-once metadata ----------------------------------------------- */

#define IOD_NET_AF_NONE 0
#define IOD_NET_AF_V4 4
#define IOD_NET_AF_V6 6

/* A 5-tuple; IPv4 addresses are in v4 (host order), the rest of the union zero. */
union iod_net_addr {
	uint32_t v4;    /* IPv4, host order */
	uint8_t v6[16]; /* IPv6, network order bytes */
	uint64_t w[2];  /* for hashing and comparing */
};

struct iod_net_tuple {
	union iod_net_addr src; /* source address */
	union iod_net_addr dst; /* destination address */
	uint16_t sport;         /* source port; ICMP echo id */
	uint16_t dport;         /* destination port; ICMP type << 8 | code */
	uint8_t proto;          /* IOD_NET_PROTO_*; 0 when there is no L3 */
	uint8_t family;         /* IOD_NET_AF_* */
	uint16_t zone;          /* conntrack zone (tenant); 0 from the parser */
};

/* Flags of struct iod_net_meta. */
#define IOD_NET_F_VLAN 0x0001    /* outer 802.1Q tag present */
#define IOD_NET_F_L3 0x0002      /* outer IPv4 or IPv6 parsed */
#define IOD_NET_F_L4 0x0004      /* outer TCP/UDP/ICMP parsed */
#define IOD_NET_F_VXLAN 0x0008   /* outer UDP to the VXLAN port with a valid header */
#define IOD_NET_F_IN_L3 0x0010   /* inner IPv4/IPv6 parsed */
#define IOD_NET_F_IN_L4 0x0020   /* inner TCP/UDP/ICMP parsed */
#define IOD_NET_F_FRAG 0x0040    /* the L3 packet that holds the key is a fragment */
#define IOD_NET_F_ARP 0x0080     /* ARP: key.src/dst = sender/target IPv4, key.dport = op */
#define IOD_NET_F_IN_VLAN 0x0100 /* inner 802.1Q tag */
#define IOD_NET_F_TRUNC 0x0200   /* a header was cut short: parsed as far as it went */
#define IOD_NET_F_L4_OPTS 0x0400 /* IPv4 options or IPv6 extension headers skipped */

/*
 * What one parse of a frame learns. The first cache line holds what the
 * fast path touches: offsets, flags, the flow hash and the key tuple.
 * Offsets are from the start of the frame; 0 where absent (except l2_ofs).
 */
struct iod_net_meta {
	uint32_t hash;              /* flow hash of key (the inner tuple when tunnelled) */
	uint32_t vni;               /* VXLAN network identifier when IOD_NET_F_VXLAN */
	uint16_t flags;             /* IOD_NET_F_* */
	uint16_t len;               /* frame length parsed */
	uint16_t l3_ofs;            /* outer L3 */
	uint16_t l4_ofs;            /* outer L4 */
	uint16_t tun_ofs;           /* VXLAN header */
	uint16_t in_l2_ofs;         /* inner Ethernet */
	uint16_t in_l3_ofs;         /* inner L3 */
	uint16_t in_l4_ofs;         /* inner L4 */
	uint16_t ethertype;         /* outer EtherType after VLAN tags */
	uint16_t in_ethertype;      /* inner EtherType after VLAN tags */
	uint16_t vlan_tci;          /* outer VLAN TCI when IOD_NET_F_VLAN */
	uint8_t tcp_flags;          /* of the key's TCP header, else 0 */
	uint8_t ip_tos;             /* of the key's IP header (DSCP << 2 | ECN) */
	struct iod_net_tuple key;   /* inner tuple when tunnelled, else outer */
	struct iod_net_tuple outer; /* outer tuple (same as key when not tunnelled) */
};

/*
 * Parse a frame once: outer Ethernet [VLAN] IPv4|IPv6 TCP|UDP|ICMP, and when
 * the outer UDP destination port is vxlan_port (0 = 4789), VXLAN and the inner
 * Ethernet [VLAN] IP L4. Never reads past len. Returns 0; -EINVAL when not
 * even an Ethernet header fits (m is then zeroed). A short or malformed header
 * stops the parse with IOD_NET_F_TRUNC and what was learnt so far.
 */
int iod_net_parse(const uint8_t *frame, uint32_t len, uint16_t vxlan_port, struct iod_net_meta *m);
/* As iod_net_parse, but m->hash is left 0: for a caller that knows the
 * flow's hash already (a cache) or computes iod_net_tuple_hash(&m->key)
 * only when it needs it. */
int iod_net_parse_nohash(const uint8_t *frame, uint32_t len, uint16_t vxlan_port,
                         struct iod_net_meta *m);
/* The general parser alone (iod_net_parse takes Ethernet/IPv4/TCP|UDP, plain
 * or in VXLAN, in one lean pass and gives the same result): for tests. */
int iod_net_parse_general(const uint8_t *frame, uint32_t len, uint16_t vxlan_port,
                          struct iod_net_meta *m);
/* Field by field (not padding): two parses agree. */
bool iod_net_meta_equal(const struct iod_net_meta *a, const struct iod_net_meta *b);

/* The flow hash of a tuple (zone included): stable across runs and builds. */
uint32_t iod_net_tuple_hash(const struct iod_net_tuple *t);
/* The same tuple with source and destination swapped (reply direction). */
void iod_net_tuple_reverse(const struct iod_net_tuple *t, struct iod_net_tuple *out);
bool iod_net_tuple_equal(const struct iod_net_tuple *a, const struct iod_net_tuple *b);
/* "tcp 10.0.0.1:1234 -> 10.0.0.2:80 zone 3" into buf. */
void iod_net_tuple_format(const struct iod_net_tuple *t, char *buf, size_t len);

/* Text forms of addresses: "10.0.0.1" and "10.0.0.0/24"; -EINVAL otherwise. */
int iod_net_ipv4_parse(const char *s, uint32_t *ip);
int iod_net_cidr_parse(const char *s, uint32_t *ip, uint8_t *prefix_len);
void iod_net_ipv4_format(uint32_t ip, char *buf, size_t len);
int iod_net_mac_parse(const char *s, uint8_t mac[6]);
void iod_net_mac_format(const uint8_t mac[6], char *buf, size_t len);

/* ---- builders ---------------------------------------------------------- */

/* A whole test or probe frame: Ethernet [VLAN] IPv4|IPv6 TCP|UDP|ICMP payload. */
struct iod_net_pkt_spec {
	uint8_t dst_mac[6];     /* Ethernet destination */
	uint8_t src_mac[6];     /* Ethernet source */
	uint16_t vlan_id;       /* 0 = untagged */
	struct iod_net_tuple t; /* addresses, ports, proto, family (v4 or v6) */
	uint8_t tcp_flags;      /* for TCP; 0 means SYN */
	uint32_t tcp_seq;       /* for TCP */
	uint32_t tcp_ack;       /* for TCP */
	uint8_t ttl;            /* 0 means 64 */
	uint8_t tos;            /* DSCP << 2 | ECN */
	uint16_t payload_bytes; /* payload length after L4 */
	const uint8_t *payload; /* NULL = a deterministic filler pattern */
	uint16_t frame_bytes;   /* if nonzero, pad the payload so the frame has this length */
};

/* Build the frame into out (cap bytes) with valid checksums; returns its
 * length, -ENOSPC when it does not fit, -EINVAL for a bad spec. */
int iod_net_pkt_build(const struct iod_net_pkt_spec *s, uint8_t *out, uint32_t cap);

/* An Ethernet broadcast (request, op 1) or unicast (reply, op 2) ARP frame;
 * returns its length (42) or -ENOSPC. */
int iod_net_build_arp(uint8_t *out, uint32_t cap, uint16_t op, const uint8_t sha[6], uint32_t spa,
                      const uint8_t tha[6], uint32_t tpa);

/* ---- VXLAN overlay ----------------------------------------------------- */

/* One tunnel endpoint pair and what the outer headers carry. */
struct iod_net_vxlan_tunnel {
	uint8_t outer_dst_mac[6]; /* next hop (underlay) MAC */
	uint8_t outer_src_mac[6]; /* this VTEP's MAC */
	uint32_t outer_src_ip;    /* this VTEP's IPv4 */
	uint32_t outer_dst_ip;    /* the remote VTEP's IPv4 */
	uint32_t vni;             /* 24-bit VNI (tenant network) */
	uint16_t src_port;        /* outer UDP source port; 0 = from the inner flow hash */
	uint16_t dst_port;        /* 0 = 4789 */
	uint16_t sport_min;       /* range for hashed source ports; 0 = 49152 */
	uint16_t sport_max;       /* 0 = 65535 */
	uint8_t ttl;              /* 0 = 64 */
	uint8_t tos;              /* outer DSCP << 2 | ECN */
	bool udp_csum;            /* compute the outer UDP checksum (else 0, RFC 7348) */
};

/* The outer source port for an inner flow hash: Linux's vxlan_src_port()
 * spirit (hash folded into [min, max]); min/max 0 mean 49152/65535. */
uint16_t iod_net_vxlan_sport(uint32_t inner_hash, uint16_t sport_min, uint16_t sport_max);

/*
 * Encapsulate in place: the inner frame starts at *frame (len bytes) and
 * there are at least headroom bytes writable before it. On success *frame
 * moves back by IOD_NET_VXLAN_OVERHEAD and *len grows by as much. src_port
 * (nonzero) overrides both t->src_port and the hash (adaptive routing's per
 * flow choice); inner_hash is the inner flow hash (iod_net_meta.hash).
 * -ENOSPC without headroom, -EMSGSIZE when the result exceeds 65535 bytes.
 */
int iod_net_vxlan_encap(uint8_t **frame, uint32_t *len, uint32_t headroom,
                        const struct iod_net_vxlan_tunnel *t, uint32_t inner_hash,
                        uint16_t src_port);
/*
 * A tunnel's outer headers, precomputed once (when the rule is made): per
 * packet only the IPv4 total length, its checksum (one addition to the sum
 * kept here), the UDP source port and length change. The bytes written are
 * those iod_net_vxlan_encap writes.
 */
struct iod_net_vxlan_tmpl {
	uint8_t hdr[IOD_NET_VXLAN_OVERHEAD]; /* outer Ethernet/IPv4/UDP/VXLAN, lengths 0 */
	uint8_t udp_csum;                    /* compute the outer UDP checksum */
	uint8_t pad;                         /* zero */
	uint32_t ip_sum;                     /* sum of the IPv4 header's words but the length */
	uint16_t sport_fixed;                /* the tunnel's fixed source port, 0 = hashed */
	uint16_t sport_lo;                   /* hashed: lowest port */
	uint32_t sport_range;                /* hashed: ports in the range */
};
_Static_assert(sizeof(struct iod_net_vxlan_tmpl) == 64, "a template is one cache line");
void iod_net_vxlan_tmpl_init(struct iod_net_vxlan_tmpl *tp, const struct iod_net_vxlan_tunnel *t);
/* The outer UDP checksum of a frame whose outer headers start at o. */
void iod_net_vxlan_outer_udp_csum(uint8_t *o, uint32_t inner_len);
/* iod_net_vxlan_encap from a template (inline: the per-packet encap). */
static inline int iod_net_vxlan_encap_tmpl(uint8_t **frame, uint32_t *len, uint32_t headroom,
                                           const struct iod_net_vxlan_tmpl *tp, uint32_t inner_hash,
                                           uint16_t src_port)
{
	if (headroom < IOD_NET_VXLAN_OVERHEAD)
		return -ENOSPC;
	if (*len + IOD_NET_VXLAN_OVERHEAD > 0xffff)
		return -EMSGSIZE;
	uint8_t *o = *frame - IOD_NET_VXLAN_OVERHEAD;
	uint32_t inner_len = *len;
	__builtin_memcpy(o, tp->hdr, IOD_NET_VXLAN_OVERHEAD);
	uint16_t tot = (uint16_t)(inner_len + 36);
	/* The generic writer's sum with the length added: the same checksum. */
	uint32_t s = tp->ip_sum + tot;
	s = (s & 0xffffu) + (s >> 16);
	s = (s & 0xffffu) + (s >> 16);
	iod_net_put16(o + 16, tot);
	iod_net_put16(o + 24, (uint16_t)~s);
	uint16_t sport =
	    src_port ? src_port
	    : tp->sport_fixed
	        ? tp->sport_fixed
	        : (uint16_t)(tp->sport_lo +
	                     (uint32_t)(((uint64_t)inner_hash * tp->sport_range) >> 32));
	iod_net_put16(o + 34, sport);
	iod_net_put16(o + 38, (uint16_t)(inner_len + 16));
	if (tp->udp_csum)
		iod_net_vxlan_outer_udp_csum(o, inner_len);
	*frame = o;
	*len += IOD_NET_VXLAN_OVERHEAD;
	return 0;
}
/* The same, copying: writes outer headers + the inner frame to out (cap). */
int iod_net_vxlan_encap_copy(uint8_t *out, uint32_t cap, const uint8_t *inner, uint32_t len,
                             const struct iod_net_vxlan_tunnel *t, uint32_t inner_hash,
                             uint16_t src_port);
/*
 * Decapsulate in place: checks outer Ethernet [VLAN] IPv4|IPv6 / UDP to
 * vxlan_port (0 = 4789) / VXLAN with the I flag; on success *frame and *len
 * describe the inner frame and *vni is set. -EINVAL when it is not VXLAN.
 */
int iod_net_vxlan_decap(uint8_t **frame, uint32_t *len, uint16_t vxlan_port, uint32_t *vni);

/* Rewrite the outer UDP source port of a VXLAN frame already encapsulated
 * (adaptive routing re-steers a flowlet); fixes the UDP checksum if set. */
int iod_net_vxlan_set_sport(uint8_t *frame, uint32_t len, uint16_t sport);

/*
 * ARP responder for overlay gateways: if req is an ARP request for
 * gw_ip, write the reply (from gw_mac) to out and return its length; 0 when
 * the frame is not such a request; -ENOSPC if out is too small.
 */
int iod_net_arp_reply(const uint8_t *req, uint32_t len, uint32_t gw_ip, const uint8_t gw_mac[6],
                      uint8_t *out, uint32_t cap);

/*
 * ND responder (IPv6's ARP, RFC 4861): if req is a Neighbor Solicitation for
 * gw_ip6, write the Neighbor Advertisement (router, solicited, override; with
 * the target link-layer address option) to out and return its length (86);
 * 0 when it is not such a solicitation; -ENOSPC if out is too small.
 */
int iod_net_nd_reply(const uint8_t *req, uint32_t len, const uint8_t gw_ip6[16],
                     const uint8_t gw_mac[6], uint8_t *out, uint32_t cap);

/* ---- header rewrites with incremental checksums ------------------------ */

/* Rewrite the key's IPv4 source/destination address and L4 port of a parsed
 * frame (the inner headers when tunnelled), patching the IPv4 and TCP/UDP
 * checksums incrementally (RFC 1624). port 0 leaves the port. -EINVAL when
 * the key is not IPv4 TCP/UDP/ICMP. Updates m->key. */
int iod_net_nat_dst(uint8_t *frame, struct iod_net_meta *m, uint32_t ip, uint16_t port);
int iod_net_nat_src(uint8_t *frame, struct iod_net_meta *m, uint32_t ip, uint16_t port);
/* The same rewrite for a frame the caller knows holds IPv4 and a whole TCP
 * (udp false) or UDP header for the key: the same bytes without the checks
 * (a compiled flow knows its protocol; it checks the L4 flag per packet). */
void iod_net_nat_tcpudp4(uint8_t *frame, struct iod_net_meta *m, bool udp, bool dst, uint32_t ip,
                         uint16_t port);
/* Decrement the (outer) IPv4 TTL with an incremental checksum; -EINVAL at 0. */
int iod_net_ttl_dec(uint8_t *frame, const struct iod_net_meta *m);
/* Swap source and destination MACs (the bench's mac-swap). */
void iod_net_mac_swap(uint8_t *frame);

/* Compute the (outer) IPv4 header and TCP/UDP checksums from scratch: for
 * frames a kernel handed over with checksums left to "hardware" (veth
 * CHECKSUM_PARTIAL seen through AF_PACKET). -EINVAL when not IP TCP/UDP. */
int iod_net_csum_fill(uint8_t *frame, uint32_t len);

/* ---- TCP segmentation and coalescing in software (gso.c) ---------------- */

/* The virtio-net header AF_PACKET's PACKET_VNET_HDR puts before each frame
 * (include/uapi/linux/virtio_net.h, in the host's byte order as the kernel
 * writes it for packet sockets on a little-endian host). */
struct iod_net_vnet_hdr {
	uint8_t flags;        /* IOD_NET_VNET_F_* */
	uint8_t gso_type;     /* IOD_NET_VNET_GSO_* (| IOD_NET_VNET_GSO_ECN) */
	uint16_t hdr_len;     /* Ethernet + IP + TCP header bytes */
	uint16_t gso_size;    /* payload bytes per segment */
	uint16_t csum_start;  /* where the partial checksum starts (frame offset) */
	uint16_t csum_offset; /* the checksum field, from csum_start */
} __attribute__((packed));
#define IOD_NET_VNET_F_NEEDS_CSUM 1
#define IOD_NET_VNET_GSO_NONE 0
#define IOD_NET_VNET_GSO_TCPV4 1
#define IOD_NET_VNET_GSO_UDP_L4 5 /* UDP_SEGMENT: datagrams of gso_size payload */
#define IOD_NET_VNET_GSO_ECN 0x80

/* A TCP/IPv4 or UDP/IPv4 super-frame (a GSO frame a replica's TCP, or a
 * UDP socket with UDP_SEGMENT, handed its veth) as its segments will be:
 * where the headers end, the payload and the count. */
struct iod_net_gso {
	uint8_t proto;     /* IOD_NET_PROTO_TCP or IOD_NET_PROTO_UDP */
	uint16_t l3;       /* IPv4 header offset (14) */
	uint16_t l4;       /* TCP or UDP header offset */
	uint16_t hdr_len;  /* all headers (the payload starts here) */
	uint16_t gso_size; /* payload per segment */
	uint32_t payload;  /* payload bytes in the super-frame */
	uint32_t segs;     /* segments (>= 1) */
};
/* Plan the segmentation of frame (len bytes) at gso_size payload bytes a
 * segment: Ethernet (no VLAN), IPv4 (no fragment), TCP or UDP (g->proto
 * says which). -EINVAL for anything else, a gso_size of 0, or headers that
 * do not fit len. */
int iod_net_gso_plan(const uint8_t *frame, uint32_t len, uint16_t gso_size, struct iod_net_gso *g);
/* Write segment k (0-based) of the planned frame into out: the headers
 * with the IP total length, id (+k) and checksum; for TCP the sequence
 * number (+k * gso_size) and flags (FIN and PSH on the last segment only,
 * CWR on the first only), for UDP the datagram's length; and the L4
 * checksum computed from scratch (UDP: 0xffff for a sum of 0). Returns its
 * length; 0 when k >= g->segs or it does not fit cap. */
uint32_t iod_net_gso_segment(const uint8_t *frame, const struct iod_net_gso *g, uint32_t k,
                             uint8_t *out, uint32_t cap);

/* Coalescing (the receive side, as GRO does): how many of frames[0..n)
 * (from 1 up) continue frames[0]'s TCP/IPv4 flow in order and may be
 * handed over as one super-frame of at most max_l3 IP bytes: the same
 * addresses, ports, IP header (but length, id and checksum), TCP header
 * length, options, ack and window; consecutive sequence numbers; every
 * segment but the last exactly the first's payload length; flags ACK (PSH
 * allowed on the last); a TCP checksum that verifies. frames[0] itself
 * when it cannot start a run: 1. */
uint32_t iod_net_gro_run(uint8_t *const *frames, const uint32_t *lens, uint32_t n, uint32_t max_l3);
/* Turn first (len0 bytes) into the header of a run of segs segments whose
 * frames total total bytes (as iod_net_gro_run found): its IP total length
 * and checksum, PSH as on last, a TCP checksum field holding the pseudo
 * header sum (a partial checksum, as CHECKSUM_PARTIAL has it), and the
 * virtio-net header h that describes it (gso TCPV4 at the first's payload
 * length, NEEDS_CSUM). The payload of each following frame comes after
 * first's. segs 1 leaves first as it is and h with no GSO. */
void iod_net_gro_finish(uint8_t *first, uint32_t len0, const uint8_t *last, uint32_t last_len,
                        uint32_t segs, uint32_t payload, struct iod_net_vnet_hdr *h);

/* UDP coalescing (a switch's fabric port): how many of frames[0..n) (from
 * 1 up, at most max_segs) continue frames[0] as datagrams of one UDP/IPv4
 * flow that may go out as one UDP_SEGMENT super-frame of at most max_l3 IP
 * bytes: the same Ethernet header, addresses, IP header (but length, id
 * and checksum) and ports, and every datagram's payload as long as the
 * first's but the last's (which may be shorter). 1 when frames[0] cannot
 * start a run. */
uint32_t iod_net_udp_gro_run(uint8_t *const *frames, const uint32_t *lens, uint32_t n,
                             uint32_t max_l3, uint32_t max_segs);
/* Turn first (len0 bytes) into the header of such a run of segs datagrams
 * carrying payload bytes in all: IP total length and checksum, UDP length,
 * a UDP checksum field holding the pseudo-header sum (partial), and the
 * virtio-net header h (gso UDP_L4 at the first's payload length,
 * NEEDS_CSUM). segs 1 leaves first as it is and h with no GSO. */
void iod_net_udp_gro_finish(uint8_t *first, uint32_t len0, uint32_t segs, uint32_t payload,
                            struct iod_net_vnet_hdr *h);

/* Verification for tests: net_debug.h. */

/* ---- anti-spoofing of a switch's access ports (spoof.c) ---------------- */

/*
 * A replica's port on the node's virtual switch is bound to the overlay
 * address and MAC its replica was given (src/agent/vswitch.c): a frame it
 * sends must carry that source MAC, an IPv4 packet that source address, an
 * ARP packet that sender MAC and address (0.0.0.0 only in a request: an
 * RFC 5227 probe claims nothing). Access ports are untagged: a VLAN tag is
 * refused (the parser looks through tags, so a tagged frame would
 * otherwise be classified by the address inside it). Other EtherTypes
 * (IPv6) are checked by MAC only; the pipeline drops them anyway.
 */
#define IOD_NET_SPOOF_VERDICTS(X)                                                  \
	X(OK, "ok")                                                                \
	X(SRC_MAC, "source-mac") /* Ethernet source is not the port's MAC */       \
	X(SRC_IP, "source-ip")   /* IPv4 source is not the port's address */       \
	X(ARP, "arp-sender")     /* ARP sender MAC or address is not the port's */ \
	X(TAGGED, "vlan-tagged") /* a VLAN tag on an access port */                \
	X(SHORT, "truncated")    /* too short to read the header it claims */
/* clang-format off */
enum iod_net_spoof_verdict {
#define IOD_NET_SPOOF_ENUM(n, s) IOD_NET_SPOOF_##n,
	IOD_NET_SPOOF_VERDICTS(IOD_NET_SPOOF_ENUM)
#undef IOD_NET_SPOOF_ENUM
	IOD_NET_SPOOF_N
};
/* clang-format on */
struct iod_net_spoof_bind {
	uint32_t ip;    /* the port's IPv4 address (host order) */
	uint8_t mac[6]; /* its MAC */
};
/* The verdict on frame[0..len) sent from a port bound to b: OK or why it
 * must be dropped. Reads only within len; no state. */
enum iod_net_spoof_verdict iod_net_spoof_check(const struct iod_net_spoof_bind *b,
                                               const uint8_t *frame, uint32_t len);
/* "ok", "source-ip", ... ("?" when out of range). */
const char *iod_net_spoof_name(enum iod_net_spoof_verdict v);

/* ---- tables ------------------------------------------------------------ */

/* A zeroed table for the packet path, allocated and touched at start-up
 * (no page faults later); from 4 MiB up it is 2 MiB-aligned and advised as
 * transparent huge pages (fewer TLB misses on random lookups). free() it.
 * NULL when out of memory. */
void *iod_net_table_alloc(size_t bytes);

/* Connection tracking: net_ct.h. Security groups, the service load
 * balancer and QoS meters: net_policy.h. */

#endif
