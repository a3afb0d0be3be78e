/*
 * cmd_topo.c: `iod topo`: show a node's hardware topology: this machine
 * (hwloc + NVML), an hwloc XML file (--xml, or $HWLOC_XMLFILE) or a built-in
 * model (--model), as text, the nvidia-smi matrix, JSON, Graphviz or hwloc
 * XML.
 *
 * A thin shell over topo/: parse options, load, format, print. Bad input
 * (missing file, malformed XML, unknown model) exits 2 with the reason.
 */
#include "cli.h"
#include "iod/k8s.h"
#include "iod/topo.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: iod topo [--xml FILE | --model NAME | --host] [-o text|matrix|json|dot|xml]\n"
	    "       iod topo [--xml FILE | --model NAME | --host] -o dra [--node NAME] [--driver "
	    "D]\n"
	    "       iod topo [--xml FILE | --model NAME | --host] --gpus SET [-o text|json]\n"
	    "       iod topo --list-models [-o json]\n"
	    "       iod topo --cluster --nodes N --model NAME [-o labels|json|slurm] (--cluster "
	    "--help)\n\n"
	    "Show a node's hardware topology: packages, NUMA nodes, caches, the PCIe tree,\n"
	    "GPUs, NICs, DPUs, NVLinks, and the compute units the scheduler places on.\n\n"
	    "  --xml FILE      read an hwloc 2.x (or 1.x) XML topology (`lstopo --of xml`); the\n"
	    "                  NVLinkBandwidth distances matrix gives NVLinks.\n"
	    "                  $HWLOC_XMLFILE is used when neither --xml nor --model is given\n"
	    "  --model NAME    a built-in model (see --list-models; generic-N for N GPUs)\n"
	    "  --host          discover this machine even when $HWLOC_XMLFILE is set (the\n"
	    "                  file stands for the machine and NVML, when present, completes it)\n"
	    "  -o FORMAT       text (default; like lstopo), matrix (`nvidia-smi topo -m`),\n"
	    "                  json (the whole model), dot (Graphviz: `| dot -Tsvg`),\n"
	    "                  xml (hwloc XML that --xml reads back), dra (the GPUs and DPUs\n"
	    "                  as a DRA ResourceSlice, resource.k8s.io/v1: NUMA node, NVLink\n"
	    "                  domain, PCIe switch and root, nearest NIC; docs/kubernetes.md)\n"
	    "  --node NAME     -o dra: the Kubernetes node (default the topology's name)\n"
	    "  --driver D      -o dra: the DRA driver, its attributes' domain (default iod.dev)\n"
	    "  --gpus SET      what the scheduler sees for a GPU set (GPU indexes, e.g.\n"
	    "                  0-1,4): its go-gpuallocator score, pair classes, NVLink\n"
	    "                  islands, the nearest NIC, NUMA node and CPUs (-o text|json)\n"
	    "  --list-models   the built-in models\n\n"
	    "Without --xml or --model, discovers this machine with hwloc (and NVML when\n"
	    "libnvidia-ml.so.1 is present). Exit codes: 0 ok, 1 discovery failed,\n"
	    "2 invalid input (missing file, bad XML, unknown model). See docs/topology.md.\n");
}

static int list_models(bool json)
{
	const char *const *names = iod_topo_model_names();
	if (json) {
		json_t *a = json_array();
		for (; *names; names++) {
			struct iod_topo_node *n = malloc(sizeof(*n));
			struct iod_err e = {0};
			if (!n || iod_topo_model_load(*names, n, &e)) {
				free(n);
				continue;
			}
			json_t *o = json_object();
			json_object_set_new(o, "name", json_string(*names));
			json_object_set_new(o, "gpus", json_integer(n->ngpus));
			json_object_set_new(o, "nics", json_integer(n->nnics));
			json_object_set_new(o, "packages", json_integer(n->npackages));
			json_object_set_new(o, "cores", json_integer(n->cores));
			json_array_append_new(a, o);
			free(n);
		}
		json_t *o = json_object();
		json_object_set_new(o, "models", a);
		json_object_set_new(o, "parametric", json_string("generic-N"));
		iod_json_print(stdout, o, false);
		json_decref(o);
		return IOD_EXIT_OK;
	}
	printf("built-in models:\n");
	for (; *names; names++) {
		struct iod_topo_node *n = malloc(sizeof(*n));
		struct iod_err e = {0};
		if (n && !iod_topo_model_load(*names, n, &e))
			printf("  %-24s %u GPUs, %u NICs/DPUs, %u sockets, %u cores%s\n", *names,
			       n->ngpus, n->nnics, n->npackages, n->cores,
			       n->is_dpu ? " (a DPU)" : "");
		free(n);
	}
	printf("  %-24s N GPUs (0..%d): the default node of --gpus TOTAL --nodes N\n", "generic-N",
	       IOD_TOPO_GENERIC_GPUS_MAX);
	return IOD_EXIT_OK;
}

