/*
 * cmd_up.c: `iod up --nodes N`: a local cluster on this machine: 3 control
 * plane servers (--servers 1|3|5|7; Raft on loopback, APIs on
 * 127.0.0.1:7400-7402 so every
 * client's default finds them) and N node agents with simulated hardware,
 * each a detached process with its log and pid file under the state dir.
 * It returns when a leader is elected and every node has registered, ready
 * for `iod deploy`. `iod down` stops them all.
 *
 * Thin shell: spawns processes and polls the API; it decides nothing.
 */
#include "cli.h"
#include "iod/agent.h"
#include "iod/agent_run.h"
#include "iod/api.h"
#include "iod/sec.h"
#include "iod/topo.h"

#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: iod up --nodes N [--gpus-per-node G | --model NAME] [--state-dir DIR]\n"
	    "              [--api-port P] [--raft-port P] [--lease-ttl DUR] [--no-sandbox]\n"
	    "              [--stateful-grace DUR] [--ckpt-capacity SIZE]\n"
	    "              [--election-timeout DUR] [--heartbeat DUR] [--mesh-port P | --no-mesh]\n"
	    "              [--mesh-mtls-port P] [--svid-ttl DUR] [--servers N]\n"
	    "              [--insecure] [--netns [--underlay leaves=L,spines=S,rate=R,slow=S:R]]\n"
	    "              [-o text|json]\n\n"
	    "Start a local cluster: 3 control-plane servers (--servers N: 1, 3, 5 or 7) and N\n"
	    "node agents as processes\n"
	    "on this machine (loopback), each agent with simulated hardware. Returns when\n"
	    "a leader is elected and every node has registered.\n\n"
	    "  --netns              (root) every node its own network: each agent runs in a\n"
	    "                       host namespace on a leaf-spine underlay of namespaces\n"
	    "                       (ECMP, L4 hash), the servers' APIs on 10.254.0.1 (TLS,\n"
	    "                       client certificates), and each node's replicas on iod's\n"
	    "                       overlay: the agent's data plane switches them and\n"
	    "                       carries them over VXLAN (docs/network.md). Not the\n"
	    "                       default: loopback needs no root and keeps 127.0.0.1:7400\n"
	    "  --underlay SPEC      its shape: leaves=2,spines=2 by default; rate=R limits\n"
	    "                       every spine link (tc tbf), slow=S:R one spine\n"
	    "  --nodes N            node agents (1..%d, default 4)\n"
	    "  --gpus-per-node G    each node is the generic-G model (default 4)\n"
	    "  --model NAME         each node is this built-in model (`iod topo --list-models`)\n"
	    "  --state-dir DIR      pid files, logs, data (default ~/.local/share/iod/cluster,\n"
	    "                       or $IOD_STATE_DIR); wiped at each `iod up`\n"
	    "  --servers N          control-plane servers: 1, 3 (default), 5 or 7\n"
	    "  --api-port P         first API port (default 7400: servers on P..P+N-1)\n"
	    "  --raft-port P        first Raft port (default 7300)\n"
	    "  --lease-ttl DUR      node lease (default 1s): a node is lost this long after\n"
	    "                       its agent stops renewing\n"
	    "  --stateful-grace DUR after a node is lost, how long the agents wait before\n"
	    "                       moving its stateful replicas (default: the agent's, 30s)\n"
	    "  --ckpt-capacity SIZE each agent's checkpoint capacity per stateful replica\n"
	    "                       (the agent's --ckpt-capacity, default 1GiB)\n"
	    "  --no-sandbox         run replicas as plain processes\n"
	    "  --election-timeout DUR, --heartbeat DUR\n"
	    "                       Raft timing of the servers (`iod server --help`);\n"
	    "                       raise them on a loaded machine\n"
	    "  --mesh-port P        admin port of the mesh proxy (default 15000): node-1's\n"
	    "                       agent hosts it and serves every service's VIP for all\n"
	    "                       local nodes (they share loopback; docs/mesh.md)\n"
	    "  --no-mesh            no agent hosts a mesh proxy\n"
	    "  --mesh-mtls-port P   node-N's proxy takes other nodes' proxies over mutual TLS\n"
	    "                       on 127.0.0.1:P+N-1 (default API port + 30; 0 = off):\n"
	    "                       a call to a replica on another node goes node-1's proxy\n"
	    "                       -> mTLS -> that node's proxy, each agent issuing and\n"
	    "                       rotating its services' SVIDs (docs/security.md)\n"
	    "  --svid-ttl DUR       the SVIDs' life (default 1h; renewed at 2/3)\n"
	    "  --telemetry-port P   node-N's agent serves /metrics and /v1/telemetry on\n"
	    "                       127.0.0.1:P+N-1 (default API port + 200; 0 = off);\n"
	    "                       with --netns on UNDERLAY_ADDR:P over mutual TLS\n"
	    "                       (read it with `iod metrics --node node-N`)\n"
	    "  --insecure           plaintext API, no authentication (anyone on this machine\n"
	    "                       is admin); by default the cluster gets a CA in\n"
	    "                       STATE_DIR/pki, HTTPS with client certificates, one\n"
	    "                       certificate per node, and a context \"local\" in the\n"
	    "                       client config with an admin credential (docs/security.md)\n\n"
	    "Then: iod deploy -f examples/service-topology.yaml; iod get replicas;\n"
	    "      iod logs REPLICA; iod events; iod down\n",
	    IOD_UP_NODES_MAX);
}

