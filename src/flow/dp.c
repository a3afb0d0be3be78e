/*
 * dp.c: builds the overlay data plane of `iod dp run` (and of the full
 * pipeline benchmark) from a struct iod_flow_dp_config: conntrack tables,
 * services, and the pipes described in flow.h (decap, host, ct, sg, svc,
 * commit, qos, route) with their entries.
 *
 * Control path only: allocates, never touches packets. The pipe layout is
 * the one place that says how security groups, conntrack, the LB and QoS
 * compose; tests/unit/test_dp_golden.c checks its verdicts.
 */
#include "iod/flow.h"

#include <stdlib.h>
#include <string.h>

static struct iod_flow_fwd to_pipe(int32_t p)
{
	return (struct iod_flow_fwd){.type = IOD_FLOW_FWD_PIPE, .pipe = (uint32_t)p};
}
static struct iod_flow_fwd to_port(uint16_t p)
{
	return (struct iod_flow_fwd){.type = IOD_FLOW_FWD_PORT, .port = p};
}
static struct iod_flow_fwd drop(void)
{
	return (struct iod_flow_fwd){.type = IOD_FLOW_FWD_DROP};
}

void iod_flow_dp_destroy(struct iod_flow_dp *dp)
{
	iod_flow_pipeline_destroy(dp->pl);
	for (uint32_t i = 0; i < IOD_FLOW_CORES_MAX; i++)
		iod_net_ct_destroy(dp->ct[i]);
	if (dp->services)
		for (uint32_t i = 0; i < IOD_DP_SERVICES_MAX; i++)
			iod_net_lb_service_free(&dp->services[i]);
	free(dp->services);
	memset(dp, 0, sizeof(*dp));
}

static int pipe(struct iod_flow_dp *dp, struct iod_flow_pipe_cfg *pc, struct iod_err *e)
{
	int id = iod_flow_pipe_create(dp->pl, pc, e);
	return id;
}

static int add(struct iod_flow_dp *dp, int32_t p, const struct iod_flow_entry_cfg *ec,
               struct iod_err *e)
{
	int rc = iod_flow_entry_add(dp->pl, (uint32_t)p, ec, NULL, NULL);
	if (rc)
		return iod_err_set(e, rc, "pipe %s: cannot add an entry: %s",
		                   iod_flow_pipe_cfg_get(dp->pl, (uint32_t)p)->name, strerror(-rc));
	return 0;
}

/*
 * Security-group rules of network n become "sg" entries (new sessions only).
 * Ingress rules check sessions that arrive from the fabric (their destination
 * is behind this node); egress rules check sessions that leave a local
 * endpoint through the host port. A group without egress rules allows all
 * egress (the usual cloud default). Sessions between two endpoints of the same
 * node are checked against egress only.
 */
static int add_sg(struct iod_flow_dp *dp, const struct iod_flow_dp_config *c, uint32_t n,
                  int32_t next, uint32_t *prio, struct iod_err *e)
{
	const struct iod_flow_dp_network *net = &c->networks[n];
	struct iod_flow_entry_cfg ec = {0};
	ec.match.ct_state = IOD_NET_CT_NEW;
	ec.mask.ct_state = IOD_NET_CT_NEW | IOD_NET_CT_INV;
	ec.match.meta = n + 1;
	ec.mask.meta = 0xffffffff;
	ec.fwd = to_pipe(next);
	if (net->sg < 0) { /* no group: allow every new session of the network */
		ec.priority = (*prio)++;
		return add(dp, dp->pipe_sg, &ec, e);
	}
	const struct iod_net_sg *sg = &c->sgs[net->sg];
	bool any_egress = false;
	ec.mask.in_port = 0xffffffff;
	for (uint32_t i = 0; i < sg->rules_n; i++) {
		const struct iod_net_sg_rule *r = &sg->rules[i];
		uint32_t mask = r->prefix_len ? ~0u << (32 - r->prefix_len) : 0;
		struct iod_flow_entry_cfg re = ec;
		any_egress |= r->egress;
		re.match.in_port = r->egress ? IOD_DP_PORT_HOST : IOD_DP_PORT_FABRIC;
		if (r->egress) { /* the remote side is the destination */
			re.match.dst.v4 = r->cidr_ip;
			re.mask.dst.v4 = mask;
		} else {
			re.match.src.v4 = r->cidr_ip;
			re.mask.src.v4 = mask;
		}
		if (r->proto) {
			re.match.proto = r->proto;
			re.mask.proto = 0xff;
		}
		if (r->proto == IOD_NET_PROTO_TCP || r->proto == IOD_NET_PROTO_UDP) {
			re.dport_min = r->port_min;
			re.dport_max = r->port_max;
		}
		re.match.family = IOD_NET_AF_V4;
		re.mask.family = 0xff;
		re.priority = (*prio)++;
		int rc = add(dp, dp->pipe_sg, &re, e);
		if (rc)
			return rc;
	}
	if (!any_egress) {
		ec.match.in_port = IOD_DP_PORT_HOST;
		ec.priority = (*prio)++;
		return add(dp, dp->pipe_sg, &ec, e);
	}
	return 0;
}

