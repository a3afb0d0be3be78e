/*
 * xmlwrite.c: a node as an hwloc 2.x XML document, so modelled machines can
 * be fed to anything that reads hwloc XML (lstopo, MPI runtimes, iod itself)
 * and so the XML loader can be tested against the built-in models.
 *
 * The objects are written by hand in the layout hwloc's Linux backend
 * produces (Machine > Package > NUMANode + L3 > Core > PU; host bridge >
 * root port > switch upstream port > downstream ports > PCI devices > OS
 * devices). The document is then loaded by hwloc, NVLinks are added as the
 * `NVLinkBandwidth` distances matrix exactly as hwloc's NVML backend does
 * (MB/s, 25000 per link, NVSwitch as a PCI endpoint), and hwloc exports the
 * result: what comes out is hwloc's own format. iod-specific attributes that
 * hwloc has no field for travel as <info name="iod..."> on the PCI device.
 * Output only: never reads the machine.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct xw {
	const struct iod_topo_node *n; /* what we write */
	struct iod_buf *b;             /* where */
	unsigned gp;                   /* next gp_index */
	int rc;                        /* accumulated iod_buf_printf status */
};

static void set_str(const struct iod_bitmap *s, char *buf, size_t len)
{
	hwloc_bitmap_t h = hwloc_bitmap_alloc();
	for (int i = iod_bitmap_next(s, 0); i >= 0; i = iod_bitmap_next(s, (unsigned)i + 1))
		hwloc_bitmap_set(h, (unsigned)i);
	hwloc_bitmap_snprintf(buf, len, h);
	hwloc_bitmap_free(h);
}

/* nodeset of the NUMA nodes whose CPUs intersect s */
static void node_str(const struct iod_topo_node *n, const struct iod_bitmap *s, char *buf,
                     size_t len)
{
	hwloc_bitmap_t h = hwloc_bitmap_alloc();
	for (unsigned m = 0; m < n->nnuma; m++) {
		struct iod_bitmap x = n->numa[m].cpuset;
		iod_bitmap_and(&x, s);
		if (!iod_bitmap_empty(&x))
			hwloc_bitmap_set(h, n->numa[m].os_index);
	}
	hwloc_bitmap_snprintf(buf, len, h);
	hwloc_bitmap_free(h);
}

static void esc(struct xw *w, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': w->rc |= iod_buf_printf(w->b, "&lt;"); break;
		case '>': w->rc |= iod_buf_printf(w->b, "&gt;"); break;
		case '&': w->rc |= iod_buf_printf(w->b, "&amp;"); break;
		case '"': w->rc |= iod_buf_printf(w->b, "&quot;"); break;
		default:
			if ((unsigned char)*s >= 0x20)
				w->rc |= iod_buf_append(w->b, s, 1);
		}
	}
}

static void info_s(struct xw *w, unsigned ind, const char *name, const char *value)
{
	if (!value || !*value)
		return;
	w->rc |= iod_buf_printf(w->b, "%*s<info name=\"%s\" value=\"", (int)ind, "", name);
	esc(w, value);
	w->rc |= iod_buf_printf(w->b, "\"/>\n");
}

static void info_u(struct xw *w, unsigned ind, const char *name, uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	info_s(w, ind, name, buf);
}

