/*
 * extender.c: the kube-scheduler extender (HTTP JSON filter/prioritize) over
 * iod's scheduler (pure). kube-scheduler posts ExtenderArgs ({Pod, Nodes}
 * or {Pod, NodeNames} when the extender is nodeCacheCapable); each node is
 * judged alone by sched/ (the node uncordoned, every other cordoned, one
 * replica of the pod's request placed and released), so a node's verdict
 * and score are exactly what `iod schedule` would give it: the reason for a
 * node that cannot take the pod, and the weighted total that orders the
 * nodes that can. Field names are the Go structs' (k8s.io/kube-scheduler
 * extender/v1 has no JSON tags), read case-insensitively as Go does for
 * the first letter. docs/kubernetes.md.
 */
#include "iod/k8s.h"

#include <stdlib.h>
#include <string.h>

struct cand {
	const char *name;
	const json_t *item; /* the Node object, NULL with NodeNames */
	int shape;          /* -1: iod knows no model for it */
	uint32_t used;      /* GPUs taken (mask) */
	const char *rack, *zone;
	uint32_t id; /* sched node id */
	bool placed, unresolvable, copied;
	int64_t total;
	char why[IOD_SCHED_WHY_MAX];
};

/* o[Key] or o[key]. */
static json_t *field(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	char lower[32];
	if (v || !key[0] || strlen(key) >= sizeof(lower))
		return v;
	snprintf(lower, sizeof(lower), "%s", key);
	lower[0] = (char)(lower[0] - 'A' + 'a');
	return json_object_get(o, lower);
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(json_object_get(o, a), b);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A resource quantity of whole devices: "2" or 2. */
static int quantity(const json_t *v, uint32_t *out)
{
	char *end;
	if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 1024) {
		*out = (uint32_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return -EINVAL;
	unsigned long n = strtoul(json_string_value(v), &end, 10);
	if (!json_string_value(v)[0] || *end || n > 1024)
		return -EINVAL;
	*out = (uint32_t)n;
	return 0;
}

static int pod_gpus(const json_t *pod, uint32_t *gpus, struct iod_err *e)
{
	const json_t *cs = json_object_get(json_object_get(pod, "spec"), "containers"), *c;
	size_t i;
	*gpus = 0;
	json_array_foreach(cs, i, c)
	{
		const json_t *lim = json_object_get(json_object_get(c, "resources"), "limits");
		static const char *const keys[] = {"iod.dev/gpu", "nvidia.com/gpu"};
		for (unsigned k = 0; k < 2; k++) {
			const json_t *v = json_object_get(lim, keys[k]);
			uint32_t n;
			if (!v)
				continue;
			if (quantity(v, &n))
				return iod_err_set(
				    e, -EINVAL,
				    "Pod.spec.containers[%zu].resources.limits[%s]: want a "
				    "whole number of devices",
				    i, keys[k]);
			*gpus += n;
		}
	}
	if (*gpus > IOD_TOPO_GPUS_MAX)
		return iod_err_set(e, -EINVAL, "the pod asks for %u GPUs; no node has more than %d",
		                   *gpus, IOD_TOPO_GPUS_MAX);
	return 0;
}

static int pod_request(const json_t *pod, struct iod_sched_request *r, struct iod_err *e)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->service, sizeof(r->service), "pod");
	r->replicas = 1;
	r->numa = IOD_SCHED_NUMA_BEST_EFFORT;
	if (!json_is_object(pod))
		return iod_err_set(e, -EINVAL, "ExtenderArgs.Pod must be a Pod object");
	int rc = pod_gpus(pod, &r->gpus, e);
	if (rc)
		return rc;
	const char *link =
	    str_at(json_object_get(pod, "metadata"), "annotations", "iod.dev/gpu-link");
	const char *numa = str_at(json_object_get(pod, "metadata"), "annotations", "iod.dev/numa");
	if (link && !strcmp(link, "nvlink"))
		r->gpu_link = IOD_SCHED_LINK_NVLINK;
	else if (link && !strcmp(link, "pcie"))
		r->gpu_link = IOD_SCHED_LINK_PCIE;
	else if (link && strcmp(link, "any"))
		return iod_err_set(
		    e, -EINVAL, "annotation iod.dev/gpu-link %s: want nvlink, pcie or any", link);
	if (numa && iod_sched_numa_parse(numa, &r->numa))
		return iod_err_set(
		    e, -EINVAL,
		    "annotation iod.dev/numa %s: want none, best-effort, restricted or "
		    "single-numa-node",
		    numa);
	return 0;
}

static int shape_named(const struct iod_k8s_ext *x, const char *model)
{
	for (uint32_t i = 0; model && i < x->shapes_n; i++)
		if (!strcmp(x->shapes[i].model, model))
			return (int)i;
	return -1;
}

