/*
 * spec.h: the declarative spec users write, as validated C structs.
 *
 * One YAML file may hold any of: `services:` (the service topology),
 * `resources:` (a resource request, the seed's unified form), `storage:`
 * (tiers), `service_mesh:` and `security_groups:`. The loader (libyaml) validates everything and
 * reports every error as "file:line:col: message", up to a bound; a spec is
 * either fully valid or rejected, never accepted in part. All quantities are
 * normalized to base units: bytes, bits/s, nanoseconds, basis points.
 *
 * The language (every key, default and unit) is documented in docs/spec.md.
 * Everything a loaded spec points to lives in its arena; iod_spec_free()
 * releases it all at once. The spec module never reads the clock and does no
 * I/O besides reading the file it is asked to load.
 */
#ifndef IOD_SPEC_H
#define IOD_SPEC_H

#include "iod/base.h"

/* Compute unit types a resource request can target (X-macro: enum + names). */
#define IOD_COMPUTE_TYPES(X)          \
	X(NONE, "none")               \
	X(TENSOR_CORE, "tensor-core") \
	X(CUDA_CORE, "cuda-core")     \
	X(FPGA, "fpga")               \
	X(DPU, "dpu")                 \
	X(CPU, "cpu")

enum iod_compute_type {
#define X(n, s) IOD_COMPUTE_##n,
	IOD_COMPUTE_TYPES(X)
#undef X
};
const char *iod_compute_type_name(enum iod_compute_type t);
int iod_compute_type_parse(const char *s, enum iod_compute_type *out);

/* resources.compute / resources.network, the seed's unified request. */
struct iod_spec_compute {
	enum iod_compute_type type; /* NONE when absent */
	uint32_t count;             /* units of that type */
	uint64_t mem_bytes;         /* device memory per unit; 0 = any */
};

struct iod_spec_network {
	uint64_t bandwidth_bps;      /* 0 = no requirement */
	struct iod_bound latency_ns; /* LT or LE (a bare "5us" is LE); valid if has_latency */
	bool has_latency;            /* latency was written */
};

/* What one replica of a service needs. */
struct iod_spec_resources {
	uint32_t gpu;                    /* GPUs (tensor-core units) per replica */
	uint32_t cpu_millis;             /* CPU in thousandths of a core (cpu: 2 = 2000) */
	uint64_t mem_bytes;              /* host memory */
	uint64_t gpu_mem_bytes;          /* memory per GPU; 0 = any */
	struct iod_spec_compute compute; /* the unified form, when written */
	struct iod_spec_network network; /* NIC bandwidth / latency */
};

enum iod_service_type { IOD_SERVICE_STATELESS, IOD_SERVICE_STATEFUL };
enum iod_spread { IOD_SPREAD_DEFAULT, IOD_SPREAD_SPREAD, IOD_SPREAD_PACK };
enum iod_gpu_link { IOD_GPU_LINK_ANY, IOD_GPU_LINK_NVLINK, IOD_GPU_LINK_PCIE };
/* NUMA alignment (Kubernetes Topology Manager's policies): any = best-effort,
 * single = single-numa-node. */
enum iod_numa_policy { IOD_NUMA_ANY, IOD_NUMA_SINGLE, IOD_NUMA_NONE, IOD_NUMA_RESTRICTED };
enum iod_anti_affinity { IOD_ANTI_NONE, IOD_ANTI_NODE, IOD_ANTI_RACK, IOD_ANTI_ZONE };
enum iod_restart { IOD_RESTART_ALWAYS, IOD_RESTART_ON_FAILURE, IOD_RESTART_NEVER };
enum iod_health_kind { IOD_HEALTH_NONE, IOD_HEALTH_EXEC, IOD_HEALTH_TCP, IOD_HEALTH_HTTP };
enum iod_transport { IOD_TRANSPORT_TCP, IOD_TRANSPORT_SHM, IOD_TRANSPORT_RDMA };

struct iod_spec_placement {
	enum iod_spread spread;      /* spread | pack; DEFAULT = the scheduler chooses */
	enum iod_anti_affinity anti; /* keep replicas apart by node/rack/zone */
	enum iod_gpu_link gpu_link;  /* nvlink | pcie | any */
	enum iod_numa_policy numa;   /* any | single | none | restricted */
};

