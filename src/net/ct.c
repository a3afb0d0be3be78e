/*
 * ct.c: connection tracking for iod's data plane.
 *
 * Sessions are IPv4 5-tuples + a zone. The table is preallocated for its
 * maximum: 40-byte entries, a free stack, and an open-addressing index of
 * 8-byte slots (32-bit hash tag + entry/direction) with linear probing and
 * backward-shift deletion, sized so its load stays under ~0.72 with every
 * session present. Both directions of a session have a slot, so replies
 * (after NAT) are found by one probe sequence too. About 72 bytes a session.
 *
 * The TCP state machine is a simplification of netfilter's
 * nf_conntrack_proto_tcp (states and timeouts, no window tracking).
 *
 * Never allocates after create, never reads the clock (now_ns is passed in),
 * never locks: one table per core.
 */
#include "iod/net_ct.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define F_USED 0x01
#define F_SEEN_REPLY 0x02
#define F_FIN_ORIG 0x04
#define F_FIN_REPLY 0x08

/* One session (original direction + NAT binding). */
struct ct_entry {
	uint32_t src;      /* original source IPv4 */
	uint32_t dst;      /* original destination IPv4 */
	uint16_t sport;    /* original source port */
	uint16_t dport;    /* original destination port */
	uint32_t nat_ip;   /* NAT address (nat_kind != 0) */
	uint16_t nat_port; /* NAT port, 0 = unchanged */
	uint16_t zone;     /* zone */
	uint8_t proto;     /* IP protocol */
	uint8_t tcp_state; /* enum iod_net_tcp_state */
	uint8_t flags;     /* F_* */
	uint8_t nat_kind;  /* 0, IOD_NET_CT_NAT_DST, IOD_NET_CT_NAT_SRC */
	uint32_t mark;     /* user mark */
	uint32_t gen;      /* commit generation: tells a reused slot from its old session */
	uint64_t last_ns;  /* last packet */
};
_Static_assert(sizeof(struct ct_entry) == 40, "compact entries");

struct iod_net_ct {
	struct ct_entry *entries;      /* max entries */
	uint32_t *free_stack;          /* free entry indexes */
	uint32_t free_n;               /* on the stack */
	uint32_t max;                  /* sessions */
	uint64_t *slots;               /* index: tag << 32 | ((entry + 1) << 1 | dir); 0 empty */
	uint32_t slots_mask;           /* slots - 1 */
	uint32_t count;                /* live sessions */
	uint32_t expire_cursor;        /* next entry iod_net_ct_expire examines */
	uint32_t gen_next;             /* generation of the next commit (never 0) */
	struct iod_net_ct_timeouts to; /* timeouts, defaults filled */
};

static const char *const tcp_names[] = {
#define X(n, s) s,
    IOD_NET_TCP_STATES(X)
#undef X
};

const char *iod_net_tcp_state_name(unsigned s)
{
	return s < IOD_NET_TCP_STATES_N ? tcp_names[s] : "?";
}

void *iod_net_table_alloc(size_t bytes)
{
	const size_t huge = 2u << 20;
	size_t align = bytes < 2 * huge ? 64 : huge;
	size_t sz = ((bytes ? bytes : 1) + align - 1) & ~(align - 1);
	void *p = aligned_alloc(align, sz);
	if (!p)
		return NULL;
	if (align == huge)
		(void)madvise(p, sz, MADV_HUGEPAGE); /* a hint: without THP, 4 KiB pages */
	memset(p, 0, sz);                            /* touched now, not on the packet path */
	return p;
}

/* Hash slots for max sessions: two per session at a load of 72 %, a power of two. */
static uint64_t ct_slots(uint32_t max_sessions)
{
	uint64_t want = (uint64_t)max_sessions * 2 * 100 / 72 + 1, slots = 16;
	while (slots < want)
		slots <<= 1;
	return slots;
}

uint64_t iod_net_ct_bytes(uint32_t max_sessions)
{
	return (uint64_t)max_sessions * (sizeof(struct ct_entry) + sizeof(uint32_t)) +
	       ct_slots(max_sessions) * sizeof(uint64_t) + sizeof(struct iod_net_ct);
}

