/*
 * policy.c: circuit breakers, retry budget and jittered backoff, timeouts,
 * per-client connection counts: the small decisions the proxy asks about
 * every connection and request.
 *
 * Pure: counters and arithmetic only; the caller passes time and an rng.
 * Breakers count per worker (the proxy divides each limit among workers).
 */
#include "iod/mesh.h"

#include <string.h>
#include <strings.h>

static const char *const brk_names[IOD_MESH_BRK_KINDS] = {"connections", "pending", "requests",
                                                          "retries"};

const char *iod_mesh_breaker_name(enum iod_mesh_breaker_kind k)
{
	return k < IOD_MESH_BRK_KINDS ? brk_names[k] : "?";
}

static uint32_t limit_of(const struct iod_mesh_breaker_cfg *c, enum iod_mesh_breaker_kind k)
{
	switch (k) {
	case IOD_MESH_BRK_CONNECTIONS: return c->max_connections;
	case IOD_MESH_BRK_PENDING: return c->max_pending;
	case IOD_MESH_BRK_REQUESTS: return c->max_requests;
	case IOD_MESH_BRK_RETRIES: return c->max_retries;
	case IOD_MESH_BRK_KINDS: break;
	}
	return 0;
}

int iod_mesh_breaker_acquire(struct iod_mesh_breaker *b, const struct iod_mesh_breaker_cfg *c,
                             enum iod_mesh_breaker_kind k)
{
	IOD_ASSERT_HOT(k < IOD_MESH_BRK_KINDS);
	if (b->open[k] >= limit_of(c, k)) {
		b->trips[k]++;
		return -EBUSY;
	}
	b->open[k]++;
	return 0;
}

void iod_mesh_breaker_release(struct iod_mesh_breaker *b, enum iod_mesh_breaker_kind k)
{
	IOD_ASSERT_HOT(k < IOD_MESH_BRK_KINDS);
	IOD_ASSERT(b->open[k] > 0);
	b->open[k]--;
}

bool iod_mesh_retry_allowed(struct iod_mesh_breaker *b, const struct iod_mesh_breaker_cfg *bc,
                            const struct iod_mesh_retry_cfg *rc, uint32_t attempt)
{
	if (attempt == 0 || attempt > rc->max_per_request)
		return false;
	if (rc->budget_bp) {
		uint64_t budget = (uint64_t)b->open[IOD_MESH_BRK_REQUESTS] * rc->budget_bp / 10000u;
		budget = IOD_MAX(budget, (uint64_t)rc->min_concurrency);
		if (b->open[IOD_MESH_BRK_RETRIES] >= budget) {
			b->trips[IOD_MESH_BRK_RETRIES]++;
			return false;
		}
	}
	return iod_mesh_breaker_acquire(b, bc, IOD_MESH_BRK_RETRIES) == 0;
}

uint64_t iod_mesh_retry_backoff_ns(const struct iod_mesh_retry_cfg *rc, uint32_t attempt,
                                   struct iod_rng *rng)
{
	uint64_t cap = rc->backoff_base_ns;
	for (uint32_t i = 1; i < attempt && cap < rc->backoff_max_ns; i++)
		cap *= 2;
	cap = IOD_MIN(cap, rc->backoff_max_ns);
	return cap ? iod_rng_below(rng, cap) : 0;
}

bool iod_mesh_http_idempotent(const char *method, size_t len)
{
	static const char *const safe[] = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};
	for (size_t i = 0; i < IOD_ARRAY_LEN(safe); i++)
		if (strlen(safe[i]) == len && !memcmp(safe[i], method, len))
			return true;
	return false;
}

enum iod_mesh_timer iod_mesh_timeout_check(const struct iod_mesh_timeouts *t,
                                           uint64_t connect_start_ns, uint64_t request_start_ns,
                                           uint64_t last_io_ns, uint64_t now_ns)
{
	if (connect_start_ns && t->connect_ns && now_ns - connect_start_ns >= t->connect_ns)
		return IOD_MESH_T_CONNECT;
	if (request_start_ns && t->request_ns && now_ns - request_start_ns >= t->request_ns)
		return IOD_MESH_T_REQUEST;
	if (last_io_ns && t->idle_ns && now_ns - last_io_ns >= t->idle_ns)
		return IOD_MESH_T_IDLE;
	return IOD_MESH_T_NONE;
}

bool iod_mesh_head_expired(const struct iod_mesh_timeouts *t, uint64_t head_start_ns,
                           uint64_t now_ns)
{
	return head_start_ns && t->head_ns && now_ns >= head_start_ns &&
	       now_ns - head_start_ns >= t->head_ns;
}

/* ---- per-client connection counts ---------------------------------------- */

#define CLIENT_MASK (IOD_MESH_CLIENT_SLOTS - 1u)

static uint32_t client_home(uint32_t ip4, uint32_t uid)
{
	return (uint32_t)iod_hash_u64(((uint64_t)ip4 << 32) | uid) & CLIENT_MASK;
}

/* The slot of (ip4, uid), or of the free slot where it would go. */
static uint32_t client_find(const struct iod_mesh_clients *t, uint32_t ip4, uint32_t uid)
{
	uint32_t i = client_home(ip4, uid);
	/* at most half full, so a free slot ends every probe */
	while (t->slot[i].n && (t->slot[i].ip4 != ip4 || t->slot[i].uid != uid))
		i = (i + 1) & CLIENT_MASK;
	return i;
}

int iod_mesh_clients_take(struct iod_mesh_clients *t, uint32_t ip4, uint32_t uid, uint32_t max)
{
	uint32_t i = client_find(t, ip4, uid);
	struct iod_mesh_client_slot *s = &t->slot[i];
	if (s->n >= max || (!s->n && t->used >= IOD_MESH_CLIENT_SLOTS / 2)) {
		t->limited++;
		return -EBUSY;
	}
	if (!s->n) {
		s->ip4 = ip4;
		s->uid = uid;
		t->used++;
	}
	s->n++;
	return 0;
}

void iod_mesh_clients_release(struct iod_mesh_clients *t, uint32_t ip4, uint32_t uid)
{
	uint32_t i = client_find(t, ip4, uid);
	IOD_ASSERT(t->slot[i].n > 0);
	if (--t->slot[i].n)
		return;
	t->used--;
	/* backward-shift deletion (Knuth 6.4, algorithm R): move later members
	 * of the probe run into the hole when their home is not between the
	 * hole and them, so every lookup still finds them */
	uint32_t hole = i, j = i;
	for (;;) {
		j = (j + 1) & CLIENT_MASK;
		if (!t->slot[j].n)
			break;
		uint32_t home = client_home(t->slot[j].ip4, t->slot[j].uid);
		bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
		if (stays)
			continue;
		t->slot[hole] = t->slot[j];
		t->slot[j].n = 0;
		hole = j;
	}
}

uint32_t iod_mesh_clients_count(const struct iod_mesh_clients *t, uint32_t ip4, uint32_t uid)
{
	return t->slot[client_find(t, ip4, uid)].n;
}
