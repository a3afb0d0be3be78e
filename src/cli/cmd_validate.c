/*
 * cmd_validate.c: `iod validate -f FILE [-o text|json]`: load a spec, report
 * every error as file:line:col, or print the spec normalized to base units.
 *
 * A thin shell over spec/: it parses options, calls iod_spec_load_file and
 * prints. It never changes anything and never talks to a cluster.
 */
#include "cli.h"
#include "iod/spec.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod validate -f FILE [-o text|json]\n\n"
	           "Check a spec file (services, resources, storage tiers, service mesh) and\n"
	           "print it normalized: sizes in bytes, bandwidths in bits/s, durations in ns,\n"
	           "defaults filled in. Every error is reported as FILE:LINE:COL: message.\n\n"
	           "options:\n"
	           "  -f, --file FILE     the spec to check; - reads standard input\n"
	           "  -o, --output FMT    text (a readable summary, the default) or json\n"
	           "  -q, --quiet         print nothing when the spec is valid\n"
	           "  -h, --help          this help\n\n"
	           "exit codes: 0 valid; 2 an invalid spec, bad usage, or a file that is missing\n"
	           "or unreadable; 1 an I/O failure while reading.\n"
	           "The language is described in docs/spec.md.\n");
}

static const char *const type_names[] = {"stateless", "stateful"};
static const char *const spread_names[] = {"default", "spread", "pack"};
static const char *const anti_names[] = {"none", "node", "rack", "zone"};
static const char *const link_names[] = {"any", "nvlink", "pcie"};
static const char *const numa_names[] = {"any", "single", "none", "restricted"};
static const char *const restart_names[] = {"always", "on-failure", "never"};
static const char *const transport_names[] = {"tcp", "shm", "rdma"};

/* Sizes as users write them: decimal when exact, else binary when exact,
 * else decimal with the exact byte count. */
static void fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const bin[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	char dec[48];

	iod_format_size(bytes, dec, sizeof(dec));
	if (!strchr(dec, '.')) {
		snprintf(buf, len, "%s", dec);
		return;
	}
	for (int i = 4; i >= 0; i--) {
		uint64_t unit = 1ull << (10 * (i + 1));
		if (bytes >= unit && bytes % unit == 0) {
			snprintf(buf, len, "%llu %s", (unsigned long long)(bytes / unit), bin[i]);
			return;
		}
	}
	snprintf(buf, len, "%s (%llu bytes)", dec, (unsigned long long)bytes);
}

static void print_network(const char *indent, const struct iod_spec_network *n)
{
	char b[64];

	if (!n->bandwidth_bps && !n->has_latency)
		return;
	printf("%snetwork:", indent);
	if (n->bandwidth_bps) {
		iod_format_bandwidth(n->bandwidth_bps, b, sizeof(b));
		printf(" bandwidth >= %s", b);
	}
	if (n->has_latency) {
		iod_format_duration(n->latency_ns.value, b, sizeof(b));
		printf("%s latency %s %s", n->bandwidth_bps ? "," : "",
		       iod_cmp_name(n->latency_ns.op), b);
	}
	printf("\n");
}

static void print_resources(const char *indent, const char *label,
                            const struct iod_spec_resources *r)
{
	char b[64];

	printf("%s%s: %u GPU%s", indent, label, (unsigned)r->gpu, r->gpu == 1 ? "" : "s");
	if (r->gpu_mem_bytes) {
		fmt_size(r->gpu_mem_bytes, b, sizeof(b));
		printf(" (%s each)", b);
	}
	if (r->cpu_millis) {
		char c[24];
		snprintf(c, sizeof(c), "%u.%03u", (unsigned)(r->cpu_millis / 1000),
		         (unsigned)(r->cpu_millis % 1000));
		size_t n = strlen(c);
		while (c[n - 1] == '0')
			c[--n] = 0;
		if (c[n - 1] == '.')
			c[--n] = 0;
		printf(", %s CPU%s", c, r->cpu_millis == 1000 ? "" : "s");
	}
	if (r->mem_bytes) {
		fmt_size(r->mem_bytes, b, sizeof(b));
		printf(", %s memory", b);
	}
	printf("\n");
	if (r->compute.type != IOD_COMPUTE_NONE) {
		printf("%scompute: %u x %s", indent, (unsigned)r->compute.count,
		       iod_compute_type_name(r->compute.type));
		if (r->compute.mem_bytes) {
			fmt_size(r->compute.mem_bytes, b, sizeof(b));
			printf(", %s each", b);
		}
		printf("\n");
	}
	print_network(indent, &r->network);
}