int iod_net_ct_create(struct iod_net_ct **out, uint32_t max_sessions,
                      const struct iod_net_ct_timeouts *t)
{
	if (!max_sessions || max_sessions > IOD_NET_CT_SESSIONS_MAX)
		return -EINVAL;
	struct iod_net_ct *ct = calloc(1, sizeof(*ct));
	if (!ct)
		return -ENOMEM;
	uint64_t slots = ct_slots(max_sessions);
	ct->max = max_sessions;
	ct->gen_next = 1;
	ct->slots_mask = (uint32_t)(slots - 1);
	ct->entries = iod_net_table_alloc(sizeof(*ct->entries) * max_sessions);
	ct->free_stack = malloc(sizeof(uint32_t) * max_sessions);
	ct->slots = iod_net_table_alloc(slots * sizeof(uint64_t));
	if (!ct->entries || !ct->free_stack || !ct->slots) {
		iod_net_ct_destroy(ct);
		return -ENOMEM;
	}
	/* Touch everything now (start-up), so no page fault lands on the packet path. */
	for (uint32_t i = 0; i < max_sessions; i++)
		ct->free_stack[i] = max_sessions - 1 - i; /* pop 0 first */
	ct->free_n = max_sessions;
	if (t)
		ct->to = *t;
	struct iod_net_ct_timeouts *d = &ct->to;
	d->tcp_syn_s = d->tcp_syn_s ? d->tcp_syn_s : 120;
	d->tcp_established_s = d->tcp_established_s ? d->tcp_established_s : 432000;
	d->tcp_closing_s = d->tcp_closing_s ? d->tcp_closing_s : 120;
	d->tcp_time_wait_s = d->tcp_time_wait_s ? d->tcp_time_wait_s : 120;
	d->tcp_close_s = d->tcp_close_s ? d->tcp_close_s : 10;
	d->udp_s = d->udp_s ? d->udp_s : 30;
	d->udp_replied_s = d->udp_replied_s ? d->udp_replied_s : 120;
	d->icmp_s = d->icmp_s ? d->icmp_s : 30;
	*out = ct;
	return 0;
}

void iod_net_ct_destroy(struct iod_net_ct *ct)
{
	if (!ct)
		return;
	free(ct->entries);
	free(ct->free_stack);
	free(ct->slots);
	free(ct);
}

uint32_t iod_net_ct_count(const struct iod_net_ct *ct)
{
	return ct->count;
}

uint32_t iod_net_ct_capacity(const struct iod_net_ct *ct)
{
	return ct->max;
}

size_t iod_net_ct_mem_bytes(const struct iod_net_ct *ct)
{
	return sizeof(*ct) + (size_t)ct->max * (sizeof(struct ct_entry) + sizeof(uint32_t)) +
	       ((size_t)ct->slots_mask + 1) * sizeof(uint64_t);
}

static void entry_tuple(const struct ct_entry *e, int dir, struct iod_net_tuple *t)
{
	memset(t, 0, sizeof(*t));
	t->family = IOD_NET_AF_V4;
	t->proto = e->proto;
	t->zone = e->zone;
	if (dir == 0) {
		t->src.v4 = e->src;
		t->dst.v4 = e->dst;
		t->sport = e->sport;
		t->dport = e->dport;
		return;
	}
	/* reply direction */
	t->src.v4 = e->dst;
	t->sport = e->dport;
	t->dst.v4 = e->src;
	t->dport = e->sport;
	if (e->nat_kind == IOD_NET_CT_NAT_DST) {
		t->src.v4 = e->nat_ip;
		if (e->nat_port)
			t->sport = e->nat_port;
	} else if (e->nat_kind == IOD_NET_CT_NAT_SRC) {
		t->dst.v4 = e->nat_ip;
		if (e->nat_port)
			t->dport = e->nat_port;
	}
}