static void cores(struct xw *w, const struct iod_bitmap *within, unsigned ind)
{
	const struct iod_topo_node *n = w->n;
	char cs[512], ns[128];
	for (int p = iod_bitmap_next(&n->primary_pus, 0); p >= 0;
	     p = iod_bitmap_next(&n->primary_pus, (unsigned)p + 1)) {
		if (!iod_bitmap_test(within, (unsigned)p))
			continue;
		unsigned core = n->pu_core[p];
		struct iod_bitmap pus;
		iod_bitmap_zero(&pus);
		for (unsigned i = 0; i < IOD_BITMAP_BITS; i++)
			if (n->pu_core[i] == core)
				iod_bitmap_set(&pus, i);
		set_str(&pus, cs, sizeof(cs));
		node_str(n, &pus, ns, sizeof(ns));
		w->rc |=
		    iod_buf_printf(w->b,
		                   "%*s<object type=\"Core\" os_index=\"%u\" cpuset=\"%s\" "
		                   "complete_cpuset=\"%s\" nodeset=\"%s\" complete_nodeset=\"%s\" "
		                   "gp_index=\"%u\">\n",
		                   (int)ind, "", core, cs, cs, ns, ns, w->gp++);
		for (int q = iod_bitmap_next(&pus, 0); q >= 0;
		     q = iod_bitmap_next(&pus, (unsigned)q + 1)) {
			struct iod_bitmap one;
			iod_bitmap_zero(&one);
			iod_bitmap_set(&one, (unsigned)q);
			set_str(&one, cs, sizeof(cs));
			node_str(n, &one, ns, sizeof(ns));
			w->rc |= iod_buf_printf(
			    w->b,
			    "%*s  <object type=\"PU\" os_index=\"%d\" cpuset=\"%s\" "
			    "complete_cpuset=\"%s\" nodeset=\"%s\" complete_nodeset=\"%s\" "
			    "gp_index=\"%u\"/>\n",
			    (int)ind, "", q, cs, cs, ns, ns, w->gp++);
		}
		w->rc |= iod_buf_printf(w->b, "%*s</object>\n", (int)ind, "");
	}
}

/* ---- PCI ------------------------------------------------------------------ */

static void pci_bridge_open(struct xw *w, unsigned ind, uint32_t addr, unsigned secondary,
                            unsigned subordinate, unsigned depth)
{
	char pci[24];
	iod_topo_pci_format(addr, pci, sizeof(pci));
	w->rc |=
	    iod_buf_printf(w->b,
	                   "%*s<object type=\"Bridge\" gp_index=\"%u\" bridge_type=\"1-1\" "
	                   "depth=\"%u\" bridge_pci=\"%04x:[%02x-%02x]\" pci_busid=\"%s\" "
	                   "pci_type=\"0604 [1000:c010] [0000:0000] 00\" "
	                   "pci_link_speed=\"0.000000\">\n",
	                   (int)ind, "", w->gp++, depth, addr >> 16, secondary, subordinate, pci);
}

