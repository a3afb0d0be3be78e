/*
 * policy.c: service-to-service policies (pure): `from: A -> to: B`, with
 * optional methods and ports, allow or deny; parsed from the spec's
 * `security.policies` and from Policy objects, decided by the receiving
 * proxy for every call it is asked to deliver.
 *
 * Semantics are Istio's AuthorizationPolicy, reduced to service
 * identities: a matching deny wins; then a matching allow; a destination
 * that some allow policy selects is allow-listed (everything else to it is
 * denied); otherwise the tenant default: allow within a tenant, deny across
 * (docs/security.md). The parser is fed by users and the API, so it is
 * strict and fuzzed (tests/fuzz/fuzz_sec_policy.c). No I/O, no clock.
 */
#include "iod/sec.h"

#include <string.h>
#include <strings.h>

static const char *const method_names[] = {
#define X(m) #m,
    IOD_SEC_METHODS(X)
#undef X
};

static int method_bit(const char *m)
{
	for (unsigned i = 0; i < IOD_ARRAY_LEN(method_names); i++)
		if (!strcasecmp(m, method_names[i]))
			return (int)i;
	return -1;
}

/* "svc", "tenant/svc", "tenant/ *" (all of a tenant), "*" -> (tenant, svc). */
static int parse_target(const char *s, const char *def_tenant, char *tenant, char *svc,
                        const char *field, uint32_t idx, struct iod_err *e)
{
	const char *slash = strchr(s, '/');
	size_t tn;

	if (!strcmp(s, "*")) {
		strcpy(tenant, "*");
		strcpy(svc, "*");
		return 0;
	}
	if (!slash) {
		if (strlen(def_tenant) >= IOD_NAME_MAX)
			return iod_err_set(e, -EINVAL, "policy %u: bad default tenant", idx);
		strcpy(tenant, def_tenant);
		slash = s - 1;
	} else {
		tn = (size_t)(slash - s);
		if (!tn || tn >= IOD_NAME_MAX)
			return iod_err_set(e, -EINVAL,
			                   "policy %u: %s \"%.64s\": empty or long tenant", idx,
			                   field, s);
		memcpy(tenant, s, tn);
		tenant[tn] = 0;
		if (strcmp(tenant, "*") && !iod_sec_name_valid(tenant))
			return iod_err_set(e, -EINVAL, "policy %u: %s: tenant \"%s\" is not a name",
			                   idx, field, tenant);
	}
	if (strlen(slash + 1) >= IOD_NAME_MAX)
		return iod_err_set(e, -EINVAL, "policy %u: %s: service name too long", idx, field);
	strcpy(svc, slash + 1);
	if (strcmp(svc, "*") && !iod_sec_name_valid(svc))
		return iod_err_set(e, -EINVAL,
		                   "policy %u: %s: \"%.64s\" is not a service name "
		                   "(\"svc\", \"tenant/svc\", \"tenant/*\" or \"*\")",
		                   idx, field, svc);
	return 0;
}

static int parse_one(const json_t *j, const char *def_tenant, uint32_t idx,
                     struct iod_sec_policy *p, struct iod_err *e)
{
	static const char *const keys[] = {"name", "from", "to", "methods", "ports", "action"};
	const char *k, *s;
	json_t *v;
	int rc;

