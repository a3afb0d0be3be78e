/*
 * objects.h: the cluster's objects as typed values: Node, Service, Replica,
 * Endpoint, Checkpoint, Policy, Config, Fault, XferPeer and NetPolicy, each read from and written to the JSON the
 * control plane stores in one place (src/state/objects.c).
 *
 * Why: the state machine stores free-form JSON documents, and every module
 * that reads or writes one used to spell its keys itself; adding a field to
 * a Replica meant grepping five modules. Now a field has one home: its row
 * in the object's field table (IOD_OBJ_<KIND>_FIELDS), its member in the
 * struct, its type and its default. docs/control-plane.md lists the same
 * fields.
 *
 * Rules every kind follows:
 *   - from_json fills every known field that is present with the right
 *     type and marks it in `has`; a field absent keeps its default. Keys
 *     this version does not know, and known keys of the wrong type, are
 *     kept untouched in `extra`, so a read-modify-write never loses what a
 *     newer (or older) writer stored. A wrong-typed field is still an
 *     error (-EINVAL, the field named in e) for callers that check, and
 *     the object is filled all the same for those that tolerate it.
 *   - to_json writes the version, then the fields marked in `has` in table
 *     order, then `extra`.
 *   - Old shapes still load: an Endpoint stored with "address"
 *     ("host:port") and "health" ("healthy"/"unhealthy") reads as addr,
 *     port and healthy; it is written back in the new shape only.
 *   - Setters mark the field present; iod_obj_clear removes it.
 *
 * Pure: JSON in, values out; no I/O, no clock.
 */
#ifndef IOD_OBJECTS_H
#define IOD_OBJECTS_H

#include "iod/base.h"

/* The object schema this code writes ("version" in every object). 1: the
 * first typed objects (Endpoint without address/health). */
#define IOD_OBJ_VERSION 1

/* Field types a table row can have. */
enum iod_obj_type {
	IOD_OBJ_STR,  /* char[size], NUL-terminated; longer values are an error */
	IOD_OBJ_UINT, /* unsigned integer of `size` bytes, bounded by max */
	IOD_OBJ_INT,  /* signed integer of `size` bytes, min..max */
	IOD_OBJ_BOOL, /* bool */
	IOD_OBJ_JSON, /* json_t * (owned, any JSON value) */
};

/* What every object starts with. */
struct iod_obj_head {
	uint32_t version; /* the "version" it was stored with (0 = before typed objects) */
	uint64_t has;     /* bit f set: field f was present (or set) */
	json_t *extra;    /* owned: keys not known here, kept as they are; NULL = none */
};

/*
 * X(ENUM, "key", TYPE, member, min, max, default): one row per field, in
 * the order to_json writes them. min/max bound integers; default is what
 * an absent integer reads as.
 */

/* ---- Replica: one replica of a service, placed (or not) on a node -------- */

#define IOD_OBJ_REPLICA_FIELDS(X)                                                         \
	X(SERVICE, "service", STR, service, 0, 0, 0)                                      \
	X(ORDINAL, "ordinal", UINT, ordinal, 0, IOD_SPEC_REPLICAS_MAX - 1, 0)             \
	X(NODE, "node", STR, node, 0, 0, 0)                                               \
	X(GPUS, "gpus", STR, gpus, 0, 0, 0)                                               \
	X(CPUS, "cpus", STR, cpus, 0, 0, 0)                                               \
	X(MEM_NUMA, "mem_numa", INT, mem_numa, -1, 1023, -1)                              \
	X(NIC, "nic", INT, nic, -1, INT32_MAX, -1)                                        \
	X(MEM_BYTES, "mem_bytes", UINT, mem_bytes, 0, INT64_MAX, 0)                       \
	X(CPU_MILLIS, "cpu_millis", UINT, cpu_millis, 0, UINT32_MAX, 0)                   \
	X(PHASE, "phase", STR, phase, 0, 0, 0)                                            \
	X(RESTARTS, "restarts", UINT, restarts, 0, UINT32_MAX, 0)                         \
	X(GENERATION, "generation", UINT, generation, 0, INT64_MAX, 0)                    \
	X(REASONS, "reasons", JSON, reasons, 0, 0, 0)                                     \
	X(CPU_AFFINITY, "cpu_affinity", STR, cpu_affinity, 0, 0, 0)                       \
	X(ACCELERATORS, "accelerators", STR, accelerators, 0, 0, 0)                       \
	X(ACCELERATOR_DEVICES, "accelerator_devices", JSON, accelerator_devices, 0, 0, 0) \
	X(EXPLAIN, "explain", JSON, explain, 0, 0, 0)                                     \
	X(NUMA, "numa", INT, numa, -1, 1023, -1)                                          \
	X(READY, "ready", BOOL, ready, 0, 0, 0)                                           \
	X(REASON, "reason", STR, reason, 0, 0, 0)                                         \
	X(PORT, "port", UINT, port, 0, 65535, 0)                                          \
	X(ADDR, "addr", STR, addr, 0, 0, 0)                                               \
	X(UPDATED_MS, "updated_ms", UINT, updated_ms, 0, INT64_MAX, 0)                    \
	X(LOST_MS, "lost_ms", UINT, lost_ms, 0, INT64_MAX, 0)                             \
	X(MOVED_FROM, "moved_from", STR, moved_from, 0, 0, 0)                             \
	X(TENANT, "tenant", STR, tenant, 0, 0, 0)                                         \
	X(NIC_BW_BPS, "nic_bw_bps", UINT, nic_bw_bps, 0, INT64_MAX, 0)

