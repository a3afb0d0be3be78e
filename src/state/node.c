/*
 * node.c: one control-plane member: canonical raft over its libuv backend,
 * with the state machine as its FSM.
 *
 * This is the shell around the pure state machine: it creates the data
 * directory, starts raft's disk and TCP I/O, bootstraps the initial
 * configuration, proposes commands and hands their results back, runs the
 * leader's lease clock, changes membership and stops gracefully (leadership
 * transfer first, so a planned restart costs one round trip instead of an
 * election timeout). It never decides what a command does: iod_state does.
 */
#include "internal.h"

#include <raft.h>
#include <raft/uv.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

/* Apply-latency histogram bucket bounds, microseconds. */
static const uint64_t lat_bounds_us[] = {250, 500, 1000, 2000, 5000, 10000, 25000, 50000, 100000,
                                         250000, 1000000};
#define LAT_BUCKETS (sizeof(lat_bounds_us) / sizeof(lat_bounds_us[0]))

struct proposal {
	struct raft_apply req;  /* raft's request (req.data = this) */
	struct iod_node *node;  /* owner */
	iod_node_apply_cb cb;   /* caller's completion */
	void *data;             /* caller's argument */
	uint64_t t0_ns;         /* when proposed, for the latency histogram */
};

struct change {
	struct raft_change req;  /* raft's request */
	struct iod_node *node;   /* owner */
	uint64_t id;             /* server being added/removed */
	bool assign_next;        /* add done: now assign voter */
	iod_node_done_cb cb;     /* caller's completion */
	void *data;              /* caller's argument */
};

struct iod_node {
	struct iod_server_config cfg;       /* as started */
	uv_loop_t *loop;                    /* not owned */
	struct raft_uv_transport transport; /* raft TCP transport */
	struct raft_io io;                  /* raft libuv disk + network I/O */
	struct raft_fsm fsm;                /* our FSM vtable */
	struct raft raft;                   /* the raft instance */
	struct iod_state *state;            /* the replicated state */
	struct iod_state_fsm_ctx ctx;       /* FSM context */
	uv_timer_t tick;                    /* leader duties: leases, member record */
	uv_idle_t wake;                     /* deferred on_apply notification */
	bool wake_pending;                  /* wake is armed */
	void (*on_apply)(void *);           /* watch wake-up */
	void *on_apply_data;                /* its argument */
	uint32_t pending;                   /* proposals in flight */
	bool expire_in_flight;              /* one lease_expire at a time */
	bool member_in_flight;              /* one member record at a time */
	bool stopping;                      /* stop requested */
	struct raft_transfer transfer;      /* graceful leadership transfer */
	uint64_t transfer_t0_ns;            /* when the transfer began */
	void (*stop_done)(void *);          /* stop's completion */
	void *stop_data;                    /* its argument */
	int closing_handles;                /* uv handles still closing */
	/* metrics */
	uint64_t proposals;                 /* commands proposed */
	uint64_t commits;                   /* commands committed+applied here as leader */
	uint64_t rejected_not_leader;       /* proposals refused: not leader */
	uint64_t lat_bucket[LAT_BUCKETS + 1]; /* apply latency histogram (+Inf last) */
	uint64_t lat_sum_us;                /* sum of latencies */
	uint64_t leader_changes;            /* observed leader id changes */
	uint64_t last_leader;               /* for leader_changes */
};

static uint64_t now_ns(void)
{
	return iod_clock_now(iod_clock_monotonic());
}

static void wake_cb(uv_idle_t *h)
{
	struct iod_node *n = h->data;
	uv_idle_stop(h);
	n->wake_pending = false;
	if (n->on_apply)
		n->on_apply(n->on_apply_data);
}

static void fsm_applied(void *data)
{
	struct iod_node *n = data;
	if (!n->wake_pending && !n->stopping) {
		n->wake_pending = true;
		uv_idle_start(&n->wake, wake_cb);
	}
}

void iod_node_set_on_apply(struct iod_node *n, void (*fn)(void *), void *data)
{
	n->on_apply = fn;
	n->on_apply_data = data;
}

static int map_raft_status(int status)
{
	switch (status) {
	case 0: return 0;
	case RAFT_NOTLEADER:
	case RAFT_LEADERSHIPLOST: return -ENOTCONN;
	case RAFT_NOMEM: return -ENOMEM;
	case RAFT_SHUTDOWN: return -ESHUTDOWN;
	case RAFT_TOOBIG: return -E2BIG;
	default: return -EIO;
	}
}

