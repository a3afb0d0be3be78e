/*
 * mesh_proxy.h: the mesh's shells: the sources that read a config file or
 * follow the control plane, the proxy's threads, and the lookup of who is
 * calling (sock_diag). The cores (registry view, outlier detection, load
 * balancing, breakers, spans) are in mesh.h; the codecs in mesh_proto.h.
 */
#ifndef IOD_MESH_PROXY_H
#define IOD_MESH_PROXY_H

#include "iod/mesh.h"
#include "iod/mesh_proto.h"

/* A source that re-reads a config file when its mtime changes. */
struct iod_mesh_file_source {
	struct iod_mesh_source src; /* hand &fs->src to the proxy */
	char path[512];             /* config file */
	int64_t mtime_ns;           /* last loaded modification time */
	uint64_t version;           /* raised on each successful reload */
};
void iod_mesh_file_source_init(struct iod_mesh_file_source *fs, const char *path);

/* VIP port of a service whose spec declares no port. */
#define IOD_MESH_API_DEFAULT_PORT 7000
/*
 * A source that follows the control plane (GET /v1/services, /v1/endpoints,
 * /v1/nodes on `server`): one mesh service per Service, endpoints from the
 * agents' Endpoint reports (address, node, healthy). A first port named
 * "http" or "http-*" makes a service L7, else L4 (docs/mesh.md).
 */
struct iod_mesh_api_source {
	struct iod_mesh_source src; /* hand &as->src to the proxy */
	char server[64];            /* API address "host:port" */
	char node[IOD_NAME_MAX];    /* the node this proxy runs on */
	uint64_t rev;               /* cluster revision last read */
	uint64_t watch_rev;         /* wait() watches for changes after this revision */
	uint64_t hash;              /* hash of the last view built */
	uint64_t version;           /* raised on each change */
	/* HTTPS to a --pki server (docs/security.md): NULL = plain HTTP */
	struct iod_sec_tls_creds *creds;   /* CA + this node's certificate (not owned) */
	char token[IOD_SEC_TOKEN_LEN + 1]; /* or a bearer token; "" = none */
	/* this proxy speaks mTLS to other nodes' proxies: an endpoint on another
	 * node whose Node object names its proxy's listener ("mesh_mtls") is
	 * reached through that listener (docs/security.md) */
	bool mtls;
	/* iod's overlay (an agent with a virtual switch): each service's VIP is
	 * its Service's overlay VIP ("vip"; a service without one is left
	 * out), and only services with service_mesh.mode l7 are listened on
	 * (the switch balances the rest itself); DNS answers every VIP */
	bool overlay;
};
void iod_mesh_api_source_init(struct iod_mesh_api_source *s, const char *server, const char *node);
/* ---- the proxy (shell) ------------------------------------------------- */

struct iod_mesh_proxy;

struct iod_mesh_proxy_opts {
	uint32_t workers;          /* epoll threads (0 = 1) */
	const char *admin_addr;    /* "127.0.0.1:15000"; NULL = no admin endpoint */
	const char *dns_addr;      /* "127.0.0.1:15053"; NULL = no DNS responder */
	uint64_t seed;             /* rng seed (ids, jitter, P2C) */
	bool no_splice;            /* L4: copy through user space instead of splice */
	uint32_t client_conns_max; /* connections per client, all workers
	                              (0 = IOD_MESH_CLIENT_CONNS_MAX) */
	/* proxy-to-proxy mutual TLS (docs/mesh.md, docs/security.md); NULL = off.
	 * mtls_dir holds ca.crt, node.crt/.key (what this proxy presents to
	 * proxies dialling in) and TENANT/SERVICE.crt/.key (the SVIDs it
	 * presents when it dials: mtls_identity's). Files are re-read when they
	 * change (iod_mesh_proxy_mtls_reload): rotation drops no connection. */
	const char *mtls_dir;
	const char *mtls_listen;   /* "IP:port" to accept proxies on; NULL = none */
	const char *mtls_identity; /* "TENANT/SERVICE" this proxy's callers present */
	/* The node's own credentials (CA + node certificate; borrowed, rotated
	 * in place by their owner: the agent's). Set: what this proxy presents
	 * to proxies dialling in, and, dialling out, for the node's own
	 * processes (callers that are no replica); mtls_dir then holds only
	 * ca.crt and the SVIDs. NULL: mtls_dir/node.crt/.key. */
	struct iod_sec_tls_creds *mtls_node_creds;
	/* Serve no VIPs: only the mTLS listener, relaying to local endpoints
	 * (nodes that share one host's loopback with the node whose proxy
	 * serves the VIPs: `iod up`). */
	bool no_vips;
	/* The device VIP listeners and the DNS responder are bound to
	 * (SO_BINDTODEVICE); NULL = none. Set by an agent on iod's overlay to
	 * its host stack's port of the virtual switch ("iodk<tag>"): then the
	 * VIPs are the overlay's, the DNS responder may listen on the gateway
	 * address, and only packets the switch delivers reach them. */
	const char *listen_dev;
	/* HTTP upstreams behind another node's proxy go through a socketpair
	 * and a relay (the first design) instead of TLS on the upstream socket
	 * itself: only to compare the two (bench_security). */
	bool mtls_relay;
	/*
	 * service_mesh.transport shm (docs/mesh.md, "Transport"): the directory
	 * of the AF_UNIX sockets. While a service's transport is not tcp, worker
	 * 0 listens on DIR/SERVICE.sock (callers on this node connect there
	 * instead of the VIP), and an endpoint on this node is dialled at
	 * DIR/ep/ENDPOINT.sock when that socket accepts (else its TCP address).
	 * NULL = no AF_UNIX path: every hop runs TCP whatever the setting.
	 */
	const char *unix_dir;
	/* service_mesh.transport of services whose spec names none, at start
	 * (iod_mesh_proxy_transport_set changes it live); UNSET = tcp */
	enum iod_mesh_tp_want transport;
};

