/*
 * cmd_audit.c: `iod audit`: the audit trail: every API write and every
 * refused request (who, what, when, result), merged from all servers.
 *
 * Each server records the requests it answered (docs/security.md), like a
 * Kubernetes API server's log backend, so this asks every server it knows
 * and merges by time; a server that does not answer is named, not hidden.
 */
#include "ctl.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod audit [--limit N] [--since DUR] [--denied] [-o text|json]\n"
	           "                 [--server ADDR[,ADDR...]]\n\n"
	           "Show the audit trail: API writes and refused requests on every server\n"
	           "(admin only), oldest first.\n\n"
	           "  --limit N    the last N records (default 50)\n"
	           "  --since DUR  only records newer than DUR ago (e.g. 10m)\n"
	           "  --denied     only refusals (401 and 403)\n" IOD_CTL_SERVER_HELP);
}

static int by_time(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	json_int_t tx = json_integer_value(json_object_get(x, "at_ms")),
	           ty = json_integer_value(json_object_get(y, "at_ms"));
	return tx < ty ? -1 : tx > ty;
}

int cmd_audit(int argc, char **argv)
{
	static const struct option opts[] = {{"limit", required_argument, NULL, 'l'},
	                                     {"since", required_argument, NULL, 'S'},
	                                     {"denied", no_argument, NULL, 'D'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {"server", required_argument, NULL, 's'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	const char *server = NULL;
	unsigned long limit = 50;
	uint64_t since_ns = 0;
	bool denied = false;
	struct iod_err e = {0};
	struct iod_api_client all;
	int o, rc, failed = 0;

	while ((o = getopt_long(argc, argv, "o:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'l': limit = strtoul(optarg, NULL, 10); break;
		case 'S':
			if (iod_parse_duration(optarg, &since_ns, &e))
				return iod_cli_fail("audit", IOD_EXIT_INVALID, "--since %s: %s",
				                    optarg, e.msg);
			break;
		case 'D': denied = true; break;
		case 'o':
			if (iod_cli_output("audit", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': server = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind != argc || !limit)
		return iod_cli_fail("audit", IOD_EXIT_INVALID, "usage: iod audit [--limit N] ...");
	if ((rc = iod_ctl_client("audit", server, &all)))
		return rc;
	json_t *merged = json_array();
	uint64_t now_ms = iod_time_unix_ns() / IOD_NS_PER_MS;
	uint64_t from_ms = since_ns ? now_ms - IOD_MIN(now_ms, since_ns / IOD_NS_PER_MS) : 0;
	for (uint32_t i = 0; i < all.servers_n; i++) {
		struct iod_api_client one;
		struct iod_api_response r;
		struct iod_err e1 = {0};
		if (iod_api_client_init(&one, all.servers[i], &e1))
			continue;
		iod_api_client_set_creds(&one, all.creds, all.token);
		one.retry_ms = 1000;
		one.timeout_ms = 2000;
		rc = iod_api_request(&one, "GET", "/v1/audit?limit=4096", NULL, NULL, 0, &r, &e1);
		iod_api_client_close(&one);
		if (rc || r.status != 200) {
			fprintf(stderr, "iod audit: %s: %s\n", all.servers[i],
			        rc ? e1.msg : iod_api_error_text(&r));
			if (!rc && (r.status == 401 || r.status == 403)) {
				iod_api_response_free(&r);
				iod_api_client_close(&all);
				json_decref(merged);
				return IOD_EXIT_ERROR;
			}
			if (!rc)
				iod_api_response_free(&r);
			failed++;
			continue;
		}
		size_t k;
		json_t *x;
		json_array_foreach(json_object_get(r.json, "items"), k, x)
		{
			json_int_t status = json_integer_value(json_object_get(x, "status"));
			if (denied && status != 401 && status != 403)
				continue;
			if ((uint64_t)json_integer_value(json_object_get(x, "at_ms")) < from_ms)
				continue;
			json_object_set_new(x, "server", json_string(all.servers[i]));
			json_array_append(merged, x);
		}
		iod_api_response_free(&r);
	}
	iod_api_client_close(&all);
	size_t n = json_array_size(merged);
	json_t **v = calloc(n + 1, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(merged, i);
	qsort(v, n, sizeof(*v), by_time);
	size_t first = n > limit ? n - limit : 0;
	json_t *outv = json_array();
	for (size_t i = first; i < n; i++)
		json_array_append(outv, v[i]);
	free(v);
	json_decref(merged);
	if (out == IOD_OUT_JSON) {
		iod_json_print(stdout, outv, false);
	} else {
		size_t i;
		json_t *x;
		printf("%-24s %-22s %-7s %-34s %-6s %s\n", "TIME", "WHO", "METHOD", "PATH",
		       "STATUS", "DETAIL");
		json_array_foreach(outv, i, x)
		{
			char t[32];
			uint64_t ms = (uint64_t)json_integer_value(json_object_get(x, "at_ms"));
			time_t s = (time_t)(ms / 1000);
			struct tm tm;
			gmtime_r(&s, &tm);
			size_t l = strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
			snprintf(t + l, sizeof(t) - l, ".%03uZ", (unsigned)(ms % 1000));
			const char *who = "", *m = "", *p = "", *d = "";
			iod_json_get_str(x, "who", &who);
			iod_json_get_str(x, "method", &m);
			iod_json_get_str(x, "path", &p);
			iod_json_get_str(x, "detail", &d);
			printf("%-24s %-22s %-7s %-34s %-6lld %.120s\n", t, who, m, p,
			       (long long)json_integer_value(json_object_get(x, "status")), d);
		}
	}
	json_decref(outv);
	return failed && !n ? IOD_EXIT_UNAVAILABLE : IOD_EXIT_OK;
}
