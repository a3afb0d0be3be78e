/*
 * shapes.c: the scheduler's cluster state: names and defaults, node shapes,
 * the cluster and its nodes, services and failure-domain counts.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const numa_names[] = {
#define X(n, s) s,
    IOD_SCHED_NUMA_POLICIES(X)
#undef X
};
static const char *const term_names[] = {
#define X(n, s, w) s,
    IOD_SCHED_TERMS(X)
#undef X
};
static const char *const reason_names[] = {
#define X(n, s) s,
    IOD_SCHED_REASONS(X)
#undef X
};

const char *iod_sched_numa_name(enum iod_sched_numa p)
{
	return (unsigned)p < IOD_ARRAY_LEN(numa_names) ? numa_names[p] : "?";
}

int iod_sched_numa_parse(const char *s, enum iod_sched_numa *out)
{
	for (size_t i = 0; i < IOD_ARRAY_LEN(numa_names); i++) {
		if (!strcmp(s, numa_names[i])) {
			*out = (enum iod_sched_numa)i;
			return 0;
		}
	}
	if (!strcmp(s, "single")) {
		*out = IOD_SCHED_NUMA_SINGLE;
		return 0;
	}
	return -EINVAL;
}

const char *iod_sched_term_name(enum iod_sched_term t)
{
	return (unsigned)t < IOD_ARRAY_LEN(term_names) ? term_names[t] : "?";
}

const char *iod_sched_reason_name(enum iod_sched_reason r)
{
	return (unsigned)r < IOD_ARRAY_LEN(reason_names) ? reason_names[r] : "?";
}

const char *iod_sched_acc_type_name(enum iod_sched_acc_type t)
{
	switch (t) {
	case IOD_SCHED_ACC_DPU: return "dpu";
	case IOD_SCHED_ACC_FPGA: return "fpga";
	default: return "none";
	}
}

const char *iod_sched_domain_name(enum iod_sched_domain d)
{
	static const char *const n[] = {"none", "node", "rack", "zone"};
	return (unsigned)d < IOD_ARRAY_LEN(n) ? n[d] : "?";
}

void iod_sched_weights_default(struct iod_sched_weights *w)
{
	unsigned i = 0;
#define X(n, s, wt) w->w[i++] = wt;
	IOD_SCHED_TERMS(X)
#undef X
}

void iod_sched_opts_default(struct iod_sched_opts *o)
{
	memset(o, 0, sizeof(*o));
	iod_sched_weights_default(&o->weights);
	o->explain_top = IOD_SCHED_EXPLAIN_TOP;
}

/* SWAR popcount: the build has no -mpopcnt, and libgcc's call showed up as
 * a fifth of the throughput benchmark. */
/* ---- shapes -------------------------------------------------------------- */

void iod_sched_shape_init(struct iod_sched_shape *s, const char *model, uint32_t gpus_n,
                          uint32_t numa_n)
{
	memset(s, 0, sizeof(*s));
	iod_strlcpy(s->model, model ? model : "custom", sizeof(s->model));
	s->gpus_n = IOD_MIN(gpus_n, (uint32_t)IOD_SCHED_NODE_GPUS_MAX);
	s->numa_n = IOD_MAX(1u, IOD_MIN(numa_n, (uint32_t)IOD_SCHED_NUMA_MAX));
	for (uint32_t i = 0; i < s->gpus_n; i++)
		s->gpu_numa[i] = (int32_t)(i * s->numa_n / IOD_MAX(1u, s->gpus_n));
	iod_sched_shape_finish(s);
}

