/*
 * net_ct.h: connection tracking (src/net/ct.c, pure): a bounded session
 * table per core, TCP state, expiry by a time the caller passes in.
 */
#ifndef IOD_NET_CT_H
#define IOD_NET_CT_H

#include "iod/net.h"

/* ---- connection tracking ----------------------------------------------- */

/*
 * Conntrack (net/ct.c): IPv4 5-tuple + zone sessions in a preallocated table,
 * both directions indexed, a simplified TCP state machine after netfilter's
 * nf_conntrack_proto_tcp (no window tracking), UDP and ICMP timeouts, NAT
 * bindings for the service LB. One table belongs to one core (RSS keeps
 * both directions of a flow on one core); it is never locked. Time is an
 * argument. IPv6 traffic is not tracked (lookups return INV|UNTRACKED).
 */

/* ct_state bits, matched by pipes after a ct pipe (as OVS's ct_state). */
#define IOD_NET_CT_TRK 0x01 /* went through conntrack */
#define IOD_NET_CT_NEW 0x02 /* no session yet (first packet) */
#define IOD_NET_CT_EST 0x04 /* part of a known session */
#define IOD_NET_CT_REL 0x08 /* related: an ICMP error about a known session */
#define IOD_NET_CT_RPL 0x10 /* reply direction */
#define IOD_NET_CT_INV 0x20 /* invalid: not trackable or not a valid transition */

#define IOD_NET_TCP_STATES(X)         \
	X(NONE, "none")               \
	X(SYN_SENT, "syn_sent")       \
	X(SYN_RECV, "syn_recv")       \
	X(ESTABLISHED, "established") \
	X(FIN_WAIT, "fin_wait")       \
	X(CLOSE_WAIT, "close_wait")   \
	X(LAST_ACK, "last_ack")       \
	X(TIME_WAIT, "time_wait")     \
	X(CLOSE, "close")

enum iod_net_tcp_state {
#define X(n, s) IOD_NET_TCP_##n,
	IOD_NET_TCP_STATES(X)
#undef X
	    IOD_NET_TCP_STATES_N
};
const char *iod_net_tcp_state_name(unsigned s);

/* Timeouts in seconds; zero fields take netfilter-like defaults. */
struct iod_net_ct_timeouts {
	uint32_t tcp_syn_s;         /* SYN_SENT / SYN_RECV: 120 / 60 */
	uint32_t tcp_established_s; /* ESTABLISHED: 432000 (5 days) */
	uint32_t tcp_closing_s;     /* FIN_WAIT, CLOSE_WAIT, LAST_ACK: 120 */
	uint32_t tcp_time_wait_s;   /* TIME_WAIT: 120 */
	uint32_t tcp_close_s;       /* CLOSE (after RST): 10 */
	uint32_t udp_s;             /* UDP, one direction seen: 30 */
	uint32_t udp_replied_s;     /* UDP, both directions seen: 120 */
	uint32_t icmp_s;            /* ICMP: 30 */
};

/* NAT bound to a session: original-direction packets are rewritten to
 * (ip, port); replies get the original address back. */
struct iod_net_ct_nat {
	uint8_t kind;  /* 0 none, IOD_NET_CT_NAT_DST, IOD_NET_CT_NAT_SRC */
	uint32_t ip;   /* translated address */
	uint16_t port; /* translated port, 0 = keep */
};
#define IOD_NET_CT_NAT_DST 1
#define IOD_NET_CT_NAT_SRC 2

/* What a lookup learnt about a packet. */
struct iod_net_ct_result {
	uint8_t ct_state;  /* IOD_NET_CT_* */
	uint8_t tcp_state; /* enum iod_net_tcp_state after this packet */
	uint8_t nat_kind;  /* the session's NAT kind */
	uint32_t entry;    /* session index; UINT32_MAX when none */
	uint32_t mark;     /* user mark of the session (the LB's backend) */
	uint32_t gen;      /* the session's commit generation (0 when none) */
};

/* A session as dumps and tests see it. */
struct iod_net_ct_info {
	struct iod_net_tuple orig;  /* original direction */
	struct iod_net_tuple reply; /* expected reply direction (after NAT) */
	uint8_t tcp_state;          /* enum iod_net_tcp_state (TCP only) */
	bool seen_reply;            /* a reply was seen */
	uint64_t last_ns;           /* last packet */
	uint64_t expires_ns;        /* when it times out */
	uint32_t mark;              /* user mark */
};

struct iod_net_ct;

/* Bytes a table for max_sessions sessions allocates (what a config check
 * holds against IOD_DP_CT_BYTES_MAX). */
uint64_t iod_net_ct_bytes(uint32_t max_sessions);
/* A table for max_sessions sessions, allocated now (never on the packet path). */
int iod_net_ct_create(struct iod_net_ct **out, uint32_t max_sessions,
                      const struct iod_net_ct_timeouts *t);
