/*
 * traceparent.c: W3C trace-context `traceparent` values (parse, format, new
 * ids), the header the proxy reads and writes on every L7 request.
 *
 * Pure: never allocates, never reads past len; randomness comes from the
 * caller's rng.
 */
#include "iod/mesh_proto.h"

#include <string.h>

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* ---- traceparent ------------------------------------------------------- */

static int hex_field(const char *s, size_t n, uint8_t *out)
{
	bool nonzero = false;
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		/* W3C: lowercase hex only. */
		if (hi < 0 || lo < 0 || (s[2 * i] >= 'A' && s[2 * i] <= 'F') ||
		    (s[2 * i + 1] >= 'A' && s[2 * i + 1] <= 'F'))
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
		nonzero |= out[i] != 0;
	}
	return nonzero ? 0 : -ENODATA;
}

int iod_mesh_traceparent_parse(const char *s, size_t len, struct iod_mesh_traceparent *tp)
{
	uint8_t ver;

	if (len < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-')
		return -EINVAL;
	if (hex_field(s, 1, &ver) == -EINVAL) /* -ENODATA: version 00 */
		return -EINVAL;
	if (ver == 0xff)
		return -EINVAL;
	if (ver == 0 && len != 55)
		return -EINVAL;
	if (len > 55 && s[55] != '-')
		return -EINVAL;
	if (hex_field(s + 3, 16, tp->trace_id) || hex_field(s + 36, 8, tp->span_id))
		return -EINVAL;
	int rc = hex_field(s + 53, 1, &tp->flags);
	if (rc == -EINVAL)
		return -EINVAL;
	if (rc == -ENODATA)
		tp->flags = 0;
	return 0;
}

void iod_mesh_hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = 0;
}

void iod_mesh_traceparent_format(const struct iod_mesh_traceparent *tp, char *buf)
{
	buf[0] = '0';
	buf[1] = '0';
	buf[2] = '-';
	iod_mesh_hex(tp->trace_id, 16, buf + 3);
	buf[35] = '-';
	iod_mesh_hex(tp->span_id, 8, buf + 36);
	buf[52] = '-';
	iod_mesh_hex(&tp->flags, 1, buf + 53);
}

void iod_mesh_trace_ids_new(struct iod_rng *rng, uint8_t *id, size_t len)
{
	bool nonzero;
	do {
		nonzero = false;
		for (size_t i = 0; i < len; i += 8) {
			uint64_t x = iod_rng_next(rng);
			for (size_t k = 0; k < 8 && i + k < len; k++) {
				id[i + k] = (uint8_t)(x >> (8 * k));
				nonzero |= id[i + k] != 0;
			}
		}
	} while (!nonzero);
}