void iod_sched_shape_finish(struct iod_sched_shape *s)
{
	for (uint32_t i = 0; i < s->gpus_n; i++)
		s->island[i] = 0;
	for (uint32_t i = 0; i < s->gpus_n; i++) {
		if (s->island[i])
			continue;
		/* flood fill over nvlink[] */
		const uint32_t self = 1u << i;
		uint32_t comp = self, frontier = self;
		while (frontier) {
			uint32_t g = (uint32_t)__builtin_ctz(frontier);
			frontier &= frontier - 1;
			uint32_t nb = s->nvlink[g] & ~comp & ((1u << s->gpus_n) - 1);
			comp |= nb;
			frontier |= nb;
		}
		for (uint32_t j = 0; j < s->gpus_n; j++)
			if (comp >> j & 1)
				s->island[j] = comp;
	}
}

static int shape_check(const struct iod_sched_shape *s, struct iod_err *e)
{
	if (s->gpus_n > IOD_SCHED_NODE_GPUS_MAX)
		return iod_err_set(e, -E2BIG, "shape %s: %u GPUs exceed the limit of %u per node",
		                   s->model, s->gpus_n, IOD_SCHED_NODE_GPUS_MAX);
	if (s->numa_n == 0 || s->numa_n > IOD_SCHED_NUMA_MAX)
		return iod_err_set(e, -E2BIG, "shape %s: %u NUMA nodes (1..%u allowed)", s->model,
		                   s->numa_n, IOD_SCHED_NUMA_MAX);
	if (s->nics_n > IOD_SCHED_NICS_MAX)
		return iod_err_set(e, -E2BIG, "shape %s: %u NICs exceed the limit of %u", s->model,
		                   s->nics_n, IOD_SCHED_NICS_MAX);
	for (uint32_t i = 0; i < s->gpus_n; i++)
		if (s->gpu_numa[i] < 0 || (uint32_t)s->gpu_numa[i] >= s->numa_n)
			return iod_err_set(e, -EINVAL, "shape %s: GPU%u on NUMA node %d of %u",
			                   s->model, i, s->gpu_numa[i], s->numa_n);
	if (s->accs_n > IOD_SCHED_ACCS_MAX)
		return iod_err_set(e, -E2BIG,
		                   "shape %s: %u accelerators exceed the limit of %u per node",
		                   s->model, s->accs_n, IOD_SCHED_ACCS_MAX);
	for (uint32_t i = 0; i < s->accs_n; i++)
		if (s->accs[i].type == IOD_SCHED_ACC_NONE || s->accs[i].numa >= (int32_t)s->numa_n)
			return iod_err_set(
			    e, -EINVAL, "shape %s: accelerator %s is %s on NUMA node %d", s->model,
			    s->accs[i].name, iod_sched_acc_type_name(s->accs[i].type),
			    s->accs[i].numa);
	return 0;
}

int iod_sched_shape_add(struct iod_sched_cluster *c, const struct iod_sched_shape *s, uint32_t *id,
                        struct iod_err *e)
{
	int rc = shape_check(s, e);
	if (rc)
		return rc;
	if (c->shapes_n >= IOD_SCHED_SHAPES_MAX)
		return iod_err_set(e, -ENOSPC, "more than %u node models", IOD_SCHED_SHAPES_MAX);
	struct shape *sh = &c->shapes[c->shapes_n];
	memset(sh, 0, sizeof(*sh));
	sh->s = *s;
	iod_sched_shape_finish(&sh->s);
	rc = iod_map_init(&sh->memo, 256, IOD_SCHED_MEMO_MAX);
	if (rc)
		return iod_err_set(e, rc, "shape %s: out of memory", s->model);
	iod_arena_init(&sh->arena, 1u << 16, 0);
	/* distinct islands */
	uint32_t seen = 0;
	for (uint32_t i = 0; i < s->gpus_n; i++) {
		if (seen >> i & 1)
			continue;
		sh->islands[sh->islands_n++] = sh->s.island[i];
		seen |= sh->s.island[i];
	}
	/* fewest NUMA nodes k GPUs can span: take the fullest NUMA nodes first */
	uint32_t per[IOD_SCHED_NUMA_MAX] = {0};
	for (uint32_t i = 0; i < s->gpus_n; i++)
		per[s->gpu_numa[i]]++;
	for (uint32_t k = 0; k <= s->gpus_n; k++) {
		uint32_t used = 0, got = 0, span = 0;
		while (got < k) {
			uint32_t best = 0, bi = 0;
			for (uint32_t n = 0; n < s->numa_n; n++)
				if (!(used >> n & 1) && per[n] > best)
					best = per[n], bi = n;
			used |= 1u << bi;
			got += best;
			span++;
		}
		sh->min_span[k] = (uint8_t)span;
	}
	for (uint32_t n = 0; n < s->numa_n; n++) {
		sh->numa_cpus_n[n] = iod_bitmap_count(&s->numa_cpus[n]);
		sh->cpus_n += sh->numa_cpus_n[n];
	}
	for (uint32_t i = 0; i < s->gpus_n; i++)
		for (uint32_t j = 0; j < s->gpus_n; j++)
			if (i != j && s->pair_score[i][j] > c->pair_max)
				c->pair_max = s->pair_score[i][j];
	*id = c->shapes_n++;
	return 0;
}

