/*
 * topo.h: a node's hardware topology as a plain value, and the pure queries
 * the scheduler asks of it.
 *
 * A node (struct iod_topo_node) holds its CPU packages, NUMA nodes (with
 * memory), last-level caches, PCI tree (host bridges and PCIe switches),
 * devices (GPU, NIC, DPU, FPGA, NVMe) with their attributes, the link matrix
 * between every pair of devices (PCIe path class as `nvidia-smi topo -m`
 * defines it, plus bonded NVLinks), and the compute units the spec's
 * `resources.compute` targets (tensor-core, cuda-core, fpga, dpu, cpu).
 *
 * Everything lives in fixed-size arrays bounded by IOD_TOPO_* limits: a node
 * has no pointers, so it can be copied with memcpy, compared with memcmp
 * (iod_topo_node_init zeroes padding) and held by the thousand. Nodes come
 * from five places, all of which end in iod_topo_node_finalize():
 *   - built-in models (pure data: "dgx-h100", "generic-4", ...);
 *   - an hwloc XML file or buffer (modelled or gathered machines);
 *   - discovery on this machine (hwloc, plus NVML through dlopen when present);
 *   - the JSON iod_topo_to_json writes (a node's topology in cluster state);
 *   - the builder calls below (tests, the simulator).
 * GPU sets are read from the bitmap's first word (IOD_TOPO_GPUS_MAX <= 64).
 *
 * Queries (link class, bandwidth, scores, nearest NIC/NUMA, islands) are
 * pure: no allocation, no I/O, O(devices^2) at worst. Loading and discovery
 * are shells: they read files and the system and never print; errors go to a
 * caller-owned struct iod_err. Nothing here reads the clock or draws random
 * numbers.
 *
 * Indexes: devices are numbered 0..ndevices-1 in the node's device order.
 * GPUs have a second, dense numbering 0..ngpus-1 (the order nvidia-smi uses:
 * by PCI bus id); GPU sets are struct iod_bitmap over GPU indexes.
 */
#ifndef IOD_TOPO_H
#define IOD_TOPO_H

#include "iod/base.h"
#include "iod/spec.h"

/* pu_core value of a PU that is not in the node. */
#define IOD_TOPO_CORE_NONE 0xffff

/* ---- enums ------------------------------------------------------------- */

/* Device kinds (X-macro: enum + names). */
#define IOD_TOPO_DEV_KINDS(X) \
	X(GPU, "gpu")         \
	X(NIC, "nic")         \
	X(DPU, "dpu")         \
	X(FPGA, "fpga")       \
	X(NVME, "nvme")       \
	X(OTHER, "other")

enum iod_topo_dev_kind {
#define X(n, s) IOD_TOPO_DEV_##n,
	IOD_TOPO_DEV_KINDS(X)
#undef X
};

/*
 * Link classes, fastest to slowest, exactly the letters of
 * `nvidia-smi topo -m`:
 *   SELF  "X"    the device itself
 *   NVLINK "NV#" a bonded set of # NVLinks (direct or through NVSwitch)
 *   BOARD "PIX"  two GPUs on one board (go-gpuallocator's SameBoard);
 *                nvidia-smi prints it as PIX
 *   PIX   "PIX"  at most a single PCIe switch
 *   PXB   "PXB"  several PCIe switches, no host bridge
 *   PHB   "PHB"  through a PCIe host bridge (the CPU's root complex)
 *   NODE  "NODE" across host bridges within one NUMA node
 *   SYS   "SYS"  across NUMA nodes (the SMP interconnect: UPI, xGMI)
 *   NET   "NET"  across the network (devices on different nodes)
 * Enum order is the order of speed: a smaller value is a closer link.
 */
#define IOD_TOPO_LINK_CLASSES(X) \
	X(SELF, "X")             \
	X(NVLINK, "NV")          \
	X(BOARD, "PIX")          \
	X(PIX, "PIX")            \
	X(PXB, "PXB")            \
	X(PHB, "PHB")            \
	X(NODE, "NODE")          \
	X(SYS, "SYS")            \
	X(NET, "NET")

