/*
 * sched.c: the scheduler core: cluster state, the exact GPU-set search, and
 * filter -> score -> bind for every replica of a deploy.
 *
 * It exists so that every replica lands on the best GPUs, CPUs and NIC a
 * cluster can give it, fast, with a reason for every decision. It must never
 * read the clock, do I/O, draw randomness or iterate in an order that depends
 * on anything but its input: the same input gives byte-identical output.
 *
 * The GPU-set search is exact (every k-subset of a node's free GPUs), as
 * NVIDIA's go-gpuallocator partitions rather than picks greedily; its result
 * depends only on (shape, free mask, k, link), so it is memoized per shape
 * and a node evaluation is one hash lookup plus a few counters.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const numa_names[] = {
#define X(n, s) s,
    IOD_SCHED_NUMA_POLICIES(X)
#undef X
};
static const char *const term_names[] = {
#define X(n, s, w) s,
    IOD_SCHED_TERMS(X)
#undef X
};
static const char *const reason_names[] = {
#define X(n, s) s,
    IOD_SCHED_REASONS(X)
#undef X
};

const char *iod_sched_numa_name(enum iod_sched_numa p)
{
	return (unsigned)p < IOD_ARRAY_LEN(numa_names) ? numa_names[p] : "?";
}

int iod_sched_numa_parse(const char *s, enum iod_sched_numa *out)
{
	for (size_t i = 0; i < IOD_ARRAY_LEN(numa_names); i++) {
		if (!strcmp(s, numa_names[i])) {
			*out = (enum iod_sched_numa)i;
			return 0;
		}
	}
	if (!strcmp(s, "single")) {
		*out = IOD_SCHED_NUMA_SINGLE;
		return 0;
	}
	return -EINVAL;
}

const char *iod_sched_term_name(enum iod_sched_term t)
{
	return (unsigned)t < IOD_ARRAY_LEN(term_names) ? term_names[t] : "?";
}

const char *iod_sched_reason_name(enum iod_sched_reason r)
{
	return (unsigned)r < IOD_ARRAY_LEN(reason_names) ? reason_names[r] : "?";
}

const char *iod_sched_acc_type_name(enum iod_sched_acc_type t)
{
	switch (t) {
	case IOD_SCHED_ACC_DPU: return "dpu";
	case IOD_SCHED_ACC_FPGA: return "fpga";
	default: return "none";
	}
}

const char *iod_sched_domain_name(enum iod_sched_domain d)
{
	static const char *const n[] = {"none", "node", "rack", "zone"};
	return (unsigned)d < IOD_ARRAY_LEN(n) ? n[d] : "?";
}

void iod_sched_weights_default(struct iod_sched_weights *w)
{
	unsigned i = 0;
#define X(n, s, wt) w->w[i++] = wt;
	IOD_SCHED_TERMS(X)
#undef X
}

void iod_sched_opts_default(struct iod_sched_opts *o)
{
	memset(o, 0, sizeof(*o));
	iod_sched_weights_default(&o->weights);
	o->explain_top = IOD_SCHED_EXPLAIN_TOP;
}

/* SWAR popcount: the build has no -mpopcnt, and libgcc's call showed up as
 * a fifth of the throughput benchmark. */
static inline unsigned popc(uint32_t x)
{
	x = x - ((x >> 1) & 0x55555555u);
	x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
	x = (x + (x >> 4)) & 0x0f0f0f0fu;
	return (x * 0x01010101u) >> 24;
}

/* ---- shapes -------------------------------------------------------------- */

void iod_sched_shape_init(struct iod_sched_shape *s, const char *model, uint32_t gpus_n,
                          uint32_t numa_n)
{
	memset(s, 0, sizeof(*s));
	iod_strlcpy(s->model, model ? model : "custom", sizeof(s->model));
	s->gpus_n = IOD_MIN(gpus_n, (uint32_t)IOD_SCHED_NODE_GPUS_MAX);
	s->numa_n = IOD_MAX(1u, IOD_MIN(numa_n, (uint32_t)IOD_SCHED_NUMA_MAX));
	for (uint32_t i = 0; i < s->gpus_n; i++)
		s->gpu_numa[i] = (int32_t)(i * s->numa_n / IOD_MAX(1u, s->gpus_n));
	iod_sched_shape_finish(s);
}

void iod_sched_shape_finish(struct iod_sched_shape *s)
{
	for (uint32_t i = 0; i < s->gpus_n; i++)
		s->island[i] = 0;
	for (uint32_t i = 0; i < s->gpus_n; i++) {
		if (s->island[i])
			continue;
		/* flood fill over nvlink[] */
		const uint32_t self = 1u << i;
		uint32_t comp = self, frontier = self;
		while (frontier) {
			uint32_t g = (uint32_t)__builtin_ctz(frontier);
			frontier &= frontier - 1;
			uint32_t nb = s->nvlink[g] & ~comp & ((1u << s->gpus_n) - 1);
			comp |= nb;
			frontier |= nb;
		}
		for (uint32_t j = 0; j < s->gpus_n; j++)
			if (comp >> j & 1)
				s->island[j] = comp;
	}
}

static int shape_check(const struct iod_sched_shape *s, struct iod_err *e)
{
	if (s->gpus_n > IOD_SCHED_NODE_GPUS_MAX)
		return iod_err_set(e, -E2BIG, "shape %s: %u GPUs exceed the limit of %u per node",
		                   s->model, s->gpus_n, IOD_SCHED_NODE_GPUS_MAX);
	if (s->numa_n == 0 || s->numa_n > IOD_SCHED_NUMA_MAX)
		return iod_err_set(e, -E2BIG, "shape %s: %u NUMA nodes (1..%u allowed)", s->model,
		                   s->numa_n, IOD_SCHED_NUMA_MAX);
	if (s->nics_n > IOD_SCHED_NICS_MAX)
		return iod_err_set(e, -E2BIG, "shape %s: %u NICs exceed the limit of %u", s->model,
		                   s->nics_n, IOD_SCHED_NICS_MAX);
	for (uint32_t i = 0; i < s->gpus_n; i++)
		if (s->gpu_numa[i] < 0 || (uint32_t)s->gpu_numa[i] >= s->numa_n)
			return iod_err_set(e, -EINVAL, "shape %s: GPU%u on NUMA node %d of %u",
			                   s->model, i, s->gpu_numa[i], s->numa_n);
	if (s->accs_n > IOD_SCHED_ACCS_MAX)
		return iod_err_set(e, -E2BIG,
		                   "shape %s: %u accelerators exceed the limit of %u per node",
		                   s->model, s->accs_n, IOD_SCHED_ACCS_MAX);
	for (uint32_t i = 0; i < s->accs_n; i++)
		if (s->accs[i].type == IOD_SCHED_ACC_NONE || s->accs[i].numa >= (int32_t)s->numa_n)
			return iod_err_set(
			    e, -EINVAL, "shape %s: accelerator %s is %s on NUMA node %d", s->model,
			    s->accs[i].name, iod_sched_acc_type_name(s->accs[i].type),
			    s->accs[i].numa);
	return 0;
}

int iod_sched_shape_add(struct iod_sched_cluster *c, const struct iod_sched_shape *s, uint32_t *id,
                        struct iod_err *e)
{
	int rc = shape_check(s, e);
	if (rc)
		return rc;
	if (c->shapes_n >= IOD_SCHED_SHAPES_MAX)
		return iod_err_set(e, -ENOSPC, "more than %u node models", IOD_SCHED_SHAPES_MAX);
	struct shape *sh = &c->shapes[c->shapes_n];
	memset(sh, 0, sizeof(*sh));
	sh->s = *s;
	iod_sched_shape_finish(&sh->s);
	rc = iod_map_init(&sh->memo, 256, IOD_SCHED_MEMO_MAX);
	if (rc)
		return iod_err_set(e, rc, "shape %s: out of memory", s->model);
	iod_arena_init(&sh->arena, 1u << 16, 0);
	/* distinct islands */
	uint32_t seen = 0;
	for (uint32_t i = 0; i < s->gpus_n; i++) {
		if (seen >> i & 1)
			continue;
		sh->islands[sh->islands_n++] = sh->s.island[i];
		seen |= sh->s.island[i];
	}
	/* fewest NUMA nodes k GPUs can span: take the fullest NUMA nodes first */
	uint32_t per[IOD_SCHED_NUMA_MAX] = {0};
	for (uint32_t i = 0; i < s->gpus_n; i++)
		per[s->gpu_numa[i]]++;
	for (uint32_t k = 0; k <= s->gpus_n; k++) {
		uint32_t used = 0, got = 0, span = 0;
		while (got < k) {
			uint32_t best = 0, bi = 0;
			for (uint32_t n = 0; n < s->numa_n; n++)
				if (!(used >> n & 1) && per[n] > best)
					best = per[n], bi = n;
			used |= 1u << bi;
			got += best;
			span++;
		}
		sh->min_span[k] = (uint8_t)span;
	}
	for (uint32_t n = 0; n < s->numa_n; n++) {
		sh->numa_cpus_n[n] = iod_bitmap_count(&s->numa_cpus[n]);
		sh->cpus_n += sh->numa_cpus_n[n];
	}
	for (uint32_t i = 0; i < s->gpus_n; i++)
		for (uint32_t j = 0; j < s->gpus_n; j++)
			if (i != j && s->pair_score[i][j] > c->pair_max)
				c->pair_max = s->pair_score[i][j];
	*id = c->shapes_n++;
	return 0;
}

/* ---- the exact GPU-set search ------------------------------------------ */

