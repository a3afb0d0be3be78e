/*
 * sec.h: iod's security module: who is calling (identities from
 * certificates and bearer tokens), what they may do (roles checked per verb
 * and resource), the cluster CA that issues every certificate, the service
 * policies the mesh enforces, the audit trail and encrypted secrets.
 *
 * Pure cores: identity parsing and formatting, token parsing and hashing,
 * the authorisation decision (identity x verb x resource -> allow or deny
 * with a reason), service policy parsing and evaluation, and audit records
 * never read the clock, do I/O or draw randomness: time and random bytes
 * come from the caller. The shell half (pki.c, files.c, tls.c) talks to
 * GnuTLS and the file system.
 *
 * Why GnuTLS: Debian's libmicrohttpd (the API server) is built on it, and
 * so is libcurl's Debian flavour the HTTP client uses (libcurl-gnutls), so
 * one TLS library serves the server, the client, Raft and the mesh, with
 * one set of CA and certificate files; it also has a complete X.509 and
 * PKCS#10 API for the CA (docs/security.md).
 *
 * Identities are SPIFFE-style URIs in the certificate's subject
 * alternative name, under the cluster's trust domain:
 *   spiffe://<cluster>/user/<name>          a person or script (role in O=)
 *   spiffe://<cluster>/node/<name>          a node agent
 *   spiffe://<cluster>/server/<id>          a control-plane member
 *   spiffe://<cluster>/ns/<tenant>/svc/<s>  a service's proxy traffic
 * The full rules are in docs/security.md.
 */
#ifndef IOD_SEC_H
#define IOD_SEC_H

#include "iod/base.h"
#include "iod/state.h"

/* ---- identities --------------------------------------------------------- */

/* What kind of principal an identity is. */
#define IOD_SEC_KINDS(X)          \
	X(ANONYMOUS, "anonymous") \
	X(USER, "user")           \
	X(NODE, "node")           \
	X(SERVER, "server")       \
	X(SERVICE, "service")     \
	X(BOOTSTRAP, "bootstrap")

enum iod_sec_kind {
#define X(n, s) IOD_SEC_KIND_##n,
	IOD_SEC_KINDS(X)
#undef X
};
const char *iod_sec_kind_name(enum iod_sec_kind k);
/*
 * Does a certificate of this kind also serve TLS (extendedKeyUsage
 * serverAuth besides clientAuth)? Servers (the API, Raft) and nodes (the
 * agent's telemetry endpoint, its chunk server, the mesh proxy's inbound
 * listener) do; users, bootstrap tokens and service SVIDs (a replica's
 * own credential, the mesh proxy's outbound calls) are clients only, so a
 * stolen SVID cannot impersonate a listener. Pure.
 */
bool iod_sec_kind_serves(enum iod_sec_kind k);

/*
 * Roles, in increasing power for people: viewer < deployer < admin. node is
 * what a join token grants (exchange it for a node certificate, nothing
 * else); a node certificate acts as role node, a server's as role server.
 */
#define IOD_SEC_ROLES(X)        \
	X(NONE, "none")         \
	X(VIEWER, "viewer")     \
	X(DEPLOYER, "deployer") \
	X(ADMIN, "admin")       \
	X(NODE, "node")         \
	X(SERVER, "server")

enum iod_sec_role {
#define X(n, s) IOD_SEC_ROLE_##n,
	IOD_SEC_ROLES(X)
#undef X
};
const char *iod_sec_role_name(enum iod_sec_role r);
int iod_sec_role_parse(const char *s, enum iod_sec_role *out);

/* Who is calling. */
struct iod_sec_identity {
	enum iod_sec_kind kind;            /* anonymous, user, node, server, service */
	enum iod_sec_role role;            /* what it may do (authz.c) */
	char cluster[IOD_SEC_CLUSTER_MAX]; /* trust domain ("" for anonymous) */
	char name[IOD_NAME_MAX];           /* user, node, server id or service name */
	char tenant[IOD_NAME_MAX];         /* services: their tenant ("default") */
	char via[IOD_NAME_MAX];            /* how it was proven: "certificate", "token ID" */
};

