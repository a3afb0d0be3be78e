/*
 * diagnose.c: why no node took a replica: the stage where the last nodes
 * dropped out, with the nearest miss.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- reasons ------------------------------------------------------------- */

static const char *const stage_names[ST_N] = {"cordoned",
                                              "full",
                                              "labels",
                                              "anti-affinity",
                                              "too few GPUs in all",
                                              "free GPUs",
                                              "GPU memory",
                                              "NVLink",
                                              "NUMA policy",
                                              "CPUs",
                                              "memory",
                                              "NIC bandwidth",
                                              "accelerators",
                                              "ok"};

static void gpus_list(const struct iod_sched_shape *s, uint32_t mask, char *buf, size_t len)
{
	IOD_UNUSED(s);
	iod_sched_gpus_format(mask, buf, len);
}

void iod_sched_gpus_format(uint32_t mask, char *buf, size_t len)
{
	size_t off = 0;
	if (len == 0)
		return;
	buf[0] = 0;
	if (!mask) {
		snprintf(buf, len, "none");
		return;
	}
	for (uint32_t m = mask; m; m &= m - 1) {
		int w =
		    snprintf(buf + off, len - off, "%sGPU%d", off ? ", " : "", __builtin_ctz(m));
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += (size_t)w;
	}
}

