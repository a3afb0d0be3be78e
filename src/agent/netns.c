/*
 * netns.c: per-replica network namespaces with a veth pair (shell).
 *
 * When the agent is given a node subnet (and runs as root), each replica
 * gets its own network namespace "iod-<tag>-<replica>" (tag: a hash of the
 * node name, so two agents on one host never touch each other's), created
 * before the sandbox starts; the sandbox's init joins it. A veth pair
 * connects it to the node: "eth0" inside holds the replica's address (from
 * ipam.c, lowest free first) with a default route via the gateway, and the
 * host end "iv<tag>-<index>" is enslaved to the node's bridge "iodb<tag>",
 * which holds the gateway address. The agent, its health checks and the
 * node's other replicas reach a replica at its address; nothing is routed
 * beyond the subnet (the agent switches on no forwarding or NAT: those are
 * host-wide settings).
 *
 * The links and namespaces are made with iproute2 (`ip -batch`), run
 * directly (no shell), two runs per replica. Cleanup: the replica's veth and
 * netns go when it exits, the bridge when the agent stops, and a starting
 * agent first sweeps what a crashed one of the same node left. It decides
 * nothing about when: the agent loop does.
 */
#include "iod/agent_run.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NETNS_DIR "/run/netns"

int iod_agent_run_cmd(const char *prog, const char *const *args, const char *input, char *err,
                      size_t errlen)
{
	int in[2], ep[2];
	char *argv[24];
	unsigned n = 0;

	argv[n++] = (char *)prog;
	for (; args[n - 1] && n < IOD_ARRAY_LEN(argv) - 1; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	if (pipe2(in, O_CLOEXEC))
		return -errno;
	if (pipe2(ep, O_CLOEXEC)) {
		close(in[0]);
		close(in[1]);
		return -errno;
	}
	pid_t pid = fork();
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(in[0], 0);
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, 1);
		dup2(ep[1], 2);
		execvp(prog, argv);
		dprintf(2, "cannot run %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(ep[1]);
	if (pid < 0) {
		close(in[1]);
		close(ep[0]);
		return -errno;
	}
	if (input)
		(void)!write(in[1], input, strlen(input)); /* small: fits the pipe */
	close(in[1]);
	char buf[512];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(ep[0], buf + got, sizeof(buf) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == sizeof(buf) - 1)
			got = 0; /* keep reading; only the start matters and it is gone */
	}
	close(ep[0]);
	buf[got] = 0;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	snprintf(err, errlen, "%s", buf[0] ? buf : "failed");
	return -EIO;
}

/* `ip ARGS...` (iproute2), batch text on stdin. */
static int run_ip(const char *const *args, const char *input, char *err, size_t errlen)
{
	return iod_agent_run_cmd("ip", args, input, err, errlen);
}

int iod_agent_netns_name(const struct iod_agent_netns *n, const char *name, char *buf, size_t len)
{
	int k = snprintf(buf, len, "iod-%08x-%s", n->tag, name);
	return k < 0 || (size_t)k >= len ? -ENAMETOOLONG : 0;
}

static void veth_name(const struct iod_agent_netns *n, uint32_t index, char *buf, size_t len)
{
	snprintf(buf, len, "iv%06x-%u", n->tag & 0xffffff, index);
}

int iod_agent_netns_open_mode(struct iod_agent_netns *n, const char *node, const char *cidr,
                              bool overlay, struct iod_err *e);

/* Delete every netns of this node (their veth pairs go with them). */
static void sweep(struct iod_agent_netns *n)
{
	char prefix[32], err[256];
	snprintf(prefix, sizeof(prefix), "iod-%08x-", n->tag);
	DIR *d = opendir(NETNS_DIR);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		const char *args[] = {"netns", "del", de->d_name, NULL};
		run_ip(args, NULL, err, sizeof(err));
	}
	if (d)
		closedir(d);
}

/*
 * Overlay mode: no bridge. The node's host stack gets its own veth pair
 * into the virtual switch: "iodk<tag>" holds the gateway address (/32) and
 * routes the whole overlay through the switch (via a next hop that is the
 * switch's gateway MAC, a permanent neighbour), "iodp<tag>" is the switch's
 * port. The agent's health checks and anything on the node reach replicas
 * through it, and replicas reach the node at their gateway address.
 */
