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
 *
 * The calendar queue (R. Brown, "Calendar queues", CACM 31(10), 1988) is a
 * hash of time into nb buckets of width 1 << shift ns: bucket b holds the
 * events whose slot t >> shift is b mod nb, each bucket an array sorted by
 * (t, seq). A pop walks the buckets from the current slot and takes the head
 * of the first bucket whose head is in that slot; after a whole year (nb
 * buckets) without one it searches the heads directly. Pushes are a binary
 * search and (usually) an append. nb doubles above 2 nb pending and halves
 * below nb / 2; at each resize the width is re-sampled (three times the mean
 * gap of the earliest events, Brown's rule, without gaps over twice the mean)
 * and the bucket arrays are laid out again in one slab in bucket order, so a
 * pop sweep reads memory forward. Order never depends on the width or nb:
 * it is the (t, seq) order of the heap, so a run's event log is the same.
 */
#include "iod/sim.h"

#include <stdlib.h>
#include <string.h>

#define QNONE UINT32_MAX

/* ---- calendar queue ---------------------------------------------------------- */

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

#define CAL_NB_MIN 16u        /* buckets at least */
#define CAL_SHIFT0 10u        /* first width: 1 us, until the first resize samples */
#define CAL_SAMPLE 32u        /* earliest events sampled for the width */
#define CAL_NB_MAX (1u << 30) /* buckets at most */

static void cal_free(struct iod_sim_cbucket *c, uint32_t nb, struct iod_sim_event *slab)
{
	if (c)
		for (uint32_t b = 0; b < nb; b++)
			if (c[b].owned)
				free(c[b].ev);
	free(c);
	free(slab);
}

/* Put ev in its bucket at its (t, seq) place; the bucket has room. */
static void cal_place(struct iod_sim_queue *q, struct iod_sim_cbucket *k, uint32_t b,
                      const struct iod_sim_event *ev)
{
	uint32_t pos = k->len;
	if (pos > k->head && before(ev, &k->ev[pos - 1])) {
		/* not the latest of its bucket: binary search for the first later one */
		uint32_t lo = k->head, hi = pos - 1;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (before(ev, &k->ev[mid]))
				hi = mid;
			else
				lo = mid + 1;
		}
		pos = lo;
		memmove(&k->ev[pos + 1], &k->ev[pos], sizeof(*ev) * (k->len - pos));
	}
	k->ev[pos] = *ev;
	k->len++;
	uint64_t slot = ev->t_ns >> q->cal_shift;
	if (slot < q->cal_slot) {
		q->cal_slot = slot;
		q->cal_cur = b;
	}
}

static int cal_insert(struct iod_sim_queue *q, const struct iod_sim_event *ev)
{
	uint32_t b = (uint32_t)(ev->t_ns >> q->cal_shift) & (q->cal_nb - 1);
	struct iod_sim_cbucket *k = &q->cal[b];
	if (IOD_UNLIKELY(k->len == k->cap)) {
		if (k->head && k->head >= k->len / 2) {
			memmove(k->ev, &k->ev[k->head], sizeof(*ev) * (k->len - k->head));
			k->len -= k->head;
			k->head = 0;
		} else {
			uint32_t ncap = k->cap < 4 ? 8 : 2 * k->cap;
			struct iod_sim_event *a = malloc(sizeof(*a) * ncap);
			if (!a)
				return -ENOMEM;
			memcpy(a, &k->ev[k->head], sizeof(*a) * (k->len - k->head));
			if (k->owned)
				free(k->ev);
			k->ev = a;
			k->len -= k->head;
			k->head = 0;
			k->cap = ncap;
			k->owned = 1;
		}
	}
	cal_place(q, k, b, ev);
	return 0;
}

/* The bucket holding the earliest event (q->n > 0); moves the current slot
 * to it. */
