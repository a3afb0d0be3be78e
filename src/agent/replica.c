/*
 * replica.c: one replica as the agent runs it, in and out of JSON.
 *
 * A standalone agent's desired state arrives as JSON, a manifest file (the
 * control plane's Replica objects are read through objects.h, desired.c).
 * This file turns that JSON into fixed-size struct iod_agent_replica records (bounded
 * buffers, nothing borrowed) and back. It is a parser of untrusted input:
 * every field is type-checked and bounded (fuzz target: fuzz_agent_manifest).
 * It never does I/O.
 */
#include "iod/agent.h"
#include "iod/state.h"

#include <stdlib.h>
#include <string.h>

static int strv_add(char *buf, size_t cap, uint32_t *count, uint32_t max, const char *a,
                    const char *b)
{
	size_t used = 0;
	for (uint32_t i = 0; i < *count; i++)
		used += strlen(buf + used) + 1;
	size_t need = strlen(a) + (b ? strlen(b) + 1 : 0) + 1;
	if (*count >= max || used + need > cap)
		return -E2BIG;
	if (b)
		snprintf(buf + used, cap - used, "%s=%s", a, b);
	else
		memcpy(buf + used, a, need);
	(*count)++;
	return 0;
}

int iod_agent_replica_add_arg(struct iod_agent_replica *r, const char *arg)
{
	return strv_add(r->argv_buf, sizeof(r->argv_buf), &r->argc, IOD_AGENT_ARGS_MAX, arg, NULL);
}

int iod_agent_replica_add_env(struct iod_agent_replica *r, const char *name, const char *value)
{
	return strv_add(r->env_buf, sizeof(r->env_buf), &r->envc, IOD_AGENT_ENVS_MAX, name, value);
}

int iod_agent_replica_set_env(struct iod_agent_replica *r, const char *name, const char *value)
{
	char old[IOD_AGENT_ENV_BYTES_MAX];
	uint32_t n = r->envc;
	size_t nl = strlen(name);
	memcpy(old, r->env_buf, sizeof(old));
	r->envc = 0;
	memset(r->env_buf, 0, sizeof(r->env_buf));
	for (uint32_t i = 0; i < n; i++) {
		const char *v = iod_agent_strv_at(old, sizeof(old), n, i);
		if (v && !(strncmp(v, name, nl) == 0 && v[nl] == '=') &&
		    strv_add(r->env_buf, sizeof(r->env_buf), &r->envc, IOD_AGENT_ENVS_MAX, v, NULL))
			return -E2BIG;
	}
	return iod_agent_replica_add_env(r, name, value);
}

const char *iod_agent_strv_at(const char *buf, size_t buf_len, uint32_t n, uint32_t i)
{
	size_t off = 0;
	if (i >= n)
		return NULL;
	for (uint32_t k = 0; k < i; k++) {
		off += strnlen(buf + off, buf_len - off) + 1;
		if (off >= buf_len)
			return NULL;
	}
	return buf + off;
}

static const char *const restart_names[] = {"always", "on-failure", "never"};
static const char *const health_names[] = {"none", "exec", "tcp", "http"};

static int get_u64(const json_t *o, const char *key, uint64_t *v, uint64_t max, const char *name,
                   struct iod_err *e)
{
	int rc = iod_json_get_u64(o, key, v);
	if (rc == -ENOENT)
		return 0;
	if (rc || *v > max)
		return iod_err_set(e, -EINVAL,
		                   "replica \"%s\": field \"%s\" must be an integer in 0..%llu",
		                   name, key, (unsigned long long)max);
	return 0;
}

static int get_str(const json_t *o, const char *key, char *dst, size_t len, const char *name,
                   struct iod_err *e)
{
	const char *s;
	int rc = iod_json_get_str(o, key, &s);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return iod_err_set(e, -EINVAL, "replica \"%s\": field \"%s\" must be a string",
		                   name, key);
	if (iod_strlcpy(dst, s, len))
		return iod_err_set(e, -E2BIG,
		                   "replica \"%s\": field \"%s\" is longer than %zu bytes", name,
		                   key, len - 1);
	return 0;
}

