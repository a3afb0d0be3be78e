/*
 * xfer.c: libiod-xfer's shell over UCX's UCP layer (include/iod/xfer.h).
 *
 * One UCP context and worker per struct iod_xfer. Regions are ucp_mem_map'd
 * and their remote keys packed into the metadata blob (src/xfer/wire.c);
 * a peer is a UCP endpoint made from the peer's worker address. A write is
 * ucp_put_nbx per chunk (or a memcpy into the peer's mapped shared memory),
 * then an endpoint flush (remote completion), then the notification as a
 * UCP active message, so a peer that sees the notification sees the data.
 * A signalled post (IOD_XFER_POST_SIGNAL) ends instead with its last 8
 * bytes as a release store or a put after the flush; the peer polls that
 * word. Peer failure comes from UCX's error handler
 * (UCP_ERR_HANDLING_MODE_PEER) or, where a transport cannot tell, from the
 * deadline every request and wait carries: nothing here blocks unbounded.
 *
 * Decisions (limits, bounds, wire format, NIC choice) are in the pure files;
 * this file only drives UCX and reads the clock for deadlines.
 */
#include "iod/xfer.h"

#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define AM_NOTIF_ID 0x1d0 /* our active-message id */

struct peer {
	char name[IOD_NAME_MAX];               /* "" when the slot is free */
	ucp_ep_h ep;                           /* the endpoint, NULL once closed */
	ucs_status_t failed;                   /* UCS_OK, or why the peer went away */
	uint16_t nregions;                     /* regions it published */
	uint32_t rid[IOD_XFER_REGIONS_MAX];    /* their ids */
	uint64_t raddr[IOD_XFER_REGIONS_MAX];  /* their addresses */
	uint64_t rlen[IOD_XFER_REGIONS_MAX];   /* their sizes */
	ucp_rkey_h rkey[IOD_XFER_REGIONS_MAX]; /* unpacked keys */
	uint8_t *rptr[IOD_XFER_REGIONS_MAX];   /* mapped here (shared memory), or NULL */
};

enum phase { PH_FREE, PH_OPS, PH_FLUSH, PH_NOTIF, PH_DONE };

struct iod_xfer_req {
	enum phase phase;     /* where it stands */
	struct peer *peer;    /* where it goes */
	unsigned outstanding; /* UCX requests not yet completed */
	ucs_status_t status;  /* the first failure, UCS_OK */
	uint64_t deadline_ns; /* monotonic */
	unsigned nlocal;      /* regions it holds busy */
	bool signal;          /* IOD_XFER_POST_SIGNAL: the last word signals */
	bool ucx_data;        /* bytes went through UCX: flush before the signal */
	uint64_t sig_val;     /* the signal word's value (the put's source) */
	uint64_t *sig_mapped; /* the word mapped here, or NULL: a UCX put */
	uint64_t sig_raddr;   /* its address in the peer */
	ucp_rkey_h sig_rkey;  /* and key */
	size_t notif_len;     /* bytes of notif, 0 none */
	bool orphan;          /* freed by the caller while UCX held it */
	/* everything above is cleared per post; the buffers below are filled
	 * up to nlocal and notif_len */
	uint32_t local[IOD_XFER_BATCH_MAX];                          /* their ids */
	uint8_t notif[IOD_XFER_NOTIF_BYTES_MAX + IOD_NAME_MAX + 32]; /* encoded notification */
};

struct notif {
	char peer[IOD_NAME_MAX];               /* the sender */
	uint16_t len;                          /* bytes of msg */
	uint8_t msg[IOD_XFER_NOTIF_BYTES_MAX]; /* the payload */
};

struct iod_xfer {
	char name[IOD_NAME_MAX];                     /* this agent */
	enum iod_xfer_transport transport;           /* as configured after fallback */
	uint64_t deadline_ms;                        /* per request and wait */
	uint64_t chunk_bytes;                        /* cut size of large ops */
	char nic[IOD_TOPO_LABEL_MAX];                /* chosen NIC, "" UCX's choice */
	int nic_index;                               /* topology NIC index, -1 */
	ucp_context_h ctx;                           /* UCX context */
	ucp_worker_h worker;                         /* UCX worker (one thread) */
	ucp_address_t *addr;                         /* our worker address */
	size_t addr_len;                             /* its bytes */
	struct iod_xfer_regions regions;             /* local regions (pure table) */
	uint8_t *rkeys[IOD_XFER_REGIONS_MAX];        /* packed keys, by slot */
	size_t rkey_lens[IOD_XFER_REGIONS_MAX];      /* their bytes */
	struct peer peers[IOD_XFER_PEERS_MAX];       /* known peers */
	struct iod_xfer_req reqs[IOD_XFER_REQS_MAX]; /* the request pool */
	struct notif notifs[IOD_XFER_NOTIFS_MAX];    /* received, a ring */
	unsigned notif_head, notif_count;            /* ring position and fill */
	uint64_t notifs_dropped;                     /* lost to a full ring */
	uint64_t seq;                                /* our notification sequence */
};

static int ucs_err(ucs_status_t s)
{
	switch (s) {
	case UCS_OK: return 0;
	case UCS_ERR_NO_MEMORY: return -ENOMEM;
	case UCS_ERR_UNREACHABLE:
	case UCS_ERR_CONNECTION_RESET:
	case UCS_ERR_ENDPOINT_TIMEOUT:
	case UCS_ERR_REJECTED:
	case UCS_ERR_CANCELED: return -ECONNRESET;
	case UCS_ERR_TIMED_OUT: return -ETIMEDOUT;
	case UCS_ERR_UNSUPPORTED: return -ENOTSUP;
	default: return -EIO;
	}
}

static const char *tls_of(enum iod_xfer_transport t)
{
	switch (t) {
	case IOD_XFER_SHM: return "posix,sysv,cma,self";
	case IOD_XFER_TCP: return "tcp,self";
	case IOD_XFER_RDMA: return "rc,ud,self";
	default: return NULL; /* UCX's own choice: every transport it has */
	}
}

