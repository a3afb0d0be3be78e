/*
 * test_state.c: the cluster state machine: commands, revisions, CAS, leases,
 * deploy transactions, watches with compaction, snapshots.
 */
#include "harness.h"
#include "iod/state.h"

#include <raft.h>
#include <stdlib.h>
#include <string.h>

static int apply_text(struct iod_state *s, const char *text, struct iod_state_result *r)
{
	return iod_state_apply(s, text, strlen(text), r);
}

static int apply_owned(struct iod_state *s, char *cmd, struct iod_state_result *r)
{
	int rc = iod_state_apply(s, cmd, strlen(cmd), r);
	free(cmd);
	return rc;
}

static int put(struct iod_state *s, enum iod_state_kind k, const char *name, const char *json,
               int64_t prev, struct iod_state_result *r)
{
	json_t *v = json_loads(json, 0, NULL);
	int rc = apply_owned(s, iod_state_cmd_put(k, name, v, 0, prev), r);
	json_decref(v);
	return rc;
}

TEST(put_get_revisions)
{
	struct iod_state *s;
	struct iod_state_result r;
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(put(s, IOD_STATE_NODE, "n1", "{\"gpus\":8}", -1, &r), 0);
	CHECK_U64(r.rev, 1);
	CHECK_EQ(put(s, IOD_STATE_NODE, "n2", "{\"gpus\":4}", -1, &r), 0);
	CHECK_EQ(put(s, IOD_STATE_NODE, "n1", "{\"gpus\":16}", -1, &r), 0);
	CHECK_U64(iod_state_rev(s), 3);
	json_t *o = iod_state_get(s, IOD_STATE_NODE, "n1");
	CHECK(o);
	CHECK_EQ(json_integer_value(json_object_get(o, "rev")), 3);
	CHECK_EQ(json_integer_value(json_object_get(o, "create_rev")), 1);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(o, "value"), "gpus")), 16);
	json_decref(o);
	json_t *l = iod_state_list(s, IOD_STATE_NODE);
	CHECK_EQ(json_array_size(json_object_get(l, "items")), 2);
	CHECK_STR(json_string_value(
	              json_object_get(json_array_get(json_object_get(l, "items"), 0), "name")),
	          "n1");
	json_decref(l);
	CHECK(iod_state_get(s, IOD_STATE_SERVICE, "n1") == NULL);
	iod_state_free(s);
}

TEST(compare_and_swap)
{
	struct iod_state *s;
	struct iod_state_result r;
	CHECK_EQ(iod_state_new(&s), 0);
	/* prev_rev 0: create only if absent */
	CHECK_EQ(put(s, IOD_STATE_CONFIG, "mesh", "{\"transport\":\"tcp\"}", 0, &r), 0);
	CHECK_EQ(put(s, IOD_STATE_CONFIG, "mesh", "{\"transport\":\"rdma\"}", 0, &r), -ECANCELED);
	CHECK_U64(r.cur_rev, 1);
	CHECK_CONTAINS(r.msg, "config/mesh");
	CHECK_U64(iod_state_rev(s), 1); /* failure changes nothing */
	CHECK_EQ(put(s, IOD_STATE_CONFIG, "mesh", "{\"transport\":\"rdma\"}", 1, &r), 0);
	CHECK_EQ(put(s, IOD_STATE_CONFIG, "mesh", "{\"transport\":\"shm\"}", 1, &r), -ECANCELED);
	CHECK_EQ(apply_owned(s, iod_state_cmd_delete(IOD_STATE_CONFIG, "mesh", 1), &r), -ECANCELED);
	CHECK_EQ(apply_owned(s, iod_state_cmd_delete(IOD_STATE_CONFIG, "mesh", 2), &r), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_delete(IOD_STATE_CONFIG, "mesh", -1), &r), -ENOENT);
	iod_state_free(s);
}

TEST(bad_commands_change_nothing)
{
	struct iod_state *s;
	struct iod_state_result r;
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(apply_text(s, "{", &r), -EINVAL);
	CHECK_EQ(apply_text(s, "{\"op\":\"frob\"}", &r), -EINVAL);
	CHECK_CONTAINS(r.msg, "frob");
	CHECK_EQ(
	    apply_text(s, "{\"op\":\"put\",\"kind\":\"pods\",\"name\":\"a\",\"value\":{}}", &r),
	    -EINVAL);
	CHECK_EQ(
	    apply_text(s, "{\"op\":\"put\",\"kind\":\"node\",\"name\":\"a/b\",\"value\":{}}", &r),
	    -EINVAL);
	CHECK_EQ(apply_text(s, "{\"op\":\"put\",\"kind\":\"node\",\"name\":\"a\",\"value\":3}", &r),
	         -EINVAL);
	CHECK_EQ(apply_text(s,
	                    "{\"op\":\"put\",\"kind\":\"node\",\"name\":\"a\",\"value\":{},"
	                    "\"lease\":99}",
	                    &r),
	         -ENOENT);
	CHECK_U64(iod_state_rev(s), 0);
	CHECK_EQ(iod_state_total(s), 0);
	iod_state_free(s);
}