static int get_enum(const json_t *o, const char *key, const char *const *names, unsigned n,
                    unsigned *out, const char *name, struct iod_err *e)
{
	const char *s;
	int rc = iod_json_get_str(o, key, &s);
	if (rc == -ENOENT)
		return 0;
	for (unsigned i = 0; !rc && i < n; i++)
		if (!strcmp(s, names[i])) {
			*out = i;
			return 0;
		}
	return iod_err_set(e, -EINVAL, "replica \"%s\": field \"%s\" must be one of %s, %s%s%s",
	                   name, key, names[0], names[1], n > 2 ? ", " : "", n > 2 ? names[2] : "");
}

static int get_set(const json_t *o, const char *key, struct iod_bitmap *b, const char *name,
                   struct iod_err *e)
{
	const char *s;
	iod_bitmap_zero(b);
	int rc = iod_json_get_str(o, key, &s);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return iod_err_set(
		    e, -EINVAL, "replica \"%s\": \"%s\" must be a list like \"0-3,8\"", name, key);
	if (iod_bitmap_parse(s, b, e))
		return iod_err_wrap(e, "replica \"%s\": \"%s\"", name, key);
	return 0;
}

static int health_from_json(const json_t *h, struct iod_agent_health *out, const char *name,
                            struct iod_err *e)
{
	unsigned kind = IOD_HEALTH_NONE;
	uint64_t v;
	int rc;

	if (!json_is_object(h))
		return iod_err_set(e, -EINVAL, "replica \"%s\": \"health\" must be an object",
		                   name);
	if ((rc = get_enum(h, "kind", health_names, 4, &kind, name, e)))
		return rc;
	out->kind = (enum iod_health_kind)kind;
	if ((rc = get_str(h, "command", out->command, sizeof(out->command), name, e)) ||
	    (rc = get_str(h, "path", out->path, sizeof(out->path), name, e)))
		return rc;
	v = 0;
	if ((rc = get_u64(h, "port", &v, 65535, name, e)))
		return rc;
	out->port = (uint16_t)v;
	v = 1000;
	if ((rc = get_u64(h, "interval_ms", &v, 3600000, name, e)))
		return rc;
	out->interval_ns = v * IOD_NS_PER_MS;
	v = 1000;
	if ((rc = get_u64(h, "timeout_ms", &v, 3600000, name, e)))
		return rc;
	out->timeout_ns = v * IOD_NS_PER_MS;
	v = 1;
	if ((rc = get_u64(h, "healthy_threshold", &v, 1000, name, e)))
		return rc;
	out->healthy_threshold = (uint32_t)v;
	v = 1;
	if ((rc = get_u64(h, "unhealthy_threshold", &v, 1000, name, e)))
		return rc;
	out->unhealthy_threshold = (uint32_t)v;
	if (out->kind != IOD_HEALTH_NONE && !out->interval_ns)
		return iod_err_set(e, -EINVAL, "replica \"%s\": health interval_ms must be > 0",
		                   name);
	if (out->kind == IOD_HEALTH_EXEC && !out->command[0])
		return iod_err_set(e, -EINVAL,
		                   "replica \"%s\": an exec health check needs \"command\"", name);
	if (out->kind == IOD_HEALTH_HTTP && !out->path[0])
		memcpy(out->path, "/", 2);
	return 0;
}

static const char *const netmode_names[] = {"auto", "node", "private", "none"};

/* "sandbox": {"user", "capabilities", "seccomp", "network", "best_effort"}:
 * the spec's sandbox block (a service's own profile only through a spec). */
