/*
 * fuzz_http.c: libFuzzer target for the L7 proxy's HTTP/1.1 head parser and
 * body framing (Content-Length and the chunked decoder, both directions).
 * The first byte picks request or response and the feed chunk size; a
 * parsed head's offsets must stay inside the input, and body feeding must
 * never claim more bytes than it was given. The body is decoded twice, in
 * `step`-byte pieces (as the proxy meets it, split anywhere by the network)
 * and in one piece: both must agree on the outcome, the bytes consumed and
 * the payload (hashed), and the payload can never exceed what was consumed.
 */
#include "iod/mesh_proto.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Running FNV-1a of the decoded payload, and its length. */
struct payload {
	uint64_t hash; /* FNV-1a over every payload byte in order */
	uint64_t n;    /* payload bytes */
};

static void payload_add(void *ctx, const char *p, size_t n)
{
	struct payload *k = ctx;
	if (!n)
		abort(); /* empty runs are never reported */
	for (size_t i = 0; i < n; i++)
		k->hash = (k->hash ^ (uint8_t)p[i]) * 0x100000001b3ull;
	k->n += n;
}

/* Decode buf[pos..size) in pieces of step bytes. Returns the bytes consumed
 * or -1 on a framing error; *done when the body ended. */
static int64_t decode(const struct iod_http_msg *m, const char *buf, size_t pos, size_t size,
                      size_t step, bool resp, struct payload *k, bool *done)
{
	struct iod_http_body b;
	size_t start = pos;

	*done = false;
	iod_http_body_init(&b, m, buf, resp ? "GET" : NULL, resp ? 3 : 0);
	if (b.kind == IOD_HTTP_BODY_NONE) {
		*done = true;
		return 0;
	}
	while (pos < size && !*done) {
		size_t n = IOD_MIN(step, size - pos);
		uint64_t before = k->n;
		int64_t used = iod_http_body_decode(&b, buf + pos, n, done, payload_add, k);
		if (used < 0)
			return -1;
		if ((size_t)used > n || k->n - before > (uint64_t)used)
			abort(); /* claimed more than given, or payload beyond consumed */
		if ((size_t)used < n && !*done)
			abort(); /* partial consumption only at the end of the body */
		pos += (size_t)used;
	}
	return (int64_t)(pos - start);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_http_msg m;

	if (size < 1)
		return 0;
	bool resp = data[0] & 1;
	size_t step = (size_t)(data[0] >> 1) + 1;
	const char *buf = (const char *)data + 1;
	size--;
	int rc = iod_http_parse(buf, size, resp, &m);
	if (rc == -EAGAIN || rc == -EBADMSG || rc == -E2BIG)
		return 0;
	if (rc != 0 || m.head_len > size || m.hdr_n > IOD_HTTP_HEADERS_MAX)
		abort();
	for (uint32_t i = 0; i < m.hdr_n; i++)
		if (m.hdr[i].name_off + m.hdr[i].name_len > m.head_len ||
		    m.hdr[i].value_off + m.hdr[i].value_len > m.head_len)
			abort();
	if (!resp && m.method_off + m.method_len > m.head_len)
		abort();
	if (m.chunked && m.has_length)
		abort(); /* smuggling defence: never both */
	if (m.traceparent >= 0) {
		struct iod_mesh_traceparent tp;
		const struct iod_http_header *h = &m.hdr[m.traceparent];
		iod_mesh_traceparent_parse(buf + h->value_off, h->value_len, &tp);
	}
	struct payload a = {0xcbf29ce484222325ull, 0}, w = a;
	bool done_a, done_w;
	int64_t used_a = decode(&m, buf, m.head_len, size, step, resp, &a, &done_a);
	int64_t used_w = decode(&m, buf, m.head_len, size, size, resp, &w, &done_w);
	/* The split must not change the outcome. A framing error found in the
	 * pieces is found whole too (same bytes, same state machine). */
	if ((used_a < 0) != (used_w < 0))
		abort();
	if (used_a >= 0 && (used_a != used_w || done_a != done_w || a.n != w.n || a.hash != w.hash))
		abort();
	return 0;
}
