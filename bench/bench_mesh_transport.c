/*
 * bench_mesh_transport.c: what service_mesh.transport shm gains through the
 * mesh proxy (issue 22 step 4), tcp and shm in the same run.
 *
 * One in-process proxy (iod_mesh_proxy_start, a file source: one L4
 * service "echo" whose one endpoint is on this node) and one echo backend
 * that listens on TCP and on its AF_UNIX socket (UNIX_DIR/ep/ID.sock).
 * Rounds alternate the node's transport live (iod_mesh_proxy_transport_set,
 * what the agent calls when `iod config set service_mesh.transport` is
 * applied): under tcp the client dials the VIP and the proxy the backend's
 * TCP port; under shm the client dials UNIX_DIR/echo.sock and the proxy the
 * backend's AF_UNIX socket. Each round: a ping-pong of 64-byte messages on
 * one connection (latency p50/p99 per round trip, and round trips per
 * second), then a bulk echo (1 MiB writes, the bytes that came back per
 * second). The proxy's own counters must show the path each round took,
 * or the bench fails.
 *
 * Prints `BENCH mesh.transport transport=tcp|shm ...` per transport
 * (medians over IOD_BENCH_ROUNDS rounds, default 3) and `BENCH
 * mesh.transport_gain` with the shm/tcp ratios. Loopback only; no root.
 */
#include "bench.h"
#include "iod/mesh_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MSG_BYTES 64
#define BULK_CHUNK (1u << 20)
#define ROUNDS_MAX 9

static uint32_t env_u32(const char *name, uint32_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? (uint32_t)strtoul(v, NULL, 10) : dflt;
}

/* ---- the echo backend -------------------------------------------------- */

static void *echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char *buf = malloc(BULK_CHUNK);
	for (;;) {
		ssize_t n = buf ? read(fd, buf, BULK_CHUNK) : -1;
		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));
			if (w <= 0)
				goto out;
			off += w;
		}
	}
out:
	free(buf);
	close(fd);
	return NULL;
}

static void *echo_accept(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_t t;
		if (pthread_create(&t, NULL, echo_conn, (void *)(intptr_t)fd))
			close(fd);
		else
			pthread_detach(t);
	}
	return NULL;
}

static int listen_tcp(uint16_t *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 64) ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl))
		return -1;
	*port = ntohs(sa.sin_port);
	return fd;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	iod_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 64))
		return -1;
	return fd;
}

static void spawn(void *(*fn)(void *), int fd)
{
	pthread_t t;
	if (!pthread_create(&t, NULL, fn, (void *)(intptr_t)fd))
		pthread_detach(t);
}

/* ---- the client -------------------------------------------------------- */

static int dial(bool shm, const char *unix_path, uint32_t vip, uint16_t port)
{
	int fd;
	if (shm) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		iod_strlcpy(sa.sun_path, unix_path, sizeof(sa.sun_path));
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			close(fd);
			return -1;
		}
		return fd;
	}
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(vip)};
	int one = 1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool read_full(int fd, char *b, size_t n)
{
	while (n) {
		ssize_t r = read(fd, b, n);
		if (r <= 0)
			return false;
		b += r;
		n -= (size_t)r;
	}
	return true;
}

static bool write_full(int fd, const char *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w <= 0)
			return false;
		b += w;
		n -= (size_t)w;
	}
	return true;
}

struct round {
	double p50_us, p99_us, rps, gbps;
};

struct bulk_arg {
	int fd;
	uint64_t bytes;
	char *buf;
};

static void *bulk_writer(void *arg)
{
	struct bulk_arg *b = arg;
	for (uint64_t sent = 0; sent < b->bytes; sent += BULK_CHUNK)
		if (!write_full(b->fd, b->buf, BULK_CHUNK))
			break;
	return NULL;
}

