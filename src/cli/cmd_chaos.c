/*
 * cmd_chaos.c: `iod chaos`: break a running `iod up` cluster on purpose and
 * check what clients saw (docs/chaos.md).
 *
 *   iod chaos partition|kill|pause|loss ...   one fault, healed at its deadline
 *   iod chaos list | heal [ID|--all]          what is active; heal now
 *   iod chaos run --workload register|set     clients + nemesis + checker
 *   iod chaos check FILE --workload ...       check a recorded history
 *
 * Thin shell: input is parsed by src/chaos/fault.c (pure), faults applied
 * and healed by src/chaos/nemesis.c (records + the keeper), workloads run
 * by src/chaos/run.c, histories checked by src/chaos/check.c. Bad input is
 * refused (exit 2) before anything is applied.
 */
#include "cli.h"
#include "iod/agent.h"
#include "iod/chaos.h"

#include <getopt.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void iod_up_state_dir(char *buf, size_t len);

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: iod chaos partition [--shape S | --between A,B [--and C]] [--direction D]\n"
	    "                 --duration D [--seed N]\n"
	    "       iod chaos network_partition --duration D          (partition --shape one)\n"
	    "       iod chaos kill TARGET [--signal SIG] [--restart-after D]\n"
	    "       iod chaos pause TARGET --duration D\n"
	    "       iod chaos loss TARGET --percent P --duration D\n"
	    "       iod chaos partition|loss link/leafL-spineS [--percent P] [--direction D]\n"
	    "                 --duration D  (an underlay link of `iod up --netns`)\n"
	    "       iod chaos delay TARGET --latency L --duration D  (what it sends, via a relay)\n"
	    "       iod chaos delay service/NAME --latency L [--percent P] --duration D\n"
	    "       iod chaos abort service/NAME [--status S] [--percent P] --duration D\n"
	    "                 (an HTTP service's requests, in every node's mesh proxy)\n"
	    "       iod chaos member remove server-N|leader --duration D   (re-added then)\n"
	    "       iod chaos member add server-N          (re-add a removed server now)\n"
	    "       iod chaos list | heal [ID | --all]\n"
	    "       iod chaos run --workload register|set|bank|append [--clients N] [--rate R]\n"
	    "                 --duration D [--keep]\n"
	    "                 [--nemesis partition|kill|pause|member|partition+member|...|none]\n"
	    "                 [--fault-duration D] [--seed N] [--history FILE]\n"
	    "       iod chaos run --plan FILE [--seed N]      (faults from a YAML plan)\n"
	    "       iod chaos check FILE --workload register|set|bank|append\n"
	    "common: [--state-dir DIR] [--detach] [-o text|json]\n\n"
	    "Inject a fault into the local cluster of `iod up` and heal it at its deadline.\n"
	    "Every fault is a record in STATE_DIR/chaos/ owned by a detached keeper process\n"
	    "that heals it on time even if this command, the target or the leader dies.\n"
	    "Network faults are nftables tables named inet iod_chaos_<id>.\n\n"
	    "  TARGET           server-N, node-N, replica/NAME, leader, or a comma list;\n"
	    "                   service/NAME: kill, pause: all its running replicas;\n"
	    "                   delay, abort: its HTTP requests, in the mesh\n"
	    "  --shape S        one | majority | majorities-ring (>= 4 servers) |\n"
	    "                   minority-third | primaries (the leader alone)\n"
	    "  --between A,B    one side of an explicit partition (servers or nodes);\n"
	    "  --and C          the other side (default: every other server)\n"
	    "  --direction D    both (default) | to (A hears nothing) | from (A is not heard);\n"
	    "                   of a link: to = toward the spine, from = from the spine\n"
	    "  --duration D     how long the fault lasts (10ms..24h)\n"
	    "  --detach         return once applied (the keeper heals it); by default wait,\n"
	    "                   and heal at once on Ctrl-C\n"
	    "  --signal SIG     kill's signal (default KILL)\n"
	    "  --restart-after D  kill: start the process again after D, same command line\n"
	    "  --percent P      loss: drop P%% of what the target sends (1..100);\n"
	    "                   service/NAME: the share of requests hit (default 100)\n"
	    "  --status S       abort: the HTTP status answered (200..599, default 503)\n\n"
	    "run: N clients write and read through the API (a register: one config object;\n"
	    "a set: one config object per element; bank: 5 accounts of 100, transfers in\n"
	    "one compare-and-set txn; append: 4 lists, appended to with compare-and-set),\n"
	    "the nemesis injects a fault every 2 x --fault-duration (default 3s), the\n"
	    "history is checked (linearizability for a register; no lost or phantom\n"
	    "element for a set; every read totals 500 for bank; no lost, reordered,\n"
	    "duplicate or stale append) and a report printed: operations ok/failed/\n"
	    "indeterminate, anomalies, recovery per fault (heal -> first acknowledged\n"
	    "write, and outage: the longest time without one). The run's objects are\n"
	    "deleted after it unless --keep.\n"
	    "A plan (docs/chaos.md, examples/chaos/plan.yaml) lists faults in Chaos Mesh's\n"
	    "fields (action, mode: one|all|fixed|fixed-percent|random-max-percent, value,\n"
	    "selector, direction, duration, percent, latency, status), run in sequence or\n"
	    "drawn at random from the seed (schedule: sequence|random). Selector services\n"
	    "or service/NAME,...: delay and abort of their HTTP requests in the mesh;\n"
	    "link/leafL-spineS,...: partition and loss of underlay links (iod up --netns).\n"
	    "Exit: 0 valid; 1 anomalies found or a runtime error; 2 bad input;\n"
	    "      4 unknown: the checker's search bound was hit, or no operation was\n"
	    "        acknowledged (nothing was checked).\n");
}

static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

struct opts {
	char dir[IOD_PATH_MAX];
	enum iod_output out;
	bool detach, all;
	bool have_duration, have_seed, have_shape, have_dir;
	uint64_t duration_ms, restart_ms, seed, fault_ms;
	enum iod_chaos_shape shape;
	enum iod_chaos_direction dir_;
	const char *between, *and_, *target, *history, *id, *plan;
	int signal;
	uint32_t percent, clients, rate, nemesis;
	enum iod_chaos_workload workload;
	bool have_workload, have_percent, have_rate, keep;
	uint64_t latency_ms;
	uint64_t max_states;
	uint32_t status; /* abort service/NAME */
};

enum {
	O_SHAPE = 256,
	O_BETWEEN,
	O_AND,
	O_DIRECTION,
	O_DURATION,
	O_SEED,
	O_DETACH,
	O_SIGNAL,
	O_RESTART,
	O_PERCENT,
	O_STATE_DIR,
	O_ALL,
	O_WORKLOAD,
	O_CLIENTS,
	O_RATE,
	O_NEMESIS,
	O_FAULT,
	O_HISTORY,
	O_TARGET,
	O_CHAOS_DIR,
	O_MAX_STATES,
	O_PLAN,
	O_KEEP,
	O_LATENCY,
	O_STATUS,
};

static int bad(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "iod chaos: ");
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, "\n");
	return IOD_EXIT_INVALID;
}

