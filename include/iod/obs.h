/*
 * obs.h: telemetry helpers shared by every module that exports metrics.
 *
 * For now: writing the Prometheus text exposition format (version 0.0.4):
 * `# HELP`, `# TYPE`, samples with escaped label values, histograms with
 * cumulative `_bucket{le=...}` lines ending in `le="+Inf"`, `_sum` and
 * `_count`. The mesh uses it; obs/ (metrics registry, `iod top`) builds on
 * it. Pure: appends text to a caller's iod_buf, never does I/O.
 */
#ifndef IOD_OBS_H
#define IOD_OBS_H

#include "iod/base.h"

/* The Content-Type to serve the text with. */
#define IOD_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*; label names: [a-zA-Z_][a-zA-Z0-9_]*. */
bool iod_prom_name_valid(const char *name);
bool iod_prom_label_name_valid(const char *name);

/* "# HELP name help" (help escaped: \\ and \n) and "# TYPE name type". */
int iod_prom_header(struct iod_buf *b, const char *name, const char *type, const char *help);

/*
 * Build a label set "k1=\"v1\",k2=\"v2\"" from NULL-terminated key, value
 * pairs, escaping \\, \" and \n in values. -ENOSPC when it does not fit,
 * -EINVAL for an invalid label name.
 */
int iod_prom_labels(char *buf, size_t len, ...);

/* One sample "name{labels} value" (labels may be NULL or ""). */
int iod_prom_u64(struct iod_buf *b, const char *name, const char *labels, uint64_t v);
int iod_prom_f64(struct iod_buf *b, const char *name, const char *labels, double v);

/*
 * A histogram: n finite upper bounds le[] (ascending) and n+1 per-bucket
 * counts (not cumulative; the last is the overflow bucket). Writes
 * name_bucket lines (cumulative, plus le="+Inf"), name_sum and name_count.
 */
int iod_prom_histogram(struct iod_buf *b, const char *name, const char *labels, const double *le,
                       const uint64_t *counts, uint32_t n, double sum);

/* ---- iod top: the snapshot model ---------------------------------------- */

/*
 * `iod top` draws tables built here from what the API returns (GET
 * /v1/nodes, services, replicas, endpoints, status) and, when known, a mesh
 * proxy's /metrics text. Building, filtering, sorting and laying out are
 * pure: the ncurses shell (src/cli/cmd_top.c) fetches, calls these and
 * paints lines; `--once` prints the same lines or JSON. Rates need the
 * previous snapshot and the time between them, both passed in.
 */
#define IOD_TOP_VIEWS(X)        \
	X(CLUSTER, "cluster")   \
	X(NODES, "nodes")       \
	X(GPUS, "gpus")         \
	X(REPLICAS, "replicas") \
	X(SERVICES, "services") \
	X(LINKS, "links")

enum iod_top_view {
#define X(n, s) IOD_TOP_##n,
	IOD_TOP_VIEWS(X)
#undef X
	    IOD_TOP_VIEW_COUNT
};
const char *iod_top_view_name(enum iod_top_view v);
/* Exact names, or a unique prefix ("rep"); -EINVAL naming the views. */
int iod_top_view_parse(const char *s, enum iod_top_view *out, struct iod_err *e);

/* How a row is drawn: healthy, worth a look, broken. */
enum iod_top_level { IOD_TOP_OK, IOD_TOP_WARN, IOD_TOP_BAD };

struct iod_top_row {
	char cells[IOD_TOP_COLS_MAX][IOD_TOP_CELL_MAX]; /* text as shown */
	double num[IOD_TOP_COLS_MAX];                   /* sort key of numeric cells */
	enum iod_top_level level;                       /* colour of the row */
};

/* One view: its columns and rows (rows malloc'd, at most IOD_TOP_ROWS_MAX). */
struct iod_top_table {
	enum iod_top_view view;             /* which view this is */
	uint32_t cols_n;                    /* columns in use */
	const char *cols[IOD_TOP_COLS_MAX]; /* column titles (static strings) */
	bool numeric[IOD_TOP_COLS_MAX];     /* sort column numerically */
	uint32_t rows_n;                    /* rows in use */
	uint32_t rows_cap;                  /* rows allocated */
	struct iod_top_row *rows;           /* the rows */
	uint32_t hidden_n;                  /* rows the filter or the cap removed */
	char note[160];                     /* one line shown under the table */
};