struct search {
	const struct shape *sh;
	uint32_t free_mask;                     /* GPUs to choose from */
	uint32_t k;                             /* set size */
	bool nvlink;                            /* every pair must share a direct NVLink */
	uint32_t span_max;                      /* 0: keep only the best-scoring sets (bound
	                                           pruning); else sets on <= span_max NUMA
	                                           nodes, best per NUMA class */
	uint32_t best;                          /* span_max 0: best score so far */
	uint32_t pmax;                          /* highest pair score among free GPUs */
	uint32_t whole;                         /* GPUs in wholly free islands */
	uint32_t free_sum;                      /* pair-score sum of all free GPUs */
	uint32_t deg[IOD_SCHED_NODE_GPUS_MAX];  /* a free GPU's pair scores to the others */
	uint32_t list[IOD_SCHED_NODE_GPUS_MAX]; /* free GPUs in id order */
	uint32_t list_n;
	struct memo_entry *out;
};

static void nearest_nic(const struct iod_sched_shape *s, uint32_t set, uint8_t numa_mask,
                        int8_t *nic, uint8_t *aff)
{
	int best = -1, best_aff = -1, best_cnt = -1;
	for (uint32_t i = 0; i < s->nics_n; i++) {
		int cnt = (int)popc(s->nics[i].gpu_mask & set);
		int a = cnt > 0                                                        ? 2
		        : (s->nics[i].numa >= 0 && (numa_mask >> s->nics[i].numa & 1)) ? 1
		                                                                       : 0;
		if (a > best_aff || (a == best_aff && cnt > best_cnt)) {
			best = (int)i, best_aff = a, best_cnt = cnt;
		}
	}
	*nic = (int8_t)best;
	*aff = (uint8_t)(best_aff < 0 ? 0 : best_aff);
}

/* Pair-score sum of the GPUs in m. */
static uint32_t set_score(const struct iod_sched_shape *s, uint32_t m)
{
	uint32_t sum = 0;
	for (; m; m &= m - 1) {
		uint32_t g = (uint32_t)__builtin_ctz(m);
		for (uint32_t r = m & (m - 1); r; r &= r - 1)
			sum += s->pair_score[g][__builtin_ctz(r)];
	}
	return sum;
}

/* The best score of any 4 GPUs of m (m holds at most REST_LOOK_MAX). */
static uint32_t best_quad(const struct iod_sched_shape *s, uint32_t m)
{
	uint32_t g[IOD_SCHED_NODE_GPUS_MAX], n = 0, best = 0;
	for (; m; m &= m - 1)
		g[n++] = (uint32_t)__builtin_ctz(m);
	for (uint32_t a = 0; a + 3 < n; a++)
		for (uint32_t b = a + 1; b + 2 < n; b++)
			for (uint32_t c = b + 1; c + 1 < n; c++)
				for (uint32_t d = c + 1; d < n; d++)
					best = IOD_MAX(best,
					               set_score(s, 1u << g[a] | 1u << g[b] |
					                                1u << g[c] | 1u << g[d]));
	return best;
}

/* The best sum over disjoint pairs of m (one GPU left over when m is odd). */
static uint32_t best_pairs(const struct iod_sched_shape *s, uint32_t m)
{
	if (popc(m) < 2)
		return 0;
	uint32_t g = (uint32_t)__builtin_ctz(m), r = m & (m - 1), best = 0;
	if (popc(m) & 1)
		best = best_pairs(s, r); /* g is the one left over */
	for (uint32_t o = r; o; o &= o - 1) {
		uint32_t h = (uint32_t)__builtin_ctz(o);
		best = IOD_MAX(best, s->pair_score[g][h] + best_pairs(s, r & ~(1u << h)));
	}
	return best;
}

/* Free GPUs left beyond which only their pair-score sum is looked at (the
 * look-ahead below is exact and cheap up to 8: 70 quads, 105 pairings). */
#define REST_LOOK_MAX 8

/*
 * What a set leaves for later requests, as one comparable key: the best
 * 4-GPU set the remaining free GPUs rem still hold, then the best pairing
 * of them, then their pair-score sum (rest_sum). Requests of 4 and 2 GPUs
 * are the common next ones; on DGX-1 and PCIe-pair shapes this keeps every
 * sequence of 1..4-GPU requests at or above the greedy total
 * (tests/unit/test_sched.c). Each part is below 2^21.
 */
static uint64_t rest_key(const struct iod_sched_shape *s, uint32_t rem, uint32_t rest_sum)
{
	uint64_t quad = 0, pairs = 0;
	if (popc(rem) <= REST_LOOK_MAX) {
		quad = best_quad(s, rem);
		pairs = best_pairs(s, rem);
	}
	IOD_ASSERT_HOT(quad < (1u << 21) && pairs < (1u << 21) && rest_sum < (1u << 21));
	return quad << 42 | pairs << 21 | rest_sum;
}

/*
 * Is a better than b within one class: higher score; among equal scores the
 * set that leaves the best-scoring free GPUs (NVIDIA go-gpuallocator's rule:
 * keep what may come next possible, e.g. do not break a free NVLink island
 * when an equal pair outside it exists), then less waste, then lower mask.
 */
static bool class_better(uint32_t score, uint64_t rest, uint16_t waste, uint32_t mask,
                         const struct memo_class *b)
{
	if (score != b->score)
		return score > b->score;
	if (rest != b->rest)
		return rest > b->rest;
	if (waste != b->waste)
		return waste < b->waste;
	return mask < b->mask;
}

static void search_leaf(struct search *st, uint32_t set, uint32_t score, uint8_t numa_mask)
{
	const struct iod_sched_shape *s = &st->sh->s;
	/* waste: free GPUs left in islands that were whole and no longer are */
	uint32_t broken = 0;
	for (uint32_t i = 0; i < st->sh->islands_n; i++) {
		uint32_t isl = st->sh->islands[i];
		if ((isl & st->whole) == isl && (isl & set))
			broken |= isl;
	}
	uint16_t waste_isl = (uint16_t)popc(broken & ~set), waste = waste_isl;
	/* a wholly free node is an island too: an 8-GPU job needs one */
	uint32_t all = (uint32_t)((1ull << s->gpus_n) - 1);
	if (st->free_mask == all && set != all)
		waste = (uint16_t)IOD_MAX(waste, popc(all & ~set));
	struct memo_entry *m = st->out;
	if (st->span_max == 0) {
		/* only the best-scoring sets matter: one wins on this node */
		if (m->n && score < st->best)
			return;
		if (!m->n || score > st->best)
			m->n = 0;
		st->best = score;
	}
	/* the pair scores the free GPUs keep: all of theirs, less every pair
	 * touching the set, plus the set's own (counted twice in deg) */
	uint32_t cut = 0;
	for (uint32_t b = set; b; b &= b - 1)
		cut += st->deg[__builtin_ctz(b)];
	uint64_t rest = rest_key(s, st->free_mask & ~set, st->free_sum + score - cut);
	for (uint32_t i = 0; i < m->n; i++) {
		if (m->c[i].numa_mask != numa_mask)
			continue;
		if (class_better(score, rest, waste, set, &m->c[i])) {
			m->c[i].mask = set, m->c[i].score = score, m->c[i].waste = waste;
			m->c[i].rest = rest;
			m->c[i].waste_isl = waste_isl;
		}
		return;
	}
	struct memo_class nc = {.mask = set,
	                        .score = score,
	                        .rest = rest,
	                        .waste = waste,
	                        .waste_isl = waste_isl,
	                        .numa_mask = numa_mask,
	                        .span = (uint8_t)popc(numa_mask)};
	if (m->n < IOD_SCHED_CLASSES_MAX) {
		m->c[m->n++] = nc;
		return;
	}
	/* more classes than kept: replace the weakest (documented bound) */
	uint32_t worst = 0;
	for (uint32_t i = 1; i < m->n; i++)
		if (class_better(m->c[worst].score, m->c[worst].rest, m->c[worst].waste,
		                 m->c[worst].mask, &m->c[i]))
			worst = i;
	if (class_better(score, rest, waste, set, &m->c[worst]))
		m->c[worst] = nc;
}

static void search_rec(struct search *st, uint32_t from, uint32_t depth, uint32_t set,
                       uint32_t score, uint8_t numa_mask)
{
	const struct iod_sched_shape *s = &st->sh->s;
	if (depth == st->k) {
		search_leaf(st, set, score, numa_mask);
		return;
	}
	const uint32_t left = st->k - depth;
	if (st->span_max == 0 && st->out->n && depth > 0) {
		/* bound: the chosen pairs, plus each of the `left` GPUs still to come
		 * adding at most the best any candidate adds to the chosen ones, plus
		 * the best pair score between every two of them */
		uint32_t amax = 0;
		for (uint32_t i = from; i < st->list_n; i++) {
			uint32_t a = 0;
			for (uint32_t m = set; m; m &= m - 1)
				a += s->pair_score[st->list[i]][__builtin_ctz(m)];
			amax = IOD_MAX(amax, a);
		}
		uint64_t ub = (uint64_t)score + (uint64_t)left * amax +
		              (uint64_t)left * (left - 1) / 2 * st->pmax;
		if (ub < st->best)
			return; /* prune: cannot reach the best set found so far */
	}
	/* bound: not enough GPUs left to complete the set */
	for (uint32_t i = from; i + left <= st->list_n; i++) {
		uint32_t g = st->list[i];
		if (st->nvlink && (s->nvlink[g] & set) != set)
			continue; /* prune: g lacks a direct NVLink to a chosen GPU */
		if (st->span_max && popc((uint32_t)numa_mask | 1u << s->gpu_numa[g]) > st->span_max)
			continue; /* prune: the set would span too many NUMA nodes */
		uint32_t add = 0;
		for (uint32_t m = set; m; m &= m - 1)
			add += s->pair_score[g][__builtin_ctz(m)];
		search_rec(st, i + 1, depth + 1, set | 1u << g, score + add,
		           (uint8_t)(numa_mask | 1u << s->gpu_numa[g]));
	}
}

