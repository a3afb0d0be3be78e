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
