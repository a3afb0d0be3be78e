/*
 * scrub.c: the checkpoint store's background scrub (docs/storage.md, "Scrub
 * and repair"): a thread that verifies every chunk of every visible
 * checkpoint against its manifest at a bounded rate (the pure token bucket
 * iod_stor_scrub_budget), repairs a missing or damaged chunk from a peer,
 * and reports each checkpoint's result (to the Checkpoint object's `scrub`
 * through iod_ckpt_raft_scrub).
 */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ckpt_scrubber {
	struct iod_ckpt *c;
	struct iod_ckpt_scrub_opts o;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	struct iod_ckpt_scrub_stats st;
	uint64_t tokens, last_ns; /* the bucket */
	uint8_t *buf;             /* one chunk */
};

/* Wait up to ns, or until stopped; true when stopped. */
static bool rest(struct ckpt_scrubber *s, uint64_t ns)
{
	struct timespec ts;
	bool stop;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t at = (uint64_t)ts.tv_sec * IOD_NS_PER_S + (uint64_t)ts.tv_nsec + ns;
	ts.tv_sec = (time_t)(at / IOD_NS_PER_S);
	ts.tv_nsec = (long)(at % IOD_NS_PER_S);
	pthread_mutex_lock(&s->mu);
	while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT)
		;
	stop = s->stop;
	pthread_mutex_unlock(&s->mu);
	return stop;
}

static void paced(struct ckpt_scrubber *s, uint64_t ns)
{
	pthread_mutex_lock(&s->mu);
	s->st.paced_ns += ns;
	pthread_mutex_unlock(&s->mu);
}

/* Take len bytes from the bucket, waiting for them; true when stopped.
 * The bucket holds at most one second of rate: a chunk larger than that
 * takes a full bucket and leaves the rest as a wait after it. */
static bool pace(struct ckpt_scrubber *s, uint64_t len)
{
	const uint64_t rate = s->o.rate_bytes_per_s;
	const uint64_t need = len < rate ? len : rate;
	for (;;) {
		uint64_t now = iod_clock_now_ns();
		s->tokens = iod_stor_scrub_budget(rate, now - s->last_ns, s->tokens);
		s->last_ns = now;
		if (s->tokens >= need)
			break;
		uint64_t wait = (uint64_t)((double)(need - s->tokens) * 1e9 / (double)rate) + 1;
		paced(s, wait);
		if (rest(s, wait))
			return true;
	}
	s->tokens -= need;
	if (len > need) {
		uint64_t wait = (uint64_t)((double)(len - need) * 1e9 / (double)rate);
		paced(s, wait);
		return rest(s, wait);
	}
	return false;
}

/* Repair chunk k of step from the store's HTTP peers: the first whose copy
 * matches the manifest. 0 once rewritten here. */
static int repair_http(struct ckpt_scrubber *s, uint64_t step, const struct iod_ckpt_mchunk *k,
                       struct iod_err *e)
{
	struct iod_ckpt *c = s->c;
	char dir[PATH_MAX + 32];
	uint64_t found;
	int rc = iod_err_set(e, -ENOENT, "no peer to repair it from");
	for (uint32_t i = 0; i < c->peers_n; i++) {
		if ((rc = iod_ckpt_peer_get_chunk(c->peers[i], c->rank, step, k, s->buf, e)))
			continue;
		pthread_mutex_lock(&c->io);
		rc = ckpt_find_step(c, step, dir, sizeof(dir), &found, e);
		if (!rc && ckpt_chunk_check(c, dir, k, s->buf + k->len) == 0)
			rc = 0; /* repaired meanwhile (a restore does not write; a move copies) */
		else if (!rc && !(rc = ckpt_chunk_put(c, dir, k, s->buf, e)))
			rc = ckpt_fsync_dir(dir, e);
		pthread_mutex_unlock(&c->io);
		if (!rc)
			return 0;
	}
	return rc;
}

static void set_status(struct iod_ckpt_scrub_result *r)
{
	if (!r->damaged)
		snprintf(r->status, sizeof(r->status), "clean");
	else if (r->repaired == r->damaged)
		snprintf(r->status, sizeof(r->status), "repaired %u", r->repaired);
	else
		snprintf(r->status, sizeof(r->status), "damaged %u", r->damaged - r->repaired);
}

/* One checkpoint: false when stopped. A step that goes away meanwhile
 * (evicted) is dropped without a report. */
