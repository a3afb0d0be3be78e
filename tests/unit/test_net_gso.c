/*
 * test_net_gso.c: unit tests for net/gso.c: a TCP/IPv4 super-frame split
 * into segments (boundaries, sequence numbers, ids, flags, checksums, the
 * bytes in order) and segments coalesced back (which runs merge, which
 * stop one, the merged header and its partial checksum).
 */
#include "harness.h"
#include "iod/net_debug.h"
#include "iod/net.h"

#include <stdlib.h>

#define HDRS (14 + 20 + 32) /* Ethernet, IPv4, TCP with 12 bytes of options */
#define SEQ0 0xfffff000u    /* wraps inside the super-frame */

/* A super-frame as a replica's TCP hands it to its veth (total length set,
 * the TCP checksum a partial one: here garbage, the segmenter must not
 * trust it). */
static uint32_t super_frame(uint8_t *f, uint32_t payload, uint8_t flags)
{
	memset(f, 0, HDRS);
	memcpy(f, "\x02\x1d\x0a\xc8\x02\x02\x02\x1d\x0a\xc8\x01\x02\x08\x00", 14);
	uint8_t *ip = f + 14, *th = ip + 20;
	ip[0] = 0x45;
	iod_net_put16(ip + 2, (uint16_t)(20 + 32 + payload));
	iod_net_put16(ip + 4, 0xfffe); /* the id wraps too */
	iod_net_put16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;
	ip[9] = IOD_NET_PROTO_TCP;
	iod_net_put32(ip + 12, 0x0ac80102);
	iod_net_put32(ip + 16, 0x0ac80202);
	iod_net_put16(th, 40000);
	iod_net_put16(th + 2, 5201);
	iod_net_put32(th + 4, SEQ0);
	iod_net_put32(th + 8, 777);
	th[12] = 8 << 4;
	th[13] = flags;
	iod_net_put16(th + 14, 502);
	iod_net_put16(th + 16, 0xbeef);
	memcpy(th + 20, "\x01\x01\x08\x0a\x00\x00\x00\x01\x00\x00\x00\x02", 12);
	for (uint32_t i = 0; i < payload; i++)
		f[HDRS + i] = (uint8_t)(i * 7 + i / 251);
	return HDRS + payload;
}

TEST(gso_segments_boundaries_seq_flags_checksums)
{
	static uint8_t f[70000], seg[2048], back[70000];
	const uint32_t payload = 65000, mss = 1348;
	uint32_t len = super_frame(
	    f, payload, IOD_NET_TCP_ACK | IOD_NET_TCP_PSH | IOD_NET_TCP_FIN | 0x80 /* CWR */);
	struct iod_net_gso g;
	CHECK_EQ(iod_net_gso_plan(f, len, (uint16_t)mss, &g), 0);
	CHECK_EQ(g.hdr_len, HDRS);
	CHECK_EQ(g.payload, payload);
	CHECK_EQ(g.segs, (payload + mss - 1) / mss);
	uint32_t got = 0;
	for (uint32_t k = 0; k < g.segs; k++) {
		uint32_t n = iod_net_gso_segment(f, &g, k, seg, sizeof(seg));
		uint32_t want = k + 1 < g.segs ? mss : payload - k * mss;
		CHECK_EQ(n, HDRS + want);
		CHECK(iod_net_csums_ok(seg, n));
		CHECK_EQ(iod_net_be16(seg + 16), 20 + 32 + want);         /* IP length */
		CHECK_EQ(iod_net_be16(seg + 18), (uint16_t)(0xfffe + k)); /* IP id */
		CHECK_EQ(iod_net_be32(seg + 14 + 20 + 4), (uint32_t)(SEQ0 + k * mss)); /* seq */
		uint8_t fl = seg[14 + 20 + 13];
		CHECK_EQ(fl & IOD_NET_TCP_ACK, IOD_NET_TCP_ACK);
		CHECK_EQ(!!(fl & (IOD_NET_TCP_PSH | IOD_NET_TCP_FIN)), k + 1 == g.segs);
		CHECK_EQ(!!(fl & 0x80), k == 0);
		CHECK(memcmp(seg + 14 + 20 + 20, f + 14 + 20 + 20, 12) == 0); /* options kept */
		memcpy(back + got, seg + HDRS, want);
		got += want;
	}
	CHECK_EQ(got, payload);
	CHECK(memcmp(back, f + HDRS, payload) == 0);
	CHECK_EQ(iod_net_gso_segment(f, &g, g.segs, seg, sizeof(seg)), 0);
	CHECK_EQ(iod_net_gso_segment(f, &g, 0, seg, HDRS + mss - 1), 0); /* does not fit */
}

