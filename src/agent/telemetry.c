/*
 * telemetry.c: the agent's telemetry thread (shell over src/obs/telemetry.c).
 *
 * Once per interval (1 s by default, never below IOD_TEL_INTERVAL_MIN_MS) it
 * reads the node's replicas from the agent's own status.json, the GPUs
 * through NVML when the node's topology was discovered and NVML loads
 * (dlopen), otherwise each GPU's holder's counters file (the simulated-GPU
 * protocol, docs/observability.md), and each replica's processes from
 * /proc (CPU time and resident memory of its whole process tree). Samples
 * go into the bounded rings of struct iod_tel_node. It serves /metrics and
 * /v1/telemetry (every sample in the rings) on --telemetry-addr, and every
 * push interval sends the node's summary to the control plane
 * (PUT /v1/telemetry/NODE, kept in the servers' memory, not in Raft).
 * With a virtual switch (`iod up --netns`) it also serves /v1/dp/dump, the
 * switch's pipeline with counters and offload verdicts (`iod dp dump
 * --node`), on the same listener and terms as /metrics.
 *
 * No listener beyond loopback without authentication and TLS
 * (docs/security.md): on any address but 127.x the listener is HTTPS with
 * the node's certificate, asks every client for a certificate of the
 * cluster CA and answers only those the authorisation core lets read
 * metrics (iod_sec_authorize, GET metrics: users of any role, nodes and
 * servers; not service identities, not anonymous: 401/403 before any
 * byte of telemetry). Without node credentials it does not serve there at
 * all. A rotated node certificate restarts the listener on the same port
 * (SO_REUSEPORT: the new one listens before the old one closes). On
 * loopback it stays plain HTTP, like the checkpoint chunk server and the
 * mesh's admin endpoint: local scrapers and the loopback `iod up` read it
 * as before. A certificate whose identity `iod revoke` named is refused
 * (401) like the API refuses it: the thread reads the Revocation objects
 * (GET /v1/revocations) every second while it serves HTTPS, so a revoked
 * user stops reading telemetry within about a second, not when the
 * certificate expires. A failed read keeps the last list.
 *
 * It never decides anything about replicas and never blocks the agent's
 * loop: a failure to read, serve or send is logged once and retried.
 */
#include "internal.h"
#include "iod/objects.h"
#include "iod/api.h"
#include "iod/config.h"
#include "iod/agent_run.h"
#include "iod/obs.h"
#include "iod/topo.h"
#include "iod/sec.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <microhttpd.h>
#include <pthread.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The stored key of a Replica field: objects.h owns them. */
#define RK(f) iod_obj_key(IOD_OBJ_KIND_REPLICA, IOD_OBJ_REPLICA_##f)

#if MHD_VERSION >= 0x00097002
#define TEL_MHD_RESULT enum MHD_Result
#else
#define TEL_MHD_RESULT int
#endif

struct tel_counters_slot {
	char replica[IOD_NAME_MAX];   /* whose */
	struct iod_tel_counters last; /* the previous reading */
	uint64_t at_ms;               /* when */
	bool have;                    /* last is valid */
};

struct iod_agent_telemetry {
	const struct iod_agent_config *cfg; /* the agent's settings */
	pthread_t thread;                   /* the sampler */
	pthread_mutex_t lock;               /* guards node (sampler vs. HTTP) */
	bool stop;                          /* under lock: leave */
	pthread_cond_t wake;                /* signalled on stop */
	struct iod_tel_node *node;          /* rings */
	struct iod_topo_nvml *nvml;         /* NVML, or NULL: simulated GPUs */
	struct MHD_Daemon *http;            /* /metrics, /v1/telemetry, or NULL */
	bool tls;                           /* http is HTTPS, clients need a certificate */
	struct sockaddr_in sa;              /* where http listens */
	char *cert_pem, *key_pem;           /* what http presents (tls; MHD keeps pointers) */
	uint64_t tls_gen;                   /* creds' rotations when http started */
	bool rotate_warned;                 /* a failed restart on rotation was logged */
	struct iod_api_client api;          /* the control plane, when servers are set */
	bool api_ok;                        /* api initialised */
	uint64_t pushed_ms;                 /* last summary sent */
	bool push_warned;                   /* a failed push was logged */
	struct iod_agent_vswitch *vsw;      /* under lock: the data plane, or NULL */
	struct iod_tel_port *ports;         /* a reading of its ports */
	char (*revoked)[IOD_NAME_MAX];      /* under lock: Revocation names (iod revoke) */
	uint32_t revoked_n;                 /* under lock: how many */
	uint64_t revoked_ms;                /* last read of /v1/revocations */
	bool revoked_warned;                /* a failed read was logged */
	uint32_t slots_n;                   /* counters slots in use */
	struct tel_counters_slot slots[IOD_TEL_REPLICAS_MAX]; /* per replica */
};

