/*
 * http.c: HTTP/1.1 message heads (RFC 9112) and body framing for the L7
 * proxy, and W3C trace-context `traceparent` values.
 *
 * The proxy forwards bytes as they are; it only needs to know where a head
 * ends, which headers matter (Content-Length, Transfer-Encoding, Connection,
 * traceparent) and where a body ends. The parser is strict where leniency
 * enables request smuggling: CRLF only, no obs-fold, no whitespace before the
 * colon, one Content-Length value, never Content-Length with chunked. It
 * never allocates, never reads past len, and never writes to the buffer.
 */
#include "iod/mesh.h"

#include <string.h>

static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool ieq(const char *a, size_t alen, const char *lit)
{
	size_t n = strlen(lit);
	if (alen != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = a[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != lit[i])
			return false;
	}
	return true;
}

/* Does the comma-separated token list v contain tok (case-insensitive)? */
static bool list_has(const char *v, size_t len, const char *tok)
{
	size_t i = 0;
	while (i < len) {
		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t s = i;
		while (i < len && v[i] != ',')
			i++;
		size_t e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > s && ieq(v + s, e - s, tok))
			return true;
	}
	return false;
}

/* Parse "HTTP/1.x" at p (8 bytes available). */
static int parse_version(const char *p, uint8_t *minor)
{
	if (memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1'))
		return -EBADMSG;
	*minor = (uint8_t)(p[7] - '0');
	return 0;
}

static int parse_start(const char *b, size_t eol, bool response, struct iod_mesh_http_msg *m)
{
	size_t i = 0;
	if (response) {
		if (eol < 12 || parse_version(b, &m->minor) || b[8] != ' ')
			return -EBADMSG;
		for (i = 9; i < 12; i++)
			if (b[i] < '0' || b[i] > '9')
				return -EBADMSG;
		m->status = (uint16_t)((b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0'));
		if (m->status < 100)
			return -EBADMSG;
		if (eol > 12 && b[12] != ' ')
			return -EBADMSG;
		for (i = 13; i < eol; i++) {
			unsigned char c = (unsigned char)b[i];
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				return -EBADMSG;
		}
		return 0;
	}
	while (i < eol && is_tchar((unsigned char)b[i]))
		i++;
	if (i == 0 || i >= eol || b[i] != ' ' || i > 32)
		return -EBADMSG;
	m->method_off = 0;
	m->method_len = (uint16_t)i;
	size_t t = ++i;
	while (i < eol && (unsigned char)b[i] > 0x20 && (unsigned char)b[i] < 0x7f)
		i++;
	if (i == t || i >= eol || b[i] != ' ')
		return -EBADMSG;
	m->target_off = (uint16_t)t;
	m->target_len = (uint16_t)(i - t);
	i++;
	if (eol - i != 8 || parse_version(b + i, &m->minor))
		return -EBADMSG;
	return 0;
}

static int parse_u64(const char *v, size_t len, uint64_t *out)
{
	uint64_t x = 0;
	if (!len || len > 18)
		return -EBADMSG;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -EBADMSG;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*out = x;
	return 0;
}

static int header(const char *b, struct iod_mesh_http_msg *m, bool *close, bool *ka)
{
	const struct iod_mesh_http_header *h = &m->hdr[m->hdr_n - 1];
	const char *n = b + h->name_off, *v = b + h->value_off;

	if (ieq(n, h->name_len, "content-length")) {
		uint64_t x;
		if (parse_u64(v, h->value_len, &x))
			return -EBADMSG;
		if (m->has_length && x != m->content_length)
			return -EBADMSG;
		m->has_length = true;
		m->content_length = x;
	} else if (ieq(n, h->name_len, "transfer-encoding")) {
		/* Only "chunked" (alone) is supported; anything else is refused
		 * rather than guessed at. */
		if (m->chunked || !ieq(v, h->value_len, "chunked"))
			return -EBADMSG;
		m->chunked = true;
	} else if (ieq(n, h->name_len, "connection")) {
		if (list_has(v, h->value_len, "close"))
			*close = true;
		if (list_has(v, h->value_len, "keep-alive"))
			*ka = true;
	} else if (ieq(n, h->name_len, "traceparent")) {
		m->traceparent = (int)(m->hdr_n - 1);
	} else if (ieq(n, h->name_len, "expect")) {
		if (ieq(v, h->value_len, "100-continue"))
			m->expect_continue = true;
	}
	return 0;
}

int iod_mesh_http_parse(const char *buf, size_t len, bool response, struct iod_mesh_http_msg *m)
{
	size_t pos = 0, lim = IOD_MIN(len, (size_t)IOD_MESH_HTTP_BUF);
	bool start = true, close = false, ka = false;
	int rc;

	memset(m, 0, offsetof(struct iod_mesh_http_msg, hdr));
	m->hdr_n = 0; /* after hdr[], not covered by the memset */
	m->is_response = response;
	m->traceparent = -1;
	for (;;) {
		/* Find the end of this line. */
		size_t eol = pos;
		while (eol < lim && buf[eol] != '\r' && buf[eol] != '\n')
			eol++;
		if (eol >= lim)
			return len >= IOD_MESH_HTTP_BUF ? -E2BIG : -EAGAIN;
		if (buf[eol] != '\r')
			return -EBADMSG; /* bare LF */
		if (eol + 1 >= lim)
			return len >= IOD_MESH_HTTP_BUF ? -E2BIG : -EAGAIN;
		if (buf[eol + 1] != '\n')
			return -EBADMSG; /* bare CR */
		if (start) {
			if ((rc = parse_start(buf, eol, response, m)))
				return rc;
			start = false;
		} else if (eol == pos) {
			m->head_len = (uint32_t)(eol + 2);
			break;
		} else {
			size_t i = pos;
			while (i < eol && is_tchar((unsigned char)buf[i]))
				i++;
			if (i == pos || i >= eol || buf[i] != ':')
				return -EBADMSG; /* empty name, obs-fold, space before ':' */
			if (m->hdr_n >= IOD_MESH_HTTP_HEADERS_MAX)
				return -E2BIG;
			struct iod_mesh_http_header *h = &m->hdr[m->hdr_n++];
			h->name_off = (uint16_t)pos;
			h->name_len = (uint16_t)(i - pos);
			i++;
			while (i < eol && (buf[i] == ' ' || buf[i] == '\t'))
				i++;
			size_t ve = eol;
			while (ve > i && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
				ve--;
			for (size_t k = i; k < ve; k++) {
				unsigned char c = (unsigned char)buf[k];
				if ((c < 0x20 && c != '\t') || c == 0x7f)
					return -EBADMSG;
			}
			h->value_off = (uint16_t)i;
			h->value_len = (uint16_t)(ve - i);
			if ((rc = header(buf, m, &close, &ka)))
				return rc;
		}
		pos = eol + 2;
	}
	if (m->chunked && m->has_length)
		return -EBADMSG;
	if (m->chunked && m->minor == 0)
		return -EBADMSG;
	m->keep_alive = m->minor == 1 ? !close : (ka && !close);
	IOD_ASSERT_HOT(m->head_len <= lim);
	return 0;
}

enum {
	CH_SIZE,
	CH_EXT,
	CH_SIZE_LF,
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_TR_START,
	CH_TR_LINE,
	CH_TR_LF,
	CH_END_LF
};

/* Longest chunk-size line or trailer line we accept. */
#define CHUNK_LINE_MAX 4096

void iod_mesh_http_body_init(struct iod_mesh_http_body *b, const struct iod_mesh_http_msg *m,
                             const char *buf, const char *method, size_t method_len)
{
	IOD_UNUSED(buf);
	memset(b, 0, sizeof(*b));
	if (m->is_response) {
		bool head = method && method_len == 4 && !memcmp(method, "HEAD", 4);
		if (head || m->status < 200 || m->status == 204 || m->status == 304) {
			b->kind = IOD_MESH_BODY_NONE;
			return;
		}
	}
	if (m->chunked) {
		b->kind = IOD_MESH_BODY_CHUNKED;
		b->state = CH_SIZE;
	} else if (m->has_length) {
		b->kind = m->content_length ? IOD_MESH_BODY_LENGTH : IOD_MESH_BODY_NONE;
		b->remaining = m->content_length;
	} else {
		b->kind = m->is_response ? IOD_MESH_BODY_CLOSE : IOD_MESH_BODY_NONE;
	}
}

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

int64_t iod_mesh_http_body_feed(struct iod_mesh_http_body *b, const char *p, size_t len, bool *done)
{
	return iod_mesh_http_body_decode(b, p, len, done, NULL, NULL);
}

int64_t iod_mesh_http_body_decode(struct iod_mesh_http_body *b, const char *p, size_t len,
                                  bool *done, iod_mesh_http_data_fn data, void *ctx)
{
	size_t i = 0;

	*done = false;
	switch (b->kind) {
	case IOD_MESH_BODY_NONE: *done = true; return 0;
	case IOD_MESH_BODY_CLOSE:
		if (data && len)
			data(ctx, p, len);
		return (int64_t)len;
	case IOD_MESH_BODY_LENGTH: {
		uint64_t take = IOD_MIN((uint64_t)len, b->remaining);
		b->remaining -= take;
		*done = b->remaining == 0;
		if (data && take)
			data(ctx, p, (size_t)take);
		return (int64_t)take;
	}
	case IOD_MESH_BODY_CHUNKED: break;
	}
	while (i < len) {
		char c = p[i];
		switch (b->state) {
		case CH_SIZE: {
			int h = hexval(c);
			if (h >= 0) {
				if (b->line_n >= 15)
					return -EBADMSG; /* > 2^60 bytes: refuse */
				b->remaining = b->remaining * 16 + (uint64_t)h;
				b->line_n++;
			} else if (b->line_n == 0) {
				return -EBADMSG;
			} else if (c == ';' || c == ' ' || c == '\t') {
				b->state = CH_EXT;
			} else if (c == '\r') {
				b->state = CH_SIZE_LF;
			} else {
				return -EBADMSG;
			}
			break;
		}
		case CH_EXT:
			if (++b->line_n > CHUNK_LINE_MAX)
				return -EBADMSG;
			if (c == '\r')
				b->state = CH_SIZE_LF;
			else if (c == '\n')
				return -EBADMSG;
			break;
		case CH_SIZE_LF:
			if (c != '\n')
				return -EBADMSG;
			b->line_n = 0;
			b->state = b->remaining ? CH_DATA : CH_TR_START;
			break;
		case CH_DATA: {
			uint64_t take = IOD_MIN((uint64_t)(len - i), b->remaining);
			if (data && take)
				data(ctx, p + i, (size_t)take);
			b->remaining -= take;
			i += (size_t)take;
			if (!b->remaining)
				b->state = CH_DATA_CR;
			continue;
		}
		case CH_DATA_CR:
			if (c != '\r')
				return -EBADMSG;
			b->state = CH_DATA_LF;
			break;
		case CH_DATA_LF:
			if (c != '\n')
				return -EBADMSG;
			b->state = CH_SIZE;
			b->line_n = 0;
			break;
		case CH_TR_START:
			if (c == '\r') {
				b->state = CH_END_LF;
			} else if (c == '\n') {
				return -EBADMSG;
			} else {
				b->line_n = 1;
				b->state = CH_TR_LINE;
			}
			break;
		case CH_TR_LINE:
			if (++b->line_n > CHUNK_LINE_MAX || c == '\n')
				return -EBADMSG;
			if (c == '\r')
				b->state = CH_TR_LF;
			break;
		case CH_TR_LF:
			if (c != '\n')
				return -EBADMSG;
			b->state = CH_TR_START;
			break;
		case CH_END_LF:
			if (c != '\n')
				return -EBADMSG;
			*done = true;
			return (int64_t)(i + 1);
		default: return -EBADMSG;
		}
		i++;
	}
	return (int64_t)i;
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
