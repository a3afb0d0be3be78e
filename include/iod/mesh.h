/*
 * mesh.h: iod's service mesh: the registry view a node's proxy routes by,
 * load-balancing policies, outlier detection, circuit breakers, retries,
 * HTTP/1.1 and W3C trace-context parsing, spans, the DNS responder's codec,
 * and the per-node proxy that drives them all.
 *
 * Everything above "proxy" is a pure core: no clock, no I/O, no rand();
 * the caller passes now_ns and a struct iod_rng. The proxy is the shell:
 * epoll workers with SO_REUSEPORT listeners on a loopback VIP per service,
 * L4 (splice) or L7 (HTTP/1.1) forwarding, an admin HTTP endpoint serving
 * /metrics (Prometheus text) and /spans. docs/mesh.md describes semantics and
 * where they differ from Envoy's.
 */
#ifndef IOD_MESH_H
#define IOD_MESH_H

#include "iod/base.h"
#include "iod/http.h"
#include "iod/sec.h"

/* ---- registry view ----------------------------------------------------- */

/* Load-balancing policies: enum, config name. */
#define IOD_MESH_LB_POLICIES(X)           \
	X(ROUND_ROBIN, "round_robin")     \
	X(WEIGHTED, "weighted")           \
	X(LEAST_REQUEST, "least_request") \
	X(RING_HASH, "ring_hash")         \
	X(MAGLEV, "maglev")

enum iod_mesh_lb {
#define X(n, s) IOD_MESH_LB_##n,
	IOD_MESH_LB_POLICIES(X)
#undef X
};
const char *iod_mesh_lb_name(enum iod_mesh_lb lb);
int iod_mesh_lb_parse(const char *s, enum iod_mesh_lb *out);

/*
 * service_mesh.transport as asked for: by a service's spec (per service,
 * or the spec's top level) or by the cluster configuration (iod config).
 * UNSET (0) means "the spec says nothing": the cluster's value holds.
 */
enum iod_mesh_tp_want {
	IOD_MESH_TP_UNSET = 0, /* the spec names none */
	IOD_MESH_TP_TCP,       /* the kernel's TCP/IP stack on every hop */
	IOD_MESH_TP_SHM,       /* same-node hops over AF_UNIX stream sockets */
	IOD_MESH_TP_RDMA,      /* across nodes over RDMA (not built: tcp there) */
	IOD_MESH_TP_AUTO,      /* the cheapest path each hop has */
};
/* What one hop runs on. */
enum iod_mesh_tp_path {
	IOD_MESH_PATH_TCP = 0, /* AF_INET stream socket */
	IOD_MESH_PATH_SHM,     /* AF_UNIX stream socket: no TCP/IP stack */
};
/* How the proxy handles a service's traffic. */
enum iod_mesh_mode {
	IOD_MESH_MODE_TCP, /* L4: bytes spliced both ways, per-connection balancing */
	IOD_MESH_MODE_HTTP /* L7: HTTP/1.1, per-request balancing, retries, traces */
};

struct iod_mesh_endpoint {
	char id[IOD_NAME_MAX];   /* stable identity: replica name or "ip:port" */
	uint32_t ip4;            /* IPv4 address, host byte order */
	uint16_t port;           /* TCP port */
	char node[IOD_NAME_MAX]; /* node that runs it ("" = unknown) */
	char rack[IOD_NAME_MAX]; /* rack of that node ("" = unknown) */
	uint32_t weight;         /* relative share for weighted/hash policies; >= 1 */
	bool healthy;            /* the agent's health check passes */
	uint32_t mtls_ip4;       /* its node proxy's mTLS address (proxy-to-proxy);
	                            0 = dial the endpoint directly */
	uint16_t mtls_port;      /* ... and port */
};

/* Outlier detection settings (Envoy's names; see docs/mesh.md). */
struct iod_mesh_outlier_cfg {
	uint32_t consecutive_5xx;          /* 5xx or connect failures in a row to eject; 0 = off */
	uint32_t consecutive_connect_fail; /* connect failures in a row to eject; 0 = off */
	uint64_t interval_ns;              /* how often ejection multipliers decay */
	uint64_t base_ejection_ns;         /* ejection time = base x times ejected */
	uint64_t max_ejection_ns;          /* ... capped here */
	uint32_t max_ejection_bp;          /* share of hosts ejectable, basis points; >= 1 host */
	uint32_t panic_bp;                 /* below this share of usable hosts, use all */
};

