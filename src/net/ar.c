/*
 * ar.c: adaptive routing of overlay flows: the policies of include/iod/ar.h.
 *
 * State is a flow table (open addressing keyed by destination and inner flow
 * hash, backward-shift deletion) and a table of destinations, each with up to
 * IOD_AR_PATHS_MAX known paths (a path is an outer source port plus what its
 * probes told us). Everything is allocated in iod_ar_create; select, replies,
 * ECN and ticks never allocate and do bounded work. Time comes from the
 * caller; the only randomness (flowlet) is a seeded iod_rng.
 *
 * This file must never send a packet or read a clock: the data plane and the
 * fabric simulator both drive it, and tests replay it exactly.
 */
#include "iod/ar.h"

#include <stdlib.h>
#include <string.h>

enum flow_state { FLOW_PROBING, FLOW_PINNED, FLOW_ACTIVE };

struct ar_flow {
	uint64_t hash;          /* inner flow hash; 0 = empty slot */
	uint32_t dst;           /* destination edge */
	uint16_t sport;         /* port in use */
	uint8_t state;          /* enum flow_state */
	uint64_t last_ns;       /* last packet: flowlet gaps and aging */
	uint64_t since_ns;      /* when it took sport: a path failing later moves it */
	uint64_t probe_sent_ns; /* minrtt: when this flow's probes left */
	uint32_t races;         /* minrtt: races after the first (each on fresh ports) */
	/* minrtt with a tie window: the best reply so far, pinned when the
	 * window after the first reply closes (or all k replied) */
	uint64_t first_reply_ns; /* first reply's arrival; 0 = none yet */
	uint64_t tie_path_id;    /* the candidate's path identity (0 = unknown) */
	uint16_t tie_sport;      /* the candidate's port */
	uint16_t tie_replies;    /* replies seen within the window */
	uint32_t tie_pins;       /* recent pins to the candidate's path */
	uint32_t tie_slot;       /* its entry in the destination's recent pins */
};

struct ar_path {
	uint16_t sport;              /* port that takes this path */
	uint64_t path_id;            /* identity reported by probes */
	uint64_t links;              /* link signature reported by probes */
	uint32_t weight;             /* clove-ecn share of IOD_AR_WEIGHT_TOTAL */
	int64_t wrr_current;         /* smooth weighted round robin state */
	uint32_t load_ppm;           /* probe-util: reported utilisation */
	uint64_t last_reply_ns;      /* last probe reply */
	uint64_t last_probe_ns;      /* last probe sent */
	uint32_t misses;             /* consecutive probes unanswered within an interval */
	uint64_t congested_until_ns; /* ECN seen: congested until then */
	uint64_t rtt_ns;             /* round trip of its last answered probe (0 = none) */
	uint64_t pinned_ns;          /* minrtt: the last flow pinned to it */
};

struct ar_cand {
	uint16_t sport;   /* candidate port */
	uint64_t path_id; /* path it took */
	uint64_t links;   /* links it used */
	uint64_t rtt_ns;  /* probe round trip */
};

struct ar_dead {
	uint16_t sport;     /* port of a failed path; 0 = empty */
	uint64_t failed_ns; /* when it failed: flows on it since before then move */
};

struct ar_pin {
	uint64_t key;   /* path identity, or 1 << 16 | port when unknown; 0 = empty */
	uint64_t at_ns; /* when a flow was pinned to it */
};

struct ar_dest {
	uint32_t dst;                               /* remote edge */
	struct ar_path paths[IOD_AR_PATHS_MAX];     /* known live paths */
	uint32_t paths_n;                           /* how many */
	struct ar_cand cands[IOD_AR_DISCOVERY_MAX]; /* discovery replies */
	uint32_t cands_n;                           /* how many */
	bool discovering;                           /* discovery probes out */
	uint32_t discover_n;                        /* candidates probed this round */
	uint64_t rounds;                            /* discovery rounds: fresh ports each */
	bool discovered_once;                       /* discover_sent_ns is valid */
	uint64_t discover_sent_ns;                  /* when the last round left */
	struct ar_dead dead[IOD_AR_DEAD_PORTS_MAX]; /* recently failed ports */
	uint32_t dead_next;                         /* ring position */
	struct ar_pin recent[IOD_AR_RECENT_PINS];   /* minrtt: the last pins (tie window) */
	uint32_t recent_next;                       /* ring position */
	uint64_t epoch;                             /* inflight accounting: now / probe_timeout */
	uint32_t inflight[2];                       /* probes unanswered, sent in epoch (i & 1) */
};

struct iod_ar {
	struct iod_ar_config cfg;  /* as created */
	struct iod_ar_stats stats; /* counters */
	struct iod_rng rng;        /* flowlet choices */
	struct ar_flow *flows;     /* flow table */
	uint32_t flows_cap;        /* slots, a power of two */
	uint32_t flows_n;          /* occupied */
	uint32_t age_cursor;       /* next slot to examine for aging */
	struct ar_dest *dests;     /* dests_max destinations */
	uint32_t dests_n;          /* in use */
	struct iod_map dest_index; /* dst + 1 -> index in dests */
	uint32_t range;            /* ports in [sport_min, sport_max] */
};

static const char *const policy_names[] = {
#define X(n, s) s,
    IOD_AR_POLICIES(X)
#undef X
};

const char *iod_ar_policy_name(enum iod_ar_policy p)
{
	return (unsigned)p < IOD_AR_POLICY_COUNT ? policy_names[p] : "?";
}

int iod_ar_policy_parse(const char *s, enum iod_ar_policy *out)
{
	for (unsigned i = 0; i < IOD_AR_POLICY_COUNT; i++) {
		if (strcmp(s, policy_names[i]) == 0) {
			*out = (enum iod_ar_policy)i;
			return 0;
		}
	}
	return -EINVAL;
}

