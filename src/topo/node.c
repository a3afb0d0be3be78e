/*
 * node.c: building a topology node and finalizing it: the one place that
 * turns packages, NUMA nodes, a PCI tree, devices and NVLinks into the
 * derived model the queries read (device order and labels, affinities, the
 * link matrix with nvidia-smi's PCIe classes, NVLink islands, compute units).
 *
 * Every source (built-in models, hwloc XML, discovery, tests) ends here, so
 * the classification rules live once. Pure: no I/O, no allocation, no
 * clock. Must never accept a node it cannot classify: errors name the part.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {
#define X(n, s) s,
    IOD_TOPO_DEV_KINDS(X)
#undef X
};

static const char *const class_names[] = {
#define X(n, s) s,
    IOD_TOPO_LINK_CLASSES(X)
#undef X
};

const char *iod_topo_dev_kind_name(enum iod_topo_dev_kind k)
{
	return (unsigned)k < IOD_ARRAY_LEN(kind_names) ? kind_names[k] : "?";
}

const char *iod_topo_link_class_name(enum iod_topo_link_class c)
{
	return (unsigned)c < IOD_ARRAY_LEN(class_names) ? class_names[c] : "?";
}

void iod_topo_pci_format(uint32_t a, char *buf, size_t len)
{
	snprintf(buf, len, "%04x:%02x:%02x.%x", a >> 16, (a >> 8) & 0xff, (a >> 3) & 0x1f, a & 7);
}

/* Parse up to max_digits hex digits ending at `stop`; advance *p past it. */
static int hex_field(const char **p, unsigned max_digits, char stop, unsigned *out)
{
	unsigned v = 0, k = 0;
	const char *s = *p;
	for (; k < max_digits &&
	       ((*s >= '0' && *s <= '9') || ((*s | 0x20) >= 'a' && (*s | 0x20) <= 'f'));
	     s++, k++)
		v = v * 16 + (unsigned)(*s <= '9' ? *s - '0' : (*s | 0x20) - 'a' + 10);
	if (k == 0 || *s != stop)
		return -EINVAL;
	*p = s + (stop ? 1 : 0);
	*out = v;
	return 0;
}

int iod_topo_pci_parse(const char *s, uint32_t *out)
{
	unsigned dom, bus, dev, fn;
	/* "dddd:bb:dd.f"; NVML writes the domain with 8 digits */
	if (!s || hex_field(&s, 8, ':', &dom) || hex_field(&s, 2, ':', &bus) ||
	    hex_field(&s, 2, '.', &dev) || hex_field(&s, 1, '\0', &fn) || dom > 0xffff ||
	    dev > 0x1f || fn > 7)
		return -EINVAL;
	*out = IOD_TOPO_PCI_ADDR(dom, bus, dev, fn);
	return 0;
}

uint64_t iod_topo_pcie_lane_Bps(unsigned gen)
{
	static const uint64_t gts[] = {0, 2500, 5000, 8000, 16000, 32000, 64000};
	if (gen == 0 || gen >= IOD_ARRAY_LEN(gts))
		return 0;
	/* MT/s x encoding / 8 bits: gen1-2 8b/10b, gen3+ 128b/130b. */
	if (gen <= 2)
		return gts[gen] * 1000000ull * 8 / 10 / 8;
	return gts[gen] * 1000000ull * 128 / 130 / 8;
}

void iod_topo_device_set_pcie(struct iod_topo_device *d, unsigned gen, unsigned width)
{
	d->pcie_gen = (uint8_t)gen;
	d->pcie_width = (uint8_t)width;
	d->pcie_bps = iod_topo_pcie_lane_Bps(gen) * width * 8;
}

/* ---- building ------------------------------------------------------------ */

void iod_topo_node_init(struct iod_topo_node *n, const char *name)
{
	memset(n, 0, sizeof(*n));
	IOD_TOPO_COPY(n->name, name);
	for (unsigned i = 0; i < IOD_BITMAP_BITS; i++)
		n->pu_core[i] = IOD_TOPO_CORE_NONE;
}

void iod_topo_device_init(struct iod_topo_device *d, enum iod_topo_dev_kind kind)
{
	memset(d, 0, sizeof(*d));
	d->kind = kind;
	d->bridge = -1;
	d->numa = -1;
	d->package = -1;
	d->board = -1;
	d->gpu_index = -1;
	d->unit = -1;
}

