/*
 * cmd_topo_cluster.c: `iod topo --cluster`: the cluster's topology for other
 * schedulers: Topograph-style Kubernetes node labels (as `kubectl label`
 * commands or JSON) and Slurm's topology.yaml, from a modelled cluster laid
 * out as `iod schedule` lays it out (n0..nN-1, contiguous racks, racks in
 * zones). A thin shell over src/k8s/topo_export.c. docs/kubernetes.md.
 */
#include "cli.h"
#include "iod/k8s.h"
#include "iod/objects.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: iod topo --cluster --nodes N --model NAME[,NAME...] [--racks R] [--zones Z]\n"
	    "                [-o labels|json|slurm]\n\n"
	    "The cluster's topology for other schedulers. Nodes n0..nN-1 take the models\n"
	    "round-robin; --racks R puts them in R contiguous racks (default: a rack per\n"
	    "node) and --zones Z the racks in Z zones (default 1), as `iod schedule`.\n"
	    "A rack is its nodes' leaf switch, a zone the spine tier, a core joins zones.\n\n"
	    "  -o labels   `kubectl label node` commands with Topograph's keys\n"
	    "              (network.topology.nvidia.com/accelerator|leaf|spine|core) and\n"
	    "              iod.dev/gpu.count, gpu.nvlink-islands, gpu.nvlink-largest,\n"
	    "              numa.count, nic.count, model (default)\n"
	    "  -o json     {node: {label: value}}\n"
	    "  -o slurm    Slurm topology.yaml: tree (cluster_default) and block (a block\n"
	    "              per rack)\n\n"
	    "Exit codes: 0 ok, 2 invalid input. See docs/kubernetes.md.\n");
}

struct cluster_opts {
	uint32_t nodes, racks, zones;
	const char *models, *out, *from;
};

static int parse_count(const char *s, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v == 0 || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int parse(int argc, char **argv, struct cluster_opts *o)
{
	static const struct option opts[] = {
	    {"cluster", no_argument, NULL, 'C'},     {"nodes", required_argument, NULL, 'n'},
	    {"model", required_argument, NULL, 'm'}, {"racks", required_argument, NULL, 'r'},
	    {"zones", required_argument, NULL, 'z'}, {"output", required_argument, NULL, 'o'},
	    {"from", required_argument, NULL, 'f'},  {NULL, 0, NULL, 0},
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:m:o:", opts, NULL)) != -1) {
		uint32_t *dst = c == 'n' ? &o->nodes : c == 'r' ? &o->racks : &o->zones;
		if (c == 'C')
			continue;
		if (c == 'm')
			o->models = optarg;
		else if (c == 'o')
			o->out = optarg;
		else if (c == 'f')
			o->from = optarg;
		else if (c == 'n' || c == 'r' || c == 'z') {
			if (parse_count(optarg, IOD_SCHED_NODES_MAX, dst))
				return iod_cli_fail("topo", IOD_EXIT_INVALID,
				                    "--%s %s: give a number from 1 to %u",
				                    c == 'n'   ? "nodes"
				                    : c == 'r' ? "racks"
				                               : "zones",
				                    optarg, IOD_SCHED_NODES_MAX);
		} else
			return IOD_EXIT_INVALID;
	}
	if (optind < argc)
		return iod_cli_fail("topo", IOD_EXIT_INVALID, "unexpected argument %s",
		                    argv[optind]);
	if (!o->from && (!o->nodes || !o->models))
		return iod_cli_fail(
		    "topo", IOD_EXIT_INVALID,
		    "--cluster needs --from FILE, or --nodes N and --model NAME[,...]");
	if (strcmp(o->out, "labels") && strcmp(o->out, "json") && strcmp(o->out, "slurm"))
		return iod_cli_fail("topo", IOD_EXIT_INVALID,
		                    "-o %s: --cluster prints labels, json or slurm", o->out);
	return 0;
}

/* The models, loaded once each (64 KiB apiece). */
static int load_models(const char *list, struct iod_topo_node *topo, uint32_t max, uint32_t *n)
{
	char buf[512];
	struct iod_err e = {0};
	*n = 0;
	if (iod_strlcpy(buf, list, sizeof(buf)))
		return iod_cli_fail("topo", IOD_EXIT_INVALID, "--model: list too long");
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (*n == max)
			return iod_cli_fail("topo", IOD_EXIT_INVALID, "--model: at most %u models",
			                    max);
		if (iod_topo_model_load(tok, &topo[*n], &e))
			return iod_cli_fail("topo", IOD_EXIT_INVALID, "--model %s: %s", tok, e.msg);
		(*n)++;
	}
	return *n ? 0 : iod_cli_fail("topo", IOD_EXIT_INVALID, "--model: no model named");
}

static void print_labels(const json_t *all)
{
	for (void *it = json_object_iter((json_t *)all); it;
	     it = json_object_iter_next((json_t *)all, it)) {
		json_t *labels = json_object_iter_value(it);
		printf("kubectl label node %s --overwrite", json_object_iter_key(it));
		for (void *l = json_object_iter(labels); l; l = json_object_iter_next(labels, l))
			printf(" %s=%s", json_object_iter_key(l),
			       json_string_value(json_object_iter_value(l)));
		printf("\n");
	}
}

