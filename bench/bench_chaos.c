/*
 * bench_chaos.c: `make bench-chaos`: the long chaos matrix of issue 20
 * (docs/chaos.md). Against a fresh `iod up --servers N` cluster on loopback
 * (N = IOD_BENCH_CHAOS_SERVERS, default 5 as in jepsen.dqlite; 1, 3, 5, 7),
 * every cell workload (register, set, bank, append) x nemesis runs
 * `iod chaos run -o json` for
 * IOD_BENCH_CHAOS_SECONDS (default 120) and prints
 *
 *   BENCH chaos.cell workload=... nemesis=... ops=... acked=... lost=...
 *         anomalies=... recovery_p50_ms=... recovery_p99_ms=...
 *         outage_p50_ms=... outage_p99_ms=...
 *
 * ops is operations per second; lost and anomalies must be 0. Then, when
 * Debian's etcd is installed, the same kill and partition cells against a
 * N-member etcd cluster on loopback, with writers through the same HTTP
 * client (src/http/client.c, etcd's /v3/kv/put JSON gateway) at the same
 * rate, faults through the same records and nft tables (src/chaos), and
 *
 *   BENCH chaos.vs_etcd nemesis=... recovery_p99_ratio=... outage_p99_ratio=...
 *
 * (iod / etcd: below 1, iod recovers faster). etcd runs its defaults
 * (heartbeat 100 ms, election 1000 ms); iod runs `iod up`'s.
 *
 * IOD_BENCH_CHAOS_CELLS="register:kill set:pause" narrows the matrix.
 * Not in `make test`: the matrix takes about 22 x the duration.
 */
#include "bench.h"
#include "iod/chaos.h"
#include "iod/http.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define API_PORT 31400
#define RAFT_PORT 31300
#define ETCD_CLIENT 31500
#define ETCD_PEER 31600
#define CLIENTS 4
#define RATE 100
#define FAULT_MS 3000

static char iod[512], tmp[256], etcd_bin[256];
static int nsrv = 5; /* control-plane servers (and etcd members): IOD_BENCH_CHAOS_SERVERS */

static bool want(const char *wl, const char *nem)
{
	const char *f = getenv("IOD_BENCH_CHAOS_CELLS");
	char cell[64];
	if (!f || !f[0])
		return true;
	snprintf(cell, sizeof(cell), "%s:%s", wl, nem);
	return strstr(f, cell) != NULL;
}

/* ---- iod ----------------------------------------------------------------- */

static int iod_cell(const char *wl, const char *nem, unsigned secs, uint64_t *rec_p99,
                    uint64_t *out_p99)
{
	char cmd[1400];
	snprintf(cmd, sizeof(cmd),
	         "IOD_STATE_DIR=%s/cluster '%s' chaos run --workload %s --clients %d --rate %d "
	         "--duration %us --nemesis %s --fault-duration %dms --seed 1 -o json 2>>%s/run.err",
	         tmp, iod, wl, CLIENTS, RATE, secs, nem, FAULT_MS, tmp);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	json_error_t je;
	json_t *j = json_loadf(p, 0, &je);
	pclose(p);
	if (!j) {
		fprintf(stderr, "bench_chaos: %s/%s: no report (see %s/run.err)\n", wl, nem, tmp);
		return -1;
	}
	json_t *ops = json_object_get(j, "ops");
	uint64_t attempted = (uint64_t)json_integer_value(json_object_get(ops, "attempted"));
	uint64_t acked = (uint64_t)json_integer_value(json_object_get(ops, "acknowledged_writes"));
	*rec_p99 = (uint64_t)json_integer_value(json_object_get(j, "recovery_p99_ms"));
	*out_p99 = (uint64_t)json_integer_value(json_object_get(j, "outage_p99_ms"));
	bench_line("BENCH chaos.cell workload=%s nemesis=%s ops=%.1f acked=%llu lost=%lld "
	           "anomalies=%lld recovery_p50_ms=%lld recovery_p99_ms=%llu outage_p50_ms=%lld "
	           "outage_p99_ms=%llu faults=%zu valid=%s servers=%d",
	           wl, nem, (double)attempted / secs, (unsigned long long)acked,
	           (long long)json_integer_value(json_object_get(j, "lost")),
	           (long long)json_integer_value(json_object_get(j, "anomalies")),
	           (long long)json_integer_value(json_object_get(j, "recovery_p50_ms")),
	           (unsigned long long)*rec_p99,
	           (long long)json_integer_value(json_object_get(j, "outage_p50_ms")),
	           (unsigned long long)*out_p99, json_array_size(json_object_get(j, "faults")),
	           json_is_true(json_object_get(j, "valid")) ? "yes" : "no", nsrv);
	bool ok = json_is_true(json_object_get(j, "valid")) &&
	          json_array_size(json_object_get(j, "faults")) > 0;
	json_decref(j);
	return ok ? 0 : -1; /* a cell without a fault measured nothing */
}