static int parse_opts(int argc, char **argv, struct opts *o, const char *sub)
{
	static const struct option lo[] = {{"shape", required_argument, 0, O_SHAPE},
	                                   {"between", required_argument, 0, O_BETWEEN},
	                                   {"and", required_argument, 0, O_AND},
	                                   {"direction", required_argument, 0, O_DIRECTION},
	                                   {"duration", required_argument, 0, O_DURATION},
	                                   {"seed", required_argument, 0, O_SEED},
	                                   {"detach", no_argument, 0, O_DETACH},
	                                   {"signal", required_argument, 0, O_SIGNAL},
	                                   {"restart-after", required_argument, 0, O_RESTART},
	                                   {"percent", required_argument, 0, O_PERCENT},
	                                   {"state-dir", required_argument, 0, O_STATE_DIR},
	                                   {"all", no_argument, 0, O_ALL},
	                                   {"workload", required_argument, 0, O_WORKLOAD},
	                                   {"clients", required_argument, 0, O_CLIENTS},
	                                   {"rate", required_argument, 0, O_RATE},
	                                   {"nemesis", required_argument, 0, O_NEMESIS},
	                                   {"fault-duration", required_argument, 0, O_FAULT},
	                                   {"history", required_argument, 0, O_HISTORY},
	                                   {"target", required_argument, 0, O_TARGET},
	                                   {"max-states", required_argument, 0, O_MAX_STATES},
	                                   {"plan", required_argument, 0, O_PLAN},
	                                   {"keep", no_argument, 0, O_KEEP},
	                                   {"latency", required_argument, 0, O_LATENCY},
	                                   {"status", required_argument, 0, O_STATUS},
	                                   {"output", required_argument, 0, 'o'},
	                                   {"help", no_argument, 0, 'h'},
	                                   {0, 0, 0, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	struct iod_err e = {0};
	int c;
	char *end;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		e.msg[0] = 0;
		switch (c) {
		case O_SHAPE:
			if (iod_chaos_shape_parse(optarg, &o->shape, &e))
				return bad("%s%s", e.msg, "");
			o->have_shape = true;
			break;
		case O_BETWEEN: o->between = optarg; break;
		case O_AND: o->and_ = optarg; break;
		case O_DIRECTION:
			if (iod_chaos_direction_parse(optarg, &o->dir_, &e))
				return bad("%s%s", e.msg, "");
			break;
		case O_DURATION:
			if (iod_chaos_duration_parse(optarg, &o->duration_ms, &e))
				return bad("--duration: %s%s", e.msg, "");
			o->have_duration = true;
			break;
		case O_FAULT:
			if (iod_chaos_duration_parse(optarg, &o->fault_ms, &e))
				return bad("--fault-duration: %s%s", e.msg, "");
			break;
		case O_RESTART:
			if (iod_chaos_duration_parse(optarg, &o->restart_ms, &e))
				return bad("--restart-after: %s%s", e.msg, "");
			break;
		case O_SEED:
			o->seed = strtoull(optarg, &end, 0);
			if (!optarg[0] || *end || optarg[0] == '-')
				return bad("--seed %s: want a non-negative integer%s", optarg, "");
			o->have_seed = true;
			break;
		case O_DETACH: o->detach = true; break;
		case O_ALL: o->all = true; break;
		case O_SIGNAL:
			if (iod_chaos_signal_parse(optarg, &o->signal, &e))
				return bad("%s%s", e.msg, "");
			break;
		case O_PERCENT:
			if (iod_chaos_percent_parse(optarg, &o->percent, &e))
				return bad("%s%s", e.msg, "");
			o->have_percent = true;
			break;
		case O_STATE_DIR:
			snprintf(o->dir, sizeof(o->dir), "%s", optarg);
			o->have_dir = true;
			break;
		case O_WORKLOAD:
			if (iod_chaos_workload_parse(optarg, &o->workload, &e))
				return bad("%s%s", e.msg, "");
			o->have_workload = true;
			break;
		case O_CLIENTS: {
			long v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > IOD_CHAOS_CLIENTS_MAX)
				return bad("--clients %s: want 1..64%s", optarg, "");
			o->clients = (uint32_t)v;
			break;
		}
		case O_RATE: {
			long v = strtol(optarg, &end, 10);
			if (*end || v < 0 || v > 100000)
				return bad("--rate %s: want 0..100000 ops/s (0: unpaced)%s", optarg,
				           "");
			o->rate = (uint32_t)v;
			o->have_rate = true; /* 0 is a value: unpaced */
			break;
		}
		case O_NEMESIS:
			if (iod_chaos_nemesis_parse(optarg, &o->nemesis, &e))
				return bad("%s%s", e.msg, "");
			break;
		case O_HISTORY: o->history = optarg; break;
		case O_TARGET: o->target = optarg; break;
		case O_PLAN: o->plan = optarg; break;
		case O_KEEP: o->keep = true; break;
		case O_LATENCY:
			if (iod_chaos_duration_parse(optarg, &o->latency_ms, &e))
				return bad("--latency: %s%s", e.msg, "");
			if (o->latency_ms > IOD_CHAOS_LATENCY_MAX_MS)
				return bad("--latency %s: at most 60s%s", optarg, "");
			break;
		case O_STATUS: {
			long v = strtol(optarg, &end, 10);
			if (!optarg[0] || *end || v < 200 || v > 599)
				return bad("--status %s: want an HTTP status 200..599%s", optarg,
				           "");
			o->status = (uint32_t)v;
			break;
		}
		case O_MAX_STATES:
			o->max_states = strtoull(optarg, &end, 10);
			if (*end || !o->max_states)
				return bad("--max-states %s: want a positive integer%s", optarg,
				           "");
			break;
		case 'o':
			if (iod_cli_output("chaos", optarg, outs, &o->out))
				return IOD_EXIT_INVALID;
			break;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	(void)sub;
	return 0;
}

/* Resolve one target name into a running member; exit code on failure. */
static int resolve(struct iod_chaos_cluster *c, const struct iod_chaos_target *t,
                   struct iod_chaos_member *m)
{
	struct iod_err e = {0};
	if (t->kind == IOD_CHAOS_REPLICA) {
		if (iod_chaos_replica_find(c, t->name, m, &e))
			return bad("%s%s", e.msg, "");
		return 0;
	}
	const struct iod_chaos_member *g = t->kind == IOD_CHAOS_SERVER ? c->servers : c->nodes;
	uint32_t n = t->kind == IOD_CHAOS_SERVER ? c->nservers : c->nnodes;
	char count[32];
	snprintf(count, sizeof(count), "%u", n);
	if (t->index < 1 || t->index > n) {
		fprintf(stderr, "iod chaos: no %s in %s (it has %s %s%s): unreachable target\n",
		        t->name, c->dir, count, t->kind == IOD_CHAOS_SERVER ? "server" : "node",
		        n == 1 ? "" : "s");
		return IOD_EXIT_INVALID;
	}
	*m = g[t->index - 1];
	if (m->pid <= 0 || !iod_chaos_member_alive(m))
		return bad("%s is not running (see %s): unreachable target", t->name, m->pidfile);
	return 0;
}

/* TARGET list -> members; "leader" is the current leader. */
/* "service/NAME" in a target list becomes its running replicas
 * ("replica/A,replica/B"); a service with none is an error (printed). */
static int expand_services(struct iod_chaos_cluster *c, char *buf, size_t len)
{
	char out[1024] = "", tok[1024];
	char names[IOD_CHAOS_MEMBERS_MAX][IOD_NAME_MAX];
	size_t o = 0;
	for (const char *p = buf; *p;) {
		size_t l = strcspn(p, ",");
		snprintf(tok, sizeof(tok), "%.*s", (int)l, p);
		p += l + (p[l] == ',');
		if (strncmp(tok, "service/", 8)) {
			o += (size_t)snprintf(out + o, sizeof(out) - IOD_MIN(o, sizeof(out)),
			                      "%s%s", o ? "," : "", tok);
			continue;
		}
		uint32_t n = iod_chaos_service_replicas(c, tok + 8, names, IOD_CHAOS_MEMBERS_MAX);
		if (!n) {
			fprintf(stderr,
			        "iod chaos: %s has no running replica on this cluster's nodes "
			        "(`iod get replicas`): unreachable target\n",
			        tok);
			return -1;
		}
		for (uint32_t i = 0; i < n; i++)
			o += (size_t)snprintf(out + o, sizeof(out) - IOD_MIN(o, sizeof(out)),
			                      "%sreplica/%s", o ? "," : "", names[i]);
	}
	if (o >= sizeof(out) || o >= len) {
		fprintf(stderr, "iod chaos: the target list is too long\n");
		return -1;
	}
	snprintf(buf, len, "%s", out);
	return 0;
}

static int resolve_list(struct iod_chaos_cluster *c, const char *list, struct iod_chaos_member *m,
                        uint32_t *n)
{
	struct iod_chaos_target t[IOD_CHAOS_MEMBERS_MAX];
	struct iod_err e = {0};
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", list);
	/* "leader" in the list becomes server-N */
	char *p = strstr(buf, "leader");
	if (p && (p == buf || p[-1] == ',') && (p[6] == 0 || p[6] == ',')) {
		uint32_t l = iod_chaos_leader(c);
		if (l == IOD_CHAOS_NONE)
			return bad("target leader: the cluster has no leader now%s%s", "", "");
		char rest[1024], name[32];
		snprintf(rest, sizeof(rest), "%s", p + 6);
		snprintf(name, sizeof(name), "server-%u", l + 1);
		*p = 0;
		char out[1100];
		snprintf(out, sizeof(out), "%s%s%s", buf, name, rest);
		snprintf(buf, sizeof(buf), "%s", out);
	}
	if (expand_services(c, buf, sizeof(buf)))
		return IOD_EXIT_INVALID;
	int k = iod_chaos_target_list_parse(buf, t, IOD_CHAOS_MEMBERS_MAX, &e);
	if (k < 0)
		return bad("%s%s", e.msg, "");
	for (int i = 0; i < k; i++) {
		int rc = resolve(c, &t[i], &m[i]);
		if (rc)
			return rc;
	}
	*n = (uint32_t)k;
	return 0;
}

static void fmt_clock(uint64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	size_t l = strftime(buf, len, "%H:%M:%S", &tm);
	snprintf(buf + l, len - l, ".%03u UTC", (unsigned)(ms % 1000));
}

static bool record_exists(const struct iod_chaos_cluster *c, const char *id)
{
	char path[IOD_PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s.json", c->chaos_dir, id);
	return access(path, F_OK) == 0;
}

static int heal_one(const struct iod_chaos_cluster *c, const struct iod_chaos_fault *f,
                    struct iod_err *e)
{
	int hl = iod_chaos_heal_lock(c->chaos_dir);
	int rc = record_exists(c, f->id) ? iod_chaos_fault_heal(c->chaos_dir, f, e) : 0;
	if (hl >= 0)
		close(hl);
	return rc;
}

/* Apply f, then (unless --detach) wait for its heal. */
static int apply_and_wait(struct iod_chaos_cluster *c, struct iod_chaos_fault *f,
                          const struct opts *o)
{
	struct iod_err e = {0};
	char until[48];
	if (iod_chaos_fault_apply(c, f, &e))
		return iod_cli_fail("chaos",
		                    e.code == -ESRCH || e.code == -EXDEV ? IOD_EXIT_INVALID
		                                                         : IOD_EXIT_ERROR,
		                    "%s: %s", iod_chaos_action_name(f->action), e.msg);
	fmt_clock(f->deadline_ms, until, sizeof(until));
	if (o->out == IOD_OUT_TEXT) {
		printf("%s  %s\n  heals at %s (%llu ms)%s\n", f->id, f->desc, until,
		       (unsigned long long)(f->deadline_ms - f->start_ms),
		       o->detach ? "; `iod chaos list`, `iod chaos heal ID`" : "");
		fflush(stdout);
	}
	uint64_t healed_ms = 0;
	bool early = false;
	if (!o->detach) {
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		while (record_exists(c, f->id)) {
			if (interrupted) {
				heal_one(c, f, &e);
				early = true;
				break;
			}
			usleep(10000);
		}
		healed_ms = iod_chaos_now_ms();
		if (o->out == IOD_OUT_TEXT) {
			char at[48];
			fmt_clock(healed_ms, at, sizeof(at));
			long long late = (long long)healed_ms - (long long)f->deadline_ms;
			printf("%s  healed at %s (%s%lld ms %s the deadline)\n", f->id, at,
			       late >= 0 ? "+" : "", late,
			       early ? "before, interrupted:" : "after");
		}
	}
	if (o->out == IOD_OUT_JSON) {
		json_t *j = iod_chaos_fault_to_json(f);
		json_object_del(j, "members");
		json_t *names = json_array();
		for (uint32_t i = 0; i < f->n; i++)
			json_array_append_new(names, json_string(f->m[i].name));
		json_object_set_new(j, "targets", names);
		json_object_set_new(j, "healed_ms",
		                    healed_ms ? json_integer((json_int_t)healed_ms) : json_null());
		iod_json_print(stdout, j, false);
		json_decref(j);
	}
	return IOD_EXIT_OK;
}

static int load_cluster(struct opts *o, struct iod_chaos_cluster *c)
{
	struct iod_err e = {0};
	if (!o->have_dir)
		iod_up_state_dir(o->dir, sizeof(o->dir));
	setenv("IOD_STATE_DIR", o->dir, 1); /* its client config, for the API */
	if (iod_chaos_cluster_load(o->dir, c, &e))
		return iod_cli_fail("chaos", IOD_EXIT_INVALID, "%s", e.msg);
	return 0;
}

/* delay: the targets (side A, no replicas) and every other running server
 * (side B, whose ports their traffic goes to). */
static int delay_members(struct iod_chaos_cluster *c, const char *target, struct iod_chaos_fault *f)
{
	bool a[IOD_CHAOS_MEMBERS_MAX] = {0}, b[IOD_CHAOS_MEMBERS_MAX] = {0};
	struct iod_err e = {0};
	int rc = resolve_list(c, target, f->m, &f->n);
	for (uint32_t i = 0; !rc && i < f->n; i++) {
		a[i] = true;
		if (f->m[i].kind == IOD_CHAOS_REPLICA)
			return bad("delay: %s is a replica: delay servers or nodes%s", f->m[i].name,
			           "");
	}
	for (uint32_t i = 0; !rc && i < c->nservers; i++) {
		bool in = false;
		for (uint32_t k = 0; k < f->n; k++)
			in |= !strcmp(f->m[k].name, c->servers[i].name);
		if (!in && c->servers[i].pid > 0 && f->n < IOD_CHAOS_MEMBERS_MAX) {
			b[f->n] = true;
			f->m[f->n++] = c->servers[i];
		}
	}
	if (!rc && iod_chaos_groups_grudge(f->n, a, b, IOD_CHAOS_DIR_FROM, &f->g, &e))
		rc = bad("delay: %s%s", e.msg, "");
	return rc;
}

/* member add TARGET: re-add a server that is not a Raft member now (heals
 * a member record of it if there is one). */
static int member_add(struct iod_chaos_cluster *c, struct iod_chaos_fault *f, const struct opts *o)
{
	struct iod_chaos_fault *v = NULL;
	uint32_t n = 0;
	struct iod_err e = {0};
	int rc = 0;
	bool known = !iod_chaos_member_lookup(c, &f->m[0], f, &e);
	if (known && iod_chaos_member_voter(f))
		return bad("%s is a Raft voter already: nothing to add%s", f->m[0].name, "");
	iod_chaos_records_load(c->chaos_dir, &v, &n, &e);
	bool healed = false;
	for (uint32_t i = 0; i < n && !rc; i++)
		if (v[i].action == IOD_CHAOS_ACT_MEMBER && !strcmp(v[i].m[0].name, f->m[0].name)) {
			rc = heal_one(c, &v[i], &e);
			healed = !rc;
		}
	free(v);
	if (!rc && !healed) {
		/* no record: server-N is Raft id N, its addresses from its command line */
		const struct iod_chaos_member *m = &f->m[0];
		if (!known) {
			f->member_id = strtoull(m->name + strlen("server-"), NULL, 10);
			snprintf(f->member_raft, sizeof(f->member_raft), "%s", m->addrs[0]);
			snprintf(f->member_api, sizeof(f->member_api), "%s",
			         m->nports > 1 ? m->addrs[1] : "");
			snprintf(f->apis, sizeof(f->apis), "%s", c->apis);
		}
		/* a spare left by an interrupted add takes two rounds */
		for (int k = 0; k < 50 && (rc = iod_chaos_member_readd(f, &e)); k++)
			usleep(100000);
	}
	if (rc)
		return iod_cli_fail("chaos", IOD_EXIT_ERROR, "member add %s: %s", f->m[0].name,
		                    e.msg);
	if (o->out == IOD_OUT_JSON)
		printf("{\"member\": \"%s\", \"added\": true}\n", f->m[0].name);
	else
		printf("%s is a Raft member again\n", f->m[0].name);
	return IOD_EXIT_OK;
}

/* iod chaos member add|remove TARGET [--duration D]: one server (or the
 * leader), removed from Raft for D and re-added at the deadline. */
static int do_member(int argc, char **argv, struct opts *o)
{
	struct iod_chaos_cluster *c = calloc(1, sizeof(*c));
	struct iod_chaos_fault *f = calloc(1, sizeof(*f));
	struct iod_err e = {0};
	const char *verb = optind < argc ? argv[optind++] : NULL;
	const char *target = optind < argc ? argv[optind++] : o->target;
	int rc = 0;
	bool add = verb && !strcmp(verb, "add");
	if (!c || !f)
		rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "out of memory");
	else if (!verb || (!add && strcmp(verb, "remove")))
		rc = bad("member needs add or remove (got %s): iod chaos member remove server-N "
		         "--duration D",
		         verb ? verb : "nothing", "");
	else if (!target)
		rc = bad("member %s needs a TARGET: server-N or leader%s", verb, "");
	else if (optind < argc)
		rc = bad("unexpected argument %s%s", argv[optind], "");
	else if (!add && !o->have_duration)
		rc = bad("member remove needs --duration D (10ms..24h): it is re-added then%s%s",
		         "", "");
	else if (add && o->have_duration)
		rc = bad("member add takes no --duration: it re-adds a removed server now%s%s", "",
		         "");
	else if (strchr(target, ',') || (strncmp(target, "server-", 7) && strcmp(target, "leader")))
		rc = bad("member %s: %s is not one control-plane server (server-N or leader)", verb,
		         target);
	if (rc || (rc = load_cluster(o, c)) || (rc = resolve_list(c, target, f->m, &f->n)))
		goto out;
	if (add) {
		rc = member_add(c, f, o);
		goto out;
	}
	if (iod_chaos_member_lookup(c, &f->m[0], f, &e)) {
		rc = e.code == -ENOENT ? bad("%s: unreachable target%s", e.msg, "")
		                       : iod_cli_fail("chaos", IOD_EXIT_ERROR, "%s", e.msg);
		goto out;
	}
	if (iod_chaos_member_count(c->apis) < 2) {
		rc = bad("member remove %s: it is the last member%s", f->m[0].name, "");
		goto out;
	}
	if (!o->have_seed)
		o->seed = iod_time_unix_ns();
	iod_chaos_fault_id(f->id, sizeof(f->id), o->seed);
	f->action = IOD_CHAOS_ACT_MEMBER;
	f->start_ms = iod_chaos_now_ms();
	f->deadline_ms = f->start_ms + o->duration_ms;
	rc = apply_and_wait(c, f, o);
out:
	free(c);
	free(f);
	return rc;
}

/* delay|abort service/NAME: an L7 fault in the mesh (cmd_chaos_mesh.c). */
static int do_mesh_fault(bool abort, const char *target, struct opts *o)
{
	struct iod_chaos_cluster *c;
	int rc;
	if (!o->have_duration)
		return bad("%s needs --duration D (10ms..24h)%s", abort ? "abort" : "delay", "");
	if (!abort && !o->latency_ms)
		return bad("delay needs --latency L (10ms..60s)%s%s", "", "");
	if (abort && o->latency_ms)
		return bad("abort takes --status, not --latency (delay holds requests)%s%s", "",
		           "");
	if (!(c = calloc(1, sizeof(*c))))
		return iod_cli_fail("chaos", IOD_EXIT_ERROR, "out of memory");
	if (!(rc = load_cluster(o, c))) {
		struct iod_chaos_mesh_req rq = {
		    .apis = c->apis,
		    .service = target + 8,
		    .abort = abort,
		    .percent = o->have_percent ? o->percent : 100,
		    .delay_ms = o->latency_ms,
		    .status = o->status ? o->status : 503,
		    .duration_ms = o->duration_ms,
		    .detach = o->detach,
		    .out = o->out,
		    .stop = &interrupted,
		};
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		rc = iod_chaos_mesh_apply(&rq);
	}
	free(c);
	return rc;
}

static bool is_service_target(const char *t)
{
	return t && !strncmp(t, "service/", 8);
}

static int do_abort(int argc, char **argv, struct opts *o)
{
	const char *target = o->target;
	if (optind < argc && !target)
		target = argv[optind++];
	if (optind < argc)
		return bad("unexpected argument %s%s", argv[optind], "");
	if (!is_service_target(target))
		return bad("abort needs a service/NAME target (an HTTP service of the mesh)%s%s",
		           "", "");
	return do_mesh_fault(true, target, o);
}

/*
 * partition|loss link/leafL-spineS: the link's table in its leaf's
 * namespace. Input first (exit 2, nothing applied), then the cluster's
 * underlay: its namespaces are named from the state dir's hash, so the
 * leaves and spines are counted from /run/netns.
 */
static int do_link(enum iod_chaos_action act, const char *target, struct opts *o,
                   struct iod_chaos_cluster *c, struct iod_chaos_fault *f)
{
	struct iod_err e = {0};
	uint32_t leaf = 0, spine = 0;
	if (act == IOD_CHAOS_ACT_DELAY)
		return bad(
		    "delay of %s: this kernel cannot hold a link's packets (no tc netem, no "
		    "nft queue; tbf and htb only limit the rate) and a relay would delay only "
		    "the TCP it terminates; a link can be cut (partition) or lossy (loss), "
		    "and delay works on servers (a relay) and services (the mesh)%s",
		    target, "");
	if (act != IOD_CHAOS_ACT_PARTITION && act != IOD_CHAOS_ACT_LOSS)
		return bad("%s of %s: a link can be cut (partition) or lossy (loss)",
		           iod_chaos_action_name(act), target);
	if (iod_chaos_link_parse(target, &leaf, &spine, &e))
		return bad("%s%s", e.msg, "");
	if (o->have_shape || o->between || o->and_)
		return bad("%s: a link is one cable: no --shape, --between or --and (--direction "
		           "to|from cuts it one way)%s",
		           target, "");
	int rc = load_cluster(o, c);
	if (rc)
		return rc;
	if (iod_chaos_link_resolve(c, leaf, spine, f, &e))
		return bad("%s: %s", target, e.msg);
	if (!o->have_seed)
		o->seed = iod_time_unix_ns();
	iod_chaos_fault_id(f->id, sizeof(f->id), o->seed);
	f->action = act;
	f->shape = IOD_CHAOS_SHAPE_EXPLICIT;
	f->dir = o->dir_; /* to: toward the spine, from: from it */
	f->percent = o->percent;
	f->start_ms = iod_chaos_now_ms();
	f->deadline_ms = f->start_ms + o->duration_ms;
	return apply_and_wait(c, f, o);
}

static int do_fault(enum iod_chaos_action act, int argc, char **argv, struct opts *o, bool alias)
{
	struct iod_chaos_cluster *c = calloc(1, sizeof(*c));
	struct iod_chaos_fault *f = calloc(1, sizeof(*f));
	struct iod_err e = {0};
	int rc = 0;
	if (!c || !f) {
		rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "out of memory");
		goto out;
	}
	const char *target = o->target;
	if (optind < argc && !target)
		target = argv[optind++];
	if (optind < argc) {
		rc = bad("unexpected argument %s%s", argv[optind], "");
		goto out;
	}
	if (is_service_target(target) && act != IOD_CHAOS_ACT_KILL && act != IOD_CHAOS_ACT_PAUSE) {
		/* kill and pause of a service hit its replicas (resolve_list) */
		rc = act == IOD_CHAOS_ACT_DELAY
		         ? do_mesh_fault(false, target, o)
		         : bad("%s of a service/NAME: the mesh injects delay and abort, and kill "
		               "and pause hit its replicas; %s its nodes instead",
		               iod_chaos_action_name(act), iod_chaos_action_name(act));
		goto out;
	}
	/* input first: nothing is looked up or applied for a bad request */
	if (act == IOD_CHAOS_ACT_KILL) {
		if (o->have_duration && !o->restart_ms)
			o->restart_ms = o->duration_ms; /* kill --duration D: back after D */
	} else if (!o->have_duration) {
		rc = bad("%s needs --duration D (10ms..24h)%s", iod_chaos_action_name(act), "");
		goto out;
	}
	if (act == IOD_CHAOS_ACT_DELAY && !o->latency_ms) {
		rc = bad("delay needs --latency L (10ms..60s)%s%s", "", "");
		goto out;
	}
	if (act == IOD_CHAOS_ACT_LOSS && !o->have_percent) {
		rc = bad("loss needs --percent P (1..100)%s%s", "", "");
		goto out;
	}
	if (target && !strncmp(target, "link/", 5)) {
		rc = do_link(act, target, o, c, f);
		goto out;
	}
	if (act != IOD_CHAOS_ACT_PARTITION && !target) {
		rc = bad("%s needs a TARGET (server-N, node-N, replica/NAME, leader)%s",
		         iod_chaos_action_name(act), "");
		goto out;
	}
	if (act == IOD_CHAOS_ACT_PARTITION && target) {
		rc = bad("partition takes --shape or --between/--and, not a TARGET (%s)%s", target,
		         "");
		goto out;
	}
	if (act == IOD_CHAOS_ACT_PARTITION && o->have_shape && o->between) {
		rc = bad("--shape and --between are exclusive%s%s", "", "");
		goto out;
	}
	if (act == IOD_CHAOS_ACT_PARTITION && o->and_ && !o->between) {
		rc = bad("--and needs --between%s%s", "", "");
		goto out;
	}
	if (act == IOD_CHAOS_ACT_PARTITION && !o->have_shape && !o->between) {
		o->shape = IOD_CHAOS_SHAPE_ONE; /* the seed spelling: one server alone */
		o->have_shape = true;
	}
	(void)alias;
	if ((rc = load_cluster(o, c)))
		goto out;
	if (!o->have_seed)
		o->seed = iod_time_unix_ns();
	iod_chaos_fault_id(f->id, sizeof(f->id), o->seed);
	f->action = act;
	f->dir = o->dir_;
	f->percent = o->percent;
	f->signal = o->signal ? o->signal : 9;
	f->start_ms = iod_chaos_now_ms();
	if (act == IOD_CHAOS_ACT_PARTITION) {
		if (o->have_shape) {
			for (uint32_t i = 0; i < c->nservers; i++)
				if (!c->servers[i].pid) {
					rc = bad("%s is not running: a shape is drawn over running "
					         "servers (name them with --between)%s",
					         c->servers[i].name, "");
					goto out;
				}
			f->shape = o->shape;
			f->n = c->nservers;
			memcpy(f->m, c->servers, c->nservers * sizeof(f->m[0]));
			uint32_t leader = o->shape == IOD_CHAOS_SHAPE_PRIMARIES
			                      ? iod_chaos_leader(c)
			                      : IOD_CHAOS_NONE;
			if (iod_chaos_shape_grudge(o->shape, f->n, leader, o->seed, o->dir_, &f->g,
			                           &e)) {
				rc = bad("%s%s", e.msg, "");
				goto out;
			}
		} else {
			uint32_t na = 0, nb = 0;
			struct iod_chaos_member *ma = calloc(IOD_CHAOS_MEMBERS_MAX, sizeof(*ma));
			struct iod_chaos_member *mb = calloc(IOD_CHAOS_MEMBERS_MAX, sizeof(*mb));
			bool a[IOD_CHAOS_MEMBERS_MAX] = {0}, b[IOD_CHAOS_MEMBERS_MAX] = {0};
			if (!ma || !mb)
				rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "out of memory");
			if (!rc)
				rc = resolve_list(c, o->between, ma, &na);
			if (!rc && o->and_)
				rc = resolve_list(c, o->and_, mb, &nb);
			for (uint32_t i = 0; !rc && !o->and_ && i < c->nservers; i++) {
				bool in_a = false;
				for (uint32_t k = 0; k < na; k++)
					in_a |= !strcmp(ma[k].name, c->servers[i].name);
				if (!in_a && c->servers[i].pid)
					mb[nb++] = c->servers[i];
			}
			for (uint32_t i = 0; !rc && i < na; i++)
				for (uint32_t k = 0; k < nb; k++)
					if (!strcmp(ma[i].name, mb[k].name))
						rc = bad("%s is on both sides of the partition%s",
						         ma[i].name, "");
			if (!rc && na + nb > IOD_CHAOS_MEMBERS_MAX)
				rc = bad("a partition of more than 16 processes%s%s", "", "");
			if (!rc) {
				f->shape = IOD_CHAOS_SHAPE_EXPLICIT;
				for (uint32_t i = 0; i < na; i++) {
					a[f->n] = true;
					f->m[f->n++] = ma[i];
				}
				for (uint32_t i = 0; i < nb; i++) {
					b[f->n] = true;
					f->m[f->n++] = mb[i];
				}
				if (iod_chaos_groups_grudge(f->n, a, b, o->dir_, &f->g, &e))
					rc = bad("%s%s", e.msg, "");
			}
			free(ma);
			free(mb);
			if (rc)
				goto out;
		}
		f->deadline_ms = f->start_ms + o->duration_ms;
	} else if (act == IOD_CHAOS_ACT_DELAY) {
		if ((rc = delay_members(c, target, f)))
			goto out;
		f->latency_ms = (uint32_t)o->latency_ms;
		f->deadline_ms = f->start_ms + o->duration_ms;
	} else {
		if ((rc = resolve_list(c, target, f->m, &f->n)))
			goto out;
		if (act == IOD_CHAOS_ACT_KILL) {
			f->restart = o->restart_ms > 0;
			if (f->restart)
				for (uint32_t i = 0; i < f->n; i++)
					if (f->m[i].kind == IOD_CHAOS_REPLICA) {
						rc = bad(
						    "kill --restart-after: a replica is restarted "
						    "by its agent, not by chaos (%s)%s",
						    f->m[i].name, "");
						goto out;
					}
			f->deadline_ms = f->start_ms + o->restart_ms;
		} else {
			f->deadline_ms = f->start_ms + o->duration_ms;
		}
	}
	rc = apply_and_wait(c, f, o);
out:
	free(c);
	free(f);
	return rc;
}

