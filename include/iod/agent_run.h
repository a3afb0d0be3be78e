/*
 * agent_run.h: the node agent's shells: the executor (sandbox, namespaces,
 * cgroups, exec), seccomp filters, rotating log files, health probes and
 * the prober pool, per-replica network namespaces, and the agent loop with
 * its control-plane connection. The pure parts (reconciler, desired state,
 * address allocator) are in agent.h, which pure cores include alone.
 */
#ifndef IOD_AGENT_RUN_H
#define IOD_AGENT_RUN_H

#include "iod/agent.h"

/* ---- the executor (shell) ---------------------------------------------- */

/* What the sandbox could set up on this machine (probed once). */
struct iod_agent_caps {
	bool ns_pid, ns_mount, ns_uts, ns_ipc, ns_net; /* namespaces we may create */
	bool ns_cgroup;                                /* cgroup namespaces */
	bool ns_user;                        /* user namespaces (the kernel allows them) */
	bool root;                           /* the agent is root: uids, mounts */
	bool seccomp;                        /* seccomp filters (and no_new_privs) */
	bool rootfs;                         /* a root of its own (pivot_root) */
	int cgroup_version;                  /* 2, 1, or 0 = no writable cgroups */
	char cgroup_mem[IOD_AGENT_PATH_MAX]; /* v1 memory hierarchy or v2 root */
	char cgroup_cpu[IOD_AGENT_PATH_MAX]; /* v1 cpu hierarchy or v2 root */
	char warning[IOD_ERR_MSG_MAX];       /* what is missing, for the log */
};
void iod_agent_caps_probe(struct iod_agent_caps *caps);

/* ---- seccomp filters (seccomp.c) ------------------------------------------ */

struct sock_fprog;
/*
 * Compile the default allowlist (widened by the syscalls that granted caps
 * are about) or a parsed OCI/Docker profile into a BPF program whose
 * instructions the caller frees (out->filter).
 */
int iod_agent_seccomp_default(uint64_t caps, struct sock_fprog *out, struct iod_err *e);
int iod_agent_seccomp_profile(const struct iod_seccomp_profile *p, uint64_t caps,
                              struct sock_fprog *out, struct iod_err *e);
/*
 * The agent's filters, each compiled once: entry 0 is the default filter
 * without capabilities (built by _new). add (profile NULL: the default one)
 * returns the entry for (profile, caps), compiling it the first time;
 * -ENOSPC past IOD_AGENT_SECCOMP_PROFILES_MAX. Entries never change once
 * added: get may be called from any thread without a lock.
 */
struct iod_agent_seccomp_store;
int iod_agent_seccomp_store_new(struct iod_agent_seccomp_store **out, struct iod_err *e);
int iod_agent_seccomp_store_add(struct iod_agent_seccomp_store *s, const char *profile, size_t len,
                                uint64_t caps, uint32_t *id, struct iod_err *e);
const struct sock_fprog *iod_agent_seccomp_get(const struct iod_agent_seccomp_store *s,
                                               uint32_t id);
void iod_agent_seccomp_store_free(struct iod_agent_seccomp_store *s);

/*
 * Where a running replica's processes live and what they may do: what a
 * health check needs to run "inside" it (setns into its namespaces, its
 * cgroup, its uid, capabilities and filter). Filled by the executor.
 */
struct iod_agent_jail {
	pid_t init;                          /* the sandbox's init (host pid); 0 = none */
	uint64_t init_start;                 /* its start time (/proc stat), so that a
	                                        reused pid is never entered */
	int ns;                              /* CLONE_NEW* namespaces it was given */
	uint32_t uid, gid;                   /* the workload's ids (host view) */
	uint64_t caps;                       /* capabilities it keeps */
	bool userns;                         /* the workload is in a user namespace of its own */
	const struct sock_fprog *seccomp;    /* its filter; NULL = none */
	char cgroup_mem[IOD_AGENT_PATH_MAX]; /* its cgroups ("" = none) */
	char cgroup_cpu[IOD_AGENT_PATH_MAX];
};

/*
 * In the calling (single-threaded, forked) process: become what j says:
 * supplementary groups dropped, gid and uid set, bounding, effective,
 * permitted, inheritable and ambient capabilities cut to j->caps
 * (libcap-ng), a user namespace mapping only its own uid when j->userns
 * (userns_fd >= 0: join that one, the workload's, instead of creating one),
 * no_new_privs, then the seccomp filter. Never returns to a more
 * privileged state. 0, or a negative errno with what failed in err.
 */
