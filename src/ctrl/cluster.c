/*
 * cluster.c: Node objects -> the scheduler's cluster (pure).
 *
 * The one place the control plane turns what nodes registered into what
 * the scheduler places on. Before this existed, the deploy and the
 * rescheduling plan each rebuilt nodes from their model name, so a node
 * registered from real discovery ("model": "host") or an hwloc XML
 * ("model": "xml") matched no built-in model and was skipped without a
 * word: no real machine was ever schedulable. Now the registered topology
 * is the truth; the model name is only a fallback for hand-written Node
 * objects that carry none.
 *
 * Shapes are compared whole (memcmp of the zeroed struct), so nodes of one
 * kind of machine share one shape and its memoized GPU-set search, however
 * they registered.
 *
 * Pure: no I/O, no clock; never prints.
 */
#include "iod/ctrl.h"
#include "iod/sched.h"
#include "iod/topo.h"

#include <stdlib.h>
#include <string.h>

/* Node fields, borrowed from the stored value (include/iod/objects.h). */
static const char *node_str(const json_t *v, enum iod_obj_node_field f)
{
	return iod_obj_peek_str(IOD_OBJ_KIND_NODE, v, f);
}

static const json_t *node_json(const json_t *v, enum iod_obj_node_field f)
{
	return iod_obj_peek_json(IOD_OBJ_KIND_NODE, v, f);
}

static uint32_t gpu_count(const json_t *v)
{
	struct iod_obj_node n = {.gpus = (json_t *)node_json(v, IOD_OBJ_NODE_GPUS)};
	return iod_obj_node_gpus(&n);
}

/* The node's topology into t: registered, else its model, else generic. */
static int node_topo(const json_t *v, struct iod_topo_node *t, struct iod_err *e)
{
	const json_t *topo = node_json(v, IOD_OBJ_NODE_TOPOLOGY);
	const char *model = node_str(v, IOD_OBJ_NODE_MODEL);
	struct iod_err te = {0};
	int rc;

	if (topo) {
		if ((rc = iod_topo_from_json(topo, t, &te)))
			return iod_err_set(e, rc, "its registered topology is invalid: %s", te.msg);
		return 0;
	}
	if (model && model[0]) {
		if ((rc = iod_topo_model_load(model, t, &te)))
			return iod_err_set(
			    e, rc,
			    "it registered no topology and its model is not built in: "
			    "%s",
			    te.msg);
		return 0;
	}
	if ((rc = iod_topo_model_generic(gpu_count(v), t, &te)))
		return iod_err_set(e, rc, "it registered no topology or model: %s", te.msg);
	return 0;
}

int iod_ctrl_node_shape(const json_t *node_value, struct iod_sched_shape *out, struct iod_err *e)
{
	struct iod_topo_node *t = calloc(1, sizeof(*t));
	const char *model = node_str(node_value, IOD_OBJ_NODE_MODEL);
	int rc;

	IOD_ASSERT(out != NULL);
	if (!t)
		return iod_err_set(e, -ENOMEM, "out of memory");
	if (!json_is_object(node_value)) {
		free(t);
		return iod_err_set(e, -EINVAL, "its value is not an object");
	}
	memset(out, 0, sizeof(*out));
	rc = node_topo(node_value, t, e);
	if (!rc)
		rc = iod_sched_shape_from_topo(t, out, e);
	free(t);
	if (rc)
		return rc;
	/* name the shape by the kind of machine, not by the host that
	 * discovered it, so identical machines compare equal */
	if (model && model[0]) {
		memset(out->model, 0, sizeof(out->model));
		iod_strlcpy(out->model, model, sizeof(out->model));
	}
	return 0;
}

/* Two registered topologies describe the same machine: equal in every
 * member but the host's name. */
static bool topo_same(const json_t *a, const json_t *b)
{
	const char *k;
	const json_t *va;
	if (a == b)
		return true;
	if (!json_is_object(a) || !json_is_object(b) || json_object_size(a) != json_object_size(b))
		return false;
	json_object_foreach((json_t *)a, k, va)
	{
		if (!strcmp(k, "name"))
			continue;
		if (!json_equal(va, json_object_get(b, k)))
			return false;
	}
	return true;
}

static void skip(const struct iod_ctrl_cluster_opts *o, const char *node, const char *why)
{
	if (o->skipped)
		json_array_append_new(
		    o->skipped, json_pack("{s:s, s:s}", "node", node ? node : "?", "reason", why));
}

