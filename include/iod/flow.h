/*
 * flow.h: iod's match/action pipeline, modelled on DOCA Flow: ports, pipes
 * (templates of match + mask, actions, monitors, fwd and fwd_miss), entries
 * that fill what a pipe left changeable, and an execution engine that runs
 * bursts of packets through them.
 *
 * Why: the data plane's rules must run in software on any core and be
 * expressible as NIC rules (rte_flow) where hardware can take them; DOCA
 * Flow's model is exactly that shape.
 *
 * Rules of the engine: no malloc and no locks on the packet path; bursts of
 * up to IOD_FLOW_BURST_MAX; each packet is parsed once; an exact-match cache
 * per core sits in front of the pipe walk (as OVS's EMC); counters are per
 * core and summed on read; time comes in as an argument. Entry changes are
 * queued and applied by iod_flow_entries_process(), which the owner calls
 * between bursts (never concurrently with iod_flow_burst on any core).
 */
#ifndef IOD_FLOW_H
#define IOD_FLOW_H

#include "iod/ar.h"
#include "iod/net.h"
#include "iod/net_ct.h"
#include "iod/net_policy.h"

/* ---- packets ----------------------------------------------------------- */

/* Where a packet goes after a burst. */
enum iod_flow_verdict {
	IOD_FLOW_V_DROP = 0, /* dropped (explicitly, by a miss, or an error) */
	IOD_FLOW_V_PORT,     /* transmit on port_out */
	IOD_FLOW_V_RSS,      /* deliver to queue `queue` of the local stack/core */
};

/* One packet buffer: the frame and what the engine decided. */
struct iod_pkt {
	uint8_t *data;        /* frame start (moves on encap/decap) */
	uint32_t len;         /* frame bytes */
	uint32_t headroom;    /* writable bytes before data */
	uint16_t port_in;     /* receiving port */
	uint16_t port_out;    /* IOD_FLOW_V_PORT: output port */
	uint16_t queue;       /* IOD_FLOW_V_RSS: the chosen queue */
	uint16_t mirror_port; /* UINT16_MAX = none; else also send a copy there */
	uint8_t verdict;      /* enum iod_flow_verdict */
	uint8_t color;        /* meter colour, IOD_NET_GREEN.. */
	uint8_t ct_state;     /* IOD_NET_CT_* when a ct pipe ran */
	uint8_t pad;          /* zero */
	void *io;             /* the backend's handle (an mbuf, a ring slot) */
};

/* ---- match keys -------------------------------------------------------- */

/*
 * The match key every pipe sees: the parse-once metadata condensed into 64
 * bytes (one cache line), plus what earlier pipes set (meta, zone, ct_state).
 * Addresses and ports are those of the inner packet when tunnelled (after a
 * decap action they are the only ones). A pipe's mask is a key too: bits set
 * in the mask are compared.
 */
struct iod_flow_key {
	uint32_t in_port;       /* receiving port */
	uint32_t meta;          /* scratch register set by an earlier pipe */
	uint32_t vni;           /* VXLAN VNI (0 when not tunnelled) */
	uint16_t eth_type;      /* EtherType of the key's L3 */
	uint8_t proto;          /* IP protocol */
	uint8_t tcp_flags;      /* TCP flags */
	union iod_net_addr src; /* source address */
	union iod_net_addr dst; /* destination address */
	uint16_t sport;         /* L4 source port */
	uint16_t dport;         /* L4 destination port */
	uint32_t outer_dst_ip;  /* outer IPv4 destination (our VTEP) when tunnelled */
	uint8_t ct_state;       /* IOD_NET_CT_* after a ct pipe */
	uint8_t family;         /* IOD_NET_AF_* */
	uint16_t zone;          /* conntrack zone (set by an action) */
	uint16_t vlan;          /* outer VLAN id */
	uint8_t dscp;           /* DSCP of the key's IP header */
	uint8_t tunnelled;      /* 1 while outer headers are present */
};
_Static_assert(sizeof(struct iod_flow_key) == 64, "the key is one cache line");

/* Fill a key from parsed metadata. */
void iod_flow_key_from_meta(struct iod_flow_key *k, const struct iod_net_meta *m, uint16_t port_in);

/* ---- actions, monitors, forwarding ------------------------------------- */

