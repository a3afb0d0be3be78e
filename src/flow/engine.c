/*
 * engine.c: the packet path of iod's match/action engine (iod_flow_burst).
 * The pipes, their lookup structures, the entry queue, aging and the
 * counters' read-back are the control path, in control.c.
 *
 * The packet path parses each frame once, builds a 64-byte key, and looks the
 * (start pipe, key) pair up in the core's exact-match cache; on a miss it
 * walks the pipes (without side effects, tracking how actions change the key)
 * and caches the list of entries hit. Then the same replay applies the
 * entries' actions and monitors to the packet. A ct pipe ends a cached
 * segment (conntrack state is per packet); the walk resumes after it with
 * ct_state in the key, as OVS recirculates after ct().
 *
 * The packet path never allocates, never locks and never reads the clock;
 * entry changes happen only in iod_flow_entries_process(), never during a
 * burst.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- keys -------------------------------------------------------------- */

void iod_flow_key_from_meta(struct iod_flow_key *k, const struct iod_net_meta *m, uint16_t port_in)
{
	bool tun = m->flags & IOD_NET_F_VXLAN;
	memset(k, 0, sizeof(*k));
	k->in_port = port_in;
	k->vni = tun ? m->vni : 0;
	k->eth_type = tun ? m->in_ethertype : m->ethertype;
	k->proto = m->key.proto;
	k->tcp_flags = m->tcp_flags;
	k->src = m->key.src;
	k->dst = m->key.dst;
	k->sport = m->key.sport;
	k->dport = m->key.dport;
	k->outer_dst_ip = tun && m->outer.family == IOD_NET_AF_V4 ? m->outer.dst.v4 : 0;
	k->family = m->key.family;
	k->vlan = m->vlan_tci & 0x0fff;
	k->dscp = m->ip_tos >> 2;
	k->tunnelled = tun;
}

/* Keys are read and written as eight 64-bit words in place: no copies
 * through the stack (they cost store-forwarding stalls on the packet path). */
/* ---- the walk ---------------------------------------------------------- */

static struct iod_net_ct *core_ct(const struct iod_flow_pipeline *pl, uint32_t core)
{
	return pl->cfg.ct_per_core ? pl->cfg.ct_per_core[core] : pl->cfg.ct;
}

/* Find the matching entry of pipe p for key k; UINT32_MAX on a miss. */
static uint32_t pipe_lookup(const struct pipe *p, const struct iod_flow_key *k)
{
	const struct iod_flow_pipe_cfg *c = &p->cfg;
	/* The pipe's constant fields first (DOCA: match values the pipe fixes). */
	if (!key_match_masked(k, &c->match, &c->const_mask))
		return UINT32_MAX;
	switch (c->kind) {
	case IOD_FLOW_PIPE_BASIC: {
		uint32_t h = key_hash_masked(k, &c->mask, 0), i = h & p->index_mask;
		for (uint64_t s; (s = p->index[i]); i = (i + 1) & p->index_mask) {
			if ((uint32_t)(s >> 32) != h)
				continue;
			const struct entry *en = &p->entries[(uint32_t)s - 1];
			if (key_match_masked(k, &en->cfg.match, &c->mask))
				return (uint32_t)s - 1;
		}
		return UINT32_MAX;
	}
	case IOD_FLOW_PIPE_LPM: {
		if (k->family != IOD_NET_AF_V4)
			return UINT32_MAX;
		for (int plen = 32; plen >= 0; plen--) {
			if (!p->lpm_lens[plen])
				continue;
			struct iod_flow_key mask;
			lpm_mask(p, (uint8_t)plen, &mask);
			uint32_t h = key_hash_masked(k, &mask, (uint32_t)plen),
			         i = h & p->index_mask;
			for (uint64_t s; (s = p->index[i]); i = (i + 1) & p->index_mask) {
				if ((uint32_t)(s >> 32) != h)
					continue;
				const struct entry *en = &p->entries[(uint32_t)s - 1];
				if (en->cfg.prefix_len == plen &&
				    key_match_masked(k, &en->cfg.match, &mask))
					return (uint32_t)s - 1;
			}
		}
		return UINT32_MAX;
	}
	case IOD_FLOW_PIPE_CONTROL:
	case IOD_FLOW_PIPE_ACL:
		for (uint32_t i = 0; i < p->order_n; i++) {
			const struct entry *en = &p->entries[p->order[i]];
			const struct iod_flow_entry_cfg *ec = &en->cfg;
			if (!key_match_masked(k, &ec->match, &ec->mask))
				continue;
			if (c->kind == IOD_FLOW_PIPE_ACL) {
				if ((ec->sport_min || ec->sport_max) &&
				    (k->sport < ec->sport_min || k->sport > ec->sport_max))
					continue;
				if ((ec->dport_min || ec->dport_max) &&
				    (k->dport < ec->dport_min || k->dport > ec->dport_max))
					continue;
			}
			return p->order[i];
		}
		return UINT32_MAX;
	case IOD_FLOW_PIPE_HASH:
		if (!p->order_n)
			return UINT32_MAX;
		return p->order[key_hash_masked(k, &c->mask, 0x4a5) % p->order_n];
	default: return UINT32_MAX;
	}
}

/* How an entry's actions change the key (the walk and the replay agree). */
static bool key_effects(const struct iod_flow_pipeline *pl, struct iod_flow_key *k,
                        const struct iod_flow_actions *a, struct iod_flow_key *used)
{
	uint32_t f = a->flags;
	if (f & IOD_FLOW_ACT_DECAP) {
		k->tunnelled = 0;
		k->outer_dst_ip = 0;
	}
	if (f & IOD_FLOW_ACT_SET_META)
		k->meta = a->meta;
	if (f & IOD_FLOW_ACT_SET_ZONE)
		k->zone = a->zone;
	if (f & IOD_FLOW_ACT_LB) {
		const struct iod_net_lb_service *s = &pl->cfg.services[a->lb_service];
		if (used) { /* the pick hashes the whole tuple */
			used->src.w[0] = used->src.w[1] = used->dst.w[0] = used->dst.w[1] = ~0ull;
			used->sport = used->dport = 0xffff;
			used->proto = used->family = 0xff;
			used->zone = 0xffff;
		}
		struct iod_net_tuple t;
		key_tuple(k, &t);
		uint32_t b = iod_net_lb_pick_for(s, iod_net_tuple_hash(&t), k->src.v4);
		if (b == UINT32_MAX)
			return false;
		k->dst.v4 = s->backends[b].ip;
		k->dport = s->backends[b].port;
	}
	if (f & IOD_FLOW_ACT_NAT_DST) {
		k->dst.v4 = a->nat_ip;
		if (a->nat_port)
			k->dport = a->nat_port;
	}
	if (f & IOD_FLOW_ACT_NAT_SRC) {
		k->src.v4 = a->nat_ip;
		if (a->nat_port)
			k->sport = a->nat_port;
	}
	if (f & IOD_FLOW_ACT_ENCAP)
		k->tunnelled = 1;
	if (f & IOD_FLOW_ACT_SET_DSCP)
		k->dscp = a->dscp;
	return true;
}

