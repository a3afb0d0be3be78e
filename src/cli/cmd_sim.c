/*
 * cmd_sim.c: `iod sim`: simulation commands. `iod sim fabric` runs the
 * packet-level fabric simulator (src/sim) on a topology and a workload and
 * prints FCT results, a sweep over loads as a table and a gnuplot chart.
 *
 * A thin shell: it parses options, builds the topology and workload, runs
 * the core and prints. The whole-cluster simulation (`iod sim --nodes 4
 * --gpus 16`, `iod sim compare`, `iod sim --selftest`) is cmd_simc.c.
 */
#include "cli.h"
#include "iod/sim.h"

int cmd_sim_cluster(int argc, char **argv); /* cmd_simc.c */

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage_sim(FILE *f)
{
	fprintf(f,
	        "usage: iod sim fabric [options]       packet-level fabric simulator\n"
	        "       iod sim --nodes N --gpus G     whole-cluster simulation\n"
	        "       iod sim compare --scenario F   iod against the Kubernetes baseline\n"
	        "       iod sim --selftest             the validation checks (V1-V3, V5-V7, VC)\n"
	        "run `iod sim fabric --help` or `iod sim --nodes 1 --help` for the options\n");
}

static void usage_fabric(FILE *f)
{
	fprintf(
	    f,
	    "usage: iod sim fabric [--topo NAME|FILE] [--workload web-search|data-mining|FILE]\n"
	    "                      [--load 0.7 | --loads 0.1,0.5,0.9 | --sweep] [--seed 1]\n"
	    "                      [--duration 0.1s] [-o text|csv|json]\n\n"
	    "Simulates a data-center fabric packet by packet in virtual time and reports\n"
	    "flow completion times (FCT) and slowdown (FCT / FCT alone on the empty network).\n"
	    "The same options and seed always print the same bytes.\n\n"
	    "topology:\n"
	    "  --topo NAME|FILE     a YAML file (docs/simulator.md) or a built-in:\n"
	    "                         leaf-spine[:leaves=2,spines=2,hosts=32,host_rate=10Gbps,\n"
	    "                                    fabric_rate=40Gbps,links=1,delay=1us]\n"
	    "                         fat-tree[:k=4,rate=10Gbps,delay=1us]\n"
	    "                         dumbbell[:hosts=2,host_rate=40Gbps,bottleneck=10Gbps]\n"
	    "                       all take buffer=1MB, ecn=100KB|off, ecn_pkts=65,\n"
	    "                       hash=crc32|mix|xor, seed=per-switch|same (default leaf-spine)\n"
	    "workload:\n"
	    "  --workload W         web-search (default), data-mining, or a CDF file\n"
	    "                       (lines \"BYTES CDF\"); Poisson arrivals per host\n"
	    "  --load X             offered load per host NIC, 0..1 (default 0.5)\n"
	    "  --loads A,B,...      a sweep over loads, printed as a table\n"
	    "  --sweep              the sweep 0.1,0.2,...,0.9\n"
	    "  --duration D         flows arrive during [0, D) (default 0.1s)\n"
	    "  --drain D            then run at most D more for flows to finish (default 1s)\n"
	    "  --flows FILE         scripted flows, lines \"AT SRC DST SIZE\" (0ms h0 h5 100MB);\n"
	    "                       with --load 0 only these run\n"
	    "  --incast N           N hosts send --incast-size (default 1MB) to h0 at t=0\n"
	    "  --allreduce N        ring all-reduce among hosts 0..N-1 of --size (default 64MB);\n"
	    "                       prints algbw and busbw (nccl-tests definitions)\n"
	    "model:\n"
	    "  --transport T        dctcp (default) or newreno\n"
	    "  --seed N             random seed (default 1)\n"
	    "  --packets N          packet pool size (default %u)\n"
	    "output:\n"
	    "  -o text|csv|json     text summary (default), per-flow CSV (sweep: rows), JSON\n"
	    "  --csv FILE           also write per-flow records as CSV to FILE\n"
	    "  --ports              print per-link counters (text)\n"
	    "  --plot FILE          sweep: draw FCT slowdown vs load with gnuplot (.svg or .png)\n"
	    "  --progress           progress line on stderr (default: when stderr is a terminal)\n"
	    "  --quiet              no progress line\n\n"
	    "examples:\n"
	    "  iod sim fabric --topo leaf-spine --workload web-search --load 0.7 --seed 1\n"
	    "  iod sim fabric --sweep --duration 0.02s --plot fct.svg\n"
	    "  iod sim fabric --topo examples/fabrics/leaf-spine-2x2.yaml -o json\n"
	    "  iod sim fabric --topo leaf-spine:hosts=8 --allreduce 8 --size 64MB --load 0\n"
	    "exit codes: 0 ok, 2 invalid input, 1 the simulation failed (e.g. pool exhausted),\n"
	    "            4 some flows did not finish within --drain\n",
	    IOD_SIM_PACKETS_DEFAULT);
}