static void device(struct xw *w, unsigned i, unsigned ind)
{
	const struct iod_topo_device *d = &w->n->devices[i];
	char pci[24];
	iod_topo_pci_format(d->pci_addr, pci, sizeof(pci));
	w->rc |= iod_buf_printf(w->b,
	                        "%*s<object type=\"PCIDev\" gp_index=\"%u\" pci_busid=\"%s\" "
	                        "pci_type=\"%04x [%04x:%04x] [%04x:0000] 00\" "
	                        "pci_link_speed=\"%f\">\n",
	                        (int)ind, "", w->gp++, pci, d->pci_class, d->pci_vendor,
	                        d->pci_device, d->pci_vendor, (double)d->pcie_bps / 8e9);
	unsigned in = ind + 2;
	info_s(w, in, "PCIVendor", d->vendor);
	info_s(w, in, "PCIDevice", d->model);
	info_s(w, in, "iodKind", iod_topo_dev_kind_name(d->kind));
	info_s(w, in, "iodVendor", d->vendor);
	info_s(w, in, "iodModel", d->model);
	info_s(w, in, "iodOSName", d->os_name);
	if (d->mem_bytes)
		info_u(w, in, "iodMemBytes", d->mem_bytes);
	if (d->cores)
		info_u(w, in, "iodCores", d->cores);
	if (d->tflops)
		info_u(w, in, "iodTFLOPS", d->tflops);
	if (d->ports) {
		info_u(w, in, "iodPorts", d->ports);
		info_u(w, in, "iodPortBps", d->port_bps);
	}
	if (d->pcie_gen) {
		info_u(w, in, "iodPCIeGen", d->pcie_gen);
		info_u(w, in, "iodPCIeWidth", d->pcie_width);
	}
	if (d->board >= 0)
		info_u(w, in, "iodBoard", (uint64_t)d->board);
	if (d->kind == IOD_TOPO_DEV_GPU)
		info_s(w, in, "iodTensorCores", d->tensor_cores ? "1" : "0");
	/* OS devices, named as hwloc's backends name them */
	if (d->kind == IOD_TOPO_DEV_GPU) {
		w->rc |= iod_buf_printf(w->b,
		                        "%*s<object type=\"OSDev\" gp_index=\"%u\" name=\"nvml%d\" "
		                        "subtype=\"NVML\" osdev_type=\"1\">\n",
		                        (int)in, "", w->gp++, d->gpu_index);
		info_s(w, in + 2, "Backend", "NVML");
		info_s(w, in + 2, "GPUVendor", "NVIDIA Corporation");
		info_s(w, in + 2, "GPUModel", d->model);
		info_s(w, in + 2, "NVIDIAUUID", d->uuid);
		w->rc |= iod_buf_printf(w->b, "%*s</object>\n", (int)in, "");
	} else if (d->os_name[0]) {
		bool ib = iod_str_has_prefix(d->os_name, "mlx");
		w->rc |= iod_buf_printf(w->b, "%*s<object type=\"OSDev\" gp_index=\"%u\" name=\"",
		                        (int)in, "", w->gp++);
		esc(w, d->os_name);
		w->rc |= iod_buf_printf(w->b, "\" osdev_type=\"%d\"/>\n",
		                        ib                             ? 3
		                        : d->kind == IOD_TOPO_DEV_NVME ? 0
		                                                       : 2);
	}
	w->rc |= iod_buf_printf(w->b, "%*s</object>\n", (int)ind, "");
}

/* Highest bus number below a child (device or switch). */
static unsigned child_last_bus(const struct iod_topo_node *n, bool is_switch, unsigned idx)
{
	if (is_switch)
		return n->bridges[idx].bus_last;
	return (n->devices[idx].pci_addr >> 8) & 0xff;
}

static void bridge_children(struct xw *w, int parent, unsigned ind, unsigned depth);

/* One port (root or downstream) of `parent`, number k, leading to a child. */
static void port(struct xw *w, int parent, unsigned k, bool is_switch, unsigned idx, unsigned ind,
                 unsigned depth)
{
	const struct iod_topo_node *n = w->n;
	const struct iod_topo_bridge *p = &n->bridges[parent];
	uint32_t child_addr = is_switch ? n->bridges[idx].pci_addr : n->devices[idx].pci_addr;
	unsigned child_bus = (child_addr >> 8) & 0xff;
	pci_bridge_open(w, ind, IOD_TOPO_PCI_ADDR(p->pci_domain, p->bus_first, k & 0x1f, 0),
	                child_bus, child_last_bus(n, is_switch, idx), depth);
	if (is_switch) {
		const struct iod_topo_bridge *s = &n->bridges[idx];
		pci_bridge_open(w, ind + 2, s->pci_addr, s->bus_first, s->bus_last, depth + 1);
		bridge_children(w, (int)idx, ind + 4, depth + 2);
		w->rc |= iod_buf_printf(w->b, "%*s</object>\n", (int)ind + 2, "");
	} else
		device(w, idx, ind + 2);
	w->rc |= iod_buf_printf(w->b, "%*s</object>\n", (int)ind, "");
}

static void bridge_children(struct xw *w, int parent, unsigned ind, unsigned depth)
{
	const struct iod_topo_node *n = w->n;
	unsigned k = 0;
	if (depth > 2 * IOD_TOPO_PCI_DEPTH_MAX)
		return;
	for (unsigned i = 0; i < n->ndevices; i++)
		if (n->devices[i].bridge == parent)
			port(w, parent, k++, false, i, ind, depth);
	for (unsigned s = 0; s < n->nbridges; s++)
		if (n->bridges[s].kind == IOD_TOPO_BRIDGE_SWITCH && n->bridges[s].parent == parent)
			port(w, parent, k++, true, s, ind, depth);
}

