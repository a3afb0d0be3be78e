/*
 * cmd_delete.c: `iod delete KIND NAME`: delete one object.
 *
 * Deleting a service also deletes its replicas and their endpoints in the
 * same revision (the API's undeploy). A thin client of DELETE /v1/<kind>/<name>.
 */
#include "ctl.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod delete service|node|replica|endpoint|policy|config NAME\n"
	           "                  [--prev-rev R] [-o text|json] [--server ADDR]\n\n"
	           "Delete an object. A service is deleted with its replicas and endpoints.\n"
	           "  --prev-rev R   only if the object is still at revision R (compare-and-swap)\n" IOD_CTL_SERVER_HELP);
}

int cmd_delete(int argc, char **argv)
{
	static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
	                                     {"server", required_argument, NULL, 's'},
	                                     {"prev-rev", required_argument, NULL, 'p'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	const char *server = NULL, *prev = NULL;
	struct iod_api_client c;
	struct iod_api_response r;
	enum iod_state_kind k;
	char path[200];
	int o, rc;

	while ((o = getopt_long(argc, argv, "o:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'o':
			if (iod_cli_output("delete", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': server = optarg; break;
		case 'p': prev = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind + 2 != argc) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	if (iod_state_kind_parse(argv[optind], &k))
		return iod_cli_fail("delete", IOD_EXIT_INVALID, "unknown kind \"%s\"", argv[optind]);
	if (!iod_state_name_valid(argv[optind + 1]))
		return iod_cli_fail("delete", IOD_EXIT_INVALID, "invalid name \"%s\"", argv[optind + 1]);
	if (prev && strspn(prev, "0123456789") != strlen(prev))
		return iod_cli_fail("delete", IOD_EXIT_INVALID, "--prev-rev wants a revision number");
	snprintf(path, sizeof(path), "/v1/%s/%s%s%s", iod_state_kind_name(k), argv[optind + 1],
	         prev ? "?prev_rev=" : "", prev ? prev : "");
	if ((rc = iod_ctl_client("delete", server, &c)))
		return rc;
	rc = iod_ctl_call("delete", &c, "DELETE", path, NULL, NULL, 0, &r);
	iod_api_client_close(&c);
	if (rc)
		return rc;
	if (out == IOD_OUT_JSON)
		iod_json_print(stdout, r.json, false);
	else
		printf("deleted %s %s%s (revision %lld)\n", iod_state_kind_name(k), argv[optind + 1],
		       k == IOD_STATE_SERVICE ? " with its replicas and endpoints" : "",
		       (long long)json_integer_value(json_object_get(r.json, "rev")));
	iod_api_response_free(&r);
	return IOD_EXIT_OK;
}
