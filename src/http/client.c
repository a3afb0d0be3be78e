/*
 * client.c: iod's one blocking HTTP client, on libcurl (include/iod/http.h).
 *
 * Every request is bounded: a deadline for the whole exchange, a limit on
 * the answer's size, and an optional stop flag that aborts it from another
 * thread. TLS (a CA bundle, a client certificate) is libcurl's GnuTLS
 * flavour, the same library libmicrohttpd serves the API with. A
 * connection is one libcurl easy handle: it keeps the server's connection
 * alive between requests and retries once on a fresh one when a kept-alive
 * connection turns out closed.
 *
 * Never prints; the reason for a failure goes into the caller's error.
 */
#include "iod/http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_ALL);
}

/* What a transfer collects. */
struct sink {
	struct iod_buf body; /* the answer so far */
	size_t max;          /* bytes it may hold */
	bool too_big;        /* the answer passed max */
	int status;          /* status_only: the status line's code */
};

/* status_only: the first header line is the status line; take its code and
 * end the transfer there. */
static size_t on_status(char *p, size_t size, size_t n, void *ctx)
{
	struct sink *s = ctx;
	size_t len = size * n;
	char line[64];
	int code = 0;
	memcpy(line, p, IOD_MIN(len, sizeof(line) - 1));
	line[IOD_MIN(len, sizeof(line) - 1)] = 0;
	if (!s->status && sscanf(line, "HTTP/%*d.%*d %d", &code) == 1 && code > 0)
		s->status = code;
	else if (!s->status && sscanf(line, "HTTP/%*d %d", &code) == 1 && code > 0)
		s->status = code;
	else
		s->status = -1; /* not a status line */
	return 0;               /* stop: CURLE_WRITE_ERROR */
}

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
	struct sink *s = ctx;
	size_t len = size * n;
	if (s->body.len + len > s->max) {
		s->too_big = true;
		return 0; /* CURLE_WRITE_ERROR */
	}
	return iod_buf_append(&s->body, p, len) ? 0 : len;
}

void iod_http_conn_init(struct iod_http_conn *c)
{
	memset(c, 0, sizeof(*c));
}

void iod_http_conn_close(struct iod_http_conn *c)
{
	if (c->multi)
		curl_multi_cleanup(c->multi);
	if (c->curl)
		curl_easy_cleanup(c->curl);
	c->curl = NULL;
	c->multi = NULL;
	c->addr[0] = 0;
}

void iod_http_response_free(struct iod_http_response *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

static int errno_of(CURLcode rc, const struct sink *s)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST: return -EHOSTUNREACH;
	case CURLE_OUT_OF_MEMORY: return -ENOMEM;
	case CURLE_ABORTED_BY_CALLBACK: return -EINTR;
	case CURLE_WRITE_ERROR: return s->too_big ? -E2BIG : -ENOMEM;
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING: return -EPIPE;
	default: return -EPROTO;
	}
}

/* The handle for addr: the kept one when it went there, else a fresh one. */
static int handle_for(struct iod_http_conn *c, const char *addr, struct iod_err *e)
{
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		return iod_err_set(e, -ENOMEM, "libcurl: %s", curl_easy_strerror(global_rc));
	if (c->curl && strcmp(c->addr, addr))
		iod_http_conn_close(c);
	if (!c->curl && !(c->curl = curl_easy_init()))
		return iod_err_set(e, -ENOMEM, "libcurl: no handle");
	if (iod_strlcpy(c->addr, addr, sizeof(c->addr)))
		return iod_err_set(e, -EINVAL, "address %s is longer than %d bytes", addr,
		                   IOD_ADDR_MAX - 1);
	return 0;
}

static void set_tls(CURL *h, const struct iod_http_tls *t)
{
	if (!t)
		return;
	if (t->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, t->ca_file);
	if (t->cert_file)
		curl_easy_setopt(h, CURLOPT_SSLCERT, t->cert_file);
	if (t->key_file)
		curl_easy_setopt(h, CURLOPT_SSLKEY, t->key_file);
}

/* The request's options on the kept handle (reset first: nothing of the
 * previous request carries over but the connection). */
static int set_request(CURL *h, const struct iod_http_conn *c, const char *url, const char *method,
                       struct curl_slist *hdrs, const void *body, size_t len, uint32_t timeout_ms,
                       struct sink *s)
{
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)IOD_MAX(timeout_ms, 1u));
	curl_easy_setopt(h, CURLOPT_USERAGENT, "iod/" IOD_VERSION);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	/* never through a proxy from the environment (http_proxy): iod talks to
	 * its own servers and replicas, as the hand-written clients did */
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	set_tls(h, c->tls);
	if (c->status_only) {
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_status);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
		curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
	}
	if (!strcmp(method, "HEAD")) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(method, "GET")) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
		if (body || len || !strcmp(method, "POST") || !strcmp(method, "PUT")) {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? (const char *)body : "");
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
		}
	}
	return 0;
}

