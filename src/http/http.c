/*
 * http.c: HTTP/1.1 message heads (RFC 9112) and body framing: the pure
 * codec of iod's one HTTP layer (include/iod/http.h), used by the L7 proxy,
 * the test backend and the fuzz target.
 *
 * The proxy forwards bytes as they are; it only needs to know where a head
 * ends, which headers matter (Content-Length, Transfer-Encoding, Connection,
 * traceparent) and where a body ends. The parser is strict where leniency
 * enables request smuggling: CRLF only, no obs-fold, no whitespace before the
 * colon, one Content-Length value, never Content-Length with chunked,
 * exactly one Host in an HTTP/1.1 request, chunk lines to the grammar. It
 * never allocates, never reads past len, and never writes to the buffer.
 */
#include "iod/http.h"

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

static int parse_start(const char *b, size_t eol, bool response, struct iod_http_msg *m)
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

static int header(const char *b, struct iod_http_msg *m, bool *close, bool *ka)
{
	const struct iod_http_header *h = &m->hdr[m->hdr_n - 1];
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
	} else if (ieq(n, h->name_len, "host")) {
		/* RFC 9112 section 3.2: more than one Host is a 400. */
		if (m->has_host && !m->is_response)
			return -EBADMSG;
		m->has_host = true;
	} else if (ieq(n, h->name_len, "traceparent")) {
		m->traceparent = (int)(m->hdr_n - 1);
		if (m->traceparent_n < UINT8_MAX)
			m->traceparent_n++;
	} else if (ieq(n, h->name_len, "tracestate")) {
		if (m->tracestate_n < UINT8_MAX)
			m->tracestate_n++;
	} else if (ieq(n, h->name_len, "expect")) {
		if (ieq(v, h->value_len, "100-continue"))
			m->expect_continue = true;
	}
	return 0;
}

bool iod_http_header_is(const char *buf, const struct iod_http_header *h, const char *lower_name)
{
	return ieq(buf + h->name_off, h->name_len, lower_name);
}

int iod_http_parse(const char *buf, size_t len, bool response, struct iod_http_msg *m)
{
	size_t pos = 0, lim = IOD_MIN(len, (size_t)IOD_MESH_HTTP_BUF);
	bool start = true, close = false, ka = false;
	int rc;

	memset(m, 0, offsetof(struct iod_http_msg, hdr));
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
			if (m->hdr_n >= IOD_HTTP_HEADERS_MAX)
				return -E2BIG;
			struct iod_http_header *h = &m->hdr[m->hdr_n++];
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
	if (!response && m->minor == 1 && !m->has_host)
		return -EBADMSG; /* RFC 9112 section 3.2: an HTTP/1.1 request has a Host */
	m->keep_alive = m->minor == 1 ? !close : (ka && !close);
	IOD_ASSERT_HOT(m->head_len <= lim);
	return 0;
}

/*
 * Chunked framing (RFC 9112 section 7.1), one state per grammar position:
 *
 *   chunk      = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
 *   chunk-ext  = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
 *   chunk-ext-val = token / quoted-string
 *   trailer-section = *( field-line CRLF )
 *
 * Whitespace after the size is only allowed before a ';' ("a " or
 * "2 junk" is refused: an upstream that read the size differently would be
 * out of step with the proxy, a request-smuggling desync). Extensions and
 * trailer fields are checked to the grammar, then forwarded unchanged.
 */
enum {
	CH_SIZE,      /* hex digits */
	CH_SIZE_WS,   /* BWS after the size: only ';' may follow */
	CH_EXT_SEMI,  /* after ';' (BWS, then a name) */
	CH_EXT_NAME,  /* in a chunk-ext-name */
	CH_EXT_NWS,   /* BWS after a name: '=' or ';' */
	CH_EXT_EQ,    /* after '=' (BWS, then token or quoted-string) */
	CH_EXT_TOKEN, /* in a token value */
	CH_EXT_VWS,   /* BWS after a value: only ';' */
	CH_EXT_QS,    /* in a quoted-string */
	CH_EXT_QP,    /* after a backslash in a quoted-string */
	CH_EXT_QEND,  /* after the closing quote */
	CH_SIZE_LF,   /* CR of the chunk-size line seen */
	CH_DATA,      /* chunk-data */
	CH_DATA_CR,   /* CRLF after chunk-data */
	CH_DATA_LF,
	CH_TR_START, /* start of a trailer line, or the final CRLF */
	CH_TR_NAME,  /* trailer field name */
	CH_TR_VALUE, /* trailer field value */
	CH_TR_LF,
	CH_END_LF
};

void iod_http_body_init(struct iod_http_body *b, const struct iod_http_msg *m, const char *buf,
                        const char *method, size_t method_len)
{
	IOD_UNUSED(buf);
	memset(b, 0, sizeof(*b));
	if (m->is_response) {
		bool head = method && method_len == 4 && !memcmp(method, "HEAD", 4);
		if (head || m->status < 200 || m->status == 204 || m->status == 304) {
			b->kind = IOD_HTTP_BODY_NONE;
			return;
		}
	}
	if (m->chunked) {
		b->kind = IOD_HTTP_BODY_CHUNKED;
		b->state = CH_SIZE;
	} else if (m->has_length) {
		b->kind = m->content_length ? IOD_HTTP_BODY_LENGTH : IOD_HTTP_BODY_NONE;
		b->remaining = m->content_length;
	} else {
		b->kind = m->is_response ? IOD_HTTP_BODY_CLOSE : IOD_HTTP_BODY_NONE;
	}
}