static uint64_t timeout_ns(const struct iod_net_ct *ct, const struct ct_entry *e)
{
	const struct iod_net_ct_timeouts *t = &ct->to;
	uint32_t s;
	if (e->proto == IOD_NET_PROTO_TCP) {
		switch (e->tcp_state) {
		case IOD_NET_TCP_SYN_SENT: s = t->tcp_syn_s; break;
		case IOD_NET_TCP_SYN_RECV: s = t->tcp_syn_s / 2 ? t->tcp_syn_s / 2 : 1; break;
		case IOD_NET_TCP_ESTABLISHED: s = t->tcp_established_s; break;
		case IOD_NET_TCP_TIME_WAIT: s = t->tcp_time_wait_s; break;
		case IOD_NET_TCP_CLOSE: s = t->tcp_close_s; break;
		default: s = t->tcp_closing_s; break;
		}
	} else if (e->proto == IOD_NET_PROTO_UDP) {
		s = (e->flags & F_SEEN_REPLY) ? t->udp_replied_s : t->udp_s;
	} else {
		s = t->icmp_s;
	}
	return (uint64_t)s * IOD_NS_PER_S;
}

static bool key_matches(const struct ct_entry *e, int dir, const struct iod_net_tuple *k)
{
	struct iod_net_tuple t;
	if (dir == 0)
		return e->src == k->src.v4 && e->dst == k->dst.v4 && e->sport == k->sport &&
		       e->dport == k->dport && e->proto == k->proto && e->zone == k->zone;
	entry_tuple(e, 1, &t);
	return t.src.v4 == k->src.v4 && t.dst.v4 == k->dst.v4 && t.sport == k->sport &&
	       t.dport == k->dport && t.proto == k->proto && t.zone == k->zone;
}

/* Find key: the slot value, or 0. */
static uint64_t find(const struct iod_net_ct *ct, const struct iod_net_tuple *k, uint32_t h)
{
	uint32_t i = h & ct->slots_mask;
	for (uint32_t n = 0; n <= ct->slots_mask; n++, i = (i + 1) & ct->slots_mask) {
		uint64_t s = ct->slots[i];
		if (!s)
			return 0;
		if ((uint32_t)(s >> 32) != h)
			continue;
		uint32_t v = (uint32_t)s;
		const struct ct_entry *e = &ct->entries[(v >> 1) - 1];
		if (key_matches(e, (int)(v & 1), k))
			return s;
	}
	return 0;
}

static void slot_insert(struct iod_net_ct *ct, uint32_t h, uint32_t val)
{
	uint32_t i = h & ct->slots_mask;
	while (ct->slots[i])
		i = (i + 1) & ct->slots_mask;
	ct->slots[i] = (uint64_t)h << 32 | val;
}

static void slot_remove(struct iod_net_ct *ct, uint32_t h, uint32_t val)
{
	uint32_t mask = ct->slots_mask, i = h & mask;
	while (ct->slots[i] != ((uint64_t)h << 32 | val)) {
		IOD_ASSERT(ct->slots[i] != 0);
		i = (i + 1) & mask;
	}
	/* Backward-shift deletion: move later members of the run into the hole. */
	uint32_t hole = i;
	for (uint32_t j = (i + 1) & mask; ct->slots[j]; j = (j + 1) & mask) {
		uint32_t home = (uint32_t)(ct->slots[j] >> 32) & mask;
		/* Can j move to hole? Only if home is not in (hole, j]. */
		bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (!in_range) {
			ct->slots[hole] = ct->slots[j];
			hole = j;
		}
	}
	ct->slots[hole] = 0;
}

int iod_net_ct_delete(struct iod_net_ct *ct, uint32_t entry)
{
	if (entry >= ct->max || !(ct->entries[entry].flags & F_USED))
		return -ENOENT;
	struct ct_entry *e = &ct->entries[entry];
	struct iod_net_tuple t;
	for (int dir = 0; dir < 2; dir++) {
		entry_tuple(e, dir, &t);
		slot_remove(ct, iod_net_tuple_hash(&t), (entry + 1) << 1 | (uint32_t)dir);
	}
	e->flags = 0;
	ct->free_stack[ct->free_n++] = entry;
	ct->count--;
	return 0;
}

