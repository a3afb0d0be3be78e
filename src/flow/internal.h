/*
 * internal.h: the flow engine's private structures, shared by engine.c
 * (pipes, entries, the packet path) and dump.c (JSON dumps).
 *
 * Nothing outside src/flow/ may include this; the layout changes freely.
 */
#ifndef IOD_FLOW_INTERNAL_H
#define IOD_FLOW_INTERNAL_H

#include "iod/flow.h"

#include <string.h>

enum entry_state { ENTRY_FREE = 0, ENTRY_PENDING, ENTRY_LIVE };

/* One entry of a pipe: its configuration and what the engine derived. */
struct entry {
	struct iod_flow_entry_cfg cfg;        /* as given (add/update) */
	struct iod_flow_actions act;          /* effective: pipe template | entry */
	struct iod_flow_fwd fwd;              /* effective: entry's, else the pipe's */
	uint32_t mon;                         /* effective monitor flags */
	struct iod_net_vxlan_tmpl encap_tmpl; /* ENCAP: the outer headers, precomputed */
	uint32_t aging_s;                     /* effective aging time */
	uint8_t state;                        /* enum entry_state */
	uint8_t in_index;                     /* 1 while the lookup structure holds it */
	uint64_t added_ns;                    /* when it went live (aging baseline) */
	void *user_ctx;                       /* given at add */
};

/* Per-core, per-entry counters and monitor state. */
struct estats {
	uint64_t packets;  /* hits */
	uint64_t bytes;    /* bytes of hits */
	uint64_t color[3]; /* meter results */
	uint64_t last_ns;  /* last hit (aging) */
};

struct pipe {
	struct iod_flow_pipe_cfg cfg; /* as created (fwd fields may change later) */
	struct entry *entries;        /* entries_max */
	uint32_t *free_stack;         /* free entry ids */
	uint32_t free_n;              /* on the stack */
	uint32_t live_n;              /* live entries */
	/* BASIC / LPM: open-addressing index of tag << 32 | (entry + 1). */
	uint64_t *index;
	uint32_t index_mask;   /* slots - 1 */
	uint32_t lpm_lens[33]; /* LPM: live entries per prefix length */
	/* CONTROL / ACL: entry ids sorted by priority; HASH: dense entry ids. */
	uint32_t *order;
	uint32_t order_n;             /* ids in order */
	struct estats *stats;         /* cores * entries_max */
	struct iod_net_meter *meters; /* cores * entries_max when the pipe meters */
	uint64_t *hits;               /* per core, PIPE_CTR_STRIDE apart (pipe_ctr) */
	uint64_t *misses;             /* per core, PIPE_CTR_STRIDE apart (pipe_ctr) */
	uint32_t aging_cursor;        /* next entry aging examines */
	struct iod_flow_key umask;    /* fields a lookup in this pipe consults */
};

/* A queued entry operation. */
/* A pipe's per-core hit and miss counters lie one cache line apart: the
 * cores of an RSS-sharded pipeline count every packet's conntrack step in
 * them, and adjacent counters bounced one line between the cores. */
#define PIPE_CTR_STRIDE 8u
static inline uint64_t *pipe_ctr(uint64_t *a, uint32_t core)
{
	return &a[(size_t)core * PIPE_CTR_STRIDE];
}

struct op {
	uint8_t op;                     /* enum iod_flow_op */
	uint32_t pipe;                  /* pipe id */
	uint32_t entry;                 /* entry id */
	void *user_ctx;                 /* for the status callback */
	struct iod_flow_entry_cfg *upd; /* UPDATE: the new configuration (owned) */
};

/* The exact-match cache: one walk segment per slot. */
struct emc_slot {
	struct iod_flow_key key; /* the segment's starting key */
	uint32_t hash;           /* of key + start */
	uint32_t gen;            /* pipeline generation when cached; 0 = empty */
	uint16_t start;          /* starting pipe */
	uint8_t hits_n;          /* entries hit */
	uint8_t end;             /* END_FWD or END_CT */
	uint8_t mask_id;         /* megaflow: index of its mask in the start pipe's list */
	uint32_t hit[IOD_FLOW_EMC_HITS_MAX]; /* pipe << 24 | entry */
	struct iod_flow_fwd fwd; /* END_FWD: the terminal forward; END_CT: .pipe = the ct pipe */
};

/* Megaflow masks of one start pipe: the fields walks from it consulted. */
struct mf_masks {
	uint32_t gen;                                 /* pipeline generation; stale = empty */
	uint32_t n;                                   /* masks in use */
	struct iod_flow_key m[IOD_FLOW_MF_MASKS_MAX]; /* the masks */
	uint8_t order[IOD_FLOW_MF_MASKS_MAX]; /* probe order: most hit first (as OVS's dpcls) */
	uint64_t hits[IOD_FLOW_MF_MASKS_MAX]; /* hits per mask */
};

/*
 * The compiled fast path. A flow's first fully traced packet (every entry it
 * hit, in order, and at most one conntrack step that found an established
 * session) is compiled into a program: one op per thing the replay would do
 * (an entry's counter or monitors, its actions, the conntrack step and the
 * session's NAT). Programs are shared by flows that compile alike (same
 * entries, same NAT target) and live per core for one pipeline generation.
 * A flow slot, keyed by the packet's exact starting key, names its program
 * and its conntrack session (entry + commit generation + direction).
 */
