/*
 * test_chaos_check.c: the chaos checker's pure core (include/iod/chaos.h):
 * classic linearizable and non-linearizable register histories, the search
 * bound giving "unknown", set lost/unexpected values, bank totals, append
 * lists (lost, reordered, duplicate, unexpected, diverged, stale) and parser
 * errors.
 */
#include "harness.h"
#include "iod/chaos.h"

#include <errno.h>
#include <stdlib.h>

#define INV(c, f, v) "{\"client\":" #c ",\"type\":\"invoke\",\"f\":\"" f "\",\"value\":" v "}\n"
#define OK(c, f, v) "{\"client\":" #c ",\"type\":\"ok\",\"f\":\"" f "\",\"value\":" v "}\n"
#define INFO(c, f) "{\"client\":" #c ",\"type\":\"info\",\"f\":\"" f "\"}\n"
#define FAIL(c, f) "{\"client\":" #c ",\"type\":\"fail\",\"f\":\"" f "\"}\n"

static struct iod_err err;

/* Parses text and checks it as a register; returns the verdict or -1. */
static int reg(const char *text, uint64_t bound, struct iod_chaos_lin_result *r)
{
	struct iod_chaos_history h;
	if (iod_chaos_history_parse(text, strlen(text), &h, &err) < 0)
		return -1;
	int rc = iod_chaos_check_register(&h, bound, r, &err);
	iod_chaos_history_free(&h);
	return rc < 0 ? -2 : (int)r->verdict;
}

TEST(concurrent_writes_read_in_either_order)
{
	struct iod_chaos_lin_result r;
	/* w1 and w2 overlap; a later read may see either */
	const char *a = INV(1, "write", "1") INV(2, "write", "2") OK(1, "write", "1")
	    OK(2, "write", "2") INV(3, "read", "null") OK(3, "read", "1");
	const char *b = INV(1, "write", "1") INV(2, "write", "2") OK(1, "write", "1")
	    OK(2, "write", "2") INV(3, "read", "null") OK(3, "read", "2");
	CHECK_EQ(reg(a, 0, &r), IOD_CHAOS_LINEARIZABLE);
	CHECK(r.states > 0);
	CHECK_EQ(reg(b, 0, &r), IOD_CHAOS_LINEARIZABLE);
	/* the initial null is readable before any write */
	CHECK_EQ(reg(INV(1, "read", "null") OK(1, "read", "null"), 0, &r), IOD_CHAOS_LINEARIZABLE);
}

TEST(indeterminate_write_later_observed)
{
	struct iod_chaos_lin_result r;
	/* w1 completes; w2 times out (info) and is seen later, or never */
	const char *seen =
	    INV(1, "write", "1") OK(1, "write", "1") INV(2, "write", "2") INFO(2, "write")
	        INV(3, "read", "null") OK(3, "read", "2") INV(3, "read", "null") OK(3, "read", "2");
	const char *never = INV(1, "write", "1") OK(1, "write", "1") INV(2, "write", "2")
	    INFO(2, "write") INV(3, "read", "null") OK(3, "read", "1");
	/* still open at the end of the history: indeterminate too */
	const char *open = INV(2, "write", "7") INV(3, "read", "null") OK(3, "read", "7");
	CHECK_EQ(reg(seen, 0, &r), IOD_CHAOS_LINEARIZABLE);
	CHECK_EQ(reg(never, 0, &r), IOD_CHAOS_LINEARIZABLE);
	CHECK_EQ(reg(open, 0, &r), IOD_CHAOS_LINEARIZABLE);
	/* but a failed write never took effect */
	const char *failed =
	    INV(2, "write", "7") FAIL(2, "write") INV(3, "read", "null") OK(3, "read", "7");
	CHECK_EQ(reg(failed, 0, &r), IOD_CHAOS_NOT_LINEARIZABLE);
	/* an indeterminate write takes effect after its invocation, not before */
	const char *early =
	    INV(3, "read", "null") OK(3, "read", "7") INV(2, "write", "7") INFO(2, "write");
	CHECK_EQ(reg(early, 0, &r), IOD_CHAOS_NOT_LINEARIZABLE);
}

TEST(stale_read_after_completed_write)
{
	struct iod_chaos_lin_result r;
	const char *h =
	    INV(1, "write", "1") OK(1, "write", "1") INV(1, "write", "2") OK(1, "write", "2")
	        INV(2, "read", "null") OK(2, "read", "1") INV(1, "write", "3") OK(1, "write", "3");
	CHECK_EQ(reg(h, 0, &r), IOD_CHAOS_NOT_LINEARIZABLE);
	/* the shortest failing prefix ends at the stale read's completion (event 6) */
	CHECK_EQ(r.fail_events, 6);
	CHECK_EQ(r.fail_op, 2);
}

