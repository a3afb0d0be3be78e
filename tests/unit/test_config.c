/*
 * test_config.c: the cluster configuration's schema (src/config/schema.c):
 * every key's values parse and round-trip, unknown keys and bad values are
 * refused with a suggestion, the stored document keeps a bounded history a
 * rollback finds, rdma without a device falls back to tcp and says so, and
 * status names the nodes that have not applied a revision.
 */
#include "harness.h"
#include "iod/config.h"
#include "iod/limits.h"
#include "iod/sec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct iod_err err;

static const struct iod_config_key *key(const char *p)
{
	const struct iod_config_key *k = NULL;
	if (iod_config_key_find(p, &k, &err))
		abort(); /* every path used here is a key */
	return k;
}

/* parse text for path and format it back */
static int roundtrip(const char *path, const char *text, char *out, size_t len)
{
	json_t *v = NULL;
	int rc = iod_config_value_parse(key(path), text, &v, &err);
	out[0] = 0;
	if (!rc)
		iod_config_value_format(key(path), v, out, len);
	json_decref(v);
	return rc;
}

TEST(every_key_parses_and_round_trips)
{
	char b[64];
	CHECK_EQ(roundtrip("service_mesh.transport", "rdma", b, sizeof(b)), 0);
	CHECK_STR(b, "rdma");
	CHECK_EQ(roundtrip("network.adaptive_routing", "clove-ecn", b, sizeof(b)), 0);
	CHECK_STR(b, "clove-ecn");
	CHECK_EQ(roundtrip("telemetry.interval", "1500ms", b, sizeof(b)), 0);
	CHECK_STR(b, "1500ms");
	CHECK_EQ(roundtrip("telemetry.interval", "60s", b, sizeof(b)), 0);
	CHECK_STR(b, "1m");
	CHECK_EQ(roundtrip("xfer.chunk_size", "2MiB", b, sizeof(b)), 0);
	CHECK_STR(b, "2MiB");
	CHECK_EQ(roundtrip("log.level", "debug", b, sizeof(b)), 0);
	/* each formatted default value parses again */
	size_t n;
	const struct iod_config_key *k = iod_config_keys(&n);
	CHECK(n >= 5);
	for (size_t i = 0; i < n; i++) {
		CHECK(k[i].applies && k[i].applies[0] && k[i].help && k[i].help[0]);
		CHECK(strchr(k[i].path, '.') != NULL);
	}
}

