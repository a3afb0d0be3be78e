/*
 * client.c: the iod API's client: one request, following the leader.
 *
 * Commands (`iod get`, `iod deploy`), the node agent and the benchmarks talk
 * to the control plane through this file. The HTTP exchange is the one
 * client of src/http/ (a deadline per attempt, a body limit, one
 * kept-alive connection); this file adds the cluster: it follows the
 * leader: a 503 answer carrying {"leader": "host:port"}
 * sends the retry there. It must never block without a timeout and never
 * retry forever.
 *
 * With credentials (iod_api_client_set_creds, or the client config through
 * iod_api_client_init_config) it speaks HTTPS: the server must present a
 * certificate of the cluster CA naming a server of the cluster (spiffe://
 * <cluster>/server/<id>; no host-name check: the identity is what counts),
 * and the client proves itself with its certificate or a bearer token.
 */
#include "iod/api.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void add_server(struct iod_api_client *c, const char *a, size_t n)
{
	while (n && (*a == ' ')) {
		a++;
		n--;
	}
	if (!n || c->servers_n >= IOD_ARRAY_LEN(c->servers) || n >= IOD_ADDR_MAX)
		return;
	for (uint32_t i = 0; i < c->servers_n; i++)
		if (strlen(c->servers[i]) == n && !strncmp(c->servers[i], a, n))
			return;
	memcpy(c->servers[c->servers_n], a, n);
	c->servers[c->servers_n][n] = 0;
	c->servers_n++;
}

int iod_api_client_init(struct iod_api_client *c, const char *servers, struct iod_err *e)
{
	memset(c, 0, sizeof(*c));
	iod_http_conn_init(&c->conn);
	c->timeout_ms = 5000;
	c->retry_ms = 10000;
	c->retry_sleep_ms = 2;
	if (!servers || !servers[0])
		servers = getenv("IOD_SERVER");
	if (!servers || !servers[0])
		servers = IOD_API_DEFAULT_SERVER;
	for (const char *p = servers; *p;) {
		const char *q = strchr(p, ',');
		size_t n = q ? (size_t)(q - p) : strlen(p);
		add_server(c, p, n);
		p += n + (q ? 1 : 0);
	}
	for (uint32_t i = 0; i < c->servers_n; i++)
		if (!strrchr(c->servers[i], ':'))
			return iod_err_set(e, -EINVAL, "server address \"%s\" needs HOST:PORT",
			                   c->servers[i]);
	if (!c->servers_n)
		return iod_err_set(e, -EINVAL, "no server address given");
	return 0;
}

void iod_api_client_close(struct iod_api_client *c)
{
	iod_http_conn_close(&c->conn);
	if (c->own_creds)
		iod_sec_tls_creds_free(c->creds);
	c->creds = NULL;
	c->conn.creds = NULL;
	c->own_creds = false;
	memset(c->token, 0, sizeof(c->token));
}

void iod_api_client_set_creds(struct iod_api_client *c, struct iod_sec_tls_creds *creds,
                              const char *token)
{
	iod_http_conn_close(&c->conn);
	if (c->own_creds)
		iod_sec_tls_creds_free(c->creds);
	c->creds = creds;
	c->own_creds = false;
	snprintf(c->token, sizeof(c->token), "%s", token ? token : "");
	c->conn.creds = creds;
	c->conn.token = c->token;
}

int iod_api_client_init_config(struct iod_api_client *c, const char *servers, struct iod_err *e)
{
	struct iod_sec_context ctx;
	struct iod_sec_tls_creds *creds = NULL;
	struct iod_err e1 = {0};
	int rc = iod_sec_context_load(NULL, NULL, &ctx, &e1);

	if (rc && rc != -ENOENT)
		return iod_err_set(e, rc, "%s", e1.msg);
	if ((rc = iod_api_client_init(c,
	                              servers && servers[0] ? servers
	                              : ctx.servers[0]      ? ctx.servers
	                                                    : NULL,
	                              e)))
		return rc;
	if ((rc = iod_sec_context_creds(&ctx, &creds, e)))
		return rc;
	iod_api_client_set_creds(c, creds, ctx.token);
	c->own_creds = creds != NULL;
	memset(&ctx, 0, sizeof(ctx));
	return 0;
}

