/*
 * dpdk.c: the DPDK 22.11 backend of iod's packet I/O: EAL start-up without
 * hugepages or PCI devices (virtual devices such as net_null, net_ring,
 * net_pcap), ports behind the io vtable, and the bare mac-swap loop the
 * benchmarks compare the data plane with.
 *
 * Linked only into build/iod and benchmark programs (see the Makefile's
 * DPDK_* variables and include/iod/io.h). The backend copies frames between
 * mbufs and iod buffers: simple and correct, not zero-copy; the bare loop
 * measures DPDK itself.
 */
#include "iod/io.h"

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool eal_up;
static struct rte_mempool *mbufs;

int iod_io_dpdk_init(const char *vdevs, struct iod_err *e)
{
	if (eal_up)
		return 0;
	char buf[1024];
	const char *env = getenv("IOD_DPDK_EAL");
	if (env)
		snprintf(buf, sizeof(buf), "iod %s", env);
	else
		snprintf(buf, sizeof(buf),
		         "iod --no-huge --no-pci --no-shconf -m 256 -l 0 --log-level=lib.eal:error "
		         "--log-level=pmd:error");
	char *argv[64];
	int argc = 0;
	for (char *t = strtok(buf, " "); t && argc < 48; t = strtok(NULL, " "))
		argv[argc++] = t;
	static char vd[512];
	snprintf(vd, sizeof(vd), "%s", vdevs ? vdevs : "");
	if (!env)
		for (char *t = strtok(vd, " "); t && argc < 62; t = strtok(NULL, " ")) {
			argv[argc++] = "--vdev";
			argv[argc++] = t;
		}
	argv[argc] = NULL;
	if (rte_eal_init(argc, argv) < 0)
		return iod_err_set(e, -rte_errno,
		                   "DPDK EAL init failed: %s (args from IOD_DPDK_EAL "
		                   "or --no-huge --no-pci --no-shconf)",
		                   rte_strerror(rte_errno));
	mbufs = rte_pktmbuf_pool_create("iod_mbufs", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
	                                (int)rte_socket_id());
	if (!mbufs)
		return iod_err_set(e, -ENOMEM, "DPDK mbuf pool: %s", rte_strerror(rte_errno));
	eal_up = true;
	return 0;
}

static int port_start(const char *name, uint16_t *port, struct iod_err *e)
{
	if (rte_eth_dev_get_port_by_name(name, port))
		return iod_err_set(e, -ENODEV,
		                   "DPDK port \"%s\" does not exist (give it with --vdev)", name);
	static bool started[RTE_MAX_ETHPORTS];
	if (*port < RTE_MAX_ETHPORTS && started[*port])
		return 0; /* already configured by an earlier open */
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	int rc = rte_eth_dev_configure(*port, 1, 1, &conf);
	if (!rc)
		rc = rte_eth_rx_queue_setup(*port, 0, 1024, (unsigned)rte_eth_dev_socket_id(*port),
		                            NULL, mbufs);
	if (!rc)
		rc = rte_eth_tx_queue_setup(*port, 0, 1024, (unsigned)rte_eth_dev_socket_id(*port),
		                            NULL);
	if (!rc)
		rc = rte_eth_dev_start(*port);
	if (rc)
		return iod_err_set(e, rc, "DPDK port %s: start failed: %s", name,
		                   rte_strerror(-rc));
	if (*port < RTE_MAX_ETHPORTS)
		started[*port] = true;
	return 0;
}

struct dpdk_port {
	uint16_t port; /* DPDK port id */
};

static int dpdk_open(struct iod_io_port *p, const struct iod_io_port_cfg *cfg, struct iod_err *e)
{
	const char *dev = cfg->iface && cfg->iface[0] ? cfg->iface : "net_null0";
	int rc = iod_io_dpdk_init(dev, e);
	if (rc)
		return rc;
	struct dpdk_port *d = calloc(1, sizeof(*d));
	if (!d)
		return iod_err_set(e, -ENOMEM, "out of memory");
	p->priv = d;
	return port_start(dev, &d->port, e);
}

