/*
 * desired.c: from the cluster state (Node, Service and Replica objects as the
 * control plane lists them) to the replicas this node must run, with their
 * program, limits, health check, identity and the addresses of their peers
 * and dependencies. Pure: JSON in, fixed-size records out; deterministic
 * (replicas in list order, which is name order); no I/O, no clock.
 *
 * Addresses: a replica listens on its node's address (Node "addr", default
 * 127.0.0.1) and a port derived from its name (iod_agent_replica_port), so
 * that anyone can compute where a replica is without waiting for its
 * Endpoint: a worker starting at the same moment as its parameter servers
 * already knows where they will be. A replica in its own network namespace
 * has its own address, which its agent reports in the Replica ("addr"):
 * peers' addresses use it once it is there.
 *
 * Discovery through the mesh: IOD_SVC_<NAME>_ADDR for the replica's own
 * service and each dependency is the VIP:port the node's mesh proxy serves
 * it on (iod_mesh_api_addrs: the same computation the proxy's control-plane
 * source makes), so a workload dials a name and the proxy balances.
 *
 * Trust boundary: every Service is re-validated here by the spec loader
 * (iod_spec_load_service), and the replica is built from the validated
 * spec, never from the raw object: a Service written straight into the
 * state cannot run what /v1/deploy would refuse. Failures are per replica:
 * a replica that cannot be built (its service does not validate, a bad
 * placement value, a list that does not fit the environment) comes out
 * with its reason in `fail` and runs nothing; every other replica of the
 * node is built as usual.
 */
#include "iod/agent.h"
#include "iod/ckpt.h"
#include "iod/mesh.h"
#include "iod/objects.h"

#include <stdlib.h>
#include <string.h>

uint16_t iod_agent_replica_port(const char *name)
{
	return (uint16_t)(IOD_AGENT_PORT_BASE + iod_hash_str(name) % IOD_AGENT_PORT_RANGE);
}

static const json_t *find_item(const json_t *list, const char *name)
{
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(list, "items"), i, x)
	{
		const char *n;
		if (!iod_json_get_str(x, "name", &n) && !strcmp(n, name))
			return json_object_get(x, "value");
	}
	return NULL;
}

static const char *node_addr(const json_t *nodes, const char *node)
{
	const json_t *v = node ? find_item(nodes, node) : NULL;
	const char *a;
	if (v && (a = iod_obj_peek_str(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_ADDR)) && a[0])
		return a;
	return "127.0.0.1";
}

/* "host:port,host:port" of every placed replica of service, in name order. */
static int addresses(const json_t *nodes, const json_t *replicas, const char *service, char *buf,
                     size_t len)
{
	size_t i, used = 0;
	json_t *x;
	buf[0] = 0;
	json_array_foreach(json_object_get(replicas, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *svc =
		    iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_SERVICE);
		const char *name;
		if (iod_json_get_str(x, "name", &name) || !svc || strcmp(svc, service))
			continue;
		const char *node = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
		/* a replica in its own netns reports its own address */
		const char *host = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_ADDR);
		if (!host || !host[0])
			host = node_addr(nodes, node);
		int n = snprintf(buf + used, len - used, "%s%s:%u", used ? "," : "", host,
		                 iod_agent_replica_port(name));
		if (n < 0 || (size_t)n >= len - used)
			return -E2BIG;
		used += (size_t)n;
	}
	return 0;
}

/* The check as the validated spec has it (the spec bounds every string
 * to the agent's buffers, so nothing is truncated here). */
static void health_from_spec(const struct iod_spec_health *h, struct iod_agent_health *out)
{
	memset(out, 0, sizeof(*out));
	if (h->kind == IOD_HEALTH_NONE)
		return;
	out->kind = h->kind;
	if (h->command)
		iod_strlcpy(out->command, h->command, sizeof(out->command));
	iod_strlcpy(out->path, h->path ? h->path : "/", sizeof(out->path));
	/* the check's port is the replica's port: the process listens on $IOD_PORT */
	out->interval_ns = h->interval_ns ? h->interval_ns : IOD_NS_PER_S;
	out->timeout_ns = h->timeout_ns;
	out->healthy_threshold = h->healthy_threshold;
	out->unhealthy_threshold = h->unhealthy_threshold;
}