TEST(txn_is_all_or_nothing)
{
	struct iod_state *s;
	struct iod_state_result r;
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(put(s, IOD_STATE_POLICY, "p", "{}", -1, &r), 0);
	/* second op's condition fails: the first put must not happen */
	CHECK_EQ(
	    apply_text(s,
	               "{\"op\":\"txn\",\"ops\":[{\"op\":\"put\",\"kind\":\"node\",\"name\":"
	               "\"x\",\"value\":{}},{\"op\":\"put\",\"kind\":\"policy\",\"name\":\"p\","
	               "\"value\":{},\"prev_rev\":7}]}",
	               &r),
	    -ECANCELED);
	CHECK(iod_state_get(s, IOD_STATE_NODE, "x") == NULL);
	CHECK_U64(iod_state_rev(s), 1);
	CHECK_EQ(apply_text(s,
	                    "{\"op\":\"txn\",\"ops\":[{\"op\":\"put\",\"kind\":\"node\",\"name\":"
	                    "\"x\",\"value\":{}},{\"op\":\"delete\",\"kind\":\"policy\",\"name\":"
	                    "\"p\",\"prev_rev\":1}]}",
	                    &r),
	         0);
	CHECK_U64(iod_state_rev(s), 2); /* one revision for the whole txn */
	CHECK(iod_state_value(s, IOD_STATE_NODE, "x"));
	CHECK(!iod_state_value(s, IOD_STATE_POLICY, "p"));
	iod_state_free(s);
}

static const char *deploy3 =
    "{\"op\":\"deploy\",\"services\":[{\"name\":\"web\",\"value\":{\"replicas\":3}}],"
    "\"replicas\":[{\"name\":\"web-0\",\"value\":{\"service\":\"web\",\"node\":\"n1\"}},"
    "{\"name\":\"web-1\",\"value\":{\"service\":\"web\",\"node\":\"n2\"}},"
    "{\"name\":\"web-2\",\"value\":{\"service\":\"web\",\"node\":\"n1\"}}]}";

TEST(deploy_prunes_and_undeploy_cascades)
{
	struct iod_state *s;
	struct iod_state_result r;
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(apply_text(s, deploy3, &r), 0);
	CHECK_U64(r.rev, 1);
	CHECK_EQ(iod_state_count(s, IOD_STATE_REPLICA), 3);
	CHECK_EQ(put(s, IOD_STATE_ENDPOINT, "web-2", "{\"addr\":\"10.0.0.1:80\"}", -1, &r), 0);
	CHECK_EQ(put(s, IOD_STATE_REPLICA, "db-0", "{\"service\":\"db\"}", -1, &r), 0);
	/* scale web to 2: web-2 and its endpoint go, db-0 stays */
	CHECK_EQ(apply_text(s,
	                    "{\"op\":\"deploy\",\"services\":[{\"name\":\"web\",\"value\":"
	                    "{\"replicas\":2}}],\"replicas\":[{\"name\":\"web-0\",\"value\":"
	                    "{\"service\":\"web\"}},{\"name\":\"web-1\",\"value\":{\"service\":"
	                    "\"web\"}}]}",
	                    &r),
	         0);
	CHECK_U64(r.rev, 4);
	CHECK_EQ(iod_state_count(s, IOD_STATE_REPLICA), 3);
	CHECK(!iod_state_value(s, IOD_STATE_REPLICA, "web-2"));
	CHECK(!iod_state_value(s, IOD_STATE_ENDPOINT, "web-2"));
	CHECK(iod_state_value(s, IOD_STATE_REPLICA, "db-0"));
	CHECK_EQ(apply_text(s, "{\"op\":\"undeploy\",\"service\":\"web\"}", &r), 0);
	CHECK_EQ(iod_state_count(s, IOD_STATE_REPLICA), 1);
	CHECK_EQ(iod_state_count(s, IOD_STATE_SERVICE), 0);
	CHECK_EQ(apply_text(s, "{\"op\":\"undeploy\",\"service\":\"web\"}", &r), -ENOENT);
	/* a malformed replica rejects the whole deploy */
	CHECK_EQ(apply_text(s,
	                    "{\"op\":\"deploy\",\"services\":[{\"name\":\"x\",\"value\":{}}],"
	                    "\"replicas\":[{\"name\":\"x-0\",\"value\":{}}]}",
	                    &r),
	         -EINVAL);
	CHECK_EQ(iod_state_count(s, IOD_STATE_SERVICE), 0);
	iod_state_free(s);
}

