/*
 * bench_observe.c: what watching a cluster costs (`make bench-observe`).
 *   obs.agent   CPU of each agent's telemetry thread at 1 s sampling, on an
 *               `iod up` cluster with the demo training topology running
 *               (iod_telemetry_cpu_seconds_total over wall time; target <= 1%
 *               of a core);
 *   obs.scrape  latency of GET /metrics on every agent and server of a
 *               64-node `iod up` cluster, several rounds (p50/p99/max);
 *   obs.top     one `iod top --once` refresh against that cluster;
 *   obs.web     the live view at 1,000 nodes x 8 GPUs (a synthetic control
 *               plane, bench/observe_web.py): first paint in headless Chromium
 *               and update latency from a replica failing in the API to it
 *               drawn red (targets 1 s and 200 ms); with
 *               IOD_BENCH_BASELINE=OLD_IOD (say, main's build) the same for
 *               that binary first (binary=baseline), in the same run.
 * Prints BENCH lines. Environment: IOD_BENCH_IOD (default build/iod),
 * IOD_BENCH_NODES (scrape cluster, default 64), IOD_BENCH_SECONDS (agent
 * window, default 20), IOD_BENCH_ONLY=web (only obs.web).
 */
#include "iod/api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char iod_bin[512] = "build/iod";
static char state_dir[256];

