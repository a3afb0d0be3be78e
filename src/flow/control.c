/*
 * control.c: the engine's control path: the pipeline and its pipes, their
 * lookup structures (hash index, priority order, LPM), the entry queue that
 * iod_flow_entries_process() drains between bursts, aging, and the reading
 * back of counters. The packet path is engine.c; both share the key
 * helpers of internal.h. Nothing here runs during a burst.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {
#define X(n, s) s,
    IOD_FLOW_PIPE_KINDS(X)
#undef X
};

const char *iod_flow_pipe_kind_name(unsigned k)
{
	return k < IOD_FLOW_PIPE_KINDS_N ? kind_names[k] : "?";
}

int iod_flow_pipe_kind_parse(const char *s, enum iod_flow_pipe_kind *k)
{
	for (unsigned i = 0; i < IOD_FLOW_PIPE_KINDS_N; i++)
		if (!strcmp(s, kind_names[i])) {
			*k = (enum iod_flow_pipe_kind)i;
			return 0;
		}
	return -EINVAL;
}

const char *iod_flow_op_name(unsigned op)
{
	switch (op) {
	case IOD_FLOW_OP_ADD: return "add";
	case IOD_FLOW_OP_UPDATE: return "update";
	case IOD_FLOW_OP_REMOVE: return "remove";
	case IOD_FLOW_OP_AGED: return "aged";
	default: return "?";
	}
}

/* ---- pipeline and pipes ------------------------------------------------ */

int iod_flow_pipeline_create(struct iod_flow_pipeline **out,
                             const struct iod_flow_pipeline_cfg *cfg, struct iod_err *e)
{
	if (!cfg->cores || cfg->cores > IOD_FLOW_CORES_MAX)
		return iod_err_set(e, -EINVAL, "pipeline: cores must be 1..%d, not %u",
		                   IOD_FLOW_CORES_MAX, cfg->cores);
	if (!cfg->ports || cfg->ports > IOD_IO_PORTS_MAX)
		return iod_err_set(e, -EINVAL, "pipeline: ports must be 1..%d, not %u",
		                   IOD_IO_PORTS_MAX, cfg->ports);
	struct iod_flow_pipeline *pl = calloc(1, sizeof(*pl));
	if (!pl)
		return iod_err_set(e, -ENOMEM, "pipeline: out of memory");
	pl->cfg = *cfg;
	pl->gen = 1;
	for (int i = 0; i < IOD_IO_PORTS_MAX; i++)
		pl->root[i] = -1;
	pl->queue = calloc(IOD_FLOW_QUEUE_MAX, sizeof(*pl->queue));
	pl->cores = aligned_alloc(64, sizeof(struct core) * cfg->cores);
	if (!pl->queue || !pl->cores) {
		free(pl->queue);
		free(pl->cores);
		free(pl);
		return iod_err_set(e, -ENOMEM, "pipeline: out of memory");
	}
	memset(pl->cores, 0, sizeof(struct core) * cfg->cores);
	uint32_t slots = cfg->emc_slots ? cfg->emc_slots : IOD_FLOW_EMC_SLOTS;
	if (slots & (slots - 1) || slots > IOD_FLOW_EMC_SLOTS_MAX) {
		free(pl->queue);
		free(pl->cores);
		free(pl);
		return iod_err_set(e, -EINVAL, "pipeline: emc_slots must be a power of two <= %u",
		                   IOD_FLOW_EMC_SLOTS_MAX);
	}
	pl->emc_mask = slots - 1;
	pl->fp_mask = slots * FP_SLOTS_PER_EMC - 1;
	for (uint32_t c = 0; c < cfg->cores; c++) {
		pl->cores[c].emc = iod_net_table_alloc((size_t)slots * sizeof(struct emc_slot));
		pl->cores[c].mf = calloc(IOD_FLOW_MF_SLOTS, sizeof(struct emc_slot));
		pl->cores[c].masks = calloc(IOD_FLOW_PIPES_MAX, sizeof(struct mf_masks));
		size_t fps = (size_t)slots * FP_SLOTS_PER_EMC;
		pl->cores[c].fp = iod_net_table_alloc(sizeof(struct fp_slot) * fps);
		pl->cores[c].progs = calloc(FP_PROGS, sizeof(struct fp_prog));
		pl->cores[c].prog_index = calloc(2 * FP_PROGS, sizeof(uint16_t));
		if (!pl->cores[c].emc || !pl->cores[c].mf || !pl->cores[c].masks ||
		    !pl->cores[c].fp || !pl->cores[c].progs || !pl->cores[c].prog_index) {
			iod_flow_pipeline_destroy(pl);
			return iod_err_set(e, -ENOMEM, "pipeline: out of memory");
		}
	}
	*out = pl;
	return 0;
}

