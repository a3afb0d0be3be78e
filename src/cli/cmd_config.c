/*
 * cmd_config.c: `iod config get|set|unset|view|history|rollback|status`:
 * the cluster's live settings (docs/config.md).
 *
 * A thin shell over the schema (src/config/schema.c) and the object API:
 * every key and value is checked before anything is sent (exit 2 with a
 * suggestion), a change is one compare-and-swap PUT of config/cluster (a
 * Raft-committed revision), and status reads each node's acknowledgement.
 * --wait DURATION on a change waits until every node has applied it.
 */
#include "ctl.h"
#include "iod/config.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CMD "config"

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: iod config get KEY            the value of KEY (set, or its default)\n"
	       "       iod config set KEY VALUE      change KEY cluster-wide (a new revision)\n"
	       "       iod config unset KEY          back to the default (a new revision)\n"
	       "       iod config view               every key: value, where from, who applies it\n"
	       "       iod config history            the revisions kept, newest first\n"
	       "       iod config rollback REV       the settings of revision REV, as a new one\n"
	       "       iod config status             which nodes applied the current revision\n"
	       "options: [-o text|json] [--wait DURATION] [--server ADDR]\n\n"
	       "Keys are dot paths (service_mesh.transport); `iod config view` lists them.\n"
	       "Agents apply a change live (no replica restarts) and acknowledge it per node;\n"
	       "a node that cannot honour a value runs a fallback and says so in status.\n"
	       "  -o json          machine-readable output\n"
	       "  --wait DURATION  after set/unset/rollback, wait until every node applied it\n"
	       "                   (exit 4 naming the nodes that did not)\n" IOD_CTL_SERVER_HELP
	       "Exit codes: 0 ok, 2 unknown key / bad value / bad revision, 4 --wait ran out,\n"
	       "5 the cluster is unreachable.\n");
}

struct opts {
	bool json;
	uint64_t wait_ns;
	const char *server;
};

struct current {
	json_t *doc; /* config/cluster's value, NULL when never written */
	uint64_t rev;
};

static int read_current(struct iod_api_client *c, struct current *cur)
{
	struct iod_api_response r;
	struct iod_err e = {0};
	memset(cur, 0, sizeof(*cur));
	int rc = iod_api_request(c, "GET", "/v1/config/" IOD_CONFIG_OBJECT "?consistent=1", NULL,
	                         NULL, 0, &r, &e);
	if (rc)
		return iod_cli_fail(CMD, IOD_EXIT_UNAVAILABLE, "%s", e.msg);
	if (r.status == 404) {
		iod_api_response_free(&r);
		return IOD_EXIT_OK;
	}
	if (r.status != 200 || !r.json) {
		rc = iod_cli_fail(CMD, IOD_EXIT_ERROR, "reading config/cluster: %s (HTTP %d)",
		                  iod_api_error_text(&r), r.status);
		iod_api_response_free(&r);
		return rc;
	}
	json_t *v = json_object_get(r.json, "value");
	iod_json_get_u64(r.json, "rev", &cur->rev);
	if (iod_config_doc_check(v, &e)) {
		iod_api_response_free(&r);
		return iod_cli_fail(CMD, IOD_EXIT_ERROR, "config/cluster is damaged: %s", e.msg);
	}
	cur->doc = json_incref(v);
	iod_api_response_free(&r);
	return IOD_EXIT_OK;
}

static json_t *get_list(struct iod_api_client *c, const char *kind)
{
	struct iod_api_response r;
	char path[64];
	snprintf(path, sizeof(path), "/v1/%s?consistent=1", kind); /* after our write */
	if (iod_ctl_call(CMD, c, "GET", path, NULL, NULL, 0, &r))
		return NULL;
	json_t *j = json_incref(r.json);
	iod_api_response_free(&r);
	return j;
}

/* The status of revision rev; NULL when the lists could not be read. */
static json_t *status_of(struct iod_api_client *c, uint64_t rev, uint32_t *behind)
{
	json_t *nodes = get_list(c, "nodes"), *cfgs = nodes ? get_list(c, "configs") : NULL;
	json_t *st = cfgs ? iod_config_status(rev, nodes, cfgs, behind) : NULL;
	json_decref(nodes);
	json_decref(cfgs);
	return st;
}

