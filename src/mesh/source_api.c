/*
 * source_api.c: a registry source backed by the control plane: services and
 * endpoints come from the cluster API (GET /v1/services, /v1/endpoints;
 * docs/control-plane.md), so a node's proxy follows replicas as the agents
 * report them (address, node, health).
 *
 * Mapping: one mesh service per Service object. Its VIP port is the spec's
 * first port (default IOD_MESH_API_DEFAULT_PORT); a first port named "http"
 * or "http-*" makes it an L7 service (Istio's port-naming rule), anything
 * else L4. Endpoints are the Endpoint objects of that service (address,
 * node, health: include/iod/objects.h); racks come from Node objects' "rack" label when set.
 *
 * A shell piece: blocking HTTP GETs with a timeout, called from the proxy's
 * control thread (never from a worker). Each poll asks for the cluster
 * revision first and rebuilds only when it moved and the result differs.
 * wait() long-polls the API's watch from the revision the view was built
 * at, so a changed Endpoint (health) or Service reaches the proxy as a
 * push; callers still poll now and then as a fallback.
 */
#include "iod/mesh_proxy.h"
#include "iod/net.h"
#include "iod/objects.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A blocking GET through the one HTTP client (src/http/), given up after
 * timeout_ms, or within IOD_HTTP_STOP_SLICE_MS of *stop becoming non-zero
 * (-EINTR). With creds, over HTTPS to a server of the cluster
 * (docs/security.md), sending token when it is set. */
static int http_get(const char *addr, const char *path, uint32_t timeout_ms,
                    const volatile int *stop, struct iod_sec_tls_creds *creds, const char *token,
                    char **body, size_t *blen)
{
	struct iod_http_conn c;
	struct iod_http_response r;
	struct iod_err e = {0};
	iod_http_conn_init(&c);
	c.stop = stop;
	c.body_max = IOD_MESH_API_REPLY_MAX;
	c.creds = creds;
	c.token = token;
	*body = NULL;
	int rc = iod_http_request(&c, addr, "GET", path, NULL, NULL, NULL, 0, timeout_ms, &r, &e);
	iod_http_conn_close(&c);
	if (rc) {
		if (creds && rc != -EINTR)
			IOD_WARN("mesh", "control plane at %s: %s", addr, e.msg);
		return rc;
	}
	*body = r.body;
	*blen = r.len;
	return r.status;
}

static int get_json(struct iod_mesh_api_source *s, const char *path, json_t **out,
                    struct iod_err *e)
{
	char *body = NULL;
	size_t len = 0;
	int st = http_get(s->server, path, 2000, NULL, s->creds, s->token, &body, &len);
	if (st < 0)
		return iod_err_set(e, st, "control plane at %s: GET %s: %s", s->server, path,
		                   strerror(-st));
	if (st != 200) {
		free(body);
		return iod_err_set(e, -EIO, "control plane at %s: GET %s answered %d", s->server,
		                   path, st);
	}
	int rc = iod_json_parse(body, len, out, e);
	free(body);
	return rc;
}

/* The VIP port of a Service spec: its first port, else the default. */
static uint16_t spec_port(const json_t *v)
{
	const json_t *p0 = json_array_get(json_object_get(v, "ports"), 0);
	const json_t *pp = json_object_get(p0, "port");
	if (json_is_integer(p0))
		pp = p0;
	if (json_is_integer(pp) && json_integer_value(pp) > 0 && json_integer_value(pp) < 65536)
		return (uint16_t)json_integer_value(pp);
	return IOD_MESH_API_DEFAULT_PORT;
}

uint16_t iod_mesh_api_service_port(const json_t *value)
{
	return spec_port(value);
}

bool iod_mesh_api_service_l7(const json_t *value)
{
	const char *m =
	    json_string_value(json_object_get(json_object_get(value, "service_mesh"), "mode"));
	return m && !strcmp(m, "l7");
}

