/*
 * test_api_auth.c: the API's security shell: loopback detection (what may
 * run without TLS), the classifier that turns method and path into verb x
 * resource, token issuing, and the audit ring.
 */
#include "harness.h"
#include "api/auth.h"
#include "api/validate.h"

#include <stdlib.h>

TEST(loopback_addresses)
{
	CHECK(iod_api_addr_is_loopback("127.0.0.1:7400"));
	CHECK(iod_api_addr_is_loopback("127.9.8.7:1"));
	CHECK(iod_api_addr_is_loopback("localhost:7400"));
	CHECK(iod_api_addr_is_loopback("[::1]:7400"));
	CHECK(!iod_api_addr_is_loopback("0.0.0.0:7400"));
	CHECK(!iod_api_addr_is_loopback(":7400"));
	CHECK(!iod_api_addr_is_loopback("10.0.0.1:7400"));
	CHECK(!iod_api_addr_is_loopback("[::]:7400"));
	CHECK(!iod_api_addr_is_loopback("example.com:7400"));
}

TEST(insecure_refuses_non_loopback_naming_the_flag)
{
	struct iod_server_config c;
	struct iod_api_sec s;
	struct iod_err e = {0};
	iod_server_config_default(&c);
	c.insecure = true;
	snprintf(c.data_dir, sizeof(c.data_dir), "%s/d", iod_test_tmpdir());
	snprintf(c.api_addr, sizeof(c.api_addr), "0.0.0.0:7400");
	snprintf(c.raft_addr, sizeof(c.raft_addr), "127.0.0.1:7300");
	CHECK_EQ(iod_api_sec_init(&s, &c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "--api 0.0.0.0:7400");
	snprintf(c.api_addr, sizeof(c.api_addr), "127.0.0.1:7400");
	snprintf(c.raft_addr, sizeof(c.raft_addr), "10.1.2.3:7300");
	CHECK_EQ(iod_api_sec_init(&s, &c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "--raft 10.1.2.3:7300");
	/* no --pki and no --insecure: refused even on loopback */
	c.insecure = true;
	snprintf(c.raft_addr, sizeof(c.raft_addr), "127.0.0.1:7300");
	CHECK_EQ(iod_api_sec_init(&s, &c, &e), 0);
	CHECK(!s.on);
	iod_api_sec_free(&s);
}

static int classify(const char *method, const char *url, const char *body,
                    struct iod_sec_request *rq, char *name)
{
	json_t *v = NULL;
	int rc = iod_api_classify(method, url, NULL, body, body ? strlen(body) : 0, rq, name,
	                          IOD_NAME_MAX, &v);
	json_decref(v);
	return rc;
}

TEST(classify_paths)
{
	struct iod_sec_request rq;
	char name[IOD_NAME_MAX];
	CHECK_EQ(classify("POST", "/v1/deploy", "x", &rq, name), 0);
	CHECK_EQ(rq.res, IOD_SEC_RES_DEPLOY);
	CHECK_EQ(rq.verb, IOD_SEC_VERB_CREATE);
	CHECK_EQ(classify("PUT", "/v1/service/web", "{}", &rq, name), 0);
	CHECK_EQ(rq.res, IOD_SEC_RES_SERVICE);
	CHECK_EQ(rq.verb, IOD_SEC_VERB_PUT);
	CHECK_STR(name, "web");
	CHECK_EQ(classify("GET", "/v1/replicas", NULL, &rq, name), 0);
	CHECK_EQ(rq.verb, IOD_SEC_VERB_LIST);
	CHECK_EQ(classify("DELETE", "/v1/members/3", NULL, &rq, name), 0);
	CHECK_EQ(rq.res, IOD_SEC_RES_MEMBER);
	CHECK_EQ(rq.verb, IOD_SEC_VERB_DELETE);
	CHECK_STR(name, "3");
	CHECK_EQ(classify("POST", "/v1/members", "{\"id\": 4, \"raft\": \"x:1\"}", &rq, name), 0);
	CHECK_STR(name, "4");
	CHECK_EQ(classify("PUT", "/v1/leases/17", NULL, &rq, name), 0);
	CHECK_EQ(rq.res, IOD_SEC_RES_LEASE);
	CHECK_EQ(classify("GET", "/metrics", NULL, &rq, name), 0);
	CHECK_EQ(rq.res, IOD_SEC_RES_METRICS);
	CHECK_EQ(classify("GET", "/v1/secret-values/db", NULL, &rq, name), 0);
	CHECK_EQ(rq.res, IOD_SEC_RES_SECRET_VALUE);
	CHECK_EQ(classify("POST", "/v1/tokens", "{}", &rq, name), 0);
	CHECK_EQ(rq.res, IOD_SEC_RES_TOKEN);
	CHECK_EQ(rq.verb, IOD_SEC_VERB_CREATE);
	/* kube-scheduler's extender questions are reads (a viewer may ask) */
	CHECK_EQ(classify("POST", "/v1/extender/filter", "{}", &rq, name), 0);
	CHECK_EQ(rq.res, IOD_SEC_RES_EXTENDER);
	CHECK_EQ(rq.verb, IOD_SEC_VERB_GET);
	struct iod_sec_identity viewer = {.kind = IOD_SEC_KIND_USER, .role = IOD_SEC_ROLE_VIEWER};
	struct iod_sec_decision d;
	CHECK_EQ(iod_sec_authorize(&viewer, &rq, &d), 0);
	rq.verb = IOD_SEC_VERB_PUT; /* nothing to write */
	CHECK_EQ(iod_sec_authorize(&viewer, &rq, &d), -EACCES);
	/* the CA certificate is public; unknown paths need only authentication */
	CHECK_EQ(classify("GET", "/v1/ca", NULL, &rq, name), -ENOENT);
	CHECK_EQ(classify("GET", "/v1/nosuch", NULL, &rq, name), 1);
	CHECK_EQ(classify("GET", "/elsewhere", NULL, &rq, name), 1);
	CHECK_EQ(classify("GET", "/v1/a/b/c/d", NULL, &rq, name), 1);
}

TEST(token_new_and_check)
{
	struct iod_sec_identity by, id;
	struct iod_sec_token t;
	struct iod_err e = {0};
	char tid[32], token[128];
	json_t *v = NULL;
	memset(&by, 0, sizeof(by));
	by.kind = IOD_SEC_KIND_USER;
	snprintf(by.name, sizeof(by.name), "ada");
	json_t *body = json_pack("{s:s, s:I, s:s}", "role", "node", "ttl_ms", (json_int_t)3600000,
	                         "node", "node-9");
	CHECK_EQ(
	    iod_api_sec_token_new(body, &by, 1000, tid, sizeof(tid), token, sizeof(token), &v, &e),
	    0);
	json_decref(body);
	char *stored = iod_json_string(v, true);
	bool leaked = strstr(stored, token + 17) != NULL; /* the secret is not stored */
	free(stored);
	CHECK(!leaked);
	CHECK_EQ(iod_sec_token_parse(token, strlen(token), &t, &e), 0);
	CHECK_STR(t.id, tid);
	CHECK_EQ(iod_sec_token_check(&t, v, 2000, "c", &id, &e), 0);
	CHECK_EQ(id.kind, IOD_SEC_KIND_BOOTSTRAP);
	CHECK_STR(id.name, "node-9");
	CHECK_EQ(iod_sec_token_check(&t, v, 1000 + 3600000, "c", &id, &e), -EACCES);
	json_decref(v);
	/* a join token must expire; roles are checked */
	body = json_pack("{s:s}", "role", "node");
	CHECK_EQ(
	    iod_api_sec_token_new(body, &by, 1, tid, sizeof(tid), token, sizeof(token), &v, &e),
	    -EINVAL);
	json_decref(body);
	body = json_pack("{s:s}", "role", "server");
	CHECK_EQ(
	    iod_api_sec_token_new(body, &by, 1, tid, sizeof(tid), token, sizeof(token), &v, &e),
	    -EINVAL);
	json_decref(body);
}

TEST(audit_ring_and_file)
{
	struct iod_server_config c;
	struct iod_api_sec s;
	struct iod_err e = {0};
	struct iod_sec_identity id;
	iod_server_config_default(&c);
	c.insecure = true;
	snprintf(c.data_dir, sizeof(c.data_dir), "%s/audit", iod_test_tmpdir());
	snprintf(c.api_addr, sizeof(c.api_addr), "127.0.0.1:1");
	snprintf(c.raft_addr, sizeof(c.raft_addr), "127.0.0.1:2");
	CHECK_EQ(iod_api_sec_init(&s, &c, &e), 0);
	iod_sec_identity_anonymous(&id);
	iod_api_sec_audit(&s, &id, "POST", "/v1/deploy", 401, "127.0.0.1:5", "no credential");
	id.kind = IOD_SEC_KIND_USER;
	snprintf(id.name, sizeof(id.name), "ada");
	iod_api_sec_audit(&s, &id, "PUT", "/v1/service/x", 200, "127.0.0.1:6", NULL);
	json_t *l = iod_api_sec_audit_list(&s, 0, 10);
	CHECK_EQ(json_array_size(json_object_get(l, "items")), 2);
	CHECK_STR(json_string_value(
	              json_object_get(json_array_get(json_object_get(l, "items"), 0), "who")),
	          "anonymous");
	json_decref(l);
	l = iod_api_sec_audit_list(&s, 1, 10);
	CHECK_EQ(json_array_size(json_object_get(l, "items")), 1);
	json_decref(l);
	CHECK_EQ(s.denied, 1);
	iod_api_sec_free(&s);
	char path[IOD_PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/audit.log", c.data_dir);
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_buf_read_file(&b, path, 1 << 20, &e), 0);
	CHECK_CONTAINS(b.data, "\"who\":\"user:ada\"");
	CHECK_CONTAINS(b.data, "\"status\":401");
	iod_buf_free(&b);
}

static int put_obj(struct iod_state *s, enum iod_state_kind k, const char *name, const char *js)
{
	struct iod_state_result r;
	json_t *v = json_loads(js, 0, NULL);
	char *cmd = iod_state_cmd_put(k, name, v, 0, -1);
	int rc = iod_state_apply(s, cmd, strlen(cmd), &r);
	free(cmd);
	json_decref(v);
	return rc;
}

static int validate(const struct iod_state *st, enum iod_state_kind k, const char *name,
                    const char *js, struct iod_err *e)
{
	json_t *v = json_loads(js, 0, NULL), *answer = NULL;
	int rc = iod_api_validate_put(st, k, name, v, &answer, e);
	json_decref(v);
	json_decref(answer);
	return rc;
}

/* Issue 16: a raw PUT of a Service and a Replica ran what no spec validated. */
TEST(raw_puts_pass_the_deploy_validation)
{
	struct iod_state *st;
	struct iod_err e = {0};
	CHECK_EQ(iod_state_new(&st), 0);
	CHECK_EQ(put_obj(st, IOD_STATE_NODE, "n1", "{}"), 0);
	CHECK_EQ(validate(st, IOD_STATE_SERVICE, "web",
	                  "{\"name\": \"web\", \"type\": \"stateless\", \"command\": \"sleep\", "
	                  "\"replicas\": 2, "
	                  "\"generation\": 3, \"gpu\": 0}",
	                  &e),
	         0);
	/* a key the spec does not have, a bad value, a name that is not the object's */
	CHECK_EQ(
	    validate(st, IOD_STATE_SERVICE, "web", "{\"name\": \"web\", \"privileged\": true}", &e),
	    -EINVAL);
	CHECK_CONTAINS(e.msg, "does not pass the spec's validation");
	CHECK_EQ(
	    validate(st, IOD_STATE_SERVICE, "web", "{\"name\": \"web\", \"replicas\": -1}", &e),
	    -EINVAL);
	CHECK_EQ(validate(st, IOD_STATE_SERVICE, "web", "{\"name\": \"other\"}", &e), -EINVAL);
	/* replicas must belong to a deployed service and a registered node */
	CHECK_EQ(validate(st, IOD_STATE_REPLICA, "web-0",
	                  "{\"service\": \"web\", \"node\": \"n1\"}", &e),
	         -EINVAL);
	CHECK_EQ(put_obj(st, IOD_STATE_SERVICE, "web", "{\"name\": \"web\"}"), 0);
	CHECK_EQ(validate(st, IOD_STATE_REPLICA, "web-0",
	                  "{\"service\": \"web\", \"node\": \"n1\", \"ordinal\": 0}", &e),
	         0);
	CHECK_EQ(validate(st, IOD_STATE_REPLICA, "web-0",
	                  "{\"service\": \"web\", \"node\": \"n9\"}", &e),
	         -EINVAL);
	/* issue 23: a stored replica whose node is lost may still be written on
	 * it (the rescheduler's "lost" marker of a stateful one, before its
	 * move); moving it to another unregistered node is still refused */
	CHECK_EQ(put_obj(st, IOD_STATE_REPLICA, "db-0", "{\"service\": \"web\", \"node\": \"n7\"}"),
	         0);
	CHECK_EQ(validate(st, IOD_STATE_REPLICA, "db-0",
	                  "{\"service\": \"web\", \"node\": \"n7\", \"phase\": \"lost\"}", &e),
	         0);
	CHECK_EQ(
	    validate(st, IOD_STATE_REPLICA, "db-0", "{\"service\": \"web\", \"node\": \"n8\"}", &e),
	    -EINVAL);
	CHECK_CONTAINS(e.msg, "node n8 is not registered");
	/* its tenant is its service's: "default" here, so "red" is refused */
	CHECK_EQ(validate(st, IOD_STATE_REPLICA, "web-0",
	                  "{\"service\": \"web\", \"node\": \"n1\", \"tenant\": \"default\"}", &e),
	         0);
	CHECK_EQ(validate(st, IOD_STATE_REPLICA, "web-0",
	                  "{\"service\": \"web\", \"node\": \"n1\", \"tenant\": \"red\"}", &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "is not its service's (default)");
	/* policies parse as service policies */
	CHECK_EQ(validate(st, IOD_STATE_POLICY, "p", "{\"from\": \"a\", \"to\": \"b\"}", &e), 0);
	CHECK_EQ(validate(st, IOD_STATE_POLICY, "p", "{\"v\": 1}", &e), -EINVAL);
	/* netpolicies: every rule parses; a group guards its own tenant's
	 * services, and names peers of that tenant only */
	CHECK_EQ(validate(st, IOD_STATE_NETPOLICY, "g",
	                  "{\"service\": \"web\", \"ingress\": [{\"name\": \"a\", "
	                  "\"service\": \"web\", \"protocol\": \"tcp\", \"ports\": 80}]}",
	                  &e),
	         0);
	CHECK_EQ(validate(st, IOD_STATE_NETPOLICY, "g",
	                  "{\"service\": \"web\", \"ingress\": [{\"name\": \"a\", "
	                  "\"protocol\": \"icmp\", \"ports\": 80}]}",
	                  &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "netpolicy/g: netpolicy: ingress[0]: rule a: \"ports\" need");
	CHECK_EQ(validate(st, IOD_STATE_NETPOLICY, "g",
	                  "{\"service\": \"web\", \"tenant\": \"red\", \"egress\": []}", &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "service web is tenant default's; a policy of tenant red cannot");
	CHECK_EQ(
	    put_obj(st, IOD_STATE_SERVICE, "vault", "{\"name\": \"vault\", \"tenant\": \"red\"}"),
	    0);
	CHECK_EQ(validate(st, IOD_STATE_NETPOLICY, "g",
	                  "{\"service\": \"web\", \"egress\": [{\"name\": \"v\", "
	                  "\"service\": \"vault\"}]}",
	                  &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "peer service vault is tenant red's");
	CHECK_EQ(validate(st, IOD_STATE_NETPOLICY, "g", "{\"ingress\": []}", &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "\"service\"");
	/* issue 23: a checkpoint manifest names a deployed service and a
	 * registered node, and is committed only once the quorum holds it */
	CHECK_EQ(validate(st, IOD_STATE_CHECKPOINT, "web-0.r0.s10",
	                  "{\"service\": \"web\", \"node\": \"n1\", \"step\": 10, \"replicas\": 3, "
	                  "\"min_size\": 2, \"copies\": [{\"node\": \"n1\", \"ok\": true}, "
	                  "{\"node\": \"n2\", \"ok\": true}, {\"node\": \"n3\", \"ok\": false}]}",
	                  &e),
	         0);
	CHECK_EQ(validate(st, IOD_STATE_CHECKPOINT, "web-0.r0.s10",
	                  "{\"service\": \"web\", \"node\": \"n1\", \"step\": 10, \"replicas\": 3, "
	                  "\"min_size\": 2, \"copies\": [{\"node\": \"n1\", \"ok\": true}, "
	                  "{\"node\": \"n2\", \"ok\": false}]}",
	                  &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "1 copies hold its chunks, the write quorum is 2");
	CHECK_EQ(validate(st, IOD_STATE_CHECKPOINT, "c",
	                  "{\"service\": \"nope\", \"node\": \"n1\", \"step\": 1}", &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "deployed service");
	CHECK_EQ(validate(st, IOD_STATE_CHECKPOINT, "c",
	                  "{\"service\": \"web\", \"node\": \"n7\", \"step\": 1}", &e),
	         -EINVAL);
	CHECK_EQ(validate(st, IOD_STATE_CHECKPOINT, "c",
	                  "{\"service\": \"web\", \"node\": \"n1\", \"step\": -4}", &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "step");
	CHECK_EQ(validate(st, IOD_STATE_CHECKPOINT, "c",
	                  "{\"service\": \"web\", \"node\": \"n1\", \"step\": 1, \"replicas\": 9}",
	                  &e),
	         -EINVAL);
	/* everything else is free-form */
	CHECK_EQ(validate(st, IOD_STATE_CONFIG, "c", "{\"v\": 1}", &e), 0);
	iod_state_free(st);
}

/* Issue 16: one minimum certificate life (IOD_SEC_CERT_TTL_MIN_S) for the
 * API and the CLI; below it the API says so instead of silently signing
 * for the default life. */
TEST(cert_ttl_minimum_is_refused_not_ignored)
{
	struct iod_api_sec s;
	struct iod_sec_identity subject;
	struct iod_sec_pem csr;
	struct iod_err e = {0};
	json_t *answer = NULL;
	memset(&s, 0, sizeof(s));
	CHECK_EQ(iod_sec_ca_create("c1", 1000000, 3600 * 24, &s.ca, &e), 0);
	s.ca_pem = (char *)iod_sec_ca_cert_pem(s.ca);
	CHECK_EQ(iod_sec_csr_create("web", &csr, &e), 0);
	json_t *b =
	    json_pack("{s:s, s:s, s:s, s:s, s:i}", "kind", "service", "name", "web", "tenant",
	              "blue", "csr", csr.cert, "ttl_s", IOD_SEC_CERT_TTL_MIN_S - 1);
	CHECK_EQ(iod_api_sec_cert_subject(b, "c1", &subject, &e), 0);
	CHECK_EQ(iod_api_sec_cert_sign(&s, b, &subject, NULL, 1000000, &answer, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "at least 10 s");
	json_object_set_new(b, "ttl_s", json_integer(IOD_SEC_CERT_TTL_MIN_S));
	CHECK_MSG(iod_api_sec_cert_sign(&s, b, &subject, NULL, 1000000, &answer, &e) == 0, "%s",
	          e.msg);
	uint64_t na = 0;
	CHECK_EQ(iod_json_get_u64(answer, "not_after", &na), 0);
	CHECK_U64(na, 1000000 + IOD_SEC_CERT_TTL_MIN_S);
	/* signed for no node: no OU */
	struct iod_sec_cert_info info;
	const char *pem = json_string_value(json_object_get(answer, "cert"));
	CHECK_EQ(iod_sec_cert_inspect(pem, strlen(pem), &info, &e), 0);
	CHECK_STR(info.node, "");
	json_decref(answer);
	/* a node asking for its replicas' SVID is named in it (the OU), so a
	 * proxy can refuse the SVID once that node is revoked */
	struct iod_sec_identity by = {.kind = IOD_SEC_KIND_NODE, .role = IOD_SEC_ROLE_NODE};
	snprintf(by.name, sizeof(by.name), "gpu-7");
	CHECK_MSG(iod_api_sec_cert_sign(&s, b, &subject, &by, 1000000, &answer, &e) == 0, "%s",
	          e.msg);
	pem = json_string_value(json_object_get(answer, "cert"));
	CHECK_EQ(iod_sec_cert_inspect(pem, strlen(pem), &info, &e), 0);
	CHECK_EQ(info.id.kind, IOD_SEC_KIND_SERVICE);
	CHECK_STR(info.id.tenant, "blue");
	CHECK_STR(info.node, "gpu-7");
	json_decref(answer);
	json_decref(b);
	iod_sec_pem_free(&csr);
	iod_sec_ca_free(s.ca);
}

/* What /v1/certificates signs may take the TLS side its kind takes: a node
 * serves (telemetry, chunk server, mesh inbound) and dials, so it carries
 * serverAuth and clientAuth; a service SVID only dials, so it carries
 * clientAuth alone (the old code gave SVIDs serverAuth and nodes none). */
TEST(signed_certificates_carry_the_usage_of_their_kind)
{
	struct iod_api_sec s;
	struct iod_sec_identity subject;
	struct iod_sec_pem csr;
	struct iod_sec_cert_info info;
	struct iod_err e = {0};
	json_t *answer = NULL;
	memset(&s, 0, sizeof(s));
	CHECK_EQ(iod_sec_ca_create("c1", 1000000, 3600 * 24, &s.ca, &e), 0);
	s.ca_pem = (char *)iod_sec_ca_cert_pem(s.ca);
	CHECK_EQ(iod_sec_csr_create("x", &csr, &e), 0);
	static const char *const kinds[] = {"node", "service"};
	for (unsigned i = 0; i < 2; i++) {
		json_t *b = json_pack("{s:s, s:s, s:s, s:s}", "kind", kinds[i], "name", "gpu-7",
		                      "tenant", "blue", "csr", csr.cert);
		CHECK_MSG(iod_api_sec_cert_subject(b, "c1", &subject, &e) == 0, "%s", e.msg);
		CHECK_MSG(iod_api_sec_cert_sign(&s, b, &subject, NULL, 1000000, &answer, &e) == 0,
		          "%s", e.msg);
		const char *pem = json_string_value(json_object_get(answer, "cert"));
		CHECK_EQ(iod_sec_cert_inspect(pem, strlen(pem), &info, &e), 0);
		CHECK_MSG(info.client_auth, "%s: no clientAuth", kinds[i]);
		CHECK_MSG(info.server_auth == (i == 0), "%s: serverAuth %d", kinds[i],
		          info.server_auth);
		json_decref(answer);
		json_decref(b);
	}
	iod_sec_pem_free(&csr);
	iod_sec_ca_free(s.ca);
}
