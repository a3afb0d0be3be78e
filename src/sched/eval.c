/*
 * eval.c: filter and score one node for one request.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- filter and score one node ------------------------------------------ */

static bool labels_match(const struct node *n, const struct iod_sched_request *r)
{
	for (uint32_t i = 0; i < r->selector_n; i++) {
		bool hit = false;
		for (uint32_t j = 0; j < n->labels_n && !hit; j++)
			hit = !strcmp(n->labels[j].key, r->selector[i].key) &&
			      !strcmp(n->labels[j].value, r->selector[i].value);
		if (!hit)
			return false;
	}
	return true;
}

static uint32_t cpus_in(const struct node *n, const struct shape *sh, uint8_t mask)
{
	uint32_t sum = 0;
	for (uint32_t i = 0; i < sh->s.numa_n; i++)
		if (mask >> i & 1)
			sum += n->numa_cpu_free[i];
	return sum;
}

/* NUMA node in mask with the most free memory (lowest id on ties), -1 none. */
static int32_t mem_best_in(const struct node *n, const struct shape *sh, uint8_t mask)
{
	int32_t best = -1;
	for (uint32_t i = 0; i < sh->s.numa_n; i++)
		if ((mask >> i & 1) && (best < 0 || n->numa_mem_free[i] > n->numa_mem_free[best]))
			best = (int32_t)i;
	return best;
}

/* GPUs of a shape with at least mem bytes each (all when mem is 0). */
static uint32_t gpus_with_mem(const struct shape *sh, uint64_t mem)
{
	uint32_t m = 0;
	if (!mem)
		return (uint32_t)((1ull << sh->s.gpus_n) - 1);
	for (uint32_t g = 0; g < sh->s.gpus_n; g++)
		if (sh->s.gpu_mem_bytes[g] >= mem)
			m |= 1u << g;
	return m;
}

/* Free accelerators of a node that serve request r (type and memory). */
static uint32_t accs_usable(const struct node *n, const struct shape *sh,
                            const struct iod_sched_request *r)
{
	uint32_t m = 0;
	for (uint32_t i = 0; i < sh->s.accs_n; i++)
		if ((n->acc_free >> i & 1) && sh->s.accs[i].type == r->acc_type &&
		    (!r->acc_mem_bytes || sh->s.accs[i].mem_bytes >= r->acc_mem_bytes))
			m |= 1u << i;
	return m;
}

/*
 * Choose r->accs accelerators from `usable` for a class on numa_mask: those
 * on its NUMA nodes first (then unknown NUMA), lowest index first; under a
 * strict policy only those. Returns the mask, 0 when too few.
 */
static uint32_t accs_pick(const struct shape *sh, uint32_t usable, uint8_t numa_mask, bool strict,
                          uint32_t want)
{
	uint32_t got = 0, n = 0;
	for (int pass = 0; pass < 3 && n < want; pass++) {
		for (uint32_t i = 0; i < sh->s.accs_n && n < want; i++) {
			if (!(usable >> i & 1) || (got >> i & 1))
				continue;
			int32_t numa = sh->s.accs[i].numa;
			bool local = numa >= 0 && (numa_mask >> numa & 1);
			if ((pass == 0 && !local) || (pass == 1 && numa >= 0) ||
			    (pass == 2 && (strict || local)))
				continue;
			got |= 1u << i;
			n++;
		}
	}
	return n == want ? got : 0;
}

/*
 * Choose the NIC for a class: the memoized nearest one when it has the
 * bandwidth, else the best other with the bandwidth (within allowed NUMA
 * nodes when the policy restricts). Returns the NIC or -1; *aff as in
 * struct memo_class.
 */
