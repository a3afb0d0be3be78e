/*
 * proxy_l4.c: L4 (TCP) forwarding: accept on the service VIP, pick an
 * endpoint per connection, connect (retrying connect failures on another
 * endpoint), then move bytes both ways with splice(2) through a pipe per
 * direction, so payload never enters user space. Half-closes propagate
 * (shutdown of the write side); a flow record goes to the span ring when the
 * connection ends. With --no-splice (or when pipes cannot be made) bytes are
 * copied through the connection's buffer instead.
 *
 * Never allocates: pipes are made once per connection slot and reused.
 */
#include "internal.h"

#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes a pipe holds by default (16 pages). */
#define PIPE_BYTES 65536u

static struct wsvc *svc_of(struct worker *w, struct conn *c)
{
	return &w->svcs[c->slot];
}

static uint32_t dir_cap(const struct l4dir *d)
{
	return d->pipe_r >= 0 ? PIPE_BYTES : IOD_MESH_HTTP_BUF;
}

/* Recompute both sockets' epoll interest from the two directions. */
static void l4_interest(struct worker *w, struct conn *c)
{
	struct conn *u = c->peer;
	uint32_t ce = 0, ue = 0;
	for (int k = 0; k < 2; k++) {
		struct l4dir *d = &c->d[k];
		bool want_in = !d->eof && d->bytes < dir_cap(d) && !c->pipe_full[k];
		bool want_out = d->bytes > 0;
		if (k == 0) {
			ce |= want_in ? EPOLLIN : 0;
			ue |= want_out ? EPOLLOUT : 0;
		} else {
			ue |= want_in ? EPOLLIN : 0;
			ce |= want_out ? EPOLLOUT : 0;
		}
	}
	iod_mesh_conn_watch(w, c, ce);
	iod_mesh_conn_watch(w, u, ue);
}

static void release_ep(struct worker *w, struct wsvc *s, struct conn *c)
{
	if (!c->ep_active)
		return;
	c->ep_active = false;
	if (c->svc_gen == s->gen && c->ep < s->outlier.n) {
		IOD_ASSERT_HOT(s->outlier.hosts[c->ep].active_requests > 0);
		s->outlier.hosts[c->ep].active_requests--;
		STAT_ADD(s->eps[c->ep].active, (uint64_t)-1);
	}
}

static void finish(struct worker *w, struct conn *c, int err)
{
	struct wsvc *s = svc_of(w, c);
	struct iod_mesh_span *sp = &c->span;

	sp->kind = IOD_MESH_SPAN_FLOW;
	iod_mesh_trace_ids_new(&w->rng, sp->trace_id, 16);
	iod_mesh_trace_ids_new(&w->rng, sp->span_id, 8);
	iod_strlcpy(sp->service, s->svc.name, sizeof(sp->service));
	if (c->ep != UINT32_MAX)
		iod_mesh_addr_format(c->ep_ip4, c->ep_port, sp->peer, sizeof(sp->peer));
	iod_strlcpy(sp->client, c->client_addr, sizeof(sp->client));
	sp->start_unix_ns = (uint64_t)((int64_t)c->req_start_ns + w->p->unix_offset_ns);
	sp->end_unix_ns = iod_mesh_unix_ns(w);
	sp->bytes_in = c->d[0].total;
	sp->bytes_out = c->d[1].total;
	sp->status = (uint16_t)(err < 0 ? -err : err);
	sp->attempts = c->attempts;
	iod_mesh_span_ring_push(w->spans, sp);

	STAT_ADD(s->st.bytes_in, c->d[0].total);
	STAT_ADD(s->st.bytes_out, c->d[1].total);
	STAT_ADD(s->st.cx_active, (uint64_t)-1);
	/* A peer resetting or going away mid-flow is how many clients close;
	 * the flow record keeps the errno, the error counter does not count it. */
	if (err && err != -ECONNRESET && err != -EPIPE)
		STAT_INC(s->st.errors);
	iod_mesh_latency_observe(&s->st, w->now_ns - c->req_start_ns);
	if (c->holds_cx && c->life == s->life)
		iod_mesh_breaker_release(&s->breaker, IOD_MESH_BRK_CONNECTIONS);
	if (c->holds_retry && c->life == s->life)
		iod_mesh_breaker_release(&s->breaker, IOD_MESH_BRK_RETRIES);
	release_ep(w, s, c);
	/* A pipe with bytes left would leak them into the next flow: drop it. */
	for (int k = 0; k < 2; k++) {
		if (c->d[k].pipe_r >= 0 && c->d[k].bytes) {
			close(c->d[k].pipe_r);
			close(c->d[k].pipe_w);
			c->d[k].pipe_r = c->d[k].pipe_w = -1;
		}
	}
	if (c->peer)
		iod_mesh_conn_put(w, c->peer);
	iod_mesh_conn_put(w, c);
}

static void l4_connect(struct worker *w, struct conn *c, uint32_t exclude);

