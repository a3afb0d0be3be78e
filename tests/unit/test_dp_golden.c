/*
 * test_dp_golden.c: golden packets through `iod dp run`, checked by an
 * independent dissector. Input pcaps (built here) -> `iod dp run` with pcap
 * ports -> output pcaps decoded by tshark with checksum validation on, and
 * compared field by field: VNI, outer and inner addresses and ports, IP /
 * UDP / TCP checksum status, ARP replies. Also the dp config's errors.
 */
#include "harness.h"
#include "iod/flow.h"
#include "iod/io.h"

#include <pcap/pcap.h>
#include <stdlib.h>
#include <unistd.h>

static const char *iod_bin(void)
{
	static char path[512];
	const char *b = getenv("IOD_BUILD");
	snprintf(path, sizeof(path), "%s/iod", b ? b : "build");
	return access(path, X_OK) == 0 ? path : NULL;
}

static void write_pcap(const char *path, uint8_t frames[][256], const uint32_t *lens, int n)
{
	pcap_t *d = pcap_open_dead(DLT_EN10MB, 65535);
	pcap_dumper_t *w = pcap_dump_open(d, path);
	for (int i = 0; i < n; i++) {
		struct pcap_pkthdr h = {0};
		h.ts.tv_usec = i;
		h.caplen = h.len = lens[i];
		pcap_dump((u_char *)w, &h, frames[i]);
	}
	pcap_dump_close(w);
	pcap_close(d);
}

static uint32_t tcp_frame(uint8_t *out, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
                          uint8_t proto)
{
	struct iod_net_pkt_spec s = {0};
	static const uint8_t a[6] = {2, 0, 0, 0, 0, 2}, g[6] = {2, 0, 0, 0, 0, 1};
	memcpy(s.src_mac, a, 6);
	memcpy(s.dst_mac, g, 6);
	s.t.family = IOD_NET_AF_V4;
	s.t.proto = proto;
	s.t.src.v4 = src;
	s.t.dst.v4 = dst;
	s.t.sport = sport;
	s.t.dport = dport;
	s.payload_bytes = 12;
	return (uint32_t)iod_net_pkt_build(&s, out, 256);
}

static uint32_t vxlan_in(uint8_t *out, uint32_t inner_src, uint16_t sport, uint32_t inner_dst,
                         uint16_t dport, uint8_t proto)
{
	uint8_t tmp[256];
	uint32_t n = tcp_frame(tmp, inner_src, sport, inner_dst, dport, proto);
	struct iod_net_vxlan_tunnel t = {0};
	t.outer_src_ip = 0x0a0a0002; /* remote VTEP */
	t.outer_dst_ip = 0x0a0a0001; /* ours */
	t.vni = 100;
	t.udp_csum = true;
	return (uint32_t)iod_net_vxlan_encap_copy(out, 256, tmp, n, &t, 1234, 0);
}

static const char CONFIG[] =
    "vtep: 10.10.0.1\n"
    "vtep_mac: 02:00:00:00:aa:01\n"
    "underlay_gw_mac: 02:00:00:00:aa:fe\n"
    "ports:\n"
    "  host: {backend: pcap, pcap_in: %s/host_in.pcap, pcap_out: %s/host_out.pcap}\n"
    "  fabric: {backend: pcap, pcap_in: %s/fab_in.pcap, pcap_out: %s/fab_out.pcap}\n"
    "security_groups:\n"
    "  - name: web\n"
    "    ingress: [\"tcp any 22\", \"udp 192.168.0.0/16 53\"]\n"
    "networks:\n"
    "  - name: blue\n"
    "    vni: 100\n"
    "    subnet: 192.168.0.0/16\n"
    "    gateway: 192.168.0.1\n"
    "    gateway_mac: 02:00:00:00:00:01\n"
    "    security_group: web\n"
    "    endpoints:\n"
    "      - {ip: 192.168.0.2, vtep: 10.10.0.2}\n"
    "      - {ip: 192.168.0.3, mac: 02:00:00:00:00:03, local: true}\n"
    "      - {ip: 192.168.0.4, vtep: 10.10.0.3}\n"
    "services:\n"
    "  - {name: dns, network: blue, vip: 192.168.0.100, port: 53, proto: udp,\n"
    "     backends: [\"192.168.0.3:8053\", \"192.168.0.4:8053\"]}\n";