/* Circuit-breaker limits per upstream service (Envoy's thresholds). */
struct iod_mesh_breaker_cfg {
	uint32_t max_connections; /* upstream connections open */
	uint32_t max_pending;     /* requests waiting for a connection */
	uint32_t max_requests;    /* requests in flight */
	uint32_t max_retries;     /* retries in flight */
};

/* Retry policy. */
struct iod_mesh_retry_cfg {
	uint32_t max_per_request; /* attempts after the first */
	uint32_t budget_bp;       /* retries in flight <= this share of requests in flight */
	uint32_t min_concurrency; /* ... but always allow this many */
	uint64_t backoff_base_ns; /* full-jitter backoff: uniform [0, base x 2^n) */
	uint64_t backoff_max_ns;  /* ... capped here */
};

/* Timeouts (0 = none). */
struct iod_mesh_timeouts {
	uint64_t connect_ns; /* TCP connect to an upstream */
	uint64_t request_ns; /* request sent to response complete, per attempt */
	uint64_t idle_ns;    /* no bytes either way on a connection */
	uint64_t head_ns;    /* a client's whole request head (slowloris) */
};

/*
 * Fault injection (Istio's HTTPFaultInjection; `iod chaos delay|abort
 * service/NAME`, docs/chaos.md): a share of a service's HTTP requests held
 * before they go upstream, or answered at once with a status. Each part
 * ends at its own deadline (unix ns, the proxy's wall clock: it stops
 * applying a fault then even if nobody removes it). pct 0 = off.
 */
struct iod_mesh_fault {
	uint32_t delay_pct;      /* requests delayed, 0..100 */
	uint64_t delay_ns;       /* ... by this long */
	uint64_t delay_until_ns; /* ... until (unix ns); 0 = no end (static config) */
	uint32_t abort_pct;      /* requests aborted, 0..100 */
	uint16_t abort_status;   /* ... with this status */
	uint64_t abort_until_ns; /* ... until (unix ns); 0 = no end */
};

/*
 * The fault for one request at now_unix_ns: *delay_ns (0 = none) and
 * *abort_status (0 = none); both may be set (Envoy: delayed, then
 * aborted). Draws from rng only for a part in force. Pure.
 */
void iod_mesh_fault_roll(const struct iod_mesh_fault *f, uint64_t now_unix_ns, struct iod_rng *rng,
                         uint64_t *delay_ns, uint16_t *abort_status);
/* Is any part of f in force at now_unix_ns? Pure. */
bool iod_mesh_fault_active(const struct iod_mesh_fault *f, uint64_t now_unix_ns);

struct iod_mesh_service {
	char name[IOD_NAME_MAX];   /* DNS-label-like service name */
	char tenant[IOD_NAME_MAX]; /* its tenant (policies; "" = "default") */
	uint32_t vip4;             /* stable virtual IPv4 (127.x.y.z), host order */
	uint16_t port;             /* port the VIP listens on */
	enum iod_mesh_mode mode;   /* tcp or http */
	enum iod_mesh_lb lb;       /* balancing policy */
	bool locality;             /* prefer same node, then same rack, then any */
	struct iod_mesh_outlier_cfg outlier;
	struct iod_mesh_breaker_cfg breaker;
	struct iod_mesh_retry_cfg retry;
	struct iod_mesh_timeouts timeout;
	struct iod_mesh_fault fault;     /* injected faults (chaos); zero = none */
	bool no_listen;                  /* in the view (DNS, mTLS hops in) but no VIP listener */
	enum iod_mesh_tp_want transport; /* its spec's service_mesh.transport (UNSET: the
	                                    cluster's, iod config) */
	struct iod_mesh_endpoint eps[IOD_MESH_ENDPOINTS_MAX]; /* eps_n endpoints */
	uint32_t eps_n;
};

