/*
 * net_policy.h: the data plane's policies (src/net/policy.c, pure): stateful
 * security groups, the service load balancer, and QoS token-bucket meters.
 */
#ifndef IOD_NET_POLICY_H
#define IOD_NET_POLICY_H

#include "iod/net.h"
#include "iod/net_ct.h"

/* ---- stateful security groups ------------------------------------------ */

/*
 * A security group: allow rules (CIDR, protocol, destination port range) for
 * ingress (traffic to the group's members) and egress; anything not allowed
 * is denied; established and related traffic of an allowed session passes
 * (the pipeline gets that from conntrack). Evaluation here is the reference
 * the pipeline's compiled ACL entries are tested against.
 */
struct iod_net_sg_rule {
	uint32_t cidr_ip;   /* remote network (source for ingress, dest for egress) */
	uint8_t prefix_len; /* 0..32; 0 = any */
	uint8_t proto;      /* 0 = any, else IOD_NET_PROTO_* */
	bool egress;        /* false: ingress rule */
	uint16_t port_min;  /* destination port range (TCP/UDP); 0..65535 = any */
	uint16_t port_max;  /* inclusive */
};

struct iod_net_sg {
	char name[IOD_NAME_MAX];                            /* group name */
	uint32_t member_ip;                                 /* members' network */
	uint8_t member_prefix_len;                          /* and its prefix */
	uint32_t rules_n;                                   /* rules in use */
	struct iod_net_sg_rule rules[IOD_NET_SG_RULES_MAX]; /* allow rules */
};

/* Parse "tcp 10.0.0.0/8 80-443", "udp any 53", "icmp 0.0.0.0/0", "any any". */
int iod_net_sg_rule_parse(const char *s, bool egress, struct iod_net_sg_rule *r, struct iod_err *e);
int iod_net_sg_add(struct iod_net_sg *sg, const struct iod_net_sg_rule *r);
/* Verdict for the first packet of a session (the tuple's original direction). */
bool iod_net_sg_allows(const struct iod_net_sg *sg, const struct iod_net_tuple *t);

/* ---- service load balancer --------------------------------------------- */

/* A backend of a service. */
struct iod_net_lb_backend {
	uint32_t ip;     /* backend address */
	uint16_t port;   /* backend port */
	bool up;         /* healthy: gets new flows */
	uint32_t weight; /* Maglev weight, 0 = 1 */
};

/*
 * A service: VIP:port (proto) → backends via Maglev. Health-aware: the
 * Maglev table is built from the backends that are up, so a down backend
 * gets no new flows; its existing flows keep their conntrack NAT binding
 * until they close. Rebuilds happen on the control path.
 */
struct iod_net_lb_service {
	char name[IOD_NAME_MAX];                                     /* service name */
	uint32_t vip;                                                /* virtual IP */
	uint16_t port;                                               /* virtual port */
	uint8_t proto;                                               /* TCP or UDP */
	uint32_t backends_n;                                         /* backends in use */
	struct iod_net_lb_backend backends[IOD_NET_LB_BACKENDS_MAX]; /* all backends */
	uint32_t up_index[IOD_NET_LB_BACKENDS_MAX];                  /* maglev slot -> backend */
	struct iod_maglev maglev; /* over the backends that are up */
};

int iod_net_lb_service_init(struct iod_net_lb_service *s, const char *name, uint32_t vip,
                            uint16_t port, uint8_t proto);
void iod_net_lb_service_free(struct iod_net_lb_service *s);
int iod_net_lb_backend_add(struct iod_net_lb_service *s, uint32_t ip, uint16_t port,
                           uint32_t weight);
/* Mark a backend up or down (health checks); rebuilds the table. */
int iod_net_lb_backend_set_up(struct iod_net_lb_service *s, uint32_t index, bool up);
/* Rebuild the Maglev table from the backends that are up (after adds). */
int iod_net_lb_service_build(struct iod_net_lb_service *s);
/* The backend index for a new flow's hash; UINT32_MAX when none is up. */
static inline uint32_t iod_net_lb_pick(const struct iod_net_lb_service *s, uint32_t flow_hash)
{
	uint32_t i = iod_maglev_lookup(&s->maglev, iod_hash_u64(flow_hash));
	return i == UINT32_MAX ? i : s->up_index[i];
}
/* The same for a flow from src_ip: a pick of the sender itself (a replica
 * dialling its own service's VIP) is tried again with up to
 * IOD_NET_LB_HAIRPIN_TRIES other hashes, since a reply from itself to itself
 * would never come back through the switch (the kernel drops a packet from
 * its own address: a martian); the sender itself only when nothing else
 * came up. */
#define IOD_NET_LB_HAIRPIN_TRIES 8u
static inline uint32_t iod_net_lb_pick_for(const struct iod_net_lb_service *s, uint32_t flow_hash,
                                           uint32_t src_ip)
{
	uint32_t b = iod_net_lb_pick(s, flow_hash);
	for (uint32_t k = 1;
	     b != UINT32_MAX && s->backends[b].ip == src_ip && k <= IOD_NET_LB_HAIRPIN_TRIES; k++) {
		uint32_t i =
		    iod_maglev_lookup(&s->maglev, iod_hash_u64(flow_hash + k * 0x9e3779b9u));
		if (i != UINT32_MAX && s->backends[s->up_index[i]].ip != src_ip)
			return s->up_index[i];
	}
	return b;
}

/* ---- QoS: token-bucket meters (RFC 2697 srTCM, RFC 2698 trTCM) ---------- */

#define IOD_NET_GREEN 0
#define IOD_NET_YELLOW 1
#define IOD_NET_RED 2

/* A meter's configuration: srTCM uses cir/cbs/ebs, trTCM cir/cbs/pir/pbs. */
struct iod_net_meter_cfg {
	bool two_rate;    /* false: RFC 2697 srTCM; true: RFC 2698 trTCM */
	bool color_aware; /* use the packet's pre-colour (else colour-blind) */
	uint64_t
	    cir_bytes_per_s; /* committed information rate (RFC 2697: bytes of IP packets per second) */
	uint64_t cbs_bytes;       /* committed burst size */
	uint64_t ebs_bytes;       /* excess burst size (srTCM) */
	uint64_t pir_bytes_per_s; /* peak information rate (trTCM) */
	uint64_t pbs_bytes;       /* peak burst size (trTCM) */
};

/* A meter's state: token counts in bytes scaled by 1e9 (no division on the
 * packet path beyond one per refill). */
struct iod_net_meter {
	struct iod_net_meter_cfg cfg; /* configuration */
	uint64_t tc_nb;               /* committed bucket, bytes * 1e9 */
	uint64_t te_nb;               /* excess (srTCM) or peak (trTCM) bucket, bytes * 1e9 */
	uint64_t last_ns;             /* time of the last refill */
};

/* Buckets start full (both RFCs). */
void iod_net_meter_init(struct iod_net_meter *mt, const struct iod_net_meter_cfg *cfg,
                        uint64_t now_ns);
/* Colour one packet of bytes at now_ns; pre_color counts when colour-aware. */
uint8_t iod_net_meter_color(struct iod_net_meter *mt, uint32_t bytes, uint8_t pre_color,
                            uint64_t now_ns);

#endif
