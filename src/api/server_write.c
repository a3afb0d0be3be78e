/*
 * server_write.c: the API's writes and everything that needs the leader:
 * proposing a command and answering once it is committed and applied
 * (PUT/DELETE, transactions, leases, deploys, membership), holding a
 * request while no leader is known and redirecting it (307) once one is,
 * and linearizable reads behind a read fence. A write is never answered
 * before its entry is applied; what it does is the state machine's call.
 */
#include "server_internal.h"

/* ---- no leader: hold, then redirect ------------------------------------- */

json_t *api__not_leader_json(struct server *s)
{
	const char *api = "";
	uint64_t id = iod_raft_member_leader(s->node, &api);
	return json_pack("{s:s, s:b, s:I, s:s}", "error",
	                 id ? "this server is not the leader; send writes to \"leader\""
	                    : "no leader elected right now; retry shortly",
	                 "not_leader", 1, "leader_id", (json_int_t)id, "leader", api);
}

void api__held_unlink(struct req *q)
{
	struct server *s = q->srv;
	if (!q->holding)
		return;
	if (q->hprev)
		q->hprev->hnext = q->hnext;
	else
		s->held = q->hnext;
	if (q->hnext)
		q->hnext->hprev = q->hprev;
	q->hprev = q->hnext = NULL;
	q->holding = false;
	s->held_n--;
}

/*
 * This server cannot take the request (not the leader). When it knows a
 * leader it has heard from lately, answer 503 with that leader's address;
 * when there is none (an election is running, or the leader went silent),
 * hold the request for up to IOD_API_LEADER_WAIT_MS and run it again as
 * soon as a leader is known: the client is pointed at the new leader the
 * moment it exists instead of polling (or following a dead leader's
 * address) through the election.
 */
/* Suspend q on the held list unless its wait is over; true when held. */
bool api__hold(struct req *q)
{
	struct server *s = q->srv;
	uint64_t now = mono_ms();

	if (!q->hold_deadline_ms)
		q->hold_deadline_ms = now + IOD_API_LEADER_WAIT_MS;
	if (now >= q->hold_deadline_ms)
		return false;
	q->holding = true;
	q->hnext = s->held;
	if (s->held)
		s->held->hprev = q;
	s->held = q;
	s->held_n++;
	s->held_total++;
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return true;
}

MHD_RESULT api__not_leader(struct req *q)
{
	struct server *s = q->srv;

	if (!s->stopping && !iod_raft_member_leader_fresh(s->node) && api__hold(q))
		return MHD_YES;
	return api__queue_json(s, q->conn, 503, api__not_leader_json(s));
}

/* Resume a held request without an answer: the handler routes it again. */
void api__held_rerun(struct req *q)
{
	api__held_unlink(q);
	if (q->suspended) {
		q->suspended = false;
		MHD_resume_connection(q->conn);
		api__mhd_kick(q->srv);
	}
}

/* The node knows a leader again (or a new one): rerun what was held. */
void api__leader_known(void *data)
{
	struct server *s = data;
	while (s->held)
		api__held_rerun(s->held);
}

/* ---- writes ------------------------------------------------------------- */

static void write_done(void *data, int status, const struct iod_state_result *res)
{
	struct req *q = data;
	struct server *s = q->srv;
	json_t *a;

	api__deploy_turn_release(q); /* a deploy's write is applied (or lost) */
	if (status == 0) {
		const struct iod_raft_member_trace *t = iod_raft_member_trace(s->node);
		q->t_propose_ns = t->propose_ns;
		q->t_flush_ns = t->flush_ns;
		q->t_apply_ns = t->apply_ns;
	}

	if (status == -ENOTCONN) {
		api__finish(q, 503, api__not_leader_json(s));
		return;
	}
	if (status == IOD_RAFT_MEMBER_OUTCOME_UNKNOWN) {
		/* not "not the leader": the write is in the log and a later
		 * leader may commit it; a blind retry could apply it twice */
		api__finish(q, 504,
		            json_pack("{s:s, s:b, s:s}", "error", res->msg, "outcome_unknown", 1,
		                      "code", "outcome_unknown"));
		return;
	}
	if (status) {
		api__finish(q, api__code_for(status), api__err_json("%s", res->msg));
		return;
	}
	if (res->code) {
		a = json_pack("{s:s, s:I}", "error", res->msg, "rev", (json_int_t)res->rev);
		if (res->code == -ECANCELED)
			json_object_set_new(a, "cur_rev", json_integer((json_int_t)res->cur_rev));
		api__finish(q, api__code_for(res->code), a);
		return;
	}
	a = q->extra ? json_incref(q->extra) : json_object();
	json_object_set_new(a, "rev", json_integer((json_int_t)res->rev));
	json_object_set_new(a, "changed", json_integer(res->changed));
	if (res->lease_id)
		json_object_set_new(a, "lease", json_integer((json_int_t)res->lease_id));
	api__finish(q, 200, a);
}

