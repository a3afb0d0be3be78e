/*
 * agent.c: the node agent's loop (shell). It reads the node's desired
 * replicas from a source (today: a manifest file it re-reads when it
 * changes; the control plane's watch plugs in at the same seam), hands them
 * to the reconciler, runs the actions it answers (start a sandbox, signal
 * it, probe it) and publishes every phase change as a revisioned event
 * (<data_dir>/events.jsonl, bounded and rotated) and the node's current
 * status (<data_dir>/status.json, replaced atomically).
 *
 * One thread, one poll(): SIGCHLD/SIGTERM/SIGHUP arrive through a signalfd,
 * timers come from the reconciler's next deadline. It decides nothing: the
 * reconciler does. Health checks run on the prober's thread pool (probe.c),
 * so a hung check never delays another replica's verdict; their results
 * come back through an eventfd. With a subnet configured, each replica gets
 * its own network namespace and address (netns.c). With a control plane,
 * the cluster link (cluster.c) and the node's mesh proxy (meshhost.c) run
 * on their own threads.
 */
#include "internal.h"
#include "iod/net.h"
#include "iod/objects.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The stored key of a Replica field: objects.h owns them. */
#define RK(f) iod_obj_key(IOD_OBJ_KIND_REPLICA, IOD_OBJ_REPLICA_##f)

#define EVENTS_MAX_BYTES (8u << 20) /* events.jsonl rotates past this (1 old file kept) */
#define MANIFEST_POLL_NS (100 * IOD_NS_PER_MS)

struct agent {
	const struct iod_agent_config *cfg;      /* settings */
	struct iod_agent_exec_config exec;       /* executor settings */
	struct iod_agent_caps caps;              /* what the sandbox may use */
	struct iod_agent_rec *rec;               /* the pure core */
	struct iod_agent_proc *procs;            /* per reconciler slot */
	struct iod_agent_replica *desired;       /* the latest desired set (manifest or cluster) */
	uint32_t desired_n;                      /* replicas in desired */
	bool desired_retry;                      /* some did not fit yet: offer them again */
	struct iod_agent_log events;             /* events.jsonl */
	uint64_t rev;                            /* last event revision */
	struct timespec manifest_mtime;          /* of the last manifest read */
	off_t manifest_size;                     /* of the last manifest read */
	bool stopping;                           /* SIGTERM seen: stop everything */
	struct iod_agent_cluster *cluster;       /* control plane link, or NULL (manifest) */
	int wake_fd;                             /* eventfd: the cluster has news */
	struct iod_agent_mesh *mesh;             /* hosted mesh proxy, or NULL */
	struct iod_agent_telemetry *telemetry;   /* sampler and /metrics, or NULL */
	struct iod_agent_prober *prober;         /* health checks in flight */
	struct iod_agent_netns *netns;           /* per-replica networks, or NULL (node's) */
	struct iod_agent_net *nets;              /* per reconciler slot: its network */
	struct iod_agent_replica start_buf;      /* a replica as started (env localized, uid) */
	struct iod_agent_seccomp_store *seccomp; /* compiled filters, shared with checks */
	uint32_t *uids;  /* per reconciler slot: its dynamic uid, 0 = none */
	int uid_lock_fd; /* holds this agent's block of uids */
};

static void assign_addresses(struct agent *a);

/* Whether a replica gets the node's per-replica network (netns.c). */
static bool wants_netns(const struct agent *a, const struct iod_agent_replica *r)
{
	return a->netns && (r->sandbox.network == IOD_SPEC_NET_AUTO ||
	                    r->sandbox.network == IOD_SPEC_NET_PRIVATE);
}

/*
 * Hand the desired set to the reconciler. When some new replicas find no
 * free slot yet (old ones still stopping), the rest is applied and they are
 * offered again after each step, so that they start as soon as room frees.
 */
static int offer_desired(struct agent *a, struct iod_err *e)
{
	int rc = iod_agent_rec_set_desired(a->rec, a->desired, a->desired_n, iod_clock_now_ns(), e);
	if (rc == -ENOSPC && !a->desired_retry)
		IOD_WARN("agent", "%s", e->msg);
	a->desired_retry = rc == -ENOSPC;
	return rc == -ENOSPC ? 0 : rc;
}

