/*
 * schema.c: the cluster configuration's schema and every decision on it
 * (pure): key lookup with suggestions, value parsing and checking, the
 * stored document and its history, a node's effective values under what it
 * can honour, and which nodes have not applied a revision. See config.h.
 */
#include "iod/config.h"
#include "iod/limits.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const transports[] = {"tcp", "shm", "rdma", "auto", NULL};
static const char *const ar_policies[] = {"ecmp",      "minrtt",     "flowlet",
                                          "clove-ecn", "probe-util", NULL};
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};

#define MS(x) ((uint64_t)(x))
#define KIB 1024ull
#define MIB (1024ull * 1024ull)

static const struct iod_config_key keys[] = {
    {"service_mesh.transport", IOD_CONFIG_ENUM, transports, 0, 0, "tcp",
     "agents (per node, rdma falls back to tcp without a device); libiod-xfer",
     "how mesh and transfer traffic moves: tcp, shm (same node), rdma, or auto"},
    {"network.adaptive_routing", IOD_CONFIG_ENUM, ar_policies, 0, 0, IOD_CONFIG_AR_DEFAULT,
     "each node's virtual switch, live (its tenants' VXLAN to other nodes; ecmp = the "
     "hash port); `iod dp run` takes its own from its config",
     "the outer-source-port policy of the overlay (docs/adaptive-routing.md)"},
    {"log.level", IOD_CONFIG_ENUM, log_levels, 0, 0, "the agent's --log-level", "agents, live",
     "the agents' log level"},
    {"telemetry.interval", IOD_CONFIG_DURATION, NULL, MS(IOD_TEL_INTERVAL_MIN_MS), MS(60000),
     "the agent's own (1s)", "agents' telemetry sampler, live from its next sample",
     "how often each agent samples its node"},
    {"telemetry.push_interval", IOD_CONFIG_DURATION, NULL, MS(IOD_TEL_INTERVAL_MIN_MS), MS(600000),
     "the agent's own (5s)", "agents' telemetry sampler, live",
     "how often each agent sends its summary to the control plane"},
    {"xfer.deadline", IOD_CONFIG_DURATION, NULL, MS(10), MS(600000), "5s",
     "libiod-xfer in agents' replicas (IOD_XFER_DEADLINE_MS)",
     "how long a transfer may wait on its peer before it fails"},
    {"xfer.chunk_size", IOD_CONFIG_SIZE, NULL, 4 * KIB, 64 * MIB, "1MiB",
     "libiod-xfer (IOD_XFER_CHUNK)", "the unit a large transfer is cut into"},
};

const struct iod_config_key *iod_config_keys(size_t *n)
{
	*n = IOD_ARRAY_LEN(keys);
	return keys;
}

int iod_config_key_find(const char *path, const struct iod_config_key **k, struct iod_err *e)
{
	const char *names[IOD_ARRAY_LEN(keys)];
	for (size_t i = 0; i < IOD_ARRAY_LEN(keys); i++) {
		if (!strcmp(path, keys[i].path)) {
			*k = &keys[i];
			return 0;
		}
		names[i] = keys[i].path;
	}
	/* a section name ("service_mesh") suggests its first key */
	size_t pl = strlen(path);
	for (size_t i = 0; i < IOD_ARRAY_LEN(keys); i++)
		if (pl && !strncmp(keys[i].path, path, pl) && keys[i].path[pl] == '.')
			return iod_err_set(e, -ENOENT, "unknown key \"%s\"; did you mean \"%s\"?",
			                   path, keys[i].path);
	const char *s = iod_suggest(path, names, IOD_ARRAY_LEN(names));
	if (s)
		return iod_err_set(e, -ENOENT, "unknown key \"%s\"; did you mean \"%s\"?", path, s);
	return iod_err_set(e, -ENOENT, "unknown key \"%s\" (`iod config view` lists the keys)",
	                   path);
}

