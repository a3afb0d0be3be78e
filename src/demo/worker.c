/*
 * worker.c: the built-in demo training workload (`iod demo-worker`), so the
 * example topology runs out of the box. src/cli/cmd_demo_worker.c parses
 * its options; this file is the workload (include/iod/demo.h).
 *
 * --role parameter-server holds one shard of a parameter vector and serves
 * PULL (send the shard) and PUSH (apply a gradient) over TCP. --role worker
 * finds the parameter servers through its environment (IOD_DEP_<SERVICE>,
 * set by the agent from the service's depends_on), and per step pulls every
 * shard, runs a synthetic compute phase (multiply-adds over the parameters
 * for --compute-ms), pushes a gradient and reports steps/s. With --via-mesh
 * it dials the service by name instead: IOD_SVC_<SERVICE>_ADDR, the VIP the
 * node's mesh proxy balances (one connection, one shard; IOD_DEP_ when the
 * variable is absent). With --allreduce xfer the worker is data parallel
 * instead: no parameter servers; the replicas of its service find each
 * other through the control plane (XferPeer objects) and sum their
 * gradients per step with a ring all-reduce over libiod-xfer, checked
 * exact (run_allreduce, docs/transfer.md). Both roles
 * answer GET /healthz (and /metrics) on --http-port for health checks.
 *
 * Telemetry (docs/observability.md): when $IOD_TELEMETRY_FILE is set, a
 * thread rewrites that file every 100 ms with the counters of the
 * simulated-GPU protocol: busy_ns_total (time in steps: compute and
 * communication, as a GPU running NCCL kernels is busy while it waits on a
 * peer), comm_bytes_total (bytes moved to and from parameter servers),
 * steps_total and gpu_mem_used_bytes (the parameters held).
 *
 * Checkpoints (docs/storage.md): with --ckpt-dir the parameter server saves
 * its shard through libiod-ckpt every --ckpt-every updates (two-phase: the
 * update loop is blocked only for the in-memory copy; a save still being
 * written when the next is due is skipped, not waited for), and at start it
 * restores the newest complete checkpoint and continues from its step,
 * printing it: a replacement replica picks up where the lost one stopped.
 * With --ckpt-server each save is committed through the control plane
 * (a Checkpoint object, src/storage/commit.c) before it counts, and a
 * restore takes the newest committed step, not the newest on disk.
 *
 * Wire format (loopback demo, host byte order for floats): a request is a
 * 4-byte op "PULL" or "PUSH" and a u32 count (network order); PULL answers
 * u32 count + count floats; PUSH carries count floats and answers u32 step.
 * Counts are bounded by IOD_DEMO_PARAMS_MAX. Never trusts the peer: every
 * count is checked before any buffer is touched.
 */
#include "iod/api.h"
#include "iod/ckpt.h"
#include "iod/demo.h"
#include "iod/sec.h"
#include "iod/storage.h"
#include "iod/xfer.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A one-line error on stderr; returns the exit status code. */
static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "iod demo-worker: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

static volatile sig_atomic_t stop_flag;
static atomic_ullong steps_done; /* for /metrics */
/* the counters protocol: busy time done, the busy phase in progress, bytes */
static atomic_ullong busy_ns_done, busy_since_ns, comm_bytes, mem_bytes;
static const char *role_name = "";

static void on_stop(int s)
{
	(void)s;
	stop_flag = 1;
}

/* Listen on the replica's own address ($IOD_ADDR's host) when the agent gave
 * one: on a local cluster each node has its own loopback address, so a
 * replica and its stale copy on a lost node never fight over a port. */
