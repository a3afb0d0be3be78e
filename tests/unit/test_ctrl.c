/*
 * test_ctrl.c: the controller's Node -> scheduler conversion (src/ctrl/) and
 * the deploy and rescheduling plans built on it, with nodes registered the
 * way real agents register them: from an hwloc XML ("model": "xml") and
 * from discovery of this machine ("model": "host"), each with its
 * "topology". Before src/ctrl/ both plans looked the model name up among
 * the built-in models, found nothing, and skipped such nodes: "the cluster
 * has no nodes".
 */
#include "harness.h"
#include "iod/agent.h"
#include "iod/api.h"
#include "iod/ctrl.h"
#include "iod/sched.h"
#include "iod/spec.h"
#include "iod/state.h"
#include "iod/topo.h"

#include <stdlib.h>

/* Put a Node object as `iod agent` registers it (cluster.c). */
static int put_node(struct iod_state *s, const char *name, const char *model,
                    const struct iod_topo_node *t)
{
	struct iod_state_result r;
	json_t *v = json_pack("{s:i, s:i, s:s}", "gpus", (int)t->ngpus, "cpus", 1, "model", model);
	json_object_set_new(v, "topology", iod_topo_to_json(t));
	char *cmd = iod_state_cmd_put(IOD_STATE_NODE, name, v, 0, -1);
	int rc = iod_state_apply(s, cmd, strlen(cmd), &r);
	free(cmd);
	json_decref(v);
	return rc;
}

static int load(const char *what, struct iod_topo_node *t)
{
	struct iod_err e = {0};
	int rc =
	    !strcmp(what, "host") ? iod_topo_discover(t, &e) : iod_topo_load_xml_file(what, t, &e);
	if (rc)
		fprintf(stderr, "load %s: %s\n", what, e.msg);
	return rc;
}

/* How many placements in a deploy answer went to node. */
static int placed_on(const json_t *answer, const char *node)
{
	int n = 0;
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(answer, "placements"), i, p)
	{
		const char *on = NULL;
		if (!iod_json_get_str(p, "node", &on) && !strcmp(on, node))
			n++;
	}
	return n;
}

static const char *spec2 = "services:\n"
                           "  - name: trainer\n"
                           "    type: stateless\n"
                           "    resources: {gpu: 2, mem: 1GB}\n"
                           "    replicas: 2\n"
                           "    command: sleep 100\n"
                           "  - name: web\n"
                           "    type: stateless\n"
                           "    resources: {cpu: 1, mem: 64MB}\n"
                           "    replicas: 2\n"
                           "    command: sleep 100\n"
                           "    placement: {anti_affinity: node}\n";

TEST(deploy_places_on_xml_and_discovered_nodes)
{
	struct iod_topo_node *xml = calloc(1, sizeof(*xml)), *host = calloc(1, sizeof(*host));
	struct iod_state *s = NULL;
	struct iod_err e = {0};
	json_t *answer = NULL;
	char *cmd = NULL;

	CHECK(xml && host);
	CHECK_EQ(load("examples/topologies/pcie-8gpu.xml", xml), 0);
	CHECK_EQ(xml->ngpus, 8);
	CHECK_EQ(load("host", host), 0);
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(put_node(s, "gpu-box", "xml", xml), 0);
	CHECK_EQ(put_node(s, "this-host", "host", host), 0);
	CHECK_EQ(iod_ctrl_deploy_plan(s, spec2, strlen(spec2), &cmd, &answer, &e), 0);
	CHECK_MSG(json_is_true(json_object_get(answer, "complete")), "deploy incomplete: %s",
	          json_dumps(answer, 0));
	/* the GPU service can only go to the XML node; the web service, one
	 * per node, must use the discovered one too */
	CHECK_EQ(placed_on(answer, "gpu-box"), 3);
	CHECK_EQ(placed_on(answer, "this-host"), 1);
	CHECK_EQ(json_array_size(json_object_get(answer, "skipped_nodes")), 0);
	free(cmd);
	json_decref(answer);
	iod_state_free(s);
	free(xml);
	free(host);
}

