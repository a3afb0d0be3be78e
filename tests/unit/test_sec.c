/*
 * test_sec.c: the security module: identity URIs, tokens, the
 * authorisation core (roles per verb and resource, node ownership), service
 * policies, sealed secrets, and the CA (issue, CSR signing, verification,
 * a foreign CA refused).
 */
#include "harness.h"
#include "iod/sec.h"
#include "iod/state.h"

#include <stdlib.h>

/* ---- identities ----------------------------------------------------------- */

TEST(identity_uri_round_trip)
{
	struct iod_sec_identity id, back;
	struct iod_err e = {0};
	char uri[256];

	CHECK_EQ(iod_sec_identity_from_uri("spiffe://prod/node/node-1", NULL, "prod", &id, &e), 0);
	CHECK_EQ(id.kind, IOD_SEC_KIND_NODE);
	CHECK_EQ(id.role, IOD_SEC_ROLE_NODE);
	CHECK_STR(id.name, "node-1");
	CHECK_EQ(iod_sec_identity_uri(&id, uri, sizeof(uri)), 0);
	CHECK_STR(uri, "spiffe://prod/node/node-1");

	CHECK_EQ(
	    iod_sec_identity_from_uri("spiffe://prod/ns/team-a/svc/web", NULL, "prod", &id, &e), 0);
	CHECK_EQ(id.kind, IOD_SEC_KIND_SERVICE);
	CHECK_STR(id.tenant, "team-a");
	CHECK_STR(id.name, "web");
	CHECK_EQ(iod_sec_identity_uri(&id, uri, sizeof(uri)), 0);
	CHECK_STR(uri, "spiffe://prod/ns/team-a/svc/web");

	CHECK_EQ(iod_sec_identity_from_uri("spiffe://prod/user/alice", "deployer", NULL, &back, &e),
	         0);
	CHECK_EQ(back.role, IOD_SEC_ROLE_DEPLOYER);
	CHECK_STR(back.cluster, "prod");
}

TEST(identity_uri_rejects)
{
	struct iod_sec_identity id;
	struct iod_err e = {0};
	static const char *const bad[] = {
	    "http://prod/node/n1",    "spiffe://prod",          "spiffe://Prod/node/n1",
	    "spiffe://prod/node/",    "spiffe://prod/node/a/b", "spiffe://prod/pod/x",
	    "spiffe://prod/ns/t/svc", "spiffe://prod/node/a b", "spiffe://prod/node/.x",
	    "spiffe:///node/x",       "spiffe://prod/ns//svc/x"};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++)
		CHECK_MSG(iod_sec_identity_from_uri(bad[i], NULL, NULL, &id, &e) == -EINVAL,
		          "accepted %s", bad[i]);
	/* another cluster's identity */
	CHECK_EQ(iod_sec_identity_from_uri("spiffe://other/node/n1", NULL, "prod", &id, &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "other");
	/* a user needs a role; a node cannot claim admin */
	CHECK_EQ(iod_sec_identity_from_uri("spiffe://prod/user/bob", NULL, "prod", &id, &e),
	         -EINVAL);
	CHECK_EQ(iod_sec_identity_from_uri("spiffe://prod/user/bob", "root", "prod", &id, &e),
	         -EINVAL);
	CHECK_EQ(iod_sec_identity_from_uri("spiffe://prod/node/n1", "admin", "prod", &id, &e),
	         -EINVAL);
}

/* ---- tokens ----------------------------------------------------------------- */

static json_t *token_record(const struct iod_sec_token *t, const char *role, uint64_t expires)
{
	char h[128];
	iod_sec_token_hash(t, h, sizeof(h));
	return json_pack("{s:s, s:s, s:I}", "role", role, "hash", h, "expires_ms",
	                 (json_int_t)expires);
}

TEST(token_parse_hash_check)
{
	uint8_t rnd[30];
	struct iod_sec_token t, p;
	struct iod_sec_identity id;
	struct iod_err e = {0};
	char text[128];

	for (size_t i = 0; i < sizeof(rnd); i++)
		rnd[i] = (uint8_t)(i * 37 + 1);
	iod_sec_token_from_bytes(rnd, &t);
	iod_sec_token_format(&t, text, sizeof(text));
	CHECK_EQ(strlen(text), IOD_SEC_TOKEN_LEN);
	CHECK(iod_str_has_prefix(text, "iod."));
	CHECK_EQ(iod_sec_token_parse(text, strlen(text), &p, &e), 0);
	CHECK_STR(p.id, t.id);
	CHECK_STR(p.secret, t.secret);
	/* trailing newline (a token read from a file) is fine */
	char nl[160];
	snprintf(nl, sizeof(nl), "  %s\n", text);
	CHECK_EQ(iod_sec_token_parse(nl, strlen(nl), &p, &e), 0);

	json_t *rec = token_record(&t, "deployer", 5000);
	CHECK_EQ(iod_sec_token_check(&p, rec, 4999, "c1", &id, &e), 0);
	CHECK_EQ(id.kind, IOD_SEC_KIND_USER);
	CHECK_EQ(id.role, IOD_SEC_ROLE_DEPLOYER);
	CHECK_CONTAINS(id.via, t.id);
	/* expired */
	CHECK_EQ(iod_sec_token_check(&p, rec, 5000, "c1", &id, &e), -EACCES);
	CHECK_CONTAINS(e.msg, "expired");
	/* wrong secret: one digit changed */
	p.secret[5] = p.secret[5] == 'a' ? 'b' : 'a';
	CHECK_EQ(iod_sec_token_check(&p, rec, 1, "c1", &id, &e), -EACCES);
	CHECK_CONTAINS(e.msg, "wrong secret");
	json_decref(rec);
	/* unknown token */
	CHECK_EQ(iod_sec_token_check(&t, NULL, 1, "c1", &id, &e), -EACCES);

	/* join tokens authenticate as bootstrap identities */
	rec = token_record(&t, "node", 0);
	json_object_set_new(rec, "node", json_string("node-7"));
	CHECK_EQ(iod_sec_token_check(&t, rec, 1, "c1", &id, &e), 0);
	CHECK_EQ(id.kind, IOD_SEC_KIND_BOOTSTRAP);
	CHECK_STR(id.name, "node-7");
	json_decref(rec);
}