int iod_agent_jail_enter(const struct iod_agent_jail *j, int userns_fd, char *err, size_t len);

/*
 * A replica's own root (rootfs.c), built by its sandbox's init (root, in the
 * replica's new mount and PID namespaces) on the empty directory root, and
 * entered with pivot_root: read-only host /usr, /bin, /lib..., a few /etc
 * files, fresh /proc (masked) and /sys (read-only), a small /dev, a private
 * /tmp, the data directory read-write. err says what failed.
 */
struct iod_agent_rootfs {
	const char *root;              /* an empty directory (host path) */
	const char *data;              /* bound read-write at the same path; NULL = none */
	const char *self_exe;          /* the iod binary, read-only at its path; NULL = none */
	const struct iod_bitmap *gpus; /* /dev/nvidia<i> for these; NULL = none */
	const char *hostname;          /* the replica's name (/etc/hosts, /etc/passwd) */
	const char *home;              /* its HOME, for /etc/passwd */
	uint32_t uid, gid;             /* its ids, for /etc/passwd and /etc/group */
	uint64_t shm_bytes;            /* /dev/shm size; 0 = half of RAM */
	const struct iod_agent_secret_set *secrets; /* at /run/secrets; NULL = none */
	const char *creds;      /* its own credentials' directory, read-only at the same path */
	const char *nameserver; /* /etc/resolv.conf names it; NULL = the host's file */
	const char *mesh;       /* the mesh's AF_UNIX socket directory, read-write at the
	                           same path (skipped when absent); NULL = none */
};
int iod_agent_rootfs_enter(const struct iod_agent_rootfs *rf, char *err, size_t len);

/* ---- secrets (secrets.c) ------------------------------------------------- */

/* Secret values for one replica (heap bytes, zeroed when cleared). */
struct iod_agent_secret_set {
	struct {
		char name[IOD_NAME_MAX]; /* the file under /run/secrets */
		uint8_t *data;           /* its bytes */
		size_t len;
	} v[IOD_SEC_SECRETS_PER_SERVICE_MAX];
	uint32_t n;
};
int iod_agent_secret_set_add(struct iod_agent_secret_set *s, const char *name, const void *data,
                             size_t len);
void iod_agent_secret_set_clear(struct iod_agent_secret_set *s);
/* The agent's store, replica name -> values; thread-safe. */
struct iod_agent_secrets;
int iod_agent_secrets_new(struct iod_agent_secrets **out);
void iod_agent_secrets_free(struct iod_agent_secrets *s);
/* Replace replica's values with set's (moved: set is left empty). */
int iod_agent_secrets_put(struct iod_agent_secrets *s, const char *replica,
                          struct iod_agent_secret_set *set);
bool iod_agent_secrets_have(struct iod_agent_secrets *s, const char *replica);
/* A private copy (clear it), or -ENOENT when not fetched yet. */
int iod_agent_secrets_get(struct iod_agent_secrets *s, const char *replica,
                          struct iod_agent_secret_set *out);
void iod_agent_secrets_forget(struct iod_agent_secrets *s, const char *replica);
/* In the sandbox's init (root, its mount namespace): a tmpfs on dir with
 * one 0400 file per value owned by uid:gid, then read-only. */
int iod_agent_secrets_mount(const char *dir, const struct iod_agent_secret_set *set, uint32_t uid,
                            uint32_t gid, char *err, size_t len);

