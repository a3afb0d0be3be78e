/*
 * test_objects.c: the typed cluster objects (src/state/objects.c): every
 * field round-trips, keys this version does not know survive a
 * read-modify-write, old Endpoint shapes still load, wrong types are
 * reported and kept, and a snapshot written by the code before typed
 * objects (tests/fixtures/state-v0.snap, main 283da7b) restores and reads.
 */
#include "harness.h"
#include "iod/api.h"
#include "iod/ctrl.h"
#include "iod/objects.h"
#include "iod/state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *parse(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);
	IOD_ASSERT(j);
	return j;
}

TEST(replica_round_trip_keeps_unknown_keys)
{
	struct iod_obj_replica *r = malloc(sizeof(*r));
	struct iod_err e = {0};
	json_t *in = parse("{\"service\":\"web\",\"ordinal\":3,\"node\":\"n1\",\"gpus\":\"0-1\","
	                   "\"cpus\":\"\",\"mem_numa\":1,\"nic\":-1,\"phase\":\"pending\","
	                   "\"restarts\":0,\"generation\":7,\"reasons\":[\"why\"],"
	                   "\"explain\":{\"evaluated\":2},\"future_key\":{\"a\":1}}");
	CHECK_EQ(iod_obj_replica_from_json(in, r, &e), 0);
	CHECK_STR(r->service, "web");
	CHECK_EQ(r->ordinal, 3);
	CHECK_STR(r->gpus, "0-1");
	CHECK_EQ(r->mem_numa, 1);
	CHECK_EQ(r->nic, -1);
	CHECK_U64(r->generation, 7);
	CHECK(iod_obj_has(r, IOD_OBJ_REPLICA_CPUS));
	CHECK(!iod_obj_has(r, IOD_OBJ_REPLICA_ADDR));
	CHECK_EQ(r->head.version, 0);
	/* a read-modify-write keeps what it does not know, adds the version */
	CHECK_EQ(iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_PHASE, "running"), 0);
	json_t *out = iod_obj_replica_to_json(r);
	CHECK(out != NULL);
	CHECK_EQ(json_integer_value(json_object_get(out, "version")), IOD_OBJ_VERSION);
	CHECK_STR(json_string_value(json_object_get(out, "phase")), "running");
	CHECK(json_equal(json_object_get(out, "future_key"), json_object_get(in, "future_key")));
	CHECK(json_equal(json_object_get(out, "explain"), json_object_get(in, "explain")));
	json_object_del(out, "version");
	json_object_set_new(in, "phase", json_string("running"));
	CHECK(json_equal(out, in));
	json_decref(out);
	/* clear removes a field: it reads as its default and is not written */
	iod_obj_replica_clear(r, IOD_OBJ_REPLICA_MEM_NUMA);
	CHECK_EQ(r->mem_numa, -1);
	out = iod_obj_replica_to_json(r);
	CHECK(json_object_get(out, "mem_numa") == NULL);
	json_decref(out);
	iod_obj_replica_free(r);
	json_decref(in);
	free(r);
}

TEST(wrong_types_are_reported_and_kept)
{
	struct iod_obj_replica *r = malloc(sizeof(*r));
	struct iod_err e = {0};
	json_t *in = parse("{\"service\":\"web\",\"ordinal\":\"three\",\"port\":70000}");
	CHECK_EQ(iod_obj_replica_from_json(in, r, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "wrong type");
	CHECK_STR(r->service, "web");
	CHECK(!iod_obj_has(r, IOD_OBJ_REPLICA_ORDINAL));
	CHECK(!iod_obj_has(r, IOD_OBJ_REPLICA_PORT));
	CHECK_EQ(r->ordinal, 0);
	json_t *out = iod_obj_replica_to_json(r);
	CHECK_STR(json_string_value(json_object_get(out, "ordinal")), "three");
	CHECK_EQ(json_integer_value(json_object_get(out, "port")), 70000);
	CHECK_EQ(iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_PORT, 70000), -ERANGE);
	CHECK_EQ(iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_PORT, 8080), 0);
	json_decref(out);
	out = iod_obj_replica_to_json(r);
	CHECK_EQ(json_integer_value(json_object_get(out, "port")), 8080);
	json_decref(out);
	/* a string longer than its field is an error too, and kept */
	char big[IOD_NAME_MAX + 8];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	iod_obj_replica_free(r);
	json_decref(in);
	in = json_pack("{s:s}", "node", big);
	CHECK_EQ(iod_obj_replica_from_json(in, r, &e), -EINVAL);
	CHECK_EQ(iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_NODE, big), -E2BIG);
	out = iod_obj_replica_to_json(r);
	CHECK_STR(json_string_value(json_object_get(out, "node")), big);
	json_decref(out);
	iod_obj_replica_free(r);
	/* not an object */
	json_decref(in);
	in = json_pack("[]");
	CHECK_EQ(iod_obj_replica_from_json(in, r, &e), -EINVAL);
	iod_obj_replica_free(r);
	json_decref(in);
	free(r);
}

