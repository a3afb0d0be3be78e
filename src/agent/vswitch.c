/*
 * vswitch.c: the node's virtual switch (shell): iod's data plane run by
 * the agent, in a thread of its own (docs/network.md).
 *
 * Ports: every local replica's veth host end and the host stack's port
 * "iodp<tag>" (AF_PACKET, TPACKET_V3) on the host side, the underlay
 * device (the VTEP) on the fabric side. The pipeline is src/flow/dp.c's
 * overlay pipeline, configured by overlay.c from the cluster's overlay
 * table (the watch, through cluster.c) and the local ports (netns.c); the
 * run loop is src/io/dploop.c, whose host side demultiplexes by
 * destination MAC. A change of either input rebuilds the pipeline at the
 * next turn, keeping conntrack. A UDP socket bound to the VTEP's VXLAN
 * port keeps the host kernel from answering the frames the switch takes
 * with ICMP port-unreachable. Each dropped packet goes to drops.c, which
 * finds its rule; the records and verdict counters are written for readers
 * (<data_dir>/drops.json, dp_sg_verdicts.prom: `iod trace --drops`, the
 * agent's /metrics). Nothing here decides about packets.
 */
#include "iod/agent_run.h"
#include "iod/ar.h"
#include "iod/config.h"
#include "iod/io.h"
#include "iod/obs.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IOD_UDP_GRO 104 /* linux/udp.h UDP_GRO (Linux 5.0) */

struct vport {
	char name[IOD_NAME_MAX]; /* replica */
	char veth[16];           /* its host end */
	unsigned ifindex;        /* veth's when opened: a veth made anew is a new port */
	uint32_t ip;             /* its address */
	struct iod_io_port port; /* open AF_PACKET port (port.ops NULL = closed) */
	/* anti-spoofing: bound to ip and its MAC (src/net/spoof.c), with what
	 * it refused; kept across pipeline rebuilds */
	struct iod_dp_port_guard guard;
};

struct iod_agent_vswitch {
	pthread_t th;
	bool started;
	pthread_mutex_t mu; /* guards the inputs below */
	bool stop;
	uint64_t gen;                          /* bumped by every input change */
	struct iod_agent_overlay_table *table; /* latest from the watch */
	struct iod_agent_overlay_local *locals;
	char (*veths)[16];
	uint32_t nloc;
	/* the thread's own */
	/* drops with their rule (drops.c) */
	struct iod_agent_drops *drops;
	char data_dir[IOD_AGENT_PATH_MAX]; /* where they are written */
	uint64_t drops_pub_ns;             /* last written */
	uint64_t spoof_log_ns;             /* a refused frame last logged */
	bool new_pipeline;                 /* rebuilt since the last reading */
	uint64_t *sg_sum;                  /* IOD_AGENT_SG_RULES_MAX: admitted per rule */
	struct iod_agent_overlay_node nd;
	char dev[32];
	char host_port[16];
	struct iod_io_port ports[2]; /* [HOST] the host stack's, [FABRIC] the VTEP */
	struct vport *vp;            /* IOD_AGENT_REPLICAS_MAX */
	uint32_t nvp;
	struct iod_io_port **hp; /* host side: the host stack's port, then the replicas' */
	uint8_t (*hmac)[6];
	struct iod_dp_port_guard *
	    *gp; /* each host port's binding: NULL (the host stack's), then the replicas' */
	struct iod_flow_dp dp[2];
	int cur;        /* dp[cur] runs; -1 = none */
	bool loaded;    /* loop bound */
	bool antispoof; /* not IOD_VSWITCH_ANTISPOOF=off at start: ports' bindings checked */
	struct iod_flow_dp_config *cfg, *last;
	struct iod_agent_overlay_table *tbuf;
	struct iod_agent_overlay_local *lbuf;
	char (*vbuf)[16];
	struct iod_dp_loop loop;
	/* adaptive routing of the tenants' VXLAN to other nodes (dp_ar.c):
	 * kept across rebuilds that leave its networks, policy and peer VTEPs
	 * as they were (its pins with it); NULL = ecmp */
	struct iod_flow_dp_ar *ar;
	uint64_t ar_check_ns; /* when the cluster config's policy was last read */
	int udp_fd;
	/* the ports' counters as last published (under mu) */
	struct iod_tel_port *pub; /* IOD_AGENT_REPLICAS_MAX + 2 */
	uint32_t pub_n;
	uint64_t pub_ns; /* when the thread last published */
	/* `iod dp dump --node`: a reader asks (dump_req), the thread answers */
	pthread_cond_t dump_cv; /* with mu: signalled when dump_seq moves */
	uint64_t dump_req;      /* under mu: dumps asked for */
	uint64_t dump_seq;      /* under mu: the request dump answers */
	char *dump;             /* under mu: the latest dump (JSON text), or NULL */
};

