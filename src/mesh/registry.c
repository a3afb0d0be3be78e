/*
 * registry.c: the registry view a proxy routes by (services -> endpoints
 * with health, node and rack), stable loopback VIPs, discovery names, and
 * the static JSON config + file source that feed it until the control
 * plane's watch does.
 *
 * Pure except for iod_mesh_config_load and the file source, which read one
 * file. Never routes anything itself.
 */
#include "iod/mesh_proxy.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *iod_mesh_lb_name(enum iod_mesh_lb lb)
{
	switch (lb) {
#define X(n, s) \
	case IOD_MESH_LB_##n: return s;
		IOD_MESH_LB_POLICIES(X)
#undef X
	}
	return "?";
}

int iod_mesh_lb_parse(const char *s, enum iod_mesh_lb *out)
{
#define X(n, str)                       \
	if (!strcmp(s, str)) {          \
		*out = IOD_MESH_LB_##n; \
		return 0;               \
	}
	IOD_MESH_LB_POLICIES(X)
#undef X
	return -EINVAL;
}

void iod_mesh_service_defaults(struct iod_mesh_service *s)
{
	memset(s, 0, sizeof(*s));
	s->mode = IOD_MESH_MODE_HTTP;
	s->lb = IOD_MESH_LB_LEAST_REQUEST;
	s->locality = true;
	/* Envoy's defaults (REFERENCES.md). */
	s->outlier.consecutive_5xx = 5;
	s->outlier.consecutive_connect_fail = 5;
	s->outlier.interval_ns = 10 * IOD_NS_PER_S;
	s->outlier.base_ejection_ns = 30 * IOD_NS_PER_S;
	s->outlier.max_ejection_ns = 300 * IOD_NS_PER_S;
	s->outlier.max_ejection_bp = 1000;
	s->outlier.panic_bp = 5000;
	s->breaker.max_connections = 1024;
	s->breaker.max_pending = 1024;
	s->breaker.max_requests = 1024;
	s->breaker.max_retries = 3;
	s->retry.max_per_request = 2;
	s->retry.budget_bp = 2000; /* Envoy retry budget: 20% */
	s->retry.min_concurrency = 3;
	s->retry.backoff_base_ns = 25 * IOD_NS_PER_MS;
	s->retry.backoff_max_ns = 250 * IOD_NS_PER_MS;
	s->timeout.connect_ns = 1 * IOD_NS_PER_S;
	s->timeout.request_ns = 15 * IOD_NS_PER_S;
	s->timeout.idle_ns = 300 * IOD_NS_PER_S;
	s->timeout.head_ns = (uint64_t)IOD_MESH_HEAD_TIMEOUT_MS * IOD_NS_PER_MS;
}

int iod_mesh_registry_init(struct iod_mesh_registry *r, uint32_t cap)
{
	memset(r, 0, sizeof(*r));
	if (!cap || cap > IOD_MESH_SERVICES_MAX)
		cap = IOD_MESH_SERVICES_MAX;
	r->svcs = calloc(cap, sizeof(*r->svcs));
	if (!r->svcs)
		return -ENOMEM;
	r->svcs_cap = cap;
	return 0;
}

void iod_mesh_registry_free(struct iod_mesh_registry *r)
{
	free(r->svcs);
	free(r->policies);
	free(r->callers);
	free(r->revoked);
	memset(r, 0, sizeof(*r));
}