/* Propose cmd (owned) for q; answers now on refusal, else suspends q. */
MHD_RESULT api__propose(struct req *q, char *cmd)
{
	struct server *s = q->srv;
	int rc;

	if (!cmd)
		return api__queue_err(s, q->conn, 500, api__err_json("out of memory"));
	size_t len = strlen(cmd);
	rc = iod_raft_member_propose(s->node, cmd, len, write_done, q);
	free(cmd);
	if (rc == -ENOTCONN)
		return api__not_leader(q);
	if (rc == -EBUSY)
		return api__queue_err(
		    s, q->conn, 503,
		    api__err_json("overloaded: %d writes in flight; retry shortly",
		                  IOD_API_PENDING_MAX));
	if (rc == -E2BIG)
		return api__queue_err(
		    s, q->conn, 413,
		    api__err_json("the command is %zu bytes, over IOD_STATE_CMD_MAX (%u bytes, "
		                  "one Raft entry); split it (deploy fewer replicas at once)",
		                  len, IOD_STATE_CMD_MAX));
	if (rc)
		return api__queue_err(s, q->conn, api__code_for(rc),
		                      api__err_json("proposing: %s", strerror(-rc)));
	if (q->ready) {
		/* answered already (a batch that could not be proposed) */
		json_t *a = q->answer;
		q->answer = NULL;
		q->ready = false;
		return api__queue_json(s, q->conn, q->status, a);
	}
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return MHD_YES;
}

/* A decimal query number in [0, INT64_MAX] (commands carry it as a JSON
 * integer): anything else, including overflow, sets *bad. A prev_rev of
 * 2^63 or more used to wrap to -1, "no check": an unconditional write. */
bool api__query_u64(struct MHD_Connection *c, const char *key, uint64_t *out, bool *bad)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
	char *end = NULL;
	if (!v)
		return false;
	for (const char *p = v; *p; p++)
		if (*p < '0' || *p > '9') {
			*bad = true;
			return false;
		}
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (!v[0] || *end || errno == ERANGE || x > (unsigned long long)INT64_MAX) {
		*bad = true;
		return false;
	}
	*out = x;
	return true;
}

json_t *api__body_json(struct req *q, json_t **err)
{
	struct iod_err e = {0};
	json_t *j = NULL;
	if (q->parsed) {           /* parsed on a worker (api__job_parse) */
		j = q->body_value; /* taken: a rerun (held, then a leader) parses again */
		q->body_value = NULL;
		q->parsed = false;
		*err = j ? NULL : (q->body_error ? q->body_error : api__err_json("out of memory"));
		q->body_error = NULL;
		return j;
	}
	if (!q->body.len) {
		*err = api__err_json("request body is empty; send a JSON object");
		return NULL;
	}
	if (iod_json_parse(q->body.data, q->body.len, &j, &e)) {
		*err = api__err_json("%s", e.msg);
		return NULL;
	}
	return j;
}

MHD_RESULT api__do_put(struct req *q, enum iod_state_kind k, const char *name)
{
	struct server *s = q->srv;
	uint64_t prev = 0, lease = 0;
	bool bad = false, has_prev;
	json_t *err = NULL, *v;

	has_prev = api__query_u64(q->conn, "prev_rev", &prev, &bad);
	api__query_u64(q->conn, "lease", &lease, &bad);
	if (bad)
		return api__queue_err(
		    s, q->conn, 400,
		    api__err_json("prev_rev and lease must be integers from 0 to 2^63-1"));
	if (q->body.len > IOD_API_VALUE_MAX)
		return api__queue_err(
		    s, q->conn, 413,
		    api__err_json("%s/%s: a value of %zu bytes is over IOD_API_VALUE_MAX (%u "
		                  "bytes); store large data elsewhere and reference it",
		                  iod_state_kind_name(k), name, q->body.len, IOD_API_VALUE_MAX));
	if (!q->parsed && q->body.len >= IOD_API_PARSE_OFFLOOP_MIN) {
		/* parsed, and its command encoded, on a worker (a 512 KiB value:
		 * ~15 ms on the loop) */
		if (!iod_raft_member_is_leader(s->node))
			return api__not_leader(q);
		return api__job_parse_put(q, k, name, lease, has_prev ? (int64_t)prev : -1);
	}
	if (!(v = api__body_json(q, &err)))
		return api__queue_err(s, q->conn, 400, err);
	if (!json_is_object(v)) {
		json_decref(v);
		return api__queue_err(s, q->conn, 400,
		                      api__err_json("%s/%s: the body must be a JSON object",
		                                    iod_state_kind_name(k), name));
	}
	if (!iod_raft_member_is_leader(s->node)) {
		json_decref(v);
		return api__not_leader(q);
	}
	/* the same checks /v1/deploy makes, for what a raw PUT could smuggle in */
	struct iod_err ve = {0};
	json_t *verr = NULL;
	if (iod_api_validate_put(iod_raft_member_state(s->node), k, name, v, &verr, &ve)) {
		json_decref(v);
		json_t *a = verr ? verr : json_object();
		json_object_set_new(a, "error", json_string(ve.msg));
		return api__queue_json(s, q->conn, ve.code == -ENOMEM ? 500 : 400, a);
	}
	char *cmd = q->body_cmd; /* encoded with its parse on a worker */
	q->body_cmd = NULL;
	if (!cmd)
		cmd = iod_state_cmd_put(k, name, v, lease, has_prev ? (int64_t)prev : -1);
	json_decref(v);
	return api__propose(q, cmd);
}