void iod_ar_config_default(struct iod_ar_config *c, enum iod_ar_policy p)
{
	memset(c, 0, sizeof(*c));
	c->policy = p;
	c->sport_min = 32768; /* Linux's default ephemeral range */
	c->sport_max = 60999;
	c->paths = 4;
	c->discovery_ports = 16;
	c->probe_timeout_ns = 50 * IOD_NS_PER_MS; /* DOCA-AR */
	c->flow_idle_ns = 10 * IOD_NS_PER_S;      /* DOCA-AR aging */
	c->flowlet_gap_ns = 100 * IOD_NS_PER_US;
	c->probe_interval_ns = 1 * IOD_NS_PER_MS;
	c->congestion_hold_ns = 200 * IOD_NS_PER_US;
	c->flows_max = 65536;
	c->dests_max = 1024;
	c->probes_inflight_max = 256; /* 64 new minrtt flows (k = 4) at once */
	c->minrtt_tie_ns = 0;         /* DOCA-AR: the first reply wins */
	c->seed = 1;
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t c = 16;
	while (c < n && c < (1u << 30))
		c <<= 1;
	return c;
}

int iod_ar_create(const struct iod_ar_config *cfg, struct iod_ar **out, struct iod_err *e)
{
	struct iod_ar *ar;

	if ((unsigned)cfg->policy >= IOD_AR_POLICY_COUNT)
		return iod_err_set(e, -EINVAL, "adaptive routing: unknown policy %d", cfg->policy);
	if (cfg->sport_max < cfg->sport_min)
		return iod_err_set(e, -EINVAL, "adaptive routing: source port range %u-%u is empty",
		                   cfg->sport_min, cfg->sport_max);
	if (cfg->paths < 1 || cfg->paths > IOD_AR_PATHS_MAX)
		return iod_err_set(e, -EINVAL, "adaptive routing: paths must be 1..%d, not %u",
		                   IOD_AR_PATHS_MAX, cfg->paths);
	if (cfg->discovery_ports < cfg->paths || cfg->discovery_ports > IOD_AR_DISCOVERY_MAX)
		return iod_err_set(e, -EINVAL,
		                   "adaptive routing: discovery_ports must be %u..%d, not %u",
		                   cfg->paths, IOD_AR_DISCOVERY_MAX, cfg->discovery_ports);
	if (!cfg->flows_max || !cfg->dests_max || cfg->flows_max > (1u << 28))
		return iod_err_set(e, -EINVAL,
		                   "adaptive routing: flows_max and dests_max must be > 0");
	if (cfg->probes_inflight_max < cfg->paths ||
	    cfg->probes_inflight_max < cfg->discovery_ports ||
	    cfg->probes_inflight_max > IOD_AR_INFLIGHT_MAX)
		return iod_err_set(e, -EINVAL,
		                   "adaptive routing: probes_inflight_max must be %u..%d, not %u "
		                   "(at least one flow's or one discovery round's probes)",
		                   cfg->paths > cfg->discovery_ports ? cfg->paths
		                                                     : cfg->discovery_ports,
		                   IOD_AR_INFLIGHT_MAX, cfg->probes_inflight_max);
	if (!cfg->probe_interval_ns || !cfg->probe_timeout_ns)
		return iod_err_set(e, -EINVAL,
		                   "adaptive routing: probe interval and timeout must be > 0");
	ar = calloc(1, sizeof(*ar));
	if (!ar)
		return iod_err_set(e, -ENOMEM, "adaptive routing: out of memory");
	ar->cfg = *cfg;
	ar->range = (uint32_t)cfg->sport_max - cfg->sport_min + 1;
	iod_rng_seed(&ar->rng, cfg->seed);
	ar->flows_cap = pow2_at_least(cfg->flows_max * 2);
	ar->flows = calloc(ar->flows_cap, sizeof(*ar->flows));
	ar->dests = calloc(cfg->dests_max, sizeof(*ar->dests));
	if (!ar->flows || !ar->dests ||
	    iod_map_init(&ar->dest_index, cfg->dests_max, cfg->dests_max)) {
		iod_ar_destroy(ar);
		return iod_err_set(e, -ENOMEM, "adaptive routing: out of memory for %u flows",
		                   cfg->flows_max);
	}
	*out = ar;
	return 0;
}

void iod_ar_destroy(struct iod_ar *ar)
{
	if (!ar)
		return;
	free(ar->flows);
	free(ar->dests);
	if (ar->dest_index.slots)
		iod_map_destroy(&ar->dest_index);
	free(ar);
}

const struct iod_ar_config *iod_ar_config(const struct iod_ar *ar)
{
	return &ar->cfg;
}

const struct iod_ar_stats *iod_ar_stats(const struct iod_ar *ar)
{
	return &ar->stats;
}

/* ---- ports ---------------------------------------------------------------- */

static uint16_t hash_port(const struct iod_ar *ar, uint64_t flow_hash)
{
	return (uint16_t)(ar->cfg.sport_min + iod_hash_u64(flow_hash) % ar->range);
}

static uint16_t port_plus(const struct iod_ar *ar, uint16_t p, uint32_t i)
{
	return (uint16_t)(ar->cfg.sport_min + ((uint32_t)(p - ar->cfg.sport_min) + i) % ar->range);
}

/* ---- destinations --------------------------------------------------------- */

static struct ar_dest *dest_find(const struct iod_ar *ar, uint32_t dst)
{
	uint64_t idx;
	if (iod_map_get(&ar->dest_index, (uint64_t)dst + 1, &idx))
		return NULL;
	return &ar->dests[idx];
}

static struct ar_dest *dest_get(struct iod_ar *ar, uint32_t dst)
{
	struct ar_dest *d = dest_find(ar, dst);
	if (d || ar->dests_n == ar->cfg.dests_max)
		return d;
	if (iod_map_put(&ar->dest_index, (uint64_t)dst + 1, ar->dests_n))
		return NULL;
	d = &ar->dests[ar->dests_n++];
	memset(d, 0, sizeof(*d));
	d->dst = dst;
	return d;
}

static struct ar_path *path_find(struct ar_dest *d, uint16_t sport)
{
	for (uint32_t i = 0; i < d->paths_n; i++)
		if (d->paths[i].sport == sport)
			return &d->paths[i];
	return NULL;
}

