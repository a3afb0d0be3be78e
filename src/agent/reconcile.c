/*
 * reconcile.c: the agent's pure core. It holds one slot per replica placed on
 * this node and, from the desired set, the observations the shell feeds it
 * (process started, exited, probe passed or failed) and the time it is
 * handed, decides what to do: start, stop, kill, probe, report a phase.
 *
 * Why a pure core: every restart/backoff/health decision is testable with a
 * manual clock and replayable in the simulator. It must never fork, signal,
 * read a clock, draw randomness or do I/O; it allocates only in _new().
 *
 * Phases: pending -> starting -> running -> healthy | unhealthy -> stopping
 * -> exited | failed (see agent.h). Restarts back off exponentially from
 * backoff_base_ns up to backoff_max_ns; a run of backoff_reset_ns resets it.
 */
#include "iod/agent.h"

#include <stdlib.h>
#include <string.h>

struct iod_agent_rec {
	struct iod_agent_rec_config cfg; /* tuning */
	uint32_t capacity;               /* slots */
	struct iod_agent_slot *slots;    /* capacity of them, allocated once */
};

static const char *const phase_names[] = {
#define X(n, s) s,
    IOD_AGENT_PHASES(X)
#undef X
};
static const char *const action_names[] = {
#define X(n, s) s,
    IOD_AGENT_ACTIONS(X)
#undef X
};

const char *iod_agent_phase_name(enum iod_agent_phase p)
{
	return (unsigned)p < IOD_AGENT_PHASE_COUNT ? phase_names[p] : "?";
}

int iod_agent_phase_parse(const char *s, enum iod_agent_phase *out)
{
	for (unsigned i = 0; i < IOD_AGENT_PHASE_COUNT; i++)
		if (!strcmp(s, phase_names[i])) {
			*out = (enum iod_agent_phase)i;
			return 0;
		}
	return -EINVAL;
}

const char *iod_agent_action_name(enum iod_agent_action_kind k)
{
	return (unsigned)k < IOD_ARRAY_LEN(action_names) ? action_names[k] : "?";
}

void iod_agent_rec_config_default(struct iod_agent_rec_config *c)
{
	c->backoff_base_ns = 100 * IOD_NS_PER_MS;
	c->backoff_max_ns = 10 * IOD_NS_PER_S;
	c->backoff_reset_ns = 10 * IOD_NS_PER_S;
	c->stop_grace_ns = 5 * IOD_NS_PER_S;
	c->liveness_failures = 3;
	c->startup_grace_ns = 30 * IOD_NS_PER_S;
}

int iod_agent_rec_new(const struct iod_agent_rec_config *c, uint32_t capacity,
                      struct iod_agent_rec **out)
{
	if (!capacity || capacity > IOD_AGENT_REPLICAS_MAX || !c->backoff_base_ns ||
	    c->backoff_max_ns < c->backoff_base_ns)
		return -EINVAL;
	struct iod_agent_rec *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->slots = calloc(capacity, sizeof(*r->slots));
	if (!r->slots) {
		free(r);
		return -ENOMEM;
	}
	r->cfg = *c;
	r->capacity = capacity;
	*out = r;
	return 0;
}

void iod_agent_rec_free(struct iod_agent_rec *r)
{
	if (!r)
		return;
	free(r->slots);
	free(r);
}

uint32_t iod_agent_rec_capacity(const struct iod_agent_rec *r)
{
	return r->capacity;
}

const struct iod_agent_slot *iod_agent_rec_slot(const struct iod_agent_rec *r, uint32_t i)
{
	return i < r->capacity && r->slots[i].used ? &r->slots[i] : NULL;
}

int iod_agent_rec_find(const struct iod_agent_rec *r, const char *name)
{
	for (uint32_t i = 0; i < r->capacity; i++)
		if (r->slots[i].used && !strcmp(r->slots[i].want.name, name))
			return (int)i;
	return -ENOENT;
}

