/*
 * seccomp.c: OCI / Docker seccomp profiles (JSON) into a plain, bounded
 * struct, and the Linux capability names the spec and profiles use.
 *
 * A service may bring its own seccomp profile (sandbox.seccomp) in the
 * format runc, crun, Docker and Kubernetes' Localhost profiles share: the
 * OCI runtime spec's linux.seccomp object ({defaultAction,
 * defaultErrnoRet, architectures, syscalls: [{names, action, errnoRet,
 * args: [{index, value, valueTwo, op}]}]}) plus Docker's additions
 * (archMap, a rule's includes/excludes by caps, arches and minKernel, and
 * the old single "name"). The spec loader validates a profile with this
 * parser, so a bad one is a deploy-time error; the node agent parses the
 * same text again and compiles it with libseccomp (src/agent/seccomp.c).
 *
 * It is a parser of untrusted input (fuzz target: fuzz_seccomp_profile):
 * every field is type-checked and every list is bounded (IOD_SECCOMP_*).
 * Syscall names are kept as written: which exist is the kernel's and
 * libseccomp's business at compile time, and an unknown name is skipped
 * there as Docker does, since profiles name syscalls of every architecture.
 * Pure: no I/O, no clock; all memory comes from the profile's arena.
 */
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- capability names ------------------------------------------------------ */

static const char *const cap_names[IOD_CAPS_N] = {"CHOWN",
                                                  "DAC_OVERRIDE",
                                                  "DAC_READ_SEARCH",
                                                  "FOWNER",
                                                  "FSETID",
                                                  "KILL",
                                                  "SETGID",
                                                  "SETUID",
                                                  "SETPCAP",
                                                  "LINUX_IMMUTABLE",
                                                  "NET_BIND_SERVICE",
                                                  "NET_BROADCAST",
                                                  "NET_ADMIN",
                                                  "NET_RAW",
                                                  "IPC_LOCK",
                                                  "IPC_OWNER",
                                                  "SYS_MODULE",
                                                  "SYS_RAWIO",
                                                  "SYS_CHROOT",
                                                  "SYS_PTRACE",
                                                  "SYS_PACCT",
                                                  "SYS_ADMIN",
                                                  "SYS_BOOT",
                                                  "SYS_NICE",
                                                  "SYS_RESOURCE",
                                                  "SYS_TIME",
                                                  "SYS_TTY_CONFIG",
                                                  "MKNOD",
                                                  "LEASE",
                                                  "AUDIT_WRITE",
                                                  "AUDIT_CONTROL",
                                                  "SETFCAP",
                                                  "MAC_OVERRIDE",
                                                  "MAC_ADMIN",
                                                  "SYSLOG",
                                                  "WAKE_ALARM",
                                                  "BLOCK_SUSPEND",
                                                  "AUDIT_READ",
                                                  "PERFMON",
                                                  "BPF",
                                                  "CHECKPOINT_RESTORE"};

const char *iod_cap_name(unsigned cap)
{
	return cap < IOD_CAPS_N ? cap_names[cap] : NULL;
}

int iod_cap_parse(const char *s, unsigned *cap)
{
	if (!strncasecmp(s, "CAP_", 4))
		s += 4;
	for (unsigned i = 0; i < IOD_CAPS_N; i++)
		if (!strcasecmp(s, cap_names[i])) {
			*cap = i;
			return 0;
		}
	return -EINVAL;
}

/* ---- names of actions, comparisons, architectures -------------------------- */

static const char *const action_names[] = {
#define X(n, s) s,
    IOD_SECCOMP_ACTIONS(X)
#undef X
};
static const char *const op_names[] = {
#define X(n, s) s,
    IOD_SECCOMP_OPS(X)
#undef X
};
static const char *const arch_names[] = {
#define X(n, s) s,
    IOD_SECCOMP_ARCHES(X)
#undef X
};

const char *iod_seccomp_action_name(enum iod_seccomp_action a)
{
	return (unsigned)a < IOD_ARRAY_LEN(action_names) ? action_names[a] : "?";
}
const char *iod_seccomp_op_name(enum iod_seccomp_op o)
{
	return (unsigned)o < IOD_ARRAY_LEN(op_names) ? op_names[o] : "?";
}
const char *iod_seccomp_arch_name(enum iod_seccomp_arch a)
{
	return (unsigned)a < IOD_ARRAY_LEN(arch_names) ? arch_names[a] : "?";
}

static int name_index(const char *const *tab, unsigned n, const char *s)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(tab[i], s))
			return (int)i;
	return -1;
}

