/*
 * internal.h: the proxy shell's private types, shared by proxy.c (workers,
 * listeners, view updates, timers), proxy_l4.c (TCP splice), proxy_http.c
 * (HTTP/1.1) and proxy_admin.c (admin HTTP endpoint, DNS responder).
 *
 * Ownership: each worker thread owns its epoll set, connections, buffers,
 * per-service state (LB, outlier, breaker) and metrics; nothing of a worker
 * is written by another thread. The admin thread only reads counters (relaxed
 * atomic loads) and span rings (seqlocks). The shared view of services is
 * guarded by a mutex taken only on the control path (view changes, admin).
 */
#ifndef IOD_MESH_INTERNAL_H
#define IOD_MESH_INTERNAL_H

#include "iod/mesh_proxy.h"

#include <pthread.h>

/* Single-writer counters read by the admin thread: a plain add on x86, but
 * race-free in C11 terms. */
#define STAT_ADD(x, v) \
	__atomic_store_n(&(x), __atomic_load_n(&(x), __ATOMIC_RELAXED) + (v), __ATOMIC_RELAXED)
#define STAT_INC(x) STAT_ADD(x, 1)
#define STAT_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* epoll user data starts with a tag saying what it is. */
enum tag { TAG_LISTENER = 1, TAG_CONN, TAG_WAKE, TAG_MTLS_LISTENER };

/* Latency histogram bounds in seconds (Prometheus `le`). */
extern const double iod_mesh_latency_le[IOD_MESH_LATENCY_BUCKETS];

/* Per-endpoint counters (one worker's share). */
struct ep_stats {
	uint64_t requests;  /* HTTP requests answered / L4 connections made */
	uint64_t errors;    /* 5xx, resets, connect failures */
	uint64_t active;    /* requests or flows in flight (gauge) */
	uint64_t ejections; /* times outlier detection ejected it */
};

/* Per-service counters (one worker's share). */
struct svc_stats {
	uint64_t requests;  /* requests (HTTP) or connections (L4) accepted */
	uint64_t errors;    /* answered 5xx (incl. proxy-made) or flow errors */
	uint64_t retries;   /* upstream attempts after the first */
	uint64_t cx_active; /* downstream connections open (gauge) */
	uint64_t cx_total;  /* downstream connections accepted */
	uint64_t bytes_in;  /* client -> upstream */
	uint64_t bytes_out; /* upstream -> client */
	uint64_t overflow;  /* requests refused by a breaker */
	uint64_t lat[IOD_MESH_LATENCY_BUCKETS + 1]; /* latency histogram counts */
	uint64_t lat_sum_ns;                        /* latency sum */
	uint64_t panic;                             /* picks made in panic mode */
	uint64_t denied;                            /* calls refused by a policy */
	uint64_t limited;       /* connections refused: their client held its limit */
	uint64_t head_timeouts; /* client connections ended for a slow head (408) */
	uint64_t fault_delays;  /* requests held by an injected delay */
	uint64_t fault_aborts;  /* requests answered by an injected abort */
	/* connections by path (service_mesh.transport; enum iod_mesh_tp_path) */
	uint64_t tp_down[2]; /* client connections accepted, tcp / shm */
	uint64_t tp_up[2];   /* upstream connections opened, tcp / shm */
};

struct conn;

/* One service as one worker sees it. */
struct wsvc {
	bool active;                                 /* present in the current view */
	uint32_t gen;                                /* raised when endpoints change */
	uint32_t life;                               /* raised when (re)activated: breaker reset */
	struct iod_mesh_service svc;                 /* copy of the view's service */
	struct iod_mesh_lb_state lb;                 /* picker */
	struct iod_mesh_outlier outlier;             /* per-endpoint passive health */
	struct iod_mesh_breaker breaker;             /* in-use counts and trips */
	struct iod_mesh_breaker_cfg brk;             /* this worker's share of the limits */
	struct conn *idle[IOD_MESH_ENDPOINTS_MAX];   /* keep-alive pool per endpoint */
	uint32_t idle_n[IOD_MESH_ENDPOINTS_MAX];     /* its length */
	struct ep_stats eps[IOD_MESH_ENDPOINTS_MAX]; /* per-endpoint counters */
	struct svc_stats st;                         /* per-service counters */
	struct listener *lst;                        /* this worker's listening socket */
	struct listener *ulst;         /* worker 0: the AF_UNIX listener while shm (or NULL) */
	enum iod_mesh_tp_want tp_want; /* effective service_mesh.transport (never UNSET once
	                                   applied) */
};