static int dev_info(const char *dev, uint32_t *ip, uint8_t mac[6], struct iod_err *e)
{
	struct ifreq r;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return iod_err_set(e, -errno, "socket: %s", strerror(errno));
	memset(&r, 0, sizeof(r));
	iod_strlcpy(r.ifr_name, dev, sizeof(r.ifr_name));
	int rc = 0;
	if (ioctl(fd, SIOCGIFADDR, &r))
		rc = iod_err_set(e, -errno, "overlay device %s: no IPv4 address: %s", dev,
		                 strerror(errno));
	else
		*ip = ntohl(((struct sockaddr_in *)&r.ifr_addr)->sin_addr.s_addr);
	if (!rc && ioctl(fd, SIOCGIFHWADDR, &r))
		rc = iod_err_set(e, -errno, "overlay device %s: %s", dev, strerror(errno));
	else if (!rc)
		memcpy(mac, r.ifr_hwaddr.sa_data, 6);
	close(fd);
	return rc;
}

bool iod_agent_vswitch_gso(void)
{
	const char *rx = getenv("IOD_VSWITCH_RX"), *gso = getenv("IOD_VSWITCH_GSO");
	return !(rx && !strcmp(rx, "ring")) && !(gso && !strcmp(gso, "off"));
}

/* A port of the switch, by what it faces. */
enum port_kind {
	PORT_REPLICA, /* a replica's veth: GSO super-frames in and out through a
	               * virtio-net header (iod_agent_vswitch_gso) */
	PORT_HOST,    /* the host stack's */
	PORT_FABRIC,  /* the VTEP's: a virtio-net header too, VXLAN datagrams of one
	               * inner flow out as one UDP_SEGMENT super-frame and such
	               * super-frames from peer switches in whole */
};

static int open_port(struct iod_io_port *p, const char *name, const char *iface,
                     enum port_kind kind, struct iod_err *e)
{
	struct iod_io_port_cfg pc = {.backend = "afpacket", .name = name, .iface = iface};
	if (kind != PORT_FABRIC) { /* one endpoint's: a few hundred frames in flight */
		pc.pool_bufs = 512;
		pc.ring_blocks = 4;
	}
	pc.vnet_hdr = kind != PORT_HOST && iod_agent_vswitch_gso();
	pc.tx_udp_gso = kind == PORT_FABRIC;
	pc.retire_ms = 1; /* a partly filled block waits 1 ms, not 10 */
	/* no ring: a ring's partly filled block waits for its retire timer (a
	 * jiffy or more per switch a packet crosses); IOD_VSWITCH_RX=ring keeps
	 * the ring (make bench-net compares both) */
	const char *rx = getenv("IOD_VSWITCH_RX");
	pc.rx_recv = !rx || strcmp(rx, "ring");
	return iod_io_port_open(p, &pc, e);
}

static void maybe_publish_drops(struct iod_agent_vswitch *v);

/* A packet the pipeline dropped: its rule, in the thread's records. */
static void on_drop(void *ctx, const struct iod_pkt *p)
{
	struct iod_agent_vswitch *v = ctx;
	struct iod_net_meta m;
	struct iod_flow_key k;
	if (!v->drops || iod_net_parse(p->data, p->len, 0, &m))
		return;
	iod_flow_key_from_meta(&k, &m, p->port_in);
	iod_agent_drops_note(v->drops, v->last, v->tbuf, &k, p->port_in == IOD_DP_PORT_FABRIC,
	                     iod_time_unix_ns() / IOD_NS_PER_MS);
	maybe_publish_drops(v);
}

/* A frame a replica's port sent that its binding refused: recorded with
 * its reason (drops.c). */
static void on_spoof(void *ctx, uint32_t host_port, const struct iod_pkt *p,
                     enum iod_net_spoof_verdict why)
{
	struct iod_agent_vswitch *v = ctx;
	struct iod_net_meta m;
	struct iod_flow_key k;
	if (!v->drops || host_port == 0 || host_port > v->nvp)
		return;
	const struct vport *vp = &v->vp[host_port - 1];
	uint64_t now = iod_clock_now_ns();
	if (now - v->spoof_log_ns >= IOD_NS_PER_S) { /* what it was: at most a line a second */
		char hex[3 * 42 + 1] = "";
		for (uint32_t i = 0; i < p->len && i < 42; i++)
			snprintf(hex + 3 * i, sizeof(hex) - 3 * i, "%02x ", p->data[i]);
		v->spoof_log_ns = now;
		IOD_WARN("vswitch", "%s: port %s refused a frame (%s, %u bytes): %s", vp->name,
		         vp->veth, iod_net_spoof_name(why), p->len, hex);
	}
	bool parsed = !iod_net_parse(p->data, p->len, 0, &m);
	if (parsed)
		iod_flow_key_from_meta(&k, &m, IOD_DP_PORT_HOST);
	iod_agent_drops_spoof(v->drops, vp->name, vp->guard.bind.ip, why, parsed ? &k : NULL,
	                      iod_time_unix_ns() / IOD_NS_PER_MS);
	maybe_publish_drops(v);
}

