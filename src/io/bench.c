/*
 * bench.c: the data-plane benchmark scenarios shared by `iod dp bench` and
 * bench/bench_dataplane.c: frames for N flows, a pipeline per scenario, and
 * a one-core loop rx (mem) -> iod_flow_burst -> tx (mem), timed.
 *
 * The mem port replays frames by rewriting their first 128 bytes into a
 * pool buffer (the payload behind them is the same for every flow and is
 * never modified), as a NIC's DMA would deliver them without CPU copies.
 * This file reads the clock: it is a shell, never called by a core.
 */
#include "iod/io.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Under callgrind the measured window is marked (the counts are zeroed when
 * it opens and dumped when it closes), so instructions and simulated cache
 * misses per measured packet need no warm-up subtraction. */
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define BENCH_MARK_START() CALLGRIND_ZERO_STATS
#define BENCH_MARK_END() CALLGRIND_DUMP_STATS_AT("measured")
#endif
#endif
#ifndef BENCH_MARK_START
#define BENCH_MARK_START() ((void)0)
#define BENCH_MARK_END() ((void)0)
#endif

/* CPU time of this thread: on a shared machine the core is not ours all the
 * time; rates are packets per CPU-second of the one core that did the work. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * IOD_NS_PER_S + (uint64_t)ts.tv_nsec;
}

static const uint8_t VTEP_MAC[6] = {0x02, 0, 0, 0, 0xaa, 0x01};
static const uint8_t PEER_MAC[6] = {0x02, 0, 0, 0, 0xaa, 0x02};

#define BENCH_VTEP 0x0a0a0001u /* 10.10.0.1 */
#define BENCH_PEER 0x0a0a0002u /* 10.10.0.2 */
#define BENCH_VIP 0xc0a80064u  /* 192.168.0.100 */
#define BENCH_BACKENDS 4u
#define BENCH_VNI 100u

/* The inner frame of flow i: client 192.168.16.0/20.. -> dst:dport, UDP. */
static int inner_frame(uint32_t i, uint32_t dst, uint16_t dport, uint32_t bytes, uint8_t *out,
                       uint32_t cap)
{
	struct iod_net_pkt_spec s = {0};
	memcpy(s.dst_mac, VTEP_MAC, 6);
	memcpy(s.src_mac, PEER_MAC, 6);
	s.t.family = IOD_NET_AF_V4;
	s.t.proto = IOD_NET_PROTO_UDP;
	s.t.src.v4 = 0xc0a80000u + 0x1000u + (i >> 14); /* 192.168.16.0 + i/16384 */
	s.t.sport = (uint16_t)(1024 + (i & 16383));
	s.t.dst.v4 = dst;
	s.t.dport = dport;
	s.frame_bytes = (uint16_t)bytes;
	return iod_net_pkt_build(&s, out, cap);
}

static const struct iod_net_vxlan_tunnel *bench_tunnel(void)
{
	static struct iod_net_vxlan_tunnel t;
	memcpy(t.outer_dst_mac, VTEP_MAC, 6);
	memcpy(t.outer_src_mac, PEER_MAC, 6);
	t.outer_src_ip = BENCH_PEER;
	t.outer_dst_ip = BENCH_VTEP;
	t.vni = BENCH_VNI;
	t.udp_csum = false;
	return &t;
}

/* The overlay config of the full scenario. */
static struct iod_flow_dp_config *full_config(uint32_t flows)
{
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->vtep_ip = BENCH_VTEP;
	memcpy(c->vtep_mac, VTEP_MAC, 6);
	memcpy(c->underlay_gw_mac, PEER_MAC, 6);
	c->udp_csum = false;
	c->ct_sessions = flows * 2 + 1024;
	uint32_t slots = 8192;
	while (slots < flows * 2 && slots < IOD_FLOW_EMC_SLOTS_MAX)
		slots <<= 1;
	c->emc_slots = slots;
	c->networks_n = 1;
	struct iod_flow_dp_network *n = &c->networks[0];
	snprintf(n->name, sizeof(n->name), "blue");
	n->vni = BENCH_VNI;
	n->subnet = 0xc0a80000u;
	n->prefix_len = 16;
	n->gateway = 0xc0a80001u;
	n->sg = 0;
	c->sgs_n = 1;
	struct iod_net_sg_rule r;
	snprintf(c->sgs[0].name, sizeof(c->sgs[0].name), "web");
	iod_net_sg_rule_parse("tcp 0.0.0.0/0 22", false, &r, NULL);
	iod_net_sg_add(&c->sgs[0], &r);
	iod_net_sg_rule_parse("udp 192.168.0.0/16 80", false, &r, NULL);
	iod_net_sg_add(&c->sgs[0], &r);
	c->services_n = 1;
	c->services[0].network = 0;
	iod_net_lb_service_init(&c->services[0].lb, "api", BENCH_VIP, 80, IOD_NET_PROTO_UDP);
	for (uint32_t b = 0; b < BENCH_BACKENDS; b++) {
		iod_net_lb_backend_add(&c->services[0].lb, 0xc0a80100u + b + 1, 8080, 1);
		struct iod_flow_dp_endpoint *ep = &n->endpoints[n->endpoints_n++];
		ep->ip = 0xc0a80100u + b + 1;
		ep->vtep_ip = BENCH_PEER + 1 + b;
	}
	return c;
}

