/*
 * cmd_events.c: `iod events [-f] [-o json]`: the event stream with
 * revisions. From the control plane (the default): every change of the
 * cluster state through the watch API: nodes registered and lost, services
 * deployed, replicas placed, rescheduled, and their phases, endpoints turning
 * healthy or unhealthy. From an agent's data dir (--data-dir): that node's
 * own log of replica phases. -f follows. Thin shell: reads and prints.
 */
#include "cli.h"
#include "iod/agent_run.h"
#include "iod/api.h"
#include "iod/objects.h"

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The stored key of a Replica field: objects.h owns them. */
#define RK(f) iod_obj_key(IOD_OBJ_KIND_REPLICA, IOD_OBJ_REPLICA_##f)

static void usage(FILE *f)
{
	fprintf(f, "usage: iod events [-f] [-o text|json] [--since REV] [--server ADDRS]\n"
	           "       iod events [-f] [-o text|json] [--since REV] --data-dir DIR...\n\n"
	           "Print the event stream, each event with its revision: from the control plane\n"
	           "every change of the cluster (node registered or lost, service deployed,\n"
	           "replica placed, rescheduled, its phase and health, endpoint healthy or\n"
	           "not); from an agent's data dir, that node's replica phases.\n"
	           "  -f, --follow      keep printing new events (Ctrl-C to stop)\n"
	           "  -o json           one JSON object per line\n"
	           "  --since REV       only events after revision REV\n"
	           "  --server ADDRS    API addresses (default $IOD_SERVER or 127.0.0.1:7400)\n"
	           "  --data-dir DIR    read an agent's local events instead; repeat for\n"
	           "                    several agents ($IOD_DATA_DIR sets one)\n");
}

static volatile sig_atomic_t stop;
static void on_sig(int s)
{
	(void)s;
	stop = 1;
}

static void print_event(const char *line, enum iod_output out, uint64_t since)
{
	json_t *o;
	if (iod_json_parse(line, strlen(line), &o, NULL))
		return;
	uint64_t rev = 0, t = 0;
	iod_json_get_u64(o, "rev", &rev);
	if (rev <= since) {
		json_decref(o);
		return;
	}
	if (out == IOD_OUT_JSON) {
		iod_json_print(stdout, o, true);
	} else {
		const char *type = "", *node = "", *rep = "", *phase = "", *reason = "";
		bool ready = false;
		char ts[32] = "";
		iod_json_get_u64(o, "time_ms", &t);
		iod_json_get_str(o, "type", &type);
		iod_json_get_str(o, "node", &node);
		iod_json_get_str(o, "replica", &rep);
		iod_json_get_str(o, RK(PHASE), &phase);
		iod_json_get_str(o, RK(REASON), &reason);
		iod_json_get_bool(o, RK(READY), &ready);
		time_t sec = (time_t)(t / 1000);
		struct tm tm;
		if (gmtime_r(&sec, &tm))
			strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
		printf("%-6llu %s.%03u %-10s %-14s %-18s %-10s %-5s %s\n", (unsigned long long)rev,
		       ts, (unsigned)(t % 1000), node, type, rep, phase,
		       rep[0] ? (ready ? "ready" : "-") : "", reason);
	}
	json_decref(o);
}

/* Print complete lines of path from *off on; keep a partial line for later. */
static void drain(const char *path, long *off, enum iod_output out, uint64_t since)
{
	FILE *f = fopen(path, "r");
	char line[8192];
	if (!f)
		return;
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && st.st_size < *off)
		*off = 0; /* rotated */
	fseek(f, *off, SEEK_SET);
	while (fgets(line, sizeof(line), f)) {
		size_t l = strlen(line);
		if (!l || line[l - 1] != '\n')
			break;
		*off += (long)l;
		print_event(line, out, since);
	}
	fclose(f);
	fflush(stdout);
}

static const char *sget(const json_t *o, const char *k)
{
	const char *v = "";
	iod_json_get_str(o, k, &v);
	return v;
}

/* A Config change: the cluster's new revision, or a node applying one (and
 * what it could not honour: fallbacks are never silent). */
