/*
 * plan.c: chaos plans (include/iod/chaos.h): a YAML file in Chaos Mesh's
 * vocabulary (action, mode, value, selector, direction, duration,
 * schedule) read through the one YAML loader (src/base/yaml.c) into a
 * bounded struct, and the pure choice of which processes a step hits
 * (Chaos Mesh's modes: one, all, fixed, fixed-percent, random-max-percent)
 * from a seed, so that a plan and a seed replay the same faults.
 *
 * Every error names plan:line:col. It never reads a file or a clock: the
 * shell (src/chaos/run.c, cmd_chaos.c) hands it the text and the cluster.
 */
#include "iod/chaos.h"
#include "iod/state.h"
#include "iod/yaml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct pctx {
	struct iod_err *e;
	const char *name;
	bool failed;
};

static void ydiag(void *ctx, uint32_t line, uint32_t col, const char *msg)
{
	struct pctx *x = ctx;
	if (!x->failed)
		iod_err_set(x->e, -EINVAL, "%s:%u:%u: %s", x->name, line, col, msg);
	x->failed = true;
}

static int fail(struct pctx *x, const struct iod_yaml_node *n, const char *fmt, const char *a)
{
	char msg[IOD_ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), fmt, a);
	if (!x->failed)
		iod_err_set(x->e, -EINVAL, "%s:%u:%u: %s", x->name, n ? n->line : 0, n ? n->col : 0,
		            msg);
	x->failed = true;
	return -EINVAL;
}

static const char *scalar(struct pctx *x, const struct iod_yaml_node *n, const char *key)
{
	if (n->kind != IOD_YAML_SCALAR) {
		fail(x, n, "%s must be a single value", key);
		return NULL;
	}
	return n->str;
}

static const char *const mode_names[] = {"one", "all", "fixed", "fixed-percent",
                                         "random-max-percent"};

const char *iod_chaos_mode_name(enum iod_chaos_mode m)
{
	return (unsigned)m < IOD_ARRAY_LEN(mode_names) ? mode_names[m] : "?";
}

bool iod_chaos_step_link(const struct iod_chaos_step *s)
{
	return !strncmp(s->selector, "link/", 5);
}

bool iod_chaos_step_l7(const struct iod_chaos_step *s)
{
	return !strcmp(s->selector, "services") || !strncmp(s->selector, "service/", 8);
}

int iod_chaos_services_parse(const char *sel, char names[][IOD_NAME_MAX], uint32_t max,
                             struct iod_err *e)
{
	uint32_t n = 0;
	if (!strcmp(sel, "services"))
		return 0;
	for (const char *p = sel; *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		char one[IOD_NAME_MAX + 8];
		if (l < 9 || l >= sizeof(one) || strncmp(p, "service/", 8))
			return iod_err_set(
			    e, -EINVAL, "\"%.*s\": want service/NAME (a list of them, or services)",
			    (int)(l > 64 ? 64 : l), p);
		memcpy(one, p + 8, l - 8);
		one[l - 8] = 0;
		if (!iod_state_name_valid(one))
			return iod_err_set(e, -EINVAL, "service/%.64s: not a service name", one);
		if (n >= max)
			return iod_err_set(e, -E2BIG, "more than %u services in one selector", max);
		if (names)
			memcpy(names[n], one, l - 7);
		n++;
		p += l;
		if (*p == ',' && !*++p)
			return iod_err_set(e, -EINVAL, "a selector ends with a comma%s", "");
	}
	return (int)n;
}

static int services_parse(const char *sel, struct iod_err *e)
{
	return iod_chaos_services_parse(sel, NULL, IOD_CHAOS_MEMBERS_MAX, e);
}

