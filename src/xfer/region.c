/*
 * region.c: libiod-xfer's pure bookkeeping: the table of registered regions
 * with its limits, the bounds check of a slice, the transport names, and
 * the NIC choice per buffer from iod's topology.
 *
 * The NIC choice is here so that the failure NIXL users met (nixl#791: UCX
 * picking a far NIC for GPU memory) is decided by a tested rule, not by
 * whatever device order UCX enumerates. Pure: no I/O, no clock.
 */
#include "iod/xfer.h"

#include <string.h>

static const char *const transport_names[] = {
#define X(n, s) s,
    IOD_XFER_TRANSPORTS(X)
#undef X
};

const char *iod_xfer_transport_name(enum iod_xfer_transport t)
{
	return (unsigned)t < IOD_XFER_TRANSPORT_COUNT ? transport_names[t] : "?";
}

int iod_xfer_transport_parse(const char *s, enum iod_xfer_transport *t)
{
	for (unsigned i = 0; i < IOD_XFER_TRANSPORT_COUNT; i++)
		if (strcmp(s, transport_names[i]) == 0) {
			*t = (enum iod_xfer_transport)i;
			return 0;
		}
	return -EINVAL;
}

void iod_xfer_regions_init(struct iod_xfer_regions *t, uint64_t bytes_max)
{
	memset(t, 0, sizeof(*t));
	t->next_id = 1;
	t->bytes_max = bytes_max ? bytes_max : IOD_XFER_REG_BYTES_MAX;
}

int iod_xfer_regions_add(struct iod_xfer_regions *t, uint64_t addr, uint64_t len, uint8_t mem,
                         struct iod_xfer_region **out, struct iod_err *e)
{
	IOD_ASSERT(t && out);
	*out = NULL;
	if (len == 0)
		return iod_err_set(e, -EINVAL, "xfer: cannot register an empty region");
	if (addr + len < addr)
		return iod_err_set(e, -EINVAL, "xfer: region at 0x%llx of %llu bytes wraps",
		                   (unsigned long long)addr, (unsigned long long)len);
	if (len > IOD_XFER_REGION_BYTES_MAX)
		return iod_err_set(e, -E2BIG,
		                   "xfer: region of %llu bytes is past the limit of %llu bytes per "
		                   "region (IOD_XFER_REGION_BYTES_MAX); register it in pieces",
		                   (unsigned long long)len,
		                   (unsigned long long)IOD_XFER_REGION_BYTES_MAX);
	if (len > t->bytes_max - t->bytes)
		return iod_err_set(
		    e, -E2BIG,
		    "xfer: registering %llu more bytes would pin %llu, past the limit "
		    "of %llu (xfer reg_bytes_max); deregister a region first",
		    (unsigned long long)len, (unsigned long long)(t->bytes + len),
		    (unsigned long long)t->bytes_max);
	struct iod_xfer_region *slot = NULL;
	for (unsigned i = 0; i < IOD_XFER_REGIONS_MAX && !slot; i++)
		if (t->r[i].id == 0)
			slot = &t->r[i];
	if (!slot)
		return iod_err_set(e, -E2BIG,
		                   "xfer: %d regions registered, the most a context holds",
		                   IOD_XFER_REGIONS_MAX);
	memset(slot, 0, sizeof(*slot));
	slot->id = t->next_id++;
	if (t->next_id == 0)
		t->next_id = 1;
	slot->addr = addr;
	slot->len = len;
	slot->mem = mem;
	slot->nic = -1;
	t->bytes += len;
	*out = slot;
	IOD_ASSERT(t->bytes <= t->bytes_max);
	return 0;
}

struct iod_xfer_region *iod_xfer_regions_find(struct iod_xfer_regions *t, uint32_t id)
{
	if (id == 0)
		return NULL;
	for (unsigned i = 0; i < IOD_XFER_REGIONS_MAX; i++)
		if (t->r[i].id == id)
			return &t->r[i];
	return NULL;
}

int iod_xfer_regions_remove(struct iod_xfer_regions *t, uint32_t id, struct iod_err *e)
{
	struct iod_xfer_region *r = iod_xfer_regions_find(t, id);
	if (!r)
		return iod_err_set(e, -ENOENT, "xfer: region %u is not registered", id);
	if (r->busy)
		return iod_err_set(
		    e, -EBUSY, "xfer: region %u is used by %u request(s); wait first", id, r->busy);
	IOD_ASSERT(t->bytes >= r->len);
	t->bytes -= r->len;
	memset(r, 0, sizeof(*r));
	return 0;
}