/* The anonymous identity: what a request without credentials is. */
void iod_sec_identity_anonymous(struct iod_sec_identity *id);
/* Cluster names: 1..IOD_SEC_CLUSTER_MAX-1 of [a-z0-9.-], starting with a
 * letter or digit (a DNS name: it is the SPIFFE trust domain). */
bool iod_sec_cluster_valid(const char *cluster);
/* Principal names: the state module's object names ([A-Za-z0-9._-]). */
bool iod_sec_name_valid(const char *name);

/*
 * Map a certificate's URI SAN (and its subject's O=, which carries a
 * user's role, like Kubernetes groups) to an identity. The URI must be in
 * cluster's trust domain (want_cluster; NULL accepts any and records it).
 * Strict: unknown path shapes, bad names, a role that does not fit the kind
 * (a node claiming admin) are -EINVAL with the reason in e. Pure.
 */
int iod_sec_identity_from_uri(const char *uri, const char *org, const char *want_cluster,
                              struct iod_sec_identity *out, struct iod_err *e);
/* The URI of an identity (for certificates); -ENOSPC, -EINVAL (anonymous). */
int iod_sec_identity_uri(const struct iod_sec_identity *id, char *buf, size_t len);
/* Human text for messages: `user "alice" (admin, certificate)`, `anonymous`. */
void iod_sec_identity_format(const struct iod_sec_identity *id, char *buf, size_t len);
/* A compact subject for audit records: "user:alice", "node:node-1", "anonymous". */
void iod_sec_identity_subject(const struct iod_sec_identity *id, char *buf, size_t len);
/*
 * The name of the Revocation object that revokes an identity (`iod
 * revoke`): "node.NAME", "user.NAME", "server.ID", "service.TENANT.NAME"
 * (tenant "" is "default"). -EINVAL for another kind or a bad name (a
 * service's tenant and name may not hold '.', so the key is unambiguous),
 * -ENOSPC when it is not an object name (IOD_NAME_MAX). Pure.
 */
int iod_sec_revocation_key(enum iod_sec_kind kind, const char *tenant, const char *name, char *buf,
                           size_t len);

/* ---- bearer tokens ------------------------------------------------------ */

/*
 * A token is "iod." + 12 hex digits of id + "." + 48 hex digits of secret
 * (192 bits), e.g. iod.0123456789ab.<48 hex>. The id names the Token object
 * (kind token, name = id) that stores the role, expiry and the SHA-256 of the
 * secret; the secret itself is never stored (Kubernetes' bootstrap tokens
 * and GitHub's prefixed tokens have this shape).
 */
#define IOD_SEC_TOKEN_ID_HEX 12
#define IOD_SEC_TOKEN_SECRET_HEX 48
#define IOD_SEC_TOKEN_LEN (4 + IOD_SEC_TOKEN_ID_HEX + 1 + IOD_SEC_TOKEN_SECRET_HEX)
#define IOD_SEC_HASH_HEX 64 /* SHA-256 as hex */

struct iod_sec_token {
	char id[IOD_SEC_TOKEN_ID_HEX + 1];         /* lower-case hex */
	char secret[IOD_SEC_TOKEN_SECRET_HEX + 1]; /* lower-case hex */
};

/* Parse a token (surrounding white space allowed, nothing else). Pure. */
int iod_sec_token_parse(const char *text, size_t len, struct iod_sec_token *out, struct iod_err *e);
/* Build a token from random bytes (the caller draws them: 6 + 24 bytes). */
void iod_sec_token_from_bytes(const uint8_t rnd[30], struct iod_sec_token *out);
/* "iod.<id>.<secret>" into buf (IOD_SEC_TOKEN_LEN + 1 bytes). */
void iod_sec_token_format(const struct iod_sec_token *t, char *buf, size_t len);
/* "sha256:" + hex of SHA-256(secret): what a Token object stores. */
void iod_sec_token_hash(const struct iod_sec_token *t, char *buf, size_t len);

