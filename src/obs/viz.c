/*
 * viz.c: the cluster as one graph (nodes, GPUs, NVLink, NICs, the fabric,
 * services, replicas, placements, dependencies) built from the API's
 * answers, and its Graphviz DOT rendering for `iod viz net-topology`. The
 * live web view draws the same JSON document, so a picture and a page
 * never disagree about what is red.
 *
 * Pure: JSON in, JSON or text out; no I/O, no clock. Every list it walks is
 * an API answer the caller bounded; the output grows with the cluster.
 */
#include "iod/objects.h"
#include "iod/obs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const json_t *items(const json_t *a)
{
	const json_t *x = json_object_get(a, "items");
	return json_is_array(x) ? x : NULL;
}

static const char *sval(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : "";
}

/* A field of a stored Replica: objects.h owns the keys. */
#define RS(v, f) iod_obj_peek_text(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_##f)

/* A field shown in a view's detail: a string one as text ("" when absent),
 * any other as stored (null when absent). */
struct detail_field {
	unsigned f; /* the field of the kind */
	bool text;  /* written as a string */
};

static const struct detail_field node_detail[] = {
    {IOD_OBJ_NODE_MODEL, true}, {IOD_OBJ_NODE_ADDR, true}, {IOD_OBJ_NODE_GPUS, false}};
static const struct detail_field service_detail[] = {{IOD_OBJ_SERVICE_TYPE, true},
                                                     {IOD_OBJ_SERVICE_REPLICAS, false}};
static const struct detail_field replica_detail[] = {{IOD_OBJ_REPLICA_PHASE, true},
                                                     {IOD_OBJ_REPLICA_NODE, true},
                                                     {IOD_OBJ_REPLICA_GPUS, true},
                                                     {IOD_OBJ_REPLICA_RESTARTS, false},
                                                     {IOD_OBJ_REPLICA_REASONS, false}};

/* The detail object of a stored value: the fields listed, in order, under
 * their stored keys. */
static json_t *detail(enum iod_obj_kind k, const json_t *v, const struct detail_field *fs, size_t n)
{
	json_t *d = json_object();
	for (size_t i = 0; d && i < n; i++) {
		const json_t *x = iod_obj_peek_json(k, v, fs[i].f);
		json_t *val = fs[i].text ? json_string(iod_obj_peek_text(k, v, fs[i].f))
		              : x        ? json_incref((json_t *)x)
		                         : json_null();
		json_object_set_new(d, iod_obj_key(k, fs[i].f), val);
	}
	return d;
}

static void add_node(json_t *nodes, const char *id, const char *kind, const char *label,
                     const char *parent, const char *status, json_t *detail)
{
	json_t *n = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "kind", kind, "label", label,
	                      "status", status);
	if (parent && parent[0])
		json_object_set_new(n, "parent", json_string(parent));
	if (detail)
		json_object_set_new(n, "detail", detail);
	json_array_append_new(nodes, n);
}

static void add_edge(json_t *edges, const char *from, const char *to, const char *kind,
                     const char *label, const char *status)
{
	json_array_append_new(edges, json_pack("{s:s, s:s, s:s, s:s, s:s}", "from", from, "to", to,
	                                       "kind", kind, "label", label, "status", status));
}

static const char *replica_status(const json_t *rv, const json_t *endpoints, const char *name)
{
	const char *phase = RS(rv, PHASE);
	size_t i;
	const json_t *e;
	if (!strcmp(phase, "unhealthy") || !strcmp(phase, "failed") || !strcmp(phase, "exited"))
		return "bad";
	json_array_foreach(items(endpoints), i, e)
	{
		if (!strcmp(sval(e, "name"), name) &&
		    json_is_false(iod_obj_peek_json(IOD_OBJ_KIND_ENDPOINT,
		                                    json_object_get(e, "value"),
		                                    IOD_OBJ_ENDPOINT_HEALTHY)))
			return "bad";
	}
	if (!strcmp(phase, "healthy") || !strcmp(phase, "running"))
		return "ok";
	return "warn";
}

