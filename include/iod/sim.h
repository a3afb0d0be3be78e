/*
 * sim.h: iod's deterministic, packet-level data-center fabric simulator.
 *
 * A discrete-event engine in virtual nanoseconds (a 4-ary heap ordered by
 * time, ties broken by a stable sequence number), a fabric model (hosts with
 * NICs, switches, parallel links, drop-tail output queues with ECN marking,
 * ECMP on the outer 5-tuple with a configurable hash and per-switch seed,
 * link failure and degradation at a time), window transports (DCTCP-like and
 * NewReno-like), a VXLAN host edge whose outer UDP source port is chosen by a
 * pluggable path policy, workload generators and FCT reporting.
 *
 * Everything here is a pure core: no wall clock, no I/O except the explicit
 * *_write_* helpers that take a FILE, no rand(). The same topology, config,
 * workload and seed give byte-identical results. It must never allocate on
 * the per-event path: packets come from a fixed pool and events from a queue
 * bounded at creation (a heap, or past AUTO_UP a calendar whose arrays grow
 * amortised); exhausting either is an explicit error, not a crash.
 * See docs/simulator.md.
 */
#ifndef IOD_SIM_H
#define IOD_SIM_H

#include "iod/base.h"

/* ---- event queue -------------------------------------------------------- */

/* One pending event: fired in (t_ns, seq) order. */
struct iod_sim_event {
	uint64_t t_ns; /* virtual time it fires at */
	uint64_t seq;  /* insertion order: the deterministic tie-break */
	uint64_t data; /* payload (a packet index, a generation) */
	uint32_t kind; /* what to do; interpreted by the owner */
	uint32_t arg;  /* payload (a port, a flow, a node) */
};

/*
 * Interchangeable bounded queues, all deterministic: every kind pops in
 * (t_ns, seq) order, so the same pushes give the same pops whichever kind
 * holds them (tested), and a run's event log does not depend on the kind.
 *  - HEAP: a 4-ary min-heap; any push order; allocated once.
 *  - RADIX: a radix heap over the time (monotone: a push must not be earlier
 *    than the last pop, which a discrete-event simulation guarantees);
 *    O(1) amortised push and pop whatever the number pending.
 *  - CALENDAR: Brown's calendar queue (1988) with array buckets: bucket
 *    (t >> shift) mod nb holds its events sorted by (t, seq); nb doubles when
 *    more than 2 nb are pending and halves below nb / 2, and the bucket width
 *    (a power of two) is re-sampled from the earliest events at each resize.
 *    Any push order. O(1) expected per operation; it allocates when a bucket
 *    array fills or the calendar resizes (amortised, never per event).
 *  - AUTO: a HEAP while at most IOD_SIM_QUEUE_AUTO_UP are pending, a
 *    CALENDAR above (back to the heap below IOD_SIM_QUEUE_AUTO_DOWN): the
 *    faster of the two at each size on bench/bench_sim.c.
 */
enum iod_sim_queue_kind {
	IOD_SIM_QUEUE_HEAP,
	IOD_SIM_QUEUE_RADIX,
	IOD_SIM_QUEUE_CALENDAR,
	IOD_SIM_QUEUE_AUTO
};

#define IOD_SIM_RADIX_BUCKETS 65 /* bucket 0: t == last; i: highest differing bit i-1 */

/* AUTO's switch points (pending events). bench_sim: the 4-ary heap won or tied
 * at 100 K pending (it stays mostly in cache), the calendar won 2-5x at 1 M
 * and 4 M; the crossover between them was not measured finer. */
#define IOD_SIM_QUEUE_AUTO_UP 131072u
#define IOD_SIM_QUEUE_AUTO_DOWN 32768u

/* A radix-heap entry: the event and the next entry of its bucket. */
struct iod_sim_qnode {
	struct iod_sim_event ev; /* the event */
	uint32_t next;           /* next in the bucket (UINT32_MAX = tail) */
};