/*
 * Check a token against its Token object's value ({"role", "hash",
 * "expires_ms", "node"...}) at time now_ms (Unix ms, from the caller):
 * 0 and the identity it proves, or -EACCES with the reason (wrong secret,
 * expired, malformed record). The hash compare takes constant time.
 */
int iod_sec_token_check(const struct iod_sec_token *t, const json_t *record, uint64_t now_ms,
                        const char *cluster, struct iod_sec_identity *out, struct iod_err *e);

/* ---- authorisation ------------------------------------------------------ */

/* What a request does. */
#define IOD_SEC_VERBS(X)    \
	X(GET, "get")       \
	X(LIST, "list")     \
	X(WATCH, "watch")   \
	X(PUT, "put")       \
	X(CREATE, "create") \
	X(DELETE, "delete")

enum iod_sec_verb {
#define X(n, s) IOD_SEC_VERB_##n,
	IOD_SEC_VERBS(X)
#undef X
};
const char *iod_sec_verb_name(enum iod_sec_verb v);

/* What it does it to: the state's object kinds, then the API's other paths. */
#define IOD_SEC_RESOURCES(X)            \
	X(NODE, "node")                 \
	X(SERVICE, "service")           \
	X(REPLICA, "replica")           \
	X(ENDPOINT, "endpoint")         \
	X(POLICY, "policy")             \
	X(CONFIG, "config")             \
	X(TOKEN, "token")               \
	X(SECRET, "secret")             \
	X(REVOCATION, "revocation")     \
	X(DEPLOY, "deploy")             \
	X(TXN, "txn")                   \
	X(LEASE, "lease")               \
	X(MEMBER, "member")             \
	X(STATUS, "status")             \
	X(METRICS, "metrics")           \
	X(WATCH_ALL, "watch")           \
	X(AUDIT, "audit")               \
	X(CERTIFICATE, "certificate")   \
	X(SECRET_VALUE, "secret-value") \
	X(FAULT, "fault")               \
	X(CHECKPOINT, "checkpoint")     \
	X(EXTENDER, "extender")         \
	X(XFERPEER, "xferpeer")         \
	X(NETPOLICY, "netpolicy")

enum iod_sec_resource {
#define X(n, s) IOD_SEC_RES_##n,
	IOD_SEC_RESOURCES(X)
#undef X
	    IOD_SEC_RES_COUNT
};
const char *iod_sec_resource_name(enum iod_sec_resource r);
/* Resources that hold credentials or ciphertext: hidden from non-admins in
 * lists and watches. */
bool iod_sec_resource_sensitive(enum iod_sec_resource r);
/* The resource a state object kind is (enum iod_state_kind). */
enum iod_sec_resource iod_sec_resource_of_kind(enum iod_state_kind k);

/* One request as the authoriser sees it. */
struct iod_sec_request {
	enum iod_sec_verb verb;
	enum iod_sec_resource res;
	const char *name;              /* object (or member id, lease id); "" or NULL for lists */
	const json_t *value;           /* PUT: the new value (may be NULL) */
	const struct iod_state *state; /* the current state, for ownership rules (may be NULL) */
	/* certificate requests: the identity the new certificate would carry */
	const struct iod_sec_identity *subject;
};

/* The verdict. */
struct iod_sec_decision {
	bool allow;                   /* the request may go ahead */
	int status;                   /* 0 when allowed; 401 or 403 */
	char reason[IOD_ERR_MSG_MAX]; /* why not, naming the identity */
};

/*
 * The authorisation core (pure): roles per verb and resource
 * (docs/security.md has the table), plus ownership for nodes: a node may
 * write only its own Node, Replicas placed on it (and replicas whose node is
 * gone, which rescheduling moves), and Endpoints of its replicas; anonymous
 * is denied (401). Always fills d; returns 0 (allowed) or -EACCES.
 */
