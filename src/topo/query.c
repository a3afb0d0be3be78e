/*
 * query.c: the questions the scheduler asks of a node's topology: link
 * class, estimated bandwidth and latency between two devices, the
 * go-gpuallocator score of a GPU pair or set, the NIC and CPUs nearest a GPU
 * set, NVLink islands.
 *
 * Pure and allocation-free: they read a finalized node and write only to
 * their outputs; at most O(devices^2) work. They run in the scheduler's inner
 * loop (10,000 replicas x 1,000 nodes), so they must never do I/O or malloc.
 */
#include "internal.h"

#include <string.h>

/* GPU sets fit in the first word of a bitmap: GPU indexes are < 32. */
_Static_assert(IOD_TOPO_GPUS_MAX <= 64, "GPU sets are read from one bitmap word");

static inline uint64_t gpu_mask(const struct iod_topo_node *n, const struct iod_bitmap *gpus)
{
	uint64_t all = n->ngpus >= 64 ? ~0ull : (1ull << n->ngpus) - 1;
	return gpus->w[0] & all;
}

enum iod_topo_link_class iod_topo_link_class(const struct iod_topo_node *n, unsigned a, unsigned b)
{
	IOD_ASSERT_HOT(a < n->ndevices && b < n->ndevices);
	const struct iod_topo_link *l = &n->link[a][b];
	if (a == b)
		return IOD_TOPO_LINK_SELF;
	return l->nvlinks ? IOD_TOPO_LINK_NVLINK : (enum iod_topo_link_class)l->pcie;
}

void iod_topo_link_label(const struct iod_topo_node *n, unsigned a, unsigned b, char *buf,
                         size_t len)
{
	enum iod_topo_link_class c = iod_topo_link_class(n, a, b);
	if (c == IOD_TOPO_LINK_SELF)
		snprintf(buf, len, " X ");
	else if (c == IOD_TOPO_LINK_NVLINK)
		snprintf(buf, len, "NV%u", n->link[a][b].nvlinks);
	else
		snprintf(buf, len, "%s", iod_topo_link_class_name(c));
}

/* Defaults when a device does not say: PCIe gen3 x16, NVLink 25 GB/s. */
#define PCIE_DEFAULT_BPS (15753846153ull * 8)
#define NVLINK_DEFAULT_BPS (25000000000ull * 8)

static uint64_t pcie_bps(const struct iod_topo_device *d)
{
	return d->pcie_bps ? d->pcie_bps : PCIE_DEFAULT_BPS;
}

uint64_t iod_topo_link_bw_bps(const struct iod_topo_node *n, unsigned a, unsigned b)
{
	IOD_ASSERT_HOT(a < n->ndevices && b < n->ndevices);
	const struct iod_topo_device *da = &n->devices[a], *db = &n->devices[b];
	const struct iod_topo_link *l = &n->link[a][b];

	if (a == b)
		return 0; /* not a transfer between devices */
	if (l->nvlinks) {
		uint64_t per = IOD_MIN(da->nvlink_bps ? da->nvlink_bps : NVLINK_DEFAULT_BPS,
		                       db->nvlink_bps ? db->nvlink_bps : NVLINK_DEFAULT_BPS);
		return per * l->nvlinks;
	}
	uint64_t bw = IOD_MIN(pcie_bps(da), pcie_bps(db));
	/* Peer-to-peer through the root complex and the socket interconnect
	 * loses bandwidth; the factors are documented estimates, not
	 * measurements (docs/topology.md). */
	switch ((enum iod_topo_link_class)l->pcie) {
	case IOD_TOPO_LINK_PHB: return bw / 10 * 9;
	case IOD_TOPO_LINK_NODE: return bw / 10 * 8;
	case IOD_TOPO_LINK_SYS: return bw / 2;
	default: return bw;
	}
}

uint64_t iod_topo_link_latency_ns(const struct iod_topo_node *n, unsigned a, unsigned b)
{
	/* order-of-magnitude estimates for a small peer-to-peer write */
	static const uint64_t ns[] = {
	    [IOD_TOPO_LINK_SELF] = 0,    [IOD_TOPO_LINK_NVLINK] = 700, [IOD_TOPO_LINK_BOARD] = 900,
	    [IOD_TOPO_LINK_PIX] = 1000,  [IOD_TOPO_LINK_PXB] = 1300,   [IOD_TOPO_LINK_PHB] = 1600,
	    [IOD_TOPO_LINK_NODE] = 2000, [IOD_TOPO_LINK_SYS] = 3000,   [IOD_TOPO_LINK_NET] = 5000,
	};
	return ns[iod_topo_link_class(n, a, b)];
}

unsigned iod_topo_gpu_pair_score(const struct iod_topo_node *n, unsigned g1, unsigned g2)
{
	IOD_ASSERT_HOT(g1 < n->ngpus && g2 < n->ngpus);
	if (g1 == g2)
		return 0;
	const struct iod_topo_link *l = &n->link[n->gpu[g1]][n->gpu[g2]];
	unsigned s;
	switch ((enum iod_topo_link_class)l->pcie) {
	case IOD_TOPO_LINK_BOARD: s = 60; break;
	case IOD_TOPO_LINK_PIX: s = 50; break;
	case IOD_TOPO_LINK_PXB: s = 40; break;
	case IOD_TOPO_LINK_PHB: s = 30; break;
	case IOD_TOPO_LINK_NODE: s = 20; break;
	case IOD_TOPO_LINK_SYS: s = 10; break;
	default: s = 0; break;
	}
	return s + IOD_TOPO_SCORE_NVLINK * l->nvlinks;
}

