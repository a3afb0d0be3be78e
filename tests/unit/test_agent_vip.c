/*
 * test_agent_vip.c: service VIPs on the overlay (docs/network.md, "Service
 * VIPs on the overlay"): the control plane's VIP choice (src/ctrl/vip.c:
 * deterministic, in 10.200.240.0/20, collision-probed, kept; the deploy
 * plan stores one per Service and keeps it across redeploys), the data
 * plane's services built from Service and Endpoint objects
 * (src/agent/overlay_svc.c) and what the pipeline does with them: a new
 * connection to VIP:port goes to a healthy backend chosen by Maglev, the
 * reply comes back from the VIP, a backend whose Endpoint is unhealthy
 * gets no new connection while an established one stays on its backend
 * (conntrack across the rebuild) until it closes, a new connection that
 * reuses its closed tuple is balanced anew, and a replica's IOD_SVC_<NAME>_ADDR
 * becomes the VIP. The switch on a real cluster: tests/integration/
 * vip_netns.sh.
 */
#include "harness.h"
#include "iod/agent_run.h"
#include "iod/ctrl.h"
#include "iod/flow.h"
#include "iod/mesh.h"
#include "iod/mesh_proxy.h"
#include "iod/spec.h"

#include <arpa/inet.h>
#include <stdlib.h>

static uint32_t ip(const char *s)
{
	struct in_addr a;
	inet_pton(AF_INET, s, &a);
	return ntohl(a.s_addr);
}

TEST(vip_pick_is_deterministic_in_range_probed_and_kept)
{
	uint32_t a = 0, b = 0, c = 0;
	CHECK_EQ(iod_ctrl_vip_pick("echo", 0, NULL, 0, &a), 0);
	CHECK(iod_ctrl_vip_in_range(a));
	CHECK_EQ(a & 0xfffff000u, ip("10.200.240.0"));
	CHECK_EQ(iod_ctrl_vip_pick("echo", 0, NULL, 0, &b), 0);
	CHECK_EQ(a, b); /* the same name, the same slot */
	/* taken: the next free one after it */
	CHECK_EQ(iod_ctrl_vip_pick("echo", 0, &a, 1, &c), 0);
	CHECK(c != a && iod_ctrl_vip_in_range(c));
	CHECK_EQ(c, a == ip("10.200.255.254") ? ip("10.200.240.1") : a + 1);
	/* an address it had is kept, unless another holds it or it is not a VIP */
	CHECK_EQ(iod_ctrl_vip_pick("echo", ip("10.200.241.7"), &a, 1, &b), 0);
	CHECK_EQ(b, ip("10.200.241.7"));
	uint32_t held = ip("10.200.241.7");
	CHECK_EQ(iod_ctrl_vip_pick("echo", held, &held, 1, &b), 0);
	CHECK(b != held);
	CHECK(!iod_ctrl_vip_in_range(ip("10.200.240.0")));
	CHECK(!iod_ctrl_vip_in_range(ip("10.200.255.255")));
	CHECK(!iod_ctrl_vip_in_range(ip("10.200.1.2")));
	CHECK_EQ(iod_ctrl_vip_pick("echo", ip("10.200.1.2"), NULL, 0, &b), 0);
	CHECK_EQ(b, a);
	/* every VIP taken: a clear error, not a duplicate */
	uint32_t *all = calloc(IOD_SVC_VIPS_MAX, sizeof(*all));
	CHECK(all);
	for (uint32_t i = 0; i < IOD_SVC_VIPS_MAX; i++)
		all[i] = ip("10.200.240.1") + i;
	CHECK_EQ(iod_ctrl_vip_pick("echo", 0, all, IOD_SVC_VIPS_MAX, &b), -ENOSPC);
	CHECK_EQ(iod_ctrl_vip_pick("echo", 0, all, IOD_SVC_VIPS_MAX - 1, &b), 0);
	CHECK_EQ(b, ip("10.200.255.254")); /* the one left */
	free(all);
}

/* The deploy: one VIP per service, distinct, stored on the Service, kept
 * by a redeploy; a new service does not take a stored one's; the agents'
 * spec check ignores the field (a control-plane key). */
static void plan_services(struct iod_state *s, const char *spec, json_t *out)
{
	struct iod_state_result r;
	struct iod_err e = {0};
	char *cmd = NULL;
	json_t *answer = NULL;
	CHECK_MSG(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e) == 0, "%s", e.msg);
	CHECK(cmd);
	json_t *c = json_loads(cmd, 0, NULL);
	CHECK_EQ(iod_state_apply(s, cmd, strlen(cmd), &r), 0);
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(c, "services"), i, x)
	{
		const char *vip =
		    json_string_value(json_object_get(json_object_get(x, "value"), "vip"));
		CHECK(vip);
		json_object_set_new(out, json_string_value(json_object_get(x, "name")),
		                    json_string(vip));
	}
	json_decref(c);
	json_decref(answer);
	free(cmd);
}

TEST(deploy_stores_a_vip_per_service_and_keeps_it)
{
	struct iod_state *s;
	struct iod_state_result r;
	CHECK_EQ(iod_state_new(&s), 0);
	json_t *v = json_pack("{s:s, s:i}", "model", "dgx-h100", "gpus", 8);
	char *put = iod_state_cmd_put(IOD_STATE_NODE, "dgx", v, 0, -1);
	CHECK_EQ(iod_state_apply(s, put, strlen(put), &r), 0);
	free(put);
	json_decref(v);
	json_t *first = json_object(), *again = json_object();
	plan_services(s,
	              "services:\n"
	              "  - {name: a, type: stateless, replicas: 1, command: x}\n"
	              "  - {name: b, type: stateless, replicas: 1, command: x}\n",
	              first);
	const char *va = json_string_value(json_object_get(first, "a"));
	const char *vb = json_string_value(json_object_get(first, "b"));
	uint32_t ia = 0, ib = 0;
	CHECK(va && vb && !iod_net_ipv4_parse(va, &ia) && !iod_net_ipv4_parse(vb, &ib));
	CHECK(iod_ctrl_vip_in_range(ia) && iod_ctrl_vip_in_range(ib) && ia != ib);
	/* a redeploy of a (b not in it) keeps a's; c gets a third */
	plan_services(s,
	              "services:\n  - {name: c, type: stateless, replicas: 1, command: x}\n"
	              "  - {name: a, type: stateless, replicas: 2, command: x}\n",
	              again);
	CHECK_STR(json_string_value(json_object_get(again, "a")), va);
	const char *vc = json_string_value(json_object_get(again, "c"));
	CHECK(vc && strcmp(vc, va) && strcmp(vc, vb));
	/* the stored Service carries it; the spec view of it does not, and the
	 * agents' validation of a stored Service takes it */
	const json_t *stored = iod_state_value(s, IOD_STATE_SERVICE, "a");
	CHECK(stored);
	CHECK_STR(json_string_value(json_object_get(stored, "vip")), va);
	json_t *sp = iod_obj_service_spec(stored);
	CHECK(sp && !json_object_get(sp, "vip"));
	json_decref(sp);
	struct iod_spec *spec = NULL;
	struct iod_spec_diags *d = calloc(1, sizeof(*d));
	CHECK(d);
	CHECK_MSG(iod_spec_load_service("a", stored, &spec, d) == 0, "%s", d->n ? d->d[0].msg : "");
	iod_spec_free(spec);
	free(d);
	json_decref(first);
	json_decref(again);
	iod_state_free(s);
}

