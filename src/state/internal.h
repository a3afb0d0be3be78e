/*
 * internal.h: private structures of the state machine and the server shell.
 * Only the files under src/state include it.
 */
#ifndef IOD_STATE_INTERNAL_H
#define IOD_STATE_INTERNAL_H

#include "iod/state.h"

/* One object: a JSON value under kind/name with its revisions. */
struct iod_state_obj {
	struct iod_state_obj *next; /* hash chain */
	enum iod_state_kind kind;   /* what it is */
	char name[IOD_NAME_MAX];    /* unique within its kind */
	uint64_t rev;               /* revision of the last change (CAS compares this) */
	uint64_t create_rev;        /* revision that created it */
	uint64_t lease;             /* lease id it dies with, 0 = none */
	json_t *value;              /* the document (owned reference) */
};

enum { IOD_STATE_EV_PUT = 1, IOD_STATE_EV_DELETE = 2 };

/* One change, for watches. */
struct iod_state_event {
	uint64_t rev;                /* revision that made it */
	uint8_t type;                /* IOD_STATE_EV_PUT / _DELETE */
	enum iod_state_kind kind;    /* object kind */
	char name[IOD_NAME_MAX];     /* object name */
	json_t *value;               /* put: the new value (reference); delete: NULL */
};

/* A lease: objects attached to it are deleted when it expires. */
struct iod_state_lease {
	uint64_t id;          /* assigned by grant, increasing */
	uint64_t ttl_ms;      /* renew sets deadline = now + ttl */
	uint64_t deadline_ms; /* Unix ms, in the leader's clock that granted/renewed */
};

struct iod_state {
	struct iod_state_obj **buckets;   /* chained hash table, power-of-two size */
	uint32_t buckets_n;               /* buckets */
	uint32_t count[IOD_STATE_KIND_COUNT]; /* objects per kind */
	uint32_t total;                   /* objects in all */
	uint64_t rev;                     /* cluster revision */
	uint64_t next_lease;              /* id the next grant gets */
	struct iod_state_lease *leases;   /* IOD_STATE_LEASES_MAX slots, sorted by id */
	uint32_t leases_n;                /* leases in use */
	struct iod_state_event *hist;     /* ring of IOD_STATE_HISTORY_MAX events */
	uint32_t hist_head;               /* oldest event */
	uint32_t hist_n;                  /* events in the ring */
	uint64_t hist_floor;              /* watches must start at or after this revision */
};

struct iod_state_obj *iod_state_find(const struct iod_state *s, enum iod_state_kind k,
                                     const char *name);
struct iod_state_lease *iod_state_lease_find(const struct iod_state *s, uint64_t id);
/* Objects of kind (or all when kind < 0) sorted by kind then name: a
 * malloc'd array in *out; returns the count (count > 0 with *out NULL means
 * out of memory). */
uint32_t iod_state_sorted(const struct iod_state *s, int kind, struct iod_state_obj ***out);
json_t *iod_state_obj_json(const struct iod_state_obj *o);

#endif
