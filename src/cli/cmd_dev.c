/*
 * cmd_dev.c: `iod dev`: the embedded default: one control-plane server and
 * one node agent in one process, data under --data-dir. The server (Raft,
 * state, API on 127.0.0.1:7400) runs on its own thread and libuv loop; the
 * agent runs on the main thread and follows it through the API like any
 * other agent. SIGTERM/SIGINT stop the agent (its replicas first), then the
 * process ends; the server's data is on disk (a write is acknowledged only
 * once persisted), so the next `iod dev` starts where this one stopped.
 */
#include "cli.h"
#include "iod/agent_run.h"
#include "iod/api.h"
#include "iod/topo.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod dev [--data-dir DIR] [--api HOST:PORT] [--name NODE]\n"
	           "               [--gpus N | --model NAME] [--no-sandbox]\n"
	           "               [--netns-subnet CIDR]\n\n"
	           "Run a control-plane server and a node agent in one process: a one-node\n"
	           "cluster for development. Then, in another shell: iod deploy -f FILE;\n"
	           "iod get replicas; iod logs REPLICA; iod events.\n\n"
	           "  --data-dir DIR   everything: raft/ (the server), replicas/, events.jsonl\n"
	           "                   (default ~/.local/share/iod)\n"
	           "  --api ADDR       the API address (default 127.0.0.1:7400)\n"
	           "  --name NODE      node name (default: the host name)\n"
	           "  --gpus N         simulate a generic node with N GPUs\n"
	           "  --model NAME     simulate a built-in model (default: discover this machine)\n"
	           "  --no-sandbox     run replicas as plain processes\n"
	           "  --netns-subnet CIDR  each replica in its own network namespace with an\n"
	           "                   address from CIDR (root only; see `iod agent --help`)\n");
}

struct server_run {
	struct iod_server_config cfg; /* the server's settings */
	struct iod_err e;             /* its error, if it fails */
	int rc;                       /* its result */
};

static void *server_main(void *arg)
{
	struct server_run *s = arg;
	s->rc = iod_api_server_run(&s->cfg, &s->e);
	if (s->rc)
		fprintf(stderr, "iod dev: server: %s\n", s->e.msg);
	return NULL;
}

