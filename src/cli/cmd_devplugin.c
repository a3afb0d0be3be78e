/*
 * cmd_devplugin.c: `iod devplugin`: the Kubernetes device plugin (v1beta1)
 * for iod.dev/gpu and iod.dev/dpu, over the node's topology (discovered,
 * --xml or --model). It serves kubelet's DevicePlugin service on Unix
 * sockets in the device-plugins dir and registers with kubelet
 * (src/k8s/dp_serve.c); `--list` prints the devices it would report.
 * docs/kubernetes.md.
 */
#include "cli.h"
#include "iod/k8s.h"

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: iod devplugin [--model NAME | --xml FILE] [--resource gpu|dpu|gpu,dpu]\n"
	        "                     [--dir DIR] [--kubelet-socket PATH | --no-register]\n"
	        "                     [--unhealthy-file FILE] [--list [-o text|json]]\n\n"
	        "The Kubernetes device plugin (API v1beta1) for iod.dev/gpu and iod.dev/dpu:\n"
	        "serves ListAndWatch (devices with health and NUMA node), GetPreferredAllocation\n"
	        "(iod's GPU-set search: NVLink islands, NUMA, nearest NIC), Allocate (device\n"
	        "nodes and the env iod's replicas get) and PreStartContainer on\n"
	        "DIR/iod-gpu.sock and DIR/iod-dpu.sock, and registers each with kubelet.\n\n"
	        "  --model NAME          a built-in topology model instead of this machine's\n"
	        "  --xml FILE            an hwloc XML topology instead of this machine's\n"
	        "  --resource LIST       resources to serve (default gpu,dpu: those the node has)\n"
	        "  --dir DIR             kubelet's device-plugins dir (default %s)\n"
	        "  --kubelet-socket PATH Registration socket (default DIR/kubelet.sock)\n"
	        "  --no-register         serve without registering (tests)\n"
	        "  --unhealthy-file FILE device ids (gpu3) one a line, re-read every second;\n"
	        "                        a change is sent to every ListAndWatch stream\n"
	        "  --list                print the devices and exit\n\n"
	        "Exit codes: 0 ok, 1 cannot serve, 2 invalid input. See docs/kubernetes.md.\n",
	        IOD_DP_DIR);
}

static volatile int stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int list(const struct iod_topo_node *t, const bool *res, enum iod_output out)
{
	json_t *arr = json_array();
	for (int r = 0; r < 2; r++) {
		struct iod_dp_device d[IOD_DP_IDS_MAX];
		if (!res[r])
			continue;
		uint32_t n = iod_dp_devices(t, (enum iod_dp_resource)r, NULL, d, IOD_DP_IDS_MAX);
		for (uint32_t i = 0; i < n; i++) {
			if (out == IOD_OUT_JSON)
				json_array_append_new(
				    arr, json_pack("{s:s,s:s,s:s,s:i}", "resource",
				                   iod_dp_resource_name((enum iod_dp_resource)r),
				                   "id", d[i].id, "health",
				                   d[i].healthy ? "Healthy" : "Unhealthy", "numa",
				                   d[i].numa));
			else
				printf("%-12s %-8s %-9s numa %d\n",
				       iod_dp_resource_name((enum iod_dp_resource)r), d[i].id,
				       d[i].healthy ? "Healthy" : "Unhealthy", d[i].numa);
		}
	}
	if (out == IOD_OUT_JSON) {
		char *s = json_dumps(arr, JSON_INDENT(2));
		printf("%s\n", s ? s : "[]");
		free(s);
	}
	json_decref(arr);
	return 0;
}

int cmd_devplugin(int argc, char **argv)
{
	static const struct option lo[] = {{"model", required_argument, NULL, 'm'},
	                                   {"xml", required_argument, NULL, 'x'},
	                                   {"resource", required_argument, NULL, 'r'},
	                                   {"dir", required_argument, NULL, 'd'},
	                                   {"kubelet-socket", required_argument, NULL, 'k'},
	                                   {"no-register", no_argument, NULL, 'n'},
	                                   {"unhealthy-file", required_argument, NULL, 'u'},
	                                   {"list", no_argument, NULL, 'l'},
	                                   {"output", required_argument, NULL, 'o'},
	                                   {"help", no_argument, NULL, 'h'},
	                                   {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	const char *model = NULL, *xml = NULL, *resources = NULL, *kubelet = NULL;
	struct iod_dp_serve_opts o = {.dir = IOD_DP_DIR, .stop = &stop};
	enum iod_output out = IOD_OUT_TEXT;
	bool do_list = false, explicit_res = false;
	int c;
	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 'x': xml = optarg; break;
		case 'r': resources = optarg; break;
		case 'd': o.dir = optarg; break;
		case 'k': kubelet = optarg; break;
		case 'n': kubelet = ""; break;
		case 'u': o.unhealthy_file = optarg; break;
		case 'l': do_list = true; break;
		case 'o':
			if (iod_cli_output("devplugin", optarg, outs, &out))
				return 2;
			break;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		return iod_cli_fail("devplugin", 2, "unexpected argument '%s'", argv[optind]);
	if (model && xml)
		return iod_cli_fail("devplugin", 2, "--model and --xml exclude each other");
	if (resources) {
		char buf[64];
		explicit_res = true;
		if (iod_strlcpy(buf, resources, sizeof(buf)))
			return iod_cli_fail("devplugin", 2, "--resource: too long");
		for (char *save = NULL, *t = strtok_r(buf, ",", &save); t;
		     t = strtok_r(NULL, ",", &save)) {
			if (!strcmp(t, "gpu"))
				o.resource[IOD_DP_GPU] = true;
			else if (!strcmp(t, "dpu"))
				o.resource[IOD_DP_DPU] = true;
			else
				return iod_cli_fail("devplugin", 2, "--resource: '%s' (gpu, dpu)",
				                    t);
		}
		if (!o.resource[0] && !o.resource[1])
			return iod_cli_fail("devplugin", 2, "--resource: none given");
	}
	struct iod_topo_node *t = malloc(sizeof(*t));
	struct iod_err e = {0};
	if (!t)
		return iod_cli_fail("devplugin", 1, "out of memory");
	int rc = model ? iod_topo_model_load(model, t, &e)
	         : xml ? iod_topo_load_xml_file(xml, t, &e)
	               : iod_topo_discover(t, &e);
	if (rc) {
		free(t);
		return iod_cli_fail("devplugin", model || xml ? 2 : 1, "%s", e.msg);
	}
	if (!explicit_res) { /* the resources the node has */
		struct iod_dp_device d[1];
		o.resource[IOD_DP_GPU] = iod_dp_devices(t, IOD_DP_GPU, NULL, d, 1) > 0;
		o.resource[IOD_DP_DPU] = iod_dp_devices(t, IOD_DP_DPU, NULL, d, 1) > 0;
	}
	if (do_list) {
		rc = list(t, o.resource, out);
		free(t);
		return rc;
	}
	if (!o.resource[0] && !o.resource[1]) {
		free(t);
		return iod_cli_fail("devplugin", 1, "this node has no GPU or DPU to offer");
	}
	o.topo = t;
	o.kubelet_socket = kubelet;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	rc = iod_dp_serve(&o, &e);
	free(t);
	if (rc)
		return iod_cli_fail("devplugin", 1, "%s", e.msg);
	return 0;
}