static bool name_ok(const char *n)
{
	size_t len = strlen(n);
	if (!len || len >= IOD_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = n[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

int iod_mesh_registry_add(struct iod_mesh_registry *r, const struct iod_mesh_service *s,
                          struct iod_err *e)
{
	uint32_t i;

	if (!name_ok(s->name))
		return iod_err_set(e, -EINVAL,
		                   "service name \"%s\": use 1-%d letters, digits, '-' or '_'",
		                   s->name, IOD_NAME_MAX - 1);
	if (r->svcs_n >= r->svcs_cap)
		return iod_err_set(e, -ENOSPC, "service %s: more than %u services", s->name,
		                   r->svcs_cap);
	for (i = 0; i < r->svcs_n; i++) {
		int c = strcmp(r->svcs[i].name, s->name);
		if (!c)
			return iod_err_set(e, -EEXIST, "service %s is defined twice", s->name);
		if (c > 0)
			break;
	}
	memmove(&r->svcs[i + 1], &r->svcs[i], (r->svcs_n - i) * sizeof(r->svcs[0]));
	r->svcs[i] = *s;
	r->svcs_n++;
	return 0;
}

struct iod_mesh_service *iod_mesh_registry_find(const struct iod_mesh_registry *r, const char *name)
{
	uint32_t lo = 0, hi = r->svcs_n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(r->svcs[mid].name, name);
		if (!c)
			return &r->svcs[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* 127.77.0.0/16 minus .0 and .255 last octets: 65024 addresses. */
static uint32_t vip_from_hash(uint64_t h)
{
	uint32_t slot = (uint32_t)(h % (256u * 254u));
	return (127u << 24) | (77u << 16) | ((slot / 254u) << 8) | (slot % 254u + 1u);
}

uint32_t iod_mesh_vip_for(const char *name)
{
	return vip_from_hash(iod_hash_str(name));
}

void iod_mesh_registry_assign_vips(struct iod_mesh_registry *r)
{
	for (uint32_t i = 0; i < r->svcs_n; i++) {
		struct iod_mesh_service *s = &r->svcs[i];
		uint64_t h = iod_hash_str(s->name);
		if (s->vip4)
			continue;
		/* Bounded probe: at most svcs_n collisions can exist. */
		for (uint32_t probe = 0; probe <= r->svcs_n; probe++) {
			uint32_t v = vip_from_hash(h + probe);
			bool taken = false;
			for (uint32_t j = 0; j < r->svcs_n; j++)
				if (r->svcs[j].vip4 == v && r->svcs[j].port == s->port)
					taken = true;
			if (!taken) {
				s->vip4 = v;
				break;
			}
		}
	}
}

void iod_mesh_vips_assign(const char *const *names, const uint16_t *ports, uint32_t n,
                          uint32_t *vips)
{
	/* The same probe as iod_mesh_registry_assign_vips over services in
	 * name order, none with an explicit VIP: each takes the first probe
	 * that no earlier one holds on the same port. */
	for (uint32_t i = 0; i < n; i++) {
		uint64_t h = iod_hash_str(names[i]);
		vips[i] = 0;
		for (uint32_t probe = 0; probe <= n && !vips[i]; probe++) {
			uint32_t v = vip_from_hash(h + probe);
			bool taken = false;
			for (uint32_t j = 0; j < i && !taken; j++)
				taken = vips[j] == v && ports[j] == ports[i];
			if (!taken)
				vips[i] = v;
		}
	}
}

int iod_mesh_env_name(const char *service, char *buf, size_t len)
{
	size_t o = 0;
	const char *pre = "IOD_SVC_", *post = "_ADDR";
	if (len < strlen(pre) + strlen(service) + strlen(post) + 1)
		return -ENOSPC;
	for (const char *p = pre; *p; p++)
		buf[o++] = *p;
	for (const char *p = service; *p; p++) {
		char c = *p;
		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			c = '_';
		buf[o++] = c;
	}
	for (const char *p = post; *p; p++)
		buf[o++] = *p;
	buf[o] = 0;
	return 0;
}

int iod_mesh_addr_parse(const char *s, uint32_t *ip4, uint16_t *port, bool port_required)
{
	char host[32];
	const char *colon = strrchr(s, ':');
	size_t hl = colon ? (size_t)(colon - s) : strlen(s);
	struct in_addr a;

	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = 0;
	if (inet_pton(AF_INET, host, &a) != 1)
		return -EINVAL;
	*ip4 = ntohl(a.s_addr);
	if (!colon) {
		if (port_required)
			return -EINVAL;
		*port = 0;
		return 0;
	}
	char *end;
	unsigned long p = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || p == 0 || p > 65535)
		return -EINVAL;
	*port = (uint16_t)p;
	return 0;
}

void iod_mesh_addr_format(uint32_t ip4, uint16_t port, char *buf, size_t len)
{
	if (port)
		snprintf(buf, len, "%u.%u.%u.%u:%u", ip4 >> 24, (ip4 >> 16) & 255, (ip4 >> 8) & 255,
		         ip4 & 255, port);
	else
		snprintf(buf, len, "%u.%u.%u.%u", ip4 >> 24, (ip4 >> 16) & 255, (ip4 >> 8) & 255,
		         ip4 & 255);
}

/* ---- config ------------------------------------------------------------ */

static int get_dur(const json_t *o, const char *key, uint64_t *ns, const char *svc,
                   struct iod_err *e)
{
	const json_t *v = json_object_get(o, key);
	if (!v)
		return 0;
	if (!json_is_string(v))
		return iod_err_set(
		    e, -EINVAL, "service %s: %s must be a duration string like \"2s\"", svc, key);
	struct iod_err de = {0};
	if (iod_parse_duration(json_string_value(v), ns, &de))
		return iod_err_set(e, -EINVAL, "service %s: %s: %s", svc, key, de.msg);
	return 0;
}

static int get_u32(const json_t *o, const char *key, uint32_t *out, uint32_t max, const char *svc,
                   struct iod_err *e)
{
	const json_t *v = json_object_get(o, key);
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
		return iod_err_set(e, -EINVAL, "service %s: %s must be an integer 0..%u", svc, key,
		                   max);
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

static int get_pct(const json_t *o, const char *key, uint32_t *bp, const char *svc,
                   struct iod_err *e)
{
	const json_t *v = json_object_get(o, key);
	if (!v)
		return 0;
	struct iod_err pe = {0};
	if (!json_is_string(v) || iod_parse_percent(json_string_value(v), bp, &pe))
		return iod_err_set(e, -EINVAL, "service %s: %s must be a percentage like \"10%%\"",
		                   svc, key);
	return 0;
}

static int get_str(const json_t *o, const char *key, char *dst, size_t len, const char *what,
                   struct iod_err *e)
{
	const json_t *v = json_object_get(o, key);
	if (!v)
		return 0;
	if (!json_is_string(v) || strlen(json_string_value(v)) >= len)
		return iod_err_set(e, -EINVAL, "%s: %s must be a string of at most %zu bytes", what,
		                   key, len - 1);
	iod_strlcpy(dst, json_string_value(v), len);
	return 0;
}

static int parse_endpoint(const json_t *j, struct iod_mesh_service *s, uint32_t idx,
                          struct iod_err *e)
{
	struct iod_mesh_endpoint *ep = &s->eps[idx];
	const json_t *a = json_object_get(j, "addr");
	char what[IOD_NAME_MAX + 32];
	int rc;

	snprintf(what, sizeof(what), "service %s endpoint %u", s->name, idx);
	if (!json_is_object(j))
		return iod_err_set(e, -EINVAL, "%s: must be an object", what);
	if (!json_is_string(a) ||
	    iod_mesh_addr_parse(json_string_value(a), &ep->ip4, &ep->port, true))
		return iod_err_set(e, -EINVAL, "%s: addr must be \"IPv4:port\"", what);
	iod_strlcpy(ep->id, json_string_value(a), sizeof(ep->id));
	ep->weight = 1;
	ep->healthy = true;
	if ((rc = get_str(j, "id", ep->id, sizeof(ep->id), what, e)) ||
	    (rc = get_str(j, "node", ep->node, sizeof(ep->node), what, e)) ||
	    (rc = get_str(j, "rack", ep->rack, sizeof(ep->rack), what, e)) ||
	    (rc = get_u32(j, "weight", &ep->weight, 1000000, s->name, e)))
		return rc;
	if (!ep->weight)
		return iod_err_set(e, -EINVAL, "%s: weight must be at least 1", what);
	const json_t *h = json_object_get(j, "healthy");
	if (h) {
		if (!json_is_boolean(h))
			return iod_err_set(e, -EINVAL, "%s: healthy must be true or false", what);
		ep->healthy = json_is_true(h);
	}
	/* reached through its node's proxy over mutual TLS (docs/mesh.md) */
	const json_t *m = json_object_get(j, "mtls");
	if (m && (!json_is_string(m) ||
	          iod_mesh_addr_parse(json_string_value(m), &ep->mtls_ip4, &ep->mtls_port, true) ||
	          !ep->mtls_ip4))
		return iod_err_set(e, -EINVAL,
		                   "%s: mtls must be \"IPv4:port\" (its node proxy's "
		                   "mTLS listener)",
		                   what);
	return 0;
}

/* "fault": {"delay": {"percent": P, "ms": N}, "abort": {"percent": P,
 * "status": S}}: injected for as long as the config says so. */
static int parse_fault(const json_t *o, struct iod_mesh_service *s, struct iod_err *e)
{
	struct iod_mesh_fault *f = &s->fault;
	const json_t *d = json_object_get(o, "delay"), *a = json_object_get(o, "abort");
	uint32_t ms = 0, status = 0;
	int rc;
	if (!o)
		return 0;
	if (!json_is_object(o) || (d && !json_is_object(d)) || (a && !json_is_object(a)))
		return iod_err_set(e, -EINVAL,
		                   "service %s: fault must be {\"delay\": {\"percent\", \"ms\"}, "
		                   "\"abort\": {\"percent\", \"status\"}}",
		                   s->name);
	if (d) {
		f->delay_pct = 100;
		if ((rc = get_u32(d, "percent", &f->delay_pct, 100, s->name, e)) ||
		    (rc = get_u32(d, "ms", &ms, IOD_CHAOS_LATENCY_MAX_MS, s->name, e)))
			return rc;
		if (!ms)
			return iod_err_set(e, -EINVAL, "service %s: fault.delay needs ms (1..%u)",
			                   s->name, IOD_CHAOS_LATENCY_MAX_MS);
		f->delay_ns = (uint64_t)ms * IOD_NS_PER_MS;
	}
	if (a) {
		f->abort_pct = 100;
		if ((rc = get_u32(a, "percent", &f->abort_pct, 100, s->name, e)) ||
		    (rc = get_u32(a, "status", &status, 599, s->name, e)))
			return rc;
		if (status < 200)
			return iod_err_set(
			    e, -EINVAL, "service %s: fault.abort needs status (200..599)", s->name);
		f->abort_status = (uint16_t)status;
	}
	return 0;
}

static int parse_service(const json_t *j, struct iod_mesh_service *s, uint32_t idx,
                         struct iod_err *e)
{
	const json_t *v;
	int rc;
	char what[64];

	iod_mesh_service_defaults(s);
	snprintf(what, sizeof(what), "services[%u]", idx);
	if (!json_is_object(j))
		return iod_err_set(e, -EINVAL, "%s: must be an object", what);
	v = json_object_get(j, "name");
	if (!json_is_string(v) || !name_ok(json_string_value(v)))
		return iod_err_set(e, -EINVAL, "%s: name must be 1-%d letters, digits, '-' or '_'",
		                   what, IOD_NAME_MAX - 1);
	iod_strlcpy(s->name, json_string_value(v), sizeof(s->name));
	v = json_object_get(j, "port");
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535)
		return iod_err_set(e, -EINVAL, "service %s: port must be 1..65535", s->name);
	s->port = (uint16_t)json_integer_value(v);
	v = json_object_get(j, "vip");
	if (v) {
		uint16_t p;
		if (!json_is_string(v) ||
		    iod_mesh_addr_parse(json_string_value(v), &s->vip4, &p, false) || p ||
		    (s->vip4 >> 24) != 127)
			return iod_err_set(
			    e, -EINVAL, "service %s: vip must be a 127.x.y.z address without port",
			    s->name);
	}
	v = json_object_get(j, "mode");
	if (v) {
		const char *m = json_is_string(v) ? json_string_value(v) : "";
		if (!strcmp(m, "tcp"))
			s->mode = IOD_MESH_MODE_TCP;
		else if (!strcmp(m, "http"))
			s->mode = IOD_MESH_MODE_HTTP;
		else
			return iod_err_set(e, -EINVAL,
			                   "service %s: mode must be \"tcp\" or \"http\"", s->name);
	}
	v = json_object_get(j, "transport"); /* service_mesh.transport (docs/mesh.md) */
	if (v && (!json_is_string(v) || !*json_string_value(v) ||
	          iod_mesh_tp_want_parse(json_string_value(v), &s->transport)))
		return iod_err_set(e, -EINVAL,
		                   "service %s: transport must be tcp, shm, rdma or auto", s->name);
	v = json_object_get(j, "lb");
	if (v && (!json_is_string(v) || iod_mesh_lb_parse(json_string_value(v), &s->lb)))
		return iod_err_set(e, -EINVAL,
		                   "service %s: lb must be round_robin, weighted, least_request, "
		                   "ring_hash or maglev",
		                   s->name);
	v = json_object_get(j, "locality");
	if (v) {
		if (!json_is_boolean(v))
			return iod_err_set(e, -EINVAL, "service %s: locality must be true or false",
			                   s->name);
		s->locality = json_is_true(v);
	}
	const json_t *o = json_object_get(j, "outlier");
	if (o) {
		struct iod_mesh_outlier_cfg *c = &s->outlier;
		if ((rc = get_u32(o, "consecutive_5xx", &c->consecutive_5xx, 1000, s->name, e)) ||
		    (rc = get_u32(o, "consecutive_connect_failure", &c->consecutive_connect_fail,
		                  1000, s->name, e)) ||
		    (rc = get_dur(o, "interval", &c->interval_ns, s->name, e)) ||
		    (rc = get_dur(o, "base_ejection_time", &c->base_ejection_ns, s->name, e)) ||
		    (rc = get_dur(o, "max_ejection_time", &c->max_ejection_ns, s->name, e)) ||
		    (rc = get_pct(o, "max_ejection_percent", &c->max_ejection_bp, s->name, e)) ||
		    (rc = get_pct(o, "panic_threshold", &c->panic_bp, s->name, e)))
			return rc;
	}
	o = json_object_get(j, "breaker");
	if (o) {
		struct iod_mesh_breaker_cfg *c = &s->breaker;
		if ((rc = get_u32(o, "max_connections", &c->max_connections, 1u << 24, s->name,
		                  e)) ||
		    (rc = get_u32(o, "max_pending", &c->max_pending, 1u << 24, s->name, e)) ||
		    (rc = get_u32(o, "max_requests", &c->max_requests, 1u << 24, s->name, e)) ||
		    (rc = get_u32(o, "max_retries", &c->max_retries, 1u << 24, s->name, e)))
			return rc;
	}
	o = json_object_get(j, "retry");
	if (o) {
		struct iod_mesh_retry_cfg *c = &s->retry;
		if ((rc = get_u32(o, "max_per_request", &c->max_per_request, IOD_MESH_RETRIES_MAX,
		                  s->name, e)) ||
		    (rc = get_pct(o, "budget_percent", &c->budget_bp, s->name, e)) ||
		    (rc = get_u32(o, "min_concurrency", &c->min_concurrency, 1u << 20, s->name,
		                  e)) ||
		    (rc = get_dur(o, "backoff_base", &c->backoff_base_ns, s->name, e)) ||
		    (rc = get_dur(o, "backoff_max", &c->backoff_max_ns, s->name, e)))
			return rc;
	}
	o = json_object_get(j, "timeouts");
	if (o) {
		if ((rc = get_dur(o, "connect", &s->timeout.connect_ns, s->name, e)) ||
		    (rc = get_dur(o, "request", &s->timeout.request_ns, s->name, e)) ||
		    (rc = get_dur(o, "idle", &s->timeout.idle_ns, s->name, e)) ||
		    (rc = get_dur(o, "head", &s->timeout.head_ns, s->name, e)))
			return rc;
	}
	if ((rc = parse_fault(json_object_get(j, "fault"), s, e)))
		return rc;
	v = json_object_get(j, "endpoints");
	if (v && !json_is_array(v))
		return iod_err_set(e, -EINVAL, "service %s: endpoints must be a list", s->name);
	if (v && json_array_size(v) > IOD_MESH_ENDPOINTS_MAX)
		return iod_err_set(e, -ENOSPC, "service %s: more than %d endpoints", s->name,
		                   IOD_MESH_ENDPOINTS_MAX);
	for (size_t i = 0; v && i < json_array_size(v); i++) {
		if ((rc = parse_endpoint(json_array_get(v, i), s, (uint32_t)i, e)))
			return rc;
		s->eps_n++;
	}
	return 0;
}

static int caller_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct iod_mesh_caller *)a)->uid,
	         y = ((const struct iod_mesh_caller *)b)->uid;
	return x < y ? -1 : x > y;
}

/*
 * Standalone identities and policies (what the API source reads from
 * Endpoints and Policy objects): "callers": [{"uid", "service", "tenant"?}]
 * names the local processes that call, "policies": [...] as PUT
 * /v1/policies takes them. Either turns authorisation on. "revocations":
 * ["node.N", "service.T.N"] (Revocation object names) are refused as mTLS
 * peers.
 */
static int parse_authz(const json_t *root, struct iod_mesh_registry *r, struct iod_err *e)
{
	const json_t *cl = json_object_get(root, "callers"),
	             *pol = json_object_get(root, "policies"),
	             *rv = json_object_get(root, "revocations");
	const char *names[64];
	uint32_t nn = 0;
	if (rv && (!json_is_array(rv) || json_array_size(rv) > IOD_ARRAY_LEN(names)))
		return iod_err_set(e, -EINVAL,
		                   "config: \"revocations\" must be a list of at most %zu names",
		                   IOD_ARRAY_LEN(names));
	for (size_t i = 0; rv && i < json_array_size(rv); i++)
		if (!(names[nn++] = json_string_value(json_array_get(rv, i))))
			return iod_err_set(e, -EINVAL, "config: revocations[%zu] must be a name",
			                   i);
	if (iod_mesh_revoked_set(r, names, nn))
		return -ENOMEM;
	free(r->policies);
	free(r->callers);
	r->policies = NULL;
	r->callers = NULL;
	r->callers_n = 0;
	r->authz = cl || pol;
	if (cl && (!json_is_array(cl) || json_array_size(cl) > IOD_MESH_CALLERS_MAX))
		return iod_err_set(e, -EINVAL, "config: \"callers\" must be a list of at most %d",
		                   IOD_MESH_CALLERS_MAX);
	if (cl && json_array_size(cl) &&
	    !(r->callers = calloc(json_array_size(cl), sizeof(*r->callers))))
		return -ENOMEM;
	for (size_t i = 0; cl && i < json_array_size(cl); i++) {
		const json_t *c = json_array_get(cl, i), *u = json_object_get(c, "uid");
		const char *svc = json_string_value(json_object_get(c, "service"));
		const char *ten = json_string_value(json_object_get(c, "tenant"));
		if (!json_is_integer(u) || json_integer_value(u) < 1 ||
		    json_integer_value(u) >= UINT32_MAX || !svc || !iod_sec_name_valid(svc) ||
		    (ten && !iod_sec_name_valid(ten)))
			return iod_err_set(
			    e, -EINVAL,
			    "config: callers[%zu] must be {\"uid\": 1.., \"service\": "
			    "NAME, \"tenant\"?: NAME}",
			    i);
		struct iod_mesh_caller *x = &r->callers[r->callers_n++];
		x->uid = (uint32_t)json_integer_value(u);
		iod_strlcpy(x->service, svc, sizeof(x->service));
		iod_strlcpy(x->tenant, ten ? ten : "default", sizeof(x->tenant));
	}
	if (r->callers_n)
		qsort(r->callers, r->callers_n, sizeof(*r->callers), caller_cmp);
	for (uint32_t i = 1; i < r->callers_n; i++)
		if (r->callers[i].uid == r->callers[i - 1].uid)
			return iod_err_set(e, -EINVAL, "config: callers: uid %u twice",
			                   (unsigned)r->callers[i].uid);
	if (pol) {
		if (!(r->policies = calloc(1, sizeof(*r->policies))))
			return -ENOMEM;
		int rc = iod_sec_policy_parse(pol, "default", r->policies, e);
		if (rc) {
			iod_err_wrap(e, "config: policies");
			return rc;
		}
	}
	return 0;
}

int iod_mesh_config_parse(const char *text, size_t len, struct iod_mesh_registry *r,
                          struct iod_err *e)
{
	json_t *root = NULL;
	struct iod_mesh_service *tmp = NULL;
	int rc = iod_json_parse(text, len, &root, e);

	if (rc)
		return rc;
	if (!json_is_object(root)) {
		rc = iod_err_set(e, -EINVAL, "the config must be a JSON object with \"services\"");
		goto out;
	}
	r->svcs_n = 0;
	if ((rc = parse_authz(root, r, e)))
		goto out;
	if ((rc = get_str(root, "node", r->node, sizeof(r->node), "config", e)) ||
	    (rc = get_str(root, "rack", r->rack, sizeof(r->rack), "config", e)))
		goto out;
	const json_t *svcs = json_object_get(root, "services");
	if (!json_is_array(svcs)) {
		rc = iod_err_set(e, -EINVAL, "config: \"services\" must be a list");
		goto out;
	}
	tmp = malloc(sizeof(*tmp));
	if (!tmp) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < json_array_size(svcs); i++) {
		if ((rc = parse_service(json_array_get(svcs, i), tmp, (uint32_t)i, e)) ||
		    (rc = iod_mesh_registry_add(r, tmp, e)))
			goto out;
	}
	iod_mesh_registry_assign_vips(r);
	/* Explicit VIPs may collide with each other or with assigned ones. */
	for (uint32_t i = 0; i < r->svcs_n; i++)
		for (uint32_t j = i + 1; j < r->svcs_n; j++)
			if (r->svcs[i].vip4 == r->svcs[j].vip4 &&
			    r->svcs[i].port == r->svcs[j].port) {
				rc = iod_err_set(e, -EINVAL,
				                 "services %s and %s have the same vip and port",
				                 r->svcs[i].name, r->svcs[j].name);
				goto out;
			}
out:
	free(tmp);
	json_decref(root);
	return rc;
}