enum iod_obj_replica_field {
#define X(f, k, t, m, lo, hi, d) IOD_OBJ_REPLICA_##f,
	IOD_OBJ_REPLICA_FIELDS(X)
#undef X
	    IOD_OBJ_REPLICA_FIELD_COUNT
};

struct iod_obj_replica {
	struct iod_obj_head head;
	char service[IOD_NAME_MAX];         /* its service */
	uint32_t ordinal;                   /* 0-based index in the service */
	char node[IOD_NAME_MAX];            /* where it is placed ("" = nowhere) */
	char gpus[IOD_OBJ_SET_MAX];         /* GPU indexes on the node ("0-3") */
	char cpus[IOD_OBJ_SET_MAX];         /* exclusive CPUs ("" = none) */
	int32_t mem_numa;                   /* memory NUMA node; -1 = no policy */
	int32_t nic;                        /* the NIC the scheduler chose; -1 = none */
	uint64_t mem_bytes;                 /* memory request */
	uint32_t cpu_millis;                /* CPU request in 1/1000 core */
	char phase[IOD_OBJ_WORD_MAX];       /* agent phase (iod_agent_phase_name), "lost" */
	uint32_t restarts;                  /* restarts its agent counted */
	uint64_t generation;                /* the service generation it runs */
	json_t *reasons;                    /* owned: why it is where it is (strings) */
	char cpu_affinity[IOD_OBJ_SET_MAX]; /* shared NUMA-local CPUs ("" = any) */
	char accelerators[IOD_OBJ_SET_MAX]; /* whole DPUs/FPGAs (indexes) */
	json_t *accelerator_devices;        /* owned: their devices (sched's JSON) */
	json_t *explain;                    /* owned: the scheduler's candidates */
	int32_t numa;                       /* old name of mem_numa; -1 = none */
	bool ready;                         /* its health check passes */
	char reason[IOD_OBJ_REASON_MAX];    /* the last phase's reason */
	uint16_t port;                      /* where it listens ($IOD_PORT) */
	char addr[IOD_ADDR_MAX];            /* its own address (netns); "" = its node's */
	uint64_t updated_ms;                /* its agent's last report (unix ms) */
	uint64_t lost_ms;                   /* when its node was seen lost (unix ms) */
	char moved_from[IOD_NAME_MAX];      /* the lost node it was moved from */
	char tenant[IOD_NAME_MAX];          /* whose it is (identity key) */
	uint64_t nic_bw_bps;                /* resources.network.bandwidth: the NIC bandwidth
	                                     * the scheduler counts and its egress meter */
};

/* ---- Endpoint: where a replica answers, and whether it takes traffic ----- */

#define IOD_OBJ_ENDPOINT_FIELDS(X)                    \
	X(REPLICA, "replica", STR, replica, 0, 0, 0)  \
	X(SERVICE, "service", STR, service, 0, 0, 0)  \
	X(NODE, "node", STR, node, 0, 0, 0)           \
	X(ADDR, "addr", STR, addr, 0, 0, 0)           \
	X(PORT, "port", UINT, port, 0, 65535, 0)      \
	X(HEALTHY, "healthy", BOOL, healthy, 0, 0, 0) \
	X(PHASE, "phase", STR, phase, 0, 0, 0)        \
	X(UID, "uid", UINT, uid, 0, UINT32_MAX, 0)

enum iod_obj_endpoint_field {
#define X(f, k, t, m, lo, hi, d) IOD_OBJ_ENDPOINT_##f,
	IOD_OBJ_ENDPOINT_FIELDS(X)
#undef X
	    IOD_OBJ_ENDPOINT_FIELD_COUNT
};