static int parse_step(struct pctx *x, const struct iod_yaml_node *m, struct iod_chaos_step *s)
{
	struct iod_err e1 = {0};
	bool have_action = false, have_duration = false, have_value = false;
	memset(s, 0, sizeof(*s));
	snprintf(s->selector, sizeof(s->selector), "servers");
	s->line = m->line;
	s->col = m->col;
	if (m->kind != IOD_YAML_MAP)
		return fail(x, m, "a fault is a mapping (action, mode, selector, duration...)%s",
		            "");
	for (const struct iod_yaml_node *k = m->first; k && k->next; k = k->next->next) {
		const struct iod_yaml_node *v = k->next;
		if (k->kind != IOD_YAML_SCALAR)
			return fail(x, k, "a fault's keys are plain names%s", "");
		const char *key = k->str, *val = scalar(x, v, key);
		if (!val)
			return -EINVAL;
		if (!strcmp(key, "action")) {
			if (iod_chaos_action_parse(val, &s->action, &e1))
				return fail(x, v, "%s", e1.msg);
			have_action = true;
		} else if (!strcmp(key, "mode")) {
			size_t i;
			for (i = 0; i < IOD_ARRAY_LEN(mode_names); i++)
				if (!strcmp(val, mode_names[i]))
					break;
			if (i == IOD_ARRAY_LEN(mode_names))
				return fail(
				    x, v,
				    "unknown mode \"%.64s\": want one, all, fixed, fixed-percent "
				    "or random-max-percent",
				    val);
			s->mode = (enum iod_chaos_mode)i;
		} else if (!strcmp(key, "value")) {
			char *end = NULL;
			long n = strtol(val, &end, 10);
			if (!val[0] || *end || n < 1 || n > 100)
				return fail(x, v, "value \"%.32s\": want an integer from 1 to 100",
				            val);
			s->value = (uint32_t)n;
			have_value = true;
		} else if (!strcmp(key, "selector")) {
			struct iod_chaos_target t[IOD_CHAOS_MEMBERS_MAX];
			if (strlen(val) >= sizeof(s->selector))
				return fail(x, v, "selector \"%.64s\" is too long", val);
			if (!strcmp(val, "services") || !strncmp(val, "service/", 8)) {
				if (services_parse(val, &e1) < 0)
					return fail(x, v, "selector: %s", e1.msg);
			} else if (!strncmp(val, "link/", 5)) {
				if (iod_chaos_links_parse(val, NULL, NULL, IOD_CHAOS_MEMBERS_MAX,
				                          &e1) < 0)
					return fail(x, v, "selector: %s", e1.msg);
			} else if (strcmp(val, "servers") && strcmp(val, "nodes") &&
			           strcmp(val, "leader") &&
			           iod_chaos_target_list_parse(val, t, IOD_CHAOS_MEMBERS_MAX, &e1) <
			               0) {
				return fail(x, v,
				            "selector: %s (or servers, nodes, leader, services, "
				            "service/NAME,..., link/leafL-spineS,...)",
				            e1.msg);
			}
			snprintf(s->selector, sizeof(s->selector), "%s", val);
			s->sel_line = v->line;
			s->sel_col = v->col;
		} else if (!strcmp(key, "latency")) {
			uint64_t ms = 0;
			if (iod_chaos_duration_parse(val, &ms, &e1))
				return fail(x, v, "latency: %s", e1.msg);
			if (ms > IOD_CHAOS_LATENCY_MAX_MS)
				return fail(x, v, "latency \"%.32s\": at most 60s", val);
			s->latency_ms = (uint32_t)ms;
		} else if (!strcmp(key, "status")) {
			char *end = NULL;
			long n = strtol(val, &end, 10);
			if (!val[0] || *end || n < 200 || n > 599)
				return fail(x, v, "status \"%.32s\": want an HTTP status 200..599",
				            val);
			s->status = (uint32_t)n;
		} else if (!strcmp(key, "direction")) {
			if (iod_chaos_direction_parse(val, &s->dir, &e1))
				return fail(x, v, "%s", e1.msg);
		} else if (!strcmp(key, "duration")) {
			if (iod_chaos_duration_parse(val, &s->duration_ms, &e1))
				return fail(x, v, "%s", e1.msg);
			have_duration = true;
		} else if (!strcmp(key, "percent")) {
			if (iod_chaos_percent_parse(val, &s->percent, &e1))
				return fail(x, v, "%s", e1.msg);
		} else {
			return fail(x, k,
			            "unknown fault field \"%.64s\": want action, mode, value, "
			            "selector, direction, duration, percent, latency, status",
			            key);
		}
	}
	if (!have_action)
		return fail(x, m,
		            "a fault needs an action (partition, kill, pause, loss, delay, "
		            "abort, member)%s",
		            "");
	bool l7 = iod_chaos_step_l7(s);
	if (s->action == IOD_CHAOS_ACT_ABORT && !l7)
		return fail(x, m, "%s",
		            "abort answers a service's HTTP requests in the mesh: its selector is "
		            "services or service/NAME,...");
	if (l7 && s->action != IOD_CHAOS_ACT_DELAY && s->action != IOD_CHAOS_ACT_ABORT)
		return fail(x, m,
		            "a selector of services: the mesh injects only delay and abort into "
		            "a service's requests, not %s (select servers or nodes for it)",
		            iod_chaos_action_name(s->action));
	if (iod_chaos_step_link(s) && s->action != IOD_CHAOS_ACT_PARTITION &&
	    s->action != IOD_CHAOS_ACT_LOSS)
		return fail(x, m,
		            "a link selector: a link can be cut (partition) or made lossy (loss), "
		            "not %s (a delay cannot hold a link's packets here: docs/chaos.md)",
		            iod_chaos_action_name(s->action));
	if (s->action == IOD_CHAOS_ACT_DELAY && !s->latency_ms)
		return fail(x, m, "a delay fault needs a latency (10ms..60s)%s", "");
	if (s->action == IOD_CHAOS_ACT_ABORT && s->latency_ms)
		return fail(x, m, "an abort takes a status, not a latency%s", "");
	if (s->status && s->action != IOD_CHAOS_ACT_ABORT)
		return fail(x, m, "status is the answer of an abort, not of %s",
		            iod_chaos_action_name(s->action));
	if (s->action == IOD_CHAOS_ACT_ABORT && !s->status)
		s->status = 503;
	if (l7 && !s->percent)
		s->percent = 100; /* of the service's requests */
	if (!have_duration)
		return fail(x, m, "a fault needs a duration (10ms..24h)%s", "");
	if (s->action == IOD_CHAOS_ACT_LOSS && !s->percent)
		return fail(x, m, "a loss fault needs a percent (1..100)%s", "");
	if ((s->mode == IOD_CHAOS_MODE_FIXED || s->mode == IOD_CHAOS_MODE_FIXED_PERCENT ||
	     s->mode == IOD_CHAOS_MODE_RANDOM_MAX_PERCENT) &&
	    !have_value)
		return fail(x, m, "mode %s needs a value", iod_chaos_mode_name(s->mode));
	if (s->action == IOD_CHAOS_ACT_PARTITION && !strcmp(s->selector, "nodes"))
		return fail(x, m, "%s",
		            "a partition's selector names the cut-off side among the servers "
		            "(servers, leader or a list)");
	return 0;
}