static void set_phase(struct iod_agent_slot *s, enum iod_agent_phase p, uint64_t now_ns,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void set_phase(struct iod_agent_slot *s, enum iod_agent_phase p, uint64_t now_ns,
                      const char *fmt, ...)
{
	char reason[IOD_AGENT_REASON_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (s->phase != p || strcmp(s->reason, reason)) {
		s->dirty = true;
		if (s->phase != p)
			s->phase_since_ns = now_ns;
	}
	s->phase = p;
	memcpy(s->reason, reason, sizeof(reason));
}

static void set_ready(struct iod_agent_slot *s, bool ready)
{
	if (s->ready != ready)
		s->dirty = true;
	s->ready = ready;
}

static bool has_check(const struct iod_agent_slot *s)
{
	return s->want.health.kind != IOD_HEALTH_NONE && s->want.health.interval_ns;
}

static void fmt_ms(uint64_t ns, char *buf, size_t len)
{
	snprintf(buf, len, "%llu ms", (unsigned long long)(ns / IOD_NS_PER_MS));
}

/* Begin a graceful stop of a live process. */
static void begin_stop(struct iod_agent_rec *r, struct iod_agent_slot *s, uint64_t now_ns,
                       const char *why)
{
	IOD_ASSERT(s->alive);
	if (s->phase == IOD_AGENT_STOPPING)
		return;
	set_phase(s, IOD_AGENT_STOPPING, now_ns, "%s", why);
	set_ready(s, false);
	s->stop_deadline_ns = now_ns + r->cfg.stop_grace_ns;
	s->term_sent = false;
	s->kill_sent = false;
	s->probe_in_flight = false;
}

/* A replica the agent cannot build: failed with its reason, never started. */
static void mark_unbuildable(struct iod_agent_slot *s, uint64_t now_ns)
{
	IOD_ASSERT(s->want.fail[0] && !s->alive);
	set_phase(s, IOD_AGENT_FAILED, now_ns, "%s", s->want.fail);
	set_ready(s, false);
	s->start_at_ns = UINT64_MAX;
}

/* A slot takes want (a new generation, or its buildability changed). */
static void take_want(struct iod_agent_rec *r, struct iod_agent_slot *s,
                      const struct iod_agent_replica *want, uint64_t now_ns)
{
	bool was_generation = s->want.generation != want->generation;
	s->want = *want;
	if (s->alive) {
		s->restart_after_stop = !want->fail[0];
		begin_stop(r, s, now_ns,
		           want->fail[0]    ? "cannot run the new state: stopping"
		           : was_generation ? "new generation: recreating"
		                            : "can run again: recreating");
	} else if (want->fail[0]) {
		mark_unbuildable(s, now_ns);
	} else {
		s->start_at_ns = now_ns;
		s->backoff_ns = r->cfg.backoff_base_ns;
		set_phase(s, IOD_AGENT_PENDING, now_ns, "%s",
		          was_generation ? "new generation" : "can run again");
	}
}

int iod_agent_rec_set_desired(struct iod_agent_rec *r, const struct iod_agent_replica *want,
                              uint32_t n, uint64_t now_ns, struct iod_err *e)
{
	uint32_t refused = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (!want[i].name[0])
			return iod_err_set(e, -EINVAL, "replica %u has no name", i);
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(want[i].name, want[j].name))
				return iod_err_set(e, -EINVAL, "replica \"%s\" is listed twice",
				                   want[i].name);
	}

	/* Replicas no longer wanted: stop (alive) or forget (not alive). */
	for (uint32_t i = 0; i < r->capacity; i++) {
		struct iod_agent_slot *s = &r->slots[i];
		if (!s->used)
			continue;
		bool found = false, was = s->desired;
		for (uint32_t j = 0; j < n && !found; j++)
			found = !strcmp(s->want.name, want[j].name);
		s->desired = found;
		if (found && !was && !s->want.fail[0]) {
			/* placed here again while the stop of its removal runs
			 * (or after it, before the slot was forgotten): that
			 * stop's "stay down" no longer holds */
			if (s->alive) {
				s->restart_after_stop = true;
			} else if (s->start_at_ns == UINT64_MAX) {
				s->start_at_ns = now_ns;
				s->backoff_ns = r->cfg.backoff_base_ns;
				set_phase(s, IOD_AGENT_PENDING, now_ns,
				          "placed on this node again");
			}
		}
		if (found)
			continue;
		s->restart_after_stop = false;
		if (s->alive)
			begin_stop(r, s, now_ns, "removed from this node");
		else
			set_phase(s, IOD_AGENT_EXITED, now_ns, "removed from this node");
	}
	/* Wanted replicas: update in place, recreate on a new generation, or add
	 * while there is room; the rest wait for a later call (one replica too
	 * many never holds back the others). */
	for (uint32_t j = 0; j < n; j++) {
		int k = iod_agent_rec_find(r, want[j].name);
		if (k >= 0) {
			struct iod_agent_slot *s = &r->slots[k];
			bool fail_was = s->want.fail[0] != 0, fail_now = want[j].fail[0] != 0;
			if (s->want.generation != want[j].generation || fail_was != fail_now)
				take_want(r, s, &want[j], now_ns);
			else if (fail_now && strcmp(s->want.fail, want[j].fail)) {
				s->want = want[j]; /* still failing, for another reason */
				if (!s->alive)
					mark_unbuildable(s, now_ns);
			}
			continue;
		}
		bool placed = false;
		for (uint32_t i = 0; i < r->capacity && !placed; i++) {
			struct iod_agent_slot *s = &r->slots[i];
			if (s->used)
				continue;
			memset(s, 0, sizeof(*s));
			s->used = true;
			s->desired = true;
			s->want = want[j];
			s->backoff_ns = r->cfg.backoff_base_ns;
			s->start_at_ns = now_ns;
			s->phase = IOD_AGENT_PENDING;
			s->phase_since_ns = now_ns;
			snprintf(s->reason, sizeof(s->reason), "placed on this node");
			s->dirty = true;
			if (want[j].fail[0])
				mark_unbuildable(s, now_ns);
			placed = true;
		}
		refused += !placed;
	}
	if (refused)
		return iod_err_set(e, -ENOSPC,
		                   "%u new replicas wait for room: this node tracks at most %u "
		                   "(IOD_AGENT_REPLICAS_MAX) and the rest are still stopping",
		                   refused, r->capacity);
	return 0;
}

