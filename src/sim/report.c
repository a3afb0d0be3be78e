/*
 * report.c: flow-completion-time results: per-flow records, summaries
 * (average and p99 FCT and slowdown, overall, < 100 KB, > 10 MB and by size
 * bucket), CSV and JSON.
 *
 * Pure formatting of the simulator's state: the same run prints the same
 * bytes. It never reads a clock; it writes only to the FILE it is given.
 */
#include "internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const iod_sim_bucket_names[IOD_SIM_BUCKETS] = {"<10KB", "10KB-100KB", "100KB-1MB",
                                                           "1MB-10MB", ">=10MB"};

static unsigned bucket_of(uint64_t size)
{
	return size < 10000 ? 0 : size < 100000 ? 1 : size < 1000000 ? 2 : size < 10000000 ? 3 : 4;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Percentile by nearest rank on a sorted array. */
static double pct(const double *v, uint32_t n, double q)
{
	if (!n)
		return 0;
	uint32_t r = (uint32_t)ceil(q * n);
	return v[r ? r - 1 : 0];
}

enum cls { C_ALL, C_SMALL, C_LARGE, C_B0 };

static bool in_class(const struct iod_sim_flow_rec *f, unsigned c)
{
	switch (c) {
	case C_ALL: return true;
	case C_SMALL: return f->size_bytes < 100000;
	case C_LARGE: return f->size_bytes > 10000000;
	default: return bucket_of(f->size_bytes) == c - C_B0;
	}
}

int iod_sim_summarize(const struct iod_sim *s, struct iod_sim_summary *sum)
{
	double *fct = malloc(sizeof(double) * (s->n_flows + 1));
	double *slow = malloc(sizeof(double) * (s->n_flows + 1));

	memset(sum, 0, sizeof(*sum));
	if (!fct || !slow) {
		free(fct);
		free(slow);
		return -ENOMEM;
	}
	sum->flows = s->n_flows;
	sum->done = s->flows_done;
	for (unsigned c = 0; c < C_B0 + IOD_SIM_BUCKETS; c++) {
		uint32_t n = 0;
		double fsum = 0, ssum = 0;
		for (uint32_t i = 0; i < s->n_flows; i++) {
			const struct iod_sim_flow_rec *f = &s->flows[i].rec;
			if (!f->done || !in_class(f, c))
				continue;
			fct[n] = (double)f->fct_ns / 1e3;
			slow[n] = (double)f->fct_ns / (double)f->ideal_ns;
			fsum += fct[n];
			ssum += slow[n];
			n++;
		}
		qsort(fct, n, sizeof(double), cmp_double);
		qsort(slow, n, sizeof(double), cmp_double);
		struct iod_sim_fct_stats st = {n, n ? fsum / n : 0, pct(fct, n, 0.99),
		                               n ? ssum / n : 0, pct(slow, n, 0.99)};
		if (c == C_ALL)
			sum->all = st;
		else if (c == C_SMALL)
			sum->small = st;
		else if (c == C_LARGE)
			sum->large = st;
		else
			sum->bucket[c - C_B0] = st;
	}
	free(fct);
	free(slow);
	for (uint32_t p = 0; p < s->n_ports; p++) {
		sum->drops += s->ports[p].st.drops;
		sum->ecn_marks += s->ports[p].st.ecn_marks;
	}
	sum->drops += s->drops_noroute;
	sum->ecn_masked = s->ecn_masked;
	for (uint32_t i = 0; i < s->n_flows; i++) {
		sum->retransmits += s->flows[i].rec.retransmits;
		sum->timeouts += s->flows[i].rec.timeouts;
	}
	sum->events = s->events;
	sum->sim_ns = s->now_ns;
	return 0;
}

int iod_sim_write_flows_csv(const struct iod_sim *s, FILE *f)
{
	fprintf(f, "id,src,dst,size_bytes,start_ns,fct_ns,ideal_ns,slowdown,done,retransmits,"
	           "timeouts\n");
	for (uint32_t i = 0; i < s->n_flows; i++) {
		const struct iod_sim_flow_rec *r = &s->flows[i].rec;
		fprintf(f,
		        "%u,%s,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.4f,%d,%u,%u\n",
		        r->id, s->names[s->hosts[r->src]], s->names[s->hosts[r->dst]],
		        r->size_bytes, r->start_ns, r->fct_ns, r->ideal_ns,
		        r->done ? (double)r->fct_ns / (double)r->ideal_ns : 0.0, r->done,
		        r->retransmits, r->timeouts);
	}
	return ferror(f) ? -EIO : 0;
}

static json_t *stats_json(const struct iod_sim_fct_stats *st)
{
	return json_pack("{s:i, s:f, s:f, s:f, s:f}", "flows", (json_int_t)st->n, "fct_avg_us",
	                 st->fct_avg_us, "fct_p99_us", st->fct_p99_us, "slowdown_avg", st->slow_avg,
	                 "slowdown_p99", st->slow_p99);
}

json_t *iod_sim_summary_json(const struct iod_sim_summary *sum)
{
	json_t *o = json_object(), *b = json_object();
	json_object_set_new(o, "flows", json_integer(sum->flows));
	json_object_set_new(o, "flows_done", json_integer(sum->done));
	json_object_set_new(o, "all", stats_json(&sum->all));
	json_object_set_new(o, "small_lt_100KB", stats_json(&sum->small));
	json_object_set_new(o, "large_gt_10MB", stats_json(&sum->large));
	for (unsigned i = 0; i < IOD_SIM_BUCKETS; i++)
		json_object_set_new(b, iod_sim_bucket_names[i], stats_json(&sum->bucket[i]));
	json_object_set_new(o, "buckets", b);
	json_object_set_new(o, "drops", json_integer((json_int_t)sum->drops));
	json_object_set_new(o, "ecn_marks", json_integer((json_int_t)sum->ecn_marks));
	json_object_set_new(o, "retransmits", json_integer((json_int_t)sum->retransmits));
	json_object_set_new(o, "timeouts", json_integer((json_int_t)sum->timeouts));
	json_object_set_new(o, "events", json_integer((json_int_t)sum->events));
	json_object_set_new(o, "sim_ns", json_integer((json_int_t)sum->sim_ns));
	return o;
}

json_t *iod_sim_flows_json(const struct iod_sim *s)
{
	json_t *a = json_array();
	for (uint32_t i = 0; i < s->n_flows; i++) {
		const struct iod_sim_flow_rec *r = &s->flows[i].rec;
		json_array_append_new(
		    a,
		    json_pack("{s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:f, s:b}", "id",
		              (json_int_t)r->id, "src", s->names[s->hosts[r->src]], "dst",
		              s->names[s->hosts[r->dst]], "size_bytes", (json_int_t)r->size_bytes,
		              "start_ns", (json_int_t)r->start_ns, "fct_ns", (json_int_t)r->fct_ns,
		              "ideal_ns", (json_int_t)r->ideal_ns, "slowdown",
		              r->done ? (double)r->fct_ns / (double)r->ideal_ns : 0.0, "done",
		              r->done));
	}
	return a;
}
