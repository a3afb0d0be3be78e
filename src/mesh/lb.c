/*
 * lb.c: load-balancing policies over a service's endpoints: round robin,
 * smooth weighted round robin (nginx's), least request with the power of two
 * choices, ring hash (Karger) and Maglev (base/maglev.c), with health,
 * outlier ejection, Envoy's panic threshold and locality (same node, then
 * same rack, then any) applied first.
 *
 * Pure: randomness comes in as an iod_rng. pick() works on the stack and
 * never allocates; build() allocates the hash tables on the control path.
 */
#include "iod/mesh.h"

#include <stdlib.h>
#include <string.h>

static uint64_t ep_key(const struct iod_mesh_endpoint *ep)
{
	return iod_hash_str(ep->id);
}

static int cmp_point(const void *a, const void *b)
{
	const struct iod_mesh_ring_point *x = a, *y = b;
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->host < y->host ? -1 : x->host > y->host;
}

void iod_mesh_lb_free(struct iod_mesh_lb_state *lb)
{
	free(lb->ring);
	iod_maglev_free(&lb->maglev);
	memset(lb, 0, sizeof(*lb));
}

int iod_mesh_lb_build(struct iod_mesh_lb_state *lb, const struct iod_mesh_service *s)
{
	IOD_ASSERT(s->eps_n <= IOD_MESH_ENDPOINTS_MAX);
	iod_mesh_lb_free(lb);
	lb->policy = s->lb;
	lb->n = s->eps_n;
	if (!s->eps_n)
		return 0;
	if (s->lb == IOD_MESH_LB_RING_HASH) {
		uint64_t sum_w = 0;
		uint32_t per = IOD_MESH_RING_POINTS, n = s->eps_n, k = 0;
		for (uint32_t i = 0; i < n; i++)
			sum_w += s->eps[i].weight;
		if ((uint64_t)per * n > IOD_MESH_RING_MAX / 2)
			per = IOD_MAX(1u, IOD_MESH_RING_MAX / (2 * n));
		lb->ring = calloc(IOD_MESH_RING_MAX, sizeof(*lb->ring));
		if (!lb->ring)
			return -ENOMEM;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t pts = (uint64_t)per * s->eps[i].weight * n / sum_w;
			uint64_t key = ep_key(&s->eps[i]);
			pts = IOD_MAX(pts, 1u);
			for (uint64_t j = 0; j < pts && k < IOD_MESH_RING_MAX; j++) {
				lb->ring[k].hash = iod_hash_u64(key ^ iod_hash_u64(j + 1));
				lb->ring[k].host = i;
				k++;
			}
		}
		lb->ring_n = k;
		qsort(lb->ring, k, sizeof(*lb->ring), cmp_point);
	} else if (s->lb == IOD_MESH_LB_MAGLEV) {
		uint64_t keys[IOD_MESH_ENDPOINTS_MAX];
		uint32_t w[IOD_MESH_ENDPOINTS_MAX];
		for (uint32_t i = 0; i < s->eps_n; i++) {
			keys[i] = ep_key(&s->eps[i]);
			w[i] = s->eps[i].weight;
		}
		int rc = iod_maglev_build(&lb->maglev, IOD_MAGLEV_DEFAULT_SIZE, keys, w, s->eps_n);
		if (rc)
			return rc;
	}
	return 0;
}

/* A set of candidate hosts: a list (for iteration) and a bitmap (membership). */
struct cand {
	uint32_t idx[IOD_MESH_ENDPOINTS_MAX];
	uint32_t n;
	uint64_t bits[IOD_MESH_ENDPOINTS_MAX / 64];
};

static void cand_add(struct cand *c, uint32_t i)
{
	c->idx[c->n++] = i;
	c->bits[i / 64] |= 1ull << (i % 64);
}

static bool cand_has(const struct cand *c, uint32_t i)
{
	return (c->bits[i / 64] >> (i % 64)) & 1;
}

/* Keep only candidates on the local node; else the local rack; else all. */
static void apply_locality(struct cand *c, const struct iod_mesh_service *s, const char *node,
                           const char *rack)
{
	for (int level = 0; level < 2; level++) {
		const char *want = level == 0 ? node : rack;
		struct cand out;
		if (!want || !*want)
			continue;
		out.n = 0;
		memset(out.bits, 0, sizeof(out.bits));
		for (uint32_t k = 0; k < c->n; k++) {
			const struct iod_mesh_endpoint *ep = &s->eps[c->idx[k]];
			if (!strcmp(level == 0 ? ep->node : ep->rack, want))
				cand_add(&out, c->idx[k]);
		}
		if (out.n) {
			*c = out;
			return;
		}
	}
}

