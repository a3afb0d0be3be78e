/*
 * json.c: a node back from the JSON iod_topo_to_json() writes, so a node's
 * topology can travel (agent -> cluster state -> scheduler) as JSON and come
 * back as the same value.
 *
 * The JSON comes from the network: every field is type-checked, every array
 * bounded by its IOD_TOPO_* limit, every string bounded by its field, every
 * index range-checked; the result goes through iod_topo_node_finalize like
 * any other source. Errors name the field ("devices[3].pci: ..."). Pure: no
 * I/O, no allocation beyond jansson's reading of the value it is given.
 */
#include "internal.h"

#include <string.h>

struct rd {
	struct iod_err *e; /* where errors go */
	int rc;            /* first error */
	char path[96];     /* the object being read, for messages */
};

static int fail(struct rd *r, const char *field, const char *what)
{
	if (!r->rc)
		r->rc = iod_err_set(r->e, -EINVAL, "topology JSON: %s%s%s: %s", r->path,
		                    r->path[0] ? "." : "", field, what);
	return r->rc;
}

static uint64_t u64(struct rd *r, const json_t *o, const char *k, bool required, uint64_t max)
{
	json_t *v = json_object_get(o, k);
	if (!v) {
		if (required)
			fail(r, k, "missing");
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max) {
		fail(r, k, "expected an integer in range");
		return 0;
	}
	return (uint64_t)json_integer_value(v);
}

/* An index that may be -1 ("none"), below `count`. */
static int idx(struct rd *r, const json_t *o, const char *k, unsigned count)
{
	json_t *v = json_object_get(o, k);
	if (!v)
		return -1;
	if (!json_is_integer(v) || json_integer_value(v) < -1 ||
	    json_integer_value(v) >= (json_int_t)count) {
		fail(r, k, "expected -1 or an index in range");
		return -1;
	}
	return (int)json_integer_value(v);
}

static const char *str(struct rd *r, const json_t *o, const char *k, bool required)
{
	json_t *v = json_object_get(o, k);
	if (!v) {
		if (required)
			fail(r, k, "missing");
		return "";
	}
	if (!json_is_string(v)) {
		fail(r, k, "expected a string");
		return "";
	}
	return json_string_value(v);
}

static void set(struct rd *r, const json_t *o, const char *k, struct iod_bitmap *out)
{
	struct iod_err e2 = {0};
	iod_bitmap_zero(out);
	const char *s = str(r, o, k, true);
	if (!r->rc && iod_bitmap_parse(s, out, &e2))
		fail(r, k, e2.msg);
}

static bool flag(struct rd *r, const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	if (v && !json_is_boolean(v))
		fail(r, k, "expected true or false");
	return v && json_is_true(v);
}

static const json_t *array(struct rd *r, const json_t *o, const char *k, size_t max)
{
	json_t *a = json_object_get(o, k);
	if (!a || !json_is_array(a)) {
		fail(r, k, "expected an array");
		return NULL;
	}
	if (json_array_size(a) > max) {
		fail(r, k, "too many entries for iod's limits (IOD_TOPO_*)");
		return NULL;
	}
	return a;
}

static int numa_index(const struct iod_topo_node *n, json_int_t os)
{
	for (unsigned m = 0; m < n->nnuma; m++)
		if ((json_int_t)n->numa[m].os_index == os)
			return (int)m;
	return -1;
}

/* 1..max hex digits and nothing else (sscanf's %x takes signs and stops at junk). */
static bool hex_exact(const char *s, size_t len, unsigned max, unsigned *out)
{
	unsigned v = 0;
	if (len == 0 || len > max)
		return false;
	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)s[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return false;
		v = v << 4 | (unsigned)d;
	}
	*out = v;
	return true;
}

