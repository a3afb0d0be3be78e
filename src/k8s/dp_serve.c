/*
 * dp_serve.c: the device plugin's gRPC shell. HTTP/2 is libnghttp2's; gRPC
 * on top of it (length-prefixed messages, grpc-status trailers) and the
 * protobuf messages are iod's own (dp_wire.c, pure and fuzzed). One thread
 * polls every listener and connection; registering with kubelet runs on a
 * short-lived thread so kubelet may dial back while Register is in flight.
 *
 * Every request ends with a grpc-status: garbage in a gRPC message is 13
 * (INTERNAL, as grpc-go answers a message it cannot unmarshal), a bad
 * request 3, an unknown method 12, a message over 4 MiB 8. A connection
 * that does not speak HTTP/2 is sent GOAWAY and closed; the rest go on.
 * docs/kubernetes.md.
 */
#include "iod/k8s.h"

#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define COMP "devplugin"
#define CONNS_MAX 64
#define REGISTER_TIMEOUT_MS 5000

struct dp_res {
	enum iod_dp_resource r;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *endpoint; /* the socket's name in the dir */
	int lfd;
	ino_t ino;
	struct iod_dp_device devs[IOD_DP_IDS_MAX];
	uint32_t ndevs;
	struct iod_buf list; /* the current ListAndWatchResponse, framed */
};

struct dp_stream {
	int32_t id;
	char path[128];
	bool grpc_ct;
	bool too_big;
	bool watch;
	struct iod_buf in;
	struct iod_buf out;
	size_t off;
	struct dp_stream *next;
};

struct dp_conn {
	int fd;
	nghttp2_session *s;
	struct dp_res *res;
	struct dp_stream *streams;
	struct dp_srv *srv;
};