static int do_list(struct opts *o)
{
	struct iod_chaos_cluster *c = calloc(1, sizeof(*c));
	struct iod_chaos_fault *v = NULL;
	json_t *mesh = NULL;
	uint32_t n = 0;
	struct iod_err e = {0};
	int rc = 0;
	if (!c)
		return iod_cli_fail("chaos", IOD_EXIT_ERROR, "out of memory");
	if ((rc = load_cluster(o, c)))
		goto out;
	if (iod_chaos_records_load(c->chaos_dir, &v, &n, &e)) {
		rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "%s", e.msg);
		goto out;
	}
	/* a record past its deadline with no keeper: start one (it heals at once) */
	uint64_t now = iod_chaos_now_ms();
	bool keeper = iod_chaos_keeper_running(c->chaos_dir);
	if (n && !keeper && !iod_chaos_keeper_ensure(c->chaos_dir, &e))
		keeper = true;
	/* L7 faults live in the control plane (cmd_chaos_mesh.c) */
	struct iod_err me = {0};
	mesh = iod_chaos_mesh_list(c->apis, &me);
	if (o->out == IOD_OUT_JSON) {
		json_t *items = mesh ? mesh : json_array();
		mesh = NULL;
		for (uint32_t i = 0; i < n; i++) {
			json_t *j = json_pack(
			    "{s:s, s:s, s:s, s:I, s:I, s:I}", "id", v[i].id, "action",
			    iod_chaos_action_name(v[i].action), "desc", v[i].desc, "start_ms",
			    (json_int_t)v[i].start_ms, "deadline_ms", (json_int_t)v[i].deadline_ms,
			    "left_ms",
			    (json_int_t)(v[i].deadline_ms > now ? v[i].deadline_ms - now : 0));
			json_array_append_new(items, j);
		}
		json_t *j =
		    json_pack("{s:o, s:b, s:i}", "faults", items, "keeper", keeper, "keeper_pid",
		              keeper ? iod_chaos_keeper_pid(c->chaos_dir) : 0);
		iod_json_print(stdout, j, false);
		json_decref(j);
		goto out;
	}
	if (!n && !json_array_size(mesh)) {
		printf("no active faults in %s%s\n", c->chaos_dir,
		       mesh ? " or in the mesh" : " (the mesh's: cluster unreachable)");
		goto out;
	}
	printf("%-14s %-10s %-28s %s\n", "ID", "ACTION", "ENDS", "WHAT");
	const json_t *mf;
	size_t mi;
	json_array_foreach(mesh, mi, mf)
	{
		char until[48], left[48];
		uint64_t dl = (uint64_t)json_integer_value(json_object_get(mf, "deadline_ms"));
		fmt_clock(dl, until, sizeof(until));
		snprintf(left, sizeof(left), "%s (%llds)", until,
		         (long long)((dl > now ? dl - now : 0) / 1000));
		printf("%-14s %-10s %-28s %s\n", json_string_value(json_object_get(mf, "id")),
		       json_string_value(json_object_get(mf, "action")), left,
		       json_string_value(json_object_get(mf, "desc")));
	}
	for (uint32_t i = 0; i < n; i++) {
		char until[48], left[48];
		fmt_clock(v[i].deadline_ms, until, sizeof(until));
		snprintf(left, sizeof(left), "%s (%llds)", until,
		         (long long)((v[i].deadline_ms > now ? v[i].deadline_ms - now : 0) / 1000));
		printf("%-14s %-10s %-28s %s\n", v[i].id, iod_chaos_action_name(v[i].action), left,
		       v[i].desc);
	}
	printf("keeper: %s\n", keeper ? "running" : "NOT running");
