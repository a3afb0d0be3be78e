/*
 * nvml.c: NVIDIA's management library, loaded with dlopen at run time, to
 * complete discovered GPUs: name, UUID, memory, compute capability (tensor
 * cores), NVLinks (state per link, the peer's PCI address, the NVLink
 * version for bandwidth) and nvmlDeviceGetTopologyCommonAncestor for GPUs
 * on one board.
 *
 * iod has no build-time NVIDIA dependency: the few types and functions used
 * are declared here from NVML's documented C API (nvml.h), and everything is
 * optional: without libnvidia-ml.so.1, or when nvmlInit fails, discovery
 * keeps what hwloc found. A shell: it talks to the driver; it never prints.
 */
#include "internal.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* ---- the subset of nvml.h we use (documented ABI) -------------------------- */

typedef int nvml_return;           /* nvmlReturn_t: 0 = NVML_SUCCESS */
typedef struct nvml_dev *nvml_dev; /* nvmlDevice_t: an opaque handle */

#define NVML_SUCCESS 0
#define NVML_FEATURE_ENABLED 1          /* nvmlEnableState_t */
#define NVML_TOPOLOGY_INTERNAL 0        /* nvmlGpuTopologyLevel_t: same board */
#define NVML_DEVICE_NAME_BUFFER_SIZE 96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define NVML_DEVICE_UUID_BUFFER_SIZE 96 /* >= NVML_DEVICE_UUID_V2_BUFFER_SIZE (96) */

/* nvmlPciInfo_t (v3 layout, NVML >= 9) */
struct nvml_pci_info {
	char bus_id_legacy[16];        /* "0000:00:00.0" */
	unsigned int domain;           /* PCI domain */
	unsigned int bus;              /* bus */
	unsigned int device;           /* device (slot) */
	unsigned int pci_device_id;    /* device id << 16 | vendor id */
	unsigned int pci_subsystem_id; /* subsystem ids */
	char bus_id[32];               /* "00000000:00:00.0" */
};

/* nvmlMemory_t */
struct nvml_memory {
	unsigned long long total; /* bytes */
	unsigned long long free;  /* bytes */
	unsigned long long used;  /* bytes */
};

/* nvmlUtilization_t: percent of the last sample period */
struct nvml_utilization {
	unsigned int gpu;    /* kernels running */
	unsigned int memory; /* memory being read or written */
};

/* nvmlFieldValue_t */
struct nvml_field_value {
	unsigned int field_id;   /* NVML_FI_* */
	unsigned int scope_id;   /* link, or UINT_MAX for all */
	long long timestamp;     /* us */
	long long latency_usec;  /* of the read */
	int value_type;          /* nvmlValueType_t */
	nvml_return nvml_return; /* per field */
	union {
		double d;
		unsigned int ui;
		unsigned long ul;
		unsigned long long ull;
		long long sll;
	} value;
};

#define NVML_TEMPERATURE_GPU 0
#define NVML_PCIE_UTIL_TX_BYTES 0
#define NVML_PCIE_UTIL_RX_BYTES 1
/* NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX: cumulative KiB over all links */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139

struct nvml_api {
	void *lib; /* dlopen handle */
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	nvml_return (*count)(unsigned int *);
	nvml_return (*by_index)(unsigned int, nvml_dev *);
	nvml_return (*pci_info)(nvml_dev, struct nvml_pci_info *);
	nvml_return (*name)(nvml_dev, char *, unsigned int);
	nvml_return (*uuid)(nvml_dev, char *, unsigned int);
	nvml_return (*memory)(nvml_dev, struct nvml_memory *);
	nvml_return (*link_state)(nvml_dev, unsigned int, int *);
	nvml_return (*link_remote_pci)(nvml_dev, unsigned int, struct nvml_pci_info *);
	nvml_return (*link_version)(nvml_dev, unsigned int, unsigned int *);
	nvml_return (*common_ancestor)(nvml_dev, nvml_dev, int *);
	nvml_return (*compute_capability)(nvml_dev, int *, int *);
	nvml_return (*link_remote_type)(nvml_dev, unsigned int, int *); /* optional */
	/* telemetry (optional each: a missing one leaves its reading at 0) */
	nvml_return (*utilization)(nvml_dev, struct nvml_utilization *);
	nvml_return (*power)(nvml_dev, unsigned int *);                /* milliwatts */
	nvml_return (*temperature)(nvml_dev, int, unsigned int *);     /* sensor, C */
	nvml_return (*pcie_throughput)(nvml_dev, int, unsigned int *); /* counter, KB/s */
	nvml_return (*field_values)(nvml_dev, int, struct nvml_field_value *);
};

