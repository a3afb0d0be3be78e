/*
 * deploy.c: the deploy adapter: spec body -> scheduled replicas -> one
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
 * Pure with respect to the cluster: it reads the state it is given and
 * builds a command; it never proposes, never does I/O, never reads a clock.
 */
#include "iod/api.h"
#include "iod/ctrl.h"
#include "iod/sched.h"
#include "iod/spec.h"
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

static bool deployed(const struct iod_spec *spec, const char *svc)
{
	return svc && iod_spec_find_service(spec, svc) != NULL;
}

/* GPUs (field "gpus") or accelerators ("accelerators") on node that
 * replicas of services outside this deploy hold. */
static uint32_t used_mask(const json_t *replicas, const char *node, const struct iod_spec *spec,
                          const char *field)
{
	uint32_t mask = 0;
	for (size_t i = 0; i < json_array_size(replicas); i++) {
		const json_t *v = json_object_get(json_array_get(replicas, i), "value");
		const char *n = NULL, *svc = NULL, *g = NULL;
		if (iod_json_get_str(v, "node", &n) || strcmp(n, node))
			continue;
		iod_json_get_str(v, "service", &svc);
		if (!deployed(spec, svc) && !iod_json_get_str(v, field, &g))
			mask |= iod_sched_mask_parse(g);
	}
	return mask;
}

/* Build the scheduler's cluster from the Node objects (src/ctrl/): each
 * node from the topology it registered; GPUs and accelerators that other
 * services' replicas hold are taken. Nodes that cannot be scheduled go to
 * skipped with their reason. */
static int build_cluster(const struct iod_state *st, const struct iod_spec *spec,
                         uint32_t replicas_max, struct iod_sched_cluster **out, json_t *skipped,
                         struct iod_err *e)
{
	json_t *nodes = iod_state_list(st, IOD_STATE_NODE);
	json_t *reps = iod_state_list(st, IOD_STATE_REPLICA);
	const json_t *items = json_object_get(nodes, "items");
	size_t n = json_array_size(items);
	uint32_t *gpus = calloc(n + 1, sizeof(*gpus)), *accs = calloc(n + 1, sizeof(*accs));
	int rc;

	*out = NULL;
	if (!nodes || !reps || !gpus || !accs) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *name = NULL;
		if (iod_json_get_str(json_array_get(items, i), "name", &name))
			continue;
		gpus[i] = used_mask(json_object_get(reps, "items"), name, spec, "gpus");
		accs[i] = used_mask(json_object_get(reps, "items"), name, spec, "accelerators");
	}
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

int iod_api_deploy_plan(const struct iod_state *st, const char *body, size_t len, char **cmd,
                        json_t **answer, struct iod_err *e)
{
	struct iod_spec *spec = NULL;
	struct iod_sched_cluster *cl = NULL;
	struct iod_sched_request *reqs = NULL;
	struct iod_sched_result res;
	struct iod_sched_opts opts;
	json_t *sj = NULL, *svc_arr = NULL, *rep_arr = NULL, *placed = NULL, *unplaced = NULL;
	json_t *skipped = NULL;
	uint64_t total = 0;
	int rc;

	*cmd = NULL;
	*answer = NULL;
	memset(&res, 0, sizeof(res));
	if ((rc = load_spec(body, len, &spec, answer, e)))
		return rc;
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
	if (total > IOD_STATE_TXN_OPS_MAX / 2) {
		rc = iod_err_set(e, -E2BIG, "the spec asks for %llu replicas; one deploy takes %d",
		                 (unsigned long long)total, IOD_STATE_TXN_OPS_MAX / 2);
		goto out;
	}
	if ((rc = build_cluster(st, spec, (uint32_t)total, &cl, skipped, e)))
		goto out;
	if ((rc = iod_sched_result_init(&res, (uint32_t)total + 1, spec->services_n)))
		goto out;
	iod_sched_opts_default(&opts);
	if ((rc = iod_sched_place(cl, reqs, spec->services_n, &opts, &res, e)))
		goto out;

	sj = iod_spec_to_json(spec);
	svc_arr = json_array();
	rep_arr = json_array();
	placed = json_array();
	unplaced = json_array();
	for (uint32_t i = 0; i < spec->services_n; i++) {
		const char *name = spec->services[i].name;
		const json_t *old = iod_state_value(st, IOD_STATE_SERVICE, name);
		uint64_t gen = 0;
		json_t *v = json_deep_copy(json_array_get(json_object_get(sj, "services"), i));
		if (old)
			iod_json_get_u64(old, "generation", &gen);
		if (!v)
			v = json_pack("{s:s}", "name", name);
		json_object_set_new(v, "generation", json_integer((json_int_t)gen + 1));
		json_object_set_new(v, "gpu", json_integer(reqs[i].gpus));
		json_array_append_new(svc_arr, json_pack("{s:s, s:o}", "name", name, "value", v));
	}
	for (uint32_t k = 0; k < res.n; k++) {
		const struct iod_sched_placement *p = &res.p[k];
		const char *svc = spec->services[p->request].name;
		const json_t *old = iod_state_value(st, IOD_STATE_SERVICE, svc);
		uint64_t gen = 0;
		if (old)
			iod_json_get_u64(old, "generation", &gen);
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
		char gpus[128] = "", cpus[512] = "", affinity[512] = "";
		iod_sched_mask_format(p->gpu_mask, gpus, sizeof(gpus));
		iod_bitmap_format(&p->cpus, cpus, sizeof(cpus));
		iod_bitmap_format(&p->cpu_affinity, affinity, sizeof(affinity));
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
		json_t *explain = iod_sched_explain_to_json(cl, &p->explain);
		json_t *v =
		    json_pack("{s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:I, s:i, s:s, s:i, s:I, "
		              "s:[s]}",
		              "service", svc, "ordinal", (int)p->ordinal, "node", node, "gpus",
		              gpus, "cpus", cpus, "mem_numa", (int)p->mem_numa, "nic", (int)p->nic,
		              "mem_bytes", (json_int_t)reqs[p->request].mem_bytes, "cpu_millis",
		              (int)(reqs[p->request].cpus * 1000), "phase", "pending", "restarts",
		              0, "generation", (json_int_t)gen + 1, "reasons", why);
		if (v)
			json_object_set_new(v, "cpu_affinity", json_string(affinity));
		if (v)
			iod_sched_accs_to_replica(cl, p->node, p->acc_mask, v);
		if (v && explain)
			json_object_set_new(v, "explain", explain);
		else
			json_decref(explain);
		json_array_append_new(rep_arr,
		                      json_pack("{s:s, s:o}", "name", p->name, "value", v));
		json_array_append_new(placed, json_pack("{s:s, s:s, s:s, s:s}", "replica", p->name,
		                                        "node", node, "gpus", gpus, "cpus", cpus));
	}
	*answer = json_pack("{s:b, s:O, s:O, s:O}", "complete", json_array_size(unplaced) == 0,
	                    "placements", placed, "unplaced", unplaced, "skipped_nodes", skipped);
	json_t *c =
	    json_pack("{s:s, s:O, s:O}", "op", "deploy", "services", svc_arr, "replicas", rep_arr);
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
	free(reqs);
	iod_spec_free(spec);
	return rc;
}
