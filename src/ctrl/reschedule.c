/*
 * reschedule.c: what happens to a lost node's replicas (pure).
 *
 * A node is lost when its lease expires: the control plane deletes its Node
 * object, and its replicas are left pointing at a node that is gone. This
 * core finds them and plans their move: stateless replicas at once,
 * stateful ones after a grace period (their data directory is on the lost
 * node; a node that comes back quickly keeps them).
 *
 * The targets come from the topology-aware scheduler (sched/), with the
 * rules of a deploy (deploy.c): the live nodes' shapes from the
 * topology each registered (src/ctrl/), every replica on a live node adopted (its GPUs,
 * accelerators, CPUs, memory and NIC are taken, and anti-affinity and
 * spread see it), each service's request from its stored spec. The
 * replacement gets a GPU set, accelerators, CPU set, NUMA node and NIC
 * chosen exactly as a deploy would, with the scheduler's explanation;
 * what fits nowhere is reported with the scheduler's reason (and written
 * once into the replica, so `iod get replicas` shows it). Each move is a
 * compare-and-swap put of the Replica object, so two planners (or a
 * planner racing a deploy) never both win.
 * When the node comes back, its agent sees the replicas are no longer its
 * own and stops them.
 *
 * Pure: JSON in, JSON out; deterministic; no I/O or clock.
 */
#include "iod/ctrl.h"
#include "iod/net.h"
#include "iod/objects.h"
#include "iod/sched.h"
#include "iod/spec.h"
#include "iod/topo.h"

#include <stdlib.h>
#include <string.h>

/* A replica whose node is gone and that moves now. */
struct orphan {
	const char *name;    /* replica name */
	const json_t *value; /* its Replica value */
	uint64_t rev;        /* for the compare-and-swap */
	const char *from;    /* the lost node */
	bool stateful;       /* waited for its grace */
	uint32_t svc;        /* index into the requests */
};

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

/*
 * The scheduler's request for a service, from its stored spec (what the
 * deploy stored: the normalized spec JSON plus "generation" and "gpu").
 * A service whose spec does not load (hand-written state) falls back to
 * the GPU count of the replica being moved, so it can still go somewhere.
 */
static void request_of(const json_t *svc_value, const char *name, uint32_t fallback_gpus,
                       struct iod_sched_request *out)
{
	json_t *v = iod_obj_service_spec(svc_value);
	struct iod_spec *spec = NULL;
	struct iod_spec_diags *d = calloc(1, sizeof(*d));
	const char *type = "";
	bool done = false;

	if (v && d) {
		/* without dependencies (they do not change placement, and would
		 * need the other services to validate) */
		json_object_del(v, "depends_on");
		json_object_del(v, "storage"); /* checkpoints: not placement */
		json_t *doc = json_pack("{s:[O]}", "services", v);
		char *text = doc ? iod_json_string(doc, false) : NULL;
		if (text && !iod_spec_load_buffer(name, text, strlen(text), &spec, d) &&
		    spec->services_n == 1 &&
		    !iod_sched_request_from_spec(&spec->services[0], out, NULL))
			done = true;
		free(text);
		json_decref(doc);
	}
	if (!done) {
		memset(out, 0, sizeof(*out));
		iod_strlcpy(out->service, name, sizeof(out->service));
		out->gpus = fallback_gpus;
		out->numa = IOD_SCHED_NUMA_BEST_EFFORT;
		type = iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, svc_value, IOD_OBJ_SERVICE_TYPE);
		out->stateful = type && !strcmp(type, "stateful");
	}
	iod_spec_free(spec);
	free(d);
	json_decref(v);
}

/* The scheduler's cluster from the live Node objects, each from the
 * topology it registered: the deploy's conversion (src/ctrl/). */
static struct iod_sched_cluster *build_cluster(const json_t *nodes, uint32_t replicas_max,
                                               uint32_t *node_ids)
{
	struct iod_ctrl_cluster_opts o = {.replicas_max = replicas_max};
	struct iod_sched_cluster *c = NULL;
	if (iod_ctrl_cluster_build(nodes, &o, &c, node_ids, NULL))
		return NULL;
	return c;
}