/* A replica that may call through the proxy: the uid its sandbox runs it
 * as (what the kernel says owns a connection's socket), and its service. */
struct iod_mesh_caller {
	uint32_t uid;               /* the replica's uid */
	char service[IOD_NAME_MAX]; /* its service */
	char tenant[IOD_NAME_MAX];  /* its tenant */
};

/* What a proxy routes by: every service it serves, sorted by name. */
struct iod_mesh_registry {
	/* who may call whom (docs/security.md); with authz false nothing is checked */
	bool authz;                          /* the source knows identities and policies */
	struct iod_sec_policy_set *policies; /* Policy objects (heap); NULL = none */
	struct iod_mesh_caller *callers;     /* callers_n of them, sorted by uid (heap) */
	uint32_t callers_n;
	/* Revocation object names (iod_sec_revocation_key: "node.N",
	 * "service.T.N"), sorted (heap): mTLS peers they name are refused */
	char (*revoked)[IOD_NAME_MAX];
	uint32_t revoked_n;
	char node[IOD_NAME_MAX];       /* the node this proxy runs on (locality) */
	char rack[IOD_NAME_MAX];       /* its rack */
	struct iod_mesh_service *svcs; /* svcs_n services (heap, svcs_cap slots) */
	uint32_t svcs_n;
	uint32_t svcs_cap;
	uint64_t version; /* raised by the source on every change */
};

/*
 * Is a verified mTLS peer revoked (`iod revoke`)? A node's certificate
 * whose node is, an SVID whose service is, or an SVID issued to a revoked
 * node (its OU). why (may be NULL) says which. Pure.
 */
bool iod_mesh_peer_revoked(const struct iod_mesh_registry *r, const struct iod_sec_cert_info *peer,
                           char *why, size_t why_len);
/* Fill r's revocations from names (each a Revocation object's name;
 * others are ignored), sorted. -ENOMEM, -ENOSPC past IOD_MESH_REVOKED_MAX. */
int iod_mesh_revoked_set(struct iod_mesh_registry *r, const char *const *names, uint32_t n);

/* The caller whose replicas run as uid (NULL: none). Pure. */
const struct iod_mesh_caller *iod_mesh_caller_find(const struct iod_mesh_registry *r, uint32_t uid);

/*
 * The receiving proxy's decision for one call to service `to` (method NULL
 * for an L4 connection) from the local peer whose socket uid owns: a
 * replica's uid is its service's identity (iod_sec_policy_decide: a
 * matching deny wins, then allow, allow-listed destinations, then allow
 * within a tenant and deny across). A peer that is no replica (a process of
 * the node itself) is held only to policies that name every caller ("*"):
 * the node's own processes are not in a tenant. A caller whose service is
 * revoked (r->revoked) is denied by policy "revoked". Pure.
 */
void iod_mesh_authz_decide(const struct iod_mesh_registry *r, bool peer_known, uint32_t peer_uid,
                           const struct iod_mesh_service *to, const char *method,
                           struct iod_sec_verdict *v);

/* Defaults: Envoy's outlier/breaker/retry defaults (REFERENCES.md). */
void iod_mesh_service_defaults(struct iod_mesh_service *s);
int iod_mesh_registry_init(struct iod_mesh_registry *r, uint32_t cap);
void iod_mesh_registry_free(struct iod_mesh_registry *r);
/* Add a service (copied); keeps name order; -EEXIST, -ENOSPC, -EINVAL. */
int iod_mesh_registry_add(struct iod_mesh_registry *r, const struct iod_mesh_service *s,
                          struct iod_err *e);
struct iod_mesh_service *iod_mesh_registry_find(const struct iod_mesh_registry *r,
                                                const char *name);
/* Give every service without a VIP a stable one (hash of its name, probing
 * past collisions in name order). */
void iod_mesh_registry_assign_vips(struct iod_mesh_registry *r);
/* The preferred VIP of a name: 127.77.x.y, never .0 or .255 last octet. */
uint32_t iod_mesh_vip_for(const char *name);
/* The VIPs iod_mesh_registry_assign_vips gives n services sorted by name
 * (names[i] on ports[i]), none with an explicit VIP: vips[i] out. Pure. */
