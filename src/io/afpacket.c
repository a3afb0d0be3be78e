/*
 * afpacket.c: the Linux AF_PACKET backend: a TPACKET_V3 receive ring
 * (blocks of frames the kernel fills, mapped into our memory; we hand a
 * block back when every frame in it was copied into a pool buffer) and
 * transmission with send() on the same socket.
 *
 * Used for real interfaces (veth pairs in network namespaces in tests). It
 * binds to one interface, puts it in promiscuous mode, and ignores the
 * frames it sent itself (PACKET_IGNORE_OUTGOING). It never blocks longer
 * than the caller's timeout.
 *
 * With cfg->rx_recv there is no ring: frames are read with recvmmsg(2)
 * straight into pool buffers (PACKET_AUXDATA says which need their
 * checksum finished). A ring hands over a partly filled block only when
 * its retire timer fires (1 ms at best, a jiffy or more in practice), so a
 * lone packet waits that long; recvmmsg sees it as it arrives. The node's
 * virtual switch (src/agent/vswitch.c) uses it for latency.
 */
#include "iod/io.h"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

struct afp_port {
	int fd;                    /* the packet socket */
	uint8_t *ring;             /* mapped rx ring */
	size_t ring_bytes;         /* its size */
	uint32_t block;            /* current block */
	struct tpacket3_hdr *next; /* next frame in the current block, or NULL */
	uint32_t left;             /* frames left in the current block */
	int ifindex;               /* bound interface */
	uint32_t blocks;           /* ring blocks */
	bool by_recv;              /* no ring: recvmmsg */
};

static int afp_open_recv(struct iod_io_port *p, struct afp_port *a, struct iod_err *e)
{
	int one = 1, bytes = IOD_IO_AFP_RECV_RCVBUF;
	a->by_recv = true;
	if (setsockopt(a->fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one)))
		return iod_err_set(e, -errno, "port %s: PACKET_AUXDATA: %s", p->name,
		                   strerror(errno));
	if (setsockopt(a->fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)))
		(void)setsockopt(a->fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
	return 0;
}

static int afp_bind(struct iod_io_port *p, struct afp_port *a, const struct iod_io_port_cfg *cfg,
                    struct iod_err *e);

static int afp_open(struct iod_io_port *p, const struct iod_io_port_cfg *cfg, struct iod_err *e)
{
	if (!cfg->iface || !cfg->iface[0])
		return iod_err_set(e, -EINVAL, "port %s: afpacket needs iface", p->name);
	struct afp_port *a = calloc(1, sizeof(*a));
	if (!a)
		return iod_err_set(e, -ENOMEM, "port %s: out of memory", p->name);
	a->fd = -1;
	p->priv = a;
	a->ifindex = (int)if_nametoindex(cfg->iface);
	if (!a->ifindex)
		return iod_err_set(e, -ENODEV, "port %s: no interface \"%s\"", p->name, cfg->iface);
	a->fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (a->fd < 0)
		return iod_err_set(e, -errno, "port %s: AF_PACKET socket: %s (needs CAP_NET_RAW)",
		                   p->name, strerror(errno));
	int v = TPACKET_V3, one = 1;
	if (setsockopt(a->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)))
		return iod_err_set(e, -errno, "port %s: TPACKET_V3: %s", p->name, strerror(errno));
	(void)setsockopt(a->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	if (cfg->rx_recv) {
		int rc = afp_open_recv(p, a, e);
		return rc ? rc : afp_bind(p, a, cfg, e);
	}
	struct tpacket_req3 req = {0};
	req.tp_block_size = IOD_IO_AFP_BLOCK_BYTES;
	a->blocks =
	    cfg->ring_blocks ? IOD_MIN(cfg->ring_blocks, IOD_IO_AFP_BLOCKS) : IOD_IO_AFP_BLOCKS;
	req.tp_block_nr = a->blocks;
	req.tp_frame_size = IOD_IO_AFP_FRAME_BYTES;
	req.tp_frame_nr = IOD_IO_AFP_BLOCK_BYTES / IOD_IO_AFP_FRAME_BYTES * a->blocks;
	req.tp_retire_blk_tov = cfg->retire_ms ? cfg->retire_ms : IOD_IO_AFP_RETIRE_MS;
	if (setsockopt(a->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)))
		return iod_err_set(e, -errno, "port %s: rx ring: %s", p->name, strerror(errno));
	a->ring_bytes = (size_t)IOD_IO_AFP_BLOCK_BYTES * a->blocks;
	a->ring =
	    mmap(NULL, a->ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED, a->fd, 0);
	if (a->ring == MAP_FAILED)
		a->ring = mmap(NULL, a->ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	if (a->ring == MAP_FAILED) {
		a->ring = NULL;
		return iod_err_set(e, -errno, "port %s: mmap rx ring: %s", p->name,
		                   strerror(errno));
	}
	return afp_bind(p, a, cfg, e);
}

