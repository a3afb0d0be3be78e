/*
 * cmd_dp.c: `iod dp`: run a standalone overlay data plane from a YAML file
 * (`iod dp run --config FILE`), show its pipeline with per-entry counters
 * (`iod dp dump`), show a live node's virtual switch the same way (`iod dp
 * dump --node NAME`: its agent's /v1/dp/dump, found through the Node
 * object), and benchmark it (`iod dp bench`).
 *
 * A thin shell: it opens ports, moves bursts between them and the flow
 * engine, runs the engine's control work (entry queue, aging, conntrack
 * expiry) between bursts, and writes the pipeline's state for `dp dump`.
 * It decides nothing about packets itself.
 */
#include "cli.h"
#include "ctl.h"
#include "iod/io.h"
#include "iod/objects.h"
#include "iod/obs.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <unistd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	IOD_UNUSED(sig);
	stop_flag = 1;
}

static void usage_dp(FILE *f)
{
	fprintf(f, "usage: iod dp <subcommand> [options]\n\n"
	           "  run   --config FILE   run the overlay data plane described by FILE\n"
	           "  dump  [--state FILE]  show the running pipeline with per-entry counters\n"
	           "  dump  --config FILE   show the pipeline FILE builds (no traffic)\n"
	           "  bench [options]       measure the pipeline on one core (mem ports)\n\n"
	           "Run `iod dp <subcommand> --help` for options; docs/dataplane.md has the\n"
	           "config format.\n");
}

static void usage_run(FILE *f)
{
	fprintf(f, "usage: iod dp run --config FILE [--state FILE] [--duration DUR]\n"
	           "                  [--count N] [--metrics ADDR] [-o text|json]\n\n"
	           "  --config FILE    YAML: vtep, ports (host, fabric), networks (with\n"
	           "                   adaptive_routing), security_groups, services\n"
	           "                   (docs/dataplane.md, docs/adaptive-routing.md)\n"
	           "  --state FILE     where the pipeline's state is written every second and\n"
	           "                   at exit, for `iod dp dump` (default /tmp/iod-dp.json)\n"
	           "  --duration DUR   stop after DUR (e.g. 30s); default: until SIGINT/SIGTERM\n"
	           "                   or until every pcap/mem input is exhausted\n"
	           "  --count N        stop after N packets received\n"
	           "  --metrics ADDR   serve the ports' counters on http://ADDR/metrics\n"
	           "                   (127.x IPv4:PORT, loopback only; Prometheus,\n"
	           "                   iod_dp_port_*)\n"
	           "  -o json          print the final summary as JSON\n");
}

static int write_state(const struct iod_flow_dp *dp, const struct iod_flow_dp_ar *ar,
                       const struct iod_io_port *ports, const char *path)
{
	json_t *j = iod_flow_dump_json(dp->pl, NULL, NULL);
	if (ar)
		json_object_set_new(j, "adaptive_routing",
		                    iod_flow_dp_ar_json(ar, iod_clock_now_ns()));
	json_t *pj = json_array();
	for (int i = 0; i < 2; i++) {
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(ports[i].name));
		json_object_set_new(o, "backend", json_string(ports[i].ops->name));
		json_object_set_new(o, "rx_packets",
		                    json_integer((json_int_t)ports[i].stats.rx_packets));
		json_object_set_new(o, "tx_packets",
		                    json_integer((json_int_t)ports[i].stats.tx_packets));
		json_object_set_new(o, "tx_errors",
		                    json_integer((json_int_t)ports[i].stats.tx_errors));
		json_object_set_new(o, "rx_nobuf",
		                    json_integer((json_int_t)ports[i].stats.rx_nobuf));
		json_array_append_new(pj, o);
	}
	json_object_set_new(j, "ports", pj);
	uint32_t sessions = 0;
	for (uint32_t c = 0; c < dp->cores; c++)
		sessions += iod_net_ct_count(dp->ct[c]);
	json_object_set_new(j, "conntrack_sessions", json_integer(sessions));
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int rc = json_dump_file(j, tmp, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(j);
	if (rc || rename(tmp, path))
		return -EIO;
	return 0;
}

