/*
 * test_obs_viz_live.c: what the live view of `iod viz net-topology --live`
 * keeps between refreshes (src/obs/viz.c): the model a list and the watch
 * keep current, graph deltas (applied to the old graph they give the new
 * one), the memo of unchanged parts, and the derived fabric (a leaf per
 * rack, a spine per zone, a core above several spines).
 */
#include "harness.h"
#include "iod/obs.h"

#include <math.h>
#include <stdlib.h>

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static const json_t *by_id(const json_t *arr, const char *id)
{
	size_t i;
	const json_t *x;
	json_array_foreach(arr, i, x)
	{
		if (!strcmp(str(x, "id"), id))
			return x;
	}
	return NULL;
}

/* n nodes of 2 GPUs (NVLink) and a NIC, racks "r0".."r2" in zone a or b. */
static json_t *cluster_nodes(int n)
{
	json_t *items = json_array();
	for (int i = 0; i < n; i++) {
		char name[16], rack[8];
		snprintf(name, sizeof(name), "n%02d", i);
		snprintf(rack, sizeof(rack), "r%d", i % 3);
		json_array_append_new(
		    items,
		    json_pack(
		        "{s:s, s:s, s:i, s:i, s:{s:s, s:s, s:{s:[{s:s, s:s, s:i, s:{s:{s:i}}},"
		        " {s:s, s:s, s:i}, {s:s, s:s}]}}}",
		        "kind", "node", "name", name, "rev", 1, "lease", 7, "value", "rack", rack,
		        "zone", i % 3 == 2 ? "b" : "a", "topology", "devices", "kind", "gpu",
		        "name", "GPU0", "gpu_index", 0, "links", "GPU1", "nvlinks", 12, "kind",
		        "gpu", "name", "GPU1", "gpu_index", 1, "kind", "nic", "name", "NIC0"));
	}
	return json_pack("{s:i, s:o}", "rev", 5, "items", items);
}

static json_t *cluster_replicas(void)
{
	return json_loads("{\"rev\": 5, \"items\": ["
	                  " {\"kind\": \"replica\", \"name\": \"a-0\", \"rev\": 3, \"value\": "
	                  "  {\"service\": \"a\", \"node\": \"n00\", \"gpus\": \"0\", \"phase\": "
	                  "\"healthy\"}},"
	                  " {\"kind\": \"replica\", \"name\": \"a-1\", \"rev\": 4, \"value\": "
	                  "  {\"service\": \"a\", \"node\": \"n01\", \"gpus\": \"1\", \"phase\": "
	                  "\"healthy\"}}]}",
	                  0, NULL);
}

static json_t *graph_of(const json_t *model, json_t *memo)
{
	json_t *n = iod_viz_model_list(model, "node"), *s = iod_viz_model_list(model, "service"),
	       *r = iod_viz_model_list(model, "replica"),
	       *e = iod_viz_model_list(model, "endpoint");
	struct iod_viz_input in = {
	    .nodes = n, .services = s, .replicas = r, .endpoints = e, .memo = memo};
	json_t *g = iod_viz_graph(&in);
	json_decref(n);
	json_decref(s);
	json_decref(r);
	json_decref(e);
	return g;
}

/* old with delta d applied, the way app.js applies it: remove, add, change. */
static json_t *apply(const json_t *old, const json_t *d)
{
	json_t *g = json_object();
	for (int k = 0; k < 2; k++) {
		const char *list = k ? "edges" : "nodes";
		const json_t *dl = json_object_get(d, list);
		json_t *out = json_array(), *ix = json_object();
		size_t i;
		const json_t *x;
		json_array_foreach(json_object_get(dl, "remove"), i, x)
		{
			json_object_set_new(ix, json_string_value(x), json_true());
		}
		json_array_foreach(json_object_get(old, list), i, x)
		{
			if (json_object_get(ix, str(x, "id")))
				continue;
			const json_t *c = by_id(json_object_get(dl, "change"), str(x, "id"));
			json_array_append(out, (json_t *)(c ? c : x));
		}
		json_array_foreach(json_object_get(dl, "add"), i, x)
		{
			json_array_append(out, (json_t *)x);
		}
		json_object_set_new(g, list, out);
		json_decref(ix);
	}
	return g;
}

/* The same set of ids with equal values (order aside). */
static bool same_lists(const json_t *a, const json_t *b)
{
	if (json_array_size(a) != json_array_size(b))
		return false;
	size_t i;
	const json_t *x;
	json_array_foreach(a, i, x)
	{
		if (!json_equal(x, by_id(b, str(x, "id"))))
			return false;
	}
	return true;
}