static void host_bridge(struct xw *w, unsigned h, unsigned ind)
{
	const struct iod_topo_bridge *b = &w->n->bridges[h];
	w->rc |= iod_buf_printf(w->b,
	                        "%*s<object type=\"Bridge\" gp_index=\"%u\" bridge_type=\"0-1\" "
	                        "depth=\"0\" bridge_pci=\"%04x:[%02x-%02x]\">\n",
	                        (int)ind, "", w->gp++, b->pci_domain, b->bus_first, b->bus_last);
	bridge_children(w, (int)h, ind + 2, 1);
	w->rc |= iod_buf_printf(w->b, "%*s</object>\n", (int)ind, "");
}

/* ---- CPUs: caches and per-NUMA groups nested by their cpusets ------------ */

/* A normal object to place in the CPU tree: a cache, or a Group holding
 * one NUMA node (packages with several NUMA nodes: SNC, NPS). */
struct item {
	bool group;                      /* Group of NUMA node idx, else cache idx */
	unsigned idx;                    /* index into caches or numa */
	const struct iod_bitmap *cpuset; /* its PUs */
	bool done;                       /* written */
};

static void numa_node(struct xw *w, unsigned m, unsigned ind)
{
	const struct iod_topo_numa *nm = &w->n->numa[m];
	char cs[512], ns[128];
	set_str(&nm->cpuset, cs, sizeof(cs));
	hwloc_bitmap_t h = hwloc_bitmap_alloc();
	hwloc_bitmap_set(h, nm->os_index);
	hwloc_bitmap_snprintf(ns, sizeof(ns), h);
	hwloc_bitmap_free(h);
	w->rc |= iod_buf_printf(w->b,
	                        "%*s<object type=\"NUMANode\" os_index=\"%u\" cpuset=\"%s\" "
	                        "complete_cpuset=\"%s\" nodeset=\"%s\" complete_nodeset=\"%s\" "
	                        "gp_index=\"%u\" local_memory=\"%llu\"/>\n",
	                        (int)ind, "", nm->os_index, cs, cs, ns, ns, w->gp++,
	                        (unsigned long long)nm->mem_bytes);
}

/* a lies inside b (a cache holds a group of the same PUs) */
static bool inside(const struct item *a, const struct item *b)
{
	if (!iod_bitmap_subset(a->cpuset, b->cpuset))
		return false;
	return !iod_bitmap_equal(a->cpuset, b->cpuset) || (a->group && !b->group);
}

/* Write the items directly inside `parent` (-1: the package), then the
 * cores of the scope no item covers. */