out:
	json_decref(mesh);
	free(v);
	free(c);
	return rc;
}

/* nft tables named iod_chaos_* (healed by --all even without a record). */
static uint32_t orphan_tables(char names[][64], uint32_t max)
{
	FILE *p = popen("nft list tables 2>/dev/null", "r");
	char line[256];
	uint32_t n = 0;
	if (!p)
		return 0;
	while (fgets(line, sizeof(line), p) && n < max) {
		char fam[32], name[64];
		if (sscanf(line, "table %31s %63s", fam, name) == 2 && !strcmp(fam, "inet") &&
		    !strncmp(name, "iod_chaos_", 10))
			snprintf(names[n++], 64, "%s", name);
	}
	pclose(p);
	return n;
}

static int do_heal(int argc, char **argv, struct opts *o)
{
	struct iod_chaos_cluster *c = calloc(1, sizeof(*c));
	struct iod_chaos_fault *v = NULL;
	uint32_t n = 0, healed = 0;
	struct iod_err e = {0};
	int rc = 0;
	const char *id = optind < argc ? argv[optind++] : NULL;
	if (!c)
		return iod_cli_fail("chaos", IOD_EXIT_ERROR, "out of memory");
	if (!id && !o->all) {
		rc = bad("heal needs an ID (`iod chaos list`) or --all%s%s", "", "");
		goto out;
	}
	if (id && o->all) {
		rc = bad("heal takes an ID or --all, not both%s%s", "", "");
		goto out;
	}
	if ((rc = load_cluster(o, c)))
		goto out;
	iod_chaos_records_load(c->chaos_dir, &v, &n, &e);
	bool found = false;
	for (uint32_t i = 0; i < n; i++) {
		if (id && strcmp(v[i].id, id))
			continue;
		found = true;
		if (heal_one(c, &v[i], &e)) {
			rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "heal %s: %s", v[i].id, e.msg);
			continue;
		}
		healed++;
		if (o->out == IOD_OUT_TEXT)
			printf("%s  healed: %s\n", v[i].id, v[i].desc);
	}
	if (id && !found) { /* an L7 fault? */
		uint32_t mh = 0;
		int mrc = iod_chaos_mesh_heal(c->apis, id, &mh);
		if (mrc || !mh) {
			rc = mrc ? mrc : bad("no active fault %s (`iod chaos list`)%s", id, "");
			goto out;
		}
		healed += mh;
		if (o->out == IOD_OUT_TEXT)
			printf("%s  healed (a mesh fault)\n", id);
	}
	if (o->all) {
		uint32_t mh = 0;
		int mrc = iod_chaos_mesh_heal(c->apis, NULL, &mh);
		if (mrc)
			rc = mrc;
		healed += mh;
		if (o->out == IOD_OUT_TEXT && mh)
			printf("%u mesh fault%s healed\n", mh, mh == 1 ? "" : "s");
	}
	if (o->all) {
		char names[IOD_CHAOS_FAULTS_MAX][64];
		uint32_t k = orphan_tables(names, IOD_CHAOS_FAULTS_MAX);
		for (uint32_t i = 0; i < k; i++) {
			char cmd[128];
			snprintf(cmd, sizeof(cmd), "nft delete table inet %s 2>/dev/null",
			         names[i]);
			if (system(cmd) == 0) {
				healed++;
				if (o->out == IOD_OUT_TEXT)
					printf("%s  deleted (a table without a record)\n",
					       names[i]);
			}
		}
		if (o->out == IOD_OUT_TEXT && !healed)
			printf("nothing to heal\n");
	}
	if (o->out == IOD_OUT_JSON) {
		json_t *j = json_pack("{s:i}", "healed", (int)healed);
		iod_json_print(stdout, j, false);
		json_decref(j);
	}