static void search_run(const struct shape *sh, uint32_t free_mask, uint32_t k, bool nvlink,
                       uint32_t span_max, struct memo_entry *out)
{
	struct search st = {.sh = sh,
	                    .free_mask = free_mask,
	                    .k = k,
	                    .nvlink = nvlink,
	                    .span_max = span_max,
	                    .out = out};
	out->n = 0;
	for (uint32_t i = 0; i < sh->islands_n; i++)
		if ((sh->islands[i] & free_mask) == sh->islands[i])
			st.whole |= sh->islands[i];
	for (uint32_t g = 0; g < sh->s.gpus_n; g++)
		if (free_mask >> g & 1)
			st.list[st.list_n++] = g;
	if (k == 0 || k > st.list_n)
		return;
	for (uint32_t i = 0; i < st.list_n; i++)
		for (uint32_t j = 0; j < st.list_n; j++) {
			uint32_t ps = sh->s.pair_score[st.list[i]][st.list[j]];
			st.pmax = IOD_MAX(st.pmax, ps);
			if (i != j) {
				st.deg[st.list[i]] += ps;
				st.free_sum += j > i ? ps : 0;
			}
		}
	search_rec(&st, 0, 0, 0, 0, 0);
	/* classes in a canonical order: by NUMA mask */
	for (uint32_t i = 1; i < out->n; i++) {
		struct memo_class t = out->c[i];
		uint32_t j = i;
		while (j > 0 && out->c[j - 1].numa_mask > t.numa_mask) {
			out->c[j] = out->c[j - 1];
			j--;
		}
		out->c[j] = t;
	}
	for (uint32_t i = 0; i < out->n; i++)
		nearest_nic(&sh->s, out->c[i].mask, out->c[i].numa_mask, &out->c[i].nic,
		            &out->c[i].nic_aff);
}

/* The memoized search; scratch is used when the memo is full. */
static const struct memo_entry *search_get(struct shape *sh, uint32_t free_mask, uint32_t k,
                                           bool nvlink, uint32_t span_max,
                                           struct memo_entry *scratch)
{
	uint64_t key = ((uint64_t)free_mask | (uint64_t)k << 16 | (uint64_t)nvlink << 21 |
	                (uint64_t)span_max << 22) +
	               1;
	uint64_t v;
	if (iod_map_get(&sh->memo, key, &v) == 0) {
		sh->memo_hits++;
		return (const struct memo_entry *)(uintptr_t)v;
	}
	sh->memo_misses++;
	search_run(sh, free_mask, k, nvlink, span_max, scratch);
	size_t bytes = offsetof(struct memo_entry, c) + scratch->n * sizeof(struct memo_class);
	struct memo_entry *m = iod_arena_alloc(&sh->arena, bytes);
	if (!m)
		return scratch;
	memcpy(m, scratch, bytes);
	if (iod_map_put(&sh->memo, key, (uint64_t)(uintptr_t)m) != 0)
		return scratch;
	return m;
}

/* ---- cluster ------------------------------------------------------------- */

int iod_sched_cluster_new(uint32_t nodes_max, uint32_t replicas_max, struct iod_sched_cluster **out,
                          struct iod_err *e)
{
	if (nodes_max == 0 || nodes_max > IOD_SCHED_NODES_MAX)
		return iod_err_set(e, -EINVAL, "nodes: %u (1..%u allowed)", nodes_max,
		                   IOD_SCHED_NODES_MAX);
	if (replicas_max == 0 || replicas_max > IOD_SCHED_REPLICAS_MAX)
		return iod_err_set(e, -EINVAL, "replicas: %u (1..%u allowed)", replicas_max,
		                   IOD_SCHED_REPLICAS_MAX);
	struct iod_sched_cluster *c = calloc(1, sizeof(*c));
	if (!c)
		return iod_err_set(e, -ENOMEM, "out of memory");
	c->shapes = calloc(IOD_SCHED_SHAPES_MAX, sizeof(*c->shapes));
	c->nodes = calloc(nodes_max, sizeof(*c->nodes));
	c->domains = calloc(2 * (size_t)nodes_max + 2, sizeof(*c->domains));
	c->replicas = calloc(replicas_max, sizeof(*c->replicas));
	c->free_ids = calloc(replicas_max, sizeof(*c->free_ids));
	c->cnt_node = calloc(nodes_max, sizeof(uint16_t));
	c->cnt_rack = calloc(2 * (size_t)nodes_max + 2, sizeof(uint16_t));
	c->cnt_zone = calloc(2 * (size_t)nodes_max + 2, sizeof(uint16_t));
	c->cache = calloc(nodes_max, sizeof(*c->cache));
	c->cache_gen = 1;
	c->services_cap = 64;
	c->services = calloc(c->services_cap, sizeof(*c->services));
	c->nodes_max = nodes_max;
	c->replicas_max = replicas_max;
	iod_arena_init(&c->arena, 1u << 16, 0);
	if (!c->shapes || !c->nodes || !c->cache || !c->domains || !c->replicas || !c->free_ids ||
	    !c->cnt_node || !c->cnt_rack || !c->cnt_zone || !c->services ||
	    iod_map_init(&c->domain_ids, 64, 0) || iod_map_init(&c->service_ids, 64, 0)) {
		iod_sched_cluster_free(c);
		return iod_err_set(e, -ENOMEM, "out of memory for %u nodes", nodes_max);
	}
	*out = c;
	return 0;
}

void iod_sched_cluster_free(struct iod_sched_cluster *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; c->shapes && i < c->shapes_n; i++) {
		iod_map_destroy(&c->shapes[i].memo);
		iod_arena_free(&c->shapes[i].arena);
	}
	free(c->shapes);
	free(c->nodes);
	free(c->domains);
	free(c->replicas);
	free(c->free_ids);
	free(c->cnt_node);
	free(c->cnt_rack);
	free(c->cnt_zone);
	free(c->services);
	free(c->cache);
	iod_map_destroy(&c->domain_ids);
	iod_map_destroy(&c->service_ids);
	iod_arena_free(&c->arena);
	free(c);
}

static uint32_t domain_intern(struct iod_sched_cluster *c, char kind, const char *name)
{
	char key[IOD_NAME_MAX + 2];
	snprintf(key, sizeof(key), "%c:%s", kind, name);
	uint64_t h = iod_hash_str(key) | 1, v;
	/* collisions are resolved by probing h+2, h+4... with a name check */
	for (;; h += 2) {
		if (iod_map_get(&c->domain_ids, h, &v) != 0)
			break;
		if (!strcmp(c->domains[v - 1], key))
			return (uint32_t)(v - 1);
	}
	uint32_t id = c->domains_n++;
	iod_strlcpy(c->domains[id], key, IOD_NAME_MAX);
	iod_map_put(&c->domain_ids, h, id + 1);
	return id;
}

int iod_sched_node_add(struct iod_sched_cluster *c, const struct iod_sched_node_spec *n,
                       uint32_t *id, struct iod_err *e)
{
	if (c->nodes_n >= c->nodes_max)
		return iod_err_set(e, -ENOSPC, "more than %u nodes", c->nodes_max);
	if (!n->name || !n->name[0] || strlen(n->name) >= IOD_NAME_MAX)
		return iod_err_set(e, -EINVAL, "a node needs a name of 1..%d characters",
		                   IOD_NAME_MAX - 1);
	if (n->shape >= c->shapes_n)
		return iod_err_set(e, -EINVAL, "node %s: unknown shape %u", n->name, n->shape);
	if (n->labels_n > IOD_SCHED_LABELS_MAX)
		return iod_err_set(e, -E2BIG, "node %s: %u labels (at most %u)", n->name,
		                   n->labels_n, IOD_SCHED_LABELS_MAX);
	for (uint32_t i = 0; i < c->nodes_n; i++)
		if (!strcmp(c->nodes[i].name, n->name))
			return iod_err_set(e, -EEXIST, "node %s: duplicate name", n->name);
	const struct shape *sh = &c->shapes[n->shape];
	struct node *nd = &c->nodes[c->nodes_n];
	memset(nd, 0, sizeof(*nd));
	iod_strlcpy(nd->name, n->name, sizeof(nd->name));
	nd->shape = n->shape;
	nd->rack = domain_intern(c, 'r', n->rack ? n->rack : n->name);
	nd->zone = domain_intern(c, 'z', n->zone ? n->zone : "default");
	nd->cordoned = n->cordoned;
	if (n->labels_n) {
		nd->labels = iod_arena_alloc(&c->arena, n->labels_n * sizeof(*nd->labels));
		if (!nd->labels)
			return iod_err_set(e, -ENOMEM, "out of memory");
		memcpy(nd->labels, n->labels, n->labels_n * sizeof(*nd->labels));
		nd->labels_n = n->labels_n;
	}
	uint32_t all = sh->s.gpus_n ? (uint32_t)((1ull << sh->s.gpus_n) - 1) : 0;
	nd->gpu_free = all & ~n->gpus_used;
	for (uint32_t i = 0; i < sh->s.numa_n; i++) {
		iod_bitmap_or(&nd->cpu_free, &sh->s.numa_cpus[i]);
		nd->numa_cpu_free[i] = sh->numa_cpus_n[i];
		nd->numa_mem_free[i] = sh->s.numa_mem_bytes[i];
	}
	for (uint32_t i = 0; i < sh->s.nics_n; i++)
		nd->nic_free[i] = sh->s.nics[i].bw_bps;
	nd->acc_free = (uint32_t)((1ull << sh->s.accs_n) - 1) & ~n->accs_used;
	*id = c->nodes_n++;
	return 0;
}

uint32_t iod_sched_node_count(const struct iod_sched_cluster *c)
{
	return c->nodes_n;
}

const char *iod_sched_node_name(const struct iod_sched_cluster *c, uint32_t node)
{
	return node < c->nodes_n ? c->nodes[node].name : "?";
}

const struct iod_sched_shape *iod_sched_node_shape(const struct iod_sched_cluster *c, uint32_t node)
{
	return node < c->nodes_n ? &c->shapes[c->nodes[node].shape].s : NULL;
}

uint32_t iod_sched_node_gpus_free(const struct iod_sched_cluster *c, uint32_t node)
{
	return node < c->nodes_n ? c->nodes[node].gpu_free : 0;
}