TEST(read_of_value_never_written)
{
	struct iod_chaos_lin_result r;
	const char *h =
	    INV(1, "write", "1") OK(1, "write", "1") INV(2, "read", "null") OK(2, "read", "42");
	CHECK_EQ(reg(h, 0, &r), IOD_CHAOS_NOT_LINEARIZABLE);
	CHECK_EQ(r.fail_events, 4);
	CHECK_EQ(r.fail_op, 1);
}

TEST(new_then_old_read_sequentially)
{
	struct iod_chaos_lin_result r;
	/* w2 is concurrent with both reads, but once a read saw 2, a later one
	 * cannot see 1 again */
	const char *h =
	    INV(1, "write", "1") OK(1, "write", "1") INV(1, "write", "2") INV(2, "read", "null")
	        OK(2, "read", "2") INV(2, "read", "null") OK(2, "read", "1") OK(1, "write", "2");
	CHECK_EQ(reg(h, 0, &r), IOD_CHAOS_NOT_LINEARIZABLE);
	CHECK_EQ(r.fail_events, 7);
	CHECK_EQ(r.fail_op, 3);
	/* old then new is fine */
	const char *ok =
	    INV(1, "write", "1") OK(1, "write", "1") INV(1, "write", "2") INV(2, "read", "null")
	        OK(2, "read", "1") INV(2, "read", "null") OK(2, "read", "2") OK(1, "write", "2");
	CHECK_EQ(reg(ok, 0, &r), IOD_CHAOS_LINEARIZABLE);
}

TEST(bound_gives_unknown)
{
	/* many concurrent writes and a read no order explains: the search must
	 * explore the subsets of writes; a small bound stops it */
	struct iod_chaos_history h = {0};
	uint32_t ev = 0;
	for (uint32_t c = 0; c < 16; c++) {
		struct iod_chaos_op o = {.client = c,
		                         .f = IOD_CHAOS_WRITE,
		                         .res = IOD_CHAOS_OK,
		                         .has_value = true,
		                         .value = c,
		                         .inv = ev++};
		CHECK_EQ(iod_chaos_history_add(&h, &o), 0);
	}
	for (uint32_t c = 0; c < 16; c++)
		h.ops[c].cmp = ev++;
	struct iod_chaos_op rd = {.client = 99,
	                          .f = IOD_CHAOS_READ,
	                          .res = IOD_CHAOS_OK,
	                          .has_value = true,
	                          .value = 1000,
	                          .inv = ev,
	                          .cmp = ev + 1};
	CHECK_EQ(iod_chaos_history_add(&h, &rd), 0);
	struct iod_chaos_lin_result r;
	CHECK_EQ(iod_chaos_check_register(&h, 50, &r, &err), 0);
	CHECK_EQ(r.verdict, IOD_CHAOS_UNKNOWN);
	CHECK(r.states > 50);
	CHECK_EQ(strcmp(iod_chaos_verdict_name(r.verdict), "unknown"), 0);
	/* with room, the memo settles it (16 writes: at most 2^16 * 17 states) */
	CHECK_EQ(iod_chaos_check_register(&h, 5000000, &r, &err), 0);
	CHECK_EQ(r.verdict, IOD_CHAOS_NOT_LINEARIZABLE);
	iod_chaos_history_free(&h);
}

/* A history with no acknowledged op (a run whose every op failed or timed
 * out) checked nothing: unknown, never linearizable. */
TEST(nothing_acknowledged_is_unknown)
{
	struct iod_chaos_lin_result r;
	const char *failed = INV(1, "write", "1") FAIL(1, "write") INV(2, "read", "null")
	    FAIL(2, "read") INV(3, "write", "2") INFO(3, "write");
	CHECK_EQ(reg(failed, 0, &r), IOD_CHAOS_UNKNOWN);
	CHECK_EQ(r.states, 0);
	CHECK_EQ(reg("", 0, &r), IOD_CHAOS_UNKNOWN);
	struct iod_chaos_history h;
	CHECK_EQ(iod_chaos_history_parse(failed, strlen(failed), &h, &err), 0);
	CHECK_EQ(iod_chaos_history_acknowledged(&h), 0);
	iod_chaos_history_free(&h);
	/* one ok read is something checked */
	const char *one =
	    INV(1, "write", "1") FAIL(1, "write") INV(2, "read", "null") OK(2, "read", "null");
	CHECK_EQ(reg(one, 0, &r), IOD_CHAOS_LINEARIZABLE);
	CHECK_EQ(iod_chaos_history_parse(one, strlen(one), &h, &err), 0);
	CHECK_EQ(iod_chaos_history_acknowledged(&h), 1);
	iod_chaos_history_free(&h);
}

