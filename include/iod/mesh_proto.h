/*
 * mesh_proto.h: the mesh's codecs (pure): W3C trace-context `traceparent`
 * values (src/mesh/traceparent.c) and the DNS responder's query and answer
 * codec (src/mesh/dns.c). HTTP/1.1 framing is include/iod/http.h.
 */
#ifndef IOD_MESH_PROTO_H
#define IOD_MESH_PROTO_H

#include "iod/mesh.h"

/* ---- W3C trace context (pure) ------------------------------------------ */

struct iod_mesh_traceparent {
	uint8_t trace_id[16]; /* never all zero */
	uint8_t span_id[8];   /* the caller's span (parent-id), never all zero */
	uint8_t flags;        /* bit 0: sampled */
};
/* Parse "00-<32 hex>-<16 hex>-<2 hex>" (version 00 exactly 55 chars; higher
 * versions may carry more after a '-'). -EINVAL when invalid. */
int iod_mesh_traceparent_parse(const char *s, size_t len, struct iod_mesh_traceparent *tp);
/* Writes 55 characters and a NUL (buf >= 56). */
void iod_mesh_traceparent_format(const struct iod_mesh_traceparent *tp, char *buf);
/* Most tracestate list members (W3C Trace Context, section 3.3.1.1). */
#define IOD_MESH_TRACESTATE_MEMBERS_MAX 32
/*
 * Check a tracestate list (the values of all tracestate headers joined by
 * ',') and write it to out without OWS and empty members. Returns its
 * length (0: no member), -EINVAL when the list is invalid and must be
 * dropped whole (a bad key or value, a duplicate key, more than 32
 * members), -E2BIG when out (cap bytes) is too small. Pure.
 */
int iod_mesh_tracestate_clean(const char *in, size_t len, char *out, size_t cap);
/* New random ids (never all zero). */
void iod_mesh_trace_ids_new(struct iod_rng *rng, uint8_t *id, size_t len);
void iod_mesh_hex(const uint8_t *b, size_t n, char *out); /* 2n chars + NUL */

/* ---- DNS responder codec (pure) ---------------------------------------- */

/*
 * Answer one DNS query for "<service>.iod" A records. lookup() maps a
 * service name to a VIP (0 = unknown -> NXDOMAIN). Writes the response into
 * out (cap bytes) and returns its length, or a negative errno when the query
 * is not worth answering (not a query, malformed header: drop it).
 */
typedef uint32_t (*iod_mesh_dns_lookup_fn)(void *ctx, const char *service);
int iod_mesh_dns_answer(const uint8_t *q, size_t qlen, uint8_t *out, size_t cap,
                        iod_mesh_dns_lookup_fn lookup, void *ctx);

#endif