#define END_FWD 0
#define END_CT 1

/* Walk from pipe `start` with key k (modified as actions would); fill slot. */
static void walk(struct iod_flow_pipeline *pl, uint32_t core, uint32_t start, struct iod_flow_key k,
                 struct emc_slot *out, struct iod_flow_key *used)
{
	uint32_t pipe = start;
	out->hits_n = 0;
	out->end = END_FWD;
	out->fwd.type = IOD_FLOW_FWD_DROP;
	for (int hop = 0; hop < IOD_FLOW_HOPS_MAX; hop++) {
		struct pipe *p = &pl->pipes[pipe];
		if (p->cfg.kind == IOD_FLOW_PIPE_CT) {
			/* Whether this packet was already tracked decides: consulted. */
			used->ct_state |= IOD_NET_CT_TRK;
			if (hop == 0 && pipe == start && out->hits_n == 0 && k.ct_state) {
				/* resuming after this ct pipe ran: follow its fwd */
				const struct iod_flow_fwd *f = &p->cfg.fwd;
				if (f->type != IOD_FLOW_FWD_PIPE) {
					out->fwd = *f;
					return;
				}
				pipe = f->pipe;
				continue;
			}
			out->end = END_CT;
			out->fwd.type = IOD_FLOW_FWD_PIPE;
			out->fwd.pipe = pipe;
			return;
		}
		uint32_t id = pipe_lookup(p, &k);
		const struct iod_flow_fwd *f;
		key_or(used, &p->umask);
		if (id == UINT32_MAX) {
			(*pipe_ctr(p->misses, core))++;
			f = &p->cfg.fwd_miss;
			if (f->type == IOD_FLOW_FWD_NONE) {
				out->fwd.type = IOD_FLOW_FWD_DROP;
				return;
			}
		} else {
			(*pipe_ctr(p->hits, core))++;
			const struct entry *en = &p->entries[id];
			if (out->hits_n == IOD_FLOW_EMC_HITS_MAX) {
				out->hits_n = 0xff; /* too long to cache or replay: drop */
				out->fwd.type = IOD_FLOW_FWD_DROP;
				return;
			}
			out->hit[out->hits_n++] = pipe << 24 | id;
			if (!key_effects(pl, &k, &en->act, used)) {
				out->fwd.type = IOD_FLOW_FWD_DROP;
				return;
			}
			f = &en->fwd;
		}
		if (f->type != IOD_FLOW_FWD_PIPE) {
			out->fwd = *f;
			if (f->type == IOD_FLOW_FWD_NONE)
				out->fwd.type = IOD_FLOW_FWD_DROP;
			return;
		}
		if (f->pipe >= pl->pipes_n) {
			out->fwd.type = IOD_FLOW_FWD_DROP;
			return;
		}
		pipe = f->pipe;
	}
	out->hits_n = 0xff; /* a forwarding loop: drop */
	out->fwd.type = IOD_FLOW_FWD_DROP;
}

/* ---- the replay: actions and monitors on the packet -------------------- */

/* After decap: the inner headers become the only ones. outer: also copy the
 * key tuple to outer (only a later TTL decrement reads it). */
static inline void meta_decap_ex(struct iod_net_meta *m, bool outer)
{
	uint16_t d = m->in_l2_ofs;
	m->flags = (uint16_t)((m->flags &
	                       ~(IOD_NET_F_VXLAN | IOD_NET_F_L3 | IOD_NET_F_L4 | IOD_NET_F_IN_L3 |
	                         IOD_NET_F_IN_L4 | IOD_NET_F_VLAN | IOD_NET_F_IN_VLAN)) |
	                      ((m->flags & IOD_NET_F_IN_L3) ? IOD_NET_F_L3 : 0) |
	                      ((m->flags & IOD_NET_F_IN_L4) ? IOD_NET_F_L4 : 0) |
	                      ((m->flags & IOD_NET_F_IN_VLAN) ? IOD_NET_F_VLAN : 0));
	m->l3_ofs = m->in_l3_ofs ? (uint16_t)(m->in_l3_ofs - d) : 0;
	m->l4_ofs = m->in_l4_ofs ? (uint16_t)(m->in_l4_ofs - d) : 0;
	m->ethertype = m->in_ethertype;
	if (outer)
		m->outer = m->key;
	m->tun_ofs = m->in_l2_ofs = m->in_l3_ofs = m->in_l4_ofs = 0;
	m->len = (uint16_t)(m->len - d);
}

static void meta_decap(struct iod_net_meta *m)
{
	meta_decap_ex(m, true);
}

/* After encap: what was the packet is now the inner frame. */
static void meta_encap(struct iod_net_meta *m, uint32_t vni)
{
	uint16_t d = IOD_NET_VXLAN_OVERHEAD;
	m->in_l2_ofs = d;
	m->in_l3_ofs = m->l3_ofs ? (uint16_t)(m->l3_ofs + d) : 0;
	m->in_l4_ofs = m->l4_ofs ? (uint16_t)(m->l4_ofs + d) : 0;
	m->in_ethertype = m->ethertype;
	m->flags = (uint16_t)((m->flags & ~(IOD_NET_F_L3 | IOD_NET_F_L4 | IOD_NET_F_VLAN)) |
	                      IOD_NET_F_VXLAN | IOD_NET_F_L3 | IOD_NET_F_L4 |
	                      ((m->flags & IOD_NET_F_L3) ? IOD_NET_F_IN_L3 : 0) |
	                      ((m->flags & IOD_NET_F_L4) ? IOD_NET_F_IN_L4 : 0) |
	                      ((m->flags & IOD_NET_F_VLAN) ? IOD_NET_F_IN_VLAN : 0));
	m->l3_ofs = 14;
	m->l4_ofs = 34;
	m->tun_ofs = 42;
	m->ethertype = IOD_NET_ETH_P_IPV4;
	m->vni = vni;
	m->len = (uint16_t)(m->len + d);
	m->outer.family = IOD_NET_AF_V4;
	m->outer.proto = IOD_NET_PROTO_UDP;
}

