/*
 * relay.c: the delayer of `iod chaos delay` (docs/chaos.md). tc netem and
 * nftables' queue (nft_queue) are not in this kernel, so a delay is a TCP
 * relay: the fault's table redirects what the target's sockets open to the
 * cluster's ports (nat output, by the target's chaos cgroup) to this
 * process, which connects on to the original destination (SO_ORIGINAL_DST)
 * and holds every byte the target sent for the latency before passing it
 * on; the answers come back at once. It is a process of its own (started
 * by `iod chaos delay`, its pid and start time in the fault record, killed
 * by the heal) and it exits by itself at its end time, so not even a lost
 * record leaves it running. One thread, poll(2), at most
 * IOD_CHAOS_RELAY_CONNS connections.
 */
#include "iod/chaos.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IOD_CHAOS_RELAY_CONNS 64
#define RELAY_QUEUE_MAX (16u << 20) /* bytes held per connection, then reads wait */

struct chunk {
	struct chunk *next;
	uint64_t due_ms; /* when it may go on */
	size_t len, off;
	char data[];
};

struct pair {
	int cfd, ufd;              /* from the target, to the original destination */
	struct chunk *head, *tail; /* what the target sent, oldest first */
	size_t queued;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void pair_close(struct pair *p)
{
	close(p->cfd);
	close(p->ufd);
	while (p->head) {
		struct chunk *c = p->head;
		p->head = c->next;
		free(c);
	}
	memset(p, 0, sizeof(*p));
	p->cfd = p->ufd = -1;
}

/* Accept one: connect on to where it was going. */
static void relay_accept(int lfd, struct pair *v, uint32_t *n)
{
	int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	struct sockaddr_in dst;
	socklen_t dl = sizeof(dst);
	int ufd = -1;
	if (*n < IOD_CHAOS_RELAY_CONNS && !getsockopt(cfd, SOL_IP, SO_ORIGINAL_DST, &dst, &dl) &&
	    (ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
	    !connect(ufd, (struct sockaddr *)&dst, sizeof(dst))) {
		v[*n] = (struct pair){.cfd = cfd, .ufd = ufd};
		(*n)++;
		return;
	}
	if (ufd >= 0)
		close(ufd);
	close(cfd);
}

static int write_all(int fd, const char *b, size_t n)
{
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Pass on what is due; -1 when the destination went away. */
static int flush_due(struct pair *p, uint64_t now)
{
	while (p->head && p->head->due_ms <= now) {
		struct chunk *c = p->head;
		if (write_all(p->ufd, c->data + c->off, c->len - c->off))
			return -1;
		p->queued -= c->len;
		p->head = c->next;
		if (!p->head)
			p->tail = NULL;
		free(c);
	}
	return 0;
}

/* Read from the target into the queue, due latency from now. */
static int take(struct pair *p, uint64_t now, uint32_t latency_ms)
{
	char buf[65536];
	ssize_t r = recv(p->cfd, buf, sizeof(buf), 0);
	if (r <= 0)
		return r < 0 && errno == EINTR ? 0 : -1;
	struct chunk *c = malloc(sizeof(*c) + (size_t)r);
	if (!c)
		return -1;
	*c = (struct chunk){.due_ms = now + latency_ms, .len = (size_t)r};
	memcpy(c->data, buf, (size_t)r);
	if (p->tail)
		p->tail->next = c;
	else
		p->head = c;
	p->tail = c;
	p->queued += (size_t)r;
	return 0;
}

/* The answer: back to the target at once. */
static int answer(struct pair *p)
{
	char buf[65536];
	ssize_t r = recv(p->ufd, buf, sizeof(buf), 0);
	if (r <= 0)
		return r < 0 && errno == EINTR ? 0 : -1;
	return write_all(p->cfd, buf, (size_t)r);
}

static int listen_any(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64) ||
	    getsockname(fd, (struct sockaddr *)&a, &al)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* Tells the starter its port and pid: "PORT PID\n", written whole. */
static int announce(const char *port_file, uint16_t port)
{
	char tmp[IOD_PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%u %d\n", port, (int)getpid());
	if (fclose(f))
		return -1;
	return rename(tmp, port_file);
}

int iod_chaos_relay_run(const char *port_file, uint32_t latency_ms, uint64_t until_unix_ms)
{
	uint16_t port = 0;
	int lfd = listen_any(&port);
	if (lfd < 0 || announce(port_file, port)) {
		fprintf(stderr, "iod chaos relay: cannot listen on 127.0.0.1: %s\n",
		        strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	static struct pair v[IOD_CHAOS_RELAY_CONNS];
	uint32_t n = 0;
	struct pollfd pf[1 + 2 * IOD_CHAOS_RELAY_CONNS];
	while (iod_chaos_now_ms() < until_unix_ms) {
		uint64_t now = mono_ms(), next = now + 20;
		pf[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (uint32_t i = 0; i < n; i++) {
			bool room = v[i].queued < RELAY_QUEUE_MAX;
			pf[1 + 2 * i] =
			    (struct pollfd){.fd = room ? v[i].cfd : -1, .events = POLLIN};
			pf[2 + 2 * i] = (struct pollfd){.fd = v[i].ufd, .events = POLLIN};
			if (v[i].head && v[i].head->due_ms < next)
				next = v[i].head->due_ms;
		}
		if (poll(pf, 1 + 2 * n, (int)(next > now ? next - now : 0)) < 0 && errno != EINTR)
			break;
		now = mono_ms();
		for (uint32_t i = 0; i < n; i++) {
			bool bad = flush_due(&v[i], now) ||
			           ((pf[1 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			            take(&v[i], now, latency_ms)) ||
			           ((pf[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			            answer(&v[i]));
			if (bad) {
				pair_close(&v[i]);
				v[i] = v[--n];
				/* the moved pair's poll results are stale: next round */
				pf[1 + 2 * i].revents = pf[2 + 2 * i].revents = 0;
				i--;
			}
		}
		if (pf[0].revents & POLLIN)
			relay_accept(lfd, v, &n);
	}
	return 0;
}