/* Did the path of sport fail after the flow took it (at since_ns)? A flow
 * moves once per failure: a port that failed before the flow chose it (it
 * may be the flow's hash port, or alive again) does not move it again. */
static bool port_dead(const struct ar_dest *d, uint16_t sport, uint64_t since_ns)
{
	for (uint32_t i = 0; i < IOD_AR_DEAD_PORTS_MAX; i++)
		if (d->dead[i].sport == sport && d->dead[i].failed_ns >= since_ns)
			return true;
	return false;
}

static bool congested(const struct iod_ar *ar, const struct ar_path *p, uint64_t now_ns)
{
	IOD_UNUSED(ar);
	return now_ns < p->congested_until_ns;
}

/* Spread weight over the paths for which ok(path) holds, evenly. */
static void give_weight(struct ar_dest *d, uint32_t amount, const struct ar_path *except,
                        const struct iod_ar *ar, uint64_t now_ns, bool only_uncongested)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < d->paths_n; i++) {
		const struct ar_path *p = &d->paths[i];
		if (p != except && !(only_uncongested && congested(ar, p, now_ns)))
			n++;
	}
	if (!n)
		return;
	uint32_t share = amount / n, rest = amount % n;
	for (uint32_t i = 0; i < d->paths_n; i++) {
		struct ar_path *p = &d->paths[i];
		if (p == except || (only_uncongested && congested(ar, p, now_ns)))
			continue;
		p->weight += share + (rest ? 1 : 0);
		if (rest)
			rest--;
	}
}

/* Remove path i (failed): remember its port, hand its weight to the rest. */
static void path_remove(struct iod_ar *ar, struct ar_dest *d, uint32_t i, uint64_t now_ns)
{
	struct ar_path dead = d->paths[i];

	d->dead[d->dead_next] = (struct ar_dead){dead.sport, now_ns};
	d->dead_next = (d->dead_next + 1) % IOD_AR_DEAD_PORTS_MAX;
	memmove(&d->paths[i], &d->paths[i + 1], sizeof(d->paths[0]) * (d->paths_n - i - 1));
	d->paths_n--;
	give_weight(d, dead.weight, NULL, ar, now_ns, false);
	ar->stats.paths_failed++;
}

static void normalise_weights(struct ar_dest *d)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < d->paths_n; i++)
		sum += d->paths[i].weight;
	if (!d->paths_n)
		return;
	if (!sum) {
		for (uint32_t i = 0; i < d->paths_n; i++)
			d->paths[i].weight = IOD_AR_WEIGHT_TOTAL / d->paths_n;
	} else {
		for (uint32_t i = 0; i < d->paths_n; i++)
			d->paths[i].weight =
			    (uint32_t)((uint64_t)d->paths[i].weight * IOD_AR_WEIGHT_TOTAL / sum);
	}
	uint64_t now_sum = 0;
	for (uint32_t i = 0; i < d->paths_n; i++)
		now_sum += d->paths[i].weight;
	d->paths[0].weight += (uint32_t)(IOD_AR_WEIGHT_TOTAL - now_sum);
}

/* ---- probes --------------------------------------------------------------- */

/*
 * Probes in flight per destination: those sent in this epoch and the last
 * (an epoch is one probe timeout long) that no reply has come back for.
 * Older ones count as lost. Two counters, no per-probe state: a probe's
 * epoch is its send time over the timeout, which its reply echoes.
 */
static void inflight_roll(const struct iod_ar *ar, struct ar_dest *d, uint64_t now_ns)
{
	uint64_t e = now_ns / ar->cfg.probe_timeout_ns;
	if (e == d->epoch)
		return;
	if (e == d->epoch + 1) {
		d->inflight[e & 1] = 0; /* the older of the two epochs has expired */
	} else {
		d->inflight[0] = 0;
		d->inflight[1] = 0;
	}
	d->epoch = e;
}

/* May n more probes of this kind go to d now? Liveness probes of known
 * paths may exceed the bound by a path set, so a burst of new flows cannot
 * starve them and make live paths look dead. */
static bool probe_budget(struct iod_ar *ar, struct ar_dest *d, uint32_t n,
                         enum iod_ar_probe_kind kind, uint64_t now_ns)
{
	uint32_t max =
	    ar->cfg.probes_inflight_max + (kind == IOD_AR_PROBE_PATH ? IOD_AR_PATHS_MAX : 0);
	inflight_roll(ar, d, now_ns);
	if (d->inflight[0] + d->inflight[1] + n <= max)
		return true;
	ar->stats.probes_suppressed += n;
	return false;
}

static void inflight_answered(struct iod_ar *ar, struct ar_dest *d, uint64_t sent_ns,
                              uint64_t now_ns)
{
	uint64_t e = sent_ns / ar->cfg.probe_timeout_ns;
	inflight_roll(ar, d, now_ns);
	if ((e == d->epoch || e + 1 == d->epoch) && d->inflight[e & 1])
		d->inflight[e & 1]--;
}

static void emit(struct iod_ar *ar, struct iod_ar_out *out, struct ar_dest *d, uint16_t sport,
                 enum iod_ar_probe_kind kind, uint64_t flow_hash, uint64_t now_ns)
{
	if (!out)
		return;
	if (out->probes_n == IOD_AR_OUT_PROBES_MAX) {
		out->probes_dropped++;
		return;
	}
	inflight_roll(ar, d, now_ns);
	d->inflight[d->epoch & 1]++;
	out->probes[out->probes_n++] = (struct iod_ar_probe){.dst = d->dst,
	                                                     .sport = sport,
	                                                     .kind = (uint8_t)kind,
	                                                     .flow_hash = flow_hash,
	                                                     .sent_ns = now_ns};
	ar->stats.probes_sent++;
}

/* A pseudo-random port of the range, a function of (key, i) only. */
static uint16_t scatter_port(const struct iod_ar *ar, uint64_t key, uint32_t i)
{
	return (uint16_t)(ar->cfg.sport_min +
	                  iod_hash_u64(key ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull)) % ar->range);
}