static int sandbox_from_json(const json_t *o, struct iod_agent_sandbox *sb, const char *name,
                             struct iod_err *e)
{
	const char *s;
	unsigned u;
	int rc;
	if (!json_is_object(o))
		return iod_err_set(e, -EINVAL, "replica \"%s\": \"sandbox\" must be an object",
		                   name);
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)o, k, v)
	{
		if (strcmp(k, "user") && strcmp(k, "capabilities") && strcmp(k, "seccomp") &&
		    strcmp(k, "network") && strcmp(k, "best_effort"))
			return iod_err_set(e, -EINVAL,
			                   "replica \"%s\": unknown sandbox key \"%.40s\" (user, "
			                   "capabilities, seccomp, network, best_effort)",
			                   name, k);
	}
	if (!iod_json_get_str(o, "user", &s)) {
		unsigned long long uid = 0, gid = 0;
		char tail = 0;
		int got = sscanf(s, "%llu:%llu%c", &uid, &gid, &tail);
		if (!strcmp(s, "dynamic"))
			sb->user = IOD_SPEC_USER_DYNAMIC;
		else if (!strcmp(s, "root"))
			sb->user = IOD_SPEC_USER_ROOT;
		else if ((got == 1 || got == 2) && s[0] >= '0' && s[0] <= '9' && uid < UINT32_MAX &&
		         gid < UINT32_MAX && !strchr(s, '-') && !strchr(s, ' ')) {
			sb->user = uid ? IOD_SPEC_USER_ID : IOD_SPEC_USER_ROOT;
			sb->uid = (uint32_t)uid;
			sb->gid = (uint32_t)(got == 2 ? gid : uid);
		} else {
			return iod_err_set(
			    e, -EINVAL,
			    "replica \"%s\": sandbox.user must be dynamic, root, a uid "
			    "or \"uid:gid\"",
			    name);
		}
	} else if (json_object_get(o, "user")) {
		return iod_err_set(e, -EINVAL, "replica \"%s\": sandbox.user must be a string",
		                   name);
	}
	const json_t *caps = json_object_get(o, "capabilities");
	if (caps) {
		size_t i;
		json_t *c;
		if (!json_is_array(caps))
			return iod_err_set(e, -EINVAL,
			                   "replica \"%s\": sandbox.capabilities must be a list",
			                   name);
		json_array_foreach(caps, i, c)
		{
			unsigned cap;
			if (!json_is_string(c) || iod_cap_parse(json_string_value(c), &cap))
				return iod_err_set(
				    e, -EINVAL,
				    "replica \"%s\": sandbox.capabilities[%zu] is not a "
				    "capability name",
				    name, i);
			sb->caps |= 1ull << cap;
		}
	}
	if (!iod_json_get_str(o, "seccomp", &s) && !strcmp(s, "unconfined"))
		sb->seccomp = IOD_SPEC_SECCOMP_UNCONFINED;
	else if (json_object_get(o, "seccomp") &&
	         (iod_json_get_str(o, "seccomp", &s) || strcmp(s, "default")))
		return iod_err_set(e, -EINVAL,
		                   "replica \"%s\": sandbox.seccomp must be default or unconfined "
		                   "(a profile of its own comes through a spec)",
		                   name);
	u = IOD_SPEC_NET_AUTO;
	if ((rc = get_enum(o, "network", netmode_names, 4, &u, name, e)))
		return rc;
	sb->network = (enum iod_spec_netmode)u;
	if (json_object_get(o, "best_effort") &&
	    iod_json_get_bool(o, "best_effort", &sb->best_effort))
		return iod_err_set(
		    e, -EINVAL, "replica \"%s\": sandbox.best_effort must be true or false", name);
	return 0;
}

