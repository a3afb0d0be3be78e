/*
 * test_xfer.c: libiod-xfer (include/iod/xfer.h): the pure wire format,
 * region table and NIC choice, then real transfers between two processes
 * over shared memory and TCP, checked byte-exact with SHA-256, a peer killed
 * mid-transfer, and the registration limit.
 *
 * UCX and ASan: UCX's memory hooks (malloc/mmap interposition for its
 * registration cache) and ASan's interceptors did not conflict here with
 * UCX 1.13, so the tests keep UCX's defaults. UCX reads UCX_MEM_* when the
 * library loads, so a setenv() in the program would be too late; where a
 * conflict shows, run with UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no in the
 * environment (docs/transfer.md).
 */
#include "harness.h"
#include "iod/xfer.h"

#include <gnutls/crypto.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- pure: wire format ----------------------------------------------- */

TEST(wire_md_roundtrip_and_every_truncation_fails)
{
	static struct iod_xfer_wire_md m, d;
	memset(&m, 0, sizeof(m));
	snprintf(m.name, sizeof(m.name), "train-0");
	uint8_t addr[37], key[19];
	for (unsigned i = 0; i < sizeof(addr); i++)
		addr[i] = (uint8_t)(i * 7);
	for (unsigned i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(200 - i);
	m.addr = addr;
	m.addr_len = sizeof(addr);
	m.nregions = 2;
	m.regions[0] = (struct iod_xfer_wire_region){7, 0x7f0000001000ull, 1 << 20, 0, key, 19};
	m.regions[1] = (struct iod_xfer_wire_region){9, 0x7f0000900000ull, 4096, 0, key, 5};
	uint8_t buf[512];
	struct iod_err e = {0};
	int n = iod_xfer_wire_md_encode(&m, buf, sizeof(buf), &e);
	CHECK_EQ(n, IOD_XFER_HDR_BYTES + 1 + 7 + 2 + 37 + 2 + 2 * 23 + 19 + 5);
	CHECK_EQ(iod_xfer_wire_md_decode(buf, (size_t)n, &d, &e), 0);
	CHECK_STR(d.name, "train-0");
	CHECK_EQ(d.addr_len, 37);
	CHECK(memcmp(d.addr, addr, 37) == 0);
	CHECK_EQ(d.nregions, 2);
	CHECK_EQ(d.regions[1].id, 9);
	CHECK_U64(d.regions[0].addr, 0x7f0000001000ull);
	CHECK_U64(d.regions[0].len, 1 << 20);
	CHECK_EQ(d.regions[1].rkey_len, 5);
	CHECK(memcmp(d.regions[0].rkey, key, 19) == 0);
	for (int cut = 0; cut < n; cut++)
		CHECK_MSG(iod_xfer_wire_md_decode(buf, (size_t)cut, &d, &e) == -EPROTO,
		          "prefix of %d bytes decoded", cut);
	/* too small a buffer to encode into */
	CHECK_EQ(iod_xfer_wire_md_encode(&m, buf, 40, &e), -ENOSPC);
}

TEST(wire_md_rejects_bad_fields_with_position)
{
	static struct iod_xfer_wire_md m, d;
	memset(&m, 0, sizeof(m));
	snprintf(m.name, sizeof(m.name), "a");
	uint8_t addr[4] = {1, 2, 3, 4}, key[2] = {5, 6};
	m.addr = addr;
	m.addr_len = 4;
	m.nregions = 1;
	m.regions[0] = (struct iod_xfer_wire_region){1, 4096, 8, 0, key, 2};
	uint8_t buf[128];
	struct iod_err e = {0};
	int n = iod_xfer_wire_md_encode(&m, buf, sizeof(buf), &e);
	CHECK(n > 0);
	uint8_t bad[128];
	memcpy(bad, buf, (size_t)n);
	bad[0] ^= 1;
	CHECK_EQ(iod_xfer_wire_md_decode(bad, (size_t)n, &d, &e), -EPROTO);
	CHECK_CONTAINS(e.msg, "bad magic");
	memcpy(bad, buf, (size_t)n);
	bad[4] = 2;
	CHECK_EQ(iod_xfer_wire_md_decode(bad, (size_t)n, &d, &e), -EPROTO);
	CHECK_CONTAINS(e.msg, "wire version 2");
	memcpy(bad, buf, (size_t)n);
	bad[5] = IOD_XFER_KIND_NOTIF;
	CHECK_EQ(iod_xfer_wire_md_decode(bad, (size_t)n, &d, &e), -EPROTO);
	CHECK_CONTAINS(e.msg, "kind");
	/* region id 0 (region starts after hdr 12 + name 2 + addr 6 + count 2) */
	memcpy(bad, buf, (size_t)n);
	memset(bad + 22, 0, 4);
	CHECK_EQ(iod_xfer_wire_md_decode(bad, (size_t)n, &d, &e), -EPROTO);
	CHECK_CONTAINS(e.msg, "byte 22");
	/* trailing garbage: body_len disagrees */
	memcpy(bad, buf, (size_t)n);
	bad[n] = 0;
	CHECK_EQ(iod_xfer_wire_md_decode(bad, (size_t)n + 1, &d, &e), -EPROTO);
	CHECK_CONTAINS(e.msg, "body_len");
	/* a name with a control byte */
	memcpy(bad, buf, (size_t)n);
	bad[13] = '\n';
	CHECK_EQ(iod_xfer_wire_md_decode(bad, (size_t)n, &d, &e), -EPROTO);
	CHECK_CONTAINS(e.msg, "non-printable");
}

TEST(wire_notif_roundtrip_and_limit)
{
	struct iod_xfer_wire_notif n = {0}, d;
	snprintf(n.name, sizeof(n.name), "peer-1");
	n.seq = 0x0102030405060708ull;
	n.msg = (const uint8_t *)"step 42";
	n.msg_len = 7;
	uint8_t buf[600];
	struct iod_err e = {0};
	int len = iod_xfer_wire_notif_encode(&n, buf, sizeof(buf), &e);
	CHECK_EQ(len, IOD_XFER_HDR_BYTES + 1 + 6 + 8 + 2 + 7);
	CHECK_EQ(iod_xfer_wire_notif_decode(buf, (size_t)len, &d, &e), 0);
	CHECK_STR(d.name, "peer-1");
	CHECK_U64(d.seq, 0x0102030405060708ull);
	CHECK_EQ(d.msg_len, 7);
	CHECK(memcmp(d.msg, "step 42", 7) == 0);
	for (int cut = 0; cut < len; cut++)
		CHECK(iod_xfer_wire_notif_decode(buf, (size_t)cut, &d, &e) == -EPROTO);
	n.msg_len = IOD_XFER_NOTIF_BYTES_MAX + 1;
	CHECK_EQ(iod_xfer_wire_notif_encode(&n, buf, sizeof(buf), &e), -E2BIG);
}

/* ---- pure: regions, slices, NIC choice -------------------------------- */

TEST(regions_limits_ids_and_busy)
{
	static struct iod_xfer_regions t;
	iod_xfer_regions_init(&t, 1 << 20);
	struct iod_xfer_region *r = NULL, *r2 = NULL;
	struct iod_err e = {0};
	CHECK_EQ(iod_xfer_regions_add(&t, 4096, 0, 0, &r, &e), -EINVAL);
	CHECK_EQ(iod_xfer_regions_add(&t, 4096, 768 << 10, 0, &r, &e), 0);
	CHECK_EQ(r->id, 1);
	CHECK_EQ(iod_xfer_regions_add(&t, 1 << 24, 512 << 10, 0, &r2, &e), -E2BIG);
	CHECK_CONTAINS(e.msg, "past the limit");
	CHECK(r2 == NULL);
	CHECK_EQ(iod_xfer_regions_add(&t, 1 << 24, 256 << 10, 0, &r2, &e), 0);
	CHECK_EQ(r2->id, 2);
	CHECK_U64(t.bytes, 1 << 20);
	r->busy = 1;
	CHECK_EQ(iod_xfer_regions_remove(&t, 1, &e), -EBUSY);
	r->busy = 0;
	CHECK_EQ(iod_xfer_regions_remove(&t, 1, &e), 0);
	CHECK_EQ(iod_xfer_regions_remove(&t, 1, &e), -ENOENT);
	CHECK(iod_xfer_regions_find(&t, 2) == r2);
	CHECK_U64(t.bytes, 256 << 10);
	/* a single region past the per-region limit */
	iod_xfer_regions_init(&t, 0);
	CHECK_EQ(iod_xfer_regions_add(&t, 4096, IOD_XFER_REGION_BYTES_MAX + 1, 0, &r, &e), -E2BIG);
	/* the slot count */
	for (unsigned i = 0; i < IOD_XFER_REGIONS_MAX; i++)
		CHECK_EQ(iod_xfer_regions_add(&t, 4096 * (i + 1), 16, 0, &r, &e), 0);
	CHECK_EQ(iod_xfer_regions_add(&t, 1 << 30, 16, 0, &r, &e), -E2BIG);
}

TEST(desc_check_bounds)
{
	struct iod_err e = {0};
	struct iod_xfer_desc d = {3, 0, 100};
	CHECK_EQ(iod_xfer_desc_check(&d, 100, "local", &e), 0);
	d.offset = 1;
	CHECK_EQ(iod_xfer_desc_check(&d, 100, "remote", &e), -ERANGE);
	CHECK_CONTAINS(e.msg, "too large for region 3");
	d = (struct iod_xfer_desc){3, UINT64_MAX, 2};
	CHECK_EQ(iod_xfer_desc_check(&d, 100, "local", &e), -ERANGE);
	d = (struct iod_xfer_desc){3, 0, 0};
	CHECK_EQ(iod_xfer_desc_check(&d, 100, "local", &e), -EINVAL);
	CHECK_U64(iod_xfer_chunks(0, 8), 0);
	CHECK_U64(iod_xfer_chunks(17, 8), 3);
}

TEST(nic_choice_follows_the_topology)
{
	static struct iod_topo_node n;
	struct iod_err e = {0};
	CHECK_EQ(iod_topo_model_load("dgx-h100", &n, &e), 0);
	/* the DGX H100 pairs GPUs with NICs behind the same PCIe switch */
	for (int g = 0; g < 8; g++) {
		int nic = iod_xfer_nic_choose(&n, IOD_XFER_MEM_GPU, g, -1);
		CHECK(nic >= 0);
		int gdev = -1;
		for (unsigned d = 0; d < n.ndevices; d++)
			if (n.devices[d].kind == IOD_TOPO_DEV_GPU && n.devices[d].gpu_index == g)
				gdev = (int)d;
		CHECK(gdev >= 0);
		unsigned best = 255;
		for (unsigned i = 0; i < n.nnics; i++)
			if (n.link[gdev][n.nic[i]].pcie < best)
				best = n.link[gdev][n.nic[i]].pcie;
		CHECK_EQ(n.link[gdev][n.nic[nic]].pcie, best);
	}
	CHECK_EQ(iod_xfer_nic_choose(&n, IOD_XFER_MEM_GPU, 2, -1), 2);
	CHECK_EQ(iod_xfer_nic_choose(&n, IOD_XFER_MEM_GPU, 6, -1), 6);
	/* host memory: a NIC on its NUMA node */
	CHECK_EQ(n.devices[n.nic[iod_xfer_nic_choose(&n, IOD_XFER_MEM_HOST, -1, 1)]].numa, 1);
	CHECK_EQ(n.devices[n.nic[iod_xfer_nic_choose(&n, IOD_XFER_MEM_HOST, -1, 0)]].numa, 0);
	CHECK_EQ(iod_xfer_nic_choose(NULL, IOD_XFER_MEM_HOST, -1, 0), -1);
	enum iod_xfer_transport t = IOD_XFER_AUTO;
	CHECK_EQ(iod_xfer_transport_parse("tcp", &t), 0);
	CHECK_EQ(t, IOD_XFER_TCP);
	CHECK_EQ(iod_xfer_transport_parse("nvlink", &t), -EINVAL);
	CHECK_STR(iod_xfer_transport_name(IOD_XFER_SHM), "shm");
}

/* ---- the UCX shell ---------------------------------------------------- */

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	uint32_t s = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 17;
		s ^= s << 5;
		b[i] = (uint8_t)s;
	}
}