/* Executor settings shared by every replica of an agent. */
struct iod_agent_exec_config {
	char node[IOD_NAME_MAX];                 /* node name, for IOD_NODE */
	char run_dir[IOD_AGENT_PATH_MAX];        /* logs and data: <run_dir>/replicas/<name>/ */
	char self_exe[IOD_AGENT_PATH_MAX];       /* the iod binary: program "iod" runs it */
	char cgroup_prefix[IOD_NAME_MAX * 2];    /* e.g. "iod/node-1": under each hierarchy */
	uint64_t log_max_bytes;                  /* rotate the log file past this size */
	uint32_t log_files;                      /* rotated files kept (log.1 .. log.N) */
	bool use_namespaces;                     /* false: plain child process */
	const struct iod_agent_caps *caps;       /* what is permitted */
	struct iod_agent_seccomp_store *seccomp; /* filters; NULL = default built per start */
	uint32_t uid_base;                       /* dynamic uids: base + hash of the name */
	struct iod_agent_secrets *secrets;       /* values replicas mount; NULL = none */
	uint64_t ckpt_capacity_bytes;            /* checkpoint capacity per stateful replica
	                                 with storage: (0 = IOD_CKPT_CAPACITY_DEFAULT) */
	/* replicas' own credentials (docs/storage.md "Replica credentials"):
	 * the SVIDs the agent holds, copied into a replica whose record names
	 * its tenant (svid_tenant), with the API's addresses; "" = none */
	char svid_dir[IOD_AGENT_PATH_MAX];
	char api_servers[IOD_AGENT_PATH_MAX];
	/* the mesh's AF_UNIX sockets (service_mesh.transport shm), bound
	 * read-write into a replica's own root at the same path; "" = none */
	char mesh_unix_dir[IOD_AGENT_PATH_MAX];
};

/* Copy the SVID of tenant/service from svid_dir (ca.crt,
 * <tenant>/<service>.crt/.key) into dst as ca.crt, svid.crt, svid.key
 * (0400, uid:gid; dst 0500), each through a temporary name (svid.c). */
int iod_agent_svid_copy(const char *svid_dir, const char *tenant, const char *service,
                        const char *dst, uint32_t uid, uint32_t gid, struct iod_err *e);

/* A running sandbox, as the shell tracks it. */
struct iod_agent_proc {
	pid_t pid;                           /* the sandbox's init (shim) in our namespace */
	char cgroup_mem[IOD_AGENT_PATH_MAX]; /* created cgroup dirs, "" if none */
	char cgroup_cpu[IOD_AGENT_PATH_MAX];
	char sandbox_warn[IOD_ERR_MSG_MAX]; /* what could not be applied (best effort) */
	struct iod_agent_jail jail;         /* for health checks run inside it */
};

/*
 * Start one replica: creates <run_dir>/replicas/<name>/ (log files, and data/
 * for stateful replicas, kept across restarts), the cgroup, then the sandbox.
 * The sandbox's init forwards signals to the workload, writes its output to
 * rotating log files and exits with its status. Returns 0 with p->pid set,
 * or a negative errno with what failed in e.
 */
int iod_agent_exec_start(const struct iod_agent_exec_config *c, const struct iod_agent_replica *r,
                         struct iod_agent_proc *p, struct iod_err *e);
/* A replica's own network (per-replica netns, netns.c): the sandbox's init
 * joins netns_fd before the workload starts; addr is its address. */
struct iod_agent_net {
	int netns_fd;            /* open /run/netns/<name>; -1 = the node's network */
	char addr[IOD_ADDR_MAX]; /* its veth address ("10.213.0.2"), IOD_ADDR's host */
	/* its resolver (overlay: the gateway, where the node's mesh proxy
	 * answers <service>.iod); "" = the host's /etc/resolv.conf */
	char nameserver[IOD_ADDR_MAX];
};
/* iod_agent_exec_start in the network net (NULL: the node's network). */
int iod_agent_exec_start_net(const struct iod_agent_exec_config *c,
                             const struct iod_agent_replica *r, const struct iod_agent_net *net,
                             struct iod_agent_proc *p, struct iod_err *e);
/* A process's start time in clock ticks (/proc/PID/stat field 22); 0 if gone. */
uint64_t iod_agent_proc_start_time(pid_t pid);
/* A dynamic uid: base + 1 + (hash(name) + probe) mod (IOD_AGENT_UID_BLOCK - 2);
 * the agent probes on when two of its replicas would share one. */
uint32_t iod_agent_uid_of(uint32_t base, const char *name, uint32_t probe);
/* Signal the sandbox (SIGTERM: graceful, SIGKILL: now). */
int iod_agent_exec_signal(const struct iod_agent_proc *p, int sig);
/* Remove the replica's cgroups once it has exited. */
void iod_agent_exec_cleanup(struct iod_agent_proc *p);
/* Remove the empty replica cgroups under prefix (leftovers of a crash), then
 * the prefix itself when empty. Cgroups with processes stay. */
void iod_agent_cgroup_sweep(const struct iod_agent_caps *caps, const char *prefix);
/* Paths of a replica's files: "log" (current log), "data", "dir". -EINVAL
 * when name breaks iod_state_name_valid (it would leave the replicas
 * directory), -ENAMETOOLONG when buf is too small. */