/* A calendar bucket: events [head, len) of ev[], sorted by (t_ns, seq). */
struct iod_sim_cbucket {
	struct iod_sim_event *ev; /* in the resize slab, or its own array when owned */
	uint32_t head, len, cap;  /* first pending, end, room */
	uint32_t owned;           /* 1: ev was grown out of the slab (free it) */
};

struct iod_sim_queue {
	enum iod_sim_queue_kind kind; /* which structure holds the events now */
	bool adaptive;                /* AUTO: switches between HEAP and CALENDAR */
	struct iod_sim_event *heap;   /* HEAP: heap_cap entries */
	uint32_t heap_cap;            /* HEAP: cap, or AUTO_UP for AUTO */
	struct iod_sim_qnode *nodes;  /* RADIX: cap entries */
	uint32_t *free_list;          /* RADIX: free node indexes */
	uint32_t free_n;              /* RADIX: entries on free_list */
	uint32_t head[IOD_SIM_RADIX_BUCKETS], tail[IOD_SIM_RADIX_BUCKETS]; /* RADIX FIFOs */
	uint64_t last_ns;               /* RADIX: time of the last pop */
	uint64_t peek_ns;               /* RADIX: cached minimum (UINT64_MAX = unknown) */
	struct iod_sim_cbucket *cal;    /* CALENDAR: cal_nb buckets (a power of two) */
	struct iod_sim_event *cal_slab; /* CALENDAR: bucket arrays laid out at the last resize */
	uint32_t cal_nb;                /* CALENDAR: buckets */
	uint32_t cal_cur;               /* CALENDAR: bucket of cal_slot */
	uint32_t cal_shift;             /* CALENDAR: bucket width is 1 << cal_shift ns */
	uint32_t cal_resizes;           /* CALENDAR: rebuilds so far (statistics) */
	uint32_t cal_far;               /* CALENDAR: pops that found a whole year empty */
	uint64_t cal_slot;              /* CALENDAR: no pending event has t >> shift below it */
	uint32_t n;                     /* pending events */
	uint32_t cap;                   /* fixed at init: -ENOSPC past it */
	uint64_t next_seq;              /* stamped on the next push */
};

/* HEAP kind (any push order). */
int iod_sim_queue_init(struct iod_sim_queue *q, uint32_t cap);
int iod_sim_queue_init_kind(struct iod_sim_queue *q, uint32_t cap, enum iod_sim_queue_kind kind);
void iod_sim_queue_destroy(struct iod_sim_queue *q);
/* 0; -ENOSPC when cap events are pending; -EINVAL (RADIX) when t_ns is
 * before the last pop; -ENOMEM (CALENDAR, AUTO) when a bucket cannot grow. */
int iod_sim_queue_push(struct iod_sim_queue *q, uint64_t t_ns, uint32_t kind, uint32_t arg,
                       uint64_t data);
/* false when empty; else the earliest event in *ev. */
bool iod_sim_queue_pop(struct iod_sim_queue *q, struct iod_sim_event *ev);
/* Time of the earliest event, UINT64_MAX when empty. Pushes at or after
 * the last pop stay allowed after a peek. */
uint64_t iod_sim_queue_peek(struct iod_sim_queue *q);

/* ---- topology ----------------------------------------------------------- */

enum iod_sim_node_kind { IOD_SIM_HOST, IOD_SIM_SWITCH };

#define IOD_SIM_HASHES(X)                                                    \
	X(CRC32, "crc32") /* CRC-32C over the outer 5-tuple, seed as init */ \
	X(MIX, "mix")     /* splitmix-style 64-bit mixing: well spread */    \
	X(XOR, "xor")     /* xor of the fields: cheap and weak, like old ASICs */

enum iod_sim_hash {
#define X(n, s) IOD_SIM_HASH_##n,
	IOD_SIM_HASHES(X)
#undef X
};
const char *iod_sim_hash_name(enum iod_sim_hash h);