int iod_topo_add_package(struct iod_topo_node *n, uint32_t os_index,
                         const struct iod_bitmap *cpuset, const char *model, struct iod_err *e)
{
	if (n->npackages >= IOD_TOPO_PACKAGES_MAX)
		return iod_err_set(e, -ENOSPC, "more than %d CPU packages (IOD_TOPO_PACKAGES_MAX)",
		                   IOD_TOPO_PACKAGES_MAX);
	struct iod_topo_package *p = &n->packages[n->npackages];
	p->os_index = os_index;
	p->cpuset = *cpuset;
	IOD_TOPO_COPY(p->model, model);
	return n->npackages++;
}

void iod_topo_set_core(struct iod_topo_node *n, unsigned pu, unsigned core)
{
	if (pu < IOD_BITMAP_BITS && core < IOD_TOPO_CORE_NONE)
		n->pu_core[pu] = (uint16_t)core;
}

int iod_topo_add_numa(struct iod_topo_node *n, uint32_t os_index, int package, uint64_t mem_bytes,
                      const struct iod_bitmap *cpuset, struct iod_err *e)
{
	if (n->nnuma >= IOD_TOPO_NUMA_MAX)
		return iod_err_set(e, -ENOSPC, "more than %d NUMA nodes (IOD_TOPO_NUMA_MAX)",
		                   IOD_TOPO_NUMA_MAX);
	struct iod_topo_numa *m = &n->numa[n->nnuma];
	m->os_index = os_index;
	m->package = (int16_t)package;
	m->mem_bytes = mem_bytes;
	m->cpuset = *cpuset;
	return n->nnuma++;
}

int iod_topo_add_cache(struct iod_topo_node *n, unsigned level, uint64_t size_bytes,
                       const struct iod_bitmap *cpuset, struct iod_err *e)
{
	if (n->ncaches >= IOD_TOPO_CACHES_MAX)
		return iod_err_set(e, -ENOSPC,
		                   "more than %d last-level caches (IOD_TOPO_CACHES_MAX)",
		                   IOD_TOPO_CACHES_MAX);
	struct iod_topo_cache *c = &n->caches[n->ncaches];
	c->level = (uint8_t)level;
	c->size_bytes = size_bytes;
	c->cpuset = *cpuset;
	return n->ncaches++;
}

int iod_topo_add_bridge(struct iod_topo_node *n, enum iod_topo_bridge_kind kind, int parent,
                        int numa, uint32_t pci_addr, struct iod_err *e)
{
	if (n->nbridges >= IOD_TOPO_BRIDGES_MAX)
		return iod_err_set(
		    e, -ENOSPC, "more than %d PCI host bridges and switches (IOD_TOPO_BRIDGES_MAX)",
		    IOD_TOPO_BRIDGES_MAX);
	if (kind == IOD_TOPO_BRIDGE_SWITCH && (parent < 0 || parent >= n->nbridges))
		return iod_err_set(e, -EINVAL, "PCIe switch %u has no parent bridge", n->nbridges);
	struct iod_topo_bridge *b = &n->bridges[n->nbridges];
	memset(b, 0, sizeof(*b));
	b->kind = kind;
	b->parent = (int16_t)(kind == IOD_TOPO_BRIDGE_HOST ? -1 : parent);
	b->numa = (int16_t)numa;
	b->package = -1;
	b->pci_addr = pci_addr;
	b->pci_domain = (uint16_t)(pci_addr >> 16);
	return n->nbridges++;
}

int iod_topo_add_device(struct iod_topo_node *n, const struct iod_topo_device *d, struct iod_err *e)
{
	if (n->ndevices >= IOD_TOPO_DEVICES_MAX)
		return iod_err_set(e, -ENOSPC, "more than %d devices (IOD_TOPO_DEVICES_MAX)",
		                   IOD_TOPO_DEVICES_MAX);
	if (d->kind == IOD_TOPO_DEV_GPU && n->ngpus >= IOD_TOPO_GPUS_MAX)
		return iod_err_set(e, -ENOSPC, "more than %d GPUs (IOD_TOPO_GPUS_MAX)",
		                   IOD_TOPO_GPUS_MAX);
	if (d->bridge >= (int)n->nbridges)
		return iod_err_set(e, -EINVAL, "device %s is under bridge %d, which does not exist",
		                   d->name, d->bridge);
	struct iod_topo_device *x = &n->devices[n->ndevices];
	*x = *d;
	x->name[0] = '\0';
	x->gpu_index = -1;
	x->unit = -1;
	if (d->kind == IOD_TOPO_DEV_GPU)
		n->ngpus++;
	return n->ndevices++;
}

