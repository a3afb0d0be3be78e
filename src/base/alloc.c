/*
 * alloc.c: the arena (bump allocation, freed all at once: one parsed spec,
 * one scheduling pass) and the pool (fixed-size objects allocated at
 * start-up: packets, flows, events). Neither ever grows without a bound:
 * the arena has an optional byte limit, the pool a fixed capacity.
 */
#include "iod/base.h"

#include <stdlib.h>
#include <string.h>

struct iod_arena_chunk {
	struct iod_arena_chunk *next; /* older chunk */
	size_t size;                  /* usable bytes in data */
	size_t used;                  /* bytes handed out */
	_Alignas(16) unsigned char data[];
};

void iod_arena_init(struct iod_arena *a, size_t chunk_bytes, size_t limit_bytes)
{
	a->head = NULL;
	a->chunk_bytes = chunk_bytes ? chunk_bytes : 64 * 1024;
	a->used_bytes = 0;
	a->limit_bytes = limit_bytes;
}

void *iod_arena_alloc(struct iod_arena *a, size_t bytes)
{
	struct iod_arena_chunk *c = a->head;
	size_t need = (bytes + 15) & ~(size_t)15;

	if (need < bytes)
		return NULL;
	if (a->limit_bytes && a->used_bytes + need > a->limit_bytes)
		return NULL;
	if (!c || c->size - c->used < need) {
		size_t size = IOD_MAX(a->chunk_bytes, need);
		c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->next = a->head;
		c->size = size;
		c->used = 0;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += need;
	a->used_bytes += need;
	memset(p, 0, need);
	return p;
}

char *iod_arena_strndup(struct iod_arena *a, const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = iod_arena_alloc(a, len + 1);

	if (p)
		memcpy(p, s, len);
	return p;
}

char *iod_arena_strdup(struct iod_arena *a, const char *s)
{
	return iod_arena_strndup(a, s, strlen(s));
}

void iod_arena_reset(struct iod_arena *a)
{
	struct iod_arena_chunk *c = a->head, *last = NULL;

	while (c) {
		struct iod_arena_chunk *next = c->next;
		if (!next) {
			last = c;
			break;
		}
		free(c);
		c = next;
	}
	a->head = last;
	if (last)
		last->used = 0;
	a->used_bytes = 0;
}

void iod_arena_free(struct iod_arena *a)
{
	while (a->head) {
		struct iod_arena_chunk *next = a->head->next;
		free(a->head);
		a->head = next;
	}
	a->used_bytes = 0;
}

int iod_pool_init(struct iod_pool *p, size_t obj_bytes, uint32_t capacity)
{
	memset(p, 0, sizeof(*p));
	if (!obj_bytes || !capacity)
		return -EINVAL;
	p->obj_bytes = (obj_bytes + 15) & ~(size_t)15;
	p->mem = aligned_alloc(64, ((p->obj_bytes * capacity) + 63) & ~(size_t)63);
	p->free_list = malloc(sizeof(uint32_t) * capacity);
	if (!p->mem || !p->free_list) {
		iod_pool_destroy(p);
		return -ENOMEM;
	}
	p->capacity = capacity;
	/* Hand out low indexes first: deterministic and cache friendly. */
	for (uint32_t i = 0; i < capacity; i++)
		p->free_list[i] = capacity - 1 - i;
	p->free_n = capacity;
	return 0;
}

void iod_pool_destroy(struct iod_pool *p)
{
	free(p->mem);
	free(p->free_list);
	memset(p, 0, sizeof(*p));
}

void *iod_pool_get(struct iod_pool *p)
{
	if (!p->free_n)
		return NULL;
	return p->mem + (size_t)p->free_list[--p->free_n] * p->obj_bytes;
}

uint32_t iod_pool_index(const struct iod_pool *p, const void *obj)
{
	size_t off = (size_t)((const unsigned char *)obj - p->mem);
	IOD_ASSERT_HOT(off % p->obj_bytes == 0);
	IOD_ASSERT_HOT(off / p->obj_bytes < p->capacity);
	return (uint32_t)(off / p->obj_bytes);
}

void *iod_pool_at(const struct iod_pool *p, uint32_t index)
{
	IOD_ASSERT_HOT(index < p->capacity);
	return p->mem + (size_t)index * p->obj_bytes;
}

void iod_pool_put(struct iod_pool *p, void *obj)
{
	IOD_ASSERT(p->free_n < p->capacity);
	p->free_list[p->free_n++] = iod_pool_index(p, obj);
}
