/*
 * convert.c: the scheduler's inputs from the spec: a service's request.
 *
 * The core works on its own plain structs so that it never depends on YAML;
 * this file is the one place that maps spec fields onto them. It must not
 * parse anything or guess silently: every mapping is documented in
 * docs/scheduler.md.
 */
#include "internal.h"
#include "iod/spec.h"

#include <string.h>

int iod_sched_request_from_spec(const struct iod_spec_service *s, struct iod_sched_request *out,
                                struct iod_err *e)
{
	memset(out, 0, sizeof(*out));
	if (!s->name || !s->name[0])
		return iod_err_set(e, -EINVAL, "a service without a name");
	if (iod_strlcpy(out->service, s->name, sizeof(out->service)) != 0 ||
	    strlen(s->name) >= IOD_NAME_MAX - 8)
		return iod_err_set(e, -EINVAL, "service %s: name too long for replica names (max %d)",
		                   s->name, IOD_NAME_MAX - 9);
	out->replicas = s->replicas;
	out->gpus = s->res.gpu;
	if (!out->gpus && (s->res.compute.type == IOD_COMPUTE_TENSOR_CORE ||
	                   s->res.compute.type == IOD_COMPUTE_CUDA_CORE))
		out->gpus = s->res.compute.count;
	if (out->gpus > IOD_SCHED_NODE_GPUS_MAX)
		return iod_err_set(e, -EINVAL,
		                   "service %s: %u GPUs per replica; a node has at most %u",
		                   s->name, out->gpus, IOD_SCHED_NODE_GPUS_MAX);
	out->cpus = (s->res.cpu_millis + 999) / 1000;
	out->mem_bytes = s->res.mem_bytes;
	out->nic_bw_bps = s->res.network.bandwidth_bps;
	out->numa = s->placement.numa == IOD_NUMA_SINGLE ? IOD_SCHED_NUMA_SINGLE
	                                                 : IOD_SCHED_NUMA_BEST_EFFORT;
	switch (s->placement.gpu_link) {
	case IOD_GPU_LINK_NVLINK: out->gpu_link = IOD_SCHED_LINK_NVLINK; break;
	case IOD_GPU_LINK_PCIE: out->gpu_link = IOD_SCHED_LINK_PCIE; break;
	default: out->gpu_link = IOD_SCHED_LINK_ANY; break;
	}
	out->spread = s->placement.spread == IOD_SPREAD_SPREAD;
	out->stateful = s->type == IOD_SERVICE_STATEFUL;
	switch (s->placement.anti) {
	case IOD_ANTI_NODE: out->anti = IOD_SCHED_DOMAIN_NODE; break;
	case IOD_ANTI_RACK: out->anti = IOD_SCHED_DOMAIN_RACK; break;
	case IOD_ANTI_ZONE: out->anti = IOD_SCHED_DOMAIN_ZONE; break;
	default: out->anti = IOD_SCHED_DOMAIN_NONE; break;
	}
	out->gang = s->gang;
	return 0;
}
