/*
 * test_agent_net.c: the replica-address allocator for per-replica network
 * namespaces (ipam.c: allocate, keep, release, reuse, exhaustion, bad
 * subnets) and the concurrent health checks (the prober in probe.c): a
 * check that hangs until its timeout does not hold back another replica's
 * verdict; the node's virtual switch's QoS (overlay.c + src/flow/dp.c): a
 * replica's resources.network.bandwidth (Replica "nic_bw_bps") is an egress
 * meter at that rate in its node's pipeline, and holds it there. As root,
 * in a network namespace of their own: the virtual switch's thread blocks
 * the agent's signals, and an afpacket port hears only its interface. The
 * netns and veth plumbing itself runs as root in
 * tests/integration/agent_netns.sh and overlay_netns.sh.
 */
#include "harness.h"
#include "iod/agent_run.h"
#include "iod/ar.h"
#include "iod/flow.h"
#include "iod/io.h"
#include "iod/net_debug.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <pthread.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static uint32_t ip(const char *s)
{
	struct in_addr a;
	inet_pton(AF_INET, s, &a);
	return ntohl(a.s_addr);
}

TEST(ipam_allocates_lowest_free_keeps_and_reuses)
{
	struct iod_agent_ipam *m = calloc(1, sizeof(*m));
	struct iod_err e = {0};
	uint32_t a, i;
	char buf[20];
	CHECK(m);
	CHECK_EQ(iod_agent_ipam_init(m, "10.213.4.0/24", &e), 0);
	CHECK_EQ(m->hosts, 253); /* minus network, gateway, broadcast */
	CHECK_U64(iod_agent_ipam_gateway(m), ip("10.213.4.1"));
	CHECK_EQ(iod_agent_ipam_alloc(m, "ps-0", &a, &i, &e), 0);
	CHECK_U64(a, ip("10.213.4.2"));
	CHECK_EQ(i, 0);
	CHECK_EQ(iod_agent_ipam_alloc(m, "ps-1", &a, &i, &e), 0);
	CHECK_U64(a, ip("10.213.4.3"));
	CHECK_EQ(iod_agent_ipam_alloc(m, "w-0", &a, &i, &e), 0);
	CHECK_U64(a, ip("10.213.4.4"));
	/* the same name keeps its address (a restart) */
	CHECK_EQ(iod_agent_ipam_alloc(m, "ps-1", &a, &i, &e), 0);
	CHECK_U64(a, ip("10.213.4.3"));
	CHECK_EQ(iod_agent_ipam_used(m), 3);
	/* released: the lowest free is handed out next */
	CHECK_EQ(iod_agent_ipam_release(m, "ps-0"), 0);
	CHECK_EQ(iod_agent_ipam_release(m, "ps-0"), -ENOENT);
	CHECK_EQ(iod_agent_ipam_find(m, "ps-0", &a, NULL), -ENOENT);
	CHECK_EQ(iod_agent_ipam_alloc(m, "w-1", &a, &i, &e), 0);
	CHECK_U64(a, ip("10.213.4.2"));
	CHECK_EQ(iod_agent_ipam_find(m, "w-0", &a, &i), 0);
	CHECK_U64(a, ip("10.213.4.4"));
	CHECK_EQ(i, 2);
	iod_agent_ipv4_format(a, buf, sizeof(buf));
	CHECK_STR(buf, "10.213.4.4");
	CHECK_EQ(iod_agent_ipam_alloc(m, "", &a, &i, &e), -EINVAL);
	free(m);
}

TEST(ipam_exhaustion_is_a_clear_error)
{
	struct iod_agent_ipam *m = calloc(1, sizeof(*m));
	struct iod_err e = {0};
	uint32_t a;
	char name[16];
	CHECK(m);
	CHECK_EQ(iod_agent_ipam_init(m, "192.168.7.8/29", &e), 0);
	CHECK_EQ(m->hosts, 5);
	for (int k = 0; k < 5; k++) {
		snprintf(name, sizeof(name), "r-%d", k);
		CHECK_EQ(iod_agent_ipam_alloc(m, name, &a, NULL, &e), 0);
		CHECK_U64(a, ip("192.168.7.10") + (uint32_t)k);
	}
	CHECK_EQ(iod_agent_ipam_alloc(m, "r-5", &a, NULL, &e), -ENOSPC);
	CHECK_CONTAINS(e.msg, "r-5");
	CHECK_CONTAINS(e.msg, "192.168.7.8/29 is full");
	CHECK_CONTAINS(e.msg, "--netns-subnet");
	/* an owner still gets its own; a release makes room */
	CHECK_EQ(iod_agent_ipam_alloc(m, "r-2", &a, NULL, &e), 0);
	CHECK_EQ(iod_agent_ipam_release(m, "r-3"), 0);
	CHECK_EQ(iod_agent_ipam_alloc(m, "r-5", &a, NULL, &e), 0);
	CHECK_U64(a, ip("192.168.7.13"));
	/* a /16 is used up to the agent's replica limit, and says so when full */
	CHECK_EQ(iod_agent_ipam_init(m, "10.9.0.0/16", &e), 0);
	CHECK_EQ(m->hosts, IOD_AGENT_IPAM_MAX);
	for (int k = 0; k < IOD_AGENT_IPAM_MAX; k++) {
		snprintf(name, sizeof(name), "x-%d", k);
		CHECK_EQ(iod_agent_ipam_alloc(m, name, &a, NULL, &e), 0);
	}
	CHECK_EQ(iod_agent_ipam_alloc(m, "y-0", &a, NULL, &e), -ENOSPC);
	free(m);
}

