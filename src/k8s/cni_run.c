/*
 * cni_run.c: the CNI plugin's shell: links, namespaces and address state.
 *
 * ADD attaches the container's netns to a Linux bridge of the node (the
 * bridge holds the subnet's gateway): a veth pair "iodc<hash>" (host end,
 * on the bridge) / CNI_IFNAME (in the container, MAC 02:1d:<address> as
 * the agent's replicas), an address from the agent's pure allocator
 * (src/agent/ipam.c) and a default route via the gateway. The allocator's
 * state is kept host-local style: one file per address in the data
 * directory ("<address>" holding "<container id>\n<ifname>\n"), every call
 * under an flock of "<dir>/lock", so concurrent ADDs never share an
 * address. Links are made with iproute2 (iod_agent_run_cmd, no shell);
 * the container side runs after setns(2) into CNI_NETNS (this process is
 * single-threaded) and returns to the host netns after.
 *
 * Not the iod virtual switch: attaching pods to the agent's data plane
 * (docs/network.md) is issue 17's; docs/kubernetes.md says so.
 */
#include "iod/agent.h"
#include "iod/agent_run.h"
#include "iod/k8s.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct cni_state {
	char dir[300];
	int lock_fd;
	struct iod_agent_ipam ipam;
	char key[32];
	char host_if[16];
};

static int io_fail(struct iod_cni_error *err, const char *what, const char *path)
{
	return iod_cni_fail(err, IOD_CNI_E_IO, "I/O failure", "%s %s: %s", what, path,
	                    strerror(errno));
}

static int mkdir_p(const char *dir)
{
	char p[300];
	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, 0755) && errno != EEXIST)
				return -errno;
			*s = '/';
		}
	return mkdir(p, 0755) && errno != EEXIST ? -errno : 0;
}

/* The record of address file name: its container id and ifname. */
static int rec_read(const char *dir, const char *name, char *cid, size_t cidlen, char *ifn,
                    size_t iflen)
{
	char path[340], buf[IOD_CNI_ID_MAX + 40];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EINVAL;
	buf[n] = 0;
	char *nl = strchr(buf, '\n');
	char *nl2 = nl ? strchr(nl + 1, '\n') : NULL;
	if (!nl || !nl2)
		return -EINVAL;
	*nl = *nl2 = 0;
	if (iod_strlcpy(cid, buf, cidlen) < 0 || iod_strlcpy(ifn, nl + 1, iflen) < 0)
		return -EINVAL;
	return 0;
}

static int rec_write(const struct cni_state *s, uint32_t addr, const char *cid, const char *ifn,
                     struct iod_cni_error *err)
{
	char ip[20], path[340], tmp[350];
	iod_agent_ipv4_format(addr, ip, sizeof(ip));
	snprintf(path, sizeof(path), "%s/%s", s->dir, ip);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return io_fail(err, "writing", tmp);
	fprintf(f, "%s\n%s\n", cid, ifn);
	if (fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, path))
		return io_fail(err, "writing", path);
	return 0;
}

static void rec_remove(const struct cni_state *s, uint32_t addr)
{
	char ip[20], path[340];
	iod_agent_ipv4_format(addr, ip, sizeof(ip));
	snprintf(path, sizeof(path), "%s/%s", s->dir, ip);
	unlink(path);
}