MHD_RESULT api__do_delete(struct req *q, enum iod_state_kind k, const char *name)
{
	struct server *s = q->srv;
	uint64_t prev = 0;
	bool bad = false, has_prev = api__query_u64(q->conn, "prev_rev", &prev, &bad);
	char *cmd;

	if (bad)
		return api__queue_err(
		    s, q->conn, 400, api__err_json("prev_rev must be an integer from 0 to 2^63-1"));
	if (k == IOD_STATE_SERVICE && !has_prev) {
		/* deleting a service removes its replicas and endpoints with it */
		json_t *j = json_pack("{s:s, s:s}", "op", "undeploy", "service", name);
		cmd = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
	} else {
		cmd = iod_state_cmd_delete(k, name, has_prev ? (int64_t)prev : -1);
	}
	return api__propose(q, cmd);
}

/* A txn body (taken) as its command, or NULL with *status and *err set.
 * Loop or worker thread: touches nothing shared. */
char *api__txn_encode(json_t *j, int *status, json_t **err)
{
	json_t *ops = json_object_get(j, "ops");
	char *cmd = NULL;
	*status = 400;
	if (!json_is_array(ops)) {
		*err = api__err_json("a txn body is {\"ops\": [{\"op\": \"put\"|\"delete\", "
		                     "\"kind\", \"name\", \"value\", \"prev_rev\"}...]}");
	} else if (json_array_size(ops) > IOD_API_TXN_OPS_MAX) {
		*status = 413;
		*err = api__err_json("a txn of %zu operations is over IOD_API_TXN_OPS_MAX (%u); "
		                     "split it",
		                     json_array_size(ops), IOD_API_TXN_OPS_MAX);
	} else {
		json_object_set_new(j, "op", json_string("txn"));
		cmd = json_dumps(j, JSON_COMPACT);
		*status = cmd ? 0 : 500;
		if (!cmd)
			*err = api__err_json("out of memory");
	}
	json_decref(j);
	return cmd;
}

/*
 * POST /v1/txn. A large body (IOD_API_PARSE_OFFLOOP_MIN or more) is parsed,
 * checked and encoded on a worker thread (issue 15: a 4,000-put txn held the
 * loop 30-50 ms doing that and cost an election); the loop proposes it.
 */
MHD_RESULT api__do_txn(struct req *q)
{
	json_t *err = NULL, *j;
	int status = 0;
	char *cmd;

	if (q->parsed && (q->body_cmd || q->txn_status)) {
		cmd = q->body_cmd;
		q->body_cmd = NULL;
		q->parsed = false; /* taken: a rerun parses again */
		if (!cmd) {
			json_t *why =
			    q->body_error ? q->body_error : api__err_json("out of memory");
			q->body_error = NULL;
			return api__queue_json(q->srv, q->conn, q->txn_status, why);
		}
		if (!iod_raft_member_is_leader(q->srv->node)) {
			free(cmd);
			return api__not_leader(q);
		}
		return api__propose(q, cmd);
	}
	if (!q->parsed && q->body.len >= IOD_API_PARSE_OFFLOOP_MIN) {
		if (!iod_raft_member_is_leader(q->srv->node))
			return api__not_leader(q);
		return api__job_parse(q, true);
	}
	if (!(j = api__body_json(q, &err)))
		return api__queue_err(q->srv, q->conn, 400, err);
	if (!(cmd = api__txn_encode(j, &status, &err)))
		return api__queue_json(q->srv, q->conn, status, err);
	return api__propose(q, cmd);
}