static int listen_on(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	const char *addr = getenv("IOD_ADDR");
	char host[64] = "";
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (addr && strchr(addr, ':') && (size_t)(strrchr(addr, ':') - addr) < sizeof(host)) {
		snprintf(host, sizeof(host), "%.*s", (int)(strrchr(addr, ':') - addr), addr);
		if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
			sa.sin_addr.s_addr = htonl(INADDR_ANY);
	}
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 64)) {
		int err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

static int io_all(int fd, void *buf, size_t len, bool wr)
{
	char *p = buf;
	while (len) {
		ssize_t n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR) {
			if (stop_flag)
				return -EINTR;
			continue;
		}
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- /healthz and /metrics --------------------------------------------------- */

static void *http_thread(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	char req[1024], resp[512];
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			continue;
		ssize_t n = recv(c, req, sizeof(req) - 1, 0);
		req[n > 0 ? n : 0] = 0;
		int len;
		if (!strncmp(req, "GET /metrics", 12)) {
			char body[128];
			int bl =
			    snprintf(body, sizeof(body), "iod_demo_steps_total{role=\"%s\"} %llu\n",
			             role_name, (unsigned long long)atomic_load(&steps_done));
			len = snprintf(resp, sizeof(resp),
			               "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n"
			               "Content-Length: %d\r\n\r\n%s",
			               bl, body);
		} else if (!strncmp(req, "GET /healthz", 12) || !strncmp(req, "GET / ", 6)) {
			len = snprintf(resp, sizeof(resp),
			               "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
		} else {
			len = snprintf(resp, sizeof(resp),
			               "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
		}
		(void)!send(c, resp, (size_t)len, MSG_NOSIGNAL);
		close(c);
	}
	return NULL;
}

/* Rewrite $IOD_TELEMETRY_FILE (tmp + rename: readers never see half a file). */
static void *counters_thread(void *arg)
{
	const char *path = arg;
	char tmp[4096], body[256];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	while (!stop_flag) {
		uint64_t since = atomic_load(&busy_since_ns);
		uint64_t busy =
		    atomic_load(&busy_ns_done) + (since ? iod_clock_now_ns() - since : 0);
		int n =
		    snprintf(body, sizeof(body),
		             "# iod simulated-GPU counters (docs/observability.md)\n"
		             "busy_ns_total %llu\ncomm_bytes_total %llu\nsteps_total %llu\n"
		             "gpu_mem_used_bytes %llu\n",
		             (unsigned long long)busy, (unsigned long long)atomic_load(&comm_bytes),
		             (unsigned long long)atomic_load(&steps_done),
		             (unsigned long long)atomic_load(&mem_bytes));
		FILE *f = fopen(tmp, "w");
		if (f) {
			bool ok = fwrite(body, 1, (size_t)n, f) == (size_t)n;
			if (fclose(f) == 0 && ok)
				rename(tmp, path);
		}
		usleep(100000);
	}
	return NULL;
}

static void start_counters(void)
{
	static pthread_t t;
	const char *path = getenv("IOD_TELEMETRY_FILE");
	if (path && path[0] && strlen(path) < 4000)
		pthread_create(&t, NULL, counters_thread, (void *)path);
}

static int start_http(uint16_t port)
{
	pthread_t t;
	int fd;
	if (!port)
		return 0;
	if ((fd = listen_on(port)) < 0)
		return fd;
	if (pthread_create(&t, NULL, http_thread, (void *)(intptr_t)fd))
		return -EAGAIN;
	pthread_detach(t);
	return 0;
}

/* ---- parameter server --------------------------------------------------------- */

struct ps_client {
	int fd; /* -1 = free */
};

static int ps_serve_one(int fd, float *params, float *grad, uint32_t n, float lr)
{
	char op[4];
	uint32_t cnt;
	int rc;
	if ((rc = io_all(fd, op, 4, false)) || (rc = io_all(fd, &cnt, 4, false)))
		return rc;
	cnt = ntohl(cnt);
	if (!memcmp(op, "PULL", 4)) {
		uint32_t be = htonl(n);
		uint64_t t0 = iod_clock_now_ns();
		if ((rc = io_all(fd, &be, 4, true)) ||
		    (rc = io_all(fd, params, n * sizeof(float), true)))
			return rc;
		atomic_fetch_add(&comm_bytes, 8 + 4 + (uint64_t)n * sizeof(float));
		atomic_fetch_add(&busy_ns_done, iod_clock_now_ns() - t0);
		return 0;
	}
	if (!memcmp(op, "PUSH", 4)) {
		if (cnt != n)
			return -EPROTO; /* a gradient must match the shard */
		uint64_t t0 = iod_clock_now_ns();
		if ((rc = io_all(fd, grad, n * sizeof(float), false)))
			return rc;
		for (uint32_t i = 0; i < n; i++)
			params[i] -= lr * grad[i];
		atomic_fetch_add(&comm_bytes, 8 + 4 + (uint64_t)n * sizeof(float));
		atomic_fetch_add(&busy_ns_done, iod_clock_now_ns() - t0);
		uint32_t step = htonl((uint32_t)atomic_fetch_add(&steps_done, 1) + 1);
		return io_all(fd, &step, 4, true);
	}
	return -EPROTO;
}

/* Open the shard's store: one NVMe tier on dir, room for four shards, the
 * newest three kept. A save still being written makes the next one -EBUSY. */
static struct iod_api_client ps_api;
static struct iod_ckpt_raft ps_raft;
/* the scrub's own: it reports from its thread, and a client is one connection */
static struct iod_api_client ps_scrub_api;
static struct iod_ckpt_raft ps_scrub_raft;

/* The agent's checkpoint peers ($IOD_CKPT_PEERS: other nodes, copies go to
 * the first replicas - 1; $IOD_CKPT_HERE: this node's chunk server). */
static struct iod_ckpt_env_peer ps_peers[IOD_CKPT_PEERS_MAX], ps_here;
static uint32_t ps_peers_n, ps_here_n;
static uint32_t ps_replicas;  /* storage.replicas: copies wanted */
static const char *ps_server; /* --ckpt-server, or NULL */
/* --state-bytes: optimizer state checkpointed beside the shard (the region
 * "state") and never shipped to the workers, so the state a node loss must
 * restore can be sized apart from the shard (docs/storage.md, 1 GiB). Its
 * first 8 bytes hold the step it was saved at; the rest is a fixed pattern. */
static uint8_t *ps_state;
static uint64_t ps_state_bytes;

/* The checkpoint's regions: the shard, then the state when there is one
 * (a third, the volume, is added by the save and the restore). */
static uint32_t ps_regions(struct iod_ckpt_region r[3], float *params, uint32_t n)
{
	r[0] = (struct iod_ckpt_region){"params", params, (uint64_t)n * sizeof(float)};
	if (!ps_state_bytes)
		return 1;
	r[1] = (struct iod_ckpt_region){"state", ps_state, ps_state_bytes};
	return 2;
}

/* $IOD_CKPT_VOLUME (storage.volume): the data directory packed into each
 * checkpoint as its region "volume", the store's own ckpt/ left out, and
 * unpacked there after a move (docs/storage.md "Volumes"). */
static const char *ps_volume;

/* Pack the volume into r[*n] (its buffer in *b, freed by the caller). */
static int ps_volume_pack(struct iod_ckpt_region *r, uint32_t *n, struct iod_ckpt_vol_buf *b)
{
	struct iod_err e = {0};
	uint32_t skipped = 0;
	if (!ps_volume)
		return 0;
	if (iod_ckpt_vol_pack(ps_volume, "ckpt", b, &skipped, &e)) {
		printf("parameter-server: volume %s not packed: %s\n", ps_volume, e.msg);
		return -1;
	}
	r[(*n)++] = (struct iod_ckpt_region){IOD_CKPT_VOLUME_REGION, b->buf, b->len};
	return 0;
}

/* After a restore: the state says the step it was saved at, and its pattern
 * is whole (a restore that did not fill it would show here). */
static void ps_state_check(uint64_t step)
{
	uint64_t at = 0;
	uint64_t bad = 0;
	if (!ps_state_bytes)
		return;
	memcpy(&at, ps_state, ps_state_bytes < 8 ? ps_state_bytes : 8);
	for (uint64_t i = 8; i < ps_state_bytes; i += 4093)
		bad += ps_state[i] != (uint8_t)(i * 31);
	printf("parameter-server: state of %llu bytes restored: saved at step %llu, %s\n",
	       (unsigned long long)ps_state_bytes, (unsigned long long)at,
	       at == step && !bad ? "intact" : "DAMAGED");
}

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && v[0] ? v : dflt;
}

static int ps_ckpt_open(const char *dir, uint32_t n, const char *server, uint32_t replicas,
                        struct iod_ckpt **ck)
{
	struct iod_ckpt_opts o = {
	    .tiers = {.tiers_n = 1,
	              .capacity_bytes = 4ull * (n * sizeof(float) + ps_state_bytes) + 4096,
	              .fast_keep = 1,
	              .keep_max = 3},
	    .dirs = {dir},
	    .nonblock = true};
	struct iod_err e = {0};
	o.tiers.tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, 10000};
	/* the store the agent provisioned from the spec's storage: (its tiers
	 * and capacity), when dir is its fastest tier */
	static struct iod_ckpt_env env;
	const char *tiers = getenv("IOD_CKPT_TIERS");
	if (tiers && tiers[0]) {
		if (iod_ckpt_env_parse(tiers, getenv("IOD_CKPT_CAPACITY"), NULL, &env, &e)) {
			fail(IOD_DEMO_EXIT_ERROR, "the provisioned checkpoint store: %s", e.msg);
			return -EINVAL;
		}
		if (!strcmp(env.dirs[0], dir)) {
			bool nb = o.nonblock;
			iod_ckpt_env_opts(&env, &o);
			o.nonblock = nb;
			o.tiers.keep_max = 3;
			printf("parameter-server: checkpoint store from the spec: %s\n", tiers);
		}
	}
	if (iod_ckpt_env_peers_parse(getenv("IOD_CKPT_PEERS"), ps_peers, IOD_CKPT_PEERS_MAX,
	                             &ps_peers_n, &e) ||
	    iod_ckpt_env_peers_parse(getenv("IOD_CKPT_HERE"), &ps_here, 1, &ps_here_n, &e)) {
		fail(IOD_DEMO_EXIT_ERROR, "the provisioned checkpoint peers: %s", e.msg);
		return -EINVAL;
	}
	/* chunk servers beyond loopback speak mutual TLS: with the replica's
	 * own credentials (its service's SVID, $IOD_CERT: docs/storage.md
	 * "Replica credentials"); loopback ones plain HTTP */
	bool tls = ps_here_n && strncmp(ps_here.addr, "127.", 4);
	for (uint32_t i = 0; i < ps_peers_n; i++)
		tls |= strncmp(ps_peers[i].addr, "127.", 4) != 0;
	if (tls) {
		static struct iod_sec_tls_creds *creds;
		struct iod_sec_context ctx;
		struct iod_err e1 = {0};
		int r1 = iod_sec_context_load(NULL, NULL, &ctx, &e1);
		if ((r1 && r1 != -ENOENT) || !ctx.cert[0] ||
		    iod_sec_context_creds(&ctx, &creds, &e1) || !creds) {
			printf("parameter-server: the checkpoint peers speak mTLS and this replica "
			       "has no credentials of its own (%s): no peers\n",
			       e1.msg[0] ? e1.msg : "no IOD_CERT");
			ps_peers_n = ps_here_n = 0;
		} else {
			iod_ckpt_peer_client_creds(creds);
			printf("parameter-server: checkpoint peers over mTLS as %s\n", ctx.cert);
		}
		memset(&ctx, 0, sizeof(ctx));
	}
	for (uint32_t i = 0; replicas > 1 && i < ps_peers_n && i + 1 < replicas; i++)
		o.peers[o.peers_n++] = ps_peers[i].addr;
	ps_replicas = replicas;
	if (replicas > 1) {
		/* Ceph's min_size 2 once there is a peer to hold the second copy;
		 * with none (the only node left after a loss) the store keeps its
		 * own copy and says it is undersized, and a commit through the
		 * control plane (quorum 2) is refused */
		o.min_size = o.peers_n ? 2 : 1;
		printf("parameter-server: %u copies per checkpoint, quorum %u, peers:", replicas,
		       o.min_size);
		for (uint32_t i = 0; i < o.peers_n; i++)
			printf(" %s=%s", ps_peers[i].node, ps_peers[i].addr);
		if (o.peers_n + 1 < replicas)
			printf("%s (undersized: %u of %u copies)", o.peers_n ? "" : " none",
			       o.peers_n + 1, replicas);
		printf("\n");
	}
	if (server) {
		ps_server = server;
		if (iod_api_client_init_config(&ps_api, server, &e)) {
			fail(IOD_DEMO_EXIT_ERROR, "control plane %s: %s", server, e.msg);
			return -EINVAL;
		}
		ps_raft =
		    (struct iod_ckpt_raft){.api = &ps_api,
		                           .service = env_or("IOD_SERVICE", "parameter-server"),
		                           .replica = env_or("IOD_REPLICA", "parameter-server-0"),
		                           .node = env_or("IOD_NODE", "local"),
		                           .replicas = replicas ? replicas : 1,
		                           .min_size = replicas > 1 ? 2 : 1};
		o.commit = iod_ckpt_raft_commit;
		o.evict = iod_ckpt_raft_evict;
		o.commit_ctx = &ps_raft;
	}
	int rc = iod_ckpt_open(&o, ck, &e);
	if (rc)
		fail(IOD_DEMO_EXIT_ERROR, "checkpoints in %s: %s", dir, e.msg);
	return rc;
}

/*
 * After a restore from the surviving copies (a node was lost): make the
 * lost copies again (docs/storage.md "Re-replication"). The replication
 * core's plan (iod_stor_rereplicate_plan) keeps the nodes that hold step,
 * picks replacements among the other listed nodes (all alive: the agent
 * lists registered nodes) and fills each new copy, chunk by chunk, from a
 * surviving verified copy; those bytes are what the restore just fetched
 * and verified, so each new copy is sent from them.
 */
/* The Checkpoint object follows the copies a re-replication left (the
 * core's iod_stor_rereplicate_result), through the API, so `iod get
 * checkpoints` shows its health again. */
static void ps_recopied(const struct iod_stor_rereplica *p, const bool *made, uint64_t step,
                        const struct iod_ckpt_env_peer *const *src)
{
	uint32_t idx[IOD_STOR_REPLICAS_MAX], n = 0;
	const char *names[IOD_STOR_REPLICAS_MAX];
	struct iod_stor_health h;
	char health[64];
	struct iod_err e = {0};
	struct iod_api_client cl;
	struct iod_ckpt_raft raft = ps_raft;
	if (!ps_raft.api || !p->added_n)
		return;
	if (iod_stor_rereplicate_result(p, made, ps_replicas, ps_raft.min_size, idx, &n, &h, &e)) {
		printf("parameter-server: step %llu: %s\n", (unsigned long long)step, e.msg);
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		names[i] = src[idx[i]]->node;
	iod_stor_health_name(h.flags, health, sizeof(health));
	/* its own client: this runs beside the serving loop (ps_rereplicate_bg),
	 * and the store's commits use ps_api, one connection */
	if (iod_api_client_init_config(&cl, ps_server, &e)) {
		printf("parameter-server: checkpoint step %llu not updated: %s\n",
		       (unsigned long long)step, e.msg);
		return;
	}
	raft.api = &cl;
	int rc = iod_ckpt_raft_recopied(&raft, 0, step, names, n, health, &e);
	iod_api_client_close(&cl);
	if (rc)
		printf("parameter-server: checkpoint step %llu not updated: %s\n",
		       (unsigned long long)step, e.msg);
	else
		printf("parameter-server: checkpoint step %llu committed as %u copies, %s\n",
		       (unsigned long long)step, n, health);
}

static void ps_rereplicate(const struct iod_ckpt_region *r, uint32_t rn_regions, uint64_t step,
                           const struct iod_ckpt_env_peer *const *src, const uint64_t *held,
                           uint32_t n)
{
	struct iod_stor_node nodes[IOD_CKPT_PEERS_MAX + 1];
	uint32_t copies[IOD_STOR_REPLICAS_MAX], cn = 0, rn = 0, chunks = 0;
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < rn_regions; i++) {
		chunks += (uint32_t)((r[i].bytes + IOD_CKPT_CHUNK_BYTES_DEFAULT - 1) /
		                     IOD_CKPT_CHUNK_BYTES_DEFAULT);
		bytes += r[i].bytes;
	}
	struct iod_err e = {0};
	if (ps_replicas < 2 || !n)
		return;
	for (uint32_t i = 0; i < n; i++) {
		nodes[i] = (struct iod_stor_node){src[i]->node, NULL, NULL, true, UINT64_MAX};
		if (held[i] == step && cn < ps_replicas)
			copies[cn++] = i;
	}
	struct iod_stor_rereplica *p = calloc(1, sizeof(*p));
	uint8_t *good = calloc(chunks ? chunks : 1, 1);
	struct iod_stor_repair *rep =
	    calloc((size_t)chunks * IOD_STOR_REPLICAS_MAX + 1, sizeof(*rep));
	if (!p || !good || !rep || !cn || chunks > IOD_CKPT_CHUNKS_MAX)
		goto out;
	memset(good, (1 << cn) - 1, chunks);
	int rc = iod_stor_rereplicate_plan(nodes, n, copies, cn, good, chunks, ps_replicas, bytes,
	                                   p, rep, chunks * IOD_STOR_REPLICAS_MAX, &rn, &e);
	if (rc) {
		printf("parameter-server: step %llu stays at %u of %u copies: %s\n",
		       (unsigned long long)step, cn, ps_replicas, e.msg);
		goto out;
	}
	bool made[IOD_STOR_REPLICAS_MAX] = {false};
	for (uint32_t k = p->kept_n; k < p->nodes_n; k++) {
		const struct iod_ckpt_env_peer *to = src[p->nodes[k]];
		uint32_t mine = 0;
		for (uint32_t i = 0; i < rn; i++)
			mine += rep[i].to == k;
		uint64_t t0 = iod_clock_now_ns();
		if (iod_ckpt_peer_copy_regions(to->addr, 0, step, r, rn_regions, &e)) {
			printf("parameter-server: re-replicating step %llu to node %s: %s\n",
			       (unsigned long long)step, to->node, e.msg);
			continue;
		}
		cn++;
		made[k - p->kept_n] = true;
		printf("parameter-server: re-replicated step %llu to node %s (%u chunks, %.1f ms): "
		       "%u of %u copies%s\n",
		       (unsigned long long)step, to->node, mine,
		       (double)(iod_clock_now_ns() - t0) / 1e6, cn, ps_replicas,
		       cn >= ps_replicas ? ", clean" : "");
	}
	ps_recopied(p, made, step, src);
out:
	fflush(stdout);
	free(p);
	free(good);
	free(rep);
}

/*
 * Nothing here (a replica moved to a fresh node): restore from the nearest
 * surviving copy, this node's chunk server first, then the peers in the
 * agent's order; want is a committed step or IOD_CKPT_LATEST (the newest
 * any of them holds whole). Prints the phases it timed: find (asking the
 * copies), fetch (every chunk read and its XXH3 verified on arrival).
 */
/*
 * Re-replication beside the serving loop: after a restore the replica
 * serves at once, and the lost copies are made again from a copy of the
 * restored bytes taken here (they are the step's; the live regions change
 * once it serves). Without memory for that copy, or a thread, it runs
 * here, before serving, as it did before.
 */
struct ps_rerep_job {
	struct iod_ckpt_region r[3];
	uint32_t rn, n;
	uint64_t step;
	const struct iod_ckpt_env_peer *src[IOD_CKPT_PEERS_MAX + 1];
	uint64_t held[IOD_CKPT_PEERS_MAX + 1];
};

static void ps_rerep_free(struct ps_rerep_job *j)
{
	for (uint32_t i = 0; i < j->rn; i++)
		free(j->r[i].addr);
	free(j);
}

static void *ps_rerep_main(void *arg)
{
	struct ps_rerep_job *j = arg;
	ps_rereplicate(j->r, j->rn, j->step, j->src, j->held, j->n);
	ps_rerep_free(j);
	return NULL;
}

static void ps_rereplicate_bg(const struct iod_ckpt_region *r, uint32_t rn, uint64_t step,
                              const struct iod_ckpt_env_peer *const *src, const uint64_t *held,
                              uint32_t n)
{
	struct ps_rerep_job *j = ps_replicas < 2 || !n ? NULL : calloc(1, sizeof(*j));
	bool ok = j != NULL;
	pthread_t th;
	for (uint32_t i = 0; ok && i < rn && i < 3; i++) {
		j->r[i] = (struct iod_ckpt_region){r[i].name, malloc(r[i].bytes ? r[i].bytes : 1),
		                                   r[i].bytes};
		j->rn = i + 1;
		ok = j->r[i].addr != NULL;
		if (ok)
			memcpy(j->r[i].addr, r[i].addr, r[i].bytes);
	}
	if (ok) {
		j->step = step;
		j->n = n;
		memcpy(j->src, src, n * sizeof(*src));
		memcpy(j->held, held, n * sizeof(*held));
		ok = pthread_create(&th, NULL, ps_rerep_main, j) == 0;
		if (ok)
			pthread_detach(th);
	}
	if (!ok) {
		if (j)
			ps_rerep_free(j);
		ps_rereplicate(r, rn, step, src, held, n);
	}
}

/* A moved replica's volume into its new data directory. */
static void ps_volume_unpack(const uint8_t *vol, uint64_t vbytes, uint64_t step)
{
	struct iod_err e = {0};
	uint32_t files = 0;
	uint64_t bytes = 0;
	if (iod_ckpt_vol_unpack(ps_volume, vol, vbytes, &files, &bytes, &e))
		printf("parameter-server: volume of step %llu not unpacked: %s\n",
		       (unsigned long long)step, e.msg);
	else
		printf("parameter-server: volume restored from step %llu: %u files, %llu bytes "
		       "into %s\n",
		       (unsigned long long)step, files, (unsigned long long)bytes, ps_volume);
}

/* The copies to restore from or re-replicate to, nearest first (this
 * node's chunk server, then the agent's peers), and the newest step each
 * holds (UINT64_MAX: none, or it did not answer). */
static uint32_t ps_copies(const struct iod_ckpt_env_peer **src, uint64_t *held)
{
	struct iod_err e = {0};
	uint32_t n = 0;
	if (ps_here_n)
		src[n++] = &ps_here;
	for (uint32_t i = 0; i < ps_peers_n; i++)
		src[n++] = &ps_peers[i];
	for (uint32_t i = 0; i < n; i++)
		if (iod_ckpt_peer_latest(src[i]->addr, 0, &held[i], &e))
			held[i] = UINT64_MAX;
	return n;
}

/*
 * Restored from this node's own copy, which the agent linked into the
 * store because the replica moved here ($IOD_CKPT_MOVED, docs/storage.md
 * "Recovery on node loss"): the restore read it from disk and checked every
 * chunk's XXH3. The volume is unpacked and the lost copies made again, as
 * after a fetch.
 */
static void ps_after_move(const struct iod_ckpt_region *r, uint32_t rn, uint64_t step,
                          const uint8_t *vol, uint64_t vbytes, uint64_t restore_ns)
{
	const struct iod_ckpt_env_peer *src[IOD_CKPT_PEERS_MAX + 1];
	uint64_t held[IOD_CKPT_PEERS_MAX + 1];
	printf("parameter-server: restored step %llu from checkpoint, param[0]=%.4f "
	       "(copy on node %s, this node, linked by the agent; find_ms=0.0 "
	       "fetch_verify_ms=%.1f at_ms=%llu)\n",
	       (unsigned long long)step, ((const float *)r[0].addr)[0],
	       ps_here_n ? ps_here.node : env_or("IOD_NODE", "?"), (double)restore_ns / 1e6,
	       (unsigned long long)(iod_time_unix_ns() / IOD_NS_PER_MS));
	ps_state_check(step);
	if (vol)
		ps_volume_unpack(vol, vbytes, step);
	fflush(stdout);
	uint32_t n = ps_copies(src, held);
	ps_rereplicate_bg(r, rn, step, src, held, n);
}

static bool ps_ckpt_from_peers(const struct iod_ckpt_region *r, uint32_t rn, uint64_t want,
                               uint64_t *step)
{
	const struct iod_ckpt_env_peer *src[IOD_CKPT_PEERS_MAX + 1];
	uint64_t held[IOD_CKPT_PEERS_MAX + 1], t0 = iod_clock_now_ns(), best = 0;
	uint32_t n = 0;
	bool any = false;
	struct iod_err e = {0};
	if (ps_here_n)
		src[n++] = &ps_here;
	for (uint32_t i = 0; i < ps_peers_n; i++)
		src[n++] = &ps_peers[i];
	for (uint32_t i = 0; i < n; i++) {
		held[i] = UINT64_MAX;
		if (iod_ckpt_peer_latest(src[i]->addr, 0, &held[i], &e)) {
			held[i] = UINT64_MAX;
			continue;
		}
		if (want == IOD_CKPT_LATEST ? !any || held[i] > best : held[i] >= want) {
			best = want == IOD_CKPT_LATEST ? held[i] : want;
			any = true;
		}
	}
	uint64_t t1 = iod_clock_now_ns();
	for (uint32_t i = 0; any && i < n; i++) {
		struct iod_ckpt_region rv[3];
		uint32_t rvn = rn;
		uint64_t vbytes = 0;
		uint8_t *vol = NULL;
		if (held[i] == UINT64_MAX || held[i] < best)
			continue;
		memcpy(rv, r, rn * sizeof(*r));
		if (ps_volume && !iod_ckpt_peer_region_bytes(src[i]->addr, 0, best,
		                                             IOD_CKPT_VOLUME_REGION, &vbytes, &e)) {
			vol = malloc(vbytes ? vbytes : 1);
			rv[rvn++] = (struct iod_ckpt_region){IOD_CKPT_VOLUME_REGION, vol, vbytes};
		}
		if ((ps_volume && !vol) || iod_ckpt_fetch(src[i]->addr, 0, best, rv, rvn, &e)) {
			printf("parameter-server: copy on %s: %s\n", src[i]->node,
			       ps_volume && !vol ? "no volume in it" : e.msg);
			free(vol);
			continue;
		}
		uint64_t t2 = iod_clock_now_ns();
		*step = best;
		/* at_ms: the wall clock, so a test on the same machine can time the
		 * phases from a node's loss to here (docs/storage.md) */
		printf("parameter-server: restored step %llu from checkpoint, param[0]=%.4f "
		       "(copy on node %s, %s; find_ms=%.1f fetch_verify_ms=%.1f at_ms=%llu)\n",
		       (unsigned long long)best, ((const float *)r->addr)[0], src[i]->node,
		       i == 0 && ps_here_n ? "this node" : "a peer", (double)(t1 - t0) / 1e6,
		       (double)(t2 - t1) / 1e6,
		       (unsigned long long)(iod_time_unix_ns() / IOD_NS_PER_MS));
		ps_state_check(best);
		if (vol)
			ps_volume_unpack(vol, vbytes, best);
		fflush(stdout);
		ps_rereplicate_bg(rv, rvn, best, src, held, n);
		free(vol);
		return true;
	}
	return false;
}

/* Restore the newest checkpoint (the newest committed one with a control
 * plane) into params; its step, or 0 when none. */
static uint64_t ps_ckpt_restore(struct iod_ckpt *ck, float *params, uint32_t n, bool raft)
{
	struct iod_ckpt_region r[3];
	uint32_t rn = ps_regions(r, params, n);
	struct iod_err e = {0};
	uint64_t step = 0, want = IOD_CKPT_LATEST, vbytes = 0;
	uint8_t *vol = NULL;
	int rc = 0;
	if (raft && (rc = iod_ckpt_raft_latest(&ps_api, ps_raft.replica, 0, &want, &e))) {
		if (rc != -ENOENT)
			printf("parameter-server: cannot list committed checkpoints: %s\n", e.msg);
		printf("parameter-server: no committed checkpoint, starting at step 0\n");
		return 0;
	}
	/* here the data directory is the newest there is: the checkpoint's
	 * volume is read (the restore takes every region) and not unpacked */
	if (ps_volume && !iod_ckpt_region_bytes(ck, want, IOD_CKPT_VOLUME_REGION, &vbytes, &e)) {
		vol = malloc(vbytes ? vbytes : 1);
		r[rn++] = (struct iod_ckpt_region){IOD_CKPT_VOLUME_REGION, vol, vbytes};
	}
	uint64_t t0 = iod_clock_now_ns();
	rc = iod_ckpt_restore(ck, want, r, rn, &step, &e);
	const char *moved = getenv("IOD_CKPT_MOVED");
	if (!rc && moved && moved[0]) {
		ps_after_move(r, rn, step, vol, vbytes, iod_clock_now_ns() - t0);
		free(vol);
		return step;
	}
	free(vol);
	if (vol)
		rn--;
	if (rc == -ENOENT && ps_ckpt_from_peers(r, rn, want, &step))
		return step;
	if (rc == -ENOENT) {
		printf("parameter-server: no checkpoint yet, starting at step 0\n");
		return 0;
	}
	if (rc) {
		/* a damaged or mismatched checkpoint: say so, start afresh */
		printf("parameter-server: cannot restore: %s; starting at step 0\n", e.msg);
		for (uint32_t i = 0; i < n; i++)
			params[i] = 1.0f;
		return 0;
	}
	printf("parameter-server: restored step %llu from checkpoint, param[0]=%.4f\n",
	       (unsigned long long)step, params[0]);
	ps_state_check(step);
	return step;
}

/* Phase 1 of a save; false when the previous one is still being written
 * (try again on the next turn: the update loop never waits for the disk). */
static bool ps_ckpt_save(struct iod_ckpt *ck, float *params, uint32_t n, uint64_t step)
{
	struct iod_ckpt_region r[3];
	struct iod_ckpt_vol_buf vb = {0};
	uint32_t rn = ps_regions(r, params, n);
	struct iod_err e = {0};
	int rc = iod_ckpt_poll(ck, &e);
	if (rc == -EBUSY)
		return false;
	if (rc)
		printf("parameter-server: a checkpoint failed: %s\n", e.msg);
	if (ps_state_bytes)
		memcpy(ps_state, &step, ps_state_bytes < 8 ? ps_state_bytes : 8);
	/* the volume as it is now: the recovery point is this save's snapshot */
	if (ps_volume_pack(r, &rn, &vb)) {
		fflush(stdout);
		return true; /* no checkpoint without its volume; the next turn tries again */
	}
	rc = iod_ckpt_save(ck, step, r, rn, &e);
	iod_ckpt_vol_buf_free(&vb); /* phase 1 copied it */
	if (rc == -EBUSY)
		return false;
	if (rc)
		printf("parameter-server: checkpoint step %llu: %s\n", (unsigned long long)step,
		       e.msg);
	fflush(stdout);
	return true;
}

/* A scrub pass's result: printed, and into its Checkpoint object when the
 * saves are committed through a control plane. */
static void ps_scrub_report(void *ctx, const struct iod_ckpt_scrub_result *r)
{
	struct iod_err e = {0};
	printf("parameter-server: scrub step %llu: %s%s%s\n", (unsigned long long)r->step,
	       r->status, r->why[0] ? ": " : "", r->why);
	if (ctx && iod_ckpt_raft_scrub(ctx, r, &e) && e.code != -ENOENT)
		printf("parameter-server: scrub step %llu not recorded: %s\n",
		       (unsigned long long)r->step, e.msg);
	fflush(stdout);
}

static int run_ps(uint16_t port, uint32_t n, const char *ckpt_dir, uint64_t ckpt_every,
                  const char *ckpt_server, uint32_t ckpt_replicas, const struct iod_demo_opts *o)
{
	struct iod_ckpt *ck = NULL;
	uint64_t ckpt_last = 0;
	struct ps_client cl[IOD_DEMO_CLIENTS_MAX];
	float *params = calloc(n, sizeof(float)), *grad = calloc(n, sizeof(float));
	int lfd = listen_on(port);
	uint64_t last = iod_clock_now_ns(), last_steps = 0;

	if (!params || !grad || lfd < 0) {
		free(params);
		free(grad);
		if (lfd >= 0)
			close(lfd);
		return lfd < 0 ? fail(IOD_DEMO_EXIT_ERROR, "listen on port %u: %s", port,
		                      strerror(-lfd))
		               : fail(IOD_DEMO_EXIT_ERROR, "out of memory");
	}
	for (uint32_t i = 0; i < n; i++)
		params[i] = 1.0f;
	if (o->state_bytes) {
		/* its own mapping, in huge pages where the kernel has them: a restore
		 * after a move writes all of it, and 4 KiB faults were much of that */
		void *m = mmap(NULL, o->state_bytes, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ps_state = m == MAP_FAILED ? NULL : m;
		if (ps_state)
			madvise(ps_state, o->state_bytes, MADV_HUGEPAGE);
		if (!ps_state) {
			free(params);
			free(grad);
			close(lfd);
			return fail(IOD_DEMO_EXIT_ERROR, "out of memory for %llu bytes of state",
			            (unsigned long long)o->state_bytes);
		}
		ps_state_bytes = o->state_bytes; /* its pattern below, unless restored */
	}
	ps_volume = getenv("IOD_CKPT_VOLUME");
	if (ps_volume && !ps_volume[0])
		ps_volume = NULL;
	if (ps_volume && ckpt_dir)
		printf("parameter-server: volume %s rides in each checkpoint\n", ps_volume);
	if (ckpt_dir && ps_ckpt_open(ckpt_dir, n, ckpt_server, ckpt_replicas, &ck)) {
		free(params);
		free(grad);
		close(lfd);
		return IOD_DEMO_EXIT_ERROR;
	}
	if (ck) {
		ckpt_last = ps_ckpt_restore(ck, params, n, ckpt_server != NULL);
		atomic_store(&steps_done, ckpt_last);
	}
	/* a fresh start's state (a restore wrote every byte of it) */
	for (uint64_t i = 0; !ckpt_last && i < ps_state_bytes; i++)
		ps_state[i] = (uint8_t)(i * 31);
	bool scrub_api = false;
	if (ck && o->ckpt_scrub_ms) {
		struct iod_ckpt_scrub_opts so = {.rate_bytes_per_s = o->ckpt_scrub_rate,
		                                 .interval_ns = o->ckpt_scrub_ms * IOD_NS_PER_MS,
		                                 .report = ps_scrub_report};
		struct iod_err e = {0};
		if (ckpt_server && !iod_api_client_init_config(&ps_scrub_api, ckpt_server, &e)) {
			scrub_api = true;
			ps_scrub_raft = ps_raft;
			ps_scrub_raft.api = &ps_scrub_api;
			so.report_ctx = &ps_scrub_raft;
		} else if (ckpt_server) {
			printf("parameter-server: scrub results not recorded: %s\n", e.msg);
		}
		if (iod_ckpt_scrub_start(ck, &so, &e))
			printf("parameter-server: no background scrub: %s\n", e.msg);
	}
	for (int i = 0; i < IOD_DEMO_CLIENTS_MAX; i++)
		cl[i].fd = -1;
	atomic_store(&mem_bytes, 2ull * n * sizeof(float));
	start_counters();
	printf("parameter-server %s: serving %u parameters on port %u\n",
	       getenv("IOD_REPLICA") ? getenv("IOD_REPLICA") : "", n, port);
	fflush(stdout);
	while (!stop_flag) {
		struct pollfd pf[IOD_DEMO_CLIENTS_MAX + 1];
		pf[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (int i = 0; i < IOD_DEMO_CLIENTS_MAX; i++)
			pf[i + 1] = (struct pollfd){.fd = cl[i].fd, .events = POLLIN};
		int rc = poll(pf, IOD_DEMO_CLIENTS_MAX + 1, 1000);
		if (rc > 0 && (pf[0].revents & POLLIN)) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			int slot = -1;
			for (int i = 0; c >= 0 && i < IOD_DEMO_CLIENTS_MAX && slot < 0; i++)
				if (cl[i].fd < 0)
					slot = i;
			if (c >= 0 && slot < 0)
				close(c); /* full: the worker retries */
			else if (c >= 0) {
				int one = 1;
				setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				cl[slot].fd = c;
			}
		}
		for (int i = 0; rc > 0 && i < IOD_DEMO_CLIENTS_MAX; i++)
			if (cl[i].fd >= 0 && pf[i + 1].revents &&
			    ps_serve_one(cl[i].fd, params, grad, n, 0.01f)) {
				close(cl[i].fd);
				cl[i].fd = -1;
			}
		uint64_t s_now = atomic_load(&steps_done);
		if (ck && s_now >= ckpt_last + ckpt_every && ps_ckpt_save(ck, params, n, s_now))
			ckpt_last = s_now;
		uint64_t t = iod_clock_now_ns();
		if (t - last >= IOD_NS_PER_S) {
			uint64_t s = atomic_load(&steps_done);
			if (s != last_steps)
				printf("parameter-server: %llu updates, %.1f updates/s, "
				       "param[0]=%.4f\n",
				       (unsigned long long)s,
				       (double)(s - last_steps) * 1e9 / (double)(t - last),
				       params[0]);
			fflush(stdout);
			last = t;
			last_steps = s;
		}
	}
	for (int i = 0; i < IOD_DEMO_CLIENTS_MAX; i++)
		if (cl[i].fd >= 0)
			close(cl[i].fd);
	close(lfd);
	if (ck) {
		struct iod_err e = {0};
		if (iod_ckpt_wait(ck, &e))
			printf("parameter-server: the last checkpoint failed: %s\n", e.msg);
		iod_ckpt_close(ck); /* stops the scrub */
		if (ckpt_server)
			iod_api_client_close(&ps_api);
		if (scrub_api)
			iod_api_client_close(&ps_scrub_api);
	}
	free(params);
	free(grad);
	if (ps_state)
		munmap(ps_state, ps_state_bytes);
	ps_state = NULL;
	ps_state_bytes = 0;
	printf("parameter-server: stopped after %llu updates\n",
	       (unsigned long long)atomic_load(&steps_done));
	return 0;
}

/* ---- worker ---------------------------------------------------------------------- */

struct ps_conn {
	char addr[64]; /* host:port */
	int fd;        /* -1 = not connected */
	uint32_t n;    /* shard size it reported */
	float *shard;  /* pulled parameters */
};

/* worker --via-mesh: tried first at every connect (NULL = none) */
static const char *mesh_unix;

static int connect_to(const char *addr)
{
	if (mesh_unix) { /* service_mesh.transport shm: the proxy's socket */
		struct sockaddr_un su = {.sun_family = AF_UNIX};
		int ufd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (ufd >= 0 && strlen(mesh_unix) < sizeof(su.sun_path)) {
			memcpy(su.sun_path, mesh_unix, strlen(mesh_unix) + 1);
			if (!connect(ufd, (struct sockaddr *)&su, sizeof(su)))
				return ufd;
		}
		if (ufd >= 0)
			close(ufd); /* absent or refused: the VIP over TCP */
	}
	char host[64];
	const char *colon = strrchr(addr, ':');
	if (!colon || (size_t)(colon - addr) >= sizeof(host))
		return -EINVAL;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)atoi(colon + 1))};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -EINVAL;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;
		close(fd);
		return err;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int pull(struct ps_conn *c)
{
	uint32_t hdr[2], n;
	int rc;
	memcpy(hdr, "PULL", 4);
	hdr[1] = 0;
	if ((rc = io_all(c->fd, hdr, 8, true)) || (rc = io_all(c->fd, &n, 4, false)))
		return rc;
	n = ntohl(n);
	if (!n || n > IOD_DEMO_PARAMS_MAX)
		return -EPROTO;
	if (n != c->n) {
		float *s = realloc(c->shard, n * sizeof(float));
		if (!s)
			return -ENOMEM;
		c->shard = s;
		c->n = n;
	}
	return io_all(c->fd, c->shard, n * sizeof(float), false);
}

