/*
 * cmd_demo_worker.c: `iod demo-worker`: the built-in demo training workload
 * (src/demo/worker.c): options, where the parameter servers are (the
 * agent's IOD_DEP_<SERVICE>, or the service's mesh VIP with --via-mesh),
 * then the workload.
 */
#include "cli.h"
#include "iod/demo.h"
#include "iod/mesh_proxy.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* IOD_DEP_<SERVICE>: service name upper-cased, '-' and '.' as '_'. */
static const char *dep_env(const char *service, char *name, size_t len)
{
	snprintf(name, len, "IOD_DEP_");
	size_t l = strlen(name);
	for (const char *p = service; *p && l + 1 < len; p++)
		name[l++] =
		    (*p == '-' || *p == '.') ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
	name[l] = 0;
	return getenv(name);
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: iod demo-worker --role parameter-server|worker [options]\n\n"
	    "The built-in demo training workload (what examples/service-topology.yaml runs).\n"
	    "  --role R            parameter-server: hold a shard, serve pulls and pushes;\n"
	    "                      worker: pull, compute, push, report steps/s\n"
	    "  --port P            parameter-server: TCP port (default $IOD_PORT)\n"
	    "  --params N          parameter-server: shard size in floats (default 65536)\n"
	    "  --servers A,B       worker: parameter servers host:port (default from\n"
	    "                      $IOD_DEP_<PS_SERVICE>, set by the agent)\n"
	    "  --via-mesh          worker: dial $IOD_SVC_<PS_SERVICE>_ADDR, the service's\n"
	    "                      mesh VIP, when set (else the list above); first\n"
	    "                      $IOD_MESH_UNIX_DIR/<PS_SERVICE>.sock, the proxy's\n"
	    "                      AF_UNIX socket under service_mesh.transport shm\n"
	    "  --ps-service NAME   worker: the parameter servers' service\n"
	    "                      (default parameter-server)\n"
	    "  --compute-ms MS     worker: synthetic compute per step (default 10)\n"
	    "  --steps N           worker: stop after N steps (default: run until SIGTERM)\n"
	    "  --http-port P       serve GET /healthz and /metrics here (worker default\n"
	    "                      $IOD_PORT; parameter-server default none)\n"
	    "  --ckpt-dir DIR      parameter-server: checkpoint the shard here (libiod-ckpt,\n"
	    "                      default $IOD_CKPT_DIR) and restore the newest at start;\n"
	    "                      without it, the store the agent provisioned from the\n"
	    "                      spec's storage: ($IOD_CKPT_TIERS, $IOD_CKPT_CAPACITY)\n"
	    "  --ckpt-every N      parameter-server: a checkpoint every N updates (default 100)\n"
	    "  --ckpt-scrub MS     parameter-server: verify every checkpoint's chunks in the\n"
	    "                      background every MS ms (default 60000; 0 = never), each\n"
	    "                      result into its Checkpoint object with --ckpt-server\n"
	    "  --ckpt-scrub-rate SIZE  parameter-server: the scrub's bound per second\n"
	    "                      (default 64MiB)\n"
	    "  --state-bytes SIZE  parameter-server: this much optimizer state checkpointed\n"
	    "                      and restored with the shard, never sent to workers\n"
	    "                      (default 0; e.g. 1GiB)\n"
	    "  --allreduce xfer    worker: data parallel, no parameter servers: all-reduce the\n"
	    "                      gradient (--params int64) across this service's replicas\n"
	    "                      over libiod-xfer, peers found through the control plane,\n"
	    "                      checked exact each step (default $IOD_ALLREDUCE)\n"
	    "  --ranks N           with --allreduce: the replicas in the ring (default: the\n"
	    "                      entries of $IOD_PEERS, set by the agent)\n"
	    "  --xfer-transport T  with --allreduce: shm, tcp or auto (default\n"
	    "                      $IOD_XFER_TRANSPORT, else shm)\n"
	    "  --server ADDR       with --allreduce: the control plane (default: the client\n"
	    "                      config, $IOD_SERVER)\n");
}

