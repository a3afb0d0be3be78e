/*
 * relay.c: a TCP relay from an address a node's replicas can reach to one
 * other node's checkpoint chunk server (docs/storage.md, "Replica
 * credentials"). On `iod up --netns` (and any node whose replicas live on
 * the overlay) a replica reaches its node's host stack only at the
 * gateway address; the chunk servers listen on the nodes' underlay
 * addresses. The agent runs one relay per other node on the gateway, and
 * the replica's mutual-TLS session goes through it end to end: the relay
 * sees ciphertext only, never a credential, and the chunk server behind it
 * authenticates the replica (its service's SVID) and is authenticated by
 * it (a node of the cluster) exactly as on a direct connection.
 *
 * It must never speak for anyone: it opens no TLS, adds no header, and
 * connects only to the one target it was started for. Bounded:
 * RELAY_CONNS_MAX connections, each a thread with two RELAY_BUF_BYTES
 * buffers; a connect to the target is bounded by RELAY_CONNECT_MS.
 *
 * Shell code (sockets, threads).
 */
#include "iod/ckpt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_CONNS_MAX 32 /* a replica's store uses one per peer at a time, plus restores */
#define RELAY_BUF_BYTES (256 << 10) /* per direction: a 4 MiB chunk in 16 turns */
#define RELAY_CONNECT_MS 2000       /* the target's chunk server is on the underlay: fast or gone */
#define RELAY_IDLE_MS 60000         /* an idle relayed connection is closed (clients reconnect) */

struct iod_ckpt_relay {
	int lfd;                           /* listening socket */
	struct sockaddr_in target;         /* the chunk server */
	char addr[IOD_CKPT_PEER_ADDR_MAX]; /* where it listens (kernel's port) */
	char to[IOD_CKPT_PEER_ADDR_MAX];   /* the target, as given */
	pthread_t acceptor;                /* accept loop */
	pthread_mutex_t mu;                /* guards conns, stop */
	pthread_cond_t cv;                 /* conns went down */
	int conns;                         /* relayed connections open */
	_Atomic bool stop;                 /* set by stop: threads end */
};

static int parse_v4(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -EINVAL;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - s), s);
	long port = strtol(colon + 1, NULL, 10);
	if (port < 0 || port > 65535 || inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return -EINVAL;
	sa->sin_port = htons((uint16_t)port);
	return 0;
}

/* Connect to the target within RELAY_CONNECT_MS; the fd or -errno. */
static int connect_target(const struct iod_ckpt_relay *r)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)&r->target, sizeof(r->target)) &&
	    errno != EINPROGRESS) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	struct pollfd pf = {.fd = fd, .events = POLLOUT};
	int err = 0;
	socklen_t el = sizeof(err);
	if (poll(&pf, 1, RELAY_CONNECT_MS) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err) {
		close(fd);
		return -(err ? err : ETIMEDOUT);
	}
	return fd;
}

struct side {
	char *buf;  /* RELAY_BUF_BYTES */
	size_t len; /* bytes held, not yet written to the other side */
	size_t off; /* of them, written */
	bool eof;   /* the reading side closed */
};

struct relay_conn {
	struct iod_ckpt_relay *r;
	int fd; /* the client's */
};