static struct iod_agent_slot *lookup(struct iod_agent_rec *r, const char *name)
{
	int k = iod_agent_rec_find(r, name);
	return k < 0 ? NULL : &r->slots[k];
}

int iod_agent_rec_on_started(struct iod_agent_rec *r, const char *name, uint64_t now_ns)
{
	struct iod_agent_slot *s = lookup(r, name);
	if (!s)
		return -ENOENT;
	s->alive = true;
	s->ever_started = true;
	s->started_ns = now_ns;
	s->ok_streak = s->fail_streak = 0;
	s->passed_once = false;
	s->probe_in_flight = false;
	if (has_check(s)) {
		s->probe_at_ns = now_ns; /* first check at once: fast readiness */
		set_phase(s, IOD_AGENT_RUNNING, now_ns,
		          "process started; waiting for %u passed "
		          "checks",
		          s->want.health.healthy_threshold ? s->want.health.healthy_threshold : 1);
		set_ready(s, false);
	} else {
		set_phase(s, IOD_AGENT_RUNNING, now_ns, "process started (no health check)");
		set_ready(s, true);
	}
	return 0;
}

/* After a process ended or could not start: restart per policy, or stay. */
static void after_end(struct iod_agent_rec *r, struct iod_agent_slot *s, bool failed,
                      const char *what, uint64_t now_ns)
{
	char delay[32];
	enum iod_restart pol = s->want.restart;
	bool restart =
	    s->desired && (pol == IOD_RESTART_ALWAYS || (pol == IOD_RESTART_ON_FAILURE && failed));

	set_ready(s, false);
	if (!restart) {
		set_phase(s, failed ? IOD_AGENT_FAILED : IOD_AGENT_EXITED, now_ns, "%s%s", what,
		          s->desired ? "; restart policy keeps it down" : "");
		s->start_at_ns = UINT64_MAX;
		return;
	}
	/* A long healthy run forgives earlier failures. */
	if (s->ever_started && now_ns - s->started_ns >= r->cfg.backoff_reset_ns)
		s->backoff_ns = r->cfg.backoff_base_ns;
	s->start_at_ns = now_ns + s->backoff_ns;
	fmt_ms(s->backoff_ns, delay, sizeof(delay));
	set_phase(s, failed ? IOD_AGENT_FAILED : IOD_AGENT_EXITED, now_ns, "%s; restarting in %s",
	          what, delay);
	s->backoff_ns = IOD_MIN(s->backoff_ns * 2, r->cfg.backoff_max_ns);
}