/* Lock the data directory and load every address record into the allocator. */
static int state_open(struct cni_state *s, const struct iod_cni_conf *c, struct iod_cni_error *err)
{
	struct iod_err e = {0};
	char path[340];
	memset(s, 0, sizeof(*s));
	s->lock_fd = -1;
	if (c->data_dir[0])
		snprintf(s->dir, sizeof(s->dir), "%s", c->data_dir);
	else
		snprintf(s->dir, sizeof(s->dir), "%s/%s", IOD_CNI_DATA_DIR, c->name);
	if (iod_agent_ipam_init(&s->ipam, c->subnet, &e))
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config", "ipam: %s",
		                    e.msg);
	if (mkdir_p(s->dir))
		return io_fail(err, "creating", s->dir);
	snprintf(path, sizeof(path), "%s/lock", s->dir);
	s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->lock_fd < 0 || flock(s->lock_fd, LOCK_EX))
		return io_fail(err, "locking", path);
	DIR *d = opendir(s->dir);
	if (!d)
		return io_fail(err, "reading", s->dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		struct in_addr a;
		char cid[IOD_CNI_ID_MAX], ifn[16], key[32];
		if (inet_pton(AF_INET, de->d_name, &a) != 1)
			continue;
		uint32_t ip = ntohl(a.s_addr), i = ip - s->ipam.net - 2;
		if (ip < s->ipam.net + 2 || i >= s->ipam.hosts)
			continue; /* another subnet's */
		if (rec_read(s->dir, de->d_name, cid, sizeof(cid), ifn, sizeof(ifn)))
			snprintf(key, sizeof(key), "cni-unreadable"); /* kept: never reused */
		else
			iod_cni_owner_key(cid, ifn, key, sizeof(key));
		memcpy(s->ipam.owner[i], key, strlen(key) + 1);
	}
	closedir(d);
	return 0;
}

static void state_close(struct cni_state *s)
{
	if (s->lock_fd >= 0)
		close(s->lock_fd); /* releases the flock */
	s->lock_fd = -1;
}

static void names_for(struct cni_state *s, const char *cid, const char *ifn)
{
	iod_cni_owner_key(cid, ifn, s->key, sizeof(s->key));
	/* "cni-" + 16 hex: the host end takes 8 of them */
	snprintf(s->host_if, sizeof(s->host_if), "iodc%.8s", s->key + 4);
}

static int ip_batch(const char *batch, char *msg, size_t len)
{
	const char *args[] = {"-batch", "-", NULL};
	return iod_agent_run_cmd("ip", args, batch, msg, len);
}

static void link_del(const char *name)
{
	char msg[128];
	const char *args[] = {"link", "del", name, NULL};
	iod_agent_run_cmd("ip", args, NULL, msg, sizeof(msg));
}