static int push(struct ps_conn *c, const float *grad)
{
	uint32_t hdr[2], step;
	int rc;
	memcpy(hdr, "PUSH", 4);
	hdr[1] = htonl(c->n);
	if ((rc = io_all(c->fd, hdr, 8, true)) ||
	    (rc = io_all(c->fd, (void *)(uintptr_t)grad, c->n * sizeof(float), true)) ||
	    (rc = io_all(c->fd, &step, 4, false)))
		return rc;
	return 0;
}

/* Synthetic compute: multiply-adds over the shard until compute_ns has passed. */
static float compute(const float *p, float *grad, uint32_t n, uint64_t compute_ns)
{
	uint64_t end = iod_clock_now_ns() + compute_ns;
	float acc = 0;
	do {
		for (uint32_t i = 0; i < n; i++) {
			grad[i] = 0.5f * (p[i] - 0.25f); /* d/dp of (p - 0.25)^2 / 4 */
			acc += grad[i] * p[i];
		}
	} while (iod_clock_now_ns() < end);
	return acc;
}

static int run_worker(const char *servers, uint64_t compute_ns, uint64_t steps_max)
{
	struct ps_conn ps[IOD_DEMO_SERVERS_MAX];
	unsigned n = 0;
	char list[1024];
	float *grad = NULL;
	uint32_t grad_n = 0;

	snprintf(list, sizeof(list), "%s", servers);
	for (char *t = strtok(list, ","); t && n < IOD_DEMO_SERVERS_MAX; t = strtok(NULL, ",")) {
		memset(&ps[n], 0, sizeof(ps[n]));
		snprintf(ps[n].addr, sizeof(ps[n].addr), "%s", t);
		ps[n].fd = -1;
		n++;
	}
	if (!n)
		return fail(IOD_DEMO_EXIT_INVALID, "no parameter servers");
	printf("worker %s: %u parameter servers (%s), compute %llu ms per step\n",
	       getenv("IOD_REPLICA") ? getenv("IOD_REPLICA") : "", n, servers,
	       (unsigned long long)(compute_ns / IOD_NS_PER_MS));
	fflush(stdout);
	uint64_t last = iod_clock_now_ns(), last_steps = 0, comm_ns = 0;
	start_counters();
	while (!stop_flag && (!steps_max || atomic_load(&steps_done) < steps_max)) {
		bool ok = true;
		for (unsigned i = 0; i < n && ok; i++) {
			if (ps[i].fd < 0 && (ps[i].fd = connect_to(ps[i].addr)) < 0) {
				ok = false;
				break;
			}
		}
		if (!ok) { /* a server is not up (yet): wait and retry */
			usleep(50000);
			continue;
		}
		uint64_t t0 = iod_clock_now_ns();
		int rc = 0;
		atomic_store(&busy_since_ns, t0); /* a step keeps the GPU busy, waits included */
		for (unsigned i = 0; i < n && !rc; i++)
			if ((rc = pull(&ps[i])))
				ps[i].fd = (close(ps[i].fd), -1);
			else
				atomic_fetch_add(&comm_bytes,
				                 12 + (uint64_t)ps[i].n * sizeof(float));
		uint64_t t1 = iod_clock_now_ns();
		for (unsigned i = 0; i < n && !rc; i++) {
			if (ps[i].n > grad_n) {
				float *g = realloc(grad, ps[i].n * sizeof(float));
				if (!g)
					return fail(IOD_DEMO_EXIT_ERROR, "out of memory");
				grad = g;
				grad_n = ps[i].n;
			}
			compute(ps[i].shard, grad, ps[i].n, compute_ns / n);
			uint64_t t2 = iod_clock_now_ns();
			if ((rc = push(&ps[i], grad)))
				ps[i].fd = (close(ps[i].fd), -1);
			else
				atomic_fetch_add(&comm_bytes,
				                 12 + (uint64_t)ps[i].n * sizeof(float));
			comm_ns += iod_clock_now_ns() - t2;
		}
		comm_ns += t1 - t0;
		atomic_store(&mem_bytes, 2ull * grad_n * sizeof(float));
		atomic_fetch_add(&busy_ns_done, iod_clock_now_ns() - t0);
		atomic_store(&busy_since_ns, 0);
		if (rc) {
			printf("worker: lost a parameter server (%s): reconnecting\n",
			       strerror(-rc));
			fflush(stdout);
			continue;
		}
		atomic_fetch_add(&steps_done, 1);
		uint64_t t = iod_clock_now_ns();
		if (t - last >= IOD_NS_PER_S) {
			uint64_t s = atomic_load(&steps_done);
			printf("worker: step %llu, %.1f steps/s, communication %.2f ms/step, "
			       "param[0]=%.4f\n",
			       (unsigned long long)s,
			       (double)(s - last_steps) * 1e9 / (double)(t - last),
			       (double)comm_ns / 1e6 /
			           (double)(s - last_steps ? s - last_steps : 1),
			       ps[0].shard ? ps[0].shard[0] : 0.0);
			fflush(stdout);
			last = t;
			last_steps = s;
			comm_ns = 0;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		if (ps[i].fd >= 0)
			close(ps[i].fd);
		free(ps[i].shard);
	}
	free(grad);
	printf("worker: stopped after %llu steps\n", (unsigned long long)atomic_load(&steps_done));
	return 0;
}

/*
 * Data parallel over libiod-xfer: every replica of the service is a rank;
 * peers meet through the control plane (XferPeer objects), and per step
 * each rank's int64 gradient g[j] = (rank+1)*(j+1) + step is summed by a
 * ring all-reduce (iod_xfer_ring_allreduce) and checked element by element
 * against the exact sum (j+1)*N(N+1)/2 + N*step. A wrong element stops it.
 */
static int run_allreduce(const struct iod_demo_opts *o)
{
	const char *service = env_or("IOD_SERVICE", "worker"), *ord_s = getenv("IOD_ORDINAL");
	unsigned n = o->ranks, rank = ord_s ? (unsigned)atoi(ord_s) : 0;
	uint64_t count = o->params ? o->params : 65536;
	enum iod_xfer_transport t = IOD_XFER_SHM;
	struct iod_err e = {0};
	static char names[IOD_XFER_PEERS_MAX][IOD_NAME_MAX];
	char name[IOD_NAME_MAX], path[128] = "";
	if (n < 2 || n > IOD_XFER_PEERS_MAX || rank >= n)
		return fail(IOD_DEMO_EXIT_INVALID, "all-reduce: rank %u of %u ranks (2..%d)", rank,
		            n, IOD_XFER_PEERS_MAX);
	if (o->xfer_transport && iod_xfer_transport_parse(o->xfer_transport, &t))
		return fail(IOD_DEMO_EXIT_INVALID, "all-reduce: transport %s: shm, tcp or auto",
		            o->xfer_transport);
	snprintf(name, sizeof(name), "%s.%ld", env_or("IOD_REPLICA", service), (long)getpid());
	struct iod_xfer_opts xo = {.name = name, .transport = t, .deadline_ms = 20000};
	struct iod_xfer *x = NULL;
	int64_t *v = NULL;
	uint32_t id = 0;
	int rc = iod_api_client_init_config(&ps_api, o->api_server, &e);
	if (rc)
		return fail(IOD_DEMO_EXIT_ERROR, "control plane: %s", e.msg);
	rc = iod_xfer_create(&xo, &x, &e);
	if (!rc)
		rc = iod_xfer_mem_alloc(x, iod_xfer_ring_bytes(count, n), (void **)&v, &id, &e);
	if (!rc && id != 1) /* peers address our one region by the first id */
		rc = iod_err_set(&e, -EPROTO, "the region got id %u, not 1", id);
	struct iod_xfer_self me = {.service = service,
	                           .ordinal = rank,
	                           .replica = getenv("IOD_REPLICA"),
	                           .node = getenv("IOD_NODE"),
	                           .transport = iod_xfer_transport_name(t)};
	if (!rc)
		rc = iod_xfer_publish_api(x, &ps_api, &me, &e);
	if (!rc)
		rc = iod_xfer_peers_from_api(x, &ps_api, service, n, rank, 60000, names, &e);
	if (rc) {
		iod_xfer_destroy(x);
		iod_api_client_close(&ps_api);
		return fail(IOD_DEMO_EXIT_ERROR, "all-reduce: %s", e.msg);
	}
	const char *left = names[(rank + n - 1) % n], *right = names[(rank + 1) % n];
	iod_xfer_peer_path(x, right, path, sizeof(path), NULL);
	printf("worker %s: all-reduce over libiod-xfer, rank %u of %u, %llu int64, transport "
	       "%s (UCX %s), peers from the control plane\n",
	       env_or("IOD_REPLICA", ""), rank, n, (unsigned long long)count,
	       iod_xfer_transport_name(t), path[0] ? path : "?");
	fflush(stdout);
	uint64_t last = iod_clock_now_ns(), last_steps = 0, comm_ns = 0, wrong = 0;
	int64_t sum = (int64_t)n * (n + 1) / 2;
	start_counters();
	atomic_store(&mem_bytes, iod_xfer_ring_bytes(count, n));
	while (!rc && !stop_flag && (!o->steps || atomic_load(&steps_done) < o->steps)) {
		uint64_t step = atomic_load(&steps_done), t0 = iod_clock_now_ns();
		atomic_store(&busy_since_ns, t0);
		/* the synthetic compute produces this step's gradient */
		do {
			for (uint64_t j = 0; j < count; j++)
				v[j] = (int64_t)(rank + 1) * (int64_t)(j + 1) + (int64_t)step;
		} while (iod_clock_now_ns() < t0 + o->compute_ns);
		uint64_t t1 = iod_clock_now_ns();
		struct iod_xfer_ring g = {.n = n,
		                          .rank = rank,
		                          .left = left,
		                          .right = right,
		                          .id = id,
		                          .remote_id = 1,
		                          .count = count,
		                          .tag = (uint8_t)(step * 2 * (n - 1))};
		rc = iod_xfer_ring_allreduce(x, &g, v, &e);
		comm_ns += iod_clock_now_ns() - t1;
		for (uint64_t j = 0; !rc && j < count; j++)
			wrong += v[j] != sum * (int64_t)(j + 1) + (int64_t)n * (int64_t)step;
		atomic_fetch_add(&comm_bytes, 2ull * (n - 1) * count * 8 / n);
		atomic_fetch_add(&busy_ns_done, iod_clock_now_ns() - t0);
		atomic_store(&busy_since_ns, 0);
		if (!rc && wrong)
			rc = iod_err_set(&e, -EPROTO,
			                 "step %llu: %llu elements differ from the exact sum",
			                 (unsigned long long)step, (unsigned long long)wrong);
		if (rc)
			break;
		atomic_fetch_add(&steps_done, 1);
		uint64_t now = iod_clock_now_ns();
		if (now - last >= IOD_NS_PER_S) {
			uint64_t s = atomic_load(&steps_done);
			printf("worker: step %llu, %.1f steps/s, all-reduce %.2f ms/step, exact\n",
			       (unsigned long long)s,
			       (double)(s - last_steps) * 1e9 / (double)(now - last),
			       (double)comm_ns / 1e6 /
			           (double)(s - last_steps ? s - last_steps : 1));
			fflush(stdout);
			last = now;
			last_steps = s;
			comm_ns = 0;
		}
	}
	if (!rc)
		printf("worker: stopped after %llu steps, every all-reduce exact\n",
		       (unsigned long long)atomic_load(&steps_done));
	fflush(stdout);
	/* stay a moment: our region is the left neighbour's last target; then
	 * take our blob back (every rank loaded it: the last step needed all) */
	usleep(200000);
	if (!rc && !stop_flag)
		iod_xfer_unpublish_api(x, &ps_api, service, rank, NULL);
	iod_xfer_destroy(x);
	iod_api_client_close(&ps_api);
	return rc ? fail(IOD_DEMO_EXIT_ERROR, "all-reduce: %s", e.msg) : 0;
}

int iod_demo_run(const struct iod_demo_opts *o)
{
	IOD_ASSERT(o && o->role);
	role_name = o->role;
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(o->role, "parameter-server")) {
		if (o->http_port > 0 && start_http((uint16_t)o->http_port))
			return fail(IOD_DEMO_EXIT_ERROR, "http port %d busy", o->http_port);
		return run_ps(o->port, o->params, o->ckpt_dir, o->ckpt_every ? o->ckpt_every : 100,
		              o->ckpt_server, o->ckpt_replicas, o);
	}
	if (o->http_port > 0 && start_http((uint16_t)o->http_port))
		return fail(IOD_DEMO_EXIT_ERROR, "http port %d busy", o->http_port);
	if (o->allreduce_xfer)
		return run_allreduce(o);
	mesh_unix = o->mesh_unix;
	return run_worker(o->servers, o->compute_ns, o->steps);
}
