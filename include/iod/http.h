/*
 * http.h: iod's one HTTP layer, below the API and the mesh.
 *
 * Two parts:
 *   - the codec (pure, src/http/http.c): HTTP/1.1 message heads and body
 *     framing, strict where leniency enables request smuggling; the L7
 *     proxy, the test backend and the fuzz target use it.
 *   - the client (shell, src/http/client.c): one blocking request with a
 *     deadline, a body limit, a stop flag and mutual TLS (src/sec/); the
 *     API client, the mesh's control-plane source, the agent's HTTP health
 *     check, `iod top`, `iod viz` and `iod trace` use it.
 * libmicrohttpd stays the API server's (src/api/server.c).
 */
#ifndef IOD_HTTP_H
#define IOD_HTTP_H

#include "iod/base.h"

/* ---- the codec: HTTP/1.1 message heads (pure) ---------------------------- */

struct iod_http_header {
	uint16_t name_off, name_len;   /* offsets into the buffer */
	uint16_t value_off, value_len; /* value without surrounding blanks */
};

/* A parsed request or response head. Offsets point into the caller's buffer. */
struct iod_http_msg {
	bool is_response;
	uint16_t method_off, method_len; /* request: method */
	uint16_t target_off, target_len; /* request: request-target */
	uint16_t status;                 /* response: status code */
	uint8_t minor;                   /* HTTP/1.minor */
	uint32_t head_len;               /* bytes up to and including the blank line */
	bool chunked;                    /* Transfer-Encoding: chunked */
	bool has_length;                 /* Content-Length present */
	uint64_t content_length;         /* its value */
	bool keep_alive;                 /* connection persists after this message */
	bool expect_continue;            /* request: Expect: 100-continue */
	bool has_host;                   /* a Host field was seen */
	int traceparent;                 /* index of the last traceparent header or -1 */
	uint8_t traceparent_n;           /* traceparent headers seen (saturates at 255) */
	uint8_t tracestate_n;            /* tracestate headers seen (saturates at 255) */
	struct iod_http_header hdr[IOD_HTTP_HEADERS_MAX]; /* hdr_n headers */
	uint32_t hdr_n;
};

/*
 * Parse a message head from buf[0..len). Returns 0 when complete (msg
 * filled), -EAGAIN when more bytes are needed, -EBADMSG when malformed,
 * -E2BIG when the head exceeds the buffer or the header limit. Rejects
 * conflicting Content-Length values, Content-Length with chunked, bare CR,
 * obs-fold, whitespace before the colon, an HTTP/1.1 request without
 * exactly one Host (request smuggling defences).
 */
int iod_http_parse(const char *buf, size_t len, bool response, struct iod_http_msg *msg);

/* Body framing of a message: how to find its end. */
struct iod_http_body {
	enum {
		IOD_HTTP_BODY_NONE,
		IOD_HTTP_BODY_LENGTH,
		IOD_HTTP_BODY_CHUNKED,
		IOD_HTTP_BODY_CLOSE
	} kind;
	uint64_t remaining; /* LENGTH: bytes left; CHUNKED: bytes left in this chunk */
	uint8_t state;      /* chunked decoder state */
	uint32_t line_n;    /* chunk-size line bytes seen (bounded) */
};
/* Is header h (of the head in buf) named lower_name (lower case)? */
bool iod_http_header_is(const char *buf, const struct iod_http_header *h, const char *lower_name);

/* Framing after a head (request_method for responses: HEAD has no body). */
void iod_http_body_init(struct iod_http_body *b, const struct iod_http_msg *m, const char *buf,
                        const char *request_method, size_t method_len);
/*
 * Consume body bytes: returns how many of len belong to this message (<= len),
 * sets *done when its end was reached; -EBADMSG on bad chunk framing. Bytes
 * are passed through unchanged (the proxy forwards chunked bodies as is).
 */
int64_t iod_http_body_feed(struct iod_http_body *b, const char *p, size_t len, bool *done);
/* The payload bytes of a body, as they are found (chunk data without the
 * chunked framing; all bytes of a length- or close-framed body). */
