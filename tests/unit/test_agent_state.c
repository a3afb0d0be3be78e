/*
 * test_agent_state.c: the agent's pure functions over cluster state: which
 * replicas a node runs and with what environment (desired.c), and how a
 * lost node's replicas are rescheduled by the topology-aware scheduler
 * (src/ctrl/reschedule.c).
 */
#include "harness.h"
#include "iod/agent.h"
#include "iod/ctrl.h"
#include "iod/mesh_proxy.h"
#include "iod/spec.h"

#include <stdlib.h>

static json_t *parse(const char *text)
{
	json_t *j = NULL;
	iod_json_parse(text, strlen(text), &j, NULL);
	return j;
}

/* The value of variable var in r's environment, or NULL. */
static const char *env_of(const struct iod_agent_replica *r, const char *var)
{
	size_t l = strlen(var);
	for (uint32_t i = 0; i < r->envc; i++) {
		const char *kv = iod_agent_strv_at(r->env_buf, sizeof(r->env_buf), r->envc, i);
		if (kv && !strncmp(kv, var, l) && kv[l] == '=')
			return kv + l + 1;
	}
	return NULL;
}

#define NODES                                                                                \
	"{\"rev\":9,\"items\":[{\"name\":\"n1\",\"rev\":2,\"value\":{\"addr\":\"10.0.0.1\"," \
	"\"gpus\":2}},{\"name\":\"n2\",\"rev\":3,\"value\":{\"addr\":\"10.0.0.2\",\"gpus\":2}}]}"
#define SERVICES                                                                                   \
	"{\"rev\":9,\"items\":[{\"name\":\"ps\",\"value\":{\"type\":\"stateful\",\"command\":"     \
	"\"iod\",\"args\":[\"demo-worker\",\"--role\",\"parameter-server\"],\"env\":{\"A\":\"1\"}" \
	","                                                                                        \
	"\"restart\":\"on-failure\",\"resources\":{\"mem_bytes\":1000},\"health\":{\"kind\":"      \
	"\"tcp\",\"port\":9,\"interval_ns\":10000000,\"unhealthy_threshold\":2}}},"                \
	"{\"name\":\"w\",\"value\":{\"type\":\"stateless\",\"command\":\"iod\",\"depends_on\":"    \
	"[\"ps\"]}}]}"

TEST(desired_for_one_node_with_peers_and_dependencies)
{
	json_t *nodes = parse(NODES), *svcs = parse(SERVICES);
	json_t *reps =
	    parse("{\"rev\":9,\"items\":["
	          "{\"name\":\"ps-0\",\"rev\":5,\"value\":{\"service\":\"ps\",\"ordinal\":0,"
	          "\"node\":\"n1\",\"gpus\":\"1\",\"generation\":3}},"
	          "{\"name\":\"ps-1\",\"rev\":6,\"value\":{\"service\":\"ps\",\"ordinal\":1,"
	          "\"node\":\"n2\",\"gpus\":\"0\"}},"
	          "{\"name\":\"w-0\",\"rev\":7,\"value\":{\"service\":\"w\",\"ordinal\":0,"
	          "\"node\":\"n1\",\"gpus\":\"0\"}},"
	          "{\"name\":\"x-0\",\"rev\":8,\"value\":{\"service\":\"gone\","
	          "\"node\":\"n1\"}}]}");
	struct iod_agent_replica *r = calloc(4, sizeof(*r));
	uint32_t n = 0;
	struct iod_err e = {0};
	char want[128];
	CHECK(nodes && svcs && reps && r);
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, NULL, r, 4, &n, &e), 0);
	CHECK_EQ(n, 2); /* ps-0 and w-0; x-0's service is gone; ps-1 is on n2 */
	CHECK_STR(r[0].name, "ps-0");
	CHECK(r[0].stateful);
	CHECK_EQ(r[0].restart, IOD_RESTART_ON_FAILURE);
	CHECK_U64(r[0].generation, 3);
	CHECK_EQ(r[0].argc, 4);
	CHECK_STR(iod_agent_strv_at(r[0].argv_buf, sizeof(r[0].argv_buf), 4, 3),
	          "parameter-server");
	CHECK(iod_bitmap_test(&r[0].gpus, 1) && iod_bitmap_count(&r[0].gpus) == 1);
	CHECK_U64(r[0].mem_bytes, 1000);
	CHECK_EQ(r[0].health.kind, IOD_HEALTH_TCP);
	CHECK_U64(r[0].health.interval_ns, 10000000);
	CHECK_EQ(r[0].health.unhealthy_threshold, 2);
	CHECK_EQ(r[0].port, iod_agent_replica_port("ps-0"));
	CHECK(r[0].port >= IOD_AGENT_PORT_BASE &&
	      r[0].port < IOD_AGENT_PORT_BASE + IOD_AGENT_PORT_RANGE);
	/* environment: the spec's, its address, peers in name order */
	CHECK_STR(iod_agent_strv_at(r[0].env_buf, sizeof(r[0].env_buf), r[0].envc, 0), "A=1");
	snprintf(want, sizeof(want), "IOD_PEERS=10.0.0.1:%u,10.0.0.2:%u",
	         iod_agent_replica_port("ps-0"), iod_agent_replica_port("ps-1"));
	CHECK_STR(iod_agent_strv_at(r[0].env_buf, sizeof(r[0].env_buf), r[0].envc, 2), want);
	/* the worker finds the parameter servers */
	snprintf(want, sizeof(want), "10.0.0.1:%u,10.0.0.2:%u", iod_agent_replica_port("ps-0"),
	         iod_agent_replica_port("ps-1"));
	CHECK(env_of(&r[1], "IOD_DEP_PS"));
	CHECK_STR(env_of(&r[1], "IOD_DEP_PS") ? env_of(&r[1], "IOD_DEP_PS") : "", want);
	CHECK(!r[1].stateful);
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, NULL, r, 1, &n, &e), -E2BIG);
	free(r);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

