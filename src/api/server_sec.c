/*
 * server_sec.c: who is asking and whether they may (auth.c, src/sec/):
 * the identity of a request, its authorisation and audit, and the security
 * endpoints (whoami, CA, audit log, certificates, tokens, secrets).
 */
#include "server_internal.h"

/* ---- security: who is asking, may they (auth.c, src/sec/) --------------- */

struct conn_ctx *api__conn_ctx_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static json_t *denied_json(const struct iod_sec_identity *id, int status, const char *reason)
{
	char who[IOD_NAME_MAX + 16];
	iod_sec_identity_subject(id, who, sizeof(who));
	return json_pack("{s:s, s:s, s:s, s:i}", "error", reason, "identity", who, "via",
	                 id->via[0] ? id->via : "none", "status", status);
}

/* Writes are audited, and so is every refusal; lease renewals are not
 * (every agent renews several times a second: they would drown the trail). */
static bool audited_write(const char *method, const char *url)
{
	if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
		return false;
	return !(!strcmp(method, "PUT") && !strncmp(url, "/v1/leases/", 11));
}

/*
 * Authenticate and authorise q before it is routed. Returns true when q may
 * go on (q->id set); false when an answer was queued (*rc holds it).
 */
bool api__access_ok(struct req *q, const char *url, const char *method, MHD_RESULT *rc)
{
	struct server *s = q->srv;
	struct conn_ctx *cc = api__conn_ctx_of(q->conn);
	struct iod_sec_request rq;
	struct iod_sec_decision d;
	char name[IOD_NAME_MAX], why[IOD_ERR_MSG_MAX];
	json_t *value = NULL;
	const char *watch = MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, "watch");
	const struct iod_state *st = iod_raft_member_state(s->node);
	int c;

	snprintf(q->method, sizeof(q->method), "%s", method);
	snprintf(q->url, sizeof(q->url), "%s", url);
	q->audit = audited_write(method, url);
	c = iod_api_classify(method, url, watch, q->body.data, q->body.len, &rq, name, sizeof(name),
	                     NULL);
	if (c == -ENOENT) { /* public */
		iod_sec_identity_anonymous(&q->id);
		q->audit = false;
		return true;
	}
	bool has_auth = MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Authorization");
	int ir;
	if (!has_auth && cc && cc->have_cert_id && (uint64_t)time(NULL) < cc->cert_not_after_s) {
		q->id = cc->cert_id;
		ir = 0;
	} else {
		uint64_t until = 0;
		if (cc)
			cc->have_cert_id = false; /* expired on a kept connection: verify again */
		ir = iod_api_sec_identify(&s->sec, q->conn, st, &q->id, &until, why, sizeof(why));
		if (!ir && !has_auth && cc && q->id.kind != IOD_SEC_KIND_ANONYMOUS && until) {
			cc->cert_id = q->id;
			cc->cert_not_after_s = until;
			cc->have_cert_id = true;
		}
	}
	if (ir == -ENOENT && !iod_raft_member_is_leader(s->node)) {
		/* a token this follower has not applied yet: ask the leader */
		json_decref(value);
		q->audit = false;
		*rc = api__not_leader(q);
		return false;
	}
	if (ir) {
		json_decref(value);
		q->audit = true;
		snprintf(q->detail, sizeof(q->detail), "%s", why);
		*rc = api__queue_json(s, q->conn, 401, denied_json(&q->id, 401, why));
		return false;
	}
	if (c == 1) { /* any authenticated caller (whoami, unknown paths) */
		json_decref(value);
		if (q->id.kind != IOD_SEC_KIND_ANONYMOUS)
			return true;
		q->audit = true;
		iod_sec_authorize(&q->id, &rq, &d);
		snprintf(q->detail, sizeof(q->detail), "%s", d.reason);
		*rc = api__queue_json(s, q->conn, 401, denied_json(&q->id, 401, d.reason));
		return false;
	}
	rq.state = st;
	/* only the writes of nodes and services are judged by what they write */
	if ((q->id.kind == IOD_SEC_KIND_NODE || q->id.kind == IOD_SEC_KIND_SERVICE) &&
	    rq.verb == IOD_SEC_VERB_PUT && q->body.len)
		value = json_loadb(q->body.data, q->body.len, 0, NULL);
	rq.value = value;
	struct iod_sec_identity subject;
	json_t *qv = NULL;
	if (rq.res == IOD_SEC_RES_CERTIFICATE) {
		struct iod_err e = {0};
		json_t *b = q->body.len ? json_loadb(q->body.data, q->body.len, 0, NULL) : NULL;
		int sr = iod_api_sec_cert_subject(b, s->sec.cluster, &subject, &e);
		json_decref(b);
		if (sr) {
			json_decref(value);
			*rc = api__queue_err(s, q->conn, 400, api__err_json("%s", e.msg));
			return false;
		}
		rq.subject = &subject;
	} else if (rq.res == IOD_SEC_RES_SECRET_VALUE) {
		const char *rep =
		    MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, "replica");
		qv = json_pack("{s:s}", "replica", rep ? rep : "");
		rq.value = qv;
	}
	int ar = iod_sec_authorize(&q->id, &rq, &d);
	json_decref(value);
	json_decref(qv);
	if (ar) {
		q->audit = true;
		snprintf(q->detail, sizeof(q->detail), "%s", d.reason);
		*rc =
		    api__queue_json(s, q->conn, d.status, denied_json(&q->id, d.status, d.reason));
		return false;
	}
	return true;
}