struct listener {
	uint8_t tag;   /* TAG_LISTENER */
	int fd;        /* bound to vip:port with SO_REUSEPORT */
	uint32_t slot; /* service slot */
	bool unix_;    /* AF_UNIX (service_mesh.transport shm), else TCP on the VIP */
};

/* CK_MTLS_T: a proxy-to-proxy TLS connection (either direction);
 * CK_MTLS_P: its plaintext side (a socketpair end the sender's L4/HTTP
 * upstream uses, or the receiver's connection to the local endpoint). */
enum conn_kind { CK_L4_CLIENT, CK_L4_UP, CK_HTTP_CLIENT, CK_HTTP_UP, CK_MTLS_T, CK_MTLS_P };

/* One direction of an L4 flow. */
struct l4dir {
	int pipe_r, pipe_w; /* splice pipe (or -1: copy via buf) */
	uint32_t bytes;     /* bytes buffered (pipe or buf) */
	uint32_t off;       /* buf: first unsent byte */
	bool eof;           /* source finished */
	bool shut;          /* destination write side shut */
	uint64_t total;     /* bytes moved */
};

struct conn {
	uint8_t tag;                        /* TAG_CONN */
	uint8_t kind;                       /* enum conn_kind */
	uint8_t state;                      /* per kind (see proxy_l4.c, proxy_http.c) */
	bool in_use;                        /* allocated */
	int fd;                             /* socket or -1 */
	uint32_t events;                    /* current epoll interest */
	uint32_t index;                     /* slot in the worker's array */
	struct conn *peer;                  /* the other side (client <-> upstream) */
	struct conn *next_used, *prev_used; /* worker's in-use list (timers) */
	struct conn *next_idle;             /* keep-alive pool link */
	uint32_t slot;                      /* service slot */
	uint32_t svc_gen;                   /* wsvc gen when ep was chosen */
	uint32_t life;                      /* wsvc life when breaker units were taken */
	uint32_t ep;                        /* endpoint index (UINT32_MAX = none) */
	uint32_t ep_ip4;                    /* endpoint address (copied: the view may change) */
	uint16_t ep_port;
	uint64_t affinity;             /* hash of the client address (hash policies) */
	uint8_t attempts;              /* upstream attempts so far (1 + retries) */
	bool pipe_full[2];             /* L4 splice: pipe k took no more bytes */
	bool holds_retry;              /* holds a retries breaker unit */
	bool holds_request;            /* holds a requests breaker unit */
	bool holds_pending;            /* holds a pending breaker unit */
	bool holds_cx;                 /* holds a connections breaker unit (upstream conns) */
	bool ep_active;                /* counted in the endpoint's active requests */
	bool reused;                   /* upstream: taken from the keep-alive pool */
	uint64_t connect_start_ns;     /* upstream connect in progress since */
	uint64_t req_start_ns;         /* request (or flow) started */
	uint64_t last_io_ns;           /* last byte either way */
	uint64_t retry_at_ns;          /* backoff timer (0 = none) */
	uint16_t fault_abort;          /* client: abort with this once the fault delay ends */
	char *buf;                     /* IOD_MESH_HTTP_BUF bytes from the worker's pool */
	uint32_t len;                  /* bytes in buf */
	uint32_t req_len;              /* client: bytes of the current request in buf */
	const char *out;               /* bytes being written to fd */
	uint32_t out_len;              /* ... how many */
	bool close_after;              /* client: close once out is flushed */
	bool keep_alive;               /* client: request wants keep-alive */
	bool idem;                     /* client: request is idempotent */
	bool resp_started;             /* client: response head forwarded */
	uint8_t method_len;            /* client: request method length */
	char method[8];                /* client: request method (for HEAD and spans) */
	bool peer_known;               /* client: the caller's socket uid is known */
	uint32_t peer_uid;             /* ... and it is this */
	struct iod_http_body body;     /* upstream: response body framing */
	struct iod_http_body req_body; /* client: framing of the request body being read */
	bool req_done;                 /* client: the request's last byte is in buf (or sent) */
	bool committed;                /* client: request bytes left buf, so no resend */
	uint32_t sent;                 /* client: bytes of buf the current attempt has sent */
	uint64_t linger_until_ns;      /* client lingering (H_LINGER): close by then */
	uint32_t linger_bytes;         /* ... bytes discarded so far */
	bool send_done;                /* upstream: the whole request went out */
	bool resp_keep_alive;          /* upstream: response allows reuse */
	uint16_t status;               /* upstream: response status */
	struct iod_mesh_span span;     /* client: the span being built */
	struct l4dir d[2];             /* L4 client: [0] client->up, [1] up->client */
	char client_addr[32];          /* client "ip:port" */
	uint64_t head_start_ns;        /* client (HTTP): the head being read began
	                                  (0 = between requests: the idle timeout) */
	uint32_t cl_ip4, cl_uid;       /* client: its key in the worker's clients */
	bool cl_counted;               /* ... counted there (released with the conn) */
	struct iod_sec_tls *tls;       /* CK_MTLS_T: the session */
	uint32_t tls_wlen;             /* CK_MTLS_T: a TLS write that said EAGAIN (must be
	                                  retried with the same length) */
	uint32_t off;                  /* CK_MTLS_*: first byte of buf not yet written */
	bool tls_want_out;             /* CK_MTLS_T: the session waits to write */
	uint8_t tls_phase;             /* CK_HTTP_UP with tls: 1 handshake, 2 preamble,
	                                  3 ready (0: no TLS) */
	uint16_t pre_len, pre_off;     /* ... its preamble in buf, and how much went */
	bool outbound;                 /* CK_MTLS_T: we dialled (else accepted) */
	bool again;                    /* CK_MTLS_*: on the worker's again list */
	struct conn *next_again;       /* ... its link */
	char mtls_peer[IOD_NAME_MAX];  /* CK_MTLS_T outbound: the node we must reach */
	uint16_t mtls_id;              /* upstreams: the SVID their relay presents
	                                  (mtls ids index + 1; 0 = a direct connection) */
	bool peer_revoked;             /* CK_HTTP_UP with tls: its node proxy is revoked
	                                  (closed at the end of its request, never pooled) */
	uint8_t tp;                    /* enum iod_mesh_tp_path of this socket (clients and
	                                  upstreams) */
};

