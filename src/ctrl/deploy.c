/*
 * deploy.c: the deploy plan: spec body -> scheduled replicas -> one
 * "deploy" state command.
 *
 * POST /v1/deploy hands its body here. The spec is validated by spec/ (YAML
 * or JSON, every error with line:col). The nodes come from the Node objects
 * in the state, each scheduled from the topology it registered (src/ctrl/:
 * real discovery, an hwloc XML or a built-in model; a node that registered
 * none falls back to its model name, then to generic-<gpus>). GPUs that
 * replicas of other services hold are marked used. Nodes that cannot be
 * scheduled are listed in the answer with their reason. The topology-aware
 * scheduler (sched/) places every replica; each placement stores its node,
 * GPU and CPU sets, the scheduler's one-line reason and its explanation
 * (top candidates with every score term), which `iod explain replica NAME`
 * prints.
 *
 * Pure with respect to the cluster: it reads the state it is given (or a
 * view of it, iod_ctrl_view_take, which the API server plans from on a
 * worker thread) and builds a command; it never proposes, never does I/O,
 * never reads a clock.
 */
#include "iod/ctrl.h"
#include "iod/net.h"
#include "iod/objects.h"
#include "iod/sched.h"
#include "iod/spec.h"
#include "iod/state.h"
#include "iod/topo.h"

#include <stdlib.h>
#include <string.h>

static int load_spec(const char *body, size_t len, struct iod_spec **spec, json_t **answer,
                     struct iod_err *e)
{
	struct iod_spec_diags *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return iod_err_set(e, -ENOMEM, "out of memory");
	rc = iod_spec_load_buffer("deploy", body, len, spec, d);
	if (rc) {
		json_t *errs = json_array();
		for (uint32_t i = 0; i < d->n; i++)
			json_array_append_new(errs, json_pack("{s:i, s:i, s:s}", "line",
			                                      d->d[i].line, "col", d->d[i].col,
			                                      "message", d->d[i].msg));
		*answer = json_pack("{s:o, s:i}", "errors", errs, "error_count", d->total);
		iod_err_set(e, -EINVAL, "spec has %u error%s; first: %u:%u: %s", d->total,
		            d->total == 1 ? "" : "s", d->n ? d->d[0].line : 0,
		            d->n ? d->d[0].col : 0, d->n ? d->d[0].msg : "?");
		free(d);
		return -EINVAL;
	}
	free(d);
	if ((*spec)->services_n == 0) {
		iod_spec_free(*spec);
		*spec = NULL;
		return iod_err_set(e, -EINVAL, "the spec has no services to deploy");
	}
	return 0;
}

/* ---- the view: the state's objects a plan reads ---------------------------- */

enum { V_NODE, V_REPLICA, V_SERVICE };
static const enum iod_state_kind view_kinds[3] = {IOD_STATE_NODE, IOD_STATE_REPLICA,
                                                  IOD_STATE_SERVICE};

int iod_ctrl_view_take(const struct iod_state *st, struct iod_ctrl_view *v)
{
	memset(v, 0, sizeof(*v));
	v->rev = iod_state_rev(st);
	for (int k = 0; k < 3; k++) {
		int n = iod_state_items(st, view_kinds[k], NULL, &v->item[k]);
		if (n < 0) {
			iod_ctrl_view_free(v);
			return -ENOMEM;
		}
		v->n[k] = (uint32_t)n;
	}
	return 0;
}

void iod_ctrl_view_free(struct iod_ctrl_view *v)
{
	for (int k = 0; k < 3; k++) {
		for (uint32_t i = 0; v->item[k] && i < v->n[k]; i++)
			json_decref(v->item[k][i].value);
		free(v->item[k]);
		v->item[k] = NULL;
		v->n[k] = 0;
	}
}

static int item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct iod_state_item *)a)->name,
	              ((const struct iod_state_item *)b)->name);
}

static void view_sort(struct iod_ctrl_view *v)
{
	for (int k = 0; k < 3 && !v->sorted; k++)
		if (v->n[k] > 1)
			qsort(v->item[k], v->n[k], sizeof(*v->item[k]), item_cmp);
	v->sorted = true;
}

