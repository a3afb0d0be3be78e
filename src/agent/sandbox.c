/*
 * sandbox.c: the executor: runs one replica as a child process in a
 * sandbox of its own, without docker or crun (they do not run on
 * hybrid-cgroup hosts), which is meant to be a boundary (docs/security.md).
 *
 * The agent forks a helper, which clone()s the replica's init into new
 * PID, mount, UTS and IPC namespaces (and a network namespace for
 * network: none) as a child of the agent (CLONE_PARENT), so that nothing
 * after the agent's own fork runs in a copy of a multi-threaded process.
 * Before letting the init go on, the agent puts it in the replica's
 * cgroups (v2 when its controllers are available, else the v1 memory and
 * cpu hierarchies) so that everything it forks is limited. The init (PID 1
 * of the namespace, root):
 *   - joins the replica's network namespace (netns.c) when it has one, or
 *     brings up loopback in its own (network: none);
 *   - unshares a cgroup namespace (the replica sees its own cgroup as the
 *     root: it cannot name, let alone raise, its limits);
 *   - sets the hostname to the replica's name;
 *   - builds the replica's root and pivot_roots into it (rootfs.c);
 *   - closes every descriptor it inherited from the agent;
 *   - forks the workload, which takes CPU affinity, NUMA policy, GPU
 *     visibility and identity, then its uid, capabilities, user namespace,
 *     no_new_privs and seccomp filter (jail.c), and execs the program;
 *   - forwards signals to it, writes its output to rotating log files
 *     (through a descriptor of the replica directory opened before
 *     pivot_root) and exits with its status (128 + signal when killed).
 * A hardening the node cannot give (no root, no cgroup namespaces, no
 * seccomp...) fails the start with what is missing, unless the replica's
 * spec says best_effort: then it runs without it and the warning says so.
 *
 * Shell code: it forks, mounts, writes cgroup files. It decides nothing about
 * when to start or stop: the reconciler does.
 */
#include "iod/agent_run.h"
#include "iod/ckpt.h"
#include "iod/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MPOL_BIND_ 2 /* <linux/mempolicy.h> MPOL_BIND */

/* ---- paths ---------------------------------------------------------------- */

int iod_agent_replica_path(const char *run_dir, const char *name, const char *what, char *buf,
                           size_t len)
{
	int n;
	/* the cluster's one name rule: no '/', no leading '.', so never a path
	 * outside <run_dir>/replicas (a manifest's "../../x") */
	if (!iod_state_name_valid(name))
		return -EINVAL;
	if (!strcmp(what, "dir"))
		n = snprintf(buf, len, "%s/replicas/%s", run_dir, name);
	else
		n = snprintf(buf, len, "%s/replicas/%s/%s", run_dir, name, what);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int mkdir_p(const char *path)
{
	char tmp[IOD_AGENT_PATH_MAX * 2];
	if (iod_strlcpy(tmp, path, sizeof(tmp)))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, text, strlen(text));
	int rc = w == (ssize_t)strlen(text) ? 0 : -errno;
	close(fd);
	return rc ? rc : 0;
}

/* ---- capabilities ----------------------------------------------------------- */

/* Can a child do this? (probed in a throwaway fork, whose changes die with it) */
static bool child_can(int (*fn)(int), int arg)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(fn(arg) == 0 ? 0 : 1);
	if (pid < 0)
		return false;
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int try_unshare(int flag)
{
	return unshare(flag);
}

/* A user namespace as a replica makes it: after dropping to an ordinary uid. */
static int try_userns(int unused)
{
	IOD_UNUSED(unused);
	if (geteuid() == 0 && (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
	                       setresuid(65534, 65534, 65534)))
		return -1;
	return unshare(CLONE_NEWUSER);
}

/* A seccomp filter (allow everything) loads after no_new_privs. */
static int try_seccomp(int unused)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {.len = 1, .filter = &allow};
	IOD_UNUSED(unused);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

static bool dir_writable(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && access(path, W_OK) == 0;
}