TEST(gso_plan_refuses_what_it_cannot_segment)
{
	static uint8_t f[4096];
	struct iod_net_gso g;
	uint32_t len = super_frame(f, 3000, IOD_NET_TCP_ACK);
	CHECK_EQ(iod_net_gso_plan(f, len, 0, &g), -EINVAL);
	CHECK_EQ(iod_net_gso_plan(f, HDRS - 1, 1000, &g), -EINVAL); /* options cut */
	f[14 + 9] = 47;                                             /* GRE */
	CHECK_EQ(iod_net_gso_plan(f, len, 1000, &g), -EINVAL);
	f[14 + 9] = IOD_NET_PROTO_TCP;
	f[12] = 0x86; /* IPv6 EtherType */
	CHECK_EQ(iod_net_gso_plan(f, len, 1000, &g), -EINVAL);
	f[12] = 0x08;
	iod_net_put16(f + 20, 0x2000); /* more fragments */
	CHECK_EQ(iod_net_gso_plan(f, len, 1000, &g), -EINVAL);
	iod_net_put16(f + 20, 0x4000);
	CHECK_EQ(iod_net_gso_plan(f, len, 1000, &g), 0);
	CHECK_EQ(g.segs, 3u);
	/* a pure ACK is one segment */
	len = super_frame(f, 0, IOD_NET_TCP_ACK);
	CHECK_EQ(iod_net_gso_plan(f, len, 1000, &g), 0);
	CHECK_EQ(g.segs, 1u);
	uint8_t seg[256];
	CHECK_EQ(iod_net_gso_segment(f, &g, 0, seg, sizeof(seg)), (uint32_t)HDRS);
	CHECK(iod_net_csums_ok(seg, HDRS));
}

/* A UDP socket's UDP_SEGMENT super-frame (gso UDP_L4) splits into
 * datagrams of gso_size payload, each with its own UDP length and a valid
 * checksum, the IP id counting up, the payload in order; the last one
 * shorter. Before, the switch dropped such frames (rx_nobuf). */