int iod_agent_replica_path(const char *run_dir, const char *name, const char *what, char *buf,
                           size_t len);

/*
 * The in-sandbox init, run in the child after clone: applies limits,
 * affinity and policy, then runs the workload. Exposed for tests.
 */
int iod_agent_sandbox_apply_affinity(const struct iod_agent_replica *r, struct iod_err *e);
int iod_agent_sandbox_apply_mempolicy(int32_t numa_node, struct iod_err *e);

/* ---- rotating log files ------------------------------------------------- */

struct iod_agent_log {
	int fd;                        /* current file, -1 when closed */
	int dirfd;                     /* path is relative to it (AT_FDCWD: plain path) */
	char path[IOD_AGENT_PATH_MAX]; /* current file */
	uint64_t size_bytes;           /* written to the current file */
	uint64_t max_bytes;            /* rotate past this */
	uint32_t files;                /* rotated files kept */
};
int iod_agent_log_open(struct iod_agent_log *l, const char *path, uint64_t max_bytes,
                       uint32_t files, struct iod_err *e);
/* The same, path relative to the directory dirfd (the caller keeps it open). */
int iod_agent_log_open_at(struct iod_agent_log *l, int dirfd, const char *path, uint64_t max_bytes,
                          uint32_t files, struct iod_err *e);
/* Append; rotates first when the write would pass max_bytes. */
int iod_agent_log_write(struct iod_agent_log *l, const void *data, size_t len);
void iod_agent_log_close(struct iod_agent_log *l);

/* ---- health probes (shell) ---------------------------------------------- */

/*
 * Run one check against host:port now, bounded by h->timeout_ns. 0 = pass;
 * a negative errno = fail, with what happened in detail (also on a pass).
 * exec runs `/bin/sh -c command` in the agent's environment.
 */
int iod_agent_probe_run(const struct iod_agent_health *h, const char *host, uint16_t port,
                        char *detail, size_t detail_len);
/* The same; an exec check runs inside the sandbox j describes (j NULL or
 * j->init 0: on the host, as the agent): its cgroups, its namespaces, its
 * uid, capabilities, no_new_privs and seccomp filter. */
int iod_agent_probe_run_in(const struct iod_agent_health *h, const struct iod_agent_jail *j,
                           const char *host, uint16_t port, char *detail, size_t detail_len);
/*
 * Wait for child pid, the leader of its own process group, until
 * deadline_ns (monotonic); then SIGKILL the whole group and reap the leader
 * (-ETIMEDOUT). After a normal end the rest of the group is killed too: a
 * check's processes never outlive it. *status gets waitpid's status.
 */
int iod_agent_wait_group(pid_t pid, uint64_t deadline_ns, int *status);

/* ---- per-replica network namespaces (shell, netns.c) -------------------- */

/*
 * With a subnet configured (and root), each replica gets a network
 * namespace "iod-<nodehash>-<replica>" with a veth pair: "eth0" inside with
 * its address from the node's subnet and a default route via the gateway,
 * the host end enslaved to the node's bridge "iodb<nodehash>", which holds
 * the gateway address. The agent, its probes and the other replicas of the
 * node reach the replica at its address. Nothing is routed beyond the
 * subnet (no forwarding or NAT is switched on). Cleanup deletes the netns
 * (which deletes the veth pair) when the replica exits, and the bridge when
 * the agent stops; a start sweeps what a crashed agent left.
 */
struct iod_agent_netns {
	char node[IOD_NAME_MAX];       /* node name */
	uint32_t tag;                  /* hash of the node name: names its links and netns */
	char bridge[16];               /* "iodb<tag>" */
	struct iod_agent_ipam ipam;    /* the subnet's addresses */
	bool up;                       /* bridge (or overlay host port) created */
	bool overlay;                  /* overlay mode: no bridge; the node's virtual switch */
	char host_kernel[16];          /* overlay: "iodk<tag>", the host stack's end */
	char host_port[16];            /* overlay: "iodp<tag>", the switch's end */
	uint32_t overlay_net;          /* overlay: the cluster's overlay network */
	uint32_t overlay_prefix;       /* its prefix length (16) */
	struct iod_agent_vswitch *vsw; /* overlay: told of each replica's port; NULL = none */
};
/* Replicas' and the overlay host port's MTU: an underlay of 1500 less
 * VXLAN's 50 bytes, with room to spare (as tests/integration/ar_netns.sh). */
