/*
 * authz.c: the authorisation core (pure): may this identity do this verb
 * to this resource? Answers allow, or deny with a status (401 when the
 * caller is not authenticated or its credential is revoked, 403 when it
 * is known but not allowed) and a reason that names the identity, as
 * Kubernetes' RBAC does ('user "bob" (viewer, token ...) may not put
 * service/web: needs role deployer').
 *
 * Roles are a table per resource (people: viewer < deployer < admin).
 * Nodes, servers and join tokens are not ranks on that ladder: they have
 * rules of their own, and a node's writes are checked against the state it
 * would change (its own Node, replicas placed on it, their Endpoints; a
 * replica whose node is gone may be moved, which is how agents reschedule).
 *
 * It reads the state it is given and nothing else: no I/O, no clock.
 */
#include "iod/objects.h"
#include "iod/sec.h"
#include "iod/state.h"

#include <string.h>

static const char *const verb_names[] = {
#define X(n, s) s,
    IOD_SEC_VERBS(X)
#undef X
};

static const char *const res_names[] = {
#define X(n, s) s,
    IOD_SEC_RESOURCES(X)
#undef X
};

const char *iod_sec_verb_name(enum iod_sec_verb v)
{
	return (unsigned)v < IOD_ARRAY_LEN(verb_names) ? verb_names[v] : "?";
}

const char *iod_sec_resource_name(enum iod_sec_resource r)
{
	return (unsigned)r < IOD_ARRAY_LEN(res_names) ? res_names[r] : "?";
}

bool iod_sec_resource_sensitive(enum iod_sec_resource r)
{
	return r == IOD_SEC_RES_TOKEN || r == IOD_SEC_RES_SECRET || r == IOD_SEC_RES_AUDIT ||
	       r == IOD_SEC_RES_SECRET_VALUE;
}

/* Minimum person role to read and to write each resource (NONE: nobody). */
static const struct {
	enum iod_sec_role read, write;
} people[IOD_SEC_RES_COUNT] = {
    [IOD_SEC_RES_NODE] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_ADMIN},
    [IOD_SEC_RES_SERVICE] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_DEPLOYER},
    [IOD_SEC_RES_REPLICA] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_DEPLOYER},
    [IOD_SEC_RES_ENDPOINT] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_DEPLOYER},
    [IOD_SEC_RES_POLICY] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_DEPLOYER},
    [IOD_SEC_RES_CONFIG] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_DEPLOYER},
    [IOD_SEC_RES_TOKEN] = {IOD_SEC_ROLE_ADMIN, IOD_SEC_ROLE_ADMIN},
    [IOD_SEC_RES_SECRET] = {IOD_SEC_ROLE_ADMIN, IOD_SEC_ROLE_ADMIN},
    [IOD_SEC_RES_REVOCATION] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_ADMIN},
    [IOD_SEC_RES_DEPLOY] = {IOD_SEC_ROLE_NONE, IOD_SEC_ROLE_DEPLOYER},
    [IOD_SEC_RES_TXN] = {IOD_SEC_ROLE_NONE, IOD_SEC_ROLE_DEPLOYER},
    [IOD_SEC_RES_LEASE] = {IOD_SEC_ROLE_DEPLOYER, IOD_SEC_ROLE_DEPLOYER},
    [IOD_SEC_RES_MEMBER] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_ADMIN},
    [IOD_SEC_RES_STATUS] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_NONE},
    [IOD_SEC_RES_METRICS] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_NONE},
    [IOD_SEC_RES_WATCH_ALL] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_NONE},
    [IOD_SEC_RES_AUDIT] = {IOD_SEC_ROLE_ADMIN, IOD_SEC_ROLE_NONE},
    [IOD_SEC_RES_CERTIFICATE] = {IOD_SEC_ROLE_NONE, IOD_SEC_ROLE_ADMIN},
    [IOD_SEC_RES_SECRET_VALUE] = {IOD_SEC_ROLE_NONE, IOD_SEC_ROLE_NONE},
    /* chaos faults disrupt every caller of a service: admins inject them */
    [IOD_SEC_RES_FAULT] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_ADMIN},
    [IOD_SEC_RES_CHECKPOINT] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_DEPLOYER},
    /* kube-scheduler's questions (POST /v1/extender/...): answers, no change */
    [IOD_SEC_RES_EXTENDER] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_NONE},
    /* libiod-xfer peers (docs/transfer.md): what a replica publishes */
    [IOD_SEC_RES_XFERPEER] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_DEPLOYER},
    /* security groups of the overlay (docs/network.md): as services */
    [IOD_SEC_RES_NETPOLICY] = {IOD_SEC_ROLE_VIEWER, IOD_SEC_ROLE_DEPLOYER},
};