static void sha(const void *b, size_t n, uint8_t out[32])
{
	IOD_ASSERT(gnutls_hash_fast(GNUTLS_DIG_SHA256, b, n, out) == 0);
}

TEST(register_beyond_the_limit_is_e2big)
{
	struct iod_xfer_opts o = {
	    .name = "lim", .transport = IOD_XFER_SHM, .reg_bytes_max = 1 << 20};
	struct iod_xfer *x = NULL;
	struct iod_err e = {0};
	CHECK_EQ(iod_xfer_create(&o, &x, &e), 0);
	static uint8_t a[1 << 20], b[4096];
	uint32_t ia = 0, ib = 0;
	CHECK_EQ(iod_xfer_mem_register(x, a, sizeof(a), IOD_XFER_MEM_HOST, &ia, &e), 0);
	int rv = iod_xfer_mem_register(x, b, sizeof(b), IOD_XFER_MEM_HOST, &ib, &e);
	if (rv != -E2BIG)
		iod_xfer_destroy(x);
	CHECK_EQ(rv, -E2BIG);
	CHECK_CONTAINS(e.msg, "past the limit");
	CHECK_EQ(iod_xfer_mem_register(x, b, sizeof(b), IOD_XFER_MEM_GPU, &ib, &e), -ENOTSUP);
	CHECK_EQ(iod_xfer_mem_deregister(x, ia, &e), 0);
	CHECK_EQ(iod_xfer_mem_deregister(x, ia, &e), -ENOENT);
	CHECK_EQ(iod_xfer_mem_register(x, b, sizeof(b), IOD_XFER_MEM_HOST, &ib, &e), 0);
	iod_xfer_destroy(x);
}