/* How switches seed their ECMP hash. SAME lets polarisation appear. */
enum iod_sim_seed_mode { IOD_SIM_SEED_PER_SWITCH, IOD_SIM_SEED_SAME };

struct iod_sim_topo_node {
	char name[IOD_NAME_MAX];     /* "leaf0", "h12" */
	enum iod_sim_node_kind kind; /* host or switch */
};

/* One physical link (parallel links are separate entries), full duplex. */
struct iod_sim_topo_link {
	uint32_t a, b;     /* node indexes */
	uint64_t rate_bps; /* per direction */
	uint64_t delay_ns; /* propagation delay */
};

/* A change of one link at a time: rate 0 fails it, a rate > 0 sets it. */
struct iod_sim_topo_event {
	uint64_t at_ns;    /* virtual time */
	uint32_t link;     /* index into links */
	uint64_t rate_bps; /* 0 = down; else the new rate (and up) */
};

struct iod_sim_topo {
	struct iod_sim_topo_node *nodes;   /* n_nodes */
	struct iod_sim_topo_link *links;   /* n_links */
	struct iod_sim_topo_event *events; /* n_events */
	uint32_t n_nodes, n_links, n_events;
	uint32_t cap_nodes, cap_links, cap_events; /* allocated entries */
	uint64_t buffer_bytes;                     /* per switch output queue (drop-tail) */
	uint64_t host_buffer_bytes;                /* per host NIC queue */
	uint64_t ecn_bytes;                        /* mark CE when queue >= this (0 = off) */
	uint32_t ecn_pkts;                         /* or when queue >= this many packets */
	enum iod_sim_hash hash;                    /* ECMP hash function */
	enum iod_sim_seed_mode seed_mode;          /* per-switch or the same seed */
	uint64_t hash_seed;                        /* base seed of the ECMP hashes */
	char name[IOD_NAME_MAX];                   /* "leaf-spine" or the file's name */
};

void iod_sim_topo_init(struct iod_sim_topo *t);
void iod_sim_topo_free(struct iod_sim_topo *t);
/* Add a node; -EEXIST on a duplicate name, -E2BIG past the limit. */
int iod_sim_topo_add_node(struct iod_sim_topo *t, const char *name, enum iod_sim_node_kind kind,
                          uint32_t *idx, struct iod_err *e);
int iod_sim_topo_add_link(struct iod_sim_topo *t, uint32_t a, uint32_t b, uint64_t rate_bps,
                          uint64_t delay_ns, struct iod_err *e);
int iod_sim_topo_add_event(struct iod_sim_topo *t, uint64_t at_ns, uint32_t link, uint64_t rate_bps,
                           struct iod_err *e);
int iod_sim_topo_find(const struct iod_sim_topo *t, const char *name, uint32_t *idx);
/*
 * Built-in topologies by name with parameters:
 *   leaf-spine[:leaves=2,spines=2,hosts=32,host_rate=10Gbps,fabric_rate=40Gbps,
 *              links=1,delay=1us]  (hosts in total, spread over leaves)
 *   fat-tree[:k=4,rate=10Gbps,delay=1us]   (3-tier, k^3/4 hosts)
 *   dumbbell[:hosts=2,host_rate=40Gbps,bottleneck=10Gbps,delay=1us]
 * Common: buffer=, ecn=, ecn_pkts=, hash=, seed=same|per-switch.
 */
int iod_sim_topo_builtin(struct iod_sim_topo *t, const char *spec, struct iod_err *e);
/* Parse a YAML topology (docs/simulator.md); errors carry file:line:col. */
int iod_sim_topo_parse_yaml(struct iod_sim_topo *t, const char *text, size_t len, const char *file,
                            struct iod_err *e);
/* A built-in name (optionally with :params) or a YAML file path. */
int iod_sim_topo_load(struct iod_sim_topo *t, const char *name_or_path, struct iod_err *e);
uint32_t iod_sim_topo_host_count(const struct iod_sim_topo *t);