enum fp_code {
	FP_COUNT = 1, /* st: packets, bytes, last_ns */
	FP_MON,       /* st, mt; arg: FP_MON_* bits; port: mirror port */
	FP_DECAP,     /* strip VXLAN */
	FP_NAT_DST,   /* entry NAT: ip, port (failure drops) */
	FP_NAT_SRC,   /* entry NAT: ip, port (failure drops) */
	FP_CT,        /* conntrack: touch the session, count the ct pipe (hits); then the
	               * session's NAT (arg bit 3): ip, port, arg bit 0 = destination */
	FP_DSCP,      /* arg: DSCP */
	FP_TTL,       /* decrement TTL (drop at 0) */
	FP_ENCAP,     /* tmpl; port: SET_SPORT's port or 0; ip: VNI; arg 1: update meta */
	FP_SPORT,     /* port: outer source port of an encapsulated frame */
	FP_SET_MAC,   /* a: the entry's actions (MACs) */
	FP_MAC_SWAP,  /* swap MACs */
};

#define FP_MON_METER 0x01    /* meter the packet */
#define FP_MON_PASS_RED 0x02 /* red is marked, not dropped */
#define FP_MON_MIRROR 0x04   /* set the mirror port */

struct fp_op {
	uint8_t code;  /* enum fp_code */
	uint8_t arg;   /* per code */
	uint16_t port; /* per code */
	uint32_t ip;   /* per code */
	union {
		struct estats *st;                /* COUNT, MON: the entry's counters (this core) */
		uint64_t *hits;                   /* CT: the ct pipe's hits (this core) */
		const struct iod_flow_actions *a; /* SET_MAC: the entry's actions */
		const struct iod_net_vxlan_tmpl *tmpl; /* ENCAP: the entry's outer headers */
	} u;                                           /* per code */
	struct iod_net_meter *mt;                      /* MON: the meter (this core), or NULL */
};

/* Short names for the limits (include/iod/limits.h says why). */
#define FP_OPS_MAX IOD_FLOW_FP_OPS_MAX
#define FP_SLOTS_PER_EMC IOD_FLOW_FP_SLOTS_PER_EMC
#define FP_PROGS IOD_FLOW_FP_PROGS
#define FP_EVICT_INV 16u /* one miss on a full set in 16 evicts a way (fp_victim) */
struct fp_prog {
	uint32_t hash;                /* of the ops (dedup) */
	uint8_t n;                    /* ops */
	uint8_t ct_at;                /* index of the FP_CT op, n when none */
	uint16_t pad;                 /* zero */
	struct iod_flow_fwd fwd;      /* the terminal forward */
	struct fp_op ops[FP_OPS_MAX]; /* in replay order */
};

/* A flow slot: one cache line. The starting key of an IPv4 (or non-IP)
 * packet packed into four words without losing a bit (an IPv6 key is not
 * compiled: it takes the caches and the walk). */
struct fp_slot {
	uint64_t ck[4];      /* the starting key, packed (fp_pack) */
	uint32_t gen;        /* pipeline generation when compiled; 0 = empty */
	uint32_t hash;       /* of ck */
	uint32_t ct_entry;   /* conntrack session (when the program has FP_CT) */
	uint32_t ct_gen;     /* its commit generation */
	uint16_t prog;       /* index into the core's programs */
	uint8_t ct_dir;      /* 1 = reply direction */
	uint8_t pad1;        /* zero */
	uint32_t tuple_hash; /* the flow hash of the key's tuple (iod_net_meta.hash) */
	uint8_t pad[8];      /* to one cache line */
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct fp_slot) == 64, "a flow slot is one cache line");

struct core {
	struct emc_slot *emc;   /* emc_mask + 1 slots */
	struct fp_slot *fp;     /* compiled flows: emc_mask + 1 slots, 2-way sets */
	struct fp_prog *progs;  /* FP_PROGS programs of generation progs_gen */
	uint16_t *prog_index;   /* 2 * FP_PROGS: program id + 1 by hash (dedup) */
	uint32_t progs_n;       /* programs in use */
	uint32_t progs_gen;     /* pipeline generation of the programs */
	uint64_t fp_hits;       /* compiled fast-path hits */
	uint32_t fp_evict_tick; /* misses on full sets: every FP_EVICT_INV-th evicts */
	uint64_t packets;       /* processed */
	uint64_t drops;         /* dropped */
	uint64_t emc_hits;      /* exact-match cache hits */
	uint64_t mf_hits;       /* megaflow hits */
	struct emc_slot *mf;    /* megaflow cache: IOD_FLOW_MF_SLOTS, keys masked */
	struct mf_masks *masks; /* per start pipe: IOD_FLOW_PIPES_MAX */
	uint64_t walks;         /* walks */
	uint64_t parse_errors;  /* unparseable */
} __attribute__((aligned(64)));