/* The utilisation and stall flag of a node's GPU from telemetry summaries. */
static const json_t *gpu_tel(const json_t *tel, const char *node, double idx)
{
	size_t i, j;
	const json_t *x, *g;
	json_array_foreach(items(tel), i, x)
	{
		const json_t *v = json_object_get(x, "value") ? json_object_get(x, "value") : x;
		if (strcmp(sval(v, "node"), node))
			continue;
		json_array_foreach(json_object_get(v, "gpus"), j, g)
		{
			if (json_number_value(json_object_get(g, "index")) == idx)
				return g;
		}
	}
	return NULL;
}

json_t *iod_viz_graph(const struct iod_viz_input *in)
{
	json_t *g = json_object(), *nodes = json_array(), *edges = json_array();
	size_t i, j, k;
	const json_t *n, *d, *r, *s;
	char id[IOD_NAME_MAX * 2 + 16], id2[IOD_NAME_MAX * 2 + 16];
	size_t n_nodes = json_array_size(items(in->nodes));
	bool group = in->group_over && n_nodes > in->group_over;
	unsigned gpus = 0, bad = 0, replicas = 0;

	if (!g || !nodes || !edges) {
		json_decref(g);
		json_decref(nodes);
		json_decref(edges);
		return NULL;
	}
	add_node(nodes, "fabric", "fabric", "fabric", NULL, "ok",
	         json_pack("{s:s}", "note",
	                   "switches and links appear when the node network reports them"));
	/* racks first, so a node's parent always precedes it */
	if (group) {
		json_t *racks = json_object();
		json_array_foreach(items(in->nodes), i, n)
		{
			const char *rk =
			    sval(iod_obj_peek_json(IOD_OBJ_KIND_NODE, json_object_get(n, "value"),
			                           IOD_OBJ_NODE_LABELS),
			         "rack");
			char rn[IOD_NAME_MAX + 8];
			if (rk[0])
				snprintf(rn, sizeof(rn), "rack:%s", rk);
			else
				snprintf(rn, sizeof(rn), "rack:%zu", i / IOD_VIZ_RACK_NODES);
			json_t *c = json_object_get(racks, rn);
			json_object_set_new(racks, rn, json_integer(json_integer_value(c) + 1));
		}
		const char *key;
		json_t *cnt;
		json_object_foreach(racks, key, cnt)
		{
			char label[IOD_NAME_MAX + 32];
			snprintf(label, sizeof(label), "%s (%lld nodes)", key + 5,
			         (long long)json_integer_value(cnt));
			add_node(nodes, key, "rack", label, NULL, "ok", NULL);
			add_edge(edges, key, "fabric", "net", "", "ok");
		}
		json_decref(racks);
	}
	json_array_foreach(items(in->nodes), i, n)
	{
		const char *name = sval(n, "name");
		const json_t *v = json_object_get(n, "value");
		bool ready = json_integer_value(json_object_get(n, "lease")) != 0;
		char nid[IOD_NAME_MAX + 8], parent[IOD_NAME_MAX + 8] = "";
		snprintf(nid, sizeof(nid), "node:%s", name);
		if (group) {
			const char *rk = sval(
			    iod_obj_peek_json(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_LABELS), "rack");
			if (rk[0])
				snprintf(parent, sizeof(parent), "rack:%s", rk);
			else
				snprintf(parent, sizeof(parent), "rack:%zu",
				         i / IOD_VIZ_RACK_NODES);
		}
		add_node(nodes, nid, "node", name, parent, ready ? "ok" : "bad",
		         detail(IOD_OBJ_KIND_NODE, v, node_detail, IOD_ARRAY_LEN(node_detail)));
		bad += !ready;
		bool nic_seen = false;
		const json_t *devs = json_object_get(
		    iod_obj_peek_json(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_TOPOLOGY), "devices");
		json_array_foreach(devs, j, d)
		{
			const char *kind = sval(d, "kind"), *dn = sval(d, "name");
			if (strcmp(kind, "gpu") && strcmp(kind, "nic") && strcmp(kind, "dpu"))
				continue;
			snprintf(id, sizeof(id), "%s/%s", nid, dn);
			const char *st = "ok";
			json_t *det = json_pack("{s:s}", "model", sval(d, "model"));
			if (!strcmp(kind, "gpu")) {
				gpus++;
				const json_t *t =
				    gpu_tel(in->telemetry, name,
				            json_number_value(json_object_get(d, "gpu_index")));
				if (t) {
					json_object_set(det, "util_pct",
					                json_object_get(t, "util_pct"));
					json_object_set(det, "stalled",
					                json_object_get(t, "stalled"));
					if (json_is_true(json_object_get(t, "stalled")))
						st = "bad";
				}
			}
			add_node(nodes, id, strcmp(kind, "gpu") ? "nic" : "gpu", dn, nid, st, det);
			if (strcmp(kind, "gpu")) {
				nic_seen = true;
				if (!group)
					add_edge(edges, id, "fabric", "net", "",
					         ready ? "ok" : "bad");
			}
			/* NVLink: each pair once */
			const char *peer;
			const json_t *l;
			json_object_foreach((json_t *)json_object_get(d, "links"), peer, l)
			{
				double nv = json_number_value(json_object_get(l, "nvlinks"));
				if (strcmp(kind, "gpu") || nv <= 0 || strcmp(dn, peer) >= 0)
					continue;
				snprintf(id2, sizeof(id2), "%s/%s", nid, peer);
				add_edge(edges, id, id2, "nvlink", sval(l, "class"), "ok");
			}
		}
		if (group)
			continue; /* the rack carries the node's link to the fabric */
		if (!nic_seen)
			add_edge(edges, nid, "fabric", "net", "", ready ? "ok" : "bad");
		else if (!ready)
			add_edge(edges, nid, "fabric", "net", "lost", "bad");
	}
	/* services, their replicas and dependencies */
	struct iod_top_mesh_svc *mesh = NULL;
	uint32_t mesh_n = 0;
	if (in->mesh_metrics && (mesh = calloc(IOD_TOP_SERVICES_MAX, sizeof(*mesh))))
		mesh_n = iod_top_mesh_parse(in->mesh_metrics, strlen(in->mesh_metrics), mesh,
		                            IOD_TOP_SERVICES_MAX);
	json_array_foreach(items(in->services), i, s)
	{
		const char *sn = sval(s, "name");
		const json_t *sv = json_object_get(s, "value");
		char sid[IOD_NAME_MAX + 8];
		snprintf(sid, sizeof(sid), "svc:%s", sn);
		const struct iod_top_mesh_svc *m = NULL;
		for (uint32_t q = 0; q < mesh_n; q++)
			if (!strcmp(mesh[q].name, sn))
				m = &mesh[q];
		json_t *det =
		    detail(IOD_OBJ_KIND_SERVICE, sv, service_detail, IOD_ARRAY_LEN(service_detail));
		if (m) {
			json_object_set_new(det, "requests_total", json_real(m->requests));
			json_object_set_new(det, "errors_total", json_real(m->errors));
			if (m->p99_s >= 0)
				json_object_set_new(det, "p99_ms", json_real(m->p99_s * 1000));
		}
		unsigned ok = 0, all = 0;
		json_array_foreach(items(in->replicas), j, r)
		{
			const json_t *rv = json_object_get(r, "value");
			if (strcmp(RS(rv, SERVICE), sn))
				continue;
			all++;
			ok += !strcmp(replica_status(rv, in->endpoints, sval(r, "name")), "ok");
		}
		add_node(nodes, sid, "service", sn, NULL,
		         all && !ok ? "bad"
		         : ok < all ? "warn"
		                    : "ok",
		         det);
		const json_t *dep;
		json_array_foreach(json_object_get(sv, "depends_on"), k, dep)
		{
			if (!json_is_string(dep))
				continue;
			char to[IOD_NAME_MAX + 8], label[64] = "";
			snprintf(to, sizeof(to), "svc:%s", json_string_value(dep));
			const struct iod_top_mesh_svc *dm = NULL;
			for (uint32_t q = 0; q < mesh_n; q++)
				if (!strcmp(mesh[q].name, json_string_value(dep)))
					dm = &mesh[q];
			if (dm && dm->requests > 0)
				snprintf(label, sizeof(label), "%.0f req, %.0f err", dm->requests,
				         dm->errors);
			add_edge(edges, sid, to, "depends", label,
			         dm && dm->errors > 0 ? "warn" : "ok");
		}
	}
	free(mesh);
	json_array_foreach(items(in->replicas), i, r)
	{
		const char *rn = sval(r, "name");
		const json_t *rv = json_object_get(r, "value");
		const char *st = replica_status(rv, in->endpoints, rn), *node = RS(rv, NODE);
		char rid[IOD_NAME_MAX + 8], sid[IOD_NAME_MAX + 8];
		snprintf(rid, sizeof(rid), "replica:%s", rn);
		snprintf(sid, sizeof(sid), "svc:%s", RS(rv, SERVICE));
		replicas++;
		bad += !strcmp(st, "bad");
		json_t *det =
		    detail(IOD_OBJ_KIND_REPLICA, rv, replica_detail, IOD_ARRAY_LEN(replica_detail));
		add_node(nodes, rid, "replica", rn, sid, st, det);
		if (!node[0])
			continue;
		/* placement: on each of its GPUs, else on its node */
		struct iod_bitmap b;
		struct iod_err e = {0};
		iod_bitmap_zero(&b);
		const char *gl = RS(rv, GPUS);
		if (gl[0] && iod_bitmap_parse(gl, &b, &e))
			iod_bitmap_zero(&b);
		bool placed = false;
		for (int x = iod_bitmap_next(&b, 0); x >= 0 && !group;
		     x = iod_bitmap_next(&b, (unsigned)x + 1)) {
			snprintf(id, sizeof(id), "node:%s/GPU%d", node, x);
			add_edge(edges, rid, id, "placement", "", st);
			placed = true;
		}
		if (!placed) {
			snprintf(id, sizeof(id), "node:%s", node);
			add_edge(edges, rid, id, "placement", "", st);
		}
	}
	json_object_set_new(g, "nodes", nodes);
	json_object_set_new(g, "edges", edges);
	json_object_set_new(g, "counts",
	                    json_pack("{s:I, s:i, s:I, s:i, s:i, s:b}", "nodes",
	                              (json_int_t)n_nodes, "gpus", (int)gpus, "services",
	                              (json_int_t)json_array_size(items(in->services)), "replicas",
	                              (int)replicas, "bad", (int)bad, "grouped", group));
	return g;
}

