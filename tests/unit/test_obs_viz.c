/*
 * test_obs_viz.c: the cluster graph of `iod viz` (src/obs/viz.c): one graph
 * node per cluster node, GPU and replica; NVLink pairs once; placements on
 * GPUs; dependencies; statuses; rack grouping; DOT quoting.
 */
#include "harness.h"
#include "iod/obs.h"

#include <stdlib.h>

static const char *nodes_json =
    "{\"items\": ["
    " {\"name\": \"n1\", \"lease\": 1, \"value\": {\"topology\": {\"devices\": ["
    "   {\"kind\": \"gpu\", \"name\": \"GPU0\", \"gpu_index\": 0, \"links\": {\"GPU1\": "
    "     {\"class\": \"NV12\", \"nvlinks\": 12}, \"NIC0\": {\"class\": \"PIX\", \"nvlinks\": 0}}},"
    "   {\"kind\": \"gpu\", \"name\": \"GPU1\", \"gpu_index\": 1, \"links\": {\"GPU0\": "
    "     {\"class\": \"NV12\", \"nvlinks\": 12}}},"
    "   {\"kind\": \"nic\", \"name\": \"NIC0\"}, {\"kind\": \"bridge\", \"name\": \"B0\"}]}}},"
    " {\"name\": \"n\\\"2\", \"lease\": 0, \"value\": {}}]}";
static const char *services_json =
    "{\"items\": [{\"name\": \"ps\", \"value\": {\"replicas\": 1}},"
    " {\"name\": \"w\", \"value\": {\"replicas\": 1, \"depends_on\": [\"ps\"]}}]}";
static const char *replicas_json =
    "{\"items\": ["
    " {\"name\": \"ps-0\", \"value\": {\"service\": \"ps\", \"node\": \"n1\", \"gpus\": \"0-1\","
    "  \"phase\": \"healthy\"}},"
    " {\"name\": \"w-0\", \"value\": {\"service\": \"w\", \"node\": \"n1\", \"gpus\": \"\","
    "  \"phase\": \"failed\"}}]}";

static const json_t *find(const json_t *arr, const char *key, const char *val)
{
	size_t i;
	const json_t *x;
	json_array_foreach(arr, i, x)
	{
		if (json_is_string(json_object_get(x, key)) &&
		    !strcmp(json_string_value(json_object_get(x, key)), val))
			return x;
	}
	return NULL;
}

static size_t count(const json_t *arr, const char *key, const char *val)
{
	size_t i, n = 0;
	const json_t *x;
	json_array_foreach(arr, i, x)
	{
		n += json_is_string(json_object_get(x, key)) &&
		     !strcmp(json_string_value(json_object_get(x, key)), val);
	}
	return n;
}

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

TEST(viz_graph_of_a_small_cluster)
{
	json_t *n = json_loads(nodes_json, 0, NULL), *s = json_loads(services_json, 0, NULL),
	       *r = json_loads(replicas_json, 0, NULL);
	CHECK(n && s && r);
	struct iod_viz_input in = {.nodes = n, .services = s, .replicas = r};
	json_t *g = iod_viz_graph(&in);
	CHECK(g);
	const json_t *gn = json_object_get(g, "nodes"), *ge = json_object_get(g, "edges");
	CHECK_EQ(count(gn, "kind", "node"), 2);
	CHECK_EQ(count(gn, "kind", "gpu"), 2);
	CHECK_EQ(count(gn, "kind", "nic"), 1); /* a bridge is not drawn */
	CHECK_EQ(count(gn, "kind", "replica"), 2);
	CHECK_EQ(count(ge, "kind", "nvlink"), 1); /* the pair once, not from both ends */
	CHECK(!strcmp(str(find(ge, "kind", "nvlink"), "label"), "NV12"));
	CHECK_EQ(count(ge, "kind", "depends"), 1);
	CHECK(!strcmp(str(find(ge, "kind", "depends"), "to"), "svc:ps"));
	/* ps-0 sits on both GPUs; w-0 (no GPUs) on its node */
	CHECK_EQ(count(ge, "from", "replica:ps-0"), 2);
	CHECK(!strcmp(str(find(ge, "from", "replica:w-0"), "to"), "node:n1"));
	CHECK(!strcmp(str(find(gn, "id", "replica:w-0"), "status"), "bad"));
	CHECK(!strcmp(str(find(gn, "id", "svc:w"), "status"), "bad"));
	CHECK(!strcmp(str(find(gn, "id", "svc:ps"), "status"), "ok"));
	CHECK(!strcmp(str(find(gn, "id", "node:n\"2"), "status"), "bad")); /* lease gone */
	CHECK(!strcmp(str(find(gn, "id", "node:n1/GPU0"), "parent"), "node:n1"));

	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_viz_dot(g, &b), 0);
	CHECK(strstr(b.data, "graph iod {"));
	CHECK(strstr(b.data, "\"node:n\\\"2\"")); /* the quote escaped */
	CHECK(strstr(b.data, "\"svc:w\" -- \"svc:ps\""));
	CHECK(strstr(b.data, "style=dashed")); /* placements */
	iod_buf_free(&b);
	json_decref(g);
	json_decref(n);
	json_decref(s);
	json_decref(r);
}

TEST(viz_groups_a_large_cluster_into_racks)
{
	json_t *items = json_array();
	for (int i = 0; i < 100; i++) {
		char name[16];
		snprintf(name, sizeof(name), "n%03d", i);
		json_array_append_new(
		    items, json_pack("{s:s, s:i, s:{}}", "name", name, "lease", 1, "value"));
	}
	json_t *nodes = json_pack("{s:o}", "items", items);
	struct iod_viz_input in = {.nodes = nodes, .group_over = 64};
	json_t *g = iod_viz_graph(&in);
	const json_t *gn = json_object_get(g, "nodes");
	CHECK_EQ(count(gn, "kind", "rack"), (100 + IOD_VIZ_RACK_NODES - 1) / IOD_VIZ_RACK_NODES);
	CHECK_EQ(count(gn, "kind", "node"), 100);
	CHECK(json_is_true(json_object_get(json_object_get(g, "counts"), "grouped")));
	/* a derived leaf per rack, inside it, on the one spine */
	CHECK_EQ(count(json_object_get(g, "edges"), "kind", "fabric"), 4);
	CHECK_EQ(count(gn, "parent", "rack:0"), IOD_VIZ_RACK_NODES + 1);
	CHECK(!strcmp(str(find(gn, "id", "switch:leaf-0"), "parent"), "rack:0"));
	CHECK(find(gn, "id", "switch:spine"));
	CHECK_EQ(count(json_object_get(g, "edges"), "kind", "net"), 100);
	json_decref(g);
	in.group_over = 0;
	g = iod_viz_graph(&in);
	CHECK_EQ(count(json_object_get(g, "nodes"), "kind", "rack"), 0);
	json_decref(g);
	json_decref(nodes);
}

TEST(viz_empty_answers)
{
	struct iod_viz_input in = {0};
	json_t *g = iod_viz_graph(&in);
	CHECK(g);
	CHECK_EQ(json_array_size(json_object_get(g, "nodes")), 0); /* not even a switch */
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_viz_dot(g, &b), 0);
	iod_buf_free(&b);
	json_decref(g);
}