/* Request headers: Content-Type for a body, no Expect: 100-continue (one
 * round trip more for bodies over 1 KiB), then the caller's. */
static struct curl_slist *headers_for(const char *method, const char *content_type,
                                      const void *body, size_t len, const char *const *extra)
{
	struct curl_slist *l = NULL, *n;
	char ct[256];
	bool has_body = body || len || !strcmp(method, "POST") || !strcmp(method, "PUT");
	snprintf(ct, sizeof(ct), "Content-Type: %s",
	         content_type ? content_type : "application/json");
	if (!(n = curl_slist_append(l, "Expect:")))
		return NULL;
	l = n;
	if (has_body && !(n = curl_slist_append(l, ct)))
		goto oom;
	l = n;
	for (uint32_t i = 0; extra && extra[i] && i < IOD_HTTP_REQ_HEADERS_MAX; i++) {
		if (!(n = curl_slist_append(l, extra[i])))
			goto oom;
		l = n;
	}
	return l;
oom:
	curl_slist_free_all(l);
	return NULL;
}

/*
 * The transfer on a multi handle, looking at the stop flag every
 * IOD_HTTP_STOP_SLICE_MS (libcurl's progress callback can be a second
 * apart when nothing moves, too slow for a proxy that is asked to stop).
 */
static CURLcode perform_stoppable(struct iod_http_conn *c)
{
	CURLcode cr = CURLE_OK;
	int running = 1;
	if (!c->multi && !(c->multi = curl_multi_init()))
		return CURLE_OUT_OF_MEMORY;
	if (curl_multi_add_handle(c->multi, c->curl) != CURLM_OK)
		return CURLE_OUT_OF_MEMORY;
	while (running) {
		if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
			cr = CURLE_OUT_OF_MEMORY;
			break;
		}
		if (!running)
			break;
		if (__atomic_load_n(c->stop, __ATOMIC_RELAXED)) {
			cr = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
		curl_multi_poll(c->multi, NULL, 0, IOD_HTTP_STOP_SLICE_MS, NULL);
	}
	CURLMsg *msg;
	int left;
	while (!running && (msg = curl_multi_info_read(c->multi, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == c->curl)
			cr = msg->data.result;
	curl_multi_remove_handle(c->multi, c->curl);
	return cr;
}

int iod_http_request(struct iod_http_conn *c, const char *addr, const char *method,
                     const char *path, const char *const *headers, const char *content_type,
                     const void *body, size_t len, uint32_t timeout_ms, struct iod_http_response *r,
                     struct iod_err *e)
{
	struct sink s = {.max = c->body_max ? c->body_max : IOD_HTTP_BODY_MAX};
	char url[IOD_ADDR_MAX + 2048];
	long status = 0;
	int rc;

	IOD_ASSERT(addr && method && path && path[0] == '/');
	memset(r, 0, sizeof(*r));
	c->sent = false;
	if ((rc = handle_for(c, addr, e)))
		return rc;
	if ((size_t)snprintf(url, sizeof(url), "%s://%s%s", c->tls ? "https" : "http", addr,
	                     path) >= sizeof(url))
		return iod_err_set(e, -E2BIG, "%s %s: the path is too long", method, path);
	struct curl_slist *hdrs = headers_for(method, content_type, body, len, headers);
	if (!hdrs)
		return iod_err_set(e, -ENOMEM, "out of memory");
	iod_buf_init(&s.body);
	set_request(c->curl, c, url, method, hdrs, body, len, timeout_ms, &s);
	CURLcode cr = c->stop ? perform_stoppable(c) : curl_easy_perform(c->curl);
	long sent = 0;
	curl_easy_getinfo(c->curl, CURLINFO_REQUEST_SIZE, &sent);
	c->sent = sent > 0;
	curl_slist_free_all(hdrs);
	if (c->status_only && cr == CURLE_WRITE_ERROR && s.status) {
		iod_buf_free(&s.body);
		iod_http_conn_close(c);
		if (s.status < 0)
			return iod_err_set(e, -EPROTO, "%s %s on %s: no status line", method, path,
			                   addr);
		r->status = s.status;
		return 0;
	}
	if (cr != CURLE_OK) {
		rc = errno_of(cr, &s);
		iod_buf_free(&s.body);
		iod_http_conn_close(c);
		return iod_err_set(e, rc, "%s %s on %s: %s", method, path, addr,
		                   rc == -E2BIG ? "the answer is over the body limit"
		                                : curl_easy_strerror(cr));
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	r->status = (int)status;
	r->body = s.body.data;
	r->len = s.body.len;
	return 0;
}

int iod_http_get(const char *addr, const char *path, uint32_t timeout_ms, char **body, size_t *len)
{
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	iod_http_conn_init(&c);
	int rc = iod_http_request(&c, addr, "GET", path, NULL, NULL, NULL, 0, timeout_ms, &r, &e);
	iod_http_conn_close(&c);
	if (rc)
		return rc;
	*body = r.body;
	*len = r.len;
	return r.status;
}