struct opts {
	const char *topo, *workload, *flows_file, *csv_file, *plot_file;
	double loads[IOD_SIM_SWEEP_MAX];
	unsigned n_loads;
	uint64_t seed, duration_ns, drain_ns, incast_size, ar_size;
	uint32_t incast, allreduce, packets;
	enum iod_sim_transport transport;
	enum iod_output out;
	bool ports, progress, sweep;
};

struct progress {
	bool on;         /* print it */
	double load;     /* current load */
	uint64_t end_ns; /* virtual time the run aims for */
	time_t started;  /* wall time, for the rate */
};

static void on_progress(void *ctx, const struct iod_sim *s)
{
	struct progress *p = ctx;
	fprintf(stderr, "\r  load %.2f  sim %.4f/%.4f s  events %.1fM  flows %u/%u   ", p->load,
	        (double)iod_sim_now(s) / 1e9, (double)p->end_ns / 1e9,
	        (double)iod_sim_events(s) / 1e6, iod_sim_flows_done(s), iod_sim_flow_count(s));
	fflush(stderr);
}

static int parse_loads(const char *s, struct opts *o)
{
	char buf[512];
	char *save = NULL;
	iod_strlcpy(buf, s, sizeof(buf));
	o->n_loads = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		double v = strtod(t, &end);
		if (*end || end == t || !(v >= 0) || v > 1.5 || o->n_loads >= IOD_SIM_SWEEP_MAX)
			return -EINVAL;
		o->loads[o->n_loads++] = v;
	}
	return o->n_loads ? 0 : -EINVAL;
}

struct run_result {
	struct iod_sim_summary sum;
	double algbw_bps, busbw_bps; /* all-reduce */
	double wall_s;               /* wall time of the run */
};

/* Build and run one simulation at one load; *out keeps the simulator. */
static int run_one(const struct opts *o, const struct iod_sim_topo *topo,
                   const struct iod_sim_cdf *cdf, double load, struct iod_sim **out,
                   struct run_result *res, struct iod_err *e)
{
	struct iod_sim_config cfg;
	struct iod_sim *s;
	struct iod_rng rng;
	struct iod_sim_allreduce ar = {0};
	int rc;

	iod_sim_config_default(&cfg);
	cfg.seed = o->seed;
	cfg.transport = o->transport;
	if (o->packets)
		cfg.packets_max = o->packets;
	/* Size the flow table to the workload: expected arrivals x 2 + slack. */
	cfg.flows_max =
	    iod_sim_flows_for(topo, iod_sim_cdf_mean(cdf), load, o->duration_ns, o->allreduce);
	if ((rc = iod_sim_create(&s, topo, &cfg, e)))
		return rc;
	iod_rng_seed(&rng, o->seed ^ 0x5eed);
	if (load > 0 && (rc = iod_sim_workload_poisson(s, cdf, load, o->duration_ns, &rng, e)) < 0)
		goto fail;
	if (o->flows_file) {
		struct iod_buf b;
		iod_buf_init(&b);
		rc = iod_buf_read_file(&b, o->flows_file, IOD_SIM_FILE_MAX, e);
		if (!rc)
			rc = iod_sim_workload_script(s, b.data, o->flows_file, e);
		iod_buf_free(&b);
		if (rc < 0)
			goto fail;
	}
	if (o->incast && (rc = iod_sim_workload_incast(s, o->incast, o->incast_size, 0, e)) < 0)
		goto fail;
	if (o->allreduce && (rc = iod_sim_allreduce_start(s, &ar, o->allreduce, o->ar_size, 0, e)))
		goto fail;
	struct progress pg = {o->progress, load, o->duration_ns, time(NULL)};
	if (pg.on)
		iod_sim_on_progress(s, on_progress, &pg, 2000000);
	uint64_t t0 = iod_clock_now_ns();
	rc = iod_sim_run(s, o->duration_ns, e);
	/* Drain: stop as soon as every flow is done (or the drain ends). */
	uint64_t end = o->duration_ns + o->drain_ns;
	pg.end_ns = end;
	if (!rc)
		rc = iod_sim_drain(s, end, o->duration_ns / 10, e);
	uint64_t t1 = iod_clock_now_ns();
	if (pg.on)
		fprintf(stderr, "\r%*s\r", 78, "");
	if (rc)
		goto fail;
	res->wall_s = (double)(t1 - t0) / 1e9;
	if ((rc = iod_sim_summarize(s, &res->sum))) {
		iod_err_set(e, rc, "out of memory summarising");
		goto fail;
	}
	res->algbw_bps = o->allreduce ? iod_sim_allreduce_algbw_bps(&ar) : 0;
	res->busbw_bps = o->allreduce ? iod_sim_allreduce_busbw_bps(&ar) : 0;
	iod_sim_allreduce_free(&ar);
	*out = s;
	return 0;
fail:
	iod_sim_allreduce_free(&ar);
	iod_sim_destroy(s);
	return rc < 0 ? rc : -EINVAL;
}

