/*
 * topo.c: simulated fabric topologies: the model, built-in shapes
 * (leaf-spine, 3-tier fat-tree, dumbbell) and a YAML loader.
 *
 * It exists so users describe fabrics in a file or by name and get precise
 * errors (file:line:col, the object, what to write instead). The YAML is
 * read through iod's one YAML layer (src/base/yaml.c) into a small bounded
 * tree first (IOD_YAML_NODES_MAX, IOD_YAML_DEPTH_MAX), then interpreted;
 * both steps are bounded, so any input, fuzzed or not,
 * gives a topology or an error, never a crash. No I/O except
 * iod_sim_topo_load reading the named file.
 */
#include "iod/sim.h"
#include "iod/yaml.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void iod_sim_topo_init(struct iod_sim_topo *t)
{
	memset(t, 0, sizeof(*t));
	t->buffer_bytes = 1000000;
	t->host_buffer_bytes = 64000000;
	t->ecn_pkts = 65; /* DCTCP's K for 10 Gbps */
	t->hash = IOD_SIM_HASH_CRC32;
	t->seed_mode = IOD_SIM_SEED_PER_SWITCH;
	t->hash_seed = 0x10d;
	iod_strlcpy(t->name, "custom", sizeof(t->name));
}

void iod_sim_topo_free(struct iod_sim_topo *t)
{
	free(t->nodes);
	free(t->links);
	free(t->events);
	memset(t, 0, sizeof(*t));
}

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint32_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *p = realloc(*arr, (size_t)nc * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

int iod_sim_topo_find(const struct iod_sim_topo *t, const char *name, uint32_t *idx)
{
	for (uint32_t i = 0; i < t->n_nodes; i++)
		if (!strcmp(t->nodes[i].name, name)) {
			*idx = i;
			return 0;
		}
	return -ENOENT;
}

int iod_sim_topo_add_node(struct iod_sim_topo *t, const char *name, enum iod_sim_node_kind kind,
                          uint32_t *idx, struct iod_err *e)
{
	uint32_t dummy;
	if (!name[0] || strlen(name) >= IOD_NAME_MAX)
		return iod_err_set(e, -EINVAL, "node name \"%s\" must be 1..%d characters", name,
		                   IOD_NAME_MAX - 1);
	if (t->n_nodes >= IOD_SIM_NODES_MAX)
		return iod_err_set(e, -E2BIG, "more than %d nodes (IOD_SIM_NODES_MAX)",
		                   IOD_SIM_NODES_MAX);
	if (!iod_sim_topo_find(t, name, &dummy))
		return iod_err_set(e, -EEXIST, "node \"%s\" is defined twice", name);
	if (grow((void **)&t->nodes, &t->cap_nodes, t->n_nodes + 1, sizeof(*t->nodes)))
		return iod_err_set(e, -ENOMEM, "out of memory");
	struct iod_sim_topo_node *n = &t->nodes[t->n_nodes];
	iod_strlcpy(n->name, name, sizeof(n->name));
	n->kind = kind;
	if (idx)
		*idx = t->n_nodes;
	t->n_nodes++;
	return 0;
}

int iod_sim_topo_add_link(struct iod_sim_topo *t, uint32_t a, uint32_t b, uint64_t rate_bps,
                          uint64_t delay_ns, struct iod_err *e)
{
	if (a >= t->n_nodes || b >= t->n_nodes || a == b)
		return iod_err_set(e, -EINVAL, "link between nodes %u and %u: need two nodes", a,
		                   b);
	if (!rate_bps || rate_bps > 10000000000000ull)
		return iod_err_set(e, -EINVAL, "link %s-%s: rate must be 1 bps..10 Tbps",
		                   t->nodes[a].name, t->nodes[b].name);
	if (delay_ns > 10 * IOD_NS_PER_S)
		return iod_err_set(e, -EINVAL, "link %s-%s: delay above 10 s", t->nodes[a].name,
		                   t->nodes[b].name);
	if (t->n_links >= IOD_SIM_LINKS_MAX)
		return iod_err_set(e, -E2BIG, "more than %d links (IOD_SIM_LINKS_MAX)",
		                   IOD_SIM_LINKS_MAX);
	if (grow((void **)&t->links, &t->cap_links, t->n_links + 1, sizeof(*t->links)))
		return iod_err_set(e, -ENOMEM, "out of memory");
	t->links[t->n_links++] = (struct iod_sim_topo_link){a, b, rate_bps, delay_ns};
	return 0;
}

int iod_sim_topo_add_event(struct iod_sim_topo *t, uint64_t at_ns, uint32_t link, uint64_t rate_bps,
                           struct iod_err *e)
{
	if (link >= t->n_links)
		return iod_err_set(e, -EINVAL, "link event for unknown link %u", link);
	if (t->n_events >= IOD_SIM_TOPO_EVENTS_MAX)
		return iod_err_set(e, -E2BIG, "more than %d link events", IOD_SIM_TOPO_EVENTS_MAX);
	if (grow((void **)&t->events, &t->cap_events, t->n_events + 1, sizeof(*t->events)))
		return iod_err_set(e, -ENOMEM, "out of memory");
	t->events[t->n_events++] = (struct iod_sim_topo_event){at_ns, link, rate_bps};
	return 0;
}

uint32_t iod_sim_topo_host_count(const struct iod_sim_topo *t)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->n_nodes; i++)
		n += t->nodes[i].kind == IOD_SIM_HOST;
	return n;
}