static int afp_bind(struct iod_io_port *p, struct afp_port *a, const struct iod_io_port_cfg *cfg,
                    struct iod_err *e)
{
	struct sockaddr_ll sll = {0};
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = a->ifindex;
	if (bind(a->fd, (struct sockaddr *)&sll, sizeof(sll)))
		return iod_err_set(e, -errno, "port %s: bind %s: %s", p->name, cfg->iface,
		                   strerror(errno));
	struct packet_mreq mr = {0};
	mr.mr_ifindex = a->ifindex;
	mr.mr_type = PACKET_MR_PROMISC;
	(void)setsockopt(a->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr));
	return 0;
}

static struct tpacket_block_desc *block_at(struct afp_port *a, uint32_t i)
{
	return (struct tpacket_block_desc *)(a->ring + (size_t)i * IOD_IO_AFP_BLOCK_BYTES);
}

/* The received frames of one recvmmsg into pkts; frees the unused buffers. */
static uint32_t recv_take(struct iod_io_port *p, struct mmsghdr *mh, int r, struct iod_pkt **k,
                          uint32_t m, struct iod_pkt **pkts)
{
	uint32_t got = 0;
	for (uint32_t i = 0; i < m; i++) {
		if ((int)i >= r || (mh[i].msg_hdr.msg_flags & MSG_TRUNC)) {
			p->stats.rx_nobuf += (int)i < r;
			iod_io_pkt_free(k[i]);
			continue;
		}
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh[i].msg_hdr);
		for (; c; c = CMSG_NXTHDR(&mh[i].msg_hdr, c)) {
			struct tpacket_auxdata aux;
			if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA)
				continue;
			memcpy(&aux, CMSG_DATA(c), sizeof(aux));
			if (aux.tp_status & TP_STATUS_CSUMNOTREADY)
				(void)iod_net_csum_fill(k[i]->data, mh[i].msg_len);
		}
		k[i]->len = mh[i].msg_len;
		p->stats.rx_packets++;
		p->stats.rx_bytes += k[i]->len;
		pkts[got++] = k[i];
	}
	return got;
}