/* Build the pipeline of a simple scenario. */
static int simple_pipeline(const char *sc, struct iod_flow_pipeline **pl, struct iod_err *e)
{
	struct iod_flow_pipeline_cfg pc = {.cores = 1, .ports = 2};
	int rc = iod_flow_pipeline_create(pl, &pc, e);
	if (rc)
		return rc;
	struct iod_flow_pipe_cfg p = {
	    .kind = IOD_FLOW_PIPE_BASIC, .is_root = true, .port = 0, .entries_max = 16};
	p.fwd = (struct iod_flow_fwd){.type = IOD_FLOW_FWD_PORT, .port = 1};
	p.fwd_miss = (struct iod_flow_fwd){.type = IOD_FLOW_FWD_DROP};
	p.monitor.flags = IOD_FLOW_MON_COUNT;
	struct iod_flow_entry_cfg ec = {0};
	if (!strcmp(sc, "l2fwd")) {
		snprintf(p.name, sizeof(p.name), "l2fwd");
		p.mask.in_port = 0xffffffff;
		p.actions.flags = IOD_FLOW_ACT_MAC_SWAP;
	} else if (!strcmp(sc, "encap")) {
		snprintf(p.name, sizeof(p.name), "encap");
		p.mask.dst.v4 = 0xffffffff;
		ec.match.dst.v4 = BENCH_VIP;
		ec.actions.flags = IOD_FLOW_ACT_ENCAP;
		ec.actions.encap = *bench_tunnel();
	} else {
		snprintf(p.name, sizeof(p.name), "decap");
		p.mask.vni = 0xffffff;
		p.mask.outer_dst_ip = 0xffffffff;
		ec.match.vni = BENCH_VNI;
		ec.match.outer_dst_ip = BENCH_VTEP;
		ec.actions.flags = IOD_FLOW_ACT_DECAP;
	}
	if ((rc = iod_flow_pipe_create(*pl, &p, e)) < 0)
		return rc;
	if ((rc = iod_flow_entry_add(*pl, 0, &ec, NULL, NULL)))
		return iod_err_set(e, rc, "bench: entry");
	iod_flow_entries_process(*pl, 0, 0);
	return 0;
}

uint64_t iod_io_bench_packets(void)
{
	const char *s = getenv("IOD_BENCH_PACKETS");
	unsigned long long v = s ? strtoull(s, NULL, 10) : 0;
	return v;
}

uint32_t iod_io_bench_warm_passes(void)
{
	const char *s = getenv("IOD_BENCH_WARM_PASSES");
	long v = s ? strtol(s, NULL, 10) : 2;
	return v >= 1 && v <= 16 ? (uint32_t)v : 2;
}

/* One core's share of a run: its ports, its window, what it measured. */
struct lane {
	struct iod_flow_pipeline *pl; /* NULL: macswap */
	uint32_t core;                /* the engine core it runs */
	struct iod_io_port rx, tx;    /* its own mem ports (its RSS queue) */
	uint16_t in_port;             /* port_in of its packets */
	uint64_t warm;                /* packets before the window opens */
	double seconds;               /* window: CPU seconds of this thread */
	uint64_t count;               /* window: packets instead (0 = timed) */
	bool mark;                    /* callgrind markers around the window */
	/* Sharded runs: every lane warms up, then the windows open together
	 * (go), and a lane whose window closed keeps its load on until every
	 * lane's has (done), so no window runs on an idle neighbour. */
	atomic_uint *ready, *go, *done;
	uint32_t lanes;
	/* results */
	uint64_t packets, fwd;               /* in the window */
	uint64_t after_go;                   /* every packet after go (sharded: fast-path share) */
	uint64_t cpu_ns, wall_ns;            /* the window */
	uint64_t wall0, wall1;               /* its wall-clock bounds */
	struct iod_flow_engine_stats s0, s1; /* single lane: around the window */
};

