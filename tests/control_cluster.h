/*
 * control_cluster.h: a local control plane of IOD_CC_N `iod server`
 * processes on loopback, for the programs that fork real servers: the
 * integration test (tests/integration/test_control_cluster.c) and the
 * control-plane benchmark (bench/bench_control.c). One place for the port
 * choice, the --peers list and the fork/exec of a server, so the test and the
 * benchmark start the same cluster.
 *
 * Header-only (static inline functions): the benchmark links no test harness. Shell
 * code for test programs only: it forks, binds and sleeps; never include it
 * from src/.
 */
#ifndef IOD_TESTS_CONTROL_CLUSTER_H
#define IOD_TESTS_CONTROL_CLUSTER_H

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IOD_CC_N 3        /* servers: the smallest cluster that survives a loss */
#define IOD_CC_ARGS_MAX 8 /* extra `iod server` arguments per start */

struct iod_cc {
	char bin[512];           /* iod binary */
	char dir[512];           /* data root: DIR/dN data, DIR/logN stderr */
	int raft_port[IOD_CC_N]; /* Raft ports */
	int api_port[IOD_CC_N];  /* API ports */
	char api[IOD_CC_N][32];  /* "127.0.0.1:port" */
	char peers[512];         /* --peers value */
	char servers[128];       /* comma list of the API addresses (the client's --server) */
	pid_t pid[IOD_CC_N];     /* running servers, 0 = none */
	bool stdout_null;        /* a server's stdout goes to /dev/null (else inherited) */
	const char *args[IOD_CC_ARGS_MAX + 1]; /* extra arguments of every start, NULL-ended */
	const char *extra; /* one more argument after them (e.g. for one restart), or NULL */
};

/* A field of /proc/PID/status in kB ("VmRSS:", "VmHWM:"), or -1. */
static inline long iod_cc_proc_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	long v = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field)))
			v = atol(line + strlen(field) + 1);
	if (f)
		fclose(f);
	return v;
}

/*
 * A port to give a server: below the kernel's ephemeral range, so that no
 * outgoing connection (the test's own clients, raft's peers) can be handed
 * the port between this check and the server's bind, which with bind(0)
 * ports happened about once in a hundred runs ("address in use").
 */
static inline int iod_cc_free_port(void)
{
	static unsigned next;
	unsigned lo = 32768, hi = 60999;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	const unsigned base = 10000, span = lo > base + 1000 ? lo - base : 1000;
	if (!next)
		next = (unsigned)getpid() * 7919u;
	for (unsigned tries = 0; tries < 1000; tries++) {
		int port = (int)(base + (next++ * 37u) % span);
		struct sockaddr_in a = {.sin_family = AF_INET,
		                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
		                        .sin_port = htons((uint16_t)port)};
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			return -1;
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		int ok = !bind(fd, (struct sockaddr *)&a, sizeof(a));
		close(fd);
		if (ok)
			return port;
	}
	return -1;
}

/* Choose the ports and build the address lists (c->bin and c->dir are the
 * caller's). -EADDRNOTAVAIL when no free port was found. */
static inline int iod_cc_ports(struct iod_cc *c)
{
	int at = 0;
	for (int i = 0; i < IOD_CC_N; i++) {
		c->raft_port[i] = iod_cc_free_port();
		c->api_port[i] = iod_cc_free_port();
		if (c->raft_port[i] < 0 || c->api_port[i] < 0)
			return -EADDRNOTAVAIL;
		snprintf(c->api[i], sizeof(c->api[i]), "127.0.0.1:%d", c->api_port[i]);
		at += snprintf(c->peers + at, sizeof(c->peers) - (size_t)at, "%s%d=127.0.0.1:%d@%s",
		               i ? "," : "", i + 1, c->raft_port[i], c->api[i]);
	}
	snprintf(c->servers, sizeof(c->servers), "%s,%s,%s", c->api[0], c->api[1], c->api[2]);
	return 0;
}

/* Fork server i (id i+1) with the cluster's --peers, c->args and c->extra;
 * 0 or -errno. */
static inline int iod_cc_start(struct iod_cc *c, int i)
{
	char id[8], dd[600], raft[32], log[600];
	char *argv[12 + IOD_CC_ARGS_MAX + 2] = {0};
	int n = 0;
	pid_t p;

	snprintf(id, sizeof(id), "%d", i + 1);
	snprintf(dd, sizeof(dd), "%s/d%d", c->dir, i + 1);
	snprintf(raft, sizeof(raft), "127.0.0.1:%d", c->raft_port[i]);
	snprintf(log, sizeof(log), "%s/log%d", c->dir, i + 1);
	const char *fixed[] = {c->bin,   "server", "--id",  id,        "--data-dir", dd,
	                       "--raft", raft,     "--api", c->api[i], "--peers",    c->peers};
	for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++)
		argv[n++] = (char *)fixed[k];
	for (int k = 0; k < IOD_CC_ARGS_MAX && c->args[k]; k++)
		argv[n++] = (char *)c->args[k];
	if (c->extra)
		argv[n++] = (char *)c->extra;
	p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		if (!freopen(log, "a", stderr))
			_exit(126);
		if (c->stdout_null && !freopen("/dev/null", "w", stdout))
			_exit(126);
		execv(c->bin, argv);
		_exit(127);
	}
	c->pid[i] = p;
	return 0;
}

/* Signal server i and reap it (nothing when it is not running). */
static inline void iod_cc_stop(struct iod_cc *c, int i, int sig)
{
	if (c->pid[i] <= 0)
		return;
	kill(c->pid[i], sig);
	waitpid(c->pid[i], NULL, 0);
	c->pid[i] = 0;
}

static inline void iod_cc_stop_all(struct iod_cc *c)
{
	for (int i = 0; i < IOD_CC_N; i++)
		iod_cc_stop(c, i, SIGKILL);
}

#endif
