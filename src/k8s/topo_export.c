/*
 * topo_export.c: the cluster's topology for other schedulers (pure):
 * Topograph-style Kubernetes node labels and Slurm's topology.yaml.
 *
 * iod's cluster topology is node -> rack -> zone (the scheduler's failure
 * domains) with each node's hardware from topo/. A rack is the leaf switch
 * its nodes hang off, a zone the spine tier above its racks, and a core
 * joins several zones. NVLink domains are within a node in every model iod
 * has (no multi-node NVLink), so the accelerator label names the node's own
 * domain and Slurm's blocks are racks. docs/kubernetes.md.
 */
#include "iod/k8s.h"

#include <ctype.h>

#include <stdlib.h>
#include <string.h>

/* A label value Kubernetes takes: [A-Za-z0-9._-], alphanumeric at both
 * ends, at most 63 bytes; anything else becomes '-'. */
static void label_value(const char *s, char *buf, size_t len)
{
	size_t n = 0;
	for (; *s && n + 1 < len && n < 63; s++) {
		char c = *s;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		buf[n++] = ok ? c : '-';
	}
	while (n && (buf[n - 1] == '.' || buf[n - 1] == '_' || buf[n - 1] == '-'))
		n--;
	buf[n] = 0;
}

/* The largest NVLink island's GPUs; *multi: islands of 2 or more GPUs. */
static uint32_t largest_island(const struct iod_topo_node *t, uint32_t *multi)
{
	uint32_t best = 0;
	*multi = 0;
	for (uint32_t i = 0; i < t->nislands; i++) {
		uint32_t k = 0;
		for (uint32_t g = 0; g < t->ngpus; g++)
			k += t->gpu_island[g] == i;
		best = IOD_MAX(best, k);
		*multi += k >= 2;
	}
	return best;
}

static uint32_t zones_of(const struct iod_k8s_node *nodes, uint32_t n)
{
	uint32_t z = 0;
	for (uint32_t i = 0; i < n; i++) {
		bool seen = false;
		for (uint32_t j = 0; j < i && !seen; j++)
			seen = !strcmp(nodes[j].zone, nodes[i].zone);
		z += !seen;
	}
	return z;
}

static void set_label(json_t *o, const char *key, const char *value)
{
	char v[64];
	label_value(value, v, sizeof(v));
	if (v[0])
		json_object_set_new(o, key, json_string(v));
}

static void set_count(json_t *o, const char *key, uint32_t value)
{
	char v[16];
	snprintf(v, sizeof(v), "%u", value);
	json_object_set_new(o, key, json_string(v));
}

json_t *iod_k8s_labels(const struct iod_k8s_node *nodes, uint32_t n)
{
	json_t *all = json_object();
	bool core = zones_of(nodes, n) > 1;
	for (uint32_t i = 0; i < n; i++) {
		const struct iod_k8s_node *x = &nodes[i];
		const struct iod_topo_node *t = x->topo;
		json_t *o = json_object();
		char dom[IOD_NAME_MAX + 8];
		uint32_t multi, island = largest_island(t, &multi);
		if (island >= 2) { /* an NVLink domain: this node's own */
			snprintf(dom, sizeof(dom), "%s.nvl", x->name);
			set_label(o, IOD_K8S_LABEL_ACCEL, dom);
		}
		set_label(o, IOD_K8S_LABEL_LEAF, x->rack);
		set_label(o, IOD_K8S_LABEL_SPINE, x->zone);
		if (core)
			set_label(o, IOD_K8S_LABEL_CORE, "core");
		set_count(o, "iod.dev/gpu.count", t->ngpus);
		set_count(o, "iod.dev/gpu.nvlink-islands", multi);
		set_count(o, "iod.dev/gpu.nvlink-largest", island);
		set_count(o, "iod.dev/numa.count", t->nnuma);
		set_count(o, "iod.dev/nic.count", t->nnics);
		if (t->model[0])
			set_label(o, "iod.dev/model", t->model);
		json_object_set_new(all, x->name, o);
	}
	return all;
}

/* name = prefix + decimal suffix; *width 0 when it has no digits. */
static void split(const char *s, size_t *plen, unsigned long *num, size_t *width)
{
	size_t l = strlen(s), d = l;
	while (d > 0 && s[d - 1] >= '0' && s[d - 1] <= '9')
		d--;
	*plen = d;
	*width = l - d > 9 ? 0 : l - d; /* a longer number is kept as text */
	*num = *width ? strtoul(s + d, NULL, 10) : 0;
	if (!*width)
		*plen = l;
}

static unsigned long suffix_of(const char *s)
{
	size_t p, w;
	unsigned long v;
	split(s, &p, &v, &w);
	return v;
}

