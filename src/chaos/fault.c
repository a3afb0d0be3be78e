/*
 * fault.c: the pure half of `iod chaos <action>` (include/iod/chaos.h):
 * user input parsed and bounded, Jepsen's partition shapes turned into a
 * grudge from a seed, fault records to and from JSON, and the nftables
 * script of a record.
 *
 * Why a grudge: Jepsen's nemeses describe a partition as "who does not hear
 * from whom"; one-way cuts (--direction) and the majorities ring are then
 * the same data as a clean split. Why a record: a fault that does not heal
 * is the most common chaos bug (Chaos Mesh #763, #1884, #4827); the record
 * names everything the healer needs (the one nft table, the process
 * identity, its cgroup home), so healing never guesses.
 *
 * It must never read a clock, the file system or /proc: the shell
 * (src/chaos/nemesis.c) hands it pids, ports and cgroups.
 */
#include "iod/chaos.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const action_names[] = {
#define X(n, s, d) s,
    IOD_CHAOS_ACTIONS(X)
#undef X
};

static const char *const shape_names[] = {
#define X(n, s, d) s,
    IOD_CHAOS_SHAPES(X)
#undef X
};

static const char *const dir_names[] = {"both", "to", "from"};
static const char *const kind_names[] = {"server", "node", "replica"};

const char *iod_chaos_action_name(enum iod_chaos_action a)
{
	return (unsigned)a < IOD_CHAOS_ACT_COUNT ? action_names[a] : "?";
}

const char *iod_chaos_shape_name(enum iod_chaos_shape sh)
{
	return (unsigned)sh < IOD_CHAOS_SHAPE_COUNT ? shape_names[sh] : "?";
}

const char *iod_chaos_direction_name(enum iod_chaos_direction d)
{
	return (unsigned)d < 3 ? dir_names[d] : "?";
}

int iod_chaos_action_parse(const char *s, enum iod_chaos_action *a, struct iod_err *e)
{
	if (s && !strcmp(s, "network_partition")) {
		*a = IOD_CHAOS_ACT_PARTITION;
		return 0;
	}
	for (int i = 0; s && i < IOD_CHAOS_ACT_COUNT; i++)
		if (!strcmp(s, action_names[i])) {
			*a = (enum iod_chaos_action)i;
			return 0;
		}
	return iod_err_set(e, -EINVAL,
	                   "unknown action \"%.64s\": want partition (network_partition), kill, "
	                   "pause, loss, delay, member or abort",
	                   s ? s : "");
}

int iod_chaos_shape_parse(const char *s, enum iod_chaos_shape *sh, struct iod_err *e)
{
	for (int i = 1; s && i < IOD_CHAOS_SHAPE_COUNT; i++)
		if (!strcmp(s, shape_names[i])) {
			*sh = (enum iod_chaos_shape)i;
			return 0;
		}
	return iod_err_set(e, -EINVAL,
	                   "unknown shape \"%.64s\": want one, majority, majorities-ring, "
	                   "minority-third or primaries (or --between A,B --and C)",
	                   s ? s : "");
}

int iod_chaos_direction_parse(const char *s, enum iod_chaos_direction *d, struct iod_err *e)
{
	for (int i = 0; s && i < 3; i++)
		if (!strcmp(s, dir_names[i])) {
			*d = (enum iod_chaos_direction)i;
			return 0;
		}
	return iod_err_set(e, -EINVAL, "unknown direction \"%.64s\": want to, from or both",
	                   s ? s : "");
}

int iod_chaos_duration_parse(const char *s, uint64_t *ms, struct iod_err *e)
{
	uint64_t ns = 0;
	struct iod_err e1 = {0};
	if (!s || !s[0])
		return iod_err_set(e, -EINVAL, "a duration is required (e.g. 30s, 500ms, 2m)");
	if (s[0] == '-')
		return iod_err_set(e, -EINVAL,
		                   "duration %.64s is negative: a fault lasts %ums..24h", s,
		                   IOD_CHAOS_DURATION_MIN_MS);
	if (iod_parse_duration(s, &ns, &e1))
		return iod_err_set(e, -EINVAL, "duration %.64s: %s", s, e1.msg);
	if (ns / IOD_NS_PER_MS < IOD_CHAOS_DURATION_MIN_MS ||
	    ns / IOD_NS_PER_MS > IOD_CHAOS_DURATION_MAX_MS)
		return iod_err_set(e, -EINVAL,
		                   "duration %.64s is out of range: a fault lasts %ums..24h "
		                   "(a forgotten fault must still end)",
		                   s, IOD_CHAOS_DURATION_MIN_MS);
	*ms = ns / IOD_NS_PER_MS;
	return 0;
}

static int parse_uint(const char *s, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	if (!s || !*s)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		x = x * 10 + (uint64_t)(*p - '0');
		if (x > max)
			return -ERANGE;
	}
	*v = x;
	return 0;
}

int iod_chaos_percent_parse(const char *s, uint32_t *pct, struct iod_err *e)
{
	uint64_t v = 0;
	if (parse_uint(s, 100, &v) || v == 0)
		return iod_err_set(e, -EINVAL, "--percent %.32s: want an integer from 1 to 100",
		                   s ? s : "");
	*pct = (uint32_t)v;
	return 0;
}

static const struct {
	const char *name;
	int sig;
} signals[] = {{"HUP", 1},   {"INT", 2},   {"QUIT", 3},  {"ABRT", 6},  {"KILL", 9},
               {"USR1", 10}, {"SEGV", 11}, {"USR2", 12}, {"TERM", 15}, {"STOP", 19}};

int iod_chaos_signal_parse(const char *s, int *sig, struct iod_err *e)
{
	uint64_t v = 0;
	const char *n = s && !strncmp(s, "SIG", 3) ? s + 3 : s;
	for (size_t i = 0; n && i < IOD_ARRAY_LEN(signals); i++)
		if (!strcasecmp(n, signals[i].name)) {
			*sig = signals[i].sig;
			return 0;
		}
	if (!parse_uint(s, 31, &v) && v >= 1) {
		*sig = (int)v;
		return 0;
	}
	return iod_err_set(e, -EINVAL,
	                   "unknown signal \"%.32s\": a name (KILL, TERM, INT, SEGV...) or 1..31",
	                   s ? s : "");
}