/* A TCP frame src:sport -> dst:dport into the switch's host port. */
struct fbuf {
	uint8_t mem[128 + 512]; /* headroom + frame */
	struct iod_pkt pkt;     /* describes mem */
};
static void tcp_frame(struct fbuf *b, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
                      uint8_t flags)
{
	struct iod_net_pkt_spec s = {0};
	iod_agent_overlay_mac(ip("10.200.1.1"), true, s.dst_mac);
	iod_agent_overlay_mac(src, false, s.src_mac);
	s.t.family = IOD_NET_AF_V4;
	s.t.proto = IOD_NET_PROTO_TCP;
	s.t.src.v4 = src;
	s.t.dst.v4 = dst;
	s.t.sport = sport;
	s.t.dport = dport;
	s.tcp_flags = flags;
	s.payload_bytes = 10;
	memset(&b->pkt, 0, sizeof(b->pkt));
	b->pkt.data = b->mem + 128;
	b->pkt.headroom = 128;
	b->pkt.len = (uint32_t)iod_net_pkt_build(&s, b->pkt.data, 512);
	b->pkt.port_in = IOD_DP_PORT_HOST;
}

/* One frame through the pipeline at now; its (inner) tuple after, and
 * whether it was forwarded. */
static bool pass(struct iod_flow_dp *dp, struct fbuf *b, uint64_t now, struct iod_net_tuple *out)
{
	struct iod_pkt *pp = &b->pkt;
	struct iod_net_meta m;
	iod_flow_burst(dp->pl, 0, &pp, 1, now);
	if (b->pkt.verdict != IOD_FLOW_V_PORT || iod_net_parse(b->pkt.data, b->pkt.len, 0, &m))
		return false;
	*out = m.key;
	return true;
}

static json_t *endpoint(const char *svc, const char *addr, int port, bool healthy)
{
	return json_pack("{s:s, s:s, s:i, s:b}", "service", svc, "addr", addr, "port", port,
	                 "healthy", healthy);
}

/*
 * Building the LB from the control plane's objects: service echo (VIP
 * 10.200.240.9, port 8080, tenant default) with three replicas, echo-0 and
 * echo-1 on this node, echo-2 on node-2, each Endpoint with its own port;
 * a service of another tenant gets no entry here; echo-2 unhealthy is a
 * backend that is down. Through the pipeline: 300 new connections from
 * cli-0 spread over the two healthy backends (DNAT to the backend's address
 * and port), none to echo-2; the reply is from the VIP. echo-2 healthy
 * again and echo-0 unhealthy (a rebuild keeping conntrack): an established
 * connection on echo-0 stays there; once closed, a new connection on its
 * tuple (port reuse) is a new session; new ones never go to it, and echo-2,
 * behind node-2's VTEP, gets its share over VXLAN.
 */
