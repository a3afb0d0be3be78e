/*
 * test_mesh_proto.c: the mesh's wire formats: HTTP/1.1 heads and body
 * framing (including smuggling defences), W3C traceparent, the DNS codec,
 * Prometheus text, the span ring and OTLP/JSON.
 */
#include "harness.h"
#include "iod/mesh_proxy.h"
#include "iod/obs.h"

#include <stdlib.h>

static int parse(const char *s, bool resp, struct iod_http_msg *m)
{
	return iod_http_parse(s, strlen(s), resp, m);
}

TEST(http_request_head)
{
	static struct iod_http_msg m;
	const char *r = "GET /v1/items?x=1 HTTP/1.1\r\nHost: web\r\nContent-Length: 5\r\n"
	                "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n"
	                "\r\nhello";
	CHECK_EQ(parse(r, false, &m), 0);
	CHECK_EQ(m.method_len, 3);
	CHECK(!memcmp(r + m.target_off, "/v1/items?x=1", m.target_len));
	CHECK_EQ(m.minor, 1);
	CHECK(m.has_length && m.content_length == 5);
	CHECK(m.keep_alive);
	CHECK_EQ(m.hdr_n, 3);
	CHECK_EQ(m.traceparent, 2);
	CHECK_EQ(m.head_len, strlen(r) - 5);
	/* Incomplete heads ask for more. */
	for (size_t cut = 0; cut < m.head_len; cut += 7)
		CHECK_EQ(iod_http_parse(r, cut, false, &m), -EAGAIN);
	CHECK_EQ(parse("GET / HTTP/1.0\r\n\r\n", false, &m), 0);
	CHECK(!m.keep_alive);
	CHECK_EQ(m.hdr_n, 0); /* regression: reusing a msg must not keep old headers */
	CHECK_EQ(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", false, &m), 0);
	CHECK(m.keep_alive);
	CHECK_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n", false, &m),
	         0);
	CHECK(!m.keep_alive);
}

TEST(http_rejects_smuggling_and_garbage)
{
	static struct iod_http_msg m;
	const char *bad[] = {
	    "GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
	    "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	    "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
	    "GET / HTTP/1.1\nHost: x\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n",
	    "GET / HTTP/2.0\r\n\r\n",
	    "GET  / HTTP/1.1\r\n\r\n",
	    "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
	    "GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
	    "GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n",
	    "\r\n\r\n",
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++)
		CHECK_MSG(parse(bad[i], false, &m) == -EBADMSG, "accepted #%zu", i);
	/* Oversized head and too many headers. */
	char *big = malloc(IOD_MESH_HTTP_BUF + 64);
	size_t o = (size_t)sprintf(big, "GET / HTTP/1.1\r\n");
	while (o < IOD_MESH_HTTP_BUF + 10)
		big[o++] = 'a';
	big[o] = 0;
	CHECK_EQ(parse(big, false, &m), -E2BIG);
	o = (size_t)sprintf(big, "GET / HTTP/1.1\r\n");
	for (int i = 0; i <= IOD_HTTP_HEADERS_MAX; i++)
		o += (size_t)sprintf(big + o, "X%d: y\r\n", i);
	sprintf(big + o, "\r\n");
	int rc = parse(big, false, &m);
	free(big);
	CHECK_EQ(rc, -E2BIG);
}

TEST(http_response_and_body_framing)
{
	static struct iod_http_msg m;
	struct iod_http_body b;
	bool done;
	const char *r = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 3\r\n\r\nabcNEXT";
	CHECK_EQ(parse(r, true, &m), 0);
	CHECK_EQ(m.status, 503);
	iod_http_body_init(&b, &m, r, "GET", 3);
	CHECK_EQ(iod_http_body_feed(&b, r + m.head_len, 7, &done), 3);
	CHECK(done);
	/* HEAD and 204/304 have no body; no length means read to close. */
	iod_http_body_init(&b, &m, r, "HEAD", 4);
	CHECK_EQ(b.kind, IOD_HTTP_BODY_NONE);
	CHECK_EQ(parse("HTTP/1.1 204 No Content\r\n\r\n", true, &m), 0);
	iod_http_body_init(&b, &m, NULL, "GET", 3);
	CHECK_EQ(b.kind, IOD_HTTP_BODY_NONE);
	CHECK_EQ(parse("HTTP/1.0 200 OK\r\n\r\n", true, &m), 0);
	iod_http_body_init(&b, &m, NULL, "GET", 3);
	CHECK_EQ(b.kind, IOD_HTTP_BODY_CLOSE);
	CHECK(!m.keep_alive);
	/* Chunked, fed one byte at a time, ends exactly after the trailers. */
	const char *c =
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\nZZ";
	CHECK_EQ(parse(c, true, &m), 0);
	iod_http_body_init(&b, &m, c, "GET", 3);
	const char *p = c + m.head_len;
	size_t total = strlen(p), used = 0;
	done = false;
	while (!done && used < total) {
		int64_t n = iod_http_body_feed(&b, p + used, 1, &done);
		CHECK(n >= 0);
		used += (size_t)n;
	}
	CHECK(done);
	CHECK_EQ(used, total - 2);
	/* Whole at once gives the same answer. */
	iod_http_body_init(&b, &m, c, "GET", 3);
	CHECK_EQ(iod_http_body_feed(&b, p, total, &done), (int64_t)total - 2);
	CHECK(done);
	const char *badc[] = {"zz\r\n", "5\r\nhelloXX", "\r\n", "1\n", "fffffffffffffffff\r\n"};
	for (size_t i = 0; i < IOD_ARRAY_LEN(badc); i++) {
		iod_http_body_init(&b, &m, c, "GET", 3);
		CHECK_MSG(iod_http_body_feed(&b, badc[i], strlen(badc[i]), &done) == -EBADMSG,
		          "accepted chunk #%zu", i);
	}
}

