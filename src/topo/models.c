/*
 * models.c: the built-in node models, pure data selectable by name, for the
 * simulator, the scheduler's CLI and tests: dgx-h100, hgx-a100-8,
 * pcie-8gpu, pcie-4gpu-nvlink-pairs, bf3-dpu and the parametric generic-N.
 *
 * Each model is a short program over the builder API; docs/topology.md
 * gives each model's layout and its exact `nvidia-smi topo -m` matrix, and
 * tests/unit/test_topo.c asserts those matrices. Change a model, change
 * both. Never reads the machine: a model is the same everywhere.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define GiB (1ull << 30)
#define MB (1000ull * 1000)
#define GBPS (1000ull * 1000 * 1000)

/* A model under construction: the first error sticks, later steps no-op. */
struct mb {
	struct iod_topo_node *n; /* the node being built */
	struct iod_err *e;       /* where the first error goes */
	int rc;                  /* first error, 0 while fine */
	unsigned nics;           /* mlx5_<n> names handed out */
};

static int keep(struct mb *m, int rc)
{
	if (rc < 0 && m->rc == 0)
		m->rc = rc;
	return rc;
}

/*
 * Sockets with Linux's PU numbering: core c of the machine has PUs c,
 * c + total_cores, ... (one per hardware thread). One NUMA node per socket
 * and llc_per_socket last-level caches per socket.
 */
static void sockets(struct mb *m, unsigned nsock, unsigned cores_per, unsigned smt,
                    uint64_t mem_per_numa, unsigned llc_per, uint64_t llc_bytes, const char *cpu)
{
	unsigned total = nsock * cores_per;
	for (unsigned s = 0; s < nsock && !m->rc; s++) {
		struct iod_bitmap set;
		iod_bitmap_zero(&set);
		for (unsigned c = s * cores_per; c < (s + 1) * cores_per; c++)
			for (unsigned t = 0; t < smt; t++) {
				iod_bitmap_set(&set, c + t * total);
				iod_topo_set_core(m->n, c + t * total, c);
			}
		int p = keep(m, iod_topo_add_package(m->n, s, &set, cpu, m->e));
		if (p < 0)
			return;
		keep(m, iod_topo_add_numa(m->n, s, p, mem_per_numa, &set, m->e));
		unsigned per_llc = cores_per / llc_per;
		for (unsigned l = 0; l < llc_per && !m->rc; l++) {
			struct iod_bitmap ls;
			iod_bitmap_zero(&ls);
			for (unsigned c = s * cores_per + l * per_llc;
			     c < s * cores_per + (l + 1) * per_llc; c++)
				for (unsigned t = 0; t < smt; t++)
					iod_bitmap_set(&ls, c + t * total);
			keep(m, iod_topo_add_cache(m->n, 3, llc_bytes, &ls, m->e));
		}
	}
}

static int host(struct mb *m, int numa)
{
	return m->rc ? -1
	             : keep(m, iod_topo_add_bridge(m->n, IOD_TOPO_BRIDGE_HOST, -1, numa, 0, m->e));
}

static int pswitch(struct mb *m, int parent)
{
	return m->rc ? -1
	             : keep(m,
	                    iod_topo_add_bridge(m->n, IOD_TOPO_BRIDGE_SWITCH, parent, -1, 0, m->e));
}

static int add(struct mb *m, struct iod_topo_device *d, int bridge)
{
	if (m->rc)
		return -1;
	d->bridge = (int16_t)bridge;
	return keep(m, iod_topo_add_device(m->n, d, m->e));
}

/* ---- device presets (public figures; docs/topology.md cites them) -------- */

enum gpu_preset { H100_SXM, A100_SXM, L40S, RTX8000, A100_PCIE };

