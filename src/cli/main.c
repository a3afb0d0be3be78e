/*
 * main.c: the `iod` binary: global options, the command table, help.
 *
 * Each command lives in src/cli/cmd_<name>.c as `cmd_<name>()`. The table
 * below names every command iod has (X) or will have (P, planned). A built
 * command is a strong reference: a misnamed or missing cmd_<name> is a link
 * error, never a silent "not built". A planned one has no function yet;
 * running it says so and exits 3. Building one moves its row from P to X.
 */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* name, function, one-line summary, issue that builds it. */
#define IOD_COMMANDS(X, P)                                                                  \
	X(init, "create a cluster CA, an admin credential and a client context")            \
	X(cert, "issue certificates from the cluster CA; show a certificate")               \
	X(token, "create, list and revoke bearer tokens (and node join tokens)")            \
	X(revoke, "refuse every credential of a node, user or server")                      \
	X(secret, "store a secret sealed in the cluster (services mount it)")               \
	X(policy, "apply, get and delete security groups of the overlay")                   \
	X(audit, "show the audit trail of API writes and refusals")                         \
	X(validate, "check a spec file and print it normalized")                            \
	X(topo, "show a node's hardware topology (GPUs, NVLink, PCIe, NUMA, NICs)")         \
	X(schedule, "place a spec onto modelled nodes without a cluster")                   \
	X(server, "run a control-plane member (Raft + state + API)")                        \
	X(agent, "run a node agent (topology, replicas, health)")                           \
	X(dev, "run a server and an agent in one process")                                  \
	X(up, "start a local multi-node cluster on this machine")                           \
	X(down, "stop the local cluster started by `iod up`")                               \
	X(deploy, "deploy a service topology to the cluster")                               \
	X(get, "list nodes, services, replicas or endpoints")                               \
	X(delete, "delete a service")                                                       \
	X(status, "show the control plane's status")                                        \
	X(explain, "show why a replica was placed where it is")                             \
	X(events, "show the cluster's event stream")                                        \
	X(logs, "show a replica's output")                                                  \
	X(top, "live resource state of the cluster")                                        \
	X(metrics, "read a node agent's telemetry (/metrics) over its mTLS listener")       \
	X(trace, "live call chains through the service mesh")                               \
	X(viz, "network and topology views")                                                \
	X(chaos, "inject faults and watch recovery")                                        \
	X(sim, "simulate a cluster and fabric in virtual time")                             \
	X(config, "get and set cluster configuration")                                      \
	X(extender, "the kube-scheduler extender (filter/prioritize) over iod's scheduler") \
	X(cni, "the CNI 1.1 plugin (CNI_COMMAND=... iod) and `iod cni install`")            \
	X(devplugin, "the Kubernetes device plugin for iod.dev/gpu and iod.dev/dpu (gRPC)") \
	X(dp, "run or inspect the data plane")                                              \
	X(mesh, "service-mesh commands (`iod mesh deploy -f FILE`)")                        \
	X(proxy, "the node's mesh proxy, standalone (--config FILE)")                       \
	X(xfer, "zero-copy transfers over libiod-xfer (`iod xfer ring`: an all-reduce)")    \
	X(demo_worker, "the built-in demo training workload")

#define X(name, summary) int cmd_##name(int argc, char **argv);
#define P(name, summary)
IOD_COMMANDS(X, P)
#undef X
#undef P

struct command {
	const char *name;    /* as typed: "demo-worker" */
	iod_cmd_fn fn;       /* NULL for a planned command */
	const char *summary; /* for `iod --help` */
};

static struct command commands[] = {
#define X(name, summary) {#name, cmd_##name, summary},
#define P(name, summary) {#name, NULL, summary},
    IOD_COMMANDS(X, P)
#undef X
#undef P
};

/* The names as typed: demo_worker is typed demo-worker. */
static void bind_commands(void)
{
	static char names[IOD_ARRAY_LEN(commands)][32];
	for (size_t i = 0; i < IOD_ARRAY_LEN(commands); i++) {
		snprintf(names[i], sizeof(names[i]), "%s", commands[i].name);
		for (char *p = names[i]; *p; p++)
			if (*p == '_')
				*p = '-';
		commands[i].name = names[i];
	}
}

