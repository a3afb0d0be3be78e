/*
 * xfer.h: libiod-xfer, a zero-copy transfer service over UCX, shaped like
 * NVIDIA NIXL: register memory, describe regions, post reads and writes
 * (single or batched) to a named peer, poll or get notified, deregister.
 *
 * A transfer moves bytes between registered regions with one-sided RMA
 * (ucp_put_nbx/ucp_get_nbx): shared memory (posix/sysv/cma) between
 * processes of one node, TCP across nodes, RDMA verbs where a device exists.
 * No staging copy is made by libiod-xfer; what the transport does underneath
 * is UCX's (docs/transfer.md says per transport).
 *
 * Peers meet through metadata blobs (NIXL's getLocalMD/loadRemoteMD): a
 * process gets its blob with iod_xfer_md_get() (its name, UCX worker address
 * and every registered region with its packed remote key) and hands it to
 * the other side, which loads it with iod_xfer_md_load(). How the blob
 * travels is the caller's: a pipe, a file, or an endpoint the agent publishes.
 *
 * The pure parts (wire format, region tables, limits, NIC choice) are in
 * src/xfer/wire.c and src/xfer/region.c; the UCX shell in src/xfer/xfer.c.
 * Every call returns 0 or a negative errno and fills a caller-owned iod_err;
 * nothing here prints. One struct iod_xfer is used by one thread.
 */
#ifndef IOD_XFER_H
#define IOD_XFER_H

#include "iod/base.h"
#include "iod/limits.h"
#include "iod/topo.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Transports a context may use (service_mesh.transport in docs/config.md). */
#define IOD_XFER_TRANSPORTS(X) \
	X(AUTO, "auto")        \
	X(SHM, "shm")          \
	X(TCP, "tcp")          \
	X(RDMA, "rdma")

enum iod_xfer_transport {
#define X(n, s) IOD_XFER_##n,
	IOD_XFER_TRANSPORTS(X)
#undef X
	    IOD_XFER_TRANSPORT_COUNT
};

const char *iod_xfer_transport_name(enum iod_xfer_transport t);
/* "shm" -> IOD_XFER_SHM; -EINVAL for an unknown name. */
int iod_xfer_transport_parse(const char *s, enum iod_xfer_transport *t);

/* Where memory lives. GPU memory needs CUDA and UCX built with it. */
enum iod_xfer_mem {
	IOD_XFER_MEM_HOST = 0, /* ordinary host memory */
	IOD_XFER_MEM_GPU = 1,  /* device memory (cudaMalloc); refused without CUDA */
};

enum iod_xfer_opcode {
	IOD_XFER_WRITE = 0, /* local -> remote (put) */
	IOD_XFER_READ = 1,  /* remote -> local (get) */
};

/* A slice of a registered region: the unit a transfer names. */
struct iod_xfer_desc {
	uint32_t region; /* region id (local: from register; remote: the peer's) */
	uint64_t offset; /* bytes from the region's start */
	uint64_t len;    /* bytes */
};

/* One operation of a posted batch. */
struct iod_xfer_op {
	enum iod_xfer_opcode op;     /* read or write */
	struct iod_xfer_desc local;  /* in this process */
	struct iod_xfer_desc remote; /* in the peer */
};

struct iod_xfer_opts {
	const char *name;                  /* this agent's name, unique among peers */
	enum iod_xfer_transport transport; /* AUTO: shm on one node, else rdma, else tcp */
	uint64_t deadline_ms;              /* per request and per wait; 0: IOD_XFER_DEADLINE_MS */
	uint64_t chunk_bytes;   /* large ops are cut into these; 0: IOD_XFER_CHUNK_BYTES */
	uint64_t reg_bytes_max; /* registered bytes at most; 0: IOD_XFER_REG_BYTES_MAX */
	const struct iod_topo_node *topo; /* for NIC choice; NULL: UCX's default devices */
	int numa;                         /* NUMA node the process runs on, -1 unknown */
	int gpu;                          /* GPU index it drives, -1 none */
};

struct iod_xfer;
struct iod_xfer_req;