TEST(leases_expire_objects)
{
	struct iod_state *s;
	struct iod_state_result r;
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_grant(1000, 5000), &r), 0);
	uint64_t l1 = r.lease_id;
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_grant(3000, 5000), &r), 0);
	uint64_t l2 = r.lease_id;
	CHECK(l1 != l2);
	json_t *v = json_object();
	CHECK_EQ(apply_owned(s, iod_state_cmd_put(IOD_STATE_NODE, "a", v, l1, -1), &r), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_put(IOD_STATE_NODE, "b", v, l2, -1), &r), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_put(IOD_STATE_NODE, "c", v, 0, -1), &r), 0);
	json_decref(v);
	CHECK_U64(iod_state_lease_next_deadline_ms(s), 6000);
	/* renew l1 at 5900: now due at 6900 */
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_renew(l1, 5900), &r), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_expire(6500), &r), 0);
	CHECK_EQ(iod_state_count(s, IOD_STATE_NODE), 3);
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_expire(7000), &r), 0);
	CHECK(!iod_state_value(s, IOD_STATE_NODE, "a"));
	CHECK(iod_state_value(s, IOD_STATE_NODE, "b"));
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_renew(l1, 7000), &r), -ENOENT);
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_revoke(l2), &r), 0);
	CHECK(!iod_state_value(s, IOD_STATE_NODE, "b"));
	CHECK(iod_state_value(s, IOD_STATE_NODE, "c"));
	CHECK_EQ(iod_state_lease_count(s), 0);
	iod_state_free(s);
}

TEST(lease_refresh_survives_a_leaderless_gap)
{
	struct iod_state *s;
	struct iod_state_result r;
	CHECK_EQ(iod_state_new(&s), 0);
	/* A 200 ms lease renewed last at t=1000; no leader from 1100 to 2000. */
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_grant(200, 1000), &r), 0);
	uint64_t l = r.lease_id;
	json_t *v = json_object();
	CHECK_EQ(apply_owned(s, iod_state_cmd_put(IOD_STATE_NODE, "a", v, l, -1), &r), 0);
	json_decref(v);
	/* The new leader refreshes first: the lease lives until 2200. */
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_refresh(2000), &r), 0);
	CHECK(r.changed);
	CHECK_U64(iod_state_lease_next_deadline_ms(s), 2200);
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_expire(2100), &r), 0);
	CHECK(iod_state_value(s, IOD_STATE_NODE, "a"));
	/* A refresh never shortens a lease. */
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_renew(l, 3000), &r), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_refresh(2500), &r), 0);
	CHECK_U64(iod_state_lease_next_deadline_ms(s), 3200);
	/* Without renewals the lease still expires after its TTL. */
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_expire(3200), &r), 0);
	CHECK(!iod_state_value(s, IOD_STATE_NODE, "a"));
	iod_state_free(s);
}

TEST(watch_and_compaction)
{
	struct iod_state *s;
	struct iod_state_result r;
	struct iod_err e = {0};
	json_t *ev = NULL;
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(put(s, IOD_STATE_NODE, "a", "{}", -1, &r), 0);
	CHECK_EQ(put(s, IOD_STATE_SERVICE, "b", "{}", -1, &r), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_delete(IOD_STATE_NODE, "a", -1), &r), 0);
	CHECK_EQ(iod_state_watch(s, IOD_STATE_NODE, false, 0, 100, &ev, &e), 0);
	CHECK_EQ(json_array_size(ev), 2);
	CHECK_STR(json_string_value(json_object_get(json_array_get(ev, 1), "type")), "delete");
	json_decref(ev);
	CHECK_EQ(iod_state_watch(s, 0, true, 1, 100, &ev, &e), 0);
	CHECK_EQ(json_array_size(ev), 2);
	json_decref(ev);
	CHECK_EQ(iod_state_watch(s, 0, true, 3, 100, &ev, &e), 0);
	CHECK_EQ(json_array_size(ev), 0);
	json_decref(ev);
	CHECK_EQ(iod_state_watch(s, 0, true, 9, 100, &ev, &e), -EINVAL);
	/* overflow the history: early revisions become compacted */
	for (int i = 0; i < IOD_STATE_HISTORY_MAX + 10; i++)
		CHECK_EQ(put(s, IOD_STATE_NODE, "x", "{}", -1, &r), 0);
	CHECK(iod_state_history_floor(s) > 3);
	CHECK_EQ(iod_state_watch(s, 0, true, 1, 100, &ev, &e), -ESTALE);
	CHECK_CONTAINS(e.msg, "compacted");
	uint64_t f = iod_state_history_floor(s);
	CHECK_EQ(iod_state_watch(s, 0, true, f, 5, &ev, &e), 0);
	CHECK_EQ(json_array_size(ev), 5);
	CHECK_U64(json_integer_value(json_object_get(json_array_get(ev, 0), "rev")), f + 1);
	json_decref(ev);
	iod_state_free(s);
}