TEST(gso_splits_udp_segment_super_frames)
{
	static uint8_t f[70000], seg[2048], back[70000];
	const uint32_t payload = 20000, size = 1400, hdrs = 14 + 20 + 8;
	memset(f, 0, hdrs);
	memcpy(f, "\x02\x1d\x0a\xc8\x02\x02\x02\x1d\x0a\xc8\x01\x02\x08\x00", 14);
	uint8_t *ip = f + 14, *uh = ip + 20;
	ip[0] = 0x45;
	iod_net_put16(ip + 2, (uint16_t)(20 + 8 + payload));
	iod_net_put16(ip + 4, 100);
	ip[8] = 64;
	ip[9] = IOD_NET_PROTO_UDP;
	iod_net_put32(ip + 12, 0x0ac80102);
	iod_net_put32(ip + 16, 0x0ac80202);
	iod_net_put16(uh, 40000);
	iod_net_put16(uh + 2, 4433);
	iod_net_put16(uh + 4, (uint16_t)(8 + payload));
	iod_net_put16(uh + 6, 0x1234); /* a partial sum: not trusted */
	for (uint32_t i = 0; i < payload; i++)
		f[hdrs + i] = (uint8_t)(i * 13 + i / 253);
	struct iod_net_gso g;
	CHECK_EQ(iod_net_gso_plan(f, hdrs + payload, (uint16_t)size, &g), 0);
	CHECK_EQ(g.proto, IOD_NET_PROTO_UDP);
	CHECK_EQ(g.hdr_len, hdrs);
	CHECK_EQ(g.segs, (payload + size - 1) / size);
	uint32_t got = 0;
	for (uint32_t k = 0; k < g.segs; k++) {
		uint32_t n = iod_net_gso_segment(f, &g, k, seg, sizeof(seg));
		uint32_t want = k + 1 < g.segs ? size : payload - k * size;
		CHECK_EQ(n, hdrs + want);
		CHECK(iod_net_csums_ok(seg, n));
		CHECK(iod_net_be16(seg + 14 + 20 + 6) != 0);           /* a checksum, not "none" */
		CHECK_EQ(iod_net_be16(seg + 16), 20 + 8 + want);       /* IP length */
		CHECK_EQ(iod_net_be16(seg + 18), (uint16_t)(100 + k)); /* IP id */
		CHECK_EQ(iod_net_be16(seg + 14 + 20 + 4), 8 + want);   /* UDP length */
		CHECK_EQ(iod_net_be16(seg + 14 + 20 + 2), 4433);       /* ports kept */
		memcpy(back + got, seg + hdrs, want);
		got += want;
	}
	CHECK_EQ(got, payload);
	CHECK(memcmp(back, f + hdrs, payload) == 0);
	/* a UDP frame cut inside its header is refused */
	CHECK_EQ(iod_net_gso_plan(f, 14 + 20 + 7, (uint16_t)size, &g), -EINVAL);
}

/* Segments of a super-frame, each in its own buffer (as pool buffers). */
static uint32_t segments(uint8_t *f, uint32_t len, uint32_t mss, uint8_t **out, uint32_t *lens)
{
	struct iod_net_gso g;
	if (iod_net_gso_plan(f, len, (uint16_t)mss, &g))
		return 0;
	for (uint32_t k = 0; k < g.segs; k++) {
		out[k] = malloc(2048);
		lens[k] = iod_net_gso_segment(f, &g, k, out[k], 2048);
	}
	return g.segs;
}

/* The merged frame as the receiving stack sees it: first's headers and
 * every payload in order, its checksum finished from the partial one as a
 * NIC would (sum from csum_start over the rest). */
static uint32_t merged(uint8_t *const *s, const uint32_t *lens, uint32_t n,
                       const struct iod_net_vnet_hdr *h, uint8_t *out)
{
	uint32_t len = lens[0];
	memcpy(out, s[0], len);
	for (uint32_t k = 1; k < n; k++) {
		memcpy(out + len, s[k] + h->hdr_len, lens[k] - h->hdr_len);
		len += lens[k] - h->hdr_len;
	}
	uint8_t *c = out + h->csum_start + h->csum_offset;
	uint16_t v =
	    iod_net_csum_fold(iod_net_csum_add(0, out + h->csum_start, len - h->csum_start));
	iod_net_put16(c, v);
	return len;
}