	memset(p, 0, sizeof(*p));
	if (!json_is_object(j))
		return iod_err_set(e, -EINVAL, "policy %u: want an object {from, to, action}", idx);
	json_object_foreach((json_t *)j, k, v)
	{
		bool known = false;
		for (unsigned i = 0; i < IOD_ARRAY_LEN(keys); i++)
			known |= !strcmp(k, keys[i]);
		if (!known) {
			const char *sug = iod_suggest(k, keys, IOD_ARRAY_LEN(keys));
			return iod_err_set(e, -EINVAL, "policy %u: unknown key \"%.64s\"%s%s%s",
			                   idx, k, sug ? " (did you mean \"" : "", sug ? sug : "",
			                   sug ? "\"?)" : "");
		}
	}
	if ((rc = iod_json_get_str(j, "name", &s)) == 0) {
		if (!iod_sec_name_valid(s))
			return iod_err_set(e, -EINVAL, "policy %u: name \"%.64s\" is not a name",
			                   idx, s);
		strcpy(p->name, s);
	} else if (rc == -EINVAL) {
		return iod_err_set(e, -EINVAL, "policy %u: name must be a string", idx);
	} else {
		snprintf(p->name, sizeof(p->name), "policy-%u", idx);
	}
	if (iod_json_get_str(j, "from", &s))
		return iod_err_set(e, -EINVAL, "policy %s: \"from\" (a service) is required",
		                   p->name);
	if ((rc = parse_target(s, def_tenant, p->from_tenant, p->from, "from", idx, e)))
		return rc;
	if (iod_json_get_str(j, "to", &s))
		return iod_err_set(e, -EINVAL, "policy %s: \"to\" (a service) is required",
		                   p->name);
	if ((rc = parse_target(s, def_tenant, p->to_tenant, p->to, "to", idx, e)))
		return rc;
	p->action = IOD_SEC_ALLOW;
	if ((rc = iod_json_get_str(j, "action", &s)) == 0) {
		if (!strcmp(s, "allow"))
			p->action = IOD_SEC_ALLOW;
		else if (!strcmp(s, "deny"))
			p->action = IOD_SEC_DENY;
		else
			return iod_err_set(e, -EINVAL,
			                   "policy %s: action \"%.32s\": want allow or deny",
			                   p->name, s);
	} else if (rc == -EINVAL) {
		return iod_err_set(e, -EINVAL, "policy %s: action must be a string", p->name);
	}
	if ((v = json_object_get(j, "methods"))) {
		size_t i;
		json_t *m;
		if (!json_is_array(v) || !json_array_size(v))
			return iod_err_set(
			    e, -EINVAL,
			    "policy %s: methods must be a non-empty list like [GET, POST]",
			    p->name);
		json_array_foreach(v, i, m)
		{
			int b = json_is_string(m) ? method_bit(json_string_value(m)) : -1;
			if (b < 0)
				return iod_err_set(e, -EINVAL,
				                   "policy %s: methods[%zu] is not an HTTP method",
				                   p->name, i);
			p->methods |= 1u << b;
		}
	}
	if ((v = json_object_get(j, "ports"))) {
		size_t i;
		json_t *x;
		if (!json_is_array(v) || !json_array_size(v) ||
		    json_array_size(v) > IOD_SEC_POLICY_PORTS_MAX)
			return iod_err_set(e, -EINVAL,
			                   "policy %s: ports must be a list of 1..%d ports",
			                   p->name, IOD_SEC_POLICY_PORTS_MAX);
		json_array_foreach(v, i, x)
		{
			json_int_t port = json_is_integer(x) ? json_integer_value(x) : -1;
			if (port < 1 || port > 65535)
				return iod_err_set(e, -EINVAL,
				                   "policy %s: ports[%zu] must be 1..65535",
				                   p->name, i);
			p->ports[p->ports_n++] = (uint16_t)port;
		}
	}
	return 0;
}

int iod_sec_policy_parse(const json_t *j, const char *default_tenant,
                         struct iod_sec_policy_set *set, struct iod_err *e)
{
	const char *def = default_tenant && default_tenant[0] ? default_tenant : "default";
	size_t n = json_is_array(j) ? json_array_size(j) : 1;
	uint32_t base = set->n;

	if (!iod_sec_name_valid(def))
		return iod_err_set(e, -EINVAL, "tenant \"%.64s\" is not a name", def);
	if (n > IOD_SEC_POLICIES_MAX - set->n)
		return iod_err_set(e, -ENOSPC, "more than %d policies (IOD_SEC_POLICIES_MAX)",
		                   IOD_SEC_POLICIES_MAX);
	for (size_t i = 0; i < n; i++) {
		const json_t *x = json_is_array(j) ? json_array_get(j, i) : j;
		int rc = parse_one(x, def, base + (uint32_t)i + 1, &set->p[set->n], e);
		if (rc) {
			set->n = base; /* all or nothing */
			return rc;
		}
		set->n++;
	}
	return 0;
}

static json_t *target_json(const char *tenant, const char *svc)
{
	char buf[2 * IOD_NAME_MAX + 2];
	if (!strcmp(tenant, "*") && !strcmp(svc, "*"))
		return json_string("*");
	snprintf(buf, sizeof(buf), "%s/%s", tenant, svc);
	return json_string(buf);
}