/* The overlay VIP of a Service value ("vip"); 0 when it has none. */
static uint32_t overlay_vip(const json_t *v)
{
	const char *a = iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, v, IOD_OBJ_SERVICE_VIP);
	uint32_t ip = 0;
	return a && !iod_net_ipv4_parse(a, &ip) ? ip : 0;
}

static void service_from_json(struct iod_mesh_service *svc, const char *name, const json_t *v)
{
	iod_mesh_service_defaults(svc);
	iod_strlcpy(svc->name, name, sizeof(svc->name));
	const char *tenant = iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, v, IOD_OBJ_SERVICE_TENANT);
	iod_strlcpy(svc->tenant, tenant && iod_sec_name_valid(tenant) ? tenant : "default",
	            sizeof(svc->tenant));
	svc->mode = iod_mesh_api_service_mode(v);
	svc->port = spec_port(v);
	/* the spec's service_mesh.transport (per service, or its top level);
	 * absent or unknown: the node's iod config value */
	const char *tp =
	    json_string_value(json_object_get(json_object_get(v, "service_mesh"), "transport"));
	if (iod_mesh_tp_want_parse(tp, &svc->transport))
		svc->transport = IOD_MESH_TP_UNSET;
}

enum iod_mesh_mode iod_mesh_api_service_mode(const json_t *value)
{
	const json_t *p0 = json_array_get(json_object_get(value, "ports"), 0);
	const char *pn = json_string_value(json_object_get(p0, "name"));
	return pn && (!strcmp(pn, "http") || iod_str_has_prefix(pn, "http-")) ? IOD_MESH_MODE_HTTP
	                                                                      : IOD_MESH_MODE_TCP;
}

static int addr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct iod_mesh_svc_addr *)a)->name,
	              ((const struct iod_mesh_svc_addr *)b)->name);
}

int iod_mesh_api_addrs(const json_t *services, struct iod_mesh_svc_addr *out, uint32_t max,
                       uint32_t *n)
{
	const char *names[IOD_MESH_SERVICES_MAX];
	uint16_t ports[IOD_MESH_SERVICES_MAX];
	uint32_t vips[IOD_MESH_SERVICES_MAX];
	const json_t *it;
	size_t i;

	*n = 0;
	json_array_foreach(json_object_get(services, "items"), i, it)
	{
		const char *name = json_string_value(json_object_get(it, "name"));
		if (!name || strlen(name) >= IOD_NAME_MAX)
			continue; /* iod_mesh_registry_add refuses it too */
		if (*n >= max || *n >= IOD_MESH_SERVICES_MAX)
			return -E2BIG;
		iod_strlcpy(out[*n].name, name, sizeof(out[*n].name));
		out[*n].port = spec_port(json_object_get(it, "value"));
		(*n)++;
	}
	qsort(out, *n, sizeof(*out), addr_cmp); /* the registry's order */
	for (uint32_t k = 0; k < *n; k++) {
		names[k] = out[k].name;
		ports[k] = out[k].port;
	}
	iod_mesh_vips_assign(names, ports, *n, vips);
	for (uint32_t k = 0; k < *n; k++)
		out[k].vip4 = vips[k];
	return 0;
}

/* A Node value's rack ("rack", else labels.rack), borrowed; NULL if none. */
static const char *node_rack(const json_t *v)
{
	const char *rack = iod_obj_peek_str(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_RACK);
	if (!rack)
		rack = json_string_value(json_object_get(
		    iod_obj_peek_json(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_LABELS), "rack"));
	return rack;
}

/* Endpoint object ep as the mesh's endpoint x, when it is one of service
 * name's and has an address. */
static bool endpoint_of(const json_t *ep, const char *name, struct iod_mesh_endpoint *x)
{
	struct iod_obj_endpoint eo;
	char addr[IOD_ADDR_MAX + 8];
	bool ok = false;
	iod_obj_endpoint_from_json(json_object_get(ep, "value"), &eo, NULL);
	iod_obj_endpoint_address(&eo, addr, sizeof(addr));
	memset(x, 0, sizeof(*x));
	if (iod_obj_has(&eo, IOD_OBJ_ENDPOINT_SERVICE) && !strcmp(eo.service, name) && addr[0] &&
	    !iod_mesh_addr_parse(addr, &x->ip4, &x->port, true)) {
		const char *rep = json_string_value(json_object_get(ep, "name"));
		iod_strlcpy(x->id, rep ? rep : addr, sizeof(x->id));
		iod_strlcpy(x->node, eo.node, sizeof(x->node));
		x->weight = 1;
		x->healthy = eo.healthy;
		ok = true;
	}
	iod_obj_endpoint_free(&eo);
	return ok;
}