static void device(struct rd *r, struct iod_topo_node *n, const json_t *o)
{
	struct iod_topo_device d;
	const char *kind = str(r, o, "kind", true);
	int k = -1;
	for (int i = IOD_TOPO_DEV_GPU; i <= IOD_TOPO_DEV_OTHER; i++)
		if (!strcmp(kind, iod_topo_dev_kind_name((enum iod_topo_dev_kind)i)))
			k = i;
	if (k < 0) {
		fail(r, "kind", "expected gpu, nic, dpu, fpga, nvme or other");
		return;
	}
	iod_topo_device_init(&d, (enum iod_topo_dev_kind)k);
	IOD_TOPO_COPY(d.os_name, str(r, o, "os_name", false));
	IOD_TOPO_COPY(d.vendor, str(r, o, "vendor", false));
	IOD_TOPO_COPY(d.model, str(r, o, "model", false));
	IOD_TOPO_COPY(d.uuid, str(r, o, "uuid", false));
	if (iod_topo_pci_parse(str(r, o, "pci", true), &d.pci_addr) && !r->rc)
		fail(r, "pci", "expected a PCI address dddd:bb:dd.f");
	unsigned ven = 0, dev = 0, cls = 0;
	const char *id = str(r, o, "pci_id", false);
	const char *colon = strchr(id, ':');
	if (*id && (!colon || !hex_exact(id, (size_t)(colon - id), 4, &ven) ||
	            !hex_exact(colon + 1, strlen(colon + 1), 4, &dev)))
		fail(r, "pci_id", "expected vvvv:dddd");
	const char *c = str(r, o, "pci_class", false);
	if (*c && !hex_exact(c, strlen(c), 6, &cls))
		fail(r, "pci_class", "expected 1 to 6 hex digits");
	d.pci_vendor = (uint16_t)ven;
	d.pci_device = (uint16_t)dev;
	d.pci_class = cls;
	d.bridge = (int16_t)idx(r, o, "bridge", n->nbridges);
	json_t *numa = json_object_get(o, "numa");
	if (numa && (!json_is_integer(numa) || (json_integer_value(numa) != -1 &&
	                                        numa_index(n, json_integer_value(numa)) < 0)))
		fail(r, "numa", "expected -1 or the OS index of a NUMA node");
	d.numa = (int16_t)(numa ? numa_index(n, json_integer_value(numa)) : -1);
	set(r, o, "cpuset", &d.cpuset);
	d.mem_bytes = u64(r, o, "mem_bytes", false, UINT64_MAX >> 1);
	unsigned gen = (unsigned)u64(r, o, "pcie_gen", false, 6);
	unsigned width = (unsigned)u64(r, o, "pcie_width", false, 32);
	d.pcie_bps = u64(r, o, "pcie_bps", false, UINT64_MAX >> 1);
	d.pcie_gen = (uint8_t)gen;
	d.pcie_width = (uint8_t)width;
	d.cores = (uint32_t)u64(r, o, "cores", false, 1u << 20);
	d.nvlinks = (uint8_t)u64(r, o, "nvlinks", false, 255);
	d.nvlink_bps = u64(r, o, "nvlink_bps", false, UINT64_MAX >> 1);
	d.tensor_cores = flag(r, o, "tensor_cores");
	d.tflops = (uint32_t)u64(r, o, "tflops", false, 1u << 24);
	d.ports = (uint8_t)u64(r, o, "ports", false, 255);
	d.port_bps = u64(r, o, "port_bps", false, UINT64_MAX >> 1);
	d.board = (int16_t)idx(r, o, "board", 32768);
	if (!r->rc) {
		int rc = iod_topo_add_device(n, &d, r->e);
		if (rc < 0)
			r->rc = rc;
	}
}