static void cand_fill(const struct iod_k8s_ext *x, struct cand *c)
{
	const json_t *md = c->item ? json_object_get(c->item, "metadata") : NULL;
	const char *model = md ? str_at(md, "labels", "iod.dev/model") : NULL;
	const char *used = md ? str_at(md, "annotations", "iod.dev/gpus-used") : NULL;
	c->shape = shape_named(x, model);
	c->rack = md ? str_at(md, "labels", IOD_K8S_LABEL_LEAF) : NULL;
	c->zone = md ? str_at(md, "labels", IOD_K8S_LABEL_SPINE) : NULL;
	for (uint32_t i = 0; i < x->nodes_n; i++)
		if (!strcmp(x->nodes[i].name, c->name)) {
			if (c->shape < 0)
				c->shape = (int)x->nodes[i].shape;
			c->rack = c->rack ? c->rack : x->nodes[i].rack;
			c->zone = c->zone ? c->zone : x->nodes[i].zone;
		}
	c->used = used ? iod_sched_mask_parse(used) : 0;
}

/* The candidates of args: Nodes.items or NodeNames. */
static int candidates(const struct iod_k8s_ext *x, const json_t *args, struct cand **out,
                      uint32_t *n, bool *by_name, struct iod_err *e)
{
	const json_t *items = json_object_get(field(args, "Nodes"), "items");
	const json_t *names = field(args, "NodeNames");
	*by_name = !json_is_array(items);
	const json_t *list = *by_name ? names : items;
	if (!json_is_array(list))
		return iod_err_set(e, -EINVAL, "ExtenderArgs needs Nodes.items or NodeNames");
	if (json_array_size(list) > IOD_SCHED_NODES_MAX)
		return iod_err_set(e, -EINVAL, "more than %d nodes", IOD_SCHED_NODES_MAX);
	*n = (uint32_t)json_array_size(list);
	*out = calloc(*n ? *n : 1, sizeof(**out));
	if (!*out)
		return iod_err_set(e, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < *n; i++) {
		struct cand *c = &(*out)[i];
		const json_t *v = json_array_get(list, i);
		c->item = *by_name ? NULL : v;
		c->name = *by_name ? json_string_value(v) : str_at(v, "metadata", "name");
		if (!c->name || !c->name[0] || strlen(c->name) >= IOD_NAME_MAX)
			return iod_err_set(e, -EINVAL, "node %u has no name (or one over %d bytes)",
			                   i, IOD_NAME_MAX - 1);
		cand_fill(x, c);
	}
	return 0;
}

/* Judge one node alone: uncordon it, place the pod, give it back. */
static int judge(struct iod_sched_cluster *sc, const struct iod_sched_request *req,
                 const struct iod_sched_opts *opts, struct cand *c, struct iod_err *e)
{
	struct iod_sched_result res;
	int rc = iod_sched_result_init(&res, 1, 1);
	if (rc)
		return iod_err_set(e, rc, "out of memory");
	iod_sched_node_cordon(sc, c->id, false);
	rc = iod_sched_place(sc, req, 1, opts, &res, e);
	if (!rc && res.n == 1) {
		const struct iod_sched_placement *p = &res.p[0];
		c->placed = p->placed;
		c->total = p->explain.cand_n ? p->explain.cand[0].total : 0;
		c->unresolvable = p->reason == IOD_SCHED_REASON_NODE_TOO_SMALL ||
		                  p->reason == IOD_SCHED_REASON_GPU_MEMORY;
		snprintf(c->why, sizeof(c->why), "iod: %s: %s", iod_sched_reason_name(p->reason),
		         p->why);
		char *tail = strstr(c->why, "; ruled out earlier"); /* the cordoned others */
		if (tail)
			*tail = 0;
		if (p->placed)
			iod_sched_release(sc, p->replica);
	}
	iod_sched_node_cordon(sc, c->id, true);
	iod_sched_result_free(&res);
	return rc;
}

/*
 * An earlier judged candidate of the same model with the same GPUs taken.
 * Nothing of the pod runs in the cluster, so rack and zone change no term:
 * such nodes get the same verdict and total, and only one of each kind is
 * placed on (1,000 nodes of 3 models: 3 placements).
 */
static const struct cand *twin(const struct cand *cs, uint32_t i)
{
	for (uint32_t j = 0; j < i; j++)
		if (cs[j].shape >= 0 && cs[j].shape == cs[i].shape && cs[j].used == cs[i].used &&
		    !cs[j].copied)
			return &cs[j];
	return NULL;
}

/* from's verdict for c, its name in the reason replaced by c's. */
static void copy_verdict(struct cand *c, const struct cand *from)
{
	c->placed = from->placed;
	c->total = from->total;
	c->unresolvable = from->unresolvable;
	c->copied = true;
	const char *at = strstr(from->why, from->name);
	if (!at) {
		memcpy(c->why, from->why, sizeof(c->why));
		return;
	}
	snprintf(c->why, sizeof(c->why), "%.*s%s%s", (int)(at - from->why), from->why, c->name,
	         at + strlen(from->name));
}