static int caller_sort(const void *a, const void *b)
{
	uint32_t x = ((const struct iod_mesh_caller *)a)->uid,
	         y = ((const struct iod_mesh_caller *)b)->uid;
	return x < y ? -1 : x > y;
}

/*
 * Who may call whom: the Policy objects (each parsed as iod_sec_policy_parse
 * reads them; one that does not parse is skipped with a warning, the rest
 * still apply) and the callers the agents reported (an Endpoint's "uid" is
 * its replica's: the identity its connections carry).
 */
static int build_authz(json_t *svcs, json_t *eps, json_t *pols, struct iod_mesh_registry *out,
                       struct iod_err *e)
{
	const json_t *it;
	size_t i;

	free(out->policies);
	free(out->callers);
	out->policies = NULL;
	out->callers = NULL;
	out->callers_n = 0;
	out->authz = true;
	if (json_array_size(json_object_get(pols, "items"))) {
		if (!(out->policies = calloc(1, sizeof(*out->policies))))
			return iod_err_set(e, -ENOMEM, "out of memory");
		json_array_foreach(json_object_get(pols, "items"), i, it)
		{
			struct iod_err pe = {0};
			const char *name = json_string_value(json_object_get(it, "name"));
			if (iod_sec_policy_parse(json_object_get(it, "value"), "default",
			                         out->policies, &pe))
				IOD_WARN("mesh", "policy %s: %s (skipped)", name ? name : "?",
				         pe.msg);
		}
	}
	size_t n = json_array_size(json_object_get(eps, "items"));
	if (n && !(out->callers = calloc(n, sizeof(*out->callers))))
		return iod_err_set(e, -ENOMEM, "out of memory");
	json_array_foreach(json_object_get(eps, "items"), i, it)
	{
		const json_t *v = json_object_get(it, "value"), *u = json_object_get(v, "uid");
		const char *sn = json_string_value(json_object_get(v, "service"));
		if (!sn || !json_is_integer(u) || json_integer_value(u) <= 0 ||
		    json_integer_value(u) > UINT32_MAX)
			continue; /* no sandbox uid (root, --no-sandbox): not an identity */
		struct iod_mesh_caller *c = &out->callers[out->callers_n++];
		c->uid = (uint32_t)json_integer_value(u);
		iod_strlcpy(c->service, sn, sizeof(c->service));
		iod_strlcpy(c->tenant, "default", sizeof(c->tenant));
		const json_t *sv;
		size_t k;
		json_array_foreach(json_object_get(svcs, "items"), k, sv)
		{
			const char *t =
			    iod_obj_peek_str(IOD_OBJ_KIND_SERVICE, json_object_get(sv, "value"),
			                     IOD_OBJ_SERVICE_TENANT);
			if (t && iod_sec_name_valid(t) &&
			    json_string_value(json_object_get(sv, "name")) &&
			    !strcmp(json_string_value(json_object_get(sv, "name")), sn))
				iod_strlcpy(c->tenant, t, sizeof(c->tenant));
		}
	}
	if (out->callers_n)
		qsort(out->callers, out->callers_n, sizeof(*out->callers), caller_sort);
	/* a uid shared by replicas of different services (an agent that is not
	 * root runs them all as itself) names no one: drop it */
	uint32_t w = 0;
	for (uint32_t r = 0; r < out->callers_n;) {
		uint32_t q = r + 1;
		bool same = true;
		while (q < out->callers_n && out->callers[q].uid == out->callers[r].uid) {
			same &= !strcmp(out->callers[q].service, out->callers[r].service);
			q++;
		}
		if (same)
			out->callers[w++] = out->callers[r];
		r = q;
	}
	out->callers_n = w;
	return 0;
}