int iod_sec_authorize(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                      struct iod_sec_decision *d);

/* ---- service policies (the mesh's L7/L4 authorisation) ------------------ */

enum iod_sec_action { IOD_SEC_ALLOW, IOD_SEC_DENY };

/* One rule: `from` service(s) -> `to` service(s), methods and ports. */
struct iod_sec_policy {
	char name[IOD_NAME_MAX];                  /* for counters and traces */
	char from_tenant[IOD_NAME_MAX];           /* "*" = any tenant */
	char from[IOD_NAME_MAX];                  /* source service, "*" = any */
	char to_tenant[IOD_NAME_MAX];             /* "*" = any tenant */
	char to[IOD_NAME_MAX];                    /* destination service, "*" = any */
	uint32_t methods;                         /* bit per IOD_SEC_METHODS; 0 = any */
	uint16_t ports[IOD_SEC_POLICY_PORTS_MAX]; /* destination ports; none = any */
	uint32_t ports_n;
	enum iod_sec_action action;
};

#define IOD_SEC_METHODS(X) \
	X(GET) X(HEAD) X(POST) X(PUT) X(DELETE) X(PATCH) X(OPTIONS) X(CONNECT) X(TRACE)

/* A parsed set of policies: what a receiving proxy enforces. */
struct iod_sec_policy_set {
	struct iod_sec_policy p[IOD_SEC_POLICIES_MAX]; /* in the order given */
	uint32_t n;
};

/*
 * Parse policies from JSON: an array of {"name"?, "from", "to", "methods"?,
 * "ports"?, "action"?: "allow"|"deny"} (default allow), or one such object.
 * from/to: "svc", "tenant/svc", "tenant/ *" (any service of a tenant) or "*"; a bare name takes
 * default_tenant. Appends to set; -EINVAL naming the entry and field, -ENOSPC
 * past IOD_SEC_POLICIES_MAX. Pure.
 */
int iod_sec_policy_parse(const json_t *j, const char *default_tenant,
                         struct iod_sec_policy_set *set, struct iod_err *e);
/* One policy as JSON (the API's and `iod get policies`' form). */
json_t *iod_sec_policy_to_json(const struct iod_sec_policy *p);

/* The verdict for one call, with the policy that decided it ("" = default). */
struct iod_sec_verdict {
	bool allow;
	char policy[IOD_NAME_MAX]; /* the deciding policy's name, or a default's */
	char reason[IOD_ERR_MSG_MAX];
};

/*
 * Decide a call from (from_tenant, from) to (to_tenant, to) with method
 * (NULL for L4) on port: a matching deny wins; then a matching allow; then,
 * when some allow policy selects the destination, deny (it is allow-listed,
 * as Istio's ALLOW policies make it); else the default: allow within a
 * tenant, deny across tenants. Pure.
 */
void iod_sec_policy_decide(const struct iod_sec_policy_set *set, const char *from_tenant,
                           const char *from, const char *to_tenant, const char *to,
                           const char *method, uint16_t port, struct iod_sec_verdict *v);

/* ---- audit records ------------------------------------------------------ */

/* One API write (or denied request): who, what, when, result. */
struct iod_sec_audit {
	uint64_t at_ms;                    /* Unix ms, from the caller */
	uint64_t seq;                      /* per-server sequence number */
	char who[IOD_NAME_MAX + 16];       /* iod_sec_identity_subject() */
	char via[IOD_NAME_MAX];            /* "certificate", "token ID", "" */
	char method[8];                    /* HTTP method */
	char path[IOD_SEC_AUDIT_PATH_MAX]; /* request path (query stripped) */
	int status;                        /* HTTP status of the answer */
	char remote[IOD_ADDR_MAX];         /* client address */
	char detail[IOD_ERR_MSG_MAX];      /* denial reason or error text; "" when fine */
};
/* As one JSON object (the audit log's line and /v1/audit's items). */
json_t *iod_sec_audit_to_json(const struct iod_sec_audit *a);

