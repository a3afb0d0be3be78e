/*
 * format.c: the scheduler's results as a text table and as JSON.
 *
 * The JSON form of an explanation is what the control plane persists with a
 * placement and `iod explain` prints. Output depends only on the result and
 * the cluster (no clock, no addresses), so equal inputs give equal bytes.
 */
#include "internal.h"

#include <string.h>

static void cpus_text(const struct iod_bitmap *b, char *buf, size_t len)
{
	if (iod_bitmap_empty(b))
		snprintf(buf, len, "-");
	else if (iod_bitmap_format(b, buf, len) != 0)
		snprintf(buf, len, "(long)");
}

static const char *nic_name(const struct iod_sched_cluster *c, uint32_t node, int32_t nic)
{
	if (nic < 0)
		return "-";
	return c->shapes[c->nodes[node].shape].s.nics[nic].name;
}

/* "NIC8 (dpu, mlx5_8), FPGA0 (fpga)" for a placement's accelerators. */
static void accs_text(const struct iod_sched_cluster *c, uint32_t node, uint32_t mask, char *buf,
                      size_t len)
{
	const struct iod_sched_shape *sh = &c->shapes[c->nodes[node].shape].s;
	size_t off = 0;
	buf[0] = 0;
	for (uint32_t m = mask; m && off < len; m &= m - 1) {
		const struct iod_sched_acc *a = &sh->accs[__builtin_ctz(m)];
		int w = snprintf(buf + off, len - off, "%s%s (%s%s%s)", off ? ", " : "", a->name,
		                 iod_sched_acc_type_name(a->type), a->os_name[0] ? ", " : "",
		                 a->os_name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
}

json_t *iod_sched_accs_to_json(const struct iod_sched_cluster *c, uint32_t node, uint32_t mask)
{
	const struct iod_sched_shape *sh = &c->shapes[c->nodes[node].shape].s;
	json_t *a = json_array();
	for (uint32_t m = mask; m; m &= m - 1) {
		const struct iod_sched_acc *x = &sh->accs[__builtin_ctz(m)];
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s}", "name", x->name, "type",
		                                   iod_sched_acc_type_name(x->type), "os_name",
		                                   x->os_name, "pci", x->pci));
	}
	return a;
}

void iod_sched_mask_format(uint32_t mask, char *buf, size_t len)
{
	struct iod_bitmap b;
	iod_bitmap_zero(&b);
	for (unsigned k = 0; k < 32; k++)
		if (mask & (1u << k))
			iod_bitmap_set(&b, k);
	iod_bitmap_format(&b, buf, len);
}

uint32_t iod_sched_mask_parse(const char *list)
{
	struct iod_bitmap b;
	uint32_t m = 0;
	if (!list || iod_bitmap_parse(list, &b, NULL))
		return 0;
	for (unsigned k = 0; k < 32; k++)
		if (iod_bitmap_test(&b, k))
			m |= 1u << k;
	return m;
}