TEST(overlay_vip_balances_healthy_endpoints_from_the_objects)
{
	json_t *nodes =
	    json_pack("{s:[{s:s,s:{s:s}},{s:s,s:{s:s}}]}", "items", "name", "node-1", "value",
	              "addr", "10.254.1.1", "name", "node-2", "value", "addr", "10.254.2.1");
	json_t *svcs =
	    json_pack("{s:[{s:s,s:{s:s}},{s:s,s:{s:s,s:[i]}},{s:s,s:{s:s,s:s}},{s:s,s:{}}]}",
	              "items", "name", "cli", "value", "vip", "10.200.240.5", "name", "echo",
	              "value", "vip", "10.200.240.9", "ports", 8080, "name", "other", "value",
	              "vip", "10.200.240.6", "tenant", "blue", "name", "old", "value");
	json_t *reps =
	    json_pack("{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},"
	              "{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}",
	              "items", "name", "cli-0", "value", "service", "cli", "node", "node-1", "addr",
	              "10.200.1.2", "name", "echo-0", "value", "service", "echo", "node", "node-1",
	              "addr", "10.200.1.3", "name", "echo-1", "value", "service", "echo", "node",
	              "node-1", "addr", "10.200.1.4", "name", "echo-2", "value", "service", "echo",
	              "node", "node-2", "addr", "10.200.2.2", "name", "other-0", "value", "service",
	              "other", "node", "node-1", "addr", "10.200.1.5");
	json_t *eps =
	    json_pack("{s:[{s:s,s:o},{s:s,s:o},{s:s,s:o},{s:s,s:o}]}", "items", "name", "echo-0",
	              "value", endpoint("echo", "10.200.1.3", 40100, true), "name", "echo-1",
	              "value", endpoint("echo", "10.200.1.4", 40101, true), "name", "echo-2",
	              "value", endpoint("echo", "10.200.2.2", 40102, false), "name", "other-0",
	              "value", endpoint("other", "10.200.1.5", 40103, true));
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct fbuf *b = calloc(1, sizeof(*b));
	struct iod_flow_dp dp[2];
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && eps && t && c && b);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, NULL, t), 0);
	CHECK_EQ(iod_agent_overlay_table_services(svcs, eps, t), 0);
	CHECK_EQ(t->svcs_n, 3); /* "old" has no VIP */
	CHECK_STR(t->svcs[1].name, "echo");
	CHECK_EQ(t->svcs[1].vip, ip("10.200.240.9"));
	CHECK_EQ(t->svcs[1].port, 8080);
	CHECK_EQ(t->svcs[0].port, IOD_MESH_API_DEFAULT_PORT); /* no ports: the mesh's default */
	CHECK_STR(t->svcs[2].tenant, "blue");
	CHECK_STR(t->eps[3].service, "echo");
	CHECK_EQ(t->eps[3].port, 40102);
	CHECK(!t->eps[3].healthy && t->eps[1].healthy);

	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	struct iod_agent_overlay_local loc[3] = {{"cli-0", ip("10.200.1.2")},
	                                         {"echo-0", ip("10.200.1.3")},
	                                         {"echo-1", ip("10.200.1.4")}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_EQ(c->services_n, 2); /* cli and echo: no replica of blue here */
	const struct iod_net_lb_service *lb = &c->services[1].lb;
	CHECK_STR(lb->name, "echo");
	CHECK_EQ(c->services[1].network, 0);
	CHECK_EQ(lb->vip, ip("10.200.240.9"));
	CHECK_EQ(lb->port, 8080);
	CHECK_EQ(lb->proto, IOD_NET_PROTO_TCP);
	CHECK_EQ(lb->backends_n, 3);
	CHECK_EQ(lb->backends[0].ip, ip("10.200.1.3"));
	CHECK_EQ(lb->backends[0].port, 40100);
	CHECK(lb->backends[0].up && lb->backends[1].up && !lb->backends[2].up);
	CHECK_EQ(lb->backends[2].ip, ip("10.200.2.2"));
	CHECK_EQ(c->services[0].lb.backends_n, 0); /* cli: no Endpoint yet */

	CHECK_MSG(iod_flow_dp_build(c, 1, &dp[0], &e) == 0, "%s", e.msg);
	uint32_t hits[3] = {0, 0, 0}, lost = 0;
	uint64_t now = 1000000;
	struct iod_net_tuple o;
	for (uint16_t i = 0; i < 300; i++, now += 1000) {
		tcp_frame(b, ip("10.200.1.2"), (uint16_t)(20000 + i), ip("10.200.240.9"), 8080,
		          IOD_NET_TCP_SYN);
		if (!pass(&dp[0], b, now, &o)) {
			lost++;
			continue;
		}
		CHECK_EQ(b->pkt.port_out, IOD_DP_PORT_HOST);
		for (int k = 0; k < 3; k++)
			if (o.dst.v4 == lb->backends[k].ip) {
				CHECK_EQ(o.dport, lb->backends[k].port);
				hits[k]++;
			}
	}
	CHECK_EQ(lost, 0);
	CHECK_MSG(hits[0] >= 90 && hits[1] >= 90 && hits[2] == 0, "%u %u %u", hits[0], hits[1],
	          hits[2]);
	CHECK_EQ(hits[0] + hits[1], 300);
	/* the reply of connection 20000 comes back from the VIP */
	tcp_frame(b, ip("10.200.1.2"), 20000, ip("10.200.240.9"), 8080, IOD_NET_TCP_SYN);
	CHECK(pass(&dp[0], b, now, &o)); /* its retransmit: the same backend */
	uint32_t be_ip = o.dst.v4;
	uint16_t be_port = o.dport;
	tcp_frame(b, be_ip, be_port, ip("10.200.1.2"), 20000, IOD_NET_TCP_SYN | IOD_NET_TCP_ACK);
	CHECK(pass(&dp[0], b, now += 1000, &o));
	CHECK_EQ(o.src.v4, ip("10.200.240.9"));
	CHECK_EQ(o.sport, 8080);
	CHECK_EQ(o.dst.v4, ip("10.200.1.2"));
	/* the Endpoints move: the backend of 20000 unhealthy, echo-2 healthy */
	struct iod_agent_overlay_ep *moved =
	    (struct iod_agent_overlay_ep *)(be_ip == ip("10.200.1.3") ? &t->eps[1] : &t->eps[2]);
	moved->healthy = false;
	t->eps[3].healthy = true;
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	const uint32_t *tab0 = dp[0].services[0].maglev.table,
	               *tab1 = dp[0].services[1].maglev.table;
	CHECK_MSG(iod_flow_dp_rebuild(c, 1, &dp[1], &dp[0], &e) == 0, "%s", e.msg);
	/* echo's backends changed: a table of its own; cli's did not: taken */
	CHECK(dp[1].services[1].maglev.table && dp[1].services[1].maglev.table != tab1);
	CHECK(tab0 && dp[1].services[0].maglev.table == tab0);
	iod_flow_dp_destroy(&dp[0]);
	/* the established connection stays on its backend */
	tcp_frame(b, ip("10.200.1.2"), 20000, ip("10.200.240.9"), 8080, IOD_NET_TCP_ACK);
	CHECK(pass(&dp[1], b, now += 1000, &o));
	CHECK_EQ(o.dst.v4, be_ip);
	CHECK_EQ(o.dport, be_port);
	/* it closes (FIN both ways, the last ACK: TIME_WAIT); the client's
	 * kernel reuses the port for a new connection: a new session with a
	 * new pick, not the closed one's backend, which is down */
	tcp_frame(b, ip("10.200.1.2"), 20000, ip("10.200.240.9"), 8080,
	          IOD_NET_TCP_FIN | IOD_NET_TCP_ACK);
	CHECK(pass(&dp[1], b, now += 1000, &o));
	tcp_frame(b, be_ip, be_port, ip("10.200.1.2"), 20000, IOD_NET_TCP_FIN | IOD_NET_TCP_ACK);
	CHECK(pass(&dp[1], b, now += 1000, &o));
	tcp_frame(b, ip("10.200.1.2"), 20000, ip("10.200.240.9"), 8080, IOD_NET_TCP_ACK);
	CHECK(pass(&dp[1], b, now += 1000, &o));
	tcp_frame(b, ip("10.200.1.2"), 20000, ip("10.200.240.9"), 8080, IOD_NET_TCP_SYN);
	CHECK(pass(&dp[1], b, now += 1000, &o));
	CHECK(b->pkt.ct_state & IOD_NET_CT_NEW);
	CHECK(o.dst.v4 != be_ip);
	/* new ones: never to it; echo-2's behind node-2's VTEP */
	uint32_t to_moved = 0, remote = 0, local = 0;
	for (uint16_t i = 0; i < 300; i++, now += 1000) {
		tcp_frame(b, ip("10.200.1.2"), (uint16_t)(30000 + i), ip("10.200.240.9"), 8080,
		          IOD_NET_TCP_SYN);
		struct iod_pkt *pp = &b->pkt;
		iod_flow_burst(dp[1].pl, 0, &pp, 1, now);
		CHECK_EQ(b->pkt.verdict, IOD_FLOW_V_PORT);
		struct iod_net_meta m;
		CHECK_EQ(iod_net_parse(b->pkt.data, b->pkt.len, 0, &m), 0);
		if (b->pkt.port_out == IOD_DP_PORT_FABRIC) {
			CHECK(m.flags & IOD_NET_F_VXLAN);
			CHECK_EQ(m.outer.dst.v4, ip("10.254.2.1"));
			CHECK_EQ(m.key.dst.v4, ip("10.200.2.2"));
			CHECK_EQ(m.key.dport, 40102);
			remote++;
		} else {
			to_moved += m.key.dst.v4 == be_ip;
			local++;
		}
	}
	CHECK_EQ(to_moved, 0);
	CHECK_MSG(remote >= 90 && local >= 90, "remote %u local %u", remote, local);
	/* a client of another tenant does not reach the VIP */
	struct iod_agent_overlay_local loc2[4] = {{"cli-0", ip("10.200.1.2")},
	                                          {"echo-0", ip("10.200.1.3")},
	                                          {"echo-1", ip("10.200.1.4")},
	                                          {"other-0", ip("10.200.1.5")}};
	struct iod_flow_dp dp3;
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc2, 4, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_EQ(c->services_n, 3); /* blue's "other" now too, in blue's network */
	CHECK_STR(c->networks[c->services[2].network].name, "blue");
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp3, &e) == 0, "%s", e.msg);
	tcp_frame(b, ip("10.200.1.5"), 40000, ip("10.200.240.9"), 8080, IOD_NET_TCP_SYN);
	CHECK(!pass(&dp3, b, now, &o));
	iod_flow_dp_destroy(&dp3);
	iod_flow_dp_destroy(&dp[1]);
	free(b);
	free(c);
	free(t);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
	json_decref(eps);
}

/* A dropped frame as the switch records it (vswitch.c's on_drop). */
static void note_drop(struct iod_agent_drops *d, const struct iod_flow_dp_config *c,
                      const struct iod_agent_overlay_table *t, struct fbuf *b, uint64_t now_ms)
{
	struct iod_net_meta m;
	struct iod_flow_key k;
	CHECK_EQ(iod_net_parse(b->pkt.data, b->pkt.len, 0, &m), 0);
	iod_flow_key_from_meta(&k, &m, b->pkt.port_in);
	iod_agent_drops_note(d, c, t, &k, false, now_ms);
}

/*
 * A VIP whose backend is on the sender's own node is checked against that
 * backend's ingress security group (src/flow/dp.c: "sgin" after "svc", on
 * the translated destination). echo (VIP 10.200.240.9:8080) has one
 * backend, echo-0 on this node at port 40100, guarded by echo-in: deny
 * service bad, allow service cli on tcp 40100. bad-0 dialing the VIP is
 * dropped, recorded with echo-in/no-bad, and its retransmitted SYN is
 * dropped too (the dropped packet committed no session it could pass as
 * established); cli-0 passes, DNATed, and the reply passes (conntrack),
 * from the VIP. With the rule's port moved to 40101 the same connection is
 * echo-in/default-deny's. The backend's own node checks a remote backend's
 * sessions as they arrive from the fabric (the same pipes there).
 */
