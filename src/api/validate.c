/*
 * validate.c: objects written through the generic object API
 * (PUT /v1/<kind>/<name>) pass the checks a deploy would make, so a raw PUT
 * cannot smuggle in what /v1/deploy refuses (issue 16's finding: a Service
 * plus a Replica written by hand ran a command no spec had validated).
 *
 *   Service  its value, minus what the deploy adds (generation, gpu,
 *            version), must load as a one-service spec (the spec loader
 *            with every rule it has), under the object's own name;
 *   Replica  must name a Service that exists, an ordinal inside it, and a
 *            node that exists (or none);
 *   Policy   must parse as a service policy (src/sec/policy.c).
 *   NetPolicy  must pass iod_obj_netpolicy_check (every rule parses); when
 *            its service is deployed, its tenant must be the service's (a
 *            tenant guards only its own services), and so must every peer
 *            service a rule names that is deployed.
 *   Checkpoint  must read as a typed Checkpoint (every field of its type
 *            and bounds), name a deployed service and a registered node,
 *            and hold at least min_size copies (a manifest is committed
 *            only once the write quorum holds its chunks, docs/storage.md).
 *
 * Pure: reads the state and the value; no I/O.
 */
#include "validate.h"

#include "iod/objects.h"
#include "iod/sec.h"
#include "iod/spec.h"

#include <stdlib.h>
#include <string.h>

static int service(const char *name, const json_t *v, json_t **answer, struct iod_err *e)
{
	struct iod_spec_diags *d = calloc(1, sizeof(*d));
	struct iod_spec *sp = NULL;
	const char *n = NULL;
	int rc;

	if (!d)
		return iod_err_set(e, -ENOMEM, "out of memory");
	if (json_object_get(v, "name") && (iod_json_get_str(v, "name", &n) || strcmp(n, name))) {
		free(d);
		return iod_err_set(e, -EINVAL, "service/%s: its value's \"name\" must be \"%s\"",
		                   name, name);
	}
	/* the same check the node agents make before they run it (one home:
	 * iod_spec_load_service; depends_on names other stored services) */
	rc = iod_spec_load_service(name, v, &sp, d);
	if (rc) {
		json_t *errs = json_array();
		for (uint32_t i = 0; i < d->n; i++)
			json_array_append_new(errs, json_pack("{s:s}", "message", d->d[i].msg));
		*answer = json_pack("{s:o, s:i}", "errors", errs, "error_count", d->total);
		iod_err_set(e, -EINVAL,
		            "service/%s does not pass the spec's validation (as /v1/deploy would "
		            "check it): %s",
		            name, d->n ? d->d[0].msg : "?");
		free(d);
		return -EINVAL;
	}
	iod_spec_free(sp);
	free(d);
	return 0;
}

static int replica(const struct iod_state *st, const char *name, const json_t *v, struct iod_err *e)
{
	const char *svc = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_SERVICE);
	const char *node = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
	const json_t *sv;
	int64_t ordinal;

	if (!svc || !(sv = iod_state_value(st, IOD_STATE_SERVICE, svc)))
		return iod_err_set(
		    e, -EINVAL,
		    "replica/%s must name a deployed service (\"service\"): a replica "
		    "runs its service's validated spec, nothing else",
		    name);
	if (iod_obj_peek_int(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_ORDINAL, &ordinal) == -EINVAL)
		return iod_err_set(e, -EINVAL, "replica/%s: \"ordinal\" must be 0..%d", name,
		                   IOD_SPEC_REPLICAS_MAX - 1);
	/* a replica may keep naming the node it is stored on after that node is
	 * gone: the rescheduler marks a stateful one "lost" there before it
	 * moves it (placing one on an unregistered node is what is refused) */
	const json_t *was = iod_state_value(st, IOD_STATE_REPLICA, name);
	const char *was_on =
	    was ? iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, was, IOD_OBJ_REPLICA_NODE) : NULL;
	if (node && node[0] && !iod_state_value(st, IOD_STATE_NODE, node) &&
	    !(was_on && !strcmp(was_on, node)))
		return iod_err_set(e, -EINVAL, "replica/%s: node %s is not registered", name, node);
	/* its tenant is its service's (the identity its SVID and policies use) */
	const char *t = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_TENANT);
	const char *st_t = iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, sv, IOD_OBJ_SERVICE_TENANT);
	if (!st_t || !st_t[0])
		st_t = "default";
	if (t && strcmp(t, st_t))
		return iod_err_set(e, -EINVAL,
		                   "replica/%s: \"tenant\" %s is not its service's (%s)", name, t,
		                   st_t);
	return 0;
}

/* Copies listed as holding every chunk ({"node": N, "ok": true}). */
static uint32_t held(const json_t *copies)
{
	uint32_t n = 0;
	size_t i;
	const json_t *x;
	json_array_foreach(copies, i, x) n += json_is_true(json_object_get(x, "ok"));
	return n;
}

