/*
 * fuzz_chaos_history.c: libFuzzer target for the chaos history parser
 * (include/iod/chaos.h). A history that parses has ops in invocation order
 * with completions after invocations, set values inside vals, and every
 * checker (register, set, bank, append) runs on it without crashing and
 * with consistent results.
 */
#include "iod/chaos.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_chaos_history h;
	struct iod_err e;
	if (iod_chaos_history_parse((const char *)data, size, &h, &e) < 0) {
		if (e.msg[0] == 0)
			abort(); /* an error always says why */
		return 0;
	}
	for (uint32_t i = 0; i < h.n; i++) {
		const struct iod_chaos_op *o = &h.ops[i];
		if (i > 0 && h.ops[i - 1].inv >= o->inv)
			abort();
		if (o->inv >= h.events || (o->cmp != IOD_CHAOS_NONE && o->cmp <= o->inv))
			abort();
		if (o->is_set && (uint64_t)o->set_off + o->set_n > h.nvals)
			abort();
	}
	struct iod_chaos_lin_result r;
	if (iod_chaos_check_register(&h, 2000, &r, &e) == 0) {
		if (r.verdict == IOD_CHAOS_NOT_LINEARIZABLE &&
		    (r.fail_op >= h.n || r.fail_events > h.events))
			abort();
		/* unknown: the search bound was hit, or nothing was acknowledged
		 * (nothing to check) */
		if (r.verdict == IOD_CHAOS_UNKNOWN && r.states <= 2000 &&
		    iod_chaos_history_acknowledged(&h) > 0)
			abort();
	}
	struct iod_chaos_set_result s;
	if (iod_chaos_check_set(&h, &s, &e) == 0) {
		if (s.ok && (s.nlost || s.nunexpected || s.no_final_read))
			abort();
		iod_chaos_set_result_free(&s);
	}
	struct iod_chaos_bank_result b;
	if (iod_chaos_check_bank(&h, 3, 30, &b, &e) == 0 &&
	    (b.ok != (b.reads > 0 && b.bad_reads == 0) ||
	     (b.first_bad != IOD_CHAOS_NONE && b.first_bad >= h.n)))
		abort();
	struct iod_chaos_append_result a;
	if (iod_chaos_check_append(&h, &a, &e) == 0) {
		uint32_t total = 0;
		for (int k = 0; k < IOD_CHAOS_APP_KINDS; k++)
			total += a.count[k];
		if (a.ok != (total == 0) || a.nfound > total ||
		    a.nfound > IOD_CHAOS_APPEND_FINDINGS)
			abort();
		for (uint32_t i = 0; i < a.nfound; i++)
			if (a.found[i].op >= h.n ||
			    (a.found[i].other != IOD_CHAOS_NONE && a.found[i].other >= h.n))
				abort();
	}
	iod_chaos_history_free(&h);
	return 0;
}