static int run_round(bool shm, const char *unix_path, uint32_t vip, uint16_t port, uint32_t n,
                     uint64_t bulk_bytes, uint64_t *lat, struct round *out)
{
	char msg[MSG_BYTES], back[MSG_BYTES];
	memset(msg, 'x', sizeof(msg));
	int fd = dial(shm, unix_path, vip, port);
	if (fd < 0)
		return -errno;
	for (uint32_t i = 0; i < 200; i++) /* warm the path */
		if (!write_full(fd, msg, sizeof(msg)) || !read_full(fd, back, sizeof(back)))
			goto broken;
	uint64_t t0 = bench_now_ns();
	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = bench_now_ns();
		if (!write_full(fd, msg, sizeof(msg)) || !read_full(fd, back, sizeof(back)))
			goto broken;
		lat[i] = bench_now_ns() - a;
	}
	uint64_t t1 = bench_now_ns();
	close(fd);
	qsort(lat, n, sizeof(*lat), bench_cmp_u64);
	out->p50_us = (double)bench_pct_u64(lat, n, 0.50) / 1e3;
	out->p99_us = (double)bench_pct_u64(lat, n, 0.99) / 1e3;
	out->rps = (double)n / ((double)(t1 - t0) / 1e9);

	/* bulk: a writer thread, the bytes echoed back counted here */
	fd = dial(shm, unix_path, vip, port);
	if (fd < 0)
		return -errno;
	struct bulk_arg b = {.fd = fd, .bytes = bulk_bytes, .buf = malloc(BULK_CHUNK)};
	char *rb = malloc(BULK_CHUNK);
	pthread_t wt;
	if (!b.buf || !rb || pthread_create(&wt, NULL, bulk_writer, &b)) {
		free(b.buf);
		free(rb);
		close(fd);
		return -ENOMEM;
	}
	memset(b.buf, 'y', BULK_CHUNK);
	t0 = bench_now_ns();
	uint64_t got = 0;
	while (got < bulk_bytes) {
		ssize_t r = read(fd, rb, BULK_CHUNK);
		if (r <= 0)
			break;
		got += (uint64_t)r;
	}
	t1 = bench_now_ns();
	pthread_join(wt, NULL);
	close(fd);
	free(b.buf);
	free(rb);
	if (got < bulk_bytes)
		return -EPIPE;
	out->gbps = (double)got / ((double)(t1 - t0) / 1e9) / 1e9;
	return 0;
broken:
	close(fd);
	return -EPIPE;
}

/* The proxy's iod_mesh_transport_connections_total for hop/transport. */
static uint64_t tp_count(struct iod_mesh_proxy *p, const char *hop, const char *tp)
{
	struct iod_buf b = {0};
	char key[160];
	uint64_t v = 0;
	snprintf(key, sizeof(key),
	         "iod_mesh_transport_connections_total{service=\"echo\",hop=\"%s\","
	         "transport=\"%s\"} ",
	         hop, tp);
	if (!iod_mesh_proxy_metrics(p, &b) && b.data) {
		const char *at = strstr(b.data, key);
		if (at)
			v = strtoull(at + strlen(key), NULL, 10);
	}
	iod_buf_free(&b);
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	return bench_cmp_double(a, b);
}

