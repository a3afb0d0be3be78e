/*
 * cmd_viz.c: `iod viz`: the cluster as a picture.
 *
 *   iod viz net-topology [-o dot|svg|json]    the whole cluster, once
 *   iod viz net-topology --live [--listen A]  a live web view
 *   iod viz gpu-topology --node N [-o ...]    one node's GPU/NIC/NUMA graph
 *
 * The graph is the pure model of src/obs/viz.c; DOT goes through Graphviz
 * (`dot -Tsvg`) for SVG; one node's graph is topo's own DOT writer over the
 * topology the node registered. --live serves the page of src/cli/viz/
 * (embedded in the binary, viz_assets.c) and the graph over Server-Sent
 * Events from a thread that reads the control plane (viz_live.c).
 */
#include "ctl.h"
#include "iod/obs.h"
#include "iod/topo.h"
#include "viz.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod viz net-topology [-o dot|svg|json] [--mesh ADDR] [--server ADDR]\n"
	           "       iod viz net-topology --live [--listen IP:PORT] [--refresh DUR]\n"
	           "                                   [--mesh ADDR] [--server ADDR]\n"
	           "       iod viz gpu-topology --node NODE [-o dot|svg|json] [--server ADDR]\n\n"
	           "The cluster as a picture: nodes with their GPUs (NVLink between them) and\n"
	           "NICs, the fabric, services with their replicas placed on GPUs, and service\n"
	           "dependencies (with mesh request and error counts given --mesh). Red is\n"
	           "broken (a lost node, an unhealthy or failed replica, a stalled GPU).\n"
	           "  -o dot|svg|json  DOT (default), SVG through Graphviz's dot, or the graph\n"
	           "  --live           serve a live web view (SSE updates, no reloads): open\n"
	           "                   the printed address; Ctrl-C stops it\n"
	           "  --listen ADDR    where the view listens (default 127.0.0.1:7700)\n"
	           "  --refresh DUR    how often the view reads the cluster (default 500ms)\n"
	           "  --group-over N   past N nodes, group them into racks the view expands on\n"
	           "                   click (default 64; 0 never)\n"
	           "  --mesh ADDR      a mesh proxy's admin address (default $IOD_MESH)\n"
	           "  --node NODE      gpu-topology: the node to draw\n" IOD_CTL_SERVER_HELP);
}

