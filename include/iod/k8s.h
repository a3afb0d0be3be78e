/*
 * k8s.h: iod as a Kubernetes (and Slurm) component: the CNI plugin.
 *
 * The pure half (src/k8s/cni.c): the network configuration a runtime sends
 * on stdin, the CNI_* environment, the spec's result, error and version
 * JSON (CNI spec 1.1). The shell (src/k8s/cni_run.c) does the links,
 * namespaces and the address state. docs/kubernetes.md.
 */
#ifndef IOD_K8S_H
#define IOD_K8S_H

#include "iod/base.h"

#include <stdbool.h>
#include <stdint.h>

/* The spec's error codes (CNI spec 1.1, "Error"); 100+ are the plugin's. */
enum iod_cni_code {
	IOD_CNI_E_VERSION = 1,      /* incompatible CNI version */
	IOD_CNI_E_FIELD = 2,        /* unsupported field in the network configuration */
	IOD_CNI_E_CONTAINER = 3,    /* container unknown or does not exist */
	IOD_CNI_E_ENV = 4,          /* invalid necessary environment variables */
	IOD_CNI_E_IO = 5,           /* I/O failure */
	IOD_CNI_E_DECODE = 6,       /* failed to decode content */
	IOD_CNI_E_CONFIG = 7,       /* invalid network config */
	IOD_CNI_E_AGAIN = 11,       /* try again later */
	IOD_CNI_E_UNAVAILABLE = 50, /* STATUS: cannot serve ADD */
	IOD_CNI_E_IPAM = 100,       /* iod: no address (the subnet is full) */
	IOD_CNI_E_EXISTS = 101,     /* iod: the interface exists in the container */
	IOD_CNI_E_LINK = 102,       /* iod: creating a link or address failed */
	IOD_CNI_E_CHECK = 103,      /* iod: CHECK found the attachment not as it was made */
};

struct iod_cni_error {
	int code;                      /* enum iod_cni_code */
	char msg[160];                 /* short: what failed */
	char details[IOD_ERR_MSG_MAX]; /* longer: where and what to do */
};

enum iod_cni_cmd {
	IOD_CNI_ADD,
	IOD_CNI_DEL,
	IOD_CNI_CHECK,
	IOD_CNI_GC,
	IOD_CNI_STATUS,
	IOD_CNI_VERSION,
};

/* The CNI_* environment of one call. */
struct iod_cni_env {
	enum iod_cni_cmd cmd;
	const char *container_id; /* CNI_CONTAINERID */
	const char *netns;        /* CNI_NETNS (a path) */
	const char *ifname;       /* CNI_IFNAME */
	const char *args;         /* CNI_ARGS, unused */
	const char *path;         /* CNI_PATH, unused (iod delegates to no plugin) */
};

/* The versions this plugin speaks, newest last; the result follows the
 * configuration's cniVersion. */
#define IOD_CNI_VERSION_LATEST "1.1.0"

/* One (container, interface) attachment that GC must keep. */
struct iod_cni_attachment {
	char container_id[IOD_CNI_ID_MAX];
	char ifname[16];
};

/* The network configuration (one plugin's entry of a conflist, with the
 * name and cniVersion a runtime injects). */
struct iod_cni_conf {
	char version[16];                 /* cniVersion */
	char name[IOD_NAME_MAX];          /* network name */
	char type[IOD_NAME_MAX];          /* "iod" */
	char bridge[16];                  /* Linux bridge the pods attach to (default iodcni0) */
	uint32_t mtu;                     /* 0 = the kernel's default */
	char subnet[32];                  /* ipam.subnet, an IPv4 CIDR (/16../29) */
	char data_dir[256];               /* ipam.dataDir: address state (default below) */
	json_t *prev_result;              /* borrowed from root; NULL when absent */
	struct iod_cni_attachment *valid; /* GC: cni.dev/valid-attachments (malloc'd) */
	uint32_t valid_n;
	bool has_valid;
	json_t *root; /* owned */
};
#define IOD_CNI_DATA_DIR "/var/lib/iod/cni/networks"

/* The command named by CNI_COMMAND; -EINVAL (err filled) for another. */
int iod_cni_cmd_parse(const char *s, enum iod_cni_cmd *cmd, struct iod_cni_error *err);
/* Check the variables cmd needs are present and well formed (code 4). */
int iod_cni_env_check(const struct iod_cni_env *env, struct iod_cni_error *err);
/* Parse and validate stdin's configuration for cmd. VERSION needs only
 * cniVersion. On error err says which code. */
int iod_cni_conf_parse(const char *text, size_t len, enum iod_cni_cmd cmd, struct iod_cni_conf *c,
                       struct iod_cni_error *err);