/* ---- the host edge: VXLAN encap and pluggable path choice ---------------- */

/* VXLAN (RFC 7348): outer UDP destination port and source-port range. */
#define IOD_SIM_VXLAN_PORT 4789
#define IOD_SIM_VXLAN_SPORT_MIN 49152
#define IOD_SIM_VXLAN_SPORT_MAX 65535
/* Outer headers VXLAN adds: Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8. */
#define IOD_SIM_VXLAN_OVERHEAD_BYTES 50

/* An inner (overlay) 5-tuple. */
struct iod_sim_tuple {
	uint32_t src_ip, dst_ip; /* overlay addresses */
	uint16_t sport, dport;   /* L4 ports */
	uint8_t proto;           /* 6 = TCP */
};
/* The hash of the inner flow that VXLAN puts in the outer source port. */
uint64_t iod_sim_edge_flow_hash(const struct iod_sim_tuple *t);
/* RFC 7348 §5: source port = hash of the inner headers, in 49152..65535. */
uint16_t iod_sim_edge_sport(uint64_t flow_hash);

/* What a path policy is asked, per packet, at the sending host's edge. */
struct iod_sim_path_query {
	uint32_t src_host, dst_host; /* VTEPs: host indexes */
	uint32_t flow_id;            /* simulator flow id */
	uint64_t flow_hash;          /* iod_sim_edge_flow_hash of the inner tuple */
	uint64_t now_ns;             /* virtual time */
	uint64_t bytes_sent;         /* payload bytes this flow sent before */
	bool is_ack;                 /* a reverse-direction ACK */
};

enum iod_sim_feedback_kind { IOD_SIM_FB_ACK, IOD_SIM_FB_PROBE_REPLY };

/* What a path policy learns: per ACK (ECN echo, RTT) or probe reply. */
struct iod_sim_path_feedback {
	enum iod_sim_feedback_kind kind; /* ACK or probe reply */
	uint32_t src_host, dst_host;     /* the path's VTEPs (data direction) */
	uint32_t flow_id;                /* flow the ACK belongs to */
	uint16_t sport;                  /* outer source port the data used */
	bool ecn;                        /* CE was echoed for that packet */
	uint64_t rtt_ns;                 /* data sent to ACK received */
	uint64_t now_ns;                 /* virtual time */
	/* PROBE_REPLY only (0 otherwise): what the fabric tells about the
	 * forward path, as traceroute or INT would. */
	uint64_t path_id;       /* hash of the links the probe's port maps to */
	uint64_t path_links;    /* bit (link id mod 64) set per link on that path */
	uint64_t path_queue_ns; /* largest queueing delay the probe met going out */
};

/* A probe a policy asks its host's edge to send (an action, not a call). */
struct iod_sim_probe {
	uint32_t dst_host; /* VTEP to probe */
	uint16_t sport;    /* outer source port: the path to measure */
};

/*
 * A path policy: pure functions of their inputs and their own state. choose
 * returns the outer UDP source port for one packet; feedback (may be NULL)
 * is told every ACK and every probe reply. probe (may be NULL) is called
 * every probe_interval_ns for each host and returns the probes to send now
 * (at most max); the simulator sends each as a small ECN-capable packet that
 * the destination reflects, and reports the reply through feedback with
 * kind IOD_SIM_FB_PROBE_REPLY and flow_id UINT32_MAX, with the path's
 * identity (links crossed) and its largest queueing delay. Policies never see the
 * simulator, never read a clock and never draw randomness except from state
 * they seeded themselves.
 */