/* Who connected, as the accept saw it. */
struct accepted {
	const char *client; /* "ip:port" */
	uint32_t ip4;       /* its address (host order) */
	bool peer_known;    /* the uid owning its socket is known */
	uint32_t peer_uid;  /* ... and it is this */
	uint32_t key_uid;   /* its uid in the clients table (UINT32_MAX: unknown) */
	uint8_t tp;         /* enum iod_mesh_tp_path it came in on */
};

struct worker {
	struct iod_mesh_proxy *p;         /* owner */
	uint32_t id;                      /* 0.. */
	pthread_t thread;                 /* the thread */
	int epfd;                         /* its epoll set */
	int wakefd;                       /* eventfd: stop or view change */
	uint8_t wake_tag;                 /* TAG_WAKE (epoll data points here) */
	struct iod_rng rng;               /* ids, jitter, P2C */
	uint64_t now_ns;                  /* monotonic time cached per loop turn */
	uint64_t last_tick_ns;            /* last timer scan */
	uint64_t view_version;            /* version of the view applied */
	char node[IOD_NAME_MAX];          /* this node (locality), copied from the view */
	char rack[IOD_NAME_MAX];          /* its rack */
	struct wsvc *svcs;                /* IOD_MESH_SERVICES_MAX slots */
	struct conn *conns;               /* IOD_MESH_CONNS_MAX connections */
	char *bufs;                       /* IOD_MESH_CONNS_MAX x IOD_MESH_HTTP_BUF */
	uint32_t *free_conns;             /* stack of free connection indexes */
	uint32_t free_n;                  /* its depth */
	struct conn *used;                /* in-use list head */
	char *scratch;                    /* IOD_MESH_HTTP_BUF: request rewriting */
	struct iod_mesh_span_ring *spans; /* spans and flows of this worker */
	uint64_t cx_refused;              /* accepts dropped: no free connection */
	uint64_t cx_shed;                 /* accepts shed: out of descriptors (EMFILE) */
	int reserve_fd;                   /* given up to shed a connection at EMFILE */
	uint32_t lingering;               /* client connections in a lingering close */
	bool authz;                       /* the view carries identities and policies */
	struct iod_mesh_clients *clients; /* open client connections per client */
	uint32_t client_max;              /* this worker's share of the per-client limit */
	struct listener mtls_lst;         /* proxies dial in here (fd -1 = none) */
	struct conn *again;               /* relays with decrypted bytes left to move */
	uint64_t mtls_in, mtls_out;       /* handshakes completed, by direction */
	uint64_t mtls_refused;            /* peers refused: handshake, identity, preamble */
	uint64_t mtls_denied;             /* peers refused by a policy on their SVID */
	uint64_t mtls_revoked;            /* peers refused or cut off: `iod revoke` names them */
	uint8_t up_tp;                    /* path of the last iod_mesh_upstream_connect */
};