void iod_flow_pipeline_destroy(struct iod_flow_pipeline *pl)
{
	if (!pl)
		return;
	for (uint32_t i = 0; i < pl->pipes_n; i++) {
		struct pipe *p = &pl->pipes[i];
		free(p->entries);
		free(p->free_stack);
		free(p->index);
		free(p->order);
		free(p->stats);
		free(p->meters);
		free(p->hits);
		free(p->misses);
	}
	for (uint32_t i = 0; i < pl->q_n; i++)
		free(pl->queue[(pl->q_head + i) % IOD_FLOW_QUEUE_MAX].upd);
	for (uint32_t c = 0; c < pl->cfg.cores; c++) {
		free(pl->cores[c].emc);
		free(pl->cores[c].mf);
		free(pl->cores[c].masks);
		free(pl->cores[c].fp);
		free(pl->cores[c].progs);
		free(pl->cores[c].prog_index);
	}
	free(pl->cores);
	free(pl->queue);
	free(pl);
}

void iod_flow_pipeline_invalidate(struct iod_flow_pipeline *pl)
{
	pl->gen++;
}

static int check_fwd(const struct iod_flow_pipeline *pl, const struct iod_flow_fwd *f,
                     const char *what, const char *name, struct iod_err *e)
{
	if (f->type == IOD_FLOW_FWD_PORT && f->port >= pl->cfg.ports)
		return iod_err_set(e, -EINVAL, "pipe %s: %s to port %u, but there are %u ports",
		                   name, what, f->port, pl->cfg.ports);
	if (f->type == IOD_FLOW_FWD_PIPE && f->pipe >= IOD_FLOW_PIPES_MAX)
		return iod_err_set(e, -EINVAL, "pipe %s: %s to pipe %u out of range", name, what,
		                   f->pipe);
	if (f->type == IOD_FLOW_FWD_RSS && !f->rss_queues)
		return iod_err_set(e, -EINVAL, "pipe %s: %s RSS needs at least one queue", name,
		                   what);
	if (f->type > IOD_FLOW_FWD_RSS)
		return iod_err_set(e, -EINVAL, "pipe %s: %s has an unknown type %u", name, what,
		                   f->type);
	return 0;
}