/* x's node's proxy's mTLS listener, when x is on another node that has one. */
static void endpoint_mtls(const struct iod_mesh_api_source *s, const char *nn, const json_t *nv,
                          struct iod_mesh_endpoint *x)
{
	if (!s->mtls || !nn || strcmp(nn, x->node) || !strcmp(x->node, s->node))
		return;
	const char *a = iod_obj_peek_str(IOD_OBJ_KIND_NODE, nv, IOD_OBJ_NODE_MESH_MTLS);
	if (a && a[0] && iod_mesh_addr_parse(a, &x->mtls_ip4, &x->mtls_port, true)) {
		x->mtls_ip4 = 0;
		x->mtls_port = 0;
	}
}

/*
 * The Fault objects (`iod chaos delay|abort service/NAME`), each read and
 * checked once per view; one that does not check is skipped with a
 * warning. *n of them, NULL when there are none (or out of memory: no
 * faults is the safe side).
 */
static struct iod_obj_fault *faults_read(const json_t *faults, size_t *n)
{
	size_t cap = json_array_size(json_object_get(faults, "items"));
	struct iod_obj_fault *out = cap ? calloc(cap, sizeof(*out)) : NULL;
	const json_t *it;
	size_t i;
	*n = 0;
	if (!out)
		return NULL;
	json_array_foreach(json_object_get(faults, "items"), i, it)
	{
		struct iod_err fe = {0};
		struct iod_obj_fault *f = &out[*n];
		int rc = iod_obj_fault_from_json(json_object_get(it, "value"), f, &fe);
		if (!rc)
			rc = iod_obj_fault_check(f, &fe);
		if (rc) {
			IOD_WARN("mesh", "fault %s: %s (skipped)",
			         json_string_value(json_object_get(it, "name")), fe.msg);
			iod_obj_fault_free(f); /* the slot is used again */
		} else {
			(*n)++;
		}
	}
	return out;
}

static void faults_free(struct iod_obj_fault *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		iod_obj_fault_free(&f[i]);
	free(f);
}

/* Service svc's faults into svc->fault. Of several delays (or aborts) for
 * one service, the one that ends last wins. Expired ones are copied too:
 * the proxy compares their end with its clock. */
static void apply_faults(struct iod_mesh_service *svc, const struct iod_obj_fault *faults, size_t n)
{
	struct iod_mesh_fault *f = &svc->fault;
	memset(f, 0, sizeof(*f));
	for (size_t i = 0; i < n; i++) {
		const struct iod_obj_fault *fo = &faults[i];
		uint64_t until = fo->until_ms * IOD_NS_PER_MS;
		if (strcmp(fo->service, svc->name))
			continue;
		if (!strcmp(fo->action, "delay") && until > f->delay_until_ns) {
			f->delay_pct = fo->percent;
			f->delay_ns = (uint64_t)fo->delay_ms * IOD_NS_PER_MS;
			f->delay_until_ns = until;
		} else if (!strcmp(fo->action, "abort") && until > f->abort_until_ns) {
			f->abort_pct = fo->percent;
			f->abort_status = (uint16_t)fo->status;
			f->abort_until_ns = until;
		}
	}
}

static int build(struct iod_mesh_api_source *s, json_t *svcs, json_t *eps, json_t *nodes,
                 const struct iod_obj_fault *faults, size_t nfaults, struct iod_mesh_registry *out,
                 struct iod_err *e)
{
	static struct iod_mesh_service svc;
	const json_t *it;
	size_t i;

