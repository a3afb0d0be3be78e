/*
 * internal.h: the simulator's private state, shared by the files of src/sim.
 *
 * Hot state is index-based (packets, ports, flows are array slots) so the
 * event path never allocates and never chases malloc'd pointers. Nothing
 * outside src/sim may include this.
 */
#ifndef IOD_SIM_INTERNAL_H
#define IOD_SIM_INTERNAL_H

#include "iod/sim.h"

#define SIM_NONE UINT32_MAX

enum sim_ev {
	EV_TX_DONE = 1, /* arg = port: serialisation finished */
	EV_ARRIVE,      /* arg = port it crossed, data = packet */
	EV_FLOW_START,  /* arg = flow */
	EV_RTO,         /* arg = flow: lazy retransmission timer */
	EV_LINK,        /* arg = topology event */
	EV_RAW,         /* arg = raw source: emit one packet */
	EV_PROBE_TICK,  /* ask every host's path policy for probes */
};

enum { PKT_DATA = 0, PKT_ACK = 1, PKT_RAW = 2, PKT_PROBE = 3, PKT_PROBE_REPLY = 4 };
enum { PF_ECT = 1, PF_CE = 2, PF_ECE = 4 };

/* One packet in flight; lives in the pool. */
struct sim_pkt {
	uint32_t next;       /* next in a queue (SIM_NONE = tail) */
	uint32_t flow;       /* flow id (or raw source) */
	uint32_t seq;        /* DATA: packet number; ACK: cumulative ack */
	uint32_t src, dst;   /* host indexes (outer VTEPs) */
	uint32_t wire_bytes; /* on the wire, headers included */
	uint64_t enq_ns;     /* when queued at the current port */
	uint64_t sent_ns;    /* DATA: when sent; ACK: the echoed data time */
	uint16_t sport;      /* outer UDP source port */
	uint16_t data_sport; /* ACK: the data packet's source port */
	uint8_t type;        /* PKT_* */
	uint8_t flags;       /* PF_* */
};

/* One direction of a link: an output queue and a transmitter. */
struct sim_port {
	uint32_t node, peer;          /* from, to */
	uint32_t link;                /* topology link */
	uint32_t head, tail;          /* FIFO of packets */
	uint64_t rate_bps;            /* current; 0 = down */
	uint64_t delay_ns;            /* propagation */
	uint64_t q_bytes;             /* queued, not counting the one on the wire */
	uint32_t q_pkts;              /* queued packets */
	bool busy;                    /* a packet is being serialised */
	uint64_t buffer_bytes;        /* drop-tail limit */
	struct iod_sim_port_stats st; /* counters */
};

struct sim_node {
	uint32_t port_first, port_n; /* its ports */
	uint32_t host;               /* host index or SIM_NONE */
	uint64_t seed;               /* ECMP hash seed */
	uint64_t host_q_bytes;       /* host: bytes queued on its NIC ports */
	uint32_t blk_head, blk_tail; /* host: flows waiting for NIC room */
	enum iod_sim_node_kind kind; /* host or switch */
};

/* Sender and receiver state of one flow (the simulator sees both ends). */
struct sim_flow {
	struct iod_sim_flow_rec rec;    /* public record */
	struct iod_sim_tuple tuple;     /* inner 5-tuple */
	uint64_t hash;                  /* inner flow hash */
	uint64_t hash_rev;              /* inner hash of the reverse (ACK) flow */
	uint32_t high;                  /* highest packet number sent + 1 */
	uint32_t npkts;                 /* packets in the flow */
	uint32_t last_payload;          /* payload of the last packet */
	uint32_t snd_una, snd_nxt;      /* first unacked, next to send */
	uint32_t rcv_nxt;               /* receiver: next expected */
	uint32_t dupacks;               /* consecutive duplicate ACKs */
	uint32_t recover;               /* NewReno recovery point */
	uint32_t win_end;               /* DCTCP: end of the observation window */
	uint32_t cwr_end;               /* DCTCP: no second cut before this ack */
	uint32_t acked_win, marked_win; /* DCTCP: packets acked/marked in window */
	double cwnd, ssthresh;          /* packets */
	double alpha;                   /* DCTCP congestion estimate */
	uint64_t rto_ns;                /* current timeout (with backoff) */
	uint64_t rto_deadline_ns;       /* fire time; 0 = disarmed */
	bool rto_pending;               /* an EV_RTO is in the queue */
	bool in_recovery;               /* after fast retransmit */
	bool started;                   /* EV_FLOW_START fired */
	bool blocked;                   /* waiting for room on the host NIC */
	uint32_t blk_next;              /* next blocked flow of the same host */
};