static int parse_action(const char *s, enum iod_seccomp_action *out)
{
	if (!strcmp(s, "SCMP_ACT_KILL_THREAD")) { /* the same as SCMP_ACT_KILL */
		*out = IOD_SECCOMP_KILL_THREAD;
		return 0;
	}
	int i = name_index(action_names, IOD_ARRAY_LEN(action_names), s);
	if (i < 0)
		return -EINVAL;
	*out = (enum iod_seccomp_action)i;
	return 0;
}

/* ---- the parser --------------------------------------------------------------- */

struct ps {
	struct iod_seccomp_profile *p; /* being filled */
	struct iod_err *e;             /* first problem */
	uint32_t names_total;          /* names over all rules */
};

static int str_field(struct ps *ps, const json_t *o, const char *key, const char *where,
                     const char **out)
{
	const json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return iod_err_set(ps->e, -EINVAL, "%s: \"%s\" must be a string", where, key);
	*out = json_string_value(v);
	return 0;
}

static int u64_field(struct ps *ps, const json_t *o, const char *key, const char *where,
                     uint64_t max, bool *has, uint64_t *out)
{
	const json_t *v = json_object_get(o, key);
	*has = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return iod_err_set(ps->e, -EINVAL, "%s: \"%s\" must be a whole number in 0..%llu",
		                   where, key, (unsigned long long)max);
	*has = true;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int arches_list(struct ps *ps, const json_t *a, const char *where, uint32_t *mask)
{
	size_t i;
	json_t *x;
	if (!json_is_array(a))
		return iod_err_set(ps->e, -EINVAL, "%s must be a list of SCMP_ARCH_* names", where);
	if (json_array_size(a) > IOD_SECCOMP_ARCHES_N * 2)
		return iod_err_set(ps->e, -EINVAL, "%s lists %zu architectures", where,
		                   json_array_size(a));
	json_array_foreach(a, i, x)
	{
		int k = json_is_string(x) ? name_index(arch_names, IOD_ARRAY_LEN(arch_names),
		                                       json_string_value(x))
		                          : -1;
		if (k < 0)
			return iod_err_set(ps->e, -EINVAL, "%s[%zu]: not an SCMP_ARCH_* name",
			                   where, i);
		*mask |= 1u << k;
	}
	return 0;
}

/* "4.8" or "5.10.1" -> major << 16 | minor */
static int kernel_version(const char *s, uint32_t *out)
{
	char *end;
	if (!isdigit((unsigned char)s[0]))
		return -EINVAL;
	unsigned long maj = strtoul(s, &end, 10), min = 0;
	if (*end == '.') {
		if (!isdigit((unsigned char)end[1]))
			return -EINVAL;
		min = strtoul(end + 1, &end, 10);
		if (*end == '.') {
			if (!isdigit((unsigned char)end[1]))
				return -EINVAL;
			strtoul(end + 1, &end, 10);
		}
	}
	if (*end || maj > 0xffff || min > 0xffff)
		return -EINVAL;
	*out = (uint32_t)(maj << 16 | min);
	return 0;
}

static int filter_cond(struct ps *ps, const json_t *o, const char *where,
                       struct iod_seccomp_cond *c)
{
	const char *kv;
	size_t i;
	json_t *x;
	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o))
		return iod_err_set(ps->e, -EINVAL, "%s must be an object", where);
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)o, key, val)
	{
		if (!strcmp(key, "caps")) {
			if (!json_is_array(val) || json_array_size(val) > IOD_CAPS_N * 2)
				return iod_err_set(ps->e, -EINVAL,
				                   "%s.caps must be a list of capability names",
				                   where);
			json_array_foreach(val, i, x)
			{
				unsigned cap;
				if (!json_is_string(x) || iod_cap_parse(json_string_value(x), &cap))
					return iod_err_set(ps->e, -EINVAL,
					                   "%s.caps[%zu]: not a capability name",
					                   where, i);
				c->caps |= 1ull << cap;
			}
		} else if (!strcmp(key, "arches")) {
			char w[96];
			snprintf(w, sizeof(w), "%s.arches", where);
			if (arches_list(ps, val, w, &c->arches))
				return -EINVAL;
		} else if (!strcmp(key, "minKernel")) {
			kv = json_is_string(val) ? json_string_value(val) : NULL;
			if (!kv || kernel_version(kv, &c->min_kernel))
				return iod_err_set(ps->e, -EINVAL,
				                   "%s.minKernel must be a version like \"4.8\"",
				                   where);
		} else {
			return iod_err_set(ps->e, -EINVAL,
			                   "%s: unknown key \"%.40s\" (caps, arches, minKernel)",
			                   where, key);
		}
	}
	return 0;
}

