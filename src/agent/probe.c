/*
 * probe.c: health checks as the agent runs them: exec (a shell command that
 * must exit 0), TCP connect, and HTTP GET (a 2xx or 3xx status line).
 *
 * Every check is bounded by its timeout (non-blocking connect + poll; an exec
 * check is killed at its deadline). Shell code: sockets and processes; the
 * reconciler decides what a pass or a failure means. Only the status line of
 * an HTTP answer is read (IOD_AGENT_HTTP_READ_MAX bytes at most).
 */
#include "iod/agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ns(void)
{
	return iod_clock_now(iod_clock_monotonic());
}

static int ms_left(uint64_t deadline_ns)
{
	uint64_t now = mono_ns();
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

static int check_http(const struct iod_agent_health *h, const char *host, uint16_t port,
                      uint64_t deadline_ns, char *detail, size_t len)
{
	char req[IOD_AGENT_PATH_MAX + 128], buf[IOD_AGENT_HTTP_READ_MAX + 1];
	int fd, rc;
	size_t got = 0;

	if ((rc = tcp_connect(host, port, deadline_ns, &fd, detail, len)))
		return rc;
	int n = snprintf(req, sizeof(req),
	                 "GET %s HTTP/1.0\r\nHost: %s:%u\r\nUser-Agent: iod-agent\r\n\r\n",
	                 h->path[0] ? h->path : "/", host, port);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		snprintf(detail, len, "HTTP send: %s", strerror(errno));
		close(fd);
		return -EIO;
	}
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, ms_left(deadline_ns)) <= 0) {
			snprintf(detail, len, "HTTP GET %s: timed out", h->path);
			close(fd);
			return -ETIMEDOUT;
		}
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	int code = 0;
	if (sscanf(buf, "HTTP/%*d.%*d %d", &code) != 1) {
		snprintf(detail, len, "HTTP GET %s: no status line", h->path);
		return -EPROTO;
	}
	if (code < 200 || code >= 400) {
		snprintf(detail, len, "HTTP GET %s: status %d", h->path, code);
		return -EIO;
	}
	snprintf(detail, len, "HTTP %d", code);
	return 0;
}

static int check_exec(const struct iod_agent_health *h, uint64_t deadline_ns, char *detail,
                      size_t len)
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
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		execl("/bin/sh", "sh", "-c", h->command, (char *)NULL);
		_exit(127);
	}
	int st;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			snprintf(detail, len, "waitpid: %s", strerror(errno));
			return -errno;
		}
		if (mono_ns() >= deadline_ns) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			snprintf(detail, len, "exec `%s`: timed out", h->command);
			return -ETIMEDOUT;
		}
		struct timespec ts = {0, 200000}; /* 0.2 ms: checks are short */
		nanosleep(&ts, NULL);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		snprintf(detail, len, "exec ok");
		return 0;
	}
	snprintf(detail, len, "exec `%s`: %s %d", h->command,
	         WIFEXITED(st) ? "exit status" : "signal",
	         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return -EIO;
}

int iod_agent_probe_run(const struct iod_agent_health *h, const char *host, uint16_t port,
                        char *detail, size_t len)
{
	uint64_t timeout = h->timeout_ns ? h->timeout_ns : IOD_NS_PER_S;
	uint64_t deadline = mono_ns() + timeout;
	int fd, rc;

	detail[0] = 0;
	switch (h->kind) {
	case IOD_HEALTH_NONE: return 0;
	case IOD_HEALTH_EXEC: return check_exec(h, deadline, detail, len);
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