TEST(post_errors_unknown_peer_unregistered_region_too_large)
{
	struct iod_xfer_opts o = {.name = "self", .transport = IOD_XFER_SHM};
	struct iod_xfer *x = NULL;
	struct iod_err e = {0};
	CHECK_EQ(iod_xfer_create(&o, &x, &e), 0);
	static uint8_t a[8192], b[4096];
	uint32_t ia = 0, ib = 0;
	CHECK_EQ(iod_xfer_mem_register(x, a, sizeof(a), IOD_XFER_MEM_HOST, &ia, &e), 0);
	CHECK_EQ(iod_xfer_mem_register(x, b, sizeof(b), IOD_XFER_MEM_HOST, &ib, &e), 0);
	struct iod_xfer_op op = {IOD_XFER_WRITE, {ia, 0, 4096}, {ib, 0, 4096}};
	struct iod_xfer_req *r = NULL;
	int rv = iod_xfer_post(x, "nobody", &op, 1, NULL, 0, &r, &e);
	CHECK_EQ(rv, -ENOENT);
	CHECK_CONTAINS(e.msg, "no peer \"nobody\"");
	/* ourselves as a peer (UCX's self transport) */
	static uint8_t md[IOD_XFER_MD_BYTES_MAX];
	size_t ml = 0;
	char peer[IOD_NAME_MAX];
	CHECK_EQ(iod_xfer_md_get(x, md, sizeof(md), &ml, &e), 0);
	CHECK_EQ(iod_xfer_md_load(x, md, ml, peer, &e), 0);
	CHECK_STR(peer, "self");
	op.local.region = 99;
	CHECK_EQ(iod_xfer_post(x, "self", &op, 1, NULL, 0, &r, &e), -ENOENT);
	CHECK_CONTAINS(e.msg, "local region 99 is not registered");
	op.local.region = ia;
	op.remote.region = 98;
	CHECK_EQ(iod_xfer_post(x, "self", &op, 1, NULL, 0, &r, &e), -ENOENT);
	CHECK_CONTAINS(e.msg, "has no region 98");
	op.remote.region = ib;
	op.local.len = op.remote.len = 8192;
	CHECK_EQ(iod_xfer_post(x, "self", &op, 1, NULL, 0, &r, &e), -ERANGE);
	CHECK_CONTAINS(e.msg, "too large for region");
	/* a real write to ourselves, and its notification */
	fill(a, sizeof(a), 5);
	op.local.len = op.remote.len = 4096;
	op.local.offset = 4096;
	CHECK_EQ(iod_xfer_post(x, "self", &op, 1, "hi", 2, &r, &e), 0);
	CHECK_EQ(iod_xfer_mem_deregister(x, ia, &e), -EBUSY);
	rv = iod_xfer_req_wait(x, r, &e);
	iod_xfer_req_free(x, r);
	CHECK_MSG(rv == 0, "%s", e.msg);
	CHECK(memcmp(a + 4096, b, 4096) == 0);
	char msg[16];
	size_t len = 0;
	CHECK_EQ(iod_xfer_notif_wait(x, "self", peer, msg, sizeof(msg), &len, 1000, &e), 0);
	CHECK_EQ(len, 2);
	CHECK(memcmp(msg, "hi", 2) == 0);
	CHECK_EQ(iod_xfer_notif_wait(x, NULL, peer, msg, sizeof(msg), &len, 50, &e), -ETIMEDOUT);
	CHECK_CONTAINS(e.msg, "no notification");
	iod_xfer_destroy(x);
}