static uint64_t wall_ms(void)
{
	return iod_time_unix_ns() / IOD_NS_PER_MS;
}

static uint64_t mono_ns(void)
{
	return iod_clock_now_ns();
}

/* ---- /proc ------------------------------------------------------------------- */

#define PROC_MAX 4096 /* processes looked at per sample: a node's, bounded */

struct proc_row {
	int pid, ppid;      /* from /proc/PID/stat */
	uint64_t ticks;     /* utime + stime */
	uint64_t rss_pages; /* resident set */
};

static uint32_t proc_scan(struct proc_row *rows, uint32_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	uint32_t n = 0;
	if (!d)
		return 0;
	while (n < max && (de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char path[64], buf[1024];
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = 0;
		/* the command may hold spaces and parens: fields follow the last ')' */
		char *p = strrchr(buf, ')');
		if (!p)
			continue;
		unsigned long long f3 = 0, utime = 0, stime = 0, rss = 0;
		char state;
		int ppid = 0;
		/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
		 * cutime cstime priority nice threads itreal starttime vsize rss */
		if (sscanf(
		        p + 1,
		        " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
		        "%*d %llu %*u %llu",
		        &state, &ppid, &utime, &stime, &f3, &rss) != 6)
			continue;
		rows[n].pid = atoi(de->d_name);
		rows[n].ppid = ppid;
		rows[n].ticks = utime + stime;
		rows[n].rss_pages = rss;
		n++;
	}
	closedir(d);
	return n;
}

/* CPU ticks and resident pages of pid and all its descendants. */
static void tree_sum(const struct proc_row *rows, uint32_t n, int pid, uint64_t *ticks,
                     uint64_t *pages)
{
	int queue[256];
	uint32_t qh = 0, qt = 0;
	*ticks = *pages = 0;
	queue[qt++] = pid;
	while (qh < qt) {
		int p = queue[qh++];
		for (uint32_t i = 0; i < n; i++) {
			if (rows[i].pid == p) {
				*ticks += rows[i].ticks;
				*pages += rows[i].rss_pages;
			}
			if (rows[i].ppid == p && qt < IOD_ARRAY_LEN(queue))
				queue[qt++] = rows[i].pid;
		}
	}
}

/* ---- one sample --------------------------------------------------------------- */

static struct tel_counters_slot *slot_of(struct iod_agent_telemetry *t, const char *replica)
{
	for (uint32_t i = 0; i < t->slots_n; i++)
		if (!strcmp(t->slots[i].replica, replica))
			return &t->slots[i];
	if (t->slots_n >= IOD_TEL_REPLICAS_MAX)
		return NULL;
	struct tel_counters_slot *s = &t->slots[t->slots_n++];
	memset(s, 0, sizeof(*s));
	iod_strlcpy(s->replica, replica, sizeof(s->replica));
	return s;
}

/* Read a replica's counters file; 0 when read. */
static int read_counters(struct iod_agent_telemetry *t, const char *replica, long pid,
                         struct iod_tel_counters *c)
{
	char path[IOD_AGENT_PATH_MAX + 64];
	struct iod_buf b;
	struct iod_err e = {0};
	if (t->cfg->use_namespaces)
		snprintf(path, sizeof(path), "/proc/%ld/root/tmp/iod-telemetry", pid);
	else if (iod_agent_replica_path(t->cfg->data_dir, replica, "telemetry", path, sizeof(path)))
		return -ENAMETOOLONG;
	iod_buf_init(&b);
	int rc = iod_buf_read_file(&b, path, IOD_TEL_COUNTERS_FILE_MAX, &e);
	if (!rc)
		rc = iod_tel_counters_parse(b.data ? b.data : "", b.len, c, &e);
	iod_buf_free(&b);
	return rc;
}

/* An interface's speed as its driver reports it (ethtool); 0 when it
 * reports none (a veth may report a nominal 10 Gb/s: what the kernel says). */
static uint64_t iface_speed_bps(const char *iface)
{
	struct ethtool_cmd ec = {.cmd = ETHTOOL_GSET};
	struct ifreq r;
	memset(&r, 0, sizeof(r));
	iod_strlcpy(r.ifr_name, iface, sizeof(r.ifr_name));
	r.ifr_data = (void *)&ec;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	int rc = ioctl(fd, SIOCETHTOOL, &r);
	close(fd);
	uint32_t mbps = ethtool_cmd_speed(&ec);
	if (rc || !mbps || mbps == (uint32_t)SPEED_UNKNOWN)
		return 0;
	return (uint64_t)mbps * 1000000ull;
}

static void sample(struct iod_agent_telemetry *t)
{
	static struct proc_row rows[PROC_MAX];
	struct iod_topo_gpu_reading nv[IOD_TEL_GPUS_MAX];
	uint32_t nv_n = 0, rows_n = 0;
	uint64_t t0 = mono_ns(), now = wall_ms();
	long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	char path[IOD_AGENT_PATH_MAX + 16];
	json_t *st = NULL;

	snprintf(path, sizeof(path), "%s/status.json", t->cfg->data_dir);
	st = json_load_file(path, 0, NULL);
	if (t->nvml && iod_topo_nvml_read(t->nvml, nv, IOD_TEL_GPUS_MAX, &nv_n))
		nv_n = 0;
	rows_n = proc_scan(rows, PROC_MAX);

	pthread_mutex_lock(&t->lock);
	struct iod_tel_node *n = t->node;
	for (uint32_t g = 0; g < n->gpus_n; g++)
		n->gpus[g].replica[0] = n->gpus[g].service[0] = 0;
	size_t i;
	const json_t *r;
	json_array_foreach(json_object_get(st, "replicas"), i, r)
	{
		const char *name = "", *svc = "", *gpus = "";
		uint64_t pid = 0, restarts = 0;
		iod_json_get_str(r, "name", &name);
		iod_json_get_str(r, RK(SERVICE), &svc);
		iod_json_get_str(r, RK(GPUS), &gpus);
		iod_json_get_u64(r, "pid", &pid);
		iod_json_get_u64(r, RK(RESTARTS), &restarts);
		struct iod_tel_replica *tr = iod_tel_replica_get(n, name);
		if (!tr)
			continue;
		iod_strlcpy(tr->service, svc, sizeof(tr->service));
		tr->restarts = (uint32_t)restarts;
		/* processes: CPU over the interval from the tree's ticks */
		if (pid) {
			uint64_t ticks, pages;
			tree_sum(rows, rows_n, (int)pid, &ticks, &pages);
			double secs = hz > 0 ? (double)ticks / (double)hz : 0;
			const struct iod_tel_replica_sample *last = iod_tel_replica_last(tr);
			struct iod_tel_replica_sample s = {.at_ms = now,
			                                   .mem_bytes = pages * (uint64_t)page};
			if (last && now > last->at_ms && secs >= tr->cpu_seconds_total)
				s.cpu_pct = (secs - tr->cpu_seconds_total) /
				            ((double)(now - last->at_ms) / 1e3) * 100.0;
			tr->cpu_seconds_total = secs;
			iod_tel_replica_push(tr, &s);
		} else {
			/* not running (failed, waiting to restart): no processes, no use */
			struct iod_tel_replica_sample s = {.at_ms = now};
			iod_tel_replica_push(tr, &s);
		}
		/* the GPUs it holds */
		struct iod_bitmap gb;
		struct iod_err e = {0};
		iod_bitmap_zero(&gb);
		if (gpus[0] && iod_bitmap_parse(gpus, &gb, &e))
			iod_bitmap_zero(&gb);
		uint32_t held = iod_bitmap_count(&gb);
		struct iod_tel_counters c;
		bool have_c = !t->nvml && held && pid && !read_counters(t, name, (long)pid, &c);
		struct tel_counters_slot *cs = have_c ? slot_of(t, name) : NULL;
		for (uint32_t g = 0; g < n->gpus_n; g++) {
			struct iod_tel_gpu *gp = &n->gpus[g];
			if (gp->index >= IOD_BITMAP_BITS || !iod_bitmap_test(&gb, gp->index))
				continue;
			iod_strlcpy(gp->replica, name, sizeof(gp->replica));
			iod_strlcpy(gp->service, svc, sizeof(gp->service));
			if (cs) {
				struct iod_tel_gpu_sample s;
				const struct iod_tel_gpu_sample *last = iod_tel_gpu_last(gp);
				(void)last;
				iod_tel_sim_gpu(cs->have ? &cs->last : NULL, &c,
				                cs->have ? now - cs->at_ms : 0, held,
				                gp->mem_total_bytes, now, &s);
				iod_tel_gpu_push(gp, &s);
			}
		}
		if (cs) {
			cs->last = c;
			cs->at_ms = now;
			cs->have = true;
		}
	}
	/* simulated GPUs nobody reports for read idle */
	for (uint32_t g = 0; !t->nvml && g < n->gpus_n; g++) {
		struct iod_tel_gpu *gp = &n->gpus[g];
		const struct iod_tel_gpu_sample *last = iod_tel_gpu_last(gp);
		if (last && last->at_ms == now)
			continue;
		struct iod_tel_gpu_sample s;
		iod_tel_sim_gpu(NULL, NULL, 0, 1, gp->mem_total_bytes, now, &s);
		if (last)
			s.nvlink_bytes_total = last->nvlink_bytes_total;
		iod_tel_gpu_push(gp, &s);
	}
	/* NVML GPUs: matched to the node's GPUs by PCI address, else by index */
	for (uint32_t k = 0; k < nv_n; k++) {
		struct iod_tel_gpu *gp = NULL;
		for (uint32_t g = 0; g < n->gpus_n && !gp; g++)
			if (n->gpus[g].pci[0] && !strcasecmp(n->gpus[g].pci, nv[k].pci))
				gp = &n->gpus[g];
		for (uint32_t g = 0; g < n->gpus_n && !gp; g++)
			if (!n->gpus[g].pci[0] && n->gpus[g].index == nv[k].index)
				gp = &n->gpus[g];
		if (!gp)
			continue;
		if (!gp->uuid[0])
			iod_strlcpy(gp->uuid, nv[k].uuid, sizeof(gp->uuid));
		if (!gp->model[0])
			iod_strlcpy(gp->model, nv[k].model, sizeof(gp->model));
		const struct iod_tel_gpu_sample *last = iod_tel_gpu_last(gp);
		struct iod_tel_gpu_sample s = {.at_ms = now,
		                               .util_pct = nv[k].util_pct,
		                               .mem_used_bytes = nv[k].mem_used_bytes,
		                               .mem_total_bytes = nv[k].mem_total_bytes,
		                               .power_w = nv[k].power_w,
		                               .temp_c = nv[k].temp_c,
		                               .nvlink_bytes_total = nv[k].nvlink_bytes_total};
		/* PCIe: NVML gives a rate; integrate it over the interval */
		s.pcie_bytes_total = last ? last->pcie_bytes_total : 0;
		if (last && now > last->at_ms)
			s.pcie_bytes_total += (uint64_t)((double)nv[k].pcie_bytes_per_s *
			                                 (double)(now - last->at_ms) / 1e3);
		iod_tel_gpu_push(gp, &s);
	}
	iod_tel_replicas_sweep(n);
	/* the data plane's ports, as the switch's thread last published them */
	if (t->vsw && t->ports) {
		uint32_t k = iod_agent_vswitch_ports(t->vsw, t->ports, IOD_TEL_PORTS_MAX);
		for (uint32_t q = 0; q < k; q++)
			if (!strcmp(t->ports[q].kind, "fabric"))
				t->ports[q].speed_bps = iface_speed_bps(t->ports[q].iface);
		iod_tel_ports_set(n, t->ports, k);
	}
	n->samples_total++;
	n->sample_ns_total += mono_ns() - t0;
	struct timespec cpu;
	if (!clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu))
		n->cpu_ns_total = (uint64_t)cpu.tv_sec * IOD_NS_PER_S + (uint64_t)cpu.tv_nsec;
	pthread_mutex_unlock(&t->lock);
	json_decref(st);
}