/* One run of names that share a prefix and width: "p[a-b,c]" or the name. */
static int hostlist_group(const char *const *names, uint32_t from, uint32_t to, struct iod_buf *out)
{
	size_t plen, w;
	unsigned long first, prev = 0;
	split(names[from], &plen, &first, &w);
	if (to - from == 1 || !w)
		return iod_buf_printf(out, "%s", names[from]);
	int rc = iod_buf_printf(out, "%.*s[", (int)plen, names[from]);
	for (uint32_t i = from; i < to && !rc; i++) {
		size_t pl, wi;
		unsigned long v;
		split(names[i], &pl, &v, &wi);
		bool run_end = i + 1 == to || suffix_of(names[i + 1]) != v + 1;
		bool run_start = i == from || prev + 1 != v;
		if (run_start)
			rc = iod_buf_printf(out, "%s%0*lu", i == from ? "" : ",", (int)w, v);
		if (!rc && run_end && !run_start)
			rc = iod_buf_printf(out, "-%0*lu", (int)w, v);
		prev = v;
	}
	return rc ? rc : iod_buf_printf(out, "]");
}

int iod_slurm_hostlist(const char *const *names, uint32_t n, struct iod_buf *out)
{
	uint32_t i = 0;
	int rc = 0;
	while (i < n && !rc) {
		size_t p0, w0;
		unsigned long v0;
		split(names[i], &p0, &v0, &w0);
		uint32_t j = i + 1;
		for (; w0 && j < n; j++) {
			size_t p, w;
			unsigned long v;
			split(names[j], &p, &v, &w);
			if (w != w0 || p != p0 || strncmp(names[j], names[i], p0))
				break;
		}
		if (i)
			rc = iod_buf_append(out, ",", 1);
		if (!rc)
			rc = hostlist_group(names, i, j, out);
		i = j;
	}
	return rc;
}

/* The distinct values of field (rack or zone) in order of first use, and
 * for each its first node's index. */
static uint32_t distinct(const struct iod_k8s_node *nodes, uint32_t n, bool zone, uint32_t *first)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		const char *v = zone ? nodes[i].zone : nodes[i].rack;
		bool seen = false;
		for (uint32_t j = 0; j < k && !seen; j++)
			seen = !strcmp(zone ? nodes[first[j]].zone : nodes[first[j]].rack, v);
		if (!seen)
			first[k++] = i;
	}
	return k;
}

/* Slurm names: no space, comma, brackets, '#' or ':' (its hostlist and
 * YAML would split them). */
static bool slurm_name_ok(const char *s)
{
	if (!s[0])
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || strchr(",[]#:'\"{}", *s))
			return false;
	return true;
}

/* "nodes: <hostlist>" of the nodes whose rack (or zone's racks) is v. */
static int member_list(const struct iod_k8s_node *nodes, uint32_t n, const char *rack,
                       const char **tmp, struct iod_buf *out)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(nodes[i].rack, rack))
			tmp[k++] = nodes[i].name;
	return iod_slurm_hostlist(tmp, k, out);
}

static int tree(const struct iod_k8s_node *nodes, uint32_t n, const uint32_t *racks, uint32_t nr,
                const uint32_t *zones, uint32_t nz, const char **tmp, struct iod_buf *out)
{
	int rc = iod_buf_printf(out, "- topology: iod-tree\n  cluster_default: true\n  tree:\n"
	                             "    switches:\n");
	if (!rc && nz > 1) {
		for (uint32_t z = 0; z < nz; z++)
			tmp[z] = nodes[zones[z]].zone;
		rc = iod_buf_printf(out, "      - switch: core\n        children: ");
		rc = rc ? rc : iod_slurm_hostlist(tmp, nz, out);
		rc = rc ? rc : iod_buf_printf(out, "\n");
	}
	for (uint32_t z = 0; z < nz && !rc; z++) {
		const char *zone = nodes[zones[z]].zone;
		uint32_t k = 0;
		for (uint32_t r = 0; r < nr; r++) /* a rack's zone is its first node's */
			if (!strcmp(nodes[racks[r]].zone, zone))
				tmp[k++] = nodes[racks[r]].rack;
		rc = iod_buf_printf(out, "      - switch: %s\n        children: ", zone);
		rc = rc ? rc : iod_slurm_hostlist(tmp, k, out);
		rc = rc ? rc : iod_buf_printf(out, "\n");
	}
	for (uint32_t r = 0; r < nr && !rc; r++) {
		rc = iod_buf_printf(out,
		                    "      - switch: %s\n        nodes: ", nodes[racks[r]].rack);
		rc = rc ? rc : member_list(nodes, n, nodes[racks[r]].rack, tmp, out);
		rc = rc ? rc : iod_buf_printf(out, "\n");
	}
	return rc;
}