static void words_text(const struct iod_config_key *k, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = 0;
	for (const char *const *w = k->words; *w && off < len; w++) {
		int n = snprintf(buf + off, len - off, "%s%s", off ? "|" : "", *w);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}

static int parse_bool(const char *t, bool *b)
{
	static const char *const yes[] = {"true", "on", "yes", "1"}, *const no[] = {"false", "off",
	                                                                            "no", "0"};
	for (size_t i = 0; i < IOD_ARRAY_LEN(yes); i++) {
		if (!strcmp(t, yes[i]))
			return *b = true, 0;
		if (!strcmp(t, no[i]))
			return *b = false, 0;
	}
	return -EINVAL;
}

/* A number parsed by base/'s unit parsers, bounded by the row. */
static int parse_number(const struct iod_config_key *k, const char *text, uint64_t *v,
                        struct iod_err *e)
{
	struct iod_err pe = {0};
	uint64_t x;
	if (k->type == IOD_CONFIG_DURATION) {
		if (iod_parse_duration(text, &x, &pe))
			return iod_err_set(e, -EINVAL, "%s: %s", k->path, pe.msg);
		if (x % 1000000ull)
			return iod_err_set(e, -EINVAL, "%s: \"%s\" is not a whole number of ms",
			                   k->path, text);
		x /= 1000000ull;
	} else if (iod_parse_size(text, &x, &pe)) {
		return iod_err_set(e, -EINVAL, "%s: %s", k->path, pe.msg);
	}
	*v = x;
	return 0;
}

int iod_config_value_parse(const struct iod_config_key *k, const char *text, json_t **out,
                           struct iod_err *e)
{
	json_t *v = NULL;
	uint64_t x;
	bool b;
	switch (k->type) {
	case IOD_CONFIG_ENUM: v = json_string(text); break;
	case IOD_CONFIG_BOOL:
		if (parse_bool(text, &b))
			return iod_err_set(e, -EINVAL, "%s: \"%s\" is not true or false", k->path,
			                   text);
		v = json_boolean(b);
		break;
	default:
		if (parse_number(k, text, &x, e))
			return -EINVAL;
		v = json_integer((json_int_t)IOD_MIN(x, (uint64_t)INT64_MAX));
	}
	if (!v)
		return iod_err_set(e, -EINVAL, "%s: not a valid string", k->path);
	int rc = iod_config_value_check(k, v, e);
	if (rc) {
		json_decref(v);
		return rc;
	}
	*out = v;
	return 0;
}

static void format_ms(uint64_t ms, char *buf, size_t len)
{
	if (ms && ms % 3600000 == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
	else if (ms && ms % 60000 == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
	else if (ms && ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
}

static void format_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB"};
	size_t i = 0;
	while (i + 1 < IOD_ARRAY_LEN(u) && b && b % 1024 == 0) {
		b /= 1024;
		i++;
	}
	snprintf(buf, len, "%llu%s", (unsigned long long)b, u[i]);
}

void iod_config_value_format(const struct iod_config_key *k, const json_t *v, char *buf, size_t len)
{
	buf[0] = 0;
	if (k->type == IOD_CONFIG_ENUM && json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (k->type == IOD_CONFIG_BOOL && json_is_boolean(v))
		snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
	else if (json_is_integer(v) && json_integer_value(v) >= 0) {
		uint64_t x = (uint64_t)json_integer_value(v);
		if (k->type == IOD_CONFIG_DURATION)
			format_ms(x, buf, len);
		else if (k->type == IOD_CONFIG_SIZE)
			format_bytes(x, buf, len);
	}
}

static int check_range(const struct iod_config_key *k, const json_t *v, struct iod_err *e)
{
	char lo[32], hi[32];
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return iod_err_set(e, -EINVAL, "%s: must be a %s", k->path,
		                   k->type == IOD_CONFIG_DURATION ? "duration" : "size");
	uint64_t x = (uint64_t)json_integer_value(v);
	if (x >= k->min && x <= k->max)
		return 0;
	json_t *a = json_integer((json_int_t)k->min), *b = json_integer((json_int_t)k->max);
	iod_config_value_format(k, a, lo, sizeof(lo));
	iod_config_value_format(k, b, hi, sizeof(hi));
	json_decref(a);
	json_decref(b);
	return iod_err_set(e, -EINVAL, "%s: must be from %s to %s", k->path, lo, hi);
}

int iod_config_value_check(const struct iod_config_key *k, const json_t *v, struct iod_err *e)
{
	char w[128];
	switch (k->type) {
	case IOD_CONFIG_ENUM:
		if (json_is_string(v))
			for (const char *const *x = k->words; *x; x++)
				if (!strcmp(*x, json_string_value(v)))
					return 0;
		words_text(k, w, sizeof(w));
		if (!json_is_string(v))
			return iod_err_set(e, -EINVAL, "%s: must be one of %s", k->path, w);
		size_t n = 0;
		while (k->words[n])
			n++;
		const char *s = iod_suggest(json_string_value(v), k->words, n);
		return iod_err_set(e, -EINVAL, "%s: \"%s\" is not one of %s%s%s%s", k->path,
		                   json_string_value(v), w, s ? " (did you mean \"" : "",
		                   s ? s : "", s ? "\"?)" : "");
	case IOD_CONFIG_BOOL:
		return json_is_boolean(v)
		           ? 0
		           : iod_err_set(e, -EINVAL, "%s: must be true or false", k->path);
	default: return check_range(k, v, e);
	}
}

int iod_config_settings_check(const json_t *settings, struct iod_err *e)
{
	const char *key;
	const json_t *v;
	const struct iod_config_key *k;
	if (!json_is_object(settings))
		return iod_err_set(e, -EINVAL, "settings must be an object");
	json_object_foreach((json_t *)settings, key, v)
	{
		if (iod_config_key_find(key, &k, e) || iod_config_value_check(k, v, e))
			return -EINVAL;
	}
	return 0;
}

static const json_t *empty_settings(void)
{
	static json_t *empty;
	if (!empty)
		empty = json_object();
	return empty;
}

const json_t *iod_config_doc_settings(const json_t *doc)
{
	const json_t *s = json_object_get(doc, "settings");
	return json_is_object(s) ? s : empty_settings();
}

int iod_config_doc_check(const json_t *doc, struct iod_err *e)
{
	const json_t *s, *h, *x;
	size_t i;
	uint64_t rev;
	if (!json_is_object(doc))
		return iod_err_set(e, -EINVAL, "config document must be an object");
	if ((s = json_object_get(doc, "settings")) && iod_config_settings_check(s, e))
		return -EINVAL;
	if (!(h = json_object_get(doc, "history")))
		return 0;
	if (!json_is_array(h) || json_array_size(h) > IOD_CONFIG_HISTORY_MAX)
		return iod_err_set(e, -EINVAL, "history must be a list of at most %d versions",
		                   IOD_CONFIG_HISTORY_MAX);
	json_array_foreach(h, i, x)
	{
		if (iod_json_get_u64(x, "rev", &rev) || !rev)
			return iod_err_set(e, -EINVAL, "history[%zu]: no revision", i);
		if (iod_config_settings_check(json_object_get(x, "settings"), e))
			return iod_err_wrap(e, "history[%zu] (rev %llu)", i,
			                    (unsigned long long)rev);
	}
	return 0;
}

int iod_config_doc_parse(const char *text, size_t len, json_t **doc, struct iod_err *e)
{
	json_t *d;
	if (len > IOD_CONFIG_DOC_MAX)
		return iod_err_set(e, -E2BIG, "config document over %d bytes", IOD_CONFIG_DOC_MAX);
	if (iod_json_parse(text, len, &d, e))
		return -EINVAL;
	if (iod_config_doc_check(d, e)) {
		json_decref(d);
		return -EINVAL;
	}
	*doc = d;
	return 0;
}

json_t *iod_config_doc_next(const json_t *cur, uint64_t cur_rev, json_t *next, const char *change,
                            uint64_t now_ms)
{
	json_t *h = json_array(), *old = json_object_get(cur, "history"), *x;
	size_t i;
	if (cur && cur_rev) {
		json_t *v = json_pack("{s:I, s:O, s:s, s:O?}", "rev", (json_int_t)cur_rev,
		                      "settings", (json_t *)iod_config_doc_settings(cur), "change",
		                      json_string_value(json_object_get(cur, "change"))
		                          ? json_string_value(json_object_get(cur, "change"))
		                          : "",
		                      "time_ms", json_object_get(cur, "time_ms"));
		json_array_append_new(h, v);
	}
	json_array_foreach(old, i, x)
	{
		if (json_array_size(h) >= IOD_CONFIG_HISTORY_MAX)
			break;
		json_array_append(h, x);
	}
	return json_pack("{s:O, s:s, s:I, s:o}", "settings", next, "change", change, "time_ms",
	                 (json_int_t)now_ms, "history", h);
}

const json_t *iod_config_doc_at(const json_t *cur, uint64_t cur_rev, uint64_t rev,
                                struct iod_err *e)
{
	const json_t *x;
	size_t i;
	uint64_t r, oldest = cur_rev;
	if (rev == cur_rev)
		return iod_config_doc_settings(cur);
	json_array_foreach(json_object_get(cur, "history"), i, x)
	{
		if (!iod_json_get_u64(x, "rev", &r)) {
			if (r == rev)
				return iod_config_doc_settings(x);
			oldest = r;
		}
	}
	iod_err_set(e, -ENOENT,
	            "no configuration revision %llu: kept are %llu (current) back to %llu "
	            "(`iod config history`)",
	            (unsigned long long)rev, (unsigned long long)cur_rev,
	            (unsigned long long)oldest);
	return NULL;
}

int iod_config_effective(const json_t *settings, const struct iod_config_caps *caps,
                         json_t **applied, struct iod_config_fallback *fb, size_t fb_max,
                         size_t *fb_n)
{
	json_t *a = json_deep_copy(settings ? settings : empty_settings());
	const char *t = json_string_value(json_object_get(a, "service_mesh.transport"));
	*fb_n = 0;
	if (!a)
		return -ENOMEM;
	if (t && !strcmp(t, "rdma") && !caps->rdma) {
		json_object_set_new(a, "service_mesh.transport", json_string("tcp"));
		if (*fb_n < fb_max) {
			struct iod_config_fallback *f = &fb[(*fb_n)++];
			snprintf(f->key, sizeof(f->key), "service_mesh.transport");
			snprintf(f->want, sizeof(f->want), "rdma");
			snprintf(f->use, sizeof(f->use), "tcp");
			snprintf(f->reason, sizeof(f->reason),
			         "no RDMA device on this node (/sys/class/infiniband is empty)");
		}
	}
	*applied = a;
	return 0;
}

json_t *iod_config_ack_json(const char *node, uint64_t rev, const json_t *applied,
                            const struct iod_config_fallback *fb, size_t fb_n, uint64_t now_ms)
{
	json_t *f = json_array();
	for (size_t i = 0; i < fb_n; i++)
		json_array_append_new(f, json_pack("{s:s, s:s, s:s, s:s}", "key", fb[i].key, "want",
		                                   fb[i].want, "using", fb[i].use, "reason",
		                                   fb[i].reason));
	return json_pack("{s:s, s:I, s:O, s:o, s:I}", "node", node, "rev", (json_int_t)rev,
	                 "applied", (json_t *)applied, "fallbacks", f, "time_ms",
	                 (json_int_t)now_ms);
}

bool iod_config_is_ack_name(const char *name)
{
	return name && !strncmp(name, IOD_CONFIG_ACK_PREFIX, strlen(IOD_CONFIG_ACK_PREFIX));
}

/* The ack object of node in a config list, or NULL. */
static const json_t *find_ack(const json_t *configs, const char *node)
{
	const json_t *x;
	size_t i, pl = strlen(IOD_CONFIG_ACK_PREFIX);
	json_array_foreach(json_object_get(configs, "items"), i, x)
	{
		const char *n = json_string_value(json_object_get(x, "name"));
		if (iod_config_is_ack_name(n) && !strcmp(n + pl, node))
			return json_object_get(x, "value");
	}
	return NULL;
}

json_t *iod_config_status(uint64_t rev, const json_t *nodes, const json_t *configs,
                          uint32_t *behind)
{
	json_t *out = json_array(), *x;
	size_t i;
	*behind = 0;
	json_array_foreach(json_object_get(nodes, "items"), i, x)
	{
		const char *n = json_string_value(json_object_get(x, "name"));
		if (!n)
			continue;
		const json_t *ack = find_ack(configs, n);
		uint64_t acked = 0;
		bool have = ack && !iod_json_get_u64(ack, "rev", &acked);
		bool ok = have && acked >= rev;
		json_t *fb = json_object_get(ack, "fallbacks");
		*behind += !ok;
		json_array_append_new(out, json_pack("{s:s, s:I, s:b, s:b, s:O?, s:O?, s:O?}",
		                                     "node", n, "acked_rev", (json_int_t)acked,
		                                     "acked", have, "applied", ok, "fallbacks",
		                                     json_is_array(fb) ? fb : NULL, "time_ms",
		                                     json_object_get(ack, "time_ms"), "values",
		                                     json_object_get(ack, "applied")));
	}
	return out;
}
