/*
 * server_extender.c: the kube-scheduler extender served by `iod server`:
 * POST /v1/extender/filter and /v1/extender/prioritize, answered by the same
 * core as `iod extender` (src/k8s/extender.c) over the Node objects the
 * state holds. A node is known by its iod name with the shape its
 * registered topology (else its model) gives, and its rack and zone.
 *
 * It runs on the loop: the request is bounded by IOD_API_BODY_MAX (4 MiB;
 * kube-scheduler with nodeCacheCapable sends node names only) and the work
 * by the nodes iod knows.
 */
#include "server_internal.h"

#include "iod/k8s.h"

static const char *str_of(const json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? v : "";
}

/* The known nodes of the state into x (arrays the caller frees). */
static int known_nodes(const struct iod_state *st, struct iod_k8s_ext *x,
                       struct iod_k8s_ext_shape **shapes, struct iod_k8s_ext_node **nodes,
                       struct iod_err *e)
{
	json_t *l = iod_state_list(st, IOD_STATE_NODE);
	const json_t *items = json_object_get(l, "items");
	size_t n = json_array_size(items), i;
	const json_t *it;

	memset(x, 0, sizeof(*x));
	*shapes = calloc(n ? n : 1, sizeof(**shapes));
	*nodes = calloc(n ? n : 1, sizeof(**nodes));
	if (!l || !*shapes || !*nodes) {
		json_decref(l);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	json_array_foreach(items, i, it)
	{
		const json_t *v = json_object_get(it, "value");
		struct iod_k8s_ext_shape *sh = &(*shapes)[x->shapes_n];
		struct iod_k8s_ext_node *nd = &(*nodes)[x->nodes_n];
		struct iod_err se = {0};
		if (iod_ctrl_node_shape(v, &sh->shape, &se))
			continue; /* a node the scheduler cannot take: unknown to the extender */
		const char *model = str_of(v, "model");
		iod_strlcpy(sh->model, model[0] ? model : str_of(it, "name"), sizeof(sh->model));
		iod_strlcpy(nd->name, str_of(it, "name"), sizeof(nd->name));
		const char *rack = str_of(v, "rack");
		iod_strlcpy(nd->rack, rack[0] ? rack : str_of(json_object_get(v, "labels"), "rack"),
		            sizeof(nd->rack));
		iod_strlcpy(nd->zone, str_of(v, "zone"), sizeof(nd->zone));
		nd->shape = x->shapes_n++;
		x->nodes_n++;
	}
	json_decref(l);
	x->shapes = *shapes;
	x->nodes = *nodes;
	return 0;
}

MHD_RESULT api__do_extender(struct req *q, const char *method, const char *verb)
{
	struct server *s = q->srv;
	struct iod_err e = {0};
	struct iod_k8s_ext x;
	struct iod_k8s_ext_shape *shapes = NULL;
	struct iod_k8s_ext_node *nodes = NULL;
	json_t *out = NULL;

	if (strcmp(verb, "filter") && strcmp(verb, "prioritize"))
		return api__queue_err(
		    s, q->conn, 404,
		    api__err_json("extender: POST /v1/extender/filter or /v1/extender/prioritize"));
	if (strcmp(method, "POST"))
		return api__queue_err(
		    s, q->conn, 405,
		    api__err_json("extender: POST /v1/extender/%s with ExtenderArgs", verb));
	int rc = known_nodes(iod_raft_member_state(s->node), &x, &shapes, &nodes, &e);
	if (!rc)
		rc = iod_k8s_ext_answer(&x, verb, q->body.data ? q->body.data : "", q->body.len,
		                        &out, &e);
	free(shapes);
	free(nodes);
	if (!rc)
		return api__queue_json(s, q->conn, 200, out);
	/* as `iod extender`: filter has the spec's Error field; prioritize none */
	return api__queue_json(s, q->conn,
	                       rc == -ENOENT            ? 404
	                       : rc == -ENOMEM          ? 500
	                       : strcmp(verb, "filter") ? 400
	                                                : 200,
	                       json_pack("{s:s}", "Error", e.msg));
}