static int block(const struct iod_k8s_node *nodes, uint32_t n, const uint32_t *racks, uint32_t nr,
                 const char **tmp, struct iod_buf *out)
{
	uint32_t smallest = UINT32_MAX;
	for (uint32_t r = 0; r < nr; r++) {
		uint32_t k = 0;
		for (uint32_t i = 0; i < n; i++)
			k += !strcmp(nodes[i].rack, nodes[racks[r]].rack);
		smallest = IOD_MIN(smallest, k);
	}
	int rc = iod_buf_printf(out,
	                        "- topology: iod-block\n  block:\n    block_sizes:\n      - %u\n"
	                        "    blocks:\n",
	                        smallest);
	for (uint32_t r = 0; r < nr && !rc; r++) {
		rc =
		    iod_buf_printf(out, "      - block: %s\n        nodes: ", nodes[racks[r]].rack);
		rc = rc ? rc : member_list(nodes, n, nodes[racks[r]].rack, tmp, out);
		rc = rc ? rc : iod_buf_printf(out, "\n");
	}
	return rc;
}

int iod_slurm_topology(const struct iod_k8s_node *nodes, uint32_t n, struct iod_buf *out,
                       struct iod_err *e)
{
	if (!n)
		return iod_err_set(e, -EINVAL, "the cluster has no nodes");
	for (uint32_t i = 0; i < n; i++)
		if (!slurm_name_ok(nodes[i].name) || !slurm_name_ok(nodes[i].rack) ||
		    !slurm_name_ok(nodes[i].zone))
			return iod_err_set(
			    e, -EINVAL,
			    "node %s (rack %s, zone %s): Slurm names may not be empty or "
			    "hold spaces, commas, brackets, quotes, '#' or ':'",
			    nodes[i].name, nodes[i].rack, nodes[i].zone);
	uint32_t *racks = calloc(n, sizeof(*racks)), *zones = calloc(n, sizeof(*zones));
	const char **tmp = calloc(n, sizeof(*tmp));
	int rc = -ENOMEM;
	if (racks && zones && tmp) {
		uint32_t nr = distinct(nodes, n, false, racks),
		         nz = distinct(nodes, n, true, zones);
		rc = iod_buf_printf(out,
		                    "# Slurm topology.yaml from iod's cluster topology\n"
		                    "# (iod topo --cluster -o slurm; docs/kubernetes.md)\n---\n");
		rc = rc ? rc : tree(nodes, n, racks, nr, zones, nz, tmp, out);
		rc = rc ? rc : block(nodes, n, racks, nr, tmp, out);
	}
	free(racks);
	free(zones);
	free(tmp);
	return rc ? iod_err_set(e, rc, "topology.yaml: out of memory") : 0;
}

/* ---- DRA: a node's GPUs and DPUs as a ResourceSlice ------------------------- */

/* s as a double-quoted YAML scalar. */
static void yq(struct iod_buf *o, const char *s)
{
	iod_buf_append(o, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			iod_buf_printf(o, "\\%c", c);
		else if (c < 0x20 || c > 0x7e)
			iod_buf_printf(o, "\\x%02x", c);
		else
			iod_buf_append(o, s, 1);
	}
	iod_buf_append(o, "\"", 1);
}

static void attr_str(struct iod_buf *o, const char *k, const char *v)
{
	iod_buf_printf(o, "      %s:\n        string: ", k);
	yq(o, v);
	iod_buf_append(o, "\n", 1);
}

static void attr_int(struct iod_buf *o, const char *k, long long v)
{
	iod_buf_printf(o, "      %s:\n        int: %lld\n", k, v);
}

/* The switch directly above bridge b (or b itself), -1 none. */
static int switch_above(const struct iod_topo_node *t, int b)
{
	for (; b >= 0 && b < t->nbridges; b = t->bridges[b].parent)
		if (t->bridges[b].kind == IOD_TOPO_BRIDGE_SWITCH)
			return b;
	return -1;
}

static int root_of(const struct iod_topo_node *t, int b)
{
	while (b >= 0 && b < t->nbridges && t->bridges[b].parent >= 0)
		b = t->bridges[b].parent;
	return b >= 0 && b < t->nbridges ? b : -1;
}

