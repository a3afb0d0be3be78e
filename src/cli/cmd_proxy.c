/*
 * cmd_proxy.c: `iod proxy`: the node's mesh proxy in standalone mode, and
 * the small tools around it.
 *
 *   iod proxy run --config FILE [--workers N] [--admin ADDR] [--dns ADDR]
 *   iod proxy check --config FILE [-o json]   validate, show VIPs
 *   iod proxy env --config FILE               IOD_SVC_<NAME>_ADDR=vip:port lines
 *   iod proxy backend --listen ADDR [--name N] [--size BYTES] [--call URL] [--status CODE]
 *
 * `run` reads services and endpoints from a JSON file (re-read when it
 * changes) until the control plane's watch feeds the proxy inside the agent.
 * `backend` is iod's own tiny HTTP server for tests, demos and benchmarks.
 * A shell: parses options, starts things, prints.
 */
#include "cli.h"
#include "iod/mesh.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	IOD_UNUSED(sig);
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: iod proxy run (--config FILE | --server ADDR [--node NAME]) [--workers N]\n"
	    "                     [--admin ADDR] [--dns ADDR] [--seed N] [--no-splice]\n"
	    "                     [--no-watch]\n"
	    "       iod proxy check --config FILE [-o text|json]\n"
	    "       iod proxy env --config FILE\n"
	    "       iod proxy backend --listen ADDR [--name NAME] [--size BYTES]\n"
	    "                     [--call http://HOST:PORT/PATH] [--status CODE]\n"
	    "                     [--file PATH] [--chunked] [--sink PATH] [--read-rate BYTES]\n\n"
	    "The node's service-mesh proxy in standalone mode (docs/mesh.md).\n"
	    "  run      serve every service of FILE on its loopback VIP (127.x.y.z:port),\n"
	    "           balancing over its endpoints; FILE is re-read when it changes.\n"
	    "           --server ADDR follows the control plane instead (its services and\n"
	    "           the endpoints agents report); --node NAME is this node (locality).\n"
	    "           Changes arrive by the API's watch (pushes) with a full re-read\n"
	    "           every 5 s; --no-watch polls every 200 ms instead\n"
	    "           --workers N   epoll threads (default: 2)\n"
	    "           --admin ADDR  admin endpoint: /metrics /spans /v1/traces /registry\n"
	    "                         (default 127.0.0.1:15000; \"off\" to disable)\n"
	    "           --dns ADDR    answer <service>.iod A queries (UDP), e.g. 127.0.0.1:15053\n"
	    "           --no-splice   L4: copy through user space instead of splice(2)\n"
	    "  check    validate FILE and print each service's address and endpoints\n"
	    "  env      print IOD_SVC_<NAME>_ADDR=vip:port for every service (for workloads)\n"
	    "  backend  a small HTTP/1.1 server: answers every request with BYTES bytes\n"
	    "           (default 1024) naming itself; --call makes it call another\n"
	    "           service first, passing the traceparent on; --status sets the code.\n"
	    "           Request bodies of any size are read (Content-Length or chunked);\n"
	    "           answers carry x-body-bytes: N (payload bytes received)\n"
	    "           --file PATH       answer with PATH's contents instead\n"
	    "           --chunked         answer with Transfer-Encoding: chunked\n"
	    "           --sink PATH       write each request's decoded body to PATH\n"
	    "           --read-rate BYTES read request bodies at most BYTES per second\n");
}

static int load(const char *path, struct iod_mesh_registry *r)
{
	struct iod_err e = {0};
	if (iod_mesh_registry_init(r, 0))
		return iod_cli_fail("proxy", IOD_EXIT_ERROR, "out of memory");
	if (iod_mesh_config_load(path, r, &e)) {
		iod_mesh_registry_free(r);
		return iod_cli_fail("proxy", IOD_EXIT_INVALID, "%s", e.msg);
	}
	return 0;
}