static int open_host_port(struct iod_agent_netns *n, const char *gw, struct iod_err *e)
{
	char batch[1024], err[256], ov[20], hop[20];
	uint32_t g = iod_agent_ipam_gateway(&n->ipam);
	uint8_t km[6], gm[6];
	iod_agent_ipv4_format(n->overlay_net, ov, sizeof(ov));
	/* the service VIPs are the host stack's own: the mesh proxy listens on
	 * those of l7 services (bound to this device, docs/network.md); the
	 * switch sends a VIP's packets here only for l7 services */
	char vips[20];
	iod_agent_ipv4_format(IOD_SVC_VIP_NET, vips, sizeof(vips));
	/* the overlay's last address but one: never a node's subnet's */
	iod_agent_ipv4_format(n->overlay_net | (~(~0u << (32 - n->overlay_prefix)) - 1), hop,
	                      sizeof(hop));
	iod_agent_overlay_mac(g, false, km);
	iod_agent_overlay_mac(g, true, gm);
	snprintf(batch, sizeof(batch),
	         "link add %s address 02:%02x:%02x:%02x:%02x:%02x mtu %u type veth peer name %s "
	         "mtu %u\n"
	         "link set %s arp off up\nlink set %s gso_max_segs 1 up\n"
	         "addr add %s/32 dev %s\n"
	         "neigh replace %s lladdr %02x:%02x:%02x:%02x:%02x:%02x dev %s nud permanent\n"
	         "route replace %s/%u via %s dev %s onlink\n"
	         "route replace local %s/%u dev lo\n",
	         n->host_kernel, km[1], km[2], km[3], km[4], km[5], IOD_AGENT_OVERLAY_MTU,
	         n->host_port, IOD_AGENT_OVERLAY_MTU, n->host_port, n->host_kernel, gw,
	         n->host_kernel, hop, gm[0], gm[1], gm[2], gm[3], gm[4], gm[5], n->host_kernel, ov,
	         n->overlay_prefix, hop, n->host_kernel, vips, (unsigned)IOD_SVC_VIP_PREFIX);
	const char *args[] = {"-batch", "-", NULL};
	int rc = run_ip(args, batch, err, sizeof(err));
	if (rc) {
		const char *del[] = {"link", "del", n->host_kernel, NULL};
		run_ip(del, NULL, err + 128, sizeof(err) - 128);
		return iod_err_set(e, rc, "overlay host port %s/%s with %s: %s", n->host_kernel,
		                   n->host_port, gw, err);
	}
	return 0;
}

void iod_agent_netns_host_kernel(const char *node, char *buf, size_t len)
{
	snprintf(buf, len, "iodk%08x", (uint32_t)iod_hash_str(node));
}

int iod_agent_netns_veth(const struct iod_agent_netns *n, const char *name, char *buf, size_t len)
{
	uint32_t index;
	if (iod_agent_ipam_find(&n->ipam, name, NULL, &index))
		return -ENOENT;
	snprintf(buf, len, "iv%06x-%u", n->tag & 0xffffff, index);
	return 0;
}

int iod_agent_netns_open_overlay(struct iod_agent_netns *n, const char *node, const char *cidr,
                                 struct iod_err *e)
{
	return iod_agent_netns_open_mode(n, node, cidr, true, e);
}

int iod_agent_netns_open(struct iod_agent_netns *n, const char *node, const char *cidr,
                         struct iod_err *e)
{
	return iod_agent_netns_open_mode(n, node, cidr, false, e);
}