TEST(old_endpoint_shapes_load_and_are_written_new)
{
	struct iod_obj_endpoint ep;
	char address[IOD_ADDR_MAX + 8];
	/* what the agent wrote before typed objects: both spellings */
	json_t *in = parse("{\"replica\":\"web-0\",\"service\":\"web\",\"node\":\"n1\","
	                   "\"address\":\"127.0.0.1:20123\",\"addr\":\"127.0.0.1\",\"port\":20123,"
	                   "\"healthy\":true,\"health\":\"healthy\",\"phase\":\"healthy\"}");
	CHECK_EQ(iod_obj_endpoint_from_json(in, &ep, NULL), 0);
	CHECK_STR(ep.addr, "127.0.0.1");
	CHECK_EQ(ep.port, 20123);
	CHECK(ep.healthy);
	json_t *out = iod_obj_endpoint_to_json(&ep);
	CHECK(json_object_get(out, "address") == NULL);
	CHECK(json_object_get(out, "health") == NULL);
	CHECK_STR(json_string_value(json_object_get(out, "addr")), "127.0.0.1");
	json_decref(out);
	iod_obj_endpoint_free(&ep);
	json_decref(in);
	/* the oldest shape: address and health only */
	in = parse("{\"service\":\"web\",\"address\":\"10.0.0.7:8080\",\"health\":\"unhealthy\"}");
	CHECK_EQ(iod_obj_endpoint_from_json(in, &ep, NULL), 0);
	CHECK_STR(ep.addr, "10.0.0.7");
	CHECK_EQ(ep.port, 8080);
	CHECK(!ep.healthy);
	CHECK(iod_obj_has(&ep, IOD_OBJ_ENDPOINT_HEALTHY));
	iod_obj_endpoint_address(&ep, address, sizeof(address));
	CHECK_STR(address, "10.0.0.7:8080");
	out = iod_obj_endpoint_to_json(&ep);
	CHECK_EQ(json_integer_value(json_object_get(out, "port")), 8080);
	CHECK(json_is_false(json_object_get(out, "healthy")));
	json_decref(out);
	iod_obj_endpoint_free(&ep);
	json_decref(in);
	/* no address at all */
	in = parse("{\"service\":\"web\"}");
	CHECK_EQ(iod_obj_endpoint_from_json(in, &ep, NULL), 0);
	iod_obj_endpoint_address(&ep, address, sizeof(address));
	CHECK_STR(address, "");
	iod_obj_endpoint_free(&ep);
	json_decref(in);
}

static void *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	void *buf = malloc(1 << 20);
	IOD_ASSERT(f && buf);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

/* tests/fixtures/state-v0.snap: written by main 283da7b (before typed
 * objects): a registered node, a planned deploy of two replicas, an
 * Endpoint as that agent wrote it and one in the oldest hand-written shape,
 * a policy and a config. */