void iod_mesh_vips_assign(const char *const *names, const uint16_t *ports, uint32_t n,
                          uint32_t *vips);
/* "IOD_SVC_<NAME>_ADDR" for a service name (upper case, '-' and '.' -> '_'). */
int iod_mesh_env_name(const char *service, char *buf, size_t len);
/* Parse "a.b.c.d:port" / "a.b.c.d". */
int iod_mesh_addr_parse(const char *s, uint32_t *ip4, uint16_t *port, bool port_required);
void iod_mesh_addr_format(uint32_t ip4, uint16_t port, char *buf, size_t len);

/*
 * The static config (JSON, docs/mesh.md): {"node","rack","services":[{"name",
 * "vip","port","mode","lb","locality","endpoints":[{"addr","node","rack",
 * "weight","healthy"}], "outlier":{...}, "breaker":{...}, "retry":{...},
 * "timeouts":{...}}]}. Errors name the service and field.
 */
int iod_mesh_config_parse(const char *text, size_t len, struct iod_mesh_registry *r,
                          struct iod_err *e);
int iod_mesh_config_load(const char *path, struct iod_mesh_registry *r, struct iod_err *e);

/*
 * The seam between the proxy and whatever knows the endpoints: a static
 * file now, the control plane's watch later. poll() fills *out with the
 * current view and returns 0 when it changed since `have_version`, -EAGAIN
 * when it did not, or another negative errno (e says why).
 */
struct iod_mesh_source {
	int (*poll)(void *ctx, uint64_t have_version, struct iod_mesh_registry *out,
	            struct iod_err *e);
	/*
	 * Optional (NULL: poll on a period): block up to timeout_ms until the
	 * source knows of a change worth a poll(). 0 = poll now, -ETIMEDOUT =
	 * nothing changed, -EINTR = *stop became non-zero, another negative
	 * errno = failure (e says why; poll on a period meanwhile).
	 */
	int (*wait)(void *ctx, uint32_t timeout_ms, const volatile int *stop, struct iod_err *e);
	void *ctx; /* the source's state */
};
/* Where a service is reached through the mesh. */
struct iod_mesh_svc_addr {
	char name[IOD_NAME_MAX]; /* service name */
	uint32_t vip4;           /* its VIP, host order */
	uint16_t port;           /* its VIP port */
};
/*
 * The VIP:port the control-plane source gives every Service of a
 * /v1/services list ({"items":[{"name","value"}]}), in name order: what
 * IOD_SVC_<NAME>_ADDR holds for replicas. Pure (no I/O). -E2BIG past max
 * or IOD_MESH_SERVICES_MAX services.
 */
int iod_mesh_api_addrs(const json_t *services, struct iod_mesh_svc_addr *out, uint32_t max,
                       uint32_t *n);
/* How the proxy carries a stored Service value: HTTP when its first port is
 * named "http" or "http-*" (Istio's port-naming rule), else TCP. Pure. */
enum iod_mesh_mode iod_mesh_api_service_mode(const json_t *value);
/* The VIP port of a stored Service value: its first port, else
 * IOD_MESH_API_DEFAULT_PORT (the overlay's VIP uses the same port). */
uint16_t iod_mesh_api_service_port(const json_t *value);
/* Whether a Service value says service_mesh: {mode: l7} (docs/network.md:
 * on iod's overlay its VIP leads to the node's mesh proxy; else, l4, the
 * node's virtual switch balances it). */
bool iod_mesh_api_service_l7(const json_t *value);

/* ---- outlier detection (pure) ------------------------------------------ */

struct iod_mesh_host_state {
	uint32_t consecutive_5xx;     /* 5xx or connect failures since the last success */
	uint32_t consecutive_connect; /* connect failures since the last success */
	uint32_t ejections;           /* multiplier: times ejected, decays when healthy */
	uint64_t ejected_until_ns;    /* 0 = not ejected */
	uint64_t last_decay_ns;       /* when the multiplier last decayed */
	uint32_t active_requests;     /* in flight (least-request) */
	uint64_t ejections_total;     /* counter for metrics */
};