TEST(set_lost_and_unexpected)
{
	const char *text = INV(1, "add", "1") OK(1, "add", "1") INV(2, "add", "2") OK(2, "add", "2")
	    INV(3, "add", "3") INFO(3, "add") INV(4, "add", "4") FAIL(4, "add")
	        INV(1, "read", "null") OK(1, "read", "[1,3,4,9]") INV(1, "read", "null")
	            OK(1, "read", "[1,3,4,9]");
	struct iod_chaos_history h;
	CHECK_EQ(iod_chaos_history_parse(text, strlen(text), &h, &err), 0);
	struct iod_chaos_set_result r;
	CHECK_EQ(iod_chaos_check_set(&h, &r, &err), 0);
	CHECK(!r.ok);
	CHECK_EQ(r.acknowledged, 2);
	CHECK_EQ(r.nlost, 1);
	CHECK_EQ(r.lost[0], 2);
	/* 3's add was indeterminate: may be present; 4's failed; 9 never added */
	CHECK_EQ(r.nunexpected, 2);
	CHECK_EQ(r.unexpected[0], 4);
	CHECK_EQ(r.unexpected[1], 9);
	iod_chaos_set_result_free(&r);
	iod_chaos_history_free(&h);

	const char *good =
	    INV(1, "add", "1") OK(1, "add", "1") INV(1, "read", "null") OK(1, "read", "[1]");
	CHECK_EQ(iod_chaos_history_parse(good, strlen(good), &h, &err), 0);
	CHECK_EQ(iod_chaos_check_set(&h, &r, &err), 0);
	CHECK(r.ok);
	iod_chaos_set_result_free(&r);
	iod_chaos_history_free(&h);

	const char *noread = INV(1, "add", "1") OK(1, "add", "1");
	CHECK_EQ(iod_chaos_history_parse(noread, strlen(noread), &h, &err), 0);
	CHECK_EQ(iod_chaos_check_set(&h, &r, &err), 0);
	CHECK(!r.ok);
	CHECK(r.no_final_read);
	iod_chaos_set_result_free(&r);
	iod_chaos_history_free(&h);
}

/* Keyed events of an append history. */
#define KINV(c, k, f, v) \
	"{\"client\":" #c ",\"key\":" #k ",\"type\":\"invoke\",\"f\":\"" f "\",\"value\":" v "}\n"
#define KOK(c, k, f, v) \
	"{\"client\":" #c ",\"key\":" #k ",\"type\":\"ok\",\"f\":\"" f "\",\"value\":" v "}\n"

static int bank(const char *text, struct iod_chaos_bank_result *r)
{
	struct iod_chaos_history h;
	if (iod_chaos_history_parse(text, strlen(text), &h, &err) < 0)
		return -1;
	int rc = iod_chaos_check_bank(&h, 3, 30, r, &err);
	iod_chaos_history_free(&h);
	return rc < 0 ? -2 : r->ok;
}

TEST(bank_totals_conserved)
{
	struct iod_chaos_bank_result r;
	/* 3 accounts of 10: a transfer of 4 from 0 to 2, reads before and after */
	const char *good = INV(1, "read", "null") OK(1, "read", "[10,10,10]")
	    INV(2, "transfer", "[0,2,4]") OK(2, "transfer", "null") INV(1, "read", "null")
	        OK(1, "read", "[6,10,14]") INV(2, "transfer", "[1,0,3]") FAIL(2, "transfer");
	CHECK_EQ(bank(good, &r), 1);
	CHECK_EQ(r.reads, 2);
	CHECK_EQ(r.acknowledged, 1);
	CHECK_EQ(r.first_bad, IOD_CHAOS_NONE);
	/* half a transfer seen: money made */
	const char *made = INV(2, "transfer", "[0,2,4]") INV(1, "read", "null")
	    OK(1, "read", "[10,10,14]") OK(2, "transfer", "null");
	CHECK_EQ(bank(made, &r), 0);
	CHECK_EQ(r.bad_reads, 1);
	CHECK_EQ(r.first_bad, 1);
	CHECK_EQ(r.first_total, 34);
	/* a negative balance, even with the right total */
	CHECK_EQ(bank(INV(1, "read", "null") OK(1, "read", "[-1,21,10]"), &r), 0);
	CHECK_EQ(r.bad_reads, 1);
	/* an account missing */
	CHECK_EQ(bank(INV(1, "read", "null") OK(1, "read", "[10,20]"), &r), 0);
	/* no read at all proves nothing */
	CHECK_EQ(bank(INV(2, "transfer", "[0,2,4]") OK(2, "transfer", "null"), &r), 0);
	CHECK(r.no_read);
}