/*
 * UCX's TCP segments: 8 KiB sends and 64 KiB receives by default, which
 * held a 1 MiB put over loopback to 0.1-0.5 GB/s against iperf3's 2-3 on
 * this machine (docs/transfer.md). 512 KiB each (a receive segment must
 * hold a sent one: 64 KiB receives with 512 KiB sends stalled) gave 4-5
 * GB/s. The environment (UCX_TCP_TX_SEG_SIZE, UCX_TCP_RX_SEG_SIZE) wins.
 * ucp_config_modify names a transport's key without its prefix ("TX_SEG_SIZE";
 * "TCP_TX_SEG_SIZE" is refused at worker creation as an invalid
 * configuration); only the tcp context sets it, where tcp is the only
 * transport with the key.
 */
#define TCP_SEG_SIZE "512K"
static void tcp_tune(ucp_config_t *cfg)
{
	if (!getenv("UCX_TCP_TX_SEG_SIZE"))
		ucp_config_modify(cfg, "TX_SEG_SIZE", TCP_SEG_SIZE);
	if (!getenv("UCX_TCP_RX_SEG_SIZE"))
		ucp_config_modify(cfg, "RX_SEG_SIZE", TCP_SEG_SIZE);
}

/* An RDMA device exists when the kernel lists one. */
static bool rdma_present(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	if (!d)
		return false;
	bool any = false;
	for (struct dirent *de; !any && (de = readdir(d));)
		any = de->d_name[0] != '.';
	closedir(d);
	return any;
}

static ucs_status_t on_notif(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param)
{
	struct iod_xfer *x = arg;
	struct iod_xfer_wire_notif n;
	struct iod_err e = {0};
	if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
	    iod_xfer_wire_notif_decode(data, length, &n, &e)) {
		x->notifs_dropped++; /* not ours or malformed: never trusted */
		return UCS_OK;
	}
	if (x->notif_count == IOD_XFER_NOTIFS_MAX) {
		x->notifs_dropped++;
		return UCS_OK;
	}
	struct notif *q = &x->notifs[(x->notif_head + x->notif_count) % IOD_XFER_NOTIFS_MAX];
	memcpy(q->peer, n.name, sizeof(q->peer));
	q->len = n.msg_len;
	if (n.msg_len)
		memcpy(q->msg, n.msg, n.msg_len);
	x->notif_count++;
	return UCS_OK;
}

int iod_xfer_create(const struct iod_xfer_opts *o, struct iod_xfer **out, struct iod_err *e)
{
	IOD_ASSERT(o && out);
	*out = NULL;
	if (!o->name || !o->name[0] || strlen(o->name) >= IOD_NAME_MAX)
		return iod_err_set(e, -EINVAL, "xfer: the agent needs a name of 1..%d bytes",
		                   IOD_NAME_MAX - 1);
	struct iod_xfer *x = calloc(1, sizeof(*x));
	if (!x)
		return iod_err_set(e, -ENOMEM, "xfer: out of memory");
	snprintf(x->name, sizeof(x->name), "%s", o->name);
	x->transport = o->transport;
	x->deadline_ms = o->deadline_ms ? o->deadline_ms : IOD_XFER_DEADLINE_MS;
	x->chunk_bytes = o->chunk_bytes ? o->chunk_bytes : IOD_XFER_CHUNK_BYTES;
	/* cluster config (xfer.deadline, xfer.chunk_size in docs/config.md)
	 * reaches a replica as environment; explicit options win */
	const char *env = getenv("IOD_XFER_DEADLINE_MS");
	uint64_t v = 0;
	if (!o->deadline_ms && env && (v = strtoull(env, NULL, 10)) >= 10 && v <= 600000)
		x->deadline_ms = v;
	env = getenv("IOD_XFER_CHUNK");
	if (!o->chunk_bytes && env && !iod_parse_size(env, &v, NULL) && v >= 4096 &&
	    v <= (64ull << 20))
		x->chunk_bytes = v;
	x->nic_index = -1;
	iod_xfer_regions_init(&x->regions, o->reg_bytes_max);
	if (x->transport == IOD_XFER_RDMA && !rdma_present()) {
		/* never silently: the caller sees the fallback in iod_xfer_peer_path
		 * and in e->msg with a 0 return */
		x->transport = IOD_XFER_TCP;
		iod_err_set(e, 0,
		            "xfer: no RDMA device (/sys/class/infiniband is empty); using tcp");
	}
	if (o->topo && x->transport != IOD_XFER_SHM) {
		x->nic_index = iod_xfer_nic_choose(
		    o->topo, o->gpu >= 0 ? IOD_XFER_MEM_GPU : IOD_XFER_MEM_HOST, o->gpu, o->numa);
		/* RDMA: UCX names the port ("mlx5_0:1"); TCP keeps UCX's devices (the
		 * topology names the RDMA device, not its netdev) and only records it */
		if (x->nic_index >= 0)
			snprintf(x->nic, sizeof(x->nic), "%s%s",
			         o->topo->devices[o->topo->nic[x->nic_index]].os_name,
			         x->transport == IOD_XFER_RDMA ? ":1" : "");
	}

	ucp_config_t *cfg = NULL;
	ucs_status_t s = ucp_config_read(NULL, NULL, &cfg);
	if (s != UCS_OK) {
		free(x);
		return iod_err_set(e, ucs_err(s), "xfer: reading UCX configuration: %s",
		                   ucs_status_string(s));
	}
	const char *tls = tls_of(x->transport);
	if (tls)
		ucp_config_modify(cfg, "TLS", tls);
	if (x->transport == IOD_XFER_TCP)
		tcp_tune(cfg);
	if (x->nic[0] && x->transport == IOD_XFER_RDMA)
		ucp_config_modify(cfg, "NET_DEVICES", x->nic);
	ucp_params_t p = {0};
	p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
	p.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
	p.name = x->name;
	s = ucp_init(&p, cfg, &x->ctx);
	ucp_config_release(cfg);
	if (s != UCS_OK) {
		free(x);
		return iod_err_set(e, ucs_err(s), "xfer: UCX init with transports %s: %s",
		                   tls ? tls : "all", ucs_status_string(s));
	}
	ucp_worker_params_t wp = {0};
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wp.thread_mode = UCS_THREAD_MODE_SINGLE;
	s = ucp_worker_create(x->ctx, &wp, &x->worker);
	if (s == UCS_OK)
		s = ucp_worker_get_address(x->worker, &x->addr, &x->addr_len);
	if (s == UCS_OK) {
		ucp_am_handler_param_t hp = {0};
		hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
		                UCP_AM_HANDLER_PARAM_FIELD_ARG;
		hp.id = AM_NOTIF_ID;
		hp.cb = on_notif;
		hp.arg = x;
		s = ucp_worker_set_am_recv_handler(x->worker, &hp);
	}
	if (s != UCS_OK) {
		int rv = iod_err_set(e, ucs_err(s), "xfer: UCX worker: %s", ucs_status_string(s));
		iod_xfer_destroy(x);
		return rv;
	}
	if (x->addr_len > IOD_XFER_ADDR_BYTES_MAX) {
		int rv = iod_err_set(e, -E2BIG, "xfer: UCX worker address of %zu bytes, at most %d",
		                     x->addr_len, IOD_XFER_ADDR_BYTES_MAX);
		iod_xfer_destroy(x);
		return rv;
	}
	*out = x;
	return 0;
}

