/*
 * spec.c: the spec module's public face: load a file or a buffer, free a
 * spec, print diagnostics, find a service, and render the normalized spec
 * as JSON.
 *
 * Loading is all-or-nothing: on any diagnostic the partly filled spec is
 * freed and the caller gets only the diagnostics. The JSON rendering is
 * deterministic (file order, fixed key order), so it can be compared and
 * hashed. Reading the named file is the only I/O this module does; it never
 * prints except in iod_spec_diags_print, to the stream it is given.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Diagnostics in file order (stable: equal positions keep walk order). */
static void sort_diags(struct iod_spec_diags *d)
{
	for (uint32_t i = 1; i < d->n; i++) {
		struct iod_spec_diag x = d->d[i];
		uint32_t j = i;
		while (j > 0 && (d->d[j - 1].line > x.line ||
		                 (d->d[j - 1].line == x.line && d->d[j - 1].col > x.col))) {
			d->d[j] = d->d[j - 1];
			j--;
		}
		d->d[j] = x;
	}
}

/* A problem the YAML layer found, as a spec diagnostic. */
static void yaml_diag(void *ctx, uint32_t line, uint32_t col, const char *msg)
{
	spec_diag(ctx, line, col, "%s", msg);
}

static int load(const char *name, const char *text, size_t len, bool standalone,
                struct iod_spec **out, struct iod_spec_diags *diags)
{
	struct spec_ld ld;
	struct iod_yaml_node *root = NULL;
	struct iod_spec *s;
	int rc;

