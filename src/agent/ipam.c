/*
 * ipam.c: replica addresses on the node's subnet (pure), for per-replica
 * network namespaces.
 *
 * The subnet's first host address is the gateway (the node's bridge); the
 * replicas get the following ones, lowest free first, each owned by a
 * replica name until released, so a restarted replica keeps its address and
 * the same sequence of allocations always gives the same addresses. A full
 * subnet is an explicit -ENOSPC. It must never do I/O or read the clock.
 *
 * A slot is a replica's index on the node (its veth's name); its address is
 * the slot's own (net + 2 + slot) unless the control plane chose another
 * (iod_agent_ipam_claim: src/ctrl/ipam.c's choice, carried by the Replica),
 * so an allocation skips every address a claim holds, whichever slot.
 */
#include "iod/agent.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

void iod_agent_ipv4_format(uint32_t addr, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255,
	         addr & 255);
}

int iod_agent_ipam_init(struct iod_agent_ipam *m, const char *cidr, struct iod_err *e)
{
	char ip[32];
	const char *sl = strchr(cidr, '/');
	struct in_addr a;
	char *end;

	memset(m, 0, sizeof(*m));
	if (!sl || (size_t)(sl - cidr) >= sizeof(ip))
		return iod_err_set(e, -EINVAL, "subnet %s: want an IPv4 CIDR such as 10.213.0.0/24",
		                   cidr);
	memcpy(ip, cidr, (size_t)(sl - cidr));
	ip[sl - cidr] = 0;
	if (inet_pton(AF_INET, ip, &a) != 1)
		return iod_err_set(e, -EINVAL, "subnet %s: %s is not an IPv4 address", cidr, ip);
	errno = 0;
	long pfx = strtol(sl + 1, &end, 10);
	if (errno || end == sl + 1 || *end || pfx < 16 || pfx > 29)
		return iod_err_set(e, -EINVAL,
		                   "subnet %s: prefix length must be /16 to /29 (a gateway and at "
		                   "least 5 replicas)",
		                   cidr);
	uint32_t mask = ~0u << (32 - pfx);
	uint32_t net = ntohl(a.s_addr);
	if (net & ~mask)
		return iod_err_set(e, -EINVAL,
		                   "subnet %s: host bits set (did you mean %u.%u.%u.%u/%ld?)", cidr,
		                   (net & mask) >> 24, ((net & mask) >> 16) & 255,
		                   ((net & mask) >> 8) & 255, (net & mask) & 255, pfx);
	m->net = net;
	m->prefix = (uint32_t)pfx;
	/* all hosts minus network, broadcast and gateway */
	uint64_t hosts = (1ull << (32 - pfx)) - 3;
	m->hosts = (uint32_t)IOD_MIN(hosts, (uint64_t)IOD_AGENT_IPAM_MAX);
	return 0;
}

uint32_t iod_agent_ipam_gateway(const struct iod_agent_ipam *m)
{
	return m->net + 1;
}

uint32_t iod_agent_ipam_slot_addr(const struct iod_agent_ipam *m, uint32_t i)
{
	return m->addr[i] ? m->addr[i] : m->net + 2 + i;
}

/* The slot holding address a (another owner's), or -1. */
static int holder(const struct iod_agent_ipam *m, uint32_t a)
{
	for (uint32_t i = 0; i < m->hosts; i++)
		if (m->owner[i][0] && iod_agent_ipam_slot_addr(m, i) == a)
			return (int)i;
	return -1;
}

int iod_agent_ipam_claim(struct iod_agent_ipam *m, const char *name, uint32_t addr, uint32_t *index,
                         struct iod_err *e)
{
	char ip[20];
	uint32_t i;
	iod_agent_ipv4_format(addr, ip, sizeof(ip));
	if (!name[0] || strlen(name) >= IOD_NAME_MAX)
		return iod_err_set(e, -EINVAL, "replica name empty or longer than %d bytes",
		                   IOD_NAME_MAX - 1);
	if (!addr || addr == m->net + 1)
		return iod_err_set(e, -EINVAL, "replica %s: %s is not a replica address", name, ip);
	int h = holder(m, addr);
	if (h >= 0 && strcmp(m->owner[h], name))
		return iod_err_set(e, -EADDRINUSE,
		                   "replica %s: its address %s is %s's on this node", name, ip,
		                   m->owner[h]);
	if (iod_agent_ipam_find(m, name, NULL, &i)) { /* a slot of its own */
		for (i = 0; i < m->hosts && m->owner[i][0]; i++)
			;
		if (i == m->hosts)
			return iod_err_set(e, -ENOSPC, "replica %s: no free slot (%u in use)", name,
			                   m->hosts);
		memcpy(m->owner[i], name, strlen(name) + 1);
	}
	m->addr[i] = addr == m->net + 2 + i ? 0 : addr;
	if (index)
		*index = i;
	return 0;
}

int iod_agent_ipam_find(const struct iod_agent_ipam *m, const char *name, uint32_t *addr,
                        uint32_t *index)
{
	for (uint32_t i = 0; i < m->hosts; i++)
		if (m->owner[i][0] && !strcmp(m->owner[i], name)) {
			if (addr)
				*addr = iod_agent_ipam_slot_addr(m, i);
			if (index)
				*index = i;
			return 0;
		}
	return -ENOENT;
}