static void peer_close(struct iod_xfer *x, struct peer *p)
{
	for (unsigned i = 0; i < p->nregions; i++)
		if (p->rkey[i])
			ucp_rkey_destroy(p->rkey[i]);
	p->nregions = 0;
	if (p->ep) {
		ucp_request_param_t rp = {0};
		rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
		rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
		ucs_status_ptr_t r = ucp_ep_close_nbx(p->ep, &rp);
		uint64_t end = iod_clock_now_ns() + x->deadline_ms * 1000000ull;
		if (UCS_PTR_IS_PTR(r)) {
			while (ucp_request_check_status(r) == UCS_INPROGRESS &&
			       iod_clock_now_ns() < end)
				ucp_worker_progress(x->worker);
			ucp_request_free(r);
		}
		p->ep = NULL;
	}
	p->name[0] = '\0';
}

void iod_xfer_destroy(struct iod_xfer *x)
{
	if (!x)
		return;
	for (unsigned i = 0; i < IOD_XFER_PEERS_MAX; i++)
		if (x->peers[i].name[0])
			peer_close(x, &x->peers[i]);
	if (x->worker) {
		/* requests UCX still holds complete (cancelled) on close */
		for (int i = 0; i < 16; i++)
			ucp_worker_progress(x->worker);
	}
	for (unsigned i = 0; i < IOD_XFER_REGIONS_MAX; i++) {
		struct iod_xfer_region *r = &x->regions.r[i];
		if (r->id && r->shell)
			ucp_mem_unmap(x->ctx, r->shell);
		free(x->rkeys[i]);
	}
	if (x->addr)
		ucp_worker_release_address(x->worker, x->addr);
	if (x->worker)
		ucp_worker_destroy(x->worker);
	if (x->ctx)
		ucp_cleanup(x->ctx);
	free(x);
}

const char *iod_xfer_nic(const struct iod_xfer *x)
{
	return x->nic;
}

const char *iod_xfer_name(const struct iod_xfer *x)
{
	return x->name;
}

uint64_t iod_xfer_deadline(const struct iod_xfer *x)
{
	return x->deadline_ms;
}

/* Map (or allocate, when *addr is NULL) and pack the remote key. */
static int mem_map(struct iod_xfer *x, void **addr, uint64_t len, enum iod_xfer_mem mem,
                   uint32_t *id, struct iod_err *e)
{
	IOD_ASSERT(x && id && addr);
	*id = 0;
	if (mem == IOD_XFER_MEM_GPU)
		return iod_err_set(
		    e, -ENOTSUP,
		    "xfer: GPU memory needs CUDA and a UCX built with it (cuda_copy, "
		    "cuda_ipc, or ibv_reg_dmabuf_mr for RDMA); this build has "
		    "neither (docs/transfer.md)");
	bool alloc = *addr == NULL;
	/* the table's limits first: nothing is pinned past them */
	struct iod_xfer_region *r = NULL;
	int rv = iod_xfer_regions_add(&x->regions, alloc ? 4096 : (uint64_t)(uintptr_t)*addr, len,
	                              (uint8_t)mem, &r, e);
	if (rv)
		return rv;
	r->nic = (int16_t)x->nic_index;
	ucp_mem_map_params_t mp = {0};
	mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
	mp.address = *addr;
	mp.length = len;
	if (alloc) {
		mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_FLAGS;
		mp.flags = UCP_MEM_MAP_ALLOCATE;
	}
	ucp_mem_h memh = NULL;
	ucs_status_t s = ucp_mem_map(x->ctx, &mp, &memh);
	if (s == UCS_OK && alloc) {
		ucp_mem_attr_t ma = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};
		s = ucp_mem_query(memh, &ma);
		*addr = ma.address;
		r->addr = (uint64_t)(uintptr_t)ma.address;
	}
	void *kb = NULL;
	size_t kl = 0;
	if (s == UCS_OK)
		s = ucp_rkey_pack(x->ctx, memh, &kb, &kl);
	unsigned slot = (unsigned)(r - x->regions.r);
	if (s == UCS_OK && kl > IOD_XFER_RKEY_BYTES_MAX)
		s = UCS_ERR_EXCEEDS_LIMIT;
	if (s == UCS_OK) {
		x->rkeys[slot] = malloc(kl);
		if (!x->rkeys[slot])
			s = UCS_ERR_NO_MEMORY;
		else
			memcpy(x->rkeys[slot], kb, kl);
	}
	if (kb)
		ucp_rkey_buffer_release(kb);
	if (s != UCS_OK) {
		if (memh)
			ucp_mem_unmap(x->ctx, memh);
		iod_xfer_regions_remove(&x->regions, r->id, NULL);
		return iod_err_set(e, ucs_err(s), "xfer: UCX cannot %s %llu bytes: %s",
		                   alloc ? "allocate" : "register", (unsigned long long)len,
		                   ucs_status_string(s));
	}
	x->rkey_lens[slot] = kl;
	r->shell = memh;
	*id = r->id;
	return 0;
}