static void config_change(const json_t *v, char *what, size_t wl, char *detail, size_t dl)
{
	const json_t *f;
	size_t i, off = 0;
	uint64_t r = 0;
	if (!json_object_get(v, "applied")) {
		snprintf(what, wl, "changed");
		snprintf(detail, dl, "%s", sget(v, "change"));
		return;
	}
	iod_json_get_u64(v, "rev", &r);
	snprintf(what, wl, "applied");
	int n = snprintf(detail, dl, "revision %llu on %s", (unsigned long long)r, sget(v, "node"));
	off = n > 0 ? (size_t)n : 0;
	json_array_foreach(json_object_get(v, "fallbacks"), i, f)
	{
		if (off >= dl)
			break;
		n = snprintf(detail + off, dl - off, "; fallback %s=%s (wanted %s: %s)",
		             sget(f, "key"), sget(f, "using"), sget(f, "want"), sget(f, "reason"));
		off += n > 0 ? (size_t)n : 0;
	}
}

/* One state change as a line: what happened to which object. */
static void print_change(const json_t *x)
{
	const json_t *v = json_object_get(x, "value");
	const char *kind = sget(x, "kind"), *name = sget(x, "name"), *type = sget(x, "type");
	uint64_t rev = 0, u = 0;
	char what[64] = "", detail[IOD_ERR_MSG_MAX] = "";
	iod_json_get_u64(x, "rev", &rev);
	if (!strcmp(type, "delete")) {
		snprintf(what, sizeof(what), "%s",
		         !strcmp(kind, "node") ? "gone (lost or left)" : "deleted");
	} else if (!strcmp(kind, "node")) {
		iod_json_get_u64(v, iod_obj_key(IOD_OBJ_KIND_NODE, IOD_OBJ_NODE_GPUS), &u);
		snprintf(what, sizeof(what), "registered");
		snprintf(detail, sizeof(detail), "%llu GPUs, %s", (unsigned long long)u,
		         sget(v, iod_obj_key(IOD_OBJ_KIND_NODE, IOD_OBJ_NODE_MODEL)));
	} else if (!strcmp(kind, "replica")) {
		struct iod_obj_replica *r = malloc(sizeof(*r));
		if (r) {
			iod_obj_replica_from_json(v, r, NULL);
			snprintf(what, sizeof(what), "%s", r->phase);
			const char *reason = r->reason;
			if (!reason[0] && json_is_array(r->reasons))
				reason = json_string_value(json_array_get(r->reasons, 0));
			snprintf(detail, sizeof(detail), "node %s gpus %s%s%s%s", r->node,
			         r->gpus[0] ? r->gpus : "-", r->ready ? " ready" : "",
			         reason && reason[0] ? ": " : "", reason ? reason : "");
			iod_obj_replica_free(r);
			free(r);
		}
	} else if (!strcmp(kind, "endpoint")) {
		struct iod_obj_endpoint ep;
		char address[IOD_ADDR_MAX + 8];
		iod_obj_endpoint_from_json(v, &ep, NULL);
		iod_obj_endpoint_address(&ep, address, sizeof(address));
		snprintf(what, sizeof(what), "%s", ep.healthy ? "healthy" : "unhealthy");
		snprintf(detail, sizeof(detail), "%s on %s (%s)", address, ep.node, ep.phase);
		iod_obj_endpoint_free(&ep);
	} else if (!strcmp(kind, "service")) {
		iod_json_get_u64(v, iod_obj_key(IOD_OBJ_KIND_SERVICE, IOD_OBJ_SERVICE_GENERATION),
		                 &u);
		snprintf(what, sizeof(what), "deployed");
		snprintf(detail, sizeof(detail), "generation %llu", (unsigned long long)u);
	} else if (!strcmp(kind, "config")) {
		config_change(v, what, sizeof(what), detail, sizeof(detail));
	} else {
		snprintf(what, sizeof(what), "changed");
	}
	printf("%-7llu %-9s %-24s %-12s %s\n", (unsigned long long)rev, kind, name, what, detail);
}

