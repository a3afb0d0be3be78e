/*
 * search.c: the exact GPU-set search (every k-subset of a node's free GPUs),
 * memoized per shape on (free mask, k, link).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

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

void sched_nearest_nic(const struct iod_sched_shape *s, uint32_t set, uint8_t numa_mask,
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
		sched_nearest_nic(&sh->s, out->c[i].mask, out->c[i].numa_mask, &out->c[i].nic,
		                  &out->c[i].nic_aff);
}

/* The memoized search; scratch is used when the memo is full. */
const struct memo_entry *sched_search_get(struct shape *sh, uint32_t free_mask, uint32_t k,
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