int iod_xfer_mem_register(struct iod_xfer *x, void *addr, uint64_t len, enum iod_xfer_mem mem,
                          uint32_t *id, struct iod_err *e)
{
	if (!addr) {
		*id = 0;
		return iod_err_set(e, -EINVAL, "xfer: cannot register a NULL address");
	}
	return mem_map(x, &addr, len, mem, id, e);
}

int iod_xfer_mem_alloc(struct iod_xfer *x, uint64_t len, void **ptr, uint32_t *id,
                       struct iod_err *e)
{
	*ptr = NULL;
	return mem_map(x, ptr, len, IOD_XFER_MEM_HOST, id, e);
}

int iod_xfer_mem_deregister(struct iod_xfer *x, uint32_t id, struct iod_err *e)
{
	struct iod_xfer_region *r = iod_xfer_regions_find(&x->regions, id);
	if (!r)
		return iod_err_set(e, -ENOENT, "xfer: region %u is not registered", id);
	unsigned slot = (unsigned)(r - x->regions.r);
	void *memh = r->shell;
	int rv = iod_xfer_regions_remove(&x->regions, id, e);
	if (rv)
		return rv;
	ucp_mem_unmap(x->ctx, memh);
	free(x->rkeys[slot]);
	x->rkeys[slot] = NULL;
	x->rkey_lens[slot] = 0;
	return 0;
}

int iod_xfer_md_get(struct iod_xfer *x, void *buf, size_t cap, size_t *len, struct iod_err *e)
{
	/* 3 KiB, on the heap: not on the caller's stack, and not in static
	 * thread-local storage, which every thread of iod pays for (a 256 KiB
	 * worker stack must hold all of it, or pthread_create fails) */
	struct iod_xfer_wire_md *m = calloc(1, sizeof(*m));
	if (!m)
		return iod_err_set(e, -ENOMEM, "xfer: out of memory");
	snprintf(m->name, sizeof(m->name), "%s", x->name);
	m->addr = (const uint8_t *)x->addr;
	m->addr_len = (uint16_t)x->addr_len;
	for (unsigned i = 0; i < IOD_XFER_REGIONS_MAX; i++) {
		const struct iod_xfer_region *r = &x->regions.r[i];
		if (!r->id)
			continue;
		struct iod_xfer_wire_region *w = &m->regions[m->nregions++];
		w->id = r->id;
		w->addr = r->addr;
		w->len = r->len;
		w->mem = r->mem;
		w->rkey = x->rkeys[i];
		w->rkey_len = (uint16_t)x->rkey_lens[i];
	}
	int n = iod_xfer_wire_md_encode(m, buf, cap, e);
	free(m);
	if (n < 0)
		return n;
	*len = (size_t)n;
	return 0;
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct peer *p = arg;
	p->failed = status;
}

static struct peer *peer_find(struct iod_xfer *x, const char *name)
{
	for (unsigned i = 0; i < IOD_XFER_PEERS_MAX; i++)
		if (x->peers[i].name[0] && strcmp(x->peers[i].name, name) == 0)
			return &x->peers[i];
	return NULL;
}

/* Connect to the peer m describes and unpack its regions' keys. */
static int md_connect(struct iod_xfer *x, const struct iod_xfer_wire_md *m, char *peer,
                      struct iod_err *e)
{
	int rv;
	struct peer *p = peer_find(x, m->name);
	if (p)
		peer_close(x, p);
	for (unsigned i = 0; i < IOD_XFER_PEERS_MAX && !p; i++)
		if (!x->peers[i].name[0])
			p = &x->peers[i];
	if (!p)
		return iod_err_set(e, -E2BIG, "xfer: %d peers known, the most a context holds",
		                   IOD_XFER_PEERS_MAX);
	memset(p, 0, sizeof(*p));
	ucp_ep_params_t ep = {0};
	ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
	                UCP_EP_PARAM_FIELD_ERR_HANDLER;
	ep.address = (const ucp_address_t *)m->addr;
	/* UCX 1.13's shared-memory transports have no peer-failure handler
	 * and refuse the PEER mode; there a dead peer shows as a failed cma
	 * write (ESRCH) or as a passed deadline */
	ep.err_mode = x->transport == IOD_XFER_TCP || x->transport == IOD_XFER_RDMA
	                  ? UCP_ERR_HANDLING_MODE_PEER
	                  : UCP_ERR_HANDLING_MODE_NONE;
	ep.err_handler.cb = on_ep_error;
	ep.err_handler.arg = p;
	ucs_status_t s = ucp_ep_create(x->worker, &ep, &p->ep);
	if (s != UCS_OK) {
		p->ep = NULL;
		return iod_err_set(
		    e, ucs_err(s),
		    "xfer: peer \"%s\" is unreachable over %s: %s (is it on this node "
		    "for shm, or is the transport the same on both sides?)",
		    m->name, iod_xfer_transport_name(x->transport), ucs_status_string(s));
	}
	snprintf(p->name, sizeof(p->name), "%s", m->name);
	for (unsigned i = 0; i < m->nregions; i++) {
		s = ucp_ep_rkey_unpack(p->ep, m->regions[i].rkey, &p->rkey[i]);
		if (s != UCS_OK) {
			p->nregions = (uint16_t)i;
			rv = iod_err_set(e, ucs_err(s),
			                 "xfer: peer \"%s\" region %u: key unusable: %s", m->name,
			                 m->regions[i].id, ucs_status_string(s));
			peer_close(x, p);
			return rv;
		}
		/* shared memory the peer allocated: map it, write with memcpy */
		void *lp = NULL;
		if (ucp_rkey_ptr(p->rkey[i], m->regions[i].addr, &lp) == UCS_OK)
			p->rptr[i] = lp;
		p->rid[i] = m->regions[i].id;
		p->raddr[i] = m->regions[i].addr;
		p->rlen[i] = m->regions[i].len;
	}
	p->nregions = m->nregions;
	if (peer)
		snprintf(peer, IOD_NAME_MAX, "%s", m->name);
	return 0;
}