/* Sensitive kinds leave watches and all-kinds lists of non-admins. */
bool api__sees_sensitive(const struct req *q)
{
	return !q->srv->sec.on || q->id.role == IOD_SEC_ROLE_ADMIN;
}

MHD_RESULT api__do_whoami(struct req *q)
{
	char uri[512] = "", who[IOD_NAME_MAX * 3];
	iod_sec_identity_uri(&q->id, uri, sizeof(uri));
	iod_sec_identity_format(&q->id, who, sizeof(who));
	json_t *j =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kind", iod_sec_kind_name(q->id.kind),
	              "name", q->id.name, "role", iod_sec_role_name(q->id.role), "via", q->id.via,
	              "uri", uri, "description", who);
	if (q->id.kind == IOD_SEC_KIND_SERVICE)
		json_object_set_new(j, "tenant", json_string(q->id.tenant));
	return api__queue_json(q->srv, q->conn, 200, j);
}

MHD_RESULT api__do_ca(struct req *q)
{
	struct server *s = q->srv;
	if (!s->sec.ca_pem)
		return api__queue_err(s, q->conn, 404,
		                      api__err_json("this server runs --insecure: it has no CA"));
	json_t *j = json_pack("{s:s, s:s}", "cluster", s->sec.cluster, "ca", s->sec.ca_pem);
	return api__queue_json(s, q->conn, 200, j);
}

MHD_RESULT api__do_audit(struct req *q)
{
	uint64_t after = 0, limit = 1000;
	bool bad = false;
	api__query_u64(q->conn, "after", &after, &bad);
	api__query_u64(q->conn, "limit", &limit, &bad);
	if (bad)
		return api__queue_err(
		    q->srv, q->conn, 400,
		    api__err_json("audit: after and limit must be non-negative integers"));
	json_t *j = iod_api_sec_audit_list(&q->srv->sec, after,
	                                   (uint32_t)IOD_MIN(limit, (uint64_t)IOD_SEC_AUDIT_RING));
	json_object_set_new(j, "server", json_string(q->srv->cfg.api_addr));
	return api__queue_json(q->srv, q->conn, 200, j);
}

MHD_RESULT api__do_certificate(struct req *q)
{
	struct server *s = q->srv;
	struct iod_sec_identity subject;
	struct iod_err e = {0};
	json_t *answer = NULL, *b = NULL, *err = NULL;

	if (!(b = api__body_json(q, &err)))
		return api__queue_err(s, q->conn, 400, err);
	if (iod_api_sec_cert_subject(b, s->sec.cluster, &subject, &e)) {
		json_decref(b);
		return api__queue_err(s, q->conn, 400, api__err_json("%s", e.msg));
	}
	/* a join token cannot take over a node that is registered and alive */
	if (q->id.kind == IOD_SEC_KIND_BOOTSTRAP && subject.kind == IOD_SEC_KIND_NODE &&
	    iod_state_value(iod_raft_member_state(s->node), IOD_STATE_NODE, subject.name)) {
		json_decref(b);
		return api__queue_err(
		    s, q->conn, 409,
		    api__err_json("node %s is registered and alive: a join token cannot "
		                  "take over its name (revoke it first, or pick another "
		                  "--name)",
		                  subject.name));
	}
	int rc =
	    iod_api_sec_cert_sign(&s->sec, b, &subject, &q->id, (uint64_t)time(NULL), &answer, &e);
	json_decref(b);
	if (rc)
		return api__queue_err(s, q->conn, rc == -EPERM ? 503 : 400,
		                      api__err_json("%s", e.msg));
	return api__queue_json(s, q->conn, 200, answer);
}

MHD_RESULT api__do_token_create(struct req *q)
{
	struct server *s = q->srv;
	struct iod_err e = {0};
	char id[32], token[IOD_SEC_TOKEN_LEN + 1];
	json_t *value = NULL, *err = NULL, *b;

	if (!s->sec.on)
		return api__queue_err(
		    s, q->conn, 400,
		    api__err_json("this server runs --insecure: tokens need --pki"));
	if (!(b = api__body_json(q, &err)))
		return api__queue_err(s, q->conn, 400, err);
	int rc = iod_api_sec_token_new(b, &q->id, iod_time_unix_ns() / IOD_NS_PER_MS, id,
	                               sizeof(id), token, sizeof(token), &value, &e);
	json_decref(b);
	if (rc)
		return api__queue_err(s, q->conn, 400, api__err_json("%s", e.msg));
	if (!iod_raft_member_is_leader(s->node)) {
		json_decref(value);
		return api__not_leader(q);
	}
	char *cmd = iod_state_cmd_put(IOD_STATE_TOKEN, id, value, 0, 0);
	q->extra = json_pack("{s:s, s:s, s:O}", "token", token, "id", id, "record", value);
	json_object_del(json_object_get(q->extra, "record"), "hash");
	memset(token, 0, sizeof(token));
	json_decref(value);
	return api__propose(q, cmd);
}

