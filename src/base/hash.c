/*
 * hash.c: a fast 64-bit hash for byte strings (a compact variant of the
 * wyhash/murmur family: 8-byte lanes, multiply-xorshift mixing). Not for
 * security; for tables and flow hashing, where speed and spread matter.
 */
#include "iod/base.h"

#include <string.h>

static inline uint64_t mix(uint64_t a, uint64_t b)
{
	unsigned __int128 r = (unsigned __int128)a * b;
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

uint64_t iod_hash_bytes(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data;
	const uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull;
	uint64_t h = seed ^ mix(seed ^ k0, (uint64_t)len ^ k1);
	uint64_t w;

	while (len >= 8) {
		memcpy(&w, p, 8);
		h = mix(h ^ w ^ k0, k1);
		p += 8;
		len -= 8;
	}
	if (len) {
		w = 0;
		memcpy(&w, p, len);
		h = mix(h ^ w ^ k1, k0 ^ (uint64_t)len);
	}
	return iod_hash_u64(h);
}

uint64_t iod_hash_str(const char *s)
{
	return iod_hash_bytes(s, strlen(s), 0);
}
