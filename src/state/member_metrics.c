/*
 * member_metrics.c: what a member reports: the status document (GET
 * /v1/status: role, term, members, indexes, the last failover's timeline)
 * and its Prometheus metrics, written through src/obs/prom.c. Reads the
 * member's counters; changes nothing.
 */
#include "member_internal.h"

#include "iod/obs.h"

static const char *state_name(int s)
{
	switch (s) {
	case RAFT_FOLLOWER: return "follower";
	case RAFT_CANDIDATE: return "candidate";
	case RAFT_LEADER: return "leader";
	default: return "unavailable";
	}
}

static const char *role_name(int r)
{
	switch (r) {
	case RAFT_VOTER: return "voter";
	case RAFT_STANDBY: return "standby";
	case RAFT_SPARE: return "spare";
	default: return "?";
	}
}

json_t *iod_raft_member_status(struct iod_raft_member *n)
{
	const char *api = "";
	uint64_t leader = iod_raft_member_leader(n, &api);
	json_t *members = json_array();

	for (unsigned i = 0; i < n->raft.configuration.n; i++) {
		const struct raft_server *sv = &n->raft.configuration.servers[i];
		json_array_append_new(members, json_pack("{s:I, s:s, s:s, s:s}", "id",
		                                         (json_int_t)sv->id, "raft", sv->address,
		                                         "api", iod_member__api(n, sv->id), "role",
		                                         role_name(sv->role)));
	}
	json_t *tl = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "term", (json_int_t)n->tl_term,
	    "last_leader_msg_us", (json_int_t)n->tl_leader_msg_us, "prevote_us",
	    (json_int_t)n->tl_prevote_us, "vote_us", (json_int_t)n->tl_vote_us, "leader_us",
	    (json_int_t)n->tl_leader_us, "ready_us", (json_int_t)n->tl_ready_us, "refresh_us",
	    (json_int_t)n->tl_refresh_us, "first_write_us", (json_int_t)n->tl_first_write_us);
	return json_pack(
	    "{s:o, s:b, s:I, s:s, s:I, s:s, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:b}", "timeline",
	    tl ? tl : json_object(), "leader_ready",
	    raft_state(&n->raft) == RAFT_LEADER && n->ready_term == n->raft.current_term, "id",
	    (json_int_t)n->cfg.id, "state", state_name(raft_state(&n->raft)), "leader",
	    (json_int_t)leader, "leader_api", api, "term", (json_int_t)n->raft.current_term,
	    "members", members, "commit_index", (json_int_t)n->raft.commit_index, "applied_index",
	    (json_int_t)raft_last_applied(&n->raft), "last_index",
	    (json_int_t)raft_last_index(&n->raft), "revision", (json_int_t)iod_state_rev(n->state),
	    "objects", (json_int_t)iod_state_total(n->state), "pre_vote", n->cfg.pre_vote);
}

/* Apply-latency bucket bounds (microseconds; member_propose.c counts). */
const uint64_t iod_member__lat_bounds_us[IOD_MEMBER_LAT_BUCKETS] = {
    250, 500, 1000, 2000, 5000, 10000, 25000, 50000, 100000, 250000, 1000000};

/* One metric: its HELP/TYPE (type NULL: none, another sample of the metric
 * above) and one sample, unless it is a header only (a summary's). */
struct metric {
	const char *name; /* metric (or sample) name */
	const char *type; /* "gauge", "counter", "summary"; NULL: sample only */
	const char *help; /* HELP text */
	char kind;        /* 'u' integer sample, 'f' float sample, 'h' header only */
	uint64_t v_u;     /* 'u': the value */
	double v_f;       /* 'f': the value */
};

#define M_U(nm, ty, h, v)                        \
	{                                        \
		nm, ty, h, 'u', (uint64_t)(v), 0 \
	}
#define M_F(nm, ty, h, v)                      \
	{                                      \
		nm, ty, h, 'f', 0, (double)(v) \
	}
#define M_H(nm, ty, h)               \
	{                            \
		nm, ty, h, 'h', 0, 0 \
	}

static int metrics_write(struct iod_buf *b, const struct metric *m, size_t k)
{
	int rc = 0;
	for (size_t i = 0; i < k && !rc; i++) {
		if (m[i].type && (rc = iod_prom_header(b, m[i].name, m[i].type, m[i].help)))
			break;
		if (m[i].kind == 'f')
			rc = iod_prom_f64(b, m[i].name, NULL, m[i].v_f);
		else if (m[i].kind == 'u')
			rc = iod_prom_u64(b, m[i].name, NULL, m[i].v_u);
	}
	return rc;
}