struct iod_obj_endpoint {
	struct iod_obj_head head;
	char replica[IOD_NAME_MAX];   /* the replica it is (same name as the object) */
	char service[IOD_NAME_MAX];   /* its service */
	char node[IOD_NAME_MAX];      /* the node it runs on */
	char addr[IOD_ADDR_MAX];      /* host (IPv4 or name); with port, where it answers */
	uint16_t port;                /* its port */
	bool healthy;                 /* takes traffic */
	char phase[IOD_OBJ_WORD_MAX]; /* its replica's phase */
	uint32_t uid;                 /* the uid its connections carry (its sandbox's):
	                                 how the mesh knows who calls; 0 = none */
};

/* "addr:port" of an endpoint into buf ("" when it has no address). */
void iod_obj_endpoint_address(const struct iod_obj_endpoint *ep, char *buf, size_t len);

/* ---- Node: a machine, registered by its agent with a lease --------------- */

#define IOD_OBJ_NODE_FIELDS(X)                                                  \
	X(ADDR, "addr", STR, addr, 0, 0, 0)                                     \
	X(GPUS, "gpus", JSON, gpus, 0, 0, 0)                                    \
	X(CPUS, "cpus", UINT, cpus, 0, UINT32_MAX, 0)                           \
	X(MODEL, "model", STR, model, 0, 0, 0)                                  \
	X(AGENT_PID, "agent_pid", UINT, agent_pid, 0, INT32_MAX, 0)             \
	X(REGISTERED_MS, "registered_ms", UINT, registered_ms, 0, INT64_MAX, 0) \
	X(TOPOLOGY, "topology", JSON, topology, 0, 0, 0)                        \
	X(LABELS, "labels", JSON, labels, 0, 0, 0)                              \
	X(RACK, "rack", STR, rack, 0, 0, 0)                                     \
	X(ZONE, "zone", STR, zone, 0, 0, 0)                                     \
	X(CORDONED, "cordoned", BOOL, cordoned, 0, 0, 0)                        \
	X(MESH_MTLS, "mesh_mtls", STR, mesh_mtls, 0, 0, 0)                      \
	X(CKPT_PEER, "ckpt_peer", STR, ckpt_peer, 0, 0, 0)                      \
	X(TELEMETRY, "telemetry", STR, telemetry, 0, 0, 0)                      \
	X(SUBNET, "subnet", STR, subnet, 0, 0, 0)

enum iod_obj_node_field {
#define X(f, k, t, m, lo, hi, d) IOD_OBJ_NODE_##f,
	IOD_OBJ_NODE_FIELDS(X)
#undef X
	    IOD_OBJ_NODE_FIELD_COUNT
};

struct iod_obj_node {
	struct iod_obj_head head;
	char addr[IOD_ADDR_MAX];      /* where its replicas answer ("" = 127.0.0.1) */
	json_t *gpus;                 /* owned: its GPU count, or a list of GPUs */
	uint32_t cpus;                /* its CPU count */
	char model[IOD_NAME_MAX];     /* built-in model, "host" (discovery), "xml" */
	uint32_t agent_pid;           /* its agent's pid */
	uint64_t registered_ms;       /* when its agent registered (unix ms) */
	json_t *topology;             /* owned: iod_topo_to_json of its hardware */
	json_t *labels;               /* owned: {name: value}; "rack" counts as rack */
	char rack[IOD_NAME_MAX];      /* failure domain */
	char zone[IOD_NAME_MAX];      /* larger failure domain */
	bool cordoned;                /* takes no new replicas */
	char mesh_mtls[IOD_ADDR_MAX]; /* its mesh proxy's mTLS listener ("IP:port";
	                                 "" = none): other nodes' proxies reach its
	                                 replicas through it (docs/security.md) */
	char ckpt_peer[IOD_ADDR_MAX]; /* its agent's checkpoint chunk server
	                                 ("IP:port"; "" = none; docs/storage.md) */
	char telemetry[IOD_ADDR_MAX]; /* its agent's telemetry listener
	                                 ("https://IP:port": mutual TLS, the
	                                 agent's node certificate; "http://IP:port"
	                                 or a bare "IP:port" of an older agent:
	                                 plain, loopback; "" = none): /metrics,
	                                 /v1/telemetry, /v1/dp/dump */
	char subnet[IOD_ADDR_MAX];    /* its replicas' overlay subnet (`iod up --netns`,
	                                 "10.200.2.0/24"); "" = none: the control
	                                 plane's IPAM gives its replicas no address */
};

