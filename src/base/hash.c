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

/* CRC-32C, slicing by 8: tables built once (idempotent, so a race between
 * threads building them writes the same values). */
static uint32_t crc_tab[8][256];
static int crc_ready;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] =
			    (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
	__atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

uint32_t iod_crc32c(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;

	if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
		crc_init();
	crc = ~crc;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= crc;
		crc = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^
		      crc_tab[5][(w >> 16) & 0xff] ^ crc_tab[4][(w >> 24) & 0xff] ^
		      crc_tab[3][(w >> 32) & 0xff] ^ crc_tab[2][(w >> 40) & 0xff] ^
		      crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}