int iod_agent_netns_open_mode(struct iod_agent_netns *n, const char *node, const char *cidr,
                              bool overlay, struct iod_err *e)
{
	char gw[20], batch[256], err[256];
	int rc;

	memset(n, 0, sizeof(*n));
	if ((rc = iod_agent_ipam_init(&n->ipam, cidr, e)))
		return rc;
	if (geteuid() != 0)
		return iod_err_set(
		    e, -EPERM,
		    "per-replica network namespaces need root (the agent runs as uid "
		    "%u): replicas share the node's network instead",
		    (unsigned)geteuid());
	iod_strlcpy(n->node, node, sizeof(n->node));
	n->tag = (uint32_t)iod_hash_str(node);
	snprintf(n->bridge, sizeof(n->bridge), "iodb%08x", n->tag);
	iod_agent_netns_host_kernel(node, n->host_kernel, sizeof(n->host_kernel));
	snprintf(n->host_port, sizeof(n->host_port), "iodp%08x", n->tag);
	n->overlay = overlay;
	/* the overlay: the /16 around the node's subnet (docs/network.md) */
	n->overlay_prefix = 16; /* ipam.c: a node subnet is /16 or longer */
	n->overlay_net = n->ipam.net & 0xffff0000u;
	sweep(n);
	const char *del[] = {"link", "del", n->bridge, NULL};
	run_ip(del, NULL, err, sizeof(err)); /* a crashed agent's bridge, if any */
	const char *delk[] = {"link", "del", n->host_kernel, NULL};
	run_ip(delk, NULL, err, sizeof(err)); /* and its overlay host port */
	iod_agent_ipv4_format(iod_agent_ipam_gateway(&n->ipam), gw, sizeof(gw));
	if (overlay) {
		if ((rc = open_host_port(n, gw, e)))
			return rc;
		n->up = true;
		return 0;
	}
	snprintf(batch, sizeof(batch),
	         "link add %s type bridge\naddr add %s/%u dev %s\nlink set %s up\n", n->bridge, gw,
	         n->ipam.prefix, n->bridge, n->bridge);
	const char *args[] = {"-batch", "-", NULL};
	if ((rc = run_ip(args, batch, err, sizeof(err)))) {
		run_ip(del, NULL, err + 128, sizeof(err) - 128);
		return iod_err_set(e, rc, "bridge %s with %s/%u: %s", n->bridge, gw, n->ipam.prefix,
		                   err);
	}
	n->up = true;
	return 0;
}

int iod_agent_netns_get(struct iod_agent_netns *n, const char *name, struct iod_agent_net *net,
                        struct iod_err *e)
{
	char ns[IOD_NAME_MAX + 16], veth[16], gw[20], path[IOD_NAME_MAX + 32];
	char batch[512], err[256];
	uint32_t addr, index;
	int rc;

	net->netns_fd = -1;
	net->addr[0] = 0;
	if (!n->up)
		return iod_err_set(e, -ENODEV, "replica %s: the node's bridge is not up", name);
	if ((rc = iod_agent_netns_name(n, name, ns, sizeof(ns))))
		return iod_err_set(e, rc, "replica %s: name too long for a netns", name);
	if ((rc = iod_agent_ipam_alloc(&n->ipam, name, &addr, &index, e)))
		return rc;
	veth_name(n, index, veth, sizeof(veth));
	iod_agent_ipv4_format(addr, net->addr, sizeof(net->addr));
	net->nameserver[0] = 0;
	if (n->overlay) /* the node's DNS responder: on the gateway (meshhost.c) */
		iod_agent_ipv4_format(iod_agent_ipam_gateway(&n->ipam), net->nameserver,
		                      sizeof(net->nameserver));
	iod_agent_ipv4_format(iod_agent_ipam_gateway(&n->ipam), gw, sizeof(gw));
	snprintf(path, sizeof(path), "%s/%s", NETNS_DIR, ns);
	if (access(path, F_OK) == 0) { /* the last run's, not cleaned up */
		const char *del[] = {"netns", "del", ns, NULL};
		run_ip(del, NULL, err, sizeof(err));
	}
	/* eth0's MAC follows from its address: a replica that restarts in a
	 * fresh netns keeps both, so the node's and its peers' ARP entries stay
	 * right (a new MAC would leave them stale for tens of seconds) */
	if (n->overlay) /* the host end is a port of the virtual switch, not the kernel's */
		snprintf(batch, sizeof(batch),
		         "netns add %s\nlink add %s mtu %u type veth peer name eth0 address "
		         "02:1d:%02x:%02x:%02x:%02x mtu %u netns %s\n"
		         "link set %s arp off up\n",
		         ns, veth, IOD_AGENT_OVERLAY_MTU, addr >> 24, (addr >> 16) & 255,
		         (addr >> 8) & 255, addr & 255, IOD_AGENT_OVERLAY_MTU, ns, veth);
	else
		snprintf(batch, sizeof(batch),
		         "netns add %s\nlink add %s type veth peer name eth0 address "
		         "02:1d:%02x:%02x:%02x:%02x netns %s\n"
		         "link set %s master %s\nlink set %s up\n",
		         ns, veth, addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255, addr & 255,
		         ns, veth, n->bridge, veth);
	const char *host[] = {"-batch", "-", NULL};
	if ((rc = run_ip(host, batch, err, sizeof(err)))) {
		iod_err_set(e, rc, "replica %s: netns %s, veth %s: %s", name, ns, veth, err);
		goto fail;
	}
	/* overlay: a /32 behind the gateway, so every packet (to a neighbour
	 * too) goes to the switch, which routes it. The switch splits GSO
	 * super-frames into segments that fit the underlay after VXLAN's 50
	 * bytes (iod_agent_vswitch_gso); without that, one segment a frame */
	if (n->overlay)
		snprintf(batch, sizeof(batch),
		         "link set lo up\naddr add %s/32 dev eth0\n"
		         "link set eth0 %s up\nroute add %s dev eth0\n"
		         "route add default via %s dev eth0\n",
		         net->addr, iod_agent_vswitch_gso() ? "" : "gso_max_segs 1", gw, gw);
	else
		snprintf(batch, sizeof(batch),
		         "link set lo up\naddr add %s/%u dev eth0\nlink set eth0 up\n"
		         "route add default via %s\n",
		         net->addr, n->ipam.prefix, gw);
	const char *inside[] = {"-n", ns, "-batch", "-", NULL};
	if ((rc = run_ip(inside, batch, err, sizeof(err)))) {
		iod_err_set(e, rc, "replica %s: address %s/%u in netns %s: %s", name, net->addr,
		            n->ipam.prefix, ns, err);
		goto fail;
	}
	net->netns_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (net->netns_fd < 0) {
		rc = iod_err_set(e, -errno, "replica %s: %s: %s", name, path, strerror(errno));
		goto fail;
	}
	if (n->overlay && n->vsw)
		iod_agent_vswitch_port(n->vsw, name, veth, addr, true);
	return 0;
fail:
	iod_agent_netns_put(n, name, net);
	return rc;
}