int iod_flow_pipe_create(struct iod_flow_pipeline *pl, const struct iod_flow_pipe_cfg *cfg,
                         struct iod_err *e)
{
	int rc;
	if (pl->pipes_n >= IOD_FLOW_PIPES_MAX)
		return iod_err_set(e, -ENOSPC, "pipe %s: the pipeline already has %d pipes",
		                   cfg->name, IOD_FLOW_PIPES_MAX);
	if ((unsigned)cfg->kind >= IOD_FLOW_PIPE_KINDS_N)
		return iod_err_set(e, -EINVAL, "pipe %s: unknown kind %d", cfg->name, cfg->kind);
	if (iod_flow_pipe_find(pl, cfg->name) >= 0)
		return iod_err_set(e, -EEXIST, "pipe %s: a pipe of that name exists", cfg->name);
	uint32_t max = cfg->kind == IOD_FLOW_PIPE_CT ? 0 : cfg->entries_max;
	if (cfg->kind != IOD_FLOW_PIPE_CT && (!max || max > IOD_FLOW_PIPE_ENTRIES_MAX))
		return iod_err_set(e, -EINVAL, "pipe %s: entries_max must be 1..%u, not %u",
		                   cfg->name, IOD_FLOW_PIPE_ENTRIES_MAX, max);
	if (cfg->is_root && cfg->port >= pl->cfg.ports)
		return iod_err_set(e, -EINVAL, "pipe %s: root of port %u, but there are %u ports",
		                   cfg->name, cfg->port, pl->cfg.ports);
	if (cfg->is_root && pl->root[cfg->port] >= 0)
		return iod_err_set(e, -EEXIST, "pipe %s: port %u already has root pipe %s",
		                   cfg->name, cfg->port, pl->pipes[pl->root[cfg->port]].cfg.name);
	if (cfg->kind == IOD_FLOW_PIPE_CT && !pl->cfg.ct && !pl->cfg.ct_per_core)
		return iod_err_set(e, -EINVAL, "pipe %s: a ct pipe needs a conntrack table",
		                   cfg->name);
	if ((rc = check_fwd(pl, &cfg->fwd, "fwd", cfg->name, e)) ||
	    (rc = check_fwd(pl, &cfg->fwd_miss, "fwd_miss", cfg->name, e)))
		return rc;
	if ((cfg->actions.flags & IOD_FLOW_ACT_LB) && cfg->actions.lb_service >= pl->cfg.services_n)
		return iod_err_set(e, -EINVAL, "pipe %s: lb service %u does not exist", cfg->name,
		                   cfg->actions.lb_service);

	uint32_t id = pl->pipes_n;
	struct pipe *p = &pl->pipes[id];
	memset(p, 0, sizeof(*p));
	p->cfg = *cfg;
	p->cfg.entries_max = max;
	p->umask = cfg->const_mask; /* every lookup consults the constant fields */
	if (cfg->kind == IOD_FLOW_PIPE_BASIC || cfg->kind == IOD_FLOW_PIPE_HASH)
		key_or(&p->umask, &cfg->mask);
	if (cfg->kind == IOD_FLOW_PIPE_LPM) {
		key_or(&p->umask, &cfg->mask);
		p->umask.dst.v4 = 0xffffffff;
		p->umask.family = 0xff;
	}
	uint32_t cores = pl->cfg.cores;
	size_t ctr_bytes = (size_t)cores * PIPE_CTR_STRIDE * sizeof(uint64_t);
	p->hits = aligned_alloc(64, ctr_bytes);
	p->misses = aligned_alloc(64, ctr_bytes);
	if (!p->hits || !p->misses)
		goto nomem;
	memset(p->hits, 0, ctr_bytes);
	memset(p->misses, 0, ctr_bytes);
	if (max) {
		p->entries = calloc(max, sizeof(*p->entries));
		p->free_stack = malloc(sizeof(uint32_t) * max);
		p->stats = calloc((size_t)cores * max, sizeof(*p->stats));
		if (!p->entries || !p->free_stack || !p->stats)
			goto nomem;
		for (uint32_t i = 0; i < max; i++)
			p->free_stack[i] = max - 1 - i;
		p->free_n = max;
		if (cfg->kind == IOD_FLOW_PIPE_BASIC || cfg->kind == IOD_FLOW_PIPE_LPM) {
			uint64_t slots = 16;
			while (slots < (uint64_t)max * 2)
				slots <<= 1;
			p->index = calloc(slots, sizeof(uint64_t));
			p->index_mask = (uint32_t)(slots - 1);
			if (!p->index)
				goto nomem;
		} else {
			p->order = malloc(sizeof(uint32_t) * max);
			if (!p->order)
				goto nomem;
		}
		/* Meter state for pipes that meter, and for small pipes whose entries may. */
		if ((cfg->monitor.flags & IOD_FLOW_MON_METER) || max <= 4096) {
			p->meters = calloc((size_t)cores * max, sizeof(*p->meters));
			if (!p->meters)
				goto nomem;
		}
	}
	pl->pipes_n++;
	if (cfg->is_root)
		pl->root[cfg->port] = (int32_t)id;
	pl->gen++;
	return (int)id;
nomem:
	free(p->hits);
	free(p->misses);
	free(p->entries);
	free(p->free_stack);
	free(p->stats);
	free(p->index);
	free(p->order);
	free(p->meters);
	memset(p, 0, sizeof(*p));
	return iod_err_set(e, -ENOMEM, "pipe %s: out of memory for %u entries", cfg->name, max);
}