/* The node's GPU count ("gpus" as a count or a list), at most IOD_BITMAP_BITS. */
uint32_t iod_obj_node_gpus(const struct iod_obj_node *n);
/* Its rack: "rack", else labels.rack; "" when neither. */
const char *iod_obj_node_rack(const struct iod_obj_node *n);

/* ---- Service: a deployed service: its normalized spec and generation ----- */

/*
 * The value is the spec's JSON of the service (src/spec/spec.c owns those
 * keys; they stay in `extra`) plus the control plane's own fields below.
 */
#define IOD_OBJ_SERVICE_FIELDS(X)                                            \
	X(NAME, "name", STR, name, 0, 0, 0)                                  \
	X(TYPE, "type", STR, type, 0, 0, 0)                                  \
	X(REPLICAS, "replicas", UINT, replicas, 0, IOD_SPEC_REPLICAS_MAX, 0) \
	X(GENERATION, "generation", UINT, generation, 0, INT64_MAX, 0)       \
	X(GPU, "gpu", UINT, gpu, 0, UINT32_MAX, 0)                           \
	X(TENANT, "tenant", STR, tenant, 0, 0, 0)                            \
	X(VIP, "vip", STR, vip, 0, 0, 0)

enum iod_obj_service_field {
#define X(f, k, t, m, lo, hi, d) IOD_OBJ_SERVICE_##f,
	IOD_OBJ_SERVICE_FIELDS(X)
#undef X
	    IOD_OBJ_SERVICE_FIELD_COUNT
};

struct iod_obj_service {
	struct iod_obj_head head;
	char name[IOD_NAME_MAX];     /* its name (the spec's) */
	char type[IOD_OBJ_WORD_MAX]; /* "stateless" | "stateful" */
	uint32_t replicas;           /* replicas the spec asks for */
	uint64_t generation;         /* raised by every deploy of it */
	uint32_t gpu;                /* GPUs per replica the scheduler was asked for */
	char tenant[IOD_NAME_MAX];   /* whose it is (the spec's tenant:; absent in
	                                objects stored before it: read as "default") */
	char vip[IOD_ADDR_MAX];      /* its overlay VIP (the deploy allocates it from
	                                IOD_SVC_VIP_NET: docs/network.md); "" = none */
};

/*
 * The spec's JSON of a stored Service value: a copy without the control
 * plane's fields (generation, gpu, version), what iod_spec_load_buffer
 * takes back. NULL out of memory.
 */
json_t *iod_obj_service_spec(const json_t *value);

/* ---- Config: member.ID records a server's addresses ------------------------ */

#define IOD_OBJ_MEMBER_FIELDS(X)               \
	X(ID, "id", UINT, id, 0, INT64_MAX, 0) \
	X(RAFT, "raft", STR, raft, 0, 0, 0)    \
	X(API, "api", STR, api, 0, 0, 0)

enum iod_obj_member_field {
#define X(f, k, t, m, lo, hi, d) IOD_OBJ_MEMBER_##f,
	IOD_OBJ_MEMBER_FIELDS(X)
#undef X
	    IOD_OBJ_MEMBER_FIELD_COUNT
};

/* Config "member.ID": one control-plane server. Other Config objects are
 * free-form. */
struct iod_obj_member {
	struct iod_obj_head head;
	uint64_t id;             /* its raft id */
	char raft[IOD_ADDR_MAX]; /* its raft address */
	char api[IOD_ADDR_MAX];  /* its API address */
};

/* ---- Fault: an L7 fault in a service's mesh traffic (`iod chaos`) --------- */

/*
 * Istio-style fault injection, applied by every node's mesh proxy to the
 * HTTP requests it routes to `service`: "delay" holds a request delay_ms
 * before it goes upstream, "abort" answers it with `status` at once; each
 * for `percent` of the requests, until until_ms (unix ms; the proxies stop
 * applying it then, whoever else died). docs/chaos.md.
 */
#define IOD_OBJ_FAULT_FIELDS(X)                                                 \
	X(SERVICE, "service", STR, service, 0, 0, 0)                            \
	X(ACTION, "action", STR, action, 0, 0, 0)                               \
	X(PERCENT, "percent", UINT, percent, 1, 100, 100)                       \
	X(DELAY_MS, "delay_ms", UINT, delay_ms, 0, IOD_CHAOS_LATENCY_MAX_MS, 0) \
	X(STATUS, "status", UINT, status, 0, 599, 0)                            \
	X(START_MS, "start_ms", UINT, start_ms, 0, INT64_MAX, 0)                \
	X(UNTIL_MS, "until_ms", UINT, until_ms, 0, INT64_MAX, 0)

