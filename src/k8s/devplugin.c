/*
 * devplugin.c: the topology-aware choice behind the device plugin's
 * GetPreferredAllocation (pure). kubelet offers the available device ids,
 * the ids that must be included and the size; the answer is the set iod
 * would place on; and the rest of what the device plugin decides: the
 * devices ListAndWatch reports and what Allocate hands a container. The
 * gRPC shell is src/k8s/dp_serve.c (docs/kubernetes.md).
 */
#include "iod/k8s.h"

#include <stdio.h>
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

/* ---- the device plugin's devices, preferred sets and allocations --------- */

const char *iod_dp_resource_name(enum iod_dp_resource r)
{
	return r == IOD_DP_DPU ? "iod.dev/dpu" : "iod.dev/gpu";
}

/* The i-th device of r: its device index in t, -1 past the end. */
static int nth_device(const struct iod_topo_node *t, enum iod_dp_resource r, uint32_t i)
{
	if (r == IOD_DP_GPU)
		return i < t->ngpus ? t->gpu[i] : -1;
	for (uint32_t d = 0, k = 0; d < t->ndevices; d++)
		if (t->devices[d].kind == IOD_TOPO_DEV_DPU && k++ == i)
			return (int)d;
	return -1;
}

static uint32_t count_devices(const struct iod_topo_node *t, enum iod_dp_resource r)
{
	uint32_t n = 0;
	while (nth_device(t, r, n) >= 0)
		n++;
	return n;
}

static void device_id(enum iod_dp_resource r, uint32_t i, char *buf, size_t len)
{
	snprintf(buf, len, "%s%u", r == IOD_DP_DPU ? "dpu" : "gpu", i);
}

/* The index of id ("gpu3" -> 3) among r's n devices, -1 if it is not one. */
static int id_index(enum iod_dp_resource r, uint32_t n, const char *id)
{
	char want[IOD_DP_ID_MAX];
	for (uint32_t i = 0; i < n; i++) {
		device_id(r, i, want, sizeof(want));
		if (!strcmp(want, id))
			return (int)i;
	}
	return -1;
}

static int32_t os_numa(const struct iod_topo_node *t, int dev)
{
	int16_t k = t->devices[dev].numa;
	return k >= 0 && k < t->nnuma ? (int32_t)t->numa[k].os_index : -1;
}

uint32_t iod_dp_devices(const struct iod_topo_node *t, enum iod_dp_resource r,
                        const struct iod_dp_ids *unhealthy, struct iod_dp_device *out, uint32_t max)
{
	uint32_t n = 0;
	for (int d; n < max && (d = nth_device(t, r, n)) >= 0; n++) {
		device_id(r, n, out[n].id, sizeof(out[n].id));
		out[n].healthy = true;
		for (uint32_t j = 0; unhealthy && j < unhealthy->n; j++)
			if (!strcmp(unhealthy->id[j], out[n].id))
				out[n].healthy = false;
		out[n].numa = os_numa(t, d);
	}
	return n;
}

/* ids as a mask of r's device indexes; -EINVAL naming the unknown one. */
static int ids_mask(const struct iod_topo_node *t, enum iod_dp_resource r,
                    const struct iod_dp_ids *ids, uint32_t *mask, struct iod_err *e)
{
	uint32_t n = count_devices(t, r);
	*mask = 0;
	for (uint32_t i = 0; i < ids->n; i++) {
		int k = id_index(r, n, ids->id[i]);
		if (k < 0 || k >= 32)
			return iod_err_set(e, -EINVAL, "unknown %s device %s (this node has %u)",
			                   iod_dp_resource_name(r), ids->id[i], n);
		*mask |= 1u << k;
	}
	return 0;
}

static void mask_ids(enum iod_dp_resource r, uint32_t mask, struct iod_dp_ids *out)
{
	out->n = 0;
	for (uint32_t i = 0; i < 32 && out->n < IOD_DP_IDS_MAX; i++)
		if (mask & (1u << i))
			device_id(r, i, out->id[out->n++], IOD_DP_ID_MAX);
}