static int append(const char *text, struct iod_chaos_append_result *r)
{
	struct iod_chaos_history h;
	if (iod_chaos_history_parse(text, strlen(text), &h, &err) < 0)
		return -1;
	int rc = iod_chaos_check_append(&h, r, &err);
	iod_chaos_history_free(&h);
	return rc < 0 ? -2 : r->ok;
}

TEST(append_valid_histories)
{
	struct iod_chaos_append_result r;
	/* two keys; concurrent appends 1 and 2 land in either order; an
	 * indeterminate 3 may show up; a read in the middle is a prefix */
	const char *t = KINV(1, 0, "append", "1") KINV(2, 0, "append", "2") KOK(
	    2, 0, "append", "2") KINV(3, 0, "read", "null") KOK(1, 0, "append", "1")
	    KOK(3, 0, "read", "[2]") KINV(1, 1, "append", "5") KOK(1, 1, "append", "5") KINV(
	        2, 0, "append",
	        "3") "{\"client\":2,\"key\":0,\"type\":\"info\",\"f\":\"append\"}\n" KINV(3, 0,
	                                                                                  "read",
	                                                                                  "null")
	        KOK(3, 0, "read", "[2,1,3]") KINV(3, 1, "read", "null") KOK(3, 1, "read", "[5]");
	CHECK_EQ(append(t, &r), 1);
	CHECK_EQ(r.acknowledged, 3);
	CHECK_EQ(r.reads, 3);
	CHECK_EQ(r.nfound, 0);
}

TEST(append_anomalies)
{
	struct iod_chaos_append_result r;
	/* lost: 2 acknowledged, not in the final read */
	CHECK_EQ(append(KINV(1, 0, "append", "1") KOK(1, 0, "append", "1") KINV(1, 0, "append", "2")
	                    KOK(1, 0, "append", "2") KINV(2, 0, "read", "null")
	                        KOK(2, 0, "read", "[1]"),
	                &r),
	         0);
	CHECK_EQ(r.count[IOD_CHAOS_APP_LOST], 1);
	CHECK_EQ(r.found[0].kind, IOD_CHAOS_APP_LOST);
	CHECK_EQ(r.found[0].value, 2);
	CHECK_EQ(r.found[0].other, 2); /* the final read */
	/* reordered: 1 acknowledged before 2 was invoked, yet 2 comes first */
	CHECK_EQ(append(KINV(1, 0, "append", "1") KOK(1, 0, "append", "1") KINV(1, 0, "append", "2")
	                    KOK(1, 0, "append", "2") KINV(2, 0, "read", "null")
	                        KOK(2, 0, "read", "[2,1]"),
	                &r),
	         0);
	CHECK_EQ(r.count[IOD_CHAOS_APP_REORDERED], 1);
	CHECK_EQ(r.found[0].value, 2);
	CHECK_EQ(r.found[0].other, 0);
	/* duplicate and unexpected (a failed append's value) in the final read */
	CHECK_EQ(append(KINV(1, 0, "append", "1") KOK(1, 0, "append", "1") KINV(1, 0, "append", "4")
	                    FAIL(1, "append") KINV(2, 0, "read", "null")
	                        KOK(2, 0, "read", "[1,1,4]"),
	                &r),
	         0);
	CHECK_EQ(r.count[IOD_CHAOS_APP_DUPLICATE], 1);
	CHECK_EQ(r.count[IOD_CHAOS_APP_UNEXPECTED], 1);
	/* diverged: an earlier read that is no prefix of the final one */
	CHECK_EQ(append(KINV(1, 0, "append", "1") KINV(3, 0, "append", "2") KOK(1, 0, "append", "1")
	                    KOK(3, 0, "append", "2") KINV(2, 0, "read", "null")
	                        KOK(2, 0, "read", "[2]") KINV(2, 0, "read", "null")
	                            KOK(2, 0, "read", "[1,2]"),
	                &r),
	         0);
	CHECK_EQ(r.count[IOD_CHAOS_APP_DIVERGED], 1);
	/* stale: a read begun after 2 was acknowledged misses it */
	CHECK_EQ(append(KINV(1, 0, "append", "1") KOK(1, 0, "append", "1") KINV(1, 0, "append", "2")
	                    KOK(1, 0, "append", "2") KINV(2, 0, "read", "null")
	                        KOK(2, 0, "read", "[1]") KINV(2, 0, "read", "null")
	                            KOK(2, 0, "read", "[1,2]"),
	                &r),
	         0);
	CHECK_EQ(r.count[IOD_CHAOS_APP_STALE], 1);
	CHECK_EQ(r.count[IOD_CHAOS_APP_LOST], 0);
	CHECK_EQ(r.found[0].other, 1); /* the append it missed */
	/* an acknowledged append to a key never read is lost */
	CHECK_EQ(append(KINV(1, 3, "append", "1") KOK(1, 3, "append", "1"), &r), 0);
	CHECK_EQ(r.count[IOD_CHAOS_APP_LOST], 1);
}