int iod_xfer_create(const struct iod_xfer_opts *o, struct iod_xfer **out, struct iod_err *e);
/* Closes every peer (without waiting for them), frees every region and request. */
void iod_xfer_destroy(struct iod_xfer *x);

/* Register [addr, addr+len) and give it an id. -E2BIG past the region or
 * total limit, -ENOTSUP for GPU memory without CUDA. */
int iod_xfer_mem_register(struct iod_xfer *x, void *addr, uint64_t len, enum iod_xfer_mem mem,
                          uint32_t *id, struct iod_err *e);
/* Allocate and register len bytes: where the transport can share it
 * (UCX's sysv/posix shared memory), a peer on this node maps it and a write
 * is one user-space memcpy into it, no system call (UCX's rkey_ptr).
 * Freed by iod_xfer_mem_deregister. */
int iod_xfer_mem_alloc(struct iod_xfer *x, uint64_t len, void **ptr, uint32_t *id,
                       struct iod_err *e);
/* -ENOENT for an unknown id, -EBUSY while a request uses it. */
int iod_xfer_mem_deregister(struct iod_xfer *x, uint32_t id, struct iod_err *e);

/* This agent's metadata blob (name, worker address, regions with keys);
 * *len receives its size, -ENOSPC (and the size needed) if cap is short.
 * Register first: regions registered later need a new blob. */
int iod_xfer_md_get(struct iod_xfer *x, void *buf, size_t cap, size_t *len, struct iod_err *e);
/* Load a peer's blob and connect to it; peer (cap IOD_NAME_MAX) gets its
 * name. Loading the same name again replaces its regions. */
int iod_xfer_md_load(struct iod_xfer *x, const void *buf, size_t len, char *peer,
                     struct iod_err *e);

/* Address exchange over a pair of file descriptors (a pipe, a socket, a
 * file): write our blob length-prefixed (u32 little endian) to wfd, read
 * the peer's from rfd (deadline), load it. For processes that share no
 * control plane: tests, benchmarks, `iod xfer ring`. */
int iod_xfer_md_exchange_fd(struct iod_xfer *x, int wfd, int rfd, char *peer, struct iod_err *e);
/* Just the halves, for a hub that relays blobs: send ours, or read one
 * (into buf, cap at least IOD_XFER_MD_BYTES_MAX) and return its length. */
int iod_xfer_md_send_fd(struct iod_xfer *x, int wfd, struct iod_err *e);
int iod_xfer_md_recv_fd(int rfd, uint8_t *buf, size_t cap, size_t *len, uint64_t deadline_ms,
                        struct iod_err *e);

/* ---- a ring all-reduce over the context (src/xfer/ring.c) -------------- */

/*
 * Sum count int64 across n ranks in place. Every rank's region holds the
 * vector, then (n-1) scratch chunks: iod_xfer_ring_bytes(count, n) bytes,
 * the same layout in each. The right neighbour's region is remote_id of its
 * blob. Notifications carry tag+step (one byte), so back-to-back calls with
 * tags 2(n-1) apart are told apart.
 */
struct iod_xfer_ring {
	unsigned n, rank;         /* ranks, this one */
	const char *left, *right; /* peer names of rank-1 and rank+1 (mod n) */
	uint32_t id, remote_id;   /* our region, the right neighbour's */
	uint64_t count;           /* int64 elements */
	uint8_t tag;              /* first notification tag */
};
uint64_t iod_xfer_ring_bytes(uint64_t count, unsigned n);
int iod_xfer_ring_allreduce(struct iod_xfer *x, const struct iod_xfer_ring *g, int64_t *v,
                            struct iod_err *e);

/* ---- peers through the control plane (src/xfer/peers.c) ---------------- */

/*
 * A replica publishes its blob as the XferPeer object "<service>.<ordinal>"
 * (include/iod/objects.h; hex in "md") with the API client it is given (its
 * node's credentials, or a deployer's); its peers read it back by service
 * and ordinal. Publish after registering: the blob carries the regions.
 */
