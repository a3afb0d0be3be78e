/*
 * probe.c: health checks as the agent runs them: exec (a shell command that
 * must exit 0), TCP connect, and HTTP GET (a 2xx or 3xx status line).
 *
 * Every check is bounded by its timeout (non-blocking connect + poll; an exec
 * check is killed at its deadline, with its whole process group). An exec
 * check of a sandboxed replica runs inside the replica's sandbox: in its
 * cgroups, its namespaces (setns: PID, mount, network, UTS, IPC, cgroup,
 * and its user namespace), as its uid with its capabilities, no_new_privs
 * and seccomp filter, so a check sees and can touch only what the replica
 * can. Shell code: sockets and processes; the
 * reconciler decides what a pass or a failure means. Only the status line of
 * an HTTP answer is read (the HTTP client stops after it, src/http/).
 *
 * The prober runs checks on a fixed pool of IOD_AGENT_PROBE_WORKERS threads
 * with a bounded queue, so a check that hangs until its timeout holds one
 * thread and delays no other replica's verdict. Results come back through a
 * ring and an eventfd the agent loop polls; the agent loop alone feeds them
 * to the reconciler. No allocation after start-up.
 */
#include "iod/agent_run.h"
#include "iod/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int ms_left(uint64_t deadline_ns)
{
	uint64_t now = iod_clock_now_ns();
	if (now >= deadline_ns)
		return 0;
	uint64_t ms = (deadline_ns - now + IOD_NS_PER_MS - 1) / IOD_NS_PER_MS;
	return (int)IOD_MIN(ms, (uint64_t)INT32_MAX);
}

static int tcp_connect(const char *host, uint16_t port, uint64_t deadline_ns, int *out,
                       char *detail, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		snprintf(detail, len, "bad address %s", host);
		return -EINVAL;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(detail, len, "socket: %s", strerror(errno));
		return -errno;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		int err = errno;
		snprintf(detail, len, "connect %s:%u: %s", host, port, strerror(err));
		close(fd);
		return -err;
	}
	struct pollfd pf = {.fd = fd, .events = POLLOUT};
	int rc = poll(&pf, 1, ms_left(deadline_ns));
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (rc <= 0) {
		snprintf(detail, len, "connect %s:%u: timed out", host, port);
		close(fd);
		return -ETIMEDOUT;
	}
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	if (soerr) {
		snprintf(detail, len, "connect %s:%u: %s", host, port, strerror(soerr));
		close(fd);
		return -soerr;
	}
	*out = fd;
	return 0;
}

/* HTTP GET through the one HTTP client (src/http/): only the status line is
 * read; 2xx and 3xx pass. */
static int check_http(const struct iod_agent_health *h, const char *host, uint16_t port,
                      uint64_t deadline_ns, char *detail, size_t len)
{
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	char addr[IOD_ADDR_MAX + 8], path[IOD_AGENT_PATH_MAX + 2];
	static const char *const hdrs[] = {"User-Agent: iod-agent", NULL};
	struct in_addr ip;

	if (inet_pton(AF_INET, host, &ip) != 1) {
		snprintf(detail, len, "bad address %s", host);
		return -EINVAL;
	}
	snprintf(addr, sizeof(addr), "%s:%u", host, port);
	snprintf(path, sizeof(path), "%s%s", h->path[0] == '/' ? "" : "/", h->path);
	iod_http_conn_init(&c);
	c.status_only = true;
	int ms = ms_left(deadline_ns);
	int rc =
	    ms ? iod_http_request(&c, addr, "GET", path, hdrs, NULL, NULL, 0, (uint32_t)ms, &r, &e)
	       : -ETIMEDOUT;
	iod_http_conn_close(&c);
	if (rc == -ETIMEDOUT) {
		snprintf(detail, len, "HTTP GET %s: timed out", h->path);
		return rc;
	}
	if (rc == -EPROTO) { /* not HTTP (libcurl takes no HTTP/0.9) */
		snprintf(detail, len, "HTTP GET %s: no status line", h->path);
		return rc;
	}
	if (rc) {
		snprintf(detail, len, "connect %s:%u: %s", host, port, strerror(-rc));
		return rc;
	}
	int code = r.status;
	iod_http_response_free(&r);
	if (code < 200 || code >= 400) {
		snprintf(detail, len, "HTTP GET %s: status %d", h->path, code);
		return -EIO;
	}
	snprintf(detail, len, "HTTP %d", code);
	return 0;
}

