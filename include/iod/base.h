/*
 * base.h: the foundation every iod module builds on.
 *
 * Errors, logging, injectable time and randomness, allocators, a hash map,
 * bitmaps for CPU and GPU sets, unit parsing, string helpers and JSON helpers.
 * Nothing here decides anything about clusters; nothing here reads the clock
 * or draws randomness behind its caller's back: pure cores receive an
 * iod_clock and an iod_rng from their shell.
 *
 * Conventions (see docs/ARCHITECTURE.md):
 *   - fallible functions return 0 or a negative errno; -EAGAIN means "again";
 *   - human context goes into a caller-owned struct iod_err, never to stderr;
 *   - sizes count bytes, counts count items, units go last in names.
 */
#ifndef IOD_BASE_H
#define IOD_BASE_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "iod/limits.h"

#ifndef IOD_VERSION
#define IOD_VERSION "dev"
#endif

#define IOD_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define IOD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define IOD_MAX(a, b) ((a) > (b) ? (a) : (b))
#define IOD_UNUSED(x) ((void)(x))
#define IOD_LIKELY(x) __builtin_expect(!!(x), 1)
#define IOD_UNLIKELY(x) __builtin_expect(!!(x), 0)

/*
 * Assertions. IOD_ASSERT stays on in every build: invariants are checked.
 * IOD_ASSERT_HOT is for per-packet and per-event paths; it compiles out when
 * NDEBUG_HOT is defined (release builds) and stays on in the sanitizer build.
 */