int iod_mesh_config_load(const char *path, struct iod_mesh_registry *r, struct iod_err *e)
{
	struct iod_buf b;
	int rc;

	iod_buf_init(&b);
	rc = iod_buf_read_file(&b, path, IOD_MESH_CONFIG_MAX, e);
	if (!rc) {
		rc = iod_mesh_config_parse(b.data, b.len, r, e);
		if (rc)
			iod_err_wrap(e, "%s", path);
	}
	iod_buf_free(&b);
	return rc;
}

static int file_poll(void *ctx, uint64_t have, struct iod_mesh_registry *out, struct iod_err *e)
{
	struct iod_mesh_file_source *fs = ctx;
	struct stat st;

	if (stat(fs->path, &st))
		return iod_err_set(e, -errno, "%s: %s", fs->path, strerror(errno));
	int64_t m = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	if (m == fs->mtime_ns && have == fs->version)
		return -EAGAIN;
	int rc = iod_mesh_config_load(fs->path, out, e);
	if (rc)
		return rc;
	fs->mtime_ns = m;
	out->version = ++fs->version;
	return 0;
}

void iod_mesh_file_source_init(struct iod_mesh_file_source *fs, const char *path)
{
	memset(fs, 0, sizeof(*fs));
	iod_strlcpy(fs->path, path, sizeof(fs->path));
	fs->src.poll = file_poll;
	fs->src.ctx = fs;
}