static bool file_has_word(const char *path, const char *word)
{
	char buf[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
		if (!strcmp(t, word))
			return true;
	return false;
}

static void warn_add(struct iod_agent_caps *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warn_add(struct iod_agent_caps *c, const char *fmt, ...)
{
	size_t l = strlen(c->warning);
	va_list ap;
	if (l + 3 >= sizeof(c->warning))
		return;
	if (l)
		l += (size_t)snprintf(c->warning + l, sizeof(c->warning) - l, "; ");
	va_start(ap, fmt);
	vsnprintf(c->warning + l, sizeof(c->warning) - l, fmt, ap);
	va_end(ap);
}

void iod_agent_caps_probe(struct iod_agent_caps *c)
{
	memset(c, 0, sizeof(*c));
	c->root = geteuid() == 0;
	c->ns_pid = child_can(try_unshare, CLONE_NEWPID);
	c->ns_mount = child_can(try_unshare, CLONE_NEWNS);
	c->ns_uts = child_can(try_unshare, CLONE_NEWUTS);
	c->ns_ipc = child_can(try_unshare, CLONE_NEWIPC);
	c->ns_net = child_can(try_unshare, CLONE_NEWNET);
	c->ns_cgroup = child_can(try_unshare, CLONE_NEWCGROUP);
	c->ns_user = child_can(try_userns, 0);
	c->seccomp = child_can(try_seccomp, 0);
	c->rootfs = c->root && c->ns_mount && c->ns_pid;

	/* cgroup v2: a pure v2 mount with the memory and cpu controllers. */
	if (file_has_word("/sys/fs/cgroup/cgroup.controllers", "memory") &&
	    file_has_word("/sys/fs/cgroup/cgroup.controllers", "cpu") &&
	    dir_writable("/sys/fs/cgroup")) {
		c->cgroup_version = 2;
		snprintf(c->cgroup_mem, sizeof(c->cgroup_mem), "/sys/fs/cgroup");
		snprintf(c->cgroup_cpu, sizeof(c->cgroup_cpu), "/sys/fs/cgroup");
	} else if (dir_writable("/sys/fs/cgroup/memory") &&
	           (dir_writable("/sys/fs/cgroup/cpu") ||
	            dir_writable("/sys/fs/cgroup/cpu,cpuacct"))) {
		/* hybrid or v1: the v1 controllers (v2's unified tree has none here) */
		c->cgroup_version = 1;
		snprintf(c->cgroup_mem, sizeof(c->cgroup_mem), "/sys/fs/cgroup/memory");
		snprintf(c->cgroup_cpu, sizeof(c->cgroup_cpu), "%s",
		         dir_writable("/sys/fs/cgroup/cpu") ? "/sys/fs/cgroup/cpu"
		                                            : "/sys/fs/cgroup/cpu,cpuacct");
	} else {
		warn_add(c,
		         "no writable cgroup hierarchy with memory and cpu controllers (neither "
		         "cgroup v2 at /sys/fs/cgroup nor v1 at /sys/fs/cgroup/{memory,cpu}): "
		         "replicas run WITHOUT cpu and memory limits; run the agent as root on a "
		         "host with cgroups mounted");
	}
	if (!c->ns_pid || !c->ns_mount || !c->ns_uts || !c->ns_ipc)
		warn_add(c, "namespaces not permitted:%s%s%s%s", c->ns_pid ? "" : " pid",
		         c->ns_mount ? "" : " mount", c->ns_uts ? "" : " uts",
		         c->ns_ipc ? "" : " ipc");
	if (!c->root)
		warn_add(c, "not root: replicas cannot get uids or roots of their own");
	if (!c->ns_cgroup)
		warn_add(c, "no cgroup namespaces");
	if (!c->seccomp)
		warn_add(c, "no seccomp filters");
	if (!c->ns_user)
		warn_add(c, "no user namespaces for ordinary uids (replicas run without one)");
	if (c->warning[0])
		warn_add(c, "replicas that need what is missing refuse to start unless their spec "
		            "says sandbox.best_effort");
}

/* ---- cgroups ------------------------------------------------------------------ */

static int cgroup_make(const struct iod_agent_exec_config *c, const struct iod_agent_replica *r,
                       struct iod_agent_proc *p, struct iod_err *e)
{
	const struct iod_agent_caps *caps = c->caps;
	char val[64], file[IOD_AGENT_PATH_MAX + 32];
	int rc;

	if (!caps || !caps->cgroup_version)
		return 0;
	snprintf(p->cgroup_mem, sizeof(p->cgroup_mem), "%s/%s/%s", caps->cgroup_mem,
	         c->cgroup_prefix, r->name);
	if ((rc = mkdir_p(p->cgroup_mem)))
		return iod_err_set(e, rc, "cgroup %s: %s", p->cgroup_mem, strerror(-rc));
	if (caps->cgroup_version == 2) {
		/* enable the controllers down the path (root to prefix) */
		char path[IOD_AGENT_PATH_MAX];
		snprintf(path, sizeof(path), "%s", caps->cgroup_mem);
		const char *rest = c->cgroup_prefix;
		for (;;) {
			snprintf(file, sizeof(file), "%s/cgroup.subtree_control", path);
			write_file(file, "+memory +cpu");
			if (!*rest)
				break;
			const char *sl = strchr(rest, '/');
			size_t n = sl ? (size_t)(sl - rest) : strlen(rest);
			size_t l = strlen(path);
			snprintf(path + l, sizeof(path) - l, "/%.*s", (int)n, rest);
			rest += n + (sl ? 1 : 0);
			if (!sl)
				rest = "";
		}
		snprintf(p->cgroup_cpu, sizeof(p->cgroup_cpu), "%s", p->cgroup_mem);
		if (r->mem_bytes) {
			snprintf(val, sizeof(val), "%llu", (unsigned long long)r->mem_bytes);
			snprintf(file, sizeof(file), "%s/memory.max", p->cgroup_mem);
			if ((rc = write_file(file, val)))
				return iod_err_set(e, rc, "%s: %s", file, strerror(-rc));
		}
		if (r->cpu_millis) {
			snprintf(val, sizeof(val), "%u 100000", r->cpu_millis * 100);
			snprintf(file, sizeof(file), "%s/cpu.max", p->cgroup_cpu);
			if ((rc = write_file(file, val)))
				return iod_err_set(e, rc, "%s: %s", file, strerror(-rc));
		}
		return 0;
	}
	snprintf(p->cgroup_cpu, sizeof(p->cgroup_cpu), "%s/%s/%s", caps->cgroup_cpu,
	         c->cgroup_prefix, r->name);
	if ((rc = mkdir_p(p->cgroup_cpu)))
		return iod_err_set(e, rc, "cgroup %s: %s", p->cgroup_cpu, strerror(-rc));
	/* -1 = unlimited: a replica recreated without a limit loses the old one */
	snprintf(val, sizeof(val), "%lld", r->mem_bytes ? (long long)r->mem_bytes : -1ll);
	snprintf(file, sizeof(file), "%s/memory.limit_in_bytes", p->cgroup_mem);
	if ((rc = write_file(file, val)))
		return iod_err_set(e, rc, "%s: %s", file, strerror(-rc));
	snprintf(file, sizeof(file), "%s/cpu.cfs_period_us", p->cgroup_cpu);
	write_file(file, "100000");
	snprintf(val, sizeof(val), "%lld", r->cpu_millis ? (long long)r->cpu_millis * 100 : -1ll);
	snprintf(file, sizeof(file), "%s/cpu.cfs_quota_us", p->cgroup_cpu);
	if ((rc = write_file(file, val)))
		return iod_err_set(e, rc, "%s: %s", file, strerror(-rc));
	return 0;
}

static int cgroup_attach(const struct iod_agent_proc *p, pid_t pid, struct iod_err *e)
{
	char file[IOD_AGENT_PATH_MAX + 32], val[32];
	int rc;
	snprintf(val, sizeof(val), "%d", (int)pid);
	if (p->cgroup_mem[0]) {
		snprintf(file, sizeof(file), "%s/cgroup.procs", p->cgroup_mem);
		if ((rc = write_file(file, val)))
			return iod_err_set(e, rc, "%s: %s", file, strerror(-rc));
	}
	if (p->cgroup_cpu[0] && strcmp(p->cgroup_cpu, p->cgroup_mem)) {
		snprintf(file, sizeof(file), "%s/cgroup.procs", p->cgroup_cpu);
		if ((rc = write_file(file, val)))
			return iod_err_set(e, rc, "%s: %s", file, strerror(-rc));
	}
	return 0;
}

void iod_agent_exec_cleanup(struct iod_agent_proc *p)
{
	/* rmdir only succeeds once every process left: retry briefly */
	for (int i = 0; i < 50; i++) {
		bool left = false;
		if (p->cgroup_mem[0] && rmdir(p->cgroup_mem) && errno == EBUSY)
			left = true;
		if (p->cgroup_cpu[0] && strcmp(p->cgroup_cpu, p->cgroup_mem) &&
		    rmdir(p->cgroup_cpu) && errno == EBUSY)
			left = true;
		if (!left)
			break;
		usleep(1000);
	}
	p->cgroup_mem[0] = p->cgroup_cpu[0] = 0;
}

void iod_agent_cgroup_sweep(const struct iod_agent_caps *caps, const char *prefix)
{
	const char *roots[2];
	char dir[IOD_AGENT_PATH_MAX * 2], sub[IOD_AGENT_PATH_MAX * 3];
	if (!caps || !caps->cgroup_version)
		return;
	roots[0] = caps->cgroup_mem;
	roots[1] = strcmp(caps->cgroup_cpu, caps->cgroup_mem) ? caps->cgroup_cpu : NULL;
	for (int i = 0; i < 2; i++) {
		if (!roots[i])
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", roots[i], prefix);
		DIR *d = opendir(dir);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
			rmdir(sub); /* fails, and stays, while a process is in it */
		}
		if (d)
			closedir(d);
		/* the prefix and its parents, as far as they are empty */
		while (strlen(dir) > strlen(roots[i]) && rmdir(dir) == 0) {
			char *sl = strrchr(dir, '/');
			if (!sl)
				break;
			*sl = 0;
		}
	}
}

/* ---- placement inside the sandbox ------------------------------------------------ */

int iod_agent_sandbox_apply_affinity(const struct iod_agent_replica *r, struct iod_err *e)
{
	cpu_set_t set, online;
	if (iod_bitmap_empty(&r->cpus))
		return 0;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(online), &online))
		CPU_ZERO(&online);
	for (int i = iod_bitmap_next(&r->cpus, 0); i >= 0 && i < CPU_SETSIZE;
	     i = iod_bitmap_next(&r->cpus, (unsigned)i + 1))
		if (CPU_ISSET(i, &online))
			CPU_SET(i, &set);
	if (!CPU_COUNT(&set)) {
		char l[128];
		iod_bitmap_format(&r->cpus, l, sizeof(l));
		return iod_err_set(e, -ENODEV,
		                   "placed CPUs %s are not on this machine (simulated node?): "
		                   "affinity left as it was",
		                   l);
	}
	if (sched_setaffinity(0, sizeof(set), &set))
		return iod_err_set(e, -errno, "sched_setaffinity: %s", strerror(errno));
	return 0;
}