static void connect_failed(struct worker *w, struct conn *c, int err)
{
	struct wsvc *s = svc_of(w, c);
	struct conn *u = c->peer;

	c->peer = NULL;
	if (u)
		iod_mesh_conn_put(w, u);
	release_ep(w, s, c);
	iod_mesh_ep_done(w, s, c, IOD_MESH_CONNECT_FAIL);
	if (c->holds_retry && c->life == s->life)
		iod_mesh_breaker_release(&s->breaker, IOD_MESH_BRK_RETRIES);
	c->holds_retry = false;
	/* Nothing was sent: retry at once on another endpoint (docs/mesh.md). */
	if (iod_mesh_retry_allowed(&s->breaker, &s->brk, &s->svc.retry, c->attempts)) {
		c->holds_retry = true;
		STAT_INC(s->st.retries);
		l4_connect(w, c, c->ep);
		return;
	}
	finish(w, c, err);
}

static void l4_connect(struct worker *w, struct conn *c, uint32_t exclude)
{
	struct wsvc *s = svc_of(w, c);
	bool panic;
	if (!s->active) {
		finish(w, c, -EHOSTUNREACH); /* the service left the view */
		return;
	}
	int ep = iod_mesh_lb_pick(&s->lb, &s->svc, &s->outlier, w->node, w->rack, c->affinity,
	                          exclude, &w->rng, &panic);
	if (ep < 0) {
		finish(w, c, ep);
		return;
	}
	if (panic)
		STAT_INC(s->st.panic);
	c->ep = (uint32_t)ep;
	c->svc_gen = s->gen;
	c->ep_ip4 = s->svc.eps[ep].ip4;
	c->ep_port = s->svc.eps[ep].port;
	c->attempts++;
	c->ep_active = true;
	s->outlier.hosts[ep].active_requests++;
	STAT_INC(s->eps[ep].active);
	int id = iod_mesh_upstream_identity(w, s, c->ep, c);
	int fd = id < 0 ? id : iod_mesh_upstream_connect(w, s, c->ep, id);
	if (fd < 0) {
		connect_failed(w, c, fd);
		return;
	}
	struct conn *u = iod_mesh_conn_get(w, CK_L4_UP, fd);
	if (!u) {
		close(fd);
		release_ep(w, s, c);
		finish(w, c, -ENOSPC);
		return;
	}
	u->slot = c->slot;
	u->peer = c;
	c->peer = u;
	u->tp = w->up_tp;
	c->span.tp_up = u->tp;
	STAT_INC(s->st.tp_up[u->tp]);
	u->connect_start_ns = w->now_ns;
	if (iod_mesh_conn_watch(w, u, EPOLLOUT))
		connect_failed(w, c, -EIO);
}

void iod_mesh_l4_accept(struct worker *w, struct wsvc *s, int fd, const struct accepted *a)
{
	struct conn *c = iod_mesh_conn_get(w, CK_L4_CLIENT, fd);
	if (!c) {
		w->cx_refused++;
		iod_mesh_clients_release(w->clients, a->ip4, a->key_uid);
		close(fd);
		return;
	}
	iod_mesh_conn_client(w, c, a);
	c->slot = (uint32_t)(s - w->svcs);
	c->life = s->life;
	c->req_start_ns = w->now_ns;
	const char *client = a->client, *colon = strrchr(client, ':');
	c->affinity = iod_hash_bytes(client, colon ? (size_t)(colon - client) : strlen(client), 0);
	STAT_INC(s->st.requests);
	STAT_INC(s->st.cx_active);
	if (iod_mesh_breaker_acquire(&s->breaker, &s->brk, IOD_MESH_BRK_CONNECTIONS)) {
		STAT_INC(s->st.overflow);
		finish(w, c, -EBUSY);
		return;
	}
	c->holds_cx = true;
	if (iod_mesh_conn_watch(w, c, 0)) {
		finish(w, c, -EIO);
		return;
	}
	l4_connect(w, c, UINT32_MAX);
}

static void connected(struct worker *w, struct conn *c)
{
	struct wsvc *s = svc_of(w, c);
	struct conn *u = c->peer;

	u->connect_start_ns = 0;
	iod_mesh_ep_done(w, s, c, IOD_MESH_OK);
	if (c->holds_retry && c->life == s->life)
		iod_mesh_breaker_release(&s->breaker, IOD_MESH_BRK_RETRIES);
	c->holds_retry = false;
	for (int k = 0; k < 2; k++) {
		struct l4dir *d = &c->d[k];
		if (!w->p->opts.no_splice && d->pipe_r < 0) {
			int pfd[2];
			if (pipe2(pfd, O_NONBLOCK | O_CLOEXEC) == 0) {
				d->pipe_r = pfd[0];
				d->pipe_w = pfd[1];
			}
		}
		if (w->p->opts.no_splice && d->pipe_r >= 0) {
			close(d->pipe_r);
			close(d->pipe_w);
			d->pipe_r = d->pipe_w = -1;
		}
	}
	c->last_io_ns = w->now_ns;
	l4_interest(w, c);
}