/* Write s to dir/name through a temporary file (readers see whole files). */
static void write_file(const char *dir, const char *name, const char *s, size_t len)
{
	char path[IOD_AGENT_PATH_MAX + 64], tmp[IOD_AGENT_PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	bool ok = fwrite(s, 1, len, f) == len;
	if (fclose(f) == 0 && ok)
		rename(tmp, path);
}

/* The security groups' allow rules' admitted sessions (sg.c's entries in
 * the "sg" and "sgin" pipes, acl i at priority IOD_DP_ACL_PRIO + i), summed
 * per rule. */
static void publish_sg_admitted(struct iod_agent_vswitch *v, struct iod_flow_dp *dp)
{
	uint64_t *sum = v->sg_sum;
	const struct iod_flow_entry_cfg *ec;
	uint32_t n = v->tbuf->sg_rules_n, id;
	memset(sum, 0, n * sizeof(sum[0]));
	for (int k = 0; k < 2; k++) {
		int32_t pipe = k ? dp->pipe_sgin : dp->pipe_sg;
		for (uint32_t pos = 0;
		     pipe >= 0 && iod_flow_entry_next(dp->pl, (uint32_t)pipe, &pos, &id, &ec);) {
			uint32_t a = ec->priority - IOD_DP_ACL_PRIO;
			struct iod_flow_stats st;
			if (ec->priority < IOD_DP_ACL_PRIO || a >= v->last->acls_n ||
			    v->last->acls[a].deny || v->last->acls[a].rule >= n ||
			    iod_flow_entry_stats(dp->pl, (uint32_t)pipe, id, &st))
				continue;
			sum[v->last->acls[a].rule] += st.packets;
		}
	}
	for (uint32_t r = 0; r < n; r++)
		if (sum[r] || v->new_pipeline)
			iod_agent_drops_admitted_rule(v->drops, v->tbuf->sg_rules[r].name, sum[r],
			                              v->new_pipeline);
}

/* The allow rules' admitted sessions from the running pipeline's sg pipe
 * (an entry per tenant for new sessions); then, when anything changed,
 * the records and counters for readers. */
static void publish_drops(struct iod_agent_vswitch *v)
{
	const struct iod_flow_entry_cfg *ec;
	uint32_t pos = 0, id;
	struct iod_flow_dp *dp = v->cur >= 0 ? &v->dp[v->cur] : NULL;
	while (dp && v->loaded &&
	       iod_flow_entry_next(dp->pl, (uint32_t)dp->pipe_sg, &pos, &id, &ec)) {
		struct iod_flow_stats st;
		uint32_t n = ec->match.meta - 1;
		if (ec->match.ct_state != IOD_NET_CT_NEW || !ec->match.meta ||
		    n >= v->last->networks_n || v->last->networks[n].local_only ||
		    iod_flow_entry_stats(dp->pl, (uint32_t)dp->pipe_sg, id, &st))
			continue;
		iod_agent_drops_admitted(v->drops, v->last->networks[n].name, st.packets,
		                         v->new_pipeline);
	}
	if (dp && v->loaded && v->last->acls_n)
		publish_sg_admitted(v, dp);
	v->new_pipeline = false;
	if (!v->drops->dirty || !v->data_dir[0])
		return;
	v->drops->dirty = false;
	json_t *j = iod_agent_drops_json(v->drops, v->nd.name);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (text)
		write_file(v->data_dir, "drops.json", text, strlen(text));
	free(text);
	json_decref(j);
	struct iod_buf b;
	iod_buf_init(&b);
	if (!iod_agent_drops_prom(v->drops, &b) && b.data)
		write_file(v->data_dir, "dp_sg_verdicts.prom", b.data, b.len);
	iod_buf_free(&b);
}

/* publish_drops at most every IOD_AGENT_DROPS_PUBLISH_MS. */
static void maybe_publish_drops(struct iod_agent_vswitch *v)
{
	uint64_t now = iod_clock_now_ns();
	if (!v->drops || now - v->drops_pub_ns < IOD_AGENT_DROPS_PUBLISH_MS * IOD_NS_PER_MS)
		return;
	v->drops_pub_ns = now;
	publish_drops(v);
}

/* The services of cfg with their VIPs (overlay_svc.c) from the table; a
 * line when they changed from the running pipeline's. */
static void add_services(struct iod_agent_vswitch *v)
{
	struct iod_err e = {0};
	if (iod_agent_overlay_dp_services(v->tbuf, v->cfg, &e))
		IOD_WARN("vswitch", "%s", e.msg);
	bool same = v->cur >= 0 && v->cfg->services_n == v->last->services_n &&
	            !memcmp(v->cfg->services, v->last->services,
	                    v->cfg->services_n * sizeof(v->cfg->services[0]));
	for (uint32_t s = 0; !same && s < v->cfg->services_n; s++) {
		const struct iod_net_lb_service *lb = &v->cfg->services[s].lb;
		uint32_t up = 0;
		char vip[20];
		for (uint32_t b = 0; b < lb->backends_n; b++)
			up += lb->backends[b].up;
		iod_agent_ipv4_format(lb->vip, vip, sizeof(vip));
		IOD_INFO("vswitch", "service %s: VIP %s:%u, %u of %u backends up", lb->name, vip,
		         lb->port, up, lb->backends_n);
	}
}

int iod_agent_vswitch_svc_env(struct iod_agent_vswitch *v, struct iod_agent_replica *r)
{
	pthread_mutex_lock(&v->mu);
	int rc = v->table ? iod_agent_env_overlay_vips(r, v->table) : 0;
	pthread_mutex_unlock(&v->mu);
	return rc;
}

/* Adaptive routing for the new config: the running core when it matches
 * (same networks, policy, peer VTEPs), else a new one (flows re-race). */
static void update_ar(struct iod_agent_vswitch *v)
{
	struct iod_err e = {0};
	if (iod_flow_dp_ar_matches(v->ar, v->cfg))
		return;
	struct iod_flow_dp_ar *ar = NULL;
	if (iod_flow_dp_ar_create(v->cfg, &ar, &e))
		IOD_WARN("vswitch", "adaptive routing: %s (running ecmp)", e.msg);
	iod_flow_dp_ar_destroy(v->ar);
	v->ar = ar;
	IOD_INFO("vswitch", "adaptive routing: %s to %u peer VTEPs",
	         iod_ar_policy_name(ar ? (enum iod_ar_policy)v->nd.ar_policy : IOD_AR_ECMP),
	         iod_flow_dp_ar_peers(ar));
}

/* The cluster config's network.adaptive_routing, at most once a second;
 * true when it changed (the next rebuild applies it). */
static bool ar_policy_changed(struct iod_agent_vswitch *v, uint64_t now)
{
	if (v->ar_check_ns && now - v->ar_check_ns < IOD_NS_PER_S)
		return false;
	v->ar_check_ns = now;
	char buf[32];
	enum iod_ar_policy p = IOD_AR_MINRTT;
	if (iod_ar_policy_parse(iod_config_live_str("network.adaptive_routing",
	                                            IOD_CONFIG_AR_DEFAULT, buf, sizeof(buf)),
	                        &p))
		iod_ar_policy_parse(IOD_CONFIG_AR_DEFAULT, &p);
	if ((int)p == v->nd.ar_policy)
		return false;
	IOD_INFO("vswitch", "adaptive routing policy %s (cluster config network.adaptive_routing)",
	         iod_ar_policy_name(p));
	v->nd.ar_policy = (int)p;
	return true;
}

/* Bring the ports and the pipeline in line with the inputs. */
static void rebuild(struct iod_agent_vswitch *v)
{
	struct iod_err e = {0};
	uint32_t nloc;
	pthread_mutex_lock(&v->mu);
	bool have_table = v->table != NULL;
	if (have_table)
		memcpy(v->tbuf, v->table, sizeof(*v->tbuf));
	nloc = v->nloc;
	memcpy(v->lbuf, v->locals, nloc * sizeof(*v->lbuf));
	memcpy(v->vbuf, v->veths, nloc * sizeof(*v->vbuf));
	pthread_mutex_unlock(&v->mu);
	if (!have_table)
		v->tbuf->n = 0;
	/* ports: close the gone, open the new */
	bool ports_changed = false;
	for (uint32_t i = 0; i < v->nvp;) {
		bool keep = false;
		/* the same replica on the same veth (the same interface, not
		 * one made anew under its name: the old socket hears nothing)
		 * at the same address: its port, binding included (a new
		 * address is a new port: anti-spoofing would refuse its frames
		 * by the old binding) */
		for (uint32_t k = 0; k < nloc && !keep; k++)
			keep = !strcmp(v->vp[i].name, v->lbuf[k].name) &&
			       !strcmp(v->vp[i].veth, v->vbuf[k]) && v->vp[i].ip == v->lbuf[k].ip &&
			       v->vp[i].ifindex == if_nametoindex(v->vbuf[k]);
		if (keep) {
			i++;
			continue;
		}
		iod_io_port_close(&v->vp[i].port);
		v->vp[i] = v->vp[--v->nvp];
		ports_changed = true;
	}
	for (uint32_t k = 0; k < nloc && v->nvp < IOD_AGENT_REPLICAS_MAX; k++) {
		bool have = false;
		for (uint32_t i = 0; i < v->nvp && !have; i++)
			have = !strcmp(v->vp[i].name, v->lbuf[k].name);
		if (have)
			continue;
		struct vport *p = &v->vp[v->nvp];
		memset(p, 0, sizeof(*p));
		iod_strlcpy(p->name, v->lbuf[k].name, sizeof(p->name));
		iod_strlcpy(p->veth, v->vbuf[k], sizeof(p->veth));
		p->ip = v->lbuf[k].ip;
		p->guard.bind.ip = p->ip;
		iod_agent_overlay_mac(p->ip, false, p->guard.bind.mac); /* netns.c gives eth0 it */
		p->ifindex = if_nametoindex(p->veth);
		if (open_port(&p->port, p->name, p->veth, PORT_REPLICA, &e)) {
			IOD_WARN("vswitch", "%s: port %s: %s", p->name, p->veth, e.msg);
			continue;
		}
		char ip[20];
		iod_agent_ipv4_format(p->ip, ip, sizeof(ip));
		const uint8_t *m = p->guard.bind.mac;
		IOD_INFO("vswitch",
		         "%s: port %s (ifindex %u) bound to %s, %02x:%02x:%02x:%02x:%02x:%02x%s",
		         p->name, p->veth, p->ifindex, ip, m[0], m[1], m[2], m[3], m[4], m[5],
		         v->antispoof ? "" : " (anti-spoofing off)");
		v->nvp++;
		ports_changed = true;
	}
	/* the locals with a port, as the config sees them */
	for (uint32_t i = 0; i < v->nvp; i++) {
		iod_strlcpy(v->lbuf[i].name, v->vp[i].name, sizeof(v->lbuf[i].name));
		v->lbuf[i].ip = v->vp[i].ip;
	}
	if (iod_agent_overlay_dp_config(&v->nd, v->tbuf, v->lbuf, v->nvp, v->cfg, &e)) {
		IOD_WARN("vswitch", "%s", e.msg);
		return;
	}
	add_services(v);
	if (!ports_changed && v->cur >= 0 && !memcmp(v->cfg, v->last, sizeof(*v->cfg)))
		return;
	int next = v->cur < 0 ? 0 : 1 - v->cur;
	int rc =
	    iod_flow_dp_rebuild(v->cfg, 1, &v->dp[next], v->cur >= 0 ? &v->dp[v->cur] : NULL, &e);
	if (v->cur >= 0)
		iod_flow_dp_destroy(&v->dp[v->cur]);
	v->cur = -1;
	v->loaded = false;
	if (rc) {
		IOD_ERROR("vswitch", "pipeline: %s (not forwarding until the next change)", e.msg);
		memset(v->last, 0, sizeof(*v->last));
		return;
	}
	v->cur = next;
	memcpy(v->last, v->cfg, sizeof(*v->cfg));
	/* host side: the host stack behind its MAC, each replica behind its own */
	v->hp[0] = &v->ports[IOD_DP_PORT_HOST];
	v->gp[0] = NULL; /* the node's own stack: the gateway and the l7 VIPs */
	iod_agent_overlay_mac(v->nd.gateway, false, v->hmac[0]);
	for (uint32_t i = 0; i < v->nvp; i++) {
		v->hp[i + 1] = &v->vp[i].port;
		v->gp[i + 1] = &v->vp[i].guard;
		iod_agent_overlay_mac(v->vp[i].ip, false, v->hmac[i + 1]);
	}
	update_ar(v);
	uint64_t rx = v->loop.rx_packets, spoofed = v->loop.spoofed;
	iod_dp_loop_init(&v->loop, &v->dp[v->cur], v->ar, v->ports);
	v->loop.rx_packets = rx;
	v->loop.spoofed = spoofed;
	iod_dp_loop_set_host_ports(&v->loop, v->hp, (const uint8_t(*)[6])v->hmac, v->nvp + 1);
	if (v->antispoof)
		iod_dp_loop_set_host_guards(&v->loop, v->gp);
	v->loop.on_spoof = on_spoof;
	v->loop.on_drop = on_drop;
	v->loop.on_drop_ctx = v;
	v->new_pipeline = true;
	v->loaded = true;
	uint32_t eps = 0;
	for (uint32_t n = 0; n < v->cfg->networks_n; n++)
		eps += v->cfg->networks[n].endpoints_n;
	char nets[256] = "";
	for (uint32_t n = 0, used = 0; n + 1 < v->cfg->networks_n && used < sizeof(nets); n++) {
		int k = snprintf(nets + used, sizeof(nets) - used, " %s=vni:%u",
		                 v->cfg->networks[n].name, v->cfg->networks[n].vni);
		used += k > 0 ? (uint32_t)k : 0;
	}
	IOD_INFO("vswitch",
	         "pipeline: %u networks (tenants + host), %u endpoints, %u local ports;%s",
	         v->cfg->networks_n, eps, v->nvp, nets);
}

/* Copy the ports' counters (written only by this thread) for readers. */
static void publish_ports(struct iod_agent_vswitch *v)
{
	uint64_t at_ms = iod_time_unix_ns() / IOD_NS_PER_MS;
	pthread_mutex_lock(&v->mu);
	uint32_t k = 0;
	iod_io_port_reading(&v->ports[IOD_DP_PORT_FABRIC], "fabric", "fabric", v->dev, at_ms,
	                    &v->pub[k++]);
	iod_io_port_reading(&v->ports[IOD_DP_PORT_HOST], "host", "host", v->host_port, at_ms,
	                    &v->pub[k++]);
	for (uint32_t i = 0; i < v->nvp; i++)
		iod_io_port_reading(&v->vp[i].port, v->vp[i].name, "replica", v->vp[i].veth, at_ms,
		                    &v->pub[k++]);
	v->pub_n = k;
	pthread_mutex_unlock(&v->mu);
}

uint32_t iod_agent_vswitch_ports(struct iod_agent_vswitch *v, struct iod_tel_port *out,
                                 uint32_t max)
{
	pthread_mutex_lock(&v->mu);
	uint32_t k = v->pub_n < max ? v->pub_n : max;
	memcpy(out, v->pub, k * sizeof(*out));
	pthread_mutex_unlock(&v->mu);
	return k;
}

static json_t *port_json(const char *name, const char *kind, const struct iod_io_port *p,
                         const struct iod_dp_port_guard *g)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(name));
	json_object_set_new(o, "kind", json_string(kind));
	json_object_set_new(o, "backend", json_string(p->ops ? p->ops->name : "closed"));
	json_object_set_new(o, "rx_packets", json_integer((json_int_t)p->stats.rx_packets));
	json_object_set_new(o, "tx_packets", json_integer((json_int_t)p->stats.tx_packets));
	json_object_set_new(o, "tx_errors", json_integer((json_int_t)p->stats.tx_errors));
	json_object_set_new(o, "rx_nobuf", json_integer((json_int_t)p->stats.rx_nobuf));
	/* GSO super-frames split on receipt, coalesced ones sent (replica ports) */
	json_object_set_new(o, "rx_gso", json_integer((json_int_t)p->stats.rx_gso));
	json_object_set_new(o, "tx_gro", json_integer((json_int_t)p->stats.tx_gro));
	if (g) { /* a replica's: its binding, what anti-spoofing refused by reason */
		char ip[20];
		json_t *why = json_object();
		uint64_t sum = 0;
		for (int r = IOD_NET_SPOOF_OK + 1; r < IOD_NET_SPOOF_N; r++) {
			sum += g->dropped[r];
			json_object_set_new(why, iod_net_spoof_name((enum iod_net_spoof_verdict)r),
			                    json_integer((json_int_t)g->dropped[r]));
		}
		iod_agent_ipv4_format(g->bind.ip, ip, sizeof(ip));
		json_object_set_new(o, "bound_ip", json_string(ip));
		json_object_set_new(o, "rx_spoofed", json_integer((json_int_t)sum));
		json_object_set_new(o, "rx_spoofed_by_reason", why);
	}
	return o;
}