struct iod_api_client;
struct iod_xfer_self {
	const char *service;   /* the replica's service */
	uint32_t ordinal;      /* its ordinal (0..n-1 of the group) */
	const char *replica;   /* its replica name ("<service>-<ordinal>" when NULL) */
	const char *node;      /* its node (NULL: not said) */
	const char *transport; /* the transport it was created for (NULL: not said) */
};
int iod_xfer_publish_api(struct iod_xfer *x, struct iod_api_client *c,
                         const struct iod_xfer_self *me, struct iod_err *e);
/*
 * Wait until ordinals 0..n-1 of service have all published (polling the
 * API until deadline_ms from now; 0: the context's deadline), load every
 * one but self, and put ordinal i's peer name in names[i] (names has n
 * rows; self's row is this context's name). -ETIMEDOUT naming the
 * ordinals still missing; -EINVAL for n of 0 or past IOD_XFER_PEERS_MAX.
 */
int iod_xfer_peers_from_api(struct iod_xfer *x, struct iod_api_client *c, const char *service,
                            uint32_t n, uint32_t self, uint64_t deadline_ms,
                            char (*names)[IOD_NAME_MAX], struct iod_err *e);
/* A blob that does not load (its process gone: what a replica that died
 * left behind) counts as not yet published until its replica publishes a
 * new one; the -ETIMEDOUT message then says which and why. */
/* Delete our XferPeer at a clean exit, if it is still ours (not a
 * successor's). 0 also when it is gone. */
int iod_xfer_unpublish_api(struct iod_xfer *x, struct iod_api_client *c, const char *service,
                           uint32_t ordinal, struct iod_err *e);
/* Pure: the XferPeer object of a blob, and the blob of an object (buf of
 * cap bytes; its length). -EINVAL naming what is wrong. */
json_t *iod_xfer_peer_obj(const struct iod_xfer_self *me, const char *peer, const void *md,
                          size_t len);
int iod_xfer_peer_md(const json_t *v, uint8_t *buf, size_t cap, size_t *len, struct iod_err *e);
/* This agent's name (opts.name). */
const char *iod_xfer_name(const struct iod_xfer *x);
/* Its deadline per request and wait, ms (opts.deadline_ms). */
uint64_t iod_xfer_deadline(const struct iod_xfer *x);

/* Post n operations to peer, then (if notif != NULL) a notification the
 * peer sees after all of them have landed. The request completes when
 * everything is remotely complete. Errors: -ENOENT unknown peer or
 * unregistered region, -ERANGE a slice past its region, -E2BIG a batch past
 * IOD_XFER_BATCH_MAX, -ECONNRESET the peer failed. */
int iod_xfer_post(struct iod_xfer *x, const char *peer, const struct iod_xfer_op *ops, unsigned n,
                  const void *notif, size_t notif_len, struct iod_xfer_req **req,
                  struct iod_err *e);
/*
 * Signalled posts: the poll-on-the-last-word notification, for small
 * writes (what ucx_perftest's ucp_put_lat measures), instead of an active
 * message. With IOD_XFER_POST_SIGNAL the last 8 bytes of the last operation
 * (a write, its remote end 8-byte aligned) are the signal word: it lands
 * after every other byte of the batch is visible at the peer (mapped
 * shared memory: a release store after the copies; UCX puts: an endpoint
 * flush first, so an 8-byte post is one store or one put). The peer waits
 * for the value it expects with iod_xfer_signal_wait on that word of its
 * own region; the writer picks values the word did not hold (a sequence
 * number). No notification is queued (notif must be NULL). Drive the
 * request (req_poll / req_wait) as for a notification: when bytes went
 * through UCX the word goes from there, after their flush. The request
 * completes when the signal is locally complete: the peer's wait is the
 * remote completion. -EINVAL for a notification, a read last or a last
 * operation under 8 bytes or misaligned. flags 0 is iod_xfer_post.
 */
#define IOD_XFER_POST_SIGNAL 0x1u
int iod_xfer_post_flags(struct iod_xfer *x, const char *peer, const struct iod_xfer_op *ops,
                        unsigned n, const void *notif, size_t notif_len, unsigned flags,
                        struct iod_xfer_req **req, struct iod_err *e);