static void push(struct iod_agent_telemetry *t)
{
	uint64_t now = wall_ms();
	/* iod config's telemetry.push_interval, live; the flag when unset */
	uint64_t every = iod_config_live_u64("telemetry.push_interval", t->cfg->telemetry_push_ns);
	if (!t->api_ok || now - t->pushed_ms < every / IOD_NS_PER_MS)
		return;
	t->pushed_ms = now;
	pthread_mutex_lock(&t->lock);
	json_t *sum = iod_tel_summary_json(t->node, now);
	pthread_mutex_unlock(&t->lock);
	char *body = json_dumps(sum, JSON_COMPACT);
	json_decref(sum);
	if (!body)
		return;
	char path[IOD_NAME_MAX + 32];
	snprintf(path, sizeof(path), "/v1/telemetry/%s", t->cfg->name);
	struct iod_api_response r;
	struct iod_err e = {0};
	int rc =
	    iod_api_request(&t->api, "PUT", path, "application/json", body, strlen(body), &r, &e);
	free(body);
	if (!rc && r.status == 200) {
		t->push_warned = false;
	} else if (!t->push_warned) {
		IOD_WARN("telemetry", "node %s: summary not sent: %s", t->cfg->name,
		         rc ? e.msg : iod_api_error_text(&r));
		t->push_warned = true;
	}
	if (!rc)
		iod_api_response_free(&r);
}

