/*
 * hwloc.c: nodes from hwloc: this machine (discovery) or an hwloc 2.x XML
 * file or buffer (a modelled or gathered machine), both through one
 * conversion so a machine and its XML give the same node.
 *
 * hwloc drops PCI and OS devices unless told to keep them, so every
 * topology here keeps all I/O objects. PCI bridges are folded the way
 * `nvidia-smi topo -m` counts them: root ports are part of their root
 * complex, and a PCIe switch (upstream port + downstream ports) counts as
 * one bridge; a device is classified by PCI vendor, device and class ids
 * (NVIDIA/AMD display = GPU, network = NIC, Mellanox BlueField = DPU, ...).
 * The `NVLinkBandwidth` distances matrix (hwloc's NVML backend, MB/s,
 * 20000 per NVLink v1 and 25000 per v2-v4) gives NV#; NVSwitch endpoints in
 * it mean all-to-all; CPU endpoints (POWER's NVLink to the Package) join
 * no GPUs (GPUs that meet only through the CPUs are SYS). This is a shell: it reads files and the system, and
 * reports errors in the caller's iod_err; it never prints. Users' XML is
 * parsed by hwloc in a child process (hwloc 2.9 crashes on some malformed
 * documents); it must never reach hwloc in this process.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- PCI ids -------------------------------------------------------------- */

const char *iod_topo_pci_vendor_name(uint16_t vendor)
{
	switch (vendor) {
	case IOD_PCI_VENDOR_NVIDIA: return "NVIDIA";
	case IOD_PCI_VENDOR_MELLANOX: return "Mellanox";
	case IOD_PCI_VENDOR_AMD_ATI: return "AMD";
	case IOD_PCI_VENDOR_XILINX: return "Xilinx";
	case IOD_PCI_VENDOR_ALTERA: return "Intel (Altera)";
	case IOD_PCI_VENDOR_INTEL: return "Intel";
	case 0x1af4: return "Red Hat (virtio)";
	case 0x14e4: return "Broadcom";
	case 0x8088: return "Wangxun";
	case 0x144d: return "Samsung";
	default: return NULL;
	}
}

/* BlueField integrated ConnectX functions: BlueField-1, -2, -3. */
static bool is_bluefield(uint16_t device)
{
	return device == 0xa2d2 || device == 0xa2d6 || device == 0xa2dc;
}

/*
 * AMD/ATI display controllers that are a server board's or BMC's VGA, never
 * a compute GPU: ES1000 (0x515e, 0x5969, the common onboard one), Radeon
 * 7000/VE (0x5159) and Rage XL (0x4752) on older boards.
 */
static bool amd_onboard_vga(uint16_t device)
{
	return device == 0x515e || device == 0x5969 || device == 0x5159 || device == 0x4752;
}

/*
 * Which display-class devices (PCI class 0x03xx) are compute GPUs, by vendor,
 * class and known ids (docs/topology.md):
 *   - NVIDIA: every one (VGA 0x0300 as on Quadro/GeForce, 3D 0x0302 as on
 *     Tesla/datacenter parts);
 *   - AMD: 3D (0x0302) and display-other (0x0380, Instinct), and VGA (0x0300,
 *     Radeon) except the onboard ids above;
 *   - every other vendor is a display controller, not a GPU: Matrox (0x102b)
 *     and ASPEED (0x1a03) server/BMC VGA, QEMU/Bochs (0x1234), Cirrus
 *     (0x1013), VMware (0x15ad), Red Hat QXL (0x1b36), virtio-gpu (0x1af4),
 *     Intel integrated graphics.
 */
static bool is_compute_gpu(uint16_t vendor, uint16_t device, uint32_t class_id)
{
	if (class_id >> 8 != 0x03)
		return false;
	if (vendor == IOD_PCI_VENDOR_NVIDIA)
		return true;
	if (vendor == IOD_PCI_VENDOR_AMD_ATI)
		return class_id != 0x0300 || !amd_onboard_vga(device);
	return false;
}

enum iod_topo_dev_kind iod_topo_pci_classify(uint16_t vendor, uint16_t device, uint32_t class_id)
{
	unsigned base = class_id >> 8;
	if (is_compute_gpu(vendor, device, class_id))
		return IOD_TOPO_DEV_GPU; /* not a BMC's or emulator's VGA */
	if (vendor == IOD_PCI_VENDOR_MELLANOX && is_bluefield(device))
		return IOD_TOPO_DEV_DPU;
	if (base == 0x02)
		return IOD_TOPO_DEV_NIC;
	if (class_id == 0x0108)
		return IOD_TOPO_DEV_NVME;
	if ((vendor == IOD_PCI_VENDOR_XILINX || vendor == IOD_PCI_VENDOR_ALTERA) &&
	    (base == 0x12 || base == 0x0b || class_id == 0x1180))
		return IOD_TOPO_DEV_FPGA;
	return IOD_TOPO_DEV_OTHER;
}