int iod_agent_sandbox_apply_mempolicy(int32_t numa_node, struct iod_err *e)
{
	unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {0};
	char path[64];
	if (numa_node < 0)
		return 0;
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", numa_node);
	if (access(path, F_OK))
		return iod_err_set(e, -ENODEV,
		                   "placed NUMA node %d is not on this machine (simulated node?): "
		                   "memory policy left as it was",
		                   numa_node);
	mask[(unsigned)numa_node / (8 * sizeof(unsigned long))] |=
	    1ul << ((unsigned)numa_node % (8 * sizeof(unsigned long)));
	if (syscall(SYS_set_mempolicy, MPOL_BIND_, mask, (unsigned long)1024 + 1))
		return iod_err_set(e, -errno, "set_mempolicy(MPOL_BIND, node %d): %s", numa_node,
		                   strerror(errno));
	return 0;
}

/* ---- the sandbox's init ---------------------------------------------------------- */

struct init_args {
	const struct iod_agent_exec_config *c; /* executor settings */
	const struct iod_agent_replica *r;     /* what to run */
	int sync_rd;                           /* agent writes 1 byte when cgroups are set */
	int flags;                             /* namespaces actually created */
	int netns_fd;                          /* join this network namespace; -1 = none */
	bool cgroupns;                         /* unshare a cgroup namespace */
	bool rootfs;                           /* build and enter its own root */
	struct iod_agent_jail jail;            /* what the workload becomes */
	char *const *argv;                     /* program and arguments */
	char *const *envp;                     /* full environment */
	char dir[IOD_AGENT_PATH_MAX];          /* replica dir */
	char root[IOD_AGENT_PATH_MAX + 8];     /* its root's mount point */
	char data[IOD_AGENT_PATH_MAX];         /* data dir (stateful) or "" */
	char cwd[IOD_AGENT_PATH_MAX];          /* data dir (stateful) or /tmp */
	char nameserver[IOD_ADDR_MAX];         /* its /etc/resolv.conf's; "" = the host's */
	struct iod_agent_secret_set secrets;   /* its secrets' values (a private copy) */
	char creds[IOD_AGENT_PATH_MAX];        /* its credentials' directory or "" */
};

static void log_line(struct iod_agent_log *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void log_line(struct iod_agent_log *l, const char *fmt, ...)
{
	char buf[IOD_ERR_MSG_MAX + 64];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "iod-sandbox: ");
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	iod_agent_log_write(l, buf, (size_t)n);
}

/* Loopback up in a network namespace of its own (network: none). */
static int loopback_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	int rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
	if (rc == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	rc = rc ? -errno : 0;
	close(fd);
	return rc;
}

/* Close every descriptor but 0-2 and keep[] (sorted): nothing of the
 * agent's (sockets, files, eventfds) may reach the workload. */