struct collect {
	char buf[256]; /* decoded payload */
	size_t n;      /* its length */
	uint32_t runs; /* data() calls */
};

static void collect_data(void *ctx, const char *p, size_t n)
{
	struct collect *k = ctx;
	if (k->n + n <= sizeof(k->buf))
		memcpy(k->buf + k->n, p, n);
	k->n += n;
	k->runs++;
}

/*
 * RFC 9112 framing, table-driven. Heads: 0, -EBADMSG; each row names the
 * rule. The rows follow the RFC's sections and the cases strict parsers
 * (llhttp, h11) keep in their suites: start line, field syntax, Host,
 * Content-Length, Transfer-Encoding.
 */
struct head_case {
	const char *in; /* the whole head */
	bool resp;      /* parse as a response */
	int rc;         /* expected result */
	const char *why;
};

static const struct head_case head_cases[] = {
    {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", false, 0, "minimal 1.1 request"},
    {"GET / HTTP/1.1\r\n\r\n", false, -EBADMSG, "3.2: 1.1 request without Host"},
    {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false, -EBADMSG, "3.2: two Host fields"},
    {"GET / HTTP/1.1\r\nhOsT: a\r\n\r\n", false, 0, "field names are case-insensitive"},
    {"GET / HTTP/1.0\r\n\r\n", false, 0, "1.0 needs no Host"},
    {"GET http://a/x HTTP/1.1\r\nHost: a\r\n\r\n", false, 0, "absolute-form target"},
    {"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", false, 0, "asterisk-form target"},
    {"get / HTTP/1.1\r\nHost: a\r\n\r\n", false, 0, "a method is any token"},
    {"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", false, -EBADMSG, "3.1: method is a token"},
    {"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", false, -EBADMSG, "3.2: target has no DEL"},
    {"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", false, -EBADMSG, "3.2: target has no SP"},
    {"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", false, -EBADMSG, "3: nothing after the version"},
    {"GET / http/1.1\r\nHost: a\r\n\r\n", false, -EBADMSG, "2.3: HTTP-name is case-sensitive"},
    {"GET / HTTP/1.10\r\nHost: a\r\n\r\n", false, -EBADMSG, "2.3: one digit each"},
    {"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", false, -EBADMSG, "3: single SP separators"},
    {"GET / HTTP/1.1\r\n Host: a\r\n\r\n", false, -EBADMSG, "2.2: SP before the first field"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\t2\r\n\r\n", false, -EBADMSG, "5.2: obs-fold (tab)"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX\t: 1\r\n\r\n", false, -EBADMSG, "5.1: tab before ':'"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX 1\r\n\r\n", false, -EBADMSG, "5: no ':'"},
    {"GET / HTTP/1.1\r\nHost: a\r\n: 1\r\n\r\n", false, -EBADMSG, "5: empty field name"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX@Y: 1\r\n\r\n", false, -EBADMSG, "5: name is a token"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n", false, -EBADMSG, "5.5: DEL in a value"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: \xc3\xa9t\xc3\xa9\r\n\r\n", false, 0, "5.5: obs-text"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: a\tb \t\r\n\r\n", false, 0, "5.5: HTAB and OWS"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: a\nb\r\n\r\n", false, -EBADMSG, "2.2: bare LF in a value"},
    {"GET / HTTP/1.1\r\nHost: a\r\n\n", false, -EBADMSG, "2.2: bare LF ends the head"},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", false, 0,
     "6.3: repeated equal lengths"},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", false, -EBADMSG,
     "6.3: a length list is refused"},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", false, -EBADMSG, "8.6: 1*DIGIT"},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", false, -EBADMSG, "8.6: decimal"},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", false, -EBADMSG, "8.6: empty"},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", false, -EBADMSG, "8.6: SP inside"},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n", false, -EBADMSG,
     "8.6: overflowing length"},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 000000000000000000001\r\n\r\n", false, -EBADMSG,
     "8.6: more digits than we take"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", false,
     -EBADMSG, "6.1: TE and CL (order 2)"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n", false, 0,
     "7: coding names are case-insensitive"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", false, -EBADMSG,
     "7: chunked twice"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"
     "\r\n",
     false, -EBADMSG, "7: chunked twice over two fields"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", false, -EBADMSG,
     "6.3: chunked not last"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", false, -EBADMSG,
     "6.3: unknown coding"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", false, -EBADMSG,
     "7: quoted coding"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", false, -EBADMSG, "7: empty TE"},
    {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", false, -EBADMSG,
     "6.1: TE in a 1.0 message"},
    {"HTTP/1.1 200 OK\r\n\r\n", true, 0, "response without length"},
    {"HTTP/1.1 200 \r\n\r\n", true, 0, "4: empty reason phrase"},
    {"HTTP/1.1 200\r\n\r\n", true, 0, "4: reason phrase and its SP omitted"},
    {"HTTP/1.1 20 OK\r\n\r\n", true, -EBADMSG, "4: three digits"},
    {"HTTP/1.1 2000 OK\r\n\r\n", true, -EBADMSG, "4: three digits, not four"},
    {"HTTP/1.1 099 OK\r\n\r\n", true, -EBADMSG, "15: status below 100"},
    {"HTTP/1.1 200 O\x01K\r\n\r\n", true, -EBADMSG, "4: control in the reason"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n", true, -EBADMSG,
     "6.1: TE and CL in a response"},
    {"HTTP/1.1 200 OK\r\nHost: a\r\nHost: b\r\n\r\n", true, 0, "Host is a request rule"},
};