int iod_xfer_desc_check(const struct iod_xfer_desc *d, uint64_t region_len, const char *side,
                        struct iod_err *e)
{
	if (d->len == 0)
		return iod_err_set(e, -EINVAL, "xfer: %s slice of region %u is empty", side,
		                   d->region);
	if (d->offset > region_len || d->len > region_len - d->offset)
		return iod_err_set(
		    e, -ERANGE,
		    "xfer: %s slice [%llu, +%llu) is too large for region %u of %llu "
		    "bytes",
		    side, (unsigned long long)d->offset, (unsigned long long)d->len, d->region,
		    (unsigned long long)region_len);
	return 0;
}

int iod_xfer_signal_check(const struct iod_xfer_op *last, uint64_t remote_end, struct iod_err *e)
{
	if (last->op != IOD_XFER_WRITE)
		return iod_err_set(e, -EINVAL,
		                   "xfer: a signalled post must end with a write (the signal)");
	if (last->remote.len < 8)
		return iod_err_set(e, -EINVAL,
		                   "xfer: a signalled post's last write of %llu bytes is shorter "
		                   "than its 8-byte signal word",
		                   (unsigned long long)last->remote.len);
	if (remote_end % 8)
		return iod_err_set(e, -EINVAL,
		                   "xfer: a signalled post's last write must end 8-byte aligned "
		                   "in region %u (its end is %llu bytes past a multiple of 8)",
		                   last->remote.region, (unsigned long long)(remote_end % 8));
	return 0;
}

int iod_xfer_signal_word_check(uint64_t addr, uint64_t region_len, uint64_t offset,
                               struct iod_err *e)
{
	if (region_len < 8 || offset > region_len - 8)
		return iod_err_set(e, -ERANGE,
		                   "xfer: signal word at %llu is past the region of %llu bytes",
		                   (unsigned long long)offset, (unsigned long long)region_len);
	if ((addr + offset) % 8)
		return iod_err_set(e, -EINVAL, "xfer: signal word at %llu is not 8-byte aligned",
		                   (unsigned long long)offset);
	return 0;
}

/* Lower is closer: the PCIe link class (SELF < PIX < ... < SYS). */
static bool better(const struct iod_topo_node *n, int cand, int best, unsigned cand_dist,
                   unsigned best_dist)
{
	if (best < 0)
		return true;
	if (cand_dist != best_dist)
		return cand_dist < best_dist;
	const struct iod_topo_device *c = &n->devices[n->nic[cand]];
	const struct iod_topo_device *b = &n->devices[n->nic[best]];
	uint64_t cb = (uint64_t)c->port_bps * (c->ports ? c->ports : 1);
	uint64_t bb = (uint64_t)b->port_bps * (b->ports ? b->ports : 1);
	return cb > bb; /* equal: keep the lower index */
}

int iod_xfer_nic_choose(const struct iod_topo_node *n, enum iod_xfer_mem mem, int gpu, int numa)
{
	if (!n || n->nnics == 0)
		return -1;
	int gdev = -1;
	if (mem == IOD_XFER_MEM_GPU && gpu >= 0)
		for (unsigned d = 0; d < n->ndevices; d++)
			if (n->devices[d].kind == IOD_TOPO_DEV_GPU &&
			    n->devices[d].gpu_index == gpu)
				gdev = (int)d;
	if (gdev >= 0 && numa < 0)
		numa = n->devices[gdev].numa;
	int best = -1;
	unsigned best_dist = 0;
	for (unsigned i = 0; i < n->nnics; i++) {
		int dev = n->nic[i];
		IOD_ASSERT(dev >= 0 && (unsigned)dev < n->ndevices);
		unsigned dist;
		if (gdev >= 0)
			dist = n->link[gdev][dev].pcie;
		else /* host memory: same NUMA node first, unknown next, others last */
			dist = n->devices[dev].numa == numa ? 0 : n->devices[dev].numa < 0 ? 1 : 2;
		if (better(n, (int)i, best, dist, best_dist)) {
			best = (int)i;
			best_dist = dist;
		}
	}
	return best;
}