int iod_sched_node_cordon(struct iod_sched_cluster *c, uint32_t node, bool cordoned)
{
	if (node >= c->nodes_n)
		return -ENOENT;
	c->nodes[node].cordoned = cordoned;
	return 0;
}

int iod_sched_replica_get(const struct iod_sched_cluster *c, uint32_t replica,
                          struct iod_sched_replica_info *out)
{
	if (replica >= c->replicas_hw || !c->replicas[replica].live)
		return -ENOENT;
	const struct replica *r = &c->replicas[replica];
	snprintf(out->name, sizeof(out->name), "%s-%u", c->services[r->service].req.service,
	         r->ordinal);
	out->node = r->node;
	out->gpu_mask = r->gpu_mask;
	out->acc_mask = r->acc_mask;
	out->cpus = r->cpus;
	out->service = c->services[r->service].req.service;
	out->mem_numa = r->mem_numa;
	out->nic = r->nic;
	return 0;
}

/* ---- services and failure-domain counts --------------------------------- */

static int service_get(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                       uint32_t *out)
{
	uint64_t h = iod_hash_str(r->service) | 1, v;
	for (;; h += 2) {
		if (iod_map_get(&c->service_ids, h, &v) != 0)
			break;
		if (!strcmp(c->services[v - 1].req.service, r->service)) {
			c->services[v - 1].req = *r;
			*out = (uint32_t)(v - 1);
			return 0;
		}
	}
	if (c->services_n >= IOD_SCHED_SERVICES_MAX)
		return -ENOSPC;
	if (c->services_n == c->services_cap) {
		uint32_t cap = c->services_cap * 2;
		struct service *ns = realloc(c->services, cap * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		c->services = ns;
		c->services_cap = cap;
	}
	uint32_t id = c->services_n;
	memset(&c->services[id], 0, sizeof(c->services[id]));
	c->services[id].req = *r;
	int rc = iod_map_put(&c->service_ids, h, id + 1);
	if (rc)
		return rc;
	c->services_n++;
	*out = id;
	return 0;
}

void sched_counts_load(struct iod_sched_cluster *c, uint32_t svc)
{
	memset(c->cnt_node, 0, c->nodes_n * sizeof(uint16_t));
	memset(c->cnt_rack, 0, c->domains_n * sizeof(uint16_t));
	memset(c->cnt_zone, 0, c->domains_n * sizeof(uint16_t));
	if (c->services[svc].live == 0)
		return;
	for (uint32_t i = 0; i < c->replicas_hw; i++) {
		const struct replica *r = &c->replicas[i];
		if (r->live && r->service == svc)
			sched_counts_add(c, r->node, 1);
	}
}

void sched_counts_add(struct iod_sched_cluster *c, uint32_t node_id, int delta)
{
	const struct node *n = &c->nodes[node_id];
	c->cnt_node[node_id] = (uint16_t)(c->cnt_node[node_id] + delta);
	c->cnt_rack[n->rack] = (uint16_t)(c->cnt_rack[n->rack] + delta);
	c->cnt_zone[n->zone] = (uint16_t)(c->cnt_zone[n->zone] + delta);
}

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

static uint64_t mem_in(const struct node *n, const struct shape *sh, uint8_t mask)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < sh->s.numa_n; i++)
		if (mask >> i & 1)
			sum += n->numa_mem_free[i];
	return sum;
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
static uint32_t spread_term(const struct iod_sched_cluster *c, uint32_t node_id)
{
	const struct node *n = &c->nodes[node_id];
	return 500u / (1u + c->cnt_node[node_id]) + 300u / (1u + c->cnt_rack[n->rack]) +
	       200u / (1u + c->cnt_zone[n->zone]);
}

/*
 * Evaluate one node for request r. Returns the stage reached (ST_OK when
 * feasible, with *out filled with the best class on this node); on failure
 * *near says how close the node came at that stage.
 */
int sched_eval_node(struct iod_sched_cluster *c, uint32_t node_id,
                    const struct iod_sched_request *r, const struct iod_sched_weights *w,
                    struct cand *out, struct near *near)
{
	struct node *n = &c->nodes[node_id];
	struct shape *sh = &c->shapes[n->shape];
	const uint32_t k = r->gpus;
	near->value = 0, near->gpus = 0, near->where = -1;

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
	const uint32_t ausable = r->accs ? accs_usable(n, sh, r) : 0;

	/* the classes: best GPU sets (per NUMA-node mask under restricted and
	 * single-numa-node), or the NUMA nodes themselves for k = 0 */
	const bool strict =
	    r->numa == IOD_SCHED_NUMA_RESTRICTED || r->numa == IOD_SCHED_NUMA_SINGLE;
	const uint32_t want_span =
	    r->numa == IOD_SCHED_NUMA_SINGLE ? 1u : IOD_MAX(1u, (uint32_t)sh->min_span[k]);
	const uint8_t all_numa = (uint8_t)((1u << sh->s.numa_n) - 1);
	const bool nvlink = r->gpu_link == IOD_SCHED_LINK_NVLINK;
	struct memo_entry scratch;
	const struct memo_entry *m;
	struct memo_entry cpu_only;
	if (k > 0) {
		m = search_get(sh, gfree, k, nvlink, strict ? want_span : 0, &scratch);
		if (m->n == 0 &&
		    (!strict || search_get(sh, gfree, k, nvlink, 0, &scratch)->n == 0)) {
			/* only NVLink can leave no set: report the largest joined one */
			uint32_t bestset = 0;
			for (uint32_t g = 0; g < sh->s.gpus_n; g++) {
				if (!(gfree >> g & 1))
					continue;
				uint32_t set = 1u << g;
				for (uint32_t h = 0; h < sh->s.gpus_n; h++)
					if ((gfree >> h & 1) && !(set >> h & 1) &&
					    (sh->s.nvlink[h] & set) == set)
						set |= 1u << h;
				if (popc(set) > popc(bestset))
					bestset = set;
			}
			near->value = popc(bestset);
			near->gpus = bestset;
			return ST_LINK;
		}
		if (m->n == 0) {
			/* sets exist, none on few enough NUMA nodes: report the most
			 * free GPUs on one NUMA node */
			uint32_t bestg = 0;
			for (uint32_t i = 0; i < sh->s.numa_n; i++) {
				uint32_t g = 0;
				for (uint32_t j = 0; j < sh->s.gpus_n; j++)
					if ((gfree >> j & 1) && sh->s.gpu_numa[j] == (int32_t)i)
						g |= 1u << j;
				if (popc(g) > popc(bestg)) {
					bestg = g;
					near->where = (int32_t)i;
				}
			}
			near->gpus = bestg;
			near->value = popc(bestg);
			return ST_NUMA;
		}
	} else {
		cpu_only.n = 0;
		for (uint32_t i = 0; i < sh->s.numa_n; i++) {
			struct memo_class mc = {
			    .numa_mask = (uint8_t)(1u << i), .span = 1, .nic = -1};
			nearest_nic(&sh->s, 0, mc.numa_mask, &mc.nic, &mc.nic_aff);
			cpu_only.c[cpu_only.n++] = mc;
		}
		m = &cpu_only;
	}

	uint32_t total_cpus = cpus_in(n, sh, all_numa);
	uint64_t total_mem = mem_in(n, sh, all_numa);
	int stage_max = ST_NUMA;
	int64_t best_total = INT64_MIN;
	uint32_t best_score = 0;
	uint64_t best_rest = 0;
	uint32_t gpus_used_after = sh->s.gpus_n - popc(n->gpu_free) + k;