static uint32_t dpdk_rx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n, int timeout_ms)
{
	struct dpdk_port *d = p->priv;
	struct rte_mbuf *m[IOD_FLOW_BURST_MAX];
	IOD_UNUSED(timeout_ms);
	uint16_t got = rte_eth_rx_burst(d->port, 0, m, (uint16_t)IOD_MIN(n, IOD_FLOW_BURST_MAX));
	uint32_t k = 0;
	for (uint16_t i = 0; i < got; i++) {
		uint32_t len = rte_pktmbuf_data_len(m[i]);
		struct iod_pkt *b = len <= IOD_IO_FRAME_MAX ? iod_io_pool_get(&p->pool) : NULL;
		if (b) {
			memcpy(b->data, rte_pktmbuf_mtod(m[i], void *), len);
			b->len = len;
			pkts[k++] = b;
			p->stats.rx_packets++;
			p->stats.rx_bytes += len;
		} else {
			p->stats.rx_nobuf++;
		}
		rte_pktmbuf_free(m[i]);
	}
	return k;
}

static uint32_t dpdk_tx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n)
{
	struct dpdk_port *d = p->priv;
	struct rte_mbuf *m[IOD_FLOW_BURST_MAX * 2];
	uint16_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rte_mbuf *b = k < IOD_ARRAY_LEN(m) ? rte_pktmbuf_alloc(mbufs) : NULL;
		char *dst = b ? rte_pktmbuf_append(b, (uint16_t)pkts[i]->len) : NULL;
		if (dst) {
			memcpy(dst, pkts[i]->data, pkts[i]->len);
			m[k++] = b;
		} else {
			if (b)
				rte_pktmbuf_free(b);
			p->stats.tx_errors++;
		}
		iod_io_pkt_free(pkts[i]);
	}
	uint16_t sent = rte_eth_tx_burst(d->port, 0, m, k);
	for (uint16_t i = sent; i < k; i++) {
		rte_pktmbuf_free(m[i]);
		p->stats.tx_errors++;
	}
	p->stats.tx_packets += sent;
	return n;
}

static void dpdk_close(struct iod_io_port *p)
{
	free(p->priv);
	p->priv = NULL;
}

static const struct iod_io_ops dpdk_ops = {"dpdk", dpdk_open, dpdk_rx, dpdk_tx, dpdk_close, NULL};

const struct iod_io_ops *iod_io_dpdk_ops_get(void);
const struct iod_io_ops *iod_io_dpdk_ops_get(void)
{
	return &dpdk_ops;
}

int iod_io_dpdk_bench_macswap(double seconds, double *mpps, struct iod_err *e)
{
	uint16_t a, b;
	int rc = iod_io_dpdk_init("net_null0 net_null1", e);
	if (rc || (rc = port_start("net_null0", &a, e)) || (rc = port_start("net_null1", &b, e)))
		return rc;
	struct rte_mbuf *m[32];
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	uint64_t n = 0, t0 = (uint64_t)ts.tv_sec * IOD_NS_PER_S + (uint64_t)ts.tv_nsec, now = t0;
	uint64_t end = t0 + (uint64_t)(seconds * 1e9);
	for (uint64_t it = 0;; it++) {
		uint16_t k = rte_eth_rx_burst(a, 0, m, 32);
		for (uint16_t i = 0; i < k; i++) {
			struct rte_ether_hdr *h = rte_pktmbuf_mtod(m[i], struct rte_ether_hdr *);
			struct rte_ether_addr t = h->dst_addr;
			h->dst_addr = h->src_addr;
			h->src_addr = t;
		}
		uint16_t s = rte_eth_tx_burst(b, 0, m, k);
		for (uint16_t i = s; i < k; i++)
			rte_pktmbuf_free(m[i]);
		n += k;
		if ((it & 255) == 0) {
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
			now = (uint64_t)ts.tv_sec * IOD_NS_PER_S + (uint64_t)ts.tv_nsec;
			if (now >= end)
				break;
		}
	}
	*mpps = (double)n / ((double)(now - t0) / 1e9) / 1e6;
	return 0;
}