/*
 * exec: `/bin/sh -c command` as the leader of its own process group, so
 * that everything the check starts (a pipeline, a background child) can be
 * killed together: at the timeout, and also after the shell ends, since a
 * check's processes live only as long as the check (an earlier version
 * killed only the shell: 4 -> 17 orphaned `sleep`s in 5 s of timeouts).
 */
/* Join cgroup.procs of dir (the replica's cgroup, host view). */
static int join_cgroup(const char *dir)
{
	char file[IOD_AGENT_PATH_MAX + 16], pid[16];
	if (!dir[0])
		return 0;
	snprintf(file, sizeof(file), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	int fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, pid, strlen(pid));
	int rc = w == (ssize_t)strlen(pid) ? 0 : -errno;
	close(fd);
	return rc;
}

/* The first child of the replica's init: the workload (whose user
 * namespace a check joins). */
static pid_t workload_pid(pid_t init)
{
	char path[64], buf[32];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)init, (int)init);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return (pid_t)atoi(buf);
}

/*
 * In the forked check process: into the replica's sandbox, then a child in
 * its PID namespace runs the command as the replica; this process waits
 * and exits with the command's status. It is the leader of the check's
 * process group, so the caller's kill(-pid) reaches the command (now a
 * process of the replica's PID namespace) and all it started.
 */