static int do_check(const char *path, bool json, bool env_only)
{
	struct iod_mesh_registry r;
	char vip[32], env[IOD_NAME_MAX + 16], addr[32];
	int rc = load(path, &r);
	if (rc)
		return rc;
	if (env_only) {
		for (uint32_t i = 0; i < r.svcs_n; i++) {
			iod_mesh_env_name(r.svcs[i].name, env, sizeof(env));
			iod_mesh_addr_format(r.svcs[i].vip4, r.svcs[i].port, vip, sizeof(vip));
			printf("%s=%s\n", env, vip);
		}
	} else if (json) {
		json_t *arr = json_array();
		for (uint32_t i = 0; i < r.svcs_n; i++) {
			const struct iod_mesh_service *s = &r.svcs[i];
			json_t *eps = json_array();
			for (uint32_t j = 0; j < s->eps_n; j++) {
				iod_mesh_addr_format(s->eps[j].ip4, s->eps[j].port, addr,
				                     sizeof(addr));
				json_array_append_new(
				    eps, json_pack("{s:s, s:s, s:s, s:i, s:b}", "addr", addr,
				                   "node", s->eps[j].node, "rack", s->eps[j].rack,
				                   "weight", (json_int_t)s->eps[j].weight,
				                   "healthy", s->eps[j].healthy));
			}
			iod_mesh_addr_format(s->vip4, s->port, vip, sizeof(vip));
			iod_mesh_env_name(s->name, env, sizeof(env));
			json_array_append_new(
			    arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "name", s->name,
			                   "address", vip, "env", env, "mode",
			                   s->mode == IOD_MESH_MODE_TCP ? "tcp" : "http", "lb",
			                   iod_mesh_lb_name(s->lb), "endpoints", eps));
		}
		iod_json_print(stdout, arr, false);
		json_decref(arr);
	} else {
		printf("%-20s %-22s %-5s %-14s %s\n", "SERVICE", "ADDRESS", "MODE", "LB",
		       "ENDPOINTS");
		for (uint32_t i = 0; i < r.svcs_n; i++) {
			const struct iod_mesh_service *s = &r.svcs[i];
			iod_mesh_addr_format(s->vip4, s->port, vip, sizeof(vip));
			printf("%-20s %-22s %-5s %-14s", s->name, vip,
			       s->mode == IOD_MESH_MODE_TCP ? "tcp" : "http",
			       iod_mesh_lb_name(s->lb));
			for (uint32_t j = 0; j < s->eps_n; j++) {
				iod_mesh_addr_format(s->eps[j].ip4, s->eps[j].port, addr,
				                     sizeof(addr));
				printf(" %s%s", addr, s->eps[j].healthy ? "" : "(unhealthy)");
			}
			printf("%s\n", s->eps_n ? "" : " (none)");
		}
	}
	iod_mesh_registry_free(&r);
	return 0;
}

/* With --server: full re-read every this long even without pushes. */
#define RUN_RESYNC_MS 5000

static int do_run(const char *path, const char *server, const char *node,
                  struct iod_mesh_proxy_opts *o, bool no_watch)
{
	static struct iod_mesh_file_source fs;
	static struct iod_mesh_api_source as;
	struct iod_mesh_source *src;
	struct iod_mesh_proxy *p;
	struct iod_err e = {0};

