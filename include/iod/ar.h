/*
 * ar.h: adaptive routing of overlay flows (net/ar), a pure core.
 *
 * An overlay edge (the data plane on a host or DPU, or a host edge in the
 * fabric simulator) asks this core which outer UDP source port to put on
 * each VXLAN packet. The fabric's ECMP hashes that port, so the port chooses
 * the path. Policies:
 *
 *   ecmp       the port comes from the inner flow hash (the baseline);
 *   minrtt     DOCA-AR: a new flow sends k probes on ports p..p+k-1 and is
 *              pinned to the port whose reflected probe returns first; its
 *              packets use the hash port meanwhile, so nothing is held;
 *   flowlet    Edge-Flowlet/LetFlow: a random port for every new flowlet;
 *   clove-ecn  Clove: k discovered paths per destination sharing the fewest
 *              links; weighted round robin per flowlet; ECN relayed by the
 *              receiver per port cuts that path's weight by a third and
 *              spreads it over uncongested paths;
 *   probe-util HULA / Clove-INT: periodic probes carry the path's utilisation
 *              and each new flowlet takes the least-loaded path.
 *
 * Every policy that probes drops a path whose liveness probes go unanswered
 * 3 intervals in a row (one lost probe never drops a path) and moves its
 * flows; probes in flight per destination are bounded, so a lossy or slow
 * path cannot set off a probe storm. The core never reads a clock, never
 * sends a packet and never allocates after iod_ar_init: the caller passes the
 * time and carries out the probes it returns in struct iod_ar_out.
 */
#ifndef IOD_AR_H
#define IOD_AR_H

#include "iod/base.h"

#define IOD_AR_POLICIES(X)        \
	X(ECMP, "ecmp")           \
	X(MINRTT, "minrtt")       \
	X(FLOWLET, "flowlet")     \
	X(CLOVE_ECN, "clove-ecn") \
	X(PROBE_UTIL, "probe-util")

enum iod_ar_policy {
#define X(n, s) IOD_AR_##n,
	IOD_AR_POLICIES(X)
#undef X
	    IOD_AR_POLICY_COUNT
};

const char *iod_ar_policy_name(enum iod_ar_policy p);
int iod_ar_policy_parse(const char *s, enum iod_ar_policy *out);

struct iod_ar_config {
	enum iod_ar_policy policy;    /* which policy this edge runs */
	uint16_t sport_min;           /* outer UDP source port range, inclusive */
	uint16_t sport_max;           /* (Linux VXLAN: the ephemeral range) */
	uint32_t paths;               /* k: probes per flow / paths per destination */
	uint32_t discovery_ports;     /* candidate ports probed to find k paths */
	uint64_t probe_timeout_ns;    /* minrtt: replies later than this are ignored */
	uint64_t flow_idle_ns;        /* a flow entry idle this long is aged out */
	uint64_t flowlet_gap_ns;      /* a gap this long starts a new flowlet */
	uint64_t probe_interval_ns;   /* periodic path probes (liveness, utilisation) */
	uint64_t congestion_hold_ns;  /* a path stays "congested" this long after ECN */
	uint32_t flows_max;           /* flow table capacity */
	uint32_t dests_max;           /* remote edges tracked */
	uint64_t seed;                /* for flowlet's random choice */
	uint32_t probes_inflight_max; /* probes per destination sent and not yet answered
	                                 (nor older than 1-2 probe timeouts); beyond it a
	                                 new minrtt flow takes the hash port unprobed */
	uint64_t minrtt_tie_ns;       /* minrtt: replies within this of the first are ties;
	                                the path this edge pinned fewest flows to lately
	                                wins (0 = DOCA-AR: the first reply wins) */
	bool minrtt_scatter;          /* minrtt: probe the hash port and k-1 pseudo-random
	                                ports instead of DOCA-AR's sport+1..k-1 (a CRC
	                                ECMP hash can map consecutive ports to few paths) */
};

/* Defaults: k 4, 50 ms probe timeout, 10 s aging (DOCA-AR), 100 us flowlet gap. */
void iod_ar_config_default(struct iod_ar_config *c, enum iod_ar_policy p);

/* Why a probe is sent. */
enum iod_ar_probe_kind {
	IOD_AR_PROBE_FLOW,     /* minrtt: race k ports for one new flow */
	IOD_AR_PROBE_DISCOVER, /* find distinct paths to a destination */
	IOD_AR_PROBE_PATH,     /* periodic: liveness and utilisation of a known path */
};

/* A probe the caller must send: outer headers as the flow's, this source port. */
struct iod_ar_probe {
	uint32_t dst;       /* remote edge (VTEP address or simulator host id) */
	uint16_t sport;     /* outer UDP source port to probe */
	uint8_t kind;       /* enum iod_ar_probe_kind */
	uint64_t flow_hash; /* FLOW probes: the flow's id; echoed back */
	uint64_t sent_ns;   /* timestamp carried in the payload; echoed back */
};