int iod_agent_rec_on_start_failed(struct iod_agent_rec *r, const char *name, const char *why,
                                  uint64_t now_ns)
{
	struct iod_agent_slot *s = lookup(r, name);
	char what[IOD_AGENT_REASON_MAX];
	if (!s)
		return -ENOENT;
	s->alive = false;
	snprintf(what, sizeof(what), "start failed: %s", why);
	after_end(r, s, true, what, now_ns);
	return 0;
}

int iod_agent_rec_on_exited(struct iod_agent_rec *r, const char *name, int exit_code, int signal,
                            uint64_t now_ns)
{
	struct iod_agent_slot *s = lookup(r, name);
	char what[IOD_AGENT_REASON_MAX];
	if (!s)
		return -ENOENT;
	bool was_stopping = s->phase == IOD_AGENT_STOPPING;
	s->alive = false;
	s->probe_in_flight = false;
	if (signal > 0)
		snprintf(what, sizeof(what), "killed by signal %d", signal);
	else
		snprintf(what, sizeof(what), "exit status %d", exit_code);
	if (was_stopping) {
		if (s->desired && s->restart_after_stop) {
			/* liveness restart or new generation: back in line at once
			 * (liveness restarts count against the backoff). */
			s->restart_after_stop = false;
			s->start_at_ns = now_ns;
			set_phase(s, IOD_AGENT_PENDING, now_ns, "stopped (%s); starting again",
			          what);
		} else if (s->desired && s->want.fail[0]) {
			set_ready(s, false);
			mark_unbuildable(s, now_ns); /* stopped because it cannot run */
		} else {
			set_phase(s, IOD_AGENT_EXITED, now_ns, "stopped (%s)", what);
			s->start_at_ns = UINT64_MAX;
		}
		set_ready(s, false);
		return 0;
	}
	after_end(r, s, signal > 0 || exit_code != 0, what, now_ns);
	return 0;
}

int iod_agent_rec_on_probe(struct iod_agent_rec *r, const char *name, bool ok, const char *detail,
                           uint64_t now_ns)
{
	struct iod_agent_slot *s = lookup(r, name);
	if (!s)
		return -ENOENT;
	s->probe_in_flight = false;
	if (!s->alive || s->phase == IOD_AGENT_STOPPING)
		return 0; /* a late result for a process that is going away */
	const struct iod_agent_health *h = &s->want.health;
	uint32_t up = h->healthy_threshold ? h->healthy_threshold : 1;
	uint32_t down = h->unhealthy_threshold ? h->unhealthy_threshold : 1;
	s->probe_at_ns = now_ns + h->interval_ns;
	if (ok) {
		s->passed_once = true;
		s->fail_streak = 0;
		s->ok_streak++;
		if (s->ok_streak >= up && s->phase != IOD_AGENT_HEALTHY) {
			set_phase(s, IOD_AGENT_HEALTHY, now_ns, "%u checks passed", s->ok_streak);
			set_ready(s, true);
		}
		return 0;
	}
	s->ok_streak = 0;
	s->fail_streak++;
	/* Start-up: until its first pass (or the grace runs out) a slow starter
	 * is neither unhealthy nor restarted, like a Kubernetes startup probe. */
	if (!s->passed_once && now_ns - s->started_ns < r->cfg.startup_grace_ns) {
		set_phase(s, IOD_AGENT_RUNNING, now_ns, "waiting for a passed check: %s",
		          detail ? detail : "failed");
		return 0;
	}
	/* A replica never healthy yet stays "running" until its threshold; a
	 * healthy one turns unhealthy after `down` failures in a row. */
	if (s->fail_streak >= down && s->phase != IOD_AGENT_UNHEALTHY) {
		set_phase(s, IOD_AGENT_UNHEALTHY, now_ns, "%u checks failed: %s", s->fail_streak,
		          detail ? detail : "failed");
		set_ready(s, false);
	}
	if (s->fail_streak >= down + r->cfg.liveness_failures && r->cfg.liveness_failures) {
		char why[IOD_AGENT_REASON_MAX];
		snprintf(why, sizeof(why), "liveness: %u checks failed in a row: %s",
		         s->fail_streak, detail ? detail : "failed");
		s->restart_after_stop = true;
		begin_stop(r, s, now_ns, why);
	}
	return 0;
}