/* Run tshark on a file; fields separated by ',' and occurrences by '|'. */
static int tshark(const char *pcap, const char *out)
{
	return iod_test_sh("tshark -r %s -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE "
	                   "-o tcp.check_checksum:TRUE -T fields -E occurrence=a -E aggregator='|' "
	                   "-E separator=, -e vxlan.vni -e ip.src -e ip.dst -e udp.srcport "
	                   "-e udp.dstport -e tcp.srcport -e tcp.dstport -e ip.checksum.status "
	                   "-e udp.checksum.status -e tcp.checksum.status -e arp.opcode "
	                   "-e arp.src.proto_ipv4 -e arp.src.hw_mac > %s 2>/dev/null",
	                   pcap, out);
}

static char *slurp(const char *path)
{
	struct iod_buf b;
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, path, 1 << 20, NULL)) {
		iod_buf_free(&b);
		return NULL;
	}
	return b.data;
}

TEST(golden_packets_decoded_by_tshark)
{
	const char *iod = iod_bin();
	if (!iod)
		SKIP("build/iod not built (run through make test)");
	if (iod_test_sh("command -v tshark >/dev/null 2>&1") != 0)
		SKIP("tshark is not installed (scripts/deps.sh installs it)");
	const char *d = iod_test_tmpdir();
	char path[512], cfg[4096];
	static uint8_t fab[8][256], host[8][256];
	uint32_t fl[8], hl[8];
	int nf = 0, nh = 0;
	/* fabric: allowed ssh to the local endpoint; denied telnet; DNS to the VIP */
	fl[nf] = vxlan_in(fab[nf], 0xc0a80002, 40000, 0xc0a80003, 22, IOD_NET_PROTO_TCP);
	nf++;
	fl[nf] = vxlan_in(fab[nf], 0xc0a80002, 40001, 0xc0a80003, 23, IOD_NET_PROTO_TCP);
	nf++;
	for (int i = 0; i < 4; i++) {
		fl[nf] = vxlan_in(fab[nf], 0xc0a80002, (uint16_t)(5000 + i), 0xc0a80064, 53,
		                  IOD_NET_PROTO_UDP);
		nf++;
	}
	/* host: the local endpoint opens ssh to the remote one; ARP for the gateway */
	hl[nh] = tcp_frame(host[nh], 0xc0a80003, 33000, 0xc0a80002, 22, IOD_NET_PROTO_TCP);
	nh++;
	static const uint8_t m3[6] = {2, 0, 0, 0, 0, 3}, z[6] = {0};
	hl[nh] = (uint32_t)iod_net_build_arp(host[nh], 256, 1, m3, 0xc0a80003, z, 0xc0a80001);
	nh++;
	snprintf(path, sizeof(path), "%s/fab_in.pcap", d);
	write_pcap(path, fab, fl, nf);
	snprintf(path, sizeof(path), "%s/host_in.pcap", d);
	write_pcap(path, host, hl, nh);
	snprintf(cfg, sizeof(cfg), CONFIG, d, d, d, d);
	snprintf(path, sizeof(path), "%s/dp.yaml", d);
	FILE *f = fopen(path, "w");
	CHECK(f);
	fputs(cfg, f);
	fclose(f);
	CHECK_EQ(iod_test_sh("%s dp run --config %s/dp.yaml --state %s/state.json -o json "
	                     "> %s/run.json 2>%s/run.err",
	                     iod, d, d, d, d),
	         0);
	char p1[512], p2[512];
	snprintf(p1, sizeof(p1), "%s/host_out.pcap", d);
	snprintf(p2, sizeof(p2), "%s/host.txt", d);
	CHECK_EQ(tshark(p1, p2), 0);
	char *h = slurp(p2);
	snprintf(p1, sizeof(p1), "%s/fab_out.pcap", d);
	snprintf(p2, sizeof(p2), "%s/fab.txt", d);
	CHECK_EQ(tshark(p1, p2), 0);
	char *fb = slurp(p2);
	CHECK(h && fb);
	/* host out: the decapsulated ssh SYN (valid checksums, no VXLAN) ... */
	CHECK_CONTAINS(h, ",192.168.0.2,192.168.0.3,,,40000,22,1,,1,,,\n");
	/* ... the ARP reply for the gateway, from the gateway's MAC ... */
	CHECK_CONTAINS(h, "2,192.168.0.1,02:00:00:00:00:01");
	/* ... never the denied telnet SYN. */
	CHECK(!strstr(h, ",23,"));
	CHECK(!strstr(fb, ",23,"));
	/* fabric out: the host's ssh SYN encapsulated in VNI 100 from our VTEP to 10.10.0.2,
	 * outer UDP source port from the inner hash (>= 49152), all checksums good. */
	const char *line = strstr(fb, "100,10.10.0.1|192.168.0.3,10.10.0.2|192.168.0.2,");
	CHECK_MSG(line, "no encapsulated ssh SYN in:\n%s", fb);
	unsigned sport = 0;
	CHECK_EQ(
	    sscanf(line + strlen("100,10.10.0.1|192.168.0.3,10.10.0.2|192.168.0.2,"), "%u", &sport),
	    1);
	CHECK(sport >= 49152);
	CHECK_CONTAINS(line, ",4789,33000,22,1|1,1,1,");
	/* DNS to the VIP: every query DNATed to a backend's 8053, local ones decapsulated to the
	 * host, remote ones encapsulated to 10.10.0.3; four in all. */
	int to_local = 0, to_remote = 0;
	for (const char *s = h; (s = strstr(s, ",192.168.0.2,192.168.0.3,")); s++)
		if (strstr(s, "\n") > strstr(s, ",8053,") && strstr(s, ",8053,"))
			to_local++;
	for (const char *s = fb; (s = strstr(s, "10.10.0.1|192.168.0.2,10.10.0.3|192.168.0.4,"));
	     s++)
		to_remote++;
	CHECK_MSG(to_local + to_remote == 4, "local %d remote %d\nhost:\n%s\nfabric:\n%s", to_local,
	          to_remote, h, fb);
	CHECK(!strstr(h, "192.168.0.100"));
	/* Remote DNAT: the inner UDP checksum is still valid (status 1|1 in the fabric file). */
	if (to_remote)
		CHECK_CONTAINS(strstr(fb, "10.10.0.3|192.168.0.4"), ",1|1,1|1,");
	/* dp dump reads the state the run left. */
	CHECK_EQ(iod_test_sh("%s dp dump --state %s/state.json > %s/dump.txt", iod, d, d), 0);
	snprintf(p2, sizeof(p2), "%s/dump.txt", d);
	char *dump = slurp(p2);
	CHECK_CONTAINS(dump, "pipe sg");
	CHECK_CONTAINS(dump, "conntrack:");
	if (getenv("IOD_TEST_SHOW"))
		fprintf(stderr, "host:\n%s\nfabric:\n%s\n%s", h, fb, dump);
	free(dump);
	free(h);
	free(fb);
}