	static struct iod_sec_tls_creds *creds;
	if (server) {
		/* the client config's credentials, as every command uses */
		struct iod_sec_context ctx;
		int rc = iod_sec_context_load(NULL, NULL, &ctx, &e);
		if ((rc && rc != -ENOENT) || (!rc && iod_sec_context_creds(&ctx, &creds, &e)))
			return iod_cli_fail("proxy", IOD_EXIT_INVALID, "%s", e.msg);
		iod_mesh_api_source_init(&as, server, node);
		as.creds = creds;
		snprintf(as.token, sizeof(as.token), "%s", ctx.token);
		if (no_watch)
			as.src.wait = NULL; /* poll every 200 ms (the behaviour before the watch) */
		src = &as.src;
		path = server;
	} else {
		iod_mesh_file_source_init(&fs, path);
		src = &fs.src;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (iod_mesh_proxy_start(&p, o, src, &e))
		return iod_cli_fail("proxy", e.code == -EINVAL ? IOD_EXIT_INVALID : IOD_EXIT_ERROR,
		                    "%s", e.msg);
	IOD_INFO("mesh", "proxy up: %u workers, config %s%s%s%s%s", o->workers, path,
	         o->admin_addr ? ", admin http://" : "", o->admin_addr ? o->admin_addr : "",
	         o->dns_addr ? ", dns " : "", o->dns_addr ? o->dns_addr : "");
	while (!stop_flag) {
		memset(&e, 0, sizeof(e));
		if (iod_mesh_proxy_wait(p, 200, RUN_RESYNC_MS, (const volatile int *)&stop_flag,
		                        &e))
			IOD_WARN("mesh", "watch failed, polling: %s", e.msg);
		if (stop_flag)
			break;
		memset(&e, 0, sizeof(e));
		int rc = iod_mesh_proxy_refresh(p, &e);
		if (rc == 0)
			IOD_INFO("mesh", "view from %s changed", path);
		else if (rc != -EAGAIN)
			IOD_WARN("mesh", "keeping the previous view: %s", e.msg);
	}
	iod_mesh_proxy_stop(p);
	iod_sec_tls_creds_free(creds);
	creds = NULL;
	IOD_INFO("mesh", "proxy stopped");
	return 0;
}

/* ---- backend ----------------------------------------------------------- */

struct backend {
	char name[IOD_NAME_MAX]; /* answers say who they are */
	size_t size;             /* response body bytes */
	int status;              /* response status */
	uint32_t call_ip;        /* --call target (0 = none) */
	uint16_t call_port;
	char call_path[256];
	char file[512];    /* --file: answer with this file's contents */
	char sink[512];    /* --sink: write each request's decoded body here */
	bool chunked;      /* --chunked: answer with chunked transfer encoding */
	uint64_t read_bps; /* --read-rate: read request bodies this slowly (0 = no limit) */
};

static struct backend be;

/* GET the --call URL with traceparent; returns the status or -1. */
static int call_next(const char *traceparent)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(be.call_port),
	                         .sin_addr.s_addr = htonl(be.call_ip)};
	char req[1024], resp[4096];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	int n = snprintf(req, sizeof(req),
	                 "GET %s HTTP/1.1\r\nhost: next\r\n%s%s%sconnection: close\r\n\r\n",
	                 be.call_path, traceparent ? "traceparent: " : "",
	                 traceparent ? traceparent : "", traceparent ? "\r\n" : "");
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		close(fd);
		return -1;
	}
	size_t len = 0;
	ssize_t r;
	while (len < sizeof(resp) - 1 && (r = recv(fd, resp + len, sizeof(resp) - 1 - len, 0)) > 0)
		len += (size_t)r;
	close(fd);
	resp[len] = 0;
	return len > 12 ? atoi(resp + 9) : -1;
}

/* Where a request's decoded body goes: counted, and written to --sink. */
struct sink {
	int fd;         /* --sink file or -1 */
	uint64_t bytes; /* payload bytes seen */
	bool failed;    /* a write to the sink failed */
};