static void print_stats_row(const char *name, const struct iod_sim_fct_stats *st)
{
	printf("  %-12s %8u %12.1f %12.1f %9.2f %9.2f\n", name, st->n, st->fct_avg_us,
	       st->fct_p99_us, st->slow_avg, st->slow_p99);
}

static void print_text(const struct opts *o, const struct iod_sim_topo *t, const struct iod_sim *s,
                       const struct run_result *r, double load)
{
	const struct iod_sim_summary *u = &r->sum;
	printf("fabric %s: %u hosts, %u switches, %u links; workload %s at load %.2f, seed %" PRIu64
	       ", %s\n",
	       t->name, iod_sim_topo_host_count(t), t->n_nodes - iod_sim_topo_host_count(t),
	       t->n_links, o->workload, load, o->seed,
	       o->transport == IOD_SIM_DCTCP ? "dctcp" : "newreno");
	printf("flows %u, done %u; simulated %.6f s; %" PRIu64 " events; drops %" PRIu64
	       ", ECN marks %" PRIu64 ", retransmits %" PRIu64 ", timeouts %" PRIu64 "\n\n",
	       u->flows, u->done, (double)u->sim_ns / 1e9, u->events, u->drops, u->ecn_marks,
	       u->retransmits, u->timeouts);
	printf("  %-12s %8s %12s %12s %9s %9s\n", "flows", "n", "fct_avg_us", "fct_p99_us",
	       "slow_avg", "slow_p99");
	print_stats_row("all", &u->all);
	print_stats_row("<100KB", &u->small);
	print_stats_row(">10MB", &u->large);
	for (unsigned i = 0; i < IOD_SIM_BUCKETS; i++)
		print_stats_row(iod_sim_bucket_names[i], &u->bucket[i]);
	if (o->allreduce)
		printf("\nall-reduce: %u ranks, %" PRIu64
		       " bytes: algbw %.2f Gbps, busbw %.2f Gbps\n",
		       o->allreduce, o->ar_size, r->algbw_bps / 1e9, r->busbw_bps / 1e9);
	if (o->ports) {
		printf("\n  %-10s %-10s %10s %12s %14s %8s %9s %10s\n", "from", "to", "rate_Gbps",
		       "tx_pkts", "tx_bytes", "drops", "ecn", "qmax_B");
		for (uint32_t p = 0; p < iod_sim_port_count(s); p++) {
			struct iod_sim_port_stats st;
			iod_sim_port_stats(s, p, &st);
			printf("  %-10s %-10s %10.1f %12" PRIu64 " %14" PRIu64 " %8" PRIu64
			       " %9" PRIu64 " %10" PRIu64 "\n",
			       iod_sim_node_name(s, st.node), iod_sim_node_name(s, st.peer),
			       (double)st.rate_bps / 1e9, st.tx_pkts, st.tx_bytes, st.drops,
			       st.ecn_marks, st.q_max_bytes);
		}
	}
}

