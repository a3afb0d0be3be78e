/*
 * internal.h: the flow engine's private structures, shared by engine.c
 * (pipes, entries, the packet path) and dump.c (JSON dumps).
 *
 * Nothing outside src/flow/ may include this; the layout changes freely.
 */
#ifndef IOD_FLOW_INTERNAL_H
#define IOD_FLOW_INTERNAL_H

#include "iod/flow.h"

enum entry_state { ENTRY_FREE = 0, ENTRY_PENDING, ENTRY_LIVE };

/* One entry of a pipe: its configuration and what the engine derived. */
struct entry {
	struct iod_flow_entry_cfg cfg; /* as given (add/update) */
	struct iod_flow_actions act;   /* effective: pipe template | entry */
	struct iod_flow_fwd fwd;       /* effective: entry's, else the pipe's */
	uint32_t mon;                  /* effective monitor flags */
	uint32_t aging_s;              /* effective aging time */
	uint8_t state;                 /* enum entry_state */
	uint8_t in_index;              /* 1 while the lookup structure holds it */
	uint64_t added_ns;             /* when it went live (aging baseline) */
	void *user_ctx;                /* given at add */
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
	uint64_t *hits;               /* per core */
	uint64_t *misses;             /* per core */
	uint32_t aging_cursor;        /* next entry aging examines */
	struct iod_flow_key umask;    /* fields a lookup in this pipe consults */
};

/* A queued entry operation. */
struct op {
	uint8_t op;                     /* enum iod_flow_op */
	uint32_t pipe;                  /* pipe id */
	uint32_t entry;                 /* entry id */
	void *user_ctx;                 /* for the status callback */
	struct iod_flow_entry_cfg *upd; /* UPDATE: the new configuration (owned) */
};

/* The exact-match cache: one walk segment per slot. */
#define EMC_HITS_MAX 8
struct emc_slot {
	struct iod_flow_key key;    /* the segment's starting key */
	uint32_t hash;              /* of key + start */
	uint32_t gen;               /* pipeline generation when cached; 0 = empty */
	uint16_t start;             /* starting pipe */
	uint8_t hits_n;             /* entries hit */
	uint8_t end;                /* END_FWD or END_CT */
	uint8_t mask_id;            /* megaflow: index of its mask in the start pipe's list */
	uint32_t hit[EMC_HITS_MAX]; /* pipe << 24 | entry */
	struct iod_flow_fwd fwd;    /* END_FWD: the terminal forward; END_CT: .pipe = the ct pipe */
};

/* Megaflow masks of one start pipe: the fields walks from it consulted. */
#define MF_MASKS_MAX 8
#define MF_SLOTS 16384
struct mf_masks {
	uint32_t gen;                        /* pipeline generation; stale = empty */
	uint32_t n;                          /* masks in use */
	struct iod_flow_key m[MF_MASKS_MAX]; /* the masks */
	uint8_t order[MF_MASKS_MAX];         /* probe order: most hit first (as OVS's dpcls) */
	uint64_t hits[MF_MASKS_MAX];         /* hits per mask */
};

struct core {
	struct emc_slot *emc;   /* emc_mask + 1 slots */
	uint64_t packets;       /* processed */
	uint64_t drops;         /* dropped */
	uint64_t emc_hits;      /* cache hits */
	uint64_t mf_hits;       /* megaflow hits */
	struct emc_slot *mf;    /* megaflow cache: MF_SLOTS, keys masked */
	struct mf_masks *masks; /* per start pipe: IOD_FLOW_PIPES_MAX */
	uint64_t emc_misses;    /* walks */
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
};

#endif