/* ---- secrets at rest ---------------------------------------------------- */

#define IOD_SEC_KEY_BYTES 32 /* AES-256 */

/*
 * Seal plaintext with the cluster's secrets key (AES-256-GCM, a random
 * 96-bit nonce from the caller, the secret's name as associated data) into
 * "v1:<base64 nonce|ciphertext|tag>"; open reverses it and fails (-EBADMSG)
 * on any tampering or a wrong key or name. Output strings are malloc'd.
 */
int iod_sec_seal(const uint8_t key[IOD_SEC_KEY_BYTES], const uint8_t nonce[12], const char *name,
                 const void *plain, size_t len, char **out, struct iod_err *e);
int iod_sec_open(const uint8_t key[IOD_SEC_KEY_BYTES], const char *name, const char *sealed,
                 void **plain, size_t *len, struct iod_err *e);

/* ---- PKI: the cluster CA (GnuTLS; pki.c) --------------------------------- */

/* Key and certificate as PEM text (malloc'd; the caller frees both). */
struct iod_sec_pem {
	char *cert; /* PEM certificate (chain: leaf only) */
	char *key;  /* PEM private key; NULL when the key stays elsewhere (CSR) */
};
void iod_sec_pem_free(struct iod_sec_pem *p);

/* What to put in a certificate. */
struct iod_sec_cert_req {
	struct iod_sec_identity id; /* subject: URI SAN (and O= role for users) */
	bool server; /* also a TLS server: add serverAuth (iod_sec_kind_serves says who
	                should); the SANs below go in whenever given */
	char dns[IOD_SEC_SANS_MAX][IOD_ADDR_MAX]; /* DNS names (server certificates) */
	uint32_t dns_n;
	char ip[IOD_SEC_SANS_MAX][IOD_ADDR_MAX]; /* IP addresses (server certificates) */
	uint32_t ip_n;
	uint64_t not_before_s;   /* Unix seconds */
	uint64_t ttl_s;          /* lifetime */
	char node[IOD_NAME_MAX]; /* services: the node it is issued to, as the subject's
	                            OU ("" = none), so a revoked node's SVIDs are refused */
};

/* A CA: its certificate and key, loaded or created. */
struct iod_sec_ca;

/* Create a new self-signed CA for cluster (ECDSA P-256, ttl_s from now_s). */
int iod_sec_ca_create(const char *cluster, uint64_t now_s, uint64_t ttl_s, struct iod_sec_ca **out,
                      struct iod_err *e);
/* Load from PEM text (the key may be NULL: a CA that verifies but cannot sign). */
int iod_sec_ca_load(const char *cert_pem, const char *key_pem, struct iod_sec_ca **out,
                    struct iod_err *e);
void iod_sec_ca_free(struct iod_sec_ca *ca);
/* The CA's cluster (trust domain) and PEM texts (borrowed). */
const char *iod_sec_ca_cluster(const struct iod_sec_ca *ca);
const char *iod_sec_ca_cert_pem(const struct iod_sec_ca *ca);
const char *iod_sec_ca_key_pem(const struct iod_sec_ca *ca); /* NULL without key */
bool iod_sec_ca_can_sign(const struct iod_sec_ca *ca);

/* Issue a key and certificate for rq (new ECDSA P-256 key). */
int iod_sec_ca_issue(const struct iod_sec_ca *ca, const struct iod_sec_cert_req *rq,
                     struct iod_sec_pem *out, struct iod_err *e);
/* A key and a PKCS#10 request for it (the agent's half of bootstrap). */
int iod_sec_csr_create(const char *common_name, struct iod_sec_pem *out, struct iod_err *e);
/*
 * Sign a CSR (its public key only: the subject comes from rq, never from
 * the CSR), after checking its self-signature. out->key is NULL.
 */
int iod_sec_ca_sign_csr(const struct iod_sec_ca *ca, const char *csr_pem, size_t csr_len,
                        const struct iod_sec_cert_req *rq, struct iod_sec_pem *out,
                        struct iod_err *e);