int iod_xfer_md_load(struct iod_xfer *x, const void *buf, size_t len, char *peer, struct iod_err *e)
{
	/* on the heap, not in static TLS (iod_xfer_md_get says why) */
	struct iod_xfer_wire_md *m = calloc(1, sizeof(*m));
	if (!m)
		return iod_err_set(e, -ENOMEM, "xfer: out of memory");
	int rv = iod_xfer_wire_md_decode(buf, len, m, e);
	if (rv)
		rv = iod_err_wrap(e, "loading peer metadata");
	else
		rv = md_connect(x, m, peer, e);
	free(m);
	return rv;
}

static void on_done(void *request, ucs_status_t status, void *user_data)
{
	struct iod_xfer_req *r = user_data;
	IOD_ASSERT(r->outstanding > 0);
	r->outstanding--;
	if (status != UCS_OK && r->status == UCS_OK)
		r->status = status;
	ucp_request_free(request);
	if (r->orphan && r->outstanding == 0)
		r->phase = PH_FREE;
}

/* Account for what a UCX call returned. */
static void track(struct iod_xfer_req *r, ucs_status_ptr_t sp)
{
	if (UCS_PTR_IS_ERR(sp)) {
		if (r->status == UCS_OK)
			r->status = UCS_PTR_STATUS(sp);
	} else if (sp) {
		r->outstanding++;
	}
}

static void req_param(struct iod_xfer_req *r, ucp_request_param_t *rp)
{
	memset(rp, 0, sizeof(*rp));
	rp->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
	rp->cb.send = on_done;
	rp->user_data = r;
}

static void req_release(struct iod_xfer *x, struct iod_xfer_req *r)
{
	for (unsigned i = 0; i < r->nlocal; i++) {
		struct iod_xfer_region *reg = iod_xfer_regions_find(&x->regions, r->local[i]);
		if (reg && reg->busy)
			reg->busy--;
	}
	r->nlocal = 0;
}

/* The signal word goes: a release store into mapped memory (every copy
 * before it is visible first), or a put of r->sig_val. */
static void signal_send(struct iod_xfer_req *r)
{
	if (r->sig_mapped) {
		__atomic_store_n(r->sig_mapped, r->sig_val, __ATOMIC_RELEASE);
		return;
	}
	__atomic_thread_fence(__ATOMIC_RELEASE); /* memcpy'd bytes before the put */
	ucp_request_param_t rp;
	req_param(r, &rp);
	track(r, ucp_put_nbx(r->peer->ep, &r->sig_val, sizeof(r->sig_val), r->sig_raddr,
	                     r->sig_rkey, &rp));
}

int iod_xfer_post(struct iod_xfer *x, const char *peer, const struct iod_xfer_op *ops, unsigned n,
                  const void *notif, size_t notif_len, struct iod_xfer_req **out, struct iod_err *e)
{
	return iod_xfer_post_flags(x, peer, ops, n, notif, notif_len, 0, out, e);
}