int iod_flow_pipe_set_fwd(struct iod_flow_pipeline *pl, uint32_t pipe,
                          const struct iod_flow_fwd *fwd, const struct iod_flow_fwd *fwd_miss)
{
	if (pipe >= pl->pipes_n)
		return -ENOENT;
	struct pipe *p = &pl->pipes[pipe];
	if ((fwd && check_fwd(pl, fwd, "fwd", p->cfg.name, NULL)) ||
	    (fwd_miss && check_fwd(pl, fwd_miss, "fwd_miss", p->cfg.name, NULL)))
		return -EINVAL;
	if (fwd)
		p->cfg.fwd = *fwd;
	if (fwd_miss)
		p->cfg.fwd_miss = *fwd_miss;
	/* Entries that inherit the pipe's fwd follow it. */
	for (uint32_t i = 0; fwd && i < p->cfg.entries_max; i++)
		if (p->entries[i].state != ENTRY_FREE &&
		    p->entries[i].cfg.fwd.type == IOD_FLOW_FWD_NONE)
			p->entries[i].fwd = *fwd;
	pl->gen++;
	return 0;
}

int iod_flow_pipe_find(const struct iod_flow_pipeline *pl, const char *name)
{
	for (uint32_t i = 0; i < pl->pipes_n; i++)
		if (!strcmp(pl->pipes[i].cfg.name, name))
			return (int)i;
	return -ENOENT;
}

uint32_t iod_flow_pipes_n(const struct iod_flow_pipeline *pl)
{
	return pl->pipes_n;
}

const struct iod_flow_pipe_cfg *iod_flow_pipe_cfg_get(const struct iod_flow_pipeline *pl,
                                                      uint32_t pipe)
{
	return pipe < pl->pipes_n ? &pl->pipes[pipe].cfg : NULL;
}

bool iod_flow_entry_next(const struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t *pos,
                         uint32_t *entry, const struct iod_flow_entry_cfg **cfg)
{
	if (pipe >= pl->pipes_n)
		return false;
	const struct pipe *p = &pl->pipes[pipe];
	while (*pos < p->cfg.entries_max) {
		uint32_t i = (*pos)++;
		if (p->entries[i].state == ENTRY_LIVE) {
			*entry = i;
			if (cfg)
				*cfg = &p->entries[i].cfg;
			return true;
		}
	}
	return false;
}

/* ---- lookup structures (control path) ---------------------------------- */

static uint32_t entry_index_hash(const struct pipe *p, const struct entry *en)
{
	if (p->cfg.kind == IOD_FLOW_PIPE_LPM) {
		struct iod_flow_key mask;
		lpm_mask(p, en->cfg.prefix_len, &mask);
		return key_hash_masked(&en->cfg.match, &mask, en->cfg.prefix_len);
	}
	return key_hash_masked(&en->cfg.match, &p->cfg.mask, 0);
}

static bool index_same_key(const struct pipe *p, const struct entry *a, const struct entry *b)
{
	struct iod_flow_key mask;
	if (p->cfg.kind == IOD_FLOW_PIPE_LPM) {
		if (a->cfg.prefix_len != b->cfg.prefix_len)
			return false;
		lpm_mask(p, a->cfg.prefix_len, &mask);
	} else {
		mask = p->cfg.mask;
	}
	return key_match_masked(&a->cfg.match, &b->cfg.match, &mask);
}

static int index_insert(struct pipe *p, uint32_t id)
{
	struct entry *en = &p->entries[id];
	uint32_t h = entry_index_hash(p, en), i = h & p->index_mask;
	while (p->index[i]) {
		const struct entry *o = &p->entries[(uint32_t)p->index[i] - 1];
		if ((uint32_t)(p->index[i] >> 32) == h && index_same_key(p, o, en))
			return -EEXIST;
		i = (i + 1) & p->index_mask;
	}
	p->index[i] = (uint64_t)h << 32 | (id + 1);
	if (p->cfg.kind == IOD_FLOW_PIPE_LPM)
		p->lpm_lens[en->cfg.prefix_len]++;
	return 0;
}

