/*
 * vote.c: the pre-vote tie-break (which of two survivors that start an
 * election at the same moment steps aside).
 *
 * Why: after a leader of three dies, the two survivors' election timers
 * (random in [T, 2T]) sometimes fire within a message's latency of each
 * other. Each is then a pre-candidate, and raft 0.15 grants a pre-vote to
 * anyone with an up-to-date log while it has no leader, so both win the
 * pre-vote, both become candidates in the same term, each votes for
 * itself and refuses the other: a split vote, and the next election waits
 * for another randomised timer (30-60 ms with T = 30 ms). Measured: 8 of
 * 30 failovers at load 14 elected more than once (up to 4 extra terms,
 * 65-212 ms each); they were the slow rounds (docs/control-plane.md).
 *
 * The rule: a pre-candidate does not answer the pre-vote request of a
 * pre-candidate with a higher id whose log is no more up to date than its
 * own, unless that server already refused this server's own pre-vote
 * request (it then cannot win through it). The higher one's pre-vote then
 * fails for want of an answer, the lower one's succeeds (the higher one
 * grants it: a pre-candidate has no leader and the log check passes), and
 * its vote request finds the other still without a vote in the new term.
 * And a candidate (past its pre-vote, voted for itself in term T) does not
 * answer a pre-vote for T: raft grants it, the requester then votes for
 * itself in T too and both lose T (measured: the one split left in 50
 * rounds after the first rule). The requester's next pre-vote names T+1,
 * or it has by then heard the candidate's vote request and voted.
 * Leaving a message unanswered is something a network does anyway, so
 * safety is raft's; liveness holds because the lower one only stays silent
 * while it can itself win with the other's answer, and a refusal from the
 * other ends that. Requests allowed to disrupt a leader (a leadership
 * transfer) are always answered.
 *
 * Pure: no clock, no I/O (scripts/pure.txt). member_io.c calls it from
 * raft's receive hook and keeps which peers refused this server.
 */
#include "internal.h"

bool iod_raft_prevote_yield(const struct iod_prevote_view *v)
{
	if (!v->pre_vote || v->disrupt_leader || !v->from_id)
		return false;
	/* a candidate that voted for itself in term T: a pre-vote for T could
	 * only start a second election in T, which splits it */
	if (v->self_candidate && v->from_term == v->self_term)
		return true;
	if (!v->self_pre_candidate || v->refused_self)
		return false;
	if (v->self_id >= v->from_id)
		return false;
	/* would the other grant ours? (raft's up-to-date check, Figure 3.1) */
	if (v->self_last_term != v->from_last_term)
		return v->self_last_term > v->from_last_term;
	return v->self_last_index >= v->from_last_index;
}