enum iod_topo_link_class {
#define X(n, s) IOD_TOPO_LINK_##n,
	IOD_TOPO_LINK_CLASSES(X)
#undef X
};

/* PCI tree nodes: a host bridge (root complex) or a PCIe switch. */
enum iod_topo_bridge_kind {
	IOD_TOPO_BRIDGE_HOST,  /* PCIe host bridge: one root complex */
	IOD_TOPO_BRIDGE_SWITCH /* a PCIe switch (upstream port + its downstream ports) */
};

/* Where a node came from. */
enum iod_topo_source {
	IOD_TOPO_SRC_BUILDER, /* built by code (tests, simulator) */
	IOD_TOPO_SRC_MODEL,   /* a built-in model */
	IOD_TOPO_SRC_XML,     /* an hwloc XML file or buffer */
	IOD_TOPO_SRC_HOST     /* discovered on this machine */
};

/* ---- the model --------------------------------------------------------- */

/* PCI address packed as domain<<16 | bus<<8 | device<<3 | function. */
#define IOD_TOPO_PCI_ADDR(dom, bus, dev, fn) \
	((uint32_t)(dom) << 16 | (uint32_t)(bus) << 8 | (uint32_t)(dev) << 3 | (uint32_t)(fn))

struct iod_topo_package {
	uint32_t os_index;            /* socket number as the OS numbers it */
	uint32_t cores;               /* physical cores in the package */
	struct iod_bitmap cpuset;     /* its PUs (hardware threads), by OS index */
	char model[IOD_TOPO_STR_MAX]; /* CPU model name; "" unknown */
};

struct iod_topo_numa {
	uint32_t os_index;        /* NUMA node number as the OS numbers it */
	int16_t package;          /* index into packages, -1 none (e.g. CXL memory) */
	uint64_t mem_bytes;       /* local memory */
	struct iod_bitmap cpuset; /* PUs local to this node (may be empty) */
};

/* A last-level cache (L3, or L2 where there is no L3). */
struct iod_topo_cache {
	uint8_t level;            /* 2 or 3 */
	uint64_t size_bytes;      /* capacity */
	struct iod_bitmap cpuset; /* PUs sharing it */
};

struct iod_topo_bridge {
	enum iod_topo_bridge_kind kind; /* host bridge or switch */
	int16_t parent;                 /* index into bridges; -1 for a host bridge */
	int16_t numa;                   /* index into numa, -1 unknown */
	int16_t package;                /* index into packages, -1 unknown */
	uint32_t pci_addr;              /* upstream port address (0 for host bridges) */
	uint16_t pci_domain;            /* host bridge: PCI domain */
	uint8_t bus_first;              /* host bridge: its bus; switch: its internal bus */
	uint8_t bus_last;               /* last bus below it (subordinate) */
};

/* Capacity vector of a compute unit (zeros where it does not apply). */
struct iod_topo_capacity {
	uint32_t count;     /* schedulable units: 1 per GPU/FPGA/DPU; cores for cpu */
	uint32_t cores;     /* SMs of a GPU, Arm cores of a DPU, cores of a CPU unit */
	uint64_t mem_bytes; /* device memory (GPU HBM, DPU DRAM, NUMA memory) */
	uint64_t net_bps;   /* network bandwidth (NIC/DPU ports summed) */
	uint32_t tflops;    /* dense FP16/BF16 tensor TFLOPS, 0 unknown */
};

