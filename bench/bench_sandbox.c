/*
 * bench_sandbox.c: what the replica sandbox costs (make bench-sandbox, also
 * run by make bench-security).
 *
 *   sec.syscall        a syscall-heavy loop (getppid, read of /dev/zero,
 *                      write to /dev/null, stat, open+close, getrandom)
 *                      run as a replica inside the full sandbox (its uid, no
 *                      capabilities, no_new_privs, the default seccomp
 *                      allowlist, its own root and namespaces) against the
 *                      same loop run as a plain child process of the same
 *                      executor (--no-sandbox): overhead_pct, target <= 5
 *                      (the figure the system iod implements promises). The
 *                      two alternate, ROUNDS times each, and the medians
 *                      are compared, so the machine's load hits both alike.
 *   sec.sandbox_start  from iod_agent_exec_start to the first output of a
 *                      small workload (/bin/sh -c 'echo up'), sandboxed and
 *                      plain, p50/p99: the start-up cost per replica (the
 *                      deploy-to-ready target of 500 ms is make
 *                      bench-runtime's).
 * The loop is this program itself (argv[1] = "--syscall-loop"): the
 * executor runs "iod" as its self_exe, bound read-only into the sandbox.
 * Needs root for the sandbox; prints error=... otherwise.
 * Environment: IOD_BENCH_RUNS (rounds, default 7), IOD_BENCH_OPS (loop
 * iterations, default 200000).
 */
#include "iod/agent_run.h"
#include "bench.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The workload: ops iterations of six syscalls; prints ns per iteration. */
static int syscall_loop(long ops)
{
	char b[64];
	struct stat st;
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (zero < 0 || null < 0) {
		printf("error=open\n");
		return 1;
	}
	printf("up\n");
	fflush(stdout);
	uint64_t t0 = bench_now_ns();
	for (long i = 0; i < ops; i++) {
		if (syscall(SYS_getppid) < 0 || read(zero, b, sizeof(b)) != sizeof(b) ||
		    write(null, b, sizeof(b)) != sizeof(b) || stat("/", &st) ||
		    getrandom(b, 16, 0) != 16)
			return 2;
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 3;
		close(fd);
	}
	uint64_t dt = bench_now_ns() - t0;
	printf("ns_per_iter=%.1f\n", (double)dt / (double)ops);
	return 0;
}

static struct iod_agent_caps caps;

static void setup(struct iod_agent_exec_config *c, const char *dir, bool sandbox, const char *self)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->node, sizeof(c->node), "bench");
	snprintf(c->run_dir, sizeof(c->run_dir), "%s/%s", dir, sandbox ? "sandboxed" : "plain");
	snprintf(c->self_exe, sizeof(c->self_exe), "%s", self);
	snprintf(c->cgroup_prefix, sizeof(c->cgroup_prefix), "iod-bench/%d", (int)getpid());
	c->log_max_bytes = 1 << 20;
	c->log_files = 1;
	c->use_namespaces = sandbox;
	c->caps = &caps;
	c->uid_base = IOD_AGENT_UID_BASE + (IOD_AGENT_UID_BLOCKS - 1) * IOD_AGENT_UID_BLOCK;
}

/* The log's value of key (a double), or -1. */
static double log_value(const struct iod_agent_exec_config *c, const char *name, const char *key)
{
	char path[IOD_AGENT_PATH_MAX];
	struct iod_buf b;
	double v = -1;
	iod_agent_replica_path(c->run_dir, name, "log", path, sizeof(path));
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, path, 1 << 20, NULL) == 0 && b.data) {
		const char *p = strstr(b.data, key);
		if (p)
			v = atof(p + strlen(key));
	}
	iod_buf_free(&b);
	return v;
}

static bool log_has(const struct iod_agent_exec_config *c, const char *name, const char *what)
{
	char path[IOD_AGENT_PATH_MAX];
	struct iod_buf b;
	bool has = false;
	iod_agent_replica_path(c->run_dir, name, "log", path, sizeof(path));
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, path, 1 << 20, NULL) == 0 && b.data)
		has = strstr(b.data, what) != NULL;
	iod_buf_free(&b);
	return has;
}

/* Run one replica: the loop (ops > 0) or sh -c 'echo up' (ops 0);
 * *start_us: exec_start to its "up". */
