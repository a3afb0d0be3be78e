/*
 * bench_security.c: what the control plane's security costs (make
 * bench-security, with bench_sandbox.c's figures).
 *
 *   sec.api_tls   API writes (PUT /v1/configs/NAME, committed through Raft)
 *                 from one kept-alive client, over HTTPS with a client
 *                 certificate (the server authenticates, authorises and
 *                 audits every one) against the same writes in plaintext
 *                 (--insecure: no TLS, no authentication), to two
 *                 one-member servers started here from the same binary.
 *                 ops_ratio = TLS writes/s over plaintext writes/s (target
 *                 >= 0.90), added_p99_ms = TLS p99 minus plaintext p99
 *                 (target <= 1). The two alternate in ROUNDS rounds of OPS
 *                 writes, so the machine's load hits both alike; throughput
 *                 is the median round, p99 over every write.
 *
 *   sec.raft_tls  the same writes, over HTTPS with the admin certificate,
 *                 to two 3-member clusters of the same PKI: one whose
 *                 members speak Raft over mutual TLS (--pki, the default)
 *                 and one with --raft-plaintext. Every write is committed
 *                 by a majority, so its latency holds one replication
 *                 round trip leader -> follower -> leader. ops_ratio and
 *                 added_p99_ms as for sec.api_tls (no target of the issue's
 *                 own; the API's: >= 0.90, <= +1 ms).
 *
 *   sec.mesh_mtls mesh L7 with keep-alive, proxy to proxy: a client keeps
 *                 one connection to proxy A's VIP and sends GETs one at a
 *                 time; A (HTTP, pooled upstreams) forwards them to proxy
 *                 B, which relays them to `iod proxy backend` (32-byte
 *                 answers). Plaintext: A's endpoint is B's tcp-mode VIP
 *                 (an L4 hop). mTLS: A's endpoint sits behind B's mTLS
 *                 listener (A presents its caller's SVID, B verifies it,
 *                 authorises it and relays: also an L4 hop). One proxy
 *                 pair serves both, in alternating rounds. rps_ratio =
 *                 mTLS requests/s over plaintext (target >= 0.90),
 *                 added_p99_us = mTLS p99 minus plaintext p99 (target
 *                 <= 50).
 * Environment: IOD_BENCH_RUNS (rounds, default 5), IOD_BENCH_OPS (writes
 * per round, default 400), IOD_BENCH_MESH_OPS (mesh requests per round,
 * default 4000), IOD_BIN (default build/iod).
 */
#include "iod/api.h"
#include "iod/sec.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	return iod_clock_now_ns();
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t i = (size_t)(p * (double)(n - 1));
	return (double)v[i];
}

static double median(double *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[n / 2];
}

static pid_t start_server(const char *bin, const char *dir, int port, const char *pki)
{
	char data[512], raft[64], api[64], log[600];
	snprintf(data, sizeof(data), "%s/d%d", dir, port);
	snprintf(raft, sizeof(raft), "127.0.0.1:%d", port + 1);
	snprintf(api, sizeof(api), "127.0.0.1:%d", port);
	snprintf(log, sizeof(log), "%s/server-%d.log", dir, port);
	pid_t p = fork();
	if (p == 0) {
		FILE *f = freopen(log, "w", stderr);
		(void)f;
		if (pki)
			execl(bin, bin, "server", "--id", "1", "--data-dir", data, "--raft", raft,
			      "--api", api, "--pki", pki, (char *)NULL);
		else
			execl(bin, bin, "server", "--id", "1", "--data-dir", data, "--raft", raft,
			      "--api", api, "--insecure", (char *)NULL);
		_exit(127);
	}
	return p;
}

/* Member id of a 3-member cluster at ports base+1..3 (API), base+11..13 (Raft). */
static pid_t start_member(const char *bin, const char *dir, int base, int id, const char *pki,
                          bool raft_plain)
{
	char data[512], raft[64], api[64], log[600], peers[256];
	snprintf(data, sizeof(data), "%s/m%d-%d", dir, base, id);
	snprintf(raft, sizeof(raft), "127.0.0.1:%d", base + 10 + id);
	snprintf(api, sizeof(api), "127.0.0.1:%d", base + id);
	snprintf(log, sizeof(log), "%s/member-%d-%d.log", dir, base, id);
	snprintf(
	    peers, sizeof(peers),
	    "1=127.0.0.1:%d@127.0.0.1:%d,2=127.0.0.1:%d@127.0.0.1:%d,3=127.0.0.1:%d@127.0.0.1:%d",
	    base + 11, base + 1, base + 12, base + 2, base + 13, base + 3);
	char idb[8];
	snprintf(idb, sizeof(idb), "%d", id);
	pid_t p = fork();
	if (p == 0) {
		FILE *f = freopen(log, "w", stderr);
		(void)f;
		execl(bin, bin, "server", "--id", idb, "--data-dir", data, "--raft", raft, "--api",
		      api, "--pki", pki, "--peers", peers, "--election-timeout", "300ms",
		      "--heartbeat", "30ms", raft_plain ? "--raft-plaintext" : (char *)NULL,
		      (char *)NULL);
		_exit(127);
	}
	return p;
}