enum iod_obj_fault_field {
#define X(f, k, t, m, lo, hi, d) IOD_OBJ_FAULT_##f,
	IOD_OBJ_FAULT_FIELDS(X)
#undef X
	    IOD_OBJ_FAULT_FIELD_COUNT
};

struct iod_obj_fault {
	struct iod_obj_head head;
	char service[IOD_NAME_MAX];    /* the service whose requests it hits */
	char action[IOD_OBJ_WORD_MAX]; /* "delay" | "abort" */
	uint32_t percent;              /* share of requests hit, 1..100 */
	uint32_t delay_ms;             /* delay: how long each is held */
	uint32_t status;               /* abort: the HTTP status answered */
	uint64_t start_ms, until_ms;   /* unix ms: applied, healed */
};

/*
 * A Fault's fields checked together (after from_json): a valid service
 * name, action delay (delay_ms 1..IOD_CHAOS_LATENCY_MAX_MS) or abort
 * (status 200..599), until_ms set. 0, or -EINVAL naming the field.
 */
int iod_obj_fault_check(const struct iod_obj_fault *f, struct iod_err *e);

/* ---- Checkpoint: a committed checkpoint manifest (docs/storage.md) -------
 *
 * Written through Raft by the node that holds the primary copy, once the
 * write quorum (min_size copies of every chunk) holds its chunks: a
 * checkpoint without this object is not visible to a restore elsewhere, so
 * no torn checkpoint is ever visible. Named "<replica>.r<rank>.s<step>". */

#define IOD_OBJ_CHECKPOINT_FIELDS(X)                                         \
	X(SERVICE, "service", STR, service, 0, 0, 0)                         \
	X(REPLICA, "replica", STR, replica, 0, 0, 0)                         \
	X(NODE, "node", STR, node, 0, 0, 0)                                  \
	X(RANK, "rank", UINT, rank, 0, UINT32_MAX, 0)                        \
	X(STEP, "step", UINT, step, 0, INT64_MAX, 0)                         \
	X(BYTES, "bytes", UINT, bytes, 0, INT64_MAX, 0)                      \
	X(CHUNKS, "chunks", UINT, chunks, 0, UINT32_MAX, 0)                  \
	X(CHUNK_BYTES, "chunk_bytes", UINT, chunk_bytes, 0, UINT32_MAX, 0)   \
	X(MANIFEST_XXH3, "manifest_xxh3", STR, manifest_xxh3, 0, 0, 0)       \
	X(TIER, "tier", STR, tier, 0, 0, 0)                                  \
	X(REPLICAS, "replicas", UINT, replicas, 1, 7, 1)                     \
	X(MIN_SIZE, "min_size", UINT, min_size, 1, 7, 1)                     \
	X(COPIES, "copies", JSON, copies, 0, 0, 0)                           \
	X(HEALTH, "health", STR, health, 0, 0, 0)                            \
	X(SCRUB, "scrub", STR, scrub, 0, 0, 0)                               \
	X(COMMITTED_MS, "committed_ms", UINT, committed_ms, 0, INT64_MAX, 0) \
	X(SCRUBBED_MS, "scrubbed_ms", UINT, scrubbed_ms, 0, INT64_MAX, 0)

enum iod_obj_checkpoint_field {
#define X(f, k, t, m, lo, hi, d) IOD_OBJ_CHECKPOINT_##f,
	IOD_OBJ_CHECKPOINT_FIELDS(X)
#undef X
	    IOD_OBJ_CHECKPOINT_FIELD_COUNT
};

struct iod_obj_checkpoint {
	struct iod_obj_head head;
	char service[IOD_NAME_MAX];           /* the stateful service */
	char replica[IOD_NAME_MAX];           /* the replica that saved it */
	char node[IOD_NAME_MAX];              /* the node of the primary copy */
	uint32_t rank;                        /* the rank whose shards these are */
	uint64_t step;                        /* the training step */
	uint64_t bytes;                       /* sum of its regions */
	uint32_t chunks;                      /* chunk files */
	uint32_t chunk_bytes;                 /* the chunk size */
	char manifest_xxh3[IOD_OBJ_WORD_MAX]; /* XXH3-64 of the manifest text, 16 hex digits */
	char tier[IOD_OBJ_WORD_MAX];          /* the medium of the primary copy */
	uint32_t replicas;                    /* copies wanted (size) */
	uint32_t min_size;                    /* the write quorum it was committed with */
	json_t *copies;                       /* owned: [{"node": N, "ok": bool}], primary first */
	char health[IOD_OBJ_WORD_MAX];  /* "clean", "undersized+degraded", ... (Ceph's words) */
	char scrub[IOD_OBJ_REASON_MAX]; /* the last scrub's result ("" = never) */
	uint64_t committed_ms;          /* when the quorum held it (unix ms) */
	uint64_t scrubbed_ms;           /* when scrub was written (unix ms; 0 = never) */
};

