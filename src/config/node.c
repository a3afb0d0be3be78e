/*
 * node.c: a node agent's side of `iod config` (shell).
 *
 * The agent's watcher calls iod_config_node_sync after every change it
 * sees: it reads config/cluster, computes this node's effective values
 * (schema.c: rdma without a device runs tcp and says so), applies the log
 * level at once, keeps the rest where agent code reads them live
 * (iod_config_live_*: the telemetry sampler each interval), and writes
 * config/ack.<node> bound to the node's lease, so a lost node's ack goes
 * with it. No replica is restarted for any key.
 *
 * One agent per process (iod agent, each node of iod up): the state is
 * process-wide, under one mutex, read by the telemetry thread too.
 */
#include "iod/api.h"
#include "iod/config.h"
#include "iod/limits.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static struct {
	pthread_mutex_t mu;
	json_t *applied;         /* effective settings (owned), NULL before the first sync */
	uint64_t seen_rev;       /* config/cluster revision last read */
	uint64_t applied_rev;    /* revision applied */
	uint64_t acked_rev;      /* revision acknowledged ... */
	uint64_t acked_lease;    /* ... under this lease */
	size_t fallbacks;        /* values not honoured */
	bool base_known;         /* the agent's own log level was recorded */
	enum iod_log_level base; /* it, restored when log.level is unset */
	bool caps_known;
	struct iod_config_caps caps;
	/* iod_config_node_on_apply's hook, under hook_mu (not mu: the hook
	 * reads live values), held while it runs so that removing it waits
	 * for a call in flight (its context may be freed right after) */
	pthread_mutex_t hook_mu;
	void (*on_apply)(void *ctx); /* the hook, or NULL */
	void *on_apply_ctx;          /* ... its argument */
} node = {.mu = PTHREAD_MUTEX_INITIALIZER, .hook_mu = PTHREAD_MUTEX_INITIALIZER};

void iod_config_caps_probe(struct iod_config_caps *caps)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *x;
	caps->rdma = false;
	if (!d)
		return;
	while ((x = readdir(d)))
		if (x->d_name[0] != '.')
			caps->rdma = true;
	closedir(d);
}

static enum iod_log_level current_level(void)
{
	for (int l = IOD_LOG_DEBUG; l <= IOD_LOG_ERROR; l++)
		if (iod_log_enabled((enum iod_log_level)l))
			return (enum iod_log_level)l;
	return IOD_LOG_ERROR;
}

/* GET config/cluster: the parsed value (NULL = none yet) and its revision. */
static int fetch(struct iod_api_client *c, json_t **doc, uint64_t *rev, struct iod_err *e)
{
	struct iod_api_response r = {0};
	*doc = NULL;
	*rev = 0;
	if (iod_api_request(c, "GET", "/v1/config/" IOD_CONFIG_OBJECT, NULL, NULL, 0, &r, e))
		return -EAGAIN;
	int rc = 0;
	if (r.status == 200 && r.json) {
		json_t *v = json_object_get(r.json, "value");
		iod_json_get_u64(r.json, "rev", rev);
		if (iod_config_doc_check(v, e))
			rc = -EINVAL;
		else
			*doc = json_incref(v);
	} else if (r.status != 404) {
		rc = iod_err_set(e, -EAGAIN, "reading the configuration: %s",
		                 iod_api_error_text(&r));
	}
	iod_api_response_free(&r);
	return rc;
}

/* Apply what is applied by this module itself: the log level. */
static void apply_now(const json_t *applied)
{
	const char *lv = json_string_value(json_object_get(applied, "log.level"));
	enum iod_log_level l;
	if (!node.base_known) {
		node.base = current_level();
		node.base_known = true;
	}
	if (!lv || iod_log_level_parse(lv, &l))
		l = node.base;
	iod_log_set_level(l);
}

static int ack(struct iod_api_client *c, const char *name, uint64_t lease, const json_t *a,
               struct iod_err *e)
{
	struct iod_api_response r = {0};
	char path[IOD_NAME_MAX + 64];
	char *text = iod_json_string(a, true);
	if (!text)
		return iod_err_set(e, -ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "/v1/config/" IOD_CONFIG_ACK_PREFIX "%s?lease=%llu", name,
	         (unsigned long long)lease);
	int rc = iod_api_request(c, "PUT", path, "application/json", text, strlen(text), &r, e);
	free(text);
	if (!rc && r.status != 200)
		rc = iod_err_set(e, -EAGAIN, "acknowledging: %s", iod_api_error_text(&r));
	iod_api_response_free(&r);
	return rc;
}

static void log_fallbacks(const char *name, uint64_t rev, const struct iod_config_fallback *fb,
                          size_t n)
{
	for (size_t i = 0; i < n; i++)
		IOD_WARN("config",
		         "node %s: revision %llu: %s=%s cannot be honoured here: %s; "
		         "using %s",
		         name, (unsigned long long)rev, fb[i].key, fb[i].want, fb[i].reason,
		         fb[i].use);
}