/* A receiver child: allocates `size` shared bytes (iod_xfer_mem_alloc), exchanges metadata over the
 * pipes, waits for `count` notifications and answers each with the SHA-256
 * of its buffer. Exits 0 when done. The 60 s deadline bounds a hang; the
 * byte-exact SHA-256 is the check. 20 s was missed by the 256 MiB transfers
 * under sanitizers at load 9, with make test running two unit programs at
 * once. */
/* The signal word a signalled test transfer ends with ("SIGNAL!!"). */
#define SIGNAL_WORD 0x2121414c414e4749ull

static int receiver(enum iod_xfer_transport t, size_t size, int wfd, int rfd, unsigned count,
                    bool signal)
{
	struct iod_xfer_opts o = {.name = "rx", .transport = t, .deadline_ms = 60000};
	struct iod_xfer *x = NULL;
	struct iod_err e = {0};
	uint8_t *buf = NULL;
	uint32_t id = 0;
	char peer[IOD_NAME_MAX];
	/* 1 MiB goes to registered heap memory (UCX's cma path on shm), the
	 * other sizes to allocated shared memory (mapped by the writer) */
	bool heap = size == (1u << 20);
	if (heap)
		buf = calloc(1, size);
	if (iod_xfer_create(&o, &x, &e) ||
	    (heap ? iod_xfer_mem_register(x, buf, size, IOD_XFER_MEM_HOST, &id, &e)
	          : iod_xfer_mem_alloc(x, size, (void **)&buf, &id, &e)) ||
	    iod_xfer_md_exchange_fd(x, wfd, rfd, peer, &e)) {
		fprintf(stderr, "receiver: %s\n", e.msg);
		return 1;
	}
	for (unsigned i = 0; i < count; i++) {
		char msg[8];
		size_t len = 0;
		/* signalled: wait for the last word, which lands after the rest */
		if (signal ? iod_xfer_signal_wait(x, peer, id, size - 8, SIGNAL_WORD, 0, &e)
		           : iod_xfer_notif_wait(x, peer, peer, msg, sizeof(msg), &len, 0, &e)) {
			fprintf(stderr, "receiver: %s\n", e.msg);
			return 1;
		}
		uint8_t d[32];
		sha(buf, size, d);
		if (write(wfd, d, 32) != 32)
			return 1;
	}
	iod_xfer_destroy(x);
	if (heap)
		free(buf);
	return 0;
}