static void set_dscp(uint8_t *f, const struct iod_net_meta *m, uint8_t dscp)
{
	bool tun = m->flags & IOD_NET_F_VXLAN;
	uint16_t l3 = tun ? m->in_l3_ofs : m->l3_ofs;
	if (!l3 || m->key.family != IOD_NET_AF_V4)
		return;
	uint8_t *ip = f + l3;
	uint16_t old = iod_net_be16(ip);
	ip[1] = (uint8_t)(dscp << 2 | (ip[1] & 3));
	iod_net_put16(ip + 10, iod_net_csum_update16(iod_net_be16(ip + 10), old, iod_net_be16(ip)));
}

/* Apply one entry's monitors and actions. false = the packet is dropped.
 * commit false: the walk's verdict is a drop, so a commit (CT_COMMIT, LB)
 * records no session; the LB still translates the packet (a drop record
 * names the backend whose rule dropped it). As Linux conntrack confirms a
 * new entry only when its packet passes the last hook: a check after the
 * commit (the "sgin" pipe after "svc", src/flow/dp.c) that drops the first
 * packet leaves no session for the next one to pass as established. */
static bool apply_entry(struct iod_flow_pipeline *pl, uint32_t core, struct pipe *p, uint32_t id,
                        struct iod_pkt *pkt, struct iod_net_meta *m, struct iod_flow_key *k,
                        bool commit, uint64_t now_ns)
{
	struct entry *en = &p->entries[id];
	struct estats *st = &p->stats[(size_t)core * p->cfg.entries_max + id];
	const struct iod_flow_actions *a = &en->act;
	uint32_t mon = en->mon;

	st->packets++;
	st->bytes += pkt->len;
	st->last_ns = now_ns;
	if (mon & IOD_FLOW_MON_METER) {
		struct iod_net_meter *mt = &p->meters[(size_t)core * p->cfg.entries_max + id];
		uint8_t c = iod_net_meter_color(mt, pkt->len, pkt->color, now_ns);
		st->color[c]++;
		pkt->color = c;
		if (c == IOD_NET_RED &&
		    !(en->cfg.monitor.meter_pass_red || p->cfg.monitor.meter_pass_red))
			return false;
	}
	if (mon & IOD_FLOW_MON_MIRROR)
		pkt->mirror_port = en->cfg.monitor.flags & IOD_FLOW_MON_MIRROR
		                       ? en->cfg.monitor.mirror_port
		                       : p->cfg.monitor.mirror_port;
	uint32_t f = a->flags;
	if (!f)
		return true;
	if (f & IOD_FLOW_ACT_DECAP) {
		if (!(m->flags & IOD_NET_F_VXLAN))
			return false;
		pkt->data += m->in_l2_ofs;
		pkt->len -= m->in_l2_ofs;
		pkt->headroom += m->in_l2_ofs;
		meta_decap(m);
	}
	if (f & IOD_FLOW_ACT_ARP_REPLY) {
		uint8_t rep[64];
		int n =
		    iod_net_arp_reply(pkt->data, pkt->len, a->arp_ip, a->src_mac, rep, sizeof(rep));
		if (n <= 0)
			return false;
		memcpy(pkt->data, rep, (size_t)n);
		pkt->len = (uint32_t)n;
	}
	if (f & (IOD_FLOW_ACT_CT_COMMIT | IOD_FLOW_ACT_LB)) {
		struct iod_net_tuple t;
		struct iod_net_ct_nat nat = {0};
		uint32_t mark = 0;
		key_tuple(k, &t);
		if (f & IOD_FLOW_ACT_LB) {
			const struct iod_net_lb_service *s = &pl->cfg.services[a->lb_service];
			uint32_t b = iod_net_lb_pick_for(s, iod_net_tuple_hash(&t), t.src.v4);
			if (b == UINT32_MAX)
				return false;
			nat.kind = IOD_NET_CT_NAT_DST;
			nat.ip = s->backends[b].ip;
			nat.port = s->backends[b].port;
			mark = b + 1;
		}
		int rc = commit ? iod_net_ct_commit(core_ct(pl, core), &t, k->tcp_flags, &nat, mark,
		                                    now_ns, NULL)
		                : 0;
		if (rc && rc != -EEXIST)
			return false; /* table full or not trackable: fail closed */
		if (nat.kind && iod_net_nat_dst(pkt->data, m, nat.ip, nat.port))
			return false;
	}
	if ((f & IOD_FLOW_ACT_NAT_DST) && iod_net_nat_dst(pkt->data, m, a->nat_ip, a->nat_port))
		return false;
	if ((f & IOD_FLOW_ACT_NAT_SRC) && iod_net_nat_src(pkt->data, m, a->nat_ip, a->nat_port))
		return false;
	if (f & IOD_FLOW_ACT_SET_DSCP)
		set_dscp(pkt->data, m, a->dscp);
	if ((f & IOD_FLOW_ACT_DEC_TTL) && iod_net_ttl_dec(pkt->data, m))
		return false;
	if (f & IOD_FLOW_ACT_ENCAP) {
		uint16_t sport = (f & IOD_FLOW_ACT_SET_SPORT) ? a->encap.src_port : 0;
		if (iod_net_vxlan_encap_tmpl(&pkt->data, &pkt->len, pkt->headroom, &en->encap_tmpl,
		                             m->hash, sport))
			return false;
		pkt->headroom -= IOD_NET_VXLAN_OVERHEAD;
		meta_encap(m, a->encap.vni);
	} else if ((f & IOD_FLOW_ACT_SET_SPORT) && (m->flags & IOD_NET_F_VXLAN)) {
		iod_net_vxlan_set_sport(pkt->data, pkt->len, a->encap.src_port);
	}
	if (f & IOD_FLOW_ACT_SET_MAC) {
		memcpy(pkt->data, a->dst_mac, 6);
		memcpy(pkt->data + 6, a->src_mac, 6);
	}
	if (f & IOD_FLOW_ACT_MAC_SWAP)
		iod_net_mac_swap(pkt->data);
	key_effects(pl, k, a, NULL);
	return true;
}

static void finish(struct iod_pkt *pkt, const struct iod_flow_fwd *f, const struct iod_net_meta *m)
{
	switch (f->type) {
	case IOD_FLOW_FWD_PORT:
		pkt->verdict = IOD_FLOW_V_PORT;
		pkt->port_out = f->port;
		break;
	case IOD_FLOW_FWD_RSS:
		pkt->verdict = IOD_FLOW_V_RSS;
		pkt->queue = (uint16_t)(m->hash % f->rss_queues);
		break;
	default: pkt->verdict = IOD_FLOW_V_DROP; break;
	}
}