static double median(double *v, uint32_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

int main(void)
{
	uint32_t rounds = IOD_MIN(IOD_MAX(env_u32("IOD_BENCH_ROUNDS", 3), 1u), ROUNDS_MAX);
	uint32_t n = IOD_MAX(env_u32("IOD_BENCH_PINGS", 20000), 100u);
	uint64_t bulk = (uint64_t)IOD_MAX(env_u32("IOD_BENCH_BULK_MIB", 256), 1u) << 20;
	char dir[] = "/tmp/iod-bench-tp-XXXXXX", ep_dir[64], ep_path[128], cfg[128];
	char svc_path[128], json[512];
	uint16_t bport;

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(ep_dir, sizeof(ep_dir), "%s/ep", dir);
	mkdir(ep_dir, 0755);
	int tfd = listen_tcp(&bport);
	if (tfd < 0) {
		perror("backend");
		return 1;
	}
	/* the endpoint's id in a file config is its "ip:port" */
	snprintf(ep_path, sizeof(ep_path), "%s/127.0.0.1:%u.sock", ep_dir, bport);
	int ufd = listen_unix(ep_path);
	if (ufd < 0) {
		perror("backend (unix)");
		return 1;
	}
	spawn(echo_accept, tfd);
	spawn(echo_accept, ufd);

	uint32_t vip = 0x7f4dc801u + (uint32_t)(getpid() % 200); /* 127.77.200.x */
	uint16_t vport = (uint16_t)(20000 + getpid() % 20000);
	snprintf(cfg, sizeof(cfg), "%s/mesh.json", dir);
	snprintf(json, sizeof(json),
	         "{\"node\":\"n1\",\"services\":[{\"name\":\"echo\",\"port\":%u,\"mode\":\"tcp\","
	         "\"vip\":\"127.77.200.%u\",\"endpoints\":[{\"addr\":\"127.0.0.1:%u\","
	         "\"node\":\"n1\"}]}]}",
	         vport, vip & 0xff, bport);
	FILE *f = fopen(cfg, "w");
	if (!f || fputs(json, f) < 0 || fclose(f)) {
		perror(cfg);
		return 1;
	}
	struct iod_mesh_file_source fs;
	iod_mesh_file_source_init(&fs, cfg);
	struct iod_mesh_proxy_opts o = {
	    .workers = 1, .unix_dir = dir, .transport = IOD_MESH_TP_TCP};
	struct iod_mesh_proxy *p = NULL;
	struct iod_err e = {0};
	if (iod_mesh_proxy_start(&p, &o, &fs.src, &e)) {
		fprintf(stderr, "bench_mesh_transport: proxy: %s\n", e.msg);
		return 1;
	}
	snprintf(svc_path, sizeof(svc_path), "%s/echo.sock", dir);

	uint64_t *lat = malloc(sizeof(*lat) * n);
	double p50[2][ROUNDS_MAX], p99[2][ROUNDS_MAX], rps[2][ROUNDS_MAX], gbps[2][ROUNDS_MAX];
	int rc = 0;
	for (uint32_t r = 0; r < rounds && !rc; r++) {
		for (int shm = 0; shm < 2 && !rc; shm++) {
			/* the live switch, as the agent applies iod config */
			iod_mesh_proxy_transport_set(p, shm ? IOD_MESH_TP_SHM : IOD_MESH_TP_TCP,
			                             false);
			struct stat st;
			for (int k = 0; k < 200 && (stat(svc_path, &st) == 0) != (bool)shm; k++)
				usleep(5000);
			if ((stat(svc_path, &st) == 0) != (bool)shm) {
				fprintf(stderr, "bench_mesh_transport: %s %s after 1 s\n", svc_path,
				        shm ? "missing" : "still there");
				rc = 1;
				break;
			}
			uint64_t up0 = tp_count(p, "upstream", shm ? "shm" : "tcp");
			uint64_t dn0 = tp_count(p, "client", shm ? "shm" : "tcp");
			struct round x = {0};
			int err = run_round(shm, svc_path, vip, vport, n, bulk, lat, &x);
			if (err) {
				fprintf(stderr, "bench_mesh_transport: %s round: %s\n",
				        shm ? "shm" : "tcp", strerror(-err));
				rc = 1;
				break;
			}
			/* both connections of the round took the path asked for */
			if (tp_count(p, "upstream", shm ? "shm" : "tcp") - up0 != 2 ||
			    tp_count(p, "client", shm ? "shm" : "tcp") - dn0 != 2) {
				fprintf(stderr,
				        "bench_mesh_transport: the %s round's connections did "
				        "not all take that path\n",
				        shm ? "shm" : "tcp");
				rc = 1;
				break;
			}
			p50[shm][r] = x.p50_us;
			p99[shm][r] = x.p99_us;
			rps[shm][r] = x.rps;
			gbps[shm][r] = x.gbps;
		}
	}
	if (!rc) {
		double m[2][4];
		for (int t = 0; t < 2; t++) {
			m[t][0] = median(p50[t], rounds);
			m[t][1] = median(p99[t], rounds);
			m[t][2] = median(rps[t], rounds);
			m[t][3] = median(gbps[t], rounds);
			bench_line("BENCH mesh.transport transport=%s hops=client,upstream msg=%u "
			           "rounds=%u pings=%u p50_us=%.1f p99_us=%.1f rps=%.0f "
			           "bulk_mib=%llu gbps=%.2f",
			           t ? "shm" : "tcp", MSG_BYTES, rounds, n, m[t][0], m[t][1],
			           m[t][2], (unsigned long long)(bulk >> 20), m[t][3]);
		}
		bench_line("BENCH mesh.transport_gain p50_ratio=%.2f p99_ratio=%.2f rps_ratio=%.2f "
		           "gbps_ratio=%.2f",
		           m[0][0] / m[1][0], m[0][1] / m[1][1], m[1][2] / m[0][2],
		           m[1][3] / m[0][3]);
	}
	iod_mesh_proxy_stop(p);
	free(lat);
	unlink(ep_path);
	rmdir(ep_dir);
	unlink(cfg);
	rmdir(dir);
	return rc;
}