static void discover(struct iod_ar *ar, struct ar_dest *d, uint64_t now_ns, struct iod_ar_out *out)
{
	/*
	 * Candidates are pseudo-random ports, fresh each round. Evenly spaced
	 * or consecutive ports are a trap: ECMP hashes are often CRCs, which
	 * are linear, and ports differing only in a few bits can all land on
	 * the same one or two paths (the simulator's CRC-32C does exactly that).
	 */
	uint16_t ports[IOD_AR_DISCOVERY_MAX];
	uint32_t n = 0;
	if (!probe_budget(ar, d, ar->cfg.discovery_ports, IOD_AR_PROBE_DISCOVER, now_ns))
		return; /* retried at the next new flow or tick */
	uint64_t key = iod_hash_u64(((uint64_t)d->dst << 32) ^ d->rounds++);
	for (uint32_t i = 0; n < ar->cfg.discovery_ports && i < 4 * IOD_AR_DISCOVERY_MAX; i++) {
		uint16_t p = scatter_port(ar, key, i);
		bool dup = false;
		for (uint32_t j = 0; j < n && !dup; j++)
			dup = ports[j] == p;
		if (!dup)
			ports[n++] = p;
	}
	d->discovering = true;
	d->discovered_once = true;
	d->discover_sent_ns = now_ns;
	d->discover_n = n;
	d->cands_n = 0;
	for (uint32_t i = 0; i < n; i++)
		emit(ar, out, d, ports[i], IOD_AR_PROBE_DISCOVER, 0, now_ns);
}

/*
 * Choose up to k candidates: fastest first, then each next one on a new path
 * sharing the fewest links with those chosen (ties: lower RTT, lower port).
 * Paths already known and still among the candidates keep their weights.
 */
static void discovery_finish(struct iod_ar *ar, struct ar_dest *d, uint64_t now_ns)
{
	struct ar_path next[IOD_AR_PATHS_MAX];
	bool taken[IOD_AR_DISCOVERY_MAX] = {false};
	uint64_t used_links = 0;
	uint32_t n = 0;

	d->discovering = false;
	while (n < ar->cfg.paths) {
		int best = -1;
		unsigned best_shared = 0;
		for (uint32_t i = 0; i < d->cands_n; i++) {
			const struct ar_cand *c = &d->cands[i];
			bool dup = taken[i];
			for (uint32_t j = 0; j < n && !dup; j++)
				dup = c->path_id && next[j].path_id == c->path_id;
			if (dup)
				continue;
			unsigned shared = (unsigned)__builtin_popcountll(c->links & used_links);
			if (best < 0 || shared < best_shared ||
			    (shared == best_shared && (c->rtt_ns < d->cands[best].rtt_ns ||
			                               (c->rtt_ns == d->cands[best].rtt_ns &&
			                                c->sport < d->cands[best].sport)))) {
				best = (int)i;
				best_shared = shared;
			}
		}
		if (best < 0)
			break;
		taken[best] = true;
		const struct ar_cand *c = &d->cands[best];
		const struct ar_path *old = path_find(d, c->sport);
		next[n] = (struct ar_path){.sport = c->sport,
		                           .path_id = c->path_id,
		                           .links = c->links,
		                           .last_reply_ns = now_ns,
		                           .weight = old ? old->weight
		                                         : IOD_AR_WEIGHT_TOTAL / ar->cfg.paths,
		                           .load_ppm = old ? old->load_ppm : 0,
		                           .congested_until_ns = old ? old->congested_until_ns : 0};
		used_links |= c->links;
		n++;
	}
	if (!n)
		return; /* nothing answered: keep what we had, retry later */
	memcpy(d->paths, next, sizeof(next[0]) * n);
	d->paths_n = n;
	normalise_weights(d);
}

/* ---- flow table ----------------------------------------------------------- */

static uint64_t flow_key(uint32_t dst, uint64_t flow_hash)
{
	return iod_hash_u64(flow_hash ^ ((uint64_t)dst * 0x9e3779b97f4a7c15ull));
}

static struct ar_flow *flow_find(const struct iod_ar *ar, uint32_t dst, uint64_t h)
{
	uint32_t mask = ar->flows_cap - 1;
	for (uint32_t i = (uint32_t)flow_key(dst, h) & mask;; i = (i + 1) & mask) {
		struct ar_flow *f = &ar->flows[i];
		if (!f->hash)
			return NULL;
		if (f->hash == h && f->dst == dst)
			return f;
	}
}

/* Insert; NULL when the table is at flows_max. */
static struct ar_flow *flow_insert(struct iod_ar *ar, uint32_t dst, uint64_t h)
{
	uint32_t mask = ar->flows_cap - 1;
	if (ar->flows_n >= ar->cfg.flows_max)
		return NULL;
	for (uint32_t i = (uint32_t)flow_key(dst, h) & mask;; i = (i + 1) & mask) {
		struct ar_flow *f = &ar->flows[i];
		if (!f->hash) {
			memset(f, 0, sizeof(*f));
			f->hash = h;
			f->dst = dst;
			ar->flows_n++;
			return f;
		}
	}
}

/* Backward-shift delete of slot i. */
static void flow_delete(struct iod_ar *ar, uint32_t i)
{
	uint32_t mask = ar->flows_cap - 1;
	for (uint32_t j = (i + 1) & mask; ar->flows[j].hash; j = (j + 1) & mask) {
		uint32_t home = (uint32_t)flow_key(ar->flows[j].dst, ar->flows[j].hash) & mask;
		bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
		if (!stays) {
			ar->flows[i] = ar->flows[j];
			i = j;
		}
	}
	memset(&ar->flows[i], 0, sizeof(ar->flows[i]));
	ar->flows_n--;
}

/* ---- choosing a path ------------------------------------------------------ */