TEST(viz_model_follows_the_watch)
{
	json_t *m = iod_viz_model_new(), *nodes = cluster_nodes(3), *reps = cluster_replicas();
	CHECK(m);
	CHECK_EQ(iod_viz_model_load(m, "node", nodes), 0);
	CHECK_EQ(iod_viz_model_load(m, "replica", reps), 0);
	CHECK_EQ(iod_viz_model_load(m, "nosuch", reps), -EINVAL);
	json_t *ev = json_loads("{\"rev\": 6, \"type\": \"put\", \"kind\": \"replica\", \"name\": "
	                        "\"a-1\", \"value\": {\"service\": \"a\", \"node\": \"n01\", "
	                        "\"gpus\": \"1\", \"phase\": \"failed\"}}",
	                        0, NULL);
	CHECK_EQ(iod_viz_model_apply(m, ev), 1);
	json_decref(ev);
	/* kinds the graph does not draw, deletes of nothing and bad events */
	ev = json_loads("{\"rev\": 7, \"type\": \"put\", \"kind\": \"policy\", \"name\": \"p\", "
	                "\"value\": {}}",
	                0, NULL);
	CHECK_EQ(iod_viz_model_apply(m, ev), 0);
	json_decref(ev);
	ev = json_loads(
	    "{\"rev\": 8, \"type\": \"delete\", \"kind\": \"replica\", \"name\": \"zz\"}", 0, NULL);
	CHECK_EQ(iod_viz_model_apply(m, ev), 0);
	json_decref(ev);
	ev = json_loads("{\"rev\": 8, \"type\": \"put\", \"kind\": \"replica\", \"name\": \"b\"}",
	                0, NULL);
	CHECK_EQ(iod_viz_model_apply(m, ev), -EINVAL); /* a put without a value */
	json_decref(ev);
	/* a node the watch changes keeps its lease; one it adds has none yet */
	ev = json_loads("{\"rev\": 9, \"type\": \"put\", \"kind\": \"node\", \"name\": \"n01\", "
	                "\"value\": {\"rack\": \"r1\"}}",
	                0, NULL);
	CHECK_EQ(iod_viz_model_apply(m, ev), 1);
	json_decref(ev);
	CHECK(!iod_viz_model_unleased(m, "node", "n01"));
	ev = json_loads("{\"rev\": 10, \"type\": \"put\", \"kind\": \"node\", \"name\": \"n00a\", "
	                "\"value\": {}}",
	                0, NULL);
	CHECK_EQ(iod_viz_model_apply(m, ev), 1);
	json_decref(ev);
	CHECK(iod_viz_model_unleased(m, "node", "n00a"));
	ev = json_loads(
	    "{\"rev\": 11, \"type\": \"delete\", \"kind\": \"node\", \"name\": \"n02\"}", 0, NULL);
	CHECK_EQ(iod_viz_model_apply(m, ev), 1);
	json_decref(ev);
	/* listed by name, as the API lists */
	json_t *l = iod_viz_model_list(m, "node");
	const json_t *it = json_object_get(l, "items");
	CHECK_EQ(json_array_size(it), 3);
	CHECK(!strcmp(str(json_array_get(it, 0), "name"), "n00"));
	CHECK(!strcmp(str(json_array_get(it, 1), "name"), "n00a"));
	CHECK(!strcmp(str(json_array_get(it, 2), "name"), "n01"));
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(it, 2), "lease")), 7);
	json_decref(l);
	l = iod_viz_model_list(m, "replica");
	CHECK(!strcmp(
	    str(json_object_get(json_array_get(json_object_get(l, "items"), 1), "value"), "phase"),
	    "failed"));
	json_decref(l);
	json_decref(m);
	json_decref(nodes);
	json_decref(reps);
}