#define IOD_FLOW_ACT_DECAP 0x0001     /* strip VXLAN (outer eth/ip/udp/vxlan) */
#define IOD_FLOW_ACT_ENCAP 0x0002     /* add VXLAN with .encap */
#define IOD_FLOW_ACT_SET_META 0x0004  /* key.meta = .meta */
#define IOD_FLOW_ACT_SET_ZONE 0x0008  /* key.zone = .zone */
#define IOD_FLOW_ACT_NAT_DST 0x0010   /* destination IPv4[:port] = .nat_ip[:nat_port] */
#define IOD_FLOW_ACT_NAT_SRC 0x0020   /* source IPv4[:port] = .nat_ip[:nat_port] */
#define IOD_FLOW_ACT_DEC_TTL 0x0040   /* decrement the outer TTL (drop at 0) */
#define IOD_FLOW_ACT_SET_MAC 0x0080   /* Ethernet dst/src = .dst_mac/.src_mac */
#define IOD_FLOW_ACT_MAC_SWAP 0x0100  /* swap Ethernet addresses */
#define IOD_FLOW_ACT_SET_DSCP 0x0200  /* set the DSCP of the key's IPv4 header */
#define IOD_FLOW_ACT_CT_COMMIT 0x0400 /* commit the session (after a ct pipe saw NEW) */
#define IOD_FLOW_ACT_LB 0x0800        /* service LB: pick a backend, DNAT, commit with NAT */
#define IOD_FLOW_ACT_ARP_REPLY 0x1000 /* answer ARP for .arp_ip with .src_mac, back out in_port */
#define IOD_FLOW_ACT_SET_SPORT 0x2000 /* outer UDP source port of the encap = .encap.src_port */

struct iod_flow_actions {
	uint32_t flags;                    /* IOD_FLOW_ACT_* */
	uint32_t meta;                     /* SET_META */
	uint16_t zone;                     /* SET_ZONE */
	uint16_t nat_port;                 /* NAT_*: 0 = keep the port */
	uint32_t nat_ip;                   /* NAT_* */
	uint8_t dst_mac[6];                /* SET_MAC */
	uint8_t src_mac[6];                /* SET_MAC; ARP_REPLY's gateway MAC */
	uint8_t dscp;                      /* SET_DSCP */
	uint32_t arp_ip;                   /* ARP_REPLY: the gateway address */
	uint32_t lb_service;               /* LB: index into the pipeline's services */
	struct iod_net_vxlan_tunnel encap; /* ENCAP */
};

#define IOD_FLOW_MON_COUNT 0x01  /* packets and bytes */
#define IOD_FLOW_MON_METER 0x02  /* colour with .meter; red is dropped unless .meter_pass */
#define IOD_FLOW_MON_AGING 0x04  /* remove after .aging_s idle, with a callback */
#define IOD_FLOW_MON_MIRROR 0x08 /* also send a copy to .mirror_port */

struct iod_flow_monitor {
	uint32_t flags;                 /* IOD_FLOW_MON_* */
	struct iod_net_meter_cfg meter; /* METER */
	bool meter_pass_red;            /* METER: mark red instead of dropping it */
	uint32_t aging_s;               /* AGING: idle seconds */
	uint16_t mirror_port;           /* MIRROR */
};

enum iod_flow_fwd_type {
	IOD_FLOW_FWD_NONE = 0, /* unset: for an entry, use the pipe's fwd */
	IOD_FLOW_FWD_PORT,     /* transmit on .port */
	IOD_FLOW_FWD_PIPE,     /* continue in .pipe */
	IOD_FLOW_FWD_DROP,     /* drop */
	IOD_FLOW_FWD_RSS,      /* spread over .rss_queues queues by the flow hash */
};

struct iod_flow_fwd {
	uint8_t type;        /* enum iod_flow_fwd_type */
	uint16_t port;       /* PORT */
	uint16_t rss_queues; /* RSS: queue count */
	uint32_t pipe;       /* PIPE: pipe id */
};

/* ---- pipes ------------------------------------------------------------- */