/* ---- conversion ------------------------------------------------------------ */

struct conv {
	hwloc_topology_t t;      /* the loaded topology */
	struct iod_topo_node *n; /* the node being filled */
	const char *what;        /* source name for messages */
	struct iod_err *e;       /* errors */
	int rc;                  /* first error */
};

static int to_bitmap(struct conv *c, hwloc_const_bitmap_t in, struct iod_bitmap *out,
                     const char *obj)
{
	iod_bitmap_zero(out);
	if (!in)
		return 0;
	int last = hwloc_bitmap_last(in);
	if (hwloc_bitmap_weight(in) < 0 || last >= IOD_BITMAP_BITS)
		return iod_err_set(c->e, -E2BIG,
		                   "%s: %s has PU %d; iod handles PUs 0..%d (IOD_BITMAP_BITS)",
		                   c->what, obj, last, IOD_BITMAP_BITS - 1);
	for (int i = hwloc_bitmap_first(in); i >= 0; i = hwloc_bitmap_next(in, i))
		iod_bitmap_set(out, (unsigned)i);
	return 0;
}

static const char *info(hwloc_obj_t o, const char *name)
{
	return o ? hwloc_obj_get_info_by_name(o, name) : NULL;
}

static uint64_t info_u64(hwloc_obj_t o, const char *name, uint64_t dflt)
{
	const char *v = info(o, name);
	if (!v || !*v)
		return dflt;
	char *end;
	unsigned long long x = strtoull(v, &end, 0);
	return *end ? dflt : (uint64_t)x;
}

/* Our NUMA index of the single NUMA node local to obj, or -1. */
static int numa_of(struct conv *c, hwloc_obj_t obj)
{
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(c->t, obj);
	if (!anc || !anc->nodeset || hwloc_bitmap_weight(anc->nodeset) != 1)
		return -1;
	unsigned os = (unsigned)hwloc_bitmap_first(anc->nodeset);
	for (unsigned m = 0; m < c->n->nnuma; m++)
		if (c->n->numa[m].os_index == os)
			return (int)m;
	return -1;
}

static void fill_device(struct conv *c, hwloc_obj_t pci, struct iod_topo_device *d)
{
	const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
	const char *s;

	d->pci_vendor = a->vendor_id;
	d->pci_device = a->device_id;
	d->pci_class = a->class_id;
	d->pci_addr = IOD_TOPO_PCI_ADDR(a->domain, a->bus, a->dev, a->func);
	/* linkspeed is GB/s from the XML: garbage (inf, 1e30) must not overflow the cast */
	if (a->linkspeed > 0 && a->linkspeed < 1e6)
		d->pcie_bps = (uint64_t)((double)a->linkspeed * 8e9);
	IOD_TOPO_COPY(d->vendor, iod_topo_pci_vendor_name(a->vendor_id));
	s = info(pci, "PCIVendor");
	if (!d->vendor[0] && s)
		IOD_TOPO_COPY(d->vendor, s);
	s = info(pci, "PCIDevice");
	if (s)
		IOD_TOPO_COPY(d->model, s);

	/* OS devices below: names and the GPU backends' attributes */
	for (hwloc_obj_t o = pci->io_first_child; o; o = o->next_sibling) {
		if (o->type != HWLOC_OBJ_OS_DEVICE || !o->name)
			continue;
		switch (o->attr->osdev.type) {
		case HWLOC_OBJ_OSDEV_OPENFABRICS:
			IOD_TOPO_COPY(d->os_name, o->name); /* mlx5_0: what nvidia-smi shows */
			break;
		case HWLOC_OBJ_OSDEV_NETWORK:
			if (!d->os_name[0])
				IOD_TOPO_COPY(d->os_name, o->name);
			break;
		case HWLOC_OBJ_OSDEV_BLOCK:
			if (!d->os_name[0])
				IOD_TOPO_COPY(d->os_name, o->name);
			break;
		case HWLOC_OBJ_OSDEV_GPU:
		case HWLOC_OBJ_OSDEV_COPROC:
			if ((s = info(o, "GPUModel")))
				IOD_TOPO_COPY(d->model, s);
			if ((s = info(o, "NVIDIAUUID")))
				IOD_TOPO_COPY(d->uuid, s);
			if (!d->mem_bytes)
				d->mem_bytes = info_u64(o, "CUDAGlobalMemorySize", 0) * 1024;
			if (!d->cores)
				d->cores = (uint32_t)info_u64(o, "CUDAMultiProcessors", 0);
			break;
		default: break;
		}
	}
	if (d->kind == IOD_TOPO_DEV_GPU && d->pci_vendor == IOD_PCI_VENDOR_NVIDIA)
		d->tensor_cores = true; /* refined by the iod infos below or NVML */

	/* iod's own infos (written by iod_topo_format_xml) complete the model */
	if ((s = info(pci, "iodModel")))
		IOD_TOPO_COPY(d->model, s);
	if ((s = info(pci, "iodVendor")))
		IOD_TOPO_COPY(d->vendor, s);
	if ((s = info(pci, "iodOSName")))
		IOD_TOPO_COPY(d->os_name, s);
	d->mem_bytes = info_u64(pci, "iodMemBytes", d->mem_bytes);
	d->cores = (uint32_t)info_u64(pci, "iodCores", d->cores);
	d->tflops = (uint32_t)info_u64(pci, "iodTFLOPS", d->tflops);
	d->ports = (uint8_t)info_u64(pci, "iodPorts", d->ports);
	d->port_bps = info_u64(pci, "iodPortBps", d->port_bps);
	d->board = (int16_t)(int64_t)info_u64(pci, "iodBoard", (uint64_t)(int64_t)d->board);
	if ((s = info(pci, "iodTensorCores")))
		d->tensor_cores = !strcmp(s, "1");
	unsigned gen = (unsigned)info_u64(pci, "iodPCIeGen", 0);
	unsigned width = (unsigned)info_u64(pci, "iodPCIeWidth", 0);
	if (gen && width)
		iod_topo_device_set_pcie(d, gen, width);
	if ((s = info(pci, "iodKind"))) {
		for (int k = IOD_TOPO_DEV_GPU; k <= IOD_TOPO_DEV_OTHER; k++)
			if (!strcmp(s, iod_topo_dev_kind_name((enum iod_topo_dev_kind)k)))
				d->kind = (enum iod_topo_dev_kind)k;
	}
	if (!d->model[0])
		snprintf(d->model, sizeof(d->model), "%s %04x:%04x",
		         d->vendor[0] ? d->vendor : "PCI", d->pci_vendor, d->pci_device);
	(void)c;
}