TEST(dp_config_errors_name_file_line_col)
{
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_err e = {0};
	CHECK(c);
	const char *bad1 = "vtep: 10.10.0.1\nnetworks:\n  - name: blue\n    vni: 100\n"
	                   "    subnet: 192.168.0.0/16\n    security_group: nope\n";
	CHECK_EQ(iod_flow_dp_config_parse(bad1, strlen(bad1), "x.yaml", c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "x.yaml:6:21");
	CHECK_CONTAINS(e.msg, "security group \"nope\"");
	const char *bad2 = "vtep: 10.10.0.1\nnetwork: []\n";
	CHECK_EQ(iod_flow_dp_config_parse(bad2, strlen(bad2), "y.yaml", c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "y.yaml:2:10");
	CHECK_CONTAINS(e.msg, "did you mean \"networks\"");
	const char *bad3 = "vtep: 10.10.0.300\n";
	CHECK_EQ(iod_flow_dp_config_parse(bad3, strlen(bad3), "z.yaml", c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "IPv4");
	const char *bad4 = "vtep: 1.2.3.4\nports: {host: {backend: xdp}}\n";
	CHECK_EQ(iod_flow_dp_config_parse(bad4, strlen(bad4), "w.yaml", c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "mem, pcap, afpacket or dpdk");
	const char *bad5 = "vtep: [\n";
	CHECK_EQ(iod_flow_dp_config_parse(bad5, strlen(bad5), "v.yaml", c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "YAML syntax");
	/* What was accepted without a word (issue 13.7): each refused at its
	 * file:line:col. */
	const struct {
		const char *text, *at, *what;
	} t[] = {
	    {"vtep: 1.2.3.4\nnetworks:\n  - {name: n, vni: 5, subnet: 0.0.0.0/0}\n", "t.yaml:3:31",
	     "covers every IPv4 address"},
	    {"vtep: 1.2.3.4\nnetworks:\n  - name: n\n    vni: 5\n    subnet: 10.0.0.0/24\n"
	     "    endpoints:\n      - {ip: 10.0.1.2, local: true}\n",
	     "t.yaml:7:9", "outside network n's subnet 10.0.0.0/24"},
	    {"vtep: 1.2.3.4\nnetworks:\n  - name: n\n    vni: 5\n    endpoints:\n"
	     "      - {ip: 10.0.0.2, local: true}\n      - {ip: 10.0.0.2, vtep: 1.2.3.5}\n"
	     "    subnet: 10.0.0.0/24\n",
	     "t.yaml:7:9", "given twice in network n (first at line 6)"},
	    {"vtep: 1.2.3.4\nnetworks: []\nvtep: 1.2.3.5\n", "t.yaml:3:1",
	     "duplicate key \"vtep\" (first at line 1, column 1)"},
	    {"vtep: 1.2.3.4\nnetworks:\n  - {name: n, vni: 5, vni: 6, subnet: 10.0.0.0/8}\n",
	     "t.yaml:3:23", "duplicate key \"vni\""},
	    {"vtep: 1.2.3.4\nnetworks:\n  - {name: n, vni: 5, subnet: 10.0.0.0/8, rate: 0Gbps}\n",
	     "t.yaml:3:49", "would stop all traffic"},
	    {"vtep: 1.2.3.4\nnetworks:\n  - {name: n, vni: 5, subnet: 10.0.0.0/8, burst: 0}\n",
	     "t.yaml:3:50", "lets no packet through"},
	    {"vtep: 1.2.3.4\nct_sessions: 33554432\n", "t.yaml:2:14", "MiB of conntrack per core"},
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(t); i++) {
		e.msg[0] = 0;
		int rc = iod_flow_dp_config_parse(t[i].text, strlen(t[i].text), "t.yaml", c, &e);
		CHECK_MSG(rc == -EINVAL, "case %zu accepted", i);
		CHECK_MSG(strstr(e.msg, t[i].at) && strstr(e.msg, t[i].what), "case %zu: %s", i,
		          e.msg);
		iod_flow_dp_config_free(c);
	}
	/* the default and a large but sane table pass */
	const char *ct = "vtep: 1.2.3.4\nct_sessions: 4194304\n";
	CHECK_EQ(iod_flow_dp_config_parse(ct, strlen(ct), "t.yaml", c, &e), 0);
	iod_flow_dp_config_free(c);
	CHECK(iod_net_ct_bytes(1u << 20) < (100u << 20));
	CHECK(iod_net_ct_bytes(32u << 20) > (2000ull << 20));
	const char *ok =
	    "vtep: 1.2.3.4\nsecurity_groups:\n  - {name: g, ingress: [\"tcp any 1-2\"]}\n"
	    "networks:\n  - {name: n, vni: 5, subnet: 10.0.0.0/8, security_group: g,\n"
	    "     rate: 1Gbps, burst: 64KiB, dscp: 46,\n"
	    "     endpoints: [{ip: 10.0.0.2, local: true}]}\n"
	    "services:\n  - {name: s, network: n, vip: 10.0.0.9, port: 80,\n"
	    "     backends: [\"10.0.0.2:8080\"]}\n";
	CHECK_EQ(iod_flow_dp_config_parse(ok, strlen(ok), "ok.yaml", c, &e), 0);
	CHECK_EQ(c->networks_n, 1);
	CHECK_EQ(c->networks[0].sg, 0);
	CHECK_U64(c->networks[0].rate_bytes_per_s, 125000000);
	CHECK_U64(c->networks[0].burst_bytes, 65536);
	CHECK_EQ(c->services[0].lb.backends_n, 1);
	CHECK_EQ(c->sgs[0].rules[0].port_max, 2);
	struct iod_flow_dp dp;
	CHECK_EQ(iod_flow_dp_build(c, 1, &dp, &e), 0);
	iod_flow_dp_destroy(&dp);
	iod_flow_dp_config_free(c);
	free(c);
}

/* The dp config goes through the one YAML layer (src/base/yaml.c): every
 * independent problem is reported, not only the first, and a document past
 * IOD_YAML_NODES_MAX is refused with its position (the old loader had no
 * node bound and stopped at its first error). */
TEST(dp_config_reports_every_error_and_bounds_nodes)
{
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_err e = {0};
	CHECK(c);
	const char *many = "vtep: 10.10.0.300\nemc_slots: 3\nnetworks:\n"
	                   "  - {name: a, vni: 5, subnet: 10.0.0.0/8, dscp: 99}\n"
	                   "  - {name: b, vnii: 6, subnet: 10.0.0.0/8}\n";
	CHECK_EQ(iod_flow_dp_config_parse(many, strlen(many), "m.yaml", c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "m.yaml:1:7: vtep must be an IPv4 address");
	CHECK_CONTAINS(e.msg, "m.yaml:2:12: emc_slots must be a power of two");
	CHECK_CONTAINS(e.msg, "m.yaml:4:49: dscp must be a whole number 0..63");
	CHECK_CONTAINS(e.msg, "m.yaml:5:21: unknown key \"vnii\"");
	CHECK_MSG(strchr(e.msg, '\n') != NULL, "one problem a line: %s", e.msg);
	iod_flow_dp_config_free(c);

	/* more YAML nodes than the bound, in a file far below the size limit */
	size_t len = 64 + 2 * (size_t)(IOD_YAML_NODES_MAX + 10);
	CHECK(len < IOD_DP_CONFIG_FILE_MAX);
	char *big = malloc(len);
	CHECK(big);
	size_t off = (size_t)snprintf(big, len, "vtep: 1.2.3.4\nx: [");
	for (int i = 0; i < IOD_YAML_NODES_MAX + 2; i++) {
		big[off++] = '1';
		big[off++] = ',';
	}
	big[off++] = ']';
	big[off] = 0;
	e = (struct iod_err){0};
	CHECK_EQ(iod_flow_dp_config_parse(big, off, "big.yaml", c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "big.yaml:2:");
	CHECK_CONTAINS(e.msg, "IOD_YAML_NODES_MAX");
	free(big);
	iod_flow_dp_config_free(c);

	/* aliases are refused where they are used */
	const char *alias = "vtep: &v 1.2.3.4\nvtep_mac: *v\n";
	e = (struct iod_err){0};
	CHECK_EQ(iod_flow_dp_config_parse(alias, strlen(alias), "a.yaml", c, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "a.yaml:2:11: alias");
	iod_flow_dp_config_free(c);
	free(c);
}

/* Run one frame through a built dp (port 0 host, 1 fabric); the verdict. */
static int dp_verdict(struct iod_flow_dp *dp, uint16_t port, const uint8_t *frame, uint32_t len,
                      uint16_t *port_out)
{
	static uint8_t mem[128 + 512];
	struct iod_pkt p = {0}, *pp = &p;
	memcpy(mem + 128, frame, len);
	p.data = mem + 128;
	p.len = len;
	p.headroom = 128;
	p.port_in = port;
	iod_flow_burst(dp->pl, 0, &pp, 1, 1000);
	*port_out = p.port_out;
	return p.verdict;
}

TEST(sg_ingress_from_fabric_egress_from_host)
{
	const char *y =
	    "vtep: 10.10.0.1\n"
	    "security_groups:\n"
	    "  - {name: g, ingress: [\"tcp any 22\"], egress: [\"tcp 192.168.0.0/16 443\"]}\n"
	    "networks:\n"
	    "  - {name: n, vni: 100, subnet: 192.168.0.0/16, security_group: g,\n"
	    "     endpoints: [{ip: 192.168.0.2, vtep: 10.10.0.2},\n"
	    "                 {ip: 192.168.0.3, mac: 02:00:00:00:00:03, local: true}]}\n";
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_flow_dp dp;
	struct iod_err e = {0};
	CHECK(c);
	CHECK_EQ(iod_flow_dp_config_parse(y, strlen(y), "t.yaml", c, &e), 0);
	c->ct_sessions = 64;
	CHECK_EQ(iod_flow_dp_build(c, 1, &dp, &e), 0);
	uint8_t f[256];
	uint16_t out = 0;
	/* from the local endpoint (host port): egress rules */
	uint32_t n = tcp_frame(f, 0xc0a80003, 1000, 0xc0a80002, 443, IOD_NET_PROTO_TCP);
	CHECK_EQ(dp_verdict(&dp, IOD_DP_PORT_HOST, f, n, &out), IOD_FLOW_V_PORT);
	CHECK_EQ(out, IOD_DP_PORT_FABRIC);
	n = tcp_frame(f, 0xc0a80003, 1001, 0xc0a80002, 80, IOD_NET_PROTO_TCP);
	CHECK_EQ(dp_verdict(&dp, IOD_DP_PORT_HOST, f, n, &out), IOD_FLOW_V_DROP);
	/* from the fabric to the local endpoint: ingress rules */
	n = vxlan_in(f, 0xc0a80002, 2000, 0xc0a80003, 22, IOD_NET_PROTO_TCP);
	CHECK_EQ(dp_verdict(&dp, IOD_DP_PORT_FABRIC, f, n, &out), IOD_FLOW_V_PORT);
	CHECK_EQ(out, IOD_DP_PORT_HOST);
	n = vxlan_in(f, 0xc0a80002, 2001, 0xc0a80003, 443, IOD_NET_PROTO_TCP);
	CHECK_EQ(dp_verdict(&dp, IOD_DP_PORT_FABRIC, f, n, &out), IOD_FLOW_V_DROP);
	iod_flow_dp_destroy(&dp);
	iod_flow_dp_config_free(c);
	free(c);
}

/* The data plane's one run loop (src/io/dploop.c) on mem ports: a turn
 * receives from both ports, runs the pipeline and transmits by verdict; the
 * loop is done when both inputs have ended. */
TEST(dp_loop_step_forwards_by_verdict)
{
	const char *y =
	    "vtep: 10.10.0.1\n"
	    "security_groups:\n"
	    "  - {name: g, ingress: [\"tcp any 22\"], egress: [\"tcp 192.168.0.0/16 443\"]}\n"
	    "networks:\n"
	    "  - {name: n, vni: 100, subnet: 192.168.0.0/16, security_group: g,\n"
	    "     endpoints: [{ip: 192.168.0.2, vtep: 10.10.0.2},\n"
	    "                 {ip: 192.168.0.3, mac: 02:00:00:00:00:03, local: true}]}\n";
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_flow_dp dp;
	struct iod_io_port ports[2];
	struct iod_dp_loop loop;
	struct iod_err e = {0};
	CHECK(c);
	CHECK_EQ(iod_flow_dp_config_parse(y, strlen(y), "t.yaml", c, &e), 0);
	c->ct_sessions = 64;
	CHECK_EQ(iod_flow_dp_build(c, 1, &dp, &e), 0);
	memset(ports, 0, sizeof(ports));
	struct iod_io_port_cfg hc = {.backend = "mem", .name = "host", .mem_capture = 8};
	struct iod_io_port_cfg fc = {.backend = "mem", .name = "fabric", .mem_capture = 8};
	CHECK_EQ(iod_io_port_open(&ports[IOD_DP_PORT_HOST], &hc, &e), 0);
	CHECK_EQ(iod_io_port_open(&ports[IOD_DP_PORT_FABRIC], &fc, &e), 0);
	uint8_t f0[256], f1[256], f2[256];
	const uint8_t *host_frames[2] = {f0, f1}, *fabric_frames[1] = {f2};
	uint32_t host_lens[2], fabric_lens[1];
	/* host: an allowed egress (443) and a dropped one (80); fabric: ssh in */
	host_lens[0] = tcp_frame(f0, 0xc0a80003, 1000, 0xc0a80002, 443, IOD_NET_PROTO_TCP);
	host_lens[1] = tcp_frame(f1, 0xc0a80003, 1001, 0xc0a80002, 80, IOD_NET_PROTO_TCP);
	fabric_lens[0] = vxlan_in(f2, 0xc0a80002, 2000, 0xc0a80003, 22, IOD_NET_PROTO_TCP);
	CHECK_EQ(iod_io_mem_load(&ports[IOD_DP_PORT_HOST], host_frames, host_lens, 2, false), 0);
	CHECK_EQ(iod_io_mem_load(&ports[IOD_DP_PORT_FABRIC], fabric_frames, fabric_lens, 1, false),
	         0);
	iod_dp_loop_init(&loop, &dp, NULL, ports);
	CHECK(!loop.live);
	CHECK_EQ(iod_dp_loop_step(&loop, 1000), 3);
	CHECK_U64(ports[IOD_DP_PORT_FABRIC].stats.tx_packets, 1); /* the 443 one, encapsulated */
	CHECK_U64(ports[IOD_DP_PORT_HOST].stats.tx_packets, 1);   /* ssh, decapsulated */
	CHECK_U64(loop.rx_packets, 3);
	CHECK_EQ(iod_dp_loop_step(&loop, 2000), 0);
	CHECK(iod_dp_loop_done(&loop));
	CHECK_EQ(iod_dp_loop_idle(&loop), 0); /* nothing live */
	for (int i = 0; i < 2; i++)
		iod_io_port_close(&ports[i]);
	iod_flow_dp_destroy(&dp);
	iod_flow_dp_config_free(c);
	free(c);
}

static uint32_t spoof_seen[IOD_NET_SPOOF_N];
static void on_spoof(void *ctx, uint32_t port, const struct iod_pkt *p,
                     enum iod_net_spoof_verdict v)
{
	(void)ctx;
	(void)p;
	CHECK_EQ(port, 1); /* the replica's, never the host stack's */
	spoof_seen[v]++;
}

/* One run of the switch loop: the host stack's port and one replica's
 * (at 192.168.0.3, MAC 02:00:00:00:00:02, tcp_frame's) sending frames;
 * guarded: its port bound to its address. *out: what left on the fabric. */
static void switch_run(struct iod_flow_dp *dp, const uint8_t *const *frames, const uint32_t *lens,
                       uint32_t n, bool guarded, struct iod_dp_port_guard *g,
                       struct iod_dp_loop *loop, uint64_t *out)
{
	struct iod_io_port ports[2], rep;
	struct iod_err e = {0};
	memset(ports, 0, sizeof(ports));
	memset(&rep, 0, sizeof(rep));
	struct iod_io_port_cfg hc = {.backend = "mem", .name = "host", .mem_capture = 8};
	struct iod_io_port_cfg fc = {.backend = "mem", .name = "fabric", .mem_capture = 8};
	struct iod_io_port_cfg rc = {.backend = "mem", .name = "replica", .mem_capture = 8};
	CHECK_EQ(iod_io_port_open(&ports[IOD_DP_PORT_HOST], &hc, &e), 0);
	CHECK_EQ(iod_io_port_open(&ports[IOD_DP_PORT_FABRIC], &fc, &e), 0);
	CHECK_EQ(iod_io_port_open(&rep, &rc, &e), 0);
	CHECK_EQ(iod_io_mem_load(&rep, frames, lens, n, false), 0);
	struct iod_io_port *hp[2] = {&ports[IOD_DP_PORT_HOST], &rep};
	static const uint8_t macs[2][6] = {{2, 0, 0, 0, 0, 9}, {2, 0, 0, 0, 0, 3}};
	struct iod_dp_port_guard *gp[2] = {NULL, g};
	memset(g, 0, sizeof(*g));
	g->bind.ip = 0xc0a80003;
	memcpy(g->bind.mac, (uint8_t[6]){2, 0, 0, 0, 0, 2}, 6);
	iod_dp_loop_init(loop, dp, NULL, ports);
	iod_dp_loop_set_host_ports(loop, hp, macs, 2);
	if (guarded)
		iod_dp_loop_set_host_guards(loop, gp);
	loop->on_spoof = on_spoof;
	CHECK_EQ(iod_dp_loop_step(loop, 1000), n);
	*out = ports[IOD_DP_PORT_FABRIC].stats.tx_packets;
	iod_io_port_close(&rep);
	for (int i = 0; i < 2; i++)
		iod_io_port_close(&ports[i]);
}

/* Anti-spoofing on the switch's replica ports (dploop.c with spoof.c): the
 * pipeline classifies a host-side packet by its source address, so without
 * a binding a replica sending with its neighbour's address (192.168.0.5,
 * whose group allows 443 out) passes as the neighbour; bound to its own
 * address, the port's spoofed frames never reach the pipeline, each is
 * counted by its reason, and its own traffic still flows. */
TEST(dp_loop_guard_drops_spoofed_sources)
{
	const char *y =
	    "vtep: 10.10.0.1\n"
	    "security_groups:\n"
	    "  - {name: g, egress: [\"tcp 192.168.0.0/16 443\"]}\n"
	    "networks:\n"
	    "  - {name: n, vni: 100, subnet: 192.168.0.0/16, security_group: g,\n"
	    "     endpoints: [{ip: 192.168.0.2, vtep: 10.10.0.2},\n"
	    "                 {ip: 192.168.0.3, mac: 02:00:00:00:00:03, local: true},\n"
	    "                 {ip: 192.168.0.5, mac: 02:00:00:00:00:05, local: true}]}\n";
	struct iod_flow_dp_config *c = calloc(1, sizeof(*c));
	struct iod_flow_dp dp;
	struct iod_dp_loop loop;
	struct iod_dp_port_guard g = {.bind = {0}};
	struct iod_err e = {0};
	CHECK(c);
	CHECK_EQ(iod_flow_dp_config_parse(y, strlen(y), "t.yaml", c, &e), 0);
	c->ct_sessions = 64;
	CHECK_EQ(iod_flow_dp_build(c, 1, &dp, &e), 0);
	uint8_t f0[256], f1[256], f2[256], f3[256];
	const uint8_t *frames[4] = {f0, f1, f2, f3};
	uint32_t lens[4];
	/* spoofed: the neighbour's address; its own MAC, as any raw socket can */
	lens[0] = tcp_frame(f0, 0xc0a80005, 1000, 0xc0a80002, 443, IOD_NET_PROTO_TCP);
	/* the old hole: unbound, the pipeline takes it for the neighbour's */
	uint64_t out = 0;
	switch_run(&dp, frames, lens, 1, false, &g, &loop, &out);
	CHECK_U64(out, 1);
	CHECK_U64(loop.spoofed, 0);
	/* bound: dropped before the pipeline, counted; its own still flows */
	lens[1] = tcp_frame(f1, 0xc0a80003, 1001, 0xc0a80002, 443, IOD_NET_PROTO_TCP);
	/* its own address behind a forged MAC */
	lens[2] = tcp_frame(f2, 0xc0a80003, 1002, 0xc0a80002, 443, IOD_NET_PROTO_TCP);
	f2[11] = 5;
	/* an ARP reply that claims the neighbour's address */
	lens[3] =
	    (uint32_t)iod_net_build_arp(f3, sizeof(f3), 2, (uint8_t[6]){2, 0, 0, 0, 0, 2},
	                                0xc0a80005, (uint8_t[6]){2, 0, 0, 0, 0, 9}, 0xc0a80001);
	memset(spoof_seen, 0, sizeof(spoof_seen));
	iod_flow_dp_destroy(&dp);
	CHECK_EQ(iod_flow_dp_build(c, 1, &dp, &e), 0);
	switch_run(&dp, frames, lens, 4, true, &g, &loop, &out);
	CHECK_U64(out, 1); /* its own */
	CHECK_U64(loop.spoofed, 3);
	CHECK_U64(loop.rx_packets, 4); /* received: the refused counted too */
	CHECK_U64(g.dropped[IOD_NET_SPOOF_SRC_IP], 1);
	CHECK_U64(g.dropped[IOD_NET_SPOOF_SRC_MAC], 1);
	CHECK_U64(g.dropped[IOD_NET_SPOOF_ARP], 1);
	CHECK_U64(g.dropped[IOD_NET_SPOOF_OK], 0);
	CHECK_EQ(spoof_seen[IOD_NET_SPOOF_SRC_IP], 1);
	CHECK_EQ(spoof_seen[IOD_NET_SPOOF_ARP], 1);
	iod_flow_dp_destroy(&dp);
	iod_flow_dp_config_free(c);
	free(c);
}