#define IOD_FLOW_PIPE_KINDS(X)                                                 \
	X(BASIC, "basic")     /* exact match on the masked key (hash table) */ \
	X(CONTROL, "control") /* priority + per-entry mask, first match */     \
	X(LPM, "lpm")         /* longest prefix on the destination IPv4 */     \
	X(ACL, "acl")         /* ternary + port ranges, priority */            \
	X(HASH, "hash")       /* entry chosen by a hash of masked fields */    \
	X(CT, "ct")           /* conntrack: sets ct_state, applies NAT */

enum iod_flow_pipe_kind {
#define X(n, s) IOD_FLOW_PIPE_##n,
	IOD_FLOW_PIPE_KINDS(X)
#undef X
	    IOD_FLOW_PIPE_KINDS_N
};
const char *iod_flow_pipe_kind_name(unsigned k);
int iod_flow_pipe_kind_parse(const char *s, enum iod_flow_pipe_kind *k);

struct iod_flow_pipe_cfg {
	char name[IOD_NAME_MAX];         /* for dumps and errors */
	enum iod_flow_pipe_kind kind;    /* pipe kind */
	bool is_root;                    /* root of port .port (first pipe its packets see) */
	uint16_t port;                   /* root: the port */
	struct iod_flow_key match;       /* pipe-wide constant values, compared under const_mask */
	struct iod_flow_key const_mask;  /* fields fixed for the whole pipe (a mismatch misses) */
	struct iod_flow_key mask;        /* fields each entry fills (BASIC/HASH: the key fields) */
	struct iod_flow_actions actions; /* template: entries' flags OR into these */
	struct iod_flow_monitor monitor; /* template monitor (entries may add) */
	struct iod_flow_fwd fwd;         /* on a hit (entries may override) */
	struct iod_flow_fwd fwd_miss;    /* on a miss */
	uint32_t entries_max;            /* capacity, allocated at creation */
	uint8_t ct_zone_from_meta;       /* CT: 1 = zone from key.meta low 16 bits */
};

/* An entry: what fills the pipe's template. */
struct iod_flow_entry_cfg {
	struct iod_flow_key match;       /* values (BASIC/CONTROL/ACL/LPM) */
	struct iod_flow_key mask;        /* CONTROL/ACL: per-entry mask */
	uint8_t prefix_len;              /* LPM: prefix length of match.dst.v4 */
	uint32_t priority;               /* CONTROL/ACL: lower wins */
	uint16_t sport_min, sport_max;   /* ACL: source port range (0,0 = any) */
	uint16_t dport_min, dport_max;   /* ACL: destination port range (0,0 = any) */
	struct iod_flow_actions actions; /* per-entry action values */
	struct iod_flow_monitor monitor; /* per-entry monitor */
	struct iod_flow_fwd fwd;         /* FWD_NONE = the pipe's */
};

/* ---- the pipeline ------------------------------------------------------ */

enum iod_flow_op { IOD_FLOW_OP_ADD = 1, IOD_FLOW_OP_UPDATE, IOD_FLOW_OP_REMOVE, IOD_FLOW_OP_AGED };
const char *iod_flow_op_name(unsigned op);

/* Completion of a queued operation (status 0 or a negative errno), or an
 * aged entry (op AGED). */
typedef void (*iod_flow_status_fn)(void *user_ctx, uint32_t pipe, uint32_t entry,
                                   enum iod_flow_op op, int status);

struct iod_flow_pipeline;

struct iod_flow_pipeline_cfg {
	uint32_t cores;                      /* worker cores (per-core caches, counters), >= 1 */
	uint16_t ports;                      /* ports 0..ports-1 */
	uint16_t vxlan_port;                 /* parser's VXLAN port; 0 = 4789 */
	struct iod_net_ct *ct;               /* conntrack for CT pipes (one per core: ct[core]) */
	struct iod_net_ct **ct_per_core;     /* if set, core c uses ct_per_core[c] */
	struct iod_net_lb_service *services; /* LB action targets */
	uint32_t services_n;                 /* entries in services */
	iod_flow_status_fn status_cb;        /* completions and aging */
	bool emc_off;                        /* no flow caches, no fast path (tests compare) */
	uint32_t emc_slots;                  /* per core, a power of two; 0 = IOD_FLOW_EMC_SLOTS */
};

int iod_flow_pipeline_create(struct iod_flow_pipeline **out,
                             const struct iod_flow_pipeline_cfg *cfg, struct iod_err *e);