/* What a certificate says (for rotation and `iod cert show`). */
struct iod_sec_cert_info {
	struct iod_sec_identity id; /* from its URI SAN and O= */
	uint64_t not_before_s;      /* Unix seconds */
	uint64_t not_after_s;
	char serial[41];         /* hex */
	char node[IOD_NAME_MAX]; /* services: the node it was issued to (OU; "" = none) */
	bool server_auth;        /* extendedKeyUsage has serverAuth: it may serve TLS */
	bool client_auth;        /* extendedKeyUsage has clientAuth: it may be a TLS client */
};

/*
 * Verify a peer certificate chain (DER, leaf first) against ca at now_s and
 * map it to an identity. -EACCES with the reason (not from this CA, expired,
 * no iod identity). Used by every TLS endpoint.
 */
int iod_sec_ca_verify_der(const struct iod_sec_ca *ca, const void *der, size_t len, uint64_t now_s,
                          struct iod_sec_cert_info *info, struct iod_err *e);
/*
 * Read a certificate (PEM or DER) without verifying it and map its identity
 * (cluster from its URI): what `iod cert show` prints, and the fuzzed
 * certificate-to-identity path. -EINVAL on anything malformed.
 */
int iod_sec_cert_inspect(const void *data, size_t len, struct iod_sec_cert_info *info,
                         struct iod_err *e);

/* Is a certificate valid from not_before_s to not_after_s due for renewal
 * at now_s? At two thirds of its life (kubelet's rotation point), so a
 * failed renewal has a third of the life to retry in; the life starts
 * IOD_SEC_CERT_BACKDATE_S after not_before (the CA's skew margin). Pure. */
/* When that is (unix s; 0 for a certificate with no life). Pure. */
uint64_t iod_sec_cert_renew_at(uint64_t not_before_s, uint64_t not_after_s);
bool iod_sec_cert_renew_due(uint64_t not_before_s, uint64_t not_after_s, uint64_t now_s);

/* The DER bytes of the first certificate in PEM text (malloc'd): what a TLS
 * peer presents. -EINVAL when there is none. */
int iod_sec_cert_der(const char *pem, void **der, size_t *len);

/* ---- mutual TLS on non-blocking sockets (tls.c) ---------------------------- */

/*
 * Credentials: the CA to trust (peers must chain to it and carry an
 * identity of its cluster), our certificate and key. rotate swaps in a new
 * certificate for sessions opened afterwards; open sessions keep theirs.
 * Thread-safe: one credentials object may serve sessions on many threads.
 */
struct iod_sec_tls_creds;
int iod_sec_tls_creds_new(const char *ca_pem, const char *cert_pem, const char *key_pem,
                          struct iod_sec_tls_creds **out, struct iod_err *e);
int iod_sec_tls_creds_rotate(struct iod_sec_tls_creds *c, const char *cert_pem, const char *key_pem,
                             struct iod_err *e);
uint64_t iod_sec_tls_creds_rotations(struct iod_sec_tls_creds *c);
const struct iod_sec_ca *iod_sec_tls_creds_ca(const struct iod_sec_tls_creds *c);
void iod_sec_tls_creds_free(struct iod_sec_tls_creds *c);

/* One session on a connected non-blocking fd (not owned). Servers require
 * a client certificate. want: POLLIN or POLLOUT to wait for on -EAGAIN. */
struct iod_sec_tls;
int iod_sec_tls_open(struct iod_sec_tls_creds *c, int fd, bool client, struct iod_sec_tls **out,
                     struct iod_err *e);
/* 0 when done and the peer's certificate verified; -EAGAIN; -ECONNABORTED,
 * -EACCES (peer not of this cluster, expired...) with why in e. */
int iod_sec_tls_handshake(struct iod_sec_tls *t, unsigned *want, struct iod_err *e);
/* > 0 bytes, 0 (read) peer closed, -EAGAIN, or -ECONNRESET. */
long iod_sec_tls_read(struct iod_sec_tls *t, void *buf, size_t n, unsigned *want,
                      struct iod_err *e);