static void sink_data(void *ctx, const char *p, size_t n)
{
	struct sink *k = ctx;
	k->bytes += n;
	while (k->fd >= 0 && n && !k->failed) {
		ssize_t w = write(k->fd, p, n);
		if (w <= 0) {
			k->failed = true;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* recv that honours --read-rate (a slow reader, for backpressure tests). */
static ssize_t be_recv(int fd, char *buf, size_t cap)
{
	if (be.read_bps) {
		size_t slice = (size_t)IOD_MAX(be.read_bps / 50, 1024u); /* 20 ms of data */
		cap = IOD_MIN(cap, slice);
	}
	ssize_t n = recv(fd, buf, cap, 0);
	if (n > 0 && be.read_bps)
		usleep((useconds_t)((uint64_t)n * 1000000u / be.read_bps));
	return n;
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Send one piece of a response body, as a chunk when --chunked. */
static bool send_piece(int fd, const char *p, size_t n)
{
	char line[32];
	if (!be.chunked)
		return send_all(fd, p, n);
	int l = snprintf(line, sizeof(line), "%zx\r\n", n);
	return send_all(fd, line, (size_t)l) && send_all(fd, p, n) && send_all(fd, "\r\n", 2);
}

/* The response body: --file's contents, else the BYTES-byte answer. */
static bool send_body(int fd, const char *body, int file_fd, uint64_t size, char *tmp,
                      size_t tmp_len)
{
	uint64_t off = 0;
	while (off < size) {
		const char *p = body + off;
		size_t n = (size_t)IOD_MIN((uint64_t)65536, size - off);
		if (file_fd >= 0) {
			n = IOD_MIN(n, tmp_len);
			ssize_t r = pread(file_fd, tmp, n, (off_t)off);
			if (r <= 0)
				return false;
			n = (size_t)r;
			p = tmp;
		}
		if (!send_piece(fd, p, n))
			return false;
		off += n;
	}
	return !be.chunked || send_all(fd, "0\r\n\r\n", 5);
}

static void *backend_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static __thread struct iod_mesh_http_msg m;
	char *buf = malloc(IOD_MESH_HTTP_BUF), *body = malloc(be.size + 1);
	char *tmp = malloc(65536);
	size_t len = 0;

	if (!buf || !body || !tmp)
		goto out;
	memset(body, 'x', be.size);
	memcpy(body, be.name, IOD_MIN(strlen(be.name), be.size));
	if (be.size)
		body[be.size - 1] = '\n';
	for (;;) {
		int rc = iod_mesh_http_parse(buf, len, false, &m);
		if (rc == -EAGAIN) {
			if (len >= IOD_MESH_HTTP_BUF)
				break;
			ssize_t n = recv(fd, buf + len, IOD_MESH_HTTP_BUF - len, 0);
			if (n <= 0)
				break;
			len += (size_t)n;
			continue;
		}
		if (rc)
			break;
		/* What the answer needs from the head: the buffer is reused for the body. */
		char tp[64] = "", hdrs[256] = "";
		bool keep_alive = m.keep_alive;
		if (m.traceparent >= 0 && m.hdr[m.traceparent].value_len < sizeof(tp)) {
			memcpy(tp, buf + m.hdr[m.traceparent].value_off,
			       m.hdr[m.traceparent].value_len);
			tp[m.hdr[m.traceparent].value_len] = 0;
		}
		/* The body, of any size: decoded through the buffer. */
		struct iod_mesh_http_body b;
		struct sink sk = {.fd = -1};
		bool done = false;
		iod_mesh_http_body_init(&b, &m, buf, NULL, 0);
		done = b.kind == IOD_MESH_BODY_NONE;
		if (m.expect_continue && b.kind != IOD_MESH_BODY_NONE &&
		    !send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
			break;
		if (be.sink[0] && b.kind != IOD_MESH_BODY_NONE)
			sk.fd = open(be.sink, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		size_t pos = m.head_len;
		while (!done) {
			if (pos < len) {
				int64_t used = iod_mesh_http_body_decode(&b, buf + pos, len - pos,
				                                         &done, sink_data, &sk);
				if (used < 0)
					break;
				pos += (size_t)used;
				continue;
			}
			pos = len = 0;
			ssize_t n = be_recv(fd, buf, IOD_MESH_HTTP_BUF);
			if (n <= 0)
				break;
			len = (size_t)n;
		}
		if (sk.fd >= 0)
			close(sk.fd);
		if (!done)
			break;
		int status = be.status;
		if (be.call_ip) {
			int st = call_next(tp[0] ? tp : NULL);
			snprintf(hdrs, sizeof(hdrs), "x-iod-call-status: %d\r\n", st);
			if (st != 200 && status < 500)
				status = 502;
		}
		int file_fd = -1;
		uint64_t size = be.size;
		if (be.file[0]) {
			struct stat st;
			file_fd = open(be.file, O_RDONLY | O_CLOEXEC);
			if (file_fd < 0 || fstat(file_fd, &st)) {
				if (file_fd >= 0)
					close(file_fd);
				break;
			}
			size = (uint64_t)st.st_size;
		}
		char head[640], framing[64];
		if (be.chunked)
			snprintf(framing, sizeof(framing), "transfer-encoding: chunked\r\n");
		else
			snprintf(framing, sizeof(framing), "content-length: %llu\r\n",
			         (unsigned long long)size);
		int hn = snprintf(head, sizeof(head),
		                  "HTTP/1.1 %d %s\r\n%sx-backend: %s\r\n"
		                  "x-traceparent-seen: %s\r\nx-body-bytes: %llu\r\n%s%s\r\n",
		                  status, status < 400 ? "OK" : "Error", framing, be.name,
		                  tp[0] ? tp : "-", (unsigned long long)sk.bytes, hdrs,
		                  keep_alive ? "" : "connection: close\r\n");
		bool sent;
		if (file_fd < 0 && !be.chunked) {
			struct iovec iov[2] = {{head, (size_t)hn}, {body, be.size}};
			struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
			ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
			sent =
			    w == (ssize_t)((size_t)hn + be.size) ||
			    (w >= hn && send_all(fd, body + (w - hn), be.size - (size_t)(w - hn)));
		} else {
			sent = send_all(fd, head, (size_t)hn) &&
			       send_body(fd, body, file_fd, size, tmp, 65536);
		}
		if (file_fd >= 0)
			close(file_fd);
		if (!sent)
			break;
		memmove(buf, buf + pos, len - pos);
		len -= pos;
		if (!keep_alive)
			break;
	}
out:
	free(buf);
	free(body);
	free(tmp);
	close(fd);
	return NULL;
}

static int do_backend(const char *listen_addr, const char *call)
{
	uint32_t ip;
	uint16_t port;
	int one = 1;

	if (iod_mesh_addr_parse(listen_addr, &ip, &port, true))
		return iod_cli_fail("proxy backend", IOD_EXIT_INVALID,
		                    "--listen %s: expected IPv4:port", listen_addr);
	if (call) {
		char hp[64];
		const char *h = iod_str_has_prefix(call, "http://") ? call + 7 : NULL;
		const char *slash = h ? strchr(h, '/') : NULL;
		size_t hl = h ? (slash ? (size_t)(slash - h) : strlen(h)) : 0;
		if (!h || hl >= sizeof(hp))
			return iod_cli_fail("proxy backend", IOD_EXIT_INVALID,
			                    "--call %s: expected http://IPv4:port/path", call);
		memcpy(hp, h, hl);
		hp[hl] = 0;
		if (iod_mesh_addr_parse(hp, &be.call_ip, &be.call_port, true))
			return iod_cli_fail("proxy backend", IOD_EXIT_INVALID,
			                    "--call %s: expected http://IPv4:port/path", call);
		iod_strlcpy(be.call_path, slash ? slash : "/", sizeof(be.call_path));
	}
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(ip)};
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1024))
		return iod_cli_fail("proxy backend", IOD_EXIT_ERROR, "cannot listen on %s: %s",
		                    listen_addr, strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	IOD_INFO("mesh", "backend %s listening on %s (%zu-byte answers)", be.name, listen_addr,
	         be.size);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 256 * 1024);
		if (pthread_create(&t, &a, backend_conn, (void *)(intptr_t)fd))
			close(fd);
		pthread_attr_destroy(&a);
	}
	return 0;
}

int cmd_proxy(int argc, char **argv)
{
	static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
	                                     {"workers", required_argument, NULL, 'w'},
	                                     {"admin", required_argument, NULL, 'a'},
	                                     {"dns", required_argument, NULL, 'd'},
	                                     {"seed", required_argument, NULL, 's'},
	                                     {"no-splice", no_argument, NULL, 'S'},
	                                     {"listen", required_argument, NULL, 'l'},
	                                     {"name", required_argument, NULL, 'n'},
	                                     {"size", required_argument, NULL, 'z'},
	                                     {"call", required_argument, NULL, 'C'},
	                                     {"status", required_argument, NULL, 't'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {"server", required_argument, NULL, 'R'},
	                                     {"node", required_argument, NULL, 'N'},
	                                     {"file", required_argument, NULL, 'F'},
	                                     {"sink", required_argument, NULL, 'K'},
	                                     {"chunked", no_argument, NULL, 'H'},
	                                     {"read-rate", required_argument, NULL, 'r'},
	                                     {"no-watch", no_argument, NULL, 'W'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	struct iod_mesh_proxy_opts o = {.workers = 2, .admin_addr = "127.0.0.1:15000"};
	const char *config = NULL, *listen_addr = NULL, *call = NULL, *server = NULL, *node = NULL;
	static const char *const outs[] = {"text", "json", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	bool no_watch = false;
	int c;

	if (argc < 2 || iod_cli_wants_help(argc, argv)) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? IOD_EXIT_INVALID : IOD_EXIT_OK;
	}
	const char *sub = argv[1];
	be.size = 1024;
	be.status = 200;
	iod_strlcpy(be.name, "backend", sizeof(be.name));
	optind = 2;
	while ((c = getopt_long(argc, argv, "c:o:h", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'c': config = optarg; break;
		case 'w':
			o.workers = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || !o.workers || o.workers > IOD_MESH_WORKERS_MAX)
				return iod_cli_fail("proxy", IOD_EXIT_INVALID,
				                    "--workers %s: expected 1..%d", optarg,
				                    IOD_MESH_WORKERS_MAX);
			break;
		case 'a': o.admin_addr = strcmp(optarg, "off") ? optarg : NULL; break;
		case 'd': o.dns_addr = optarg; break;
		case 's': o.seed = strtoull(optarg, NULL, 10); break;
		case 'S': o.no_splice = true; break;
		case 'l': listen_addr = optarg; break;
		case 'n': iod_strlcpy(be.name, optarg, sizeof(be.name)); break;
		case 'z': {
			uint64_t v;
			struct iod_err e = {0};
			if (iod_parse_size(optarg, &v, &e) || v > (64u << 20))
				return iod_cli_fail("proxy", IOD_EXIT_INVALID,
				                    "--size %s: expected a size up to 64MiB",
				                    optarg);
			be.size = (size_t)v;
			break;
		}
		case 'C': call = optarg; break;
		case 'F': iod_strlcpy(be.file, optarg, sizeof(be.file)); break;
		case 'K': iod_strlcpy(be.sink, optarg, sizeof(be.sink)); break;
		case 'H': be.chunked = true; break;
		case 'W': no_watch = true; break;
		case 'r': {
			struct iod_err e = {0};
			if (iod_parse_size(optarg, &be.read_bps, &e) || !be.read_bps)
				return iod_cli_fail("proxy", IOD_EXIT_INVALID,
				                    "--read-rate %s: expected bytes per second, "
				                    "e.g. 8MiB",
				                    optarg);
			break;
		}
		case 'R': server = optarg; break;
		case 'N': node = optarg; break;
		case 't':
			be.status = atoi(optarg);
			if (be.status < 200 || be.status > 599)
				return iod_cli_fail("proxy", IOD_EXIT_INVALID,
				                    "--status %s: expected 200..599", optarg);
			break;
		case 'o':
			if (iod_cli_output("proxy", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("proxy", IOD_EXIT_INVALID, "unexpected argument \"%s\"",
		                    argv[optind]);
	if (!strcmp(sub, "backend")) {
		if (!listen_addr)
			return iod_cli_fail("proxy backend", IOD_EXIT_INVALID,
			                    "--listen IPv4:port is required");
		return do_backend(listen_addr, call);
	}
	if (strcmp(sub, "run") && strcmp(sub, "check") && strcmp(sub, "env")) {
		static const char *const subs[] = {"run", "check", "env", "backend"};
		const char *s = iod_suggest(sub, subs, IOD_ARRAY_LEN(subs));
		return iod_cli_fail("proxy", IOD_EXIT_INVALID,
		                    "unknown subcommand \"%s\"%s%s%s; run `iod proxy --help`", sub,
		                    s ? " (did you mean \"" : "", s ? s : "", s ? "\"?)" : "");
	}
	if (!strcmp(sub, "run") && server && !config)
		return do_run(NULL, server, node, &o, no_watch);
	if (!config)
		return iod_cli_fail(
		    "proxy", IOD_EXIT_INVALID,
		    "--config FILE is required (services -> endpoints, docs/mesh.md)%s",
		    strcmp(sub, "run") ? "" : "; or --server ADDR for the control plane");
	if (!strcmp(sub, "run"))
		return do_run(config, NULL, node, &o, no_watch);
	return do_check(config, out == IOD_OUT_JSON, !strcmp(sub, "env"));
}