static void index_remove(struct pipe *p, uint32_t id)
{
	struct entry *en = &p->entries[id];
	uint32_t h = entry_index_hash(p, en), mask = p->index_mask, i = h & mask;
	while ((uint32_t)p->index[i] != id + 1) {
		IOD_ASSERT(p->index[i] != 0);
		i = (i + 1) & mask;
	}
	uint32_t hole = i;
	for (uint32_t j = (i + 1) & mask; p->index[j]; j = (j + 1) & mask) {
		uint32_t home = (uint32_t)(p->index[j] >> 32) & mask;
		bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (!in_range) {
			p->index[hole] = p->index[j];
			hole = j;
		}
	}
	p->index[hole] = 0;
	if (p->cfg.kind == IOD_FLOW_PIPE_LPM)
		p->lpm_lens[en->cfg.prefix_len]--;
}

static void order_insert(struct pipe *p, uint32_t id)
{
	uint32_t pos = p->order_n;
	if (p->cfg.kind != IOD_FLOW_PIPE_HASH) {
		uint32_t prio = p->entries[id].cfg.priority;
		/* Stable: equal priorities keep insertion order. */
		while (pos > 0 && p->entries[p->order[pos - 1]].cfg.priority > prio)
			pos--;
		memmove(p->order + pos + 1, p->order + pos, (p->order_n - pos) * sizeof(uint32_t));
	}
	p->order[pos] = id;
	p->order_n++;
}

static void order_remove(struct pipe *p, uint32_t id)
{
	for (uint32_t i = 0; i < p->order_n; i++)
		if (p->order[i] == id) {
			memmove(p->order + i, p->order + i + 1,
			        (p->order_n - i - 1) * sizeof(uint32_t));
			p->order_n--;
			return;
		}
}

static int lookup_insert(struct pipe *p, uint32_t id)
{
	int rc = 0;
	if (p->index)
		rc = index_insert(p, id);
	else
		order_insert(p, id);
	if (!rc) {
		const struct iod_flow_entry_cfg *ec = &p->entries[id].cfg;
		p->entries[id].in_index = 1;
		if (p->cfg.kind == IOD_FLOW_PIPE_CONTROL || p->cfg.kind == IOD_FLOW_PIPE_ACL) {
			/* A lookup may consult any entry's fields (conservative; never shrinks). */
			key_or(&p->umask, &ec->mask);
			if (ec->sport_min || ec->sport_max)
				p->umask.sport = 0xffff;
			if (ec->dport_min || ec->dport_max)
				p->umask.dport = 0xffff;
		}
	}
	return rc;
}

static void lookup_remove(struct pipe *p, uint32_t id)
{
	if (!p->entries[id].in_index)
		return;
	if (p->index)
		index_remove(p, id);
	else
		order_remove(p, id);
	p->entries[id].in_index = 0;
}

/* ---- entries ----------------------------------------------------------- */

static int entry_check(const struct iod_flow_pipeline *pl, const struct pipe *p,
                       const struct iod_flow_entry_cfg *c)
{
	if (c->fwd.type != IOD_FLOW_FWD_NONE && check_fwd(pl, &c->fwd, "fwd", p->cfg.name, NULL))
		return -EINVAL;
	if (p->cfg.kind == IOD_FLOW_PIPE_LPM && c->prefix_len > 32)
		return -EINVAL;
	if ((c->monitor.flags & IOD_FLOW_MON_METER) && !p->meters)
		return -EINVAL; /* meters are declared by the pipe's monitor template */
	uint32_t acts = c->actions.flags | p->cfg.actions.flags;
	if ((acts & IOD_FLOW_ACT_LB) && ((c->actions.flags & IOD_FLOW_ACT_LB
	                                      ? c->actions.lb_service
	                                      : p->cfg.actions.lb_service) >= pl->cfg.services_n))
		return -EINVAL;
	if ((acts & (IOD_FLOW_ACT_LB | IOD_FLOW_ACT_CT_COMMIT)) && !pl->cfg.ct &&
	    !pl->cfg.ct_per_core)
		return -EINVAL;
	return 0;
}