static void apply_cb(struct raft_apply *req, int status, void *result)
{
	struct proposal *p = req->data;
	struct iod_node *n = p->node;
	struct iod_state_result res;
	uint64_t us = (now_ns() - p->t0_ns) / 1000;

	n->pending--;
	if (status == 0 && result) {
		res = *(const struct iod_state_result *)result;
		n->commits++;
		unsigned b = 0;
		while (b < LAT_BUCKETS && us > lat_bounds_us[b])
			b++;
		n->lat_bucket[b]++;
		n->lat_sum_us += us;
	} else {
		memset(&res, 0, sizeof(res));
		res.code = map_raft_status(status ? status : RAFT_SHUTDOWN);
		snprintf(res.msg, sizeof(res.msg), "not committed: %s",
		         raft_strerror(status ? status : RAFT_SHUTDOWN));
	}
	if (p->cb)
		p->cb(p->data, status == 0 ? 0 : res.code, &res);
	free(p);
}

int iod_node_propose(struct iod_node *n, const char *cmd, size_t len, iod_node_apply_cb cb,
                     void *data)
{
	struct raft_buffer buf;
	struct proposal *p;
	int rv;

	if (n->stopping)
		return -ESHUTDOWN;
	if (raft_state(&n->raft) != RAFT_LEADER) {
		n->rejected_not_leader++;
		return -ENOTCONN;
	}
	if (n->pending >= IOD_API_PENDING_MAX)
		return -EBUSY;
	if (len > IOD_STATE_CMD_MAX)
		return -E2BIG;
	p = calloc(1, sizeof(*p));
	buf.base = raft_malloc(len ? len : 1);
	if (!p || !buf.base) {
		free(p);
		raft_free(buf.base);
		return -ENOMEM;
	}
	memcpy(buf.base, cmd, len);
	buf.len = len;
	p->req.data = p;
	p->node = n;
	p->cb = cb;
	p->data = data;
	p->t0_ns = now_ns();
	rv = raft_apply(&n->raft, &p->req, &buf, 1, apply_cb);
	if (rv) {
		raft_free(buf.base);
		free(p);
		if (rv == RAFT_NOTLEADER || rv == RAFT_LEADERSHIPLOST)
			n->rejected_not_leader++;
		return map_raft_status(rv);
	}
	n->pending++;
	n->proposals++;
	return 0;
}

bool iod_node_is_leader(struct iod_node *n)
{
	return raft_state(&n->raft) == RAFT_LEADER;
}

/* API address of member id: the replicated member record, else --peers. */
static const char *member_api(struct iod_node *n, uint64_t id)
{
	char key[IOD_NAME_MAX];
	const char *api = NULL;

	snprintf(key, sizeof(key), "member.%llu", (unsigned long long)id);
	const json_t *v = iod_state_value(n->state, IOD_STATE_CONFIG, key);
	if (v && !iod_json_get_str(v, "api", &api) && api[0])
		return api;
	for (uint32_t i = 0; i < n->cfg.peers_n; i++)
		if (n->cfg.peers[i].id == id)
			return n->cfg.peers[i].api_addr;
	if (id == n->cfg.id)
		return n->cfg.api_addr;
	return "";
}

uint64_t iod_node_leader(struct iod_node *n, const char **api_addr)
{
	raft_id id = 0;
	const char *addr = NULL;

	raft_leader(&n->raft, &id, &addr);
	if (api_addr)
		*api_addr = id ? member_api(n, id) : "";
	return id;
}

const struct iod_state *iod_node_state(struct iod_node *n)
{
	return n->state;
}

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

json_t *iod_node_status(struct iod_node *n)
{
	const char *api = "";
	uint64_t leader = iod_node_leader(n, &api);
	json_t *members = json_array();

	for (unsigned i = 0; i < n->raft.configuration.n; i++) {
		const struct raft_server *sv = &n->raft.configuration.servers[i];
		json_array_append_new(members,
		                      json_pack("{s:I, s:s, s:s, s:s}", "id", (json_int_t)sv->id,
		                                "raft", sv->address, "api", member_api(n, sv->id),
		                                "role", role_name(sv->role)));
	}
	return json_pack("{s:I, s:s, s:I, s:s, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:b}", "id",
	                 (json_int_t)n->cfg.id, "state", state_name(raft_state(&n->raft)), "leader",
	                 (json_int_t)leader, "leader_api", api, "term",
	                 (json_int_t)n->raft.current_term, "members", members, "commit_index",
	                 (json_int_t)n->raft.commit_index, "applied_index",
	                 (json_int_t)raft_last_applied(&n->raft), "last_index",
	                 (json_int_t)raft_last_index(&n->raft), "revision",
	                 (json_int_t)iod_state_rev(n->state), "objects",
	                 (json_int_t)iod_state_total(n->state), "pre_vote", n->cfg.pre_vote);
}