/* One cluster build: the shapes registered so far and the topologies seen. */
struct build {
	struct iod_sched_cluster *c;        /* being built */
	struct iod_sched_shape *shapes;     /* shapes_n registered, in order */
	uint32_t ids[IOD_SCHED_SHAPES_MAX]; /* the scheduler's id of each */
	uint32_t shapes_n;
	struct iod_sched_shape cur; /* scratch: the node being converted */
	struct {
		const json_t *topo; /* a registered topology already converted */
		const char *model;  /* its node's model name */
		uint32_t shape;     /* index into shapes */
	} seen[IOD_CTRL_TOPOS_SEEN_MAX];
	uint32_t seen_n;
};

/*
 * The scheduler's shape id for node value v. A machine seen before is not
 * converted again: converting a registered topology costs ~0.3 ms (a DGX),
 * comparing it with one seen ~0.02 ms. -E2BIG when there are too many
 * distinct shapes (fatal); any other error means skip this node (se says why).
 */
static int shape_id(struct build *b, const json_t *v, uint32_t *id, struct iod_err *se)
{
	const json_t *topo = node_json(v, IOD_OBJ_NODE_TOPOLOGY);
	const char *model = node_str(v, IOD_OBJ_NODE_MODEL);
	uint32_t m;
	int rc;

	if (!model)
		model = "";
	for (m = 0; topo && m < b->seen_n; m++)
		if (!strcmp(b->seen[m].model, model) && topo_same(b->seen[m].topo, topo)) {
			*id = b->ids[b->seen[m].shape];
			return 0;
		}
	if ((rc = iod_ctrl_node_shape(v, &b->cur, se)))
		return rc == -E2BIG ? -EINVAL : rc; /* that node's problem only */
	for (m = 0; m < b->shapes_n; m++)
		if (!memcmp(&b->shapes[m], &b->cur, sizeof(b->cur)))
			break;
	if (m == b->shapes_n) {
		if (b->shapes_n == IOD_SCHED_SHAPES_MAX)
			return iod_err_set(se, -E2BIG,
			                   "the nodes have more than %d distinct hardware shapes "
			                   "(IOD_SCHED_SHAPES_MAX)",
			                   IOD_SCHED_SHAPES_MAX);
		if ((rc = iod_sched_shape_add(b->c, &b->cur, &b->ids[m], se)))
			return rc == -E2BIG ? -EINVAL : rc;
		b->shapes[m] = b->cur;
		b->shapes_n++;
	}
	if (topo && b->seen_n < IOD_CTRL_TOPOS_SEEN_MAX) {
		b->seen[b->seen_n].topo = topo;
		b->seen[b->seen_n].model = model;
		b->seen[b->seen_n++].shape = m;
	}
	*id = b->ids[m];
	return 0;
}

int iod_ctrl_cluster_build(const json_t *nodes, const struct iod_ctrl_cluster_opts *opts,
                           struct iod_sched_cluster **out, uint32_t *node_ids, struct iod_err *e)
{
	const json_t *items = json_object_get(nodes, "items");
	size_t n = json_array_size(items);
	struct build *b = calloc(1, sizeof(*b));
	int rc;

	IOD_ASSERT(opts != NULL && out != NULL);
	*out = NULL;
	if (!b || !(b->shapes = calloc(IOD_SCHED_SHAPES_MAX, sizeof(*b->shapes)))) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		goto done;
	}
	rc = iod_sched_cluster_new((uint32_t)n + 1, opts->replicas_max + 1, &b->c, e);
	for (size_t i = 0; i < n && !rc; i++) {
		const json_t *x = json_array_get(items, i), *v = json_object_get(x, "value");
		const char *name = NULL, *rack = NULL, *zone = NULL;
		struct iod_err se = {0};
		uint32_t shape = 0, id = 0;

		if (node_ids)
			node_ids[i] = UINT32_MAX;
		if (iod_json_get_str(x, "name", &name))
			continue;
		if ((rc = shape_id(b, v, &shape, &se))) {
			if (rc == -E2BIG) {
				iod_err_set(e, rc, "%s", se.msg);
				break;
			}
			rc = 0;
			skip(opts, name, se.msg);
			continue;
		}
		rack = node_str(v, IOD_OBJ_NODE_RACK);
		zone = node_str(v, IOD_OBJ_NODE_ZONE);
		struct iod_sched_node_spec ns = {
		    .name = name,
		    .shape = shape,
		    .rack = rack,
		    .zone = zone,
		    .cordoned = json_is_true(node_json(v, IOD_OBJ_NODE_CORDONED)),
		    .gpus_used = opts->gpus_used ? opts->gpus_used[i] : 0,
		    .accs_used = opts->accs_used ? opts->accs_used[i] : 0,
		};
		if (iod_sched_node_add(b->c, &ns, &id, &se)) {
			skip(opts, name, se.msg);
			continue;
		}
		if (node_ids)
			node_ids[i] = id;
	}
done:
	if (b && rc)
		iod_sched_cluster_free(b->c);
	else if (b)
		*out = b->c;
	if (b)
		free(b->shapes);
	free(b);
	return rc;
}