TEST(snapshot_round_trip_and_corruption)
{
	struct iod_state *s, *t;
	struct iod_state_result r;
	struct iod_err e = {0};
	void *buf = NULL;
	size_t len = 0;
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(iod_state_new(&t), 0);
	CHECK_EQ(apply_text(s, deploy3, &r), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_grant(1000, 1), &r), 0);
	for (int i = 0; i < 3000; i++) {
		char name[32];
		snprintf(name, sizeof(name), "node-%d", i);
		CHECK_EQ(put(s, IOD_STATE_NODE, name, "{\"gpus\":8}", -1, &r), 0);
	}
	CHECK_EQ(iod_state_snapshot(s, &buf, &len), 0);
	CHECK_EQ(iod_state_restore(t, buf, len, &e), 0);
	CHECK_U64(iod_state_digest(s), iod_state_digest(t));
	CHECK_U64(iod_state_rev(t), iod_state_rev(s));
	CHECK_EQ(iod_state_total(t), iod_state_total(s));
	CHECK_EQ(iod_state_lease_count(t), 1);
	/* both continue identically */
	CHECK_EQ(put(s, IOD_STATE_NODE, "z", "{}", -1, &r), 0);
	CHECK_EQ(put(t, IOD_STATE_NODE, "z", "{}", -1, &r), 0);
	CHECK_U64(iod_state_digest(s), iod_state_digest(t));
	/* a watch from before the snapshot is compacted on the restored copy */
	json_t *ev = NULL;
	CHECK_EQ(iod_state_watch(t, 0, true, 1, 10, &ev, &e), -ESTALE);
	/* a flipped byte is caught, and leaves the target untouched */
	uint64_t before = iod_state_digest(t);
	((char *)buf)[len / 2] ^= 1;
	CHECK_EQ(iod_state_restore(t, buf, len, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "checksum");
	CHECK_U64(iod_state_digest(t), before);
	CHECK_EQ(iod_state_restore(t, buf, 10, &e), -EINVAL);
	free(buf);
	iod_state_free(s);
	iod_state_free(t);
}

TEST(deterministic_apply)
{
	struct iod_state *a, *b;
	struct iod_state_result r;
	struct iod_rng rng;
	CHECK_EQ(iod_state_new(&a), 0);
	CHECK_EQ(iod_state_new(&b), 0);
	iod_rng_seed(&rng, 42);
	for (int i = 0; i < 2000; i++) {
		char name[16], *cmd;
		snprintf(name, sizeof(name), "o%d", (int)iod_rng_below(&rng, 50));
		enum iod_state_kind k =
		    (enum iod_state_kind)iod_rng_below(&rng, IOD_STATE_KIND_COUNT);
		if (iod_rng_below(&rng, 3) == 0) {
			cmd = iod_state_cmd_delete(k, name, -1);
		} else {
			json_t *v = json_pack("{s:i}", "i", i);
			cmd = iod_state_cmd_put(k, name, v, 0, -1);
			json_decref(v);
		}
		int ra = iod_state_apply(a, cmd, strlen(cmd), &r);
		int rb = iod_state_apply(b, cmd, strlen(cmd), &r);
		free(cmd);
		CHECK_EQ(ra, rb);
	}
	CHECK_U64(iod_state_digest(a), iod_state_digest(b));
	iod_state_free(a);
	iod_state_free(b);
}

/* Group commit: a batch applies its commands in order, one revision and one
 * result each, exactly like separate entries; a malformed frame changes
 * nothing. */
