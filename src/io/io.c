/*
 * io.c: the backend-neutral part of packet I/O: buffer pools, port
 * open/close through the vtable, and the mem and pcap backends.
 *
 * mem keeps everything in memory (tests, benchmarks); pcap reads and writes
 * files with libpcap (golden-packet tests against tshark). Neither ever
 * allocates on rx/tx: buffers come from the port's pool.
 */
#include "iod/io.h"
#include "iod/obs.h"

#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>

extern const struct iod_io_ops iod_io_afpacket_ops;
const struct iod_io_ops *iod_io_dpdk_ops_get(void) __attribute__((weak));

/* ---- pools ------------------------------------------------------------- */

int iod_io_pool_init(struct iod_io_pool *p, uint32_t count)
{
	memset(p, 0, sizeof(*p));
	/* aligned_alloc wants a multiple of the alignment (a pool of 4
	 * buffers of 2,216 bytes is not one) */
	size_t bytes = (sizeof(struct iod_io_buf) * count + 63) & ~(size_t)63;
	p->bufs = aligned_alloc(64, bytes);
	p->free_stack = malloc(sizeof(uint32_t) * count);
	if (!p->bufs || !p->free_stack) {
		iod_io_pool_destroy(p);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < count; i++) {
		p->free_stack[i] = count - 1 - i;
		p->bufs[i].pkt.io = p;
	}
	p->count = p->free_n = count;
	return 0;
}

void iod_io_pool_destroy(struct iod_io_pool *p)
{
	free(p->bufs);
	free(p->free_stack);
	memset(p, 0, sizeof(*p));
}

struct iod_pkt *iod_io_pool_get(struct iod_io_pool *p)
{
	if (!p->free_n)
		return NULL;
	struct iod_io_buf *b = &p->bufs[p->free_stack[--p->free_n]];
	struct iod_pkt *k = &b->pkt;
	k->data = b->mem + IOD_IO_HEADROOM;
	k->len = 0;
	k->headroom = IOD_IO_HEADROOM;
	k->port_in = k->port_out = k->queue = 0;
	k->mirror_port = UINT16_MAX;
	k->verdict = k->color = k->ct_state = 0;
	k->io = p;
	return k;
}

void iod_io_pkt_free(struct iod_pkt *pkt)
{
	struct iod_io_pool *p = pkt->io;
	struct iod_io_buf *b = (struct iod_io_buf *)pkt;
	uint32_t i = (uint32_t)(b - p->bufs);
	IOD_ASSERT_HOT(i < p->count);
	p->free_stack[p->free_n++] = i;
}

/* ---- mem --------------------------------------------------------------- */

struct mem_port {
	uint8_t **frames;   /* copies of the frames to receive */
	uint32_t *lens;     /* their lengths */
	uint32_t n;         /* frames */
	uint32_t next;      /* next to receive */
	bool loop;          /* replay forever */
	uint32_t copy_max;  /* bytes rx rewrites per frame: all, or the headers when every
	                     * frame has the same payload (see iod_io_mem_load) */
	uint8_t *cap;       /* capture ring: cap_n slots of IOD_IO_FRAME_MAX */
	uint32_t *cap_len;  /* lengths */
	uint32_t cap_n;     /* slots */
	uint64_t cap_count; /* frames captured in total */
};

static int mem_open(struct iod_io_port *p, const struct iod_io_port_cfg *cfg, struct iod_err *e)
{
	struct mem_port *m = calloc(1, sizeof(*m));
	if (!m)
		return iod_err_set(e, -ENOMEM, "port %s: out of memory", p->name);
	if (cfg->mem_capture) {
		m->cap = malloc((size_t)cfg->mem_capture * IOD_IO_FRAME_MAX);
		m->cap_len = calloc(cfg->mem_capture, sizeof(uint32_t));
		if (!m->cap || !m->cap_len) {
			free(m->cap);
			free(m->cap_len);
			free(m);
			return iod_err_set(e, -ENOMEM, "port %s: out of memory", p->name);
		}
		m->cap_n = cfg->mem_capture;
	}
	p->priv = m;
	return 0;
}

