/*
 * cmd_events.c: `iod events [-f] [-o json]`: the event stream (replica
 * phases, health, agent start/stop) with revisions, read from an agent's
 * data dir; -f follows new events. Thin shell: reads the JSON lines the
 * agent writes and prints them as text or as they are.
 */
#include "cli.h"
#include "iod/agent.h"

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod events [-f] [-o text|json] [--since REV] [--data-dir DIR]...\n\n"
	           "Print the event stream: every replica phase change (with its reason,\n"
	           "readiness and restarts), health change and agent start/stop, each with\n"
	           "a revision.\n"
	           "  -f, --follow      keep printing new events (Ctrl-C to stop)\n"
	           "  -o json           one JSON object per line\n"
	           "  --since REV       only events after revision REV\n"
	           "  --data-dir DIR    an agent's data dir; repeat for several agents\n"
	           "                    (default ~/.local/share/iod or $IOD_DATA_DIR)\n");
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
		iod_json_get_str(o, "phase", &phase);
		iod_json_get_str(o, "reason", &reason);
		iod_json_get_bool(o, "ready", &ready);
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

int cmd_events(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"follow", no_argument, 0, 'f'},         {"output", required_argument, 0, 'o'},
	    {"since", required_argument, 0, 's'},    {"data-dir", required_argument, 0, 'd'},
	    {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	char paths[16][IOD_AGENT_PATH_MAX];
	long offs[16] = {0};
	unsigned n = 0;
	enum iod_output out = IOD_OUT_TEXT;
	bool follow = false;
	uint64_t since = 0;
	const char *home = getenv("HOME"), *env = getenv("IOD_DATA_DIR");
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
		case 'd':
			if (n >= IOD_ARRAY_LEN(paths))
				return iod_cli_fail("events", IOD_EXIT_INVALID, "at most %zu --data-dir",
				                    IOD_ARRAY_LEN(paths));
			iod_agent_events_path(optarg, paths[n++], sizeof(paths[0]));
			break;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("events", IOD_EXIT_INVALID, "unexpected argument %s",
		                    argv[optind]);
	if (!n) {
		char d[IOD_AGENT_PATH_MAX];
		snprintf(d, sizeof(d), "%s", env && env[0] ? env : "");
		if (!d[0])
			snprintf(d, sizeof(d), "%s/.local/share/iod", home ? home : "/tmp");
		iod_agent_events_path(d, paths[n++], sizeof(paths[0]));
	}
	struct stat st;
	for (unsigned i = 0; i < n; i++)
		if (stat(paths[i], &st))
			return iod_cli_fail("events", IOD_EXIT_INVALID,
			                    "no events at %s (has an agent run with this --data-dir?)",
			                    paths[i]);
	if (out == IOD_OUT_TEXT)
		printf("%-6s %-12s %-10s %-14s %-18s %-10s %-5s %s\n", "REV", "TIME", "NODE", "TYPE",
		       "REPLICA", "PHASE", "READY", "REASON");
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
