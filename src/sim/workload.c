/*
 * workload.c: what the simulated hosts send: flow sizes from a CDF,
 * Poisson arrivals for a target load, scripted flows, incast, and a ring
 * all-reduce collective.
 *
 * The two standard CDFs (web-search from DCTCP, SIGCOMM'10; data-mining from
 * VL2, SIGCOMM'09) are compiled in exactly as published and also shipped as
 * files in examples/workloads/. Every draw comes from the caller's iod_rng;
 * nothing here reads a clock.
 */
#include "internal.h"

#include <math.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char web_search_cdf[] = "0 0\n10000 15\n20000 20\n30000 30\n50000 40\n"
                                     "80000 53\n200000 60\n1000000 70\n2000000 80\n"
                                     "5000000 90\n10000000 97\n30000000 100\n";
static const char data_mining_cdf[] = "0 0\n180 .1\n216 .2\n560 .3\n900 .4\n1100 .5\n"
                                      "1870 .6\n3160 .7\n10000 .8\n400000 .9\n"
                                      "3160000 .95\n100000000 .98\n1000000000 1\n";

int iod_sim_cdf_parse(struct iod_sim_cdf *c, const char *text, const char *file, struct iod_err *e)
{
	const char *p = text;
	unsigned line = 0;

	memset(c, 0, sizeof(*c));
	iod_strlcpy(c->name, file ? file : "cdf", sizeof(c->name));
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char buf[256];
		line++;
		if (len >= sizeof(buf))
			return iod_err_set(e, -EINVAL, "%s:%u: line too long", c->name, line);
		memcpy(buf, p, len);
		buf[len] = 0;
		p += len + (eol ? 1 : 0);
		char *hash = strchr(buf, '#');
		if (hash)
			*hash = 0;
		char *s = buf;
		while (*s == ' ' || *s == '\t' || *s == '\r')
			s++;
		if (!*s)
			continue;
		char *end;
		double b = strtod(s, &end);
		if (end == s || !(b >= 0) || b > 1e15)
			return iod_err_set(e, -EINVAL, "%s:%u: want \"BYTES CDF\", got \"%s\"",
			                   c->name, line, s);
		char *s2 = end;
		double q = strtod(s2, &end);
		if (end == s2 || !(q >= 0))
			return iod_err_set(e, -EINVAL, "%s:%u: want \"BYTES CDF\", got \"%s\"",
			                   c->name, line, s);
		while (*end == ' ' || *end == '\t' || *end == '\r')
			end++;
		if (*end)
			return iod_err_set(e, -EINVAL, "%s:%u: unexpected \"%s\"", c->name, line,
			                   end);
		if (c->n >= IOD_SIM_CDF_POINTS_MAX)
			return iod_err_set(e, -E2BIG, "%s:%u: more than %d points", c->name, line,
			                   IOD_SIM_CDF_POINTS_MAX);
		if (c->n && ((uint64_t)b < c->bytes[c->n - 1] || q < c->p[c->n - 1]))
			return iod_err_set(e, -EINVAL,
			                   "%s:%u: sizes and CDF values must not decrease", c->name,
			                   line);
		c->bytes[c->n] = (uint64_t)b;
		c->p[c->n] = q;
		c->n++;
	}
	if (c->n < 2)
		return iod_err_set(e, -EINVAL, "%s: a CDF needs at least two points", c->name);
	double top = c->p[c->n - 1];
	if (top != 1.0 && top != 100.0)
		return iod_err_set(e, -EINVAL,
		                   "%s: the last CDF value must be 1 (or 100%%), not %g", c->name,
		                   top);
	for (uint32_t i = 0; i < c->n; i++)
		c->p[i] /= top;
	if (c->bytes[c->n - 1] == 0)
		return iod_err_set(e, -EINVAL, "%s: the largest size is 0 bytes", c->name);
	return 0;
}

int iod_sim_cdf_load(struct iod_sim_cdf *c, const char *name_or_path, struct iod_err *e)
{
	int rc;
	if (!strcmp(name_or_path, "web-search"))
		rc = iod_sim_cdf_parse(c, web_search_cdf, "web-search", e);
	else if (!strcmp(name_or_path, "data-mining"))
		rc = iod_sim_cdf_parse(c, data_mining_cdf, "data-mining", e);
	else {
		struct iod_buf b;
		iod_buf_init(&b);
		rc = iod_buf_read_file(&b, name_or_path, IOD_SIM_FILE_MAX, e);
		if (!rc) {
			const char *base = strrchr(name_or_path, '/');
			rc = iod_sim_cdf_parse(c, b.data, base ? base + 1 : name_or_path, e);
		} else {
			iod_err_wrap(e,
			             "workload \"%s\" is not web-search, data-mining or a CDF file",
			             name_or_path);
		}
		iod_buf_free(&b);
	}
	return rc;
}