/* Advance the TCP state for a packet in direction dir (0 orig, 1 reply). */
static void tcp_advance(struct ct_entry *e, int dir, uint8_t fl)
{
	uint8_t s = e->tcp_state;
	if (fl & IOD_NET_TCP_RST) {
		e->tcp_state = IOD_NET_TCP_CLOSE;
		return;
	}
	switch (s) {
	case IOD_NET_TCP_SYN_SENT:
		if (dir == 1 && (fl & IOD_NET_TCP_SYN) && (fl & IOD_NET_TCP_ACK))
			s = IOD_NET_TCP_SYN_RECV;
		break;
	case IOD_NET_TCP_SYN_RECV:
		if (dir == 0 && (fl & IOD_NET_TCP_ACK) && !(fl & IOD_NET_TCP_SYN))
			s = IOD_NET_TCP_ESTABLISHED;
		break;
	case IOD_NET_TCP_ESTABLISHED:
		if (fl & IOD_NET_TCP_FIN) {
			e->flags |= dir ? F_FIN_REPLY : F_FIN_ORIG;
			s = dir ? IOD_NET_TCP_CLOSE_WAIT : IOD_NET_TCP_FIN_WAIT;
		}
		break;
	case IOD_NET_TCP_FIN_WAIT:
	case IOD_NET_TCP_CLOSE_WAIT:
		if (fl & IOD_NET_TCP_FIN) {
			e->flags |= dir ? F_FIN_REPLY : F_FIN_ORIG;
			if ((e->flags & (F_FIN_ORIG | F_FIN_REPLY)) == (F_FIN_ORIG | F_FIN_REPLY))
				s = IOD_NET_TCP_LAST_ACK;
		}
		break;
	case IOD_NET_TCP_LAST_ACK:
		if ((fl & IOD_NET_TCP_ACK) && !(fl & IOD_NET_TCP_FIN))
			s = IOD_NET_TCP_TIME_WAIT;
		break;
	case IOD_NET_TCP_TIME_WAIT:
	case IOD_NET_TCP_CLOSE:
		if (dir == 0 && (fl & IOD_NET_TCP_SYN) && !(fl & IOD_NET_TCP_ACK)) {
			/* A new connection on the same tuple (port reuse). */
			s = IOD_NET_TCP_SYN_SENT;
			e->flags &= (uint8_t) ~(F_FIN_ORIG | F_FIN_REPLY | F_SEEN_REPLY);
		}
		break;
	default: break;
	}
	e->tcp_state = s;
}

static bool icmp_related(struct iod_net_ct *ct, const struct iod_net_tuple *key, const uint8_t *f,
                         const struct iod_net_meta *m, struct iod_net_ct_result *r)
{
	if (!f || !m || key->proto != IOD_NET_PROTO_ICMP)
		return false;
	uint8_t type = (uint8_t)(key->dport >> 8);
	if (type != 3 && type != 11 && type != 12)
		return false;
	bool tun = m->flags & IOD_NET_F_VXLAN;
	uint32_t l4 = tun ? m->in_l4_ofs : m->l4_ofs, ip = l4 + 8;
	if (!l4 || m->len < ip + 20 || (f[ip] >> 4) != 4)
		return false;
	uint32_t hl = (f[ip] & 0x0fu) * 4u;
	if (hl < 20 || m->len < ip + hl + 4)
		return false;
	struct iod_net_tuple t = {0};
	t.family = IOD_NET_AF_V4;
	t.proto = f[ip + 9];
	t.zone = key->zone;
	t.src.v4 = iod_net_be32(f + ip + 12);
	t.dst.v4 = iod_net_be32(f + ip + 16);
	if (t.proto == IOD_NET_PROTO_TCP || t.proto == IOD_NET_PROTO_UDP) {
		t.sport = iod_net_be16(f + ip + hl);
		t.dport = iod_net_be16(f + ip + hl + 2);
	}
	uint64_t s = find(ct, &t, iod_net_tuple_hash(&t));
	if (!s)
		return false;
	uint32_t v = (uint32_t)s;
	r->ct_state = IOD_NET_CT_TRK | IOD_NET_CT_REL;
	r->entry = (v >> 1) - 1;
	r->mark = ct->entries[r->entry].mark;
	return true;
}