/* Effective actions: the pipe's template, with the entry's values for the
 * flags the entry sets. */
static void entry_derive(struct iod_flow_pipeline *pl, struct pipe *p, uint32_t id, uint64_t now_ns)
{
	struct entry *en = &p->entries[id];
	const struct iod_flow_actions *pa = &p->cfg.actions, *ea = &en->cfg.actions;
	struct iod_flow_actions a = *pa;
	uint32_t ef = ea->flags;
	a.flags |= ef;
	if (ef & IOD_FLOW_ACT_SET_META)
		a.meta = ea->meta;
	if (ef & IOD_FLOW_ACT_SET_ZONE)
		a.zone = ea->zone;
	if (ef & (IOD_FLOW_ACT_NAT_DST | IOD_FLOW_ACT_NAT_SRC)) {
		a.nat_ip = ea->nat_ip;
		a.nat_port = ea->nat_port;
	}
	if (ef & (IOD_FLOW_ACT_SET_MAC | IOD_FLOW_ACT_ARP_REPLY)) {
		memcpy(a.dst_mac, ea->dst_mac, 6);
		memcpy(a.src_mac, ea->src_mac, 6);
	}
	if (ef & IOD_FLOW_ACT_SET_DSCP)
		a.dscp = ea->dscp;
	if (ef & IOD_FLOW_ACT_ARP_REPLY)
		a.arp_ip = ea->arp_ip;
	if (ef & IOD_FLOW_ACT_LB)
		a.lb_service = ea->lb_service;
	if (ef & (IOD_FLOW_ACT_ENCAP | IOD_FLOW_ACT_SET_SPORT))
		a.encap = ea->encap;
	en->act = a;
	if (a.flags & IOD_FLOW_ACT_ENCAP)
		iod_net_vxlan_tmpl_init(&en->encap_tmpl, &a.encap);
	en->fwd = en->cfg.fwd.type != IOD_FLOW_FWD_NONE ? en->cfg.fwd : p->cfg.fwd;
	en->mon = p->cfg.monitor.flags | en->cfg.monitor.flags;
	en->aging_s = en->cfg.monitor.flags & IOD_FLOW_MON_AGING ? en->cfg.monitor.aging_s
	                                                         : p->cfg.monitor.aging_s;
	en->added_ns = now_ns;
	uint32_t max = p->cfg.entries_max;
	for (uint32_t c = 0; c < pl->cfg.cores; c++) {
		memset(&p->stats[(size_t)c * max + id], 0, sizeof(struct estats));
		if (p->meters && (en->mon & IOD_FLOW_MON_METER)) {
			struct iod_net_meter_cfg mc = en->cfg.monitor.flags & IOD_FLOW_MON_METER
			                                  ? en->cfg.monitor.meter
			                                  : p->cfg.monitor.meter;
			/* Each core polices its share of the rate. */
			mc.cir_bytes_per_s /= pl->cfg.cores;
			mc.pir_bytes_per_s /= pl->cfg.cores;
			iod_net_meter_init(&p->meters[(size_t)c * max + id], &mc, now_ns);
		}
	}
}

static int enqueue(struct iod_flow_pipeline *pl, uint8_t op, uint32_t pipe, uint32_t entry,
                   void *user_ctx, struct iod_flow_entry_cfg *upd)
{
	if (pl->q_n >= IOD_FLOW_QUEUE_MAX)
		return -ENOSPC;
	struct op *o = &pl->queue[(pl->q_head + pl->q_n) % IOD_FLOW_QUEUE_MAX];
	o->op = op;
	o->pipe = pipe;
	o->entry = entry;
	o->user_ctx = user_ctx;
	o->upd = upd;
	pl->q_n++;
	return 0;
}