void iod_agent_config_default(struct iod_agent_config *c)
{
	const char *home = getenv("HOME");
	memset(c, 0, sizeof(*c));
	if (gethostname(c->name, sizeof(c->name) - 1))
		snprintf(c->name, sizeof(c->name), "node");
	snprintf(c->data_dir, sizeof(c->data_dir), "%s/.local/share/iod", home ? home : "/tmp");
	iod_agent_rec_config_default(&c->rec);
	c->log_max_bytes = 10u << 20;
	c->ckpt_capacity_bytes = IOD_CKPT_CAPACITY_DEFAULT;
	c->log_files = 3;
	c->use_namespaces = true;
	c->lease_ttl_ms = 2000;
	c->stateful_grace_ms = 30000;
	c->mesh = true;
	snprintf(c->mesh_admin, sizeof(c->mesh_admin), "127.0.0.1:15000");
	c->mesh_workers = 1;
	c->telemetry_interval_ns = IOD_NS_PER_S;
	c->telemetry_push_ns = 5 * IOD_NS_PER_S;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	c->cpus = n > 0 ? (uint32_t)n : 1;
}

int iod_agent_events_path(const char *data_dir, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/events.jsonl", data_dir);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The last revision in the events file, so revisions keep rising across restarts. */
static uint64_t last_rev(const char *path)
{
	struct iod_buf b;
	uint64_t rev = 0;
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, path, EVENTS_MAX_BYTES * 2, NULL) == 0 && b.len) {
		char *p = b.data + b.len - 1;
		while (p > b.data && *p == '\n')
			p--;
		while (p > b.data && p[-1] != '\n')
			p--;
		const char *r = strstr(p, "\"rev\":");
		if (r)
			rev = strtoull(r + 6, NULL, 10);
	}
	iod_buf_free(&b);
	return rev;
}

static void publish(struct agent *a, const char *type, json_t *ev)
{
	json_t *o = json_object();
	json_object_set_new(o, "rev", json_integer((json_int_t)++a->rev));
	json_object_set_new(o, "time_ms",
	                    json_integer((json_int_t)(iod_time_unix_ns() / IOD_NS_PER_MS)));
	json_object_set_new(o, "type", json_string(type));
	json_object_set_new(o, "node", json_string(a->cfg->name));
	json_object_update(o, ev);
	char *s = iod_json_string(o, true);
	if (s) {
		size_t l = strlen(s);
		s[l] = '\n'; /* replaces the NUL: write l + 1 bytes, no terminator needed */
		iod_agent_log_write(&a->events, s, l + 1);
		free(s);
	}
	json_decref(o);
	json_decref(ev);
}

static void write_status(struct agent *a)
{
	char path[IOD_AGENT_PATH_MAX + 16], tmp[IOD_AGENT_PATH_MAX + 16];
	json_t *o = json_object(), *list = json_array();
	for (uint32_t i = 0; i < iod_agent_rec_capacity(a->rec); i++) {
		const struct iod_agent_slot *s = iod_agent_rec_slot(a->rec, i);
		if (!s)
			continue;
		json_t *r = iod_agent_replica_to_json(&s->want);
		json_object_set_new(r, RK(PHASE), json_string(iod_agent_phase_name(s->phase)));
		json_object_set_new(r, RK(READY), json_boolean(s->ready));
		json_object_set_new(r, RK(REASON), json_string(s->reason));
		json_object_set_new(r, RK(RESTARTS), json_integer(s->restarts));
		json_object_set_new(r, "pid", json_integer(s->alive ? a->procs[i].pid : 0));
		if (a->nets[i].addr[0])
			json_object_set_new(r, RK(ADDR), json_string(a->nets[i].addr));
		json_object_del(r, "env");
		json_array_append_new(list, r);
	}
	json_object_set_new(o, "node", json_string(a->cfg->name));
	json_object_set_new(o, "rev", json_integer((json_int_t)a->rev));
	json_object_set_new(o, "replicas", list);
	snprintf(path, sizeof(path), "%s/status.json", a->cfg->data_dir);
	snprintf(tmp, sizeof(tmp), "%s/.status.json.tmp", a->cfg->data_dir);
	FILE *f = fopen(tmp, "w");
	if (f) {
		iod_json_print(f, o, false);
		if (fclose(f) == 0)
			rename(tmp, path);
	}
	json_decref(o);
}