void iod_net_ct_prefetch(const struct iod_net_ct *ct, uint32_t hash)
{
	__builtin_prefetch(&ct->slots[hash & ct->slots_mask]);
}

void iod_net_ct_prefetch_entry(const struct iod_net_ct *ct, uint32_t hash)
{
	uint32_t i = hash & ct->slots_mask;
	for (int n = 0; n < 4; n++, i = (i + 1) & ct->slots_mask) {
		uint64_t s = ct->slots[i];
		if (!s)
			return;
		if ((uint32_t)(s >> 32) == hash) {
			__builtin_prefetch(&ct->entries[((uint32_t)s >> 1) - 1]);
			return;
		}
	}
}

/* A packet of a live session in direction dir: state, timestamps, result. */
static inline void advance(struct ct_entry *e, uint32_t idx, int dir, uint8_t tcp_flags,
                           uint64_t now_ns, struct iod_net_ct_result *r)
{
	if (e->proto == IOD_NET_PROTO_TCP)
		tcp_advance(e, dir, tcp_flags);
	if (dir)
		e->flags |= F_SEEN_REPLY;
	e->last_ns = now_ns;
	r->ct_state = IOD_NET_CT_TRK | IOD_NET_CT_EST | (dir ? IOD_NET_CT_RPL : 0);
	r->tcp_state = e->tcp_state;
	r->nat_kind = e->nat_kind;
	r->entry = idx;
	r->mark = e->mark;
	r->gen = e->gen;
}

bool iod_net_ct_session_valid(const struct iod_net_ct *ct, uint32_t entry, uint32_t gen,
                              uint64_t now_ns)
{
	if (entry >= ct->max)
		return false;
	const struct ct_entry *e = &ct->entries[entry];
	return (e->flags & F_USED) && e->gen == gen && now_ns <= e->last_ns + timeout_ns(ct, e);
}

bool iod_net_ct_reopens(const struct iod_net_ct *ct, uint32_t entry, int dir, uint8_t tcp_flags)
{
	if (dir != 0 ||
	    (tcp_flags & (IOD_NET_TCP_SYN | IOD_NET_TCP_ACK | IOD_NET_TCP_RST)) != IOD_NET_TCP_SYN)
		return false;
	IOD_ASSERT_HOT(entry < ct->max);
	const struct ct_entry *e = &ct->entries[entry];
	return e->proto == IOD_NET_PROTO_TCP &&
	       (e->tcp_state == IOD_NET_TCP_TIME_WAIT || e->tcp_state == IOD_NET_TCP_CLOSE);
}

void iod_net_ct_touch(struct iod_net_ct *ct, uint32_t entry, int dir, uint8_t tcp_flags,
                      uint64_t now_ns, struct iod_net_ct_result *r)
{
	IOD_ASSERT_HOT(entry < ct->max && (ct->entries[entry].flags & F_USED));
	advance(&ct->entries[entry], entry, dir, tcp_flags, now_ns, r);
}

void iod_net_ct_prefetch_session(const struct iod_net_ct *ct, uint32_t entry)
{
	if (entry < ct->max)
		__builtin_prefetch(&ct->entries[entry]);
}

int iod_net_ct_nat_target(const struct iod_net_ct *ct, const struct iod_net_ct_result *r, bool *dst,
                          uint32_t *ip, uint16_t *port)
{
	if (r->entry == UINT32_MAX || !r->nat_kind || (r->ct_state & IOD_NET_CT_REL))
		return 0;
	const struct ct_entry *e = &ct->entries[r->entry];
	bool reply = r->ct_state & IOD_NET_CT_RPL;
	if (e->nat_kind == IOD_NET_CT_NAT_DST) {
		*dst = !reply;
		*ip = reply ? e->dst : e->nat_ip;
		*port = reply ? (e->nat_port ? e->dport : 0) : e->nat_port;
	} else {
		*dst = reply;
		*ip = reply ? e->src : e->nat_ip;
		*port = reply ? (e->nat_port ? e->sport : 0) : e->nat_port;
	}
	return 1;
}