TEST(ipam_rejects_bad_subnets)
{
	struct iod_agent_ipam *m = calloc(1, sizeof(*m));
	struct iod_err e = {0};
	CHECK(m);
	CHECK_EQ(iod_agent_ipam_init(m, "10.213.0.0", &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "CIDR");
	CHECK_EQ(iod_agent_ipam_init(m, "10.213.0/24", &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "not an IPv4 address");
	CHECK_EQ(iod_agent_ipam_init(m, "10.213.0.0/30", &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "/16 to /29");
	CHECK_EQ(iod_agent_ipam_init(m, "10.0.0.0/8", &e), -EINVAL);
	CHECK_EQ(iod_agent_ipam_init(m, "10.213.0.0/24x", &e), -EINVAL);
	CHECK_EQ(iod_agent_ipam_init(m, "10.213.0.5/24", &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "10.213.0.0/24");
	free(m);
}

/* The next result, waiting on the prober's fd for up to 30 s. */
static int next_result(struct iod_agent_prober *p, struct iod_agent_probe_result *r)
{
	for (int i = 0; i < 300; i++) {
		if (iod_agent_prober_take(p, r) == 0)
			return 0;
		struct pollfd pf = {.fd = iod_agent_prober_fd(p), .events = POLLIN};
		if (poll(&pf, 1, 100) > 0) {
			uint64_t c;
			(void)!read(pf.fd, &c, sizeof(c));
		}
	}
	return -ETIMEDOUT;
}

TEST(prober_a_hung_check_does_not_delay_the_others)
{
	struct iod_agent_prober *p = NULL;
	struct iod_err e = {0};
	struct iod_agent_probe_result r;
	struct iod_agent_health hung = {.kind = IOD_HEALTH_EXEC, .timeout_ns = 3 * IOD_NS_PER_S};
	struct iod_agent_health quick = {.kind = IOD_HEALTH_EXEC, .timeout_ns = 3 * IOD_NS_PER_S};
	struct iod_agent_health tcp = {.kind = IOD_HEALTH_TCP, .timeout_ns = IOD_NS_PER_S};
	snprintf(hung.command, sizeof(hung.command), "sleep 30");
	snprintf(quick.command, sizeof(quick.command), "true");

	/* a listener that accepts: the TCP check passes */
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	      listen(lfd, 8) == 0);
	CHECK(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);

	CHECK_EQ(iod_agent_prober_new(4, &p, &e), 0);
	/* the hung one first: run serially, it would hold the others for 3 s */
	CHECK_EQ(iod_agent_prober_submit(p, 0, "slow-0", 11, &hung, "127.0.0.1", 0, NULL), 0);
	CHECK_EQ(iod_agent_prober_submit(p, 1, "fast-0", 12, &quick, "127.0.0.1", 0, NULL), 0);
	CHECK_EQ(iod_agent_prober_submit(p, 2, "fast-1", 13, &tcp, "127.0.0.1", ntohs(sa.sin_port),
	                                 NULL),
	         0);
	/* both quick verdicts come before the hung one's (order, not timing) */
	bool seen[2] = {false, false};
	for (int k = 0; k < 2; k++) {
		CHECK_EQ(next_result(p, &r), 0);
		CHECK_MSG(strcmp(r.name, "slow-0") != 0, "the hung check's verdict came first: %s",
		          r.detail);
		CHECK(r.ok);
		if (!strcmp(r.name, "fast-0")) {
			CHECK_EQ(r.slot, 1);
			CHECK_U64(r.generation, 12);
			seen[0] = true;
		} else if (!strcmp(r.name, "fast-1")) {
			CHECK_EQ(r.slot, 2);
			CHECK_STR(r.detail, "tcp connect ok");
			seen[1] = true;
		}
	}
	CHECK(seen[0] && seen[1]);
	/* the hung one ends at its timeout, as a failure that says so */
	CHECK_EQ(next_result(p, &r), 0);
	CHECK_STR(r.name, "slow-0");
	CHECK(!r.ok);
	CHECK_CONTAINS(r.detail, "timed out");
	CHECK_EQ(iod_agent_prober_take(p, &r), -EAGAIN);
	iod_agent_prober_free(p);
	close(lfd);
}

/* The value of var in r's environment, or "". */
static const char *env_of(const struct iod_agent_replica *r, const char *var)
{
	size_t l = strlen(var);
	for (uint32_t i = 0; i < r->envc; i++) {
		const char *kv = iod_agent_strv_at(r->env_buf, sizeof(r->env_buf), r->envc, i);
		if (kv && !strncmp(kv, var, l) && kv[l] == '=')
			return kv + l + 1;
	}
	return "";
}

/* This node's replicas are reached at their own addresses: their node
 * address in IOD_ADDR / IOD_PEERS / IOD_DEP_* becomes the netns one; other
 * nodes' entries and unrelated variables stay as they are. */
TEST(env_localize_points_at_this_nodes_replica_addresses)
{
	struct iod_agent_ipam *m = calloc(1, sizeof(*m));
	struct iod_agent_replica *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	char v[256];
	CHECK(m && r);
	CHECK_EQ(iod_agent_ipam_init(m, "10.213.0.0/24", &e), 0);
	CHECK_EQ(iod_agent_ipam_alloc(m, "ps-0", NULL, NULL, &e), 0); /* .2 */
	CHECK_EQ(iod_agent_ipam_alloc(m, "w-0", NULL, NULL, &e), 0);  /* .3 */
	unsigned p0 = iod_agent_replica_port("ps-0"), p1 = iod_agent_replica_port("ps-1"),
	         pw = iod_agent_replica_port("w-0");
	snprintf(r->name, sizeof(r->name), "w-0");
	snprintf(v, sizeof(v), "127.0.0.1:%u", pw);
	iod_agent_replica_add_env(r, "IOD_ADDR", v);
	snprintf(v, sizeof(v), "127.0.0.1:%u,10.0.0.9:%u", p0, p1);
	iod_agent_replica_add_env(r, "IOD_DEP_PS", v);
	iod_agent_replica_add_env(r, "OTHER", v);
	snprintf(v, sizeof(v), "127.0.0.1:%u", pw);
	iod_agent_replica_add_env(r, "IOD_PEERS", v);
	CHECK_EQ(iod_agent_env_localize(r, "127.0.0.1", m), 0);
	CHECK_EQ(r->envc, 4);
	snprintf(v, sizeof(v), "10.213.0.3:%u", pw);
	CHECK_STR(env_of(r, "IOD_ADDR"), v);
	CHECK_STR(env_of(r, "IOD_PEERS"), v);
	snprintf(v, sizeof(v), "10.213.0.2:%u,10.0.0.9:%u", p0, p1);
	CHECK_STR(env_of(r, "IOD_DEP_PS"), v);
	snprintf(v, sizeof(v), "127.0.0.1:%u,10.0.0.9:%u", p0, p1);
	CHECK_STR(env_of(r, "OTHER"), v);
	free(m);
	free(r);
}

/* One 1,400-byte UDP frame from src to dst into the switch's host port. */
struct qbuf {
	uint8_t mem[128 + 2048]; /* headroom + frame */
	struct iod_pkt pkt;      /* describes mem */
};
static void qos_frame(struct qbuf *b, uint32_t src, uint32_t dst)
{
	struct iod_net_pkt_spec s = {0};
	iod_agent_overlay_mac(dst, false, s.dst_mac);
	iod_agent_overlay_mac(src, false, s.src_mac);
	s.t.family = IOD_NET_AF_V4;
	s.t.proto = IOD_NET_PROTO_UDP;
	s.t.src.v4 = src;
	s.t.dst.v4 = dst;
	s.t.sport = 5001;
	s.t.dport = 5201;
	s.payload_bytes = 1400 - 42;
	memset(&b->pkt, 0, sizeof(b->pkt));
	b->pkt.data = b->mem + 128;
	b->pkt.headroom = 128;
	b->pkt.len = (uint32_t)iod_net_pkt_build(&s, b->pkt.data, 2048);
	b->pkt.port_in = IOD_DP_PORT_HOST;
}

/* resources.network.bandwidth, end to end on the agent's side: the Replica's
 * nic_bw_bps (what the scheduler counted on the NIC, bits/s) becomes one
 * "egress" entry for the replica's address with an RFC 2698 meter at the
 * same rate in bytes/s (PIR = CIR, buckets 300 ms of it); a replica without
 * one is not metered. Offered 200 Mbit/s for 2 s, the metered replica gets
 * its 100 Mbit/s (plus the bucket, once), the other everything. */
TEST(overlay_bandwidth_is_the_replicas_egress_meter)
{
	json_t *nodes =
	    json_pack("{s:[{s:s,s:{s:s}},{s:s,s:{s:s}}]}", "items", "name", "node-1", "value",
	              "addr", "10.254.1.1", "name", "node-2", "value", "addr", "10.254.2.1");
	json_t *svcs = json_pack("{s:[{s:s,s:{}}]}", "items", "name", "a", "value");
	json_t *reps =
	    json_pack("{s:[{s:s,s:{s:s,s:s,s:s,s:I}},{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}",
	              "items", "name", "a-0", "value", "service", "a", "node", "node-1", "addr",
	              "10.200.1.2", "nic_bw_bps", (json_int_t)100000000, "name", "a-1", "value",
	              "service", "a", "node", "node-2", "addr", "10.200.2.2", "name", "a-2",
	              "value", "service", "a", "node", "node-1", "addr", "10.200.1.3");
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_flow_dp dp;
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && t && c);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, NULL, t), 0);
	CHECK_EQ(t->n, 3);
	CHECK_U64(t->eps[0].egress_bps, 100000000);
	CHECK_U64(t->eps[1].egress_bps, 0);

	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	struct iod_agent_overlay_local loc[2] = {{"a-0", ip("10.200.1.2")},
	                                         {"a-2", ip("10.200.1.3")}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 2, c, &e) == 0, "%s", e.msg);
	CHECK_EQ(c->networks_n, 2); /* default, host */
	CHECK_STR(c->networks[0].name, "default");
	CHECK_U64(c->networks[0].endpoints[0].egress_bytes_per_s, 12500000);
	CHECK_U64(c->networks[0].endpoints[1].egress_bytes_per_s, 0);
	CHECK_U64(c->networks[0].endpoints[2].egress_bytes_per_s, 0); /* remote a-1 */

	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	int eg = iod_flow_pipe_find(dp.pl, "egress"), q = iod_flow_pipe_find(dp.pl, "qos");
	CHECK(eg >= 0 && q >= 0);
	CHECK_EQ(iod_flow_pipe_cfg_get(dp.pl, (uint32_t)q)->fwd.pipe, (uint32_t)eg);
	uint32_t pos = 0, id, entries = 0;
	const struct iod_flow_entry_cfg *ec;
	while (iod_flow_entry_next(dp.pl, (uint32_t)eg, &pos, &id, &ec)) {
		entries++;
		CHECK_EQ(ec->match.src.v4, ip("10.200.1.2"));
		CHECK_EQ(ec->match.in_port, IOD_DP_PORT_HOST);
		CHECK(ec->monitor.flags & IOD_FLOW_MON_METER);
		CHECK(ec->monitor.meter.two_rate);
		CHECK_U64(ec->monitor.meter.cir_bytes_per_s, 12500000);
		CHECK_U64(ec->monitor.meter.pir_bytes_per_s, 12500000);
		CHECK_U64(ec->monitor.meter.cbs_bytes, 3750000); /* 300 ms */
	}
	CHECK_EQ(entries, 1); /* once, though a-0 is in two networks */

	/* 200 Mbit/s offered by each local replica to the remote one for 2 s */
	struct qbuf *b = calloc(1, sizeof(*b));
	CHECK(b);
	uint64_t sent_bytes[2] = {0, 0}, passed_bytes[2] = {0, 0};
	const uint64_t gap_ns = 1400ull * 8 * 1000000000 / 200000000; /* 56 us */
	for (uint64_t now = 1000000; now < 2001000000ull; now += gap_ns)
		for (int r = 0; r < 2; r++) {
			qos_frame(b, loc[r].ip, ip("10.200.2.2"));
			struct iod_pkt *pp = &b->pkt;
			sent_bytes[r] += b->pkt.len;
			iod_flow_burst(dp.pl, 0, &pp, 1, now);
			if (b->pkt.verdict == IOD_FLOW_V_PORT) {
				CHECK_EQ(b->pkt.port_out, IOD_DP_PORT_FABRIC);
				passed_bytes[r] += b->pkt.len - IOD_NET_VXLAN_OVERHEAD;
			}
		}
	CHECK(sent_bytes[0] > 49000000); /* 200 Mbit/s for 2 s */
	/* 2 s at 12.5 MB/s plus the 3.75 MB bucket, within a frame */
	CHECK_MSG(passed_bytes[0] >= 28750000 - 2800 && passed_bytes[0] <= 28750000 + 1400, "%llu",
	          (unsigned long long)passed_bytes[0]);
	CHECK_U64(passed_bytes[1], sent_bytes[1]);
	free(b);
	iod_flow_dp_destroy(&dp);
	free(c);
	free(t);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