static void enter_and_run(const struct iod_agent_health *h, const struct iod_agent_jail *j)
{
	static const struct {
		int flag;
		const char *name;
	} order[] = {{CLONE_NEWCGROUP, "cgroup"}, {CLONE_NEWIPC, "ipc"}, {CLONE_NEWUTS, "uts"},
	             {CLONE_NEWNET, "net"},       {CLONE_NEWPID, "pid"}, {CLONE_NEWNS, "mnt"}};
	int fds[IOD_ARRAY_LEN(order)], userns = -1;
	char path[64], err[IOD_ERR_MSG_MAX];

	/* open everything first: after setns(mnt), /proc is the replica's */
	for (unsigned i = 0; i < IOD_ARRAY_LEN(order); i++) {
		fds[i] = -1;
		if (!(j->ns & order[i].flag))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)j->init, order[i].name);
		if ((fds[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			_exit(125); /* the replica is gone */
	}
	if (j->userns) {
		pid_t w = workload_pid(j->init);
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)w);
		if (w <= 0 || (userns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			_exit(125);
	}
	/* still the replica's init (not a reused pid): then the namespaces
	 * opened above are the replica's, as it was alive all along */
	if (!j->init_start || iod_agent_proc_start_time(j->init) != j->init_start)
		_exit(125);
	if (join_cgroup(j->cgroup_mem) ||
	    (strcmp(j->cgroup_cpu, j->cgroup_mem) && join_cgroup(j->cgroup_cpu)))
		_exit(125);
	for (unsigned i = 0; i < IOD_ARRAY_LEN(order); i++)
		if (fds[i] >= 0 && setns(fds[i], order[i].flag))
			_exit(125);
	pid_t pid = fork(); /* the PID namespace applies to children */
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		if (chdir("/"))
			_exit(125);
		if (iod_agent_jail_enter(j, userns, err, sizeof(err)))
			_exit(126);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl("/bin/sh", "sh", "-c", h->command, (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		_exit(125);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			_exit(125);
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/*
 * exec: `/bin/sh -c command` as the leader of its own process group, so
 * that everything the check starts (a pipeline, a background child) can be
 * killed together: at the timeout, and also after the shell ends, since a
 * check's processes live only as long as the check (an earlier version
 * killed only the shell: 4 -> 17 orphaned `sleep`s in 5 s of timeouts).
 * With a jail, it runs inside the replica's sandbox (enter_and_run).
 */
static int check_exec(const struct iod_agent_health *h, const struct iod_agent_jail *j,
                      uint64_t deadline_ns, char *detail, size_t len)
{
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(detail, len, "fork: %s", strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setpgid(0, 0);
		if (j && j->init > 0)
			enter_and_run(h, j);
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		execl("/bin/sh", "sh", "-c", h->command, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid); /* also here: no window where a kill(-pid) misses */
	int st, rc = iod_agent_wait_group(pid, deadline_ns, &st);
	if (rc == -ETIMEDOUT) {
		snprintf(detail, len, "exec `%s`: timed out", h->command);
		return rc;
	}
	if (rc) {
		snprintf(detail, len, "waitpid: %s", strerror(-rc));
		return rc;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		snprintf(detail, len, "exec ok");
		return 0;
	}
	if (j && j->init > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 125) {
		snprintf(detail, len, "could not enter the replica's sandbox (exec `%s`)",
		         h->command);
		return -ESRCH;
	}
	snprintf(detail, len, "exec `%s`: %s %d", h->command,
	         WIFEXITED(st) ? "exit status" : "signal",
	         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return -EIO;
}

int iod_agent_wait_group(pid_t pid, uint64_t deadline_ns, int *status)
{
	int rc = 0;
	for (;;) {
		/* WNOWAIT: the leader stays a zombie, so its pid (the group's id)
		 * cannot be reused before the group is killed below */
		siginfo_t si = {0};
		int w = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
		if (w == 0 && si.si_pid == pid)
			break;
		if (w < 0 && errno != EINTR) {
			int err = errno;
			kill(-pid, SIGKILL);
			return -err;
		}
		if (iod_clock_now_ns() >= deadline_ns) {
			rc = -ETIMEDOUT;
			break;
		}
		struct timespec ts = {0, 200000}; /* 0.2 ms: checks are short */
		nanosleep(&ts, NULL);
	}
	kill(-pid, SIGKILL); /* the whole group: nothing outlives the check */
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return rc;
}

int iod_agent_probe_run(const struct iod_agent_health *h, const char *host, uint16_t port,
                        char *detail, size_t len)
{
	return iod_agent_probe_run_in(h, NULL, host, port, detail, len);
}

int iod_agent_probe_run_in(const struct iod_agent_health *h, const struct iod_agent_jail *j,
                           const char *host, uint16_t port, char *detail, size_t len)
{
	uint64_t timeout = h->timeout_ns ? h->timeout_ns : IOD_NS_PER_S;
	uint64_t deadline = iod_clock_now_ns() + timeout;
	int fd = -1, rc;

	detail[0] = 0;
	switch (h->kind) {
	case IOD_HEALTH_NONE: return 0;
	case IOD_HEALTH_EXEC: return check_exec(h, j, deadline, detail, len);
	case IOD_HEALTH_TCP:
		if (!port) {
			snprintf(detail, len, "tcp check without a port");
			return -EINVAL;
		}
		if ((rc = tcp_connect(host, port, deadline, &fd, detail, len)))
			return rc;
		close(fd);
		snprintf(detail, len, "tcp connect ok");
		return 0;
	case IOD_HEALTH_HTTP:
		if (!port) {
			snprintf(detail, len, "http check without a port");
			return -EINVAL;
		}
		return check_http(h, host, port, deadline, detail, len);
	}
	return -EINVAL;
}

/* ---- the prober: checks on a fixed pool of threads ------------------------------ */

struct probe_job {
	uint32_t slot;              /* caller's index */
	char name[IOD_NAME_MAX];    /* replica */
	uint64_t generation;        /* caller's staleness token */
	struct iod_agent_health h;  /* the check */
	char host[IOD_ADDR_MAX];    /* where */
	uint16_t port;              /* where */
	struct iod_agent_jail jail; /* exec: the replica's sandbox (init 0: none) */
};

#define PROBE_QUEUE_CAP IOD_AGENT_REPLICAS_MAX
#define PROBE_RESULTS_CAP (IOD_AGENT_REPLICAS_MAX + IOD_AGENT_PROBE_WORKERS)

struct iod_agent_prober {
	pthread_t th[IOD_AGENT_PROBE_WORKERS]; /* workers */
	uint32_t nth;                          /* started */
	pthread_mutex_t mu;                    /* guards the rings and stop */
	pthread_cond_t cv;                     /* workers: a job or stop */
	bool stop;                             /* workers leave */
	struct probe_job *jobs;                /* ring of PROBE_QUEUE_CAP */
	uint32_t jobs_head, jobs_n;
	struct iod_agent_probe_result *res; /* ring of PROBE_RESULTS_CAP */
	uint32_t res_head, res_n;
	uint64_t dropped; /* results lost to a full ring */
	int efd;          /* readable: results waiting */
};

static void *prober_main(void *arg)
{
	struct iod_agent_prober *p = arg;
	struct probe_job job;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (!p->stop && !p->jobs_n)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		job = p->jobs[p->jobs_head];
		p->jobs_head = (p->jobs_head + 1) % PROBE_QUEUE_CAP;
		p->jobs_n--;
		pthread_mutex_unlock(&p->mu);

		struct iod_agent_probe_result r = {.slot = job.slot, .generation = job.generation};
		memcpy(r.name, job.name, sizeof(r.name));
		r.ok = iod_agent_probe_run_in(&job.h, &job.jail, job.host, job.port, r.detail,
		                              sizeof(r.detail)) == 0;

		pthread_mutex_lock(&p->mu);
		if (p->res_n < PROBE_RESULTS_CAP) {
			p->res[(p->res_head + p->res_n) % PROBE_RESULTS_CAP] = r;
			p->res_n++;
		} else {
			p->dropped++;
		}
		pthread_mutex_unlock(&p->mu);
		uint64_t one = 1;
		(void)!write(p->efd, &one, sizeof(one));
	}
}

int iod_agent_prober_new(uint32_t workers, struct iod_agent_prober **out, struct iod_err *e)
{
	struct iod_agent_prober *p = calloc(1, sizeof(*p));
	*out = NULL;
	if (!p)
		return iod_err_set(e, -ENOMEM, "out of memory");
	p->jobs = calloc(PROBE_QUEUE_CAP, sizeof(*p->jobs));
	p->res = calloc(PROBE_RESULTS_CAP, sizeof(*p->res));
	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!p->jobs || !p->res || p->efd < 0) {
		int rc = p->efd < 0 ? -errno : -ENOMEM;
		free(p->jobs);
		free(p->res);
		if (p->efd >= 0)
			close(p->efd);
		free(p);
		return iod_err_set(e, rc, "health-check pool: %s", strerror(-rc));
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	workers = IOD_MAX(1u, IOD_MIN(workers, (uint32_t)IOD_AGENT_PROBE_WORKERS));
	for (uint32_t i = 0; i < workers; i++) {
		if (pthread_create(&p->th[i], NULL, prober_main, p))
			break;
		p->nth++;
	}
	if (!p->nth) {
		iod_agent_prober_free(p);
		return iod_err_set(e, -EAGAIN, "health-check pool: no thread could start");
	}
	*out = p;
	return 0;
}

int iod_agent_prober_submit(struct iod_agent_prober *p, uint32_t slot, const char *name,
                            uint64_t generation, const struct iod_agent_health *h, const char *host,
                            uint16_t port, const struct iod_agent_jail *jail)
{
	pthread_mutex_lock(&p->mu);
	if (p->jobs_n == PROBE_QUEUE_CAP) {
		pthread_mutex_unlock(&p->mu);
		return -ENOSPC;
	}
	struct probe_job *j = &p->jobs[(p->jobs_head + p->jobs_n) % PROBE_QUEUE_CAP];
	j->slot = slot;
	iod_strlcpy(j->name, name, sizeof(j->name));
	j->generation = generation;
	j->h = *h;
	iod_strlcpy(j->host, host, sizeof(j->host));
	j->port = port;
	if (jail)
		j->jail = *jail;
	else
		memset(&j->jail, 0, sizeof(j->jail));
	p->jobs_n++;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

int iod_agent_prober_take(struct iod_agent_prober *p, struct iod_agent_probe_result *out)
{
	int rc = -EAGAIN;
	pthread_mutex_lock(&p->mu);
	if (p->res_n) {
		*out = p->res[p->res_head];
		p->res_head = (p->res_head + 1) % PROBE_RESULTS_CAP;
		p->res_n--;
		rc = 0;
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int iod_agent_prober_fd(const struct iod_agent_prober *p)
{
	return p->efd;
}

void iod_agent_prober_free(struct iod_agent_prober *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (uint32_t i = 0; i < p->nth; i++)
		pthread_join(p->th[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	close(p->efd);
	free(p->jobs);
	free(p->res);
	free(p);
}