long iod_sec_tls_write(struct iod_sec_tls *t, const void *buf, size_t n, unsigned *want,
                       struct iod_err *e);
/*
 * A session without a socket, for callers whose event loop moves the bytes
 * (the Raft transport on libuv): ciphertext the session writes goes to
 * push (which must take all n bytes, copying them, or fail: -errno), and
 * ciphertext received is handed over with feed (copied). handshake, read
 * and write then return -EAGAIN when they need more fed bytes.
 */
typedef int (*iod_sec_tls_push_fn)(void *ctx, const void *buf, size_t n);
int iod_sec_tls_open_buffered(struct iod_sec_tls_creds *c, bool client, iod_sec_tls_push_fn push,
                              void *ctx, struct iod_sec_tls **out, struct iod_err *e);
/* 0, or -ENOMEM. */
int iod_sec_tls_feed(struct iod_sec_tls *t, const void *buf, size_t n);
/* Decrypted bytes buffered in the session (readable without the fd). */
size_t iod_sec_tls_pending(struct iod_sec_tls *t);
/* The verified peer (NULL before the handshake is done). */
const struct iod_sec_cert_info *iod_sec_tls_peer(const struct iod_sec_tls *t);
void iod_sec_tls_close(struct iod_sec_tls *t);

/*
 * Blocking use for clients, each bounded by deadline_ms (monotonic ms,
 * iod_clock_now_ns()): connect opens a client session on fd and
 * completes the handshake (the peer verified against the CA and required
 * to be of kind want_peer: a client of the API wants a server); write_all
 * sends everything; read_wait returns > 0 bytes, 0 at EOF, -ETIMEDOUT or
 * -ECONNRESET. creds for a client may carry no certificate (cert_pem NULL
 * in iod_sec_tls_creds_new): it then proves itself another way (a token).
 */
int iod_sec_tls_connect(struct iod_sec_tls_creds *c, int fd, enum iod_sec_kind want_peer,
                        uint64_t deadline_ms, struct iod_sec_tls **out, struct iod_err *e);
int iod_sec_tls_write_all(struct iod_sec_tls *t, int fd, const void *buf, size_t n,
                          uint64_t deadline_ms, struct iod_err *e);
long iod_sec_tls_read_wait(struct iod_sec_tls *t, int fd, void *buf, size_t n, uint64_t deadline_ms,
                           struct iod_err *e);
/* Credentials from files: the CA certificate, and optionally (cert NULL or
 * "") a certificate and its key (which must be 0600). */
int iod_sec_tls_creds_load(const char *ca_path, const char *cert_path, const char *key_path,
                           struct iod_sec_tls_creds **out, struct iod_err *e);

/* ---- files: the PKI directory and the client config (files.c) ------------ */

/*
 * A PKI directory (what `iod init` and `iod up` create; servers read it):
 *   ca.crt            the cluster CA certificate (0644)
 *   ca.key            its key (0600): on servers only
 *   secrets.key       the secrets-at-rest key (0600): on servers only
 *   server-<id>.crt/.key, admin.crt/.key, node-<name>.crt/.key ...
 * Keys are written 0600 in a 0700 directory, atomically (temp + rename),
 * and refused on read when group or others may read them (as ssh does).
 */
#define IOD_SEC_CA_TTL_S (10ull * 365 * 24 * 3600) /* kubeadm: 10 years */
#define IOD_SEC_SERVER_TTL_S (365ull * 24 * 3600)  /* kubeadm: 1 year */
#define IOD_SEC_USER_TTL_S (365ull * 24 * 3600)
#define IOD_SEC_NODE_TTL_S (24ull * 3600) /* rotated at 2/3 of its life */
#define IOD_SEC_SERVICE_TTL_S 3600ull     /* SPIFFE's default SVID life */