	for (uint32_t ci = 0; ci < m->n; ci++) {
		const struct memo_class *cl = &m->c[ci];
		IOD_ASSERT_HOT(!strict || cl->span <= want_span);
		uint32_t cpus_have = strict ? cpus_in(n, sh, cl->numa_mask) : total_cpus;
		if (cpus_have < r->cpus) {
			if (stage_max < ST_CPUS ||
			    (stage_max == ST_CPUS && cpus_have > near->value)) {
				near->value = cpus_have;
				near->where = -1;
			}
			stage_max = IOD_MAX(stage_max, ST_CPUS);
			continue;
		}
		int32_t mem_numa = mem_best_in(n, sh, cl->numa_mask);
		uint64_t mem_have;
		if (r->numa == IOD_SCHED_NUMA_SINGLE)
			mem_have = n->numa_mem_free[mem_numa];
		else if (r->numa == IOD_SCHED_NUMA_RESTRICTED)
			mem_have = mem_in(n, sh, cl->numa_mask);
		else
			mem_have = total_mem;
		if (mem_have < r->mem_bytes) {
			if (stage_max < ST_MEM || (stage_max == ST_MEM && mem_have > near->value)) {
				near->value = mem_have;
				near->where = strict ? mem_numa : -1;
			}
			stage_max = IOD_MAX(stage_max, ST_MEM);
			continue;
		}
		uint8_t aff = 0;
		int32_t nic = -1;
		if (k > 0 || r->nic_bw_bps > 0) {
			nic = nic_pick(n, sh, cl->mask, cl->numa_mask, cl->nic, cl->nic_aff,
			               r->nic_bw_bps, strict && r->nic_bw_bps > 0, &aff);
			if (nic < 0 && r->nic_bw_bps > 0) {
				if (stage_max < ST_NIC) {
					uint64_t bw = 0;
					for (uint32_t i = 0; i < sh->s.nics_n; i++)
						if (n->nic_free[i] > bw) {
							bw = n->nic_free[i];
							near->where = (int32_t)i;
						}
					near->value = bw;
				}
				stage_max = IOD_MAX(stage_max, ST_NIC);
				continue;
			}
		}
		uint32_t accs = 0;
		if (r->accs) {
			accs = accs_pick(sh, ausable, cl->numa_mask, strict, r->accs);
			if (!accs) {
				if (stage_max < ST_ACC) {
					near->value = popc(ausable);
					near->gpus = ausable;
				}
				stage_max = IOD_MAX(stage_max, ST_ACC);
				continue;
			}
		}
		stage_max = ST_OK;

		/* feasible: score it */
		int32_t t[IOD_SCHED_TERMS_N];
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
			t[IOD_SCHED_TERM_GPU] = (int32_t)((uint64_t)cl->score * IOD_SCHED_TERM_MAX /
			                                  (pairs * c->pair_max));
		} else {
			t[IOD_SCHED_TERM_GPU] = IOD_SCHED_TERM_MAX;
		}
		if (r->numa == IOD_SCHED_NUMA_NONE) {
			t[IOD_SCHED_TERM_NUMA] = IOD_SCHED_TERM_MAX;
		} else {
			uint32_t in = cpus_in(n, sh, cl->numa_mask);
			uint32_t cpu_frac =
			    r->cpus ? IOD_MIN(in, r->cpus) * 1000u / r->cpus : 1000u;
			uint32_t mem_ok =
			    (mem_numa >= 0 && n->numa_mem_free[mem_numa] >= r->mem_bytes) ? 1000u
			                                                                  : 0u;
			uint32_t nic_ok = (nic < 0 || aff >= 1) ? 1000u : 0u;
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
		                               ? (int32_t)spread_term(c, node_id)
		                               : IOD_SCHED_TERM_MAX;
		uint32_t util;
		if (k > 0)
			util = gpus_used_after * 1000u / sh->s.gpus_n;
		else if (sh->cpus_n)
			util = (sh->cpus_n - total_cpus + r->cpus) * 1000u / sh->cpus_n;
		else
			util = 0;
		util = IOD_MIN(util, 1000u);
		t[IOD_SCHED_TERM_PACK] = (int32_t)(r->spread ? 1000u - util : util);
		if (k == 0 && r->nic_bw_bps == 0)
			t[IOD_SCHED_TERM_NIC] = IOD_SCHED_TERM_MAX;
		else if (nic < 0)
			t[IOD_SCHED_TERM_NIC] = 0;
		else
			t[IOD_SCHED_TERM_NIC] = aff == 2 ? 1000 : aff == 1 ? 600 : 200;
		int64_t total = 0;
		for (unsigned i = 0; i < IOD_SCHED_TERMS_N; i++)
			total += (int64_t)w->w[i] * t[i];
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
			out->pub.acc_mask = accs;
			out->pub.mem_numa = mem_numa;
			memcpy(out->pub.terms, t, sizeof(t));
			out->pub.total = total;
			out->numa_mask = cl->numa_mask;
			out->nic = nic;
		}
	}
	if (stage_max == ST_OK && r->numa == IOD_SCHED_NUMA_NONE)
		out->pub.mem_numa = -1;
	return stage_max;
}

static int request_check(const struct iod_sched_request *r, struct iod_err *e);

/* ---- binding ------------------------------------------------------------- */

static int replica_alloc(struct iod_sched_cluster *c, uint32_t *id)
{
	if (c->free_n) {
		*id = c->free_ids[--c->free_n];
		return 0;
	}
	if (c->replicas_hw >= c->replicas_max)
		return -ENOSPC;
	*id = c->replicas_hw++;
	return 0;
}

/* Take `want` PUs from the NUMA nodes in mask (lowest ids first). */
static uint32_t take_cpus(struct node *n, const struct shape *sh, uint8_t mask, uint32_t want,
                          struct iod_bitmap *got)
{
	uint32_t taken = 0;
	for (uint32_t i = 0; i < sh->s.numa_n && taken < want; i++) {
		if (!(mask >> i & 1))
			continue;
		struct iod_bitmap avail = sh->s.numa_cpus[i];
		iod_bitmap_and(&avail, &n->cpu_free);
		for (int b = iod_bitmap_next(&avail, 0); b >= 0 && taken < want;
		     b = iod_bitmap_next(&avail, (unsigned)b + 1)) {
			iod_bitmap_set(got, (unsigned)b);
			iod_bitmap_clear(&n->cpu_free, (unsigned)b);
			n->numa_cpu_free[i]--;
			taken++;
		}
	}
	return taken;
}

/*
 * The CPUs a replica should run on. A replica with exclusive PUs runs there;
 * one that asked for no CPUs shares the PUs of the NUMA nodes its GPUs and
 * memory sit on (NUMA-local, not reserved), so a GPU job without a cpu
 * request still does not cross the socket interconnect.
 */
static void placement_affinity(const struct iod_sched_cluster *c, const struct replica *rep,
                               struct iod_bitmap *out)
{
	const struct shape *sh = &c->shapes[c->nodes[rep->node].shape];
	uint32_t mask = 0;

	if (!iod_bitmap_empty(&rep->cpus)) {
		*out = rep->cpus;
		return;
	}
	iod_bitmap_zero(out);
	for (uint32_t g = 0; g < sh->s.gpus_n; g++)
		if (rep->gpu_mask >> g & 1)
			mask |= 1u << sh->s.gpu_numa[g];
	if (rep->mem_numa >= 0)
		mask |= 1u << rep->mem_numa;
	for (uint32_t i = 0; i < sh->s.numa_n; i++)
		if (mask >> i & 1)
			iod_bitmap_or(out, &sh->s.numa_cpus[i]);
}

int sched_bind(struct iod_sched_cluster *c, uint32_t svc, uint32_t ordinal, const struct cand *cd,
               uint32_t *replica_id)
{
	const struct iod_sched_request *r = &c->services[svc].req;
	struct node *n = &c->nodes[cd->pub.node];
	const struct shape *sh = &c->shapes[n->shape];
	uint32_t id;
	int rc = replica_alloc(c, &id);
	if (rc)
		return rc;
	struct replica *rep = &c->replicas[id];
	memset(rep, 0, sizeof(*rep));
	rep->live = true;
	rep->service = svc;
	rep->ordinal = ordinal;
	rep->node = cd->pub.node;
	IOD_ASSERT((n->gpu_free & cd->pub.gpu_mask) == cd->pub.gpu_mask);
	rep->gpu_mask = cd->pub.gpu_mask;
	n->gpu_free &= ~cd->pub.gpu_mask;
	IOD_ASSERT((n->acc_free & cd->pub.acc_mask) == cd->pub.acc_mask);
	rep->acc_mask = cd->pub.acc_mask;
	n->acc_free &= ~cd->pub.acc_mask;

	const uint8_t all = (uint8_t)((1u << sh->s.numa_n) - 1);
	uint32_t got = 0;
	if (r->numa == IOD_SCHED_NUMA_NONE)
		got = take_cpus(n, sh, all, r->cpus, &rep->cpus);
	else
		got = take_cpus(n, sh, cd->numa_mask, r->cpus, &rep->cpus);
	if (got < r->cpus &&
	    (r->numa == IOD_SCHED_NUMA_NONE || r->numa == IOD_SCHED_NUMA_BEST_EFFORT))
		got += take_cpus(n, sh, all, r->cpus - got, &rep->cpus);
	IOD_ASSERT(got == r->cpus);

	/* memory: one NUMA node when it fits, else interleaved (allowed nodes) */
	uint64_t need = r->mem_bytes;
	int32_t mn = cd->pub.mem_numa;
	if (need && mn >= 0 && n->numa_mem_free[mn] >= need) {
		n->numa_mem_free[mn] -= need;
		rep->mem_take[mn] = need;
		rep->mem_numa = mn;
	} else {
		uint8_t allowed = r->numa == IOD_SCHED_NUMA_RESTRICTED ? cd->numa_mask : all;
		rep->mem_numa = -1;
		for (uint32_t i = 0; i < sh->s.numa_n && need; i++) {
			if (!(allowed >> i & 1))
				continue;
			uint64_t t = IOD_MIN(need, n->numa_mem_free[i]);
			n->numa_mem_free[i] -= t;
			rep->mem_take[i] = t;
			need -= t;
		}
		IOD_ASSERT(need == 0);
		if (r->mem_bytes == 0)
			rep->mem_numa = mn;
	}
	rep->nic = cd->nic;
	if (cd->nic >= 0 && r->nic_bw_bps) {
		IOD_ASSERT(n->nic_free[cd->nic] >= r->nic_bw_bps);
		n->nic_free[cd->nic] -= r->nic_bw_bps;
		rep->nic_bw_bps = r->nic_bw_bps;
	}
	n->replicas++;
	c->services[svc].live++;
	c->cache[cd->pub.node].gen = 0;
	c->version++;
	*replica_id = id;
	return 0;
}

void sched_unbind(struct iod_sched_cluster *c, uint32_t id)
{
	struct replica *rep = &c->replicas[id];
	IOD_ASSERT(rep->live);
	struct node *n = &c->nodes[rep->node];
	const struct shape *sh = &c->shapes[n->shape];
	IOD_ASSERT((n->gpu_free & rep->gpu_mask) == 0);
	n->gpu_free |= rep->gpu_mask;
	IOD_ASSERT((n->acc_free & rep->acc_mask) == 0);
	n->acc_free |= rep->acc_mask;
	for (uint32_t i = 0; i < sh->s.numa_n; i++) {
		struct iod_bitmap mine = rep->cpus;
		iod_bitmap_and(&mine, &sh->s.numa_cpus[i]);
		n->numa_cpu_free[i] += iod_bitmap_count(&mine);
		n->numa_mem_free[i] += rep->mem_take[i];
	}
	iod_bitmap_or(&n->cpu_free, &rep->cpus);
	if (rep->nic >= 0)
		n->nic_free[rep->nic] += rep->nic_bw_bps;
	n->replicas--;
	c->services[rep->service].live--;
	c->cache[rep->node].gen = 0;
	c->version++;
	rep->live = false;
	c->free_ids[c->free_n++] = id;
}

