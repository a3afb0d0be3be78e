/*
 * test_dp_ar.c: adaptive routing in the overlay data plane (src/flow/dp_ar.c):
 * the adaptive_routing config of a dp network and its errors, and the outer
 * source port of encapsulated packets chosen per packet by net/ar: ecmp keeps
 * a flow on its hash port; minrtt sends probes, a remote edge reflects them,
 * and the flow moves to the port whose reply came back first.
 */
#include "harness.h"
#include "iod/flow_debug.h"
#include "iod/flow.h"

#include <arpa/inet.h>
#include <stdlib.h>

static const char *cfg_text(const char *policy, const char *vtep, const char *peer)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf),
	         "vtep: %s\n"
	         "vtep_mac: 02:00:00:00:aa:01\n"
	         "underlay_gw_mac: 02:00:00:00:aa:fe\n"
	         "networks:\n"
	         "  - name: blue\n"
	         "    vni: 100\n"
	         "    subnet: 192.168.0.0/16\n"
	         "    adaptive_routing: {policy: %s, paths: 4, probe_timeout: 20ms}\n"
	         "    endpoints:\n"
	         "      - {ip: 192.168.0.2, vtep: %s}\n"
	         "      - {ip: 192.168.0.3, mac: 02:00:00:00:00:03, local: true}\n",
	         vtep, policy, peer);
	return buf;
}

struct node {
	struct iod_flow_dp_config *c; /* parsed config */
	struct iod_flow_dp dp;        /* its pipeline */
	struct iod_flow_dp_ar *ar;    /* its adaptive routing */
};

static int node_up(struct node *n, const char *text)
{
	struct iod_err e = {0};
	n->c = calloc(1, sizeof(*n->c));
	if (!n->c || iod_flow_dp_config_parse(text, strlen(text), "t.yaml", n->c, &e))
		return -1;
	n->c->ct_sessions = 256;
	if (iod_flow_dp_build(n->c, 1, &n->dp, &e))
		return -1;
	return iod_flow_dp_ar_create(n->c, &n->ar, &e);
}

static void node_down(struct node *n)
{
	iod_flow_dp_ar_destroy(n->ar);
	iod_flow_dp_destroy(&n->dp);
	iod_flow_dp_config_free(n->c);
	free(n->c);
}

/* A TCP frame from the local endpoint to the remote one, through the
 * pipeline and the AR steer; the outer source port, 0 when not encapsulated. */
static uint16_t send_one(struct node *n, uint16_t sport, uint64_t now_ns)
{
	static uint8_t mem[128 + 512];
	struct iod_net_pkt_spec s = {0};
	static const uint8_t a[6] = {2, 0, 0, 0, 0, 3}, g[6] = {2, 0, 0, 0, 0, 1};
	memcpy(s.src_mac, a, 6);
	memcpy(s.dst_mac, g, 6);
	s.t.family = IOD_NET_AF_V4;
	s.t.proto = IOD_NET_PROTO_TCP;
	s.t.src.v4 = 0xc0a80003;
	s.t.dst.v4 = 0xc0a80002;
	s.t.sport = sport;
	s.t.dport = 80;
	s.payload_bytes = 12;
	struct iod_pkt p = {0}, *pp = &p;
	int len = iod_net_pkt_build(&s, mem + 128, 512);
	if (len <= 0)
		return 0;
	p.data = mem + 128;
	p.len = (uint32_t)len;
	p.headroom = 128;
	p.port_in = IOD_DP_PORT_HOST;
	p.mirror_port = UINT16_MAX;
	iod_flow_burst(n->dp.pl, 0, &pp, 1, now_ns);
	iod_flow_dp_ar_steer(n->ar, &pp, 1, now_ns);
	struct iod_net_meta m;
	if (p.verdict != IOD_FLOW_V_PORT || p.port_out != IOD_DP_PORT_FABRIC ||
	    iod_net_parse(p.data, p.len, 0, &m) || !(m.flags & IOD_NET_F_VXLAN))
		return 0;
	return m.outer.sport;
}

