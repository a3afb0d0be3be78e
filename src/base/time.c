/*
 * time.c: the clocks shells read (cores are handed the time, never read
 * it): one CLOCK_MONOTONIC reader for every shell in place of a private
 * wrapper each, and the wall clock for timestamps users see.
 */
#include "iod/base.h"

#include <time.h>

uint64_t iod_clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * IOD_NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t iod_time_unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * IOD_NS_PER_S + (uint64_t)ts.tv_nsec;
}