TEST(http_head_rfc9112_table)
{
	static struct iod_http_msg m;
	for (size_t i = 0; i < IOD_ARRAY_LEN(head_cases); i++) {
		const struct head_case *t = &head_cases[i];
		int rc = parse(t->in, t->resp, &m);
		CHECK_MSG(rc == t->rc, "#%zu (%s): got %d, want %d", i, t->why, rc, t->rc);
	}
}

/* Chunked bodies: the bytes after a head, what is consumed and the payload. */
struct chunk_case {
	const char *in;      /* body bytes (may run on into a next message) */
	int64_t used;        /* bytes that belong to the body, or -EBADMSG */
	const char *payload; /* decoded chunk data when used >= 0 */
	const char *why;
};

static const struct chunk_case chunk_cases[] = {
    {"0\r\n\r\n", 5, "", "7.1: last chunk only"},
    {"3\r\nabc\r\n0\r\n\r\nGET", 13, "abc", "7.1: a chunk, then the next message"},
    {"000003\r\nabc\r\n0\r\n\r\n", 18, "abc", "7.1: leading zeros"},
    {"A\r\n0123456789\r\n0\r\n\r\n", 20, "0123456789", "7.1: upper-case hex"},
    {"3;x\r\nabc\r\n0\r\n\r\n", 15, "abc", "7.1.1: name-only extension"},
    {"3;x=1;y=\"a b\\\"c\"\r\nabc\r\n0\r\n\r\n", 28, "abc", "7.1.1: token and quoted values"},
    {"3 ;x\r\nabc\r\n0\r\n\r\n", 16, "abc", "7.1.1: BWS before ';'"},
    {"3; x = 1\r\nabc\r\n0\r\n\r\n", 20, "abc", "7.1.1: BWS around '='"},
    {"3;x=1 ;y\r\nabc\r\n0\r\n\r\n", 20, "abc", "7.1.1: BWS between extensions"},
    {"0\r\nX-T: 1\r\nY:\r\n\r\n", 17, "", "7.1.2: trailer fields"},
    {"a \r\n0123456789\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1: 'a ' (BWS without ';')"},
    {"2 erfrferferf\r\nab\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1: '2 junk' (junk without ';')"},
    {"2\terf\r\nab\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1: tab then junk"},
    {"2x\r\nab\r\n", -EBADMSG, NULL, "7.1: non-hex after the size"},
    {"0x2\r\nab\r\n", -EBADMSG, NULL, "7.1: 0x prefix"},
    {" 2\r\nab\r\n", -EBADMSG, NULL, "7.1: SP before the size"},
    {"-1\r\n", -EBADMSG, NULL, "7.1: negative size"},
    {"\r\n", -EBADMSG, NULL, "7.1: empty size"},
    {"2\nab\r\n", -EBADMSG, NULL, "2.2: bare LF after the size"},
    {"2\rab\r\n", -EBADMSG, NULL, "2.2: bare CR after the size"},
    {"2\r\nabXY", -EBADMSG, NULL, "7.1: no CRLF after chunk-data"},
    {"2\r\nab\n0\r\n\r\n", -EBADMSG, NULL, "2.2: bare LF after chunk-data"},
    {"1000000000000000\r\n", -EBADMSG, NULL, "7.1: size overflows 2^60"},
    {"3;\r\nabc\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1.1: ';' without a name"},
    {"3;x=\r\nabc\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1.1: '=' without a value"},
    {"3;x=a b\r\nabc\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1.1: SP inside a token value"},
    {"3;x=\"a\r\nabc\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1.1: unterminated quoted-string"},
    {"3;x=\"a\"b\r\nabc\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1.1: junk after a quoted-string"},
    {"3;x@y\r\nabc\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1.1: name is a token"},
    {"3;x\x01\r\nabc\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1.1: control in an extension"},
    {"3;x=1 \r\nabc\r\n0\r\n\r\n", -EBADMSG, NULL, "7.1.1: BWS then CRLF"},
    {"3;x\nabc\r\n", -EBADMSG, NULL, "2.2: bare LF ends an extension"},
    {"0\r\n X: 1\r\n\r\n", -EBADMSG, NULL, "5.2: obs-fold in the trailer"},
    {"0\r\nX : 1\r\n\r\n", -EBADMSG, NULL, "5.1: SP before ':' in a trailer"},
    {"0\r\nX\r\n\r\n", -EBADMSG, NULL, "5: trailer without ':'"},
    {"0\r\nX: a\nb\r\n\r\n", -EBADMSG, NULL, "2.2: bare LF in a trailer"},
    {"0\r\nX: a\x01\r\n\r\n", -EBADMSG, NULL, "5.5: control in a trailer"},
    {"0\r\n\n", -EBADMSG, NULL, "2.2: bare LF ends the trailers"},
};