/* Whether acl a matches session k (its member and direction aside). */
static bool acl_matches(const struct iod_flow_dp_acl *a, const struct iod_flow_key *k)
{
	uint32_t mask = a->peer_prefix_len ? ~0u << (32 - a->peer_prefix_len) : 0;
	uint32_t peer = a->egress ? k->dst.v4 : k->src.v4;
	if ((peer & mask) != (a->peer_ip & mask) || (a->proto && a->proto != k->proto))
		return false;
	if (a->proto == IOD_NET_PROTO_TCP || a->proto == IOD_NET_PROTO_UDP)
		return k->dport >= a->port_min && k->dport <= a->port_max;
	return true;
}

int iod_flow_dp_acl_verdict(const struct iod_flow_dp_config *c, const struct iod_flow_key *k,
                            bool from_host)
{
	if (k->family != IOD_NET_AF_V4)
		return -1;
	/* egress ("sg"), then ingress ("sgin"): each first match decides */
	for (int in = 0; in < 2; in++)
		for (uint32_t i = 0; i < c->acls_n; i++) {
			const struct iod_flow_dp_acl *a = &c->acls[i];
			if (a->egress == (bool)in || (a->egress && !from_host) ||
			    a->member_ip != (a->egress ? k->src.v4 : k->dst.v4) ||
			    !acl_matches(a, k))
				continue;
			if (a->deny)
				return (int)i;
			break;
		}
	return -1;
}

/*
 * Endpoint-bound entries (the agent's NetPolicy objects): egress ones in
 * "sg" (after established/related, before the networks' groups), ingress
 * ones in "sgin"; acl i at priority IOD_DP_ACL_PRIO + i in its pipe.
 */
