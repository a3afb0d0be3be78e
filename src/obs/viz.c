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

/* What a graph is built into: its lists and the edge ids given so far. */
struct gb {
	json_t *nodes;    /* the graph's nodes */
	json_t *edges;    /* the graph's edges */
	json_t *edge_ids; /* {id: count}: an id given twice gets "#2"; NULL where
	                     ids are unique by construction (a node's parts) */
};

static json_t *add_node(struct gb *b, const char *id, const char *kind, const char *label,
                        const char *parent, const char *status, json_t *detail)
{
	json_t *n = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "kind", kind, "label", label,
	                      "status", status);
	if (n && parent && parent[0])
		json_object_set_new(n, "parent", json_string(parent));
	if (n && detail)
		json_object_set_new(n, "detail", detail);
	else
		json_decref(detail);
	json_array_append_new(b->nodes, n);
	return n;
}

/* An edge; its id is "kind:from>to", unique in the graph (a second one of
 * the same kind between the same ends gets "#2"), so a delta names it. */
static json_t *add_edge(struct gb *b, const char *from, const char *to, const char *kind,
                        const char *label, const char *status)
{
	char id[IOD_NAME_MAX * 5 + 48];
	snprintf(id, sizeof(id), "%s:%s>%s", kind, from, to);
	json_int_t seen = 0;
	if (b->edge_ids) {
		seen = json_integer_value(json_object_get(b->edge_ids, id));
		json_object_set_new(b->edge_ids, id, json_integer(seen + 1));
	}
	if (seen) {
		size_t l = strlen(id);
		snprintf(id + l, sizeof(id) - l, "#%lld", (long long)seen + 1);
	}
	json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "from", from, "to", to,
	                      "kind", kind, "label", label, "status", status);
	json_array_append_new(b->edges, e);
	return e;
}

/*
 * Link utilisation on a node's edge to its leaf, from a data-plane port the
 * node's agent reports (its telemetry summary's "links"): "bps" (the busier
 * direction, bits/s) when the port has a rate, "util" (0..1 of capacity)
 * when a capacity is known too (the topology NIC's port_bps, else the speed
 * the port's driver reports), and "util_source". An edge without a rated
 * port gets none of these: the page draws it as "no data".
 */
static void edge_util(json_t *e, const json_t *link, uint64_t nic_bps)
{
	if (!e || !link || !json_is_number(json_object_get(link, "rx_bps")))
		return;
	double rx = json_number_value(json_object_get(link, "rx_bps"));
	double tx = json_number_value(json_object_get(link, "tx_bps"));
	double bps = rx > tx ? rx : tx;
	if (!isfinite(bps) || bps < 0 || bps > 1e18) /* not a rate a port has */
		return;
	double cap =
	    nic_bps ? (double)nic_bps : json_number_value(json_object_get(link, "speed_bps"));
	char label[128], r[32], c[32];
	iod_format_bandwidth((uint64_t)bps, r, sizeof(r));
	json_object_set_new(e, "bps", json_real(bps));
	json_object_set_new(e, "util_source", json_string("data-plane port"));
	json_object_set_new(e, "drops",
	                    json_integer(json_integer_value(json_object_get(link, "drops"))));
	if (!isfinite(cap) || cap > 1e18)
		cap = 0;
	if (cap > 0) {
		double u = bps / cap;
		json_object_set_new(e, "util", json_real(u > 1 ? 1 : u));
		iod_format_bandwidth((uint64_t)cap, c, sizeof(c));
		json_object_set_new(e, "capacity_bps", json_real(cap));
		snprintf(label, sizeof(label), "%s %s of %s (%.0f%%)", sval(link, "iface"), r, c,
		         u * 100);
	} else {
		snprintf(label, sizeof(label), "%s %s (capacity unknown)", sval(link, "iface"), r);
	}
	json_object_set_new(e, "label", json_string(label));
}

/* The node's fabric port among its reported links, NULL when none. */
static const json_t *fabric_link(const json_t *tn)
{
	size_t i;
	const json_t *l;
	json_array_foreach(json_object_get(tn, "links"), i,
	                   l) if (!strcmp(sval(l, "kind"), "fabric")) return l;
	return NULL;
}

/* {endpoint name: true} for every endpoint that reports unhealthy: one
 * pass, so a replica's status is one lookup (2,000 replicas against 2,000
 * endpoints were 4 million string compares a refresh). */
static json_t *unhealthy_endpoints(const json_t *endpoints)
{
	json_t *bad = json_object();
	size_t i;
	const json_t *e;
	json_array_foreach(items(endpoints), i, e)
	{
		if (json_is_false(iod_obj_peek_json(IOD_OBJ_KIND_ENDPOINT,
		                                    json_object_get(e, "value"),
		                                    IOD_OBJ_ENDPOINT_HEALTHY)))
			json_object_set_new(bad, sval(e, "name"), json_true());
	}
	return bad;
}

static const char *replica_status(const json_t *rv, bool endpoint_bad)
{
	const char *phase = RS(rv, PHASE);
	if (!strcmp(phase, "unhealthy") || !strcmp(phase, "failed") || !strcmp(phase, "exited") ||
	    !strcmp(phase, "lost"))
		return "bad";
	if (endpoint_bad)
		return "bad";
	if (!strcmp(phase, "healthy") || !strcmp(phase, "running"))
		return "ok";
	return "warn";
}