static int checkpoint(const struct iod_state *st, const char *name, const json_t *v,
                      struct iod_err *e)
{
	struct iod_obj_checkpoint c;
	int rc = iod_obj_checkpoint_from_json(v, &c, e);
	if (rc) {
		iod_err_wrap(e, "checkpoint/%s", name);
		iod_obj_checkpoint_free(&c);
		return -EINVAL;
	}
	if (!c.service[0] || !iod_state_value(st, IOD_STATE_SERVICE, c.service))
		rc = iod_err_set(e, -EINVAL, "checkpoint/%s must name a deployed service", name);
	else if (!c.node[0] || !iod_state_value(st, IOD_STATE_NODE, c.node))
		rc = iod_err_set(e, -EINVAL, "checkpoint/%s: node \"%s\" is not registered", name,
		                 c.node);
	else if (!iod_obj_has(&c, IOD_OBJ_CHECKPOINT_STEP))
		rc = iod_err_set(e, -EINVAL, "checkpoint/%s needs its \"step\"", name);
	else if (c.min_size > c.replicas)
		rc = iod_err_set(e, -EINVAL, "checkpoint/%s: min_size %u above replicas %u", name,
		                 c.min_size, c.replicas);
	else if (held(c.copies) < c.min_size)
		rc =
		    iod_err_set(e, -EINVAL,
		                "checkpoint/%s: %u copies hold its chunks, the write quorum is %u; "
		                "commit a checkpoint only once the quorum holds them",
		                name, held(c.copies), c.min_size);
	iod_obj_checkpoint_free(&c);
	return rc;
}

/* The tenant of a deployed service ("default" when it names none); NULL
 * when it is not deployed. */
static const char *service_tenant(const struct iod_state *st, const char *svc)
{
	const json_t *sv = iod_state_value(st, IOD_STATE_SERVICE, svc);
	if (!sv)
		return NULL;
	const char *t = iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, sv, IOD_OBJ_SERVICE_TENANT);
	return t && t[0] ? t : "default";
}

static int netpolicy(const struct iod_state *st, const char *name, const json_t *v,
                     struct iod_err *e)
{
	struct iod_obj_netpolicy p;
	int rc = iod_obj_netpolicy_from_json(v, &p, e);
	if (!rc)
		rc = iod_obj_netpolicy_check(&p, e);
	const char *tenant = p.tenant[0] ? p.tenant : "default";
	const char *st_t = rc ? NULL : service_tenant(st, p.service);
	if (st_t && strcmp(st_t, tenant))
		rc = iod_err_set(e, -EINVAL,
		                 "service %s is tenant %s's; a policy of tenant %s cannot guard it",
		                 p.service, st_t, tenant);
	const json_t *dirs[2] = {p.ingress, p.egress};
	for (int d = 0; d < 2 && !rc; d++)
		for (size_t i = 0; i < json_array_size(dirs[d]) && !rc; i++) {
			struct iod_obj_netpolicy_rule r;
			if (iod_obj_netpolicy_rule_parse(json_array_get(dirs[d], i), &r, NULL) ||
			    !r.peer[0])
				continue;
			const char *pt = service_tenant(st, r.peer);
			if (pt && strcmp(pt, tenant))
				rc = iod_err_set(
				    e, -EINVAL,
				    "rule %s: peer service %s is tenant %s's, not %s's "
				    "(peers are services of the same tenant; use a cidr "
				    "for anything else)",
				    r.name, r.peer, pt, tenant);
		}
	iod_obj_netpolicy_free(&p);
	if (rc)
		iod_err_wrap(e, "netpolicy/%s", name);
	return rc ? -EINVAL : 0;
}

int iod_api_validate_put(const struct iod_state *st, enum iod_state_kind k, const char *name,
                         const json_t *v, json_t **answer, struct iod_err *e)
{
	*answer = NULL;
	switch (k) {
	case IOD_STATE_SERVICE: return service(name, v, answer, e);
	case IOD_STATE_REPLICA: return replica(st, name, v, e);
	case IOD_STATE_CHECKPOINT: return checkpoint(st, name, v, e);
	case IOD_STATE_POLICY: {
		struct iod_sec_policy_set *set = calloc(1, sizeof(*set));
		int rc;
		if (!set)
			return iod_err_set(e, -ENOMEM, "out of memory");
		rc = iod_sec_policy_parse(v, "default", set, e);
		free(set);
		return rc ? iod_err_set(e, -EINVAL, "policy/%s: %s", name, e->msg) : 0;
	}
	case IOD_STATE_XFERPEER: {
		struct iod_obj_xferpeer p;
		char want[IOD_NAME_MAX + 16];
		int rc = iod_obj_xferpeer_from_json(v, &p, e);
		if (!rc)
			rc = iod_obj_xferpeer_check(&p, e);
		if (!rc) {
			snprintf(want, sizeof(want), "%s.%u", p.service, p.ordinal);
			if (strcmp(name, want))
				rc = iod_err_set(e, -EINVAL,
				                 "it must be named %s (service.ordinal)", want);
			else if (!iod_state_value(st, IOD_STATE_SERVICE, p.service))
				rc = iod_err_set(e, -EINVAL, "service %s is not deployed",
				                 p.service);
		}
		iod_obj_xferpeer_free(&p);
		if (rc)
			iod_err_wrap(e, "xferpeer/%s", name);
		return rc ? -EINVAL : 0;
	}
	case IOD_STATE_NETPOLICY: return netpolicy(st, name, v, e);
	case IOD_STATE_FAULT: {
		struct iod_obj_fault f;
		int rc = iod_obj_fault_from_json(v, &f, e);
		if (!rc)
			rc = iod_obj_fault_check(&f, e);
		iod_obj_fault_free(&f);
		return rc ? iod_err_set(e, -EINVAL, "fault/%s: %s", name, e->msg) : 0;
	}
	default: return 0;
	}
}

int iod_api_spec_privileges(const struct iod_spec *spec, bool may_grant, struct iod_err *e)
{
	char why[200];
	for (uint32_t i = 0; spec && i < spec->services_n; i++) {
		if (!iod_spec_service_privileged(&spec->services[i], why, sizeof(why)) || may_grant)
			continue;
		return iod_err_set(e, -EACCES,
		                   "service \"%s\" %s: only the admin role may deploy a service "
		                   "with more than the default sandbox",
		                   spec->services[i].name, why);
	}
	return 0;
}