int iod_topo_add_nvlink(struct iod_topo_node *n, unsigned a, unsigned b, unsigned links,
                        bool nvswitch, struct iod_err *e)
{
	if (a >= n->ndevices || b >= n->ndevices || a == b)
		return iod_err_set(e, -EINVAL, "NVLink between devices %u and %u: no such pair", a,
		                   b);
	unsigned total = n->link[a][b].nvlinks + links;
	if (total > 255)
		return iod_err_set(e, -EINVAL, "NVLink between devices %u and %u: %u links", a, b,
		                   total);
	n->link[a][b].nvlinks = n->link[b][a].nvlinks = (uint8_t)total;
	if (nvswitch)
		n->link[a][b].nvswitch = n->link[b][a].nvswitch = 1;
	return 0;
}

/* ---- finalize ------------------------------------------------------------- */

/* Devices that share the nvidia-smi label "NIC<i>". */
static bool is_netdev(enum iod_topo_dev_kind k)
{
	return k == IOD_TOPO_DEV_NIC || k == IOD_TOPO_DEV_DPU;
}

static int kind_rank(enum iod_topo_dev_kind k)
{
	switch (k) {
	case IOD_TOPO_DEV_GPU: return 0;
	case IOD_TOPO_DEV_NIC:
	case IOD_TOPO_DEV_DPU: return 1;
	case IOD_TOPO_DEV_FPGA: return 2;
	case IOD_TOPO_DEV_NVME: return 3;
	default: return 4;
	}
}

/* Canonical device order: GPUs, NICs/DPUs, FPGAs, NVMe, other; each by PCI
 * address, then insertion order (the sort must be stable). */
static bool dev_before(const struct iod_topo_device *a, unsigned ia,
                       const struct iod_topo_device *b, unsigned ib)
{
	int ra = kind_rank(a->kind), rb = kind_rank(b->kind);
	if (ra != rb)
		return ra < rb;
	if (a->pci_addr != b->pci_addr)
		return a->pci_addr < b->pci_addr;
	return ia < ib;
}

static void sort_devices(struct iod_topo_node *n)
{
	unsigned nd = n->ndevices;
	uint8_t order[IOD_TOPO_DEVICES_MAX];
	static __thread struct iod_topo_device tmp[IOD_TOPO_DEVICES_MAX];
	static __thread struct iod_topo_link links[IOD_TOPO_DEVICES_MAX][IOD_TOPO_DEVICES_MAX];

	for (unsigned i = 0; i < nd; i++)
		order[i] = (uint8_t)i;
	/* insertion sort: at most 64 devices */
	for (unsigned i = 1; i < nd; i++) {
		uint8_t x = order[i];
		unsigned j = i;
		while (j > 0 &&
		       dev_before(&n->devices[x], x, &n->devices[order[j - 1]], order[j - 1])) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = x;
	}
	for (unsigned i = 0; i < nd; i++) {
		tmp[i] = n->devices[order[i]];
		for (unsigned j = 0; j < nd; j++)
			links[i][j] = n->link[order[i]][order[j]];
	}
	for (unsigned i = 0; i < nd; i++) {
		n->devices[i] = tmp[i];
		for (unsigned j = 0; j < nd; j++)
			n->link[i][j] = links[i][j];
	}
}

/* Host bridge of bridge b (walks up, bounded), or -1 on a broken tree. */
static int host_of(const struct iod_topo_node *n, int b)
{
	for (unsigned d = 0; b >= 0 && d < IOD_TOPO_PCI_DEPTH_MAX; d++) {
		if (n->bridges[b].kind == IOD_TOPO_BRIDGE_HOST)
			return b;
		b = n->bridges[b].parent;
	}
	return -1;
}