out:
	free(v);
	free(c);
	return rc;
}

/* ---- checking and reporting --------------------------------------------- */

struct verdict {
	bool valid, unknown;
	uint32_t anomalies, lost;
	json_t *json; /* the checker's part of the report */
};

static int report_register(const struct iod_chaos_history *h, uint64_t max_states, bool print,
                           struct verdict *out)
{
	struct iod_err e = {0};
	struct iod_chaos_lin_result r;
	if (iod_chaos_check_register(h, max_states, &r, &e))
		return iod_cli_fail("chaos", IOD_EXIT_ERROR, "checker: %s", e.msg);
	out->valid = r.verdict == IOD_CHAOS_LINEARIZABLE;
	out->unknown = r.verdict == IOD_CHAOS_UNKNOWN;
	out->anomalies = r.verdict == IOD_CHAOS_NOT_LINEARIZABLE;
	json_t *sub = json_array();
	if (r.verdict == IOD_CHAOS_NOT_LINEARIZABLE) {
		/* the failing op and the ops it overlaps or follows closely:
		 * every op that completed or was open within the failing prefix
		 * and was invoked after the last write completed before it */
		const struct iod_chaos_op *fo = &h->ops[r.fail_op];
		uint32_t from = 0;
		for (uint32_t i = 0; i < h->n; i++) {
			const struct iod_chaos_op *op = &h->ops[i];
			if (op->f == IOD_CHAOS_WRITE && op->res == IOD_CHAOS_OK &&
			    op->cmp != IOD_CHAOS_NONE && op->cmp < fo->inv && op->inv > from)
				from = op->inv;
		}
		for (uint32_t i = 0; i < h->n; i++) {
			const struct iod_chaos_op *op = &h->ops[i];
			bool in =
			    op->inv >= from && op->inv < r.fail_events && op->res != IOD_CHAOS_FAIL;
			if (!in || json_array_size(sub) >= 20)
				continue;
			json_array_append_new(
			    sub,
			    json_pack("{s:i, s:s, s:o, s:s, s:i, s:o}", "client", (int)op->client,
			              "f", op->f == IOD_CHAOS_READ ? "read" : "write", "value",
			              op->has_value ? json_integer(op->value) : json_null(), "type",
			              op->res == IOD_CHAOS_OK ? "ok" : "info", "invoke",
			              (int)op->inv, "complete",
			              op->cmp == IOD_CHAOS_NONE ? json_null()
			                                        : json_integer(op->cmp)));
		}
	}
	out->json = json_pack("{s:s, s:s, s:I, s:o}", "checker", "linearizable register", "verdict",
	                      iod_chaos_verdict_name(r.verdict), "states", (json_int_t)r.states,
	                      "failing_subhistory", sub);
	if (print) {
		printf("  checker     register linearizability (Wing-Gong): %s (%llu "
		       "states)\n",
		       iod_chaos_verdict_name(r.verdict), (unsigned long long)r.states);
		if (r.verdict == IOD_CHAOS_NOT_LINEARIZABLE) {
			printf("  anomaly     no order explains the first %u events; it ends "
			       "with client %u's %s:\n",
			       r.fail_events, h->ops[r.fail_op].client,
			       h->ops[r.fail_op].f == IOD_CHAOS_READ ? "read" : "write");
			size_t i;
			json_t *x;
			json_array_foreach(sub, i, x)
			{
				char v[32] = "null";
				json_t *val = json_object_get(x, "value");
				if (json_is_integer(val))
					snprintf(v, sizeof(v), "%lld",
					         (long long)json_integer_value(val));
				json_t *cmp = json_object_get(x, "complete");
				char c2[16] = "open";
				if (json_is_integer(cmp))
					snprintf(c2, sizeof(c2), "%lld",
					         (long long)json_integer_value(cmp));
				printf("      client %-3lld %-5s %-10s %-4s events %lld..%s\n",
				       (long long)json_integer_value(json_object_get(x, "client")),
				       json_string_value(json_object_get(x, "f")), v,
				       json_string_value(json_object_get(x, "type")),
				       (long long)json_integer_value(json_object_get(x, "invoke")),
				       c2);
			}
		}
	}
	return 0;
}