struct dp_srv {
	const struct iod_dp_serve_opts *o;
	struct dp_res res[2];
	uint32_t nres;
	struct dp_conn *conns[CONNS_MAX];
	uint32_t nconns;
	struct iod_dp_ids unhealthy;
	char kubelet[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* ---- grpc-status ------------------------------------------------------- */

/* grpc-message is percent-encoded (gRPC over HTTP/2). */
static void pct_encode(const char *in, char *out, size_t len)
{
	size_t n = 0;
	for (; *in && n + 4 < len; in++) {
		unsigned char c = (unsigned char)*in;
		if (c < 0x20 || c > 0x7e || c == '%')
			n += (size_t)snprintf(out + n, len - n, "%%%02X", c);
		else
			out[n++] = (char)c;
	}
	out[n] = '\0';
}

#define NV(k, v)                                                                               \
	{                                                                                      \
		(uint8_t *)(k), (uint8_t *)(v), sizeof(k) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE \
	}

/* A trailers-only answer: the status in the one HEADERS frame. */
static int reply_status(struct dp_conn *c, int32_t id, int http, int status, const char *msg)
{
	char st[12], hs[8], m[512];
	snprintf(st, sizeof(st), "%d", status);
	snprintf(hs, sizeof(hs), "%d", http);
	pct_encode(msg ? msg : "", m, sizeof(m));
	nghttp2_nv nv[] = {NV(":status", hs), NV("content-type", "application/grpc"),
	                   NV("grpc-status", st), NV("grpc-message", m)};
	if (status)
		IOD_DEBUG(COMP, "stream %d: grpc-status %d: %s", id, status, msg ? msg : "");
	return nghttp2_submit_response(c->s, id, nv, msg ? 4 : 3, NULL);
}

static ssize_t read_out(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *user)
{
	struct dp_stream *st = src->ptr;
	size_t left = st->out.len - st->off;
	if (!left) {
		if (st->watch)
			return NGHTTP2_ERR_DEFERRED; /* until the devices change */
		*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
		nghttp2_nv tr[] = {NV("grpc-status", "0")};
		if (nghttp2_submit_trailer(s, id, tr, 1))
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		return 0;
	}
	size_t n = left < len ? left : len;
	memcpy(buf, st->out.data + st->off, n);
	st->off += n;
	if (st->off == st->out.len)
		st->off = st->out.len = 0;
	return (ssize_t)n;
}

static int reply_msg(struct dp_conn *c, struct dp_stream *st, const struct iod_buf *msg)
{
	if (iod_grpc_frame_put(&st->out, msg->data, msg->len))
		return reply_status(c, st->id, 200, IOD_GRPC_RESOURCE_EXHAUSTED, "out of memory");
	nghttp2_nv nv[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
	nghttp2_data_provider dp = {.source.ptr = st, .read_callback = read_out};
	return nghttp2_submit_response(c->s, st->id, nv, 2, &dp);
}

/* ---- the methods ---------------------------------------------------------- */

#define SVC "/" IOD_DP_API_VERSION ".DevicePlugin/"

static int rebuild_list(struct dp_srv *v, struct dp_res *r)
{
	struct iod_buf m;
	iod_buf_init(&m);
	r->ndevs = iod_dp_devices(v->o->topo, r->r, &v->unhealthy, r->devs, IOD_DP_IDS_MAX);
	r->list.len = 0;
	int rc = iod_dp_enc_devices(&m, r->devs, r->ndevs);
	rc = rc ? rc : iod_grpc_frame_put(&r->list, m.data, m.len);
	iod_buf_free(&m);
	return rc;
}

static int handle(struct dp_conn *c, struct dp_stream *st)
{
	const struct iod_topo_node *t = c->srv->o->topo;
	enum iod_dp_resource r = c->res->r;
	const uint8_t *msg = NULL;
	size_t mlen = 0;
	struct iod_err e = {0};
	struct iod_buf out;
	int rc = 0;

	if (!st->grpc_ct)
		return reply_status(c, st->id, 415, IOD_GRPC_INTERNAL,
		                    "content-type is not application/grpc");
	if (st->too_big)
		return reply_status(c, st->id, 200, IOD_GRPC_RESOURCE_EXHAUSTED,
		                    "request over 4 MiB");
	long k = iod_grpc_frame_parse((const uint8_t *)st->in.data, st->in.len, IOD_DP_MSG_MAX,
	                              &msg, &mlen, &e);
	if (k <= 0 || (size_t)k != st->in.len) {
		if (k >= 0)
			iod_err_set(&e, -EINVAL,
			            "request is not one whole gRPC message (%zu bytes)",
			            st->in.len);
		return reply_status(c, st->id, 200, IOD_GRPC_INTERNAL, e.msg);
	}
	iod_buf_init(&out);
	const char *p = st->path;
	if (!strcmp(p, SVC "GetDevicePluginOptions")) {
		rc = iod_dp_enc_options(&out, false, r == IOD_DP_GPU || r == IOD_DP_DPU);
	} else if (!strcmp(p, SVC "ListAndWatch")) {
		st->watch = true;
		rc = iod_buf_append(&st->out, c->res->list.data, c->res->list.len);
		if (!rc) {
			nghttp2_nv nv[] = {NV(":status", "200"),
			                   NV("content-type", "application/grpc")};
			nghttp2_data_provider dp = {.source.ptr = st, .read_callback = read_out};
			rc = nghttp2_submit_response(c->s, st->id, nv, 2, &dp);
		}
		iod_buf_free(&out);
		return rc;
	} else if (!strcmp(p, SVC "GetPreferredAllocation") || !strcmp(p, SVC "Allocate") ||
	           !strcmp(p, SVC "PreStartContainer")) {
		enum iod_dp_req_kind kind = p[sizeof(SVC) - 1] == 'G'   ? IOD_DP_REQ_PREFERRED
		                            : p[sizeof(SVC) - 1] == 'A' ? IOD_DP_REQ_ALLOCATE
		                                                        : IOD_DP_REQ_PRESTART;
		struct iod_dp_req *q = malloc(sizeof(*q));
		if (!q || iod_dp_req_decode(kind, msg, mlen, q, &e)) {
			free(q);
			iod_buf_free(&out);
			return reply_status(c, st->id, 200, IOD_GRPC_INTERNAL,
			                    e.msg[0] ? e.msg : "out of memory");
		}
		int bad = 0;
		if (kind == IOD_DP_REQ_PREFERRED) {
			struct iod_dp_ids *ids = calloc(q->n ? q->n : 1, sizeof(*ids));
			for (uint32_t i = 0; ids && !bad && i < q->n; i++)
				bad = iod_dp_preferred(t, r, &q->c[i], &ids[i], &e);
			rc = !ids ? -ENOMEM : bad ? 0 : iod_dp_enc_preferred(&out, ids, q->n);
			free(ids);
		} else if (kind == IOD_DP_REQ_ALLOCATE) {
			struct iod_dp_alloc *a = calloc(q->n ? q->n : 1, sizeof(*a));
			for (uint32_t i = 0; a && !bad && i < q->n; i++)
				bad = iod_dp_allocate(t, r, &q->c[i].ids, &a[i], &e);
			rc = !a ? -ENOMEM : bad ? 0 : iod_dp_enc_allocate(&out, a, q->n);
			free(a);
		} else {
			/* nothing to prepare; the ids must be ours */
			struct iod_dp_alloc *a = malloc(sizeof(*a));
			bad = !a              ? -ENOMEM
			      : q->c[0].ids.n ? iod_dp_allocate(t, r, &q->c[0].ids, a, &e)
			                      : 0;
			free(a);
		}
		if (!bad && !rc && kind == IOD_DP_REQ_ALLOCATE)
			IOD_INFO(COMP, "%s: Allocate for %u container(s)", iod_dp_resource_name(r),
			         q->n);
		free(q);
		if (bad || rc) {
			iod_buf_free(&out);
			return reply_status(c, st->id, 200,
			                    rc ? IOD_GRPC_RESOURCE_EXHAUSTED
			                       : IOD_GRPC_INVALID_ARGUMENT,
			                    rc ? "out of memory" : e.msg);
		}
	} else {
		iod_buf_free(&out);
		char m[200];
		snprintf(m, sizeof(m), "unknown method %.150s", p);
		return reply_status(c, st->id, 200, IOD_GRPC_UNIMPLEMENTED, m);
	}
	rc = rc ? reply_status(c, st->id, 200, IOD_GRPC_RESOURCE_EXHAUSTED, "out of memory")
	        : reply_msg(c, st, &out);
	iod_buf_free(&out);
	return rc;
}

/* ---- nghttp2 callbacks ------------------------------------------------------ */

static ssize_t on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *user)
{
	struct dp_conn *c = user;
	ssize_t n = send(c->fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? NGHTTP2_ERR_WOULDBLOCK
		                                               : NGHTTP2_ERR_CALLBACK_FAILURE;
	return n;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
	struct dp_conn *c = user;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct dp_stream *st = calloc(1, sizeof(*st));
	if (!st)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
	st->id = f->hd.stream_id;
	iod_buf_init(&st->in);
	iod_buf_init(&st->out);
	st->next = c->streams;
	c->streams = st;
	nghttp2_session_set_stream_user_data(s, st->id, st);
	return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
	struct dp_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!st || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	if (nlen == 5 && !memcmp(name, ":path", 5)) {
		size_t n = vlen < sizeof(st->path) - 1 ? vlen : sizeof(st->path) - 1;
		memcpy(st->path, value, n);
		st->path[n] = '\0';
	} else if (nlen == 12 && !memcmp(name, "content-type", 12)) {
		st->grpc_ct = vlen >= 16 && !memcmp(value, "application/grpc", 16) &&
		              (vlen == 16 || value[16] == '+' || value[16] == ';');
	}
	return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
	struct dp_stream *st = nghttp2_session_get_stream_user_data(s, id);
	if (!st || st->too_big)
		return 0;
	if (st->in.len + len > IOD_DP_MSG_MAX + 5) {
		st->too_big = true;
		iod_buf_free(&st->in);
		iod_buf_init(&st->in);
		return 0;
	}
	return iod_buf_append(&st->in, data, len) ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

static int on_frame(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
	if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	struct dp_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!st)
		return 0;
	if (handle(user, st))
		nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
	return 0;
}

static void stream_free(struct dp_stream *st)
{
	iod_buf_free(&st->in);
	iod_buf_free(&st->out);
	free(st);
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *user)
{
	struct dp_conn *c = user;
	for (struct dp_stream **p = &c->streams; *p; p = &(*p)->next)
		if ((*p)->id == id) {
			struct dp_stream *st = *p;
			*p = st->next;
			stream_free(st);
			break;
		}
	return 0;
}

/* ---- connections ------------------------------------------------------------ */

static void conn_free(struct dp_conn *c)
{
	nghttp2_session_del(c->s); /* closes the streams through on_close */
	while (c->streams) {
		struct dp_stream *st = c->streams;
		c->streams = st->next;
		stream_free(st);
	}
	close(c->fd);
	free(c);
}

static nghttp2_session_callbacks *callbacks(void)
{
	static nghttp2_session_callbacks *cb;
	if (!cb && !nghttp2_session_callbacks_new(&cb)) {
		nghttp2_session_callbacks_set_send_callback(cb, on_send);
		nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
		nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
		nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
		nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
		nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
	}
	return cb;
}

static void accept_conn(struct dp_srv *v, struct dp_res *r)
{
	int fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	struct dp_conn *c = v->nconns < CONNS_MAX ? calloc(1, sizeof(*c)) : NULL;
	if (!c) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->res = r;
	c->srv = v;
	nghttp2_settings_entry set[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
	if (!callbacks() || nghttp2_session_server_new(&c->s, callbacks(), c) ||
	    nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, set, 1)) {
		if (c->s)
			nghttp2_session_del(c->s);
		close(fd);
		free(c);
		return;
	}
	v->conns[v->nconns++] = c;
}

/* Read what is there and answer; false when the connection is done. */
static bool conn_io(struct dp_conn *c, short rev)
{
	if (rev & POLLIN) {
		uint8_t buf[16384];
		ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return false;
		if (n > 0 && nghttp2_session_mem_recv(c->s, buf, (size_t)n) < 0) {
			/* not HTTP/2 (or a protocol error): GOAWAY if it can go, then close */
			nghttp2_session_terminate_session(c->s, NGHTTP2_PROTOCOL_ERROR);
			nghttp2_session_send(c->s);
			return false;
		}
	} else if (rev & (POLLHUP | POLLERR)) {
		return false;
	}
	if (nghttp2_session_send(c->s))
		return false;
	return nghttp2_session_want_read(c->s) || nghttp2_session_want_write(c->s);
}

/* ---- registration ----------------------------------------------------------- */

struct reg {
	char kubelet[108];
	char endpoint[64];
	enum iod_dp_resource r;
	struct iod_buf body;
	size_t off;
	int status; /* grpc-status, -1 none yet */
	char msg[256];
	bool closed;
	int fd;
};

static ssize_t reg_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *user)
{
	struct reg *g = user;
	ssize_t n = send(g->fd, data, len, MSG_NOSIGNAL);
	return n < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : n;
}

static ssize_t reg_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *user)
{
	struct reg *g = user;
	size_t n = g->body.len - g->off < len ? g->body.len - g->off : len;
	memcpy(buf, g->body.data + g->off, n);
	g->off += n;
	if (g->off == g->body.len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static int reg_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                      const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
	struct reg *g = user;
	if (nlen == 11 && !memcmp(name, "grpc-status", 11)) {
		char b[12] = {0};
		memcpy(b, value, vlen < 11 ? vlen : 11);
		g->status = atoi(b);
	} else if (nlen == 12 && !memcmp(name, "grpc-message", 12)) {
		size_t n = vlen < sizeof(g->msg) - 1 ? vlen : sizeof(g->msg) - 1;
		memcpy(g->msg, value, n);
		g->msg[n] = '\0';
	}
	return 0;
}

static int reg_close(nghttp2_session *s, int32_t id, uint32_t code, void *user)
{
	((struct reg *)user)->closed = true;
	return 0;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Register with kubelet (blocking, bounded): 0 or e says why. */
static int kubelet_register(struct reg *g, struct iod_err *e)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_session *s = NULL;
	struct iod_buf m;
	int rc = 0;
	iod_buf_init(&m);
	g->status = -1;
	iod_strlcpy(a.sun_path, g->kubelet, sizeof(a.sun_path));
	g->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (g->fd < 0 || connect(g->fd, (struct sockaddr *)&a, sizeof(a))) {
		rc = iod_err_set(e, -errno, "connect %s: %s", g->kubelet, strerror(errno));
		goto out;
	}
	rc = iod_dp_enc_register(&m, g->endpoint, iod_dp_resource_name(g->r), false, true);
	rc = rc ? rc : iod_grpc_frame_put(&g->body, m.data, m.len);
	if (rc || nghttp2_session_callbacks_new(&cb)) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	nghttp2_session_callbacks_set_send_callback(cb, reg_send);
	nghttp2_session_callbacks_set_on_header_callback(cb, reg_header);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, reg_close);
	nghttp2_nv nv[] = {NV(":method", "POST"),
	                   NV(":scheme", "http"),
	                   NV(":authority", "localhost"),
	                   NV(":path", "/" IOD_DP_API_VERSION ".Registration/Register"),
	                   NV("content-type", "application/grpc"),
	                   NV("te", "trailers")};
	nghttp2_data_provider dp = {.read_callback = reg_read};
	if (nghttp2_session_client_new(&s, cb, g) ||
	    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0) ||
	    nghttp2_submit_request(s, NULL, nv, IOD_ARRAY_LEN(nv), &dp, NULL) < 0) {
		rc = iod_err_set(e, -ENOMEM, "HTTP/2 session: out of memory");
		goto out;
	}
	long end = now_ms() + REGISTER_TIMEOUT_MS;
	while (!g->closed) {
		if (nghttp2_session_send(s)) {
			rc = iod_err_set(e, -EIO, "%s: send failed", g->kubelet);
			goto out;
		}
		long left = end - now_ms();
		struct pollfd p = {.fd = g->fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			rc = iod_err_set(e, -ETIMEDOUT, "%s: no answer to Register in %d ms",
			                 g->kubelet, REGISTER_TIMEOUT_MS);
			goto out;
		}
		uint8_t buf[4096];
		ssize_t n = recv(g->fd, buf, sizeof(buf), 0);
		if (n <= 0 || nghttp2_session_mem_recv(s, buf, (size_t)n) < 0) {
			rc = iod_err_set(e, -EIO, "%s: connection closed during Register",
			                 g->kubelet);
			goto out;
		}
	}
	if (g->status != 0)
		rc = iod_err_set(e, -EPROTO, "kubelet refused Register: grpc-status %d %s",
		                 g->status, g->msg);
out:
	if (s)
		nghttp2_session_del(s);
	if (cb)
		nghttp2_session_callbacks_del(cb);
	if (g->fd >= 0)
		close(g->fd);
	iod_buf_free(&m);
	return rc;
}