/* Where one packet is in its walk, between burst phases. */
struct pstate {
	struct iod_flow_key k;  /* the key as actions left it */
	struct iod_net_tuple t; /* WAIT_CT: the tuple conntrack looks up */
	int32_t start;          /* pipe the next segment starts at */
	uint32_t ct_pipe;       /* WAIT_CT: the ct pipe */
	uint32_t ct_hash;       /* WAIT_CT: hash of t */
	uint8_t seg;            /* segments run (bounded) */
	/* The trace the fast path compiles: entries hit in order and the
	 * conntrack step, kept while the packet stays compilable. */
	uint8_t tr_ok;                /* 1 while the trace can be compiled */
	uint8_t tr_n;                 /* entries in tr */
	uint8_t tr_ct;                /* entries hit before the ct step; 0xff = none */
	uint8_t fp_run;               /* 1 = runs a compiled program (fp) */
	uint32_t tr[FP_OPS_MAX];      /* pipe << 24 | entry */
	struct iod_net_ct_result ctr; /* the ct step's result */
	uint32_t ct_pipe_tr;          /* the ct step's pipe */
	struct fp_slot *fp;           /* the flow slot (hit, or to fill) */
	const struct fp_prog *prog;   /* fp_run: the program (stable for the burst) */
	uint32_t fp_ct_entry;         /* fp_run: the session (the slot may be refilled) */
	uint32_t fp_ct_gen;           /* fp_run: its commit generation */
	uint8_t fp_ct_dir;            /* fp_run: its direction */
	uint32_t fp_hash;             /* hash of the packed starting key */
	uint64_t ck[4];               /* the packed starting key */
};

#define RUN_DONE 0
#define RUN_WAIT_CT 1

/* ---- the compiled fast path -------------------------------------------- */

/* Pack the starting key iod_flow_key_from_meta() would build from m into
 * four words, losslessly, without building it: false when it does not fit
 * (IPv6 addresses, a VNI out of range). Must agree with fp_pack(). */
static inline bool fp_pack_meta(const struct iod_net_meta *m, uint16_t port_in, uint64_t ck[4])
{
	const struct iod_net_tuple *t = &m->key;
	bool tun = m->flags & IOD_NET_F_VXLAN;
	uint32_t vni = tun ? m->vni : 0;
	if ((t->src.w[0] >> 32) | t->src.w[1] | (t->dst.w[0] >> 32) | t->dst.w[1] | (vni >> 24))
		return false;
	uint32_t eth_type = tun ? m->in_ethertype : m->ethertype;
	uint32_t outer_dst = tun && m->outer.family == IOD_NET_AF_V4 ? m->outer.dst.v4 : 0;
	ck[0] = (uint64_t)port_in | (uint64_t)vni << 16 | (uint64_t)eth_type << 40 |
	        (uint64_t)t->proto << 56;
	ck[1] = (uint64_t)t->src.v4 | (uint64_t)t->dst.v4 << 32;
	ck[2] = (uint64_t)t->sport | (uint64_t)t->dport << 16 | (uint64_t)outer_dst << 32;
	ck[3] = (uint64_t)m->tcp_flags | (uint64_t)t->family << 8 |
	        (uint64_t)(m->vlan_tci & 0x0fff) << 16 | (uint64_t)(m->ip_tos >> 2) << 32 |
	        (uint64_t)tun << 40;
	return true;
}

/* Pack a starting key into four words, losslessly: false when it does not
 * fit (IPv6 addresses, metadata already set, a port or VNI out of range). */
static inline bool fp_pack(const struct iod_flow_key *k, uint64_t ck[4])
{
	if ((k->src.w[0] >> 32) | k->src.w[1] | (k->dst.w[0] >> 32) | k->dst.w[1] | k->meta |
	    k->zone | k->ct_state | (k->in_port >> 16) | (k->vni >> 24))
		return false;
	ck[0] = (uint64_t)k->in_port | (uint64_t)k->vni << 16 | (uint64_t)k->eth_type << 40 |
	        (uint64_t)k->proto << 56;
	ck[1] = (uint64_t)k->src.v4 | (uint64_t)k->dst.v4 << 32;
	ck[2] = (uint64_t)k->sport | (uint64_t)k->dport << 16 | (uint64_t)k->outer_dst_ip << 32;
	ck[3] = (uint64_t)k->tcp_flags | (uint64_t)k->family << 8 | (uint64_t)k->vlan << 16 |
	        (uint64_t)k->dscp << 32 | (uint64_t)k->tunnelled << 40;
	return true;
}

static inline bool fp_same(const uint64_t *a, const uint64_t *b)
{
	return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3])) == 0;
}

static void fp_emit(struct fp_prog *pr, uint32_t *n, struct fp_op o)
{
	pr->ops[(*n)++] = o;
}

/* Compile the packet's trace into a program (shared when an identical one
 * exists) and point its flow slot at it. Silently gives up on anything it
 * cannot replay exactly: commits, LB picks, ARP replies, a full table. */
