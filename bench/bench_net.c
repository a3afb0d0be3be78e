/*
 * bench_net.c: replica to replica across nodes, iod's overlay against the
 * kernel path on the same netns underlay, in one run (`make bench-net`,
 * docs/network.md).
 *
 * bench/net.sh builds both paths on one `iod up --netns --nodes 2` cluster
 * and measures them (iperf3 TCP 1 and 8 streams, iperf3 UDP 64-byte
 * payloads, a fixed-rate UDP request/response, CPU during each iperf3 run);
 * this program reads its "RAW <path> <key> <value>" lines and prints
 *   net.path       one line per path (path=iod|kernel) with its figures;
 *   net.vs_kernel  the ratios iod / kernel: pps_ratio (64-byte packets per
 *                  CPU second, the per-core figure), raw_pps_ratio,
 *                  tcp1_ratio, tcp8_ratio, cpu_s_per_gb_ratio, and
 *                  iod_added_p99_us / iod_added_p50_us.
 * Needs root, iperf3 and python3; otherwise one line with error=.
 * Environment: IOD_BENCH_IOD (default build/iod), IOD_BENCH_SECONDS,
 * IOD_BENCH_RR_RATE (passed to net.sh).
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { P_IOD, P_KERNEL, P_N };

enum {
	K_TCP1_MBPS,
	K_TCP1_BYTES,
	K_TCP1_CPU,
	K_TCP8_MBPS,
	K_TCP8_BYTES,
	K_TCP8_CPU,
	K_UDP_PPS,
	K_UDP_PACKETS,
	K_UDP_CPU,
	K_P50,
	K_P99,
	K_SAMPLES,
	K_LOST,
	K_N
};

static const char *const keys[K_N] = {"tcp1_mbps",   "tcp1_bytes", "tcp1_cpu_s", "tcp8_mbps",
                                      "tcp8_bytes",  "tcp8_cpu_s", "udp64_pps",  "udp64_packets",
                                      "udp64_cpu_s", "rr_p50_us",  "rr_p99_us",  "rr_samples",
                                      "rr_lost"};

struct figures {
	double v[P_N][K_N];
	bool have[P_N][K_N];
	char load[64];
};

static void parse_line(struct figures *f, const char *line)
{
	char path[16], key[32], val[64];
	if (sscanf(line, "RAW %15s %31s %63s", path, key, val) != 3)
		return;
	if (!strcmp(path, "all") && !strcmp(key, "load")) {
		snprintf(f->load, sizeof(f->load), "%s", val);
		return;
	}
	int p = !strcmp(path, "iod") ? P_IOD : !strcmp(path, "kernel") ? P_KERNEL : -1;
	for (int k = 0; p >= 0 && k < K_N; k++)
		if (!strcmp(key, keys[k])) {
			f->v[p][k] = strtod(val, NULL);
			f->have[p][k] = true;
		}
}

static double div0(double a, double b)
{
	return b > 0 ? a / b : 0;
}

/* CPU seconds per GB moved, over both TCP runs. */
static double cpu_per_gb(const struct figures *f, int p)
{
	double gb = (f->v[p][K_TCP1_BYTES] + f->v[p][K_TCP8_BYTES]) / 1e9;
	return div0(f->v[p][K_TCP1_CPU] + f->v[p][K_TCP8_CPU], gb);
}

static double pps_per_cpu(const struct figures *f, int p)
{
	return div0(f->v[p][K_UDP_PACKETS], f->v[p][K_UDP_CPU]);
}

static void print(const struct figures *f)
{
	static const char *const names[P_N] = {"iod", "kernel"};
	for (int p = 0; p < P_N; p++)
		bench_line("BENCH net.path path=%s tcp1_mbps=%.1f tcp8_mbps=%.1f udp64_pps=%.0f "
		           "udp64_pps_per_cpu_s=%.0f rr_p50_us=%.1f rr_p99_us=%.1f rr_lost=%.0f "
		           "cpu_s_per_gb=%.2f",
		           names[p], f->v[p][K_TCP1_MBPS], f->v[p][K_TCP8_MBPS], f->v[p][K_UDP_PPS],
		           pps_per_cpu(f, p), f->v[p][K_P50], f->v[p][K_P99], f->v[p][K_LOST],
		           cpu_per_gb(f, p));
	bench_line(
	    "BENCH net.vs_kernel pps_ratio=%.3f raw_pps_ratio=%.3f tcp1_ratio=%.3f "
	    "tcp8_ratio=%.3f iod_added_p50_us=%.1f iod_added_p99_us=%.1f "
	    "cpu_s_per_gb_ratio=%.3f load=%s",
	    div0(pps_per_cpu(f, P_IOD), pps_per_cpu(f, P_KERNEL)),
	    div0(f->v[P_IOD][K_UDP_PPS], f->v[P_KERNEL][K_UDP_PPS]),
	    div0(f->v[P_IOD][K_TCP1_MBPS], f->v[P_KERNEL][K_TCP1_MBPS]),
	    div0(f->v[P_IOD][K_TCP8_MBPS], f->v[P_KERNEL][K_TCP8_MBPS]),
	    f->v[P_IOD][K_P50] - f->v[P_KERNEL][K_P50], f->v[P_IOD][K_P99] - f->v[P_KERNEL][K_P99],
	    div0(cpu_per_gb(f, P_IOD), cpu_per_gb(f, P_KERNEL)), f->load[0] ? f->load : "unknown");
}

int main(void)
{
	const char *iod = getenv("IOD_BENCH_IOD");
	iod = iod ? iod : "build/iod";
	if (geteuid() != 0) {
		bench_line("BENCH net.vs_kernel error=not_root");
		return 0;
	}
	if (system("command -v iperf3 >/dev/null && command -v python3 >/dev/null")) {
		bench_line("BENCH net.vs_kernel error=no_iperf3 (scripts/deps.sh installs it)");
		return 0;
	}
	if (strchr(iod, '\''))
		return 1; /* it goes into a shell command */
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "sh bench/net.sh '%s'", iod);
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	if (!p) {
		bench_line("BENCH net.vs_kernel error=popen");
		return 1;
	}
	struct figures *f = calloc(1, sizeof(*f));
	char line[512];
	while (f && fgets(line, sizeof(line), p))
		parse_line(f, line);
	int rc = pclose(p);
	bool all = f != NULL;
	for (int k = 0; all && k < K_N; k++)
		all = f->have[P_IOD][k] && f->have[P_KERNEL][k];
	if (!all) {
		bench_line("BENCH net.vs_kernel error=run_failed rc=%d", rc);
		free(f);
		return 1;
	}
	print(f);
	free(f);
	return 0;
}