/* What a reflected probe brings back (the remote edge echoes the payload;
 * the fabric may add the path's identity and load, as INT would). */
struct iod_ar_probe_reply {
	uint32_t dst;        /* the edge that reflected it */
	uint16_t sport;      /* port the probe was sent on */
	uint8_t kind;        /* as sent */
	uint64_t flow_hash;  /* as sent */
	uint64_t sent_ns;    /* as sent */
	uint64_t path_id;    /* identity of the path taken (0 = unknown) */
	uint64_t path_links; /* a 64-bit signature of the links used (bit per link hash) */
	uint32_t load_ppm;   /* probe-util: the path's max link utilisation, ppm, or
	                        any load where lower is better (the simulator
	                        reports the largest queueing delay in ns) */
};

#define IOD_AR_OUT_PROBES_MAX 64
/* Probes the core asks the caller to send after one call. */
struct iod_ar_out {
	struct iod_ar_probe probes[IOD_AR_OUT_PROBES_MAX]; /* to send now */
	uint32_t probes_n;                                 /* how many */
	uint32_t probes_dropped;                           /* did not fit: counted, retried later */
};

/* Counters an edge exposes (iod dp dump, the simulator's report). */
struct iod_ar_stats {
	uint64_t flows_new;         /* flows first seen */
	uint64_t flows_pinned;      /* minrtt: flows pinned by a probe reply */
	uint64_t flows_aged;        /* flow entries aged out */
	uint64_t flows_table_full;  /* packets sent on the hash port: table full */
	uint64_t flowlets;          /* new flowlets started */
	uint64_t probes_sent;       /* probes handed to the caller */
	uint64_t probe_replies;     /* replies accepted */
	uint64_t probe_late;        /* replies after the timeout or for unknown flows */
	uint64_t paths_failed;      /* paths dropped for lack of replies */
	uint64_t probe_misses;      /* liveness probes unanswered within an interval */
	uint64_t probes_suppressed; /* probes not sent: too many in flight to a destination */
	uint64_t flows_moved;       /* flows moved off a failed path */
	uint64_t ecn_events;        /* ECN feedback received for a path */
	uint64_t ecn_to_inner;      /* ECN passed to the inner flow: all paths congested */
};

struct iod_ar; /* opaque: flow table and per-destination path sets */

/* Allocates everything the edge will ever use. */
int iod_ar_create(const struct iod_ar_config *cfg, struct iod_ar **out, struct iod_err *e);
void iod_ar_destroy(struct iod_ar *ar);
const struct iod_ar_config *iod_ar_config(const struct iod_ar *ar);
const struct iod_ar_stats *iod_ar_stats(const struct iod_ar *ar);

/*
 * The outer source port for one packet of a flow to dst. flow_hash is the
 * inner 5-tuple hash (never 0 is required: 0 is remapped). May add probes to
 * out (out may be NULL for policies that never probe, e.g. ecmp).
 */
uint16_t iod_ar_select(struct iod_ar *ar, uint32_t dst, uint64_t flow_hash, uint64_t now_ns,
                       struct iod_ar_out *out);

/* A remote edge known in advance (a peer VTEP in the config): clove-ecn
 * and probe-util discover its paths now, so its first flows need not start
 * on the hash port. A no-op for the other policies and for known dests. */
void iod_ar_dest_prepare(struct iod_ar *ar, uint32_t dst, uint64_t now_ns, struct iod_ar_out *out);

/* A reflected probe came back. */
void iod_ar_on_probe_reply(struct iod_ar *ar, const struct iod_ar_probe_reply *r, uint64_t now_ns);

/*
 * ECN feedback the remote edge relayed for packets it received from us on
 * sport. Returns true when the inner flow must see the congestion mark:
 * clove-ecn hides ECN unless every path to dst is congested; the other
 * policies pass it through.
 */
bool iod_ar_on_ecn(struct iod_ar *ar, uint32_t dst, uint16_t sport, bool ce, uint64_t now_ns);

/*
 * Whether a CE mark on traffic to dst reaches the inner flow now: clove-ecn
 * masks it unless every known path to dst is congested (the paper's "ECN
 * masked from the VM unless all paths are congested"); the other policies,
 * and a destination with no known path, pass it through. Pure.
 */
bool iod_ar_inner_ecn(const struct iod_ar *ar, uint32_t dst, uint64_t now_ns);

/* Periodic work: path probes, path failure, flow aging. Call every
 * probe_interval_ns/2 or so; the work per call is bounded. */
void iod_ar_tick(struct iod_ar *ar, uint64_t now_ns, struct iod_ar_out *out);