/* Mesh counters of one service as of one snapshot. */
struct iod_top_mesh_svc {
	char name[IOD_NAME_MAX]; /* service */
	double requests;         /* iod_mesh_requests_total */
	double errors;           /* iod_mesh_errors_total */
	double p99_s;            /* from iod_mesh_request_duration_seconds buckets; <0 unknown */
	double rps;              /* requests per second since the previous snapshot; <0 unknown */
	double eps;              /* errors per second since the previous snapshot; <0 unknown */
	char transport[8];       /* iod_mesh_transport_info's transport ("" = not reported) */
	double conns_tcp;        /* iod_mesh_transport_connections_total, both hops: tcp */
	double conns_shm;        /* ... shm (AF_UNIX on the node) */
};

/* What a snapshot is built from: borrowed API answers (NULL = not fetched). */
struct iod_top_input {
	const json_t *status;     /* GET /v1/status */
	const json_t *nodes;      /* GET /v1/nodes: {"items": [...]} */
	const json_t *services;   /* GET /v1/services */
	const json_t *replicas;   /* GET /v1/replicas */
	const json_t *endpoints;  /* GET /v1/endpoints */
	const json_t *telemetry;  /* per-node telemetry summaries ({"items": [...]}), or NULL */
	const char *mesh_metrics; /* a mesh proxy's /metrics text, or NULL */
	uint64_t now_ms;          /* when the answers were read (wall clock, passed in) */
};

/* Every view of one moment, and the mesh counters rates come from. */
struct iod_top_snapshot {
	uint64_t at_ms;                                     /* input's now_ms */
	struct iod_top_table views[IOD_TOP_VIEW_COUNT];     /* one table per view */
	uint32_t mesh_n;                                    /* services with mesh counters */
	struct iod_top_mesh_svc mesh[IOD_TOP_SERVICES_MAX]; /* their counters */
};

/*
 * Build every view from in; prev (may be NULL) gives rates. Returns 0 or
 * -ENOMEM. A missing or malformed answer leaves its views empty with a note,
 * never fails the build.
 */
int iod_top_snapshot_build(struct iod_top_snapshot *s, const struct iod_top_input *in,
                           const struct iod_top_snapshot *prev);
void iod_top_snapshot_free(struct iod_top_snapshot *s);

/*
 * Parse a mesh proxy's /metrics text into per-service counters (requests,
 * errors, p99 from the duration histogram). Lines it does not know are
 * skipped; returns the number of services found (at most max).
 */
uint32_t iod_top_mesh_parse(const char *text, size_t len, struct iod_top_mesh_svc *out,
                            uint32_t max);

/*
 * Keep the rows matching filter: "TEXT" (any cell contains it, ignoring
 * case) or "COLUMN=TEXT" (that column does; the column named by its title,
 * any case). "" keeps everything. -EINVAL naming the columns for an
 * unknown one, leaving the table as it was.
 */
int iod_top_table_filter(struct iod_top_table *t, const char *filter, struct iod_err *e);

/* A deep copy of src into dst (dst's old rows are not freed); -ENOMEM. */
int iod_top_table_copy(struct iod_top_table *dst, const struct iod_top_table *src);
void iod_top_table_free(struct iod_top_table *t);

/* Sort rows by column col (numeric columns by value), stable; desc reverses. */
void iod_top_table_sort(struct iod_top_table *t, uint32_t col, bool desc);

/* The column whose title is name (any case), or -1. */
int iod_top_table_column(const struct iod_top_table *t, const char *name);

/*
 * Lay the table out in width columns: a header line and one line per row,
 * each cut to width, columns as wide as their widest cell. Appends to b.
 */
int iod_top_table_format(const struct iod_top_table *t, uint32_t width, struct iod_buf *b);

/* The table as a JSON array of objects keyed by lower-case column title. */
json_t *iod_top_table_json(const struct iod_top_table *t);

/* A sparkline of n values in [0, 100] as UTF-8 block characters (3 bytes each). */
int iod_top_sparkline(const double *v, uint32_t n, char *buf, size_t len);

/* ---- agent telemetry ------------------------------------------------------ */

/*
 * What an agent samples on its node, kept in bounded rings (IOD_TEL_RING
 * samples per GPU and per replica) and served three ways: Prometheus text
 * (iod_ names and DCGM-exporter names), a detail document (every sample in
 * the rings, from the agent itself) and a small summary the agent sends to
 * the control plane every few seconds (kept in the servers' memory, never
 * in Raft). Pure: samples and times come from the shell (src/agent/telemetry.c).
 */