struct iod_mesh_outlier {
	struct iod_mesh_host_state hosts[IOD_MESH_ENDPOINTS_MAX]; /* one per endpoint */
	uint32_t n;                                               /* endpoints tracked */
	uint32_t ejected;                                         /* hosts currently ejected */
};

enum iod_mesh_result {
	IOD_MESH_OK,           /* a response below 500 */
	IOD_MESH_HTTP_5XX,     /* the upstream answered 5xx */
	IOD_MESH_CONNECT_FAIL, /* connect refused, reset or timed out */
	IOD_MESH_RESET         /* connection lost mid-request: counts like a 5xx */
};

void iod_mesh_outlier_init(struct iod_mesh_outlier *o, uint32_t n);
/* Record a result; returns true when this result ejected the host. */
bool iod_mesh_outlier_report(struct iod_mesh_outlier *o, const struct iod_mesh_outlier_cfg *c,
                             uint32_t host, enum iod_mesh_result r, uint64_t now_ns);
/* Return hosts whose ejection time passed; decay multipliers. Returns the
 * number of hosts un-ejected. Call at least every interval. */
uint32_t iod_mesh_outlier_tick(struct iod_mesh_outlier *o, const struct iod_mesh_outlier_cfg *c,
                               uint64_t now_ns);
static inline bool iod_mesh_outlier_ejected(const struct iod_mesh_outlier *o, uint32_t host)
{
	return o->hosts[host].ejected_until_ns != 0;
}

/* ---- load balancing (pure) --------------------------------------------- */

/*
 * Per-service picker state, owned by one worker. Built from the service's
 * endpoint list; rebuilt when it changes. Hash tables are built here, on the
 * control path; pick() does not allocate.
 */
struct iod_mesh_ring_point {
	uint64_t hash; /* position on the ring */
	uint32_t host; /* endpoint index */
};

struct iod_mesh_lb_state {
	enum iod_mesh_lb policy;
	uint32_t n;                                  /* endpoints */
	uint32_t rr_next;                            /* round robin cursor */
	int64_t wrr_current[IOD_MESH_ENDPOINTS_MAX]; /* smooth weighted RR (nginx) */
	struct iod_mesh_ring_point *ring;            /* ring_n points sorted by hash */
	uint32_t ring_n;
	struct iod_maglev maglev; /* maglev table */
};

int iod_mesh_lb_build(struct iod_mesh_lb_state *lb, const struct iod_mesh_service *s);
void iod_mesh_lb_free(struct iod_mesh_lb_state *lb);

/*
 * Choose an endpoint for a request (hash = the request's affinity key for
 * the hash policies, e.g. the client address). Applies, in order: health
 * and ejection (with Envoy's panic threshold: below panic_bp usable hosts,
 * all hosts are candidates), locality (same node, then same rack, then any),
 * the policy; `exclude` (a host to avoid, e.g. the one a retry just failed
 * on; UINT32_MAX = none). Returns the endpoint index or -EHOSTUNREACH when
 * the service has no endpoints. *panic is set when panic mode was used.
 */
int iod_mesh_lb_pick(struct iod_mesh_lb_state *lb, const struct iod_mesh_service *s,
                     const struct iod_mesh_outlier *o, const char *local_node,
                     const char *local_rack, uint64_t hash, uint32_t exclude, struct iod_rng *rng,
                     bool *panic);

/* ---- circuit breakers, retries, timeouts (pure) ------------------------ */

enum iod_mesh_breaker_kind {
	IOD_MESH_BRK_CONNECTIONS,
	IOD_MESH_BRK_PENDING,
	IOD_MESH_BRK_REQUESTS,
	IOD_MESH_BRK_RETRIES,
	IOD_MESH_BRK_KINDS
};
const char *iod_mesh_breaker_name(enum iod_mesh_breaker_kind k);

struct iod_mesh_breaker {
	uint32_t open[IOD_MESH_BRK_KINDS];  /* resources in use */
	uint64_t trips[IOD_MESH_BRK_KINDS]; /* acquisitions refused (metrics) */
};