TEST(overlay_vip_checks_the_local_backends_ingress_group)
{
	json_t *nodes =
	    json_pack("{s:[{s:s,s:{s:s}},{s:s,s:{s:s}}]}", "items", "name", "node-1", "value",
	              "addr", "10.254.1.1", "name", "node-2", "value", "addr", "10.254.2.1");
	json_t *svcs = json_pack("{s:[{s:s,s:{}},{s:s,s:{}},{s:s,s:{s:s,s:[i]}}]}", "items", "name",
	                         "bad", "value", "name", "cli", "value", "name", "echo", "value",
	                         "vip", "10.200.240.9", "ports", 8080);
	json_t *reps = json_pack(
	    "{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}", "items",
	    "name", "cli-0", "value", "service", "cli", "node", "node-1", "addr", "10.200.1.2",
	    "name", "echo-0", "value", "service", "echo", "node", "node-1", "addr", "10.200.1.3",
	    "name", "bad-0", "value", "service", "bad", "node", "node-1", "addr", "10.200.1.4");
	json_t *eps = json_pack("{s:[{s:s,s:o}]}", "items", "name", "echo-0", "value",
	                        endpoint("echo", "10.200.1.3", 40100, true));
	const char *policy = "{\"items\": [{\"name\": \"echo-in\", \"value\": {\"service\": "
	                     "\"echo\", \"ingress\": ["
	                     " {\"name\": \"no-bad\", \"action\": \"deny\", \"service\": \"bad\"},"
	                     " {\"name\": \"app\", \"service\": \"cli\", \"protocol\": \"tcp\","
	                     "  \"ports\": %d}]}}]}";
	char text[512];
	snprintf(text, sizeof(text), policy, 40100);
	json_t *nps = json_loads(text, 0, NULL);
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_agent_drops *d = calloc(1, sizeof(*d));
	struct fbuf *b = calloc(1, sizeof(*b));
	struct iod_flow_dp dp;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && eps && nps && t && c && d && b);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, nps, t), 0);
	CHECK_EQ(iod_agent_overlay_table_services(svcs, eps, t), 0);
	CHECK_MSG(iod_agent_sg_from_state(nps, t, &e) == 0, "%s", e.msg);
	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	struct iod_agent_overlay_local loc[3] = {
	    {"cli-0", ip("10.200.1.2")}, {"echo-0", ip("10.200.1.3")}, {"bad-0", ip("10.200.1.4")}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK(c->acls_n > 0);
	CHECK_EQ(c->services_n, 1);
	CHECK_EQ(c->services[0].lb.backends_n, 1);
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	CHECK(dp.pipe_sgin >= 0);
	uint64_t now = 1000000;
	struct iod_net_tuple o;
	/* bad-0 -> VIP: echo-0's ingress denies it, by name; again: still */
	for (int i = 0; i < 2; i++) {
		tcp_frame(b, ip("10.200.1.4"), 41000, ip("10.200.240.9"), 8080, IOD_NET_TCP_SYN);
		CHECK_MSG(!pass(&dp, b, now += 1000, &o), "bad-0's SYN %d reached echo-0", i);
		note_drop(d, c, t, b, now / 1000000);
	}
	CHECK_EQ(d->n, 1); /* the retransmit counts on its record */
	CHECK_STR(d->ring[0].rule, "echo-in/no-bad");
	CHECK_EQ(d->ring[0].count, 2);
	CHECK_EQ(d->ring[0].dst, ip("10.200.1.3"));
	/* cli-0 -> VIP: admitted by echo-in/app, DNATed; the reply passes */
	tcp_frame(b, ip("10.200.1.2"), 42000, ip("10.200.240.9"), 8080, IOD_NET_TCP_SYN);
	CHECK(pass(&dp, b, now += 1000, &o));
	CHECK_EQ(o.dst.v4, ip("10.200.1.3"));
	CHECK_EQ(o.dport, 40100);
	tcp_frame(b, ip("10.200.1.3"), 40100, ip("10.200.1.2"), 42000,
	          IOD_NET_TCP_SYN | IOD_NET_TCP_ACK);
	CHECK(pass(&dp, b, now += 1000, &o));
	CHECK_EQ(o.src.v4, ip("10.200.240.9"));
	CHECK_EQ(o.sport, 8080);
	tcp_frame(b, ip("10.200.1.2"), 42000, ip("10.200.240.9"), 8080, IOD_NET_TCP_ACK);
	CHECK(pass(&dp, b, now += 1000, &o));
	CHECK_EQ(o.dst.v4, ip("10.200.1.3"));
	/* the rule on another port: cli-0's new connection is the default deny's */
	json_decref(nps);
	snprintf(text, sizeof(text), policy, 40101);
	nps = json_loads(text, 0, NULL);
	CHECK(nps);
	CHECK_EQ(iod_agent_sg_from_state(nps, t, &e), 0);
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	struct iod_flow_dp dp2;
	const uint32_t *tab = dp.services[0].maglev.table;
	CHECK_MSG(iod_flow_dp_rebuild(c, 1, &dp2, &dp, &e) == 0, "%s", e.msg);
	/* a policy change leaves the service as it was: its Maglev table is
	 * taken over, not rebuilt (40 services' rebuilds took 86-149 ms) */
	CHECK(tab && dp2.services[0].maglev.table == tab && !dp.services[0].maglev.table);
	iod_flow_dp_destroy(&dp);
	tcp_frame(b, ip("10.200.1.2"), 42001, ip("10.200.240.9"), 8080, IOD_NET_TCP_SYN);
	CHECK(!pass(&dp2, b, now += 1000, &o));
	note_drop(d, c, t, b, now / 1000000 + 5000);
	CHECK_EQ(d->n, 2);
	CHECK_STR(d->ring[1].rule, "echo-in/default-deny");
	/* the admitted connection keeps going (conntrack across the rebuild) */
	tcp_frame(b, ip("10.200.1.2"), 42000, ip("10.200.240.9"), 8080, IOD_NET_TCP_ACK);
	CHECK(pass(&dp2, b, now += 1000, &o));
	iod_flow_dp_destroy(&dp2);
	free(b);
	free(d);
	free(c);
	free(t);
	json_decref(nps);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
	json_decref(eps);
}

/*
 * Egress rules by peer service see the VIP too (sg.c: the "sg" pipe runs
 * before the VIP's DNAT). cli-out lets cli-0 open tcp to service echo at
 * port 40100 (its endpoint's port; the VIP is 10.200.240.9:8080): dialling
 * the VIP is admitted and DNATed to echo-0, dialling echo-0 itself too,
 * another port of echo-0 is the group's default deny. A deny of echo
 * before an allow of anything drops the dial to the VIP with the deny's
 * name (before: the VIP matched no rule by service, so the first dial was
 * dropped by default-deny and the second admitted by the allow).
 */
