/*
 * sandbox.c: the executor: runs one replica as a child process in its own
 * sandbox, without docker or crun (they do not run on hybrid-cgroup hosts).
 *
 * The agent clone()s an init for the replica in new PID, mount, UTS and IPC
 * namespaces (each dropped, with a warning, where the kernel refuses it).
 * Before letting it go on, the agent puts it in the replica's cgroups
 * (v2 when its controllers are available, else the v1 memory and cpu
 * hierarchies; a warning when neither is writable) so that everything it
 * forks is limited. The init (PID 1 of the namespace) sets the hostname to
 * the replica name, mounts a private /proc, forks the workload with CPU
 * affinity, NUMA memory policy, GPU visibility and identity in the
 * environment, forwards signals to it, writes its output to rotating log
 * files and exits with its status (128 + signal when it was killed).
 *
 * Shell code: it forks, mounts, writes cgroup files. It decides nothing about
 * when to start or stop: the reconciler does.
 */
#include "iod/agent.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
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

static bool ns_allowed(int flag)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(unshare(flag) == 0 ? 0 : 1);
	if (pid < 0)
		return false;
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
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

void iod_agent_caps_probe(struct iod_agent_caps *c)
{
	memset(c, 0, sizeof(*c));
	c->ns_pid = ns_allowed(CLONE_NEWPID);
	c->ns_mount = ns_allowed(CLONE_NEWNS);
	c->ns_uts = ns_allowed(CLONE_NEWUTS);
	c->ns_ipc = ns_allowed(CLONE_NEWIPC);
	c->ns_net = ns_allowed(CLONE_NEWNET);

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
		snprintf(c->warning, sizeof(c->warning),
		         "no writable cgroup hierarchy with memory and cpu controllers (neither "
		         "cgroup v2 at /sys/fs/cgroup nor v1 at /sys/fs/cgroup/{memory,cpu}): "
		         "replicas run WITHOUT cpu and memory limits; run the agent as root on a "
		         "host with cgroups mounted");
	}
	if (!c->ns_pid || !c->ns_mount || !c->ns_uts || !c->ns_ipc) {
		size_t l = strlen(c->warning);
		snprintf(c->warning + l, sizeof(c->warning) - l,
		         "%snamespaces not permitted:%s%s%s%s (replicas share them with the agent; "
		         "run as root for full isolation)",
		         l ? "; " : "", c->ns_pid ? "" : " pid", c->ns_mount ? "" : " mount",
		         c->ns_uts ? "" : " uts", c->ns_ipc ? "" : " ipc");
	}
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
	char *const *argv;                     /* program and arguments */
	char *const *envp;                     /* full environment */
	char dir[IOD_AGENT_PATH_MAX];          /* replica dir */
	char cwd[IOD_AGENT_PATH_MAX];          /* data dir (stateful) or replica dir */
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