/* Read the Revocation objects into t->revoked, at most once a second, while
 * the listener is HTTPS and the control plane is known. */
static void revocations_refresh(struct iod_agent_telemetry *t)
{
	uint64_t now = wall_ms();
	if (!t->tls || !t->api_ok || now - t->revoked_ms < 1000)
		return;
	t->revoked_ms = now;
	struct iod_api_response r;
	struct iod_err e = {0};
	int rc = iod_api_request(&t->api, "GET", "/v1/revocations", NULL, NULL, 0, &r, &e);
	if (rc || r.status != 200 || !json_is_array(json_object_get(r.json, "items"))) {
		if (!t->revoked_warned)
			IOD_WARN("telemetry",
			         "node %s: revocations not read (keeping the last %u): %s",
			         t->cfg->name, t->revoked_n, rc ? e.msg : iod_api_error_text(&r));
		t->revoked_warned = true;
		if (!rc)
			iod_api_response_free(&r);
		return;
	}
	t->revoked_warned = false;
	const json_t *items = json_object_get(r.json, "items"), *it;
	size_t n = json_array_size(items), i;
	const char **names = n ? calloc(n, sizeof(*names)) : NULL;
	if (n && !names) {
		iod_api_response_free(&r);
		return;
	}
	json_array_foreach(items, i, it) names[i] = json_string_value(json_object_get(it, "name"));
	iod_agent_telemetry_set_revoked(t, names, (uint32_t)IOD_MIN(n, (size_t)UINT32_MAX));
	free(names);
	iod_api_response_free(&r);
}

