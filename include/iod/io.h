/*
 * io.h: packet I/O backends of iod's data plane behind one vtable: mem (for
 * tests and benchmarks), pcap (files through libpcap), afpacket (Linux
 * TPACKET_V3 rx ring) and dpdk (when built with DPDK; see docs/dataplane.md).
 *
 * Why: the flow engine is pure; a shell moves bursts of packets between
 * ports and the engine. Backends hand out packet buffers from a pool
 * allocated at open, so the packet path never allocates; a buffer goes back
 * to its pool when transmitted or freed.
 *
 * Backends do I/O (that is their job) but never decide anything about
 * packets; they never block longer than the timeout a caller gives.
 */
#ifndef IOD_IO_H
#define IOD_IO_H

#include "iod/flow.h"

/* Headroom in front of every received frame: VXLAN encap needs 50 bytes;
 * 128 leaves room for two levels and keeps frames cache-line aligned. */
#define IOD_IO_HEADROOM 128
/* Largest frame a buffer holds (jumbo frames are out of scope for now). */
#define IOD_IO_FRAME_MAX 2048

/* A packet buffer: the packet descriptor and its memory. */
struct iod_io_buf {
	struct iod_pkt pkt;                              /* pkt.io points to the pool */
	uint8_t mem[IOD_IO_HEADROOM + IOD_IO_FRAME_MAX]; /* headroom + frame */
};

/* Fixed pool of buffers (allocated at open; get/put never allocate). */
struct iod_io_pool {
	struct iod_io_buf *bufs; /* count buffers */
	uint32_t *free_stack;    /* free indexes */
	uint32_t free_n;         /* on the stack */
	uint32_t count;          /* buffers */
};

int iod_io_pool_init(struct iod_io_pool *p, uint32_t count);
void iod_io_pool_destroy(struct iod_io_pool *p);
/* A reset buffer (data at the headroom, len 0) or NULL when exhausted. */
struct iod_pkt *iod_io_pool_get(struct iod_io_pool *p);
/* Return a packet to the pool it came from. */
void iod_io_pkt_free(struct iod_pkt *pkt);

struct iod_io_port;

/* Per-port counters. */
struct iod_io_stats {
	uint64_t rx_packets; /* received */
	uint64_t rx_bytes;   /* received bytes */
	uint64_t tx_packets; /* sent */
	uint64_t tx_bytes;   /* sent bytes */
	uint64_t tx_errors;  /* could not be sent (dropped) */
	uint64_t rx_nobuf;   /* received but no buffer: dropped */
	uint64_t rx_gso;     /* afpacket vnet_hdr: super-frames received and segmented */
	uint64_t tx_gro;     /* afpacket vnet_hdr: coalesced super-frames sent */
};

/* What opening a port needs. Backends use the fields they know. */
struct iod_io_port_cfg {
	const char *backend;  /* "mem", "pcap", "afpacket", "dpdk" */
	const char *name;     /* for messages */
	const char *iface;    /* afpacket: interface name */
	const char *pcap_in;  /* pcap: file to read (NULL = tx only) */
	const char *pcap_out; /* pcap: file to write (NULL = rx only) */
	uint32_t pool_bufs;   /* buffers (0 = 4096) */
	uint32_t ring_blocks; /* afpacket: rx ring blocks (0 = IOD_IO_AFP_BLOCKS) */
	uint32_t retire_ms; /* afpacket: a partly filled block's wait (0 = IOD_IO_AFP_RETIRE_MS) */
	bool rx_recv;       /* afpacket: no ring, recvmmsg (no block retire wait: latency) */
	/* afpacket with rx_recv: PACKET_VNET_HDR, so the interface may keep
	 * GSO/TSO on: a TCP/IPv4 super-frame received is split into segments
	 * (src/net/gso.c), in-order segments of a flow sent are coalesced into
	 * one with a virtio-net header (GRO's job for the receiving stack) */
	bool vnet_hdr;
	/* afpacket with vnet_hdr: runs of UDP datagrams of one flow sent as one
	 * UDP_SEGMENT super-frame (gso UDP_L4; the switch's fabric port, so the
	 * underlay forwards one buffer per run). Off where the kernel cannot
	 * take UDP_L4 from a packet socket (before 6.2). */
	bool tx_udp_gso;
	uint32_t mem_capture; /* mem: transmitted frames kept for inspection (0 = none) */
};

