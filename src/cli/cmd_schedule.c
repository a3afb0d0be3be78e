/*
 * cmd_schedule.c: `iod schedule -f FILE --nodes N (--model NAME | --gpus TOTAL)`:
 * place a spec onto modelled nodes without a cluster and print the placement
 * table, the replicas that do not fit with their reasons, and (on request)
 * every decision's top candidates.
 *
 * A thin shell: it loads the spec (spec/), builds node models (topo/),
 * reduces them to scheduler shapes and calls the pure scheduler core
 * (sched/). It never talks to a cluster and changes nothing.
 */
#include "cli.h"
#include "iod/sched.h"
#include "iod/spec.h"
#include "iod/topo.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: iod schedule -f FILE --nodes N (--model NAME[,NAME...] | --gpus TOTAL)\n"
	        "                    [--racks R] [--zones Z] [--strict] [--explain]\n"
	        "                    [--weights TERM=W,...] [--numa POLICY] [--rebalance MOVES]\n"
	        "                    [-o text|json]\n\n"
	        "Place every replica of a spec onto N modelled nodes, as the cluster's\n"
	        "scheduler would, and print where each replica goes (node, GPUs, CPUs,\n"
	        "memory NUMA node, NIC) and, for each replica that does not fit, why.\n"
	        "Replicas are named <service>-<ordinal>, ordinals from 0. Services are\n"
	        "placed in file order; what fits is placed unless --strict.\n\n"
	        "options:\n"
	        "  -f, --file FILE       the spec (services:) to place\n"
	        "  -n, --nodes N         number of nodes (n0 .. nN-1)\n"
	        "  -m, --model NAMES     node model(s) from `iod topo --model`; a comma list\n"
	        "                        is assigned round-robin (n0 gets the first)\n"
	        "  -g, --gpus TOTAL      TOTAL GPUs spread evenly: each node is the default\n"
	        "                        model generic-<TOTAL/N> (PCIe, NVLink-bridged pairs;\n"
	        "                        see docs/topology.md); --gpus 16 --nodes 4 = 4 x 4\n"
	        "      --racks R         put the nodes in R racks (contiguous; default: a\n"
	        "                        rack per node)\n"
	        "      --zones Z         put the racks in Z zones (default 1)\n"
	        "      --strict          all services or none (one transaction)\n"
	        "      --explain         show each decision's top candidates and terms\n"
	        "      --weights LIST    score weights, e.g. gpu-set=3,numa=2,frag=2,spread=3,\n"
	        "                        pack=1,nic=1 (the defaults)\n"
	        "      --numa POLICY     override every service's NUMA policy: none, best-effort,\n"
	        "                        restricted or single-numa-node (the spec's numa: any\n"
	        "                        is best-effort, single is single-numa-node)\n"
	        "      --rebalance M     afterwards, propose at most M moves that free whole\n"
	        "                        NVLink islands (not applied)\n"
	        "  -o, --output FMT      text (default) or json\n"
	        "  -h, --help            this help\n\n"
	        "exit codes: 0 every replica placed; 4 some replicas not placed (listed with\n"
	        "reasons); 2 invalid spec or usage. See docs/scheduler.md.\n");
}

static int parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	v = strtoul(s, &end, 10);
	if (*end || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int parse_weights(const char *s, struct iod_sched_weights *w)
{
	char buf[256];
	if (iod_strlcpy(buf, s, sizeof(buf)))
		return -EINVAL;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		uint32_t v;
		if (!eq)
			return -EINVAL;
		*eq = 0;
		if (parse_u32(eq + 1, &v) || v > 1000)
			return -EINVAL;
		unsigned t;
		for (t = 0; t < IOD_SCHED_TERMS_N; t++)
			if (!strcmp(tok, iod_sched_term_name(t)))
				break;
		if (t == IOD_SCHED_TERMS_N)
			return -EINVAL;
		w->w[t] = v;
	}
	return 0;
}

