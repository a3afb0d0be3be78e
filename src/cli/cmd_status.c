/*
 * cmd_status.c: `iod status`: the control plane's members, leader, term,
 * commit and applied index, as one server sees them.
 */
#include "ctl.h"

#include <getopt.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod status [-o text|json] [--server ADDR]\n\n"
	           "Show the control plane: this server's view of the leader, term, members,\n"
	           "commit and applied index, state revision.\n" IOD_CTL_SERVER_HELP);
}

int cmd_status(int argc, char **argv)
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
	int o, rc;

	while ((o = getopt_long(argc, argv, "o:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'o':
			if (iod_cli_output("status", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': server = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	if ((rc = iod_ctl_client("status", server, &c)))
		return rc;
	rc = iod_ctl_call("status", &c, "GET", "/v1/status", NULL, NULL, 0, &r);
	iod_api_client_close(&c);
	if (rc)
		return rc;
	if (out == IOD_OUT_JSON) {
		iod_json_print(stdout, r.json, false);
	} else {
		json_t *j = r.json, *m;
		size_t i;
		const char *st = "?", *lapi = "";
		iod_json_get_str(j, "state", &st);
		iod_json_get_str(j, "leader_api", &lapi);
		printf("server     %lld (%s) at %s\n",
		       (long long)json_integer_value(json_object_get(j, "id")), st, r.server);
		printf("leader     %lld%s%s%s\n",
		       (long long)json_integer_value(json_object_get(j, "leader")), lapi[0] ? " (" : "",
		       lapi, lapi[0] ? ")" : "");
		printf("term       %lld\n", (long long)json_integer_value(json_object_get(j, "term")));
		printf("commit     %lld   applied %lld   last %lld\n",
		       (long long)json_integer_value(json_object_get(j, "commit_index")),
		       (long long)json_integer_value(json_object_get(j, "applied_index")),
		       (long long)json_integer_value(json_object_get(j, "last_index")));
		printf("revision   %lld   objects %lld\n",
		       (long long)json_integer_value(json_object_get(j, "revision")),
		       (long long)json_integer_value(json_object_get(j, "objects")));
		printf("members:\n  %-4s %-22s %-22s %s\n", "ID", "RAFT", "API", "ROLE");
		json_array_foreach(json_object_get(j, "members"), i, m)
		{
			const char *ra = "", *aa = "", *role = "";
			iod_json_get_str(m, "raft", &ra);
			iod_json_get_str(m, "api", &aa);
			iod_json_get_str(m, "role", &role);
			long long id = (long long)json_integer_value(json_object_get(m, "id"));
			printf("  %-4lld %-22s %-22s %s%s\n", id, ra, aa[0] ? aa : "-", role,
			       id == (long long)json_integer_value(json_object_get(j, "leader"))
			           ? " (leader)"
			           : "");
		}
	}
	iod_api_response_free(&r);
	return IOD_EXIT_OK;
}