/* ---- shared option setters ------------------------------------------------ */

/* Apply a switch-wide option; -ENOENT when key is not one. */
static int topo_option(struct iod_sim_topo *t, const char *key, const char *val, struct iod_err *e)
{
	uint64_t v;
	if (!strcmp(key, "buffer")) {
		if (iod_parse_size(val, &v, e) || !v)
			return iod_err_set(e, -EINVAL, "buffer \"%s\": want a size like 1MB", val);
		t->buffer_bytes = v;
	} else if (!strcmp(key, "host_buffer")) {
		if (iod_parse_size(val, &v, e) || !v)
			return iod_err_set(e, -EINVAL, "host_buffer \"%s\": want a size like 16MB",
			                   val);
		t->host_buffer_bytes = v;
	} else if (!strcmp(key, "ecn")) {
		if (!strcmp(val, "off")) {
			t->ecn_bytes = 0;
			t->ecn_pkts = 0;
		} else if (iod_parse_size(val, &v, e)) {
			return iod_err_set(e, -EINVAL, "ecn \"%s\": want a size like 100KB or off",
			                   val);
		} else {
			t->ecn_bytes = v;
			t->ecn_pkts = 0;
		}
	} else if (!strcmp(key, "ecn_pkts")) {
		char *end;
		unsigned long n = strtoul(val, &end, 10);
		if (*end || end == val || n > 1000000)
			return iod_err_set(e, -EINVAL, "ecn_pkts \"%s\": want a packet count", val);
		t->ecn_pkts = (uint32_t)n;
		t->ecn_bytes = 0;
	} else if (!strcmp(key, "hash")) {
		for (unsigned i = 0; i <= IOD_SIM_HASH_XOR; i++)
			if (!strcmp(val, iod_sim_hash_name((enum iod_sim_hash)i))) {
				t->hash = (enum iod_sim_hash)i;
				return 0;
			}
		return iod_err_set(e, -EINVAL, "hash \"%s\": want crc32, mix or xor", val);
	} else if (!strcmp(key, "seed")) {
		if (!strcmp(val, "same"))
			t->seed_mode = IOD_SIM_SEED_SAME;
		else if (!strcmp(val, "per-switch"))
			t->seed_mode = IOD_SIM_SEED_PER_SWITCH;
		else
			return iod_err_set(e, -EINVAL, "seed \"%s\": want same or per-switch", val);
	} else if (!strcmp(key, "hash_seed")) {
		char *end;
		unsigned long long n = strtoull(val, &end, 0);
		if (*end || end == val)
			return iod_err_set(e, -EINVAL, "hash_seed \"%s\": want a number", val);
		t->hash_seed = n;
	} else {
		return -ENOENT;
	}
	return 0;
}

/* ---- built-in topologies ---------------------------------------------------- */

struct builtin_params {
	uint64_t leaves, spines, hosts, links, k;    /* counts */
	uint64_t host_rate, fabric_rate, bottleneck; /* bps */
	uint64_t delay_ns;                           /* per link */
};

static int parse_count(const char *key, const char *val, uint64_t max, uint64_t *out,
                       struct iod_err *e)
{
	char *end;
	unsigned long long n = strtoull(val, &end, 10);
	if (*end || end == val || n == 0 || n > max)
		return iod_err_set(e, -EINVAL, "%s=%s: want a count 1..%" PRIu64, key, val, max);
	*out = n;
	return 0;
}