int iod_sched_adopt(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                    const struct iod_sched_existing *x, uint32_t *replica, struct iod_err *e)
{
	int rc = request_check(r, e);
	if (rc)
		return rc;
	if (x->node >= c->nodes_n)
		return iod_err_set(e, -ENOENT, "%s-%u: no node %u", r->service, x->ordinal,
		                   x->node);
	struct node *n = &c->nodes[x->node];
	const struct shape *sh = &c->shapes[n->shape];
	char buf[128];
	if ((x->gpu_mask & n->gpu_free) != x->gpu_mask) {
		iod_sched_gpus_format(x->gpu_mask & ~n->gpu_free, buf, sizeof(buf));
		return iod_err_set(e, -EBUSY, "%s-%u: %s on %s not free", r->service, x->ordinal,
		                   buf, n->name);
	}
	if ((x->acc_mask & n->acc_free) != x->acc_mask) {
		uint32_t bad = x->acc_mask & ~n->acc_free;
		uint32_t i = (uint32_t)__builtin_ctz(bad);
		return iod_err_set(e, i < sh->s.accs_n ? -EBUSY : -ENOENT,
		                   "%s-%u: accelerator %u on %s %s", r->service, x->ordinal, i,
		                   n->name, i < sh->s.accs_n ? "not free" : "does not exist");
	}
	if (!iod_bitmap_subset(&x->cpus, &n->cpu_free)) {
		struct iod_bitmap taken = x->cpus;
		iod_bitmap_andnot(&taken, &n->cpu_free);
		iod_bitmap_format(&taken, buf, sizeof(buf));
		return iod_err_set(e, -EBUSY, "%s-%u: CPUs %s on %s not free", r->service,
		                   x->ordinal, buf, n->name);
	}
	if (x->nic >= (int32_t)sh->s.nics_n || x->mem_numa >= (int32_t)sh->s.numa_n)
		return iod_err_set(e, -ENOENT, "%s-%u: %s has no NIC %d or NUMA node %d",
		                   r->service, x->ordinal, n->name, x->nic, x->mem_numa);
	if (x->nic >= 0 && n->nic_free[x->nic] < r->nic_bw_bps)
		return iod_err_set(e, -EBUSY, "%s-%u: NIC %s on %s lacks the bandwidth", r->service,
		                   x->ordinal, sh->s.nics[x->nic].name, n->name);
	const uint8_t all = (uint8_t)((1u << sh->s.numa_n) - 1);
	if ((x->mem_numa >= 0 ? n->numa_mem_free[x->mem_numa] : mem_in(n, sh, all)) < r->mem_bytes)
		return iod_err_set(e, -EBUSY, "%s-%u: not enough free memory on %s", r->service,
		                   x->ordinal, n->name);
	uint32_t svc;
	rc = service_get(c, r, &svc);
	if (rc)
		return iod_err_set(e, rc, "service %s: too many services", r->service);
	uint32_t id;
	rc = replica_alloc(c, &id);
	if (rc)
		return iod_err_set(e, rc, "the scheduler's replica table is full (%u)",
		                   c->replicas_max);
	struct replica *rep = &c->replicas[id];
	memset(rep, 0, sizeof(*rep));
	rep->live = true;
	rep->service = svc;
	rep->ordinal = x->ordinal;
	rep->node = x->node;
	rep->gpu_mask = x->gpu_mask;
	n->gpu_free &= ~x->gpu_mask;
	rep->acc_mask = x->acc_mask;
	n->acc_free &= ~x->acc_mask;
	rep->cpus = x->cpus;
	iod_bitmap_andnot(&n->cpu_free, &x->cpus);
	for (uint32_t i = 0; i < sh->s.numa_n; i++) {
		struct iod_bitmap mine = x->cpus;
		iod_bitmap_and(&mine, &sh->s.numa_cpus[i]);
		n->numa_cpu_free[i] -= iod_bitmap_count(&mine);
	}
	uint64_t need = r->mem_bytes;
	rep->mem_numa = x->mem_numa;
	for (uint32_t i = 0; i < sh->s.numa_n && need; i++) {
		uint32_t numa = x->mem_numa >= 0 ? (uint32_t)x->mem_numa : i;
		uint64_t t = IOD_MIN(need, n->numa_mem_free[numa]);
		n->numa_mem_free[numa] -= t;
		rep->mem_take[numa] += t;
		need -= t;
	}
	IOD_ASSERT(need == 0);
	rep->nic = x->nic;
	if (x->nic >= 0) {
		n->nic_free[x->nic] -= r->nic_bw_bps;
		rep->nic_bw_bps = r->nic_bw_bps;
	}
	n->replicas++;
	c->services[svc].live++;
	if (c->services[svc].next_ordinal <= x->ordinal)
		c->services[svc].next_ordinal = x->ordinal + 1;
	c->cache[x->node].gen = 0;
	c->version++;
	*replica = id;
	return 0;
}

int iod_sched_release(struct iod_sched_cluster *c, uint32_t replica)
{
	if (replica >= c->replicas_hw || !c->replicas[replica].live)
		return -ENOENT;
	sched_unbind(c, replica);
	return 0;
}

uint32_t sched_whole_islands(const struct iod_sched_cluster *c, uint32_t node_id)
{
	const struct node *n = &c->nodes[node_id];
	const struct shape *sh = &c->shapes[n->shape];
	uint32_t whole = 0;
	for (uint32_t i = 0; i < sh->islands_n; i++) {
		uint32_t isl = sh->islands[i];
		if (popc(isl) >= 2 && (isl & n->gpu_free) == isl)
			whole |= isl;
	}
	return whole;
}

uint32_t iod_sched_islands_free(const struct iod_sched_cluster *c, uint32_t min_size)
{
	uint32_t cnt = 0;
	for (uint32_t j = 0; j < c->nodes_n; j++) {
		const struct node *n = &c->nodes[j];
		const struct shape *sh = &c->shapes[n->shape];
		for (uint32_t i = 0; i < sh->islands_n; i++) {
			uint32_t isl = sh->islands[i];
			if (popc(isl) >= min_size && (isl & n->gpu_free) == isl)
				cnt++;
		}
	}
	return cnt;
}

/* ---- choosing ------------------------------------------------------------ */

static void top_insert(struct iod_sched_explain *x, uint32_t keep, const struct cand *cd)
{
	uint32_t pos = x->cand_n;
	while (pos > 0 && cd->pub.total > x->cand[pos - 1].total)
		pos--;
	if (pos >= keep)
		return;
	uint32_t last = IOD_MIN(x->cand_n, keep - 1);
	for (uint32_t i = last; i > pos; i--)
		x->cand[i] = x->cand[i - 1];
	x->cand[pos] = cd->pub;
	if (x->cand_n < keep)
		x->cand_n++;
}

static bool anti_blocked(const struct iod_sched_cluster *c, uint32_t i,
                         const struct iod_sched_request *r)
{
	const struct node *n = &c->nodes[i];
	return (r->anti == IOD_SCHED_DOMAIN_NODE && c->cnt_node[i]) ||
	       (r->anti == IOD_SCHED_DOMAIN_RACK && c->cnt_rack[n->rack]) ||
	       (r->anti == IOD_SCHED_DOMAIN_ZONE && c->cnt_zone[n->zone]);
}

bool sched_best(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                const struct iod_sched_weights *w, uint32_t skip, bool keep_islands, uint32_t keep,
                bool use_cache, struct cand *best, struct iod_sched_explain *x)
{
	bool found = false;
	const bool spreads = r->stateful || r->spread;
	keep = IOD_MIN(keep, (uint32_t)IOD_SCHED_EXPLAIN_TOP);
	if (x) {
		x->cand_n = 0;
		x->evaluated = 0;
		x->feasible = 0;
		x->weights = *w;
	}
	for (uint32_t i = 0; i < c->nodes_n; i++) {
		if (i == skip)
			continue;
		/* cheap pre-filters before the full evaluation */
		if (popc(c->nodes[i].gpu_free) < r->gpus || popc(c->nodes[i].acc_free) < r->accs ||
		    anti_blocked(c, i, r))
			continue;
		struct cand cd;
		struct near nr;
		if (x)
			x->evaluated++;
		if (use_cache) {
			struct cache_ent *ce = &c->cache[i];
			if (ce->gen != c->cache_gen) {
				ce->stage = sched_eval_node(c, i, r, w, &ce->cd, &nr);
				ce->base =
				    ce->cd.pub.total - (int64_t)w->w[IOD_SCHED_TERM_SPREAD] *
				                           ce->cd.pub.terms[IOD_SCHED_TERM_SPREAD];
				ce->gen = c->cache_gen;
			}
			if (ce->stage != ST_OK)
				continue;
			cd = ce->cd;
			if (spreads) {
				int32_t t = (int32_t)spread_term(c, i);
				cd.pub.terms[IOD_SCHED_TERM_SPREAD] = t;
				cd.pub.total = ce->base + (int64_t)w->w[IOD_SCHED_TERM_SPREAD] * t;
			}
		} else if (sched_eval_node(c, i, r, w, &cd, &nr) != ST_OK) {
			continue;
		}
		if (keep_islands && (cd.pub.gpu_mask & sched_whole_islands(c, i)))
			continue;
		if (x) {
			x->feasible++;
			if (keep)
				top_insert(x, keep, &cd);
		}
		if (!found || cd.pub.total > best->pub.total) {
			*best = cd;
			found = true;
		}
	}
	return found;
}

/* ---- reasons ------------------------------------------------------------- */

static const char *const stage_names[ST_N] = {"cordoned",
                                              "full",
                                              "labels",
                                              "anti-affinity",
                                              "too few GPUs in all",
                                              "free GPUs",
                                              "GPU memory",
                                              "NVLink",
                                              "NUMA policy",
                                              "CPUs",
                                              "memory",
                                              "NIC bandwidth",
                                              "accelerators",
                                              "ok"};

static void gpus_list(const struct iod_sched_shape *s, uint32_t mask, char *buf, size_t len)
{
	IOD_UNUSED(s);
	iod_sched_gpus_format(mask, buf, len);
}