struct iod_spec_health {
	enum iod_health_kind kind; /* NONE when no check is configured */
	/* Timing defaults (also when kind is NONE): interval 10 s, timeout
	 * min(1 s, interval), healthy 1, unhealthy 3; see docs/spec.md. */
	const char *command;          /* exec: shell command line */
	uint16_t port;                /* tcp/http */
	const char *path;             /* http: request path */
	uint64_t interval_ns;         /* between checks */
	uint64_t timeout_ns;          /* per check */
	uint32_t healthy_threshold;   /* consecutive passes to be healthy */
	uint32_t unhealthy_threshold; /* consecutive failures to be unhealthy */
};

struct iod_spec_port {
	const char *name; /* optional */
	uint16_t port;    /* container/process port */
	enum { IOD_PROTO_TCP, IOD_PROTO_UDP } proto;
};

struct iod_spec_env {
	const char *name;  /* variable name */
	const char *value; /* value */
};

/* ---- the sandbox of a service's replicas (sandbox:) ---------------------- */

/* Linux capabilities by number (CAP_CHOWN = 0 .. CAP_CHECKPOINT_RESTORE = 40). */
#define IOD_CAPS_N 41
/* "SYS_ADMIN" for 21 (no CAP_ prefix); NULL past the end. */
const char *iod_cap_name(unsigned cap);
/* "NET_BIND_SERVICE", "CAP_NET_BIND_SERVICE", any case; -EINVAL if unknown. */
int iod_cap_parse(const char *s, unsigned *cap);

enum iod_spec_user {
	IOD_SPEC_USER_DYNAMIC, /* a uid of its own, chosen by the node's agent (default) */
	IOD_SPEC_USER_ID,      /* uid (and gid) as written */
	IOD_SPEC_USER_ROOT,    /* uid 0: only when asked for (a privilege) */
};
enum iod_spec_seccomp {
	IOD_SPEC_SECCOMP_DEFAULT,    /* iod's allowlist, in the spirit of Docker's default */
	IOD_SPEC_SECCOMP_PROFILE,    /* the service's own OCI / Docker JSON profile */
	IOD_SPEC_SECCOMP_UNCONFINED, /* no filter (a privilege) */
};
enum iod_spec_netmode {
	IOD_SPEC_NET_AUTO,    /* its own network namespace where the node gives replicas one */
	IOD_SPEC_NET_NODE,    /* the node's network */
	IOD_SPEC_NET_PRIVATE, /* its own namespace with an address on the node's subnet */
	IOD_SPEC_NET_NONE,    /* its own namespace with loopback only */
};

struct iod_spec_sandbox {
	bool set;                      /* a sandbox: block was written */
	enum iod_spec_user user;       /* whose uid the replicas run as */
	uint32_t uid, gid;             /* IOD_SPEC_USER_ID */
	uint64_t caps;                 /* capabilities kept (bit = CAP number); 0 = none */
	enum iod_spec_seccomp seccomp; /* which filter */
	const char *seccomp_profile;   /* PROFILE: canonical JSON text (validated) */
	enum iod_spec_netmode network; /* which network */
	bool best_effort;              /* run without a hardening the node lacks (warned) */
};

/*
 * Whether a service asks for more than the default sandbox gives: root,
 * capabilities, no seccomp filter. The API's role check (only an admin may
 * deploy such a service) reads this; why says what (for the 403).
 */
struct iod_spec_service;
bool iod_spec_service_privileged(const struct iod_spec_service *s, char *why, size_t len);

/* ---- seccomp profiles (OCI runtime spec linux.seccomp, Docker's format) -- */

#define IOD_SECCOMP_ACTIONS(X)                   \
	X(KILL_THREAD, "SCMP_ACT_KILL")          \
	X(KILL_PROCESS, "SCMP_ACT_KILL_PROCESS") \
	X(TRAP, "SCMP_ACT_TRAP")                 \
	X(ERRNO, "SCMP_ACT_ERRNO")               \
	X(TRACE, "SCMP_ACT_TRACE")               \
	X(ALLOW, "SCMP_ACT_ALLOW")               \
	X(LOG, "SCMP_ACT_LOG")