TEST(token_parse_rejects)
{
	struct iod_sec_token p;
	struct iod_err e = {0};
	char good[128];
	uint8_t rnd[30] = {1, 2, 3};
	struct iod_sec_token t;
	iod_sec_token_from_bytes(rnd, &t);
	iod_sec_token_format(&t, good, sizeof(good));
	static const char *const bad[] = {"", "iod.", "iod..", "Bearer x", "iod.0123456789ab"};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++)
		CHECK_EQ(iod_sec_token_parse(bad[i], strlen(bad[i]), &p, &e), -EINVAL);
	char up[128];
	snprintf(up, sizeof(up), "%s", good);
	up[6] = 'A'; /* upper-case hex */
	CHECK_EQ(iod_sec_token_parse(up, strlen(up), &p, &e), -EINVAL);
	snprintf(up, sizeof(up), "%sa", good);
	CHECK_EQ(iod_sec_token_parse(up, strlen(up), &p, &e), -EINVAL);
	snprintf(up, sizeof(up), "%s", good);
	up[16] = '-';
	CHECK_EQ(iod_sec_token_parse(up, strlen(up), &p, &e), -EINVAL);
}

/* ---- authorisation ----------------------------------------------------------- */

static void user(struct iod_sec_identity *id, const char *name, enum iod_sec_role role)
{
	memset(id, 0, sizeof(*id));
	id->kind = IOD_SEC_KIND_USER;
	id->role = role;
	snprintf(id->name, sizeof(id->name), "%s", name);
	snprintf(id->via, sizeof(id->via), "certificate");
}

static void node(struct iod_sec_identity *id, const char *name)
{
	memset(id, 0, sizeof(*id));
	id->kind = IOD_SEC_KIND_NODE;
	id->role = IOD_SEC_ROLE_NODE;
	snprintf(id->name, sizeof(id->name), "%s", name);
	snprintf(id->via, sizeof(id->via), "certificate");
}

static int put_json(struct iod_state *s, enum iod_state_kind k, const char *name, const char *json,
                    uint64_t lease)
{
	struct iod_state_result r;
	json_t *v = json_loads(json, 0, NULL);
	char *cmd = iod_state_cmd_put(k, name, v, lease, -1);
	int rc = iod_state_apply(s, cmd, strlen(cmd), &r);
	free(cmd);
	json_decref(v);
	return rc;
}

static int decide(const struct iod_sec_identity *id, enum iod_sec_verb verb,
                  enum iod_sec_resource res, const char *name, const char *value,
                  const struct iod_state *st, struct iod_sec_decision *d)
{
	json_t *v = value ? json_loads(value, 0, NULL) : NULL;
	struct iod_sec_request rq = {
	    .verb = verb, .res = res, .name = name, .value = v, .state = st};
	int rc = iod_sec_authorize(id, &rq, d);
	json_decref(v);
	return rc;
}