static void print_status(const json_t *st, uint64_t rev, uint32_t behind)
{
	const json_t *x, *f;
	size_t i, j;
	printf("revision %llu: %zu node(s), %u not applied\n", (unsigned long long)rev,
	       json_array_size(st), behind);
	printf("%-20s %-10s %-8s %-10s %s\n", "NODE", "ACKED_REV", "APPLIED", "TRANSPORT",
	       "FALLBACKS");
	json_array_foreach(st, i, x)
	{
		uint64_t a = 0;
		bool ok = false, acked = false;
		iod_json_get_u64(x, "acked_rev", &a);
		iod_json_get_bool(x, "applied", &ok);
		iod_json_get_bool(x, "acked", &acked);
		char ar[24] = "-";
		if (acked)
			snprintf(ar, sizeof(ar), "%llu", (unsigned long long)a);
		/* service_mesh.transport as the node runs it (its mesh proxy took it
		 * before the ack; after a fallback: the fallback) */
		const char *tp = json_string_value(
		    json_object_get(json_object_get(x, "values"), "service_mesh.transport"));
		printf("%-20s %-10s %-8s %-10s", json_string_value(json_object_get(x, "node")), ar,
		       ok ? "yes" : "NO", tp ? tp : "-");
		json_array_foreach(json_object_get(x, "fallbacks"), j, f)
		{
			printf(" %s=%s (wanted %s: %s)",
			       json_string_value(json_object_get(f, "key")),
			       json_string_value(json_object_get(f, "using")),
			       json_string_value(json_object_get(f, "want")),
			       json_string_value(json_object_get(f, "reason")));
		}
		if (!json_array_size(json_object_get(x, "fallbacks")))
			printf(" -");
		putchar('\n');
	}
}

static int cmd_status(struct iod_api_client *c, const struct opts *o)
{
	struct current cur;
	uint32_t behind = 0;
	int rc = read_current(c, &cur);
	if (rc)
		return rc;
	json_t *st = status_of(c, cur.rev, &behind);
	json_decref(cur.doc);
	if (!st)
		return IOD_EXIT_UNAVAILABLE;
	if (o->json) {
		json_t *d = json_pack("{s:I, s:I, s:O}", "rev", (json_int_t)cur.rev, "behind",
		                      (json_int_t)behind, "nodes", st);
		iod_json_print(stdout, d, false);
		json_decref(d);
	} else {
		print_status(st, cur.rev, behind);
	}
	json_decref(st);
	return IOD_EXIT_OK;
}

/* Wait until every node acknowledged rev (or the time is up). */
static int wait_applied(struct iod_api_client *c, uint64_t rev, const struct opts *o)
{
	uint64_t t0 = iod_clock_now_ns(), deadline = t0 + o->wait_ns;
	for (;;) {
		uint32_t behind = 0;
		json_t *st = status_of(c, rev, &behind);
		if (!st)
			return IOD_EXIT_UNAVAILABLE;
		uint64_t now = iod_clock_now_ns();
		if (!behind || now >= deadline) {
			if (!o->json)
				printf("revision %llu: %zu of %zu node(s) applied in %.1f ms\n",
				       (unsigned long long)rev, json_array_size(st) - behind,
				       json_array_size(st), (double)(now - t0) / 1e6);
			if (behind && !o->json)
				print_status(st, rev, behind);
			json_decref(st);
			return behind ? IOD_EXIT_PARTIAL : IOD_EXIT_OK;
		}
		json_decref(st);
		usleep(10000);
	}
}

