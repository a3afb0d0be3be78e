/*
 * gso.c: TCP segmentation and coalescing in software (pure), for the
 * node's virtual switch's replica ports (src/io/afpacket.c with
 * PACKET_VNET_HDR, docs/network.md "GSO and GRO on the replica ports").
 *
 * Segmentation: a replica's TCP hands its veth 64 KB super-frames (GSO);
 * the switch splits each into MTU-sized segments, as a NIC's TSO or the
 * kernel's tcp_gso_segment would: the headers copied, the IP total length,
 * id and checksum, the TCP sequence number and flags fixed per segment, the
 * TCP checksum computed from scratch (the super-frame's is a partial one).
 * A UDP socket's UDP_SEGMENT super-frame (gso UDP_L4) splits the same way
 * into datagrams of gso_size payload, each with its length and checksum.
 *
 * Coalescing: in-order segments of one flow bound for a replica are handed
 * to its veth as one super-frame with a virtio-net header (GRO's job), so
 * the receiver's TCP gets big buffers. Only segments whose TCP checksum
 * verifies are merged (the merged frame carries a partial checksum, which
 * the receiving stack trusts). Never does I/O or reads the clock.
 *
 * UDP coalescing (the switch's fabric port): a run of UDP datagrams of one
 * flow with the same headers and payload length (VXLAN frames of one inner
 * flow to one VTEP) goes out as one UDP_SEGMENT super-frame (gso UDP_L4),
 * so the underlay's hops forward one buffer where they forwarded each
 * datagram; the receiving switch splits it (iod_net_gso_segment), and a
 * hop that cannot carry it segments it on the way, as the kernel's own
 * VXLAN device's tunnel GSO does.
 */
#include "iod/net.h"

#include <string.h>

#define ETH_LEN 14u
#define TCP_CSUM_OFS 16u
#define UDP_CSUM_OFS 6u

/* Ethernet / IPv4 (no fragment) / TCP or UDP: the protocol and offsets;
 * false otherwise. */
static bool l4_hdrs(const uint8_t *f, uint32_t len, uint8_t *proto, uint16_t *l4, uint16_t *hdr_len)
{
	if (len < ETH_LEN + 20 || iod_net_be16(f + 12) != 0x0800)
		return false;
	const struct iod_net_ipv4 *ip = (const void *)(f + ETH_LEN);
	uint32_t ihl = (ip->ver_ihl & 0x0fu) * 4u;
	if ((ip->ver_ihl >> 4) != 4 || ihl < 20 ||
	    (ip->proto != IOD_NET_PROTO_TCP && ip->proto != IOD_NET_PROTO_UDP) ||
	    (iod_net_be16(&ip->frag_be) & 0x3fff))
		return false;
	uint32_t thl = 8; /* UDP */
	if (ip->proto == IOD_NET_PROTO_TCP) {
		if (ETH_LEN + ihl + 20 > len)
			return false;
		thl = (uint32_t)(f[ETH_LEN + ihl + 12] >> 4) * 4u;
		if (thl < 20)
			return false;
	}
	if (ETH_LEN + ihl + thl > len)
		return false;
	*proto = ip->proto;
	*l4 = (uint16_t)(ETH_LEN + ihl);
	*hdr_len = (uint16_t)(ETH_LEN + ihl + thl);
	return true;
}

/* Ethernet / IPv4 (no fragment) / TCP: the offsets; false otherwise. */
static bool tcp4_hdrs(const uint8_t *f, uint32_t len, uint16_t *l4, uint16_t *hdr_len)
{
	uint8_t proto = 0;
	return l4_hdrs(f, len, &proto, l4, hdr_len) && proto == IOD_NET_PROTO_TCP;
}

int iod_net_gso_plan(const uint8_t *frame, uint32_t len, uint16_t gso_size, struct iod_net_gso *g)
{
	memset(g, 0, sizeof(*g));
	if (!gso_size || len > 0xffffu + ETH_LEN ||
	    !l4_hdrs(frame, len, &g->proto, &g->l4, &g->hdr_len))
		return -EINVAL;
	g->l3 = ETH_LEN;
	g->gso_size = gso_size;
	g->payload = len - g->hdr_len;
	g->segs = g->payload ? (g->payload + gso_size - 1u) / gso_size : 1u;
	return 0;
}