struct iod_topo_device {
	enum iod_topo_dev_kind kind;      /* GPU, NIC, DPU, FPGA, NVMe */
	char name[IOD_TOPO_LABEL_MAX];    /* "GPU0", "NIC3" as nvidia-smi labels them */
	char os_name[IOD_TOPO_LABEL_MAX]; /* "mlx5_0", "eth0", "nvme0", "nvidia0"; "" none */
	char vendor[IOD_TOPO_STR_MAX];    /* "NVIDIA", "Mellanox" */
	char model[IOD_TOPO_STR_MAX];     /* "NVIDIA H100 80GB HBM3" */
	char uuid[IOD_TOPO_STR_MAX];      /* GPU UUID from NVML; "" unknown */
	uint16_t pci_vendor;              /* PCI vendor id (0x10de NVIDIA, 0x15b3 Mellanox) */
	uint16_t pci_device;              /* PCI device id */
	uint32_t pci_class;               /* PCI class id (0x0302 3D controller...) */
	uint32_t pci_addr;                /* IOD_TOPO_PCI_ADDR */
	int16_t bridge;                   /* parent in the PCI tree (index into bridges), -1 none */
	int16_t numa;                     /* index into numa, -1 unknown */
	int16_t package;                  /* index into packages, -1 unknown */
	int16_t board;                    /* devices with the same board >= 0 share a board */
	struct iod_bitmap cpuset;         /* CPU affinity (PUs); all PUs when unknown */
	uint64_t mem_bytes;               /* device memory (GPU, DPU DRAM) */
	uint64_t pcie_bps;                /* PCIe link bandwidth per direction, 0 unknown */
	uint8_t pcie_gen;                 /* PCIe generation, 0 unknown */
	uint8_t pcie_width;               /* PCIe lanes, 0 unknown */
	uint8_t nvlinks;                  /* GPU: NVLinks in total (0..IOD_TOPO_NVLINKS_MAX) */
	uint8_t ports;                    /* NIC/DPU: network ports */
	uint64_t nvlink_bps;              /* GPU: bandwidth of one NVLink per direction */
	uint64_t port_bps;                /* NIC/DPU: speed of one port */
	uint32_t cores;                   /* GPU: SMs; DPU: Arm cores */
	uint32_t tflops;                  /* GPU: dense FP16/BF16 tensor TFLOPS, 0 unknown */
	bool tensor_cores;                /* GPU has tensor cores (Volta and later) */
	int16_t gpu_index;                /* dense GPU index, -1 if not a GPU */
	int16_t unit;                     /* index into units, -1 if not a compute unit */
};

/* The relation of two devices: the PCIe path and bonded NVLinks. */
struct iod_topo_link {
	uint8_t pcie;     /* enum iod_topo_link_class of the PCIe/system path (SELF..SYS) */
	uint8_t nvlinks;  /* bonded NVLinks between the two, 0 none */
	uint8_t nvswitch; /* 1 when the NVLinks go through NVSwitch */
	uint8_t pad;      /* zero */
};

/* A schedulable compute unit: a device, or the CPUs of one NUMA node. */
struct iod_topo_unit {
	enum iod_compute_type type;   /* tensor-core, cuda-core, fpga, dpu, cpu */
	int16_t device;               /* index into devices; -1 for a CPU unit */
	int16_t numa;                 /* NUMA node it is local to, -1 unknown */
	struct iod_topo_capacity cap; /* what it offers */
};

struct iod_topo_node {
	char name[IOD_NAME_MAX];           /* host name or model name ("dgx-h100") */
	char model[IOD_NAME_MAX];          /* built-in model name, "" when discovered */
	enum iod_topo_source source;       /* where it came from */
	bool is_dpu;                       /* the node is itself a DPU (its CPUs are Arm cores
	                                  of a DPU; its CPU units have type dpu) */
	uint32_t cores;                    /* physical cores */
	uint32_t pus;                      /* hardware threads */
	uint64_t mem_bytes;                /* host memory, all NUMA nodes */
	struct iod_bitmap cpuset;          /* every PU */
	struct iod_bitmap primary_pus;     /* the first PU of each core (allocate whole cores) */
	uint16_t pu_core[IOD_BITMAP_BITS]; /* PU os index -> core number (node-wide);
	                                      IOD_TOPO_CORE_NONE for PUs not in cpuset */

	uint16_t npackages; /* packages used */
	uint16_t nnuma;     /* NUMA nodes used (>= 1 after finalize) */
	uint16_t ncaches;   /* caches used */
	uint16_t nbridges;  /* bridges used */
	uint16_t ndevices;  /* devices used */
	uint16_t ngpus;     /* GPUs (devices of kind GPU) */
	uint16_t nnics;     /* NICs and DPUs (network-capable devices) */
	uint16_t nunits;    /* compute units */
	uint16_t nislands;  /* NVLink islands over all GPUs */

