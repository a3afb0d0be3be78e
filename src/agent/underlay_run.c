/*
 * underlay_run.c: builds and sweeps `iod up --netns`'s underlay (shell).
 *
 * Runs the steps of underlay.c's plan with iproute2 and tc (no shell), and
 * writes sysctls from a child that joined the namespace (a /proc/sys/net
 * file is the opener's namespace's). The sweep is by name: every
 * namespace <prefix>-*, its processes killed first (a netns with a process
 * in it outlives `ip netns del`), and the root link <prefix>; so `iod down`
 * and a new `iod up` after a crash remove what a dead cluster left, with no
 * state of their own. It decides nothing.
 */
#include "iod/agent_run.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NETNS_DIR "/run/netns"

int iod_agent_netns_enter(const char *name, struct iod_err *e)
{
	char path[IOD_NAME_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", NETNS_DIR, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return iod_err_set(e, -errno, "%s: %s", path, strerror(errno));
	int rc = setns(fd, CLONE_NEWNET) ? -errno : 0;
	close(fd);
	if (rc)
		return iod_err_set(e, rc, "setns %s: %s", path, strerror(-rc));
	return 0;
}

/* Write "key=value" lines (keys as /proc/sys paths) inside namespace ns. */
static int sysctls(const char *ns, const char *text, char *err, size_t len)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct iod_err e = {0};
		if (iod_agent_netns_enter(ns, &e))
			_exit(2);
		char buf[IOD_UNDERLAY_STEP_BYTES];
		snprintf(buf, sizeof(buf), "%s", text);
		int bad = 0;
		for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l;
		     l = strtok_r(NULL, "\n", &save)) {
			char *eq = strchr(l, '='), path[256];
			if (!eq)
				continue;
			*eq = 0;
			snprintf(path, sizeof(path), "/proc/sys/%s", l);
			int fd = open(path, O_WRONLY | O_CLOEXEC);
			/* the L4 hash policy is the one that matters (ECMP spreading) */
			if (fd < 0 || write(fd, eq + 1, strlen(eq + 1)) < 0)
				bad |= strstr(l, "multipath") || strstr(l, "ip_forward") ? 1 : 0;
			if (fd >= 0)
				close(fd);
		}
		_exit(bad ? 3 : 0);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	snprintf(err, len, "cannot set sysctls in %s (needs IP forwarding and the L4 ECMP hash)",
	         ns);
	return -EIO;
}

/* Kill every process whose network namespace is the one at path. */
static void kill_inside(const char *path)
{
	struct stat ns;
	if (stat(path, &ns))
		return;
	for (int round = 0; round < 20; round++) {
		DIR *d = opendir("/proc");
		struct dirent *de;
		unsigned found = 0;
		while (d && (de = readdir(d))) {
			char p[64];
			struct stat st;
			int pid = atoi(de->d_name);
			if (pid <= 1 || pid == getpid())
				continue;
			snprintf(p, sizeof(p), "/proc/%d/ns/net", pid);
			if (stat(p, &st) || st.st_ino != ns.st_ino || st.st_dev != ns.st_dev)
				continue;
			kill(pid, SIGKILL);
			found++;
		}
		if (d)
			closedir(d);
		if (!found)
			return;
		usleep(20000); /* until they are gone (zombies keep the inode briefly) */
	}
}

uint32_t iod_agent_underlay_sweep(const char *prefix, const char *const *extra)
{
	char mine[32], err[256];
	uint32_t removed = 0;
	snprintf(mine, sizeof(mine), "%s-", prefix);
	for (int pass = 0; pass < 2; pass++) { /* replicas' namespaces, then the hosts' */
		DIR *d = opendir(NETNS_DIR);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			bool ours = false;
			if (pass == 1)
				ours = !strncmp(de->d_name, mine, strlen(mine));
			for (uint32_t i = 0; pass == 0 && extra && extra[i]; i++)
				ours |= !strncmp(de->d_name, extra[i], strlen(extra[i]));
			if (!ours)
				continue;
			char path[IOD_NAME_MAX + 32];
			snprintf(path, sizeof(path), "%s/%s", NETNS_DIR, de->d_name);
			kill_inside(path);
			const char *args[] = {"netns", "del", de->d_name, NULL};
			if (!iod_agent_run_cmd("ip", args, NULL, err, sizeof(err)))
				removed++;
		}
		if (d)
			closedir(d);
	}
	char link[64];
	snprintf(link, sizeof(link), "/sys/class/net/%s", prefix);
	if (access(link, F_OK) == 0) {
		const char *args[] = {"link", "del", prefix, NULL};
		iod_agent_run_cmd("ip", args, NULL, err, sizeof(err));
	}
	return removed;
}

int iod_agent_underlay_up(const struct iod_agent_underlay_cfg *c, struct iod_err *e)
{
	struct iod_agent_underlay_step *steps = calloc(IOD_UNDERLAY_STEPS_MAX, sizeof(*steps));
	uint32_t n = 0;
	int rc;
	char err[256];
	if (!steps)
		return iod_err_set(e, -ENOMEM, "out of memory");
	iod_agent_underlay_sweep(c->prefix, NULL);
	if ((rc = iod_agent_underlay_plan(c, steps, IOD_UNDERLAY_STEPS_MAX, &n, e))) {
		free(steps);
		return rc;
	}
	for (uint32_t i = 0; i < n && !rc; i++) {
		struct iod_agent_underlay_step *s = &steps[i];
		err[0] = 0;
		if (!strcmp(s->tool, "sysctl")) {
			rc = sysctls(s->ns, s->text, err, sizeof(err));
		} else {
			const char *root[] = {"-batch", "-", NULL};
			const char *in[] = {"-n", s->ns, "-batch", "-", NULL};
			rc = iod_agent_run_cmd(s->tool, s->ns[0] ? in : root, s->text, err,
			                       sizeof(err));
		}
		if (rc)
			iod_err_set(e, rc, "underlay: %s in %s: %s", s->tool,
			            s->ns[0] ? s->ns : "the root namespace", err);
	}
	free(steps);
	if (rc)
		iod_agent_underlay_sweep(c->prefix, NULL);
	return rc;
}