/* One byte of a chunk extension (or the BWS after the size). 0 or -EBADMSG. */
static int chunk_ext(struct iod_http_body *b, unsigned char c)
{
	bool ws = c == ' ' || c == '\t';
	switch (b->state) {
	case CH_SIZE_WS:
		if (c == ';')
			b->state = CH_EXT_SEMI;
		else if (!ws)
			return -EBADMSG; /* "a ", "2 junk": no ';' after the BWS */
		return 0;
	case CH_EXT_SEMI:
		if (is_tchar(c))
			b->state = CH_EXT_NAME;
		else if (!ws)
			return -EBADMSG;
		return 0;
	case CH_EXT_NAME:
	case CH_EXT_TOKEN:
		if (c == '\r')
			b->state = CH_SIZE_LF;
		else if (c == ';')
			b->state = CH_EXT_SEMI;
		else if (c == '=' && b->state == CH_EXT_NAME)
			b->state = CH_EXT_EQ;
		else if (ws)
			b->state = b->state == CH_EXT_NAME ? CH_EXT_NWS : CH_EXT_VWS;
		else if (!is_tchar(c))
			return -EBADMSG;
		return 0;
	case CH_EXT_NWS:
		if (c == '=')
			b->state = CH_EXT_EQ;
		else if (c == ';')
			b->state = CH_EXT_SEMI;
		else if (!ws)
			return -EBADMSG;
		return 0;
	case CH_EXT_EQ:
		if (c == '"')
			b->state = CH_EXT_QS;
		else if (is_tchar(c))
			b->state = CH_EXT_TOKEN;
		else if (!ws)
			return -EBADMSG;
		return 0;
	case CH_EXT_VWS:
		if (c == ';')
			b->state = CH_EXT_SEMI;
		else if (!ws)
			return -EBADMSG;
		return 0;
	case CH_EXT_QS:
		/* qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text */
		if (c == '"')
			b->state = CH_EXT_QEND;
		else if (c == '\\')
			b->state = CH_EXT_QP;
		else if ((c < 0x20 && c != '\t') || c == 0x7f)
			return -EBADMSG;
		return 0;
	case CH_EXT_QP:
		/* quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text ) */
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return -EBADMSG;
		b->state = CH_EXT_QS;
		return 0;
	case CH_EXT_QEND:
		if (c == '\r')
			b->state = CH_SIZE_LF;
		else if (c == ';')
			b->state = CH_EXT_SEMI;
		else if (ws)
			b->state = CH_EXT_VWS;
		else
			return -EBADMSG;
		return 0;
	default: return -EBADMSG;
	}
}

int64_t iod_http_body_feed(struct iod_http_body *b, const char *p, size_t len, bool *done)
{
	return iod_http_body_decode(b, p, len, done, NULL, NULL);
}

int64_t iod_http_body_decode(struct iod_http_body *b, const char *p, size_t len, bool *done,
                             iod_http_data_fn data, void *ctx)
{
	size_t i = 0;

	*done = false;
	switch (b->kind) {
	case IOD_HTTP_BODY_NONE: *done = true; return 0;
	case IOD_HTTP_BODY_CLOSE:
		if (data && len)
			data(ctx, p, len);
		return (int64_t)len;
	case IOD_HTTP_BODY_LENGTH: {
		uint64_t take = IOD_MIN((uint64_t)len, b->remaining);
		b->remaining -= take;
		*done = b->remaining == 0;
		if (data && take)
			data(ctx, p, (size_t)take);
		return (int64_t)take;
	}
	case IOD_HTTP_BODY_CHUNKED: break;
	}
	while (i < len) {
		char c = p[i];
		switch (b->state) {
		case CH_SIZE: {
			int h = iod_hex_digit(c);
			if (h >= 0) {
				if (b->remaining >> 56)
					return -EBADMSG; /* >= 2^60 bytes: refuse */
				if (++b->line_n > IOD_HTTP_CHUNK_LINE_MAX)
					return -EBADMSG;
				b->remaining = b->remaining * 16 + (uint64_t)h;
			} else if (b->line_n == 0) {
				return -EBADMSG;
			} else if (c == ';') {
				b->state = CH_EXT_SEMI;
			} else if (c == ' ' || c == '\t') {
				b->state = CH_SIZE_WS;
			} else if (c == '\r') {
				b->state = CH_SIZE_LF;
			} else {
				return -EBADMSG;
			}
			break;
		}
		case CH_SIZE_WS:
		case CH_EXT_SEMI:
		case CH_EXT_NAME:
		case CH_EXT_NWS:
		case CH_EXT_EQ:
		case CH_EXT_TOKEN:
		case CH_EXT_VWS:
		case CH_EXT_QS:
		case CH_EXT_QP:
		case CH_EXT_QEND:
			if (++b->line_n > IOD_HTTP_CHUNK_LINE_MAX)
				return -EBADMSG;
			if (chunk_ext(b, (unsigned char)c))
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
			} else if (is_tchar((unsigned char)c)) {
				b->line_n = 1;
				b->state = CH_TR_NAME;
			} else {
				return -EBADMSG; /* bare LF, obs-fold, empty name */
			}
			break;
		case CH_TR_NAME:
			if (++b->line_n > IOD_HTTP_CHUNK_LINE_MAX)
				return -EBADMSG;
			if (c == ':')
				b->state = CH_TR_VALUE;
			else if (!is_tchar((unsigned char)c))
				return -EBADMSG; /* whitespace before ':', no ':' */
			break;
		case CH_TR_VALUE: {
			unsigned char u = (unsigned char)c;
			if (++b->line_n > IOD_HTTP_CHUNK_LINE_MAX)
				return -EBADMSG;
			if (c == '\r')
				b->state = CH_TR_LF;
			else if ((u < 0x20 && u != '\t') || u == 0x7f)
				return -EBADMSG; /* bare LF, NUL, other controls */
			break;
		}
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