	out->svcs_n = 0;
	iod_strlcpy(out->node, s->node, sizeof(out->node));
	out->rack[0] = 0;
	json_array_foreach(json_object_get(svcs, "items"), i, it)
	{
		const char *name = json_string_value(json_object_get(it, "name"));
		if (!name)
			continue;
		service_from_json(&svc, name, json_object_get(it, "value"));
		if (s->overlay) { /* iod's overlay: its VIP; a listener when l7 */
			svc.vip4 = overlay_vip(json_object_get(it, "value"));
			if (!svc.vip4)
				continue;
			svc.no_listen = !iod_mesh_api_service_l7(json_object_get(it, "value"));
		}
		const json_t *ep;
		size_t k;
		json_array_foreach(json_object_get(eps, "items"), k, ep)
		{
			struct iod_mesh_endpoint *x = &svc.eps[svc.eps_n];
			if (svc.eps_n >= IOD_MESH_ENDPOINTS_MAX || !endpoint_of(ep, name, x))
				continue;
			const char *node = x->node[0] ? x->node : NULL;
			const json_t *nd;
			size_t q;
			json_array_foreach(json_object_get(nodes, "items"), q, nd)
			{
				const char *nn = json_string_value(json_object_get(nd, "name"));
				const char *rack = node_rack(json_object_get(nd, "value"));
				if (nn && node && !strcmp(nn, node) && rack)
					iod_strlcpy(x->rack, rack, sizeof(x->rack));
				if (node)
					endpoint_mtls(s, nn, json_object_get(nd, "value"), x);
				if (nn && !strcmp(nn, s->node) && rack)
					iod_strlcpy(out->rack, rack, sizeof(out->rack));
			}
			svc.eps_n++;
		}
		apply_faults(&svc, faults, nfaults);
		int rc = iod_mesh_registry_add(out, &svc, e);
		if (rc)
			return rc;
	}
	iod_mesh_registry_assign_vips(out);
	return 0;
}

/* The Revocation objects by name (`iod revoke`): mTLS peers they name are
 * refused (proxy_mtls.c). */
static int build_revoked(json_t *revs, struct iod_mesh_registry *out, struct iod_err *e)
{
	const json_t *items = json_object_get(revs, "items"), *it;
	size_t n = json_array_size(items), i;
	const char **names = n ? calloc(n, sizeof(*names)) : NULL;
	if (n && !names)
		return iod_err_set(e, -ENOMEM, "out of memory");
	json_array_foreach(items, i, it) names[i] = json_string_value(json_object_get(it, "name"));
	int rc = iod_mesh_revoked_set(out, names, (uint32_t)IOD_MIN(n, (size_t)UINT32_MAX));
	free(names);
	if (rc)
		return iod_err_set(e, rc, "revocations: %s", strerror(-rc));
	return 0;
}

static int api_poll(void *ctx, uint64_t have, struct iod_mesh_registry *out, struct iod_err *e)
{
	struct iod_mesh_api_source *s = ctx;
	json_t *svcs = NULL, *eps = NULL, *nodes = NULL, *pols = NULL, *faults = NULL, *revs = NULL;
	uint64_t rev = 0;
	int rc;

	if ((rc = get_json(s, "/v1/services", &svcs, e)))
		return rc;
	iod_json_get_u64(svcs, "rev", &rev);
	if (rev > s->watch_rev)
		s->watch_rev = rev; /* later changes come from the watch */
	if (rev && rev == s->rev && have == s->version) {
		json_decref(svcs);
		return -EAGAIN;
	}
	if ((rc = get_json(s, "/v1/endpoints", &eps, e)) ||
	    (rc = get_json(s, "/v1/nodes", &nodes, e)) ||
	    (rc = get_json(s, "/v1/policies", &pols, e)) ||
	    (rc = get_json(s, "/v1/revocations", &revs, e)))
		goto out;
	/* faults: a server from before them answers 404 (an unknown kind): none */
	struct iod_err fe = {0};
	if (get_json(s, "/v1/faults", &faults, &fe))
		faults = NULL;
	size_t nfaults = 0;
	struct iod_obj_fault *fv = faults_read(faults, &nfaults);
	rc = build(s, svcs, eps, nodes, fv, nfaults, out, e);
	faults_free(fv, nfaults);
	if (rc || (rc = build_authz(svcs, eps, pols, out, e)) || (rc = build_revoked(revs, out, e)))
		goto out;
	uint64_t h = iod_hash_bytes(out->svcs, sizeof(out->svcs[0]) * out->svcs_n, out->svcs_n);
	h ^= iod_hash_str(out->rack);
	if (out->callers_n)
		h ^= iod_hash_bytes(out->callers, sizeof(*out->callers) * out->callers_n, 7);
	if (out->policies)
		h ^= iod_hash_bytes(out->policies->p,
		                    sizeof(out->policies->p[0]) * out->policies->n, 11);
	if (out->revoked_n)
		h ^= iod_hash_bytes(out->revoked, sizeof(*out->revoked) * out->revoked_n, 13);
	s->rev = rev;
	if (h == s->hash && have == s->version && s->version) { /* the first view always counts */
		rc = -EAGAIN; /* the cluster moved, our view did not */
		goto out;
	}
	s->hash = h;
	s->watch_rev = rev;
	out->version = ++s->version;
out:
	json_decref(svcs);
	json_decref(eps);
	json_decref(nodes);
	json_decref(pols);
	json_decref(faults);
	json_decref(revs);
	return rc;
}