TEST(gro_merges_a_run_and_the_result_checks)
{
	static uint8_t f[70000], m[70000];
	uint8_t *s[64];
	uint32_t lens[64];
	const uint32_t payload = 40000, mss = 1348;
	uint32_t n =
	    segments(f, super_frame(f, payload, IOD_NET_TCP_ACK | IOD_NET_TCP_PSH), mss, s, lens);
	CHECK_EQ(n, 30u);
	CHECK_EQ(iod_net_gro_run(s, lens, n, 65535), n);
	/* the size limit cuts a run on a segment boundary */
	CHECK_EQ(iod_net_gro_run(s, lens, n, 20 + 32 + 10 * mss), 10u);
	uint32_t pay = 0;
	for (uint32_t k = 0; k < n; k++)
		pay += lens[k] - HDRS;
	struct iod_net_vnet_hdr h;
	iod_net_gro_finish(s[0], lens[0], s[n - 1], lens[n - 1], n, pay, &h);
	CHECK_EQ(h.gso_type, IOD_NET_VNET_GSO_TCPV4);
	CHECK_EQ(h.flags, IOD_NET_VNET_F_NEEDS_CSUM);
	CHECK_EQ(h.gso_size, mss);
	CHECK_EQ(h.hdr_len, HDRS);
	CHECK_EQ(h.csum_start, 34);
	CHECK_EQ(h.csum_offset, 16);
	uint32_t len = merged(s, lens, n, &h, m);
	CHECK_EQ(len, HDRS + payload);
	CHECK(iod_net_csums_ok(m, len));
	CHECK(memcmp(m + HDRS, f + HDRS, payload) == 0);
	CHECK_EQ(iod_net_be32(m + 34 + 4), SEQ0);
	CHECK_EQ(m[34 + 13], IOD_NET_TCP_ACK | IOD_NET_TCP_PSH); /* PSH of the last */
	for (uint32_t k = 0; k < n; k++)
		free(s[k]);
}

TEST(gro_stops_at_what_must_not_merge)
{
	static uint8_t f[70000];
	uint8_t *s[64];
	uint32_t lens[64];
	const uint32_t mss = 1000;
	uint32_t n = segments(f, super_frame(f, 10 * mss, IOD_NET_TCP_ACK), mss, s, lens);
	CHECK_EQ(n, 10u);
	CHECK_EQ(iod_net_gro_run(s, lens, n, 65535), 10u);
	CHECK_EQ(iod_net_gro_run(s, lens, 1, 65535), 1u);
	/* out of order: 0 1 3 */
	uint8_t *t = s[2];
	s[2] = s[3];
	CHECK_EQ(iod_net_gro_run(s, lens, n, 65535), 2u);
	s[2] = t;
	/* a bad checksum on segment 4 */
	s[4][HDRS + 5] ^= 1;
	CHECK_EQ(iod_net_gro_run(s, lens, n, 65535), 4u);
	s[4][HDRS + 5] ^= 1;
	/* another port on segment 6 (its checksum right) */
	iod_net_put16(s[6] + 34, 40001);
	s[6][34 + 16] = s[6][34 + 17] = 0;
	iod_net_put16(s[6] + 34 + 16, iod_net_l4_csum_v4((const void *)(s[6] + 14), s[6] + 34,
	                                                 (uint16_t)(lens[6] - 34)));
	CHECK(iod_net_csums_ok(s[6], lens[6]));
	CHECK_EQ(iod_net_gro_run(s, lens, n, 65535), 6u);
	/* a segment that starts with another flag cannot start a run */
	CHECK_EQ(iod_net_gro_run(s + 6, lens + 6, 4, 65535), 1u);
	for (uint32_t k = 0; k < n; k++)
		free(s[k]);
	/* a short segment ends a run (it is included) */
	n = segments(f, super_frame(f, 2 * mss + 10, IOD_NET_TCP_ACK), mss, s, lens);
	CHECK_EQ(n, 3u);
	uint8_t *r[4] = {s[0], s[1], s[2], s[0]};
	uint32_t rl[4] = {lens[0], lens[1], lens[2], lens[0]};
	CHECK_EQ(iod_net_gro_run(r, rl, 4, 65535), 3u);
	/* a short first segment does not merge what follows */
	CHECK_EQ(iod_net_gro_run(r + 2, rl + 2, 2, 65535), 1u);
	for (uint32_t k = 0; k < n; k++)
		free(s[k]);
	/* segs 1: the frame is left alone, no GSO */
	struct iod_net_vnet_hdr h;
	uint32_t len = super_frame(f, 100, IOD_NET_TCP_ACK);
	uint8_t copy[200];
	memcpy(copy, f, len);
	iod_net_gro_finish(f, len, f, len, 1, 100, &h);
	CHECK_EQ(h.gso_type, IOD_NET_VNET_GSO_NONE);
	CHECK(memcmp(copy, f, len) == 0);
}