/* {node: {gpu index: summary}} of the telemetry summaries, built once. */
static json_t *telemetry_index(const json_t *tel)
{
	json_t *ix = json_object();
	size_t i, j;
	const json_t *x, *g;
	json_array_foreach(items(tel), i, x)
	{
		const json_t *v = json_object_get(x, "value") ? json_object_get(x, "value") : x;
		json_t *per = json_object();
		json_array_foreach(json_object_get(v, "gpus"), j, g)
		{
			char k[24];
			snprintf(k, sizeof(k), "%lld",
			         (long long)json_number_value(json_object_get(g, "index")));
			json_object_set(per, k, (json_t *)g);
		}
		/* the data plane's ports (not a number: no GPU index collides) */
		if (json_object_get(v, "links"))
			json_object_set(per, "links", json_object_get(v, "links"));
		json_object_set_new(ix, sval(v, "node"), per);
	}
	return ix;
}

static const json_t *gpu_tel(const json_t *per_node, double idx)
{
	char k[24];
	snprintf(k, sizeof(k), "%lld", (long long)idx);
	return json_object_get(per_node, k);
}

/*
 * {node: what the page shows of its drops} from the records `iod trace
 * --drops` reads (each with its "node", oldest first): "packets" (their
 * counts' sum), "flows" (records), "rules" ({rule: packets}) and "records",
 * the newest IOD_VIZ_NODE_DROPS_SHOWN, newest first, with the rule that
 * dropped each and why.
 */
static json_t *drops_index(const json_t *drops)
{
	json_t *ix = json_object();
	size_t i = json_array_size(drops);
	while (ix && i-- > 0) {
		const json_t *r = json_array_get(drops, i);
		const char *node = sval(r, "node");
		json_t *d = json_object_get(ix, node);
		if (!d) {
			d = json_pack("{s:I, s:I, s:{}, s:[]}", "packets", (json_int_t)0, "flows",
			              (json_int_t)0, "rules", "records");
			if (!d)
				continue;
			json_object_set_new(ix, node, d);
		}
		json_int_t cnt = json_integer_value(json_object_get(r, "count"));
		json_t *rules = json_object_get(d, "rules");
		const char *rule = sval(r, "rule");
		json_object_set_new(
		    d, "packets",
		    json_integer(json_integer_value(json_object_get(d, "packets")) + cnt));
		json_object_set_new(
		    d, "flows", json_integer(json_integer_value(json_object_get(d, "flows")) + 1));
		json_object_set_new(
		    rules, rule,
		    json_integer(json_integer_value(json_object_get(rules, rule)) + cnt));
		json_t *recs = json_object_get(d, "records");
		if (json_array_size(recs) < IOD_VIZ_NODE_DROPS_SHOWN)
			json_array_append_new(
			    recs,
			    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O?, s:O?, s:I, s:O?}",
			              "rule", rule, "why", sval(r, "why"), "tenant",
			              sval(r, "tenant"), "src", sval(r, "src"), "src_name",
			              sval(r, "src_name"), "dst", sval(r, "dst"), "dst_name",
			              sval(r, "dst_name"), "dport", json_object_get(r, "dport"),
			              "proto", json_object_get(r, "proto"), "count", cnt, "last_ms",
			              json_object_get(r, "last_ms")));
	}
	return ix;
}

/* The rack a node is in: its "rack" (objects.h), else labels.rack, else
 * one of IOD_VIZ_RACK_NODES nodes in list order (a leaf switch's worth). */
static void node_rack(const json_t *v, size_t i, char *out, size_t len)
{
	const char *rk = iod_obj_peek_text(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_RACK);
	if (!rk[0])
		rk = sval(iod_obj_peek_json(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_LABELS), "rack");
	if (rk[0])
		snprintf(out, len, "%s", rk);
	else
		snprintf(out, len, "%zu", i / IOD_VIZ_RACK_NODES);
}

/*
 * The fabric. A cluster describes no switches (Node objects carry a rack
 * and a zone, the agents report no switch), so the fabric is derived, and
 * says so: one leaf switch per rack, one spine per zone (a core above the
 * spines when there are several zones), every node's NICs on its rack's
 * leaf. The layout of a leaf-spine Clos, which is how GPU clusters are
 * built; a fabric description, when one exists, replaces the derivation.
 */