	struct iod_topo_package packages[IOD_TOPO_PACKAGES_MAX];
	struct iod_topo_numa numa[IOD_TOPO_NUMA_MAX];
	struct iod_topo_cache caches[IOD_TOPO_CACHES_MAX];
	struct iod_topo_bridge bridges[IOD_TOPO_BRIDGES_MAX];
	struct iod_topo_device devices[IOD_TOPO_DEVICES_MAX];
	struct iod_topo_unit units[IOD_TOPO_UNITS_MAX];
	int16_t gpu[IOD_TOPO_GPUS_MAX];        /* GPU index -> device index */
	int16_t nic[IOD_TOPO_DEVICES_MAX];     /* i-th NIC/DPU -> device index */
	uint8_t gpu_island[IOD_TOPO_GPUS_MAX]; /* GPU index -> NVLink island */
	struct iod_topo_link link[IOD_TOPO_DEVICES_MAX][IOD_TOPO_DEVICES_MAX]; /* symmetric */
};

/* A node must stay cheap to copy and to hold by the thousand (sched). */
_Static_assert(sizeof(struct iod_topo_node) <= 64 * 1024, "iod_topo_node grew past 64 KiB");

/* ---- names -------------------------------------------------------------- */

const char *iod_topo_dev_kind_name(enum iod_topo_dev_kind k);
/* "X", "NV", "PIX", ... (NVLINK without its count; see iod_topo_link_label). */
const char *iod_topo_link_class_name(enum iod_topo_link_class c);
/* The matrix cell for devices a, b: " X ", "NV18", "PIX", "SYS"... */
void iod_topo_link_label(const struct iod_topo_node *n, unsigned a, unsigned b, char *buf,
                         size_t len);
/* "0000:1b:00.0" */
void iod_topo_pci_format(uint32_t pci_addr, char *buf, size_t len);
int iod_topo_pci_parse(const char *s, uint32_t *pci_addr);

/* ---- building a node ---------------------------------------------------- */

/* Zero the node (padding included, so memcmp compares nodes) and name it. */
void iod_topo_node_init(struct iod_topo_node *n, const char *name);
/* Each add returns the new index (>= 0) or -ENOSPC past its limit (with e). */
int iod_topo_add_package(struct iod_topo_node *n, uint32_t os_index,
                         const struct iod_bitmap *cpuset, const char *model, struct iod_err *e);
/* Say which core a PU belongs to (SMT siblings share a core). PUs never
 * assigned become cores of their own at finalize. */
void iod_topo_set_core(struct iod_topo_node *n, unsigned pu, unsigned core);
int iod_topo_add_numa(struct iod_topo_node *n, uint32_t os_index, int package, uint64_t mem_bytes,
                      const struct iod_bitmap *cpuset, struct iod_err *e);
int iod_topo_add_cache(struct iod_topo_node *n, unsigned level, uint64_t size_bytes,
                       const struct iod_bitmap *cpuset, struct iod_err *e);
int iod_topo_add_bridge(struct iod_topo_node *n, enum iod_topo_bridge_kind kind, int parent,
                        int numa, uint32_t pci_addr, struct iod_err *e);
/* Copy *d in; fields finalize derives (name, gpu_index, unit) are reset. */
int iod_topo_add_device(struct iod_topo_node *n, const struct iod_topo_device *d,
                        struct iod_err *e);
/* Bond `links` NVLinks between devices a and b (adds to what is there). */
int iod_topo_add_nvlink(struct iod_topo_node *n, unsigned a, unsigned b, unsigned links,
                        bool nvswitch, struct iod_err *e);
/*
 * Derive everything else: package/NUMA of bridges and devices, CPU affinity,
 * GPU order and names, the link matrix from the PCI tree, NVLink islands,
 * compute units, totals. Validates the model: -EINVAL with e naming the
 * problem (no NUMA node, a device under a missing bridge, a cycle...).
 */