TEST(http_chunked_rfc9112_table)
{
	static struct iod_http_msg m;
	struct iod_http_body b;
	const char *h = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
	CHECK_EQ(parse(h, false, &m), 0);
	for (size_t i = 0; i < IOD_ARRAY_LEN(chunk_cases); i++) {
		const struct chunk_case *t = &chunk_cases[i];
		size_t n = strlen(t->in);
		/* Whole, and byte by byte: the same answer either way. */
		for (int split = 0; split < 2; split++) {
			struct collect k = {{0}, 0, 0};
			bool done = false;
			int64_t used = 0, r = 0;
			iod_http_body_init(&b, &m, h, NULL, 0);
			if (split) {
				while (!done && used < (int64_t)n) {
					r = iod_http_body_decode(&b, t->in + used, 1, &done,
					                         collect_data, &k);
					if (r < 0)
						break;
					used += r;
				}
			} else {
				r = iod_http_body_decode(&b, t->in, n, &done, collect_data, &k);
				used = r;
			}
			if (t->used < 0) {
				CHECK_MSG(r == -EBADMSG, "#%zu (%s) split=%d: accepted", i, t->why,
				          split);
				continue;
			}
			CHECK_MSG(r >= 0 && done && used == t->used,
			          "#%zu (%s) split=%d: rc %lld used %lld done %d", i, t->why, split,
			          (long long)r, (long long)used, done);
			CHECK_MSG(k.n == strlen(t->payload) && !memcmp(k.buf, t->payload, k.n),
			          "#%zu (%s): payload", i, t->why);
		}
	}
}

/* Pipelining (RFC 9112 9.3): requests back to back in one read are found
 * one after another; the body's end is where the next head starts. */
TEST(http_pipelined_requests)
{
	static struct iod_http_msg m;
	struct iod_http_body b;
	const char *p = "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
	                "POST /b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
	                "1\r\nx\r\n0\r\n\r\n"
	                "GET /c HTTP/1.1\r\nHost: a\r\n\r\n";
	const char *want[] = {"/a", "/b", "/c"};
	size_t off = 0, len = strlen(p);
	for (size_t i = 0; i < 3; i++) {
		bool done = false;
		CHECK_EQ(iod_http_parse(p + off, len - off, false, &m), 0);
		CHECK(m.target_len == 2 && !memcmp(p + off + m.target_off, want[i], 2));
		iod_http_body_init(&b, &m, p + off, NULL, 0);
		int64_t used =
		    iod_http_body_feed(&b, p + off + m.head_len, len - off - m.head_len, &done);
		CHECK(used >= 0 && done);
		off += m.head_len + (size_t)used;
	}
	CHECK_EQ(off, len);
}