/* --gpus SET: the scheduler's view of one GPU set. */
static int query(const struct iod_topo_node *n, const char *list, bool json)
{
	struct iod_bitmap set, isl[IOD_TOPO_GPUS_MAX], cpus;
	struct iod_err e = {0};
	char buf[1024], cell[16];

	if (iod_bitmap_parse(list, &set, &e))
		return iod_cli_fail("topo", IOD_EXIT_INVALID, "--gpus: %s", e.msg);
	int last = -1;
	for (int g = iod_bitmap_next(&set, 0); g >= 0; g = iod_bitmap_next(&set, (unsigned)g + 1))
		last = g;
	if (last < 0)
		return iod_cli_fail("topo", IOD_EXIT_INVALID, "--gpus: the set is empty");
	if (last >= (int)n->ngpus)
		return iod_cli_fail("topo", IOD_EXIT_INVALID,
		                    "--gpus: GPU %d does not exist; %s has %u GPUs", last, n->name,
		                    n->ngpus);
	unsigned k = iod_topo_nvlink_islands(n, &set, isl, IOD_TOPO_GPUS_MAX);
	int nic = iod_topo_nearest_nic(n, &set);
	int numa = iod_topo_nearest_numa(n, &set);
	iod_topo_nearest_cpuset(n, &set, &cpus);
	uint64_t score = iod_topo_gpu_set_score(n, &set);
	if (json) {
		json_t *o = json_object(), *pairs = json_array(), *islands = json_array();
		iod_bitmap_format(&set, buf, sizeof(buf));
		json_object_set_new(o, "gpus", json_string(buf));
		json_object_set_new(o, "score", json_integer((json_int_t)score));
		for (int g = iod_bitmap_next(&set, 0); g >= 0;
		     g = iod_bitmap_next(&set, (unsigned)g + 1))
			for (int h = iod_bitmap_next(&set, (unsigned)g + 1); h >= 0;
			     h = iod_bitmap_next(&set, (unsigned)h + 1)) {
				json_t *p = json_object();
				iod_topo_link_label(n, n->gpu[g], n->gpu[h], cell, sizeof(cell));
				json_object_set_new(p, "a", json_integer(g));
				json_object_set_new(p, "b", json_integer(h));
				json_object_set_new(p, "class", json_string(cell));
				json_object_set_new(p, "score",
				                    json_integer(iod_topo_gpu_pair_score(
				                        n, (unsigned)g, (unsigned)h)));
				json_array_append_new(pairs, p);
			}
		json_object_set_new(o, "pairs", pairs);
		for (unsigned i = 0; i < k; i++) {
			iod_bitmap_format(&isl[i], buf, sizeof(buf));
			json_array_append_new(islands, json_string(buf));
		}
		json_object_set_new(o, "nvlink_islands", islands);
		json_object_set_new(o, "nearest_nic",
		                    nic >= 0 ? json_string(n->devices[nic].name) : json_null());
		json_object_set_new(o, "nearest_numa",
		                    numa >= 0 ? json_integer(n->numa[numa].os_index) : json_null());
		iod_bitmap_format(&cpus, buf, sizeof(buf));
		json_object_set_new(o, "cpus", json_string(buf));
		iod_json_print(stdout, o, false);
		json_decref(o);
		return IOD_EXIT_OK;
	}
	iod_bitmap_format(&set, buf, sizeof(buf));
	printf("GPUs %s on %s: score %llu (go-gpuallocator: SYS 10 ... PIX 50, +100 per NVLink)\n",
	       buf, n->name, (unsigned long long)score);
	for (int g = iod_bitmap_next(&set, 0); g >= 0; g = iod_bitmap_next(&set, (unsigned)g + 1))
		for (int h = iod_bitmap_next(&set, (unsigned)g + 1); h >= 0;
		     h = iod_bitmap_next(&set, (unsigned)h + 1)) {
			iod_topo_link_label(n, n->gpu[g], n->gpu[h], cell, sizeof(cell));
			printf("  GPU%d-GPU%d  %-4s  %u\n", g, h, cell,
			       iod_topo_gpu_pair_score(n, (unsigned)g, (unsigned)h));
		}
	printf("NVLink islands:");
	for (unsigned i = 0; i < k; i++) {
		iod_bitmap_format(&isl[i], buf, sizeof(buf));
		printf(" {GPU %s}", buf);
	}
	printf("\nnearest NIC: %s", nic >= 0 ? n->devices[nic].name : "none");
	if (nic >= 0 && n->devices[nic].os_name[0])
		printf(" (%s)", n->devices[nic].os_name);
	printf("\n");
	if (numa >= 0)
		printf("nearest NUMA node: %u\n", n->numa[numa].os_index);
	iod_bitmap_format(&cpus, buf, sizeof(buf));
	printf("CPUs: %s\n", buf);
	return IOD_EXIT_OK;
}