TEST(desired_stateful_replica_gets_the_specs_storage)
{
	json_t *nodes = parse(NODES);
	/* what the deploy stores: the spec's storage: copied into the stateful
	 * service (tiers in spec order, slowest first here) */
	json_t *svcs =
	    parse("{\"rev\":9,\"items\":[{\"name\":\"ps\",\"value\":{\"type\":\"stateful\","
	          "\"command\":\"iod\",\"storage\":{\"tiers\":[{\"medium\":\"NVMe\",\"quota_bp\":"
	          "8000},{\"medium\":\"PMem\",\"quota_bp\":2000}],\"replicas\":3}}},"
	          "{\"name\":\"bad\",\"value\":{\"type\":\"stateful\",\"command\":\"iod\","
	          "\"storage\":{\"tiers\":[{\"medium\":\"Tape\",\"quota_bp\":10000}]}}},"
	          "{\"name\":\"w\",\"value\":{\"type\":\"stateless\",\"command\":\"iod\"}}]}");
	json_t *reps = parse("{\"rev\":9,\"items\":["
	                     "{\"name\":\"ps-0\",\"value\":{\"service\":\"ps\",\"node\":\"n1\"}},"
	                     "{\"name\":\"bad-0\",\"value\":{\"service\":\"bad\",\"node\":\"n1\"}},"
	                     "{\"name\":\"w-0\",\"value\":{\"service\":\"w\",\"node\":\"n1\"}}]}");
	struct iod_agent_replica *r = calloc(3, sizeof(*r));
	uint32_t n = 0;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && r);
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, NULL, r, 3, &n, &e), 0);
	CHECK_EQ(n, 3);
	CHECK_STR(r[0].name, "ps-0");
	CHECK_MSG(!r[0].fail[0], "%s", r[0].fail);
	CHECK_EQ(r[0].ckpt_tiers_n, 2);
	CHECK_EQ(r[0].ckpt_tiers[0].medium, IOD_STOR_PMEM); /* fastest first */
	CHECK_EQ(r[0].ckpt_tiers[0].quota_bp, 2000);
	CHECK_EQ(r[0].ckpt_tiers[1].medium, IOD_STOR_NVME);
	CHECK_EQ(r[0].ckpt_replicas, 3);
	/* a storage: that does not validate fails that replica alone */
	CHECK_STR(r[1].name, "bad-0");
	CHECK_CONTAINS(r[1].fail, "Tape");
	CHECK_EQ(r[2].ckpt_tiers_n, 0);
	CHECK(!r[2].fail[0]);
	/* no node runs a chunk server here: no peers listed */
	CHECK(!env_of(&r[0], "IOD_CKPT_PEERS") && !env_of(&r[0], "IOD_CKPT_HERE"));
	json_decref(nodes);
	/* every node's chunk server (its Node's ckpt_peer): the others listed for
	 * copies, other zones first, then other racks, then the rest; its own
	 * node's apart; the namespace is the replica's name */
	nodes = parse("{\"rev\":9,\"items\":["
	              "{\"name\":\"n1\",\"value\":{\"ckpt_peer\":\"127.0.0.1:5001\",\"rack\":"
	              "\"r1\",\"zone\":\"z1\"}},"
	              "{\"name\":\"n2\",\"value\":{\"ckpt_peer\":\"127.0.0.1:5002\",\"rack\":"
	              "\"r1\",\"zone\":\"z1\"}},"
	              "{\"name\":\"n3\",\"value\":{\"ckpt_peer\":\"127.0.0.1:5003\",\"rack\":"
	              "\"r2\",\"zone\":\"z1\"}},"
	              "{\"name\":\"n4\",\"value\":{\"ckpt_peer\":\"127.0.0.1:5004\",\"rack\":"
	              "\"r3\",\"zone\":\"z2\"}},"
	              "{\"name\":\"n5\",\"value\":{\"rack\":\"r4\"}},"
	              "{\"name\":\"n6\",\"value\":{\"ckpt_peer\":\"10.0.0.6:5006\",\"zone\":"
	              "\"z3\"}}]}");
	CHECK(nodes);
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, NULL, r, 3, &n, &e), 0);
	CHECK_MSG(!r[0].fail[0], "%s", r[0].fail);
	/* n6's chunk server is beyond loopback (mTLS), which the replica
	 * speaks with its own credentials: listed (another zone, so first
	 * with n4) */
	CHECK_STR(env_of(&r[0], "IOD_CKPT_PEERS"),
	          "n4=127.0.0.1:5004/ps-0,n6=10.0.0.6:5006/ps-0,n3=127.0.0.1:5003/ps-0,"
	          "n2=127.0.0.1:5002/ps-0");
	CHECK_STR(env_of(&r[0], "IOD_CKPT_HERE"), "n1=127.0.0.1:5001/ps-0");
	CHECK(!env_of(&r[2], "IOD_CKPT_PEERS")); /* stateless: none */
	free(r);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

