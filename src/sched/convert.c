/*
 * convert.c: the scheduler's inputs from the spec (a service's request) and
 * from topo/ (a node model reduced to a shape).
 *
 * The core works on its own plain structs so that it never depends on YAML;
 * this file is the one place that maps spec fields onto them. It must not
 * parse anything or guess silently: every mapping is documented in
 * docs/scheduler.md.
 */
#include "internal.h"
#include "iod/spec.h"
#include "iod/topo.h"

#include <string.h>

int iod_sched_request_from_spec(const struct iod_spec_service *s, struct iod_sched_request *out,
                                struct iod_err *e)
{
	memset(out, 0, sizeof(*out));
	if (!s->name || !s->name[0])
		return iod_err_set(e, -EINVAL, "a service without a name");
	if (iod_strlcpy(out->service, s->name, sizeof(out->service)) != 0 ||
	    strlen(s->name) >= IOD_NAME_MAX - 8)
		return iod_err_set(e, -EINVAL,
		                   "service %s: name too long for replica names (max %d)", s->name,
		                   IOD_NAME_MAX - 9);
	out->replicas = s->replicas;
	out->gpus = s->res.gpu;
	if (!out->gpus && (s->res.compute.type == IOD_COMPUTE_TENSOR_CORE ||
	                   s->res.compute.type == IOD_COMPUTE_CUDA_CORE))
		out->gpus = s->res.compute.count;
	if (out->gpus > IOD_SCHED_NODE_GPUS_MAX)
		return iod_err_set(e, -EINVAL,
		                   "service %s: %u GPUs per replica; a node has at most %u",
		                   s->name, out->gpus, IOD_SCHED_NODE_GPUS_MAX);
	out->gpu_mem_bytes = s->res.gpu_mem_bytes;
	if (!out->gpu_mem_bytes && (s->res.compute.type == IOD_COMPUTE_TENSOR_CORE ||
	                            s->res.compute.type == IOD_COMPUTE_CUDA_CORE))
		out->gpu_mem_bytes = s->res.compute.mem_bytes;
	if (s->res.compute.type == IOD_COMPUTE_DPU || s->res.compute.type == IOD_COMPUTE_FPGA) {
		out->acc_type =
		    s->res.compute.type == IOD_COMPUTE_DPU ? IOD_SCHED_ACC_DPU : IOD_SCHED_ACC_FPGA;
		out->accs = s->res.compute.count;
		out->acc_mem_bytes = s->res.compute.mem_bytes;
		if (out->accs > IOD_SCHED_ACCS_MAX)
			return iod_err_set(
			    e, -EINVAL, "service %s: %u %ss per replica; a node has at most %u",
			    s->name, out->accs, iod_sched_acc_type_name(out->acc_type),
			    IOD_SCHED_ACCS_MAX);
		if (!out->accs)
			out->acc_type = IOD_SCHED_ACC_NONE;
	}
	out->cpus = (s->res.cpu_millis + 999) / 1000;
	out->mem_bytes = s->res.mem_bytes;
	out->nic_bw_bps = s->res.network.bandwidth_bps;
	switch (s->placement.numa) {
	case IOD_NUMA_SINGLE: out->numa = IOD_SCHED_NUMA_SINGLE; break;
	case IOD_NUMA_NONE: out->numa = IOD_SCHED_NUMA_NONE; break;
	case IOD_NUMA_RESTRICTED: out->numa = IOD_SCHED_NUMA_RESTRICTED; break;
	default: out->numa = IOD_SCHED_NUMA_BEST_EFFORT; break;
	}
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

/*
 * From a topo/ node: pair scores from iod_topo_gpu_pair_score (go-gpuallocator
 * values), direct NVLinks from the link matrix, each GPU's NUMA node, each
 * NUMA node's PUs and memory, and every NIC/DPU with the GPUs that share its
 * PCIe switch (PIX or PXB: GPUDirect RDMA peers).
 */
int iod_sched_shape_from_topo(const struct iod_topo_node *t, struct iod_sched_shape *out,
                              struct iod_err *e)
{
	const char *model = t->model[0] ? t->model : t->name;
	if (t->ngpus > IOD_SCHED_NODE_GPUS_MAX)
		return iod_err_set(e, -E2BIG,
		                   "node model %s: %u GPUs; the scheduler handles %u per node",
		                   model, t->ngpus, IOD_SCHED_NODE_GPUS_MAX);
	if (t->nnuma > IOD_SCHED_NUMA_MAX)
		return iod_err_set(
		    e, -E2BIG, "node model %s: %u NUMA nodes; the scheduler handles %u per node",
		    model, t->nnuma, IOD_SCHED_NUMA_MAX);
	if (t->nnics > IOD_SCHED_NICS_MAX)
		return iod_err_set(e, -E2BIG,
		                   "node model %s: %u NICs; the scheduler handles %u per node",
		                   model, t->nnics, IOD_SCHED_NICS_MAX);
	iod_sched_shape_init(out, model, t->ngpus, IOD_MAX(1u, (unsigned)t->nnuma));
	for (unsigned g = 0; g < t->ngpus; g++) {
		int numa = t->devices[t->gpu[g]].numa;
		out->gpu_numa[g] = numa >= 0 ? numa : 0;
		for (unsigned h = 0; h < t->ngpus; h++) {
			if (g == h)
				continue;
			unsigned s = iod_topo_gpu_pair_score(t, g, h);
			out->pair_score[g][h] = (uint16_t)IOD_MIN(s, 65535u);
			if (t->link[t->gpu[g]][t->gpu[h]].nvlinks)
				out->nvlink[g] |= 1u << h;
		}
	}
	for (unsigned n = 0; n < t->nnuma; n++) {
		out->numa_cpus[n] = t->numa[n].cpuset;
		out->numa_mem_bytes[n] = t->numa[n].mem_bytes;
	}
	out->nics_n = t->nnics;
	for (unsigned k = 0; k < t->nnics; k++) {
		const struct iod_topo_device *d = &t->devices[t->nic[k]];
		struct iod_sched_nic *ni = &out->nics[k];
		iod_strlcpy(ni->name, d->os_name[0] ? d->os_name : d->name, sizeof(ni->name));
		ni->numa = d->numa;
		ni->bw_bps = d->port_bps * (d->ports ? d->ports : 1);
		for (unsigned g = 0; g < t->ngpus; g++) {
			uint8_t cls = t->link[t->nic[k]][t->gpu[g]].pcie;
			if (cls <= IOD_TOPO_LINK_PXB)
				ni->gpu_mask |= 1u << g;
		}
	}
	for (unsigned g = 0; g < t->ngpus; g++)
		out->gpu_mem_bytes[g] = t->devices[t->gpu[g]].mem_bytes;
	/* DPUs and FPGAs: every such device, in the canonical (PCI) order */
	for (unsigned i = 0; i < t->ndevices; i++) {
		const struct iod_topo_device *d = &t->devices[i];
		if (d->kind != IOD_TOPO_DEV_DPU && d->kind != IOD_TOPO_DEV_FPGA)
			continue;
		if (out->accs_n == IOD_SCHED_ACCS_MAX)
			return iod_err_set(e, -E2BIG,
			                   "node model %s: more than %u DPUs and FPGAs; the "
			                   "scheduler handles %u per node",
			                   model, IOD_SCHED_ACCS_MAX, IOD_SCHED_ACCS_MAX);
		struct iod_sched_acc *a = &out->accs[out->accs_n++];
		iod_strlcpy(a->name, d->name, sizeof(a->name));
		iod_strlcpy(a->os_name, d->os_name, sizeof(a->os_name));
		snprintf(a->pci, sizeof(a->pci), "%04x:%02x:%02x.%x", d->pci_addr >> 16,
		         d->pci_addr >> 8 & 0xff, d->pci_addr >> 3 & 0x1f, d->pci_addr & 7);
		a->type = d->kind == IOD_TOPO_DEV_DPU ? IOD_SCHED_ACC_DPU : IOD_SCHED_ACC_FPGA;
		a->numa = d->numa >= 0 && (unsigned)d->numa < out->numa_n ? d->numa : -1;
		a->mem_bytes = d->mem_bytes;
	}
	iod_sched_shape_finish(out);
	return 0;
}