static uint32_t afp_rx_recv(struct iod_io_port *p, struct afp_port *a, struct iod_pkt **pkts,
                            uint32_t n, int timeout_ms)
{
	struct mmsghdr mh[IOD_IO_AFP_RECV_BURST];
	struct iovec iov[IOD_IO_AFP_RECV_BURST];
	union {
		char b[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
		struct cmsghdr align;
	} cm[IOD_IO_AFP_RECV_BURST];
	struct iod_pkt *k[IOD_IO_AFP_RECV_BURST];
	uint32_t m = 0;
	n = IOD_MIN(n, IOD_IO_AFP_RECV_BURST);
	memset(mh, 0, sizeof(mh[0]) * n);
	for (; m < n && (k[m] = iod_io_pool_get(&p->pool)); m++) {
		iov[m] = (struct iovec){k[m]->data, IOD_IO_FRAME_MAX};
		mh[m].msg_hdr.msg_iov = &iov[m];
		mh[m].msg_hdr.msg_iovlen = 1;
		mh[m].msg_hdr.msg_control = cm[m].b;
		mh[m].msg_hdr.msg_controllen = sizeof(cm[m].b);
	}
	if (!m)
		return 0; /* no buffer: the frames wait in the socket */
	int r = recvmmsg(a->fd, mh, m, MSG_DONTWAIT, NULL);
	if (r <= 0 && timeout_ms) {
		struct pollfd pfd = {a->fd, POLLIN | POLLERR, 0};
		if (poll(&pfd, 1, timeout_ms) > 0)
			r = recvmmsg(a->fd, mh, m, MSG_DONTWAIT, NULL);
	}
	return recv_take(p, mh, r, k, m, pkts);
}

static uint32_t afp_rx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n, int timeout_ms)
{
	struct afp_port *a = p->priv;
	uint32_t got = 0;
	if (a->by_recv)
		return afp_rx_recv(p, a, pkts, n, timeout_ms);
	while (got < n) {
		struct tpacket_block_desc *b = block_at(a, a->block);
		if (!a->next) {
			if (!(__atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE) &
			      TP_STATUS_USER)) {
				if (got || timeout_ms == 0)
					break;
				struct pollfd pfd = {a->fd, POLLIN | POLLERR, 0};
				if (poll(&pfd, 1, timeout_ms) <= 0)
					break;
				timeout_ms = 0;
				continue;
			}
			a->left = b->hdr.bh1.num_pkts;
			a->next =
			    (struct tpacket3_hdr *)((uint8_t *)b + b->hdr.bh1.offset_to_first_pkt);
		}
		while (a->left && got < n) {
			struct tpacket3_hdr *h = a->next;
			uint32_t len = h->tp_snaplen;
			struct iod_pkt *k =
			    len <= IOD_IO_FRAME_MAX ? iod_io_pool_get(&p->pool) : NULL;
			if (k) {
				memcpy(k->data, (uint8_t *)h + h->tp_mac, len);
				k->len = len;
				/* veth and loopback leave checksums to "hardware": finish them
				 * here, as a NIC would have, before anything forwards them. */
				if (h->tp_status & TP_STATUS_CSUMNOTREADY)
					(void)iod_net_csum_fill(k->data, len);
				p->stats.rx_packets++;
				p->stats.rx_bytes += len;
				pkts[got++] = k;
			} else {
				p->stats.rx_nobuf++;
			}
			a->left--;
			a->next = a->left
			              ? (struct tpacket3_hdr *)((uint8_t *)h + h->tp_next_offset)
			              : NULL;
		}
		if (!a->left) {
			a->next = NULL;
			__atomic_store_n(&b->hdr.bh1.block_status, TP_STATUS_KERNEL,
			                 __ATOMIC_RELEASE);
			a->block = (a->block + 1) % a->blocks;
		}
	}
	return got;
}

static uint32_t afp_tx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n)
{
	struct afp_port *a = p->priv;
	for (uint32_t i = 0; i < n; i++) {
		if (send(a->fd, pkts[i]->data, pkts[i]->len, MSG_DONTWAIT) ==
		    (ssize_t)pkts[i]->len) {
			p->stats.tx_packets++;
			p->stats.tx_bytes += pkts[i]->len;
		} else {
			p->stats.tx_errors++;
		}
		iod_io_pkt_free(pkts[i]);
	}
	return n;
}

static void afp_close(struct iod_io_port *p)
{
	struct afp_port *a = p->priv;
	if (!a)
		return;
	if (a->ring)
		munmap(a->ring, a->ring_bytes);
	if (a->fd >= 0)
		close(a->fd);
	free(a);
	p->priv = NULL;
}

static int afp_fd(const struct iod_io_port *p)
{
	const struct afp_port *a = p->priv;
	return a ? a->fd : -1;
}

const struct iod_io_ops iod_io_afpacket_ops = {"afpacket", afp_open,  afp_rx,
                                               afp_tx,     afp_close, afp_fd};