void iod_flow_pipeline_destroy(struct iod_flow_pipeline *pl);

/* Drop every core's cached walks: call after changing what actions read
 * outside the pipeline (LB services, backend health). Between bursts only. */
void iod_flow_pipeline_invalidate(struct iod_flow_pipeline *pl);

/* Create a pipe (control path; allocates its entry table). Returns the pipe
 * id (>= 0) or a negative errno with e filled. */
int iod_flow_pipe_create(struct iod_flow_pipeline *pl, const struct iod_flow_pipe_cfg *cfg,
                         struct iod_err *e);
/* Point fwd/fwd_miss at pipes created later (pipes chain both ways). */
int iod_flow_pipe_set_fwd(struct iod_flow_pipeline *pl, uint32_t pipe,
                          const struct iod_flow_fwd *fwd, const struct iod_flow_fwd *fwd_miss);
int iod_flow_pipe_find(const struct iod_flow_pipeline *pl, const char *name);

/*
 * Queue an entry operation; the entry id is reserved now (*entry) and the
 * operation applies at the next iod_flow_entries_process(), which reports
 * it through status_cb with user_ctx. -ENOSPC when the queue or the pipe is
 * full, -EINVAL for a bad pipe or entry.
 */
int iod_flow_entry_add(struct iod_flow_pipeline *pl, uint32_t pipe,
                       const struct iod_flow_entry_cfg *cfg, void *user_ctx, uint32_t *entry);
int iod_flow_entry_update(struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t entry,
                          const struct iod_flow_entry_cfg *cfg, void *user_ctx);
int iod_flow_entry_remove(struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t entry,
                          void *user_ctx);
/* Apply up to max queued operations (0 = all) at now_ns; returns how many. */
uint32_t iod_flow_entries_process(struct iod_flow_pipeline *pl, uint32_t max, uint64_t now_ns);
/* Remove entries idle past their aging time (AGED callbacks); at most max
 * examined per call. Returns how many aged. */
uint32_t iod_flow_aging_process(struct iod_flow_pipeline *pl, uint64_t now_ns, uint32_t max);

/*
 * Run a burst (n <= IOD_FLOW_BURST_MAX) through the pipeline on a core.
 * Each packet ends with a verdict (and port_out / queue); extra packets the
 * engine makes (ARP replies) are written in place. Never allocates.
 */
void iod_flow_burst(struct iod_flow_pipeline *pl, uint32_t core, struct iod_pkt **pkts, uint32_t n,
                    uint64_t now_ns);

/* ---- reading back ------------------------------------------------------ */

struct iod_flow_stats {
	uint64_t packets; /* packets that hit */
	uint64_t bytes;   /* their bytes */
	uint64_t green;   /* meter colours */
	uint64_t yellow;  /* meter colours */
	uint64_t red;     /* meter colours */
};

/* Per-entry counters summed over cores. */
int iod_flow_entry_stats(const struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t entry,
                         struct iod_flow_stats *st);
/* Per-pipe hit/miss counters summed over cores. */
int iod_flow_pipe_stats(const struct iod_flow_pipeline *pl, uint32_t pipe, uint64_t *hits,
                        uint64_t *misses);

struct iod_flow_engine_stats {
	uint64_t packets;      /* processed */
	uint64_t drops;        /* dropped */
	uint64_t fp_hits;      /* compiled fast-path hits (the whole verdict in one lookup) */
	uint64_t emc_hits;     /* exact-match cache hits */
	uint64_t mf_hits;      /* megaflow (masked) cache hits */
	uint64_t walks;        /* full pipe walks (every cache missed) */
	uint64_t parse_errors; /* frames too short to parse */
};
void iod_flow_engine_stats(const struct iod_flow_pipeline *pl, struct iod_flow_engine_stats *st);

/* The pipeline with per-entry counters as JSON (iod dp dump). Offload state
 * per entry comes from offload (may be NULL): 1 offloaded (validated on a
 * port), 2 translates to rte_flow (no port to validate it on), 0 software,
 * with a reason string; written as "offload": "hardware" | "translates" |
 * "software" (and "offloaded": true for 1 only). */