/* One GPU sample: NVML readings, or derived from a replica's counters. */
struct iod_tel_gpu_sample {
	uint64_t at_ms;              /* wall clock of the reading */
	double util_pct;             /* 0..100 */
	uint64_t mem_used_bytes;     /* frame buffer used */
	uint64_t mem_total_bytes;    /* frame buffer size */
	double power_w;              /* board power */
	double temp_c;               /* core temperature */
	uint64_t nvlink_bytes_total; /* NVLink bytes moved since boot (tx + rx) */
	uint64_t pcie_bytes_total;   /* PCIe bytes moved (tx + rx) */
};

struct iod_tel_gpu {
	uint32_t index;                               /* GPU index on the node */
	char uuid[96];                                /* "GPU-..." or "" */
	char pci[32];                                 /* PCI bus id or "" */
	char model[IOD_NAME_MAX];                     /* "NVIDIA H100 80GB HBM3" or "" */
	uint64_t mem_total_bytes;                     /* size from the topology, 0 unknown */
	char replica[IOD_NAME_MAX];                   /* holder, "" when free */
	char service[IOD_NAME_MAX];                   /* holder's service */
	bool simulated;                               /* derived from counters, not NVML */
	bool stalled;                                 /* busy but stalled (see limits.h) */
	uint32_t head;                                /* next slot in ring */
	uint32_t n;                                   /* samples in ring */
	struct iod_tel_gpu_sample ring[IOD_TEL_RING]; /* the newest n samples */
};

struct iod_tel_replica_sample {
	uint64_t at_ms;     /* wall clock */
	double cpu_pct;     /* of one core, over the last interval */
	uint64_t mem_bytes; /* resident memory of its processes */
};

struct iod_tel_replica {
	char name[IOD_NAME_MAX];                          /* replica */
	char service[IOD_NAME_MAX];                       /* its service */
	uint32_t restarts;                                /* as the agent counts them */
	double cpu_seconds_total;                         /* CPU time of its processes */
	bool seen;                                        /* present in the last sample */
	uint32_t head;                                    /* next slot in ring */
	uint32_t n;                                       /* samples in ring */
	struct iod_tel_replica_sample ring[IOD_TEL_RING]; /* the newest n */
};

/*
 * One port of the node's data plane (the agent's virtual switch,
 * src/agent/vswitch.c): the port's own counters (struct iod_io_stats) as
 * read at at_ms, and the rates since the reading before.
 */
struct iod_tel_port {
	char name[IOD_NAME_MAX]; /* "fabric", "host", or the replica behind it */
	char kind[16];           /* fabric | host | replica */
	char iface[32];          /* the interface the port opens */
	uint64_t rx_packets;     /* received */
	uint64_t rx_bytes;       /* received bytes */
	uint64_t tx_packets;     /* sent */
	uint64_t tx_bytes;       /* sent bytes */
	uint64_t rx_dropped;     /* received with no buffer free: dropped */
	uint64_t tx_dropped;     /* could not be sent: dropped */
	uint64_t at_ms;          /* wall clock of the reading */
	uint64_t speed_bps;      /* the interface's speed as its driver reports it; 0 unknown */
	bool rated;              /* rx_bps/tx_bps hold: two readings of the same port */
	double rx_bps, tx_bps;   /* bits per second between them */
};

/* A node's telemetry state: owned by one agent thread (or behind its lock). */
struct iod_tel_node {
	char node[IOD_NAME_MAX];                               /* node name */
	char hostname[IOD_NAME_MAX];                           /* Hostname label */
	uint64_t samples_total;                                /* sampling rounds */
	uint64_t sample_ns_total;                              /* time spent sampling */
	uint64_t cpu_ns_total;                                 /* the sampler thread's CPU time */
	uint32_t gpus_n;                                       /* GPUs in gpus */
	struct iod_tel_gpu gpus[IOD_TEL_GPUS_MAX];             /* per GPU */
	uint32_t replicas_n;                                   /* replicas in replicas */
	struct iod_tel_replica replicas[IOD_TEL_REPLICAS_MAX]; /* per replica */
	uint32_t ports_n;                                      /* data-plane ports in ports */
	struct iod_tel_port ports[IOD_TEL_PORTS_MAX];          /* per data-plane port */
};

/* The newest sample of a GPU or replica, NULL when none. */
const struct iod_tel_gpu_sample *iod_tel_gpu_last(const struct iod_tel_gpu *g);
const struct iod_tel_replica_sample *iod_tel_replica_last(const struct iod_tel_replica *r);

/* Append a sample (overwriting the oldest when full) and update stalled. */
void iod_tel_gpu_push(struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s);
void iod_tel_replica_push(struct iod_tel_replica *r, const struct iod_tel_replica_sample *s);