struct iod_sim_path_policy {
	const char *name; /* "ecmp" */
	void *state;      /* owned by the policy's creator */
	uint16_t (*choose)(void *state, const struct iod_sim_path_query *q);
	void (*feedback)(void *state, const struct iod_sim_path_feedback *fb);
	uint32_t (*probe)(void *state, uint32_t src_host, uint64_t now_ns,
	                  struct iod_sim_probe *out, uint32_t max);
	uint64_t probe_interval_ns; /* 0 = never probe */
	/* May be NULL (every CE echo reaches the sender's transport): whether a
	 * CE echo on an ACK of src -> dst reaches the inner flow's congestion
	 * control now, or the edge masks it (Clove). feedback sees it either way. */
	bool (*inner_ecn)(void *state, uint32_t src_host, uint32_t dst_host, uint64_t now_ns);
};
/* Static ECMP: the source port is the inner flow hash (what VXLAN does). */
extern const struct iod_sim_path_policy iod_sim_path_ecmp;

/* ---- adaptive routing at the host edges (src/sim/ar_policy.c) ----------- */

/*
 * Runs net/ar (include/iod/ar.h) as the simulator's path policy: one iod_ar
 * per sending host, one iod_ar_rx per receiving host. Probes the core asks
 * for are sent at the next edge tick (tick_ns) and their replies, with the
 * path identity and queueing delay the fabric reports, go back to the core;
 * the receiver relays ECN per source port at most once per rx_interval_ns
 * (half an RTT) on reverse traffic, which the sender's core then hears.
 * ACKs take the ECMP hash port.
 */
struct iod_ar_config;
struct iod_ar_stats;
struct iod_ar;
struct iod_sim_ar;
/* tick_ns 0 = 2 us; rx_interval_ns 0 = 5 us. Fills *policy to pass in
 * iod_sim_config.policy; it stays valid until iod_sim_ar_destroy. */
int iod_sim_ar_create(const struct iod_ar_config *cfg, uint32_t hosts, uint64_t tick_ns,
                      uint64_t rx_interval_ns, struct iod_sim_ar **out,
                      struct iod_sim_path_policy *policy, struct iod_err *e);
void iod_sim_ar_destroy(struct iod_sim_ar *a);
/* The policy's inner_ecn hook (left NULL by iod_sim_ar_create: the inner
 * flow sees every CE): set policy->inner_ecn to it to have each edge mask
 * CE as its core says (iod_ar_inner_ecn: clove-ecn hides it unless every
 * path to the destination is congested). state is the policy's state. */
bool iod_sim_ar_inner_ecn(void *state, uint32_t src_host, uint32_t dst_host, uint64_t now_ns);
/* Counters summed over every host's edge. */
void iod_sim_ar_stats(const struct iod_sim_ar *a, struct iod_ar_stats *sum);
/* Every host learns every other host as a remote edge (iod_ar_dest_prepare):
 * discovery probes leave at the first tick at or after now_ns. */
void iod_sim_ar_prepare_all(struct iod_sim_ar *a, uint64_t now_ns);
/* Host h's sender core, for inspection (iod_ar_paths, iod_ar_stats). */
const struct iod_ar *iod_sim_ar_edge(const struct iod_sim_ar *a, uint32_t h);
/* Probes the edges could not queue (a bounded ring per host). */
uint64_t iod_sim_ar_probes_dropped(const struct iod_sim_ar *a);

/* ---- the simulator ------------------------------------------------------ */

enum iod_sim_transport { IOD_SIM_DCTCP, IOD_SIM_NEWRENO };

struct iod_sim_config {
	uint64_t seed;                            /* seeds every random draw */
	enum iod_sim_transport transport;         /* DCTCP-like or NewReno-like */
	uint32_t mss_bytes;                       /* payload per packet (1400) */
	uint32_t hdr_bytes;                       /* headers per packet incl. VXLAN (104) */
	uint32_t init_cwnd_pkts;                  /* 0 = one path BDP: line-rate start */
	uint32_t max_cwnd_pkts;                   /* 0 = IOD_SIM_CWND_MAX_PKTS */
	uint64_t rto_min_ns;                      /* retransmission timeout floor (1 ms) */
	uint64_t tsq_bytes;                       /* a host stops handing a flow's packets to
	                                    its NIC above this many queued bytes,
	                                    like Linux TCP small queues (64 KB) */
	double dctcp_g;                           /* DCTCP alpha gain (1/16) */
	uint32_t packets_max;                     /* packet pool size */
	uint32_t events_max;                      /* event heap size */
	uint32_t flows_max;                       /* flow table size */
	const struct iod_sim_path_policy *policy; /* NULL = ECMP */
	bool outer_ect;                           /* the edge marks every packet ECN-capable
	                                    in the outer header, whatever the inner
	                                    transport (Clove's edge does): NewReno
	                                    ignores the echoes, the policy sees them */
};
void iod_sim_config_default(struct iod_sim_config *c);