static void fabric(struct gb *b, const json_t *nodes, bool group)
{
	json_t *racks = json_object(), *zones = json_object();
	size_t i;
	const json_t *n;
	char rk[IOD_NAME_MAX + 8], id[IOD_NAME_MAX + 16];
	json_array_foreach(items(nodes), i, n)
	{
		const json_t *v = json_object_get(n, "value");
		const char *z = iod_obj_peek_text(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_ZONE);
		node_rack(v, i, rk, sizeof(rk));
		json_t *r = json_object_get(racks, rk);
		if (!r) {
			r = json_pack("{s:s, s:i, s:i}", "zone", z, "nodes", 0, "down", 0);
			json_object_set_new(racks, rk, r);
		}
		json_object_set_new(
		    r, "nodes", json_integer(json_integer_value(json_object_get(r, "nodes")) + 1));
		if (!json_integer_value(json_object_get(n, "lease")))
			json_object_set_new(
			    r, "down",
			    json_integer(json_integer_value(json_object_get(r, "down")) + 1));
		json_object_set_new(zones, sval(r, "zone"), json_true());
	}
	bool core = json_object_size(zones) > 1;
	const char *key;
	json_t *x;
	if (core)
		add_node(b, "switch:core", "switch", "core (derived)", NULL, "ok",
		         json_pack("{s:s, s:b}", "role", "core", "derived", 1));
	json_object_foreach(zones, key, x)
	{
		char label[IOD_NAME_MAX + 32];
		snprintf(id, sizeof(id), "switch:spine%s%s", key[0] ? "-" : "", key);
		snprintf(label, sizeof(label), "spine%s%s (derived)", key[0] ? " " : "", key);
		add_node(b, id, "switch", label, NULL, "ok",
		         json_pack("{s:s, s:b, s:s}", "role", "spine", "derived", 1, "zone", key));
		if (core)
			add_edge(b, id, "switch:core", "fabric", "", "ok");
	}
	json_object_foreach(racks, key, x)
	{
		char label[IOD_NAME_MAX + 32], rid[IOD_NAME_MAX + 8], spine[IOD_NAME_MAX + 16];
		long long cnt = json_integer_value(json_object_get(x, "nodes")),
		          down = json_integer_value(json_object_get(x, "down"));
		const char *z = sval(x, "zone");
		snprintf(rid, sizeof(rid), "rack:%s", key);
		if (group) {
			snprintf(label, sizeof(label), "%s (%lld nodes)", key, cnt);
			add_node(b, rid, "rack", label, NULL, down ? "bad" : "ok",
			         json_pack("{s:I, s:I, s:s}", "nodes", (json_int_t)cnt, "down",
			                   (json_int_t)down, "zone", z));
		}
		snprintf(id, sizeof(id), "switch:leaf-%s", key);
		snprintf(label, sizeof(label), "leaf %s", key);
		add_node(b, id, "switch", label, group ? rid : NULL, "ok",
		         json_pack("{s:s, s:b, s:s}", "role", "leaf", "derived", 1, "rack", key));
		snprintf(spine, sizeof(spine), "switch:spine%s%s", z[0] ? "-" : "", z);
		add_edge(b, id, spine, "fabric", "", "ok");
	}
	json_decref(racks);
	json_decref(zones);
}

/*
 * The parts of the graph one cluster node or one replica adds, kept in the
 * caller's memo (iod_viz_input.memo): {"item": the API item they were built
 * from, "dep": what else they read (telemetry, endpoint health), "rack",
 * "group", "nodes": [...], "edges": [...], "gpus", "bad"}. A part is reused
 * when its item is the very same JSON value (the live view's model keeps an
 * unchanged object's value) and what else it read is equal; a reused part's
 * values are shared, so the delta's comparison stops at the first pointer.
 * Rebuilding 8,000 GPUs for one replica's change was most of an update.
 */
static json_t *reuse(json_t *memo, const char *kind, const char *name, const json_t *item,
                     const json_t *dep, const char *rack, bool group)
{
	json_t *p = json_object_get(json_object_get(memo, kind), name);
	if (!p || json_object_get(p, "item") != item ||
	    !json_equal(json_object_get(p, "dep"), dep ? dep : json_null()) ||
	    strcmp(sval(p, "rack"), rack) || json_is_true(json_object_get(p, "group")) != group)
		return NULL;
	return json_incref(p);
}

static json_t *part_new(const json_t *item, const json_t *dep, const char *rack, bool group,
                        struct gb *b)
{
	json_t *p = json_pack("{s:O, s:O, s:s, s:b, s:[], s:[]}", "item", (json_t *)item, "dep",
	                      dep ? (json_t *)dep : json_null(), "rack", rack, "group", group,
	                      "nodes", "edges");
	if (!p)
		return NULL;
	b->nodes = json_object_get(p, "nodes");
	b->edges = json_object_get(p, "edges");
	b->edge_ids = NULL;
	return p;
}

static void splice(struct gb *b, const json_t *part)
{
	json_array_extend(b->nodes, json_object_get(part, "nodes"));
	json_array_extend(b->edges, json_object_get(part, "edges"));
}