TEST(viz_delta_applied_gives_the_new_graph)
{
	json_t *m = iod_viz_model_new(), *nodes = cluster_nodes(4), *reps = cluster_replicas();
	json_t *memo = json_object();
	iod_viz_model_load(m, "node", nodes);
	iod_viz_model_load(m, "replica", reps);
	json_t *g0 = graph_of(m, memo), *d = NULL;
	CHECK(g0);
	/* nothing changed: no delta */
	json_t *g1 = graph_of(m, memo);
	CHECK_EQ(iod_viz_graph_delta(g0, g1, &d), 0);
	CHECK(d == NULL);
	json_decref(g1);
	/* one replica fails: the replica, its placement, its service change */
	json_t *ev = json_loads("{\"rev\": 6, \"type\": \"put\", \"kind\": \"replica\", \"name\": "
	                        "\"a-1\", \"value\": {\"service\": \"a\", \"node\": \"n01\", "
	                        "\"gpus\": \"1\", \"phase\": \"failed\"}}",
	                        0, NULL);
	iod_viz_model_apply(m, ev);
	json_decref(ev);
	g1 = graph_of(m, memo);
	CHECK_EQ(iod_viz_graph_delta(g0, g1, &d), 1);
	const json_t *dn = json_object_get(d, "nodes"), *de = json_object_get(d, "edges");
	CHECK_EQ(json_array_size(json_object_get(dn, "add")), 0);
	CHECK_EQ(json_array_size(json_object_get(dn, "remove")), 0);
	CHECK_EQ(json_array_size(json_object_get(dn, "change")), 1); /* a-1; no service node */
	CHECK(!strcmp(str(json_array_get(json_object_get(dn, "change"), 0), "status"), "bad"));
	CHECK_EQ(json_array_size(json_object_get(de, "change")), 1);
	CHECK(!strcmp(str(json_array_get(json_object_get(de, "change"), 0), "id"),
	              "placement:replica:a-1>node:n01/GPU1"));
	json_t *a = apply(g0, d);
	CHECK(same_lists(json_object_get(a, "nodes"), json_object_get(g1, "nodes")));
	CHECK(same_lists(json_object_get(a, "edges"), json_object_get(g1, "edges")));
	json_decref(a);
	json_decref(d);
	/* a node lost (deleted) and a replica gone: removes; a new node: adds */
	ev = json_loads("{\"rev\": 7, \"type\": \"delete\", \"kind\": \"node\", \"name\": \"n03\"}",
	                0, NULL);
	iod_viz_model_apply(m, ev);
	json_decref(ev);
	ev = json_loads("{\"rev\": 8, \"type\": \"delete\", \"kind\": \"replica\", \"name\": "
	                "\"a-0\"}",
	                0, NULL);
	iod_viz_model_apply(m, ev);
	json_decref(ev);
	ev = json_loads("{\"rev\": 9, \"type\": \"put\", \"kind\": \"node\", \"name\": \"m9\", "
	                "\"value\": {\"rack\": \"r9\"}}",
	                0, NULL);
	iod_viz_model_apply(m, ev);
	json_decref(ev);
	json_t *g2 = graph_of(m, memo);
	CHECK_EQ(iod_viz_graph_delta(g1, g2, &d), 1);
	dn = json_object_get(d, "nodes");
	CHECK(by_id(json_object_get(dn, "add"), "node:m9"));
	CHECK(by_id(json_object_get(dn, "add"), "switch:leaf-r9")); /* its rack's leaf */
	CHECK(!strcmp(str(by_id(json_object_get(dn, "add"), "node:m9"), "status"),
	              "bad")); /* no lease known yet */
	bool gone = false;
	size_t i;
	const json_t *x;
	json_array_foreach(json_object_get(dn, "remove"), i, x) gone |=
	    !strcmp(json_string_value(x), "node:n03/GPU1");
	CHECK(gone);
	a = apply(g1, d);
	CHECK(same_lists(json_object_get(a, "nodes"), json_object_get(g2, "nodes")));
	CHECK(same_lists(json_object_get(a, "edges"), json_object_get(g2, "edges")));
	json_decref(a);
	json_decref(d);
	/* the memo gives the same graph as building from nothing */
	json_t *fresh = graph_of(m, NULL);
	CHECK(json_equal(fresh, g2));
	json_decref(fresh);
	json_decref(g0);
	json_decref(g1);
	json_decref(g2);
	json_decref(memo);
	json_decref(m);
	json_decref(nodes);
	json_decref(reps);
}

