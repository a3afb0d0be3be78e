/*
 * dploop.c: the data plane's one run loop (include/iod/io.h), a turn at a
 * time: receive a burst per port, let adaptive routing take its probes,
 * run the pipeline, steer, transmit by verdict and copy mirrors, then the
 * bounded maintenance (entry queue, aging, conntrack expiry).
 *
 * `iod dp run` drives it with the monotonic clock, tests with their own
 * time. A turn never reads the clock (its time comes in); only
 * iod_dp_loop_idle blocks, for a bounded wait on a live port, and reads
 * the clock after the wait. The packet path does not
 * allocate: mirrors take a buffer from the receiving port's pool.
 */
#include "iod/io.h"

#include <string.h>

void iod_dp_loop_init(struct iod_dp_loop *l, struct iod_flow_dp *dp, struct iod_flow_dp_ar *ar,
                      struct iod_io_port *ports)
{
	IOD_ASSERT(dp && ports && ports[0].ops && ports[1].ops);
	memset(l, 0, sizeof(*l));
	l->dp = dp;
	l->ar = ar;
	l->ports = ports;
	for (int i = 0; i < 2; i++)
		l->live |= strcmp(ports[i].ops->name, "mem") && strcmp(ports[i].ops->name, "pcap");
	/* the port a standalone dp waits on: the host's afpacket, else the fabric */
	l->idle_port = strcmp(ports[IOD_DP_PORT_HOST].ops->name, "afpacket") ? IOD_DP_PORT_FABRIC
	                                                                     : IOD_DP_PORT_HOST;
}

void iod_dp_loop_set_host_ports(struct iod_dp_loop *l, struct iod_io_port *const *ports,
                                const uint8_t (*macs)[6], uint32_t n)
{
	IOD_ASSERT(!n || (ports && macs));
	l->host_ports = n ? ports : NULL;
	l->host_macs = n ? macs : NULL;
	l->host_n = n;
}

void iod_dp_loop_set_host_guards(struct iod_dp_loop *l, struct iod_dp_port_guard *const *guards)
{
	l->host_guards = guards;
}

/* Anti-spoofing of host port i's burst (src/net/spoof.c): what its
 * binding refuses is counted, handed to on_spoof and freed before the
 * pipeline sees it. Returns the packets kept, in order. */
static uint32_t guard_burst(struct iod_dp_loop *l, uint32_t i, struct iod_pkt **pkts, uint32_t n)
{
	struct iod_dp_port_guard *g = l->host_guards ? l->host_guards[i] : NULL;
	if (!g)
		return n;
	uint32_t keep = 0;
	for (uint32_t k = 0; k < n; k++) {
		enum iod_net_spoof_verdict v =
		    iod_net_spoof_check(&g->bind, pkts[k]->data, pkts[k]->len);
		if (IOD_LIKELY(v == IOD_NET_SPOOF_OK)) {
			pkts[keep++] = pkts[k];
			continue;
		}
		g->dropped[v]++;
		l->spoofed++;
		if (l->on_spoof)
			l->on_spoof(l->on_drop_ctx, i, pkts[k], v);
		iod_io_pkt_free(pkts[k]);
	}
	return keep;
}

/* The host-side port behind a frame's destination MAC; NULL = none. */
static struct iod_io_port *host_port_of(struct iod_dp_loop *l, const uint8_t *frame)
{
	for (uint32_t i = 0; i < l->host_n; i++)
		if (!memcmp(l->host_macs[i], frame, 6))
			return l->host_ports[i];
	return NULL;
}

/* Host-side packets of a virtual switch: each to its destination's port,
 * in runs of one port (a burst to one replica stays one send loop). */
static void dispatch_host(struct iod_dp_loop *l, struct iod_pkt **pkts, uint32_t n)
{
	for (uint32_t i = 0; i < n;) {
		struct iod_io_port *p = host_port_of(l, pkts[i]->data);
		uint32_t j = i + 1;
		while (j < n && p && host_port_of(l, pkts[j]->data) == p)
			j++;
		if (p) {
			iod_io_tx(p, pkts + i, j - i);
		} else {
			l->host_unknown++;
			iod_io_pkt_free(pkts[i]);
		}
		i = j;
	}
}

/* Transmit a burst's packets by verdict; mirrors are copied. */
static void dispatch(struct iod_dp_loop *l, struct iod_pkt **pkts, uint32_t n)
{
	struct iod_pkt *out[2][IOD_FLOW_BURST_MAX * 2];
	uint32_t k[2] = {0, 0};
	IOD_ASSERT_HOT(n <= IOD_FLOW_BURST_MAX);
	for (uint32_t i = 0; i < n; i++) {
		struct iod_pkt *p = pkts[i];
		if (p->mirror_port < 2 && p->verdict != IOD_FLOW_V_DROP) {
			struct iod_pkt *c = iod_io_pool_get(p->io);
			if (c && p->len <= IOD_IO_FRAME_MAX) {
				memcpy(c->data, p->data, p->len);
				c->len = p->len;
				out[p->mirror_port][k[p->mirror_port]++] = c;
			} else if (c) {
				iod_io_pkt_free(c);
			}
		}
		if (p->verdict == IOD_FLOW_V_PORT && p->port_out < 2) {
			out[p->port_out][k[p->port_out]++] = p;
		} else {
			if (p->verdict == IOD_FLOW_V_RSS)
				l->rss_packets++; /* no local stack queues in a standalone dp */
			else if (p->verdict == IOD_FLOW_V_DROP && l->on_drop)
				l->on_drop(l->on_drop_ctx, p);
			iod_io_pkt_free(p);
		}
	}
	if (k[IOD_DP_PORT_HOST] && l->host_n) {
		dispatch_host(l, out[IOD_DP_PORT_HOST], k[IOD_DP_PORT_HOST]);
		k[IOD_DP_PORT_HOST] = 0;
	}
	for (int port = 0; port < 2; port++)
		if (k[port])
			iod_io_tx(&l->ports[port], out[port], k[port]);
}