static void print_service(const struct iod_spec_service *s)
{
	char a[64], b[64];

	printf("\nservice %s (%s), %u replica%s%s\n", s->name, type_names[s->type],
	       (unsigned)s->replicas, s->replicas == 1 ? "" : "s", s->gang ? ", gang" : "");
	print_resources("  ", "per replica", &s->res);
	printf("  placement: strategy %s, anti-affinity %s, gpu_link %s, numa %s\n",
	       spread_names[s->placement.spread], anti_names[s->placement.anti],
	       link_names[s->placement.gpu_link], numa_names[s->placement.numa]);
	printf("  restart: %s\n", restart_names[s->restart]);
	if (s->command) {
		printf("  command: %s", s->command);
		for (uint32_t i = 0; i < s->args_n; i++)
			printf(" %s", s->args[i]);
		printf("\n");
	}
	for (uint32_t i = 0; i < s->env_n; i++)
		printf("  env: %s=%s\n", s->env[i].name, s->env[i].value);
	if (s->ports_n) {
		printf("  ports:");
		for (uint32_t i = 0; i < s->ports_n; i++) {
			printf(" %u/%s", (unsigned)s->ports[i].port,
			       s->ports[i].proto == IOD_PROTO_UDP ? "udp" : "tcp");
			if (s->ports[i].name)
				printf(" (%s)", s->ports[i].name);
		}
		printf("\n");
	}
	if (s->health.kind != IOD_HEALTH_NONE) {
		iod_format_duration(s->health.interval_ns, a, sizeof(a));
		iod_format_duration(s->health.timeout_ns, b, sizeof(b));
		printf("  health: ");
		if (s->health.kind == IOD_HEALTH_EXEC)
			printf("exec \"%s\"", s->health.command);
		else if (s->health.kind == IOD_HEALTH_TCP)
			printf("tcp port %u", (unsigned)s->health.port);
		else
			printf("http port %u path %s", (unsigned)s->health.port, s->health.path);
		printf(" every %s, timeout %s, healthy after %u, unhealthy after %u\n", a, b,
		       (unsigned)s->health.healthy_threshold,
		       (unsigned)s->health.unhealthy_threshold);
	}
	if (s->depends_n) {
		printf("  depends on:");
		for (uint32_t i = 0; i < s->depends_n; i++)
			printf(" %s", s->depends_on[i]);
		printf("\n");
	}
}

static void print_text(const char *name, const struct iod_spec *s)
{
	uint64_t gpus = 0;

	for (uint32_t i = 0; i < s->services_n; i++)
		gpus += (uint64_t)s->services[i].replicas * s->services[i].res.gpu;
	printf("%s: valid", name);
	if (s->services_n)
		printf(": %u service%s, %llu GPUs in all", (unsigned)s->services_n,
		       s->services_n == 1 ? "" : "s", (unsigned long long)gpus);
	printf("\n");
	for (uint32_t i = 0; i < s->services_n; i++)
		print_service(&s->services[i]);
	if (s->has_resources) {
		printf("\nresources:\n");
		print_resources("  ", "request", &s->resources);
	}
	if (s->tiers_n) {
		printf("\nstorage tiers:\n");
		for (uint32_t i = 0; i < s->tiers_n; i++)
			printf("  %-7s %u.%02u%%\n", s->tiers[i].medium,
			       (unsigned)(s->tiers[i].quota_bp / 100),
			       (unsigned)(s->tiers[i].quota_bp % 100));
	}
	if (s->has_mesh)
		printf("\nservice mesh: transport %s\n", transport_names[s->transport]);
}

int cmd_validate(int argc, char **argv)
{
	static const struct option opts[] = {{"file", required_argument, NULL, 'f'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {"quiet", no_argument, NULL, 'q'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const formats[] = {"text", "json", NULL};
	const char *file = NULL;
	enum iod_output out = IOD_OUT_TEXT;
	bool quiet = false;
	int c;

	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return IOD_EXIT_OK;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":f:o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'f': file = optarg; break;
		case 'o':
			if (iod_cli_output("validate", optarg, formats, &out))
				return IOD_EXIT_INVALID;
			break;
		case 'q': quiet = true; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		case ':':
			return iod_cli_fail("validate", IOD_EXIT_INVALID,
			                    "option %s needs a value; run `iod validate --help`",
			                    argv[optind - 1]);
		default:
			return iod_cli_fail("validate", IOD_EXIT_INVALID,
			                    "unknown option %s; run `iod validate --help`",
			                    argv[optind - 1]);
		}
	}
	if (optind < argc && !file && optind + 1 == argc)
		file = argv[optind++]; /* `iod validate FILE` is forgiven */
	if (optind < argc)
		return iod_cli_fail("validate", IOD_EXIT_INVALID,
		                    "unexpected argument \"%s\"; run `iod validate --help`",
		                    argv[optind]);
	if (!file)
		return iod_cli_fail("validate", IOD_EXIT_INVALID,
		                    "no spec given; use -f FILE (or -f - for standard input)");

	struct iod_spec *s = NULL;
	struct iod_spec_diags *d = calloc(1, sizeof(*d));
	const char *name = strcmp(file, "-") ? file : "<stdin>";
	if (!d)
		return iod_cli_fail("validate", IOD_EXIT_ERROR, "out of memory");
	int rc = iod_spec_load_file(file, &s, d);
	if (rc) {
		iod_spec_diags_print(d, name, stderr);
		if (rc == -EINVAL)
			fprintf(stderr, "%s: invalid spec (%u error%s)\n", name, (unsigned)d->total,
			        d->total == 1 ? "" : "s");
		free(d);
		if (rc == -EIO || rc == -ENOMEM)
			return IOD_EXIT_ERROR;
		return IOD_EXIT_INVALID;
	}
	free(d);
	if (!quiet) {
		if (out == IOD_OUT_JSON) {
			json_t *j = iod_spec_to_json(s);
			iod_json_print(stdout, j, false);
			json_decref(j);
		} else {
			print_text(name, s);
		}
	}
	iod_spec_free(s);
	return IOD_EXIT_OK;
}