/* DOT text to SVG through `dot -Tsvg`, printed to stdout. */
static int to_svg(const char *dot)
{
	char tmp[] = "/tmp/iod-viz-XXXXXX";
	int fd = mkstemp(tmp);
	if (fd < 0)
		return iod_cli_fail("viz", IOD_EXIT_ERROR, "temporary file: %s", strerror(errno));
	size_t len = strlen(dot);
	bool ok = write(fd, dot, len) == (ssize_t)len;
	close(fd);
	if (!ok) {
		unlink(tmp);
		return iod_cli_fail("viz", IOD_EXIT_ERROR, "writing %s", tmp);
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execlp("dot", "dot", "-Tsvg", tmp, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	if (pid > 0)
		waitpid(pid, &st, 0);
	unlink(tmp);
	if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return iod_cli_fail("viz", IOD_EXIT_ERROR,
		                    "Graphviz's dot failed%s (Debian package graphviz; -o dot "
		                    "prints the source)",
		                    WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ": not installed"
		                                                            : "");
	return IOD_EXIT_OK;
}

static int emit(const json_t *graph, const char *dot_text, enum iod_output out, bool svg)
{
	if (out == IOD_OUT_JSON) {
		iod_json_print(stdout, graph, false);
		return IOD_EXIT_OK;
	}
	if (svg)
		return to_svg(dot_text);
	fputs(dot_text, stdout);
	return IOD_EXIT_OK;
}

static int net_once(struct iod_api_client *c, const char *mesh, uint32_t group_over,
                    enum iod_output out, bool svg)
{
	struct iod_ctl_cluster f;
	struct iod_err e = {0};
	if (iod_ctl_cluster_read(c, mesh, &f, &e))
		return iod_cli_fail(
		    "viz", IOD_EXIT_UNAVAILABLE,
		    "%s\n  (is the cluster up? pick it with --server or IOD_SERVER)", e.msg);
	struct iod_viz_input in = {.nodes = f.nodes,
	                           .services = f.services,
	                           .replicas = f.replicas,
	                           .endpoints = f.endpoints,
	                           .telemetry = f.telemetry,
	                           .mesh_metrics = f.mesh,
	                           .group_over = group_over};
	json_t *drops = iod_ctl_drops_read(NULL); /* as `iod trace --drops` */
	in.drops = drops;
	json_t *g = iod_viz_graph(&in);
	json_decref(drops);
	iod_ctl_cluster_free(&f);
	if (!g)
		return iod_cli_fail("viz", IOD_EXIT_ERROR, "out of memory");
	struct iod_buf b;
	iod_buf_init(&b);
	int rc = out != IOD_OUT_JSON && iod_viz_dot(g, &b)
	             ? iod_cli_fail("viz", IOD_EXIT_ERROR, "out of memory")
	             : emit(g, b.data, out, svg);
	iod_buf_free(&b);
	json_decref(g);
	return rc;
}

static int gpu_once(struct iod_api_client *c, const char *node, enum iod_output out, bool svg)
{
	char path[IOD_NAME_MAX + 16];
	struct iod_api_response r;
	snprintf(path, sizeof(path), "/v1/node/%s", node);
	int rc = iod_ctl_call("viz", c, "GET", path, NULL, NULL, 0, &r);
	if (rc)
		return rc;
	const json_t *topo = json_object_get(json_object_get(r.json, "value"), "topology");
	struct iod_topo_node *n = calloc(1, sizeof(*n));
	struct iod_err e = {0};
	if (!n) {
		iod_api_response_free(&r);
		return iod_cli_fail("viz", IOD_EXIT_ERROR, "out of memory");
	}
	if (!topo || iod_topo_from_json(topo, n, &e)) {
		iod_api_response_free(&r);
		free(n);
		return iod_cli_fail("viz", IOD_EXIT_ERROR,
		                    "node %s registered no readable topology%s%s", node,
		                    e.msg[0] ? ": " : "", e.msg);
	}
	if (out == IOD_OUT_JSON) {
		iod_json_print(stdout, topo, false);
		rc = IOD_EXIT_OK;
	} else {
		struct iod_buf b;
		iod_buf_init(&b);
		rc = iod_topo_format_dot(n, &b)
		         ? iod_cli_fail("viz", IOD_EXIT_ERROR, "out of memory")
		     : svg ? to_svg(b.data)
		           : (fputs(b.data, stdout), IOD_EXIT_OK);
		iod_buf_free(&b);
	}
	free(n);
	iod_api_response_free(&r);
	return rc;
}

int cmd_viz(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},  {"server", required_argument, NULL, 'S'},
	    {"mesh", required_argument, NULL, 'm'},    {"node", required_argument, NULL, 'n'},
	    {"live", no_argument, NULL, 'l'},          {"listen", required_argument, NULL, 'L'},
	    {"refresh", required_argument, NULL, 'r'}, {"group-over", required_argument, NULL, 'g'},
	    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
	const char *server = NULL, *mesh = getenv("IOD_MESH"), *node = NULL;
	const char *listen_addr = "127.0.0.1:7700", *outs_s = "dot";
	bool live = false;
	uint64_t refresh_ns = 500 * IOD_NS_PER_MS;
	long group_over = 64;
	struct iod_err e = {0};
	int o, rc;

	while ((o = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (o) {
		case 'o': outs_s = optarg; break;
		case 'S': server = optarg; break;
		case 'm': mesh = optarg; break;
		case 'n': node = optarg; break;
		case 'l': live = true; break;
		case 'L': listen_addr = optarg; break;
		case 'r':
			if (iod_parse_duration(optarg, &refresh_ns, &e) ||
			    refresh_ns < 100 * IOD_NS_PER_MS)
				return iod_cli_fail("viz", IOD_EXIT_INVALID, "--refresh %s: %s",
				                    optarg, e.msg[0] ? e.msg : "at least 100ms");
			break;
		case 'g': {
			char *end;
			group_over = strtol(optarg, &end, 10);
			if (*end || !optarg[0] || group_over < 0 || group_over > 1000000)
				return iod_cli_fail("viz", IOD_EXIT_INVALID,
				                    "--group-over wants a count, not %s", optarg);
			break;
		}
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	const char *what = argv[optind];
	bool net = !strcmp(what, "net-topology"), gpu = !strcmp(what, "gpu-topology");
	if (!net && !gpu) {
		const char *names[] = {"net-topology", "gpu-topology"};
		const char *s = iod_suggest(what, names, 2);
		return iod_cli_fail("viz", IOD_EXIT_INVALID,
		                    "unknown view \"%s\"%s%s%s; views: net-topology, gpu-topology",
		                    what, s ? " (did you mean " : "", s ? s : "", s ? "?)" : "");
	}
	if (optind + 1 < argc)
		return iod_cli_fail("viz", IOD_EXIT_INVALID, "unexpected argument \"%s\"",
		                    argv[optind + 1]);
	enum iod_output out = IOD_OUT_DOT;
	bool svg = !strcmp(outs_s, "svg");
	static const char *const outs[] = {"dot", "svg", "json", NULL};
	if (!svg && iod_cli_output("viz", outs_s, outs, &out))
		return IOD_EXIT_INVALID;
	if (gpu && !node)
		return iod_cli_fail("viz", IOD_EXIT_INVALID, "gpu-topology needs --node NODE");
	if (gpu && live)
		return iod_cli_fail(
		    "viz", IOD_EXIT_INVALID,
		    "--live is for net-topology (its page draws every node's GPUs)");
	if (node && !iod_state_name_valid(node))
		return iod_cli_fail("viz", IOD_EXIT_INVALID, "invalid node name \"%s\"", node);

	struct iod_api_client c;
	if ((rc = iod_ctl_client("viz", server, &c)))
		return rc;
	if (live)
		rc = iod_viz_live_run(&c, mesh, listen_addr, refresh_ns / IOD_NS_PER_MS,
		                      (uint32_t)group_over);
	else if (net)
		rc = net_once(&c, mesh, (uint32_t)group_over, out, svg);
	else
		rc = gpu_once(&c, node, out, svg);
	iod_api_client_close(&c);
	return rc;
}
