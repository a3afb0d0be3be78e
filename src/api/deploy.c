/*
 * deploy.c: the deploy adapter: spec body -> placed replicas -> one
 * "deploy" state command.
 *
 * POST /v1/deploy hands its body here. The spec is validated by spec/ when
 * that module is linked (YAML or JSON, errors with line:col); until then a
 * JSON body in the same shape is read directly. Replicas are placed by a
 * small first-fit placer over the Node objects in the state: spread across
 * nodes, whole GPUs counted from each node's "gpus", CPUs from "cpus". The
 * topology-aware scheduler (sched/) replaces this placer when it lands; the
 * command and answer shapes stay. Every placement stores its reasons, which
 * `iod explain replica NAME` prints.
 *
 * Pure with respect to the cluster: it reads the state it is given and
 * builds a command; it never proposes, never does I/O, never reads a clock.
 */
#include "iod/api.h"
#include "iod/spec.h"

#include <stdlib.h>
#include <string.h>

/* Until the spec loader is linked these resolve to NULL and JSON is read here. */
#pragma weak iod_spec_load_buffer
#pragma weak iod_spec_free
#pragma weak iod_spec_to_json

/* One service to place. */
struct svc_req {
	char name[IOD_NAME_MAX]; /* service name */
	uint32_t replicas;       /* desired replicas */
	uint32_t gpu;            /* GPUs per replica */
	uint32_t cpu_millis;     /* CPU per replica, thousandths */
	json_t *spec;            /* the normalized service document (owned) */
};

/* A node's capacity and what is already used on it. */
struct node_cap {
	char name[IOD_NAME_MAX]; /* node name */
	uint32_t gpus;           /* GPUs on the node */
	uint32_t cpus;           /* CPU cores (0 = not reported: not checked) */
	struct iod_bitmap used;  /* GPU indexes in use */
	uint32_t cpu_millis_used; /* CPU reserved */
	uint32_t replicas;       /* replicas placed on it (spread) */
};

static uint32_t json_count(const json_t *v)
{
	if (json_is_integer(v) && json_integer_value(v) > 0)
		return (uint32_t)IOD_MIN(json_integer_value(v), IOD_BITMAP_BITS);
	if (json_is_array(v))
		return (uint32_t)IOD_MIN(json_array_size(v), IOD_BITMAP_BITS);
	return 0;
}