#define IOD_AGENT_OVERLAY_MTU 1400u
/* The port of the DNS responder ("<service>.iod") on the gateway address
 * of a node on iod's overlay (the node's mesh proxy's; meshhost.c). */
#define IOD_AGENT_OVERLAY_DNS_PORT 53u
/* The overlay mode of iod_agent_netns_open (docs/network.md): no bridge;
 * each replica's veth host end and the host port "iodp<tag>" are ports of
 * the node's virtual switch (vswitch.c); replicas get /32 addresses behind
 * the gateway, which the switch answers ARP for. */
int iod_agent_netns_open_overlay(struct iod_agent_netns *n, const char *node, const char *cidr,
                                 struct iod_err *e);
/* The host end of replica name's veth ("iv<tag>-<index>"); -ENOENT without
 * an address. */
int iod_agent_netns_veth(const struct iod_agent_netns *n, const char *name, char *buf, size_t len);
/* Node node's overlay host-stack device ("iodk<tag>": holds the gateway
 * address, its peer is the switch's host port): what the mesh proxy binds
 * its overlay listeners to (meshhost.c). */
void iod_agent_netns_host_kernel(const char *node, char *buf, size_t len);
/* Run PROG ARGS... (no shell) with input on its stdin, wait; the first line
 * of its stderr into err on failure (-EIO). */
int iod_agent_run_cmd(const char *prog, const char *const *args, const char *input, char *err,
                      size_t errlen);
/* Sweep leftovers of this node, create the bridge with the gateway address.
 * -EPERM when not permitted (not root), with what to do in e. */
int iod_agent_netns_open(struct iod_agent_netns *n, const char *node, const char *cidr,
                         struct iod_err *e);
/* Create replica name's netns and veth pair, address and routes; returns the
 * netns in net (fd to close with iod_agent_netns_put). */
int iod_agent_netns_get(struct iod_agent_netns *n, const char *name, struct iod_agent_net *net,
                        struct iod_err *e);
/* Close net's fd and delete the replica's netns (and with it its veth). */
void iod_agent_netns_put(struct iod_agent_netns *n, const char *name, struct iod_agent_net *net);
/* Delete every netns, veth and the bridge of this node. */
void iod_agent_netns_close(struct iod_agent_netns *n);
/* The netns name of replica name ("iod-<tag>-<name>"). */
int iod_agent_netns_name(const struct iod_agent_netns *n, const char *name, char *buf, size_t len);

/* ---- the underlay of `iod up --netns` (shell; the plan is in agent.h) ---- */

/* Shell: sweep what a previous underlay of this prefix left, then run the
 * plan. On failure everything made is swept again. */
int iod_agent_underlay_up(const struct iod_agent_underlay_cfg *c, struct iod_err *e);
/*
 * Remove every namespace named <prefix>-* and the root link <prefix>, first
 * killing (SIGKILL) every process still inside one; the same for replica
 * namespaces whose name starts with one of extra (NULL-terminated, e.g.
 * "iod-<tag>-" of the cluster's nodes). Returns the namespaces removed.
 */
uint32_t iod_agent_underlay_sweep(const char *prefix, const char *const *extra);
/* setns() into /run/netns/NAME (the calling thread). */
int iod_agent_netns_enter(const char *name, struct iod_err *e);

/* ---- the node's virtual switch (shell, vswitch.c; docs/network.md) ------ */

struct iod_agent_vswitch;
struct iod_agent_config;
/* Open the VTEP (c->overlay_dev) and the host stack's port (n's), start
 * the switch's thread; it forwards once it has a table and ports. */
int iod_agent_vswitch_start(struct iod_agent_vswitch **out, const struct iod_agent_config *c,
                            const struct iod_agent_netns *n, struct iod_err *e);
void iod_agent_vswitch_stop(struct iod_agent_vswitch *v);
/* Do replica ports take GSO super-frames (PACKET_VNET_HDR, src/io/afpacket.c)?
 * Yes unless IOD_VSWITCH_GSO=off or IOD_VSWITCH_RX=ring in the agent's
 * environment; when not, a replica's eth0 sends one segment a frame
 * (gso_max_segs 1, netns.c). */
bool iod_agent_vswitch_gso(void);
/* A local replica's port (its veth host end, its address) came up / goes. */
void iod_agent_vswitch_port(struct iod_agent_vswitch *v, const char *name, const char *veth,
                            uint32_t ip, bool up);