/* The vtable a backend implements. */
struct iod_io_ops {
	const char *name; /* backend name */
	int (*open)(struct iod_io_port *p, const struct iod_io_port_cfg *cfg, struct iod_err *e);
	/* Up to n packets; waits at most timeout_ms (0 = poll). */
	uint32_t (*rx_burst)(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n,
	                     int timeout_ms);
	/* Sends and frees every packet (counting failures as tx_errors). */
	uint32_t (*tx_burst)(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n);
	void (*close)(struct iod_io_port *p);
	/* The descriptor to poll for rx (NULL or -1: none). */
	int (*fd)(const struct iod_io_port *p);
};

struct iod_io_port {
	const struct iod_io_ops *ops; /* backend */
	char name[IOD_NAME_MAX];      /* port name */
	struct iod_io_pool pool;      /* rx buffers */
	struct iod_io_stats stats;    /* counters */
	void *priv;                   /* backend state */
	bool eof;                     /* rx has no more packets (pcap file ended) */
};

/* Open a port with the named backend; -ENOENT for an unknown backend,
 * -ENOTSUP for one not built in. */
int iod_io_port_open(struct iod_io_port *p, const struct iod_io_port_cfg *cfg, struct iod_err *e);
void iod_io_port_close(struct iod_io_port *p);
/* The port's descriptor to poll for rx; -1 when it has none. */
int iod_io_port_fd(const struct iod_io_port *p);
/* A reading of the port's counters for telemetry (include/iod/obs.h):
 * name, kind (fabric | host | replica) and iface as given, at_ms the
 * reading's wall clock; drops are rx_nobuf (rx) and tx_errors (tx). */
struct iod_tel_port;
void iod_io_port_reading(const struct iod_io_port *p, const char *name, const char *kind,
                         const char *iface, uint64_t at_ms, struct iod_tel_port *out);
static inline uint32_t iod_io_rx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n,
                                 int timeout_ms)
{
	return p->ops->rx_burst(p, pkts, n, timeout_ms);
}
static inline uint32_t iod_io_tx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n)
{
	return p->ops->tx_burst(p, pkts, n);
}

/* mem backend: frames to receive, replayed in order (loop = forever). */
int iod_io_mem_load(struct iod_io_port *p, const uint8_t *const *frames, const uint32_t *lens,
                    uint32_t n, bool loop);
/* mem backend: the i-th captured transmitted frame (oldest first). */
int iod_io_mem_captured(const struct iod_io_port *p, uint32_t i, const uint8_t **frame,
                        uint32_t *len);
uint32_t iod_io_mem_captured_n(const struct iod_io_port *p);

/* The backends compiled into this binary ("mem pcap afpacket"). */
const char *iod_io_backends(void);

/* ---- benchmarks (shared by `iod dp bench` and bench/bench_dataplane.c) --- */

/* One measured figure. */
struct iod_io_bench_result {
	char scenario[32];    /* l2fwd, encap, decap, full, macswap */
	uint32_t flows;       /* distinct 5-tuples */
	uint32_t frame_bytes; /* tenant (inner) frame size */
	uint32_t wire_bytes;  /* size of the frames the port receives */
	uint64_t packets;     /* measured packets */
	uint64_t forwarded;   /* of which forwarded */
	double seconds;       /* CPU time of the measuring thread */
	double cpu_share;     /* CPU time / wall time: how much of the core the run got */
	double mpps;          /* packets / seconds / 1e6 */
	double ns_per_pkt;    /* 1e9 / packets per second */
	uint64_t cache_hits;  /* engine cache hits (fast path + exact + megaflow) during the run */
	uint64_t fp_hits;     /* of which compiled fast-path hits */
	uint64_t walks;       /* full pipe walks during the run */
};

/*
 * Run one scenario on one core over mem ports for about `seconds`
 * (after iod_io_bench_warm_passes() warm-up passes over every flow: the
 * first commits the sessions, the second compiles the flows). full: decap + SG + conntrack +
 * LB + encap through the overlay pipeline of iod_flow_dp_build(). Reads the
 * clock: a shell, not a core.
 */