/* Rank of a person's role (0 for roles that are not on the ladder). */
static int rank(enum iod_sec_role r)
{
	switch (r) {
	case IOD_SEC_ROLE_VIEWER: return 1;
	case IOD_SEC_ROLE_DEPLOYER: return 2;
	case IOD_SEC_ROLE_ADMIN: return 3;
	default: return 0;
	}
}

static bool is_read(enum iod_sec_verb v)
{
	return v == IOD_SEC_VERB_GET || v == IOD_SEC_VERB_LIST || v == IOD_SEC_VERB_WATCH;
}

static int allow(struct iod_sec_decision *d)
{
	d->allow = true;
	d->status = 0;
	d->reason[0] = 0;
	return 0;
}

static int deny(struct iod_sec_decision *d, int status, const struct iod_sec_identity *id,
                const struct iod_sec_request *rq, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int deny(struct iod_sec_decision *d, int status, const struct iod_sec_identity *id,
                const struct iod_sec_request *rq, const char *fmt, ...)
{
	char who[IOD_NAME_MAX * 3], why[IOD_ERR_MSG_MAX / 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	iod_sec_identity_format(id, who, sizeof(who));
	d->allow = false;
	d->status = status;
	if (status == 401)
		snprintf(d->reason, sizeof(d->reason), "unauthenticated (%s): %s", who, why);
	else
		snprintf(d->reason, sizeof(d->reason), "forbidden: %s may not %s %s%s%s: %s", who,
		         iod_sec_verb_name(rq->verb), iod_sec_resource_name(rq->res),
		         rq->name && rq->name[0] ? "/" : "", rq->name ? rq->name : "", why);
	return -EACCES;
}

enum iod_sec_resource iod_sec_resource_of_kind(enum iod_state_kind k)
{
	switch (k) {
	case IOD_STATE_NODE: return IOD_SEC_RES_NODE;
	case IOD_STATE_SERVICE: return IOD_SEC_RES_SERVICE;
	case IOD_STATE_REPLICA: return IOD_SEC_RES_REPLICA;
	case IOD_STATE_ENDPOINT: return IOD_SEC_RES_ENDPOINT;
	case IOD_STATE_POLICY: return IOD_SEC_RES_POLICY;
	case IOD_STATE_CONFIG: return IOD_SEC_RES_CONFIG;
	case IOD_STATE_TOKEN: return IOD_SEC_RES_TOKEN;
	case IOD_STATE_SECRET: return IOD_SEC_RES_SECRET;
	case IOD_STATE_REVOCATION: return IOD_SEC_RES_REVOCATION;
	case IOD_STATE_FAULT: return IOD_SEC_RES_FAULT;
	case IOD_STATE_CHECKPOINT: return IOD_SEC_RES_CHECKPOINT;
	case IOD_STATE_XFERPEER: return IOD_SEC_RES_XFERPEER;
	case IOD_STATE_NETPOLICY: return IOD_SEC_RES_NETPOLICY;
	default: break;
	}
	IOD_ASSERT(!"state kind without a resource");
	return IOD_SEC_RES_STATUS;
}

static const json_t *value_of(const struct iod_sec_request *rq, enum iod_state_kind k,
                              const char *name)
{
	return rq->state && name ? iod_state_value(rq->state, k, name) : NULL;
}

static const char *str_of(const json_t *v, const char *key)
{
	const char *s = NULL;
	return v && !iod_json_get_str(v, key, &s) ? s : NULL;
}

static bool str_eq(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/* Is this identity's credential revoked (a Revocation object named by
 * iod_sec_revocation_key: "KIND.NAME", "service.TENANT.NAME")? */
static bool revoked(const struct iod_sec_identity *id, const struct iod_state *st)
{
	char key[IOD_NAME_MAX];
	if (!st || iod_sec_revocation_key(id->kind, id->tenant, id->name, key, sizeof(key)))
		return false;
	return iod_state_value(st, IOD_STATE_REVOCATION, key) != NULL;
}

/*
 * Replica keys a node may not change: those that say whose replica it is
 * (a node may report anything about a replica it runs: phase, health, its
 * address, its placement on the node, which it runs either way; but not
 * make it another service's, and so be handed that service's spec and
 * secrets), and the limits the deploy plan set on it: nic_bw_bps is its
 * egress meter's rate, which a node raising would lift the bandwidth its
 * service was placed with.
 */
static const enum iod_obj_replica_field identity_keys[] = {
    IOD_OBJ_REPLICA_SERVICE, IOD_OBJ_REPLICA_ORDINAL, IOD_OBJ_REPLICA_GENERATION,
    IOD_OBJ_REPLICA_TENANT, IOD_OBJ_REPLICA_NIC_BW_BPS};

/* A Replica's (or Endpoint's) string field, NULL when absent. */
static const char *rep_str(const json_t *v, enum iod_obj_replica_field f)
{
	return iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, f);
}

static const char *ep_str(const json_t *v, enum iod_obj_endpoint_field f)
{
	return iod_obj_peek_str(IOD_OBJ_KIND_ENDPOINT, v, f);
}

/* The first identity key that differs between a and b; NULL if none. */
static const char *changed_key(const json_t *a, const json_t *b)
{
	for (size_t i = 0; i < IOD_ARRAY_LEN(identity_keys); i++) {
		const char *k = iod_obj_key(IOD_OBJ_KIND_REPLICA, identity_keys[i]);
		if (!json_equal(json_object_get(a, k), json_object_get(b, k)) &&
		    (json_object_get(a, k) || json_object_get(b, k)))
			return k;
	}
	return NULL;
}

/* A node writing a replica: its own (status only), or a lost node's (a move). */
static int node_replica(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                        struct iod_sec_decision *d)
{
	const json_t *old = value_of(rq, IOD_STATE_REPLICA, rq->name);
	const char *old_node = rep_str(old, IOD_OBJ_REPLICA_NODE);
	const char *new_node = rep_str(rq->value, IOD_OBJ_REPLICA_NODE);
	const char *k;

	if (rq->verb != IOD_SEC_VERB_PUT)
		return deny(d, 403, id, rq, "nodes only report on replicas; they do not %s them",
		            iod_sec_verb_name(rq->verb));
	if (!old)
		return deny(d, 403, id, rq, "nodes cannot create replicas (deploy does)");
	if (!rq->value || !json_is_object(rq->value))
		return deny(d, 403, id, rq, "the new value is not an object");
	if (str_eq(old_node, id->name)) {
		if (!str_eq(new_node, id->name))
			return deny(d, 403, id, rq, "a node cannot hand its replica to node %s",
			            new_node ? new_node : "(none)");
		if ((k = changed_key(old, rq->value)))
			return deny(d, 403, id, rq,
			            "a node reports on its replicas; it may not change their "
			            "\"%s\"",
			            k);
		return allow(d);
	}
	if (old_node && value_of(rq, IOD_STATE_NODE, old_node))
		return deny(d, 403, id, rq, "it runs on node %s", old_node);
	/* its node is gone: rescheduling may move it to a live node, or mark it */
	if (!str_eq(new_node, old_node) && !value_of(rq, IOD_STATE_NODE, new_node))
		return deny(d, 403, id, rq,
		            "a lost node's replica moves only to a live node, not "
		            "%s",
		            new_node ? new_node : "(none)");
	if ((k = changed_key(old, rq->value)))
		return deny(d, 403, id, rq, "moving a replica may not change \"%s\"", k);
	return allow(d);
}

/* A node writing an endpoint: one of its replicas'. */
static int node_endpoint(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                         struct iod_sec_decision *d)
{
	const json_t *old = value_of(rq, IOD_STATE_ENDPOINT, rq->name);
	const char *old_node = ep_str(old, IOD_OBJ_ENDPOINT_NODE);
	if (old && !str_eq(old_node, id->name))
		return deny(d, 403, id, rq, "endpoint belongs to node %s",
		            old_node ? old_node : "(none)");
	if (rq->verb == IOD_SEC_VERB_DELETE)
		return old ? allow(d) : deny(d, 403, id, rq, "no such endpoint of this node");
	if (rq->verb != IOD_SEC_VERB_PUT)
		return deny(d, 403, id, rq, "nodes put or delete endpoints only");
	if (!str_eq(ep_str(rq->value, IOD_OBJ_ENDPOINT_NODE), id->name))
		return deny(d, 403, id, rq, "an endpoint it writes must name node %s", id->name);
	const char *rep = ep_str(rq->value, IOD_OBJ_ENDPOINT_REPLICA);
	const json_t *rv = value_of(rq, IOD_STATE_REPLICA, rep);
	if (!rv || !str_eq(rep_str(rv, IOD_OBJ_REPLICA_NODE), id->name))
		return deny(d, 403, id, rq, "replica %s does not run on this node",
		            rep ? rep : "(none)");
	if (!str_eq(ep_str(rq->value, IOD_OBJ_ENDPOINT_SERVICE),
	            rep_str(rv, IOD_OBJ_REPLICA_SERVICE)))
		return deny(d, 403, id, rq, "the endpoint's service is not its replica's");
	return allow(d);
}

/* A node writing a checkpoint manifest: one whose primary copy it holds,
 * of a replica that runs on it (docs/storage.md). */
static int node_checkpoint(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                           struct iod_sec_decision *d)
{
	const json_t *old = value_of(rq, IOD_STATE_CHECKPOINT, rq->name);
	const char *k_node = iod_obj_key(IOD_OBJ_KIND_CHECKPOINT, IOD_OBJ_CHECKPOINT_NODE);
	const char *k_rep = iod_obj_key(IOD_OBJ_KIND_CHECKPOINT, IOD_OBJ_CHECKPOINT_REPLICA);
	const char *old_node = old ? json_string_value(json_object_get(old, k_node)) : NULL;
	if (old && !str_eq(old_node, id->name))
		return deny(d, 403, id, rq, "checkpoint belongs to node %s",
		            old_node ? old_node : "(none)");
	if (rq->verb == IOD_SEC_VERB_DELETE)
		return old ? allow(d) : deny(d, 403, id, rq, "no such checkpoint of this node");
	if (rq->verb != IOD_SEC_VERB_PUT)
		return deny(d, 403, id, rq, "nodes put or delete checkpoints only");
	const json_t *v = rq->value;
	if (!v || !str_eq(json_string_value(json_object_get(v, k_node)), id->name))
		return deny(d, 403, id, rq, "a checkpoint it writes must name node %s", id->name);
	const char *rep = json_string_value(json_object_get(v, k_rep));
	const json_t *rv = value_of(rq, IOD_STATE_REPLICA, rep);
	if (!rv || !str_eq(rep_str(rv, IOD_OBJ_REPLICA_NODE), id->name))
		return deny(d, 403, id, rq, "replica %s does not run on this node",
		            rep ? rep : "(none)");
	return allow(d);
}

/* A node writing an XferPeer: one of a replica placed on it, which names
 * this node and the replica's own service and ordinal. */
static int node_xferpeer(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                         struct iod_sec_decision *d)
{
	const enum iod_obj_kind K = IOD_OBJ_KIND_XFERPEER;
	const json_t *old = value_of(rq, IOD_STATE_XFERPEER, rq->name);
	const char *old_node = iod_obj_peek_str(K, old, IOD_OBJ_XFERPEER_NODE);
	if (old && !str_eq(old_node, id->name))
		return deny(d, 403, id, rq, "xferpeer belongs to node %s",
		            old_node ? old_node : "(none)");
	if (rq->verb == IOD_SEC_VERB_DELETE)
		return old ? allow(d) : deny(d, 403, id, rq, "no such xferpeer of this node");
	if (rq->verb != IOD_SEC_VERB_PUT)
		return deny(d, 403, id, rq, "nodes put or delete xferpeers only");
	const json_t *v = rq->value;
	if (!str_eq(iod_obj_peek_str(K, v, IOD_OBJ_XFERPEER_NODE), id->name))
		return deny(d, 403, id, rq, "an xferpeer it writes must name node %s", id->name);
	const char *rep = iod_obj_peek_str(K, v, IOD_OBJ_XFERPEER_REPLICA);
	const json_t *rv = value_of(rq, IOD_STATE_REPLICA, rep);
	if (!rv || !str_eq(rep_str(rv, IOD_OBJ_REPLICA_NODE), id->name))
		return deny(d, 403, id, rq, "replica %s does not run on this node",
		            rep ? rep : "(none)");
	int64_t ord = -1, rord = 0;
	char want[IOD_NAME_MAX + 16];
	const char *svc = rep_str(rv, IOD_OBJ_REPLICA_SERVICE);
	iod_obj_peek_int(K, v, IOD_OBJ_XFERPEER_ORDINAL, &ord);
	iod_obj_peek_int(IOD_OBJ_KIND_REPLICA, rv, IOD_OBJ_REPLICA_ORDINAL, &rord);
	snprintf(want, sizeof(want), "%s.%lld", svc ? svc : "", (long long)rord);
	if (!str_eq(iod_obj_peek_str(K, v, IOD_OBJ_XFERPEER_SERVICE), svc) || ord != rord ||
	    !str_eq(rq->name, want))
		return deny(d, 403, id, rq, "replica %s publishes only as xferpeer/%s", rep, want);
	return allow(d);
}

/* A node touching a lease: its own Node's, or one no node holds. */
static int node_lease(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                      struct iod_sec_decision *d)
{
	if (rq->verb == IOD_SEC_VERB_CREATE || !rq->name || !rq->name[0] || !rq->state)
		return allow(d);
	json_t *mine = iod_state_get(rq->state, IOD_STATE_NODE, id->name);
	json_int_t want = 0;
	char want_s[24];
	bool ok = false;
	if (mine) {
		snprintf(want_s, sizeof(want_s), "%lld",
		         (long long)json_integer_value(json_object_get(mine, "lease")));
		ok = !strcmp(want_s, rq->name);
		json_decref(mine);
	}
	if (ok)
		return allow(d);
	/* held by another node? (leases are few; nodes are listed rarely here) */
	json_t *list = iod_state_list(rq->state, IOD_STATE_NODE);
	size_t i;
	json_t *x;
	const char *holder = NULL;
	json_array_foreach(json_object_get(list, "items"), i, x)
	{
		want = json_integer_value(json_object_get(x, "lease"));
		snprintf(want_s, sizeof(want_s), "%lld", (long long)want);
		if (want && !strcmp(want_s, rq->name)) {
			holder = json_string_value(json_object_get(x, "name"));
			break;
		}
	}
	int rc =
	    holder ? deny(d, 403, id, rq, "lease %s is node %s's", rq->name, holder) : allow(d);
	json_decref(list);
	return rc;
}

/* Does the service of replica rep (on node me) mount secret name? */
static bool replica_mounts(const struct iod_sec_request *rq, const char *me, const char *rep,
                           const char *secret)
{
	const json_t *rv = value_of(rq, IOD_STATE_REPLICA, rep);
	if (!rv || !str_eq(rep_str(rv, IOD_OBJ_REPLICA_NODE), me))
		return false;
	const json_t *sv = value_of(rq, IOD_STATE_SERVICE, rep_str(rv, IOD_OBJ_REPLICA_SERVICE));
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(sv, "secrets"), i, x)
	{
		const char *n = json_is_string(x) ? json_string_value(x) : str_of(x, "name");
		if (str_eq(n, secret))
			return true;
	}
	return false;
}

/*
 * May node me hold the SVID of subject (a service identity)? Only while a
 * replica of that service is placed on it, and only in the service's own
 * tenant: the node's proxy presents it for that replica's calls, so a node
 * can speak for the services it runs and for no one else.
 */
static bool node_runs_service(const struct iod_sec_request *rq, const char *me,
                              const struct iod_sec_identity *subject)
{
	const json_t *sv = value_of(rq, IOD_STATE_SERVICE, subject->name);
	const char *tenant = iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, sv, IOD_OBJ_SERVICE_TENANT);
	if (!sv || !str_eq(tenant && tenant[0] ? tenant : "default", subject->tenant))
		return false;
	json_t *list = iod_state_list(rq->state, IOD_STATE_REPLICA);
	size_t i;
	json_t *x;
	bool ok = false;
	json_array_foreach(json_object_get(list, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		if (str_eq(rep_str(v, IOD_OBJ_REPLICA_NODE), me) &&
		    str_eq(rep_str(v, IOD_OBJ_REPLICA_SERVICE), subject->name)) {
			ok = true;
			break;
		}
	}
	json_decref(list);
	return ok;
}

/*
 * A replica's own credentials (its service's SVID, handed to it by its
 * agent, docs/storage.md "Replica credentials"): the replica of rep, if
 * it is a replica of the identity's service in the identity's tenant.
 */
static const json_t *service_replica(const struct iod_sec_identity *id,
                                     const struct iod_sec_request *rq, const char *rep)
{
	const json_t *rv = rep ? value_of(rq, IOD_STATE_REPLICA, rep) : NULL;
	if (!rv || !str_eq(rep_str(rv, IOD_OBJ_REPLICA_SERVICE), id->name))
		return NULL;
	const json_t *sv = value_of(rq, IOD_STATE_SERVICE, id->name);
	const char *tenant = iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, sv, IOD_OBJ_SERVICE_TENANT);
	return sv && str_eq(tenant && tenant[0] ? tenant : "default", id->tenant) ? rv : NULL;
}