TEST(batch_apply_matches_separate_commands)
{
	struct iod_state *a = NULL, *b = NULL;
	struct iod_state_result r, res[IOD_STATE_BATCH_MAX];
	char *cmds[3];
	size_t lens[3], total = 0, len = 0;
	uint32_t n = 0;
	uint8_t buf[4096];

	CHECK_EQ(iod_state_new(&a), 0);
	CHECK_EQ(iod_state_new(&b), 0);
	json_t *v = json_pack("{s:i}", "x", 1);
	cmds[0] = iod_state_cmd_put(IOD_STATE_CONFIG, "k1", v, 0, -1);
	cmds[1] = iod_state_cmd_put(IOD_STATE_CONFIG, "k1", v, 0, 0); /* CAS: must not exist */
	cmds[2] = iod_state_cmd_put(IOD_STATE_NODE, "n1", v, 0, -1);
	json_decref(v);
	for (int i = 0; i < 3; i++) {
		lens[i] = strlen(cmds[i]);
		total += lens[i];
		iod_state_apply(a, cmds[i], lens[i], &r);
	}
	CHECK_EQ(iod_state_batch_size(3, total), 4 + 4 + 12 + total);
	CHECK_EQ(iod_state_batch_encode(buf, sizeof(buf), (const char *const *)cmds, lens, 3, &len),
	         0);
	CHECK(iod_state_batch_is(buf, len));
	CHECK(!iod_state_batch_is(cmds[0], lens[0]));
	/* padding to 8 bytes (raft's log) is accepted */
	memset(buf + len, 0, 8);
	CHECK_EQ(iod_state_apply_batch(b, buf, len + 5, res, IOD_STATE_BATCH_MAX, &n), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(res[0].code, 0);
	CHECK_EQ(res[0].rev, 1);
	CHECK_EQ(res[1].code, -ECANCELED);
	CHECK_EQ(res[2].code, 0);
	CHECK_EQ(res[2].rev, 2);
	CHECK_U64(iod_state_digest(a), iod_state_digest(b));

	/* malformed frames: nothing applied, one error result */
	uint64_t before = iod_state_rev(b);
	buf[8] = 0xff; /* first length far past the end */
	CHECK_EQ(iod_state_apply_batch(b, buf, len, res, IOD_STATE_BATCH_MAX, &n), -EINVAL);
	CHECK_EQ(n, 1);
	CHECK_EQ(res[0].code, -EINVAL);
	CHECK_U64(iod_state_rev(b), before);
	CHECK_EQ(iod_state_apply_batch(b, buf, 6, res, IOD_STATE_BATCH_MAX, &n), -EINVAL);
	/* limits: empty batches, empty commands, too small a buffer */
	CHECK_EQ(iod_state_batch_encode(buf, sizeof(buf), (const char *const *)cmds, lens, 0, &len),
	         -EINVAL);
	CHECK_EQ(iod_state_batch_encode(buf, 16, (const char *const *)cmds, lens, 3, &len), -E2BIG);
	size_t zero[1] = {0};
	CHECK_EQ(iod_state_batch_encode(buf, sizeof(buf), (const char *const *)cmds, zero, 1, &len),
	         -EINVAL);
	for (int i = 0; i < 3; i++)
		free(cmds[i]);
	iod_state_free(a);
	iod_state_free(b);
}

/* A lease flood (issue 15): 8,192 day-long leases from one client used to
 * take every lease, and then no agent could register. Now one client holds
 * at most IOD_STATE_LEASES_PER_CLIENT_MAX, all clients together leave
 * IOD_STATE_LEASES_NODE_RESERVED for node leases, and the quota survives a
 * snapshot round trip. */
TEST(lease_flood_leaves_room_for_node_agents)
{
	struct iod_state *s, *t;
	struct iod_state_result r;
	unsigned ok = 0;
	char owner[32];
	CHECK_EQ(iod_state_new(&s), 0);
	for (unsigned i = 0; i < IOD_STATE_LEASES_MAX; i++)
		ok += apply_owned(
		          s, iod_state_cmd_lease_grant_for(86400000, 1, "addr:10.0.0.1", false),
		          &r) == 0;
	CHECK_EQ(ok, IOD_STATE_LEASES_PER_CLIENT_MAX);
	CHECK_EQ(r.code, -ENOSPC);
	CHECK(strstr(r.msg, "IOD_STATE_LEASES_PER_CLIENT_MAX") != NULL);
	/* many clients: the general pool ends short of the reserve */
	for (unsigned c = 0; c < 16; c++) {
		snprintf(owner, sizeof(owner), "user:u%u", c);
		for (unsigned i = 0; i < IOD_STATE_LEASES_PER_CLIENT_MAX; i++)
			ok +=
			    apply_owned(s, iod_state_cmd_lease_grant_for(86400000, 1, owner, false),
			                &r) == 0;
	}
	CHECK_EQ(ok, IOD_STATE_LEASES_MAX - IOD_STATE_LEASES_NODE_RESERVED);
	CHECK(strstr(r.msg, "IOD_STATE_LEASES_NODE_RESERVED") != NULL);
	/* an agent still registers */
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_grant_for(10000, 1, "node:n1", true), &r), 0);
	CHECK_EQ(r.code, 0);
	CHECK(r.lease_id > 0);
	/* and a restored replica enforces the same quota */
	void *buf = NULL;
	size_t len = 0;
	CHECK_EQ(iod_state_snapshot(s, &buf, &len), 0);
	CHECK_EQ(iod_state_new(&t), 0);
	struct iod_err e = {0};
	CHECK_EQ(iod_state_restore(t, buf, len, &e), 0);
	free(buf);
	CHECK_U64(iod_state_digest(t), iod_state_digest(s));
	CHECK_EQ(apply_owned(t, iod_state_cmd_lease_grant_for(1000, 1, "user:u99", false), &r),
	         -ENOSPC);
	CHECK_EQ(apply_owned(t, iod_state_cmd_lease_grant_for(1000, 1, "node:n2", true), &r), 0);
	CHECK_EQ(r.code, 0);
	iod_state_free(t);
	iod_state_free(s);
}

/* The state's bytes quota (issue 15): writes that would grow the values past
 * IOD_STATE_BYTES_MAX are refused naming it (so a snapshot always fits
 * IOD_RAFT_SNAPSHOT_MAX); overwriting or deleting frees room; a restored
 * state counts the same bytes. */
