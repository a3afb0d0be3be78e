/*
 * queue.c: the simulator's event queue, a bounded 4-ary min-heap.
 *
 * Events fire in (time, sequence) order; the sequence number is stamped at
 * push, so two events at the same nanosecond fire in the order they were
 * scheduled, which makes every run with the same inputs identical. A 4-ary
 * heap halves the depth of a binary heap and keeps a node's children in one
 * cache line; with millions of pending events it stays within ~2x of its
 * small-queue speed (bench/bench_sim.c measures it). The heap is allocated
 * once; it must never grow on the event path: a full heap is -ENOSPC.
 */
#include "iod/sim.h"

#include <stdlib.h>
#include <string.h>

int iod_sim_queue_init(struct iod_sim_queue *q, uint32_t cap)
{
	memset(q, 0, sizeof(*q));
	if (!cap)
		return -EINVAL;
	q->heap = malloc(sizeof(*q->heap) * cap);
	if (!q->heap)
		return -ENOMEM;
	q->cap = cap;
	return 0;
}

void iod_sim_queue_destroy(struct iod_sim_queue *q)
{
	free(q->heap);
	memset(q, 0, sizeof(*q));
}

/* One 128-bit comparison instead of two dependent branches. */
__extension__ typedef unsigned __int128 key128;
static inline key128 key(const struct iod_sim_event *a)
{
	return (key128)a->t_ns << 64 | a->seq;
}
static inline bool before(const struct iod_sim_event *a, const struct iod_sim_event *b)
{
	return key(a) < key(b);
}

int iod_sim_queue_push(struct iod_sim_queue *q, uint64_t t_ns, uint32_t kind, uint32_t arg,
                       uint64_t data)
{
	if (IOD_UNLIKELY(q->n == q->cap))
		return -ENOSPC;
	struct iod_sim_event ev = {t_ns, q->next_seq++, data, kind, arg};
	struct iod_sim_event *h = q->heap;
	uint32_t i = q->n++;
	while (i > 0) {
		uint32_t parent = (i - 1) / 4;
		if (!before(&ev, &h[parent]))
			break;
		h[i] = h[parent];
		i = parent;
	}
	h[i] = ev;
	return 0;
}

bool iod_sim_queue_pop(struct iod_sim_queue *q, struct iod_sim_event *out)
{
	if (!q->n)
		return false;
	struct iod_sim_event *h = q->heap;
	*out = h[0];
	uint32_t n = --q->n;
	if (!n)
		return true;
	struct iod_sim_event last = h[n];
	uint32_t i = 0;
	for (;;) {
		uint32_t c = 4 * i + 1;
		if (c >= n)
			break;
		uint32_t best = c;
		key128 bk = key(&h[c]);
		if (c + 4 <= n) {
			/* full family: selects without data-dependent branches */
			key128 k1 = key(&h[c + 1]), k2 = key(&h[c + 2]), k3 = key(&h[c + 3]);
			uint32_t b01 = k1 < bk ? c + 1 : c;
			key128 m01 = k1 < bk ? k1 : bk;
			uint32_t b23 = k3 < k2 ? c + 3 : c + 2;
			key128 m23 = k3 < k2 ? k3 : k2;
			best = m23 < m01 ? b23 : b01;
			bk = m23 < m01 ? m23 : m01;
		} else {
			for (uint32_t k = c + 1; k < n; k++)
				if (key(&h[k]) < bk) {
					best = k;
					bk = key(&h[k]);
				}
		}
		if (!(bk < key(&last)))
			break;
		h[i] = h[best];
		i = best;
	}
	h[i] = last;
	IOD_ASSERT_HOT(!before(&h[i], out));
	return true;
}
