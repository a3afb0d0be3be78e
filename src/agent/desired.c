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
 */
#include "iod/agent.h"
#include "iod/mesh.h"

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
	if (v && !iod_json_get_str(v, "addr", &a) && a[0])
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
		const char *svc, *name, *node = NULL;
		if (iod_json_get_str(x, "name", &name) || iod_json_get_str(v, "service", &svc) ||
		    strcmp(svc, service))
			continue;
		iod_json_get_str(v, "node", &node);
		/* a replica in its own netns reports its own address */
		const char *host = NULL;
		if (iod_json_get_str(v, "addr", &host) || !host[0])
			host = node_addr(nodes, node);
		int n = snprintf(buf + used, len - used, "%s%s:%u", used ? "," : "", host,
		                 iod_agent_replica_port(name));
		if (n < 0 || (size_t)n >= len - used)
			return -E2BIG;
		used += (size_t)n;
	}
	return 0;
}

static void health_from_spec(const json_t *h, struct iod_agent_health *out)
{
	const char *kind = "none", *s;
	uint64_t v;
	memset(out, 0, sizeof(*out));
	iod_json_get_str(h, "kind", &kind);
	if (!strcmp(kind, "exec"))
		out->kind = IOD_HEALTH_EXEC;
	else if (!strcmp(kind, "tcp"))
		out->kind = IOD_HEALTH_TCP;
	else if (!strcmp(kind, "http"))
		out->kind = IOD_HEALTH_HTTP;
	else
		return;
	if (!iod_json_get_str(h, "exec", &s) || !iod_json_get_str(h, "command", &s))
		iod_strlcpy(out->command, s, sizeof(out->command));
	if (!iod_json_get_str(h, "path", &s))
		iod_strlcpy(out->path, s, sizeof(out->path));
	if (!out->path[0])
		memcpy(out->path, "/", 2);
	/* the check's port is the replica's port: the process listens on $IOD_PORT */
	out->interval_ns = iod_json_get_u64(h, "interval_ns", &v) ? IOD_NS_PER_S : v;
	out->timeout_ns = iod_json_get_u64(h, "timeout_ns", &v) ? IOD_NS_PER_S : v;
	out->healthy_threshold = iod_json_get_u64(h, "healthy_threshold", &v) ? 1 : (uint32_t)v;
	out->unhealthy_threshold = iod_json_get_u64(h, "unhealthy_threshold", &v) ? 3 : (uint32_t)v;
	if (!out->interval_ns)
		out->interval_ns = IOD_NS_PER_S;
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

static int one(const char *node, const json_t *nodes, const json_t *services,
               const json_t *replicas, const struct iod_mesh_svc_addr *addrs, uint32_t addrs_n,
               const char *name, const json_t *v, struct iod_agent_replica *r, struct iod_err *e)
{
	const char *svc = NULL, *s;
	uint64_t u;
	char peers[IOD_AGENT_ENV_BYTES_MAX / 2];

	memset(r, 0, sizeof(*r));
	r->numa_node = -1;
	if (iod_strlcpy(r->name, name, sizeof(r->name)) || iod_json_get_str(v, "service", &svc))
		return iod_err_set(e, -EINVAL, "replica %s: no service", name);
	iod_strlcpy(r->service, svc, sizeof(r->service));
	const json_t *spec = find_item(services, svc);
	if (!spec)
		return iod_err_set(e, -ENOENT, "replica %s: service %s not found", name, svc);
	if (!iod_json_get_u64(v, "ordinal", &u))
		r->ordinal = (uint32_t)u;
	if (!iod_json_get_u64(v, "generation", &u))
		r->generation = u;
	if (!iod_json_get_str(spec, "type", &s))
		r->stateful = !strcmp(s, "stateful");
	r->restart = IOD_RESTART_ALWAYS;
	if (!iod_json_get_str(spec, "restart", &s))
		r->restart = !strcmp(s, "never")        ? IOD_RESTART_NEVER
		             : !strcmp(s, "on-failure") ? IOD_RESTART_ON_FAILURE
		                                        : IOD_RESTART_ALWAYS;
	/* program: command then args */
	if (!iod_json_get_str(spec, "command", &s) && s[0] && iod_agent_replica_add_arg(r, s))
		return iod_err_set(e, -E2BIG, "replica %s: command too long", name);
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(spec, "args"), i, a)
	{
		if (json_is_string(a) && iod_agent_replica_add_arg(r, json_string_value(a)))
			return iod_err_set(e, -E2BIG, "replica %s: more than %u arguments", name,
			                   IOD_AGENT_ARGS_MAX);
	}
	/* placement: GPUs, and CPUs / NUMA node when the scheduler chose them */
	if (!iod_json_get_str(v, "gpus", &s) && iod_bitmap_parse(s, &r->gpus, e))
		return iod_err_wrap(e, "replica %s: gpus", name);
	if (!iod_json_get_str(v, "cpus", &s) && iod_bitmap_parse(s, &r->cpus, e))
		return iod_err_wrap(e, "replica %s: cpus", name);
	/* no exclusive CPUs: run on the shared NUMA-local ones the scheduler named */
	if (iod_bitmap_empty(&r->cpus) && !iod_json_get_str(v, "cpu_affinity", &s) &&
	    iod_bitmap_parse(s, &r->cpus, e))
		return iod_err_wrap(e, "replica %s: cpu_affinity", name);
	json_t *numa = json_object_get(v, "mem_numa"); /* the scheduler's name for it */
	if (!numa)
		numa = json_object_get(v, "numa");
	if (json_is_integer(numa) && json_integer_value(numa) >= 0 &&
	    json_integer_value(numa) < 1024)
		r->numa_node = (int32_t)json_integer_value(numa);
	const json_t *res = json_object_get(spec, "resources");
	if (!iod_json_get_u64(res, "cpu_millis", &u))
		r->cpu_millis = (uint32_t)IOD_MIN(u, 1000000u);
	if (!iod_json_get_u64(res, "mem_bytes", &u))
		r->mem_bytes = u;
	r->port = iod_agent_replica_port(name);
	health_from_spec(json_object_get(spec, "health"), &r->health);
	/* accelerators the scheduler gave it whole (DPUs, FPGAs): their PCI
	 * addresses, and device names per type, as a device plugin would */
	char pci[256] = "", dpus[256] = "", fpgas[256] = "";
	json_t *ad;
	json_array_foreach(json_object_get(v, "accelerator_devices"), i, ad)
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
		return iod_err_set(e, -E2BIG, "replica %s: environment too large", name);
	/* environment: the spec's, then peers and dependencies */
	const char *k;
	json_t *ev;
	json_object_foreach(json_object_get(spec, "env"), k, ev)
	{
		if (json_is_string(ev) && iod_agent_replica_add_env(r, k, json_string_value(ev)))
			return iod_err_set(e, -E2BIG, "replica %s: environment too large", name);
	}
	char addr[IOD_ADDR_MAX];
	snprintf(addr, sizeof(addr), "%s:%u", node_addr(nodes, node), r->port);
	if (iod_agent_replica_add_env(r, "IOD_ADDR", addr))
		return iod_err_set(e, -E2BIG, "replica %s: environment too large", name);
	if (addresses(nodes, replicas, svc, peers, sizeof(peers)) ||
	    iod_agent_replica_add_env(r, "IOD_PEERS", peers))
		return iod_err_set(e, -E2BIG, "replica %s: too many peers for the environment",
		                   name);
	if (svc_env(r, addrs, addrs_n, svc))
		return iod_err_set(e, -E2BIG, "replica %s: environment too large", name);
	json_array_foreach(json_object_get(spec, "depends_on"), i, a)
	{
		char var[IOD_NAME_MAX + 16];
		if (!json_is_string(a))
			continue;
		dep_var(json_string_value(a), var, sizeof(var));
		if (addresses(nodes, replicas, json_string_value(a), peers, sizeof(peers)) ||
		    iod_agent_replica_add_env(r, var, peers))
			return iod_err_set(e, -E2BIG, "replica %s: dependency %s too large", name,
			                   json_string_value(a));
		if (strcmp(json_string_value(a), svc) &&
		    svc_env(r, addrs, addrs_n, json_string_value(a)))
			return iod_err_set(e, -E2BIG, "replica %s: dependency %s too large", name,
			                   json_string_value(a));
	}
	return 0;
}