/* The cluster's event stream through the watch API. */
static int cluster_events(const char *servers, enum iod_output out, bool follow, uint64_t since)
{
	struct iod_api_client cl;
	struct iod_err e = {0};
	uint64_t rev = since;
	char path[96];
	if (iod_api_client_init_config(&cl, servers, &e))
		return iod_cli_fail("events", IOD_EXIT_INVALID, "%s", e.msg);
	cl.timeout_ms = 40000;
	cl.retry_ms = 3000;
	if (out == IOD_OUT_TEXT)
		printf("%-7s %-9s %-24s %-12s %s\n", "REV", "KIND", "NAME", "EVENT", "DETAIL");
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	while (!stop) {
		struct iod_api_response r = {0};
		snprintf(path, sizeof(path), "/v1/watch?rev=%llu&timeout_ms=%d",
		         (unsigned long long)rev, follow ? 30000 : 0);
		if (iod_api_request(&cl, "GET", path, NULL, NULL, 0, &r, &e)) {
			iod_api_client_close(&cl);
			return iod_cli_fail(
			    "events", IOD_EXIT_UNAVAILABLE,
			    "%s (start a cluster with `iod up` or `iod dev`, or read "
			    "an agent's events with --data-dir)",
			    e.msg);
		}
		uint64_t floor = 0;
		if (r.status == 410 && !iod_json_get_u64(r.json, "compacted_rev", &floor) &&
		    floor > rev) {
			/* older history is compacted: start from what is kept */
			if (out == IOD_OUT_TEXT)
				printf("# events up to revision %llu are compacted\n",
				       (unsigned long long)floor);
			rev = floor;
			iod_api_response_free(&r);
			continue;
		}
		if (r.status != 200) {
			int rc = iod_cli_fail("events", IOD_EXIT_ERROR, "watch: %s",
			                      iod_api_error_text(&r));
			iod_api_response_free(&r);
			iod_api_client_close(&cl);
			return rc;
		}
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(r.json, "events"), i, x)
		{
			if (out == IOD_OUT_JSON)
				iod_json_print(stdout, x, true);
			else
				print_change(x);
		}
		fflush(stdout);
		iod_json_get_u64(r.json, "rev", &rev);
		iod_api_response_free(&r);
		if (!follow)
			break;
	}
	iod_api_client_close(&cl);
	return 0;
}

int cmd_events(int argc, char **argv)
{
	static const struct option opts[] = {{"follow", no_argument, 0, 'f'},
	                                     {"output", required_argument, 0, 'o'},
	                                     {"since", required_argument, 0, 's'},
	                                     {"data-dir", required_argument, 0, 'd'},
	                                     {"server", required_argument, 0, 'S'},
	                                     {"help", no_argument, 0, 'h'},
	                                     {0, 0, 0, 0}};
	const char *servers = NULL;
	static const char *const outs[] = {"text", "json", NULL};
	char paths[16][IOD_AGENT_PATH_MAX];
	long offs[16] = {0};
	unsigned n = 0;
	enum iod_output out = IOD_OUT_TEXT;
	bool follow = false;
	uint64_t since = 0;
	const char *env = getenv("IOD_DATA_DIR");
	int o;

	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	while ((o = getopt_long(argc, argv, "fo:h", opts, NULL)) != -1) {
		switch (o) {
		case 'f': follow = true; break;
		case 'o':
			if (iod_cli_output("events", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': since = strtoull(optarg, NULL, 10); break;
		case 'S': servers = optarg; break;
		case 'd':
			if (n >= IOD_ARRAY_LEN(paths))
				return iod_cli_fail("events", IOD_EXIT_INVALID,
				                    "at most %zu --data-dir", IOD_ARRAY_LEN(paths));
			iod_agent_events_path(optarg, paths[n++], sizeof(paths[0]));
			break;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("events", IOD_EXIT_INVALID, "unexpected argument %s",
		                    argv[optind]);
	if (!n && !(env && env[0]))
		return cluster_events(servers, out, follow, since);
	if (!n)
		iod_agent_events_path(env, paths[n++], sizeof(paths[0]));
	struct stat st;
	for (unsigned i = 0; i < n; i++)
		if (stat(paths[i], &st))
			return iod_cli_fail(
			    "events", IOD_EXIT_INVALID,
			    "no events at %s (has an agent run with this --data-dir?)", paths[i]);
	if (out == IOD_OUT_TEXT)
		printf("%-6s %-12s %-10s %-14s %-18s %-10s %-5s %s\n", "REV", "TIME", "NODE",
		       "TYPE", "REPLICA", "PHASE", "READY", "REASON");
	for (unsigned i = 0; i < n; i++)
		drain(paths[i], &offs[i], out, since);
	if (!follow)
		return 0;
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	while (!stop) {
		usleep(100000);
		for (unsigned i = 0; i < n; i++)
			drain(paths[i], &offs[i], out, since);
	}
	return 0;
}
