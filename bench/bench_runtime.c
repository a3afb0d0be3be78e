/*
 * bench_runtime.c: the runtime's recovery numbers on a real local cluster
 * (`iod up`: 3 servers + agents as processes on loopback), over repeated runs:
 *   deploy   the example topology, from POST /v1/deploy to every placed
 *            replica ready (target < 500 ms);
 *   crash    SIGKILL of a replica's process to its Endpoint marked unhealthy,
 *            10 ms health-check interval (target < 50 ms);
 *   nodeloss SIGSTOP of an agent to its replica running and ready on another
 *            node, 200 ms lease (target < 1 s).
 * Prints BENCH lines with p50/p99/max in ms. Needs build/iod (make builds it).
 * Environment: IOD_BENCH_RUNS (default 10), IOD_BENCH_IOD (default build/iod).
 */
#include "iod/agent.h"
#include "iod/api.h"
#include "bench.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char iod_bin[512] = "build/iod";
static char state_dir[256];
static struct iod_api_client cl;

static uint64_t now_us(void)
{
	return iod_clock_now_ns() / IOD_NS_PER_US;
}

static void report(const char *name, uint64_t *us, unsigned n, double target_ms)
{
	if (!n) {
		printf("BENCH runtime.%s runs=0 error=no_successful_run target_ms=%.0f\n", name,
		       target_ms);
		return;
	}
	qsort(us, n, sizeof(*us), bench_cmp_u64);
	double p50 = (double)us[n / 2] / 1000.0, p99 = (double)us[(n * 99) / 100] / 1000.0;
	double mx = (double)us[n - 1] / 1000.0;
	printf(
	    "BENCH runtime.%s runs=%u p50_ms=%.1f p99_ms=%.1f max_ms=%.1f target_ms=%.0f met=%s\n",
	    name, n, p50, p99, mx, target_ms, p99 < target_ms ? "yes" : "no");
	fflush(stdout);
}

static json_t *get(const char *path)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	if (iod_api_request(&cl, "GET", path, NULL, NULL, 0, &r, &e) || r.status != 200) {
		iod_api_response_free(&r);
		return NULL;
	}
	json_t *j = json_incref(r.json);
	iod_api_response_free(&r);
	return j;
}

static int post(const char *method, const char *path, const char *body)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	int rc = iod_api_request(&cl, method, path, body ? "application/yaml" : NULL, body,
	                         body ? strlen(body) : 0, &r, &e);
	int st = r.status;
	iod_api_response_free(&r);
	return rc ? rc : st;
}

static int up(const char *args)
{
	char cmd[1024];
	struct iod_err e = {0};
	snprintf(cmd, sizeof(cmd), "IOD_STATE_DIR=%s %s up %s >/dev/null", state_dir, iod_bin,
	         args);
	int rc = system(cmd);
	/* each `iod up` makes a new CA: take the admin credential it wrote
	 * (STATE_DIR/config), as every command does */
	uint32_t t = cl.timeout_ms, r = cl.retry_ms;
	iod_api_client_close(&cl);
	setenv("IOD_STATE_DIR", state_dir, 1);
	if (iod_api_client_init_config(&cl, "127.0.0.1:7400,127.0.0.1:7401,127.0.0.1:7402", &e))
		fprintf(stderr, "bench: client config: %s\n", e.msg);
	cl.timeout_ms = t;
	cl.retry_ms = r;
	return rc;
}

static void down(void)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "IOD_STATE_DIR=%s %s down --grace 5s >/dev/null 2>&1", state_dir,
	         iod_bin);
	if (system(cmd) != 0)
		fprintf(stderr, "bench: iod down failed\n");
}

/* Placed replicas and how many are ready; a name filter, or NULL. */
static void count_ready(unsigned *placed, unsigned *ready, const char *only)
{
	json_t *l = get("/v1/replicas"), *x;
	size_t i;
	*placed = *ready = 0;
	json_array_foreach(json_object_get(l, "items"), i, x)
	{
		const char *name = "";
		bool rd = false;
		iod_json_get_str(x, "name", &name);
		if (only && strcmp(name, only))
			continue;
		(*placed)++;
		iod_json_get_bool(json_object_get(x, "value"), "ready", &rd);
		*ready += rd;
	}
	json_decref(l);
}

static char *read_file(const char *path)
{
	struct iod_buf b;
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, path, 1 << 20, NULL)) {
		iod_buf_free(&b);
		return NULL;
	}
	return b.data;
}