static void close_others(const int *keep, unsigned n)
{
	unsigned from = 3;
	for (unsigned i = 0; i < n; i++) {
		if (keep[i] < (int)from)
			continue;
		if ((unsigned)keep[i] > from)
			syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, from, ~0u, 0);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void sandbox_init(struct init_args *a) __attribute__((noreturn));
static void sandbox_init(struct init_args *a)
{
	struct iod_agent_log log;
	struct iod_err e = {0};
	char go, why[IOD_ERR_MSG_MAX];
	int pfd[2], sfd, status = 0, dirfd;
	sigset_t mask;

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* the agent died: so do we */
	if (read(a->sync_rd, &go, 1) != 1)
		_exit(126);
	close(a->sync_rd);
	/* the log goes on through this descriptor after pivot_root */
	dirfd = open(a->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0 ||
	    iod_agent_log_open_at(&log, dirfd, "log", a->c->log_max_bytes, a->c->log_files, &e))
		_exit(126);
	/* the replica's own network (made by the agent, netns.c), before the
	 * workload runs: it never sees the node's */
	if (a->netns_fd >= 0) {
		if (setns(a->netns_fd, CLONE_NEWNET)) {
			log_line(&log, "error: joining the replica's network namespace: %s",
			         strerror(errno));
			_exit(125);
		}
		close(a->netns_fd);
	} else if (a->flags & CLONE_NEWNET) {
		int rc = loopback_up();
		if (rc) {
			log_line(&log, "error: bringing up loopback: %s", strerror(-rc));
			_exit(125);
		}
	}
	/* its cgroup (set by the agent before "go") becomes its cgroup root */
	if (a->cgroupns && unshare(CLONE_NEWCGROUP)) {
		log_line(&log, "error: cgroup namespace: %s", strerror(errno));
		_exit(125);
	}
	if (a->flags & CLONE_NEWUTS)
		sethostname(a->r->name, strlen(a->r->name));
	if (a->rootfs) {
		struct iod_agent_rootfs rf = {
		    .root = a->root,
		    .data = a->data[0] ? a->data : NULL,
		    .self_exe = a->c->self_exe,
		    .gpus = &a->r->gpus,
		    .hostname = a->r->name,
		    .home = a->cwd,
		    .uid = a->jail.uid,
		    .gid = a->jail.gid,
		    .shm_bytes = a->r->mem_bytes,
		    .secrets = a->secrets.n ? &a->secrets : NULL,
		    .creds = a->creds[0] ? a->creds : NULL,
		    .nameserver = a->nameserver[0] ? a->nameserver : NULL,
		    .mesh = a->c->mesh_unix_dir[0] ? a->c->mesh_unix_dir : NULL,
		};
		if (iod_agent_rootfs_enter(&rf, why, sizeof(why))) {
			log_line(&log, "error: %s", why);
			_exit(125);
		}
	} else if (a->flags & CLONE_NEWNS) {
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			log_line(&log, "warning: private mounts: %s", strerror(errno));
		else if ((a->flags & CLONE_NEWPID) &&
		         mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
			log_line(&log, "warning: mounting /proc: %s", strerror(errno));
	}
	sigemptyset(&mask);
	int fwd[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(fwd); i++)
		sigaddset(&mask, fwd[i]);
	sigprocmask(SIG_SETMASK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || pipe2(pfd, O_CLOEXEC)) {
		log_line(&log, "error: signalfd/pipe: %s", strerror(errno));
		_exit(126);
	}
	int keep[] = {log.fd, dirfd, sfd, pfd[0], pfd[1]};
	qsort(keep, IOD_ARRAY_LEN(keep), sizeof(keep[0]), cmp_int);
	close_others(keep, IOD_ARRAY_LEN(keep));
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull >= 0) { /* the agent's stdio stays out too */
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
	}
	pid_t child = fork();
	if (child == 0) {
		/* a clean slate: nothing blocked or ignored that the agent had */
		sigset_t none;
		sigemptyset(&none);
		for (int sig = 1; sig < 32; sig++)
			if (sig != SIGKILL && sig != SIGSTOP)
				signal(sig, SIG_DFL);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		if (iod_agent_sandbox_apply_affinity(a->r, &e))
			dprintf(2, "iod-sandbox: warning: %s\n", e.msg);
		if (iod_agent_sandbox_apply_mempolicy(a->r->numa_node, &e))
			dprintf(2, "iod-sandbox: warning: %s\n", e.msg);
		if (chdir(a->cwd) && chdir("/"))
			dprintf(2, "iod-sandbox: warning: chdir %s: %s\n", a->cwd, strerror(errno));
		if (a->c->use_namespaces && iod_agent_jail_enter(&a->jail, -1, why, sizeof(why))) {
			dprintf(2, "iod-sandbox: error: %s\n", why);
			_exit(126);
		}
		/* a credential change cleared it: the init died, so do we */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execvpe(a->argv[0], a->argv, a->envp);
		dprintf(2, "iod-sandbox: cannot run %s: %s\n", a->argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	if (child < 0) {
		log_line(&log, "error: fork: %s", strerror(errno));
		_exit(126);
	}
	bool child_done = false, pipe_open = true;
	char buf[4096];
	while (pipe_open || !child_done) {
		struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN},
		                       {.fd = pipe_open ? pfd[0] : -1, .events = POLLIN}};
		/* after the workload is gone, drain its output briefly, then leave */
		int rc = poll(pf, 2, child_done ? 100 : -1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc == 0 && child_done)
			break;
		if (pf[1].revents) {
			ssize_t n = read(pfd[0], buf, sizeof(buf));
			if (n > 0)
				iod_agent_log_write(&log, buf, (size_t)n);
			else if (n == 0 || errno != EINTR)
				pipe_open = false;
		}
		if (pf[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo != SIGCHLD) {
					if (!child_done)
						kill(child, (int)si.ssi_signo);
					continue;
				}
				int st;
				pid_t w;
				while ((w = waitpid(-1, &st, WNOHANG)) > 0)
					if (w == child) {
						child_done = true;
						status = WIFSIGNALED(st) ? 128 + WTERMSIG(st)
						                         : WEXITSTATUS(st);
					}
			}
		}
	}
	iod_agent_log_close(&log);
	_exit(status);
}

/* ---- start ------------------------------------------------------------------------ */

/*
 * The init as a child of the agent, in the namespaces of flags, made by a
 * helper the agent forks: the helper is single-threaded, so the init (a raw
 * clone of it, with no new stack: it runs on a copy of the helper's, as
 * after fork) can use malloc and stdio safely, which a raw clone of the
 * multi-threaded agent could not. CLONE_PARENT makes the init the agent's
 * child; the helper reports its pid and exits.
 */
static pid_t spawn_init(int flags, struct init_args *a, int *err)
{
	int rep[2];
	pid_t init = -1;
	*err = 0;
	if (pipe2(rep, O_CLOEXEC))
		return *err = errno, -1;
	pid_t helper = fork();
	if (helper == 0) {
		close(rep[0]);
		long pid = syscall(SYS_clone, (unsigned long)flags | CLONE_PARENT | SIGCHLD, NULL,
		                   NULL, NULL, NULL);
		if (pid == 0)
			sandbox_init(a);
		int out[2] = {(int)pid, pid < 0 ? errno : 0};
		(void)!write(rep[1], out, sizeof(out));
		_exit(0);
	}
	close(rep[1]);
	if (helper < 0) {
		*err = errno;
		close(rep[0]);
		return -1;
	}
	int got[2] = {-1, EIO};
	if (read(rep[0], got, sizeof(got)) != (ssize_t)sizeof(got))
		got[0] = -1;
	close(rep[0]);
	while (waitpid(helper, NULL, 0) < 0 && errno == EINTR)
		;
	init = got[0];
	if (init < 0)
		*err = got[1] ? got[1] : EIO;
	return init;
}