void iod_agent_netns_put(struct iod_agent_netns *n, const char *name, struct iod_agent_net *net)
{
	char ns[IOD_NAME_MAX + 16], veth[16], path[IOD_NAME_MAX + 32], batch[256] = "", err[256];
	uint32_t index;

	if (net && net->netns_fd >= 0) {
		close(net->netns_fd);
		net->netns_fd = -1;
	}
	if (!n->up || iod_agent_netns_name(n, name, ns, sizeof(ns)))
		return;
	if (n->overlay && n->vsw)
		iod_agent_vswitch_port(n->vsw, name, NULL, 0, false);
	/* the host end first: the kernel destroys a netns (and the veth in it)
	 * asynchronously, and nothing should be left to see after we return */
	size_t l = 0;
	if (!iod_agent_ipam_find(&n->ipam, name, NULL, &index)) {
		veth_name(n, index, veth, sizeof(veth));
		l = (size_t)snprintf(batch, sizeof(batch), "link del %s\n", veth);
	}
	snprintf(path, sizeof(path), "%s/%s", NETNS_DIR, ns);
	if (access(path, F_OK) == 0)
		snprintf(batch + l, sizeof(batch) - l, "netns del %s\n", ns);
	if (batch[0]) {
		const char *args[] = {"-force", "-batch", "-", NULL};
		run_ip(args, batch, err, sizeof(err));
	}
}

void iod_agent_netns_close(struct iod_agent_netns *n)
{
	char err[256];
	if (!n->up)
		return;
	for (uint32_t i = 0; i < n->ipam.hosts; i++)
		if (n->ipam.owner[i][0]) {
			char name[IOD_NAME_MAX];
			memcpy(name, n->ipam.owner[i], sizeof(name));
			iod_agent_netns_put(n, name, NULL);
			iod_agent_ipam_release(&n->ipam, name);
		}
	sweep(n);
	const char *del[] = {"link", "del", n->overlay ? n->host_kernel : n->bridge, NULL};
	run_ip(del, NULL, err, sizeof(err));
	if (n->overlay) { /* the VIPs' local route stays with lo: take it back */
		char vips[24];
		iod_agent_ipv4_format(IOD_SVC_VIP_NET, vips, sizeof(vips));
		snprintf(vips + strlen(vips), sizeof(vips) - strlen(vips), "/%d",
		         IOD_SVC_VIP_PREFIX);
		const char *dl[] = {"route", "del", "local", vips, "dev", "lo", NULL};
		run_ip(dl, NULL, err, sizeof(err));
	}
	n->up = false;
}