/*
 * What a service identity may write for one of its replicas (a Checkpoint
 * or an XferPeer, `noun`): an existing object must be one of its own
 * service's replicas', which it may delete; otherwise only PUT, of a value
 * whose `rep_f` names a replica of its own service. 1 with *rv the replica
 * when a PUT passed these (the caller checks the rest); else the
 * decision's 0 or -EACCES.
 */
static int service_owned(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                         struct iod_sec_decision *d, enum iod_state_kind sk, enum iod_obj_kind k,
                         unsigned rep_f, const char *noun, const json_t **rv)
{
	const json_t *old = value_of(rq, sk, rq->name);
	const char *old_rep = iod_obj_peek_str(k, old, rep_f);
	if (old && !service_replica(id, rq, old_rep))
		return deny(d, 403, id, rq, "%s belongs to replica %s of another service", noun,
		            old_rep ? old_rep : "(none)");
	if (rq->verb == IOD_SEC_VERB_DELETE)
		return old ? allow(d) : deny(d, 403, id, rq, "no such %s of this service", noun);
	if (rq->verb != IOD_SEC_VERB_PUT)
		return deny(d, 403, id, rq, "services put or delete %ss only", noun);
	const char *rep = iod_obj_peek_str(k, rq->value, rep_f);
	if (!(*rv = service_replica(id, rq, rep)))
		return deny(d, 403, id, rq, "replica %s is not a replica of service %s/%s",
		            rep ? rep : "(none)", id->tenant, id->name);
	return 1;
}

