/*
 * reschedule.c: what happens to a lost node's replicas (pure).
 *
 * A node is lost when its lease expires: the control plane deletes its Node
 * object, and its replicas are left pointing at a node that is gone. This
 * core finds them and plans their move: stateless replicas at once,
 * stateful ones after a grace period (their data directory is on the lost
 * node; a node that comes back quickly keeps them). Targets are live nodes
 * with enough free GPUs, the fewest replicas first, then name order; the
 * GPUs are the lowest free indexes. Each move is a compare-and-swap put of
 * the Replica object, so two planners (or a planner racing a deploy) can
 * never both win. When the node comes back, its agent sees the replicas are
 * no longer its own and stops them.
 *
 * Pure: JSON in, JSON out; deterministic; no I/O or clock. The seam for the
 * topology-aware scheduler: replace pick_target() by a call into sched/.
 */
#include "iod/agent.h"

#include <stdlib.h>
#include <string.h>

struct target {
	const char *name;       /* node name */
	uint32_t gpus;          /* GPUs it has */
	struct iod_bitmap used; /* GPUs taken by replicas */
	uint32_t replicas;      /* replicas on it */
};

static uint32_t count_of(const json_t *v)
{
	if (json_is_integer(v) && json_integer_value(v) > 0)
		return (uint32_t)IOD_MIN(json_integer_value(v), IOD_BITMAP_BITS);
	if (json_is_array(v))
		return (uint32_t)IOD_MIN(json_array_size(v), IOD_BITMAP_BITS);
	return 0;
}

static const json_t *find_item(const json_t *list, const char *name)
{
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(list, "items"), i, x)
	{
		const char *n;
		if (!iod_json_get_str(x, "name", &n) && !strcmp(n, name))
			return x;
	}
	return NULL;
}

static int pick_target(struct target *t, uint32_t n, uint32_t gpus)
{
	int best = -1;
	for (uint32_t k = 0; k < n; k++) {
		if (t[k].gpus - iod_bitmap_count(&t[k].used) < gpus)
			continue;
		if (best < 0 || t[k].replicas < t[best].replicas)
			best = (int)k;
	}
	return best;
}

json_t *iod_agent_resched_plan(const json_t *nodes, const json_t *replicas, const json_t *services,
                               uint64_t now_ms, uint64_t stateful_grace_ms, json_t **unplaced)
{
	const json_t *items = json_object_get(nodes, "items");
	size_t nn = json_array_size(items), i;
	struct target *t = calloc(nn + 1, sizeof(*t));
	json_t *writes = json_array(), *x;

	*unplaced = json_array();
	if (!t)
		return writes;
	json_array_foreach(items, i, x)
	{
		iod_json_get_str(x, "name", &t[i].name);
		t[i].gpus = count_of(json_object_get(json_object_get(x, "value"), "gpus"));
	}
	/* what live nodes already carry */
	json_array_foreach(json_object_get(replicas, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *node, *gpus;
		struct iod_bitmap b;
		if (iod_json_get_str(v, "node", &node))
			continue;
		for (size_t k = 0; k < nn; k++) {
			if (!t[k].name || strcmp(t[k].name, node))
				continue;
			t[k].replicas++;
			if (!iod_json_get_str(v, "gpus", &gpus) &&
			    !iod_bitmap_parse(gpus, &b, NULL))
				iod_bitmap_or(&t[k].used, &b);
		}
	}
	json_array_foreach(json_object_get(replicas, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *name, *node = NULL, *gpus = "", *svc = "", *type = "stateless";
		uint64_t rev = 0, lost_ms = 0;
		struct iod_bitmap b;
		if (iod_json_get_str(x, "name", &name) || iod_json_get_u64(x, "rev", &rev))
			continue;
		iod_json_get_str(v, "node", &node);
		if (node && find_item(nodes, node))
			continue; /* its node is alive */
		iod_json_get_str(v, "gpus", &gpus);
		iod_json_get_str(v, "service", &svc);
		const json_t *sx = find_item(services, svc);
		iod_json_get_str(json_object_get(sx, "value"), "type", &type);
		iod_bitmap_zero(&b);
		iod_bitmap_parse(gpus, &b, NULL);
		bool stateful = !strcmp(type, "stateful");
		if (stateful && iod_json_get_u64(v, "lost_ms", &lost_ms)) {
			/* first sighting: record when it was lost, move it later */
			json_t *nv = json_deep_copy(v);
			json_object_set_new(nv, "lost_ms", json_integer((json_int_t)now_ms));
			json_object_set_new(nv, "phase", json_string("lost"));
			json_object_set_new(nv, "ready", json_false());
			json_object_set_new(
			    nv, "reason",
			    json_string("node lost; stateful: waiting for it to come "
			                "back before moving (its data is there)"));
			json_array_append_new(writes,
			                      json_pack("{s:s, s:I, s:o}", "name", name, "prev_rev",
			                                (json_int_t)rev, "value", nv));
			continue;
		}
		if (stateful && now_ms < lost_ms + stateful_grace_ms)
			continue;
		int k = pick_target(t, (uint32_t)nn, iod_bitmap_count(&b));
		if (k < 0) {
			json_array_append_new(
			    *unplaced,
			    json_pack("{s:s, s:s}", "replica", name, "reason",
			              nn ? "no live node has enough free GPUs" : "no live nodes"));
			continue;
		}
		struct iod_bitmap set;
		uint32_t want = iod_bitmap_count(&b);
		char gl[256], why[IOD_ERR_MSG_MAX];
		iod_bitmap_zero(&set);
		for (uint32_t g = 0, got = 0; g < t[k].gpus && got < want; g++)
			if (!iod_bitmap_test(&t[k].used, g)) {
				iod_bitmap_set(&set, g);
				got++;
			}
		iod_bitmap_or(&t[k].used, &set);
		t[k].replicas++;
		iod_bitmap_format(&set, gl, sizeof(gl));
		snprintf(why, sizeof(why), "rescheduled from lost node %s to %s (%s)",
		         node ? node : "?", t[k].name,
		         stateful ? "stateful, grace passed" : "stateless");
		json_t *nv = json_deep_copy(v);
		json_object_set_new(nv, "node", json_string(t[k].name));
		json_object_set_new(nv, "gpus", json_string(gl));
		json_object_del(nv, "cpus"); /* the old node's CPU set means nothing here */
		json_object_del(nv, "cpu_affinity");
		json_object_del(nv, "numa");
		json_object_del(nv, "mem_numa");
		json_object_del(nv, "nic");
		json_object_del(nv, "lost_ms");
		json_object_del(nv, "addr"); /* the old node's netns address */
		json_object_set_new(nv, "phase", json_string("pending"));
		json_object_set_new(nv, "ready", json_false());
		json_object_set_new(nv, "reason", json_string(why));
		json_object_set_new(nv, "moved_from", json_string(node ? node : ""));
		json_array_append_new(writes, json_pack("{s:s, s:I, s:o}", "name", name, "prev_rev",
		                                        (json_int_t)rev, "value", nv));
	}
	free(t);
	return writes;
}
