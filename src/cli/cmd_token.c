/*
 * cmd_token.c: `iod token create|list|revoke`: bearer tokens for people,
 * scripts and joining nodes. The server draws the secret, stores only its
 * SHA-256, and shows the token once (docs/security.md).
 */
#include "ctl.h"
#include "iod/sec.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod token create --role viewer|deployer|admin|node [--ttl DUR]\n"
	           "                        [--user NAME] [--node NAME] [--description TEXT]\n"
	           "       iod token list\n"
	           "       iod token revoke ID\n"
	           "       [-o text|json] [--server ADDR]\n\n"
	           "create: a bearer token with a role (admin only). The token is printed once;\n"
	           "  the cluster keeps its SHA-256. --role node makes a join token: `iod agent\n"
	           "  --join-token T` exchanges it for a node certificate (it needs --ttl, e.g.\n"
	           "  1h; --node binds it to one node name). Without --ttl a person's token\n"
	           "  never expires; at most a year.\n"
	           "  Use it with IOD_TOKEN=... or a context's \"token\" in the client config.\n"
	           "list: the tokens (id, role, user, expiry; never the secret).\n"
	           "revoke: delete a token; it stops working at once.\n" IOD_CTL_SERVER_HELP);
}

static void when(uint64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (!ms) {
		snprintf(buf, len, "never");
		return;
	}
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int cmd_token(int argc, char **argv)
{
	static const struct option opts[] = {{"role", required_argument, NULL, 'r'},
	                                     {"ttl", required_argument, NULL, 't'},
	                                     {"user", required_argument, NULL, 'u'},
	                                     {"node", required_argument, NULL, 'n'},
	                                     {"description", required_argument, NULL, 'd'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {"server", required_argument, NULL, 's'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	const char *role = NULL, *user = NULL, *node = NULL, *desc = NULL, *server = NULL;
	enum iod_output out = IOD_OUT_TEXT;
	uint64_t ttl_ns = 0;
	struct iod_err e = {0};
	struct iod_api_client c;
	struct iod_api_response r;
	int o, rc;

	if (iod_cli_wants_help(argc, argv) || argc < 2) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? IOD_EXIT_INVALID : IOD_EXIT_OK;
	}
	const char *sub = argv[1];
	optind = 2;
	while ((o = getopt_long(argc, argv, "o:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'r': role = optarg; break;
		case 't':
			if (iod_parse_duration(optarg, &ttl_ns, &e) || ttl_ns < IOD_NS_PER_S)
				return iod_cli_fail("token", IOD_EXIT_INVALID, "--ttl %s: %s",
				                    optarg, e.msg[0] ? e.msg : "at least 1s");
			break;
		case 'u': user = optarg; break;
		case 'n': node = optarg; break;
		case 'd': desc = optarg; break;
		case 'o':
			if (iod_cli_output("token", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': server = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (!strcmp(sub, "create")) {
		enum iod_sec_role rl;
		if (optind != argc)
			return iod_cli_fail("token", IOD_EXIT_INVALID, "unexpected argument %s",
			                    argv[optind]);
		if (!role || iod_sec_role_parse(role, &rl) || rl == IOD_SEC_ROLE_SERVER)
			return iod_cli_fail("token", IOD_EXIT_INVALID,
			                    "--role viewer|deployer|admin|node is required");
		if (rl == IOD_SEC_ROLE_NODE && !ttl_ns)
			return iod_cli_fail("token", IOD_EXIT_INVALID,
			                    "a join token needs --ttl (kubeadm's default is 24h)");
		json_t *b = json_pack("{s:s, s:I}", "role", role, "ttl_ms",
		                      (json_int_t)(ttl_ns / IOD_NS_PER_MS));
		if (user)
			json_object_set_new(b, "user", json_string(user));
		if (node)
			json_object_set_new(b, "node", json_string(node));
		if (desc)
			json_object_set_new(b, "description", json_string(desc));
		char *text = json_dumps(b, JSON_COMPACT);
		json_decref(b);
		if ((rc = iod_ctl_client("token", server, &c))) {
			free(text);
			return rc;
		}
		rc = iod_ctl_call("token", &c, "POST", "/v1/tokens", "application/json", text,
		                  strlen(text), &r);
		free(text);
		iod_api_client_close(&c);
		if (rc)
			return rc;
		if (out == IOD_OUT_JSON) {
			iod_json_print(stdout, r.json, false);
		} else {
			const char *tok = "";
			iod_json_get_str(r.json, "token", &tok);
			printf("%s\n", tok);
			fprintf(stderr,
			        "token %s, role %s%s%s: shown once; the cluster keeps its hash\n",
			        json_string_value(json_object_get(r.json, "id")), role,
			        ttl_ns ? ", expires in " : "", ttl_ns ? "the --ttl given" : "");
		}
		iod_api_response_free(&r);
		return IOD_EXIT_OK;
	}
	if (!strcmp(sub, "list")) {
		if ((rc = iod_ctl_client("token", server, &c)))
			return rc;
		rc = iod_ctl_call("token", &c, "GET", "/v1/tokens", NULL, NULL, 0, &r);
		iod_api_client_close(&c);
		if (rc)
			return rc;
		json_t *items = json_object_get(r.json, "items"), *x;
		size_t i;
		json_array_foreach(items, i, x)
		{
			json_object_del(json_object_get(x, "value"), "hash");
		}
		if (out == IOD_OUT_JSON) {
			iod_json_print(stdout, items, false);
		} else {
			printf("%-14s %-9s %-16s %-21s %s\n", "ID", "ROLE", "USER/NODE", "EXPIRES",
			       "CREATED BY");
			uint64_t now = iod_time_unix_ns() / IOD_NS_PER_MS;
			json_array_foreach(items, i, x)
			{
				const json_t *v = json_object_get(x, "value");
				const char *rl = "?", *u = "", *n = "", *by = "";
				uint64_t exp = 0;
				char w[32];
				iod_json_get_str(v, "role", &rl);
				iod_json_get_str(v, "user", &u);
				iod_json_get_str(v, "node", &n);
				iod_json_get_str(v, "created_by", &by);
				iod_json_get_u64(v, "expires_ms", &exp);
				when(exp, w, sizeof(w));
				printf("%-14s %-9s %-16s %-21s %s%s\n",
				       json_string_value(json_object_get(x, "name")), rl,
				       u[0] ? u : n, w, by, exp && exp <= now ? "  (expired)" : "");
			}
		}
		iod_api_response_free(&r);
		return IOD_EXIT_OK;
	}
	if (!strcmp(sub, "revoke") || !strcmp(sub, "delete")) {
		char path[64];
		if (optind + 1 != argc || !iod_sec_name_valid(argv[optind]) ||
		    strlen(argv[optind]) != IOD_SEC_TOKEN_ID_HEX)
			return iod_cli_fail(
			    "token", IOD_EXIT_INVALID,
			    "token revoke needs one token ID (%d hex digits: the part "
			    "after \"iod.\")",
			    IOD_SEC_TOKEN_ID_HEX);
		snprintf(path, sizeof(path), "/v1/token/%s", argv[optind]);
		if ((rc = iod_ctl_client("token", server, &c)))
			return rc;
		rc = iod_ctl_call("token", &c, "DELETE", path, NULL, NULL, 0, &r);
		iod_api_client_close(&c);
		if (rc)
			return rc;
		iod_api_response_free(&r);
		if (out == IOD_OUT_TEXT)
			printf("token %s revoked\n", argv[optind]);
		return IOD_EXIT_OK;
	}
	return iod_cli_fail("token", IOD_EXIT_INVALID,
	                    "unknown subcommand \"%s\": want create, list or revoke", sub);
}