/* One SVID the proxy presents when it dials: a local service's. */
struct mtls_id {
	char tenant[IOD_NAME_MAX];       /* its tenant */
	char service[IOD_NAME_MAX];      /* its service */
	struct iod_sec_tls_creds *creds; /* DIR/TENANT/SERVICE.crt/.key */
	int64_t mtime_ns;                /* the .crt's mtime when loaded */
};

/* Proxy-to-proxy mutual TLS: credentials and where they come from. */
struct mtls {
	pthread_mutex_t mu;                        /* guards ids (dials, reloads) */
	struct iod_sec_tls_creds *in;              /* node.crt: what dialling proxies see, and
	                                              what the node's own processes present */
	bool in_borrowed;                          /* in is opts.mtls_node_creds (not ours) */
	int64_t in_mtime_ns;                       /* its mtime when loaded */
	struct mtls_id ids[IOD_MESH_MTLS_IDS_MAX]; /* loaded on first use */
	uint32_t ids_n;
	int32_t fallback;                  /* ids index of opts.mtls_identity (callers the proxy
	                     cannot name present it); -1 = none */
	char cluster[IOD_SEC_CLUSTER_MAX]; /* trust domain (the CA's) */
	uint64_t rotations;                /* certificates swapped in after start */
};

struct iod_mesh_proxy {
	struct iod_mesh_proxy_opts opts; /* as started */
	struct iod_mesh_source *src;     /* where the view comes from */
	pthread_mutex_t mu;              /* guards view, slot_* */
	struct iod_mesh_registry view;   /* the current view */
	struct iod_mesh_registry next;   /* the source fills it; swapped with view */
	char slot_name[IOD_MESH_SERVICES_MAX][IOD_NAME_MAX]; /* slot -> service ("" = free) */
	int32_t view_slot[IOD_MESH_SERVICES_MAX];            /* view index -> slot */
	uint64_t version;                                    /* view version (atomic) */
	struct worker *workers;                              /* opts.workers of them */
	uint32_t workers_n;
	bool stop;              /* atomic: threads exit */
	int64_t unix_offset_ns; /* unix time - monotonic time */
	int admin_fd;           /* admin listener or -1 */
	int admin_reserve;      /* its spare descriptor (iod_fd_accept) */
	pthread_t admin_thread;
	int dns_fd; /* DNS socket or -1 */
	pthread_t dns_thread;
	struct mtls *mtls; /* proxy-to-proxy mTLS; NULL = off */
	/* service_mesh.transport as this node applied it (iod config; enum
	 * iod_mesh_tp_want, atomic): the default of services whose spec names none */
	uint8_t tp_cluster;
	bool rdma_device; /* atomic: this node has an RDMA device (the pick's reasons) */
};

/* proxy.c */
struct conn *iod_mesh_conn_get(struct worker *w, enum conn_kind kind, int fd);
void iod_mesh_conn_put(struct worker *w, struct conn *c);
int iod_mesh_conn_watch(struct worker *w, struct conn *c, uint32_t events);
int iod_mesh_connect(uint32_t ip4, uint16_t port);
void iod_mesh_ep_done(struct worker *w, struct wsvc *s, struct conn *c, enum iod_mesh_result r);
void iod_mesh_latency_observe(struct svc_stats *st, uint64_t ns);
static inline uint64_t iod_mesh_unix_ns(const struct worker *w)
{
	return (uint64_t)((int64_t)w->now_ns + w->p->unix_offset_ns);
}