MHD_RESULT api__do_lease(struct req *q, const char *method, const char *id_text)
{
	struct server *s = q->srv;
	uint64_t now_ms = iod_time_unix_ns() / IOD_NS_PER_MS, id = 0, ttl = 0;
	char *end = NULL;

	if (id_text) {
		id = strtoull(id_text, &end, 10);
		if (!id || *end)
			return api__queue_err(s, q->conn, 400,
			                      api__err_json("lease id must be a positive integer"));
	}
	if (!strcmp(method, "POST") && !id_text) {
		json_t *err = NULL, *j = api__body_json(q, &err);
		if (!j)
			return api__queue_err(s, q->conn, 400, err);
		int rc = iod_json_get_u64(j, "ttl_ms", &ttl);
		bool node = json_is_true(json_object_get(j, "node"));
		json_decref(j);
		if (rc || ttl == 0 || ttl > 24ull * 3600 * 1000)
			return api__queue_err(
			    s, q->conn, 400,
			    api__err_json(
			        "a lease body is {\"ttl_ms\": N[, \"node\": true]} with 0 < N "
			        "<= 1 day"));
		/* the reserved pool is for node agents (and admins, who may do
		 * anything; with --insecure everyone on loopback is admin) */
		if (node && q->id.kind != IOD_SEC_KIND_NODE && q->id.role != IOD_SEC_ROLE_ADMIN)
			return api__queue_err(
			    s, q->conn, 403,
			    api__err_json("\"node\": true leases are for node identities"));
		/* quotas are per client: its identity, else its address */
		char owner[IOD_NAME_MAX + 32];
		struct conn_ctx *cc = api__conn_ctx_of(q->conn);
		if (q->id.kind != IOD_SEC_KIND_ANONYMOUS && strcmp(q->id.via, "--insecure")) {
			iod_sec_identity_subject(&q->id, owner, sizeof(owner));
		} else {
			snprintf(owner, sizeof(owner), "addr:%s", cc ? cc->remote : "?");
			char *colon = strrchr(owner, ':');
			if (colon && colon > owner + 5)
				*colon = 0; /* the address, not the port */
		}
		return api__propose(q, iod_state_cmd_lease_grant_for(ttl, now_ms, owner, node));
	}
	if (!strcmp(method, "PUT") && id_text)
		return api__propose(q, iod_state_cmd_lease_renew(id, now_ms));
	if (!strcmp(method, "DELETE") && id_text)
		return api__propose(q, iod_state_cmd_lease_revoke(id));
	return api__queue_err(
	    s, q->conn, 405, api__err_json("leases: POST /v1/leases, PUT or DELETE /v1/leases/ID"));
}

/* The deploy turn ends (its write answered, or nothing to propose): the
 * next deploy may be planned. */
void api__deploy_turn_release(struct req *q)
{
	if (!q->deploy_turn)
		return;
	q->deploy_turn = false;
	api__deploy_turn_end(q->srv);
	api__job_start_next(q->srv);
}

/* The plan is back (job_deploy_end): answer its refusal, or propose it. */
static MHD_RESULT deploy_planned(struct req *q)
{
	struct server *s = q->srv;
	char *cmd = q->plan_cmd;
	json_t *answer = q->extra;
	MHD_RESULT r;

	q->plan_cmd = NULL;
	q->extra = NULL;
	q->planned = false;
	if (!iod_raft_member_is_leader(s->node)) {
		/* planned from a state this server no longer leads: start again */
		free(cmd);
		json_decref(answer);
		api__deploy_turn_release(q);
		return api__not_leader(q);
	}
	if (q->plan_rc) {
		json_t *j = answer ? answer : json_object();
		json_object_set_new(j, "error", json_string(q->plan_msg));
		r = api__queue_json(s, q->conn, api__code_for(q->plan_rc), j);
	} else if (!cmd) { /* nothing placeable: the reasons, nothing stored */
		r = api__queue_json(s, q->conn, 422, answer);
	} else {
		q->extra = answer;
		r = api__propose(q, cmd);
	}
	if (!q->suspended)
		api__deploy_turn_release(q); /* answered without a write in flight */
	return r;
}

/*
 * POST /v1/deploy: the plan (spec, scheduler, Replica objects) is made on
 * a worker thread from a view of the state (issue 15: 2,000 replicas held
 * the loop 125 ms and cost an election); the loop proposes its result. One
 * deploy at a time: the next is planned once the previous write is
 * answered, so it sees the GPUs that one took.
 */
