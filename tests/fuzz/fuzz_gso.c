/*
 * fuzz_gso.c: libFuzzer target for net/gso.c, which reads the headers of
 * frames a replica (untrusted) hands its veth: the segmenter's plan and
 * segments, and both coalescers (TCP, and the fabric port's UDP) over them
 * and over the raw input. Never a
 * read past the given length, every segment within its buffer, and the
 * segments of a plan carry the whole payload.
 */
#include "iod/net.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t seg[64][2048];
	if (size < 2 || size > 65536 + 64)
		return 0;
	uint16_t gso_size = (uint16_t)(data[0] << 8 | data[1]);
	uint32_t len = (uint32_t)size - 2;
	/* Exact-size heap copy so ASan catches any over-read. */
	uint8_t *f = malloc(len ? len : 1);
	if (!f)
		return 0;
	memcpy(f, data + 2, len);
	struct iod_net_gso g;
	uint8_t *s[64];
	uint32_t lens[64], n = 0;
	if (iod_net_gso_plan(f, len, gso_size, &g) == 0) {
		uint32_t pay = 0;
		for (uint32_t k = 0; k < g.segs && k < 64; k++) {
			uint32_t l = iod_net_gso_segment(f, &g, k, seg[k], sizeof(seg[k]));
			if (!l)
				break;
			if (l > sizeof(seg[k]) || l < g.hdr_len)
				abort();
			pay += l - g.hdr_len;
			s[n] = seg[k];
			lens[n++] = l;
		}
		if (n == g.segs && pay != g.payload)
			abort(); /* the segments lost or invented payload */
	}
	/* the coalescer over the segments and over the input itself */
	for (uint32_t k = 0; k < n;) {
		uint32_t r = iod_net_gro_run(s + k, lens + k, n - k, 0xffffu);
		if (r < 1 || k + r > n)
			abort();
		k += r;
	}
	for (uint32_t k = 0; k < n;) {
		uint32_t r = iod_net_udp_gro_run(s + k, lens + k, n - k, 0xffffu, 64);
		if (r < 1 || k + r > n)
			abort();
		k += r;
	}
	uint8_t *one[2] = {f, f};
	uint32_t ol[2] = {len, len};
	uint32_t r = iod_net_gro_run(one, ol, 2, 0xffffu);
	if (r < 1 || r > 2)
		abort();
	struct iod_net_vnet_hdr h;
	iod_net_gro_finish(f, len, f, len, r, 0, &h);
	r = iod_net_udp_gro_run(one, ol, 2, 0xffffu, 64);
	if (r < 1 || r > 2)
		abort();
	iod_net_udp_gro_finish(f, len, r, 0, &h);
	free(f);
	return 0;
}