/* A service writing a checkpoint manifest: one of a replica of its own
 * service, naming that service and the node the replica runs on. */
static int service_checkpoint(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                              struct iod_sec_decision *d)
{
	const json_t *rv = NULL;
	const enum iod_obj_kind K = IOD_OBJ_KIND_CHECKPOINT;
	const json_t *v = rq->value;
	int rc = service_owned(id, rq, d, IOD_STATE_CHECKPOINT, K, IOD_OBJ_CHECKPOINT_REPLICA,
	                       "checkpoint", &rv);
	if (rc != 1)
		return rc;
	if (!str_eq(iod_obj_peek_str(K, v, IOD_OBJ_CHECKPOINT_SERVICE), id->name))
		return deny(d, 403, id, rq, "a checkpoint it writes must name service %s",
		            id->name);
	const char *rep = iod_obj_peek_str(K, v, IOD_OBJ_CHECKPOINT_REPLICA);
	const char *on = rep_str(rv, IOD_OBJ_REPLICA_NODE);
	if (!str_eq(iod_obj_peek_str(K, v, IOD_OBJ_CHECKPOINT_NODE), on))
		return deny(d, 403, id, rq, "a checkpoint of %s must name its node %s", rep,
		            on ? on : "(none)");
	return allow(d);
}