/* The running pipeline as `iod dp dump` shows it (src/flow/dump.c), with
 * each entry's offload verdict (does it translate to rte_flow), the ports
 * and the conntrack sessions. Only this thread touches the pipeline. */
static char *build_dump(struct iod_agent_vswitch *v)
{
	json_t *j;
	if (v->cur >= 0) {
		const struct iod_flow_dp *dp = &v->dp[v->cur];
		j = iod_flow_dump_json(dp->pl, iod_flow_offload_verdict, dp->pl);
		uint32_t sessions = 0;
		for (uint32_t c = 0; c < dp->cores; c++)
			sessions += iod_net_ct_count(dp->ct[c]);
		json_object_set_new(j, "conntrack_sessions", json_integer(sessions));
	} else {
		j = json_pack("{s:[], s:s}", "pipes", "error",
		              "no pipeline (not built yet, or the last build failed: see the "
		              "agent's log)");
	}
	json_object_set_new(j, "node", json_string(v->nd.name));
	/* adaptive routing: per tenant network its policy, counters and paths
	 * per peer VTEP (port, last RTT, flows on it); ecmp has no state */
	json_t *ar = v->ar ? iod_flow_dp_ar_json(v->ar, iod_clock_now_ns()) : json_object();
	json_object_set_new(ar, "policy",
	                    json_string(iod_ar_policy_name((enum iod_ar_policy)v->nd.ar_policy)));
	json_object_set_new(j, "adaptive_routing", ar);
	json_t *ports = json_array();
	json_array_append_new(ports,
	                      port_json("fabric", "fabric", &v->ports[IOD_DP_PORT_FABRIC], NULL));
	json_array_append_new(ports, port_json("host", "host", &v->ports[IOD_DP_PORT_HOST], NULL));
	for (uint32_t i = 0; i < v->nvp; i++)
		json_array_append_new(
		    ports, port_json(v->vp[i].name, "replica", &v->vp[i].port, &v->vp[i].guard));
	json_object_set_new(j, "spoofed", json_integer((json_int_t)v->loop.spoofed));
	json_object_set_new(j, "ports", ports);
	/* the verdicts summed, as `iod dp dump --offload` sums a port's */
	json_int_t rules = 0, tr = 0;
	size_t i, k;
	json_t *p, *en;
	json_array_foreach(json_object_get(j, "pipes"), i, p)
	{
		json_array_foreach(json_object_get(p, "entries"), k, en)
		{
			rules++;
			tr += !strcmp(json_string_value(json_object_get(en, "offload")),
			              "translates");
		}
	}
	json_object_set_new(j, "offload",
	                    json_pack("{s:s, s:I, s:I, s:I, s:I, s:s}", "port",
	                              "none (translation only)", "rules", rules, "offloaded",
	                              (json_int_t)0, "software", rules - tr, "translates", tr,
	                              "template_api", "n/a"));
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

static void maybe_dump(struct iod_agent_vswitch *v)
{
	pthread_mutex_lock(&v->mu);
	uint64_t req = v->dump_req;
	pthread_mutex_unlock(&v->mu);
	if (req == v->dump_seq) /* only this thread writes dump_seq */
		return;
	char *s = build_dump(v);
	pthread_mutex_lock(&v->mu);
	free(v->dump);
	v->dump = s;
	v->dump_seq = req;
	pthread_cond_broadcast(&v->dump_cv);
	pthread_mutex_unlock(&v->mu);
}

int iod_agent_vswitch_dump(struct iod_agent_vswitch *v, char **out, struct iod_err *e)
{
	*out = NULL;
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += IOD_AGENT_VSWITCH_DUMP_WAIT_S;
	pthread_mutex_lock(&v->mu);
	uint64_t want = ++v->dump_req;
	int rc = 0;
	while (v->dump_seq < want && !v->stop && rc == 0)
		rc = pthread_cond_timedwait(&v->dump_cv, &v->mu, &until);
	if (v->dump_seq >= want && v->dump)
		*out = strdup(v->dump);
	pthread_mutex_unlock(&v->mu);
	if (*out)
		return 0;
	return iod_err_set(e, -ETIMEDOUT, "the virtual switch did not answer in %d s",
	                   IOD_AGENT_VSWITCH_DUMP_WAIT_S);
}

static void *vswitch_main(void *arg)
{
	struct iod_agent_vswitch *v = arg;
	uint64_t seen = UINT64_MAX;
	struct pollfd *pfd = calloc(IOD_AGENT_REPLICAS_MAX + 2, sizeof(*pfd));
	for (;;) {
		pthread_mutex_lock(&v->mu);
		bool stop = v->stop;
		uint64_t gen = v->gen;
		pthread_mutex_unlock(&v->mu);
		if (stop)
			break;
		uint64_t now = iod_clock_now_ns();
		if (ar_policy_changed(v, now) || gen != seen) {
			seen = gen;
			rebuild(v);
		}
		if (now - v->pub_ns >= IOD_AGENT_VSWITCH_STATS_MS * IOD_NS_PER_MS) {
			v->pub_ns = now;
			publish_ports(v);
		}
		maybe_dump(v);
		uint32_t got = v->loaded ? iod_dp_loop_step(&v->loop, now) : 0;
		if (got)
			continue;
		/* idle: wait (bounded) for any port */
		nfds_t n = 0;
		if (pfd) {
			pfd[n++] = (struct pollfd){iod_io_port_fd(&v->ports[IOD_DP_PORT_FABRIC]),
			                           POLLIN, 0};
			pfd[n++] =
			    (struct pollfd){iod_io_port_fd(&v->ports[IOD_DP_PORT_HOST]), POLLIN, 0};
			for (uint32_t i = 0; i < v->nvp; i++)
				pfd[n++] =
				    (struct pollfd){iod_io_port_fd(&v->vp[i].port), POLLIN, 0};
		}
		poll(pfd, n, IOD_AGENT_VSWITCH_IDLE_MS);
		maybe_publish_drops(v); /* and at each drop (on_drop), while busy */
	}
	free(pfd);
	return NULL;
}

int iod_agent_vswitch_start(struct iod_agent_vswitch **out, const struct iod_agent_config *c,
                            const struct iod_agent_netns *n, struct iod_err *e)
{
	struct iod_agent_vswitch *v = calloc(1, sizeof(*v));
	int rc;
	if (!v)
		return iod_err_set(e, -ENOMEM, "out of memory");
	v->cur = -1;
	v->udp_fd = -1;
	/* anti-spoofing: on unless IOD_VSWITCH_ANTISPOOF=off (the escape
	 * hatch; docs/network.md) */
	const char *as = getenv("IOD_VSWITCH_ANTISPOOF");
	v->antispoof = !(as && !strcmp(as, "off"));
	pthread_mutex_init(&v->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&v->dump_cv, &ca);
	pthread_condattr_destroy(&ca);
	v->locals = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*v->locals));
	v->veths = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*v->veths));
	v->lbuf = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*v->lbuf));
	v->vbuf = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*v->vbuf));
	v->vp = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*v->vp));
	v->hp = calloc(IOD_AGENT_REPLICAS_MAX + 1, sizeof(*v->hp));
	v->hmac = calloc(IOD_AGENT_REPLICAS_MAX + 1, sizeof(*v->hmac));
	v->gp = calloc(IOD_AGENT_REPLICAS_MAX + 1, sizeof(*v->gp));
	v->tbuf = calloc(1, sizeof(*v->tbuf));
	v->cfg = calloc(1, sizeof(*v->cfg));
	v->last = calloc(1, sizeof(*v->last));
	v->pub = calloc(IOD_AGENT_REPLICAS_MAX + 2, sizeof(*v->pub));
	v->sg_sum = calloc(IOD_AGENT_SG_RULES_MAX, sizeof(*v->sg_sum));
	if (!v->locals || !v->veths || !v->lbuf || !v->vbuf || !v->vp || !v->hp || !v->hmac ||
	    !v->gp || !v->tbuf || !v->cfg || !v->last || !v->pub || !v->sg_sum) {
		iod_agent_vswitch_stop(v);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	iod_strlcpy(v->nd.name, c->name, sizeof(v->nd.name));
	iod_strlcpy(v->dev, c->overlay_dev, sizeof(v->dev));
	iod_strlcpy(v->host_port, n->host_port, sizeof(v->host_port));
	v->drops = calloc(1, sizeof(*v->drops)); /* none: the switch runs without records */
	iod_strlcpy(v->data_dir, c->data_dir, sizeof(v->data_dir));
	memcpy(v->nd.underlay_gw_mac, c->overlay_gw_mac, 6);
	v->nd.gateway = iod_agent_ipam_gateway(&n->ipam);
	v->nd.overlay_net = n->overlay_net;
	v->nd.overlay_prefix = n->overlay_prefix;
	if ((rc = dev_info(v->dev, &v->nd.vtep_ip, v->nd.vtep_mac, e)) ||
	    (rc = open_port(&v->ports[IOD_DP_PORT_FABRIC], "fabric", v->dev, PORT_FABRIC, e)) ||
	    (rc = open_port(&v->ports[IOD_DP_PORT_HOST], "host", v->host_port, PORT_HOST, e))) {
		iod_agent_vswitch_stop(v);
		return rc;
	}
	/* the kernel's copy of each VXLAN frame lands here and is dropped when
	 * the (small) buffer is full: no ICMP port unreachable for them */
	v->udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(IOD_NET_VXLAN_PORT)};
	sa.sin_addr.s_addr = htonl(v->nd.vtep_ip);
	int small = 4096;
	if (v->udp_fd >= 0) {
		setsockopt(v->udp_fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		/* a peer's UDP_SEGMENT super-frame is queued (and dropped) whole,
		 * not split into its datagrams first */
		int one = 1;
		(void)setsockopt(v->udp_fd, IPPROTO_UDP, IOD_UDP_GRO, &one, sizeof(one));
		if (bind(v->udp_fd, (struct sockaddr *)&sa, sizeof(sa)))
			IOD_WARN("vswitch", "UDP %d on the VTEP: %s", IOD_NET_VXLAN_PORT,
			         strerror(errno));
	}
	/* the thread takes no signals: the agent reads SIGCHLD (its replicas'
	 * exits) and SIGTERM from a signalfd, and a thread that left them
	 * unblocked would take them instead, SIGCHLD's default discarding it:
	 * a replica whose exit was lost stayed "stopping" for good */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int trc = pthread_create(&v->th, NULL, vswitch_main, v);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (trc) {
		iod_agent_vswitch_stop(v);
		return iod_err_set(e, -EAGAIN, "cannot start the virtual switch's thread");
	}
	v->started = true;
	char vt[20];
	iod_agent_ipv4_format(v->nd.vtep_ip, vt, sizeof(vt));
	IOD_INFO("vswitch", "node %s: virtual switch up: VTEP %s on %s, host port %s", c->name, vt,
	         v->dev, v->host_port);
	*out = v;
	return 0;
}

