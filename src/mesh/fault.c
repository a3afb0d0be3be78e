/*
 * fault.c: whether one request meets an injected fault (include/iod/mesh.h,
 * struct iod_mesh_fault). The proxy rolls once per request, after its
 * policy check and before it picks an upstream, as Envoy's fault filter
 * sits before the router.
 *
 * Pure: the caller passes the wall clock and the worker's rng.
 */
#include "iod/mesh.h"

static bool part_on(uint32_t pct, uint64_t until_ns, uint64_t now)
{
	return pct && (!until_ns || now < until_ns);
}

static bool hit(uint32_t pct, struct iod_rng *rng)
{
	return pct >= 100 || iod_rng_below(rng, 100) < pct;
}

bool iod_mesh_fault_active(const struct iod_mesh_fault *f, uint64_t now_unix_ns)
{
	return part_on(f->delay_pct, f->delay_until_ns, now_unix_ns) ||
	       part_on(f->abort_pct, f->abort_until_ns, now_unix_ns);
}

void iod_mesh_fault_roll(const struct iod_mesh_fault *f, uint64_t now_unix_ns, struct iod_rng *rng,
                         uint64_t *delay_ns, uint16_t *abort_status)
{
	*delay_ns = 0;
	*abort_status = 0;
	if (part_on(f->delay_pct, f->delay_until_ns, now_unix_ns) && f->delay_ns &&
	    hit(f->delay_pct, rng))
		*delay_ns = f->delay_ns;
	if (part_on(f->abort_pct, f->abort_until_ns, now_unix_ns) && f->abort_status &&
	    hit(f->abort_pct, rng))
		*abort_status = f->abort_status;
}
