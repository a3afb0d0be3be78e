/*
 * api.h: the control plane's HTTP/JSON API: the server (`iod server`) and a
 * small blocking client every command and the node agent can reuse.
 *
 * The client speaks HTTP/1.1 over plain TCP sockets with keep-alive, one
 * request at a time, bounded by a timeout. It knows a list of servers
 * (--server, IOD_SERVER, or 127.0.0.1:7400) and follows the cluster:
 * a server that is not the leader answers 503 with the leader's address and
 * the client retries there; a server that does not answer is skipped; it
 * gives up after retry_ms. Reads are served by whichever server answers.
 * The API itself is documented in docs/control-plane.md.
 */
#ifndef IOD_API_H
#define IOD_API_H

#include "iod/base.h"
#include "iod/http.h"
#include "iod/sec.h"
#include "iod/state.h"

/* Default API address when neither --server nor IOD_SERVER is given. */
#define IOD_API_DEFAULT_SERVER "127.0.0.1:7400"

/* A response: status code and the body (NUL-terminated), parsed as JSON when it is. */
struct iod_api_response {
	int status;                /* HTTP status, 0 when none was received */
	char *body;                /* malloc'd, NUL-terminated; NULL when empty */
	size_t len;                /* body bytes */
	json_t *json;              /* body as JSON, or NULL */
	char server[IOD_ADDR_MAX]; /* the server that answered */
};

/* A cluster client: the servers it knows and the connection it keeps. */
struct iod_api_client {
	char servers[IOD_STATE_PEERS_MAX + 1][IOD_ADDR_MAX]; /* known API addresses */
	uint32_t servers_n;                                  /* entries in servers */
	uint32_t cur;                                        /* server the connection goes to */
	struct iod_http_conn conn;                           /* kept-alive connection (src/http/) */
	uint32_t timeout_ms;     /* per attempt (connect + request + answer) */
	uint32_t retry_ms;       /* total time to keep trying other servers */
	uint32_t retry_sleep_ms; /* pause between rounds over all servers */
	uint32_t attempts;       /* attempts made by the last request (for tests) */
	/* security (docs/security.md): HTTPS when creds is set, the server
	 * verified against the cluster CA and required to be a server of it */
	struct iod_sec_tls_creds *creds;   /* CA (+ client certificate); NULL: plain HTTP */
	bool own_creds;                    /* creds freed by iod_api_client_close */
	char token[IOD_SEC_TOKEN_LEN + 1]; /* bearer token sent with each request, or "" */
};

/*
 * servers: "host:port[,host:port...]"; NULL = $IOD_SERVER, else
 * IOD_API_DEFAULT_SERVER. Defaults: timeout 5 s, retry 10 s.
 */
int iod_api_client_init(struct iod_api_client *c, const char *servers, struct iod_err *e);
/* Close the connection; free creds when the client owns them. */
void iod_api_client_close(struct iod_api_client *c);
/*
 * Use TLS with creds (not owned; NULL: plain HTTP) and send token (NULL or
 * "": none) with every request. Closes the current connection.
 */
void iod_api_client_set_creds(struct iod_api_client *c, struct iod_sec_tls_creds *creds,
                              const char *token);
/*
 * Init from the client config (iod_sec_context_load: $IOD_CONFIG,
 * $IOD_STATE_DIR/config, ~/.config/iod/config, with the IOD_SERVER, IOD_CA,
 * IOD_CERT, IOD_KEY and IOD_TOKEN overrides): its servers unless servers is
 * given, HTTPS with its CA, its client certificate or token. Without a
 * config file, as iod_api_client_init (plain HTTP). -EINVAL/-EPERM naming
 * the file that is wrong.
 */
int iod_api_client_init_config(struct iod_api_client *c, const char *servers, struct iod_err *e);

/*
 * One request, following the leader. Returns 0 when a server answered with
 * anything but "not the leader"/"no leader" (r->status says what; 4xx and
 * 5xx are answers too), -EHOSTUNREACH when no server answered within
 * retry_ms, -ENOTCONN when servers answered but none was the leader.
 * Only idempotent requests (GET, HEAD, PUT/DELETE without prev_rev) are
 * retried after a 504 outcome_unknown or a sent-but-unanswered request;
 * any other request returns that 504, or -EINPROGRESS ("outcome unknown"),
 * so it is never applied twice.
 */
int iod_api_request(struct iod_api_client *c, const char *method, const char *path,
                    const char *content_type, const void *body, size_t len,
                    struct iod_api_response *r, struct iod_err *e);
void iod_api_response_free(struct iod_api_response *r);

/*
 * One request to one address on a kept (or new) connection, no retries
 * (iod_http_request; the body parsed as JSON when it is). Returns 0 or a
 * negative errno (-ECONNREFUSED, -ETIMEDOUT, -EPROTO...). On error the
 * connection is closed.
 */
int iod_api_http_once(struct iod_http_conn *conn, const char *addr, const char *method,
                      const char *path, const char *content_type, const void *body, size_t len,
                      uint32_t timeout_ms, struct iod_api_response *r, struct iod_err *e);

/* The error message of an API error body ({"error": "..."}), or the status line. */
const char *iod_api_error_text(const struct iod_api_response *r);

/* ---- server ------------------------------------------------------------- */

/* Run `iod server` until SIGTERM/SIGINT: raft node + HTTP API on one loop. */
int iod_api_server_run(const struct iod_server_config *c, struct iod_err *e);

/*
 * The privilege seam for the API's roles: a spec whose services ask for
 * more than the default sandbox gives (user: root, capabilities, seccomp:
 * unconfined; iod_spec_service_privileged) needs a caller who may grant it.
 * 0 when nothing is asked or may_grant; else -EACCES naming the first such
 * service and what it asks for. The role check (admin only) calls this with
 * the caller's role, on /v1/deploy and on Service writes.
 */
struct iod_spec;
int iod_api_spec_privileges(const struct iod_spec *spec, bool may_grant, struct iod_err *e);

#endif