static int load_manifest(struct agent *a, bool force)
{
	struct stat st;
	struct iod_buf b;
	struct iod_err e = {0};
	uint32_t n = 0;
	int rc;

	if (!a->cfg->manifest[0])
		return 0;
	if (stat(a->cfg->manifest, &st)) {
		if (force)
			IOD_WARN("agent", "manifest %s: %s (running nothing until it appears)",
			         a->cfg->manifest, strerror(errno));
		return 0;
	}
	if (!force && st.st_mtim.tv_sec == a->manifest_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == a->manifest_mtime.tv_nsec && st.st_size == a->manifest_size)
		return 0;
	a->manifest_mtime = st.st_mtim;
	a->manifest_size = st.st_size;
	iod_buf_init(&b);
	rc = iod_buf_read_file(&b, a->cfg->manifest, IOD_AGENT_MANIFEST_MAX, &e);
	if (!rc)
		rc = iod_agent_manifest_parse(b.data, b.len, a->desired, IOD_AGENT_REPLICAS_MAX, &n,
		                              &e);
	iod_buf_free(&b);
	if (!rc) {
		a->desired_n = n;
		rc = offer_desired(a, &e);
	} else {
		a->desired_retry = false; /* the buffer no longer holds what was offered */
	}
	if (!rc)
		assign_addresses(a);
	if (rc) {
		IOD_ERROR("agent", "manifest %s: %s (keeping the previous desired state)",
		          a->cfg->manifest, e.msg);
		json_t *ev = json_object();
		json_object_set_new(ev, "reason", json_string(e.msg));
		publish(a, "manifest-error", ev);
		return rc;
	}
	IOD_INFO("agent", "manifest %s: %u replicas for this node", a->cfg->manifest, n);
	return 0;
}

/*
 * Replica slot i's address, with per-replica networks: the control plane's
 * choice (src/ctrl/ipam.c: kept across moves of a stateful replica), else
 * the lowest free of this node's. A replica that has one keeps it, unless
 * it is not running and the control plane now chose another: a replica
 * placed on this node again while its old process was stopping keeps its
 * slot here, and without this it would start at its old address, not the
 * one its Replica (and every peer's overlay table) names.
 */
static void claim_address(struct agent *a, uint32_t i)
{
	struct iod_err e = {0};
	const struct iod_agent_slot *s = iod_agent_rec_slot(a->rec, i);
	uint32_t addr, want = 0, have = 0;
	if (!s || !s->desired || !wants_netns(a, &s->want))
		return;
	if (s->want.addr[0] && iod_net_ipv4_parse(s->want.addr, &want))
		want = 0;
	if (a->nets[i].addr[0] &&
	    (s->alive || !want || (!iod_net_ipv4_parse(a->nets[i].addr, &have) && have == want)))
		return;
	if (want && iod_agent_ipam_claim(&a->netns->ipam, s->want.name, want, NULL, &e)) {
		IOD_WARN("agent", "%s (%s)", e.msg,
		         a->nets[i].addr[0] ? "keeping its address"
		                            : "taking one of this node's instead");
		if (a->nets[i].addr[0])
			return;
		want = 0;
	}
	if (!want && iod_agent_ipam_alloc(&a->netns->ipam, s->want.name, &addr, NULL, &e)) {
		IOD_WARN("agent", "%s", e.msg); /* its start fails with this, too */
		return;
	}
	if (want)
		addr = want;
	iod_agent_ipv4_format(addr, a->nets[i].addr, sizeof(a->nets[i].addr));
}

/* An address for every replica placed here as soon as it is desired, so
 * that the node's replicas starting together already find each other
 * there (iod_agent_env_localize) and the first report carries it. */
static void assign_addresses(struct agent *a)
{
	if (!a->netns)
		return;
	for (uint32_t i = 0; i < iod_agent_rec_capacity(a->rec); i++)
		claim_address(a, i);
}

/* New desired state from the control plane; on re-registration report all. */
static bool take_cluster(struct agent *a)
{
	uint32_t n = 0;
	bool resync = false;
	struct iod_err e = {0};
	bool fresh = iod_agent_cluster_take(a->cluster, a->desired, &n, &resync);
	if (fresh)
		a->desired_n = n;
	if (fresh && offer_desired(a, &e))
		IOD_ERROR("agent", "desired state: %s", e.msg);
	if (fresh)
		assign_addresses(a);
	if (resync)
		for (uint32_t i = 0; i < iod_agent_rec_capacity(a->rec); i++) {
			const struct iod_agent_slot *s = iod_agent_rec_slot(a->rec, i);
			struct iod_agent_action act = {.kind = IOD_AGENT_ACT_REPORT, .slot = i};
			if (!s || !s->desired)
				continue;
			memcpy(act.name, s->want.name, sizeof(act.name));
			act.phase = s->phase;
			act.ready = s->ready;
			act.restarts = s->restarts;
			memcpy(act.reason, s->reason, sizeof(act.reason));
			iod_agent_cluster_report(a->cluster, &act, s->want.service, s->want.port,
			                         a->nets[i].addr, a->procs[i].jail.uid);
		}
	return fresh;
}