/* The PCIe class between two devices, from the PCI tree (see topo.h). */
static enum iod_topo_link_class pcie_class(const struct iod_topo_node *n, unsigned a, unsigned b)
{
	const struct iod_topo_device *da = &n->devices[a], *db = &n->devices[b];
	int16_t chain_a[IOD_TOPO_PCI_DEPTH_MAX], chain_b[IOD_TOPO_PCI_DEPTH_MAX];
	unsigned la = 0, lb = 0;

	if (a == b)
		return IOD_TOPO_LINK_SELF;
	if (da->bridge < 0 || db->bridge < 0) {
		/* no PCI placement: all we know is NUMA locality */
		return da->numa >= 0 && da->numa == db->numa ? IOD_TOPO_LINK_NODE
		                                             : IOD_TOPO_LINK_SYS;
	}
	for (int x = da->bridge; x >= 0 && la < IOD_TOPO_PCI_DEPTH_MAX; x = n->bridges[x].parent)
		chain_a[la++] = (int16_t)x;
	for (int x = db->bridge; x >= 0 && lb < IOD_TOPO_PCI_DEPTH_MAX; x = n->bridges[x].parent)
		chain_b[lb++] = (int16_t)x;
	int ha = chain_a[la - 1], hb = chain_b[lb - 1];
	if (ha != hb) {
		int na = n->bridges[ha].numa, nb = n->bridges[hb].numa;
		return na >= 0 && na == nb ? IOD_TOPO_LINK_NODE : IOD_TOPO_LINK_SYS;
	}
	/* same host bridge: find the lowest common ancestor */
	for (unsigned i = 0; i < la; i++) {
		for (unsigned j = 0; j < lb; j++) {
			if (chain_a[i] != chain_b[j])
				continue;
			if (n->bridges[chain_a[i]].kind == IOD_TOPO_BRIDGE_HOST)
				return IOD_TOPO_LINK_PHB;
			/* switches traversed: those below the ancestor on both sides + it */
			return i + j + 1 <= 1 ? IOD_TOPO_LINK_PIX : IOD_TOPO_LINK_PXB;
		}
	}
	return IOD_TOPO_LINK_SYS; /* unreachable on a validated tree */
}

static int validate_tree(struct iod_topo_node *n, struct iod_err *e)
{
	for (unsigned b = 0; b < n->nbridges; b++) {
		struct iod_topo_bridge *br = &n->bridges[b];
		if (br->kind == IOD_TOPO_BRIDGE_SWITCH &&
		    (br->parent < 0 || br->parent >= (int)n->nbridges))
			return iod_err_set(e, -EINVAL, "PCIe switch %u has no parent bridge", b);
		int h = host_of(n, (int)b);
		if (h < 0)
			return iod_err_set(e, -EINVAL,
			                   "PCIe switch %u does not reach a host bridge within %d "
			                   "levels (a cycle?)",
			                   b, IOD_TOPO_PCI_DEPTH_MAX);
		if (br->numa >= (int)n->nnuma)
			return iod_err_set(e, -EINVAL, "PCI bridge %u is on NUMA node %d of %u", b,
			                   br->numa, n->nnuma);
		if (br->kind == IOD_TOPO_BRIDGE_SWITCH && br->numa < 0)
			br->numa = n->bridges[h].numa;
		if (br->numa < 0 && n->nnuma == 1)
			br->numa = 0;
		br->package = br->numa >= 0 ? n->numa[br->numa].package : -1;
	}
	return 0;
}

