/*
 * trace.c: spans and L4 flow records in a bounded per-worker ring, and their
 * OTLP/JSON form (what `iod trace -o json` prints and /v1/traces serves).
 *
 * The ring has one writer (the worker that owns it) and any number of
 * readers (the admin thread): each slot carries a seqlock, so the writer
 * never waits and a reader skips a slot that was overwritten while it
 * copied. Old spans are overwritten: the ring is bounded by design.
 * Never allocates on push; JSON conversion allocates (control path).
 */
#include "iod/mesh_proto.h"

#include <inttypes.h>
#include <string.h>

void iod_mesh_span_ring_init(struct iod_mesh_span_ring *r)
{
	memset(r->slot_seq, 0, sizeof(r->slot_seq));
	r->next = 1;
}

void iod_mesh_span_ring_push(struct iod_mesh_span_ring *r, const struct iod_mesh_span *s)
{
	uint64_t seq = __atomic_load_n(&r->next, __ATOMIC_RELAXED);
	uint32_t slot = (uint32_t)(seq & (IOD_MESH_SPANS_MAX - 1));

	__atomic_store_n(&r->slot_seq[slot], (seq << 1) | 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	r->slots[slot] = *s;
	r->slots[slot].seq = seq;
	__atomic_store_n(&r->slot_seq[slot], seq << 1, __ATOMIC_RELEASE);
	__atomic_store_n(&r->next, seq + 1, __ATOMIC_RELEASE);
}

uint32_t iod_mesh_span_ring_read(const struct iod_mesh_span_ring *r, uint64_t after,
                                 struct iod_mesh_span *out, uint32_t max)
{
	uint64_t next = __atomic_load_n(&r->next, __ATOMIC_ACQUIRE);
	uint64_t first = after + 1;
	uint32_t n = 0;

	if (next > IOD_MESH_SPANS_MAX && first < next - IOD_MESH_SPANS_MAX)
		first = next - IOD_MESH_SPANS_MAX;
	for (uint64_t seq = first; seq < next && n < max; seq++) {
		uint32_t slot = (uint32_t)(seq & (IOD_MESH_SPANS_MAX - 1));
		uint64_t s1 = __atomic_load_n(&r->slot_seq[slot], __ATOMIC_ACQUIRE);
		if (s1 != seq << 1)
			continue; /* being written or already overwritten */
		out[n] = r->slots[slot];
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->slot_seq[slot], __ATOMIC_RELAXED) != s1)
			continue;
		n++;
	}
	return n;
}

uint64_t iod_mesh_span_ring_lost(const struct iod_mesh_span_ring *r, uint64_t after)
{
	uint64_t next = __atomic_load_n(&r->next, __ATOMIC_ACQUIRE);
	uint64_t first = next > IOD_MESH_SPANS_MAX ? next - IOD_MESH_SPANS_MAX : 1;
	return first > after + 1 ? first - after - 1 : 0;
}

static void attr_str(json_t *attrs, const char *key, const char *v)
{
	json_array_append_new(attrs,
	                      json_pack("{s:s, s:{s:s}}", "key", key, "value", "stringValue", v));
}

static void attr_int(json_t *attrs, const char *key, uint64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "%" PRIu64, v);
	/* OTLP/JSON encodes 64-bit integers as strings. */
	json_array_append_new(attrs,
	                      json_pack("{s:s, s:{s:s}}", "key", key, "value", "intValue", s));
}

static bool all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

json_t *iod_mesh_span_otlp(const struct iod_mesh_span *s)
{
	char tid[33], sid[17], pid[17], t0[24], t1[24], name[96];
	json_t *attrs = json_array();
	bool err;

	iod_mesh_hex(s->trace_id, 16, tid);
	iod_mesh_hex(s->span_id, 8, sid);
	if (all_zero(s->parent_id, 8))
		pid[0] = 0;
	else
		iod_mesh_hex(s->parent_id, 8, pid);
	snprintf(t0, sizeof(t0), "%" PRIu64, s->start_unix_ns);
	snprintf(t1, sizeof(t1), "%" PRIu64, s->end_unix_ns);
	attr_str(attrs, "iod.service", s->service);
	attr_str(attrs, "iod.kind", s->kind == IOD_MESH_SPAN_HTTP ? "http" : "flow");
	if (s->peer[0])
		attr_str(attrs, "server.address", s->peer);
	attr_str(attrs, "client.address", s->client);
	attr_int(attrs, "iod.bytes_in", s->bytes_in);
	attr_int(attrs, "iod.bytes_out", s->bytes_out);
	attr_int(attrs, "iod.attempts", s->attempts);
	/* the path of each hop (service_mesh.transport): client -> proxy, and
	 * proxy -> endpoint (only once one was reached) */
	attr_str(attrs, "iod.transport.client", iod_mesh_tp_path_name(s->tp_down));
	if (s->peer[0])
		attr_str(attrs, "iod.transport.upstream", iod_mesh_tp_path_name(s->tp_up));
	if (s->caller[0])
		attr_str(attrs, "iod.caller", s->caller);
	if (s->denied_by[0]) /* refused by the receiving proxy: which policy */
		attr_str(attrs, "iod.policy.denied_by", s->denied_by);
	if (s->kind == IOD_MESH_SPAN_HTTP) {
		attr_str(attrs, "http.request.method", s->method);
		attr_str(attrs, "url.path", s->path);
		attr_int(attrs, "http.response.status_code", s->status);
		snprintf(name, sizeof(name), "%s %s", s->method, s->service);
		err = s->status == 0 || s->status >= 500;
	} else {
		attr_int(attrs, "iod.errno", s->status);
		snprintf(name, sizeof(name), "tcp %s", s->service);
		err = s->status != 0;
	}
	/* kind 3 = SPAN_KIND_CLIENT (the proxy calls the upstream on the
	 * caller's behalf); status code 1 = OK, 2 = ERROR. */
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:o, s:{s:i}}", "traceId", tid,
	                 "spanId", sid, "parentSpanId", pid, "name", name, "kind", 3,
	                 "startTimeUnixNano", t0, "endTimeUnixNano", t1, "attributes", attrs,
	                 "status", "code", err ? 2 : 1);
}

json_t *iod_mesh_spans_otlp(const struct iod_mesh_span *s, uint32_t n, const char *node)
{
	json_t *spans = json_array();
	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(spans, iod_mesh_span_otlp(&s[i]));
	json_t *rattrs = json_array();
	attr_str(rattrs, "service.name", "iod-mesh-proxy");
	attr_str(rattrs, "host.name", node && *node ? node : "local");
	return json_pack("{s:[{s:{s:o}, s:[{s:{s:s, s:s}, s:o}]}]}", "resourceSpans", "resource",
	                 "attributes", rattrs, "scopeSpans", "scope", "name", "iod.mesh", "version",
	                 IOD_VERSION, "spans", spans);
}