static struct iod_sim_cbucket *cal_locate(struct iod_sim_queue *q)
{
	uint32_t mask = q->cal_nb - 1, b = q->cal_cur, shift = q->cal_shift;
	uint64_t slot = q->cal_slot;
	for (uint32_t i = 0; i < q->cal_nb; i++, b = (b + 1) & mask, slot++) {
		struct iod_sim_cbucket *k = &q->cal[b];
		if (k->head < k->len && k->ev[k->head].t_ns >> shift <= slot) {
			q->cal_cur = b;
			q->cal_slot = slot;
			return k;
		}
	}
	/* a whole year empty: the earliest head is far ahead */
	struct iod_sim_cbucket *best = NULL;
	for (uint32_t i = 0; i < q->cal_nb; i++) {
		struct iod_sim_cbucket *k = &q->cal[i];
		if (k->head < k->len && (!best || before(&k->ev[k->head], &best->ev[best->head]))) {
			best = k;
			b = i;
		}
	}
	IOD_ASSERT(best);
	q->cal_far++;
	q->cal_cur = b;
	q->cal_slot = best->ev[best->head].t_ns >> shift;
	return best;
}

static void cal_take(struct iod_sim_queue *q, struct iod_sim_event *out)
{
	struct iod_sim_cbucket *k = cal_locate(q);
	*out = k->ev[k->head++];
	if (k->head == k->len)
		k->head = k->len = 0;
}

/* Brown's width: three times the mean gap of sorted sample s[0..n), leaving
 * out gaps over twice the first mean; as a shift (power of two, >= 1 ns). */
static uint32_t cal_width_shift(const struct iod_sim_event *s, uint32_t n, uint32_t old)
{
	if (n < 2 || s[n - 1].t_ns == s[0].t_ns)
		return n < 2 ? old : 0;
	uint64_t span = s[n - 1].t_ns - s[0].t_ns, sum = 0, m = 0;
	for (uint32_t i = 1; i < n; i++) {
		uint64_t d = s[i].t_ns - s[i - 1].t_ns;
		if (d <= 2 * span / (n - 1)) {
			sum += d;
			m++;
		}
	}
	uint64_t w = m && sum ? 3 * sum / m : 1;
	uint32_t shift = 0;
	while (shift < 62 && ((uint64_t)1 << shift) < w)
		shift++;
	return shift;
}

/*
 * Lay the calendar out again with nb buckets of width 1 << shift: the events
 * now in q->cal (when there is one) and src[0..src_n). Counts first, so each
 * bucket gets one exact run of the slab (plus room to grow), in bucket order.
 * On allocation failure nothing changes.
 */
static int cal_build(struct iod_sim_queue *q, uint32_t nb, uint32_t shift,
                     const struct iod_sim_event *src, uint32_t src_n)
{
	struct iod_sim_cbucket *old = q->cal, *c = calloc(nb, sizeof(*c));
	if (!c)
		return -ENOMEM;
	uint32_t old_nb = q->cal_nb, mask = nb - 1;
	for (uint32_t b = 0; old && b < old_nb; b++)
		for (uint32_t i = old[b].head; i < old[b].len; i++)
			c[(uint32_t)(old[b].ev[i].t_ns >> shift) & mask].cap++;
	for (uint32_t i = 0; i < src_n; i++)
		c[(uint32_t)(src[i].t_ns >> shift) & mask].cap++;
	uint64_t total = 0;
	for (uint32_t b = 0; b < nb; b++) {
		c[b].cap += c[b].cap / 2 + 2; /* room for a few pushes before a grow */
		total += c[b].cap;
	}
	struct iod_sim_event *slab = malloc(sizeof(*slab) * total);
	if (!slab) {
		free(c);
		return -ENOMEM;
	}
	total = 0;
	for (uint32_t b = 0; b < nb; b++) {
		c[b].ev = slab + total;
		total += c[b].cap;
	}
	struct iod_sim_event *old_slab = q->cal_slab;
	q->cal = c;
	q->cal_slab = slab;
	q->cal_nb = nb;
	q->cal_shift = shift;
	q->cal_cur = 0;
	q->cal_slot = UINT64_MAX;
	q->cal_resizes++;
	for (uint32_t b = 0; old && b < old_nb; b++)
		for (uint32_t i = old[b].head; i < old[b].len; i++) {
			uint32_t nbk = (uint32_t)(old[b].ev[i].t_ns >> shift) & mask;
			cal_place(q, &c[nbk], nbk, &old[b].ev[i]);
		}
	for (uint32_t i = 0; i < src_n; i++) {
		uint32_t nbk = (uint32_t)(src[i].t_ns >> shift) & mask;
		cal_place(q, &c[nbk], nbk, &src[i]);
	}
	cal_free(old, old_nb, old_slab);
	return 0;
}