TEST(identical_machines_share_one_shape)
{
	struct iod_topo_node *t = calloc(1, sizeof(*t));
	struct iod_sched_cluster *cl = NULL;
	struct iod_err e = {0};
	json_t *nodes = json_pack("{s:[]}", "items");
	uint32_t ids[3];
	CHECK(t);
	CHECK_EQ(load("examples/topologies/dgx-h100.xml", t), 0);
	/* three hosts that discovered the same machine; the topology names
	 * differ (each is its hostname) but the hardware does not */
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "h%d", i);
		snprintf(t->name, sizeof(t->name), "host-%d", i);
		json_t *v =
		    json_pack("{s:s, s:o}", "model", "host", "topology", iod_topo_to_json(t));
		json_array_append_new(json_object_get(nodes, "items"),
		                      json_pack("{s:s, s:o}", "name", name, "value", v));
	}
	struct iod_ctrl_cluster_opts o = {.replicas_max = 4};
	CHECK_EQ(iod_ctrl_cluster_build(nodes, &o, &cl, ids, &e), 0);
	CHECK_EQ(iod_sched_node_count(cl), 3);
	CHECK(iod_sched_node_shape(cl, ids[0]) == iod_sched_node_shape(cl, ids[2]));
	CHECK_STR(iod_sched_node_shape(cl, ids[1])->model, "host");
	CHECK_EQ(iod_sched_node_shape(cl, ids[1])->gpus_n, 8);
	iod_sched_cluster_free(cl);
	json_decref(nodes);
	free(t);
}

TEST(unschedulable_nodes_are_skipped_with_a_reason)
{
	struct iod_sched_cluster *cl = NULL;
	struct iod_err e = {0};
	json_t *skipped = json_array();
	json_t *nodes = json_loads(
	    "{\"items\":["
	    "{\"name\":\"bad-topo\",\"value\":{\"model\":\"host\",\"topology\":{\"devices\":7}}},"
	    "{\"name\":\"no-model\",\"value\":{\"model\":\"frobnicator-9000\"}},"
	    "{\"name\":\"legacy\",\"value\":{\"gpus\":4}},"
	    "{\"name\":\"named\",\"value\":{\"model\":\"dgx-h100\"}}]}",
	    0, NULL);
	uint32_t ids[4];
	struct iod_ctrl_cluster_opts o = {.replicas_max = 1, .skipped = skipped};
	CHECK(nodes);
	CHECK_EQ(iod_ctrl_cluster_build(nodes, &o, &cl, ids, &e), 0);
	CHECK_EQ(iod_sched_node_count(cl), 2);
	CHECK_U64(ids[0], UINT32_MAX);
	CHECK_U64(ids[1], UINT32_MAX);
	CHECK(ids[2] != UINT32_MAX && ids[3] != UINT32_MAX);
	CHECK_EQ(iod_sched_node_shape(cl, ids[2])->gpus_n, 4);
	CHECK_EQ(iod_sched_node_shape(cl, ids[3])->gpus_n, 8);
	CHECK_EQ(json_array_size(skipped), 2);
	const char *why = NULL;
	CHECK_EQ(iod_json_get_str(json_array_get(skipped, 0), "reason", &why), 0);
	CHECK_CONTAINS(why, "registered topology is invalid");
	CHECK_EQ(iod_json_get_str(json_array_get(skipped, 1), "reason", &why), 0);
	CHECK_CONTAINS(why, "frobnicator-9000");
	iod_sched_cluster_free(cl);
	json_decref(nodes);
	json_decref(skipped);
}

/* A lost node's replica moves to a node registered from an hwloc XML. */
TEST(reschedule_moves_onto_xml_node)
{
	struct iod_topo_node *xml = calloc(1, sizeof(*xml));
	CHECK(xml);
	CHECK_EQ(load("examples/topologies/pcie-8gpu.xml", xml), 0);
	json_t *v = json_pack("{s:s, s:o}", "model", "xml", "topology", iod_topo_to_json(xml));
	json_t *nodes = json_pack("{s:[{s:s, s:o}]}", "items", "name", "gpu-box", "value", v);
	json_t *reps = json_loads("{\"items\":[{\"name\":\"trainer-0\",\"rev\":3,\"value\":"
	                          "{\"service\":\"trainer\",\"ordinal\":0,\"node\":\"gone\","
	                          "\"gpus\":\"0,1\",\"phase\":\"healthy\"}}]}",
	                          0, NULL);
	json_t *svcs = json_loads("{\"items\":[{\"name\":\"trainer\",\"value\":{\"name\":"
	                          "\"trainer\",\"type\":\"stateless\",\"replicas\":1,"
	                          "\"command\":\"sleep 1\",\"resources\":{\"gpu\":2}}}]}",
	                          0, NULL);
	json_t *unplaced = NULL;
	CHECK(nodes && reps && svcs);
	json_t *w = iod_ctrl_resched_plan(nodes, reps, svcs, 1000, 0, &unplaced);
	CHECK_MSG(json_array_size(w) == 1 && json_array_size(unplaced) == 0,
	          "writes %s unplaced %s", json_dumps(w, 0), json_dumps(unplaced, 0));
	const char *to = NULL, *gpus = NULL;
	const json_t *nv = json_object_get(json_array_get(w, 0), "value");
	CHECK_EQ(iod_json_get_str(nv, "node", &to), 0);
	CHECK_STR(to, "gpu-box");
	CHECK_EQ(iod_json_get_str(nv, "gpus", &gpus), 0);
	CHECK_EQ(__builtin_popcount(iod_sched_mask_parse(gpus)), 2);
	json_decref(w);
	json_decref(unplaced);
	json_decref(nodes);
	json_decref(reps);
	json_decref(svcs);
	free(xml);
}