static void cores_and_cpus(struct iod_topo_node *n)
{
	iod_bitmap_zero(&n->cpuset);
	for (unsigned p = 0; p < n->npackages; p++)
		iod_bitmap_or(&n->cpuset, &n->packages[p].cpuset);
	for (unsigned m = 0; m < n->nnuma; m++)
		iod_bitmap_or(&n->cpuset, &n->numa[m].cpuset);
	n->pus = iod_bitmap_count(&n->cpuset);

	/* PUs without a core are cores of their own, numbered after the others */
	unsigned next_core = 0;
	for (unsigned i = 0; i < IOD_BITMAP_BITS; i++)
		if (n->pu_core[i] != IOD_TOPO_CORE_NONE && n->pu_core[i] + 1u > next_core)
			next_core = n->pu_core[i] + 1u;
	for (unsigned i = 0; i < IOD_BITMAP_BITS; i++) {
		if (!iod_bitmap_test(&n->cpuset, i))
			n->pu_core[i] = IOD_TOPO_CORE_NONE;
		else if (n->pu_core[i] == IOD_TOPO_CORE_NONE && next_core < IOD_TOPO_CORE_NONE)
			n->pu_core[i] = (uint16_t)next_core++;
	}
	/* primary PU = lowest PU of each core; a core's PUs may be anywhere */
	static __thread uint8_t seen[IOD_TOPO_CORE_NONE / 8 + 1];
	memset(seen, 0, sizeof(seen));
	iod_bitmap_zero(&n->primary_pus);
	n->cores = 0;
	for (unsigned i = 0; i < IOD_BITMAP_BITS; i++) {
		unsigned c = n->pu_core[i];
		if (c == IOD_TOPO_CORE_NONE || (seen[c / 8] >> (c % 8)) & 1)
			continue;
		seen[c / 8] |= (uint8_t)(1u << (c % 8));
		iod_bitmap_set(&n->primary_pus, i);
		n->cores++;
	}
	for (unsigned p = 0; p < n->npackages; p++) {
		struct iod_bitmap x = n->primary_pus;
		iod_bitmap_and(&x, &n->packages[p].cpuset);
		n->packages[p].cores = iod_bitmap_count(&x);
	}
	n->mem_bytes = 0;
	for (unsigned m = 0; m < n->nnuma; m++)
		n->mem_bytes += n->numa[m].mem_bytes;
}

static unsigned find_root(uint8_t *parent, unsigned x)
{
	while (parent[x] != x)
		x = parent[x] = parent[parent[x]];
	return x;
}

static void islands(struct iod_topo_node *n)
{
	uint8_t parent[IOD_TOPO_GPUS_MAX];
	for (unsigned g = 0; g < n->ngpus; g++)
		parent[g] = (uint8_t)g;
	for (unsigned g = 0; g < n->ngpus; g++)
		for (unsigned h = g + 1; h < n->ngpus; h++)
			if (n->link[n->gpu[g]][n->gpu[h]].nvlinks) {
				unsigned rg = find_root(parent, g), rh = find_root(parent, h);
				if (rg != rh)
					parent[IOD_MAX(rg, rh)] = (uint8_t)IOD_MIN(rg, rh);
			}
	/* number islands by their lowest GPU */
	uint8_t id_of_root[IOD_TOPO_GPUS_MAX];
	memset(id_of_root, 0xff, sizeof(id_of_root));
	n->nislands = 0;
	for (unsigned g = 0; g < n->ngpus; g++) {
		unsigned r = find_root(parent, g);
		if (id_of_root[r] == 0xff)
			id_of_root[r] = (uint8_t)n->nislands++;
		n->gpu_island[g] = id_of_root[r];
	}
}

static int add_unit(struct iod_topo_node *n, enum iod_compute_type type, int device, int numa,
                    const struct iod_topo_capacity *cap, struct iod_err *e)
{
	if (n->nunits >= IOD_TOPO_UNITS_MAX)
		return iod_err_set(e, -ENOSPC, "more than %d compute units", IOD_TOPO_UNITS_MAX);
	struct iod_topo_unit *u = &n->units[n->nunits];
	memset(u, 0, sizeof(*u));
	u->type = type;
	u->device = (int16_t)device;
	u->numa = (int16_t)numa;
	u->cap = *cap;
	return n->nunits++;
}

static int units(struct iod_topo_node *n, struct iod_err *e)
{
	n->nunits = 0;
	for (unsigned i = 0; i < n->ndevices; i++) {
		struct iod_topo_device *d = &n->devices[i];
		struct iod_topo_capacity cap = {0};
		enum iod_compute_type type;
		switch (d->kind) {
		case IOD_TOPO_DEV_GPU:
			type = d->tensor_cores ? IOD_COMPUTE_TENSOR_CORE : IOD_COMPUTE_CUDA_CORE;
			cap.count = 1;
			cap.cores = d->cores;
			cap.mem_bytes = d->mem_bytes;
			cap.tflops = d->tflops;
			break;
		case IOD_TOPO_DEV_DPU:
			type = IOD_COMPUTE_DPU;
			cap.count = 1;
			cap.cores = d->cores;
			cap.mem_bytes = d->mem_bytes;
			cap.net_bps = d->port_bps * d->ports;
			break;
		case IOD_TOPO_DEV_FPGA:
			type = IOD_COMPUTE_FPGA;
			cap.count = 1;
			cap.mem_bytes = d->mem_bytes;
			break;
		default: continue;
		}
		int u = add_unit(n, type, (int)i, d->numa, &cap, e);
		if (u < 0)
			return u;
		d->unit = (int16_t)u;
	}
	for (unsigned m = 0; m < n->nnuma; m++) {
		struct iod_bitmap x = n->primary_pus;
		iod_bitmap_and(&x, &n->numa[m].cpuset);
		if (iod_bitmap_empty(&x))
			continue; /* memory-only node */
		struct iod_topo_capacity cap = {0};
		cap.count = iod_bitmap_count(&x);
		cap.cores = cap.count;
		cap.mem_bytes = n->numa[m].mem_bytes;
		int u =
		    add_unit(n, n->is_dpu ? IOD_COMPUTE_DPU : IOD_COMPUTE_CPU, -1, (int)m, &cap, e);
		if (u < 0)
			return u;
	}
	return 0;
}

