/*
 * test_state_vote.c: the pre-vote tie-break (src/state/vote.c): which of
 * two servers whose elections started together leaves the other's pre-vote
 * unanswered, so that they do not split the vote.
 */
#include "harness.h"
#include "state/internal.h"

/* Server 1, a pre-candidate with entries up to 10 of term 3, asked by
 * server 2, also a pre-candidate, with the same log. */
static struct iod_prevote_view tie(void)
{
	return (struct iod_prevote_view){
	    .self_pre_candidate = true,
	    .self_id = 1,
	    .self_last_index = 10,
	    .self_last_term = 3,
	    .pre_vote = true,
	    .from_id = 2,
	    .from_last_index = 10,
	    .from_last_term = 3,
	};
}

TEST(the_lower_id_stays_silent_to_the_higher)
{
	struct iod_prevote_view v = tie();
	CHECK(iod_raft_prevote_yield(&v));  /* 1 stays silent: 2 will grant 1 */
	v.self_id = 3;                      /* now the higher one is asked */
	CHECK(!iod_raft_prevote_yield(&v)); /* 3 answers 2 (raft grants) */
	v.self_id = 2;
	CHECK(!iod_raft_prevote_yield(&v)); /* itself: never */
}

TEST(only_a_pre_candidate_and_only_pre_votes)
{
	struct iod_prevote_view v = tie();
	v.self_pre_candidate = false; /* a follower, a real candidate or a leader */
	CHECK(!iod_raft_prevote_yield(&v));
	v = tie();
	v.pre_vote = false; /* a real vote request is always answered */
	CHECK(!iod_raft_prevote_yield(&v));
	v = tie();
	v.disrupt_leader = true; /* a leadership transfer */
	CHECK(!iod_raft_prevote_yield(&v));
	v = tie();
	v.from_id = 0;
	CHECK(!iod_raft_prevote_yield(&v));
}

TEST(a_candidate_does_not_answer_a_pre_vote_for_its_own_term)
{
	/* server 1 voted for itself in term 4; server 2's pre-vote names 4 */
	struct iod_prevote_view v = tie();
	v.self_pre_candidate = false;
	v.self_candidate = true;
	v.self_term = 4;
	v.from_term = 4;
	CHECK(iod_raft_prevote_yield(&v));
	v.self_id = 3; /* whatever the ids */
	CHECK(iod_raft_prevote_yield(&v));
	v.from_term = 5; /* a later term: answered (raft judges it) */
	CHECK(!iod_raft_prevote_yield(&v));
	v.from_term = 4;
	v.pre_vote = false; /* a real vote request: answered (raft refuses it) */
	CHECK(!iod_raft_prevote_yield(&v));
	v.pre_vote = true;
	v.disrupt_leader = true;
	CHECK(!iod_raft_prevote_yield(&v));
	v.disrupt_leader = false;
	v.self_candidate = false; /* a follower in term 4 answers */
	CHECK(!iod_raft_prevote_yield(&v));
}

TEST(a_refusal_from_the_other_ends_the_silence)
{
	/* the other refused our own pre-vote (it still had a leader then):
	 * we cannot win through it, so it must be able to win through us */
	struct iod_prevote_view v = tie();
	v.refused_self = true;
	CHECK(!iod_raft_prevote_yield(&v));
}

TEST(a_more_up_to_date_requester_is_answered)
{
	/* the other would refuse us on the log check: answer it (raft grants) */
	struct iod_prevote_view v = tie();
	v.from_last_index = 11;
	CHECK(!iod_raft_prevote_yield(&v));
	v = tie();
	v.from_last_term = 4;
	v.from_last_index = 5;
	CHECK(!iod_raft_prevote_yield(&v));
	/* ours is more up to date: it would grant us, so we stay silent */
	v = tie();
	v.self_last_term = 4;
	v.self_last_index = 5;
	CHECK(iod_raft_prevote_yield(&v));
	v = tie();
	v.from_last_index = 9;
	CHECK(iod_raft_prevote_yield(&v));
}

/* Two pre-candidates with the same log, as the receive hook sees them on
 * both sides: exactly one stays silent, so exactly one can win the
 * pre-vote, whatever the ids. */
TEST(exactly_one_of_two_simultaneous_pre_candidates_stays_silent)
{
	for (uint64_t a = 1; a <= 5; a++)
		for (uint64_t b = 1; b <= 5; b++) {
			if (a == b)
				continue;
			struct iod_prevote_view at_a = tie(), at_b = tie();
			at_a.self_id = a, at_a.from_id = b;
			at_b.self_id = b, at_b.from_id = a;
			int silent = iod_raft_prevote_yield(&at_a) + iod_raft_prevote_yield(&at_b);
			CHECK_EQ(silent, 1);
		}
}