enum iod_seccomp_action {
#define X(n, s) IOD_SECCOMP_##n,
	IOD_SECCOMP_ACTIONS(X)
#undef X
};
#define IOD_SECCOMP_OPS(X)   \
	X(NE, "SCMP_CMP_NE") \
	X(LT, "SCMP_CMP_LT") \
	X(LE, "SCMP_CMP_LE") \
	X(EQ, "SCMP_CMP_EQ") \
	X(GE, "SCMP_CMP_GE") \
	X(GT, "SCMP_CMP_GT") \
	X(MASKED_EQ, "SCMP_CMP_MASKED_EQ")
enum iod_seccomp_op {
#define X(n, s) IOD_SECCOMP_OP_##n,
	IOD_SECCOMP_OPS(X)
#undef X
};
#define IOD_SECCOMP_ARCHES(X)                   \
	X(X86, "SCMP_ARCH_X86")                 \
	X(X86_64, "SCMP_ARCH_X86_64")           \
	X(X32, "SCMP_ARCH_X32")                 \
	X(ARM, "SCMP_ARCH_ARM")                 \
	X(MIPS, "SCMP_ARCH_MIPS")               \
	X(MIPS64, "SCMP_ARCH_MIPS64")           \
	X(MIPS64N32, "SCMP_ARCH_MIPS64N32")     \
	X(MIPSEL, "SCMP_ARCH_MIPSEL")           \
	X(MIPSEL64, "SCMP_ARCH_MIPSEL64")       \
	X(MIPSEL64N32, "SCMP_ARCH_MIPSEL64N32") \
	X(PPC, "SCMP_ARCH_PPC")                 \
	X(PPC64, "SCMP_ARCH_PPC64")             \
	X(PPC64LE, "SCMP_ARCH_PPC64LE")         \
	X(S390, "SCMP_ARCH_S390")               \
	X(S390X, "SCMP_ARCH_S390X")             \
	X(PARISC, "SCMP_ARCH_PARISC")           \
	X(PARISC64, "SCMP_ARCH_PARISC64")       \
	X(RISCV64, "SCMP_ARCH_RISCV64")         \
	X(LOONGARCH64, "SCMP_ARCH_LOONGARCH64") \
	X(M68K, "SCMP_ARCH_M68K")               \
	X(SH, "SCMP_ARCH_SH")                   \
	X(SHEB, "SCMP_ARCH_SHEB")
enum iod_seccomp_arch {
#define X(n, s) IOD_SECCOMP_ARCH_##n,
	IOD_SECCOMP_ARCHES(X)
#undef X
	    IOD_SECCOMP_ARCHES_N
};
const char *iod_seccomp_action_name(enum iod_seccomp_action a);
const char *iod_seccomp_op_name(enum iod_seccomp_op o);
const char *iod_seccomp_arch_name(enum iod_seccomp_arch a);

/* One argument comparison: args[index] op value (MASKED_EQ: & value == valueTwo). */
struct iod_seccomp_arg {
	uint32_t index;         /* 0..5 */
	uint64_t value;         /* operand (the mask for MASKED_EQ) */
	uint64_t value_two;     /* MASKED_EQ: the value after masking */
	enum iod_seccomp_op op; /* comparison */
};

/* Docker's includes/excludes: a rule applies when the replica has all caps,
 * the node's architecture is in arches, and its kernel is at least min. */
struct iod_seccomp_cond {
	uint64_t caps;       /* capabilities (bits); 0 = no condition */
	uint32_t arches;     /* 1 << enum iod_seccomp_arch; 0 = any */
	uint32_t min_kernel; /* major << 16 | minor; 0 = any */
};