int iod_xfer_post_flags(struct iod_xfer *x, const char *peer, const struct iod_xfer_op *ops,
                        unsigned n, const void *notif, size_t notif_len, unsigned flags,
                        struct iod_xfer_req **out, struct iod_err *e)
{
	bool signal = flags & IOD_XFER_POST_SIGNAL;
	IOD_ASSERT(x && out && (ops || n == 0));
	*out = NULL;
	struct peer *p = peer_find(x, peer);
	if (!p)
		return iod_err_set(
		    e, -ENOENT, "xfer: no peer \"%s\": load its metadata first (iod_xfer_md_load)",
		    peer);
	if (p->failed != UCS_OK || !p->ep)
		return iod_err_set(e, -ECONNRESET, "xfer: peer \"%s\" failed: %s", peer,
		                   ucs_status_string(p->failed));
	if (n > IOD_XFER_BATCH_MAX)
		return iod_err_set(e, -E2BIG, "xfer: batch of %u operations, at most %d", n,
		                   IOD_XFER_BATCH_MAX);
	if (notif_len > IOD_XFER_NOTIF_BYTES_MAX)
		return iod_err_set(e, -E2BIG, "xfer: notification of %zu bytes, at most %d",
		                   notif_len, IOD_XFER_NOTIF_BYTES_MAX);
	if (flags & ~IOD_XFER_POST_SIGNAL)
		return iod_err_set(e, -EINVAL, "xfer: unknown post flags 0x%x",
		                   flags & ~IOD_XFER_POST_SIGNAL);
	if (signal && (notif || n == 0))
		return iod_err_set(e, -EINVAL,
		                   "xfer: a signalled post has no notification (its last 8 "
		                   "bytes signal) and needs at least one write");
	/* check everything before posting anything: no half-posted batch */
	struct iod_xfer_region *lr[IOD_XFER_BATCH_MAX];
	unsigned ri[IOD_XFER_BATCH_MAX];
	for (unsigned i = 0; i < n; i++) {
		lr[i] = iod_xfer_regions_find(&x->regions, ops[i].local.region);
		if (!lr[i])
			return iod_err_set(e, -ENOENT,
			                   "xfer: operation %u: local region %u is not registered",
			                   i, ops[i].local.region);
		unsigned j = 0;
		while (j < p->nregions && p->rid[j] != ops[i].remote.region)
			j++;
		if (j == p->nregions)
			return iod_err_set(e, -ENOENT,
			                   "xfer: operation %u: peer \"%s\" has no region %u (not "
			                   "registered, or its metadata is older than the region)",
			                   i, peer, ops[i].remote.region);
		ri[i] = j;
		int rv = iod_xfer_desc_check(&ops[i].local, lr[i]->len, "local", e);
		if (!rv)
			rv = iod_xfer_desc_check(&ops[i].remote, p->rlen[j], "remote", e);
		if (!rv && ops[i].local.len != ops[i].remote.len)
			rv = iod_err_set(e, -EINVAL,
			                 "xfer: operation %u: local %llu bytes, remote %llu", i,
			                 (unsigned long long)ops[i].local.len,
			                 (unsigned long long)ops[i].remote.len);
		if (!rv && signal && i == n - 1)
			rv = iod_xfer_signal_check(
			    &ops[i], p->raddr[j] + ops[i].remote.offset + ops[i].remote.len, e);
		if (rv)
			return iod_err_wrap(e, "operation %u to \"%s\"", i, peer);
	}
	struct iod_xfer_req *r = NULL;
	for (unsigned i = 0; i < IOD_XFER_REQS_MAX && !r; i++)
		if (x->reqs[i].phase == PH_FREE)
			r = &x->reqs[i];
	if (!r)
		return iod_err_set(e, -EAGAIN, "xfer: %d requests in flight; wait for one",
		                   IOD_XFER_REQS_MAX);
	/* up to the buffers: notif_len and orphan too (a reused slot kept
	 * its last post's notification and sent it again) */
	memset(r, 0, offsetof(struct iod_xfer_req, local));
	r->peer = p;
	if (notif) {
		struct iod_xfer_wire_notif wn = {0};
		snprintf(wn.name, sizeof(wn.name), "%s", x->name);
		wn.seq = ++x->seq;
		wn.msg = notif;
		wn.msg_len = (uint16_t)notif_len;
		int nb = iod_xfer_wire_notif_encode(&wn, r->notif, sizeof(r->notif), e);
		if (nb < 0)
			return nb;
		r->notif_len = (size_t)nb;
	}
	r->phase = PH_OPS;
	r->signal = signal;
	ucp_request_param_t rp;
	for (unsigned i = 0; i < n && r->status == UCS_OK; i++) {
		lr[i]->busy++;
		r->local[r->nlocal++] = lr[i]->id;
		uint8_t *la = (uint8_t *)(uintptr_t)(lr[i]->addr + ops[i].local.offset);
		uint64_t ra = p->raddr[ri[i]] + ops[i].remote.offset;
		uint64_t total = ops[i].local.len;
		if (signal && i == n - 1) {
			/* the last word waits for the rest (signal_send) */
			total -= 8;
			memcpy(&r->sig_val, la + total, 8);
			r->sig_raddr = ra + total;
			r->sig_rkey = p->rkey[ri[i]];
			r->sig_mapped = p->rptr[ri[i]]
			                    ? (uint64_t *)(void *)(p->rptr[ri[i]] +
			                                           ops[i].remote.offset + total)
			                    : NULL;
		}
		for (uint64_t off = 0; off < total && r->status == UCS_OK; off += x->chunk_bytes) {
			uint64_t len = total - off;
			if (len > x->chunk_bytes)
				len = x->chunk_bytes;
			uint8_t *mapped = p->rptr[ri[i]];
			if (mapped) {
				/* the peer's memory is mapped here: one copy, no syscall */
				uint8_t *rp8 = mapped + ops[i].remote.offset + off;
				if (ops[i].op == IOD_XFER_WRITE)
					memcpy(rp8, la + off, (size_t)len);
				else
					memcpy(la + off, rp8, (size_t)len);
				continue;
			}
			req_param(r, &rp);
			rp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
			rp.memh = lr[i]->shell;
			r->ucx_data = true;
			if (ops[i].op == IOD_XFER_WRITE)
				track(r, ucp_put_nbx(p->ep, la + off, (size_t)len, ra + off,
				                     p->rkey[ri[i]], &rp));
			else
				track(r, ucp_get_nbx(p->ep, la + off, (size_t)len, ra + off,
				                     p->rkey[ri[i]], &rp));
		}
	}
	if (signal && !r->ucx_data && r->status == UCS_OK) {
		/* every byte before the signal was copied here: no flush needed */
		r->phase = PH_NOTIF;
		signal_send(r);
	}
	/* a store into mapped memory is done: no clock read on that path */
	if (r->outstanding || r->phase != PH_NOTIF || r->sig_mapped == NULL)
		r->deadline_ns = iod_clock_now_ns() + x->deadline_ms * 1000000ull;
	*out = r;
	return 0;
}