TEST(viz_memo_reuses_unchanged_parts)
{
	json_t *m = iod_viz_model_new(), *nodes = cluster_nodes(3), *memo = json_object();
	iod_viz_model_load(m, "node", nodes);
	json_t *g0 = graph_of(m, memo), *g1 = graph_of(m, memo);
	/* the very same GPU object in both graphs: nothing was rebuilt */
	const json_t *a = by_id(json_object_get(g0, "nodes"), "node:n01/GPU0");
	CHECK(a && a == by_id(json_object_get(g1, "nodes"), "node:n01/GPU0"));
	/* a changed node is rebuilt; the others are not */
	json_t *ev = json_loads("{\"rev\": 6, \"type\": \"put\", \"kind\": \"node\", \"name\": "
	                        "\"n01\", \"value\": {\"rack\": \"r1\", \"zone\": \"a\"}}",
	                        0, NULL);
	iod_viz_model_apply(m, ev);
	json_decref(ev);
	json_t *g2 = graph_of(m, memo);
	CHECK(by_id(json_object_get(g2, "nodes"), "node:n01/GPU0") == NULL); /* no topology now */
	CHECK(by_id(json_object_get(g2, "nodes"), "node:n00/GPU0") ==
	      by_id(json_object_get(g0, "nodes"), "node:n00/GPU0"));
	/* the memo holds only what the cluster still has */
	CHECK_EQ(json_object_size(json_object_get(memo, "node")), 3);
	json_decref(g0);
	json_decref(g1);
	json_decref(g2);
	json_decref(memo);
	json_decref(m);
	json_decref(nodes);
}

TEST(viz_fabric_is_derived_from_racks_and_zones)
{
	json_t *nodes = cluster_nodes(6);
	struct iod_viz_input in = {.nodes = nodes};
	json_t *g = iod_viz_graph(&in);
	const json_t *gn = json_object_get(g, "nodes"), *ge = json_object_get(g, "edges");
	/* three racks: three leaves; zones a and b: two spines and a core */
	CHECK(by_id(gn, "switch:leaf-r0") && by_id(gn, "switch:leaf-r1") &&
	      by_id(gn, "switch:leaf-r2"));
	CHECK(by_id(gn, "switch:spine-a") && by_id(gn, "switch:spine-b"));
	CHECK(by_id(gn, "switch:core"));
	CHECK(json_is_true(
	    json_object_get(json_object_get(by_id(gn, "switch:leaf-r0"), "detail"), "derived")));
	CHECK(by_id(ge, "fabric:switch:leaf-r2>switch:spine-b"));
	CHECK(by_id(ge, "fabric:switch:leaf-r0>switch:spine-a"));
	CHECK(by_id(ge, "fabric:switch:spine-b>switch:core"));
	/* each NIC on its rack's leaf */
	CHECK(by_id(ge, "net:node:n04/NIC0>switch:leaf-r1"));
	CHECK(!strcmp(str(json_object_get(g, "counts"), "fabric"), "derived"));
	/* no single "fabric" node any more */
	CHECK(by_id(gn, "fabric") == NULL);
	/* edge ids are unique */
	json_t *seen = json_object();
	size_t i;
	const json_t *x;
	bool dup = false;
	json_array_foreach(ge, i, x)
	{
		dup |= json_object_get(seen, str(x, "id")) != NULL;
		json_object_set_new(seen, str(x, "id"), json_true());
	}
	CHECK(!dup);
	json_decref(seen);
	json_decref(g);
	json_decref(nodes);
}

TEST(viz_duplicate_dependency_gets_its_own_edge_id)
{
	json_t *s = json_loads("{\"items\": [{\"name\": \"a\", \"value\": {}}, {\"name\": \"w\", "
	                       "\"value\": {\"depends_on\": [\"a\", \"a\"]}}]}",
	                       0, NULL);
	struct iod_viz_input in = {.services = s};
	json_t *g = iod_viz_graph(&in);
	const json_t *ge = json_object_get(g, "edges");
	CHECK(by_id(ge, "depends:svc:w>svc:a"));
	CHECK(by_id(ge, "depends:svc:w>svc:a#2"));
	json_decref(g);
	json_decref(s);
}

/* Link utilisation: a node's edge to its leaf carries the rate of the
 * data-plane fabric port its agent reports, and a share of capacity when
 * one is known; an edge without a rated port carries nothing (the page
 * draws it "no data"), and a new rate reaches the page as an edge change. */
static json_t *tel_links(const char *iface0, double rx0, const char *iface1)
{
	char buf[1024];
	snprintf(buf, sizeof(buf),
	         "{\"items\": ["
	         " {\"node\": \"n00\", \"gpus\": [], \"links\": ["
	         "  {\"name\": \"fabric\", \"kind\": \"fabric\", \"iface\": \"%s\","
	         "   \"rx_bps\": %.0f, \"tx_bps\": 1000000000, \"speed_bps\": 10000000000, "
	         "\"drops\": 2},"
	         "  {\"name\": \"a-0\", \"kind\": \"replica\", \"iface\": \"v1\", \"rx_bps\": 5}]},"
	         " {\"node\": \"n01\", \"gpus\": [], \"links\": ["
	         "  {\"name\": \"fabric\", \"kind\": \"fabric\", \"iface\": \"%s\","
	         "   \"rx_bps\": 8000, \"tx_bps\": 0}]},"
	         " {\"node\": \"n02\", \"gpus\": [], \"links\": ["
	         "  {\"name\": \"fabric\", \"kind\": \"fabric\", \"iface\": \"NIC0\"}]}]}",
	         iface0, rx0, iface1);
	return json_loads(buf, 0, NULL);
}