/* ---- etcd ---------------------------------------------------------------- */

struct etcd {
	struct iod_chaos_cluster c; /* members as chaos sees them; chaos_dir for records */
	char argv[IOD_UP_SERVERS_MAX][IOD_CHAOS_CMDLINE_MAX];
	uint32_t argv_len[IOD_UP_SERVERS_MAX];
	pid_t pid[IOD_UP_SERVERS_MAX];
};

struct writers {
	pthread_mutex_t mu;
	uint64_t *acks; /* completion times of acknowledged writes */
	uint32_t n, cap;
	atomic_bool stop;
	uint32_t attempted;
};

static pid_t etcd_start(struct etcd *ed, int i)
{
	char *av[40];
	uint32_t n = 0;
	char buf[IOD_CHAOS_CMDLINE_MAX];
	memcpy(buf, ed->argv[i], ed->argv_len[i]);
	for (uint32_t o = 0; o < ed->argv_len[i]; o += (uint32_t)strlen(buf + o) + 1)
		av[n++] = buf + o;
	av[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		setsid();
		char log[300];
		snprintf(log, sizeof(log), "%s/etcd-%d.log", tmp, i + 1);
		if (!freopen(log, "a", stdout) || !freopen(log, "a", stderr))
			_exit(126);
		execvp(av[0], av);
		_exit(127);
	}
	return pid;
}

static void etcd_args(struct etcd *ed, int i)
{
	char a[16][256];
	int k = 0;
	snprintf(a[k++], 256, "%s", etcd_bin);
	snprintf(a[k++], 256, "--name=e%d", i + 1);
	snprintf(a[k++], 256, "--data-dir=%s/etcd-%d", tmp, i + 1);
	snprintf(a[k++], 256, "--listen-client-urls=http://127.0.0.1:%d", ETCD_CLIENT + i);
	snprintf(a[k++], 256, "--advertise-client-urls=http://127.0.0.1:%d", ETCD_CLIENT + i);
	snprintf(a[k++], 256, "--listen-peer-urls=http://127.0.0.1:%d", ETCD_PEER + i);
	snprintf(a[k++], 256, "--initial-advertise-peer-urls=http://127.0.0.1:%d", ETCD_PEER + i);
	int w = snprintf(a[k], 256, "--initial-cluster=");
	for (int j = 0; j < nsrv; j++) /* at most 7 x 30 bytes */
		w += snprintf(a[k] + w, (size_t)(256 - w), "%se%d=http://127.0.0.1:%d",
		              j ? "," : "", j + 1, ETCD_PEER + j);
	k++;
	snprintf(a[k++], 256, "--initial-cluster-state=new");
	ed->argv_len[i] = 0;
	for (int j = 0; j < k; j++) {
		size_t l = strlen(a[j]) + 1;
		memcpy(ed->argv[i] + ed->argv_len[i], a[j], l);
		ed->argv_len[i] += (uint32_t)l;
	}
}