MHD_RESULT api__do_deploy(struct req *q)
{
	struct server *s = q->srv;

	if (q->planned)
		return deploy_planned(q);
	if (!q->body.len)
		return api__queue_err(s, q->conn, 400,
		                      api__err_json("deploy needs a spec (YAML or JSON) body"));
	if (!iod_raft_member_is_leader(s->node))
		return api__not_leader(q);
	return api__job_deploy(q);
}

/* ---- members ------------------------------------------------------------ */

static void member_done(void *data, int status)
{
	struct req *q = data;
	if (status == -ENOTCONN)
		api__finish(q, 503, api__not_leader_json(q->srv));
	else if (status)
		api__finish(q, api__code_for(status),
		            api__err_json("membership change failed: %s", strerror(-status)));
	else
		api__finish(q, 200, iod_raft_member_status(q->srv->node));
}

MHD_RESULT api__do_members(struct req *q, const char *method, const char *id_text)
{
	struct server *s = q->srv;
	int rc;

	if (!strcmp(method, "GET"))
		return api__queue_json(
		    s, q->conn, 200,
		    json_incref(json_object_get(iod_raft_member_status(s->node), "members")));
	if (!iod_raft_member_is_leader(s->node))
		return api__not_leader(q);
	if (!strcmp(method, "POST") && !id_text) {
		json_t *err = NULL, *j = api__body_json(q, &err);
		uint64_t id = 0;
		const char *raft_addr = NULL, *api = "";
		if (!j)
			return api__queue_err(s, q->conn, 400, err);
		if (iod_json_get_u64(j, "id", &id) || !id ||
		    iod_json_get_str(j, "raft", &raft_addr) || !strchr(raft_addr, ':')) {
			json_decref(j);
			return api__queue_err(
			    s, q->conn, 400,
			    api__err_json("a member is {\"id\": N, \"raft\": \"HOST:PORT\", "
			                  "\"api\": \"HOST:PORT\"}"));
		}
		iod_json_get_str(j, "api", &api);
		rc = iod_raft_member_member_add(s->node, id, raft_addr, api, member_done, q);
		json_decref(j);
	} else if (!strcmp(method, "DELETE") && id_text) {
		char *end = NULL;
		uint64_t id = strtoull(id_text, &end, 10);
		if (!id || *end)
			return api__queue_err(
			    s, q->conn, 400, api__err_json("member id must be a positive integer"));
		rc = iod_raft_member_member_remove(s->node, id, member_done, q);
	} else {
		return api__queue_err(
		    s, q->conn, 405,
		    api__err_json("members: GET or POST /v1/members, DELETE /v1/members/ID"));
	}
	if (rc == -ENOTCONN)
		return api__queue_json(s, q->conn, 503, api__not_leader_json(s));
	if (rc)
		return api__queue_err(
		    s, q->conn, rc == -EEXIST ? 409 : api__code_for(rc),
		    api__err_json("membership change refused: %s", strerror(-rc)));
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return MHD_YES;
}

/* ---- linearizable reads ------------------------------------------------- */

static void fence_done(void *data, int status)
{
	struct req *q = data;
	const struct iod_state *st = iod_raft_member_state(q->srv->node);
	json_t *o;

	if (status == -ENOTCONN) {
		api__finish(q, 503, api__not_leader_json(q->srv));
		return;
	}
	if (status) {
		api__finish(q, 503,
		            api__err_json("read fence failed: %s; retry", strerror(-status)));
		return;
	}
	if (q->fence_list) {
		api__job_list(q, q->kind);
		return;
	}
	o = iod_state_get(st, q->kind, q->name);
	if (o)
		api__finish(q, 200, o);
	else
		api__finish(
		    q, 404,
		    api__err_json("%s/%s not found", iod_state_kind_name(q->kind), q->name));
}

/* ?consistent=1: answer after a barrier, from the leader only. */
bool api__wants_fence(struct MHD_Connection *c)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "consistent");
	return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

MHD_RESULT api__fenced_read(struct req *q, enum iod_state_kind k, bool list)
{
	struct server *s = q->srv;
	q->kind = k;
	q->fence_list = list;
	int rc = iod_raft_member_read_fence(s->node, fence_done, q);
	if (rc == -ENOTCONN)
		return api__not_leader(q);
	if (rc)
		return api__queue_err(s, q->conn, 503,
		                      api__err_json("read fence: %s", strerror(-rc)));
	q->suspended = true;
	MHD_suspend_connection(q->conn);
	return MHD_YES;
}