TEST(http_body_decode_payload)
{
	static struct iod_http_msg m;
	struct iod_http_body b;
	bool done = false;
	/* A chunked request with an extension and a trailer, split at every
	 * offset: the payload is the chunks' data, whatever the split. */
	const char *r = "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
	                "Expect: 100-continue\r\n\r\n"
	                "5;a=b\r\nhello\r\n7\r\n, world\r\n0\r\nX-Sum: 1\r\n\r\nGET";
	CHECK_EQ(parse(r, false, &m), 0);
	CHECK(m.expect_continue);
	CHECK(m.chunked);
	const char *p = r + m.head_len;
	size_t total = strlen(p);
	for (size_t cut = 0; cut <= total; cut++) {
		struct collect k = {{0}, 0, 0};
		iod_http_body_init(&b, &m, r, NULL, 0);
		int64_t a = iod_http_body_decode(&b, p, cut, &done, collect_data, &k);
		CHECK(a >= 0);
		int64_t c = 0;
		if (!done)
			c = iod_http_body_decode(&b, p + a, total - (size_t)a, &done, collect_data,
			                         &k);
		CHECK(done);
		CHECK_EQ((size_t)(a + c), total - 3); /* "GET" is the next request */
		CHECK_EQ(k.n, 12u);
		CHECK(!memcmp(k.buf, "hello, world", 12));
	}
	/* Content-Length: the payload is the first N bytes, in one run. */
	const char *l = "PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcdef";
	CHECK_EQ(parse(l, false, &m), 0);
	CHECK(!m.expect_continue);
	struct collect k = {{0}, 0, 0};
	iod_http_body_init(&b, &m, l, NULL, 0);
	CHECK_EQ(iod_http_body_decode(&b, l + m.head_len, 6, &done, collect_data, &k), 4);
	CHECK(done);
	CHECK_EQ(k.n, 4u);
	CHECK_EQ(k.runs, 1u);
	/* Expect values other than 100-continue are not taken for it. */
	CHECK_EQ(parse("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\n",
	               false, &m),
	         0);
	CHECK(!m.expect_continue);
	/* A length far beyond any buffer is fine: bodies stream. */
	CHECK_EQ(
	    parse("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 68719476736\r\n\r\n", false, &m),
	    0);
	iod_http_body_init(&b, &m, NULL, NULL, 0);
	CHECK_EQ(b.kind, IOD_HTTP_BODY_LENGTH);
	CHECK_U64(b.remaining, 68719476736ull);
}

TEST(traceparent_parse_format)
{
	struct iod_mesh_traceparent tp;
	char out[56];
	const char *v = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
	CHECK_EQ(iod_mesh_traceparent_parse(v, strlen(v), &tp), 0);
	CHECK_EQ(tp.trace_id[0], 0x0a);
	CHECK_EQ(tp.span_id[7], 0x31);
	CHECK_EQ(tp.flags, 1);
	iod_mesh_traceparent_format(&tp, out);
	CHECK_STR(out, v);
	const char *bad[] = {
	    "00-00000000000000000000000000000000-b7ad6b7169203331-01",   /* zero trace id */
	    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",   /* zero span id */
	    "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",   /* upper case */
	    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   /* version ff */
	    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x", /* v00 + extra */
	    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",
	    "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	    "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
	    "",
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++)
		CHECK_MSG(iod_mesh_traceparent_parse(bad[i], strlen(bad[i]), &tp) == -EINVAL,
		          "accepted %s", bad[i]);
	/* A future version may append fields after a dash. */
	const char *fut = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-abcd";
	CHECK_EQ(iod_mesh_traceparent_parse(fut, strlen(fut), &tp), 0);
	struct iod_rng rng;
	uint8_t id[16];
	iod_rng_seed(&rng, 0);
	iod_mesh_trace_ids_new(&rng, id, 16);
	int nz = 0;
	for (int i = 0; i < 16; i++)
		nz += id[i] != 0;
	CHECK(nz > 0);
}

/*
 * The W3C trace-context harness's traceparent values (test/test.py of
 * w3c/trace-context, level 2): which the proxy continues and which start a
 * new trace. Written here from its cases.
 */
