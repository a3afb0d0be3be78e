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
 *
 * With cfg->vnet_hdr as well (PACKET_VNET_HDR) each frame comes and goes
 * with a virtio-net header, so the interface keeps GSO/TSO on: a TCP/IPv4
 * super-frame (up to 64 KiB) is received whole into a slot and handed out
 * as MTU-sized segments (src/net/gso.c), the rest kept for the next call;
 * on transmission, in-order segments of one flow are sent as one
 * super-frame (an iovec over their buffers, no copy) that the receiving
 * stack takes whole, as from GRO. Transmission is one sendmmsg(2) a burst.
 * With cfg->tx_udp_gso too, a run of UDP datagrams of one flow goes out as
 * one UDP_SEGMENT super-frame (gso UDP_L4): the switch's fabric port, whose
 * VXLAN frames of one inner flow to one VTEP form such runs.
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
#include <stdio.h>
#include <sys/socket.h>
#include <sys/utsname.h>
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
	bool vnet;                 /* PACKET_VNET_HDR */
	bool udp_gso;              /* vnet: UDP runs sent as gso UDP_L4 */
	/* vnet: the super-frames of the last recvmmsg, handed out in segments */
	uint8_t *slots;                                    /* IOD_IO_AFP_GSO_SLOTS */
	struct iod_net_vnet_hdr hdr[IOD_IO_AFP_GSO_SLOTS]; /* each slot's header */
	uint32_t slot_len[IOD_IO_AFP_GSO_SLOTS];           /* its frame's bytes */
	uint32_t slots_n, slot_at;                         /* received, the one being handed out */
	struct iod_net_gso plan;                           /* slot_at's segments (when planned) */
	uint32_t seg_next;                                 /* the next of them */
	bool planned;
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

static int afp_open_vnet(struct iod_io_port *p, struct afp_port *a, struct iod_err *e)
{
	int one = 1;
	if (setsockopt(a->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)))
		return iod_err_set(e, -errno, "port %s: PACKET_VNET_HDR: %s", p->name,
		                   strerror(errno));
	a->slots = malloc((size_t)IOD_IO_AFP_GSO_SLOTS * IOD_IO_AFP_GSO_SLOT_BYTES);
	if (!a->slots)
		return iod_err_set(e, -ENOMEM, "port %s: out of memory", p->name);
	a->vnet = true;
	return 0;
}

/* Does this kernel take gso UDP_L4 in a packet socket's virtio-net header
 * (virtio_net_hdr_to_skb, Linux 6.2)? */