/* The cluster's overlay table, from the watch (copied). */
void iod_agent_vswitch_table(struct iod_agent_vswitch *v, const struct iod_agent_overlay_table *t);
/* Service VIPs (docs/network.md): replica r, about to start on the
 * overlay, gets each service's overlay VIP:port in its IOD_SVC_<NAME>_ADDR
 * (from the latest table; unchanged before the first). -E2BIG, -ENOMEM. */
struct iod_agent_replica;
int iod_agent_vswitch_svc_env(struct iod_agent_vswitch *v, struct iod_agent_replica *r);
/* The switch's ports (fabric, host, then one per replica) with their
 * counters as its thread last published them (every
 * IOD_AGENT_VSWITCH_STATS_MS): up to max into out; returns the count. */
struct iod_tel_port;
uint32_t iod_agent_vswitch_ports(struct iod_agent_vswitch *v, struct iod_tel_port *out,
                                 uint32_t max);
/* Its running pipeline as JSON text (iod_flow_dump_json with each entry's
 * offload verdict, its ports, conntrack sessions), written by the switch's
 * thread on request: *out (free it), or -ETIMEDOUT when the thread did not
 * answer within IOD_AGENT_VSWITCH_DUMP_WAIT_S. `iod dp dump --node`. */
int iod_agent_vswitch_dump(struct iod_agent_vswitch *v, char **out, struct iod_err *e);

/* ---- concurrent health checks (shell, prober in probe.c) ------------------ */

/*
 * A fixed pool of IOD_AGENT_PROBE_WORKERS threads runs health checks, so a
 * check that hangs until its timeout delays no other replica's verdict.
 * Submit never blocks (the queue holds one check per replica); results come
 * back through iod_agent_prober_take, and fd() becomes readable when one is
 * ready.
 */
struct iod_agent_prober;
struct iod_agent_probe_result {
	uint32_t slot;           /* as submitted */
	char name[IOD_NAME_MAX]; /* replica */
	uint64_t generation;     /* as submitted: a stale result is dropped */
	bool ok;                 /* passed */
	char detail[256];        /* what happened */
};
int iod_agent_prober_new(uint32_t workers, struct iod_agent_prober **out, struct iod_err *e);
/* Queue one check (jail: the replica's sandbox, copied; NULL = none);
 * -ENOSPC when IOD_AGENT_REPLICAS_MAX checks are queued. */
int iod_agent_prober_submit(struct iod_agent_prober *p, uint32_t slot, const char *name,
                            uint64_t generation, const struct iod_agent_health *h, const char *host,
                            uint16_t port, const struct iod_agent_jail *jail);
/* Next finished check (0), or -EAGAIN when none is. */
int iod_agent_prober_take(struct iod_agent_prober *p, struct iod_agent_probe_result *out);
/* An eventfd, readable when results are waiting (read it to clear). */
int iod_agent_prober_fd(const struct iod_agent_prober *p);
/* Stop the workers (waits for checks in flight, each bounded by its timeout). */
void iod_agent_prober_free(struct iod_agent_prober *p);

/* ---- the agent (shell) --------------------------------------------------- */