/* A service writing an XferPeer: the one of a replica of its own service,
 * under that replica's service.ordinal, naming the node it runs on. */
static int service_xferpeer(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                            struct iod_sec_decision *d)
{
	const enum iod_obj_kind K = IOD_OBJ_KIND_XFERPEER;
	const json_t *rv = NULL, *v = rq->value;
	int rc = service_owned(id, rq, d, IOD_STATE_XFERPEER, K, IOD_OBJ_XFERPEER_REPLICA,
	                       "xferpeer", &rv);
	if (rc != 1)
		return rc;
	const char *rep = iod_obj_peek_str(K, v, IOD_OBJ_XFERPEER_REPLICA);
	const char *on = rep_str(rv, IOD_OBJ_REPLICA_NODE);
	if (!str_eq(iod_obj_peek_str(K, v, IOD_OBJ_XFERPEER_NODE), on))
		return deny(d, 403, id, rq, "an xferpeer of %s must name its node %s", rep,
		            on ? on : "(none)");
	int64_t ord = -1, rord = 0;
	char want[IOD_NAME_MAX + 16];
	iod_obj_peek_int(K, v, IOD_OBJ_XFERPEER_ORDINAL, &ord);
	iod_obj_peek_int(IOD_OBJ_KIND_REPLICA, rv, IOD_OBJ_REPLICA_ORDINAL, &rord);
	snprintf(want, sizeof(want), "%s.%lld", id->name, (long long)rord);
	if (!str_eq(iod_obj_peek_str(K, v, IOD_OBJ_XFERPEER_SERVICE), id->name) || ord != rord ||
	    !str_eq(rq->name, want))
		return deny(d, 403, id, rq, "replica %s publishes only as xferpeer/%s", rep, want);
	return allow(d);
}

