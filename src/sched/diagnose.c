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

/* What the message of the stage the last nodes dropped out at needs. */
struct diag {
	const struct iod_sched_cluster *c;
	const struct iod_sched_request *r;
	const struct node *bn;  /* the best candidate: the nearest miss */
	const struct shape *sh; /* its shape */
	struct near best_near;  /* how near it came */
	const char *gl;         /* its GPUs behind best_near, as text */
	uint32_t anti;          /* nodes ruled out by anti-affinity */
	char *why;
	size_t len;
};

/* The node-level stages: cordons, the replica limit, labels, anti-affinity. */
static int why_node(const struct diag *d, int st, enum iod_sched_reason *reason)
{
	int off = 0;
	switch (st) {
	case ST_CORDONED:
		off = snprintf(d->why, d->len, "all %u nodes are cordoned", d->c->nodes_n);
		*reason = IOD_SCHED_REASON_NO_NODES;
		break;
	case ST_FULL:
		off = snprintf(d->why, d->len,
		               "every schedulable node already holds %u replicas, the most its "
		               "agent runs (IOD_SCHED_NODE_REPLICAS_MAX)",
		               (unsigned)IOD_SCHED_NODE_REPLICAS_MAX);
		*reason = IOD_SCHED_REASON_NODE_FULL;
		break;
	case ST_LABELS:
		off = snprintf(d->why, d->len, "no schedulable node has the labels");
		for (uint32_t i = 0; i < d->r->selector_n; i++)
			off += snprintf(d->why + off, d->len - (size_t)IOD_MIN((size_t)off, d->len),
			                " %s=%s", d->r->selector[i].key, d->r->selector[i].value);
		*reason = IOD_SCHED_REASON_LABELS;
		break;
	default:
		if (d->r->anti == IOD_SCHED_DOMAIN_NODE)
			off = snprintf(d->why, d->len,
			               "anti-affinity by node: all %u eligible nodes already run a "
			               "replica of %s",
			               d->anti, d->r->service);
		else
			off =
			    snprintf(d->why, d->len,
			             "anti-affinity by %s: every eligible node's %s already runs a "
			             "replica of %s (%u nodes)",
			             iod_sched_domain_name(d->r->anti),
			             iod_sched_domain_name(d->r->anti), d->r->service, d->anti);
		*reason = IOD_SCHED_REASON_ANTI_AFFINITY;
		break;
	}
	return off;
}

/* The GPU stages: count, free, memory, NVLink, NUMA span. */
static int why_gpus(const struct diag *d, int st, enum iod_sched_reason *reason)
{
	char sz[32], sz2[32];
	int off = 0;
	switch (st) {
	case ST_SMALL:
		off = snprintf(d->why, d->len,
		               "needs %u GPUs on one node; the largest node, %s (%s), has %u",
		               d->r->gpus, d->bn->name, d->sh->s.model, d->sh->s.gpus_n);
		*reason = IOD_SCHED_REASON_NODE_TOO_SMALL;
		break;
	case ST_GPUS:
		off = snprintf(d->why, d->len,
		               "needs %u GPUs on one node; best candidate %s has %u free (%s)",
		               d->r->gpus, d->bn->name, (unsigned)d->best_near.value, d->gl);
		*reason = IOD_SCHED_REASON_GPUS;
		break;
	case ST_GPU_MEM:
		iod_format_size(d->r->gpu_mem_bytes, sz, sizeof(sz));
		{
			uint64_t most = 0;
			for (uint32_t g = 0; g < d->sh->s.gpus_n; g++)
				if ((d->bn->gpu_free >> g & 1) && d->sh->s.gpu_mem_bytes[g] > most)
					most = d->sh->s.gpu_mem_bytes[g];
			iod_format_size(most, sz2, sizeof(sz2));
			off = snprintf(
			    d->why, d->len,
			    "needs %u GPUs with %s memory each on one node; best candidate "
			    "%s has %u such free (%s)%s%s",
			    d->r->gpus, sz, d->bn->name, (unsigned)d->best_near.value, d->gl,
			    d->best_near.value ? "" : "; its free GPUs have at most ",
			    d->best_near.value ? "" : sz2);
		}
		*reason = IOD_SCHED_REASON_GPU_MEMORY;
		break;
	case ST_LINK:
		off =
		    snprintf(d->why, d->len,
		             "needs %u GPUs joined by NVLink on one node; best candidate %s has %u "
		             "free (%s)",
		             d->r->gpus, d->bn->name, (unsigned)d->best_near.value, d->gl);
		*reason = IOD_SCHED_REASON_GPU_LINK;
		break;
	default:
		if (d->r->gpus == 0)
			off = snprintf(d->why, d->len, "numa %s cannot be met on any node",
			               iod_sched_numa_name(d->r->numa));
		else if (d->r->numa == IOD_SCHED_NUMA_SINGLE)
			off = snprintf(
			    d->why, d->len,
			    "needs %u GPUs on a single NUMA node (numa: single-numa-node); "
			    "best candidate %s has %u free on NUMA node %d (%s)",
			    d->r->gpus, d->bn->name, (unsigned)d->best_near.value,
			    d->best_near.where, d->gl);
		else
			off = snprintf(d->why, d->len,
			               "needs %u GPUs on %u NUMA node(s) (numa: restricted); best "
			               "candidate %s has at most %u free on one NUMA node (%s)",
			               d->r->gpus, d->sh->min_span[d->r->gpus], d->bn->name,
			               (unsigned)d->best_near.value, d->gl);
		*reason = IOD_SCHED_REASON_NUMA;
		break;
	}
	return off;
}

