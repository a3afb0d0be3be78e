/*
 * member_leader.c: what the leader does on its heartbeat timer: commit a
 * barrier of its own term (Raft 5.4.2), refresh every lease once per term
 * before expiring any, expire leases past their deadline (the decision is
 * iod_state's; this file only reads the clock and proposes), and record its
 * own API address so followers can point clients at it. Also measures the
 * loop's lag, as seen by this timer.
 */
#include "member_internal.h"

#include <stdlib.h>
#include <string.h>

static void expire_cb(void *data, int status, const struct iod_state_result *res)
{
	struct iod_raft_member *n = data;
	(void)status;
	(void)res;
	n->expire_in_flight = false;
}

static void refresh_cb(void *data, int status, const struct iod_state_result *res)
{
	struct iod_raft_member *n = data;
	(void)res;
	n->refresh_in_flight = false;
	if (status == 0) {
		n->refresh_term = n->refresh_propose_term;
		if (n->tl_term == n->refresh_term && !n->tl_refresh_us)
			n->tl_refresh_us = iod_member__unix_us();
	}
}

static void member_cb(void *data, int status, const struct iod_state_result *res)
{
	struct iod_raft_member *n = data;
	(void)status;
	(void)res;
	n->member_in_flight = false;
}

/* The leader records its own API address so followers can point clients at it. */
static void record_member(struct iod_raft_member *n)
{
	char key[IOD_NAME_MAX];
	const char *api = NULL, *raft_addr = NULL;

	snprintf(key, sizeof(key), "member.%llu", (unsigned long long)n->cfg.id);
	const json_t *v = iod_state_value(n->state, IOD_STATE_CONFIG, key);
	if (v && !iod_json_get_str(v, "api", &api) && !strcmp(api, n->cfg.api_addr) &&
	    !iod_json_get_str(v, "raft", &raft_addr) && !strcmp(raft_addr, n->cfg.raft_addr))
		return;
	json_t *val = json_pack("{s:I, s:s, s:s}", "id", (json_int_t)n->cfg.id, "raft",
	                        n->cfg.raft_addr, "api", n->cfg.api_addr);
	char *cmd = iod_state_cmd_put(IOD_STATE_CONFIG, key, val, 0, -1);
	json_decref(val);
	if (cmd && !iod_raft_member_propose(n, cmd, strlen(cmd), member_cb, n))
		n->member_in_flight = true;
	free(cmd);
}

static void barrier_cb(struct raft_barrier *req, int status)
{
	struct iod_raft_member *n = req->data;
	n->barrier_in_flight = false;
	if (status == 0) {
		n->ready_term = n->barrier_term;
		if (n->tl_term == n->barrier_term && !n->tl_ready_us)
			n->tl_ready_us = iod_member__unix_us();
	}
}

/*
 * A new leader commits nothing from earlier terms until it commits an entry
 * of its own term (Raft section 5.4.2), so an idle cluster would leave a
 * restarted leader's state machine behind. Propose a barrier at once.
 */
void iod_member__leader_barrier(struct iod_raft_member *n)
{
	if (n->barrier_in_flight || n->barrier_term == n->raft.current_term)
		return;
	n->barrier.data = n;
	if (raft_barrier(&n->raft, &n->barrier, barrier_cb) == 0) {
		n->barrier_in_flight = true;
		n->barrier_term = n->raft.current_term;
	}
}

static void promote_cb(struct raft_change *req, int status)
{
	struct iod_raft_member *n = req->data;
	n->promote_in_flight = false;
	if (status == 0)
		n->spares_promoted++;
	else if (status != RAFT_LEADERSHIPLOST && status != RAFT_CANCELED)
		IOD_WARN("raft", "resuming a spare's promotion failed: %s (retried)",
		         raft_strerror(status));
}

/*
 * iod adds a member as a spare only on its way to voter (raft_add, then
 * raft_assign in change_cb). A leader change between the two left a spare
 * for good: the new leader never heard of the promotion, and a second POST
 * got 409, which the joiner takes as "joined". So the leader finishes any
 * promotion it finds undone, one at a time, when no other change is in
 * flight (raft refuses one while another is uncommitted or promoting:
 * RAFT_CANTCHANGE, tried again at the next lease check).
 */
static void promote_spares(struct iod_raft_member *n)
{
	if (n->promote_in_flight || n->change_wait || n->stopping)
		return;
	for (unsigned i = 0; i < n->raft.configuration.n; i++) {
		const struct raft_server *sv = &n->raft.configuration.servers[i];
		if (sv->role != RAFT_SPARE)
			continue;
		n->promote_req.data = n;
		if (raft_assign(&n->raft, &n->promote_req, sv->id, RAFT_VOTER, promote_cb) == 0) {
			n->promote_in_flight = true;
			IOD_INFO("raft",
			         "server %llu is a spare: promoting it to voter (its "
			         "addition's promotion was interrupted by a leader change)",
			         (unsigned long long)sv->id);
		}
		return;
	}
}

void iod_member__tick_cb(uv_timer_t *t)
{
	struct iod_raft_member *n = t->data;
	uint64_t t_ns = iod_clock_now_ns(),
	         period_ns = (uint64_t)n->cfg.heartbeat_timeout_ms * IOD_NS_PER_MS;

	/* loop lag: how late this timer fired (a stalled loop delays raft too) */
	if (n->last_tick_ns && t_ns - n->last_tick_ns > period_ns) {
		uint64_t lag_us = (t_ns - n->last_tick_ns - period_ns) / 1000;
		if (lag_us > n->lag_max_us)
			n->lag_max_us = lag_us;
		n->lag_slow += lag_us > 10000;
	}
	n->last_tick_ns = t_ns;
	iod_member__after_raft(n);
	iod_member__change_retry(n);
	if (n->stopping || raft_state(&n->raft) != RAFT_LEADER)
		return;
	iod_member__leader_barrier(n);
	/* the rest runs every lease_check_ms */
	promote_spares(n);
	n->ticks++;
	if (n->ticks % IOD_MAX(n->cfg.lease_check_ms / n->cfg.heartbeat_timeout_ms, 1u))
		return;
	if (!n->member_in_flight)
		record_member(n);
	uint64_t due = iod_state_lease_next_deadline_ms(n->state);
	uint64_t now_ms = iod_time_unix_ns() / IOD_NS_PER_MS;
	if (n->refresh_term != n->raft.current_term) {
		/* New in this term: refresh every lease before expiring any. */
		if (!n->refresh_in_flight && n->ready_term == n->raft.current_term) {
			char *cmd = iod_state_cmd_lease_refresh(now_ms);
			n->refresh_propose_term = n->raft.current_term;
			if (cmd && !iod_raft_member_propose(n, cmd, strlen(cmd), refresh_cb, n))
				n->refresh_in_flight = true;
			free(cmd);
		}
		return;
	}
	if (due && now_ms >= due && !n->expire_in_flight) {
		char *cmd = iod_state_cmd_lease_expire(now_ms);
		if (cmd && !iod_raft_member_propose(n, cmd, strlen(cmd), expire_cb, n))
			n->expire_in_flight = true;
		free(cmd);
	}
}