static const json_t *write_for(const json_t *w, const char *name)
{
	size_t i;
	json_t *x;
	json_array_foreach(w, i, x)
	{
		const char *n;
		if (!iod_json_get_str(x, "name", &n) && !strcmp(n, name))
			return x;
	}
	return NULL;
}

TEST(lost_node_stateless_moves_now_stateful_after_grace)
{
	/* n3 is gone: w-0 (stateless, 1 GPU) and ps-2 (stateful) were on it */
	json_t *nodes = parse(NODES), *svcs = parse(SERVICES), *unplaced = NULL;
	json_t *reps = parse("{\"rev\":9,\"items\":["
	                     "{\"name\":\"ps-0\",\"rev\":5,\"value\":{\"service\":\"ps\","
	                     "\"node\":\"n1\",\"gpus\":\"0-1\"}},"
	                     "{\"name\":\"ps-2\",\"rev\":6,\"value\":{\"service\":\"ps\","
	                     "\"node\":\"n3\",\"gpus\":\"0\"}},"
	                     "{\"name\":\"w-0\",\"rev\":7,\"value\":{\"service\":\"w\","
	                     "\"node\":\"n3\",\"gpus\":\"0\",\"cpus\":\"4-7\"}}]}");
	CHECK(nodes && svcs && reps);
	json_t *w = iod_ctrl_resched_plan(nodes, reps, svcs, 1000, 500, &unplaced);
	CHECK_EQ(json_array_size(w), 2);
	CHECK_EQ(json_array_size(unplaced), 0);
	/* stateless: to n2 (n1's GPUs are all taken), lowest free GPU, CAS on its rev */
	const json_t *mw = write_for(w, "w-0"), *v = json_object_get(mw, "value");
	uint64_t prev = 0;
	CHECK(mw);
	iod_json_get_u64(mw, "prev_rev", &prev);
	CHECK_U64(prev, 7);
	const char *s = "";
	iod_json_get_str(v, "node", &s);
	CHECK_STR(s, "n2");
	iod_json_get_str(v, "gpus", &s);
	CHECK_STR(s, "0");
	iod_json_get_str(v, "moved_from", &s);
	CHECK_STR(s, "n3");
	/* the old node's CPU set is replaced by the scheduler's on n2 */
	CHECK(json_is_string(json_object_get(v, "cpus")));
	CHECK(strcmp(json_string_value(json_object_get(v, "cpus")), "4-7") != 0);
	iod_json_get_str(v, "reason", &s);
	CHECK_CONTAINS(s, "rescheduled from lost node n3 to n2 (stateless)");
	/* stateful: first only marked lost, with the time */
	const json_t *ms = write_for(w, "ps-2");
	uint64_t lost = 0;
	CHECK(ms);
	iod_json_get_str(json_object_get(ms, "value"), "node", &s);
	CHECK_STR(s, "n3");
	iod_json_get_u64(json_object_get(ms, "value"), "lost_ms", &lost);
	CHECK_U64(lost, 1000);
	json_decref(w);
	json_decref(unplaced);

	/* within the grace nothing happens to it; after the grace it moves */
	json_object_set_new(
	    json_object_get(json_array_get(json_object_get(reps, "items"), 1), "value"), "lost_ms",
	    json_integer(1000));
	w = iod_ctrl_resched_plan(nodes, reps, svcs, 1400, 500, &unplaced);
	CHECK(!write_for(w, "ps-2"));
	json_decref(w);
	json_decref(unplaced);
	w = iod_ctrl_resched_plan(nodes, reps, svcs, 1500, 500, &unplaced);
	ms = write_for(w, "ps-2");
	CHECK(ms);
	iod_json_get_str(json_object_get(ms, "value"), "node", &s);
	CHECK_STR(s, "n2");
	CHECK(!json_object_get(json_object_get(ms, "value"), "lost_ms"));
	json_decref(w);
	json_decref(unplaced);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

/* With no stateful grace (`--stateful-grace 0s`) a lost stateful replica
 * moves in the plan that first sees it: one write, not a `lost` mark whose
 * watch round would delay the move (storage.nodeloss's reschedule phase). */
TEST(lost_stateful_replica_with_no_grace_moves_in_one_plan)
{
	json_t *nodes = parse(NODES), *svcs = parse(SERVICES), *unplaced = NULL;
	json_t *reps = parse("{\"rev\":9,\"items\":["
	                     "{\"name\":\"ps-2\",\"rev\":6,\"value\":{\"service\":\"ps\","
	                     "\"node\":\"n3\",\"gpus\":\"0\"}}]}");
	CHECK(nodes && svcs && reps);
	json_t *w = iod_ctrl_resched_plan(nodes, reps, svcs, 1000, 0, &unplaced);
	CHECK_EQ(json_array_size(w), 1);
	const json_t *ms = write_for(w, "ps-2"), *v = json_object_get(ms, "value");
	const char *s = "";
	uint64_t prev = 0;
	CHECK(ms);
	iod_json_get_u64(ms, "prev_rev", &prev);
	CHECK_U64(prev, 6);
	iod_json_get_str(v, "node", &s);
	CHECK(strcmp(s, "n3") != 0);
	iod_json_get_str(v, "phase", &s);
	CHECK_STR(s, "pending");
	iod_json_get_str(v, "moved_from", &s);
	CHECK_STR(s, "n3");
	CHECK(!json_object_get(v, "lost_ms"));
	json_decref(w);
	json_decref(unplaced);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

TEST(lost_replica_that_fits_nowhere_is_reported)
{
	json_t *nodes = parse("{\"rev\":1,\"items\":[{\"name\":\"n1\",\"value\":{\"gpus\":1}}]}");
	json_t *svcs = parse(SERVICES), *unplaced = NULL;
	json_t *reps = parse("{\"rev\":9,\"items\":[{\"name\":\"w-0\",\"rev\":7,\"value\":"
	                     "{\"service\":\"w\",\"node\":\"n9\",\"gpus\":\"0-3\"}}]}");
	json_t *w = iod_ctrl_resched_plan(nodes, reps, svcs, 0, 0, &unplaced);
	CHECK_EQ(json_array_size(unplaced), 1);
	const json_t *u = json_array_get(unplaced, 0);
	/* the scheduler's reason and message */
	CHECK_STR(json_string_value(json_object_get(u, "reason")), "node-too-small");
	CHECK(json_string_length(json_object_get(u, "why")) > 0);
	/* said once in the replica: pending, not ready, why */
	CHECK_EQ(json_array_size(w), 1);
	const json_t *v = json_object_get(write_for(w, "w-0"), "value");
	const char *s = "";
	iod_json_get_str(v, "reason", &s);
	CHECK_CONTAINS(s, "node n9 lost; cannot reschedule (node-too-small)");
	iod_json_get_str(v, "node", &s);
	CHECK_STR(s, "n9");
	CHECK(json_is_false(json_object_get(v, "ready")));
	/* once written, the same verdict is not written again */
	json_object_set(json_object_get(json_array_get(json_object_get(reps, "items"), 0), "value"),
	                "reason", json_object_get(v, "reason"));
	json_decref(w);
	json_decref(unplaced);
	w = iod_ctrl_resched_plan(nodes, reps, svcs, 0, 0, &unplaced);
	CHECK_EQ(json_array_size(w), 0);
	CHECK_EQ(json_array_size(unplaced), 1);
	json_decref(w);
	json_decref(unplaced);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

/* Services as the deploy stores them: the normalized spec, plus generation. */
static json_t *services_from_spec(const char *text)
{
	struct iod_spec *spec = NULL;
	struct iod_spec_diags *d = calloc(1, sizeof(*d));
	json_t *items = json_array();
	if (iod_spec_load_buffer("t", text, strlen(text), &spec, d) == 0) {
		json_t *sj = iod_spec_to_json(spec);
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(sj, "services"), i, x)
		{
			json_t *v = json_deep_copy(x);
			json_object_set_new(v, "generation", json_integer(1));
			json_array_append_new(
			    items,
			    json_pack("{s:s, s:o}", "name",
			              json_string_value(json_object_get(x, "name")), "value", v));
		}
		json_decref(sj);
		iod_spec_free(spec);
	}
	free(d);
	return json_pack("{s:i, s:o}", "rev", 1, "items", items);
}

/*
 * The topology-aware scheduler places the lost node's replicas, as a deploy
 * would: pcie-4gpu-nvlink-pairs nodes have NVLink pairs 0-1 and 2-3; n1 and
 * n2 each hold a replica on one GPU of their first pair (GPU 1 and 0). A
 * lost 2-GPU replica that needs NVLink gets a whole pair (2-3), never the
 * lowest free indexes (0,2 on n1: no NVLink); a lost 4-GPU NVLink replica
 * fits nowhere (each node has 3 GPUs free), with the scheduler's reason
 * ("gpus") and message.
 */
TEST(lost_node_replicas_get_the_schedulers_gpu_sets_and_reasons)
{
	json_t *svcs = services_from_spec(
	    "{\"services\":["
	    "{\"name\":\"x\",\"type\":\"stateless\",\"replicas\":2,\"resources\":{\"gpu\":1},"
	    "\"command\":\"iod\"},"
	    "{\"name\":\"train\",\"type\":\"stateless\",\"replicas\":1,\"resources\":{\"gpu\":2},"
	    "\"command\":\"iod\",\"placement\":{\"gpu_link\":\"nvlink\"}},"
	    "{\"name\":\"big\",\"type\":\"stateless\",\"replicas\":1,\"resources\":{\"gpu\":4},"
	    "\"command\":\"iod\",\"placement\":{\"gpu_link\":\"nvlink\"}}]}");
	json_t *nodes = parse("{\"rev\":1,\"items\":["
	                      "{\"name\":\"n1\",\"value\":{\"model\":\"pcie-4gpu-nvlink-pairs\","
	                      "\"gpus\":4}},"
	                      "{\"name\":\"n2\",\"value\":{\"model\":\"pcie-4gpu-nvlink-pairs\","
	                      "\"gpus\":4}}]}");
	json_t *reps =
	    parse("{\"rev\":9,\"items\":["
	          "{\"name\":\"big-0\",\"rev\":4,\"value\":{\"service\":\"big\","
	          "\"ordinal\":0,\"node\":\"n3\",\"gpus\":\"0-3\"}},"
	          "{\"name\":\"train-0\",\"rev\":5,\"value\":{\"service\":\"train\","
	          "\"ordinal\":0,\"node\":\"n3\",\"gpus\":\"0-1\",\"addr\":\"10.1.0.2\"}},"
	          "{\"name\":\"x-0\",\"rev\":6,\"value\":{\"service\":\"x\","
	          "\"ordinal\":0,\"node\":\"n1\",\"gpus\":\"1\"}},"
	          "{\"name\":\"x-1\",\"rev\":7,\"value\":{\"service\":\"x\","
	          "\"ordinal\":1,\"node\":\"n2\",\"gpus\":\"0\"}}]}");
	json_t *unplaced = NULL;
	CHECK(svcs && nodes && reps);
	CHECK_EQ(json_array_size(json_object_get(svcs, "items")), 3);
	json_t *w = iod_ctrl_resched_plan(nodes, reps, svcs, 0, 0, &unplaced);
	const json_t *mt = write_for(w, "train-0"), *v = json_object_get(mt, "value");
	const char *s = "";
	uint64_t prev = 0;
	CHECK(mt);
	iod_json_get_u64(mt, "prev_rev", &prev);
	CHECK_U64(prev, 5);
	iod_json_get_str(v, "gpus", &s);
	CHECK_STR(s, "2-3"); /* a whole NVLink pair */
	iod_json_get_str(v, "node", &s);
	CHECK(!strcmp(s, "n1") || !strcmp(s, "n2"));
	/* placed with the scheduler's CPUs/NUMA and explanation, like a deploy */
	CHECK(json_is_string(json_object_get(v, "cpu_affinity")) &&
	      json_string_length(json_object_get(v, "cpu_affinity")) > 0);
	CHECK(json_is_integer(json_object_get(v, "mem_numa")));
	CHECK(json_is_object(json_object_get(v, "explain")));
	CHECK(!json_object_get(v, "addr")); /* the lost node's netns address is gone */
	iod_json_get_str(v, "reason", &s);
	CHECK_CONTAINS(s, "rescheduled from lost node n3 to");
	CHECK_CONTAINS(s, "GPUs 2-3");
	/* the 4-GPU NVLink replica: no node has four free GPUs */
	CHECK_EQ(json_array_size(unplaced), 1);
	const json_t *u = json_array_get(unplaced, 0);
	CHECK_STR(json_string_value(json_object_get(u, "replica")), "big-0");
	CHECK_STR(json_string_value(json_object_get(u, "reason")), "gpus");
	CHECK_CONTAINS(json_string_value(json_object_get(u, "why")), "GPU");
	iod_json_get_str(json_object_get(write_for(w, "big-0"), "value"), "reason", &s);
	CHECK_CONTAINS(s, "node n3 lost; cannot reschedule (gpus)");
	/* nothing else moves: x-0 and x-1 live */
	CHECK(!write_for(w, "x-0") && !write_for(w, "x-1"));
	CHECK_EQ(json_array_size(w), 2);
	json_decref(w);
	json_decref(unplaced);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

/* IOD_SVC_<NAME>_ADDR: the mesh VIP:port of the replica's own service and
 * of each dependency (the proxy's computation), not of unrelated services. */
TEST(desired_env_has_mesh_addresses)
{
	json_t *nodes = parse(NODES);
	json_t *svcs =
	    parse("{\"rev\":3,\"items\":["
	          "{\"name\":\"other\",\"value\":{\"type\":\"stateless\",\"command\":\"true\"}},"
	          "{\"name\":\"parameter-server\",\"value\":{\"type\":\"stateless\","
	          "\"command\":\"true\",\"ports\":[{\"name\":\"http\",\"port\":8080}]}},"
	          "{\"name\":\"w\",\"value\":{\"type\":\"stateless\",\"command\":\"true\","
	          "\"depends_on\":[\"parameter-server\"]}}]}");
	json_t *reps = parse("{\"rev\":3,\"items\":["
	                     "{\"name\":\"parameter-server-0\",\"value\":{\"service\":"
	                     "\"parameter-server\",\"node\":\"n1\"}},"
	                     "{\"name\":\"w-0\",\"value\":{\"service\":\"w\",\"node\":\"n1\"}}]}");
	struct iod_agent_replica *r = calloc(2, sizeof(*r));
	struct iod_mesh_svc_addr a[3];
	uint32_t n = 0, an = 0;
	struct iod_err e = {0};
	char ps[32], w[32];
	CHECK(nodes && svcs && reps && r);
	CHECK_EQ(iod_mesh_api_addrs(svcs, a, 3, &an), 0);
	CHECK_EQ(an, 3);
	CHECK_STR(a[1].name, "parameter-server");
	iod_mesh_addr_format(a[1].vip4, a[1].port, ps, sizeof(ps));
	iod_mesh_addr_format(a[2].vip4, a[2].port, w, sizeof(w));
	CHECK_EQ(a[1].port, 8080);
	CHECK_EQ(a[2].port, IOD_MESH_API_DEFAULT_PORT);
	CHECK_U64(a[1].vip4 >> 16, (127u << 8) | 77u); /* 127.77.x.y */
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, NULL, r, 2, &n, &e), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(r[0].name, "parameter-server-0");
	CHECK_STR(env_of(&r[0], "IOD_SVC_PARAMETER_SERVER_ADDR")
	              ? env_of(&r[0], "IOD_SVC_PARAMETER_SERVER_ADDR")
	              : "",
	          ps);
	CHECK(!env_of(&r[0], "IOD_SVC_W_ADDR"));
	CHECK(!env_of(&r[0], "IOD_SVC_OTHER_ADDR"));
	CHECK_STR(env_of(&r[1], "IOD_SVC_W_ADDR") ? env_of(&r[1], "IOD_SVC_W_ADDR") : "", w);
	CHECK_STR(env_of(&r[1], "IOD_SVC_PARAMETER_SERVER_ADDR")
	              ? env_of(&r[1], "IOD_SVC_PARAMETER_SERVER_ADDR")
	              : "",
	          ps);
	CHECK(!env_of(&r[1], "IOD_SVC_OTHER_ADDR"));
	free(r);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

/* A replica in its own netns reports its address: peers and dependants
 * reach it there, not at its node's address. */
TEST(desired_peers_use_a_replicas_own_netns_address)
{
	json_t *nodes = parse(NODES), *svcs = parse(SERVICES);
	json_t *reps =
	    parse("{\"rev\":9,\"items\":["
	          "{\"name\":\"ps-0\",\"rev\":5,\"value\":{\"service\":\"ps\",\"ordinal\":0,"
	          "\"node\":\"n1\",\"gpus\":\"\",\"addr\":\"10.213.0.2\"}},"
	          "{\"name\":\"ps-1\",\"rev\":6,\"value\":{\"service\":\"ps\",\"ordinal\":1,"
	          "\"node\":\"n2\",\"gpus\":\"\"}},"
	          "{\"name\":\"w-0\",\"rev\":7,\"value\":{\"service\":\"w\",\"ordinal\":0,"
	          "\"node\":\"n2\",\"gpus\":\"\"}}]}");
	struct iod_agent_replica *r = calloc(4, sizeof(*r));
	uint32_t n = 0;
	struct iod_err e = {0};
	char want[128];
	CHECK(nodes && svcs && reps && r);
	CHECK_EQ(iod_agent_desired_from_state("n2", nodes, svcs, reps, NULL, r, 4, &n, &e), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(r[1].name, "w-0");
	snprintf(want, sizeof(want), "10.213.0.2:%u,10.0.0.2:%u", iod_agent_replica_port("ps-0"),
	         iod_agent_replica_port("ps-1"));
	CHECK_STR(env_of(&r[1], "IOD_DEP_PS") ? env_of(&r[1], "IOD_DEP_PS") : "", want);
	free(r);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

/* Accelerators the scheduler gave a replica reach it as device lists. */
TEST(desired_env_has_accelerators)
{
	json_t *nodes = parse(NODES);
	json_t *svcs = parse("{\"rev\":3,\"items\":[{\"name\":\"off\",\"value\":{\"type\":"
	                     "\"stateless\",\"command\":\"true\"}}]}");
	json_t *reps = parse(
	    "{\"rev\":3,\"items\":[{\"name\":\"off-0\",\"value\":{\"service\":\"off\","
	    "\"node\":\"n1\",\"accelerators\":\"0-1\",\"accelerator_devices\":["
	    "{\"name\":\"NIC8\",\"os_name\":\"mlx5_8\",\"pci\":\"0000:1d:00.0\",\"type\":\"dpu\"},"
	    "{\"name\":\"FPGA0\",\"os_name\":\"\",\"pci\":\"0000:3b:00.0\",\"type\":\"fpga\"}]}},"
	    "{\"name\":\"off-1\",\"value\":{\"service\":\"off\",\"node\":\"n1\"}}]}");
	struct iod_agent_replica *r = calloc(2, sizeof(*r));
	uint32_t n = 0;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && r);
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, NULL, r, 2, &n, &e), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(env_of(&r[0], "IOD_ACCELERATORS") ? env_of(&r[0], "IOD_ACCELERATORS") : "",
	          "0000:1d:00.0,0000:3b:00.0");
	CHECK_STR(env_of(&r[0], "IOD_DPUS") ? env_of(&r[0], "IOD_DPUS") : "", "mlx5_8");
	CHECK_STR(env_of(&r[0], "IOD_FPGAS") ? env_of(&r[0], "IOD_FPGAS") : "", "FPGA0");
	CHECK(env_of(&r[1], "IOD_ACCELERATORS") == NULL);
	free(r);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

/* One replica the agent cannot build fails alone, with its reason; every
 * other replica of the node, also those that sort after it, is built as
 * usual (the agent used to stop at the first bad one: "520 placed", 0
 * started, unrelated replicas stopped). */
TEST(desired_bad_replicas_fail_alone)
{
	json_t *nodes = parse(NODES);
	char *svcs_text = NULL, *reps_text = NULL;
	struct iod_buf sb, rb;
	iod_buf_init(&sb);
	iod_buf_init(&rb);
	/* a: a good service; argv: args over IOD_AGENT_ARGV_BYTES_MAX (a raw
	 * write: deploy refuses it); many: more peers than the environment
	 * holds; smuggled: a key the spec language does not have */
	iod_buf_printf(&sb, "{\"rev\":3,\"items\":["
	                    "{\"name\":\"z\",\"value\":{\"type\":\"stateless\",\"command\":"
	                    "\"sleep\",\"args\":[\"60\"]}},"
	                    "{\"name\":\"argv\",\"value\":{\"type\":\"stateless\","
	                    "\"command\":\"true\",\"args\":[");
	for (int i = 0; i < 8; i++)
		iod_buf_printf(&sb, "%s\"%04000d\"", i ? "," : "", i);
	iod_buf_printf(&sb, "]}},{\"name\":\"many\",\"value\":{\"type\":\"stateless\","
	                    "\"command\":\"true\"}},"
	                    "{\"name\":\"smuggled\",\"value\":{\"type\":\"stateless\","
	                    "\"command\":\"true\",\"privileged\":true}}]}");
	iod_buf_printf(&rb,
	               "{\"rev\":3,\"items\":["
	               "{\"name\":\"argv-0\",\"value\":{\"service\":\"argv\",\"node\":\"n1\"}},"
	               "{\"name\":\"bad-gpus-0\",\"value\":{\"service\":\"z\",\"node\":\"n1\","
	               "\"gpus\":\"0-x\"}},"
	               "{\"name\":\"int-gpus-0\",\"value\":{\"service\":\"z\",\"node\":\"n1\","
	               "\"gpus\":3}},");
	for (int i = 0; i < 1600; i++)
		iod_buf_printf(&rb,
		               "{\"name\":\"many-%d\",\"value\":{\"service\":\"many\","
		               "\"node\":\"%s\"}},",
		               i, i == 0 ? "n1" : "n2");
	iod_buf_printf(&rb, "{\"name\":\"smuggled-0\",\"value\":{\"service\":\"smuggled\","
	                    "\"node\":\"n1\"}},"
	                    "{\"name\":\"z-0\",\"value\":{\"service\":\"z\",\"node\":\"n1\","
	                    "\"gpus\":\"1\"}}]}");
	svcs_text = sb.data;
	reps_text = rb.data;
	json_t *svcs = parse(svcs_text), *reps = parse(reps_text);
	struct iod_agent_replica *r = calloc(8, sizeof(*r));
	uint32_t n = 0;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && r);
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, NULL, r, 8, &n, &e), 0);
	CHECK_EQ(n, 6);
	CHECK_STR(r[0].name, "argv-0");
	CHECK_CONTAINS(r[0].fail, "IOD_AGENT_ARGV_BYTES_MAX");
	CHECK_STR(r[1].name, "bad-gpus-0");
	CHECK_CONTAINS(r[1].fail, "gpus");
	CHECK_STR(r[2].name, "int-gpus-0");
	CHECK_CONTAINS(r[2].fail, "gpus");
	CHECK_STR(r[3].name, "many-0");
	CHECK_CONTAINS(r[3].fail, "IOD_PEERS does not fit");
	CHECK_STR(r[4].name, "smuggled-0");
	CHECK_CONTAINS(r[4].fail, "does not validate");
	CHECK_CONTAINS(r[4].fail, "privileged");
	for (int i = 0; i < 5; i++)
		CHECK_MSG(r[i].argc == 0 && r[i].envc == 0, "%s has something to run", r[i].name);
	/* the good replica, sorting after all of them, is built as usual */
	CHECK_STR(r[5].name, "z-0");
	CHECK_STR(r[5].fail, "");
	CHECK_EQ(r[5].argc, 2);
	CHECK(iod_bitmap_test(&r[5].gpus, 1));
	/* more replicas than the agent tracks: the first by name are filled */
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, NULL, r, 2, &n, &e), -E2BIG);
	CHECK_EQ(n, 2);
	CHECK_CONTAINS(e.msg, "IOD_AGENT_REPLICAS_MAX");
	free(r);
	iod_buf_free(&sb);
	iod_buf_free(&rb);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