/* ROUNDS x OPS writes through c; per-write latency into lat, each round's rate into rate. */
static int round_of(struct iod_api_client *c, const char *tag, uint32_t ops, uint64_t *lat,
                    double *rate)
{
	char path[96], body[128];
	uint64_t t0 = now_ns();
	for (uint32_t i = 0; i < ops; i++) {
		struct iod_api_response r;
		struct iod_err e = {0};
		snprintf(path, sizeof(path), "/v1/configs/bench-%s-%u", tag, i % 64);
		int n =
		    snprintf(body, sizeof(body), "{\"i\": %u, \"pad\": \"0123456789abcdef\"}", i);
		uint64_t a = now_ns();
		int rc =
		    iod_api_request(c, "PUT", path, "application/json", body, (size_t)n, &r, &e);
		lat[i] = now_ns() - a;
		if (rc || r.status != 200) {
			fprintf(stderr, "bench_security: %s write: %s\n", tag,
			        rc ? e.msg : iod_api_error_text(&r));
			if (!rc)
				iod_api_response_free(&r);
			return -1;
		}
		iod_api_response_free(&r);
	}
	*rate = (double)ops * 1e9 / (double)(now_ns() - t0);
	return 0;
}

/* The first write that a fresh server accepts (a leader elected). */
static int ready(struct iod_api_client *c)
{
	for (int i = 0; i < 200; i++) {
		struct iod_api_response r;
		struct iod_err e = {0};
		if (!iod_api_request(c, "PUT", "/v1/configs/bench-ready", "application/json", "{}",
		                     2, &r, &e)) {
			int st = r.status;
			iod_api_response_free(&r);
			if (st == 200)
				return 0;
		}
		usleep(50000);
	}
	return -1;
}

/* sec.raft_tls: two 3-member clusters, Raft in plaintext and over mTLS. */
static int raft_bench(const char *bin, const char *dir, const char *pki,
                      struct iod_sec_tls_creds *creds, uint32_t rounds, uint32_t ops, uint64_t *lp,
                      uint64_t *lt, double *rp, double *rt)
{
	int bp = 18100 + (int)(getpid() % 50) * 40, bt = bp + 20, rc = 1;
	pid_t pids[6];
	struct iod_api_client plain, tls;
	struct iod_err e = {0};
	char servers[128];

	for (int i = 0; i < 3; i++) {
		pids[i] = start_member(bin, dir, bp, i + 1, pki, true);
		pids[3 + i] = start_member(bin, dir, bt, i + 1, pki, false);
	}
	snprintf(servers, sizeof(servers), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", bp + 1, bp + 2,
	         bp + 3);
	iod_api_client_init(&plain, servers, &e);
	snprintf(servers, sizeof(servers), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", bt + 1, bt + 2,
	         bt + 3);
	iod_api_client_init(&tls, servers, &e);
	iod_api_client_set_creds(&plain, creds, NULL);
	iod_api_client_set_creds(&tls, creds, NULL);
	if (ready(&plain) || ready(&tls)) {
		printf("BENCH sec.raft_tls error=no_leader (see %s/member-*.log)\n", dir);
		goto out;
	}
	printf("# sec.raft_tls: %u rounds x %u writes to 3-member clusters (--pki both; Raft "
	       "plaintext = --raft-plaintext, TLS = mutual TLS 1.3 between members)\n",
	       rounds, ops);
	for (uint32_t k = 0; k < rounds; k++)
		if (round_of(&plain, "rp", ops, lp + (size_t)k * ops, &rp[k]) ||
		    round_of(&tls, "rt", ops, lt + (size_t)k * ops, &rt[k]))
			goto out;
	size_t n = (size_t)rounds * ops;
	double p99p = pct(lp, n, 0.99) / 1e6, p99t = pct(lt, n, 0.99) / 1e6;
	double p50p = pct(lp, n, 0.50) / 1e6, p50t = pct(lt, n, 0.50) / 1e6;
	double mp = median(rp, rounds), mt = median(rt, rounds);
	printf(
	    "BENCH sec.raft_tls ops_ratio=%.3f added_p99_ms=%.3f plain_ops_s=%.0f tls_ops_s=%.0f "
	    "plain_p50_ms=%.3f tls_p50_ms=%.3f plain_p99_ms=%.3f tls_p99_ms=%.3f writes=%zu "
	    "members=3\n",
	    mt / mp, p99t - p99p, mp, mt, p50p, p50t, p99p, p99t, n);
	rc = 0;
out:
	iod_api_client_close(&plain);
	iod_api_client_close(&tls);
	for (int i = 0; i < 6; i++)
		kill(pids[i], SIGTERM);
	for (int i = 0; i < 6; i++)
		waitpid(pids[i], NULL, 0);
	return rc;
}