static void walk_io(struct conv *c, hwloc_obj_t obj, int bridge, unsigned depth);

static void walk_io_children(struct conv *c, hwloc_obj_t obj, int bridge, unsigned depth)
{
	for (hwloc_obj_t k = obj->io_first_child; k && !c->rc; k = k->next_sibling)
		walk_io(c, k, bridge, depth);
}

static void walk_io(struct conv *c, hwloc_obj_t obj, int bridge, unsigned depth)
{
	if (depth > 4 * IOD_TOPO_PCI_DEPTH_MAX) {
		c->rc = iod_err_set(c->e, -EINVAL, "%s: PCI tree deeper than %d levels", c->what,
		                    4 * IOD_TOPO_PCI_DEPTH_MAX);
		return;
	}
	if (obj->type == HWLOC_OBJ_BRIDGE) {
		const struct hwloc_bridge_attr_s *b = &obj->attr->bridge;
		if (b->upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
			int h = iod_topo_add_bridge(
			    c->n, IOD_TOPO_BRIDGE_HOST, -1, numa_of(c, obj),
			    IOD_TOPO_PCI_ADDR(b->downstream.pci.domain, 0, 0, 0), c->e);
			if (h < 0) {
				c->rc = h;
				return;
			}
			c->n->bridges[h].bus_first = b->downstream.pci.secondary_bus;
			c->n->bridges[h].bus_last = b->downstream.pci.subordinate_bus;
			walk_io_children(c, obj, h, 1);
			return;
		}
		/* PCI-to-PCI: depth 1 = root port, 2 = switch upstream port,
		 * 3 = downstream port, 4 = cascaded switch... */
		if (bridge >= 0 && depth % 2 == 0) {
			const struct hwloc_pcidev_attr_s *p = &b->upstream.pci;
			int s = iod_topo_add_bridge(
			    c->n, IOD_TOPO_BRIDGE_SWITCH, bridge, -1,
			    IOD_TOPO_PCI_ADDR(p->domain, p->bus, p->dev, p->func), c->e);
			if (s < 0) {
				c->rc = s;
				return;
			}
			c->n->bridges[s].bus_first = b->downstream.pci.secondary_bus;
			c->n->bridges[s].bus_last = b->downstream.pci.subordinate_bus;
			walk_io_children(c, obj, s, depth + 1);
			return;
		}
		walk_io_children(c, obj, bridge, depth + 1);
		return;
	}
	if (obj->type != HWLOC_OBJ_PCI_DEVICE)
		return;
	const struct hwloc_pcidev_attr_s *a = &obj->attr->pcidev;
	enum iod_topo_dev_kind kind =
	    iod_topo_pci_classify(a->vendor_id, a->device_id, a->class_id);
	const char *forced = info(obj, "iodKind");
	if (kind == IOD_TOPO_DEV_OTHER && !forced)
		return;
	struct iod_topo_device d;
	iod_topo_device_init(&d, kind);
	if (c->n->is_dpu && kind == IOD_TOPO_DEV_DPU)
		d.kind = IOD_TOPO_DEV_NIC; /* on the DPU itself its ConnectX is just a NIC */
	fill_device(c, obj, &d);
	if (d.kind == IOD_TOPO_DEV_OTHER)
		return;
	d.bridge = (int16_t)bridge;
	if (bridge < 0)
		d.numa = (int16_t)numa_of(c, obj);
	int rc = iod_topo_add_device(c->n, &d, c->e);
	if (rc < 0) {
		iod_err_wrap(c->e, "%s", c->what);
		c->rc = rc;
	}
}