/* The index of a live node by name, or -1. */
static int node_index(const json_t *nodes, const char *name)
{
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(nodes, "items"), i, x)
	{
		const char *n;
		if (name && !iod_json_get_str(x, "name", &n) && !strcmp(n, name))
			return (int)i;
	}
	return -1;
}

static json_t *cas_put(const char *name, uint64_t rev, json_t *value)
{
	return json_pack("{s:s, s:I, s:o}", "name", name, "prev_rev", (json_int_t)rev, "value",
	                 value);
}

/* A replica that fits nowhere: said once in the replica itself (a second
 * identical write would only wake every watcher again). */
static void cannot_place(const struct orphan *o, const char *reason, const char *why,
                         json_t *writes, json_t *unplaced)
{
	char text[IOD_AGENT_REASON_MAX + IOD_SCHED_WHY_MAX];
	json_array_append_new(unplaced, json_pack("{s:s, s:s, s:s}", "replica", o->name, "reason",
	                                          reason, "why", why));
	snprintf(text, sizeof(text), "node %s lost; cannot reschedule (%s): %s",
	         o->from ? o->from : "?", reason, why);
	struct iod_obj_replica *r = malloc(sizeof(*r));
	if (!r)
		return;
	iod_obj_replica_from_json(o->value, r, NULL);
	if (strcmp(r->reason, text)) {
		iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_PHASE, "pending");
		iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_READY, false);
		iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_REASON, text);
		json_array_append_new(writes, cas_put(o->name, o->rev, iod_obj_replica_to_json(r)));
	}
	iod_obj_replica_free(r);
	free(r);
}