TEST(snapshot_written_before_typed_objects_restores)
{
	struct iod_state *s;
	struct iod_err e = {0};
	struct iod_obj_replica *r = malloc(sizeof(*r));
	struct iod_obj_endpoint ep;
	size_t len;
	void *buf = read_file("tests/fixtures/state-v0.snap", &len);
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_MSG(iod_state_restore(s, buf, len, &e) == 0, "%s", e.msg);
	struct iod_obj_node n;
	struct iod_obj_service sv;
	CHECK_EQ(iod_obj_node_from_json(iod_state_value(s, IOD_STATE_NODE, "n1"), &n, &e), 0);
	CHECK_EQ(iod_obj_node_gpus(&n), 8);
	CHECK_STR(n.model, "dgx-h100");
	CHECK_STR(n.addr, "127.0.0.1");
	CHECK(n.head.extra == NULL);
	iod_obj_node_free(&n);
	CHECK_EQ(iod_obj_service_from_json(iod_state_value(s, IOD_STATE_SERVICE, "web"), &sv, &e),
	         0);
	CHECK_U64(sv.generation, 1);
	CHECK_EQ(sv.gpu, 1);
	CHECK_EQ(sv.replicas, 2);
	iod_obj_service_free(&sv);
	CHECK(iod_state_value(s, IOD_STATE_POLICY, "default") != NULL);
	CHECK(iod_state_value(s, IOD_STATE_CONFIG, "member.1") != NULL);
	for (int i = 0; i < 2; i++) {
		char name[16];
		snprintf(name, sizeof(name), "web-%d", i);
		CHECK_EQ(
		    iod_obj_replica_from_json(iod_state_value(s, IOD_STATE_REPLICA, name), r, &e),
		    0);
		CHECK_STR(r->service, "web");
		CHECK_EQ(r->ordinal, (uint32_t)i);
		CHECK_STR(r->node, "n1");
		CHECK_STR(r->phase, "pending");
		CHECK_U64(r->generation, 1);
		CHECK(r->gpus[0] != 0);
		CHECK(json_array_size(r->reasons) == 1);
		CHECK(r->explain != NULL);
		CHECK_EQ(r->head.version, 0);
		CHECK(r->head.extra == NULL); /* every key it stored is a known field */
		iod_obj_replica_free(r);
	}
	CHECK_EQ(
	    iod_obj_endpoint_from_json(iod_state_value(s, IOD_STATE_ENDPOINT, "web-0"), &ep, &e),
	    0);
	CHECK_STR(ep.addr, "127.0.0.1");
	CHECK_EQ(ep.port, 20123);
	CHECK(ep.healthy);
	CHECK_STR(ep.node, "n1");
	iod_obj_endpoint_free(&ep);
	CHECK_EQ(
	    iod_obj_endpoint_from_json(iod_state_value(s, IOD_STATE_ENDPOINT, "web-1"), &ep, &e),
	    0);
	CHECK_STR(ep.addr, "10.0.0.7");
	CHECK_EQ(ep.port, 8080);
	CHECK(!ep.healthy);
	iod_obj_endpoint_free(&ep);
	/* the restored cluster deploys again with today's code: the same node,
	 * and the new generation's replicas replace the old ones */
	const char *spec = "services:\n  - name: web\n    type: stateless\n    replicas: 2\n"
	                   "    command: sleep 100\n    resources:\n      gpu: 1\n";
	char *cmd = NULL;
	json_t *answer = NULL;
	struct iod_state_result res;
	CHECK_MSG(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e) == 0, "%s", e.msg);
	CHECK(json_is_true(json_object_get(answer, "complete")));
	CHECK_EQ(iod_state_apply(s, cmd, strlen(cmd), &res), 0);
	CHECK_EQ(iod_obj_replica_from_json(iod_state_value(s, IOD_STATE_REPLICA, "web-1"), r, &e),
	         0);
	CHECK_U64(r->generation, 2);
	CHECK_EQ(r->head.version, IOD_OBJ_VERSION);
	iod_obj_replica_free(r);
	free(cmd);
	json_decref(answer);
	iod_state_free(s);
	free(buf);
	free(r);
}

