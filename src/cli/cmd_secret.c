/*
 * cmd_secret.c: `iod secret create NAME --from-file F`, `iod secret delete
 * NAME`: the values behind a spec's `secrets:` (docs/security.md). The
 * value travels once over HTTPS to a server, which seals it with the
 * cluster's secrets key; the cluster keeps only the ciphertext, and only
 * the nodes running a replica that mounts it can have it opened. Thin
 * shell: reads the file, one API call.
 */
#include "cli.h"
#include "ctl.h"

#include <getopt.h>
#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod secret create NAME (--from-file FILE | --from-literal VALUE)\n"
	           "       iod secret delete NAME\n"
	           "       [-o text|json] [--server ADDR]\n\n"
	           "create: store a secret (admin only, at most 64 KiB) sealed with the\n"
	           "  cluster's secrets key (AES-256-GCM); replicas of services that list it\n"
	           "  in `secrets:` read it from /run/secrets/NAME, a tmpfs in their sandbox.\n"
	           "  The value is never in the state in the clear, in `iod get`, in logs or\n"
	           "  in any replica's environment. Creating an existing NAME replaces it.\n"
	           "  `iod get secrets` lists them (names, sizes; ciphertext only).\n"
	           "delete: remove it (replicas running keep their copy until they "
	           "stop).\n" IOD_CTL_SERVER_HELP);
}

int cmd_secret(int argc, char **argv)
{
	static const struct option opts[] = {{"from-file", required_argument, NULL, 'f'},
	                                     {"from-literal", required_argument, NULL, 'l'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {"server", required_argument, NULL, 's'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	const char *file = NULL, *literal = NULL, *server = NULL;
	enum iod_output out = IOD_OUT_TEXT;
	struct iod_api_client c;
	struct iod_api_response r;
	struct iod_err e = {0};
	char path[IOD_NAME_MAX + 16];
	int o, rc;

	if (iod_cli_wants_help(argc, argv) || argc < 3) {
		usage(argc < 3 ? stderr : stdout);
		return argc < 3 ? IOD_EXIT_INVALID : IOD_EXIT_OK;
	}
	const char *sub = argv[1], *name = argv[2];
	optind = 3;
	while ((o = getopt_long(argc, argv, "o:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'f': file = optarg; break;
		case 'l': literal = optarg; break;
		case 's': server = optarg; break;
		case 'o':
			if (iod_cli_output("secret", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind != argc || !iod_sec_name_valid(name))
		return iod_cli_fail("secret", IOD_EXIT_INVALID,
		                    "usage: iod secret create|delete NAME (NAME: [A-Za-z0-9._-])");
	if (!strcmp(sub, "delete")) {
		if ((rc = iod_ctl_client("secret", server, &c)))
			return rc;
		snprintf(path, sizeof(path), "/v1/secrets/%s", name);
		rc = iod_ctl_call("secret", &c, "DELETE", path, NULL, NULL, 0, &r);
		iod_api_client_close(&c);
		if (rc)
			return rc;
		iod_api_response_free(&r);
		if (out == IOD_OUT_TEXT)
			printf("secret %s deleted\n", name);
		return IOD_EXIT_OK;
	}
	if (strcmp(sub, "create") || (!file) == (!literal))
		return iod_cli_fail("secret", IOD_EXIT_INVALID,
		                    "usage: iod secret create NAME (--from-file FILE | "
		                    "--from-literal VALUE)");
	struct iod_buf v;
	iod_buf_init(&v);
	if (file && iod_buf_read_file(&v, file, IOD_SEC_SECRET_MAX, &e))
		return iod_cli_fail("secret", IOD_EXIT_INVALID, "%s", e.msg);
	if (literal && iod_buf_append(&v, literal, strlen(literal)))
		return iod_cli_fail("secret", IOD_EXIT_ERROR, "out of memory");
	gnutls_datum_t in = {(unsigned char *)(v.data ? v.data : ""), (unsigned)v.len}, b64 = {0};
	rc = gnutls_base64_encode2(&in, &b64);
	if (v.data)
		memset(v.data, 0, v.len);
	iod_buf_free(&v);
	if (rc)
		return iod_cli_fail("secret", IOD_EXIT_ERROR, "out of memory");
	json_t *body =
	    json_pack("{s:s, s:s#}", "name", name, "data", (const char *)b64.data, (int)b64.size);
	memset(b64.data, 0, b64.size);
	gnutls_free(b64.data);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text || (rc = iod_ctl_client("secret", server, &c))) {
		free(text);
		return text ? rc : IOD_EXIT_ERROR;
	}
	rc = iod_ctl_call("secret", &c, "POST", "/v1/secrets", "application/json", text,
	                  strlen(text), &r);
	memset(text, 0, strlen(text));
	free(text);
	iod_api_client_close(&c);
	if (rc)
		return rc;
	if (out == IOD_OUT_JSON)
		iod_json_print(stdout, r.json, false);
	else
		printf("secret %s stored sealed (%lld bytes)\n", name,
		       (long long)json_integer_value(json_object_get(r.json, "bytes")));
	iod_api_response_free(&r);
	return IOD_EXIT_OK;
}