static int report_set(const struct iod_chaos_history *h, bool print, struct verdict *out)
{
	struct iod_err e = {0};
	struct iod_chaos_set_result r;
	if (iod_chaos_check_set(h, &r, &e))
		return iod_cli_fail("chaos", IOD_EXIT_ERROR, "checker: %s", e.msg);
	out->valid = r.ok;
	out->lost = r.nlost;
	out->anomalies = r.nlost + r.nunexpected + (r.no_final_read ? 1 : 0);
	json_t *lost = json_array(), *unexp = json_array();
	for (uint32_t i = 0; i < r.nlost && i < 100; i++)
		json_array_append_new(lost, json_integer(r.lost[i]));
	for (uint32_t i = 0; i < r.nunexpected && i < 100; i++)
		json_array_append_new(unexp, json_integer(r.unexpected[i]));
	out->json =
	    json_pack("{s:s, s:s, s:i, s:i, s:o, s:i, s:o, s:b}", "checker", "set", "verdict",
	              r.ok ? "valid" : "invalid", "acknowledged", (int)r.acknowledged, "lost_count",
	              (int)r.nlost, "lost", lost, "unexpected_count", (int)r.nunexpected,
	              "unexpected", unexp, "no_final_read", r.no_final_read);
	if (print) {
		printf("  checker     set: %s: %u acknowledged adds, %u lost, %u "
		       "unexpected%s\n",
		       r.ok ? "valid" : "INVALID", r.acknowledged, r.nlost, r.nunexpected,
		       r.no_final_read ? ", NO final read succeeded" : "");
		for (uint32_t i = 0; i < r.nlost && i < 10; i++)
			printf("      lost: add %lld was acknowledged, not in the final "
			       "read\n",
			       (long long)r.lost[i]);
		for (uint32_t i = 0; i < r.nunexpected && i < 10; i++)
			printf("      unexpected: %lld was read but never added\n",
			       (long long)r.unexpected[i]);
	}
	iod_chaos_set_result_free(&r);
	return 0;
}

/* One op of a bank or append history as JSON (the failing sub-history). */
static json_t *op_json(const struct iod_chaos_history *h, uint32_t i)
{
	static const char *const fs[] = {"read", "write", "add", "transfer", "append"};
	static const char *const res[] = {"ok", "fail", "info"};
	const struct iod_chaos_op *o = &h->ops[i];
	json_t *v;
	if (o->is_set) {
		v = json_array();
		for (uint32_t k = 0; k < o->set_n; k++)
			json_array_append_new(v, json_integer(h->vals[o->set_off + k]));
	} else {
		v = o->has_value ? json_integer(o->value) : json_null();
	}
	return json_pack("{s:i, s:i, s:s, s:o, s:s, s:i, s:o}", "client", (int)o->client, "key",
	                 (int)o->key, "f", fs[o->f], "value", v, "type", res[o->res], "invoke",
	                 (int)o->inv, "complete",
	                 o->cmp == IOD_CHAOS_NONE ? json_null() : json_integer(o->cmp));
}

static void print_op(const json_t *x)
{
	char *v = json_dumps(json_object_get(x, "value"), JSON_COMPACT | JSON_ENCODE_ANY);
	json_t *cmp = json_object_get(x, "complete");
	char c2[16] = "open";
	if (json_is_integer(cmp))
		snprintf(c2, sizeof(c2), "%lld", (long long)json_integer_value(cmp));
	printf("      client %-3lld key %-2lld %-8s %-4s events %lld..%s  %.160s\n",
	       (long long)json_integer_value(json_object_get(x, "client")),
	       (long long)json_integer_value(json_object_get(x, "key")),
	       json_string_value(json_object_get(x, "f")),
	       json_string_value(json_object_get(x, "type")),
	       (long long)json_integer_value(json_object_get(x, "invoke")), c2, v ? v : "");
	free(v);
}

static int report_bank(const struct iod_chaos_history *h, bool print, struct verdict *out)
{
	struct iod_chaos_bank_result r;
	struct iod_err e = {0};
	int64_t total = (int64_t)IOD_CHAOS_BANK_ACCOUNTS * IOD_CHAOS_BANK_BALANCE;
	if (iod_chaos_check_bank(h, IOD_CHAOS_BANK_ACCOUNTS, total, &r, &e))
		return iod_cli_fail("chaos", IOD_EXIT_ERROR, "checker: %s", e.msg);
	out->valid = r.ok;
	out->anomalies = r.bad_reads + (r.no_read ? 1 : 0);
	json_t *sub = json_array();
	if (r.first_bad != IOD_CHAOS_NONE) {
		/* the bad read and the transfers open or completed while it was */
		const struct iod_chaos_op *b = &h->ops[r.first_bad];
		for (uint32_t i = 0; i < h->n && json_array_size(sub) < 20; i++) {
			const struct iod_chaos_op *o = &h->ops[i];
			uint32_t oc = o->cmp == IOD_CHAOS_NONE ? UINT32_MAX : o->cmp;
			if (i == r.first_bad ||
			    (o->f == IOD_CHAOS_TRANSFER && o->res != IOD_CHAOS_FAIL &&
			     o->inv < b->cmp && oc + 40 > b->inv))
				json_array_append_new(sub, op_json(h, i));
		}
	}
	out->json = json_pack(
	    "{s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:b, s:o}", "checker", "bank", "verdict",
	    r.ok ? "valid" : "invalid", "acknowledged", (int)r.acknowledged, "reads", (int)r.reads,
	    "bad_reads", (int)r.bad_reads, "total", (json_int_t)total, "first_bad_total",
	    (json_int_t)r.first_total, "no_read", r.no_read, "failing_subhistory", sub);
	if (print) {
		printf("  checker     bank: %s: %u acknowledged transfers, %u reads, %u with a "
		       "wrong total (want %lld)%s\n",
		       r.ok ? "valid" : "INVALID", r.acknowledged, r.reads, r.bad_reads,
		       (long long)total, r.no_read ? ", NO read succeeded" : "");
		if (r.first_bad != IOD_CHAOS_NONE) {
			printf("  anomaly     client %u's read (events %u..%u) sums to %lld; with "
			       "the transfers around it:\n",
			       h->ops[r.first_bad].client, h->ops[r.first_bad].inv,
			       h->ops[r.first_bad].cmp, (long long)r.first_total);
			size_t i;
			json_t *x;
			json_array_foreach(sub, i, x)
			{
				print_op(x);
			}
		}
	}
	return 0;
}

static int report_append(const struct iod_chaos_history *h, bool print, struct verdict *out)
{
	struct iod_chaos_append_result r;
	struct iod_err e = {0};
	if (iod_chaos_check_append(h, &r, &e))
		return iod_cli_fail("chaos", IOD_EXIT_ERROR, "checker: %s", e.msg);
	out->valid = r.ok;
	out->lost = r.count[IOD_CHAOS_APP_LOST];
	json_t *counts = json_object(), *found = json_array();
	for (int k = 0; k < IOD_CHAOS_APP_KINDS; k++) {
		out->anomalies += r.count[k];
		json_object_set_new(counts, iod_chaos_append_anomaly_name(k),
		                    json_integer(r.count[k]));
	}
	for (uint32_t i = 0; i < r.nfound; i++) {
		const struct iod_chaos_append_finding *f = &r.found[i];
		json_t *ops = json_array();
		json_array_append_new(ops, op_json(h, f->op));
		if (f->other != IOD_CHAOS_NONE)
			json_array_append_new(ops, op_json(h, f->other));
		json_array_append_new(found, json_pack("{s:s, s:i, s:I, s:o}", "anomaly",
		                                       iod_chaos_append_anomaly_name(f->kind),
		                                       "key", (int)f->key, "value",
		                                       (json_int_t)f->value, "ops", ops));
	}
	out->json =
	    json_pack("{s:s, s:s, s:i, s:i, s:o, s:o}", "checker", "append", "verdict",
	              r.ok ? "valid" : "invalid", "acknowledged", (int)r.acknowledged, "reads",
	              (int)r.reads, "anomalies", counts, "failing_subhistory", found);
	if (print) {
		printf("  checker     append: %s: %u acknowledged appends, %u reads; lost %u, "
		       "reordered %u, duplicate %u, unexpected %u, diverged %u, stale %u\n",
		       r.ok ? "valid" : "INVALID", r.acknowledged, r.reads,
		       r.count[IOD_CHAOS_APP_LOST], r.count[IOD_CHAOS_APP_REORDERED],
		       r.count[IOD_CHAOS_APP_DUPLICATE], r.count[IOD_CHAOS_APP_UNEXPECTED],
		       r.count[IOD_CHAOS_APP_DIVERGED], r.count[IOD_CHAOS_APP_STALE]);
		size_t i, j;
		json_t *x, *y;
		json_array_foreach(found, i, x)
		{
			if (i >= 5)
				break;
			printf("  anomaly     %s: key %lld value %lld\n",
			       json_string_value(json_object_get(x, "anomaly")),
			       (long long)json_integer_value(json_object_get(x, "key")),
			       (long long)json_integer_value(json_object_get(x, "value")));
			json_t *ops = json_object_get(x, "ops");
			json_array_foreach(ops, j, y)
			{
				print_op(y);
			}
		}
	}
	return 0;
}