int iod_agent_replica_from_json(const json_t *o, struct iod_agent_replica *r, struct iod_err *e)
{
	const char *name = "?";
	uint64_t v;
	unsigned u;
	int rc;

	memset(r, 0, sizeof(*r));
	r->numa_node = -1;
	if (!json_is_object(o))
		return iod_err_set(e, -EINVAL, "a replica must be a JSON object");
	if (iod_json_get_str(o, "name", &name) || !name[0])
		return iod_err_set(e, -EINVAL, "a replica has no \"name\" string");
	if ((rc = get_str(o, "name", r->name, sizeof(r->name), name, e)) ||
	    (rc = get_str(o, "service", r->service, sizeof(r->service), name, e)))
		return rc;
	/* the name becomes a directory, a cgroup and a log path: the cluster's
	 * name rule, as for every object (iod_state_name_valid) */
	if (!iod_state_name_valid(r->name))
		return iod_err_set(e, -EINVAL,
		                   "replica name \"%s\" is not valid: letters, digits, '-', '_' "
		                   "and '.', not starting with '.', under %d characters",
		                   name, IOD_NAME_MAX);
	if (r->service[0] && !iod_state_name_valid(r->service))
		return iod_err_set(e, -EINVAL,
		                   "replica \"%s\": service name \"%s\" is not valid: letters, "
		                   "digits, '-', '_' and '.', not starting with '.'",
		                   name, r->service);
	if (!r->service[0])
		memcpy(r->service, r->name, sizeof(r->service));
	v = 0;
	if ((rc = get_u64(o, "ordinal", &v, IOD_SPEC_REPLICAS_MAX, name, e)))
		return rc;
	r->ordinal = (uint32_t)v;
	if ((rc = get_u64(o, "generation", &r->generation, UINT64_MAX, name, e)))
		return rc;
	const char *type;
	if (!iod_json_get_str(o, "type", &type)) {
		if (strcmp(type, "stateful") && strcmp(type, "stateless"))
			return iod_err_set(e, -EINVAL,
			                   "replica \"%s\": \"type\" must be stateful or stateless",
			                   name);
		r->stateful = !strcmp(type, "stateful");
	}
	u = IOD_RESTART_ALWAYS;
	if ((rc = get_enum(o, "restart", restart_names, 3, &u, name, e)))
		return rc;
	r->restart = (enum iod_restart)u;

	json_t *cmd = json_object_get(o, "command");
	if (cmd) {
		if (!json_is_array(cmd))
			return iod_err_set(
			    e, -EINVAL, "replica \"%s\": \"command\" must be an array of strings",
			    name);
		size_t i;
		json_t *a;
		json_array_foreach(cmd, i, a)
		{
			if (!json_is_string(a))
				return iod_err_set(e, -EINVAL,
				                   "replica \"%s\": command[%zu] must be a string",
				                   name, i);
			if (iod_agent_replica_add_arg(r, json_string_value(a)))
				return iod_err_set(
				    e, -E2BIG,
				    "replica \"%s\": command has more than %u arguments "
				    "or %u bytes",
				    name, IOD_AGENT_ARGS_MAX, IOD_AGENT_ARGV_BYTES_MAX);
		}
	}
	json_t *env = json_object_get(o, "env");
	if (env) {
		const char *k;
		json_t *val;
		if (!json_is_object(env))
			return iod_err_set(e, -EINVAL, "replica \"%s\": \"env\" must be an object",
			                   name);
		json_object_foreach(env, k, val)
		{
			if (!json_is_string(val) || !k[0] || strchr(k, '='))
				return iod_err_set(
				    e, -EINVAL,
				    "replica \"%s\": env \"%s\" must be a string with a "
				    "name without '='",
				    name, k);
			if (iod_agent_replica_add_env(r, k, json_string_value(val)))
				return iod_err_set(
				    e, -E2BIG,
				    "replica \"%s\": env has more than %u variables or %u "
				    "bytes",
				    name, IOD_AGENT_ENVS_MAX, IOD_AGENT_ENV_BYTES_MAX);
		}
	}
	if ((rc = get_set(o, "cpus", &r->cpus, name, e)) ||
	    (rc = get_set(o, "gpus", &r->gpus, name, e)))
		return rc;
	json_t *numa = json_object_get(o, "numa");
	if (numa && !json_is_null(numa)) {
		if (!json_is_integer(numa) || json_integer_value(numa) < -1 ||
		    json_integer_value(numa) > 1023)
			return iod_err_set(e, -EINVAL,
			                   "replica \"%s\": \"numa\" must be a node number or -1",
			                   name);
		r->numa_node = (int32_t)json_integer_value(numa);
	}
	v = 0;
	if ((rc = get_u64(o, "cpu_millis", &v, 1000000, name, e)))
		return rc;
	r->cpu_millis = (uint32_t)v;
	if ((rc = get_u64(o, "mem_bytes", &r->mem_bytes, UINT64_MAX / 2, name, e)))
		return rc;
	v = 0;
	if ((rc = get_u64(o, "port", &v, 65535, name, e)))
		return rc;
	r->port = (uint16_t)v;
	json_t *h = json_object_get(o, "health");
	if (h && !json_is_null(h) && (rc = health_from_json(h, &r->health, name, e)))
		return rc;
	json_t *sb = json_object_get(o, "sandbox");
	if (sb && !json_is_null(sb) && (rc = sandbox_from_json(sb, &r->sandbox, name, e)))
		return rc;
	return 0;
}