double iod_sim_cdf_mean(const struct iod_sim_cdf *c)
{
	double m = 0;
	for (uint32_t i = 1; i < c->n; i++)
		m += (c->p[i] - c->p[i - 1]) * ((double)c->bytes[i] + (double)c->bytes[i - 1]) / 2;
	return m;
}

uint64_t iod_sim_cdf_sample(const struct iod_sim_cdf *c, struct iod_rng *r)
{
	double u = iod_rng_double(r);
	if (u < c->p[0]) /* mass at the first point (a CDF need not start at 0) */
		return c->bytes[0] ? c->bytes[0] : 1;
	for (uint32_t i = 1; i < c->n; i++) {
		if (u < c->p[i]) {
			double span = c->p[i] - c->p[i - 1];
			double f = span > 0 ? (u - c->p[i - 1]) / span : 0;
			double b = (double)c->bytes[i - 1] +
			           f * ((double)c->bytes[i] - (double)c->bytes[i - 1]);
			uint64_t v = (uint64_t)(b + 0.5);
			return v ? v : 1;
		}
	}
	return c->bytes[c->n - 1];
}

int iod_sim_workload_poisson(struct iod_sim *s, const struct iod_sim_cdf *c, double load,
                             uint64_t duration_ns, struct iod_rng *r, struct iod_err *e)
{
	double mean = iod_sim_cdf_mean(c);
	int added = 0, rc;

	if (!(load > 0) || load > 1.5)
		return iod_err_set(e, -EINVAL, "load %g: want a fraction in (0, 1.5]", load);
	if (s->n_hosts < 2)
		return iod_err_set(e, -EINVAL, "Poisson traffic needs at least two hosts");
	/* One independent stream per host, forked in host order: adding a
	 * host does not change the other hosts' draws. */
	for (uint32_t h = 0; h < s->n_hosts; h++) {
		struct iod_rng hr;
		iod_rng_fork(r, &hr);
		double rate_Bps = (double)iod_sim_host_rate_bps(s, h) / 8.0;
		double gap_ns = mean / (rate_Bps * load) * 1e9;
		double t = iod_rng_exp(&hr, gap_ns);
		while (t < (double)duration_ns) {
			uint32_t dst = (uint32_t)iod_rng_below(&hr, s->n_hosts - 1);
			if (dst >= h)
				dst++;
			uint64_t size = iod_sim_cdf_sample(c, &hr);
			if ((rc = iod_sim_flow_add(s, h, dst, size, (uint64_t)t, 0, NULL, e)))
				return rc;
			added++;
			t += iod_rng_exp(&hr, gap_ns);
		}
	}
	return added;
}

static int host_ref(const struct iod_sim *s, const char *tok, uint32_t *h)
{
	for (uint32_t i = 0; i < s->n_hosts; i++)
		if (!strcmp(s->names[s->hosts[i]], tok)) {
			*h = i;
			return 0;
		}
	char *end;
	unsigned long v = strtoul(tok, &end, 10);
	if (*end || end == tok || v >= s->n_hosts)
		return -ENOENT;
	*h = (uint32_t)v;
	return 0;
}

int iod_sim_workload_script(struct iod_sim *s, const char *text, const char *file,
                            struct iod_err *e)
{
	const char *p = text;
	unsigned line = 0;
	int added = 0, rc;

	file = file ? file : "<flows>";
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char buf[512], at[64], src[IOD_NAME_MAX], dst[IOD_NAME_MAX], size[64], extra[8];
		line++;
		if (len >= sizeof(buf))
			return iod_err_set(e, -EINVAL, "%s:%u: line too long", file, line);
		memcpy(buf, p, len);
		buf[len] = 0;
		p += len + (eol ? 1 : 0);
		char *hash = strchr(buf, '#');
		if (hash)
			*hash = 0;
		int n = sscanf(buf, "%63s %63s %63s %63s %7s", at, src, dst, size, extra);
		if (n <= 0)
			continue;
		if (n != 4)
			return iod_err_set(e, -EINVAL,
			                   "%s:%u: want \"AT SRC DST SIZE\" (e.g. \"0ms h0 h5 "
			                   "100MB\")",
			                   file, line);
		uint64_t at_ns, bytes;
		uint32_t hs, hd;
		struct iod_err sub = {0};
		if (iod_parse_duration(at, &at_ns, &sub) || iod_parse_size(size, &bytes, &sub))
			return iod_err_set(e, -EINVAL, "%s:%u: %s", file, line, sub.msg);
		if (host_ref(s, src, &hs) || host_ref(s, dst, &hd))
			return iod_err_set(e, -EINVAL, "%s:%u: unknown host \"%s\"", file, line,
			                   host_ref(s, src, &hs) ? src : dst);
		if ((rc = iod_sim_flow_add(s, hs, hd, bytes, at_ns, 0, NULL, &sub)))
			return iod_err_set(e, rc, "%s:%u: %s", file, line, sub.msg);
		added++;
	}
	return added;
}