static int check_history(const char *text, size_t len, enum iod_chaos_workload w,
                         uint64_t max_states, bool print, struct verdict *out)
{
	struct iod_chaos_history h;
	struct iod_err e = {0};
	memset(out, 0, sizeof(*out));
	if (iod_chaos_history_parse(text, len, &h, &e))
		return iod_cli_fail("chaos", IOD_EXIT_INVALID, "history: %s", e.msg);
	int rc;
	switch (w) {
	case IOD_CHAOS_WL_REGISTER: rc = report_register(&h, max_states, print, out); break;
	case IOD_CHAOS_WL_SET: rc = report_set(&h, print, out); break;
	case IOD_CHAOS_WL_BANK: rc = report_bank(&h, print, out); break;
	default: rc = report_append(&h, print, out); break;
	}
	if (!rc && out->valid && iod_chaos_history_acknowledged(&h) == 0) {
		/* nothing acknowledged: nothing was checked, though the checker
		 * found nothing wrong (an append history without a read); one
		 * that found something (no read at all) keeps its verdict */
		out->valid = false;
		out->unknown = true;
		json_object_set_new(out->json, "nothing_acknowledged", json_true());
		if (print)
			printf("  checker     no operation was acknowledged (%u in the "
			       "history): nothing was checked\n",
			       h.n);
	}
	iod_chaos_history_free(&h);
	return rc;
}

static int verdict_exit(const struct verdict *v)
{
	return v->valid ? IOD_EXIT_OK : v->unknown ? IOD_EXIT_PARTIAL : IOD_EXIT_ERROR;
}

static int do_check(int argc, char **argv, struct opts *o)
{
	struct iod_buf b;
	struct iod_err e = {0};
	struct verdict v;
	if (optind >= argc)
		return bad("check needs a history FILE (JSON lines)%s%s", "", "");
	if (!o->have_workload)
		return bad("check needs --workload register|set|bank|append%s%s", "", "");
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, argv[optind], 256u << 20, &e)) {
		iod_buf_free(&b);
		return iod_cli_fail("chaos", IOD_EXIT_INVALID, "%s", e.msg);
	}
	if (o->out == IOD_OUT_TEXT)
		printf("iod chaos check %s\n", argv[optind]);
	int rc = check_history(b.data ? b.data : "", b.len, o->workload, o->max_states,
	                       o->out == IOD_OUT_TEXT, &v);
	iod_buf_free(&b);
	if (rc)
		return rc;
	if (o->out == IOD_OUT_JSON)
		iod_json_print(stdout, v.json, false);
	else
		printf("valid: %s\n", v.valid ? "yes" : v.unknown ? "unknown" : "NO");
	json_decref(v.json);
	return verdict_exit(&v);
}

static const char *nemesis_name(uint32_t m, char *buf, size_t len)
{
	buf[0] = 0;
	if (!m)
		snprintf(buf, len, "none");
	if (m & IOD_CHAOS_NEM_PARTITION)
		snprintf(buf + strlen(buf), len - strlen(buf), "partition");
	if (m & IOD_CHAOS_NEM_KILL)
		snprintf(buf + strlen(buf), len - strlen(buf), "%skill", buf[0] ? "+" : "");
	if (m & IOD_CHAOS_NEM_PAUSE)
		snprintf(buf + strlen(buf), len - strlen(buf), "%spause", buf[0] ? "+" : "");
	if (m & IOD_CHAOS_NEM_MEMBER)
		snprintf(buf + strlen(buf), len - strlen(buf), "%smember", buf[0] ? "+" : "");
	return buf;
}

/* A plan's L7 steps name HTTP services of the mesh, and there is one for
 * `services`: checked before the run, so a bad plan applies nothing. */
static int plan_services_check(const struct iod_chaos_plan *plan, const struct iod_chaos_cluster *c)
{
	char(*have)[IOD_NAME_MAX] = NULL, (*want)[IOD_NAME_MAX] = NULL;
	struct iod_err e = {0};
	int nh = -1, rc = 0;
	for (uint32_t i = 0; i < plan->nsteps && !rc; i++) {
		const struct iod_chaos_step *s = &plan->steps[i];
		if (!iod_chaos_step_l7(s))
			continue;
		if (nh < 0) {
			have = calloc(IOD_CHAOS_MEMBERS_MAX, IOD_NAME_MAX);
			want = calloc(IOD_CHAOS_MEMBERS_MAX, IOD_NAME_MAX);
			nh = have && want
			         ? iod_chaos_l7_services(c->apis, have, IOD_CHAOS_MEMBERS_MAX, &e)
			         : -ENOMEM;
			if (nh < 0) {
				rc = iod_cli_fail("chaos", IOD_EXIT_UNAVAILABLE,
				                  "plan: listing the services: %s", e.msg);
				break;
			}
		}
		int nw = iod_chaos_services_parse(s->selector, want, IOD_CHAOS_MEMBERS_MAX, &e);
		if (nw == 0 && nh == 0)
			rc = iod_cli_fail(
			    "chaos", IOD_EXIT_INVALID,
			    "plan: fault %u (%s) selects services, and the mesh carries no "
			    "HTTP service (a first port named http or http-*)",
			    i + 1, iod_chaos_action_name(s->action));
		for (int k = 0; k < nw && !rc; k++) {
			int j = 0;
			while (j < nh && strcmp(have[j], want[k]))
				j++;
			if (j == nh)
				rc = iod_cli_fail(
				    "chaos", IOD_EXIT_INVALID,
				    "plan: fault %u selects service/%s: no HTTP service of that "
				    "name in the cluster (`iod get services`)",
				    i + 1, want[k]);
		}
	}
	free(have);
	free(want);
	return rc;
}

/* A plan's link steps name links the cluster's underlay has: checked before
 * the run (file:line:col of the selector, exit 2), so a bad plan applies
 * nothing. */
static int plan_links_check(const struct iod_chaos_plan *plan, const struct iod_chaos_cluster *c,
                            const char *name)
{
	uint32_t leaf[IOD_CHAOS_MEMBERS_MAX], spine[IOD_CHAOS_MEMBERS_MAX];
	struct iod_chaos_fault *f = NULL;
	struct iod_err e = {0};
	int rc = 0;
	for (uint32_t i = 0; i < plan->nsteps && !rc; i++) {
		const struct iod_chaos_step *s = &plan->steps[i];
		if (!iod_chaos_step_link(s))
			continue;
		if (!f && !(f = calloc(1, sizeof(*f))))
			return iod_cli_fail("chaos", IOD_EXIT_ERROR, "out of memory");
		int k = iod_chaos_links_parse(s->selector, leaf, spine, IOD_CHAOS_MEMBERS_MAX, &e);
		for (int j = 0; j < k && !rc; j++)
			if (iod_chaos_link_resolve(c, leaf[j], spine[j], f, &e)) {
				fprintf(stderr,
				        "iod chaos: %s:%u:%u: selector link/leaf%u-spine%u: %s\n",
				        name, s->sel_line, s->sel_col, leaf[j], spine[j], e.msg);
				rc = IOD_EXIT_INVALID;
			}
	}
	free(f);
	return rc;
}