static void lane_run(struct lane *L)
{
	struct iod_pkt *pkts[IOD_FLOW_BURST_MAX], *out[IOD_FLOW_BURST_MAX];
	uint64_t now = iod_clock_now_ns(), start = 0, wall0 = 0, warm = L->warm;
	/* A counted run (IOD_BENCH_PACKETS, for callgrind) gives the engine a
	 * clock of 1 us a burst: under an instrumented run's 50x slowdown the
	 * real one let the sessions' 30 s UDP timeout expire during the warm-up,
	 * and the counts depended on how loaded the machine was. */
	uint64_t fake_now = now;
	bool measuring = false, closed = false;
	for (uint64_t iter = 0;; iter++) {
		uint32_t n = iod_io_rx(&L->rx, pkts, IOD_FLOW_BURST_MAX, 0), k = 0;
		for (uint32_t i = 0; i < n; i++)
			pkts[i]->port_in = L->in_port;
		if (!L->pl) {
			for (uint32_t i = 0; i < n; i++) {
				iod_net_mac_swap(pkts[i]->data);
				out[k++] = pkts[i];
			}
		} else {
			iod_flow_burst(L->pl, L->core, pkts, n, L->count ? fake_now : now);
			fake_now += 1000;
			for (uint32_t i = 0; i < n; i++) {
				if (pkts[i]->verdict == IOD_FLOW_V_PORT)
					out[k++] = pkts[i];
				else
					iod_io_pkt_free(pkts[i]);
			}
		}
		iod_io_tx(&L->tx, out, k);
		if (closed) {
			L->after_go += n;
			if (atomic_load(L->done) >= L->lanes)
				break;
			continue;
		}
		if (measuring) {
			L->packets += n;
			L->fwd += k;
			L->after_go += n;
		} else if (warm > n) {
			warm -= n;
		} else {
			if (L->go) { /* sharded: open the windows together */
				atomic_fetch_add(L->ready, 1);
				while (!atomic_load(L->go))
					;
			} else if (L->pl) {
				iod_flow_engine_stats(L->pl, &L->s0);
			}
			measuring = true;
			start = cpu_ns();
			wall0 = iod_clock_now_ns();
			if (L->mark)
				BENCH_MARK_START();
		}
		bool stop = false;
		if (L->count && measuring && L->packets >= L->count)
			stop = true;
		if ((iter & 63) == 0) {
			now = iod_clock_now_ns();
			if (!L->count && measuring &&
			    cpu_ns() - start >= (uint64_t)(L->seconds * 1e9))
				stop = true;
		}
		if (stop) {
			if (L->mark)
				BENCH_MARK_END();
			L->cpu_ns = cpu_ns() - start;
			L->wall1 = iod_clock_now_ns();
			L->wall0 = wall0;
			L->wall_ns = L->wall1 - wall0;
			if (!L->go) {
				if (L->pl)
					iod_flow_engine_stats(L->pl, &L->s1);
				break;
			}
			closed = true;
			atomic_fetch_add(L->done, 1);
		}
	}
}

