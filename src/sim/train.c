/*
 * train.c: the whole-cluster simulator's workload model: the calibration
 * table of published training throughputs, the models' gradient sizes, and
 * the ring all-reduce under an alpha-beta model.
 *
 * The table holds published figures only, each with its source; a GPU or
 * precision without one is refused by name, never extrapolated. The
 * simulator calibrates per-step compute from the 1-GPU figure alone; the
 * 8-GPU figure is there to validate the prediction against (V3) and must
 * never enter one.
 *
 * Pure: tables and arithmetic; no I/O, no clock.
 */
#include "iod/sim_cluster.h"
#include "iod/topo.h"

#include <string.h>
#include <strings.h>

#define DLE_RN50                                                                     \
	"NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/" \
	"README.md, 'Training performance results' (pytorch-21.03 NGC container)"

/*
 * Throughputs as published; batch 256 per GPU is the README's benchmark
 * batch for these platforms (an assumption where the table does not
 * repeat it). No H100 row: DeepLearningExamples publishes no 1-GPU H100
 * ResNet-50 training figure, and nothing else is shipped in its place.
 */
static const struct iod_simc_calib calib[] = {
    {"resnet50", "a100", IOD_SIMC_AMP, 2470, 16621, 256, DLE_RN50 ", DGX A100 (8x A100 80GB)"},
    {"resnet50", "a100", IOD_SIMC_TF32, 938, 7248, 256, DLE_RN50 ", DGX A100 (8x A100 80GB)"},
    {"resnet50", "v100", IOD_SIMC_AMP, 1200, 8322, 256, DLE_RN50 ", DGX-1 16GB (8x V100 16GB)"},
    {"resnet50", "v100", IOD_SIMC_FP32, 367, 2855, 256, DLE_RN50 ", DGX-1 16GB (8x V100 16GB)"},
};

const struct iod_simc_calib *iod_simc_calib_table(uint32_t *n)
{
	*n = IOD_ARRAY_LEN(calib);
	return calib;
}

const struct iod_simc_calib *iod_simc_calib_find(const char *model, const char *gpu,
                                                 enum iod_simc_precision prec)
{
	if (!model || !gpu)
		return NULL;
	for (size_t i = 0; i < IOD_ARRAY_LEN(calib); i++)
		if (!strcmp(calib[i].model, model) && !strcmp(calib[i].gpu, gpu) &&
		    calib[i].prec == prec)
			return &calib[i];
	return NULL;
}

const char *iod_simc_gpu_key(const char *m)
{
	if (!m)
		return NULL;
	if (strstr(m, "A100"))
		return "a100";
	if (strstr(m, "V100"))
		return "v100";
	if (strstr(m, "H100"))
		return "h100";
	return NULL;
}

/* ResNet-50: 25,557,032 parameters (torchvision resnet50); DDP reduces the
 * FP32 gradients AMP keeps; ImageNet-1k has 1,281,167 training images. */
static const struct iod_simc_model models[] = {
    {"resnet50", 25557032, 4, 1281167,
     "torchvision resnet50 parameter count; ImageNet-1k (ILSVRC-2012) train split"},
};

const struct iod_simc_model *iod_simc_model_find(const char *name)
{
	for (size_t i = 0; name && i < IOD_ARRAY_LEN(models); i++)
		if (!strcmp(models[i].name, name))
			return &models[i];
	return NULL;
}

static const char *const prec_names[] = {"amp", "tf32", "fp32"};

const char *iod_simc_precision_name(enum iod_simc_precision p)
{
	return (unsigned)p < IOD_ARRAY_LEN(prec_names) ? prec_names[p] : "?";
}

int iod_simc_precision_parse(const char *s, enum iod_simc_precision *out)
{
	for (unsigned i = 0; s && i < IOD_ARRAY_LEN(prec_names); i++)
		if (!strcasecmp(s, prec_names[i])) {
			*out = (enum iod_simc_precision)i;
			return 0;
		}
	return -EINVAL;
}

const char *iod_simc_link_name(enum iod_simc_link_class c)
{
	static const char *const n[] = {
#define X(e, s) s,
	    IOD_SIMC_LINKS(X)
#undef X
	};
	return (unsigned)c < IOD_ARRAY_LEN(n) ? n[c] : "?";
}

