/*
 * cmd_trace.c: `iod trace -s SERVICE [--follow] [-o json]`: the calls
 * through the node's mesh proxy, as `hubble observe` shows flows: one line
 * per request (or L4 flow) with trace and span ids, caller, endpoint,
 * status, latency and bytes; -o json prints one OTLP/JSON span per line.
 *
 * Reads the proxy's admin endpoint (/spans with a cursor, polled when
 * following). --since, --service and --status filter what is printed. The
 * proxy keeps a bounded ring of spans per worker; when it overwrote spans
 * before they were read, the command says "N of M spans retained" (on
 * stderr) instead of pretending it saw everything. When the control plane's API serves spans cluster-wide this
 * command will ask it instead; the output stays the same. A shell: HTTP GET
 * and printing, nothing else.
 *
 * `iod trace --drops [--node N]`: the flows the nodes' virtual switches
 * dropped, each with the rule that dropped it, as `hubble observe --verdict
 * DROPPED` shows them, oldest first. Each agent's switch keeps the newest
 * IOD_AGENT_DROPS_MAX in a ring and writes them to <its data dir>/drops.json
 * (src/agent/drops.c, vswitch.c); read from the cluster's state dir.
 */
#include "cli.h"
#include "ctl.h"
#include "iod/agent.h"
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
	fprintf(f, "usage: iod trace [-s SERVICE] [--since DUR] [--status S] [--follow]\n"
	           "                 [-o text|json] [--admin ADDR]\n"
	           "       iod trace --drops [--node NAME] [-o text|json]\n\n"
	           "Show calls to SERVICE through this node's mesh proxy, like `hubble observe`:\n"
	           "one line per HTTP request or TCP flow with its trace id, span id, parent\n"
	           "span, caller, endpoint, status, latency and bytes. Spans of one call chain\n"
	           "share a trace id (W3C traceparent).\n\n"
	           "  -s, --service NAME  only this service (\"\" or omitted: all services)\n"
	           "  --since DUR         only calls that started within DUR (e.g. 5m)\n"
	           "  --status S          only calls with this outcome: 2xx, 3xx, 4xx, 5xx, a\n"
	           "                      code (503), error (5xx, or a flow that failed or\n"
	           "                      found no endpoint) or ok (anything else)\n"
	           "  -f, --follow        keep streaming new calls until interrupted\n"
	           "  -o json             one OTLP/JSON span object per line\n"
	           "  --admin ADDR        the proxy's admin endpoint (default 127.0.0.1:15000)\n"
	           "  --interval DUR      poll period when following (default 200ms)\n"
	           "  --drops             the flows the nodes' virtual switches dropped (iod up\n"
	           "                      --netns), with the rule that dropped each, like\n"
	           "                      `hubble observe --verdict DROPPED`\n"
	           "  --node NAME         --drops: only this node's (node-2, or 2)\n\n"
	           "When the proxy's span ring (4096 per worker) overwrote calls before they\n"
	           "were read, stderr says \"N of M spans retained\".\n"
	           "Exit codes: 0 ok, 2 bad usage, 5 no proxy at ADDR.\n");
}