int iod_topo_node_finalize(struct iod_topo_node *n, struct iod_err *e)
{
	if (n->nnuma == 0)
		return iod_err_set(e, -EINVAL,
		                   "the topology has no NUMA node: every machine has at least one "
		                   "(is this a complete hwloc topology?)");
	for (unsigned m = 0; m < n->nnuma; m++)
		if (n->numa[m].package >= (int)n->npackages)
			return iod_err_set(e, -EINVAL, "NUMA node %u is in package %d of %u",
			                   n->numa[m].os_index, n->numa[m].package, n->npackages);
	cores_and_cpus(n);
	if (n->pus == 0)
		return iod_err_set(e, -EINVAL,
		                   "the topology has no CPU (no PU in any package or "
		                   "NUMA node)");
	int rc = validate_tree(n, e);
	if (rc)
		return rc;

	sort_devices(n);
	unsigned count[5] = {0};
	n->ngpus = n->nnics = 0;
	for (unsigned i = 0; i < n->ndevices; i++) {
		struct iod_topo_device *d = &n->devices[i];
		static const char *const prefix[] = {"GPU", "NIC", "FPGA", "NVME", "DEV"};
		int r = kind_rank(d->kind);
		snprintf(d->name, sizeof(d->name), "%s%u", prefix[r], count[r]++);
		if (d->bridge >= (int)n->nbridges)
			return iod_err_set(e, -EINVAL, "device %s is under bridge %d of %u",
			                   d->name, d->bridge, n->nbridges);
		if (d->numa >= (int)n->nnuma)
			return iod_err_set(e, -EINVAL, "device %s is on NUMA node %d of %u",
			                   d->name, d->numa, n->nnuma);
		if (d->numa < 0 && d->bridge >= 0)
			d->numa = n->bridges[d->bridge].numa;
		if (d->numa < 0 && n->nnuma == 1)
			d->numa = 0;
		d->package = d->numa >= 0 ? n->numa[d->numa].package : -1;
		if (iod_bitmap_empty(&d->cpuset))
			d->cpuset = d->numa >= 0 && !iod_bitmap_empty(&n->numa[d->numa].cpuset)
			                ? n->numa[d->numa].cpuset
			                : n->cpuset;
		d->gpu_index = -1;
		if (d->kind == IOD_TOPO_DEV_GPU) {
			d->gpu_index = (int16_t)n->ngpus;
			n->gpu[n->ngpus++] = (int16_t)i;
		}
		if (is_netdev(d->kind))
			n->nic[n->nnics++] = (int16_t)i;
	}
	for (unsigned a = 0; a < n->ndevices; a++) {
		for (unsigned b = 0; b < n->ndevices; b++) {
			struct iod_topo_link *l = &n->link[a][b];
			const struct iod_topo_device *da = &n->devices[a], *db = &n->devices[b];
			l->pcie = (uint8_t)pcie_class(n, a, b);
			if (a != b && da->board >= 0 && da->board == db->board &&
			    l->pcie > IOD_TOPO_LINK_BOARD)
				l->pcie = IOD_TOPO_LINK_BOARD;
			if (a == b)
				l->nvlinks = l->nvswitch = 0;
			l->pad = 0;
		}
	}
	islands(n);
	return units(n, e);
}

/* ---- comparison ------------------------------------------------------------ */