static void walk(struct conv *c, hwloc_obj_t obj, unsigned depth)
{
	if (depth > 64 || c->rc)
		return;
	for (hwloc_obj_t k = obj->first_child; k && !c->rc; k = k->next_sibling)
		walk(c, k, depth + 1);
	walk_io_children(c, obj, -1, 0);
}

/*
 * A BlueField shows one PCI function per network port; it is one DPU (one
 * compute unit with its Arm cores), so functions of one device fold into
 * the first, which counts the ports. Arm cores and memory are not visible
 * from the host: the common configuration per generation is assumed
 * (BlueField-1: 16 cores, BlueField-2: 8 cores / 16 GiB, BlueField-3:
 * 16 cores / 32 GiB) unless the XML says otherwise.
 */
static void fold_dpu_functions(struct iod_topo_node *n)
{
	for (unsigned i = 0; i < n->ndevices; i++) {
		struct iod_topo_device *d = &n->devices[i];
		if (d->kind != IOD_TOPO_DEV_DPU)
			continue;
		if (!d->cores)
			d->cores = d->pci_device == 0xa2d6 ? 8 : 16;
		if (!d->mem_bytes)
			d->mem_bytes = (d->pci_device == 0xa2dc ? 32ull : 16ull) << 30;
		if (!d->ports)
			d->ports = 1;
		for (unsigned j = i + 1; j < n->ndevices;) {
			struct iod_topo_device *x = &n->devices[j];
			if (x->kind != IOD_TOPO_DEV_DPU ||
			    (x->pci_addr & ~7u) != (d->pci_addr & ~7u)) {
				j++;
				continue;
			}
			d->ports = (uint8_t)(d->ports + (x->ports ? x->ports : 1));
			if (!d->port_bps)
				d->port_bps = x->port_bps;
			memmove(x, x + 1, sizeof(*x) * (n->ndevices - j - 1));
			n->ndevices--;
			memset(&n->devices[n->ndevices], 0, sizeof(*x));
		}
	}
}

/* Drop bridges with no modelled device below them, renumbering the rest. */
static void prune_bridges(struct iod_topo_node *n)
{
	bool used[IOD_TOPO_BRIDGES_MAX] = {false};
	int16_t map[IOD_TOPO_BRIDGES_MAX];

	for (unsigned i = 0; i < n->ndevices; i++)
		for (int b = n->devices[i].bridge, d = 0; b >= 0 && d < IOD_TOPO_PCI_DEPTH_MAX;
		     b = n->bridges[b].parent, d++)
			used[b] = true;
	unsigned k = 0;
	for (unsigned b = 0; b < n->nbridges; b++) {
		map[b] = used[b] ? (int16_t)k : -1;
		if (used[b])
			n->bridges[k++] = n->bridges[b];
	}
	for (unsigned b = 0; b < k; b++)
		if (n->bridges[b].parent >= 0)
			n->bridges[b].parent = map[n->bridges[b].parent];
	for (unsigned i = 0; i < n->ndevices; i++)
		if (n->devices[i].bridge >= 0)
			n->devices[i].bridge = map[n->devices[i].bridge];
	memset(&n->bridges[k], 0, sizeof(n->bridges[0]) * (n->nbridges - k));
	n->nbridges = (uint16_t)k;
}