json_t *iod_sec_policy_to_json(const struct iod_sec_policy *p)
{
	json_t *j = json_object();
	json_object_set_new(j, "name", json_string(p->name));
	json_object_set_new(j, "from", target_json(p->from_tenant, p->from));
	json_object_set_new(j, "to", target_json(p->to_tenant, p->to));
	if (p->methods) {
		json_t *m = json_array();
		for (unsigned i = 0; i < IOD_ARRAY_LEN(method_names); i++)
			if (p->methods & (1u << i))
				json_array_append_new(m, json_string(method_names[i]));
		json_object_set_new(j, "methods", m);
	}
	if (p->ports_n) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < p->ports_n; i++)
			json_array_append_new(a, json_integer(p->ports[i]));
		json_object_set_new(j, "ports", a);
	}
	json_object_set_new(j, "action", json_string(p->action == IOD_SEC_DENY ? "deny" : "allow"));
	return j;
}

static bool wild_eq(const char *pat, const char *v)
{
	return !strcmp(pat, "*") || !strcmp(pat, v);
}

static bool selects_to(const struct iod_sec_policy *p, const char *tt, const char *to)
{
	return wild_eq(p->to_tenant, tt) && wild_eq(p->to, to);
}

static bool matches(const struct iod_sec_policy *p, const char *ft, const char *from,
                    const char *tt, const char *to, const char *method, uint16_t port)
{
	if (!wild_eq(p->from_tenant, ft) || !wild_eq(p->from, from) || !selects_to(p, tt, to))
		return false;
	if (p->methods) {
		int b = method ? method_bit(method) : -1;
		/* an L4 call (no method) never matches a method-scoped rule */
		if (b < 0 || !(p->methods & (1u << b)))
			return false;
	}
	if (p->ports_n) {
		bool hit = false;
		for (uint32_t i = 0; i < p->ports_n; i++)
			hit |= p->ports[i] == port;
		if (!hit)
			return false;
	}
	return true;
}

void iod_sec_policy_decide(const struct iod_sec_policy_set *set, const char *from_tenant,
                           const char *from, const char *to_tenant, const char *to,
                           const char *method, uint16_t port, struct iod_sec_verdict *v)
{
	const struct iod_sec_policy *allow_listed = NULL;
	uint32_t n = set ? set->n : 0;

	memset(v, 0, sizeof(*v));
	for (uint32_t i = 0; i < n; i++) {
		const struct iod_sec_policy *p = &set->p[i];
		if (p->action == IOD_SEC_DENY &&
		    matches(p, from_tenant, from, to_tenant, to, method, port)) {
			snprintf(v->policy, sizeof(v->policy), "%s", p->name);
			snprintf(v->reason, sizeof(v->reason), "denied by policy %s", p->name);
			return;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct iod_sec_policy *p = &set->p[i];
		if (p->action != IOD_SEC_ALLOW)
			continue;
		if (matches(p, from_tenant, from, to_tenant, to, method, port)) {
			v->allow = true;
			snprintf(v->policy, sizeof(v->policy), "%s", p->name);
			snprintf(v->reason, sizeof(v->reason), "allowed by policy %s", p->name);
			return;
		}
		if (!allow_listed && selects_to(p, to_tenant, to))
			allow_listed = p;
	}
	if (allow_listed) {
		snprintf(v->policy, sizeof(v->policy), "%s", allow_listed->name);
		snprintf(v->reason, sizeof(v->reason),
		         "%s/%s is allow-listed (policy %s) and no allow policy matches %s/%s",
		         to_tenant, to, allow_listed->name, from_tenant, from);
		return;
	}
	if (!strcmp(from_tenant, to_tenant)) {
		v->allow = true;
		snprintf(v->policy, sizeof(v->policy), "default-same-tenant");
		snprintf(v->reason, sizeof(v->reason), "allowed: same tenant (%s)", to_tenant);
		return;
	}
	snprintf(v->policy, sizeof(v->policy), "default-cross-tenant");
	snprintf(v->reason, sizeof(v->reason), "denied: %s/%s is in another tenant than %s/%s",
	         to_tenant, to, from_tenant, from);
}