static uint16_t choose_wrr(struct ar_dest *d)
{
	int64_t total = 0;
	struct ar_path *best = NULL;
	IOD_ASSERT(d->paths_n > 0);
	best = &d->paths[0];
	for (uint32_t i = 0; i < d->paths_n; i++) {
		struct ar_path *p = &d->paths[i];
		p->wrr_current += p->weight;
		total += p->weight;
		if (p->wrr_current > best->wrr_current)
			best = p;
	}
	best->wrr_current -= total;
	return best->sport;
}

static uint16_t choose_least_loaded(const struct ar_dest *d, uint64_t flow_hash)
{
	IOD_ASSERT(d->paths_n > 0);
	const struct ar_path *best = &d->paths[0];
	uint32_t ties = 1;
	for (uint32_t i = 1; i < d->paths_n; i++) {
		const struct ar_path *p = &d->paths[i];
		if (p->load_ppm < best->load_ppm) {
			best = p;
			ties = 1;
		} else if (p->load_ppm == best->load_ppm) {
			/* Break ties by the flow hash so equal paths share flowlets. */
			ties++;
			if (iod_hash_u64(flow_hash + ties) % ties == 0)
				best = p;
		}
	}
	return best->sport;
}

/* Start a flowlet (or a new flow) on a path chosen by the policy. */
static uint16_t new_flowlet(struct iod_ar *ar, struct ar_dest *d, uint64_t flow_hash,
                            uint64_t now_ns, struct iod_ar_out *out)
{
	ar->stats.flowlets++;
	switch (ar->cfg.policy) {
	case IOD_AR_FLOWLET:
		return (uint16_t)(ar->cfg.sport_min + iod_rng_below(&ar->rng, ar->range));
	case IOD_AR_CLOVE_ECN:
	case IOD_AR_PROBE_UTIL:
		if (!d || !d->paths_n) {
			if (d && !d->discovering)
				discover(ar, d, now_ns, out);
			return hash_port(ar, flow_hash);
		}
		return ar->cfg.policy == IOD_AR_CLOVE_ECN ? choose_wrr(d)
		                                          : choose_least_loaded(d, flow_hash);
	default: return hash_port(ar, flow_hash);
	}
}

/* ---- minrtt: pinning ------------------------------------------------------ */

static uint64_t pin_key(uint64_t path_id, uint16_t sport)
{
	return path_id ? path_id : (1ull << 16 | sport);
}

/* Flows this edge pinned (or is about to pin: a candidate in a tie window)
 * to that path within the last probe timeout. */
static uint32_t recent_pins(const struct iod_ar *ar, const struct ar_dest *d, uint64_t key,
                            uint64_t now_ns)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < IOD_AR_RECENT_PINS; i++)
		n += d->recent[i].key == key &&
		     d->recent[i].at_ns + ar->cfg.probe_timeout_ns > now_ns;
	return n;
}

static uint32_t recent_add(struct ar_dest *d, uint64_t key, uint64_t now_ns)
{
	uint32_t slot = d->recent_next;
	d->recent[slot] = (struct ar_pin){key, now_ns};
	d->recent_next = (slot + 1) % IOD_AR_RECENT_PINS;
	return slot;
}

/* Track a port a flow is on as a path of d so its liveness is probed (a
 * flow on an unwatched port never moves). A full set gives up the path
 * pinned to least recently (its flows, if any are left, are no longer
 * watched): the newest flow's path matters more. */
static struct ar_path *track(struct ar_dest *d, uint16_t sport, uint64_t now_ns)
{
	struct ar_path *p = path_find(d, sport);
	if (!p) {
		if (d->paths_n < IOD_AR_PATHS_MAX) {
			p = &d->paths[d->paths_n++];
		} else {
			p = &d->paths[0];
			for (uint32_t i = 1; i < d->paths_n; i++)
				if (d->paths[i].pinned_ns < p->pinned_ns)
					p = &d->paths[i];
		}
		memset(p, 0, sizeof(*p));
		p->sport = sport;
		p->last_probe_ns = now_ns;
		p->last_reply_ns = now_ns;
	}
	p->pinned_ns = now_ns;
	return p;
}

static void pin(struct iod_ar *ar, struct ar_dest *d, struct ar_flow *f, uint16_t sport,
                uint64_t path_id, uint64_t now_ns)
{
	f->sport = sport;
	f->since_ns = now_ns;
	f->state = FLOW_PINNED;
	ar->stats.flows_pinned++;
	if (!ar->cfg.minrtt_tie_ns)
		recent_add(d, pin_key(path_id, sport), now_ns); /* a tie candidate is in already */
	struct ar_path *p = track(d, sport, now_ns);
	p->path_id = path_id;
	p->last_reply_ns = now_ns;
	p->misses = 0;
}

/* The tie window after the first reply has closed: pin the candidate. */
static bool tie_due(const struct iod_ar *ar, const struct ar_flow *f, uint64_t now_ns)
{
	return f->state == FLOW_PROBING && f->first_reply_ns &&
	       now_ns - f->first_reply_ns > ar->cfg.minrtt_tie_ns;
}

static void minrtt_probe(struct iod_ar *ar, struct ar_dest *d, struct ar_flow *f, uint64_t now_ns,
                         struct iod_ar_out *out)
{
	/* the first race from the hash port; a race after a failure from
	 * other ports, so a flow whose k ports all took the failed path (all
	 * on one spine) does not race the same ones again */
	uint16_t base =
	    hash_port(ar, f->races ? f->hash ^ (f->races * 0x9e3779b97f4a7c15ull) : f->hash);
	f->sport = base; /* packets keep flowing on that port meanwhile */
	f->since_ns = now_ns;
	f->probe_sent_ns = now_ns;
	f->first_reply_ns = 0;
	f->tie_replies = 0;
	if (!d || !probe_budget(ar, d, ar->cfg.paths, IOD_AR_PROBE_FLOW, now_ns)) {
		/* Too many probes unanswered: this flow takes the hash port
		 * (ECMP) rather than add to a storm. */
		f->state = FLOW_PINNED;
		return;
	}
	f->state = FLOW_PROBING;
	for (uint32_t i = 0; i < ar->cfg.paths; i++)
		emit(ar, out, d,
		     i && ar->cfg.minrtt_scatter ? scatter_port(ar, f->hash, i)
		                                 : port_plus(ar, base, i),
		     IOD_AR_PROBE_FLOW, f->hash, now_ns);
}