static int32_t nic_pick(const struct node *n, const struct shape *sh, uint32_t set,
                        uint8_t numa_mask, int8_t memo_nic, uint8_t memo_aff, uint64_t bw,
                        bool restrict_numa, uint8_t *aff)
{
	if (sh->s.nics_n == 0)
		return -1;
	if (memo_nic >= 0 && n->nic_free[memo_nic] >= bw && (!restrict_numa || memo_aff >= 1)) {
		*aff = memo_aff;
		return memo_nic;
	}
	int32_t best = -1;
	int best_aff = -1;
	for (uint32_t i = 0; i < sh->s.nics_n; i++) {
		if (n->nic_free[i] < bw)
			continue;
		const struct iod_sched_nic *ni = &sh->s.nics[i];
		int a = (ni->gpu_mask & set)                             ? 2
		        : (ni->numa >= 0 && (numa_mask >> ni->numa & 1)) ? 1
		                                                         : 0;
		if (restrict_numa && a == 0)
			continue;
		if (a > best_aff || (a == best_aff && n->nic_free[i] > n->nic_free[best])) {
			best = (int32_t)i;
			best_aff = a;
		}
	}
	*aff = (uint8_t)(best_aff < 0 ? 0 : best_aff);
	return best;
}

/* Few replicas of the service on this node, rack, zone: 500/300/200 split,
 * each part divided by 1 + the replicas already there. */
uint32_t sched_spread_term(const struct iod_sched_cluster *c, uint32_t node_id)
{
	const struct node *n = &c->nodes[node_id];
	return 500u / (1u + c->cnt_node[node_id]) + 300u / (1u + c->cnt_rack[n->rack]) +
	       200u / (1u + c->cnt_zone[n->zone]);
}

/* What one feasible class takes beyond its GPU set. */
struct fit {
	int32_t mem_numa; /* the NUMA node with the most free memory among the class's */
	int32_t nic;      /* -1: none needed or none with the bandwidth */
	uint8_t aff;      /* the NIC's affinity to the set (nic_pick) */
	uint32_t accs;    /* accelerators taken */
};

/* The largest NVLink-joined set of free GPUs (for a node that has none of k). */
static uint32_t largest_joined(const struct shape *sh, uint32_t gfree)
{
	uint32_t bestset = 0;
	for (uint32_t g = 0; g < sh->s.gpus_n; g++) {
		if (!(gfree >> g & 1))
			continue;
		uint32_t set = 1u << g;
		for (uint32_t h = 0; h < sh->s.gpus_n; h++)
			if ((gfree >> h & 1) && !(set >> h & 1) && (sh->s.nvlink[h] & set) == set)
				set |= 1u << h;
		if (popc(set) > popc(bestset))
			bestset = set;
	}
	return bestset;
}

/* The most free GPUs on one NUMA node; *where is that node. */
static uint32_t most_on_one_numa(const struct shape *sh, uint32_t gfree, int32_t *where)
{
	uint32_t bestg = 0;
	for (uint32_t i = 0; i < sh->s.numa_n; i++) {
		uint32_t g = 0;
		for (uint32_t j = 0; j < sh->s.gpus_n; j++)
			if ((gfree >> j & 1) && sh->s.gpu_numa[j] == (int32_t)i)
				g |= 1u << j;
		if (popc(g) > popc(bestg)) {
			bestg = g;
			*where = (int32_t)i;
		}
	}
	return bestg;
}

/*
 * The node-level filter: the stages that do not depend on which GPU set is
 * taken. On ST_OK *m holds the candidate classes (in *scratch or *cpu_only).
 */