struct pair {
	pid_t pid; /* the child */
	int wfd;   /* to the child */
	int rfd;   /* from the child */
};

/* The receiver runs in a fresh process image: UCX's global state (its
 * async thread) does not survive fork(), so the child re-executes this
 * program, which runs receiver() from a constructor before any test. */
__attribute__((constructor(200))) static void receiver_main(void)
{
	const char *c = getenv("IOD_XFER_TEST_CHILD");
	if (!c)
		return;
	unsigned t = 0, count = 0, signal = 0;
	size_t size = 0;
	int wfd = -1, rfd = -1;
	if (sscanf(c, "%u:%zu:%u:%d:%d:%u", &t, &size, &count, &wfd, &rfd, &signal) != 6)
		_exit(2);
	_exit(receiver((enum iod_xfer_transport)t, size, wfd, rfd, count, signal));
}

static int spawn_receiver_mode(struct pair *p, enum iod_xfer_transport t, size_t size,
                               unsigned count, bool signal)
{
	int a[2], b[2];
	if (pipe(a) || pipe(b))
		return -errno;
	fflush(NULL);
	p->pid = fork();
	if (p->pid == 0) {
		close(a[1]);
		close(b[0]);
		char env[128];
		snprintf(env, sizeof(env), "%u:%zu:%u:%d:%d:%u", (unsigned)t, size, count, b[1],
		         a[0], (unsigned)signal);
		setenv("IOD_XFER_TEST_CHILD", env, 1);
		execl("/proc/self/exe", "test_xfer", (char *)NULL);
		_exit(127);
	}
	close(a[0]);
	close(b[1]);
	p->wfd = a[1];
	p->rfd = b[0];
	return p->pid > 0 ? 0 : -errno;
}

static int spawn_receiver(struct pair *p, enum iod_xfer_transport t, size_t size, unsigned count)
{
	return spawn_receiver_mode(p, t, size, count, false);
}