/* /v1/deploy refuses, with the limit named, what no agent could run: here a
 * peer list that fits for IPv4 node addresses but not for the registered
 * node's long name; nothing is planned. */
TEST(deploy_refuses_what_no_agent_can_run)
{
	struct iod_topo_node *xml = calloc(1, sizeof(*xml));
	struct iod_state *s = NULL;
	struct iod_state_result r;
	struct iod_err e = {0};
	json_t *answer = NULL;
	char *cmd = NULL;
	CHECK(xml);
	CHECK_EQ(load("examples/topologies/pcie-8gpu.xml", xml), 0);
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(put_node(s, "gpu-box", "xml", xml), 0);
	const char *spec = "services:\n  - name: web\n    type: stateless\n    replicas: 1200\n"
	                   "    command: sleep 100\n";
	CHECK_EQ(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e), 0);
	free(cmd);
	json_decref(answer);
	cmd = NULL;
	answer = NULL;
	/* the same node registered with a long address: 1200 peers no longer fit */
	json_t *v =
	    json_pack("{s:s, s:i}", "addr", "gpu-box-17.rack-42.example.internal", "gpus", 8);
	json_object_set_new(v, "topology", iod_topo_to_json(xml));
	char *put = iod_state_cmd_put(IOD_STATE_NODE, "gpu-box", v, 0, -1);
	CHECK_EQ(iod_state_apply(s, put, strlen(put), &r), 0);
	free(put);
	json_decref(v);
	CHECK_EQ(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e), -EINVAL);
	CHECK(cmd == NULL);
	CHECK_CONTAINS(e.msg, "IOD_AGENT_ENV_BYTES_MAX");
	CHECK_CONTAINS(e.msg, "service \"web\"");
	json_decref(answer);
	iod_state_free(s);
	free(xml);
}

/* The seam for the API's roles: a service asking for root, capabilities or
 * no seccomp filter needs a caller who may grant it (the admin role). */
TEST(privileged_services_need_a_caller_who_may_grant_them)
{
	struct iod_spec *sp = NULL;
	struct iod_spec_diags d;
	struct iod_err e = {0};
	const char *plain = "services:\n  - name: w\n    type: stateless\n    command: true\n";
	const char *root = "services:\n  - name: w\n    type: stateless\n    command: true\n"
	                   "  - name: boss\n    type: stateless\n    command: true\n"
	                   "    sandbox: {user: root, capabilities: [NET_ADMIN]}\n";
	CHECK_EQ(iod_spec_load_buffer("t", plain, strlen(plain), &sp, &d), 0);
	CHECK_EQ(iod_api_spec_privileges(sp, false, &e), 0);
	iod_spec_free(sp);
	CHECK_EQ(iod_spec_load_buffer("t", root, strlen(root), &sp, &d), 0);
	CHECK_EQ(iod_api_spec_privileges(sp, true, &e), 0);
	CHECK_EQ(iod_api_spec_privileges(sp, false, &e), -EACCES);
	CHECK_CONTAINS(e.msg, "service \"boss\" runs as root, keeps capabilities NET_ADMIN");
	CHECK_CONTAINS(e.msg, "admin role");
	iod_spec_free(sp);
}