static int gpu(struct mb *m, enum gpu_preset p, int bridge)
{
	struct iod_topo_device d;
	iod_topo_device_init(&d, IOD_TOPO_DEV_GPU);
	IOD_TOPO_COPY(d.vendor, "NVIDIA");
	d.pci_vendor = IOD_PCI_VENDOR_NVIDIA;
	d.pci_class = 0x0302;
	d.tensor_cores = true;
	d.nvlink_bps = 25 * GBPS * 8;
	switch (p) {
	case H100_SXM:
		IOD_TOPO_COPY(d.model, "NVIDIA H100 80GB HBM3");
		d.pci_device = 0x2330;
		d.mem_bytes = 80 * GiB;
		d.cores = 132;
		d.nvlinks = 18;
		d.tflops = 989;
		iod_topo_device_set_pcie(&d, 5, 16);
		break;
	case A100_SXM:
		IOD_TOPO_COPY(d.model, "NVIDIA A100-SXM4-80GB");
		d.pci_device = 0x20b2;
		d.mem_bytes = 80 * GiB;
		d.cores = 108;
		d.nvlinks = 12;
		d.tflops = 312;
		iod_topo_device_set_pcie(&d, 4, 16);
		break;
	case L40S:
		IOD_TOPO_COPY(d.model, "NVIDIA L40S");
		d.pci_device = 0x26b9;
		d.mem_bytes = 48 * GiB;
		d.cores = 142;
		d.nvlinks = 0;
		d.nvlink_bps = 0;
		d.tflops = 362;
		iod_topo_device_set_pcie(&d, 4, 16);
		break;
	case RTX8000:
		IOD_TOPO_COPY(d.model, "Quadro RTX 8000");
		d.pci_device = 0x1e30;
		d.pci_class = 0x0300;
		d.mem_bytes = 48 * GiB;
		d.cores = 72;
		d.nvlinks = 2;
		d.tflops = 130;
		iod_topo_device_set_pcie(&d, 3, 16);
		break;
	case A100_PCIE:
		IOD_TOPO_COPY(d.model, "NVIDIA A100 80GB PCIe");
		d.pci_device = 0x20b5;
		d.mem_bytes = 80 * GiB;
		d.cores = 108;
		d.nvlinks = 12;
		d.tflops = 312;
		iod_topo_device_set_pcie(&d, 4, 16);
		break;
	}
	return add(m, &d, bridge);
}

enum nic_preset { CX7_400G, CX6_HDR, CX6_DX, BF3, BF3_SELF };

static int nic(struct mb *m, enum nic_preset p, int bridge)
{
	struct iod_topo_device d;
	iod_topo_device_init(&d, p == BF3 ? IOD_TOPO_DEV_DPU : IOD_TOPO_DEV_NIC);
	IOD_TOPO_COPY(d.vendor, "Mellanox");
	d.pci_vendor = IOD_PCI_VENDOR_MELLANOX;
	d.pci_class = 0x0200;
	snprintf(d.os_name, sizeof(d.os_name), "mlx5_%u", m->nics++);
	switch (p) {
	case CX7_400G:
		IOD_TOPO_COPY(d.model, "ConnectX-7 NDR 400G");
		d.pci_device = 0x1021;
		d.pci_class = 0x0207;
		d.ports = 1;
		d.port_bps = 400 * GBPS;
		iod_topo_device_set_pcie(&d, 5, 16);
		break;
	case CX6_HDR:
		IOD_TOPO_COPY(d.model, "ConnectX-6 HDR 200G");
		d.pci_device = 0x101b;
		d.pci_class = 0x0207;
		d.ports = 1;
		d.port_bps = 200 * GBPS;
		iod_topo_device_set_pcie(&d, 4, 16);
		break;
	case CX6_DX:
		IOD_TOPO_COPY(d.model, "ConnectX-6 Dx 2x100G");
		d.pci_device = 0x101d;
		d.ports = 2;
		d.port_bps = 100 * GBPS;
		iod_topo_device_set_pcie(&d, 4, 16);
		break;
	case BF3:
	case BF3_SELF:
		IOD_TOPO_COPY(d.model, "BlueField-3 2x200G");
		d.pci_device = 0xa2dc;
		d.ports = 2;
		d.port_bps = 200 * GBPS;
		if (p == BF3) {
			d.cores = 16;
			d.mem_bytes = 32 * GiB;
		}
		iod_topo_device_set_pcie(&d, 5, 16);
		break;
	}
	return add(m, &d, bridge);
}

static void nvlink(struct mb *m, int a, int b, unsigned links, bool nvswitch)
{
	if (!m->rc && a >= 0 && b >= 0)
		keep(m, iod_topo_add_nvlink(m->n, (unsigned)a, (unsigned)b, links, nvswitch, m->e));
}

/* All-to-all through NVSwitch: every pair shows NV<links> in nvidia-smi. */
static void nvswitch_all(struct mb *m, const int *g, unsigned ng, unsigned links)
{
	for (unsigned i = 0; i < ng; i++)
		for (unsigned j = i + 1; j < ng; j++)
			nvlink(m, g[i], g[j], links, true);
}

/* ---- the models ---------------------------------------------------------- */