static int add_acls(struct iod_flow_dp *dp, const struct iod_flow_dp_config *c, bool egress,
                    int32_t pipe, int32_t next, struct iod_err *e)
{
	for (uint32_t i = 0; i < c->acls_n; i++) {
		const struct iod_flow_dp_acl *a = &c->acls[i];
		if (a->egress != egress)
			continue;
		uint32_t mask = a->peer_prefix_len ? ~0u << (32 - a->peer_prefix_len) : 0;
		struct iod_flow_entry_cfg ec = {0};
		ec.match.ct_state = IOD_NET_CT_NEW;
		ec.mask.ct_state = IOD_NET_CT_NEW | IOD_NET_CT_INV;
		ec.match.family = IOD_NET_AF_V4;
		ec.mask.family = 0xff;
		if (egress) {
			ec.match.in_port = IOD_DP_PORT_HOST;
			ec.mask.in_port = 0xffffffff;
			ec.match.src.v4 = a->member_ip;
			ec.mask.src.v4 = 0xffffffff;
			ec.match.dst.v4 = a->peer_ip & mask;
			ec.mask.dst.v4 = mask;
		} else {
			ec.match.dst.v4 = a->member_ip;
			ec.mask.dst.v4 = 0xffffffff;
			ec.match.src.v4 = a->peer_ip & mask;
			ec.mask.src.v4 = mask;
		}
		if (a->proto) {
			ec.match.proto = a->proto;
			ec.mask.proto = 0xff;
		}
		if (a->proto == IOD_NET_PROTO_TCP || a->proto == IOD_NET_PROTO_UDP) {
			ec.dport_min = a->port_min;
			ec.dport_max = a->port_max;
		}
		ec.priority = IOD_DP_ACL_PRIO + i;
		ec.monitor.flags = IOD_FLOW_MON_COUNT;
		ec.fwd = a->deny ? drop() : to_pipe(next);
		int rc = add(dp, pipe, &ec, e);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * "egress" entries: what a local endpoint sends (from the host port, its
 * source address) passes its meter, RFC 2698 trTCM with PIR = CIR = its
 * rate and both buckets IOD_DP_EGRESS_BURST_MS of it: above the rate is red
 * and dropped, so the sender is held to its rate. One entry per address, in
 * config order; pipe < 0: none has a rate.
 */
/* Whether a local endpoint before networks[n].endpoints[i] has ip and a rate. */
static bool metered_before(const struct iod_flow_dp_config *c, uint32_t n, uint32_t i)
{
	uint32_t ip = c->networks[n].endpoints[i].ip;
	for (uint32_t m = 0; m <= n; m++)
		for (uint32_t k = 0; k < (m < n ? c->networks[m].endpoints_n : i); k++) {
			const struct iod_flow_dp_endpoint *x = &c->networks[m].endpoints[k];
			if (x->local && x->egress_bytes_per_s && x->ip == ip)
				return true;
		}
	return false;
}

static int add_egress(struct iod_flow_dp *dp, const struct iod_flow_dp_config *c, int32_t pipe,
                      struct iod_err *e)
{
	for (uint32_t n = 0; pipe >= 0 && n < c->networks_n; n++)
		for (uint32_t i = 0; i < c->networks[n].endpoints_n; i++) {
			const struct iod_flow_dp_endpoint *ep = &c->networks[n].endpoints[i];
			if (!ep->local || !ep->egress_bytes_per_s || metered_before(c, n, i))
				continue;
			struct iod_flow_entry_cfg ec = {0};
			ec.match.in_port = IOD_DP_PORT_HOST;
			ec.match.src.v4 = ep->ip;
			ec.monitor.flags = IOD_FLOW_MON_METER;
			struct iod_net_meter_cfg *m = &ec.monitor.meter;
			m->two_rate = true;
			m->cir_bytes_per_s = m->pir_bytes_per_s = ep->egress_bytes_per_s;
			uint64_t burst = ep->egress_bytes_per_s / 1000 * IOD_DP_EGRESS_BURST_MS;
			m->cbs_bytes = m->pbs_bytes =
			    burst > IOD_DP_EGRESS_BURST_MIN ? burst : IOD_DP_EGRESS_BURST_MIN;
			int rc = add(dp, pipe, &ec, e);
			if (rc)
				return rc;
		}
	return 0;
}

/* Same VIP, port, protocol and backends (address, port, weight, health, in
 * order): the same Maglev table. */
static bool lb_same(const struct iod_net_lb_service *a, const struct iod_net_lb_service *b)
{
	if (a->vip != b->vip || a->port != b->port || a->proto != b->proto ||
	    a->backends_n != b->backends_n)
		return false;
	for (uint32_t i = 0; i < a->backends_n; i++) {
		const struct iod_net_lb_backend *x = &a->backends[i], *y = &b->backends[i];
		if (x->ip != y->ip || x->port != y->port || x->weight != y->weight ||
		    x->up != y->up)
			return false;
	}
	return true;
}

/* d's Maglev table from prev's same service, moved (prev keeps none): a
 * rebuild for a policy or one service's change does not rebuild every
 * service's 65,537 slots (40 services took 86-149 ms). True when taken. */
static bool take_maglev(struct iod_net_lb_service *d, struct iod_flow_dp *prev)
{
	if (!prev || !prev->services)
		return false;
	for (uint32_t j = 0; j < prev->services_n; j++) {
		struct iod_net_lb_service *p = &prev->services[j];
		if (!p->maglev.table || !lb_same(d, p))
			continue;
		d->maglev = p->maglev;
		memcpy(d->up_index, p->up_index, sizeof(d->up_index));
		memset(&p->maglev, 0, sizeof(p->maglev));
		return true;
	}
	return false;
}

int iod_flow_dp_build(const struct iod_flow_dp_config *c, uint32_t cores, struct iod_flow_dp *dp,
                      struct iod_err *e)
{
	return iod_flow_dp_rebuild(c, cores, dp, NULL, e);
}

int iod_flow_dp_rebuild(const struct iod_flow_dp_config *c, uint32_t cores, struct iod_flow_dp *dp,
                        struct iod_flow_dp *prev, struct iod_err *e)
{
	int rc;
	IOD_ASSERT(!prev || prev->cores == cores);
	memset(dp, 0, sizeof(*dp));
	dp->cores = cores;
	dp->services = calloc(IOD_DP_SERVICES_MAX, sizeof(*dp->services));
	if (!dp->services)
		return iod_err_set(e, -ENOMEM, "dp: out of memory");
	for (uint32_t i = 0; i < cores; i++) {
		if (prev && prev->ct[i]) { /* its sessions carry on */
			dp->ct[i] = prev->ct[i];
			prev->ct[i] = NULL;
			continue;
		}
		rc =
		    iod_net_ct_create(&dp->ct[i], c->ct_sessions ? c->ct_sessions : 1u << 20, NULL);
		if (rc) {
			iod_flow_dp_destroy(dp);
			return iod_err_set(e, rc, "dp: conntrack for %u sessions: %s",
			                   c->ct_sessions, strerror(-rc));
		}
	}
	dp->services_n = c->services_n;
	for (uint32_t i = 0; i < c->services_n; i++) {
		const struct iod_net_lb_service *s = &c->services[i].lb;
		struct iod_net_lb_service *d = &dp->services[i];
		iod_net_lb_service_init(d, s->name, s->vip, s->port, s->proto);
		for (uint32_t b = 0; b < s->backends_n; b++) {
			iod_net_lb_backend_add(d, s->backends[b].ip, s->backends[b].port,
			                       s->backends[b].weight);
			d->backends[b].up = s->backends[b].up;
		}
		if (take_maglev(d, prev))
			continue;
		if ((rc = iod_net_lb_service_build(d))) {
			iod_flow_dp_destroy(dp);
			return iod_err_set(e, rc, "service %s: cannot build its Maglev table",
			                   s->name);
		}
	}
	struct iod_flow_pipeline_cfg pc = {.cores = cores,
	                                   .ports = 2,
	                                   .ct_per_core = dp->ct,
	                                   .services = dp->services,
	                                   .services_n = c->services_n,
	                                   .emc_slots = c->emc_slots,
	                                   .emc_off = c->caches_off};
	if ((rc = iod_flow_pipeline_create(&dp->pl, &pc, e))) {
		iod_flow_dp_destroy(dp);
		return rc;
	}

	/* Pipes are created leaf first so forwards name existing pipes. */
	uint32_t endpoints = 0;
	for (uint32_t n = 0; n < c->networks_n; n++)
		endpoints += c->networks[n].endpoints_n;
	struct iod_flow_pipe_cfg route = {.name = "route",
	                                  .kind = IOD_FLOW_PIPE_BASIC,
	                                  .entries_max = endpoints + 1,
	                                  .fwd_miss = drop()};
	route.mask.meta = 0xffffffff;
	route.mask.dst.v4 = 0xffffffff;
	route.monitor.flags = IOD_FLOW_MON_COUNT;
	/* egress: a meter per local endpoint with a rate (one per address: the
	 * agent's replicas are endpoints of their tenant's and the host network) */
	uint32_t metered = 0;
	for (uint32_t n = 0; n < c->networks_n; n++)
		for (uint32_t i = 0; i < c->networks[n].endpoints_n; i++)
			metered += c->networks[n].endpoints[i].local &&
			           c->networks[n].endpoints[i].egress_bytes_per_s;
	struct iod_flow_pipe_cfg egress = {
	    .name = "egress", .kind = IOD_FLOW_PIPE_BASIC, .entries_max = metered + 1};
	egress.mask.in_port = 0xffffffff;
	egress.mask.src.v4 = 0xffffffff;
	egress.monitor.flags = IOD_FLOW_MON_METER;
	struct iod_flow_pipe_cfg qos = {
	    .name = "qos", .kind = IOD_FLOW_PIPE_BASIC, .entries_max = c->networks_n + 1};
	qos.mask.meta = 0xffffffff;
	struct iod_flow_pipe_cfg commit = {
	    .name = "commit", .kind = IOD_FLOW_PIPE_CONTROL, .entries_max = 1};
	commit.actions.flags = IOD_FLOW_ACT_CT_COMMIT;
	struct iod_flow_pipe_cfg svc = {
	    .name = "svc", .kind = IOD_FLOW_PIPE_BASIC, .entries_max = c->services_n + 1};
	svc.mask.meta = 0xffffffff;
	svc.mask.dst.v4 = 0xffffffff;
	svc.mask.dport = 0xffff;
	svc.mask.proto = 0xff;
	svc.actions.flags = IOD_FLOW_ACT_LB;
	uint32_t acls_in = 0;
	for (uint32_t i = 0; i < c->acls_n; i++)
		acls_in += !c->acls[i].egress;
	struct iod_flow_pipe_cfg sg = {.name = "sg",
	                               .kind = IOD_FLOW_PIPE_ACL,
	                               .entries_max = 2 + c->acls_n - acls_in +
	                                              c->networks_n * (IOD_NET_SG_RULES_MAX + 2),
	                               .fwd_miss = drop()};
	struct iod_flow_pipe_cfg sgin = {.name = "sgin",
	                                 .kind = IOD_FLOW_PIPE_ACL,
	                                 .entries_max = acls_in + 1,
	                                 .fwd_miss = drop()};
	struct iod_flow_pipe_cfg ctp = {.name = "ct", .kind = IOD_FLOW_PIPE_CT};
	struct iod_flow_pipe_cfg decap = {.name = "decap",
	                                  .kind = IOD_FLOW_PIPE_BASIC,
	                                  .is_root = true,
	                                  .port = IOD_DP_PORT_FABRIC,
	                                  .entries_max = c->networks_n + 1,
	                                  .fwd_miss = drop()};
	decap.mask.vni = 0xffffff;
	decap.mask.outer_dst_ip = 0xffffffff;
	decap.match.tunnelled = 1; /* only VXLAN frames: a pipe-wide constant */
	decap.const_mask.tunnelled = 0xff;
	decap.actions.flags = IOD_FLOW_ACT_DECAP | IOD_FLOW_ACT_SET_META | IOD_FLOW_ACT_SET_ZONE;
	decap.monitor.flags = IOD_FLOW_MON_COUNT;
	struct iod_flow_pipe_cfg host = {.name = "host",
	                                 .kind = IOD_FLOW_PIPE_CONTROL,
	                                 .is_root = true,
	                                 .port = IOD_DP_PORT_HOST,
	                                 .entries_max = 2 * c->networks_n + endpoints + 1,
	                                 .fwd_miss = drop()};

	if ((dp->pipe_route = pipe(dp, &route, e)) < 0)
		goto fail;
	int32_t peg = -1;
	if (metered) {
		egress.fwd = to_pipe(dp->pipe_route);
		egress.fwd_miss = to_pipe(dp->pipe_route);
		if ((peg = pipe(dp, &egress, e)) < 0)
			goto fail;
	}
	qos.fwd = to_pipe(metered ? peg : dp->pipe_route);
	qos.fwd_miss = qos.fwd;
	int32_t pq = pipe(dp, &qos, e);
	if (pq < 0)
		goto fail;
	/* sgin after svc: it sees the destination a VIP's session was
	 * translated to, so the chosen backend's ingress rules check it on
	 * the sender's node too; what it drops commits nothing (engine.c) */
	dp->pipe_sgin = -1;
	if (acls_in) { /* what no ingress entry of a guarded endpoint names passes */
		sgin.fwd_miss = to_pipe(pq);
		if ((dp->pipe_sgin = pipe(dp, &sgin, e)) < 0)
			goto fail;
	}
	int32_t pin = dp->pipe_sgin >= 0 ? dp->pipe_sgin : pq;
	commit.fwd = to_pipe(pin);
	int32_t pcm = pipe(dp, &commit, e);
	if (pcm < 0)
		goto fail;
	svc.fwd = to_pipe(pin);
	svc.fwd_miss = to_pipe(pcm);
	if (c->services_n == 0)
		svc.actions.flags = 0;
	if ((dp->pipe_svc = pipe(dp, &svc, e)) < 0)
		goto fail;
	int32_t pnew = dp->pipe_svc;
	if ((dp->pipe_sg = pipe(dp, &sg, e)) < 0)
		goto fail;
	ctp.fwd = to_pipe(dp->pipe_sg);
	if ((dp->pipe_ct = pipe(dp, &ctp, e)) < 0)
		goto fail;
	decap.fwd = to_pipe(dp->pipe_ct);
	host.fwd = to_pipe(dp->pipe_ct);
	if (pipe(dp, &decap, e) < 0 || pipe(dp, &host, e) < 0)
		goto fail;
	int32_t pdecap = iod_flow_pipe_find(dp->pl, "decap"),
	        phost = iod_flow_pipe_find(dp->pl, "host");

	struct iod_flow_entry_cfg ec;
	/* commit: one wildcard entry */
	memset(&ec, 0, sizeof(ec));
	if ((rc = add(dp, pcm, &ec, e)))
		goto fail_rc;
	/* sg: established and related pass first */
	uint32_t prio = 0;
	memset(&ec, 0, sizeof(ec));
	ec.match.ct_state = IOD_NET_CT_EST;
	ec.mask.ct_state = IOD_NET_CT_EST | IOD_NET_CT_INV;
	ec.priority = prio++;
	ec.fwd = to_pipe(pq);
	if ((rc = add(dp, dp->pipe_sg, &ec, e)))
		goto fail_rc;
	ec.match.ct_state = IOD_NET_CT_REL;
	ec.mask.ct_state = IOD_NET_CT_REL | IOD_NET_CT_INV;
	ec.priority = prio++;
	if ((rc = add(dp, dp->pipe_sg, &ec, e)))
		goto fail_rc;
	IOD_ASSERT(prio <= IOD_DP_ACL_PRIO);
	if ((rc = add_acls(dp, c, true, dp->pipe_sg, pnew, e)) ||
	    (dp->pipe_sgin >= 0 && (rc = add_acls(dp, c, false, dp->pipe_sgin, pq, e))))
		goto fail_rc;
	prio = IOD_DP_ACL_PRIO + c->acls_n;
	for (uint32_t n = 0; n < c->networks_n; n++) {
		const struct iod_flow_dp_network *net = &c->networks[n];
		if ((rc = add_sg(dp, c, n, pnew, &prio, e)))
			goto fail_rc;
		/* decap: VNI at our VTEP -> network n */
		memset(&ec, 0, sizeof(ec));
		ec.match.vni = net->vni;
		ec.match.outer_dst_ip = c->vtep_ip;
		ec.actions.flags = IOD_FLOW_ACT_SET_META | IOD_FLOW_ACT_SET_ZONE;
		ec.actions.meta = n + 1;
		ec.actions.zone = (uint16_t)(n + 1);
		if (!net->local_only && (rc = add(dp, pdecap, &ec, e)))
			goto fail_rc;
		/* the node's own network: what its host stack (at gateway) sends,
		 * and what is sent to it, before any tenant's classification */
		for (int dir = 0; net->local_only && net->gateway && dir < 2; dir++) {
			memset(&ec, 0, sizeof(ec));
			ec.match.eth_type = IOD_NET_ETH_P_IPV4;
			ec.mask.eth_type = 0xffff;
			ec.match.tunnelled = 0;
			ec.mask.tunnelled = 0xff;
			if (dir) {
				ec.match.dst.v4 = net->gateway;
				ec.mask.dst.v4 = 0xffffffff;
			} else {
				ec.match.src.v4 = net->gateway;
				ec.mask.src.v4 = 0xffffffff;
			}
			ec.priority = 5;
			ec.actions.flags = IOD_FLOW_ACT_SET_META | IOD_FLOW_ACT_SET_ZONE;
			ec.actions.meta = n + 1;
			ec.actions.zone = (uint16_t)(n + 1);
			if ((rc = add(dp, phost, &ec, e)))
				goto fail_rc;
		}
		/* a network whose endpoints share an address space with others':
		 * each local endpoint's packets are its network's */
		for (uint32_t i = 0; net->by_endpoint && !net->local_only && i < net->endpoints_n;
		     i++) {
			if (!net->endpoints[i].local)
				continue;
			memset(&ec, 0, sizeof(ec));
			ec.match.eth_type = IOD_NET_ETH_P_IPV4;
			ec.mask.eth_type = 0xffff;
			ec.match.tunnelled = 0;
			ec.mask.tunnelled = 0xff;
			ec.match.src.v4 = net->endpoints[i].ip;
			ec.mask.src.v4 = 0xffffffff;
			ec.priority = 10;
			ec.actions.flags = IOD_FLOW_ACT_SET_META | IOD_FLOW_ACT_SET_ZONE;
			ec.actions.meta = n + 1;
			ec.actions.zone = (uint16_t)(n + 1);
			if ((rc = add(dp, phost, &ec, e)))
				goto fail_rc;
		}
		/* host: ARP for the gateway is answered (once per address);
		 * IPv4 from the subnet enters */
		bool arp_done = net->local_only;
		for (uint32_t m = 0; m < n && !arp_done; m++)
			arp_done = c->networks[m].gateway == net->gateway;
		if (net->gateway && !arp_done) {
			memset(&ec, 0, sizeof(ec));
			ec.match.eth_type = IOD_NET_ETH_P_ARP;
			ec.mask.eth_type = 0xffff;
			ec.match.dst.v4 = net->gateway;
			ec.mask.dst.v4 = 0xffffffff;
			ec.actions.flags = IOD_FLOW_ACT_ARP_REPLY;
			ec.actions.arp_ip = net->gateway;
			memcpy(ec.actions.src_mac, net->gateway_mac, 6);
			ec.fwd = to_port(IOD_DP_PORT_HOST);
			if ((rc = add(dp, phost, &ec, e)))
				goto fail_rc;
		}
		memset(&ec, 0, sizeof(ec));
		ec.match.eth_type = IOD_NET_ETH_P_IPV4;
		ec.mask.eth_type = 0xffff;
		ec.match.tunnelled = 0;
		ec.mask.tunnelled = 0xff;
		ec.match.src.v4 = net->subnet;
		ec.mask.src.v4 = net->prefix_len ? ~0u << (32 - net->prefix_len) : 0;
		ec.priority = 10;
		ec.actions.flags = IOD_FLOW_ACT_SET_META | IOD_FLOW_ACT_SET_ZONE;
		ec.actions.meta = n + 1;
		ec.actions.zone = (uint16_t)(n + 1);
		if (!net->by_endpoint && !net->local_only && (rc = add(dp, phost, &ec, e)))
			goto fail_rc;
		/* qos */
		memset(&ec, 0, sizeof(ec));
		ec.match.meta = n + 1;
		if (net->rate_bytes_per_s) {
			ec.monitor.flags = IOD_FLOW_MON_METER;
			ec.monitor.meter.cir_bytes_per_s = net->rate_bytes_per_s;
			ec.monitor.meter.cbs_bytes = net->burst_bytes ? net->burst_bytes : 65536;
			ec.monitor.meter.ebs_bytes = 0;
		}
		if (net->dscp) {
			ec.actions.flags = IOD_FLOW_ACT_SET_DSCP;
			ec.actions.dscp = net->dscp;
		}
		if ((rc = add(dp, pq, &ec, e)))
			goto fail_rc;
		/* route: endpoints */
		for (uint32_t i = 0; i < net->endpoints_n; i++) {
			const struct iod_flow_dp_endpoint *ep = &net->endpoints[i];
			memset(&ec, 0, sizeof(ec));
			ec.match.meta = n + 1;
			ec.match.dst.v4 = ep->ip;
			if (ep->local) {
				ec.actions.flags = IOD_FLOW_ACT_SET_MAC;
				memcpy(ec.actions.dst_mac, ep->mac, 6);
				memcpy(ec.actions.src_mac, net->gateway_mac, 6);
				ec.fwd = to_port(IOD_DP_PORT_HOST);
			} else {
				ec.actions.flags = IOD_FLOW_ACT_ENCAP;
				struct iod_net_vxlan_tunnel *t = &ec.actions.encap;
				memcpy(t->outer_dst_mac, c->underlay_gw_mac, 6);
				memcpy(t->outer_src_mac, c->vtep_mac, 6);
				t->outer_src_ip = c->vtep_ip;
				t->outer_dst_ip = ep->vtep_ip;
				t->vni = net->vni;
				t->udp_csum = c->udp_csum;
				ec.fwd = to_port(IOD_DP_PORT_FABRIC);
			}
			if ((rc = add(dp, dp->pipe_route, &ec, e)))
				goto fail_rc;
		}
	}
	if ((rc = add_egress(dp, c, peg, e)))
		goto fail_rc;
	for (uint32_t s = 0; s < c->services_n; s++) {
		const struct iod_flow_dp_service *sv = &c->services[s];
		memset(&ec, 0, sizeof(ec));
		ec.match.meta = (uint32_t)sv->network + 1;
		ec.match.dst.v4 = sv->lb.vip;
		ec.match.dport = sv->lb.port;
		ec.match.proto = sv->lb.proto;
		ec.actions.flags = IOD_FLOW_ACT_LB;
		ec.actions.lb_service = s;
		if ((rc = add(dp, dp->pipe_svc, &ec, e)))
			goto fail_rc;
	}
	iod_flow_entries_process(dp->pl, 0, 0);
	return 0;
fail:
	rc = e ? e->code : -EINVAL;
fail_rc:
	iod_flow_dp_destroy(dp);
	return rc ? rc : -EINVAL;
}