static int one_arg(struct ps *ps, const json_t *o, const char *where, struct iod_seccomp_arg *a)
{
	bool has;
	uint64_t v;
	const char *op;
	if (!json_is_object(o))
		return iod_err_set(ps->e, -EINVAL, "%s must be an object", where);
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)o, key, val)
	{
		if (strcmp(key, "index") && strcmp(key, "value") && strcmp(key, "valueTwo") &&
		    strcmp(key, "op"))
			return iod_err_set(ps->e, -EINVAL,
			                   "%s: unknown key \"%.40s\" (index, value, valueTwo, op)",
			                   where, key);
	}
	if (u64_field(ps, o, "index", where, 5, &has, &v))
		return -EINVAL;
	if (!has)
		return iod_err_set(ps->e, -EINVAL, "%s needs \"index\" (0..5)", where);
	a->index = (uint32_t)v;
	if (u64_field(ps, o, "value", where, (uint64_t)INT64_MAX, &has, &a->value) ||
	    u64_field(ps, o, "valueTwo", where, (uint64_t)INT64_MAX, &has, &a->value_two) ||
	    str_field(ps, o, "op", where, &op))
		return -EINVAL;
	int k = op ? name_index(op_names, IOD_ARRAY_LEN(op_names), op) : -1;
	if (k < 0)
		return iod_err_set(ps->e, -EINVAL,
		                   "%s: \"op\" must be one of SCMP_CMP_NE, _LT, _LE, "
		                   "_EQ, _GE, _GT, _MASKED_EQ",
		                   where);
	a->op = (enum iod_seccomp_op)k;
	return 0;
}

static int add_name(struct ps *ps, const json_t *x, const char *where)
{
	struct iod_seccomp_profile *p = ps->p;
	const char *s = json_is_string(x) ? json_string_value(x) : NULL;
	size_t l = s ? strlen(s) : 0;
	if (!s || !l || l >= IOD_SECCOMP_NAME_MAX)
		return iod_err_set(ps->e, -EINVAL,
		                   "%s: a syscall name must be a string of 1..%d "
		                   "bytes",
		                   where, IOD_SECCOMP_NAME_MAX - 1);
	for (size_t i = 0; i < l; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return iod_err_set(ps->e, -EINVAL, "%s: \"%.40s\" is not a syscall name",
			                   where, s);
	if (ps->names_total >= IOD_SECCOMP_NAMES_MAX)
		return iod_err_set(ps->e, -E2BIG,
		                   "the profile names more than %d syscalls "
		                   "(IOD_SECCOMP_NAMES_MAX)",
		                   IOD_SECCOMP_NAMES_MAX);
	p->names[ps->names_total] = iod_arena_strdup(&p->arena, s);
	if (!p->names[ps->names_total])
		return iod_err_set(ps->e, -ENOMEM, "out of memory");
	ps->names_total++;
	return 0;
}

static int one_rule(struct ps *ps, const json_t *o, size_t idx, struct iod_seccomp_rule *r)
{
	char where[64];
	const char *s;
	bool has;
	uint64_t v;
	size_t i;
	json_t *x;

	snprintf(where, sizeof(where), "syscalls[%zu]", idx);
	if (!json_is_object(o))
		return iod_err_set(ps->e, -EINVAL, "%s must be an object", where);
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)o, key, val)
	{
		static const char *const known[] = {"names", "name",     "action",   "errnoRet",
		                                    "args",  "includes", "excludes", "comment"};
		if (name_index(known, IOD_ARRAY_LEN(known), key) < 0)
			return iod_err_set(
			    ps->e, -EINVAL,
			    "%s: unknown key \"%.40s\" (names, action, errnoRet, args, "
			    "includes, excludes, comment)",
			    where, key);
	}
	r->names = ps->names_total;
	const json_t *names = json_object_get(o, "names");
	if (names && !json_is_null(names)) {
		if (!json_is_array(names))
			return iod_err_set(ps->e, -EINVAL, "%s: \"names\" must be a list", where);
		json_array_foreach(names, i, x) if (add_name(ps, x, where)) return -EINVAL;
	}
	const json_t *one = json_object_get(o, "name");
	if (one && !json_is_null(one) && add_name(ps, one, where))
		return -EINVAL;
	r->names_n = ps->names_total - r->names;
	if (!r->names_n)
		return iod_err_set(ps->e, -EINVAL, "%s names no syscall", where);
	if (str_field(ps, o, "action", where, &s))
		return -EINVAL;
	if (!s)
		return iod_err_set(ps->e, -EINVAL, "%s needs an \"action\"", where);
	if (!strcmp(s, "SCMP_ACT_NOTIFY"))
		return iod_err_set(ps->e, -EINVAL,
		                   "%s: SCMP_ACT_NOTIFY needs a listener, which iod does not run",
		                   where);
	if (parse_action(s, &r->action))
		return iod_err_set(ps->e, -EINVAL, "%s: unknown action \"%.40s\"", where, s);
	if (u64_field(ps, o, "errnoRet", where, 4095, &has, &v))
		return -EINVAL;
	r->errno_ret = has ? (uint32_t)v : 0;
	r->has_errno = has;
	const json_t *args = json_object_get(o, "args");
	if (args && !json_is_null(args)) {
		if (!json_is_array(args) || json_array_size(args) > IOD_SECCOMP_ARGS_MAX)
			return iod_err_set(ps->e, -EINVAL,
			                   "%s: \"args\" must be a list of at most %d", where,
			                   IOD_SECCOMP_ARGS_MAX);
		json_array_foreach(args, i, x)
		{
			char w[96];
			snprintf(w, sizeof(w), "%s.args[%zu]", where, i);
			if (one_arg(ps, x, w, &r->args[i]))
				return -EINVAL;
		}
		r->args_n = (uint32_t)json_array_size(args);
	}
	char w[96];
	snprintf(w, sizeof(w), "%s.includes", where);
	if (filter_cond(ps, json_object_get(o, "includes"), w, &r->includes))
		return -EINVAL;
	snprintf(w, sizeof(w), "%s.excludes", where);
	if (filter_cond(ps, json_object_get(o, "excludes"), w, &r->excludes))
		return -EINVAL;
	if (str_field(ps, o, "comment", where, &s))
		return -EINVAL;
	return 0;
}