/* deploy: example topology, POST to all placed replicas ready. */
static void bench_deploy(unsigned runs)
{
	uint64_t us[64];
	unsigned n = 0;
	char *spec = read_file("examples/service-topology.yaml");
	if (!spec || up("--nodes 4 --gpus-per-node 4")) {
		printf("BENCH runtime.deploy error=setup\n");
		free(spec);
		return;
	}
	for (unsigned r = 0; r < runs && r < 64; r++) {
		unsigned placed = 0, ready = 0;
		uint64_t t0 = now_us();
		int st = post("POST", "/v1/deploy", spec);
		if (st != 200) {
			fprintf(stderr, "bench: deploy answered %d\n", st);
			break;
		}
		while (now_us() - t0 < 10000000) {
			count_ready(&placed, &ready, NULL);
			if (placed && ready == placed)
				break;
			usleep(1000);
		}
		if (placed && ready == placed)
			us[n++] = now_us() - t0;
		/* undeploy and wait for every replica to be gone before the next run */
		post("DELETE", "/v1/services/parameter-server", NULL);
		post("DELETE", "/v1/services/worker-node", NULL);
		for (int i = 0; i < 5000; i++) {
			count_ready(&placed, &ready, NULL);
			if (!placed)
				break;
			usleep(1000);
		}
		usleep(300000); /* agents stop the old processes */
	}
	printf("# deploy: %s, 4 nodes x 4 GPUs, placed replicas: PS x3 + workers that fit\n",
	       "examples/service-topology.yaml");
	report("deploy_to_ready", us, n, 500);
	free(spec);
	down();
}

/* The init pid of a replica from a node's status.json, and its workload child. */
static int workload_pid(const char *node, const char *replica)
{
	char path[512], cmd[600], buf[64];
	snprintf(path, sizeof(path), "%s/%s/status.json", state_dir, node);
	char *text = read_file(path);
	json_t *j = NULL, *x;
	size_t i;
	int init = 0;
	if (text && !iod_json_parse(text, strlen(text), &j, NULL))
		json_array_foreach(json_object_get(j, "replicas"), i, x)
		{
			const char *n = "";
			iod_json_get_str(x, "name", &n);
			if (!strcmp(n, replica))
				init = (int)json_integer_value(json_object_get(x, "pid"));
		}
	json_decref(j);
	free(text);
	if (init <= 0)
		return 0;
	snprintf(cmd, sizeof(cmd), "pgrep -P %d | head -1", init);
	FILE *p = popen(cmd, "r");
	int pid = 0;
	if (p && fgets(buf, sizeof(buf), p))
		pid = atoi(buf);
	if (p)
		pclose(p);
	return pid;
}

static const char *replica_node(const char *name, char *buf, size_t len)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/replicas/%s", name);
	json_t *o = get(path);
	const char *n = "";
	bool ready = false;
	iod_json_get_str(json_object_get(o, "value"), "node", &n);
	iod_json_get_bool(json_object_get(o, "value"), "ready", &ready);
	snprintf(buf, len, "%s", ready ? n : "");
	json_decref(o);
	return buf;
}

/* crash: SIGKILL a replica's workload -> its endpoint unhealthy (10 ms checks). */
static void bench_crash(unsigned runs)
{
	const char *spec = "services:\n"
	                   "  - name: svc\n"
	                   "    type: stateless\n"
	                   "    replicas: 1\n"
	                   "    command: iod demo-worker --role parameter-server --params 64\n"
	                   "    health: {tcp: 1, interval: 10ms, timeout: 5ms, "
	                   "unhealthy_threshold: 1}\n";
	uint64_t us[64];
	unsigned n = 0, placed, ready;
	char node[64];
	if (up("--nodes 1 --gpus-per-node 0") || post("POST", "/v1/deploy", spec) != 200) {
		printf("BENCH runtime.crash error=setup\n");
		down();
		return;
	}
	int last = 0;
	for (unsigned r = 0; r < runs && r < 64; r++) {
		/* wait until healthy again, with a new process */
		int pid = 0;
		for (int i = 0; i < 10000; i++) {
			json_t *o = get("/v1/endpoints/svc-0");
			bool h = false;
			iod_json_get_bool(json_object_get(o, "value"), "healthy", &h);
			json_decref(o);
			count_ready(&placed, &ready, "svc-0");
			replica_node("svc-0", node, sizeof(node));
			pid = h && ready && node[0] ? workload_pid(node, "svc-0") : 0;
			if (pid > 0 && pid != last)
				break;
			usleep(2000);
		}
		if (pid <= 0 || pid == last)
			continue;
		last = pid;
		usleep(100000); /* a steady state: a few checks passed */
		uint64_t t0 = now_us();
		kill(pid, SIGKILL);
		while (now_us() - t0 < 5000000) {
			json_t *o = get("/v1/endpoints/svc-0");
			bool h = true;
			iod_json_get_bool(json_object_get(o, "value"), "healthy", &h);
			json_decref(o);
			if (!h) {
				us[n++] = now_us() - t0;
				break;
			}
		}
	}
	printf("# crash: 1 replica, tcp check every 10 ms, SIGKILL of its process\n");
	report("crash_to_endpoint_unhealthy", us, n, 50);
	down();
}