static void serve_rotated(struct iod_agent_telemetry *t);

static void *run(void *arg)
{
	struct iod_agent_telemetry *t = arg;
	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		pthread_mutex_unlock(&t->lock);
		/* iod config's telemetry.interval, live from the next sample */
		uint64_t every =
		    iod_config_live_u64("telemetry.interval", t->cfg->telemetry_interval_ns);
		sample(t);
		push(t);
		revocations_refresh(t);
		serve_rotated(t);
		pthread_mutex_lock(&t->lock);
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		uint64_t ns = (uint64_t)until.tv_nsec + every;
		until.tv_sec += (time_t)(ns / IOD_NS_PER_S);
		until.tv_nsec = (long)(ns % IOD_NS_PER_S);
		while (!t->stop && pthread_cond_timedwait(&t->wake, &t->lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* ---- HTTP ---------------------------------------------------------------------- */

static TEL_MHD_RESULT answer(struct MHD_Connection *c, unsigned code, const char *ctype, char *body)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", ctype);
	TEL_MHD_RESULT rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

/* An error as {"error": why} with code. */
static TEL_MHD_RESULT refuse(struct MHD_Connection *c, unsigned code, const char *why)
{
	json_t *j = json_pack("{s:s}", "error", why);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return s ? answer(c, code, "application/json", s)
	         : answer(c, 500, "text/plain", strdup("out of memory\n"));
}

/*
 * Over TLS: may this connection's client read the node's telemetry? Its
 * certificate must chain to the cluster CA and carry an identity of the
 * cluster, which the authorisation core then judges as a GET of metrics
 * (the API's /metrics rule): a user of any role, a node, a server. 0, or
 * the HTTP status (401, 403) with why.
 */
static unsigned client_check(struct iod_agent_telemetry *t, struct MHD_Connection *c, char *why,
                             size_t len)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	unsigned n = 0;
	const gnutls_datum_t *chain =
	    ci && ci->tls_session
	        ? gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &n)
	        : NULL;
	const struct iod_sec_ca *ca = iod_sec_tls_creds_ca(t->cfg->creds);
	if (!chain || !n) {
		snprintf(why, len,
		         "node %s's telemetry needs a client certificate of the cluster CA "
		         "(a user's, a node's or a server's: the client config's, which `iod "
		         "init` and `iod up` write)",
		         t->cfg->name);
		return 401;
	}
	struct iod_sec_cert_info info;
	struct iod_err e = {0};
	if (iod_sec_ca_verify_der(ca, chain[0].data, chain[0].size, (uint64_t)time(NULL), &info,
	                          &e)) {
		snprintf(why, len, "client certificate: %s", e.msg);
		return 401;
	}
	char key[IOD_NAME_MAX];
	bool is_revoked = false;
	if (!iod_sec_revocation_key(info.id.kind, info.id.tenant, info.id.name, key, sizeof(key))) {
		pthread_mutex_lock(&t->lock);
		for (uint32_t i = 0; i < t->revoked_n && !is_revoked; i++)
			is_revoked = !strcmp(t->revoked[i], key);
		pthread_mutex_unlock(&t->lock);
	}
	if (is_revoked) {
		snprintf(why, len, "%s: its credential is revoked (`iod revoke`)", key);
		return 401;
	}
	struct iod_sec_request rq = {.verb = IOD_SEC_VERB_GET, .res = IOD_SEC_RES_METRICS};
	struct iod_sec_decision d;
	if (iod_sec_authorize(&info.id, &rq, &d)) {
		snprintf(why, len, "%s", d.reason);
		return d.status ? (unsigned)d.status : 403;
	}
	return 0;
}

static TEL_MHD_RESULT handler(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
	struct iod_agent_telemetry *t = cls;
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	if (t->tls) {
		char why[IOD_ERR_MSG_MAX + 64];
		unsigned code = client_check(t, c, why, sizeof(why));
		if (code)
			return refuse(c, code, why);
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return answer(c, 405, "application/json",
		              strdup("{\"error\": \"telemetry is read-only: GET\"}"));
	if (!strcmp(url, "/metrics")) {
		struct iod_buf b;
		iod_buf_init(&b);
		pthread_mutex_lock(&t->lock);
		int rc = iod_tel_prom(t->node, &b);
		pthread_mutex_unlock(&t->lock);
		if (!rc)
			rc = iod_config_node_prom(&b); /* iod config: revisions and drift */
		if (!rc) { /* the virtual switch's rule verdicts, as it last wrote them */
			char path[IOD_AGENT_PATH_MAX + 32];
			struct iod_buf vb;
			iod_buf_init(&vb);
			snprintf(path, sizeof(path), "%s/dp_sg_verdicts.prom", t->cfg->data_dir);
			if (!iod_buf_read_file(&vb, path, 1u << 20, NULL) && vb.data)
				rc = iod_buf_append(&b, vb.data, vb.len);
			iod_buf_free(&vb);
		}
		if (rc || !b.data) {
			iod_buf_free(&b);
			return answer(c, 500, "text/plain", strdup("out of memory\n"));
		}
		return answer(c, 200, IOD_PROM_CONTENT_TYPE, b.data);
	}
	if (!strcmp(url, "/v1/telemetry")) {
		pthread_mutex_lock(&t->lock);
		json_t *d = iod_tel_detail_json(t->node);
		pthread_mutex_unlock(&t->lock);
		char *s = json_dumps(d, JSON_COMPACT);
		json_decref(d);
		return s ? answer(c, 200, "application/json", s)
		         : answer(c, 500, "text/plain", strdup("out of memory\n"));
	}
	if (!strcmp(url, "/v1/dp/dump")) {
		/* the switch outlives this listener (telemetry stops first) */
		pthread_mutex_lock(&t->lock);
		struct iod_agent_vswitch *v = t->vsw;
		pthread_mutex_unlock(&t->lock);
		if (!v)
			return answer(c, 404, "application/json",
			              strdup("{\"error\": \"this node runs no virtual switch (it "
			                     "is not in its own network namespace: `iod up "
			                     "--netns`)\"}"));
		char *s = NULL;
		struct iod_err e = {0};
		if (iod_agent_vswitch_dump(v, &s, &e))
			return refuse(c, 503, e.msg);
		return answer(c, 200, "application/json", s);
	}
	return answer(c, 404, "application/json",
	              strdup("{\"error\": \"GET /metrics, /v1/telemetry or /v1/dp/dump\"}"));
}

/* ---- the listener ---------------------------------------------------------------- */

bool iod_agent_telemetry_tls(const char *addr)
{
	return strncmp(addr, "127.", 4) != 0;
}

int iod_agent_telemetry_url(const char *addr, char *buf, size_t len)
{
	int n =
	    snprintf(buf, len, "%s://%s", iod_agent_telemetry_tls(addr) ? "https" : "http", addr);
	return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

static int listen_addr(const char *addr, struct sockaddr_in *sa, struct iod_err *e)
{
	char host[IOD_ADDR_MAX];
	iod_strlcpy(host, addr, sizeof(host));
	char *colon = strrchr(host, ':');
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (colon) {
		*colon = 0;
		sa->sin_port = htons((uint16_t)atoi(colon + 1));
	}
	if (!colon || inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return iod_err_set(e, -EINVAL, "--telemetry-addr %s: want IPv4:PORT", addr);
	return 0;
}

/* Stop a listener and free what it presented. */
static void unserve(struct iod_agent_telemetry *t, struct MHD_Daemon *d, char *cert, char *key)
{
	(void)t;
	if (d)
		MHD_stop_daemon(d);
	free(cert);
	if (key) /* the node's private key: do not leave it in freed memory */
		memset(key, 0, strlen(key));
	free(key);
}

/*
 * Start the listener on t->sa: HTTPS with the node's certificate as it is
 * now (t->tls), else plain HTTP. Sets t->http (and the PEMs it presents);
 * the previous listener, if any, is the caller's to stop. Every daemon
 * reuses the port (SO_REUSEPORT) so that a rotation can start the next one
 * before the old one closes.
 */
static int serve(struct iod_agent_telemetry *t, struct iod_err *e)
{
	const struct iod_agent_config *c = t->cfg;
	const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	char *cert = NULL, *key = NULL;
	struct MHD_Daemon *d;
	if (!t->tls) {
		d = MHD_start_daemon(flags, 0, NULL, NULL, handler, t, MHD_OPTION_SOCK_ADDR,
		                     (struct sockaddr *)&t->sa, MHD_OPTION_CONNECTION_LIMIT,
		                     (unsigned)IOD_TEL_CONNS_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
		                     (unsigned)IOD_TEL_CONN_TIMEOUT_S,
		                     MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
	} else {
		if (!c->creds || !c->cert_path[0] || !c->key_path[0])
			return iod_err_set(
			    e, -EPERM,
			    "--telemetry-addr %s is not a loopback address, and the node has no "
			    "certificate to serve it over TLS with (no listener beyond loopback "
			    "without authentication and TLS: give --ca/--cert/--key or "
			    "--join-token)",
			    c->telemetry_addr);
		/* the files hold what c->creds was last rotated to (certs.c writes
		 * them first) */
		uint64_t gen = iod_sec_tls_creds_rotations(c->creds);
		int rc = iod_sec_read_file(c->cert_path, false, &cert, e);
		if (!rc)
			rc = iod_sec_read_file(c->key_path, true, &key, e);
		if (rc) {
			unserve(t, NULL, cert, key);
			return rc;
		}
		const char *ca = iod_sec_ca_cert_pem(iod_sec_tls_creds_ca(c->creds));
		/* client certificates are asked for; client_check refuses a
		 * request without one of the cluster's */
		d = MHD_start_daemon(
		    flags | MHD_USE_TLS, 0, NULL, NULL, handler, t, MHD_OPTION_SOCK_ADDR,
		    (struct sockaddr *)&t->sa, MHD_OPTION_CONNECTION_LIMIT,
		    (unsigned)IOD_TEL_CONNS_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
		    (unsigned)IOD_TEL_CONN_TIMEOUT_S, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
		    MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_HTTPS_MEM_CERT, cert,
		    MHD_OPTION_HTTPS_MEM_TRUST, ca, MHD_OPTION_HTTPS_PRIORITIES,
		    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2", MHD_OPTION_END);
		if (d)
			t->tls_gen = gen;
	}
	if (!d) {
		unserve(t, NULL, cert, key);
		return iod_err_set(e, -EADDRINUSE, "cannot serve on %s (port in use?)",
		                   c->telemetry_addr);
	}
	t->http = d;
	t->cert_pem = cert;
	t->key_pem = key;
	return 0;
}

/* Sampler thread: a rotated node certificate (certs.c) starts a listener
 * that presents it, then stops the old one; a failure keeps the old one
 * and is retried next sample. */
static void serve_rotated(struct iod_agent_telemetry *t)
{
	if (!t->http || !t->tls || iod_sec_tls_creds_rotations(t->cfg->creds) == t->tls_gen)
		return;
	struct MHD_Daemon *old = t->http;
	char *cert = t->cert_pem, *key = t->key_pem;
	struct iod_err e = {0};
	if (serve(t, &e)) {
		if (!t->rotate_warned)
			IOD_WARN("telemetry", "node %s: rotated certificate not served yet: %s",
			         t->cfg->name, e.msg);
		t->rotate_warned = true;
		return;
	}
	t->rotate_warned = false;
	unserve(t, old, cert, key);
	IOD_INFO("telemetry", "node %s: listener on %s presents the rotated certificate",
	         t->cfg->name, t->cfg->telemetry_addr);
}

/* ---- start/stop ------------------------------------------------------------------ */

static void gpus_from_topology(struct iod_tel_node *n, const json_t *topo, uint32_t gpus)
{
	size_t i;
	const json_t *d;
	json_array_foreach(json_object_get(topo, "devices"), i, d)
	{
		const char *kind = "", *s = "";
		uint64_t idx = 0, mem = 0;
		if (iod_json_get_str(d, "kind", &kind) || strcmp(kind, "gpu") ||
		    iod_json_get_u64(d, "gpu_index", &idx) || n->gpus_n >= IOD_TEL_GPUS_MAX)
			continue;
		struct iod_tel_gpu *g = &n->gpus[n->gpus_n++];
		g->index = (uint32_t)idx;
		if (!iod_json_get_str(d, "uuid", &s))
			iod_strlcpy(g->uuid, s, sizeof(g->uuid));
		if (!iod_json_get_str(d, "pci", &s))
			iod_strlcpy(g->pci, s, sizeof(g->pci));
		if (!iod_json_get_str(d, "model", &s))
			iod_strlcpy(g->model, s, sizeof(g->model));
		if (!iod_json_get_u64(d, "mem_bytes", &mem))
			g->mem_total_bytes = mem;
	}
	/* a node registered with only a GPU count */
	for (uint32_t k = n->gpus_n; !n->gpus_n && k < gpus && k < IOD_TEL_GPUS_MAX; k++)
		n->gpus[k].index = k;
	if (!n->gpus_n)
		n->gpus_n = gpus < IOD_TEL_GPUS_MAX ? gpus : IOD_TEL_GPUS_MAX;
}

int iod_agent_telemetry_start(struct iod_agent_telemetry **out, const struct iod_agent_config *c,
                              struct iod_err *e)
{
	*out = NULL;
	if (!c->telemetry_interval_ns)
		return 0;
	struct iod_agent_telemetry *t = calloc(1, sizeof(*t));
	if (!t || !(t->node = calloc(1, sizeof(*t->node)))) {
		free(t);
		return iod_err_set(e, -ENOMEM, "out of memory for telemetry");
	}
	t->cfg = c;
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->wake, &ca);
	pthread_condattr_destroy(&ca);
	iod_strlcpy(t->node->node, c->name, sizeof(t->node->node));
	if (gethostname(t->node->hostname, sizeof(t->node->hostname)))
		iod_strlcpy(t->node->hostname, c->name, sizeof(t->node->hostname));
	t->node->hostname[sizeof(t->node->hostname) - 1] = 0;
	gpus_from_topology(t->node, c->topology, c->gpus);
	/* NVML only for a node whose hardware was discovered: a modelled node's
	 * GPUs are not this machine's */
	const char *source = "";
	iod_json_get_str(c->topology, "source", &source);
	if (strcmp(source, "model") && c->topology)
		t->nvml = iod_topo_nvml_open();
	for (uint32_t g = 0; g < t->node->gpus_n; g++) {
		struct iod_tel_gpu *gp = &t->node->gpus[g];
		gp->simulated = !t->nvml;
		/* a simulated GPU still needs a stable UUID: dashboards key on it */
		if (!gp->uuid[0] && gp->simulated)
			snprintf(gp->uuid, sizeof(gp->uuid), "GPU-sim-%.60s-%u", c->name,
			         gp->index);
	}
	if (c->servers[0]) {
		struct iod_err ae = {0};
		if (!iod_api_client_init(&t->api, c->servers, &ae)) {
			/* HTTPS with the node's certificate, as its other clients */
			iod_api_client_set_creds(&t->api, c->creds, NULL);
			t->api.timeout_ms = 1000;
			t->api.retry_ms = 1000;
			t->api_ok = true;
		}
	}
	if (c->telemetry_addr[0]) {
		struct iod_err le = {0};
		if (listen_addr(c->telemetry_addr, &t->sa, &le) ||
		    (t->tls = iod_agent_telemetry_tls(c->telemetry_addr), serve(t, &le)))
			IOD_WARN("telemetry", "not serving: %s; sampling goes on", le.msg);
	}
	if (pthread_create(&t->thread, NULL, run, t)) {
		unserve(t, t->http, t->cert_pem, t->key_pem);
		iod_topo_nvml_close(t->nvml);
		if (t->api_ok)
			iod_api_client_close(&t->api);
		free(t->node);
		free(t);
		return iod_err_set(e, -EAGAIN, "cannot start the telemetry thread");
	}
	IOD_INFO("telemetry", "node %s: %u GPUs (%s), every %llu ms%s%s", c->name, t->node->gpus_n,
	         t->nvml ? "NVML" : "simulated from replica counters",
	         (unsigned long long)(c->telemetry_interval_ns / IOD_NS_PER_MS),
	         t->http ? (t->tls ? ", serving HTTPS (client certificates of the cluster CA) on "
	                           : ", serving HTTP (loopback) on ")
	                 : "",
	         t->http ? c->telemetry_addr : "");
	*out = t;
	return 0;
}

void iod_agent_telemetry_stop(struct iod_agent_telemetry *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	unserve(t, t->http, t->cert_pem, t->key_pem);
	iod_topo_nvml_close(t->nvml);
	if (t->api_ok)
		iod_api_client_close(&t->api);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->wake);
	free(t->ports);
	free(t->revoked);
	free(t->node);
	free(t);
}

void iod_agent_telemetry_set_vswitch(struct iod_agent_telemetry *t, struct iod_agent_vswitch *v)
{
	if (!t)
		return;
	struct iod_tel_port *ports = v ? calloc(IOD_TEL_PORTS_MAX, sizeof(*ports)) : NULL;
	pthread_mutex_lock(&t->lock);
	free(t->ports);
	t->ports = ports;
	t->vsw = ports ? v : NULL;
	pthread_mutex_unlock(&t->lock);
}

void iod_agent_telemetry_set_revoked(struct iod_agent_telemetry *t, const char *const *names,
                                     uint32_t n)
{
	if (!t)
		return;
	char(*v)[IOD_NAME_MAX] = n ? calloc(n, sizeof(*v)) : NULL;
	uint32_t k = 0;
	for (uint32_t i = 0; v && i < n; i++)
		if (names[i] && *names[i])
			snprintf(v[k++], IOD_NAME_MAX, "%s", names[i]);
	pthread_mutex_lock(&t->lock);
	free(t->revoked);
	t->revoked = v;
	t->revoked_n = v ? k : 0;
	pthread_mutex_unlock(&t->lock);
}