static int device_by_pci(const struct iod_topo_node *n, hwloc_obj_t o)
{
	while (o && o->type == HWLOC_OBJ_OS_DEVICE)
		o = o->parent;
	if (!o || o->type != HWLOC_OBJ_PCI_DEVICE)
		return -1;
	const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
	uint32_t addr = IOD_TOPO_PCI_ADDR(a->domain, a->bus, a->dev, a->func);
	for (unsigned i = 0; i < n->ndevices; i++)
		if (n->devices[i].pci_addr == addr && n->devices[i].kind == IOD_TOPO_DEV_GPU)
			return (int)i;
	return -1;
}

/* Is an NVLinkBandwidth endpoint that is not a GPU an NVSwitch? hwloc's
 * NVML backend puts NVSwitches in as PCI devices (subtype "NVSwitch",
 * NVIDIA bridge class 0x0680) and, on POWER8/9, the CPU a GPU links to as
 * its Package: a link to a CPU joins that GPU to no other GPU. */
static bool is_nvswitch(hwloc_obj_t o)
{
	if (!o || o->type != HWLOC_OBJ_PCI_DEVICE)
		return false;
	if (o->subtype && !strcmp(o->subtype, "NVSwitch"))
		return true;
	return o->attr->pcidev.vendor_id == IOD_PCI_VENDOR_NVIDIA &&
	       o->attr->pcidev.class_id == 0x0680;
}

static unsigned links_of(uint64_t mbps, uint64_t *per_link)
{
	if (mbps == 0)
		return 0;
	if (mbps % 25000 == 0) {
		*per_link = 25000;
		return (unsigned)(mbps / 25000);
	}
	if (mbps % 20000 == 0) {
		*per_link = 20000;
		return (unsigned)(mbps / 20000);
	}
	*per_link = 25000;
	return (unsigned)((mbps + 12500) / 25000);
}

static int nvlink_matrix(struct conv *c)
{
	struct hwloc_distances_s *dist[4];
	unsigned nr = IOD_ARRAY_LEN(dist);

	if (hwloc_distances_get_by_name(c->t, "NVLinkBandwidth", &nr, dist, 0) < 0 || nr == 0)
		return 0;
	int rc = 0;
	for (unsigned k = 0; k < nr && k < IOD_ARRAY_LEN(dist) && !rc; k++) {
		struct hwloc_distances_s *d = dist[k];
		int dev[IOD_TOPO_DEVICES_MAX + 64];
		unsigned links_to_switch[IOD_TOPO_DEVICES_MAX] = {0};
		unsigned nobj = IOD_MIN(d->nbobjs, (unsigned)IOD_ARRAY_LEN(dev));
		for (unsigned i = 0; i < nobj; i++)
			dev[i] = device_by_pci(c->n, d->objs[i]);
		for (unsigned i = 0; i < nobj && !rc; i++) {
			if (dev[i] < 0)
				continue;
			struct iod_topo_device *gi = &c->n->devices[dev[i]];
			unsigned total = 0;
			for (unsigned j = 0; j < nobj; j++) {
				if (i == j)
					continue;
				uint64_t per = 0;
				unsigned l = links_of(d->values[(size_t)i * d->nbobjs + j], &per);
				if (!l)
					continue;
				total += l;
				gi->nvlink_bps = per * 1000000ull * 8;
				if (dev[j] < 0 && is_nvswitch(d->objs[j]))
					links_to_switch[dev[i]] += l;
				else if (dev[j] < 0)
					continue; /* to a CPU (POWER): no GPU-GPU path */
				else if (i < j)
					rc = iod_topo_add_nvlink(c->n, (unsigned)dev[i],
					                         (unsigned)dev[j], l, false, c->e);
			}
			if (total > IOD_TOPO_NVLINKS_MAX * 4)
				total = IOD_TOPO_NVLINKS_MAX * 4;
			if (!gi->nvlinks)
				gi->nvlinks = (uint8_t)total;
		}
		/* GPUs joined through NVSwitch: all-to-all, NV = the smaller side */
		for (unsigned a = 0; a < c->n->ndevices && !rc; a++)
			for (unsigned b = a + 1; b < c->n->ndevices && !rc; b++)
				if (links_to_switch[a] && links_to_switch[b])
					rc = iod_topo_add_nvlink(
					    c->n, a, b,
					    IOD_MIN(links_to_switch[a], links_to_switch[b]), true,
					    c->e);
	}
	for (unsigned k = 0; k < nr && k < IOD_ARRAY_LEN(dist); k++)
		hwloc_distances_release(c->t, dist[k]);
	return rc;
}

int iod_topo_from_hwloc(hwloc_topology_t t, struct iod_topo_node *n, const char *what,
                        struct iod_err *e)
{
	struct conv c = {t, n, what, e, 0};
	hwloc_obj_t root = hwloc_get_root_obj(t);
	const char *host = info(root, "HostName");
	const char *product = info(root, "DMIProductName");
	char obj[64];