void iod_up_state_dir(char *buf, size_t len);
void iod_up_state_dir(char *buf, size_t len)
{
	const char *env = getenv("IOD_STATE_DIR"), *home = getenv("HOME");
	if (env && env[0])
		snprintf(buf, len, "%s", env);
	else
		snprintf(buf, len, "%s/.local/share/iod/cluster", home ? home : "/tmp");
}

static pid_t spawn(const char *exe, char *const argv[], const char *log, const char *pidfile,
                   const char *netns)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct iod_err ne = {0};
		if (netns && iod_agent_netns_enter(netns, &ne)) { /* its host's network */
			fprintf(stderr, "iod up: %s\n", ne.msg);
			_exit(126);
		}
		setsid(); /* detached: survives the shell, not killed by its Ctrl-C */
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (nul >= 0)
			dup2(nul, 0);
		/* a daemon holds nothing of its parent's: an inherited lock or
		 * socket would outlive the command that started the cluster */
		close_range(3, ~0u, 0);
		execv(exe, argv);
		_exit(127);
	}
	if (pid > 0) {
		FILE *f = fopen(pidfile, "w");
		if (f) {
			fprintf(f, "%d\n", (int)pid);
			fclose(f);
		}
	}
	return pid;
}

bool iod_up_pid_is_ours(int pid, const char *dir);
uint32_t iod_up_netns_sweep(const char *dir);

static bool alive_pidfile(const char *path, const char *dir)
{
	FILE *f = fopen(path, "r");
	int pid = 0;
	if (!f)
		return false;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	return iod_up_pid_is_ours(pid, dir);
}

/* A write that needs a leader: grant and revoke a short lease. */
static bool leader_ready(struct iod_api_client *cl)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	uint64_t id = 0;
	const char *body = "{\"ttl_ms\": 1000}";
	bool ok = !iod_api_request(cl, "POST", "/v1/leases", "application/json", body, strlen(body),
	                           &r, &e) &&
	          r.status == 200 && !iod_json_get_u64(r.json, "lease", &id);
	iod_api_response_free(&r);
	if (ok) {
		char path[64];
		snprintf(path, sizeof(path), "/v1/leases/%llu", (unsigned long long)id);
		iod_api_request(cl, "DELETE", path, NULL, NULL, 0, &r, &e);
		iod_api_response_free(&r);
	}
	return ok;
}

static size_t nodes_registered(struct iod_api_client *cl)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	size_t n = 0;
	if (!iod_api_request(cl, "GET", "/v1/nodes", NULL, NULL, 0, &r, &e) && r.status == 200)
		n = json_array_size(json_object_get(r.json, "items"));
	iod_api_response_free(&r);
	return n;
}

int iod_init_cluster(const char *dir, const char *cluster, const char *servers, const char *admin,
                     const char *context, const char *config_path, bool make_current,
                     struct iod_err *e);

/* The name of a local cluster: its trust domain and its client-config context. */
#define UP_CLUSTER "local"

/*
 * Secure by default (docs/security.md): a new CA in dir/pki, an admin
 * credential and a context "local" in dir/config (found through
 * IOD_STATE_DIR) and in the user's client config when the cluster runs
 * from the default state dir (or $IOD_CONFIG names one), a certificate for
 * each node, and the admin's TLS credentials for `iod up`'s own calls.
 */