void iod_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define IOD_ASSERT(e) (IOD_LIKELY(e) ? (void)0 : iod_assert_fail(#e, __FILE__, __LINE__))
#ifdef NDEBUG_HOT
#define IOD_ASSERT_HOT(e) ((void)0)
#else
#define IOD_ASSERT_HOT(e) IOD_ASSERT(e)
#endif

/* ---- errors ------------------------------------------------------------ */

/* A caller-owned error: the negative errno and a human message. */
struct iod_err {
	int code;                  /* 0 or a negative errno */
	char msg[IOD_ERR_MSG_MAX]; /* what went wrong, where, what to do */
};

/* Record an error (if e is not NULL) and return code (negative errno). */
int iod_err_set(struct iod_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix an existing message with more context ("loading x: <old>"). */
int iod_err_wrap(struct iod_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void iod_err_clear(struct iod_err *e);

/* ---- logging ----------------------------------------------------------- */

#define IOD_LOG_LEVELS(X) \
	X(DEBUG, "debug") \
	X(INFO, "info")   \
	X(WARN, "warn")   \
	X(ERROR, "error")

enum iod_log_level {
#define X(n, s) IOD_LOG_##n,
	IOD_LOG_LEVELS(X)
#undef X
};

enum iod_log_format { IOD_LOG_TEXT, IOD_LOG_JSON };

void iod_log_set_level(enum iod_log_level level);
void iod_log_set_format(enum iod_log_format fmt);
void iod_log_set_stream(FILE *f); /* default stderr */
int iod_log_level_parse(const char *s, enum iod_log_level *out);
const char *iod_log_level_name(enum iod_log_level level);
bool iod_log_enabled(enum iod_log_level level);
/* Log one line tagged with a component ("sched", "raft"); shells only. */
void iod_log(enum iod_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define IOD_DEBUG(comp, ...)                                       \
	do {                                                       \
		if (iod_log_enabled(IOD_LOG_DEBUG))                \
			iod_log(IOD_LOG_DEBUG, comp, __VA_ARGS__); \
	} while (0)
#define IOD_INFO(comp, ...) iod_log(IOD_LOG_INFO, comp, __VA_ARGS__)
#define IOD_WARN(comp, ...) iod_log(IOD_LOG_WARN, comp, __VA_ARGS__)
#define IOD_ERROR(comp, ...) iod_log(IOD_LOG_ERROR, comp, __VA_ARGS__)

/* ---- time -------------------------------------------------------------- */

#define IOD_NS_PER_US 1000ull
#define IOD_NS_PER_MS 1000000ull
#define IOD_NS_PER_S 1000000000ull

/*
 * Time in iod: cores never read a clock; they are handed the time
 * (`now_ns`) by their shell, and tests and the simulator hand them the
 * time they choose. Shells read it here, in one place.
 */
/* CLOCK_MONOTONIC in nanoseconds (shells only). */
uint64_t iod_clock_now_ns(void);
/* Wall-clock Unix time in ns, for timestamps users read (shells only). */
uint64_t iod_time_unix_ns(void);

/* ---- descriptors (src/base/fd.c, shells only) ---------------------------- */

struct sockaddr;
/* One descriptor held in reserve for iod_fd_accept (/dev/null); -1 on error. */
int iod_fd_reserve_open(void);
/*
 * accept4(lfd, sa, sl, flags) that does not leave a listener spinning when
 * the process is out of descriptors: on EMFILE/ENFILE it closes *reserve,
 * accepts and closes the oldest queued connection, reopens the reserve and
 * returns -ECONNABORTED (count it as shed). Other failures: -errno
 * (-EAGAIN: nothing queued). sl is a socklen_t *.
 */
int iod_fd_accept(int lfd, struct sockaddr *sa, unsigned int *sl, int flags, int *reserve);
/* Raise RLIMIT_NOFILE's soft limit to its hard limit (daemons, at start);
 * *soft_out (may be NULL) gets the limit now in force. */
int iod_fd_limit_raise(uint64_t *soft_out);

/* ---- deterministic random numbers (xoshiro256**) ------------------------ */

struct iod_rng {
	uint64_t s[4]; /* xoshiro256** state, never all zero */
};

/* Seed through splitmix64: any seed, including 0, gives a valid state. */
void iod_rng_seed(struct iod_rng *r, uint64_t seed);
uint64_t iod_rng_next(struct iod_rng *r);
/* Uniform in [0, bound) without modulo bias (Lemire); bound > 0. */
uint64_t iod_rng_below(struct iod_rng *r, uint64_t bound);
/* Uniform double in [0, 1). */
double iod_rng_double(struct iod_rng *r);
/* Exponentially distributed with the given mean. */
double iod_rng_exp(struct iod_rng *r, double mean);
/* An independent stream derived from this one (for per-node generators). */
void iod_rng_fork(struct iod_rng *r, struct iod_rng *child);

/* ---- hashing ----------------------------------------------------------- */

uint64_t iod_hash_bytes(const void *data, size_t len, uint64_t seed);
uint64_t iod_hash_str(const char *s);
/* CRC-32C (Castagnoli), as storage formats use it: every single-bit and
 * every burst error up to 32 bits is detected. crc is the running value
 * (0 to start). */
uint32_t iod_crc32c(uint32_t crc, const void *data, size_t len);
static inline uint64_t iod_hash_u64(uint64_t x)
{
	/* splitmix64 finaliser: a fast, well-mixed integer hash */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* ---- arena: bump allocation freed all at once --------------------------- */

struct iod_arena_chunk;
struct iod_arena {
	struct iod_arena_chunk *head; /* newest chunk first */
	size_t chunk_bytes;           /* size of ordinary chunks */
	size_t used_bytes;            /* total handed out, for accounting */
	size_t limit_bytes;           /* 0 = unbounded; else -ENOMEM past it */
};

void iod_arena_init(struct iod_arena *a, size_t chunk_bytes, size_t limit_bytes);
/* 16-byte aligned, zeroed memory, or NULL past the limit / out of memory. */
void *iod_arena_alloc(struct iod_arena *a, size_t bytes);
char *iod_arena_strdup(struct iod_arena *a, const char *s);
char *iod_arena_strndup(struct iod_arena *a, const char *s, size_t n);
void iod_arena_reset(struct iod_arena *a); /* keep the first chunk */
void iod_arena_free(struct iod_arena *a);

/* ---- pool: fixed-size objects, allocated at start-up -------------------- */

struct iod_pool {
	unsigned char *mem;  /* capacity * obj_bytes */
	uint32_t *free_list; /* stack of free indexes */
	uint32_t free_n;     /* entries on the stack */
	uint32_t capacity;   /* objects in total */
	size_t obj_bytes;    /* rounded up to 16 */
};

int iod_pool_init(struct iod_pool *p, size_t obj_bytes, uint32_t capacity);
void iod_pool_destroy(struct iod_pool *p);
/* NULL when every object is in use: callers handle exhaustion explicitly. */
void *iod_pool_get(struct iod_pool *p);
void iod_pool_put(struct iod_pool *p, void *obj);
uint32_t iod_pool_index(const struct iod_pool *p, const void *obj);
void *iod_pool_at(const struct iod_pool *p, uint32_t index);
static inline uint32_t iod_pool_in_use(const struct iod_pool *p)
{
	return p->capacity - p->free_n;
}

/* ---- hash map: open addressing, linear probing, backward-shift delete ---- */

/*
 * Keys are 64-bit integers (hash a string or a tuple into one with
 * iod_hash_*, or use an id). Key 0 is reserved as "empty"; iod_map callers
 * that may see 0 add 1. Iteration order is the slot order: deterministic for
 * the same sequence of operations.
 */
struct iod_map_slot {
	uint64_t key;   /* 0 = empty */
	uint64_t value; /* an integer or a pointer cast to uintptr_t */
};

struct iod_map {
	struct iod_map_slot *slots; /* capacity slots, a power of two */
	uint32_t capacity;          /* slots */
	uint32_t count;             /* occupied slots */
	uint32_t max_count;         /* 0 = grow freely; else -ENOSPC past it */
};

int iod_map_init(struct iod_map *m, uint32_t initial_capacity, uint32_t max_count);
void iod_map_destroy(struct iod_map *m);
/* Insert or replace. -ENOSPC when max_count is reached, -ENOMEM. */
int iod_map_put(struct iod_map *m, uint64_t key, uint64_t value);
/* 0 and *value on a hit, -ENOENT on a miss. value may be NULL. */
int iod_map_get(const struct iod_map *m, uint64_t key, uint64_t *value);
int iod_map_del(struct iod_map *m, uint64_t key);
/* Iterate: start with *pos = 0; returns false when done. */
bool iod_map_next(const struct iod_map *m, uint32_t *pos, uint64_t *key, uint64_t *value);

/* ---- bitmaps: CPU sets and GPU sets ------------------------------------- */

struct iod_bitmap {
	uint64_t w[IOD_BITMAP_WORDS]; /* bit i = member i */
};

static inline void iod_bitmap_zero(struct iod_bitmap *b)
{
	for (unsigned i = 0; i < IOD_BITMAP_WORDS; i++)
		b->w[i] = 0;
}
static inline void iod_bitmap_set(struct iod_bitmap *b, unsigned i)
{
	if (i < IOD_BITMAP_BITS)
		b->w[i / 64] |= 1ull << (i % 64);
}
static inline void iod_bitmap_clear(struct iod_bitmap *b, unsigned i)
{
	if (i < IOD_BITMAP_BITS)
		b->w[i / 64] &= ~(1ull << (i % 64));
}
static inline bool iod_bitmap_test(const struct iod_bitmap *b, unsigned i)
{
	return i < IOD_BITMAP_BITS && (b->w[i / 64] >> (i % 64)) & 1;
}
unsigned iod_bitmap_count(const struct iod_bitmap *b);
bool iod_bitmap_empty(const struct iod_bitmap *b);
bool iod_bitmap_equal(const struct iod_bitmap *a, const struct iod_bitmap *b);
/* Set bits of a that are also in b (a &= b), (a |= b), (a &= ~b). */
void iod_bitmap_and(struct iod_bitmap *a, const struct iod_bitmap *b);
void iod_bitmap_or(struct iod_bitmap *a, const struct iod_bitmap *b);
void iod_bitmap_andnot(struct iod_bitmap *a, const struct iod_bitmap *b);
bool iod_bitmap_subset(const struct iod_bitmap *a, const struct iod_bitmap *b);
/* First set bit at or after from, or -1. */
int iod_bitmap_next(const struct iod_bitmap *b, unsigned from);
void iod_bitmap_set_range(struct iod_bitmap *b, unsigned first, unsigned last);
/* "0-3,8,10-11" (the Linux cpulist format); "" for the empty set. */
int iod_bitmap_format(const struct iod_bitmap *b, char *buf, size_t len);
/* "0,1,2,3,8": every index, no ranges (what CUDA_VISIBLE_DEVICES and
 * NVIDIA_VISIBLE_DEVICES read: "0-3" is not a list of GPUs to CUDA). */
int iod_bitmap_format_list(const struct iod_bitmap *b, char *buf, size_t len);
int iod_bitmap_parse(const char *s, struct iod_bitmap *b, struct iod_err *e);

/* ---- strings ----------------------------------------------------------- */

/* snprintf that never overflows; returns -ENOSPC if truncated. */
int iod_strlcpy(char *dst, const char *src, size_t len);
/* The value of one hexadecimal digit (either case), or -1. */
int iod_hex_digit(char c);
/* len bytes as 2*len lowercase hex digits and a NUL (out: 2*len+1). */
void iod_hex_encode(const void *buf, size_t len, char *out);
/* Hex digits (either case, an even number) to bytes: how many, -EINVAL for
 * an odd count or a non-digit, -ENOSPC past cap. */
ssize_t iod_hex_decode(const char *hex, size_t hex_len, void *out, size_t cap);
/* Levenshtein distance, bounded (stops counting at max). */
unsigned iod_edit_distance(const char *a, const char *b, unsigned max);
/* The candidate closest to word within distance 2 (or a prefix match), else NULL. */
const char *iod_suggest(const char *word, const char *const *candidates, size_t n);
bool iod_str_has_prefix(const char *s, const char *prefix);
/* Every one of s[0..n) is in the names' alphabet [A-Za-z0-9._-] (true for n == 0;
 * callers bound the length and any first-character rule themselves). */
bool iod_str_name_chars(const char *s, size_t n);

/* A growable string buffer for building output. */
struct iod_buf {
	char *data; /* NUL-terminated */
	size_t len; /* bytes before the NUL */
	size_t cap; /* allocated bytes */
};
void iod_buf_init(struct iod_buf *b);
void iod_buf_free(struct iod_buf *b);
int iod_buf_printf(struct iod_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int iod_buf_append(struct iod_buf *b, const void *data, size_t len);
/* Read a whole file (bounded by max_bytes) into b. */
int iod_buf_read_file(struct iod_buf *b, const char *path, size_t max_bytes, struct iod_err *e);

/* ---- units ------------------------------------------------------------- */

/*
 * Sizes: B; KB, MB, GB, TB, PB are decimal (10^3...); KiB, MiB, GiB, TiB,
 * PiB binary (2^10...). "64GB" is 64 * 10^9 bytes. K/M/G/T alone are
 * accepted as decimal, Ki/Mi/Gi/Ti as binary (Kubernetes spellings).
 * A bare number is bytes. Fractions are allowed where the result is whole.
 */
int iod_parse_size(const char *s, uint64_t *bytes, struct iod_err *e);
/* Bandwidth: bps, Kbps, Mbps, Gbps, Tbps (decimal); also "b/s" spellings. */
int iod_parse_bandwidth(const char *s, uint64_t *bps, struct iod_err *e);
/* Durations: ns, us, µs, ms, s, m, h; a bare number is rejected (ambiguous). */
int iod_parse_duration(const char *s, uint64_t *ns, struct iod_err *e);
/* Percentages "20%" or "12.5%" in basis points (1/100 of a percent): 0..10000. */
int iod_parse_percent(const char *s, uint32_t *bp, struct iod_err *e);

#define IOD_CMP_OPS(X) \
	X(EQ, "=")     \
	X(LT, "<")     \
	X(LE, "<=")    \
	X(GT, ">")     \
	X(GE, ">=")

enum iod_cmp {
#define X(n, s) IOD_CMP_##n,
	IOD_CMP_OPS(X)
#undef X
};
const char *iod_cmp_name(enum iod_cmp op);

/* A bound like "<5us" or ">=100Gbps": an operator and a value in base units. */
struct iod_bound {
	enum iod_cmp op; /* EQ when no prefix was written */
	uint64_t value;  /* in the base unit of the quantity */
};

enum iod_unit_kind { IOD_UNIT_SIZE, IOD_UNIT_BANDWIDTH, IOD_UNIT_DURATION };
int iod_parse_bound(const char *s, enum iod_unit_kind kind, struct iod_bound *b, struct iod_err *e);
bool iod_bound_holds(const struct iod_bound *b, uint64_t v);

/* Human formatting: "64 GB", "100 Gbps", "5 us" (choose the largest exact unit). */
void iod_format_size(uint64_t bytes, char *buf, size_t len);
void iod_format_bandwidth(uint64_t bps, char *buf, size_t len);
void iod_format_duration(uint64_t ns, char *buf, size_t len);

/* ---- Maglev consistent hashing (Eisenbud et al., NSDI'16) --------------- */

/*
 * A lookup table of table_size slots (a prime, much larger than the backend
 * count: 65537 by default) filled so that each backend owns ~table_size/n
 * slots, in proportion to its weight, and removing one of n backends remaps
 * about 1/n of keys. Used by the data plane's service LB and by the mesh.
 * Build on the control path; lookups are one modulo and one load.
 */
struct iod_maglev {
	uint32_t *table;     /* table_size entries: index into the backend list */
	uint32_t table_size; /* a prime */
	uint32_t backends_n; /* backends the table was built from; 0 = empty */
};

#define IOD_MAGLEV_DEFAULT_SIZE 65537u

/*
 * Build from backend keys (stable identities, e.g. a hash of "ip:port") and
 * optional weights (NULL = all equal; a weight of 0 takes no slot). Rebuild
 * with the new list when backends change. -EINVAL for a non-prime size or
 * more backends than slots, -ENOMEM.
 */
int iod_maglev_build(struct iod_maglev *mg, uint32_t table_size, const uint64_t *keys,
                     const uint32_t *weights, uint32_t n);
void iod_maglev_free(struct iod_maglev *mg);
/* The backend index for a flow hash; UINT32_MAX when the table is empty. */
static inline uint32_t iod_maglev_lookup(const struct iod_maglev *mg, uint64_t hash)
{
	if (!mg->backends_n)
		return UINT32_MAX;
	return mg->table[hash % mg->table_size];
}

/* ---- JSON helpers over jansson ----------------------------------------- */

#include <jansson.h>

/* Print v to f, indented (or compact), with a trailing newline; keeps key order. */
int iod_json_print(FILE *f, const json_t *v, bool compact);
/* Serialise to a malloc'd string the caller frees. */
char *iod_json_string(const json_t *v, bool compact);
/* Typed getters: 0 on success, -ENOENT when missing, -EINVAL on a wrong type. */
int iod_json_get_str(const json_t *obj, const char *key, const char **out);
int iod_json_get_u64(const json_t *obj, const char *key, uint64_t *out);
int iod_json_get_bool(const json_t *obj, const char *key, bool *out);
/* Parse text into *out, with the error position in e. */
int iod_json_parse(const char *text, size_t len, json_t **out, struct iod_err *e);

#endif