/* minrtt: the watched path of d with the least round trip whose last
 * probe was answered (none missed); NULL when there is none. */
static struct ar_path *best_live_path(struct ar_dest *d)
{
	struct ar_path *best = NULL;
	for (uint32_t i = 0; i < d->paths_n; i++) {
		struct ar_path *p = &d->paths[i];
		if (!p->misses && p->rtt_ns && p->last_reply_ns >= p->last_probe_ns &&
		    (!best || p->rtt_ns < best->rtt_ns))
			best = p;
	}
	return best;
}

uint16_t iod_ar_select(struct iod_ar *ar, uint32_t dst, uint64_t flow_hash, uint64_t now_ns,
                       struct iod_ar_out *out)
{
	struct ar_dest *d;
	struct ar_flow *f;
	struct ar_path *best;

	if (!flow_hash)
		flow_hash = 1;
	if (ar->cfg.policy == IOD_AR_ECMP)
		return hash_port(ar, flow_hash);
	d = dest_get(ar, dst);
	f = flow_find(ar, dst, flow_hash);
	if (!f) {
		f = flow_insert(ar, dst, flow_hash);
		if (!f) {
			ar->stats.flows_table_full++;
			return hash_port(ar, flow_hash);
		}
		ar->stats.flows_new++;
		if (ar->cfg.policy == IOD_AR_MINRTT) {
			minrtt_probe(ar, d, f, now_ns, out);
		} else {
			f->state = FLOW_ACTIVE;
			f->sport = new_flowlet(ar, d, flow_hash, now_ns, out);
			f->since_ns = now_ns;
		}
		f->last_ns = now_ns;
		return f->sport;
	}
	bool moved = d && port_dead(d, f->sport, f->since_ns);
	switch (ar->cfg.policy) {
	case IOD_AR_MINRTT:
		if (moved && (best = best_live_path(d))) {
			/* to the fastest path known to answer: no race, no
			 * packets on the hash port (which may be the failed one) */
			ar->stats.flows_moved++;
			ar->stats.flows_pinned++;
			f->sport = best->sport;
			f->since_ns = now_ns;
			f->state = FLOW_PINNED;
			best->pinned_ns = now_ns;
		} else if (moved) {
			ar->stats.flows_moved++;
			f->races++;
			minrtt_probe(ar, d, f, now_ns, out);
		} else if (d && tie_due(ar, f, now_ns)) {
			pin(ar, d, f, f->tie_sport, f->tie_path_id, now_ns);
		} else if (f->state == FLOW_PROBING &&
		           now_ns - f->probe_sent_ns > ar->cfg.probe_timeout_ns) {
			/* no reply in time: stay on the port it is on, watched,
			 * so a failure there moves it (and it races again) */
			f->state = FLOW_PINNED;
			if (d)
				track(d, f->sport, now_ns);
		}
		break;
	case IOD_AR_CLOVE_ECN:
	case IOD_AR_PROBE_UTIL:
		/* A flow whose port is not (or no longer) among the paths, e.g.
		 * it started on the hash port before discovery ended, moves at
		 * its next flowlet boundary: moving it mid-burst would reorder
		 * its packets. Only a failed path moves it at once. */
	case IOD_AR_FLOWLET:
		if (moved)
			ar->stats.flows_moved++;
		if (moved || now_ns - f->last_ns > ar->cfg.flowlet_gap_ns) {
			f->sport = new_flowlet(ar, d, flow_hash, now_ns, out);
			f->since_ns = now_ns;
		}
		break;
	default: break;
	}
	f->last_ns = now_ns;
	return f->sport;
}

void iod_ar_dest_prepare(struct iod_ar *ar, uint32_t dst, uint64_t now_ns, struct iod_ar_out *out)
{
	if (ar->cfg.policy == IOD_AR_ECMP)
		return;
	struct ar_dest *d = dest_get(ar, dst);
	if (d && !d->paths_n && !d->discovering &&
	    (ar->cfg.policy == IOD_AR_CLOVE_ECN || ar->cfg.policy == IOD_AR_PROBE_UTIL))
		discover(ar, d, now_ns, out);
}