int iod_xfer_req_poll(struct iod_xfer *x, struct iod_xfer_req *r, struct iod_err *e)
{
	IOD_ASSERT(r && r->phase != PH_FREE);
	/* a signalled store into mapped memory is done without UCX (the
	 * latency path; iod_xfer_signal_wait drives the worker); anything else
	 * drives it here, wire-up included */
	if (r->outstanding || !r->signal)
		ucp_worker_progress(x->worker);
	for (;;) {
		if (r->phase == PH_DONE)
			return 0;
		if (r->status == UCS_OK && r->peer->failed != UCS_OK)
			r->status = r->peer->failed;
		if (r->status != UCS_OK)
			return iod_err_set(e, ucs_err(r->status),
			                   "xfer: transfer to \"%s\" failed: %s", r->peer->name,
			                   ucs_status_string(r->status));
		if (r->outstanding) {
			if (iod_clock_now_ns() > r->deadline_ns)
				return iod_err_set(
				    e, -ETIMEDOUT,
				    "xfer: transfer to \"%s\" not complete within %llu ms "
				    "(peer gone or stalled?)",
				    r->peer->name, (unsigned long long)x->deadline_ms);
			return -EAGAIN;
		}
		ucp_request_param_t rp;
		req_param(r, &rp);
		if (r->phase == PH_OPS) {
			r->phase = PH_FLUSH;
			track(r, ucp_ep_flush_nbx(r->peer->ep, &rp));
		} else if (r->phase == PH_FLUSH) {
			r->phase = PH_NOTIF;
			/* memcpy'd data is visible before the notification */
			__atomic_thread_fence(__ATOMIC_RELEASE);
			if (r->signal) {
				signal_send(r);
			} else if (r->notif_len) {
				rp.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
				rp.flags = UCP_AM_SEND_FLAG_EAGER;
				track(r, ucp_am_send_nbx(r->peer->ep, AM_NOTIF_ID, NULL, 0,
				                         r->notif, r->notif_len, &rp));
			}
		} else {
			r->phase = PH_DONE;
			req_release(x, r);
		}
	}
}

/* Busy-poll first (the latency path), then give the core away between
 * polls: on a machine with fewer cores than spinning processes, a spinning
 * waiter steals the time its peer needs to make progress. */
static void relax(unsigned *spins)
{
	if (++*spins > 2048)
		sched_yield();
}

int iod_xfer_req_wait(struct iod_xfer *x, struct iod_xfer_req *r, struct iod_err *e)
{
	int rv;
	unsigned spins = 0;
	while ((rv = iod_xfer_req_poll(x, r, e)) == -EAGAIN)
		relax(&spins);
	return rv;
}

void iod_xfer_req_free(struct iod_xfer *x, struct iod_xfer_req *r)
{
	if (!r || r->phase == PH_FREE)
		return;
	req_release(x, r);
	if (r->outstanding) {
		/* UCX still holds it: its callbacks free the slot; closing the
		 * peer (destroy, or a failure) completes them */
		r->orphan = true;
		return;
	}
	r->phase = PH_FREE;
}

int iod_xfer_progress(struct iod_xfer *x)
{
	return (int)ucp_worker_progress(x->worker);
}

int iod_xfer_notif_get(struct iod_xfer *x, char *peer, void *msg, size_t cap, size_t *len)
{
	if (!x->notif_count)
		ucp_worker_progress(x->worker);
	if (!x->notif_count)
		return -EAGAIN;
	struct notif *q = &x->notifs[x->notif_head];
	x->notif_head = (x->notif_head + 1) % IOD_XFER_NOTIFS_MAX;
	x->notif_count--;
	if (peer)
		memcpy(peer, q->peer, IOD_NAME_MAX);
	size_t n = q->len < cap ? q->len : cap;
	if (n)
		memcpy(msg, q->msg, n);
	if (len)
		*len = q->len;
	return 0;
}

/* A peer named by from (NULL: any) that failed: -ECONNRESET with e set. */
static int peer_failed(struct iod_xfer *x, const char *from, struct iod_err *e)
{
	for (unsigned i = 0; i < IOD_XFER_PEERS_MAX; i++) {
		struct peer *p = &x->peers[i];
		if (p->name[0] && p->failed != UCS_OK && (!from || !strcmp(from, p->name)))
			return iod_err_set(e, -ECONNRESET, "xfer: peer \"%s\" failed: %s", p->name,
			                   ucs_status_string(p->failed));
	}
	return 0;
}

int iod_xfer_notif_wait(struct iod_xfer *x, const char *from, char *peer, void *msg, size_t cap,
                        size_t *len, uint64_t timeout_ms, struct iod_err *e)
{
	uint64_t ms = timeout_ms ? timeout_ms : x->deadline_ms;
	uint64_t end = iod_clock_now_ns() + ms * 1000000ull;
	unsigned turn = 0;
	for (;;) {
		int rv = iod_xfer_notif_get(x, peer, msg, cap, len);
		if (rv != -EAGAIN)
			return rv;
		if ((turn & 63) == 0 && (rv = peer_failed(x, from, e)))
			return rv;
		relax(&turn);
		if ((turn & 63) == 0 && iod_clock_now_ns() > end)
			return iod_err_set(
			    e, -ETIMEDOUT,
			    "xfer: no notification from %s%s%s within %llu ms (peer gone "
			    "or stalled?)",
			    from ? "\"" : "any peer", from ? from : "", from ? "\"" : "",
			    (unsigned long long)ms);
	}
}