static int node_filter(struct iod_sched_cluster *c, uint32_t node_id,
                       const struct iod_sched_request *r, struct near *near,
                       struct memo_entry *scratch, struct memo_entry *cpu_only,
                       const struct memo_entry **m)
{
	const struct node *n = &c->nodes[node_id];
	struct shape *sh = &c->shapes[n->shape];
	const uint32_t k = r->gpus;
	if (n->cordoned)
		return ST_CORDONED;
	if (n->replicas >= IOD_SCHED_NODE_REPLICAS_MAX) {
		near->value = n->replicas;
		return ST_FULL; /* its agent runs no more (IOD_AGENT_REPLICAS_MAX) */
	}
	if (r->selector_n && !labels_match(n, r))
		return ST_LABELS;
	if ((r->anti == IOD_SCHED_DOMAIN_NODE && c->cnt_node[node_id]) ||
	    (r->anti == IOD_SCHED_DOMAIN_RACK && c->cnt_rack[n->rack]) ||
	    (r->anti == IOD_SCHED_DOMAIN_ZONE && c->cnt_zone[n->zone]))
		return ST_ANTI;
	if (k > sh->s.gpus_n) {
		near->value = sh->s.gpus_n;
		return ST_SMALL;
	}
	if (popc(n->gpu_free) < k) {
		near->value = popc(n->gpu_free);
		near->gpus = n->gpu_free;
		return ST_GPUS;
	}
	/* the GPUs this request may take: free, with the memory it asks for */
	const uint32_t gfree = n->gpu_free & gpus_with_mem(sh, k ? r->gpu_mem_bytes : 0);
	if (popc(gfree) < k) {
		near->value = popc(gfree);
		near->gpus = gfree;
		return ST_GPU_MEM;
	}
	if (k == 0) {
		/* no GPUs: the classes are the NUMA nodes themselves */
		cpu_only->n = 0;
		for (uint32_t i = 0; i < sh->s.numa_n; i++) {
			struct memo_class mc = {
			    .numa_mask = (uint8_t)(1u << i), .span = 1, .nic = -1};
			sched_nearest_nic(&sh->s, 0, mc.numa_mask, &mc.nic, &mc.nic_aff);
			cpu_only->c[cpu_only->n++] = mc;
		}
		*m = cpu_only;
		return ST_OK;
	}
	/* the best GPU sets, per NUMA-node mask under restricted and single-numa-node */
	const bool strict =
	    r->numa == IOD_SCHED_NUMA_RESTRICTED || r->numa == IOD_SCHED_NUMA_SINGLE;
	const uint32_t want_span =
	    r->numa == IOD_SCHED_NUMA_SINGLE ? 1u : IOD_MAX(1u, (uint32_t)sh->min_span[k]);
	const bool nvlink = r->gpu_link == IOD_SCHED_LINK_NVLINK;
	*m = sched_search_get(sh, gfree, k, nvlink, strict ? want_span : 0, scratch);
	if ((*m)->n > 0)
		return ST_OK;
	if (!strict || sched_search_get(sh, gfree, k, nvlink, 0, scratch)->n == 0) {
		/* only NVLink can leave no set: report the largest joined one */
		near->gpus = largest_joined(sh, gfree);
		near->value = popc(near->gpus);
		return ST_LINK;
	}
	/* sets exist, none on few enough NUMA nodes */
	near->gpus = most_on_one_numa(sh, gfree, &near->where);
	near->value = popc(near->gpus);
	return ST_NUMA;
}

/* Note a class that failed at stage st with `have` of what it needed. */
static void class_miss(int *stage_max, struct near *near, int st, uint64_t have, int32_t where)
{
	if (*stage_max < st || (*stage_max == st && have > near->value)) {
		near->value = have;
		near->where = where;
	}
	*stage_max = IOD_MAX(*stage_max, st);
}

/*
 * The class-level filter: CPUs, memory, NIC bandwidth and accelerators for
 * one GPU set. True when the class fits (*f filled); otherwise *stage_max and
 * *near say how far it came.
 */
static bool class_fit(const struct node *n, const struct shape *sh,
                      const struct iod_sched_request *r, const struct memo_class *cl,
                      uint32_t total_cpus, uint64_t total_mem, uint32_t ausable, int *stage_max,
                      struct near *near, struct fit *f)
{
	const bool strict =
	    r->numa == IOD_SCHED_NUMA_RESTRICTED || r->numa == IOD_SCHED_NUMA_SINGLE;
	uint32_t cpus_have = strict ? cpus_in(n, sh, cl->numa_mask) : total_cpus;
	if (cpus_have < r->cpus) {
		class_miss(stage_max, near, ST_CPUS, cpus_have, -1);
		return false;
	}
	f->mem_numa = mem_best_in(n, sh, cl->numa_mask);
	uint64_t mem_have;
	if (r->numa == IOD_SCHED_NUMA_SINGLE)
		mem_have = n->numa_mem_free[f->mem_numa];
	else if (r->numa == IOD_SCHED_NUMA_RESTRICTED)
		mem_have = mem_in(n, sh, cl->numa_mask);
	else
		mem_have = total_mem;
	if (mem_have < r->mem_bytes) {
		class_miss(stage_max, near, ST_MEM, mem_have, strict ? f->mem_numa : -1);
		return false;
	}
	f->aff = 0;
	f->nic = -1;
	if (r->gpus > 0 || r->nic_bw_bps > 0) {
		f->nic = nic_pick(n, sh, cl->mask, cl->numa_mask, cl->nic, cl->nic_aff,
		                  r->nic_bw_bps, strict && r->nic_bw_bps > 0, &f->aff);
		if (f->nic < 0 && r->nic_bw_bps > 0) {
			if (*stage_max < ST_NIC) {
				uint64_t bw = 0;
				for (uint32_t i = 0; i < sh->s.nics_n; i++)
					if (n->nic_free[i] > bw) {
						bw = n->nic_free[i];
						near->where = (int32_t)i;
					}
				near->value = bw;
			}
			*stage_max = IOD_MAX(*stage_max, ST_NIC);
			return false;
		}
	}
	f->accs = 0;
	if (r->accs) {
		f->accs = accs_pick(sh, ausable, cl->numa_mask, strict, r->accs);
		if (!f->accs) {
			if (*stage_max < ST_ACC) {
				near->value = popc(ausable);
				near->gpus = ausable;
			}
			*stage_max = IOD_MAX(*stage_max, ST_ACC);
			return false;
		}
	}
	*stage_max = ST_OK;
	return true;
}