uint64_t iod_topo_gpu_set_score(const struct iod_topo_node *n, const struct iod_bitmap *gpus)
{
	uint64_t sum = 0;
	for (uint64_t m = gpu_mask(n, gpus); m; m &= m - 1) {
		unsigned g = (unsigned)__builtin_ctzll(m);
		for (uint64_t r = m & (m - 1); r; r &= r - 1)
			sum += iod_topo_gpu_pair_score(n, g, (unsigned)__builtin_ctzll(r));
	}
	return sum;
}

int iod_topo_nearest_nic(const struct iod_topo_node *n, const struct iod_bitmap *gpus)
{
	int best = -1;
	unsigned best_worst = 0, best_sum = 0;
	uint64_t best_bw = 0;

	for (unsigned k = 0; k < n->nnics; k++) {
		unsigned nic = (unsigned)n->nic[k], worst = 0, sum = 0, members = 0;
		for (uint64_t m = gpu_mask(n, gpus); m; m &= m - 1) {
			unsigned c = n->link[nic][n->gpu[__builtin_ctzll(m)]].pcie;
			worst = IOD_MAX(worst, c);
			sum += c;
			members++;
		}
		if (!members)
			return -1;
		uint64_t bw = n->devices[nic].port_bps * n->devices[nic].ports;
		if (best < 0 || worst < best_worst || (worst == best_worst && sum < best_sum) ||
		    (worst == best_worst && sum == best_sum && bw > best_bw)) {
			best = (int)nic;
			best_worst = worst;
			best_sum = sum;
			best_bw = bw;
		}
	}
	return best;
}

int iod_topo_nearest_numa(const struct iod_topo_node *n, const struct iod_bitmap *gpus)
{
	unsigned votes[IOD_TOPO_NUMA_MAX] = {0};
	int best = -1;

	for (int g = iod_bitmap_next(gpus, 0); g >= 0 && g < (int)n->ngpus;
	     g = iod_bitmap_next(gpus, (unsigned)g + 1)) {
		int m = n->devices[n->gpu[g]].numa;
		if (m >= 0)
			votes[m]++;
	}
	for (unsigned m = 0; m < n->nnuma; m++)
		if (votes[m] && (best < 0 || votes[m] > votes[best]))
			best = (int)m;
	return best;
}

void iod_topo_nearest_cpuset(const struct iod_topo_node *n, const struct iod_bitmap *gpus,
                             struct iod_bitmap *out)
{
	bool any = false;
	iod_bitmap_zero(out);
	for (int g = iod_bitmap_next(gpus, 0); g >= 0 && g < (int)n->ngpus;
	     g = iod_bitmap_next(gpus, (unsigned)g + 1)) {
		iod_bitmap_or(out, &n->devices[n->gpu[g]].cpuset);
		any = true;
	}
	if (!any)
		*out = n->cpuset;
}

unsigned iod_topo_nvlink_islands(const struct iod_topo_node *n, const struct iod_bitmap *within,
                                 struct iod_bitmap *islands, unsigned max)
{
	struct iod_bitmap found[IOD_TOPO_GPUS_MAX];
	unsigned nfound = 0, size[IOD_TOPO_GPUS_MAX];
	uint8_t queue[IOD_TOPO_GPUS_MAX];
	struct iod_bitmap seen;

	iod_bitmap_zero(&seen);
	for (unsigned g = 0; g < n->ngpus; g++) {
		if (!iod_bitmap_test(within, g) || iod_bitmap_test(&seen, g))
			continue;
		/* breadth-first over NVLinks, restricted to `within` */
		unsigned head = 0, tail = 0;
		iod_bitmap_zero(&found[nfound]);
		queue[tail++] = (uint8_t)g;
		iod_bitmap_set(&seen, g);
		while (head < tail) {
			unsigned x = queue[head++];
			iod_bitmap_set(&found[nfound], x);
			for (unsigned y = 0; y < n->ngpus; y++) {
				if (iod_bitmap_test(&seen, y) || !iod_bitmap_test(within, y) ||
				    !n->link[n->gpu[x]][n->gpu[y]].nvlinks)
					continue;
				iod_bitmap_set(&seen, y);
				queue[tail++] = (uint8_t)y;
			}
		}
		size[nfound] = tail;
		nfound++;
	}
	/* largest first; found[] is already in lowest-GPU order, keep it stable */
	unsigned written = 0;
	for (unsigned want = IOD_TOPO_GPUS_MAX; want > 0 && written < max; want--)
		for (unsigned i = 0; i < nfound && written < max; i++)
			if (size[i] == want)
				islands[written++] = found[i];
	return nfound;
}

bool iod_topo_unit_satisfies(enum iod_compute_type have, enum iod_compute_type want)
{
	if (have == want)
		return true;
	return want == IOD_COMPUTE_CUDA_CORE && have == IOD_COMPUTE_TENSOR_CORE;
}

uint32_t iod_topo_units_count(const struct iod_topo_node *n, enum iod_compute_type want)
{
	uint32_t sum = 0;
	for (unsigned u = 0; u < n->nunits; u++)
		if (iod_topo_unit_satisfies(n->units[u].type, want))
			sum += n->units[u].cap.count;
	return sum;
}
