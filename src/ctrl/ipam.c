/*
 * ipam.c: the control plane's IPAM (pure): which overlay address each
 * replica of a `iod up --netns` cluster has, decided where it is placed (the
 * deploy plan, the rescheduling plan), so that the address is known before
 * the replica runs: its agent puts it on the replica's veth, its peers'
 * IOD_PEERS / IOD_DEP_* name it (desired.c), and every node's VTEP table
 * routes it to the replica's node (overlay.c). The rules are in ctrl.h.
 *
 * A table of (replica, address) pairs: small (a cluster's replicas), looked
 * through linearly. Deterministic; no I/O, no clock.
 */
#include "iod/ctrl.h"
#include "iod/net.h"

#include <stdlib.h>
#include <string.h>

static int put(struct iod_ctrl_ipam *m, const char *name, uint32_t ip)
{
	for (uint32_t i = 0; i < m->n; i++)
		if (!strcmp(m->e[i].name, name)) {
			m->e[i].ip = ip;
			return 0;
		}
	if (m->n == m->cap) {
		uint32_t cap = m->cap ? 2 * m->cap : 64;
		struct iod_ctrl_ipam_entry *e = realloc(m->e, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		m->e = e;
		m->cap = cap;
	}
	iod_strlcpy(m->e[m->n].name, name, sizeof(m->e[m->n].name));
	m->e[m->n++].ip = ip;
	return 0;
}

/* Whether a replica other than name holds ip. */
static bool held(const struct iod_ctrl_ipam *m, const char *name, uint32_t ip)
{
	for (uint32_t i = 0; i < m->n; i++)
		if (m->e[i].ip == ip && strcmp(m->e[i].name, name))
			return true;
	return false;
}

int iod_ctrl_ipam_init(struct iod_ctrl_ipam *m, const json_t *replicas)
{
	size_t i;
	json_t *x;
	memset(m, 0, sizeof(*m));
	json_array_foreach(json_object_get(replicas, "items"), i, x)
	{
		const char *name = NULL;
		const char *a = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, json_object_get(x, "value"),
		                                 IOD_OBJ_REPLICA_ADDR);
		uint32_t ip;
		if (iod_json_get_str(x, "name", &name) || strlen(name) >= IOD_NAME_MAX || !a ||
		    iod_net_ipv4_parse(a, &ip))
			continue;
		if (put(m, name, ip)) {
			iod_ctrl_ipam_free(m);
			return -ENOMEM;
		}
	}
	return 0;
}

void iod_ctrl_ipam_free(struct iod_ctrl_ipam *m)
{
	free(m->e);
	memset(m, 0, sizeof(*m));
}

int iod_ctrl_ipam_subnet(const json_t *node_value, uint32_t *net, uint32_t *prefix)
{
	const char *s = iod_obj_peek_str(IOD_OBJ_KIND_NODE, node_value, IOD_OBJ_NODE_SUBNET);
	char ip[20];
	if (!s || !s[0])
		return -ENOENT;
	const char *sl = strchr(s, '/');
	if (!sl || (size_t)(sl - s) >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, s, (size_t)(sl - s));
	ip[sl - s] = 0;
	char *end;
	long pfx = strtol(sl + 1, &end, 10);
	uint32_t a;
	if (end == sl + 1 || *end || pfx < 16 || pfx > 29 || iod_net_ipv4_parse(ip, &a))
		return -EINVAL;
	uint32_t mask = ~0u << (32 - pfx);
	if (a & ~mask)
		return -EINVAL;
	*net = a;
	*prefix = (uint32_t)pfx;
	return 0;
}

int iod_ctrl_ipam_assign(struct iod_ctrl_ipam *m, const char *name, uint32_t net, uint32_t prefix,
                         uint32_t cur, bool keep_any, uint32_t *ip, struct iod_err *e)
{
	IOD_ASSERT(prefix >= 16 && prefix <= 29);
	uint32_t hosts = (uint32_t)IOD_MIN((1ull << (32 - prefix)) - 3, IOD_AGENT_IPAM_MAX);
	bool in = cur >= net + 2 && cur < net + 2 + hosts;
	uint32_t pick = 0;
	if (cur && (in || keep_any) && !held(m, name, cur))
		pick = cur;
	for (uint32_t k = 0; !pick && k < hosts; k++)
		if (!held(m, name, net + 2 + k))
			pick = net + 2 + k;
	if (!pick)
		return iod_err_set(e, -ENOSPC,
		                   "replica %s: subnet %u.%u.%u.%u/%u has no free address (%u in "
		                   "use)",
		                   name, net >> 24, (net >> 16) & 255, (net >> 8) & 255, net & 255,
		                   prefix, hosts);
	if (put(m, name, pick))
		return iod_err_set(e, -ENOMEM, "out of memory");
	*ip = pick;
	return 0;
}