typedef int (*iod_flow_offload_state_fn)(void *ctx, uint32_t pipe, uint32_t entry,
                                         const char **reason);
json_t *iod_flow_dump_json(const struct iod_flow_pipeline *pl, iod_flow_offload_state_fn offload,
                           void *ctx);

/* Introspection for the offload translator and dumps. */
uint32_t iod_flow_pipes_n(const struct iod_flow_pipeline *pl);
const struct iod_flow_pipe_cfg *iod_flow_pipe_cfg_get(const struct iod_flow_pipeline *pl,
                                                      uint32_t pipe);
/* Iterate live entries of a pipe: *pos = 0 first; false when done. */
bool iod_flow_entry_next(const struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t *pos,
                         uint32_t *entry, const struct iod_flow_entry_cfg **cfg);

/* ---- the overlay data plane (`iod dp run`) ----------------------------- */

/*
 * A standalone overlay data plane built from a YAML file: two roles of
 * port (host side, fabric side), tenant networks (VXLAN VNI + subnet +
 * gateway with an ARP responder), endpoints (local, or behind a remote
 * VTEP), stateful security groups, services (VIP:port -> backends by
 * Maglev) and per-network QoS. iod_flow_dp_build() turns it into pipes:
 *
 *   fabric root "decap"  (basic: vni + outer dst) -> decap, meta=net, zone=net
 *   host root   "host"   (control: ARP for gateways; src subnet -> meta, zone)
 *   "ct"   (ct)          -> "sg"
 *   "sg"   (acl)         established/related -> "qos"; new + SG rule -> "svc";
 *                        endpoint-bound egress entries first
 *   "svc"  (basic)       VIP:port -> LB (DNAT + commit) -> "sgin" (or "qos");
 *                        miss -> "commit"
 *   "commit" (control)   commit -> "sgin" (or "qos")
 *   "sgin" (acl; only with endpoint-bound ingress entries) new sessions to
 *                        a guarded endpoint, after the VIP's translation (its
 *                        chosen backend): its rules -> "qos", else drop; a
 *                        dropped packet commits no session (engine.c)
 *   "qos"  (basic: meta) meter + DSCP -> "route" (or "egress")
 *   "egress" (basic: in_port + src; only when an endpoint has a rate) per-endpoint
 *                        meter on what a local endpoint sends -> "route"
 *   "route" (basic: meta + dst) remote -> encap to its VTEP, fabric port; local -> host port
 */
#define IOD_DP_PORT_HOST 0
#define IOD_DP_PORT_FABRIC 1

struct iod_flow_dp_endpoint {
	uint32_t ip;                 /* overlay (inner) address */
	uint8_t mac[6];              /* its MAC (inner destination MAC on delivery) */
	bool local;                  /* behind this node's host port */
	uint32_t vtep_ip;            /* remote: its VTEP */
	uint64_t egress_bytes_per_s; /* local: meter on what it sends (RFC 2698, PIR = CIR,
	                              * frame bytes); 0 = none */
};

struct iod_flow_dp_network {
	char name[IOD_NAME_MAX];   /* network name */
	uint32_t vni;              /* VXLAN VNI */
	uint32_t subnet;           /* overlay subnet */
	uint8_t prefix_len;        /* its prefix */
	uint32_t gateway;          /* gateway address the ARP responder answers; 0 = none */
	uint8_t gateway_mac[6];    /* gateway MAC */
	int32_t sg;                /* security group index, -1 = allow all */
	uint64_t rate_bytes_per_s; /* QoS meter (0 = none) */
	uint64_t burst_bytes;      /* QoS burst */
	uint8_t dscp;              /* QoS priority marking (0 = keep) */
	bool ar_enabled;           /* adaptive_routing given: outer sport from net/ar */
	bool by_endpoint;          /* host port: a packet's network is its source's (local
	                            * endpoints /32), not its subnet's: tenants that share
	                            * one address space (the agent's overlay) */
	bool local_only;           /* the node's own network (its host stack at gateway):
	                            * no VNI on the fabric, no ARP; from or to gateway */
	struct iod_ar_config ar;   /* its policy and parameters */
	uint32_t endpoints_n;      /* endpoints */
	struct iod_flow_dp_endpoint endpoints[IOD_DP_ENDPOINTS_MAX]; /* endpoints */
};