/*
 * One received burst: probes from the fabric are answered or consumed
 * first (adaptive routing), the rest go through the pipeline, then the
 * encapsulated ones get their outer source port.
 */
static void run_burst(struct iod_dp_loop *l, struct iod_pkt **pkts, uint32_t n, uint64_t now)
{
	if (l->ar && n && pkts[0]->port_in == IOD_DP_PORT_FABRIC) {
		struct iod_pkt *probes[IOD_FLOW_BURST_MAX];
		uint32_t keep = 0, np = 0;
		for (uint32_t k = 0; k < n; k++) {
			if (iod_flow_dp_ar_rx(l->ar, pkts[k], now))
				probes[np++] = pkts[k];
			else
				pkts[keep++] = pkts[k];
		}
		if (np)
			dispatch(l, probes, np);
		n = keep;
	}
	if (!n)
		return;
	iod_flow_burst(l->dp->pl, 0, pkts, n, now);
	if (l->ar)
		iod_flow_dp_ar_steer(l->ar, pkts, n, now);
	dispatch(l, pkts, n);
}

/* Send the probes the AR cores asked for on the fabric port. */
static void send_probes(struct iod_flow_dp_ar *ar, struct iod_io_port *fabric)
{
	struct iod_pkt *out[IOD_FLOW_BURST_MAX];
	uint32_t k = 0;
	for (;;) {
		struct iod_pkt *p = iod_io_pool_get(&fabric->pool);
		if (!p)
			break;
		uint32_t len = iod_flow_dp_ar_probe_frame(ar, p->data, IOD_IO_FRAME_MAX);
		if (!len) {
			iod_io_pkt_free(p);
			break;
		}
		p->len = len;
		out[k++] = p;
		if (k == IOD_FLOW_BURST_MAX) {
			iod_io_tx(fabric, out, k);
			k = 0;
		}
	}
	if (k)
		iod_io_tx(fabric, out, k);
}

uint32_t iod_dp_loop_step(struct iod_dp_loop *l, uint64_t now)
{
	uint32_t got = 0;
	/* the host side: ports[0], or each of a virtual switch's ports; then
	 * the fabric */
	uint32_t sides = l->host_n ? l->host_n + 1 : 2;
	for (uint32_t i = 0; i < sides; i++) {
		struct iod_pkt *pkts[IOD_FLOW_BURST_MAX];
		bool fabric = i == sides - 1;
		struct iod_io_port *port = fabric      ? &l->ports[IOD_DP_PORT_FABRIC]
		                           : l->host_n ? l->host_ports[i]
		                                       : &l->ports[IOD_DP_PORT_HOST];
		uint32_t n = iod_io_rx(port, pkts, IOD_FLOW_BURST_MAX, 0);
		got += n; /* received, the refused included */
		if (!fabric && l->host_n)
			n = guard_burst(l, i, pkts, n);
		for (uint32_t k = 0; k < n; k++)
			pkts[k]->port_in = fabric ? IOD_DP_PORT_FABRIC : IOD_DP_PORT_HOST;
		run_burst(l, pkts, n, now);
	}
	if (l->ar) {
		if (now - l->last_tick_ns >= IOD_NS_PER_MS) {
			iod_flow_dp_ar_tick(l->ar, now);
			l->last_tick_ns = now;
		}
		send_probes(l->ar, &l->ports[IOD_DP_PORT_FABRIC]);
	}
	l->rx_packets += got;
	iod_flow_entries_process(l->dp->pl, IOD_DP_LOOP_ENTRIES_BUDGET, now);
	iod_flow_aging_process(l->dp->pl, now, IOD_DP_LOOP_AGING_BUDGET);
	iod_net_ct_expire(l->dp->ct[0], now, IOD_DP_LOOP_CT_BUDGET, NULL, NULL);
	return got;
}

uint32_t iod_dp_loop_idle(struct iod_dp_loop *l)
{
	struct iod_pkt *p[1];
	if (!l->live)
		return 0;
	/* bounded: 1 ms with adaptive routing, so probe replies waiting on the
	 * other port are timed within 1 ms */
	uint32_t n = iod_io_rx(&l->ports[l->idle_port], p, 1, l->ar ? 1 : 5);
	if (!n)
		return 0;
	p[0]->port_in = l->idle_port;
	run_burst(l, p, 1, iod_clock_now_ns());
	l->rx_packets++;
	return 1;
}

bool iod_dp_loop_done(const struct iod_dp_loop *l)
{
	return !l->live && l->ports[0].eof && l->ports[1].eof;
}