/* argv/envp arrays built from the replica, plus identity and placement. */
struct exec_vec {
	char *argv[IOD_AGENT_ARGS_MAX + 1];
	char *envp[IOD_AGENT_ENVS_MAX + 32];
	char extra[24][IOD_AGENT_PATH_MAX + 64];
	unsigned extra_n;
	/* its checkpoint store (ckpt_dirs): "" = none */
	char ckpt_tiers[sizeof("IOD_CKPT_TIERS=") + IOD_STOR_TIERS_MAX * (IOD_AGENT_PATH_MAX + 24)];
	char ckpt_dir[sizeof("IOD_CKPT_DIR=") + IOD_AGENT_PATH_MAX + 16];
	char creds[IOD_AGENT_PATH_MAX]; /* its own credentials' directory; "" = none */
	char ckpt_seeded[64];           /* ckpt_seed's step directory; "" = none */
};

static void env_add(struct exec_vec *v, unsigned *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void env_add(struct exec_vec *v, unsigned *n, const char *fmt, ...)
{
	va_list ap;
	if (v->extra_n >= IOD_ARRAY_LEN(v->extra) || *n + 1 >= IOD_ARRAY_LEN(v->envp))
		return;
	va_start(ap, fmt);
	vsnprintf(v->extra[v->extra_n], sizeof(v->extra[0]), fmt, ap);
	va_end(ap);
	v->envp[(*n)++] = v->extra[v->extra_n++];
}

static void build_vec(const struct iod_agent_exec_config *c, const struct iod_agent_replica *r,
                      const struct iod_agent_net *net, const char *home, const char *data,
                      struct exec_vec *v)
{
	unsigned n = 0;
	char set[512];
	const char *path = getenv("PATH");

	for (uint32_t i = 0; i < r->argc && i < IOD_AGENT_ARGS_MAX; i++)
		v->argv[i] =
		    (char *)iod_agent_strv_at(r->argv_buf, sizeof(r->argv_buf), r->argc, i);
	v->argv[r->argc] = NULL;
	if (v->argv[0] && !strcmp(v->argv[0], "iod") && c->self_exe[0])
		v->argv[0] = (char *)c->self_exe;

	env_add(v, &n, "PATH=%s", path ? path : "/usr/local/bin:/usr/bin:/bin");
	env_add(v, &n, "HOME=%s", home);
	env_add(v, &n, "IOD_SERVICE=%s", r->service);
	env_add(v, &n, "IOD_REPLICA=%s", r->name);
	env_add(v, &n, "IOD_ORDINAL=%u", r->ordinal);
	env_add(v, &n, "IOD_NODE=%s", c->node);
	if (c->self_exe[0])
		env_add(v, &n, "IOD_BIN=%s", c->self_exe); /* `iod` for shell commands */
	if (r->port)
		env_add(v, &n, "IOD_PORT=%u", r->port);
	/* its own address (before the replica's env, where the node's address
	 * may be: the first one wins for getenv) */
	if (net && net->addr[0])
		env_add(v, &n, "IOD_ADDR=%s:%u", net->addr, r->port);
	if (r->stateful)
		env_add(v, &n, "IOD_DATA_DIR=%s", data);
	if (v->creds[0]) {
		/* its own credentials (its service's SVID) and the API: what
		 * iod_api_client_init_config and the checkpoint peers read */
		env_add(v, &n, "IOD_SERVER=%s", c->api_servers);
		env_add(v, &n, "IOD_CA=%s/ca.crt", v->creds);
		env_add(v, &n, "IOD_CERT=%s/svid.crt", v->creds);
		env_add(v, &n, "IOD_KEY=%s/svid.key", v->creds);
	}
	if (v->ckpt_tiers[0]) {
		/* its checkpoint store (docs/storage.md): before the replica's env */
		v->envp[n++] = v->ckpt_tiers;
		v->envp[n++] = v->ckpt_dir;
		env_add(v, &n, "IOD_CKPT_CAPACITY=%llu",
		        (unsigned long long)(c->ckpt_capacity_bytes ? c->ckpt_capacity_bytes
		                                                    : IOD_CKPT_CAPACITY_DEFAULT));
		env_add(v, &n, "IOD_CKPT_REPLICAS=%u", r->ckpt_replicas ? r->ckpt_replicas : 1);
		/* storage.volume: the data directory to pack into each checkpoint
		 * (the store's own ckpt/ left out) and unpack after a move */
		if (r->ckpt_volume)
			env_add(v, &n, "IOD_CKPT_VOLUME=%s", data);
		/* it moved here and its store holds this node's copy (ckpt_seed) */
		if (v->ckpt_seeded[0])
			env_add(v, &n, "IOD_CKPT_MOVED=%s", v->ckpt_seeded);
	}
	/* the counters protocol of simulated GPUs (docs/observability.md): in a
	 * sandbox its private /tmp, which the agent reads through /proc/PID/root */
	if (c->use_namespaces) {
		env_add(v, &n, "IOD_TELEMETRY_FILE=/tmp/iod-telemetry");
	} else {
		char tf[IOD_AGENT_PATH_MAX + 32];
		if (!iod_agent_replica_path(c->run_dir, r->name, "telemetry", tf, sizeof(tf)))
			env_add(v, &n, "IOD_TELEMETRY_FILE=%s", tf);
	}
	/* a comma list (CUDA reads no ranges); always set: an empty value hides
	 * every GPU from CUDA */
	iod_bitmap_format_list(&r->gpus, set, sizeof(set));
	env_add(v, &n, "CUDA_VISIBLE_DEVICES=%s", set);
	env_add(v, &n, "NVIDIA_VISIBLE_DEVICES=%s", set[0] ? set : "void");
	iod_bitmap_format(&r->cpus, set, sizeof(set));
	if (set[0])
		env_add(v, &n, "IOD_CPUS=%s", set);
	if (r->numa_node >= 0)
		env_add(v, &n, "IOD_NUMA_NODE=%d", r->numa_node);
	/* the replica's own env last: it may override (not identity: listed first
	 * wins for getenv, so identity stays authoritative) */
	for (uint32_t i = 0; i < r->envc && n + 1 < IOD_ARRAY_LEN(v->envp); i++)
		v->envp[n++] =
		    (char *)iod_agent_strv_at(r->env_buf, sizeof(r->env_buf), r->envc, i);
	v->envp[n] = NULL;
}

/*
 * A stateful replica's checkpoint store (spec storage:): one directory per
 * tier, <data>/ckpt/<medium>, inside its data directory (so the sandbox's
 * read-write bind of it covers them, and they are kept across restarts and
 * given to its uid with it), and $IOD_CKPT_TIERS / $IOD_CKPT_DIR for them.
 */
static void ckpt_seed(const struct iod_agent_exec_config *c, const struct iod_agent_replica *r,
                      char dirs[][IOD_AGENT_PATH_MAX], char *seeded, size_t cap);
static int ckpt_dirs(const struct iod_agent_exec_config *c, const struct iod_agent_replica *r,
                     const char *data, struct exec_vec *v, struct iod_err *e)
{
	char dirs[IOD_STOR_TIERS_MAX][IOD_AGENT_PATH_MAX];
	const char *dp[IOD_STOR_TIERS_MAX];
	const size_t pre = strlen("IOD_CKPT_TIERS=");
	int rc;

	v->ckpt_tiers[0] = v->ckpt_dir[0] = 0;
	if (!r->stateful || !r->ckpt_tiers_n)
		return 0;
	if (r->ckpt_tiers_n > IOD_STOR_TIERS_MAX)
		return iod_err_set(e, -EINVAL, "replica %s: %u checkpoint tiers", r->name,
		                   (unsigned)r->ckpt_tiers_n);
	for (uint32_t i = 0; i < r->ckpt_tiers_n; i++) {
		int w = snprintf(dirs[i], sizeof(dirs[i]), "%s/ckpt/%s", data,
		                 iod_stor_medium_name(r->ckpt_tiers[i].medium));
		if (w < 0 || (size_t)w >= sizeof(dirs[i]))
			return iod_err_set(e, -ENAMETOOLONG,
			                   "replica %s: checkpoint directory %s/ckpt "
			                   "is too long",
			                   r->name, data);
		if ((rc = mkdir_p(dirs[i])))
			return iod_err_set(e, rc, "creating %s: %s", dirs[i], strerror(-rc));
		dp[i] = dirs[i];
	}
	memcpy(v->ckpt_tiers, "IOD_CKPT_TIERS=", pre);
	if ((rc = iod_ckpt_env_format(r->ckpt_tiers, dp, r->ckpt_tiers_n, v->ckpt_tiers + pre,
	                              sizeof(v->ckpt_tiers) - pre, e))) {
		v->ckpt_tiers[0] = 0;
		return iod_err_wrap(e, "replica %s", r->name);
	}
	snprintf(v->ckpt_dir, sizeof(v->ckpt_dir), "IOD_CKPT_DIR=%s", dirs[0]);
	ckpt_seed(c, r, dirs, v->ckpt_seeded, sizeof(v->ckpt_seeded));
	return 0;
}

/* Whether a tier directory holds a step directory with a manifest. */
static bool has_steps(const char *dir)
{
	DIR *d = opendir(dir);
	bool any = false;
	if (!d)
		return false;
	for (struct dirent *de; !any && (de = readdir(d));) {
		char m[IOD_AGENT_PATH_MAX + 320];
		struct stat st;
		snprintf(m, sizeof(m), "%s/%s/r0.manifest", dir, de->d_name);
		any = !strncmp(de->d_name, "step-", 5) && !stat(m, &st);
	}
	closedir(d);
	return any;
}

/*
 * A replica that moved here (docs/storage.md "Recovery on node loss"): its
 * store is empty, and this node's chunk server holds copies of it (the lost
 * node sent them here). The newest step whose manifest the server holds (it
 * holds a step exactly when its manifest exists) is hard-linked into the
 * tier with the largest quota, its chunks first and its manifests last, so
 * a crash in between leaves a step without a manifest, which the store
 * removes at open as torn; the replica then restores it from its own disk,
 * checking every chunk's XXH3 as a fetch would, instead of reading it
 * through the network. The links stay root's (own_data skips files with
 * more than one link), so the replica can read them and not change the
 * server's copy. *seeded: the step's directory name, "" when none.
 */
static void ckpt_seed(const struct iod_agent_exec_config *c, const struct iod_agent_replica *r,
                      char dirs[][IOD_AGENT_PATH_MAX], char *seeded, size_t cap)
{
	char src[IOD_AGENT_PATH_MAX + 64], best[64] = "", from[IOD_AGENT_PATH_MAX + 128];
	char to[IOD_AGENT_PATH_MAX + 128], a[IOD_AGENT_PATH_MAX + 400], b[IOD_AGENT_PATH_MAX + 400];
	uint32_t t = 0;
	seeded[0] = 0;
	for (uint32_t i = 0; i < r->ckpt_tiers_n; i++) {
		if (has_steps(dirs[i]))
			return; /* its own checkpoints: nothing to seed */
		if (r->ckpt_tiers[i].quota_bp > r->ckpt_tiers[t].quota_bp)
			t = i;
	}
	snprintf(src, sizeof(src), "%s/ckpt-peer/%s", c->run_dir, r->name);
	DIR *d = opendir(src);
	if (!d)
		return;
	for (struct dirent *de; (de = readdir(d));) {
		struct stat st;
		if (strncmp(de->d_name, "step-", 5) || strlen(de->d_name) >= sizeof(best) ||
		    strcmp(de->d_name, best) <= 0) /* zero-padded: later names are newer */
			continue;
		snprintf(a, sizeof(a), "%s/%s/r0.manifest", src, de->d_name);
		if (!stat(a, &st))
			snprintf(best, sizeof(best), "%s", de->d_name);
	}
	closedir(d);
	if (!best[0])
		return;
	snprintf(from, sizeof(from), "%s/%s", src, best);
	snprintf(to, sizeof(to), "%s/%s", dirs[t], best);
	if (mkdir(to, 0755) && errno != EEXIST)
		return;
	int rc = 0;
	for (int pass = 0; pass < 2 && !rc; pass++) { /* chunks, then manifests */
		if (!(d = opendir(from)))
			return;
		for (struct dirent *de; !rc && (de = readdir(d));) {
			size_t n = strlen(de->d_name);
			bool manifest = n > 9 && !strcmp(de->d_name + n - 9, ".manifest");
			bool chunk = n > 6 && !strcmp(de->d_name + n - 6, ".chunk");
			if (pass ? !manifest : !chunk)
				continue;
			snprintf(a, sizeof(a), "%s/%s", from, de->d_name);
			snprintf(b, sizeof(b), "%s/%s", to, de->d_name);
			if (link(a, b) && errno != EEXIST)
				rc = -errno;
		}
		closedir(d);
	}
	if (rc) {
		IOD_WARN("agent", "%s: linking checkpoint %s of this node's copy: %s", r->name,
		         best, strerror(-rc));
		return;
	}
	snprintf(seeded, cap, "%s", best);
	IOD_INFO("agent", "%s: moved here: checkpoint %s linked from this node's copy (%s)",
	         r->name, best, from);
}

/* The filters of an executor built without a store (tests): one process-wide. */
static struct iod_agent_seccomp_store *fallback_store(struct iod_err *e)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static struct iod_agent_seccomp_store *s;
	pthread_mutex_lock(&mu);
	if (!s)
		iod_agent_seccomp_store_new(&s, e);
	pthread_mutex_unlock(&mu);
	return s;
}