/* ---- DOT ------------------------------------------------------------------------ */

static const char *colour(const char *status)
{
	return !strcmp(status, "bad") ? "#d62728" : !strcmp(status, "warn") ? "#ff9f0e" : "#2ca02c";
}

/* A DOT id: quoted, with quotes and backslashes escaped. */
static int q(struct iod_buf *b, const char *s)
{
	int rc = iod_buf_append(b, "\"", 1);
	for (; !rc && *s; s++) {
		if (*s == '"' || *s == '\\')
			rc = iod_buf_append(b, "\\", 1);
		if (!rc)
			rc = iod_buf_append(b, (unsigned char)*s < 0x20 ? "?" : s, 1);
	}
	return rc ? rc : iod_buf_append(b, "\"", 1);
}

static int dot_node(struct iod_buf *b, const json_t *n, const char *indent)
{
	const char *kind = sval(n, "kind");
	const char *shape = !strcmp(kind, "gpu")       ? "box3d"
	                    : !strcmp(kind, "nic")     ? "cds"
	                    : !strcmp(kind, "fabric")  ? "hexagon"
	                    : !strcmp(kind, "replica") ? "ellipse"
	                    : !strcmp(kind, "rack")    ? "folder"
	                                               : "box";
	int rc = iod_buf_printf(b, "%s", indent);
	rc = rc ? rc : q(b, sval(n, "id"));
	rc = rc ? rc : iod_buf_printf(b, " [label=");
	rc = rc ? rc : q(b, sval(n, "label"));
	return rc ? rc
	          : iod_buf_printf(b, ", shape=%s, color=\"%s\", penwidth=%s];\n", shape,
	                           colour(sval(n, "status")),
	                           strcmp(sval(n, "status"), "ok") ? "3" : "1.2");
}