/* nodeloss: SIGSTOP an agent -> its stateless replica ready elsewhere (200 ms lease). */
static void bench_nodeloss(unsigned runs)
{
	const char *spec = "services:\n"
	                   "  - name: web\n"
	                   "    type: stateless\n"
	                   "    replicas: 1\n"
	                   "    resources: {gpu: 1}\n"
	                   "    command: iod demo-worker --role parameter-server --params 64\n"
	                   "    health: {tcp: 1, interval: 10ms, timeout: 5ms}\n";
	uint64_t us[64];
	unsigned n = 0;
	char node[64], path[512];
	if (up("--nodes 4 --gpus-per-node 1 --lease-ttl 200ms") ||
	    post("POST", "/v1/deploy", spec) != 200) {
		printf("BENCH runtime.nodeloss error=setup\n");
		down();
		return;
	}
	for (unsigned r = 0; r < runs && r < 64; r++) {
		for (int i = 0; i < 10000 && !replica_node("web-0", node, sizeof(node))[0]; i++)
			usleep(1000);
		if (!node[0])
			continue;
		snprintf(path, sizeof(path), "%s/%s.pid", state_dir, node);
		char *t = read_file(path);
		int apid = t ? atoi(t) : 0;
		free(t);
		if (apid <= 0)
			continue;
		char was[64];
		snprintf(was, sizeof(was), "%s", node);
		uint64_t t0 = now_us();
		kill(apid, SIGSTOP);
		bool moved = false;
		while (now_us() - t0 < 10000000) {
			replica_node("web-0", node, sizeof(node));
			if (node[0] && strcmp(node, was)) {
				moved = true;
				break;
			}
			usleep(1000);
		}
		if (moved)
			us[n++] = now_us() - t0;
		kill(apid, SIGCONT);
		/* let the node come back (re-register, stop its stale copy) */
		usleep(1500000);
	}
	printf("# nodeloss: 4 nodes x 1 GPU, 1 stateless replica, lease 200 ms, SIGSTOP of its "
	       "agent\n");
	report("nodeloss_to_running_elsewhere", us, n, 1000);
	down();
}

int main(void)
{
	const char *e = getenv("IOD_BENCH_RUNS"), *b = getenv("IOD_BENCH_IOD");
	unsigned runs = e ? (unsigned)atoi(e) : 10;
	struct iod_err err = {0};
	char tmpl[] = "/tmp/iod-bench-XXXXXX";

	if (b)
		snprintf(iod_bin, sizeof(iod_bin), "%s", b);
	if (access(iod_bin, X_OK)) {
		fprintf(stderr, "bench_runtime: %s not found: run `make` first\n", iod_bin);
		return 1;
	}
	if (!mkdtemp(tmpl))
		return 1;
	snprintf(state_dir, sizeof(state_dir), "%s/cluster", tmpl);
	iod_log_set_level(IOD_LOG_ERROR);
	if (iod_api_client_init(&cl, "127.0.0.1:7400,127.0.0.1:7401,127.0.0.1:7402", &err))
		return 1;
	cl.timeout_ms = 2000;
	cl.retry_ms = 3000;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	printf("# bench_runtime: runs=%u cpus=%ld iod=%s (local cluster on loopback; a shared, "
	       "noisy machine makes these upper bounds)\n",
	       runs, cpus, iod_bin);
	bench_deploy(runs);
	bench_crash(runs);
	bench_nodeloss(runs);
	iod_api_client_close(&cl);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
	return system(cmd) == 0 ? 0 : 1;
}