static bool push(struct iod_agent_action *acts, uint32_t max, uint32_t *n,
                 enum iod_agent_action_kind kind, uint32_t slot, const struct iod_agent_slot *s)
{
	if (*n >= max)
		return false;
	struct iod_agent_action *a = &acts[(*n)++];
	memset(a, 0, sizeof(*a));
	a->kind = kind;
	a->slot = slot;
	memcpy(a->name, s->want.name, sizeof(a->name));
	a->phase = s->phase;
	a->ready = s->ready;
	a->restarts = s->restarts;
	memcpy(a->reason, s->reason, sizeof(a->reason));
	return true;
}

static void wake_at(uint64_t *next_ns, uint64_t t)
{
	if (t < *next_ns)
		*next_ns = t;
}

void iod_agent_rec_step(struct iod_agent_rec *r, uint64_t now_ns, struct iod_agent_action *acts,
                        uint32_t max, uint32_t *n, uint64_t *next_ns)
{
	*n = 0;
	*next_ns = UINT64_MAX;
	for (uint32_t i = 0; i < r->capacity; i++) {
		struct iod_agent_slot *s = &r->slots[i];
		if (!s->used)
			continue;
		if (*n + 2 > max) { /* room for this slot's worst case (act + report) */
			*next_ns = now_ns;
			return;
		}
		/* Start what is due. */
		if (!s->alive && s->desired && s->phase != IOD_AGENT_STARTING &&
		    s->start_at_ns != UINT64_MAX) {
			if (s->start_at_ns <= now_ns) {
				if (s->ever_started)
					s->restarts++;
				set_phase(s, IOD_AGENT_STARTING, now_ns, "starting%s",
				          s->ever_started ? " again" : "");
				push(acts, max, n, IOD_AGENT_ACT_START, i, s);
			} else {
				wake_at(next_ns, s->start_at_ns);
			}
		}
		/* Stop/kill what is stopping. */
		if (s->alive && s->phase == IOD_AGENT_STOPPING) {
			if (!s->term_sent) {
				push(acts, max, n, IOD_AGENT_ACT_STOP, i, s);
				s->term_sent = true;
				wake_at(next_ns, s->stop_deadline_ns);
			} else if (!s->kill_sent && now_ns >= s->stop_deadline_ns) {
				push(acts, max, n, IOD_AGENT_ACT_KILL, i, s);
				s->kill_sent = true;
			} else if (!s->kill_sent) {
				wake_at(next_ns, s->stop_deadline_ns);
			}
		}
		/* Probe what is due. */
		if (s->alive && has_check(s) && s->phase != IOD_AGENT_STOPPING &&
		    s->phase != IOD_AGENT_STARTING && !s->probe_in_flight) {
			if (s->probe_at_ns <= now_ns) {
				push(acts, max, n, IOD_AGENT_ACT_PROBE, i, s);
				s->probe_in_flight = true;
			} else {
				wake_at(next_ns, s->probe_at_ns);
			}
		}
		/* Report changes; forget replicas that are gone. */
		if (s->dirty) {
			bool gone = !s->desired && !s->alive;
			if (push(acts, max, n, IOD_AGENT_ACT_REPORT, i, s)) {
				acts[*n - 1].removed = gone;
				s->dirty = false;
				if (gone)
					memset(s, 0, sizeof(*s));
			}
		} else if (!s->desired && !s->alive) {
			memset(s, 0, sizeof(*s));
		}
	}
}