TEST(traceparent_w3c_harness_values)
{
	struct iod_mesh_traceparent tp;
	const char *id = "12345678901234567890123456789012";
	char v[160];
	const struct {
		const char *fmt; /* %s: the trace id */
		bool valid;
	} t[] = {
	    {"00-%s-1234567890123456-01", true},
	    {"00-%s-1234567890123456-00", true},
	    {"cc-%s-1234567890123456-01", true},
	    {"cc-%s-1234567890123456-01-what-the-future-will-be-like", true},
	    {"cc-%s-1234567890123456-01.what-the-future-will-be-like", false},
	    {"00-%s-1234567890123456-01.", false},
	    {"00-%s-1234567890123456-01-what-the-future-will-be-like", false},
	    {"ff-%s-1234567890123456-01", false},
	    {".0-%s-1234567890123456-01", false},
	    {"0.-%s-1234567890123456-01", false},
	    {"000-%s-1234567890123456-01", false},
	    {"0-%s-1234567890123456-01", false},
	    {"00-%s3-1234567890123456-01", false},
	    {"00-%s-0000000000000000-01", false},
	    {"00-%s-.234567890123456-01", false},
	    {"00-%s-123456789012345.-01", false},
	    {"00-%s-12345678901234567-01", false},
	    {"00-%s-123456789012345-01", false},
	    {"00-%s-1234567890123456-.0", false},
	    {"00-%s-1234567890123456-0.", false},
	    {"00-%s-1234567890123456-001", false},
	    {"00-%s-1234567890123456-1", false},
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(t); i++) {
		snprintf(v, sizeof(v), t[i].fmt, id);
		int rc = iod_mesh_traceparent_parse(v, strlen(v), &tp);
		CHECK_MSG((rc == 0) == t[i].valid, "%s: rc %d", v, rc);
	}
	/* Trace ids: too short, illegal characters, all zero. */
	const char *bad[] = {
	    "00-1234567890123456789012345678901-1234567890123456-01",
	    "00-.2345678901234567890123456789012-1234567890123456-01",
	    "00-1234567890123456789012345678901.-1234567890123456-01",
	    "00-00000000000000000000000000000000-1234567890123456-01",
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++)
		CHECK_MSG(iod_mesh_traceparent_parse(bad[i], strlen(bad[i]), &tp) == -EINVAL,
		          "accepted %s", bad[i]);
	/* Two traceparent fields are counted (the proxy then starts a new
	 * trace); tracestate fields too, whatever their case. */
	static struct iod_http_msg m;
	const char *r = "GET / HTTP/1.1\r\nHost: a\r\n"
	                "traceparent: 00-12345678901234567890123456789011-1234567890123456-01\r\n"
	                "TraceState: a=1\r\n"
	                "TRACEPARENT: 00-12345678901234567890123456789012-1234567890123456-01\r\n"
	                "tracestate: b=2\r\ntrace-state: c=3\r\n\r\n";
	CHECK_EQ(parse(r, false, &m), 0);
	CHECK_EQ(m.traceparent_n, 2);
	CHECK_EQ(m.tracestate_n, 2);
	CHECK_EQ(m.traceparent, 3);
	CHECK(iod_http_header_is(r, &m.hdr[2], "tracestate"));
	CHECK(!iod_http_header_is(r, &m.hdr[5], "tracestate"));
}

/* tracestate lists (W3C level 2, section 3.3): the harness's cases and the
 * spec's limits. "" in want: valid with no member; NULL: dropped whole. */
TEST(tracestate_clean_table)
{
	char big[1200], out[1200];
	const struct {
		const char *in;
		const char *want;
	} t[] = {
	    {"foo=1,bar=2", "foo=1,bar=2"},
	    {"", ""},
	    {" , ,", ""},
	    {"foo=1,", "foo=1"},
	    {",foo=1", "foo=1"},
	    {"foo=1 \t , \t bar=2, \t baz=3", "foo=1,bar=2,baz=3"},
	    {"foo=1\t \t,\t \tbar=2,\t \tbaz=3", "foo=1,bar=2,baz=3"},
	    {"\t foo=1 \t", "foo=1"},
	    {"foo=1,rojo=1,congo=2,baz=3", "foo=1,rojo=1,congo=2,baz=3"},
	    {"t@v=1", "t@v=1"},
	    {"0tenant@vendor=x", "0tenant@vendor=x"},
	    {"foo= 1", "foo= 1"},
	    {"foo=1,foo=1", NULL},
	    {"foo=1,foo=2", NULL},
	    {"foo =1", NULL},
	    {"FOO=1", NULL},
	    {"foo.bar=1", NULL},
	    {"0foo=1", NULL},
	    {"foo@=1,bar=2", NULL},
	    {"@foo=1,bar=2", NULL},
	    {"foo@@bar=1,bar=2", NULL},
	    {"foo@bar@baz=1,bar=2", NULL},
	    {"t@0v=1", NULL},
	    {"foo=bar=baz", NULL},
	    {"foo=,bar=3", NULL},
	    {"foo", NULL},
	    {"foo=a\x01", NULL},
	    {"foo=\xc3\xa9", NULL},
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(t); i++) {
		int n = iod_mesh_tracestate_clean(t[i].in, strlen(t[i].in), out, sizeof(out));
		if (!t[i].want) {
			CHECK_MSG(n == -EINVAL, "#%zu %s: kept (%d)", i, t[i].in, n);
			continue;
		}
		CHECK_MSG(n == (int)strlen(t[i].want) && !memcmp(out, t[i].want, (size_t)n),
		          "#%zu %s: got %d %.*s", i, t[i].in, n, n > 0 ? n : 0, out);
	}
	/* Every allowed character, with and without a vendor. */
	const char *key = "abcdefghijklmnopqrstuvwxyz0123456789_-*/";
	size_t o = (size_t)snprintf(big, sizeof(big), "%s@a-z0-9_-*/=", key);
	for (int c = 0x20; c <= 0x7e; c++)
		if (c != ',' && c != '=')
			big[o++] = (char)c;
	CHECK_EQ(iod_mesh_tracestate_clean(big, o, out, sizeof(out)), (int)o);
	/* 32 members are kept, 33 drop the list. */
	o = 0;
	for (int i = 1; i <= 33; i++)
		o += (size_t)snprintf(big + o, sizeof(big) - o, "%sbar%02d=%02d", i > 1 ? "," : "",
		                      i, i);
	size_t o32 = (size_t)(strstr(big, ",bar33") - big);
	CHECK_EQ(iod_mesh_tracestate_clean(big, o32, out, sizeof(out)), (int)o32);
	CHECK_EQ(iod_mesh_tracestate_clean(big, o, out, sizeof(out)), -EINVAL);
	/* Key lengths: 256 / 257 simple, 241@14 / 242@1 / 1@15 with a vendor. */
	const struct {
		size_t tenant, vendor; /* vendor 0: a simple key of tenant chars */
		bool ok;
	} kl[] = {
	    {256, 0, true}, {257, 0, false}, {241, 14, true}, {242, 1, false}, {1, 15, false}};
	for (size_t i = 0; i < IOD_ARRAY_LEN(kl); i++) {
		o = (size_t)snprintf(big, sizeof(big), "foo=1,");
		memset(big + o, 't', kl[i].tenant);
		o += kl[i].tenant;
		if (kl[i].vendor) {
			big[o++] = '@';
			memset(big + o, 'v', kl[i].vendor);
			o += kl[i].vendor;
		}
		memcpy(big + o, "=1", 2);
		o += 2;
		int n = iod_mesh_tracestate_clean(big, o, out, sizeof(out));
		CHECK_MSG((n > 0) == kl[i].ok, "key %zu@%zu: %d", kl[i].tenant, kl[i].vendor, n);
	}
	/* Values: 256 characters are fine, 257 are not, nor a trailing space. */
	o = (size_t)snprintf(big, sizeof(big), "k=");
	memset(big + o, 'x', 257);
	CHECK_EQ(iod_mesh_tracestate_clean(big, o + 256, out, sizeof(out)), (int)o + 256);
	CHECK_EQ(iod_mesh_tracestate_clean(big, o + 257, out, sizeof(out)), -EINVAL);
	CHECK_EQ(iod_mesh_tracestate_clean("k=a b", 5, out, sizeof(out)), 5);
	CHECK_EQ(iod_mesh_tracestate_clean("a=1,b=2", 7, out, 5), -E2BIG);
}