TEST(gso_then_gro_fuzzed_lengths)
{
	static uint8_t f[70000], m[70000];
	uint8_t *s[700];
	uint32_t lens[700];
	uint32_t x = 12345;
	for (int it = 0; it < 40; it++) {
		x = x * 1103515245u + 12345u;
		uint32_t payload = 1 + (x >> 8) % 65000, mss = 88 + (x >> 3) % 1400;
		uint32_t n = segments(f, super_frame(f, payload, IOD_NET_TCP_ACK), mss, s, lens);
		CHECK(n >= 1);
		uint32_t k = 0, pay = 0;
		while (k < n) { /* the runs cover every segment, in order */
			uint32_t r = iod_net_gro_run(s + k, lens + k, n - k, 65535);
			CHECK(r >= 1 && k + r <= n);
			struct iod_net_vnet_hdr h;
			uint32_t rp = 0;
			for (uint32_t j = k; j < k + r; j++)
				rp += lens[j] - HDRS;
			iod_net_gro_finish(s[k], lens[k], s[k + r - 1], lens[k + r - 1], r, rp, &h);
			if (r > 1) {
				uint32_t len = merged(s + k, lens + k, r, &h, m);
				CHECK(iod_net_csums_ok(m, len));
				CHECK(memcmp(m + HDRS, f + HDRS + pay, rp) == 0);
			} else {
				CHECK(iod_net_csums_ok(s[k], lens[k]));
			}
			pay += rp;
			k += r;
		}
		CHECK_EQ(pay, payload);
		for (uint32_t j = 0; j < n; j++)
			free(s[j]);
	}
}

/* A UDP/IPv4 super-frame of payload bytes (the UDP checksum garbage). */
static uint32_t udp_super(uint8_t *f, uint32_t payload)
{
	const uint32_t hdrs = 14 + 20 + 8;
	memset(f, 0, hdrs);
	memcpy(f, "\x02\x1d\x0a\xc8\x02\x02\x02\x1d\x0a\xc8\x01\x02\x08\x00", 14);
	uint8_t *ip = f + 14, *uh = ip + 20;
	ip[0] = 0x45;
	iod_net_put16(ip + 2, (uint16_t)(20 + 8 + payload));
	iod_net_put16(ip + 4, 7);
	ip[8] = 64;
	ip[9] = IOD_NET_PROTO_UDP;
	iod_net_put32(ip + 12, 0x0a000101);
	iod_net_put32(ip + 16, 0x0a000201);
	iod_net_put16(uh, 50123);
	iod_net_put16(uh + 2, 4789);
	iod_net_put16(uh + 4, (uint16_t)(8 + payload));
	iod_net_put16(uh + 6, 0x5555);
	for (uint32_t i = 0; i < payload; i++)
		f[hdrs + i] = (uint8_t)(i * 11 + i / 241);
	return hdrs + payload;
}

/* The fabric port's UDP coalescing: VXLAN-sized datagrams of one flow merge
 * into one UDP_SEGMENT super-frame whose segmentation gives back every
 * datagram byte for byte (checksums computed), and what must not merge
 * stops the run. */