TEST(authz_roles_per_verb_and_resource)
{
	struct iod_sec_identity anon, viewer, deployer, admin;
	struct iod_sec_decision d;
	iod_sec_identity_anonymous(&anon);
	user(&viewer, "vera", IOD_SEC_ROLE_VIEWER);
	user(&deployer, "dan", IOD_SEC_ROLE_DEPLOYER);
	user(&admin, "ada", IOD_SEC_ROLE_ADMIN);

	/* anonymous: 401 on everything, even reads */
	CHECK_EQ(decide(&anon, IOD_SEC_VERB_LIST, IOD_SEC_RES_NODE, "", NULL, NULL, &d), -EACCES);
	CHECK_EQ(d.status, 401);
	CHECK_EQ(decide(&anon, IOD_SEC_VERB_CREATE, IOD_SEC_RES_DEPLOY, "", NULL, NULL, &d),
	         -EACCES);
	CHECK_EQ(d.status, 401);
	CHECK_CONTAINS(d.reason, "anonymous");

	/* viewer reads, does not write; names itself in the 403 */
	CHECK_EQ(decide(&viewer, IOD_SEC_VERB_LIST, IOD_SEC_RES_SERVICE, "", NULL, NULL, &d), 0);
	CHECK_EQ(decide(&viewer, IOD_SEC_VERB_CREATE, IOD_SEC_RES_DEPLOY, "", NULL, NULL, &d),
	         -EACCES);
	CHECK_EQ(d.status, 403);
	CHECK_CONTAINS(d.reason, "user \"vera\"");
	CHECK_CONTAINS(d.reason, "needs role deployer");
	CHECK_EQ(decide(&viewer, IOD_SEC_VERB_LIST, IOD_SEC_RES_TOKEN, "", NULL, NULL, &d),
	         -EACCES);

	/* deployer deploys and writes services, not membership or tokens */
	CHECK_EQ(decide(&deployer, IOD_SEC_VERB_CREATE, IOD_SEC_RES_DEPLOY, "", NULL, NULL, &d), 0);
	CHECK_EQ(decide(&deployer, IOD_SEC_VERB_PUT, IOD_SEC_RES_SERVICE, "web", "{}", NULL, &d),
	         0);
	CHECK_EQ(decide(&deployer, IOD_SEC_VERB_DELETE, IOD_SEC_RES_MEMBER, "3", NULL, NULL, &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "needs role admin");
	CHECK_EQ(decide(&deployer, IOD_SEC_VERB_CREATE, IOD_SEC_RES_TOKEN, "", NULL, NULL, &d),
	         -EACCES);
	CHECK_EQ(
	    decide(&deployer, IOD_SEC_VERB_CREATE, IOD_SEC_RES_CERTIFICATE, "", NULL, NULL, &d),
	    -EACCES);
	CHECK_EQ(decide(&deployer, IOD_SEC_VERB_GET, IOD_SEC_RES_AUDIT, "", NULL, NULL, &d),
	         -EACCES);

	/* admin: membership, tokens, CA operations, audit */
	CHECK_EQ(decide(&admin, IOD_SEC_VERB_DELETE, IOD_SEC_RES_MEMBER, "3", NULL, NULL, &d), 0);
	CHECK_EQ(decide(&admin, IOD_SEC_VERB_CREATE, IOD_SEC_RES_TOKEN, "", NULL, NULL, &d), 0);
	CHECK_EQ(decide(&admin, IOD_SEC_VERB_CREATE, IOD_SEC_RES_CERTIFICATE, "", NULL, NULL, &d),
	         0);
	CHECK_EQ(decide(&admin, IOD_SEC_VERB_GET, IOD_SEC_RES_AUDIT, "", NULL, NULL, &d), 0);
	/* nobody reads secret values through the API but the node that mounts them */
	CHECK_EQ(decide(&admin, IOD_SEC_VERB_GET, IOD_SEC_RES_SECRET_VALUE, "db", NULL, NULL, &d),
	         -EACCES);
}

TEST(authz_node_writes_only_its_own)
{
	struct iod_state *s;
	struct iod_sec_identity n1, n2, join;
	struct iod_sec_decision d;
	CHECK_EQ(iod_state_new(&s), 0);
	node(&n1, "node-1");
	node(&n2, "node-2");
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-1", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-2", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_SERVICE, "web", "{\"secrets\": [{\"name\": \"db\"}]}", 0),
	         0);
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "web-0",
	                  "{\"service\": \"web\", \"node\": \"node-1\", \"phase\": \"pending\"}",
	                  0),
	         0);
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "web-1",
	                  "{\"service\": \"web\", \"node\": \"node-2\", \"phase\": \"pending\"}",
	                  0),
	         0);
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "web-2",
	                  "{\"service\": \"web\", \"node\": \"node-9\", \"phase\": \"running\"}",
	                  0),
	         0);

	/* its own Node, not another's */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_NODE, "node-1", "{}", s, &d), 0);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_NODE, "node-2", "{}", s, &d), -EACCES);
	CHECK_EQ(d.status, 403);
	CHECK_CONTAINS(d.reason, "node \"node-1\"");
	/* status of its own replica */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "web-0",
	                "{\"service\": \"web\", \"node\": \"node-1\", \"phase\": \"running\"}", s,
	                &d),
	         0);
	/* ... but not its identity-bearing fields */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "web-0",
	                "{\"service\": \"db\", \"node\": \"node-1\", \"phase\": \"running\"}", s,
	                &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "\"service\"");
	/* nor the egress meter's rate the deploy plan wrote (nic_bw_bps): a
	 * node raising its own replica's rate would lift the bandwidth limit
	 * its service was placed with */
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "web-0",
	                  "{\"service\": \"web\", \"node\": \"node-1\", \"phase\": "
	                  "\"pending\", \"nic_bw_bps\": 100000000}",
	                  0),
	         0);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "web-0",
	                "{\"service\": \"web\", \"node\": \"node-1\", \"phase\": \"running\", "
	                "\"nic_bw_bps\": 100000000}",
	                s, &d),
	         0);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "web-0",
	                "{\"service\": \"web\", \"node\": \"node-1\", \"phase\": \"running\", "
	                "\"nic_bw_bps\": 100000000000}",
	                s, &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "\"nic_bw_bps\"");
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "web-0",
	                "{\"service\": \"web\", \"node\": \"node-1\", \"phase\": \"running\"}", s,
	                &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "\"nic_bw_bps\"");
	/* another live node's replica: the regression of issue 16 */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "web-1",
	                "{\"service\": \"web\", \"node\": \"node-1\", \"phase\": \"running\"}", s,
	                &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "runs on node node-2");
	/* a lost node's replica may be moved to a live node (rescheduling) */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "web-2",
	                "{\"service\": \"web\", \"node\": \"node-2\", \"phase\": \"pending\"}", s,
	                &d),
	         0);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "web-2",
	                "{\"service\": \"web\", \"node\": \"node-77\", \"phase\": \"pending\"}", s,
	                &d),
	         -EACCES);
	/* nodes never create or delete replicas, nor deploy */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "new-0",
	                "{\"service\": \"web\", \"node\": \"node-1\"}", s, &d),
	         -EACCES);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_DELETE, IOD_SEC_RES_REPLICA, "web-0", NULL, s, &d),
	         -EACCES);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_CREATE, IOD_SEC_RES_DEPLOY, "", NULL, s, &d), -EACCES);
	/* endpoints of its replicas only */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_ENDPOINT, "web-0",
	                "{\"replica\": \"web-0\", \"service\": \"web\", \"node\": \"node-1\"}", s,
	                &d),
	         0);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_ENDPOINT, "web-1",
	                "{\"replica\": \"web-1\", \"service\": \"web\", \"node\": \"node-1\"}", s,
	                &d),
	         -EACCES);
	/* secret values: only for a replica of a service that mounts them, on this node */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_GET, IOD_SEC_RES_SECRET_VALUE, "db",
	                "{\"replica\": \"web-0\"}", s, &d),
	         0);
	CHECK_EQ(decide(&n2, IOD_SEC_VERB_GET, IOD_SEC_RES_SECRET_VALUE, "db",
	                "{\"replica\": \"web-0\"}", s, &d),
	         -EACCES);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_GET, IOD_SEC_RES_SECRET_VALUE, "other",
	                "{\"replica\": \"web-0\"}", s, &d),
	         -EACCES);
	/* reads of tokens: no */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_LIST, IOD_SEC_RES_TOKEN, "", NULL, s, &d), -EACCES);

	/* revoked: 401 for everything */
	CHECK_EQ(put_json(s, IOD_STATE_REVOCATION, "node.node-2", "{}", 0), 0);
	CHECK_EQ(decide(&n2, IOD_SEC_VERB_LIST, IOD_SEC_RES_NODE, "", NULL, s, &d), -EACCES);
	CHECK_EQ(d.status, 401);
	CHECK_CONTAINS(d.reason, "revoked");

	/* a join token buys its node's certificate and nothing else */
	memset(&join, 0, sizeof(join));
	join.kind = IOD_SEC_KIND_BOOTSTRAP;
	join.role = IOD_SEC_ROLE_NODE;
	struct iod_sec_request rq = {.verb = IOD_SEC_VERB_CREATE,
	                             .res = IOD_SEC_RES_CERTIFICATE,
	                             .subject = &n1,
	                             .state = s};
	CHECK_EQ(iod_sec_authorize(&join, &rq, &d), 0);
	snprintf(join.name, sizeof(join.name), "node-3");
	CHECK_EQ(iod_sec_authorize(&join, &rq, &d), -EACCES);
	CHECK_EQ(decide(&join, IOD_SEC_VERB_LIST, IOD_SEC_RES_NODE, "", NULL, s, &d), -EACCES);
	/* ... and never one for a revoked node, nor may a node renew after
	 * its revocation (the agent-bootstrap regression of issue 16) */
	join.name[0] = 0;
	rq.subject = &n2;
	CHECK_EQ(iod_sec_authorize(&join, &rq, &d), -EACCES);
	CHECK_EQ(d.status, 403);
	CHECK_CONTAINS(d.reason, "node node-2 is revoked");
	CHECK_EQ(iod_sec_authorize(&n2, &rq, &d), -EACCES);
	CHECK_EQ(d.status, 401);
	rq.subject = &n1;
	CHECK_EQ(iod_sec_authorize(&n1, &rq, &d), 0);
	iod_state_free(s);
}

