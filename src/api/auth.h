/*
 * auth.h: the API server's security shell (auth.c): its TLS material, who
 * a request comes from (client certificate or bearer token), what it asks
 * for (method and path as verb x resource for the authoriser in src/sec/),
 * and the audit trail of writes and denials. Only src/api includes this.
 */
#ifndef IOD_API_AUTH_H
#define IOD_API_AUTH_H

#include "iod/api.h"
#include "iod/sec.h"

#include <microhttpd.h>

/* The server's security state (one per server, on its loop). */
struct iod_api_sec {
	bool on;                                /* TLS + authentication (false: --insecure) */
	char cluster[IOD_SEC_CLUSTER_MAX];      /* trust domain */
	struct iod_sec_ca *ca;                  /* the cluster CA (with its key: signs CSRs) */
	char *ca_pem;                           /* CA certificate (served at GET /v1/ca) */
	char *cert_pem, *key_pem;               /* this server's TLS certificate and key */
	struct iod_sec_tls_creds *raft_tls;     /* the same for Raft (NULL: --raft-plaintext) */
	uint8_t secrets_key[IOD_SEC_KEY_BYTES]; /* seals secrets (when has_secrets_key) */
	bool has_secrets_key;
	/* audit: a JSON-lines file in the data dir plus a ring for GET /v1/audit */
	char audit_path[IOD_PATH_MAX]; /* data_dir/audit.log */
	FILE *audit;                   /* append, 0600 */
	uint64_t audit_bytes;          /* written to the current file */
	struct iod_sec_audit *ring;    /* IOD_SEC_AUDIT_RING records */
	uint32_t ring_n;               /* valid records */
	uint32_t ring_head;            /* next slot */
	uint64_t seq;                  /* records so far */
	uint64_t denied;               /* 401/403 answers */
};

/*
 * From the server config: --pki DIR (CA, keys; this server's certificate is
 * issued at start when missing), or --insecure (loopback only: plaintext,
 * no authentication). Refuses a non-loopback --api/--raft without TLS,
 * naming the flag.
 */
int iod_api_sec_init(struct iod_api_sec *s, const struct iod_server_config *c, struct iod_err *e);
void iod_api_sec_free(struct iod_api_sec *s);
/* Is host:port a loopback address (127/8, ::1, localhost)? */
bool iod_api_addr_is_loopback(const char *addr);

/* Who sent this request. Returns 0 (anonymous when no credential was sent),
 * -EACCES with why (a credential that does not check out), -ENOENT when a
 * token is not known here (a follower may not have applied it yet). For a
 * client certificate, *cert_not_after_s (may be NULL) is its expiry: a
 * connection that caches the identity must not outlive it. */
int iod_api_sec_identify(struct iod_api_sec *s, struct MHD_Connection *c,
                         const struct iod_state *st, struct iod_sec_identity *id,
                         uint64_t *cert_not_after_s, char *why, size_t why_len);

/*
 * What the request asks, for the authoriser: verb, resource and the
 * object's name (copied into name), and for PUT the body as JSON (*value,
 * owned by the caller; value may be NULL when it is not needed). -ENOENT for paths that need no authorisation
 * (GET /v1/ca: the CA certificate is public) and for unknown paths (the
 * router answers those). Pure.
 */
int iod_api_classify(const char *method, const char *url, const char *query_watch, const char *body,
                     size_t body_len, struct iod_sec_request *rq, char *name, size_t name_len,
                     json_t **value);

/* One audit record: a write, or any denied request. */
void iod_api_sec_audit(struct iod_api_sec *s, const struct iod_sec_identity *id, const char *method,
                       const char *url, int status, const char *remote, const char *detail);
/* Records after seq `after`, at most limit, oldest first: {"items": [...], "seq": N}. */
json_t *iod_api_sec_audit_list(const struct iod_api_sec *s, uint64_t after, uint32_t limit);

/* A new token for a POST /v1/tokens body: the Token object's value and the
 * token text (shown once). -EINVAL naming the field. */
int iod_api_sec_token_new(const json_t *body, const struct iod_sec_identity *by, uint64_t now_ms,
                          char *id, size_t id_len, char *token, size_t token_len, json_t **value,
                          struct iod_err *e);

/*
 * POST /v1/certificates {"kind": "node"|"user"|..., "name", "role"?, "csr"}:
 * the subject the certificate would carry (for the authoriser) and, once
 * allowed, the signed certificate. -EINVAL naming the field.
 */
int iod_api_sec_cert_subject(const json_t *body, const char *cluster,
                             struct iod_sec_identity *subject, struct iod_err *e);
/* by: who asks; a node asking for a service's SVID is named in it (its
 * subject's OU), so that proxies refuse it once that node is revoked. */
int iod_api_sec_cert_sign(struct iod_api_sec *s, const json_t *body,
                          const struct iod_sec_identity *subject, const struct iod_sec_identity *by,
                          uint64_t now_s, json_t **answer, struct iod_err *e);

#endif