static int plot(const char *file, const struct opts *o, const struct run_result *r,
                struct iod_err *e)
{
	char dat[] = "/tmp/iod-sim-plot-XXXXXX";
	int fd = mkstemp(dat);
	if (fd < 0)
		return iod_err_set(e, -errno, "cannot create a temporary file");
	FILE *f = fdopen(fd, "w");
	for (unsigned i = 0; i < o->n_loads; i++) {
		fprintf(f, "%.2f %.4f %.4f %.4f %.4f ", o->loads[i], r[i].sum.all.slow_avg,
		        r[i].sum.all.slow_p99, r[i].sum.small.slow_avg, r[i].sum.small.slow_p99);
		if (r[i].sum.large.n) /* no large flow: a gap, not a 0 on a log scale */
			fprintf(f, "%.4f\n", r[i].sum.large.slow_avg);
		else
			fprintf(f, "NaN\n");
	}
	fclose(f);
	size_t n = strlen(file);
	bool png = n > 4 && !strcmp(file + n - 4, ".png");
	FILE *g = popen("gnuplot", "w");
	if (!g) {
		unlink(dat);
		return iod_err_set(e, -ENOENT, "cannot run gnuplot; install gnuplot-nox");
	}
	fprintf(g,
	        "set terminal %s size 800,500\nset output '%s'\n"
	        "set title 'FCT slowdown vs load: %s, %s, ECMP'\n"
	        "set xlabel 'load'\nset ylabel 'slowdown (FCT / ideal)'\nset logscale y\n"
	        "set key top left\nset grid\n"
	        "plot '%s' u 1:2 w lp t 'all avg', '' u 1:3 w lp t 'all p99', "
	        "'' u 1:4 w lp t '<100KB avg', '' u 1:5 w lp t '<100KB p99', "
	        "'' u 1:6 w lp t '>10MB avg'\n",
	        png ? "pngcairo" : "svg", file, o->topo, o->workload, dat);
	int rc = pclose(g);
	unlink(dat);
	if (rc)
		return iod_err_set(e, -EIO, "gnuplot failed (exit %d) drawing %s", rc, file);
	return 0;
}

