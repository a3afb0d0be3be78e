/*
 * job.c: the whole-cluster simulator's job files and scenario files.
 *
 * Both are YAML read through the one loader (src/base/yaml.c), so every
 * node keeps its line and column and every error names file:line:col. A job
 * file is one mapping (name, model, precision, gpus, gpus_per_replica,
 * batch, steps or epochs, dp/tp/pp, checkpoint_every); a scenario wraps a
 * job with the cluster, scripted faults, the seed count and the published
 * claim to print beside the results (docs/simulation.md). Unknown keys are
 * errors with a did-you-mean, never ignored.
 *
 * Pure: text in, structs out; no I/O, no clock.
 */
#include "iod/sim_cluster.h"
#include "iod/state.h"
#include "iod/yaml.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void iod_simc_job_default(struct iod_simc_job *j)
{
	memset(j, 0, sizeof(*j));
	snprintf(j->name, sizeof(j->name), "train");
	snprintf(j->model, sizeof(j->model), "resnet50");
	j->prec = IOD_SIMC_AMP;
	j->gpus = 16;
	j->epochs = 1;
	j->tp = j->pp = 1;
	j->ckpt_every_steps = 500;
}

int iod_simc_job_check(const struct iod_simc_job *j, struct iod_err *e)
{
	if (!iod_simc_model_find(j->model))
		return iod_err_set(e, -EINVAL, "job %s: unknown model \"%s\" (models: resnet50)",
		                   j->name, j->model);
	if (j->gpus == 0 || j->gpus > IOD_SIMC_JOB_GPUS_MAX)
		return iod_err_set(e, -EINVAL, "job %s: gpus must be 1..%d (got %u)", j->name,
		                   IOD_SIMC_JOB_GPUS_MAX, j->gpus);
	if (j->dp && j->dp != j->gpus)
		return iod_err_set(e, -EINVAL,
		                   "job %s: dp %u != gpus %u: only pure data parallelism is "
		                   "modelled (tp = pp = 1)",
		                   j->name, j->dp, j->gpus);
	if (j->tp > 1 || j->pp > 1)
		return iod_err_set(e, -EINVAL,
		                   "job %s: tensor/pipeline parallelism (tp %u, pp %u) is not "
		                   "modelled yet; use tp: 1, pp: 1",
		                   j->name, j->tp, j->pp);
	if (j->gpus_per_replica && j->gpus % j->gpus_per_replica)
		return iod_err_set(e, -EINVAL,
		                   "job %s: gpus %u is not a multiple of gpus_per_replica %u",
		                   j->name, j->gpus, j->gpus_per_replica);
	if (!j->steps && !(j->epochs > 0))
		return iod_err_set(e, -EINVAL, "job %s: give steps or epochs > 0", j->name);
	return 0;
}

/* ---- YAML helpers ----------------------------------------------------------- */

struct ytree {
	struct iod_arena arena; /* owns the nodes */
	const char *file;       /* name for messages */
	struct iod_err *e;      /* the first problem */
	int problems;           /* reported by the YAML layer */
};

static void ydiag(void *ctx, uint32_t line, uint32_t col, const char *msg)
{
	struct ytree *y = ctx;
	if (y->problems++)
		return;
	iod_err_set(y->e, -EINVAL, "%s:%u:%u: %s", y->file, line, col, msg);
}