/* Write settings `next` as the next revision after cur (compare-and-swap). */
static int write_next(struct iod_api_client *c, const struct current *cur, json_t *next,
                      const char *change, const struct opts *o)
{
	json_t *doc = iod_config_doc_next(cur->doc, cur->rev, next, change,
	                                  iod_time_unix_ns() / IOD_NS_PER_MS);
	char *text = doc ? iod_json_string(doc, true) : NULL;
	char path[96];
	struct iod_api_response r;
	uint64_t rev = 0;
	json_decref(doc);
	if (!text)
		return iod_cli_fail(CMD, IOD_EXIT_ERROR, "out of memory");
	snprintf(path, sizeof(path), "/v1/config/" IOD_CONFIG_OBJECT "?prev_rev=%llu",
	         (unsigned long long)cur->rev);
	int rc = iod_ctl_call(CMD, c, "PUT", path, "application/json", text, strlen(text), &r);
	free(text);
	if (rc)
		return r.status == 409 ? -EAGAIN : rc;
	iod_json_get_u64(r.json, "rev", &rev);
	iod_api_response_free(&r);
	if (o->json && !o->wait_ns) {
		json_t *d = json_pack("{s:I, s:s}", "rev", (json_int_t)rev, "change", change);
		iod_json_print(stdout, d, false);
		json_decref(d);
	} else if (!o->json) {
		printf("revision %llu: %s\n", (unsigned long long)rev, change);
	}
	if (!o->wait_ns)
		return IOD_EXIT_OK;
	rc = wait_applied(c, rev, o);
	if (o->json) {
		json_t *d = json_pack("{s:I, s:s, s:b}", "rev", (json_int_t)rev, "change", change,
		                      "applied", rc == IOD_EXIT_OK);
		iod_json_print(stdout, d, false);
		json_decref(d);
	}
	return rc;
}

enum op { OP_SET, OP_UNSET, OP_ROLLBACK };

/* The new settings for op on cur; NULL with an exit code in *rc. */
static json_t *next_settings(const struct current *cur, enum op op, const char *key,
                             const json_t *value, uint64_t rev, int *rc)
{
	struct iod_err e = {0};
	if (op == OP_ROLLBACK) {
		const json_t *s = iod_config_doc_at(cur->doc, cur->rev, rev, &e);
		if (!s) {
			*rc = iod_cli_fail(CMD, IOD_EXIT_INVALID, "%s", e.msg);
			return NULL;
		}
		return json_deep_copy(s);
	}
	json_t *n = json_deep_copy(iod_config_doc_settings(cur->doc));
	if (op == OP_SET)
		json_object_set(n, key, (json_t *)value);
	else
		json_object_del(n, key);
	return n;
}

/* set/unset/rollback: read, change, write with CAS (retried on a race). */
static int change(struct iod_api_client *c, enum op op, const char *key, const json_t *value,
                  uint64_t rev, const char *what, const struct opts *o)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		struct current cur;
		int rc = read_current(c, &cur);
		if (rc)
			return rc;
		json_t *next = next_settings(&cur, op, key, value, rev, &rc);
		if (next) {
			rc = write_next(c, &cur, next, what, o);
			json_decref(next);
		}
		json_decref(cur.doc);
		if (rc != -EAGAIN)
			return rc;
	}
	return iod_cli_fail(CMD, IOD_EXIT_ERROR, "the configuration kept changing; try again");
}

static void value_text(const struct iod_config_key *k, const json_t *settings, char *buf,
                       size_t len, bool *set)
{
	const json_t *v = json_object_get(settings, k->path);
	*set = v != NULL;
	if (v)
		iod_config_value_format(k, v, buf, len);
	else
		snprintf(buf, len, "%s", k->default_text);
}

static int cmd_get(struct iod_api_client *c, const struct iod_config_key *k, const struct opts *o)
{
	struct current cur;
	char buf[128];
	bool set;
	int rc = read_current(c, &cur);
	if (rc)
		return rc;
	value_text(k, iod_config_doc_settings(cur.doc), buf, sizeof(buf), &set);
	if (o->json) {
		json_t *v = json_object_get(iod_config_doc_settings(cur.doc), k->path);
		json_t *d = json_pack("{s:s, s:O?, s:s, s:b, s:I}", "key", k->path, "value", v,
		                      "text", buf, "set", set, "rev", (json_int_t)cur.rev);
		iod_json_print(stdout, d, false);
		json_decref(d);
	} else {
		printf("%s%s\n", buf, set ? "" : " (default)");
	}
	json_decref(cur.doc);
	return IOD_EXIT_OK;
}