/*
 * A security-group entry bound to one local endpoint (the agent's NetPolicy
 * objects, compiled by src/agent/sg.c): egress entries check the new
 * sessions member opens (from the host port, in "sg"), ingress entries the
 * new sessions to member (either port, in "sgin"). Within a member and
 * direction the first entry that matches decides; a member with entries
 * ends each with a deny of everything (peer 0/0). Checked before the
 * network's own group; conntrack lets replies of admitted sessions pass.
 */
struct iod_flow_dp_acl {
	uint32_t member_ip;      /* the local endpoint it guards */
	uint32_t peer_ip;        /* remote network (dst for egress, src for ingress) */
	uint8_t peer_prefix_len; /* 0..32; 0 = any */
	uint8_t proto;           /* 0 = any */
	bool egress;             /* sessions member opens (else: sessions to member) */
	bool deny;               /* a match drops (else admits) */
	uint16_t port_min;       /* destination ports (tcp/udp), inclusive */
	uint16_t port_max;       /* 65535 = any */
	uint16_t rule;           /* the caller's rule index (counters, drop records) */
};
/* The acl entry that decides a new session (k: its first packet; from_host:
 * it came in on the host port): the index of a deny that drops it, or -1
 * when it is admitted. The reference the pipeline's entries are tested
 * against, and how drop records find their rule. */
struct iod_flow_key;
struct iod_flow_dp_config;
int iod_flow_dp_acl_verdict(const struct iod_flow_dp_config *c, const struct iod_flow_key *k,
                            bool from_host);

struct iod_flow_dp_service {
	int32_t network;              /* network index */
	struct iod_net_lb_service lb; /* VIP, port, backends */
};

struct iod_flow_dp_port {
	char name[IOD_NAME_MAX]; /* port name */
	char backend[16];        /* mem, pcap, afpacket, dpdk */
	char iface[64];          /* afpacket: interface; dpdk: vdev args */
	char pcap_in[256];       /* pcap: file read */
	char pcap_out[256];      /* pcap: file written */
};

struct iod_flow_dp_config {
	uint32_t vtep_ip;                 /* this node's underlay address */
	uint8_t vtep_mac[6];              /* this node's underlay MAC */
	uint8_t underlay_gw_mac[6];       /* next hop MAC for encapsulated packets */
	bool udp_csum;                    /* outer UDP checksums (default on) */
	struct iod_flow_dp_port ports[2]; /* host, fabric */
	uint32_t networks_n;              /* networks */
	struct iod_flow_dp_network networks[IOD_DP_NETWORKS_MAX]; /* networks */
	uint32_t sgs_n;                                           /* security groups */
	struct iod_net_sg sgs[IOD_DP_SGS_MAX];                    /* security groups */
	uint32_t acls_n;                                          /* endpoint-bound entries */
	struct iod_flow_dp_acl acls[IOD_DP_ACLS_MAX];             /* in priority order */
	uint32_t services_n;                                      /* services */
	struct iod_flow_dp_service services[IOD_DP_SERVICES_MAX]; /* services */
	uint32_t ct_sessions;                                     /* conntrack capacity per core */
	uint32_t emc_slots; /* exact-match cache slots per core (0 = default) */
	bool caches_off;    /* no flow caches or fast path (tests' reference walk) */
};

/* Parse the YAML text of a dp config (errors: name:line:col: what). The
 * config is large: allocate it (calloc) or make it static. */
int iod_flow_dp_config_parse(const char *text, size_t len, const char *name,
                             struct iod_flow_dp_config *c, struct iod_err *e);
int iod_flow_dp_config_load(const char *path, struct iod_flow_dp_config *c, struct iod_err *e);
void iod_flow_dp_config_free(struct iod_flow_dp_config *c);

/* A built data plane: the pipeline, its conntrack tables and services. */
struct iod_flow_dp {
	struct iod_flow_pipeline *pl;                   /* the pipeline */
	struct iod_net_ct *ct[IOD_FLOW_CORES_MAX];      /* conntrack per core */
	struct iod_net_lb_service *services;            /* the config's services, by index */
	uint32_t services_n;                            /* how many */
	uint32_t cores;                                 /* worker cores */
	int32_t pipe_ct, pipe_sg, pipe_svc, pipe_route; /* pipe ids */
	int32_t pipe_sgin;                              /* "sgin", -1 = none */
};