TEST(node_service_and_member_objects)
{
	struct iod_obj_node n;
	struct iod_obj_service sv;
	struct iod_obj_member m;
	struct iod_err e = {0};
	json_t *in =
	    parse("{\"addr\":\"10.1.2.3\",\"gpus\":[\"a\",\"b\",\"c\"],\"cpus\":64,"
	          "\"model\":\"xml\",\"labels\":{\"rack\":\"r7\"},\"topology\":{\"x\":1}}");
	CHECK_EQ(iod_obj_node_from_json(in, &n, &e), 0);
	CHECK_EQ(iod_obj_node_gpus(&n), 3);
	CHECK_STR(iod_obj_node_rack(&n), "r7");
	CHECK_EQ(n.cpus, 64);
	CHECK(json_equal(n.topology, json_object_get(in, "topology")));
	CHECK(!n.cordoned);
	iod_obj_node_set_str(&n, IOD_OBJ_NODE_RACK, "r9");
	CHECK_STR(iod_obj_node_rack(&n), "r9");
	iod_obj_node_set_json(&n, IOD_OBJ_NODE_GPUS, json_integer(8));
	CHECK_EQ(iod_obj_node_gpus(&n), 8);
	json_t *out = iod_obj_node_to_json(&n);
	CHECK_EQ(json_integer_value(json_object_get(out, "gpus")), 8);
	CHECK_STR(json_string_value(json_object_get(out, "addr")), "10.1.2.3");
	json_decref(out);
	iod_obj_node_free(&n);
	json_decref(in);

	/* a Service is the spec's JSON plus the control plane's fields; its spec
	 * comes back without them */
	in = parse("{\"name\":\"web\",\"type\":\"stateful\",\"replicas\":2,\"command\":\"sleep\","
	           "\"generation\":4,\"gpu\":1,\"version\":1}");
	CHECK_EQ(iod_obj_service_from_json(in, &sv, &e), 0);
	CHECK_U64(sv.generation, 4);
	CHECK_EQ(sv.replicas, 2);
	CHECK_STR(sv.type, "stateful");
	CHECK_EQ(sv.head.version, 1);
	out = iod_obj_service_to_json(&sv);
	CHECK(json_equal(out, in));
	json_decref(out);
	out = iod_obj_service_spec(in);
	CHECK(json_object_get(out, "generation") == NULL);
	CHECK(json_object_get(out, "gpu") == NULL);
	CHECK(json_object_get(out, "version") == NULL);
	CHECK_STR(json_string_value(json_object_get(out, "command")), "sleep");
	json_decref(out);
	iod_obj_service_free(&sv);
	json_decref(in);

	in = parse("{\"id\":2,\"raft\":\"127.0.0.1:7302\",\"api\":\"127.0.0.1:7402\"}");
	CHECK_EQ(iod_obj_member_from_json(in, &m, &e), 0);
	CHECK_U64(m.id, 2);
	CHECK_STR(m.api, "127.0.0.1:7402");
	iod_obj_member_free(&m);
	json_decref(in);
}

/* The view helpers read what is stored as it is: text or "", any number or
 * NAN, and a pick of fields in order under their keys (null when absent). */
TEST(view_helpers_read_stored_values)
{
	json_t *in = parse("{\"phase\":\"running\",\"restarts\":3,\"node\":7,\"gpus\":\"0-1\","
	                   "\"reasons\":[\"fits\"],\"x\":1}");
	CHECK_STR(iod_obj_peek_text(IOD_OBJ_KIND_REPLICA, in, IOD_OBJ_REPLICA_PHASE), "running");
	CHECK_STR(iod_obj_peek_text(IOD_OBJ_KIND_REPLICA, in, IOD_OBJ_REPLICA_NODE), "");
	CHECK_STR(iod_obj_peek_text(IOD_OBJ_KIND_REPLICA, in, IOD_OBJ_REPLICA_SERVICE), "");
	CHECK_STR(iod_obj_peek_text(IOD_OBJ_KIND_REPLICA, NULL, IOD_OBJ_REPLICA_PHASE), "");
	CHECK(iod_obj_peek_num(IOD_OBJ_KIND_REPLICA, in, IOD_OBJ_REPLICA_RESTARTS) == 3.0);
	CHECK(isnan(iod_obj_peek_num(IOD_OBJ_KIND_REPLICA, in, IOD_OBJ_REPLICA_PORT)));
	static const unsigned fs[] = {IOD_OBJ_REPLICA_GPUS, IOD_OBJ_REPLICA_TENANT,
	                              IOD_OBJ_REPLICA_REASONS};
	json_t *p = iod_obj_pick(IOD_OBJ_KIND_REPLICA, in, fs, IOD_ARRAY_LEN(fs));
	char *s = json_dumps(p, JSON_COMPACT);
	CHECK_STR(s, "{\"gpus\":\"0-1\",\"tenant\":null,\"reasons\":[\"fits\"]}");
	free(s);
	json_decref(p);
	json_decref(in);
}