static void fp_fill(struct iod_flow_pipeline *pl, uint32_t core, const struct pstate *st,
                    const struct iod_flow_fwd *fwd, uint32_t tuple_hash)
{
	struct core *cs = &pl->cores[core];
	struct fp_prog pr;
	uint32_t n = 0;
	memset(&pr, 0, sizeof(pr));
	for (uint32_t t = 0; t <= st->tr_n; t++) {
		if (t == st->tr_ct) {
			bool dst = false;
			uint32_t ip = 0;
			uint16_t port = 0;
			if (n + 1 > FP_OPS_MAX)
				return;
			pr.ct_at = (uint8_t)n;
			/* The conntrack step and the session's NAT in one op. arg: bit 0
			 * NAT the destination, bit 1 IPv4 TCP, bit 2 IPv4 UDP (lean
			 * rewrite), bit 3 a NAT at all. */
			struct fp_op o = {.code = FP_CT,
			                  .u.hits = pipe_ctr(pl->pipes[st->ct_pipe_tr].hits, core)};
			if (iod_net_ct_nat_target(core_ct(pl, core), &st->ctr, &dst, &ip, &port)) {
				o.arg = (uint8_t)(8 | (dst ? 1 : 0));
				if (st->k.family == IOD_NET_AF_V4 &&
				    st->k.proto == IOD_NET_PROTO_TCP)
					o.arg |= 2;
				if (st->k.family == IOD_NET_AF_V4 &&
				    st->k.proto == IOD_NET_PROTO_UDP)
					o.arg |= 4;
				o.ip = ip;
				o.port = port;
			}
			fp_emit(&pr, &n, o);
		}
		if (t == st->tr_n)
			break;
		uint32_t id = st->tr[t] & 0xffffff;
		struct pipe *p = &pl->pipes[st->tr[t] >> 24];
		const struct entry *en = &p->entries[id];
		const struct iod_flow_actions *a = &en->act;
		uint32_t f = a->flags;
		size_t si = (size_t)core * p->cfg.entries_max + id;
		if (f & (IOD_FLOW_ACT_CT_COMMIT | IOD_FLOW_ACT_LB | IOD_FLOW_ACT_ARP_REPLY))
			return;
		if (n + 10 > FP_OPS_MAX)
			return;
		if (en->mon & (IOD_FLOW_MON_METER | IOD_FLOW_MON_MIRROR)) {
			struct fp_op o = {.code = FP_MON, .u.st = &p->stats[si]};
			if (en->mon & IOD_FLOW_MON_METER) {
				o.arg |= FP_MON_METER;
				o.mt = &p->meters[si];
				if (en->cfg.monitor.meter_pass_red || p->cfg.monitor.meter_pass_red)
					o.arg |= FP_MON_PASS_RED;
			}
			if (en->mon & IOD_FLOW_MON_MIRROR) {
				o.arg |= FP_MON_MIRROR;
				o.port = en->cfg.monitor.flags & IOD_FLOW_MON_MIRROR
				             ? en->cfg.monitor.mirror_port
				             : p->cfg.monitor.mirror_port;
			}
			fp_emit(&pr, &n, o);
		} else {
			fp_emit(&pr, &n, (struct fp_op){.code = FP_COUNT, .u.st = &p->stats[si]});
		}
		/* The actions, in apply_entry's order. */
		if (f & IOD_FLOW_ACT_DECAP)
			fp_emit(&pr, &n, (struct fp_op){.code = FP_DECAP, .arg = 1});
		if (f & IOD_FLOW_ACT_NAT_DST)
			fp_emit(&pr, &n,
			        (struct fp_op){
			            .code = FP_NAT_DST, .ip = a->nat_ip, .port = a->nat_port});
		if (f & IOD_FLOW_ACT_NAT_SRC)
			fp_emit(&pr, &n,
			        (struct fp_op){
			            .code = FP_NAT_SRC, .ip = a->nat_ip, .port = a->nat_port});
		if (f & IOD_FLOW_ACT_SET_DSCP)
			fp_emit(&pr, &n, (struct fp_op){.code = FP_DSCP, .arg = a->dscp});
		if (f & IOD_FLOW_ACT_DEC_TTL)
			fp_emit(&pr, &n, (struct fp_op){.code = FP_TTL});
		if (f & IOD_FLOW_ACT_ENCAP)
			fp_emit(&pr, &n,
			        (struct fp_op){
			            .code = FP_ENCAP,
			            .arg = 1,
			            .ip = a->encap.vni,
			            .port = (f & IOD_FLOW_ACT_SET_SPORT) ? a->encap.src_port : 0,
			            .u.tmpl = &en->encap_tmpl});
		else if (f & IOD_FLOW_ACT_SET_SPORT)
			fp_emit(&pr, &n,
			        (struct fp_op){.code = FP_SPORT, .port = a->encap.src_port});
		if (f & IOD_FLOW_ACT_SET_MAC)
			fp_emit(&pr, &n, (struct fp_op){.code = FP_SET_MAC, .u.a = a});
		if (f & IOD_FLOW_ACT_MAC_SWAP)
			fp_emit(&pr, &n, (struct fp_op){.code = FP_MAC_SWAP});
	}
	/* A decap's copy of the tuple to the outer one matters only to a later
	 * TTL decrement (the one op that reads the outer tuple). */
	for (uint32_t i = 0, ttl = 0; i < n; i++) {
		uint32_t r = n - 1 - i;
		ttl |= pr.ops[r].code == FP_TTL;
		if (pr.ops[r].code == FP_DECAP)
			pr.ops[r].arg = (uint8_t)ttl;
	}
	/* An encap's metadata update matters only to a later op that reads it. */
	for (uint32_t i = n; i-- > 0;) {
		uint8_t c = pr.ops[i].code;
		if (c == FP_ENCAP) {
			pr.ops[i].arg = 0;
			continue;
		}
		if (c != FP_COUNT && c != FP_SET_MAC && c != FP_MAC_SWAP)
			break;
	}
	if (st->tr_ct == 0xff)
		pr.ct_at = (uint8_t)n;
	pr.n = (uint8_t)n;
	pr.fwd.type = fwd->type;
	pr.fwd.port = fwd->port;
	pr.fwd.rss_queues = fwd->rss_queues;
	pr.fwd.pipe = fwd->pipe;

	/* Share an identical program (this generation's table). */
	if (cs->progs_gen != pl->gen) {
		cs->progs_gen = pl->gen;
		cs->progs_n = 0;
		memset(cs->prog_index, 0, 2 * FP_PROGS * sizeof(uint16_t));
	}
	size_t sz = offsetof(struct fp_prog, ops) + n * sizeof(struct fp_op);
	const uint64_t *w = (const uint64_t *)(const void *)&pr;
	uint64_t h = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < sz / 8; i++)
		h = (h ^ w[i]) * 0xff51afd7ed558ccdull + (h >> 29);
	pr.hash = (uint32_t)(iod_hash_u64(h) >> 32);
	uint32_t mask = 2 * FP_PROGS - 1, i = pr.hash & mask, id = UINT32_MAX;
	for (; cs->prog_index[i]; i = (i + 1) & mask) {
		const struct fp_prog *q = &cs->progs[cs->prog_index[i] - 1];
		if (q->hash == pr.hash && q->n == pr.n && !memcmp(q, &pr, sz)) {
			id = cs->prog_index[i] - 1u;
			break;
		}
	}
	if (id == UINT32_MAX) {
		if (cs->progs_n >= FP_PROGS)
			return; /* full until the next generation: the slow path still works */
		id = cs->progs_n++;
		memcpy(&cs->progs[id], &pr, sz);
		cs->prog_index[i] = (uint16_t)(id + 1);
	}
	struct fp_slot *sl = st->fp;
	memcpy(sl->ck, st->ck, sizeof(sl->ck));
	sl->hash = st->fp_hash;
	sl->prog = (uint16_t)id;
	sl->ct_entry = st->ctr.entry;
	sl->ct_gen = st->ctr.gen;
	sl->ct_dir = (st->ctr.ct_state & IOD_NET_CT_RPL) ? 1 : 0;
	sl->tuple_hash = tuple_hash;
	sl->gen = pl->gen;
}

/* Run ops [from, to) of a program on a packet: what the replay of its
 * entries would do. false = the packet is dropped. */