static int reap(struct pair *p)
{
	int st = 0;
	close(p->wfd);
	close(p->rfd);
	if (waitpid(p->pid, &st, 0) != p->pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Write `size` bytes to a receiver process in batches of 4 ops (1 op when
 * small) and check its SHA-256 matches ours. signal: a signalled post (no
 * notification; the receiver polls the last word, SIGNAL_WORD). */
static void transfer_exact_mode(enum iod_xfer_transport t, size_t size, bool signal)
{
	struct pair p;
	CHECK_EQ(spawn_receiver_mode(&p, t, size, 1, signal), 0);
	struct iod_xfer_opts o = {.name = "tx", .transport = t, .deadline_ms = 60000};
	struct iod_xfer *x = NULL;
	struct iod_err e = {0};
	uint8_t *buf = malloc(size);
	CHECK(buf);
	fill(buf, size, (uint32_t)size);
	if (signal) {
		uint64_t w = SIGNAL_WORD;
		memcpy(buf + size - 8, &w, 8);
	}
	uint32_t id = 0;
	char peer[IOD_NAME_MAX] = "";
	int rv = iod_xfer_create(&o, &x, &e);
	if (!rv)
		rv = iod_xfer_mem_register(x, buf, size, IOD_XFER_MEM_HOST, &id, &e);
	if (!rv)
		rv = iod_xfer_md_exchange_fd(x, p.wfd, p.rfd, peer, &e);
	struct iod_xfer_op ops[4];
	unsigned nops = size >= 64 ? 4 : 1;
	size_t q = size / nops;
	for (unsigned i = 0; i < nops; i++)
		ops[i] =
		    (struct iod_xfer_op){IOD_XFER_WRITE,
		                         {id, i * q, i == nops - 1 ? size - (nops - 1) * q : q},
		                         {1, i * q, i == nops - 1 ? size - (nops - 1) * q : q}};
	struct iod_xfer_req *r = NULL;
	if (!rv)
		rv = iod_xfer_post_flags(x, peer, ops, nops, signal ? NULL : "done", signal ? 0 : 4,
		                         signal ? IOD_XFER_POST_SIGNAL : 0, &r, &e);
	if (!rv) {
		rv = iod_xfer_req_wait(x, r, &e);
		iod_xfer_req_free(x, r);
	}
	uint8_t want[32], got[32];
	sha(buf, size, want);
	ssize_t n = rv ? 0 : read(p.rfd, got, 32);
	char path[256] = "";
	if (x)
		iod_xfer_peer_path(x, peer, path, sizeof(path), NULL);
	iod_xfer_destroy(x);
	free(buf);
	int st = reap(&p);
	CHECK_MSG(rv == 0, "%s", e.msg);
	CHECK_EQ(n, 32);
	CHECK_MSG(memcmp(want, got, 32) == 0, "SHA-256 differs after %zu bytes over %s (%s)", size,
	          iod_xfer_transport_name(t), path);
	CHECK_EQ(st, 0);
	/* the path is the transport asked for */
	if (t == IOD_XFER_SHM)
		CHECK_MSG(strstr(path, "cma") || strstr(path, "posix") || strstr(path, "sysv"),
		          "%s", path);
	else
		CHECK_CONTAINS(path, "tcp");
}

static void transfer_exact(enum iod_xfer_transport t, size_t size)
{
	transfer_exact_mode(t, size, false);
}

/* Signalled posts: one 8-byte put or store (the latency path), 1 MiB into
 * registered heap memory (UCX's cma on shm: flushed before the signal) and
 * 4 MiB into allocated shared memory (memcpy, then the release store). */
static void signal_exact(enum iod_xfer_transport t)
{
	static const size_t sizes[] = {8, 1u << 20, 4u << 20};
	for (unsigned i = 0; i < 3 && !iod_test_failed(); i++)
		transfer_exact_mode(t, sizes[i], true);
}

TEST(shm_signalled_8b_1m_4m_byte_exact)
{
	signal_exact(IOD_XFER_SHM);
}

TEST(tcp_signalled_8b_1m_4m_byte_exact)
{
	signal_exact(IOD_XFER_TCP);
}

TEST(shm_1k_1m_256m_byte_exact)
{
	transfer_exact(IOD_XFER_SHM, 1024);
	if (iod_test_failed())
		return;
	transfer_exact(IOD_XFER_SHM, 1 << 20);
	if (iod_test_failed())
		return;
	transfer_exact(IOD_XFER_SHM, 256u << 20);
}

TEST(tcp_1k_1m_256m_byte_exact)
{
	transfer_exact(IOD_XFER_TCP, 1024);
	if (iod_test_failed())
		return;
	transfer_exact(IOD_XFER_TCP, 1 << 20);
	if (iod_test_failed())
		return;
	transfer_exact(IOD_XFER_TCP, 256u << 20);
}

/* A request slot is reused: a post without a notification after one with
 * must send none (the slot kept notif_len, and sent "hi" again). */
TEST(a_post_without_notification_after_one_with_sends_none)
{
	struct iod_xfer_opts o = {.name = "self", .transport = IOD_XFER_SHM};
	struct iod_xfer *x = NULL;
	struct iod_err e = {0};
	CHECK_EQ(iod_xfer_create(&o, &x, &e), 0);
	static uint8_t a[4096], b[4096];
	uint32_t ia = 0, ib = 0;
	CHECK_EQ(iod_xfer_mem_register(x, a, sizeof(a), IOD_XFER_MEM_HOST, &ia, &e), 0);
	CHECK_EQ(iod_xfer_mem_register(x, b, sizeof(b), IOD_XFER_MEM_HOST, &ib, &e), 0);
	static uint8_t md[IOD_XFER_MD_BYTES_MAX];
	size_t ml = 0;
	char peer[IOD_NAME_MAX], msg[8];
	CHECK_EQ(iod_xfer_md_get(x, md, sizeof(md), &ml, &e), 0);
	CHECK_EQ(iod_xfer_md_load(x, md, ml, peer, &e), 0);
	struct iod_xfer_op op = {IOD_XFER_WRITE, {ia, 0, 4096}, {ib, 0, 4096}};
	size_t len = 0;
	for (int round = 0; round < 2; round++) {
		struct iod_xfer_req *r = NULL;
		CHECK_EQ(
		    iod_xfer_post(x, "self", &op, 1, round ? NULL : "hi", round ? 0 : 2, &r, &e),
		    0);
		int rv = iod_xfer_req_wait(x, r, &e);
		iod_xfer_req_free(x, r);
		CHECK_MSG(rv == 0, "%s", e.msg);
		rv = iod_xfer_notif_wait(x, "self", peer, msg, sizeof(msg), &len, 200, &e);
		if (round == 0)
			CHECK_EQ(rv, 0);
		else
			CHECK_MSG(rv == -ETIMEDOUT, "a second notification (rv %d)", rv);
	}
	iod_xfer_destroy(x);
}

/* Signalled posts to ourselves: the argument errors, then a write whose
 * last word is polled, and the waiter's own errors. */
TEST(signal_post_errors_and_a_write_to_self)
{
	struct iod_err e = {0};
	struct iod_xfer_op op = {IOD_XFER_READ, {1, 0, 16}, {2, 0, 16}};
	CHECK_EQ(iod_xfer_signal_check(&op, 16, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "end with a write");
	op.op = IOD_XFER_WRITE;
	op.remote.len = 4;
	CHECK_EQ(iod_xfer_signal_check(&op, 16, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "shorter than its 8-byte signal word");
	op.remote.len = 16;
	CHECK_EQ(iod_xfer_signal_check(&op, 20, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "8-byte aligned");
	CHECK_EQ(iod_xfer_signal_check(&op, 24, &e), 0);
	CHECK_EQ(iod_xfer_signal_word_check(4096, 64, 56, &e), 0);
	CHECK_EQ(iod_xfer_signal_word_check(4096, 64, 60, &e), -ERANGE);
	CHECK_EQ(iod_xfer_signal_word_check(4096, 4, 0, &e), -ERANGE);
	CHECK_EQ(iod_xfer_signal_word_check(4100, 64, 0, &e), -EINVAL);

	struct iod_xfer_opts o = {.name = "self", .transport = IOD_XFER_SHM};
	struct iod_xfer *x = NULL;
	CHECK_EQ(iod_xfer_create(&o, &x, &e), 0);
	static _Alignas(64) uint8_t a[8192], b[4096];
	uint32_t ia = 0, ib = 0;
	CHECK_EQ(iod_xfer_mem_register(x, a, sizeof(a), IOD_XFER_MEM_HOST, &ia, &e), 0);
	CHECK_EQ(iod_xfer_mem_register(x, b, sizeof(b), IOD_XFER_MEM_HOST, &ib, &e), 0);
	static uint8_t md[IOD_XFER_MD_BYTES_MAX];
	size_t ml = 0;
	char peer[IOD_NAME_MAX];
	CHECK_EQ(iod_xfer_md_get(x, md, sizeof(md), &ml, &e), 0);
	CHECK_EQ(iod_xfer_md_load(x, md, ml, peer, &e), 0);
	struct iod_xfer_req *r = NULL;
	struct iod_xfer_op w = {IOD_XFER_WRITE, {ia, 0, 4096}, {ib, 0, 4096}};
	CHECK_EQ(iod_xfer_post_flags(x, "self", &w, 1, "n", 1, IOD_XFER_POST_SIGNAL, &r, &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "no notification");
	CHECK_EQ(iod_xfer_post_flags(x, "self", &w, 0, NULL, 0, IOD_XFER_POST_SIGNAL, &r, &e),
	         -EINVAL);
	CHECK_EQ(iod_xfer_post_flags(x, "self", &w, 1, NULL, 0, 0x80, &r, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "unknown post flags");
	w.remote.offset = 4;
	w.local.len = w.remote.len = 4088;
	CHECK_EQ(iod_xfer_post_flags(x, "self", &w, 1, NULL, 0, IOD_XFER_POST_SIGNAL, &r, &e),
	         -EINVAL);
	CHECK_CONTAINS(e.msg, "8-byte aligned");
	/* a real one: 4088 bytes, then the word */
	fill(a, sizeof(a), 9);
	uint64_t word = 0x0123456789abcdefull;
	memcpy(a + 4088, &word, 8);
	w.remote.offset = 0;
	w.local.len = w.remote.len = 4096;
	CHECK_EQ(iod_xfer_post_flags(x, "self", &w, 1, NULL, 0, IOD_XFER_POST_SIGNAL, &r, &e), 0);
	/* the writer drives its request: through UCX the word goes after the
	 * flush, from req_poll */
	int rv = iod_xfer_req_wait(x, r, &e);
	iod_xfer_req_free(x, r);
	CHECK_MSG(rv == 0, "%s", e.msg);
	rv = iod_xfer_signal_wait(x, "self", ib, 4088, word, 1000, &e);
	CHECK_MSG(rv == 0, "%s", e.msg);
	CHECK(memcmp(a, b, 4096) == 0);
	/* no notification was queued */
	char msg[4];
	size_t len = 0;
	CHECK_EQ(iod_xfer_notif_get(x, peer, msg, sizeof(msg), &len), -EAGAIN);
	/* the waiter's errors */
	CHECK_EQ(iod_xfer_signal_wait(x, NULL, 77, 0, 1, 50, &e), -ENOENT);
	CHECK_EQ(iod_xfer_signal_wait(x, NULL, ib, 4092, 1, 50, &e), -ERANGE);
	CHECK_EQ(iod_xfer_signal_wait(x, NULL, ib, 4, 1, 50, &e), -EINVAL);
	CHECK_EQ(iod_xfer_signal_wait(x, NULL, ib, 4088, word + 1, 50, &e), -ETIMEDOUT);
	CHECK_CONTAINS(e.msg, "did not reach");
	iod_xfer_destroy(x);
}

/* Kill the receiver while we keep writing: the sender's post or wait fails
 * with a clear error before the deadline, never hangs. */
static void killed_peer(enum iod_xfer_transport t)
{
	const size_t size = 8u << 20;
	struct pair p;
	CHECK_EQ(spawn_receiver(&p, t, size, 1000000), 0);
	struct iod_xfer_opts o = {.name = "tx", .transport = t, .deadline_ms = 2000};
	struct iod_xfer *x = NULL;
	struct iod_err e = {0};
	uint8_t *buf = calloc(1, size);
	uint32_t id = 0;
	char peer[IOD_NAME_MAX] = "";
	int rv = buf ? iod_xfer_create(&o, &x, &e) : -ENOMEM;
	if (!rv)
		rv = iod_xfer_mem_register(x, buf, size, IOD_XFER_MEM_HOST, &id, &e);
	if (!rv)
		rv = iod_xfer_md_exchange_fd(x, p.wfd, p.rfd, peer, &e);
	uint64_t t0 = 0;
	unsigned rounds = 0;
	for (; !rv && rounds < 100000; rounds++) {
		struct iod_xfer_op op = {IOD_XFER_WRITE, {id, 0, size}, {1, 0, size}};
		struct iod_xfer_req *r = NULL;
		rv = iod_xfer_post(x, peer, &op, 1, "x", 1, &r, &e);
		if (!rv) {
			rv = iod_xfer_req_wait(x, r, &e);
			iod_xfer_req_free(x, r);
		}
		if (rounds == 3) {
			kill(p.pid, SIGKILL);
			t0 = iod_clock_now_ns();
		}
	}
	uint64_t took_ms = t0 ? (iod_clock_now_ns() - t0) / 1000000 : 0;
	iod_xfer_destroy(x);
	free(buf);
	int st = reap(&p);
	CHECK_MSG(rounds > 3, "failed before the kill: %s", e.msg);
	CHECK_EQ(st, 128 + SIGKILL);
	CHECK_MSG(rv == -ECONNRESET || rv == -ETIMEDOUT, "rv %d: %s", rv, e.msg);
	CHECK_CONTAINS(e.msg, "\"rx\"");
	CHECK_MSG(took_ms < 2000 + 1500, "took %llu ms to notice", (unsigned long long)took_ms);
}

TEST(shm_peer_killed_mid_transfer_fails_clearly)
{
	killed_peer(IOD_XFER_SHM);
}

TEST(tcp_peer_killed_mid_transfer_fails_clearly)
{
	killed_peer(IOD_XFER_TCP);
}

/* The other side: the writer dies, the waiting receiver's wait ends at its
 * deadline with a message naming the peer. */
TEST(notif_wait_ends_at_deadline_when_the_writer_dies)
{
	/* the child "rx" waits for notifications we never send; we kill it
	 * and wait for one from it */
	struct pair p;
	CHECK_EQ(spawn_receiver(&p, IOD_XFER_SHM, 4096, 1), 0);
	struct iod_xfer_opts o = {.name = "tx", .transport = IOD_XFER_SHM, .deadline_ms = 500};
	struct iod_xfer *x = NULL;
	struct iod_err e = {0};
	static uint8_t buf[4096];
	uint32_t id = 0;
	char peer[IOD_NAME_MAX] = "";
	int rv = iod_xfer_create(&o, &x, &e);
	if (!rv)
		rv = iod_xfer_mem_register(x, buf, sizeof(buf), IOD_XFER_MEM_HOST, &id, &e);
	if (!rv)
		rv = iod_xfer_md_exchange_fd(x, p.wfd, p.rfd, peer, &e);
	kill(p.pid, SIGKILL);
	uint64_t t0 = iod_clock_now_ns();
	char msg[8];
	size_t len = 0;
	if (!rv)
		rv = iod_xfer_notif_wait(x, "rx", peer, msg, sizeof(msg), &len, 0, &e);
	uint64_t took_ms = (iod_clock_now_ns() - t0) / 1000000;
	iod_xfer_destroy(x);
	reap(&p);
	CHECK_MSG(rv == -ETIMEDOUT || rv == -ECONNRESET, "rv %d: %s", rv, e.msg);
	CHECK_CONTAINS(e.msg, "\"rx\"");
	CHECK(took_ms < 1500);
}