/* One service identity (the SVID spiffe://C/ns/TENANT/svc/SERVICE). */
struct iod_mesh_svc_id {
	char tenant[IOD_NAME_MAX];
	char service[IOD_NAME_MAX];
};
/* The services with an endpoint on node in the proxy's current view (the
 * SVIDs its agent must hold): at most max into out; their count. */
uint32_t iod_mesh_proxy_node_services(struct iod_mesh_proxy *p, const char *node,
                                      struct iod_mesh_svc_id *out, uint32_t max);

/* Start the proxy's threads with the source's first view. */
int iod_mesh_proxy_start(struct iod_mesh_proxy **out, const struct iod_mesh_proxy_opts *o,
                         struct iod_mesh_source *src, struct iod_err *e);
/* Poll the source and apply a changed view (call periodically). */
int iod_mesh_proxy_refresh(struct iod_mesh_proxy *p, struct iod_err *e);
/*
 * Block until the next refresh is due: with a source that pushes (wait),
 * until it reports a change or resync_ms pass (the periodic resync); else
 * poll_ms. Returns early once *stop is set. 0, or the source's failure
 * (after a poll_ms pause, so a caller that just refreshes again polls).
 * *changed (when not NULL): the source reported a change (a push, or a
 * source without wait): the caller must refresh, whatever the time taken
 * (the source's watch has moved past that change).
 */
int iod_mesh_proxy_wait(struct iod_mesh_proxy *p, uint32_t poll_ms, uint32_t resync_ms,
                        const volatile int *stop, struct iod_err *e, bool *changed);
void iod_mesh_proxy_stop(struct iod_mesh_proxy *p);
/* Re-read the mTLS files that changed since the last call and swap them in
 * for new sessions (open ones keep theirs). 0 (nothing to do, or done), or
 * why the new files are refused (the old ones stay in use). */
int iod_mesh_proxy_mtls_reload(struct iod_mesh_proxy *p, struct iod_err *e);
/*
 * Apply the node's service_mesh.transport (iod config) live: services
 * whose spec names none take it. New connections use the new path once
 * the workers have applied it (milliseconds); open ones finish on theirs,
 * and idle pooled upstream connections are closed so that the next
 * request dials again. rdma_device: the node has one (for the reasons).
 */
void iod_mesh_proxy_transport_set(struct iod_mesh_proxy *p, enum iod_mesh_tp_want want,
                                  bool rdma_device);
/* Make DIR (0755) and DIR/ep (01777: replicas create their sockets there). */
void iod_mesh_unix_dirs(const char *dir);
/* DIR/SERVICE.sock (or DIR/ep/ENDPOINT.sock with ep): -ENAMETOOLONG when
 * it does not fit a sockaddr_un. */
int iod_mesh_unix_path(const char *dir, const char *name, bool ep, char *buf, size_t len);
/* Prometheus text of every service and endpoint (appends to b). */
int iod_mesh_proxy_metrics(struct iod_mesh_proxy *p, struct iod_buf *b);

/* ---- who is calling (peer.c) ------------------------------------------- */

/* The owner of the peer socket of a local TCP connection. */
struct iod_mesh_peer {
	uint32_t uid;       /* owning uid: the replica's (per-replica uids) */
	uint64_t inode;     /* socket inode */
	uint64_t cgroup_id; /* cgroup v2 id of the socket's creator; 0 = unknown */
};
/* Look up the peer of accepted (or connected) IPv4 TCP socket fd in the
 * kernel's socket table: -ENOENT when the peer is not on this host. */
int iod_mesh_peer_owner(int fd, struct iod_mesh_peer *out, struct iod_err *e);

#endif