static inline __attribute__((always_inline)) bool
fp_exec(struct iod_flow_pipeline *pl, uint32_t core, const struct pstate *ps, uint32_t from,
        uint32_t to, struct iod_pkt *pkt, struct iod_net_meta *m, uint64_t now_ns)
{
	const struct fp_prog *pr = ps->prog;
	for (uint32_t i = from; i < to; i++) {
		const struct fp_op *o = &pr->ops[i];
		switch (o->code) {
		case FP_COUNT:
			o->u.st->packets++;
			o->u.st->bytes += pkt->len;
			o->u.st->last_ns = now_ns;
			break;
		case FP_MON:
			o->u.st->packets++;
			o->u.st->bytes += pkt->len;
			o->u.st->last_ns = now_ns;
			if (o->arg & FP_MON_METER) {
				uint8_t c =
				    iod_net_meter_color(o->mt, pkt->len, pkt->color, now_ns);
				o->u.st->color[c]++;
				pkt->color = c;
				if (c == IOD_NET_RED && !(o->arg & FP_MON_PASS_RED))
					return false;
			}
			if (o->arg & FP_MON_MIRROR)
				pkt->mirror_port = o->port;
			break;
		case FP_DECAP:
			if (!(m->flags & IOD_NET_F_VXLAN))
				return false;
			pkt->data += m->in_l2_ofs;
			pkt->len -= m->in_l2_ofs;
			pkt->headroom += m->in_l2_ofs;
			meta_decap_ex(m, o->arg);
			break;
		case FP_NAT_DST:
			if (iod_net_nat_dst(pkt->data, m, o->ip, o->port))
				return false;
			break;
		case FP_NAT_SRC:
			if (iod_net_nat_src(pkt->data, m, o->ip, o->port))
				return false;
			break;
		case FP_CT: {
			struct iod_net_ct_result r;
			iod_net_ct_touch(core_ct(pl, core), ps->fp_ct_entry, ps->fp_ct_dir,
			                 m->tcp_flags, now_ns, &r);
			(*o->u.hits)++;
			pkt->ct_state = r.ct_state;
			if (!(o->arg & 8))
				break;
			/* As pkt_ct: a NAT that does not apply leaves the packet. */
			bool tun = m->flags & IOD_NET_F_VXLAN;
			bool l4 = m->flags & (tun ? IOD_NET_F_IN_L4 : IOD_NET_F_L4);
			if ((o->arg & 6) && l4 && (tun ? m->in_l3_ofs : m->l3_ofs))
				iod_net_nat_tcpudp4(pkt->data, m, o->arg & 4, o->arg & 1, o->ip,
				                    o->port);
			else if (o->arg & 1)
				(void)iod_net_nat_dst(pkt->data, m, o->ip, o->port);
			else
				(void)iod_net_nat_src(pkt->data, m, o->ip, o->port);
			break;
		}
		case FP_DSCP: set_dscp(pkt->data, m, o->arg); break;
		case FP_TTL:
			if (iod_net_ttl_dec(pkt->data, m))
				return false;
			break;
		case FP_ENCAP:
			if (iod_net_vxlan_encap_tmpl(&pkt->data, &pkt->len, pkt->headroom,
			                             o->u.tmpl, m->hash, o->port))
				return false;
			pkt->headroom -= IOD_NET_VXLAN_OVERHEAD;
			if (o->arg) /* a later op reads the metadata */
				meta_encap(m, o->ip);
			break;
		case FP_SPORT:
			if (m->flags & IOD_NET_F_VXLAN)
				iod_net_vxlan_set_sport(pkt->data, pkt->len, o->port);
			break;
		case FP_SET_MAC:
			memcpy(pkt->data, o->u.a->dst_mac, 6);
			memcpy(pkt->data + 6, o->u.a->src_mac, 6);
			break;
		case FP_MAC_SWAP: iod_net_mac_swap(pkt->data); break;
		default: return false;
		}
	}
	return true;
}

/* A flow that missed its set: the way it may be compiled into, or NULL
 * (it takes the slow path). A stale way first; when both hold flows of this
 * generation, only one miss in FP_EVICT_INV evicts one (the way the hash
 * picks), as OVS's EMC inserts with a probability: three or more flows in
 * one set then keep two compiled instead of evicting each other on every
 * packet (1 M flows in 2 M sets: 3 % of flows overflow their set, and the
 * round-robin eviction sent 6 % of packets down the slow path). */
static struct fp_slot *fp_victim(const struct iod_flow_pipeline *pl, struct core *cs,
                                 struct fp_slot *sl, uint32_t h)
{
	if (sl->gen != pl->gen)
		return sl;
	if (sl[1].gen != pl->gen)
		return sl + 1;
	if (++cs->fp_evict_tick % FP_EVICT_INV)
		return NULL;
	return (h >> 31) ? sl + 1 : sl;
}

static void pkt_begin(struct iod_flow_pipeline *pl, struct iod_pkt *pkt,
                      const struct iod_net_meta *m, struct pstate *st)
{
	st->start = pkt->port_in < IOD_IO_PORTS_MAX ? pl->root[pkt->port_in] : -1;
	st->seg = 0;
	pkt->verdict = IOD_FLOW_V_DROP;
	pkt->mirror_port = UINT16_MAX;
	pkt->ct_state = 0;
	st->tr_ok = 1;
	st->tr_n = 0;
	st->tr_ct = 0xff;
	st->fp_run = 0;
	st->fp = NULL;
	(void)m; /* the key is built when the slow path needs it (pkt_key) */
}

static inline bool fp_pack_agrees(const struct pstate *st)
{
	uint64_t ck[4];
	return fp_pack(&st->k, ck) && fp_same(ck, st->ck);
}

/* The 64-byte key, for the slow path only (a compiled flow never needs it). */
static void pkt_key(const struct iod_pkt *pkt, const struct iod_net_meta *m, struct pstate *st)
{
	iod_flow_key_from_meta(&st->k, m, pkt->port_in);
	/* The packed key was made from the metadata: it must be this key's. */
	IOD_ASSERT_HOT(!st->fp || fp_pack_agrees(st));
}

/* Run cached or walked segments until the packet is decided (RUN_DONE) or
 * waits for conntrack (RUN_WAIT_CT: st->t and st->ct_hash are set). */
static int pkt_run(struct iod_flow_pipeline *pl, uint32_t core, struct iod_pkt *pkt,
                   struct iod_net_meta *m, struct pstate *st, uint64_t now_ns)
{
	struct core *cs = &pl->cores[core];
	struct iod_flow_key *k = &st->k; /* in place: no copy */
	int32_t start = st->start;