/* Issue 16: a node's agent gets SVIDs for its proxy, but only those of the
 * services it runs, in their own tenant. */
TEST(authz_node_gets_only_its_services_svids)
{
	struct iod_state *s;
	struct iod_sec_identity n1, n2, web, web_red, db, admin;
	struct iod_sec_decision d;
	CHECK_EQ(iod_state_new(&s), 0);
	node(&n1, "node-1");
	node(&n2, "node-2");
	user(&admin, "ada", IOD_SEC_ROLE_ADMIN);
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-1", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-2", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_SERVICE, "web", "{\"tenant\": \"blue\"}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_SERVICE, "db", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "web-0",
	                  "{\"service\": \"web\", \"node\": \"node-1\"}", 0),
	         0);
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "db-0",
	                  "{\"service\": \"db\", \"node\": \"node-2\"}", 0),
	         0);
	memset(&web, 0, sizeof(web));
	web.kind = IOD_SEC_KIND_SERVICE;
	snprintf(web.name, sizeof(web.name), "web");
	snprintf(web.tenant, sizeof(web.tenant), "blue");
	web_red = web;
	snprintf(web_red.tenant, sizeof(web_red.tenant), "red");
	db = web;
	snprintf(db.name, sizeof(db.name), "db");
	snprintf(db.tenant, sizeof(db.tenant), "default");
	struct iod_sec_request rq = {.verb = IOD_SEC_VERB_CREATE,
	                             .res = IOD_SEC_RES_CERTIFICATE,
	                             .subject = &web,
	                             .state = s};
	CHECK_EQ(iod_sec_authorize(&n1, &rq, &d), 0); /* web runs on node-1 */
	CHECK_EQ(iod_sec_authorize(&n2, &rq, &d), -EACCES);
	CHECK_EQ(d.status, 403);
	CHECK_CONTAINS(d.reason, "no replica of service blue/web runs on this node");
	rq.subject = &web_red; /* the right service in another tenant */
	CHECK_EQ(iod_sec_authorize(&n1, &rq, &d), -EACCES);
	rq.subject = &db; /* a tenant-less service is "default"'s */
	CHECK_EQ(iod_sec_authorize(&n2, &rq, &d), 0);
	CHECK_EQ(iod_sec_authorize(&n1, &rq, &d), -EACCES);
	CHECK_EQ(iod_sec_authorize(&admin, &rq, &d), 0); /* `iod cert` through the API */
	/* no such service: nobody's */
	snprintf(db.name, sizeof(db.name), "ghost");
	CHECK_EQ(iod_sec_authorize(&n2, &rq, &d), -EACCES);
	/* a revoked node gets no SVID, even of a service it still runs */
	rq.subject = &web;
	CHECK_EQ(put_json(s, IOD_STATE_REVOCATION, "node.node-1", "{}", 0), 0);
	CHECK_EQ(iod_sec_authorize(&n1, &rq, &d), -EACCES);
	CHECK_EQ(d.status, 401);
	/* `iod revoke service default/db`: no new SVID for it, for anyone */
	rq.subject = &db;
	snprintf(db.name, sizeof(db.name), "db");
	CHECK_EQ(iod_sec_authorize(&n2, &rq, &d), 0);
	CHECK_EQ(put_json(s, IOD_STATE_REVOCATION, "service.default.db", "{}", 0), 0);
	CHECK_EQ(iod_sec_authorize(&n2, &rq, &d), -EACCES);
	CHECK_EQ(d.status, 403);
	CHECK_CONTAINS(d.reason, "revoked");
	CHECK_EQ(iod_sec_authorize(&admin, &rq, &d), -EACCES);
	iod_state_free(s);
}

/* One name per revoked identity: what `iod revoke`, the API's check and
 * the mesh proxies agree on. */
TEST(revocation_keys)
{
	char k[IOD_NAME_MAX];
	CHECK_EQ(iod_sec_revocation_key(IOD_SEC_KIND_NODE, NULL, "gpu-7", k, sizeof(k)), 0);
	CHECK_STR(k, "node.gpu-7");
	CHECK_EQ(iod_sec_revocation_key(IOD_SEC_KIND_SERVER, NULL, "2", k, sizeof(k)), 0);
	CHECK_STR(k, "server.2");
	CHECK_EQ(iod_sec_revocation_key(IOD_SEC_KIND_SERVICE, "red", "web", k, sizeof(k)), 0);
	CHECK_STR(k, "service.red.web");
	CHECK_EQ(iod_sec_revocation_key(IOD_SEC_KIND_SERVICE, "", "web", k, sizeof(k)), 0);
	CHECK_STR(k, "service.default.web");
	/* a dot would make "a.b"/"c" and "a"/"b.c" the same key */
	CHECK_EQ(iod_sec_revocation_key(IOD_SEC_KIND_SERVICE, "a.b", "c", k, sizeof(k)), -EINVAL);
	CHECK_EQ(iod_sec_revocation_key(IOD_SEC_KIND_SERVICE, "a", "b.c", k, sizeof(k)), -EINVAL);
	CHECK_EQ(iod_sec_revocation_key(IOD_SEC_KIND_NODE, NULL, "a/b", k, sizeof(k)), -EINVAL);
	CHECK_EQ(iod_sec_revocation_key(IOD_SEC_KIND_ANONYMOUS, NULL, "x", k, sizeof(k)), -EINVAL);
	char longname[60];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	CHECK_EQ(iod_sec_revocation_key(IOD_SEC_KIND_SERVICE, "blue", longname, k, sizeof(k)),
	         -ENOSPC);
}

