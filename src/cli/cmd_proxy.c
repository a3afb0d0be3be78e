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
#include "iod/demo.h"
#include "iod/mesh_proxy.h"

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
	    "                     [--no-watch] [--client-conns N]\n"
	    "                     [--unix-dir DIR [--transport tcp|shm|rdma|auto]]\n"
	    "                     [--mtls-dir DIR [--mtls-listen ADDR] [--mtls-identity T/S]]\n"
	    "       iod proxy check --config FILE [-o text|json]\n"
	    "       iod proxy env --config FILE\n"
	    "       iod proxy backend --listen ADDR [--name NAME] [--size BYTES]\n"
	    "                     [--call http://HOST:PORT/PATH] [--status CODE]\n"
	    "                     [--file PATH] [--chunked] [--sink PATH] [--read-rate BYTES]\n"
	    "                     [--unix PATH|auto]\n\n"
	    "The node's service-mesh proxy in standalone mode (docs/mesh.md).\n"
	    "  run      serve every service of FILE on its loopback VIP (127.x.y.z:port),\n"
	    "           balancing over its endpoints; FILE is re-read when it changes.\n"
	    "           --server ADDR follows the control plane instead (its services and\n"
	    "           the endpoints agents report); --node NAME is this node (locality).\n"
	    "           Changes arrive by the API's watch (pushes) with a full re-read\n"
	    "           every 5 s; --no-watch polls every 200 ms instead\n"
	    "           --unix-dir DIR    AF_UNIX sockets for service_mesh.transport shm:\n"
	    "                             DIR/SERVICE.sock for callers, DIR/ep/ENDPOINT.sock\n"
	    "                             of endpoints on --node (docs/mesh.md, Transport)\n"
	    "           --transport T     the default of services whose config names none\n"
	    "                             (default tcp)\n"
	    "           --workers N   epoll threads (default: 2)\n"
	    "           --admin ADDR  admin endpoint: /metrics /spans /v1/traces /registry\n"
	    "                         (default 127.0.0.1:15000; \"off\" to disable;\n"
	    "                         loopback only: plain HTTP, no authentication)\n"
	    "           --dns ADDR    answer <service>.iod A queries (UDP), e.g. 127.0.0.1:15053\n"
	    "                         (loopback only)\n"
	    "           --no-splice   L4: copy through user space instead of splice(2)\n"
	    "           --client-conns N  connections one client (address, and uid when\n"
	    "                         known) may hold open (default %d,\n"
	    "                         IOD_MESH_CLIENT_CONNS_MAX); more are closed at accept\n"
	    "           --mtls-dir DIR  proxy-to-proxy mutual TLS: DIR/ca.crt, DIR/node.crt/.key\n"
	    "                         (presented to proxies that dial in) and\n"
	    "                         DIR/TENANT/SERVICE.crt/.key (SVIDs presented when\n"
	    "                         dialling); endpoints with \"mtls\": \"IP:PORT\" are\n"
	    "                         reached through that proxy. Files are re-read when\n"
	    "                         they change (rotation drops no connection)\n"
	    "           --mtls-listen ADDR  accept proxies on ADDR (IPv4:port)\n"
	    "           --mtls-identity T/S the SVID this proxy's callers present\n"
	    "           --mtls-relay        HTTP upstreams through a socketpair relay, as\n"
	    "                               before TLS ran on the upstream socket (benchmarks)\n"
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
	    "           --read-rate BYTES read request bodies at most BYTES per second\n"
	    "           --unix PATH       also listen on the AF_UNIX socket PATH (auto:\n"
	    "                             $IOD_MESH_UNIX_DIR/ep/$IOD_REPLICA.sock, where the\n"
	    "                             node's proxy dials it under transport shm)\n",
	    IOD_MESH_CLIENT_CONNS_MAX);
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
	iod_fd_limit_raise(NULL); /* a daemon: the hard limit of descriptors, not 1024 */
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
		if (iod_mesh_proxy_wait(p, 200, RUN_RESYNC_MS, (const volatile int *)&stop_flag, &e,
		                        NULL))
			IOD_WARN("mesh", "watch failed, polling: %s", e.msg);
		if (stop_flag)
			break;
		memset(&e, 0, sizeof(e));
		if (iod_mesh_proxy_mtls_reload(p, &e))
			IOD_WARN("mesh", "keeping the current mTLS certificates: %s", e.msg);
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
	                                     {"client-conns", required_argument, NULL, 'L'},
	                                     {"mtls-dir", required_argument, NULL, 'M'},
	                                     {"mtls-listen", required_argument, NULL, 'I'},
	                                     {"mtls-identity", required_argument, NULL, 'Y'},
	                                     {"mtls-relay", no_argument, NULL, 1401},
	                                     {"unix-dir", required_argument, NULL, 1402},
	                                     {"transport", required_argument, NULL, 1403},
	                                     {"unix", required_argument, NULL, 1404},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	struct iod_mesh_proxy_opts o = {.workers = 2, .admin_addr = "127.0.0.1:15000"};
	struct iod_demo_backend be = {0};
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
		case 'M': o.mtls_dir = optarg; break;
		case 'I': o.mtls_listen = optarg; break;
		case 1401: o.mtls_relay = true; break;
		case 1402: o.unix_dir = optarg; break;
		case 1403:
			if (iod_mesh_tp_want_parse(optarg, &o.transport) || !*optarg)
				return iod_cli_fail(
				    "proxy", IOD_EXIT_INVALID,
				    "--transport %s: expected tcp, shm, rdma or auto", optarg);
			break;
		case 1404: {
			const char *d = getenv("IOD_MESH_UNIX_DIR"), *r = getenv("IOD_REPLICA");
			if (strcmp(optarg, "auto")) {
				if (iod_strlcpy(be.unix_path, optarg, sizeof(be.unix_path)))
					return iod_cli_fail("proxy", IOD_EXIT_INVALID,
					                    "--unix %s: too long", optarg);
			} else if (d && r &&
			           iod_mesh_unix_path(d, r, true, be.unix_path,
			                              sizeof(be.unix_path))) {
				return iod_cli_fail("proxy", IOD_EXIT_INVALID,
				                    "--unix auto: %s/ep/%s.sock is too long", d, r);
			} /* auto without the variables: TCP only */
			break;
		}
		case 'Y': o.mtls_identity = optarg; break;
		case 'L':
			o.client_conns_max = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || !o.client_conns_max || o.client_conns_max > 1u << 24)
				return iod_cli_fail("proxy", IOD_EXIT_INVALID,
				                    "--client-conns %s: expected 1..%u", optarg,
				                    1u << 24);
			break;
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
		return iod_demo_backend_run(&be, listen_addr, call);
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