void iod_node_metrics(struct iod_node *n, struct iod_buf *b)
{
	uint64_t cum = 0;

	iod_buf_printf(b,
	               "# HELP iod_raft_term Current Raft term.\n# TYPE iod_raft_term gauge\n"
	               "iod_raft_term %llu\n"
	               "# HELP iod_raft_leader 1 when this server is the leader.\n"
	               "# TYPE iod_raft_leader gauge\niod_raft_leader %d\n"
	               "# HELP iod_raft_commit_index Raft commit index.\n"
	               "# TYPE iod_raft_commit_index gauge\niod_raft_commit_index %llu\n"
	               "# HELP iod_raft_applied_index Last index applied to the state machine.\n"
	               "# TYPE iod_raft_applied_index gauge\niod_raft_applied_index %llu\n"
	               "# HELP iod_raft_proposals_total Commands proposed by this server.\n"
	               "# TYPE iod_raft_proposals_total counter\niod_raft_proposals_total %llu\n"
	               "# HELP iod_raft_commits_total Commands this server proposed that committed.\n"
	               "# TYPE iod_raft_commits_total counter\niod_raft_commits_total %llu\n"
	               "# HELP iod_raft_not_leader_total Proposals refused: not the leader.\n"
	               "# TYPE iod_raft_not_leader_total counter\niod_raft_not_leader_total %llu\n"
	               "# HELP iod_raft_leader_changes_total Leader changes observed.\n"
	               "# TYPE iod_raft_leader_changes_total counter\n"
	               "iod_raft_leader_changes_total %llu\n"
	               "# HELP iod_state_applied_total Commands applied to the state machine.\n"
	               "# TYPE iod_state_applied_total counter\niod_state_applied_total %llu\n"
	               "# HELP iod_state_revision Cluster state revision.\n"
	               "# TYPE iod_state_revision gauge\niod_state_revision %llu\n"
	               "# HELP iod_state_objects Objects in the cluster state.\n"
	               "# TYPE iod_state_objects gauge\niod_state_objects %u\n"
	               "# HELP iod_state_snapshots_total Snapshots taken.\n"
	               "# TYPE iod_state_snapshots_total counter\niod_state_snapshots_total %llu\n"
	               "# HELP iod_raft_apply_latency_seconds Propose to applied, on the leader.\n"
	               "# TYPE iod_raft_apply_latency_seconds histogram\n",
	               (unsigned long long)n->raft.current_term, iod_node_is_leader(n),
	               (unsigned long long)n->raft.commit_index,
	               (unsigned long long)raft_last_applied(&n->raft),
	               (unsigned long long)n->proposals, (unsigned long long)n->commits,
	               (unsigned long long)n->rejected_not_leader,
	               (unsigned long long)n->leader_changes, (unsigned long long)n->ctx.applied,
	               (unsigned long long)iod_state_rev(n->state), iod_state_total(n->state),
	               (unsigned long long)n->ctx.snapshots);
	for (unsigned i = 0; i < LAT_BUCKETS; i++) {
		cum += n->lat_bucket[i];
		iod_buf_printf(b, "iod_raft_apply_latency_seconds_bucket{le=\"%g\"} %llu\n",
		               (double)lat_bounds_us[i] / 1e6, (unsigned long long)cum);
	}
	cum += n->lat_bucket[LAT_BUCKETS];
	iod_buf_printf(b,
	               "iod_raft_apply_latency_seconds_bucket{le=\"+Inf\"} %llu\n"
	               "iod_raft_apply_latency_seconds_sum %.6f\n"
	               "iod_raft_apply_latency_seconds_count %llu\n",
	               (unsigned long long)cum, (double)n->lat_sum_us / 1e6,
	               (unsigned long long)cum);
}

/* ---- leader duties ------------------------------------------------------ */

static void expire_cb(void *data, int status, const struct iod_state_result *res)
{
	struct iod_node *n = data;
	(void)status;
	(void)res;
	n->expire_in_flight = false;
}

static void member_cb(void *data, int status, const struct iod_state_result *res)
{
	struct iod_node *n = data;
	(void)status;
	(void)res;
	n->member_in_flight = false;
}