/* Take one unit of a resource: 0, or -EBUSY (a trip) at the limit. */
int iod_mesh_breaker_acquire(struct iod_mesh_breaker *b, const struct iod_mesh_breaker_cfg *c,
                             enum iod_mesh_breaker_kind k);
void iod_mesh_breaker_release(struct iod_mesh_breaker *b, enum iod_mesh_breaker_kind k);

/*
 * May attempt `attempt` (1 = first retry) go ahead? Checks the per-request
 * count, the budget (retries in flight vs requests in flight, never fewer
 * than min_concurrency) and the retries breaker. On true the caller holds a
 * retries unit and releases it when the retry finishes.
 */
bool iod_mesh_retry_allowed(struct iod_mesh_breaker *b, const struct iod_mesh_breaker_cfg *bc,
                            const struct iod_mesh_retry_cfg *rc, uint32_t attempt);
/* Full-jitter backoff before retry `attempt` (1-based). */
uint64_t iod_mesh_retry_backoff_ns(const struct iod_mesh_retry_cfg *rc, uint32_t attempt,
                                   struct iod_rng *rng);
/* Is a method safe to retry after the request may have reached the server? */
bool iod_mesh_http_idempotent(const char *method, size_t len);

enum iod_mesh_timer { IOD_MESH_T_NONE, IOD_MESH_T_CONNECT, IOD_MESH_T_REQUEST, IOD_MESH_T_IDLE };
/*
 * Which timeout (if any) has fired for a connection: connecting since
 * connect_start_ns (0 = connected), a request in flight since
 * request_start_ns (0 = none), last byte at last_io_ns.
 */
enum iod_mesh_timer iod_mesh_timeout_check(const struct iod_mesh_timeouts *t,
                                           uint64_t connect_start_ns, uint64_t request_start_ns,
                                           uint64_t last_io_ns, uint64_t now_ns);
/* Has the request head being read since head_start_ns (0 = none) run past
 * t->head_ns? However its bytes trickle in: unlike the idle timeout, the
 * head deadline is not moved by reads. */
bool iod_mesh_head_expired(const struct iod_mesh_timeouts *t, uint64_t head_start_ns,
                           uint64_t now_ns);

/* ---- per-client connection limits -------------------------------------- */

/* One client's open connections on one worker. */
struct iod_mesh_client_slot {
	uint32_t ip4; /* its address (host order) */
	uint32_t uid; /* the uid owning its socket; UINT32_MAX = not known */
	uint32_t n;   /* connections it holds; 0 = free slot */
};
/* A worker's clients: open addressing, linear probing, deletion by
 * backward shift (no tombstones), at most half full. */
struct iod_mesh_clients {
	struct iod_mesh_client_slot slot[IOD_MESH_CLIENT_SLOTS]; /* the table */
	uint32_t used;                                           /* slots with n > 0 */
	uint64_t limited;                                        /* takes refused */
};
/* Count one more connection of (ip4, uid): 0, or -EBUSY when it already
 * holds max (counted in limited) or the table is full. */
int iod_mesh_clients_take(struct iod_mesh_clients *t, uint32_t ip4, uint32_t uid, uint32_t max);
/* One connection of (ip4, uid) closed (it must have been taken). */
void iod_mesh_clients_release(struct iod_mesh_clients *t, uint32_t ip4, uint32_t uid);
/* Connections (ip4, uid) holds. */
uint32_t iod_mesh_clients_count(const struct iod_mesh_clients *t, uint32_t ip4, uint32_t uid);

/* ---- spans and flow records -------------------------------------------- */

enum iod_mesh_span_kind { IOD_MESH_SPAN_HTTP, IOD_MESH_SPAN_FLOW };