void iod_ar_on_probe_reply(struct iod_ar *ar, const struct iod_ar_probe_reply *r, uint64_t now_ns)
{
	struct ar_dest *d = dest_find(ar, r->dst);
	struct ar_path *p;

	if (!d || now_ns < r->sent_ns) {
		ar->stats.probe_late++;
		return;
	}
	inflight_answered(ar, d, r->sent_ns, now_ns);
	switch (r->kind) {
	case IOD_AR_PROBE_FLOW: {
		struct ar_flow *f = flow_find(ar, r->dst, r->flow_hash);
		if (f && tie_due(ar, f, now_ns))
			pin(ar, d, f, f->tie_sport, f->tie_path_id, now_ns); /* window closed */
		if (!f || f->state != FLOW_PROBING || f->probe_sent_ns != r->sent_ns ||
		    (!f->first_reply_ns && now_ns - r->sent_ns > ar->cfg.probe_timeout_ns)) {
			ar->stats.probe_late++;
			return;
		}
		ar->stats.probe_replies++;
		if (!ar->cfg.minrtt_tie_ns) {
			/* The first reply wins (DOCA-AR). */
			pin(ar, d, f, r->sport, r->path_id, now_ns);
			if ((p = path_find(d, r->sport)))
				p->rtt_ns = now_ns - r->sent_ns;
			return;
		}
		/*
		 * Tie window: flows that start together all see the same queues,
		 * so the first reply sends them all down one path (herding).
		 * Replies within minrtt_tie_ns of the first are as good as the
		 * first; of those, the path this edge pinned the fewest flows to
		 * lately wins (the earliest on a tie). Nothing waits for it:
		 * packets keep the hash port until the pin.
		 */
		uint64_t key = pin_key(r->path_id, r->sport);
		uint32_t pins = recent_pins(ar, d, key, now_ns);
		bool take = true;
		if (!f->first_reply_ns) {
			/* the candidate counts as a pin at once, so flows
			 * whose windows overlap see each other */
			f->first_reply_ns = now_ns;
			f->tie_slot = recent_add(d, key, now_ns);
		} else if (pins < f->tie_pins) {
			struct ar_pin *rp = &d->recent[f->tie_slot];
			if (rp->at_ns == f->first_reply_ns &&
			    rp->key == pin_key(f->tie_path_id, f->tie_sport))
				rp->key = key; /* still ours: move it */
		} else {
			take = false;
		}
		if (take) {
			f->tie_sport = r->sport;
			f->tie_path_id = r->path_id;
			f->tie_pins = pins;
		}
		if (++f->tie_replies >= ar->cfg.paths)
			pin(ar, d, f, f->tie_sport, f->tie_path_id, now_ns);
		return;
	}
	case IOD_AR_PROBE_DISCOVER:
		if (!d->discovering || r->sent_ns != d->discover_sent_ns ||
		    d->cands_n == IOD_AR_DISCOVERY_MAX) {
			ar->stats.probe_late++;
			return;
		}
		for (uint32_t i = 0; i < d->cands_n; i++)
			if (d->cands[i].sport == r->sport)
				return; /* duplicate */
		d->cands[d->cands_n++] =
		    (struct ar_cand){r->sport, r->path_id, r->path_links, now_ns - r->sent_ns};
		ar->stats.probe_replies++;
		if (d->cands_n == d->discover_n)
			discovery_finish(ar, d, now_ns);
		return;
	case IOD_AR_PROBE_PATH:
		p = path_find(d, r->sport);
		if (!p) {
			ar->stats.probe_late++;
			return;
		}
		p->last_reply_ns = now_ns;
		p->misses = 0;
		p->rtt_ns = now_ns - r->sent_ns;
		p->load_ppm = r->load_ppm;
		if (r->path_id)
			p->path_id = r->path_id;
		ar->stats.probe_replies++;
		return;
	default: ar->stats.probe_late++;
	}
}

bool iod_ar_on_ecn(struct iod_ar *ar, uint32_t dst, uint16_t sport, bool ce, uint64_t now_ns)
{
	struct ar_dest *d;
	struct ar_path *p;

	if (!ce)
		return false;
	ar->stats.ecn_events++;
	if (ar->cfg.policy != IOD_AR_CLOVE_ECN)
		return true;
	d = dest_find(ar, dst);
	p = d ? path_find(d, sport) : NULL;
	if (!p)
		return true;
	p->congested_until_ns = now_ns + ar->cfg.congestion_hold_ns;
	bool any_clear = false;
	for (uint32_t i = 0; i < d->paths_n; i++)
		any_clear |= !congested(ar, &d->paths[i], now_ns);
	if (!any_clear) {
		/* Every path is congested: moving weight helps nobody; tell the
		 * inner flow so its own congestion control backs off. */
		ar->stats.ecn_to_inner++;
		return true;
	}
	/* Clove: cut this path's weight by a third, spread it over the rest. */
	uint32_t cut = p->weight / 3;
	p->weight -= cut;
	give_weight(d, cut, p, ar, now_ns, true);
	return false;
}

bool iod_ar_inner_ecn(const struct iod_ar *ar, uint32_t dst, uint64_t now_ns)
{
	if (ar->cfg.policy != IOD_AR_CLOVE_ECN)
		return true;
	const struct ar_dest *d = dest_find(ar, dst);
	if (!d || !d->paths_n)
		return true;
	for (uint32_t i = 0; i < d->paths_n; i++)
		if (!congested(ar, &d->paths[i], now_ns))
			return false;
	return true;
}

void iod_ar_tick(struct iod_ar *ar, uint64_t now_ns, struct iod_ar_out *out)
{
	const struct iod_ar_config *c = &ar->cfg;

	if (c->policy == IOD_AR_ECMP)
		return;
	for (uint32_t di = 0; di < ar->dests_n; di++) {
		struct ar_dest *d = &ar->dests[di];
		if (d->discovering && now_ns - d->discover_sent_ns > c->probe_timeout_ns)
			discovery_finish(ar, d, now_ns);
		/*
		 * Liveness, one probe per path per interval. When the next
		 * probe is due, a previous one with no reply since it left
		 * counts as a miss; any reply clears the count. IOD_AR_MISSES_MAX
		 * misses in a row drop the path: one lost probe never does,
		 * and a path that went silent goes within that many intervals.
		 * A reply slower than an interval still clears the count
		 * before the next-but-one probe, so a slow path is not a dead one.
		 */
		for (uint32_t i = 0; i < d->paths_n;) {
			struct ar_path *p = &d->paths[i];
			if (now_ns - p->last_probe_ns < c->probe_interval_ns ||
			    (out && out->probes_n >= IOD_AR_OUT_PROBES_MAX) ||
			    !probe_budget(ar, d, 1, IOD_AR_PROBE_PATH, now_ns)) {
				i++;
				continue;
			}
			if (p->last_probe_ns > p->last_reply_ns) {
				ar->stats.probe_misses++;
				if (++p->misses >= IOD_AR_MISSES_MAX) {
					path_remove(ar, d, i, now_ns);
					continue;
				}
			}
			p->last_probe_ns = now_ns;
			emit(ar, out, d, p->sport, IOD_AR_PROBE_PATH, 0, now_ns);
			i++;
		}
		/* Too few paths (failures): look for replacements now and then. */
		if ((c->policy == IOD_AR_CLOVE_ECN || c->policy == IOD_AR_PROBE_UTIL) &&
		    !d->discovering && d->discovered_once && d->paths_n < c->paths &&
		    now_ns - d->discover_sent_ns > 10 * c->probe_interval_ns)
			discover(ar, d, now_ns, out);
	}
	/* Age idle flows, a bounded window of slots per call. */
	uint32_t scanned = 0;
	while (scanned < IOD_AR_AGE_SCAN && scanned < ar->flows_cap) {
		uint32_t i = ar->age_cursor;
		struct ar_flow *f = &ar->flows[i];
		if (f->hash && now_ns - f->last_ns > c->flow_idle_ns) {
			flow_delete(ar, i);
			ar->stats.flows_aged++;
			scanned++;
			continue; /* the slot may hold a shifted entry now */
		}
		ar->age_cursor = (i + 1) & (ar->flows_cap - 1);
		scanned++;
	}
}