int iod_chaos_target_parse(const char *s, struct iod_chaos_target *t, struct iod_err *e)
{
	uint64_t v = 0;
	memset(t, 0, sizeof(*t));
	if (s && !strncmp(s, "replica/", 8)) {
		const char *n = s + 8;
		size_t l = strlen(n);
		bool ok = l > 0 && l < IOD_NAME_MAX && n[0] != '.';
		for (size_t i = 0; ok && i < l; i++)
			ok = (n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
			     (n[i] >= '0' && n[i] <= '9') || n[i] == '.' || n[i] == '_' ||
			     n[i] == '-';
		if (!ok)
			return iod_err_set(e, -EINVAL, "replica name \"%.64s\" is not valid", n);
		t->kind = IOD_CHAOS_REPLICA;
		memcpy(t->name, n, l + 1);
		return 0;
	}
	if (s && !strncmp(s, "server-", 7) && !parse_uint(s + 7, IOD_CHAOS_MEMBERS_MAX, &v) &&
	    v >= 1) {
		t->kind = IOD_CHAOS_SERVER;
	} else if (s && !strncmp(s, "node-", 5) && !parse_uint(s + 5, 1000, &v) && v >= 1) {
		t->kind = IOD_CHAOS_NODE;
	} else {
		return iod_err_set(
		    e, -EINVAL, "unknown target \"%.64s\": want server-N, node-N or replica/NAME",
		    s ? s : "");
	}
	t->index = (uint32_t)v;
	snprintf(t->name, sizeof(t->name), "%s", s);
	return 0;
}

int iod_chaos_target_list_parse(const char *s, struct iod_chaos_target *t, uint32_t max,
                                struct iod_err *e)
{
	uint32_t n = 0;
	char one[IOD_NAME_MAX + 16];
	if (!s || !*s)
		return iod_err_set(e, -EINVAL, "an empty target list");
	for (const char *p = s; *p;) {
		const char *q = strchr(p, ',');
		size_t l = q ? (size_t)(q - p) : strlen(p);
		if (l == 0 || l >= sizeof(one))
			return iod_err_set(e, -EINVAL,
			                   "target list \"%.64s\": an empty or long name", s);
		if (n >= max)
			return iod_err_set(e, -EINVAL,
			                   "target list \"%.64s\": more than %u targets", s, max);
		memcpy(one, p, l);
		one[l] = 0;
		int rc = iod_chaos_target_parse(one, &t[n], e);
		if (rc)
			return rc;
		for (uint32_t i = 0; i < n; i++)
			if (!strcmp(t[i].name, t[n].name))
				return iod_err_set(e, -EINVAL, "target %s is named twice", one);
		n++;
		p += l + (q ? 1 : 0);
	}
	return (int)n;
}

int iod_chaos_link_parse(const char *s, uint32_t *leaf, uint32_t *spine, struct iod_err *e)
{
	uint64_t l = 0, sp = 0;
	char buf[64];
	const char *dash = s ? strchr(s, '-') : NULL;
	bool ok = s && !strncmp(s, "link/leaf", 9) && dash && !strncmp(dash, "-spine", 6);
	if (ok) {
		size_t n = (size_t)(dash - (s + 9));
		ok = n > 0 && n < sizeof(buf);
		if (ok) {
			memcpy(buf, s + 9, n);
			buf[n] = 0;
			ok = !parse_uint(buf, IOD_UNDERLAY_LEAVES_MAX, &l) && l >= 1 &&
			     !parse_uint(dash + 6, IOD_UNDERLAY_SPINES_MAX, &sp) && sp >= 1;
		}
	}
	if (!ok)
		return iod_err_set(e, -EINVAL,
		                   "unknown link \"%.64s\": want link/leafL-spineS (L 1..%d, S "
		                   "1..%d), e.g. link/leaf1-spine2",
		                   s ? s : "", IOD_UNDERLAY_LEAVES_MAX, IOD_UNDERLAY_SPINES_MAX);
	*leaf = (uint32_t)l;
	*spine = (uint32_t)sp;
	return 0;
}

int iod_chaos_links_parse(const char *sel, uint32_t *leaf, uint32_t *spine, uint32_t max,
                          struct iod_err *e)
{
	uint32_t n = 0;
	if (!sel)
		return iod_err_set(e, -EINVAL, "no link in the selector%s", "");
	for (const char *p = sel; *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		char one[64];
		uint32_t lf, sp;
		if (l >= sizeof(one))
			return iod_err_set(e, -EINVAL, "unknown link \"%.40s...\": too long", p);
		memcpy(one, p, l);
		one[l] = 0;
		if (iod_chaos_link_parse(one, &lf, &sp, e))
			return -EINVAL;
		for (uint32_t i = 0; leaf && spine && i < n; i++)
			if (leaf[i] == lf && spine[i] == sp)
				return iod_err_set(e, -EINVAL, "%s twice in one selector", one);
		if (n >= max)
			return iod_err_set(e, -E2BIG, "more than %u links in one selector", max);
		if (leaf && spine) {
			leaf[n] = lf;
			spine[n] = sp;
		}
		n++;
		p += l;
		if (*p == ',' && !*++p)
			return iod_err_set(e, -EINVAL, "a selector ends with a comma%s", "");
	}
	if (!n)
		return iod_err_set(e, -EINVAL, "no link in the selector%s", "");
	return (int)n;
}

/* ---- grudges ------------------------------------------------------------ */

static void cut_groups(struct iod_chaos_grudge *g, enum iod_chaos_direction d, const bool *a,
                       const bool *b)
{
	for (uint32_t i = 0; i < g->n; i++)
		for (uint32_t j = 0; j < g->n; j++) {
			if (!a[i] || !b[j])
				continue;
			if (d != IOD_CHAOS_DIR_TO)
				g->cut[i][j] = true; /* A -> B */
			if (d != IOD_CHAOS_DIR_FROM)
				g->cut[j][i] = true; /* B -> A */
		}
}

int iod_chaos_groups_grudge(uint32_t n, const bool *a, const bool *b, enum iod_chaos_direction d,
                            struct iod_chaos_grudge *g, struct iod_err *e)
{
	uint32_t na = 0, nb = 0;
	memset(g, 0, sizeof(*g));
	if (n < 2 || n > IOD_CHAOS_MEMBERS_MAX)
		return iod_err_set(e, -EINVAL, "a partition needs 2..%d members, not %u",
		                   IOD_CHAOS_MEMBERS_MAX, n);
	for (uint32_t i = 0; i < n; i++) {
		if (a[i] && b[i])
			return iod_err_set(e, -EINVAL,
			                   "member %u is on both sides of the partition", i);
		na += a[i];
		nb += b[i];
		g->side_a[i] = a[i];
	}
	if (!na || !nb)
		return iod_err_set(e, -EINVAL, "a partition needs a member on each side");
	g->n = n;
	cut_groups(g, d, a, b);
	return 0;
}

/* The first k of a seeded permutation of 0..n-1 into side a. */
static void pick(uint32_t n, uint32_t k, uint64_t seed, bool *a)
{
	uint32_t perm[IOD_CHAOS_MEMBERS_MAX] = {0};
	struct iod_rng r;
	iod_rng_seed(&r, seed);
	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	for (uint32_t i = n - 1; i > 0; i--) {
		uint32_t j = (uint32_t)iod_rng_below(&r, i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (uint32_t i = 0; i < n; i++)
		a[i] = false;
	for (uint32_t i = 0; i < k; i++)
		a[perm[i]] = true;
}

int iod_chaos_shape_grudge(enum iod_chaos_shape sh, uint32_t n, uint32_t leader, uint64_t seed,
                           enum iod_chaos_direction d, struct iod_chaos_grudge *g,
                           struct iod_err *e)
{
	bool a[IOD_CHAOS_MEMBERS_MAX] = {0}, b[IOD_CHAOS_MEMBERS_MAX];
	uint32_t maj = n / 2 + 1;
	memset(g, 0, sizeof(*g));
	if (n < 2 || n > IOD_CHAOS_MEMBERS_MAX)
		return iod_err_set(e, -EINVAL, "shape %s needs 2..%d servers, not %u",
		                   iod_chaos_shape_name(sh), IOD_CHAOS_MEMBERS_MAX, n);
	switch (sh) {
	case IOD_CHAOS_SHAPE_ONE: pick(n, 1, seed, a); break;
	case IOD_CHAOS_SHAPE_MAJORITY: pick(n, n - maj, seed, a); break;
	case IOD_CHAOS_SHAPE_MINORITY_THIRD: pick(n, n / 3 ? n / 3 : 1, seed, a); break;
	case IOD_CHAOS_SHAPE_PRIMARIES:
		if (leader == IOD_CHAOS_NONE || leader >= n)
			return iod_err_set(e, -EINVAL,
			                   "shape primaries isolates the leader, and there is no "
			                   "leader now");
		a[leader] = true;
		break;
	case IOD_CHAOS_SHAPE_MAJORITIES_RING: {
		uint32_t ring[IOD_CHAOS_MEMBERS_MAX], pos[IOD_CHAOS_MEMBERS_MAX] = {0}, dist;
		if (n < 4)
			return iod_err_set(
			    e, -EINVAL,
			    "shape majorities-ring needs at least 4 servers: with %u, "
			    "every server's majority is everyone",
			    n);
		if (d != IOD_CHAOS_DIR_BOTH)
			return iod_err_set(e, -EINVAL,
			                   "shape majorities-ring cuts both ways (no --direction)");
		/* a seeded ring order: the permutation pick() draws, read in order */
		struct iod_rng r;
		iod_rng_seed(&r, seed);
		for (uint32_t i = 0; i < n; i++)
			ring[i] = i;
		for (uint32_t i = n - 1; i > 0; i--) {
			uint32_t j = (uint32_t)iod_rng_below(&r, i + 1), t = ring[i];
			ring[i] = ring[j];
			ring[j] = t;
		}
		for (uint32_t i = 0; i < n; i++)
			pos[ring[i]] = i;
		/* each sees itself and its neighbours up to dist: at least a majority */
		dist = (maj - 1) / 2;
		if (2 * dist + 1 < maj)
			dist++;
		g->n = n;
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t j = 0; j < n; j++) {
				uint32_t dd = pos[i] > pos[j] ? pos[i] - pos[j] : pos[j] - pos[i];
				if (n - dd < dd)
					dd = n - dd;
				g->cut[i][j] = dd > dist;
			}
		return 0;
	}
	default:
		return iod_err_set(e, -EINVAL, "shape %s is not a drawn shape",
		                   iod_chaos_shape_name(sh));
	}
	for (uint32_t i = 0; i < n; i++)
		b[i] = !a[i];
	return iod_chaos_groups_grudge(n, a, b, d, g, e);
}

/* ---- records ------------------------------------------------------------ */

static json_t *member_json(const struct iod_chaos_member *m)
{
	json_t *ports = json_array(), *socks = json_array(), *argv = json_array();
	for (uint32_t i = 0; i < m->nports; i++)
		json_array_append_new(ports, json_integer(m->ports[i]));
	for (uint32_t i = 0; i < m->nsocks; i++)
		json_array_append_new(socks, json_pack("[i,i]", m->socks[i][0], m->socks[i][1]));
	for (uint32_t o = 0; o < m->argv_len;) {
		size_t l = strnlen(m->argv + o, m->argv_len - o);
		json_array_append_new(argv, json_stringn(m->argv + o, l));
		o += (uint32_t)l + 1;
	}
	return json_pack("{s:s, s:s, s:i, s:I, s:o, s:s, s:i, s:s, s:s, s:o, s:o, s:s, s:s}",
	                 "name", m->name, "kind", kind_names[m->kind], "pid", (int)m->pid,
	                 "start_ticks", (json_int_t)m->start_ticks, "ports", ports, "cgroup",
	                 m->cgroup, "cgroup_level", (int)m->cgroup_level, "cgroup_dir",
	                 m->cgroup_dir, "cgroup_home", m->cgroup_home, "socks", socks, "argv", argv,
	                 "pidfile", m->pidfile, "log", m->log);
}

json_t *iod_chaos_fault_to_json(const struct iod_chaos_fault *f)
{
	json_t *members = json_array(), *cut = json_array(), *side = json_array();
	for (uint32_t i = 0; i < f->n; i++) {
		json_array_append_new(members, member_json(&f->m[i]));
		if (f->g.side_a[i])
			json_array_append_new(side, json_integer(i));
		for (uint32_t j = 0; j < f->n; j++)
			if (f->g.cut[i][j])
				json_array_append_new(cut, json_pack("[i,i]", (int)i, (int)j));
	}
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:b, s:o, s:o, s:o, s:s}",
	                      "id", f->id, "action", iod_chaos_action_name(f->action), "shape",
	                      iod_chaos_shape_name(f->shape), "direction",
	                      iod_chaos_direction_name(f->dir), "start_ms", (json_int_t)f->start_ms,
	                      "deadline_ms", (json_int_t)f->deadline_ms, "percent", (int)f->percent,
	                      "signal", f->signal, "restart", f->restart, "members", members, "cut",
	                      cut, "side_a", side, "desc", f->desc);
	if (j && f->action == IOD_CHAOS_ACT_DELAY)
		json_object_set_new(j, "relay",
		                    json_pack("{s:i, s:i, s:i, s:I}", "latency_ms",
		                              (int)f->latency_ms, "port", (int)f->relay_port, "pid",
		                              (int)f->relay_pid, "start_ticks",
		                              (json_int_t)f->relay_ticks));
	if (j && f->link[0])
		json_object_set_new(j, "link",
		                    json_pack("{s:s, s:s, s:s}", "name", f->link, "ns", f->link_ns,
		                              "dev", f->link_dev));
	if (j && f->action == IOD_CHAOS_ACT_MEMBER)
		json_object_set_new(j, "raft_member",
		                    json_pack("{s:I, s:s, s:s, s:s}", "id",
		                              (json_int_t)f->member_id, "raft", f->member_raft,
		                              "api", f->member_api, "apis", f->apis));
	return j;
}