typedef void (*iod_http_data_fn)(void *ctx, const char *p, size_t n);
/* iod_http_body_feed that also hands each payload run to data (may be
 * NULL): the decoder a receiver (iod's test backend, the fuzz target) uses. */
int64_t iod_http_body_decode(struct iod_http_body *b, const char *p, size_t len, bool *done,
                             iod_http_data_fn data, void *ctx);

/* ---- the client: one blocking request (shell) ----------------------------- */

struct iod_sec_tls;
struct iod_sec_tls_creds;

/*
 * A connection kept alive between requests to one server. Zero-filled (or
 * iod_http_conn_init) it is closed and plain HTTP; set creds for HTTPS
 * (src/sec/tls.c: the server must present a certificate of the cluster CA
 * naming a server of the cluster) and token for a bearer token.
 */
struct iod_http_conn {
	bool open;                       /* fd is connected (to addr) */
	int fd;                          /* the socket, when open */
	char addr[IOD_ADDR_MAX];         /* host:port it talks to */
	struct iod_sec_tls_creds *creds; /* NULL = plain HTTP; not owned, outlives the conn */
	int tls_peer_kind;               /* with creds: what the server must be (an enum
	                                    iod_sec_kind); 0 (anonymous) = a server */
	const char *tls_peer_name;       /* with creds: the name the server's certificate
	                                    must carry (a node's agent: that node);
	                                    NULL/"" = any of tls_peer_kind */
	const char *token;               /* bearer token sent with each request; NULL/"" = none */
	struct iod_sec_tls *tls;         /* the TLS session on fd (creds set) */
	uint64_t tls_gen;                /* creds' rotations when tls opened: a rotated
	                                    certificate reconnects */
	const volatile int *stop;        /* if non-NULL, a request aborts (-EINTR) within
	                                 IOD_HTTP_STOP_SLICE_MS of it becoming non-zero */
	size_t body_max;    /* answers larger than this fail -E2BIG; 0 = IOD_HTTP_BODY_MAX */
	bool status_only;   /* read the status line and stop there (a health
	                                check): no headers, no body, no reuse */
	bool sent;          /* out: the last request reached the wire (its head was
	                     written): a failure after it may have been applied */
	bool once;          /* in: the request must not reach a server twice (not
	                     idempotent; POST and PATCH always are): a kept-alive
	                     connection that fails after the request was written is
	                     not retried on a fresh one, the failure is returned
	                     with sent set */
	const char *src_ip; /* connect from this local address (numeric, the
	                       server's family; e.g. 127.0.0.5 to test per-address
	                       limits); NULL = the kernel's choice */
};

/* One answer. */
struct iod_http_response {
	int status; /* HTTP status */
	char *body; /* malloc'd, NUL-terminated (NULL when empty) */
	size_t len; /* body bytes */
};

void iod_http_conn_init(struct iod_http_conn *c);
void iod_http_conn_close(struct iod_http_conn *c);
void iod_http_response_free(struct iod_http_response *r);

/*
 * One request to addr ("host:port", "[v6]:port") for path, within
 * timeout_ms (connect, send and the whole answer): method, optional body
 * of len bytes with content_type (NULL: application/json), headers a NULL-
 * terminated list of extra "Name: value" lines (NULL = none). The
 * connection is reused when it goes to the same addr (a kept-alive one
 * that the server closed is retried once on a fresh one).
 * Returns 0 with r filled for any HTTP answer (4xx/5xx too); -ETIMEDOUT,
 * -ECONNREFUSED, -EHOSTUNREACH, -EPROTO, -E2BIG, -EINTR (stop flag),
 * -ENOMEM, with the reason in e.
 */
int iod_http_request(struct iod_http_conn *c, const char *addr, const char *method,
                     const char *path, const char *const *headers, const char *content_type,
                     const void *body, size_t len, uint32_t timeout_ms, struct iod_http_response *r,
                     struct iod_err *e);

/* GET addr path with a fresh connection: the status, or a negative errno. */
int iod_http_get(const char *addr, const char *path, uint32_t timeout_ms, char **body, size_t *len);

#endif