static void *lane_thread(void *arg)
{
	struct lane *L = arg;
	/* one RSS queue per core: pin the lane to it (best effort) */
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(L->core % (uint32_t)CPU_SETSIZE, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	lane_run(L);
	return NULL;
}

/* The core a flow's frames go to: an RSS hash of the flow, independent of
 * the hashes the engine's tables index by (a low bit shared with them would
 * leave half of each core's conntrack index empty). */
static uint32_t rss_core(const uint8_t *f, uint32_t len, uint32_t cores)
{
	struct iod_net_meta m;
	if (cores < 2 || iod_net_parse(f, len, 0, &m))
		return 0;
	return (uint32_t)((iod_hash_u64((uint64_t)m.hash ^ 0x5bd1e995u) >> 32) % cores);
}

static void result_fill(struct iod_io_bench_result *r, const struct lane *L)
{
	r->packets = L->packets;
	r->forwarded = L->fwd;
	r->seconds = (double)L->cpu_ns / 1e9;
	r->mpps = r->seconds > 0 ? (double)L->packets / r->seconds / 1e6 : 0;
	r->ns_per_pkt = L->packets ? (double)L->cpu_ns / (double)L->packets : 0;
	r->cpu_share = L->wall_ns ? (double)L->cpu_ns / (double)L->wall_ns : 0;
}

/* A scenario on `cores` lanes (1: this thread; more: one thread per core,
 * the flows sharded by rss_core); res[0..cores) per lane, *all the sum. */
static int bench_run(const char *scenario, uint32_t flows, uint32_t frame_bytes, double seconds,
                     uint32_t cores, struct iod_io_bench_result *res,
                     struct iod_io_bench_result *all, double *wall_mpps, struct iod_err *e)
{
	bool full = !strcmp(scenario, "full"), macswap = !strcmp(scenario, "macswap");
	bool tunnelled_in = full || !strcmp(scenario, "decap");
	struct iod_flow_pipeline *pl = NULL;
	struct iod_flow_dp dp = {0};
	struct iod_flow_dp_config *cfg = NULL;
	struct lane *lanes = NULL;
	uint8_t **frames = NULL;
	uint32_t *lens = NULL, *lane_of = NULL;
	const uint8_t **lf = NULL;
	uint32_t *ll = NULL;
	int rc = 0;

	if (strcmp(scenario, "l2fwd") && strcmp(scenario, "encap") && strcmp(scenario, "decap") &&
	    !full && !macswap)
		return iod_err_set(e, -EINVAL,
		                   "unknown scenario \"%s\": l2fwd, encap, decap, full or macswap",
		                   scenario);
	if (!flows || flows > (1u << 24) || frame_bytes < 60 || frame_bytes > 1500)
		return iod_err_set(e, -EINVAL, "flows must be 1..16M and the frame 60..1500 bytes");
	if (!cores || cores > IOD_IO_BENCH_CORES_MAX)
		return iod_err_set(e, -EINVAL, "cores must be 1..%u", IOD_IO_BENCH_CORES_MAX);
	for (uint32_t c = 0; c <= cores; c++) {
		struct iod_io_bench_result *r = c < cores ? &res[c] : all;
		memset(r, 0, sizeof(*r));
		snprintf(r->scenario, sizeof(r->scenario), "%s", scenario);
		r->frame_bytes = frame_bytes;
		r->wire_bytes = frame_bytes + (tunnelled_in ? IOD_NET_VXLAN_OVERHEAD : 0);
	}
	all->flows = flows;

	frames = calloc(flows, sizeof(uint8_t *));
	lens = calloc(flows, sizeof(uint32_t));
	lane_of = calloc(flows, sizeof(uint32_t));
	lf = calloc(flows, sizeof(uint8_t *));
	ll = calloc(flows, sizeof(uint32_t));
	lanes = calloc(cores, sizeof(*lanes));
	if (!frames || !lens || !lane_of || !lf || !ll || !lanes) {
		rc = iod_err_set(e, -ENOMEM, "bench: out of memory for %u flows", flows);
		goto out;
	}
	uint32_t per_lane_max = 0;
	for (uint32_t i = 0; i < flows; i++) {
		uint8_t buf[IOD_IO_FRAME_MAX];
		int n = inner_frame(i, BENCH_VIP, 80, frame_bytes, buf + 64, sizeof(buf) - 64);
		if (n < 0) {
			rc = iod_err_set(e, n, "bench: cannot build frames");
			goto out;
		}
		uint8_t *f = buf + 64;
		uint32_t len = (uint32_t)n;
		if (tunnelled_in) {
			struct iod_net_meta m;
			iod_net_parse(f, len, 0, &m);
			iod_net_vxlan_encap(&f, &len, 64, bench_tunnel(), m.hash, 0);
		}
		frames[i] = malloc(len);
		if (!frames[i]) {
			rc = iod_err_set(e, -ENOMEM, "bench: out of memory");
			goto out;
		}
		memcpy(frames[i], f, len);
		lens[i] = len;
		lane_of[i] = rss_core(f, len, cores);
		res[lane_of[i]].flows++;
		per_lane_max = IOD_MAX(per_lane_max, res[lane_of[i]].flows);
	}
	uint16_t in_port = 0;
	if (full) {
		/* each core's tables sized for its share, as for one core alone */
		cfg = full_config(per_lane_max);
		if (!cfg) {
			rc = iod_err_set(e, -ENOMEM, "bench: out of memory");
			goto out;
		}
		if ((rc = iod_flow_dp_build(cfg, cores, &dp, e)))
			goto out;
		pl = dp.pl;
		in_port = IOD_DP_PORT_FABRIC;
	} else if (!macswap) {
		if (cores > 1) {
			rc = iod_err_set(e, -EINVAL, "bench: only the full scenario runs sharded");
			goto out;
		}
		if ((rc = simple_pipeline(scenario, &pl, e)))
			goto out;
	}
	atomic_uint ready = 0, go = 0, done = 0;
	for (uint32_t c = 0; c < cores; c++) {
		struct lane *L = &lanes[c];
		uint32_t k = 0;
		for (uint32_t i = 0; i < flows; i++)
			if (lane_of[i] == c) {
				lf[k] = frames[i];
				ll[k++] = lens[i];
			}
		struct iod_io_port_cfg rc_cfg = {.backend = "mem", .name = "rx", .pool_bufs = 1024};
		struct iod_io_port_cfg tc_cfg = {.backend = "mem", .name = "tx", .pool_bufs = 16};
		if ((rc = iod_io_port_open(&L->rx, &rc_cfg, e)) ||
		    (rc = iod_io_port_open(&L->tx, &tc_cfg, e)))
			goto out;
		if ((rc = iod_io_mem_load(&L->rx, lf, ll, k, true))) {
			iod_err_set(e, rc, "bench: cannot load frames");
			goto out;
		}
		L->pl = pl;
		L->core = c;
		L->in_port = in_port;
		/* Warm-up: passes over every flow of the lane, then the steady
		 * state: the first pass commits the sessions (NEW), the second
		 * compiles each flow for the fast path (its session is established
		 * only then). One pass left the compiling pass inside the window:
		 * at 1 M flows that was a third of a 1 s figure. */
		L->warm = (uint64_t)k * iod_io_bench_warm_passes();
		L->seconds = seconds;
		L->count = iod_io_bench_packets() / cores;
		L->mark = cores == 1;
		L->lanes = cores;
		if (cores > 1) {
			L->ready = &ready;
			L->go = &go;
			L->done = &done;
		}
	}
	struct iod_flow_engine_stats s0 = {0}, s1 = {0};
	if (cores == 1) {
		lane_run(&lanes[0]);
		s0 = lanes[0].s0;
		s1 = lanes[0].s1;
	} else {
		pthread_t th[IOD_IO_BENCH_CORES_MAX];
		uint32_t started = 0;
		for (; started < cores; started++)
			if (pthread_create(&th[started], NULL, lane_thread, &lanes[started]))
				break;
		if (started == cores) {
			while (atomic_load(&ready) < cores)
				sched_yield();
			if (pl)
				iod_flow_engine_stats(pl, &s0);
			atomic_store(&go, 1);
		} else {
			rc = iod_err_set(e, -EAGAIN, "bench: cannot start the lane threads");
			atomic_store(&go, 1);
			atomic_store(&done, cores);
		}
		for (uint32_t c = 0; c < started; c++)
			pthread_join(th[c], NULL);
		if (rc)
			goto out;
		if (pl)
			iod_flow_engine_stats(pl, &s1);
	}
	uint64_t after = 0, w0 = UINT64_MAX, w1 = 0;
	for (uint32_t c = 0; c < cores; c++) {
		struct lane *L = &lanes[c];
		result_fill(&res[c], L);
		all->packets += L->packets;
		all->forwarded += L->fwd;
		all->mpps += res[c].mpps;
		all->seconds += res[c].seconds;
		all->cpu_share += res[c].cpu_share / cores;
		after += cores == 1 ? L->packets : L->after_go;
		w0 = IOD_MIN(w0, L->wall0);
		w1 = IOD_MAX(w1, L->wall1);
	}
	all->ns_per_pkt = all->mpps > 0 ? 1000.0 / all->mpps : 0;
	*wall_mpps = w1 > w0 ? (double)all->packets / ((double)(w1 - w0) / 1e9) / 1e6 : 0;
	/* the engine's counters over the windows (sharded: from go to the
	 * last window's close, so scaled by the packets of that span) */
	double scale = after ? (double)all->packets / (double)after : 0;
	all->cache_hits = (uint64_t)((double)(s1.emc_hits - s0.emc_hits + s1.mf_hits - s0.mf_hits +
	                                      s1.fp_hits - s0.fp_hits) *
	                             scale);
	all->walks = (uint64_t)((double)(s1.walks - s0.walks) * scale);
	all->fp_hits = (uint64_t)((double)(s1.fp_hits - s0.fp_hits) * scale);
	if (all->forwarded < all->packets * 99 / 100)
		rc = iod_err_set(
		    e, -EPROTO,
		    "bench %s: only %llu of %llu packets were forwarded: the scenario's "
		    "pipeline is wrong",
		    scenario, (unsigned long long)all->forwarded, (unsigned long long)all->packets);
out:
	for (uint32_t c = 0; lanes && c < cores; c++) {
		if (lanes[c].rx.ops)
			iod_io_port_close(&lanes[c].rx);
		if (lanes[c].tx.ops)
			iod_io_port_close(&lanes[c].tx);
	}
	if (full)
		iod_flow_dp_destroy(&dp);
	else if (pl)
		iod_flow_pipeline_destroy(pl);
	if (cfg) {
		iod_flow_dp_config_free(cfg);
		free(cfg);
	}
	for (uint32_t i = 0; frames && i < flows; i++)
		free(frames[i]);
	free(frames);
	free(lens);
	free(lane_of);
	free(lf);
	free(ll);
	free(lanes);
	return rc;
}

int iod_io_bench_run(const char *scenario, uint32_t flows, uint32_t frame_bytes, double seconds,
                     struct iod_io_bench_result *r, struct iod_err *e)
{
	struct iod_io_bench_result lane;
	double wall;
	return bench_run(scenario, flows, frame_bytes, seconds, 1, &lane, r, &wall, e);
}

int iod_io_bench_run_rss(const char *scenario, uint32_t flows, uint32_t frame_bytes, double seconds,
                         uint32_t cores, struct iod_io_bench_rss_result *r, struct iod_err *e)
{
	memset(r, 0, sizeof(*r));
	r->cores = cores;
	return bench_run(scenario, flows, frame_bytes, seconds, cores, r->core, &r->total,
	                 &r->mpps_wall, e);
}

int iod_io_bench_ct(uint32_t sessions, double *bytes_per_session, double *new_per_s,
                    size_t *mem_bytes, struct iod_err *e)
{
	struct iod_net_ct *ct;
	int rc = iod_net_ct_create(&ct, sessions, NULL);
	if (rc)
		return iod_err_set(e, rc, "conntrack for %u sessions: %s", sessions, strerror(-rc));
	/* Touch the memory first so page faults are not counted as inserts. */
	uint64_t t0 = cpu_ns();
	struct iod_net_tuple t = {0};
	t.family = IOD_NET_AF_V4;
	t.proto = IOD_NET_PROTO_UDP;
	t.dst.v4 = BENCH_VIP;
	t.dport = 80;
	for (uint32_t i = 0; i < sessions; i++) {
		/* New sessions arrive in bursts: prefetch the index slots (both
		 * directions) a few sessions ahead, as the burst path does. */
		uint32_t a = i + 8;
		struct iod_net_tuple ahead = t, back;
		ahead.src.v4 = 0x0a000000u + (a >> 14);
		ahead.sport = (uint16_t)(1024 + (a & 16383));
		iod_net_tuple_reverse(&ahead, &back);
		iod_net_ct_prefetch(ct, iod_net_tuple_hash(&ahead));
		iod_net_ct_prefetch(ct, iod_net_tuple_hash(&back));
		t.src.v4 = 0x0a000000u + (i >> 14);
		t.sport = (uint16_t)(1024 + (i & 16383));
		if ((rc = iod_net_ct_commit(ct, &t, 0, NULL, 0, 0, NULL))) {
			iod_net_ct_destroy(ct);
			return iod_err_set(e, rc, "conntrack insert %u failed: %s", i,
			                   strerror(-rc));
		}
	}
	uint64_t t1 = cpu_ns();
	*mem_bytes = iod_net_ct_mem_bytes(ct);
	*bytes_per_session = (double)*mem_bytes / sessions;
	*new_per_s = (double)sessions / ((double)(t1 - t0) / 1e9);
	iod_net_ct_destroy(ct);
	return 0;
}