static int builtin_kv(struct iod_sim_topo *t, struct builtin_params *bp, const char *key,
                      const char *val, struct iod_err *e)
{
	int rc = topo_option(t, key, val, e);
	if (rc != -ENOENT)
		return rc;
	if (!strcmp(key, "leaves"))
		return parse_count(key, val, 4096, &bp->leaves, e);
	if (!strcmp(key, "spines"))
		return parse_count(key, val, 4096, &bp->spines, e);
	if (!strcmp(key, "hosts"))
		return parse_count(key, val, 65536, &bp->hosts, e);
	if (!strcmp(key, "links"))
		return parse_count(key, val, 64, &bp->links, e);
	if (!strcmp(key, "k"))
		return parse_count(key, val, 64, &bp->k, e);
	if (!strcmp(key, "host_rate") || !strcmp(key, "rate"))
		return iod_parse_bandwidth(val, &bp->host_rate, e);
	if (!strcmp(key, "fabric_rate"))
		return iod_parse_bandwidth(val, &bp->fabric_rate, e);
	if (!strcmp(key, "bottleneck"))
		return iod_parse_bandwidth(val, &bp->bottleneck, e);
	if (!strcmp(key, "delay"))
		return iod_parse_duration(val, &bp->delay_ns, e);
	return iod_err_set(e, -EINVAL,
	                   "unknown parameter \"%s\"; see `iod sim fabric --help` for the "
	                   "parameters of built-in topologies",
	                   key);
}

