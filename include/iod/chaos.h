/*
 * chaos.h: the pure core of `iod chaos` (issue 20): a history of client
 * operations in, a verdict out. No clock, no I/O, no threads.
 *
 * A history is what clients saw: each operation has a client, a kind, a
 * value, the event index of its invocation and of its completion (or
 * IOD_CHAOS_NONE: indeterminate, it may or may not have taken effect) and a
 * result. Two checkers read it: register linearizability (Wing-Gong search
 * with Lowe's memoisation, as Knossos and Porcupine do) and set invariants.
 */
#ifndef IOD_CHAOS_H
#define IOD_CHAOS_H

#include "iod/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IOD_CHAOS_NONE UINT32_MAX
#define IOD_CHAOS_MAX_OPS 100000u        /* a parsed history holds at most this many */
#define IOD_CHAOS_DEFAULT_STATES 100000u /* default bound on explored states */

enum iod_chaos_f { IOD_CHAOS_READ, IOD_CHAOS_WRITE, IOD_CHAOS_ADD };
enum iod_chaos_res { IOD_CHAOS_OK, IOD_CHAOS_FAIL, IOD_CHAOS_INFO };

struct iod_chaos_op {
	uint32_t client;
	enum iod_chaos_f f;
	enum iod_chaos_res res;
	bool has_value;   /* false: null (a read of the initial, unwritten register) */
	int64_t value;    /* written, added or read (register) value */
	uint32_t set_off; /* set read: its values are vals[set_off, set_off+set_n) */
	uint32_t set_n;
	bool is_set;   /* the value is a list (a set read) */
	uint32_t inv;  /* event index of the invocation */
	uint32_t cmp;  /* event index of the completion, or IOD_CHAOS_NONE */
	uint32_t line; /* line of the invocation in the parsed file, 0 if built */
};

struct iod_chaos_history {
	struct iod_chaos_op *ops;
	uint32_t n, cap;
	int64_t *vals; /* set read values */
	uint32_t nvals, vcap;
	uint32_t events; /* number of events (invocations and completions) */
};

void iod_chaos_history_free(struct iod_chaos_history *h);

/* Appends an op (ops are kept in invocation order by the parser); 0 or -ENOMEM. */
int iod_chaos_history_add(struct iod_chaos_history *h, const struct iod_chaos_op *op);

/*
 * Parses JSON lines, one event a line:
 *   {"client":1,"type":"invoke|ok|fail|info","f":"read|write|add","value":V}
 * V is an integer, null, or (a set read's result) a list of integers. An
 * invoke opens the client's operation; ok, fail or info completes it (info:
 * indeterminate). An operation still open at the end is indeterminate. Blank
 * lines are skipped. Returns 0, or -EINVAL with "line N: ..." in e.
 */
int iod_chaos_history_parse(const char *text, size_t len, struct iod_chaos_history *h,
                            struct iod_err *e);

enum iod_chaos_verdict {
	IOD_CHAOS_LINEARIZABLE,
	IOD_CHAOS_NOT_LINEARIZABLE,
	IOD_CHAOS_UNKNOWN, /* the bound on explored states was hit */
};

const char *iod_chaos_verdict_name(enum iod_chaos_verdict v);

struct iod_chaos_lin_result {
	enum iod_chaos_verdict verdict;
	uint64_t states; /* distinct (linearized set, state) pairs explored */
	/* not linearizable: the shortest prefix of events that cannot be
	 * linearized, and the op whose completion ends it (index into ops) */
	uint32_t fail_events;
	uint32_t fail_op;
};

/*
 * Register linearizability of the read/write ops of h (initial value null).
 * Failed ops never took effect; indeterminate writes take effect at any point
 * after their invocation or never; indeterminate reads constrain nothing.
 * max_states bounds the search (0: IOD_CHAOS_DEFAULT_STATES). Returns 0 with
 * r filled, or -ENOMEM / -E2BIG (more than IOD_CHAOS_MAX_OPS ops).
 */
int iod_chaos_check_register(const struct iod_chaos_history *h, uint64_t max_states,
                             struct iod_chaos_lin_result *r, struct iod_err *e);

struct iod_chaos_set_result {
	bool ok;
	bool no_final_read; /* no successful read at all */
	int64_t *lost;      /* acknowledged adds missing from the final read */
	uint32_t nlost;
	int64_t *unexpected; /* values read that no ok or info add wrote */
	uint32_t nunexpected;
	uint32_t acknowledged; /* ok adds */
};

/* Set invariants over the add/read ops of h; the final read is the ok read
 * that completes last. Returns 0 or -ENOMEM. */
int iod_chaos_check_set(const struct iod_chaos_history *h, struct iod_chaos_set_result *r,
                        struct iod_err *e);
void iod_chaos_set_result_free(struct iod_chaos_set_result *r);

#endif