/*
 * dgx-h100: 2 x Xeon 8480C (56 cores, SMT2), 1 TiB per socket; 8 H100 SXM5
 * all-to-all through NVSwitch (NV18); four PCIe Gen5 switches, two per
 * socket, each on its own root complex with a GPU pair and the pair's two
 * ConnectX-7 400G NICs; a BlueField-3 on its own root complex of socket 1.
 */
static void dgx_h100(struct mb *m)
{
	int g[8];
	sockets(m, 2, 56, 2, 1024 * GiB, 1, 105 * MB, "Intel Xeon Platinum 8480C");
	for (unsigned s = 0; s < 4; s++) {
		int sw = pswitch(m, host(m, s < 2 ? 0 : 1));
		g[2 * s] = gpu(m, H100_SXM, sw);
		g[2 * s + 1] = gpu(m, H100_SXM, sw);
		nic(m, CX7_400G, sw);
		nic(m, CX7_400G, sw);
	}
	nic(m, BF3, host(m, 1));
	nvswitch_all(m, g, 8, 18);
}

/*
 * hgx-a100-8: 2 x EPYC 7742 (64 cores, SMT2, 16 L3s of 16 MiB each),
 * 512 GiB per socket; 8 A100 SXM4 over NVSwitch (NV12); four PCIe Gen4
 * switches, two per socket, each with a GPU pair and one ConnectX-6 HDR.
 */
static void hgx_a100_8(struct mb *m)
{
	int g[8];
	sockets(m, 2, 64, 2, 512 * GiB, 16, 16 * GiB / 1024, "AMD EPYC 7742 64-Core Processor");
	for (unsigned s = 0; s < 4; s++) {
		int sw = pswitch(m, host(m, s < 2 ? 0 : 1));
		g[2 * s] = gpu(m, A100_SXM, sw);
		g[2 * s + 1] = gpu(m, A100_SXM, sw);
		nic(m, CX6_HDR, sw);
	}
	nvswitch_all(m, g, 8, 12);
}

/*
 * pcie-8gpu: 2 x 32-core Xeon (SMT2), 512 GiB per socket; one root complex
 * per socket with two PCIe switches of two L40S each (no NVLink) and one
 * ConnectX-6 Dx on its own root port.
 */
static void pcie_8gpu(struct mb *m)
{
	sockets(m, 2, 32, 2, 512 * GiB, 1, 60 * MB, "Intel Xeon Gold 6448Y");
	for (unsigned s = 0; s < 2; s++) {
		int h = host(m, (int)s);
		nic(m, CX6_DX, h);
		for (unsigned k = 0; k < 2; k++) {
			int sw = pswitch(m, h);
			gpu(m, L40S, sw);
			gpu(m, L40S, sw);
		}
	}
}

/*
 * pcie-4gpu-nvlink-pairs: one 32-core socket (SMT2), 256 GiB; a top PCIe
 * switch holding a ConnectX-6 Dx and two switches of two Quadro RTX 8000
 * each; each pair joined by an NVLink bridge (NV2).
 */
static void pcie_4gpu_nvlink_pairs(struct mb *m)
{
	sockets(m, 1, 32, 2, 256 * GiB, 1, 64 * MB, "AMD EPYC 9354 32-Core Processor");
	int top = pswitch(m, host(m, 0));
	nic(m, CX6_DX, top);
	for (unsigned k = 0; k < 2; k++) {
		int sw = pswitch(m, top);
		int a = gpu(m, RTX8000, sw), b = gpu(m, RTX8000, sw);
		nvlink(m, a, b, 2, false);
	}
}

/*
 * bf3-dpu: a BlueField-3 DPU as its own node (the view from its Arm OS,
 * where an iod agent and data plane run): 16 Cortex-A78 cores, 32 GiB, the
 * integrated ConnectX-7 with 2 x 200G ports. Its CPU unit has type dpu.
 */
static void bf3_dpu(struct mb *m)
{
	m->n->is_dpu = true;
	sockets(m, 1, 16, 1, 32 * GiB, 1, 16 * GiB / 1024, "BlueField-3 (Cortex-A78AE)");
	nic(m, BF3_SELF, host(m, 0));
}

/*
 * generic-N: the default `--gpus TOTAL --nodes N` node (docs/topology.md):
 * 1 socket below 4 GPUs, else 2 (socket 0 takes the odd GPU); 32 cores
 * (SMT2) and 256 GiB per socket; GPUs in pairs on PCIe Gen4 switches, each
 * switch on its own root complex with one ConnectX-6 Dx; each pair joined by
 * an NVLink bridge (NV12, the A100 PCIe bridge set).
 */