/* Move bytes of direction k as far as they go. 0, or a negative errno. */
static int pump(struct conn *c, int k)
{
	struct l4dir *d = &c->d[k];
	struct conn *from = k == 0 ? c : c->peer, *to = k == 0 ? c->peer : c;
	char *buf = k == 0 ? c->buf : c->peer->buf;
	const unsigned fl = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;

	/* A short read means the socket is drained for now: level-triggered
	 * epoll reports it again when more arrives, so only a full read loops.
	 * That saves the EAGAIN round trip on small messages. */
	for (int turns = 0; turns < 64; turns++) {
		bool again = false;
		ssize_t n;
		if (!d->eof && d->bytes < dir_cap(d) && !c->pipe_full[k]) {
			size_t want = d->pipe_r >= 0 ? dir_cap(d) - d->bytes
			                             : IOD_MESH_HTTP_BUF - d->off - d->bytes;
			if (d->pipe_r >= 0)
				n = splice(from->fd, NULL, d->pipe_w, NULL, want, fl);
			else if (want)
				n = read(from->fd, buf + d->off + d->bytes, want);
			else
				n = -1, errno = EAGAIN;
			if (n > 0) {
				d->bytes += (uint32_t)n;
				again = (size_t)n == want;
			} else if (n == 0) {
				d->eof = true;
			} else if (errno == EAGAIN) {
				/* A pipe can fill with fewer bytes than its size (partial
				 * pages): stop asking until it drains. */
				if (d->pipe_r >= 0 && d->bytes)
					c->pipe_full[k] = true;
			} else {
				return -errno;
			}
		}
		if (d->bytes) {
			if (d->pipe_r >= 0)
				n = splice(d->pipe_r, NULL, to->fd, NULL, d->bytes, fl);
			else
				n = send(to->fd, buf + d->off, d->bytes, MSG_NOSIGNAL);
			if (n > 0) {
				d->bytes -= (uint32_t)n;
				d->total += (uint64_t)n;
				if (d->pipe_r < 0)
					d->off = d->bytes ? d->off + (uint32_t)n : 0;
				if (c->pipe_full[k])
					again = true; /* room again: read what waits */
				c->pipe_full[k] = false;
			} else if (n < 0 && errno != EAGAIN) {
				return -errno;
			}
			if (d->bytes)
				again = false; /* the destination is full: wait for EPOLLOUT */
		}
		if (!again)
			break;
	}
	if (d->eof && !d->bytes && !d->shut) {
		shutdown(to->fd, SHUT_WR);
		d->shut = true;
	}
	return 0;
}

void iod_mesh_l4_event(struct worker *w, struct conn *x, uint32_t ev)
{
	struct conn *c = x->kind == CK_L4_CLIENT ? x : x->peer;
	int rc = 0;

	IOD_ASSERT(c != NULL); /* an upstream always has its client */
	IOD_ASSERT_HOT(c->kind == CK_L4_CLIENT);
	struct conn *u = c->peer;
	if (u && u->connect_start_ns) {
		if (x != u) {
			/* client bytes wait until the upstream is connected */
			if (ev & (EPOLLERR | EPOLLHUP))
				finish(w, c, -ECONNRESET);
			return;
		}
		int err = 0;
		socklen_t l = sizeof(err);
		getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err || (ev & (EPOLLERR | EPOLLHUP)))
			connect_failed(w, c, -(err ? err : ECONNREFUSED));
		else
			connected(w, c);
		return;
	}
	if (!u)
		return;
	uint64_t before = c->d[0].total + c->d[1].total + c->d[0].bytes + c->d[1].bytes;
	/* Pump only the directions this event concerns: readable -> the one
	 * from x, writable -> the one to x; errors -> both. */
	bool all = ev & (EPOLLERR | EPOLLHUP);
	bool from_c = x == c;
	if (all || ((ev & EPOLLIN) && from_c) || ((ev & EPOLLOUT) && !from_c))
		rc = pump(c, 0);
	if (!rc && (all || ((ev & EPOLLIN) && !from_c) || ((ev & EPOLLOUT) && from_c)))
		rc = pump(c, 1);
	if (rc) {
		finish(w, c, rc);
		return;
	}
	if (c->d[0].shut && c->d[1].shut) {
		finish(w, c, 0);
		return;
	}
	if (c->d[0].total + c->d[1].total + c->d[0].bytes + c->d[1].bytes != before)
		c->last_io_ns = w->now_ns;
	else if (ev & (EPOLLERR | EPOLLHUP)) {
		finish(w, c, (ev & EPOLLERR) ? -ECONNRESET : 0); /* gone, nothing moved */
		return;
	}
	l4_interest(w, c);
}

void iod_mesh_l4_timer(struct worker *w, struct conn *c)
{
	struct wsvc *s = svc_of(w, c);
	struct conn *u = c->peer;
	enum iod_mesh_timer t = iod_mesh_timeout_check(&s->svc.timeout, u ? u->connect_start_ns : 0,
	                                               0, c->last_io_ns, w->now_ns);
	if (t == IOD_MESH_T_CONNECT)
		connect_failed(w, c, -ETIMEDOUT);
	else if (t == IOD_MESH_T_IDLE)
		finish(w, c, -ETIMEDOUT);
}