static int cmd_fabric(int argc, char **argv)
{
	struct opts o = {.topo = "leaf-spine",
	                 .workload = "web-search",
	                 .loads = {0.5},
	                 .n_loads = 1,
	                 .seed = 1,
	                 .duration_ns = 100 * IOD_NS_PER_MS,
	                 .drain_ns = IOD_NS_PER_S,
	                 .incast_size = 1000000,
	                 .ar_size = 64000000,
	                 .transport = IOD_SIM_DCTCP,
	                 .out = IOD_OUT_TEXT,
	                 .progress = isatty(2)};
	static const char *const outs[] = {"text", "csv", "json", NULL};
	struct iod_err e = {0};
	bool load_given = false;

	if (iod_cli_wants_help(argc, argv)) {
		usage_fabric(stdout);
		return IOD_EXIT_OK;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                                  \
	do {                                                                                    \
		if (!v)                                                                         \
			return iod_cli_fail("sim fabric", IOD_EXIT_INVALID, "%s needs a value", \
			                    a);                                                 \
		i++;                                                                            \
	} while (0)
		if (!strcmp(a, "--topo")) {
			NEED();
			o.topo = v;
		} else if (!strcmp(a, "--workload")) {
			NEED();
			o.workload = v;
		} else if (!strcmp(a, "--load") || !strcmp(a, "--loads")) {
			NEED();
			if (parse_loads(v, &o))
				return iod_cli_fail(
				    "sim fabric", IOD_EXIT_INVALID,
				    "%s %s: want loads in [0, 1.5] separated by commas", a, v);
			load_given = true;
		} else if (!strcmp(a, "--sweep")) {
			o.n_loads = 9;
			for (unsigned k = 0; k < 9; k++)
				o.loads[k] = 0.1 * (k + 1);
			o.sweep = true;
		} else if (!strcmp(a, "--seed")) {
			NEED();
			char *end;
			o.seed = strtoull(v, &end, 0);
			if (*end || end == v)
				return iod_cli_fail("sim fabric", IOD_EXIT_INVALID,
				                    "--seed %s: want a number", v);
		} else if (!strcmp(a, "--duration") || !strcmp(a, "--drain")) {
			NEED();
			uint64_t ns;
			if (iod_parse_duration(v, &ns, &e))
				return iod_cli_fail("sim fabric", IOD_EXIT_INVALID, "%s: %s", a,
				                    e.msg);
			*(a[2] == 'd' && a[3] == 'u' ? &o.duration_ns : &o.drain_ns) = ns;
		} else if (!strcmp(a, "--flows")) {
			NEED();
			o.flows_file = v;
		} else if (!strcmp(a, "--incast") || !strcmp(a, "--allreduce") ||
		           !strcmp(a, "--packets")) {
			NEED();
			char *end;
			unsigned long n = strtoul(v, &end, 10);
			if (*end || end == v || !n || n > UINT32_MAX)
				return iod_cli_fail("sim fabric", IOD_EXIT_INVALID,
				                    "%s %s: want a count", a, v);
			*(a[2] == 'i'   ? &o.incast
			  : a[2] == 'a' ? &o.allreduce
			                : &o.packets) = (uint32_t)n;
		} else if (!strcmp(a, "--incast-size") || !strcmp(a, "--size")) {
			NEED();
			uint64_t b;
			if (iod_parse_size(v, &b, &e) || !b)
				return iod_cli_fail("sim fabric", IOD_EXIT_INVALID, "%s: %s", a,
				                    e.msg[0] ? e.msg : "must be > 0");
			*(a[2] == 'i' ? &o.incast_size : &o.ar_size) = b;
		} else if (!strcmp(a, "--transport")) {
			NEED();
			if (!strcmp(v, "dctcp"))
				o.transport = IOD_SIM_DCTCP;
			else if (!strcmp(v, "newreno"))
				o.transport = IOD_SIM_NEWRENO;
			else
				return iod_cli_fail("sim fabric", IOD_EXIT_INVALID,
				                    "--transport %s: want dctcp or newreno", v);
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			NEED();
			if (iod_cli_output("sim fabric", v, outs, &o.out))
				return IOD_EXIT_INVALID;
		} else if (!strcmp(a, "--csv")) {
			NEED();
			o.csv_file = v;
		} else if (!strcmp(a, "--plot")) {
			NEED();
			o.plot_file = v;
		} else if (!strcmp(a, "--ports")) {
			o.ports = true;
		} else if (!strcmp(a, "--progress")) {
			o.progress = true;
		} else if (!strcmp(a, "--quiet")) {
			o.progress = false;
		} else {
			return iod_cli_fail("sim fabric", IOD_EXIT_INVALID,
			                    "unknown option %s; see `iod sim fabric --help`", a);
		}
#undef NEED
	}
	if (!load_given && (o.allreduce || o.incast || o.flows_file) && !o.sweep)
		o.loads[0] = 0;
	if (!o.duration_ns)
		return iod_cli_fail("sim fabric", IOD_EXIT_INVALID, "--duration must be > 0");

	struct iod_sim_topo topo;
	struct iod_sim_cdf cdf;
	if (iod_sim_topo_load(&topo, o.topo, &e))
		return iod_cli_fail("sim fabric", IOD_EXIT_INVALID, "%s", e.msg);
	if (iod_sim_cdf_load(&cdf, o.workload, &e)) {
		iod_sim_topo_free(&topo);
		return iod_cli_fail("sim fabric", IOD_EXIT_INVALID, "%s", e.msg);
	}
	struct run_result res[IOD_SIM_SWEEP_MAX];
	int code = IOD_EXIT_OK;
	bool table = o.n_loads > 1;
	double wall_s = 0;
	json_t *jarr = json_array();

	if (table && o.out == IOD_OUT_TEXT) {
		printf("fabric %s, workload %s, %s, seed %" PRIu64 ", duration %.3f s, ECMP\n",
		       topo.name, o.workload, o.transport == IOD_SIM_DCTCP ? "dctcp" : "newreno",
		       o.seed, (double)o.duration_ns / 1e9);
		printf("%5s %7s %7s %9s %9s %9s %9s %9s %8s %11s\n", "load", "flows", "done",
		       "slow_avg", "slow_p99", "small_avg", "small_p99", "large_avg", "drops",
		       "events");
	} else if (table && o.out == IOD_OUT_CSV) {
		printf("load,flows,done,slow_avg,slow_p99,small_slow_avg,small_slow_p99,"
		       "large_slow_avg,fct_avg_us,fct_p99_us,drops,ecn_marks\n");
	}
	for (unsigned i = 0; i < o.n_loads; i++) {
		struct iod_sim *s = NULL;
		int rc = run_one(&o, &topo, &cdf, o.loads[i], &s, &res[i], &e);
		if (rc) {
			iod_sim_topo_free(&topo);
			json_decref(jarr);
			return iod_cli_fail("sim fabric",
			                    rc == -EINVAL ? IOD_EXIT_INVALID : IOD_EXIT_ERROR, "%s",
			                    e.msg);
		}
		const struct iod_sim_summary *u = &res[i].sum;
		if (u->done < u->flows)
			code = IOD_EXIT_PARTIAL;
		if (o.csv_file) {
			FILE *f = fopen(o.csv_file, i ? "a" : "w");
			if (!f || iod_sim_write_flows_csv(s, f)) {
				if (f)
					fclose(f);
				iod_sim_destroy(s);
				iod_sim_topo_free(&topo);
				json_decref(jarr);
				return iod_cli_fail("sim fabric", IOD_EXIT_ERROR,
				                    "cannot write %s: %s", o.csv_file,
				                    strerror(errno));
			}
			fclose(f);
		}
		if (o.out == IOD_OUT_JSON) {
			json_t *j = json_pack("{s:f, s:o}", "load", o.loads[i], "summary",
			                      iod_sim_summary_json(u));
			if (o.allreduce) {
				json_object_set_new(j, "allreduce_algbw_bps",
				                    json_real(res[i].algbw_bps));
				json_object_set_new(j, "allreduce_busbw_bps",
				                    json_real(res[i].busbw_bps));
			}
			if (!table)
				json_object_set_new(j, "flows", iod_sim_flows_json(s));
			json_array_append_new(jarr, j);
		} else if (table && o.out == IOD_OUT_TEXT) {
			printf("%5.2f %7u %7u %9.2f %9.2f %9.2f %9.2f %9.2f %8" PRIu64 " %11" PRIu64
			       "\n",
			       o.loads[i], u->flows, u->done, u->all.slow_avg, u->all.slow_p99,
			       u->small.slow_avg, u->small.slow_p99, u->large.slow_avg, u->drops,
			       u->events);
			fflush(stdout);
		} else if (table) {
			printf("%.2f,%u,%u,%.4f,%.4f,%.4f,%.4f,%.4f,%.1f,%.1f,%" PRIu64 ",%" PRIu64
			       "\n",
			       o.loads[i], u->flows, u->done, u->all.slow_avg, u->all.slow_p99,
			       u->small.slow_avg, u->small.slow_p99, u->large.slow_avg,
			       u->all.fct_avg_us, u->all.fct_p99_us, u->drops, u->ecn_marks);
		} else if (o.out == IOD_OUT_CSV) {
			iod_sim_write_flows_csv(s, stdout);
		} else {
			print_text(&o, &topo, s, &res[i], o.loads[i]);
		}
		iod_sim_destroy(s);
		wall_s += res[i].wall_s;
	}
	/* wall time goes to stderr: stdout stays byte-identical for a seed */
	if (o.progress)
		fprintf(stderr, "simulated %u load(s) in %.2f s of wall time\n", o.n_loads, wall_s);
	if (o.out == IOD_OUT_JSON) {
		if (table)
			iod_json_print(stdout, jarr, false);
		else
			iod_json_print(stdout, json_array_get(jarr, 0), false);
	}
	json_decref(jarr);
	iod_sim_topo_free(&topo);
	if (o.plot_file) {
		if (plot(o.plot_file, &o, res, &e))
			return iod_cli_fail("sim fabric", IOD_EXIT_ERROR, "%s", e.msg);
		if (o.out == IOD_OUT_TEXT)
			printf("plot: %s\n", o.plot_file);
	}
	return code;
}

int cmd_sim(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "fabric"))
		return cmd_fabric(argc - 1, argv + 1);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage_sim(argc < 2 ? stderr : stdout);
		return argc < 2 ? IOD_EXIT_INVALID : IOD_EXIT_OK;
	}
	if (argv[1][0] == '-' || !strcmp(argv[1], "compare"))
		return cmd_sim_cluster(argc, argv);
	return iod_cli_fail("sim", IOD_EXIT_INVALID,
	                    "unknown subcommand \"%s\"; use `iod sim fabric`, `iod sim compare` "
	                    "or `iod sim --nodes N --gpus G`",
	                    argv[1]);
}