static int make_pki(const char *dir, const char *pki, const char *apis, long nodes,
                    bool default_dir, struct iod_sec_tls_creds **admin)
{
	char config[IOD_AGENT_PATH_MAX + 16], other[IOD_PATH_MAX], p1[IOD_AGENT_PATH_MAX + 16],
	    p2[IOD_AGENT_PATH_MAX + 16], p3[IOD_AGENT_PATH_MAX + 16];
	const char *env = getenv("IOD_CONFIG");
	struct iod_sec_ca *ca = NULL;
	struct iod_err e = {0};
	uint64_t now = (uint64_t)time(NULL);

	snprintf(config, sizeof(config), "%s/config", dir);
	unlink(config);
	if (iod_init_cluster(pki, UP_CLUSTER, apis, "admin", UP_CLUSTER, config, true, &e))
		return iod_cli_fail("up", IOD_EXIT_ERROR, "%s", e.msg);
	other[0] = 0;
	if (env && env[0])
		snprintf(other, sizeof(other), "%s", env);
	else if (default_dir && !(getenv("IOD_STATE_DIR") && getenv("IOD_STATE_DIR")[0]))
		iod_sec_config_path(other, sizeof(other));
	if (other[0] && strcmp(other, config)) {
		struct iod_sec_context c;
		memset(&c, 0, sizeof(c));
		snprintf(c.name, sizeof(c.name), "%s", UP_CLUSTER);
		snprintf(c.cluster, sizeof(c.cluster), "%s", UP_CLUSTER);
		snprintf(c.servers, sizeof(c.servers), "%s", apis);
		snprintf(c.ca, sizeof(c.ca), "%s/ca.crt", pki);
		snprintf(c.cert, sizeof(c.cert), "%s/admin.crt", pki);
		snprintf(c.key, sizeof(c.key), "%s/admin.key", pki);
		if (iod_sec_context_save(other, &c, true, &e))
			return iod_cli_fail("up", IOD_EXIT_ERROR, "%s", e.msg);
	}
	if (iod_sec_pki_load_ca(pki, true, &ca, &e))
		return iod_cli_fail("up", IOD_EXIT_ERROR, "%s", e.msg);
	for (long i = 1; i <= nodes; i++) {
		struct iod_sec_cert_req rq;
		char base[32];
		memset(&rq, 0, sizeof(rq));
		rq.id.kind = IOD_SEC_KIND_NODE;
		rq.id.role = IOD_SEC_ROLE_NODE;
		rq.server = iod_sec_kind_serves(rq.id.kind);
		snprintf(rq.id.name, sizeof(rq.id.name), "node-%ld", i);
		snprintf(base, sizeof(base), "node-%ld", i);
		rq.not_before_s = now;
		rq.ttl_s = IOD_SEC_NODE_TTL_S;
		if (iod_sec_pki_issue_files(ca, pki, base, &rq, &e)) {
			iod_sec_ca_free(ca);
			return iod_cli_fail("up", IOD_EXIT_ERROR, "%s", e.msg);
		}
	}
	iod_sec_ca_free(ca);
	snprintf(p1, sizeof(p1), "%s/ca.crt", pki);
	snprintf(p2, sizeof(p2), "%s/admin.crt", pki);
	snprintf(p3, sizeof(p3), "%s/admin.key", pki);
	if (iod_sec_tls_creds_load(p1, p2, p3, admin, &e))
		return iod_cli_fail("up", IOD_EXIT_ERROR, "%s", e.msg);
	return 0;
}

