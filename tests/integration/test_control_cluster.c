/*
 * test_control_cluster.c: integration test of the real control plane: three
 * `iod server` processes on loopback, driven through the API client.
 *
 * - failover: a writer puts keys while the leader is killed with SIGKILL and
 *   restarted from its data dir, again and again; every acknowledged write
 *   must be readable afterwards on every server, and a read right after a
 *   write (from the server that acknowledged it) must see it;
 * - durability: all servers stopped and restarted: acknowledged writes are
 *   still there (recovered from disk);
 * - hardening: bad JSON, unknown kinds, oversized bodies, stale revisions,
 *   a compacted-or-future watch revision, a slow client holding a half-sent
 *   request, garbage bytes: clear 4xx JSON errors and the server keeps
 *   serving.
 *
 * It runs the release binary ($IOD_BUILD/iod, else build/iod) and skips when
 * it is missing. Timing is never asserted (the machine is shared): only
 * outcomes are.
 */
#include "control_cluster.h"
#include "harness.h"
#include "iod/api.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N IOD_CC_N
#define WRITES 300
#define KILL_EVERY 40

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int setup(struct iod_cc *c, const char *name)
{
	const char *b = getenv("IOD_BUILD");
	memset(c, 0, sizeof(*c));
	snprintf(c->bin, sizeof(c->bin), "%s/iod", b ? b : "build");
	if (access(c->bin, X_OK))
		return -ENOENT;
	snprintf(c->dir, sizeof(c->dir), "%s/%s", iod_test_tmpdir(), name);
	if (iod_test_sh("mkdir -p %s", c->dir))
		return -EIO;
	/* small snapshot thresholds: restarts load snapshots and lagging
	 * servers get InstallSnapshot, through the real libuv backend */
	const char *args[] = {"--snapshot-threshold", "64", "--snapshot-trailing", "16", NULL};
	memcpy(c->args, args, sizeof(args));
	if (iod_cc_ports(c))
		return -EADDRNOTAVAIL;
	for (int i = 0; i < N; i++)
		if (iod_cc_start(c, i))
			return -errno;
	return 0;
}

static void teardown(struct iod_cc *c)
{
	if (iod_test_failed() && getenv("IOD_TEST_KEEP")) {
		for (int i = 0; i < N; i++) {
			struct iod_api_response r;
			struct iod_err e;
			struct iod_http_conn fd = {0};
			if (iod_api_http_once(&fd, c->api[i], "GET", "/v1/status", NULL, NULL, 0,
			                      1000, &r, &e) == 0) {
				fprintf(
				    stderr, "server %d: state %s term %lld applied %lld rev %lld\n",
				    i, json_string_value(json_object_get(r.json, "state")),
				    json_integer_value(json_object_get(r.json, "term")),
				    json_integer_value(json_object_get(r.json, "applied_index")),
				    json_integer_value(json_object_get(r.json, "revision")));
				iod_api_response_free(&r);
			} else
				fprintf(stderr, "server %d: %s\n", i, e.msg);
			iod_http_conn_close(&fd);
			if (iod_api_http_once(&fd, c->api[i], "GET", "/v1/configs", NULL, NULL, 0,
			                      1000, &r, &e) == 0) {
				json_t *x;
				size_t xi;
				fprintf(stderr, "keys:");
				json_array_foreach(json_object_get(r.json, "items"), xi, x)
				{
					fprintf(stderr, " %s",
					        json_string_value(json_object_get(x, "name")));
				}
				fprintf(stderr, "\n");
				iod_api_response_free(&r);
			}
			iod_http_conn_close(&fd);
		}
		iod_test_sh("rm -rf /tmp/keep; cp -r %s /tmp/keep; ps -ef > /tmp/keep/ps", c->dir);
	}
	for (int i = 0; i < N; i++)
		iod_cc_stop(c, i, SIGKILL);
	if (iod_test_failed())
		iod_test_sh("tail -n 15 %s/log* >&2", c->dir);
}

/* Index of the leader per server 0's (or anyone's) status, or -1. */
static int find_leader(struct iod_cc *c)
{
	for (int tries = 0; tries < 200; tries++) {
		for (int i = 0; i < N; i++) {
			struct iod_api_response r;
			struct iod_err e;
			struct iod_http_conn fd = {0};
			if (!c->pid[i])
				continue;
			if (iod_api_http_once(&fd, c->api[i], "GET", "/v1/status", NULL, NULL, 0,
			                      1000, &r, &e) == 0) {
				const char *st = "";
				iod_json_get_str(r.json, "state", &st);
				bool leader = !strcmp(st, "leader");
				iod_api_response_free(&r);
				iod_http_conn_close(&fd);
				if (leader)
					return i;
			}
		}
		sleep_ms(20);
	}
	return -1;
}

static int put_key(struct iod_api_client *cl, int k, struct iod_api_response *r)
{
	char path[64], body[64];
	struct iod_err e;
	snprintf(path, sizeof(path), "/v1/config/k%d", k);
	snprintf(body, sizeof(body), "{\"i\":%d}", k);
	return iod_api_request(cl, "PUT", path, "application/json", body, strlen(body), r, &e);
}

/* GET key k from one server (retrying while it catches up); its value or -1. */
static int get_key_at(const char *addr, int k, unsigned wait_ms)
{
	char path[64];
	snprintf(path, sizeof(path), "/v1/config/k%d", k);
	for (unsigned t = 0; t <= wait_ms; t += 20) {
		struct iod_api_response r;
		struct iod_err e;
		struct iod_http_conn fd = {0};
		int v = -1;
		if (iod_api_http_once(&fd, addr, "GET", path, NULL, NULL, 0, 2000, &r, &e) == 0) {
			if (r.status == 200)
				v = (int)json_integer_value(
				    json_object_get(json_object_get(r.json, "value"), "i"));
			iod_api_response_free(&r);
		}
		iod_http_conn_close(&fd);
		if (v >= 0)
			return v;
		sleep_ms(20);
	}
	return -1;
}

static void failover_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_err e;
	static bool acked[WRITES];
	int kills = 0, acked_n = 0, dead = -1, unavailable = 0;

	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	cl.retry_ms = 15000;
	cl.timeout_ms = 2000;
	CHECK_MSG(find_leader(c) >= 0, "no leader elected (logs in %s)", c->dir);
	for (int k = 0; k < WRITES; k++) {
		struct iod_api_response r;
		if (k % KILL_EVERY == KILL_EVERY / 2 && dead < 0) {
			dead = find_leader(c);
			if (dead >= 0) {
				iod_cc_stop(c, dead, SIGKILL);
				kills++;
			}
		} else if (k % KILL_EVERY == KILL_EVERY - 1 && dead >= 0) {
			CHECK_EQ(iod_cc_start(c, dead), 0); /* restart from its data dir */
			dead = -1;
		}
		if (put_key(&cl, k, &r) != 0) {
			/* not acknowledged: allowed to be lost; but a cluster that
			 * stays unavailable is a failure (a server crashed?) */
			CHECK_MSG(++unavailable < 3,
			          "no write committed for 3 x %u ms (logs in %s)", cl.retry_ms,
			          c->dir);
			continue;
		}
		unavailable = 0;
		if (r.status == 200) {
			acked[k] = true;
			acked_n++;
			/* read-your-write at the server that acknowledged it */
			int v = get_key_at(r.server, k, 0);
			char srv[IOD_ADDR_MAX];
			snprintf(srv, sizeof(srv), "%s", r.server);
			iod_api_response_free(&r);
			CHECK_MSG(v == k, "read after acknowledged write k%d at %s saw %d", k, srv,
			          v);
		} else {
			iod_api_response_free(&r);
		}
	}
	iod_api_client_close(&cl);
	if (dead >= 0)
		CHECK_EQ(iod_cc_start(c, dead), 0);
	CHECK_MSG(kills >= 5, "only %d leader kills happened", kills);
	CHECK_MSG(acked_n > WRITES / 2, "only %d of %d writes acknowledged", acked_n, WRITES);
	/* every acknowledged write is on every server once they catch up */
	for (int i = 0; i < N; i++)
		for (int k = 0; k < WRITES; k++)
			if (acked[k])
				CHECK_MSG(get_key_at(c->api[i], k, 5000) == k,
				          "acknowledged k%d missing on server %d (logs in %s)", k,
				          i + 1, c->dir);
	/* durability: stop everyone (graceful), restart, everything is still there */
	for (int i = 0; i < N; i++)
		iod_cc_stop(c, i, SIGTERM);
	for (int i = 0; i < N; i++)
		CHECK_EQ(iod_cc_start(c, i), 0);
	CHECK(find_leader(c) >= 0);
	for (int k = 0; k < WRITES; k++)
		if (acked[k])
			CHECK_MSG(get_key_at(c->api[k % N], k, 5000) == k,
			          "k%d lost across a full restart", k);
}

static void with_cluster(const char *name, void (*body)(struct iod_cc *))
{
	static struct iod_cc c;
	int rc = setup(&c, name);
	if (rc == -ENOENT) {
		iod_test_skip("build/iod is not built (run make first)");
		return;
	}
	if (rc == 0)
		body(&c);
	else
		iod_test_fail(__FILE__, __LINE__, "starting servers: %s", strerror(-rc));
	teardown(&c);
}

TEST(failover_loses_no_acknowledged_write)
{
	with_cluster("failover", failover_body);
}

static int raw_exchange(const char *addr_port, const char *req, size_t len, char *out, size_t cap)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), n = 0;
	a.sin_port = htons((uint16_t)atoi(strrchr(addr_port, ':') + 1));
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (send(fd, req, len, MSG_NOSIGNAL) < 0) {
		close(fd);
		return -1;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t r = recv(fd, out + n, cap - 1 - (size_t)n, 0);
		if (r <= 0)
			break;
		n += (int)r;
		if ((size_t)n >= cap - 1)
			break;
	}
	out[n] = 0;
	close(fd);
	return n;
}

static int call(struct iod_api_client *cl, const char *method, const char *path, const char *body,
                struct iod_api_response *r)
{
	struct iod_err e;
	return iod_api_request(cl, method, path, "application/json", body, body ? strlen(body) : 0,
	                       r, &e);
}