uint32_t iod_ar_paths(const struct iod_ar *ar, uint32_t dst, struct iod_ar_path_info *paths,
                      uint32_t max, uint64_t now_ns)
{
	const struct ar_dest *d = dest_find(ar, dst);
	uint32_t n = 0;

	for (uint32_t i = 0; d && i < d->paths_n && n < max; i++, n++) {
		const struct ar_path *p = &d->paths[i];
		paths[n] = (struct iod_ar_path_info){.sport = p->sport,
		                                     .path_id = p->path_id,
		                                     .weight = p->weight,
		                                     .load_ppm = p->load_ppm,
		                                     .alive = p->misses == 0,
		                                     .misses = p->misses,
		                                     .congested = congested(ar, p, now_ns),
		                                     .rtt_ns = p->rtt_ns,
		                                     .flows = 0};
	}
	/* the flows on each path now (a walk of the table: for dumps, not
	 * the packet path) */
	for (uint32_t s = 0; d && n && s < ar->flows_cap; s++) {
		const struct ar_flow *f = &ar->flows[s];
		for (uint32_t i = 0; f->hash && f->dst == dst && i < n; i++)
			paths[i].flows += paths[i].sport == f->sport;
	}
	return n;
}

uint16_t iod_ar_flow_port(const struct iod_ar *ar, uint32_t dst, uint64_t flow_hash)
{
	const struct ar_flow *f = flow_find(ar, dst, flow_hash ? flow_hash : 1);
	return f ? f->sport : 0;
}

/* ---- receiver ------------------------------------------------------------- */

struct rx_port {
	uint16_t sport; /* port seen from this edge */
	bool ce;        /* CE seen since last relayed */
};

struct rx_edge {
	uint32_t src;                              /* sending edge */
	struct rx_port ports[IOD_AR_RX_PORTS_MAX]; /* recently seen ports */
	uint32_t ports_n;                          /* how many */
	uint32_t next;                             /* round robin position */
	uint32_t replace;                          /* slot to reuse when full */
	uint64_t last_sent_ns;                     /* last feedback relayed */
	bool sent_once;                            /* last_sent_ns is valid */
};

struct iod_ar_rx {
	struct rx_edge *edges; /* edges_max */
	uint32_t edges_n, edges_max;
	struct iod_map index; /* src + 1 -> edge */
	uint64_t interval_ns; /* relay at most once per this */
};

int iod_ar_rx_create(uint32_t edges_max, uint64_t interval_ns, struct iod_ar_rx **out)
{
	struct iod_ar_rx *rx = calloc(1, sizeof(*rx));
	if (!rx || !edges_max)
		goto fail;
	rx->edges = calloc(edges_max, sizeof(*rx->edges));
	if (!rx->edges || iod_map_init(&rx->index, edges_max, edges_max))
		goto fail;
	rx->edges_max = edges_max;
	rx->interval_ns = interval_ns;
	*out = rx;
	return 0;
fail:
	iod_ar_rx_destroy(rx);
	return edges_max ? -ENOMEM : -EINVAL;
}

void iod_ar_rx_destroy(struct iod_ar_rx *rx)
{
	if (!rx)
		return;
	free(rx->edges);
	if (rx->index.slots)
		iod_map_destroy(&rx->index);
	free(rx);
}

static struct rx_edge *rx_edge(struct iod_ar_rx *rx, uint32_t src, bool create)
{
	uint64_t idx;
	if (!iod_map_get(&rx->index, (uint64_t)src + 1, &idx))
		return &rx->edges[idx];
	if (!create || rx->edges_n == rx->edges_max ||
	    iod_map_put(&rx->index, (uint64_t)src + 1, rx->edges_n))
		return NULL;
	struct rx_edge *e = &rx->edges[rx->edges_n++];
	e->src = src;
	return e;
}

void iod_ar_rx_on_packet(struct iod_ar_rx *rx, uint32_t src, uint16_t sport, bool ce,
                         uint64_t now_ns)
{
	struct rx_edge *e = rx_edge(rx, src, true);
	IOD_UNUSED(now_ns);
	if (!e)
		return;
	for (uint32_t i = 0; i < e->ports_n; i++) {
		if (e->ports[i].sport == sport) {
			e->ports[i].ce |= ce;
			return;
		}
	}
	struct rx_port *p;
	if (e->ports_n < IOD_AR_RX_PORTS_MAX) {
		p = &e->ports[e->ports_n++];
	} else {
		p = &e->ports[e->replace];
		e->replace = (e->replace + 1) % IOD_AR_RX_PORTS_MAX;
	}
	p->sport = sport;
	p->ce = ce;
}

bool iod_ar_rx_feedback(struct iod_ar_rx *rx, uint32_t src, uint64_t now_ns, uint16_t *sport,
                        bool *ce)
{
	struct rx_edge *e = rx_edge(rx, src, false);
	if (!e || !e->ports_n)
		return false;
	if (e->sent_once && now_ns - e->last_sent_ns < rx->interval_ns)
		return false;
	/* Prefer a port with CE pending; else round robin (a clear report). */
	uint32_t pick = e->next % e->ports_n;
	for (uint32_t k = 0; k < e->ports_n; k++) {
		uint32_t i = (e->next + k) % e->ports_n;
		if (e->ports[i].ce) {
			pick = i;
			break;
		}
	}
	*sport = e->ports[pick].sport;
	*ce = e->ports[pick].ce;
	e->ports[pick].ce = false;
	e->next = pick + 1;
	e->last_sent_ns = now_ns;
	e->sent_once = true;
	return true;
}
