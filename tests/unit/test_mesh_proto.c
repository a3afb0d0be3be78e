/*
 * test_mesh_proto.c: the mesh's wire formats: HTTP/1.1 heads and body
 * framing (including smuggling defences), W3C traceparent, the DNS codec,
 * Prometheus text, the span ring and OTLP/JSON.
 */
#include "harness.h"
#include "iod/mesh.h"
#include "iod/obs.h"

#include <stdlib.h>

static int parse(const char *s, bool resp, struct iod_mesh_http_msg *m)
{
	return iod_mesh_http_parse(s, strlen(s), resp, m);
}

TEST(http_request_head)
{
	static struct iod_mesh_http_msg m;
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
		CHECK_EQ(iod_mesh_http_parse(r, cut, false, &m), -EAGAIN);
	CHECK_EQ(parse("GET / HTTP/1.0\r\n\r\n", false, &m), 0);
	CHECK(!m.keep_alive);
	CHECK_EQ(m.hdr_n, 0); /* regression: reusing a msg must not keep old headers */
	CHECK_EQ(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", false, &m), 0);
	CHECK(m.keep_alive);
	CHECK_EQ(parse("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n", false, &m), 0);
	CHECK(!m.keep_alive);
}

TEST(http_rejects_smuggling_and_garbage)
{
	static struct iod_mesh_http_msg m;
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
	for (int i = 0; i <= IOD_MESH_HTTP_HEADERS_MAX; i++)
		o += (size_t)sprintf(big + o, "X%d: y\r\n", i);
	sprintf(big + o, "\r\n");
	int rc = parse(big, false, &m);
	free(big);
	CHECK_EQ(rc, -E2BIG);
}

TEST(http_response_and_body_framing)
{
	static struct iod_mesh_http_msg m;
	struct iod_mesh_http_body b;
	bool done;
	const char *r = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 3\r\n\r\nabcNEXT";
	CHECK_EQ(parse(r, true, &m), 0);
	CHECK_EQ(m.status, 503);
	iod_mesh_http_body_init(&b, &m, r, "GET", 3);
	CHECK_EQ(iod_mesh_http_body_feed(&b, r + m.head_len, 7, &done), 3);
	CHECK(done);
	/* HEAD and 204/304 have no body; no length means read to close. */
	iod_mesh_http_body_init(&b, &m, r, "HEAD", 4);
	CHECK_EQ(b.kind, IOD_MESH_BODY_NONE);
	CHECK_EQ(parse("HTTP/1.1 204 No Content\r\n\r\n", true, &m), 0);
	iod_mesh_http_body_init(&b, &m, NULL, "GET", 3);
	CHECK_EQ(b.kind, IOD_MESH_BODY_NONE);
	CHECK_EQ(parse("HTTP/1.0 200 OK\r\n\r\n", true, &m), 0);
	iod_mesh_http_body_init(&b, &m, NULL, "GET", 3);
	CHECK_EQ(b.kind, IOD_MESH_BODY_CLOSE);
	CHECK(!m.keep_alive);
	/* Chunked, fed one byte at a time, ends exactly after the trailers. */
	const char *c =
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\nZZ";
	CHECK_EQ(parse(c, true, &m), 0);
	iod_mesh_http_body_init(&b, &m, c, "GET", 3);
	const char *p = c + m.head_len;
	size_t total = strlen(p), used = 0;
	done = false;
	while (!done && used < total) {
		int64_t n = iod_mesh_http_body_feed(&b, p + used, 1, &done);
		CHECK(n >= 0);
		used += (size_t)n;
	}
	CHECK(done);
	CHECK_EQ(used, total - 2);
	/* Whole at once gives the same answer. */
	iod_mesh_http_body_init(&b, &m, c, "GET", 3);
	CHECK_EQ(iod_mesh_http_body_feed(&b, p, total, &done), (int64_t)total - 2);
	CHECK(done);
	const char *badc[] = {"zz\r\n", "5\r\nhelloXX", "\r\n", "1\n", "fffffffffffffffff\r\n"};
	for (size_t i = 0; i < IOD_ARRAY_LEN(badc); i++) {
		iod_mesh_http_body_init(&b, &m, c, "GET", 3);
		CHECK_MSG(iod_mesh_http_body_feed(&b, badc[i], strlen(badc[i]), &done) == -EBADMSG,
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

TEST(http_body_decode_payload)
{
	static struct iod_mesh_http_msg m;
	struct iod_mesh_http_body b;
	bool done = false;
	/* A chunked request with an extension and a trailer, split at every
	 * offset: the payload is the chunks' data, whatever the split. */
	const char *r = "POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	                "Expect: 100-continue\r\n\r\n"
	                "5;a=b\r\nhello\r\n7\r\n, world\r\n0\r\nX-Sum: 1\r\n\r\nGET";
	CHECK_EQ(parse(r, false, &m), 0);
	CHECK(m.expect_continue);
	CHECK(m.chunked);
	const char *p = r + m.head_len;
	size_t total = strlen(p);
	for (size_t cut = 0; cut <= total; cut++) {
		struct collect k = {{0}, 0, 0};
		iod_mesh_http_body_init(&b, &m, r, NULL, 0);
		int64_t a = iod_mesh_http_body_decode(&b, p, cut, &done, collect_data, &k);
		CHECK(a >= 0);
		int64_t c = 0;
		if (!done)
			c = iod_mesh_http_body_decode(&b, p + a, total - (size_t)a, &done,
			                              collect_data, &k);
		CHECK(done);
		CHECK_EQ((size_t)(a + c), total - 3); /* "GET" is the next request */
		CHECK_EQ(k.n, 12u);
		CHECK(!memcmp(k.buf, "hello, world", 12));
	}
	/* Content-Length: the payload is the first N bytes, in one run. */
	const char *l = "PUT /x HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcdef";
	CHECK_EQ(parse(l, false, &m), 0);
	CHECK(!m.expect_continue);
	struct collect k = {{0}, 0, 0};
	iod_mesh_http_body_init(&b, &m, l, NULL, 0);
	CHECK_EQ(iod_mesh_http_body_decode(&b, l + m.head_len, 6, &done, collect_data, &k), 4);
	CHECK(done);
	CHECK_EQ(k.n, 4u);
	CHECK_EQ(k.runs, 1u);
	/* Expect values other than 100-continue are not taken for it. */
	CHECK_EQ(parse("PUT / HTTP/1.1\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\n", false, &m),
	         0);
	CHECK(!m.expect_continue);
	/* A length far beyond any buffer is fine: bodies stream. */
	CHECK_EQ(parse("PUT / HTTP/1.1\r\nContent-Length: 68719476736\r\n\r\n", false, &m), 0);
	iod_mesh_http_body_init(&b, &m, NULL, NULL, 0);
	CHECK_EQ(b.kind, IOD_MESH_BODY_LENGTH);
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