/* The value of object `name` of view kind k, or NULL (binary search). */
static const json_t *view_value(const struct iod_ctrl_view *v, int k, const char *name)
{
	struct iod_state_item key = {.rev = 0};
	if (iod_strlcpy(key.name, name, sizeof(key.name)) < 0)
		return NULL; /* longer than any name */
	const struct iod_state_item *it =
	    v->n[k] ? bsearch(&key, v->item[k], v->n[k], sizeof(key), item_cmp) : NULL;
	return it ? it->value : NULL;
}

/* A kind as iod_state_list lists it: {"items": [{"name", "value"}...]} by name. */
static json_t *view_list(const struct iod_ctrl_view *v, int k)
{
	json_t *items = json_array();
	for (uint32_t i = 0; items && i < v->n[k]; i++)
		if (json_array_append_new(items, json_pack("{s:s, s:O}", "name", v->item[k][i].name,
		                                           "value", v->item[k][i].value))) {
			json_decref(items);
			return NULL;
		}
	return items ? json_pack("{s:I, s:o}", "rev", (json_int_t)v->rev, "items", items) : NULL;
}

/* The generation of a service deployed earlier (0: none). */
static uint64_t generation_of(const struct iod_ctrl_view *v, const char *service)
{
	const json_t *old = view_value(v, V_SERVICE, service);
	int64_t gen = 0;
	if (old && iod_obj_peek_int(IOD_OBJ_KIND_SERVICE, old, IOD_OBJ_SERVICE_GENERATION, &gen))
		gen = 0;
	return (uint64_t)gen;
}

/* A stored Service's overlay VIP (0: none or not one of ours). */
static uint32_t stored_vip(const json_t *v)
{
	const char *s = v ? iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, v, IOD_OBJ_SERVICE_VIP) : NULL;
	uint32_t ip = 0;
	return s && !iod_net_ipv4_parse(s, &ip) && iod_ctrl_vip_in_range(ip) ? ip : 0;
}

/*
 * The overlay VIP of each of the spec's services (vip.c): the stored
 * services outside this deploy keep theirs; a service deployed before keeps
 * its own (first pass, so no new service can take it); a new one probes
 * from its name's slot over everything taken (second pass).
 */
static int assign_vips(const struct iod_ctrl_view *st, const struct iod_spec *spec, uint32_t *vips,
                       struct iod_err *e)
{
	uint32_t *taken = calloc(st->n[V_SERVICE] + spec->services_n + 1, sizeof(*taken)), n = 0;
	int rc = 0;
	if (!taken)
		return iod_err_set(e, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < st->n[V_SERVICE]; i++) {
		uint32_t ip = stored_vip(st->item[V_SERVICE][i].value);
		if (ip && !iod_spec_find_service(spec, st->item[V_SERVICE][i].name))
			taken[n++] = ip;
	}
	for (uint32_t k = 0; k < spec->services_n; k++) {
		uint32_t keep = stored_vip(view_value(st, V_SERVICE, spec->services[k].name));
		vips[k] = 0;
		if (keep && !iod_ctrl_vip_pick(spec->services[k].name, keep, taken, n, &vips[k]) &&
		    vips[k] == keep)
			taken[n++] = keep;
		else
			vips[k] = 0;
	}
	for (uint32_t k = 0; k < spec->services_n && !rc; k++) {
		if (vips[k])
			continue;
		if (iod_ctrl_vip_pick(spec->services[k].name, 0, taken, n, &vips[k]))
			rc = iod_err_set(e, -ENOSPC,
			                 "service \"%s\": every service VIP of 10.200.240.0/%d is "
			                 "taken (%u services): undeploy some first",
			                 spec->services[k].name, IOD_SVC_VIP_PREFIX, n);
		else
			taken[n++] = vips[k];
	}
	free(taken);
	return rc;
}