static void print_explain(const struct iod_sched_cluster *c, const struct iod_sched_placement *p)
{
	char gl[128];
	printf("%s: %u nodes scored, %u feasible\n", p->name, p->explain.evaluated,
	       p->explain.feasible);
	for (uint32_t i = 0; i < p->explain.cand_n; i++) {
		const struct iod_sched_candidate *cd = &p->explain.cand[i];
		iod_sched_gpus_format(cd->gpu_mask, gl, sizeof(gl));
		printf("  %s %-10s total %-6lld", i == 0 ? "*" : " ",
		       iod_sched_node_name(c, cd->node), (long long)cd->total);
		for (unsigned t = 0; t < IOD_SCHED_TERMS_N; t++)
			printf(" %s=%d", iod_sched_term_name(t), cd->terms[t]);
		printf("  [%s]\n", gl);
	}
}

struct opts {
	const char *file, *models, *weights;
	uint32_t nodes, gpus, racks, zones, rebalance;
	bool have_gpus, strict, explain, rebalance_set, have_numa;
	enum iod_sched_numa numa;
	enum iod_output out;
};

/* Build the cluster: shapes for each distinct model, then the nodes. */
static int build_cluster(const struct opts *o, struct iod_sched_cluster *c, char *model_desc,
                         size_t desc_len)
{
	static struct iod_topo_node topo; /* 64 KiB: not on the stack */
	struct iod_sched_shape shape;
	struct iod_err e = {0};
	char names[8][IOD_NAME_MAX];
	uint32_t shape_ids[8], n_models = 0;

	if (o->have_gpus) {
		if (o->gpus % o->nodes)
			return iod_cli_fail(
			    "schedule", IOD_EXIT_INVALID,
			    "--gpus %u does not divide evenly over --nodes %u; give a "
			    "multiple of %u, or --model",
			    o->gpus, o->nodes, o->nodes);
		if (iod_topo_model_generic(o->gpus / o->nodes, &topo, &e))
			return iod_cli_fail("schedule", IOD_EXIT_INVALID,
			                    "--gpus %u --nodes %u: %s", o->gpus, o->nodes, e.msg);
		if (iod_sched_shape_from_topo(&topo, &shape, &e) ||
		    iod_sched_shape_add(c, &shape, &shape_ids[0], &e))
			return iod_cli_fail("schedule", IOD_EXIT_INVALID, "%s", e.msg);
		snprintf(names[0], sizeof(names[0]), "%s", shape.model);
		n_models = 1;
	} else {
		char buf[512];
		if (iod_strlcpy(buf, o->models, sizeof(buf)))
			return iod_cli_fail("schedule", IOD_EXIT_INVALID, "--model: list too long");
		for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			if (n_models == IOD_ARRAY_LEN(names))
				return iod_cli_fail("schedule", IOD_EXIT_INVALID,
				                    "--model: at most %zu models",
				                    IOD_ARRAY_LEN(names));
			if (iod_topo_model_load(tok, &topo, &e))
				return iod_cli_fail("schedule", IOD_EXIT_INVALID, "--model %s: %s",
				                    tok, e.msg);
			if (iod_sched_shape_from_topo(&topo, &shape, &e) ||
			    iod_sched_shape_add(c, &shape, &shape_ids[n_models], &e))
				return iod_cli_fail("schedule", IOD_EXIT_INVALID, "--model %s: %s",
				                    tok, e.msg);
			snprintf(names[n_models], sizeof(names[0]), "%s", tok);
			n_models++;
		}
		if (!n_models)
			return iod_cli_fail("schedule", IOD_EXIT_INVALID,
			                    "--model: no model named");
	}
	size_t off = 0;
	for (uint32_t i = 0; i < n_models && off < desc_len; i++)
		off += (size_t)snprintf(model_desc + off, desc_len - off, "%s%s", i ? ", " : "",
		                        names[i]);
	uint32_t racks = o->racks ? IOD_MIN(o->racks, o->nodes) : o->nodes;
	uint32_t zones = o->zones ? IOD_MIN(o->zones, racks) : 1;
	for (uint32_t i = 0; i < o->nodes; i++) {
		char name[32], rack[32], zone[32];
		uint32_t r = (uint32_t)((uint64_t)i * racks / o->nodes);
		snprintf(name, sizeof(name), "n%u", i);
		snprintf(rack, sizeof(rack), "rack%u", r);
		snprintf(zone, sizeof(zone), "zone%u", (uint32_t)((uint64_t)r * zones / racks));
		struct iod_sched_node_spec ns = {
		    .name = name, .shape = shape_ids[i % n_models], .rack = rack, .zone = zone};
		uint32_t id;
		if (iod_sched_node_add(c, &ns, &id, &e))
			return iod_cli_fail("schedule", IOD_EXIT_INVALID, "%s", e.msg);
	}
	return 0;
}

