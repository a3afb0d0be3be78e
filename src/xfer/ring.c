/*
 * ring.c: a ring all-reduce (sum of int64) over libiod-xfer
 * (include/iod/xfer.h): N-1 reduce-scatter steps write one chunk into the
 * right neighbour's scratch area with a notification, N-1 all-gather steps
 * write reduced chunks into its vector; each step waits for the left
 * neighbour's notification of the same step. `iod xfer ring` and the demo
 * worker (`--allreduce xfer`) use it.
 */
#include "iod/xfer.h"

#include <string.h>

static uint64_t chunk_lo(uint64_t count, unsigned n, unsigned k)
{
	return count * k / n;
}

uint64_t iod_xfer_ring_bytes(uint64_t count, unsigned n)
{
	uint64_t maxchunk = count / n + 1;
	return (count + (n - 1) * maxchunk) * sizeof(int64_t);
}

int iod_xfer_ring_allreduce(struct iod_xfer *x, const struct iod_xfer_ring *g, int64_t *v,
                            struct iod_err *e)
{
	unsigned n = g->n, rank = g->rank;
	uint64_t count = g->count, maxchunk = count / n + 1;
	int64_t *scratch = v + count;
	int rv = 0;
	if (n < 2 || rank >= n || !count)
		return iod_err_set(e, -EINVAL, "xfer: ring of %u ranks, rank %u, %llu elements", n,
		                   rank, (unsigned long long)count);
	for (unsigned step = 0; !rv && step < 2 * (n - 1); step++) {
		bool rs = step < n - 1;
		unsigned s = rs ? step : step - (n - 1);
		/* reduce-scatter sends chunk r-s, all-gather chunk r+1-s */
		unsigned send = (rank + n - s + (rs ? 0 : 1)) % n;
		uint64_t lo = chunk_lo(count, n, send), hi = chunk_lo(count, n, send + 1);
		struct iod_xfer_op op = {
		    IOD_XFER_WRITE,
		    {g->id, lo * 8, (hi - lo) * 8},
		    {g->remote_id, (rs ? count + s * maxchunk : lo) * 8, (hi - lo) * 8}};
		struct iod_xfer_req *r = NULL;
		uint8_t tag = (uint8_t)(g->tag + step);
		rv = iod_xfer_post(x, g->right, hi > lo ? &op : NULL, hi > lo ? 1 : 0, &tag, 1, &r,
		                   e);
		if (!rv)
			rv = iod_xfer_req_wait(x, r, e);
		iod_xfer_req_free(x, r);
		char from[IOD_NAME_MAX];
		uint8_t got = 0;
		size_t gl = 0;
		if (!rv)
			rv = iod_xfer_notif_wait(x, g->left, from, &got, 1, &gl, 0, e);
		if (!rv && (strcmp(from, g->left) || got != tag))
			rv = iod_err_set(
			    e, -EPROTO,
			    "xfer: ring step %u: notification %u from %s, want %u from %s", step,
			    got, from, tag, g->left);
		if (!rv && rs) {
			/* the left neighbour sent its chunk r-1-s into scratch slot s */
			unsigned recv = (rank + 2 * n - 1 - s) % n;
			uint64_t rlo = chunk_lo(count, n, recv), rhi = chunk_lo(count, n, recv + 1);
			for (uint64_t j = rlo; j < rhi; j++)
				v[j] += scratch[s * maxchunk + (j - rlo)];
		}
	}
	return rv;
}