/* IOD_DEP_<SERVICE>: upper case, '-' and '.' become '_'. */
static void dep_var(const char *service, char *buf, size_t len)
{
	size_t l = (size_t)snprintf(buf, len, "IOD_DEP_");
	for (const char *p = service; *p && l + 1 < len; p++)
		buf[l++] = (*p == '-' || *p == '.')   ? '_'
		           : (*p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A')
		                                      : *p;
	buf[l] = 0;
}

/* IOD_SVC_<SERVICE>_ADDR=vip:port of service (absent when not in addrs). */
static int svc_env(struct iod_agent_replica *r, const struct iod_mesh_svc_addr *addrs,
                   uint32_t addrs_n, const char *service)
{
	char var[IOD_NAME_MAX + 16], val[IOD_ADDR_MAX];
	for (uint32_t i = 0; i < addrs_n; i++) {
		if (strcmp(addrs[i].name, service))
			continue;
		if (iod_mesh_env_name(service, var, sizeof(var)))
			return -E2BIG;
		iod_mesh_addr_format(addrs[i].vip4, addrs[i].port, val, sizeof(val));
		return iod_agent_replica_add_env(r, var, val);
	}
	return 0;
}

/* Was field f written at all (with the right type or not)? */
static bool written(const struct iod_obj_replica *v, unsigned f)
{
	return iod_obj_has(v, f) ||
	       json_object_get(v->head.extra, iod_obj_key(IOD_OBJ_KIND_REPLICA, f));
}

/* A placement set ("0-3,8") that must be a string when present. */
static int placement_set(const struct iod_obj_replica *v, unsigned f, const char *set,
                         struct iod_bitmap *b, const char *name, struct iod_err *e)
{
	iod_bitmap_zero(b);
	if (!iod_obj_has(v, f)) {
		/* absent or null reads as no set; any other type is an error */
		if (!written(v, f))
			return 0;
		return iod_err_set(e, -EINVAL, "replica %s: \"%s\" must be a list like \"0-3\"",
		                   name, iod_obj_key(IOD_OBJ_KIND_REPLICA, f));
	}
	if (iod_bitmap_parse(set, b, e))
		return iod_err_wrap(e, "replica %s: %s", name,
		                    iod_obj_key(IOD_OBJ_KIND_REPLICA, f));
	return 0;
}

/*
 * Build one replica from its Replica object v and its service's validated
 * spec sv. Any problem is the replica's own: it goes into e and the caller
 * marks this replica failed, leaving every other replica alone.
 */
static int build(const char *node, const json_t *nodes, const json_t *replicas,
                 const struct iod_mesh_svc_addr *addrs, uint32_t addrs_n,
                 const struct iod_spec_service *sv, const struct iod_obj_replica *v,
                 struct iod_agent_replica *r, struct iod_err *e)
{
	const char *name = r->name;
	char peers[IOD_AGENT_ENV_BYTES_MAX / 2];
	size_t i;

	r->stateful = sv->type == IOD_SERVICE_STATEFUL;
	r->restart = sv->restart;
	if (!sv->command)
		return iod_err_set(e, -EINVAL, "service %s has no command to run", sv->name);
	/* program: command then args (the spec bounds both to the agent's buffer) */
	if (iod_agent_replica_add_arg(r, sv->command))
		return iod_err_set(e, -E2BIG,
		                   "replica %s: command longer than %d bytes "
		                   "(IOD_AGENT_ARGV_BYTES_MAX)",
		                   name, IOD_AGENT_ARGV_BYTES_MAX);
	for (uint32_t k = 0; k < sv->args_n; k++)
		if (iod_agent_replica_add_arg(r, sv->args[k]))
			return iod_err_set(e, -E2BIG,
			                   "replica %s: command and args over %d arguments or %d "
			                   "bytes (IOD_AGENT_ARGS_MAX, IOD_AGENT_ARGV_BYTES_MAX)",
			                   name, IOD_AGENT_ARGS_MAX, IOD_AGENT_ARGV_BYTES_MAX);
	/* placement: GPUs, and CPUs / NUMA node when the scheduler chose them */
	if (placement_set(v, IOD_OBJ_REPLICA_GPUS, v->gpus, &r->gpus, name, e) ||
	    placement_set(v, IOD_OBJ_REPLICA_CPUS, v->cpus, &r->cpus, name, e))
		return -EINVAL;
	/* no exclusive CPUs: run on the shared NUMA-local ones the scheduler named */
	if (iod_bitmap_empty(&r->cpus) &&
	    placement_set(v, IOD_OBJ_REPLICA_CPU_AFFINITY, v->cpu_affinity, &r->cpus, name, e))
		return -EINVAL;
	/* mem_numa is the scheduler's name for it; numa the older one */
	if (written(v, IOD_OBJ_REPLICA_MEM_NUMA)) {
		if (iod_obj_has(v, IOD_OBJ_REPLICA_MEM_NUMA) && v->mem_numa >= 0)
			r->numa_node = v->mem_numa;
	} else if (iod_obj_has(v, IOD_OBJ_REPLICA_NUMA) && v->numa >= 0) {
		r->numa_node = v->numa;
	}
	r->cpu_millis = IOD_MIN(sv->res.cpu_millis, 1000000u);
	r->mem_bytes = sv->res.mem_bytes;
	r->port = iod_agent_replica_port(name);
	health_from_spec(&sv->health, &r->health);
	/* accelerators the scheduler gave it whole (DPUs, FPGAs): their PCI
	 * addresses, and device names per type, as a device plugin would */
	char pci[256] = "", dpus[256] = "", fpgas[256] = "";
	json_t *ad;
	json_array_foreach(v->accelerator_devices, i, ad)
	{
		const char *ap = NULL, *an = NULL, *at = NULL, *ao = NULL;
		iod_json_get_str(ad, "pci", &ap);
		iod_json_get_str(ad, "name", &an);
		iod_json_get_str(ad, "type", &at);
		iod_json_get_str(ad, "os_name", &ao);
		char *list = at && !strcmp(at, "dpu") ? dpus : fpgas;
		if (ap)
			snprintf(pci + strlen(pci), sizeof(pci) - strlen(pci), "%s%s",
			         pci[0] ? "," : "", ap);
		if (an)
			snprintf(list + strlen(list), 256 - strlen(list), "%s%s",
			         list[0] ? "," : "", ao && ao[0] ? ao : an);
	}
	if ((pci[0] && iod_agent_replica_add_env(r, "IOD_ACCELERATORS", pci)) ||
	    (dpus[0] && iod_agent_replica_add_env(r, "IOD_DPUS", dpus)) ||
	    (fpgas[0] && iod_agent_replica_add_env(r, "IOD_FPGAS", fpgas)))
		return iod_err_set(e, -E2BIG,
		                   "replica %s: environment over %d bytes "
		                   "(IOD_AGENT_ENV_BYTES_MAX)",
		                   name, IOD_AGENT_ENV_BYTES_MAX);
	/* environment: the spec's, then peers and dependencies */
	for (uint32_t k = 0; k < sv->env_n; k++)
		if (iod_agent_replica_add_env(r, sv->env[k].name, sv->env[k].value))
			return iod_err_set(e, -E2BIG,
			                   "replica %s: environment over %d bytes "
			                   "(IOD_AGENT_ENV_BYTES_MAX)",
			                   name, IOD_AGENT_ENV_BYTES_MAX);
	char addr[IOD_ADDR_MAX + 8];
	snprintf(addr, sizeof(addr), "%s:%u", node_addr(nodes, node), r->port);
	if (iod_agent_replica_add_env(r, "IOD_ADDR", addr))
		return iod_err_set(e, -E2BIG,
		                   "replica %s: environment over %d bytes "
		                   "(IOD_AGENT_ENV_BYTES_MAX)",
		                   name, IOD_AGENT_ENV_BYTES_MAX);
	if (addresses(nodes, replicas, sv->name, peers, sizeof(peers)) ||
	    iod_agent_replica_add_env(r, "IOD_PEERS", peers))
		return iod_err_set(e, -E2BIG,
		                   "replica %s: IOD_PEERS does not fit the environment (%d bytes, "
		                   "IOD_AGENT_ENV_BYTES_MAX): too many replicas of %s",
		                   name, IOD_AGENT_ENV_BYTES_MAX, sv->name);
	if (svc_env(r, addrs, addrs_n, sv->name))
		return iod_err_set(e, -E2BIG,
		                   "replica %s: environment over %d bytes "
		                   "(IOD_AGENT_ENV_BYTES_MAX)",
		                   name, IOD_AGENT_ENV_BYTES_MAX);
	for (uint32_t d = 0; d < sv->depends_n; d++) {
		char var[IOD_NAME_MAX + 16];
		const char *dep = sv->depends_on[d];
		dep_var(dep, var, sizeof(var));
		if (addresses(nodes, replicas, dep, peers, sizeof(peers)) ||
		    iod_agent_replica_add_env(r, var, peers) ||
		    (strcmp(dep, sv->name) && svc_env(r, addrs, addrs_n, dep)))
			return iod_err_set(e, -E2BIG,
			                   "replica %s: %s (dependency %s) does not fit the "
			                   "environment (%d bytes, IOD_AGENT_ENV_BYTES_MAX)",
			                   name, var, dep, IOD_AGENT_ENV_BYTES_MAX);
	}
	return 0;
}

/* The sandbox the spec asks for; a service's own seccomp profile goes to
 * the agent's filter store (a shell), which gives back its id. */
static int sandbox_of(const struct iod_spec_service *sv, const struct iod_agent_profile_sink *sink,
                      struct iod_agent_replica *r, struct iod_err *e)
{
	const struct iod_spec_sandbox *sb = &sv->sandbox;
	struct iod_agent_sandbox *out = &r->sandbox;
	memset(out, 0, sizeof(*out));
	out->user = sb->user;
	out->uid = sb->uid;
	out->gid = sb->gid;
	out->caps = sb->caps;
	out->seccomp = sb->seccomp;
	out->network = sb->network;
	out->best_effort = sb->best_effort;
	for (uint32_t i = 0; i < sv->secrets_n; i++) {
		size_t l = strlen(out->secrets);
		snprintf(out->secrets + l, sizeof(out->secrets) - l, "%s%s", i ? "," : "",
		         sv->secrets[i]);
	}
	/* where they are, never what they are: values stay out of the environment */
	if (sv->secrets_n && iod_agent_replica_add_env(r, "IOD_SECRETS_DIR", "/run/secrets"))
		return iod_err_set(
		    e, -E2BIG, "replica %s: IOD_SECRETS_DIR does not fit the environment", r->name);
	if (sb->seccomp != IOD_SPEC_SECCOMP_PROFILE)
		return 0;
	char why[IOD_AGENT_REASON_MAX - 64];
	if (!sink || !sink->add)
		return iod_err_set(e, -ENOTSUP, "replica %s: this agent takes no seccomp profiles",
		                   r->name);
	if (sink->add(sink->ctx, sb->seccomp_profile, sb->caps, &out->seccomp_id, why, sizeof(why)))
		return iod_err_set(e, -EINVAL, "replica %s: seccomp profile: %s", r->name, why);
	return 0;
}

/* A service's verdict, validated once per call. */
struct svc_seen {
	bool done;                      /* validated */
	struct iod_spec *spec;          /* the loaded spec (one service), or NULL */
	char why[IOD_AGENT_REASON_MAX]; /* why it does not validate */
};

/* A stateful replica's checkpoint store from its spec's storage: (the
 * deploy copies it into each stateful Service): tiers fastest first. */
static int ckpt_of(const struct iod_spec *sp, struct iod_agent_replica *r, struct iod_err *e)
{
	r->ckpt_tiers_n = 0;
	r->ckpt_replicas = 0;
	r->ckpt_volume = false;
	if (!r->stateful || !sp || !sp->tiers_n)
		return 0;
	if (sp->tiers_n > IOD_STOR_TIERS_MAX)
		return iod_err_set(e, -E2BIG, "replica %s: more than %u storage tiers", r->name,
		                   (unsigned)IOD_STOR_TIERS_MAX);
	for (uint32_t i = 0; i < sp->tiers_n; i++) {
		struct iod_stor_tier_cfg t = {.quota_bp = sp->tiers[i].quota_bp};
		uint32_t k = r->ckpt_tiers_n;
		if (iod_stor_medium_parse(sp->tiers[i].medium, &t.medium, e))
			return iod_err_wrap(e, "replica %s: storage.tiers", r->name);
		for (; k > 0 && r->ckpt_tiers[k - 1].medium > t.medium; k--)
			r->ckpt_tiers[k] = r->ckpt_tiers[k - 1];
		r->ckpt_tiers[k] = t;
		r->ckpt_tiers_n++;
	}
	r->ckpt_replicas = sp->storage_replicas;
	r->ckpt_volume = sp->storage_volume_replicas > 0;
	return 0;
}

/*
 * Where a stateful replica with storage: keeps and finds copies
 * (docs/storage.md, "Peers run by the agents"): $IOD_CKPT_PEERS lists the
 * other nodes' chunk servers (each Node's ckpt_peer) with the replica's
 * namespace, other zones first, then other racks, then the rest, in name
 * order within each; $IOD_CKPT_HERE is this node's own. A chunk server
 * on loopback speaks plain HTTP, one on another address mutual TLS, which
 * the replica speaks with its own credentials (its service's SVID, handed
 * to it by the agent: IOD_CERT, docs/storage.md "Replica credentials").
 */
static int ckpt_peers_of(const char *node, const json_t *nodes, struct iod_agent_replica *r,
                         struct iod_err *e)
{
	struct iod_ckpt_env_peer *p = calloc(IOD_CKPT_PEERS_MAX, sizeof(*p)), here;
	char *list = malloc(IOD_CKPT_PEERS_MAX * (IOD_CKPT_PEER_ADDR_MAX + IOD_NAME_MAX + 2));
	const json_t *me = find_item(nodes, node);
	const char *my_rack =
	    me ? iod_obj_peek_str(IOD_OBJ_KIND_NODE, me, IOD_OBJ_NODE_RACK) : NULL;
	const char *my_zone =
	    me ? iod_obj_peek_str(IOD_OBJ_KIND_NODE, me, IOD_OBJ_NODE_ZONE) : NULL;
	uint32_t n = 0;
	int rc = 0;
	memset(&here, 0, sizeof(here));
	if (!p || !list) {
		free(p);
		free(list);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	for (int pass = 0; pass < 3; pass++) {
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(nodes, "items"), i, x)
		{
			const json_t *v = json_object_get(x, "value");
			const char *name = NULL,
			           *a = iod_obj_peek_str(IOD_OBJ_KIND_NODE, v,
			                                 IOD_OBJ_NODE_CKPT_PEER),
			           *rk = iod_obj_peek_str(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_RACK),
			           *zn = iod_obj_peek_str(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_ZONE);
			if (iod_json_get_str(x, "name", &name) || !a || !a[0] ||
			    strlen(name) >= IOD_NAME_MAX)
				continue;
			bool other_zone =
			    my_zone && my_zone[0] && zn && zn[0] && strcmp(zn, my_zone);
			bool other_rack =
			    my_rack && my_rack[0] && rk && rk[0] && strcmp(rk, my_rack);
			int want = other_zone ? 0 : other_rack ? 1 : 2;
			struct iod_ckpt_env_peer *t = !strcmp(name, node) ? &here : &p[n];
			if (t != &here && (want != pass || n == IOD_CKPT_PEERS_MAX))
				continue;
			if (t == &here && pass != 0)
				continue;
			snprintf(t->node, sizeof(t->node), "%s", name);
			snprintf(t->addr, sizeof(t->addr), "%s/%s", a, r->name);
			if (t != &here)
				n++;
		}
	}
	size_t cap = IOD_CKPT_PEERS_MAX * (IOD_CKPT_PEER_ADDR_MAX + IOD_NAME_MAX + 2);
	rc = iod_ckpt_env_peers_format(p, n, list, cap, e);
	if (!rc && n && iod_agent_replica_add_env(r, "IOD_CKPT_PEERS", list))
		rc = -E2BIG;
	if (!rc && here.node[0] && !(rc = iod_ckpt_env_peers_format(&here, 1, list, cap, e)) &&
	    iod_agent_replica_add_env(r, "IOD_CKPT_HERE", list))
		rc = -E2BIG;
	if (rc == -E2BIG)
		iod_err_set(e, rc,
		            "replica %s: IOD_CKPT_PEERS does not fit the environment (%d bytes, "
		            "IOD_AGENT_ENV_BYTES_MAX)",
		            r->name, IOD_AGENT_ENV_BYTES_MAX);
	free(p);
	free(list);
	return rc;
}

static const struct iod_spec_service *service_spec(const json_t *services, size_t idx,
                                                   struct svc_seen *seen)
{
	const json_t *item = json_array_get(json_object_get(services, "items"), idx);
	if (!seen->done) {
		struct iod_spec_diags *d = calloc(1, sizeof(*d));
		const char *name = "?";
		seen->done = true;
		iod_json_get_str(item, "name", &name);
		if (!d) {
			snprintf(seen->why, sizeof(seen->why), "out of memory");
			return NULL;
		}
		if (iod_spec_load_service(name, json_object_get(item, "value"), &seen->spec, d))
			snprintf(seen->why, sizeof(seen->why),
			         "service %s does not validate (%u error%s): %s", name, d->total,
			         d->total == 1 ? "" : "s", d->n ? d->d[0].msg : "?");
		free(d);
	}
	return seen->spec ? &seen->spec->services[0] : NULL;
}

int iod_agent_desired_from_state(const char *node, const json_t *nodes, const json_t *services,
                                 const json_t *replicas,
                                 const struct iod_agent_profile_sink *profiles,
                                 struct iod_agent_replica *out, uint32_t max, uint32_t *n,
                                 struct iod_err *e)
{
	struct iod_mesh_svc_addr addrs[IOD_MESH_SERVICES_MAX];
	const json_t *svc_items = json_object_get(services, "items");
	uint32_t addrs_n = 0, over = 0;
	struct svc_seen *seen = calloc(json_array_size(svc_items) + 1, sizeof(*seen));
	struct iod_obj_replica *ob = malloc(sizeof(*ob));
	size_t i;
	json_t *x;
	*n = 0;
	if (!seen || !ob) {
		free(seen);
		free(ob);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	iod_obj_replica_init(ob);
	/* past IOD_MESH_SERVICES_MAX services the proxy serves none: no IOD_SVC_* */
	if (iod_mesh_api_addrs(services, addrs, IOD_MESH_SERVICES_MAX, &addrs_n))
		addrs_n = 0;
	json_array_foreach(json_object_get(replicas, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *name, *svc = NULL;
		const char *on = iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_NODE);
		if (iod_json_get_str(x, "name", &name) || !on || strcmp(on, node))
			continue;
		if (!name[0] || strlen(name) >= IOD_NAME_MAX)
			continue; /* not a name this agent can track or report */
		if (*n >= max) {
			over++; /* the first max (name order) run; the rest are reported */
			continue;
		}
		struct iod_agent_replica *r = &out[*n];
		memset(r, 0, sizeof(*r));
		r->numa_node = -1;
		memcpy(r->name, name, strlen(name) + 1);
		iod_obj_replica_free(ob);
		iod_obj_replica_from_json(v, ob, NULL);
		r->ordinal = ob->ordinal;
		r->generation = ob->generation;
		if (iod_obj_has(ob, IOD_OBJ_REPLICA_ADDR)) /* the control plane's IPAM's */
			iod_strlcpy(r->addr, ob->addr, sizeof(r->addr));
		svc = ob->service;
		if (!svc[0] || iod_strlcpy(r->service, svc, sizeof(r->service))) {
			snprintf(r->fail, sizeof(r->fail), "replica %s names no service it can run",
			         name);
			(*n)++;
			continue;
		}
		size_t j;
		json_t *it;
		bool found = false;
		json_array_foreach(svc_items, j, it)
		{
			const char *sn;
			if (!iod_json_get_str(it, "name", &sn) && !strcmp(sn, svc)) {
				found = true;
				break;
			}
		}
		if (!found)
			continue; /* service deleted: its replicas go too */
		const struct iod_spec_service *sv = service_spec(services, j, &seen[j]);
		struct iod_err be = {0};
		if (!sv)
			snprintf(r->fail, sizeof(r->fail), "%s", seen[j].why);
		else if (build(node, nodes, replicas, addrs, addrs_n, sv, ob, r, &be) ||
		         sandbox_of(sv, profiles, r, &be) || ckpt_of(seen[j].spec, r, &be) ||
		         (r->ckpt_tiers_n && ckpt_peers_of(node, nodes, r, &be)))
			snprintf(r->fail, sizeof(r->fail), "%s", be.msg);
		if (r->fail[0]) {
			/* nothing of what could not be built may run */
			r->argc = 0;
			r->envc = 0;
		}
		(*n)++;
	}
	for (size_t k = 0; k < json_array_size(svc_items); k++)
		iod_spec_free(seen[k].spec);
	free(seen);
	iod_obj_replica_free(ob);
	free(ob);
	if (over)
		return iod_err_set(e, -E2BIG,
		                   "%u more replicas placed on node %s than its agent runs (%u, "
		                   "IOD_AGENT_REPLICAS_MAX): the first %u by name run",
		                   over, node, max, max);
	return 0;
}