void iod_api_response_free(struct iod_api_response *r)
{
	free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

const char *iod_api_error_text(const struct iod_api_response *r)
{
	const char *msg = NULL;
	if (r->json && !iod_json_get_str(r->json, "error", &msg))
		return msg;
	if (r->body && r->len)
		return r->body;
	return "no answer";
}

int iod_api_http_once(struct iod_http_conn *conn, const char *addr, const char *method,
                      const char *path, const char *content_type, const void *body, size_t len,
                      uint32_t timeout_ms, struct iod_api_response *r, struct iod_err *e)
{
	struct iod_http_response hr;
	int rc;

	memset(r, 0, sizeof(*r));
	iod_strlcpy(r->server, addr, sizeof(r->server));
	rc = iod_http_request(conn, addr, method, path, NULL, content_type, body, len, timeout_ms,
	                      &hr, e);
	if (rc)
		return rc;
	r->status = hr.status;
	r->body = hr.body;
	r->len = hr.len;
	if (r->body && r->len)
		r->json = json_loadb(r->body, r->len, 0, NULL);
	return 0;
}

/* Is this answer "go elsewhere"? Returns the leader hint (or "") when it is. */
static const char *redirect_hint(const struct iod_api_response *r)
{
	const char *hint = "";
	if (r->status != 503 || !r->json)
		return NULL;
	if (!json_is_true(json_object_get(r->json, "not_leader")))
		return NULL;
	iod_json_get_str(r->json, "leader", &hint);
	return hint;
}

/* A request that may be sent twice with the same result: reads, and whole-
 * object PUT/DELETE without a revision check (a CAS that succeeded would
 * answer a retry with a false "conflict"). POSTs (txn, lease grant,
 * deploy) are not. */
static bool idempotent(const char *method, const char *path)
{
	if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
		return true;
	return (!strcmp(method, "PUT") || !strcmp(method, "DELETE")) && !strstr(path, "prev_rev=");
}

/* 504 outcome_unknown: proposed, then leadership was lost before commit. */
static bool outcome_unknown(const struct iod_api_response *r)
{
	return r->status == 504 && r->json &&
	       json_is_true(json_object_get(r->json, "outcome_unknown"));
}

static void use_server(struct iod_api_client *c, uint32_t i)
{
	if (c->cur != i)
		iod_http_conn_close(&c->conn);
	c->cur = i;
}

int iod_api_request(struct iod_api_client *c, const char *method, const char *path,
                    const char *content_type, const void *body, size_t len,
                    struct iod_api_response *r, struct iod_err *e)
{
	uint64_t deadline = (iod_clock_now_ns() / IOD_NS_PER_MS) + c->retry_ms;
	bool any_answer = false;
	uint32_t tried_in_round = 0;
	char last_err[IOD_ERR_MSG_MAX] = "unreachable";
	int rc = -EHOSTUNREACH;
	/* servers that failed to answer during this request (a killed leader
	 * refuses connections at once): a follower that still names one as
	 * leader (it has not noticed yet) is not followed back to it */
	bool down[IOD_ARRAY_LEN(c->servers)] = {0};
	bool idem = idempotent(method, path);

	c->attempts = 0;
	for (;;) {
		struct iod_err e1 = {0};
		uint32_t now_left = (uint32_t)(deadline > (iod_clock_now_ns() / IOD_NS_PER_MS)
		                                   ? deadline - (iod_clock_now_ns() / IOD_NS_PER_MS)
		                                   : 0);
		uint32_t t = IOD_MIN(c->timeout_ms, IOD_MAX(now_left, 1u));
		c->attempts++;
		c->conn.creds = c->creds;
		c->conn.token = c->token;
		c->conn.once = !idem;
		rc = iod_api_http_once(&c->conn, c->servers[c->cur], method, path, content_type,
		                       body, len, t, r, &e1);
		if (rc && !idem && c->conn.sent)
			return iod_err_set(
			    e, -EINPROGRESS,
			    "%s %s: outcome unknown: the request was sent but not "
			    "answered (%s); it may or may not have been applied, so it "
			    "is not retried (read the state back first)",
			    method, path, e1.msg);
		if (rc && !idem) {
			/* it never reached the server (refused, unreachable): safe to
			 * try the next one */
			snprintf(last_err, sizeof(last_err), "%s", e1.msg);
			down[c->cur] = true;
			goto rotate;
		}
		if (rc == 0 && outcome_unknown(r)) {
			if (!idem)
				return 0; /* the caller sees 504 and its message */
			any_answer = true;
			iod_api_response_free(r);
			goto rotate;
		}
		if (rc == 0) {
			const char *hint = redirect_hint(r);
			if (!hint)
				return 0;
			any_answer = true;
			if (hint[0]) {
				add_server(c, hint, strlen(hint));
				for (uint32_t i = 0; i < c->servers_n; i++)
					if (!strcmp(c->servers[i], hint) && i != c->cur &&
					    !down[i]) {
						use_server(c, i);
						tried_in_round = 0;
						iod_api_response_free(r);
						goto next;
					}
			}
			iod_api_response_free(r);
		} else {
			snprintf(last_err, sizeof(last_err), "%s", e1.msg);
			down[c->cur] = true;
		}
	rotate:
		use_server(c, (c->cur + 1) % c->servers_n);
		if (++tried_in_round >= c->servers_n) {
			tried_in_round = 0;
			memset(down, 0, sizeof(down)); /* a new round: anyone may be back */
			if ((iod_clock_now_ns() / IOD_NS_PER_MS) + c->retry_sleep_ms >= deadline)
				break;
			struct timespec ts = {0, (long)c->retry_sleep_ms * 1000000L};
			nanosleep(&ts, NULL);
		}
	next:
		if ((iod_clock_now_ns() / IOD_NS_PER_MS) >= deadline)
			break;
	}
	if (any_answer)
		return iod_err_set(
		    e, -ENOTCONN,
		    "the cluster has no leader right now (tried %u times over %u ms): "
		    "a majority of servers must be up",
		    c->attempts, c->retry_ms);
	return iod_err_set(e, -EHOSTUNREACH, "no server answered within %u ms; last error: %s",
	                   c->retry_ms, last_err);
}