int cmd_up(int argc, char **argv)
{
	static const struct option opts[] = {{"nodes", required_argument, 0, 'n'},
	                                     {"gpus-per-node", required_argument, 0, 'g'},
	                                     {"model", required_argument, 0, 'm'},
	                                     {"state-dir", required_argument, 0, 'd'},
	                                     {"api-port", required_argument, 0, 'a'},
	                                     {"raft-port", required_argument, 0, 'r'},
	                                     {"lease-ttl", required_argument, 0, 'l'},
	                                     {"no-sandbox", no_argument, 0, 'S'},
	                                     {"output", required_argument, 0, 'o'},
	                                     {"help", no_argument, 0, 'h'},
	                                     {"election-timeout", required_argument, 0, 'E'},
	                                     {"heartbeat", required_argument, 0, 'H'},
	                                     {"mesh-port", required_argument, 0, 'P'},
	                                     {"no-mesh", no_argument, 0, 'N'},
	                                     {"insecure", no_argument, 0, 'I'},
	                                     {"telemetry-port", required_argument, 0, 'T'},
	                                     {"netns", no_argument, 0, 'X'},
	                                     {"underlay", required_argument, 0, 'U'},
	                                     {"mesh-mtls-port", required_argument, 0, 1301},
	                                     {"svid-ttl", required_argument, 0, 1302},
	                                     {"servers", required_argument, 0, 1303},
	                                     {"stateful-grace", required_argument, 0, 1304},
	                                     {"ckpt-capacity", required_argument, 0, 1305},
	                                     {0, 0, 0, 0}};
	long mtls_port = -1; /* -1: API port + 30 (in a test's block of ports) */
	char svid_ttl[32] = "", grace[32] = "", ckptcap[32] = "";
	char election[32] = "", heartbeat[32] = "";
	static const char *const outs[] = {"text", "json", NULL};
	char dir[IOD_AGENT_PATH_MAX], exe[IOD_AGENT_PATH_MAX], path[IOD_AGENT_PATH_MAX + 64];
	char peers[512] = "", apis[256] = "", model[IOD_NAME_MAX] = "", lease[32] = "1s";
	long servers = 3, nodes = 4, gpus = 4, api_port = 7400, raft_port = 7300, mesh_port = 15000;
	long telemetry_port = -1; /* -1: API port + 200 */
	bool gpus_set = false, sandbox = true, mesh = true, insecure = false, dir_set = false;
	bool netns = false;
	struct iod_agent_underlay_cfg ul = {.leaves = 2, .spines = 2};
	const char *underlay_spec = NULL;
	char pki[IOD_AGENT_PATH_MAX + 8];
	char mesh_admin[32];
	enum iod_output out = IOD_OUT_TEXT;
	struct iod_err e = {0};
	int o;

	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	iod_up_state_dir(dir, sizeof(dir));
	while ((o = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (o) {
		case 'n': nodes = atol(optarg); break;
		case 'g':
			gpus = atol(optarg);
			gpus_set = true;
			break;
		case 'm': snprintf(model, sizeof(model), "%s", optarg); break;
		case 'd':
			snprintf(dir, sizeof(dir), "%s", optarg);
			dir_set = true;
			break;
		case 'I': insecure = true; break;
		case 'a': api_port = atol(optarg); break;
		case 'r': raft_port = atol(optarg); break;
		case 'l': {
			uint64_t ns;
			if (iod_parse_duration(optarg, &ns, &e) || ns < 10 * IOD_NS_PER_MS)
				return iod_cli_fail("up", IOD_EXIT_INVALID, "--lease-ttl %s: %s",
				                    optarg, e.msg[0] ? e.msg : "must be >= 10ms");
			snprintf(lease, sizeof(lease), "%s", optarg);
			break;
		}
		case 1304: {
			uint64_t ns;
			if (iod_parse_duration(optarg, &ns, &e))
				return iod_cli_fail("up", IOD_EXIT_INVALID,
				                    "--stateful-grace %s: %s", optarg, e.msg);
			snprintf(grace, sizeof(grace), "%s", optarg);
			break;
		}
		case 1305:
			/* checked by the agent (iod agent --ckpt-capacity), which says why */
			snprintf(ckptcap, sizeof(ckptcap), "%s", optarg);
			break;
		case 'S': sandbox = false; break;
		case 'N': mesh = false; break;
		case 'P':
			mesh_port = atol(optarg);
			if (mesh_port < 1 || mesh_port > 65535)
				return iod_cli_fail("up", IOD_EXIT_INVALID,
				                    "--mesh-port must be 1..65535, not %s", optarg);
			break;
		case 'T':
			telemetry_port = atol(optarg);
			if (telemetry_port < 0 || telemetry_port > 65535 - IOD_UP_NODES_MAX)
				return iod_cli_fail(
				    "up", IOD_EXIT_INVALID,
				    "--telemetry-port must be 1..%d (0 = off), not %s",
				    65535 - IOD_UP_NODES_MAX, optarg);
			break;
		case 'X': netns = true; break;
		case 'U': underlay_spec = optarg; break;
		case 1301:
			mtls_port = atol(optarg);
			if (mtls_port < 0 || mtls_port > 65535 - IOD_UP_NODES_MAX)
				return iod_cli_fail(
				    "up", IOD_EXIT_INVALID,
				    "--mesh-mtls-port must be 1..%d (0 = off), not %s",
				    65535 - IOD_UP_NODES_MAX, optarg);
			break;
		case 1302: {
			uint64_t ns;
			if (iod_parse_duration(optarg, &ns, &e) ||
			    ns < IOD_SEC_CERT_TTL_MIN_S * IOD_NS_PER_S)
				return iod_cli_fail("up", IOD_EXIT_INVALID, "--svid-ttl %s: %s",
				                    optarg, e.msg[0] ? e.msg : "at least 10s");
			snprintf(svid_ttl, sizeof(svid_ttl), "%s", optarg);
			break;
		}
		case 1303: {
			char *end;
			servers = strtol(optarg, &end, 10);
			if (*end || servers < 1 || servers > IOD_UP_SERVERS_MAX || servers % 2 == 0)
				return iod_cli_fail(
				    "up", IOD_EXIT_INVALID,
				    "--servers must be 1, 3, 5 or 7 (odd: an even count tolerates "
				    "no "
				    "more failures than the odd one below it), not %s",
				    optarg);
			break;
		}
		case 'E': snprintf(election, sizeof(election), "%s", optarg); break;
		case 'H': snprintf(heartbeat, sizeof(heartbeat), "%s", optarg); break;
		case 'o':
			if (iod_cli_output("up", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("up", IOD_EXIT_INVALID, "unexpected argument %s", argv[optind]);
	if (underlay_spec && !netns)
		return iod_cli_fail("up", IOD_EXIT_INVALID, "--underlay needs --netns");
	if (underlay_spec && iod_agent_underlay_parse(underlay_spec, &ul, &e))
		return iod_cli_fail("up", IOD_EXIT_INVALID, "%s", e.msg);
	if (netns && geteuid() != 0)
		return iod_cli_fail(
		    "up", IOD_EXIT_INVALID,
		    "--netns needs root (network namespaces, veth pairs, AF_PACKET); "
		    "without it the cluster runs on loopback");
	if (netns && insecure)
		return iod_cli_fail("up", IOD_EXIT_INVALID,
		                    "--netns serves the API on an underlay address: it needs TLS "
		                    "and authentication, not --insecure");
	if (nodes < 1 || nodes > IOD_UP_NODES_MAX)
		return iod_cli_fail("up", IOD_EXIT_INVALID, "--nodes must be 1..%d",
		                    IOD_UP_NODES_MAX);
	if (model[0] && gpus_set)
		return iod_cli_fail(
		    "up", IOD_EXIT_INVALID,
		    "--gpus-per-node and --model are exclusive: a model has its GPUs");
	if (telemetry_port < 0)
		telemetry_port = api_port + 200 <= 65535 - IOD_UP_NODES_MAX ? api_port + 200 : 0;
	if (api_port < 1 || api_port > 65536 - servers || raft_port < 1 ||
	    raft_port > 65536 - servers)
		return iod_cli_fail("up", IOD_EXIT_INVALID, "ports must leave room for %ld servers",
		                    servers);
	if (model[0]) {
		struct iod_topo_node *tn = calloc(1, sizeof(*tn));
		int rc = tn ? iod_topo_model_load(model, tn, &e) : -ENOMEM;
		if (tn)
			gpus = iod_topo_gpu_count(tn);
		free(tn);
		if (rc)
			return iod_cli_fail("up", IOD_EXIT_INVALID, "--model: %s", e.msg);
	} else {
		snprintf(model, sizeof(model), "generic-%ld", gpus);
		struct iod_topo_node *tn = calloc(1, sizeof(*tn));
		int rc = tn ? iod_topo_model_generic((unsigned)gpus, tn, &e) : -ENOMEM;
		free(tn);
		if (gpus < 0 || rc)
			return iod_cli_fail("up", IOD_EXIT_INVALID, "--gpus-per-node: %s", e.msg);
	}
	/* one cluster per state dir */
	for (int i = 1; i <= IOD_UP_SERVERS_MAX + IOD_UP_NODES_MAX; i++) {
		if (i <= IOD_UP_SERVERS_MAX)
			snprintf(path, sizeof(path), "%s/server-%d.pid", dir, i);
		else
			snprintf(path, sizeof(path), "%s/node-%d.pid", dir, i - IOD_UP_SERVERS_MAX);
		if (alive_pidfile(path, dir))
			return iod_cli_fail(
			    "up", IOD_EXIT_INVALID,
			    "a cluster is already running from %s (see %s): run `iod "
			    "down` first",
			    dir, path);
	}
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return iod_cli_fail("up", IOD_EXIT_ERROR, "cannot find my own binary");
	exe[n] = 0;
	char cmd[4 * IOD_AGENT_PATH_MAX + 96];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'/server-* '%s'/node-* '%s'/pki && mkdir -p '%s'",
	         dir, dir, dir, dir);
	if (system(cmd) != 0)
		return iod_cli_fail("up", IOD_EXIT_ERROR, "cannot prepare state dir %s", dir);

	if (dir[0] != '/') {
		char cwd[IOD_AGENT_PATH_MAX];
		if (getcwd(cwd, sizeof(cwd)) && strlen(cwd) + strlen(dir) + 2 < sizeof(dir)) {
			memmove(dir + strlen(cwd) + 1, dir, strlen(dir) + 1);
			memcpy(dir, cwd, strlen(cwd));
			dir[strlen(cwd)] = '/';
		}
	}
	uint64_t t0 = (iod_clock_now_ns() / IOD_NS_PER_MS);
	char api_host[20] = "127.0.0.1";
	if (netns) {
		ul.hosts = (uint32_t)nodes;
		iod_agent_underlay_prefix(dir, ul.prefix, sizeof(ul.prefix));
		iod_agent_ipv4_format(iod_agent_underlay_cp_ip(), api_host, sizeof(api_host));
		if (out == IOD_OUT_TEXT)
			printf("building the underlay %s-*: %u leaves, %u spines, %ld hosts\n",
			       ul.prefix, ul.leaves, ul.spines, nodes);
		iod_up_netns_sweep(dir); /* what a crashed cluster of this dir left */
		if (iod_agent_underlay_up(&ul, &e))
			return iod_cli_fail("up", IOD_EXIT_ERROR, "%s", e.msg);
	}
	for (int i = 0; i < servers; i++) {
		size_t la = strlen(apis);
		snprintf(apis + la, sizeof(apis) - la, "%s%s:%ld", i ? "," : "", api_host,
		         api_port + i);
	}
	snprintf(pki, sizeof(pki), "%s/pki", dir);
	struct iod_sec_tls_creds *admin = NULL;
	int pki_rc = insecure ? 0 : make_pki(dir, pki, apis, nodes, !dir_set, &admin);
	if (pki_rc)
		return pki_rc;
	apis[0] = 0;
	for (int i = 0; i < servers; i++) {
		size_t l = strlen(peers), la = strlen(apis);
		snprintf(peers + l, sizeof(peers) - l, "%s%d=127.0.0.1:%ld@%s:%ld", i ? "," : "",
		         i + 1, raft_port + i, api_host, api_port + i);
		snprintf(apis + la, sizeof(apis) - la, "%s%s:%ld", i ? "," : "", api_host,
		         api_port + i);
	}
	if (out == IOD_OUT_TEXT)
		printf("starting %ld control-plane servers (APIs %s)\n", servers, apis);
	for (int i = 0; i < servers; i++) {
		char id[8], data[IOD_AGENT_PATH_MAX + 16], raft[32], api[32],
		    log[IOD_AGENT_PATH_MAX + 16];
		snprintf(id, sizeof(id), "%d", i + 1);
		snprintf(data, sizeof(data), "%s/server-%d", dir, i + 1);
		snprintf(raft, sizeof(raft), "127.0.0.1:%ld", raft_port + i);
		snprintf(api, sizeof(api), "%s:%ld", api_host, api_port + i);
		snprintf(log, sizeof(log), "%s/server-%d.log", dir, i + 1);
		snprintf(path, sizeof(path), "%s/server-%d.pid", dir, i + 1);
		char *av[20] = {exe,  "server", "--id", id,        "--data-dir", data, "--raft",
		                raft, "--api",  api,    "--peers", peers,        NULL};
		int k = 12;
		av[k++] = insecure ? "--insecure" : "--pki";
		if (!insecure)
			av[k++] = pki;
		if (election[0]) {
			av[k++] = "--election-timeout";
			av[k++] = election;
		}
		if (heartbeat[0]) {
			av[k++] = "--heartbeat";
			av[k++] = heartbeat;
		}
		av[k] = NULL;
		if (spawn(exe, av, log, path, NULL) < 0)
			return iod_cli_fail("up", IOD_EXIT_ERROR, "fork: %s", strerror(errno));
	}
	struct iod_api_client cl;
	if (iod_api_client_init(&cl, apis, &e))
		return iod_cli_fail("up", IOD_EXIT_ERROR, "%s", e.msg);
	iod_api_client_set_creds(&cl, admin, NULL);
	cl.own_creds = admin != NULL; /* freed by iod_api_client_close */
	cl.timeout_ms = 500;
	cl.retry_ms = 200;
	while (!leader_ready(&cl)) {
		if ((iod_clock_now_ns() / IOD_NS_PER_MS) - t0 > 15000) {
			iod_api_client_close(&cl);
			return iod_cli_fail("up", IOD_EXIT_UNAVAILABLE,
			                    "no leader after 15 s: see %s/server-*.log; `iod down` "
			                    "cleans up",
			                    dir);
		}
		usleep(20000);
	}
	uint64_t t_leader = (iod_clock_now_ns() / IOD_NS_PER_MS);
	if (out == IOD_OUT_TEXT)
		printf("leader elected in %llu ms; starting %ld node agents (%s each)\n",
		       (unsigned long long)(t_leader - t0), nodes, model);
	for (long i = 1; i <= nodes; i++) {
		char name[32], data[IOD_AGENT_PATH_MAX + 16], log[IOD_AGENT_PATH_MAX + 16], gs[16];
		char addr[32];
		/* each node its own loopback address (all of 127/8 is loopback on
		 * Linux): replicas of different nodes never share a port */
		snprintf(addr, sizeof(addr), "127.0.%ld.%ld", 1 + i / 250, 1 + i % 250);
		char hostns[48] = "", subnet[32], gwmac[24];
		if (netns) { /* its underlay address; its replicas on 10.200.<N>.0/24 */
			uint8_t m[6];
			iod_agent_ipv4_format(iod_agent_underlay_host_ip(&ul, (uint32_t)i), addr,
			                      sizeof(addr));
			iod_agent_underlay_host_ns(&ul, (uint32_t)i, hostns, sizeof(hostns));
			iod_agent_underlay_leaf_mac(iod_agent_underlay_leaf(&ul, (uint32_t)i), m);
			snprintf(gwmac, sizeof(gwmac), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1],
			         m[2], m[3], m[4], m[5]);
			snprintf(subnet, sizeof(subnet), "10.200.%ld.0/24", i);
		}
		snprintf(name, sizeof(name), "node-%ld", i);
		snprintf(data, sizeof(data), "%s/node-%ld", dir, i);
		snprintf(log, sizeof(log), "%s/node-%ld.log", dir, i);
		snprintf(path, sizeof(path), "%s/node-%ld.pid", dir, i);
		snprintf(gs, sizeof(gs), "%ld", gpus);
		char *av[60], telv[32], mtlsv[32], svidd[IOD_AGENT_PATH_MAX + 24],
		    unixd[IOD_AGENT_PATH_MAX + 24], crt[IOD_AGENT_PATH_MAX + 48],
		    key[IOD_AGENT_PATH_MAX + 48], cacrt[IOD_AGENT_PATH_MAX + 16];
		int k = 0;
		av[k++] = exe;
		av[k++] = "agent";
		av[k++] = "--server";
		av[k++] = apis;
		av[k++] = "--name";
		av[k++] = name;
		av[k++] = "--data-dir";
		av[k++] = data;
		av[k++] = "--lease-ttl";
		av[k++] = lease;
		if (grace[0]) {
			av[k++] = "--stateful-grace";
			av[k++] = grace;
		}
		if (ckptcap[0]) {
			av[k++] = "--ckpt-capacity";
			av[k++] = ckptcap;
		}
		av[k++] = "--addr";
		av[k++] = addr;
		av[k++] = gpus_set || !strncmp(model, "generic-", 8) ? "--gpus" : "--model";
		av[k++] = gpus_set || !strncmp(model, "generic-", 8) ? gs : model;
		if (!sandbox)
			av[k++] = "--no-sandbox";
		if (netns) {
			av[k++] = "--netns-subnet";
			av[k++] = subnet;
			av[k++] = "--overlay";
			av[k++] = "u0";
			av[k++] = "--overlay-gw-mac";
			av[k++] = gwmac;
		}
		if (!insecure) {
			snprintf(cacrt, sizeof(cacrt), "%s/ca.crt", pki);
			snprintf(crt, sizeof(crt), "%s/%s.crt", pki, name);
			snprintf(key, sizeof(key), "%s/%s.key", pki, name);
			av[k++] = "--ca";
			av[k++] = cacrt;
			av[k++] = "--cert";
			av[k++] = crt;
			av[k++] = "--key";
			av[k++] = key;
		}
		/* VIPs are per service and every local node shares loopback: one
		 * proxy (node-1's) serves them all; the others host none */
		snprintf(mesh_admin, sizeof(mesh_admin), "127.0.0.1:%ld", mesh_port);
		long mtls_base = mtls_port < 0 ? api_port + 30 : mtls_port;
		bool mtls =
		    mesh && !insecure && mtls_port != 0 && mtls_base + (netns ? 1 : nodes) <= 65535;
		if (mesh && (i == 1 || netns)) {
			/* --netns: every node its own host namespace (its own
			 * loopback), so every agent hosts its proxy: the l7 VIPs
			 * and DNS of its replicas (docs/network.md) */
			av[k++] = "--mesh-admin";
			av[k++] = mesh_admin;
		} else if (mtls) {
			/* the others' proxies serve no VIPs: only their replicas, to
			 * node-1's proxy over mutual TLS */
			av[k++] = "--mesh-no-vips";
			av[k++] = "--mesh-admin";
			av[k++] = "off";
		} else {
			av[k++] = "--no-mesh";
		}
		if (mtls) {
			/* one SVID directory: node-1's proxy presents the SVIDs of
			 * callers on every local node, each issued by its own node.
			 * --netns: every node's own, as on separate machines (each
			 * proxy presents its own node's; a shared one let a node's
			 * prune or reissue race another's replica start) */
			snprintf(mtlsv, sizeof(mtlsv), "127.0.0.1:%ld", mtls_base + i - 1);
			if (netns) /* on its underlay address: other nodes' proxies */
				snprintf(mtlsv, sizeof(mtlsv), "%s:%ld", addr, mtls_base);
			snprintf(svidd, sizeof(svidd), "%s/svid", netns ? data : dir);
			av[k++] = "--mesh-mtls";
			av[k++] = mtlsv;
			av[k++] = "--svid-dir";
			av[k++] = svidd;
			if (svid_ttl[0]) {
				av[k++] = "--svid-ttl";
				av[k++] = svid_ttl;
			}
		}
		/* each agent's telemetry (/metrics, /v1/telemetry) on its own port */
		snprintf(telv, sizeof(telv), "127.0.0.1:%ld", telemetry_port + i - 1);
		if (netns) /* its own network: its underlay address, one port for all */
			snprintf(telv, sizeof(telv), "%s:%ld", addr, telemetry_port);
		if (telemetry_port) {
			av[k++] = "--telemetry-addr";
			av[k++] = telv;
		}
		/* service_mesh.transport shm: one socket directory for every
		 * local node (they share node-1's proxy, as they share loopback) */
		if (mesh && !netns) {
			snprintf(unixd, sizeof(unixd), "%s/mesh", dir);
			av[k++] = "--mesh-unix";
			av[k++] = unixd;
		}
		IOD_ASSERT(k < (int)IOD_ARRAY_LEN(av));
		av[k] = NULL;
		if (spawn(exe, av, log, path, netns ? hostns : NULL) < 0)
			return iod_cli_fail("up", IOD_EXIT_ERROR, "fork: %s", strerror(errno));
	}
	size_t reg = 0;
	while ((reg = nodes_registered(&cl)) < (size_t)nodes) {
		if ((iod_clock_now_ns() / IOD_NS_PER_MS) - t0 > 30000) {
			iod_api_client_close(&cl);
			return iod_cli_fail(
			    "up", IOD_EXIT_PARTIAL,
			    "%zu of %ld nodes registered after 30 s: see %s/node-*.log", reg, nodes,
			    dir);
		}
		usleep(20000);
	}
	iod_api_client_close(&cl);
	uint64_t t1 = (iod_clock_now_ns() / IOD_NS_PER_MS);
	char tel_first[48] = "off";
	if (telemetry_port && netns)
		snprintf(tel_first, sizeof(tel_first), "https://10.254.<leaf>.<k>:%ld",
		         telemetry_port);
	else if (telemetry_port)
		snprintf(tel_first, sizeof(tel_first), "http://127.0.0.1:%ld", telemetry_port);
	if (out == IOD_OUT_JSON) {
		json_t *j =
		    json_pack("{s:s, s:i, s:i, s:s, s:s, s:I, s:I, s:s?}", "servers", apis, "nodes",
		              (int)nodes, "gpus_per_node", (int)gpus, "model", model, "state_dir",
		              dir, "leader_ms", (json_int_t)(t_leader - t0), "ready_ms",
		              (json_int_t)(t1 - t0), "mesh_admin", mesh ? mesh_admin : NULL);
		if (netns)
			json_object_set_new(j, "underlay", json_string(ul.prefix));
		iod_json_print(stdout, j, false);
		json_decref(j);
		return 0;
	}
	if (netns)
		printf("underlay %s-*: node-N in netns %s-hN (10.254.<leaf>.<k>, `ip netns exec "
		       "%s-h1 ...`), replicas on the overlay 10.200.N.0/24\n",
		       ul.prefix, ul.prefix, ul.prefix);
	printf("cluster up in %llu ms: %ld servers, %ld nodes x %ld GPUs (%s)\n"
	       "  API      %s (%s)\n"
	       "  state    %s (server-N.log, node-N.log, node-N/replicas/*/log)\n"
	       "  mesh     %s%s (%s: /registry /metrics /spans)\n"
	       "  metrics  %s (%s: /metrics /v1/telemetry)\n"
	       "next: iod deploy -f examples/service-topology.yaml && iod get replicas; "
	       "iod down\n",
	       (unsigned long long)(t1 - t0), servers, nodes, gpus, model, apis,
	       netns ? "TLS on the underlay; the context \"local\" names them"
	             : "IOD_SERVER; the default 127.0.0.1:7400 is one of them",
	       dir, mesh ? "http://" : "off", mesh ? mesh_admin : "",
	       netns ? "each node's proxy, in its host namespace" : "node-1's proxy", tel_first,
	       netns ? "each node's agent on its underlay address, in its netns; mTLS: "
	               "`iod metrics --node node-N`"
	             : "node-N's agent on the next ports");
	return 0;
}