/* Introspection for tests, dumps and the simulator's report. */
struct iod_ar_path_info {
	uint16_t sport;    /* port that takes this path */
	uint64_t path_id;  /* as reported by probes */
	uint32_t weight;   /* clove-ecn weight (sum over paths = IOD_AR_WEIGHT_TOTAL) */
	uint32_t load_ppm; /* last reported utilisation */
	bool alive;        /* its last liveness probe was answered */
	uint32_t misses;   /* consecutive liveness probes unanswered (drop at
	                      IOD_AR_MISSES_MAX) */
	bool congested;    /* ECN seen within congestion_hold_ns */
	uint64_t rtt_ns;   /* round trip of its last answered probe (0 = none yet) */
	uint32_t flows;    /* flow entries on its port now (minrtt: pinned to it) */
};
#define IOD_AR_WEIGHT_TOTAL 1000000u
/* Fill up to max paths known for dst; returns the count. Walks the flow
 * table to count each path's flows: for dumps and tests, not per packet. */
uint32_t iod_ar_paths(const struct iod_ar *ar, uint32_t dst, struct iod_ar_path_info *paths,
                      uint32_t max, uint64_t now_ns);
/* The port a flow is pinned to (minrtt) or currently on; 0 if unknown. */
uint16_t iod_ar_flow_port(const struct iod_ar *ar, uint32_t dst, uint64_t flow_hash);

/* ---- receiver side: relay ECN per source port in reverse traffic ---------- */

/*
 * Clove's receiver remembers, per sending edge, which source ports arrived
 * with CE set and relays one (port, ce) pair in the encapsulation of reverse
 * traffic at most once per interval (half an RTT), round robin over ports.
 */
struct iod_ar_rx;
int iod_ar_rx_create(uint32_t edges_max, uint64_t interval_ns, struct iod_ar_rx **out);
void iod_ar_rx_destroy(struct iod_ar_rx *rx);
/* A packet from edge src arrived on sport, with or without CE. */
void iod_ar_rx_on_packet(struct iod_ar_rx *rx, uint32_t src, uint16_t sport, bool ce,
                         uint64_t now_ns);
/* Reverse traffic to src is leaving: true and (sport, ce) when a feedback
 * should ride along now. */
bool iod_ar_rx_feedback(struct iod_ar_rx *rx, uint32_t src, uint64_t now_ns, uint16_t *sport,
                        bool *ce);

/* ---- probes on the wire (src/net/ar_probe.c) -------------------------------- */

/*
 * A probe is a VXLAN packet: IPv4/UDP with the outer addresses of the
 * overlay (VTEP to VTEP), the probed source port and the VXLAN destination
 * port, so a fabric hashing any part of the 5-tuple (Linux
 * fib_multipath_hash_policy=1 included) sends it exactly where the flow's
 * data with that source port goes. Its VXLAN header (I flag) carries the
 * reserved VNI IOD_AR_PROBE_VNI, which no network may use: the receiving
 * edge reflects it in one match, and a VTEP that knows nothing of probes
 * drops it as an unknown VNI. DOCA-AR sent probes to a distinct UDP port
 * instead; that only works on fabrics that leave the destination port out
 * of the hash. The VXLAN payload (big-endian, not an Ethernet frame): magic
 * "IOAR", version 1, flags (bit 0: reply), kind, 0, flow hash (8), send
 * time (8), 8 bytes reserved (zero).
 */
#define IOD_AR_PROBE_VNI 0xffffffu /* the top VNI: reserved for probes */
#define IOD_AR_PROBE_FRAME_BYTES (14 + 20 + 8 + 8 + 32)

/* Outer headers of the probes from this edge to one remote edge. */
struct iod_ar_wire {
	uint8_t src_mac[6]; /* this VTEP's MAC */
	uint8_t dst_mac[6]; /* next hop's MAC */
	uint32_t src_ip;    /* this VTEP (host order) */
	uint32_t dst_ip;    /* the remote VTEP (host order) */
	uint16_t dport;     /* the VXLAN port; 0 = 4789 */
	uint8_t tos;        /* outer DSCP/ECN, as the flow's VXLAN packets */
};

/* Write probe p as a frame into buf; its length, or -ENOSPC. */
int iod_ar_probe_frame_build(uint8_t *buf, uint32_t cap, const struct iod_ar_wire *w,
                             const struct iod_ar_probe *p);
/*
 * Parse a frame: -EINVAL unless it is a well-formed probe to the VXLAN port
 * dport (0 = 4789). *reply tells request from reply; for a reply, out is ready for
 * iod_ar_on_probe_reply (dst = the reflecting edge's address).
 */
int iod_ar_probe_frame_parse(const uint8_t *frame, uint32_t len, uint16_t dport, bool *reply,
                             struct iod_ar_probe_reply *out);
/* The remote edge's reflection, in place: a request becomes the reply
 * (MACs and IPs swapped, the reply flag set, ports kept). -EINVAL unless
 * frame is a probe request to dport. */
int iod_ar_probe_frame_reflect(uint8_t *frame, uint32_t len, uint16_t dport);

#endif