struct iod_seccomp_rule {
	uint32_t names, names_n;        /* profile->names[names .. names + names_n) */
	enum iod_seccomp_action action; /* what the filter does for them */
	uint32_t errno_ret;             /* ERRNO / TRACE value */
	bool has_errno;                 /* errnoRet was written */
	struct iod_seccomp_arg args[IOD_SECCOMP_ARGS_MAX]; /* all must hold */
	uint32_t args_n;                                   /* used */
	struct iod_seccomp_cond includes;                  /* when it applies */
	struct iod_seccomp_cond excludes;                  /* when it does not */
};

struct iod_seccomp_profile {
	enum iod_seccomp_action default_action; /* for syscalls no rule names */
	uint32_t default_errno;                 /* defaultErrnoRet (EPERM when absent) */
	uint32_t arches;                        /* architectures (+ archMap), 0 = native */
	bool log;                               /* SECCOMP_FILTER_FLAG_LOG */
	struct iod_seccomp_rule *rules;         /* rules_n, in profile order */
	uint32_t rules_n;
	const char **names; /* syscall names of all rules, names_n */
	uint32_t names_n;
	struct iod_arena arena; /* owns everything above */
};

/* Parse a profile (text or tree); -EINVAL / -E2BIG with what and where in e. */
int iod_seccomp_profile_parse(const char *text, size_t len, struct iod_seccomp_profile **out,
                              struct iod_err *e);
int iod_seccomp_profile_from_json(const json_t *root, struct iod_seccomp_profile **out,
                                  struct iod_err *e);
void iod_seccomp_profile_free(struct iod_seccomp_profile *p);

/* service_mesh.mode of a service: l4 = its VIP balanced by Maglev in the
 * node's virtual switch; l7 = its VIP leads to the node's mesh proxy
 * (retries, breakers, tracing). */
enum iod_spec_mesh_path { IOD_SPEC_MESH_L4, IOD_SPEC_MESH_L7 };

struct iod_spec_service {
	const char *name;              /* unique, DNS-label-like */
	enum iod_service_type type;    /* stateful | stateless */
	uint32_t replicas;             /* 0..IOD_SPEC_REPLICAS_MAX; default 1 */
	struct iod_spec_resources res; /* per replica */
	struct iod_spec_placement placement;
	bool gang;                /* all replicas or none */
	enum iod_restart restart; /* restart policy; default always */
	const char *command;      /* program; NULL = none */
	const char *const *args;  /* args_n arguments */
	uint32_t args_n;
	const struct iod_spec_env *env; /* env_n variables */
	uint32_t env_n;
	const struct iod_spec_port *ports; /* ports_n ports */
	uint32_t ports_n;
	struct iod_spec_health health;
	const char *const *depends_on; /* names of services, depends_n of them */
	uint32_t depends_n;
	struct iod_spec_sandbox sandbox; /* user, capabilities, seccomp, network */
	const char *const *secrets;      /* names of Secret objects it mounts, secrets_n */
	uint32_t secrets_n;
	const char *tenant; /* whose it is: policy default, mesh identity, overlay
	                       network; a name, "default" when not written */
	uint32_t line, col; /* where the service was declared */
	/* service_mesh.mode: how replicas on iod's overlay reach it
	 * (docs/network.md, "Which path a connection takes") */
	enum iod_spec_mesh_path mesh_mode;
	bool mesh_mode_set; /* the spec named it (else l4, not written out) */
	/* service_mesh.transport of this service: its own, else the spec's top
	 * level; neither = the cluster's (iod config), not written out */
	enum iod_transport transport;
	bool transport_set;
};

/* Storage media, as the seed names them. */
struct iod_spec_tier {
	const char *medium; /* DRAM, PMem, NVMe, SSD, HDD or object (this spelling) */
	uint32_t quota_bp;  /* share in basis points; tiers sum to 10000 */
};

/*
 * security_groups: one security group of the overlay per entry, guarding
 * the replicas of one service (docs/network.md). Deploy writes each as a
 * NetPolicy object of its name (include/iod/objects.h has the rule
 * semantics, iod_obj_netpolicy_rule_parse checks every rule here too).
 */