/* The leader records its own API address so followers can point clients at it. */
static void record_member(struct iod_node *n)
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
	if (cmd && !iod_node_propose(n, cmd, strlen(cmd), member_cb, n))
		n->member_in_flight = true;
	free(cmd);
}

static void tick_cb(uv_timer_t *t)
{
	struct iod_node *n = t->data;
	raft_id leader = 0;
	const char *addr = NULL;

	raft_leader(&n->raft, &leader, &addr);
	if (leader != n->last_leader) {
		if (leader)
			IOD_INFO("raft", "leader is now %llu (%s), term %llu",
			         (unsigned long long)leader, addr ? addr : "?",
			         (unsigned long long)n->raft.current_term);
		n->leader_changes += leader != 0;
		n->last_leader = leader;
	}
	if (n->stopping || raft_state(&n->raft) != RAFT_LEADER)
		return;
	if (!n->member_in_flight)
		record_member(n);
	uint64_t due = iod_state_lease_next_deadline_ms(n->state);
	uint64_t now_ms = iod_time_unix_ns() / IOD_NS_PER_MS;
	if (due && now_ms >= due && !n->expire_in_flight) {
		char *cmd = iod_state_cmd_lease_expire(now_ms);
		if (cmd && !iod_node_propose(n, cmd, strlen(cmd), expire_cb, n))
			n->expire_in_flight = true;
		free(cmd);
	}
}

/* ---- membership --------------------------------------------------------- */

static void change_cb(struct raft_change *req, int status)
{
	struct change *c = req->data;
	struct iod_node *n = c->node;

	if (status == 0 && c->assign_next) {
		c->assign_next = false;
		int rv = raft_assign(&n->raft, &c->req, c->id, RAFT_VOTER, change_cb);
		if (rv == 0)
			return;
		status = rv;
	}
	if (c->cb)
		c->cb(c->data, status ? map_raft_status(status) : 0);
	free(c);
}

int iod_node_member_add(struct iod_node *n, uint64_t id, const char *raft_addr,
                        const char *api_addr, iod_node_done_cb cb, void *data)
{
	struct change *c;
	int rv;

	if (!iod_node_is_leader(n))
		return -ENOTCONN;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req.data = c;
	c->node = n;
	c->id = id;
	c->assign_next = true;
	c->cb = cb;
	c->data = data;
	rv = raft_add(&n->raft, &c->req, id, raft_addr, change_cb);
	if (rv) {
		free(c);
		return rv == RAFT_DUPLICATEID || rv == RAFT_DUPLICATEADDRESS ? -EEXIST
		                                                           : map_raft_status(rv);
	}
	/* record its API address too, so clients can be pointed at it */
	if (api_addr && api_addr[0]) {
		char key[IOD_NAME_MAX];
		snprintf(key, sizeof(key), "member.%llu", (unsigned long long)id);
		json_t *val = json_pack("{s:I, s:s, s:s}", "id", (json_int_t)id, "raft", raft_addr,
		                        "api", api_addr);
		char *cmd = iod_state_cmd_put(IOD_STATE_CONFIG, key, val, 0, -1);
		json_decref(val);
		if (cmd)
			iod_node_propose(n, cmd, strlen(cmd), NULL, NULL);
		free(cmd);
	}
	return 0;
}

int iod_node_member_remove(struct iod_node *n, uint64_t id, iod_node_done_cb cb, void *data)
{
	struct change *c;
	int rv;

	if (!iod_node_is_leader(n))
		return -ENOTCONN;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req.data = c;
	c->node = n;
	c->id = id;
	c->cb = cb;
	c->data = data;
	rv = raft_remove(&n->raft, &c->req, id, change_cb);
	if (rv) {
		free(c);
		return rv == RAFT_BADID ? -ENOENT : map_raft_status(rv);
	}
	return 0;
}

/* ---- start / stop ------------------------------------------------------- */

static int mkdirs(const char *path, struct iod_err *e)
{
	char tmp[IOD_PATH_MAX];
	if (iod_strlcpy(tmp, path, sizeof(tmp)))
		return iod_err_set(e, -ENAMETOOLONG, "data dir path too long");
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return iod_err_set(e, -errno, "creating %s: %s", tmp, strerror(errno));
		*p = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return iod_err_set(e, -errno, "creating data dir %s: %s", tmp, strerror(errno));
	return 0;
}

int iod_node_start(struct iod_node **out, uv_loop_t *loop, const struct iod_server_config *c,
                   struct iod_err *e)
{
	struct iod_node *n;
	int rv;