void iod_agent_vswitch_stop(struct iod_agent_vswitch *v)
{
	if (!v)
		return;
	pthread_mutex_lock(&v->mu);
	v->stop = true;
	pthread_cond_broadcast(&v->dump_cv);
	pthread_mutex_unlock(&v->mu);
	if (v->started)
		pthread_join(v->th, NULL);
	if (v->cur >= 0)
		iod_flow_dp_destroy(&v->dp[v->cur]);
	iod_flow_dp_ar_destroy(v->ar);
	for (uint32_t i = 0; v->vp && i < v->nvp; i++)
		iod_io_port_close(&v->vp[i].port);
	for (int i = 0; i < 2; i++)
		if (v->ports[i].ops)
			iod_io_port_close(&v->ports[i]);
	if (v->udp_fd >= 0)
		close(v->udp_fd);
	pthread_mutex_destroy(&v->mu);
	pthread_cond_destroy(&v->dump_cv);
	free(v->dump);
	free(v->drops);
	free(v->table);
	free(v->locals);
	free(v->veths);
	free(v->lbuf);
	free(v->vbuf);
	free(v->vp);
	free(v->hp);
	free(v->hmac);
	free(v->gp);
	free(v->tbuf);
	free(v->cfg);
	free(v->last);
	free(v->pub);
	free(v->sg_sum);
	free(v);
}