/* The score terms of a feasible class (t) and their weighted total. */
static int64_t class_score(const struct iod_sched_cluster *c, uint32_t node_id,
                           const struct iod_sched_request *r, const struct iod_sched_weights *w,
                           const struct memo_class *cl, const struct fit *f, uint32_t total_cpus,
                           int32_t t[IOD_SCHED_TERMS_N])
{
	const struct node *n = &c->nodes[node_id];
	const struct shape *sh = &c->shapes[n->shape];
	const uint32_t k = r->gpus;
	if (r->gpu_link == IOD_SCHED_LINK_PCIE && k > 0) {
		/* no NVLink wanted: prefer GPUs without any, keeping NVLink
		 * islands for the replicas that need them */
		uint32_t linked = 0;
		for (uint32_t m2 = cl->mask; m2; m2 &= m2 - 1)
			linked += sh->s.nvlink[__builtin_ctz(m2)] != 0;
		t[IOD_SCHED_TERM_GPU] =
		    (int32_t)(IOD_SCHED_TERM_MAX - IOD_SCHED_TERM_MAX * linked / k);
	} else if (k >= 2 && c->pair_max > 0) {
		uint64_t pairs = (uint64_t)k * (k - 1) / 2;
		t[IOD_SCHED_TERM_GPU] =
		    (int32_t)((uint64_t)cl->score * IOD_SCHED_TERM_MAX / (pairs * c->pair_max));
	} else {
		t[IOD_SCHED_TERM_GPU] = IOD_SCHED_TERM_MAX;
	}
	if (r->numa == IOD_SCHED_NUMA_NONE) {
		t[IOD_SCHED_TERM_NUMA] = IOD_SCHED_TERM_MAX;
	} else {
		uint32_t in = cpus_in(n, sh, cl->numa_mask);
		uint32_t cpu_frac = r->cpus ? IOD_MIN(in, r->cpus) * 1000u / r->cpus : 1000u;
		uint32_t mem_ok =
		    (f->mem_numa >= 0 && n->numa_mem_free[f->mem_numa] >= r->mem_bytes) ? 1000u
		                                                                        : 0u;
		uint32_t nic_ok = (f->nic < 0 || f->aff >= 1) ? 1000u : 0u;
		uint32_t span_f = cl->span ? sh->min_span[k] * 1000u / cl->span : 1000u;
		if (k == 0)
			span_f = 1000u;
		t[IOD_SCHED_TERM_NUMA] =
		    (int32_t)((uint64_t)span_f * (cpu_frac + mem_ok + nic_ok) / 3000u);
	}
	/* spreading services may break whole nodes, never NVLink islands needlessly */
	uint32_t waste = (r->spread || r->stateful) ? cl->waste_isl : cl->waste;
	t[IOD_SCHED_TERM_FRAG] =
	    k && sh->s.gpus_n
	        ? (int32_t)(IOD_SCHED_TERM_MAX - IOD_SCHED_TERM_MAX * waste / sh->s.gpus_n)
	        : IOD_SCHED_TERM_MAX;
	t[IOD_SCHED_TERM_SPREAD] = (r->stateful || r->spread)
	                               ? (int32_t)sched_spread_term(c, node_id)
	                               : IOD_SCHED_TERM_MAX;
	uint32_t util;
	if (k > 0)
		util = (sh->s.gpus_n - popc(n->gpu_free) + k) * 1000u / sh->s.gpus_n;
	else if (sh->cpus_n)
		util = (sh->cpus_n - total_cpus + r->cpus) * 1000u / sh->cpus_n;
	else
		util = 0;
	util = IOD_MIN(util, 1000u);
	t[IOD_SCHED_TERM_PACK] = (int32_t)(r->spread ? 1000u - util : util);
	if (k == 0 && r->nic_bw_bps == 0)
		t[IOD_SCHED_TERM_NIC] = IOD_SCHED_TERM_MAX;
	else if (f->nic < 0)
		t[IOD_SCHED_TERM_NIC] = 0;
	else
		t[IOD_SCHED_TERM_NIC] = f->aff == 2 ? 1000 : f->aff == 1 ? 600 : 200;
	int64_t total = 0;
	for (unsigned i = 0; i < IOD_SCHED_TERMS_N; i++)
		total += (int64_t)w->w[i] * t[i];
	return total;
}