static void *reg_thread(void *arg)
{
	struct reg *g = arg;
	struct iod_err e = {0};
	if (kubelet_register(g, &e))
		IOD_ERROR(COMP, "%s: %s", iod_dp_resource_name(g->r), e.msg);
	else
		IOD_INFO(COMP, "%s: registered with kubelet (%s, endpoint %s)",
		         iod_dp_resource_name(g->r), g->kubelet, g->endpoint);
	iod_buf_free(&g->body);
	free(g);
	return NULL;
}

static void register_async(struct dp_srv *v, struct dp_res *r)
{
	if (!v->kubelet[0])
		return;
	struct reg *g = calloc(1, sizeof(*g));
	pthread_t th;
	if (!g)
		return;
	iod_strlcpy(g->kubelet, v->kubelet, sizeof(g->kubelet));
	iod_strlcpy(g->endpoint, r->endpoint, sizeof(g->endpoint));
	g->r = r->r;
	g->fd = -1;
	iod_buf_init(&g->body);
	if (pthread_create(&th, NULL, reg_thread, g)) {
		iod_buf_free(&g->body);
		free(g);
		return;
	}
	pthread_detach(th);
}

/* ---- listeners, health ------------------------------------------------------ */

static int listen_res(struct dp_res *r, struct iod_err *e)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct stat sb;
	iod_strlcpy(a.sun_path, r->path, sizeof(a.sun_path));
	unlink(r->path);
	r->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&a, sizeof(a)) || listen(r->lfd, 16) ||
	    stat(r->path, &sb)) {
		int err = errno;
		if (r->lfd >= 0)
			close(r->lfd);
		r->lfd = -1;
		return iod_err_set(e, -err, "listen on %s: %s", r->path, strerror(err));
	}
	r->ino = sb.st_ino;
	return 0;
}