/* A cluster node, its GPUs (NVLink between them) and NICs (on its leaf). */
static json_t *node_part(const json_t *n, const json_t *tn, const json_t *dr, const json_t *dep,
                         const char *rk, bool group)
{
	struct gb b;
	json_t *p = part_new(n, dep, rk, group, &b);
	if (!p)
		return NULL;
	const char *name = sval(n, "name");
	const json_t *v = json_object_get(n, "value");
	bool ready = json_integer_value(json_object_get(n, "lease")) != 0;
	char nid[IOD_NAME_MAX + 8], parent[IOD_NAME_MAX + 16] = "", leaf[IOD_NAME_MAX + 16];
	char id[IOD_NAME_MAX * 2 + 16], id2[IOD_NAME_MAX * 2 + 16];
	unsigned gpus = 0;
	size_t j;
	const json_t *d;
	snprintf(nid, sizeof(nid), "node:%s", name);
	snprintf(leaf, sizeof(leaf), "switch:leaf-%s", rk);
	if (group)
		snprintf(parent, sizeof(parent), "rack:%s", rk);
	json_t *nd = detail(IOD_OBJ_KIND_NODE, v, node_detail, IOD_ARRAY_LEN(node_detail));
	if (nd)
		json_object_set_new(nd, "rack", json_string(rk));
	if (nd && dr)
		json_object_set(nd, "drops", (json_t *)dr);
	json_t *gn = add_node(&b, nid, "node", name, parent, ready ? "ok" : "bad", nd);
	if (gn && dr) /* the count the page puts on the node */
		json_object_set(gn, "drops", json_object_get(dr, "packets"));
	bool nic_seen = false;
	const json_t *fl = ready ? fabric_link(tn) : NULL; /* its data plane's fabric port */
	bool fl_used = false;
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
			    gpu_tel(tn, json_number_value(json_object_get(d, "gpu_index")));
			if (t && det) {
				json_object_set(det, "util_pct", json_object_get(t, "util_pct"));
				json_object_set(det, "stalled", json_object_get(t, "stalled"));
				if (json_is_true(json_object_get(t, "stalled")))
					st = "bad";
			}
		}
		add_node(&b, id, strcmp(kind, "gpu") ? "nic" : "gpu", dn, nid, st, det);
		if (strcmp(kind, "gpu")) {
			nic_seen = true;
			json_t *e = add_edge(&b, id, leaf, "net", "", ready ? "ok" : "bad");
			if (fl && !strcmp(sval(fl, "iface"), dn)) {
				uint64_t cap = 0;
				iod_json_get_u64(d, "port_bps", &cap);
				edge_util(e, fl, cap);
				fl_used = true;
			}
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
			add_edge(&b, id, id2, "nvlink", sval(l, "class"), "ok");
		}
	}
	if (!nic_seen) {
		/* no NIC: the fabric port, when there is one, is this link */
		json_t *e =
		    add_edge(&b, nid, leaf, "net", ready ? "" : "lost", ready ? "ok" : "bad");
		edge_util(e, fl, 0);
	} else if (fl && !fl_used) {
		/* the data plane's fabric port is on an interface the topology
		 * does not list (an underlay veth): drawn as the node's NIC it is */
		snprintf(id, sizeof(id), "%s/%s", nid, sval(fl, "iface"));
		add_node(&b, id, "nic", sval(fl, "iface"), nid, "ok",
		         json_pack("{s:s}", "source", "data plane fabric port"));
		edge_util(add_edge(&b, id, leaf, "net", "", "ok"), fl, 0);
	}
	json_object_set_new(p, "gpus", json_integer(gpus));
	json_object_set_new(p, "bad", json_boolean(!ready));
	return p;
}

/* A replica in its service, placed on its GPUs (or its node). */
static json_t *replica_part(const json_t *r, bool endpoint_bad, bool group)
{
	struct gb b;
	json_t *p = part_new(r, endpoint_bad ? json_true() : NULL, "", group, &b);
	if (!p)
		return NULL;
	const char *rn = sval(r, "name");
	const json_t *rv = json_object_get(r, "value");
	const char *st = replica_status(rv, endpoint_bad), *node = RS(rv, NODE);
	char rid[IOD_NAME_MAX + 8], sid[IOD_NAME_MAX + 8], id[IOD_NAME_MAX * 2 + 16];
	snprintf(rid, sizeof(rid), "replica:%s", rn);
	snprintf(sid, sizeof(sid), "svc:%s", RS(rv, SERVICE));
	json_object_set_new(p, "bad", json_boolean(!strcmp(st, "bad")));
	json_t *det =
	    detail(IOD_OBJ_KIND_REPLICA, rv, replica_detail, IOD_ARRAY_LEN(replica_detail));
	add_node(&b, rid, "replica", rn, sid, st, det);
	if (!node[0])
		return p;
	/* placement: on each of its GPUs, else on its node */
	struct iod_bitmap bm;
	struct iod_err e = {0};
	iod_bitmap_zero(&bm);
	const char *gl = RS(rv, GPUS);
	if (gl[0] && iod_bitmap_parse(gl, &bm, &e))
		iod_bitmap_zero(&bm);
	bool placed = false;
	for (int x = iod_bitmap_next(&bm, 0); x >= 0 && !group;
	     x = iod_bitmap_next(&bm, (unsigned)x + 1)) {
		snprintf(id, sizeof(id), "node:%s/GPU%d", node, x);
		add_edge(&b, rid, id, "placement", "", st);
		placed = true;
	}
	if (!placed) {
		snprintf(id, sizeof(id), "node:%s", node);
		add_edge(&b, rid, id, "placement", "", st);
	}
	return p;
}