TEST(unknown_keys_and_bad_values_are_refused_with_a_suggestion)
{
	const struct iod_config_key *k;
	json_t *v = NULL;
	CHECK_EQ(iod_config_key_find("service_mesh.transprt", &k, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "did you mean \"service_mesh.transport\"");
	CHECK_EQ(iod_config_key_find("telemetry", &k, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "did you mean \"telemetry.");
	CHECK_EQ(iod_config_key_find("zzzzzzzzzzzzzzzz", &k, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "iod config view");
	CHECK_EQ(iod_config_value_parse(key("service_mesh.transport"), "rdmaa", &v, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "tcp|shm|rdma|auto");
	CHECK_CONTAINS(err.msg, "did you mean \"rdma\"");
	CHECK_EQ(iod_config_value_parse(key("telemetry.interval"), "10ms", &v, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "from 100ms to 1m");
	CHECK_EQ(iod_config_value_parse(key("telemetry.interval"), "1500us", &v, &err), -EINVAL);
	CHECK_EQ(iod_config_value_parse(key("telemetry.interval"), "soon", &v, &err), -EINVAL);
	CHECK_EQ(iod_config_value_parse(key("xfer.chunk_size"), "1GiB", &v, &err), -EINVAL);
	CHECK(v == NULL);
	/* stored values of the wrong type */
	json_t *s = json_pack("{s:i}", "service_mesh.transport", 3);
	CHECK_EQ(iod_config_settings_check(s, &err), -EINVAL);
	json_decref(s);
	s = json_pack("{s:s}", "no.such", "x");
	CHECK_EQ(iod_config_settings_check(s, &err), -EINVAL);
	json_decref(s);
}

TEST(history_is_bounded_and_rollback_finds_each_revision)
{
	json_t *doc = NULL;
	uint64_t rev = 0;
	for (int i = 1; i <= IOD_CONFIG_HISTORY_MAX + 5; i++) {
		json_t *s = json_pack("{s:I}", "telemetry.interval", (json_int_t)(100 + i));
		json_t *next = iod_config_doc_next(doc, rev, s, "set", (uint64_t)i);
		json_decref(s);
		json_decref(doc);
		doc = next;
		rev = (uint64_t)i * 10; /* the revision the PUT got */
		CHECK_EQ(iod_config_doc_check(doc, &err), 0);
	}
	CHECK_EQ(json_array_size(json_object_get(doc, "history")), (size_t)IOD_CONFIG_HISTORY_MAX);
	const json_t *at = iod_config_doc_at(doc, rev, rev - 10, &err);
	CHECK(at != NULL);
	CHECK_EQ(json_integer_value(json_object_get(at, "telemetry.interval")),
	         (json_int_t)(100 + IOD_CONFIG_HISTORY_MAX + 4));
	CHECK(iod_config_doc_at(doc, rev, rev, &err) == iod_config_doc_settings(doc));
	CHECK(iod_config_doc_at(doc, rev, 10, &err) == NULL); /* dropped */
	CHECK_CONTAINS(err.msg, "iod config history");
	/* a document round-trips through the parser */
	char *t = iod_json_string(doc, true);
	json_t *back = NULL;
	CHECK_EQ(iod_config_doc_parse(t, strlen(t), &back, &err), 0);
	CHECK(json_equal(back, doc));
	free(t);
	json_decref(back);
	json_decref(doc);
	const char *bad = "{\"history\": [{\"settings\": {}}]}";
	CHECK_EQ(iod_config_doc_parse(bad, strlen(bad), &back, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "no revision");
}

TEST(rdma_without_a_device_falls_back_to_tcp_and_says_so)
{
	struct iod_config_caps none = {.rdma = false}, rdma = {.rdma = true};
	struct iod_config_fallback fb[4];
	size_t n = 9;
	json_t *a = NULL, *s = json_pack("{s:s}", "service_mesh.transport", "rdma");
	CHECK_EQ(iod_config_effective(s, &none, &a, fb, 4, &n), 0);
	CHECK_EQ(n, (size_t)1);
	CHECK_STR(json_string_value(json_object_get(a, "service_mesh.transport")), "tcp");
	CHECK_STR(fb[0].want, "rdma");
	CHECK_STR(fb[0].use, "tcp");
	CHECK_CONTAINS(fb[0].reason, "no RDMA device");
	json_decref(a);
	CHECK_EQ(iod_config_effective(s, &rdma, &a, fb, 4, &n), 0);
	CHECK_EQ(n, (size_t)0);
	CHECK_STR(json_string_value(json_object_get(a, "service_mesh.transport")), "rdma");
	json_decref(a);
	json_decref(s);
}

TEST(status_names_nodes_behind)
{
	struct iod_config_fallback fb = {"service_mesh.transport", "rdma", "tcp", "no device"};
	json_t *ap = json_object();
	json_t *a1 = iod_config_ack_json("n1", 7, ap, NULL, 0, 1);
	json_t *a2 = iod_config_ack_json("n2", 5, ap, &fb, 1, 1);
	json_t *nodes =
	    json_pack("{s:[{s:s},{s:s},{s:s}]}", "items", "name", "n1", "name", "n2", "name", "n3");
	json_t *cfgs =
	    json_pack("{s:[{s:s,s:o},{s:s,s:o},{s:s,s:{}}]}", "items", "name", "ack.n1", "value",
	              a1, "name", "ack.n2", "value", a2, "name", "cluster", "value");
	uint32_t behind = 0;
	json_t *st = iod_config_status(7, nodes, cfgs, &behind);
	CHECK_EQ(behind, 2u);
	CHECK(json_is_true(json_object_get(json_array_get(st, 0), "applied")));
	CHECK(json_is_false(json_object_get(json_array_get(st, 1), "applied")));
	CHECK_EQ(json_array_size(json_object_get(json_array_get(st, 1), "fallbacks")), (size_t)1);
	CHECK(json_is_false(json_object_get(json_array_get(st, 2), "acked")));
	json_decref(st);
	st = iod_config_status(5, nodes, cfgs, &behind);
	CHECK_EQ(behind, 1u);
	json_decref(st);
	json_decref(nodes);
	json_decref(cfgs);
	json_decref(ap);
	CHECK(iod_config_is_ack_name("ack.n1") && !iod_config_is_ack_name("cluster"));
}

TEST(a_node_writes_only_its_own_ack)
{
	struct iod_sec_identity id = {0};
	struct iod_sec_request rq = {0};
	struct iod_sec_decision d;
	id.kind = IOD_SEC_KIND_NODE;
	snprintf(id.name, sizeof(id.name), "node-1");
	rq.verb = IOD_SEC_VERB_PUT;
	rq.res = IOD_SEC_RES_CONFIG;
	rq.name = "ack.node-1";
	CHECK_EQ(iod_sec_authorize(&id, &rq, &d), 0);
	rq.name = "ack.node-2";
	CHECK_EQ(iod_sec_authorize(&id, &rq, &d), -EACCES);
	rq.name = IOD_CONFIG_OBJECT;
	CHECK_EQ(iod_sec_authorize(&id, &rq, &d), -EACCES);
	CHECK_CONTAINS(d.reason, "config/ack.node-1");
}