/* Replicas of a service deployed earlier (a dependency outside this spec). */
static uint32_t stored_replicas(const char *service, void *ctx)
{
	const json_t *v = view_value(ctx, V_SERVICE, service);
	int64_t n = 0;
	if (v && !iod_obj_peek_int(IOD_OBJ_KIND_SERVICE, v, IOD_OBJ_SERVICE_REPLICAS, &n))
		return (uint32_t)n;
	return 0;
}

/*
 * The limits the node agents enforce, checked before anything is placed:
 * the spec loader checked them for IPv4 node addresses and the services in
 * the spec; here the real node addresses and the services deployed earlier
 * count too. A replica that no agent could build is never reported placed.
 */
static int agent_limits(const struct iod_ctrl_view *st, const struct iod_spec *spec,
                        struct iod_err *e)
{
	uint32_t host_len = 15;
	for (uint32_t i = 0; i < st->n[V_NODE]; i++) {
		const char *a = NULL;
		if ((a = iod_obj_peek_str(IOD_OBJ_KIND_NODE, st->item[V_NODE][i].value,
		                          IOD_OBJ_NODE_ADDR)))
			host_len = IOD_MAX(host_len, (uint32_t)strlen(a));
	}
	for (uint32_t k = 0; k < spec->services_n; k++) {
		char why[IOD_ERR_MSG_MAX - IOD_NAME_MAX - 16];
		if (iod_spec_service_env_check(spec, k, host_len, stored_replicas, (void *)st, why,
		                               sizeof(why)))
			return iod_err_set(e, -EINVAL, "service \"%s\": %s", spec->services[k].name,
			                   why);
	}
	return 0;
}

static bool deployed(const struct iod_spec *spec, const char *svc)
{
	return svc && iod_spec_find_service(spec, svc) != NULL;
}

/* GPUs and accelerators that replicas of services outside this deploy hold,
 * per node (gpus[i], accs[i] for items[i]). */
static void used_masks(const json_t *replicas, const json_t *items, const struct iod_spec *spec,
                       uint32_t *gpus, uint32_t *accs)
{
	struct iod_obj_replica *r = malloc(sizeof(*r));
	for (size_t k = 0; r && k < json_array_size(replicas); k++) {
		iod_obj_replica_from_json(json_object_get(json_array_get(replicas, k), "value"), r,
		                          NULL);
		if (iod_obj_has(r, IOD_OBJ_REPLICA_NODE) &&
		    !deployed(spec, iod_obj_has(r, IOD_OBJ_REPLICA_SERVICE) ? r->service : NULL))
			for (size_t i = 0; i < json_array_size(items); i++) {
				const char *name = NULL;
				if (iod_json_get_str(json_array_get(items, i), "name", &name) ||
				    strcmp(name, r->node))
					continue;
				if (iod_obj_has(r, IOD_OBJ_REPLICA_GPUS))
					gpus[i] |= iod_sched_mask_parse(r->gpus);
				if (iod_obj_has(r, IOD_OBJ_REPLICA_ACCELERATORS))
					accs[i] |= iod_sched_mask_parse(r->accelerators);
			}
		iod_obj_replica_free(r);
	}
	free(r);
}

/* Build the scheduler's cluster from the Node objects (src/ctrl/): each
 * node from the topology it registered; GPUs and accelerators that other
 * services' replicas hold are taken. Nodes that cannot be scheduled go to
 * skipped with their reason. */
static int build_cluster(const struct iod_ctrl_view *st, const struct iod_spec *spec,
                         uint32_t replicas_max, struct iod_sched_cluster **out, json_t *skipped,
                         struct iod_err *e)
{
	json_t *nodes = view_list(st, V_NODE);
	json_t *reps = view_list(st, V_REPLICA);
	const json_t *items = json_object_get(nodes, "items");
	size_t n = json_array_size(items);
	uint32_t *gpus = calloc(n + 1, sizeof(*gpus)), *accs = calloc(n + 1, sizeof(*accs));
	int rc;