int iod_config_node_sync(struct iod_api_client *c, const char *name, uint64_t lease,
                         struct iod_err *e)
{
	json_t *doc, *applied;
	uint64_t rev;
	struct iod_config_fallback fb[IOD_CONFIG_FALLBACKS_MAX];
	size_t fb_n = 0;
	int rc = fetch(c, &doc, &rev, e);
	if (rc)
		return rc;
	pthread_mutex_lock(&node.mu);
	node.seen_rev = rev;
	bool done = node.applied && node.applied_rev == rev &&
	            (!lease || (node.acked_rev == rev && node.acked_lease == lease));
	if (!node.caps_known) {
		iod_config_caps_probe(&node.caps);
		node.caps_known = true;
	}
	struct iod_config_caps caps = node.caps;
	pthread_mutex_unlock(&node.mu);
	if (done) {
		json_decref(doc);
		return 0;
	}
	rc = iod_config_effective(iod_config_doc_settings(doc), &caps, &applied, fb,
	                          IOD_ARRAY_LEN(fb), &fb_n);
	json_decref(doc);
	if (rc)
		return iod_err_set(e, rc, "out of memory");
	pthread_mutex_lock(&node.mu);
	bool fresh = node.applied_rev != rev || !node.applied;
	json_decref(node.applied);
	node.applied = json_incref(applied);
	node.applied_rev = rev;
	node.fallbacks = fb_n;
	apply_now(applied);
	pthread_mutex_unlock(&node.mu);
	if (fresh) {
		pthread_mutex_lock(&node.hook_mu);
		if (node.on_apply)
			node.on_apply(node.on_apply_ctx);
		pthread_mutex_unlock(&node.hook_mu);
		IOD_INFO("config", "node %s: applied configuration revision %llu", name,
		         (unsigned long long)rev);
		log_fallbacks(name, rev, fb, fb_n);
	}
	rc = -EAGAIN;
	if (lease) {
		json_t *a = iod_config_ack_json(name, rev, applied, fb, fb_n,
		                                iod_time_unix_ns() / IOD_NS_PER_MS);
		rc = a ? ack(c, name, lease, a, e) : iod_err_set(e, -ENOMEM, "out of memory");
		json_decref(a);
		if (!rc) {
			pthread_mutex_lock(&node.mu);
			node.acked_rev = rev;
			node.acked_lease = lease;
			pthread_mutex_unlock(&node.mu);
		}
	}
	json_decref(applied);
	return rc;
}

void iod_config_node_on_apply(void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&node.hook_mu);
	node.on_apply = fn;
	node.on_apply_ctx = ctx;
	pthread_mutex_unlock(&node.hook_mu);
}

uint64_t iod_config_live_u64(const char *path, uint64_t dflt)
{
	const struct iod_config_key *k;
	uint64_t v = dflt;
	if (iod_config_key_find(path, &k, NULL))
		return dflt;
	pthread_mutex_lock(&node.mu);
	json_t *x = json_object_get(node.applied, path);
	if (json_is_integer(x) && json_integer_value(x) >= 0) {
		v = (uint64_t)json_integer_value(x);
		if (k->type == IOD_CONFIG_DURATION)
			v *= IOD_NS_PER_MS;
	}
	pthread_mutex_unlock(&node.mu);
	return v;
}

const char *iod_config_live_str(const char *path, const char *dflt, char *buf, size_t len)
{
	pthread_mutex_lock(&node.mu);
	const char *s = json_string_value(json_object_get(node.applied, path));
	snprintf(buf, len, "%s", s ? s : dflt);
	pthread_mutex_unlock(&node.mu);
	return buf;
}

int iod_config_node_prom(struct iod_buf *b)
{
	pthread_mutex_lock(&node.mu);
	uint64_t seen = node.seen_rev, applied = node.applied_rev, acked = node.acked_rev;
	size_t fb = node.fallbacks;
	bool any = node.applied != NULL;
	pthread_mutex_unlock(&node.mu);
	/* drift: 1 while this node runs another revision than the cluster's or
	 * has not acknowledged it, plus one per value it cannot honour */
	uint64_t drift = (any ? (seen != applied || acked != applied) : 1) + fb;
	return iod_buf_printf(
	    b,
	    "# HELP iod_config_revision Cluster configuration revision: seen, applied, "
	    "acknowledged by this node.\n"
	    "# TYPE iod_config_revision gauge\n"
	    "iod_config_revision{state=\"seen\"} %llu\n"
	    "iod_config_revision{state=\"applied\"} %llu\n"
	    "iod_config_revision{state=\"acked\"} %llu\n"
	    "# HELP iod_config_fallbacks Configuration values this node cannot honour (it runs "
	    "a fallback).\n"
	    "# TYPE iod_config_fallbacks gauge\n"
	    "iod_config_fallbacks %zu\n"
	    "# HELP iod_config_drift This node's drift from the cluster configuration: 1 while "
	    "a revision is not applied and acknowledged, plus the fallbacks.\n"
	    "# TYPE iod_config_drift gauge\n"
	    "iod_config_drift %llu\n",
	    (unsigned long long)seen, (unsigned long long)applied, (unsigned long long)acked, fb,
	    (unsigned long long)drift);
}