/*
 * Evaluate one node for request r. Returns the stage reached (ST_OK when
 * feasible); on failure *near says how close the node came at that stage.
 * With out, every feasible class is scored and *out is the best class on
 * this node; without it (a diagnosis) the first feasible class ends it.
 */
int sched_eval_node(struct iod_sched_cluster *c, uint32_t node_id,
                    const struct iod_sched_request *r, const struct iod_sched_weights *w,
                    struct cand *out, struct near *near)
{
	const struct node *n = &c->nodes[node_id];
	const struct shape *sh = &c->shapes[n->shape];
	near->value = 0, near->gpus = 0, near->where = -1;
	struct memo_entry scratch, cpu_only;
	const struct memo_entry *m;
	int st = node_filter(c, node_id, r, near, &scratch, &cpu_only, &m);
	if (st != ST_OK)
		return st;

	const uint8_t all_numa = (uint8_t)((1u << sh->s.numa_n) - 1);
	const uint32_t ausable = r->accs ? accs_usable(n, sh, r) : 0;
	const uint32_t total_cpus = cpus_in(n, sh, all_numa);
	const uint64_t total_mem = mem_in(n, sh, all_numa);
	int stage_max = ST_NUMA;
	int64_t best_total = INT64_MIN;
	uint32_t best_score = 0;
	uint64_t best_rest = 0;
	for (uint32_t ci = 0; ci < m->n; ci++) {
		const struct memo_class *cl = &m->c[ci];
		struct fit f;
		if (!class_fit(n, sh, r, cl, total_cpus, total_mem, ausable, &stage_max, near, &f))
			continue;
		if (!out)
			return ST_OK;
		int32_t t[IOD_SCHED_TERMS_N];
		int64_t total = class_score(c, node_id, r, w, cl, &f, total_cpus, t);
		/* on one node the set with the best pair score wins (go-gpuallocator);
		 * the weighted total breaks ties and ranks nodes, then what the set
		 * leaves free (the pair scores of the remaining GPUs) */
		if (best_total == INT64_MIN || cl->score > best_score ||
		    (cl->score == best_score &&
		     (total > best_total || (total == best_total && cl->rest > best_rest)))) {
			best_total = total;
			best_score = cl->score;
			best_rest = cl->rest;
			out->pub.node = node_id;
			out->pub.gpu_mask = cl->mask;
			out->pub.acc_mask = f.accs;
			out->pub.mem_numa = f.mem_numa;
			memcpy(out->pub.terms, t, sizeof(t));
			out->pub.total = total;
			out->numa_mask = cl->numa_mask;
			out->nic = f.nic;
		}
	}
	if (out && stage_max == ST_OK && r->numa == IOD_SCHED_NUMA_NONE)
		out->pub.mem_numa = -1;
	return stage_max;
}