	if (start < 0)
		return RUN_DONE;
	for (; st->seg < IOD_FLOW_HOPS_MAX; st->seg++) {
		struct emc_slot tmp, *s = NULL;
		struct mf_masks *mm = &cs->masks[start];
		struct iod_flow_key mk;
		if (mm->gen != pl->gen) {
			mm->gen = pl->gen;
			mm->n = 0;
		}
		/* 1. megaflow: the key masked by what walks from here consulted */
		for (uint32_t o = 0; !pl->cfg.emc_off && o < mm->n; o++) {
			uint32_t j = mm->order[o];
			key_and(k, &mm->m[j], &mk);
			uint32_t mh = key_hash(&mk, (uint32_t)start << 3 | j);
			struct emc_slot *e = &cs->mf[mh & (IOD_FLOW_MF_SLOTS - 1)];
			if (e->gen == pl->gen && e->hash == mh && e->start == start &&
			    e->mask_id == j && key_equal(&e->key, &mk)) {
				cs->mf_hits++;
				s = e;
				if (++mm->hits[j] > (o ? mm->hits[mm->order[o - 1]] : UINT64_MAX)) {
					mm->order[o] =
					    mm->order[o - 1]; /* bubble up a busier mask */
					mm->order[o - 1] = (uint8_t)j;
				}
				break;
			}
		}
		/* 2. exact match */
		uint32_t h = 0;
		struct emc_slot *e = NULL;
		if (!s && !pl->cfg.emc_off) {
			h = key_hash(k, (uint32_t)start);
			e = &cs->emc[h & pl->emc_mask];
			if (e->gen == pl->gen && e->hash == h && e->start == start &&
			    key_equal(&e->key, k)) {
				cs->emc_hits++;
				s = e;
			}
		}
		/* 3. walk the pipes, then fill both caches */
		if (!s) {
			struct iod_flow_key used;
			memset(&used, 0, sizeof(used));
			cs->walks++;
			walk(pl, core, (uint32_t)start, *k, &tmp, &used);
			s = &tmp;
			if (tmp.hits_n != 0xff) {
				if (e) {
					*e = tmp;
					e->key = *k;
					e->hash = h;
					e->start = (uint16_t)start;
					e->gen = pl->gen;
				}
				uint32_t j = pl->cfg.emc_off ? IOD_FLOW_MF_MASKS_MAX : 0;
				while (j < mm->n && memcmp(&mm->m[j], &used, sizeof(used)))
					j++;
				if (j == mm->n && j < IOD_FLOW_MF_MASKS_MAX) {
					mm->hits[j] = 0;
					mm->order[j] = (uint8_t)j;
					mm->m[mm->n++] = used;
				}
				if (j < mm->n) {
					key_and(k, &used, &mk);
					uint32_t mh = key_hash(&mk, (uint32_t)start << 3 | j);
					struct emc_slot *me = &cs->mf[mh & (IOD_FLOW_MF_SLOTS - 1)];
					*me = tmp;
					me->key = mk;
					me->hash = mh;
					me->start = (uint16_t)start;
					me->mask_id = (uint8_t)j;
					me->gen = pl->gen;
				}
			}
		}
		if (s->hits_n == 0xff)
			return RUN_DONE;
		uint8_t n = s->hits_n, end = s->end;
		struct iod_flow_fwd fwd = s->fwd;
		uint32_t hit[IOD_FLOW_EMC_HITS_MAX];
		for (uint8_t i = 0; i < n; i++) /* short: a loop beats rep movs */
			hit[i] = s->hit[i];
		if (st->tr_ok) {
			if (st->tr_n + n > FP_OPS_MAX)
				st->tr_ok = 0;
			else
				for (uint8_t i = 0; i < n; i++)
					st->tr[st->tr_n++] = hit[i];
		}
		/* a segment that ends in a drop commits no session (apply_entry) */
		bool commit =
		    end != END_FWD || fwd.type == IOD_FLOW_FWD_PORT || fwd.type == IOD_FLOW_FWD_RSS;
		for (uint8_t i = 0; i < n; i++) {
			struct pipe *p = &pl->pipes[hit[i] >> 24];
			if (!apply_entry(pl, core, p, hit[i] & 0xffffff, pkt, m, k, commit, now_ns))
				return RUN_DONE;
		}
		if (end == END_FWD) {
			finish(pkt, &fwd, m);
			if (st->tr_ok && st->fp)
				fp_fill(pl, core, st, &fwd, m->hash);
			return RUN_DONE;
		}
		/* A ct pipe: hand the tuple back; the burst prefetches, then pkt_ct. */
		struct pipe *ctp = &pl->pipes[fwd.pipe];
		key_tuple(k, &st->t);
		if (ctp->cfg.ct_zone_from_meta)
			st->t.zone = (uint16_t)k->meta;
		st->ct_hash = iod_net_tuple_hash(&st->t);
		st->ct_pipe = fwd.pipe;
		st->seg++;
		return RUN_WAIT_CT;
	}
	return RUN_DONE; /* too many segments: dropped */
}

/* Track the packet, apply the session's NAT, continue after the ct pipe. */
static void pkt_ct(struct iod_flow_pipeline *pl, uint32_t core, struct iod_pkt *pkt,
                   struct iod_net_meta *m, struct pstate *st, uint64_t now_ns)
{
	struct iod_net_ct *ct = core_ct(pl, core);
	struct iod_net_ct_result r;
	iod_net_ct_lookup_hashed(ct, &st->t, st->ct_hash, st->k.tcp_flags, pkt->data, m, now_ns,
	                         &r);
	(*pipe_ctr(pl->pipes[st->ct_pipe].hits, core))++;
	if (r.nat_kind && iod_net_ct_nat_apply(ct, &r, pkt->data, m) == 0) {
		st->k.src = m->key.src;
		st->k.dst = m->key.dst;
		st->k.sport = m->key.sport;
		st->k.dport = m->key.dport;
	}
	st->k.ct_state = r.ct_state;
	pkt->ct_state = r.ct_state;
	st->start = (int32_t)st->ct_pipe;
	/* Only an established session's own packets compile (not NEW, REL, INV). */
	if (st->tr_ct != 0xff || r.entry == UINT32_MAX ||
	    (r.ct_state & (IOD_NET_CT_EST | IOD_NET_CT_REL | IOD_NET_CT_INV)) != IOD_NET_CT_EST)
		st->tr_ok = 0;
	st->tr_ct = st->tr_n;
	st->ctr = r;
	st->ct_pipe_tr = st->ct_pipe;
}