/*
 * A service identity at the API: what its replicas need for checkpoints
 * and transfer peers, nothing more. It reads Checkpoint and XferPeer
 * objects (the metadata a viewer reads too) and writes only those of its
 * own service's replicas; every other resource is the mesh's business.
 */
static int authorize_service(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                             struct iod_sec_decision *d)
{
	enum iod_sec_resource r = rq->res;
	if (r != IOD_SEC_RES_CHECKPOINT && r != IOD_SEC_RES_XFERPEER)
		return deny(d, 403, id, rq,
		            "service identities are for the mesh, not the API (a replica "
		            "may touch only its service's checkpoints and xferpeers)");
	if (is_read(rq->verb))
		return rq->verb == IOD_SEC_VERB_WATCH
		           ? deny(d, 403, id, rq, "services read, they do not watch")
		           : allow(d);
	return r == IOD_SEC_RES_CHECKPOINT ? service_checkpoint(id, rq, d)
	                                   : service_xferpeer(id, rq, d);
}

static int authorize_node(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                          struct iod_sec_decision *d)
{
	enum iod_sec_resource r = rq->res;
	if (is_read(rq->verb)) {
		if (r == IOD_SEC_RES_SECRET_VALUE) {
			/* rq->value: {"replica": NAME} the secret is for */
			const char *rep = str_of(rq->value, "replica");
			if (rep && replica_mounts(rq, id->name, rep, rq->name))
				return allow(d);
			return deny(d, 403, id, rq,
			            "no replica on this node (%s) mounts this secret",
			            rep ? rep : "none named");
		}
		if (iod_sec_resource_sensitive(r) || r == IOD_SEC_RES_CERTIFICATE)
			return deny(d, 403, id, rq, "nodes do not read %s objects",
			            iod_sec_resource_name(r));
		return allow(d);
	}
	switch (r) {
	case IOD_SEC_RES_NODE:
		if (rq->verb == IOD_SEC_VERB_PUT || rq->verb == IOD_SEC_VERB_DELETE) {
			if (str_eq(rq->name, id->name))
				return allow(d);
			return deny(d, 403, id, rq, "a node writes only its own Node object (%s)",
			            id->name);
		}
		break;
	case IOD_SEC_RES_CONFIG:
		/* iod config: a node acknowledges in config/ack.<its name> only */
		if ((rq->verb == IOD_SEC_VERB_PUT || rq->verb == IOD_SEC_VERB_DELETE) && rq->name &&
		    !strncmp(rq->name, "ack.", 4) && str_eq(rq->name + 4, id->name))
			return allow(d);
		return deny(d, 403, id, rq, "a node writes only config/ack.%s", id->name);
	case IOD_SEC_RES_REPLICA: return node_replica(id, rq, d);
	case IOD_SEC_RES_ENDPOINT: return node_endpoint(id, rq, d);
	case IOD_SEC_RES_CHECKPOINT: return node_checkpoint(id, rq, d);
	case IOD_SEC_RES_XFERPEER: return node_xferpeer(id, rq, d);
	case IOD_SEC_RES_LEASE: return node_lease(id, rq, d);
	case IOD_SEC_RES_CERTIFICATE:
		/* rotation: a new certificate for itself; and the SVIDs of the
		 * services it runs, for its mesh proxy */
		if (rq->subject && rq->subject->kind == IOD_SEC_KIND_NODE &&
		    str_eq(rq->subject->name, id->name))
			return allow(d);
		if (rq->subject && rq->subject->kind == IOD_SEC_KIND_SERVICE && rq->state) {
			if (node_runs_service(rq, id->name, rq->subject))
				return allow(d);
			return deny(d, 403, id, rq,
			            "no replica of service %s/%s runs on this node: a node "
			            "holds only the SVIDs of the services it runs",
			            rq->subject->tenant, rq->subject->name);
		}
		return deny(d, 403, id, rq,
		            "a node may renew only its own certificate and get its services' "
		            "SVIDs");
	default: break;
	}
	return deny(d, 403, id, rq, "nodes may not %s %s objects", iod_sec_verb_name(rq->verb),
	            iod_sec_resource_name(r));
}

