/*
 * config.h: `iod config`, the cluster's live settings (docs/config.md).
 *
 * The settings are one Config object, config/cluster, whose value is
 *   {"settings": {"service_mesh.transport": "shm", ...},   keys set explicitly
 *    "change": "set service_mesh.transport=shm", "time_ms": T,
 *    "history": [{"rev": R, "settings": {...}, "change": "...", "time_ms": T}, ...]}
 * written with compare-and-swap through the ordinary object API, so every
 * change is one Raft-committed revision (the object's `rev`). history holds
 * the IOD_CONFIG_HISTORY_MAX previous versions, each under the revision it
 * was committed at; a rollback writes an old version as a new revision.
 * Each node's agent watches it, applies what it can live, and acknowledges
 * with config/ack.<node> (bound to its node lease):
 *   {"node": N, "rev": R, "applied": {...}, "fallbacks": [{key, want, using, reason}],
 *    "time_ms": T}
 *
 * The schema (one row per key: its type, bounds, default and who applies
 * it) and everything that decides (parsing, validation, history, a node's
 * effective values, the status of a revision) are pure (src/config/schema.c).
 * The agent's side (fetch, apply, acknowledge, the live values other agent
 * code reads, the drift gauge) is the shell src/config/node.c.
 */
#ifndef IOD_CONFIG_H
#define IOD_CONFIG_H

#include "iod/base.h"

/* The object names (kind "config"). */
#define IOD_CONFIG_OBJECT "cluster"
#define IOD_CONFIG_ACK_PREFIX "ack."

enum iod_config_type {
	IOD_CONFIG_ENUM,     /* one of the row's words; stored as a string */
	IOD_CONFIG_BOOL,     /* true|false (also on|off, yes|no); stored as a bool */
	IOD_CONFIG_DURATION, /* "500ms", "2s"; stored as an integer of milliseconds */
	IOD_CONFIG_SIZE,     /* "64KiB", "1MiB"; stored as an integer of bytes */
};

struct iod_config_key {
	const char *path;          /* dot path: "service_mesh.transport" */
	enum iod_config_type type; /* its type */
	const char *const *words;  /* ENUM: NULL-terminated allowed values */
	uint64_t min, max;         /* DURATION (ms) and SIZE (bytes) bounds */
	const char *default_text;  /* what an unset key means, as text */
	const char *applies;       /* who applies it, live or not (for view/docs) */
	const char *help;          /* one line */
};

/* Every key, in display order; *n gets the count. */
const struct iod_config_key *iod_config_keys(size_t *n);

/*
 * The row of path. -ENOENT for an unknown key, with "did you mean" in e
 * when a key is close (also for a prefix such as "service_mesh").
 */
int iod_config_key_find(const char *path, const struct iod_config_key **k, struct iod_err *e);

/* Parse text for k into its stored JSON (*out owned). -EINVAL naming the allowed values. */
int iod_config_value_parse(const struct iod_config_key *k, const char *text, json_t **out,
                           struct iod_err *e);
/* A stored value as text ("shm", "true", "500ms", "1MiB"); "" if v has the wrong type. */
void iod_config_value_format(const struct iod_config_key *k, const json_t *v, char *buf,
                             size_t len);
/* 0 when v is a valid stored value for k, else -EINVAL naming key and problem. */
int iod_config_value_check(const struct iod_config_key *k, const json_t *v, struct iod_err *e);

/* Check a settings object: every key known, every value valid. */
int iod_config_settings_check(const json_t *settings, struct iod_err *e);

/*
 * Parse a stored config/cluster value (JSON text, as the API returns it
 * under "value"): *doc owned, its settings and history checked (bounded by
 * IOD_CONFIG_HISTORY_MAX, each with a revision). -EINVAL on anything else.
 */
int iod_config_doc_parse(const char *text, size_t len, json_t **doc, struct iod_err *e);
/* The same check on a parsed value. */
int iod_config_doc_check(const json_t *doc, struct iod_err *e);