static int add_named(struct iod_sim_topo *t, enum iod_sim_node_kind k, uint32_t *idx,
                     struct iod_err *e, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int add_named(struct iod_sim_topo *t, enum iod_sim_node_kind k, uint32_t *idx,
                     struct iod_err *e, const char *fmt, ...)
{
	char name[IOD_NAME_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	return iod_sim_topo_add_node(t, name, k, idx, e);
}

static int build_leaf_spine(struct iod_sim_topo *t, const struct builtin_params *bp,
                            struct iod_err *e)
{
	uint32_t L = (uint32_t)bp->leaves, S = (uint32_t)bp->spines, H = (uint32_t)bp->hosts;
	uint32_t leaf0 = 0, spine0 = 0, idx;
	int rc;

	if (H % L)
		return iod_err_set(e, -EINVAL,
		                   "leaf-spine: hosts=%u is not a multiple of leaves=%u", H, L);
	for (uint32_t h = 0; h < H; h++)
		if ((rc = add_named(t, IOD_SIM_HOST, NULL, e, "h%u", h)))
			return rc;
	for (uint32_t l = 0; l < L; l++)
		if ((rc = add_named(t, IOD_SIM_SWITCH, l ? NULL : &leaf0, e, "leaf%u", l)))
			return rc;
	for (uint32_t s = 0; s < S; s++)
		if ((rc = add_named(t, IOD_SIM_SWITCH, s ? NULL : &spine0, e, "spine%u", s)))
			return rc;
	for (uint32_t h = 0; h < H; h++)
		if ((rc = iod_sim_topo_add_link(t, h, leaf0 + h / (H / L), bp->host_rate,
		                                bp->delay_ns, e)))
			return rc;
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t s = 0; s < S; s++)
			for (uint32_t k = 0; k < bp->links; k++)
				if ((rc = iod_sim_topo_add_link(t, leaf0 + l, spine0 + s,
				                                bp->fabric_rate, bp->delay_ns, e)))
					return rc;
	(void)idx;
	return 0;
}

static int build_fat_tree(struct iod_sim_topo *t, const struct builtin_params *bp,
                          struct iod_err *e)
{
	uint32_t k = (uint32_t)bp->k, half = k / 2, idx;
	int rc;

	if (k < 2 || k % 2)
		return iod_err_set(e, -EINVAL, "fat-tree: k=%u must be even and >= 2", k);
	uint32_t hosts = k * k * k / 4;
	for (uint32_t h = 0; h < hosts; h++)
		if ((rc = add_named(t, IOD_SIM_HOST, NULL, e, "h%u", h)))
			return rc;
	uint32_t edge0 = t->n_nodes;
	for (uint32_t p = 0; p < k; p++)
		for (uint32_t i = 0; i < half; i++)
			if ((rc = add_named(t, IOD_SIM_SWITCH, &idx, e, "edge%u_%u", p, i)))
				return rc;
	uint32_t agg0 = t->n_nodes;
	for (uint32_t p = 0; p < k; p++)
		for (uint32_t i = 0; i < half; i++)
			if ((rc = add_named(t, IOD_SIM_SWITCH, &idx, e, "agg%u_%u", p, i)))
				return rc;
	uint32_t core0 = t->n_nodes;
	for (uint32_t c = 0; c < half * half; c++)
		if ((rc = add_named(t, IOD_SIM_SWITCH, &idx, e, "core%u", c)))
			return rc;
	for (uint32_t h = 0; h < hosts; h++)
		if ((rc = iod_sim_topo_add_link(t, h, edge0 + h / half, bp->host_rate, bp->delay_ns,
		                                e)))
			return rc;
	for (uint32_t p = 0; p < k; p++)
		for (uint32_t i = 0; i < half; i++)
			for (uint32_t j = 0; j < half; j++)
				if ((rc = iod_sim_topo_add_link(t, edge0 + p * half + i,
				                                agg0 + p * half + j, bp->host_rate,
				                                bp->delay_ns, e)))
					return rc;
	for (uint32_t p = 0; p < k; p++)
		for (uint32_t j = 0; j < half; j++)
			for (uint32_t c = 0; c < half; c++)
				if ((rc = iod_sim_topo_add_link(t, agg0 + p * half + j,
				                                core0 + j * half + c, bp->host_rate,
				                                bp->delay_ns, e)))
					return rc;
	return 0;
}

static int build_dumbbell(struct iod_sim_topo *t, const struct builtin_params *bp,
                          struct iod_err *e)
{
	uint32_t H = (uint32_t)bp->hosts, left, right;
	int rc;

	if (H < 2 || H % 2)
		return iod_err_set(e, -EINVAL, "dumbbell: hosts=%u must be even and >= 2", H);
	for (uint32_t h = 0; h < H; h++)
		if ((rc = add_named(t, IOD_SIM_HOST, NULL, e, "h%u", h)))
			return rc;
	if ((rc = add_named(t, IOD_SIM_SWITCH, &left, e, "left")) ||
	    (rc = add_named(t, IOD_SIM_SWITCH, &right, e, "right")))
		return rc;
	for (uint32_t h = 0; h < H; h++)
		if ((rc = iod_sim_topo_add_link(t, h, h < H / 2 ? left : right, bp->host_rate,
		                                bp->delay_ns, e)))
			return rc;
	return iod_sim_topo_add_link(t, left, right, bp->bottleneck, bp->delay_ns, e);
}

int iod_sim_topo_builtin(struct iod_sim_topo *t, const char *spec, struct iod_err *e)
{
	struct builtin_params bp = {
	    2, 2, 32, 1, 4, 10000000000ull, 40000000000ull, 10000000000ull, 1000};
	char buf[512], kind[IOD_NAME_MAX];
	const char *colon = strchr(spec, ':');
	size_t klen = colon ? (size_t)(colon - spec) : strlen(spec);
	int rc;

	iod_sim_topo_init(t);
	if (klen >= sizeof(kind) || strlen(spec) >= sizeof(buf))
		return iod_err_set(e, -EINVAL, "topology name \"%.40s...\" is too long", spec);
	memcpy(kind, spec, klen);
	kind[klen] = 0;
	if (!strcmp(kind, "dumbbell")) {
		bp.hosts = 2;
		bp.host_rate = 40000000000ull;
	}
	if (colon) {
		iod_strlcpy(buf, colon + 1, sizeof(buf));
		char *save = NULL;
		for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(kv, '=');
			if (!eq)
				return iod_err_set(e, -EINVAL, "%s: \"%s\" is not key=value", kind,
				                   kv);
			*eq = 0;
			if ((rc = builtin_kv(t, &bp, kv, eq + 1, e)))
				return iod_err_wrap(e, "topology %s", kind);
		}
	}
	iod_strlcpy(t->name, kind, sizeof(t->name));
	if (!strcmp(kind, "leaf-spine"))
		rc = build_leaf_spine(t, &bp, e);
	else if (!strcmp(kind, "fat-tree"))
		rc = build_fat_tree(t, &bp, e);
	else if (!strcmp(kind, "dumbbell"))
		rc = build_dumbbell(t, &bp, e);
	else
		return iod_err_set(e, -ENOENT,
		                   "unknown topology \"%s\": use leaf-spine, fat-tree, dumbbell or "
		                   "a YAML file",
		                   kind);
	if (rc)
		iod_sim_topo_free(t);
	return rc;
}