/* Refresh member i (pid, identity, ports, how to restart it). */
static void etcd_member(struct etcd *ed, int i)
{
	struct iod_chaos_member *m = &ed->c.servers[i];
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "etcd-%d", i + 1);
	m->kind = IOD_CHAOS_SERVER;
	m->pid = ed->pid[i];
	m->start_ticks = iod_chaos_start_ticks(ed->pid[i]);
	m->ports[0] = (uint16_t)(ETCD_PEER + i);
	m->ports[1] = (uint16_t)(ETCD_CLIENT + i);
	m->nports = 2;
	memcpy(m->argv, ed->argv[i], ed->argv_len[i]);
	m->argv_len = ed->argv_len[i];
	snprintf(m->log, sizeof(m->log), "%s/etcd-%d.log", tmp, i + 1);
	snprintf(m->pidfile, sizeof(m->pidfile), "%s/etcd-%d.pid", tmp, i + 1);
}

/* The leader's index from /v3/maintenance/status, or -1. */
static int etcd_leader(void)
{
	for (int i = 0; i < nsrv; i++) {
		struct iod_http_conn c;
		struct iod_http_response r = {0};
		struct iod_err e = {0};
		char addr[32];
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", ETCD_CLIENT + i);
		iod_http_conn_init(&c);
		int rc = iod_http_request(&c, addr, "POST", "/v3/maintenance/status", NULL,
		                          "application/json", "{}", 2, 500, &r, &e);
		iod_http_conn_close(&c);
		if (rc || r.status != 200 || !r.body) {
			iod_http_response_free(&r);
			continue;
		}
		json_t *j = json_loadb(r.body, r.len, 0, NULL);
		iod_http_response_free(&r);
		const char *me =
		    json_string_value(json_object_get(json_object_get(j, "header"), "member_id"));
		const char *ld = json_string_value(json_object_get(j, "leader"));
		int out = me && ld && !strcmp(me, ld) ? i : -1;
		json_decref(j);
		if (out >= 0)
			return out;
	}
	return -1;
}

static void *etcd_writer(void *arg)
{
	struct writers *w = arg;
	struct iod_http_conn c;
	uint32_t cur = (uint32_t)((uintptr_t)&c % (uintptr_t)nsrv), seq = 0;
	uint64_t gap = IOD_NS_PER_S * CLIENTS / RATE;
	iod_http_conn_init(&c);
	while (!atomic_load(&w->stop)) {
		uint64_t t0 = bench_now_ns();
		char addr[32], body[128];
		struct iod_http_response r = {0};
		struct iod_err e = {0};
		/* key "chaos-register" and value seq, base64 ("Y2hhb3MtcmVnaXN0ZXI=") */
		snprintf(body, sizeof(body), "{\"key\":\"Y2hhb3MtcmVnaXN0ZXI=\",\"value\":\"%s\"}",
		         (seq++ & 1) ? "MQ==" : "MA==");
		snprintf(addr, sizeof(addr), "127.0.0.1:%u", ETCD_CLIENT + cur);
		int rc = iod_http_request(&c, addr, "POST", "/v3/kv/put", NULL, "application/json",
		                          body, strlen(body), 1000, &r, &e);
		__atomic_add_fetch(&w->attempted, 1, __ATOMIC_RELAXED);
		if (!rc && r.status == 200) {
			pthread_mutex_lock(&w->mu);
			if (w->n == w->cap) {
				uint32_t cap = w->cap ? w->cap * 2 : 4096;
				uint64_t *v = realloc(w->acks, cap * sizeof(*v));
				if (v) {
					w->acks = v;
					w->cap = cap;
				}
			}
			if (w->n < w->cap)
				w->acks[w->n++] = bench_now_ns();
			pthread_mutex_unlock(&w->mu);
		} else {
			iod_http_conn_close(&c);
			cur = (cur + 1) %
			      (uint32_t)nsrv; /* as the iod client does: the next member */
		}
		iod_http_response_free(&r);
		uint64_t spent = bench_now_ns() - t0;
		if (spent < gap)
			usleep((useconds_t)((gap - spent) / 1000));
	}
	iod_http_conn_close(&c);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	return bench_cmp_u64(a, b);
}

