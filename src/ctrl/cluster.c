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
#include "iod/topo.h"

#include <stdlib.h>
#include <string.h>

static uint32_t count_of(const json_t *v)
{
	if (json_is_integer(v) && json_integer_value(v) > 0)
		return (uint32_t)IOD_MIN(json_integer_value(v), IOD_BITMAP_BITS);
	if (json_is_array(v))
		return (uint32_t)IOD_MIN(json_array_size(v), IOD_BITMAP_BITS);
	return 0;
}

/* The node's topology into t: registered, else its model, else generic. */
static int node_topo(const json_t *v, struct iod_topo_node *t, struct iod_err *e)
{
	const json_t *topo = json_object_get(v, "topology");
	const char *model = NULL;
	struct iod_err te = {0};
	int rc;

	if (topo) {
		if ((rc = iod_topo_from_json(topo, t, &te)))
			return iod_err_set(e, rc, "its registered topology is invalid: %s", te.msg);
		return 0;
	}
	if (!iod_json_get_str(v, "model", &model) && model[0]) {
		if ((rc = iod_topo_model_load(model, t, &te)))
			return iod_err_set(e, rc,
			                   "it registered no topology and its model is not built in: "
			                   "%s",
			                   te.msg);
		return 0;
	}
	if ((rc = iod_topo_model_generic(count_of(json_object_get(v, "gpus")), t, &te)))
		return iod_err_set(e, rc, "it registered no topology or model: %s", te.msg);
	return 0;
}

int iod_ctrl_node_shape(const json_t *node_value, struct iod_sched_shape *out, struct iod_err *e)
{
	struct iod_topo_node *t = calloc(1, sizeof(*t));
	const char *model = NULL;
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
	if (!iod_json_get_str(node_value, "model", &model) && model[0]) {
		memset(out->model, 0, sizeof(out->model));
		iod_strlcpy(out->model, model, sizeof(out->model));
	}
	return 0;
}

static void skip(const struct iod_ctrl_cluster_opts *o, const char *node, const char *why)
{
	if (o->skipped)
		json_array_append_new(o->skipped,
		                      json_pack("{s:s, s:s}", "node", node ? node : "?", "reason", why));
}

int iod_ctrl_cluster_build(const json_t *nodes, const struct iod_ctrl_cluster_opts *opts,
                           struct iod_sched_cluster **out, uint32_t *node_ids,
                           struct iod_err *e)
{
	const json_t *items = json_object_get(nodes, "items");
	size_t n = json_array_size(items);
	struct iod_sched_shape *shapes = calloc(IOD_SCHED_SHAPES_MAX, sizeof(*shapes));
	struct iod_sched_shape *cur = calloc(1, sizeof(*cur));
	uint32_t shape_ids[IOD_SCHED_SHAPES_MAX], shapes_n = 0;
	int rc;

	IOD_ASSERT(opts != NULL && out != NULL);
	*out = NULL;
	if (!shapes || !cur) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		goto done;
	}
	rc = iod_sched_cluster_new((uint32_t)n + 1, opts->replicas_max + 1, out, e);
	for (size_t i = 0; i < n && !rc; i++) {
		const json_t *x = json_array_get(items, i), *v = json_object_get(x, "value");
		const char *name = NULL, *rack = NULL, *zone = NULL;
		struct iod_err se = {0};
		uint32_t m;

		if (node_ids)
			node_ids[i] = UINT32_MAX;
		if (iod_json_get_str(x, "name", &name))
			continue;
		if (iod_ctrl_node_shape(v, cur, &se)) {
			skip(opts, name, se.msg);
			continue;
		}
		for (m = 0; m < shapes_n; m++)
			if (!memcmp(&shapes[m], cur, sizeof(*cur)))
				break;
		if (m == shapes_n) {
			if (shapes_n == IOD_SCHED_SHAPES_MAX) {
				rc = iod_err_set(e, -E2BIG,
				                 "the nodes have more than %d distinct hardware shapes "
				                 "(IOD_SCHED_SHAPES_MAX)",
				                 IOD_SCHED_SHAPES_MAX);
				break;
			}
			if (iod_sched_shape_add(*out, cur, &shape_ids[m], &se)) {
				skip(opts, name, se.msg);
				continue;
			}
			shapes[m] = *cur;
			shapes_n++;
		}
		iod_json_get_str(v, "rack", &rack);
		iod_json_get_str(v, "zone", &zone);
		struct iod_sched_node_spec ns = {
		    .name = name,
		    .shape = shape_ids[m],
		    .rack = rack,
		    .zone = zone,
		    .cordoned = json_is_true(json_object_get(v, "cordoned")),
		    .gpus_used = opts->gpus_used ? opts->gpus_used[i] : 0,
		    .accs_used = opts->accs_used ? opts->accs_used[i] : 0,
		};
		uint32_t id;
		if (iod_sched_node_add(*out, &ns, &id, &se)) {
			skip(opts, name, se.msg);
			continue;
		}
		if (node_ids)
			node_ids[i] = id;
	}
done:
	free(shapes);
	free(cur);
	if (rc && *out) {
		iod_sched_cluster_free(*out);
		*out = NULL;
	}
	return rc;
}