int cmd_dev(int argc, char **argv)
{
	static const struct option opts[] = {{"data-dir", required_argument, 0, 'd'},
	                                     {"api", required_argument, 0, 'a'},
	                                     {"name", required_argument, 0, 'n'},
	                                     {"gpus", required_argument, 0, 'g'},
	                                     {"model", required_argument, 0, 'm'},
	                                     {"no-sandbox", no_argument, 0, 'S'},
	                                     {"netns-subnet", required_argument, 0, 'U'},
	                                     {"help", no_argument, 0, 'h'},
	                                     {0, 0, 0, 0}};
	struct server_run *srv = calloc(1, sizeof(*srv));
	struct iod_agent_config *ac = calloc(1, sizeof(*ac));
	struct iod_topo_node *tn = calloc(1, sizeof(*tn));
	char api[IOD_ADDR_MAX] = "127.0.0.1:7400";
	struct iod_err e = {0};
	long gpus = -1;
	int o, rc = IOD_EXIT_ERROR;

	if (!srv || !ac || !tn) {
		rc = iod_cli_fail("dev", IOD_EXIT_ERROR, "out of memory");
		goto out;
	}
	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		rc = 0;
		goto out;
	}
	iod_agent_config_default(ac);
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'd': snprintf(ac->data_dir, sizeof(ac->data_dir), "%s", optarg); break;
		case 'a': snprintf(api, sizeof(api), "%s", optarg); break;
		case 'n': snprintf(ac->name, sizeof(ac->name), "%s", optarg); break;
		case 'g': gpus = atol(optarg); break;
		case 'm': snprintf(ac->model, sizeof(ac->model), "%s", optarg); break;
		case 'S': ac->use_namespaces = false; break;
		case 'U': {
			struct iod_agent_ipam *m = calloc(1, sizeof(*m));
			int bad = !m || iod_agent_ipam_init(m, optarg, &e);
			free(m);
			if (bad) {
				rc = iod_cli_fail("dev", IOD_EXIT_INVALID, "--netns-subnet: %s",
				                  e.msg[0] ? e.msg : "out of memory");
				goto out;
			}
			snprintf(ac->netns_subnet, sizeof(ac->netns_subnet), "%s", optarg);
			break;
		}
		default:
			usage(stderr);
			rc = IOD_EXIT_INVALID;
			goto out;
		}
	}
	if (optind < argc) {
		rc = iod_cli_fail("dev", IOD_EXIT_INVALID, "unexpected argument %s", argv[optind]);
		goto out;
	}
	/* the hardware this node offers */
	if (ac->model[0] && gpus >= 0) {
		rc = iod_cli_fail("dev", IOD_EXIT_INVALID, "--gpus and --model are exclusive");
		goto out;
	}
	int trc = ac->model[0] ? iod_topo_model_load(ac->model, tn, &e)
	          : gpus >= 0  ? iod_topo_model_generic((unsigned)gpus, tn, &e)
	                       : iod_topo_discover(tn, &e);
	if (trc && (ac->model[0] || gpus >= 0)) {
		rc = iod_cli_fail("dev", IOD_EXIT_INVALID, "%s", e.msg);
		goto out;
	}
	if (!trc) {
		ac->gpus = iod_topo_gpu_count(tn);
		ac->cpus = tn->pus ? tn->pus : ac->cpus;
		ac->topology = iod_topo_to_json(tn);
		if (!ac->model[0])
			snprintf(ac->model, sizeof(ac->model), "%s",
			         gpus >= 0 ? tn->model : "host");
	}
	/* the server: its own Raft port next to the API's */
	const char *colon = strrchr(api, ':');
	if (!colon || atoi(colon + 1) <= 0 || atoi(colon + 1) > 65534) {
		rc = iod_cli_fail("dev", IOD_EXIT_INVALID, "--api must be HOST:PORT, not %s", api);
		goto out;
	}
	if (mkdir(ac->data_dir, 0755) && errno != EEXIST) {
		rc = iod_cli_fail("dev", IOD_EXIT_ERROR, "data dir %s: %s", ac->data_dir,
		                  strerror(errno));
		goto out;
	}
	iod_server_config_default(&srv->cfg);
	srv->cfg.id = 1;
	snprintf(srv->cfg.data_dir, sizeof(srv->cfg.data_dir), "%s/raft", ac->data_dir);
	snprintf(srv->cfg.api_addr, sizeof(srv->cfg.api_addr), "%s", api);
	snprintf(srv->cfg.raft_addr, sizeof(srv->cfg.raft_addr), "%.*s:%d", (int)(colon - api), api,
	         atoi(colon + 1) + 1);
	snprintf(ac->servers, sizeof(ac->servers), "%s", api);
	/* signals go to the agent's signalfd only: block them before the thread */
	sigset_t mask, old;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	pthread_t th;
	if (pthread_create(&th, NULL, server_main, srv)) {
		rc = iod_cli_fail("dev", IOD_EXIT_ERROR, "cannot start the server thread");
		goto out;
	}
	pthread_detach(th);
	fprintf(stderr,
	        "iod dev: server %s (data %s/raft), agent %s (%u GPUs, %s); Ctrl-C stops both\n",
	        api, ac->data_dir, ac->name, ac->gpus, ac->model);
	rc = iod_agent_run(ac, &e) ? iod_cli_fail("dev", IOD_EXIT_ERROR, "%s", e.msg) : 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (srv->rc)
		rc = IOD_EXIT_ERROR;
	/* the server thread ends with the process: its writes are already durable */
	json_decref(ac->topology);
	fflush(NULL);
	_exit(rc);
out:
	free(srv);
	free(ac);
	free(tn);
	return rc;
}
