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
	CHECK_EQ(iod_api_deploy_plan(s, spec2, strlen(spec2), &cmd, &answer, &e), 0);
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
	json_t *w = iod_agent_resched_plan(nodes, reps, svcs, 1000, 0, &unplaced);
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