int iod_flow_entry_add(struct iod_flow_pipeline *pl, uint32_t pipe,
                       const struct iod_flow_entry_cfg *cfg, void *user_ctx, uint32_t *entry)
{
	if (pipe >= pl->pipes_n || pl->pipes[pipe].cfg.kind == IOD_FLOW_PIPE_CT)
		return -EINVAL;
	struct pipe *p = &pl->pipes[pipe];
	int rc = entry_check(pl, p, cfg);
	if (rc)
		return rc;
	if (!p->free_n || pl->q_n >= IOD_FLOW_QUEUE_MAX)
		return -ENOSPC;
	uint32_t id = p->free_stack[--p->free_n];
	struct entry *en = &p->entries[id];
	memset(en, 0, sizeof(*en));
	en->cfg = *cfg;
	en->state = ENTRY_PENDING;
	en->user_ctx = user_ctx;
	rc = enqueue(pl, IOD_FLOW_OP_ADD, pipe, id, user_ctx, NULL);
	IOD_ASSERT(rc == 0);
	if (entry)
		*entry = id;
	return 0;
}

int iod_flow_entry_update(struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t entry,
                          const struct iod_flow_entry_cfg *cfg, void *user_ctx)
{
	if (pipe >= pl->pipes_n || entry >= pl->pipes[pipe].cfg.entries_max ||
	    pl->pipes[pipe].entries[entry].state == ENTRY_FREE)
		return -EINVAL;
	int rc = entry_check(pl, &pl->pipes[pipe], cfg);
	if (rc)
		return rc;
	struct iod_flow_entry_cfg *c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = *cfg;
	rc = enqueue(pl, IOD_FLOW_OP_UPDATE, pipe, entry, user_ctx, c);
	if (rc)
		free(c);
	return rc;
}

int iod_flow_entry_remove(struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t entry,
                          void *user_ctx)
{
	if (pipe >= pl->pipes_n || entry >= pl->pipes[pipe].cfg.entries_max ||
	    pl->pipes[pipe].entries[entry].state == ENTRY_FREE)
		return -EINVAL;
	return enqueue(pl, IOD_FLOW_OP_REMOVE, pipe, entry, user_ctx, NULL);
}

static void entry_free(struct pipe *p, uint32_t id)
{
	p->entries[id].state = ENTRY_FREE;
	p->free_stack[p->free_n++] = id;
}

static void report(struct iod_flow_pipeline *pl, void *ctx, uint32_t pipe, uint32_t entry,
                   enum iod_flow_op op, int status)
{
	if (pl->cfg.status_cb)
		pl->cfg.status_cb(ctx, pipe, entry, op, status);
}

uint32_t iod_flow_entries_process(struct iod_flow_pipeline *pl, uint32_t max, uint64_t now_ns)
{
	uint32_t done = 0;
	while (pl->q_n && (!max || done < max)) {
		struct op o = pl->queue[pl->q_head];
		pl->q_head = (pl->q_head + 1) % IOD_FLOW_QUEUE_MAX;
		pl->q_n--;
		done++;
		struct pipe *p = &pl->pipes[o.pipe];
		struct entry *en = &p->entries[o.entry];
		int rc = 0;
		switch (o.op) {
		case IOD_FLOW_OP_ADD:
			if (en->state != ENTRY_PENDING) {
				rc = -ENOENT; /* removed before it was added */
				break;
			}
			entry_derive(pl, p, o.entry, now_ns);
			rc = lookup_insert(p, o.entry);
			if (rc) {
				entry_free(p, o.entry);
				break;
			}
			en->state = ENTRY_LIVE;
			p->live_n++;
			break;
		case IOD_FLOW_OP_UPDATE:
			if (en->state != ENTRY_LIVE) {
				rc = -ENOENT;
				break;
			}
			{
				struct iod_flow_entry_cfg old = en->cfg;
				lookup_remove(p, o.entry);
				en->cfg = *o.upd;
				entry_derive(pl, p, o.entry, now_ns);
				rc = lookup_insert(p, o.entry);
				if (rc) { /* the new key clashes: keep the old entry */
					en->cfg = old;
					entry_derive(pl, p, o.entry, now_ns);
					IOD_ASSERT(lookup_insert(p, o.entry) == 0);
				}
			}
			break;
		case IOD_FLOW_OP_REMOVE:
			if (en->state == ENTRY_FREE) {
				rc = -ENOENT;
				break;
			}
			if (en->state == ENTRY_LIVE) {
				lookup_remove(p, o.entry);
				p->live_n--;
			}
			entry_free(p, o.entry);
			break;
		default: rc = -EINVAL; break;
		}
		free(o.upd);
		pl->gen++;
		report(pl, o.user_ctx, o.pipe, o.entry, (enum iod_flow_op)o.op, rc);
	}
	return done;
}