static struct iod_flow_key drop_key(uint32_t src, uint32_t dst, uint8_t proto, uint16_t sport,
                                    uint8_t flags)
{
	struct iod_flow_key k;
	memset(&k, 0, sizeof(k));
	k.family = IOD_NET_AF_V4;
	k.eth_type = IOD_NET_ETH_P_IPV4;
	k.proto = proto;
	k.src.v4 = src;
	k.dst.v4 = dst;
	k.sport = sport;
	k.dport = 7777;
	k.tcp_flags = flags;
	return k;
}

/* Drops with their rule (drops.c): a SYN from tenant other's replica to
 * tenant default's address is recorded with tenant-other/deny-other-tenants
 * and both names; its repeat within 1 s counts on the record, a later one
 * is a new record; a non-SYN TCP packet and a drop to a routable address
 * are counted, not recorded; the host's own underlay frames are no drops;
 * the ring keeps the newest IOD_AGENT_DROPS_MAX; admitted sessions stay
 * counted across a rebuilt pipeline; the Prometheus text names rule and
 * verdict. */
/* network.adaptive_routing on the overlay: the node's policy (the cluster
 * config's, minrtt by default) turns on net/ar for each tenant network (not
 * the host's, which never leaves the node) with the data plane's defaults;
 * the cores probe the VTEPs of the Node objects behind the remote replicas,
 * so a node that joins is a new probe target (a new core) while a rebuild
 * that changes nothing else keeps the running one (its pins); ecmp runs no
 * core, as before. */