/* ---- XferPeer: a replica's libiod-xfer metadata, for its peers ----------- */

/*
 * A replica of `service` publishes what its peers need to reach it over
 * libiod-xfer (docs/transfer.md): the metadata blob of iod_xfer_md_get
 * (UCX worker address, regions, packed remote keys) as lowercase hex in
 * "md". Named "<service>.<ordinal>", so peers find it by service and
 * ordinal. Written by the replica (the node it runs on, or a deployer);
 * a node may write only those of replicas placed on it.
 */
#define IOD_OBJ_XFERPEER_FIELDS(X)                                            \
	X(SERVICE, "service", STR, service, 0, 0, 0)                          \
	X(ORDINAL, "ordinal", UINT, ordinal, 0, IOD_SPEC_REPLICAS_MAX - 1, 0) \
	X(REPLICA, "replica", STR, replica, 0, 0, 0)                          \
	X(NODE, "node", STR, node, 0, 0, 0)                                   \
	X(TRANSPORT, "transport", STR, transport, 0, 0, 0)                    \
	X(PEER, "peer", STR, peer, 0, 0, 0)                                   \
	X(MD, "md", JSON, md, 0, 0, 0)

enum iod_obj_xferpeer_field {
#define X(f, k, t, m, lo, hi, d) IOD_OBJ_XFERPEER_##f,
	IOD_OBJ_XFERPEER_FIELDS(X)
#undef X
	    IOD_OBJ_XFERPEER_FIELD_COUNT
};

struct iod_obj_xferpeer {
	struct iod_obj_head head;
	char service[IOD_NAME_MAX];       /* the service of the replica */
	uint32_t ordinal;                 /* its ordinal in the service */
	char replica[IOD_NAME_MAX];       /* the replica's name */
	char node[IOD_NAME_MAX];          /* the node it runs on ("" = not said) */
	char transport[IOD_OBJ_WORD_MAX]; /* "shm" | "tcp" | "rdma" | "auto" */
	char peer[IOD_NAME_MAX];          /* its libiod-xfer agent name (in the blob) */
	json_t *md;                       /* owned: the blob, a hex string */
};

/* The object's checks beyond types: service, replica, md (even-length hex
 * of at most IOD_XFER_MD_HEX_MAX digits). 0 or -EINVAL naming the field. */
int iod_obj_xferpeer_check(const struct iod_obj_xferpeer *p, struct iod_err *e);

/*
 * Policy objects are service policies: their one home is src/sec/policy.c
 * (iod_sec_policy_parse, iod_sec_policy_to_json, struct iod_sec_policy).
 */

/* ---- NetPolicy: a security group of the overlay (docs/network.md) -------- */

/*
 * A security group attached to one service: ingress rules check the new
 * sessions its replicas are asked to accept, egress rules the new sessions
 * they open. A direction with rules is allow-listed in rule order (the
 * first rule that matches decides; "action": "deny" rules drop), and what
 * no rule allows is dropped by "<name>/default-deny"; a direction without
 * rules keeps the tenant default. Replies of an admitted session always
 * pass (conntrack). Written by deploy from the spec's security_groups: and
 * by `iod policy apply` (PUT /v1/netpolicies/NAME). A rule:
 *   {"name": "http", "action": "allow"|"deny", "service": PEER | "cidr": NET,
 *    "protocol": "tcp"|"udp"|"icmp"|"any", "ports": "80" | "8000-8100" | 80}
 * name is required (it names drops and counters as "<policy>/<rule>");
 * no service or cidr = any peer; the peer service is of the same tenant.
 */
#define IOD_OBJ_NETPOLICY_FIELDS(X)                   \
	X(SERVICE, "service", STR, service, 0, 0, 0)  \
	X(TENANT, "tenant", STR, tenant, 0, 0, 0)     \
	X(INGRESS, "ingress", JSON, ingress, 0, 0, 0) \
	X(EGRESS, "egress", JSON, egress, 0, 0, 0)

enum iod_obj_netpolicy_field {
#define X(f, k, t, m, lo, hi, d) IOD_OBJ_NETPOLICY_##f,
	IOD_OBJ_NETPOLICY_FIELDS(X)
#undef X
	    IOD_OBJ_NETPOLICY_FIELD_COUNT
};