uint32_t iod_net_gso_segment(const uint8_t *frame, const struct iod_net_gso *g, uint32_t k,
                             uint8_t *out, uint32_t cap)
{
	if (k >= g->segs)
		return 0;
	uint32_t ofs = k * g->gso_size;
	uint32_t pay = g->payload - ofs < g->gso_size ? g->payload - ofs : g->gso_size;
	uint32_t len = g->hdr_len + pay;
	if (len > cap)
		return 0;
	memcpy(out, frame, g->hdr_len);
	memcpy(out + g->hdr_len, frame + g->hdr_len + ofs, pay);
	struct iod_net_ipv4 *ip = (void *)(out + g->l3);
	uint8_t *th = out + g->l4;
	iod_net_put16(&ip->len_be, (uint16_t)(len - g->l3));
	iod_net_put16(&ip->id_be, (uint16_t)(iod_net_be16(&ip->id_be) + k));
	ip->csum_be = 0;
	iod_net_put16(&ip->csum_be, iod_net_ipv4_csum(ip));
	if (g->proto == IOD_NET_PROTO_UDP) {
		iod_net_put16(th + 4, (uint16_t)(len - g->l4));
		th[UDP_CSUM_OFS] = th[UDP_CSUM_OFS + 1] = 0;
		uint16_t c = iod_net_l4_csum_v4(ip, th, (uint16_t)(len - g->l4));
		iod_net_put16(th + UDP_CSUM_OFS, c ? c : 0xffffu); /* 0 means none */
		return len;
	}
	iod_net_put32(th + 4, iod_net_be32(th + 4) + ofs);
	if (k + 1 < g->segs)
		th[13] &= (uint8_t) ~(IOD_NET_TCP_FIN | IOD_NET_TCP_PSH);
	if (k > 0)
		th[13] &= (uint8_t)~0x80u; /* CWR */
	th[TCP_CSUM_OFS] = th[TCP_CSUM_OFS + 1] = 0;
	iod_net_put16(th + TCP_CSUM_OFS, iod_net_l4_csum_v4(ip, th, (uint16_t)(len - g->l4)));
	return len;
}

/* May b follow a (whose next sequence number is seq) in one run? */
static bool gro_follows(const uint8_t *a, uint16_t l4, uint16_t hl, const uint8_t *b, uint32_t blen,
                        uint32_t seq)
{
	uint16_t bl4, bhl;
	if (!tcp4_hdrs(b, blen, &bl4, &bhl) || bl4 != l4 || bhl != hl)
		return false;
	const struct iod_net_ipv4 *ia = (const void *)(a + ETH_LEN),
	                          *ib = (const void *)(b + ETH_LEN);
	if (ia->ver_ihl != ib->ver_ihl || ia->tos != ib->tos || ia->frag_be != ib->frag_be ||
	    ia->ttl != ib->ttl || ia->src_be != ib->src_be || ia->dst_be != ib->dst_be)
		return false;
	/* Ethernet header, IP options, ports, ack, offset, window, TCP options */
	if (memcmp(a, b, ETH_LEN) ||
	    memcmp(a + ETH_LEN + 20, b + ETH_LEN + 20, l4 - ETH_LEN - 20) ||
	    memcmp(a + l4, b + l4, 4) || memcmp(a + l4 + 8, b + l4 + 8, 2) ||
	    memcmp(a + l4 + 14, b + l4 + 14, 2) || memcmp(a + l4 + 20, b + l4 + 20, hl - l4 - 20u))
		return false;
	if (iod_net_be32(b + l4 + 4) != seq)
		return false;
	uint32_t tot = iod_net_be16(&ib->len_be);
	if (tot + ETH_LEN > blen || tot + ETH_LEN < hl)
		return false;
	return iod_net_l4_csum_v4(ib, b + l4, (uint16_t)(tot + ETH_LEN - l4)) == 0;
}