#if MHD_VERSION >= 0x00097002
#define DP_MHD_RESULT enum MHD_Result
#else
#define DP_MHD_RESULT int
#endif

/* The ports' counters for /metrics: the loop copies them here every
 * IOD_AGENT_VSWITCH_STATS_MS (the packet path takes no lock). */
struct dp_metrics {
	pthread_mutex_t mu;
	char node[IOD_NAME_MAX];
	struct iod_tel_port ports[2];
	uint32_t n;
};

static void dp_metrics_publish(struct dp_metrics *m, const struct iod_io_port *ports,
                               const struct iod_flow_dp_config *cfg)
{
	uint64_t at_ms = iod_time_unix_ns() / IOD_NS_PER_MS;
	pthread_mutex_lock(&m->mu);
	for (int i = 0; i < 2; i++)
		iod_io_port_reading(&ports[i], i ? "fabric" : "host", i ? "fabric" : "host",
		                    cfg->ports[i].iface[0] ? cfg->ports[i].iface
		                                           : cfg->ports[i].backend,
		                    at_ms, &m->ports[i]);
	m->n = 2;
	pthread_mutex_unlock(&m->mu);
}

static DP_MHD_RESULT dp_metrics_answer(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version, const char *upload,
                                       size_t *upload_size, void **con_cls)
{
	struct dp_metrics *m = cls;
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	struct iod_buf b;
	iod_buf_init(&b);
	unsigned code = 200;
	const char *ctype = IOD_PROM_CONTENT_TYPE;
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		code = 405;
		iod_buf_printf(&b, "GET /metrics\n");
	} else if (strcmp(url, "/metrics")) {
		code = 404;
		iod_buf_printf(&b, "GET /metrics\n");
	} else {
		pthread_mutex_lock(&m->mu);
		int rc = iod_tel_ports_prom(m->node, m->ports, m->n, &b);
		pthread_mutex_unlock(&m->mu);
		if (rc) {
			code = 500;
			b.len = 0;
			iod_buf_printf(&b, "out of memory\n");
		}
	}
	if (code != 200)
		ctype = "text/plain";
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    b.len, b.data ? b.data : (void *)"",
	    b.data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		iod_buf_free(&b);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", ctype);
	DP_MHD_RESULT q = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return q;
}

static struct MHD_Daemon *dp_metrics_serve(struct dp_metrics *m, const char *addr,
                                           struct iod_err *e)
{
	char host[IOD_ADDR_MAX];
	iod_strlcpy(host, addr, sizeof(host));
	char *colon = strrchr(host, ':');
	struct sockaddr_in sa = {.sin_family = AF_INET};
	if (colon) {
		*colon = 0;
		sa.sin_port = htons((uint16_t)atoi(colon + 1));
	}
	if (!colon || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		iod_err_set(e, -EINVAL, "--metrics %s: want IPv4:PORT", addr);
		return NULL;
	}
	if ((ntohl(sa.sin_addr.s_addr) >> 24) != 127) { /* plain HTTP, no authentication */
		iod_err_set(e, -EPERM,
		            "--metrics %s: loopback only (127.x.y.z): the counters are served "
		            "without TLS or authentication",
		            addr);
		return NULL;
	}
	struct MHD_Daemon *d = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, dp_metrics_answer,
	    m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)64, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
	if (!d)
		iod_err_set(e, -EADDRINUSE, "--metrics %s: cannot listen (in use?)", addr);
	return d;
}