TEST(overlay_adaptive_routing_follows_policy_and_peer_vteps)
{
	json_t *nodes =
	    json_pack("{s:[{s:s,s:{s:s}},{s:s,s:{s:s}},{s:s,s:{s:s}}]}", "items", "name", "node-1",
	              "value", "addr", "10.254.1.1", "name", "node-2", "value", "addr",
	              "10.254.2.1", "name", "node-3", "value", "addr", "10.254.1.2");
	json_t *svcs = json_pack("{s:[{s:s,s:{}}]}", "items", "name", "a", "value");
	json_t *reps =
	    json_pack("{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}", "items", "name", "a-0",
	              "value", "service", "a", "node", "node-1", "addr", "10.200.1.2", "name",
	              "a-1", "value", "service", "a", "node", "node-2", "addr", "10.200.2.2");
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && t && c);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, NULL, t), 0);
	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16,
	                                    .ar_policy = IOD_AR_MINRTT};
	struct iod_agent_overlay_local loc[1] = {{"a-0", ip("10.200.1.2")}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 1, c, &e) == 0, "%s", e.msg);
	CHECK_EQ(c->networks_n, 2);
	CHECK(c->networks[0].ar_enabled);
	CHECK_EQ(c->networks[0].ar.policy, IOD_AR_MINRTT);
	CHECK_EQ(c->networks[0].ar.paths, 4);
	CHECK_U64(c->networks[0].ar.probe_interval_ns, 20 * IOD_NS_PER_MS);
	CHECK(!c->networks[1].ar_enabled); /* host */
	struct iod_flow_dp_ar *ar = NULL;
	CHECK_MSG(iod_flow_dp_ar_create(c, &ar, &e) == 0, "%s", e.msg);
	CHECK(ar != NULL);
	CHECK_EQ(iod_flow_dp_ar_peers(ar), 1); /* node-2 */
	CHECK(iod_flow_dp_ar_matches(ar, c));
	/* the same table again (an Endpoint's health, say): the core stays */
	CHECK_EQ(iod_agent_overlay_dp_config(&nd, t, loc, 1, c, &e), 0);
	CHECK(iod_flow_dp_ar_matches(ar, c));
	/* node-3 joins with a replica of the tenant: a new probe target */
	json_decref(reps);
	reps = json_pack("{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}",
	                 "items", "name", "a-0", "value", "service", "a", "node", "node-1", "addr",
	                 "10.200.1.2", "name", "a-1", "value", "service", "a", "node", "node-2",
	                 "addr", "10.200.2.2", "name", "a-2", "value", "service", "a", "node",
	                 "node-3", "addr", "10.200.3.2");
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, NULL, t), 0);
	CHECK_EQ(iod_agent_overlay_dp_config(&nd, t, loc, 1, c, &e), 0);
	CHECK(!iod_flow_dp_ar_matches(ar, c));
	iod_flow_dp_ar_destroy(ar);
	CHECK_EQ(iod_flow_dp_ar_create(c, &ar, &e), 0);
	CHECK_EQ(iod_flow_dp_ar_peers(ar), 2);
	/* another policy: another core */
	nd.ar_policy = IOD_AR_FLOWLET;
	CHECK_EQ(iod_agent_overlay_dp_config(&nd, t, loc, 1, c, &e), 0);
	CHECK_EQ(c->networks[0].ar.policy, IOD_AR_FLOWLET);
	CHECK(!iod_flow_dp_ar_matches(ar, c));
	iod_flow_dp_ar_destroy(ar);
	/* ecmp: no core, the hash port as before */
	nd.ar_policy = IOD_AR_ECMP;
	CHECK_EQ(iod_agent_overlay_dp_config(&nd, t, loc, 1, c, &e), 0);
	CHECK(!c->networks[0].ar_enabled);
	CHECK_EQ(iod_flow_dp_ar_create(c, &ar, &e), 0);
	CHECK(ar == NULL);
	CHECK(iod_flow_dp_ar_matches(NULL, c));
	CHECK_EQ(iod_flow_dp_ar_peers(NULL), 0);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
	free(t);
	free(c);
}

