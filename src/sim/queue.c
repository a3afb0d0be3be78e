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

static inline bool before(const struct iod_sim_event *a, const struct iod_sim_event *b)
{
	return a->t_ns < b->t_ns || (a->t_ns == b->t_ns && a->seq < b->seq);
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
		uint32_t end = c + 4 < n ? c + 4 : n;
		for (uint32_t k = c + 1; k < end; k++)
			if (before(&h[k], &h[best]))
				best = k;
		if (!before(&h[best], &last))
			break;
		h[i] = h[best];
		i = best;
	}
	h[i] = last;
	IOD_ASSERT_HOT(!before(&h[i], out));
	return true;
}