struct iod_mesh_span {
	uint64_t seq;                 /* position in the node's stream (set by the ring) */
	enum iod_mesh_span_kind kind; /* HTTP request or L4 flow */
	uint8_t trace_id[16];         /* HTTP: trace id */
	uint8_t span_id[8];           /* this hop's span (the proxy's client span) */
	uint8_t parent_id[8];         /* the caller's span; zero = root */
	char service[IOD_NAME_MAX];   /* upstream service */
	char peer[32];                /* endpoint "ip:port" that served it ("" = none) */
	char client[32];              /* downstream "ip:port" */
	char method[8];               /* HTTP method ("" for flows) */
	char path[64];                /* HTTP target, truncated */
	uint64_t start_unix_ns;       /* wall-clock start */
	uint64_t end_unix_ns;         /* wall-clock end */
	uint64_t bytes_in;            /* client -> upstream */
	uint64_t bytes_out;           /* upstream -> client */
	uint16_t status;              /* HTTP status (0 = none); flows: 0 ok, else errno */
	uint8_t attempts;             /* upstream attempts (1 + retries) */
	char denied_by[IOD_NAME_MAX]; /* the policy that refused it ("" = not refused) */
	char caller[IOD_NAME_MAX];    /* the calling service, when known */
	uint8_t tp_down;              /* enum iod_mesh_tp_path: client -> proxy hop */
	uint8_t tp_up;                /* ... proxy -> endpoint hop */
};

/*
 * A bounded ring with one writer (a worker) and any number of readers (the
 * admin thread): a seqlock per slot, no locks for the writer. Readers copy
 * spans newer than a sequence number; overwritten spans are skipped.
 */
struct iod_mesh_span_ring {
	struct iod_mesh_span slots[IOD_MESH_SPANS_MAX]; /* spans */
	uint64_t slot_seq[IOD_MESH_SPANS_MAX];          /* seqlock: odd = being written */
	uint64_t next;                                  /* next sequence number (1-based) */
};
void iod_mesh_span_ring_init(struct iod_mesh_span_ring *r);
void iod_mesh_span_ring_push(struct iod_mesh_span_ring *r, const struct iod_mesh_span *s);
/* Copy up to max spans with seq > after into out; returns the count. */
uint32_t iod_mesh_span_ring_read(const struct iod_mesh_span_ring *r, uint64_t after,
                                 struct iod_mesh_span *out, uint32_t max);
/* Spans with seq > after that the ring overwrote before anyone read them. */
uint64_t iod_mesh_span_ring_lost(const struct iod_mesh_span_ring *r, uint64_t after);
/* One span as an OTLP/JSON span object (traceId, spanId, ... attributes). */
json_t *iod_mesh_span_otlp(const struct iod_mesh_span *s);
/* An OTLP/JSON export document {"resourceSpans":[...]} of n spans. */
json_t *iod_mesh_spans_otlp(const struct iod_mesh_span *s, uint32_t n, const char *node);

/* Codecs (trace context, DNS): mesh_proto.h. The proxy, the sources that
 * read files or the control plane, and peer lookup (shells): mesh_proxy.h.
 * HTTP/1.1 framing: http.h. */

/* ---- the mesh transport (pure: transport.c) ---------------------------- */

/* What is known about one hop when the path is chosen. */
struct iod_mesh_hop {
	bool same_node;   /* both ends on this node */
	bool unix_ok;     /* the far end accepts AF_UNIX (it listens, or we do) */
	bool rdma_device; /* this node has an RDMA device */
};
/* "tcp", "shm", "rdma", "auto" -> want; "" or NULL -> UNSET; -EINVAL else. */
int iod_mesh_tp_want_parse(const char *s, enum iod_mesh_tp_want *out);
const char *iod_mesh_tp_want_name(enum iod_mesh_tp_want w);
const char *iod_mesh_tp_path_name(enum iod_mesh_tp_path p);
/* The service's value when set, else the cluster's, else tcp (never UNSET). */
enum iod_mesh_tp_want iod_mesh_tp_effective(enum iod_mesh_tp_want service,
                                            enum iod_mesh_tp_want cluster);
/*
 * The path one hop takes under want: shm (AF_UNIX) when want is not tcp,
 * the hop stays on this node and the far end takes AF_UNIX; tcp otherwise
 * (rdma across nodes, with or without a device, runs tcp: no RDMA path is
 * built into the proxy). why (when not NULL) gets a short reason.
 */
enum iod_mesh_tp_path iod_mesh_tp_pick(enum iod_mesh_tp_want want, const struct iod_mesh_hop *hop,
                                       const char **why);

#endif
