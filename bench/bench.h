/*
 * bench.h: what every benchmark shares: clocks, sorting for percentiles,
 * one percentile rule, and the printer of `BENCH <area>.<figure> key=value`
 * lines (an interface: names and keys never change, docs/ARCHITECTURE.md).
 *
 * Header-only (each bench/bench_*.c is its own program).
 */
#ifndef IOD_BENCH_H
#define IOD_BENCH_H

#include "iod/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

/* Monotonic time in seconds / nanoseconds. */
static inline double bench_now_s(void)
{
	return (double)iod_clock_now_ns() / 1e9;
}

static inline uint64_t bench_now_ns(void)
{
	return iod_clock_now_ns();
}

/* CPU time of this process in seconds: on a shared machine, work per CPU
 * second is the per-core figure. */
static inline double bench_cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* qsort comparators. */
static inline int bench_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The p-quantile (0..1) of n sorted values: the nearest rank, v[p(n-1)]. */
static inline uint64_t bench_pct_u64(const uint64_t *v, size_t n, double p)
{
	if (!n)
		return 0;
	return v[(size_t)(p * (double)(n - 1) + 0.5)];
}

/* One "BENCH <area>.<figure> key=value..." line, flushed: fmt spells the whole
 * line with its name (the names are an interface, greppable in the source). */
static inline void bench_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void bench_line(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

#endif