static uint32_t dns_lookup(void *ctx, const char *name)
{
	IOD_UNUSED(ctx);
	return !strcmp(name, "param-server") ? 0x7f4d0102u : 0;
}

static size_t dns_query(uint8_t *q, const char *name, uint16_t type)
{
	size_t o = 12;
	memset(q, 0, 12);
	q[0] = 0x12;
	q[1] = 0x34;
	q[2] = 0x01; /* RD */
	q[5] = 1;
	const char *p = name;
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		q[o++] = (uint8_t)l;
		memcpy(q + o, p, l);
		o += l;
		p += l + (dot ? 1 : 0);
	}
	q[o++] = 0;
	q[o++] = (uint8_t)(type >> 8);
	q[o++] = (uint8_t)type;
	q[o++] = 0;
	q[o++] = 1;
	return o;
}

TEST(dns_answers_service_vips)
{
	uint8_t q[512], a[512];
	size_t n = dns_query(q, "Param-Server.iod", 1);
	int len = iod_mesh_dns_answer(q, n, a, sizeof(a), dns_lookup, NULL);
	CHECK_EQ(len, (int)n + 16);
	CHECK(a[0] == 0x12 && a[1] == 0x34);
	CHECK(a[2] & 0x80);      /* response */
	CHECK(a[2] & 0x04);      /* authoritative */
	CHECK_EQ(a[3] & 0xf, 0); /* NOERROR */
	CHECK_EQ(a[7], 1);       /* one answer */
	CHECK(a[len - 4] == 127 && a[len - 3] == 77 && a[len - 2] == 1 && a[len - 1] == 2);
	n = dns_query(q, "nope.iod", 1);
	len = iod_mesh_dns_answer(q, n, a, sizeof(a), dns_lookup, NULL);
	CHECK_EQ(a[3] & 0xf, 3); /* NXDOMAIN */
	CHECK_EQ(len, (int)n);
	n = dns_query(q, "param-server.iod", 28); /* AAAA: NODATA */
	len = iod_mesh_dns_answer(q, n, a, sizeof(a), dns_lookup, NULL);
	CHECK_EQ(a[3] & 0xf, 0);
	CHECK_EQ(a[7], 0);
	n = dns_query(q, "example.com", 1);
	iod_mesh_dns_answer(q, n, a, sizeof(a), dns_lookup, NULL);
	CHECK_EQ(a[3] & 0xf, 5); /* REFUSED */
	q[12] = 0xc0;            /* a compression pointer in the question */
	iod_mesh_dns_answer(q, n, a, sizeof(a), dns_lookup, NULL);
	CHECK_EQ(a[3] & 0xf, 1); /* FORMERR */
	CHECK_EQ(iod_mesh_dns_answer(q, 11, a, sizeof(a), dns_lookup, NULL), -EINVAL);
	q[2] = 0x80; /* a response: dropped */
	CHECK_EQ(iod_mesh_dns_answer(q, n, a, sizeof(a), dns_lookup, NULL), -EINVAL);
	n = dns_query(q, "param-server.iod", 1);
	CHECK_EQ(iod_mesh_dns_answer(q, n, a, n + 3, dns_lookup, NULL), -ENOSPC);
}