void iod_sched_gpus_format(uint32_t mask, char *buf, size_t len)
{
	size_t off = 0;
	if (len == 0)
		return;
	buf[0] = 0;
	if (!mask) {
		snprintf(buf, len, "none");
		return;
	}
	for (uint32_t m = mask; m; m &= m - 1) {
		int w =
		    snprintf(buf + off, len - off, "%sGPU%d", off ? ", " : "", __builtin_ctz(m));
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += (size_t)w;
	}
}

/* Why no node took the replica: the stage where the last nodes dropped out. */
static enum iod_sched_reason diagnose(struct iod_sched_cluster *c,
                                      const struct iod_sched_request *r,
                                      const struct iod_sched_weights *w, char *why, size_t len)
{
	uint32_t count[ST_N] = {0};
	int top = -1;
	uint32_t best_node = 0;
	struct near best_near = {0};
	if (c->nodes_n == 0) {
		snprintf(why, len, "the cluster has no nodes");
		return IOD_SCHED_REASON_NO_NODES;
	}
	for (uint32_t i = 0; i < c->nodes_n; i++) {
		struct cand cd;
		struct near nr;
		int st = sched_eval_node(c, i, r, w, &cd, &nr);
		count[st]++;
		if (st > top || (st == top && nr.value > best_near.value)) {
			top = st;
			best_node = i;
			best_near = nr;
		}
	}
	IOD_ASSERT(top != ST_OK);
	const struct node *bn = &c->nodes[best_node];
	const struct shape *sh = &c->shapes[bn->shape];
	char gl[128], sz[32], sz2[32];
	gpus_list(&sh->s, best_near.gpus, gl, sizeof(gl));
	enum iod_sched_reason reason;
	int off = 0;
	switch (top) {
	case ST_CORDONED:
		off = snprintf(why, len, "all %u nodes are cordoned", c->nodes_n);
		reason = IOD_SCHED_REASON_NO_NODES;
		break;
	case ST_FULL:
		off = snprintf(why, len,
		               "every schedulable node already holds %u replicas, the most its "
		               "agent runs (IOD_SCHED_NODE_REPLICAS_MAX)",
		               (unsigned)IOD_SCHED_NODE_REPLICAS_MAX);
		reason = IOD_SCHED_REASON_NODE_FULL;
		break;
	case ST_LABELS:
		off = snprintf(why, len, "no schedulable node has the labels");
		for (uint32_t i = 0; i < r->selector_n; i++)
			off += snprintf(why + off, len - (size_t)IOD_MIN((size_t)off, len),
			                " %s=%s", r->selector[i].key, r->selector[i].value);
		reason = IOD_SCHED_REASON_LABELS;
		break;
	case ST_ANTI:
		if (r->anti == IOD_SCHED_DOMAIN_NODE)
			off = snprintf(why, len,
			               "anti-affinity by node: all %u eligible nodes already run a "
			               "replica of %s",
			               count[ST_ANTI], r->service);
		else
			off =
			    snprintf(why, len,
			             "anti-affinity by %s: every eligible node's %s already runs a "
			             "replica of %s (%u nodes)",
			             iod_sched_domain_name(r->anti), iod_sched_domain_name(r->anti),
			             r->service, count[ST_ANTI]);
		reason = IOD_SCHED_REASON_ANTI_AFFINITY;
		break;
	case ST_SMALL:
		off = snprintf(why, len,
		               "needs %u GPUs on one node; the largest node, %s (%s), has %u",
		               r->gpus, bn->name, sh->s.model, sh->s.gpus_n);
		reason = IOD_SCHED_REASON_NODE_TOO_SMALL;
		break;
	case ST_GPUS:
		off = snprintf(why, len,
		               "needs %u GPUs on one node; best candidate %s has %u free (%s)",
		               r->gpus, bn->name, (unsigned)best_near.value, gl);
		reason = IOD_SCHED_REASON_GPUS;
		break;
	case ST_GPU_MEM:
		iod_format_size(r->gpu_mem_bytes, sz, sizeof(sz));
		{
			uint64_t most = 0;
			for (uint32_t g = 0; g < sh->s.gpus_n; g++)
				if ((bn->gpu_free >> g & 1) && sh->s.gpu_mem_bytes[g] > most)
					most = sh->s.gpu_mem_bytes[g];
			iod_format_size(most, sz2, sizeof(sz2));
			off = snprintf(
			    why, len,
			    "needs %u GPUs with %s memory each on one node; best candidate "
			    "%s has %u such free (%s)%s%s",
			    r->gpus, sz, bn->name, (unsigned)best_near.value, gl,
			    best_near.value ? "" : "; its free GPUs have at most ",
			    best_near.value ? "" : sz2);
		}
		reason = IOD_SCHED_REASON_GPU_MEMORY;
		break;
	case ST_LINK:
		off =
		    snprintf(why, len,
		             "needs %u GPUs joined by NVLink on one node; best candidate %s has %u "
		             "free (%s)",
		             r->gpus, bn->name, (unsigned)best_near.value, gl);
		reason = IOD_SCHED_REASON_GPU_LINK;
		break;
	case ST_NUMA:
		if (r->gpus == 0)
			off = snprintf(why, len, "numa %s cannot be met on any node",
			               iod_sched_numa_name(r->numa));
		else if (r->numa == IOD_SCHED_NUMA_SINGLE)
			off = snprintf(
			    why, len,
			    "needs %u GPUs on a single NUMA node (numa: single-numa-node); "
			    "best candidate %s has %u free on NUMA node %d (%s)",
			    r->gpus, bn->name, (unsigned)best_near.value, best_near.where, gl);
		else
			off = snprintf(why, len,
			               "needs %u GPUs on %u NUMA node(s) (numa: restricted); best "
			               "candidate %s has at most %u free on one NUMA node (%s)",
			               r->gpus, sh->min_span[r->gpus], bn->name,
			               (unsigned)best_near.value, gl);
		reason = IOD_SCHED_REASON_NUMA;
		break;
	case ST_CPUS:
		if (r->numa == IOD_SCHED_NUMA_RESTRICTED || r->numa == IOD_SCHED_NUMA_SINGLE)
			off = snprintf(
			    why, len,
			    "needs %u CPUs on the NUMA node(s) of its GPUs (numa: %s); best "
			    "candidate %s has %u free there",
			    r->cpus, iod_sched_numa_name(r->numa), bn->name,
			    (unsigned)best_near.value);
		else
			off = snprintf(why, len, "needs %u CPUs; best candidate %s has %u free",
			               r->cpus, bn->name, (unsigned)best_near.value);
		reason = IOD_SCHED_REASON_CPUS;
		break;
	case ST_MEM:
		iod_format_size(r->mem_bytes, sz, sizeof(sz));
		iod_format_size(best_near.value, sz2, sizeof(sz2));
		if (best_near.where >= 0)
			off = snprintf(
			    why, len,
			    "needs %s memory on the NUMA node(s) of its GPUs (numa: %s); best "
			    "candidate %s has %s free there",
			    sz, iod_sched_numa_name(r->numa), bn->name, sz2);
		else
			off = snprintf(why, len, "needs %s memory; best candidate %s has %s free",
			               sz, bn->name, sz2);
		reason = IOD_SCHED_REASON_MEMORY;
		break;
	case ST_ACC: {
		char al[128] = "none";
		size_t ao = 0;
		for (uint32_t m = (uint32_t)best_near.gpus; m && ao < sizeof(al); m &= m - 1) {
			int wr = snprintf(al + ao, sizeof(al) - ao, "%s%s", ao ? ", " : "",
			                  sh->s.accs[__builtin_ctz(m)].name);
			if (wr < 0)
				break;
			ao += (size_t)wr;
		}
		sz[0] = 0;
		if (r->acc_mem_bytes) {
			char m[24];
			iod_format_size(r->acc_mem_bytes, m, sizeof(m));
			snprintf(sz, sizeof(sz), " with %s", m);
		}
		const char *tn = r->acc_type == IOD_SCHED_ACC_DPU ? "DPU" : "FPGA";
		uint32_t have = 0;
		for (uint32_t i = 0; i < sh->s.accs_n; i++)
			have += sh->s.accs[i].type == r->acc_type;
		if (have == 0)
			off = snprintf(
			    why, len,
			    "needs %u %s%s%s; no node has one (best candidate %s, %s, has "
			    "none)",
			    r->accs, tn, r->accs == 1 ? "" : "s", sz, bn->name, sh->s.model);
		else
			off = snprintf(why, len,
			               "needs %u %s%s%s; best candidate %s has %u of its %u free "
			               "that qualify (%s)",
			               r->accs, tn, r->accs == 1 ? "" : "s", sz, bn->name,
			               (unsigned)best_near.value, have, al);
		if (r->numa == IOD_SCHED_NUMA_RESTRICTED || r->numa == IOD_SCHED_NUMA_SINGLE)
			off += snprintf(why + off, len - (size_t)IOD_MIN((size_t)off, len),
			                " on the NUMA node(s) of its GPUs (numa: %s)",
			                iod_sched_numa_name(r->numa));
		reason = IOD_SCHED_REASON_ACCELERATORS;
		break;
	}
	default:
		iod_format_bandwidth(r->nic_bw_bps, sz, sizeof(sz));
		iod_format_bandwidth(best_near.value, sz2, sizeof(sz2));
		if (sh->s.nics_n == 0)
			off = snprintf(why, len,
			               "needs %s NIC bandwidth; best candidate %s has no NIC", sz,
			               bn->name);
		else
			off = snprintf(
			    why, len, "needs %s NIC bandwidth; best candidate %s has %s free on %s",
			    sz, bn->name, sz2,
			    best_near.where >= 0 ? sh->s.nics[best_near.where].name : "-");
		reason = IOD_SCHED_REASON_NIC;
		break;
	}
	/* what ruled out the other nodes earlier */
	bool first = true;
	for (int st = 0; st < top; st++) {
		if (!count[st] || off < 0 || (size_t)off >= len)
			continue;
		off += snprintf(why + off, len - (size_t)off, "%s%u node%s by %s",
		                first ? "; ruled out earlier: " : ", ", count[st],
		                count[st] == 1 ? "" : "s", stage_names[st]);
		first = false;
	}
	return reason;
}