uint32_t iod_net_gro_run(uint8_t *const *frames, const uint32_t *lens, uint32_t n, uint32_t max_l3)
{
	uint16_t l4, hl;
	if (n < 2 || !tcp4_hdrs(frames[0], lens[0], &l4, &hl))
		return 1;
	const uint8_t *a = frames[0];
	const struct iod_net_ipv4 *ip = (const void *)(a + ETH_LEN);
	uint32_t tot = iod_net_be16(&ip->len_be);
	if (tot + ETH_LEN > lens[0] || tot + ETH_LEN <= hl || a[l4 + 13] != IOD_NET_TCP_ACK ||
	    iod_net_l4_csum_v4(ip, a + l4, (uint16_t)(tot + ETH_LEN - l4)) != 0)
		return 1;
	uint32_t mss = tot + ETH_LEN - hl, l3 = tot;
	uint32_t seq = iod_net_be32(a + l4 + 4) + mss, k = 1;
	for (; k < n; k++) {
		const uint8_t *b = frames[k];
		if (!gro_follows(a, l4, hl, b, lens[k], seq))
			break;
		uint32_t pay = iod_net_be16(b + ETH_LEN + 2) + ETH_LEN - hl;
		uint8_t fl = b[l4 + 13];
		if (!pay || pay > mss || l3 + pay > max_l3 ||
		    (fl != IOD_NET_TCP_ACK && fl != (IOD_NET_TCP_ACK | IOD_NET_TCP_PSH)))
			break;
		l3 += pay;
		seq += pay;
		if (pay < mss || fl != IOD_NET_TCP_ACK) {
			k++; /* a short or pushed segment ends the run */
			break;
		}
	}
	return k;
}

/* A coalesced super-frame's headers: first (the IPv4 header at ETH_LEN,
 * the TCP or UDP one at l4, hl bytes of headers in all) carrying l4_len
 * bytes from l4 on gets its IP total length and checksum, an L4 checksum
 * field holding the pseudo-header sum (partial, as CHECKSUM_PARTIAL has
 * it), and the virtio-net header h (gso_type at gso_size, NEEDS_CSUM). */
static void super_header(uint8_t *first, uint16_t l4, uint16_t hl, uint32_t l4_len,
                         uint8_t gso_type, uint16_t gso_size, struct iod_net_vnet_hdr *h)
{
	struct iod_net_ipv4 *ip = (void *)(first + ETH_LEN);
	bool tcp = gso_type == IOD_NET_VNET_GSO_TCPV4;
	uint16_t csum_ofs = tcp ? TCP_CSUM_OFS : UDP_CSUM_OFS;
	iod_net_put16(&ip->len_be, (uint16_t)(l4 - ETH_LEN + l4_len));
	ip->csum_be = 0;
	iod_net_put16(&ip->csum_be, iod_net_ipv4_csum(ip));
	uint8_t ph[12];
	memcpy(ph, &ip->src_be, 4);
	memcpy(ph + 4, &ip->dst_be, 4);
	ph[8] = 0;
	ph[9] = tcp ? IOD_NET_PROTO_TCP : IOD_NET_PROTO_UDP;
	iod_net_put16(ph + 10, (uint16_t)l4_len);
	iod_net_put16(first + l4 + csum_ofs,
	              (uint16_t)~iod_net_csum_fold(iod_net_csum_add(0, ph, sizeof(ph))));
	h->flags = IOD_NET_VNET_F_NEEDS_CSUM;
	h->gso_type = gso_type;
	h->hdr_len = hl;
	h->gso_size = gso_size;
	h->csum_start = l4;
	h->csum_offset = csum_ofs;
}

