/*
 * policy.c: the data plane's policies: stateful security groups (rule
 * parsing and the reference verdict), the service load balancer over base's
 * Maglev table (health-aware), and QoS token-bucket meters after RFC 2697
 * (srTCM) and RFC 2698 (trTCM), colour-blind and colour-aware.
 *
 * Pure: time is an argument to the meters; the LB allocates only when its
 * table is rebuilt (control path), never when picking.
 */
#include "iod/net_policy.h"

#include <stdlib.h>
#include <string.h>

/* ---- security groups --------------------------------------------------- */

int iod_net_sg_rule_parse(const char *s, bool egress, struct iod_net_sg_rule *r, struct iod_err *e)
{
	char proto[16] = "", cidr[48] = "", ports[32] = "", extra[8] = "";
	int n = sscanf(s, "%15s %47s %31s %7s", proto, cidr, ports, extra);
	memset(r, 0, sizeof(*r));
	r->egress = egress;
	r->port_max = 65535;
	if (n < 2 || n > 3)
		return iod_err_set(e, -EINVAL,
		                   "rule \"%s\": expected \"PROTO CIDR [PORT|LOW-HIGH]\", "
		                   "e.g. \"tcp 10.0.0.0/8 80-443\"",
		                   s);
	if (!strcmp(proto, "tcp"))
		r->proto = IOD_NET_PROTO_TCP;
	else if (!strcmp(proto, "udp"))
		r->proto = IOD_NET_PROTO_UDP;
	else if (!strcmp(proto, "icmp"))
		r->proto = IOD_NET_PROTO_ICMP;
	else if (strcmp(proto, "any"))
		return iod_err_set(e, -EINVAL,
		                   "rule \"%s\": protocol \"%s\" is not tcp, udp, icmp or any", s,
		                   proto);
	if (!strcmp(cidr, "any")) {
		r->cidr_ip = 0;
		r->prefix_len = 0;
	} else if (iod_net_cidr_parse(cidr, &r->cidr_ip, &r->prefix_len)) {
		return iod_err_set(
		    e, -EINVAL, "rule \"%s\": \"%s\" is not an IPv4 CIDR like 10.0.0.0/8", s, cidr);
	}
	if (n == 3 && strcmp(ports, "any")) {
		char *end;
		unsigned long lo = strtoul(ports, &end, 10), hi = lo;
		if (end == ports)
			goto bad_ports;
		if (*end == '-') {
			const char *p2 = end + 1;
			hi = strtoul(p2, &end, 10);
			if (end == p2)
				goto bad_ports;
		}
		if (*end || lo > 65535 || hi > 65535 || lo > hi)
			goto bad_ports;
		if (r->proto != IOD_NET_PROTO_TCP && r->proto != IOD_NET_PROTO_UDP)
			return iod_err_set(e, -EINVAL, "rule \"%s\": ports need tcp or udp", s);
		r->port_min = (uint16_t)lo;
		r->port_max = (uint16_t)hi;
	}
	return 0;
bad_ports:
	return iod_err_set(e, -EINVAL,
	                   "rule \"%s\": ports \"%s\" are not N or LOW-HIGH in 0..65535", s, ports);
}

int iod_net_sg_add(struct iod_net_sg *sg, const struct iod_net_sg_rule *r)
{
	if (sg->rules_n >= IOD_NET_SG_RULES_MAX)
		return -ENOSPC;
	sg->rules[sg->rules_n++] = *r;
	return 0;
}

static bool in_net(uint32_t ip, uint32_t net, uint8_t plen)
{
	uint32_t mask = plen ? ~0u << (32 - plen) : 0;
	return (ip & mask) == (net & mask);
}

bool iod_net_sg_allows(const struct iod_net_sg *sg, const struct iod_net_tuple *t)
{
	if (t->family != IOD_NET_AF_V4)
		return false;
	bool to_member = in_net(t->dst.v4, sg->member_ip, sg->member_prefix_len);
	bool from_member = in_net(t->src.v4, sg->member_ip, sg->member_prefix_len);
	for (uint32_t i = 0; i < sg->rules_n; i++) {
		const struct iod_net_sg_rule *r = &sg->rules[i];
		if (r->egress ? !from_member : !to_member)
			continue;
		if (!in_net(r->egress ? t->dst.v4 : t->src.v4, r->cidr_ip, r->prefix_len))
			continue;
		if (r->proto && r->proto != t->proto)
			continue;
		if ((t->proto == IOD_NET_PROTO_TCP || t->proto == IOD_NET_PROTO_UDP) &&
		    (t->dport < r->port_min || t->dport > r->port_max))
			continue;
		return true;
	}
	return false;
}

/* ---- service load balancer --------------------------------------------- */

int iod_net_lb_service_init(struct iod_net_lb_service *s, const char *name, uint32_t vip,
                            uint16_t port, uint8_t proto)
{
	memset(s, 0, sizeof(*s));
	if (iod_strlcpy(s->name, name, sizeof(s->name)))
		return -ENAMETOOLONG;
	s->vip = vip;
	s->port = port;
	s->proto = proto;
	return 0;
}

void iod_net_lb_service_free(struct iod_net_lb_service *s)
{
	iod_maglev_free(&s->maglev);
}