/* Wait until the 8-byte word at offset of our region holds value (an
 * acquire load, so the bytes written before it are visible), driving UCX
 * meanwhile. timeout_ms 0: the context's deadline. -ETIMEDOUT, -ECONNRESET
 * if the peer named (NULL: any) failed, -ENOENT unknown region, -ERANGE /
 * -EINVAL a word past the region or misaligned. */
int iod_xfer_signal_wait(struct iod_xfer *x, const char *from, uint32_t region, uint64_t offset,
                         uint64_t value, uint64_t timeout_ms, struct iod_err *e);
/* Drive it: 0 done, -EAGAIN still going, -ETIMEDOUT past its deadline,
 * another negative errno when it failed. */
int iod_xfer_req_poll(struct iod_xfer *x, struct iod_xfer_req *r, struct iod_err *e);
/* Poll until done, failed or deadline. */
int iod_xfer_req_wait(struct iod_xfer *x, struct iod_xfer_req *r, struct iod_err *e);
void iod_xfer_req_free(struct iod_xfer *x, struct iod_xfer_req *r);

/* Take the oldest notification: 0 (peer, msg, *len filled), -EAGAIN none.
 * peer has room for IOD_NAME_MAX. */
int iod_xfer_notif_get(struct iod_xfer *x, char *peer, void *msg, size_t cap, size_t *len);
/* Wait for one until timeout_ms (0: the context's deadline); -ETIMEDOUT
 * with a message naming the peers that went quiet; -ECONNRESET if the peer
 * named (NULL: any) failed. */
int iod_xfer_notif_wait(struct iod_xfer *x, const char *from, char *peer, void *msg, size_t cap,
                        size_t *len, uint64_t timeout_ms, struct iod_err *e);

/* One turn of UCX progress; returns nonzero if something happened. */
int iod_xfer_progress(struct iod_xfer *x);
/* The UCX transports and devices in use towards peer ("posix/memory,..."). */
int iod_xfer_peer_path(struct iod_xfer *x, const char *peer, char *buf, size_t cap,
                       struct iod_err *e);
/* The NIC chosen for this context (topology), "" when UCX picks. */
const char *iod_xfer_nic(const struct iod_xfer *x);

/* ---- pure parts (src/xfer/wire.c, src/xfer/region.c) --------------------- */

/* The wire format. Every message starts with this header (little endian):
 *   magic u32 "IODX", version u8, kind u8, reserved u16 (0), body_len u32.
 * A metadata blob (kind MD):  name_len u8, name, addr_len u16, worker
 * address, nregions u16, then per region: id u32, addr u64, len u64, mem u8,
 * rkey_len u16, rkey. A notification (kind NOTIF): name_len u8, name,
 * seq u64, msg_len u16, msg. */
#define IOD_XFER_MAGIC 0x58444f49u /* "IODX" little endian */
#define IOD_XFER_WIRE_VERSION 1
#define IOD_XFER_HDR_BYTES 12

enum iod_xfer_kind {
	IOD_XFER_KIND_MD = 1,    /* a metadata blob */
	IOD_XFER_KIND_NOTIF = 2, /* a notification */
};

/* A region as the wire carries it (pointers into the decoded buffer). */
struct iod_xfer_wire_region {
	uint32_t id;         /* the owner's region id */
	uint64_t addr;       /* virtual address in the owner */
	uint64_t len;        /* bytes */
	uint8_t mem;         /* enum iod_xfer_mem */
	const uint8_t *rkey; /* packed UCX remote key */
	uint16_t rkey_len;   /* bytes of rkey */
};

struct iod_xfer_wire_md {
	char name[IOD_NAME_MAX];                                   /* the agent */
	const uint8_t *addr;                                       /* UCX worker address */
	uint16_t addr_len;                                         /* bytes of addr */
	uint16_t nregions;                                         /* regions used */
	struct iod_xfer_wire_region regions[IOD_XFER_REGIONS_MAX]; /* its regions */
};

