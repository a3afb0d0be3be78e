/*
 * member.c: the `member` fault of `iod chaos` (include/iod/chaos.h): a
 * control-plane server taken out of the Raft configuration through the
 * API's membership endpoints (DELETE /v1/members/ID, admin credentials of
 * the cluster's client config), and put back at the deadline (POST
 * /v1/members with its id, Raft and API addresses, as a joining server
 * does). The process keeps running meanwhile; canonical raft's pre-vote
 * keeps the removed server, which does not learn of its removal, from
 * disturbing the others' term.
 *
 * Healing is idempotent: a POST answered 409 (already a member) is healed.
 * A heal that cannot reach a leader fails and keeps the record, so the
 * keeper tries again on its next round until the member is back.
 */
#include "iod/api.h"
#include "iod/chaos.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int client(struct iod_api_client *c, const char *apis, struct iod_err *e)
{
	int rc = iod_api_client_init_config(c, apis, e);
	if (rc)
		return rc;
	c->timeout_ms = 2000;
	c->retry_ms = 3000;
	c->retry_sleep_ms = 50;
	return 0;
}

/* The leader's member list (GET /v1/status of each server until one says
 * it leads: a follower, or a removed server, may hold an older one): a new
 * reference, or NULL with e. */
static json_t *members_get(const char *apis, struct iod_err *e)
{
	struct iod_api_client c;
	json_t *out = NULL;
	if (client(&c, apis, e))
		return NULL;
	/* an election takes a moment: look for up to 3 s */
	for (int round = 0; round < 30 && !out; round++) {
		for (uint32_t i = 0; i < c.servers_n && !out; i++) {
			struct iod_api_response rs = {0};
			const char *state = NULL;
			iod_http_conn_close(&c.conn);
			if (!iod_api_http_once(&c.conn, c.servers[i], "GET", "/v1/status", NULL,
			                       NULL, 0, 1000, &rs, e) &&
			    rs.status == 200 && !iod_json_get_str(rs.json, "state", &state) &&
			    !strcmp(state, "leader") &&
			    json_is_array(json_object_get(rs.json, "members")))
				out = json_incref(json_object_get(rs.json, "members"));
			iod_api_response_free(&rs);
		}
		if (!out)
			usleep(100000);
	}
	iod_api_client_close(&c);
	if (!out)
		iod_err_set(e, -ENOTCONN, "no leader among %s", apis);
	return out;
}

int iod_chaos_member_count(const char *apis)
{
	struct iod_err e = {0};
	json_t *l = members_get(apis, &e);
	int n = l ? (int)json_array_size(l) : -1;
	json_decref(l);
	return n;
}

/* The port of "HOST:PORT", or 0. */
static unsigned port_of(const char *addr)
{
	const char *c = addr ? strrchr(addr, ':') : NULL;
	return c ? (unsigned)atoi(c + 1) : 0;
}

int iod_chaos_member_lookup(const struct iod_chaos_cluster *c, const struct iod_chaos_member *m,
                            struct iod_chaos_fault *f, struct iod_err *e)
{
	json_t *l = members_get(c->apis, e), *x;
	size_t i;
	int rc = -ENOENT;
	if (!l)
		return iod_err_set(e, -ENOTCONN, "no server of %s answered GET /v1/members: %s",
		                   c->apis, e->msg);
	/* the member whose Raft port is this process's --raft port */
	json_array_foreach(l, i, x)
	{
		const char *raft = json_string_value(json_object_get(x, "raft"));
		const char *api = json_string_value(json_object_get(x, "api"));
		json_int_t id = json_integer_value(json_object_get(x, "id"));
		if (m->nports < 1 || !raft || id <= 0 || port_of(raft) != m->ports[0])
			continue;
		f->member_id = (uint64_t)id;
		snprintf(f->member_raft, sizeof(f->member_raft), "%s", raft);
		snprintf(f->member_api, sizeof(f->member_api), "%s", api ? api : "");
		snprintf(f->apis, sizeof(f->apis), "%s", c->apis);
		rc = 0;
	}
	json_decref(l);
	if (rc)
		return iod_err_set(e, rc, "%s is not a Raft member now (GET /v1/members)", m->name);
	return 0;
}

