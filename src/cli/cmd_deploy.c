/*
 * cmd_deploy.c: `iod deploy -f FILE`: send a service topology to the
 * cluster, which validates, places and commits it as one transaction.
 *
 * Prints the placements and what could not be placed. Exit 0 when all
 * replicas were placed, 4 (partial) when some were not, 2 for spec errors
 * (printed as FILE:line:col: message).
 */
#include "ctl.h"

#include <getopt.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod deploy -f FILE [-o text|json] [--server ADDR]\n\n"
	           "Deploy a service topology (YAML or JSON spec): the server validates it,\n"
	           "places every replica and commits the whole topology in one Raft entry.\n"
	           "Replicas of the named services that the new topology drops are removed.\n"
	           "Exit codes: 0 all placed, 4 some replicas could not be placed, 2 spec errors,\n"
	           "5 cluster unreachable.\n" IOD_CTL_SERVER_HELP);
}

int cmd_deploy(int argc, char **argv)
{
	static const struct option opts[] = {{"file", required_argument, NULL, 'f'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {"server", required_argument, NULL, 's'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	const char *server = NULL, *file = NULL;
	struct iod_api_client c;
	struct iod_api_response r;
	struct iod_err e = {0};
	struct iod_buf b;
	int o, rc;

	while ((o = getopt_long(argc, argv, "f:o:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'f': file = optarg; break;
		case 'o':
			if (iod_cli_output("deploy", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': server = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (!file || optind != argc) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, file, IOD_SPEC_FILE_MAX, &e)) {
		iod_buf_free(&b);
		return iod_cli_fail("deploy", IOD_EXIT_INVALID, "%s", e.msg);
	}
	if ((rc = iod_ctl_client("deploy", server, &c))) {
		iod_buf_free(&b);
		return rc;
	}
	bool is_json = b.len && b.data[strspn(b.data, " \t\r\n")] == '{';
	struct iod_err ce = {0};
	rc = iod_api_request(&c, "POST", "/v1/deploy",
	                     is_json ? "application/json" : "application/yaml", b.data, b.len, &r,
	                     &ce);
	iod_buf_free(&b);
	iod_api_client_close(&c);
	if (rc)
		return iod_cli_fail("deploy", IOD_EXIT_UNAVAILABLE, "%s", ce.msg);
	if (r.status == 400 && json_is_array(json_object_get(r.json, "errors"))) {
		json_t *x;
		size_t i;
		json_array_foreach(json_object_get(r.json, "errors"), i, x)
		    fprintf(stderr, "%s:%lld:%lld: %s\n", file,
		            (long long)json_integer_value(json_object_get(x, "line")),
		            (long long)json_integer_value(json_object_get(x, "col")),
		            json_string_value(json_object_get(x, "message")));
		iod_api_response_free(&r);
		return IOD_EXIT_INVALID;
	}
	if (r.status != 200 && r.status != 422) {
		rc = r.status == 503 ? IOD_EXIT_UNAVAILABLE
		                     : r.status >= 400 && r.status < 500 ? IOD_EXIT_INVALID
		                                                          : IOD_EXIT_ERROR;
		iod_cli_fail("deploy", rc, "%s: %s (HTTP %d)", file, iod_api_error_text(&r), r.status);
		iod_api_response_free(&r);
		return rc;
	}
	json_t *placed = json_object_get(r.json, "placements");
	json_t *unplaced = json_object_get(r.json, "unplaced"), *x;
	size_t i;
	if (out == IOD_OUT_JSON) {
		iod_json_print(stdout, r.json, false);
	} else {
		printf("%-24s %-16s %s\n", "REPLICA", "NODE", "GPUS");
		json_array_foreach(placed, i, x)
		    printf("%-24s %-16s %s\n", json_string_value(json_object_get(x, "replica")),
		           json_string_value(json_object_get(x, "node")),
		           json_string_value(json_object_get(x, "gpus")));
		json_array_foreach(unplaced, i, x)
		    printf("%-24s %-16s %s\n", json_string_value(json_object_get(x, "replica")),
		           "(unplaced)", json_string_value(json_object_get(x, "reason")));
		printf("deployed %s: %zu replica%s placed, %zu unplaced (revision %lld)\n", file,
		       json_array_size(placed), json_array_size(placed) == 1 ? "" : "s",
		       json_array_size(unplaced),
		       (long long)json_integer_value(json_object_get(r.json, "rev")));
	}
	rc = json_array_size(unplaced) ? IOD_EXIT_PARTIAL : IOD_EXIT_OK;
	if (r.status == 422)
		rc = IOD_EXIT_PARTIAL;
	iod_api_response_free(&r);
	return rc;
}
