/*
 * traceparent.c: W3C trace-context `traceparent` and `tracestate` values
 * (parse, format, new ids), the headers the proxy reads and writes on every
 * L7 request.
 *
 * Pure: never allocates, never reads past len; randomness comes from the
 * caller's rng.
 */
#include "iod/mesh_proto.h"

#include <string.h>

/* ---- traceparent ------------------------------------------------------- */

static int hex_field(const char *s, size_t n, uint8_t *out)
{
	bool nonzero = false;
	for (size_t i = 0; i < n; i++) {
		int hi = iod_hex_digit(s[2 * i]), lo = iod_hex_digit(s[2 * i + 1]);
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

/* ---- tracestate (W3C Trace Context level 2, section 3.3) --------------- */

static bool ts_keychar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
	       c == '*' || c == '/';
}

/*
 * key = simple-key / multi-tenant-key
 * simple-key = lcalpha 0*255( lcalpha / DIGIT / "_" / "-" / "*" / "/" )
 * multi-tenant-key = tenant-id "@" system-id
 * tenant-id = ( lcalpha / DIGIT ) 0*240( ... ), system-id = lcalpha 0*13( ... )
 */
static bool ts_key_valid(const char *k, size_t n)
{
	const char *at = memchr(k, '@', n);
	for (size_t i = 0; i < n; i++)
		if (k + i != at && !ts_keychar((unsigned char)k[i]))
			return false;
	if (!at)
		return n >= 1 && n <= 256 && k[0] >= 'a' && k[0] <= 'z';
	size_t tn = (size_t)(at - k), sn = n - tn - 1;
	if (tn < 1 || tn > 241 || sn < 1 || sn > 14)
		return false;
	if (!((k[0] >= 'a' && k[0] <= 'z') || (k[0] >= '0' && k[0] <= '9')))
		return false;
	return at[1] >= 'a' && at[1] <= 'z';
}

/* value = 0*255( chr ) nblk-chr; chr = %x20 / nblk-chr;
 * nblk-chr = %x21-2B / %x2D-3C / %x3E-7E */
static bool ts_value_valid(const char *v, size_t n)
{
	if (n < 1 || n > 256 || v[n - 1] == ' ')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];
		if (c < 0x20 || c > 0x7e || c == ',' || c == '=')
			return false;
	}
	return true;
}

int iod_mesh_tracestate_clean(const char *in, size_t len, char *out, size_t cap)
{
	struct {
		size_t off, n; /* the key, in out */
	} keys[IOD_MESH_TRACESTATE_MEMBERS_MAX];
	size_t members = 0, o = 0, i = 0;

	while (i <= len) {
		size_t s = i, e;
		while (i < len && in[i] != ',')
			i++;
		e = i++; /* past the ',' (or len + 1: the end) */
		while (s < e && (in[s] == ' ' || in[s] == '\t'))
			s++;
		while (e > s && (in[e - 1] == ' ' || in[e - 1] == '\t'))
			e--;
		if (s == e)
			continue; /* empty members are allowed and dropped */
		const char *eq = memchr(in + s, '=', e - s);
		if (!eq)
			return -EINVAL;
		size_t kn = (size_t)(eq - (in + s));
		if (!ts_key_valid(in + s, kn) || !ts_value_valid(eq + 1, (size_t)(in + e - eq - 1)))
			return -EINVAL;
		if (members == IOD_MESH_TRACESTATE_MEMBERS_MAX)
			return -EINVAL; /* 33 or more members */
		for (size_t k = 0; k < members; k++)
			if (keys[k].n == kn && !memcmp(out + keys[k].off, in + s, kn))
				return -EINVAL; /* a duplicate key */
		if (o + (o ? 1 : 0) + (e - s) > cap)
			return -E2BIG;
		if (o)
			out[o++] = ',';
		keys[members].off = o;
		keys[members].n = kn;
		members++;
		memcpy(out + o, in + s, e - s);
		o += e - s;
	}
	IOD_ASSERT(o <= cap);
	return (int)o;
}