#define SAME_FIELD(fmt, path, x, y)                                                \
	do {                                                                       \
		if ((x) != (y)) {                                                  \
			snprintf(why, why_len, "%s: " fmt " != " fmt, path, x, y); \
			return false;                                              \
		}                                                                  \
	} while (0)

static bool same_str(const char *path, const char *x, const char *y, char *why, size_t why_len)
{
	if (strcmp(x, y)) {
		snprintf(why, why_len, "%s: \"%s\" != \"%s\"", path, x, y);
		return false;
	}
	return true;
}

static bool same_set(const char *path, const struct iod_bitmap *x, const struct iod_bitmap *y,
                     char *why, size_t why_len)
{
	if (!iod_bitmap_equal(x, y)) {
		char a[256], b[256];
		iod_bitmap_format(x, a, sizeof(a));
		iod_bitmap_format(y, b, sizeof(b));
		snprintf(why, why_len, "%s: %s != %s", path, a, b);
		return false;
	}
	return true;
}

bool iod_topo_node_same(const struct iod_topo_node *a, const struct iod_topo_node *b, char *why,
                        size_t why_len)
{
	char p[96];
	char dummy[8];
	if (!why) {
		why = dummy;
		why_len = sizeof(dummy);
	}
	SAME_FIELD("%d", "is_dpu", (int)a->is_dpu, (int)b->is_dpu);
	SAME_FIELD("%u", "packages", a->npackages, b->npackages);
	SAME_FIELD("%u", "numa", a->nnuma, b->nnuma);
	SAME_FIELD("%u", "caches", a->ncaches, b->ncaches);
	SAME_FIELD("%u", "bridges", a->nbridges, b->nbridges);
	SAME_FIELD("%u", "devices", a->ndevices, b->ndevices);
	SAME_FIELD("%u", "cores", a->cores, b->cores);
	if (!same_set("cpuset", &a->cpuset, &b->cpuset, why, why_len) ||
	    !same_set("primary_pus", &a->primary_pus, &b->primary_pus, why, why_len))
		return false;
	for (unsigned i = 0; i < a->npackages; i++) {
		const struct iod_topo_package *x = &a->packages[i], *y = &b->packages[i];
		snprintf(p, sizeof(p), "packages[%u]", i);
		if (!same_set(p, &x->cpuset, &y->cpuset, why, why_len) ||
		    !same_str(p, x->model, y->model, why, why_len))
			return false;
		SAME_FIELD("%u", p, x->os_index, y->os_index);
	}
	for (unsigned i = 0; i < a->nnuma; i++) {
		const struct iod_topo_numa *x = &a->numa[i], *y = &b->numa[i];
		snprintf(p, sizeof(p), "numa[%u]", i);
		if (!same_set(p, &x->cpuset, &y->cpuset, why, why_len))
			return false;
		SAME_FIELD("%u", p, x->os_index, y->os_index);
		SAME_FIELD("%d", p, x->package, y->package);
		SAME_FIELD("%llu", p, (unsigned long long)x->mem_bytes,
		           (unsigned long long)y->mem_bytes);
	}
	for (unsigned i = 0; i < a->ncaches; i++) {
		snprintf(p, sizeof(p), "caches[%u]", i);
		if (!same_set(p, &a->caches[i].cpuset, &b->caches[i].cpuset, why, why_len))
			return false;
		SAME_FIELD("%llu", p, (unsigned long long)a->caches[i].size_bytes,
		           (unsigned long long)b->caches[i].size_bytes);
		SAME_FIELD("%u", p, a->caches[i].level, b->caches[i].level);
	}
	for (unsigned i = 0; i < a->nbridges; i++) {
		const struct iod_topo_bridge *x = &a->bridges[i], *y = &b->bridges[i];
		snprintf(p, sizeof(p), "bridges[%u]", i);
		SAME_FIELD("%d", p, (int)x->kind, (int)y->kind);
		SAME_FIELD("%d", p, x->parent, y->parent);
		SAME_FIELD("%d", p, x->numa, y->numa);
	}
	for (unsigned i = 0; i < a->ndevices; i++) {
		const struct iod_topo_device *x = &a->devices[i], *y = &b->devices[i];
		snprintf(p, sizeof(p), "devices[%u] (%s)", i, x->name);
		SAME_FIELD("%d", p, (int)x->kind, (int)y->kind);
		if (!same_str(p, x->name, y->name, why, why_len) ||
		    !same_str(p, x->os_name, y->os_name, why, why_len) ||
		    !same_str(p, x->vendor, y->vendor, why, why_len) ||
		    !same_str(p, x->model, y->model, why, why_len) ||
		    !same_str(p, x->uuid, y->uuid, why, why_len) ||
		    !same_set(p, &x->cpuset, &y->cpuset, why, why_len))
			return false;
		SAME_FIELD("0x%x", p, x->pci_vendor, y->pci_vendor);
		SAME_FIELD("0x%x", p, x->pci_device, y->pci_device);
		SAME_FIELD("0x%x", p, x->pci_class, y->pci_class);
		SAME_FIELD("0x%x", p, x->pci_addr, y->pci_addr);
		SAME_FIELD("%d", p, x->bridge, y->bridge);
		SAME_FIELD("%d", p, x->numa, y->numa);
		SAME_FIELD("%d", p, x->board, y->board);
		SAME_FIELD("%llu", p, (unsigned long long)x->mem_bytes,
		           (unsigned long long)y->mem_bytes);
		SAME_FIELD("%llu", p, (unsigned long long)x->pcie_bps,
		           (unsigned long long)y->pcie_bps);
		SAME_FIELD("%u", p, x->nvlinks, y->nvlinks);
		SAME_FIELD("%u", p, x->ports, y->ports);
		SAME_FIELD("%llu", p, (unsigned long long)x->nvlink_bps,
		           (unsigned long long)y->nvlink_bps);
		SAME_FIELD("%llu", p, (unsigned long long)x->port_bps,
		           (unsigned long long)y->port_bps);
		SAME_FIELD("%u", p, x->cores, y->cores);
		SAME_FIELD("%u", p, x->tflops, y->tflops);
		SAME_FIELD("%d", p, (int)x->tensor_cores, (int)y->tensor_cores);
	}
	for (unsigned i = 0; i < a->ndevices; i++)
		for (unsigned j = 0; j < a->ndevices; j++) {
			snprintf(p, sizeof(p), "link[%s][%s]", a->devices[i].name,
			         a->devices[j].name);
			SAME_FIELD("%u", p, a->link[i][j].pcie, b->link[i][j].pcie);
			SAME_FIELD("%u", p, a->link[i][j].nvlinks, b->link[i][j].nvlinks);
			SAME_FIELD("%u", p, a->link[i][j].nvswitch, b->link[i][j].nvswitch);
		}
	SAME_FIELD("%u", "units", a->nunits, b->nunits);
	return true;
}