static void mem_free_frames(struct mem_port *m)
{
	for (uint32_t i = 0; i < m->n; i++)
		free(m->frames[i]);
	free(m->frames);
	free(m->lens);
	m->frames = NULL;
	m->lens = NULL;
	m->n = 0;
}

int iod_io_mem_load(struct iod_io_port *p, const uint8_t *const *frames, const uint32_t *lens,
                    uint32_t n, bool loop)
{
	struct mem_port *m = p->priv;
	if (strcmp(p->ops->name, "mem"))
		return -EINVAL;
	mem_free_frames(m);
	m->frames = calloc(n ? n : 1, sizeof(uint8_t *));
	m->lens = calloc(n ? n : 1, sizeof(uint32_t));
	if (!m->frames || !m->lens)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		if (lens[i] > IOD_IO_FRAME_MAX)
			return -EMSGSIZE;
		m->frames[i] = malloc(lens[i] ? lens[i] : 1);
		if (!m->frames[i])
			return -ENOMEM;
		memcpy(m->frames[i], frames[i], lens[i]);
		m->lens[i] = lens[i];
		m->n = i + 1;
	}
	m->next = 0;
	m->loop = loop;
	p->eof = n == 0;
	/* Header-only replay: when all frames have one length and the same bytes
	 * past the first 128, fill every pool buffer with frame 0 once and let rx
	 * rewrite only the first 128 bytes (as a NIC's DMA writes without the CPU).
	 * The engine never writes past the headers, so the payloads stay intact. */
	m->copy_max = UINT32_MAX;
	bool same = loop && n > 0 && lens[0] > 128; /* benchmarks replay in a loop */
	for (uint32_t i = 1; same && i < n; i++)
		same =
		    lens[i] == lens[0] && !memcmp(frames[i] + 128, frames[0] + 128, lens[0] - 128);
	if (same) {
		for (uint32_t i = 0; i < p->pool.count; i++)
			memcpy(p->pool.bufs[i].mem + IOD_IO_HEADROOM, frames[0], lens[0]);
		m->copy_max = 128;
	}
	return 0;
}

static uint32_t mem_rx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n, int timeout_ms)
{
	struct mem_port *m = p->priv;
	uint32_t got = 0;
	IOD_UNUSED(timeout_ms);
	while (got < n && m->n) {
		if (m->next == m->n) {
			if (!m->loop) {
				p->eof = true;
				break;
			}
			m->next = 0;
		}
		struct iod_pkt *k = iod_io_pool_get(&p->pool);
		if (!k) {
			p->stats.rx_nobuf++;
			break;
		}
		uint32_t len = m->lens[m->next];
		memcpy(k->data, m->frames[m->next], IOD_MIN(len, m->copy_max));
		m->next++;
		k->len = len;
		p->stats.rx_packets++;
		p->stats.rx_bytes += len;
		pkts[got++] = k;
	}
	return got;
}

static uint32_t mem_tx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n)
{
	struct mem_port *m = p->priv;
	for (uint32_t i = 0; i < n; i++) {
		struct iod_pkt *k = pkts[i];
		if (m->cap_n && k->len <= IOD_IO_FRAME_MAX) {
			uint32_t slot = (uint32_t)(m->cap_count % m->cap_n);
			memcpy(m->cap + (size_t)slot * IOD_IO_FRAME_MAX, k->data, k->len);
			m->cap_len[slot] = k->len;
			m->cap_count++;
		}
		p->stats.tx_packets++;
		p->stats.tx_bytes += k->len;
		iod_io_pkt_free(k);
	}
	return n;
}

static void mem_close(struct iod_io_port *p)
{
	struct mem_port *m = p->priv;
	if (!m)
		return;
	mem_free_frames(m);
	free(m->cap);
	free(m->cap_len);
	free(m);
	p->priv = NULL;
}