/* ---- YAML: a bounded tree, then the schema -------------------------------- */

/* A topology file read through the one YAML layer (src/base/yaml.c). */
struct ytree {
	struct iod_arena arena;           /* owns the nodes */
	const struct iod_yaml_node *root; /* the document */
	const char *file;                 /* name for messages */
	struct iod_err *e;                /* the first problem goes here */
	int problems;                     /* how many the YAML layer reported */
};

/* A topology load stops at its first problem: keep that one. */
static void ytree_diag(void *ctx, uint32_t line, uint32_t col, const char *msg)
{
	struct ytree *y = ctx;
	if (y->problems++)
		return;
	if (line)
		iod_err_set(y->e, -EINVAL, "%s:%u:%u: %s", y->file, line, col, msg);
	else
		iod_err_set(y->e, -EINVAL, "%s: %s", y->file, msg);
}

static int ytree_parse(struct ytree *y, const char *text, size_t len, struct iod_err *e)
{
	const struct iod_yaml_opts o = {.what = "topology", .diag = ytree_diag, .ctx = y};
	struct iod_yaml_node *root = NULL;
	y->e = e;
	iod_arena_init(&y->arena, 64 * 1024, 0);
	int rc = iod_yaml_parse(&y->arena, text, len, &o, &root);
	if (rc) {
		if (e)
			e->code = rc;
		return rc;
	}
	if (!root)
		return iod_err_set(e, -EINVAL, "%s: empty topology file", y->file);
	y->root = root;
	return 0;
}

static void ytree_free(struct ytree *y)
{
	iod_arena_free(&y->arena);
}