TEST(overlay_egress_rule_by_service_admits_and_denies_its_vip)
{
	json_t *nodes = json_pack("{s:[{s:s,s:{s:s}}]}", "items", "name", "node-1", "value", "addr",
	                          "10.254.1.1");
	json_t *svcs =
	    json_pack("{s:[{s:s,s:{}},{s:s,s:{s:s,s:[i]}}]}", "items", "name", "cli", "value",
	              "name", "echo", "value", "vip", "10.200.240.9", "ports", 8080);
	json_t *reps =
	    json_pack("{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}", "items", "name", "cli-0",
	              "value", "service", "cli", "node", "node-1", "addr", "10.200.1.2", "name",
	              "echo-0", "value", "service", "echo", "node", "node-1", "addr", "10.200.1.3");
	json_t *eps = json_pack("{s:[{s:s,s:o}]}", "items", "name", "echo-0", "value",
	                        endpoint("echo", "10.200.1.3", 40100, true));
	json_t *allow = json_loads(
	    "{\"items\": [{\"name\": \"cli-out\", \"value\": {\"service\": \"cli\", \"egress\": ["
	    " {\"name\": \"app\", \"service\": \"echo\", \"protocol\": \"tcp\", \"ports\": 40100}"
	    "]}}]}",
	    0, NULL);
	json_t *deny = json_loads(
	    "{\"items\": [{\"name\": \"cli-out\", \"value\": {\"service\": \"cli\", \"egress\": ["
	    " {\"name\": \"no-echo\", \"action\": \"deny\", \"service\": \"echo\"},"
	    " {\"name\": \"any\"}]}}]}",
	    0, NULL);
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_agent_drops *d = calloc(1, sizeof(*d));
	struct fbuf *b = calloc(1, sizeof(*b));
	struct iod_flow_dp dp;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && eps && allow && deny && t && c && d && b);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, allow, t), 0);
	CHECK_EQ(iod_agent_overlay_table_services(svcs, eps, t), 0);
	CHECK_MSG(iod_agent_sg_from_state(allow, t, &e) == 0, "%s", e.msg);
	/* which rules decide a dial to the VIP */
	struct iod_obj_netpolicy_rule r = {
	    .proto = IOD_NET_PROTO_TCP, .port_min = 8080, .port_max = 8080};
	snprintf(r.peer, sizeof(r.peer), "echo");
	CHECK_EQ(t->svcs_n, 1); /* cli has no VIP */
	CHECK_STR(t->svcs[0].name, "echo");
	CHECK(iod_agent_sg_rule_covers_vip(t, &r, &t->svcs[0])); /* the VIP's port */
	r.port_min = r.port_max = 40100;
	CHECK(iod_agent_sg_rule_covers_vip(t, &r, &t->svcs[0])); /* its endpoint's */
	r.port_min = r.port_max = 9000;
	CHECK(!iod_agent_sg_rule_covers_vip(t, &r, &t->svcs[0]));
	r.proto = IOD_NET_PROTO_UDP;
	r.port_min = 0;
	r.port_max = 65535;
	CHECK(!iod_agent_sg_rule_covers_vip(t, &r, &t->svcs[0]));

	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	struct iod_agent_overlay_local loc[2] = {{"cli-0", ip("10.200.1.2")},
	                                         {"echo-0", ip("10.200.1.3")}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 2, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	uint64_t now = 1000000;
	struct iod_net_tuple o;
	tcp_frame(b, ip("10.200.1.2"), 43000, ip("10.200.240.9"), 8080, IOD_NET_TCP_SYN);
	CHECK_MSG(pass(&dp, b, now += 1000, &o), "cli-0's SYN to echo's VIP was dropped");
	CHECK_EQ(o.dst.v4, ip("10.200.1.3"));
	CHECK_EQ(o.dport, 40100);
	tcp_frame(b, ip("10.200.1.2"), 43001, ip("10.200.1.3"), 40100, IOD_NET_TCP_SYN);
	CHECK(pass(&dp, b, now += 1000, &o));
	tcp_frame(b, ip("10.200.1.2"), 43002, ip("10.200.1.3"), 40101, IOD_NET_TCP_SYN);
	CHECK(!pass(&dp, b, now += 1000, &o));
	note_drop(d, c, t, b, now / 1000000);
	CHECK_EQ(d->n, 1);
	CHECK_STR(d->ring[0].rule, "cli-out/default-deny");
	/* deny echo, allow the rest: the VIP is echo's */
	CHECK_MSG(iod_agent_sg_from_state(deny, t, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 2, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	struct iod_flow_dp dp2;
	const uint32_t *tab = dp.services[0].maglev.table;
	CHECK_MSG(iod_flow_dp_rebuild(c, 1, &dp2, &dp, &e) == 0, "%s", e.msg);
	/* a policy change leaves the service as it was: its Maglev table is
	 * taken over, not rebuilt (40 services' rebuilds took 86-149 ms) */
	CHECK(tab && dp2.services[0].maglev.table == tab && !dp.services[0].maglev.table);
	iod_flow_dp_destroy(&dp);
	tcp_frame(b, ip("10.200.1.2"), 43003, ip("10.200.240.9"), 8080, IOD_NET_TCP_SYN);
	CHECK_MSG(!pass(&dp2, b, now += 1000, &o), "cli-0 reached echo's VIP past no-echo");
	note_drop(d, c, t, b, now / 1000000 + 5000);
	CHECK_EQ(d->n, 2);
	CHECK_STR(d->ring[1].rule, "cli-out/no-echo");
	tcp_frame(b, ip("10.200.1.2"), 43004, ip("10.200.1.3"), 40100, IOD_NET_TCP_SYN);
	CHECK(!pass(&dp2, b, now += 1000, &o));
	iod_flow_dp_destroy(&dp2);
	free(b);
	free(d);
	free(c);
	free(t);
	json_decref(allow);
	json_decref(deny);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
	json_decref(eps);
}

/*
 * More than 16 services with a VIP on one node (the switch held 16, and
 * the 17th and later had no VIP there): 40 services svc-00..svc-39, each
 * with one replica on this node; every VIP is balanced to its own
 * replica. Past the table's bound (IOD_AGENT_VIPS_MAX) the listing says
 * -ENOSPC and keeps the first ones.
 */
TEST(overlay_vips_past_sixteen_services_on_a_node)
{
	enum { N = 40 };
	json_t *nodes = json_pack("{s:[{s:s,s:{s:s}}]}", "items", "name", "node-1", "value", "addr",
	                          "10.254.1.1");
	json_t *svcs = json_pack("{s:[]}", "items"), *reps = json_pack("{s:[]}", "items"),
	       *eps = json_pack("{s:[]}", "items");
	struct iod_agent_overlay_local loc[N + 1];
	memset(loc, 0, sizeof(loc));
	snprintf(loc[N].name, sizeof(loc[N].name), "cli-0");
	loc[N].ip = ip("10.200.1.200");
	json_array_append_new(json_object_get(reps, "items"),
	                      json_pack("{s:s,s:{s:s,s:s,s:s}}", "name", "cli-0", "value",
	                                "service", "cli", "node", "node-1", "addr",
	                                "10.200.1.200"));
	for (int i = 0; i < N; i++) {
		char name[32], rep[32], vip[32], addr[32];
		snprintf(name, sizeof(name), "svc-%02d", i);
		snprintf(rep, sizeof(rep), "svc-%02d-0", i);
		snprintf(vip, sizeof(vip), "10.200.241.%d", i + 1);
		snprintf(addr, sizeof(addr), "10.200.1.%d", i + 2);
		json_array_append_new(json_object_get(svcs, "items"),
		                      json_pack("{s:s,s:{s:s,s:[i]}}", "name", name, "value", "vip",
		                                vip, "ports", 8000 + i));
		json_array_append_new(json_object_get(reps, "items"),
		                      json_pack("{s:s,s:{s:s,s:s,s:s}}", "name", rep, "value",
		                                "service", name, "node", "node-1", "addr", addr));
		json_array_append_new(json_object_get(eps, "items"),
		                      json_pack("{s:s,s:o}", "name", rep, "value",
		                                endpoint(name, addr, 9000 + i, true)));
		snprintf(loc[i].name, sizeof(loc[i].name), "%s", rep);
		loc[i].ip = ip(addr);
	}
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct fbuf *b = calloc(1, sizeof(*b));
	struct iod_flow_dp dp;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && eps && t && c && b);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, NULL, t), 0);
	CHECK_EQ(iod_agent_overlay_table_services(svcs, eps, t), 0);
	CHECK_EQ(t->svcs_n, N);
	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, N + 1, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_EQ(c->services_n, N);
	uint64_t t0 = iod_clock_now_ns();
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	printf("  (built a pipeline with %d services in %.1f ms)\n", N,
	       (double)(iod_clock_now_ns() - t0) / 1e6);
	uint64_t now = 1000000;
	struct iod_net_tuple o;
	for (int i = 0; i < N; i++) {
		char vip[32], addr[32];
		snprintf(vip, sizeof(vip), "10.200.241.%d", i + 1);
		snprintf(addr, sizeof(addr), "10.200.1.%d", i + 2);
		tcp_frame(b, ip("10.200.1.200"), (uint16_t)(44000 + i), ip(vip),
		          (uint16_t)(8000 + i), IOD_NET_TCP_SYN);
		CHECK_MSG(pass(&dp, b, now += 1000, &o), "svc-%02d's VIP %s dropped", i, vip);
		CHECK_EQ(o.dst.v4, ip(addr));
		CHECK_EQ(o.dport, 9000 + i);
	}
	/* a rebuild with every service as it was takes their tables over */
	struct iod_flow_dp dp2;
	t0 = iod_clock_now_ns();
	CHECK_MSG(iod_flow_dp_rebuild(c, 1, &dp2, &dp, &e) == 0, "%s", e.msg);
	printf("  (rebuilt it with the %d services unchanged in %.1f ms)\n", N,
	       (double)(iod_clock_now_ns() - t0) / 1e6);
	uint32_t taken = 0;
	for (int i = 0; i < N; i++)
		taken += dp2.services[i].maglev.table && !dp.services[i].maglev.table;
	CHECK_EQ(taken, N);
	iod_flow_dp_destroy(&dp);
	tcp_frame(b, ip("10.200.1.200"), 45000, ip("10.200.241.7"), 8006, IOD_NET_TCP_SYN);
	CHECK(pass(&dp2, b, now += 1000, &o));
	CHECK_EQ(o.dst.v4, ip("10.200.1.8"));
	iod_flow_dp_destroy(&dp2);
	/* the table's bound: a clear -ENOSPC, the first ones kept */
	json_t *many = json_pack("{s:[]}", "items");
	for (int i = 0; i <= IOD_AGENT_VIPS_MAX; i++) {
		char name[32], vip[32];
		snprintf(name, sizeof(name), "m-%03d", i);
		snprintf(vip, sizeof(vip), "10.200.%d.%d", 242 + i / 250, i % 250 + 1);
		json_array_append_new(
		    json_object_get(many, "items"),
		    json_pack("{s:s,s:{s:s}}", "name", name, "value", "vip", vip));
	}
	CHECK_EQ(iod_agent_overlay_table_services(many, eps, t), -ENOSPC);
	CHECK_EQ(t->svcs_n, IOD_AGENT_VIPS_MAX);
	json_decref(many);
	free(b);
	free(c);
	free(t);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
	json_decref(eps);
}