int iod_sched_result_format(const struct iod_sched_cluster *c, const struct iod_sched_result *r,
                            struct iod_buf *out)
{
	char gl[128], cl[256], mn[16], al[160];
	int rc = 0;
	if (r->placed_n) {
		rc |= iod_buf_printf(out, "%-24s %-16s %-28s %-16s %-5s %s\n", "REPLICA", "NODE",
		                     "GPUS", "CPUS", "MEM", "NIC");
		for (uint32_t i = 0; i < r->n; i++) {
			const struct iod_sched_placement *p = &r->p[i];
			if (!p->placed)
				continue;
			iod_sched_gpus_format(p->gpu_mask, gl, sizeof(gl));
			if (!p->gpu_mask)
				snprintf(gl, sizeof(gl), "-");
			cpus_text(&p->cpus, cl, sizeof(cl));
			if (iod_bitmap_empty(&p->cpus) && !iod_bitmap_empty(&p->cpu_affinity)) {
				/* no exclusive PUs: it shares its GPUs' NUMA-local ones */
				char aff[200];
				cpus_text(&p->cpu_affinity, aff, sizeof(aff));
				snprintf(cl, sizeof(cl), "%s shared", aff);
			}
			if (p->mem_numa >= 0)
				snprintf(mn, sizeof(mn), "numa%d", p->mem_numa);
			else
				snprintf(mn, sizeof(mn), "any");
			accs_text(c, p->node, p->acc_mask, al, sizeof(al));
			rc |= iod_buf_printf(out, "%-24s %-16s %-28s %-16s %-5s %s%s%s\n", p->name,
			                     iod_sched_node_name(c, p->node), gl, cl, mn,
			                     nic_name(c, p->node, p->nic), al[0] ? "  + " : "", al);
		}
	}
	if (r->unplaced_n) {
		rc |= iod_buf_printf(out, "%snot placed (%u of %u):\n", r->placed_n ? "\n" : "",
		                     r->unplaced_n, r->n);
		for (uint32_t i = 0; i < r->n; i++) {
			const struct iod_sched_placement *p = &r->p[i];
			if (!p->placed)
				rc |= iod_buf_printf(out, "  %s: %s\n", p->name, p->why);
		}
	}
	rc |= iod_buf_printf(out, "\n%u of %u replicas placed", r->placed_n, r->n);
	if (r->rolled_back)
		rc |= iod_buf_printf(out, " (strict deploy rolled back)");
	rc |= iod_buf_printf(out, "\n");
	for (uint32_t i = 0; i < r->svc_n; i++) {
		const struct iod_sched_service_result *s = &r->svc[i];
		rc |= iod_buf_printf(out, "  %-22s %u/%u%s%s\n", s->service, s->placed,
		                     s->requested, s->placed < s->requested ? "  " : "",
		                     s->placed < s->requested ? iod_sched_reason_name(s->reason)
		                                              : "");
	}
	return rc ? -ENOMEM : 0;
}

static json_t *gpus_json(uint32_t mask)
{
	json_t *a = json_array();
	for (uint32_t m = mask; m; m &= m - 1)
		json_array_append_new(a, json_integer(__builtin_ctz(m)));
	return a;
}

json_t *iod_sched_explain_to_json(const struct iod_sched_cluster *c,
                                  const struct iod_sched_explain *x)
{
	json_t *o = json_object();
	json_object_set_new(o, "evaluated", json_integer(x->evaluated));
	json_object_set_new(o, "feasible", json_integer(x->feasible));
	json_t *w = json_object();
	for (unsigned t = 0; t < IOD_SCHED_TERMS_N; t++)
		json_object_set_new(w, iod_sched_term_name(t), json_integer(x->weights.w[t]));
	json_object_set_new(o, "weights", w);
	json_t *a = json_array();
	for (uint32_t i = 0; i < x->cand_n; i++) {
		const struct iod_sched_candidate *cd = &x->cand[i];
		json_t *co = json_object();
		json_object_set_new(co, "node", json_string(iod_sched_node_name(c, cd->node)));
		json_object_set_new(co, "gpus", gpus_json(cd->gpu_mask));
		json_object_set_new(co, "mem_numa", json_integer(cd->mem_numa));
		json_t *t = json_object();
		for (unsigned k = 0; k < IOD_SCHED_TERMS_N; k++)
			json_object_set_new(t, iod_sched_term_name(k), json_integer(cd->terms[k]));
		json_object_set_new(co, "terms", t);
		json_object_set_new(co, "total", json_integer(cd->total));
		json_array_append_new(a, co);
	}
	json_object_set_new(o, "candidates", a);
	return o;
}