/* Run fn(arg) inside the netns at path, then come back. */
static int in_netns(const char *path, int (*fn)(void *), void *arg, struct iod_cni_error *err)
{
	int host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (host < 0 || fd < 0 || setns(fd, CLONE_NEWNET)) {
		int rc = iod_cni_fail(err, IOD_CNI_E_CONTAINER, "container netns not found",
		                      "CNI_NETNS %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		if (host >= 0)
			close(host);
		return rc;
	}
	int rc = fn(arg);
	if (setns(host, CLONE_NEWNET)) /* cannot happen: our own netns */
		abort();
	close(fd);
	close(host);
	return rc;
}

static int has_if(void *name)
{
	return if_nametoindex(name) ? 1 : 0;
}

static void mac_of(const char *ifn, char *mac, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/sys/class/net/%s/address", ifn);
	mac[0] = 0;
	FILE *f = fopen(path, "re");
	if (f) {
		if (fgets(mac, (int)len, f))
			mac[strcspn(mac, "\n")] = 0;
		fclose(f);
	}
}

static void fmt_mac(char *buf, size_t len, unsigned b1, uint32_t a)
{
	snprintf(buf, len, "02:%02x:%02x:%02x:%02x:%02x", b1, a >> 24, (a >> 16) & 255,
	         (a >> 8) & 255, a & 255);
}

struct inside {
	const struct iod_cni_attach *a;
	char msg[256];
};

static int configure_inside(void *arg)
{
	struct inside *in = arg;
	char batch[512], ip[20], gw[20];
	iod_agent_ipv4_format(in->a->addr, ip, sizeof(ip));
	iod_agent_ipv4_format(in->a->gateway, gw, sizeof(gw));
	snprintf(batch, sizeof(batch),
	         "link set lo up\naddr add %s/%u dev %s\nlink set %s up\n"
	         "route add default via %s dev %s\n",
	         ip, in->a->prefix, in->a->ifname, in->a->ifname, gw, in->a->ifname);
	return ip_batch(batch, in->msg, sizeof(in->msg));
}

/* The host end on the bridge, the container end in CNI_NETNS. */
static int make_links(const struct iod_cni_conf *c, const struct iod_cni_env *env,
                      struct iod_cni_attach *a, struct iod_cni_error *err)
{
	char batch[768], gw[20], msg[256], mtu[16] = "";
	iod_agent_ipv4_format(a->gateway, gw, sizeof(gw));
	if (c->mtu)
		snprintf(mtu, sizeof(mtu), " mtu %u", c->mtu);
	size_t l = 0;
	if (if_nametoindex(c->bridge) == 0) { /* a fixed MAC: else it follows its ports' */
		char bmac[18];
		fmt_mac(bmac, sizeof(bmac), 0x1e, a->gateway);
		l = (size_t)snprintf(batch, sizeof(batch), "link add %s address %s%s type bridge\n",
		                     c->bridge, bmac, mtu);
	}
	snprintf(batch + l, sizeof(batch) - l,
	         "addr replace %s/%u dev %s\nlink set %s up\n"
	         "link add %s address %s%s type veth peer name %s address %s%s netns %s\n"
	         "link set %s master %s\nlink set %s up\n",
	         gw, a->prefix, c->bridge, c->bridge, a->host_if, a->host_mac, mtu, a->ifname,
	         a->mac, mtu, env->netns, a->host_if, c->bridge, a->host_if);
	if (ip_batch(batch, msg, sizeof(msg))) {
		link_del(a->host_if);
		return iod_cni_fail(err, IOD_CNI_E_LINK, "creating the pod's links failed",
		                    "bridge %s, veth %s/%s: %s", c->bridge, a->host_if, a->ifname,
		                    msg);
	}
	struct inside in = {.a = a};
	err->code = 0;
	int rc = in_netns(env->netns, configure_inside, &in, err);
	if (rc) {
		link_del(a->host_if);
		if (!err->code)
			return iod_cni_fail(err, IOD_CNI_E_LINK,
			                    "configuring the pod's interface failed",
			                    "%s in %s: %s", a->ifname, env->netns, in.msg);
		return rc;
	}
	mac_of(c->bridge, a->bridge_mac, sizeof(a->bridge_mac));
	return 0;
}

static int cni_add(const struct iod_cni_env *env, const struct iod_cni_conf *c, json_t **out,
                   struct iod_cni_error *err)
{
	struct cni_state s;
	struct iod_cni_attach a = {0};
	struct iod_err e = {0};
	uint32_t addr, index;
	int rc = state_open(&s, c, err);
	if (rc)
		goto done;
	rc = in_netns(env->netns, has_if, (void *)env->ifname, err);
	if (rc) {
		if (rc > 0)
			rc =
			    iod_cni_fail(err, IOD_CNI_E_EXISTS, "interface exists in the container",
			                 "%s already exists in %s", env->ifname, env->netns);
		goto done;
	}
	names_for(&s, env->container_id, env->ifname);
	bool had = !iod_agent_ipam_find(&s.ipam, s.key, NULL, NULL);
	if ((rc = iod_agent_ipam_alloc(&s.ipam, s.key, &addr, &index, &e))) {
		rc = iod_cni_fail(err, IOD_CNI_E_IPAM, "no free address",
		                  "network %s: subnet %s is full "
		                  "(%u addresses in use)",
		                  c->name, c->subnet, iod_agent_ipam_used(&s.ipam));
		goto done;
	}
	if (!had && (rc = rec_write(&s, addr, env->container_id, env->ifname, err)))
		goto done;
	snprintf(a.bridge, sizeof(a.bridge), "%s", c->bridge);
	snprintf(a.host_if, sizeof(a.host_if), "%s", s.host_if);
	snprintf(a.ifname, sizeof(a.ifname), "%s", env->ifname);
	fmt_mac(a.host_mac, sizeof(a.host_mac), 0x1c, addr);
	fmt_mac(a.mac, sizeof(a.mac), 0x1d, addr);
	a.sandbox = env->netns;
	a.addr = addr;
	a.gateway = iod_agent_ipam_gateway(&s.ipam);
	a.prefix = s.ipam.prefix;
	if ((rc = make_links(c, env, &a, err))) {
		if (!had)
			rec_remove(&s, addr);
		goto done;
	}
	*out = iod_cni_result(c, &a);
done:
	state_close(&s);
	return rc;
}

/* DEL: give the address back and delete the veth (which takes the pod's
 * end with it); whatever is already gone is success. */
static int cni_del(const struct iod_cni_env *env, const struct iod_cni_conf *c,
                   struct iod_cni_error *err)
{
	struct cni_state s;
	uint32_t addr;
	int rc = state_open(&s, c, err);
	if (!rc) {
		names_for(&s, env->container_id, env->ifname);
		if (!iod_agent_ipam_find(&s.ipam, s.key, &addr, NULL))
			rec_remove(&s, addr);
		if (if_nametoindex(s.host_if))
			link_del(s.host_if);
	}
	state_close(&s);
	return rc;
}

/* prevResult's address of the interface named ifname in sandbox netns. */
static int prev_addr(const json_t *prev, const struct iod_cni_env *env, char *addr, size_t len)
{
	const json_t *ifs = json_object_get(prev, "interfaces"), *ip;
	size_t i;
	json_array_foreach(json_object_get(prev, "ips"), i, ip)
	{
		const char *a, *name, *sb;
		uint64_t k;
		if (iod_json_get_str(ip, "address", &a) || iod_json_get_u64(ip, "interface", &k))
			continue;
		const json_t *f = json_array_get(ifs, (size_t)k);
		if (!iod_json_get_str(f, "name", &name) && !strcmp(name, env->ifname) &&
		    !iod_json_get_str(f, "sandbox", &sb) && !strcmp(sb, env->netns))
			return iod_strlcpy(addr, a, len) < 0 ? -EINVAL : 0;
	}
	return -ENOENT;
}

struct has_addr {
	const char *ifname;
	uint32_t addr;
};

/* 1 when the interface is up and holds the address, else 0. */
static int check_inside(void *arg)
{
	struct has_addr *h = arg;
	struct ifaddrs *list, *i;
	int found = 0;
	if (getifaddrs(&list))
		return 0;
	for (i = list; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    !strcmp(i->ifa_name, h->ifname) && (i->ifa_flags & IFF_UP) &&
		    ntohl(((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr) == h->addr)
			found = 1;
	freeifaddrs(list);
	return found;
}

static int cni_check(const struct iod_cni_env *env, const struct iod_cni_conf *c,
                     struct iod_cni_error *err)
{
	struct cni_state s;
	char want[40], have[40], master[64], path[80], ip[20];
	uint32_t addr;
	if (!c->prev_result)
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "CHECK needs prevResult (the result of ADD)");
	if (prev_addr(c->prev_result, env, want, sizeof(want)))
		return iod_cni_fail(err, IOD_CNI_E_CHECK, "prevResult has no address for the pod",
		                    "no ips[] entry for interface %s in %s", env->ifname,
		                    env->netns);
	int rc = state_open(&s, c, err);
	if (rc)
		goto done;
	names_for(&s, env->container_id, env->ifname);
	rc = iod_agent_ipam_find(&s.ipam, s.key, &addr, NULL);
	iod_agent_ipv4_format(addr, ip, sizeof(ip));
	snprintf(have, sizeof(have), "%s/%u", rc ? "none" : ip, s.ipam.prefix);
	if (rc || strcmp(have, want)) {
		rc = iod_cni_fail(err, IOD_CNI_E_CHECK, "address not as allocated",
		                  "%s/%s holds %s, prevResult says %s", env->container_id,
		                  env->ifname, rc ? "no address" : have, want);
		goto done;
	}
	snprintf(path, sizeof(path), "/sys/class/net/%s/master", s.host_if);
	ssize_t n = readlink(path, master, sizeof(master) - 1);
	master[n > 0 ? n : 0] = 0;
	if (n <= 0 || strcmp(strrchr(master, '/') ? strrchr(master, '/') + 1 : master, c->bridge)) {
		rc = iod_cni_fail(err, IOD_CNI_E_CHECK, "host veth missing or off the bridge",
		                  "%s is not a port of %s", s.host_if, c->bridge);
		goto done;
	}
	struct has_addr h = {env->ifname, addr};
	err->code = 0;
	rc = in_netns(env->netns, check_inside, &h, err);
	if (rc == 1)
		rc = 0;
	else if (!err->code)
		rc = iod_cni_fail(err, IOD_CNI_E_CHECK, "pod interface missing or wrong",
		                  "%s in %s is not up with %s", env->ifname, env->netns, want);
done:
	state_close(&s);
	return rc;
}

static bool kept(const struct iod_cni_conf *c, const char *cid, const char *ifn)
{
	for (uint32_t i = 0; i < c->valid_n; i++)
		if (!strcmp(c->valid[i].container_id, cid) &&
		    (!c->valid[i].ifname[0] || !strcmp(c->valid[i].ifname, ifn)))
			return true;
	return false;
}

/* GC: every attachment of this network that the runtime does not list goes. */
static int cni_gc(const struct iod_cni_conf *c, struct iod_cni_error *err)
{
	struct cni_state s;
	if (!c->has_valid)
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "GC needs \"cni.dev/valid-attachments\" (may be [])");
	int rc = state_open(&s, c, err);
	DIR *d = rc ? NULL : opendir(s.dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char cid[IOD_CNI_ID_MAX], ifn[16];
		struct in_addr a;
		if (inet_pton(AF_INET, de->d_name, &a) != 1 ||
		    rec_read(s.dir, de->d_name, cid, sizeof(cid), ifn, sizeof(ifn)) ||
		    kept(c, cid, ifn))
			continue;
		names_for(&s, cid, ifn);
		if (if_nametoindex(s.host_if))
			link_del(s.host_if);
		rec_remove(&s, ntohl(a.s_addr));
	}
	if (d)
		closedir(d);
	state_close(&s);
	return rc;
}

/* STATUS: ready when the state can be locked and an address is free. */
static int cni_status(const struct iod_cni_conf *c, struct iod_cni_error *err)
{
	struct cni_state s;
	if (!c->subnet[0])
		return iod_cni_fail(err, IOD_CNI_E_UNAVAILABLE, "plugin not available",
		                    "the config has no ipam.subnet");
	int rc = state_open(&s, c, err);
	if (rc)
		rc = iod_cni_fail(err, IOD_CNI_E_UNAVAILABLE, "plugin not available", "%.200s",
		                  err->details);
	else if (iod_agent_ipam_used(&s.ipam) >= s.ipam.hosts)
		rc = iod_cni_fail(err, IOD_CNI_E_UNAVAILABLE, "plugin not available",
		                  "network %s: subnet %s is full", c->name, c->subnet);
	state_close(&s);
	return rc;
}

int iod_cni_run(const struct iod_cni_env *env, const struct iod_cni_conf *c, json_t **out,
                struct iod_cni_error *err)
{
	*out = NULL;
	switch (env->cmd) {
	case IOD_CNI_ADD: return cni_add(env, c, out, err);
	case IOD_CNI_DEL: return cni_del(env, c, err);
	case IOD_CNI_CHECK: return cni_check(env, c, err);
	case IOD_CNI_GC: return cni_gc(c, err);
	case IOD_CNI_STATUS: return cni_status(c, err);
	case IOD_CNI_VERSION: *out = iod_cni_version_json(c->version); return 0;
	}
	return iod_cni_fail(err, IOD_CNI_E_ENV, "unknown CNI_COMMAND", "internal");
}