/* ---- cluster ------------------------------------------------------------- */

int iod_sched_cluster_new(uint32_t nodes_max, uint32_t replicas_max, struct iod_sched_cluster **out,
                          struct iod_err *e)
{
	if (nodes_max == 0 || nodes_max > IOD_SCHED_NODES_MAX)
		return iod_err_set(e, -EINVAL, "nodes: %u (1..%u allowed)", nodes_max,
		                   IOD_SCHED_NODES_MAX);
	if (replicas_max == 0 || replicas_max > IOD_SCHED_REPLICAS_MAX)
		return iod_err_set(e, -EINVAL, "replicas: %u (1..%u allowed)", replicas_max,
		                   IOD_SCHED_REPLICAS_MAX);
	struct iod_sched_cluster *c = calloc(1, sizeof(*c));
	if (!c)
		return iod_err_set(e, -ENOMEM, "out of memory");
	c->shapes = calloc(IOD_SCHED_SHAPES_MAX, sizeof(*c->shapes));
	c->nodes = calloc(nodes_max, sizeof(*c->nodes));
	c->domains = calloc(2 * (size_t)nodes_max + 2, sizeof(*c->domains));
	c->replicas = calloc(replicas_max, sizeof(*c->replicas));
	c->free_ids = calloc(replicas_max, sizeof(*c->free_ids));
	c->cnt_node = calloc(nodes_max, sizeof(uint16_t));
	c->cnt_rack = calloc(2 * (size_t)nodes_max + 2, sizeof(uint16_t));
	c->cnt_zone = calloc(2 * (size_t)nodes_max + 2, sizeof(uint16_t));
	c->cache = calloc(nodes_max, sizeof(*c->cache));
	c->cache_gen = 1;
	c->services_cap = 64;
	c->services = calloc(c->services_cap, sizeof(*c->services));
	c->nodes_max = nodes_max;
	c->replicas_max = replicas_max;
	iod_arena_init(&c->arena, 1u << 16, 0);
	if (!c->shapes || !c->nodes || !c->cache || !c->domains || !c->replicas || !c->free_ids ||
	    !c->cnt_node || !c->cnt_rack || !c->cnt_zone || !c->services ||
	    iod_map_init(&c->domain_ids, 64, 0) || iod_map_init(&c->service_ids, 64, 0)) {
		iod_sched_cluster_free(c);
		return iod_err_set(e, -ENOMEM, "out of memory for %u nodes", nodes_max);
	}
	*out = c;
	return 0;
}

void iod_sched_cluster_free(struct iod_sched_cluster *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; c->shapes && i < c->shapes_n; i++) {
		iod_map_destroy(&c->shapes[i].memo);
		iod_arena_free(&c->shapes[i].arena);
	}
	free(c->shapes);
	free(c->nodes);
	free(c->domains);
	free(c->replicas);
	free(c->free_ids);
	free(c->cnt_node);
	free(c->cnt_rack);
	free(c->cnt_zone);
	free(c->services);
	free(c->cache);
	iod_map_destroy(&c->domain_ids);
	iod_map_destroy(&c->service_ids);
	iod_arena_free(&c->arena);
	free(c);
}