void iod_net_ct_lookup(struct iod_net_ct *ct, const struct iod_net_tuple *key, uint8_t tcp_flags,
                       const uint8_t *frame, const struct iod_net_meta *m, uint64_t now_ns,
                       struct iod_net_ct_result *r)
{
	iod_net_ct_lookup_hashed(ct, key, iod_net_tuple_hash(key), tcp_flags, frame, m, now_ns, r);
}

void iod_net_ct_lookup_hashed(struct iod_net_ct *ct, const struct iod_net_tuple *key, uint32_t h,
                              uint8_t tcp_flags, const uint8_t *frame, const struct iod_net_meta *m,
                              uint64_t now_ns, struct iod_net_ct_result *r)
{
	r->ct_state = IOD_NET_CT_TRK;
	r->tcp_state = IOD_NET_TCP_NONE;
	r->nat_kind = 0;
	r->entry = UINT32_MAX;
	r->mark = 0;
	r->gen = 0;
	if (key->family != IOD_NET_AF_V4) {
		r->ct_state |= IOD_NET_CT_INV;
		return;
	}
	uint64_t s = find(ct, key, h);
	if (s) {
		uint32_t v = (uint32_t)s, idx = (v >> 1) - 1;
		int dir = (int)(v & 1);
		struct ct_entry *e = &ct->entries[idx];
		if (now_ns > e->last_ns + timeout_ns(ct, e)) {
			iod_net_ct_delete(ct, idx); /* stale: as if never seen */
			s = 0;
		} else if (iod_net_ct_reopens(ct, idx, dir, tcp_flags)) {
			/* A new connection on a closed session's tuple (the client
			 * reused its port): a new session, decided anew (its
			 * security group, its service backend: the old one's may be
			 * down), as Linux conntrack drops a TIME_WAIT entry on a
			 * new SYN and sees the packet again. */
			iod_net_ct_delete(ct, idx);
			s = 0;
		} else {
			advance(e, idx, dir, tcp_flags, now_ns, r);
			return;
		}
	}
	if (icmp_related(ct, key, frame, m, r))
		return;
	if (key->proto == IOD_NET_PROTO_TCP &&
	    (tcp_flags & (IOD_NET_TCP_SYN | IOD_NET_TCP_ACK | IOD_NET_TCP_RST)) != IOD_NET_TCP_SYN)
		r->ct_state |= IOD_NET_CT_INV; /* mid-stream: no session to resume */
	else
		r->ct_state |= IOD_NET_CT_NEW;
}