	iod_topo_node_init(n, host ? host : info(root, "iodName") ? info(root, "iodName") : what);
	n->is_dpu = (product && strstr(product, "BlueField")) ||
	            (info(root, "iodDPU") && !strcmp(info(root, "iodDPU"), "1"));

	int np = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
	for (int i = 0; i < np && !c.rc; i++) {
		hwloc_obj_t p = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, (unsigned)i);
		struct iod_bitmap set;
		snprintf(obj, sizeof(obj), "Package P#%u", p->os_index);
		if ((c.rc = to_bitmap(&c, p->cpuset, &set, obj)))
			break;
		int rc = iod_topo_add_package(n, p->os_index, &set, info(p, "CPUModel"), e);
		if (rc < 0)
			c.rc = rc;
	}
	int nn = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
	for (int i = 0; i < nn && !c.rc; i++) {
		hwloc_obj_t m = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
		struct iod_bitmap set;
		int pkg = -1;
		snprintf(obj, sizeof(obj), "NUMANode N#%u", m->os_index);
		if ((c.rc = to_bitmap(&c, m->cpuset, &set, obj)))
			break;
		hwloc_obj_t p = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, m);
		for (unsigned k = 0; p && k < n->npackages; k++)
			if (n->packages[k].os_index == p->os_index)
				pkg = (int)k;
		int rc =
		    iod_topo_add_numa(n, m->os_index, pkg, m->attr->numanode.local_memory, &set, e);
		if (rc < 0)
			c.rc = rc;
	}
	if (!c.rc && nn <= 0)
		return iod_err_set(
		    e, -EINVAL,
		    "%s: the topology has no NUMA node; an hwloc topology always has at "
		    "least one (is this a complete `lstopo --of xml` output?)",
		    what);
	int ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
	for (int i = 0; i < ncores && !c.rc; i++) {
		hwloc_obj_t k = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)i);
		for (int pu = k->cpuset ? hwloc_bitmap_first(k->cpuset) : -1;
		     pu >= 0 && pu < IOD_BITMAP_BITS; pu = hwloc_bitmap_next(k->cpuset, pu))
			iod_topo_set_core(n, (unsigned)pu, (unsigned)i);
	}
	hwloc_obj_type_t llc = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_L3CACHE) > 0
	                           ? HWLOC_OBJ_L3CACHE
	                           : HWLOC_OBJ_L2CACHE;
	int nc = hwloc_get_nbobjs_by_type(t, llc);
	for (int i = 0; i < nc && !c.rc; i++) {
		hwloc_obj_t k = hwloc_get_obj_by_type(t, llc, (unsigned)i);
		struct iod_bitmap set;
		if ((c.rc = to_bitmap(&c, k->cpuset, &set, "a cache")))
			break;
		if (n->ncaches >= IOD_TOPO_CACHES_MAX)
			break; /* caches are informative: keep the first ones */
		iod_topo_add_cache(n, llc == HWLOC_OBJ_L3CACHE ? 3 : 2, k->attr->cache.size, &set,
		                   e);
	}
	if (!c.rc)
		walk(&c, root, 0);
	if (!c.rc) {
		fold_dpu_functions(n);
		prune_bridges(n);
		c.rc = nvlink_matrix(&c);
	}
	if (c.rc)
		return c.rc;
	int rc = iod_topo_node_finalize(n, e);
	if (rc)
		return iod_err_wrap(e, "%s", what), rc;
	return 0;
}

/* ---- loading ----------------------------------------------------------------- */

static int load(hwloc_topology_t t, struct iod_topo_node *n, const char *what,
                enum iod_topo_source src, struct iod_err *e)
{
	hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
	if (hwloc_topology_load(t) < 0) {
		int err = errno ? errno : EINVAL;
		hwloc_topology_destroy(t);
		return iod_err_set(e, -EINVAL,
		                   "%s: hwloc could not load it (%s); is it an hwloc 2.x XML "
		                   "document (`lstopo --of xml`)?",
		                   what, strerror(err));
	}
	int rc = iod_topo_from_hwloc(t, n, what, e);
	hwloc_topology_destroy(t);
	if (!rc)
		n->source = src;
	return rc;
}

