/*
 * cmd_down.c: `iod down`: stop the local cluster `iod up` started: the node
 * agents first (each stops its replicas, then leaves), then the servers;
 * SIGKILL for what has not exited after a grace period, so that nothing is
 * left running. Thin shell over the pid files in the state dir.
 */
#include "cli.h"
#include "iod/agent.h"
#include "iod/agent_run.h"

#include <dirent.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void iod_up_state_dir(char *buf, size_t len);

static void usage(FILE *f)
{
	fprintf(f, "usage: iod down [--state-dir DIR] [--grace DUR]\n\n"
	           "Stop the local cluster started by `iod up`: node agents first (their replicas\n"
	           "stop with them), then the control-plane servers. What has not exited after\n"
	           "--grace (default 10s) is killed. Leaves nothing running.\n");
}

static int read_pid(const char *path)
{
	FILE *f = fopen(path, "r");
	int pid = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	return pid;
}

/*
 * Is pid still the process `iod up` started? A pid file outlives its process
 * and the pid may have been reused by anything: only a process whose command
 * line names this state dir (its --data-dir is under it) is ours to signal.
 */
bool iod_up_pid_is_ours(int pid, const char *dir);
bool iod_up_pid_is_ours(int pid, const char *dir)
{
	char path[64], buf[4096];
	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[n] = 0;
	return strstr(buf, dir) != NULL;
}

/* Signal every process named by DIR/<prefix>*.pid; wait; kill stragglers. */
static unsigned stop_group(const char *dir, const char *prefix, uint64_t grace_ns)
{
	int pids[128];
	char files[128][IOD_AGENT_PATH_MAX + 32];
	unsigned n = 0, stopped = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return 0;
	while ((de = readdir(d)) && n < 128) {
		size_t l = strlen(de->d_name);
		if (strncmp(de->d_name, prefix, strlen(prefix)) || l < 5 ||
		    strcmp(de->d_name + l - 4, ".pid"))
			continue;
		snprintf(files[n], sizeof(files[n]), "%s/%s", dir, de->d_name);
		pids[n] = read_pid(files[n]);
		if (!iod_up_pid_is_ours(pids[n], dir))
			pids[n] = 0; /* gone, or the pid now belongs to someone else */
		if (pids[n] > 0 && kill(pids[n], SIGTERM) == 0)
			stopped++;
		n++;
	}
	closedir(d);
	uint64_t end = iod_clock_now_ns() + grace_ns;
	for (;;) {
		bool any = false;
		for (unsigned i = 0; i < n; i++)
			any |= pids[i] > 0 && iod_up_pid_is_ours(pids[i], dir);
		if (!any || iod_clock_now_ns() >= end)
			break;
		usleep(20000);
	}
	for (unsigned i = 0; i < n; i++) {
		if (pids[i] > 0 && iod_up_pid_is_ours(pids[i], dir)) {
			fprintf(stderr, "iod down: %s (pid %d) did not stop in time: killing it\n",
			        files[i], pids[i]);
			kill(pids[i], SIGKILL);
		}
		unlink(files[i]);
	}
	return stopped;
}

/*
 * `iod up --netns`'s underlay of this state dir: its namespaces (named
 * after a hash of the dir), the replicas' namespaces of its nodes and the
 * processes in any of them. By name, so it also cleans what a crashed
 * cluster left. Returns the namespaces removed.
 */
uint32_t iod_up_netns_sweep(const char *dir);
uint32_t iod_up_netns_sweep(const char *dir)
{
	char prefix[16], path[64];
	static char extra_buf[IOD_UP_NODES_MAX][24];
	const char *extra[IOD_UP_NODES_MAX + 1];
	iod_agent_underlay_prefix(dir, prefix, sizeof(prefix));
	snprintf(path, sizeof(path), "/run/netns/%s-l1", prefix);
	bool ours = access(path, F_OK) == 0;
	snprintf(path, sizeof(path), "/sys/class/net/%s", prefix);
	ours |= access(path, F_OK) == 0;
	if (!ours)
		return 0;
	for (int i = 0; i < IOD_UP_NODES_MAX; i++) {
		char node[32];
		snprintf(node, sizeof(node), "node-%d", i + 1);
		snprintf(extra_buf[i], sizeof(extra_buf[i]), "iod-%08x-",
		         (uint32_t)iod_hash_str(node));
		extra[i] = extra_buf[i];
	}
	extra[IOD_UP_NODES_MAX] = NULL;
	return iod_agent_underlay_sweep(prefix, extra);
}

int cmd_down(int argc, char **argv)
{
	static const struct option opts[] = {{"state-dir", required_argument, 0, 'd'},
	                                     {"grace", required_argument, 0, 'g'},
	                                     {"help", no_argument, 0, 'h'},
	                                     {0, 0, 0, 0}};
	char dir[IOD_AGENT_PATH_MAX];
	uint64_t grace = 10 * IOD_NS_PER_S;
	struct iod_err e = {0};
	int o;

	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	iod_up_state_dir(dir, sizeof(dir));
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'd': snprintf(dir, sizeof(dir), "%s", optarg); break;
		case 'g':
			if (iod_parse_duration(optarg, &grace, &e))
				return iod_cli_fail("down", IOD_EXIT_INVALID, "--grace %s: %s",
				                    optarg, e.msg);
			break;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("down", IOD_EXIT_INVALID, "unexpected argument %s",
		                    argv[optind]);
	char cwd[IOD_AGENT_PATH_MAX];
	/* absolute as `iod up` made it: its processes name it, its underlay's
	 * name is its hash */
	if (dir[0] != '/' && getcwd(cwd, sizeof(cwd)) &&
	    strlen(cwd) + strlen(dir) + 2 < sizeof(dir)) {
		memmove(dir + strlen(cwd) + 1, dir, strlen(dir) + 1);
		memcpy(dir, cwd, strlen(cwd));
		dir[strlen(cwd)] = '/';
	}
	unsigned agents = stop_group(dir, "node-", grace);
	unsigned servers = stop_group(dir, "server-", grace);
	uint32_t swept = iod_up_netns_sweep(dir);
	if (swept)
		printf("removed the underlay: %u network namespaces\n", swept);
	if (!agents && !servers) {
		printf("no cluster running from %s\n", dir);
		return 0;
	}
	printf("stopped %u node agents and %u servers (state kept in %s)\n", agents, servers, dir);
	return 0;
}