TEST(viz_link_utilisation_from_data_plane_ports)
{
	json_t *nodes = cluster_nodes(4), *memo = json_object();
	json_t *tel = tel_links("NIC0", 2e9, "u0");
	struct iod_viz_input in = {.nodes = nodes, .telemetry = tel, .memo = memo};
	json_t *g = iod_viz_graph(&in);
	CHECK(g);
	const json_t *edges = json_object_get(g, "edges"), *gn = json_object_get(g, "nodes");
	/* n00: its topology NIC is the fabric port: 2 Gb/s of 10 */
	const json_t *e0 = by_id(edges, "net:node:n00/NIC0>switch:leaf-r0");
	CHECK(e0);
	CHECK(json_number_value(json_object_get(e0, "bps")) == 2e9);
	CHECK(fabs(json_number_value(json_object_get(e0, "util")) - 0.2) < 1e-9);
	CHECK(json_integer_value(json_object_get(e0, "drops")) == 2);
	CHECK(strstr(str(e0, "label"), "NIC0") && strstr(str(e0, "label"), "20%"));
	/* n01: the port is on an interface the topology does not list: drawn as
	 * the node's NIC, with a rate but no capacity, so no utilisation */
	CHECK(by_id(gn, "node:n01/u0"));
	const json_t *e1 = by_id(edges, "net:node:n01/u0>switch:leaf-r1");
	CHECK(e1);
	CHECK(json_number_value(json_object_get(e1, "bps")) == 8000);
	CHECK(!json_object_get(e1, "util"));
	CHECK(strstr(str(e1, "label"), "capacity unknown"));
	CHECK(!json_object_get(by_id(edges, "net:node:n01/NIC0>switch:leaf-r1"), "bps"));
	/* n02: a port read once (no rate) and n03: no telemetry: nothing */
	const json_t *e2 = by_id(edges, "net:node:n02/NIC0>switch:leaf-r2");
	const json_t *e3 = by_id(edges, "net:node:n03/NIC0>switch:leaf-r0");
	CHECK(e2 && e3);
	CHECK(!json_object_get(e2, "bps") && !json_object_get(e2, "util"));
	CHECK(!json_object_get(e3, "bps") && !json_object_get(e3, "util"));
	/* switch-to-switch links of the derived fabric have no counters */
	size_t i;
	const json_t *x;
	json_array_foreach(edges, i, x)
	{
		if (!strcmp(str(x, "kind"), "fabric"))
			CHECK(!json_object_get(x, "util") && !json_object_get(x, "bps"));
	}
	/* a new rate: the delta changes that edge, and the nodes it touches */
	json_t *tel2 = tel_links("NIC0", 9e9, "u0");
	in.telemetry = tel2;
	json_t *g2 = iod_viz_graph(&in), *d = NULL;
	CHECK_EQ(iod_viz_graph_delta(g, g2, &d), 1);
	CHECK(d);
	const json_t *ch = json_object_get(json_object_get(d, "edges"), "change");
	const json_t *c0 = by_id(ch, "net:node:n00/NIC0>switch:leaf-r0");
	CHECK(c0 && fabs(json_number_value(json_object_get(c0, "util")) - 0.9) < 1e-9);
	CHECK(!by_id(ch, "net:node:n01/u0>switch:leaf-r1"));
	CHECK_EQ(json_array_size(json_object_get(json_object_get(d, "edges"), "add")), 0);
	json_decref(d);
	json_decref(g2);
	json_decref(tel2);
	json_decref(g);
	json_decref(tel);
	json_decref(memo);
	json_decref(nodes);
}

/* The DOT line of the edge FROM -- TO, or "" (a static copy). */
static const char *dot_line(const char *dot, const char *from, const char *to)
{
	static char line[512];
	char head[256];
	snprintf(head, sizeof(head), "\"%s\" -- \"%s\" [", from, to);
	const char *p = strstr(dot, head), *end = p ? strchr(p, '\n') : NULL;
	size_t n = end ? (size_t)(end - p) : 0;
	if (n >= sizeof(line))
		n = sizeof(line) - 1;
	memcpy(line, p ? p : "", n);
	line[n] = 0;
	return line;
}