/* A cheap sanity check before hwloc: say what is wrong in our words. */
static int looks_like_xml(const char *buf, size_t len, const char *what, struct iod_err *e)
{
	size_t i = 0;
	while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t'))
		i++;
	if (len == 0 || i == len)
		return iod_err_set(e, -EINVAL, "%s: empty file; expected an hwloc XML topology",
		                   what);
	if (buf[i] != '<')
		return iod_err_set(e, -EINVAL,
		                   "%s:1:%zu: not XML (starts with '%c'); expected an hwloc XML "
		                   "topology such as `lstopo --of xml` writes",
		                   what, i + 1, buf[i]);
	if (!memmem(buf, len, "<topology", 9))
		return iod_err_set(e, -EINVAL,
		                   "%s: no <topology> element; not an hwloc XML topology", what);
	if (!memmem(buf, len, "</topology>", 11))
		return iod_err_set(e, -EINVAL,
		                   "%s: truncated or malformed: no closing </topology> tag", what);
	if (memmem(buf, len, "<topology version=\"3.", 21))
		return iod_err_set(
		    e, -EINVAL,
		    "%s: written in hwloc's 3.x XML format, which the hwloc 2.x "
		    "iod uses cannot read: export it with hwloc 2 (`lstopo --of xml`)",
		    what);
	/* hwloc 1.x documents (no version attribute) leave out the NUMA node of
	 * a machine with one; hwloc's v1 import adds it */
	bool v1 = !memmem(buf, len, "<topology version=", 18);
	if (!v1 && !memmem(buf, len, "type=\"NUMANode\"", 15))
		return iod_err_set(
		    e, -EINVAL,
		    "%s: the topology has no NUMA node (no object of type \"NUMANode\"); "
		    "every machine has at least one: is this a complete `lstopo --of "
		    "xml` output?",
		    what);
	return 0;
}

/* Load XML in this process: only for documents iod wrote itself. */
static int load_buffer_here(const char *buf, size_t len, const char *what, struct iod_topo_node *n,
                            struct iod_err *e)
{
	hwloc_topology_t t;
	if (hwloc_topology_init(&t) < 0)
		return iod_err_set(e, -ENOMEM, "hwloc_topology_init failed");
	if (hwloc_topology_set_xmlbuffer(t, buf, (int)len) < 0) {
		hwloc_topology_destroy(t);
		return iod_err_set(e, -EINVAL, "%s: hwloc rejected it", what);
	}
	return load(t, n, what, IOD_TOPO_SRC_XML, e);
}