/* CPUs and memory. */
static int why_host(const struct diag *d, int st, enum iod_sched_reason *reason)
{
	char sz[32], sz2[32];
	int off = 0;
	switch (st) {
	case ST_CPUS:
		if (d->r->numa == IOD_SCHED_NUMA_RESTRICTED || d->r->numa == IOD_SCHED_NUMA_SINGLE)
			off = snprintf(
			    d->why, d->len,
			    "needs %u CPUs on the NUMA node(s) of its GPUs (numa: %s); best "
			    "candidate %s has %u free there",
			    d->r->cpus, iod_sched_numa_name(d->r->numa), d->bn->name,
			    (unsigned)d->best_near.value);
		else
			off =
			    snprintf(d->why, d->len, "needs %u CPUs; best candidate %s has %u free",
			             d->r->cpus, d->bn->name, (unsigned)d->best_near.value);
		*reason = IOD_SCHED_REASON_CPUS;
		break;
	default:
		iod_format_size(d->r->mem_bytes, sz, sizeof(sz));
		iod_format_size(d->best_near.value, sz2, sizeof(sz2));
		if (d->best_near.where >= 0)
			off = snprintf(
			    d->why, d->len,
			    "needs %s memory on the NUMA node(s) of its GPUs (numa: %s); best "
			    "candidate %s has %s free there",
			    sz, iod_sched_numa_name(d->r->numa), d->bn->name, sz2);
		else
			off = snprintf(d->why, d->len,
			               "needs %s memory; best candidate %s has %s free", sz,
			               d->bn->name, sz2);
		*reason = IOD_SCHED_REASON_MEMORY;
		break;
	}
	return off;
}

/* NIC bandwidth and accelerators. */
static int why_devices(const struct diag *d, int st, enum iod_sched_reason *reason)
{
	char sz[32], sz2[32];
	int off = 0;
	switch (st) {
	case ST_NIC:
		iod_format_bandwidth(d->r->nic_bw_bps, sz, sizeof(sz));
		iod_format_bandwidth(d->best_near.value, sz2, sizeof(sz2));
		if (d->sh->s.nics_n == 0)
			off = snprintf(d->why, d->len,
			               "needs %s NIC bandwidth; best candidate %s has no NIC", sz,
			               d->bn->name);
		else
			off = snprintf(
			    d->why, d->len,
			    "needs %s NIC bandwidth; best candidate %s has %s free on %s", sz,
			    d->bn->name, sz2,
			    d->best_near.where >= 0 ? d->sh->s.nics[d->best_near.where].name : "-");
		*reason = IOD_SCHED_REASON_NIC;
		break;
	default: {
		char al[128] = "none";
		size_t ao = 0;
		for (uint32_t m = (uint32_t)d->best_near.gpus; m && ao < sizeof(al); m &= m - 1) {
			int wr = snprintf(al + ao, sizeof(al) - ao, "%s%s", ao ? ", " : "",
			                  d->sh->s.accs[__builtin_ctz(m)].name);
			if (wr < 0)
				break;
			ao += (size_t)wr;
		}
		sz[0] = 0;
		if (d->r->acc_mem_bytes) {
			char m[24];
			iod_format_size(d->r->acc_mem_bytes, m, sizeof(m));
			snprintf(sz, sizeof(sz), " with %s", m);
		}
		const char *tn = d->r->acc_type == IOD_SCHED_ACC_DPU ? "DPU" : "FPGA";
		uint32_t have = 0;
		for (uint32_t i = 0; i < d->sh->s.accs_n; i++)
			have += d->sh->s.accs[i].type == d->r->acc_type;
		if (have == 0)
			off =
			    snprintf(d->why, d->len,
			             "needs %u %s%s%s; no node has one (best candidate %s, %s, has "
			             "none)",
			             d->r->accs, tn, d->r->accs == 1 ? "" : "s", sz, d->bn->name,
			             d->sh->s.model);
		else
			off = snprintf(d->why, d->len,
			               "needs %u %s%s%s; best candidate %s has %u of its %u free "
			               "that qualify (%s)",
			               d->r->accs, tn, d->r->accs == 1 ? "" : "s", sz, d->bn->name,
			               (unsigned)d->best_near.value, have, al);
		if (d->r->numa == IOD_SCHED_NUMA_RESTRICTED || d->r->numa == IOD_SCHED_NUMA_SINGLE)
			off += snprintf(d->why + off, d->len - (size_t)IOD_MIN((size_t)off, d->len),
			                " on the NUMA node(s) of its GPUs (numa: %s)",
			                iod_sched_numa_name(d->r->numa));
		*reason = IOD_SCHED_REASON_ACCELERATORS;
	} break;
	}
	return off;
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
	char gl[128];
	gpus_list(&sh->s, best_near.gpus, gl, sizeof(gl));
	struct diag d = {.c = c,
	                 .r = r,
	                 .bn = bn,
	                 .sh = sh,
	                 .best_near = best_near,
	                 .gl = gl,
	                 .anti = count[ST_ANTI],
	                 .why = why,
	                 .len = len};
	enum iod_sched_reason reason;
	int off = top <= ST_ANTI   ? why_node(&d, top, &reason)
	          : top <= ST_NUMA ? why_gpus(&d, top, &reason)
	          : top <= ST_MEM  ? why_host(&d, top, &reason)
	                           : why_devices(&d, top, &reason);
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