/* `iod viz net-topology` without --live: the DOT colours a link to the
 * fabric by its fifth of capacity, as the page does, and draws one without
 * counters grey and dashed, "no data". */
TEST(viz_dot_colours_links_by_utilisation)
{
	json_t *nodes = cluster_nodes(4);
	json_t *tel = tel_links("NIC0", 2e9, "u0");
	struct iod_viz_input in = {.nodes = nodes, .telemetry = tel};
	json_t *g = iod_viz_graph(&in);
	CHECK(g);
	const json_t *edges = json_object_get(g, "edges");
	CHECK_EQ(iod_viz_util_band(by_id(edges, "net:node:n00/NIC0>switch:leaf-r0")), 1);
	CHECK_EQ(iod_viz_util_band(by_id(edges, "net:node:n02/NIC0>switch:leaf-r2")), -1);
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_viz_dot(g, &b), 0);
	/* n00: 2 Gb/s of 10, the second fifth, solid */
	const char *l0 = dot_line(b.data, "node:n00/NIC0", "switch:leaf-r0");
	CHECK(strstr(l0, "color=\"#8fd14f\""));
	CHECK(strstr(l0, "style=solid"));
	CHECK(strstr(l0, "20%"));
	/* n01: a rate but no capacity; n02: no rate; n03: no telemetry: no data */
	const char *nd[][2] = {{"node:n01/u0", "switch:leaf-r1"},
	                       {"node:n02/NIC0", "switch:leaf-r2"},
	                       {"node:n03/NIC0", "switch:leaf-r0"}};
	for (size_t i = 0; i < IOD_ARRAY_LEN(nd); i++) {
		const char *l = dot_line(b.data, nd[i][0], nd[i][1]);
		CHECK(strstr(l, "color=\"#c4c4c4\""));
		CHECK(strstr(l, "style=dashed"));
	}
	CHECK(strstr(dot_line(b.data, "node:n02/NIC0", "switch:leaf-r2"), "tooltip=\"no data\""));
	/* switch-to-switch links of the derived fabric: no data either */
	CHECK(strstr(dot_line(b.data, "switch:leaf-r0", "switch:spine-a"), "style=dashed"));
	/* NVLink keeps its own colour */
	CHECK(strstr(dot_line(b.data, "node:n00/GPU0", "node:n00/GPU1"), "#1f77b4"));
	iod_buf_free(&b);
	json_decref(g);
	json_decref(tel);
	/* 9 Gb/s of 10: the top fifth */
	tel = tel_links("NIC0", 9e9, "u0");
	in.telemetry = tel;
	g = iod_viz_graph(&in);
	iod_buf_init(&b);
	CHECK_EQ(iod_viz_dot(g, &b), 0);
	CHECK(strstr(dot_line(b.data, "node:n00/NIC0", "switch:leaf-r0"), "color=\"#9e0142\""));
	iod_buf_free(&b);
	json_decref(g);
	json_decref(tel);
	json_decref(nodes);
}

/* A dropped-flow record as a node's agent writes it to drops.json, with
 * the "node" the reader (iod_ctl_drops_read) adds. */
static json_t *drop_rec(const char *node, const char *rule, int count, int first_ms)
{
	return json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:s, s:s, s:s, s:i, s:i}", "node",
	                 node, "rule", rule, "why", "10.0.1.5 is tenant b's (web-0), not a's",
	                 "count", count, "first_ms", first_ms, "last_ms", first_ms + 10, "tenant",
	                 "a", "src", "10.0.0.2", "dst", "10.0.1.5", "src_name", "api-0", "dport",
	                 80, "proto", 6);
}

/* Drops in the live view: each node counts the packets its virtual switch
 * dropped, and its detail lists the newest flows with the rule that dropped
 * each; a node without drops has neither; a new drop changes that node in
 * the next delta (its memoised part is not reused). */