/*
 * This agent's block of dynamic uids: the one a hash of its node name
 * names, or the next free one, held by a lock on /run/iod/uid-block-N.lock
 * for as long as the agent runs, so that agents sharing a host never hand
 * out the same uid. Root only (nobody else can switch uids).
 */
static void take_uid_block(struct agent *a)
{
	char path[64];
	a->uid_lock_fd = -1;
	if (!a->caps.root)
		return;
	if (mkdir("/run/iod", 0755) && errno != EEXIST)
		IOD_WARN("agent", "/run/iod: %s (uid blocks are not locked)", strerror(errno));
	uint32_t first = (uint32_t)(iod_hash_str(a->cfg->name) % IOD_AGENT_UID_BLOCKS);
	for (uint32_t i = 0; i < IOD_AGENT_UID_BLOCKS; i++) {
		uint32_t b = (first + i) % IOD_AGENT_UID_BLOCKS;
		snprintf(path, sizeof(path), "/run/iod/uid-block-%u.lock", b);
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
			a->uid_lock_fd = fd;
			a->exec.uid_base = IOD_AGENT_UID_BASE + b * IOD_AGENT_UID_BLOCK;
			return;
		}
		if (fd >= 0)
			close(fd);
		if (fd < 0)
			break; /* cannot lock at all: use the hashed block */
	}
	a->exec.uid_base = IOD_AGENT_UID_BASE + first * IOD_AGENT_UID_BLOCK;
	IOD_WARN("agent", "no free uid block under /run/iod: using block %u unlocked", first);
}

/* A replica's dynamic uid: derived from its name (stable across restarts,
 * so its data stays its own), probing on while another replica of this
 * agent holds it. */
static uint32_t replica_uid(struct agent *a, uint32_t slot, const char *name)
{
	for (uint32_t probe = 0;; probe++) {
		uint32_t uid = iod_agent_uid_of(a->exec.uid_base, name, probe);
		bool taken = false;
		for (uint32_t i = 0; i < iod_agent_rec_capacity(a->rec) && !taken; i++)
			taken = i != slot && a->uids[i] == uid && iod_agent_rec_slot(a->rec, i);
		if (!taken)
			return a->uids[slot] = uid;
	}
}