	*out = NULL;
	if (!nodes || !reps || !gpus || !accs) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	used_masks(json_object_get(reps, "items"), items, spec, gpus, accs);
	struct iod_ctrl_cluster_opts o = {
	    .replicas_max = replicas_max,
	    .gpus_used = gpus,
	    .accs_used = accs,
	    .skipped = skipped,
	};
	rc = iod_ctrl_cluster_build(nodes, &o, out, NULL, e);
out:
	free(gpus);
	free(accs);
	json_decref(nodes);
	json_decref(reps);
	return rc;
}

/* The Replica object of placement p of service svc (request rq). */
static json_t *new_replica(const struct iod_sched_cluster *cl, const struct iod_sched_placement *p,
                           const char *svc, const char *tenant, const struct iod_sched_request *rq,
                           uint64_t generation, const char *why)
{
	struct iod_obj_replica *r = malloc(sizeof(*r));
	json_t *v = NULL;
	if (!r)
		return NULL;
	iod_obj_replica_init(r);
	int rc =
	    iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_SERVICE, svc) |
	    iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_ORDINAL, p->ordinal) |
	    iod_ctrl_replica_place(cl, p, r) |
	    iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_MEM_BYTES, (int64_t)rq->mem_bytes) |
	    iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_CPU_MILLIS, (int64_t)(rq->cpus * 1000)) |
	    iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_PHASE, "pending") |
	    iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_RESTARTS, 0) |
	    iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_GENERATION, (int64_t)generation) |
	    iod_obj_replica_set_json(r, IOD_OBJ_REPLICA_REASONS, json_pack("[s]", why)) |
	    iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_TENANT,
	                            tenant && tenant[0] ? tenant : "default");
	/* the bandwidth the scheduler counted on the NIC is the replica's egress
	 * meter in its node's virtual switch (docs/network.md): one value */
	if (rq->nic_bw_bps)
		rc |=
		    iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_NIC_BW_BPS, (int64_t)rq->nic_bw_bps);
	if (!rc)
		v = iod_obj_replica_to_json(r);
	iod_obj_replica_free(r);
	free(r);
	return v;
}

/*
 * The overlay address of replica name placed on node (the control plane's
 * IPAM, ipam.c), written into its Replica value v: only on a node that
 * names its subnet (`iod up --netns`) and for a replica in a network
 * namespace of its own (not sandbox.network node or none). It keeps the
 * address it had on that node, or, stateful, anywhere.
 */
static int overlay_addr(const struct iod_ctrl_view *st, struct iod_ctrl_ipam *m,
                        const struct iod_spec_service *sv, const char *name, const char *node,
                        json_t *v, struct iod_err *e)
{
	uint32_t net, prefix, ip, cur = 0;
	const json_t *nv = view_value(st, V_NODE, node);
	if (!nv || iod_ctrl_ipam_subnet(nv, &net, &prefix) ||
	    sv->sandbox.network == IOD_SPEC_NET_NODE || sv->sandbox.network == IOD_SPEC_NET_NONE)
		return 0;
	for (uint32_t i = 0; i < m->n; i++)
		if (!strcmp(m->e[i].name, name))
			cur = m->e[i].ip;
	int rc = iod_ctrl_ipam_assign(m, name, net, prefix, cur, sv->type == IOD_SERVICE_STATEFUL,
	                              &ip, e);
	if (rc)
		return rc;
	char a[20];
	snprintf(a, sizeof(a), "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255,
	         ip & 255);
	return json_object_set_new(v, "addr", json_string(a))
	           ? iod_err_set(e, -ENOMEM, "out of memory")
	           : 0;
}

int iod_ctrl_deploy_plan(const struct iod_state *st, const char *body, size_t len, char **cmd,
                         json_t **answer, struct iod_err *e)
{
	struct iod_ctrl_view v;
	*cmd = NULL;
	*answer = NULL;
	if (iod_ctrl_view_take(st, &v))
		return iod_err_set(e, -ENOMEM, "out of memory");
	int rc = iod_ctrl_deploy_plan_view(&v, body, len, cmd, answer, e);
	iod_ctrl_view_free(&v);
	return rc;
}