/* fork+exec argv with stderr to log; the child's pid. */
static pid_t spawn(char *const argv[], const char *log)
{
	pid_t p = fork();
	if (p == 0) {
		FILE *f = freopen(log, "w", stderr);
		(void)f;
		execv(argv[0], argv);
		_exit(127);
	}
	return p;
}

/* One kept-alive HTTP/1.1 client of ip:port. -1 when it cannot connect. */
static int http_open(const char *ip, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, ip, &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* One GET on fd, its whole answer read: 0 for a 200, -1 otherwise. */
static int http_get(int fd)
{
	static const char req[] = "GET /b HTTP/1.1\r\nHost: bench\r\n\r\n";
	char buf[4096];
	size_t got = 0;
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		return -1;
	for (;;) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = 0;
		char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "content-length:");
		if (end && cl && cl < end) {
			size_t want = (size_t)(end + 4 - buf) + (size_t)strtoul(cl + 15, NULL, 10);
			if (got >= want)
				return strncmp(buf, "HTTP/1.1 200", 12) ? -1 : 0;
		}
		if (got >= sizeof(buf) - 1)
			return -1;
	}
}

/* ops GETs on fd: latencies into lat, requests/s into *rate. */
static int mesh_round(int fd, uint32_t ops, uint64_t *lat, double *rate)
{
	uint64_t t0 = now_ns();
	for (uint32_t i = 0; i < ops; i++) {
		uint64_t a = now_ns();
		if (http_get(fd))
			return -1;
		lat[i] = now_ns() - a;
	}
	*rate = (double)ops / ((double)(now_ns() - t0) / 1e9);
	return 0;
}