static int yerr(const struct ytree *y, const struct iod_yaml_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int yerr(const struct ytree *y, const struct iod_yaml_node *n, const char *fmt, ...)
{
	char msg[IOD_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return iod_err_set(y->e, -EINVAL, "%s:%u:%u: %s", y->file, n->line, n->col, msg);
}

/* Every key of m must be in allowed (NULL-terminated). */
static int ykeys(const struct ytree *y, const struct iod_yaml_node *m, const char *const *allowed,
                 const char *what)
{
	size_t n = 0;
	if (m->kind != IOD_YAML_MAP)
		return yerr(y, m, "%s must be a mapping", what);
	while (allowed[n])
		n++;
	for (const struct iod_yaml_node *k = m->first; k && k->next; k = k->next->next) {
		bool ok = false;
		if (k->kind != IOD_YAML_SCALAR)
			return yerr(y, k, "%s: keys must be plain words", what);
		for (size_t i = 0; i < n; i++)
			ok |= !strcmp(allowed[i], k->str);
		if (!ok) {
			const char *s = iod_suggest(k->str, allowed, n);
			return yerr(y, k, "%s: unknown key \"%s\"%s%s%s", what, k->str,
			            s ? "; did you mean \"" : "", s ? s : "", s ? "\"?" : "");
		}
	}
	return 0;
}

/* The scalar at key (NULL when absent); an error when it is not a scalar. */
static int yget(const struct ytree *y, const struct iod_yaml_node *m, const char *key,
                const struct iod_yaml_node **out)
{
	const struct iod_yaml_node *v = iod_yaml_map_get(m, key);
	*out = NULL;
	if (!v)
		return 0;
	if (v->kind != IOD_YAML_SCALAR)
		return yerr(y, v, "%s must be a single value", key);
	*out = v;
	return 0;
}

static int yu64(const struct ytree *y, const struct iod_yaml_node *m, const char *key, uint64_t max,
                uint64_t *out)
{
	const struct iod_yaml_node *v;
	int rc = yget(y, m, key, &v);
	if (rc || !v)
		return rc;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v->str, &end, 10);
	if (errno || end == v->str || *end || v->str[0] == '-' || x > max)
		return yerr(y, v, "%s: \"%s\" is not a whole number in 0..%llu", key, v->str,
		            (unsigned long long)max);
	*out = x;
	return 0;
}

static int yu32(const struct ytree *y, const struct iod_yaml_node *m, const char *key, uint32_t max,
                uint32_t *out)
{
	uint64_t x = *out;
	int rc = yu64(y, m, key, max, &x);
	if (!rc)
		*out = (uint32_t)x;
	return rc;
}

static int ydouble(const struct ytree *y, const struct iod_yaml_node *m, const char *key,
                   double max, double *out)
{
	const struct iod_yaml_node *v;
	int rc = yget(y, m, key, &v);
	if (rc || !v)
		return rc;
	char *end;
	double x = strtod(v->str, &end);
	if (end == v->str || *end || !isfinite(x) || x < 0 || x > max)
		return yerr(y, v, "%s: \"%s\" is not a number in 0..%g", key, v->str, max);
	*out = x;
	return 0;
}

static int ystr(const struct ytree *y, const struct iod_yaml_node *m, const char *key, char *out,
                size_t cap)
{
	const struct iod_yaml_node *v;
	int rc = yget(y, m, key, &v);
	if (rc || !v)
		return rc;
	if (v->len == 0 || v->len >= cap)
		return yerr(y, v, "%s: must be 1..%zu characters", key, cap - 1);
	memcpy(out, v->str, v->len + 1);
	return 0;
}

static int ydur(const struct ytree *y, const struct iod_yaml_node *m, const char *key,
                uint64_t *out)
{
	const struct iod_yaml_node *v;
	struct iod_err e2 = {0};
	int rc = yget(y, m, key, &v);
	if (rc || !v)
		return rc;
	if (iod_parse_duration(v->str, out, &e2))
		return yerr(y, v, "%s: %s", key, e2.msg);
	return 0;
}

static int parse_job(const struct ytree *y, const struct iod_yaml_node *m, struct iod_simc_job *j)
{
	static const char *const keys[] = {
	    "name",   "model", "precision", "gpus", "gpus_per_replica", "batch", "steps",
	    "epochs", "dp",    "tp",        "pp",   "checkpoint_every", NULL};
	const struct iod_yaml_node *v;
	int rc = ykeys(y, m, keys, "job");
	if (!rc)
		rc = ystr(y, m, "name", j->name, sizeof(j->name));
	if (!rc && !iod_state_name_valid(j->name))
		rc = yerr(y, iod_yaml_map_get(m, "name") ? iod_yaml_map_get(m, "name") : m,
		          "name: \"%s\" must be letters, digits, '-' or '.'", j->name);
	if (!rc)
		rc = ystr(y, m, "model", j->model, sizeof(j->model));
	if (!rc && iod_yaml_map_get(m, "model") && !iod_simc_model_find(j->model))
		rc = yerr(y, iod_yaml_map_get(m, "model"),
		          "model: unknown \"%s\" (models: resnet50)", j->model);
	if (!rc && !(rc = yget(y, m, "precision", &v)) && v &&
	    iod_simc_precision_parse(v->str, &j->prec))
		rc = yerr(y, v, "precision: \"%s\" is not amp, tf32 or fp32", v->str);
	if (!rc)
		rc = yu32(y, m, "gpus", IOD_SIMC_JOB_GPUS_MAX, &j->gpus);
	if (!rc)
		rc = yu32(y, m, "gpus_per_replica", 64, &j->gpus_per_replica);
	if (!rc)
		rc = yu32(y, m, "batch", 1u << 20, &j->batch_per_gpu);
	if (!rc && iod_yaml_map_get(m, "steps")) {
		rc = yu64(y, m, "steps", 1ull << 40, &j->steps);
		j->epochs = 0;
	}
	if (!rc && iod_yaml_map_get(m, "epochs")) {
		rc = ydouble(y, m, "epochs", 1e6, &j->epochs);
		j->steps = 0;
	}
	if (!rc)
		rc = yu32(y, m, "dp", IOD_SIMC_JOB_GPUS_MAX, &j->dp);
	if (!rc)
		rc = yu32(y, m, "tp", 1024, &j->tp);
	if (!rc)
		rc = yu32(y, m, "pp", 1024, &j->pp);
	if (!rc)
		rc = yu64(y, m, "checkpoint_every", 1ull << 40, &j->ckpt_every_steps);
	if (!rc && iod_yaml_map_get(m, "steps") && iod_yaml_map_get(m, "epochs"))
		rc = yerr(y, iod_yaml_map_get(m, "epochs"), "give steps or epochs, not both");
	if (!rc && iod_simc_job_check(j, y->e))
		rc = yerr(y, m, "%s", y->e->msg);
	return rc;
}

static int ytree_parse(struct ytree *y, const char *text, size_t len, const char *file,
                       const char *what, struct iod_err *e, struct iod_yaml_node **root)
{
	const struct iod_yaml_opts o = {.what = what, .diag = ydiag, .ctx = y};
	y->file = file ? file : what;
	y->e = e;
	iod_arena_init(&y->arena, 16 * 1024, 0);
	int rc = iod_yaml_parse(&y->arena, text, len, &o, root);
	if (rc) {
		if (e && !y->problems)
			iod_err_set(e, rc, "%s: cannot parse", y->file);
		return rc;
	}
	if (!*root)
		return iod_err_set(e, -EINVAL, "%s: empty %s file", y->file, what);
	return 0;
}

int iod_simc_job_parse_yaml(struct iod_simc_job *j, const char *text, size_t len, const char *file,
                            struct iod_err *e)
{
	struct ytree y = {0};
	struct iod_yaml_node *root = NULL;
	struct iod_simc_job tmp = *j;
	int rc = ytree_parse(&y, text, len, file, "job", e, &root);
	if (!rc)
		rc = parse_job(&y, root, &tmp);
	if (!rc)
		*j = tmp;
	iod_arena_free(&y.arena);
	return rc;
}

/* ---- scenarios -------------------------------------------------------------- */

static int parse_claim_side(const struct ytree *y, const struct iod_yaml_node *m,
                            struct iod_simc_claims *c, int side)
{
	static const char *const keys[] = {"task_min", "gpu_util_pct", "net_gbps", "recovery_s",
	                                   NULL};
	int rc = ykeys(y, m, keys, "claim");
	if (!rc)
		rc = ydouble(y, m, "task_min", 1e9, &c->task_min[side]);
	if (!rc)
		rc = ydouble(y, m, "gpu_util_pct", 100, &c->gpu_util_pct[side]);
	if (!rc)
		rc = ydouble(y, m, "net_gbps", 1e6, &c->net_gbps[side]);
	if (!rc)
		rc = ydouble(y, m, "recovery_s", 1e9, &c->recovery_s[side]);
	return rc;
}

static int parse_faults(const struct ytree *y, const struct iod_yaml_node *seq,
                        struct iod_simc_config *c)
{
	static const char *const keys[] = {"at", "kind", "node", "gpu", "damage", NULL};
	if (seq->kind != IOD_YAML_SEQ)
		return yerr(y, seq, "faults must be a list");
	c->faults_n = 0;
	for (const struct iod_yaml_node *f = seq->first; f; f = f->next) {
		const struct iod_yaml_node *v;
		struct iod_simc_fault *x;
		int rc;
		if (c->faults_n >= IOD_SIMC_FAULTS_MAX)
			return yerr(y, f, "more than %d faults (IOD_SIMC_FAULTS_MAX)",
			            IOD_SIMC_FAULTS_MAX);
		x = &c->faults[c->faults_n];
		memset(x, 0, sizeof(*x));
		if ((rc = ykeys(y, f, keys, "fault")) || (rc = ydur(y, f, "at", &x->at_ns)) ||
		    (rc = yu32(y, f, "node", IOD_SIMC_NODES_MAX - 1, &x->node)) ||
		    (rc = yu32(y, f, "gpu", 63, &x->gpu)) || (rc = yget(y, f, "kind", &v)))
			return rc;
		if (!iod_yaml_map_get(f, "at"))
			return yerr(y, f, "fault: \"at\" is required (e.g. at: 30m)");
		if (!v)
			x->kind = IOD_SIMC_FAULT_GPU;
		else if (iod_simc_fault_parse(v->str, &x->kind))
			return yerr(
			    y, v,
			    "kind: \"%s\" is not gpu, node, server, leader, link, nic or disk",
			    v->str);
		if ((rc = yget(y, f, "damage", &v)))
			return rc;
		enum iod_simdisk_damage dmg = IOD_SIMDISK_FLIP;
		if (v && (x->kind != IOD_SIMC_FAULT_DISK || iod_simdisk_damage_parse(v->str, &dmg)))
			return yerr(y, v,
			            "damage: \"%s\" is not flip, torn, zero, missing or garbage "
			            "(and only for kind: disk)",
			            v->str);
		x->damage = (uint32_t)dmg;
		c->faults_n++;
	}
	return 0;
}

int iod_simc_scenario_parse_yaml(struct iod_simc_scenario *sc, const char *text, size_t len,
                                 const char *file, struct iod_err *e)
{
	static const char *const keys[] = {"name",  "cluster", "job", "faults",
	                                   "seeds", "claim",   NULL};
	static const char *const ckeys[] = {"nodes", "gpus_per_node", "node_model", "rack_nodes",
	                                    NULL};
	static const char *const claimkeys[] = {"source", "iod", "k8s", NULL};
	struct ytree y = {0};
	struct iod_yaml_node *root = NULL;
	struct iod_simc_scenario *t = malloc(sizeof(*t));
	const struct iod_yaml_node *m;
	int rc;
	if (!t)
		return iod_err_set(e, -ENOMEM, "out of memory");
	*t = *sc;
	rc = ytree_parse(&y, text, len, file, "scenario", e, &root);
	if (!rc)
		rc = ykeys(&y, root, keys, "scenario");
	if (!rc)
		rc = ystr(&y, root, "name", t->name, sizeof(t->name));
	if (!rc && (m = iod_yaml_map_get(root, "cluster"))) {
		rc = ykeys(&y, m, ckeys, "cluster");
		if (!rc)
			rc = yu32(&y, m, "nodes", IOD_SIMC_NODES_MAX, &t->cfg.nodes);
		if (!rc)
			rc = yu32(&y, m, "gpus_per_node", 64, &t->cfg.gpus_per_node);
		if (!rc)
			rc =
			    ystr(&y, m, "node_model", t->cfg.node_model, sizeof(t->cfg.node_model));
		if (!rc)
			rc = yu32(&y, m, "rack_nodes", IOD_SIMC_NODES_MAX, &t->cfg.rack_nodes);
		if (!rc && t->cfg.rack_nodes == 0)
			rc = yerr(&y, m, "cluster: rack_nodes must be at least 1");
		if (!rc && iod_yaml_map_get(m, "node_model") &&
		    !iod_yaml_map_get(m, "gpus_per_node"))
			t->cfg.gpus_per_node = 0; /* the model's */
		if (!rc && t->cfg.nodes == 0)
			rc = yerr(&y, m, "cluster: nodes must be at least 1");
	}
	if (!rc && (m = iod_yaml_map_get(root, "job")))
		rc = parse_job(&y, m, &t->cfg.job);
	if (!rc && (m = iod_yaml_map_get(root, "faults")))
		rc = parse_faults(&y, m, &t->cfg);
	if (!rc)
		rc = yu32(&y, root, "seeds", 10000, &t->seeds);
	if (!rc && (m = iod_yaml_map_get(root, "claim"))) {
		rc = ykeys(&y, m, claimkeys, "claim");
		if (!rc)
			rc = ystr(&y, m, "source", t->claims.source, sizeof(t->claims.source));
		if (!rc && iod_yaml_map_get(m, "iod"))
			rc = parse_claim_side(&y, iod_yaml_map_get(m, "iod"), &t->claims, 0);
		if (!rc && iod_yaml_map_get(m, "k8s"))
			rc = parse_claim_side(&y, iod_yaml_map_get(m, "k8s"), &t->claims, 1);
		t->claims.set = true;
	}
	for (uint32_t i = 0; !rc && i < t->cfg.faults_n; i++)
		if (t->cfg.faults[i].kind <= IOD_SIMC_FAULT_NODE &&
		    t->cfg.faults[i].node >= t->cfg.nodes)
			rc = iod_err_set(e, -EINVAL,
			                 "%s: fault %u names node %u; the cluster has %u", y.file,
			                 i, t->cfg.faults[i].node, t->cfg.nodes);
	if (!rc)
		*sc = *t;
	iod_arena_free(&y.arena);
	free(t);
	return rc;
}

/* ---- ASTRA-sim text workloads ----------------------------------------------- */

/* The 12 fields of a layer line, for messages. */
static const char *const astra_fields[12] = {"layer name",
                                             "reserved",
                                             "forward compute",
                                             "forward comm type",
                                             "forward comm size",
                                             "input-gradient compute",
                                             "input-gradient comm type",
                                             "input-gradient comm size",
                                             "weight-gradient compute",
                                             "weight-gradient comm type",
                                             "weight-gradient comm size",
                                             "update delay"};

/* One line of text: [p, eol), *next past its newline. */
static void astra_line(const char *p, const char *end, const char **eol, const char **next)
{
	const char *q = memchr(p, '\n', (size_t)(end - p));
	*eol = q ? q : end;
	*next = q ? q + 1 : end;
}

/* Splits [p, eol) at blanks into at most max tokens (NUL-terminated copies
 * in buf); returns the count, or max + 1 when there are more. */
static uint32_t astra_split(const char *p, const char *eol, char (*tok)[64], uint32_t max,
                            bool *too_long)
{
	uint32_t n = 0;
	*too_long = false;
	while (p < eol) {
		while (p < eol && (*p == ' ' || *p == '\t' || *p == '\r'))
			p++;
		if (p >= eol)
			break;
		const char *b = p;
		while (p < eol && *p != ' ' && *p != '\t' && *p != '\r')
			p++;
		if (n >= max)
			return max + 1;
		size_t l = (size_t)(p - b);
		if (l >= 64) {
			*too_long = true;
			l = 63;
		}
		memcpy(tok[n], b, l);
		tok[n][l] = 0;
		n++;
	}
	return n;
}

static bool astra_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s[0] || s[0] == '-' || s[0] == '+')
		return false;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || *end || x > (1ull << 53))
		return false;
	*out = x;
	return true;
}