	if (c->id == 0)
		return iod_err_set(e, -EINVAL, "--id must be a positive integer");
	if ((rv = mkdirs(c->data_dir, e)))
		return rv;
	n = calloc(1, sizeof(*n));
	if (!n)
		return iod_err_set(e, -ENOMEM, "out of memory");
	n->cfg = *c;
	n->loop = loop;
	if ((rv = iod_state_new(&n->state))) {
		free(n);
		return iod_err_set(e, rv, "out of memory");
	}
	n->ctx.state = n->state;
	n->ctx.on_apply = fsm_applied;
	n->ctx.on_apply_data = n;
	iod_state_fsm_init(&n->fsm, &n->ctx);

	rv = raft_uv_tcp_init(&n->transport, loop);
	if (rv) {
		iod_state_free(n->state);
		free(n);
		return iod_err_set(e, -EIO, "raft TCP transport: %s", raft_strerror(rv));
	}
	rv = raft_uv_init(&n->io, loop, c->data_dir, &n->transport);
	if (rv) {
		iod_err_set(e, -EIO, "raft I/O in %s: %s (%s)", c->data_dir, n->io.errmsg,
		            raft_strerror(rv));
		raft_uv_tcp_close(&n->transport);
		iod_state_free(n->state);
		free(n);
		return -EIO;
	}
	/* raft_uv retries a lost peer connection after 1 s by default: far longer
	 * than our election timeout, so a restarted peer would sit outside the
	 * cluster for a second. Retry at about an election timeout instead. */
	raft_uv_set_connect_retry_delay(&n->io, IOD_MAX(c->election_timeout_ms / 2, 10u));
	rv = raft_init(&n->raft, &n->io, &n->fsm, c->id, c->raft_addr);
	if (rv) {
		iod_err_set(e, -EIO, "raft init: %s", raft_errmsg(&n->raft));
		raft_uv_close(&n->io);
		raft_uv_tcp_close(&n->transport);
		iod_state_free(n->state);
		free(n);
		return -EIO;
	}
	n->raft.data = n;
	raft_set_election_timeout(&n->raft, c->election_timeout_ms);
	raft_set_heartbeat_timeout(&n->raft, c->heartbeat_timeout_ms);
	raft_set_snapshot_threshold(&n->raft, c->snapshot_threshold);
	raft_set_snapshot_trailing(&n->raft, c->snapshot_trailing);
	raft_set_pre_vote(&n->raft, c->pre_vote);
	/* A lagging follower is sent a snapshot after this long without reply. */
	raft_set_install_snapshot_timeout(&n->raft, 10 * c->election_timeout_ms);

	if (!c->join_addr[0]) {
		struct raft_configuration conf;
		raft_configuration_init(&conf);
		if (c->peers_n == 0) {
			rv = raft_configuration_add(&conf, c->id, c->raft_addr, RAFT_VOTER);
		} else {
			for (uint32_t i = 0; i < c->peers_n && !rv; i++)
				rv = raft_configuration_add(&conf, c->peers[i].id,
				                            c->peers[i].raft_addr, RAFT_VOTER);
		}
		if (!rv)
			rv = raft_bootstrap(&n->raft, &conf);
		raft_configuration_close(&conf);
		if (rv && rv != RAFT_CANTBOOTSTRAP) {
			iod_err_set(e, -EIO, "raft bootstrap: %s", raft_errmsg(&n->raft));
			goto fail_started;
		}
		if (rv == RAFT_CANTBOOTSTRAP)
			IOD_INFO("raft", "existing state in %s: resuming", c->data_dir);
	}
	rv = raft_start(&n->raft);
	if (rv) {
		iod_err_set(e, -EIO, "raft start: %s", raft_errmsg(&n->raft));
		goto fail_started;
	}
	uv_timer_init(loop, &n->tick);
	n->tick.data = n;
	uv_timer_start(&n->tick, tick_cb, c->lease_check_ms, c->lease_check_ms);
	uv_idle_init(loop, &n->wake);
	n->wake.data = n;
	*out = n;
	return 0;

fail_started:
	/* raft_close would need the loop to run; a failed start leaves the
	 * process, so only the cheap parts are released here. */
	return -EIO;
}

static void handle_closed(uv_handle_t *h)
{
	struct iod_node *n = h->data;
	if (--n->closing_handles == 0 && n->stop_done)
		n->stop_done(n->stop_data);
}