int iod_ctrl_deploy_plan_view(struct iod_ctrl_view *st, const char *body, size_t len, char **cmd,
                              json_t **answer, struct iod_err *e)
{
	struct iod_spec *spec = NULL;
	struct iod_sched_cluster *cl = NULL;
	struct iod_sched_request *reqs = NULL;
	struct iod_sched_result res;
	struct iod_sched_opts opts;
	uint32_t *vips = NULL;
	struct iod_ctrl_ipam ipam = {0};
	json_t *sj = NULL, *svc_arr = NULL, *rep_arr = NULL, *placed = NULL, *unplaced = NULL;
	json_t *skipped = NULL;
	uint64_t total = 0;
	int rc;

	*cmd = NULL;
	*answer = NULL;
	memset(&res, 0, sizeof(res));
	if ((rc = load_spec(body, len, &spec, answer, e)))
		return rc;
	view_sort(st);
	if ((rc = agent_limits(st, spec, e))) {
		iod_spec_free(spec);
		return rc;
	}
	skipped = json_array();
	reqs = calloc(spec->services_n, sizeof(*reqs));
	if (!reqs) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < spec->services_n; i++) {
		if ((rc = iod_sched_request_from_spec(&spec->services[i], &reqs[i], e)))
			goto out;
		total += reqs[i].replicas;
	}
	if (total > IOD_DEPLOY_REPLICAS_MAX) {
		rc = iod_err_set(e, -E2BIG,
		                 "the spec asks for %llu replicas; one deploy takes at most %u "
		                 "(IOD_DEPLOY_REPLICAS_MAX): deploy its services in parts",
		                 (unsigned long long)total, IOD_DEPLOY_REPLICAS_MAX);
		goto out;
	}
	if ((rc = build_cluster(st, spec, (uint32_t)total, &cl, skipped, e)))
		goto out;
	if ((rc = iod_sched_result_init(&res, (uint32_t)total + 1, spec->services_n)))
		goto out;
	iod_sched_opts_default(&opts);
	if ((rc = iod_sched_place(cl, reqs, spec->services_n, &opts, &res, e)))
		goto out;

	vips = calloc(spec->services_n, sizeof(*vips));
	if (!vips) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = assign_vips(st, spec, vips, e)))
		goto out;
	json_t *stored = view_list(st, V_REPLICA);
	rc = stored ? iod_ctrl_ipam_init(&ipam, stored) : -ENOMEM;
	json_decref(stored);
	if (rc) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	sj = iod_spec_to_json(spec);
	svc_arr = json_array();
	rep_arr = json_array();
	placed = json_array();
	unplaced = json_array();
	for (uint32_t i = 0; i < spec->services_n; i++) {
		const char *name = spec->services[i].name;
		uint64_t gen = generation_of(st, name);
		struct iod_obj_service so;
		iod_obj_service_from_json(json_array_get(json_object_get(sj, "services"), i), &so,
		                          NULL);
		iod_obj_service_set_str(&so, IOD_OBJ_SERVICE_NAME, name);
		iod_obj_service_set_int(&so, IOD_OBJ_SERVICE_GENERATION, (int64_t)gen + 1);
		iod_obj_service_set_int(&so, IOD_OBJ_SERVICE_GPU, reqs[i].gpus);
		char vip[20];
		snprintf(vip, sizeof(vip), "%u.%u.%u.%u", vips[i] >> 24, (vips[i] >> 16) & 255,
		         (vips[i] >> 8) & 255, vips[i] & 255);
		iod_obj_service_set_str(&so, IOD_OBJ_SERVICE_VIP, vip);
		json_t *v = iod_obj_service_to_json(&so);
		iod_obj_service_free(&so);
		/* the spec's storage: goes with each stateful service, for the
		 * agents that provision its replicas' checkpoint stores */
		if (v && spec->services[i].type == IOD_SERVICE_STATEFUL &&
		    json_object_get(sj, "storage"))
			json_object_set(v, "storage", json_object_get(sj, "storage"));
		json_array_append_new(svc_arr, json_pack("{s:s, s:o}", "name", name, "value", v));
	}
	for (uint32_t k = 0; k < res.n; k++) {
		const struct iod_sched_placement *p = &res.p[k];
		const char *svc = spec->services[p->request].name;
		uint64_t gen = generation_of(st, svc);
		if (!p->placed) {
			char why[IOD_SCHED_WHY_MAX + 256];
			const json_t *sk = json_array_get(skipped, 0);
			const char *skn = "", *skr = "";
			iod_json_get_str(sk, "node", &skn);
			iod_json_get_str(sk, "reason", &skr);
			if (p->reason == IOD_SCHED_REASON_NO_NODES && sk)
				snprintf(why, sizeof(why), "%s (%zu node%s skipped; %s: %s)",
				         p->why, json_array_size(skipped),
				         json_array_size(skipped) == 1 ? "" : "s", skn, skr);
			else
				snprintf(why, sizeof(why), "%s", p->why);
			json_array_append_new(
			    unplaced, json_pack("{s:s, s:s, s:s}", "replica", p->name, "reason",
			                        iod_sched_reason_name(p->reason), "why", why));
			continue;
		}
		char gpus[128] = "", cpus[IOD_OBJ_SET_MAX] = "";
		iod_sched_mask_format(p->gpu_mask, gpus, sizeof(gpus));
		iod_bitmap_format(&p->cpus, cpus, sizeof(cpus));
		const char *node = iod_sched_node_name(cl, p->node);
		char why[IOD_SCHED_WHY_MAX + 128];
		if (p->why[0])
			snprintf(why, sizeof(why), "%s", p->why);
		else
			snprintf(why, sizeof(why),
			         "node %s, GPUs %s: the highest score (%lld) of %u feasible nodes "
			         "(%u evaluated)",
			         node, gpus[0] ? gpus : "none",
			         p->explain.cand_n ? (long long)p->explain.cand[0].total : 0LL,
			         p->explain.feasible, p->explain.evaluated);
		json_t *v = new_replica(cl, p, svc, spec->services[p->request].tenant,
		                        &reqs[p->request], gen + 1, why);
		if (v && (rc = overlay_addr(st, &ipam, &spec->services[p->request], p->name, node,
		                            v, e))) {
			json_decref(v);
			goto out;
		}
		json_array_append_new(rep_arr,
		                      json_pack("{s:s, s:o}", "name", p->name, "value", v));
		json_array_append_new(placed, json_pack("{s:s, s:s, s:s, s:s}", "replica", p->name,
		                                        "node", node, "gpus", gpus, "cpus", cpus));
	}
	*answer = json_pack("{s:b, s:O, s:O, s:O}", "complete", json_array_size(unplaced) == 0,
	                    "placements", placed, "unplaced", unplaced, "skipped_nodes", skipped);
	json_t *c =
	    json_pack("{s:s, s:O, s:O}", "op", "deploy", "services", svc_arr, "replicas", rep_arr);
	if (c && spec->sgs_n) { /* the spec's security groups, as NetPolicy objects */
		json_t *nps = json_array();
		for (uint32_t i = 0; i < spec->sgs_n; i++)
			json_array_append_new(nps, json_pack("{s:s, s:o}", "name",
			                                     spec->sgs[i].name, "value",
			                                     iod_spec_sg_to_json(&spec->sgs[i])));
		json_object_set_new(c, "netpolicies", nps);
	}
	*cmd = c ? json_dumps(c, JSON_COMPACT) : NULL;
	json_decref(c);
	if (!*cmd || !*answer) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		free(*cmd);
		*cmd = NULL;
		json_decref(*answer);
		*answer = NULL;
	}
out:
	json_decref(sj);
	json_decref(svc_arr);
	json_decref(rep_arr);
	json_decref(placed);
	json_decref(unplaced);
	json_decref(skipped);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(cl);
	iod_ctrl_ipam_free(&ipam);
	free(reqs);
	free(vips);
	iod_spec_free(spec);
	return rc;
}