static int parse_json_spec(const char *body, size_t len, struct svc_req **out, uint32_t *n,
                           json_t **answer, struct iod_err *e)
{
	json_t *j = NULL, *svcs, *x;
	size_t i;

	if (iod_json_parse(body, len, &j, e))
		return -EINVAL;
	svcs = json_object_get(j, "services");
	if (!json_is_array(svcs) || json_array_size(svcs) == 0 ||
	    json_array_size(svcs) > IOD_SPEC_SERVICES_MAX) {
		json_decref(j);
		return iod_err_set(e, -EINVAL, "spec needs \"services\": a list of 1-%d services",
		                   IOD_SPEC_SERVICES_MAX);
	}
	*out = calloc(json_array_size(svcs), sizeof(**out));
	if (!*out) {
		json_decref(j);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	json_array_foreach(svcs, i, x)
	{
		struct svc_req *r = &(*out)[i];
		const char *name = NULL;
		json_t *res = json_object_get(x, "resources");
		json_int_t reps = 1;
		if (iod_json_get_str(x, "name", &name) || !iod_state_name_valid(name)) {
			*n = (uint32_t)i;
			json_decref(j);
			return iod_err_set(e, -EINVAL, "services[%zu]: needs a valid \"name\"", i);
		}
		json_t *rv = json_object_get(x, "replicas");
		if (rv && (!json_is_integer(rv) || json_integer_value(rv) < 0 ||
		           json_integer_value(rv) > IOD_SPEC_REPLICAS_MAX)) {
			*n = (uint32_t)i;
			json_decref(j);
			return iod_err_set(e, -EINVAL, "service %s: replicas must be 0-%d", name,
			                   IOD_SPEC_REPLICAS_MAX);
		}
		if (rv)
			reps = json_integer_value(rv);
		iod_strlcpy(r->name, name, sizeof(r->name));
		r->replicas = (uint32_t)reps;
		r->gpu = json_count(json_object_get(res, "gpu"));
		json_t *cpu = json_object_get(res, "cpu");
		if (json_is_number(cpu))
			r->cpu_millis = (uint32_t)(json_number_value(cpu) * 1000.0);
		r->spec = json_deep_copy(x);
		*n = (uint32_t)i + 1;
	}
	(void)answer;
	json_decref(j);
	return 0;
}

static int parse_spec(const char *body, size_t len, struct svc_req **out, uint32_t *n,
                      json_t **answer, struct iod_err *e)
{
	struct iod_spec *spec = NULL;
	struct iod_spec_diags *d;
	int rc;

	*n = 0;
	if (!iod_spec_load_buffer) {
		size_t i = 0;
		while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\t' ||
		                   body[i] == '\r'))
			i++;
		if (i == len || body[i] != '{')
			return iod_err_set(e, -EINVAL,
			                   "this server reads JSON deploy bodies only (the YAML spec "
			                   "loader is not built in); send {\"services\": [...]}");
		return parse_json_spec(body, len, out, n, answer, e);
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return iod_err_set(e, -ENOMEM, "out of memory");
	rc = iod_spec_load_buffer("deploy", body, len, &spec, d);
	if (rc) {
		json_t *errs = json_array();
		for (uint32_t i = 0; i < d->n; i++)
			json_array_append_new(errs, json_pack("{s:i, s:i, s:s}", "line", d->d[i].line,
			                                      "col", d->d[i].col, "message",
			                                      d->d[i].msg));
		*answer = json_pack("{s:o, s:i}", "errors", errs, "error_count", d->total);
		iod_err_set(e, -EINVAL, "spec has %u error%s; first: %u:%u: %s", d->total,
		            d->total == 1 ? "" : "s", d->n ? d->d[0].line : 0,
		            d->n ? d->d[0].col : 0, d->n ? d->d[0].msg : "?");
		free(d);
		return -EINVAL;
	}
	free(d);
	json_t *sj = iod_spec_to_json ? iod_spec_to_json(spec) : NULL;
	*out = calloc(spec->services_n ? spec->services_n : 1, sizeof(**out));
	if (!*out) {
		json_decref(sj);
		iod_spec_free(spec);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < spec->services_n; i++) {
		const struct iod_spec_service *sv = &spec->services[i];
		struct svc_req *r = &(*out)[i];
		iod_strlcpy(r->name, sv->name, sizeof(r->name));
		r->replicas = sv->replicas;
		r->gpu = sv->res.gpu ? sv->res.gpu : sv->res.compute.count;
		r->cpu_millis = sv->res.cpu_millis;
		json_t *sjs = json_array_get(json_object_get(sj, "services"), i);
		r->spec = sjs ? json_deep_copy(sjs)
		              : json_pack("{s:s, s:i, s:i, s:i, s:I}", "name", sv->name, "replicas",
		                          sv->replicas, "gpu", r->gpu, "cpu_millis", r->cpu_millis,
		                          "mem_bytes", (json_int_t)sv->res.mem_bytes);
		*n = i + 1;
	}
	json_decref(sj);
	iod_spec_free(spec);
	if (*n == 0)
		return iod_err_set(e, -EINVAL, "the spec has no services to deploy");
	return 0;
}

static int load_nodes(const struct iod_state *st, struct node_cap **out, uint32_t *n,
                      const struct svc_req *svcs, uint32_t ns)
{
	json_t *l = iod_state_list(st, IOD_STATE_NODE), *x;
	json_t *items = json_object_get(l, "items");
	size_t i;

	*n = 0;
	*out = calloc(json_array_size(items) + 1, sizeof(**out));
	if (!l || !*out) {
		json_decref(l);
		return -ENOMEM;
	}
	json_array_foreach(items, i, x)
	{
		struct node_cap *c = &(*out)[*n];
		const char *name = NULL;
		json_t *v = json_object_get(x, "value");
		iod_json_get_str(x, "name", &name);
		iod_strlcpy(c->name, name ? name : "", sizeof(c->name));
		c->gpus = json_count(json_object_get(v, "gpus"));
		c->cpus = json_count(json_object_get(v, "cpus"));
		(*n)++;
	}
	/* account for replicas of services not in this deploy */
	json_t *rl = iod_state_list(st, IOD_STATE_REPLICA);
	json_array_foreach(json_object_get(rl, "items"), i, x)
	{
		json_t *v = json_object_get(x, "value");
		const char *svc = NULL, *node = NULL, *gpus = NULL;
		bool ours = false;
		iod_json_get_str(v, "service", &svc);
		for (uint32_t k = 0; k < ns && svc; k++)
			ours |= !strcmp(svcs[k].name, svc);
		if (ours || iod_json_get_str(v, "node", &node))
			continue;
		for (uint32_t k = 0; k < *n; k++) {
			if (strcmp((*out)[k].name, node))
				continue;
			struct iod_bitmap b;
			if (!iod_json_get_str(v, "gpus", &gpus) && !iod_bitmap_parse(gpus, &b, NULL))
				iod_bitmap_or(&(*out)[k].used, &b);
			uint64_t m = 0;
			if (!iod_json_get_u64(v, "cpu_millis", &m))
				(*out)[k].cpu_millis_used += (uint32_t)m;
			(*out)[k].replicas++;
		}
	}
	json_decref(rl);
	json_decref(l);
	return 0;
}