static void sandbox_init(struct init_args *a) __attribute__((noreturn));
static void sandbox_init(struct init_args *a)
{
	struct iod_agent_log log;
	struct iod_err e = {0};
	char go, logpath[IOD_AGENT_PATH_MAX + 8];
	int pfd[2], sfd, status = 0;
	sigset_t mask;

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* the agent died: so do we */
	if (read(a->sync_rd, &go, 1) != 1)
		_exit(126);
	close(a->sync_rd);
	snprintf(logpath, sizeof(logpath), "%s/log", a->dir);
	if (iod_agent_log_open(&log, logpath, a->c->log_max_bytes, a->c->log_files, &e))
		_exit(126);
	/* the replica's own network (made by the agent, netns.c), before the
	 * workload runs: it never sees the node's */
	if (a->netns_fd >= 0) {
		if (setns(a->netns_fd, CLONE_NEWNET)) {
			log_line(&log, "error: joining the replica's network namespace: %s",
			         strerror(errno));
			_exit(126);
		}
		close(a->netns_fd);
	}
	if (a->flags & CLONE_NEWUTS)
		sethostname(a->r->name, strlen(a->r->name));
	if (a->flags & CLONE_NEWNS) {
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
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		if (iod_agent_sandbox_apply_affinity(a->r, &e))
			dprintf(2, "iod-sandbox: warning: %s\n", e.msg);
		if (iod_agent_sandbox_apply_mempolicy(a->r->numa_node, &e))
			dprintf(2, "iod-sandbox: warning: %s\n", e.msg);
		if (chdir(a->cwd))
			dprintf(2, "iod-sandbox: warning: chdir %s: %s\n", a->cwd, strerror(errno));
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
 * clone() with fork semantics (no new stack: the child runs on a copy of
 * ours, as after fork), into the namespaces in flags; the child becomes the
 * sandbox's init and never returns.
 */
static pid_t fork_into(int flags, struct init_args *a)
{
	long pid = syscall(SYS_clone, (unsigned long)flags | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0)
		sandbox_init(a);
	return (pid_t)pid;
}

/* argv/envp arrays built from the replica, plus identity and placement. */
struct exec_vec {
	char *argv[IOD_AGENT_ARGS_MAX + 1];
	char *envp[IOD_AGENT_ENVS_MAX + 32];
	char extra[24][IOD_AGENT_PATH_MAX + 64];
	unsigned extra_n;
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
                      const struct iod_agent_net *net, const char *data_dir, struct exec_vec *v)
{
	unsigned n = 0;
	char set[256];
	const char *path = getenv("PATH");

	for (uint32_t i = 0; i < r->argc && i < IOD_AGENT_ARGS_MAX; i++)
		v->argv[i] =
		    (char *)iod_agent_strv_at(r->argv_buf, sizeof(r->argv_buf), r->argc, i);
	v->argv[r->argc] = NULL;
	if (v->argv[0] && !strcmp(v->argv[0], "iod") && c->self_exe[0])
		v->argv[0] = (char *)c->self_exe;

	env_add(v, &n, "PATH=%s", path ? path : "/usr/local/bin:/usr/bin:/bin");
	env_add(v, &n, "HOME=%s", data_dir);
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
		env_add(v, &n, "IOD_DATA_DIR=%s", data_dir);
	iod_bitmap_format(&r->gpus, set, sizeof(set));
	/* always set: an empty value hides every GPU from CUDA */
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

int iod_agent_exec_start(const struct iod_agent_exec_config *c, const struct iod_agent_replica *r,
                         struct iod_agent_proc *p, struct iod_err *e)
{
	return iod_agent_exec_start_net(c, r, NULL, p, e);
}

int iod_agent_exec_start_net(const struct iod_agent_exec_config *c,
                             const struct iod_agent_replica *r, const struct iod_agent_net *net,
                             struct iod_agent_proc *p, struct iod_err *e)
{
	struct init_args *a;
	struct exec_vec *v;
	char data[IOD_AGENT_PATH_MAX];
	int sync[2], rc;

	memset(p, 0, sizeof(*p));
	if (!r->argc)
		return iod_err_set(e, -EINVAL, "replica %s has no command to run", r->name);
	a = calloc(1, sizeof(*a));
	v = calloc(1, sizeof(*v));
	if (!a || !v) {
		free(a);
		free(v);
		return iod_err_set(e, -ENOMEM, "out of memory starting %s", r->name);
	}
	if (iod_agent_replica_path(c->run_dir, r->name, "dir", a->dir, sizeof(a->dir)) ||
	    iod_agent_replica_path(c->run_dir, r->name, "data", data, sizeof(data))) {
		rc = iod_err_set(e, -ENAMETOOLONG, "run dir path too long for %s", r->name);
		goto out;
	}
	if ((rc = mkdir_p(a->dir)) || (r->stateful && (rc = mkdir_p(data)))) {
		rc = iod_err_set(e, rc, "creating %s: %s", a->dir, strerror(-rc));
		goto out;
	}
	snprintf(a->cwd, sizeof(a->cwd), "%s", r->stateful ? data : a->dir);
	if ((rc = cgroup_make(c, r, p, e))) {
		/* limits that cannot be applied are a failed start, not a silent skip */
		iod_agent_exec_cleanup(p);
		goto out;
	}
	build_vec(c, r, net, a->cwd, v);
	a->netns_fd = net ? net->netns_fd : -1;
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
	if (c->use_namespaces && c->caps) {
		flags |= c->caps->ns_pid ? CLONE_NEWPID : 0;
		flags |= c->caps->ns_mount ? CLONE_NEWNS : 0;
		flags |= c->caps->ns_uts ? CLONE_NEWUTS : 0;
		flags |= c->caps->ns_ipc ? CLONE_NEWIPC : 0;
	}
	a->flags = flags;
	fflush(NULL);
	pid_t pid = fork_into(flags, a);
	if (pid < 0 && flags) {
		snprintf(p->sandbox_warn, sizeof(p->sandbox_warn),
		         "clone with namespaces failed (%s): running without them",
		         strerror(errno));
		a->flags = 0;
		pid = fork_into(0, a);
	}
	close(sync[0]);
	if (pid < 0) {
		rc = iod_err_set(e, -errno, "clone: %s", strerror(errno));
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
	/* go: the init reads its copy of a/v (copy-on-write) */
	if (write(sync[1], "g", 1) != 1) {
		rc = iod_err_set(e, -errno, "starting %s: %s", r->name, strerror(errno));
		kill(pid, SIGKILL);
	}
	close(sync[1]);
out:
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