/*
 * The busy-but-stalled rule over a GPU's ring: the last IOD_TEL_STALL_SAMPLES
 * samples all at >= IOD_TEL_STALL_UTIL_PCT while NVLink + PCIe bytes grew by
 * less than IOD_TEL_STALL_BYTES across them (a kernel spinning in an NCCL
 * collective whose peer is gone reads 100% busy and moves nothing).
 */
bool iod_tel_gpu_stalled(const struct iod_tel_gpu *g);

/* The replica slot named name, added (seen, empty ring) when new; NULL when full. */
struct iod_tel_replica *iod_tel_replica_get(struct iod_tel_node *n, const char *name);

/* Drop replicas not marked seen since the last call; clear the marks. */
void iod_tel_replicas_sweep(struct iod_tel_node *n);

/*
 * The simulated-GPU counters protocol (docs/observability.md): a workload
 * writes "name value" lines to $IOD_TELEMETRY_FILE, replacing the file
 * atomically. Known names below; others are ignored; '#' starts a comment.
 */
struct iod_tel_counters {
	uint64_t busy_ns_total;      /* time its GPUs computed */
	uint64_t comm_bytes_total;   /* bytes it moved between GPUs/nodes */
	uint64_t steps_total;        /* training steps (or requests) done */
	uint64_t gpu_mem_used_bytes; /* GPU memory it holds now */
	bool has_busy;               /* busy_ns_total was present */
};
int iod_tel_counters_parse(const char *text, size_t len, struct iod_tel_counters *c,
                           struct iod_err *e);

/*
 * A simulated GPU's sample from two readings of its holder's counters
 * dt_ms apart, shared by the gpus_n GPUs it holds: utilisation is busy time
 * over elapsed time; NVLink bytes are the communication bytes; power and
 * temperature follow a documented linear model of utilisation (idle 60 W
 * to 400 W, 30 C to 70 C). prev NULL: utilisation 0.
 */
void iod_tel_sim_gpu(const struct iod_tel_counters *prev, const struct iod_tel_counters *cur,
                     uint64_t dt_ms, uint32_t gpus_n, uint64_t mem_total_bytes, uint64_t at_ms,
                     struct iod_tel_gpu_sample *out);

/*
 * Replace the node's data-plane ports with a new reading of k ports (at
 * most IOD_TEL_PORTS_MAX; the rest are dropped). A port with the same name
 * and interface in the previous reading, read earlier and with counters
 * that did not go backwards (a reopened port starts from zero), gets rates;
 * any other is not rated (nothing is made up). -ENOMEM leaves the old.
 */
int iod_tel_ports_set(struct iod_tel_node *n, const struct iod_tel_port *in, uint32_t k);

/* The iod_dp_port_* families of ports_n data-plane ports (labels node,
 * port, kind, iface; drops by direction); nothing when ports_n is 0. The
 * agent's /metrics and `iod dp run --metrics` both write them here. */
int iod_tel_ports_prom(const char *node, const struct iod_tel_port *ports, uint32_t ports_n,
                       struct iod_buf *b);

/* Prometheus text: iod_gpu_*, iod_replica_*, iod_telemetry_*, iod_dp_port_*
 * (when the node has data-plane ports) and DCGM_FI_DEV_*. */
int iod_tel_prom(const struct iod_tel_node *n, struct iod_buf *b);

/* The summary sent to the control plane (newest values, a short history;
 * "links": one per data-plane port, with rx_bps/tx_bps when rated). */
json_t *iod_tel_summary_json(const struct iod_tel_node *n, uint64_t now_ms);

/* Every sample in the rings (GET /v1/telemetry on the agent). */
json_t *iod_tel_detail_json(const struct iod_tel_node *n);

/* ---- viz: the cluster as a graph ------------------------------------------ */

/*
 * One graph of the whole cluster built from the API's answers: cluster
 * nodes with their GPUs (NVLink edges between them) and NICs (edges to the
 * fabric), services with their replicas, each replica placed on its GPUs
 * (or its node), service dependencies with mesh rates when known. Every
 * graph node and edge has a status (ok, warn, bad) coloured the same way by
 * every renderer: DOT for `iod viz net-topology`, JSON for the live view.
 * Past group_over cluster nodes, nodes are grouped into racks of
 * IOD_VIZ_RACK_NODES (their "rack" label when they have one) that the web
 * view shows collapsed. Pure.
 *
 * The fabric is derived (no cluster object describes switches): a leaf
 * switch per rack (the node's "rack", else labels.rack, else
 * IOD_VIZ_RACK_NODES nodes in list order), a spine per zone, a core above
 * several spines; each switch's detail says "derived": true.
 *
 * The document: {"nodes": [{"id", "kind": node|rack|gpu|nic|switch|
 * service|replica, "label", "parent", "status", "detail"}], "edges":
 * [{"id", "from", "to", "kind": nvlink|net|fabric|placement|depends,
 * "label", "status"}], "counts": {...}}. Node and edge ids are unique.
 */
