/*
 * outlier.c: passive outlier detection with Envoy's semantics.
 *
 * A host that returns `consecutive_5xx` 5xx responses (or resets, or connect
 * failures) in a row, or `consecutive_connect_fail` connect failures in a
 * row, is ejected at once for base_ejection x (times ejected), capped at
 * max_ejection. At most max_ejection_bp of the hosts may be ejected at a
 * time, but one host always may (as Envoy does). Every `interval` that an
 * un-ejected host stays un-ejected, its multiplier drops by one. The panic
 * threshold is applied by the load balancer (lb.c), not here.
 * Pure: time comes in as now_ns; nothing here reads a clock.
 */
#include "iod/mesh.h"

#include <string.h>

void iod_mesh_outlier_init(struct iod_mesh_outlier *o, uint32_t n)
{
	IOD_ASSERT(n <= IOD_MESH_ENDPOINTS_MAX);
	memset(o, 0, sizeof(*o));
	o->n = n;
}

static uint32_t max_ejectable(const struct iod_mesh_outlier *o,
                              const struct iod_mesh_outlier_cfg *c)
{
	uint32_t m = (uint32_t)((uint64_t)o->n * c->max_ejection_bp / 10000u);
	return m ? m : 1u;
}

static bool eject(struct iod_mesh_outlier *o, const struct iod_mesh_outlier_cfg *c,
                  struct iod_mesh_host_state *h, uint64_t now_ns)
{
	if (o->ejected >= max_ejectable(o, c))
		return false;
	h->ejections++;
	uint64_t cap = IOD_MAX(c->base_ejection_ns, c->max_ejection_ns);
	uint64_t d = c->base_ejection_ns * h->ejections;
	if (h->ejections && d / h->ejections != c->base_ejection_ns)
		d = cap; /* overflow */
	d = IOD_MIN(d, cap);
	h->ejected_until_ns = now_ns + IOD_MAX(d, 1u);
	h->consecutive_5xx = 0;
	h->consecutive_connect = 0;
	h->ejections_total++;
	o->ejected++;
	IOD_ASSERT(o->ejected <= o->n);
	return true;
}

bool iod_mesh_outlier_report(struct iod_mesh_outlier *o, const struct iod_mesh_outlier_cfg *c,
                             uint32_t host, enum iod_mesh_result r, uint64_t now_ns)
{
	IOD_ASSERT_HOT(host < o->n);
	struct iod_mesh_host_state *h = &o->hosts[host];

	switch (r) {
	case IOD_MESH_OK:
		h->consecutive_5xx = 0;
		h->consecutive_connect = 0;
		return false;
	case IOD_MESH_CONNECT_FAIL:
		h->consecutive_connect++;
		h->consecutive_5xx++;
		break;
	case IOD_MESH_HTTP_5XX:
	case IOD_MESH_RESET:
		h->consecutive_connect = 0;
		h->consecutive_5xx++;
		break;
	}
	if (h->ejected_until_ns)
		return false; /* already out: results of requests in flight do not extend it */
	if ((c->consecutive_5xx && h->consecutive_5xx >= c->consecutive_5xx) ||
	    (c->consecutive_connect_fail && h->consecutive_connect >= c->consecutive_connect_fail))
		return eject(o, c, h, now_ns);
	return false;
}

uint32_t iod_mesh_outlier_tick(struct iod_mesh_outlier *o, const struct iod_mesh_outlier_cfg *c,
                               uint64_t now_ns)
{
	uint32_t back = 0;

	for (uint32_t i = 0; i < o->n; i++) {
		struct iod_mesh_host_state *h = &o->hosts[i];
		if (h->ejected_until_ns) {
			if (now_ns < h->ejected_until_ns)
				continue;
			h->ejected_until_ns = 0;
			h->last_decay_ns = now_ns;
			IOD_ASSERT(o->ejected > 0);
			o->ejected--;
			back++;
		} else if (h->ejections && c->interval_ns &&
		           now_ns - h->last_decay_ns >= c->interval_ns) {
			h->ejections--;
			h->last_decay_ns = now_ns;
		}
	}
	return back;
}