json_t *iod_viz_graph(const struct iod_viz_input *in)
{
	json_t *g = json_object();
	struct gb b = {json_array(), json_array(), json_object()};
	size_t i, j, k;
	const json_t *n, *r, *s;
	size_t n_nodes = json_array_size(items(in->nodes));
	bool group = in->group_over && n_nodes > in->group_over;
	unsigned gpus = 0, bad = 0, replicas = 0;
	json_t *bad_eps = unhealthy_endpoints(in->endpoints);
	json_t *tel = telemetry_index(in->telemetry);
	json_t *drx = drops_index(in->drops);

	if (!g || !b.nodes || !b.edges || !b.edge_ids || !bad_eps || !tel || !drx) {
		json_decref(g);
		json_decref(b.nodes);
		json_decref(b.edges);
		json_decref(b.edge_ids);
		json_decref(bad_eps);
		json_decref(tel);
		json_decref(drx);
		return NULL;
	}
	/* switches and racks first, so a node's parent always precedes it */
	fabric(&b, in->nodes, group);
	json_t *memo_nodes = NULL, *memo_replicas = NULL;
	if (in->memo) {
		memo_nodes = json_object();
		memo_replicas = json_object();
	}
	json_array_foreach(items(in->nodes), i, n)
	{
		const char *name = sval(n, "name");
		char rk[IOD_NAME_MAX + 8];
		node_rack(json_object_get(n, "value"), i, rk, sizeof(rk));
		const json_t *tn = json_object_get(tel, name);
		const json_t *dr = json_object_get(drx, name);
		/* what else the part reads: its telemetry, and its drops if any */
		json_t *dep =
		    dr ? json_pack("{s:O?, s:O}", "telemetry", (json_t *)tn, "drops", (json_t *)dr)
		       : json_incref((json_t *)tn);
		json_t *part = reuse(in->memo, "node", name, n, dep, rk, group);
		if (!part)
			part = node_part(n, tn, dr, dep, rk, group);
		json_decref(dep);
		if (!part)
			continue;
		splice(&b, part);
		gpus += (unsigned)json_integer_value(json_object_get(part, "gpus"));
		bad += json_is_true(json_object_get(part, "bad"));
		if (memo_nodes)
			json_object_set(memo_nodes, name, part);
		json_decref(part);
	}
	json_decref(tel);
	json_decref(drx);
	/* services, their replicas and dependencies */
	struct iod_top_mesh_svc *mesh = NULL;
	uint32_t mesh_n = 0;
	if (in->mesh_metrics && (mesh = calloc(IOD_TOP_SERVICES_MAX, sizeof(*mesh))))
		mesh_n = iod_top_mesh_parse(in->mesh_metrics, strlen(in->mesh_metrics), mesh,
		                            IOD_TOP_SERVICES_MAX);
	/* {service: [ok, all]} in one pass over the replicas */
	json_t *per_svc = json_object();
	json_array_foreach(items(in->replicas), j, r)
	{
		const json_t *rv = json_object_get(r, "value");
		const char *sn = RS(rv, SERVICE);
		json_t *c = json_object_get(per_svc, sn);
		if (!c) {
			c = json_pack("[i, i]", 0, 0);
			json_object_set_new(per_svc, sn, c);
		}
		bool ok = !strcmp(
		    replica_status(rv, json_object_get(bad_eps, sval(r, "name")) != NULL), "ok");
		json_array_set_new(c, 0,
		                   json_integer(json_integer_value(json_array_get(c, 0)) + ok));
		json_array_set_new(c, 1,
		                   json_integer(json_integer_value(json_array_get(c, 1)) + 1));
	}
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
		if (m && det) {
			json_object_set_new(det, "requests_total", json_real(m->requests));
			json_object_set_new(det, "errors_total", json_real(m->errors));
			if (m->p99_s >= 0)
				json_object_set_new(det, "p99_ms", json_real(m->p99_s * 1000));
		}
		const json_t *c = json_object_get(per_svc, sn);
		json_int_t ok = json_integer_value(json_array_get(c, 0)),
		           all = json_integer_value(json_array_get(c, 1));
		add_node(&b, sid, "service", sn, NULL,
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
			if (in->edge_rates) {
				/* this edge's own calls, from the spans */
				char key[IOD_NAME_MAX * 2 + 2];
				snprintf(key, sizeof(key), "%s>%s", sn, json_string_value(dep));
				const json_t *er = json_object_get(in->edge_rates, key);
				double rps = json_number_value(json_object_get(er, "rps"));
				double eps = json_number_value(json_object_get(er, "err_ps"));
				bool part = json_is_true(json_object_get(
				    json_object_get(in->edge_rates, ""), "partial"));
				if (rps > 0)
					snprintf(label, sizeof(label),
					         "mesh: %s%.1f req/s, %.1f err/s, %.1f ms",
					         part ? ">=" : "", rps, eps,
					         json_number_value(json_object_get(er, "mean_ms")));
				else
					snprintf(label, sizeof(label), "mesh: 0 req/s");
				json_t *e = add_edge(&b, sid, to, "depends", label,
				                     eps > 0 ? "warn" : "ok");
				if (e) {
					json_object_set_new(e, "rps", json_real(rps));
					json_object_set_new(e, "err_ps", json_real(eps));
					json_object_set_new(e, "mean_ms",
					                    json_real(json_number_value(
					                        json_object_get(er, "mean_ms"))));
					json_object_set_new(e, "rate_source", json_string("spans"));
					json_object_set_new(e, "rate_partial", json_boolean(part));
				}
				continue;
			}
			if (dm && dm->requests > 0)
				snprintf(label, sizeof(label), "%.0f req, %.0f err", dm->requests,
				         dm->errors);
			add_edge(&b, sid, to, "depends", label,
			         dm && dm->errors > 0 ? "warn" : "ok");
		}
	}
	json_decref(per_svc);
	free(mesh);
	json_array_foreach(items(in->replicas), i, r)
	{
		const char *rn = sval(r, "name");
		const json_t *eb = json_object_get(bad_eps, rn);
		json_t *part = reuse(in->memo, "replica", rn, r, eb, "", group);
		if (!part)
			part = replica_part(r, eb != NULL, group);
		if (!part)
			continue;
		splice(&b, part);
		replicas++;
		bad += json_is_true(json_object_get(part, "bad"));
		if (memo_replicas)
			json_object_set(memo_replicas, rn, part);
		json_decref(part);
	}
	if (in->memo) {
		/* what this graph did not use is gone from the cluster */
		json_object_clear(in->memo);
		json_object_set_new(in->memo, "node", memo_nodes);
		json_object_set_new(in->memo, "replica", memo_replicas);
	}
	json_decref(bad_eps);
	json_decref(b.edge_ids);
	json_object_set_new(g, "nodes", b.nodes);
	json_object_set_new(g, "edges", b.edges);
	json_object_set_new(g, "counts",
	                    json_pack("{s:I, s:i, s:I, s:i, s:i, s:b, s:s}", "nodes",
	                              (json_int_t)n_nodes, "gpus", (int)gpus, "services",
	                              (json_int_t)json_array_size(items(in->services)), "replicas",
	                              (int)replicas, "bad", (int)bad, "grouped", group, "fabric",
	                              "derived"));
	return g;
}