static uint32_t domain_intern(struct iod_sched_cluster *c, char kind, const char *name)
{
	char key[IOD_NAME_MAX + 2];
	snprintf(key, sizeof(key), "%c:%s", kind, name);
	uint64_t h = iod_hash_str(key) | 1, v;
	/* collisions are resolved by probing h+2, h+4... with a name check */
	for (;; h += 2) {
		if (iod_map_get(&c->domain_ids, h, &v) != 0)
			break;
		if (!strcmp(c->domains[v - 1], key))
			return (uint32_t)(v - 1);
	}
	uint32_t id = c->domains_n++;
	iod_strlcpy(c->domains[id], key, IOD_NAME_MAX);
	iod_map_put(&c->domain_ids, h, id + 1);
	return id;
}

int iod_sched_node_add(struct iod_sched_cluster *c, const struct iod_sched_node_spec *n,
                       uint32_t *id, struct iod_err *e)
{
	if (c->nodes_n >= c->nodes_max)
		return iod_err_set(e, -ENOSPC, "more than %u nodes", c->nodes_max);
	if (!n->name || !n->name[0] || strlen(n->name) >= IOD_NAME_MAX)
		return iod_err_set(e, -EINVAL, "a node needs a name of 1..%d characters",
		                   IOD_NAME_MAX - 1);
	if (n->shape >= c->shapes_n)
		return iod_err_set(e, -EINVAL, "node %s: unknown shape %u", n->name, n->shape);
	if (n->labels_n > IOD_SCHED_LABELS_MAX)
		return iod_err_set(e, -E2BIG, "node %s: %u labels (at most %u)", n->name,
		                   n->labels_n, IOD_SCHED_LABELS_MAX);
	for (uint32_t i = 0; i < c->nodes_n; i++)
		if (!strcmp(c->nodes[i].name, n->name))
			return iod_err_set(e, -EEXIST, "node %s: duplicate name", n->name);
	const struct shape *sh = &c->shapes[n->shape];
	struct node *nd = &c->nodes[c->nodes_n];
	memset(nd, 0, sizeof(*nd));
	iod_strlcpy(nd->name, n->name, sizeof(nd->name));
	nd->shape = n->shape;
	nd->rack = domain_intern(c, 'r', n->rack ? n->rack : n->name);
	nd->zone = domain_intern(c, 'z', n->zone ? n->zone : "default");
	nd->cordoned = n->cordoned;
	if (n->labels_n) {
		nd->labels = iod_arena_alloc(&c->arena, n->labels_n * sizeof(*nd->labels));
		if (!nd->labels)
			return iod_err_set(e, -ENOMEM, "out of memory");
		memcpy(nd->labels, n->labels, n->labels_n * sizeof(*nd->labels));
		nd->labels_n = n->labels_n;
	}
	uint32_t all = sh->s.gpus_n ? (uint32_t)((1ull << sh->s.gpus_n) - 1) : 0;
	nd->gpu_free = all & ~n->gpus_used;
	for (uint32_t i = 0; i < sh->s.numa_n; i++) {
		iod_bitmap_or(&nd->cpu_free, &sh->s.numa_cpus[i]);
		nd->numa_cpu_free[i] = sh->numa_cpus_n[i];
		nd->numa_mem_free[i] = sh->s.numa_mem_bytes[i];
	}
	for (uint32_t i = 0; i < sh->s.nics_n; i++)
		nd->nic_free[i] = sh->s.nics[i].bw_bps;
	nd->acc_free = (uint32_t)((1ull << sh->s.accs_n) - 1) & ~n->accs_used;
	*id = c->nodes_n++;
	return 0;
}