static double run_once(const struct iod_agent_exec_config *c, const char *name, long ops,
                       uint64_t *start_us)
{
	struct iod_agent_replica r;
	struct iod_agent_proc p;
	struct iod_err e = {0};
	char n[32];
	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "%s", name);
	snprintf(r.service, sizeof(r.service), "bench");
	r.numa_node = -1;
	snprintf(n, sizeof(n), "%ld", ops);
	if (ops) {
		iod_agent_replica_add_arg(&r, "iod");
		iod_agent_replica_add_arg(&r, "--syscall-loop");
		iod_agent_replica_add_arg(&r, n);
	} else {
		iod_agent_replica_add_arg(&r, "/bin/sh");
		iod_agent_replica_add_arg(&r, "-c");
		iod_agent_replica_add_arg(&r, "echo up");
	}
	char log[IOD_AGENT_PATH_MAX];
	iod_agent_replica_path(c->run_dir, name, "log", log, sizeof(log));
	unlink(log);
	uint64_t t0 = bench_now_ns();
	if (iod_agent_exec_start(c, &r, &p, &e)) {
		printf("# start %s: %s\n", name, e.msg);
		return -1;
	}
	while (!log_has(c, name, "up\n") && bench_now_ns() - t0 < 10 * IOD_NS_PER_S)
		usleep(200);
	*start_us = (bench_now_ns() - t0) / IOD_NS_PER_US;
	int st;
	while (waitpid(p.pid, &st, 0) < 0 && errno == EINTR)
		;
	iod_agent_exec_cleanup(&p);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		printf("# %s: exit %d; log says:\n", name, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return -1;
	}
	return ops ? log_value(c, name, "ns_per_iter=") : 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--syscall-loop"))
		return syscall_loop(atol(argv[2]));
	const char *er = getenv("IOD_BENCH_RUNS"), *eo = getenv("IOD_BENCH_OPS");
	unsigned rounds = er ? (unsigned)atoi(er) : 7;
	long ops = eo ? atol(eo) : 200000;
	char self[IOD_AGENT_PATH_MAX], dir[] = "/tmp/iod-bench-sandbox-XXXXXX";
	if (rounds < 1 || rounds > 1000 || ops < 1000) {
		fprintf(stderr, "bench_sandbox: IOD_BENCH_RUNS 1..1000, IOD_BENCH_OPS >= 1000\n");
		return 2;
	}
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sl <= 0 || !mkdtemp(dir)) {
		printf("BENCH sec.syscall error=setup\n");
		return 1;
	}
	self[sl] = 0;
	chmod(dir, 0755);
	iod_agent_caps_probe(&caps);
	if (!caps.rootfs || !caps.seccomp) {
		printf("BENCH sec.syscall error=needs_root_namespaces_and_seccomp (%s)\n",
		       caps.warning);
		return 0;
	}
	struct iod_agent_exec_config sbx, plain;
	struct iod_agent_seccomp_store *store = NULL;
	struct iod_err e = {0};
	if (iod_agent_seccomp_store_new(&store, &e)) {
		printf("BENCH sec.syscall error=seccomp (%s)\n", e.msg);
		return 1;
	}
	setup(&sbx, dir, true, self);
	setup(&plain, dir, false, self);
	sbx.seccomp = store;
	double *in = calloc(rounds, sizeof(double)), *out = calloc(rounds, sizeof(double));
	uint64_t *s_in = calloc(rounds, sizeof(uint64_t)),
	         *s_out = calloc(rounds, sizeof(uint64_t));
	unsigned n = 0;
	printf("# %u rounds of %ld iterations (6 syscalls each), sandboxed and plain alternating; "
	       "load %s",
	       rounds, ops, "");
	fflush(stdout);
	system("cat /proc/loadavg");
	unsigned ns = 0;
	for (unsigned i = 0; i < rounds; i++) {
		uint64_t ignored;
		if (run_once(&plain, "start-plain-0", 0, &s_out[ns]) > 0 &&
		    run_once(&sbx, "start-boxed-0", 0, &s_in[ns]) > 0)
			ns++;
		double a = run_once(&plain, "plain-0", ops, &ignored);
		double b = run_once(&sbx, "boxed-0", ops, &ignored);
		if (a <= 0 || b <= 0) {
			printf("# round %u failed (plain %.1f, sandboxed %.1f ns)\n", i, a, b);
			continue;
		}
		out[n] = a;
		in[n] = b;
		n++;
	}
	if (!n) {
		printf("BENCH sec.syscall error=no_successful_run\n");
		return 1;
	}
	qsort(in, n, sizeof(double), bench_cmp_double);
	qsort(out, n, sizeof(double), bench_cmp_double);
	qsort(s_in, ns, sizeof(uint64_t), bench_cmp_u64);
	qsort(s_out, ns, sizeof(uint64_t), bench_cmp_u64);
	double pct = (in[n / 2] - out[n / 2]) / out[n / 2] * 100.0;
	printf(
	    "BENCH sec.syscall runs=%u ops=%ld sandboxed_ns=%.1f plain_ns=%.1f overhead_pct=%.1f "
	    "target_pct=5 met=%s\n",
	    n, ops, in[n / 2], out[n / 2], pct, pct <= 5.0 ? "yes" : "no");
	if (ns)
		printf("BENCH sec.sandbox_start runs=%u p50_ms=%.1f p99_ms=%.1f plain_p50_ms=%.1f "
		       "plain_p99_ms=%.1f\n",
		       ns, (double)s_in[ns / 2] / 1000.0, (double)s_in[(ns * 99) / 100] / 1000.0,
		       (double)s_out[ns / 2] / 1000.0, (double)s_out[(ns * 99) / 100] / 1000.0);
	else
		printf("BENCH sec.sandbox_start error=no_successful_run\n");
	printf("# load after: ");
	fflush(stdout);
	system("cat /proc/loadavg");
	char cmd[sizeof(dir) + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	system(cmd);
	iod_agent_cgroup_sweep(&caps, sbx.cgroup_prefix);
	iod_agent_cgroup_sweep(&caps, "iod-bench");
	iod_agent_seccomp_store_free(store);
	free(in);
	free(out);
	free(s_in);
	free(s_out);
	return 0;
}