static int mesh_bench(const char *bin, const char *dir, uint32_t rounds, uint32_t ops)
{
	char cmd[2048], log[600], cfg_a[600], cfg_b[600], cfg_r[600], mdir_a[600], mdir_b[600];
	char adm_a[32], adm_b[32], adm_r[32], mlisten[32], up[32];
	int base = 18400 + (int)(getpid() % 50) * 8, rc = 1;
	pid_t pids[4] = {-1, -1, -1, -1};
	snprintf(up, sizeof(up), "127.0.0.1:%d", base);
	snprintf(adm_a, sizeof(adm_a), "127.0.0.1:%d", base + 1);
	snprintf(adm_b, sizeof(adm_b), "127.0.0.1:%d", base + 2);
	snprintf(mlisten, sizeof(mlisten), "127.0.0.1:%d", base + 3);
	snprintf(adm_r, sizeof(adm_r), "127.0.0.1:%d", base + 4);
	snprintf(mdir_a, sizeof(mdir_a), "%s/mesh-a", dir);
	snprintf(mdir_b, sizeof(mdir_b), "%s/mesh-b", dir);
	/* the SVID A's caller presents (the bench itself: A cannot name it,
	 * so --mtls-identity), B's node certificate */
	snprintf(cmd, sizeof(cmd),
	         "mkdir -p %s/default %s && cp %s/pki/ca.crt %s/ && cp %s/pki/ca.crt %s/ && "
	         "%s cert create service bench --pki %s/pki --out %s/default/bench >/dev/null && "
	         "%s cert create node n2 --pki %s/pki --out %s/node >/dev/null",
	         mdir_a, mdir_b, dir, mdir_a, dir, mdir_b, bin, dir, mdir_a, bin, dir, mdir_b);
	if (system(cmd) != 0) {
		printf("BENCH sec.mesh_mtls error=certificates\n");
		return 1;
	}
	snprintf(cfg_b, sizeof(cfg_b), "%s/b.json", dir);
	snprintf(cfg_a, sizeof(cfg_a), "%s/a.json", dir);
	FILE *f = fopen(cfg_b, "w");
	if (!f)
		return 1;
	fprintf(f,
	        "{\"node\": \"n2\", \"services\": ["
	        "{\"name\": \"sec\", \"vip\": \"127.84.0.2\", \"port\": 8000, \"mode\": \"http\", "
	        "\"endpoints\": [{\"addr\": \"%s\", \"node\": \"n2\"}]},"
	        "{\"name\": \"plaintcp\", \"vip\": \"127.84.0.2\", \"port\": 8001, \"mode\": "
	        "\"tcp\", \"endpoints\": [{\"addr\": \"%s\", \"node\": \"n2\"}]}]}\n",
	        up, up);
	fclose(f);
	if (!(f = fopen(cfg_a, "w")))
		return 1;
	fprintf(
	    f,
	    "{\"node\": \"n1\", \"services\": ["
	    "{\"name\": \"sec\", \"vip\": \"127.84.0.1\", \"port\": 8000, \"mode\": \"http\", "
	    "\"endpoints\": [{\"addr\": \"%s\", \"node\": \"n2\", \"mtls\": \"%s\"}]},"
	    "{\"name\": \"plain\", \"vip\": \"127.84.0.1\", \"port\": 8001, \"mode\": \"http\", "
	    "\"endpoints\": [{\"addr\": \"127.84.0.2:8001\", \"node\": \"n2\"}]}]}\n",
	    up, mlisten);
	fclose(f);
	/* proxy R: A's mTLS service through the first design's socketpair relay
	 * (--mtls-relay), so old and new are measured in the same run */
	snprintf(cfg_r, sizeof(cfg_r), "%s/r.json", dir);
	if (!(f = fopen(cfg_r, "w")))
		return 1;
	fprintf(f,
	        "{\"node\": \"n1\", \"services\": ["
	        "{\"name\": \"sec\", \"vip\": \"127.84.0.3\", \"port\": 8000, \"mode\": \"http\", "
	        "\"endpoints\": [{\"addr\": \"%s\", \"node\": \"n2\", \"mtls\": \"%s\"}]}]}\n",
	        up, mlisten);
	fclose(f);
	char *be[] = {(char *)bin, "proxy", "backend", "--listen", up, "--size", "32", NULL};
	char *pb[] = {(char *)bin, "proxy",   "run", "--config",   cfg_b,  "--workers",
	              "1",         "--admin", adm_b, "--mtls-dir", mdir_b, "--mtls-listen",
	              mlisten,     NULL};
	char *pa[] = {(char *)bin,     "proxy",      "run",  "--config",
	              cfg_a,           "--workers",  "1",    "--admin",
	              adm_a,           "--mtls-dir", mdir_a, "--mtls-identity",
	              "default/bench", NULL};
	snprintf(log, sizeof(log), "%s/mesh-backend.log", dir);
	pids[0] = spawn(be, log);
	snprintf(log, sizeof(log), "%s/mesh-b.log", dir);
	pids[1] = spawn(pb, log);
	snprintf(log, sizeof(log), "%s/mesh-a.log", dir);
	pids[2] = spawn(pa, log);
	char *pr[] = {(char *)bin,     "proxy",        "run",  "--config",
	              cfg_r,           "--workers",    "1",    "--admin",
	              adm_r,           "--mtls-dir",   mdir_a, "--mtls-identity",
	              "default/bench", "--mtls-relay", NULL};
	snprintf(log, sizeof(log), "%s/mesh-r.log", dir);
	pids[3] = spawn(pr, log);
	int fp = -1, fs = -1, fr = -1;
	for (int i = 0; i < 100 && (fp < 0 || fs < 0 || fr < 0); i++) {
		usleep(100000);
		if (fp < 0 && (fp = http_open("127.84.0.1", 8001)) >= 0 && http_get(fp)) {
			close(fp);
			fp = -1;
		}
		if (fs < 0 && (fs = http_open("127.84.0.1", 8000)) >= 0 && http_get(fs)) {
			close(fs);
			fs = -1;
		}
		if (fr < 0 && (fr = http_open("127.84.0.3", 8000)) >= 0 && http_get(fr)) {
			close(fr);
			fr = -1;
		}
	}
	uint64_t *lp = calloc((size_t)rounds * ops, sizeof(uint64_t)),
	         *lt = calloc((size_t)rounds * ops, sizeof(uint64_t)),
	         *lr = calloc((size_t)rounds * ops, sizeof(uint64_t));
	double *rp = calloc(rounds, sizeof(double)), *rt = calloc(rounds, sizeof(double)),
	       *rr = calloc(rounds, sizeof(double));
	if (fp < 0 || fs < 0 || fr < 0) {
		printf("BENCH sec.mesh_mtls error=no_answer (see %s/mesh-*.log)\n", dir);
		goto out;
	}
	if (!lp || !lt || !rp || !rt || !lr || !rr)
		goto out;
	for (uint32_t k = 0; k < rounds; k++)
		if (mesh_round(fp, ops, lp + (size_t)k * ops, &rp[k]) ||
		    mesh_round(fs, ops, lt + (size_t)k * ops, &rt[k]) ||
		    mesh_round(fr, ops, lr + (size_t)k * ops, &rr[k])) {
			printf("BENCH sec.mesh_mtls error=request_failed (see %s/mesh-*.log)\n",
			       dir);
			goto out;
		}
	size_t n = (size_t)rounds * ops;
	double p99p = pct(lp, n, 0.99) / 1e3, p99t = pct(lt, n, 0.99) / 1e3;
	double p50p = pct(lp, n, 0.50) / 1e3, p50t = pct(lt, n, 0.50) / 1e3;
	double mp = median(rp, rounds), mt = median(rt, rounds);
	printf("BENCH sec.mesh_mtls rps_ratio=%.3f added_p99_us=%.1f plain_rps=%.0f mtls_rps=%.0f "
	       "plain_p50_us=%.1f mtls_p50_us=%.1f plain_p99_us=%.1f mtls_p99_us=%.1f requests=%zu "
	       "target_rps_ratio=0.90 target_added_p99_us=50\n",
	       mt / mp, p99t - p99p, mp, mt, p50p, p50t, p99p, p99t, n);
	/* the first design (socketpair relay) in the same run, for comparison */
	double p99r = pct(lr, n, 0.99) / 1e3, p50r = pct(lr, n, 0.50) / 1e3,
	       mr = median(rr, rounds);
	printf("BENCH sec.mesh_mtls_relay rps_ratio=%.3f added_p99_us=%.1f plain_rps=%.0f "
	       "mtls_rps=%.0f plain_p50_us=%.1f mtls_p50_us=%.1f plain_p99_us=%.1f "
	       "mtls_p99_us=%.1f requests=%zu\n",
	       mr / mp, p99r - p99p, mp, mr, p50p, p50r, p99p, p99r, n);
	rc = 0;
out:
	if (fr >= 0)
		close(fr);
	free(lr);
	free(rr);
	if (fp >= 0)
		close(fp);
	if (fs >= 0)
		close(fs);
	free(lp);
	free(lt);
	free(rp);
	free(rt);
	for (int i = 0; i < 4; i++)
		if (pids[i] > 0) {
			kill(pids[i], SIGTERM);
			waitpid(pids[i], NULL, 0);
		}
	return rc;
}