/* The deploy plan itself, on a state built in memory: the command it
 * builds (services with their generation and GPU count, replicas with node,
 * GPUs, phase, generation, reasons and explanation), the answer (complete,
 * placements, unplaced with the scheduler's reason, skipped nodes), a
 * redeploy raising the generation, and GPUs another service holds left
 * alone. */
TEST(deploy_plan_command_and_answer)
{
	struct iod_state *s;
	struct iod_state_result r;
	struct iod_err e = {0};
	struct iod_obj_replica *rep = malloc(sizeof(*rep));
	char *cmd = NULL;
	json_t *answer = NULL;
	CHECK_EQ(iod_state_new(&s), 0);
	/* one 8-GPU node by model, one node nothing describes */
	json_t *v =
	    json_pack("{s:s, s:i, s:s}", "model", "dgx-h100", "gpus", 8, "addr", "10.0.0.1");
	char *put = iod_state_cmd_put(IOD_STATE_NODE, "dgx", v, 0, -1);
	CHECK_EQ(iod_state_apply(s, put, strlen(put), &r), 0);
	free(put);
	json_decref(v);
	v = json_pack("{s:s}", "model", "no-such-model");
	put = iod_state_cmd_put(IOD_STATE_NODE, "odd", v, 0, -1);
	CHECK_EQ(iod_state_apply(s, put, strlen(put), &r), 0);
	free(put);
	json_decref(v);

	const char *spec = "services:\n  - name: a\n    type: stateless\n    replicas: 3\n"
	                   "    tenant: blue\n"
	                   "    command: sleep 100\n    resources: {gpu: 2}\n";
	CHECK_MSG(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e) == 0, "%s", e.msg);
	CHECK(json_is_true(json_object_get(answer, "complete")));
	CHECK_EQ(json_array_size(json_object_get(answer, "placements")), 3);
	CHECK_EQ(json_array_size(json_object_get(answer, "skipped_nodes")), 1);
	CHECK_STR(json_string_value(json_object_get(
	              json_array_get(json_object_get(answer, "skipped_nodes"), 0), "node")),
	          "odd");
	json_t *c = json_loads(cmd, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(c, "op")), "deploy");
	json_t *svc = json_object_get(json_array_get(json_object_get(c, "services"), 0), "value");
	CHECK_EQ(json_integer_value(json_object_get(svc, "generation")), 1);
	CHECK_EQ(json_integer_value(json_object_get(svc, "gpu")), 2);
	json_t *reps = json_object_get(c, "replicas");
	CHECK_EQ(json_array_size(reps), 3);
	uint32_t held = 0;
	for (size_t i = 0; i < json_array_size(reps); i++) {
		CHECK_EQ(iod_obj_replica_from_json(
		             json_object_get(json_array_get(reps, i), "value"), rep, &e),
		         0);
		CHECK_STR(rep->service, "a");
		CHECK_EQ(rep->ordinal, (uint32_t)i);
		CHECK_STR(rep->node, "dgx");
		CHECK_STR(rep->phase, "pending");
		CHECK_STR(rep->tenant, "blue"); /* a Replica carries its service's tenant */
		CHECK_U64(rep->generation, 1);
		CHECK_EQ(__builtin_popcount(iod_sched_mask_parse(rep->gpus)), 2);
		CHECK_EQ(held & iod_sched_mask_parse(rep->gpus), 0); /* no GPU given twice */
		held |= iod_sched_mask_parse(rep->gpus);
		CHECK_EQ(json_array_size(rep->reasons), 1);
		CHECK(rep->explain != NULL);
		CHECK_EQ(rep->head.version, IOD_OBJ_VERSION);
		iod_obj_replica_free(rep);
	}
	CHECK_EQ(iod_state_apply(s, cmd, strlen(cmd), &r), 0);
	json_decref(c);
	free(cmd);
	json_decref(answer);

	/* another service: the 6 GPUs service a holds are not offered again,
	 * so of 2 replicas x 2 GPUs one fits (2 GPUs left) */
	const char *spec_b = "services:\n  - name: b\n    type: stateless\n    replicas: 2\n"
	                     "    command: sleep 100\n    resources: {gpu: 2}\n";
	CHECK_EQ(iod_ctrl_deploy_plan(s, spec_b, strlen(spec_b), &cmd, &answer, &e), 0);
	CHECK(json_is_false(json_object_get(answer, "complete")));
	CHECK_EQ(json_array_size(json_object_get(answer, "placements")), 1);
	json_t *un = json_array_get(json_object_get(answer, "unplaced"), 0);
	CHECK_STR(json_string_value(json_object_get(un, "replica")), "b-1");
	CHECK(json_string_value(json_object_get(un, "reason")) != NULL);
	c = json_loads(cmd, 0, NULL);
	CHECK_EQ(iod_obj_replica_from_json(
	             json_object_get(json_array_get(json_object_get(c, "replicas"), 0), "value"),
	             rep, &e),
	         0);
	CHECK_EQ(held & iod_sched_mask_parse(rep->gpus), 0);
	iod_obj_replica_free(rep);
	json_decref(c);
	free(cmd);
	json_decref(answer);

	/* redeploying a raises its generation */
	CHECK_EQ(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e), 0);
	c = json_loads(cmd, 0, NULL);
	svc = json_object_get(json_array_get(json_object_get(c, "services"), 0), "value");
	CHECK_EQ(json_integer_value(json_object_get(svc, "generation")), 2);
	json_decref(c);
	free(cmd);
	json_decref(answer);

	/* a spec with errors: every error in the answer, no command */
	CHECK_EQ(iod_ctrl_deploy_plan(s, "services: [{name: 1}]", 21, &cmd, &answer, &e), -EINVAL);
	CHECK(cmd == NULL);
	CHECK(json_integer_value(json_object_get(answer, "error_count")) >= 1);
	json_decref(answer);
	iod_state_free(s);
	free(rep);
}