int iod_topo_node_finalize(struct iod_topo_node *n, struct iod_err *e);

/* A device with sensible defaults for its kind (bridge/numa/package -1). */
void iod_topo_device_init(struct iod_topo_device *d, enum iod_topo_dev_kind kind);
/*
 * Compare two nodes on everything but their name, model name and source:
 * true when the hardware is the same. Otherwise writes the first difference
 * ("devices[3].mem_bytes: 85899345920 != 0") to why.
 */
bool iod_topo_node_same(const struct iod_topo_node *a, const struct iod_topo_node *b, char *why,
                        size_t why_len);

/* ---- sources ------------------------------------------------------------ */

/* Names of the built-in models, NULL-terminated, in documentation order.
 * "generic-N" (N = 1..IOD_TOPO_GENERIC_GPUS_MAX) is accepted besides these. */
const char *const *iod_topo_model_names(void);
/* Load a built-in model by name: -ENOENT with a did-you-mean in e. */
int iod_topo_model_load(const char *name, struct iod_topo_node *n, struct iod_err *e);
/*
 * The default model `--gpus TOTAL --nodes N` uses for each node (TOTAL/N
 * GPUs): "generic-<gpus>", a PCIe box with NVLink-bridged pairs
 * (docs/topology.md gives the layout). gpus may be 0..IOD_TOPO_GENERIC_GPUS_MAX;
 * -EINVAL beyond.
 */
int iod_topo_model_generic(unsigned gpus, struct iod_topo_node *n, struct iod_err *e);

/* Load an hwloc XML file / buffer (hwloc 2.x format, NVLinkBandwidth honoured). */
int iod_topo_load_xml_file(const char *path, struct iod_topo_node *n, struct iod_err *e);
int iod_topo_load_xml_buffer(const char *buf, size_t len, struct iod_topo_node *n,
                             struct iod_err *e);
/* Discover this machine with hwloc (+ NVML via dlopen when present). */
int iod_topo_discover(struct iod_topo_node *n, struct iod_err *e);
/* True when libnvidia-ml.so.1 could be loaded and initialised. */
bool iod_topo_nvml_available(void);

/*
 * GPU telemetry through NVML (dlopen, like discovery): one reading per GPU
 * NVML lists. Open returns NULL without the library or a driver; read
 * fills up to max readings (0 or -EIO). The agent's telemetry calls these
 * once per sample; nothing here keeps history.
 */
struct iod_topo_gpu_reading {
	uint32_t index;              /* NVML index */
	char pci[32];                /* "0000:04:00.0" */
	char uuid[96];               /* "GPU-..." */
	char model[96];              /* "NVIDIA H100 80GB HBM3" */
	double util_pct;             /* nvmlDeviceGetUtilizationRates .gpu */
	uint64_t mem_used_bytes;     /* nvmlDeviceGetMemoryInfo */
	uint64_t mem_total_bytes;    /* nvmlDeviceGetMemoryInfo */
	double power_w;              /* nvmlDeviceGetPowerUsage / 1000 */
	double temp_c;               /* nvmlDeviceGetTemperature (GPU sensor) */
	uint64_t pcie_bytes_per_s;   /* nvmlDeviceGetPcieThroughput tx + rx */
	uint64_t nvlink_bytes_total; /* NVLink data throughput fields tx + rx */
};
struct iod_topo_nvml;
struct iod_topo_nvml *iod_topo_nvml_open(void);
void iod_topo_nvml_close(struct iod_topo_nvml *m);
int iod_topo_nvml_read(struct iod_topo_nvml *m, struct iod_topo_gpu_reading *out, uint32_t max,
                       uint32_t *n);

/* ---- output ------------------------------------------------------------- */

