/*
 * dns.c: the codec of the proxy's optional DNS responder: answers
 * "<service>.iod" A queries (RFC 1035) with the service's VIP so workloads
 * can call services by name without environment variables.
 *
 * Pure: bytes in, bytes out, names resolved through a callback. It never
 * follows compression pointers in a question (none are allowed there),
 * never reads past the query and never writes past `cap`.
 */
#include "iod/mesh_proto.h"

#include <string.h>

enum { RC_NOERROR = 0, RC_FORMERR = 1, RC_NXDOMAIN = 3, RC_NOTIMP = 4, RC_REFUSED = 5 };

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static int error_reply(const uint8_t *q, uint8_t *out, size_t cap, int rcode, size_t qend)
{
	/* Echo the question when it parsed; else just the header. */
	size_t n = qend ? qend : 12;
	if (cap < n)
		return -ENOSPC;
	memcpy(out, q, n);
	out[2] = (uint8_t)(0x80 | (q[2] & 0x79)); /* QR, opcode, RD kept; AA, TC clear */
	out[3] = (uint8_t)rcode;
	put16(out + 4, qend ? 1 : 0);
	put16(out + 6, 0);
	put16(out + 8, 0);
	put16(out + 10, 0);
	return (int)n;
}

int iod_mesh_dns_answer(const uint8_t *q, size_t qlen, uint8_t *out, size_t cap,
                        iod_mesh_dns_lookup_fn lookup, void *ctx)
{
	char name[256], label0[64];
	size_t pos = 12, nlen = 0;
	uint32_t labels = 0;

	if (qlen < 12 || (q[2] & 0x80))
		return -EINVAL; /* too short, or a response: drop */
	if (((q[2] >> 3) & 0xf) != 0)
		return error_reply(q, out, cap, RC_NOTIMP, 0);
	if (q[4] != 0 || q[5] != 1)
		return error_reply(q, out, cap, RC_FORMERR, 0);
	label0[0] = 0;
	for (;;) {
		if (pos >= qlen)
			return error_reply(q, out, cap, RC_FORMERR, 0);
		uint8_t l = q[pos++];
		if (l == 0)
			break;
		if (l > 63 || pos + l > qlen || nlen + l + 1 > 255)
			return error_reply(q, out, cap, RC_FORMERR, 0); /* incl. pointers */
		if (labels == 0) {
			memcpy(label0, q + pos, l);
			label0[l] = 0;
		}
		if (nlen)
			name[nlen++] = '.';
		for (uint8_t i = 0; i < l; i++) {
			char c = (char)q[pos + i];
			name[nlen++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
		}
		pos += l;
		labels++;
	}
	name[nlen] = 0;
	if (pos + 4 > qlen)
		return error_reply(q, out, cap, RC_FORMERR, 0);
	uint16_t qtype = (uint16_t)(q[pos] << 8 | q[pos + 1]);
	uint16_t qclass = (uint16_t)(q[pos + 2] << 8 | q[pos + 3]);
	size_t qend = pos + 4;
	if (qend > IOD_MESH_DNS_MSG_MAX)
		return error_reply(q, out, cap, RC_FORMERR, 0);
	if (labels != 2 || nlen < 5 || strcmp(name + nlen - 4, ".iod"))
		return error_reply(q, out, cap, RC_REFUSED, qend);
	for (char *c = label0; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	uint32_t ip = lookup(ctx, label0);
	if (!ip)
		return error_reply(q, out, cap, RC_NXDOMAIN, qend);
	bool answer = qclass == 1 && (qtype == 1 || qtype == 255);
	size_t n = qend + (answer ? 16 : 0);
	if (cap < n)
		return -ENOSPC;
	memcpy(out, q, qend);
	out[2] = (uint8_t)(0x84 | (q[2] & 0x01)); /* QR, AA, RD kept */
	out[3] = RC_NOERROR;
	put16(out + 4, 1);
	put16(out + 6, answer ? 1 : 0);
	put16(out + 8, 0);
	put16(out + 10, 0);
	if (answer) {
		uint8_t *a = out + qend;
		put16(a, 0xc00c); /* the name in the question */
		put16(a + 2, 1);  /* A */
		put16(a + 4, 1);  /* IN */
		a[6] = 0;         /* TTL 5 s: VIPs are stable, but services come and go */
		a[7] = 0;
		put16(a + 8, 5);
		put16(a + 10, 4);
		a[12] = (uint8_t)(ip >> 24);
		a[13] = (uint8_t)(ip >> 16);
		a[14] = (uint8_t)(ip >> 8);
		a[15] = (uint8_t)ip;
	}
	return (int)n;
}
