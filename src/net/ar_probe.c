/*
 * ar_probe.c: adaptive-routing probes on the wire: build, parse, reflect.
 *
 * The data plane's edges race and watch paths with these frames (include/
 * iod/ar.h): the sender builds a request per probe the core asks for, the
 * remote edge reflects it in place, and the reply goes back to the core.
 * A probe is a VXLAN packet (UDP to the VXLAN port, the flow's outer
 * addresses, the probed source port) for the reserved IOD_AR_PROBE_VNI, so
 * any fabric hash, the full 5-tuple included, sends it the way the flow's
 * data with that source port goes.
 * Parsing is strict and bounded (every length checked before it is read);
 * tests/fuzz/fuzz_ar_probe.c throws arbitrary bytes at it. It never
 * allocates, never reads a clock, never sends anything.
 */
#include "iod/ar.h"
#include "iod/net.h"

#include <arpa/inet.h>
#include <string.h>

#define PROBE_MAGIC 0x494f4152u /* "IOAR" */
#define PROBE_VERSION 1
#define PROBE_REPLY 1
#define PAYLOAD_BYTES 32
#define ETH_IPV4 0x0800
#define VXLAN_FLAG_I 0x08 /* RFC 7348: the VNI is valid */

static void put_u64(uint8_t *b, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
}

static uint64_t get_u64(const uint8_t *b)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

int iod_ar_probe_frame_build(uint8_t *buf, uint32_t cap, const struct iod_ar_wire *w,
                             const struct iod_ar_probe *p)
{
	struct iod_net_eth eth;
	struct iod_net_ipv4 ip;
	struct iod_net_udp udp;
	struct iod_net_vxlan vx;
	uint8_t *pl = buf + sizeof(eth) + sizeof(ip) + sizeof(udp) + sizeof(vx);
	uint32_t magic = htonl(PROBE_MAGIC);

	if (cap < IOD_AR_PROBE_FRAME_BYTES)
		return -ENOSPC;
	memcpy(eth.dst, w->dst_mac, 6);
	memcpy(eth.src, w->src_mac, 6);
	eth.type_be = htons(ETH_IPV4);
	memset(&ip, 0, sizeof(ip));
	ip.ver_ihl = 0x45;
	ip.tos = w->tos;
	ip.len_be = htons(sizeof(ip) + sizeof(udp) + sizeof(vx) + PAYLOAD_BYTES);
	ip.ttl = 64;
	ip.proto = IOD_NET_PROTO_UDP;
	ip.src_be = htonl(w->src_ip);
	ip.dst_be = htonl(w->dst_ip);
	iod_net_put16(&ip.csum_be, iod_net_ipv4_csum(&ip)); /* host-order sum, stored big-endian */
	udp.sport_be = htons(p->sport);
	udp.dport_be = htons(w->dport ? w->dport : IOD_NET_VXLAN_PORT);
	udp.len_be = htons(sizeof(udp) + sizeof(vx) + PAYLOAD_BYTES);
	udp.csum_be = 0; /* zero, as VXLAN over IPv4 usually is; reflection stays a swap */
	memset(&vx, 0, sizeof(vx));
	vx.flags = VXLAN_FLAG_I;
	vx.vni_rsv_be = htonl((uint32_t)IOD_AR_PROBE_VNI << 8);
	memcpy(buf, &eth, sizeof(eth));
	memcpy(buf + sizeof(eth), &ip, sizeof(ip));
	memcpy(buf + sizeof(eth) + sizeof(ip), &udp, sizeof(udp));
	memcpy(buf + sizeof(eth) + sizeof(ip) + sizeof(udp), &vx, sizeof(vx));
	memset(pl, 0, PAYLOAD_BYTES);
	memcpy(pl, &magic, 4);
	pl[4] = PROBE_VERSION;
	pl[5] = 0;
	pl[6] = p->kind;
	put_u64(pl + 8, p->flow_hash);
	put_u64(pl + 16, p->sent_ns);
	return IOD_AR_PROBE_FRAME_BYTES;
}