uint64_t iod_agent_proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* the command may hold spaces and parentheses: count from the last ')' */
	const char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

uint32_t iod_agent_uid_of(uint32_t base, const char *name, uint32_t probe)
{
	/* 1 .. IOD_AGENT_UID_BLOCK - 2 inside the block: the block's first and
	 * last ids are never handed out */
	uint64_t h = iod_hash_str(name) + probe;
	return base + 1 + (uint32_t)(h % (IOD_AGENT_UID_BLOCK - 2));
}

/* Stateful data belongs to the replica's uid (it may have changed). */
static uint32_t chown_uid, chown_gid;
static int chown_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	IOD_UNUSED(type);
	IOD_UNUSED(f);
	/* a file with other links is the chunk server's copy, linked by
	 * ckpt_seed: the replica reads it, and does not own it */
	if (S_ISREG(st->st_mode) && st->st_nlink > 1)
		return 0;
	if (st->st_uid != chown_uid || st->st_gid != chown_gid)
		lchown(path, chown_uid, chown_gid);
	return 0;
}

static int own_data(const char *data, uint32_t uid, uint32_t gid, struct iod_err *e)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct stat st;
	if (stat(data, &st))
		return iod_err_set(e, -errno, "%s: %s", data, strerror(errno));
	chmod(data, 0700);
	if (st.st_uid == uid && st.st_gid == gid)
		return 0;
	pthread_mutex_lock(&mu); /* nftw's callback has no context argument */
	chown_uid = uid;
	chown_gid = gid;
	int rc = nftw(data, chown_one, 16, FTW_PHYS | FTW_MOUNT);
	pthread_mutex_unlock(&mu);
	return rc ? iod_err_set(e, -EIO, "giving %s to uid %u: %s", data, uid, strerror(errno)) : 0;
}