int iod_sim_workload_incast(struct iod_sim *s, uint32_t n, uint64_t size_bytes, uint64_t at_ns,
                            struct iod_err *e)
{
	int rc;
	if (n < 1 || n >= s->n_hosts)
		return iod_err_set(e, -EINVAL, "incast of %u senders needs %u hosts, have %u", n,
		                   n + 1, s->n_hosts);
	for (uint32_t i = 1; i <= n; i++)
		if ((rc = iod_sim_flow_add(s, i, 0, size_bytes, at_ns, 0, NULL, e)))
			return rc;
	return (int)n;
}

/* ---- ring all-reduce --------------------------------------------------------- */

/*
 * Ring all-reduce (reduce-scatter then all-gather): 2(n-1) steps; in each,
 * rank i sends one chunk of S/n bytes to rank i+1. Rank i starts step k+1
 * when its step-k send is acknowledged and its step-k chunk from rank i-1
 * has arrived (chunks may arrive early: they are counted). Flow tags encode (step << 16 | rank) + 1.
 */
static int ar_send(struct iod_sim *s, struct iod_sim_allreduce *a, uint32_t rank, uint32_t step)
{
	uint64_t chunk = a->size_bytes / a->n;
	struct iod_err e = {0};
	if (!chunk)
		chunk = 1;
	return iod_sim_flow_add(s, rank, (rank + 1) % a->n, chunk, s->now_ns,
	                        ((step << 16) | rank) + 1, NULL, &e);
}

static void ar_done(void *ctx, struct iod_sim *s, uint32_t flow_id)
{
	struct iod_sim_allreduce *a = ctx;
	const struct iod_sim_flow_rec *f = iod_sim_flow(s, flow_id);
	if (!f->tag)
		return;
	uint32_t rank = (f->tag - 1) & 0xffff, step = (f->tag - 1) >> 16;
	uint32_t to = (rank + 1) % a->n;
	IOD_ASSERT(step == a->step[rank] && step >= a->step[to]);
	a->send_done[rank] = 1;
	a->recv_cnt[to]++;
	uint32_t cand[2] = {rank, to};
	for (int k = 0; k < 2; k++) {
		uint32_t r = cand[k];
		if (!a->send_done[r] || a->recv_cnt[r] <= a->step[r] ||
		    a->step[r] >= a->steps_total)
			continue;
		a->send_done[r] = 0;
		a->step[r]++;
		if (a->step[r] == a->steps_total) {
			if (++a->ranks_done == a->n)
				a->end_ns = s->now_ns;
			continue;
		}
		int rc = ar_send(s, a, r, a->step[r]);
		if (rc && !a->err)
			a->err = rc;
	}
}

int iod_sim_allreduce_start(struct iod_sim *s, struct iod_sim_allreduce *a, uint32_t n,
                            uint64_t size_bytes, uint64_t at_ns, struct iod_err *e)
{
	memset(a, 0, sizeof(*a));
	if (n < 2 || n > s->n_hosts || n > 65535)
		return iod_err_set(e, -EINVAL, "all-reduce among %u ranks needs 2..%u hosts", n,
		                   s->n_hosts);
	if (size_bytes < n)
		return iod_err_set(e, -EINVAL,
		                   "all-reduce of %" PRIu64 " bytes among %u ranks: "
		                   "need at least one byte per rank",
		                   size_bytes, n);
	a->n = n;
	a->size_bytes = size_bytes;
	a->steps_total = 2 * (n - 1);
	a->start_ns = at_ns;
	a->step = calloc(n, sizeof(*a->step));
	a->recv_cnt = calloc(n, sizeof(*a->recv_cnt));
	a->send_done = calloc(n, 1);
	if (!a->step || !a->recv_cnt || !a->send_done) {
		iod_sim_allreduce_free(a);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	iod_sim_on_flow_done(s, ar_done, a);
	uint64_t chunk = size_bytes / n;
	for (uint32_t r = 0; r < n; r++) {
		int rc =
		    iod_sim_flow_add(s, r, (r + 1) % n, chunk, at_ns, (0u << 16 | r) + 1, NULL, e);
		if (rc) {
			iod_sim_allreduce_free(a);
			return rc;
		}
	}
	return 0;
}

void iod_sim_allreduce_free(struct iod_sim_allreduce *a)
{
	free(a->step);
	free(a->recv_cnt);
	free(a->send_done);
	a->step = NULL;
	a->recv_cnt = NULL;
	a->send_done = NULL;
}

double iod_sim_allreduce_algbw_bps(const struct iod_sim_allreduce *a)
{
	if (!a->end_ns || a->end_ns <= a->start_ns)
		return 0;
	return (double)a->size_bytes * 8.0 * 1e9 / (double)(a->end_ns - a->start_ns);
}

double iod_sim_allreduce_busbw_bps(const struct iod_sim_allreduce *a)
{
	return iod_sim_allreduce_algbw_bps(a) * 2.0 * (a->n - 1) / a->n;
}