static uint64_t now_us(void)
{
	return iod_clock_now_ns() / IOD_NS_PER_US;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* GET addr path; the body (malloc'd) or NULL. */
static char *get(const char *addr, const char *path, uint64_t *us)
{
	struct iod_http_conn fd = {0};
	struct iod_api_response r;
	struct iod_err e = {0};
	uint64_t t0 = now_us();
	if (iod_api_http_once(&fd, addr, "GET", path, NULL, NULL, 0, 5000, &r, &e))
		return NULL;
	if (us)
		*us = now_us() - t0;
	iod_http_conn_close(&fd);
	char *b = r.status == 200 && r.body ? strdup(r.body) : NULL;
	iod_api_response_free(&r);
	return b;
}

/* The value of a sample line starting with name in Prometheus text, or NAN. */
static double sample(const char *text, const char *name)
{
	const char *p = text;
	size_t n = strlen(name);
	while (p && *p) {
		if (!strncmp(p, name, n) && (p[n] == '{' || p[n] == ' ')) {
			const char *sp = strchr(p, ' ');
			const char *close = strchr(p, '}');
			if (close && (!sp || close < strchr(p, '\n')))
				sp = strchr(close, ' ');
			return sp ? strtod(sp + 1, NULL) : NAN;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NAN;
}

static int up(int nodes, int api, int tel)
{
	snprintf(state_dir, sizeof(state_dir), "/tmp/iod-bench-observe-%d", (int)getpid());
	return sh(
	    "IOD_STATE_DIR=%s %s up --nodes %d --gpus-per-node 4 --api-port %d --raft-port %d "
	    "--no-mesh --telemetry-port %d --lease-ttl 5s --election-timeout 2s "
	    "--heartbeat 200ms >/dev/null 2>&1",
	    state_dir, iod_bin, nodes, api, api - 100, tel);
}

static void down(void)
{
	sh("IOD_STATE_DIR=%s %s down --grace 5s >/dev/null 2>&1; rm -rf %s", state_dir, iod_bin,
	   state_dir);
}

static void bench_agent(void)
{
	const int nodes = 4, api = 27400, tel = 27600;
	const char *s = getenv("IOD_BENCH_SECONDS");
	int secs = s ? atoi(s) : 20;
	if (up(nodes, api, tel)) {
		printf("BENCH obs.agent error=iod_up\n");
		down();
		return;
	}
	sh("IOD_SERVER=127.0.0.1:%d %s deploy -f examples/service-topology.yaml >/dev/null 2>&1",
	   api, iod_bin);
	sleep(3);
	double cpu0[8], cpu1[8], n0[8], n1[8];
	char addr[32];
	uint64_t t0 = now_us();
	for (int i = 0; i < nodes; i++) {
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", tel + i);
		char *m = get(addr, "/metrics", NULL);
		cpu0[i] = m ? sample(m, "iod_telemetry_cpu_seconds_total") : NAN;
		n0[i] = m ? sample(m, "iod_telemetry_samples_total") : NAN;
		free(m);
	}
	sleep((unsigned)secs);
	double wall = (double)(now_us() - t0) / 1e6, sum = 0, max = 0, samples = 0;
	int ok = 0;
	for (int i = 0; i < nodes; i++) {
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", tel + i);
		char *m = get(addr, "/metrics", NULL);
		cpu1[i] = m ? sample(m, "iod_telemetry_cpu_seconds_total") : NAN;
		n1[i] = m ? sample(m, "iod_telemetry_samples_total") : NAN;
		free(m);
		if (isnan(cpu0[i]) || isnan(cpu1[i]))
			continue;
		double pct = (cpu1[i] - cpu0[i]) / wall * 100.0;
		sum += pct;
		max = pct > max ? pct : max;
		samples += n1[i] - n0[i];
		ok++;
	}
	down();
	if (!ok) {
		printf("BENCH obs.agent error=no_metrics\n");
		return;
	}
	printf("BENCH obs.agent nodes=%d interval_ms=1000 window_s=%.0f samples_per_node=%.0f "
	       "cpu_pct=%.3f cpu_pct_max=%.3f target_pct=1 met=%s\n",
	       ok, wall, samples / ok, sum / ok, max, max <= 1.0 ? "yes" : "no");
}

static void bench_scrape(void)
{
	const char *s = getenv("IOD_BENCH_NODES");
	int nodes = s ? atoi(s) : 64, api = 28400, tel = 28600, rounds = 5;
	if (nodes < 1 || nodes > 64)
		nodes = 64;
	if (up(nodes, api, tel)) {
		printf("BENCH obs.scrape nodes=%d error=iod_up\n", nodes);
		down();
		return;
	}
	sh("IOD_SERVER=127.0.0.1:%d %s deploy -f examples/service-topology.yaml >/dev/null 2>&1",
	   api, iod_bin);
	sleep(3);
	uint64_t *lat = calloc((size_t)(nodes + 3) * (size_t)rounds, sizeof(*lat));
	size_t n = 0, bytes = 0, failed = 0;
	char addr[32];
	for (int r = 0; lat && r < rounds; r++) {
		for (int i = 0; i < nodes + 3; i++) {
			snprintf(addr, sizeof(addr), "127.0.0.1:%d",
			         i < nodes ? tel + i : api + i - nodes);
			uint64_t us = 0;
			char *m = get(addr, "/metrics", &us);
			if (!m) {
				failed++;
				continue;
			}
			bytes += strlen(m);
			free(m);
			lat[n++] = us;
		}
		sleep(1);
	}
	/* one `iod top --once` refresh against the same cluster */
	uint64_t t0 = now_us();
	int top_rc = sh("IOD_SERVER=127.0.0.1:%d %s top --once >/dev/null 2>&1", api, iod_bin);
	uint64_t top_us = now_us() - t0;
	down();
	if (!n) {
		printf("BENCH obs.scrape nodes=%d error=no_answers\n", nodes);
		free(lat);
		return;
	}
	qsort(lat, n, sizeof(*lat), cmp_u64);
	printf("BENCH obs.scrape nodes=%d endpoints=%d scrapes=%zu failed=%zu p50_ms=%.2f "
	       "p99_ms=%.2f max_ms=%.2f bytes_mean=%zu\n",
	       nodes, nodes + 3, n, failed, lat[n / 2] / 1e3, lat[(n * 99) / 100] / 1e3,
	       lat[n - 1] / 1e3, bytes / n);
	printf("BENCH obs.top nodes=%d once_ms=%.1f ok=%s\n", nodes, top_us / 1e3,
	       top_rc == 0 ? "yes" : "no");
	free(lat);
}

static void bench_web(void)
{
	if (access("/usr/bin/chromium", X_OK) || access("/usr/bin/chromedriver", X_OK) ||
	    sh("/usr/bin/python3 -c 'import selenium' 2>/dev/null")) {
		printf("BENCH obs.web nodes=1000 error=no_chromium_or_selenium\n");
		return;
	}
	const char *base = getenv("IOD_BENCH_BASELINE");
	fflush(stdout);
	if (base && strchr(base, '\''))
		base = NULL; /* it goes into a shell command */
	if (sh("/usr/bin/python3 bench/observe_web.py %s 1000%s%s%s", iod_bin, base ? " '" : "",
	       base ? base : "", base ? "'" : ""))
		printf("BENCH obs.web nodes=1000 error=run_failed\n");
}

int main(void)
{
	const char *b = getenv("IOD_BENCH_IOD");
	if (b)
		snprintf(iod_bin, sizeof(iod_bin), "%s", b);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *only = getenv("IOD_BENCH_ONLY");
	if (!only || strcmp(only, "web")) {
		bench_agent();
		bench_scrape();
	}
	bench_web();
	return 0;
}