void iod_flow_burst(struct iod_flow_pipeline *pl, uint32_t core, struct iod_pkt **pkts, uint32_t n,
                    uint64_t now_ns)
{
	struct iod_net_meta meta[IOD_FLOW_BURST_MAX];
	struct core *cs = &pl->cores[core];

	IOD_ASSERT_HOT(core < pl->cfg.cores);
	IOD_ASSERT_HOT(n <= IOD_FLOW_BURST_MAX);
	/* Parse the whole burst first, prefetching the next frames. (Packing
	 * each key and prefetching its slot in this loop was measured slower.) */
	for (uint32_t i = 0; i < n; i++) {
		if (i + 2 < n)
			__builtin_prefetch(pkts[i + 2]->data);
		/* The flow hash waits: a compiled flow has it in its slot. */
		if (iod_net_parse_nohash(pkts[i]->data, pkts[i]->len, pl->cfg.vxlan_port,
		                         &meta[i])) {
			cs->parse_errors++;
			meta[i].len = 0;
		}
	}
	struct pstate st[IOD_FLOW_BURST_MAX];
	uint32_t wait[IOD_FLOW_BURST_MAX], nw = 0;
	uint32_t slow[IOD_FLOW_BURST_MAX], nslow = 0; /* slow packets with a fast-path slot */
	struct iod_net_ct *ct = core_ct(pl, core);
	bool fp_on = !pl->cfg.emc_off;
	/* Keys, and their flow slots (prefetched). */
	for (uint32_t i = 0; i < n; i++) {
		pkt_begin(pl, pkts[i], &meta[i], &st[i]);
		if (!meta[i].len)
			st[i].start = -1;
		if (fp_on && st[i].start >= 0 &&
		    fp_pack_meta(&meta[i], pkts[i]->port_in, st[i].ck)) {
			const uint64_t *c = st[i].ck;
			uint64_t x = c[0] * 0x9e3779b97f4a7c15ull + c[1] * 0xc2b2ae3d27d4eb4full +
			             c[2] * 0x165667b19e3779f9ull + c[3] * 0x27d4eb2f165667c5ull;
			uint32_t h = (uint32_t)((x ^ x >> 32) * 0xd6e8feb86659fd93ull >> 32);
			st[i].fp_hash = h;
			st[i].fp = &cs->fp[h & pl->fp_mask & ~1u]; /* 2-way: one 128-byte set */
			__builtin_prefetch(st[i].fp);
			__builtin_prefetch(st[i].fp + 1); /* (the first way only measured slower) */
		}
	}
	/* Compiled flows: prefetch their sessions. What a hit needs is copied
	 * out: a slow packet may refill its slot before it resumes. */
	for (uint32_t i = 0; i < n; i++) {
		struct fp_slot *sl = st[i].fp;
		if (!sl)
			continue;
		uint32_t h = st[i].fp_hash;
		if (sl->gen != pl->gen || sl->hash != h || !fp_same(sl->ck, st[i].ck)) {
			struct fp_slot *s2 = sl + 1;
			if (s2->gen != pl->gen || s2->hash != h || !fp_same(s2->ck, st[i].ck)) {
				st[i].fp = fp_victim(pl, cs, sl, h);
				continue;
			}
			st[i].fp = sl = s2;
		}
		const struct fp_prog *pr = &cs->progs[sl->prog];
		if (pr->ct_at < pr->n)
			iod_net_ct_prefetch_session(ct, sl->ct_entry);
		st[i].fp_run = 1;
		meta[i].hash = sl->tuple_hash;
		st[i].prog = pr;
		st[i].fp_ct_entry = sl->ct_entry;
		st[i].fp_ct_gen = sl->ct_gen;
		st[i].fp_ct_dir = sl->ct_dir;
	}
	/* Run every packet up to its first ct pipe (a compiled one up to its
	 * conntrack op); then, while some wait for conntrack, prefetch their
	 * index slots, then their sessions, then track them and run on: the
	 * cache misses of a burst overlap. Packets keep their order at every
	 * step (meters, conntrack state). */
	for (uint32_t i = 0; i < n; i++) {
		if (st[i].fp_run && st[i].prog->ct_at < st[i].prog->n &&
		    (!iod_net_ct_session_valid(ct, st[i].fp_ct_entry, st[i].fp_ct_gen, now_ns) ||
		     iod_net_ct_reopens(ct, st[i].fp_ct_entry, st[i].fp_ct_dir, meta[i].tcp_flags)))
			st[i].fp_run = 0; /* gone, replaced, timed out or a new connection on
			                   * a closed one's tuple: the slow path decides */
		/* a slow packet of the same flow before it in this burst may end the
		 * session (a new connection on a closed one's tuple, dropped before
		 * its commit: apply_entry) or replace it: the slow path decides.
		 * Only the burst's slow packets with a slot are compared (usually
		 * none), not every earlier packet. */
		for (uint32_t s = 0; st[i].fp_run && s < nslow; s++) {
			const struct pstate *sj = &st[slow[s]];
			if (sj->ck[0] == st[i].ck[0] && sj->ck[1] == st[i].ck[1] &&
			    sj->ck[2] == st[i].ck[2] &&
			    !((sj->ck[3] ^ st[i].ck[3]) & ~0xffull)) /* its TCP flags aside */
				st[i].fp_run = 0;
		}
		if (st[i].fp && !st[i].fp_run)
			slow[nslow++] = i;
		if (st[i].fp_run) {
			const struct fp_prog *pr = st[i].prog;
			cs->fp_hits++;
			if (!fp_exec(pl, core, &st[i], 0, pr->ct_at, pkts[i], &meta[i], now_ns))
				continue;
			if (pr->ct_at < pr->n)
				wait[nw++] = i;
			else
				finish(pkts[i], &pr->fwd, &meta[i]);
			continue;
		}
		if (meta[i].len)
			meta[i].hash = iod_net_tuple_hash(&meta[i].key);
		pkt_key(pkts[i], &meta[i], &st[i]);
		if (pkt_run(pl, core, pkts[i], &meta[i], &st[i], now_ns) == RUN_WAIT_CT)
			wait[nw++] = i;
	}
	for (int round = 0; nw && round < IOD_FLOW_HOPS_MAX; round++) {
		for (uint32_t w = 0; w < nw; w++)
			if (!st[wait[w]].fp_run)
				iod_net_ct_prefetch(ct, st[wait[w]].ct_hash);
		for (uint32_t w = 0; w < nw; w++)
			if (!st[wait[w]].fp_run)
				iod_net_ct_prefetch_entry(ct, st[wait[w]].ct_hash);
		uint32_t still = 0;
		for (uint32_t w = 0; w < nw; w++) {
			uint32_t i = wait[w];
			if (st[i].fp_run) {
				const struct fp_prog *pr = st[i].prog;
				if (fp_exec(pl, core, &st[i], pr->ct_at, pr->n, pkts[i], &meta[i],
				            now_ns))
					finish(pkts[i], &pr->fwd, &meta[i]);
				continue;
			}
			pkt_ct(pl, core, pkts[i], &meta[i], &st[i], now_ns);
			if (pkt_run(pl, core, pkts[i], &meta[i], &st[i], now_ns) == RUN_WAIT_CT)
				wait[still++] = i;
		}
		nw = still;
	}
	for (uint32_t i = 0; i < n; i++)
		if (pkts[i]->verdict == IOD_FLOW_V_DROP)
			cs->drops++;
	cs->packets += n;
}