static int parse_root(struct ps *ps, const json_t *root)
{
	struct iod_seccomp_profile *p = ps->p;
	const char *s;
	bool has;
	uint64_t v;
	size_t i;
	json_t *x;

	if (!json_is_object(root))
		return iod_err_set(ps->e, -EINVAL, "a seccomp profile must be a JSON object");
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)root, key, val)
	{
		static const char *const known[] = {
		    "defaultAction", "defaultErrnoRet", "architectures", "archMap",
		    "syscalls",      "flags",           "listenerPath",  "listenerMetadata"};
		if (name_index(known, IOD_ARRAY_LEN(known), key) < 0)
			return iod_err_set(ps->e, -EINVAL,
			                   "unknown key \"%.40s\" (defaultAction, defaultErrnoRet, "
			                   "architectures, archMap, syscalls, flags)",
			                   key);
	}
	if (str_field(ps, root, "defaultAction", "the profile", &s))
		return -EINVAL;
	if (!s)
		return iod_err_set(ps->e, -EINVAL, "the profile needs a \"defaultAction\"");
	if (!strcmp(s, "SCMP_ACT_NOTIFY") || parse_action(s, &p->default_action))
		return iod_err_set(ps->e, -EINVAL,
		                   "defaultAction \"%.40s\" is not an action iod runs", s);
	if (u64_field(ps, root, "defaultErrnoRet", "the profile", 4095, &has, &v))
		return -EINVAL;
	p->default_errno = has ? (uint32_t)v : 1; /* EPERM, as runc and Docker */
	const json_t *arches = json_object_get(root, "architectures");
	if (arches && !json_is_null(arches) && arches_list(ps, arches, "architectures", &p->arches))
		return -EINVAL;
	const json_t *am = json_object_get(root, "archMap");
	if (am && !json_is_null(am)) {
		if (!json_is_array(am) || json_array_size(am) > IOD_SECCOMP_ARCHES_N)
			return iod_err_set(ps->e, -EINVAL, "archMap must be a list");
		json_array_foreach(am, i, x)
		{
			char w[64];
			const char *a = NULL;
			snprintf(w, sizeof(w), "archMap[%zu]", i);
			if (!json_is_object(x) || str_field(ps, x, "architecture", w, &a) || !a ||
			    name_index(arch_names, IOD_ARRAY_LEN(arch_names), a) < 0)
				return iod_err_set(ps->e, -EINVAL,
				                   "%s needs \"architecture\": SCMP_ARCH_*", w);
			p->arches |= 1u << name_index(arch_names, IOD_ARRAY_LEN(arch_names), a);
			const json_t *sub = json_object_get(x, "subArchitectures");
			char ws[80];
			snprintf(ws, sizeof(ws), "%s.subArchitectures", w);
			if (sub && !json_is_null(sub) && arches_list(ps, sub, ws, &p->arches))
				return -EINVAL;
		}
	}
	const json_t *flags = json_object_get(root, "flags");
	if (flags && !json_is_null(flags) && (!json_is_array(flags) || json_array_size(flags) > 8))
		return iod_err_set(ps->e, -EINVAL, "flags must be a list of SECCOMP_FILTER_FLAG_*");
	json_array_foreach(flags, i, x)
	{
		const char *f = json_is_string(x) ? json_string_value(x) : "";
		if (strcmp(f, "SECCOMP_FILTER_FLAG_LOG") &&
		    strcmp(f, "SECCOMP_FILTER_FLAG_SPEC_ALLOW") &&
		    strcmp(f, "SECCOMP_FILTER_FLAG_TSYNC"))
			return iod_err_set(
			    ps->e, -EINVAL,
			    "flags[%zu]: not a filter flag iod applies (LOG, SPEC_ALLOW, "
			    "TSYNC)",
			    i);
		if (!strcmp(f, "SECCOMP_FILTER_FLAG_LOG"))
			p->log = true;
	}
	const json_t *sc = json_object_get(root, "syscalls");
	if (!sc || json_is_null(sc))
		return 0; /* the default action for everything */
	if (!json_is_array(sc))
		return iod_err_set(ps->e, -EINVAL, "\"syscalls\" must be a list of rules");
	if (json_array_size(sc) > IOD_SECCOMP_RULES_MAX)
		return iod_err_set(ps->e, -E2BIG,
		                   "the profile has %zu rules; the most is %d "
		                   "(IOD_SECCOMP_RULES_MAX)",
		                   json_array_size(sc), IOD_SECCOMP_RULES_MAX);
	p->rules = iod_arena_alloc(&p->arena, sizeof(*p->rules) * (json_array_size(sc) + 1));
	if (!p->rules)
		return iod_err_set(ps->e, -ENOMEM, "out of memory");
	memset(p->rules, 0, sizeof(*p->rules) * (json_array_size(sc) + 1));
	json_array_foreach(sc, i, x)
	{
		if (one_rule(ps, x, i, &p->rules[i]))
			return -EINVAL;
		p->rules_n++;
	}
	return 0;
}

