/*
 * vip.c: service VIPs on the overlay (pure), chosen by the deploy plan
 * and stored on each Service object (docs/network.md, "Service VIPs").
 *
 * Why the control plane and not each agent: a VIP must be the same on
 * every node and unique in the cluster. A hash of the name alone collides
 * (50 services in 4,094 slots collide with a chance of about 26%), and
 * resolving a collision by the set of names present would move an
 * existing service's address when another is added. The deploy plan sees
 * every stored Service and plans one deploy at a time
 * (src/api/server_write.c), so a probe from the name's slot over the
 * addresses already taken gives a unique address that never changes for
 * as long as the service exists. It must never do I/O or read the clock.
 */
#include "iod/ctrl.h"

bool iod_ctrl_vip_in_range(uint32_t ip)
{
	uint32_t mask = ~0u << (32 - IOD_SVC_VIP_PREFIX);
	return (ip & mask) == IOD_SVC_VIP_NET && ip != IOD_SVC_VIP_NET &&
	       ip != (IOD_SVC_VIP_NET | ~mask);
}

static bool taken_by(uint32_t ip, const uint32_t *taken, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (taken[i] == ip)
			return true;
	return false;
}

int iod_ctrl_vip_pick(const char *name, uint32_t keep, const uint32_t *taken, uint32_t n,
                      uint32_t *vip)
{
	IOD_ASSERT(name && vip);
	if (keep && iod_ctrl_vip_in_range(keep) && !taken_by(keep, taken, n)) {
		*vip = keep;
		return 0;
	}
	uint32_t slot = (uint32_t)(iod_hash_str(name) % IOD_SVC_VIPS_MAX);
	for (uint32_t probe = 0; probe < IOD_SVC_VIPS_MAX; probe++) {
		uint32_t ip = IOD_SVC_VIP_NET + 1 + (slot + probe) % IOD_SVC_VIPS_MAX;
		IOD_ASSERT(iod_ctrl_vip_in_range(ip));
		if (!taken_by(ip, taken, n)) {
			*vip = ip;
			return 0;
		}
	}
	return -ENOSPC;
}