uint32_t iod_sched_node_count(const struct iod_sched_cluster *c)
{
	return c->nodes_n;
}

const char *iod_sched_node_name(const struct iod_sched_cluster *c, uint32_t node)
{
	return node < c->nodes_n ? c->nodes[node].name : "?";
}

const struct iod_sched_shape *iod_sched_node_shape(const struct iod_sched_cluster *c, uint32_t node)
{
	return node < c->nodes_n ? &c->shapes[c->nodes[node].shape].s : NULL;
}

uint32_t iod_sched_node_gpus_free(const struct iod_sched_cluster *c, uint32_t node)
{
	return node < c->nodes_n ? c->nodes[node].gpu_free : 0;
}

int iod_sched_node_cordon(struct iod_sched_cluster *c, uint32_t node, bool cordoned)
{
	if (node >= c->nodes_n)
		return -ENOENT;
	c->nodes[node].cordoned = cordoned;
	return 0;
}

int iod_sched_replica_get(const struct iod_sched_cluster *c, uint32_t replica,
                          struct iod_sched_replica_info *out)
{
	if (replica >= c->replicas_hw || !c->replicas[replica].live)
		return -ENOENT;
	const struct replica *r = &c->replicas[replica];
	snprintf(out->name, sizeof(out->name), "%s-%u", c->services[r->service].req.service,
	         r->ordinal);
	out->node = r->node;
	out->gpu_mask = r->gpu_mask;
	out->acc_mask = r->acc_mask;
	out->cpus = r->cpus;
	out->service = c->services[r->service].req.service;
	out->mem_numa = r->mem_numa;
	out->nic = r->nic;
	return 0;
}

/* ---- services and failure-domain counts --------------------------------- */

int sched_service_get(struct iod_sched_cluster *c, const struct iod_sched_request *r, uint32_t *out)
{
	uint64_t h = iod_hash_str(r->service) | 1, v;
	for (;; h += 2) {
		if (iod_map_get(&c->service_ids, h, &v) != 0)
			break;
		if (!strcmp(c->services[v - 1].req.service, r->service)) {
			c->services[v - 1].req = *r;
			*out = (uint32_t)(v - 1);
			return 0;
		}
	}
	if (c->services_n >= IOD_SCHED_SERVICES_MAX)
		return -ENOSPC;
	if (c->services_n == c->services_cap) {
		uint32_t cap = c->services_cap * 2;
		struct service *ns = realloc(c->services, cap * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		c->services = ns;
		c->services_cap = cap;
	}
	uint32_t id = c->services_n;
	memset(&c->services[id], 0, sizeof(c->services[id]));
	c->services[id].req = *r;
	int rc = iod_map_put(&c->service_ids, h, id + 1);
	if (rc)
		return rc;
	c->services_n++;
	*out = id;
	return 0;
}

void sched_counts_load(struct iod_sched_cluster *c, uint32_t svc)
{
	memset(c->cnt_node, 0, c->nodes_n * sizeof(uint16_t));
	memset(c->cnt_rack, 0, c->domains_n * sizeof(uint16_t));
	memset(c->cnt_zone, 0, c->domains_n * sizeof(uint16_t));
	if (c->services[svc].live == 0)
		return;
	for (uint32_t i = 0; i < c->replicas_hw; i++) {
		const struct replica *r = &c->replicas[i];
		if (r->live && r->service == svc)
			sched_counts_add(c, r->node, 1);
	}
}

void sched_counts_add(struct iod_sched_cluster *c, uint32_t node_id, int delta)
{
	const struct node *n = &c->nodes[node_id];
	c->cnt_node[node_id] = (uint16_t)(c->cnt_node[node_id] + delta);
	c->cnt_rack[n->rack] = (uint16_t)(c->cnt_rack[n->rack] + delta);
	c->cnt_zone[n->zone] = (uint16_t)(c->cnt_zone[n->zone] + delta);
}