int iod_flow_dp_build(const struct iod_flow_dp_config *c, uint32_t cores, struct iod_flow_dp *dp,
                      struct iod_err *e);
/* The same, taking prev's conntrack tables and the Maglev tables of its
 * unchanged services (prev keeps none, and is only fit for
 * iod_flow_dp_destroy): a rebuilt pipeline keeps its sessions, and a
 * change rebuilds only the tables of the services it changed.
 * prev NULL = iod_flow_dp_build. */
int iod_flow_dp_rebuild(const struct iod_flow_dp_config *c, uint32_t cores, struct iod_flow_dp *dp,
                        struct iod_flow_dp *prev, struct iod_err *e);
void iod_flow_dp_destroy(struct iod_flow_dp *dp);

/*
 * Adaptive routing in the data plane (src/flow/dp_ar.c): one net/ar core per
 * network with `adaptive_routing`. The shell calls, per loop turn:
 *   iod_flow_dp_ar_rx()    on each frame from the fabric port, before the
 *                          pipeline: probe requests are reflected in place
 *                          (verdict PORT to the fabric), replies go to the
 *                          core (verdict DROP); true = it was a probe;
 *   iod_flow_dp_ar_steer() after the pipeline: encapsulated packets leaving
 *                          on the fabric port get the outer source port the
 *                          core selects for their network (iod_ar_select +
 *                          iod_net_vxlan_set_sport);
 *   iod_flow_dp_ar_tick()  periodic work with the loop's clock;
 *   iod_flow_dp_ar_probe_frame() until 0: the probes the core asked for.
 * Allocates only in create; nothing here reads a clock or does I/O.
 */
struct iod_flow_dp_ar;
/* net/ar's defaults for a data plane: iod_ar_config_default with a 20 ms
 * probe interval (the loop's idle waits are 1-5 ms). */
void iod_flow_dp_ar_config_default(struct iod_ar_config *a, enum iod_ar_policy policy);
/* Whether a was created from a config like c as far as adaptive routing
 * goes (networks, VNIs, policies and parameters, remote VTEPs, wire
 * addresses): a rebuilt pipeline keeps a, and its pins, when it is. a NULL
 * matches a config without adaptive routing. */
bool iod_flow_dp_ar_matches(const struct iod_flow_dp_ar *a, const struct iod_flow_dp_config *c);
/* The distinct remote VTEPs a's cores probe (0 for NULL). */
uint32_t iod_flow_dp_ar_peers(const struct iod_flow_dp_ar *a);
/* *out = NULL (and 0) when no network asks for adaptive routing. */
int iod_flow_dp_ar_create(const struct iod_flow_dp_config *c, struct iod_flow_dp_ar **out,
                          struct iod_err *e);
void iod_flow_dp_ar_destroy(struct iod_flow_dp_ar *a);
bool iod_flow_dp_ar_rx(struct iod_flow_dp_ar *a, struct iod_pkt *p, uint64_t now_ns);
void iod_flow_dp_ar_steer(struct iod_flow_dp_ar *a, struct iod_pkt **pkts, uint32_t n,
                          uint64_t now_ns);
void iod_flow_dp_ar_tick(struct iod_flow_dp_ar *a, uint64_t now_ns);
/* Write the next pending probe frame into buf; its length, 0 when none. */
uint32_t iod_flow_dp_ar_probe_frame(struct iod_flow_dp_ar *a, uint8_t *buf, uint32_t cap);
/* Per network: policy, counters, paths per remote VTEP (iod dp dump). */
json_t *iod_flow_dp_ar_json(const struct iod_flow_dp_ar *a, uint64_t now_ns);

/* ---- offload: pipes and entries as NIC rules (rte_flow shape) ----------- */

/*
 * The translator turns an entry into a hardware-neutral description of an
 * rte_flow rule: attributes (group, priority), pattern items with spec and
 * mask, actions. The DPDK layer (src/io/dpdk/offload.c) builds rte_flow
 * structures from it and asks the port (rte_flow_validate); what cannot be
 * expressed at all (ct pipes, LB, ARP replies, port ranges) is marked here
 * with the reason and stays in software. Pure: no DPDK, no I/O.
 */