TEST(viz_nodes_show_their_drops_with_the_rule)
{
	json_t *nodes = cluster_nodes(3), *memo = json_object();
	json_t *drops = json_array();
	json_array_append_new(drops, drop_rec("n00", "tenant-a/deny-other-tenants", 3, 1000));
	json_array_append_new(drops, drop_rec("n00", "tenant-a/no-route", 1, 2000));
	json_array_append_new(drops, drop_rec("n02", "vtep/unknown-vni", 5, 1500));
	struct iod_viz_input in = {.nodes = nodes, .drops = drops, .memo = memo};
	json_t *g = iod_viz_graph(&in);
	CHECK(g);
	const json_t *gn = json_object_get(g, "nodes");
	const json_t *n0 = by_id(gn, "node:n00"), *n1 = by_id(gn, "node:n01");
	CHECK(n0 && n1);
	CHECK_EQ(json_integer_value(json_object_get(n0, "drops")), 4);
	const json_t *d0 = json_object_get(json_object_get(n0, "detail"), "drops");
	CHECK_EQ(json_integer_value(json_object_get(d0, "flows")), 2);
	const json_t *rules = json_object_get(d0, "rules");
	CHECK_EQ(json_integer_value(json_object_get(rules, "tenant-a/deny-other-tenants")), 3);
	CHECK_EQ(json_integer_value(json_object_get(rules, "tenant-a/no-route")), 1);
	const json_t *recs = json_object_get(d0, "records");
	CHECK_EQ(json_array_size(recs), 2);
	/* newest first, each with its rule and why */
	CHECK(!strcmp(str(json_array_get(recs, 0), "rule"), "tenant-a/no-route"));
	CHECK(!strcmp(str(json_array_get(recs, 1), "rule"), "tenant-a/deny-other-tenants"));
	CHECK(strstr(str(json_array_get(recs, 1), "why"), "tenant b"));
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(recs, 1), "dport")), 80);
	CHECK_EQ(json_integer_value(json_object_get(by_id(gn, "node:n02"), "drops")), 5);
	/* the DOT writes the count in the node's label */
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_viz_dot(g, &b), 0);
	CHECK(strstr(b.data, "\"node:n00\" [label=\"n00 (4 dropped)\""));
	CHECK(strstr(b.data, "\"node:n01\" [label=\"n01\""));
	iod_buf_free(&b);
	/* no drops: no count, no list */
	CHECK(!json_object_get(n1, "drops"));
	CHECK(!json_object_get(json_object_get(n1, "detail"), "drops"));
	/* a new drop on n01: that node changes, n00 is reused as it was */
	json_array_append_new(drops, drop_rec("n01", "switch/unknown-source", 2, 3000));
	json_t *g2 = iod_viz_graph(&in), *d = NULL;
	CHECK_EQ(iod_viz_graph_delta(g, g2, &d), 1);
	const json_t *ch = json_object_get(json_object_get(d, "nodes"), "change");
	const json_t *c1 = by_id(ch, "node:n01");
	CHECK(c1 && json_integer_value(json_object_get(c1, "drops")) == 2);
	CHECK(!by_id(ch, "node:n00"));
	json_decref(d);
	json_decref(g2);
	/* bounded: the list keeps the newest IOD_VIZ_NODE_DROPS_SHOWN, the
	 * count covers every record */
	json_t *many = json_array();
	for (int i = 0; i < IOD_VIZ_NODE_DROPS_SHOWN + 5; i++)
		json_array_append_new(many, drop_rec("n00", "tenant-a/no-route", 1, i));
	in.drops = many;
	in.memo = NULL;
	json_t *g3 = iod_viz_graph(&in);
	const json_t *m0 = by_id(json_object_get(g3, "nodes"), "node:n00");
	const json_t *md = json_object_get(json_object_get(m0, "detail"), "drops");
	CHECK_EQ(json_integer_value(json_object_get(m0, "drops")), IOD_VIZ_NODE_DROPS_SHOWN + 5);
	CHECK_EQ(json_array_size(json_object_get(md, "records")), IOD_VIZ_NODE_DROPS_SHOWN);
	CHECK_EQ(json_integer_value(
	             json_object_get(json_array_get(json_object_get(md, "records"), 0), "last_ms")),
	         IOD_VIZ_NODE_DROPS_SHOWN + 4 + 10);
	json_decref(g3);
	json_decref(many);
	json_decref(g);
	json_decref(drops);
	json_decref(memo);
	json_decref(nodes);
}

/* Per-edge service rates: caller -> callee from the mesh's spans, over a
 * sliding window, on the dependency edges (not the mesh's totals). */