TEST(prom_text_format)
{
	struct iod_buf b;
	char l[128];
	iod_buf_init(&b);
	CHECK_EQ(iod_prom_labels(l, sizeof(l), "service", "we\"b\\x\ny", "endpoint", "1.2.3.4:5",
	                         (const char *)NULL),
	         0);
	CHECK_STR(l, "service=\"we\\\"b\\\\x\\ny\",endpoint=\"1.2.3.4:5\"");
	CHECK_EQ(iod_prom_labels(l, 10, "service", "a-long-value", (const char *)NULL), -ENOSPC);
	CHECK_EQ(iod_prom_labels(l, sizeof(l), "bad-name", "x", (const char *)NULL), -EINVAL);
	CHECK_EQ(iod_prom_header(&b, "iod_mesh_requests_total", "counter", "Requests.\nSecond"), 0);
	CHECK_EQ(iod_prom_u64(&b, "iod_mesh_requests_total", "service=\"web\"", 42), 0);
	double le[] = {0.001, 0.01};
	uint64_t counts[] = {3, 2, 1};
	CHECK_EQ(iod_prom_histogram(&b, "iod_lat_seconds", "service=\"web\"", le, counts, 2, 0.5),
	         0);
	CHECK_EQ(iod_prom_f64(&b, "g", NULL, 1.0 / 0.0), 0);
	CHECK_STR(b.data, "# HELP iod_mesh_requests_total Requests.\\nSecond\n"
	                  "# TYPE iod_mesh_requests_total counter\n"
	                  "iod_mesh_requests_total{service=\"web\"} 42\n"
	                  "iod_lat_seconds_bucket{service=\"web\",le=\"0.001\"} 3\n"
	                  "iod_lat_seconds_bucket{service=\"web\",le=\"0.01\"} 5\n"
	                  "iod_lat_seconds_bucket{service=\"web\",le=\"+Inf\"} 6\n"
	                  "iod_lat_seconds_sum{service=\"web\"} 0.5\n"
	                  "iod_lat_seconds_count{service=\"web\"} 6\n"
	                  "g +Inf\n");
	CHECK(iod_prom_name_valid("a:b_c1"));
	CHECK(!iod_prom_name_valid("1abc"));
	CHECK(!iod_prom_label_name_valid("__reserved"));
	iod_buf_free(&b);
}

TEST(span_ring_bounded_and_otlp)
{
	static struct iod_mesh_span_ring r;
	static struct iod_mesh_span out[IOD_MESH_SPANS_MAX];
	struct iod_mesh_span s;
	iod_mesh_span_ring_init(&r);
	memset(&s, 0, sizeof(s));
	s.kind = IOD_MESH_SPAN_HTTP;
	snprintf(s.service, sizeof(s.service), "web");
	snprintf(s.method, sizeof(s.method), "GET");
	s.trace_id[15] = 1;
	s.span_id[7] = 2;
	for (uint64_t i = 0; i < IOD_MESH_SPANS_MAX + 100; i++) {
		s.bytes_in = i;
		iod_mesh_span_ring_push(&r, &s);
	}
	/* The oldest 100 were overwritten: a reader from 0 gets the newest MAX. */
	uint32_t n = iod_mesh_span_ring_read(&r, 0, out, IOD_MESH_SPANS_MAX);
	CHECK_EQ(n, IOD_MESH_SPANS_MAX);
	CHECK_U64(out[0].seq, 101);
	CHECK_U64(out[0].bytes_in, 100);
	CHECK_U64(out[n - 1].seq, IOD_MESH_SPANS_MAX + 100);
	n = iod_mesh_span_ring_read(&r, IOD_MESH_SPANS_MAX + 98, out, 10);
	CHECK_EQ(n, 2);
	CHECK_EQ(iod_mesh_span_ring_read(&r, IOD_MESH_SPANS_MAX + 100, out, 10), 0);
	s.status = 503;
	json_t *j = iod_mesh_spans_otlp(&s, 1, "n1");
	char *txt = iod_json_string(j, true);
	json_decref(j);
	CHECK_CONTAINS(txt, "\"traceId\":\"00000000000000000000000000000001\"");
	CHECK_CONTAINS(txt, "\"spanId\":\"0000000000000002\"");
	CHECK_CONTAINS(txt, "\"parentSpanId\":\"\"");
	CHECK_CONTAINS(txt, "\"status\":{\"code\":2}");
	CHECK_CONTAINS(txt, "\"resourceSpans\"");
	CHECK_CONTAINS(txt,
	               "{\"key\":\"http.response.status_code\",\"value\":{\"intValue\":\"503\"}}");
	free(txt);
}