json_t *iod_sched_result_to_json(const struct iod_sched_cluster *c,
                                 const struct iod_sched_result *r)
{
	json_t *o = json_object();
	json_t *pl = json_array(), *un = json_array(), *sv = json_array();
	char cl[256];
	for (uint32_t i = 0; i < r->n; i++) {
		const struct iod_sched_placement *p = &r->p[i];
		json_t *e = json_object();
		json_object_set_new(e, "replica", json_string(p->name));
		json_object_set_new(e, "service", json_string(r->svc[p->request].service));
		json_object_set_new(e, "ordinal", json_integer(p->ordinal));
		if (p->placed) {
			json_object_set_new(e, "node",
			                    json_string(iod_sched_node_name(c, p->node)));
			json_object_set_new(e, "gpus", gpus_json(p->gpu_mask));
			if (p->acc_mask)
				json_object_set_new(
				    e, "accelerators",
				    iod_sched_accs_to_json(c, p->node, p->acc_mask));
			if (iod_bitmap_format(&p->cpus, cl, sizeof(cl)) != 0)
				cl[0] = 0;
			json_object_set_new(e, "cpus", json_string(cl));
			if (iod_bitmap_format(&p->cpu_affinity, cl, sizeof(cl)) != 0)
				cl[0] = 0;
			json_object_set_new(e, "cpu_affinity", json_string(cl));
			json_object_set_new(e, "mem_numa",
			                    p->mem_numa >= 0 ? json_integer(p->mem_numa)
			                                     : json_null());
			json_object_set_new(e, "nic",
			                    p->nic >= 0 ? json_string(nic_name(c, p->node, p->nic))
			                                : json_null());
			json_object_set_new(e, "explain",
			                    iod_sched_explain_to_json(c, &p->explain));
			json_array_append_new(pl, e);
		} else {
			json_object_set_new(e, "reason",
			                    json_string(iod_sched_reason_name(p->reason)));
			json_object_set_new(e, "message", json_string(p->why));
			json_array_append_new(un, e);
		}
	}
	for (uint32_t i = 0; i < r->svc_n; i++) {
		const struct iod_sched_service_result *s = &r->svc[i];
		json_t *e = json_object();
		json_object_set_new(e, "service", json_string(s->service));
		json_object_set_new(e, "requested", json_integer(s->requested));
		json_object_set_new(e, "placed", json_integer(s->placed));
		if (s->placed < s->requested) {
			json_object_set_new(e, "reason",
			                    json_string(iod_sched_reason_name(s->reason)));
			json_object_set_new(e, "message", json_string(s->why));
		}
		json_array_append_new(sv, e);
	}
	json_object_set_new(o, "placed", pl);
	json_object_set_new(o, "unplaced", un);
	json_object_set_new(o, "services", sv);
	json_object_set_new(o, "placed_n", json_integer(r->placed_n));
	json_object_set_new(o, "unplaced_n", json_integer(r->unplaced_n));
	json_object_set_new(o, "rolled_back", json_boolean(r->rolled_back));
	return o;
}

int iod_sched_explain_format_json(const json_t *x, struct iod_buf *out)
{
	const json_t *cands = json_object_get(x, "candidates");
	const json_t *w = json_object_get(x, "weights");
	uint64_t evaluated = 0, feasible = 0;
	int rc = 0;
	if (!json_is_array(cands) || !json_is_object(w) ||
	    iod_json_get_u64(x, "evaluated", &evaluated) ||
	    iod_json_get_u64(x, "feasible", &feasible))
		return -EINVAL;
	rc |= iod_buf_printf(out, "%llu nodes scored, %llu feasible; weights",
	                     (unsigned long long)evaluated, (unsigned long long)feasible);
	for (unsigned t = 0; t < IOD_SCHED_TERMS_N; t++) {
		const json_t *v = json_object_get(w, iod_sched_term_name(t));
		rc |= iod_buf_printf(out, " %s=%lld", iod_sched_term_name(t),
		                     json_is_integer(v) ? (long long)json_integer_value(v) : 0ll);
	}
	rc |= iod_buf_printf(out, "\n");
	size_t i;
	const json_t *cd;
	json_array_foreach(cands, i, cd)
	{
		const char *node = "?";
		const json_t *terms = json_object_get(cd, "terms");
		const json_t *gpus = json_object_get(cd, "gpus");
		const json_t *total = json_object_get(cd, "total");
		if (iod_json_get_str(cd, "node", &node) || !json_is_object(terms) ||
		    !json_is_array(gpus) || !json_is_integer(total))
			return -EINVAL;
		rc |= iod_buf_printf(out, "  %s %-12s total %-6lld", i == 0 ? "*" : " ", node,
		                     (long long)json_integer_value(total));
		for (unsigned t = 0; t < IOD_SCHED_TERMS_N; t++) {
			const json_t *v = json_object_get(terms, iod_sched_term_name(t));
			rc |= iod_buf_printf(out, " %s=%lld", iod_sched_term_name(t),
			                     json_is_integer(v) ? (long long)json_integer_value(v)
			                                        : 0ll);
		}
		rc |= iod_buf_printf(out, "  [");
		size_t j;
		const json_t *g;
		json_array_foreach(gpus, j, g)
		{
			rc |= iod_buf_printf(out, "%sGPU%lld", j ? ", " : "",
			                     json_is_integer(g) ? (long long)json_integer_value(g)
			                                        : -1ll);
		}
		rc |= iod_buf_printf(out, "]\n");
	}
	return rc ? -ENOMEM : 0;
}