MHD_RESULT api__do_secret_value(struct req *q, const char *name)
{
	struct server *s = q->srv;
	struct iod_err e = {0};
	const json_t *v = iod_state_value(iod_raft_member_state(s->node), IOD_STATE_SECRET, name);
	const char *sealed = NULL;
	void *plain = NULL;
	size_t n = 0;

	if (!v || iod_json_get_str(v, "sealed", &sealed))
		return api__queue_err(s, q->conn, 404, api__err_json("secret %s not found", name));
	if (!s->sec.has_secrets_key)
		return api__queue_err(
		    s, q->conn, 503,
		    api__err_json("this server has no secrets key (PKI secrets.key)"));
	if (iod_sec_open(s->sec.secrets_key, name, sealed, &plain, &n, &e))
		return api__queue_err(s, q->conn, 500, api__err_json("%s", e.msg));
	gnutls_datum_t in = {plain, (unsigned)n}, b64 = {0};
	int rc = gnutls_base64_encode2(&in, &b64);
	memset(plain, 0, n);
	free(plain);
	if (rc)
		return api__queue_err(s, q->conn, 500, api__err_json("out of memory"));
	json_t *j =
	    json_pack("{s:s, s:s#}", "name", name, "data", (const char *)b64.data, (int)b64.size);
	memset(b64.data, 0, b64.size);
	gnutls_free(b64.data);
	return api__queue_json(s, q->conn, 200, j);
}

/*
 * POST /v1/secrets {"name": NAME, "data": BASE64}: seal the value with the
 * cluster's secrets key (AES-256-GCM, the name as associated data) and store
 * only the ciphertext: the plaintext is in no Raft entry, snapshot, log or
 * answer (docs/security.md).
 */
MHD_RESULT api__do_secret_create(struct req *q)
{
	struct server *s = q->srv;
	struct iod_err e = {0};
	json_t *err = NULL, *b;
	const char *name = NULL, *data = NULL;
	uint8_t nonce[12];
	char *sealed = NULL, who[IOD_NAME_MAX + 16];

	if (!s->sec.on || !s->sec.has_secrets_key)
		return api__queue_err(
		    s, q->conn, 400,
		    api__err_json("secrets need a server with --pki and its secrets.key"));
	if (!(b = api__body_json(q, &err)))
		return api__queue_err(s, q->conn, 400, err);
	if (iod_json_get_str(b, "name", &name) || !iod_sec_name_valid(name) ||
	    iod_json_get_str(b, "data", &data)) {
		json_decref(b);
		return api__queue_err(
		    s, q->conn, 400,
		    api__err_json("a secret is {\"name\": NAME, \"data\": BASE64}"));
	}
	gnutls_datum_t in = {(unsigned char *)data, (unsigned)strlen(data)}, plain = {0};
	if (gnutls_base64_decode2(&in, &plain) || plain.size > IOD_SEC_SECRET_MAX) {
		if (plain.data) {
			memset(plain.data, 0, plain.size);
			gnutls_free(plain.data);
		}
		json_decref(b);
		return api__queue_err(s, q->conn, 400,
		                      api__err_json("\"data\" must be base64 of at most %u bytes "
		                                    "(IOD_SEC_SECRET_MAX)",
		                                    IOD_SEC_SECRET_MAX));
	}
	int rc = iod_sec_random(nonce, sizeof(nonce));
	if (!rc)
		rc = iod_sec_seal(s->sec.secrets_key, nonce, name, plain.data, plain.size, &sealed,
		                  &e);
	size_t bytes = plain.size;
	memset(plain.data, 0, plain.size);
	gnutls_free(plain.data);
	if (rc) {
		json_decref(b);
		return api__queue_err(s, q->conn, 500, api__err_json("sealing: %s", e.msg));
	}
	if (!iod_raft_member_is_leader(s->node)) {
		free(sealed);
		json_decref(b);
		return api__not_leader(q);
	}
	iod_sec_identity_subject(&q->id, who, sizeof(who));
	json_t *value = json_pack(
	    "{s:s, s:I, s:I, s:s}", "sealed", sealed, "bytes", (json_int_t)bytes, "created_ms",
	    (json_int_t)(iod_time_unix_ns() / IOD_NS_PER_MS), "created_by", who);
	free(sealed);
	char *cmd = iod_state_cmd_put(IOD_STATE_SECRET, name, value, 0, 0);
	q->extra = json_pack("{s:s, s:I}", "name", name, "bytes", (json_int_t)bytes);
	json_decref(value);
	json_decref(b);
	return api__propose(q, cmd);
}