static int cmd_view(struct iod_api_client *c, const struct opts *o)
{
	struct current cur;
	size_t n;
	const struct iod_config_key *keys = iod_config_keys(&n);
	int rc = read_current(c, &cur);
	if (rc)
		return rc;
	json_t *arr = json_array();
	if (!o->json)
		printf("revision %llu\n%-26s %-24s %-8s %s\n", (unsigned long long)cur.rev, "KEY",
		       "VALUE", "SOURCE", "APPLIED BY");
	for (size_t i = 0; i < n; i++) {
		char buf[128];
		bool set;
		value_text(&keys[i], iod_config_doc_settings(cur.doc), buf, sizeof(buf), &set);
		if (!o->json)
			printf("%-26s %-24s %-8s %s\n", keys[i].path, buf, set ? "set" : "default",
			       keys[i].applies);
		json_array_append_new(
		    arr, json_pack("{s:s, s:s, s:b, s:s, s:s}", "key", keys[i].path, "value", buf,
		                   "set", set, "applies", keys[i].applies, "help", keys[i].help));
	}
	if (o->json) {
		json_t *d = json_pack("{s:I, s:O, s:o}", "rev", (json_int_t)cur.rev, "settings",
		                      (json_t *)iod_config_doc_settings(cur.doc), "keys", arr);
		iod_json_print(stdout, d, false);
		json_decref(d);
	} else {
		json_decref(arr);
	}
	json_decref(cur.doc);
	return IOD_EXIT_OK;
}

static void history_row(uint64_t rev, const json_t *v, bool current)
{
	uint64_t t = 0;
	char ts[32] = "-";
	iod_json_get_u64(v, "time_ms", &t);
	time_t sec = (time_t)(t / 1000);
	struct tm tm;
	if (t && gmtime_r(&sec, &tm))
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	const char *ch = json_string_value(json_object_get(v, "change"));
	char *s = iod_json_string(iod_config_doc_settings(v), true);
	printf("%-8llu %-21s %-40s %s%s\n", (unsigned long long)rev, ts, ch ? ch : "", s ? s : "",
	       current ? "  (current)" : "");
	free(s);
}

static int cmd_history(struct iod_api_client *c, const struct opts *o)
{
	struct current cur;
	const json_t *x;
	size_t i;
	int rc = read_current(c, &cur);
	if (rc)
		return rc;
	if (o->json) {
		json_t *arr = json_array();
		if (cur.doc)
			json_array_append_new(
			    arr, json_pack("{s:I, s:O, s:O?, s:O?}", "rev", (json_int_t)cur.rev,
			                   "settings", (json_t *)iod_config_doc_settings(cur.doc),
			                   "change", json_object_get(cur.doc, "change"), "time_ms",
			                   json_object_get(cur.doc, "time_ms")));
		json_array_foreach(json_object_get(cur.doc, "history"), i, x)
		{
			json_array_append(arr, (json_t *)x);
		}
		iod_json_print(stdout, arr, false);
		json_decref(arr);
	} else if (!cur.doc) {
		printf("(no configuration changes yet: every key has its default)\n");
	} else {
		printf("%-8s %-21s %-40s %s\n", "REV", "TIME", "CHANGE", "SETTINGS");
		history_row(cur.rev, cur.doc, true);
		json_array_foreach(json_object_get(cur.doc, "history"), i, x)
		{
			uint64_t r = 0;
			iod_json_get_u64(x, "rev", &r);
			history_row(r, x, false);
		}
	}
	json_decref(cur.doc);
	return IOD_EXIT_OK;
}