static void raft_closed(struct raft *r)
{
	struct iod_node *n = r->data;
	raft_uv_close(&n->io);
	raft_uv_tcp_close(&n->transport);
	n->closing_handles = 2;
	uv_close((uv_handle_t *)&n->tick, handle_closed);
	uv_close((uv_handle_t *)&n->wake, handle_closed);
}

static void transfer_done(struct raft_transfer *req)
{
	struct iod_node *n = req->data;
	raft_id leader = 0;
	const char *addr = NULL;
	raft_leader(&n->raft, &leader, &addr);
	IOD_INFO("raft", "leadership transfer %s in %.1f ms (leader now %llu)",
	         leader && leader != n->cfg.id ? "done" : "did not complete",
	         (double)(now_ns() - n->transfer_t0_ns) / 1e6, (unsigned long long)leader);
	raft_close(&n->raft, raft_closed);
}

void iod_node_stop(struct iod_node *n, void (*done)(void *), void *data)
{
	if (n->stopping)
		return;
	n->stopping = true;
	n->stop_done = done;
	n->stop_data = data;
	uv_timer_stop(&n->tick);
	if (raft_state(&n->raft) == RAFT_LEADER && n->raft.configuration.n > 1) {
		n->transfer.data = n;
		n->transfer_t0_ns = now_ns();
		if (raft_transfer(&n->raft, &n->transfer, 0, transfer_done) == 0)
			return;
	}
	raft_close(&n->raft, raft_closed);
}

void iod_node_free(struct iod_node *n)
{
	if (!n)
		return;
	iod_state_free(n->state);
	free(n);
}

/* ---- configuration ------------------------------------------------------ */

void iod_server_config_default(struct iod_server_config *c)
{
	memset(c, 0, sizeof(*c));
	c->id = 1;
	snprintf(c->raft_addr, sizeof(c->raft_addr), "127.0.0.1:7300");
	snprintf(c->api_addr, sizeof(c->api_addr), "127.0.0.1:7400");
	/* Loopback/LAN defaults measured in docs/control-plane.md: the failover
	 * target (p99 < 100 ms) needs election T ~ 30-40 ms; heartbeats at
	 * T/10 keep followers from timing out under load. */
	c->election_timeout_ms = 40;
	c->heartbeat_timeout_ms = 4;
	c->snapshot_threshold = 1024;
	c->snapshot_trailing = 2048;
	c->pre_vote = true;
	c->lease_check_ms = 50;
}

/* "ID=RAFT_ADDR[@API_ADDR]" entries, comma-separated. */
int iod_server_peers_parse(struct iod_server_config *c, const char *s, struct iod_err *e)
{
	char buf[IOD_STATE_PEERS_MAX * (2 * IOD_ADDR_MAX + 24)];
	char *save = NULL, *tok;

	if (iod_strlcpy(buf, s, sizeof(buf)))
		return iod_err_set(e, -EINVAL, "--peers is too long");
	c->peers_n = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct iod_server_peer *p;
		char *eq = strchr(tok, '='), *at, *end = NULL;
		if (c->peers_n >= IOD_STATE_PEERS_MAX)
			return iod_err_set(e, -E2BIG, "--peers names more than %d members",
			                   IOD_STATE_PEERS_MAX);
		p = &c->peers[c->peers_n];
		memset(p, 0, sizeof(*p));
		if (!eq)
			return iod_err_set(e, -EINVAL,
			                   "--peers entry \"%s\": expected ID=HOST:PORT[@API_HOST:PORT]",
			                   tok);
		*eq = 0;
		unsigned long long id = strtoull(tok, &end, 10);
		if (!id || *end)
			return iod_err_set(e, -EINVAL, "--peers entry id \"%s\" is not a positive integer",
			                   tok);
		p->id = id;
		at = strchr(eq + 1, '@');
		if (at)
			*at = 0;
		if (!strchr(eq + 1, ':') || iod_strlcpy(p->raft_addr, eq + 1, sizeof(p->raft_addr)) ||
		    (at && (!strchr(at + 1, ':') ||
		            iod_strlcpy(p->api_addr, at + 1, sizeof(p->api_addr)))))
			return iod_err_set(e, -EINVAL, "--peers entry %llu: addresses must be HOST:PORT",
			                   id);
		for (uint32_t i = 0; i < c->peers_n; i++)
			if (c->peers[i].id == id)
				return iod_err_set(e, -EINVAL, "--peers names id %llu twice", id);
		c->peers_n++;
	}
	return 0;
}