void iod_cni_conf_free(struct iod_cni_conf *c);
/* <0, 0, >0 as version a is older than, equal to or newer than b
 * ("major.minor.patch"); unparsable sorts oldest. */
int iod_cni_version_cmp(const char *a, const char *b);
bool iod_cni_version_supported(const char *v);

/* What ADD made: the spec's result is built from it. */
struct iod_cni_attach {
	char bridge[16], bridge_mac[18];
	char host_if[16], host_mac[18];
	char ifname[16], mac[18];
	const char *sandbox;    /* CNI_NETNS */
	uint32_t addr, gateway; /* host order */
	uint32_t prefix;
};

/* The result JSON in c's cniVersion: c's prevResult (if any) with this
 * plugin's interfaces, address and default route appended. New reference. */
json_t *iod_cni_result(const struct iod_cni_conf *c, const struct iod_cni_attach *a);
/* The error JSON ({cniVersion, code, msg, details}). New reference. */
json_t *iod_cni_error_json(const char *version, const struct iod_cni_error *err);
/* VERSION's answer. New reference. */
json_t *iod_cni_version_json(const char *version);
/* Fill err (returns -EINVAL for chaining). */
int iod_cni_fail(struct iod_cni_error *err, int code, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The address owner key of one attachment: a fixed-width hash of the
 * container id and interface (the allocator's names are short). */
void iod_cni_owner_key(const char *container_id, const char *ifname, char *buf, size_t len);

/* ---- the shell (cni_run.c) ---------------------------------------------- */

/* Run one CNI call: reads nothing, writes the result (or nothing) to out.
 * Returns 0 or fills err. */
int iod_cni_run(const struct iod_cni_env *env, const struct iod_cni_conf *c, json_t **out,
                struct iod_cni_error *err);

/* ---- topology for other schedulers (topo_export.c, pure) ---------------- */

#include "iod/topo.h"

/* One node of the cluster: its name, rack (its leaf switch), zone (the
 * spine tier above the racks) and hardware. */
struct iod_k8s_node {
	const char *name;
	const char *rack;
	const char *zone;
	const struct iod_topo_node *topo;
};

/* Topograph's label keys (network.topology.nvidia.com/...) and iod's own. */
#define IOD_K8S_LABEL_ACCEL "network.topology.nvidia.com/accelerator"
#define IOD_K8S_LABEL_LEAF "network.topology.nvidia.com/leaf"
#define IOD_K8S_LABEL_SPINE "network.topology.nvidia.com/spine"
#define IOD_K8S_LABEL_CORE "network.topology.nvidia.com/core"

/* {node: {label: value}} for every node, deterministic. New reference. */
json_t *iod_k8s_labels(const struct iod_k8s_node *nodes, uint32_t n);
/* Slurm's topology.yaml: a tree topology (racks under zones, a core above
 * several zones; cluster_default) and a block topology (a block per rack).
 * -EINVAL (e says why) for no nodes or a name Slurm cannot take. */
int iod_slurm_topology(const struct iod_k8s_node *nodes, uint32_t n, struct iod_buf *out,
                       struct iod_err *e);
/* names as a Slurm hostlist expression ("n[0-3,7],gpu01"). */
int iod_slurm_hostlist(const char *const *names, uint32_t n, struct iod_buf *out);

/*
 * DRA (resource.k8s.io/v1): node t's GPUs and DPUs as one ResourceSlice
 * (YAML) of driver (e.g. "iod.dev") on node, each device with the
 * attributes type, index, model, uuid, pciBusID, numaNode, pcieSwitch (the
 * switch right above it), pcieRoot, and for GPUs nvlinkDomain (its NVLink
 * island, "<node>.nvl<k>", with 2+ GPUs), nvlinkDomainSize and nearestNIC;
 * capacity memory. -EINVAL for a node or driver that is not a DNS
 * subdomain, -ENOENT when t has neither GPU nor DPU.
 */
int iod_k8s_dra_slice(const struct iod_topo_node *t, const char *node, const char *driver,
                      struct iod_buf *out, struct iod_err *e);

/* ---- the kube-scheduler extender (extender.c, pure) ----------------------- */

#include "iod/sched.h"

/* A node model the extender can place on (the shell loads them). */
struct iod_k8s_ext_shape {
	char model[IOD_NAME_MAX];
	struct iod_sched_shape shape;
};
/* A node iod knows by name (its model, rack and zone). */
struct iod_k8s_ext_node {
	char name[IOD_NAME_MAX];
	uint32_t shape; /* index into shapes */
	char rack[IOD_NAME_MAX], zone[IOD_NAME_MAX];
};
struct iod_k8s_ext {
	const struct iod_k8s_ext_shape *shapes;
	uint32_t shapes_n;
	const struct iod_k8s_ext_node *nodes;
	uint32_t nodes_n;
};
/* kube-scheduler's MaxExtenderPriority: prioritize scores are 0..10. */
#define IOD_K8S_EXT_SCORE_MAX 10

/*
 * Answer one extender call (verb "filter" or "prioritize") on ExtenderArgs
 * JSON ({Pod, Nodes | NodeNames}). A node's model is its label
 * iod.dev/model, else the known node of that name; annotation
 * iod.dev/gpus-used (a GPU list, "0-3") marks GPUs taken. The pod asks for
 * the sum of its containers' iod.dev/gpu (or nvidia.com/gpu) limits, with
 * annotations iod.dev/gpu-link (nvlink|pcie|any) and iod.dev/numa (a
 * Topology Manager policy). Each node is judged by iod's scheduler alone:
 * filter gives ExtenderFilterResult (FailedNodes with iod's reason),
 * prioritize a HostPriorityList (iod's score scaled to 0..10, best = 10).
 * Bad args: -EINVAL with e set (the shell answers {"Error": ...}).
 */
int iod_k8s_ext_answer(const struct iod_k8s_ext *x, const char *verb, const char *body, size_t len,
                       json_t **out, struct iod_err *e);

/* ---- the device plugin's GetPreferredAllocation (devplugin.c, pure) ------ */

/*
 * The GPUs (indexes of node t) one container should get: size of
 * available, including must (kubelet's mustIncludeDeviceIDs). Without must
 * it is sched/'s choice (its exact GPU-set search, NVLink islands, NUMA,
 * the nearest NIC) on the node with every other GPU taken; with must, the
 * superset of must with the best go-gpuallocator score (as NVIDIA's plugin
 * scores), by exhaustive search up to 16 GPUs. -EINVAL (e says why) when
 * size is 0, larger than available, or must is not within available.
 */
int iod_k8s_preferred(const struct iod_topo_node *t, uint32_t available, uint32_t must,
                      uint32_t size, uint32_t *out, struct iod_err *e);

/* ---- the device plugin (v1beta1 over gRPC): messages (dp_wire.c, pure) ---- */

/*
 * kubelet's device plugin API v1beta1 (k8s.io/kubelet/pkg/apis/deviceplugin/
 * v1beta1/api.proto; src/k8s/deviceplugin.proto is iod's own writing of its
 * messages). gRPC carries each protobuf message behind a 5-byte prefix:
 * a compressed flag (iod asks for no compression and refuses 1) and a
 * big-endian length. Decoding is bounded by the limits below; anything else
 * is -EINVAL with e saying where, never a crash (tests/fuzz/fuzz_k8s_grpc.c).
 */
#define IOD_DP_API_VERSION "v1beta1"
#define IOD_DP_MSG_MAX (4u << 20) /* gRPC's default max receive message */
#define IOD_DP_IDS_MAX 64         /* device ids in one list */
#define IOD_DP_ID_MAX 64          /* bytes of one device id, NUL included */
#define IOD_DP_CONTAINERS_MAX 16  /* container requests in one call */
#define IOD_DP_ENVS_MAX 8
#define IOD_DP_DEVSPECS_MAX (IOD_DP_IDS_MAX + 4)

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum iod_grpc_status {
	IOD_GRPC_OK = 0,
	IOD_GRPC_INVALID_ARGUMENT = 3,
	IOD_GRPC_NOT_FOUND = 5,
	IOD_GRPC_RESOURCE_EXHAUSTED = 8,
	IOD_GRPC_UNIMPLEMENTED = 12,
	IOD_GRPC_INTERNAL = 13,
	IOD_GRPC_UNAVAILABLE = 14,
};

/*
 * One length-prefixed gRPC message at the start of buf: *msg and *mlen point
 * into buf. Returns the bytes it takes (5 + length), 0 when buf holds less
 * than a whole message, or -EINVAL (compressed, over max) with e set.
 */
long iod_grpc_frame_parse(const uint8_t *buf, size_t len, size_t max, const uint8_t **msg,
                          size_t *mlen, struct iod_err *e);
/* Append the 5-byte prefix and msg to out. */
int iod_grpc_frame_put(struct iod_buf *out, const void *msg, size_t len);

struct iod_dp_ids {
	uint32_t n;
	char id[IOD_DP_IDS_MAX][IOD_DP_ID_MAX];
};

/* One ContainerPreferredAllocationRequest / ContainerAllocateRequest. */
struct iod_dp_creq {
	struct iod_dp_ids available; /* preferred: available_deviceIDs (1) */
	struct iod_dp_ids must;      /* preferred: must_include_deviceIDs (2) */
	struct iod_dp_ids ids;       /* allocate: devices_ids (1) */
	int32_t size;                /* preferred: allocation_size (3) */
};

/* PreferredAllocationRequest, AllocateRequest (container_requests = 1) or
 * PreStartContainerRequest (devices_ids = 1, into c[0].ids, n = 1). */
enum iod_dp_req_kind { IOD_DP_REQ_PREFERRED, IOD_DP_REQ_ALLOCATE, IOD_DP_REQ_PRESTART };
struct iod_dp_req {
	uint32_t n;
	struct iod_dp_creq c[IOD_DP_CONTAINERS_MAX];
};
int iod_dp_req_decode(enum iod_dp_req_kind kind, const uint8_t *msg, size_t len,
                      struct iod_dp_req *out, struct iod_err *e);

/* A device as ListAndWatch reports it. */
struct iod_dp_device {
	char id[IOD_DP_ID_MAX];
	bool healthy;
	int32_t numa; /* the OS's NUMA node number, -1 unknown (no topology sent) */
};

/* One ContainerAllocateResponse. */
struct iod_dp_kv {
	char key[IOD_NAME_MAX];
	char value[IOD_DP_IDS_MAX * 4];
};
struct iod_dp_path {
	char container_path[128], host_path[128];
	char permissions[4]; /* device specs: "rw"/"rwm" */
	bool read_only;      /* mounts */
};
struct iod_dp_alloc {
	uint32_t nenvs, nmounts, ndevices;
	struct iod_dp_kv envs[IOD_DP_ENVS_MAX];
	struct iod_dp_path mounts[4];
	struct iod_dp_path devices[IOD_DP_DEVSPECS_MAX];
};

/* Message encoders (the bare protobuf, no gRPC prefix): append to out. */
int iod_dp_enc_options(struct iod_buf *out, bool pre_start_required, bool preferred_available);
int iod_dp_enc_register(struct iod_buf *out, const char *endpoint, const char *resource,
                        bool pre_start_required, bool preferred_available);
int iod_dp_enc_devices(struct iod_buf *out, const struct iod_dp_device *d, uint32_t n);
int iod_dp_enc_preferred(struct iod_buf *out, const struct iod_dp_ids *per_container, uint32_t n);
int iod_dp_enc_allocate(struct iod_buf *out, const struct iod_dp_alloc *per_container, uint32_t n);

/* ---- the device plugin's decisions (devplugin.c, pure) ------------------- */

/* The resources iod offers: iod.dev/gpu (the node's GPUs, ids "gpu0"..) and
 * iod.dev/dpu (its DPUs, ids "dpu0".. in device order). */
enum iod_dp_resource { IOD_DP_GPU, IOD_DP_DPU };
const char *iod_dp_resource_name(enum iod_dp_resource r); /* "iod.dev/gpu" */

/* The devices of r on node t, healthy unless named in unhealthy. */
uint32_t iod_dp_devices(const struct iod_topo_node *t, enum iod_dp_resource r,
                        const struct iod_dp_ids *unhealthy, struct iod_dp_device *out,
                        uint32_t max);
/* GetPreferredAllocation for one container: GPUs by iod_k8s_preferred; DPUs
 * the must-include ones, then the available ones nearest (NUMA) to them.
 * -EINVAL (e says why) for an unknown id, a bad size. */
int iod_dp_preferred(const struct iod_topo_node *t, enum iod_dp_resource r,
                     const struct iod_dp_creq *q, struct iod_dp_ids *out, struct iod_err *e);
/* Allocate for one container: the environment iod's own replicas get
 * (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, IOD_NUMA_NODE, IOD_CPUS
 * for GPUs; IOD_DPUS for DPUs) and the device nodes. -EINVAL for an
 * unknown id. */
int iod_dp_allocate(const struct iod_topo_node *t, enum iod_dp_resource r,
                    const struct iod_dp_ids *ids, struct iod_dp_alloc *out, struct iod_err *e);

/* ---- the device plugin's gRPC server (dp_serve.c, the shell) ------------- */

struct iod_dp_serve_opts {
	const struct iod_topo_node *topo;
	bool resource[2];           /* which of enum iod_dp_resource to serve */
	const char *dir;            /* kubelet's device-plugins dir */
	const char *kubelet_socket; /* NULL: <dir>/kubelet.sock; "" = do not register */
	const char *unhealthy_file; /* device ids one a line, polled; NULL none */
	volatile int *stop;         /* set non-zero to return */
};
#define IOD_DP_DIR "/var/lib/kubelet/device-plugins"

/* Serve until *stop: listen on <dir>/iod-gpu.sock (iod-dpu.sock), register
 * each with kubelet, re-register when kubelet removes the socket (it
 * restarted). Returns 0 or fills e. */
int iod_dp_serve(const struct iod_dp_serve_opts *o, struct iod_err *e);

#endif