/* nvmlIntNvLinkDeviceType_t */
#define NVML_NVLINK_DEVICE_TYPE_GPU 0
#define NVML_NVLINK_DEVICE_TYPE_IBMNPU 1
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 2

#define SYM(field, name) api->field = (__typeof__(api->field))dlsym(api->lib, name)

static bool nvml_open(struct nvml_api *api)
{
	memset(api, 0, sizeof(*api));
	api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!api->lib)
		return false;
	SYM(init, "nvmlInit_v2");
	SYM(shutdown, "nvmlShutdown");
	SYM(count, "nvmlDeviceGetCount_v2");
	SYM(by_index, "nvmlDeviceGetHandleByIndex_v2");
	SYM(pci_info, "nvmlDeviceGetPciInfo_v3");
	SYM(name, "nvmlDeviceGetName");
	SYM(uuid, "nvmlDeviceGetUUID");
	SYM(memory, "nvmlDeviceGetMemoryInfo");
	SYM(link_state, "nvmlDeviceGetNvLinkState");
	SYM(link_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
	SYM(link_version, "nvmlDeviceGetNvLinkVersion");
	SYM(common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
	SYM(compute_capability, "nvmlDeviceGetCudaComputeCapability");
	SYM(link_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
	SYM(utilization, "nvmlDeviceGetUtilizationRates");
	SYM(power, "nvmlDeviceGetPowerUsage");
	SYM(temperature, "nvmlDeviceGetTemperature");
	SYM(pcie_throughput, "nvmlDeviceGetPcieThroughput");
	SYM(field_values, "nvmlDeviceGetFieldValues");
	if (!api->init || !api->shutdown || !api->count || !api->by_index || !api->pci_info ||
	    api->init() != NVML_SUCCESS) {
		dlclose(api->lib);
		api->lib = NULL;
		return false;
	}
	return true;
}

static void nvml_close(struct nvml_api *api)
{
	if (api->lib) {
		api->shutdown();
		dlclose(api->lib);
		api->lib = NULL;
	}
}

bool iod_topo_nvml_available(void)
{
	struct nvml_api api;
	if (!nvml_open(&api))
		return false;
	nvml_close(&api);
	return true;
}

/* Our device index of the GPU at a PCI address (function 0), or -1. */
static int gpu_at(const struct iod_topo_node *n, const struct nvml_pci_info *p)
{
	uint32_t want = IOD_TOPO_PCI_ADDR(p->domain & 0xffff, p->bus & 0xff, p->device & 0x1f, 0);
	for (unsigned i = 0; i < n->ndevices; i++)
		if (n->devices[i].kind == IOD_TOPO_DEV_GPU &&
		    (n->devices[i].pci_addr & ~7u) == want)
			return (int)i;
	return -1;
}

int iod_topo_nvml_enrich(struct iod_topo_node *n, struct iod_err *e)
{
	struct nvml_api api;
	nvml_dev handle[IOD_TOPO_DEVICES_MAX];
	int dev_of[IOD_TOPO_GPUS_MAX];
	unsigned count = 0, found = 0;

	if (!nvml_open(&api))
		return 0; /* no NVIDIA driver: nothing to add */
	if (api.count(&count) != NVML_SUCCESS)
		count = 0;
	if (count > IOD_TOPO_GPUS_MAX)
		count = IOD_TOPO_GPUS_MAX;
	for (unsigned i = 0; i < count; i++) {
		struct nvml_pci_info pci;
		dev_of[i] = -1;
		if (api.by_index(i, &handle[i]) != NVML_SUCCESS ||
		    api.pci_info(handle[i], &pci) != NVML_SUCCESS)
			continue;
		int d = gpu_at(n, &pci);
		if (d < 0)
			continue; /* hidden from hwloc (cgroups) or not on PCI */
		dev_of[i] = d;
		found++;
		struct iod_topo_device *g = &n->devices[d];
		char buf[NVML_DEVICE_UUID_BUFFER_SIZE];
		struct nvml_memory mem;
		int major = 0, minor = 0;
		if (api.name && api.name(handle[i], buf, sizeof(buf)) == NVML_SUCCESS)
			IOD_TOPO_COPY(g->model, buf);
		if (api.uuid && api.uuid(handle[i], buf, sizeof(buf)) == NVML_SUCCESS)
			IOD_TOPO_COPY(g->uuid, buf);
		if (api.memory && api.memory(handle[i], &mem) == NVML_SUCCESS)
			g->mem_bytes = mem.total;
		if (api.compute_capability &&
		    api.compute_capability(handle[i], &major, &minor) == NVML_SUCCESS)
			g->tensor_cores = major >= 7; /* Volta (7.0) and later */
		IOD_TOPO_COPY(g->vendor, "NVIDIA");
	}
	if (!found) {
		nvml_close(&api);
		return 0;
	}
	/* NVLinks: NVML is the authority; forget what hwloc said */
	for (unsigned a = 0; a < n->ndevices; a++)
		for (unsigned b = 0; b < n->ndevices; b++)
			n->link[a][b].nvlinks = n->link[a][b].nvswitch = 0;
	unsigned to_switch[IOD_TOPO_DEVICES_MAX] = {0};
	int rc = 0;
	for (unsigned i = 0; i < count && api.link_state && !rc; i++) {
		if (dev_of[i] < 0)
			continue;
		struct iod_topo_device *g = &n->devices[dev_of[i]];
		unsigned active = 0;
		for (unsigned l = 0; l < IOD_TOPO_NVLINKS_MAX; l++) {
			int state = 0;
			struct nvml_pci_info peer;
			unsigned version = 0;
			if (api.link_state(handle[i], l, &state) != NVML_SUCCESS)
				break; /* past the device's last link */
			if (state != NVML_FEATURE_ENABLED)
				continue;
			active++;
			if (api.link_version &&
			    api.link_version(handle[i], l, &version) == NVML_SUCCESS)
				g->nvlink_bps = (version == 1 ? 20 : 25) * 1000000000ull * 8;
			/* Where does the link go? The peer type (newer drivers) says
			 * GPU, NVSwitch or CPU; a peer whose PCI address we cannot
			 * get or that is not one of our GPUs is taken for an NVSwitch:
			 * HGX boards' NVSwitches need not be visible on the host's PCI
			 * bus, and nvidia-smi still shows NV# between every pair. */
			int type = -1;
			if (api.link_remote_type &&
			    api.link_remote_type(handle[i], l, &type) != NVML_SUCCESS)
				type = -1;
			if (type == NVML_NVLINK_DEVICE_TYPE_IBMNPU)
				continue; /* GPU-to-CPU NVLink (POWER9): not between GPUs */
			int p = -1;
			if (type != NVML_NVLINK_DEVICE_TYPE_SWITCH && api.link_remote_pci &&
			    api.link_remote_pci(handle[i], l, &peer) == NVML_SUCCESS)
				p = gpu_at(n, &peer);
			if (p < 0)
				to_switch[dev_of[i]]++;
			else if (p > dev_of[i]) /* each GPU pair is seen from both ends */
				rc = iod_topo_add_nvlink(n, (unsigned)dev_of[i], (unsigned)p, 1,
				                         false, e);
		}
		g->nvlinks = (uint8_t)active;
	}
	for (unsigned a = 0; a < n->ndevices && !rc; a++)
		for (unsigned b = a + 1; b < n->ndevices && !rc; b++)
			if (to_switch[a] && to_switch[b])
				rc = iod_topo_add_nvlink(
				    n, a, b, IOD_MIN(to_switch[a], to_switch[b]), true, e);
	/* GPUs on one board (NVML_TOPOLOGY_INTERNAL): go-gpuallocator's SameBoard */
	for (unsigned i = 0; i < count && api.common_ancestor && !rc; i++)
		for (unsigned j = i + 1; j < count; j++) {
			int level = -1;
			if (dev_of[i] < 0 || dev_of[j] < 0 ||
			    api.common_ancestor(handle[i], handle[j], &level) != NVML_SUCCESS ||
			    level != NVML_TOPOLOGY_INTERNAL)
				continue;
			struct iod_topo_device *a = &n->devices[dev_of[i]];
			if (a->board < 0)
				a->board = (int16_t)dev_of[i];
			n->devices[dev_of[j]].board = a->board;
		}
	nvml_close(&api);
	if (rc)
		return rc;
	return iod_topo_node_finalize(n, e);
}

/* ---- telemetry ------------------------------------------------------------- */

struct iod_topo_nvml {
	struct nvml_api api; /* the open library */
};

struct iod_topo_nvml *iod_topo_nvml_open(void)
{
	struct iod_topo_nvml *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	if (!nvml_open(&m->api)) {
		free(m);
		return NULL;
	}
	return m;
}

void iod_topo_nvml_close(struct iod_topo_nvml *m)
{
	if (!m)
		return;
	nvml_close(&m->api);
	free(m);
}

int iod_topo_nvml_read(struct iod_topo_nvml *m, struct iod_topo_gpu_reading *out, uint32_t max,
                       uint32_t *n)
{
	struct nvml_api *api = &m->api;
	unsigned count = 0;
	*n = 0;
	if (api->count(&count) != NVML_SUCCESS)
		return -EIO;
	for (unsigned i = 0; i < count && *n < max; i++) {
		nvml_dev h;
		struct nvml_pci_info pci;
		struct iod_topo_gpu_reading *r = &out[*n];
		if (api->by_index(i, &h) != NVML_SUCCESS || api->pci_info(h, &pci) != NVML_SUCCESS)
			continue;
		memset(r, 0, sizeof(*r));
		r->index = i;
		snprintf(r->pci, sizeof(r->pci), "%04x:%02x:%02x.0", pci.domain & 0xffff,
		         pci.bus & 0xff, pci.device & 0x1f);
		char buf[NVML_DEVICE_UUID_BUFFER_SIZE];
		if (api->uuid && api->uuid(h, buf, sizeof(buf)) == NVML_SUCCESS)
			IOD_TOPO_COPY(r->uuid, buf);
		if (api->name && api->name(h, buf, sizeof(buf)) == NVML_SUCCESS)
			IOD_TOPO_COPY(r->model, buf);
		struct nvml_utilization u;
		if (api->utilization && api->utilization(h, &u) == NVML_SUCCESS)
			r->util_pct = u.gpu > 100 ? 100 : u.gpu;
		struct nvml_memory mem;
		if (api->memory && api->memory(h, &mem) == NVML_SUCCESS) {
			r->mem_used_bytes = mem.used;
			r->mem_total_bytes = mem.total;
		}
		unsigned v = 0;
		if (api->power && api->power(h, &v) == NVML_SUCCESS)
			r->power_w = v / 1000.0;
		if (api->temperature &&
		    api->temperature(h, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS)
			r->temp_c = v;
		unsigned tx = 0, rx = 0;
		if (api->pcie_throughput &&
		    api->pcie_throughput(h, NVML_PCIE_UTIL_TX_BYTES, &tx) == NVML_SUCCESS &&
		    api->pcie_throughput(h, NVML_PCIE_UTIL_RX_BYTES, &rx) == NVML_SUCCESS)
			r->pcie_bytes_per_s = ((uint64_t)tx + rx) * 1024;
		if (api->field_values) {
			struct nvml_field_value f[2];
			memset(f, 0, sizeof(f));
			f[0].field_id = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
			f[1].field_id = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
			f[0].scope_id = f[1].scope_id = UINT32_MAX;
			if (api->field_values(h, 2, f) == NVML_SUCCESS)
				for (int k = 0; k < 2; k++)
					if (f[k].nvml_return == NVML_SUCCESS)
						r->nvlink_bytes_total += f[k].value.ull * 1024;
		}
		(*n)++;
	}
	return 0;
}