int iod_api_deploy_plan(const struct iod_state *st, const char *body, size_t len, char **cmd,
                        json_t **answer, struct iod_err *e)
{
	struct svc_req *svcs = NULL;
	struct node_cap *nodes = NULL;
	uint32_t ns = 0, nn = 0;
	json_t *svc_arr = NULL, *rep_arr = NULL, *placed = NULL, *unplaced = NULL, *a = NULL;
	int rc;

	*cmd = NULL;
	*answer = NULL;
	rc = parse_spec(body, len, &svcs, &ns, answer, e);
	if (rc)
		goto out;
	rc = load_nodes(st, &nodes, &nn, svcs, ns);
	if (rc) {
		iod_err_set(e, rc, "out of memory");
		goto out;
	}
	svc_arr = json_array();
	rep_arr = json_array();
	placed = json_array();
	unplaced = json_array();
	for (uint32_t i = 0; i < ns; i++) {
		struct svc_req *r = &svcs[i];
		const json_t *old = iod_state_value(st, IOD_STATE_SERVICE, r->name);
		uint64_t gen = 0;
		if (old)
			iod_json_get_u64(old, "generation", &gen);
		json_object_set_new(r->spec, "generation", json_integer((json_int_t)gen + 1));
		json_array_append_new(svc_arr, json_pack("{s:s, s:O}", "name", r->name, "value",
		                                         r->spec));
		for (uint32_t o = 0; o < r->replicas; o++) {
			char rname[IOD_NAME_MAX];
			int best = -1;
			snprintf(rname, sizeof(rname), "%s-%u", r->name, o);
			/* spread: the feasible node with the fewest replicas, then name order */
			for (uint32_t k = 0; k < nn; k++) {
				struct node_cap *c = &nodes[k];
				uint32_t free_gpus = c->gpus - iod_bitmap_count(&c->used);
				if (free_gpus < r->gpu)
					continue;
				if (c->cpus && c->cpu_millis_used + r->cpu_millis > c->cpus * 1000u)
					continue;
				if (best < 0 || c->replicas < nodes[best].replicas)
					best = (int)k;
			}
			if (best < 0) {
				json_array_append_new(
				    unplaced,
				    json_pack("{s:s, s:s}", "replica", rname, "reason",
				              nn == 0 ? "no nodes are registered"
				                      : "no node has enough free GPUs/CPUs"));
				continue;
			}
			struct node_cap *c = &nodes[best];
			struct iod_bitmap set;
			char gpus[256] = "", why[IOD_ERR_MSG_MAX];
			iod_bitmap_zero(&set);
			for (uint32_t g = 0, got = 0; g < c->gpus && got < r->gpu; g++)
				if (!iod_bitmap_test(&c->used, g)) {
					iod_bitmap_set(&set, g);
					got++;
				}
			iod_bitmap_or(&c->used, &set);
			iod_bitmap_format(&set, gpus, sizeof(gpus));
			c->cpu_millis_used += r->cpu_millis;
			c->replicas++;
			snprintf(why, sizeof(why),
			         "first-fit spread placer: node %s had %u free of %u GPUs and the "
			         "fewest replicas (%u) among feasible nodes",
			         c->name, c->gpus - iod_bitmap_count(&c->used) + r->gpu, c->gpus,
			         c->replicas - 1);
			json_array_append_new(
			    rep_arr,
			    json_pack("{s:s, s:{s:s, s:i, s:s, s:s, s:i, s:s, s:i, s:I, s:[s]}}", "name",
			              rname, "value", "service", r->name, "ordinal", o, "node", c->name,
			              "gpus", gpus, "cpu_millis", r->cpu_millis, "phase", "pending",
			              "restarts", 0, "generation", (json_int_t)gen + 1, "reasons", why));
			json_array_append_new(placed, json_pack("{s:s, s:s, s:s}", "replica", rname,
			                                        "node", c->name, "gpus", gpus));
		}
	}
	a = json_pack("{s:b, s:O, s:O}", "complete", json_array_size(unplaced) == 0, "placements",
	              placed, "unplaced", unplaced);
	json_t *c = json_pack("{s:s, s:O, s:O}", "op", "deploy", "services", svc_arr, "replicas",
	                      rep_arr);
	*cmd = c ? json_dumps(c, JSON_COMPACT) : NULL;
	json_decref(c);
	if (!*cmd || !a) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		free(*cmd);
		*cmd = NULL;
		json_decref(a);
		goto out;
	}
	*answer = a;
out:
	for (uint32_t i = 0; i < ns; i++)
		json_decref(svcs[i].spec);
	free(svcs);
	free(nodes);
	json_decref(svc_arr);
	json_decref(rep_arr);
	json_decref(placed);
	json_decref(unplaced);
	return rc;
}