uint32_t iod_flow_aging_process(struct iod_flow_pipeline *pl, uint64_t now_ns, uint32_t max)
{
	uint32_t aged = 0, examined = 0;
	for (uint32_t n = 0; n < pl->pipes_n && examined < max; n++) {
		uint32_t pi = (pl->aging_pipe + n) % pl->pipes_n;
		struct pipe *p = &pl->pipes[pi];
		uint32_t emax = p->cfg.entries_max;
		for (uint32_t k = 0; k < emax && examined < max; k++, examined++) {
			uint32_t id = p->aging_cursor;
			p->aging_cursor = id + 1 >= emax ? 0 : id + 1;
			struct entry *en = &p->entries[id];
			if (en->state != ENTRY_LIVE || !(en->mon & IOD_FLOW_MON_AGING))
				continue;
			uint64_t last = en->added_ns;
			for (uint32_t c = 0; c < pl->cfg.cores; c++)
				last = IOD_MAX(last, p->stats[(size_t)c * emax + id].last_ns);
			if (now_ns < last + (uint64_t)en->aging_s * IOD_NS_PER_S)
				continue;
			lookup_remove(p, id);
			p->live_n--;
			void *ctx = en->user_ctx;
			entry_free(p, id);
			pl->gen++;
			aged++;
			report(pl, ctx, pi, id, IOD_FLOW_OP_AGED, 0);
		}
		pl->aging_pipe = (pi + 1) % pl->pipes_n;
	}
	return aged;
}

/* ---- reading back ------------------------------------------------------ */

int iod_flow_entry_stats(const struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t entry,
                         struct iod_flow_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (pipe >= pl->pipes_n || entry >= pl->pipes[pipe].cfg.entries_max)
		return -ENOENT;
	const struct pipe *p = &pl->pipes[pipe];
	if (p->entries[entry].state == ENTRY_FREE)
		return -ENOENT;
	for (uint32_t c = 0; c < pl->cfg.cores; c++) {
		const struct estats *s = &p->stats[(size_t)c * p->cfg.entries_max + entry];
		st->packets += s->packets;
		st->bytes += s->bytes;
		st->green += s->color[IOD_NET_GREEN];
		st->yellow += s->color[IOD_NET_YELLOW];
		st->red += s->color[IOD_NET_RED];
	}
	return 0;
}

int iod_flow_pipe_stats(const struct iod_flow_pipeline *pl, uint32_t pipe, uint64_t *hits,
                        uint64_t *misses)
{
	if (pipe >= pl->pipes_n)
		return -ENOENT;
	*hits = *misses = 0;
	for (uint32_t c = 0; c < pl->cfg.cores; c++) {
		*hits += *pipe_ctr(pl->pipes[pipe].hits, c);
		*misses += *pipe_ctr(pl->pipes[pipe].misses, c);
	}
	return 0;
}

void iod_flow_engine_stats(const struct iod_flow_pipeline *pl, struct iod_flow_engine_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (uint32_t c = 0; c < pl->cfg.cores; c++) {
		st->packets += pl->cores[c].packets;
		st->drops += pl->cores[c].drops;
		st->fp_hits += pl->cores[c].fp_hits;
		st->emc_hits += pl->cores[c].emc_hits;
		st->mf_hits += pl->cores[c].mf_hits;
		st->walks += pl->cores[c].walks;
		st->parse_errors += pl->cores[c].parse_errors;
	}
}