int iod_net_lb_backend_add(struct iod_net_lb_service *s, uint32_t ip, uint16_t port,
                           uint32_t weight)
{
	if (s->backends_n >= IOD_NET_LB_BACKENDS_MAX)
		return -ENOSPC;
	struct iod_net_lb_backend *b = &s->backends[s->backends_n++];
	b->ip = ip;
	b->port = port;
	b->up = true;
	b->weight = weight ? weight : 1;
	return 0;
}

int iod_net_lb_service_build(struct iod_net_lb_service *s)
{
	uint64_t keys[IOD_NET_LB_BACKENDS_MAX];
	uint32_t weights[IOD_NET_LB_BACKENDS_MAX], n = 0;
	for (uint32_t i = 0; i < s->backends_n; i++) {
		if (!s->backends[i].up)
			continue;
		/* A backend's identity is its address: stable across rebuilds. */
		keys[n] = (uint64_t)s->backends[i].ip << 16 | s->backends[i].port;
		weights[n] = s->backends[i].weight;
		s->up_index[n++] = i;
	}
	return iod_maglev_build(&s->maglev, IOD_MAGLEV_DEFAULT_SIZE, keys, weights, n);
}

int iod_net_lb_backend_set_up(struct iod_net_lb_service *s, uint32_t index, bool up)
{
	if (index >= s->backends_n)
		return -ENOENT;
	s->backends[index].up = up;
	return iod_net_lb_service_build(s);
}

/* ---- meters ------------------------------------------------------------ */

#define NB 1000000000ull /* token scale: 1 byte = 1e9 nano-bytes */

void iod_net_meter_init(struct iod_net_meter *mt, const struct iod_net_meter_cfg *cfg,
                        uint64_t now_ns)
{
	mt->cfg = *cfg;
	mt->tc_nb = cfg->cbs_bytes * NB;
	mt->te_nb = (cfg->two_rate ? cfg->pbs_bytes : cfg->ebs_bytes) * NB;
	mt->last_ns = now_ns;
}

/* Add rate * dt tokens to *b up to cap; return what overflowed. */
static uint64_t fill(uint64_t *b, uint64_t cap, uint64_t add)
{
	uint64_t room = cap - *b;
	if (add <= room) {
		*b += add;
		return 0;
	}
	*b = cap;
	return add - room;
}

static uint64_t tokens_for(uint64_t rate_bytes_per_s, uint64_t dt_ns, uint64_t cap_nb)
{
	/* rate * dt nano-bytes, saturating at cap without overflowing 64 bits. */
	if (!rate_bytes_per_s)
		return 0;
	if (dt_ns > cap_nb / rate_bytes_per_s)
		return cap_nb;
	return rate_bytes_per_s * dt_ns;
}

uint8_t iod_net_meter_color(struct iod_net_meter *mt, uint32_t bytes, uint8_t pre_color,
                            uint64_t now_ns)
{
	const struct iod_net_meter_cfg *c = &mt->cfg;
	uint64_t dt = now_ns > mt->last_ns ? now_ns - mt->last_ns : 0, b = (uint64_t)bytes * NB;
	uint64_t cbs = c->cbs_bytes * NB;
	mt->last_ns = IOD_MAX(mt->last_ns, now_ns);
	if (!c->two_rate) {
		/* RFC 2697 3.1: tokens go to Tc up to CBS, then to Te up to EBS. */
		uint64_t ebs = c->ebs_bytes * NB;
		uint64_t over =
		    fill(&mt->tc_nb, cbs, tokens_for(c->cir_bytes_per_s, dt, cbs + ebs));
		fill(&mt->te_nb, ebs, over);
		if (!c->color_aware) {
			if (mt->tc_nb >= b) {
				mt->tc_nb -= b;
				return IOD_NET_GREEN;
			}
			if (mt->te_nb >= b) {
				mt->te_nb -= b;
				return IOD_NET_YELLOW;
			}
			return IOD_NET_RED;
		}
		/* RFC 2697 3.2, colour-aware. */
		if (pre_color == IOD_NET_GREEN && mt->tc_nb >= b) {
			mt->tc_nb -= b;
			return IOD_NET_GREEN;
		}
		if (pre_color != IOD_NET_RED && mt->te_nb >= b) {
			mt->te_nb -= b;
			return IOD_NET_YELLOW;
		}
		return IOD_NET_RED;
	}
	/* RFC 2698: Tp (PIR, PBS) and Tc (CIR, CBS) fill independently. */
	uint64_t pbs = c->pbs_bytes * NB;
	fill(&mt->te_nb, pbs, tokens_for(c->pir_bytes_per_s, dt, pbs));
	fill(&mt->tc_nb, cbs, tokens_for(c->cir_bytes_per_s, dt, cbs));
	if ((c->color_aware && pre_color == IOD_NET_RED) || mt->te_nb < b)
		return IOD_NET_RED;
	if ((c->color_aware && pre_color == IOD_NET_YELLOW) || mt->tc_nb < b) {
		mt->te_nb -= b;
		return IOD_NET_YELLOW;
	}
	mt->te_nb -= b;
	mt->tc_nb -= b;
	return IOD_NET_GREEN;
}