/*
 * Issue 15: a deploy is planned off the loop from a view of the state. The
 * plan from a view is the plan from the state it was taken of, even after
 * the state has changed (the GPUs another deploy took since are not seen:
 * the API server plans one deploy at a time, after the previous write);
 * over IOD_DEPLOY_REPLICAS_MAX replicas is -E2BIG naming it, before any
 * planning.
 */
TEST(deploy_copies_storage_into_stateful_services)
{
	struct iod_state *s;
	struct iod_state_result r;
	struct iod_err e = {0};
	char *cmd = NULL;
	json_t *answer = NULL, *c = NULL;
	CHECK_EQ(iod_state_new(&s), 0);
	json_t *v = json_pack("{s:i, s:s}", "gpus", 1, "addr", "10.0.0.1");
	char *put = iod_state_cmd_put(IOD_STATE_NODE, "n1", v, 0, -1);
	CHECK_EQ(iod_state_apply(s, put, strlen(put), &r), 0);
	free(put);
	json_decref(v);
	const char *spec = "storage:\n  replicas: 1\n  tiers:\n    - {medium: PMem, quota: 20%}\n"
	                   "    - {medium: NVMe, quota: 80%}\n"
	                   "services:\n  - {name: ps, type: stateful, command: sleep 100}\n"
	                   "  - {name: w, type: stateless, command: sleep 100}\n";
	CHECK_MSG(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e) == 0, "%s", e.msg);
	CHECK(cmd && !iod_json_parse(cmd, strlen(cmd), &c, NULL));
	const json_t *svcs = json_object_get(c, "services");
	CHECK_EQ(json_array_size(svcs), 2);
	const json_t *ps = json_object_get(json_array_get(svcs, 0), "value");
	const json_t *w = json_object_get(json_array_get(svcs, 1), "value");
	const json_t *st = json_object_get(ps, "storage");
	CHECK(st && json_array_size(json_object_get(st, "tiers")) == 2);
	CHECK(!json_object_get(w, "storage")); /* stateless: no store */
	/* the stored value validates, storage: included, as the agents read it */
	struct iod_spec *sp = NULL;
	struct iod_spec_diags *d = calloc(1, sizeof(*d));
	CHECK_MSG(iod_spec_load_service("ps", ps, &sp, d) == 0, "%s", d->n ? d->d[0].msg : "?");
	CHECK(sp && sp->tiers_n == 2 && sp->tiers[0].quota_bp == 2000);
	iod_spec_free(sp);
	/* and a bad one does not */
	json_t *bad = json_deep_copy(ps);
	json_object_set_new(json_object_get(bad, "storage"), "replicas", json_integer(0));
	CHECK_EQ(iod_spec_load_service("ps", bad, &sp, d), -EINVAL);
	CHECK_CONTAINS(d->d[0].msg, "storage.replicas");
	json_decref(bad);
	free(d);
	json_decref(c);
	json_decref(answer);
	free(cmd);
	iod_state_free(s);
}