/* Raft and state gauges and counters, then the apply-latency histogram. */
static void metrics_raft(struct iod_raft_member *n, struct iod_buf *b)
{
	const struct metric m[] = {
	    M_U("iod_raft_term", "gauge", "Current Raft term.", n->raft.current_term),
	    M_U("iod_raft_leader", "gauge", "1 when this server is the leader.",
	        iod_raft_member_is_leader(n)),
	    M_U("iod_raft_commit_index", "gauge", "Raft commit index.", n->raft.commit_index),
	    M_U("iod_raft_applied_index", "gauge", "Last index applied to the state machine.",
	        raft_last_applied(&n->raft)),
	    M_U("iod_raft_proposals_total", "counter", "Commands proposed by this server.",
	        n->proposals),
	    M_U("iod_raft_commits_total", "counter",
	        "Commands this server proposed that committed.", n->commits),
	    M_U("iod_raft_not_leader_total", "counter", "Proposals refused: not the leader.",
	        n->rejected_not_leader),
	    M_U("iod_raft_outcome_unknown_total", "counter",
	        "Proposals raft failed after taking them (answered 504 outcome_unknown).",
	        n->outcome_unknown),
	    M_U("iod_raft_leader_changes_total", "counter", "Leader changes observed.",
	        n->leader_changes),
	    M_U("iod_state_applied_total", "counter", "Commands applied to the state machine.",
	        n->ctx.applied),
	    M_U("iod_state_revision", "gauge", "Cluster state revision.", iod_state_rev(n->state)),
	    M_U("iod_state_objects", "gauge", "Objects in the cluster state.",
	        iod_state_total(n->state)),
	    M_U("iod_state_snapshots_total", "counter", "Snapshots taken.", n->ctx.snapshots),
	};
	double le[IOD_MEMBER_LAT_BUCKETS];

	metrics_write(b, m, sizeof(m) / sizeof(m[0]));
	for (unsigned i = 0; i < IOD_MEMBER_LAT_BUCKETS; i++)
		le[i] = (double)iod_member__lat_bounds_us[i] / 1e6;
	iod_prom_header(b, "iod_raft_apply_latency_seconds", "histogram",
	                "Propose to applied, on the leader.");
	iod_prom_histogram(b, "iod_raft_apply_latency_seconds", NULL, le, n->lat_bucket,
	                   IOD_MEMBER_LAT_BUCKETS, (double)n->lat_sum_us / 1e6);
}

/* Group commit, disk and meta writes, snapshots, loop lag. */
static void metrics_io(struct iod_raft_member *n, struct iod_buf *b)
{
	const struct metric m[] = {
	    M_U("iod_state_preparsed_total", "counter",
	        "Large commands applied from a parse made on the log's worker thread.",
	        n->ctx.pre_hits),
	    M_U("iod_raft_entries_proposed_total", "counter",
	        "Raft entries proposed (group commit).", n->batches),
	    M_U("iod_raft_entry_commands_total", "counter", "Commands carried by those entries.",
	        n->batched_cmds),
	    M_U("iod_raft_disk_appends_total", "counter", "Disk appends completed.",
	        n->append_count),
	    M_H("iod_raft_disk_append_seconds", "summary", "Disk append latency."),
	    M_F("iod_raft_disk_append_seconds_sum", NULL, NULL, (double)n->append_sum_us / 1e6),
	    M_U("iod_raft_disk_append_seconds_count", NULL, NULL, n->append_count),
	    M_F("iod_raft_disk_append_max_seconds", "gauge", "Slowest disk append.",
	        (double)n->append_max_us / 1e6),
	    M_U("iod_raft_disk_appends_slow_total", "counter", "Disk appends over 10 ms.",
	        n->append_slow),
	    M_U("iod_raft_meta_writes_total", "counter",
	        "Term/vote writes (synchronous, on the loop).", n->meta_writes),
	    M_F("iod_raft_meta_write_max_seconds", "gauge", "Slowest term/vote write.",
	        (double)n->meta_max_us / 1e6),
	    M_U("iod_raft_votes_unstuck_total", "counter",
	        "Vote requests let past a leader silent for an election timeout.",
	        n->votes_unstuck),
	    M_U("iod_raft_prevotes_yielded_total", "counter",
	        "Pre-vote requests of a simultaneous candidate left unanswered (the tie-break).",
	        n->prevotes_yielded),
	    M_F("iod_state_snapshot_max_seconds", "gauge",
	        "Slowest snapshot serialisation (on the loop).", (double)n->snap_max_us / 1e6),
	    M_H("iod_state_snapshot_seconds", "summary",
	        "Snapshot serialisation time (on the loop)."),
	    M_F("iod_state_snapshot_seconds_sum", NULL, NULL, (double)n->snap_sum_us / 1e6),
	    M_U("iod_state_snapshot_seconds_count", NULL, NULL, n->snap_count),
	    M_F("iod_loop_lag_max_seconds", "gauge", "Worst lateness of the heartbeat timer.",
	        (double)n->lag_max_us / 1e6),
	    M_U("iod_loop_lag_slow_total", "counter", "Heartbeat timer fired over 10 ms late.",
	        n->lag_slow),
	    M_U("iod_raft_spares_promoted_total", "counter",
	        "Spares this leader promoted to voter (a promotion a leader change interrupted).",
	        n->spares_promoted),
	};
	metrics_write(b, m, sizeof(m) / sizeof(m[0]));
}

void iod_raft_member_metrics(struct iod_raft_member *n, struct iod_buf *b)
{
	metrics_raft(n, b);
	metrics_io(n, b);
}