/* proxy_l4.c */
/* Count a new client connection against its client's limit (on_accept
 * did the take; the connection releases it when it is put back). */
void iod_mesh_conn_client(struct worker *w, struct conn *c, const struct accepted *a);
void iod_mesh_l4_accept(struct worker *w, struct wsvc *s, int fd, const struct accepted *a);
void iod_mesh_l4_event(struct worker *w, struct conn *c, uint32_t ev);
void iod_mesh_l4_timer(struct worker *w, struct conn *c);

/* proxy_http.c */
void iod_mesh_http_accept(struct worker *w, struct wsvc *s, int fd, const struct accepted *a);
/* The policy verdict for a call to `to` from the peer (proxy.c: the view's
 * callers and policies, under the proxy's lock); caller gets the calling
 * service's "tenant/name" when known, else "". */
void iod_mesh_authz_check(struct worker *w, const struct iod_mesh_service *to, bool peer_known,
                          uint32_t peer_uid, const char *method, struct iod_sec_verdict *v,
                          char *caller, size_t caller_len);
void iod_mesh_http_event(struct worker *w, struct conn *c, uint32_t ev);
void iod_mesh_http_timer(struct worker *w, struct conn *c);
/* An upstream over TLS whose node proxy is now revoked: closed if idle in
 * its pool, else closed when its request ends (never pooled again). */
void iod_mesh_http_up_revoked(struct worker *w, struct conn *u);

/* proxy_mtls.c */
/* The upstream identity of the node's own processes (its node certificate). */
#define IOD_MESH_MTLS_NODE_ID (IOD_MESH_MTLS_IDS_MAX + 1)
/* Load the mTLS files (start) / free them. */
int iod_mesh_mtls_init(struct iod_mesh_proxy *p, struct iod_err *e);
void iod_mesh_mtls_free(struct iod_mesh_proxy *p);
/* An upstream socket for endpoint ep of s: a TCP connect to it, or, when
 * the endpoint sits behind another node's proxy (mtls_ip4), one end of a
 * socketpair whose other end is relayed over mutual TLS to that proxy.
 * Non-blocking either way; -errno. */
int iod_mesh_upstream_connect(struct worker *w, const struct wsvc *s, uint32_t ep, int id);
/* Which SVID a connection to endpoint ep made for client c presents: 0 for
 * a direct endpoint, the mtls ids index + 1 (the caller's own SVID when the
 * proxy knows the caller, else the --mtls-identity one), or -EACCES when
 * there is none (the call cannot be made). Pooled upstreams are reused only
 * for the same id. */
int iod_mesh_upstream_identity(struct worker *w, const struct wsvc *s, uint32_t ep,
                               const struct conn *c);
void iod_mesh_mtls_accept(struct worker *w);
void iod_mesh_mtls_event(struct worker *w, struct conn *c, uint32_t ev);
void iod_mesh_mtls_timer(struct worker *w, struct conn *c);
/* Move the bytes the TLS sessions still hold decrypted (end of a loop turn). */
void iod_mesh_mtls_again(struct worker *w);
/* Put c on the again list (its TLS session holds decrypted bytes). */
void iod_mesh_again_add(struct worker *w, struct conn *c);
/*
 * An HTTP upstream straight over TLS to the endpoint's node proxy (no relay
 * hop): the connecting fd, *tls its client session (not yet handshaken),
 * pre[0..*pre_len) the preamble to send first (at most 160 bytes). -errno.
 */
int iod_mesh_upstream_dial_tls(struct worker *w, const struct wsvc *s, uint32_t ep, int id,
                               struct iod_sec_tls **tls, char *pre, uint32_t *pre_len);
/* After the handshake: is the peer the node proxy we meant to reach? */
bool iod_mesh_mtls_peer_ok(struct worker *w, struct iod_sec_tls *t, const char *node);
/* Close a relay pair (either end). */
void iod_mesh_mtls_close(struct worker *w, struct conn *c);
/* Close this worker's mTLS connections whose verified peer the view now
 * says is revoked (after a view change). */
void iod_mesh_mtls_sweep(struct worker *w);

/* proxy_admin.c */
int iod_mesh_admin_start(struct iod_mesh_proxy *p, struct iod_err *e);
void iod_mesh_admin_stop(struct iod_mesh_proxy *p);

#endif