/* A quantity of bytes: Gi / Mi when whole, else bytes. */
static void quantity(uint64_t v, char *buf, size_t len)
{
	if (v && !(v % (1ull << 30)))
		snprintf(buf, len, "%lluGi", (unsigned long long)(v >> 30));
	else if (v && !(v % (1ull << 20)))
		snprintf(buf, len, "%lluMi", (unsigned long long)(v >> 20));
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

static void dra_device(const struct iod_topo_node *t, const char *node, int d, int index,
                       struct iod_buf *o)
{
	const struct iod_topo_device *v = &t->devices[d];
	bool gpu = v->kind == IOD_TOPO_DEV_GPU;
	char buf[64];
	iod_buf_printf(o, "  - name: %s%d\n    attributes:\n", gpu ? "gpu" : "dpu", index);
	attr_str(o, "type", gpu ? "gpu" : "dpu");
	attr_int(o, "index", index);
	if (v->model[0])
		attr_str(o, "model", v->model);
	if (v->uuid[0])
		attr_str(o, "uuid", v->uuid);
	iod_topo_pci_format(v->pci_addr, buf, sizeof(buf));
	attr_str(o, "pciBusID", buf);
	if (v->numa >= 0 && v->numa < t->nnuma)
		attr_int(o, "numaNode", t->numa[v->numa].os_index);
	int sw = switch_above(t, v->bridge), root = root_of(t, v->bridge);
	if (sw >= 0) {
		iod_topo_pci_format(t->bridges[sw].pci_addr, buf, sizeof(buf));
		attr_str(o, "pcieSwitch", buf);
	}
	if (root >= 0) {
		snprintf(buf, sizeof(buf), "pci%04x:%02x", t->bridges[root].pci_domain,
		         t->bridges[root].bus_first);
		attr_str(o, "pcieRoot", buf);
	}
	if (gpu) {
		/* its NVLink island when it has partners: one domain per island */
		unsigned isl = t->gpu_island[index], members = 0;
		for (unsigned g = 0; g < t->ngpus; g++)
			members += t->gpu_island[g] == isl;
		if (members > 1) {
			char dom[IOD_NAME_MAX + 16];
			snprintf(dom, sizeof(dom), "%s.nvl%u", node, isl);
			attr_str(o, "nvlinkDomain", dom);
			attr_int(o, "nvlinkDomainSize", members);
		}
		struct iod_bitmap one;
		iod_bitmap_zero(&one);
		iod_bitmap_set(&one, (unsigned)index);
		int nic = iod_topo_nearest_nic(t, &one);
		if (nic >= 0 && nic < t->ndevices)
			attr_str(o, "nearestNIC",
			         t->devices[nic].os_name[0] ? t->devices[nic].os_name
			                                    : t->devices[nic].name);
	}
	if (v->mem_bytes) {
		quantity(v->mem_bytes, buf, sizeof(buf));
		iod_buf_printf(o, "    capacity:\n      memory:\n        value: %s\n", buf);
	}
}

/* A DNS subdomain as Kubernetes names objects and drivers (lowercase). */
static bool dns_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 200 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '.'))
			return false;
	return true;
}

static unsigned count_dpus(const struct iod_topo_node *t)
{
	unsigned n = 0;
	for (unsigned d = 0; d < t->ndevices; d++)
		n += t->devices[d].kind == IOD_TOPO_DEV_DPU;
	return n;
}

int iod_k8s_dra_slice(const struct iod_topo_node *t, const char *node, const char *driver,
                      struct iod_buf *out, struct iod_err *e)
{
	if (!node || !dns_ok(node))
		return iod_err_set(e, -EINVAL,
		                   "node name \"%s\": want a DNS subdomain ([a-z0-9.-], 1..200 "
		                   "bytes): give --node",
		                   node ? node : "");
	if (!driver || !dns_ok(driver))
		return iod_err_set(e, -EINVAL, "driver \"%s\": want a DNS subdomain",
		                   driver ? driver : "");
	if (!t->ngpus && !count_dpus(t))
		return iod_err_set(e, -ENOENT, "%s has no GPU or DPU to publish", node);
	iod_buf_printf(out,
	               "# iod topo -o dra: the node's GPUs and DPUs as a DRA ResourceSlice;\n"
	               "# attributes are in the driver's domain (%s/numaNode, ...).\n"
	               "apiVersion: resource.k8s.io/v1\n"
	               "kind: ResourceSlice\n"
	               "metadata:\n"
	               "  name: %s-%s\n"
	               "spec:\n"
	               "  driver: %s\n"
	               "  nodeName: %s\n"
	               "  pool:\n"
	               "    name: %s\n"
	               "    generation: 1\n"
	               "    resourceSliceCount: 1\n"
	               "  devices:\n",
	               driver, node, driver, driver, node, node);
	for (unsigned g = 0; g < t->ngpus; g++)
		dra_device(t, node, t->gpu[g], (int)g, out);
	for (int d = 0, k = 0; d < t->ndevices; d++)
		if (t->devices[d].kind == IOD_TOPO_DEV_DPU)
			dra_device(t, node, d, k++, out);
	return 0;
}