int main(void)
{
	const char *bin = getenv("IOD_BIN") ? getenv("IOD_BIN") : "build/iod";
	uint32_t rounds = getenv("IOD_BENCH_RUNS") ? (uint32_t)atoi(getenv("IOD_BENCH_RUNS")) : 5;
	uint32_t ops = getenv("IOD_BENCH_OPS") ? (uint32_t)atoi(getenv("IOD_BENCH_OPS")) : 400;
	char dir[] = "/tmp/iod-bench-sec-XXXXXX", cmd[1024], pki[128], p1[160], p2[160], p3[160];
	struct iod_sec_tls_creds *creds = NULL;
	struct iod_api_client plain, tls;
	struct iod_err e = {0};
	int port_plain = 17800 + (int)(getpid() % 50) * 4, port_tls = port_plain + 2, rc = 1;

	if (!rounds || !ops || access(bin, X_OK) || !mkdtemp(dir)) {
		printf("BENCH sec.api_tls error=setup (need %s: run make)\n", bin);
		return 1;
	}
	iod_log_set_level(IOD_LOG_ERROR);
	snprintf(pki, sizeof(pki), "%s/pki", dir);
	snprintf(cmd, sizeof(cmd), "%s init --pki %s --no-config --server 127.0.0.1:%d >/dev/null",
	         bin, pki, port_tls);
	if (system(cmd) != 0) {
		printf("BENCH sec.api_tls error=iod_init\n");
		return 1;
	}
	if (getenv("IOD_BENCH_SEC_ONLY") && !strcmp(getenv("IOD_BENCH_SEC_ONLY"), "mesh")) {
		/* only the mesh figures (sec.mesh_mtls, sec.mesh_mtls_relay) */
		rc = mesh_bench(bin, dir, rounds,
		                getenv("IOD_BENCH_MESH_OPS")
		                    ? (uint32_t)atoi(getenv("IOD_BENCH_MESH_OPS"))
		                    : 4000);
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "bench_security: could not remove %s\n", dir);
		return rc;
	}
	pid_t sp = start_server(bin, dir, port_plain, NULL),
	      st = start_server(bin, dir, port_tls, pki);
	snprintf(p1, sizeof(p1), "%s/ca.crt", pki);
	snprintf(p2, sizeof(p2), "%s/admin.crt", pki);
	snprintf(p3, sizeof(p3), "%s/admin.key", pki);
	snprintf(cmd, sizeof(cmd), "127.0.0.1:%d", port_plain);
	iod_api_client_init(&plain, cmd, &e);
	snprintf(cmd, sizeof(cmd), "127.0.0.1:%d", port_tls);
	iod_api_client_init(&tls, cmd, &e);
	if (iod_sec_tls_creds_load(p1, p2, p3, &creds, &e)) {
		printf("BENCH sec.api_tls error=creds (%s)\n", e.msg);
		goto out;
	}
	iod_api_client_set_creds(&tls, creds, NULL);
	tls.own_creds = true;
	if (ready(&plain) || ready(&tls)) {
		printf("BENCH sec.api_tls error=no_leader (see %s/server-*.log)\n", dir);
		goto out;
	}
	uint64_t *lp = calloc((size_t)rounds * ops, sizeof(uint64_t)),
	         *lt = calloc((size_t)rounds * ops, sizeof(uint64_t));
	double *rp = calloc(rounds, sizeof(double)), *rt = calloc(rounds, sizeof(double));
	if (!lp || !lt || !rp || !rt)
		goto freeout;
	printf("# bench_security: %u rounds x %u writes, one kept-alive client each; plaintext = "
	       "--insecure, TLS = --pki (TLS 1.3, ECDSA P-256 client certificate, authz + audit)\n",
	       rounds, ops);
	for (uint32_t k = 0; k < rounds; k++) {
		if (round_of(&plain, "p", ops, lp + (size_t)k * ops, &rp[k]) ||
		    round_of(&tls, "t", ops, lt + (size_t)k * ops, &rt[k]))
			goto freeout;
	}
	size_t n = (size_t)rounds * ops;
	double p99p = pct(lp, n, 0.99) / 1e6, p99t = pct(lt, n, 0.99) / 1e6;
	double p50p = pct(lp, n, 0.50) / 1e6, p50t = pct(lt, n, 0.50) / 1e6;
	double mp = median(rp, rounds), mt = median(rt, rounds);
	printf("BENCH sec.api_tls ops_ratio=%.3f added_p99_ms=%.3f plain_ops_s=%.0f tls_ops_s=%.0f "
	       "plain_p50_ms=%.3f tls_p50_ms=%.3f plain_p99_ms=%.3f tls_p99_ms=%.3f writes=%zu "
	       "target_ops_ratio=0.90 target_added_p99_ms=1\n",
	       mt / mp, p99t - p99p, mp, mt, p50p, p50t, p99p, p99t, n);
	rc = raft_bench(bin, dir, pki, creds, rounds, ops, lp, lt, rp, rt);
	rc |= mesh_bench(bin, dir, rounds,
	                 getenv("IOD_BENCH_MESH_OPS") ? (uint32_t)atoi(getenv("IOD_BENCH_MESH_OPS"))
	                                              : 4000);
freeout:
	free(lp);
	free(lt);
	free(rp);
	free(rt);
out:
	iod_api_client_close(&plain);
	iod_api_client_close(&tls);
	kill(sp, SIGTERM);
	kill(st, SIGTERM);
	waitpid(sp, NULL, 0);
	waitpid(st, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_security: could not remove %s\n", dir);
	return rc;
}