static int judge_all(const struct iod_k8s_ext *x, const struct iod_sched_request *req,
                     struct cand *cs, uint32_t n, struct iod_err *e)
{
	struct iod_sched_cluster *sc = NULL;
	struct iod_sched_opts opts;
	iod_sched_opts_default(&opts);
	opts.explain_top = 1;
	uint32_t kinds = 0; /* nodes to place on: one per (model, GPUs taken) */
	for (uint32_t i = 0; i < n; i++)
		kinds += cs[i].shape >= 0 && !twin(cs, i);
	int rc = iod_sched_cluster_new(kinds ? kinds : 1, 4, &sc, e);
	for (uint32_t i = 0; !rc && i < x->shapes_n; i++) {
		uint32_t id;
		rc = iod_sched_shape_add(sc, &x->shapes[i].shape, &id, e);
	}
	for (uint32_t i = 0; !rc && i < n; i++) {
		struct cand *c = &cs[i];
		if (c->shape < 0) { /* no topology: only a pod without GPUs fits */
			c->placed = req->gpus == 0;
			c->unresolvable = true;
			snprintf(c->why, sizeof(c->why),
			         "iod: no topology for node %s: label it iod.dev/model (iod topo "
			         "--cluster -o labels) or run the extender with it",
			         c->name);
			continue;
		}
		const struct cand *same = twin(cs, i);
		if (same) { /* same model, same GPUs taken: the same verdict */
			copy_verdict(c, same);
			continue;
		}
		struct iod_sched_node_spec ns = {.name = c->name,
		                                 .shape = (uint32_t)c->shape,
		                                 .rack = c->rack,
		                                 .zone = c->zone,
		                                 .cordoned = true,
		                                 .gpus_used = c->used};
		rc = iod_sched_node_add(sc, &ns, &c->id, e);
		if (!rc)
			rc = judge(sc, req, &opts, c, e);
	}
	iod_sched_cluster_free(sc);
	return rc;
}

static json_t *filter_result(const json_t *args, const struct cand *cs, uint32_t n, bool by_name)
{
	json_t *failed = json_object(), *unres = json_object(), *keep = json_array();
	for (uint32_t i = 0; i < n; i++) {
		const struct cand *c = &cs[i];
		if (c->placed)
			json_array_append_new(keep, by_name ? json_string(c->name)
			                                    : json_incref((json_t *)c->item));
		else
			json_object_set_new(c->unresolvable ? unres : failed, c->name,
			                    json_string(c->why));
	}
	json_t *r = json_object();
	if (by_name) {
		json_object_set_new(r, "Nodes", json_null());
		json_object_set_new(r, "NodeNames", keep);
	} else {
		json_t *list = json_copy(field(args, "Nodes")); /* shallow: items are shared */
		json_object_set_new(list, "items", keep);
		json_object_set_new(r, "Nodes", list);
		json_object_set_new(r, "NodeNames", json_null());
	}
	json_object_set_new(r, "FailedNodes", failed);
	json_object_set_new(r, "FailedAndUnresolvableNodes", unres);
	json_object_set_new(r, "Error", json_string(""));
	return r;
}

/* iod's totals scaled to 0..10, the best node 10; a node that cannot take
 * the pod (or has no topology) 0. */
static json_t *priorities(const struct cand *cs, uint32_t n)
{
	int64_t best = 0;
	for (uint32_t i = 0; i < n; i++)
		if (cs[i].placed && cs[i].total > best)
			best = cs[i].total;
	json_t *list = json_array();
	for (uint32_t i = 0; i < n; i++) {
		int64_t s = cs[i].placed && best > 0 && cs[i].total > 0
		                ? (cs[i].total * IOD_K8S_EXT_SCORE_MAX + best / 2) / best
		                : 0;
		json_array_append_new(
		    list, json_pack("{s:s, s:I}", "Host", cs[i].name, "Score", (json_int_t)s));
	}
	return list;
}

int iod_k8s_ext_answer(const struct iod_k8s_ext *x, const char *verb, const char *body, size_t len,
                       json_t **out, struct iod_err *e)
{
	json_t *args = NULL;
	struct cand *cs = NULL;
	struct iod_sched_request req;
	uint32_t n = 0;
	bool by_name = false;
	*out = NULL;
	bool filter = !strcmp(verb, "filter");
	if (!filter && strcmp(verb, "prioritize"))
		return iod_err_set(e, -ENOENT, "unknown extender verb %s: filter or prioritize",
		                   verb);
	int rc = iod_json_parse(body, len, &args, e);
	if (!rc && !json_is_object(args))
		rc = iod_err_set(e, -EINVAL, "ExtenderArgs must be a JSON object");
	if (!rc)
		rc = pod_request(field(args, "Pod"), &req, e);
	if (!rc)
		rc = candidates(x, args, &cs, &n, &by_name, e);
	if (!rc)
		rc = judge_all(x, &req, cs, n, e);
	if (!rc)
		*out = filter ? filter_result(args, cs, n, by_name) : priorities(cs, n);
	free(cs);
	json_decref(args);
	return rc;
}
