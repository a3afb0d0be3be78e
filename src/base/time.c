/*
 * time.c: the clocks a shell hands to cores. The monotonic clock is the real
 * one; the manual clock is advanced by tests and by the simulator, so the
 * same core code runs in both without knowing which.
 */
#include "iod/base.h"

#include <time.h>

static uint64_t mono_now(void *ctx)
{
	struct timespec ts;

	IOD_UNUSED(ctx);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * IOD_NS_PER_S + (uint64_t)ts.tv_nsec;
}

static const struct iod_clock mono_clock = {mono_now, NULL};

const struct iod_clock *iod_clock_monotonic(void)
{
	return &mono_clock;
}

uint64_t iod_time_unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * IOD_NS_PER_S + (uint64_t)ts.tv_nsec;
}

static uint64_t manual_now(void *ctx)
{
	return ((struct iod_manual_clock *)ctx)->now_ns;
}

void iod_manual_clock_init(struct iod_manual_clock *m, uint64_t start_ns)
{
	m->clock.now_ns = manual_now;
	m->clock.ctx = m;
	m->now_ns = start_ns;
}