TEST(dp_ar_config_and_errors)
{
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_err e = {0};
	CHECK(c);
	const char *ok = cfg_text("minrtt", "10.10.0.1", "10.10.0.2");
	CHECK_EQ(iod_flow_dp_config_parse(ok, strlen(ok), "ok.yaml", c, &e), 0);
	CHECK(c->networks[0].ar_enabled);
	CHECK_EQ(c->networks[0].ar.policy, IOD_AR_MINRTT);
	CHECK_EQ(c->networks[0].ar.paths, 4);
	CHECK_U64(c->networks[0].ar.probe_timeout_ns, 20 * IOD_NS_PER_MS);
	iod_flow_dp_config_free(c);
	memset(c, 0, sizeof(*c));
	const char *none = "vtep: 1.2.3.4\nnetworks:\n  - {name: n, vni: 5, subnet: 10.0.0.0/8}\n";
	CHECK_EQ(iod_flow_dp_config_parse(none, strlen(none), "n.yaml", c, &e), 0);
	CHECK(!c->networks[0].ar_enabled);
	struct iod_flow_dp_ar *ar = (void *)1;
	CHECK_EQ(iod_flow_dp_ar_create(c, &ar, &e), 0);
	CHECK(ar == NULL);
	iod_flow_dp_config_free(c);
	/* the probe VNI is no network's */
	memset(c, 0, sizeof(*c));
	const char *rsv =
	    "vtep: 1.2.3.4\nnetworks:\n  - {name: n, vni: 16777215, subnet: 10.0.0.0/8}\n";
	CHECK_EQ(iod_flow_dp_config_parse(rsv, strlen(rsv), "r.yaml", c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "reserved for adaptive-routing probes");
	CHECK_CONTAINS(e.msg, "r.yaml:3:");
	iod_flow_dp_config_free(c);

	static const struct {
		const char *ar;   /* the adaptive_routing value */
		const char *want; /* in the message */
	} bad[] = {
	    {"{policy: fastest}", "policy must be ecmp, minrtt, flowlet, clove-ecn or probe-util"},
	    {"{paths: 4}", "needs a policy"},
	    {"{policy: minrtt, pathz: 4}", "did you mean \"paths\""},
	    {"{policy: minrtt, paths: 0}", "paths must be 1..16"},
	    {"{policy: minrtt, paths: 17}", "0..16"},
	    {"{policy: ecmp, sport_min: 5000, sport_max: 4000}", "non-empty range"},
	    {"{policy: ecmp, sport_min: 5000, sport_max: 5001, paths: 4}", "smaller than paths"},
	    {"{policy: flowlet, flowlet_gap: soon}", "flowlet_gap must be a positive duration"},
	    {"minrtt", "adaptive_routing must be a mapping"},
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		char y[512];
		snprintf(y, sizeof(y),
		         "vtep: 1.2.3.4\nnetworks:\n  - name: n\n    vni: 5\n"
		         "    subnet: 10.0.0.0/8\n    adaptive_routing: %s\n",
		         bad[i].ar);
		memset(c, 0, sizeof(*c));
		e = (struct iod_err){0};
		CHECK_EQ(iod_flow_dp_config_parse(y, strlen(y), "b.yaml", c, &e), -EINVAL);
		CHECK_CONTAINS(e.msg, "b.yaml:6:");
		CHECK_CONTAINS(e.msg, bad[i].want);
		iod_flow_dp_config_free(c);
	}
	free(c);
}

TEST(dp_ar_ecmp_port_per_flow_from_core)
{
	struct node n = {0};
	CHECK_EQ(node_up(&n, cfg_text("ecmp", "10.10.0.1", "10.10.0.2")), 0);
	CHECK(n.ar);
	struct iod_ar *core = iod_flow_dp_ar_core(n.ar, 0);
	CHECK(core);
	uint16_t first[16];
	uint32_t distinct = 0;
	for (uint16_t f = 0; f < 16; f++) {
		first[f] = send_one(&n, (uint16_t)(1000 + f), 1000 + f);
		CHECK(first[f] >= 32768 && first[f] <= 60999);
		bool seen = false;
		for (uint16_t k = 0; k < f; k++)
			seen |= first[k] == first[f];
		distinct += !seen;
	}
	/* the same flow keeps its port; different flows spread */
	for (uint16_t f = 0; f < 16; f++)
		CHECK_EQ(send_one(&n, (uint16_t)(1000 + f), 5000 + f), first[f]);
	CHECK(distinct >= 8);
	uint8_t buf[256];
	iod_flow_dp_ar_tick(n.ar, 10000);
	CHECK_EQ(iod_flow_dp_ar_probe_frame(n.ar, buf, sizeof(buf)), 0); /* ecmp never probes */
	node_down(&n);
}

TEST(dp_ar_minrtt_probes_reflect_and_pin)
{
	struct node a = {0}, b = {0};
	CHECK_EQ(node_up(&a, cfg_text("minrtt", "10.10.0.1", "10.10.0.2")), 0);
	CHECK_EQ(node_up(&b, cfg_text("minrtt", "10.10.0.2", "10.10.0.1")), 0);
	uint64_t t0 = 1000000;
	uint16_t hash_port = send_one(&a, 4242, t0);
	CHECK(hash_port);
	/* the core asked for k = 4 probes on distinct ports, the hash port first */
	uint8_t probes[4][IOD_AR_PROBE_FRAME_BYTES + 16];
	uint32_t lens[4], np = 0, len;
	uint8_t extra[128];
	while (np < 4 && (len = iod_flow_dp_ar_probe_frame(a.ar, probes[np], sizeof(probes[0]))))
		lens[np++] = len;
	CHECK_EQ(np, 4);
	CHECK_EQ(iod_flow_dp_ar_probe_frame(a.ar, extra, sizeof(extra)), 0);
	uint16_t ports[4];
	for (uint32_t i = 0; i < np; i++) {
		struct iod_net_meta m;
		CHECK_EQ(iod_net_parse(probes[i], lens[i], 0, &m), 0);
		CHECK_EQ(m.outer.dport, IOD_NET_VXLAN_PORT); /* hashes like the data */
		CHECK_EQ(m.vni, IOD_AR_PROBE_VNI);
		CHECK_EQ(m.outer.dst.v4, 0x0a0a0002);
		/* routers drop a bad IPv4 header checksum */
		struct iod_net_ipv4 ip;
		memcpy(&ip, probes[i] + 14, sizeof(ip));
		CHECK_EQ(iod_net_ipv4_csum(&ip), ntohs(ip.csum_be));
		ports[i] = m.outer.sport;
		for (uint32_t k = 0; k < i; k++)
			CHECK(ports[k] != ports[i]);
	}
	/* the remote edge reflects probe 2 first: it is the fastest path */
	struct iod_pkt p = {0};
	p.data = probes[2];
	p.len = lens[2];
	p.port_in = IOD_DP_PORT_FABRIC;
	CHECK(iod_flow_dp_ar_rx(b.ar, &p, t0 + 100));
	CHECK_EQ(p.verdict, IOD_FLOW_V_PORT);
	CHECK_EQ(p.port_out, IOD_DP_PORT_FABRIC);
	static const uint8_t gw[6] = {2, 0, 0, 0, 0xaa, 0xfe};
	CHECK(memcmp(p.data, gw, 6) == 0); /* to B's next hop, not back to A's MAC */
	/* the reply reaches A and pins the flow */
	p.verdict = 0;
	CHECK(iod_flow_dp_ar_rx(a.ar, &p, t0 + 300000));
	CHECK_EQ(p.verdict, IOD_FLOW_V_DROP);
	struct iod_ar *core = iod_flow_dp_ar_core(a.ar, 0);
	CHECK_U64(iod_ar_stats(core)->flows_pinned, 1);
	CHECK_EQ(send_one(&a, 4242, t0 + 400000), ports[2]);
	/* a later reply of another port changes nothing */
	struct iod_pkt q = {0};
	q.data = probes[0];
	q.len = lens[0];
	CHECK(iod_flow_dp_ar_rx(b.ar, &q, t0 + 500000));
	CHECK(iod_flow_dp_ar_rx(a.ar, &q, t0 + 600000));
	CHECK_EQ(send_one(&a, 4242, t0 + 700000), ports[2]);
	/* VXLAN data frames are not probes */
	uint8_t data[256];
	struct iod_net_pkt_spec s = {0};
	s.t.family = IOD_NET_AF_V4;
	s.t.proto = IOD_NET_PROTO_UDP;
	s.t.src.v4 = 0x0a0a0002;
	s.t.dst.v4 = 0x0a0a0001;
	s.t.sport = 40000;
	s.t.dport = 4789;
	s.payload_bytes = 20;
	struct iod_pkt r = {0};
	r.data = data;
	r.len = (uint32_t)iod_net_pkt_build(&s, data, sizeof(data));
	CHECK(!iod_flow_dp_ar_rx(a.ar, &r, t0));
	/* the dump shows the policy and the counters */
	json_t *j = iod_flow_dp_ar_json(a.ar, t0 + 800000);
	char *txt = json_dumps(j, JSON_COMPACT);
	CHECK_CONTAINS(txt, "\"policy\":\"minrtt\"");
	CHECK_CONTAINS(txt, "\"flows_pinned\":1");
	CHECK_CONTAINS(txt, "\"vtep\":\"10.10.0.2\"");
	/* the pinned path: its port, the race's round trip, its flow */
	char want[96];
	snprintf(want, sizeof(want), "\"sport\":%u,", ports[2]);
	CHECK_CONTAINS(txt, want);
	CHECK_CONTAINS(txt, "\"rtt_us\":300,\"flows\":1");
	CHECK(iod_flow_dp_ar_matches(a.ar, a.c));
	CHECK(!iod_flow_dp_ar_matches(a.ar, b.c)); /* another VTEP */
	CHECK(!iod_flow_dp_ar_matches(NULL, a.c));
	free(txt);
	json_decref(j);
	j = iod_flow_dp_ar_json(b.ar, t0);
	txt = json_dumps(j, JSON_COMPACT);
	CHECK_CONTAINS(txt, "\"probes_reflected\":2");
	free(txt);
	json_decref(j);
	node_down(&a);
	node_down(&b);
}
