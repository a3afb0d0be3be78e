/*
 * authz.c: who may call whom through the proxy (pure): the receiving
 * proxy's decision for one call, from the caller's identity and the
 * cluster's Policy objects (docs/security.md, "Zero trust between
 * services").
 *
 * The caller is known by the uid that owns its socket (peer.c: the kernel
 * records it and a replica cannot forge it); every replica runs under a uid
 * of its own, which its agent reports on its Endpoint, so a uid names a
 * replica and so a service identity spiffe://<cluster>/ns/<tenant>/svc/<s>.
 * The decision itself is src/sec's iod_sec_policy_decide. No I/O, no clock.
 */
#include "iod/mesh.h"

#include <stdlib.h>
#include <string.h>

static int caller_cmp(const void *k, const void *e)
{
	uint32_t a = *(const uint32_t *)k, b = ((const struct iod_mesh_caller *)e)->uid;
	return a < b ? -1 : a > b;
}

const struct iod_mesh_caller *iod_mesh_caller_find(const struct iod_mesh_registry *r, uint32_t uid)
{
	return r->callers_n
	           ? bsearch(&uid, r->callers, r->callers_n, sizeof(*r->callers), caller_cmp)
	           : NULL;
}

static bool revoked_has(const struct iod_mesh_registry *r, const char *key);

void iod_mesh_authz_decide(const struct iod_mesh_registry *r, bool peer_known, uint32_t peer_uid,
                           const struct iod_mesh_service *to, const char *method,
                           struct iod_sec_verdict *v)
{
	const char *to_tenant = to->tenant[0] ? to->tenant : "default";
	const struct iod_mesh_caller *c =
	    peer_known && r->callers_n
	        ? bsearch(&peer_uid, r->callers, r->callers_n, sizeof(*r->callers), caller_cmp)
	        : NULL;

	if (c) {
		const char *ct = c->tenant[0] ? c->tenant : "default";
		char key[IOD_NAME_MAX];
		/* `iod revoke service`: its replicas call no one, here or over mTLS */
		if (!iod_sec_revocation_key(IOD_SEC_KIND_SERVICE, ct, c->service, key,
		                            sizeof(key)) &&
		    revoked_has(r, key)) {
			memset(v, 0, sizeof(*v));
			v->allow = false;
			snprintf(v->policy, sizeof(v->policy), "revoked");
			snprintf(v->reason, sizeof(v->reason),
			         "denied: the caller's service %s/%s is revoked (`iod revoke`)", ct,
			         c->service);
			return;
		}
		iod_sec_policy_decide(r->policies, ct, c->service, to_tenant, to->name, method,
		                      to->port, v);
		return;
	}
	/* a process of the node: only "from: *" policies reach it */
	iod_sec_policy_decide(r->policies, "*", "*", to_tenant, to->name, method, to->port, v);
	if (!v->allow && !strcmp(v->policy, "default-cross-tenant")) {
		v->allow = true;
		snprintf(v->policy, sizeof(v->policy), "default-node");
		snprintf(v->reason, sizeof(v->reason),
		         "allowed: the caller is a process of this node, not a replica");
	}
}

static int revoked_cmp(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

static bool revoked_has(const struct iod_mesh_registry *r, const char *key)
{
	return r->revoked_n &&
	       bsearch(key, r->revoked, r->revoked_n, sizeof(*r->revoked), revoked_cmp);
}

bool iod_mesh_peer_revoked(const struct iod_mesh_registry *r, const struct iod_sec_cert_info *peer,
                           char *why, size_t why_len)
{
	char key[IOD_NAME_MAX];
	const struct iod_sec_identity *id = &peer->id;
	if (!r->revoked_n)
		return false;
	if (!iod_sec_revocation_key(id->kind, id->tenant, id->name, key, sizeof(key)) &&
	    revoked_has(r, key)) {
		if (why)
			snprintf(why, why_len, "%s is revoked (%s)",
			         id->kind == IOD_SEC_KIND_SERVICE ? "the service" : "the node",
			         key);
		return true;
	}
	/* an SVID speaks for its service on the node it was issued to: a
	 * revoked node's SVIDs go with it */
	if (id->kind == IOD_SEC_KIND_SERVICE && peer->node[0] &&
	    !iod_sec_revocation_key(IOD_SEC_KIND_NODE, NULL, peer->node, key, sizeof(key)) &&
	    revoked_has(r, key)) {
		if (why)
			snprintf(why, why_len, "the SVID was issued to node %s, which is revoked",
			         peer->node);
		return true;
	}
	return false;
}

int iod_mesh_revoked_set(struct iod_mesh_registry *r, const char *const *names, uint32_t n)
{
	free(r->revoked);
	r->revoked = NULL;
	r->revoked_n = 0;
	if (n > IOD_MESH_REVOKED_MAX)
		return -ENOSPC;
	if (n && !(r->revoked = calloc(n, sizeof(*r->revoked))))
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		if (names[i] && strlen(names[i]) < IOD_NAME_MAX)
			iod_strlcpy(r->revoked[r->revoked_n++], names[i], IOD_NAME_MAX);
	if (r->revoked_n)
		qsort(r->revoked, r->revoked_n, sizeof(*r->revoked), revoked_cmp);
	return 0;
}
