/*
 * cmd_revoke.c: `iod revoke node|user|server NAME`, `iod revoke service
 * TENANT/NAME`: refuse every credential of an identity from now on (its
 * certificates and the tokens naming it), until `iod revoke --undo`. A
 * revoked node's agent gets 401s: it cannot renew its lease, so the node is
 * declared lost and its replicas move; it cannot rejoin under that name
 * with a join token either, and the mesh proxies refuse its certificate and
 * every SVID issued to it. A revoked service gets no new SVID and the
 * proxies refuse the ones it has.
 */
#include "ctl.h"
#include "iod/sec.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod revoke [--undo] [--reason TEXT] node|user|server NAME\n"
	           "       iod revoke [--undo] [--reason TEXT] service [TENANT/]NAME\n"
	           "                  [-o text|json] [--server ADDR]\n\n"
	           "Revoke an identity (admin only): its certificates stop working at once on\n"
	           "every server (the check is against the replicated state, not a CRL file)\n"
	           "and on every mesh proxy and agent telemetry listener (within a second): a\n"
	           "revoked node's certificate and the SVIDs issued to it, a revoked service's\n"
	           "SVIDs (TENANT defaults to \"default\").\n"
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
	char key[IOD_NAME_MAX], path[IOD_NAME_MAX + 48], tenant[IOD_NAME_MAX] = "";
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
	enum iod_sec_kind k;
	if (!strcmp(kind, "node"))
		k = IOD_SEC_KIND_NODE;
	else if (!strcmp(kind, "user"))
		k = IOD_SEC_KIND_USER;
	else if (!strcmp(kind, "server"))
		k = IOD_SEC_KIND_SERVER;
	else if (!strcmp(kind, "service"))
		k = IOD_SEC_KIND_SERVICE;
	else
		return iod_cli_fail("revoke", IOD_EXIT_INVALID,
		                    "kind \"%s\": want node, user, server or service", kind);
	const char *slash = k == IOD_SEC_KIND_SERVICE ? strchr(name, '/') : NULL;
	if (slash) {
		if ((size_t)(slash - name) >= sizeof(tenant))
			return iod_cli_fail("revoke", IOD_EXIT_INVALID,
			                    "\"%s\": the tenant is too long", name);
		memcpy(tenant, name, (size_t)(slash - name));
		tenant[slash - name] = 0;
		name = slash + 1;
	}
	rc = iod_sec_revocation_key(k, tenant, name, key, sizeof(key));
	if (rc == -ENOSPC)
		return iod_cli_fail("revoke", IOD_EXIT_INVALID, "\"%s\": the name is too long",
		                    name);
	if (rc)
		return iod_cli_fail("revoke", IOD_EXIT_INVALID, "\"%s\" is not a name%s", name,
		                    k == IOD_SEC_KIND_SERVICE ? " (want [TENANT/]NAME)" : "");
	snprintf(path, sizeof(path), "/v1/revocation/%s", key);
	if ((rc = iod_ctl_client("revoke", server, &c)))
		return rc;
	if (undo) {
		rc = iod_ctl_call("revoke", &c, "DELETE", path, NULL, NULL, 0, &r);
	} else {
		json_t *b =
		    json_pack("{s:s, s:s, s:s, s:I}", "kind", kind, "name", name, "reason", reason,
		              "at_ms", (json_int_t)(iod_time_unix_ns() / IOD_NS_PER_MS));
		if (k == IOD_SEC_KIND_SERVICE)
			json_object_set_new(b, "tenant",
			                    json_string(tenant[0] ? tenant : "default"));
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
		printf("%s %s%s%s %s\n", kind, k == IOD_SEC_KIND_SERVICE && tenant[0] ? tenant : "",
		       k == IOD_SEC_KIND_SERVICE && tenant[0] ? "/" : "", name,
		       undo ? "no longer revoked" : "revoked");
	iod_api_response_free(&r);
	return IOD_EXIT_OK;
}