int iod_io_bench_run(const char *scenario, uint32_t flows, uint32_t frame_bytes, double seconds,
                     struct iod_io_bench_result *r, struct iod_err *e);

/* The scenario on `cores` cores, RSS-style: each flow's frames go to one
 * core (a hash of the flow), each core runs its own engine state (the
 * pipeline's per-core caches, flow slots and conntrack, each sized for its
 * share) on its own thread and mem ports. total.mpps is the sum of the
 * cores' per-CPU-second rates; mpps_wall all packets over the wall time
 * the windows spanned (on a shared machine, what the cores really got).
 * Only "full" (and "macswap") run sharded. */
struct iod_io_bench_rss_result {
	uint32_t cores;
	struct iod_io_bench_result total;                        /* summed */
	struct iod_io_bench_result core[IOD_IO_BENCH_CORES_MAX]; /* per core */
	double mpps_wall;
};
int iod_io_bench_run_rss(const char *scenario, uint32_t flows, uint32_t frame_bytes, double seconds,
                         uint32_t cores, struct iod_io_bench_rss_result *r, struct iod_err *e);

/* IOD_BENCH_PACKETS: when set (> 0), iod_io_bench_run measures that many
 * packets (whole bursts) instead of `seconds`: a fixed count for callgrind
 * and cachegrind, whose counts are then per measured packet. */
uint64_t iod_io_bench_packets(void);

/* Warm-up passes of iod_io_bench_run: IOD_BENCH_WARM_PASSES (1..16),
 * default 2 (1 was the figure before; it left the compiling pass in). */
uint32_t iod_io_bench_warm_passes(void);

/* Conntrack at scale: insert `sessions` sessions into one table; report
 * bytes per session and new sessions per second. */
int iod_io_bench_ct(uint32_t sessions, double *bytes_per_session, double *new_per_s,
                    size_t *mem_bytes, struct iod_err *e);

/* ---- DPDK (linked into build/iod and the benchmarks only) -------------- */

/*
 * These live in src/io/dpdk/, which the Makefile links into build/iod and
 * bench programs but not into test programs (DPDK's constructors and its
 * 700 libraries would slow every sanitizer test and drown ASan's leak
 * report). They are weak here: check a function for NULL before calling.
 */

/* Initialise DPDK's EAL once: `--no-huge --no-pci --no-shconf -m 256` plus
 * one `--vdev` per comma-free name in vdevs ("net_null0 net_null1"), or the
 * whole argument string from IOD_DPDK_EAL when set. */
int iod_io_dpdk_init(const char *vdevs, struct iod_err *e) __attribute__((weak));

/* The offload state of a pipeline on one DPDK port. */
struct iod_io_offload;
/* Translate every live entry (iod_flow_offload_translate), validate each
 * expressible rule on the port with rte_flow_validate and create those the
 * port accepts; the rest stay in software with the reason. */
int iod_io_offload_create(struct iod_io_offload **out, const struct iod_flow_pipeline *pl,
                          const char *port_name, struct iod_err *e) __attribute__((weak));
/* iod_flow_offload_state_fn for iod_flow_dump_json (ctx = the offload). */
int iod_io_offload_state(void *ctx, uint32_t pipe, uint32_t entry, const char **reason)
    __attribute__((weak));
/* {port, template_api, rules, offloaded, software, validate_errors} as JSON. */
json_t *iod_io_offload_summary(const struct iod_io_offload *o) __attribute__((weak));
void iod_io_offload_destroy(struct iod_io_offload *o) __attribute__((weak));

/* The bare DPDK loop the data plane is compared with: rx a burst on
 * net_null0, swap MACs, tx on net_null1, for `seconds` of this thread's CPU
 * time; the rate is per CPU-second, as the other figures. */
int iod_io_dpdk_bench_macswap(double seconds, double *mpps, struct iod_err *e)
    __attribute__((weak));

/* ---- the data plane's run loop (src/io/dploop.c) ------------------------ */

/*
 * One data plane: its pipeline and adaptive routing (src/flow/), its host
 * and fabric ports. `iod dp run`, the tests and the benchmark drive it one
 * turn at a time: the loop never reads the clock (now_ns comes in) and
 * never sleeps except in iod_dp_loop_idle.
 */
