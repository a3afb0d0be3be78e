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
#include "iod/topo.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: iod topo [--xml FILE | --model NAME | --host] [-o text|matrix|json|dot|xml]\n"
	    "       iod topo --list-models [-o json]\n\n"
	    "Show a node's hardware topology: packages, NUMA nodes, caches, the PCIe tree,\n"
	    "GPUs, NICs, DPUs, NVLinks, and the compute units the scheduler places on.\n\n"
	    "  --xml FILE      read an hwloc 2.x XML topology (`lstopo --of xml`); the\n"
	    "                  NVLinkBandwidth distances matrix gives NVLinks.\n"
	    "                  $HWLOC_XMLFILE is used when neither --xml nor --model is given\n"
	    "  --model NAME    a built-in model (see --list-models; generic-N for N GPUs)\n"
	    "  --host          discover this machine even when $HWLOC_XMLFILE is set (the\n"
	    "                  file stands for the machine and NVML, when present, completes it)\n"
	    "  -o FORMAT       text (default; like lstopo), matrix (`nvidia-smi topo -m`),\n"
	    "                  json (the whole model), dot (Graphviz: `| dot -Tsvg`),\n"
	    "                  xml (hwloc XML that --xml reads back)\n"
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

int cmd_topo(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"xml", required_argument, NULL, 'x'},
	    {"model", required_argument, NULL, 'm'},
	    {"output", required_argument, NULL, 'o'},
	    {"list-models", no_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},
	    {"host", no_argument, NULL, 'H'},
	    {NULL, 0, NULL, 0},
	};
	static const char *const formats[] = {"text", "json", "dot", "matrix", NULL};
	const char *xml = NULL, *model = NULL, *out_name = "text";
	bool list = false, as_xml = false, host = false;
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

	struct iod_buf b;
	iod_buf_init(&b);
	if (as_xml)
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