/* Offsets of a valid probe's headers and payload, or -EINVAL. */
static int locate(const uint8_t *f, uint32_t len, uint16_t dport, uint32_t *ip_off,
                  uint32_t *pl_off)
{
	struct iod_net_eth eth;
	struct iod_net_ipv4 ip;
	struct iod_net_udp udp;
	struct iod_net_vxlan vx;
	uint32_t magic;
	const uint32_t tail = (uint32_t)(sizeof(udp) + sizeof(vx)) + PAYLOAD_BYTES;

	if (len < sizeof(eth) + sizeof(ip))
		return -EINVAL;
	memcpy(&eth, f, sizeof(eth));
	if (ntohs(eth.type_be) != ETH_IPV4)
		return -EINVAL;
	memcpy(&ip, f + sizeof(eth), sizeof(ip));
	uint32_t ihl = (uint32_t)(ip.ver_ihl & 0x0f) * 4;
	if ((ip.ver_ihl >> 4) != 4 || ihl < sizeof(ip) || ip.proto != IOD_NET_PROTO_UDP ||
	    (ntohs(ip.frag_be) & 0x3fff))
		return -EINVAL;
	uint32_t udp_off = (uint32_t)sizeof(eth) + ihl;
	if (len < udp_off + tail || ntohs(ip.len_be) < ihl + tail ||
	    sizeof(eth) + ntohs(ip.len_be) > len)
		return -EINVAL;
	memcpy(&udp, f + udp_off, sizeof(udp));
	if (ntohs(udp.dport_be) != (dport ? dport : IOD_NET_VXLAN_PORT) || ntohs(udp.len_be) < tail)
		return -EINVAL;
	/* VXLAN with the I flag and the probe VNI: no network uses it */
	memcpy(&vx, f + udp_off + sizeof(udp), sizeof(vx));
	if (!(vx.flags & VXLAN_FLAG_I) || (ntohl(vx.vni_rsv_be) >> 8) != IOD_AR_PROBE_VNI)
		return -EINVAL;
	const uint8_t *pl = f + udp_off + sizeof(udp) + sizeof(vx);
	memcpy(&magic, pl, 4);
	if (ntohl(magic) != PROBE_MAGIC || pl[4] != PROBE_VERSION || pl[6] > IOD_AR_PROBE_PATH)
		return -EINVAL;
	*ip_off = sizeof(eth);
	*pl_off = udp_off + (uint32_t)(sizeof(udp) + sizeof(vx));
	return 0;
}

int iod_ar_probe_frame_parse(const uint8_t *frame, uint32_t len, uint16_t dport, bool *reply,
                             struct iod_ar_probe_reply *out)
{
	uint32_t ip_off, pl_off;
	struct iod_net_ipv4 ip;
	struct iod_net_udp udp;

	if (locate(frame, len, dport, &ip_off, &pl_off))
		return -EINVAL;
	memcpy(&ip, frame + ip_off, sizeof(ip));
	memcpy(&udp, frame + pl_off - sizeof(struct iod_net_vxlan) - sizeof(udp), sizeof(udp));
	const uint8_t *pl = frame + pl_off;
	*reply = (pl[5] & PROBE_REPLY) != 0;
	memset(out, 0, sizeof(*out));
	out->dst = ntohl(ip.src_be); /* a reply comes from the reflecting edge */
	out->sport = ntohs(udp.sport_be);
	out->kind = pl[6];
	out->flow_hash = get_u64(pl + 8);
	out->sent_ns = get_u64(pl + 16);
	return 0;
}

int iod_ar_probe_frame_reflect(uint8_t *frame, uint32_t len, uint16_t dport)
{
	uint32_t ip_off, pl_off;
	uint8_t mac[6];
	uint32_t a;

	if (locate(frame, len, dport, &ip_off, &pl_off) || (frame[pl_off + 5] & PROBE_REPLY))
		return -EINVAL;
	memcpy(mac, frame, 6);
	memmove(frame, frame + 6, 6);
	memcpy(frame + 6, mac, 6);
	/* swapping the addresses leaves the IPv4 checksum valid */
	memcpy(&a, frame + ip_off + 12, 4);
	memmove(frame + ip_off + 12, frame + ip_off + 16, 4);
	memcpy(frame + ip_off + 16, &a, 4);
	frame[pl_off + 5] |= PROBE_REPLY;
	return 0;
}