/* ---- per-edge service rates from the mesh's spans ----------------------- */

static const char *span_attr(const json_t *span, const char *key)
{
	size_t i;
	const json_t *a;
	json_array_foreach(json_object_get(span, "attributes"), i, a)
	{
		if (!strcmp(sval(a, "key"), key))
			return sval(json_object_get(a, "value"), "stringValue");
	}
	return "";
}

static uint64_t span_ns(const json_t *span, const char *key)
{
	const char *v = sval(span, key);
	uint64_t n = 0;
	for (; *v >= '0' && *v <= '9'; v++)
		n = n * 10 + (uint64_t)(*v - '0');
	return n;
}

void iod_viz_spans_add(json_t *state, const json_t *answer, uint64_t now_ms)
{
	if (!state || !answer)
		return;
	json_t *buckets = json_object_get(state, "buckets");
	if (!buckets) {
		buckets = json_array();
		json_object_set_new(state, "buckets", buckets);
	}
	bool primed = json_object_get(state, "primed_ms") != NULL;
	if (!primed) {
		json_object_set_new(state, "primed_ms", json_integer((json_int_t)now_ms));
		return;
	}
	json_t *edges = json_object();
	size_t i;
	const json_t *sp;
	json_array_foreach(json_object_get(answer, "spans"), i, sp)
	{
		const char *callee = span_attr(sp, "iod.service");
		const char *caller = span_attr(sp, "iod.caller");
		const char *slash = strchr(caller, '/');
		if (!callee[0] || !slash || !strncmp(caller, "node/", 5) || !slash[1])
			continue;
		char key[IOD_NAME_MAX * 2 + 2];
		snprintf(key, sizeof(key), "%s>%s", slash + 1, callee);
		json_t *c = json_object_get(edges, key);
		if (!c) {
			c = json_pack("[I, I, f]", (json_int_t)0, (json_int_t)0, 0.0);
			json_object_set_new(edges, key, c);
		}
		uint64_t t0 = span_ns(sp, "startTimeUnixNano"), t1 = span_ns(sp, "endTimeUnixNano");
		bool err =
		    json_integer_value(json_object_get(json_object_get(sp, "status"), "code")) == 2;
		json_array_set_new(c, 0,
		                   json_integer(json_integer_value(json_array_get(c, 0)) + 1));
		json_array_set_new(c, 1,
		                   json_integer(json_integer_value(json_array_get(c, 1)) + err));
		json_array_set_new(c, 2,
		                   json_real(json_real_value(json_array_get(c, 2)) +
		                             (t1 > t0 ? (double)(t1 - t0) / 1e6 : 0)));
	}
	bool lost = json_integer_value(json_object_get(answer, "overwritten")) > 0;
	json_array_append_new(buckets, json_pack("{s:I, s:o, s:b}", "at", (json_int_t)now_ms,
	                                         "edges", edges, "lost", lost));
	/* what fell out of the window */
	while (json_array_size(buckets) &&
	       (uint64_t)json_integer_value(json_object_get(json_array_get(buckets, 0), "at")) +
	               IOD_VIZ_RATE_WINDOW_MS <
	           now_ms)
		json_array_remove(buckets, 0);
}

json_t *iod_viz_edge_rates(const json_t *state, uint64_t now_ms)
{
	const json_t *pj = json_object_get(state, "primed_ms");
	if (!pj)
		return NULL;
	uint64_t primed = (uint64_t)json_integer_value(pj);
	uint64_t span = now_ms > primed ? now_ms - primed : 0;
	if (span > IOD_VIZ_RATE_WINDOW_MS)
		span = IOD_VIZ_RATE_WINDOW_MS;
	if (span < 1000) /* under a second is no rate */
		return NULL;
	json_t *sum = json_object(), *out = json_object();
	bool lost = false;
	size_t i;
	const json_t *b;
	json_array_foreach(json_object_get(state, "buckets"), i, b)
	{
		if ((uint64_t)json_integer_value(json_object_get(b, "at")) + span < now_ms)
			continue;
		lost |= json_is_true(json_object_get(b, "lost"));
		const char *k;
		const json_t *c;
		json_object_foreach((json_t *)json_object_get(b, "edges"), k, c)
		{
			json_t *t = json_object_get(sum, k);
			if (!t) {
				t = json_pack("[f, f, f]", 0.0, 0.0, 0.0);
				json_object_set_new(sum, k, t);
			}
			for (size_t q = 0; q < 3; q++)
				json_array_set_new(
				    t, q,
				    json_real(json_number_value(json_array_get(t, q)) +
				              json_number_value(json_array_get(c, q))));
		}
	}
	double secs = (double)span / 1e3;
	const char *k;
	json_t *t;
	json_object_foreach(sum, k, t)
	{
		double req = json_number_value(json_array_get(t, 0));
		json_object_set_new(
		    out, k,
		    json_pack("{s:f, s:f, s:f, s:b}", "rps", req / secs, "err_ps",
		              json_number_value(json_array_get(t, 1)) / secs, "mean_ms",
		              req > 0 ? json_number_value(json_array_get(t, 2)) / req : 0.0,
		              "partial", lost));
	}
	json_object_set_new(out, "", json_pack("{s:f, s:b}", "window_s", secs, "partial", lost));
	json_decref(sum);
	return out;
}