TEST(state_bytes_quota)
{
	struct iod_state *s, *t;
	struct iod_state_result r;
	char name[32];
	CHECK_EQ(iod_state_new(&s), 0);
	iod_state_set_bytes_max(s, 10000);
	json_t *big = json_pack("{s:s}", "blob",
	                        "0123456789012345678901234567890123456789"
	                        "0123456789012345678901234567890123456789");
	size_t each = json_dumpb(big, NULL, 0, JSON_COMPACT);
	unsigned ok = 0;
	for (unsigned i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "k%u", i);
		ok +=
		    apply_owned(s, iod_state_cmd_put(IOD_STATE_CONFIG, name, big, 0, -1), &r) == 0;
	}
	CHECK_EQ(ok, 10000 / each);
	CHECK(iod_state_bytes(s) <= 10000);
	CHECK_EQ(r.code, -ENOSPC);
	CHECK(strstr(r.msg, "IOD_STATE_BYTES_MAX") != NULL);
	/* a txn and a deploy are refused whole, not half-applied */
	uint64_t rev = iod_state_rev(s);
	char *txt = NULL;
	json_t *txn = json_pack("{s:s, s:[{s:s, s:s, s:s, s:O}]}", "op", "txn", "ops", "op", "put",
	                        "kind", "config", "name", "t1", "value", big);
	txt = json_dumps(txn, JSON_COMPACT);
	CHECK_EQ(apply_owned(s, txt, &r), -ENOSPC);
	json_decref(txn);
	CHECK_U64(iod_state_rev(s), rev);
	/* overwriting with a smaller value and deleting free room */
	json_t *small = json_pack("{s:i}", "v", 1);
	CHECK_EQ(apply_owned(s, iod_state_cmd_put(IOD_STATE_CONFIG, "k0", small, 0, -1), &r), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_delete(IOD_STATE_CONFIG, "k1", -1), &r), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_put(IOD_STATE_CONFIG, "again", big, 0, -1), &r), 0);
	/* a restored state holds the same bytes */
	void *buf = NULL;
	size_t len = 0;
	struct iod_err e = {0};
	CHECK_EQ(iod_state_snapshot(s, &buf, &len), 0);
	CHECK_EQ(iod_state_new(&t), 0);
	CHECK_EQ(iod_state_restore(t, buf, len, &e), 0);
	free(buf);
	CHECK_U64(iod_state_bytes(t), iod_state_bytes(s));
	json_decref(big);
	json_decref(small);
	iod_state_free(t);
	iod_state_free(s);
}

/* The text of a list of items (a page: limit, after), as the API sends it. */
static char *items_text(struct iod_state *s, enum iod_state_kind k, const char *after,
                        uint32_t limit)
{
	struct iod_state_item *v = NULL;
	struct iod_buf b;
	int n = iod_state_items(s, k, after, &v);
	iod_buf_init(&b);
	if (n < 0 || iod_state_items_dump(k, iod_state_rev(s), v, (uint32_t)n, limit, &b)) {
		iod_buf_free(&b);
		return NULL;
	}
	return b.data ? b.data : strdup("");
}

/*
 * Lists off the loop (issue 15): the copied items, dumped on another
 * thread, give byte for byte the text of json_dumps(iod_state_list()) that
 * the API sent before, for nested values, empty objects and escapes; pages
 * split it at names, in order, with "continue" on every page but the last.
 */
TEST(list_items_dump_matches_the_list_and_pages)
{
	struct iod_state *s;
	struct iod_state_result r;
	CHECK_EQ(iod_state_new(&s), 0);
	char *t = items_text(s, IOD_STATE_CONFIG, NULL, 0);
	json_t *l = iod_state_list(s, IOD_STATE_CONFIG);
	char *want = json_dumps(l, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	CHECK(t && want);
	CHECK_EQ(strlen(t), strlen(want) + 1);
	CHECK(!strncmp(t, want, strlen(want)) && t[strlen(want)] == '\n');
	free(t);
	free(want);
	json_decref(l);
	const char *vals[] = {"{\"x\":1,\"n\":{\"d\":[1,2,{\"z\":\"q\\nw\"}],\"e\":{},\"a\":[]}}",
	                      "{}", "{\"s\":\"\\u00e9\\t\"}", "{\"k\":[[]]}"};
	char name[16];
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "c%02d", (i * 7) % 40); /* not in order */
		CHECK_EQ(put(s, IOD_STATE_CONFIG, name, vals[i % 4], -1, &r), 0);
	}
	CHECK_EQ(put(s, IOD_STATE_NODE, "n1", "{\"gpus\":8}", -1, &r), 0);
	t = items_text(s, IOD_STATE_CONFIG, NULL, 0);
	l = iod_state_list(s, IOD_STATE_CONFIG);
	want = json_dumps(l, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	CHECK(t && want);
	CHECK(!strncmp(t, want, strlen(want)) && !strcmp(t + strlen(want), "\n"));
	free(t);
	free(want);
	json_decref(l);
	/* pages of 16: c00-c15, c16-c31, c32-c39 */
	char after[16] = "";
	int pages = 0, total = 0;
	for (;;) {
		t = items_text(s, IOD_STATE_CONFIG, after, 16);
		json_t *p = t ? json_loads(t, 0, NULL) : NULL;
		free(t);
		CHECK(p);
		json_t *items = json_object_get(p, "items");
		const char *first =
		    json_string_value(json_object_get(json_array_get(items, 0), "name"));
		snprintf(name, sizeof(name), "c%02d", total);
		CHECK_STR(first, name);
		total += (int)json_array_size(items);
		pages++;
		const char *cont = json_string_value(json_object_get(p, "continue"));
		if (!cont) {
			json_decref(p);
			break;
		}
		CHECK_STR(cont, json_string_value(json_object_get(
		                    json_array_get(items, json_array_size(items) - 1), "name")));
		snprintf(after, sizeof(after), "%s", cont);
		json_decref(p);
	}
	CHECK_EQ(pages, 3);
	CHECK_EQ(total, 40);
	/* the copies hold their values: still valid after the objects go */
	struct iod_state_item *v = NULL;
	CHECK_EQ(iod_state_items(s, IOD_STATE_CONFIG, "c38", &v), 1);
	CHECK_EQ(apply_owned(s, iod_state_cmd_delete(IOD_STATE_CONFIG, "c39", -1), &r), 0);
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_state_items_dump(IOD_STATE_CONFIG, 1, v, 1, 0, &b), 0);
	CHECK(strstr(b.data, "\"name\": \"c39\""));
	iod_buf_free(&b);
	iod_state_free(s);
}