int iod_topo_from_json(const json_t *j, struct iod_topo_node *n, struct iod_err *e)
{
	struct rd r = {e, 0, ""};
	const json_t *a;
	size_t i;
	json_t *o;

	if (!json_is_object(j))
		return iod_err_set(e, -EINVAL, "topology JSON: expected an object");
	iod_topo_node_init(n, str(&r, j, "name", false));
	IOD_TOPO_COPY(n->model, str(&r, j, "model", false));
	n->is_dpu = flag(&r, j, "is_dpu");

	if ((a = array(&r, j, "packages", IOD_TOPO_PACKAGES_MAX)))
		json_array_foreach(a, i, o)
		{
			struct iod_bitmap s;
			snprintf(r.path, sizeof(r.path), "packages[%zu]", i);
			set(&r, o, "cpuset", &s);
			uint32_t os = (uint32_t)u64(&r, o, "os_index", true, UINT32_MAX);
			if (!r.rc &&
			    iod_topo_add_package(n, os, &s, str(&r, o, "model", false), e) < 0)
				return -EINVAL;
		}
	r.path[0] = '\0';
	if ((a = array(&r, j, "numa", IOD_TOPO_NUMA_MAX)))
		json_array_foreach(a, i, o)
		{
			struct iod_bitmap s;
			snprintf(r.path, sizeof(r.path), "numa[%zu]", i);
			set(&r, o, "cpuset", &s);
			uint32_t os = (uint32_t)u64(&r, o, "os_index", true, UINT32_MAX);
			int pkg = idx(&r, o, "package", n->npackages);
			uint64_t mem = u64(&r, o, "mem_bytes", true, UINT64_MAX >> 1);
			if (!r.rc && numa_index(n, os) >= 0)
				fail(&r, "os_index", "duplicate NUMA node");
			if (!r.rc && iod_topo_add_numa(n, os, pkg, mem, &s, e) < 0)
				return -EINVAL;
		}
	r.path[0] = '\0';
	if ((a = array(&r, j, "caches", IOD_TOPO_CACHES_MAX)))
		json_array_foreach(a, i, o)
		{
			struct iod_bitmap s;
			snprintf(r.path, sizeof(r.path), "caches[%zu]", i);
			set(&r, o, "cpuset", &s);
			unsigned level = (unsigned)u64(&r, o, "level", true, 4);
			uint64_t size = u64(&r, o, "size_bytes", true, UINT64_MAX >> 1);
			if (!r.rc)
				iod_topo_add_cache(n, level, size, &s, e);
		}
	r.path[0] = '\0';
	if ((a = array(&r, j, "core_pus", IOD_BITMAP_BITS)))
		json_array_foreach(a, i, o)
		{
			struct iod_bitmap s;
			struct iod_err e2 = {0};
			snprintf(r.path, sizeof(r.path), "core_pus[%zu]", i);
			if (!json_is_string(o) || iod_bitmap_parse(json_string_value(o), &s, &e2))
				fail(&r, "", "expected a CPU list");
			for (int p = iod_bitmap_next(&s, 0); !r.rc && p >= 0;
			     p = iod_bitmap_next(&s, (unsigned)p + 1))
				iod_topo_set_core(n, (unsigned)p, (unsigned)i);
		}
	r.path[0] = '\0';
	if ((a = array(&r, j, "bridges", IOD_TOPO_BRIDGES_MAX)))
		json_array_foreach(a, i, o)
		{
			snprintf(r.path, sizeof(r.path), "bridges[%zu]", i);
			const char *kind = str(&r, o, "kind", true);
			bool host = !strcmp(kind, "host");
			if (!r.rc && !host && strcmp(kind, "switch"))
				fail(&r, "kind", "expected host or switch");
			/* a parent must come first: the tree cannot loop */
			int parent = idx(&r, o, "parent", n->nbridges);
			int numa = idx(&r, o, "numa", n->nnuma);
			uint32_t addr = 0;
			if (iod_topo_pci_parse(str(&r, o, "pci", true), &addr) && !r.rc)
				fail(&r, "pci", "expected a PCI address");
			unsigned first = (unsigned)u64(&r, o, "bus_first", false, 255);
			unsigned last = (unsigned)u64(&r, o, "bus_last", false, 255);
			if (r.rc)
				break;
			int b = iod_topo_add_bridge(
			    n, host ? IOD_TOPO_BRIDGE_HOST : IOD_TOPO_BRIDGE_SWITCH, parent, numa,
			    addr, e);
			if (b < 0)
				return b;
			n->bridges[b].bus_first = (uint8_t)first;
			n->bridges[b].bus_last = (uint8_t)last;
		}
	r.path[0] = '\0';
	const json_t *devs = array(&r, j, "devices", IOD_TOPO_DEVICES_MAX);
	if (devs)
		json_array_foreach(devs, i, o)
		{
			snprintf(r.path, sizeof(r.path), "devices[%zu]", i);
			if (!json_is_object(o))
				fail(&r, "", "expected an object");
			else
				device(&r, n, o);
			if (r.rc)
				return r.rc;
		}
	/* NVLinks, from each device's links object (by device name) */
	if (devs && !r.rc)
		json_array_foreach(devs, i, o)
		{
			json_t *links = json_object_get(o, "links");
			const char *peer;
			json_t *l;
			snprintf(r.path, sizeof(r.path), "devices[%zu].links", i);
			if (links && !json_is_object(links))
				fail(&r, "", "expected an object");
			if (r.rc || !links)
				continue;
			json_object_foreach(links, peer, l)
			{
				size_t p;
				json_t *po;
				int pi = -1;
				json_array_foreach(devs, p, po)
				{
					json_t *nm = json_object_get(po, "name");
					if (pi < 0 && json_is_string(nm) &&
					    !strcmp(json_string_value(nm), peer))
						pi = (int)p;
				}
				if (pi < 0) {
					fail(&r, peer, "no device of that name");
					break;
				}
				unsigned nv = json_is_object(l)
				                  ? (unsigned)u64(&r, l, "nvlinks", false, 255)
				                  : 0;
				if (nv && pi > (int)i && !r.rc)
					r.rc = iod_topo_add_nvlink(n, (unsigned)i, (unsigned)pi, nv,
					                           flag(&r, l, "nvswitch"), e);
			}
		}
	if (r.rc)
		return r.rc;
	int rc = iod_topo_node_finalize(n, e);
	if (rc) {
		iod_err_wrap(e, "topology JSON");
		return rc;
	}
	n->source = IOD_TOPO_SRC_BUILDER;
	static const char *const sources[] = {"builder", "model", "xml", "host"};
	const char *src = str(&r, j, "source", false);
	for (unsigned s = 0; s < IOD_ARRAY_LEN(sources); s++)
		if (!strcmp(src, sources[s]))
			n->source = (enum iod_topo_source)s;
	return 0;
}