int iod_chaos_plan_parse(const char *text, size_t len, const char *name, struct iod_chaos_plan *p,
                         struct iod_err *e)
{
	struct pctx x = {e, name ? name : "plan", false};
	struct iod_arena tree;
	struct iod_yaml_node *root = NULL;
	const struct iod_yaml_opts yo = {.what = "chaos plan", .diag = ydiag, .ctx = &x};
	struct iod_err e1 = {0};
	int rc;
	memset(p, 0, sizeof(*p));
	p->clients = 4;
	p->rate = 100;
	p->interval_ms = 3000;
	iod_arena_init(&tree, 16 * 1024, 0);
	rc = iod_yaml_parse(&tree, text, len, &yo, &root);
	if (rc) {
		if (!x.failed)
			iod_err_set(e, rc, "%s: cannot parse", x.name);
		goto out;
	}
	if (!root || root->kind != IOD_YAML_MAP) {
		rc = fail(&x, root, "a plan is a mapping with faults: [...]%s", "");
		goto out;
	}
	for (const struct iod_yaml_node *k = root->first; k && k->next; k = k->next->next) {
		const struct iod_yaml_node *v = k->next;
		const char *key = k->str;
		if (k->kind != IOD_YAML_SCALAR) {
			/* "? [a, b]": a complex key has no text (found by fuzz_chaos_plan) */
			rc = fail(&x, k, "a plan's keys are plain names%s", "");
			goto out;
		}
		if (!strcmp(key, "faults")) {
			if (v->kind != IOD_YAML_SEQ || !v->n) {
				rc = fail(&x, v, "faults must be a non-empty list%s", "");
				goto out;
			}
			for (const struct iod_yaml_node *i = v->first; i; i = i->next) {
				if (p->nsteps >= IOD_CHAOS_PLAN_STEPS_MAX) {
					rc = fail(&x, i, "more than %s faults in one plan",
					          "IOD_CHAOS_PLAN_STEPS_MAX (64)");
					goto out;
				}
				if ((rc = parse_step(&x, i, &p->steps[p->nsteps])))
					goto out;
				p->nsteps++;
			}
			continue;
		}
		const char *val = scalar(&x, v, key);
		char *end = NULL;
		if (!val) {
			rc = -EINVAL;
			goto out;
		}
		if (!strcmp(key, "workload")) {
			if (iod_chaos_workload_parse(val, &p->workload, &e1)) {
				rc = fail(&x, v, "%s", e1.msg);
				goto out;
			}
		} else if (!strcmp(key, "clients")) {
			long n = strtol(val, &end, 10);
			if (!val[0] || *end || n < 1 || n > IOD_CHAOS_CLIENTS_MAX) {
				rc = fail(&x, v, "clients \"%.32s\": want 1..64", val);
				goto out;
			}
			p->clients = (uint32_t)n;
		} else if (!strcmp(key, "rate")) {
			long n = strtol(val, &end, 10);
			if (!val[0] || *end || n < 0 || n > 100000) {
				rc = fail(&x, v, "rate \"%.32s\": want 0..100000 ops/s", val);
				goto out;
			}
			p->rate = (uint32_t)n;
		} else if (!strcmp(key, "duration")) {
			if (iod_chaos_duration_parse(val, &p->duration_ms, &e1)) {
				rc = fail(&x, v, "%s", e1.msg);
				goto out;
			}
		} else if (!strcmp(key, "interval")) {
			if (iod_chaos_duration_parse(val, &p->interval_ms, &e1)) {
				rc = fail(&x, v, "%s", e1.msg);
				goto out;
			}
		} else if (!strcmp(key, "seed")) {
			unsigned long long n = strtoull(val, &end, 10);
			if (!val[0] || *end || val[0] == '-') {
				rc =
				    fail(&x, v, "seed \"%.32s\": want a non-negative integer", val);
				goto out;
			}
			p->seed = n;
			p->has_seed = true;
		} else if (!strcmp(key, "schedule")) {
			if (!strcmp(val, "sequence"))
				p->random = false;
			else if (!strcmp(val, "random"))
				p->random = true;
			else {
				rc =
				    fail(&x, v, "schedule \"%.32s\": want sequence or random", val);
				goto out;
			}
		} else {
			rc = fail(&x, k,
			          "unknown plan field \"%.64s\": want workload, clients, rate, "
			          "duration, interval, seed, schedule, faults",
			          key);
			goto out;
		}
	}
	if (!p->nsteps) {
		rc = fail(&x, root, "a plan needs faults: [...]%s", "");
		goto out;
	}
	if (!p->duration_ms) {
		rc = fail(&x, root, "a plan needs a duration (the whole run)%s", "");
		goto out;
	}
out:
	iod_arena_free(&tree);
	if (rc && !x.failed)
		iod_err_set(e, rc, "%s: invalid plan", x.name);
	return rc ? -EINVAL : 0;
}