struct iod_sec_tls_creds;
struct iod_agent_config {
	char name[IOD_NAME_MAX];           /* node name */
	char data_dir[IOD_AGENT_PATH_MAX]; /* run dir: replicas/, events.jsonl, status.json */
	char manifest[IOD_AGENT_PATH_MAX]; /* desired replicas file, re-read on change */
	struct iod_agent_rec_config rec;   /* reconciler tuning */
	uint64_t log_max_bytes;            /* per replica log file */
	uint32_t log_files;                /* rotated files kept */
	uint64_t ckpt_capacity_bytes;      /* per checkpoint store (docs/storage.md) */
	bool use_namespaces;               /* sandbox replicas (default true) */
	uint64_t run_for_ns;               /* 0 = until SIGTERM/SIGINT; tests bound it */
	/* control plane (when servers is set, instead of a manifest) */
	char servers[IOD_AGENT_PATH_MAX]; /* API addresses "host:port,..." */
	char addr[IOD_ADDR_MAX];          /* this node's address for endpoints */
	uint64_t lease_ttl_ms;            /* node lease; lost when not renewed in time */
	uint64_t stateful_grace_ms;       /* lost node: wait this long to move stateful */
	uint32_t gpus;                    /* GPUs this node offers */
	uint32_t cpus;                    /* CPUs this node offers */
	char model[IOD_NAME_MAX];         /* hardware model name ("host" = discovered) */
	json_t *topology;                 /* optional topology document to register */
	/* the node's mesh proxy (with servers only; docs/mesh.md) */
	bool mesh;                     /* host it (default true) */
	char mesh_admin[IOD_ADDR_MAX]; /* its admin endpoint; "" = none */
	uint32_t mesh_workers;         /* its epoll threads (0 = 1) */
	/* proxy-to-proxy mutual TLS (with creds; docs/security.md): the proxy
	 * accepts other nodes' proxies here, and the agent issues and rotates
	 * an SVID per local service into svid_dir */
	char mesh_mtls[IOD_ADDR_MAX];      /* "IP:port"; "" = off */
	char svid_dir[IOD_AGENT_PATH_MAX]; /* default DATA_DIR/svid */
	uint64_t svid_ttl_s;               /* life to ask for (0: the server's, 1 h) */
	bool mesh_no_vips;                 /* the proxy serves no VIPs (mTLS only) */
	/* service_mesh.transport shm: the proxy's AF_UNIX sockets (DIR/SERVICE.sock,
	 * DIR/ep/REPLICA.sock for replicas that listen there); replicas get it in
	 * IOD_MESH_UNIX_DIR. "" = none (every hop TCP) */
	char mesh_unix_dir[IOD_AGENT_PATH_MAX];
	/* per-replica network namespaces (root only; docs/runtime.md) */
	char netns_subnet
	    [IOD_ADDR_MAX]; /* node subnet CIDR; "" = replicas share the node's network */
	/* the node's virtual switch (vswitch.c, docs/network.md) */
	char overlay_dev[32];      /* underlay device (the VTEP); "" = bridge mode */
	uint8_t overlay_gw_mac[6]; /* the underlay next hop's MAC */
	bool overlay_gw_mac_set;   /* given */
	/* security (docs/security.md): HTTPS to the servers with this node's
	 * certificate; NULL = plain HTTP (servers run --insecure) */
	struct iod_sec_tls_creds *creds;    /* CA + node certificate (the caller's) */
	char cert_path[IOD_AGENT_PATH_MAX]; /* where the node certificate is ("": not renewed) */
	char key_path[IOD_AGENT_PATH_MAX];  /* its key (0600) */
	uint64_t cert_ttl_s;                /* life to ask for (0: the server's, 24 h) */
	/* telemetry (docs/observability.md) */
	uint64_t telemetry_interval_ns;    /* sampling period; 0 = no telemetry */
	uint64_t telemetry_push_ns;        /* summary to the control plane this often */
	char telemetry_addr[IOD_ADDR_MAX]; /* serve /metrics and /v1/telemetry; "" = don't */
};
void iod_agent_config_default(struct iod_agent_config *c);

/*
 * The telemetry listener's transport on addr ("IP:port"): HTTPS with the
 * node's certificate, client certificates of the cluster CA required, on
 * any address but loopback (127.x); plain HTTP on loopback (no listener
 * beyond loopback without authentication and TLS; docs/security.md).
 */
bool iod_agent_telemetry_tls(const char *addr);
/* "https://IP:port" or "http://IP:port": what the Node object advertises
 * (`iod dp dump --node`, `iod metrics --node`). 0 or -ENOSPC. */
int iod_agent_telemetry_url(const char *addr, char *buf, size_t len);

/*
 * TLS bootstrapping (certs.c): make sure c has a node certificate (its
 * cert_path/key_path, default DATA_DIR/node.crt and node.key): the one
 * there if it is this node's and valid, else a new one signed by the
 * cluster in exchange for a join token (`iod token create --role node`),
 * over HTTPS trusting ca_path. Sets c->creds (the caller frees it).
 */
int iod_agent_bootstrap(struct iod_agent_config *c, const char *ca_path, const char *token,
                        struct iod_err *e);

/* Run the agent until SIGTERM/SIGINT (stops every replica first). */
int iod_agent_run(const struct iod_agent_config *c, struct iod_err *e);

/* Follow/read helpers for `iod logs` and `iod events` on a local data dir. */
int iod_agent_events_path(const char *data_dir, char *buf, size_t len);

#endif