uint32_t iod_io_mem_captured_n(const struct iod_io_port *p)
{
	const struct mem_port *m = p->priv;
	return (uint32_t)IOD_MIN(m->cap_count, (uint64_t)m->cap_n);
}

int iod_io_mem_captured(const struct iod_io_port *p, uint32_t i, const uint8_t **frame,
                        uint32_t *len)
{
	const struct mem_port *m = p->priv;
	uint32_t have = iod_io_mem_captured_n(p);
	if (i >= have)
		return -ENOENT;
	uint64_t first = m->cap_count - have;
	uint32_t slot = (uint32_t)((first + i) % m->cap_n);
	*frame = m->cap + (size_t)slot * IOD_IO_FRAME_MAX;
	*len = m->cap_len[slot];
	return 0;
}

static const struct iod_io_ops mem_ops = {"mem", mem_open, mem_rx, mem_tx, mem_close, NULL};

/* ---- pcap -------------------------------------------------------------- */

struct pcap_port {
	pcap_t *in;         /* offline reader, or NULL */
	pcap_t *dead;       /* for the dumper */
	pcap_dumper_t *out; /* writer, or NULL */
};

static int pcap_open_port(struct iod_io_port *p, const struct iod_io_port_cfg *cfg,
                          struct iod_err *e)
{
	char eb[PCAP_ERRBUF_SIZE] = "";
	struct pcap_port *x = calloc(1, sizeof(*x));
	if (!x)
		return iod_err_set(e, -ENOMEM, "port %s: out of memory", p->name);
	p->priv = x;
	if (cfg->pcap_in && cfg->pcap_in[0]) {
		x->in = pcap_open_offline(cfg->pcap_in, eb);
		if (!x->in)
			return iod_err_set(e, -ENOENT, "port %s: cannot read pcap %s: %s", p->name,
			                   cfg->pcap_in, eb);
		if (pcap_datalink(x->in) != DLT_EN10MB)
			return iod_err_set(e, -EINVAL, "port %s: %s is not an Ethernet capture",
			                   p->name, cfg->pcap_in);
	} else {
		p->eof = true;
	}
	if (cfg->pcap_out && cfg->pcap_out[0]) {
		x->dead = pcap_open_dead(DLT_EN10MB, 65535);
		x->out = x->dead ? pcap_dump_open(x->dead, cfg->pcap_out) : NULL;
		if (!x->out)
			return iod_err_set(e, -EIO, "port %s: cannot write pcap %s: %s", p->name,
			                   cfg->pcap_out,
			                   x->dead ? pcap_geterr(x->dead) : "no memory");
	}
	return 0;
}

static uint32_t pcap_rx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n, int timeout_ms)
{
	struct pcap_port *x = p->priv;
	uint32_t got = 0;
	IOD_UNUSED(timeout_ms);
	while (x->in && got < n && !p->eof) {
		struct pcap_pkthdr *h;
		const u_char *d;
		int rc = pcap_next_ex(x->in, &h, &d);
		if (rc != 1) {
			p->eof = true;
			break;
		}
		if (h->caplen > IOD_IO_FRAME_MAX) {
			p->stats.rx_nobuf++;
			continue;
		}
		struct iod_pkt *k = iod_io_pool_get(&p->pool);
		if (!k) {
			p->stats.rx_nobuf++;
			break;
		}
		memcpy(k->data, d, h->caplen);
		k->len = h->caplen;
		p->stats.rx_packets++;
		p->stats.rx_bytes += k->len;
		pkts[got++] = k;
	}
	return got;
}