static int emit(const struct cluster_opts *o, const struct iod_k8s_node *nodes)
{
	struct iod_err e = {0};
	if (!strcmp(o->out, "slurm")) {
		struct iod_buf b;
		iod_buf_init(&b);
		int rc = iod_slurm_topology(nodes, o->nodes, &b, &e);
		if (!rc)
			fwrite(b.data, 1, b.len, stdout);
		iod_buf_free(&b);
		return rc ? iod_cli_fail("topo", IOD_EXIT_INVALID, "%s", e.msg) : IOD_EXIT_OK;
	}
	json_t *all = iod_k8s_labels(nodes, o->nodes);
	if (!strcmp(o->out, "json"))
		iod_json_print(stdout, all, false);
	else
		print_labels(all);
	json_decref(all);
	return IOD_EXIT_OK;
}

struct from_nodes {
	struct iod_k8s_node *nodes;
	struct iod_topo_node *topo;
	char (*names)[3][IOD_NAME_MAX];
	uint32_t n;
};

/* One Node object of `iod get nodes -o json` into slot i. */
static int from_one(const json_t *item, struct from_nodes *f, uint32_t i, struct iod_err *e)
{
	struct iod_obj_node on;
	const char *name = NULL;
	if (iod_json_get_str(item, "name", &name) ||
	    iod_strlcpy(f->names[i][0], name, IOD_NAME_MAX))
		return iod_err_set(e, -EINVAL, "items[%u]: no name", i);
	if (iod_obj_node_from_json(json_object_get(item, "value"), &on, e))
		return iod_err_wrap(e, "node %s", name);
	int rc = on.topology ? iod_topo_from_json(on.topology, &f->topo[i], e)
	                     : iod_topo_model_load(on.model, &f->topo[i], e);
	iod_strlcpy(f->names[i][1], iod_obj_node_rack(&on)[0] ? iod_obj_node_rack(&on) : name,
	            IOD_NAME_MAX);
	iod_strlcpy(f->names[i][2], on.zone[0] ? on.zone : "default", IOD_NAME_MAX);
	iod_obj_node_free(&on);
	if (rc)
		return iod_err_wrap(e, "node %s: topology", name);
	f->nodes[i] =
	    (struct iod_k8s_node){f->names[i][0], f->names[i][1], f->names[i][2], &f->topo[i]};
	return 0;
}

static int from_file(const char *path, struct from_nodes *f, struct iod_err *e)
{
	struct iod_buf b;
	json_t *doc = NULL;
	iod_buf_init(&b);
	int rc = iod_buf_read_file(&b, strcmp(path, "-") ? path : "/dev/stdin", 256u << 20, e);
	rc = rc ? rc : iod_json_parse(b.data ? b.data : "", b.len, &doc, e);
	iod_buf_free(&b);
	const json_t *items = json_is_array(doc) ? doc : json_object_get(doc, "items");
	if (!rc && (!json_is_array(items) || !json_array_size(items) ||
	            json_array_size(items) > IOD_SCHED_NODES_MAX))
		rc = iod_err_set(e, -EINVAL,
		                 "%s: want `iod get nodes -o json` ({\"items\": [...]})", path);
	f->n = rc ? 0 : (uint32_t)json_array_size(items);
	f->nodes = calloc(f->n + 1, sizeof(*f->nodes));
	f->topo = calloc(f->n + 1, sizeof(*f->topo));
	f->names = calloc(f->n + 1, sizeof(*f->names));
	if (!rc && (!f->nodes || !f->topo || !f->names))
		rc = iod_err_set(e, -ENOMEM, "out of memory");
	for (uint32_t i = 0; !rc && i < f->n; i++)
		rc = from_one(json_array_get(items, i), f, i, e);
	json_decref(doc);
	return rc;
}

static int run_from(struct cluster_opts *o)
{
	struct from_nodes f = {0};
	struct iod_err e = {0};
	int rc = from_file(o->from, &f, &e);
	if (rc)
		rc = iod_cli_fail("topo", IOD_EXIT_INVALID, "--from %s", e.msg);
	else {
		o->nodes = f.n;
		rc = emit(o, f.nodes);
	}
	free(f.nodes);
	free(f.topo);
	free(f.names);
	return rc;
}

int iod_cli_topo_cluster(int argc, char **argv);
int iod_cli_topo_cluster(int argc, char **argv)
{
	struct cluster_opts o = {.out = "labels"};
	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return IOD_EXIT_OK;
	}
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc;
	if (o.from)
		return run_from(&o);
	enum { MODELS = 8 };
	struct iod_topo_node *topo = calloc(MODELS, sizeof(*topo));
	struct iod_k8s_node *nodes = calloc(o.nodes, sizeof(*nodes));
	char(*names)[3][32] = calloc(o.nodes, sizeof(*names));
	uint32_t nm = 0;
	if (!topo || !nodes || !names)
		rc = iod_cli_fail("topo", IOD_EXIT_ERROR, "out of memory");
	if (!rc)
		rc = load_models(o.models, topo, MODELS, &nm);
	uint32_t racks = o.racks ? IOD_MIN(o.racks, o.nodes) : o.nodes;
	uint32_t zones = o.zones ? IOD_MIN(o.zones, racks) : 1;
	for (uint32_t i = 0; !rc && i < o.nodes; i++) { /* as cmd_schedule.c lays them out */
		uint32_t r = (uint32_t)((uint64_t)i * racks / o.nodes);
		snprintf(names[i][0], 32, "n%u", i);
		snprintf(names[i][1], 32, "rack%u", r);
		snprintf(names[i][2], 32, "zone%u", (uint32_t)((uint64_t)r * zones / racks));
		nodes[i] =
		    (struct iod_k8s_node){names[i][0], names[i][1], names[i][2], &topo[i % nm]};
	}
	if (!rc)
		rc = emit(&o, nodes);
	free(topo);
	free(nodes);
	free(names);
	return rc;
}