struct iod_spec_sg {
	const char *name;    /* the NetPolicy object's name */
	const char *service; /* the service it guards */
	const char
	    *tenant;     /* the service's tenant (from this spec, else written, else "default") */
	json_t *ingress; /* rules as NetPolicy JSON (owned; iod_spec_free releases) */
	json_t *egress;  /* rules as NetPolicy JSON (owned) */
	uint32_t line, col; /* where it was declared */
};
/* The NetPolicy object's value of group g (service, tenant, ingress, egress). */
json_t *iod_spec_sg_to_json(const struct iod_spec_sg *g);

struct iod_spec {
	const char *path;                  /* file it was loaded from */
	struct iod_spec_service *services; /* services_n of them, file order */
	uint32_t services_n;
	bool has_resources; /* a top-level resources: block */
	struct iod_spec_resources resources;
	struct iod_spec_tier *tiers; /* storage.tiers */
	uint32_t tiers_n;
	uint32_t
	    storage_replicas; /* storage.replicas: copies of each checkpoint, 0 if not written */
	uint32_t storage_volume_replicas; /* storage.volume.replicas: the stateful replicas'
	                                     data directories replicated inside each
	                                     checkpoint (docs/storage.md "Volumes"); 0 = none */
	bool has_mesh;                    /* a service_mesh: block */
	enum iod_transport transport;     /* service_mesh.transport */
	bool transport_set;               /* ... named (every service without its own takes it) */
	struct iod_spec_sg *sgs;          /* security_groups, file order */
	uint32_t sgs_n;
	struct iod_arena arena; /* owns everything above (but the groups' rules) */
};

/* One diagnostic: "file:line:col: message". */
struct iod_spec_diag {
	uint32_t line, col;        /* 1-based; 0 when not positional */
	char msg[IOD_ERR_MSG_MAX]; /* what and what to do */
};

struct iod_spec_diags {
	struct iod_spec_diag d[IOD_SPEC_ERRORS_MAX]; /* first n errors */
	uint32_t n;                                  /* recorded */
	uint32_t total;                              /* seen, may exceed n */
};

/*
 * Load and validate. On success returns 0 and *out owns a spec. On failure
 * returns -EINVAL (spec errors, listed in diags) or another negative errno
 * (file unreadable: the message is in diags->d[0]).
 */
int iod_spec_load_file(const char *path, struct iod_spec **out, struct iod_spec_diags *diags);
int iod_spec_load_buffer(const char *name, const char *text, size_t len, struct iod_spec **out,
                         struct iod_spec_diags *diags);
void iod_spec_free(struct iod_spec *s);

/*
 * Validate one stored Service object (its normalized JSON as the control
 * plane keeps it: iod_spec_to_json's form plus the keys the control plane
 * adds, "generation", "gpu" and "version", which are ignored). The object's name is
 * the service's name. Every rule of the language applies except that
 * depends_on names are not resolved (the other services are stored apart).
 * The node agent runs every Service it is asked to run through this, so a
 * raw object write cannot smuggle past validation what /v1/deploy refuses.
 */
int iod_spec_load_service(const char *name, const json_t *value, struct iod_spec **out,
                          struct iod_spec_diags *diags);

/*
 * The agent's environment limit for service i of s: its env, its own peer
 * list and each dependency's (replicas x "host:port,"), the mesh addresses
 * and IOD_AGENT_ENV_RESERVED_BYTES must fit IOD_AGENT_ENV_BYTES_MAX.
 * host_len_max: the longest node address (at least 15, IPv4). A dependency
 * outside s is counted with replicas_of(name, ctx) when given, else as 0.
 * 0, or -E2BIG with the sizes and the limit named in why.
 */
int iod_spec_service_env_check(const struct iod_spec *s, uint32_t i, uint32_t host_len_max,
                               uint32_t (*replicas_of)(const char *service, void *ctx), void *ctx,
                               char *why, size_t len);

/* Print every diagnostic as "name:line:col: message" lines. */
void iod_spec_diags_print(const struct iod_spec_diags *d, const char *name, FILE *f);

/* The normalized spec as JSON (base units), for `iod validate -o json` and the API. */
json_t *iod_spec_to_json(const struct iod_spec *s);

const struct iod_spec_service *iod_spec_find_service(const struct iod_spec *s, const char *name);

#endif