TEST(udp_gro_merges_datagrams_into_one_udp_segment_frame)
{
	static uint8_t f[70000], m[70000], seg[2048];
	const uint32_t size = 1414, payload = 10 * size + 300, hdrs = 14 + 20 + 8;
	uint32_t len = udp_super(f, payload);
	uint8_t *s[16];
	uint32_t lens[16];
	uint32_t n = segments(f, len, size, s, lens);
	CHECK_EQ(n, 11);
	/* keep a copy of each datagram as sent: the first is rewritten */
	uint8_t *orig[16] = {0};
	for (uint32_t k = 0; k < n; k++) {
		orig[k] = malloc(2048);
		memcpy(orig[k], s[k], lens[k]);
	}
	CHECK_EQ(iod_net_udp_gro_run(s, lens, n, 0xffff, 64), n);
	CHECK_EQ(iod_net_udp_gro_run(s, lens, n, 0xffff, 4), 4);             /* at most max_segs */
	CHECK_EQ(iod_net_udp_gro_run(s, lens, n, 20 + 8 + 3 * size, 64), 3); /* max_l3 */
	struct iod_net_vnet_hdr h;
	iod_net_udp_gro_finish(s[0], lens[0], n, payload, &h);
	CHECK_EQ(h.gso_type, IOD_NET_VNET_GSO_UDP_L4);
	CHECK_EQ(h.gso_size, size);
	CHECK_EQ(h.hdr_len, hdrs);
	CHECK_EQ(h.csum_start, 14 + 20);
	CHECK_EQ(h.csum_offset, 6);
	CHECK(h.flags & IOD_NET_VNET_F_NEEDS_CSUM);
	uint32_t ml = merged(s, lens, n, &h, m);
	CHECK_EQ(ml, hdrs + payload);
	CHECK_EQ(iod_net_be16(m + 16), 20 + 8 + payload);     /* IP length */
	CHECK_EQ(iod_net_be16(m + 14 + 20 + 4), 8 + payload); /* UDP length */
	CHECK(iod_net_csums_ok(m, ml));
	CHECK(memcmp(m + hdrs, f + hdrs, payload) == 0);
	/* what the receiving switch does with it: the datagrams back */
	struct iod_net_gso g;
	CHECK_EQ(iod_net_gso_plan(m, ml, h.gso_size, &g), 0);
	CHECK_EQ(g.segs, n);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t l = iod_net_gso_segment(m, &g, k, seg, sizeof(seg));
		CHECK_EQ(l, lens[k]);
		CHECK(memcmp(seg, orig[k], l) == 0);
	}
	for (uint32_t k = 0; k < n; k++) {
		free(s[k]);
		free(orig[k]);
	}
}

TEST(udp_gro_stops_at_what_must_not_merge)
{
	static uint8_t f[70000];
	const uint32_t size = 1000;
	uint32_t len = udp_super(f, 6 * size);
	uint8_t *s[8];
	uint32_t lens[8];
	uint32_t n = segments(f, len, size, s, lens);
	CHECK_EQ(n, 6);
	/* another source port (another inner flow's hash) starts a new run */
	iod_net_put16(s[3] + 34, 50124);
	CHECK_EQ(iod_net_udp_gro_run(s, lens, n, 0xffff, 64), 3);
	iod_net_put16(s[3] + 34, 50123);
	/* another destination MAC */
	s[2][0] ^= 1;
	CHECK_EQ(iod_net_udp_gro_run(s, lens, n, 0xffff, 64), 2);
	s[2][0] ^= 1;
	/* a shorter datagram ends the run, and is its last */
	uint32_t short_len = lens[1] - 100;
	iod_net_put16(s[1] + 16, (uint16_t)(short_len - 14));
	iod_net_put16(s[1] + 34 + 4, (uint16_t)(short_len - 34));
	lens[1] = short_len;
	CHECK_EQ(iod_net_udp_gro_run(s, lens, n, 0xffff, 64), 2);
	/* a longer one after the first does not join */
	CHECK_EQ(iod_net_udp_gro_run(s + 1, lens + 1, n - 1, 0xffff, 64), 1);
	/* TCP does not start a UDP run; nor does one frame */
	CHECK_EQ(iod_net_udp_gro_run(s, lens, 1, 0xffff, 64), 1);
	s[0][14 + 9] = IOD_NET_PROTO_TCP;
	CHECK_EQ(iod_net_udp_gro_run(s, lens, n, 0xffff, 64), 1);
	for (uint32_t k = 0; k < n; k++)
		free(s[k]);
}