struct fake_sink {
	int calls;      /* profiles handed over */
	uint64_t caps;  /* the last one's capabilities */
	char first[64]; /* the start of the last profile */
};
static int fake_add(void *ctx, const char *profile, uint64_t caps, uint32_t *id, char *why,
                    size_t len)
{
	struct fake_sink *f = ctx;
	IOD_UNUSED(why);
	IOD_UNUSED(len);
	f->calls++;
	f->caps = caps;
	snprintf(f->first, sizeof(f->first), "%s", profile);
	*id = 7;
	return 0;
}

/* The spec's sandbox reaches the replica; a service's own seccomp profile
 * goes to the agent's filter store, and the replica carries its id. */
TEST(desired_carries_the_sandbox)
{
	json_t *nodes = parse(NODES);
	json_t *svcs = parse(
	    "{\"rev\":3,\"items\":[{\"name\":\"s\",\"value\":{\"type\":\"stateless\",\"command\":"
	    "\"true\",\"sandbox\":{\"user\":\"1000:100\",\"capabilities\":[\"NET_BIND_SERVICE\"],"
	    "\"network\":\"none\",\"best_effort\":true,\"seccomp\":{\"defaultAction\":"
	    "\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\"}]"
	    "}}}},{\"name\":\"t\",\"value\":{\"type\":\"stateless\",\"command\":\"true\"}}]}");
	json_t *reps = parse("{\"rev\":3,\"items\":["
	                     "{\"name\":\"s-0\",\"value\":{\"service\":\"s\",\"node\":\"n1\"}},"
	                     "{\"name\":\"t-0\",\"value\":{\"service\":\"t\",\"node\":\"n1\"}}]}");
	struct iod_agent_replica *r = calloc(2, sizeof(*r));
	struct fake_sink f = {0};
	struct iod_agent_profile_sink sink = {fake_add, &f};
	uint32_t n = 0;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && r);
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, &sink, r, 2, &n, &e), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(r[0].fail, "");
	CHECK_EQ(r[0].sandbox.user, IOD_SPEC_USER_ID);
	CHECK_EQ(r[0].sandbox.uid, 1000);
	CHECK_EQ(r[0].sandbox.gid, 100);
	CHECK_U64(r[0].sandbox.caps, 1ull << 10);
	CHECK_EQ(r[0].sandbox.network, IOD_SPEC_NET_NONE);
	CHECK(r[0].sandbox.best_effort);
	CHECK_EQ(r[0].sandbox.seccomp, IOD_SPEC_SECCOMP_PROFILE);
	CHECK_EQ(r[0].sandbox.seccomp_id, 7);
	CHECK_EQ(f.calls, 1);
	CHECK_U64(f.caps, 1ull << 10);
	CHECK_CONTAINS(f.first, "{\"defaultAction\":\"SCMP_ACT_ERRNO\"");
	/* no sandbox block: the defaults */
	CHECK_EQ(r[1].sandbox.user, IOD_SPEC_USER_DYNAMIC);
	CHECK_EQ(r[1].sandbox.seccomp, IOD_SPEC_SECCOMP_DEFAULT);
	CHECK_U64(r[1].sandbox.caps, 0);
	/* without a store, the replica with its own profile fails alone */
	CHECK_EQ(iod_agent_desired_from_state("n1", nodes, svcs, reps, NULL, r, 2, &n, &e), 0);
	CHECK_CONTAINS(r[0].fail, "seccomp");
	CHECK_STR(r[1].fail, "");
	free(r);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}