void iod_net_gro_finish(uint8_t *first, uint32_t len0, const uint8_t *last, uint32_t last_len,
                        uint32_t segs, uint32_t payload, struct iod_net_vnet_hdr *h)
{
	memset(h, 0, sizeof(*h));
	uint16_t l4, hl;
	if (segs < 2 || !tcp4_hdrs(first, len0, &l4, &hl))
		return;
	(void)last_len;
	struct iod_net_ipv4 *ip = (void *)(first + ETH_LEN);
	uint16_t mss = (uint16_t)(iod_net_be16(&ip->len_be) + ETH_LEN - hl);
	first[l4 + 13] |= last[l4 + 13] & IOD_NET_TCP_PSH;
	super_header(first, l4, hl, hl - l4 + payload, IOD_NET_VNET_GSO_TCPV4, mss, h);
}

/* May b follow a in one UDP run of payload pay each (b's may be shorter)? */
static bool udp_follows(const uint8_t *a, uint16_t l4, const uint8_t *b, uint32_t blen,
                        uint32_t pay, uint32_t *bpay)
{
	uint8_t proto;
	uint16_t bl4, bhl;
	if (!l4_hdrs(b, blen, &proto, &bl4, &bhl) || proto != IOD_NET_PROTO_UDP || bl4 != l4)
		return false;
	const struct iod_net_ipv4 *ia = (const void *)(a + ETH_LEN),
	                          *ib = (const void *)(b + ETH_LEN);
	if (ia->ver_ihl != ib->ver_ihl || ia->tos != ib->tos || ia->frag_be != ib->frag_be ||
	    ia->ttl != ib->ttl || ia->src_be != ib->src_be || ia->dst_be != ib->dst_be ||
	    memcmp(a, b, ETH_LEN) ||
	    memcmp(a + ETH_LEN + 20, b + ETH_LEN + 20, l4 - ETH_LEN - 20) ||
	    memcmp(a + l4, b + l4, 4))
		return false;
	uint32_t tot = iod_net_be16(&ib->len_be), ul = iod_net_be16(b + l4 + 4);
	if (tot + ETH_LEN > blen || ul != tot + ETH_LEN - l4 || ul <= 8 || ul - 8 > pay)
		return false;
	*bpay = ul - 8;
	return true;
}

uint32_t iod_net_udp_gro_run(uint8_t *const *frames, const uint32_t *lens, uint32_t n,
                             uint32_t max_l3, uint32_t max_segs)
{
	uint8_t proto;
	uint16_t l4, hl;
	if (n < 2 || max_segs < 2 || !l4_hdrs(frames[0], lens[0], &proto, &l4, &hl) ||
	    proto != IOD_NET_PROTO_UDP)
		return 1;
	const uint8_t *a = frames[0];
	const struct iod_net_ipv4 *ip = (const void *)(a + ETH_LEN);
	uint32_t tot = iod_net_be16(&ip->len_be), ul = iod_net_be16(a + l4 + 4);
	if (tot + ETH_LEN > lens[0] || ul != tot + ETH_LEN - l4 || ul <= 8)
		return 1;
	uint32_t pay = ul - 8, l3 = tot, k = 1;
	for (; k < n && k < max_segs; k++) {
		uint32_t bp;
		if (!udp_follows(a, l4, frames[k], lens[k], pay, &bp) || l3 + bp > max_l3)
			break;
		l3 += bp;
		if (bp < pay) {
			k++; /* a short datagram ends the run */
			break;
		}
	}
	return k;
}

void iod_net_udp_gro_finish(uint8_t *first, uint32_t len0, uint32_t segs, uint32_t payload,
                            struct iod_net_vnet_hdr *h)
{
	memset(h, 0, sizeof(*h));
	uint8_t proto;
	uint16_t l4, hl;
	if (segs < 2 || !l4_hdrs(first, len0, &proto, &l4, &hl) || proto != IOD_NET_PROTO_UDP)
		return;
	uint16_t each = (uint16_t)(iod_net_be16(first + l4 + 4) - 8u);
	iod_net_put16(first + l4 + 4, (uint16_t)(8u + payload));
	super_header(first, l4, hl, 8u + payload, IOD_NET_VNET_GSO_UDP_L4, each, h);
}