static void usage(FILE *f)
{
	fprintf(f, "iod - an infrastructure operating system for GPU/DPU clusters\n\n"
	           "usage: iod [--log-level debug|info|warn|error] [--log-format text|json]\n"
	           "           <command> [options]\n\n"
	           "commands:\n");
	for (size_t i = 0; i < IOD_ARRAY_LEN(commands); i++)
		fprintf(f, "  %-12s %s%s\n", commands[i].name, commands[i].summary,
		        commands[i].fn ? "" : " (not built yet)");
	fprintf(f, "\n  help CMD     help for a command; `iod help exit-codes`\n"
	           "  --version    print the version\n\n"
	           "Every command takes --help; commands that print data take -o json.\n");
}

static void exit_codes(void)
{
	printf("iod exit codes:\n");
#define X(n, v, d) printf("  %d  %s\n", v, d);
	IOD_EXIT_CODES(X)
#undef X
}

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < IOD_ARRAY_LEN(commands); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static int unknown(const char *name)
{
	const char *names[IOD_ARRAY_LEN(commands)];
	for (size_t i = 0; i < IOD_ARRAY_LEN(commands); i++)
		names[i] = commands[i].name;
	const char *s = iod_suggest(name, names, IOD_ARRAY_LEN(names));
	fprintf(stderr, "iod: unknown command \"%s\"", name);
	if (s)
		fprintf(stderr, "; did you mean \"%s\"?", s);
	fprintf(stderr, "\nrun `iod --help` for the list of commands\n");
	return IOD_EXIT_INVALID;
}

static int run(const struct command *c, int argc, char **argv)
{
	if (!c->fn) {
		fprintf(stderr, "iod %s: not built in this version of iod (%s)\n", c->name,
		        c->summary);
		return IOD_EXIT_NOT_BUILT;
	}
	optind = 1; /* each command parses its own options from argv[0] */
	return c->fn(argc, argv);
}

int main(int argc, char **argv)
{
	int i = 1;

	bind_commands();
	/* a container runtime runs the plugin with CNI_COMMAND and no arguments */
	if (getenv("CNI_COMMAND") && argc == 1)
		return cmd_cni(argc, argv);
	while (i < argc && argv[i][0] == '-') {
		const char *a = argv[i];
		if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("iod %s\n", IOD_VERSION);
			return 0;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--log-level") && i + 1 < argc) {
			enum iod_log_level l;
			if (iod_log_level_parse(argv[i + 1], &l)) {
				fprintf(stderr,
				        "iod: --log-level must be debug, info, warn or error\n");
				return IOD_EXIT_INVALID;
			}
			iod_log_set_level(l);
			i += 2;
		} else if (!strcmp(a, "--log-format") && i + 1 < argc) {
			if (!strcmp(argv[i + 1], "json"))
				iod_log_set_format(IOD_LOG_JSON);
			else if (!strcmp(argv[i + 1], "text"))
				iod_log_set_format(IOD_LOG_TEXT);
			else {
				fprintf(stderr, "iod: --log-format must be text or json\n");
				return IOD_EXIT_INVALID;
			}
			i += 2;
		} else if (!strcmp(a, "-v")) {
			iod_log_set_level(IOD_LOG_DEBUG);
			i++;
		} else {
			fprintf(stderr, "iod: unknown option %s\nrun `iod --help`\n", a);
			return IOD_EXIT_INVALID;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	if (!strcmp(argv[i], "help")) {
		if (i + 1 >= argc) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i + 1], "exit-codes")) {
			exit_codes();
			return 0;
		}
		const struct command *c = find(argv[i + 1]);
		if (!c)
			return unknown(argv[i + 1]);
		char *hargv[] = {argv[i + 1], "--help", NULL};
		return run(c, 2, hargv);
	}
	const struct command *c = find(argv[i]);
	if (!c)
		return unknown(argv[i]);
	return run(c, argc - i, argv + i);
}