static bool kernel_takes_udp_l4(void)
{
	struct utsname u;
	unsigned maj = 0, min = 0;
	if (uname(&u) || sscanf(u.release, "%u.%u", &maj, &min) != 2)
		return false;
	return maj > 6 || (maj == 6 && min >= 2);
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
	/* protocol 0: a socket made with ETH_P_ALL hears every interface from
	 * its creation to its bind, and what it queued in between would be
	 * read as this port's (a neighbour's frames as a replica's: the switch
	 * forwarded them as that replica's, or anti-spoofing refused them on
	 * it). It hears nothing until afp_bind names the protocol and the
	 * interface. */
	a->fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (a->fd < 0)
		return iod_err_set(e, -errno, "port %s: AF_PACKET socket: %s (needs CAP_NET_RAW)",
		                   p->name, strerror(errno));
	int v = TPACKET_V3, one = 1;
	if (setsockopt(a->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)))
		return iod_err_set(e, -errno, "port %s: TPACKET_V3: %s", p->name, strerror(errno));
	(void)setsockopt(a->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	if (cfg->rx_recv) {
		int rc = afp_open_recv(p, a, e);
		if (!rc && cfg->vnet_hdr)
			rc = afp_open_vnet(p, a, e);
		a->udp_gso = !rc && cfg->vnet_hdr && cfg->tx_udp_gso && kernel_takes_udp_l4();
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

/* The next packet of the received slots into k (false: none left, or k
 * stays unused); segments of a super-frame one at a time. */
static bool vnet_next(struct iod_io_port *p, struct afp_port *a, struct iod_pkt *k)
{
	while (a->slot_at < a->slots_n) {
		uint8_t *f = a->slots + (size_t)a->slot_at * IOD_IO_AFP_GSO_SLOT_BYTES;
		const struct iod_net_vnet_hdr *h = &a->hdr[a->slot_at];
		uint32_t len = a->slot_len[a->slot_at];
		if (!a->planned && h->gso_type == IOD_NET_VNET_GSO_NONE) {
			a->slot_at++;
			if (!len || len > IOD_IO_FRAME_MAX) {
				p->stats.rx_nobuf += len > 0;
				continue;
			}
			memcpy(k->data, f, len);
			k->len = len;
			if (h->flags & IOD_NET_VNET_F_NEEDS_CSUM)
				(void)iod_net_csum_fill(k->data, len);
			return true;
		}
		if (!a->planned) {
			uint8_t gt = h->gso_type & (uint8_t)~IOD_NET_VNET_GSO_ECN;
			uint8_t want = gt == IOD_NET_VNET_GSO_TCPV4    ? IOD_NET_PROTO_TCP
			               : gt == IOD_NET_VNET_GSO_UDP_L4 ? IOD_NET_PROTO_UDP
			                                               : 0;
			if (!want || iod_net_gso_plan(f, len, h->gso_size, &a->plan) ||
			    a->plan.proto != want) {
				p->stats.rx_nobuf++; /* a GSO kind it cannot split: dropped */
				a->slot_at++;
				continue;
			}
			a->planned = true;
			a->seg_next = 0;
			p->stats.rx_gso++;
		}
		uint32_t l =
		    iod_net_gso_segment(f, &a->plan, a->seg_next, k->data, IOD_IO_FRAME_MAX);
		if (!l || ++a->seg_next == a->plan.segs) {
			a->planned = false;
			a->slot_at++;
		}
		if (!l) {
			p->stats.rx_nobuf++;
			continue;
		}
		k->len = l;
		return true;
	}
	return false;
}

/* Receive up to IOD_IO_AFP_GSO_SLOTS frames (with their headers) into the
 * slots; false when none came. */
static bool vnet_recv(struct iod_io_port *p, struct afp_port *a, int timeout_ms)
{
	struct mmsghdr mh[IOD_IO_AFP_GSO_SLOTS];
	struct iovec iov[IOD_IO_AFP_GSO_SLOTS][2];
	memset(mh, 0, sizeof(mh));
	for (uint32_t i = 0; i < IOD_IO_AFP_GSO_SLOTS; i++) {
		iov[i][0] = (struct iovec){&a->hdr[i], sizeof(a->hdr[i])};
		iov[i][1] = (struct iovec){a->slots + (size_t)i * IOD_IO_AFP_GSO_SLOT_BYTES,
		                           IOD_IO_AFP_GSO_SLOT_BYTES};
		mh[i].msg_hdr.msg_iov = iov[i];
		mh[i].msg_hdr.msg_iovlen = 2;
	}
	int r = recvmmsg(a->fd, mh, IOD_IO_AFP_GSO_SLOTS, MSG_DONTWAIT, NULL);
	if (r <= 0 && timeout_ms) {
		struct pollfd pfd = {a->fd, POLLIN | POLLERR, 0};
		if (poll(&pfd, 1, timeout_ms) > 0)
			r = recvmmsg(a->fd, mh, IOD_IO_AFP_GSO_SLOTS, MSG_DONTWAIT, NULL);
	}
	if (r <= 0)
		return false;
	for (int i = 0; i < r; i++) {
		uint32_t len = mh[i].msg_len;
		bool bad = (mh[i].msg_hdr.msg_flags & MSG_TRUNC) || len < sizeof(a->hdr[i]);
		p->stats.rx_nobuf += bad;
		a->slot_len[i] = bad ? 0 : len - (uint32_t)sizeof(a->hdr[i]);
		if (bad)
			a->hdr[i].gso_type = IOD_NET_VNET_GSO_NONE;
	}
	a->slots_n = (uint32_t)r;
	a->slot_at = 0;
	a->planned = false;
	return true;
}

static uint32_t afp_rx_vnet(struct iod_io_port *p, struct afp_port *a, struct iod_pkt **pkts,
                            uint32_t n, int timeout_ms)
{
	uint32_t got = 0;
	struct iod_pkt *k = NULL;
	for (int recvs = 0; got < n;) {
		if (!k && !(k = iod_io_pool_get(&p->pool)))
			break; /* no buffer: the rest waits */
		if (vnet_next(p, a, k)) {
			p->stats.rx_packets++;
			p->stats.rx_bytes += k->len;
			pkts[got++] = k;
			k = NULL;
			continue;
		}
		/* the slots are spent: at most two receives a call */
		if (recvs++ == 2 || !vnet_recv(p, a, got ? 0 : timeout_ms))
			break;
	}
	if (k)
		iod_io_pkt_free(k);
	return got;
}

static uint32_t afp_rx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n, int timeout_ms)
{
	struct afp_port *a = p->priv;
	uint32_t got = 0;
	if (a->vnet)
		return afp_rx_vnet(p, a, pkts, n, timeout_ms);
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

/* A vnet port's message of a UDP run from frames fr[0..n) (at most
 * IOD_IO_AFP_TX_BURST), behind the header iov[-1] points at: the first
 * frame whole, then each next one's payload. Returns the frames it takes. */
static uint32_t tx_udp_msg(uint8_t **fr, const uint32_t *len, uint32_t n,
                           struct iod_net_vnet_hdr *h, struct iovec *iov, size_t *iovlen,
                           uint32_t *bytes)
{
	uint32_t run = iod_net_udp_gro_run(fr, len, n, 0xffffu, IOD_IO_AFP_UDP_GSO_SEGS), k = 0;
	uint32_t l4 = (uint32_t)((fr[0][14] & 0x0fu) * 4u) + 14u, hl = l4 + 8u;
	uint32_t first = run > 1 ? iod_net_be16(fr[0] + 16) + 14u : len[0], pay = first - hl;
	iov[k++] = (struct iovec){fr[0], first};
	for (uint32_t i = 1; i < run; i++) {
		uint32_t p = iod_net_be16(fr[i] + l4 + 4) - 8u;
		iov[k++] = (struct iovec){fr[i] + hl, p};
		pay += p;
	}
	if (run > 1)
		iod_net_udp_gro_finish(fr[0], first, run, pay, h);
	*iovlen = k + 1; /* and the header */
	*bytes = run > 1 ? hl + pay : len[0];
	return run;
}

/* The next message of a burst from pkts[0..n): a run of segments a vnet
 * port coalesces (h describes it) or one frame; its iovecs into iov (the
 * header first on a vnet port). Returns the frames it takes. */
static uint32_t tx_msg(const struct afp_port *a, struct iod_pkt **pkts, uint32_t n,
                       struct iod_net_vnet_hdr *h, struct iovec *iov, size_t *iovlen,
                       uint32_t *bytes)
{
	uint8_t *fr[IOD_IO_AFP_TX_BURST];
	uint32_t len[IOD_IO_AFP_TX_BURST], run = 1, k = 0;
	memset(h, 0, sizeof(*h));
	if (a->vnet) {
		iov[k++] = (struct iovec){h, sizeof(*h)};
		for (uint32_t i = 0; i < n; i++) {
			fr[i] = pkts[i]->data;
			len[i] = pkts[i]->len;
		}
		run = iod_net_gro_run(fr, len, n, 0xffffu);
		if (run < 2 && a->udp_gso)
			return tx_udp_msg(fr, len, n, h, iov + k, iovlen, bytes);
	}
	if (run < 2) {
		iov[k++] = (struct iovec){pkts[0]->data, pkts[0]->len};
		*iovlen = k;
		*bytes = pkts[0]->len;
		return 1;
	}
	/* every frame's IP total length and the first's headers (gro_run checked them) */
	uint32_t hl = (uint32_t)((fr[0][14] & 0x0fu) * 4u) + 14u;
	hl += (uint32_t)(fr[0][hl + 12] >> 4) * 4u;
	uint32_t first = iod_net_be16(fr[0] + 16) + 14u, pay = first - hl;
	iov[k++] = (struct iovec){fr[0], first};
	for (uint32_t i = 1; i < run; i++) {
		uint32_t p = iod_net_be16(fr[i] + 16) + 14u - hl;
		iov[k++] = (struct iovec){fr[i] + hl, p};
		pay += p;
	}
	iod_net_gro_finish(fr[0], first, fr[run - 1], len[run - 1], run, pay, h);
	*iovlen = k;
	*bytes = hl + pay;
	return run;
}

static uint32_t afp_tx_burst(struct iod_io_port *p, struct afp_port *a, struct iod_pkt **pkts,
                             uint32_t n)
{
	struct mmsghdr mh[IOD_IO_AFP_TX_BURST];
	struct iovec iov[IOD_IO_AFP_TX_BURST * 2 + 1];
	struct iod_net_vnet_hdr h[IOD_IO_AFP_TX_BURST];
	uint32_t frames[IOD_IO_AFP_TX_BURST], bytes[IOD_IO_AFP_TX_BURST], m = 0, used = 0;
	memset(mh, 0, sizeof(mh[0]) * n);
	for (uint32_t i = 0; i < n; m++) {
		size_t il;
		frames[m] = tx_msg(a, pkts + i, n - i, &h[m], iov + used, &il, &bytes[m]);
		mh[m].msg_hdr.msg_iov = iov + used;
		mh[m].msg_hdr.msg_iovlen = il;
		used += (uint32_t)il;
		i += frames[m];
	}
	for (uint32_t at = 0; at < m;) {
		int r = sendmmsg(a->fd, mh + at, m - at, MSG_DONTWAIT);
		uint32_t ok = r > 0 ? (uint32_t)r : 0;
		for (uint32_t j = at; j < at + ok; j++) {
			p->stats.tx_packets += frames[j];
			p->stats.tx_bytes += bytes[j];
			p->stats.tx_gro += frames[j] > 1;
		}
		at += ok;
		if (!ok) { /* this message failed: dropped, go on with the next */
			if (r < 0 && errno == EINVAL && h[at].gso_type == IOD_NET_VNET_GSO_UDP_L4)
				a->udp_gso = false; /* the kernel refuses UDP_L4: single frames */
			p->stats.tx_errors += frames[at];
			at++;
		}
	}
	for (uint32_t i = 0; i < n; i++)
		iod_io_pkt_free(pkts[i]);
	return n;
}

static uint32_t afp_tx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n)
{
	struct afp_port *a = p->priv;
	for (uint32_t i = 0; i < n; i += IOD_IO_AFP_TX_BURST)
		afp_tx_burst(p, a, pkts + i, IOD_MIN(n - i, IOD_IO_AFP_TX_BURST));
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
	free(a->slots);
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