struct iod_sim;

/* One flow: what it is and how it went. */
struct iod_sim_flow_rec {
	uint32_t id;          /* index */
	uint32_t src, dst;    /* host indexes */
	uint64_t size_bytes;  /* payload */
	uint64_t start_ns;    /* first packet may leave */
	uint64_t fct_ns;      /* start to last ACK; 0 while not done */
	uint64_t ideal_ns;    /* FCT alone on the empty network */
	uint64_t acked_bytes; /* payload acknowledged so far */
	uint64_t rcv_done_ns; /* last byte received (0 = not yet) */
	uint32_t retransmits; /* packets sent again */
	uint32_t timeouts;    /* RTO expiries */
	uint32_t tag;         /* caller's tag (collective step...) */
	bool done;            /* last ACK received */
};

/* Counters of one output queue (one direction of one link). */
struct iod_sim_port_stats {
	uint32_t node, peer;        /* from, to (node indexes) */
	uint32_t link;              /* topology link index */
	uint64_t rate_bps;          /* current rate (0 = down) */
	uint64_t tx_pkts, tx_bytes; /* sent on the wire */
	uint64_t drops;             /* drop-tail and link-down drops */
	uint64_t ecn_marks;         /* CE marks */
	uint64_t q_max_bytes;       /* high-water mark */
	uint64_t wait_ns_sum;       /* queueing delay summed over tx_pkts */
	uint64_t busy_ns;           /* time spent serialising */
};

int iod_sim_create(struct iod_sim **out, const struct iod_sim_topo *t,
                   const struct iod_sim_config *c, struct iod_err *e);
void iod_sim_destroy(struct iod_sim *s);

/* Add a flow of size_bytes from host src to host dst at start_ns (>= now). */
int iod_sim_flow_add(struct iod_sim *s, uint32_t src, uint32_t dst, uint64_t size_bytes,
                     uint64_t start_ns, uint32_t tag, uint32_t *id, struct iod_err *e);
/* Unresponsive Poisson packet source (no transport): for queue theory. */
int iod_sim_raw_add(struct iod_sim *s, uint32_t src, uint32_t dst, uint32_t wire_bytes,
                    double rate_pps, uint64_t start_ns, uint64_t stop_ns, struct iod_err *e);

/* Make raw source raw (the n-th added, from 0) an on/off source: during
 * the first on_ns of every period_ns from its start it sends at its rate
 * with even gaps (a UDP sender pacing by timer sends its period's bytes as
 * one line-rate burst), nothing the rest of the period. */
int iod_sim_raw_burst(struct iod_sim *s, uint32_t raw, uint64_t on_ns, uint64_t period_ns,
                      struct iod_err *e);

typedef void (*iod_sim_flow_done_fn)(void *ctx, struct iod_sim *s, uint32_t flow_id);
void iod_sim_on_flow_done(struct iod_sim *s, iod_sim_flow_done_fn fn, void *ctx);
typedef void (*iod_sim_progress_fn)(void *ctx, const struct iod_sim *s);
void iod_sim_on_progress(struct iod_sim *s, iod_sim_progress_fn fn, void *ctx,
                         uint64_t every_events);

/*
 * Run until no event is left or the next one is after until_ns (then now =
 * until_ns). 0, or a negative errno: -ENOMEM (packet pool exhausted),
 * -ENOSPC (event heap full), with the reason in e.
 */