/* The unhealthy-file's ids (one a line, # comments); a missing file = none. */
static void read_unhealthy(const char *path, struct iod_dp_ids *out)
{
	FILE *f = fopen(path, "r");
	char line[256];
	out->n = 0;
	if (!f)
		return;
	while (out->n < IOD_DP_IDS_MAX && fgets(line, sizeof(line), f)) {
		char *p = line + strspn(line, " \t");
		p[strcspn(p, " \t\r\n#")] = '\0';
		if (*p)
			iod_strlcpy(out->id[out->n++], p, IOD_DP_ID_MAX);
	}
	fclose(f);
}

/* Push the new device list to every ListAndWatch stream of r. */
static void push_list(struct dp_srv *v, struct dp_res *r)
{
	for (uint32_t i = 0; i < v->nconns; i++) {
		struct dp_conn *c = v->conns[i];
		if (c->res != r)
			continue;
		for (struct dp_stream *st = c->streams; st; st = st->next)
			if (st->watch && !iod_buf_append(&st->out, r->list.data, r->list.len))
				nghttp2_session_resume_data(c->s, st->id);
		nghttp2_session_send(c->s);
	}
}

static void tick(struct dp_srv *v)
{
	if (v->o->unhealthy_file) {
		struct iod_dp_ids now;
		read_unhealthy(v->o->unhealthy_file, &now);
		bool same = now.n == v->unhealthy.n;
		for (uint32_t i = 0; same && i < now.n; i++)
			same = !strcmp(now.id[i], v->unhealthy.id[i]);
		if (!same) {
			v->unhealthy = now;
			for (uint32_t k = 0; k < v->nres; k++) {
				struct dp_res *r = &v->res[k];
				struct iod_dp_device was[IOD_DP_IDS_MAX];
				memcpy(was, r->devs, sizeof(was));
				if (rebuild_list(v, r) || !memcmp(was, r->devs, sizeof(was)))
					continue; /* not this resource's devices */
				IOD_INFO(COMP,
				         "%s: health changed, sent to its ListAndWatch streams",
				         iod_dp_resource_name(r->r));
				push_list(v, r);
			}
		}
	}
	/* kubelet removes every socket of its dir when it starts: listen again
	 * and register again */
	for (uint32_t k = 0; k < v->nres; k++) {
		struct dp_res *r = &v->res[k];
		struct stat sb;
		if (!stat(r->path, &sb) && sb.st_ino == r->ino)
			continue;
		struct iod_err e = {0};
		if (r->lfd >= 0)
			close(r->lfd);
		r->lfd = -1;
		if (listen_res(r, &e)) {
			IOD_ERROR(COMP, "%s", e.msg);
			continue;
		}
		IOD_INFO(COMP, "%s: socket %s was removed (kubelet restarted?): registering again",
		         iod_dp_resource_name(r->r), r->path);
		register_async(v, r);
	}
}