int iod_xfer_signal_wait(struct iod_xfer *x, const char *from, uint32_t region, uint64_t offset,
                         uint64_t value, uint64_t timeout_ms, struct iod_err *e)
{
	struct iod_xfer_region *r = iod_xfer_regions_find(&x->regions, region);
	if (!r)
		return iod_err_set(e, -ENOENT, "xfer: region %u is not registered", region);
	int rv = iod_xfer_signal_word_check(r->addr, r->len, offset, e);
	if (rv)
		return rv;
	const uint64_t *w = (const uint64_t *)(uintptr_t)(r->addr + offset);
	uint64_t ms = timeout_ms ? timeout_ms : x->deadline_ms;
	uint64_t end = 0; /* read at the first slow look: not on the latency path */
	unsigned turn = 0, look = 0;
	for (;;) {
		if (__atomic_load_n(w, __ATOMIC_ACQUIRE) == value)
			return 0;
		/* puts over TCP land when this worker reads them; a store into
		 * mapped memory needs nothing, so UCX only after 256 looks (a
		 * store usually lands within them) and then every 8th look, and
		 * the spin before yielding counts those turns: as long as the
		 * notification wait's (a waiter that yields after a few us is
		 * packed onto its peer's core by the scheduler, 7 us a round trip) */
		if (++look < 256 || (look & 7) != 0)
			continue;
		ucp_worker_progress(x->worker);
		if ((turn & 63) == 0 && (rv = peer_failed(x, from, e)))
			return rv;
		relax(&turn);
		if ((turn & 63) == 0 && !end)
			end = iod_clock_now_ns() + ms * 1000000ull;
		else if ((turn & 63) == 0 && iod_clock_now_ns() > end)
			return iod_err_set(e, -ETIMEDOUT,
			                   "xfer: signal word %llu of region %u did not reach %llu "
			                   "within %llu ms (peer gone or stalled?)",
			                   (unsigned long long)offset, region,
			                   (unsigned long long)value, (unsigned long long)ms);
	}
}

int iod_xfer_peer_path(struct iod_xfer *x, const char *peer, char *buf, size_t cap,
                       struct iod_err *e)
{
	struct peer *p = peer_find(x, peer);
	if (!p || !p->ep)
		return iod_err_set(e, -ENOENT, "xfer: no peer \"%s\"", peer);
	char *text = NULL;
	size_t tl = 0;
	FILE *f = open_memstream(&text, &tl);
	if (!f)
		return iod_err_set(e, -ENOMEM, "xfer: out of memory");
	ucp_ep_print_info(p->ep, f);
	fclose(f);
	/* lanes read "lane[0]:  2:posix/memory.0 md[2] ..." */
	size_t o = 0;
	buf[0] = '\0';
	for (char *s = text; s && (s = strstr(s, "lane[")); s++) {
		char *c = strchr(s, ':');
		if (!c)
			break;
		c++;
		while (*c == ' ')
			c++;
		char *colon = strchr(c, ':');
		char *sp = strpbrk(c, " \n");
		if (!colon || !sp || colon > sp)
			continue;
		int n = (int)(sp - colon - 1);
		char tok[96];
		snprintf(tok, sizeof(tok), "%.*s", n, colon + 1);
		if (!strstr(buf, tok) && o + strlen(tok) + 2 < cap)
			o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? "," : "", tok);
	}
	free(text);
	return 0;
}

/* Read exactly n bytes before the deadline. */
static int read_full(int fd, uint8_t *b, size_t n, uint64_t end_ns, struct iod_err *e)
{
	size_t got = 0;
	while (got < n) {
		uint64_t now = iod_clock_now_ns();
		if (now >= end_ns)
			return iod_err_set(e, -ETIMEDOUT,
			                   "xfer: peer metadata did not arrive in time");
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int pr = poll(&pf, 1, (int)((end_ns - now) / 1000000 + 1));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return iod_err_set(e, -errno, "xfer: waiting for peer metadata: %s",
			                   strerror(errno));
		if (pr == 0)
			continue;
		ssize_t r = read(fd, b + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return iod_err_set(e, -errno, "xfer: reading peer metadata: %s",
			                   strerror(errno));
		if (r == 0)
			return iod_err_set(e, -ECONNRESET,
			                   "xfer: the peer closed before sending its metadata");
		got += (size_t)r;
	}
	return 0;
}

int iod_xfer_md_send_fd(struct iod_xfer *x, int wfd, struct iod_err *e)
{
	/* 128 KiB: on the heap, not in static TLS (iod_xfer_md_get says why) */
	uint8_t *blob = malloc(IOD_XFER_MD_BYTES_MAX + 4);
	size_t len = 0;
	if (!blob)
		return iod_err_set(e, -ENOMEM, "xfer: out of memory");
	int rv = iod_xfer_md_get(x, blob + 4, IOD_XFER_MD_BYTES_MAX, &len, e);
	if (rv) {
		free(blob);
		return rv;
	}
	for (unsigned i = 0; i < 4; i++)
		blob[i] = (uint8_t)(len >> (8 * i));
	size_t off = 0;
	while (off < len + 4) {
		ssize_t w = write(wfd, blob + off, len + 4 - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rv = iod_err_set(e, -errno, "xfer: sending metadata: %s", strerror(errno));
			break;
		}
		off += (size_t)w;
	}
	free(blob);
	return rv;
}

int iod_xfer_md_recv_fd(int rfd, uint8_t *buf, size_t cap, size_t *len, uint64_t deadline_ms,
                        struct iod_err *e)
{
	uint64_t end = iod_clock_now_ns() + deadline_ms * 1000000ull;
	uint8_t hdr[4];
	int rv = read_full(rfd, hdr, 4, end, e);
	if (rv)
		return rv;
	size_t n =
	    (size_t)hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
	if (n > IOD_XFER_MD_BYTES_MAX || n > cap)
		return iod_err_set(e, -EPROTO, "xfer: peer metadata of %zu bytes, at most %d", n,
		                   IOD_XFER_MD_BYTES_MAX);
	*len = n;
	return read_full(rfd, buf, n, end, e);
}

int iod_xfer_md_exchange_fd(struct iod_xfer *x, int wfd, int rfd, char *peer, struct iod_err *e)
{
	uint8_t *blob = malloc(IOD_XFER_MD_BYTES_MAX); /* not in static TLS */
	if (!blob)
		return iod_err_set(e, -ENOMEM, "xfer: out of memory");
	int rv = iod_xfer_md_send_fd(x, wfd, e);
	size_t len = 0;
	if (!rv)
		rv = iod_xfer_md_recv_fd(rfd, blob, IOD_XFER_MD_BYTES_MAX, &len, x->deadline_ms, e);
	if (!rv)
		rv = iod_xfer_md_load(x, blob, len, peer, e);
	free(blob);
	return rv;
}