/* `nvidia-smi topo -m` form: GPUs then NICs/DPUs, CPU and NUMA affinity. */
int iod_topo_format_matrix(const struct iod_topo_node *n, struct iod_buf *out);
/* A summary like lstopo's. */
int iod_topo_format_text(const struct iod_topo_node *n, struct iod_buf *out);
/* Graphviz: clusters per socket and switch, links labelled class + bandwidth. */
int iod_topo_format_dot(const struct iod_topo_node *n, struct iod_buf *out);
/* An hwloc 2.x XML document that iod_topo_load_xml_* reads back to the same node. */
int iod_topo_format_xml(const struct iod_topo_node *n, struct iod_buf *out);
/* The whole model as JSON (new reference; NULL on out of memory). */
json_t *iod_topo_to_json(const struct iod_topo_node *n);
/*
 * The node back from iod_topo_to_json()'s JSON (e.g. an agent's registered
 * topology). The value is untrusted: every field is checked; -EINVAL with
 * the field's path in e ("devices[3].pci: ..."). Derived fields (link
 * classes, units, islands) are recomputed, not read.
 */
int iod_topo_from_json(const json_t *j, struct iod_topo_node *n, struct iod_err *e);

/* ---- queries (pure, no allocation) -------------------------------------- */

static inline unsigned iod_topo_gpu_count(const struct iod_topo_node *n)
{
	return n->ngpus;
}
/* Device index of GPU g (g < ngpus). */
static inline unsigned iod_topo_gpu_device(const struct iod_topo_node *n, unsigned g)
{
	IOD_ASSERT_HOT(g < n->ngpus);
	return (unsigned)n->gpu[g];
}
/* Effective class between devices a and b: NVLINK when bonded, else the PCIe class. */
enum iod_topo_link_class iod_topo_link_class(const struct iod_topo_node *n, unsigned a, unsigned b);
/* Estimated bandwidth a->b per direction (bits/s) and latency (ns): see docs. */
uint64_t iod_topo_link_bw_bps(const struct iod_topo_node *n, unsigned a, unsigned b);
uint64_t iod_topo_link_latency_ns(const struct iod_topo_node *n, unsigned a, unsigned b);

/* go-gpuallocator scores (GPU indexes): SYS 10, NODE 20, PHB 30, PXB 40,
 * PIX 50, same board 60, +100 per NVLink. A set scores the sum over its pairs. */
#define IOD_TOPO_SCORE_NVLINK 100
unsigned iod_topo_gpu_pair_score(const struct iod_topo_node *n, unsigned g1, unsigned g2);
uint64_t iod_topo_gpu_set_score(const struct iod_topo_node *n, const struct iod_bitmap *gpus);

/*
 * The NIC (or DPU) nearest to a GPU set: the smallest worst PCIe class to
 * any GPU of the set, then the smallest sum of classes, then the fastest
 * ports, then the lowest index. Returns a device index, -1 if the node has
 * no NIC or the set is empty.
 */
int iod_topo_nearest_nic(const struct iod_topo_node *n, const struct iod_bitmap *gpus);
/* The NUMA node (index) holding most GPUs of the set (ties: lowest index);
 * -1 when the set is empty or no GPU has a NUMA node. */
int iod_topo_nearest_numa(const struct iod_topo_node *n, const struct iod_bitmap *gpus);
/* The union of the CPU affinities of the set's GPUs (all PUs if empty). */
void iod_topo_nearest_cpuset(const struct iod_topo_node *n, const struct iod_bitmap *gpus,
                             struct iod_bitmap *out);
/*
 * NVLink islands among the GPUs in `within` (connected components of the
 * NVLink graph restricted to that set; a GPU without NVLinks is an island of
 * one). Writes up to max islands, largest first, ties by lowest GPU index;
 * returns the number of islands (may exceed max; only max are written).
 */
unsigned iod_topo_nvlink_islands(const struct iod_topo_node *n, const struct iod_bitmap *within,
                                 struct iod_bitmap *islands, unsigned max);
/* True when a unit of type `have` satisfies a request for `want`
 * (a tensor-core GPU also serves cuda-core requests). */
bool iod_topo_unit_satisfies(enum iod_compute_type have, enum iod_compute_type want);
/* Units of a type on the node (count summed over units that satisfy it). */
uint32_t iod_topo_units_count(const struct iod_topo_node *n, enum iod_compute_type want);

#endif