/* Options after the subcommand; the positional words left in argv[optind..]. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {{"output", required_argument, NULL, 'o'},
	                                   {"server", required_argument, NULL, 's'},
	                                   {"wait", required_argument, NULL, 'w'},
	                                   {"help", no_argument, NULL, 'h'},
	                                   {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	struct iod_err e = {0};
	int c;
	while ((c = getopt_long(argc, argv, "o:s:w:h", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (iod_cli_output(CMD, optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': o->server = optarg; break;
		case 'w':
			if (iod_parse_duration(optarg, &o->wait_ns, &e))
				return iod_cli_fail(CMD, IOD_EXIT_INVALID, "--wait: %s", e.msg);
			break;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	o->json = out == IOD_OUT_JSON;
	return IOD_EXIT_OK;
}

static int need_args(int have, int want, const char *sub)
{
	if (have == want)
		return IOD_EXIT_OK;
	usage(stderr);
	return iod_cli_fail(CMD, IOD_EXIT_INVALID, "%s takes %d argument(s), %d given", sub, want,
	                    have);
}

/* Check everything that needs no cluster: the subcommand, the key, the value. */
static int check_args(const char *sub, char **args, int n, const struct iod_config_key **k,
                      json_t **value, uint64_t *rev)
{
	static const char *const subs[] = {"get",     "set",      "unset", "view",
	                                   "history", "rollback", "status"};
	static const int nargs[] = {1, 2, 1, 0, 0, 1, 0};
	struct iod_err e = {0};
	size_t i;
	for (i = 0; i < IOD_ARRAY_LEN(subs) && strcmp(sub, subs[i]); i++)
		;
	if (i == IOD_ARRAY_LEN(subs)) {
		const char *s = iod_suggest(sub, subs, IOD_ARRAY_LEN(subs));
		return iod_cli_fail(CMD, IOD_EXIT_INVALID,
		                    "unknown subcommand \"%s\"%s%s%s; see `iod config --help`", sub,
		                    s ? " (did you mean \"" : "", s ? s : "", s ? "\"?)" : "");
	}
	int rc = need_args(n, nargs[i], sub);
	if (rc)
		return rc;
	if (nargs[i] && strcmp(sub, "rollback") && iod_config_key_find(args[0], k, &e))
		return iod_cli_fail(CMD, IOD_EXIT_INVALID, "%s", e.msg);
	if (!strcmp(sub, "set") && iod_config_value_parse(*k, args[1], value, &e))
		return iod_cli_fail(CMD, IOD_EXIT_INVALID, "%s", e.msg);
	if (!strcmp(sub, "rollback")) {
		char *end;
		unsigned long long r = strtoull(args[0], &end, 10);
		if (!args[0][0] || *end || args[0][0] == '-' || !r)
			return iod_cli_fail(CMD, IOD_EXIT_INVALID,
			                    "rollback: \"%s\" is not a revision (see `iod config "
			                    "history`)",
			                    args[0]);
		*rev = r;
	}
	return IOD_EXIT_OK;
}

static int dispatch(struct iod_api_client *c, const char *sub, char **args,
                    const struct iod_config_key *k, const json_t *value, uint64_t rev,
                    const struct opts *o)
{
	char what[256];
	if (!strcmp(sub, "get"))
		return cmd_get(c, k, o);
	if (!strcmp(sub, "view"))
		return cmd_view(c, o);
	if (!strcmp(sub, "history"))
		return cmd_history(c, o);
	if (!strcmp(sub, "status"))
		return cmd_status(c, o);
	if (!strcmp(sub, "set")) {
		char t[128];
		iod_config_value_format(k, value, t, sizeof(t));
		snprintf(what, sizeof(what), "set %s=%s", k->path, t);
		return change(c, OP_SET, k->path, value, 0, what, o);
	}
	if (!strcmp(sub, "unset")) {
		snprintf(what, sizeof(what), "unset %s", k->path);
		return change(c, OP_UNSET, k->path, NULL, 0, what, o);
	}
	snprintf(what, sizeof(what), "rollback to %s", args[0]);
	return change(c, OP_ROLLBACK, NULL, NULL, rev, what, o);
}

int cmd_config(int argc, char **argv)
{
	struct opts o = {0};
	const struct iod_config_key *k = NULL;
	json_t *value = NULL;
	uint64_t rev = 0;
	struct iod_api_client c;
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? IOD_EXIT_OK : rc;
	if (optind >= argc) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	const char *sub = argv[optind];
	char **args = argv + optind + 1;
	int n = argc - optind - 1;
	if ((rc = check_args(sub, args, n, &k, &value, &rev)))
		return rc;
	if ((rc = iod_ctl_client(CMD, o.server, &c))) {
		json_decref(value);
		return rc;
	}
	rc = dispatch(&c, sub, args, k, value, rev, &o);
	json_decref(value);
	iod_api_client_close(&c);
	return rc;
}
