/*
 * cmd_trace.c: `iod trace -s SERVICE [--follow] [-o json]`: the calls
 * through the node's mesh proxy, as `hubble observe` shows flows: one line
 * per request (or L4 flow) with trace and span ids, caller, endpoint,
 * status, latency and bytes; -o json prints one OTLP/JSON span per line.
 *
 * Reads the proxy's admin endpoint (/spans with a cursor, polled when
 * following). When the control plane's API serves spans cluster-wide this
 * command will ask it instead; the output stays the same. A shell: HTTP GET
 * and printing, nothing else.
 */
#include "cli.h"
#include "iod/mesh.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	IOD_UNUSED(sig);
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: iod trace -s SERVICE [--follow] [-o text|json] [--admin ADDR]\n\n"
	           "Show calls to SERVICE through this node's mesh proxy, like `hubble observe`:\n"
	           "one line per HTTP request or TCP flow with its trace id, span id, parent\n"
	           "span, caller, endpoint, status, latency and bytes. Spans of one call chain\n"
	           "share a trace id (W3C traceparent).\n\n"
	           "  -s, --service NAME  only this service (\"\" or omitted: all services)\n"
	           "  -f, --follow        keep streaming new calls until interrupted\n"
	           "  -o json             one OTLP/JSON span object per line\n"
	           "  --admin ADDR        the proxy's admin endpoint (default 127.0.0.1:15000)\n"
	           "  --interval DUR      poll period when following (default 200ms)\n\n"
	           "Exit codes: 0 ok, 2 bad usage, 5 no proxy at ADDR.\n");
}

static const char *attr(json_t *span, const char *key)
{
	static char num[32];
	json_t *a;
	size_t i;
	json_array_foreach(json_object_get(span, "attributes"), i, a)
	{
		if (strcmp(json_string_value(json_object_get(a, "key")) ?: "", key))
			continue;
		json_t *v = json_object_get(a, "value");
		const char *s = json_string_value(json_object_get(v, "stringValue"));
		if (s)
			return s;
		s = json_string_value(json_object_get(v, "intValue"));
		if (s) {
			snprintf(num, sizeof(num), "%s", s);
			return num;
		}
	}
	return "";
}

static void print_text(json_t *span)
{
	const char *t0 = json_string_value(json_object_get(span, "startTimeUnixNano"));
	const char *t1 = json_string_value(json_object_get(span, "endTimeUnixNano"));
	uint64_t s_ns = t0 ? strtoull(t0, NULL, 10) : 0, e_ns = t1 ? strtoull(t1, NULL, 10) : 0;
	time_t sec = (time_t)(s_ns / IOD_NS_PER_S);
	struct tm tm;
	char ts[32], dur[32];
	gmtime_r(&sec, &tm);
	strftime(ts, sizeof(ts), "%b %d %H:%M:%S", &tm);
	iod_format_duration(e_ns > s_ns ? e_ns - s_ns : 0, dur, sizeof(dur));
	const char *parent = json_string_value(json_object_get(span, "parentSpanId"));
	bool http = !strcmp(attr(span, "iod.kind"), "http");
	char what[160];
	if (http)
		snprintf(what, sizeof(what), "%s %s -> %s", attr(span, "http.request.method"),
		         attr(span, "url.path"), attr(span, "http.response.status_code"));
	else
		snprintf(what, sizeof(what), "tcp flow errno=%s", attr(span, "iod.errno"));
	printf("%s.%03u  trace=%s span=%s parent=%s  %s -> %s (%s)  %s  %s  in=%sB out=%sB "
	       "attempts=%s\n",
	       ts, (unsigned)((s_ns / IOD_NS_PER_MS) % 1000),
	       json_string_value(json_object_get(span, "traceId")),
	       json_string_value(json_object_get(span, "spanId")), parent && *parent ? parent : "-",
	       attr(span, "client.address"), attr(span, "iod.service"),
	       *attr(span, "server.address") ? attr(span, "server.address") : "none", what, dur,
	       attr(span, "iod.bytes_in"), attr(span, "iod.bytes_out"), attr(span, "iod.attempts"));
}

int cmd_trace(int argc, char **argv)
{
	static const struct option opts[] = {{"service", required_argument, NULL, 's'},
	                                     {"follow", no_argument, NULL, 'f'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {"admin", required_argument, NULL, 'a'},
	                                     {"interval", required_argument, NULL, 'i'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	const char *service = "", *admin = "127.0.0.1:15000";
	enum iod_output out = IOD_OUT_TEXT;
	bool follow = false;
	uint64_t interval_ns = 200 * IOD_NS_PER_MS;
	char cursor[1400] = "", path[1600];
	int c;

	while ((c = getopt_long(argc, argv, "s:fo:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': service = optarg; break;
		case 'f': follow = true; break;
		case 'o':
			if (iod_cli_output("trace", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 'a': admin = optarg; break;
		case 'i': {
			struct iod_err e = {0};
			if (iod_parse_duration(optarg, &interval_ns, &e) || !interval_ns)
				return iod_cli_fail("trace", IOD_EXIT_INVALID, "--interval %s: %s",
				                    optarg,
				                    e.msg[0] ? e.msg : "must be more than 0");
			break;
		}
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("trace", IOD_EXIT_INVALID, "unexpected argument \"%s\"",
		                    argv[optind]);
	for (const char *p = service; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
			return iod_cli_fail(
			    "trace", IOD_EXIT_INVALID,
			    "-s %s: a service name has letters, digits, '-' and '_'", service);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	do {
		char *body = NULL;
		size_t blen = 0;
		snprintf(path, sizeof(path), "/spans?service=%s&after=%s", service, cursor);
		int st = iod_http_get(admin, path, 5000, &body, &blen);
		if (st < 0)
			return iod_cli_fail(
			    "trace", IOD_EXIT_UNAVAILABLE,
			    "no mesh proxy admin endpoint at %s (%s): start one with "
			    "`iod proxy run --config FILE` or pass --admin ADDR",
			    admin, strerror(-st));
		if (st != 200) {
			free(body);
			return iod_cli_fail("trace", IOD_EXIT_ERROR, "%s%s answered HTTP %d", admin,
			                    path, st);
		}
		json_t *doc = NULL;
		struct iod_err e = {0};
		int rc = iod_json_parse(body, blen, &doc, &e);
		free(body);
		if (rc)
			return iod_cli_fail("trace", IOD_EXIT_ERROR, "bad answer from %s: %s",
			                    admin, e.msg);
		iod_strlcpy(cursor, json_string_value(json_object_get(doc, "cursor")) ?: "",
		            sizeof(cursor));
		json_t *span;
		size_t i;
		json_array_foreach(json_object_get(doc, "spans"), i, span)
		{
			if (out == IOD_OUT_JSON)
				iod_json_print(stdout, span, true);
			else
				print_text(span);
		}
		json_decref(doc);
		fflush(stdout);
		if (follow && !stop_flag) {
			struct timespec ts = {.tv_sec = (time_t)(interval_ns / IOD_NS_PER_S),
			                      .tv_nsec = (long)(interval_ns % IOD_NS_PER_S)};
			nanosleep(&ts, NULL);
		}
	} while (follow && !stop_flag);
	return IOD_EXIT_OK;
}