static int do_run(int argc, char **argv, struct opts *o)
{
	struct iod_chaos_cluster *c = calloc(1, sizeof(*c));
	struct iod_chaos_run_report *rep = calloc(1, sizeof(*rep));
	struct iod_chaos_run_cfg cfg = {0};
	struct iod_err e = {0};
	struct verdict v = {0};
	char hpath[IOD_PATH_MAX + 64], nem[64];
	int rc = 0;
	if (!c || !rep) {
		rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "out of memory");
		goto out;
	}
	if (optind < argc) {
		rc = bad("unexpected argument %s%s", argv[optind], "");
		goto out;
	}
	struct iod_chaos_plan *plan = NULL;
	if (o->plan) {
		struct iod_buf pb;
		iod_buf_init(&pb);
		plan = calloc(1, sizeof(*plan));
		if (!plan || iod_buf_read_file(&pb, o->plan, 1u << 20, &e) ||
		    iod_chaos_plan_parse(pb.data ? pb.data : "", pb.len, o->plan, plan, &e)) {
			iod_buf_free(&pb);
			free(plan);
			rc = iod_cli_fail("chaos", IOD_EXIT_INVALID, "%s", e.msg);
			goto out;
		}
		iod_buf_free(&pb);
		cfg.plan = plan; /* freed at out */
		if (o->nemesis) {
			rc =
			    bad("--plan and --nemesis are exclusive: the plan lists the faults%s%s",
			        "", "");
			goto out;
		}
		/* the plan's values, unless given on the command line */
		if (!o->have_workload)
			o->workload = plan->workload;
		if (!o->have_duration)
			o->duration_ms = plan->duration_ms;
		if (!o->clients)
			o->clients = plan->clients;
		if (!o->have_rate) {
			o->rate = plan->rate; /* 100 unless the plan says (0: unpaced) */
			o->have_rate = true;
		}
		if (!o->have_seed && plan->has_seed) {
			o->seed = plan->seed;
			o->have_seed = true;
		}
		o->have_workload = o->have_duration = true;
	}
	if (!o->have_workload) {
		rc = bad("run needs --workload register|set|bank|append (or --plan FILE)%s%s", "",
		         "");
		goto out;
	}
	if (!o->have_duration) {
		rc = bad("run needs --duration D%s%s", "", "");
		goto out;
	}
	cfg.workload = o->workload;
	cfg.clients = o->clients ? o->clients : 4;
	cfg.rate = o->have_rate ? o->rate : 100; /* --rate 0 was taken for 100 */
	cfg.duration_ms = o->duration_ms;
	cfg.nemesis = o->nemesis;
	cfg.fault_ms = o->fault_ms ? o->fault_ms : 3000;
	cfg.warmup_ms = cfg.fault_ms < 2000 ? cfg.fault_ms : 2000;
	cfg.seed = o->have_seed ? o->seed : iod_time_unix_ns() % 1000000;
	cfg.op_timeout_ms = 1000;
	cfg.final_read_ms = 15000;
	cfg.keep = o->keep;
	if (!plan && cfg.nemesis && cfg.duration_ms < cfg.warmup_ms + 2 * cfg.fault_ms + 1000) {
		rc = bad("--duration is too short for one fault: want at least warm-up + 2 x "
		         "--fault-duration + 1s%s%s",
		         "", "");
		goto out;
	}
	if ((rc = load_cluster(o, c)))
		goto out;
	for (uint32_t i = 0; (cfg.nemesis || plan) && i < c->nservers; i++)
		if (!c->servers[i].pid) {
			rc = bad("%s is not running: `iod chaos run` wants the whole cluster up "
			         "(`iod up`)%s",
			         c->servers[i].name, "");
			goto out;
		}
	if (plan &&
	    ((rc = plan_links_check(plan, c, o->plan)) || (rc = plan_services_check(plan, c))))
		goto out;
	if (o->out == IOD_OUT_TEXT) {
		printf("iod chaos run: workload %s, %u clients, %u ops/s, %.1f s, %s %s "
		       "(faults of %.1f s), seed %llu\n",
		       iod_chaos_workload_name(o->workload), cfg.clients, cfg.rate,
		       (double)cfg.duration_ms / 1000, plan ? "plan" : "nemesis",
		       plan ? o->plan : nemesis_name(cfg.nemesis, nem, sizeof(nem)),
		       plan ? 0.0 : (double)cfg.fault_ms / 1000, (unsigned long long)cfg.seed);
		fflush(stdout);
	}
	if (iod_chaos_run(c, &cfg, rep, &e)) {
		rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "run: %s", e.msg);
		goto out;
	}
	if (o->history)
		snprintf(hpath, sizeof(hpath), "%s", o->history);
	else {
		mkdir(c->chaos_dir, 0700); /* a run without faults made no record yet */
		snprintf(hpath, sizeof(hpath), "%s/history-%s.jsonl", c->chaos_dir, rep->key);
	}
	FILE *hf = fopen(hpath, "w");
	if (!hf || fwrite(rep->history.data ? rep->history.data : "", 1, rep->history.len, hf) !=
	               rep->history.len) {
		if (hf)
			fclose(hf);
		rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "cannot write the history to %s", hpath);
		goto out;
	}
	fclose(hf);
	uint64_t rec[IOD_CHAOS_RUN_FAULTS_MAX] = {0}, outage[IOD_CHAOS_RUN_FAULTS_MAX] = {0};
	uint32_t nrec = 0, never = 0;
	for (uint32_t i = 0; i < rep->nfaults; i++) {
		outage[i] = rep->faults[i].outage_ms;
		if (rep->faults[i].recovery_ms == UINT64_MAX)
			never++;
		else
			rec[nrec++] = rep->faults[i].recovery_ms;
	}
	if (o->out == IOD_OUT_TEXT) {
		printf("  ops         %u attempted: %u ok, %u failed, %u indeterminate; %u "
		       "acknowledged writes\n",
		       rep->attempted, rep->ok, rep->failed, rep->info, rep->acked_writes);
		printf("  faults      %u\n", rep->nfaults);
		for (uint32_t i = 0; i < rep->nfaults; i++) {
			const struct iod_chaos_run_fault *f = &rep->faults[i];
			char r[48] = "no write acknowledged after it";
			if (f->recovery_ms != UINT64_MAX)
				snprintf(r, sizeof(r), "%llu ms",
				         (unsigned long long)f->recovery_ms);
			printf("    %6.1fs-%5.1fs  %-44s recovery %s, outage %llu ms\n",
			       (double)f->start_ms / 1000, (double)f->heal_ms / 1000, f->desc, r,
			       (unsigned long long)f->outage_ms);
		}
	}
	uint64_t p50 = 0, p99 = 0, pmax = 0;
	{
		uint64_t tmp[IOD_CHAOS_RUN_FAULTS_MAX];
		memcpy(tmp, rec, nrec * sizeof(rec[0]));
		p50 = iod_chaos_percentile(tmp, nrec, 50);
		p99 = iod_chaos_percentile(tmp, nrec, 99);
		pmax = iod_chaos_percentile(tmp, nrec, 100);
	}
	uint64_t o50 = iod_chaos_percentile(outage, rep->nfaults, 50);
	uint64_t o99 = iod_chaos_percentile(outage, rep->nfaults, 99);
	if (o->out == IOD_OUT_TEXT && rep->nfaults)
		printf("  recovery    p50 %llu ms, p99 %llu ms, max %llu ms (heal -> first "
		       "acknowledged write)%s\n",
		       (unsigned long long)p50, (unsigned long long)p99, (unsigned long long)pmax,
		       never ? "; SOME FAULTS NEVER RECOVERED" : "");
	if (o->out == IOD_OUT_TEXT && rep->nfaults)
		printf("  outage      p50 %llu ms, p99 %llu ms (fault -> recovered: longest time "
		       "without an acknowledged write)\n",
		       (unsigned long long)o50, (unsigned long long)o99);
	rc =
	    check_history(rep->history.data ? rep->history.data : "", rep->history.len, o->workload,
	                  o->max_states ? o->max_states : 2000000, o->out == IOD_OUT_TEXT, &v);
	if (rc)
		goto out;
	if (never && v.valid)
		v.valid = false; /* a cluster that never took a write again is not fine */
	if (o->out == IOD_OUT_TEXT) {
		printf("  history     %s (%zu bytes; `iod chaos check FILE --workload %s`)\n",
		       hpath, rep->history.len, iod_chaos_workload_name(o->workload));
		printf("valid: %s\n", v.valid ? "yes" : v.unknown ? "unknown" : "NO");
	} else {
		json_t *faults = json_array();
		for (uint32_t i = 0; i < rep->nfaults; i++) {
			const struct iod_chaos_run_fault *f = &rep->faults[i];
			json_array_append_new(
			    faults,
			    json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:o}", "id", f->id, "action",
			              iod_chaos_action_name(f->action), "desc", f->desc, "start_ms",
			              (json_int_t)f->start_ms, "heal_ms", (json_int_t)f->heal_ms,
			              "outage_ms", (json_int_t)f->outage_ms, "recovery_ms",
			              f->recovery_ms == UINT64_MAX
			                  ? json_null()
			                  : json_integer((json_int_t)f->recovery_ms)));
		}
		json_t *j = json_pack(
		    "{s:s, s:i, s:i, s:I, s:s, s:I, s:{s:i, s:i, s:i, s:i, s:i}, s:o, s:I, s:I, "
		    "s:I, s:I, s:I, s:i, s:i, s:O, s:s, s:o}",
		    "workload", iod_chaos_workload_name(o->workload), "clients", (int)cfg.clients,
		    "rate", (int)cfg.rate, "duration_ms", (json_int_t)cfg.duration_ms, "nemesis",
		    nemesis_name(cfg.nemesis, nem, sizeof(nem)), "seed", (json_int_t)cfg.seed,
		    "ops", "attempted", (int)rep->attempted, "ok", (int)rep->ok, "failed",
		    (int)rep->failed, "indeterminate", (int)rep->info, "acknowledged_writes",
		    (int)rep->acked_writes, "faults", faults, "recovery_p50_ms", (json_int_t)p50,
		    "recovery_p99_ms", (json_int_t)p99, "recovery_max_ms", (json_int_t)pmax,
		    "outage_p50_ms", (json_int_t)o50, "outage_p99_ms", (json_int_t)o99, "anomalies",
		    (int)v.anomalies, "lost", (int)v.lost, "check", v.json, "history", hpath,
		    "valid",
		    v.valid     ? json_true()
		    : v.unknown ? json_string("unknown")
		                : json_false());
		iod_json_print(stdout, j, false);
		json_decref(j);
	}
	json_decref(v.json);
	rc = verdict_exit(&v);
out:
	free((void *)cfg.plan);
	if (rep)
		iod_buf_free(&rep->history);
	free(rep);
	free(c);
	return rc;
}

int cmd_chaos(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof(o));
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? IOD_EXIT_INVALID : IOD_EXIT_OK;
	}
	const char *sub = argv[1];
	if (!strcmp(sub, "relay")) {
		/* internal: the delayer of `iod chaos delay` (started by apply) */
		char *end1 = NULL, *end2 = NULL;
		unsigned long lat = argc == 8 ? strtoul(argv[5], &end1, 10) : 0;
		unsigned long long until = argc == 8 ? strtoull(argv[7], &end2, 10) : 0;
		if (argc != 8 || strcmp(argv[2], "--port-file") ||
		    strcmp(argv[4], "--latency-ms") || strcmp(argv[6], "--until-ms") || *end1 ||
		    *end2 || !lat || lat > IOD_CHAOS_LATENCY_MAX_MS)
			return bad(
			    "usage: iod chaos relay --port-file F --latency-ms N --until-ms T "
			    "(started by iod chaos delay)%s%s",
			    "", "");
		return iod_chaos_relay_run(argv[3], (uint32_t)lat, until);
	}
	if (!strcmp(sub, "keeper")) {
		/* internal: `iod chaos keeper --chaos-dir DIR` (started by apply) */
		if (argc != 4 || strcmp(argv[2], "--chaos-dir"))
			return bad("usage: iod chaos keeper --chaos-dir DIR (started by iod "
			           "chaos itself)%s%s",
			           "", "");
		return iod_chaos_keeper_run(argv[3], 5000);
	}
	int prc = parse_opts(argc - 1, argv + 1, &o, sub);
	if (prc < 0)
		return IOD_EXIT_OK; /* --help */
	if (prc)
		return prc;
	argc--;
	argv++; /* optind now indexes the subcommand's own argv */
	if (!strcmp(sub, "list"))
		return optind < argc ? bad("list takes no argument (%s)%s", argv[optind], "")
		                     : do_list(&o);
	if (!strcmp(sub, "heal"))
		return do_heal(argc, argv, &o);
	if (!strcmp(sub, "run"))
		return do_run(argc, argv, &o);
	if (!strcmp(sub, "check"))
		return do_check(argc, argv, &o);
	if (!strcmp(sub, "abort"))
		return do_abort(argc, argv, &o);
	enum iod_chaos_action act;
	struct iod_err e = {0};
	if (iod_chaos_action_parse(sub, &act, &e))
		return bad("%s; or list, heal, run, check (`iod chaos --help`)%s", e.msg, "");
	if (act == IOD_CHAOS_ACT_MEMBER)
		return do_member(argc, argv, &o);
	return do_fault(act, argc, argv, &o, !strcmp(sub, "network_partition"));
}