int iod_agent_desired_from_state(const char *node, const json_t *nodes, const json_t *services,
                                 const json_t *replicas, struct iod_agent_replica *out,
                                 uint32_t max, uint32_t *n, struct iod_err *e)
{
	struct iod_mesh_svc_addr addrs[IOD_MESH_SERVICES_MAX];
	uint32_t addrs_n = 0;
	size_t i;
	json_t *x;
	*n = 0;
	/* past IOD_MESH_SERVICES_MAX services the proxy serves none: no IOD_SVC_* */
	if (iod_mesh_api_addrs(services, addrs, IOD_MESH_SERVICES_MAX, &addrs_n))
		addrs_n = 0;
	json_array_foreach(json_object_get(replicas, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *name, *on;
		if (iod_json_get_str(x, "name", &name) || iod_json_get_str(v, "node", &on) ||
		    strcmp(on, node))
			continue;
		if (*n >= max)
			return iod_err_set(e, -E2BIG, "more than %u replicas placed on node %s",
			                   max, node);
		int rc = one(node, nodes, services, replicas, addrs, addrs_n, name, v, &out[*n], e);
		if (rc == -ENOENT)
			continue; /* service deleted: its replicas go too */
		if (rc)
			return rc;
		(*n)++;
	}
	return 0;
}