static void scope(struct xw *w, const struct iod_bitmap *cpus, struct item *items, unsigned k,
                  int parent, unsigned ind)
{
	struct iod_bitmap rest = *cpus;
	char cs[512], ns[128];
	if (ind > 64)
		return;
	for (unsigned i = 0; i < k; i++) {
		struct item *it = &items[i];
		if (it->done || (int)i == parent || (parent >= 0 && !inside(it, &items[parent])))
			continue;
		bool top = true; /* no other pending item between parent and it */
		for (unsigned j = 0; j < k && top; j++)
			if (j != i && (int)j != parent && !items[j].done && inside(it, &items[j]) &&
			    (parent < 0 || inside(&items[j], &items[parent])))
				top = false;
		if (!top)
			continue;
		it->done = true;
		set_str(it->cpuset, cs, sizeof(cs));
		node_str(w->n, it->cpuset, ns, sizeof(ns));
		if (it->group) {
			w->rc |= iod_buf_printf(
			    w->b,
			    "%*s<object type=\"Group\" cpuset=\"%s\" complete_cpuset=\"%s\" "
			    "nodeset=\"%s\" complete_nodeset=\"%s\" gp_index=\"%u\" "
			    "kind=\"1000\">\n",
			    (int)ind, "", cs, cs, ns, ns, w->gp++);
			numa_node(w, it->idx, ind + 2);
		} else {
			const struct iod_topo_cache *ca = &w->n->caches[it->idx];
			w->rc |= iod_buf_printf(
			    w->b,
			    "%*s<object type=\"L%uCache\" cpuset=\"%s\" "
			    "complete_cpuset=\"%s\" nodeset=\"%s\" complete_nodeset=\"%s\" "
			    "gp_index=\"%u\" "
			    "cache_size=\"%llu\" depth=\"%u\" cache_linesize=\"64\" "
			    "cache_associativity=\"0\" cache_type=\"0\">\n",
			    (int)ind, "", ca->level, cs, cs, ns, ns, w->gp++,
			    (unsigned long long)ca->size_bytes, ca->level);
		}
		scope(w, it->cpuset, items, k, (int)i, ind + 2);
		if (it->group)
			for (unsigned h = 0; h < w->n->nbridges; h++)
				if (w->n->bridges[h].kind == IOD_TOPO_BRIDGE_HOST &&
				    w->n->bridges[h].numa == (int)it->idx)
					host_bridge(w, h, ind + 2);
		w->rc |= iod_buf_printf(w->b, "%*s</object>\n", (int)ind, "");
		iod_bitmap_andnot(&rest, it->cpuset);
	}
	cores(w, &rest, ind);
}

/* ---- the document ---------------------------------------------------------- */

