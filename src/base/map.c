/*
 * map.c: an open-addressing hash map from 64-bit keys to 64-bit values.
 * Linear probing keeps probes in one or two cache lines; deletion shifts
 * later entries back (no tombstones), so lookups never degrade over time.
 * The load factor stays at or below 1/2. max_count bounds the table: past
 * it a put fails with -ENOSPC instead of growing without limit.
 */
#include "iod/base.h"

#include <stdlib.h>
#include <string.h>

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t c = 8;
	while (c < n && c < (1u << 31))
		c <<= 1;
	return c;
}

int iod_map_init(struct iod_map *m, uint32_t initial_capacity, uint32_t max_count)
{
	m->capacity = pow2_at_least(initial_capacity * 2);
	m->slots = calloc(m->capacity, sizeof(*m->slots));
	m->count = 0;
	m->max_count = max_count;
	return m->slots ? 0 : -ENOMEM;
}

void iod_map_destroy(struct iod_map *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

static inline uint32_t slot_of(const struct iod_map *m, uint64_t key)
{
	return (uint32_t)iod_hash_u64(key) & (m->capacity - 1);
}

static int grow(struct iod_map *m)
{
	struct iod_map old = *m;

	if (m->capacity >= (1u << 31))
		return -ENOSPC;
	m->capacity *= 2;
	m->slots = calloc(m->capacity, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return -ENOMEM;
	}
	m->count = 0;
	for (uint32_t i = 0; i < old.capacity; i++)
		if (old.slots[i].key)
			iod_map_put(m, old.slots[i].key, old.slots[i].value);
	free(old.slots);
	return 0;
}

int iod_map_put(struct iod_map *m, uint64_t key, uint64_t value)
{
	IOD_ASSERT(key != 0);
	uint32_t mask = m->capacity - 1;
	for (uint32_t i = slot_of(m, key);; i = (i + 1) & mask) {
		if (m->slots[i].key == key) {
			m->slots[i].value = value;
			return 0;
		}
		if (!m->slots[i].key) {
			if (m->max_count && m->count >= m->max_count)
				return -ENOSPC;
			if ((m->count + 1) * 2 > m->capacity) {
				int rc = grow(m);
				if (rc)
					return rc;
				return iod_map_put(m, key, value);
			}
			m->slots[i].key = key;
			m->slots[i].value = value;
			m->count++;
			return 0;
		}
	}
}

int iod_map_get(const struct iod_map *m, uint64_t key, uint64_t *value)
{
	uint32_t mask = m->capacity - 1;

	if (!key)
		return -ENOENT;
	for (uint32_t i = slot_of(m, key);; i = (i + 1) & mask) {
		if (m->slots[i].key == key) {
			if (value)
				*value = m->slots[i].value;
			return 0;
		}
		if (!m->slots[i].key)
			return -ENOENT;
	}
}

int iod_map_del(struct iod_map *m, uint64_t key)
{
	uint32_t mask = m->capacity - 1, i, j;

	if (!key)
		return -ENOENT;
	for (i = slot_of(m, key);; i = (i + 1) & mask) {
		if (!m->slots[i].key)
			return -ENOENT;
		if (m->slots[i].key == key)
			break;
	}
	/* Backward shift: move later members of the cluster into the hole when
	 * their home slot does not lie cyclically in (hole, j]. */
	for (j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
		uint32_t home = slot_of(m, m->slots[j].key);
		bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
		if (!stays) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i].key = 0;
	m->slots[i].value = 0;
	m->count--;
	return 0;
}

bool iod_map_next(const struct iod_map *m, uint32_t *pos, uint64_t *key, uint64_t *value)
{
	for (uint32_t i = *pos; i < m->capacity; i++) {
		if (m->slots[i].key) {
			if (key)
				*key = m->slots[i].key;
			if (value)
				*value = m->slots[i].value;
			*pos = i + 1;
			return true;
		}
	}
	*pos = m->capacity;
	return false;
}