/* A replica port's binding and what it refused, per verdict (kept by the
 * switch across pipeline rebuilds). */
struct iod_dp_port_guard {
	struct iod_net_spoof_bind bind;    /* its replica's address and MAC */
	uint64_t dropped[IOD_NET_SPOOF_N]; /* [verdict]: frames dropped ([OK] stays 0) */
};

struct iod_dp_loop {
	struct iod_flow_dp *dp;    /* the pipeline and conntrack (borrowed) */
	struct iod_flow_dp_ar *ar; /* adaptive routing; NULL = none (borrowed) */
	struct iod_io_port *ports; /* [IOD_DP_PORT_HOST], [IOD_DP_PORT_FABRIC] (borrowed) */
	bool live;                 /* a port is a live interface (not mem/pcap) */
	uint16_t idle_port;        /* the port iod_dp_loop_idle waits on */
	uint64_t last_tick_ns;     /* last adaptive-routing tick */
	uint64_t rx_packets;       /* received, all turns */
	uint64_t rss_packets;      /* RSS verdicts (no local stack queues here) */
	/* a virtual switch (the agent's, src/agent/vswitch.c): the host side is
	 * many ports, one per local endpoint; a packet the pipeline sends to
	 * the host port leaves on the one whose MAC is its destination */
	struct iod_io_port *const *host_ports; /* host_n ports (borrowed); NULL = ports[0] */
	const uint8_t (*host_macs)[6];         /* the MAC behind each */
	uint32_t host_n;                       /* how many */
	uint64_t host_unknown;                 /* to the host side, no port with its MAC */
	/* anti-spoofing (src/net/spoof.c): [i] binds host_ports[i] to its
	 * replica's address and MAC; NULL (or a NULL entry: the host stack's
	 * port, which sends from the gateway and the VIPs) = not checked */
	struct iod_dp_port_guard *const *host_guards;
	uint64_t spoofed; /* frames anti-spoofing dropped, all ports */
	/* each of them, before it is freed: host port i, its verdict; NULL = none */
	void (*on_spoof)(void *ctx, uint32_t host_port, const struct iod_pkt *p,
	                 enum iod_net_spoof_verdict v);
	/* each packet the pipeline dropped, before it is freed (the agent's
	 * drop records); NULL = none; set after iod_dp_loop_init */
	void (*on_drop)(void *ctx, const struct iod_pkt *p);
	void *on_drop_ctx; /* its argument */
};

/* Bind dp, ar (may be NULL) and the two open ports; live and idle_port
 * from the ports' backends. */
void iod_dp_loop_init(struct iod_dp_loop *l, struct iod_flow_dp *dp, struct iod_flow_dp_ar *ar,
                      struct iod_io_port *ports);
/*
 * One turn at now_ns: a burst from each port (probes from the fabric
 * answered or consumed first), the pipeline, adaptive-routing steering,
 * transmit by verdict with mirrors copied; the adaptive-routing tick (every
 * ms) and its probes; the maintenance budgets (IOD_DP_LOOP_*_BUDGET).
 * Returns the packets received this turn.
 */
uint32_t iod_dp_loop_step(struct iod_dp_loop *l, uint64_t now_ns);
/* Make the host side ports[0..n) (each behind macs[i]); n 0 = ports[0]
 * alone again. Takes effect at the next turn. */
void iod_dp_loop_set_host_ports(struct iod_dp_loop *l, struct iod_io_port *const *ports,
                                const uint8_t (*macs)[6], uint32_t n);
/* Bind host port i to guards[i] (NULL entries unchecked), for the ports of
 * the last iod_dp_loop_set_host_ports; NULL = none checked. */
void iod_dp_loop_set_host_guards(struct iod_dp_loop *l, struct iod_dp_port_guard *const *guards);
/* Nothing came in: wait for one frame on the live port (at most 1 ms with
 * adaptive routing, else 5 ms) and run it at the time after the wait (the
 * shell's clock, iod_clock_now_ns). Returns 0 or 1. */
uint32_t iod_dp_loop_idle(struct iod_dp_loop *l);
/* Every port has reached the end of its input (mem and pcap only). */
bool iod_dp_loop_done(const struct iod_dp_loop *l);

#endif