void iod_net_ct_destroy(struct iod_net_ct *ct);
/*
 * Look up the packet's key (tuple with zone) in both directions and advance
 * the session's state: ct_state has TRK and one of NEW (no session), EST,
 * REL or INV; RPL for the reply direction. tcp_flags are the packet's.
 * Never creates a session: that is iod_net_ct_commit, after policy allowed
 * the first packet. frame/m may be NULL; when given, an ICMP error's
 * embedded header is used to find the related session.
 */
void iod_net_ct_lookup(struct iod_net_ct *ct, const struct iod_net_tuple *key, uint8_t tcp_flags,
                       const uint8_t *frame, const struct iod_net_meta *m, uint64_t now_ns,
                       struct iod_net_ct_result *r);
/* The same with the key's hash (iod_net_tuple_hash) already computed. */
void iod_net_ct_lookup_hashed(struct iod_net_ct *ct, const struct iod_net_tuple *key, uint32_t hash,
                              uint8_t tcp_flags, const uint8_t *frame, const struct iod_net_meta *m,
                              uint64_t now_ns, struct iod_net_ct_result *r);
/* Burst helpers: prefetch the index slot of a hash, then (once it is in
 * cache) the session its first matching slot points to. Pure hints. */
void iod_net_ct_prefetch(const struct iod_net_ct *ct, uint32_t hash);
void iod_net_ct_prefetch_entry(const struct iod_net_ct *ct, uint32_t hash);
/*
 * Create the session for a NEW packet (its tuple is the original direction),
 * with an optional NAT binding and user mark. -ENOSPC when the table is full,
 * -EEXIST when it exists, -EINVAL for an untrackable key or a TCP first
 * packet that is not a SYN.
 */
int iod_net_ct_commit(struct iod_net_ct *ct, const struct iod_net_tuple *key, uint8_t tcp_flags,
                      const struct iod_net_ct_nat *nat, uint32_t mark, uint64_t now_ns,
                      struct iod_net_ct_result *r);
/*
 * The established-flow fast path (a cache that remembered a packet's
 * session): is session `entry` still the one committed with generation gen,
 * and not timed out at now_ns? Then iod_net_ct_touch() advances it exactly
 * as iod_net_ct_lookup() would for a packet found in direction dir (0
 * original, 1 reply), without hashing or probing the index.
 */
bool iod_net_ct_session_valid(const struct iod_net_ct *ct, uint32_t entry, uint32_t gen,
                              uint64_t now_ns);
/* Whether a packet with tcp_flags in direction dir is a new connection on
 * session entry's closed tuple (TCP in TIME_WAIT or CLOSE, a SYN without
 * ACK from the original side, a client's reused port): the lookup then
 * deletes the session and the packet is NEW, decided anew (its security
 * group, its service backend), as Linux conntrack does. A compiled flow
 * leaves such a packet to the slow path. */
bool iod_net_ct_reopens(const struct iod_net_ct *ct, uint32_t entry, int dir, uint8_t tcp_flags);
void iod_net_ct_touch(struct iod_net_ct *ct, uint32_t entry, int dir, uint8_t tcp_flags,
                      uint64_t now_ns, struct iod_net_ct_result *r);
void iod_net_ct_prefetch_session(const struct iod_net_ct *ct, uint32_t entry);
/* The rewrite iod_net_ct_nat_apply would do for r: 1 with *dst (true: the
 * destination, else the source), *ip and *port (0 = keep); 0 when none. */
int iod_net_ct_nat_target(const struct iod_net_ct *ct, const struct iod_net_ct_result *r, bool *dst,
                          uint32_t *ip, uint16_t *port);
/* Apply the session's NAT to a parsed frame for the direction r says. */
int iod_net_ct_nat_apply(const struct iod_net_ct *ct, const struct iod_net_ct_result *r,
                         uint8_t *frame, struct iod_net_meta *m);
/* Remove expired sessions, examining at most max_scan slots from where the
 * last call stopped (bounded work per call); cb (may be NULL) sees each one.
 * Returns the number removed. */
typedef void (*iod_net_ct_expired_fn)(void *ctx, const struct iod_net_ct_info *info);
uint32_t iod_net_ct_expire(struct iod_net_ct *ct, uint64_t now_ns, uint32_t max_scan,
                           iod_net_ct_expired_fn cb, void *ctx);
/* Delete one session (both directions). */
int iod_net_ct_delete(struct iod_net_ct *ct, uint32_t entry);
int iod_net_ct_get(const struct iod_net_ct *ct, uint32_t entry, struct iod_net_ct_info *info);
uint32_t iod_net_ct_count(const struct iod_net_ct *ct);
uint32_t iod_net_ct_capacity(const struct iod_net_ct *ct);
/* Bytes the table holds (entries + index): the memory budget's figure. */
size_t iod_net_ct_mem_bytes(const struct iod_net_ct *ct);
/* Iterate sessions in slot order: start with *pos = 0; false when done. */
bool iod_net_ct_next(const struct iod_net_ct *ct, uint32_t *pos, uint32_t *entry);

#endif
