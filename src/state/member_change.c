/*
 * member_change.c: membership changes on the leader: add (raft_add, then
 * raft_assign as voter) and remove. raft takes one change at a time; a
 * change that finds another uncommitted is parked in one slot and retried
 * at every tick for IOD_STATE_CHANGE_WAIT_MS before it is refused.
 */
#include "member_internal.h"

#include <stdlib.h>
#include <string.h>

static void change_cb(struct raft_change *req, int status)
{
	struct change *c = req->data;
	struct iod_raft_member *n = c->node;

	if (status == 0 && c->assign_next) {
		c->assign_next = false;
		int rv = raft_assign(&n->raft, &c->req, c->id, RAFT_VOTER, change_cb);
		if (rv == 0)
			return;
		status = rv;
	}
	if (c->cb)
		c->cb(c->data, status ? iod_member__errno(status) : 0);
	free(c);
}

/* raft's refusal of a membership change as an errno. */
static int change_errno(const struct change *c, int rv)
{
	if (c->remove && rv == RAFT_BADID)
		return -ENOENT;
	if (!c->remove && (rv == RAFT_DUPLICATEID || rv == RAFT_DUPLICATEADDRESS))
		return -EEXIST;
	if (rv == RAFT_CANTCHANGE)
		return -EBUSY;
	return iod_member__errno(rv);
}

static int change_submit(struct iod_raft_member *n, struct change *c)
{
	return c->remove ? raft_remove(&n->raft, &c->req, c->id, change_cb)
	                 : raft_add(&n->raft, &c->req, c->id, c->raft_addr, change_cb);
}

/*
 * raft takes one membership change at a time (RAFT_CANTCHANGE while the
 * previous one is uncommitted, e.g. a removal right after a join): such a
 * change is parked (one slot) and retried at every tick for up to
 * IOD_STATE_CHANGE_WAIT_MS before it is refused.
 */
void iod_member__change_retry(struct iod_raft_member *n)
{
	struct change *c = n->change_wait;
	int rv;

	if (!c)
		return;
	if (n->stopping || raft_state(&n->raft) != RAFT_LEADER) {
		n->change_wait = NULL;
		if (c->cb)
			c->cb(c->data, n->stopping ? -ESHUTDOWN : -ENOTCONN);
		free(c);
		return;
	}
	rv = change_submit(n, c);
	if (rv == RAFT_CANTCHANGE && iod_clock_now_ns() < c->deadline_ns)
		return;
	n->change_wait = NULL;
	if (rv) {
		if (c->cb)
			c->cb(c->data, change_errno(c, rv));
		free(c);
	}
}

/* Submit c now, or park it when another change is in flight. 0 or -errno. */
static int change_start(struct iod_raft_member *n, struct change *c)
{
	int rv = change_submit(n, c);
	if (rv == RAFT_CANTCHANGE && !n->change_wait) {
		c->deadline_ns =
		    iod_clock_now_ns() + (uint64_t)IOD_STATE_CHANGE_WAIT_MS * IOD_NS_PER_MS;
		n->change_wait = c;
		return 0;
	}
	if (rv) {
		int err = change_errno(c, rv);
		free(c);
		return err;
	}
	return 0;
}

int iod_raft_member_member_add(struct iod_raft_member *n, uint64_t id, const char *raft_addr,
                               const char *api_addr, iod_raft_member_done_cb cb, void *data)
{
	struct change *c;
	int rv;

	if (!iod_raft_member_is_leader(n))
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
	if (iod_strlcpy(c->raft_addr, raft_addr, sizeof(c->raft_addr))) {
		free(c);
		return -EINVAL;
	}
	if ((rv = change_start(n, c)))
		return rv;
	/* record its API address too, so clients can be pointed at it */
	if (api_addr && api_addr[0]) {
		char key[IOD_NAME_MAX];
		snprintf(key, sizeof(key), "member.%llu", (unsigned long long)id);
		json_t *val = json_pack("{s:I, s:s, s:s}", "id", (json_int_t)id, "raft", raft_addr,
		                        "api", api_addr);
		char *cmd = iod_state_cmd_put(IOD_STATE_CONFIG, key, val, 0, -1);
		json_decref(val);
		if (cmd)
			iod_raft_member_propose(n, cmd, strlen(cmd), NULL, NULL);
		free(cmd);
	}
	return 0;
}

int iod_raft_member_member_remove(struct iod_raft_member *n, uint64_t id,
                                  iod_raft_member_done_cb cb, void *data)
{
	struct change *c;

	if (!iod_raft_member_is_leader(n))
		return -ENOTCONN;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req.data = c;
	c->node = n;
	c->id = id;
	c->remove = true;
	c->cb = cb;
	c->data = data;
	return change_start(n, c);
}