int iod_sec_authorize(const struct iod_sec_identity *id, const struct iod_sec_request *rq,
                      struct iod_sec_decision *d)
{
	enum iod_sec_resource r = rq->res;

	IOD_ASSERT((unsigned)r < IOD_SEC_RES_COUNT);
	if (id->kind == IOD_SEC_KIND_ANONYMOUS)
		return deny(d, 401, id, rq,
		            "present a client certificate or a bearer token (`iod token create`, "
		            "`iod init` writes an admin credential to the client config)");
	if (revoked(id, rq->state))
		return deny(d, 401, id, rq, "its credential is revoked (`iod revoke`)");
	/* nobody gets a new certificate for a revoked identity (a join token
	 * for the name of a revoked node, a node renewing after its revocation) */
	if (r == IOD_SEC_RES_CERTIFICATE && rq->subject && revoked(rq->subject, rq->state))
		return deny(d, 403, id, rq, "%s %s is revoked (`iod revoke --undo` lifts it)",
		            iod_sec_kind_name(rq->subject->kind), rq->subject->name);
	switch (id->kind) {
	case IOD_SEC_KIND_BOOTSTRAP:
		/* a join token buys one thing: a node certificate */
		if (r == IOD_SEC_RES_CERTIFICATE && rq->verb == IOD_SEC_VERB_CREATE &&
		    rq->subject && rq->subject->kind == IOD_SEC_KIND_NODE) {
			if (id->name[0] && !str_eq(id->name, rq->subject->name))
				return deny(d, 403, id, rq, "this join token is for node %s only",
				            id->name);
			return allow(d);
		}
		return deny(d, 403, id, rq,
		            "a join token only buys a node certificate (`iod agent --join-token`)");
	case IOD_SEC_KIND_NODE: return authorize_node(id, rq, d);
	case IOD_SEC_KIND_SERVER:
		if (is_read(rq->verb) && (r == IOD_SEC_RES_STATUS || r == IOD_SEC_RES_METRICS ||
		                          r == IOD_SEC_RES_MEMBER))
			return allow(d);
		/* a server joining adds itself */
		if (r == IOD_SEC_RES_MEMBER && rq->verb == IOD_SEC_VERB_CREATE &&
		    str_eq(rq->name, id->name))
			return allow(d);
		return deny(d, 403, id, rq, "servers only read status and join as themselves");
	case IOD_SEC_KIND_SERVICE: return authorize_service(id, rq, d);
	case IOD_SEC_KIND_USER: break;
	default: return deny(d, 401, id, rq, "unknown identity kind");
	}
	if (r == IOD_SEC_RES_SECRET_VALUE)
		return deny(d, 403, id, rq, "secret values go only to the nodes that mount them");
	enum iod_sec_role need = is_read(rq->verb) ? people[r].read : people[r].write;
	if (need == IOD_SEC_ROLE_NONE)
		return deny(d, 403, id, rq, "nobody may %s this", iod_sec_verb_name(rq->verb));
	if (rank(id->role) < rank(need))
		return deny(d, 403, id, rq, "needs role %s", iod_sec_role_name(need));
	return allow(d);
}