TEST(drops_are_recorded_with_their_rule)
{
	json_t *nodes =
	    json_pack("{s:[{s:s,s:{s:s}},{s:s,s:{s:s}}]}", "items", "name", "node-1", "value",
	              "addr", "10.254.1.1", "name", "node-2", "value", "addr", "10.254.2.1");
	json_t *svcs = json_pack("{s:[{s:s,s:{}},{s:s,s:{s:s}}]}", "items", "name", "a", "value",
	                         "name", "x", "value", "tenant", "other");
	json_t *reps = json_pack(
	    "{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}", "items",
	    "name", "a-0", "value", "service", "a", "node", "node-1", "addr", "10.200.1.2", "name",
	    "a-1", "value", "service", "a", "node", "node-2", "addr", "10.200.2.2", "name", "x-0",
	    "value", "service", "x", "node", "node-1", "addr", "10.200.1.3");
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_agent_drops *d = calloc(1, sizeof(*d));
	struct iod_err e = {0};
	CHECK(nodes && svcs && reps && t && c && d);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, NULL, t), 0);
	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = ip("10.200.1.1"),
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	struct iod_agent_overlay_local loc[2] = {{"a-0", ip("10.200.1.2")},
	                                         {"x-0", ip("10.200.1.3")}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 2, c, &e) == 0, "%s", e.msg);

	uint32_t x0 = ip("10.200.1.3"), a0 = ip("10.200.1.2"), a1 = ip("10.200.2.2");
	struct iod_flow_key syn = drop_key(x0, a1, IOD_NET_PROTO_TCP, 40000, IOD_NET_TCP_SYN);
	iod_agent_drops_note(d, c, t, &syn, false, 10000);
	CHECK_EQ(d->n, 1);
	CHECK_STR(d->ring[0].rule, "tenant-other/deny-other-tenants");
	CHECK_STR(d->ring[0].src_name, "x-0");
	CHECK_STR(d->ring[0].dst_name, "a-1");
	CHECK_STR(d->ring[0].tenant, "other");
	CHECK_STR(d->ring[0].why, "10.200.2.2 is tenant default's (a-1), not other's");
	iod_agent_drops_note(d, c, t, &syn, false, 10500); /* a retransmit */
	CHECK_EQ(d->n, 1);
	CHECK_EQ(d->ring[0].count, 2);
	iod_agent_drops_note(d, c, t, &syn, false, 12000); /* past 1 s: a new record */
	CHECK_EQ(d->n, 2);
	struct iod_flow_key ack = drop_key(x0, a1, IOD_NET_PROTO_TCP, 40001, IOD_NET_TCP_ACK);
	iod_agent_drops_note(d, c, t, &ack, false, 12001);
	struct iod_flow_key routed = drop_key(a0, a1, IOD_NET_PROTO_TCP, 40002, IOD_NET_TCP_SYN);
	iod_agent_drops_note(d, c, t, &routed, false, 12002);
	CHECK_EQ(d->n, 2);
	CHECK_U64(d->dropped, 5);
	struct iod_flow_key under =
	    drop_key(ip("10.254.0.1"), ip("10.254.1.1"), IOD_NET_PROTO_TCP, 7400, IOD_NET_TCP_ACK);
	iod_agent_drops_note(d, c, t, &under, true, 12003);
	CHECK_U64(d->dropped, 5); /* the host's own traffic: not a drop */
	CHECK_EQ(d->rules_n, 2);
	CHECK_STR(d->rules[0].rule, "tenant-other/deny-other-tenants");
	CHECK_U64(d->rules[0].dropped, 4);
	CHECK_STR(d->rules[1].rule, "tenant-default/other");
	CHECK_U64(d->rules[1].dropped, 1);

	iod_agent_drops_admitted(d, "default", 5, true);
	iod_agent_drops_admitted(d, "default", 7, false);
	iod_agent_drops_admitted(d, "default", 2, true); /* rebuilt: its count starts again */
	CHECK_STR(d->rules[2].rule, "tenant-default/allow-same-tenant");
	CHECK_U64(d->rules[2].forwarded, 9);

	for (uint32_t i = 0; i < 300; i++) {
		struct iod_flow_key u =
		    drop_key(x0, a1, IOD_NET_PROTO_UDP, (uint16_t)(1000 + i), 0);
		iod_agent_drops_note(d, c, t, &u, false, 20000 + i);
	}
	CHECK_EQ(d->n, IOD_AGENT_DROPS_MAX);
	CHECK_U64(d->seq, 302);
	json_t *j = iod_agent_drops_json(d, "node-1");
	json_t *recs = json_object_get(j, "records");
	CHECK_EQ(json_array_size(recs), IOD_AGENT_DROPS_MAX);
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(recs, 0), "seq")),
	         302 - IOD_AGENT_DROPS_MAX + 1); /* oldest kept first */
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(recs, 0), "sport")),
	         1000 + 302 - IOD_AGENT_DROPS_MAX + 1 - 3);
	json_decref(j);
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_agent_drops_prom(d, &b), 0);
	CHECK(strstr(b.data, "# TYPE iod_dp_sg_verdicts_total counter\n"));
	CHECK(strstr(b.data, "iod_dp_sg_verdicts_total{rule=\"tenant-other/deny-other-tenants\","
	                     "verdict=\"dropped\"} 304\n"));
	CHECK(strstr(b.data, "iod_dp_sg_verdicts_total{rule=\"tenant-default/allow-same-tenant\","
	                     "verdict=\"forwarded\"} 9\n"));
	iod_buf_free(&b);
	free(d);
	free(c);
	free(t);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

/* One TCP frame src:sport -> dst:dport with flags into the switch's host port. */
static void tcp_frame(struct qbuf *b, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport,
                      uint8_t flags)
{
	struct iod_net_pkt_spec s = {0};
	iod_agent_overlay_mac(dst, false, s.dst_mac);
	iod_agent_overlay_mac(src, false, s.src_mac);
	s.t.family = IOD_NET_AF_V4;
	s.t.proto = IOD_NET_PROTO_TCP;
	s.t.src.v4 = src;
	s.t.dst.v4 = dst;
	s.t.sport = sport;
	s.t.dport = dport;
	s.tcp_flags = flags;
	memset(&b->pkt, 0, sizeof(b->pkt));
	b->pkt.data = b->mem + 128;
	b->pkt.headroom = 128;
	b->pkt.len = (uint32_t)iod_net_pkt_build(&s, b->pkt.data, 2048);
	b->pkt.port_in = IOD_DP_PORT_HOST;
}

/* The verdict of one frame through dp, checked against the reference
 * (iod_flow_dp_acl_verdict) for a new session; *acl: the acl index the
 * reference names (-1 admitted). */
static int sg_acl;
static void sg_send(struct iod_flow_dp *dp, const struct iod_flow_dp_config *c, struct qbuf *b,
                    uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t flags,
                    bool want_pass, uint64_t now)
{
	tcp_frame(b, src, dst, sport, dport, flags);
	struct iod_pkt *pp = &b->pkt;
	iod_flow_burst(dp->pl, 0, &pp, 1, now);
	CHECK_MSG((b->pkt.verdict == IOD_FLOW_V_PORT) == want_pass, "%u -> %u:%u: verdict %d",
	          src & 255, dst & 255, dport, b->pkt.verdict);
	struct iod_flow_key k = drop_key(src, dst, IOD_NET_PROTO_TCP, sport, flags);
	k.dport = dport;
	int a = iod_flow_dp_acl_verdict(c, &k, true);
	sg_acl = a;
	if (flags == IOD_NET_TCP_SYN)
		CHECK_MSG((a < 0) == want_pass, "reference disagrees for %u -> %u:%u (acl %d)",
		          src & 255, dst & 255, dport, a);
}

/* Security groups (sg.c + src/flow/dp.c): NetPolicy objects from the watch
 * become endpoint-bound entries of the local replicas' groups: per member
 * and direction an allow of the node's host stack, the rules in order (a
 * peer service: one entry per replica of it in the group's tenant; another
 * tenant's service of that name gives none), then the group's default
 * deny; an object that does not check is skipped. Through the pipeline: a
 * session the client's egress rule and the server's ingress rule admit
 * passes; a port no ingress rule names is dropped (server-in/default-deny),
 * one a deny rule names is dropped by it (server-in/no-ssh), one the
 * client's egress does not allow is dropped at the client
 * (client-out/default-deny); the node's host stack reaches a guarded
 * replica; replies of admitted sessions pass (conntrack) though no rule
 * would admit them as new; the drops carry the rule's name. */