TEST(cert_renewal_at_two_thirds_of_its_life)
{
	/* a 24 h certificate, backdated for clock skew as the CA issues them */
	uint64_t nb = 1000000 - IOD_SEC_CERT_BACKDATE_S, na = 1000000 + 24 * 3600;
	CHECK(!iod_sec_cert_renew_due(nb, na, 1000000));
	CHECK(!iod_sec_cert_renew_due(nb, na, 1000000 + 16 * 3600 - 1));
	CHECK(iod_sec_cert_renew_due(nb, na, 1000000 + 16 * 3600));
	CHECK(iod_sec_cert_renew_due(nb, na, na + 1));
	/* a 12 s one (tests): not at once, at 8 s */
	nb = 5000 - IOD_SEC_CERT_BACKDATE_S;
	na = 5012;
	CHECK(!iod_sec_cert_renew_due(nb, na, 5001));
	CHECK(!iod_sec_cert_renew_due(nb, na, 5007));
	CHECK(iod_sec_cert_renew_due(nb, na, 5008));
	/* nonsense validity: renew */
	CHECK(iod_sec_cert_renew_due(10, 5, 7));
}

TEST(authz_node_leases)
{
	struct iod_state *s;
	struct iod_state_result r;
	struct iod_sec_identity n1;
	struct iod_sec_decision d;
	char id1[24], id2[24];
	CHECK_EQ(iod_state_new(&s), 0);
	node(&n1, "node-1");
	char *cmd = iod_state_cmd_lease_grant(10000, 1);
	CHECK_EQ(iod_state_apply(s, cmd, strlen(cmd), &r), 0);
	free(cmd);
	uint64_t l1 = r.lease_id;
	cmd = iod_state_cmd_lease_grant(10000, 1);
	CHECK_EQ(iod_state_apply(s, cmd, strlen(cmd), &r), 0);
	free(cmd);
	uint64_t l2 = r.lease_id;
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-1", "{}", l1), 0);
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-2", "{}", l2), 0);
	snprintf(id1, sizeof(id1), "%llu", (unsigned long long)l1);
	snprintf(id2, sizeof(id2), "%llu", (unsigned long long)l2);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_CREATE, IOD_SEC_RES_LEASE, "", NULL, s, &d), 0);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_LEASE, id1, NULL, s, &d), 0);
	/* revoking another node's lease would declare it lost */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_DELETE, IOD_SEC_RES_LEASE, id2, NULL, s, &d), -EACCES);
	CHECK_CONTAINS(d.reason, "node-2");
	/* a lease nobody holds (an expired one): let the store answer 404 */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_LEASE, "999999", NULL, s, &d), 0);
	iod_state_free(s);
}

/* ---- service policies ---------------------------------------------------------- */

static int parse_policies(const char *text, struct iod_sec_policy_set *set, struct iod_err *e)
{
	json_t *j = json_loads(text, 0, NULL);
	int rc = j ? iod_sec_policy_parse(j, "default", set, e) : -EINVAL;
	json_decref(j);
	return rc;
}

TEST(policy_parse_and_decide)
{
	struct iod_sec_policy_set *set = calloc(1, sizeof(*set));
	struct iod_sec_verdict v;
	struct iod_err e = {0};

	CHECK(set);
	CHECK_EQ(parse_policies("[{\"name\": \"no-batch\", \"from\": \"batch\", \"to\": \"db\","
	                        "  \"action\": \"deny\"},"
	                        " {\"from\": \"web\", \"to\": \"api\", \"methods\": [\"GET\"],"
	                        "  \"ports\": [8000]},"
	                        " {\"from\": \"team-b/ui\", \"to\": \"default/api\"}]",
	                        set, &e),
	         0);
	CHECK_EQ(set->n, 3);
	CHECK_STR(set->p[1].name, "policy-2");
	/* default: same tenant allowed */
	iod_sec_policy_decide(set, "default", "web", "default", "db", "GET", 5432, &v);
	CHECK(v.allow);
	CHECK_STR(v.policy, "default-same-tenant");
	/* an explicit deny */
	iod_sec_policy_decide(set, "default", "batch", "default", "db", "GET", 5432, &v);
	CHECK(!v.allow);
	CHECK_STR(v.policy, "no-batch");
	/* api is allow-listed: GET on 8000 from web only */
	iod_sec_policy_decide(set, "default", "web", "default", "api", "GET", 8000, &v);
	CHECK(v.allow);
	iod_sec_policy_decide(set, "default", "web", "default", "api", "POST", 8000, &v);
	CHECK(!v.allow);
	CHECK_CONTAINS(v.reason, "allow-listed");
	iod_sec_policy_decide(set, "default", "web", "default", "api", NULL, 8000, &v);
	CHECK(!v.allow); /* L4 never matches a method-scoped rule */
	iod_sec_policy_decide(set, "team-b", "ui", "default", "api", "PUT", 1, &v);
	CHECK(v.allow);
	/* default: across tenants denied */
	iod_sec_policy_decide(set, "team-b", "ui", "default", "db", "GET", 1, &v);
	CHECK(!v.allow);
	CHECK_STR(v.policy, "default-cross-tenant");

	/* round trip through JSON */
	json_t *j = iod_sec_policy_to_json(&set->p[1]);
	struct iod_sec_policy_set *again = calloc(1, sizeof(*again));
	CHECK(again);
	CHECK_EQ(iod_sec_policy_parse(j, "default", again, &e), 0);
	json_t *k = iod_sec_policy_to_json(&again->p[0]);
	CHECK(json_equal(j, k));
	json_decref(j);
	json_decref(k);
	free(again);
	free(set);
}