/* ---- PCI bus numbering for modelled nodes ---------------------------------- */

static void assign_children(struct iod_topo_node *n, int parent, unsigned *next)
{
	struct iod_topo_bridge *p = &n->bridges[parent];
	uint16_t dom = p->pci_domain;

	for (unsigned i = 0; i < n->ndevices; i++) {
		struct iod_topo_device *d = &n->devices[i];
		if (d->bridge != parent)
			continue;
		unsigned bus = (*next)++;
		d->pci_addr = IOD_TOPO_PCI_ADDR(dom, bus & 0xff, 0, 0);
	}
	for (unsigned s = 0; s < n->nbridges; s++) {
		struct iod_topo_bridge *b = &n->bridges[s];
		if (b->kind != IOD_TOPO_BRIDGE_SWITCH || b->parent != parent)
			continue;
		unsigned bus = (*next)++;
		b->pci_domain = dom;
		b->pci_addr = IOD_TOPO_PCI_ADDR(dom, bus & 0xff, 0, 0);
		b->bus_first = (uint8_t)((*next)++);
		assign_children(n, (int)s, next);
		b->bus_last = (uint8_t)(*next - 1);
	}
}

void iod_topo_assign_pci(struct iod_topo_node *n)
{
	unsigned next = 0;
	for (unsigned h = 0; h < n->nbridges; h++) {
		struct iod_topo_bridge *b = &n->bridges[h];
		if (b->kind != IOD_TOPO_BRIDGE_HOST)
			continue;
		b->bus_first = (uint8_t)next++;
		assign_children(n, (int)h, &next);
		b->bus_last = (uint8_t)(next - 1);
	}
	IOD_ASSERT(next <= 256);
}