struct iod_obj_netpolicy {
	struct iod_obj_head head;
	char service[IOD_NAME_MAX]; /* the service whose replicas it guards */
	char tenant[IOD_NAME_MAX];  /* whose ("" = "default"); the service's */
	json_t *ingress;            /* owned: rules for sessions to its replicas */
	json_t *egress;             /* owned: rules for sessions they open */
};

/* One rule, parsed. */
struct iod_obj_netpolicy_rule {
	char name[IOD_NAME_MAX];     /* its name in its policy */
	bool deny;                   /* a match drops (else admits) */
	char peer[IOD_NAME_MAX];     /* the peer service ("" = by cidr) */
	uint32_t cidr_ip;            /* the peer network (host order), when no peer service */
	uint8_t prefix_len;          /* 0..32; 0 = any */
	uint8_t proto;               /* 0 = any, 1 icmp, 6 tcp, 17 udp */
	uint16_t port_min, port_max; /* destination ports (tcp/udp), inclusive */
};

/* Rule i of a direction's array (j: one element): -EINVAL naming the field. */
int iod_obj_netpolicy_rule_parse(const json_t *j, struct iod_obj_netpolicy_rule *r,
                                 struct iod_err *e);
/* The object's checks beyond types: service, tenant, every rule (names
 * unique, at most IOD_NET_SG_RULES_MAX). 0 or -EINVAL naming the rule. */
int iod_obj_netpolicy_check(const struct iod_obj_netpolicy *p, struct iod_err *e);

/* ---- one API for every kind ----------------------------------------------- */

enum iod_obj_kind {
	IOD_OBJ_KIND_NODE,
	IOD_OBJ_KIND_SERVICE,
	IOD_OBJ_KIND_REPLICA,
	IOD_OBJ_KIND_ENDPOINT,
	IOD_OBJ_KIND_MEMBER,
	IOD_OBJ_KIND_FAULT,
	IOD_OBJ_KIND_CHECKPOINT,
	IOD_OBJ_KIND_XFERPEER,
	IOD_OBJ_KIND_NETPOLICY,
	IOD_OBJ_KIND_COUNT
};

/*
 * Generic forms (obj points at the kind's struct). from_json: see the rules
 * above; the object is reset first (iod_obj_free of what it held is the
 * caller's: call iod_obj_free before reusing one). to_json: a new object,
 * NULL only out of memory.
 */
int iod_obj_from_json(enum iod_obj_kind k, const json_t *v, void *obj, struct iod_err *e);
json_t *iod_obj_to_json(enum iod_obj_kind k, const void *obj);
/* Release what an object owns (extra, JSON fields); it reads as empty after. */
void iod_obj_free(enum iod_obj_kind k, void *obj);
/* An empty object of its kind: every field absent, defaults in place. */
void iod_obj_init(enum iod_obj_kind k, void *obj);
/* Set field f (STR: copies, -E2BIG if it does not fit; INT/UINT: -ERANGE
 * outside the row's bounds; JSON: takes the reference) and mark it. */
int iod_obj_set_str(enum iod_obj_kind k, void *obj, unsigned f, const char *s);
int iod_obj_set_int(enum iod_obj_kind k, void *obj, unsigned f, int64_t v);
int iod_obj_set_json(enum iod_obj_kind k, void *obj, unsigned f, json_t *v);
/* Remove field f (it reads as its default and is not written). */
void iod_obj_clear(enum iod_obj_kind k, void *obj, unsigned f);
/* Is field f present? */
bool iod_obj_has(const void *obj, unsigned f);
/* The key of field f of kind k ("node"), for messages. */
const char *iod_obj_key(enum iod_obj_kind k, unsigned f);

/*
 * One field read straight from a stored value, for loops over many objects
 * that need one or two fields (no copy of the rest): the string, or NULL
 * when it is absent or not a string; the integer (0, -ENOENT absent,
 * -EINVAL wrong type or out of the row's bounds). Old shapes are not read
 * here: Endpoints go through from_json.
 */
const char *iod_obj_peek_str(enum iod_obj_kind k, const json_t *v, unsigned f);
int iod_obj_peek_int(enum iod_obj_kind k, const json_t *v, unsigned f, int64_t *out);
/* Any field as stored (NULL when absent), borrowed from v, unchecked. */
const json_t *iod_obj_peek_json(enum iod_obj_kind k, const json_t *v, unsigned f);
/* Display forms for views that show what is stored as it is: the string
 * or "" (absent, not a string); any JSON number as a double, NAN when
 * absent or not a number. */