struct iod_viz_input {
	const json_t *nodes;      /* GET /v1/nodes */
	const json_t *services;   /* GET /v1/services */
	const json_t *replicas;   /* GET /v1/replicas */
	const json_t *endpoints;  /* GET /v1/endpoints */
	const json_t *telemetry;  /* GET /v1/telemetry, or NULL */
	const char *mesh_metrics; /* a mesh proxy's /metrics, or NULL */
	uint32_t group_over;      /* group into racks past this many nodes (0 = never) */
	const json_t *edge_rates; /* iod_viz_edge_rates(), or NULL: no spans read */
	const json_t *drops;      /* dropped flows, each with its "node" and "rule",
	                             oldest first (the records `iod trace --drops`
	                             reads), or NULL: on each node, "drops" (packets)
	                             and detail.drops {packets, flows, rules, records} */
	json_t *memo;             /* or NULL: an object the caller keeps between graphs;
	                             a node's or replica's parts are reused from it when
	                             its item is the same JSON value (viz.c) */
};
json_t *iod_viz_graph(const struct iod_viz_input *in);

/*
 * Per-edge service rates (caller -> callee) from the mesh's spans, over the
 * last IOD_VIZ_RATE_WINDOW_MS. state is an object the caller keeps ({} to
 * start). iod_viz_spans_add counts the spans of one `/spans` answer of a
 * mesh proxy at now_ms: the callee is the span's iod.service, the caller
 * its iod.caller ("tenant/service"; a node's own process, or a span whose
 * caller the proxy did not know, counts for no edge); an error is status
 * code 2. The first answer only primes (the ring's history is not a rate).
 * iod_viz_edge_rates gives {"CALLER>CALLEE": {"rps", "err_ps", "mean_ms",
 * "partial"}} over the time since priming, at most the window ("partial":
 * the proxy's ring overwrote spans in it: the rates are lower bounds), or
 * NULL before a rate exists. Pure.
 */
void iod_viz_spans_add(json_t *state, const json_t *answer, uint64_t now_ms);
json_t *iod_viz_edge_rates(const json_t *state, uint64_t now_ms);

/*
 * What changed from graph old to graph now, by id: *delta is {"nodes":
 * {"add": [...], "change": [...], "remove": [ids]}, "edges": {the same},
 * "counts": now's}. Returns 1 with *delta set, 0 when nothing changed
 * (*delta NULL), -ENOMEM. Applying the delta to old gives now (the live
 * page does, so it never re-reads the whole graph). Pure.
 */
int iod_viz_graph_delta(const json_t *old, const json_t *now, json_t **delta);

/*
 * The live view's model of the cluster: the objects the graph is drawn
 * from ({"node"|"service"|"replica"|"endpoint": {name: item as the API
 * lists it}}), loaded from lists once and kept current from the watch.
 * Pure.
 *   iod_viz_model_new      an empty model, or NULL
 *   iod_viz_model_load     replace a kind with a GET /v1/<kinds> answer
 *   iod_viz_model_apply    one watch event: 1 changed, 0 a kind not drawn
 *                          (or a delete of nothing), -EINVAL malformed;
 *                          a put keeps the object's lease (the watch does
 *                          not carry one)
 *   iod_viz_model_unleased an object the watch added whose lease is not
 *                          known yet (the caller reads it, then stores it)
 *   iod_viz_model_list     a kind as {"items": [...]} sorted by name, as
 *                          the API lists it, for iod_viz_graph
 */
json_t *iod_viz_model_new(void);
int iod_viz_model_load(json_t *model, const char *kind, const json_t *list);
int iod_viz_model_apply(json_t *model, const json_t *ev);
bool iod_viz_model_unleased(const json_t *model, const char *kind, const char *name);
json_t *iod_viz_model_list(const json_t *model, const char *kind);

/* The graph as Graphviz DOT (clusters per node and per service); a node's
 * link to the fabric coloured by its utilisation band, as the page draws it. */
int iod_viz_dot(const json_t *graph, struct iod_buf *out);

/* The utilisation band of a graph edge: 0..4, the fifth of capacity its
 * "util" falls in, or -1 when it has none ("no data"). */
int iod_viz_util_band(const json_t *edge);

#endif