int iod_dp_preferred(const struct iod_topo_node *t, enum iod_dp_resource r,
                     const struct iod_dp_creq *q, struct iod_dp_ids *out, struct iod_err *e)
{
	uint32_t avail = 0, must = 0, pick = 0;
	int rc = ids_mask(t, r, &q->available, &avail, e);
	rc = rc ? rc : ids_mask(t, r, &q->must, &must, e);
	if (rc)
		return rc;
	if (r == IOD_DP_GPU) {
		rc = iod_k8s_preferred(t, avail | must, must, (uint32_t)q->size, &pick, e);
		if (!rc)
			mask_ids(r, pick, out);
		return rc;
	}
	avail |= must;
	if (q->size <= 0 || (uint32_t)q->size > popcount(avail) ||
	    popcount(must) > (uint32_t)q->size)
		return iod_err_set(e, -EINVAL, "size %d: %u %s available, %u must be included",
		                   q->size, popcount(avail), iod_dp_resource_name(r),
		                   popcount(must));
	/* DPUs: the must-include ones, then those on their NUMA node, then any */
	pick = must;
	int32_t home = -1;
	for (uint32_t i = 0; i < 32 && home < 0; i++)
		if (must & (1u << i))
			home = os_numa(t, nth_device(t, r, i));
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < 32 && popcount(pick) < (uint32_t)q->size; i++)
			if ((avail & ~pick & (1u << i)) &&
			    (pass || home < 0 || os_numa(t, nth_device(t, r, i)) == home))
				pick |= 1u << i;
	mask_ids(r, pick, out);
	return 0;
}

static void add_env(struct iod_dp_alloc *a, const char *k, const char *v)
{
	if (a->nenvs >= IOD_DP_ENVS_MAX)
		return;
	iod_strlcpy(a->envs[a->nenvs].key, k, sizeof(a->envs[0].key));
	iod_strlcpy(a->envs[a->nenvs].value, v, sizeof(a->envs[0].value));
	a->nenvs++;
}

static void add_dev(struct iod_dp_alloc *a, const char *path)
{
	if (a->ndevices >= IOD_DP_DEVSPECS_MAX)
		return;
	struct iod_dp_path *p = &a->devices[a->ndevices++];
	iod_strlcpy(p->container_path, path, sizeof(p->container_path));
	iod_strlcpy(p->host_path, path, sizeof(p->host_path));
	iod_strlcpy(p->permissions, "rw", sizeof(p->permissions));
}

int iod_dp_allocate(const struct iod_topo_node *t, enum iod_dp_resource r,
                    const struct iod_dp_ids *ids, struct iod_dp_alloc *out, struct iod_err *e)
{
	uint32_t mask = 0;
	char set[IOD_DP_IDS_MAX * 4], path[64];
	memset(out, 0, sizeof(*out));
	int rc = ids_mask(t, r, ids, &mask, e);
	if (rc)
		return rc;
	if (!mask)
		return iod_err_set(e, -EINVAL, "no devices to allocate");
	struct iod_bitmap b;
	iod_bitmap_zero(&b);
	for (unsigned i = 0; i < 32; i++)
		if (mask & (1u << i))
			iod_bitmap_set(&b, i);
	if (r == IOD_DP_DPU) {
		/* the DPU's RDMA verbs device; its number follows the device order */
		set[0] = '\0';
		for (uint32_t i = 0; i < 32; i++) {
			if (!(mask & (1u << i)))
				continue;
			snprintf(path, sizeof(path), "%s%s%u", set[0] ? "," : "", "dpu", i);
			strncat(set, path, sizeof(set) - strlen(set) - 1);
			snprintf(path, sizeof(path), "/dev/infiniband/uverbs%u", i);
			add_dev(out, path);
		}
		add_dev(out, "/dev/infiniband/rdma_cm");
		add_env(out, "IOD_DPUS", set);
		return 0;
	}
	/* what iod's agent gives its own replicas (src/agent/sandbox.c), as a
	 * comma list: CUDA reads no ranges ("0-3" would be GPU 0 alone) */
	iod_bitmap_format_list(&b, set, sizeof(set));
	add_env(out, "CUDA_VISIBLE_DEVICES", set);
	add_env(out, "NVIDIA_VISIBLE_DEVICES", set);
	int numa = iod_topo_nearest_numa(t, &b);
	if (numa >= 0 && numa < t->nnuma) {
		snprintf(path, sizeof(path), "%u", t->numa[numa].os_index);
		add_env(out, "IOD_NUMA_NODE", path);
	}
	struct iod_bitmap cpus;
	char cpu_set[sizeof(out->envs[0].value)];
	iod_topo_nearest_cpuset(t, &b, &cpus);
	if (!iod_bitmap_format(&cpus, cpu_set, sizeof(cpu_set)) && cpu_set[0])
		add_env(out, "IOD_CPUS", cpu_set);
	for (uint32_t i = 0; i < 32; i++)
		if (mask & (1u << i)) {
			const char *os = t->devices[t->gpu[i]].os_name;
			if (iod_str_has_prefix(os, "nvidia") && os[6] >= '0' && os[6] <= '9')
				snprintf(path, sizeof(path), "/dev/%s", os);
			else
				snprintf(path, sizeof(path), "/dev/nvidia%u", i);
			add_dev(out, path);
		}
	add_dev(out, "/dev/nvidiactl");
	add_dev(out, "/dev/nvidia-uvm");
	add_dev(out, "/dev/nvidia-uvm-tools");
	return 0;
}
