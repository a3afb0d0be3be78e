/*
 * cmd_revoke.c: `iod revoke node|user|server NAME`: refuse every
 * credential of an identity from now on (its certificates and the tokens
 * naming it), until `iod revoke --undo`. A revoked node's agent gets 401s:
 * it cannot renew its lease, so the node is declared lost and its replicas
 * move; it cannot rejoin under that name with a join token either.
 */
#include "ctl.h"
#include "iod/sec.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod revoke [--undo] [--reason TEXT] node|user|server NAME\n"
	           "                  [-o text|json] [--server ADDR]\n\n"
	           "Revoke an identity (admin only): its certificates stop working at once on\n"
	           "every server (the check is against the replicated state, not a CRL file).\n"
	           "--undo lifts it. `iod get revocations` lists them.\n" IOD_CTL_SERVER_HELP);
}

int cmd_revoke(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"undo", no_argument, NULL, 'u'},         {"reason", required_argument, NULL, 'r'},
	    {"output", required_argument, NULL, 'o'}, {"server", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	const char *server = NULL, *reason = "";
	bool undo = false;
	struct iod_api_client c;
	struct iod_api_response r;
	char key[IOD_NAME_MAX + 16], path[IOD_NAME_MAX + 48];
	int o, rc;

	while ((o = getopt_long(argc, argv, "o:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'u': undo = true; break;
		case 'r': reason = optarg; break;
		case 'o':
			if (iod_cli_output("revoke", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': server = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind + 2 != argc) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	const char *kind = argv[optind], *name = argv[optind + 1];
	if (strcmp(kind, "node") && strcmp(kind, "user") && strcmp(kind, "server"))
		return iod_cli_fail("revoke", IOD_EXIT_INVALID,
		                    "kind \"%s\": want node, user or server", kind);
	if (!iod_sec_name_valid(name) ||
	    snprintf(key, sizeof(key), "%s.%s", kind, name) >= IOD_NAME_MAX)
		return iod_cli_fail("revoke", IOD_EXIT_INVALID, "\"%s\" is not a name", name);
	snprintf(path, sizeof(path), "/v1/revocation/%s", key);
	if ((rc = iod_ctl_client("revoke", server, &c)))
		return rc;
	if (undo) {
		rc = iod_ctl_call("revoke", &c, "DELETE", path, NULL, NULL, 0, &r);
	} else {
		json_t *b =
		    json_pack("{s:s, s:s, s:s, s:I}", "kind", kind, "name", name, "reason", reason,
		              "at_ms", (json_int_t)(iod_time_unix_ns() / IOD_NS_PER_MS));
		char *text = json_dumps(b, JSON_COMPACT);
		json_decref(b);
		rc = iod_ctl_call("revoke", &c, "PUT", path, "application/json", text, strlen(text),
		                  &r);
		free(text);
	}
	iod_api_client_close(&c);
	if (rc)
		return rc;
	if (out == IOD_OUT_JSON)
		iod_json_print(stdout, r.json, false);
	else
		printf("%s %s %s\n", kind, name, undo ? "no longer revoked" : "revoked");
	iod_api_response_free(&r);
	return IOD_EXIT_OK;
}