/* A deploy command of n replicas of service svc (padded past 64 KiB). */
static char *big_deploy(const char *svc, int n)
{
	json_t *reps = json_array();
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "%s-%d", svc, i);
		json_array_append_new(reps, json_pack("{s:s, s:{s:s, s:i, s:s}}", "name", name,
		                                      "value", "service", svc, "ordinal", i, "why",
		                                      "a placement explanation of some length"));
	}
	json_t *c = json_pack("{s:s, s:[{s:s, s:{s:i}}], s:o}", "op", "deploy", "services", "name",
	                      svc, "value", "replicas", n, "replicas", reps);
	char *t = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	return t;
}

/* Issue 15: large commands are parsed (and a deploy's values sized) on the
 * log's worker ahead of their apply; applying that parse gives exactly the
 * state a plain apply gives, prune and bytes quota included, and a size
 * list that does not match is ignored (measured again). */
TEST(preparsed_apply_matches_plain_apply)
{
	struct iod_state *a, *b;
	struct iod_state_result ra, rb;
	const int sizes[] = {2000, 1200, 1500};
	CHECK_EQ(iod_state_new(&a), 0);
	CHECK_EQ(iod_state_new(&b), 0);
	for (unsigned k = 0; k < 3; k++) {
		char *cmd = big_deploy("web", sizes[k]);
		size_t len = strlen(cmd);
		CHECK(len >= IOD_STATE_PREPARSE_MIN);
		struct iod_state_preparsed *p = iod_state_preparse(cmd, len, 7);
		CHECK(p != NULL);
		CHECK_EQ(p->bytes_n, (size_t)sizes[k] + 1);
		if (k == 2)
			p->bytes_n--; /* a list that does not match: measured at apply */
		CHECK_EQ(iod_state_apply(a, cmd, len, &ra), 0);
		CHECK_EQ(iod_state_apply_sized(b, p->cmd, p->bytes, p->bytes_n, &rb), 0);
		CHECK_EQ(ra.changed, rb.changed);
		CHECK_U64(ra.rev, rb.rev);
		CHECK_U64(iod_state_bytes(a), iod_state_bytes(b));
		CHECK_U64(iod_state_digest(a), iod_state_digest(b));
		CHECK_EQ(iod_state_count(b, IOD_STATE_REPLICA), (uint32_t)sizes[k]);
		iod_state_preparsed_free(p);
		free(cmd);
	}
	/* a big put and a big txn: their values sized there too (one size per
	 * put; one per txn op, 0 for a delete), the same state as a plain apply */
	static char big[IOD_STATE_PREPARSE_MIN + 4096];
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	json_t *pv = json_pack("{s:s}", "blob", big);
	json_t *tx = json_pack("{s:s, s:[{s:s, s:s, s:s, s:O}, {s:s, s:s, s:s}, {s:s, s:s, s:s, "
	                       "s:{s:i}}]}",
	                       "op", "txn", "ops", "op", "put", "kind", "config", "name", "t1",
	                       "value", pv, "op", "delete", "kind", "config", "name", "p1", "op",
	                       "put", "kind", "config", "name", "t2", "value", "i", 2);
	char *cmds[2] = {iod_state_cmd_put(IOD_STATE_CONFIG, "p1", pv, 0, -1),
	                 json_dumps(tx, JSON_COMPACT)};
	const size_t want_n[2] = {1, 3};
	for (unsigned k = 0; k < 2; k++) {
		size_t len = strlen(cmds[k]);
		struct iod_state_preparsed *p = iod_state_preparse(cmds[k], len, 8 + k);
		CHECK(p != NULL);
		CHECK_EQ(p->bytes_n, want_n[k]);
		CHECK_EQ(p->bytes[0], json_dumpb(pv, NULL, 0, JSON_COMPACT));
		if (k == 1)
			CHECK_EQ(p->bytes[1], (size_t)0);
		CHECK_EQ(iod_state_apply(a, cmds[k], len, &ra), 0);
		CHECK_EQ(iod_state_apply_sized(b, p->cmd, p->bytes, p->bytes_n, &rb), 0);
		CHECK_EQ(ra.changed, rb.changed);
		CHECK_U64(ra.rev, rb.rev);
		CHECK_U64(iod_state_bytes(a), iod_state_bytes(b));
		CHECK_U64(iod_state_digest(a), iod_state_digest(b));
		iod_state_preparsed_free(p);
		free(cmds[k]);
	}
	CHECK(iod_state_value(b, IOD_STATE_CONFIG, "p1") == NULL); /* the txn deleted it */
	CHECK(iod_state_value(b, IOD_STATE_CONFIG, "t1") != NULL);
	json_decref(pv);
	json_decref(tx);
	/* small commands, batch frames and non-JSON are left to the apply */
	CHECK(iod_state_preparse("{\"op\":\"put\"}", 12, 1) == NULL);
	char *junk = calloc(1, IOD_STATE_PREPARSE_MIN + 8);
	memset(junk, '[', IOD_STATE_PREPARSE_MIN);
	CHECK(iod_state_preparse(junk, IOD_STATE_PREPARSE_MIN + 8, 1) == NULL);
	free(junk);
	iod_state_free(a);
	iod_state_free(b);
}