static int dp_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, 0, 'c'},   {"state", required_argument, 0, 's'},
	    {"duration", required_argument, 0, 'd'}, {"count", required_argument, 0, 'n'},
	    {"metrics", required_argument, 0, 'm'},  {"output", required_argument, 0, 'o'},
	    {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
	const char *config = NULL, *state = "/tmp/iod-dp.json", *outs = "text", *metrics = NULL;
	uint64_t duration_ns = 0, count = 0;
	struct iod_err e = {0};
	int c;
	while ((c = getopt_long(argc, argv, "c:s:d:n:m:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 's': state = optarg; break;
		case 'd':
			if (iod_parse_duration(optarg, &duration_ns, &e))
				return iod_cli_fail("dp run", IOD_EXIT_INVALID, "--duration: %s",
				                    e.msg);
			break;
		case 'n': count = strtoull(optarg, NULL, 10); break;
		case 'm': metrics = optarg; break;
		case 'o': outs = optarg; break;
		case 'h': usage_run(stdout); return 0;
		default: usage_run(stderr); return IOD_EXIT_INVALID;
		}
	}
	static const char *const allowed[] = {"text", "json", NULL};
	enum iod_output out;
	if (iod_cli_output("dp run", outs, allowed, &out))
		return IOD_EXIT_INVALID;
	if (!config)
		return iod_cli_fail("dp run", IOD_EXIT_INVALID,
		                    "--config FILE is required (see `iod dp run --help`)");
	struct iod_flow_dp_config *cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return iod_cli_fail("dp run", IOD_EXIT_ERROR, "out of memory");
	if (iod_flow_dp_config_load(config, cfg, &e)) {
		free(cfg);
		return iod_cli_fail("dp run", IOD_EXIT_INVALID, "%s", e.msg);
	}
	for (int i = 0; i < 2; i++)
		if (!cfg->ports[i].backend[0]) {
			iod_flow_dp_config_free(cfg);
			free(cfg);
			return iod_cli_fail("dp run", IOD_EXIT_INVALID,
			                    "%s: ports.%s is missing (give its backend)", config,
			                    i ? "fabric" : "host");
		}
	struct iod_flow_dp dp;
	if (iod_flow_dp_build(cfg, 1, &dp, &e)) {
		iod_flow_dp_config_free(cfg);
		free(cfg);
		return iod_cli_fail("dp run", IOD_EXIT_INVALID, "%s: %s", config, e.msg);
	}
	struct iod_io_port ports[2];
	memset(ports, 0, sizeof(ports));
	int rc = 0;
	struct iod_flow_dp_ar *ar = NULL;
	if (iod_flow_dp_ar_create(cfg, &ar, &e)) {
		rc = iod_cli_fail("dp run", IOD_EXIT_INVALID, "%s: %s", config, e.msg);
		goto out;
	}
	for (int i = 0; i < 2 && !rc; i++) {
		const struct iod_flow_dp_port *p = &cfg->ports[i];
		struct iod_io_port_cfg pc = {.backend = p->backend,
		                             .name = p->name,
		                             .iface = p->iface,
		                             .pcap_in = p->pcap_in,
		                             .pcap_out = p->pcap_out};
		if (iod_io_port_open(&ports[i], &pc, &e))
			rc = iod_cli_fail("dp run", IOD_EXIT_ERROR, "%s", e.msg);
	}
	if (rc)
		goto out;
	static struct dp_metrics dm = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct MHD_Daemon *http = NULL;
	if (metrics) {
		if (gethostname(dm.node, sizeof(dm.node)))
			iod_strlcpy(dm.node, "local", sizeof(dm.node));
		dm.node[sizeof(dm.node) - 1] = 0;
		dp_metrics_publish(&dm, ports, cfg);
		if (!(http = dp_metrics_serve(&dm, metrics, &e))) {
			rc = iod_cli_fail("dp run", IOD_EXIT_INVALID, "%s", e.msg);
			goto out;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	IOD_INFO("dp", "running %s: host=%s(%s) fabric=%s(%s), %u networks, %u services", config,
	         ports[0].ops->name, cfg->ports[0].iface, ports[1].ops->name, cfg->ports[1].iface,
	         cfg->networks_n, cfg->services_n);
	uint64_t start = iod_clock_now_ns(), last_state = start, last_pub = start;
	struct iod_dp_loop loop;
	iod_dp_loop_init(&loop, &dp, ar, ports);
	while (!stop_flag) {
		uint64_t now = iod_clock_now_ns();
		uint32_t got = iod_dp_loop_step(&loop, now);
		if (http && now - last_pub >= IOD_AGENT_VSWITCH_STATS_MS * IOD_NS_PER_MS) {
			dp_metrics_publish(&dm, ports, cfg);
			last_pub = now;
		}
		if (now - last_state >= IOD_NS_PER_S) {
			write_state(&dp, ar, ports, state);
			last_state = now;
		}
		if ((duration_ns && now - start >= duration_ns) ||
		    (count && loop.rx_packets >= count))
			break;
		if (iod_dp_loop_done(&loop))
			break;
		if (!got)
			iod_dp_loop_idle(&loop);
	}
	if (http) {
		MHD_stop_daemon(http);
		http = NULL;
	}
	if (write_state(&dp, ar, ports, state))
		IOD_WARN("dp", "cannot write state file %s", state);
	struct iod_flow_engine_stats es;
	iod_flow_engine_stats(dp.pl, &es);
	if (out == IOD_OUT_JSON) {
		json_t *j = json_object();
		json_object_set_new(j, "packets", json_integer((json_int_t)es.packets));
		json_object_set_new(j, "drops", json_integer((json_int_t)es.drops));
		json_object_set_new(j, "host_tx",
		                    json_integer((json_int_t)ports[0].stats.tx_packets));
		json_object_set_new(j, "fabric_tx",
		                    json_integer((json_int_t)ports[1].stats.tx_packets));
		json_object_set_new(j, "sessions", json_integer(iod_net_ct_count(dp.ct[0])));
		json_object_set_new(j, "state", json_string(state));
		iod_json_print(stdout, j, false);
		json_decref(j);
	} else {
		printf("dp: %llu packets, %llu dropped, host tx %llu, fabric tx %llu, %u sessions; "
		       "state in %s\n",
		       (unsigned long long)es.packets, (unsigned long long)es.drops,
		       (unsigned long long)ports[0].stats.tx_packets,
		       (unsigned long long)ports[1].stats.tx_packets, iod_net_ct_count(dp.ct[0]),
		       state);
	}
out:
	for (int i = 0; i < 2; i++)
		if (ports[i].ops)
			iod_io_port_close(&ports[i]);
	iod_flow_dp_ar_destroy(ar);
	iod_flow_dp_destroy(&dp);
	iod_flow_dp_config_free(cfg);
	free(cfg);
	return rc;
}

static void print_dump_text(const json_t *j)
{
	const json_t *eng = json_object_get(j, "engine");
	if (json_object_get(j, "node"))
		printf("node %s: its virtual switch\n",
		       json_string_value(json_object_get(j, "node")));
	if (json_object_get(j, "error"))
		printf("%s\n", json_string_value(json_object_get(j, "error")));
	printf("engine: %lld packets, %lld dropped, fast-path hits %lld, exact-match hits %lld, "
	       "megaflow hits %lld, pipe walks %lld\n",
	       json_integer_value(json_object_get(eng, "packets")),
	       json_integer_value(json_object_get(eng, "drops")),
	       json_integer_value(json_object_get(eng, "fast_path_hits")),
	       json_integer_value(json_object_get(eng, "emc_hits")),
	       json_integer_value(json_object_get(eng, "megaflow_hits")),
	       json_integer_value(json_object_get(eng, "walks")));
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(j, "pipes"), i, p)
	{
		const json_t *fwd = json_object_get(p, "fwd"),
		             *miss = json_object_get(p, "fwd_miss");
		printf(
		    "\npipe %-8s %-7s hits %-10lld misses %-10lld fwd %s%s%s miss %s%s%s\n",
		    json_string_value(json_object_get(p, "name")),
		    json_string_value(json_object_get(p, "kind")),
		    json_integer_value(json_object_get(p, "hits")),
		    json_integer_value(json_object_get(p, "misses")),
		    json_string_value(json_object_get(fwd, "type")),
		    json_object_get(fwd, "pipe") ? ":" : "",
		    json_object_get(fwd, "pipe") ? json_string_value(json_object_get(fwd, "pipe"))
		                                 : "",
		    json_string_value(json_object_get(miss, "type")),
		    json_object_get(miss, "pipe") ? ":" : "",
		    json_object_get(miss, "pipe") ? json_string_value(json_object_get(miss, "pipe"))
		                                  : "");
		size_t k;
		json_t *en;
		json_array_foreach(json_object_get(p, "entries"), k, en)
		{
			char *m = json_dumps(json_object_get(en, "match"), JSON_COMPACT);
			char *a = json_dumps(json_object_get(en, "actions"), JSON_COMPACT);
			const json_t *off = json_object_get(en, "offloaded");
			const char *verdict = json_string_value(json_object_get(en, "offload"));
			if (!verdict || !strcmp(verdict, "hardware"))
				verdict = json_is_true(off) ? "OFFLOADED" : "software";
			printf("  #%-4lld %-48s %-28s pkts %-10lld bytes %-12lld%s%s\n",
			       json_integer_value(json_object_get(en, "id")), m ? m : "",
			       a ? a : "", json_integer_value(json_object_get(en, "packets")),
			       json_integer_value(json_object_get(en, "bytes")), off ? " " : "",
			       off ? verdict : "");
			if (off)
				printf("        %s\n",
				       json_string_value(json_object_get(en, "offload_note")));
			free(m);
			free(a);
		}
	}
	const json_t *ports = json_object_get(j, "ports");
	json_array_foreach(ports, i, p)
	{
		printf("%sport %s (%s): rx %lld tx %lld tx_errors %lld\n", i ? "" : "\n",
		       json_string_value(json_object_get(p, "name")),
		       json_string_value(json_object_get(p, "backend")),
		       json_integer_value(json_object_get(p, "rx_packets")),
		       json_integer_value(json_object_get(p, "tx_packets")),
		       json_integer_value(json_object_get(p, "tx_errors")));
	}
	const json_t *of = json_object_get(j, "offload");
	if (of && json_object_get(of, "translates")) /* a live node's switch: no port */
		printf("\noffload verdicts: %lld rules, %lld translate to rte_flow, %lld stay in "
		       "software (no DPDK port here to validate them on)\n",
		       json_integer_value(json_object_get(of, "rules")),
		       json_integer_value(json_object_get(of, "translates")),
		       json_integer_value(json_object_get(of, "software")));
	else if (of)
		printf("\noffload to %s: %lld rules, %lld offloaded, %lld in software "
		       "(%lld rejected by rte_flow_validate); template API: %s\n",
		       json_string_value(json_object_get(of, "port")),
		       json_integer_value(json_object_get(of, "rules")),
		       json_integer_value(json_object_get(of, "offloaded")),
		       json_integer_value(json_object_get(of, "software")),
		       json_integer_value(json_object_get(of, "validate_errors")),
		       json_string_value(json_object_get(of, "template_api")));
	const json_t *ar = json_object_get(j, "adaptive_routing");
	json_array_foreach(json_object_get(ar, "networks"), i, p)
	{
		const json_t *st = json_object_get(p, "stats");
		printf(
		    "\nadaptive routing vni %lld: %s; flows new %lld pinned %lld moved %lld aged "
		    "%lld; probes sent %lld replies %lld late %lld missed %lld suppressed %lld; "
		    "paths failed %lld\n",
		    json_integer_value(json_object_get(p, "vni")),
		    json_string_value(json_object_get(p, "policy")),
		    json_integer_value(json_object_get(st, "flows_new")),
		    json_integer_value(json_object_get(st, "flows_pinned")),
		    json_integer_value(json_object_get(st, "flows_moved")),
		    json_integer_value(json_object_get(st, "flows_aged")),
		    json_integer_value(json_object_get(st, "probes_sent")),
		    json_integer_value(json_object_get(st, "probe_replies")),
		    json_integer_value(json_object_get(st, "probe_late")),
		    json_integer_value(json_object_get(st, "probe_misses")),
		    json_integer_value(json_object_get(st, "probes_suppressed")),
		    json_integer_value(json_object_get(st, "paths_failed")));
		size_t k;
		json_t *d;
		json_array_foreach(json_object_get(p, "destinations"), k, d)
		{
			printf("  to %s:", json_string_value(json_object_get(d, "vtep")));
			size_t q;
			json_t *pa;
			json_array_foreach(json_object_get(d, "paths"), q, pa)
			{
				printf(" %lld%s", json_integer_value(json_object_get(pa, "sport")),
				       json_is_true(json_object_get(pa, "alive")) ? "" : "(dead)");
				if (json_object_get(pa, "flows"))
					printf(" (rtt %lld us, %lld flows)",
					       json_integer_value(json_object_get(pa, "rtt_us")),
					       json_integer_value(json_object_get(pa, "flows")));
			}
			printf("\n");
		}
	}
	if (ar && json_object_get(ar, "policy") &&
	    !json_array_size(json_object_get(ar, "networks")))
		printf("\nadaptive routing: %s\n",
		       json_string_value(json_object_get(ar, "policy")));
	if (ar)
		printf("probes reflected for remote edges: %lld\n",
		       json_integer_value(json_object_get(ar, "probes_reflected")));
	if (json_object_get(j, "conntrack_sessions"))
		printf("conntrack: %lld sessions\n",
		       json_integer_value(json_object_get(j, "conntrack_sessions")));
}

/*
 * A live node's switch: its Node object (through the control plane) names
 * its agent's telemetry listener, which answers GET /v1/dp/dump (over
 * mutual TLS beyond loopback, with the client config's certificate). 0
 * with *out, or the exit code with the error printed.
 */
static int node_dump(const char *server, const char *node, json_t **out)
{
	struct iod_api_response ar = {0};
	int rc = iod_ctl_node_get("dp dump", server, node, "/v1/dp/dump",
	                          IOD_AGENT_VSWITCH_DUMP_WAIT_S * 1000 + 1000, &ar);
	if (rc)
		return rc;
	if (ar.status == 404 && ar.json && json_object_get(ar.json, "error") &&
	    strstr(iod_api_error_text(&ar), "virtual switch"))
		rc = iod_cli_fail("dp dump", IOD_EXIT_INVALID, "node %s: %s", node,
		                  iod_api_error_text(&ar));
	else if (ar.status != 200 || !json_is_object(ar.json))
		rc = iod_cli_fail("dp dump", IOD_EXIT_ERROR, "node %s's agent at %s: %s (HTTP %d)",
		                  node, ar.server, iod_api_error_text(&ar), ar.status);
	else
		*out = json_incref(ar.json);
	iod_api_response_free(&ar);
	return rc;
}

static int dp_dump(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"state", required_argument, 0, 's'},   {"config", required_argument, 0, 'c'},
	    {"offload", required_argument, 0, 'f'}, {"output", required_argument, 0, 'o'},
	    {"node", required_argument, 0, 'n'},    {"server", required_argument, 0, 'S'},
	    {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
	const char *state = "/tmp/iod-dp.json", *config = NULL, *outs = "text", *offload = NULL;
	const char *node = NULL, *server = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "s:c:f:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': node = optarg; break;
		case 'S': server = optarg; break;
		case 'f': offload = optarg; break;
		case 's': state = optarg; break;
		case 'c': config = optarg; break;
		case 'o': outs = optarg; break;
		case 'h':
			printf(
			    "usage: iod dp dump [--state FILE | --config FILE [--offload PORT] |\n"
			    "                    --node NAME [--server ADDR]] [-o text|json]\n\n"
			    "  --node NAME     show the live virtual switch of cluster node NAME\n"
			    "                  (`iod up --netns`): its pipes, entries, counters "
			    "and\n"
			    "                  each entry's offload verdict (does it translate to\n"
			    "                  rte_flow), read from its agent's telemetry "
			    "listener\n"
			    "                  named in its Node object\n" IOD_CTL_SERVER_HELP
			    "  --state FILE    read what a running `iod dp run` wrote (default\n"
			    "                  /tmp/iod-dp.json; it is rewritten every second)\n"
			    "  --config FILE   build the pipeline of FILE and show it, without "
			    "traffic\n"
			    "  --offload PORT  translate every entry to rte_flow, validate it on "
			    "the\n"
			    "                  DPDK port PORT (e.g. net_null0, created with "
			    "--no-huge\n"
			    "                  --no-pci; IOD_DPDK_EAL overrides the EAL arguments) "
			    "and\n"
			    "                  show which entries are offloaded and why others are "
			    "not\n");
			return 0;
		default: return IOD_EXIT_INVALID;
		}
	}
	static const char *const allowed[] = {"text", "json", NULL};
	enum iod_output out;
	if (iod_cli_output("dp dump", outs, allowed, &out))
		return IOD_EXIT_INVALID;
	json_t *j = NULL;
	struct iod_err e = {0};
	if (node && (config || offload))
		return iod_cli_fail(
		    "dp dump", IOD_EXIT_INVALID,
		    "--node reads a live switch; it takes no --config or --offload");
	if (node) {
		int rc = node_dump(server, node, &j);
		if (rc)
			return rc;
	} else if (config) {
		struct iod_flow_dp_config *cfg = calloc(1, sizeof(*cfg));
		struct iod_flow_dp dp;
		if (!cfg)
			return IOD_EXIT_ERROR;
		if (iod_flow_dp_config_load(config, cfg, &e) ||
		    iod_flow_dp_build(cfg, 1, &dp, &e)) {
			iod_flow_dp_config_free(cfg);
			free(cfg);
			return iod_cli_fail("dp dump", IOD_EXIT_INVALID, "%s", e.msg);
		}
		if (offload) {
			struct iod_io_offload *o = NULL;
			if (!iod_io_offload_create) {
				iod_flow_dp_destroy(&dp);
				iod_flow_dp_config_free(cfg);
				free(cfg);
				return iod_cli_fail("dp dump", IOD_EXIT_NOT_BUILT,
				                    "--offload: this iod was built without DPDK "
				                    "(install libdpdk-dev and rebuild)");
			}
			if (iod_io_offload_create(&o, dp.pl, offload, &e)) {
				iod_flow_dp_destroy(&dp);
				iod_flow_dp_config_free(cfg);
				free(cfg);
				return iod_cli_fail("dp dump", IOD_EXIT_ERROR, "%s", e.msg);
			}
			j = iod_flow_dump_json(dp.pl, iod_io_offload_state, o);
			json_object_set_new(j, "offload", iod_io_offload_summary(o));
			iod_io_offload_destroy(o);
		} else {
			j = iod_flow_dump_json(dp.pl, NULL, NULL);
		}
		iod_flow_dp_destroy(&dp);
		iod_flow_dp_config_free(cfg);
		free(cfg);
	} else {
		json_error_t je;
		j = json_load_file(state, 0, &je);
		if (!j)
			return iod_cli_fail(
			    "dp dump", IOD_EXIT_UNAVAILABLE,
			    "cannot read %s (%s): is `iod dp run` running? give --state "
			    "FILE or --config FILE",
			    state, je.text);
	}
	if (out == IOD_OUT_JSON)
		iod_json_print(stdout, j, false);
	else
		print_dump_text(j);
	json_decref(j);
	return 0;
}