int iod_net_ct_commit(struct iod_net_ct *ct, const struct iod_net_tuple *key, uint8_t tcp_flags,
                      const struct iod_net_ct_nat *nat, uint32_t mark, uint64_t now_ns,
                      struct iod_net_ct_result *r)
{
	if (key->family != IOD_NET_AF_V4)
		return -EINVAL;
	if (key->proto == IOD_NET_PROTO_TCP &&
	    (tcp_flags & (IOD_NET_TCP_SYN | IOD_NET_TCP_ACK | IOD_NET_TCP_RST)) != IOD_NET_TCP_SYN)
		return -EINVAL;
	uint32_t h = iod_net_tuple_hash(key);
	if (find(ct, key, h))
		return -EEXIST;
	if (!ct->free_n)
		return -ENOSPC;
	uint32_t idx = ct->free_stack[--ct->free_n];
	struct ct_entry *e = &ct->entries[idx];
	memset(e, 0, sizeof(*e));
	e->src = key->src.v4;
	e->dst = key->dst.v4;
	e->sport = key->sport;
	e->dport = key->dport;
	e->proto = key->proto;
	e->zone = key->zone;
	e->flags = F_USED;
	e->mark = mark;
	e->gen = ct->gen_next++;
	if (!ct->gen_next)
		ct->gen_next = 1;
	e->last_ns = now_ns;
	e->tcp_state = key->proto == IOD_NET_PROTO_TCP ? IOD_NET_TCP_SYN_SENT : IOD_NET_TCP_NONE;
	if (nat && nat->kind) {
		e->nat_kind = nat->kind;
		e->nat_ip = nat->ip;
		e->nat_port = nat->port;
	}
	struct iod_net_tuple rt;
	entry_tuple(e, 1, &rt);
	uint32_t rh = iod_net_tuple_hash(&rt);
	if (find(ct, &rt, rh)) {
		/* The reply tuple collides with another session (NAT clash). */
		e->flags = 0;
		ct->free_stack[ct->free_n++] = idx;
		return -EEXIST;
	}
	slot_insert(ct, h, (idx + 1) << 1);
	slot_insert(ct, rh, (idx + 1) << 1 | 1);
	ct->count++;
	if (r) {
		r->ct_state = IOD_NET_CT_TRK | IOD_NET_CT_NEW;
		r->tcp_state = e->tcp_state;
		r->nat_kind = e->nat_kind;
		r->entry = idx;
		r->mark = mark;
		r->gen = e->gen;
	}
	return 0;
}

int iod_net_ct_nat_apply(const struct iod_net_ct *ct, const struct iod_net_ct_result *r,
                         uint8_t *frame, struct iod_net_meta *m)
{
	if (r->entry == UINT32_MAX || !r->nat_kind || (r->ct_state & IOD_NET_CT_REL))
		return 0;
	const struct ct_entry *e = &ct->entries[r->entry];
	bool reply = r->ct_state & IOD_NET_CT_RPL;
	if (e->nat_kind == IOD_NET_CT_NAT_DST)
		return reply ? iod_net_nat_src(frame, m, e->dst, e->nat_port ? e->dport : 0)
		             : iod_net_nat_dst(frame, m, e->nat_ip, e->nat_port);
	return reply ? iod_net_nat_dst(frame, m, e->src, e->nat_port ? e->sport : 0)
	             : iod_net_nat_src(frame, m, e->nat_ip, e->nat_port);
}

int iod_net_ct_get(const struct iod_net_ct *ct, uint32_t entry, struct iod_net_ct_info *info)
{
	if (entry >= ct->max || !(ct->entries[entry].flags & F_USED))
		return -ENOENT;
	const struct ct_entry *e = &ct->entries[entry];
	entry_tuple(e, 0, &info->orig);
	entry_tuple(e, 1, &info->reply);
	info->tcp_state = e->tcp_state;
	info->seen_reply = e->flags & F_SEEN_REPLY;
	info->last_ns = e->last_ns;
	info->expires_ns = e->last_ns + timeout_ns(ct, e);
	info->mark = e->mark;
	return 0;
}

bool iod_net_ct_next(const struct iod_net_ct *ct, uint32_t *pos, uint32_t *entry)
{
	while (*pos < ct->max) {
		uint32_t i = (*pos)++;
		if (ct->entries[i].flags & F_USED) {
			*entry = i;
			return true;
		}
	}
	return false;
}

uint32_t iod_net_ct_expire(struct iod_net_ct *ct, uint64_t now_ns, uint32_t max_scan,
                           iod_net_ct_expired_fn cb, void *ctx)
{
	uint32_t removed = 0;
	if (max_scan > ct->max)
		max_scan = ct->max;
	for (uint32_t n = 0; n < max_scan; n++) {
		uint32_t i = ct->expire_cursor;
		ct->expire_cursor = i + 1 == ct->max ? 0 : i + 1;
		struct ct_entry *e = &ct->entries[i];
		if (!(e->flags & F_USED) || now_ns <= e->last_ns + timeout_ns(ct, e))
			continue;
		if (cb) {
			struct iod_net_ct_info info;
			iod_net_ct_get(ct, i, &info);
			cb(ctx, &info);
		}
		iod_net_ct_delete(ct, i);
		removed++;
	}
	return removed;
}