/* ---- deltas: what changed between two graphs ------------------------------ */

/* The changes of one list (nodes or edges) by "id": {"add": [...],
 * "change": [...], "remove": [ids]}; NULL when they are the same. */
static json_t *list_delta(const json_t *old, const json_t *now, size_t *changes)
{
	json_t *ix = NULL, *add = json_array(), *chg = json_array(), *rm = json_array();
	json_t *d = NULL;
	size_t i, n = json_array_size(now);
	const json_t *x;
	if (!add || !chg || !rm)
		goto out;
	/* the usual case: the same ids in the same order (graphs are built in
	 * a fixed order), only some changed: compare element by element; the
	 * memo's shared parts compare equal at the pointer */
	bool same_ids = json_array_size(old) == n;
	for (i = 0; same_ids && i < n; i++) {
		const json_t *a = json_array_get(old, i), *b = json_array_get(now, i);
		same_ids = a == b || !strcmp(sval(a, "id"), sval(b, "id"));
	}
	if (same_ids) {
		for (i = 0; i < n; i++) {
			const json_t *a = json_array_get(old, i), *b = json_array_get(now, i);
			if (a != b && !json_equal(a, b))
				json_array_append(chg, (json_t *)b);
		}
		goto done;
	}
	if (!(ix = json_object()))
		goto out;
	json_array_foreach(old, i, x)
	{
		json_object_set(ix, sval(x, "id"), (json_t *)x);
	}
	json_array_foreach(now, i, x)
	{
		const char *id = sval(x, "id");
		const json_t *was = json_object_get(ix, id);
		if (!was)
			json_array_append(add, (json_t *)x);
		else if (!json_equal(was, x))
			json_array_append(chg, (json_t *)x);
		if (was)
			json_object_del(ix, id);
	}
	const char *id;
	json_t *v;
	json_object_foreach(ix, id, v)
	{
		json_array_append_new(rm, json_string(id));
	}
done:
	*changes += json_array_size(add) + json_array_size(chg) + json_array_size(rm);
	d = json_pack("{s:O, s:O, s:O}", "add", add, "change", chg, "remove", rm);
out:
	json_decref(ix);
	json_decref(add);
	json_decref(chg);
	json_decref(rm);
	return d;
}

int iod_viz_graph_delta(const json_t *old, const json_t *now, json_t **delta)
{
	size_t changes = 0;
	*delta = NULL;
	json_t *n =
	    list_delta(json_object_get(old, "nodes"), json_object_get(now, "nodes"), &changes);
	json_t *e =
	    list_delta(json_object_get(old, "edges"), json_object_get(now, "edges"), &changes);
	bool counts = !json_equal(json_object_get(old, "counts"), json_object_get(now, "counts"));
	if (!n || !e) {
		json_decref(n);
		json_decref(e);
		return -ENOMEM;
	}
	if (!changes && !counts) {
		json_decref(n);
		json_decref(e);
		return 0;
	}
	*delta = json_pack("{s:o, s:o, s:O?}", "nodes", n, "edges", e, "counts",
	                   json_object_get(now, "counts"));
	return *delta ? 1 : -ENOMEM;
}

/* ---- the model: the cluster's objects, kept from a list and a watch --------- */

/* The kinds the graph is built from, as the watch names them. */
static const char *const model_kinds[] = {"node", "service", "replica", "endpoint"};

json_t *iod_viz_model_new(void)
{
	json_t *m = json_object();
	for (size_t i = 0; m && i < IOD_ARRAY_LEN(model_kinds); i++)
		if (json_object_set_new(m, model_kinds[i], json_object())) {
			json_decref(m);
			return NULL;
		}
	return m;
}

int iod_viz_model_load(json_t *model, const char *kind, const json_t *list)
{
	json_t *per = json_object_get(model, kind);
	size_t i;
	const json_t *x;
	if (!per)
		return -EINVAL;
	json_object_clear(per);
	json_array_foreach(items(list), i, x)
	{
		if (!json_is_string(json_object_get(x, "name")) ||
		    json_object_set(per, sval(x, "name"), (json_t *)x))
			return -EINVAL;
	}
	return 0;
}

