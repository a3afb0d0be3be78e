/*
 * cmd_explain.c: `iod explain replica NAME`: where a replica was placed and
 * the scheduler's reasons, as stored with the placement.
 */
#include "ctl.h"
#include "iod/objects.h"
#include "iod/sched.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod explain replica NAME [-o text|json] [--server ADDR]\n\n"
	           "Show where a replica was placed and why (the reasons the scheduler stored\n"
	           "with the placement).\n" IOD_CTL_SERVER_HELP);
}

int cmd_explain(int argc, char **argv)
{
	static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
	                                     {"server", required_argument, NULL, 's'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	const char *server = NULL;
	struct iod_api_client c;
	struct iod_api_response r;
	char path[160];
	int o, rc;

	while ((o = getopt_long(argc, argv, "o:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'o':
			if (iod_cli_output("explain", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': server = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind + 2 != argc || strcmp(argv[optind], "replica")) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	if (!iod_state_name_valid(argv[optind + 1]))
		return iod_cli_fail("explain", IOD_EXIT_INVALID, "invalid name \"%s\"",
		                    argv[optind + 1]);
	snprintf(path, sizeof(path), "/v1/replica/%s", argv[optind + 1]);
	if ((rc = iod_ctl_client("explain", server, &c)))
		return rc;
	rc = iod_ctl_call("explain", &c, "GET", path, NULL, NULL, 0, &r);
	iod_api_client_close(&c);
	if (rc)
		return rc;
	struct iod_obj_replica *v = malloc(sizeof(*v));
	json_t *x;
	if (!v) {
		iod_api_response_free(&r);
		return iod_cli_fail("explain", IOD_EXIT_ERROR, "out of memory");
	}
	iod_obj_replica_from_json(json_object_get(r.json, "value"), v, NULL);
	if (out == IOD_OUT_JSON) {
		/* the replica's placement and reasons; the whole answer if it lacks one */
		json_t *j = NULL;
		if (iod_obj_has(v, IOD_OBJ_REPLICA_SERVICE) &&
		    iod_obj_has(v, IOD_OBJ_REPLICA_NODE) && iod_obj_has(v, IOD_OBJ_REPLICA_GPUS) &&
		    v->reasons)
			j = json_pack("{s:s, s:s, s:s, s:s, s:O}", "replica", argv[optind + 1],
			              "service", v->service, "node", v->node, "gpus", v->gpus,
			              "reasons", v->reasons);
		iod_json_print(stdout, j ? j : r.json, false);
		json_decref(j);
	} else {
		const char *svc = iod_obj_has(v, IOD_OBJ_REPLICA_SERVICE) ? v->service : "-";
		const char *node = iod_obj_has(v, IOD_OBJ_REPLICA_NODE) ? v->node : "-";
		const char *gpus = iod_obj_has(v, IOD_OBJ_REPLICA_GPUS) ? v->gpus : "-";
		size_t i;
		printf("replica %s of service %s\n  node %s, GPUs %s\nreasons:\n", argv[optind + 1],
		       svc, node, gpus[0] ? gpus : "none");
		json_array_foreach(v->reasons, i, x)
		{
			printf("  - %s\n", json_string_value(x) ? json_string_value(x) : "?");
		}
		if (!json_array_size(v->reasons))
			printf("  (no reasons stored with this placement)\n");
		json_t *ex = v->explain;
		if (ex) {
			struct iod_buf b;
			iod_buf_init(&b);
			if (iod_sched_explain_format_json(ex, &b) == 0 && b.data)
				printf("how it was chosen:\n%s", b.data);
			iod_buf_free(&b);
		}
	}
	iod_obj_replica_free(v);
	free(v);
	iod_api_response_free(&r);
	return IOD_EXIT_OK;
}