static int yerr(const struct ytree *y, const struct iod_yaml_node *id, struct iod_err *e,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int yerr(const struct ytree *y, const struct iod_yaml_node *id, struct iod_err *e,
                const char *fmt, ...)
{
	char msg[IOD_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return iod_err_set(e, -EINVAL, "%s:%u:%u: %s", y->file, id->line, id->col, msg);
}

/* The scalar value of key in mapping m, or NULL (sets *at to the value). */
static const char *ymap_get(const struct ytree *y, const struct iod_yaml_node *m, const char *key,
                            const struct iod_yaml_node **at)
{
	(void)y; /* the tree is self-contained; y keeps the helpers' shape */
	for (const struct iod_yaml_node *k = m->first; k; k = k->next) {
		const struct iod_yaml_node *v = k->next;
		if (!v)
			break;
		if (k->kind == IOD_YAML_SCALAR && !strcmp(k->str, key)) {
			if (at)
				*at = v;
			return v->kind == IOD_YAML_SCALAR ? v->str : "";
		}
		k = v;
	}
	return NULL;
}

/* Check that mapping m has only keys from the NULL-terminated allowed list. */
static int ymap_keys(const struct ytree *y, const struct iod_yaml_node *m,
                     const char *const *allowed, const char *what, struct iod_err *e)
{
	if (m->kind != IOD_YAML_MAP)
		return yerr(y, m, e, "%s must be a mapping", what);
	for (const struct iod_yaml_node *k = m->first; k; k = k->next) {
		if (k->kind != IOD_YAML_SCALAR)
			return yerr(y, k, e, "%s: keys must be plain words", what);
		size_t n = 0;
		while (allowed[n])
			n++;
		bool ok = false;
		for (size_t i = 0; i < n; i++)
			ok |= !strcmp(allowed[i], k->str);
		if (!ok) {
			const char *s = iod_suggest(k->str, allowed, n);
			return yerr(y, k, e, "%s: unknown key \"%s\"%s%s%s", what, k->str,
			            s ? "; did you mean \"" : "", s ? s : "", s ? "\"?" : "");
		}
		k = k->next;
		if (!k)
			break;
	}
	return 0;
}

static int yscalar(const struct ytree *y, const struct iod_yaml_node *m, const char *key,
                   const char **out, const struct iod_yaml_node **at, struct iod_err *e)
{
	const struct iod_yaml_node *v = NULL;
	const char *s = ymap_get(y, m, key, &v);
	*out = NULL;
	if (!s)
		return 0;
	if (v->kind != IOD_YAML_SCALAR)
		return yerr(y, v, e, "%s must be a single value", key);
	*out = s;
	if (at)
		*at = v;
	return 0;
}

static int yname(const struct ytree *y, const struct iod_sim_topo *t, const struct iod_yaml_node *m,
                 const char *key, uint32_t *node, struct iod_err *e)
{
	const char *s;
	const struct iod_yaml_node *at = m;
	int rc = yscalar(y, m, key, &s, &at, e);
	if (rc)
		return rc;
	if (!s)
		return yerr(y, m, e, "missing \"%s\" (a node name)", key);
	if (iod_sim_topo_find(t, s, node))
		return yerr(y, at, e, "%s: no node named \"%s\"; define it under hosts or switches",
		            key, s);
	return 0;
}

static int yunit(const struct ytree *y, const struct iod_yaml_node *m, const char *key,
                 enum iod_unit_kind kind, uint64_t *out, struct iod_err *e)
{
	const char *s;
	const struct iod_yaml_node *at = m;
	int rc = yscalar(y, m, key, &s, &at, e);
	struct iod_err sub = {0};
	if (rc || !s)
		return rc;
	rc = kind == IOD_UNIT_BANDWIDTH  ? iod_parse_bandwidth(s, out, &sub)
	     : kind == IOD_UNIT_DURATION ? iod_parse_duration(s, out, &sub)
	                                 : iod_parse_size(s, out, &sub);
	if (rc)
		return yerr(y, at, e, "%s: %s", key, sub.msg);
	return 0;
}

static int yopts(const struct ytree *y, struct iod_sim_topo *t, const struct iod_yaml_node *m,
                 struct iod_err *e)
{
	static const char *const keys[] = {"buffer", "host_buffer", "ecn",       "ecn_pkts",
	                                   "hash",   "seed",        "hash_seed", NULL};
	int rc = ymap_keys(y, m, keys, "switch", e);
	if (rc)
		return rc;
	for (const struct iod_yaml_node *k = m->first; k && k->next; k = k->next->next) {
		const struct iod_yaml_node *v = k->next;
		struct iod_err sub = {0};
		if (v->kind != IOD_YAML_SCALAR)
			return yerr(y, v, e, "%s must be a single value", k->str);
		if (topo_option(t, k->str, v->str, &sub))
			return yerr(y, v, e, "%s", sub.msg);
	}
	return 0;
}

static int ynodes(const struct ytree *y, struct iod_sim_topo *t, const struct iod_yaml_node *seq,
                  enum iod_sim_node_kind kind, uint64_t rate, uint64_t delay, struct iod_err *e)
{
	static const char *const keys[] = {"name", "prefix", "count", "attach",
	                                   "rate", "delay",  NULL};
	const char *what = kind == IOD_SIM_HOST ? "hosts" : "switches";
	struct iod_err sub = {0};
	int rc;

	if (seq->kind != IOD_YAML_SEQ)
		return yerr(y, seq, e, "%s must be a list", what);
	for (const struct iod_yaml_node *it = seq->first; it; it = it->next) {
		if (it->kind == IOD_YAML_SCALAR) {
			if (iod_sim_topo_add_node(t, it->str, kind, NULL, &sub))
				return yerr(y, it, e, "%s", sub.msg);
			continue;
		}
		if ((rc = ymap_keys(y, it, keys, what, e)))
			return rc;
		const char *name, *prefix, *count;
		uint64_t n = 1, r = rate, d = delay;
		uint32_t attach = UINT32_MAX;
		const struct iod_yaml_node *at = it;
		if ((rc = yscalar(y, it, "name", &name, NULL, e)) ||
		    (rc = yscalar(y, it, "prefix", &prefix, NULL, e)) ||
		    (rc = yscalar(y, it, "count", &count, &at, e)) ||
		    (rc = yunit(y, it, "rate", IOD_UNIT_BANDWIDTH, &r, e)) ||
		    (rc = yunit(y, it, "delay", IOD_UNIT_DURATION, &d, e)))
			return rc;
		if (ymap_get(y, it, "attach", NULL) && (rc = yname(y, t, it, "attach", &attach, e)))
			return rc;
		if (!name == !prefix)
			return yerr(y, it, e, "give either name: or prefix: (with count:)");
		if (count && (parse_count("count", count, 65536, &n, &sub)))
			return yerr(y, at, e, "%s", sub.msg);
		if (name && count && n != 1)
			return yerr(y, at, e, "count needs prefix:, not name:");
		for (uint64_t i = 0; i < n; i++) {
			uint32_t idx;
			rc = name ? iod_sim_topo_add_node(t, name, kind, &idx, &sub)
			          : add_named(t, kind, &idx, &sub, "%s%" PRIu64, prefix, i);
			if (!rc && attach != UINT32_MAX)
				rc = iod_sim_topo_add_link(t, idx, attach, r, d, &sub);
			if (rc)
				return yerr(y, it, e, "%s", sub.msg);
		}
	}
	return 0;
}

static int ylinks(const struct ytree *y, struct iod_sim_topo *t, const struct iod_yaml_node *seq,
                  uint64_t rate, uint64_t delay, struct iod_err *e)
{
	static const char *const keys[] = {"a", "b", "rate", "delay", "count", NULL};
	struct iod_err sub = {0};
	int rc;

	if (seq->kind != IOD_YAML_SEQ)
		return yerr(y, seq, e, "links must be a list");
	for (const struct iod_yaml_node *it = seq->first; it; it = it->next) {
		uint32_t a, b;
		const struct iod_yaml_node *at = it;
		uint64_t r = rate, d = delay, n = 1;
		const char *count;
		if ((rc = ymap_keys(y, it, keys, "link", e)) ||
		    (rc = yname(y, t, it, "a", &a, e)) || (rc = yname(y, t, it, "b", &b, e)) ||
		    (rc = yunit(y, it, "rate", IOD_UNIT_BANDWIDTH, &r, e)) ||
		    (rc = yunit(y, it, "delay", IOD_UNIT_DURATION, &d, e)) ||
		    (rc = yscalar(y, it, "count", &count, &at, e)))
			return rc;
		if (count && parse_count("count", count, 64, &n, &sub))
			return yerr(y, at, e, "%s", sub.msg);
		for (uint64_t i = 0; i < n; i++)
			if (iod_sim_topo_add_link(t, a, b, r, d, &sub))
				return yerr(y, it, e, "%s", sub.msg);
	}
	return 0;
}

static int yevents(const struct ytree *y, struct iod_sim_topo *t, const struct iod_yaml_node *seq,
                   struct iod_err *e)
{
	static const char *const keys[] = {"at", "a", "b", "index", "down", "up", "rate", NULL};
	struct iod_err sub = {0};
	int rc;

	if (seq->kind != IOD_YAML_SEQ)
		return yerr(y, seq, e, "events must be a list");
	for (const struct iod_yaml_node *it = seq->first; it; it = it->next) {
		uint32_t a, b;
		const struct iod_yaml_node *at = it;
		uint64_t when = UINT64_MAX, rate = 0, idx = 0;
		const char *down, *up, *index;
		if ((rc = ymap_keys(y, it, keys, "event", e)) ||
		    (rc = yname(y, t, it, "a", &a, e)) || (rc = yname(y, t, it, "b", &b, e)) ||
		    (rc = yunit(y, it, "at", IOD_UNIT_DURATION, &when, e)) ||
		    (rc = yunit(y, it, "rate", IOD_UNIT_BANDWIDTH, &rate, e)) ||
		    (rc = yscalar(y, it, "down", &down, NULL, e)) ||
		    (rc = yscalar(y, it, "up", &up, NULL, e)) ||
		    (rc = yscalar(y, it, "index", &index, &at, e)))
			return rc;
		if (when == UINT64_MAX)
			return yerr(y, it, e, "event needs at: (a time like 10ms)");
		if (!!down + !!up + !!rate != 1)
			return yerr(y, it, e,
			            "event needs exactly one of down: true, up: RATE "
			            "(as rate:) or rate: RATE");
		if (down && strcmp(down, "true"))
			return yerr(y, it, e, "down: must be true");
		if (up)
			return yerr(y, it, e, "write up as rate: RATE (the rate it comes back at)");
		if (index) {
			char *end;
			idx = strtoull(index, &end, 10);
			if (*end || end == index)
				return yerr(y, at, e, "index: want a number");
		}
		uint64_t seen = 0;
		bool any = false;
		for (uint32_t l = 0; l < t->n_links; l++) {
			const struct iod_sim_topo_link *lk = &t->links[l];
			if (!((lk->a == a && lk->b == b) || (lk->a == b && lk->b == a)))
				continue;
			if (index && seen++ != idx)
				continue;
			if (iod_sim_topo_add_event(t, when, l, down ? 0 : rate, &sub))
				return yerr(y, it, e, "%s", sub.msg);
			any = true;
		}
		if (!any)
			return yerr(y, it, e, "no link between %s and %s%s", t->nodes[a].name,
			            t->nodes[b].name, index ? " with that index" : "");
	}
	return 0;
}

int iod_sim_topo_parse_yaml(struct iod_sim_topo *t, const char *text, size_t len, const char *file,
                            struct iod_err *e)
{
	static const char *const keys[] = {"name",  "builtin", "switch", "defaults", "switches",
	                                   "hosts", "links",   "events", NULL};
	struct ytree y = {0};
	const struct iod_yaml_node *at = NULL;
	uint64_t rate = 10000000000ull, delay = 1000;
	const char *s;
	int rc;

	iod_sim_topo_init(t);
	y.file = file ? file : "<topology>";
	if ((rc = ytree_parse(&y, text, len, e)))
		goto out;
	if ((rc = ymap_keys(&y, y.root, keys, "topology", e)))
		goto out;
	if ((rc = yscalar(&y, y.root, "builtin", &s, &at, e)))
		goto out;
	if (s) {
		struct iod_err sub = {0};
		if ((rc = iod_sim_topo_builtin(t, s, &sub))) {
			rc = yerr(&y, at, e, "%s", sub.msg);
			goto out;
		}
		if (ymap_get(&y, y.root, "switches", NULL) || ymap_get(&y, y.root, "hosts", NULL) ||
		    ymap_get(&y, y.root, "links", NULL)) {
			rc = yerr(&y, at, e,
			          "builtin: cannot be combined with switches/hosts/links");
			goto out;
		}
	}
	if ((rc = yscalar(&y, y.root, "name", &s, NULL, e)))
		goto out;
	iod_strlcpy(t->name, s ? s : (y.file), sizeof(t->name));
	if (ymap_get(&y, y.root, "switch", &at) && (rc = yopts(&y, t, at, e)))
		goto out;
	if (ymap_get(&y, y.root, "defaults", &at)) {
		static const char *const dkeys[] = {"rate", "delay", NULL};
		if ((rc = ymap_keys(&y, at, dkeys, "defaults", e)) ||
		    (rc = yunit(&y, at, "rate", IOD_UNIT_BANDWIDTH, &rate, e)) ||
		    (rc = yunit(&y, at, "delay", IOD_UNIT_DURATION, &delay, e)))
			goto out;
	}
	if (ymap_get(&y, y.root, "switches", &at) &&
	    (rc = ynodes(&y, t, at, IOD_SIM_SWITCH, rate, delay, e)))
		goto out;
	if (ymap_get(&y, y.root, "hosts", &at) &&
	    (rc = ynodes(&y, t, at, IOD_SIM_HOST, rate, delay, e)))
		goto out;
	if (ymap_get(&y, y.root, "links", &at) && (rc = ylinks(&y, t, at, rate, delay, e)))
		goto out;
	if (ymap_get(&y, y.root, "events", &at) && (rc = yevents(&y, t, at, e)))
		goto out;
	if (!iod_sim_topo_host_count(t))
		rc = yerr(&y, y.root, e, "the topology has no hosts; add a hosts: list");
out:
	ytree_free(&y);
	if (rc)
		iod_sim_topo_free(t);
	return rc;
}

int iod_sim_topo_load(struct iod_sim_topo *t, const char *name_or_path, struct iod_err *e)
{
	const char *slash = strchr(name_or_path, '/');
	size_t n = strlen(name_or_path);
	bool yaml = slash || (n > 5 && (!strcmp(name_or_path + n - 5, ".yaml") ||
	                                !strcmp(name_or_path + n - 4, ".yml")));
	if (!yaml)
		return iod_sim_topo_builtin(t, name_or_path, e);
	struct iod_buf b;
	iod_buf_init(&b);
	int rc = iod_buf_read_file(&b, name_or_path, IOD_SIM_FILE_MAX, e);
	if (!rc)
		rc = iod_sim_topo_parse_yaml(t, b.data, b.len, name_or_path, e);
	else
		iod_sim_topo_init(t);
	iod_buf_free(&b);
	return rc;
}