int iod_agent_ipam_alloc(struct iod_agent_ipam *m, const char *name, uint32_t *addr,
                         uint32_t *index, struct iod_err *e)
{
	if (!name[0] || strlen(name) >= IOD_NAME_MAX)
		return iod_err_set(e, -EINVAL, "replica name empty or longer than %d bytes",
		                   IOD_NAME_MAX - 1);
	if (!iod_agent_ipam_find(m, name, addr, index))
		return 0;
	/* the lowest address no slot holds, in the lowest free slot */
	uint32_t slot = 0;
	while (slot < m->hosts && m->owner[slot][0])
		slot++;
	for (uint32_t k = 0; slot < m->hosts && k < m->hosts; k++) {
		if (holder(m, m->net + 2 + k) >= 0)
			continue;
		memcpy(m->owner[slot], name, strlen(name) + 1);
		m->addr[slot] = k == slot ? 0 : m->net + 2 + k;
		if (addr)
			*addr = m->net + 2 + k;
		if (index)
			*index = slot;
		return 0;
	}
	char net[20];
	iod_agent_ipv4_format(m->net, net, sizeof(net));
	return iod_err_set(e, -ENOSPC,
	                   "replica %s: subnet %s/%u is full (%u replica addresses in use); give "
	                   "the node a larger subnet (--netns-subnet)",
	                   name, net, m->prefix, m->hosts);
}

int iod_agent_ipam_release(struct iod_agent_ipam *m, const char *name)
{
	uint32_t i;
	if (iod_agent_ipam_find(m, name, NULL, &i))
		return -ENOENT;
	m->owner[i][0] = 0;
	m->addr[i] = 0;
	return 0;
}

uint32_t iod_agent_ipam_used(const struct iod_agent_ipam *m)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->hosts; i++)
		n += m->owner[i][0] != 0;
	return n;
}

/* One "host:port[,host:port...]" value with this node's replicas' host
 * replaced by their own addresses; -E2BIG when out is too small. */
static int localize_list(const char *val, const char *node_addr, const struct iod_agent_ipam *m,
                         char *out, size_t len)
{
	size_t used = 0;
	const char *p = val;
	out[0] = 0;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t l = end ? (size_t)(end - p) : strlen(p);
		const char *colon = memchr(p, ':', l);
		char host[64] = "";
		if (colon && (size_t)(colon - p) < sizeof(host) &&
		    (size_t)(colon - p) == strlen(node_addr) &&
		    !strncmp(p, node_addr, strlen(node_addr))) {
			unsigned long port = strtoul(colon + 1, NULL, 10);
			for (uint32_t i = 0; i < m->hosts; i++)
				if (m->owner[i][0] && iod_agent_replica_port(m->owner[i]) == port) {
					iod_agent_ipv4_format(iod_agent_ipam_slot_addr(m, i), host,
					                      sizeof(host));
					break;
				}
		}
		int n = host[0] ? snprintf(out + used, len - used, "%s%s:%lu", used ? "," : "",
		                           host, strtoul(colon + 1, NULL, 10))
		                : snprintf(out + used, len - used, "%s%.*s", used ? "," : "",
		                           (int)l, p);
		if (n < 0 || (size_t)n >= len - used)
			return -E2BIG;
		used += (size_t)n;
		p += l + (end ? 1 : 0);
	}
	return 0;
}

int iod_agent_env_rewrite(struct iod_agent_replica *r, iod_agent_env_fn fn, void *ctx)
{
	char *buf = calloc(1, sizeof(r->env_buf)), val[IOD_AGENT_ENV_BYTES_MAX];
	size_t used = 0;
	int rc = 0;
	if (!buf)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->envc && !rc; i++) {
		const char *kv = iod_agent_strv_at(r->env_buf, sizeof(r->env_buf), r->envc, i);
		const char *eq = kv ? strchr(kv, '=') : NULL;
		if (!kv) {
			rc = -EINVAL;
			break;
		}
		size_t kl = eq ? (size_t)(eq - kv) : 0;
		int n = eq && fn(ctx, kv, kl, eq + 1, val, sizeof(val)) == 1
		            ? snprintf(buf + used, sizeof(r->env_buf) - used, "%.*s=%s", (int)kl,
		                       kv, val)
		            : snprintf(buf + used, sizeof(r->env_buf) - used, "%s", kv);
		if (n < 0 || (size_t)n >= sizeof(r->env_buf) - used)
			rc = -E2BIG;
		else
			used += (size_t)n + 1;
	}
	if (!rc)
		memcpy(r->env_buf, buf, sizeof(r->env_buf));
	free(buf);
	return rc;
}

struct localize {
	const char *node_addr;          /* this node's address */
	const struct iod_agent_ipam *m; /* its replicas' addresses */
};

/* IOD_PEERS, IOD_ADDR, IOD_DEP_*: this node's replicas at their addresses. */
static int localize_var(void *ctx, const char *var, size_t kl, const char *val, char *out,
                        size_t len)
{
	const struct localize *l = ctx;
	bool addrs = (kl == 9 && !strncmp(var, "IOD_PEERS", 9)) ||
	             (kl == 8 && !strncmp(var, "IOD_ADDR", 8)) ||
	             (kl > 8 && !strncmp(var, "IOD_DEP_", 8));
	return addrs && localize_list(val, l->node_addr, l->m, out, len) == 0;
}

int iod_agent_env_localize(struct iod_agent_replica *r, const char *node_addr,
                           const struct iod_agent_ipam *m)
{
	struct localize l = {node_addr, m};
	return iod_agent_env_rewrite(r, localize_var, &l);
}