int iod_viz_model_apply(json_t *model, const json_t *ev)
{
	const char *kind = sval(ev, "kind"), *type = sval(ev, "type"), *name = sval(ev, "name");
	json_t *per = json_object_get(model, kind);
	if (!per || !name[0])
		return 0; /* a kind the graph does not draw */
	if (!strcmp(type, "delete"))
		return json_object_del(per, name) ? 0 : 1;
	if (strcmp(type, "put") || !json_is_object(json_object_get(ev, "value")))
		return -EINVAL;
	const json_t *was = json_object_get(per, name);
	json_t *o = json_pack("{s:s, s:s, s:O, s:I}", "kind", kind, "name", name, "value",
	                      json_object_get(ev, "value"), "rev",
	                      json_integer_value(json_object_get(ev, "rev")));
	if (!o)
		return -ENOMEM;
	/* the watch does not carry the lease: an object keeps the one it had;
	 * a new one has none until the caller reads it (iod_viz_model_unleased) */
	if (was && json_object_get(was, "lease"))
		json_object_set(o, "lease", json_object_get(was, "lease"));
	return json_object_set_new(per, name, o) ? -ENOMEM : 1;
}

bool iod_viz_model_unleased(const json_t *model, const char *kind, const char *name)
{
	const json_t *o = json_object_get(json_object_get(model, kind), name);
	return o && !json_object_get(o, "lease");
}

static int by_name(const void *a, const void *b)
{
	return strcmp(sval(*(json_t *const *)a, "name"), sval(*(json_t *const *)b, "name"));
}

json_t *iod_viz_model_list(const json_t *model, const char *kind)
{
	const json_t *per = json_object_get(model, kind);
	size_t n = json_object_size(per), i = 0;
	json_t **v = calloc(n ? n : 1, sizeof(*v));
	json_t *arr = json_array();
	const char *k;
	json_t *x;
	if (!v || !arr) {
		free(v);
		json_decref(arr);
		return NULL;
	}
	json_object_foreach((json_t *)per, k, x)
	{
		v[i++] = x;
	}
	/* the API lists by name: the same order keeps the page's layout still */
	qsort(v, n, sizeof(*v), by_name);
	for (i = 0; i < n; i++)
		json_array_append(arr, v[i]);
	free(v);
	return json_pack("{s:o}", "items", arr);
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
	                    : !strcmp(kind, "switch")  ? "hexagon"
	                    : !strcmp(kind, "replica") ? "ellipse"
	                    : !strcmp(kind, "rack")    ? "folder"
	                                               : "box";
	int rc = iod_buf_printf(b, "%s", indent);
	rc = rc ? rc : q(b, sval(n, "id"));
	rc = rc ? rc : iod_buf_printf(b, " [label=");
	/* a node's dropped packets, as the page shows them */
	json_int_t drops = json_integer_value(json_object_get(n, "drops"));
	char label[IOD_NAME_MAX * 2 + 48];
	snprintf(label, sizeof(label), drops > 0 ? "%s (%lld dropped)" : "%s", sval(n, "label"),
	         (long long)drops);
	rc = rc ? rc : q(b, label);
	return rc ? rc
	          : iod_buf_printf(b, ", shape=%s, color=\"%s\", penwidth=%s];\n", shape,
	                           colour(sval(n, "status")),
	                           strcmp(sval(n, "status"), "ok") ? "3" : "1.2");
}

/*
 * A node's link to the fabric as the page draws it (src/cli/viz/style.css,
 * classes u0..u4 and nodata, which mirror this table): a fifth of capacity
 * picks the colour and the width; a link without a rate and a capacity is
 * grey and dashed, "no data", never guessed. A broken link stays red.
 */
static const struct {
	const char *colour, *pen;
} util_band[5] = {
    {"#2ca02c", "2"}, {"#8fd14f", "2.5"}, {"#e6c700", "3"}, {"#ff7f0e", "3.5"}, {"#9e0142", "4"}};

int iod_viz_util_band(const json_t *edge)
{
	const json_t *u = json_object_get(edge, "util");
	if (!json_is_number(u))
		return -1;
	double x = json_number_value(u) * 5;
	return !(x >= 0) ? 0 : x >= 4 ? 4 : (int)x;
}

static int dot_edge(struct iod_buf *b, const json_t *e)
{
	const char *kind = sval(e, "kind"), *st = sval(e, "status");
	const char *col = !strcmp(kind, "nvlink") ? "#1f77b4" : colour(st);
	const char *style = !strcmp(kind, "placement") ? "dashed" : "solid";
	const char *pen = !strcmp(kind, "nvlink") || !strcmp(kind, "depends") ? "2" : "1";
	const char *tip = sval(e, "label");
	if ((!strcmp(kind, "net") || !strcmp(kind, "fabric")) && strcmp(st, "bad")) {
		int band = iod_viz_util_band(e);
		if (band < 0) {
			col = "#c4c4c4";
			style = "dashed";
			if (!tip[0])
				tip = "no data";
		} else {
			col = util_band[band].colour;
			pen = util_band[band].pen;
		}
	}
	int rc = iod_buf_printf(b, "  ");
	rc = rc ? rc : q(b, sval(e, "from"));
	rc = rc ? rc : iod_buf_printf(b, " -- ");
	rc = rc ? rc : q(b, sval(e, "to"));
	rc = rc ? rc : iod_buf_printf(b, " [label=");
	rc = rc ? rc : q(b, sval(e, "label"));
	rc = rc ? rc : iod_buf_printf(b, ", tooltip=");
	rc = rc ? rc : q(b, tip);
	return rc ? rc
	          : iod_buf_printf(b, ", color=\"%s\", style=%s, penwidth=%s];\n", col, style, pen);
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
		rc = dot_edge(b, e);
	}
	return rc ? rc : iod_buf_printf(b, "}\n");
}