static void hardening_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;

	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	CHECK(find_leader(c) >= 0);

	CHECK_EQ(call(&cl, "PUT", "/v1/node/a", "{\"gpus\":", &r), 0);
	CHECK_EQ(r.status, 400);
	CHECK_CONTAINS(iod_api_error_text(&r), "invalid JSON");
	iod_api_response_free(&r);

	CHECK_EQ(call(&cl, "PUT", "/v1/node/a", "[1,2]", &r), 0);
	CHECK_EQ(r.status, 400);
	iod_api_response_free(&r);

	CHECK_EQ(call(&cl, "GET", "/v1/pods", NULL, &r), 0);
	CHECK_EQ(r.status, 404);
	CHECK_CONTAINS(iod_api_error_text(&r), "unknown kind");
	iod_api_response_free(&r);

	CHECK_EQ(call(&cl, "PUT", "/v1/node/bad%2Fname", "{}", &r), 0);
	CHECK(r.status == 400 || r.status == 404);
	iod_api_response_free(&r);

	/* oversized body: 413 before it is buffered */
	size_t big = IOD_API_BODY_MAX + 1024;
	char *huge = malloc(big + 1);
	CHECK(huge);
	memset(huge, ' ', big);
	huge[0] = '{';
	huge[big - 1] = '}';
	huge[big] = 0;
	int rc = iod_api_request(&cl, "PUT", "/v1/node/big", "application/json", huge, big, &r, &e);
	free(huge);
	CHECK_EQ(rc, 0);
	CHECK_EQ(r.status, 413);
	iod_api_response_free(&r);

	/* stale revision: compare-and-swap conflict (on a Config: free-form values) */
	CHECK_EQ(call(&cl, "PUT", "/v1/config/p?prev_rev=0", "{\"v\":1}", &r), 0);
	CHECK_EQ(r.status, 200);
	iod_api_response_free(&r);
	CHECK_EQ(call(&cl, "PUT", "/v1/config/p?prev_rev=0", "{\"v\":2}", &r), 0);
	CHECK_EQ(r.status, 409);
	CHECK(json_integer_value(json_object_get(r.json, "cur_rev")) > 0);
	iod_api_response_free(&r);
	CHECK_EQ(call(&cl, "PUT", "/v1/config/p?prev_rev=abc", "{}", &r), 0);
	CHECK_EQ(r.status, 400);
	iod_api_response_free(&r);

	/* linearizable read: any server's client call lands on the leader after a
	 * barrier and sees the write just made */
	CHECK_EQ(call(&cl, "GET", "/v1/config/p?consistent=1", NULL, &r), 0);
	CHECK_EQ(r.status, 200);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(r.json, "value"), "v")), 1);
	iod_api_response_free(&r);
	CHECK_EQ(call(&cl, "GET", "/v1/configs?consistent=1", NULL, &r), 0);
	CHECK_EQ(r.status, 200);
	/* the leader's own member.<id> record (written within a lease check
	 * of its election) is a config too: count the others */
	size_t user_n = 0, xi;
	json_t *x;
	json_array_foreach(json_object_get(r.json, "items"), xi, x)
	{
		const char *nm = json_string_value(json_object_get(x, "name"));
		user_n += nm && strncmp(nm, "member.", 7);
	}
	CHECK_EQ(user_n, 1);
	iod_api_response_free(&r);
	CHECK_EQ(call(&cl, "GET", "/v1/config/nope?consistent=1", NULL, &r), 0);
	CHECK_EQ(r.status, 404);
	iod_api_response_free(&r);

	/* a watch from the future is refused; a watch from now times out empty */
	CHECK_EQ(call(&cl, "GET", "/v1/nodes?watch=1&rev=999999", NULL, &r), 0);
	CHECK_EQ(r.status, 400);
	iod_api_response_free(&r);
	CHECK_EQ(call(&cl, "GET", "/v1/nodes?watch=1&timeout_ms=50", NULL, &r), 0);
	CHECK_EQ(r.status, 200);
	CHECK_EQ(json_array_size(json_object_get(r.json, "events")), 0);
	iod_api_response_free(&r);

	/* deploy with a broken spec */
	CHECK_EQ(call(&cl, "POST", "/v1/deploy", "{\"services\": 3}", &r), 0);
	CHECK_EQ(r.status, 400);
	iod_api_response_free(&r);

	/* slow client: a half-sent request held open does not block others */
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	a.sin_port = htons((uint16_t)c->api_port[0]);
	int slow = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(slow >= 0);
	CHECK_EQ(connect(slow, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK(send(slow, "PUT /v1/node/x HTTP/1.1\r\nContent-Length: 100\r\n\r\n{", 49,
	           MSG_NOSIGNAL) > 0);
	struct iod_http_conn fd = {0};
	CHECK_EQ(
	    iod_api_http_once(&fd, c->api[0], "GET", "/v1/status", NULL, NULL, 0, 2000, &r, &e), 0);
	CHECK_EQ(r.status, 200);
	iod_api_response_free(&r);
	iod_http_conn_close(&fd);
	close(slow);

	/* garbage bytes: the server answers (or drops) and keeps running */
	char out[4096];
	raw_exchange(c->api[0], "\x01\x02garbage\r\n\r\n", 13, out, sizeof(out));
	raw_exchange(c->api[0], "GET /v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
	             57, out, sizeof(out));
	CHECK_EQ(
	    iod_api_http_once(&fd, c->api[0], "GET", "/v1/status", NULL, NULL, 0, 2000, &r, &e), 0);
	CHECK_EQ(r.status, 200);
	iod_api_response_free(&r);
	iod_http_conn_close(&fd);
	iod_api_client_close(&cl);
}

/* `iod deploy -f examples/service-topology.yaml` on a real cluster: nodes
 * registered with a model, the CLI deploys, `iod get replicas` shows the
 * placements, `iod explain` the scheduler's reasons. */
static void deploy_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	const char *out = "";
	char path[64];

	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	CHECK(find_leader(c) >= 0);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "/v1/nodes/gpu-%d", i);
		CHECK_EQ(call(&cl, "PUT", path, "{\"model\": \"dgx-h100\", \"gpus\": 8}", &r), 0);
		CHECK_EQ(r.status, 200);
		iod_api_response_free(&r);
	}
	iod_api_client_close(&cl);
	if (access("examples/service-topology.yaml", R_OK))
		return; /* run from elsewhere than the repository root */
	out = iod_test_tmpdir();
	/* 3 parameter servers (1 GPU) + 8 workers (4 GPUs) on 3 x 8 GPUs: the
	 * workers fit 5 (3 GPUs left by the parameter servers): exit 4, partial */
	int rc = iod_test_sh("IOD_SERVER=%s %s deploy -f examples/service-topology.yaml "
	                     ">%s/deploy.out 2>&1",
	                     c->servers, c->bin, out);
	CHECK_MSG(rc == 4 || rc == 0, "iod deploy exited %d", rc);
	CHECK_EQ(iod_test_sh("grep -q 'parameter-server-0 .*gpu-' %s/deploy.out", out), 0);
	CHECK_EQ(iod_test_sh("IOD_SERVER=%s %s get replicas -o json | grep -q '\"node\": \"gpu-'",
	                     c->servers, c->bin),
	         0);
	CHECK_EQ(iod_test_sh("IOD_SERVER=%s %s explain replica worker-node-0 | grep -q 'feasible'",
	                     c->servers, c->bin),
	         0);
	/* a spec error is exit 2 with file:line:col */
	CHECK_EQ(
	    iod_test_sh("printf 'services:\n  - name: x\n    replicas: -1\n' >%s/bad.yaml; "
	                "IOD_SERVER=%s %s deploy -f %s/bad.yaml 2>%s/bad.out; test $? -eq 2 && "
	                "grep -q 'bad.yaml:3:' %s/bad.out",
	                out, c->servers, c->bin, out, out, out),
	    0);
	CHECK_EQ(iod_test_sh("IOD_SERVER=%s %s delete service worker-node >/dev/null", c->servers,
	                     c->bin),
	         0);
	/* reads are served by any member from its applied state (a follower
	 * learns the commit at the next heartbeat): poll, bounded, until the
	 * answering member has applied the delete */
	CHECK_EQ(iod_test_sh("for i in $(seq 60); do IOD_SERVER=%s %s get replicas | "
	                     "grep -q worker-node || exit 1; sleep 0.05; done; exit 0",
	                     c->servers, c->bin),
	         1);
}

TEST(deploy_example_topology)
{
	with_cluster("deploy", deploy_body);
}

/* Count voters in a server's /v1/status. */
static int voters(const char *addr)
{
	struct iod_api_response r;
	struct iod_err e;
	struct iod_http_conn fd = {0};
	int n = -1;
	if (iod_api_http_once(&fd, addr, "GET", "/v1/status", NULL, NULL, 0, 1000, &r, &e) == 0) {
		n = (int)json_array_size(json_object_get(r.json, "members"));
		iod_api_response_free(&r);
	}
	iod_http_conn_close(&fd);
	return n;
}

/* A fourth server joins through any member's API, catches up, and leaves. */
static void join_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	char raft[32], api[32], dd[600], log[600];
	pid_t p;

	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	CHECK(find_leader(c) >= 0);
	CHECK_EQ(call(&cl, "PUT", "/v1/config/before-join", "{\"x\": 1}", &r), 0);
	CHECK_EQ(r.status, 200);
	iod_api_response_free(&r);
	snprintf(raft, sizeof(raft), "127.0.0.1:%d", iod_cc_free_port());
	snprintf(api, sizeof(api), "127.0.0.1:%d", iod_cc_free_port());
	snprintf(dd, sizeof(dd), "%s/d4", c->dir);
	snprintf(log, sizeof(log), "%s/log4", c->dir);
	p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		if (!freopen(log, "a", stderr))
			_exit(126);
		execl(c->bin, c->bin, "server", "--id", "4", "--data-dir", dd, "--raft", raft,
		      "--api", api, "--join", c->api[1], (char *)NULL);
		_exit(127);
	}
	int n = 0;
	for (int t = 0; t < 250 && (n = voters(c->api[0])) != 4; t++)
		sleep_ms(20);
	char path[64];
	snprintf(path, sizeof(path), "/v1/config/before-join");
	int v = -1;
	for (int t = 0; t < 250 && v != 1; t++) {
		struct iod_http_conn fd = {0};
		if (iod_api_http_once(&fd, api, "GET", path, NULL, NULL, 0, 1000, &r, &e) == 0) {
			if (r.status == 200)
				v = (int)json_integer_value(
				    json_object_get(json_object_get(r.json, "value"), "x"));
			iod_api_response_free(&r);
		}
		iod_http_conn_close(&fd);
		if (v != 1)
			sleep_ms(20);
	}
	int removed = -1;
	if (n == 4 && v == 1 && call(&cl, "DELETE", "/v1/members/4", NULL, &r) == 0) {
		removed = r.status;
		iod_api_response_free(&r);
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	iod_api_client_close(&cl);
	CHECK_MSG(n == 4, "the joining server did not become a member (%d members)", n);
	CHECK_MSG(v == 1, "the joined server did not catch up with the log");
	CHECK_EQ(removed, 200);
	/* server 1 may be a follower that applies the removal a moment later */
	int vn = voters(c->api[0]);
	for (int t = 0; t < 100 && vn != 3; t++) {
		sleep_ms(20);
		vn = voters(c->api[0]);
	}
	CHECK_EQ(vn, 3);
}

TEST(join_and_leave)
{
	with_cluster("join", join_body);
}

TEST(api_hardening)
{
	with_cluster("hardening", hardening_body);
}

/*
 * A follower that knows no live leader holds a write (instead of naming a
 * dead leader or answering "no leader" at once) for IOD_API_LEADER_WAIT_MS,
 * then answers 503 not_leader; once a majority is back the cluster takes
 * writes again.
 */
static void hold_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	int leader, f = -1, g = -1;
	struct iod_http_conn fd = {0};

	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	CHECK((leader = find_leader(c)) >= 0);
	CHECK_EQ(call(&cl, "PUT", "/v1/config/before-hold", "{\"x\": 1}", &r), 0);
	CHECK_EQ(r.status, 200);
	iod_api_response_free(&r);
	iod_api_client_close(&cl);
	for (int i = 0; i < N; i++)
		if (i != leader && f < 0)
			f = i;
		else if (i != leader)
			g = i;
	iod_cc_stop(c, leader, SIGKILL);
	iod_cc_stop(c, g, SIGKILL); /* f alone: no majority, no leader */
	sleep_ms(100);

	uint64_t t0 = iod_clock_now_ns();
	CHECK_EQ(iod_api_http_once(&fd, c->api[f], "PUT", "/v1/config/held", "application/json",
	                           "{\"x\": 2}", 8, 10000, &r, &e),
	         0);
	uint64_t ms = (iod_clock_now_ns() - t0) / IOD_NS_PER_MS;
	iod_http_conn_close(&fd);
	CHECK_EQ(r.status, 503);
	CHECK(json_is_true(json_object_get(r.json, "not_leader")));
	iod_api_response_free(&r);
	/* held until the deadline: never answered before it (a lower bound
	 * cannot flake on a slow machine) */
	CHECK_MSG(ms >= IOD_API_LEADER_WAIT_MS - 60, "answered after %llu ms, want >= %d",
	          (unsigned long long)ms, IOD_API_LEADER_WAIT_MS - 60);

	/* a majority again: writes succeed through either server */
	CHECK_EQ(iod_cc_start(c, g), 0);
	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	cl.retry_ms = 20000;
	CHECK_EQ(call(&cl, "PUT", "/v1/config/after-hold", "{\"x\": 3}", &r), 0);
	CHECK_EQ(r.status, 200);
	iod_api_response_free(&r);
	iod_api_client_close(&cl);
}

TEST(follower_holds_writes_while_leaderless)
{
	with_cluster("hold", hold_body);
}

/* Run server i in the foreground for at most secs: its exit status (124:
 * still running at the deadline, 128+N: killed by signal N) and stderr. */
static int run_fg(struct iod_cc *c, int i, const char *raft, unsigned secs, char *err, size_t cap)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/fg%d.err", c->dir, i + 1);
	int rc = iod_test_sh("timeout -s KILL %u %s server --id %d --data-dir %s/d%d --raft %s "
	                     "--api 127.0.0.1:%d --peers %s 2>%s",
	                     secs, c->bin, i + 1, c->dir, i + 1, raft, iod_cc_free_port(), c->peers,
	                     path);
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(err, 1, cap - 1, f) : 0;
	err[n] = 0;
	if (f)
		fclose(f);
	return rc;
}

/* A byte of server i's first segment, flipped. */
/*
 * flip_segment: complement the first data byte of a record a third of the
 * way into the first segment server i+1 has (the WAL's layout: a 40-byte
 * segment header, then records of a 40-byte header, whose data length is the
 * little-endian u32 at +28, and data padded to 8), and put that segment's
 * name in name. Not a fixed file and offset: a follower that installed a
 * snapshot has no seg-1 any more (dd created a stray file the server rightly
 * ignored, so it started), a fixed offset can land on a record's magic or
 * padding (another message) or past the end, and writing 0xff over a byte
 * that is 0xff changes nothing. Valid records follow the damaged one, so it
 * cannot pass for a torn tail. Returns the offset, or -1.
 */
