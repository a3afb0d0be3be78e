/*
 * fuzz_http.c: libFuzzer target for the L7 proxy's HTTP/1.1 head parser and
 * body framing (Content-Length and the chunked decoder). The first byte
 * picks request or response and the feed chunk size; a parsed head's offsets
 * must stay inside the input, and body feeding must never claim more bytes
 * than it was given.
 */
#include "iod/mesh.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_mesh_http_msg m;
	struct iod_mesh_http_body b;
	bool done = false;

	if (size < 1)
		return 0;
	bool resp = data[0] & 1;
	size_t step = (size_t)(data[0] >> 1) + 1;
	const char *buf = (const char *)data + 1;
	size--;
	int rc = iod_mesh_http_parse(buf, size, resp, &m);
	if (rc == -EAGAIN || rc == -EBADMSG || rc == -E2BIG)
		return 0;
	if (rc != 0 || m.head_len > size || m.hdr_n > IOD_MESH_HTTP_HEADERS_MAX)
		abort();
	for (uint32_t i = 0; i < m.hdr_n; i++)
		if (m.hdr[i].name_off + m.hdr[i].name_len > m.head_len ||
		    m.hdr[i].value_off + m.hdr[i].value_len > m.head_len)
			abort();
	if (!resp && m.method_off + m.method_len > m.head_len)
		abort();
	if (m.traceparent >= 0) {
		struct iod_mesh_traceparent tp;
		const struct iod_mesh_http_header *h = &m.hdr[m.traceparent];
		iod_mesh_traceparent_parse(buf + h->value_off, h->value_len, &tp);
	}
	iod_mesh_http_body_init(&b, &m, buf, resp ? "GET" : NULL, resp ? 3 : 0);
	size_t pos = m.head_len;
	while (pos < size && !done) {
		size_t n = IOD_MIN(step, size - pos);
		int64_t used = iod_mesh_http_body_feed(&b, buf + pos, n, &done);
		if (used < 0)
			break;
		if ((size_t)used > n)
			abort();
		if ((size_t)used < n && !done)
			abort(); /* partial consumption only at the end of the body */
		pos += (size_t)used;
	}
	return 0;
}