int iod_agent_manifest_parse(const char *text, size_t len, struct iod_agent_replica *out,
                             uint32_t max, uint32_t *n, struct iod_err *e)
{
	json_t *root, *list;
	int rc;

	*n = 0;
	if (len > IOD_AGENT_MANIFEST_MAX)
		return iod_err_set(e, -E2BIG, "manifest is larger than %u bytes",
		                   IOD_AGENT_MANIFEST_MAX);
	if ((rc = iod_json_parse(text, len, &root, e)))
		return rc;
	list = json_is_object(root) ? json_object_get(root, "replicas") : NULL;
	if (!json_is_array(list)) {
		json_decref(root);
		return iod_err_set(e, -EINVAL, "manifest must be {\"replicas\": [...]}");
	}
	if (json_array_size(list) > max) {
		json_decref(root);
		return iod_err_set(e, -E2BIG,
		                   "manifest lists %zu replicas; this agent runs at most %u",
		                   json_array_size(list), max);
	}
	size_t i;
	json_t *o;
	json_array_foreach(list, i, o)
	{
		struct iod_err re = {0};
		if ((rc = iod_agent_replica_from_json(o, &out[i], &re))) {
			/* one bad replica fails alone when it can be named */
			const char *nm = NULL, *sv = NULL;
			struct iod_agent_replica *r = &out[i];
			if (iod_json_get_str(o, "name", &nm) || !iod_state_name_valid(nm)) {
				json_decref(root);
				return iod_err_set(e, rc, "replicas[%zu]: %s", i, re.msg);
			}
			memset(r, 0, sizeof(*r));
			r->numa_node = -1;
			memcpy(r->name, nm, strlen(nm) + 1);
			if (iod_json_get_str(o, "service", &sv) || !iod_state_name_valid(sv) ||
			    iod_strlcpy(r->service, sv, sizeof(r->service)))
				memcpy(r->service, r->name, sizeof(r->service));
			snprintf(r->fail, sizeof(r->fail), "%s", re.msg);
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(out[j].name, out[i].name)) {
				json_decref(root);
				return iod_err_set(e, -EINVAL,
				                   "replicas[%zu]: name \"%s\" is used twice", i,
				                   out[i].name);
			}
		(*n)++;
	}
	json_decref(root);
	return 0;
}