/* Resize to nb buckets with a width sampled from the earliest events, read in
 * place by walking the slots forward (at most one year). A failed allocation
 * keeps the old layout: slower, still correct. */
static void cal_resize(struct iod_sim_queue *q, uint32_t nb)
{
	struct iod_sim_event s[CAL_SAMPLE] = {{0}};
	uint32_t n = 0;
	if (q->n) {
		cal_locate(q);
		uint32_t mask = q->cal_nb - 1, b = q->cal_cur;
		uint64_t slot = q->cal_slot;
		for (uint32_t y = 0; y < q->cal_nb && n < CAL_SAMPLE;
		     y++, b = (b + 1) & mask, slot++) {
			struct iod_sim_cbucket *k = &q->cal[b];
			for (uint32_t i = k->head;
			     i < k->len && k->ev[i].t_ns >> q->cal_shift == slot && n < CAL_SAMPLE;
			     i++)
				s[n++] = k->ev[i];
		}
	}
	uint32_t shift = cal_width_shift(s, n, q->cal_shift);
	if (q->n >= CAL_SAMPLE && n < CAL_SAMPLE / 2) {
		/* sparse front (far timers): the width from the whole span instead */
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint32_t b = 0; b < q->cal_nb; b++)
			if (q->cal[b].head < q->cal[b].len) {
				lo = IOD_MIN(lo, q->cal[b].ev[q->cal[b].head].t_ns);
				hi = IOD_MAX(hi, q->cal[b].ev[q->cal[b].len - 1].t_ns);
			}
		uint64_t w = (hi - lo) / q->n * 3;
		shift = 0;
		while (shift < 62 && ((uint64_t)1 << shift) < w)
			shift++;
	}
	q->cal_far = 0;
	(void)cal_build(q, nb, shift, NULL, 0);
}