TEST(fault_objects_check)
{
	struct iod_obj_fault f;
	struct iod_err e = {0};
	json_t *v = json_loads("{\"service\":\"web\",\"action\":\"abort\",\"status\":503,"
	                       "\"start_ms\":1,\"until_ms\":2}",
	                       0, NULL);
	CHECK_EQ(iod_obj_fault_from_json(v, &f, &e), 0);
	CHECK_EQ(f.percent, 100); /* the default share */
	CHECK_EQ(iod_obj_fault_check(&f, &e), 0);
	json_t *back = iod_obj_fault_to_json(&f);
	CHECK_STR(json_string_value(json_object_get(back, "action")), "abort");
	CHECK_EQ(json_integer_value(json_object_get(back, "status")), 503);
	json_decref(back);
	iod_obj_fault_free(&f);
	json_decref(v);
	const char *bad[][2] = {
	    {"{\"action\":\"abort\",\"status\":503,\"until_ms\":2}", "\"service\" is required"},
	    {"{\"service\":\"web\",\"action\":\"slow\",\"until_ms\":2}", "delay or abort"},
	    {"{\"service\":\"web\",\"action\":\"delay\",\"until_ms\":2}", "needs \"delay_ms\""},
	    {"{\"service\":\"web\",\"action\":\"abort\",\"status\":42,\"until_ms\":2}", "200..599"},
	    {"{\"service\":\"web\",\"action\":\"abort\",\"status\":503}", "until_ms"},
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		memset(&e, 0, sizeof(e));
		v = json_loads(bad[i][0], 0, NULL);
		CHECK(v);
		int rc = iod_obj_fault_from_json(v, &f, &e);
		if (!rc)
			rc = iod_obj_fault_check(&f, &e);
		iod_obj_fault_free(&f);
		json_decref(v);
		CHECK_MSG(rc == -EINVAL, "accepted %s", bad[i][0]);
		CHECK_CONTAINS(e.msg, bad[i][1]);
	}
	/* a share out of 1..100 is refused by the field's bounds */
	v = json_loads("{\"service\":\"web\",\"action\":\"abort\",\"status\":503,\"until_ms\":2,"
	               "\"percent\":0}",
	               0, NULL);
	CHECK(iod_obj_fault_from_json(v, &f, &e) < 0);
	iod_obj_fault_free(&f);
	json_decref(v);
}

/* Issue 23: a Checkpoint manifest round-trips; bounds are checked. */
TEST(checkpoint_object_round_trip_and_bounds)
{
	struct iod_obj_checkpoint *c = malloc(sizeof(*c));
	struct iod_err e = {0};
	json_t *in = parse("{\"service\":\"ps\",\"replica\":\"ps-0\",\"node\":\"n1\",\"rank\":0,"
	                   "\"step\":1200,\"bytes\":4000000000,\"chunks\":954,"
	                   "\"chunk_bytes\":4194304,\"manifest_xxh3\":\"0123456789abcdef\","
	                   "\"tier\":\"NVMe\",\"replicas\":3,\"min_size\":2,"
	                   "\"copies\":[{\"node\":\"n1\",\"ok\":true}],\"health\":\"undersized\"}");
	CHECK_EQ(iod_obj_checkpoint_from_json(in, c, &e), 0);
	CHECK_U64(c->step, 1200);
	CHECK_U64(c->bytes, 4000000000ull);
	CHECK_EQ(c->replicas, 3);
	CHECK_STR(c->tier, "NVMe");
	CHECK(!iod_obj_has(c, IOD_OBJ_CHECKPOINT_SCRUB));
	json_t *out = iod_obj_checkpoint_to_json(c);
	json_object_del(out, "version");
	CHECK(json_equal(out, in));
	json_decref(out);
	iod_obj_checkpoint_free(c);
	json_decref(in);
	/* replicas outside 1..7 is refused with the key named */
	in = parse("{\"service\":\"ps\",\"replicas\":8}");
	CHECK_EQ(iod_obj_checkpoint_from_json(in, c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "replicas");
	iod_obj_checkpoint_free(c);
	json_decref(in);
	/* absent: defaults */
	iod_obj_checkpoint_init(c);
	CHECK_EQ(c->replicas, 1);
	CHECK_EQ(c->min_size, 1);
	iod_obj_checkpoint_free(c);
	free(c);
}