int cmd_demo_worker(int argc, char **argv)
{
	static const struct option opts[] = {{"role", required_argument, 0, 'r'},
	                                     {"port", required_argument, 0, 'p'},
	                                     {"params", required_argument, 0, 'n'},
	                                     {"servers", required_argument, 0, 's'},
	                                     {"ps-service", required_argument, 0, 'S'},
	                                     {"compute-ms", required_argument, 0, 'c'},
	                                     {"steps", required_argument, 0, 'k'},
	                                     {"http-port", required_argument, 0, 'H'},
	                                     {"via-mesh", no_argument, 0, 'V'},
	                                     {"ckpt-dir", required_argument, 0, 'C'},
	                                     {"ckpt-every", required_argument, 0, 'E'},
	                                     {"ckpt-server", required_argument, 0, 'G'},
	                                     {"ckpt-replicas", required_argument, 0, 'R'},
	                                     {"ckpt-scrub", required_argument, 0, 1001},
	                                     {"ckpt-scrub-rate", required_argument, 0, 1002},
	                                     {"state-bytes", required_argument, 0, 1003},
	                                     {"allreduce", required_argument, 0, 'A'},
	                                     {"ranks", required_argument, 0, 'N'},
	                                     {"xfer-transport", required_argument, 0, 'T'},
	                                     {"server", required_argument, 0, 'P'},
	                                     {"help", no_argument, 0, 'h'},
	                                     {0, 0, 0, 0}};
	const char *role = NULL, *servers = NULL, *ps_service = "parameter-server";
	const char *env_port = getenv("IOD_PORT");
	long port = env_port ? atol(env_port) : 0, http_port = -1, params = 65536, cms = 10;
	unsigned long long steps = 0, ckpt_every = 100;
	uint64_t scrub_ms = 60000, scrub_rate = 0, state_bytes = 0;
	struct iod_err e = {0};
	const char *ckpt_dir = getenv("IOD_CKPT_DIR"), *ckpt_server = NULL;
	const char *env_reps = getenv("IOD_CKPT_REPLICAS");
	long ckpt_replicas = env_reps && env_reps[0] ? atol(env_reps) : 1;
	long ranks = 0;
	const char *allreduce = getenv("IOD_ALLREDUCE"), *xfer_t = getenv("IOD_XFER_TRANSPORT");
	const char *api_server = NULL;
	bool via_mesh = false;
	int o;

	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'r': role = optarg; break;
		case 'p': port = atol(optarg); break;
		case 'n': params = atol(optarg); break;
		case 's': servers = optarg; break;
		case 'S': ps_service = optarg; break;
		case 'c': cms = atol(optarg); break;
		case 'k': steps = strtoull(optarg, NULL, 10); break;
		case 'H': http_port = atol(optarg); break;
		case 'V': via_mesh = true; break;
		case 'C':
			/* the flag's one directory, not the agent's store */
			ckpt_dir = optarg;
			unsetenv("IOD_CKPT_TIERS");
			break;
		case 1001: scrub_ms = strtoull(optarg, NULL, 10); break;
		case 1002:
			if (iod_parse_size(optarg, &scrub_rate, &e) || !scrub_rate)
				return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
				                    "--ckpt-scrub-rate %s: %s", optarg,
				                    e.msg[0] ? e.msg : "must be > 0");
			break;
		case 1003:
			if (iod_parse_size(optarg, &state_bytes, &e) ||
			    state_bytes > IOD_DEMO_STATE_BYTES_MAX)
				return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
				                    "--state-bytes %s: %s", optarg,
				                    e.msg[0] ? e.msg : "at most 16GiB");
			break;
		case 'E': ckpt_every = strtoull(optarg, NULL, 10); break;
		case 'G': ckpt_server = optarg; break;
		case 'R': ckpt_replicas = atol(optarg); break;
		case 'A': allreduce = optarg; break;
		case 'N': ranks = atol(optarg); break;
		case 'T': xfer_t = optarg; break;
		case 'P': api_server = optarg; break;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (!role || (strcmp(role, "parameter-server") && strcmp(role, "worker")))
		return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
		                    "--role must be parameter-server or worker");
	if (port < 0 || port > 65535 || http_port > 65535 || cms < 0 || cms > 60000)
		return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
		                    "ports must be 0..65535 and --compute-ms 0..60000");
	if (params < 1 || params > (long)IOD_DEMO_PARAMS_MAX)
		return iod_cli_fail("demo-worker", IOD_EXIT_INVALID, "--params must be 1..%u",
		                    IOD_DEMO_PARAMS_MAX);
	if (ckpt_every < 1 || ckpt_every > 1000000000ull)
		return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
		                    "--ckpt-every must be 1..1000000000 updates");
	if (ckpt_replicas < 1 || ckpt_replicas > 7)
		return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
		                    "--ckpt-replicas must be 1..7");
	struct iod_demo_opts d = {.role = role,
	                          .ckpt_dir = ckpt_dir && ckpt_dir[0] ? ckpt_dir : NULL,
	                          .ckpt_every = ckpt_every,
	                          .ckpt_server = ckpt_server,
	                          .ckpt_replicas = (uint32_t)ckpt_replicas,
	                          .ckpt_scrub_ms = scrub_ms,
	                          .ckpt_scrub_rate = scrub_rate,
	                          .state_bytes = state_bytes,
	                          .port = (uint16_t)port,
	                          .params = (uint32_t)params,
	                          .compute_ns = (uint64_t)cms * IOD_NS_PER_MS,
	                          .steps = steps,
	                          .http_port = (int)http_port};
	if (!strcmp(role, "parameter-server")) {
		if (!port)
			return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
			                    "parameter-server needs --port or $IOD_PORT");
		return iod_demo_run(&d);
	}
	if (allreduce && allreduce[0]) {
		if (strcmp(allreduce, "xfer"))
			return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
			                    "--allreduce %s: the one there is: xfer", allreduce);
		const char *peers = getenv("IOD_PEERS");
		if (!ranks && peers && peers[0]) {
			ranks = 1;
			for (const char *p = peers; *p; p++)
				ranks += *p == ',';
		}
		if (ranks < 2 || ranks > IOD_XFER_PEERS_MAX)
			return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
			                    "--allreduce xfer needs --ranks 2..%d (or $IOD_PEERS)",
			                    IOD_XFER_PEERS_MAX);
		d.allreduce_xfer = true;
		d.ranks = (uint32_t)ranks;
		d.xfer_transport = xfer_t && xfer_t[0] ? xfer_t : "shm";
		d.api_server = api_server;
		d.http_port = (int)(http_port < 0 ? port : http_port);
		return iod_demo_run(&d);
	}
	char name[128];
	char upath[108];
	if (!servers && via_mesh && !iod_mesh_env_name(ps_service, name, sizeof(name)) &&
	    getenv(name) && getenv(name)[0]) {
		servers = getenv(name);
		/* and the proxy's AF_UNIX socket first, while the transport is shm */
		const char *ud = getenv("IOD_MESH_UNIX_DIR");
		if (ud && ud[0] && !iod_mesh_unix_path(ud, ps_service, false, upath, sizeof(upath)))
			d.mesh_unix = upath;
	}
	if (!servers)
		servers = dep_env(ps_service, name, sizeof(name));
	if (!servers || !servers[0])
		return iod_cli_fail("demo-worker", IOD_EXIT_INVALID,
		                    "no parameter servers: pass --servers host:port,... or run it "
		                    "under the agent with depends_on: [%s] (sets %s)",
		                    ps_service, name);
	d.servers = servers;
	d.http_port = (int)(http_port < 0 ? port : http_port);
	return iod_demo_run(&d);
}