static int etcd_cell(struct etcd *ed, const char *nem, unsigned secs, uint64_t *rec_p99,
                     uint64_t *out_p99)
{
	struct writers w = {0};
	pthread_t th[CLIENTS];
	uint64_t start[64] = {0}, heal[64] = {0};
	uint32_t nf = 0;
	struct iod_rng rng;
	iod_rng_seed(&rng, 1);
	pthread_mutex_init(&w.mu, NULL);
	for (int i = 0; i < CLIENTS; i++)
		pthread_create(&th[i], NULL, etcd_writer, &w);
	uint64_t t0 = bench_now_ns(), end = t0 + (uint64_t)secs * IOD_NS_PER_S;
	uint64_t t = t0 + 2 * IOD_NS_PER_S;
	while (t + (FAULT_MS + 1000) * IOD_NS_PER_MS <= end && nf < 64) {
		while (bench_now_ns() < t)
			usleep(10000);
		struct iod_chaos_fault *f = calloc(1, sizeof(*f));
		struct iod_err e = {0};
		int leader = etcd_leader();
		for (int i = 0; i < nsrv; i++)
			etcd_member(ed, i);
		iod_chaos_fault_id(f->id, sizeof(f->id), iod_rng_next(&rng));
		f->start_ms = iod_chaos_now_ms();
		f->deadline_ms = f->start_ms + FAULT_MS;
		int rc;
		if (!strcmp(nem, "kill")) {
			uint32_t k = leader >= 0 && iod_rng_below(&rng, 2)
			                 ? (uint32_t)leader
			                 : (uint32_t)iod_rng_below(&rng, (uint64_t)nsrv);
			f->action = IOD_CHAOS_ACT_KILL;
			f->signal = 9;
			f->restart = true;
			f->n = 1;
			f->m[0] = ed->c.servers[k];
			rc = iod_chaos_fault_apply(&ed->c, f, &e);
		} else {
			static const enum iod_chaos_shape shapes[] = {IOD_CHAOS_SHAPE_ONE,
			                                              IOD_CHAOS_SHAPE_MAJORITY,
			                                              IOD_CHAOS_SHAPE_PRIMARIES};
			f->action = IOD_CHAOS_ACT_PARTITION;
			f->shape = shapes[iod_rng_below(&rng, 3)];
			if (f->shape == IOD_CHAOS_SHAPE_PRIMARIES && leader < 0)
				f->shape = IOD_CHAOS_SHAPE_ONE;
			f->n = (uint32_t)nsrv;
			memcpy(f->m, ed->c.servers, (size_t)nsrv * sizeof(f->m[0]));
			rc = iod_chaos_shape_grudge(f->shape, (uint32_t)nsrv,
			                            leader < 0 ? IOD_CHAOS_NONE : (uint32_t)leader,
			                            iod_rng_next(&rng), IOD_CHAOS_DIR_BOTH, &f->g,
			                            &e);
			if (!rc)
				rc = iod_chaos_fault_apply(&ed->c, f, &e);
		}
		uint64_t ts = bench_now_ns();
		if (rc) {
			fprintf(stderr, "bench_chaos: etcd %s fault: %s\n", nem, e.msg);
			free(f);
			t += FAULT_MS * IOD_NS_PER_MS;
			continue;
		}
		while (bench_now_ns() < ts + FAULT_MS * IOD_NS_PER_MS)
			usleep(5000);
		uint64_t th_ = bench_now_ns();
		int hl = iod_chaos_heal_lock(ed->c.chaos_dir);
		char rp[IOD_PATH_MAX + 64];
		snprintf(rp, sizeof(rp), "%s/%s.json", ed->c.chaos_dir, f->id);
		if (!access(rp, F_OK))
			iod_chaos_fault_heal(ed->c.chaos_dir, f, &e);
		if (hl >= 0)
			close(hl);
		if (f->action == IOD_CHAOS_ACT_KILL) {
			/* restarted from its record: the new pid is in its pid file */
			int i = f->m[0].name[strlen(f->m[0].name) - 1] - '1';
			FILE *pf = fopen(f->m[0].pidfile, "r");
			int pid = 0;
			if (pf && fscanf(pf, "%d", &pid) == 1 && pid > 0)
				ed->pid[i] = pid;
			if (pf)
				fclose(pf);
		}
		start[nf] = ts;
		heal[nf] = th_;
		nf++;
		free(f);
		t = th_ + FAULT_MS * IOD_NS_PER_MS;
	}
	while (bench_now_ns() < end)
		usleep(10000);
	atomic_store(&w.stop, true);
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(th[i], NULL);
	qsort(w.acks, w.n, sizeof(*w.acks), cmp_u64);
	uint64_t rec[64], out[64];
	uint32_t nr = 0;
	for (uint32_t k = 0; k < nf; k++) {
		uint64_t first = UINT64_MAX, last = start[k], worst = 0;
		for (uint32_t i = 0; i < w.n; i++)
			if (w.acks[i] >= heal[k]) {
				first = w.acks[i];
				break;
			}
		for (uint32_t i = 0; i < w.n && first != UINT64_MAX; i++) {
			if (w.acks[i] < start[k])
				continue;
			if (w.acks[i] > first)
				break;
			if (w.acks[i] - last > worst)
				worst = w.acks[i] - last;
			last = w.acks[i];
		}
		if (first == UINT64_MAX)
			continue;
		rec[nr] = (first - heal[k]) / IOD_NS_PER_MS;
		out[nr] = worst / IOD_NS_PER_MS;
		nr++;
	}
	uint64_t r50 = iod_chaos_percentile(rec, nr, 50), r99 = iod_chaos_percentile(rec, nr, 99);
	uint64_t o50 = iod_chaos_percentile(out, nr, 50), o99 = iod_chaos_percentile(out, nr, 99);
	bench_line("BENCH chaos.etcd_cell workload=register nemesis=%s ops=%.1f acked=%u "
	           "recovery_p50_ms=%llu recovery_p99_ms=%llu outage_p50_ms=%llu "
	           "outage_p99_ms=%llu faults=%u recovered=%u",
	           nem, (double)w.attempted / secs, w.n, (unsigned long long)r50,
	           (unsigned long long)r99, (unsigned long long)o50, (unsigned long long)o99, nf,
	           nr);
	*rec_p99 = r99;
	*out_p99 = o99;
	free(w.acks);
	pthread_mutex_destroy(&w.mu);
	return nr == nf && nf ? 0 : -1;
}

