/*
 * rng.c: xoshiro256** (Blackman and Vigna), seeded through splitmix64.
 * Every random decision in iod draws from an iod_rng its caller seeded, so a
 * simulation or a test replays exactly from its seed.
 */
#include "iod/base.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void iod_rng_seed(struct iod_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
	IOD_ASSERT(r->s[0] | r->s[1] | r->s[2] | r->s[3]);
}

uint64_t iod_rng_next(struct iod_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t iod_rng_below(struct iod_rng *r, uint64_t bound)
{
	IOD_ASSERT(bound > 0);
	/* Lemire's multiply-shift with rejection: no modulo bias. */
	unsigned __int128 m = (unsigned __int128)iod_rng_next(r) * bound;
	uint64_t low = (uint64_t)m;
	if (low < bound) {
		uint64_t threshold = -bound % bound;
		while (low < threshold) {
			m = (unsigned __int128)iod_rng_next(r) * bound;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

double iod_rng_double(struct iod_rng *r)
{
	return (double)(iod_rng_next(r) >> 11) * 0x1.0p-53;
}

double iod_rng_exp(struct iod_rng *r, double mean)
{
	/* 1 - u is in (0, 1], so the log is finite. */
	return -mean * log(1.0 - iod_rng_double(r));
}

void iod_rng_fork(struct iod_rng *r, struct iod_rng *child)
{
	iod_rng_seed(child, iod_rng_next(r));
}