int iod_sim_queue_init_kind(struct iod_sim_queue *q, uint32_t cap, enum iod_sim_queue_kind kind)
{
	memset(q, 0, sizeof(*q));
	if (!cap || cap == QNONE)
		return -EINVAL;
	q->kind = kind;
	q->cap = cap;
	if (kind == IOD_SIM_QUEUE_AUTO) {
		q->adaptive = true;
		q->kind = IOD_SIM_QUEUE_HEAP;
	}
	if (q->kind == IOD_SIM_QUEUE_HEAP) {
		q->heap_cap =
		    q->adaptive && cap > IOD_SIM_QUEUE_AUTO_UP ? IOD_SIM_QUEUE_AUTO_UP : cap;
		q->heap = malloc(sizeof(*q->heap) * q->heap_cap);
		return q->heap ? 0 : -ENOMEM;
	}
	if (kind == IOD_SIM_QUEUE_CALENDAR)
		return cal_build(q, CAL_NB_MIN, CAL_SHIFT0, NULL, 0) ? -ENOMEM : 0;
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
	cal_free(q->cal, q->cal_nb, q->cal_slab);
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
	if (q->kind == IOD_SIM_QUEUE_CALENDAR) {
		struct iod_sim_cbucket *k = cal_locate(q);
		return k->ev[k->head].t_ns;
	}
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

static void heap_push(struct iod_sim_queue *q, struct iod_sim_event ev)
{
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
}

/* q->n > 0 */
static void heap_pop(struct iod_sim_queue *q, struct iod_sim_event *out)
{
	struct iod_sim_event *h = q->heap;
	*out = h[0];
	uint32_t n = --q->n;
	if (!n)
		return;
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
}

/* ---- AUTO: heap while small, calendar while large ---------------------------- */

/* The heap is full at heap_cap: move its events to a calendar whose width is
 * sampled from the earliest ones (popped in order, put back in the freed tail
 * of the heap array). On failure the heap is as it was. */
static int auto_to_calendar(struct iod_sim_queue *q)
{
	struct iod_sim_event s[CAL_SAMPLE] = {{0}};
	uint32_t n = 0, total = q->n, nb = CAL_NB_MIN;
	while (n < CAL_SAMPLE && q->n)
		heap_pop(q, &s[n++]);
	memcpy(&q->heap[q->n], s, sizeof(*s) * n);
	while (nb < CAL_NB_MAX && nb < total / 2)
		nb *= 2;
	if (cal_build(q, nb, cal_width_shift(s, n, CAL_SHIFT0), q->heap, total)) {
		for (uint32_t i = 0; i < n; i++)
			heap_push(q, s[i]);
		return -ENOMEM;
	}
	q->n = total;
	q->kind = IOD_SIM_QUEUE_CALENDAR;
	return 0;
}

/* Few left: back to the heap. Popped in order, they are a valid heap. */
static void auto_to_heap(struct iod_sim_queue *q)
{
	for (uint32_t i = 0; i < q->n; i++)
		cal_take(q, &q->heap[i]);
	cal_free(q->cal, q->cal_nb, q->cal_slab);
	q->cal = NULL;
	q->cal_slab = NULL;
	q->cal_nb = 0;
	q->kind = IOD_SIM_QUEUE_HEAP;
}

/* ---- the interface ------------------------------------------------------------ */

int iod_sim_queue_push(struct iod_sim_queue *q, uint64_t t_ns, uint32_t kind, uint32_t arg,
                       uint64_t data)
{
	if (IOD_UNLIKELY(q->n == q->cap))
		return -ENOSPC;
	if (q->kind == IOD_SIM_QUEUE_RADIX)
		return radix_push(q, t_ns, kind, arg, data);
	if (q->kind == IOD_SIM_QUEUE_HEAP && IOD_UNLIKELY(q->n == q->heap_cap)) {
		int rc = auto_to_calendar(q);
		if (rc)
			return rc;
	}
	struct iod_sim_event ev = {t_ns, q->next_seq, data, kind, arg};
	if (q->kind == IOD_SIM_QUEUE_HEAP) {
		heap_push(q, ev);
		q->next_seq++;
		return 0;
	}
	int rc = cal_insert(q, &ev);
	if (rc)
		return rc;
	q->next_seq++;
	if (++q->n > 2 * q->cal_nb && q->cal_nb < CAL_NB_MAX)
		cal_resize(q, 2 * q->cal_nb);
	return 0;
}

bool iod_sim_queue_pop(struct iod_sim_queue *q, struct iod_sim_event *out)
{
	if (q->kind == IOD_SIM_QUEUE_RADIX)
		return radix_pop(q, out);
	if (!q->n)
		return false;
	if (q->kind == IOD_SIM_QUEUE_HEAP) {
		heap_pop(q, out);
		return true;
	}
	cal_take(q, out);
	q->n--;
	if (q->adaptive && q->n < IOD_SIM_QUEUE_AUTO_DOWN)
		auto_to_heap(q);
	else if (q->n < q->cal_nb / 2 && q->cal_nb > CAL_NB_MIN)
		cal_resize(q, q->cal_nb / 2);
	else if (IOD_UNLIKELY(q->cal_far >= 4))
		cal_resize(q, q->cal_nb); /* the width is too small for what is left */
	return true;
}