static long flip_segment(struct iod_cc *c, int i, char *name, size_t cap)
{
	char dir[512], path[800];
	struct dirent *d;
	long offs[4096], off = -1;
	size_t n = 0;

	snprintf(dir, sizeof(dir), "%s/d%d", c->dir, i + 1);
	DIR *dh = opendir(dir);
	if (!dh)
		return -1;
	name[0] = 0;
	while ((d = readdir(dh)))
		if (!strncmp(d->d_name, "seg-", 4) && (!name[0] || strcmp(d->d_name, name) < 0))
			snprintf(name, cap, "%s", d->d_name);
	closedir(dh);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = name[0] ? open(path, O_RDWR) : -1;
	unsigned char h[40];
	for (long at = 40; fd >= 0 && n < sizeof(offs) / sizeof(offs[0]) &&
	                   pread(fd, h, sizeof(h), at) == (ssize_t)sizeof(h);) {
		uint32_t dlen = h[28] | h[29] << 8 | h[30] << 16 | (uint32_t)h[31] << 24;
		if (dlen)
			offs[n++] = at + 40;
		at += 40 + (long)((dlen + 7) & ~7u);
	}
	if (n >= 3) {
		unsigned char b;
		off = offs[n / 3];
		if (pread(fd, &b, 1, off) == 1) {
			b = (unsigned char)~b;
			if (pwrite(fd, &b, 1, off) != 1)
				off = -1;
		} else {
			off = -1;
		}
	}
	if (fd >= 0)
		close(fd);
	return off;
}

/*
 * Damaged logs (issue 15): two of three servers get a flipped byte in their
 * log. Each refuses to start, naming the file and the offset (libraft's
 * backend renamed the segment aside and started empty: 2,008 of 32,173
 * acknowledged writes were lost with no message). A truncated open segment
 * is repaired or refused, never a crash (libraft: SIGSEGV in raft_start at
 * every cut). A taken Raft port says why. Then the damaged servers rebuild
 * from the healthy one with --recover-from-peers and every acknowledged write
 * is on all three.
 */
static void damage_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_err e;
	static bool acked[WRITES];
	char err[4096], raft[32], path[600];
	int acked_n = 0;

	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	cl.retry_ms = 15000;
	CHECK(find_leader(c) >= 0);
	for (int k = 0; k < WRITES; k++) {
		struct iod_api_response r;
		if (put_key(&cl, k, &r) == 0) {
			acked[k] = r.status == 200;
			acked_n += acked[k];
			iod_api_response_free(&r);
		}
	}
	iod_api_client_close(&cl);
	CHECK_MSG(acked_n > WRITES / 2, "only %d writes acknowledged", acked_n);

	/* a taken Raft port: the reason, not "raft start: " */
	snprintf(path, sizeof(path), "%s/taken.err", c->dir);
	int rc = iod_test_sh("timeout -s KILL 10 %s server --id 9 --data-dir %s/taken --raft "
	                     "127.0.0.1:%d --api 127.0.0.1:%d 2>%s",
	                     c->bin, c->dir, c->raft_port[0], iod_cc_free_port(), path);
	FILE *f = fopen(path, "r");
	size_t got = f ? fread(err, 1, sizeof(err) - 1, f) : 0;
	err[got] = 0;
	if (f)
		fclose(f);
	CHECK_MSG(rc == 1, "exit %d: %s", rc, err);
	CHECK_MSG(strstr(err, "cannot listen on") && strstr(err, "in use"), "%s", err);

	for (int i = 0; i < N; i++)
		iod_cc_stop(c, i, SIGKILL);
	/* the open segment cut at several offsets (on copies): no crash */
	const long cuts[] = {1, 13, 40, 77, 1000, 4096};
	for (unsigned k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		iod_test_sh(
		    "rm -rf %s/d3.cut && cp -r %s/d3 %s/d3.cut && f=$(ls %s/d3/seg-* | tail -1) "
		    "&& s=$(stat -c %%s $f) && truncate -s $((s > %ld ? s - %ld : 0)) "
		    "%s/d3.cut/$(basename $f)",
		    c->dir, c->dir, c->dir, c->dir, cuts[k], cuts[k], c->dir);
		snprintf(path, sizeof(path), "%s/cut.err", c->dir);
		rc = iod_test_sh("timeout -s KILL 2 %s server --id 3 --data-dir %s/d3.cut --raft "
		                 "127.0.0.1:%d --api 127.0.0.1:%d --peers %s 2>%s",
		                 c->bin, c->dir, c->raft_port[2], iod_cc_free_port(), c->peers,
		                 path);
		CHECK_MSG(rc == 1 || rc == 137, "cut %ld bytes: exit %d (a crash?)", cuts[k], rc);
	}
	for (int i = 1; i < N; i++) {
		char seg[64], want[96];
		CHECK_MSG(flip_segment(c, i, seg, sizeof(seg)) > 0, "no segment to damage in d%d",
		          i + 1);
		snprintf(want, sizeof(want), "%s offset ", seg);
		snprintf(raft, sizeof(raft), "127.0.0.1:%d", c->raft_port[i]);
		rc = run_fg(c, i, raft, 10, err, sizeof(err));
		CHECK_MSG(rc == 1, "exit %d: %s", rc, err);
		CHECK_MSG(strstr(err, want), "%s", err);
		CHECK_MSG(strstr(err, "checksum mismatch"), "%s", err);
	}
	CHECK_EQ(iod_cc_start(c, 0), 0);
	c->extra = "--recover-from-peers";
	CHECK_EQ(iod_cc_start(c, 1), 0);
	sleep_ms(300);
	CHECK_EQ(iod_cc_start(c, 2), 0);
	c->extra = NULL;
	CHECK_MSG(find_leader(c) >= 0, "no leader after recovery (logs in %s)", c->dir);
	for (int i = 0; i < N; i++)
		for (int k = 0; k < WRITES; k++)
			if (acked[k])
				CHECK_MSG(get_key_at(c->api[i], k, 5000) == k,
				          "acknowledged k%d missing on server %d after recovery", k,
				          i + 1);
	/* the recovered servers restart from their rebuilt logs */
	iod_cc_stop(c, 1, SIGKILL);
	CHECK_EQ(iod_cc_start(c, 1), 0);
	for (int k = 0; k < WRITES; k++)
		if (acked[k])
			CHECK_MSG(get_key_at(c->api[1], k, 5000) == k, "k%d lost after restart", k);
}

TEST(damaged_logs_refuse_then_recover_from_peers)
{
	with_cluster("damage", damage_body);
}

/*
 * Wrong answers (issue 15): a prev_rev of 2^63 or more (or one that
 * overflows) turned compare-and-swap into an unconditional write; "%00"
 * truncated names ("config/trunc%00evil" stored as "config/trunc"); a
 * request with both Content-Length and Transfer-Encoding was accepted.
 * Each is a 400 now, and nothing is written.
 */
static void answers_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	char out[2048];
	const char *revs[] = {"9223372036854775808",
	                      "18446744073709551615",
	                      "18446744073709551616",
	                      "99999999999999999999999",
	                      "-1",
	                      "1x",
	                      ""};

	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	CHECK(find_leader(c) >= 0);
	CHECK_EQ(call(&cl, "PUT", "/v1/config/cas", "{\"v\": 1}", &r), 0);
	CHECK_EQ(r.status, 200);
	iod_api_response_free(&r);
	for (unsigned i = 0; i < sizeof(revs) / sizeof(revs[0]); i++) {
		char path[128];
		snprintf(path, sizeof(path), "/v1/config/cas?prev_rev=%s", revs[i]);
		CHECK_EQ(call(&cl, "PUT", path, "{\"v\": 2}", &r), 0);
		CHECK_MSG(r.status == 400, "prev_rev=%s: %d", revs[i], r.status);
		iod_api_response_free(&r);
		snprintf(path, sizeof(path), "/v1/config/cas?prev_rev=%s", revs[i]);
		CHECK_EQ(call(&cl, "DELETE", path, NULL, &r), 0);
		CHECK_MSG(r.status == 400, "DELETE prev_rev=%s: %d", revs[i], r.status);
		iod_api_response_free(&r);
	}
	CHECK_EQ(call(&cl, "GET", "/v1/config/cas", NULL, &r), 0);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(r.json, "value"), "v")), 1);
	iod_api_response_free(&r);

	const char *names[] = {"trunc%00evil", "trunc%0aevil", "trunc%7f", "trunc%1b"};
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[128];
		snprintf(path, sizeof(path), "/v1/config/%s", names[i]);
		CHECK_EQ(call(&cl, "PUT", path, "{\"v\": 3}", &r), 0);
		CHECK_MSG(r.status == 400, "%s: %d", names[i], r.status);
		iod_api_response_free(&r);
	}
	CHECK_EQ(call(&cl, "GET", "/v1/config/trunc", NULL, &r), 0);
	CHECK_EQ(r.status, 404);
	iod_api_response_free(&r);
	iod_api_client_close(&cl);

	const char req[] = "PUT /v1/config/smuggle HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n"
	                   "Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
	                   "9\r\n{\"v\": 4}\r\n0\r\n\r\n";
	for (int i = 0; i < N; i++) {
		CHECK(raw_exchange(c->api[i], req, sizeof(req) - 1, out, sizeof(out)) > 0);
		CHECK_MSG(!strncmp(out, "HTTP/1.1 400", 12), "server %d: %.60s", i + 1, out);
	}
	CHECK_EQ(get_key_at(c->api[0], 99, 0), -1);
}

TEST(bad_numbers_names_and_framing_are_400)
{
	with_cluster("answers", answers_body);
}

static long long metric(const char *api, const char *name);

static int64_t grant(struct iod_api_client *cl, int *status)
{
	struct iod_api_response r;
	int64_t id = -1;
	int rc = call(cl, "POST", "/v1/leases", "{\"ttl_ms\": 600000}", &r);
	*status = rc ? rc : r.status;
	if (!rc) {
		if (r.status == 200)
			id = json_integer_value(json_object_get(r.json, "lease"));
		iod_api_response_free(&r);
	}
	return id;
}

/*
 * Outcome unknown (issue 15): a write proposed just before the leader loses
 * its majority used to be answered 503 "not leader", so the client retried
 * it elsewhere and a non-idempotent request (a lease grant) could be
 * applied twice. Now the leader answers 504 outcome_unknown, and the client
 * does not retry it: counting lease ids before and after shows it applied
 * at most once.
 */
static void unknown_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_err e;
	int leader, st = 0;
	bool seen = false;

	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	cl.retry_ms = 15000;
	cl.timeout_ms = 3000;
	CHECK((leader = find_leader(c)) >= 0);
	int64_t l0 = grant(&cl, &st);
	CHECK_MSG(l0 > 0, "first grant: %d", st);
	for (int attempt = 0; attempt < 5 && !seen; attempt++) {
		CHECK((leader = find_leader(c)) >= 0);
		for (int i = 0; i < N; i++)
			if (i != leader)
				kill(c->pid[i], SIGSTOP);
		/* the client, starting at the leader: a 504 must come back to
		 * the caller, not be retried at another server */
		struct iod_api_client one;
		struct iod_api_response r;
		char list[128];
		snprintf(list, sizeof(list), "%s,%s,%s", c->api[leader], c->api[(leader + 1) % N],
		         c->api[(leader + 2) % N]);
		CHECK_EQ(iod_api_client_init(&one, list, &e), 0);
		one.timeout_ms = 2000;
		one.retry_ms = 4000;
		int rc = call(&one, "POST", "/v1/leases", "{\"ttl_ms\": 600000}", &r);
		iod_api_client_close(&one);
		for (int i = 0; i < N; i++)
			if (i != leader)
				kill(c->pid[i], SIGCONT);
		if (rc == 0) {
			if (r.status == 504) {
				seen = json_is_true(json_object_get(r.json, "outcome_unknown"));
				CHECK_MSG(seen, "504 without outcome_unknown: %s", r.body);
			} else {
				/* the leader stepped down before it proposed: 503, fine */
				CHECK_MSG(r.status == 503, "answer %d: %s", r.status, r.body);
			}
			iod_api_response_free(&r);
		}
		sleep_ms(200);
	}
	CHECK_MSG(seen, "no 504 outcome_unknown in 5 tries (the old answer was 503 not_leader)");
	/* the client does not retry it: a 504 from its first server is final */
	CHECK((leader = find_leader(c)) >= 0);
	int64_t l2 = grant(&cl, &st);
	CHECK_MSG(l2 > l0, "grant after: %d", st);
	CHECK_MSG(l2 - l0 - 1 <= 5, "an unknown grant was applied twice: ids %lld..%lld",
	          (long long)l0, (long long)l2);
	iod_api_client_close(&cl);
}

TEST(lost_leadership_after_propose_is_outcome_unknown)
{
	with_cluster("unknown", unknown_body);
}