json_t *iod_agent_replica_to_json(const struct iod_agent_replica *r)
{
	char cpus[256], gpus[256];
	json_t *o = json_object(), *cmd = json_array(), *env = json_object();

	iod_bitmap_format(&r->cpus, cpus, sizeof(cpus));
	iod_bitmap_format(&r->gpus, gpus, sizeof(gpus));
	for (uint32_t i = 0; i < r->argc; i++)
		json_array_append_new(cmd, json_string(iod_agent_strv_at(
		                               r->argv_buf, sizeof(r->argv_buf), r->argc, i)));
	for (uint32_t i = 0; i < r->envc; i++) {
		const char *kv = iod_agent_strv_at(r->env_buf, sizeof(r->env_buf), r->envc, i);
		const char *eq = kv ? strchr(kv, '=') : NULL;
		if (!eq)
			continue;
		char k[128];
		snprintf(k, sizeof(k), "%.*s", (int)(eq - kv), kv);
		json_object_set_new(env, k, json_string(eq + 1));
	}
	json_object_set_new(o, "name", json_string(r->name));
	json_object_set_new(o, "service", json_string(r->service));
	json_object_set_new(o, "ordinal", json_integer(r->ordinal));
	json_object_set_new(o, "generation", json_integer((json_int_t)r->generation));
	json_object_set_new(o, "type", json_string(r->stateful ? "stateful" : "stateless"));
	json_object_set_new(o, "restart", json_string(restart_names[r->restart]));
	json_object_set_new(o, "command", cmd);
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "cpus", json_string(cpus));
	json_object_set_new(o, "gpus", json_string(gpus));
	json_object_set_new(o, "numa", json_integer(r->numa_node));
	json_object_set_new(o, "cpu_millis", json_integer(r->cpu_millis));
	json_object_set_new(o, "mem_bytes", json_integer((json_int_t)r->mem_bytes));
	json_object_set_new(o, "port", json_integer(r->port));
	{
		const struct iod_agent_sandbox *sb = &r->sandbox;
		json_t *b = json_object(), *caps = json_array();
		char user[32];
		if (sb->user == IOD_SPEC_USER_ROOT)
			snprintf(user, sizeof(user), "root");
		else if (sb->user == IOD_SPEC_USER_ID)
			snprintf(user, sizeof(user), "%u:%u", sb->uid, sb->gid);
		else
			snprintf(user, sizeof(user), "dynamic");
		for (unsigned c = 0; c < IOD_CAPS_N; c++)
			if (sb->caps & (1ull << c))
				json_array_append_new(caps, json_string(iod_cap_name(c)));
		json_object_set_new(b, "user", json_string(user));
		json_object_set_new(b, "capabilities", caps);
		json_object_set_new(
		    b, "seccomp",
		    json_string(sb->seccomp == IOD_SPEC_SECCOMP_UNCONFINED ? "unconfined"
		                : sb->seccomp == IOD_SPEC_SECCOMP_PROFILE  ? "profile"
		                                                           : "default"));
		json_object_set_new(b, "network", json_string(netmode_names[sb->network % 4]));
		json_object_set_new(b, "best_effort", json_boolean(sb->best_effort));
		json_object_set_new(o, "sandbox", b);
	}
	if (r->health.kind != IOD_HEALTH_NONE) {
		json_t *h = json_object();
		json_object_set_new(h, "kind", json_string(health_names[r->health.kind]));
		if (r->health.command[0])
			json_object_set_new(h, "command", json_string(r->health.command));
		if (r->health.port)
			json_object_set_new(h, "port", json_integer(r->health.port));
		if (r->health.path[0])
			json_object_set_new(h, "path", json_string(r->health.path));
		json_object_set_new(
		    h, "interval_ms",
		    json_integer((json_int_t)(r->health.interval_ns / IOD_NS_PER_MS)));
		json_object_set_new(
		    h, "timeout_ms",
		    json_integer((json_int_t)(r->health.timeout_ns / IOD_NS_PER_MS)));
		json_object_set_new(h, "healthy_threshold",
		                    json_integer(r->health.healthy_threshold));
		json_object_set_new(h, "unhealthy_threshold",
		                    json_integer(r->health.unhealthy_threshold));
		json_object_set_new(o, "health", h);
	}
	return o;
}
