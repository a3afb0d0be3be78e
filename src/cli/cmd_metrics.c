/*
 * cmd_metrics.c: `iod metrics --node NAME`: read one node agent's telemetry
 * listener (src/agent/telemetry.c) the way `iod dp dump --node` reads its
 * switch: the address and scheme from the node's Node object, then one
 * GET through the one HTTP client with the client config's credentials
 * (mutual TLS beyond loopback; docs/security.md). Prints the listener's
 * /metrics (Prometheus text), or with -o json its /v1/telemetry (every
 * sample in the node's rings).
 *
 * It is what a script or a person uses instead of curl, which cannot
 * check a node certificate (it names the node by a spiffe:// URI, not by
 * an address) and would have to be handed the key files by hand.
 */
#include "cli.h"
#include "ctl.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod metrics --node NAME [--server ADDR] [-o text|json]\n\n"
	           "Read node NAME's agent telemetry listener (its Node object names it;\n"
	           "beyond loopback it is HTTPS and needs the client config's certificate):\n"
	           "  -o text   its /metrics, Prometheus text (iod_ and DCGM names; default)\n"
	           "  -o json   its /v1/telemetry: every sample in the node's rings\n"
	           "  --node NAME  the node to read\n" IOD_CTL_SERVER_HELP
	           "\nExit codes: 0 read, 2 no such node or it serves no telemetry, 5 its\n"
	           "agent does not answer (or is not that node), 1 it refused (HTTP 4xx/5xx).\n");
}

int cmd_metrics(int argc, char **argv)
{
	static const struct option opts[] = {{"node", required_argument, 0, 'n'},
	                                     {"server", required_argument, 0, 'S'},
	                                     {"output", required_argument, 0, 'o'},
	                                     {"help", no_argument, 0, 'h'},
	                                     {0, 0, 0, 0}};
	const char *node = NULL, *server = NULL, *outs = "text";
	int c;
	while ((c = getopt_long(argc, argv, "n:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': node = optarg; break;
		case 'S': server = optarg; break;
		case 'o': outs = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	static const char *const allowed[] = {"text", "json", NULL};
	enum iod_output out;
	if (iod_cli_output("metrics", outs, allowed, &out))
		return IOD_EXIT_INVALID;
	if (optind < argc)
		return iod_cli_fail("metrics", IOD_EXIT_INVALID, "unexpected argument %s",
		                    argv[optind]);
	if (!node)
		return iod_cli_fail("metrics", IOD_EXIT_INVALID,
		                    "--node NAME is required (`iod get nodes` lists them)");
	struct iod_api_response r;
	int rc = iod_ctl_node_get("metrics", server, node,
	                          out == IOD_OUT_JSON ? "/v1/telemetry" : "/metrics", 5000, &r);
	if (rc)
		return rc;
	if (r.status != 200)
		rc = iod_cli_fail("metrics", IOD_EXIT_ERROR, "node %s's agent at %s: %s (HTTP %d)",
		                  node, r.server, iod_api_error_text(&r), r.status);
	else if (r.body)
		fwrite(r.body, 1, r.len, stdout);
	if (!rc && out == IOD_OUT_JSON && r.len && r.body[r.len - 1] != '\n')
		putchar('\n');
	iod_api_response_free(&r);
	return rc;
}