TEST(security_groups_compile_into_sg_pipes)
{
	json_t *nodes =
	    json_pack("{s:[{s:s,s:{s:s}},{s:s,s:{s:s}}]}", "items", "name", "node-1", "value",
	              "addr", "10.254.1.1", "name", "node-2", "value", "addr", "10.254.2.1");
	json_t *svcs = json_pack("{s:[{s:s,s:{}},{s:s,s:{}},{s:s,s:{}},{s:s,s:{s:s}}]}", "items",
	                         "name", "server", "value", "name", "client", "value", "name",
	                         "web", "value", "name", "intruder", "value", "tenant", "other");
	json_t *reps = json_pack(
	    "{s:[{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}},"
	    "{s:s,s:{s:s,s:s,s:s}},{s:s,s:{s:s,s:s,s:s}}]}",
	    "items", "name", "server-0", "value", "service", "server", "node", "node-1", "addr",
	    "10.200.1.2", "name", "client-0", "value", "service", "client", "node", "node-2",
	    "addr", "10.200.2.2", "name", "client-1", "value", "service", "client", "node",
	    "node-1", "addr", "10.200.1.3", "name", "web-0", "value", "service", "web", "node",
	    "node-1", "addr", "10.200.1.4", "name", "intruder-0", "value", "service", "intruder",
	    "node", "node-2", "addr", "10.200.2.3");
	json_error_t je;
	json_t *nps = json_loads(
	    "{\"items\": ["
	    "{\"name\": \"server-in\", \"value\": {\"service\": \"server\", \"ingress\": ["
	    " {\"name\": \"app\", \"service\": \"client\", \"protocol\": \"tcp\", \"ports\": 7777},"
	    " {\"name\": \"x\", \"service\": \"intruder\"},"
	    " {\"name\": \"no-ssh\", \"action\": \"deny\", \"protocol\": \"tcp\", \"ports\": "
	    "\"22\"},"
	    " {\"name\": \"ops\", \"cidr\": \"10.9.3.0/16\", \"protocol\": \"udp\","
	    "  \"ports\": \"5000-5010\"}]}},"
	    "{\"name\": \"client-out\", \"value\": {\"service\": \"client\", \"egress\": ["
	    " {\"name\": \"to-server\", \"service\": \"server\", \"protocol\": \"tcp\","
	    "  \"ports\": \"7777-7778\"}]}},"
	    "{\"name\": \"bad\", \"value\": {\"service\": \"server\", \"ingress\": ["
	    " {\"name\": \"p\", \"protocol\": \"icmp\", \"ports\": 80}]}}]}",
	    0, &je);
	struct iod_agent_overlay_table *t = calloc(1, sizeof(*t));
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_agent_drops *d = calloc(1, sizeof(*d));
	struct qbuf *b = calloc(1, sizeof(*b));
	struct iod_flow_dp dp;
	struct iod_err e = {0};
	CHECK_MSG(nps != NULL, "%s", je.text);
	CHECK(nodes && svcs && reps && t && c && d && b);
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, nps, t), 0);
	CHECK_EQ(iod_agent_sg_from_state(nps, t, &e), -EINVAL); /* "bad": skipped, named */
	CHECK(strstr(e.msg, "netpolicy/bad"));
	CHECK_EQ(t->sgs_n, 2);
	CHECK_STR(t->sgs[0].name, "client-out"); /* name order */
	CHECK_STR(t->sgs[1].name, "server-in");
	CHECK(t->sgs[1].ingress && !t->sgs[1].egress);
	CHECK_STR(t->sg_rules[t->sgs[1].deny_rule].name, "server-in/default-deny");

	uint32_t gw = ip("10.200.1.1"), srv = ip("10.200.1.2"), c0 = ip("10.200.2.2"),
	         c1 = ip("10.200.1.3"), web = ip("10.200.1.4");
	struct iod_agent_overlay_node nd = {.name = "node-1",
	                                    .vtep_ip = ip("10.254.1.1"),
	                                    .gateway = gw,
	                                    .overlay_net = ip("10.200.0.0"),
	                                    .overlay_prefix = 16};
	struct iod_agent_overlay_local loc[3] = {
	    {"server-0", srv}, {"client-1", c1}, {"web-0", web}};
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	/* client-out for client-1: host, to-server (server-0), default deny;
	 * server-in for server-0: host, app (client-0, client-1), no-ssh, ops,
	 * default deny; intruder is tenant other's: no entry */
	CHECK_EQ(c->acls_n, 9);
	const struct iod_flow_dp_acl *a = c->acls;
	CHECK(a[0].egress && a[0].member_ip == c1 && !a[0].deny && a[0].peer_ip == gw &&
	      a[0].peer_prefix_len == 32 && a[0].rule == IOD_AGENT_SG_RULE_NONE);
	CHECK(a[1].egress && a[1].peer_ip == srv && a[1].proto == IOD_NET_PROTO_TCP &&
	      a[1].port_min == 7777 && a[1].port_max == 7778);
	CHECK_STR(t->sg_rules[a[1].rule].name, "client-out/to-server");
	CHECK(a[2].egress && a[2].deny && a[2].peer_prefix_len == 0);
	CHECK_STR(t->sg_rules[a[2].rule].name, "client-out/default-deny");
	CHECK(!a[3].egress && a[3].member_ip == srv && a[3].peer_ip == gw && !a[3].deny);
	CHECK(a[4].peer_ip == c0 && a[5].peer_ip == c1 && a[4].port_min == 7777 &&
	      a[4].port_max == 7777);
	CHECK_STR(t->sg_rules[a[4].rule].name, "server-in/app");
	CHECK(a[6].deny && a[6].port_min == 22 && a[6].port_max == 22);
	CHECK_STR(t->sg_rules[a[6].rule].name, "server-in/no-ssh");
	CHECK(a[7].peer_ip == ip("10.9.0.0") && a[7].peer_prefix_len == 16 &&
	      a[7].proto == IOD_NET_PROTO_UDP && a[7].port_min == 5000 && a[7].port_max == 5010);
	CHECK(a[8].deny && !a[8].egress && a[8].member_ip == srv);

	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	CHECK(dp.pipe_sgin >= 0);
	/* the pipes' entries: acl i at IOD_DP_ACL_PRIO + i, egress in sg, ingress in sgin */
	const struct iod_flow_entry_cfg *ec;
	uint32_t pos = 0, id, in_n = 0;
	while (iod_flow_entry_next(dp.pl, (uint32_t)dp.pipe_sgin, &pos, &id, &ec)) {
		uint32_t i = ec->priority - IOD_DP_ACL_PRIO;
		CHECK(i < c->acls_n && !c->acls[i].egress);
		CHECK_EQ(ec->match.dst.v4, c->acls[i].member_ip);
		CHECK_EQ(ec->fwd.type, c->acls[i].deny ? IOD_FLOW_FWD_DROP : IOD_FLOW_FWD_PIPE);
		in_n++;
	}
	CHECK_EQ(in_n, 6);

	uint64_t now = 1000000;
	/* client-1 -> server-0:7777: egress to-server, ingress app */
	sg_send(&dp, c, b, c1, srv, 40000, 7777, IOD_NET_TCP_SYN, true, now++);
	CHECK_EQ(sg_acl, -1);
	/* its reply passes (established), though server-0 -> client-1:40000
	 * is no rule's */
	sg_send(&dp, c, b, srv, c1, 7777, 40000, IOD_NET_TCP_SYN | IOD_NET_TCP_ACK, true, now++);
	/* client-1 -> server-0:7778: egress admits, no ingress rule does */
	sg_send(&dp, c, b, c1, srv, 40001, 7778, IOD_NET_TCP_SYN, false, now++);
	int r = sg_acl;
	CHECK(r >= 0 && !strcmp(t->sg_rules[c->acls[r].rule].name, "server-in/default-deny"));
	/* client-1 -> server-0:22: its own egress group stops it first */
	sg_send(&dp, c, b, c1, srv, 40002, 22, IOD_NET_TCP_SYN, false, now++);
	r = sg_acl;
	CHECK(r >= 0 && !strcmp(t->sg_rules[c->acls[r].rule].name, "client-out/default-deny"));
	/* client-1 -> web-0 (no group): only client-1's egress group stops it */
	sg_send(&dp, c, b, c1, web, 40008, 80, IOD_NET_TCP_SYN, false, now++);
	r = sg_acl;
	CHECK(r >= 0 && !strcmp(t->sg_rules[c->acls[r].rule].name, "client-out/default-deny"));
	/* web-0 (no group) -> server-0:22: the deny rule; :7777: not a client */
	sg_send(&dp, c, b, web, srv, 40003, 22, IOD_NET_TCP_SYN, false, now++);
	r = sg_acl;
	CHECK(r >= 0 && !strcmp(t->sg_rules[c->acls[r].rule].name, "server-in/no-ssh"));
	sg_send(&dp, c, b, web, srv, 40004, 7777, IOD_NET_TCP_SYN, false, now++);
	r = sg_acl;
	CHECK(r >= 0 && !strcmp(t->sg_rules[c->acls[r].rule].name, "server-in/default-deny"));
	/* the node's host stack (health checks) reaches the guarded server */
	sg_send(&dp, c, b, gw, srv, 40005, 9999, IOD_NET_TCP_SYN, true, now++);
	/* server-0 (no egress group) opens to client-1 (no ingress group) */
	sg_send(&dp, c, b, srv, c1, 40006, 1234, IOD_NET_TCP_SYN, true, now++);
	CHECK_EQ(sg_acl, -1);

	/* the drop records name the rules */
	struct iod_flow_key k = drop_key(web, srv, IOD_NET_PROTO_TCP, 40003, IOD_NET_TCP_SYN);
	k.dport = 22;
	iod_agent_drops_note(d, c, t, &k, false, 10000);
	k = drop_key(c1, srv, IOD_NET_PROTO_TCP, 40001, IOD_NET_TCP_SYN);
	k.dport = 7778;
	iod_agent_drops_note(d, c, t, &k, false, 10001);
	CHECK_EQ(d->n, 2);
	CHECK_STR(d->ring[0].rule, "server-in/no-ssh");
	CHECK_STR(d->ring[0].why, "at 10.200.1.2:22: a deny rule of its security group");
	CHECK_STR(d->ring[1].rule, "server-in/default-deny");
	CHECK_STR(d->ring[1].dst_name, "server-0");
	iod_agent_drops_admitted_rule(d, "server-in/app", 0, true);
	CHECK_EQ(d->rules_n, 2); /* a rule that admitted nothing is not counted yet */
	iod_agent_drops_admitted_rule(d, "server-in/app", 1, false);
	CHECK_STR(d->rules[2].rule, "server-in/app");
	CHECK_U64(d->rules[2].forwarded, 1);

	/* without the objects: no entries, no sgin pipe (the pipeline as before) */
	CHECK_EQ(iod_agent_overlay_table_from_state(nodes, svcs, reps, NULL, t), 0);
	CHECK_MSG(iod_agent_overlay_dp_config(&nd, t, loc, 3, c, &e) == 0, "%s", e.msg);
	CHECK_EQ(c->acls_n, 0);
	iod_flow_dp_destroy(&dp);
	CHECK_MSG(iod_flow_dp_build(c, 1, &dp, &e) == 0, "%s", e.msg);
	CHECK_EQ(dp.pipe_sgin, -1);
	sg_send(&dp, c, b, web, srv, 40007, 22, IOD_NET_TCP_SYN, true, now++);
	iod_flow_dp_destroy(&dp);
	free(b);
	free(d);
	free(c);
	free(t);
	json_decref(nps);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(reps);
}