/* The settings object of a doc (borrowed; an empty object's when doc is NULL). */
const json_t *iod_config_doc_settings(const json_t *doc);

/*
 * The next value: settings `next` (a new reference taken) with change text
 * and time, the current version (cur at revision cur_rev; cur NULL = none
 * yet) pushed onto the history, the oldest dropped beyond the limit.
 */
json_t *iod_config_doc_next(const json_t *cur, uint64_t cur_rev, json_t *next, const char *change,
                            uint64_t now_ms);

/*
 * The settings that were in force at revision rev (the current ones when
 * rev == cur_rev): borrowed, or NULL with -ENOENT in e naming the revisions kept.
 */
const json_t *iod_config_doc_at(const json_t *cur, uint64_t cur_rev, uint64_t rev,
                                struct iod_err *e);

/* What a node can honour. */
struct iod_config_caps {
	bool rdma; /* an RDMA device is present (and usable) */
};

/* One value a node cannot honour and what it runs instead. */
struct iod_config_fallback {
	char key[64];
	char want[32];
	char use[32];
	char reason[160];
};

/*
 * A node's applied values: the settings as they are, except what caps
 * cannot honour (service_mesh.transport rdma without a device -> tcp),
 * each such one listed in fb (at most fb_max; *fb_n the count). *applied
 * owned.
 */
int iod_config_effective(const json_t *settings, const struct iod_config_caps *caps,
                         json_t **applied, struct iod_config_fallback *fb, size_t fb_max,
                         size_t *fb_n);

/* The ack document of a node (owned). */
json_t *iod_config_ack_json(const char *node, uint64_t rev, const json_t *applied,
                            const struct iod_config_fallback *fb, size_t fb_n, uint64_t now_ms);

/* True when a watch event (or a "name") is a node's acknowledgement. */
bool iod_config_is_ack_name(const char *name);

/*
 * Per node, from the API's node list and config list (both {"items": [...]}),
 * against revision rev: an array (owned) of {node, acked_rev, applied
 * (bool), fallbacks}; *behind gets the count of nodes not at rev.
 */
json_t *iod_config_status(uint64_t rev, const json_t *nodes, const json_t *configs,
                          uint32_t *behind);

/* network.adaptive_routing when unset: the node's switch pins its tenants'
 * VXLAN flows by minrtt (docs/network.md, "Adaptive routing across nodes") */
#define IOD_CONFIG_AR_DEFAULT "minrtt"

/* ---- the node's side (shell, src/config/node.c) ----------------------------- */

struct iod_api_client;

/*
 * Fetch config/cluster, apply it (log level now; the live values below for
 * the rest) and acknowledge it as config/ack.<node> bound to lease (0 = not
 * registered yet: applied, not acknowledged; -EAGAIN). Does nothing when
 * the revision was already applied and acknowledged under this lease.
 * One agent per process: the state is process-wide, guarded by a mutex.
 */
int iod_config_node_sync(struct iod_api_client *c, const char *node, uint64_t lease,
                         struct iod_err *e);

/* The applied value of a DURATION key in ns (or a SIZE key in bytes); dflt when unset. */
uint64_t iod_config_live_u64(const char *path, uint64_t dflt);
/* The applied value of an ENUM key; dflt when unset (the string is copied into buf). */
const char *iod_config_live_str(const char *path, const char *dflt, char *buf, size_t len);

/*
 * Call fn(ctx) on the syncing thread each time a new revision has been
 * applied, before it is acknowledged (so an ack means the hook ran): the
 * agent's mesh host moves its proxy to the new service_mesh.transport
 * there. One hook per process; fn NULL removes it, after a call in flight
 * has returned (its ctx may be freed then). fn must not block, nor set
 * the hook.
 */
void iod_config_node_on_apply(void (*fn)(void *ctx), void *ctx);

/* Prometheus lines: the revisions seen and applied, the drift gauge. */
int iod_config_node_prom(struct iod_buf *b);

/* What this host can honour (an RDMA device under /sys/class/infiniband). */
void iod_config_caps_probe(struct iod_config_caps *caps);

#endif