static int etcd_up(struct etcd *ed)
{
	memset(ed, 0, sizeof(*ed));
	snprintf(ed->c.dir, sizeof(ed->c.dir), "%s", tmp);
	snprintf(ed->c.chaos_dir, sizeof(ed->c.chaos_dir), "%s/etcd-chaos", tmp);
	ed->c.nservers = (uint32_t)nsrv;
	for (int i = 0; i < nsrv; i++) {
		etcd_args(ed, i);
		ed->pid[i] = etcd_start(ed, i);
	}
	for (int k = 0; k < 200; k++) {
		if (etcd_leader() >= 0)
			return 0;
		usleep(50000);
	}
	return -1;
}

/* Stop the members this bench started (by pid, never by name). */
static void etcd_down(struct etcd *ed)
{
	for (int i = 0; i < nsrv; i++)
		if (ed->pid[i] > 0)
			kill(ed->pid[i], SIGKILL);
	for (int i = 0; i < nsrv; i++)
		if (ed->pid[i] > 0)
			waitpid(ed->pid[i], NULL, WNOHANG);
}

int main(int argc, char **argv)
{
	/* the chaos keeper is started as /proc/self/exe: this program */
	if (argc == 5 && !strcmp(argv[1], "chaos") && !strcmp(argv[2], "keeper"))
		return iod_chaos_keeper_run(argv[4], 5000);
	const char *s = getenv("IOD_BENCH_CHAOS_SECONDS");
	unsigned secs = s && atoi(s) >= 12 ? (unsigned)atoi(s) : 120;
	const char *ns = getenv("IOD_BENCH_CHAOS_SERVERS");
	if (ns && (atoi(ns) < 1 || atoi(ns) > IOD_UP_SERVERS_MAX || atoi(ns) % 2 == 0)) {
		fprintf(stderr, "bench_chaos: IOD_BENCH_CHAOS_SERVERS must be 1, 3, 5 or 7\n");
		return 2;
	}
	if (ns)
		nsrv = atoi(ns);
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	*slash = 0;
	snprintf(iod, sizeof(iod), "%s/../iod", self);
	if (access(iod, X_OK)) {
		fprintf(stderr, "bench_chaos: %s not built (make build/iod)\n", iod);
		return 1;
	}
	if (getuid() != 0) {
		printf("bench_chaos: skipped: needs root (nftables, cgroups)\n");
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "/tmp/iod-bench-chaos-%d", (int)getpid());
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
	         "mkdir -p %s && IOD_STATE_DIR=%s/cluster '%s' up --servers %d --nodes 1 "
	         "--gpus-per-node 0 --api-port %d --raft-port %d --no-mesh --telemetry-port 0 "
	         "--no-sandbox >%s/up.log 2>&1",
	         tmp, tmp, iod, nsrv, API_PORT, RAFT_PORT, tmp);
	if (system(cmd) != 0) {
		fprintf(stderr, "bench_chaos: iod up failed (see %s/up.log)\n", tmp);
		return 1;
	}
	static const char *const wls[] = {"register", "set", "bank", "append"};
	static const char *const nems[] = {"partition", "kill", "pause", "partition+kill",
	                                   "partition+member"};
	uint64_t iod_rec[2] = {0}, iod_out[2] = {0};
	int failed = 0;
	for (int w = 0; w < 4; w++)
		for (int k = 0; k < 5; k++) {
			uint64_t r99 = 0, o99 = 0;
			if (!want(wls[w], nems[k]))
				continue;
			if (iod_cell(wls[w], nems[k], secs, &r99, &o99))
				failed = 1;
			if (w == 0 && k < 2) {
				iod_rec[k] = r99;
				iod_out[k] = o99;
			}
		}
	snprintf(cmd, sizeof(cmd), "IOD_STATE_DIR=%s/cluster '%s' down --grace 2s >/dev/null 2>&1",
	         tmp, iod);
	if (system(cmd) != 0)
		failed = 1;
	FILE *eb = popen("command -v etcd 2>/dev/null", "r");
	if (eb) {
		if (!fgets(etcd_bin, sizeof(etcd_bin), eb))
			etcd_bin[0] = 0;
		etcd_bin[strcspn(etcd_bin, "\n")] = 0;
		pclose(eb);
	}
	if (etcd_bin[0] && (want("register", "partition") || want("register", "kill"))) {
		struct etcd *ed = calloc(1, sizeof(*ed));
		if (ed && !etcd_up(ed)) {
			for (int k = 0; k < 2; k++) {
				uint64_t r99 = 0, o99 = 0;
				if (!want("register", nems[k]))
					continue;
				if (etcd_cell(ed, nems[k], secs, &r99, &o99))
					failed = 1;
				bench_line("BENCH chaos.vs_etcd nemesis=%s recovery_p99_ratio=%.3f "
				           "outage_p99_ratio=%.3f iod_recovery_p99_ms=%llu "
				           "etcd_recovery_p99_ms=%llu iod_outage_p99_ms=%llu "
				           "etcd_outage_p99_ms=%llu",
				           nems[k], r99 ? (double)iod_rec[k] / (double)r99 : 0.0,
				           o99 ? (double)iod_out[k] / (double)o99 : 0.0,
				           (unsigned long long)iod_rec[k], (unsigned long long)r99,
				           (unsigned long long)iod_out[k], (unsigned long long)o99);
			}
		} else {
			fprintf(stderr,
			        "bench_chaos: etcd did not elect a leader (see %s/etcd-*.log)\n",
			        tmp);
			failed = 1;
		}
		if (ed)
			etcd_down(ed);
		free(ed);
	} else if (!etcd_bin[0]) {
		printf("bench_chaos: etcd not installed (Debian etcd-server): no chaos.vs_etcd\n");
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		failed = 1;
	return failed;
}