static uint32_t pick_weighted(struct iod_mesh_lb_state *lb, const struct iod_mesh_service *s,
                              const struct cand *c)
{
	int64_t total = 0;
	uint32_t best = c->idx[0];

	for (uint32_t k = 0; k < c->n; k++) {
		uint32_t i = c->idx[k];
		lb->wrr_current[i] += s->eps[i].weight;
		total += s->eps[i].weight;
		if (lb->wrr_current[i] > lb->wrr_current[best])
			best = i;
	}
	lb->wrr_current[best] -= total;
	return best;
}

static uint32_t pick_p2c(const struct iod_mesh_service *s, const struct iod_mesh_outlier *o,
                         const struct cand *c, struct iod_rng *rng)
{
	if (c->n == 1)
		return c->idx[0];
	uint32_t a = (uint32_t)iod_rng_below(rng, c->n);
	uint32_t b = (uint32_t)iod_rng_below(rng, c->n - 1);
	if (b >= a)
		b++;
	uint32_t ha = c->idx[a], hb = c->idx[b];
	/* Fewer active requests per unit of weight wins: (ra+1)/wa vs (rb+1)/wb. */
	uint64_t la = (uint64_t)(o->hosts[ha].active_requests + 1) * s->eps[hb].weight;
	uint64_t lbv = (uint64_t)(o->hosts[hb].active_requests + 1) * s->eps[ha].weight;
	if (la != lbv)
		return la < lbv ? ha : hb;
	return ha;
}

static uint32_t pick_ring(const struct iod_mesh_lb_state *lb, const struct cand *c, uint64_t h)
{
	uint32_t lo = 0, hi = lb->ring_n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (lb->ring[mid].hash < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Walk clockwise to the first usable host: bounded by the ring size. */
	for (uint32_t k = 0; k < lb->ring_n; k++) {
		uint32_t host = lb->ring[(lo + k) % lb->ring_n].host;
		if (cand_has(c, host))
			return host;
	}
	return c->idx[0];
}

static uint32_t pick_maglev(const struct iod_mesh_lb_state *lb, const struct cand *c, uint64_t h)
{
	/* Keys of usable hosts never move; keys of an unusable host are
	 * rehashed (bounded) so they spread over the rest. */
	for (uint32_t k = 0; k < 8; k++) {
		uint32_t host = iod_maglev_lookup(&lb->maglev, h);
		if (host != UINT32_MAX && cand_has(c, host))
			return host;
		h = iod_hash_u64(h + k + 1);
	}
	return c->idx[h % c->n];
}

int iod_mesh_lb_pick(struct iod_mesh_lb_state *lb, const struct iod_mesh_service *s,
                     const struct iod_mesh_outlier *o, const char *local_node,
                     const char *local_rack, uint64_t hash, uint32_t exclude, struct iod_rng *rng,
                     bool *panic)
{
	struct cand c;
	uint32_t usable = 0;

	IOD_ASSERT_HOT(lb->n == s->eps_n && o->n == s->eps_n);
	*panic = false;
	if (!s->eps_n)
		return -EHOSTUNREACH;
	c.n = 0;
	memset(c.bits, 0, sizeof(c.bits));
	for (uint32_t i = 0; i < s->eps_n; i++) {
		if (!s->eps[i].healthy || iod_mesh_outlier_ejected(o, i))
			continue;
		usable++;
		if (i != exclude)
			cand_add(&c, i);
	}
	/* Envoy's panic threshold: too few usable hosts -> balance over all. */
	if (usable == 0 || (uint64_t)usable * 10000u < (uint64_t)s->outlier.panic_bp * s->eps_n) {
		*panic = true;
		c.n = 0;
		memset(c.bits, 0, sizeof(c.bits));
		for (uint32_t i = 0; i < s->eps_n; i++)
			if (i != exclude || s->eps_n == 1)
				cand_add(&c, i);
	} else if (c.n == 0) {
		cand_add(&c, exclude); /* the only usable host is the excluded one */
	}
	bool hashed = lb->policy == IOD_MESH_LB_RING_HASH || lb->policy == IOD_MESH_LB_MAGLEV;
	if (s->locality && !hashed)
		apply_locality(&c, s, local_node, local_rack);
	IOD_ASSERT_HOT(c.n > 0);
	switch (lb->policy) {
	case IOD_MESH_LB_ROUND_ROBIN: return (int)c.idx[lb->rr_next++ % c.n];
	case IOD_MESH_LB_WEIGHTED: return (int)pick_weighted(lb, s, &c);
	case IOD_MESH_LB_LEAST_REQUEST: return (int)pick_p2c(s, o, &c, rng);
	case IOD_MESH_LB_RING_HASH: return (int)pick_ring(lb, &c, hash);
	case IOD_MESH_LB_MAGLEV: return (int)pick_maglev(lb, &c, hash);
	}
	return (int)c.idx[0];
}