/* ---- placing a deploy ---------------------------------------------------- */

int iod_sched_result_init(struct iod_sched_result *r, uint32_t cap, uint32_t svc_cap)
{
	memset(r, 0, sizeof(*r));
	r->p = calloc(IOD_MAX(cap, 1u), sizeof(*r->p));
	r->svc = calloc(IOD_MAX(svc_cap, 1u), sizeof(*r->svc));
	if (!r->p || !r->svc) {
		iod_sched_result_free(r);
		return -ENOMEM;
	}
	r->cap = cap;
	r->svc_cap = svc_cap;
	return 0;
}

void iod_sched_result_free(struct iod_sched_result *r)
{
	free(r->p);
	free(r->svc);
	memset(r, 0, sizeof(*r));
}

static int request_check(const struct iod_sched_request *r, struct iod_err *e)
{
	if (!r->service[0] || strnlen(r->service, IOD_NAME_MAX) >= IOD_NAME_MAX - 8)
		return iod_err_set(e, -EINVAL, "a service needs a name of 1..%d characters",
		                   IOD_NAME_MAX - 9);
	if (r->gpus > IOD_SCHED_NODE_GPUS_MAX)
		return iod_err_set(e, -EINVAL,
		                   "service %s: %u GPUs per replica exceed the limit of %u",
		                   r->service, r->gpus, IOD_SCHED_NODE_GPUS_MAX);
	if (r->selector_n > IOD_SCHED_LABELS_MAX)
		return iod_err_set(e, -EINVAL, "service %s: %u selector labels (at most %u)",
		                   r->service, r->selector_n, IOD_SCHED_LABELS_MAX);
	if (r->accs > IOD_SCHED_ACCS_MAX || (r->accs && r->acc_type == IOD_SCHED_ACC_NONE) ||
	    (unsigned)r->acc_type > IOD_SCHED_ACC_FPGA)
		return iod_err_set(e, -EINVAL,
		                   "service %s: %u accelerators of type %u (at most %u, of a type)",
		                   r->service, r->accs, (unsigned)r->acc_type, IOD_SCHED_ACCS_MAX);
	if ((unsigned)r->numa > IOD_SCHED_NUMA_SINGLE ||
	    (unsigned)r->anti > IOD_SCHED_DOMAIN_ZONE ||
	    (unsigned)r->gpu_link > IOD_SCHED_LINK_PCIE)
		return iod_err_set(e, -EINVAL, "service %s: invalid policy value", r->service);
	return 0;
}

/* Undo every placement of request index `req` made in this call. */
static void rollback_request(struct iod_sched_cluster *c, struct iod_sched_result *res,
                             uint32_t req, enum iod_sched_reason reason, const char *why)
{
	for (uint32_t i = res->n; i-- > 0;) {
		struct iod_sched_placement *p = &res->p[i];
		if (p->request != req)
			continue;
		if (p->placed) {
			sched_unbind(c, p->replica);
			p->placed = false;
			res->placed_n--;
			res->unplaced_n++;
		}
		if (p->reason == IOD_SCHED_REASON_NONE || reason == IOD_SCHED_REASON_TRANSACTION ||
		    reason == IOD_SCHED_REASON_GANG) {
			if (p->reason == IOD_SCHED_REASON_NONE) {
				p->reason = reason;
				iod_strlcpy(p->why, why, sizeof(p->why));
			}
		}
	}
	res->svc[req].placed = 0;
}

int iod_sched_place(struct iod_sched_cluster *c, const struct iod_sched_request *reqs, uint32_t n,
                    const struct iod_sched_opts *opts, struct iod_sched_result *res,
                    struct iod_err *e)
{
	struct iod_sched_opts def;
	if (!opts) {
		iod_sched_opts_default(&def);
		opts = &def;
	}
	uint64_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		int rc = request_check(&reqs[i], e);
		if (rc)
			return rc;
		total += reqs[i].replicas;
	}
	if (total > IOD_SCHED_DEPLOY_MAX)
		return iod_err_set(e, -E2BIG, "a deploy of %llu replicas exceeds the limit of %u",
		                   (unsigned long long)total, IOD_SCHED_DEPLOY_MAX);
	if (total > res->cap - res->n)
		return iod_err_set(e, -ENOSPC, "result has room for %u placements, deploy has %llu",
		                   res->cap - res->n, (unsigned long long)total);
	if (n > res->svc_cap - res->svc_n)
		return iod_err_set(e, -ENOSPC, "result has room for %u services, deploy has %u",
		                   res->svc_cap - res->svc_n, n);
	const uint32_t keep = IOD_MIN(opts->explain_top, (uint32_t)IOD_SCHED_EXPLAIN_TOP);
	const uint32_t first_p = res->n;
	const uint32_t first_svc = res->svc_n;

	for (uint32_t ri = 0; ri < n; ri++) {
		const struct iod_sched_request *r = &reqs[ri];
		uint32_t svc;
		int rc = service_get(c, r, &svc);
		if (rc)
			return iod_err_set(e, rc, "service %s: too many services (limit %u)",
			                   r->service, IOD_SCHED_SERVICES_MAX);
		sched_counts_load(c, svc);
		c->cache_gen++; /* a new request: every cached evaluation is stale */
		if (c->cache_gen == 0)
			c->cache_gen = 1;
		/* a replica that failed fails again until the cluster changes */
		uint64_t fail_version = UINT64_MAX;
		enum iod_sched_reason fail_reason = IOD_SCHED_REASON_NONE;
		char fail_why[IOD_SCHED_WHY_MAX] = "";
		struct iod_sched_service_result *sr = &res->svc[res->svc_n++];
		memset(sr, 0, sizeof(*sr));
		iod_strlcpy(sr->service, r->service, sizeof(sr->service));
		sr->requested = r->replicas;
		bool gang_failed = false;
		char gang_why[IOD_SCHED_WHY_MAX] = "";
		const uint32_t req_index = res->svc_n - 1;

		for (uint32_t o = 0; o < r->replicas; o++) {
			struct iod_sched_placement *p = &res->p[res->n++];
			memset(p, 0, sizeof(*p));
			uint32_t ordinal = c->services[svc].next_ordinal++;
			snprintf(p->name, sizeof(p->name), "%s-%u", r->service, ordinal);
			p->request = req_index;
			p->ordinal = ordinal;
			p->mem_numa = -1;
			p->nic = -1;
			if (gang_failed) {
				p->reason = IOD_SCHED_REASON_GANG;
				iod_strlcpy(p->why, gang_why, sizeof(p->why));
				res->unplaced_n++;
				continue;
			}
			struct cand best;
			if ((opts->no_cache || fail_version != c->version) &&
			    sched_best(c, r, &opts->weights, UINT32_MAX, false, keep,
			               !opts->no_cache, &best, &p->explain)) {
				rc = sched_bind(c, svc, ordinal, &best, &p->replica);
				if (rc)
					return iod_err_set(
					    e, rc, "the scheduler's replica table is full (%u)",
					    c->replicas_max);
				const struct replica *rep = &c->replicas[p->replica];
				p->placed = true;
				p->node = rep->node;
				p->gpu_mask = rep->gpu_mask;
				p->acc_mask = rep->acc_mask;
				p->cpus = rep->cpus;
				placement_affinity(c, rep, &p->cpu_affinity);
				p->mem_numa = rep->mem_numa;
				p->nic = rep->nic;
				sched_counts_add(c, rep->node, 1);
				res->placed_n++;
				sr->placed++;
				continue;
			}
			p->explain.cand_n = 0;
			if (!opts->no_cache && fail_version == c->version) {
				p->reason = fail_reason;
				iod_strlcpy(p->why, fail_why, sizeof(p->why));
			} else {
				p->reason = diagnose(c, r, &opts->weights, p->why, sizeof(p->why));
				fail_version = c->version;
				fail_reason = p->reason;
				iod_strlcpy(fail_why, p->why, sizeof(fail_why));
			}
			res->unplaced_n++;
			if (sr->reason == IOD_SCHED_REASON_NONE) {
				sr->reason = p->reason;
				snprintf(sr->why, sizeof(sr->why), "%s: %s", p->name, p->why);
			}
			if (r->gang) {
				gang_failed = true;
				snprintf(
				    gang_why, sizeof(gang_why),
				    "gang: all %u replicas or none, and %s cannot be placed: %s",
				    r->replicas, p->name, p->why);
			}
		}
		if (gang_failed) {
			rollback_request(c, res, req_index, IOD_SCHED_REASON_GANG, gang_why);
			sr->reason = IOD_SCHED_REASON_GANG;
			iod_strlcpy(sr->why, gang_why, sizeof(sr->why));
		}
	}

	if (opts->strict) {
		const char *failed = NULL;
		for (uint32_t i = first_svc; i < res->svc_n && !failed; i++)
			if (res->svc[i].placed < res->svc[i].requested)
				failed = res->svc[i].service;
		if (failed) {
			char why[IOD_SCHED_WHY_MAX];
			snprintf(
			    why, sizeof(why),
			    "strict deploy (all services or none): service %s cannot be placed in "
			    "full",
			    failed);
			for (uint32_t i = res->svc_n; i-- > first_svc;) {
				bool had = res->svc[i].placed > 0;
				rollback_request(c, res, i, IOD_SCHED_REASON_TRANSACTION, why);
				if (had && res->svc[i].reason == IOD_SCHED_REASON_NONE) {
					res->svc[i].reason = IOD_SCHED_REASON_TRANSACTION;
					iod_strlcpy(res->svc[i].why, why, sizeof(res->svc[i].why));
				}
			}
			res->rolled_back = true;
		}
	}
	IOD_ASSERT(res->placed_n + res->unplaced_n == res->n);
	IOD_UNUSED(first_p);
	return 0;
}