#define IOD_FLOW_HW_ETH 0x0001     /* outer Ethernet */
#define IOD_FLOW_HW_IPV4 0x0002    /* outer IPv4 */
#define IOD_FLOW_HW_UDP 0x0004     /* outer UDP */
#define IOD_FLOW_HW_TCP 0x0008     /* outer TCP */
#define IOD_FLOW_HW_VXLAN 0x0010   /* VXLAN */
#define IOD_FLOW_HW_IN_ETH 0x0020  /* inner Ethernet */
#define IOD_FLOW_HW_IN_IPV4 0x0040 /* inner IPv4 */
#define IOD_FLOW_HW_IN_UDP 0x0080  /* inner UDP */
#define IOD_FLOW_HW_IN_TCP 0x0100  /* inner TCP */
#define IOD_FLOW_HW_META 0x0200    /* metadata register */
#define IOD_FLOW_HW_ARP 0x0400     /* ARP */

#define IOD_FLOW_HW_A_DROP 0x00001     /* drop */
#define IOD_FLOW_HW_A_JUMP 0x00002     /* jump to group */
#define IOD_FLOW_HW_A_PORT 0x00004     /* to a port */
#define IOD_FLOW_HW_A_RSS 0x00008      /* RSS over queues */
#define IOD_FLOW_HW_A_DECAP 0x00010    /* VXLAN decap */
#define IOD_FLOW_HW_A_ENCAP 0x00020    /* VXLAN encap */
#define IOD_FLOW_HW_A_SET_META 0x00040 /* set metadata */
#define IOD_FLOW_HW_A_SET_DST 0x00080  /* set IPv4 dst (+ TP dst) */
#define IOD_FLOW_HW_A_SET_SRC 0x00100  /* set IPv4 src (+ TP src) */
#define IOD_FLOW_HW_A_DEC_TTL 0x00200  /* decrement TTL */
#define IOD_FLOW_HW_A_SET_MAC 0x00400  /* set MAC dst/src */
#define IOD_FLOW_HW_A_MAC_SWAP 0x00800 /* swap MACs */
#define IOD_FLOW_HW_A_SET_DSCP 0x01000 /* set IPv4 DSCP */
#define IOD_FLOW_HW_A_COUNT 0x02000    /* counter */
#define IOD_FLOW_HW_A_METER 0x04000    /* meter */
#define IOD_FLOW_HW_A_AGE 0x08000      /* aging */
#define IOD_FLOW_HW_A_MIRROR 0x10000   /* sample ratio 1 to a port */
#define IOD_FLOW_HW_A_SET_TAG 0x20000  /* set tag (ct zone) */

struct iod_flow_hw_rule {
	uint32_t group;              /* 0 for a root pipe, else pipe id + 1 */
	uint32_t priority;           /* CONTROL/ACL priority, else 0 */
	uint16_t port;               /* the port the rule is for (root pipes) */
	uint32_t items;              /* IOD_FLOW_HW_* present in the pattern */
	struct iod_flow_key spec;    /* values of the matched fields */
	struct iod_flow_key mask;    /* which bits */
	uint32_t actions;            /* IOD_FLOW_HW_A_* */
	struct iod_flow_actions act; /* action values (encap, NAT, MACs, meta) */
	struct iod_flow_fwd fwd;     /* terminal forward */
	uint32_t jump_group;         /* JUMP: target group */
	uint32_t aging_s;            /* AGE */
	uint16_t mirror_port;        /* MIRROR */
	const char *unsupported;     /* NULL, or why rte_flow cannot express it */
};

/* Translate one live entry; -ENOENT if it is not live. */
int iod_flow_offload_translate(const struct iod_flow_pipeline *pl, uint32_t pipe, uint32_t entry,
                               struct iod_flow_hw_rule *r);
/* iod_flow_offload_state_fn without hardware (ctx = the pipeline): 2 when
 * the entry translates to an rte_flow rule, else 0 with the reason. What a
 * live node's switch reports (`iod dp dump --node`). */
int iod_flow_offload_verdict(void *ctx, uint32_t pipe, uint32_t entry, const char **reason);

#endif