/* A frame anti-spoofing refused (vswitch.c's on_spoof): counted on
 * switch/anti-spoofing, recorded with the replica, its bound address, the
 * reason and the forged source; a flood is one record with a count, and it
 * shows in drops.json and the verdict counters as other drops do. */
TEST(drops_record_spoofed_frames)
{
	struct iod_agent_drops *d = calloc(1, sizeof(*d));
	CHECK(d);
	uint32_t a0 = ip("10.200.1.2"), a1 = ip("10.200.1.3"), b0 = ip("10.200.2.2");
	struct iod_flow_key k = drop_key(a1, b0, IOD_NET_PROTO_TCP, 40000, IOD_NET_TCP_SYN);
	iod_agent_drops_spoof(d, "a-0", a0, IOD_NET_SPOOF_SRC_IP, &k, 10000);
	iod_agent_drops_spoof(d, "a-0", a0, IOD_NET_SPOOF_SRC_IP, &k, 10100);
	iod_agent_drops_spoof(d, "a-0", a0, IOD_NET_SPOOF_ARP, NULL, 10200);
	CHECK_U64(d->dropped, 3);
	CHECK_EQ(d->n, 2);
	CHECK_STR(d->ring[0].rule, "switch/anti-spoofing");
	CHECK_STR(d->ring[0].src_name, "a-0");
	CHECK_EQ(d->ring[0].count, 2);
	CHECK_EQ(d->ring[0].src, a1);
	CHECK_STR(d->ring[0].why,
	          "source-ip: its port is bound to 10.200.1.2; sent from 10.200.1.3");
	CHECK_STR(d->ring[1].why, "arp-sender: its port is bound to 10.200.1.2; sent from ?");
	CHECK_EQ(d->rules_n, 1);
	CHECK_U64(d->rules[0].dropped, 3);
	json_t *j = iod_agent_drops_json(d, "node-1");
	CHECK_STR(json_string_value(
	              json_object_get(json_array_get(json_object_get(j, "records"), 0), "rule")),
	          "switch/anti-spoofing");
	json_decref(j);
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_agent_drops_prom(d, &b), 0);
	CHECK(strstr(b.data, "iod_dp_sg_verdicts_total{rule=\"switch/anti-spoofing\","
	                     "verdict=\"dropped\"} 3\n"));
	iod_buf_free(&b);
	free(d);
}