int iod_sim_run(struct iod_sim *s, uint64_t until_ns, struct iod_err *e);

uint64_t iod_sim_now(const struct iod_sim *s);
uint64_t iod_sim_events(const struct iod_sim *s);
uint32_t iod_sim_flow_count(const struct iod_sim *s);
uint32_t iod_sim_flows_done(const struct iod_sim *s);

/* ---- running a workload (src/sim/run.c) ---------------------------------- */

/*
 * The flow table a workload needs: twice the flows a Poisson load at load
 * (fraction of the fastest host NIC) of mean_bytes flows is expected to
 * start in duration_ns on every host, plus 4096, plus 2 n^2 for an
 * all-reduce among allreduce_n hosts; at most IOD_SIM_FLOWS_DEFAULT.
 */
uint32_t iod_sim_flows_for(const struct iod_sim_topo *topo, double mean_bytes, double load,
                           uint64_t duration_ns, uint32_t allreduce_n);
/*
 * Drain: run in steps of step_ns (0 = 1 ms) until every flow is done or the
 * simulated time reaches end_ns. 0 or iod_sim_run's error.
 */
int iod_sim_drain(struct iod_sim *s, uint64_t end_ns, uint64_t step_ns, struct iod_err *e);
const struct iod_sim_flow_rec *iod_sim_flow(const struct iod_sim *s, uint32_t id);
uint32_t iod_sim_host_count(const struct iod_sim *s);
/* Node index of host h; the host's NIC rate. */
uint32_t iod_sim_host_node(const struct iod_sim *s, uint32_t h);
uint64_t iod_sim_host_rate_bps(const struct iod_sim *s, uint32_t h);
const char *iod_sim_node_name(const struct iod_sim *s, uint32_t node);
uint32_t iod_sim_port_count(const struct iod_sim *s);
void iod_sim_port_stats(const struct iod_sim *s, uint32_t port, struct iod_sim_port_stats *st);
/* Nodes a packet from src to dst with outer source port sport visits
 * (ECMP as the switches would hash it now); returns the count. */
uint32_t iod_sim_path(const struct iod_sim *s, uint32_t src, uint32_t dst, uint16_t sport,
                      uint32_t *nodes, uint32_t max);
/* Ideal FCT of size_bytes from src to dst alone on the empty network. */
uint64_t iod_sim_ideal_fct(const struct iod_sim *s, uint32_t src, uint32_t dst,
                           uint64_t size_bytes);
/* Wire bytes of a flow of size_bytes (payload plus headers). */
uint64_t iod_sim_wire_bytes(const struct iod_sim *s, uint64_t size_bytes);

/* ---- workloads ---------------------------------------------------------- */

/* A flow-size CDF: points (bytes, probability), linearly interpolated. */
struct iod_sim_cdf {
	uint64_t bytes[IOD_SIM_CDF_POINTS_MAX]; /* non-decreasing */
	double p[IOD_SIM_CDF_POINTS_MAX];       /* non-decreasing, last = 1 */
	uint32_t n;                             /* points */
	char name[IOD_NAME_MAX];                /* "web-search" */
};
/* Text: one "bytes cdf" pair per line ('#' comments); cdf in [0,1] or in
 * percent (when the last value is 100). */
int iod_sim_cdf_parse(struct iod_sim_cdf *c, const char *text, const char *file, struct iod_err *e);
/* "web-search", "data-mining" (shipped), or a file path. */
int iod_sim_cdf_load(struct iod_sim_cdf *c, const char *name_or_path, struct iod_err *e);
double iod_sim_cdf_mean(const struct iod_sim_cdf *c);
uint64_t iod_sim_cdf_sample(const struct iod_sim_cdf *c, struct iod_rng *r);

/*
 * Poisson flow arrivals at every host for a target load of its NIC rate:
 * mean inter-arrival = mean size / (rate x load), uniform random other
 * destination, arrivals in [0, duration_ns). Returns the flow count added.
 */