uint32_t iod_chaos_mode_count(enum iod_chaos_mode m, uint32_t value, uint32_t n, uint64_t draw)
{
	uint32_t k;
	if (!n)
		return 0;
	switch (m) {
	case IOD_CHAOS_MODE_ONE: k = 1; break;
	case IOD_CHAOS_MODE_ALL: k = n; break;
	case IOD_CHAOS_MODE_FIXED: k = value; break;
	case IOD_CHAOS_MODE_FIXED_PERCENT: k = (value * n + 99) / 100; break;
	case IOD_CHAOS_MODE_RANDOM_MAX_PERCENT: {
		uint32_t max = (value * n + 99) / 100;
		k = max ? 1 + (uint32_t)(draw % max) : 1;
		break;
	}
	default: k = 1;
	}
	if (k < 1)
		k = 1;
	return k > n ? n : k;
}

uint32_t iod_chaos_plan_pick(const struct iod_chaos_step *s, uint32_t n, uint64_t seed, bool *pick)
{
	struct iod_rng r;
	uint32_t perm[IOD_CHAOS_MEMBERS_MAX] = {0};
	iod_rng_seed(&r, seed);
	if (n > IOD_CHAOS_MEMBERS_MAX)
		n = IOD_CHAOS_MEMBERS_MAX;
	uint32_t k = iod_chaos_mode_count(s->mode, s->value, n, iod_rng_next(&r));
	for (uint32_t i = 0; i < n; i++) {
		perm[i] = i;
		pick[i] = false;
	}
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)iod_rng_below(&r, i), t = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = t;
	}
	for (uint32_t i = 0; i < k; i++)
		pick[perm[i]] = true;
	return k;
}