/* Whether every thread of this process but the calling one blocks sig
 * (/proc/self/task/TID/status, SigBlk); -1 when there is none. */
static int others_block(int sig)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int seen = 0, all = 1;
	while (d && (de = readdir(d))) {
		char path[300], line[256];
		if (de->d_name[0] == '.' || atoi(de->d_name) == (int)gettid())
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", de->d_name);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "SigBlk:", 7)) {
				unsigned long long m = strtoull(line + 7, NULL, 16);
				seen = 1;
				all &= (int)((m >> (sig - 1)) & 1);
			}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return seen ? all : -1;
}

/* The node's virtual switch's thread takes none of the agent's signals:
 * the agent reads SIGCHLD (its replicas' exits) from a signalfd, and a
 * thread that left it unblocked took it now and then (SIGCHLD's default
 * discarding it), so an exit was never reaped and the replica stayed
 * "stopping" (move_netns.sh: a moved replica placed back on a node never
 * started there). Root, in a network namespace of its own (lo for both
 * the VTEP and the host port); 0 = blocked, 1 = not, 2 = no switch. */
TEST(vswitch_thread_takes_no_signals)
{
	if (geteuid())
		SKIP("root: a network namespace of its own");
	pid_t pid = fork();
	if (pid == 0) {
		static struct iod_agent_config c;
		static struct iod_agent_netns n;
		struct iod_agent_vswitch *v = NULL;
		struct iod_err e = {0};
		struct ifreq r = {0};
		if (unshare(CLONE_NEWNET))
			_exit(2);
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		snprintf(r.ifr_name, sizeof(r.ifr_name), "lo");
		r.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
		if (fd < 0 || ioctl(fd, SIOCSIFFLAGS, &r))
			_exit(2);
		close(fd);
		snprintf(c.name, sizeof(c.name), "node-1");
		snprintf(c.overlay_dev, sizeof(c.overlay_dev), "lo");
		snprintf(n.host_port, sizeof(n.host_port), "lo");
		if (iod_agent_ipam_init(&n.ipam, "10.200.1.0/24", &e))
			_exit(2);
		n.overlay_net = ip("10.200.0.0");
		n.overlay_prefix = 16;
		/* the agent's thread: nothing blocked (as before the agent blocks
		 * its signals) */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (iod_agent_vswitch_start(&v, &c, &n, &e)) {
			fprintf(stderr, "vswitch: %s\n", e.msg);
			_exit(2);
		}
		int b = others_block(SIGCHLD) == 1 && others_block(SIGTERM) == 1;
		iod_agent_vswitch_stop(v);
		_exit(b ? 0 : 1);
	}
	int st = 0;
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	if (WEXITSTATUS(st) == 2)
		SKIP("no virtual switch on lo in a network namespace of its own");
	CHECK_EQ(WEXITSTATUS(st), 0);
}

static volatile int blast_stop;

/* UDP to 127.0.0.1:9 as fast as it goes, until blast_stop. */
static void *blast(void *arg)
{
	(void)arg;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	while (fd >= 0 && !blast_stop)
		(void)!sendto(fd, "x", 1, 0, (struct sockaddr *)&sa, sizeof(sa));
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int if_up(const char *name)
{
	struct ifreq r = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;
	snprintf(r.ifr_name, sizeof(r.ifr_name), "%s", name);
	if (fd >= 0 && !ioctl(fd, SIOCGIFFLAGS, &r)) {
		r.ifr_flags |= IFF_UP;
		rc = ioctl(fd, SIOCSIFFLAGS, &r);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* An afpacket port hears only its interface, from its first frame on
 * (src/io/afpacket.c). Its socket was made for every protocol and bound to
 * its interface a few calls later: what other interfaces carried in
 * between was read as the port's. On the switch that was a neighbour's
 * frame as a replica's: forwarded as that replica's, or, with
 * anti-spoofing, refused on it (move_netns.sh: an idle client's port
 * refused 9 frames, "source-mac"). Root, in a network namespace of its
 * own: a quiet tap device and UDP flooding lo while ports open on the tap
 * in each receive mode; 0 = nothing heard, 1 = some, 2 = no tap here. */
TEST(afpacket_port_hears_only_its_interface)
{
	if (geteuid())
		SKIP("root: a network namespace of its own");
	pid_t pid = fork();
	if (pid == 0) {
		struct ifreq r = {0};
		int tun = -1;
		if (unshare(CLONE_NEWNET) || if_up("lo"))
			_exit(2);
		tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
		snprintf(r.ifr_name, sizeof(r.ifr_name), "t0");
		r.ifr_flags = IFF_TAP | IFF_NO_PI;
		if (tun < 0 || ioctl(tun, TUNSETIFF, &r))
			_exit(2);
		int d = open("/proc/sys/net/ipv6/conf/t0/disable_ipv6", O_WRONLY | O_CLOEXEC);
		if (d >= 0) { /* no router solicitations of its own */
			(void)!write(d, "1", 1);
			close(d);
		}
		if (if_up("t0"))
			_exit(2);
		pthread_t th;
		if (pthread_create(&th, NULL, blast, NULL))
			_exit(2);
		uint32_t heard = 0;
		for (int i = 0; i < 300; i++) {
			struct iod_io_port p = {0};
			struct iod_err e = {0};
			struct iod_io_port_cfg pc = {
			    .backend = "afpacket", .name = "t0", .iface = "t0"};
			pc.pool_bufs = 64;
			pc.ring_blocks = 2;
			pc.rx_recv = i % 3 != 0;
			pc.vnet_hdr = i % 3 == 2;
			if (iod_io_port_open(&p, &pc, &e)) {
				fprintf(stderr, "port: %s\n", e.msg);
				_exit(2);
			}
			struct iod_pkt *pk[64];
			for (int k = 0; k < 3; k++) {
				uint32_t n = iod_io_rx(&p, pk, 64, k == 2 ? 1 : 0);
				heard += n;
				for (uint32_t j = 0; j < n; j++)
					iod_io_pkt_free(pk[j]);
			}
			iod_io_port_close(&p);
		}
		blast_stop = 1;
		pthread_join(th, NULL);
		if (heard)
			fprintf(stderr, "ports on t0 heard %u frames of lo\n", heard);
		_exit(heard ? 1 : 0);
	}
	int st = 0;
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	if (WEXITSTATUS(st) == 2)
		SKIP("no tap device in a network namespace of its own");
	CHECK_EQ(WEXITSTATUS(st), 0);
}