static void do_action(struct agent *a, const struct iod_agent_action *act)
{
	const struct iod_agent_slot *s = iod_agent_rec_slot(a->rec, act->slot);
	struct iod_agent_proc *p = &a->procs[act->slot];
	struct iod_err e = {0};
	char detail[256];

	switch (act->kind) {
	case IOD_AGENT_ACT_START: {
		struct iod_agent_net *net = &a->nets[act->slot];
		const bool own_net = wants_netns(a, &s->want);
		if (own_net) /* the Replica's address as of now (a move may have changed it) */
			claim_address(a, act->slot);
		int rc = own_net ? iod_agent_netns_get(a->netns, act->name, net, &e) : 0;
		struct iod_agent_replica *r = &a->start_buf;
		*r = s->want;
		if (!rc && own_net) /* this node's peers at their own addresses */
			iod_agent_env_localize(r, a->cfg->addr[0] ? a->cfg->addr : "127.0.0.1",
			                       &a->netns->ipam);
		/* on the overlay: services at their overlay VIPs (docs/network.md) */
		if (!rc && own_net && a->netns->vsw && iod_agent_vswitch_svc_env(a->netns->vsw, r))
			IOD_WARN("agent",
			         "%s: IOD_SVC_* with the overlay VIPs do not fit its "
			         "environment: they keep the mesh's",
			         act->name);
		/* service_mesh.transport shm: where the proxy's AF_UNIX sockets are
		 * (a client tries DIR/SERVICE.sock, then the VIP; a server may
		 * listen on DIR/ep/REPLICA.sock too). Set whatever the transport,
		 * so a live switch needs no restart; not in a namespace of its own */
		if (!rc && !own_net && a->cfg->mesh_unix_dir[0] &&
		    iod_agent_replica_add_env(r, "IOD_MESH_UNIX_DIR", a->cfg->mesh_unix_dir))
			IOD_WARN("agent", "%s: IOD_MESH_UNIX_DIR does not fit its environment",
			         act->name);
		if (r->sandbox.user == IOD_SPEC_USER_DYNAMIC && a->caps.root)
			r->sandbox.uid = r->sandbox.gid = replica_uid(a, act->slot, r->name);
		if (!rc)
			rc = iod_agent_exec_start_net(&a->exec, r, own_net ? net : NULL, p, &e);
		if (net->netns_fd >= 0) { /* the sandbox holds it now (or failed) */
			close(net->netns_fd);
			net->netns_fd = -1;
		}
		if (rc) {
			if (own_net)
				iod_agent_netns_put(a->netns, act->name, net);
			IOD_WARN("agent", "%s: start failed: %s", act->name, e.msg);
			iod_agent_rec_on_start_failed(a->rec, act->name, e.msg, iod_clock_now_ns());
		} else {
			if (p->sandbox_warn[0])
				IOD_WARN("agent", "%s: %s", act->name, p->sandbox_warn);
			IOD_DEBUG("agent", "%s: started pid %d", act->name, (int)p->pid);
			iod_agent_rec_on_started(a->rec, act->name, iod_clock_now_ns());
		}
		break;
	}
	case IOD_AGENT_ACT_STOP: iod_agent_exec_signal(p, SIGTERM); break;
	case IOD_AGENT_ACT_KILL: iod_agent_exec_signal(p, SIGKILL); break;
	case IOD_AGENT_ACT_PROBE: {
		uint16_t port = s->want.health.port ? s->want.health.port : s->want.port;
		/* the replica's own address in its netns; else the node's (on a
		 * local cluster each node has its own) */
		const char *host = a->nets[act->slot].addr[0] ? a->nets[act->slot].addr
		                   : a->cfg->addr[0]          ? a->cfg->addr
		                                              : "127.0.0.1";
		if (iod_agent_prober_submit(a->prober, act->slot, act->name, s->started_ns,
		                            &s->want.health, host, port, &p->jail)) {
			snprintf(detail, sizeof(detail), "health-check queue full (%d queued)",
			         IOD_AGENT_REPLICAS_MAX);
			iod_agent_rec_on_probe(a->rec, act->name, false, detail,
			                       iod_clock_now_ns());
		}
		break;
	}
	case IOD_AGENT_ACT_REPORT: {
		json_t *ev = json_object();
		json_object_set_new(ev, "replica", json_string(act->name));
		json_object_set_new(ev, RK(SERVICE), json_string(s ? s->want.service : ""));
		json_object_set_new(ev, RK(PHASE), json_string(iod_agent_phase_name(act->phase)));
		json_object_set_new(ev, RK(READY), json_boolean(act->ready));
		json_object_set_new(ev, RK(RESTARTS), json_integer(act->restarts));
		json_object_set_new(ev, RK(REASON), json_string(act->reason));
		if (act->removed)
			json_object_set_new(ev, "removed", json_true());
		IOD_INFO("agent", "%s: %s%s (%s)", act->name, iod_agent_phase_name(act->phase),
		         act->ready ? ", ready" : "", act->reason);
		publish(a, "replica", ev);
		if (a->cluster && s && !act->removed)
			iod_agent_cluster_report(a->cluster, act, s->want.service, s->want.port,
			                         a->nets[act->slot].addr,
			                         a->procs[act->slot].jail.uid);
		if (act->removed && a->netns) {
			/* gone from this node: its address goes back to the subnet */
			iod_agent_netns_put(a->netns, act->name, &a->nets[act->slot]);
			iod_agent_ipam_release(&a->netns->ipam, act->name);
			a->nets[act->slot].addr[0] = 0;
		}
		break;
	}
	}
}

/* Only our sandboxes: exec health checks and `ip` runs are waited for by
 * whoever started them (waitpid(-1) here would steal their status). */
static void reap(struct agent *a)
{
	int st;
	for (uint32_t i = 0; i < iod_agent_rec_capacity(a->rec); i++) {
		const struct iod_agent_slot *s = iod_agent_rec_slot(a->rec, i);
		if (!s || !s->alive || a->procs[i].pid <= 0 ||
		    waitpid(a->procs[i].pid, &st, WNOHANG) != a->procs[i].pid)
			continue;
		{
			/* the init reports a killed workload as 128 + signal */
			int code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
			int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
			if (!sig && code > 128 && code < 128 + 65) {
				sig = code - 128;
				code = 0;
			}
			a->procs[i].pid = 0;
			iod_agent_exec_cleanup(&a->procs[i]);
			if (a->netns) /* its netns and veth go; its address stays its own */
				iod_agent_netns_put(a->netns, s->want.name, &a->nets[i]);
			iod_agent_rec_on_exited(a->rec, s->want.name, code, sig,
			                        iod_clock_now_ns());
		}
	}
}

/* Finished health checks to the reconciler; a result for a process that
 * has since exited or restarted is dropped. */