int iod_sim_workload_poisson(struct iod_sim *s, const struct iod_sim_cdf *c, double load,
                             uint64_t duration_ns, struct iod_rng *r, struct iod_err *e);
/* Scripted flows, one per line: "AT SRC DST SIZE" ("0ms h0 h5 100MB");
 * hosts by name or index. Returns the flow count added. */
int iod_sim_workload_script(struct iod_sim *s, const char *text, const char *file,
                            struct iod_err *e);
/* n senders (hosts 1..n) to host 0 at at_ns, size_bytes each. */
int iod_sim_workload_incast(struct iod_sim *s, uint32_t n, uint64_t size_bytes, uint64_t at_ns,
                            struct iod_err *e);

/* Ring all-reduce among hosts 0..n-1 of size_bytes (nccl-tests' S). */
struct iod_sim_allreduce {
	uint32_t n;           /* ranks */
	uint64_t size_bytes;  /* message size S */
	uint32_t steps_total; /* 2(n-1) */
	uint32_t *step;       /* per rank: steps finished */
	uint32_t *recv_cnt;   /* per rank: chunks received from rank-1 */
	uint8_t *send_done;   /* per rank: step's outgoing chunk acked */
	uint32_t ranks_done;  /* ranks that finished every step */
	uint64_t start_ns;    /* when it began */
	uint64_t end_ns;      /* when the last rank finished (0 = running) */
	int err;              /* first error starting a flow */
};
int iod_sim_allreduce_start(struct iod_sim *s, struct iod_sim_allreduce *a, uint32_t n,
                            uint64_t size_bytes, uint64_t at_ns, struct iod_err *e);
void iod_sim_allreduce_free(struct iod_sim_allreduce *a);
/* algbw = S / time; busbw = algbw x 2(n-1)/n (nccl-tests' definitions). */
double iod_sim_allreduce_algbw_bps(const struct iod_sim_allreduce *a);
double iod_sim_allreduce_busbw_bps(const struct iod_sim_allreduce *a);

/* ---- results ------------------------------------------------------------ */

/* FCT statistics of one class of flows. */
struct iod_sim_fct_stats {
	uint32_t n;        /* finished flows */
	double fct_avg_us; /* average FCT */
	double fct_p99_us; /* 99th percentile FCT */
	double slow_avg;   /* average slowdown (FCT / ideal) */
	double slow_p99;   /* 99th percentile slowdown */
};

#define IOD_SIM_BUCKETS 5 /* <10KB, 10-100KB, 100KB-1MB, 1-10MB, >=10MB */
struct iod_sim_summary {
	uint32_t flows;                                   /* flows added */
	uint32_t done;                                    /* flows finished */
	struct iod_sim_fct_stats all;                     /* every finished flow */
	struct iod_sim_fct_stats small;                   /* < 100 KB */
	struct iod_sim_fct_stats large;                   /* > 10 MB */
	struct iod_sim_fct_stats bucket[IOD_SIM_BUCKETS]; /* by size */
	uint64_t drops, ecn_marks;                        /* summed over all queues */
	uint64_t retransmits, timeouts;                   /* summed over flows */
	uint64_t events;                                  /* events processed */
	uint64_t sim_ns;                                  /* virtual time reached */
	uint64_t ecn_masked; /* CE echoes the edge kept from the inner flow (Clove) */
};
extern const char *const iod_sim_bucket_names[IOD_SIM_BUCKETS];
int iod_sim_summarize(const struct iod_sim *s, struct iod_sim_summary *sum);
/* Per-flow records: header + one line per flow, in flow id order. */
int iod_sim_write_flows_csv(const struct iod_sim *s, FILE *f);
/* The summary as a JSON object (caller decrefs). */
json_t *iod_sim_summary_json(const struct iod_sim_summary *sum);
json_t *iod_sim_flows_json(const struct iod_sim *s);

#endif