const char *iod_obj_peek_text(enum iod_obj_kind k, const json_t *v, unsigned f);
double iod_obj_peek_num(enum iod_obj_kind k, const json_t *v, unsigned f);
/* A new object holding fields fs[0..n) of a stored value under their keys,
 * in that order, each as stored (null when absent): what a view shows of
 * an object. NULL out of memory. */
json_t *iod_obj_pick(enum iod_obj_kind k, const json_t *v, const unsigned *fs, size_t n);

/* Typed forms. */
int iod_obj_node_from_json(const json_t *v, struct iod_obj_node *n, struct iod_err *e);
json_t *iod_obj_node_to_json(const struct iod_obj_node *n);
int iod_obj_service_from_json(const json_t *v, struct iod_obj_service *s, struct iod_err *e);
json_t *iod_obj_service_to_json(const struct iod_obj_service *s);
int iod_obj_member_from_json(const json_t *v, struct iod_obj_member *m, struct iod_err *e);
json_t *iod_obj_member_to_json(const struct iod_obj_member *m);
int iod_obj_replica_from_json(const json_t *v, struct iod_obj_replica *r, struct iod_err *e);
json_t *iod_obj_replica_to_json(const struct iod_obj_replica *r);
int iod_obj_endpoint_from_json(const json_t *v, struct iod_obj_endpoint *ep, struct iod_err *e);
json_t *iod_obj_endpoint_to_json(const struct iod_obj_endpoint *ep);
int iod_obj_fault_from_json(const json_t *v, struct iod_obj_fault *f, struct iod_err *e);
json_t *iod_obj_fault_to_json(const struct iod_obj_fault *f);
int iod_obj_checkpoint_from_json(const json_t *v, struct iod_obj_checkpoint *c, struct iod_err *e);
json_t *iod_obj_checkpoint_to_json(const struct iod_obj_checkpoint *c);
int iod_obj_xferpeer_from_json(const json_t *v, struct iod_obj_xferpeer *p, struct iod_err *e);
json_t *iod_obj_xferpeer_to_json(const struct iod_obj_xferpeer *p);
int iod_obj_netpolicy_from_json(const json_t *v, struct iod_obj_netpolicy *p, struct iod_err *e);
json_t *iod_obj_netpolicy_to_json(const struct iod_obj_netpolicy *p);

#define IOD_OBJ_TYPED(T, K)                                                                       \
	static inline void iod_obj_##T##_init(struct iod_obj_##T *o)                              \
	{                                                                                         \
		iod_obj_init(K, o);                                                               \
	}                                                                                         \
	static inline void iod_obj_##T##_free(struct iod_obj_##T *o)                              \
	{                                                                                         \
		iod_obj_free(K, o);                                                               \
	}                                                                                         \
	static inline int iod_obj_##T##_set_str(struct iod_obj_##T *o, unsigned f, const char *s) \
	{                                                                                         \
		return iod_obj_set_str(K, o, f, s);                                               \
	}                                                                                         \
	static inline int iod_obj_##T##_set_int(struct iod_obj_##T *o, unsigned f, int64_t v)     \
	{                                                                                         \
		return iod_obj_set_int(K, o, f, v);                                               \
	}                                                                                         \
	static inline int iod_obj_##T##_set_json(struct iod_obj_##T *o, unsigned f, json_t *v)    \
	{                                                                                         \
		return iod_obj_set_json(K, o, f, v);                                              \
	}                                                                                         \
	static inline void iod_obj_##T##_clear(struct iod_obj_##T *o, unsigned f)                 \
	{                                                                                         \
		iod_obj_clear(K, o, f);                                                           \
	}
IOD_OBJ_TYPED(node, IOD_OBJ_KIND_NODE)
IOD_OBJ_TYPED(service, IOD_OBJ_KIND_SERVICE)
IOD_OBJ_TYPED(replica, IOD_OBJ_KIND_REPLICA)
IOD_OBJ_TYPED(endpoint, IOD_OBJ_KIND_ENDPOINT)
IOD_OBJ_TYPED(member, IOD_OBJ_KIND_MEMBER)
IOD_OBJ_TYPED(fault, IOD_OBJ_KIND_FAULT)
IOD_OBJ_TYPED(checkpoint, IOD_OBJ_KIND_CHECKPOINT)
IOD_OBJ_TYPED(xferpeer, IOD_OBJ_KIND_XFERPEER)
IOD_OBJ_TYPED(netpolicy, IOD_OBJ_KIND_NETPOLICY)

#endif