/* Why no node took the replica: the stage where the last nodes dropped out. */
enum iod_sched_reason sched_diagnose(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                                     const struct iod_sched_weights *w, char *why, size_t len)
{
	uint32_t count[ST_N] = {0};
	int top = -1;
	uint32_t best_node = 0;
	struct near best_near = {0};
	if (c->nodes_n == 0) {
		snprintf(why, len, "the cluster has no nodes");
		return IOD_SCHED_REASON_NO_NODES;
	}
	for (uint32_t i = 0; i < c->nodes_n; i++) {
		struct near nr;
		int st = sched_eval_node(c, i, r, w, NULL, &nr);
		count[st]++;
		if (st > top || (st == top && nr.value > best_near.value)) {
			top = st;
			best_node = i;
			best_near = nr;
		}
	}
	IOD_ASSERT(top != ST_OK);
	const struct node *bn = &c->nodes[best_node];
	const struct shape *sh = &c->shapes[bn->shape];
	char gl[128], sz[32], sz2[32];
	gpus_list(&sh->s, best_near.gpus, gl, sizeof(gl));
	enum iod_sched_reason reason;
	int off = 0;
	switch (top) {
	case ST_CORDONED:
		off = snprintf(why, len, "all %u nodes are cordoned", c->nodes_n);
		reason = IOD_SCHED_REASON_NO_NODES;
		break;
	case ST_FULL:
		off = snprintf(why, len,
		               "every schedulable node already holds %u replicas, the most its "
		               "agent runs (IOD_SCHED_NODE_REPLICAS_MAX)",
		               (unsigned)IOD_SCHED_NODE_REPLICAS_MAX);
		reason = IOD_SCHED_REASON_NODE_FULL;
		break;
	case ST_LABELS:
		off = snprintf(why, len, "no schedulable node has the labels");
		for (uint32_t i = 0; i < r->selector_n; i++)
			off += snprintf(why + off, len - (size_t)IOD_MIN((size_t)off, len),
			                " %s=%s", r->selector[i].key, r->selector[i].value);
		reason = IOD_SCHED_REASON_LABELS;
		break;
	case ST_ANTI:
		if (r->anti == IOD_SCHED_DOMAIN_NODE)
			off = snprintf(why, len,
			               "anti-affinity by node: all %u eligible nodes already run a "
			               "replica of %s",
			               count[ST_ANTI], r->service);
		else
			off =
			    snprintf(why, len,
			             "anti-affinity by %s: every eligible node's %s already runs a "
			             "replica of %s (%u nodes)",
			             iod_sched_domain_name(r->anti), iod_sched_domain_name(r->anti),
			             r->service, count[ST_ANTI]);
		reason = IOD_SCHED_REASON_ANTI_AFFINITY;
		break;
	case ST_SMALL:
		off = snprintf(why, len,
		               "needs %u GPUs on one node; the largest node, %s (%s), has %u",
		               r->gpus, bn->name, sh->s.model, sh->s.gpus_n);
		reason = IOD_SCHED_REASON_NODE_TOO_SMALL;
		break;
	case ST_GPUS:
		off = snprintf(why, len,
		               "needs %u GPUs on one node; best candidate %s has %u free (%s)",
		               r->gpus, bn->name, (unsigned)best_near.value, gl);
		reason = IOD_SCHED_REASON_GPUS;
		break;
	case ST_GPU_MEM:
		iod_format_size(r->gpu_mem_bytes, sz, sizeof(sz));
		{
			uint64_t most = 0;
			for (uint32_t g = 0; g < sh->s.gpus_n; g++)
				if ((bn->gpu_free >> g & 1) && sh->s.gpu_mem_bytes[g] > most)
					most = sh->s.gpu_mem_bytes[g];
			iod_format_size(most, sz2, sizeof(sz2));
			off = snprintf(
			    why, len,
			    "needs %u GPUs with %s memory each on one node; best candidate "
			    "%s has %u such free (%s)%s%s",
			    r->gpus, sz, bn->name, (unsigned)best_near.value, gl,
			    best_near.value ? "" : "; its free GPUs have at most ",
			    best_near.value ? "" : sz2);
		}
		reason = IOD_SCHED_REASON_GPU_MEMORY;
		break;
	case ST_LINK:
		off =
		    snprintf(why, len,
		             "needs %u GPUs joined by NVLink on one node; best candidate %s has %u "
		             "free (%s)",
		             r->gpus, bn->name, (unsigned)best_near.value, gl);
		reason = IOD_SCHED_REASON_GPU_LINK;
		break;
	case ST_NUMA:
		if (r->gpus == 0)
			off = snprintf(why, len, "numa %s cannot be met on any node",
			               iod_sched_numa_name(r->numa));
		else if (r->numa == IOD_SCHED_NUMA_SINGLE)
			off = snprintf(
			    why, len,
			    "needs %u GPUs on a single NUMA node (numa: single-numa-node); "
			    "best candidate %s has %u free on NUMA node %d (%s)",
			    r->gpus, bn->name, (unsigned)best_near.value, best_near.where, gl);
		else
			off = snprintf(why, len,
			               "needs %u GPUs on %u NUMA node(s) (numa: restricted); best "
			               "candidate %s has at most %u free on one NUMA node (%s)",
			               r->gpus, sh->min_span[r->gpus], bn->name,
			               (unsigned)best_near.value, gl);
		reason = IOD_SCHED_REASON_NUMA;
		break;
	case ST_CPUS:
		if (r->numa == IOD_SCHED_NUMA_RESTRICTED || r->numa == IOD_SCHED_NUMA_SINGLE)
			off = snprintf(
			    why, len,
			    "needs %u CPUs on the NUMA node(s) of its GPUs (numa: %s); best "
			    "candidate %s has %u free there",
			    r->cpus, iod_sched_numa_name(r->numa), bn->name,
			    (unsigned)best_near.value);
		else
			off = snprintf(why, len, "needs %u CPUs; best candidate %s has %u free",
			               r->cpus, bn->name, (unsigned)best_near.value);
		reason = IOD_SCHED_REASON_CPUS;
		break;
	case ST_MEM:
		iod_format_size(r->mem_bytes, sz, sizeof(sz));
		iod_format_size(best_near.value, sz2, sizeof(sz2));
		if (best_near.where >= 0)
			off = snprintf(
			    why, len,
			    "needs %s memory on the NUMA node(s) of its GPUs (numa: %s); best "
			    "candidate %s has %s free there",
			    sz, iod_sched_numa_name(r->numa), bn->name, sz2);
		else
			off = snprintf(why, len, "needs %s memory; best candidate %s has %s free",
			               sz, bn->name, sz2);
		reason = IOD_SCHED_REASON_MEMORY;
		break;
	case ST_ACC: {
		char al[128] = "none";
		size_t ao = 0;
		for (uint32_t m = (uint32_t)best_near.gpus; m && ao < sizeof(al); m &= m - 1) {
			int wr = snprintf(al + ao, sizeof(al) - ao, "%s%s", ao ? ", " : "",
			                  sh->s.accs[__builtin_ctz(m)].name);
			if (wr < 0)
				break;
			ao += (size_t)wr;
		}
		sz[0] = 0;
		if (r->acc_mem_bytes) {
			char m[24];
			iod_format_size(r->acc_mem_bytes, m, sizeof(m));
			snprintf(sz, sizeof(sz), " with %s", m);
		}
		const char *tn = r->acc_type == IOD_SCHED_ACC_DPU ? "DPU" : "FPGA";
		uint32_t have = 0;
		for (uint32_t i = 0; i < sh->s.accs_n; i++)
			have += sh->s.accs[i].type == r->acc_type;
		if (have == 0)
			off = snprintf(
			    why, len,
			    "needs %u %s%s%s; no node has one (best candidate %s, %s, has "
			    "none)",
			    r->accs, tn, r->accs == 1 ? "" : "s", sz, bn->name, sh->s.model);
		else
			off = snprintf(why, len,
			               "needs %u %s%s%s; best candidate %s has %u of its %u free "
			               "that qualify (%s)",
			               r->accs, tn, r->accs == 1 ? "" : "s", sz, bn->name,
			               (unsigned)best_near.value, have, al);
		if (r->numa == IOD_SCHED_NUMA_RESTRICTED || r->numa == IOD_SCHED_NUMA_SINGLE)
			off += snprintf(why + off, len - (size_t)IOD_MIN((size_t)off, len),
			                " on the NUMA node(s) of its GPUs (numa: %s)",
			                iod_sched_numa_name(r->numa));
		reason = IOD_SCHED_REASON_ACCELERATORS;
		break;
	}
	default:
		iod_format_bandwidth(r->nic_bw_bps, sz, sizeof(sz));
		iod_format_bandwidth(best_near.value, sz2, sizeof(sz2));
		if (sh->s.nics_n == 0)
			off = snprintf(why, len,
			               "needs %s NIC bandwidth; best candidate %s has no NIC", sz,
			               bn->name);
		else
			off = snprintf(
			    why, len, "needs %s NIC bandwidth; best candidate %s has %s free on %s",
			    sz, bn->name, sz2,
			    best_near.where >= 0 ? sh->s.nics[best_near.where].name : "-");
		reason = IOD_SCHED_REASON_NIC;
		break;
	}
	/* what ruled out the other nodes earlier */
	bool first = true;
	for (int st = 0; st < top; st++) {
		if (!count[st] || off < 0 || (size_t)off >= len)
			continue;
		off += snprintf(why + off, len - (size_t)off, "%s%u node%s by %s",
		                first ? "; ruled out earlier: " : ", ", count[st],
		                count[st] == 1 ? "" : "s", stage_names[st]);
		first = false;
	}
	return reason;
}
