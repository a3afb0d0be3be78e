/*
 * devplugin.c: the topology-aware choice behind the device plugin's
 * GetPreferredAllocation (pure). kubelet offers the available device ids,
 * the ids that must be included and the size; the answer is the set iod
 * would place on. The gRPC shell is not built (docs/kubernetes.md).
 */
#include "iod/k8s.h"

#include <string.h>

static uint32_t popcount(uint32_t m)
{
	return (uint32_t)__builtin_popcount(m);
}

static uint64_t set_score(const struct iod_topo_node *t, uint32_t mask)
{
	struct iod_bitmap b;
	iod_bitmap_zero(&b);
	for (unsigned g = 0; g < 32; g++)
		if (mask & (1u << g))
			iod_bitmap_set(&b, g);
	return iod_topo_gpu_set_score(t, &b);
}

/* sched/'s choice on the node with every unavailable GPU taken. */
static int by_scheduler(const struct iod_topo_node *t, uint32_t available, uint32_t size,
                        uint32_t *out, struct iod_err *e)
{
	struct iod_sched_cluster *c = NULL;
	struct iod_sched_shape shape;
	struct iod_sched_result res;
	struct iod_sched_opts o;
	uint32_t sid = 0, nid = 0, all = t->ngpus >= 32 ? ~0u : (1u << t->ngpus) - 1;
	int rc = iod_sched_shape_from_topo(t, &shape, e);
	rc = rc ? rc : iod_sched_cluster_new(1, 2, &c, e);
	rc = rc ? rc : iod_sched_shape_add(c, &shape, &sid, e);
	struct iod_sched_node_spec ns = {
	    .name = "node", .shape = sid, .gpus_used = all & ~available};
	rc = rc ? rc : iod_sched_node_add(c, &ns, &nid, e);
	struct iod_sched_request q = {
	    .service = "pod", .replicas = 1, .gpus = size, .numa = IOD_SCHED_NUMA_BEST_EFFORT};
	iod_sched_opts_default(&o);
	o.explain_top = 1;
	if (!rc && !(rc = iod_sched_result_init(&res, 1, 1))) {
		rc = iod_sched_place(c, &q, 1, &o, &res, e);
		if (!rc && (res.n != 1 || !res.p[0].placed))
			rc = iod_err_set(e, -ENOSPC, "no %u-GPU set: %s", size,
			                 res.n ? res.p[0].why : "not placed");
		if (!rc)
			*out = res.p[0].gpu_mask;
		iod_sched_result_free(&res);
	}
	iod_sched_cluster_free(c);
	return rc;
}

/* The best-scoring size-set with must inside available (exhaustive). */
static uint32_t best_superset(const struct iod_topo_node *t, uint32_t available, uint32_t must,
                              uint32_t size)
{
	uint32_t best = 0;
	uint64_t best_score = 0;
	uint32_t free_ = available & ~must, n = popcount(free_), idx[16], k = 0;
	for (unsigned g = 0; g < 32 && k < 16; g++)
		if (free_ & (1u << g))
			idx[k++] = g;
	for (uint32_t pick = 0; pick < (1u << n); pick++) { /* n <= 16 */
		if (popcount(pick) != size - popcount(must))
			continue;
		uint32_t m = must;
		for (uint32_t j = 0; j < n; j++)
			if (pick & (1u << j))
				m |= 1u << idx[j];
		uint64_t s = set_score(t, m);
		if (!best || s > best_score) {
			best = m;
			best_score = s;
		}
	}
	return best;
}

int iod_k8s_preferred(const struct iod_topo_node *t, uint32_t available, uint32_t must,
                      uint32_t size, uint32_t *out, struct iod_err *e)
{
	uint32_t all = t->ngpus >= 32 ? ~0u : (1u << t->ngpus) - 1;
	available &= all;
	if (!size || size > popcount(available))
		return iod_err_set(e, -EINVAL, "size %u: %u GPUs available", size,
		                   popcount(available));
	if ((must & ~available) || popcount(must) > size)
		return iod_err_set(e, -EINVAL,
		                   "must-include GPUs are not all available, or more than size %u",
		                   size);
	if (!must)
		return by_scheduler(t, available, size, out, e);
	if (t->ngpus > 16)
		return iod_err_set(e, -E2BIG, "must-include on a node of %u GPUs (16 at most)",
		                   t->ngpus);
	*out = best_superset(t, available, must, size);
	return 0;
}