static void take_probes(struct agent *a)
{
	struct iod_agent_probe_result r;
	while (iod_agent_prober_take(a->prober, &r) == 0) {
		const struct iod_agent_slot *s = iod_agent_rec_slot(a->rec, r.slot);
		if (!s || !s->alive || strcmp(s->want.name, r.name) ||
		    s->started_ns != r.generation)
			continue;
		iod_agent_rec_on_probe(a->rec, r.name, r.ok, r.detail, iod_clock_now_ns());
	}
}

static bool any_alive(const struct agent *a)
{
	for (uint32_t i = 0; i < iod_agent_rec_capacity(a->rec); i++) {
		const struct iod_agent_slot *s = iod_agent_rec_slot(a->rec, i);
		if (s && s->alive)
			return true;
	}
	return false;
}

static int agent_init(struct agent *a, const struct iod_agent_config *c, struct iod_err *e)
{
	char path[IOD_AGENT_PATH_MAX];
	int rc;

	memset(a, 0, sizeof(*a));
	a->cfg = c;
	a->wake_fd = -1;
	if (mkdir(c->data_dir, 0755) && errno != EEXIST)
		return iod_err_set(e, -errno, "data dir %s: %s (create it or pass --data-dir)",
		                   c->data_dir, strerror(errno));
	if ((rc = iod_agent_rec_new(&c->rec, IOD_AGENT_REPLICAS_MAX, &a->rec)))
		return iod_err_set(e, rc, "reconciler: invalid settings (backoff, capacity)");
	a->procs = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*a->procs));
	a->desired = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*a->desired));
	a->nets = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*a->nets));
	a->uids = calloc(IOD_AGENT_REPLICAS_MAX, sizeof(*a->uids));
	a->uid_lock_fd = -1;
	if (!a->procs || !a->desired || !a->nets || !a->uids)
		return iod_err_set(e, -ENOMEM, "out of memory for %u replicas",
		                   IOD_AGENT_REPLICAS_MAX);
	iod_agent_caps_probe(&a->caps);
	if (a->caps.warning[0])
		IOD_WARN("agent", "sandbox: %s", a->caps.warning);
	snprintf(a->exec.node, sizeof(a->exec.node), "%s", c->name);
	snprintf(a->exec.run_dir, sizeof(a->exec.run_dir), "%s", c->data_dir);
	if (c->mesh_unix_dir[0]) { /* its replicas bind it: it must exist first */
		snprintf(a->exec.mesh_unix_dir, sizeof(a->exec.mesh_unix_dir), "%s",
		         c->mesh_unix_dir);
		iod_mesh_unix_dirs(c->mesh_unix_dir);
	}
	snprintf(a->exec.cgroup_prefix, sizeof(a->exec.cgroup_prefix), "iod/%s", c->name);
	ssize_t n = readlink("/proc/self/exe", a->exec.self_exe, sizeof(a->exec.self_exe) - 1);
	a->exec.self_exe[n > 0 ? n : 0] = 0;
	a->exec.log_max_bytes = c->log_max_bytes;
	a->exec.ckpt_capacity_bytes = c->ckpt_capacity_bytes;
	if (c->creds && c->servers[0]) {
		/* replicas' own credentials: their services' SVIDs (cluster.c) */
		snprintf(a->exec.svid_dir, sizeof(a->exec.svid_dir), "%s", c->svid_dir);
		snprintf(a->exec.api_servers, sizeof(a->exec.api_servers), "%s", c->servers);
	}
	a->exec.log_files = c->log_files;
	a->exec.use_namespaces = c->use_namespaces;
	a->exec.caps = &a->caps;
	if (!c->use_namespaces)
		IOD_WARN("agent",
		         "sandbox off (--no-sandbox): replicas run as plain processes of the "
		         "agent, with its uid and privileges");
	/* the filters, compiled once: every sandbox and check loads them */
	if (a->caps.seccomp && (rc = iod_agent_seccomp_store_new(&a->seccomp, e)))
		return rc;
	a->exec.seccomp = a->seccomp;
	if ((rc = iod_agent_secrets_new(&a->exec.secrets)))
		return iod_err_set(e, rc, "out of memory");
	take_uid_block(a);
	iod_agent_cgroup_sweep(&a->caps, a->exec.cgroup_prefix); /* a previous run's leftovers */
	for (uint32_t i = 0; i < IOD_AGENT_REPLICAS_MAX; i++)
		a->nets[i].netns_fd = -1;
	if (c->netns_subnet[0]) {
		a->netns = calloc(1, sizeof(*a->netns));
		if (!a->netns)
			return iod_err_set(e, -ENOMEM, "out of memory");
		rc = a->caps.ns_net
		         ? c->overlay_dev[0]
		               ? iod_agent_netns_open_overlay(a->netns, c->name, c->netns_subnet, e)
		               : iod_agent_netns_open(a->netns, c->name, c->netns_subnet, e)
		         : iod_err_set(e, -EPERM,
		                       "network namespaces not permitted here: replicas "
		                       "share the node's network instead");
		if (rc == -EPERM) {
			IOD_WARN("agent", "%s", e->msg);
			e->msg[0] = 0;
			free(a->netns);
			a->netns = NULL;
		} else if (rc) {
			free(a->netns);
			a->netns = NULL;
			return rc;
		} else {
			char gw[20];
			iod_agent_ipv4_format(iod_agent_ipam_gateway(&a->netns->ipam), gw,
			                      sizeof(gw));
			IOD_INFO(
			    "agent", "per-replica network namespaces on %s (%s %s, gateway %s)",
			    c->netns_subnet, a->netns->overlay ? "overlay host port" : "bridge",
			    a->netns->overlay ? a->netns->host_port : a->netns->bridge, gw);
			if (a->netns->overlay &&
			    (rc = iod_agent_vswitch_start(&a->netns->vsw, c, a->netns, e)))
				return rc;
		}
	}
	iod_agent_events_path(c->data_dir, path, sizeof(path));
	a->rev = last_rev(path);
	if ((rc = iod_agent_log_open(&a->events, path, EVENTS_MAX_BYTES, 1, e)))
		return rc;
	return 0;
}