static void *relay_conn(void *arg)
{
	struct relay_conn c = *(struct relay_conn *)arg;
	struct side s[2] = {{0}}; /* [0]: client -> target, [1]: target -> client */
	int fds[2] = {c.fd, -1};
	free(arg);
	s[0].buf = malloc(RELAY_BUF_BYTES);
	s[1].buf = malloc(RELAY_BUF_BYTES);
	if (s[0].buf && s[1].buf && (fds[1] = connect_target(c.r)) >= 0) {
		int one = 1;
		fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
		setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		while (!c.r->stop) {
			struct pollfd pf[2];
			for (int i = 0; i < 2; i++) {
				pf[i].fd = fds[i];
				/* read from i when its buffer is empty; write to i what the other holds */
				pf[i].events = (short)((!s[i].eof && s[i].len == 0 ? POLLIN : 0) |
				                       (s[1 - i].len > s[1 - i].off ? POLLOUT : 0));
				pf[i].revents = 0;
				if (!pf[i].events)
					pf[i].fd =
					    -1; /* nothing to do on it now: no POLLHUP spin */
			}
			if ((s[0].eof && !s[0].len) && (s[1].eof && !s[1].len))
				break;
			int n = poll(pf, 2, RELAY_IDLE_MS);
			if (n <= 0)
				break; /* idle or an error */
			bool dead = false;
			for (int i = 0; i < 2 && !dead; i++) {
				if (pf[i].revents & (POLLERR | POLLNVAL))
					dead = true;
				if (pf[i].revents & (POLLIN | POLLHUP) && !s[i].eof && !s[i].len) {
					ssize_t g = recv(fds[i], s[i].buf, RELAY_BUF_BYTES, 0);
					if (g > 0) {
						s[i].len = (size_t)g;
						s[i].off = 0;
					} else if (g == 0 || (errno != EAGAIN && errno != EINTR)) {
						s[i].eof = true;
						shutdown(fds[1 - i], SHUT_WR);
					}
				}
				struct side *o = &s[1 - i];
				if (pf[i].revents & POLLOUT && o->len > o->off) {
					ssize_t w = send(fds[i], o->buf + o->off, o->len - o->off,
					                 MSG_NOSIGNAL);
					if (w > 0)
						o->off += (size_t)w;
					else if (w < 0 && errno != EAGAIN && errno != EINTR)
						dead = true;
					if (o->off == o->len)
						o->len = o->off = 0;
				}
			}
			if (dead)
				break;
		}
	}
	if (fds[1] >= 0)
		close(fds[1]);
	close(c.fd);
	free(s[0].buf);
	free(s[1].buf);
	pthread_mutex_lock(&c.r->mu);
	c.r->conns--;
	pthread_cond_broadcast(&c.r->cv);
	pthread_mutex_unlock(&c.r->mu);
	return NULL;
}

static void *relay_accept(void *arg)
{
	struct iod_ckpt_relay *r = arg;
	while (!r->stop) {
		struct pollfd pf = {.fd = r->lfd, .events = POLLIN};
		if (poll(&pf, 1, 200) <= 0)
			continue;
		int fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&r->mu);
		bool room = r->conns < RELAY_CONNS_MAX;
		if (room)
			r->conns++;
		pthread_mutex_unlock(&r->mu);
		struct relay_conn *c = room ? malloc(sizeof(*c)) : NULL;
		pthread_t t;
		pthread_attr_t at;
		if (c) {
			c->r = r;
			c->fd = fd;
			pthread_attr_init(&at);
			pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			if (!pthread_create(&t, &at, relay_conn, c)) {
				pthread_attr_destroy(&at);
				continue;
			}
			pthread_attr_destroy(&at);
			free(c);
		}
		close(fd);
		if (room) {
			pthread_mutex_lock(&r->mu);
			r->conns--;
			pthread_mutex_unlock(&r->mu);
		}
	}
	return NULL;
}

int iod_ckpt_relay_start(const char *listen_addr, const char *target, struct iod_ckpt_relay **out,
                         struct iod_err *e)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	*out = NULL;
	struct iod_ckpt_relay *r = calloc(1, sizeof(*r));
	if (!r)
		return iod_err_set(e, -ENOMEM, "out of memory");
	if (parse_v4(listen_addr, &sa) || parse_v4(target, &r->target)) {
		free(r);
		return iod_err_set(e, -EINVAL, "checkpoint relay: %s or %s is not IPv4 host:port",
		                   listen_addr, target);
	}
	r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(r->lfd, 64) ||
	    getsockname(r->lfd, (struct sockaddr *)&sa, &sl)) {
		int rc = -errno;
		if (r->lfd >= 0)
			close(r->lfd);
		free(r);
		return iod_err_set(e, rc, "checkpoint relay: listen on %s: %s", listen_addr,
		                   strerror(-rc));
	}
	char host[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
	snprintf(r->addr, sizeof(r->addr), "%s:%u", host, (unsigned)ntohs(sa.sin_port));
	snprintf(r->to, sizeof(r->to), "%s", target);
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (pthread_create(&r->acceptor, NULL, relay_accept, r)) {
		close(r->lfd);
		free(r);
		return iod_err_set(e, -EAGAIN, "checkpoint relay: no thread");
	}
	*out = r;
	return 0;
}

const char *iod_ckpt_relay_addr(const struct iod_ckpt_relay *r)
{
	return r->addr;
}

const char *iod_ckpt_relay_target(const struct iod_ckpt_relay *r)
{
	return r->to;
}

void iod_ckpt_relay_stop(struct iod_ckpt_relay *r)
{
	if (!r)
		return;
	r->stop = true;
	pthread_join(r->acceptor, NULL);
	close(r->lfd);
	pthread_mutex_lock(&r->mu);
	while (r->conns > 0)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	free(r);
}