static int get_str(const json_t *j, const char *key, char *buf, size_t len, struct iod_err *e)
{
	const json_t *v = json_object_get(j, key);
	if (!json_is_string(v) || json_string_length(v) >= len)
		return iod_err_set(e, -EINVAL, "record: %s must be a string of < %zu bytes", key,
		                   len);
	memcpy(buf, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int get_int(const json_t *j, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   struct iod_err *e)
{
	const json_t *v = json_object_get(j, key);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return iod_err_set(e, -EINVAL, "record: %s must be an integer in %lld..%lld", key,
		                   (long long)lo, (long long)hi);
	*out = json_integer_value(v);
	return 0;
}

static int member_from_json(const json_t *j, struct iod_chaos_member *m, struct iod_err *e)
{
	char kind[16];
	int64_t v = 0;
	const json_t *a;
	size_t i;
	json_t *x;
	memset(m, 0, sizeof(*m));
	if (!json_is_object(j))
		return iod_err_set(e, -EINVAL, "record: a member must be an object");
	if (get_str(j, "name", m->name, sizeof(m->name), e) ||
	    get_str(j, "kind", kind, sizeof(kind), e) ||
	    get_str(j, "cgroup", m->cgroup, sizeof(m->cgroup), e) ||
	    get_str(j, "cgroup_dir", m->cgroup_dir, sizeof(m->cgroup_dir), e) ||
	    get_str(j, "cgroup_home", m->cgroup_home, sizeof(m->cgroup_home), e) ||
	    get_str(j, "pidfile", m->pidfile, sizeof(m->pidfile), e) ||
	    get_str(j, "log", m->log, sizeof(m->log), e))
		return -EINVAL;
	for (i = 0; i < IOD_ARRAY_LEN(kind_names); i++)
		if (!strcmp(kind, kind_names[i]))
			break;
	if (i == IOD_ARRAY_LEN(kind_names))
		return iod_err_set(e, -EINVAL, "record: unknown member kind %s", kind);
	m->kind = (enum iod_chaos_kind)i;
	if (get_int(j, "pid", 0, INT32_MAX, &v, e))
		return -EINVAL;
	m->pid = (int32_t)v;
	if (get_int(j, "start_ticks", 0, INT64_MAX, &v, e))
		return -EINVAL;
	m->start_ticks = (uint64_t)v;
	if (get_int(j, "cgroup_level", 0, 64, &v, e))
		return -EINVAL;
	m->cgroup_level = (uint32_t)v;
	a = json_object_get(j, "ports");
	if (!json_is_array(a) || json_array_size(a) > IOD_ARRAY_LEN(m->ports))
		return iod_err_set(e, -EINVAL, "record: ports must be a list of at most 2");
	json_array_foreach(a, i, x)
	{
		if (!json_is_integer(x) || json_integer_value(x) < 1 ||
		    json_integer_value(x) > 65535)
			return iod_err_set(e, -EINVAL, "record: a port must be 1..65535");
		m->ports[m->nports++] = (uint16_t)json_integer_value(x);
	}
	a = json_object_get(j, "socks");
	if (!json_is_array(a) || json_array_size(a) > IOD_CHAOS_SOCKS_MAX)
		return iod_err_set(e, -EINVAL, "record: socks must be a list of at most %d",
		                   IOD_CHAOS_SOCKS_MAX);
	json_array_foreach(a, i, x)
	{
		const json_t *l = json_array_get(x, 0), *r = json_array_get(x, 1);
		if (json_array_size(x) != 2 || !json_is_integer(l) || !json_is_integer(r) ||
		    json_integer_value(l) < 1 || json_integer_value(l) > 65535 ||
		    json_integer_value(r) < 1 || json_integer_value(r) > 65535)
			return iod_err_set(e, -EINVAL,
			                   "record: a sock is [local port, remote port]");
		m->socks[m->nsocks][0] = (uint16_t)json_integer_value(l);
		m->socks[m->nsocks][1] = (uint16_t)json_integer_value(r);
		m->nsocks++;
	}
	a = json_object_get(j, "argv");
	if (!json_is_array(a))
		return iod_err_set(e, -EINVAL, "record: argv must be a list of strings");
	json_array_foreach(a, i, x)
	{
		size_t l = json_string_length(x);
		if (!json_is_string(x) || m->argv_len + l + 1 > sizeof(m->argv) ||
		    memchr(json_string_value(x), 0, l))
			return iod_err_set(e, -EINVAL, "record: argv over %d bytes",
			                   IOD_CHAOS_CMDLINE_MAX);
		memcpy(m->argv + m->argv_len, json_string_value(x), l + 1);
		m->argv_len += (uint32_t)l + 1;
	}
	return 0;
}

/* member: {"id", "raft", "api", "apis"} of the Raft member to re-add */
static int raft_member_from_json(const json_t *j, struct iod_chaos_fault *f, struct iod_err *e)
{
	int64_t v = 0;
	const json_t *rm = json_object_get(j, "raft_member");
	if (!json_is_object(rm))
		return iod_err_set(e, -EINVAL, "record: a member fault needs raft_member");
	if (get_int(rm, "id", 1, INT64_MAX, &v, e) ||
	    get_str(rm, "raft", f->member_raft, sizeof(f->member_raft), e) ||
	    get_str(rm, "api", f->member_api, sizeof(f->member_api), e) ||
	    get_str(rm, "apis", f->apis, sizeof(f->apis), e))
		return -EINVAL;
	f->member_id = (uint64_t)v;
	if (!strchr(f->member_raft, ':') || !f->apis[0])
		return iod_err_set(e, -EINVAL,
		                   "record: raft_member needs a raft HOST:PORT and apis");
	return 0;
}

/* delay: {"latency_ms", "port", "pid", "start_ticks"} of its relay */
static int relay_from_json(const json_t *j, struct iod_chaos_fault *f, struct iod_err *e)
{
	int64_t lat = 0, port = 0, pid = 0, ticks = 0;
	const json_t *r = json_object_get(j, "relay");
	if (!json_is_object(r))
		return iod_err_set(e, -EINVAL, "record: a delay fault needs relay");
	if (get_int(r, "latency_ms", 1, IOD_CHAOS_LATENCY_MAX_MS, &lat, e) ||
	    get_int(r, "port", 1, 65535, &port, e) || get_int(r, "pid", 0, INT32_MAX, &pid, e) ||
	    get_int(r, "start_ticks", 0, INT64_MAX, &ticks, e))
		return -EINVAL;
	f->latency_ms = (uint32_t)lat;
	f->relay_port = (uint16_t)port;
	f->relay_pid = (int32_t)pid;
	f->relay_ticks = (uint64_t)ticks;
	return 0;
}

/* A name handed to `ip netns exec` and written into nft: [a-z0-9-] only. */
static bool link_word(const char *s)
{
	if (!s[0] || s[0] == '-')
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			return false;
	return true;
}

static int link_from_json(const json_t *j, struct iod_chaos_fault *f, struct iod_err *e)
{
	const json_t *l = json_object_get(j, "link");
	uint32_t leaf, spine;
	char spelled[IOD_CHAOS_LINK_MAX + 8];
	if (!json_is_object(l) || get_str(l, "name", f->link, sizeof(f->link), e) ||
	    get_str(l, "ns", f->link_ns, sizeof(f->link_ns), e) ||
	    get_str(l, "dev", f->link_dev, sizeof(f->link_dev), e))
		return e->msg[0] ? -EINVAL
		                 : iod_err_set(e, -EINVAL, "record: link must be an object%s", "");
	snprintf(spelled, sizeof(spelled), "link/%s", f->link);
	if (iod_chaos_link_parse(spelled, &leaf, &spine, e))
		return -EINVAL;
	if (!link_word(f->link_ns) || !link_word(f->link_dev))
		return iod_err_set(e, -EINVAL,
		                   "record: link namespace or device is not [a-z0-9-]+");
	if (f->n || (f->action != IOD_CHAOS_ACT_PARTITION && f->action != IOD_CHAOS_ACT_LOSS))
		return iod_err_set(e, -EINVAL,
		                   "record: a link fault is a partition or loss with no members");
	return 0;
}

int iod_chaos_fault_from_json(const json_t *j, struct iod_chaos_fault *f, struct iod_err *e)
{
	char s[32];
	int64_t v = 0;
	size_t i;
	json_t *x;
	const json_t *a;
	memset(f, 0, sizeof(*f));
	if (!json_is_object(j))
		return iod_err_set(e, -EINVAL, "record: not a JSON object");
	if (get_str(j, "id", f->id, sizeof(f->id), e) ||
	    get_str(j, "desc", f->desc, sizeof(f->desc), e))
		return -EINVAL;
	if (!f->id[0])
		return iod_err_set(e, -EINVAL, "record: an empty id");
	for (const char *p = f->id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return iod_err_set(e, -EINVAL, "record: id %s is not [a-z0-9]+", f->id);
	if (get_str(j, "action", s, sizeof(s), e) || iod_chaos_action_parse(s, &f->action, e))
		return -EINVAL;
	if (f->action == IOD_CHAOS_ACT_ABORT)
		return iod_err_set(e, -EINVAL, "record: abort is a Fault object of the mesh%s", "");
	if (get_str(j, "shape", s, sizeof(s), e))
		return -EINVAL;
	if (!strcmp(s, "explicit"))
		f->shape = IOD_CHAOS_SHAPE_EXPLICIT;
	else if (iod_chaos_shape_parse(s, &f->shape, e))
		return -EINVAL;
	if (get_str(j, "direction", s, sizeof(s), e) || iod_chaos_direction_parse(s, &f->dir, e))
		return -EINVAL;
	if (get_int(j, "start_ms", 0, INT64_MAX, &v, e))
		return -EINVAL;
	f->start_ms = (uint64_t)v;
	if (get_int(j, "deadline_ms", 0, INT64_MAX, &v, e))
		return -EINVAL;
	f->deadline_ms = (uint64_t)v;
	if (get_int(j, "percent", 0, 100, &v, e))
		return -EINVAL;
	f->percent = (uint32_t)v;
	if (get_int(j, "signal", 0, 31, &v, e))
		return -EINVAL;
	f->signal = (int)v;
	f->restart = json_is_true(json_object_get(j, "restart"));
	a = json_object_get(j, "members");
	if (!json_is_array(a) || json_array_size(a) > IOD_CHAOS_MEMBERS_MAX)
		return iod_err_set(e, -EINVAL, "record: members must be a list of at most %d",
		                   IOD_CHAOS_MEMBERS_MAX);
	json_array_foreach(a, i, x)
	{
		if (member_from_json(x, &f->m[i], e))
			return -EINVAL;
	}
	f->n = (uint32_t)json_array_size(a);
	f->g.n = f->n;
	a = json_object_get(j, "cut");
	if (!json_is_array(a))
		return iod_err_set(e, -EINVAL, "record: cut must be a list of [from, to]");
	json_array_foreach(a, i, x)
	{
		const json_t *p = json_array_get(x, 0), *q = json_array_get(x, 1);
		if (!json_is_integer(p) || !json_is_integer(q) || json_integer_value(p) < 0 ||
		    json_integer_value(q) < 0 || json_integer_value(p) >= f->n ||
		    json_integer_value(q) >= f->n)
			return iod_err_set(e, -EINVAL, "record: a cut names members 0..%u", f->n);
		f->g.cut[json_integer_value(p)][json_integer_value(q)] = true;
	}
	a = json_object_get(j, "side_a");
	if (!json_is_array(a))
		return iod_err_set(e, -EINVAL, "record: side_a must be a list");
	json_array_foreach(a, i, x)
	{
		if (!json_is_integer(x) || json_integer_value(x) < 0 ||
		    json_integer_value(x) >= f->n)
			return iod_err_set(e, -EINVAL, "record: side_a names members 0..%u", f->n);
		f->g.side_a[json_integer_value(x)] = true;
	}
	if (f->action == IOD_CHAOS_ACT_DELAY && relay_from_json(j, f, e))
		return -EINVAL;
	if (json_object_get(j, "link") && link_from_json(j, f, e))
		return -EINVAL;
	if (f->action == IOD_CHAOS_ACT_MEMBER && (f->n != 1 || raft_member_from_json(j, f, e)))
		return e->msg[0] ? -EINVAL
		                 : iod_err_set(e, -EINVAL, "record: a member fault has one member");
	return 0;
}

static void append(char *buf, size_t len, const char *fmt, const char *s)
{
	size_t l = strlen(buf);
	if (l < len)
		snprintf(buf + l, len - l, fmt, s);
}

void iod_chaos_fault_describe(struct iod_chaos_fault *f)
{
	char *d = f->desc;
	size_t len = sizeof(f->desc);
	d[0] = 0;
	if (f->link[0]) {
		char pct[16];
		snprintf(pct, sizeof(pct), "%u%%", f->percent);
		if (f->action == IOD_CHAOS_ACT_LOSS)
			append(d, len, "loss %s", pct);
		else
			append(d, len, "%s", "partition");
		append(d, len, " of link %s", f->link);
		append(d, len, " (%s",
		       f->dir == IOD_CHAOS_DIR_TO     ? "toward the spine"
		       : f->dir == IOD_CHAOS_DIR_FROM ? "from the spine"
		                                      : "both ways");
		append(d, len, ": %s", f->link_dev);
		append(d, len, " in %s)", f->link_ns);
		return;
	}
	switch (f->action) {
	case IOD_CHAOS_ACT_PARTITION: {
		bool any_a = false;
		for (uint32_t i = 0; i < f->n; i++)
			any_a |= f->g.side_a[i];
		append(d, len, "partition %s", iod_chaos_shape_name(f->shape));
		if (!any_a) {
			for (uint32_t i = 0; i < f->n; i++)
				for (uint32_t j = i + 1; j < f->n; j++)
					if (f->g.cut[i][j]) {
						append(d, len, " %s", f->m[i].name);
						append(d, len, "x%s", f->m[j].name);
					}
			break;
		}
		for (int side = 1, k = 0; side >= 0; side--, k = 0) {
			append(d, len, "%s", side ? ": " : " | ");
			for (uint32_t i = 0; i < f->n; i++)
				if (f->g.side_a[i] == (side == 1))
					append(d, len, k++ ? ",%s" : "%s", f->m[i].name);
		}
		append(d, len, " (%s)", iod_chaos_direction_name(f->dir));
		break;
	}
	case IOD_CHAOS_ACT_KILL: {
		char sig[16];
		snprintf(sig, sizeof(sig), "-%d", f->signal);
		append(d, len, "kill %s", sig);
		for (uint32_t i = 0; i < f->n; i++)
			append(d, len, " %s", f->m[i].name);
		append(d, len, "%s", f->restart ? " (restarted at the deadline)" : "");
		break;
	}
	case IOD_CHAOS_ACT_PAUSE:
		append(d, len, "%s", "pause");
		for (uint32_t i = 0; i < f->n; i++)
			append(d, len, " %s", f->m[i].name);
		break;
	case IOD_CHAOS_ACT_LOSS: {
		char pct[16];
		snprintf(pct, sizeof(pct), "%u%%", f->percent);
		append(d, len, "loss %s of what", pct);
		for (uint32_t i = 0; i < f->n; i++)
			append(d, len, i ? ", %s" : " %s", f->m[i].name);
		append(d, len, "%s", " sends");
		break;
	}
	case IOD_CHAOS_ACT_DELAY: {
		char lat[24];
		snprintf(lat, sizeof(lat), "%u ms", f->latency_ms);
		append(d, len, "delay %s of what", lat);
		for (uint32_t i = 0, k = 0; i < f->n; i++)
			if (f->g.side_a[i])
				append(d, len, k++ ? ", %s" : " %s", f->m[i].name);
		append(d, len, "%s", " sends to the cluster");
		break;
	}
	case IOD_CHAOS_ACT_MEMBER: {
		char id[24];
		snprintf(id, sizeof(id), "%llu", (unsigned long long)f->member_id);
		append(d, len, "member remove %s", f->n ? f->m[0].name : "?");
		append(d, len, " (Raft id %s, re-added at the deadline)", id);
		break;
	}
	default: break;
	}
}

void iod_chaos_table_name(const struct iod_chaos_fault *f, char *buf, size_t len)
{
	snprintf(buf, len, "iod_chaos_%s", f->id);
}

/* "{ 7300, 7400 }" of a member's ports */
static void port_set(const struct iod_chaos_member *m, char *buf, size_t len)
{
	size_t l = (size_t)snprintf(buf, len, "{ ");
	for (uint32_t i = 0; i < m->nports && l < len; i++)
		l += (size_t)snprintf(buf + l, len - l, "%s%u", i ? ", " : "", m->ports[i]);
	if (l < len)
		snprintf(buf + l, len - l, " }");
}

static bool has_port(const struct iod_chaos_member *m, uint16_t p)
{
	for (uint32_t i = 0; i < m->nports; i++)
		if (m->ports[i] == p)
			return true;
	return false;
}

/*
 * delay: new connections of a target (by its cgroup) to the others' ports
 * are redirected to the relay (nat output); its connections from before the
 * fault are reset once, so that they come back through the relay.
 */
static int delay_script(const struct iod_chaos_fault *f, const char *table, struct iod_buf *out)
{
	char ports[64];
	int rc = iod_buf_printf(out,
	                        "table inet %s {\n\tchain nat_out {\n\t\ttype nat hook output "
	                        "priority -100; policy accept;\n",
	                        table);
	for (uint32_t i = 0; i < f->n; i++)
		for (uint32_t j = 0; j < f->n; j++) {
			const struct iod_chaos_member *a = &f->m[i], *b = &f->m[j];
			if (!f->g.cut[i][j] || !b->nports || !a->cgroup[0])
				continue;
			port_set(b, ports, sizeof(ports));
			rc |= iod_buf_printf(out,
			                     "\t\t# %s -> %s\n\t\tsocket cgroupv2 level %u \"%s\" "
			                     "tcp dport %s redirect to :%u\n",
			                     a->name, b->name, a->cgroup_level, a->cgroup, ports,
			                     f->relay_port);
		}
	rc |= iod_buf_printf(out, "\t}\n\tchain out {\n\t\ttype filter hook output priority "
	                          "-10; policy accept;\n");
	for (uint32_t i = 0; i < f->n; i++)
		for (uint32_t j = 0; j < f->n; j++)
			for (uint32_t k = 0; f->g.cut[i][j] && k < f->m[i].nsocks; k++)
				if (has_port(&f->m[j], f->m[i].socks[k][1]))
					rc |= iod_buf_printf(
					    out,
					    "\t\ttcp sport %u tcp dport %u reject with tcp reset\n",
					    f->m[i].socks[k][0], f->m[i].socks[k][1]);
	return rc | iod_buf_printf(out, "\t}\n}\n");
}

/* What a loss (or a link's partition) does to a packet: numgen's values
 * are 0..99, and nft refuses "< 100", so 100 % is a plain drop. */
static void loss_verdict(const struct iod_chaos_fault *f, char *buf, size_t len)
{
	if (f->action == IOD_CHAOS_ACT_LOSS && f->percent < 100)
		snprintf(buf, len, "numgen random mod 100 < %u drop", f->percent);
	else
		snprintf(buf, len, "drop");
}

/*
 * An underlay link, cut (partition) or lossy (loss), in its leaf's
 * namespace: whatever the leaf routes out of or in through its interface to
 * the spine (forward), and what the leaf itself sends or receives on it.
 * Direction (a link's own): to = toward the spine (out of the leaf on that
 * interface: forward and output by oifname), from = from the spine (into the
 * leaf: forward and input by iifname), both = both. Drop, not reject: a cut
 * cable answers nothing, and the flows ECMP hashes onto it black-hole until
 * the heal, as on a fabric without BFD; flows hashed onto the other spines
 * pass.
 */
static int link_script(const struct iod_chaos_fault *f, const char *table, struct iod_buf *out)
{
	char verdict[48];
	loss_verdict(f, verdict, sizeof(verdict));
	const char *d = f->link_dev;
	bool to = f->dir != IOD_CHAOS_DIR_FROM, from = f->dir != IOD_CHAOS_DIR_TO;
	int rc = iod_buf_printf(out,
	                        "table inet %s {\n"
	                        "\tchain link_forward {\n\t\ttype filter hook forward priority "
	                        "-10; policy accept;\n\t\t# link %s, %s\n",
	                        table, f->link, iod_chaos_direction_name(f->dir));
	if (from)
		rc |= iod_buf_printf(out, "\t\tiifname \"%s\" %s\n", d, verdict);
	if (to)
		rc |= iod_buf_printf(out, "\t\toifname \"%s\" %s\n", d, verdict);
	rc |= iod_buf_printf(out, "\t}\n");
	if (from)
		rc |=
		    iod_buf_printf(out,
		                   "\tchain link_input {\n\t\ttype filter hook input priority -10; "
		                   "policy accept;\n\t\tiifname \"%s\" %s\n\t}\n",
		                   d, verdict);
	if (to)
		rc |= iod_buf_printf(out,
		                     "\tchain link_output {\n\t\ttype filter hook output priority "
		                     "-10; policy accept;\n\t\toifname \"%s\" %s\n\t}\n",
		                     d, verdict);
	return rc | iod_buf_printf(out, "}\n");
}

int iod_chaos_nft_script(const struct iod_chaos_fault *f, struct iod_buf *out, struct iod_err *e)
{
	char table[IOD_CHAOS_ID_MAX + 16], ports[64], match[64];
	int rc = 0;
	if (f->action == IOD_CHAOS_ACT_DELAY) {
		iod_chaos_table_name(f, table, sizeof(table));
		if (!f->relay_port)
			return iod_err_set(e, -EINVAL, "a delay fault without its relay's port");
		return delay_script(f, table, out) ? iod_err_set(e, -ENOMEM, "out of memory") : 0;
	}
	if (f->action != IOD_CHAOS_ACT_PARTITION && f->action != IOD_CHAOS_ACT_LOSS)
		return iod_err_set(e, -EINVAL, "a %s fault has no nftables table",
		                   iod_chaos_action_name(f->action));
	iod_chaos_table_name(f, table, sizeof(table));
	if (f->link[0])
		return link_script(f, table, out) ? iod_err_set(e, -ENOMEM, "out of memory") : 0;
	/* one table, made whole or not at all by one `nft -f` transaction; the
	 * output hook sees each loopback packet once, with its socket */
	rc |= iod_buf_printf(out,
	                     "table inet %s {\n\tchain out {\n\t\ttype filter hook output "
	                     "priority -10; policy accept;\n",
	                     table);
	if (f->action == IOD_CHAOS_ACT_LOSS) {
		loss_verdict(f, match, sizeof(match));
		for (uint32_t i = 0; i < f->n; i++) {
			const struct iod_chaos_member *m = &f->m[i];
			rc |= iod_buf_printf(out, "\t\t# %s\n", m->name);
			if (m->cgroup[0])
				rc |=
				    iod_buf_printf(out, "\t\tsocket cgroupv2 level %u \"%s\" %s\n",
				                   m->cgroup_level, m->cgroup, match);
			if (m->nports) {
				port_set(m, ports, sizeof(ports));
				rc |= iod_buf_printf(out, "\t\ttcp sport %s %s\n", ports, match);
			}
			for (uint32_t k = 0; k < m->nsocks; k++)
				rc |= iod_buf_printf(out, "\t\ttcp sport %u tcp dport %u %s\n",
				                     m->socks[k][0], m->socks[k][1], match);
		}
	} else {
		const char *verdict = "reject with tcp reset";
		for (uint32_t i = 0; i < f->n; i++)
			for (uint32_t j = 0; j < f->n; j++) {
				const struct iod_chaos_member *a = &f->m[i], *b = &f->m[j];
				if (!f->g.cut[i][j] || !b->nports)
					continue;
				port_set(b, ports, sizeof(ports));
				rc |= iod_buf_printf(out, "\t\t# %s -> %s\n", a->name, b->name);
				if (a->cgroup[0])
					rc |= iod_buf_printf(
					    out,
					    "\t\tsocket cgroupv2 level %u \"%s\" tcp dport %s %s\n",
					    a->cgroup_level, a->cgroup, ports, verdict);
				for (uint32_t k = 0; k < a->nsocks; k++)
					if (has_port(b, a->socks[k][1]))
						rc |= iod_buf_printf(
						    out, "\t\ttcp sport %u tcp dport %u %s\n",
						    a->socks[k][0], a->socks[k][1], verdict);
			}
	}
	rc |= iod_buf_printf(out, "\t}\n}\n");
	return rc ? iod_err_set(e, -ENOMEM, "out of memory") : 0;
}

static const char *const workload_names[] = {"register", "set", "bank", "append"};

const char *iod_chaos_workload_name(enum iod_chaos_workload w)
{
	return (unsigned)w < sizeof(workload_names) / sizeof(workload_names[0]) ? workload_names[w]
	                                                                        : "?";
}

int iod_chaos_workload_parse(const char *s, enum iod_chaos_workload *w, struct iod_err *e)
{
	for (unsigned i = 0; s && i < sizeof(workload_names) / sizeof(workload_names[0]); i++)
		if (!strcmp(s, workload_names[i])) {
			*w = (enum iod_chaos_workload)i;
			return 0;
		}
	return iod_err_set(e, -EINVAL,
	                   "unknown workload \"%.64s\": want register, set, bank or append",
	                   s ? s : "");
}

int iod_chaos_nemesis_parse(const char *s, uint32_t *mask, struct iod_err *e)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} kinds[] = {{"partition", IOD_CHAOS_NEM_PARTITION},
	             {"kill", IOD_CHAOS_NEM_KILL},
	             {"pause", IOD_CHAOS_NEM_PAUSE},
	             {"member", IOD_CHAOS_NEM_MEMBER}};
	*mask = 0;
	if (s && !strcmp(s, "none"))
		return 0;
	for (const char *p = s; p && *p;) {
		const char *q = strchr(p, '+');
		size_t l = q ? (size_t)(q - p) : strlen(p), i;
		for (i = 0; i < IOD_ARRAY_LEN(kinds); i++)
			if (strlen(kinds[i].name) == l && !strncmp(p, kinds[i].name, l))
				break;
		if (i == IOD_ARRAY_LEN(kinds) || (*mask & kinds[i].bit))
			return iod_err_set(
			    e, -EINVAL,
			    "nemesis \"%.64s\": want none, or partition, kill, pause "
			    "joined by + (each once)",
			    s);
		*mask |= kinds[i].bit;
		p += l + (q ? 1 : 0);
		if (q && !*p)
			return iod_err_set(e, -EINVAL, "nemesis \"%.64s\" ends with +", s);
	}
	if (!*mask)
		return iod_err_set(e, -EINVAL,
		                   "an empty nemesis: want none, partition, kill, pause");
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint64_t iod_chaos_percentile(uint64_t *v, uint32_t n, uint32_t p)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	uint64_t rank = ((uint64_t)p * n + 99) / 100; /* nearest rank, 1-based */
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}