/*
 * What this replica asks for that the node cannot give, as a list for the
 * refusal (or the warning, with best_effort). Empty: everything is there.
 */
static void missing(const struct iod_agent_caps *k, const struct iod_agent_replica *r,
                    const struct iod_agent_net *net, char *buf, size_t len)
{
	const struct iod_agent_sandbox *sb = &r->sandbox;
	size_t off = 0;
	buf[0] = 0;
#define MISS(cond, what)                                                                           \
	do {                                                                                       \
		if ((cond) && off < len)                                                           \
			off +=                                                                     \
			    (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "", what); \
	} while (0)
	MISS(!k->ns_pid || !k->ns_mount || !k->ns_uts || !k->ns_ipc,
	     "PID/mount/UTS/IPC namespaces");
	MISS(!k->ns_cgroup, "a cgroup namespace");
	MISS(!k->rootfs, "a root of its own (the agent must be root)");
	MISS(!k->root && sb->user != IOD_SPEC_USER_ROOT,
	     "a uid of its own (the agent must be root)");
	MISS(!k->root && sb->user == IOD_SPEC_USER_ROOT, "root (the agent is not root)");
	MISS(!k->seccomp && sb->seccomp != IOD_SPEC_SECCOMP_UNCONFINED, "seccomp filters");
	MISS(sb->network == IOD_SPEC_NET_PRIVATE && (!net || net->netns_fd < 0),
	     "a network namespace on the node's subnet (start the agent with --netns-subnet)");
	MISS(sb->network == IOD_SPEC_NET_NONE && !k->ns_net, "a network namespace");
#undef MISS
}

int iod_agent_exec_start(const struct iod_agent_exec_config *c, const struct iod_agent_replica *r,
                         struct iod_agent_proc *p, struct iod_err *e)
{
	return iod_agent_exec_start_net(c, r, NULL, p, e);
}

int iod_agent_exec_start_net(const struct iod_agent_exec_config *c,
                             const struct iod_agent_replica *r, const struct iod_agent_net *net,
                             struct iod_agent_proc *p, struct iod_err *e)
{
	static const struct iod_agent_caps none = {0};
	const struct iod_agent_caps *k = c->caps ? c->caps : &none;
	const struct iod_agent_sandbox *sb = &r->sandbox;
	struct init_args *a;
	struct exec_vec *v;
	char data[IOD_AGENT_PATH_MAX], lack[IOD_ERR_MSG_MAX / 2];
	int sync[2], rc = 0;