TEST(policy_parse_errors)
{
	struct iod_sec_policy_set *set = calloc(1, sizeof(*set));
	struct iod_err e = {0};
	CHECK(set);
	CHECK_EQ(parse_policies("[{\"from\": \"a\", \"to\": \"b\", \"acton\": \"deny\"}]", set, &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "did you mean \"action\"");
	CHECK_EQ(parse_policies("{\"from\": \"a\"}", set, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "\"to\"");
	CHECK_EQ(
	    parse_policies("{\"from\": \"a\", \"to\": \"b\", \"methods\": [\"FETCH\"]}", set, &e),
	    -EINVAL);
	CHECK_EQ(parse_policies("{\"from\": \"a\", \"to\": \"b\", \"ports\": [0]}", set, &e),
	         -EINVAL);
	CHECK_EQ(parse_policies("{\"from\": \"a b\", \"to\": \"b\"}", set, &e), -EINVAL);
	/* all or nothing */
	CHECK_EQ(parse_policies("[{\"from\": \"a\", \"to\": \"b\"}, {\"from\": 1}]", set, &e),
	         -EINVAL);
	CHECK_EQ(set->n, 0);
	free(set);
}

/* ---- sealed secrets ---------------------------------------------------------------- */

TEST(seal_open)
{
	uint8_t key[IOD_SEC_KEY_BYTES], other[IOD_SEC_KEY_BYTES], nonce[12] = {9};
	struct iod_err e = {0};
	char *sealed = NULL;
	void *plain = NULL;
	size_t n = 0;
	for (int i = 0; i < IOD_SEC_KEY_BYTES; i++) {
		key[i] = (uint8_t)i;
		other[i] = (uint8_t)(i + 1);
	}
	CHECK_EQ(iod_sec_seal(key, nonce, "db", "hunter2", 7, &sealed, &e), 0);
	CHECK(iod_str_has_prefix(sealed, "v1:"));
	CHECK(!strstr(sealed, "hunter2"));
	CHECK_EQ(iod_sec_open(key, "db", sealed, &plain, &n, &e), 0);
	CHECK_EQ(n, 7);
	CHECK(!memcmp(plain, "hunter2", 7));
	free(plain);
	CHECK_EQ(iod_sec_open(other, "db", sealed, &plain, &n, &e), -EBADMSG);
	CHECK_EQ(iod_sec_open(key, "db2", sealed, &plain, &n, &e), -EBADMSG);
	sealed[10] = sealed[10] == 'A' ? 'B' : 'A';
	CHECK_EQ(iod_sec_open(key, "db", sealed, &plain, &n, &e), -EBADMSG);
	CHECK_EQ(iod_sec_open(key, "db", "v1:!!", &plain, &n, &e), -EBADMSG);
	free(sealed);
}

/* ---- the CA --------------------------------------------------------------------- */

TEST(ca_issue_verify_and_foreign_ca)
{
	struct iod_sec_ca *ca = NULL, *other = NULL, *loaded = NULL;
	struct iod_sec_cert_req rq;
	struct iod_sec_pem pem;
	struct iod_sec_cert_info info;
	struct iod_err e = {0};
	const uint64_t now = 1700000000;
	void *der;
	size_t len;

	CHECK_EQ(iod_sec_ca_create("prod", now, 24 * 3600, &ca, &e), 0);
	CHECK_STR(iod_sec_ca_cluster(ca), "prod");
	CHECK(iod_sec_ca_can_sign(ca));
	memset(&rq, 0, sizeof(rq));
	rq.id.kind = IOD_SEC_KIND_USER;
	rq.id.role = IOD_SEC_ROLE_ADMIN;
	snprintf(rq.id.name, sizeof(rq.id.name), "ada");
	rq.not_before_s = now;
	rq.ttl_s = 3600;
	CHECK_EQ(iod_sec_ca_issue(ca, &rq, &pem, &e), 0);
	CHECK(strstr(pem.key, "PRIVATE KEY"));
	CHECK_EQ(iod_sec_cert_inspect(pem.cert, strlen(pem.cert), &info, &e), 0);
	CHECK_EQ(info.id.kind, IOD_SEC_KIND_USER);
	CHECK_EQ(info.id.role, IOD_SEC_ROLE_ADMIN);
	CHECK_STR(info.id.cluster, "prod");
	CHECK_U64(info.not_after_s, now + 3600);

	CHECK_EQ(iod_sec_cert_der(pem.cert, &der, &len), 0);
	CHECK_MSG(iod_sec_ca_verify_der(ca, der, len, now + 10, &info, &e) == 0, "%s", e.msg);
	CHECK_STR(info.id.name, "ada");
	/* expired */
	CHECK_EQ(iod_sec_ca_verify_der(ca, der, len, now + 3600, &info, &e), -EACCES);
	CHECK_CONTAINS(e.msg, "expired");
	/* a certificate from another CA (even one with the same cluster name) */
	CHECK_EQ(iod_sec_ca_create("prod", now, 24 * 3600, &other, &e), 0);
	CHECK_EQ(iod_sec_ca_verify_der(other, der, len, now + 10, &info, &e), -EACCES);
	CHECK_CONTAINS(e.msg, "not signed by");
	free(der);
	iod_sec_pem_free(&pem);

	/* a loaded copy without its key verifies but cannot sign */
	CHECK_EQ(iod_sec_ca_load(iod_sec_ca_cert_pem(ca), NULL, &loaded, &e), 0);
	CHECK_STR(iod_sec_ca_cluster(loaded), "prod");
	CHECK(!iod_sec_ca_can_sign(loaded));
	CHECK_EQ(iod_sec_ca_issue(loaded, &rq, &pem, &e), -EPERM);
	iod_sec_ca_free(loaded);
	/* a key that is not the certificate's is refused */
	CHECK_EQ(iod_sec_ca_load(iod_sec_ca_cert_pem(ca), iod_sec_ca_key_pem(other), &loaded, &e),
	         -EINVAL);
	CHECK_EQ(iod_sec_ca_load(iod_sec_ca_cert_pem(ca), iod_sec_ca_key_pem(ca), &loaded, &e), 0);
	CHECK(iod_sec_ca_can_sign(loaded));
	iod_sec_ca_free(loaded);
	iod_sec_ca_free(other);
	iod_sec_ca_free(ca);
}

TEST(ca_signs_csr_with_its_own_subject)
{
	struct iod_sec_ca *ca = NULL;
	struct iod_sec_pem csr, crt;
	struct iod_sec_cert_req rq;
	struct iod_sec_cert_info info;
	struct iod_err e = {0};
	CHECK_EQ(iod_sec_ca_create("c1", 1000000, 3600, &ca, &e), 0);
	/* the CSR asks to be an admin; the CA decides it is node-4 */
	CHECK_EQ(iod_sec_csr_create("admin", &csr, &e), 0);
	memset(&rq, 0, sizeof(rq));
	rq.id.kind = IOD_SEC_KIND_NODE;
	rq.id.role = IOD_SEC_ROLE_NODE;
	snprintf(rq.id.name, sizeof(rq.id.name), "node-4");
	rq.not_before_s = 1000000;
	rq.ttl_s = 600;
	CHECK_EQ(iod_sec_ca_sign_csr(ca, csr.cert, strlen(csr.cert), &rq, &crt, &e), 0);
	CHECK(crt.key == NULL);
	CHECK_EQ(iod_sec_cert_inspect(crt.cert, strlen(crt.cert), &info, &e), 0);
	CHECK_EQ(info.id.kind, IOD_SEC_KIND_NODE);
	CHECK_STR(info.id.name, "node-4");
	/* a tampered CSR does not verify */
	char *bad = strdup(csr.cert);
	char *mid = bad + strlen(bad) / 2;
	*mid = *mid == 'A' ? 'B' : 'A';
	struct iod_sec_pem x;
	CHECK(iod_sec_ca_sign_csr(ca, bad, strlen(bad), &rq, &x, &e) < 0);
	free(bad);
	iod_sec_pem_free(&crt);
	iod_sec_pem_free(&csr);
	iod_sec_ca_free(ca);
}

/* Issue 23: a node commits the manifests of the checkpoints whose primary
 * copy it holds, of replicas that run on it, and no other node's. */
TEST(authz_node_checkpoints_only_its_own)
{
	struct iod_state *s;
	struct iod_sec_identity n1, n2, viewer;
	struct iod_sec_decision d;
	const char *mine = "{\"service\": \"ps\", \"replica\": \"ps-0\", \"node\": \"node-1\", "
	                   "\"step\": 40}";
	CHECK_EQ(iod_state_new(&s), 0);
	node(&n1, "node-1");
	node(&n2, "node-2");
	user(&viewer, "vi", IOD_SEC_ROLE_VIEWER);
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-1", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "ps-0",
	                  "{\"service\": \"ps\", \"node\": \"node-1\", \"phase\": \"running\"}", 0),
	         0);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40", mine, s, &d),
	         0);
	/* node-2 neither writes node-1's manifest nor names itself for ps-0 */
	CHECK_EQ(decide(&n2, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40", mine, s, &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "must name node node-2");
	CHECK_EQ(decide(&n2, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40",
	                "{\"service\": \"ps\", \"replica\": \"ps-0\", \"node\": \"node-2\"}", s,
	                &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "replica ps-0 does not run on this node");
	/* once stored, only its node may replace or delete it */
	CHECK_EQ(put_json(s, IOD_STATE_CHECKPOINT, "ps-0.r0.s40", mine, 0), 0);
	CHECK_EQ(
	    decide(&n2, IOD_SEC_VERB_DELETE, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40", NULL, s, &d),
	    -EACCES);
	CHECK_CONTAINS(d.reason, "belongs to node node-1");
	CHECK_EQ(
	    decide(&n1, IOD_SEC_VERB_DELETE, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40", NULL, s, &d),
	    0);
	/* people: viewers read, do not write */
	CHECK_EQ(decide(&viewer, IOD_SEC_VERB_GET, IOD_SEC_RES_CHECKPOINT, NULL, NULL, s, &d), 0);
	CHECK_EQ(decide(&viewer, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "x", mine, s, &d),
	         -EACCES);
	iod_state_free(s);
}

/* Issue 22: a node publishes the libiod-xfer blobs of replicas placed on
 * it, each under its own service.ordinal, and no other node's. */
TEST(authz_node_xferpeers_only_its_replicas)
{
	struct iod_state *s;
	struct iod_sec_identity n1, n2, viewer, dep;
	struct iod_sec_decision d;
	const char *mine = "{\"service\": \"tr\", \"ordinal\": 1, \"replica\": \"tr-1\", "
	                   "\"node\": \"node-1\", \"md\": \"00\"}";
	CHECK_EQ(iod_state_new(&s), 0);
	node(&n1, "node-1");
	node(&n2, "node-2");
	user(&viewer, "vi", IOD_SEC_ROLE_VIEWER);
	user(&dep, "de", IOD_SEC_ROLE_DEPLOYER);
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-1", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-2", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "tr-1",
	                  "{\"service\": \"tr\", \"ordinal\": 1, \"node\": \"node-1\"}", 0),
	         0);
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "tr.1", mine, s, &d), 0);
	/* not under another ordinal's name */
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "tr.0", mine, s, &d), -EACCES);
	CHECK_CONTAINS(d.reason, "publishes only as xferpeer/tr.1");
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "tr.1",
	                "{\"service\": \"tr\", \"ordinal\": 0, \"replica\": \"tr-1\", "
	                "\"node\": \"node-1\", \"md\": \"00\"}",
	                s, &d),
	         -EACCES);
	/* node-2 does not run tr-1 */
	CHECK_EQ(decide(&n2, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "tr.1", mine, s, &d), -EACCES);
	CHECK_CONTAINS(d.reason, "must name node node-2");
	CHECK_EQ(decide(&n2, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "tr.1",
	                "{\"service\": \"tr\", \"ordinal\": 1, \"replica\": \"tr-1\", "
	                "\"node\": \"node-2\", \"md\": \"00\"}",
	                s, &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "replica tr-1 does not run on this node");
	/* once stored, only its node replaces or deletes it */
	CHECK_EQ(put_json(s, IOD_STATE_XFERPEER, "tr.1", mine, 0), 0);
	CHECK_EQ(decide(&n2, IOD_SEC_VERB_DELETE, IOD_SEC_RES_XFERPEER, "tr.1", NULL, s, &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "belongs to node node-1");
	CHECK_EQ(decide(&n1, IOD_SEC_VERB_DELETE, IOD_SEC_RES_XFERPEER, "tr.1", NULL, s, &d), 0);
	/* people: viewers read, deployers write */
	CHECK_EQ(decide(&viewer, IOD_SEC_VERB_GET, IOD_SEC_RES_XFERPEER, "tr.1", NULL, s, &d), 0);
	CHECK_EQ(decide(&viewer, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "tr.1", mine, s, &d),
	         -EACCES);
	CHECK_EQ(decide(&dep, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "tr.1", mine, s, &d), 0);
	iod_state_free(s);
}

static void service(struct iod_sec_identity *id, const char *tenant, const char *name)
{
	memset(id, 0, sizeof(*id));
	id->kind = IOD_SEC_KIND_SERVICE;
	snprintf(id->name, sizeof(id->name), "%s", name);
	snprintf(id->tenant, sizeof(id->tenant), "%s", tenant);
	snprintf(id->via, sizeof(id->via), "certificate");
}

/* Issues 22/23: a replica's own credential (its service's SVID) writes the
 * checkpoints and xferpeers of its own service's replicas and nothing of
 * another service's, another tenant's or any other resource. */
TEST(authz_service_writes_only_its_own_services_objects)
{
	struct iod_state *s;
	struct iod_sec_identity ps, other, red;
	struct iod_sec_decision d;
	const char *ck = "{\"service\": \"ps\", \"replica\": \"ps-0\", \"node\": \"node-1\", "
	                 "\"step\": 40}";
	const char *xp = "{\"service\": \"ps\", \"ordinal\": 0, \"replica\": \"ps-0\", "
	                 "\"node\": \"node-1\", \"md\": \"00\"}";
	CHECK_EQ(iod_state_new(&s), 0);
	service(&ps, "default", "ps");
	service(&other, "default", "web");
	service(&red, "red", "ps"); /* the same name in another tenant */
	CHECK_EQ(put_json(s, IOD_STATE_NODE, "node-1", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_SERVICE, "ps", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_SERVICE, "web", "{}", 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "ps-0",
	                  "{\"service\": \"ps\", \"ordinal\": 0, \"node\": \"node-1\"}", 0),
	         0);
	CHECK_EQ(put_json(s, IOD_STATE_REPLICA, "web-0",
	                  "{\"service\": \"web\", \"ordinal\": 0, \"node\": \"node-1\"}", 0),
	         0);
	/* its own */
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40", ck, s, &d),
	         0);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "ps.0", xp, s, &d), 0);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_GET, IOD_SEC_RES_XFERPEER, "ps.1", NULL, s, &d), 0);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_LIST, IOD_SEC_RES_CHECKPOINT, NULL, NULL, s, &d), 0);
	/* another service's replica, or its own under another node's name */
	CHECK_EQ(decide(&other, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40", ck, s, &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "replica ps-0 is not a replica of service default/web");
	CHECK_EQ(decide(&other, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "ps.0", xp, s, &d),
	         -EACCES);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40",
	                "{\"service\": \"ps\", \"replica\": \"ps-0\", \"node\": \"node-2\"}", s,
	                &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "must name its node node-1");
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "web-0.r0.s40",
	                "{\"service\": \"ps\", \"replica\": \"web-0\", \"node\": \"node-1\"}", s,
	                &d),
	         -EACCES);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40",
	                "{\"service\": \"web\", \"replica\": \"ps-0\", \"node\": \"node-1\"}", s,
	                &d),
	         -EACCES);
	CHECK_CONTAINS(d.reason, "must name service ps");
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "ps.1", xp, s, &d), -EACCES);
	CHECK_CONTAINS(d.reason, "publishes only as xferpeer/ps.0");
	/* a service of the same name in another tenant is not this one */
	CHECK_EQ(decide(&red, IOD_SEC_VERB_PUT, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40", ck, s, &d),
	         -EACCES);
	/* stored objects: only its own service deletes them */
	CHECK_EQ(put_json(s, IOD_STATE_CHECKPOINT, "ps-0.r0.s40", ck, 0), 0);
	CHECK_EQ(put_json(s, IOD_STATE_XFERPEER, "ps.0", xp, 0), 0);
	CHECK_EQ(
	    decide(&other, IOD_SEC_VERB_DELETE, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40", NULL, s, &d),
	    -EACCES);
	CHECK_CONTAINS(d.reason, "another service");
	CHECK_EQ(decide(&other, IOD_SEC_VERB_DELETE, IOD_SEC_RES_XFERPEER, "ps.0", NULL, s, &d),
	         -EACCES);
	CHECK_EQ(decide(&other, IOD_SEC_VERB_PUT, IOD_SEC_RES_XFERPEER, "ps.0",
	                "{\"service\": \"web\", \"ordinal\": 0, \"replica\": \"web-0\", "
	                "\"node\": \"node-1\", \"md\": \"00\"}",
	                s, &d),
	         -EACCES);
	CHECK_EQ(
	    decide(&ps, IOD_SEC_VERB_DELETE, IOD_SEC_RES_CHECKPOINT, "ps-0.r0.s40", NULL, s, &d),
	    0);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_DELETE, IOD_SEC_RES_XFERPEER, "ps.0", NULL, s, &d), 0);
	/* nothing else: not services, replicas, nodes, secrets, metrics, watches */
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_GET, IOD_SEC_RES_SERVICE, "ps", NULL, s, &d), -EACCES);
	CHECK_CONTAINS(d.reason, "service identities are for the mesh, not the API");
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_PUT, IOD_SEC_RES_REPLICA, "ps-0", "{}", s, &d), -EACCES);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_GET, IOD_SEC_RES_SECRET_VALUE, "k", NULL, s, &d),
	         -EACCES);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_GET, IOD_SEC_RES_METRICS, NULL, NULL, s, &d), -EACCES);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_WATCH, IOD_SEC_RES_CHECKPOINT, NULL, NULL, s, &d),
	         -EACCES);
	CHECK_EQ(decide(&ps, IOD_SEC_VERB_CREATE, IOD_SEC_RES_CERTIFICATE, NULL, NULL, s, &d),
	         -EACCES);
	iod_state_free(s);
}

/* A certificate without extendedKeyUsage may take either TLS side (RFC 5280
 * 4.2.1.12): a user's from before iod wrote the extension still logs in.
 * tests/fixtures/cert-no-eku.pem: self-signed by
 * `openssl req -x509 -newkey ec ... -subj /O=viewer/CN=alice -addext
 * subjectAltName=URI:spiffe://local/user/alice` (no extendedKeyUsage). */
TEST(cert_without_eku_may_take_either_side)
{
	struct iod_sec_cert_info info;
	struct iod_err e = {0};
	char *pem = NULL;
	CHECK_MSG(iod_sec_read_file("tests/fixtures/cert-no-eku.pem", false, &pem, &e) == 0, "%s",
	          e.msg);
	CHECK_MSG(iod_sec_cert_inspect(pem, strlen(pem), &info, &e) == 0, "%s", e.msg);
	CHECK_EQ(info.id.kind, IOD_SEC_KIND_USER);
	CHECK_STR(info.id.name, "alice");
	CHECK(info.server_auth && info.client_auth);
	free(pem);
}