/* f's member in the list: its role ("voter", "standby", "spare"), or NULL. */
static const char *role_of(const json_t *l, uint64_t id)
{
	size_t i;
	json_t *x;
	json_array_foreach(l, i, x)
	{
		if ((uint64_t)json_integer_value(json_object_get(x, "id")) == id)
			return json_string_value(json_object_get(x, "role"))
			           ? json_string_value(json_object_get(x, "role"))
			           : "?";
	}
	return NULL;
}

bool iod_chaos_member_voter(const struct iod_chaos_fault *f)
{
	struct iod_err e = {0};
	json_t *l = members_get(f->apis, &e);
	const char *role = l ? role_of(l, f->member_id) : NULL;
	bool v = role && !strcmp(role, "voter");
	json_decref(l);
	return v;
}

int iod_chaos_member_remove(const struct iod_chaos_fault *f, struct iod_err *e)
{
	struct iod_api_client c;
	struct iod_api_response rs = {0};
	char path[64];
	if (client(&c, f->apis, e))
		return -EIO;
	snprintf(path, sizeof(path), "/v1/members/%llu", (unsigned long long)f->member_id);
	int rc = iod_api_request(&c, "DELETE", path, NULL, NULL, 0, &rs, e);
	if (!rc && rs.status != 200)
		rc = iod_err_set(e, -EIO, "DELETE %s: HTTP %d: %s", path, rs.status,
		                 iod_api_error_text(&rs));
	iod_api_response_free(&rs);
	iod_api_client_close(&c);
	return rc;
}

static int member_post(const struct iod_chaos_fault *f, struct iod_err *e)
{
	struct iod_api_client c;
	struct iod_api_response rs = {0};
	json_t *j = json_pack("{s:I, s:s, s:s}", "id", (json_int_t)f->member_id, "raft",
	                      f->member_raft, "api", f->member_api);
	char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!body)
		return iod_err_set(e, -ENOMEM, "out of memory");
	int rc = client(&c, f->apis, e);
	if (!rc) {
		rc = iod_api_request(&c, "POST", "/v1/members", "application/json", body,
		                     strlen(body), &rs, e);
		/* 409: a member already (healed before, or re-added by hand) */
		if (!rc && rs.status != 200 && rs.status != 409)
			rc = iod_err_set(e, -EIO, "POST /v1/members: HTTP %d: %s", rs.status,
			                 iod_api_error_text(&rs));
		iod_api_response_free(&rs);
		iod_api_client_close(&c);
	}
	free(body);
	return rc;
}

/*
 * Healed when the member is a voter again. The server adds a member as a
 * spare and then promotes it; a leader change in between leaves a spare
 * for good, which a POST cannot promote (409): such a spare is removed, so
 * that the next round adds it afresh. Returns 0 when it is a voter, or an
 * error (the keeper tries again).
 */
int iod_chaos_member_readd(const struct iod_chaos_fault *f, struct iod_err *e)
{
	json_t *l = members_get(f->apis, e);
	if (!l)
		return -ENOTCONN;
	const char *role = role_of(l, f->member_id);
	int rc = 0;
	if (role && !strcmp(role, "voter")) {
		json_decref(l);
		return 0;
	}
	if (role) {
		iod_chaos_member_remove(f, e);
		rc = iod_err_set(e, -EAGAIN,
		                 "Raft id %llu is a %s, not a voter: removed to add it "
		                 "again",
		                 (unsigned long long)f->member_id, role);
	} else if (!(rc = member_post(f, e))) {
		json_decref(l);
		l = members_get(f->apis, e);
		role = l ? role_of(l, f->member_id) : NULL;
		if (!role || strcmp(role, "voter"))
			rc = iod_err_set(e, -EAGAIN, "Raft id %llu added, not a voter yet (%s)",
			                 (unsigned long long)f->member_id, role ? role : "absent");
	}
	json_decref(l);
	return rc;
}