struct iod_xfer_wire_notif {
	char name[IOD_NAME_MAX]; /* the sender */
	uint64_t seq;            /* the sender's notification sequence */
	const uint8_t *msg;      /* the caller's payload */
	uint16_t msg_len;        /* bytes of msg (<= IOD_XFER_NOTIF_BYTES_MAX) */
};

/* Encode: bytes written, -ENOSPC (cap short) or -EINVAL (a field out of range). */
int iod_xfer_wire_md_encode(const struct iod_xfer_wire_md *m, uint8_t *buf, size_t cap,
                            struct iod_err *e);
int iod_xfer_wire_notif_encode(const struct iod_xfer_wire_notif *n, uint8_t *buf, size_t cap,
                               struct iod_err *e);
/* Decode a whole message; -EPROTO with where and what for anything malformed.
 * The result points into buf. */
int iod_xfer_wire_md_decode(const uint8_t *buf, size_t len, struct iod_xfer_wire_md *m,
                            struct iod_err *e);
int iod_xfer_wire_notif_decode(const uint8_t *buf, size_t len, struct iod_xfer_wire_notif *n,
                               struct iod_err *e);

/* The table of local regions: ids, bounds, the registered-bytes limit. */
struct iod_xfer_region {
	uint32_t id;   /* nonzero while used */
	uint64_t addr; /* start */
	uint64_t len;  /* bytes */
	uint8_t mem;   /* enum iod_xfer_mem */
	int16_t nic;   /* topology NIC index chosen for it, -1 UCX's choice */
	uint32_t busy; /* requests using it */
	void *shell;   /* the shell's handle (ucp_mem_h) */
};

struct iod_xfer_regions {
	struct iod_xfer_region r[IOD_XFER_REGIONS_MAX]; /* slots; id 0 = free */
	uint32_t next_id;                               /* next id to give (never 0) */
	uint64_t bytes;                                 /* registered bytes in total */
	uint64_t bytes_max;                             /* limit on bytes */
};

void iod_xfer_regions_init(struct iod_xfer_regions *t, uint64_t bytes_max);
/* Add a region; -E2BIG past IOD_XFER_REGION_BYTES_MAX, bytes_max or the
 * slot count, -EINVAL for len 0. Returns the slot's pointer in *out. */
int iod_xfer_regions_add(struct iod_xfer_regions *t, uint64_t addr, uint64_t len, uint8_t mem,
                         struct iod_xfer_region **out, struct iod_err *e);
struct iod_xfer_region *iod_xfer_regions_find(struct iod_xfer_regions *t, uint32_t id);
int iod_xfer_regions_remove(struct iod_xfer_regions *t, uint32_t id, struct iod_err *e);
/* A slice is inside a region of [addr, addr+len): 0, -ERANGE, -EINVAL (len 0). */
int iod_xfer_desc_check(const struct iod_xfer_desc *d, uint64_t region_len, const char *side,
                        struct iod_err *e);

/* A signalled post's last operation (IOD_XFER_POST_SIGNAL): a write of at
 * least 8 bytes whose remote end (remote_end: the peer's address of its
 * last byte + 1) is 8-byte aligned. 0, or -EINVAL naming what is wrong. */
int iod_xfer_signal_check(const struct iod_xfer_op *last, uint64_t remote_end, struct iod_err *e);
/* The signal word a waiter polls: 8 bytes at offset inside a region of
 * region_len bytes at addr, aligned. 0, -ERANGE, -EINVAL. */
int iod_xfer_signal_word_check(uint64_t addr, uint64_t region_len, uint64_t offset,
                               struct iod_err *e);

/* The NIC for a buffer: for GPU memory the NIC with the closest PCIe path
 * to that GPU, for host memory a NIC on the buffer's NUMA node; ties go to
 * the faster port, then the lower index. -1 when the node has no NIC. */
int iod_xfer_nic_choose(const struct iod_topo_node *n, enum iod_xfer_mem mem, int gpu, int numa);

/* Cut [0, len) into pieces of at most chunk bytes: how many. */
static inline uint64_t iod_xfer_chunks(uint64_t len, uint64_t chunk)
{
	return chunk ? (len + chunk - 1) / chunk : 1;
}

#endif