static void generic(struct mb *m, unsigned gpus)
{
	unsigned nsock = gpus >= 4 ? 2 : 1;
	sockets(m, nsock, 32, 2, 256 * GiB, 1, 64 * MB, "AMD EPYC 9354 32-Core Processor");
	if (gpus == 0) {
		nic(m, CX6_DX, host(m, 0));
		return;
	}
	for (unsigned s = 0; s < nsock; s++) {
		unsigned mine = nsock == 1 ? gpus : (s == 0 ? (gpus + 1) / 2 : gpus / 2);
		for (unsigned k = 0; k < mine; k += 2) {
			int sw = pswitch(m, host(m, (int)s));
			int a = gpu(m, A100_PCIE, sw);
			int b = k + 1 < mine ? gpu(m, A100_PCIE, sw) : -1;
			nic(m, CX6_DX, sw);
			if (b >= 0)
				nvlink(m, a, b, 12, false);
			else if (a >= 0)
				m->n->devices[a].nvlinks = 0, /* no partner, no bridge */
				    m->n->devices[a].nvlink_bps = 0;
		}
	}
}

/* ---- the table ------------------------------------------------------------ */

struct model {
	const char *name;           /* as typed after --model */
	void (*build)(struct mb *); /* the layout */
};

static const struct model models[] = {
    {"dgx-h100", dgx_h100},   {"hgx-a100-8", hgx_a100_8},
    {"pcie-8gpu", pcie_8gpu}, {"pcie-4gpu-nvlink-pairs", pcie_4gpu_nvlink_pairs},
    {"bf3-dpu", bf3_dpu},
};

static const char *const names[] = {
    "dgx-h100", "hgx-a100-8", "pcie-8gpu", "pcie-4gpu-nvlink-pairs", "bf3-dpu", NULL,
};

const char *const *iod_topo_model_names(void)
{
	return names;
}

static int finish(struct mb *m, const char *name)
{
	if (m->rc)
		return m->rc;
	iod_topo_assign_pci(m->n);
	int rc = iod_topo_node_finalize(m->n, m->e);
	if (rc) {
		iod_err_wrap(m->e, "model %s", name);
		return rc;
	}
	IOD_TOPO_COPY(m->n->model, name);
	m->n->source = IOD_TOPO_SRC_MODEL;
	return 0;
}

int iod_topo_model_generic(unsigned gpus, struct iod_topo_node *n, struct iod_err *e)
{
	char name[32];
	if (gpus > IOD_TOPO_GENERIC_GPUS_MAX)
		return iod_err_set(
		    e, -EINVAL, "generic model: %u GPUs per node; at most %d (use several nodes)",
		    gpus, IOD_TOPO_GENERIC_GPUS_MAX);
	snprintf(name, sizeof(name), "generic-%u", gpus);
	iod_topo_node_init(n, name);
	struct mb m = {n, e, 0, 0};
	generic(&m, gpus);
	return finish(&m, name);
}

int iod_topo_model_load(const char *name, struct iod_topo_node *n, struct iod_err *e)
{
	if (!name)
		return iod_err_set(e, -EINVAL, "no model name");
	if (iod_str_has_prefix(name, "generic-")) {
		char *end;
		unsigned long g = strtoul(name + 8, &end, 10);
		if (name[8] >= '0' && name[8] <= '9' && *end == '\0')
			return iod_topo_model_generic(g > 1000 ? 1000 : (unsigned)g, n, e);
	}
	for (size_t i = 0; i < IOD_ARRAY_LEN(models); i++) {
		if (strcmp(models[i].name, name))
			continue;
		iod_topo_node_init(n, name);
		struct mb m = {n, e, 0, 0};
		models[i].build(&m);
		return finish(&m, name);
	}
	const char *s = iod_suggest(name, names, IOD_ARRAY_LEN(names) - 1);
	if (s)
		return iod_err_set(e, -ENOENT, "unknown model \"%s\"; did you mean \"%s\"?", name,
		                   s);
	return iod_err_set(e, -ENOENT,
	                   "unknown model \"%s\"; models: dgx-h100, hgx-a100-8, pcie-8gpu, "
	                   "pcie-4gpu-nvlink-pairs, bf3-dpu, generic-N (N = 0..%d); "
	                   "`iod topo --list-models`",
	                   name, IOD_TOPO_GENERIC_GPUS_MAX);
}