/*
 * service_mesh.mode l7 (docs/network.md, "The mesh proxy on the overlay"):
 * on a node whose agent hosts the proxy, web's VIP gets no LB entry; it is
 * a local endpoint of web's tenant network at the host stack's port, so
 * cli-0's SYN to VIP:8080 leaves for the host port unchanged (no DNAT, the
 * host stack's MAC), the proxy's reply from the VIP is cli-0's tenant's
 * and reaches it, and a replica of another tenant is dropped (its network
 * has no route to the VIP). On a node without a proxy the same service is
 * balanced in the switch (l4). An l4 service beside it keeps its LB.
 */
TEST(overlay_l7_vip_leads_to_the_nodes_proxy)
{
	json_t *nodes = json_pack("{s:[{s:s,s:{s:s}}]}", "items", "name", "node-1", "value", "addr",
	                          "10.254.1.1");
	json_t *svcs = json_pack(
	    "{s:[{s:s,s:{}},{s:s,s:{s:s}},{s:s,s:{s:s,s:[i],s:{s:s}}},{s:s,s:{s:s,s:[i]}}]}",
	    "items", "name", "cli", "value", "name", "blue", "value", "tenant", "blue", "name",
	    "web", "value", "vip", "10.200.240.7", "ports", 8080, "service_mesh", "mode", "l7",
	    "name", "echo", "value", "vip", "10.200.240.9", "ports", 9090);
	json_t *reps =
	    json_pack("{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},"
	              "{s:s,s:{s:s,s:s,s:s}}]}",
	              "items", "name", "cli-0", "value", "service", "cli", "node", "node-1", "addr",
	              "10.200.1.2", "name", "web-0", "value", "service", "web", "node", "node-1",
	              "addr", "10.200.1.3", "name", "blue-0", "value", "service", "blue", "node",
	              "node-1", "addr", "10.200.1.4", "name", "echo-0", "value", "service", "echo",
	              "node", "node-1", "addr", "10.200.1.5");
	json_t *eps = json_pack("{s:[{s:s,s:o},{s:s,s:o}]}", "items", "name", "web-0", "value",
	                        endpoint("web", "10.200.1.3", 40100, true), "name", "echo-0",
	                        "value", endpoint("echo", "10.200.1.5", 40200, true));
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct fbuf *b = calloc(1, sizeof(*b));
	struct iod_flow_dp dp;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && eps && t && c && b);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, NULL, t), 0);
	CHECK_EQ(iod_agent_overlay_table_services(svcs, eps, t), 0);
	CHECK_EQ(t->svcs_n, 2); /* cli and blue have no VIP */
	CHECK_STR(t->svcs[0].name, "web");
	CHECK_STR(t->svcs[1].name, "echo");
	CHECK(t->svcs[0].l7 && !t->svcs[1].l7);
	t->proxy = true;
	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	struct iod_agent_overlay_local loc[4] = {{"cli-0", ip("10.200.1.2")},
	                                         {"web-0", ip("10.200.1.3")},
	                                         {"blue-0", ip("10.200.1.4")},
	                                         {"echo-0", ip("10.200.1.5")}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 4, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_EQ(c->services_n, 1); /* echo only: web is the proxy's */
	CHECK_STR(c->services[0].lb.name, "echo");
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	uint64_t now = 1000000;
	struct iod_net_tuple o;
	uint8_t host_mac[6];
	iod_agent_overlay_mac(ip("10.200.1.1"), false, host_mac);
	tcp_frame(b, ip("10.200.1.2"), 45000, ip("10.200.240.7"), 8080, IOD_NET_TCP_SYN);
	CHECK_MSG(pass(&dp, b, now += 1000, &o), "cli-0's SYN to the l7 VIP was dropped");
	CHECK_EQ(b->pkt.port_out, IOD_DP_PORT_HOST);
	CHECK_EQ(o.dst.v4, ip("10.200.240.7")); /* not DNATed: the proxy listens on it */
	CHECK_EQ(o.dport, 8080);
	CHECK(!memcmp(b->pkt.data, host_mac, 6)); /* to the host stack's port */
	/* the proxy's reply, from the VIP, on the host port */
	tcp_frame(b, ip("10.200.240.7"), 8080, ip("10.200.1.2"), 45000,
	          IOD_NET_TCP_SYN | IOD_NET_TCP_ACK);
	iod_agent_overlay_mac(ip("10.200.1.1"), false, b->pkt.data + 6); /* from the host */
	CHECK_MSG(pass(&dp, b, now += 1000, &o), "the proxy's reply did not reach cli-0");
	CHECK_EQ(o.dst.v4, ip("10.200.1.2"));
	CHECK_EQ(o.src.v4, ip("10.200.240.7"));
	tcp_frame(b, ip("10.200.1.2"), 45000, ip("10.200.240.7"), 8080, IOD_NET_TCP_ACK);
	CHECK(pass(&dp, b, now += 1000, &o));
	CHECK(b->pkt.ct_state & IOD_NET_CT_EST);
	/* another tenant's replica: no route to web's VIP */
	tcp_frame(b, ip("10.200.1.4"), 45001, ip("10.200.240.7"), 8080, IOD_NET_TCP_SYN);
	CHECK(!pass(&dp, b, now += 1000, &o));
	/* the l4 service beside it: balanced in the switch */
	tcp_frame(b, ip("10.200.1.2"), 45002, ip("10.200.240.9"), 9090, IOD_NET_TCP_SYN);
	CHECK(pass(&dp, b, now += 1000, &o));
	CHECK_EQ(o.dst.v4, ip("10.200.1.5"));
	CHECK_EQ(o.dport, 40200);
	iod_flow_dp_destroy(&dp);
	/* a node without a proxy: the l7 service is balanced here (l4) */
	t->proxy = false;
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 4, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_EQ(c->services_n, 2);
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	tcp_frame(b, ip("10.200.1.2"), 45003, ip("10.200.240.7"), 8080, IOD_NET_TCP_SYN);
	CHECK(pass(&dp, b, now += 1000, &o));
	CHECK_EQ(o.dst.v4, ip("10.200.1.3"));
	CHECK_EQ(o.dport, 40100);
	iod_flow_dp_destroy(&dp);
	free(b);
	free(c);
	free(t);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
	json_decref(eps);
}