/*
 * Outcome unknown with the leader killed (issue 15): "a test that kills the
 * leader between propose and reply checks the client never applies a
 * non-idempotent write twice". Writers send transactions (POST /v1/txn,
 * which the client never retries once sent), each putting one fresh key,
 * while the leader is SIGKILLed and restarted KILL_ROUNDS times. A txn that
 * was applied twice leaves its key with rev != create_rev (the second apply
 * overwrites it), so the final state shows it. Every write answered 200 is
 * present; a write the client answered "no leader" or "unreachable" (never
 * proposed) is absent; the writes caught by a kill come back as outcome
 * unknown (-EINPROGRESS from the client, or 504 "outcome_unknown" from a
 * leader that stepped down). With the client's idempotent() answering true
 * for POST (the retry guard removed), this test fails: keys applied twice
 * and no unknown outcome.
 */
#define KILL_ROUNDS 15
#define TXN_WRITERS 4
#define TXN_PER_WRITER 20000

enum txn_outcome { TXN_NONE, TXN_OK, TXN_UNKNOWN, TXN_NOT_SENT, TXN_OTHER };

struct txn_writer {
	struct iod_cc *c;                  /* the cluster */
	int id;                            /* writer index: keys u<id>-<i> */
	volatile int *stop;                /* set by the killer */
	int n;                             /* writes issued */
	volatile int ok;                   /* answered 200 */
	int unknown, not_sent, other;      /* the other outcomes */
	char other_msg[256];               /* the first unexpected answer */
	unsigned char out[TXN_PER_WRITER]; /* enum txn_outcome per write */
	pthread_t t;                       /* its thread */
};

static void *txn_writer_thread(void *p)
{
	struct txn_writer *w = p;
	struct iod_api_client cl;
	struct iod_err e;

	if (iod_api_client_init(&cl, w->c->servers, &e))
		return NULL;
	cl.retry_ms = 15000;
	cl.timeout_ms = 3000;
	while (!*w->stop && w->n < TXN_PER_WRITER) {
		char body[192];
		struct iod_api_response r;
		int i = w->n++;
		snprintf(body, sizeof(body),
		         "{\"ops\":[{\"op\":\"put\",\"kind\":\"config\",\"name\":\"u%d-%d\","
		         "\"value\":{\"w\":%d,\"i\":%d}}]}",
		         w->id, i, w->id, i);
		int rc = iod_api_request(&cl, "POST", "/v1/txn", "application/json", body,
		                         strlen(body), &r, &e);
		enum txn_outcome o = TXN_OTHER;
		if (rc == -EINPROGRESS) {
			o = TXN_UNKNOWN;
		} else if (rc == -ENOTCONN || rc == -EHOSTUNREACH) {
			o = TXN_NOT_SENT;
		} else if (rc == 0) {
			if (r.status == 200)
				o = TXN_OK;
			else if (r.status == 504 && r.json &&
			         json_is_true(json_object_get(r.json, "outcome_unknown")) &&
			         json_object_get(r.json, "code") &&
			         !strcmp(json_string_value(json_object_get(r.json, "code")),
			                 "outcome_unknown"))
				o = TXN_UNKNOWN;
			if (o == TXN_OTHER && !w->other)
				snprintf(w->other_msg, sizeof(w->other_msg), "u%d-%d: %d %.200s",
				         w->id, i, r.status, r.body ? r.body : "");
			iod_api_response_free(&r);
		} else if (!w->other) {
			snprintf(w->other_msg, sizeof(w->other_msg), "u%d-%d: %s", w->id, i, e.msg);
		}
		w->out[i] = (unsigned char)o;
		w->ok += o == TXN_OK;
		w->unknown += o == TXN_UNKNOWN;
		w->not_sent += o == TXN_NOT_SENT;
		w->other += o == TXN_OTHER;
	}
	iod_api_client_close(&cl);
	return NULL;
}

static int txn_ok_total(struct txn_writer *w)
{
	int n = 0;
	for (int i = 0; i < TXN_WRITERS; i++)
		n += w[i].ok;
	return n;
}

/* Wait until the writers got `more` acknowledgements past `from` (at most
 * 30 s: a cluster that stays unavailable fails the test). */
static bool txn_progress(struct txn_writer *w, int from, int more)
{
	for (int t = 0; t < 3000; t++) {
		if (txn_ok_total(w) >= from + more)
			return true;
		sleep_ms(10);
	}
	return false;
}

/* Every server answers and is within 100 revisions of the highest (30 s at most). */
static bool all_caught_up(struct iod_cc *c)
{
	for (int t = 0; t < 1500; t++) {
		long long rev[N] = {0}, hi = 0;
		bool up = true;
		for (int i = 0; i < N; i++) {
			rev[i] = metric(c->api[i], "iod_state_revision");
			up = up && rev[i] > 0;
			hi = rev[i] > hi ? rev[i] : hi;
		}
		for (int i = 0; up && i < N; i++)
			up = rev[i] + 100 >= hi;
		if (up)
			return true;
		sleep_ms(20);
	}
	return false;
}

static void unknown_kill_body(struct iod_cc *c)
{
	static struct txn_writer w[TXN_WRITERS];
	volatile int stop = 0;
	int kills = 0;

	CHECK((find_leader(c)) >= 0);
	memset(w, 0, sizeof(w));
	for (int i = 0; i < TXN_WRITERS; i++) {
		w[i].c = c;
		w[i].id = i;
		w[i].stop = &stop;
		CHECK_EQ(pthread_create(&w[i].t, NULL, txn_writer_thread, &w[i]), 0);
	}
	for (int k = 0; k < KILL_ROUNDS; k++) {
		/* writes are flowing (committed through the current leader) */
		if (!txn_progress(w, txn_ok_total(w), 20)) {
			CHECK_MSG(0, "round %d: no write committed for 30 s (logs in %s)", k,
			          c->dir);
			break;
		}
		/* the server restarted last round is back and caught up first:
		 * killing the leader before it is leaves no majority */
		if (!all_caught_up(c)) {
			CHECK_MSG(0, "round %d: a restarted server did not catch up in 30 s", k);
			break;
		}
		int leader = find_leader(c);
		if (leader < 0)
			continue;
		iod_cc_stop(c, leader, SIGKILL); /* between propose and reply of some */
		kills++;
		bool moved = txn_progress(w, txn_ok_total(w), 10);
		CHECK_EQ(iod_cc_start(c, leader), 0);
		if (!moved) {
			CHECK_MSG(0, "round %d: no write committed after the kill", k);
			break;
		}
	}
	stop = 1;
	for (int i = 0; i < TXN_WRITERS; i++)
		pthread_join(w[i].t, NULL);
	CHECK_EQ(kills, KILL_ROUNDS);

	/* every server up; the leader's list once all agree on the revision */
	CHECK((find_leader(c)) >= 0);
	long long rev[N] = {0};
	for (int t = 0; t < 500; t++) {
		for (int i = 0; i < N; i++)
			rev[i] = metric(c->api[i], "iod_state_revision");
		if (rev[0] > 0 && rev[0] == rev[1] && rev[1] == rev[2])
			break;
		sleep_ms(20);
	}
	CHECK_MSG(rev[0] > 0 && rev[0] == rev[1] && rev[1] == rev[2],
	          "servers did not converge: revisions %lld %lld %lld", rev[0], rev[1], rev[2]);
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	CHECK_EQ(call(&cl, "GET", "/v1/configs", NULL, &r), 0);
	CHECK_EQ(r.status, 200);
	static unsigned char seen[TXN_WRITERS][TXN_PER_WRITER];
	memset(seen, 0, sizeof(seen));
	int twice = 0, listed = 0;
	char twice_msg[160] = "";
	json_t *x;
	size_t xi;
	json_array_foreach(json_object_get(r.json, "items"), xi, x)
	{
		int wi, ii;
		const char *name = json_string_value(json_object_get(x, "name"));
		if (!name || sscanf(name, "u%d-%d", &wi, &ii) != 2 || wi < 0 || wi >= TXN_WRITERS ||
		    ii < 0 || ii >= TXN_PER_WRITER)
			continue;
		listed++;
		seen[wi][ii] = 1;
		json_int_t rv = json_integer_value(json_object_get(x, "rev")),
		           cr = json_integer_value(json_object_get(x, "create_rev"));
		if (rv != cr && !twice++)
			snprintf(
			    twice_msg, sizeof(twice_msg),
			    "%s: create_rev %lld, rev %lld; its writer saw outcome %d (1 200, 2 "
			    "unknown, 3 not sent)",
			    name, (long long)cr, (long long)rv, (int)w[wi].out[ii]);
	}
	iod_api_response_free(&r);
	iod_api_client_close(&cl);
	int ok = 0, unknown = 0, not_sent = 0, lost = 0, phantom = 0, unknown_applied = 0;
	for (int i = 0; i < TXN_WRITERS; i++) {
		CHECK_MSG(w[i].other == 0, "writer %d: %d unexpected answers, first %s", i,
		          w[i].other, w[i].other_msg);
		ok += w[i].ok;
		unknown += w[i].unknown;
		not_sent += w[i].not_sent;
		for (int k = 0; k < w[i].n; k++) {
			lost += w[i].out[k] == TXN_OK && !seen[i][k];
			phantom += w[i].out[k] == TXN_NOT_SENT && seen[i][k];
			unknown_applied += w[i].out[k] == TXN_UNKNOWN && seen[i][k];
		}
	}
	if (getenv("IOD_TEST_VERBOSE"))
		fprintf(stderr,
		        "outcome unknown under kills: %d kills, %d ok, %d unknown (%d applied), "
		        "%d not sent, %d listed, %d applied twice\n",
		        kills, ok, unknown, unknown_applied, not_sent, listed, twice);
	CHECK_MSG(twice == 0, "%d non-idempotent writes applied twice (first %s)", twice,
	          twice_msg);
	CHECK_MSG(lost == 0, "%d acknowledged writes missing", lost);
	CHECK_MSG(phantom == 0, "%d writes answered \"no leader\"/unreachable were applied",
	          phantom);
	CHECK_MSG(unknown > 0, "%d kills and no write answered outcome unknown", kills);
	CHECK_MSG(ok > 20 * KILL_ROUNDS, "only %d writes acknowledged", ok);
}

/* It found one key applied twice in ~20 runs before the HTTP client
 * stopped giving a sent POST its "one fresh try" on a new connection
 * (test_http's a_post_is_never_sent_twice_after_a_dead_kept_alive_connection). */
TEST(leader_killed_after_propose_never_applies_twice)
{
	with_cluster("unknownkill", unknown_kill_body);
}

/*
 * Start a real `iod agent` named name against the cluster and wait for its
 * Node object: the milliseconds it took (>= 1), or 0 when it did not appear
 * within 10 s (its log is printed). It takes ~0.1 s idle; 10 s is the bound
 * for a loaded 2-core machine (the agent's start, hwloc-free generic model,
 * one lease grant and one put).
 */
static uint64_t agent_registers(struct iod_cc *c, struct iod_api_client *cl, const char *name)
{
	struct iod_api_response r;
	char adir[600], alog[640], path[128];
	snprintf(adir, sizeof(adir), "%s/agent-%s", c->dir, name);
	snprintf(alog, sizeof(alog), "%s/agent-%s.log", c->dir, name);
	snprintf(path, sizeof(path), "/v1/nodes/%s", name);
	char *av[] = {c->bin,       "agent", "--server",    c->servers, "--name",    (char *)name,
	              "--data-dir", adir,    "--gpus",      "0",        "--no-mesh", "--no-sandbox",
	              "--run-for",  "60s",   "--lease-ttl", "2s",       NULL};
	const uint64_t a0 = iod_clock_now_ns();
	pid_t agent = fork();
	if (agent < 0)
		return 0;
	if (agent == 0) {
		if (!freopen(alog, "a", stderr) || !freopen("/dev/null", "w", stdout))
			_exit(126);
		execv(c->bin, av);
		_exit(127);
	}
	int status = 0;
	uint64_t reg_ms = 0;
	while (!reg_ms && (iod_clock_now_ns() - a0) / IOD_NS_PER_MS < 10000) {
		if (call(cl, "GET", path, NULL, &r) == 0) {
			if (r.status == 200)
				reg_ms = (iod_clock_now_ns() - a0) / IOD_NS_PER_MS + 1;
			iod_api_response_free(&r);
		}
		if (!reg_ms && waitpid(agent, &status, WNOHANG) == agent) {
			agent = 0;
			break;
		}
		sleep_ms(20);
	}
	if (agent > 0) {
		kill(agent, SIGTERM);
		waitpid(agent, &status, 0);
	}
	if (!reg_ms)
		iod_test_sh("echo 'agent %s%s:'; tail -n 20 %s >&2", name,
		            agent ? "" : " (it exited)", alog);
	return reg_ms;
}