int iod_dp_serve(const struct iod_dp_serve_opts *o, struct iod_err *e)
{
	struct dp_srv *v = calloc(1, sizeof(*v));
	int rc = 0;
	if (!v)
		return iod_err_set(e, -ENOMEM, "out of memory");
	v->o = o;
	if (o->kubelet_socket)
		iod_strlcpy(v->kubelet, o->kubelet_socket, sizeof(v->kubelet));
	else if (snprintf(v->kubelet, sizeof(v->kubelet), "%s/kubelet.sock", o->dir) >=
	         (int)sizeof(v->kubelet))
		rc = iod_err_set(e, -ENAMETOOLONG, "%s: path too long", o->dir);
	if (o->unhealthy_file)
		read_unhealthy(o->unhealthy_file, &v->unhealthy);
	for (int r = 0; !rc && r < 2; r++) {
		if (!o->resource[r])
			continue;
		struct dp_res *x = &v->res[v->nres++];
		x->r = (enum iod_dp_resource)r;
		x->lfd = -1;
		x->endpoint = r == IOD_DP_DPU ? "iod-dpu.sock" : "iod-gpu.sock";
		iod_buf_init(&x->list);
		if (snprintf(x->path, sizeof(x->path), "%s/%s", o->dir, x->endpoint) >=
		    (int)sizeof(x->path))
			rc = iod_err_set(e, -ENAMETOOLONG, "%s: path too long", o->dir);
		rc = rc ? rc : rebuild_list(v, x);
		rc = rc ? rc : listen_res(x, e);
		if (!rc)
			IOD_INFO(COMP, "%s: %u devices on %s", iod_dp_resource_name(x->r), x->ndevs,
			         x->path);
	}
	for (uint32_t k = 0; !rc && k < v->nres; k++)
		register_async(v, &v->res[k]);
	long last = now_ms();
	while (!rc && !*o->stop) {
		struct pollfd p[2 + CONNS_MAX];
		uint32_t n = 0;
		for (uint32_t k = 0; k < v->nres; k++)
			p[n++] = (struct pollfd){.fd = v->res[k].lfd, .events = POLLIN};
		for (uint32_t i = 0; i < v->nconns; i++)
			p[n++] = (struct pollfd){
			    .fd = v->conns[i]->fd,
			    .events = (short)(POLLIN |
			                      (nghttp2_session_want_write(v->conns[i]->s) ? POLLOUT
			                                                                  : 0))};
		int k = poll(p, n, 250);
		if (k < 0 && errno != EINTR) {
			rc = iod_err_set(e, -errno, "poll: %s", strerror(errno));
			break;
		}
		uint32_t nc = v->nconns;
		for (uint32_t i = 0, j = 0; k > 0 && i < nc; i++) {
			struct dp_conn *c = v->conns[j];
			if (conn_io(c, p[v->nres + i].revents)) {
				j++;
				continue;
			}
			conn_free(c);
			memmove(&v->conns[j], &v->conns[j + 1],
			        (v->nconns - j - 1) * sizeof(v->conns[0]));
			v->nconns--;
		}
		for (uint32_t r = 0; k > 0 && r < v->nres; r++)
			if (p[r].revents & POLLIN)
				accept_conn(v, &v->res[r]);
		if (now_ms() - last >= 1000) {
			last = now_ms();
			tick(v);
		}
	}
	for (uint32_t i = 0; i < v->nconns; i++)
		conn_free(v->conns[i]);
	for (uint32_t k = 0; k < v->nres; k++) {
		if (v->res[k].lfd >= 0) {
			close(v->res[k].lfd);
			unlink(v->res[k].path);
		}
		iod_buf_free(&v->res[k].list);
	}
	free(v);
	return rc;
}