	IOD_ASSERT(out && diags);
	*out = NULL;
	memset(&ld, 0, sizeof(ld));
	ld.name = name;
	ld.diags = diags;
	ld.standalone = standalone;
	if (len > IOD_SPEC_FILE_MAX) {
		spec_diag(&ld, 0, 0, "the spec is %zu bytes; the most is %u (IOD_SPEC_FILE_MAX)",
		          len, (unsigned)IOD_SPEC_FILE_MAX);
		return -EFBIG;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		spec_diag(&ld, 0, 0, "out of memory");
		return -ENOMEM;
	}
	/* the spec keeps at most a few times the file's size */
	iod_arena_init(&s->arena, 16 * 1024, 0);
	iod_arena_init(&ld.tree, 64 * 1024, 0);
	s->path = iod_arena_strdup(&s->arena, name);
	ld.spec = s;
	const struct iod_yaml_opts yo = {
	    .what = "spec", .nodes_max_name = "IOD_SPEC_NODES_MAX", .diag = yaml_diag, .ctx = &ld};
	rc = iod_yaml_parse(&ld.tree, text, len, &yo, &root);
	if (rc == 0)
		rc = spec_build(&ld, root);
	iod_arena_free(&ld.tree);
	sort_diags(diags);
	if (rc == 0 && diags->total)
		rc = -EINVAL; /* never accept a spec that drew a diagnostic */
	if (rc) {
		iod_spec_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int iod_spec_load_buffer(const char *name, const char *text, size_t len, struct iod_spec **out,
                         struct iod_spec_diags *diags)
{
	memset(diags, 0, sizeof(*diags));
	return load(name ? name : "<buffer>", text, len, false, out, diags);
}

/* Keys the control plane adds to a stored Service value (src/ctrl/deploy.c,
 * the typed objects): not part of the spec language, ignored when a stored
 * Service is validated (by the API on a raw write, by every node agent
 * before it runs one). A new such key belongs here. */
static const char *const state_keys[] = {"generation", "gpu", "version", "vip"};

int iod_spec_load_service(const char *name, const json_t *value, struct iod_spec **out,
                          struct iod_spec_diags *diags)
{
	json_t *v, *doc;
	char *text;
	int rc;

	memset(diags, 0, sizeof(*diags));
	*out = NULL;
	if (!json_is_object(value)) {
		diags->n = diags->total = 1;
		snprintf(diags->d[0].msg, sizeof(diags->d[0].msg),
		         "service \"%.64s\": the stored value is not an object", name ? name : "?");
		return -EINVAL;
	}
	v = json_deep_copy(value);
	for (unsigned i = 0; v && i < IOD_ARRAY_LEN(state_keys); i++)
		json_object_del(v, state_keys[i]);
	/* the object's name is the service's name, whatever the value says */
	if (v && name)
		json_object_set_new(v, "name", json_string(name));
	/* a stateful service's copy of the spec's storage: (src/ctrl/deploy.c)
	 * is validated where it was written, at the top level */
	json_t *st = v ? json_incref(json_object_get(v, "storage")) : NULL;
	if (st)
		json_object_del(v, "storage");
	doc = v ? json_pack("{s:[o]}", "services", v) : NULL;
	if (doc && st)
		json_object_set(doc, "storage", st);
	json_decref(st);
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text) {
		diags->n = diags->total = 1;
		snprintf(diags->d[0].msg, sizeof(diags->d[0].msg), "out of memory");
		return -ENOMEM;
	}
	rc = load(name ? name : "<service>", text, strlen(text), true, out, diags);
	free(text);
	return rc;
}

/* Bytes one peer list of n replicas takes: "host:port," per replica. */
static uint64_t peers_bytes(uint64_t n, uint32_t host_len)
{
	return n * ((uint64_t)host_len + 7); /* ':' + 5 digits + ',' + host */
}

int iod_spec_service_env_check(const struct iod_spec *sp, uint32_t i, uint32_t host_len_max,
                               uint32_t (*replicas_of)(const char *service, void *ctx), void *ctx,
                               char *why, size_t len)
{
	const struct iod_spec_service *s;
	uint64_t user = 0, lists, total;
	uint32_t biggest_n = 0;
	const char *biggest = NULL;

	IOD_ASSERT(sp && i < sp->services_n);
	s = &sp->services[i];
	if (!s->command)
		return 0; /* nothing runs: no environment is built */
	host_len_max = IOD_MAX(host_len_max, 15u);
	for (uint32_t k = 0; k < s->env_n; k++)
		user += strlen(s->env[k].name) + strlen(s->env[k].value) + 2;
	lists = peers_bytes(s->replicas, host_len_max);
	biggest = s->name;
	biggest_n = s->replicas;
	for (uint32_t d = 0; d < s->depends_n; d++) {
		const struct iod_spec_service *dep = iod_spec_find_service(sp, s->depends_on[d]);
		uint32_t n = dep           ? dep->replicas
		             : replicas_of ? replicas_of(s->depends_on[d], ctx)
		                           : 0;
		/* IOD_DEP_<NAME>= and IOD_SVC_<NAME>_ADDR=vip:port besides the list */
		lists += peers_bytes(n, host_len_max) + 2 * (IOD_NAME_MAX + 32);
		if (n > biggest_n) {
			biggest_n = n;
			biggest = s->depends_on[d];
		}
	}
	total = user + lists + IOD_AGENT_ENV_RESERVED_BYTES;
	if (total <= IOD_AGENT_ENV_BYTES_MAX)
		return 0;
	if (why)
		snprintf(why, len,
		         "each replica's environment would take up to %llu bytes (env %llu, "
		         "peer lists %llu: IOD_PEERS and IOD_DEP_* name every replica, the "
		         "longest is %s with %u); an agent holds %d (IOD_AGENT_ENV_BYTES_MAX): "
		         "use fewer replicas or reach them through the mesh",
		         (unsigned long long)total, (unsigned long long)user,
		         (unsigned long long)lists, biggest, biggest_n, IOD_AGENT_ENV_BYTES_MAX);
	return -E2BIG;
}

int iod_spec_load_file(const char *path, struct iod_spec **out, struct iod_spec_diags *diags)
{
	struct iod_buf b;
	struct iod_err e = {0};
	const char *name = strcmp(path, "-") ? path : "<stdin>";
	int rc;

	memset(diags, 0, sizeof(*diags));
	*out = NULL;
	iod_buf_init(&b);
	struct stat st;
	if (strcmp(path, "-") && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		rc = -EISDIR; /* fread on a directory fails with a vague EIO otherwise */
	else
		rc = iod_buf_read_file(&b, path, IOD_SPEC_FILE_MAX, &e);
	if (rc) {
		diags->n = diags->total = 1;
		if (rc == -EFBIG)
			snprintf(diags->d[0].msg, sizeof(diags->d[0].msg),
			         "the file is larger than %u bytes (IOD_SPEC_FILE_MAX)",
			         (unsigned)IOD_SPEC_FILE_MAX);
		else
			snprintf(diags->d[0].msg, sizeof(diags->d[0].msg),
			         "cannot read the spec: %s", strerror(-rc));
		iod_buf_free(&b);
		return rc;
	}
	rc = load(name, b.data, b.len, false, out, diags);
	iod_buf_free(&b);
	return rc;
}

void iod_spec_free(struct iod_spec *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->sgs_n; i++) {
		json_decref(s->sgs[i].ingress);
		json_decref(s->sgs[i].egress);
	}
	iod_arena_free(&s->arena);
	free(s);
}

void iod_spec_diags_print(const struct iod_spec_diags *d, const char *name, FILE *f)
{
	for (uint32_t i = 0; i < d->n; i++) {
		if (d->d[i].line)
			fprintf(f, "%s:%u:%u: %s\n", name, (unsigned)d->d[i].line,
			        (unsigned)d->d[i].col, d->d[i].msg);
		else
			fprintf(f, "%s: %s\n", name, d->d[i].msg);
	}
	if (d->total > d->n)
		fprintf(f, "%s: %u more errors not shown (the first %u are above)\n", name,
		        (unsigned)(d->total - d->n), (unsigned)d->n);
}

const struct iod_spec_service *iod_spec_find_service(const struct iod_spec *s, const char *name)
{
	for (uint32_t i = 0; s && name && i < s->services_n; i++)
		if (!strcmp(s->services[i].name, name))
			return &s->services[i];
	return NULL;
}

/* ---- JSON ---------------------------------------------------------------- */

static const char *const service_type_names[] = {"stateless", "stateful"};
static const char *const spread_names[] = {"default", "spread", "pack"};
static const char *const anti_names[] = {"none", "node", "rack", "zone"};
static const char *const gpu_link_names[] = {"any", "nvlink", "pcie"};
static const char *const numa_names[] = {"any", "single", "none", "restricted"};
static const char *const restart_names[] = {"always", "on-failure", "never"};

static const char *const transport_names[] = {"tcp", "shm", "rdma"};
static const char *const health_names[] = {"none", "exec", "tcp", "http"};

#define NAME_OF(tab, v) ((unsigned)(v) < IOD_ARRAY_LEN(tab) ? (tab)[v] : "?")

static void set(json_t *o, const char *k, json_t *v)
{
	json_object_set_new(o, k, v);
}

static json_t *u64(uint64_t v)
{
	/* jansson integers are signed 64-bit; spec quantities stay far below */
	return json_integer((json_int_t)v);
}

/*
 * The JSON mirrors the spec language with every quantity in base units
 * under a suffixed key (mem_bytes, bandwidth_bps, interval_ns, quota_bp),
 * every default written out, and absent optional parts left out. So the
 * output of `iod validate -o json` is itself a spec that loads to the same
 * thing (JSON is YAML), which tests/unit/test_spec.c checks.
 */
static json_t *network_json(const struct iod_spec_network *n)
{
	json_t *o = json_object();
	set(o, "bandwidth_bps", u64(n->bandwidth_bps));
	if (n->has_latency) {
		char b[48];
		snprintf(b, sizeof(b), "%s%lluns", iod_cmp_name(n->latency_ns.op),
		         (unsigned long long)n->latency_ns.value);
		set(o, "latency", json_string(b));
	}
	return o;
}

static json_t *compute_json(const struct iod_spec_compute *c)
{
	json_t *o = json_object();
	set(o, "type", json_string(iod_compute_type_name(c->type)));
	set(o, "count", u64(c->count));
	set(o, "memory_bytes", u64(c->mem_bytes));
	return o;
}

static json_t *resources_json(const struct iod_spec_resources *r)
{
	json_t *o = json_object();
	set(o, "gpu", u64(r->gpu));
	set(o, "cpu_millis", u64(r->cpu_millis));
	set(o, "mem_bytes", u64(r->mem_bytes));
	set(o, "gpu_mem_bytes", u64(r->gpu_mem_bytes));
	if (r->compute.type != IOD_COMPUTE_NONE)
		set(o, "compute", compute_json(&r->compute));
	set(o, "network", network_json(&r->network));
	return o;
}

static json_t *strings_json(const char *const *v, uint32_t n)
{
	json_t *a = json_array();
	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

/* The flat health form (kind + exec|port|path): what the agent reads. */
static json_t *health_json(const struct iod_spec_health *h)
{
	json_t *o = json_object();
	set(o, "kind", json_string(NAME_OF(health_names, h->kind)));
	if (h->kind == IOD_HEALTH_EXEC)
		set(o, "exec", json_string(h->command));
	if (h->kind == IOD_HEALTH_TCP || h->kind == IOD_HEALTH_HTTP)
		set(o, "port", u64(h->port));
	if (h->kind == IOD_HEALTH_HTTP)
		set(o, "path", json_string(h->path));
	set(o, "interval_ns", u64(h->interval_ns));
	set(o, "timeout_ns", u64(h->timeout_ns));
	set(o, "healthy_threshold", u64(h->healthy_threshold));
	set(o, "unhealthy_threshold", u64(h->unhealthy_threshold));
	return o;
}

static const char *const netmode_names[] = {"auto", "node", "private", "none"};

/* sandbox: written out whole (every default) when the spec had the block. */
static json_t *sandbox_json(const struct iod_spec_sandbox *sb)
{
	json_t *o = json_object(), *caps = json_array();
	char user[32];
	if (sb->user == IOD_SPEC_USER_ROOT)
		snprintf(user, sizeof(user), "root");
	else if (sb->user == IOD_SPEC_USER_ID)
		snprintf(user, sizeof(user), "%u:%u", sb->uid, sb->gid);
	else
		snprintf(user, sizeof(user), "dynamic");
	set(o, "user", json_string(user));
	for (unsigned c = 0; c < IOD_CAPS_N; c++)
		if (sb->caps & (1ull << c))
			json_array_append_new(caps, json_string(iod_cap_name(c)));
	set(o, "capabilities", caps);
	if (sb->seccomp == IOD_SPEC_SECCOMP_PROFILE && sb->seccomp_profile) {
		json_t *p = json_loads(sb->seccomp_profile, 0, NULL);
		set(o, "seccomp", p ? p : json_string("default"));
	} else {
		set(o, "seccomp",
		    json_string(sb->seccomp == IOD_SPEC_SECCOMP_UNCONFINED ? "unconfined"
		                                                           : "default"));
	}
	set(o, "network", json_string(NAME_OF(netmode_names, sb->network)));
	set(o, "best_effort", json_boolean(sb->best_effort));
	return o;
}

bool iod_spec_service_privileged(const struct iod_spec_service *s, char *why, size_t len)
{
	const struct iod_spec_sandbox *sb = &s->sandbox;
	char caps[256] = "";
	size_t off = 0;
	for (unsigned c = 0; c < IOD_CAPS_N && off < sizeof(caps); c++)
		if (sb->caps & (1ull << c))
			off += (size_t)snprintf(caps + off, sizeof(caps) - off, "%s%s",
			                        off ? "," : "", iod_cap_name(c));
	bool root = sb->user == IOD_SPEC_USER_ROOT,
	     unconf = sb->seccomp == IOD_SPEC_SECCOMP_UNCONFINED;
	if (why && len)
		snprintf(why, len, "%s%s%s%s%s%s", root ? "runs as root" : "",
		         root && (caps[0] || unconf) ? ", " : "",
		         caps[0] ? "keeps capabilities " : "", caps, caps[0] && unconf ? ", " : "",
		         unconf ? "runs without seccomp" : "");
	return root || sb->caps || unconf;
}

static json_t *service_json(const struct iod_spec_service *s)
{
	json_t *o = json_object(), *pl = json_object(), *env = json_object(), *ports = json_array();

	set(o, "name", json_string(s->name));
	set(o, "type", json_string(NAME_OF(service_type_names, s->type)));
	set(o, "replicas", u64(s->replicas));
	set(o, "resources", resources_json(&s->res));
	if (s->command && (s->command[strcspn(s->command, " \t\n\"'\\`$")] || !s->command[0])) {
		/* a program name the string form would split or refuse: list form */
		json_t *c = json_array();
		json_array_append_new(c, json_string(s->command));
		set(o, "command", c);
	} else if (s->command) {
		set(o, "command", json_string(s->command));
	}
	set(o, "args", strings_json(s->args, s->args_n));
	for (uint32_t i = 0; i < s->env_n; i++)
		set(env, s->env[i].name, json_string(s->env[i].value));
	set(o, "env", env);
	for (uint32_t i = 0; i < s->ports_n; i++) {
		json_t *p = json_object();
		if (s->ports[i].name)
			set(p, "name", json_string(s->ports[i].name));
		set(p, "port", u64(s->ports[i].port));
		set(p, "protocol", json_string(s->ports[i].proto == IOD_PROTO_UDP ? "udp" : "tcp"));
		json_array_append_new(ports, p);
	}
	set(o, "ports", ports);
	if (s->health.kind != IOD_HEALTH_NONE)
		set(o, "health", health_json(&s->health));
	set(o, "depends_on", strings_json(s->depends_on, s->depends_n));
	set(pl, "strategy", json_string(NAME_OF(spread_names, s->placement.spread)));
	set(pl, "anti_affinity", json_string(NAME_OF(anti_names, s->placement.anti)));
	set(pl, "gpu_link", json_string(NAME_OF(gpu_link_names, s->placement.gpu_link)));
	set(pl, "numa", json_string(NAME_OF(numa_names, s->placement.numa)));
	set(o, "placement", pl);
	set(o, "restart", json_string(NAME_OF(restart_names, s->restart)));
	set(o, "gang", json_boolean(s->gang));
	set(o, "tenant", json_string(s->tenant ? s->tenant : "default"));
	if (s->sandbox.set)
		set(o, "sandbox", sandbox_json(&s->sandbox));
	if (s->secrets_n)
		set(o, "secrets", strings_json(s->secrets, s->secrets_n));
	if (s->mesh_mode_set || s->transport_set) {
		json_t *m = json_object();
		if (s->mesh_mode_set)
			set(m, "mode", json_string(s->mesh_mode == IOD_SPEC_MESH_L7 ? "l7" : "l4"));
		if (s->transport_set) /* the Service object carries it to every proxy */
			set(m, "transport", json_string(NAME_OF(transport_names, s->transport)));
		set(o, "service_mesh", m);
	}
	return o;
}

json_t *iod_spec_sg_to_json(const struct iod_spec_sg *g)
{
	json_t *o = json_object();
	set(o, "service", json_string(g->service));
	set(o, "tenant", json_string(g->tenant ? g->tenant : "default"));
	if (g->ingress)
		set(o, "ingress", json_deep_copy(g->ingress));
	if (g->egress)
		set(o, "egress", json_deep_copy(g->egress));
	return o;
}

json_t *iod_spec_to_json(const struct iod_spec *s)
{
	json_t *o = json_object();

	IOD_ASSERT(s);
	if (s->services_n) {
		json_t *svcs = json_array();
		for (uint32_t i = 0; i < s->services_n; i++)
			json_array_append_new(svcs, service_json(&s->services[i]));
		set(o, "services", svcs);
	}
	if (s->has_resources) {
		/* the top-level block is the unified form: compute and network only */
		json_t *r = json_object();
		if (s->resources.compute.type != IOD_COMPUTE_NONE)
			set(r, "compute", compute_json(&s->resources.compute));
		set(r, "network", network_json(&s->resources.network));
		set(o, "resources", r);
	}
	if (s->sgs_n) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < s->sgs_n; i++) {
			json_t *g = iod_spec_sg_to_json(&s->sgs[i]);
			json_object_set_new(g, "name", json_string(s->sgs[i].name));
			json_array_append_new(a, g);
		}
		set(o, "security_groups", a);
	}
	if (s->tiers_n) {
		json_t *st = json_object(), *tiers = json_array();
		for (uint32_t i = 0; i < s->tiers_n; i++) {
			json_t *t = json_object();
			set(t, "medium", json_string(s->tiers[i].medium));
			set(t, "quota_bp", u64(s->tiers[i].quota_bp));
			json_array_append_new(tiers, t);
		}
		set(st, "tiers", tiers);
		if (s->storage_replicas)
			set(st, "replicas", u64(s->storage_replicas));
		if (s->storage_volume_replicas)
			set(st, "volume",
			    json_pack("{s:I}", "replicas", (json_int_t)s->storage_volume_replicas));
		set(o, "storage", st);
	}
	if (s->has_mesh) {
		json_t *m = json_object();
		if (s->transport_set) /* unset: the cluster's (iod config) */
			set(m, "transport", json_string(NAME_OF(transport_names, s->transport)));
		set(o, "service_mesh", m);
	}
	return o;
}