/* Kinds whose changes can move the view. */
static bool relevant(const char *kind)
{
	return kind &&
	       (!strcmp(kind, "service") || !strcmp(kind, "endpoint") || !strcmp(kind, "node") ||
	        !strcmp(kind, "policy") || !strcmp(kind, "fault") || !strcmp(kind, "revocation"));
}

/*
 * Long-poll GET /v1/watch from the revision the view was built at, for up
 * to timeout_ms; events of other kinds (replicas, leases...) move the
 * revision on and the watch goes on. 0: a relevant change (refresh now);
 * -ETIMEDOUT: none within timeout_ms; -EINTR: stopped.
 */
static int api_wait(void *ctx, uint32_t timeout_ms, const volatile int *stop, struct iod_err *e)
{
	struct iod_mesh_api_source *s = ctx;
	uint64_t waited = 0;

	if (!s->watch_rev)
		return 0; /* no view yet: list first */
	while (waited < timeout_ms) {
		char path[128], *body = NULL;
		size_t len = 0;
		uint32_t t = (uint32_t)(timeout_ms - waited);
		uint64_t t0 = iod_clock_now_ns();
		snprintf(path, sizeof(path), "/v1/watch?rev=%llu&timeout_ms=%u",
		         (unsigned long long)s->watch_rev, t);
		/* the server answers by t; allow it a second more */
		int st = http_get(s->server, path, t + 1000, stop, s->creds, s->token, &body, &len);
		waited += (iod_clock_now_ns() - t0) / IOD_NS_PER_MS;
		if (st == -EINTR)
			return -EINTR;
		if (st < 0)
			return iod_err_set(e, st, "control plane at %s: watch: %s", s->server,
			                   strerror(-st));
		if (st == 410) { /* history compacted past our revision: list again */
			free(body);
			s->watch_rev = 0;
			return 0;
		}
		if (st != 200) {
			free(body);
			return iod_err_set(e, -EIO, "control plane at %s: watch answered %d",
			                   s->server, st);
		}
		json_t *j = NULL;
		int rc = iod_json_parse(body, len, &j, e);
		free(body);
		if (rc)
			return rc;
		uint64_t next = 0;
		bool hit = false;
		const json_t *ev;
		size_t i;
		json_array_foreach(json_object_get(j, "events"), i, ev) hit |=
		    relevant(json_string_value(json_object_get(ev, "kind")));
		iod_json_get_u64(j, "rev", &next);
		json_decref(j);
		if (next > s->watch_rev)
			s->watch_rev = next;
		if (hit)
			return 0;
	}
	return -ETIMEDOUT;
}

void iod_mesh_api_source_init(struct iod_mesh_api_source *s, const char *server, const char *node)
{
	memset(s, 0, sizeof(*s));
	iod_strlcpy(s->server, server, sizeof(s->server));
	iod_strlcpy(s->node, node ? node : "", sizeof(s->node));
	s->src.poll = api_poll;
	s->src.wait = api_wait;
	s->src.ctx = s;
}