static const char *attr(json_t *span, const char *key)
{
	/* several numbers go into one printf: a buffer each, in turn */
	static char num[8][24];
	static unsigned turn;
	json_t *a;
	size_t i;
	json_array_foreach(json_object_get(span, "attributes"), i, a)
	{
		const char *k = json_string_value(json_object_get(a, "key"));
		if (!k || strcmp(k, key))
			continue;
		json_t *v = json_object_get(a, "value");
		const char *s = json_string_value(json_object_get(v, "stringValue"));
		if (s)
			return s;
		json_t *iv = json_object_get(v, "intValue");
		if ((s = json_string_value(iv)))
			return s; /* OTLP/JSON writes 64-bit integers as strings */
		if (json_is_integer(iv)) {
			char *b = num[turn++ % 8];
			snprintf(b, sizeof(num[0]), "%" JSON_INTEGER_FORMAT,
			         json_integer_value(iv));
			return b;
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
	       "attempts=%s transport=%s/%s\n",
	       ts, (unsigned)((s_ns / IOD_NS_PER_MS) % 1000),
	       json_string_value(json_object_get(span, "traceId")),
	       json_string_value(json_object_get(span, "spanId")), parent && *parent ? parent : "-",
	       attr(span, "client.address"), attr(span, "iod.service"),
	       *attr(span, "server.address") ? attr(span, "server.address") : "none", what, dur,
	       attr(span, "iod.bytes_in"), attr(span, "iod.bytes_out"), attr(span, "iod.attempts"),
	       *attr(span, "iod.transport.client") ? attr(span, "iod.transport.client") : "tcp",
	       *attr(span, "iod.transport.upstream") ? attr(span, "iod.transport.upstream") : "-");
}

/* --status: a class (N = 2..5), an exact code, or error/ok. */
struct status_filter {
	int klass;  /* 2..5, or 0 */
	int code;   /* 100..599, or 0 */
	int errors; /* 1 errors only, -1 non-errors only, 0 either */
};

static int status_parse(const char *s, struct status_filter *f)
{
	memset(f, 0, sizeof(*f));
	if (!strcmp(s, "error"))
		f->errors = 1;
	else if (!strcmp(s, "ok"))
		f->errors = -1;
	else if (strlen(s) == 3 && s[0] >= '1' && s[0] <= '5' && s[1] == 'x' && s[2] == 'x')
		f->klass = s[0] - '0';
	else if (strlen(s) == 3 && s[0] >= '1' && s[0] <= '5' && s[1] >= '0' && s[1] <= '9' &&
	         s[2] >= '0' && s[2] <= '9')
		f->code = atoi(s);
	else
		return -EINVAL;
	return 0;
}

static bool status_match(json_t *span, const struct status_filter *f)
{
	bool http = !strcmp(attr(span, "iod.kind"), "http");
	int code = http ? atoi(attr(span, "http.response.status_code")) : 0;
	bool error = http ? code >= 500 || code == 0
	                  : atoi(attr(span, "iod.errno")) != 0 || !*attr(span, "server.address");
	if (f->errors)
		return f->errors > 0 ? error : !error;
	if (f->klass)
		return http && code / 100 == f->klass;
	if (f->code)
		return http && code == f->code;
	return true;
}

static uint64_t span_start_ns(json_t *span)
{
	const char *t = json_string_value(json_object_get(span, "startTimeUnixNano"));
	return t ? strtoull(t, NULL, 10) : 0;
}

static const char *str_of(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static int trace_drops(const char *node, enum iod_output out)
{
	json_t *all = iod_ctl_drops_read(node), *r;
	size_t i;
	static const char *const protos[256] = {[1] = "icmp", [6] = "tcp", [17] = "udp"};
	json_array_foreach(all, i, r)
	{
		if (out == IOD_OUT_JSON) {
			char *s = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
			if (s)
				printf("%s\n", s);
			free(s);
			continue;
		}
		json_int_t ms = json_integer_value(json_object_get(r, "first_ms"));
		time_t sec = (time_t)(ms / 1000);
		struct tm tm;
		char when[32] = "";
		if (localtime_r(&sec, &tm))
			strftime(when, sizeof(when), "%b %e %H:%M:%S", &tm);
		int proto = (int)json_integer_value(json_object_get(r, "proto"));
		int flags = (int)json_integer_value(json_object_get(r, "tcp_flags"));
		char pn[8];
		snprintf(pn, sizeof(pn), "%d", proto);
		const char *src_name = str_of(r, "src_name"), *dst_name = str_of(r, "dst_name");
		printf("%s.%03d [%s]: %s/%s %s:%d -> %s%s%s:%d %s%s policy denied DROPPED "
		       "(rule %s: %s) %lld packet%s\n",
		       when, (int)(ms % 1000), str_of(r, "node"), str_of(r, "tenant"),
		       src_name[0] ? src_name : "?", str_of(r, "src"),
		       (int)json_integer_value(json_object_get(r, "sport")), dst_name,
		       dst_name[0] ? " " : "", str_of(r, "dst"),
		       (int)json_integer_value(json_object_get(r, "dport")),
		       proto >= 0 && proto < 256 && protos[proto] ? protos[proto] : pn,
		       proto == 6 && (flags & 0x02) ? " SYN" : "", str_of(r, "rule"),
		       str_of(r, "why"), (long long)json_integer_value(json_object_get(r, "count")),
		       json_integer_value(json_object_get(r, "count")) == 1 ? "" : "s");
	}
	json_decref(all);
	return IOD_EXIT_OK;
}

int cmd_trace(int argc, char **argv)
{
	static const struct option opts[] = {{"service", required_argument, NULL, 's'},
	                                     {"follow", no_argument, NULL, 'f'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {"admin", required_argument, NULL, 'a'},
	                                     {"interval", required_argument, NULL, 'i'},
	                                     {"since", required_argument, NULL, 'S'},
	                                     {"status", required_argument, NULL, 'T'},
	                                     {"drops", no_argument, NULL, 'D'},
	                                     {"node", required_argument, NULL, 'N'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	const char *service = "", *admin = "127.0.0.1:15000";
	enum iod_output out = IOD_OUT_TEXT;
	bool follow = false, drops = false;
	const char *node = NULL;
	uint64_t interval_ns = 200 * IOD_NS_PER_MS, since_ns = 0;
	struct status_filter sf = {0};
	uint64_t read_total = 0, lost_total = 0, shown = 0;
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
		case 'S': {
			struct iod_err e = {0};
			if (iod_parse_duration(optarg, &since_ns, &e) || !since_ns)
				return iod_cli_fail("trace", IOD_EXIT_INVALID, "--since %s: %s",
				                    optarg,
				                    e.msg[0] ? e.msg : "must be more than 0");
			break;
		}
		case 'T':
			if (status_parse(optarg, &sf))
				return iod_cli_fail(
				    "trace", IOD_EXIT_INVALID,
				    "--status %s: want 2xx, 3xx, 4xx, 5xx, a code like "
				    "503, error or ok",
				    optarg);
			break;
		case 'D': drops = true; break;
		case 'N': node = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("trace", IOD_EXIT_INVALID, "unexpected argument \"%s\"",
		                    argv[optind]);
	if (node && !drops)
		return iod_cli_fail("trace", IOD_EXIT_INVALID, "--node goes with --drops");
	if (node &&
	    (!node[0] || strlen(node) >= IOD_NAME_MAX || strchr(node, '/') || node[0] == '.'))
		return iod_cli_fail("trace", IOD_EXIT_INVALID, "--node %s: not a node name", node);
	if (drops)
		return trace_drops(node, out);
	for (const char *p = service; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
			return iod_cli_fail(
			    "trace", IOD_EXIT_INVALID,
			    "-s %s: a service name has letters, digits, '-' and '_'", service);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	uint64_t since_unix_ns = since_ns ? iod_time_unix_ns() - since_ns : 0;
	bool more = false;
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
		const char *next = json_string_value(json_object_get(doc, "cursor"));
		iod_strlcpy(cursor, next ? next : "", sizeof(cursor));
		uint64_t rd = 0, lost = 0;
		iod_json_get_u64(doc, "read", &rd);
		iod_json_get_u64(doc, "overwritten", &lost);
		read_total += rd;
		lost_total += lost;
		if (follow && lost)
			fprintf(stderr,
			        "iod trace: %llu spans were overwritten in the proxy's ring before "
			        "they were read\n",
			        (unsigned long long)lost);
		json_t *span;
		size_t i;
		json_array_foreach(json_object_get(doc, "spans"), i, span)
		{
			if (since_unix_ns && span_start_ns(span) < since_unix_ns)
				continue;
			if (!status_match(span, &sf))
				continue;
			shown++;
			if (out == IOD_OUT_JSON)
				iod_json_print(stdout, span, true);
			else
				print_text(span);
		}
		/* one answer carries a bounded batch: read on until the rings are drained */
		more = rd > 0;
		json_decref(doc);
		fflush(stdout);
		if (!follow && more && !stop_flag)
			continue;
		if (follow && !stop_flag) {
			struct timespec ts = {.tv_sec = (time_t)(interval_ns / IOD_NS_PER_S),
			                      .tv_nsec = (long)(interval_ns % IOD_NS_PER_S)};
			nanosleep(&ts, NULL);
		}
	} while ((follow || more) && !stop_flag);
	if (!follow && lost_total)
		fprintf(stderr,
		        "iod trace: %llu of %llu spans retained (the proxy's ring overwrote %llu "
		        "before they were read; every service counted); %llu shown\n",
		        (unsigned long long)read_total,
		        (unsigned long long)(read_total + lost_total),
		        (unsigned long long)lost_total, (unsigned long long)shown);
	return IOD_EXIT_OK;
}