/*
 * Floods (issue 15): 1,100 slow half-sent requests from one address left no
 * new client able to connect for 40 s; 8,192 leases from one client stopped
 * every agent from registering. Now one address holds at most
 * IOD_API_CONNECTIONS_PER_IP_MAX connections, so a client from another
 * address is served within 1 s, and a node lease is granted while one
 * client's lease grants are refused with the quota named; a real
 * `iod agent` from that client's address registers within 10 s.
 */
static void flood_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	static int fds[1100];
	int leader, opened = 0;

	CHECK((leader = find_leader(c)) >= 0);
	int port = atoi(strrchr(c->api[leader], ':') + 1);
	for (int i = 0; i < 1100; i++) {
		struct sockaddr_in src = {.sin_family = AF_INET,
		                          .sin_addr.s_addr = htonl(0x7f000002)};
		struct sockaddr_in dst = {.sin_family = AF_INET,
		                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
		                          .sin_port = htons((uint16_t)port)};
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&src, sizeof(src)) ||
		    connect(fds[i], (struct sockaddr *)&dst, sizeof(dst))) {
			if (fds[i] >= 0)
				close(fds[i]);
			fds[i] = -1;
			continue;
		}
		const char half[] = "PUT /v1/config/slow HTTP/1.1\r\nHost: x\r\nX-Slow: ";
		if (send(fds[i], half, sizeof(half) - 1, MSG_NOSIGNAL) > 0)
			opened++;
	}
	CHECK_MSG(opened > IOD_API_CONNECTIONS_MAX, "only %d slow connections opened", opened);
	sleep_ms(300);
	uint64_t t0 = iod_clock_now_ns();
	struct iod_http_conn fd = {0};
	int rc = iod_api_http_once(&fd, c->api[leader], "GET", "/v1/status", NULL, NULL, 0, 1000,
	                           &r, &e);
	uint64_t ms = (iod_clock_now_ns() - t0) / IOD_NS_PER_MS;
	iod_http_conn_close(&fd);
	for (int i = 0; i < 1100; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	CHECK_MSG(rc == 0 && r.status == 200, "a new client was not served within 1 s: %s",
	          rc ? e.msg : "bad status");
	iod_api_response_free(&r);
	CHECK(ms < 1000);

	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	int granted = 0, refused = 0;
	for (int i = 0; i < IOD_STATE_LEASES_PER_CLIENT_MAX + 50; i++) {
		if (call(&cl, "POST", "/v1/leases", "{\"ttl_ms\": 86400000}", &r))
			continue;
		granted += r.status == 200;
		if (r.status == 507) {
			refused++;
			CHECK_MSG(r.body && strstr(r.body, "IOD_STATE_LEASES_PER_CLIENT_MAX"), "%s",
			          r.body);
		}
		iod_api_response_free(&r);
	}
	CHECK_EQ(granted, IOD_STATE_LEASES_PER_CLIENT_MAX);
	CHECK_EQ(refused, 50);
	CHECK_EQ(call(&cl, "POST", "/v1/leases", "{\"ttl_ms\": 10000, \"node\": true}", &r), 0);
	CHECK_MSG(r.status == 200, "a node agent's lease was refused under a lease flood: %d %s",
	          r.status, r.body ? r.body : "");
	iod_api_response_free(&r);

	/* A real `iod agent`, from the flooder's own address (its quota is
	 * spent), registers: its Node object appears. */
	uint64_t reg_ms = agent_registers(c, &cl, "floodnode");
	if (getenv("IOD_TEST_VERBOSE"))
		fprintf(stderr, "lease flood: a real agent registered in %llu ms\n",
		        (unsigned long long)reg_ms);
	CHECK_MSG(reg_ms > 0, "a real agent did not register within 10 s of a lease flood");
	iod_api_client_close(&cl);
}

TEST(slowloris_and_lease_floods_leave_room)
{
	with_cluster("flood", flood_body);
}

static long long metric(const char *api, const char *name);

/* A connection from src (host order) to the loopback port, or -1. */
static int connect_from(uint32_t src_addr, int port)
{
	struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(src_addr)};
	struct sockaddr_in dst = {.sin_family = AF_INET,
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	                          .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd >= 0 && (bind(fd, (struct sockaddr *)&src, sizeof(src)) ||
	                connect(fd, (struct sockaddr *)&dst, sizeof(dst)))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Has the server closed fd (end of file, reset)? */
static bool peer_closed(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	char b[256];
	if (poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLHUP | POLLERR | POLLRDHUP))
		return true;
	ssize_t k = recv(fd, b, sizeof(b), MSG_DONTWAIT);
	return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/*
 * Slowloris with trickling bytes (issue 15): MHD's idle timeout is reset by
 * every byte, so connections sending one byte a second held their slots
 * forever, and 1,100 of them from five addresses (each under the per-address
 * limit) held every slot: no new client could connect. Now a head must be
 * whole within IOD_API_HEADER_TIMEOUT_S and a body by its rate deadline,
 * however the bytes trickle, and when slots run short a new connection
 * closes the oldest unfinished head: a new client is served within 1 s
 * while the attack runs, and every trickling connection is closed by its
 * deadline (plus the sweep and a margin for the shared machine).
 */
static void trickle_body(struct iod_cc *c)
{
	enum { HEADS = 1100, BODIES = 20, ALL = HEADS + BODIES };
	static int fds[ALL];
	static uint64_t closed_ms[ALL];
	int leader, opened = 0, served = 0;
	uint64_t served_ms = 0;

	CHECK((leader = find_leader(c)) >= 0);
	int port = atoi(strrchr(c->api[leader], ':') + 1);
	for (int i = 0; i < ALL; i++) {
		const char head[] = "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Slow: ";
		const char body[] = "PUT /v1/config/slow HTTP/1.1\r\nHost: x\r\n"
		                    "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
		                    "{\"v\":\"";
		bool is_head = i < HEADS;
		/* five addresses for the heads (220 each, under the per-address
		 * limit), a sixth for the bodies */
		fds[i] = connect_from(0x7f000002u + (uint32_t)(is_head ? i % 5 : 5), port);
		closed_ms[i] = 0;
		if (fds[i] < 0)
			continue;
		if (send(fds[i], is_head ? head : body,
		         is_head ? sizeof(head) - 1 : sizeof(body) - 1, MSG_NOSIGNAL) > 0)
			opened++;
	}
	CHECK_MSG(opened > IOD_API_CONNECTIONS_MAX, "only %d slow connections opened", opened);
	const uint64_t t0 = iod_clock_now_ns() / IOD_NS_PER_MS;
	const uint64_t end = t0 + (IOD_API_HEADER_TIMEOUT_S + 4) * 1000ull;
	uint64_t next_byte = t0 + 1000;
	for (uint64_t now = t0; now < end; now = iod_clock_now_ns() / IOD_NS_PER_MS) {
		int open_n = 0;
		for (int i = 0; i < ALL; i++) {
			if (fds[i] < 0 || closed_ms[i])
				continue;
			if (peer_closed(fds[i]))
				closed_ms[i] = now - t0 + 1;
			else
				open_n++;
		}
		if (!open_n)
			break;
		if (now >= next_byte) { /* one byte a second on each */
			next_byte += 1000;
			for (int i = 0; i < ALL; i++)
				if (fds[i] >= 0 && !closed_ms[i] &&
				    send(fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
					closed_ms[i] = now - t0 + 1;
		}
		if (!served_ms && now >= t0 + 2000) { /* a new client, mid-attack */
			struct iod_api_response r;
			struct iod_err e;
			struct iod_http_conn fd = {0};
			uint64_t a = iod_clock_now_ns();
			int rc = iod_api_http_once(&fd, c->api[leader], "GET", "/v1/status", NULL,
			                           NULL, 0, 1000, &r, &e);
			served_ms = (iod_clock_now_ns() - a) / IOD_NS_PER_MS + 1;
			iod_http_conn_close(&fd);
			if (!rc) {
				served = r.status == 200;
				iod_api_response_free(&r);
			}
		}
		sleep_ms(50);
	}
	int heads_open = 0, bodies_open = 0, bodies_early = 0;
	for (int i = 0; i < ALL; i++) {
		if (fds[i] < 0)
			continue;
		if (!closed_ms[i])
			*(i < HEADS ? &heads_open : &bodies_open) += 1;
		else if (i >= HEADS && closed_ms[i] < (IOD_API_BODY_TIMEOUT_S - 1) * 1000ull)
			bodies_early++;
		close(fds[i]);
	}
	CHECK_MSG(served && served_ms <= 1000,
	          "a new client was not served within 1 s during the attack (%llu ms)",
	          (unsigned long long)served_ms);
	CHECK_MSG(heads_open == 0, "%d connections trickling their heads still open after %d s",
	          heads_open, IOD_API_HEADER_TIMEOUT_S + 4);
	CHECK_MSG(bodies_open == 0, "%d connections trickling their bodies still open after %d s",
	          bodies_open, IOD_API_HEADER_TIMEOUT_S + 4);
	CHECK_MSG(bodies_early == 0, "%d slow bodies closed before their deadline", bodies_early);
	CHECK(metric(c->api[leader], "iod_api_connections_closed_total{reason=\"head_timeout\"}") >
	      0);
	CHECK_EQ(
	    metric(c->api[leader], "iod_api_connections_closed_total{reason=\"body_timeout\"}"),
	    BODIES);
	CHECK(metric(c->api[leader], "iod_api_connections_closed_total{reason=\"evicted\"}") > 0);
}

TEST(slowloris_trickling_bytes_meet_deadlines)
{
	with_cluster("trickle", trickle_body);
}

static long long metric(const char *api, const char *name)
{
	struct iod_api_response r;
	struct iod_err e;
	struct iod_http_conn fd = {0};
	long long v = -1;
	if (iod_api_http_once(&fd, api, "GET", "/metrics", NULL, NULL, 0, 2000, &r, &e) == 0) {
		char pat[96];
		snprintf(pat, sizeof(pat), "\n%s ", name);
		const char *p = r.body ? strstr(r.body, pat) : NULL;
		if (p)
			v = atoll(p + strlen(pat));
		iod_api_response_free(&r);
	}
	iod_http_conn_close(&fd);
	return v;
}

/*
 * Big requests (issue 15): a 3.9 MiB PUT under the 4 MiB body limit got 503
 * "not the leader" and forced an election with the 30 ms election timeout.
 * Now values over IOD_API_VALUE_MAX get 413 naming the limit before
 * anything is proposed, values under it are stored, and the term does not
 * change across all of it.
 */
static void big_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	int leader;
	long long term0 = -1, term1 = -2;
	const size_t sizes[] = {256 * 1024, 512 * 1024, 1536 * 1024, 3900 * 1024};

	/* the machine is shared: an election for other reasons retries the
	 * round (up to 3); the 3.9 MiB PUT used to force one every time */
	for (int round = 0; round < 3 && term0 != term1; round++) {
		CHECK((leader = find_leader(c)) >= 0);
		sleep_ms(300);
		term0 = metric(c->api[leader], "iod_raft_term");
		CHECK(term0 > 0);
		CHECK_EQ(iod_api_client_init(&cl, c->api[leader], &e), 0);
		for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i];
			char *b = malloc(n + 16), path[64];
			CHECK(b != NULL);
			memcpy(b, "{\"b\":\"", 6);
			memset(b + 6, 'x', n - 8);
			memcpy(b + n - 2, "\"}", 2);
			snprintf(path, sizeof(path), "/v1/config/big%u", i);
			int rc =
			    iod_api_request(&cl, "PUT", path, "application/json", b, n, &r, &e);
			free(b);
			CHECK_MSG(rc == 0, "%zu bytes: %s", n, e.msg);
			if (n > IOD_API_VALUE_MAX) {
				CHECK_MSG(r.status == 413, "%zu bytes: %d", n, r.status);
				CHECK_MSG(r.body && strstr(r.body, "IOD_API_VALUE_MAX"), "%s",
				          r.body);
			} else if (r.status != 200) {
				CHECK_MSG(r.status == 503, "%zu bytes: %d", n, r.status);
			}
			iod_api_response_free(&r);
		}
		iod_api_client_close(&cl);
		term1 = metric(c->api[leader], "iod_raft_term");
	}
	CHECK_MSG(term1 == term0, "iod_raft_term %lld -> %lld across the big requests, 3 rounds",
	          term0, term1);
}

TEST(big_requests_413_before_proposing_and_keep_the_term)
{
	with_cluster("big", big_body);
}