static bool astra_blank(const char *p, const char *eol)
{
	for (; p < eol; p++)
		if (*p != ' ' && *p != '\t' && *p != '\r')
			return false;
	return true;
}

int iod_simc_astra_parse(const char *text, size_t len, const char *file, struct iod_simc_astra *out,
                         struct iod_err *e)
{
	static const char *const known[] = {"DATA",
	                                    "MICRO",
	                                    "MODEL",
	                                    "HYBRID_DATA_MODEL",
	                                    "HYBRID_MODEL_DATA",
	                                    "HYBRID_CUSTOMIZED",
	                                    "HYBRID_TRANSFORMER",
	                                    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
	                                    "HYBRID_DLRM",
	                                    "HYBRID_DLRM_ENHANCED",
	                                    "DISTRIBUTED_INFERENCE",
	                                    NULL};
	const char *p = text, *end = text + len, *eol, *next;
	char tok[13][64];
	bool tl;
	uint32_t line = 0, n;
	uint64_t want = 0;
	struct iod_simc_astra a;
	const char *f = file ? file : "workload";
	memset(&a, 0, sizeof(a));
	if (memchr(text, 0, len))
		return iod_err_set(e, -EINVAL, "%s: a NUL byte: not a text workload", f);
	/* line 1: the parallelism */
	for (;;) {
		if (p >= end)
			return iod_err_set(e, -EINVAL,
			                   "%s: empty workload (line 1 names the "
			                   "parallelism, e.g. DATA)",
			                   f);
		astra_line(p, end, &eol, &next);
		line++;
		if (!astra_blank(p, eol))
			break;
		p = next;
	}
	n = astra_split(p, eol, tok, 1, &tl);
	if (n != 1 || tl)
		return iod_err_set(e, -EINVAL,
		                   "%s:%u: field 1 (parallelism): one word expected (DATA, "
		                   "HYBRID_..., MODEL)",
		                   f, line);
	size_t k = 0;
	while (known[k] && strcmp(known[k], tok[0]))
		k++;
	if (!known[k])
		return iod_err_set(e, -EINVAL,
		                   "%s:%u: field 1 (parallelism): \"%s\" is not an ASTRA-sim "
		                   "parallelism (DATA, MODEL, HYBRID_DATA_MODEL, ...)",
		                   f, line, tok[0]);
	if (strcmp(tok[0], "DATA"))
		return iod_err_set(
		    e, -EINVAL,
		    "%s:%u: field 1 (parallelism): \"%s\" is not modelled; only DATA "
		    "(tensor, pipeline and hybrid parallelism are not)",
		    f, line, tok[0]);
	snprintf(a.parallel, sizeof(a.parallel), "%s", tok[0]);
	p = next;
	/* line 2: the number of layers */
	if (p >= end)
		return iod_err_set(e, -EINVAL, "%s:%u: missing line 2 (the number of layers)", f,
		                   line + 1);
	astra_line(p, end, &eol, &next);
	line++;
	n = astra_split(p, eol, tok, 1, &tl);
	if (n != 1 || tl || !astra_u64(tok[0], &want) || want == 0 || want > 100000)
		return iod_err_set(e, -EINVAL,
		                   "%s:%u: field 1 (number of layers): a whole number in 1..100000 "
		                   "expected",
		                   f, line);
	p = next;
	/* the layers */
	while (p < end) {
		astra_line(p, end, &eol, &next);
		line++;
		if (astra_blank(p, eol)) {
			p = next;
			continue;
		}
		if (a.layers == want)
			return iod_err_set(e, -EINVAL,
			                   "%s:%u: more layer lines than the %llu line 2 gives", f,
			                   line, (unsigned long long)want);
		n = astra_split(p, eol, tok, 12, &tl);
		if (n != 12)
			return iod_err_set(
			    e, -EINVAL,
			    "%s:%u: %s%u fields; a layer line has 12 (name, reserved, "
			    "then compute, comm type, comm size for forward, input "
			    "gradient and weight gradient, then the update delay)",
			    f, line, n > 12 ? "more than " : "", n > 12 ? 12 : n);
		if (tl)
			return iod_err_set(e, -EINVAL, "%s:%u: a field of 64 characters or more", f,
			                   line);
		uint64_t v[12] = {0};
		for (uint32_t i = 2; i < 12; i++) {
			bool type = i == 3 || i == 6 || i == 9;
			if (type) {
				bool none = !strcmp(tok[i], "NONE"),
				     ar = !strcmp(tok[i], "ALLREDUCE");
				bool other = !strcmp(tok[i], "ALLGATHER") ||
				             !strcmp(tok[i], "ALLTOALL") ||
				             !strcmp(tok[i], "ALLTOALLV") ||
				             !strcmp(tok[i], "REDUCESCATTER");
				if (!none && !ar && !other)
					return iod_err_set(
					    e, -EINVAL,
					    "%s:%u: field %u (%s): \"%s\" is not a collective "
					    "(ALLREDUCE, ALLGATHER, ALLTOALL, REDUCESCATTER, NONE)",
					    f, line, i + 1, astra_fields[i], tok[i]);
				if (none || (ar && i == 9))
					continue;
				return iod_err_set(
				    e, -EINVAL,
				    "%s:%u: field %u (%s): %s is not modelled under DATA "
				    "parallelism (forward and input-gradient comm must be NONE, "
				    "weight-gradient comm ALLREDUCE or NONE)",
				    f, line, i + 1, astra_fields[i], tok[i]);
			}
			if (!astra_u64(tok[i], &v[i]))
				return iod_err_set(
				    e, -EINVAL,
				    "%s:%u: field %u (%s): \"%s\" is not a whole number", f, line,
				    i + 1, astra_fields[i], tok[i]);
		}
		/* the reserved field is an integer (ASTRA-sim's files hold -1) */
		char *rend;
		errno = 0;
		(void)strtoll(tok[1], &rend, 10);
		if (errno || *rend || rend == tok[1])
			return iod_err_set(e, -EINVAL,
			                   "%s:%u: field 2 (reserved): \"%s\" is not an integer", f,
			                   line, tok[1]);
		if (v[4] || v[7])
			return iod_err_set(e, -EINVAL,
			                   "%s:%u: field %u (%s): %llu bytes with comm type NONE",
			                   f, line, v[4] ? 5 : 8, astra_fields[v[4] ? 4 : 7],
			                   (unsigned long long)(v[4] ? v[4] : v[7]));
		if (!strcmp(tok[9], "NONE") && v[10])
			return iod_err_set(
			    e, -EINVAL,
			    "%s:%u: field 11 (weight-gradient comm size): %llu bytes "
			    "with comm type NONE",
			    f, line, (unsigned long long)v[10]);
		a.fwd_cycles += v[2];
		a.ig_cycles += v[5];
		a.wg_cycles += v[8];
		a.update_cycles += v[11];
		if (!strcmp(tok[9], "ALLREDUCE")) {
			a.allreduce_bytes += v[10];
			a.allreduce_layers++;
		}
		a.layers++;
		p = next;
	}
	if (a.layers != want)
		return iod_err_set(e, -EINVAL, "%s:%u: %u layer lines; line 2 gives %llu", f, line,
		                   a.layers, (unsigned long long)want);
	*out = a;
	return 0;
}

int iod_simc_job_apply_astra(struct iod_simc_job *j, const struct iod_simc_astra *a,
                             double cycle_ns, const char *name, struct iod_err *e)
{
	uint64_t cyc = a->fwd_cycles + a->ig_cycles + a->wg_cycles + a->update_cycles;
	if (!(cycle_ns > 0) || !isfinite(cycle_ns))
		return iod_err_set(e, -EINVAL, "cycle length must be > 0 ns");
	if (!cyc)
		return iod_err_set(e, -EINVAL, "%s: the workload has no compute (every time is 0)",
		                   name ? name : "workload");
	if (!a->allreduce_bytes)
		return iod_err_set(e, -EINVAL,
		                   "%s: no weight-gradient ALLREDUCE bytes: nothing for the "
		                   "data-parallel ring to reduce",
		                   name ? name : "workload");
	j->step_compute_s = (double)cyc * cycle_ns * 1e-9;
	j->grad_bytes = a->allreduce_bytes;
	snprintf(j->workload, sizeof(j->workload), "%s", name ? name : "astra");
	return 0;
}