static int write_all(int fd, const void *p, size_t len)
{
	const char *c = p;
	while (len) {
		ssize_t w = write(fd, c, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		len -= (size_t)w;
	}
	return 0;
}

static size_t read_all(int fd, void *p, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t k = read(fd, (char *)p + got, len - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return got;
}

/* What the child says before the normalized XML. */
struct child_header {
	int32_t rc;     /* 0, or the errno of hwloc's failure (positive) */
	uint32_t bytes; /* length of the XML that follows */
};

/* In the child: parse with hwloc, write hwloc's own re-export to fd. */
static int child_normalize(const char *buf, size_t len, int fd)
{
	struct child_header h = {0, 0};
	hwloc_topology_t t;
	char *xml = NULL;
	int xlen = 0;

	if (hwloc_topology_init(&t) < 0)
		return 3;
	hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
	errno = 0;
	if (hwloc_topology_set_xmlbuffer(t, buf, (int)len) < 0 || hwloc_topology_load(t) < 0 ||
	    hwloc_topology_export_xmlbuffer(t, &xml, &xlen, 0) < 0 || xlen <= 0)
		h.rc = errno ? errno : EINVAL;
	else
		h.bytes = (uint32_t)(xlen - 1); /* without the NUL */
	int rc = write_all(fd, &h, sizeof(h)) || (h.bytes && write_all(fd, xml, h.bytes)) ? 4 : 0;
	if (xml)
		hwloc_free_xmlbuffer(t, xml);
	hwloc_topology_destroy(t);
	return rc;
}

/*
 * hwloc's XML importer trusts its input (a document without nodesets makes
 * hwloc 2.9 dereference NULL), so a document from a user is first parsed by
 * hwloc in a child process, which hands back hwloc's own re-export of it; a
 * crash there becomes an error message. The parent then reads that
 * normalized document (which hwloc wrote itself) and converts it in-process,
 * so iod's own code always runs where the sanitizers and the fuzzer see it.
 */
static int load_buffer_isolated(const char *buf, size_t len, const char *what,
                                struct iod_topo_node *n, struct iod_err *e)
{
	int fds[2];
	if (len > INT32_MAX)
		return iod_err_set(e, -E2BIG, "%s: too large", what);
	if (pipe(fds) < 0)
		return iod_err_set(e, -errno, "%s: pipe: %s", what, strerror(errno));
	pid_t pid = fork();
	if (pid < 0) {
		int err = errno;
		close(fds[0]);
		close(fds[1]);
		return iod_err_set(e, -err, "%s: fork: %s", what, strerror(err));
	}
	if (pid == 0) {
		/* die by the signal, quietly: no sanitizer or fuzzer handlers */
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		static const int deadly[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGALRM};
		for (size_t i = 0; i < IOD_ARRAY_LEN(deadly); i++)
			sigaction(deadly[i], &dfl, NULL);
		alarm(IOD_TOPO_XML_PARSE_S_MAX); /* hwloc looping on a bad document */
		close(fds[0]);
		_exit(child_normalize(buf, len, fds[1]));
	}
	close(fds[1]);
	struct child_header h = {0, 0};
	size_t got = read_all(fds[0], &h, sizeof(h));
	char *xml = NULL;
	size_t xml_got = 0;
	if (got == sizeof(h) && h.rc == 0 && h.bytes > 0 && h.bytes <= 4u * IOD_TOPO_XML_MAX) {
		xml = malloc(h.bytes);
		if (xml)
			xml_got = read_all(fds[0], xml, h.bytes);
	}
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int rc;
	if (got != sizeof(h)) {
		if (WIFSIGNALED(status))
			rc = iod_err_set(
			    e, -EINVAL,
			    "%s: malformed hwloc XML: the hwloc parser %s on it "
			    "(signal %d); `lstopo -i FILE` shows what hwloc makes of it",
			    what,
			    WTERMSIG(status) == SIGALRM ? "ran past the time limit" : "crashed",
			    WTERMSIG(status));
		else
			rc = iod_err_set(e, -EIO, "%s: the XML reader exited with status %d", what,
			                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	} else if (h.rc) {
		rc = iod_err_set(e, -EINVAL,
		                 "%s: hwloc could not load it (%s); is it an hwloc 2.x XML "
		                 "document (`lstopo --of xml`)?",
		                 what, strerror(h.rc));
	} else if (!xml || xml_got != h.bytes) {
		rc = iod_err_set(e, xml ? -EIO : -ENOMEM, "%s: reading the normalized XML failed",
		                 what);
	} else {
		rc = load_buffer_here(xml, h.bytes, what, n, e);
	}
	free(xml);
	return rc;
}

int iod_topo_load_xml_buffer(const char *buf, size_t len, struct iod_topo_node *n,
                             struct iod_err *e)
{
	if (len > IOD_TOPO_XML_MAX)
		return iod_err_set(e, -E2BIG,
		                   "XML buffer of %zu bytes; at most %u (IOD_TOPO_XML_MAX)", len,
		                   IOD_TOPO_XML_MAX);
	int rc = looks_like_xml(buf, len, "XML buffer", e);
	if (rc)
		return rc;
	return load_buffer_isolated(buf, len, "XML buffer", n, e);
}

int iod_topo_load_xml_trusted(const char *buf, size_t len, struct iod_topo_node *n,
                              struct iod_err *e)
{
	int rc = looks_like_xml(buf, len, "XML buffer", e);
	return rc ? rc : load_buffer_here(buf, len, "XML buffer", n, e);
}

int iod_topo_load_xml_file(const char *path, struct iod_topo_node *n, struct iod_err *e)
{
	struct iod_buf b;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return iod_err_set(e, -EISDIR, "%s: is a directory; give an hwloc XML file", path);
	iod_buf_init(&b);
	int rc = iod_buf_read_file(&b, path, IOD_TOPO_XML_MAX, e);
	if (rc) {
		iod_buf_free(&b);
		if (rc == -ENOENT)
			return iod_err_set(
			    e, -ENOENT,
			    "%s: no such file (give an hwloc XML topology, e.g. from "
			    "`lstopo --of xml`)",
			    path);
		return rc;
	}
	rc = looks_like_xml(b.data ? b.data : "", b.len, path, e);
	if (!rc)
		rc = load_buffer_isolated(b.data, b.len, path, n, e);
	iod_buf_free(&b);
	return rc;
}

int iod_topo_discover(struct iod_topo_node *n, struct iod_err *e)
{
	hwloc_topology_t t;
	const char *file = getenv("HWLOC_XMLFILE");
	if (file && *file) {
		/* hwloc would read the file itself, in this process: read it the
		 * safe way instead, then let NVML complete it as on a real host */
		int rc = iod_topo_load_xml_file(file, n, e);
		return rc ? rc : iod_topo_nvml_enrich(n, e);
	}
	if (hwloc_topology_init(&t) < 0)
		return iod_err_set(e, -ENOMEM, "hwloc_topology_init failed");
	hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
	int rc = load(t, n, "this machine", IOD_TOPO_SRC_HOST, e);
	if (rc)
		return rc;
	rc = iod_topo_nvml_enrich(n, e);
	if (rc)
		return rc;
	n->source = IOD_TOPO_SRC_HOST;
	return 0;
}