void iod_agent_vswitch_port(struct iod_agent_vswitch *v, const char *name, const char *veth,
                            uint32_t ip, bool up)
{
	pthread_mutex_lock(&v->mu);
	uint32_t i;
	for (i = 0; i < v->nloc && strcmp(v->locals[i].name, name); i++)
		;
	if (up && i == v->nloc && v->nloc < IOD_AGENT_REPLICAS_MAX)
		v->nloc++;
	if (up && i < v->nloc) {
		iod_strlcpy(v->locals[i].name, name, sizeof(v->locals[i].name));
		v->locals[i].ip = ip;
		iod_strlcpy(v->veths[i], veth ? veth : "", sizeof(v->veths[i]));
	} else if (!up && i < v->nloc) {
		v->locals[i] = v->locals[v->nloc - 1];
		memcpy(v->veths[i], v->veths[v->nloc - 1], sizeof(v->veths[i]));
		v->nloc--;
	}
	v->gen++;
	pthread_mutex_unlock(&v->mu);
}

void iod_agent_vswitch_table(struct iod_agent_vswitch *v, const struct iod_agent_overlay_table *t)
{
	struct iod_agent_overlay_table *copy = malloc(sizeof(*copy));
	if (!copy)
		return;
	memcpy(copy, t, sizeof(*copy));
	pthread_mutex_lock(&v->mu);
	bool same = v->table && !memcmp(v->table, t, sizeof(*t));
	free(v->table);
	v->table = copy;
	if (!same)
		v->gen++;
	pthread_mutex_unlock(&v->mu);
}