static void objects(struct xw *w)
{
	const struct iod_topo_node *n = w->n;
	char cs[512], ns[128];

	set_str(&n->cpuset, cs, sizeof(cs));
	node_str(n, &n->cpuset, ns, sizeof(ns));
	w->rc |= iod_buf_printf(w->b,
	                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	                        "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
	                        "<topology version=\"2.0\">\n"
	                        "  <object type=\"Machine\" os_index=\"0\" cpuset=\"%s\" "
	                        "complete_cpuset=\"%s\" allowed_cpuset=\"%s\" nodeset=\"%s\" "
	                        "complete_nodeset=\"%s\" allowed_nodeset=\"%s\" gp_index=\"%u\">\n",
	                        cs, cs, cs, ns, ns, ns, w->gp++);
	info_s(w, 4, "iodName", n->name);
	info_s(w, 4, "iodModel", n->model);
	if (n->is_dpu) {
		info_s(w, 4, "iodDPU", "1");
		info_s(w, 4, "DMIProductName", "BlueField-3 DPU");
	}
	/* NUMA nodes under no package (KNL's MCDRAM at the root, machines
	 * without Package objects, hwloc 1.x files): memory children of the
	 * Machine */
	for (unsigned m = 0; m < n->nnuma; m++)
		if (n->numa[m].package < 0)
			numa_node(w, m, 4);
	/* siblings in the order of their first PU, as hwloc sorts them (with
	 * offline CPUs the package order is not the PU order) */
	unsigned order[IOD_TOPO_PACKAGES_MAX];
	for (unsigned p = 0; p < n->npackages; p++) {
		unsigned j = p;
		int first = iod_bitmap_next(&n->packages[p].cpuset, 0);
		while (j > 0 && iod_bitmap_next(&n->packages[order[j - 1]].cpuset, 0) > first) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = p;
	}
	struct iod_bitmap loose = n->cpuset; /* PUs in no package */
	for (unsigned q = 0; q < n->npackages; q++) {
		unsigned p = order[q];
		const struct iod_topo_package *pk = &n->packages[p];
		iod_bitmap_andnot(&loose, &pk->cpuset);
		set_str(&pk->cpuset, cs, sizeof(cs));
		node_str(n, &pk->cpuset, ns, sizeof(ns));
		w->rc |=
		    iod_buf_printf(w->b,
		                   "    <object type=\"Package\" os_index=\"%u\" cpuset=\"%s\" "
		                   "complete_cpuset=\"%s\" nodeset=\"%s\" complete_nodeset=\"%s\" "
		                   "gp_index=\"%u\">\n",
		                   pk->os_index, cs, cs, ns, ns, w->gp++);
		info_s(w, 6, "CPUModel", pk->model);
		struct item items[IOD_TOPO_CACHES_MAX + IOD_TOPO_NUMA_MAX];
		unsigned nitems = 0, numas = 0;
		for (unsigned m = 0; m < n->nnuma; m++)
			numas += n->numa[m].package == (int)p;
		for (unsigned c = 0; c < n->ncaches; c++)
			if (iod_bitmap_subset(&n->caches[c].cpuset, &pk->cpuset))
				items[nitems++] =
				    (struct item){false, c, &n->caches[c].cpuset, false};
		for (unsigned m = 0; numas > 1 && m < n->nnuma; m++)
			if (n->numa[m].package == (int)p)
				items[nitems++] = (struct item){true, m, &n->numa[m].cpuset, false};
		for (unsigned i = 1; i < nitems; i++) { /* first-PU order, stable */
			struct item t = items[i];
			int first = iod_bitmap_next(t.cpuset, 0);
			unsigned j = i;
			while (j > 0 && iod_bitmap_next(items[j - 1].cpuset, 0) > first) {
				items[j] = items[j - 1];
				j--;
			}
			items[j] = t;
		}
		if (numas <= 1) /* one NUMA node: it and the bridges hang off the package */
			for (unsigned m = 0; m < n->nnuma; m++)
				if (n->numa[m].package == (int)p)
					numa_node(w, m, 6);
		scope(w, &pk->cpuset, items, nitems, -1, 6);
		if (numas <= 1)
			for (unsigned h = 0; h < n->nbridges; h++)
				if (n->bridges[h].kind == IOD_TOPO_BRIDGE_HOST &&
				    n->bridges[h].package == (int)p)
					host_bridge(w, h, 6);
		w->rc |= iod_buf_printf(w->b, "    </object>\n");
	}
	cores(w, &loose, 4); /* no Package objects (POWER, hwloc 1.x files) */
	for (unsigned h = 0; h < n->nbridges; h++)
		if (n->bridges[h].kind == IOD_TOPO_BRIDGE_HOST && n->bridges[h].package < 0)
			host_bridge(w, h, 4);
	/* NVSwitch: a PCI endpoint of the NVLink matrix, on a root complex of
	 * its own (loaders that model only GPUs/NICs drop it) */
	bool nvswitch = false;
	for (unsigned a = 0; a < n->ndevices && !nvswitch; a++)
		for (unsigned b = 0; b < n->ndevices; b++)
			nvswitch |= n->link[a][b].nvswitch != 0;
	if (nvswitch)
		w->rc |= iod_buf_printf(
		    w->b,
		    "    <object type=\"Bridge\" gp_index=\"%u\" bridge_type=\"0-1\" depth=\"0\" "
		    "bridge_pci=\"00ff:[00-00]\">\n"
		    "      <object type=\"PCIDev\" gp_index=\"%u\" subtype=\"NVSwitch\" "
		    "pci_busid=\"00ff:00:00.0\" pci_type=\"0680 [10de:22a3] [10de:0000] 01\" "
		    "pci_link_speed=\"0.000000\"/>\n"
		    "    </object>\n",
		    w->gp, w->gp + 1);
	w->gp += 2;
	w->rc |= iod_buf_printf(w->b, "  </object>\n</topology>\n");
}

static hwloc_obj_t find_osdev(hwloc_topology_t t, const char *name)
{
	for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o; o = hwloc_get_next_osdev(t, o))
		if (o->name && !strcmp(o->name, name))
			return o;
	return NULL;
}