	memset(p, 0, sizeof(*p));
	if (!r->argc)
		return iod_err_set(e, -EINVAL, "replica %s has no command to run", r->name);
	const bool jailed = c->use_namespaces;
	if (jailed) {
		missing(k, r, net, lack, sizeof(lack));
		if (lack[0] && !sb->best_effort)
			return iod_err_set(
			    e, -EPERM,
			    "sandbox: this node cannot give it %s; it does not start "
			    "(sandbox.best_effort: true runs it without)",
			    lack);
		if (lack[0])
			snprintf(p->sandbox_warn, sizeof(p->sandbox_warn),
			         "sandbox (best effort): running without %s", lack);
	}
	a = calloc(1, sizeof(*a));
	v = calloc(1, sizeof(*v));
	if (!a || !v) {
		free(a);
		free(v);
		return iod_err_set(e, -ENOMEM, "out of memory starting %s", r->name);
	}
	if (iod_agent_replica_path(c->run_dir, r->name, "dir", a->dir, sizeof(a->dir)) ||
	    iod_agent_replica_path(c->run_dir, r->name, "data", data, sizeof(data))) {
		rc = iod_err_set(e, -ENAMETOOLONG,
		                 "replica \"%s\": not a valid name or the run dir path is too long",
		                 r->name);
		goto out;
	}
	if ((rc = mkdir_p(a->dir)) || (r->stateful && (rc = mkdir_p(data)))) {
		rc = iod_err_set(e, rc, "creating %s: %s", a->dir, strerror(-rc));
		goto out;
	}
	if ((rc = ckpt_dirs(c, r, data, v, e)))
		goto out;
	/* who it runs as: its own uid by default; root only when asked */
	struct iod_agent_jail *j = &a->jail;
	if (!k->root) {
		j->uid = (uint32_t)geteuid();
		j->gid = (uint32_t)getegid();
	} else if (sb->user == IOD_SPEC_USER_ROOT) {
		j->uid = j->gid = 0;
	} else if (sb->user == IOD_SPEC_USER_ID || sb->uid) {
		j->uid = sb->uid;
		j->gid = sb->gid ? sb->gid : sb->uid;
	} else {
		j->uid = j->gid =
		    iod_agent_uid_of(c->uid_base ? c->uid_base : IOD_AGENT_UID_BASE, r->name, 0);
	}
	j->caps = sb->caps;
	/* a user namespace of its own where the kernel allows it; not for root
	 * or listed capabilities, which must count on the node's namespaces */
	j->userns = jailed && k->ns_user && k->root && j->uid != 0 && !sb->caps;
	if (jailed && k->seccomp && sb->seccomp != IOD_SPEC_SECCOMP_UNCONFINED) {
		struct iod_agent_seccomp_store *st = c->seccomp ? c->seccomp : fallback_store(e);
		uint32_t id = 0;
		if (!st) {
			rc = -ENOMEM;
			goto out;
		}
		if (sb->seccomp == IOD_SPEC_SECCOMP_PROFILE)
			id = sb->seccomp_id;
		else if ((rc = iod_agent_seccomp_store_add(st, NULL, 0, sb->caps, &id, e)))
			goto out;
		j->seccomp = iod_agent_seccomp_get(st, id);
		if (!j->seccomp) {
			rc = iod_err_set(
			    e, -ENOENT, "replica %s: its seccomp profile is not compiled", r->name);
			goto out;
		}
	}
	if (r->stateful && jailed && k->root && (rc = own_data(data, j->uid, j->gid, e)))
		goto out;
	if (r->svid_tenant[0] && c->svid_dir[0] && c->api_servers[0]) {
		/* its service's SVID, its own copy (docs/storage.md "Replica
		 * credentials"): a replica that cannot have it does not start */
		snprintf(v->creds, sizeof(v->creds), "%s/creds", a->dir);
		if ((rc = iod_agent_svid_copy(c->svid_dir, r->svid_tenant, r->service, v->creds,
		                              j->uid, j->gid, e))) {
			iod_err_wrap(e, "replica %s: its credentials", r->name);
			goto out;
		}
		snprintf(a->creds, sizeof(a->creds), "%s", v->creds);
	}
	snprintf(a->data, sizeof(a->data), "%s", r->stateful ? data : "");
	a->rootfs = jailed && k->rootfs;
	a->cgroupns = jailed && k->ns_cgroup && k->root;
	/* stateless: a private /tmp inside its root; without one, its directory */
	snprintf(a->cwd, sizeof(a->cwd), "%s", r->stateful ? data : a->rootfs ? "/tmp" : a->dir);
	if (a->rootfs) {
		snprintf(a->root, sizeof(a->root), "%s/root", a->dir);
		if ((rc = mkdir_p(a->root))) {
			rc = iod_err_set(e, rc, "creating %s: %s", a->root, strerror(-rc));
			goto out;
		}
	}
	if (sb->secrets[0]) {
		/* values only in a tmpfs of its own root: never on disk, never in
		 * the environment (secrets.c) */
		char key[IOD_NAME_MAX + 24];
		if (!a->rootfs) {
			rc = iod_err_set(e, -EPERM,
			                 "replica %s mounts secrets, which need its own root file "
			                 "system (a sandbox on a root agent); it does not start",
			                 r->name);
			goto out;
		}
		snprintf(key, sizeof(key), "%s@%llu", r->name, (unsigned long long)r->generation);
		if (!c->secrets || iod_agent_secrets_get(c->secrets, key, &a->secrets)) {
			rc = iod_err_set(e, -EAGAIN, "replica %s: its secrets are not fetched yet",
			                 r->name);
			goto out;
		}
	}
	if ((rc = cgroup_make(c, r, p, e))) {
		/* limits that cannot be applied are a failed start, not a silent skip */
		iod_agent_exec_cleanup(p);
		goto out;
	}
	build_vec(c, r, net, a->cwd, data, v);
	a->netns_fd = net ? net->netns_fd : -1;
	if (net)
		iod_strlcpy(a->nameserver, net->nameserver, sizeof(a->nameserver));
	a->c = c;
	a->r = r;
	a->argv = v->argv;
	a->envp = v->envp;
	if (pipe2(sync, O_CLOEXEC)) {
		rc = iod_err_set(e, -errno, "pipe: %s", strerror(errno));
		goto out;
	}
	a->sync_rd = sync[0];
	int flags = 0;
	if (jailed) {
		flags |= k->ns_pid ? CLONE_NEWPID : 0;
		flags |= k->ns_mount ? CLONE_NEWNS : 0;
		flags |= k->ns_uts ? CLONE_NEWUTS : 0;
		flags |= k->ns_ipc ? CLONE_NEWIPC : 0;
		if (sb->network == IOD_SPEC_NET_NONE && k->ns_net && a->netns_fd < 0)
			flags |= CLONE_NEWNET;
	}
	a->flags = flags;
	fflush(NULL);
	int err;
	pid_t pid = spawn_init(flags, a, &err);
	close(sync[0]);
	if (pid < 0) {
		rc = iod_err_set(e, -err, "clone: %s", strerror(err));
		close(sync[1]);
		iod_agent_exec_cleanup(p);
		goto out;
	}
	p->pid = pid;
	if ((rc = cgroup_attach(p, pid, e))) {
		kill(pid, SIGKILL);
		close(sync[1]);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		p->pid = 0;
		iod_agent_exec_cleanup(p);
		goto out;
	}
	/* what a health check needs to run inside it */
	p->jail = *j;
	p->jail.init = pid;
	p->jail.init_start = iod_agent_proc_start_time(pid);
	p->jail.ns =
	    flags | (a->cgroupns ? CLONE_NEWCGROUP : 0) | (a->netns_fd >= 0 ? CLONE_NEWNET : 0);
	snprintf(p->jail.cgroup_mem, sizeof(p->jail.cgroup_mem), "%s", p->cgroup_mem);
	snprintf(p->jail.cgroup_cpu, sizeof(p->jail.cgroup_cpu), "%s", p->cgroup_cpu);
	if (!jailed)
		memset(&p->jail, 0, sizeof(p->jail));
	/* go: the init reads its copy of a/v (copy-on-write) */
	if (write(sync[1], "g", 1) != 1) {
		rc = iod_err_set(e, -errno, "starting %s: %s", r->name, strerror(errno));
		kill(pid, SIGKILL);
	}
	close(sync[1]);
out:
	iod_agent_secret_set_clear(&a->secrets);
	free(a);
	free(v);
	return rc;
}

int iod_agent_exec_signal(const struct iod_agent_proc *p, int sig)
{
	if (p->pid <= 0)
		return -ESRCH;
	return kill(p->pid, sig) ? -errno : 0;
}