/*
 * A snapshot is taken where the state lives (O(n) copies) and encoded later,
 * on a worker: what it encodes is the state at the take, byte for byte,
 * whatever was applied, overwritten or deleted since (the write tail: a
 * snapshot serialised on the loop held it 80-680 ms and made the followers
 * elect).
 */
TEST(snapshot_encoded_after_the_take_is_the_state_at_the_take)
{
	struct iod_state *s, *t;
	struct iod_state_result r;
	struct iod_err e = {0};
	void *want = NULL, *got = NULL;
	size_t want_len = 0, got_len = 0;
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(iod_state_new(&t), 0);
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_grant(1000, 1), &r), 0);
	for (int i = 0; i < 500; i++) {
		char name[32];
		snprintf(name, sizeof(name), "n-%d", i);
		CHECK_EQ(
		    put(s, i % 2 ? IOD_STATE_NODE : IOD_STATE_CONFIG, name, "{\"gpus\":8}", -1, &r),
		    0);
	}
	CHECK_EQ(iod_state_snapshot(s, &want, &want_len), 0);
	uint64_t digest = iod_state_digest(s);
	struct iod_state_snap *snap = iod_state_snapshot_take(s);
	CHECK(snap != NULL);
	/* the state moves on: overwrites, deletes, new objects, a new lease */
	for (int i = 0; i < 500; i += 3) {
		char name[32];
		snprintf(name, sizeof(name), "n-%d", i);
		CHECK_EQ(
		    put(s, i % 2 ? IOD_STATE_NODE : IOD_STATE_CONFIG, name, "{\"gpus\":1}", -1, &r),
		    0);
		snprintf(name, sizeof(name), "n-%d", i + 1);
		CHECK_EQ(apply_owned(s,
		                     iod_state_cmd_delete(
		                         (i + 1) % 2 ? IOD_STATE_NODE : IOD_STATE_CONFIG, name, -1),
		                     &r),
		         0);
		snprintf(name, sizeof(name), "new-%d", i);
		CHECK_EQ(put(s, IOD_STATE_NODE, name, "{}", -1, &r), 0);
	}
	CHECK_EQ(apply_owned(s, iod_state_cmd_lease_grant(2000, 2), &r), 0);
	CHECK(iod_state_digest(s) != digest);
	CHECK_EQ(iod_state_snapshot_encode(snap, &got, &got_len), 0);
	iod_state_snapshot_free(snap);
	CHECK_EQ(got_len, want_len);
	CHECK(memcmp(got, want, want_len) == 0);
	CHECK_EQ(iod_state_restore(t, got, got_len, &e), 0);
	CHECK_U64(iod_state_digest(t), digest);
	free(want);
	free(got);
	iod_state_free(s);
	iod_state_free(t);
}

/* With async snapshots raft's snapshot call (on the loop) serialises
 * nothing; snapshot_async (a worker) gives the bytes of the state at that
 * call; finalize releases both. */
TEST(fsm_async_snapshot_serialises_off_the_loop)
{
	struct iod_state *s;
	struct iod_state_result r;
	struct iod_state_fsm_ctx ctx;
	struct raft_fsm fsm;
	struct raft_buffer *bufs = NULL;
	unsigned n = 0;
	void *want = NULL;
	size_t want_len = 0;
	CHECK_EQ(iod_state_new(&s), 0);
	for (int i = 0; i < 100; i++) {
		char name[32];
		snprintf(name, sizeof(name), "c-%d", i);
		CHECK_EQ(put(s, IOD_STATE_CONFIG, name, "{\"v\":1}", -1, &r), 0);
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.state = s;
	iod_state_fsm_init(&fsm, &ctx);
	iod_state_fsm_set_async_snapshots(&fsm);
	CHECK_EQ(fsm.version, 3);
	CHECK(fsm.snapshot_async != NULL);
	CHECK_EQ(iod_state_snapshot(s, &want, &want_len), 0);
	CHECK_EQ(fsm.snapshot(&fsm, &bufs, &n), 0);
	CHECK_EQ(n, 1u);
	CHECK(bufs[0].base == NULL); /* nothing serialised on the loop */
	CHECK_EQ(put(s, IOD_STATE_CONFIG, "c-0", "{\"v\":2}", -1, &r), 0);
	CHECK_EQ(fsm.snapshot_async(&fsm, &bufs, &n), 0);
	CHECK_EQ(bufs[0].len, want_len);
	CHECK(memcmp(bufs[0].base, want, want_len) == 0);
	CHECK_EQ(ctx.snapshots, 1u);
	CHECK_EQ(fsm.snapshot_finalize(&fsm, &bufs, &n), 0);
	CHECK(ctx.snap == NULL);
	CHECK_EQ(n, 0u);
	free(want);
	iod_state_free(s);
}