int iod_cli_topo_cluster(int argc, char **argv); /* cmd_topo_cluster.c */

int cmd_topo(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) /* the cluster's topology: another shell */
		if (!strcmp(argv[i], "--cluster"))
			return iod_cli_topo_cluster(argc, argv);
	static const struct option opts[] = {
	    {"xml", required_argument, NULL, 'x'},    {"model", required_argument, NULL, 'm'},
	    {"output", required_argument, NULL, 'o'}, {"list-models", no_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},         {"host", no_argument, NULL, 'H'},
	    {"gpus", required_argument, NULL, 'g'},   {"node", required_argument, NULL, 'N'},
	    {"driver", required_argument, NULL, 'D'}, {NULL, 0, NULL, 0},
	};
	static const char *const formats[] = {"text", "json", "dot", "matrix", NULL};
	const char *xml = NULL, *model = NULL, *out_name = "text", *gpus = NULL;
	const char *node = NULL, *driver = "iod.dev";
	bool list = false, as_xml = false, as_dra = false, host = false;
	enum iod_output out = IOD_OUT_TEXT;
	int c;

	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return IOD_EXIT_OK;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'x': xml = optarg; break;
		case 'm': model = optarg; break;
		case 'o': out_name = optarg; break;
		case 'l': list = true; break;
		case 'H': host = true; break;
		case 'g': gpus = optarg; break;
		case 'N': node = optarg; break;
		case 'D': driver = optarg; break;
		case ':':
			return iod_cli_fail("topo", IOD_EXIT_INVALID,
			                    "%s needs a value; see --help", argv[optind - 1]);
		default:
			return iod_cli_fail("topo", IOD_EXIT_INVALID,
			                    "unknown option %s; see --help", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return iod_cli_fail("topo", IOD_EXIT_INVALID,
		                    "unexpected argument \"%s\"; see --help", argv[optind]);
	if (!strcmp(out_name, "xml"))
		as_xml = true;
	else if (!strcmp(out_name, "dra"))
		as_dra = true;
	else if (iod_cli_output("topo", out_name, formats, &out))
		return IOD_EXIT_INVALID;
	if (list)
		return list_models(out == IOD_OUT_JSON);
	if ((xml != NULL) + (model != NULL) + host > 1)
		return iod_cli_fail("topo", IOD_EXIT_INVALID, "give one of --xml, --model, --host");

	struct iod_topo_node *n = malloc(sizeof(*n));
	struct iod_err e = {0};
	int rc, exit_code = IOD_EXIT_INVALID;
	if (!n)
		return iod_cli_fail("topo", IOD_EXIT_ERROR, "out of memory");
	const char *env = getenv("HWLOC_XMLFILE");
	if (model)
		rc = iod_topo_model_load(model, n, &e);
	else if (xml)
		rc = iod_topo_load_xml_file(xml, n, &e);
	else if (env && *env && !host)
		rc = iod_topo_load_xml_file(env, n, &e);
	else {
		rc = iod_topo_discover(n, &e);
		exit_code = IOD_EXIT_ERROR;
	}
	if (rc) {
		free(n);
		return iod_cli_fail("topo", exit_code, "%s", e.msg);
	}

	if (gpus) {
		rc = query(n, gpus, out == IOD_OUT_JSON);
		free(n);
		return rc;
	}
	struct iod_buf b;
	iod_buf_init(&b);
	if (as_dra) {
		rc = iod_k8s_dra_slice(n, node ? node : n->name, driver, &b, &e);
		if (rc) {
			iod_buf_free(&b);
			free(n);
			return iod_cli_fail("topo", IOD_EXIT_INVALID, "-o dra: %s", e.msg);
		}
	} else if (as_xml)
		rc = iod_topo_format_xml(n, &b);
	else if (out == IOD_OUT_MATRIX)
		rc = iod_topo_format_matrix(n, &b);
	else if (out == IOD_OUT_DOT)
		rc = iod_topo_format_dot(n, &b);
	else if (out == IOD_OUT_JSON) {
		json_t *j = iod_topo_to_json(n);
		rc = j ? iod_json_print(stdout, j, false) : -ENOMEM;
		json_decref(j);
	} else
		rc = iod_topo_format_text(n, &b);
	if (!rc && b.len)
		fwrite(b.data, 1, b.len, stdout);
	iod_buf_free(&b);
	free(n);
	if (rc)
		return iod_cli_fail("topo", IOD_EXIT_ERROR, "formatting failed (%s)",
		                    strerror(-rc));
	return IOD_EXIT_OK;
}