/* mkdir -p with mode for the created directories. */
int iod_sec_mkdirs(const char *dir, unsigned mode, struct iod_err *e);
/* Write text to path atomically with mode (0600 for keys). */
int iod_sec_write_file(const char *path, const char *text, size_t len, unsigned mode,
                       struct iod_err *e);
/* Read a PEM/key file (bounded by IOD_SEC_PEM_MAX); secret files must not be
 * readable by group or others: -EPERM with the chmod to run. */
int iod_sec_read_file(const char *path, bool secret, char **out, struct iod_err *e);

/* Create dir's CA and secrets key (refuses to overwrite: -EEXIST). */
int iod_sec_pki_create(const char *dir, const char *cluster, uint64_t now_s, struct iod_err *e);
/* Load dir's CA (with its key when want_key). */
int iod_sec_pki_load_ca(const char *dir, bool want_key, struct iod_sec_ca **out, struct iod_err *e);
/* The secrets key of dir. */
int iod_sec_pki_secrets_key(const char *dir, uint8_t key[IOD_SEC_KEY_BYTES], struct iod_err *e);
/* Issue rq with ca and write <dir>/<base>.crt and <base>.key (0600). */
int iod_sec_pki_issue_files(const struct iod_sec_ca *ca, const char *dir, const char *base,
                            const struct iod_sec_cert_req *rq, struct iod_err *e);

/*
 * The client config (~/.config/iod/config, or $IOD_CONFIG): contexts like a
 * kubeconfig, each naming the servers, the CA to trust and a credential
 * (a client certificate and key, or a token). JSON, written 0600:
 *   {"current_context": "local",
 *    "contexts": {"local": {"cluster": "local", "servers": ["127.0.0.1:7400"],
 *                           "ca": "/.../ca.crt", "cert": "/.../admin.crt",
 *                           "key": "/.../admin.key"}}}
 */
struct iod_sec_context {
	char name[IOD_NAME_MAX];           /* context name */
	char cluster[IOD_SEC_CLUSTER_MAX]; /* trust domain */
	char servers[IOD_PATH_MAX];        /* "host:port,host:port" */
	char ca[IOD_PATH_MAX];             /* CA certificate file; "" = plain HTTP */
	char cert[IOD_PATH_MAX];           /* client certificate file, or "" */
	char key[IOD_PATH_MAX];            /* its key */
	char token[IOD_SEC_TOKEN_LEN + 1]; /* bearer token, or "" */
	char path[IOD_PATH_MAX];           /* where it was read from ("" = none) */
};

/*
 * Where the client config is: $IOD_CONFIG; else $IOD_STATE_DIR/config when
 * that exists (the cluster `iod up` runs from there); else
 * $XDG_CONFIG_HOME/iod/config or ~/.config/iod/config.
 */
void iod_sec_config_path(char *buf, size_t len);
/*
 * Load a context (NULL name: $IOD_CONTEXT, else the current one) from path
 * (NULL: iod_sec_config_path()). -ENOENT when there is no file (not an
 * error for callers: they then use plain defaults); -EINVAL naming what is
 * wrong. Environment overrides apply on top: IOD_SERVER, IOD_TOKEN,
 * IOD_CA, IOD_CERT, IOD_KEY.
 */
int iod_sec_context_load(const char *path, const char *name, struct iod_sec_context *out,
                         struct iod_err *e);
/* The TLS credentials a context names: its CA and, unless it has a token,
 * its client certificate. *out NULL (and 0) when it names no CA: plain HTTP. */
int iod_sec_context_creds(const struct iod_sec_context *c, struct iod_sec_tls_creds **out,
                          struct iod_err *e);
/* Add or replace context c in the file at path (created 0600), making it
 * the current one when make_current. */
int iod_sec_context_save(const char *path, const struct iod_sec_context *c, bool make_current,
                         struct iod_err *e);

/* Random bytes from GnuTLS' CSPRNG (keys, tokens, nonces). */
int iod_sec_random(void *buf, size_t len);

#endif