/*
 * The callee's ingress group on the l7 path: web (l7, VIP 10.200.240.7:8080,
 * endpoint port 40100) admits only cli on 40100. The proxy dials web-0 from
 * the host stack, which the group always admits, so the group is checked at
 * the caller's switch: cli-0's SYN to the VIP reaches the host port, other-0
 * (same tenant, no rule names it) is dropped under web-in/default-deny, and
 * a deny by address ahead of the allow drops cli-0 under its own name.
 * Before, other-0 reached the proxy and through it web-0.
 */
TEST(overlay_l7_vip_checks_the_callees_ingress_group_at_the_caller)
{
	json_t *nodes = json_pack("{s:[{s:s,s:{s:s}}]}", "items", "name", "node-1", "value", "addr",
	                          "10.254.1.1");
	json_t *svcs =
	    json_pack("{s:[{s:s,s:{}},{s:s,s:{}},{s:s,s:{s:s,s:[i],s:{s:s}}}]}", "items", "name",
	              "cli", "value", "name", "other", "value", "name", "web", "value", "vip",
	              "10.200.240.7", "ports", 8080, "service_mesh", "mode", "l7");
	json_t *reps = json_pack(
	    "{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}", "items",
	    "name", "cli-0", "value", "service", "cli", "node", "node-1", "addr", "10.200.1.2",
	    "name", "other-0", "value", "service", "other", "node", "node-1", "addr", "10.200.1.3",
	    "name", "web-0", "value", "service", "web", "node", "node-1", "addr", "10.200.1.4");
	json_t *eps = json_pack("{s:[{s:s,s:o}]}", "items", "name", "web-0", "value",
	                        endpoint("web", "10.200.1.4", 40100, true));
	json_t *allow = json_loads(
	    "{\"items\": [{\"name\": \"web-in\", \"value\": {\"service\": \"web\", \"ingress\": ["
	    " {\"name\": \"from-cli\", \"service\": \"cli\", \"protocol\": \"tcp\", \"ports\": "
	    "40100}"
	    "]}}]}",
	    0, NULL);
	json_t *deny = json_loads(
	    "{\"items\": [{\"name\": \"web-in\", \"value\": {\"service\": \"web\", \"ingress\": ["
	    " {\"name\": \"not-cli-0\", \"action\": \"deny\", \"cidr\": \"10.200.1.2/32\"},"
	    " {\"name\": \"from-cli\", \"service\": \"cli\", \"protocol\": \"tcp\", \"ports\": "
	    "40100}"
	    "]}}]}",
	    0, NULL);
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_agent_drops *d = calloc(1, sizeof(*d));
	struct fbuf *b = calloc(1, sizeof(*b));
	struct iod_flow_dp dp;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && eps && allow && deny && t && c && d && b);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, allow, t), 0);
	CHECK_EQ(iod_agent_overlay_table_services(svcs, eps, t), 0);
	CHECK_MSG(iod_agent_sg_from_state(allow, t, &e) == 0, "%s", e.msg);
	CHECK(t->svcs_n == 1 && t->svcs[0].l7);
	t->proxy = true;
	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	struct iod_agent_overlay_local loc[3] = {{"cli-0", ip("10.200.1.2")},
	                                         {"other-0", ip("10.200.1.3")},
	                                         {"web-0", ip("10.200.1.4")}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	uint64_t now = 1000000;
	struct iod_net_tuple o;
	tcp_frame(b, ip("10.200.1.2"), 46000, ip("10.200.240.7"), 8080, IOD_NET_TCP_SYN);
	CHECK_MSG(pass(&dp, b, now += 1000, &o), "cli-0's SYN to web's l7 VIP was dropped");
	CHECK_EQ(b->pkt.port_out, IOD_DP_PORT_HOST);
	tcp_frame(b, ip("10.200.1.3"), 46001, ip("10.200.240.7"), 8080, IOD_NET_TCP_SYN);
	CHECK_MSG(!pass(&dp, b, now += 1000, &o),
	          "other-0 reached web's l7 VIP past web-in, which admits only cli");
	note_drop(d, c, t, b, now / 1000000);
	CHECK_EQ(d->n, 1);
	CHECK_STR(d->ring[0].rule, "web-in/default-deny");
	/* other-0's traffic that is not to web's VIP keeps the tenant default */
	tcp_frame(b, ip("10.200.1.3"), 46002, ip("10.200.1.2"), 5000, IOD_NET_TCP_SYN);
	CHECK(pass(&dp, b, now += 1000, &o));
	iod_flow_dp_destroy(&dp);
	/* a deny by address ahead of the allow */
	CHECK_MSG(iod_agent_sg_from_state(deny, t, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	tcp_frame(b, ip("10.200.1.2"), 46003, ip("10.200.240.7"), 8080, IOD_NET_TCP_SYN);
	CHECK(!pass(&dp, b, now += 1000, &o));
	note_drop(d, c, t, b, now / 1000000 + 5000);
	CHECK_EQ(d->n, 2);
	CHECK_STR(d->ring[1].rule, "web-in/not-cli-0");
	iod_flow_dp_destroy(&dp);
	free(b);
	free(d);
	free(c);
	free(t);
	json_decref(allow);
	json_decref(deny);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
	json_decref(eps);
}

/*
 * Hairpin: a replica that dials its own service's VIP is never balanced to
 * itself while another backend is up (its kernel would drop the packet
 * from its own address as a martian and the connection would hang).
 * echo-0 and echo-1 back echo's VIP; 64 dials from echo-0 all reach
 * echo-1, while cli-0's 64 dials reach both; with echo-1 down, echo-0's
 * dial goes to itself (nothing else is up). Before, about half of echo-0's
 * dials picked echo-0.
 */
TEST(overlay_vip_never_balances_a_replica_to_itself)
{
	json_t *nodes = json_pack("{s:[{s:s,s:{s:s}}]}", "items", "name", "node-1", "value", "addr",
	                          "10.254.1.1");
	json_t *svcs =
	    json_pack("{s:[{s:s,s:{}},{s:s,s:{s:s,s:[i]}}]}", "items", "name", "cli", "value",
	              "name", "echo", "value", "vip", "10.200.240.9", "ports", 8080);
	json_t *reps = json_pack(
	    "{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}", "items",
	    "name", "cli-0", "value", "service", "cli", "node", "node-1", "addr", "10.200.1.2",
	    "name", "echo-0", "value", "service", "echo", "node", "node-1", "addr", "10.200.1.3",
	    "name", "echo-1", "value", "service", "echo", "node", "node-1", "addr", "10.200.1.4");
	json_t *eps = json_pack("{s:[{s:s,s:o},{s:s,s:o}]}", "items", "name", "echo-0", "value",
	                        endpoint("echo", "10.200.1.3", 40100, true), "name", "echo-1",
	                        "value", endpoint("echo", "10.200.1.4", 40100, true));
	json_t *eps1 = json_pack("{s:[{s:s,s:o},{s:s,s:o}]}", "items", "name", "echo-0", "value",
	                         endpoint("echo", "10.200.1.3", 40100, true), "name", "echo-1",
	                         "value", endpoint("echo", "10.200.1.4", 40100, false));
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct fbuf *b = calloc(1, sizeof(*b));
	struct iod_flow_dp dp;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && eps && eps1 && t && c && b);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, NULL, t), 0);
	CHECK_EQ(iod_agent_overlay_table_services(svcs, eps, t), 0);
	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	struct iod_agent_overlay_local loc[3] = {{"cli-0", ip("10.200.1.2")},
	                                         {"echo-0", ip("10.200.1.3")},
	                                         {"echo-1", ip("10.200.1.4")}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	uint64_t now = 1000000;
	struct iod_net_tuple o;
	uint32_t self = 0, other = 0, cli_to[2] = {0, 0};
	for (uint16_t p = 0; p < 64; p++) {
		tcp_frame(b, ip("10.200.1.3"), (uint16_t)(41000 + p), ip("10.200.240.9"), 8080,
		          IOD_NET_TCP_SYN);
		CHECK(pass(&dp, b, now += 1000, &o));
		self += o.dst.v4 == ip("10.200.1.3");
		other += o.dst.v4 == ip("10.200.1.4");
		tcp_frame(b, ip("10.200.1.2"), (uint16_t)(41000 + p), ip("10.200.240.9"), 8080,
		          IOD_NET_TCP_SYN);
		CHECK(pass(&dp, b, now += 1000, &o));
		cli_to[o.dst.v4 == ip("10.200.1.4")]++;
	}
	CHECK_MSG(self == 0 && other == 64, "echo-0 balanced to itself %u of 64 times", self);
	CHECK_MSG(cli_to[0] > 8 && cli_to[1] > 8, "cli-0: echo-0 %u, echo-1 %u", cli_to[0],
	          cli_to[1]);
	iod_flow_dp_destroy(&dp);
	/* echo-1 down: echo-0 has only itself */
	CHECK_EQ(iod_agent_overlay_table_services(svcs, eps1, t), 0);
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_overlay_dp_services(t, c, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	tcp_frame(b, ip("10.200.1.3"), 42000, ip("10.200.240.9"), 8080, IOD_NET_TCP_SYN);
	CHECK(pass(&dp, b, now += 1000, &o));
	CHECK_EQ(o.dst.v4, ip("10.200.1.3"));
	iod_flow_dp_destroy(&dp);
	free(b);
	free(c);
	free(t);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
	json_decref(eps);
	json_decref(eps1);
}

/* A security-group change applied from the watch's events to the last
 * listing, as the agent now does instead of listing every NetPolicy again:
 * a put replaces a group or adds one, a delete removes one, other kinds
 * are left alone; a put without a value says "list again". The groups
 * then load as from a fresh listing. */
TEST(netpolicy_events_update_the_last_listing)
{
	json_t *l = json_loads(
	    "{\"items\": [{\"name\": \"a-in\", \"value\": {\"service\": \"a\","
	    " \"ingress\": [{\"name\": \"x\", \"protocol\": \"tcp\", \"ports\": 80}]}},"
	    " {\"name\": \"b-in\", \"value\": {\"service\": \"b\","
	    " \"ingress\": [{\"name\": \"y\", \"protocol\": \"tcp\", \"ports\": 81}]}}]}",
	    0, NULL);
	json_t *ev = json_loads(
	    "[{\"type\": \"put\", \"kind\": \"netpolicy\", \"name\": \"a-in\", \"value\":"
	    " {\"service\": \"a\", \"ingress\": [{\"name\": \"z\", \"protocol\": \"tcp\", "
	    "\"ports\": 90}]}},"
	    " {\"type\": \"delete\", \"kind\": \"netpolicy\", \"name\": \"b-in\"},"
	    " {\"type\": \"put\", \"kind\": \"service\", \"name\": \"c\", \"value\": {}},"
	    " {\"type\": \"put\", \"kind\": \"netpolicy\", \"name\": \"c-in\", \"value\":"
	    " {\"service\": \"c\", \"egress\": [{\"name\": \"w\", \"protocol\": \"udp\", "
	    "\"ports\": 91}]}}]",
	    0, NULL);
	json_t *bad =
	    json_loads("[{\"type\": \"put\", \"kind\": \"netpolicy\", \"name\": \"d\"}]", 0, NULL);
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_err e = {0};
	CHECK(l && ev && bad && t);
	CHECK(iod_agent_list_apply_events(l, ev, "netpolicy"));
	json_t *items = json_object_get(l, "items");
	CHECK_EQ(json_array_size(items), 2);
	CHECK_MSG(iod_agent_sg_from_state(l, t, &e) == 0, "%s", e.msg);
	CHECK_EQ(t->sgs_n, 2);
	CHECK_STR(t->sgs[0].name, "a-in");
	CHECK_STR(t->sgs[1].name, "c-in");
	CHECK_STR(t->sg_rules[t->sgs[0].rules_first].name, "a-in/z");
	CHECK_EQ(t->sg_rules[t->sgs[0].rules_first].r.port_min, 90);
	CHECK(t->sgs[1].egress && !t->sgs[1].ingress);
	/* deleting what is not there changes nothing; a put without a value fails */
	json_t *del = json_loads(
	    "[{\"type\": \"delete\", \"kind\": \"netpolicy\", \"name\": \"q\"}]", 0, NULL);
	CHECK(iod_agent_list_apply_events(l, del, "netpolicy"));
	CHECK_EQ(json_array_size(items), 2);
	CHECK(!iod_agent_list_apply_events(l, bad, "netpolicy"));
	json_t *notlist = json_object();
	CHECK(!iod_agent_list_apply_events(notlist, ev, "netpolicy"));
	free(t);
	json_decref(notlist);
	json_decref(del);
	json_decref(bad);
	json_decref(ev);
	json_decref(l);
}

static const char *env_of(const struct iod_agent_replica *r, const char *var)
{
	for (uint32_t i = 0; i < r->envc; i++) {
		const char *kv = iod_agent_strv_at(r->env_buf, sizeof(r->env_buf), r->envc, i);
		if (kv && !strncmp(kv, var, strlen(var)) && kv[strlen(var)] == '=')
			return kv + strlen(var) + 1;
	}
	return NULL;
}

/* A replica on the overlay dials services at their overlay VIP: its
 * IOD_SVC_<NAME>_ADDR (the mesh's loopback VIP) becomes VIP:port; other
 * variables, and services without a VIP, stay as they were. */
TEST(env_overlay_vips_replace_the_mesh_addresses)
{
	struct iod_agent_replica *r = calloc(1, sizeof(*r));
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	CHECK(r && t);
	CHECK_EQ(iod_agent_replica_add_env(r, "IOD_SVC_ECHO_SERVER_ADDR", "127.1.2.3:8080"), 0);
	CHECK_EQ(iod_agent_replica_add_env(r, "IOD_SVC_OLD_ADDR", "127.1.2.4:15001"), 0);
	CHECK_EQ(iod_agent_replica_add_env(r, "IOD_PORT_X", "1"), 0);
	t->svcs_n = 1;
	snprintf(t->svcs[0].name, sizeof(t->svcs[0].name), "echo-server");
	t->svcs[0].vip = ip("10.200.240.9");
	t->svcs[0].port = 8080;
	CHECK_EQ(iod_agent_env_overlay_vips(r, t), 0);
	CHECK_EQ(r->envc, 3);
	CHECK_STR(env_of(r, "IOD_SVC_ECHO_SERVER_ADDR"), "10.200.240.9:8080");
	CHECK_STR(env_of(r, "IOD_SVC_OLD_ADDR"), "127.1.2.4:15001");
	CHECK_STR(env_of(r, "IOD_PORT_X"), "1");
	free(r);
	free(t);
}