int iod_viz_dot(const json_t *graph, struct iod_buf *b)
{
	const json_t *nodes = json_object_get(graph, "nodes"),
	             *edges = json_object_get(graph, "edges");
	size_t i, j;
	const json_t *n, *c, *e;
	/* children by parent id, in one pass: a 1,000-node graph has ~12,000 entries */
	json_t *kids = json_object();
	json_array_foreach(nodes, i, n)
	{
		const char *p = sval(n, "parent");
		if (!p[0])
			continue;
		json_t *l = json_object_get(kids, p);
		if (!l) {
			l = json_array();
			json_object_set_new(kids, p, l);
		}
		json_array_append(l, (json_t *)n);
	}
	int rc =
	    iod_buf_printf(b, "graph iod {\n  graph [rankdir=LR, fontname=\"Helvetica\", "
	                      "compound=true];\n  node [fontname=\"Helvetica\", fontsize=10];\n"
	                      "  edge [fontname=\"Helvetica\", fontsize=9];\n");
	/* top-level graph nodes become clusters when something sits inside them */
	json_array_foreach(nodes, i, n)
	{
		if (rc || sval(n, "parent")[0])
			continue;
		const char *id = sval(n, "id");
		const json_t *mine = json_object_get(kids, id);
		if (!json_array_size(mine)) {
			rc = dot_node(b, n, "  ");
			continue;
		}
		rc = iod_buf_printf(b, "  subgraph \"cluster_%zu\" {\n    label=", i);
		rc = rc ? rc : q(b, sval(n, "label"));
		rc = rc ? rc
		        : iod_buf_printf(b, "; color=\"%s\"; style=rounded;\n",
		                         colour(sval(n, "status")));
		rc = rc ? rc : dot_node(b, n, "    ");
		json_array_foreach(mine, j, c)
		{
			if (rc)
				break;
			/* a rack's nodes: one level further, drawn as plain boxes */
			rc = dot_node(b, c, "    ");
			size_t k;
			const json_t *gc;
			json_array_foreach(json_object_get(kids, sval(c, "id")), k, gc)
			{
				if (!rc)
					rc = dot_node(b, gc, "    ");
			}
		}
		rc = rc ? rc : iod_buf_printf(b, "  }\n");
	}
	json_decref(kids);
	json_array_foreach(edges, i, e)
	{
		if (rc)
			break;
		const char *kind = sval(e, "kind");
		rc = iod_buf_printf(b, "  ");
		rc = rc ? rc : q(b, sval(e, "from"));
		rc = rc ? rc : iod_buf_printf(b, " -- ");
		rc = rc ? rc : q(b, sval(e, "to"));
		rc = rc ? rc : iod_buf_printf(b, " [label=");
		rc = rc ? rc : q(b, sval(e, "label"));
		rc = rc ? rc
		        : iod_buf_printf(
		              b, ", color=\"%s\", style=%s, penwidth=%s];\n",
		              !strcmp(kind, "nvlink") ? "#1f77b4" : colour(sval(e, "status")),
		              !strcmp(kind, "placement") ? "dashed" : "solid",
		              !strcmp(kind, "nvlink") || !strcmp(kind, "depends") ? "2" : "1");
	}
	return rc ? rc : iod_buf_printf(b, "}\n");
}