/* A deploy spec of `services` stateless services of `each` replicas. */
static char *deploy_spec(int services, int each)
{
	size_t cap = 128 + (size_t)services * 128;
	char *b = malloc(cap);
	int at = b ? snprintf(b, cap, "{\"services\": [") : 0;
	for (int i = 0; b && i < services; i++)
		at += snprintf(b + at, cap - (size_t)at,
		               "%s{\"name\": \"w%d\", \"type\": \"stateless\", \"replicas\": %d, "
		               "\"command\": \"sleep 1000\"}",
		               i ? ", " : "", i, each);
	if (b)
		snprintf(b + at, cap - (size_t)at, "]}");
	return b;
}

/*
 * Big deploys (issue 15): 1,500 replicas or more cost an election (the plan
 * held the leader's loop ~125 ms for 2,000; parsing and applying the
 * command held every server's loop ~80 ms more). Now the plan runs on a
 * worker thread and large commands are parsed on the log's worker: a deploy
 * of IOD_DEPLOY_REPLICAS_MAX replicas (3 services x 1,000), and the same
 * again (the prune path), keep iod_raft_term; one replica more is 413
 * naming the limit, and nothing is proposed (the revision stays); 20,000
 * replicas are 413 too, and the leader's RSS stays bounded.
 */
static char *big_specs[4]; /* big_deploy_body's, freed by its test */

static void big_deploy_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	int leader = -1;
	long long term0 = -1, term1 = -2;
	char path[64];
	/* the specs live in big_specs, freed by the test after the body: a
	 * failed CHECK returns at once and would leak them */
	char *spec = big_specs[0] = deploy_spec(3, IOD_DEPLOY_REPLICAS_MAX / 3);

	CHECK(spec != NULL);
	CHECK((leader = find_leader(c)) >= 0);
	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	for (int i = 0; i < 10; i++) {
		snprintf(path, sizeof(path), "/v1/nodes/n%d", i);
		CHECK_EQ(call(&cl, "PUT", path, "{\"model\": \"dgx-h100\", \"gpus\": 8}", &r), 0);
		CHECK_EQ(r.status, 200);
		iod_api_response_free(&r);
	}
	iod_api_client_close(&cl);
	/* the machine is shared: an election for other reasons retries the
	 * round (up to 3); 2,000 replicas used to force one every time */
	for (int round = 0; round < 3 && term0 != term1; round++) {
		CHECK((leader = find_leader(c)) >= 0);
		sleep_ms(300);
		term0 = metric(c->api[leader], "iod_raft_term");
		CHECK(term0 > 0);
		CHECK_EQ(iod_api_client_init(&cl, c->api[leader], &e), 0);
		for (int k = 0; k < 2; k++) { /* a deploy, then the same again */
			CHECK_EQ(call(&cl, "POST", "/v1/deploy", spec, &r), 0);
			/* 503/504: leadership moved (the term check below says so) */
			CHECK_MSG(r.status == 200 || r.status == 503 || r.status == 504,
			          "deploy: %d %.300s", r.status, r.body ? r.body : "");
			if (r.status == 200)
				CHECK_EQ(json_array_size(json_object_get(r.json, "placements")),
				         IOD_DEPLOY_REPLICAS_MAX / 3 * 3);
			iod_api_response_free(&r);
		}
		iod_api_client_close(&cl);
		sleep_ms(300);
		term1 = metric(c->api[leader], "iod_raft_term");
		if (getenv("IOD_TEST_VERBOSE"))
			iod_test_sh("for a in %s %s %s; do curl -s $a/metrics | grep -E "
			            "'^iod_loop_lag_max|^iod_raft_term |^iod_api_deploy_max' | tr "
			            "'\\n' ' ';"
			            " echo; done >&2",
			            c->api[0], c->api[1], c->api[2]);
	}
	CHECK_MSG(term1 == term0, "iod_raft_term %lld -> %lld across the big deploys, 3 rounds",
	          term0, term1);
	/* the followers applied from the worker's parse */
	long long pre = 0;
	for (int i = 0; i < N; i++)
		pre += metric(c->api[i], "iod_state_preparsed_total");
	CHECK_MSG(pre >= 2, "iod_state_preparsed_total %lld on all servers", pre);
	/* over the limit: 413 naming it, before anything is proposed */
	spec = big_specs[1] = deploy_spec(3, IOD_DEPLOY_REPLICAS_MAX / 3 + 1);
	CHECK((leader = find_leader(c)) >= 0);
	long long rev0 = metric(c->api[leader], "iod_state_revision");
	CHECK_EQ(iod_api_client_init(&cl, c->api[leader], &e), 0);
	CHECK_EQ(call(&cl, "POST", "/v1/deploy", spec, &r), 0);
	CHECK_MSG(r.status == 413, "over the limit: %d", r.status);
	CHECK_MSG(r.body && strstr(r.body, "IOD_DEPLOY_REPLICAS_MAX"), "%.300s",
	          r.body ? r.body : "");
	iod_api_response_free(&r);
	/* 20,000 replicas (the case: 413 "Argument list too long", and
	 * the leader's RSS went from 29 to 246 MB and stayed there): as one
	 * service, 400 naming IOD_SPEC_REPLICAS_MAX; as 20 x 1,000, 413 naming
	 * IOD_DEPLOY_REPLICAS_MAX, three times; and the leader's RSS stays where
	 * it was. Both refusals come before any planning, so the growth is the
	 * request's buffers (kB); 64 MB, under a third of the old growth
	 * (217 MB), leaves room for a new malloc arena per worker thread (64 MB
	 * of reserve, a few MB touched) and frees that a loaded 2-core machine
	 * runs late. The revision check below covers these too: nothing was
	 * proposed. */
	spec = big_specs[2] = deploy_spec(1, 20000);
	char *spec20 = big_specs[3] = deploy_spec(20, 1000);
	CHECK(spec != NULL && spec20 != NULL);
	sleep_ms(200);
	long rss0 = iod_cc_proc_kb(c->pid[leader], "VmRSS:");
	CHECK(rss0 > 0);
	CHECK_EQ(call(&cl, "POST", "/v1/deploy", spec, &r), 0);
	CHECK_MSG(r.status == 400 && r.body && strstr(r.body, "IOD_SPEC_REPLICAS_MAX"),
	          "20,000 replicas in one service: %d %.300s", r.status, r.body ? r.body : "");
	iod_api_response_free(&r);
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(call(&cl, "POST", "/v1/deploy", spec20, &r), 0);
		CHECK_MSG(r.status == 413 && r.body && strstr(r.body, "IOD_DEPLOY_REPLICAS_MAX"),
		          "20 x 1,000 replicas: %d %.300s", r.status, r.body ? r.body : "");
		iod_api_response_free(&r);
	}
	sleep_ms(200);
	long rss1 = iod_cc_proc_kb(c->pid[leader], "VmRSS:");
	if (getenv("IOD_TEST_VERBOSE"))
		fprintf(stderr, "refused 20,000-replica deploys: leader RSS %ld -> %ld kB\n", rss0,
		        rss1);
	CHECK_MSG(rss1 > 0 && rss1 - rss0 < 64 * 1024,
	          "leader RSS %ld -> %ld kB across four refused 20,000-replica deploys", rss0,
	          rss1);
	iod_api_client_close(&cl);
	CHECK_EQ(metric(c->api[leader], "iod_state_revision"), rev0);
}

TEST(big_deploys_plan_off_the_loop_and_keep_the_term)
{
	with_cluster("bigdeploy", big_deploy_body);
	for (size_t i = 0; i < IOD_ARRAY_LEN(big_specs); i++)
		free(big_specs[i]), big_specs[i] = NULL;
}

/* A transaction of n puts of config t<round>-<i> (malloc'd, its length in *len). */
static char *txn_puts(int round, int n, size_t *len)
{
	char *txn = malloc((size_t)n * 96 + 64);
	if (!txn)
		return NULL;
	size_t at = (size_t)sprintf(txn, "{\"ops\":[");
	for (int i = 0; i < n; i++)
		at += (size_t)sprintf(txn + at,
		                      "%s{\"op\":\"put\",\"kind\":\"config\",\"name\":"
		                      "\"t%d-%d\",\"value\":{\"i\":%d}}",
		                      i ? "," : "", round, i, i);
	at += (size_t)sprintf(txn + at, "]}");
	*len = at;
	return txn;
}

/*
 * A 4,000-put transaction (issue 15: it forced an election with the 30 ms
 * election timeout: the leader parsed and re-serialised its 380 KB on the
 * loop, 30-50 ms). Three of them keep iod_raft_term; the puts are applied;
 * a transaction over IOD_API_TXN_OPS_MAX gets 413 naming the limit before
 * anything is proposed.
 */
static void big_txn_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	int leader = -1;
	long long term0 = -1, term1 = -2;
	size_t len = 0;
	char *txn = NULL;

	for (int round = 0; round < 3 && term0 != term1; round++) {
		CHECK((leader = find_leader(c)) >= 0);
		sleep_ms(300);
		term0 = metric(c->api[leader], "iod_raft_term");
		CHECK(term0 > 0);
		CHECK_EQ(iod_api_client_init(&cl, c->api[leader], &e), 0);
		for (int k = 0; k < 3; k++) {
			CHECK((txn = txn_puts(round * 3 + k, 4000, &len)) != NULL);
			int rc = iod_api_request(&cl, "POST", "/v1/txn", "application/json", txn,
			                         len, &r, &e);
			free(txn);
			CHECK_MSG(rc == 0, "txn: %s", e.msg);
			/* 503/504: leadership moved (the term check below says so) */
			CHECK_MSG(r.status == 200 || r.status == 503 || r.status == 504,
			          "txn: %d %.300s", r.status, r.body ? r.body : "");
			iod_api_response_free(&r);
		}
		iod_api_client_close(&cl);
		sleep_ms(300);
		term1 = metric(c->api[leader], "iod_raft_term");
	}
	CHECK_MSG(term1 == term0,
	          "iod_raft_term %lld -> %lld across three 4,000-put transactions, 3 rounds", term0,
	          term1);
	/* applied: the last put of the last transaction is there */
	CHECK((leader = find_leader(c)) >= 0);
	struct iod_http_conn fd = {0};
	char path[64];
	int last = -1;
	for (int round = 0; round < 3; round++) {
		snprintf(path, sizeof(path), "/v1/config/t%d-3999", round * 3 + 2);
		if (iod_api_http_once(&fd, c->api[leader], "GET", path, NULL, NULL, 0, 2000, &r,
		                      &e) == 0) {
			if (r.status == 200)
				last = round;
			iod_api_response_free(&r);
		}
	}
	iod_http_conn_close(&fd);
	CHECK_MSG(last >= 0, "no round's last put was applied");
	/* over the limit: 413 naming it, nothing proposed */
	long long rev0 = metric(c->api[leader], "iod_state_revision");
	CHECK((txn = txn_puts(99, IOD_API_TXN_OPS_MAX + 1, &len)) != NULL);
	CHECK_EQ(iod_api_client_init(&cl, c->api[leader], &e), 0);
	int rc = iod_api_request(&cl, "POST", "/v1/txn", "application/json", txn, len, &r, &e);
	free(txn);
	CHECK_MSG(rc == 0, "txn: %s", e.msg);
	CHECK_MSG(r.status == 413, "over the limit: %d", r.status);
	CHECK_MSG(r.body && strstr(r.body, "IOD_API_TXN_OPS_MAX"), "%.300s", r.body ? r.body : "");
	iod_api_response_free(&r);
	iod_api_client_close(&cl);
	CHECK_EQ(metric(c->api[leader], "iod_state_revision"), rev0);
}

TEST(big_txns_keep_the_term)
{
	with_cluster("bigtxn", big_txn_body);
}

/* Member id's role in a server's /v1/status ("voter", "spare", ...), or "". */
static void role_of(const char *api, int id, char *out, size_t cap)
{
	struct iod_api_response r;
	struct iod_err e;
	struct iod_http_conn fd = {0};
	out[0] = 0;
	if (iod_api_http_once(&fd, api, "GET", "/v1/status", NULL, NULL, 0, 1000, &r, &e) == 0) {
		json_t *m;
		size_t i;
		json_array_foreach(json_object_get(r.json, "members"), i, m)
		{
			if (json_integer_value(json_object_get(m, "id")) == id)
				snprintf(out, cap, "%s",
				         json_string_value(json_object_get(m, "role"))
				             ? json_string_value(json_object_get(m, "role"))
				             : "?");
		}
		iod_api_response_free(&r);
	}
	iod_http_conn_close(&fd);
}

/*
 * A member added while the leader changes (issue 15): the leader adds a
 * joining server as a spare and then promotes it; a leader change between
 * the two left a spare for good (a second POST got 409, which the joiner
 * takes as "joined"). Here the POST names a Raft address nobody listens on
 * yet, so the promotion cannot finish; once the spare is in the
 * configuration the leader is killed; then server 4 starts and joins. The
 * new leader must finish the promotion: member 4 becomes a voter.
 */