static void agent_free(struct agent *a)
{
	/* a dead replica's memory cgroup can stay busy for a moment after its
	 * last process is reaped: retry for up to a second */
	char dir[IOD_AGENT_PATH_MAX * 2];
	snprintf(dir, sizeof(dir), "%s/%s", a->caps.cgroup_mem, a->exec.cgroup_prefix);
	for (int i = 0; a->exec.cgroup_prefix[0] && a->caps.cgroup_version && i < 50; i++) {
		iod_agent_cgroup_sweep(&a->caps, a->exec.cgroup_prefix);
		if (access(dir, F_OK))
			break;
		usleep(20000);
	}
	if (a->netns) {
		iod_agent_vswitch_stop(a->netns->vsw); /* its ports first */
		a->netns->vsw = NULL;
		iod_agent_netns_close(a->netns); /* every veth, netns, then the bridge */
	}
	free(a->netns);
	free(a->nets);
	free(a->uids);
	if (a->uid_lock_fd >= 0)
		close(a->uid_lock_fd);
	iod_agent_seccomp_store_free(a->seccomp);
	iod_agent_secrets_free(a->exec.secrets);
	iod_agent_log_close(&a->events);
	iod_agent_rec_free(a->rec);
	free(a->procs);
	free(a->desired);
}

