/*
 * format.c: a node's topology for people and programs: the `nvidia-smi
 * topo -m` matrix, an lstopo-like text summary, Graphviz DOT, and JSON.
 *
 * Output only: reads a finalized node, appends to an iod_buf or builds a
 * jansson value; never prints, never changes the node. Output is a function
 * of the node alone (no time, no host state), so tests can compare it.
 */
#include "internal.h"

#include <string.h>

static const char *const compute_names[] = {
#define X(n, s) s,
    IOD_COMPUTE_TYPES(X)
#undef X
};

static const char *compute_name(enum iod_compute_type t)
{
	return (unsigned)t < IOD_ARRAY_LEN(compute_names) ? compute_names[t] : "?";
}

/* Devices in the matrix: GPUs, then NICs/DPUs (finalize sorted them so). */
static unsigned matrix_devices(const struct iod_topo_node *n, uint8_t *idx)
{
	unsigned k = 0;
	for (unsigned g = 0; g < n->ngpus; g++)
		idx[k++] = (uint8_t)n->gpu[g];
	for (unsigned i = 0; i < n->nnics; i++)
		idx[k++] = (uint8_t)n->nic[i];
	return k;
}

int iod_topo_format_matrix(const struct iod_topo_node *n, struct iod_buf *out)
{
	uint8_t idx[IOD_TOPO_DEVICES_MAX];
	unsigned k = matrix_devices(n, idx);
	char cell[16], cpus[1024];
	int rc = 0;

	if (k == 0)
		return iod_buf_printf(out, "no GPU or NIC in this topology\n");
	for (unsigned i = 0; i < k; i++)
		rc |= iod_buf_printf(out, "\t%s", n->devices[idx[i]].name);
	rc |= iod_buf_printf(out, "\tCPU Affinity\tNUMA Affinity\n");
	for (unsigned i = 0; i < k; i++) {
		const struct iod_topo_device *d = &n->devices[idx[i]];
		rc |= iod_buf_printf(out, "%s", d->name);
		for (unsigned j = 0; j < k; j++) {
			iod_topo_link_label(n, idx[i], idx[j], cell, sizeof(cell));
			rc |= iod_buf_printf(out, "\t%s", cell);
		}
		if (d->kind == IOD_TOPO_DEV_GPU) {
			iod_bitmap_format(&d->cpuset, cpus, sizeof(cpus));
			if (d->numa >= 0)
				rc |= iod_buf_printf(out, "\t%s\t%u", cpus,
				                     n->numa[d->numa].os_index);
			else
				rc |= iod_buf_printf(out, "\t%s\tN/A", cpus);
		}
		rc |= iod_buf_printf(out, "\n");
	}
	rc |= iod_buf_printf(
	    out, "\nLegend:\n\n"
	         "  X    = Self\n"
	         "  SYS  = Connection traversing PCIe as well as the SMP interconnect between "
	         "NUMA nodes (e.g., QPI/UPI)\n"
	         "  NODE = Connection traversing PCIe as well as the interconnect between PCIe "
	         "Host Bridges within a NUMA node\n"
	         "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically "
	         "the CPU)\n"
	         "  PXB  = Connection traversing multiple PCIe bridges (without traversing the "
	         "PCIe Host Bridge)\n"
	         "  PIX  = Connection traversing at most a single PCIe bridge\n"
	         "  NV#  = Connection traversing a bonded set of # NVLinks\n");
	if (n->nnics) {
		rc |= iod_buf_printf(out, "\nNIC Legend:\n\n");
		for (unsigned i = 0; i < n->nnics; i++) {
			const struct iod_topo_device *d = &n->devices[n->nic[i]];
			rc |= iod_buf_printf(out, "  %s: %s\n", d->name,
			                     d->os_name[0] ? d->os_name : d->model);
		}
	}
	return rc ? -ENOMEM : 0;
}