static void spare_body(struct iod_cc *c)
{
	char raft[32], api[32], dd[600], log[600], body[160], req[400], role[16] = "";
	int leader = -1;
	pid_t p = -1;

	CHECK((leader = find_leader(c)) >= 0);
	snprintf(raft, sizeof(raft), "127.0.0.1:%d", iod_cc_free_port());
	snprintf(api, sizeof(api), "127.0.0.1:%d", iod_cc_free_port());
	snprintf(body, sizeof(body), "{\"id\":4,\"raft\":\"%s\",\"api\":\"%s\"}", raft, api);
	int n = snprintf(req, sizeof(req),
	                 "POST /v1/members HTTP/1.1\r\nHost: x\r\nContent-Type: "
	                 "application/json\r\nContent-Length: %zu\r\n\r\n%s",
	                 strlen(body), body);
	/* sent, not waited for: it is answered when the promotion ends */
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	a.sin_port = htons((uint16_t)c->api_port[leader]);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	for (int t = 0; t < 250 && strcmp(role, "spare"); t++) {
		role_of(c->api[leader], 4, role, sizeof(role));
		if (strcmp(role, "spare"))
			sleep_ms(20);
	}
	close(fd);
	CHECK_MSG(!strcmp(role, "spare"), "member 4 is \"%s\", not a spare being promoted", role);
	/* the leader goes away mid-promotion; it comes back as a follower */
	iod_cc_stop(c, leader, SIGKILL);
	CHECK_EQ(iod_cc_start(c, leader), 0);
	snprintf(dd, sizeof(dd), "%s/d4", c->dir);
	snprintf(log, sizeof(log), "%s/log4", c->dir);
	p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		if (!freopen(log, "a", stderr))
			_exit(126);
		execl(c->bin, c->bin, "server", "--id", "4", "--data-dir", dd, "--raft", raft,
		      "--api", api, "--join", c->api[(leader + 1) % N], (char *)NULL);
		_exit(127);
	}
	role[0] = 0;
	for (int t = 0; t < 500 && strcmp(role, "voter"); t++) {
		int l = find_leader(c);
		if (l >= 0)
			role_of(c->api[l], 4, role, sizeof(role));
		if (strcmp(role, "voter"))
			sleep_ms(20);
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	CHECK_MSG(!strcmp(role, "voter"),
	          "member 4 is still \"%s\" 10 s after the leader change (never promoted)", role);
}

TEST(spare_left_by_a_leader_change_is_promoted)
{
	with_cluster("spare", spare_body);
}

/* 32k configs l<b>-<i> in 8 transactions of 4,000. */
/* 32,000 configs in 8 transactions; *last_rev (when not NULL): the revision
 * of the last one. */
static void put_32k(const char *api, uint64_t *last_rev)
{
	uint64_t rev = 0;
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	CHECK_EQ(iod_api_client_init(&cl, api, &e), 0);
	char *txn = malloc(4000 * 96 + 64);
	for (int bt = 0; txn && bt < 8; bt++) {
		size_t at = (size_t)sprintf(txn, "{\"ops\":[");
		for (int i = 0; i < 4000; i++)
			at += (size_t)sprintf(txn + at,
			                      "%s{\"op\":\"put\",\"kind\":\"config\",\"name\":"
			                      "\"l%d-%d\",\"value\":{\"i\":%d}}",
			                      i ? "," : "", bt, i, i);
		at += (size_t)sprintf(txn + at, "]}");
		/* puts only: safe to send again (an election on the shared machine) */
		int status = 0;
		for (int tries = 0; tries < 10 && status != 200; tries++) {
			status = 0;
			if (!iod_api_request(&cl, "POST", "/v1/txn", "application/json", txn, at,
			                     &r, &e)) {
				status = r.status;
				if (status == 200)
					iod_json_get_u64(r.json, "rev", &rev);
				iod_api_response_free(&r);
			}
			if (status != 200)
				sleep_ms(200);
		}
		if (status != 200) {
			free(txn);
			iod_api_client_close(&cl);
		}
		CHECK_MSG(status == 200, "a 4,000-put txn was not applied: %d", status);
	}
	free(txn);
	iod_api_client_close(&cl);
	if (last_rev)
		*last_rev = rev;
}

static int get_once(const char *api, const char *path, struct iod_api_response *r)
{
	struct iod_err e;
	struct iod_http_conn fd = {0};
	int rc = iod_api_http_once(&fd, api, "GET", path, NULL, NULL, 0, 30000, r, &e);
	iod_http_conn_close(&fd);
	return rc;
}

/*
 * Big lists (issue 15): listing 32k objects held the leader's loop
 * 170-345 ms and forced an election every time with the 30 ms election
 * timeout. Lists are now sorted and serialised on a worker thread: five
 * whole lists and a paged walk keep iod_raft_term, the pages cover every
 * object once in order, and bad page parameters are 400 naming the limit.
 */
static void list_body(struct iod_cc *c)
{
	struct iod_api_response r;
	int leader;
	long long term0 = -1, term1 = -2;

	CHECK((leader = find_leader(c)) >= 0);
	put_32k(c->servers, NULL);

	for (int round = 0; round < 3 && term0 != term1; round++) {
		CHECK((leader = find_leader(c)) >= 0);
		sleep_ms(300);
		term0 = metric(c->api[leader], "iod_raft_term");
		CHECK(term0 > 0);
		for (int i = 0; i < 5; i++) {
			CHECK_EQ(get_once(c->api[leader], "/v1/configs", &r), 0);
			CHECK_EQ(r.status, 200);
			CHECK(json_array_size(json_object_get(r.json, "items")) >= 32000);
			CHECK(json_object_get(r.json, "continue") == NULL);
			iod_api_response_free(&r);
		}
		term1 = metric(c->api[leader], "iod_raft_term");
	}
	CHECK_MSG(term1 == term0, "iod_raft_term %lld -> %lld across five 32k lists, 3 rounds",
	          term0, term1);
	CHECK_EQ(get_once(c->api[leader], "/v1/configs", &r), 0);
	const int n = (int)json_array_size(json_object_get(r.json, "items")); /* + member.N */
	iod_api_response_free(&r);

	/* pages: every object once, in name order */
	char path[160], last[IOD_NAME_MAX] = "", cont[IOD_NAME_MAX] = "";
	int total = 0, pages = 0;
	bool ordered = true;
	do {
		snprintf(path, sizeof(path), "/v1/configs?limit=1000%s%s",
		         cont[0] ? "&continue=" : "", cont);
		CHECK_EQ(get_once(c->api[leader], path, &r), 0);
		CHECK_MSG(r.status == 200, "%s: %d", path, r.status);
		json_t *items = json_object_get(r.json, "items"), *x;
		size_t i;
		CHECK(json_array_size(items) <= 1000);
		json_array_foreach(items, i, x)
		{
			const char *nm = json_string_value(json_object_get(x, "name"));
			ordered = ordered && nm && strcmp(nm, last) > 0;
			iod_strlcpy(last, nm ? nm : "", sizeof(last));
			total++;
		}
		const char *k = json_string_value(json_object_get(r.json, "continue"));
		iod_strlcpy(cont, k ? k : "", sizeof(cont));
		if (k)
			CHECK_STR(k, last);
		iod_api_response_free(&r);
		pages++;
	} while (cont[0] && pages < 100);
	CHECK_EQ(total, n);
	CHECK_EQ(pages, (n + 999) / 1000);
	CHECK(ordered);

	const char *bad[] = {"/v1/configs?limit=0", "/v1/configs?limit=10001",
	                     "/v1/configs?limit=x", "/v1/configs?limit=5&continue=a%01b"};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(get_once(c->api[leader], bad[i], &r), 0);
		CHECK_MSG(r.status == 400, "%s: %d", bad[i], r.status);
		if (i < 3)
			CHECK_MSG(r.body && strstr(r.body, "IOD_API_LIST_PAGE_MAX"), "%s", r.body);
		iod_api_response_free(&r);
	}
	/* a page past the end is empty, with no continue */
	CHECK_EQ(get_once(c->api[leader], "/v1/configs?limit=5&continue=zzz", &r), 0);
	CHECK_EQ(r.status, 200);
	CHECK_EQ(json_array_size(json_object_get(r.json, "items")), 0);
	iod_api_response_free(&r);
}

TEST(big_lists_page_and_keep_the_term)
{
	with_cluster("list", list_body);
}

/* A watch answer (k bytes of it in buf, cap its size) read to its end, and
 * the watch sent again on fd from the answer's "rev": the first bytes of the
 * next answer (k of recv), or <= 0. */
static ssize_t rewatch(int fd, char *buf, size_t k, size_t cap)
{
	const char *cl = strstr(buf, "Content-Length: "), *body = strstr(buf, "\r\n\r\n");
	if (!cl || !body)
		return -1;
	size_t want = (size_t)(body + 4 - buf) + strtoull(cl + 16, NULL, 10);
	if (want >= cap)
		return -1;
	while (k < want) {
		ssize_t r = recv(fd, buf + k, want - k, 0);
		if (r <= 0)
			return r;
		k += (size_t)r;
	}
	buf[k] = 0;
	const char *rv = strstr(body, "\"rev\": ");
	if (!rv)
		return -1;
	char req[160];
	int n = snprintf(req, sizeof(req),
	                 "GET /v1/configs?watch=1&rev=%llu&timeout_ms=30000 HTTP/1.1\r\n"
	                 "Host: x\r\n\r\n",
	                 strtoull(rv + 7, NULL, 10));
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) < 0)
		return -1;
	return recv(fd, buf, cap - 1, 0);
}

/*
 * Watch amplification (issue 15): 1,000 watchers and one 1 MiB write pushed
 * the leader from 15 to 1,034 MB: every watcher serialised its own copy.
 * Now one wake-up serialises each distinct answer once and every watcher
 * sends the same buffer: 1,000 watchers and a 512 KiB write stay under
 * 250 MB peak RSS (it was ~560 MB), and every watcher gets the event.
 * Sending those 1,000 answers in one turn of the loop held it 200-600 ms;
 * large answers now go out IOD_API_WATCH_LARGE_MAX at a time, the rest
 * waiting their turn (iod_api_watch_answers_deferred_total), and every one
 * still arrives. The answer is serialised on a worker thread, once
 * (iod_api_watch_encodes_total). (The loop lag itself is bench_control's
 * loop_lag figure: timing is not asserted here.)
 */