int iod_agent_run(const struct iod_agent_config *c, struct iod_err *e)
{
	struct agent *a = calloc(1, sizeof(*a));
	struct iod_agent_action acts[IOD_AGENT_ACTIONS_MAX];
	sigset_t mask, old;
	int sfd, rc;

	if (!a)
		return iod_err_set(e, -ENOMEM, "out of memory");
	/* blocked before any thread starts (agent_init starts the virtual
	 * switch's): every thread inherits the mask, so SIGCHLD and SIGTERM
	 * reach only the signalfd. A thread started before took a replica's
	 * SIGCHLD now and then, and SIGCHLD's default discarded it: that exit
	 * was never reaped and the replica stayed "stopping" */
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, &old);
	if ((rc = agent_init(a, c, e))) {
		agent_free(a);
		free(a);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return rc;
	}
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		rc = iod_err_set(e, -errno, "signalfd: %s", strerror(errno));
		goto out;
	}
	if ((rc = iod_agent_prober_new(IOD_AGENT_PROBE_WORKERS, &a->prober, e)))
		goto out;
	json_t *ev = json_object();
	json_object_set_new(ev, "reason",
	                    json_string(a->caps.warning[0] ? a->caps.warning : "sandbox complete"));
	publish(a, "agent-started", ev);
	IOD_INFO("agent", "node %s: data in %s, %s %s", c->name, c->data_dir,
	         c->servers[0] ? "control plane" : "manifest",
	         c->servers[0]    ? c->servers
	         : c->manifest[0] ? c->manifest
	                          : "(none)");
	load_manifest(a, true);
	if (c->servers[0]) {
		a->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (a->wake_fd < 0 ||
		    (rc = iod_agent_cluster_start(&a->cluster, c, a->wake_fd, a->seccomp,
		                                  a->exec.secrets, e))) {
			rc = a->wake_fd < 0 ? iod_err_set(e, -errno, "eventfd: %s", strerror(errno))
			                    : rc;
			goto out;
		}
		if (a->netns && a->netns->vsw)
			iod_agent_cluster_set_vswitch(a->cluster, a->netns->vsw);
		if (c->mesh && (rc = iod_agent_mesh_start(&a->mesh, c, a->cluster, e)))
			goto out;
	}

	/* telemetry is an observer: failing to start it never stops the agent */
	struct iod_err te = {0};
	if (iod_agent_telemetry_start(&a->telemetry, c, &te))
		IOD_WARN("agent", "node %s: no telemetry: %s", c->name, te.msg);
	if (a->netns && a->netns->vsw)
		iod_agent_telemetry_set_vswitch(a->telemetry, a->netns->vsw);

	uint64_t start = iod_clock_now_ns(), stop_by = 0, next_manifest = start + MANIFEST_POLL_NS;
	for (;;) {
		uint32_t n = 0;
		uint64_t next;
		bool reported = false;
		iod_agent_rec_step(a->rec, iod_clock_now_ns(), acts, IOD_AGENT_ACTIONS_MAX, &n,
		                   &next);
		for (uint32_t i = 0; i < n; i++) {
			do_action(a, &acts[i]);
			reported |= acts[i].kind == IOD_AGENT_ACT_REPORT;
		}
		if (reported)
			write_status(a);
		if (n)
			continue; /* actions produced observations: decide again */
		if (a->stopping && stop_by && (!any_alive(a) || iod_clock_now_ns() > stop_by))
			break;
		uint64_t t = iod_clock_now_ns();
		if (!a->stopping && c->run_for_ns && t - start >= c->run_for_ns) {
			a->stopping = true;
		} else if (!a->stopping && t >= next_manifest) {
			load_manifest(a, false);
			next_manifest = t + MANIFEST_POLL_NS;
			continue;
		}
		if (!a->stopping && a->cluster && take_cluster(a))
			continue;
		if (!a->stopping && a->desired_retry) {
			struct iod_err oe = {0};
			offer_desired(a, &oe);
			if (!a->desired_retry) {
				assign_addresses(a);
				continue;
			}
		}
		if (a->stopping && !stop_by) {
			IOD_INFO("agent", "stopping every replica");
			a->desired_retry = false;
			iod_agent_rec_set_desired(a->rec, NULL, 0, t, NULL);
			stop_by = t + c->rec.stop_grace_ns + IOD_NS_PER_S;
			continue;
		}
		uint64_t wake = IOD_MIN(next, next_manifest);
		if (a->stopping)
			wake = IOD_MIN(wake, stop_by);
		int timeout_ms = wake <= t ? 0 : (int)IOD_MIN((wake - t + 999999) / 1000000, 1000);
		struct pollfd pfs[3] = {{.fd = sfd, .events = POLLIN},
		                        {.fd = iod_agent_prober_fd(a->prober), .events = POLLIN},
		                        {.fd = a->wake_fd, .events = POLLIN}};
		if (poll(pfs, a->wake_fd >= 0 ? 3 : 2, timeout_ms) > 0) {
			uint64_t cnt;
			if (a->wake_fd >= 0 && pfs[2].revents)
				(void)!read(a->wake_fd, &cnt, sizeof(cnt));
			if (pfs[1].revents) {
				/* clear first, then drain: a result after this wakes us */
				(void)!read(pfs[1].fd, &cnt, sizeof(cnt));
				take_probes(a);
			}
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGCHLD)
					reap(a);
				else if (si.ssi_signo == SIGHUP)
					load_manifest(a, true);
				else
					a->stopping = true;
			}
		}
	}
	IOD_INFO("agent", "node %s: every replica stopped; leaving", c->name);
	iod_agent_telemetry_stop(a->telemetry);
	a->telemetry = NULL;
	iod_agent_mesh_stop(a->mesh);
	a->mesh = NULL;
	iod_agent_cluster_stop(a->cluster); /* flushes the last reports */
	a->cluster = NULL;
	ev = json_object();
	json_object_set_new(ev, "reason", json_string("stopped"));
	publish(a, "agent-stopped", ev);
	write_status(a);
	rc = 0;
out:
	iod_agent_telemetry_stop(a->telemetry);
	a->telemetry = NULL;
	iod_agent_prober_free(a->prober); /* checks in flight end at their timeouts */
	a->prober = NULL;
	iod_agent_mesh_stop(a->mesh); /* before the cluster it reads */
	iod_agent_cluster_stop(a->cluster);
	if (a->wake_fd >= 0)
		close(a->wake_fd);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	agent_free(a);
	free(a);
	return rc;
}