static int dp_bench(int argc, char **argv)
{
	static const struct option opts[] = {{"scenario", required_argument, 0, 's'},
	                                     {"flows", required_argument, 0, 'f'},
	                                     {"size", required_argument, 0, 'b'},
	                                     {"seconds", required_argument, 0, 't'},
	                                     {"output", required_argument, 0, 'o'},
	                                     {"help", no_argument, 0, 'h'},
	                                     {0, 0, 0, 0}};
	const char *sc = "full", *outs = "text";
	uint32_t flows = 100000, size = 60;
	double seconds = 2;
	int c;
	while ((c = getopt_long(argc, argv, "s:f:b:t:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': sc = optarg; break;
		case 'f': flows = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'b': size = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 't': seconds = atof(optarg); break;
		case 'o': outs = optarg; break;
		case 'h':
			printf("usage: iod dp bench [--scenario full|encap|decap|l2fwd|macswap]\n"
			       "                    [--flows N] [--size BYTES] [--seconds S] [-o "
			       "json]\n\n"
			       "One core, mem ports. full = decap + security group + conntrack +\n"
			       "service LB + encap. Defaults: full, 100000 flows, 60 B tenant "
			       "frames, 2 s.\n"
			       "Also prints the bare mac-swap loop of the same run and the ratio.\n"
			       "`make bench-dataplane` runs every figure.\n");
			return 0;
		default: return IOD_EXIT_INVALID;
		}
	}
	static const char *const allowed[] = {"text", "json", NULL};
	enum iod_output out;
	if (iod_cli_output("dp bench", outs, allowed, &out))
		return IOD_EXIT_INVALID;
	struct iod_io_bench_result base, r;
	struct iod_err e = {0};
	if (iod_io_bench_run("macswap", 1, size, seconds / 2, &base, &e) ||
	    iod_io_bench_run(sc, flows, size, seconds, &r, &e))
		return iod_cli_fail("dp bench", IOD_EXIT_INVALID, "%s", e.msg);
	if (out == IOD_OUT_JSON) {
		json_t *j = json_object();
		json_object_set_new(j, "scenario", json_string(r.scenario));
		json_object_set_new(j, "flows", json_integer(r.flows));
		json_object_set_new(j, "frame_bytes", json_integer(r.frame_bytes));
		json_object_set_new(j, "wire_bytes", json_integer(r.wire_bytes));
		json_object_set_new(j, "mpps", json_real(r.mpps));
		json_object_set_new(j, "ns_per_pkt", json_real(r.ns_per_pkt));
		json_object_set_new(j, "macswap_mpps", json_real(base.mpps));
		json_object_set_new(j, "ratio_vs_macswap", json_real(r.mpps / base.mpps));
		json_object_set_new(j, "packets", json_integer((json_int_t)r.packets));
		json_object_set_new(
		    j, "fast_path_pct",
		    json_real(r.packets ? 100.0 * (double)r.fp_hits / (double)r.packets : 0.0));
		json_object_set_new(j, "cpu_share", json_real(r.cpu_share));
		iod_json_print(stdout, j, false);
		json_decref(j);
	} else {
		printf("%s: %u flows, %u B frames (%u B on the wire): %.2f Mpps, %.1f ns/packet "
		       "(%.0f%% on the compiled fast path); bare mac-swap loop %.2f Mpps (ratio "
		       "%.3f)\n",
		       r.scenario, r.flows, r.frame_bytes, r.wire_bytes, r.mpps, r.ns_per_pkt,
		       r.packets ? 100.0 * (double)r.fp_hits / (double)r.packets : 0.0, base.mpps,
		       r.mpps / base.mpps);
	}
	return 0;
}

int cmd_dp(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage_dp(argc < 2 ? stderr : stdout);
		return argc < 2 ? IOD_EXIT_INVALID : 0;
	}
	const char *sub = argv[1];
	if (!strcmp(sub, "run"))
		return dp_run(argc - 1, argv + 1);
	if (!strcmp(sub, "dump"))
		return dp_dump(argc - 1, argv + 1);
	if (!strcmp(sub, "bench"))
		return dp_bench(argc - 1, argv + 1);
	static const char *const subs[] = {"run", "dump", "bench"};
	const char *s = iod_suggest(sub, subs, 3);
	return iod_cli_fail("dp", IOD_EXIT_INVALID,
	                    "unknown subcommand \"%s\"%s%s%s; run `iod dp --help`", sub,
	                    s ? "; did you mean \"" : "", s ? s : "", s ? "\"?" : "");
}