static void watch_flood_body(struct iod_cc *c)
{
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;
	static int wfd[1000];
	int leader, opened = 0, answered = 0, closed = 0, timed_out = 0, others = 0, rewatched = 0;
	char other[512] = "";

	CHECK((leader = find_leader(c)) >= 0);
	/* with them the old server held one copy per watcher */
	uint64_t rev32k = 0;
	put_32k(c->servers, &rev32k);
	CHECK(rev32k > 0);
	int port = atoi(strrchr(c->api[leader], ':') + 1);
	/* after the last txn's revision, not "now": a server that has not
	 * applied it yet (the leader moved during the txns, or its apply runs
	 * behind its answer) would otherwise give early watchers that txn's
	 * events, not the flood (8 of 1,000 did, 1 run in 6) */
	char req[160];
	int req_len = snprintf(req, sizeof(req),
	                       "GET /v1/configs?watch=1&rev=%llu&timeout_ms=30000 HTTP/1.1\r\n"
	                       "Host: x\r\n\r\n",
	                       (unsigned long long)rev32k);
	for (int i = 0; i < 1000; i++) {
		wfd[i] = connect_from(0x7f000020u + (uint32_t)(i % 8), port);
		if (wfd[i] >= 0 && send(wfd[i], req, (size_t)req_len, MSG_NOSIGNAL) < 0) {
			close(wfd[i]);
			wfd[i] = -1;
		}
		opened += wfd[i] >= 0;
	}
	CHECK_MSG(opened == 1000, "only %d watchers connected", opened);
	sleep_ms(500);
	const size_t n = 512 * 1024;
	char *b = malloc(n);
	CHECK(b != NULL);
	memcpy(b, "{\"b\":\"", 6);
	memset(b + 6, 'w', n - 8);
	memcpy(b + n - 2, "\"}", 2);
	CHECK_EQ(iod_api_client_init(&cl, c->api[leader], &e), 0);
	int rc = iod_api_request(&cl, "PUT", "/v1/config/flood", "application/json", b, n, &r, &e);
	free(b);
	CHECK_MSG(rc == 0 && r.status == 200, "the write: %s", rc ? e.msg : "not 200");
	iod_api_response_free(&r);
	iod_api_client_close(&cl);
	for (int i = 0; i < 1000; i++) {
		char buf[4096];
		struct timeval tv = {10, 0};
		if (wfd[i] < 0)
			continue;
		setsockopt(wfd[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ssize_t k = recv(wfd[i], buf, sizeof(buf) - 1, 0);
		/* another config written before the flood (a server publishing its
		 * member.N record late, at load) answers the watch first, as it
		 * should: the watcher asks again from that answer's rev */
		for (int again = 0; k > 0 && again < 4; again++) {
			buf[k] = 0;
			if (strncmp(buf, "HTTP/1.1 200", 12) ||
			    strstr(buf, "\"name\": \"flood\"") ||
			    !strstr(buf, "\"kind\": \"config\""))
				break;
			k = rewatch(wfd[i], buf, (size_t)k, sizeof(buf));
			rewatched += k > 0;
		}
		if (k > 0) {
			buf[k] = 0;
			bool ok = !strncmp(buf, "HTTP/1.1 200", 12) &&
			          strstr(buf, "\"name\": \"flood\"") != NULL;
			answered += ok;
			if (!ok && !other[0]) /* the first wrong answer, for the message */
				snprintf(other, sizeof(other), "watcher %d: %.400s", i, buf);
			others += !ok;
		} else {
			closed += k == 0;
			timed_out += k < 0;
		}
	}
	long hwm = iod_cc_proc_kb(c->pid[leader], "VmHWM:");
	for (int i = 0; i < 1000; i++)
		if (wfd[i] >= 0)
			close(wfd[i]);
	CHECK_MSG(answered == 1000,
	          "%d of 1000 watchers answered (%d closed, %d timed out after 10 s, %d other "
	          "answers; %d asked again; %lld connections evicted; %s)",
	          answered, closed, timed_out, others, rewatched,
	          metric(c->api[leader], "iod_api_connections_closed_total{reason=\"evicted\"}"),
	          other[0] ? other : "-");
	if (getenv("IOD_TEST_VERBOSE"))
		fprintf(stderr, "watch flood: leader peak RSS %ld kB\n", hwm);
	CHECK_MSG(hwm > 0 && hwm < 250 * 1024, "leader peak RSS %ld kB under the watch flood", hwm);
	/* The answer was serialised off the loop (it held the loop 4-6 ms in
	 * json_dumps), once for the watchers that share it: all 1,000 watch from
	 * the same revision, so a few encodings at most (a write landing while
	 * they connect splits them), never one per watcher. */
	long long enc = metric(c->api[leader], "iod_api_watch_encodes_total");
	CHECK_MSG(enc >= 1 && enc <= 16, "%lld watch answers serialised off the loop", enc);
	/* How many large answers waited their turn depends on how fast each one
	 * leaves (a clean-clone CI run saw 0 of 1000 wait), so it is reported,
	 * not asserted. */
	if (getenv("IOD_TEST_VERBOSE"))
		fprintf(stderr, "watch flood: %lld large answers waited their turn\n",
		        metric(c->api[leader], "iod_api_watch_answers_deferred_total"));
}

TEST(watch_flood_serialises_once)
{
	with_cluster("watchflood", watch_flood_body);
}

/* An answer on fd read to its end (Content-Length): its status, or -1. */
static int read_answer(int fd, char *buf, size_t cap)
{
	size_t k = 0;
	for (;;) {
		buf[k] = 0;
		const char *cl = strstr(buf, "Content-Length: "), *body = strstr(buf, "\r\n\r\n");
		if (cl && body) {
			size_t want = (size_t)(body + 4 - buf) + strtoull(cl + 16, NULL, 10);
			if (want >= cap)
				return -1;
			if (k >= want)
				return !strncmp(buf, "HTTP/1.1 ", 9) ? atoi(buf + 9) : -1;
		}
		if (k + 1 >= cap)
			return -1;
		ssize_t r = recv(fd, buf + k, cap - 1 - k, 0);
		if (r <= 0)
			return -1;
		k += (size_t)r;
	}
}

/*
 * Kept-alive connections between requests keep their slots: 1,000 watchers
 * answered once (a late member.N record, at load) and asking again more
 * than IOD_API_EVICT_HEAD_AGE_MS later lost exactly 40 of them (1,000 -
 * (IOD_API_CONNECTIONS_MAX - IOD_API_CONNECTIONS_SPARE)): the deadline
 * sweep closed the excess over 960 as if they were slow heads, with 24
 * slots still free and no new client asking for one. Here 1,000
 * connections are each answered once, sit idle past the eviction age and
 * the sweep, and every one is answered again; none is evicted.
 */
static void idle_kept_alive_body(struct iod_cc *c)
{
	enum { CONNS = 1000 };
	static int fd[CONNS];
	static char buf[8192];
	const char req[] = "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n";
	int leader, opened = 0, first = 0, again = 0;

	CHECK((leader = find_leader(c)) >= 0);
	int port = atoi(strrchr(c->api[leader], ':') + 1);
	for (int i = 0; i < CONNS; i++) {
		fd[i] = connect_from(0x7f000020u + (uint32_t)(i % 8), port);
		if (fd[i] >= 0 && send(fd[i], req, sizeof(req) - 1, MSG_NOSIGNAL) < 0) {
			close(fd[i]);
			fd[i] = -1;
		}
		opened += fd[i] >= 0;
	}
	CHECK_MSG(opened == CONNS, "only %d connections opened", opened);
	for (int i = 0; i < CONNS; i++) {
		struct timeval tv = {10, 0};
		if (fd[i] < 0)
			continue;
		setsockopt(fd[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		first += read_answer(fd[i], buf, sizeof(buf)) == 200;
	}
	/* idle past the eviction age and a few sweeps, well within the
	 * header deadline */
	sleep_ms(IOD_API_EVICT_HEAD_AGE_MS + 4 * IOD_API_DEADLINE_SWEEP_MS);
	long long evicted =
	    metric(c->api[leader], "iod_api_connections_closed_total{reason=\"evicted\"}");
	for (int i = 0; i < CONNS; i++) {
		if (fd[i] < 0)
			continue;
		if (send(fd[i], req, sizeof(req) - 1, MSG_NOSIGNAL) > 0)
			again += read_answer(fd[i], buf, sizeof(buf)) == 200;
		close(fd[i]);
	}
	CHECK_MSG(first == CONNS, "%d of %d first requests answered", first, CONNS);
	CHECK_MSG(again == CONNS && evicted == 0,
	          "%d of %d kept-alive connections answered again after %d ms idle (%lld "
	          "evicted)",
	          again, CONNS, IOD_API_EVICT_HEAD_AGE_MS + 4 * IOD_API_DEADLINE_SWEEP_MS, evicted);
}

TEST(idle_kept_alive_connections_keep_their_slots)
{
	with_cluster("keepalive", idle_kept_alive_body);
}

/*
 * Lease flood from many addresses (issue 15: "8,192 day-long leases ...
 * stop any agent from registering"). One client's quota is checked above;
 * here FLOOD_ADDRS clients, each from its own loopback address, grant
 * day-long leases until refused: together they fill the general pool
 * (IOD_STATE_LEASES_MAX - IOD_STATE_LEASES_NODE_RESERVED), each refusal
 * is a 507 naming the limit it hit, a client from a new address is refused
 * naming the reserve, and a real `iod agent` still registers (its lease
 * comes from the node reserve).
 */
#define FLOOD_ADDRS 8

struct lease_flooder {
	struct iod_cc *c;  /* the cluster */
	char ip[16];       /* its source address */
	int granted;       /* 200s */
	int unknown;       /* 504 outcome unknown (granted or not) */
	int refused;       /* 507 naming a lease limit */
	char refusal[256]; /* the refusal's body */
	char other[256];   /* the first unexpected answer, "" = none */
	pthread_t t;       /* its thread */
};

static void *lease_flood_thread(void *p)
{
	struct lease_flooder *f = p;
	struct iod_api_client cl;
	struct iod_err e;

	if (iod_api_client_init(&cl, f->c->servers, &e)) {
		snprintf(f->other, sizeof(f->other), "client: %s", e.msg);
		return NULL;
	}
	cl.conn.src_ip = f->ip;
	cl.retry_ms = 15000;
	for (int i = 0; i < IOD_STATE_LEASES_PER_CLIENT_MAX + 10 && !f->refused; i++) {
		struct iod_api_response r;
		int rc = call(&cl, "POST", "/v1/leases", "{\"ttl_ms\": 86400000}", &r);
		if (rc) {
			snprintf(f->other, sizeof(f->other), "grant %d: rc %d", i, rc);
			break;
		}
		if (r.status == 200) {
			f->granted++;
		} else if (r.status == 504) {
			f->unknown++;
			if (getenv("IOD_TEST_VERBOSE"))
				fprintf(stderr, "%s: 504 %.300s\n", f->ip, r.body ? r.body : "");
		} else if (r.status == 507 && r.body &&
		           (strstr(r.body, "IOD_STATE_LEASES_PER_CLIENT_MAX") ||
		            strstr(r.body, "IOD_STATE_LEASES_NODE_RESERVED"))) {
			f->refused++;
			snprintf(f->refusal, sizeof(f->refusal), "%s", r.body);
		} else {
			snprintf(f->other, sizeof(f->other), "grant %d: %d %.200s", i, r.status,
			         r.body ? r.body : "");
			iod_api_response_free(&r);
			break;
		}
		iod_api_response_free(&r);
	}
	iod_api_client_close(&cl);
	return NULL;
}

static void lease_addrs_body(struct iod_cc *c)
{
	static struct lease_flooder f[FLOOD_ADDRS];
	struct iod_api_client cl;
	struct iod_api_response r;
	struct iod_err e;

	CHECK(find_leader(c) >= 0);
	memset(f, 0, sizeof(f));
	for (int i = 0; i < FLOOD_ADDRS; i++) {
		f[i].c = c;
		snprintf(f[i].ip, sizeof(f[i].ip), "127.0.0.%d", 2 + i);
		CHECK_EQ(pthread_create(&f[i].t, NULL, lease_flood_thread, &f[i]), 0);
	}
	int granted = 0, unknown = 0, by_quota = 0, by_reserve = 0;
	for (int i = 0; i < FLOOD_ADDRS; i++) {
		pthread_join(f[i].t, NULL);
		CHECK_MSG(!f[i].other[0], "%s: %s", f[i].ip, f[i].other);
		CHECK_MSG(f[i].refused == 1, "%s: granted %d and never refused", f[i].ip,
		          f[i].granted);
		CHECK_MSG(f[i].granted <= IOD_STATE_LEASES_PER_CLIENT_MAX, "%s: granted %d",
		          f[i].ip, f[i].granted);
		granted += f[i].granted;
		unknown += f[i].unknown;
		by_quota += strstr(f[i].refusal, "IOD_STATE_LEASES_PER_CLIENT_MAX") != NULL;
		by_reserve += strstr(f[i].refusal, "IOD_STATE_LEASES_NODE_RESERVED") != NULL;
	}
	const int general = IOD_STATE_LEASES_MAX - IOD_STATE_LEASES_NODE_RESERVED;
	if (getenv("IOD_TEST_VERBOSE"))
		fprintf(stderr,
		        "lease flood from %d addresses: %d granted, %d unknown, refused %d by the "
		        "quota and %d by the reserve\n",
		        FLOOD_ADDRS, granted, unknown, by_quota, by_reserve);
	CHECK_MSG(granted <= general && granted + unknown >= general,
	          "%d granted (+%d unknown) from %d addresses; the general pool is %d", granted,
	          unknown, FLOOD_ADDRS, general);
	CHECK_MSG(by_reserve > 0, "no client was refused naming IOD_STATE_LEASES_NODE_RESERVED");

	/* the pool is full for everyone: a client from a new address too */
	CHECK_EQ(iod_api_client_init(&cl, c->servers, &e), 0);
	cl.conn.src_ip = "127.0.0.30";
	CHECK_EQ(call(&cl, "POST", "/v1/leases", "{\"ttl_ms\": 86400000}", &r), 0);
	CHECK_MSG(r.status == 507 && r.body && strstr(r.body, "IOD_STATE_LEASES_NODE_RESERVED"),
	          "a new client under the flood: %d %s", r.status, r.body ? r.body : "");
	iod_api_response_free(&r);

	/* and a real agent still registers: its node lease is in the reserve */
	uint64_t reg_ms = agent_registers(c, &cl, "reservenode");
	if (getenv("IOD_TEST_VERBOSE"))
		fprintf(stderr,
		        "lease flood from %d addresses: a real agent registered in %llu ms\n",
		        FLOOD_ADDRS, (unsigned long long)reg_ms);
	CHECK_MSG(reg_ms > 0,
	          "a real agent did not register within 10 s of a lease flood from %d addresses",
	          FLOOD_ADDRS);
	iod_api_client_close(&cl);
}

TEST(lease_flood_from_many_addresses_keeps_the_node_reserve)
{
	with_cluster("leaseaddrs", lease_addrs_body);
}