static uint32_t pcap_tx(struct iod_io_port *p, struct iod_pkt **pkts, uint32_t n)
{
	struct pcap_port *x = p->priv;
	for (uint32_t i = 0; i < n; i++) {
		if (x->out) {
			struct pcap_pkthdr h = {0};
			/* Deterministic timestamps: packet i of the file at i microseconds. */
			h.ts.tv_sec = (time_t)(p->stats.tx_packets / 1000000);
			h.ts.tv_usec = (suseconds_t)(p->stats.tx_packets % 1000000);
			h.caplen = h.len = pkts[i]->len;
			pcap_dump((u_char *)x->out, &h, pkts[i]->data);
			p->stats.tx_packets++;
			p->stats.tx_bytes += pkts[i]->len;
		} else {
			p->stats.tx_errors++;
		}
		iod_io_pkt_free(pkts[i]);
	}
	return n;
}

static void pcap_close_port(struct iod_io_port *p)
{
	struct pcap_port *x = p->priv;
	if (!x)
		return;
	if (x->out)
		pcap_dump_close(x->out);
	if (x->dead)
		pcap_close(x->dead);
	if (x->in)
		pcap_close(x->in);
	free(x);
	p->priv = NULL;
}

static const struct iod_io_ops pcap_ops = {"pcap",  pcap_open_port,  pcap_rx,
                                           pcap_tx, pcap_close_port, NULL};

/* ---- ports ------------------------------------------------------------- */

const char *iod_io_backends(void)
{
	return iod_io_dpdk_ops_get ? "mem pcap afpacket dpdk" : "mem pcap afpacket";
}

int iod_io_port_open(struct iod_io_port *p, const struct iod_io_port_cfg *cfg, struct iod_err *e)
{
	const struct iod_io_ops *ops = NULL;
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", cfg->name ? cfg->name : cfg->backend);
	if (!strcmp(cfg->backend, "mem"))
		ops = &mem_ops;
	else if (!strcmp(cfg->backend, "pcap"))
		ops = &pcap_ops;
	else if (!strcmp(cfg->backend, "afpacket"))
		ops = &iod_io_afpacket_ops;
	else if (!strcmp(cfg->backend, "dpdk")) {
		if (!iod_io_dpdk_ops_get)
			return iod_err_set(
			    e, -ENOTSUP,
			    "port %s: this iod was built without DPDK; backends here: %s", p->name,
			    iod_io_backends());
		ops = iod_io_dpdk_ops_get();
	} else {
		return iod_err_set(e, -ENOENT, "port %s: unknown backend \"%s\"; backends: %s",
		                   p->name, cfg->backend, iod_io_backends());
	}
	p->ops = ops;
	int rc = iod_io_pool_init(&p->pool, cfg->pool_bufs ? cfg->pool_bufs : 4096);
	if (rc)
		return iod_err_set(e, rc, "port %s: cannot allocate buffers", p->name);
	rc = ops->open(p, cfg, e);
	if (rc) {
		iod_io_port_close(p);
		return rc;
	}
	return 0;
}

void iod_io_port_reading(const struct iod_io_port *p, const char *name, const char *kind,
                         const char *iface, uint64_t at_ms, struct iod_tel_port *o)
{
	memset(o, 0, sizeof(*o));
	iod_strlcpy(o->name, name, sizeof(o->name));
	iod_strlcpy(o->kind, kind, sizeof(o->kind));
	iod_strlcpy(o->iface, iface, sizeof(o->iface));
	o->rx_packets = p->stats.rx_packets;
	o->rx_bytes = p->stats.rx_bytes;
	o->tx_packets = p->stats.tx_packets;
	o->tx_bytes = p->stats.tx_bytes;
	o->rx_dropped = p->stats.rx_nobuf;
	o->tx_dropped = p->stats.tx_errors;
	o->at_ms = at_ms;
}

void iod_io_port_close(struct iod_io_port *p)
{
	if (p->ops && p->ops->close)
		p->ops->close(p);
	iod_io_pool_destroy(&p->pool);
	p->ops = NULL;
}

int iod_io_port_fd(const struct iod_io_port *p)
{
	return p->ops && p->ops->fd ? p->ops->fd(p) : -1;
}