json_t *iod_ctrl_resched_plan(const json_t *nodes, const json_t *replicas, const json_t *services,
                              uint64_t now_ms, uint64_t stateful_grace_ms, json_t **unplaced)
{
	const json_t *items = json_object_get(replicas, "items");
	size_t nr = json_array_size(items), nn = json_array_size(json_object_get(nodes, "items"));
	struct orphan *orph = calloc(nr + 1, sizeof(*orph));
	struct iod_sched_request *reqs = calloc(nr + 1, sizeof(*reqs));
	uint32_t *node_ids = calloc(nn + 1, sizeof(*node_ids));
	json_t *writes = json_array(), *x;
	struct iod_sched_cluster *cl = NULL;
	struct iod_sched_result res;
	struct iod_ctrl_ipam ipam = {0};
	struct iod_obj_replica *r = malloc(sizeof(*r));
	uint32_t on = 0, rn = 0;
	size_t i;

	memset(&res, 0, sizeof(res));
	*unplaced = json_array();
	if (r)
		iod_obj_replica_init(r);
	if (!orph || !reqs || !node_ids || !r)
		goto out;

	/* 1. the orphans that move now, and the requests of their services */
	json_array_foreach(items, i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *name, *type = "stateless";
		uint64_t rev = 0;
		if (iod_json_get_str(x, "name", &name) || iod_json_get_u64(x, "rev", &rev))
			continue;
		iod_obj_replica_free(r);
		iod_obj_replica_from_json(v, r, NULL);
		const char *node = iod_obj_has(r, IOD_OBJ_REPLICA_NODE) ? r->node : NULL;
		if (node_index(nodes, node) >= 0)
			continue; /* its node is alive */
		const json_t *sv = json_object_get(find_item(services, r->service), "value");
		type = iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, sv, IOD_OBJ_SERVICE_TYPE);
		bool stateful = type && !strcmp(type, "stateful");
		if (stateful && stateful_grace_ms && !iod_obj_has(r, IOD_OBJ_REPLICA_LOST_MS)) {
			/* first sighting: record when it was lost, move it later (with
			 * no grace it moves in this plan: a `lost` write first would
			 * only cost a watch round, docs/storage.md "Recovery on node
			 * loss") */
			iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_LOST_MS, (int64_t)now_ms);
			iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_PHASE, "lost");
			iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_READY, false);
			iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_REASON,
			                        "node lost; stateful: waiting for it to come "
			                        "back before moving (its data is there)");
			json_array_append_new(writes,
			                      cas_put(name, rev, iod_obj_replica_to_json(r)));
			continue;
		}
		if (stateful && now_ms < r->lost_ms + stateful_grace_ms)
			continue;
		struct orphan *o = &orph[on++];
		o->name = name;
		o->value = v;
		o->rev = rev;
		/* the lost node's name, borrowed from the stored value */
		o->from = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
		o->stateful = stateful;
		for (o->svc = 0; o->svc < rn && strcmp(reqs[o->svc].service, r->service); o->svc++)
			;
		if (o->svc == rn) {
			request_of(sv, r->service,
			           (uint32_t)__builtin_popcount(iod_sched_mask_parse(r->gpus)),
			           &reqs[rn]);
			if (strcmp(reqs[rn].service,
			           r->service)) /* a spec renaming it: keep ours */
				iod_strlcpy(reqs[rn].service, r->service, sizeof(reqs[rn].service));
			reqs[rn].replicas = 0; /* its orphans, counted below */
			rn++;
		}
		reqs[o->svc].replicas++;
	}
	if (!on)
		goto out;
	if (!nn) {
		for (uint32_t k = 0; k < on; k++)
			cannot_place(&orph[k], iod_sched_reason_name(IOD_SCHED_REASON_NO_NODES),
			             "no live nodes", writes, *unplaced);
		goto out;
	}

	/* 2. the live cluster: nodes, and every replica on them adopted */
	cl = build_cluster(nodes, (uint32_t)nr + on, node_ids);
	if (!cl || iod_sched_result_init(&res, on + 1, rn + 1)) {
		for (uint32_t k = 0; k < on; k++)
			cannot_place(&orph[k], "internal", "out of memory planning the move",
			             writes, *unplaced);
		goto out;
	}
	json_array_foreach(items, i, x)
	{
		struct iod_sched_request rq;
		struct iod_sched_existing ex = {.mem_numa = -1, .nic = -1};
		iod_obj_replica_free(r);
		iod_obj_replica_from_json(json_object_get(x, "value"), r, NULL);
		int k = node_index(nodes, iod_obj_has(r, IOD_OBJ_REPLICA_NODE) ? r->node : NULL);
		if (k < 0 || node_ids[k] == UINT32_MAX)
			continue;
		ex.node = node_ids[k];
		ex.gpu_mask =
		    iod_obj_has(r, IOD_OBJ_REPLICA_GPUS) ? iod_sched_mask_parse(r->gpus) : 0;
		ex.acc_mask = iod_obj_has(r, IOD_OBJ_REPLICA_ACCELERATORS)
		                  ? iod_sched_mask_parse(r->accelerators)
		                  : 0;
		iod_bitmap_zero(&ex.cpus);
		if (iod_obj_has(r, IOD_OBJ_REPLICA_CPUS))
			iod_bitmap_parse(r->cpus, &ex.cpus, NULL);
		ex.ordinal = r->ordinal;
		if (iod_obj_has(r, IOD_OBJ_REPLICA_MEM_NUMA))
			ex.mem_numa = r->mem_numa;
		if (iod_obj_has(r, IOD_OBJ_REPLICA_NIC))
			ex.nic = r->nic;
		uint32_t j;
		for (j = 0; j < rn && strcmp(reqs[j].service, r->service); j++)
			;
		if (j < rn) {
			rq = reqs[j];
		} else {
			request_of(json_object_get(find_item(services, r->service), "value"),
			           r->service, (uint32_t)__builtin_popcount(ex.gpu_mask), &rq);
			iod_strlcpy(rq.service, r->service, sizeof(rq.service));
		}
		uint32_t id;
		/* a replica the state over-commits stays unaccounted (it runs anyway) */
		iod_sched_adopt(cl, &rq, &ex, &id, NULL);
	}

	/* 3. place the orphans as a deploy would */
	struct iod_sched_opts opts;
	struct iod_err e = {0};
	iod_sched_opts_default(&opts);
	if (iod_sched_place(cl, reqs, rn, &opts, &res, &e)) {
		for (uint32_t k = 0; k < on; k++)
			cannot_place(&orph[k], "invalid", e.msg, writes, *unplaced);
		goto out;
	}
	/* the addresses the Replicas hold (a move's new one is free of them) */
	if (iod_ctrl_ipam_init(&ipam, replicas)) {
		for (uint32_t k = 0; k < on; k++)
			cannot_place(&orph[k], "internal", "out of memory planning the move",
			             writes, *unplaced);
		goto out;
	}
	/* the k-th placement of a request goes to its service's k-th orphan
	 * (both in name order) */
	uint32_t *next = calloc(rn + 1, sizeof(*next));
	for (uint32_t k = 0; next && k < res.n; k++) {
		const struct iod_sched_placement *p = &res.p[k];
		uint32_t want = next[p->request]++, seen = 0, oi;
		for (oi = 0; oi < on; oi++)
			if (orph[oi].svc == p->request && seen++ == want)
				break;
		if (oi == on)
			continue;
		const struct orphan *o = &orph[oi];
		if (!p->placed) {
			cannot_place(o, iod_sched_reason_name(p->reason), p->why, writes,
			             *unplaced);
			continue;
		}
		char gpus[128] = "", why[IOD_SCHED_WHY_MAX + 256];
		const char *to = iod_sched_node_name(cl, p->node);
		iod_sched_mask_format(p->gpu_mask, gpus, sizeof(gpus));
		snprintf(why, sizeof(why), "rescheduled from lost node %s to %s (%s), GPUs %s: %s",
		         o->from ? o->from : "?", to,
		         o->stateful ? "stateful, grace passed" : "stateless",
		         gpus[0] ? gpus : "none",
		         p->why[0] ? p->why : "the highest score of the feasible nodes");
		iod_obj_replica_free(r);
		iod_obj_replica_from_json(o->value, r, NULL);
		iod_ctrl_replica_place(cl, p, r);
		iod_obj_replica_clear(r, IOD_OBJ_REPLICA_NUMA);
		iod_obj_replica_clear(r, IOD_OBJ_REPLICA_LOST_MS);
		/* its overlay address (ipam.c): a stateful replica keeps its own,
		 * a stateless one takes one of its new node's; on a node without
		 * a subnet the agent chooses (none kept from the old node) */
		uint32_t net, prefix, ip, cur = 0;
		const json_t *tn = json_object_get(find_item(nodes, to), "value");
		if (iod_obj_has(r, IOD_OBJ_REPLICA_ADDR))
			iod_net_ipv4_parse(r->addr, &cur);
		iod_obj_replica_clear(r, IOD_OBJ_REPLICA_ADDR);
		if (cur && !iod_ctrl_ipam_subnet(tn, &net, &prefix) &&
		    !iod_ctrl_ipam_assign(&ipam, o->name, net, prefix, cur, o->stateful, &ip, &e)) {
			char a[20];
			snprintf(a, sizeof(a), "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255,
			         (ip >> 8) & 255, ip & 255);
			iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_ADDR, a);
		}
		iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_PHASE, "pending");
		iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_READY, false);
		iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_REASON, why);
		iod_obj_replica_set_json(r, IOD_OBJ_REPLICA_REASONS, json_pack("[s]", why));
		iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_MOVED_FROM, o->from ? o->from : "");
		json_array_append_new(writes, cas_put(o->name, o->rev, iod_obj_replica_to_json(r)));
	}
	free(next);
out:
	if (r)
		iod_obj_replica_free(r);
	free(r);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(cl);
	iod_ctrl_ipam_free(&ipam);
	free(orph);
	free(reqs);
	free(node_ids);
	return writes;
}