static void fmt_size(uint64_t bytes, char *buf, size_t len)
{
	/* binary units read best for memory sizes: "80 GiB" */
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	unsigned u = 0;
	if (bytes % 1024) { /* a decimal figure such as "105 MB" */
		iod_format_size(bytes, buf, len);
		return;
	}
	while (u + 1 < IOD_ARRAY_LEN(unit) && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	if (u + 1 < IOD_ARRAY_LEN(unit) && bytes >= 10240) {
		snprintf(buf, len, "%.1f %s", (double)bytes / 1024, unit[u + 1]);
		return;
	}
	snprintf(buf, len, "%llu %s", (unsigned long long)bytes, unit[u]);
}

static int text_device(const struct iod_topo_node *n, const struct iod_topo_device *d,
                       struct iod_buf *out, unsigned indent)
{
	char pci[24], mem[32], bw[32];
	iod_topo_pci_format(d->pci_addr, pci, sizeof(pci));
	int rc = iod_buf_printf(out, "%*s%s %s %s", (int)indent, "", d->name, pci,
	                        d->model[0] ? d->model : iod_topo_dev_kind_name(d->kind));
	if (d->os_name[0])
		rc |= iod_buf_printf(out, " (%s)", d->os_name);
	if (d->mem_bytes) {
		fmt_size(d->mem_bytes, mem, sizeof(mem));
		rc |= iod_buf_printf(out, ", %s", mem);
	}
	if (d->kind == IOD_TOPO_DEV_GPU && d->nvlinks)
		rc |= iod_buf_printf(out, ", %u NVLinks", d->nvlinks);
	if (d->ports && d->port_bps) {
		iod_format_bandwidth(d->port_bps, bw, sizeof(bw));
		rc |= iod_buf_printf(out, ", %u x %s", d->ports, bw);
	}
	if (d->kind == IOD_TOPO_DEV_DPU && d->cores)
		rc |= iod_buf_printf(out, ", %u Arm cores", d->cores);
	if (d->pcie_gen)
		rc |= iod_buf_printf(out, ", PCIe Gen%u x%u", d->pcie_gen, d->pcie_width);
	if (d->unit >= 0)
		rc |= iod_buf_printf(out, " [%s]", compute_name(n->units[d->unit].type));
	return rc | iod_buf_printf(out, "\n");
}

static int text_bridge(const struct iod_topo_node *n, int b, struct iod_buf *out, unsigned indent)
{
	const struct iod_topo_bridge *br = &n->bridges[b];
	char pci[24];
	int rc;

	if (br->kind == IOD_TOPO_BRIDGE_HOST)
		rc = iod_buf_printf(out, "%*sHostBridge %04x:[%02x-%02x]\n", (int)indent, "",
		                    br->pci_domain, br->bus_first, br->bus_last);
	else {
		iod_topo_pci_format(br->pci_addr, pci, sizeof(pci));
		rc = iod_buf_printf(out, "%*sPCIeSwitch %s\n", (int)indent, "", pci);
	}
	if (indent > 2 * IOD_TOPO_PCI_DEPTH_MAX + 8)
		return rc;
	for (unsigned i = 0; i < n->ndevices; i++)
		if (n->devices[i].bridge == b)
			rc |= text_device(n, &n->devices[i], out, indent + 2);
	for (unsigned s = 0; s < n->nbridges; s++)
		if (n->bridges[s].kind == IOD_TOPO_BRIDGE_SWITCH && n->bridges[s].parent == b)
			rc |= text_bridge(n, (int)s, out, indent + 2);
	return rc;
}

int iod_topo_format_text(const struct iod_topo_node *n, struct iod_buf *out)
{
	char mem[32], cpus[1024];
	int rc;

	fmt_size(n->mem_bytes, mem, sizeof(mem));
	rc = iod_buf_printf(out,
	                    "Machine %s%s%s: %u packages, %u cores, %u PUs, %u NUMA nodes, %s%s\n",
	                    n->name, n->model[0] && strcmp(n->model, n->name) ? " model " : "",
	                    n->model[0] && strcmp(n->model, n->name) ? n->model : "", n->npackages,
	                    n->cores, n->pus, n->nnuma, mem, n->is_dpu ? " (a DPU)" : "");
	for (unsigned p = 0; p < n->npackages; p++) {
		const struct iod_topo_package *pk = &n->packages[p];
		iod_bitmap_format(&pk->cpuset, cpus, sizeof(cpus));
		rc |= iod_buf_printf(out, "  Package P#%u%s%s%s: %u cores, PUs %s\n", pk->os_index,
		                     pk->model[0] ? " \"" : "", pk->model, pk->model[0] ? "\"" : "",
		                     pk->cores, cpus);
		for (unsigned m = 0; m < n->nnuma; m++) {
			if (n->numa[m].package != (int)p)
				continue;
			fmt_size(n->numa[m].mem_bytes, mem, sizeof(mem));
			iod_bitmap_format(&n->numa[m].cpuset, cpus, sizeof(cpus));
			rc |= iod_buf_printf(out, "    NUMANode N#%u %s, PUs %s\n",
			                     n->numa[m].os_index, mem, cpus);
		}
		for (unsigned c = 0; c < n->ncaches; c++) {
			if (!iod_bitmap_subset(&n->caches[c].cpuset, &pk->cpuset))
				continue;
			fmt_size(n->caches[c].size_bytes, mem, sizeof(mem));
			iod_bitmap_format(&n->caches[c].cpuset, cpus, sizeof(cpus));
			rc |= iod_buf_printf(out, "    L%u %s, PUs %s\n", n->caches[c].level, mem,
			                     cpus);
		}
		for (unsigned b = 0; b < n->nbridges; b++)
			if (n->bridges[b].kind == IOD_TOPO_BRIDGE_HOST &&
			    n->bridges[b].package == (int)p)
				rc |= text_bridge(n, (int)b, out, 4);
	}
	for (unsigned m = 0; m < n->nnuma; m++) {
		if (n->numa[m].package >= 0)
			continue;
		fmt_size(n->numa[m].mem_bytes, mem, sizeof(mem));
		rc |= iod_buf_printf(out, "  NUMANode N#%u %s (no package)\n", n->numa[m].os_index,
		                     mem);
	}
	for (unsigned b = 0; b < n->nbridges; b++)
		if (n->bridges[b].kind == IOD_TOPO_BRIDGE_HOST && n->bridges[b].package < 0)
			rc |= text_bridge(n, (int)b, out, 2);
	for (unsigned i = 0; i < n->ndevices; i++)
		if (n->devices[i].bridge < 0)
			rc |= text_device(n, &n->devices[i], out, 2);

	rc |= iod_buf_printf(out, "Compute units:\n");
	for (unsigned u = 0; u < n->nunits; u++) {
		const struct iod_topo_unit *un = &n->units[u];
		fmt_size(un->cap.mem_bytes, mem, sizeof(mem));
		rc |= iod_buf_printf(out, "  %-11s %-6s count %u", compute_name(un->type),
		                     un->device >= 0 ? n->devices[un->device].name : "CPU",
		                     un->cap.count);
		if (un->cap.cores)
			rc |= iod_buf_printf(out, ", %u cores", un->cap.cores);
		if (un->cap.mem_bytes)
			rc |= iod_buf_printf(out, ", %s", mem);
		if (un->numa >= 0)
			rc |= iod_buf_printf(out, ", NUMA %u", n->numa[un->numa].os_index);
		rc |= iod_buf_printf(out, "\n");
	}
	if (n->ngpus) {
		struct iod_bitmap all, isl[IOD_TOPO_GPUS_MAX];
		iod_bitmap_zero(&all);
		iod_bitmap_set_range(&all, 0, n->ngpus - 1u);
		unsigned k = iod_topo_nvlink_islands(n, &all, isl, IOD_TOPO_GPUS_MAX);
		rc |= iod_buf_printf(out, "NVLink islands: %u", k);
		for (unsigned i = 0; i < k; i++) {
			iod_bitmap_format(&isl[i], cpus, sizeof(cpus));
			rc |= iod_buf_printf(out, " {GPU %s}", cpus);
		}
		rc |= iod_buf_printf(out, "\n");
	}
	return rc ? -ENOMEM : 0;
}

/* ---- DOT ---------------------------------------------------------------- */

static int dot_bw(uint64_t bps, char *buf, size_t len)
{
	/* GB/s per direction reads naturally for buses */
	return snprintf(buf, len, "%.0f GB/s", (double)bps / 8e9);
}

static int dot_bridge(const struct iod_topo_node *n, int b, struct iod_buf *out, unsigned depth)
{
	const struct iod_topo_bridge *br = &n->bridges[b];
	char pci[24];
	int rc;

	if (br->kind == IOD_TOPO_BRIDGE_HOST)
		snprintf(pci, sizeof(pci), "%04x:[%02x-%02x]", br->pci_domain, br->bus_first,
		         br->bus_last);
	else
		iod_topo_pci_format(br->pci_addr, pci, sizeof(pci));
	rc = iod_buf_printf(out, "%*ssubgraph cluster_br%d {\n%*s  label=\"%s %s\";\n",
	                    (int)depth * 2, "", b, (int)depth * 2, "",
	                    br->kind == IOD_TOPO_BRIDGE_HOST ? "HostBridge" : "PCIe switch", pci);
	rc |= iod_buf_printf(out, "%*s  br%d [label=\"%s\", shape=box, style=rounded];\n",
	                     (int)depth * 2, "", b,
	                     br->kind == IOD_TOPO_BRIDGE_HOST ? "root complex" : "switch");
	for (unsigned i = 0; i < n->ndevices; i++) {
		const struct iod_topo_device *d = &n->devices[i];
		if (d->bridge != b)
			continue;
		rc |= iod_buf_printf(
		    out, "%*s  dev%u [label=\"%s\\n%s\", shape=box%s];\n", (int)depth * 2, "", i,
		    d->name, d->model,
		    d->kind == IOD_TOPO_DEV_GPU   ? ", style=filled, fillcolor=palegreen"
		    : d->kind == IOD_TOPO_DEV_DPU ? ", style=filled, fillcolor=lightblue"
		                                  : "");
	}
	if (depth < IOD_TOPO_PCI_DEPTH_MAX)
		for (unsigned s = 0; s < n->nbridges; s++)
			if (n->bridges[s].kind == IOD_TOPO_BRIDGE_SWITCH &&
			    n->bridges[s].parent == b)
				rc |= dot_bridge(n, (int)s, out, depth + 1);
	return rc | iod_buf_printf(out, "%*s}\n", (int)depth * 2, "");
}

int iod_topo_format_dot(const struct iod_topo_node *n, struct iod_buf *out)
{
	char cpus[1024], bw[32];
	int rc = iod_buf_printf(out,
	                        "graph \"%s\" {\n  compound=true;\n  fontname=\"Helvetica\";\n"
	                        "  node [fontname=\"Helvetica\", fontsize=10];\n"
	                        "  edge [fontname=\"Helvetica\", fontsize=9];\n"
	                        "  label=\"%s\";\n",
	                        n->name, n->name);
	for (unsigned p = 0; p < n->npackages; p++) {
		const struct iod_topo_package *pk = &n->packages[p];
		iod_bitmap_format(&pk->cpuset, cpus, sizeof(cpus));
		rc |= iod_buf_printf(out,
		                     "  subgraph cluster_pkg%u {\n    label=\"Package %u\";\n"
		                     "    pkg%u [label=\"%s\\n%u cores, PUs %s\", shape=box];\n",
		                     p, pk->os_index, p, pk->model, pk->cores, cpus);
		for (unsigned b = 0; b < n->nbridges; b++)
			if (n->bridges[b].kind == IOD_TOPO_BRIDGE_HOST &&
			    n->bridges[b].package == (int)p)
				rc |= dot_bridge(n, (int)b, out, 2);
		rc |= iod_buf_printf(out, "  }\n");
	}
	for (unsigned b = 0; b < n->nbridges; b++)
		if (n->bridges[b].kind == IOD_TOPO_BRIDGE_HOST && n->bridges[b].package < 0)
			rc |= dot_bridge(n, (int)b, out, 1);
	for (unsigned i = 0; i < n->ndevices; i++)
		if (n->devices[i].bridge < 0)
			rc |= iod_buf_printf(out, "  dev%u [label=\"%s\\n%s\", shape=box];\n", i,
			                     n->devices[i].name, n->devices[i].model);
	/* the PCIe tree */
	for (unsigned b = 0; b < n->nbridges; b++) {
		const struct iod_topo_bridge *br = &n->bridges[b];
		if (br->kind == IOD_TOPO_BRIDGE_SWITCH)
			rc |= iod_buf_printf(out, "  br%d -- br%u [label=\"PCIe\"];\n", br->parent,
			                     b);
		else if (br->package >= 0)
			rc |= iod_buf_printf(out, "  pkg%d -- br%u;\n", br->package, b);
	}
	for (unsigned i = 0; i < n->ndevices; i++) {
		const struct iod_topo_device *d = &n->devices[i];
		if (d->bridge < 0)
			continue;
		dot_bw(d->pcie_bps, bw, sizeof(bw));
		if (d->pcie_gen)
			rc |= iod_buf_printf(out, "  br%d -- dev%u [label=\"Gen%u x%u %s\"];\n",
			                     d->bridge, i, d->pcie_gen, d->pcie_width, bw);
		else
			rc |= iod_buf_printf(out, "  br%d -- dev%u;\n", d->bridge, i);
	}
	/* NVLinks: direct ones pairwise; NVSwitch as one fabric node, each GPU
	 * joined to it by its switch links (28 pairwise edges say less) */
	bool fabric = false;
	for (unsigned a = 0; a < n->ndevices; a++) {
		unsigned via_switch = 0;
		for (unsigned b = 0; b < n->ndevices; b++) {
			const struct iod_topo_link *l = &n->link[a][b];
			if (l->nvlinks && l->nvswitch)
				via_switch = IOD_MAX(via_switch, l->nvlinks);
			if (b <= a || !l->nvlinks || l->nvswitch)
				continue;
			dot_bw(iod_topo_link_bw_bps(n, a, b), bw, sizeof(bw));
			rc |= iod_buf_printf(out,
			                     "  dev%u -- dev%u [label=\"NV%u %s\", color=green3, "
			                     "penwidth=2];\n",
			                     a, b, l->nvlinks, bw);
		}
		if (!via_switch)
			continue;
		if (!fabric)
			rc |= iod_buf_printf(out, "  nvswitch [label=\"NVSwitch\", shape=hexagon, "
			                          "style=filled, fillcolor=palegreen];\n");
		fabric = true;
		const struct iod_topo_device *d = &n->devices[a];
		dot_bw((d->nvlink_bps ? d->nvlink_bps : 25000000000ull * 8) * via_switch, bw,
		       sizeof(bw));
		rc |= iod_buf_printf(out,
		                     "  dev%u -- nvswitch [label=\"NV%u %s\", color=green3, "
		                     "penwidth=2];\n",
		                     a, via_switch, bw);
	}
	/* the socket interconnect */
	for (unsigned p = 1; p < n->npackages; p++)
		rc |= iod_buf_printf(out, "  pkg0 -- pkg%u [label=\"SYS\", style=dashed];\n", p);
	rc |= iod_buf_printf(out, "}\n");
	return rc ? -ENOMEM : 0;
}

/* ---- JSON --------------------------------------------------------------- */

static json_t *jset(const struct iod_bitmap *b)
{
	char buf[1024];
	iod_bitmap_format(b, buf, sizeof(buf));
	return json_string(buf);
}

static void put(json_t *o, const char *k, json_t *v)
{
	json_object_set_new(o, k, v);
}

json_t *iod_topo_to_json(const struct iod_topo_node *n)
{
	static const char *const sources[] = {"builder", "model", "xml", "host"};
	char pci[24], cell[16];
	json_t *o = json_object();
	if (!o)
		return NULL;
	put(o, "name", json_string(n->name));
	put(o, "model", json_string(n->model));
	put(o, "source", json_string(sources[n->source & 3]));
	put(o, "is_dpu", json_boolean(n->is_dpu));
	put(o, "cores", json_integer(n->cores));
	put(o, "pus", json_integer(n->pus));
	put(o, "mem_bytes", json_integer((json_int_t)n->mem_bytes));
	put(o, "cpuset", jset(&n->cpuset));
	put(o, "primary_pus", jset(&n->primary_pus));
	json_t *cores = json_array();
	for (int p = iod_bitmap_next(&n->primary_pus, 0); p >= 0;
	     p = iod_bitmap_next(&n->primary_pus, (unsigned)p + 1)) {
		struct iod_bitmap pus;
		iod_bitmap_zero(&pus);
		for (unsigned i = (unsigned)p; i < IOD_BITMAP_BITS; i++)
			if (n->pu_core[i] == n->pu_core[p])
				iod_bitmap_set(&pus, i);
		json_array_append_new(cores, jset(&pus));
	}
	put(o, "core_pus", cores);

	json_t *a = json_array();
	for (unsigned p = 0; p < n->npackages; p++) {
		json_t *x = json_object();
		put(x, "os_index", json_integer(n->packages[p].os_index));
		put(x, "model", json_string(n->packages[p].model));
		put(x, "cores", json_integer(n->packages[p].cores));
		put(x, "cpuset", jset(&n->packages[p].cpuset));
		json_array_append_new(a, x);
	}
	put(o, "packages", a);
	a = json_array();
	for (unsigned m = 0; m < n->nnuma; m++) {
		json_t *x = json_object();
		put(x, "os_index", json_integer(n->numa[m].os_index));
		put(x, "package", json_integer(n->numa[m].package));
		put(x, "mem_bytes", json_integer((json_int_t)n->numa[m].mem_bytes));
		put(x, "cpuset", jset(&n->numa[m].cpuset));
		json_array_append_new(a, x);
	}
	put(o, "numa", a);
	a = json_array();
	for (unsigned c = 0; c < n->ncaches; c++) {
		json_t *x = json_object();
		put(x, "level", json_integer(n->caches[c].level));
		put(x, "size_bytes", json_integer((json_int_t)n->caches[c].size_bytes));
		put(x, "cpuset", jset(&n->caches[c].cpuset));
		json_array_append_new(a, x);
	}
	put(o, "caches", a);
	a = json_array();
	for (unsigned b = 0; b < n->nbridges; b++) {
		const struct iod_topo_bridge *br = &n->bridges[b];
		json_t *x = json_object();
		put(x, "kind", json_string(br->kind == IOD_TOPO_BRIDGE_HOST ? "host" : "switch"));
		put(x, "parent", json_integer(br->parent));
		put(x, "numa", json_integer(br->numa));
		iod_topo_pci_format(br->pci_addr, pci, sizeof(pci));
		put(x, "pci", json_string(pci));
		put(x, "bus_first", json_integer(br->bus_first));
		put(x, "bus_last", json_integer(br->bus_last));
		json_array_append_new(a, x);
	}
	put(o, "bridges", a);
	a = json_array();
	for (unsigned i = 0; i < n->ndevices; i++) {
		const struct iod_topo_device *d = &n->devices[i];
		json_t *x = json_object();
		put(x, "name", json_string(d->name));
		put(x, "kind", json_string(iod_topo_dev_kind_name(d->kind)));
		put(x, "os_name", json_string(d->os_name));
		put(x, "vendor", json_string(d->vendor));
		put(x, "model", json_string(d->model));
		if (d->uuid[0])
			put(x, "uuid", json_string(d->uuid));
		iod_topo_pci_format(d->pci_addr, pci, sizeof(pci));
		put(x, "pci", json_string(pci));
		snprintf(cell, sizeof(cell), "%04x:%04x", d->pci_vendor, d->pci_device);
		put(x, "pci_id", json_string(cell));
		snprintf(cell, sizeof(cell), "%04x", d->pci_class);
		put(x, "pci_class", json_string(cell));
		put(x, "bridge", json_integer(d->bridge));
		put(x, "numa",
		    json_integer(d->numa >= 0 ? (json_int_t)n->numa[d->numa].os_index : -1));
		put(x, "cpuset", jset(&d->cpuset));
		put(x, "mem_bytes", json_integer((json_int_t)d->mem_bytes));
		put(x, "pcie_gen", json_integer(d->pcie_gen));
		put(x, "pcie_width", json_integer(d->pcie_width));
		put(x, "pcie_bps", json_integer((json_int_t)d->pcie_bps));
		/* one schema for every kind: cores are a GPU's SMs, a DPU's Arm cores */
		put(x, "cores", json_integer(d->cores));
		put(x, "nvlinks", json_integer(d->nvlinks));
		put(x, "nvlink_bps", json_integer((json_int_t)d->nvlink_bps));
		put(x, "tensor_cores", json_boolean(d->tensor_cores));
		put(x, "tflops", json_integer(d->tflops));
		put(x, "ports", json_integer(d->ports));
		put(x, "port_bps", json_integer((json_int_t)d->port_bps));
		put(x, "board", json_integer(d->board));
		if (d->kind == IOD_TOPO_DEV_GPU) {
			put(x, "gpu_index", json_integer(d->gpu_index));
			put(x, "nvlink_island", json_integer(n->gpu_island[d->gpu_index]));
		}
		json_t *links = json_object();
		for (unsigned j = 0; j < n->ndevices; j++) {
			if (j == i)
				continue;
			json_t *l = json_object();
			iod_topo_link_label(n, i, j, cell, sizeof(cell));
			put(l, "class", json_string(cell));
			put(l, "pcie", json_string(iod_topo_link_class_name(n->link[i][j].pcie)));
			put(l, "nvlinks", json_integer(n->link[i][j].nvlinks));
			if (n->link[i][j].nvswitch)
				put(l, "nvswitch", json_true());
			put(l, "bw_bps", json_integer((json_int_t)iod_topo_link_bw_bps(n, i, j)));
			put(l, "latency_ns",
			    json_integer((json_int_t)iod_topo_link_latency_ns(n, i, j)));
			json_object_set_new(links, n->devices[j].name, l);
		}
		put(x, "links", links);
		json_array_append_new(a, x);
	}
	put(o, "devices", a);
	a = json_array();
	for (unsigned u = 0; u < n->nunits; u++) {
		const struct iod_topo_unit *un = &n->units[u];
		json_t *x = json_object();
		put(x, "type", json_string(compute_name(un->type)));
		put(x, "device",
		    json_string(un->device >= 0 ? n->devices[un->device].name : "CPU"));
		put(x, "numa",
		    json_integer(un->numa >= 0 ? (json_int_t)n->numa[un->numa].os_index : -1));
		json_t *cap = json_object();
		put(cap, "count", json_integer(un->cap.count));
		put(cap, "cores", json_integer(un->cap.cores));
		put(cap, "mem_bytes", json_integer((json_int_t)un->cap.mem_bytes));
		put(cap, "net_bps", json_integer((json_int_t)un->cap.net_bps));
		put(cap, "tflops", json_integer(un->cap.tflops));
		put(x, "capacity", cap);
		json_array_append_new(a, x);
	}
	put(o, "units", a);
	a = json_array();
	for (unsigned i = 0; i < n->nislands; i++) {
		json_t *x = json_array();
		for (unsigned g = 0; g < n->ngpus; g++)
			if (n->gpu_island[g] == i)
				json_array_append_new(x, json_integer(g));
		json_array_append_new(a, x);
	}
	put(o, "nvlink_islands", a);
	return o;
}