static bool parse_err(const char *text, const char *frag)
{
	struct iod_chaos_history h;
	int rc = iod_chaos_history_parse(text, strlen(text), &h, &err);
	if (rc == 0)
		iod_chaos_history_free(&h);
	return rc == -EINVAL && strstr(err.msg, frag) != NULL;
}

TEST(parser_errors)
{
	CHECK_MSG(parse_err(INV(1, "write", "1") "{nope\n", "line 2: not JSON"), "%s", err.msg);
	CHECK_MSG(parse_err("[1]\n", "line 1: an event is a JSON object"), "%s", err.msg);
	CHECK_MSG(parse_err("{\"type\":\"ok\",\"f\":\"read\"}\n", "line 1: \"client\""), "%s",
	          err.msg);
	CHECK_MSG(parse_err("{\"client\":1,\"type\":\"done\",\"f\":\"read\"}\n",
	                    "line 1: unknown \"type\""),
	          "%s", err.msg);
	CHECK_MSG(parse_err(INV(1, "cas", "1"), "line 1: unknown \"f\""), "%s", err.msg);
	CHECK_MSG(parse_err("\n\n" OK(1, "read", "1"), "line 3: client 1 completes an op it never"),
	          "%s", err.msg);
	CHECK_MSG(parse_err(INV(1, "write", "1") INV(1, "write", "2"),
	                    "line 2: client 1 invokes while its op from line 1"),
	          "%s", err.msg);
	CHECK_MSG(parse_err(INV(1, "write", "1") OK(1, "read", "1"),
	                    "line 2: client 1 completes a read but invoked a write at line 1"),
	          "%s", err.msg);
	CHECK_MSG(parse_err(INV(1, "write", "\"x\""), "line 1: \"value\" must be"), "%s", err.msg);
	CHECK_MSG(parse_err(INV(1, "read", "null") OK(1, "read", "[1,\"a\"]"),
	                    "line 2: \"value\" list holds a non-integer"),
	          "%s", err.msg);
	CHECK_MSG(parse_err(INV(1, "add", "[1]"), "line 1: only a read's value may be a list"),
	          "%s", err.msg);
	CHECK_MSG(parse_err(INV(1, "transfer", "[1,2]"), "line 1: a transfer's value is"), "%s",
	          err.msg);
	CHECK_MSG(parse_err(INV(1, "transfer", "3"), "line 1: a transfer's value is"), "%s",
	          err.msg);
	CHECK_MSG(parse_err("{\"client\":1,\"key\":-1,\"type\":\"invoke\",\"f\":\"read\"}\n",
	                    "line 1: \"key\" must be"),
	          "%s", err.msg);
	CHECK_MSG(parse_err("{\"client\":1,\"key\":\"a\",\"type\":\"invoke\",\"f\":\"read\"}\n",
	                    "line 1: \"key\" must be"),
	          "%s", err.msg);
	/* blank lines and CRs are fine; events are counted */
	struct iod_chaos_history h;
	const char *t = "\r\n" INV(1, "write", "1") "  \n" OK(1, "write", "1");
	CHECK_EQ(iod_chaos_history_parse(t, strlen(t), &h, &err), 0);
	CHECK_EQ(h.n, 1);
	CHECK_EQ(h.events, 2);
	CHECK_EQ(h.ops[0].line, 2);
	CHECK_EQ(h.ops[0].cmp, 1);
	iod_chaos_history_free(&h);
}