int iod_seccomp_profile_from_json(const json_t *root, struct iod_seccomp_profile **out,
                                  struct iod_err *e)
{
	struct iod_seccomp_profile *p = calloc(1, sizeof(*p));
	struct iod_err local = {0};
	struct ps ps = {.p = p, .e = e ? e : &local};
	int rc;

	*out = NULL;
	if (!p)
		return iod_err_set(e, -ENOMEM, "out of memory");
	iod_arena_init(&p->arena, 8192, IOD_SECCOMP_PROFILE_BYTES_MAX * 4);
	p->names = iod_arena_alloc(&p->arena, sizeof(*p->names) * IOD_SECCOMP_NAMES_MAX);
	if (!p->names) {
		iod_seccomp_profile_free(p);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	rc = parse_root(&ps, root);
	if (rc) {
		iod_seccomp_profile_free(p);
		return ps.e->code ? ps.e->code : rc;
	}
	p->names_n = ps.names_total;
	*out = p;
	return 0;
}

int iod_seccomp_profile_parse(const char *text, size_t len, struct iod_seccomp_profile **out,
                              struct iod_err *e)
{
	json_t *root;
	int rc;
	*out = NULL;
	if (len > IOD_SECCOMP_PROFILE_BYTES_MAX)
		return iod_err_set(e, -E2BIG,
		                   "the profile is %zu bytes; the most is %d "
		                   "(IOD_SECCOMP_PROFILE_BYTES_MAX)",
		                   len, IOD_SECCOMP_PROFILE_BYTES_MAX);
	if ((rc = iod_json_parse(text, len, &root, e)))
		return rc;
	rc = iod_seccomp_profile_from_json(root, out, e);
	json_decref(root);
	return rc;
}

void iod_seccomp_profile_free(struct iod_seccomp_profile *p)
{
	if (!p)
		return;
	iod_arena_free(&p->arena);
	free(p);
}