int cmd_schedule(int argc, char **argv)
{
	static const struct option lo[] = {{"file", required_argument, NULL, 'f'},
	                                   {"nodes", required_argument, NULL, 'n'},
	                                   {"model", required_argument, NULL, 'm'},
	                                   {"gpus", required_argument, NULL, 'g'},
	                                   {"output", required_argument, NULL, 'o'},
	                                   {"racks", required_argument, NULL, 'r'},
	                                   {"zones", required_argument, NULL, 'z'},
	                                   {"strict", no_argument, NULL, 's'},
	                                   {"explain", no_argument, NULL, 'x'},
	                                   {"weights", required_argument, NULL, 'w'},
	                                   {"rebalance", required_argument, NULL, 'b'},
	                                   {"numa", required_argument, NULL, 'N'},
	                                   {"help", no_argument, NULL, 'h'},
	                                   {NULL, 0, NULL, 0}};
	static const char *const formats[] = {"text", "json", NULL};
	struct opts o = {0};
	int ch;

	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return IOD_EXIT_OK;
	}
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":f:n:m:g:o:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'f': o.file = optarg; break;
		case 'm': o.models = optarg; break;
		case 'w': o.weights = optarg; break;
		case 's': o.strict = true; break;
		case 'x': o.explain = true; break;
		case 'n':
			if (parse_u32(optarg, &o.nodes) || o.nodes == 0 ||
			    o.nodes > IOD_SCHED_NODES_MAX)
				return iod_cli_fail("schedule", IOD_EXIT_INVALID,
				                    "--nodes %s: give a number from 1 to %u",
				                    optarg, IOD_SCHED_NODES_MAX);
			break;
		case 'g':
			if (parse_u32(optarg, &o.gpus))
				return iod_cli_fail("schedule", IOD_EXIT_INVALID,
				                    "--gpus %s: give a whole number of GPUs",
				                    optarg);
			o.have_gpus = true;
			break;
		case 'r':
			if (parse_u32(optarg, &o.racks) || o.racks == 0)
				return iod_cli_fail("schedule", IOD_EXIT_INVALID,
				                    "--racks %s: give a positive number", optarg);
			break;
		case 'z':
			if (parse_u32(optarg, &o.zones) || o.zones == 0)
				return iod_cli_fail("schedule", IOD_EXIT_INVALID,
				                    "--zones %s: give a positive number", optarg);
			break;
		case 'b':
			if (parse_u32(optarg, &o.rebalance) || o.rebalance > IOD_SCHED_MOVES_MAX)
				return iod_cli_fail("schedule", IOD_EXIT_INVALID,
				                    "--rebalance %s: give 0..%u moves", optarg,
				                    IOD_SCHED_MOVES_MAX);
			o.rebalance_set = true;
			break;
		case 'N':
			if (iod_sched_numa_parse(optarg, &o.numa))
				return iod_cli_fail(
				    "schedule", IOD_EXIT_INVALID,
				    "--numa %s: use none, best-effort, restricted or "
				    "single-numa-node",
				    optarg);
			o.have_numa = true;
			break;
		case 'o':
			if (iod_cli_output("schedule", optarg, formats, &o.out))
				return IOD_EXIT_INVALID;
			break;
		case ':':
			return iod_cli_fail("schedule", IOD_EXIT_INVALID,
			                    "%s needs a value; run `iod schedule --help`",
			                    argv[optind - 1]);
		default:
			return iod_cli_fail("schedule", IOD_EXIT_INVALID,
			                    "unknown option %s; run `iod schedule --help`",
			                    argv[optind - 1]);
		}
	}
	if (optind < argc)
		return iod_cli_fail("schedule", IOD_EXIT_INVALID,
		                    "unexpected argument %s; run `iod schedule --help`",
		                    argv[optind]);
	if (!o.file)
		return iod_cli_fail("schedule", IOD_EXIT_INVALID,
		                    "-f FILE is required (the spec to place)");
	if (!o.nodes)
		return iod_cli_fail("schedule", IOD_EXIT_INVALID,
		                    "--nodes N is required (how many nodes to model)");
	if (!o.models == !o.have_gpus)
		return iod_cli_fail("schedule", IOD_EXIT_INVALID,
		                    "give exactly one of --model NAME or --gpus TOTAL");

	struct iod_sched_opts so;
	iod_sched_opts_default(&so);
	so.strict = o.strict;
	if (o.weights && parse_weights(o.weights, &so.weights))
		return iod_cli_fail("schedule", IOD_EXIT_INVALID,
		                    "--weights %s: write TERM=N,... with N 0..1000 and TERM one of "
		                    "gpu-set, numa, frag, spread, pack, nic",
		                    o.weights);

	struct iod_spec *spec = NULL;
	static struct iod_spec_diags diags;
	int rc = iod_spec_load_file(o.file, &spec, &diags);
	if (rc) {
		iod_spec_diags_print(&diags, o.file, stderr);
		return rc == -EINVAL || rc == -ENOENT ? IOD_EXIT_INVALID : IOD_EXIT_ERROR;
	}
	if (spec->services_n == 0) {
		iod_spec_free(spec);
		return iod_cli_fail("schedule", IOD_EXIT_INVALID,
		                    "%s has no services: to place; nothing to schedule", o.file);
	}
	struct iod_sched_request *reqs = calloc(spec->services_n, sizeof(*reqs));
	uint64_t total = 0;
	struct iod_err e = {0};
	for (uint32_t i = 0; reqs && i < spec->services_n; i++) {
		if (iod_sched_request_from_spec(&spec->services[i], &reqs[i], &e)) {
			int r = iod_cli_fail("schedule", IOD_EXIT_INVALID, "%s:%u:%u: %s", o.file,
			                     spec->services[i].line, spec->services[i].col, e.msg);
			free(reqs);
			iod_spec_free(spec);
			return r;
		}
		if (o.have_numa)
			reqs[i].numa = o.numa;
		total += reqs[i].replicas;
	}
	if (total > IOD_SCHED_DEPLOY_MAX) {
		free(reqs);
		iod_spec_free(spec);
		return iod_cli_fail("schedule", IOD_EXIT_INVALID,
		                    "%s asks for %llu replicas; one deploy places at most %u",
		                    o.file, (unsigned long long)total, IOD_SCHED_DEPLOY_MAX);
	}
	struct iod_sched_cluster *c = NULL;
	struct iod_sched_result res = {0};
	char model_desc[256] = "";
	int code = IOD_EXIT_ERROR;
	if (!reqs || iod_sched_cluster_new(o.nodes, (uint32_t)IOD_MAX(total, 1u), &c, &e) ||
	    iod_sched_result_init(&res, (uint32_t)total, spec->services_n)) {
		code = iod_cli_fail("schedule", IOD_EXIT_ERROR, "out of memory: %s", e.msg);
		goto out;
	}
	code = build_cluster(&o, c, model_desc, sizeof(model_desc));
	if (code)
		goto out;
	if (iod_sched_place(c, reqs, spec->services_n, &so, &res, &e)) {
		code = iod_cli_fail("schedule", IOD_EXIT_INVALID, "%s", e.msg);
		goto out;
	}
	struct iod_sched_plan plan;
	bool have_plan = o.rebalance_set && iod_sched_rebalance(c, IOD_SCHED_GOAL_ISLANDS, 0,
	                                                        o.rebalance, false, &plan, &e) == 0;
	if (o.out == IOD_OUT_JSON) {
		json_t *j = iod_sched_result_to_json(c, &res);
		json_t *nodes = json_array();
		for (uint32_t i = 0; i < iod_sched_node_count(c); i++) {
			json_t *n = json_object();
			json_object_set_new(n, "name", json_string(iod_sched_node_name(c, i)));
			json_object_set_new(n, "model",
			                    json_string(iod_sched_node_shape(c, i)->model));
			json_object_set_new(n, "gpus",
			                    json_integer(iod_sched_node_shape(c, i)->gpus_n));
			json_object_set_new(
			    n, "gpus_free",
			    json_integer(__builtin_popcount(iod_sched_node_gpus_free(c, i))));
			json_array_append_new(nodes, n);
		}
		json_object_set_new(j, "nodes", nodes);
		json_object_set_new(j, "spec", json_string(o.file));
		if (have_plan) {
			json_t *p = json_object(), *mv = json_array();
			for (uint32_t i = 0; i < plan.n; i++) {
				json_t *m = json_object();
				json_object_set_new(m, "replica", json_string(plan.moves[i].name));
				json_object_set_new(
				    m, "from",
				    json_string(iod_sched_node_name(c, plan.moves[i].from_node)));
				json_object_set_new(
				    m, "to",
				    json_string(iod_sched_node_name(c, plan.moves[i].to_node)));
				json_array_append_new(mv, m);
			}
			json_object_set_new(p, "moves", mv);
			json_object_set_new(p, "islands_before", json_integer(plan.islands_before));
			json_object_set_new(p, "islands_after", json_integer(plan.islands_after));
			json_object_set_new(j, "rebalance", p);
		}
		iod_json_print(stdout, j, false);
		json_decref(j);
	} else {
		struct iod_buf b;
		iod_buf_init(&b);
		printf("placing %s onto %u node%s (%s)\n\n", o.file, o.nodes,
		       o.nodes == 1 ? "" : "s", model_desc);
		iod_sched_result_format(c, &res, &b);
		fputs(b.data ? b.data : "", stdout);
		iod_buf_free(&b);
		if (o.explain) {
			printf("\ndecisions (weights");
			for (unsigned t = 0; t < IOD_SCHED_TERMS_N; t++)
				printf(" %s=%u", iod_sched_term_name(t), so.weights.w[t]);
			printf("):\n");
			for (uint32_t i = 0; i < res.n; i++)
				if (res.p[i].placed)
					print_explain(c, &res.p[i]);
		}
		if (have_plan) {
			printf("\nrebalance: %s\n", plan.why);
			char a[128], b2[128];
			for (uint32_t i = 0; i < plan.n; i++) {
				iod_sched_gpus_format(plan.moves[i].from_gpus, a, sizeof(a));
				iod_sched_gpus_format(plan.moves[i].to_gpus, b2, sizeof(b2));
				printf("  move %s: %s [%s] -> %s [%s]\n", plan.moves[i].name,
				       iod_sched_node_name(c, plan.moves[i].from_node), a,
				       iod_sched_node_name(c, plan.moves[i].to_node), b2);
			}
		}
	}
	code = res.unplaced_n ? IOD_EXIT_PARTIAL : IOD_EXIT_OK;
out:
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
	free(reqs);
	iod_spec_free(spec);
	return code;
}
