/*
 * fuzz_packet.c: libFuzzer target for the packet parser and the functions
 * that read untrusted frames (VXLAN decap, ARP responder, checksum checks).
 * They must never read past the length they are given, whatever the bytes,
 * and the lean parse of common frames must agree with the general parser.
 */
#include "iod/net_debug.h"
#include "iod/net.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[70000];
	struct iod_net_meta m;
	if (size > 65535)
		return 0;
	/* Exact-size heap copy so ASan catches any over-read. */
	uint8_t *f = malloc(size ? size : 1);
	if (!f)
		return 0;
	memcpy(f, data, size);
	/* Both ports: the default and one the input may carry. */
	uint16_t ports[2] = {0, size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0};
	for (int i = 0; i < 2; i++) {
		struct iod_net_meta g;
		int rf = iod_net_parse(f, (uint32_t)size, ports[i], &m);
		int rg = iod_net_parse_general(f, (uint32_t)size, ports[i], &g);
		if (rf != rg || (rf == 0 && !iod_net_meta_equal(&m, &g)))
			abort(); /* the lean parse disagrees with the general one */
	}
	/* anti-spoofing reads the same untrusted frames (a replica's) */
	struct iod_net_spoof_bind sb = {.ip = 0x0ac80102, .mac = {2, 0x1d, 10, 200, 1, 2}};
	if (iod_net_spoof_check(&sb, f, (uint32_t)size) >= IOD_NET_SPOOF_N)
		abort();
	if (iod_net_parse(f, (uint32_t)size, 0, &m) == 0) {
		if (m.flags & IOD_NET_F_L3)
			(void)iod_net_csums_ok(f, (uint32_t)size);
		if (m.key.family == IOD_NET_AF_V4 && !(m.flags & IOD_NET_F_TRUNC)) {
			iod_net_nat_dst(f, &m, 0x0a000001, 80);
			iod_net_nat_src(f, &m, 0x0a000002, 1024);
		}
	}
	uint8_t *p = f;
	uint32_t len = (uint32_t)size, vni;
	(void)iod_net_vxlan_decap(&p, &len, 0, &vni);
	static const uint8_t mac[6] = {2, 0, 0, 0, 0, 1};
	(void)iod_net_arp_reply(f, (uint32_t)size, 0x0a000001, mac, buf, sizeof(buf));
	free(f);
	return 0;
}
