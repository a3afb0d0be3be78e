/*
 * maglev.c: Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and
 * Reliable Software Network Load Balancer", NSDI 2016, section 3.4).
 *
 * Each backend gets a permutation of the table's slots from two hashes of its
 * key (offset and skip); backends take turns claiming their next preferred
 * free slot until the table is full. Weights are honoured by letting a
 * backend take a turn in a round only as often as its weight allows relative
 * to the largest weight. Build time is O(table_size * log) on average; the
 * work is bounded by table_size claims plus skipped probes.
 */
#include "iod/base.h"

#include <stdlib.h>
#include <string.h>

static bool is_prime(uint32_t n)
{
	if (n < 2)
		return false;
	for (uint32_t d = 2; (uint64_t)d * d <= n; d++)
		if (n % d == 0)
			return false;
	return true;
}

void iod_maglev_free(struct iod_maglev *mg)
{
	free(mg->table);
	memset(mg, 0, sizeof(*mg));
}

int iod_maglev_build(struct iod_maglev *mg, uint32_t table_size, const uint64_t *keys,
                     const uint32_t *weights, uint32_t n)
{
	uint32_t m = table_size ? table_size : IOD_MAGLEV_DEFAULT_SIZE;
	uint32_t wmax = 0, filled = 0;
	uint32_t *offset = NULL, *skip = NULL, *next = NULL, *table = NULL;
	int rc = -ENOMEM;

	if (!is_prime(m) || n >= m)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		wmax = IOD_MAX(wmax, weights ? weights[i] : 1u);
	table = malloc(sizeof(*table) * m);
	if (!table)
		return -ENOMEM;
	if (!n || !wmax) {
		free(mg->table);
		mg->table = table;
		mg->table_size = m;
		mg->backends_n = 0;
		return 0;
	}
	offset = malloc(sizeof(*offset) * n);
	skip = malloc(sizeof(*skip) * n);
	next = calloc(n, sizeof(*next));
	if (!offset || !skip || !next)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		offset[i] = (uint32_t)(iod_hash_u64(keys[i] ^ 0x6d61676c65763031ull) % m);
		skip[i] = (uint32_t)(iod_hash_u64(keys[i] ^ 0x6d61676c65763032ull) % (m - 1)) + 1;
	}
	for (uint32_t i = 0; i < m; i++)
		table[i] = UINT32_MAX;
	for (uint64_t round = 0; filled < m; round++) {
		for (uint32_t i = 0; i < n && filled < m; i++) {
			uint64_t w = weights ? weights[i] : 1;
			/* A turn this round when the weight's share crosses an integer. */
			if ((round + 1) * w / wmax == round * w / wmax)
				continue;
			uint32_t c;
			do {
				c = (uint32_t)((offset[i] + (uint64_t)next[i] * skip[i]) % m);
				next[i]++;
			} while (table[c] != UINT32_MAX);
			table[c] = i;
			filled++;
		}
	}
	free(mg->table);
	mg->table = table;
	table = NULL;
	mg->table_size = m;
	mg->backends_n = n;
	rc = 0;
out:
	free(table);
	free(offset);
	free(skip);
	free(next);
	return rc;
}
