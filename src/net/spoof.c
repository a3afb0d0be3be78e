/*
 * spoof.c: anti-spoofing of the node's virtual switch's replica ports
 * (pure; include/iod/net.h). Security groups and the tenant default
 * classify a host-side packet by its source address (src/flow/dp.c's
 * "host" pipe, sg.c's entries), so a replica that could send with a
 * neighbour's address would be checked as that neighbour: each replica
 * port is bound to its replica's address and MAC, and what it sends
 * otherwise never reaches the pipeline. A handful of loads and compares
 * per frame, no state; it must never do I/O or read the clock.
 */
#include "iod/net.h"

#include <string.h>

#define ETH_LEN 14
#define IPV4_MIN 20
#define ARP_LEN 28 /* Ethernet/IPv4 ARP (RFC 826) */
#define ARP_OP_REQUEST 1

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

enum iod_net_spoof_verdict iod_net_spoof_check(const struct iod_net_spoof_bind *b,
                                               const uint8_t *frame, uint32_t len)
{
	IOD_ASSERT_HOT(b && (frame || !len));
	if (len < ETH_LEN)
		return IOD_NET_SPOOF_SHORT;
	if (memcmp(frame + 6, b->mac, 6))
		return IOD_NET_SPOOF_SRC_MAC;
	uint16_t type = rd16(frame + 12);
	const uint8_t *l3 = frame + ETH_LEN;
	uint32_t l3_len = len - ETH_LEN;
	switch (type) {
	case IOD_NET_ETH_P_IPV4:
		if (l3_len < IPV4_MIN)
			return IOD_NET_SPOOF_SHORT;
		return rd32(l3 + 12) == b->ip ? IOD_NET_SPOOF_OK : IOD_NET_SPOOF_SRC_IP;
	case IOD_NET_ETH_P_ARP: {
		if (l3_len < ARP_LEN)
			return IOD_NET_SPOOF_SHORT;
		uint32_t spa = rd32(l3 + 14);
		if (memcmp(l3 + 8, b->mac, 6))
			return IOD_NET_SPOOF_ARP;
		if (spa == b->ip || (spa == 0 && rd16(l3 + 6) == ARP_OP_REQUEST))
			return IOD_NET_SPOOF_OK;
		return IOD_NET_SPOOF_ARP;
	}
	case IOD_NET_ETH_P_VLAN:
	case IOD_NET_ETH_P_QINQ:
	case 0x9100: /* the old QinQ outer tag */ return IOD_NET_SPOOF_TAGGED;
	default: return IOD_NET_SPOOF_OK; /* checked by MAC; the pipeline has no entry for it */
	}
}

const char *iod_net_spoof_name(enum iod_net_spoof_verdict v)
{
	static const char *const names[] = {
#define IOD_NET_SPOOF_STR(n, s) s,
	    IOD_NET_SPOOF_VERDICTS(IOD_NET_SPOOF_STR)
#undef IOD_NET_SPOOF_STR
	};
	return (unsigned)v < IOD_NET_SPOOF_N ? names[v] : "?";
}
