/*
 * queue.c: the simulator's event queues: a bounded 4-ary min-heap and a
 * bounded radix heap.
 *
 * Events fire in (time, sequence) order; the sequence number is stamped at
 * push, so two events at the same nanosecond fire in the order they were
 * scheduled, which makes every run with the same inputs identical.
 *
 * The 4-ary heap halves a binary heap's depth, but with millions pending
 * every pop still walks ~10 levels of cache misses. The radix heap (Ahuja,
 * Mehlhorn, Orlin, Tarjan 1990) uses what a simulation guarantees, that no
 * event is scheduled before the last one fired: bucket i holds events whose
 * time differs from the last popped time first in bit i-1, so a push is one
 * append and a pop empties the lowest bucket into lower ones; each event
 * moves at most 64 times and usually once or twice. Buckets are FIFO lists
 * and moves are stable, so same-time events keep push order. Both structures
 * are allocated once and never grow: a full queue is -ENOSPC.
 */
#include "iod/sim.h"

#include <stdlib.h>
#include <string.h>

#define QNONE UINT32_MAX

int iod_sim_queue_init_kind(struct iod_sim_queue *q, uint32_t cap, enum iod_sim_queue_kind kind)
{
	memset(q, 0, sizeof(*q));
	if (!cap || cap == QNONE)
		return -EINVAL;
	q->kind = kind;
	q->cap = cap;
	if (kind == IOD_SIM_QUEUE_HEAP) {
		q->heap = malloc(sizeof(*q->heap) * cap);
		return q->heap ? 0 : -ENOMEM;
	}
	q->nodes = malloc(sizeof(*q->nodes) * cap);
	q->free_list = malloc(sizeof(uint32_t) * cap);
	if (!q->nodes || !q->free_list) {
		iod_sim_queue_destroy(q);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cap; i++)
		q->free_list[i] = cap - 1 - i;
	q->free_n = cap;
	for (int b = 0; b < IOD_SIM_RADIX_BUCKETS; b++)
		q->head[b] = q->tail[b] = QNONE;
	q->peek_ns = UINT64_MAX;
	return 0;
}

int iod_sim_queue_init(struct iod_sim_queue *q, uint32_t cap)
{
	return iod_sim_queue_init_kind(q, cap, IOD_SIM_QUEUE_HEAP);
}

void iod_sim_queue_destroy(struct iod_sim_queue *q)
{
	free(q->heap);
	free(q->nodes);
	free(q->free_list);
	memset(q, 0, sizeof(*q));
}

/* ---- radix heap ------------------------------------------------------------ */

static inline int radix_bucket(uint64_t t, uint64_t last)
{
	return t == last ? 0 : 64 - __builtin_clzll(t ^ last);
}

static inline void radix_append(struct iod_sim_queue *q, int b, uint32_t i)
{
	q->nodes[i].next = QNONE;
	if (q->tail[b] == QNONE)
		q->head[b] = i;
	else
		q->nodes[q->tail[b]].next = i;
	q->tail[b] = i;
}

static int radix_push(struct iod_sim_queue *q, uint64_t t_ns, uint32_t kind, uint32_t arg,
                      uint64_t data)
{
	if (IOD_UNLIKELY(t_ns < q->last_ns))
		return -EINVAL;
	uint32_t i = q->free_list[--q->free_n];
	q->nodes[i].ev = (struct iod_sim_event){t_ns, q->next_seq++, data, kind, arg};
	if (q->peek_ns != UINT64_MAX && t_ns < q->peek_ns)
		q->peek_ns = t_ns;
	radix_append(q, radix_bucket(t_ns, q->last_ns), i);
	q->n++;
	return 0;
}

/* Make bucket 0 non-empty (q->n > 0): empty the lowest bucket into lower
 * ones around its minimum time, in list order (stable). */
static void radix_settle(struct iod_sim_queue *q)
{
	if (q->head[0] != QNONE)
		return;
	int b = 1;
	while (q->head[b] == QNONE)
		b++;
	uint64_t min = UINT64_MAX;
	for (uint32_t i = q->head[b]; i != QNONE; i = q->nodes[i].next)
		if (q->nodes[i].ev.t_ns < min)
			min = q->nodes[i].ev.t_ns;
	IOD_ASSERT_HOT(min >= q->last_ns);
	q->last_ns = min;
	uint32_t i = q->head[b];
	q->head[b] = q->tail[b] = QNONE;
	while (i != QNONE) {
		uint32_t next = q->nodes[i].next;
		int nb = radix_bucket(q->nodes[i].ev.t_ns, min);
		IOD_ASSERT_HOT(nb < b);
		radix_append(q, nb, i);
		i = next;
	}
}

static bool radix_pop(struct iod_sim_queue *q, struct iod_sim_event *out)
{
	if (!q->n)
		return false;
	radix_settle(q);
	q->peek_ns = UINT64_MAX;
	uint32_t i = q->head[0];
	*out = q->nodes[i].ev;
	q->head[0] = q->nodes[i].next;
	if (q->head[0] == QNONE)
		q->tail[0] = QNONE;
	q->free_list[q->free_n++] = i;
	q->n--;
	return true;
}

uint64_t iod_sim_queue_peek(struct iod_sim_queue *q)
{
	if (!q->n)
		return UINT64_MAX;
	if (q->kind == IOD_SIM_QUEUE_HEAP)
		return q->heap[0].t_ns;
	if (q->head[0] != QNONE)
		return q->last_ns;
	/* Do not settle: the caller may still push events earlier than this
	 * minimum (but not earlier than the last pop). Scan the lowest bucket
	 * and cache the answer until the next pop or an earlier push. */
	if (q->peek_ns == UINT64_MAX) {
		int b = 1;
		while (q->head[b] == QNONE)
			b++;
		for (uint32_t i = q->head[b]; i != QNONE; i = q->nodes[i].next)
			if (q->nodes[i].ev.t_ns < q->peek_ns)
				q->peek_ns = q->nodes[i].ev.t_ns;
	}
	return q->peek_ns;
}

/* ---- 4-ary heap ------------------------------------------------------------- */

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
	if (q->kind == IOD_SIM_QUEUE_RADIX)
		return radix_push(q, t_ns, kind, arg, data);
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
	if (q->kind == IOD_SIM_QUEUE_RADIX)
		return radix_pop(q, out);
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