struct sim_raw {
	uint32_t src, dst;   /* hosts */
	uint32_t wire_bytes; /* per packet */
	double mean_gap_ns;  /* 1 / rate */
	uint64_t stop_ns;    /* no packet at or after */
	struct iod_rng rng;  /* its own stream */
	uint64_t start_ns;   /* first packet (burst phase origin) */
	uint64_t on_ns;      /* bursts: sending this long per period, evenly spaced */
	uint64_t period_ns;  /* 0 = Poisson all along */
};

struct iod_sim {
	struct iod_sim_config cfg; /* as given, defaults filled */
	struct iod_sim_queue q;    /* pending events */
	struct iod_pool pkts;      /* packet pool */
	struct sim_node *nodes;    /* n_nodes */
	struct sim_port *ports;    /* n_ports */
	uint32_t *port_of_link;    /* link -> its a->b port */
	uint32_t *rev_port;        /* port -> the other direction's port */
	uint32_t n_nodes, n_ports, n_links;
	uint32_t *hosts; /* host index -> node */
	uint32_t n_hosts;
	char (*names)[IOD_NAME_MAX]; /* node names */
	/* Routing: for node n and destination host d, the candidate ports are
	 * route_ports[route_off[n*H+d] .. + route_cnt[n*H+d]]. */
	uint32_t *route_off;
	uint16_t *route_cnt;
	uint32_t *route_ports;
	uint32_t route_cap;
	struct iod_sim_topo_event *tevents; /* link changes */
	uint32_t n_tevents;
	struct sim_flow *flows; /* flows_max */
	uint32_t n_flows, flows_done;
	/* Future flow starts wait in this array sorted by (start, id) rather
	 * than in the heap, so millions of pre-generated arrivals do not make
	 * every heap operation deeper; the run loop merges the two. */
	uint32_t *arr;           /* flow ids, flows_max */
	uint32_t arr_n, arr_pos; /* filled, next to start */
	bool arr_sorted;         /* arr[arr_pos..arr_n) is sorted */
	struct sim_raw *raws;    /* IOD_SIM_RAW_MAX */
	uint32_t n_raws;
	enum iod_sim_hash hash; /* ECMP hash */
	const struct iod_sim_path_policy *policy;
	struct iod_rng rng;     /* flow tuples */
	uint64_t now_ns;        /* virtual time */
	uint64_t events;        /* processed */
	uint64_t drops_noroute; /* packets with no route (failures) */
	uint64_t probes_sent;   /* path probes the policy asked for */
	uint64_t ecn_masked;    /* CE echoes the edge kept from the inner flow */
	bool probe_ticking;     /* an EV_PROBE_TICK is queued */
	uint64_t ecn_bytes;     /* switch ECN threshold in bytes (0 = off) */
	uint32_t ecn_pkts;      /* or in packets (0 = off) */
	iod_sim_flow_done_fn done_fn;
	void *done_ctx;
	iod_sim_progress_fn progress_fn;
	void *progress_ctx;
	uint64_t progress_every;
	int err; /* sticky failure inside the event loop */
	char err_msg[IOD_ERR_MSG_MAX];
};

/* fabric.c, for transport.c */
void sim_fail(struct iod_sim *s, int code, const char *msg);
void sim_push(struct iod_sim *s, uint64_t t_ns, uint32_t kind, uint32_t arg, uint64_t data);
struct sim_pkt *sim_pkt_alloc(struct iod_sim *s);
void sim_arrival_add(struct iod_sim *s, uint32_t id);
void sim_forward(struct iod_sim *s, uint32_t node, struct sim_pkt *p);
uint64_t sim_ser_ns(uint64_t bytes, uint64_t rate_bps);

/* transport.c, for fabric.c */
void sim_transport_start(struct iod_sim *s, uint32_t flow);
void sim_transport_rto(struct iod_sim *s, uint32_t flow);
void sim_transport_data(struct iod_sim *s, const struct sim_pkt *p);
void sim_transport_ack(struct iod_sim *s, const struct sim_pkt *p);
void sim_transport_wake(struct iod_sim *s, uint32_t node);

/* transport.c: one flow through iod's real VXLAN encap and parser. */
int sim_edge_encap_check(const struct iod_sim_tuple *t, uint32_t vtep_src, uint32_t vtep_dst,
                         uint64_t *hash, uint16_t *sport);
/* Flows per run checked through the real encap (the rest reuse the same
 * functions without building frames: the per-packet path stays cheap). */
#define IOD_SIM_EDGE_CHECKS 4096

uint32_t sim_ecmp_hash(enum iod_sim_hash h, uint64_t seed, uint32_t src, uint32_t dst,
                       uint16_t sport, uint16_t dport, uint8_t proto);

#endif