struct iod_flow_pipeline {
	struct iod_flow_pipeline_cfg cfg;      /* as created */
	struct pipe pipes[IOD_FLOW_PIPES_MAX]; /* pipes_n in use */
	uint32_t pipes_n;                      /* pipes */
	int32_t root[IOD_IO_PORTS_MAX];        /* root pipe per port, -1 = none */
	struct op *queue;                      /* ring of IOD_FLOW_QUEUE_MAX */
	uint32_t q_head;                       /* next to process */
	uint32_t q_n;                          /* queued */
	uint32_t gen;                          /* bumped on any change: invalidates EMCs */
	struct core *cores;                    /* cfg.cores */
	uint32_t aging_pipe;                   /* next pipe aging examines */
	uint32_t emc_mask;                     /* EMC slots - 1 */
	uint32_t fp_mask;                      /* flow slots - 1 (FP_SLOTS_PER_EMC per EMC slot) */
};

/* ---- key helpers (the control and the packet path) ---------------------- */

typedef uint64_t __attribute__((may_alias, aligned(1))) kword;

static inline const kword *kw(const struct iod_flow_key *k)
{
	return (const kword *)(const void *)k;
}

static inline bool key_match_masked(const struct iod_flow_key *k, const struct iod_flow_key *v,
                                    const struct iod_flow_key *mask)
{
	const kword *a = kw(k), *b = kw(v), *m = kw(mask);
	uint64_t d = ((a[0] ^ b[0]) & m[0]) | ((a[1] ^ b[1]) & m[1]) | ((a[2] ^ b[2]) & m[2]) |
	             ((a[3] ^ b[3]) & m[3]) | ((a[4] ^ b[4]) & m[4]) | ((a[5] ^ b[5]) & m[5]) |
	             ((a[6] ^ b[6]) & m[6]) | ((a[7] ^ b[7]) & m[7]);
	return d == 0;
}

static inline uint32_t key_hash_masked(const struct iod_flow_key *k,
                                       const struct iod_flow_key *mask, uint32_t salt)
{
	const kword *a = kw(k), *m = kw(mask);
	uint64_t h = 0x9e3779b97f4a7c15ull ^ salt;
	for (int i = 0; i < 8; i++)
		h = (h ^ (a[i] & m[i])) * 0xff51afd7ed558ccdull + (h >> 29);
	return (uint32_t)(iod_hash_u64(h) >> 32);
}

static inline uint32_t key_hash(const struct iod_flow_key *k, uint32_t start)
{
	/* Independent multiplies (they pipeline), then one finaliser. */
	const kword *a = kw(k);
	uint64_t h = (a[0] ^ start) * 0x9e3779b97f4a7c15ull + a[1] * 0xc2b2ae3d27d4eb4full +
	             a[2] * 0x165667b19e3779f9ull + a[3] * 0x27d4eb2f165667c5ull +
	             a[4] * 0x94d049bb133111ebull + a[5] * 0xbf58476d1ce4e5b9ull +
	             a[6] * 0xff51afd7ed558ccdull + a[7] * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	return (uint32_t)(h >> 32);
}

/* k & m into out. */
static inline void key_and(const struct iod_flow_key *k, const struct iod_flow_key *m,
                           struct iod_flow_key *out)
{
	const kword *a = kw(k), *b = kw(m);
	kword *o = (kword *)(void *)out;
	/* Written out: -O2 keeps an 8-trip loop as a loop (counter, compare,
	 * branch per word) on the per-packet megaflow probe. */
	o[0] = a[0] & b[0];
	o[1] = a[1] & b[1];
	o[2] = a[2] & b[2];
	o[3] = a[3] & b[3];
	o[4] = a[4] & b[4];
	o[5] = a[5] & b[5];
	o[6] = a[6] & b[6];
	o[7] = a[7] & b[7];
}

static inline void key_or(struct iod_flow_key *acc, const struct iod_flow_key *m)
{
	kword *a = (kword *)(void *)acc;
	const kword *b = kw(m);
	for (int i = 0; i < 8; i++)
		a[i] |= b[i];
}

/* Exact comparison of two keys. */
static inline bool key_equal(const struct iod_flow_key *x, const struct iod_flow_key *y)
{
	const kword *a = kw(x), *b = kw(y);
	uint64_t d = (a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4]) |
	             (a[5] ^ b[5]) | (a[6] ^ b[6]) | (a[7] ^ b[7]);
	return d == 0;
}

static inline void key_tuple(const struct iod_flow_key *k, struct iod_net_tuple *t)
{
	memset(t, 0, sizeof(*t));
	t->src = k->src;
	t->dst = k->dst;
	t->sport = k->sport;
	t->dport = k->dport;
	t->proto = k->proto;
	t->family = k->family;
	t->zone = k->zone;
}

/* An LPM mask: destination IPv4 prefix of length plen (plus the pipe's mask). */
static inline void lpm_mask(const struct pipe *p, uint8_t plen, struct iod_flow_key *mask)
{
	*mask = p->cfg.mask;
	mask->dst.w[0] = mask->dst.w[1] = 0;
	mask->dst.v4 = plen ? ~0u << (32 - plen) : 0;
}

#endif