static bool scrub_step(struct ckpt_scrubber *s, uint64_t step)
{
	struct iod_ckpt *c = s->c;
	struct iod_ckpt_scrub_result r = {.step = step, .rank = c->rank};
	struct iod_ckpt_manifest m = {0};
	struct iod_err e = {0};
	char dir[PATH_MAX + 32];
	uint64_t found;
	uint8_t *bad = NULL;
	bool stopped = false, gone = false;
	int rc;

	pthread_mutex_lock(&c->io);
	rc = ckpt_find_step(c, step, dir, sizeof(dir), &found, &e);
	if (!rc)
		rc = ckpt_read_manifest(c, dir, found, &m, &e);
	pthread_mutex_unlock(&c->io);
	if (rc == -ENOENT)
		return true;
	if (rc) {
		/* a manifest that no longer reads is damage the chunks cannot fix */
		r.damaged = 1;
		snprintf(r.why, sizeof(r.why), "%s", e.msg);
		goto report;
	}
	bad = calloc(m.chunks_n ? m.chunks_n : 1, 1);
	if (!bad) {
		iod_ckpt_manifest_free(&m);
		return true;
	}
	for (uint32_t i = 0; i < m.chunks_n && !gone; i++) {
		const struct iod_ckpt_mchunk *k = &m.chunks[i];
		if ((stopped = pace(s, k->len)))
			break;
		pthread_mutex_lock(&c->io);
		/* each chunk where the step is now: a tier move may have run */
		if (ckpt_find_step(c, step, dir, sizeof(dir), &found, &e))
			gone = true;
		else if (ckpt_chunk_check(c, dir, k, s->buf))
			bad[i] = 1;
		pthread_mutex_unlock(&c->io);
		if (gone)
			break;
		r.chunks++;
		r.bytes += k->len;
		if (bad[i] && r.damaged++ == 0)
			snprintf(r.why, sizeof(r.why),
			         "checkpoint step %" PRIu64
			         ": chunk r%u-%u-%u is missing or damaged",
			         step, c->rank, k->region, k->index);
	}
	if (stopped || gone)
		goto out;
	if (r.damaged && s->o.peer) {
		/* the existing repair path, both copies verified against the manifest */
		struct iod_ckpt_repair_report rep;
		rc = iod_ckpt_repair(c, s->o.peer, step, &rep, &e);
		r.repaired = rep.repaired[0] < r.damaged ? rep.repaired[0] : r.damaged;
		if (rc)
			snprintf(r.why, sizeof(r.why), "repair: %s", e.msg);
	} else if (r.damaged) {
		for (uint32_t i = 0; i < m.chunks_n; i++) {
			if (!bad[i])
				continue;
			if (!(rc = repair_http(s, step, &m.chunks[i], &e)))
				r.repaired++;
			else
				snprintf(r.why, sizeof(r.why), "repair of chunk r%u-%u-%u: %s",
				         c->rank, m.chunks[i].region, m.chunks[i].index, e.msg);
		}
	}
report:
	r.at_ms = iod_time_unix_ns() / IOD_NS_PER_MS;
	set_status(&r);
	pthread_mutex_lock(&s->mu);
	s->st.passes++;
	s->st.chunks += r.chunks;
	s->st.bytes += r.bytes;
	s->st.damaged += r.damaged;
	s->st.repaired += r.repaired;
	pthread_mutex_unlock(&s->mu);
	if (s->o.report)
		s->o.report(s->o.report_ctx, &r);
out:
	iod_ckpt_manifest_free(&m);
	free(bad);
	return !stopped;
}

static void *scrub_main(void *arg)
{
	struct ckpt_scrubber *s = arg;
	struct iod_ckpt_info info[IOD_STOR_CKPTS_MAX];
	for (;;) {
		uint32_t n = 0;
		struct iod_err e = {0};
		if (iod_ckpt_list(s->c, info, IOD_STOR_CKPTS_MAX, &n, &e))
			n = 0;
		/* newest first: the one a restore would take */
		uint64_t steps[IOD_STOR_CKPTS_MAX];
		for (uint32_t i = 0; i < n; i++)
			steps[i] = info[n - 1 - i].step;
		bool go = true;
		for (uint32_t i = 0; i < n && go; i++)
			go = scrub_step(s, steps[i]);
		if (!go || rest(s, s->o.interval_ns))
			break;
	}
	return NULL;
}

int iod_ckpt_scrub_start(struct iod_ckpt *c, const struct iod_ckpt_scrub_opts *o, struct iod_err *e)
{
	struct ckpt_scrubber *s;
	pthread_condattr_t ca;

	if (c->scrub)
		return iod_err_set(e, -EBUSY, "the scrub of this store runs already");
	if (o->peer && (o->peer == c || o->peer->rank != c->rank))
		return iod_err_set(e, -EINVAL, "the scrub's peer must be another store of rank %u",
		                   c->rank);
	s = calloc(1, sizeof(*s));
	if (!s || !(s->buf = malloc(2 * (size_t)c->chunk_bytes))) {
		free(s);
		return iod_err_set(e, -ENOMEM, "out of memory for the scrub");
	}
	s->c = c;
	s->o = *o;
	if (!s->o.rate_bytes_per_s)
		s->o.rate_bytes_per_s = IOD_CKPT_SCRUB_RATE_DEFAULT;
	if (!s->o.interval_ns)
		s->o.interval_ns = 60 * IOD_NS_PER_S;
	s->last_ns = iod_clock_now_ns();
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&s->th, NULL, scrub_main, s)) {
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		free(s->buf);
		free(s);
		return iod_err_set(e, -EAGAIN, "cannot start the scrub thread");
	}
	c->scrub = s;
	return 0;
}

void ckpt_scrub_stop(struct iod_ckpt *c)
{
	struct ckpt_scrubber *s = c->scrub;
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->th, NULL);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->buf);
	free(s);
	c->scrub = NULL;
}

void iod_ckpt_scrub_stop(struct iod_ckpt *c)
{
	ckpt_scrub_stop(c);
}

void iod_ckpt_scrub_stats(struct iod_ckpt *c, struct iod_ckpt_scrub_stats *out)
{
	struct ckpt_scrubber *s = c->scrub;
	memset(out, 0, sizeof(*out));
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	*out = s->st;
	pthread_mutex_unlock(&s->mu);
}