TEST(deploy_plan_from_a_view_and_its_limit)
{
	struct iod_topo_node *xml = calloc(1, sizeof(*xml));
	struct iod_state *s = NULL;
	struct iod_state_result r;
	struct iod_err e = {0};
	struct iod_ctrl_view v;
	json_t *answer = NULL, *answer2 = NULL;
	char *cmd = NULL, *cmd2 = NULL;
	const char *gpu8 = "services:\n  - name: big\n    type: stateless\n"
	                   "    resources: {gpu: 8}\n    replicas: 1\n";

	CHECK(xml);
	CHECK_EQ(load("examples/topologies/pcie-8gpu.xml", xml), 0);
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(put_node(s, "gpu-box", "xml", xml), 0);
	CHECK_EQ(iod_ctrl_view_take(s, &v), 0);
	CHECK_EQ(iod_ctrl_deploy_plan(s, gpu8, strlen(gpu8), &cmd, &answer, &e), 0);
	CHECK(cmd != NULL);
	CHECK_EQ(iod_state_apply(s, cmd, strlen(cmd), &r), 0); /* the 8 GPUs are taken */
	free(cmd);
	json_decref(answer);
	const char *other = "services:\n  - name: other\n    type: stateless\n"
	                    "    resources: {gpu: 8}\n    replicas: 1\n";
	CHECK_EQ(iod_ctrl_deploy_plan(s, other, strlen(other), &cmd, &answer, &e), 0);
	CHECK_EQ(placed_on(answer, "gpu-box"), 0); /* no GPU left now */
	CHECK_EQ(iod_ctrl_deploy_plan_view(&v, other, strlen(other), &cmd2, &answer2, &e), 0);
	CHECK_EQ(placed_on(answer2, "gpu-box"), 1); /* the view: before the first deploy */
	free(cmd);
	free(cmd2);
	json_decref(answer);
	json_decref(answer2);
	iod_ctrl_view_free(&v);
	/* one replica over the limit, over two services */
	char spec[512];
	snprintf(spec, sizeof(spec),
	         "services:\n  - name: a\n    type: stateless\n    replicas: %d\n"
	         "  - name: b\n    type: stateless\n    replicas: %d\n",
	         IOD_DEPLOY_REPLICAS_MAX / 2,
	         IOD_DEPLOY_REPLICAS_MAX - IOD_DEPLOY_REPLICAS_MAX / 2 + 1);
	answer = NULL;
	CHECK_EQ(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e), -E2BIG);
	CHECK(cmd == NULL);
	CHECK_CONTAINS(e.msg, "IOD_DEPLOY_REPLICAS_MAX");
	json_decref(answer);
	iod_state_free(s);
	free(xml);
}

/* resources.network.bandwidth: the value the scheduler counts on the NIC
 * (bits/s) is written on each Replica as nic_bw_bps, which its node's
 * virtual switch meters (docs/network.md): one value, one unit. */
TEST(deploy_plan_replica_carries_the_nic_bandwidth)
{
	struct iod_state *s;
	struct iod_state_result r;
	struct iod_err e = {0};
	struct iod_obj_replica *rep = malloc(sizeof(*rep));
	char *cmd = NULL;
	json_t *answer = NULL;
	CHECK(rep);
	CHECK_EQ(iod_state_new(&s), 0);
	json_t *v = json_pack("{s:s, s:i}", "model", "dgx-h100", "gpus", 8);
	char *put = iod_state_cmd_put(IOD_STATE_NODE, "dgx", v, 0, -1);
	CHECK_EQ(iod_state_apply(s, put, strlen(put), &r), 0);
	free(put);
	json_decref(v);
	const char *spec = "services:\n  - name: a\n    type: stateless\n    replicas: 2\n"
	                   "    command: sleep 100\n"
	                   "    resources: {network: {bandwidth: 100Mbps}}\n"
	                   "  - name: b\n    type: stateless\n    replicas: 1\n"
	                   "    command: sleep 100\n";
	CHECK_MSG(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e) == 0, "%s", e.msg);
	json_t *c = json_loads(cmd, 0, NULL), *reps = json_object_get(c, "replicas");
	CHECK_EQ(json_array_size(reps), 3);
	for (size_t i = 0; i < json_array_size(reps); i++) {
		CHECK_EQ(iod_obj_replica_from_json(
		             json_object_get(json_array_get(reps, i), "value"), rep, &e),
		         0);
		if (!strcmp(rep->service, "a")) {
			CHECK_U64(rep->nic_bw_bps, 100000000);
			CHECK(rep->nic >= 0); /* counted on a NIC of the node */
		} else {
			CHECK_U64(rep->nic_bw_bps, 0);
			CHECK(!iod_obj_has(rep, IOD_OBJ_REPLICA_NIC_BW_BPS));
		}
		iod_obj_replica_free(rep);
	}
	json_decref(c);
	free(cmd);
	json_decref(answer);
	iod_state_free(s);
	free(rep);
}