static int add_nvlinks(const struct iod_topo_node *n, hwloc_topology_t t)
{
	hwloc_obj_t objs[IOD_TOPO_GPUS_MAX + 1];
	hwloc_uint64_t vals[(IOD_TOPO_GPUS_MAX + 1) * (IOD_TOPO_GPUS_MAX + 1)];
	unsigned ng = n->ngpus, nobj = ng;
	bool any = false, sw = false;
	char name[32];

	for (unsigned g = 0; g < ng; g++) {
		snprintf(name, sizeof(name), "nvml%u", g);
		objs[g] = find_osdev(t, name);
		if (!objs[g])
			return -ENOENT;
	}
	for (unsigned a = 0; a < ng; a++)
		for (unsigned b = 0; b < ng; b++) {
			const struct iod_topo_link *l = &n->link[n->gpu[a]][n->gpu[b]];
			any |= l->nvlinks != 0;
			sw |= l->nvswitch != 0;
		}
	if (!any)
		return 0;
	if (sw) {
		hwloc_obj_t o = NULL;
		while ((o = hwloc_get_next_pcidev(t, o)))
			if (o->attr->pcidev.vendor_id == IOD_PCI_VENDOR_NVIDIA &&
			    o->attr->pcidev.class_id == 0x0680)
				break;
		if (!o)
			return -ENOENT;
		objs[nobj++] = o;
	}
	memset(vals, 0, sizeof(vals));
	for (unsigned a = 0; a < ng; a++) {
		const struct iod_topo_device *da = &n->devices[n->gpu[a]];
		uint64_t per = da->nvlink_bps == 20000000000ull * 8 ? 20000 : 25000;
		vals[a * nobj + a] = 1000000; /* hwloc's NVML backend puts 1 TB/s on the diagonal */
		for (unsigned b = 0; b < ng; b++) {
			const struct iod_topo_link *l = &n->link[n->gpu[a]][n->gpu[b]];
			if (a != b && l->nvlinks && !l->nvswitch)
				vals[a * nobj + b] = per * l->nvlinks;
		}
		if (sw) {
			unsigned most = 0;
			for (unsigned b = 0; b < ng; b++)
				if (n->link[n->gpu[a]][n->gpu[b]].nvswitch)
					most = IOD_MAX(most, n->link[n->gpu[a]][n->gpu[b]].nvlinks);
			vals[a * nobj + ng] = vals[ng * nobj + a] = per * most;
		}
	}
	if (sw)
		vals[ng * nobj + ng] = 1000000;
	hwloc_distances_add_handle_t h = hwloc_distances_add_create(
	    t, "NVLinkBandwidth",
	    HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH, 0);
	if (!h)
		return -ENOMEM;
	if (hwloc_distances_add_values(t, h, nobj, objs, vals, 0) < 0 ||
	    hwloc_distances_add_commit(t, h, 0) < 0)
		return -EINVAL;
	return 0;
}

int iod_topo_format_xml(const struct iod_topo_node *n, struct iod_buf *out)
{
	struct iod_buf raw;
	struct xw w = {n, &raw, 1, 0};
	hwloc_topology_t t;
	char *xml = NULL;
	int len = 0, rc;

	iod_buf_init(&raw);
	objects(&w);
	if (w.rc) {
		iod_buf_free(&raw);
		return -ENOMEM;
	}
	if (hwloc_topology_init(&t) < 0) {
		iod_buf_free(&raw);
		return -ENOMEM;
	}
	hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
	rc = hwloc_topology_set_xmlbuffer(t, raw.data, (int)raw.len);
	if (rc == 0)
		rc = hwloc_topology_load(t) < 0 ? -EINVAL : 0;
	if (rc == 0)
		rc = add_nvlinks(n, t);
	if (rc == 0 && hwloc_topology_export_xmlbuffer(t, &xml, &len, 0) < 0)
		rc = -EIO;
	if (rc == 0)
		rc = iod_buf_append(out, xml, (size_t)(len > 0 ? len - 1 : 0));
	if (xml)
		hwloc_free_xmlbuffer(t, xml);
	hwloc_topology_destroy(t);
	iod_buf_free(&raw);
	return rc;
}