static json_t *span_answer(int n_web_api, int n_web_db, int errors, int overwritten)
{
	json_t *spans = json_array();
	for (int i = 0; i < n_web_api + n_web_db + 2; i++) {
		const char *callee = i < n_web_api ? "api" : "db";
		/* the last two: a node's own process and an unknown caller */
		const char *caller = i == n_web_api + n_web_db  ? "node/node-1"
		                     : i > n_web_api + n_web_db ? ""
		                                                : "default/web";
		json_t *attrs = json_pack("[{s:s, s:{s:s}}]", "key", "iod.service", "value",
		                          "stringValue", callee);
		if (caller[0])
			json_array_append_new(attrs,
			                      json_pack("{s:s, s:{s:s}}", "key", "iod.caller",
			                                "value", "stringValue", caller));
		json_array_append_new(
		    spans, json_pack("{s:s, s:s, s:o, s:{s:i}}", "startTimeUnixNano", "1000000000",
		                     "endTimeUnixNano", "1004000000", "attributes", attrs, "status",
		                     "code", i < errors ? 2 : 1));
	}
	return json_pack("{s:s, s:o, s:i}", "cursor", "7", "spans", spans, "overwritten",
	                 overwritten);
}

TEST(viz_edge_rates_from_spans)
{
	json_t *st = json_object();
	json_t *a = span_answer(50, 0, 0, 0);
	iod_viz_spans_add(st, a, 1000); /* primes: the ring's history is no rate */
	json_decref(a);
	CHECK(iod_viz_edge_rates(st, 1500) == NULL); /* under a second */
	a = span_answer(20, 10, 5, 0);
	iod_viz_spans_add(st, a, 3000);
	json_decref(a);
	json_t *r = iod_viz_edge_rates(st, 3000); /* 2 s since priming */
	CHECK(r);
	const json_t *wa = json_object_get(r, "web>api"), *wd = json_object_get(r, "web>db");
	CHECK(wa && wd);
	CHECK(fabs(json_number_value(json_object_get(wa, "rps")) - 10.0) < 1e-9);
	CHECK(fabs(json_number_value(json_object_get(wa, "err_ps")) - 2.5) < 1e-9);
	CHECK(fabs(json_number_value(json_object_get(wa, "mean_ms")) - 4.0) < 1e-6);
	CHECK(fabs(json_number_value(json_object_get(wd, "rps")) - 5.0) < 1e-9);
	CHECK_EQ(json_object_size(r), 3); /* the two edges and the window: no node, no unknown */
	/* on the graph: the declared dependencies carry their own rates */
	json_t *s = json_loads("{\"items\": [{\"name\": \"api\", \"value\": {}},"
	                       " {\"name\": \"db\", \"value\": {}}, {\"name\": \"web\", "
	                       "\"value\": {\"depends_on\": [\"api\", \"db\"]}},"
	                       " {\"name\": \"api2\", \"value\": {\"depends_on\": [\"db\"]}}]}",
	                       0, NULL);
	struct iod_viz_input in = {.services = s, .edge_rates = r};
	json_t *g = iod_viz_graph(&in);
	const json_t *ge = json_object_get(g, "edges");
	const json_t *e = by_id(ge, "depends:svc:web>svc:api");
	CHECK(e && json_number_value(json_object_get(e, "rps")) == 10.0);
	CHECK(!strcmp(str(e, "status"), "warn")); /* errors on it */
	CHECK(strstr(str(e, "label"), "10.0 req/s, 2.5 err/s, 4.0 ms"));
	e = by_id(ge, "depends:svc:web>svc:db");
	CHECK(e && json_number_value(json_object_get(e, "rps")) == 5.0);
	CHECK(!strcmp(str(e, "status"), "ok"));
	e = by_id(ge, "depends:svc:api2>svc:db"); /* declared, no calls: 0, not db's total */
	CHECK(e && json_number_value(json_object_get(e, "rps")) == 0);
	CHECK(!strcmp(str(e, "label"), "mesh: 0 req/s"));
	json_decref(g);
	json_decref(r);
	/* past the window the old answer is gone; an overwritten ring marks the
	 * rates as lower bounds */
	a = span_answer(10, 0, 0, 3);
	iod_viz_spans_add(st, a, 14000);
	json_decref(a);
	r = iod_viz_edge_rates(st, 14000);
	CHECK(fabs(json_number_value(json_object_get(json_object_get(r, "web>api"), "rps")) - 1.0) <
	      1e-9);
	CHECK(!json_object_get(r, "web>db"));
	CHECK(json_is_true(json_object_get(json_object_get(r, "web>api"), "partial")));
	in.edge_rates = r;
	g = iod_viz_graph(&in);
	CHECK(strstr(str(by_id(json_object_get(g, "edges"), "depends:svc:web>svc:api"), "label"),
	             "mesh: >=1.0 req/s"));
	json_decref(g);
	json_decref(r);
	json_decref(s);
	json_decref(st);
}