/* The spec's security_groups: go into the deploy command as NetPolicy
 * objects (each the spec group's value: service, tenant, rules), which the
 * state puts with the services; a redeploy without them leaves them (a
 * group goes with `iod policy delete`), and a malformed one rejects the
 * whole deploy. */
TEST(deploy_writes_security_groups)
{
	struct iod_state *s;
	struct iod_state_result r;
	struct iod_err e = {0};
	char *cmd = NULL;
	json_t *answer = NULL;
	CHECK_EQ(iod_state_new(&s), 0);
	json_t *v =
	    json_pack("{s:s, s:i, s:s}", "model", "dgx-h100", "gpus", 8, "addr", "10.0.0.1");
	char *put = iod_state_cmd_put(IOD_STATE_NODE, "dgx", v, 0, -1);
	CHECK_EQ(iod_state_apply(s, put, strlen(put), &r), 0);
	free(put);
	json_decref(v);
	const char *spec =
	    "services:\n  - {name: a, type: stateless, command: sleep 1, tenant: blue}\n"
	    "  - {name: b, type: stateless, command: sleep 1, tenant: blue}\n"
	    "security_groups:\n"
	    "  - name: a-in\n    service: a\n    ingress:\n"
	    "      - {name: from-b, service: b, protocol: tcp, ports: 80}\n";
	CHECK_MSG(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e) == 0, "%s", e.msg);
	json_t *c = json_loads(cmd, 0, NULL);
	json_t *nps = json_object_get(c, "netpolicies");
	CHECK_EQ(json_array_size(nps), 1);
	CHECK_STR(json_string_value(json_object_get(json_array_get(nps, 0), "name")), "a-in");
	CHECK_EQ(iod_state_apply(s, cmd, strlen(cmd), &r), 0);
	const json_t *np = iod_state_value(s, IOD_STATE_NETPOLICY, "a-in");
	CHECK(np != NULL);
	CHECK_STR(iod_obj_peek_str(IOD_OBJ_KIND_NETPOLICY, np, IOD_OBJ_NETPOLICY_SERVICE), "a");
	CHECK_STR(iod_obj_peek_str(IOD_OBJ_KIND_NETPOLICY, np, IOD_OBJ_NETPOLICY_TENANT), "blue");
	struct iod_obj_netpolicy p;
	CHECK_EQ(iod_obj_netpolicy_from_json(np, &p, &e), 0);
	CHECK_MSG(iod_obj_netpolicy_check(&p, &e) == 0, "%s", e.msg);
	iod_obj_netpolicy_free(&p);
	json_decref(c);
	free(cmd);
	json_decref(answer);
	/* redeploy without the group: it stays */
	const char *respec =
	    "services:\n  - {name: a, type: stateless, command: sleep 1, tenant: blue}\n";
	CHECK_EQ(iod_ctrl_deploy_plan(s, respec, strlen(respec), &cmd, &answer, &e), 0);
	CHECK(!strstr(cmd, "netpolicies"));
	CHECK_EQ(iod_state_apply(s, cmd, strlen(cmd), &r), 0);
	CHECK(iod_state_value(s, IOD_STATE_NETPOLICY, "a-in") != NULL);
	free(cmd);
	json_decref(answer);
	const char *bad = "{\"op\":\"deploy\",\"services\":[{\"name\":\"x\",\"value\":{}}],"
	                  "\"replicas\":[],\"netpolicies\":[{\"name\":\"g\"}]}";
	CHECK_EQ(iod_state_apply(s, bad, strlen(bad), &r), -EINVAL);
	CHECK(iod_state_value(s, IOD_STATE_SERVICE, "x") == NULL);
	iod_state_free(s);
}