double iod_simc_ring_allreduce_s(const struct iod_simc_edge *e, uint32_t n, uint64_t bytes)
{
	if (n < 2 || bytes == 0)
		return 0;
	/* reduce-scatter then all-gather: 2(n-1) steps of bytes/n per rank,
	 * all edges at once, so each step waits for the slowest edge */
	double chunk = (double)bytes / n, step = 0;
	for (uint32_t i = 0; i < n; i++) {
		IOD_ASSERT(e[i].bw_Bps > 0);
		double t = e[i].alpha_s + chunk / e[i].bw_Bps;
		if (t > step)
			step = t;
	}
	return 2.0 * (n - 1) * step;
}

void iod_simc_edge_gpus(const struct iod_topo_node *t, unsigned a, unsigned b,
                        const struct iod_simc_alpha *al, struct iod_simc_edge *out)
{
	unsigned da = iod_topo_gpu_device(t, a), db = iod_topo_gpu_device(t, b);
	bool nv = iod_topo_link_class(t, da, db) == IOD_TOPO_LINK_NVLINK;
	out->cls = nv ? IOD_SIMC_LINK_NVLINK : IOD_SIMC_LINK_PCIE;
	out->bw_Bps = (double)iod_topo_link_bw_bps(t, da, db) / 8;
	out->alpha_s = al && al->s[out->cls] > 0
	                   ? al->s[out->cls]
	                   : (double)iod_topo_link_latency_ns(t, da, db) / 1e9;
}

double iod_simc_node_nic_Bps(const struct iod_topo_node *t)
{
	/* the collective uses the plain NICs (a DGX's eight compute rails), not
	 * a DPU on its own root complex, unless the node has nothing else */
	uint64_t bps = 0, dpu = 0;
	for (unsigned i = 0; i < t->nnics; i++) {
		const struct iod_topo_device *d = &t->devices[t->nic[i]];
		uint64_t x = (uint64_t)(d->ports ? d->ports : 1) * d->port_bps;
		if (d->kind == IOD_TOPO_DEV_NIC)
			bps += x;
		else
			dpu += x;
	}
	return (double)(bps ? bps : dpu) / 8;
}

double iod_simc_algbw(uint64_t bytes, double t_s)
{
	return t_s > 0 ? (double)bytes / t_s : 0;
}

double iod_simc_busbw(uint64_t bytes, double t_s, uint32_t n)
{
	return n ? iod_simc_algbw(bytes, t_s) * 2.0 * (n - 1) / n : 0;
}

/* ---- policies, faults: names ------------------------------------------------ */

static const char *const policy_names[IOD_SIMC_POLICIES] = {"iod", "k8s", "k8s-topo"};

const char *iod_simc_policy_name(enum iod_simc_policy_kind k)
{
	return (unsigned)k < IOD_SIMC_POLICIES ? policy_names[k] : "?";
}

int iod_simc_policy_parse(const char *s, enum iod_simc_policy_kind *out)
{
	for (unsigned k = 0; s && k < IOD_SIMC_POLICIES; k++)
		if (!strcmp(s, policy_names[k])) {
			*out = (enum iod_simc_policy_kind)k;
			return 0;
		}
	return -EINVAL;
}

bool iod_simc_policy_is_k8s(enum iod_simc_policy_kind k)
{
	return k == IOD_SIMC_POLICY_K8S || k == IOD_SIMC_POLICY_K8S_TOPO;
}

const char *iod_simc_fault_name(enum iod_simc_fault_kind k)
{
	static const char *const n[] = {"gpu", "node", "server", "leader", "link", "nic", "disk"};
	return (unsigned)k < IOD_ARRAY_LEN(n) ? n[k] : "?";
}

const char *iod_simc_disk_verdict(const struct iod_simc_disk *d)
{
	return d->rc ? "refused" : d->torn_bytes ? "repaired" : "started";
}

int iod_simc_fault_parse(const char *s, enum iod_simc_fault_kind *out)
{
	for (int k = IOD_SIMC_FAULT_GPU; k <= IOD_SIMC_FAULT_DISK; k++)
		if (s && !strcmp(s, iod_simc_fault_name((enum iod_simc_fault_kind)k))) {
			*out = (enum iod_simc_fault_kind)k;
			return 0;
		}
	return -EINVAL;
}
