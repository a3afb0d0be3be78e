/*
 * bench_k8s.c: `make bench-k8s`: the kube-scheduler extender's latency over
 * 1,000 nodes (filter then prioritize of one 4-GPU pod, NodeNames as a
 * nodeCacheCapable extender gets them; 1,000 nodes of dgx-h100, hgx-a100-8
 * and pcie-8gpu with a different GPU mask taken on each tenth node). The
 * default kube-scheduler extender timeout is 5 s; the aim is < 10 ms.
 *   BENCH k8s.extender nodes=1000 p50_ms=... p99_ms=... runs=...
 */
#include "bench.h"
#include "iod/k8s.h"

#include <stdlib.h>
#include <string.h>

#define NODES 1000
#define RUNS 200

static const char *const models[] = {"dgx-h100", "hgx-a100-8", "pcie-8gpu"};

static char *make_args(void)
{
	json_t *names = json_array();
	json_t *items = json_array();
	for (int i = 0; i < NODES; i++) {
		char n[16], used[8];
		snprintf(n, sizeof(n), "n%d", i);
		snprintf(used, sizeof(used), "0-%d", i % 10 == 0 ? i / 10 % 7 : 0);
		json_t *md = json_pack("{s:s, s:{s:s}}", "name", n, "labels", "iod.dev/model",
		                       models[i % 3]);
		if (i % 10 == 0)
			json_object_set_new(md, "annotations",
			                    json_pack("{s:s}", "iod.dev/gpus-used", used));
		json_array_append_new(items, json_pack("{s:o}", "metadata", md));
		json_array_append_new(names, json_string(n));
	}
	json_decref(names);
	json_t *args =
	    json_pack("{s:{s:{s:s}, s:{s:[{s:s, s:{s:{s:s}}}]}}, s:{s:o}}", "Pod", "metadata",
	              "name", "p", "spec", "containers", "name", "w", "resources", "limits",
	              "nvidia.com/gpu", "4", "Nodes", "items", items);
	char *s = iod_json_string(args, true);
	json_decref(args);
	return s;
}

int main(void)
{
	static struct iod_topo_node t;
	static struct iod_k8s_ext_shape shapes[3];
	struct iod_err e = {0};
	for (int i = 0; i < 3; i++) {
		if (iod_topo_model_load(models[i], &t, &e) ||
		    iod_sched_shape_from_topo(&t, &shapes[i].shape, &e)) {
			fprintf(stderr, "bench_k8s: %s\n", e.msg);
			return 1;
		}
		snprintf(shapes[i].model, sizeof(shapes[i].model), "%s", models[i]);
	}
	struct iod_k8s_ext x = {shapes, 3, NULL, 0};
	char *args = make_args();
	size_t len = strlen(args);
	uint64_t ns[RUNS];
	for (int r = 0; r < RUNS; r++) {
		uint64_t t0 = bench_now_ns();
		json_t *f = NULL, *p = NULL;
		if (iod_k8s_ext_answer(&x, "filter", args, len, &f, &e) ||
		    iod_k8s_ext_answer(&x, "prioritize", args, len, &p, &e)) {
			fprintf(stderr, "bench_k8s: %s\n", e.msg);
			return 1;
		}
		ns[r] = bench_now_ns() - t0;
		if (json_array_size(p) != NODES)
			return 1;
		json_decref(f);
		json_decref(p);
	}
	free(args);
	qsort(ns, RUNS, sizeof(ns[0]), bench_cmp_u64);
	bench_line("BENCH k8s.extender nodes=%d p50_ms=%.2f p99_ms=%.2f runs=%d", NODES,
	           (double)bench_pct_u64(ns, RUNS, 0.50) / 1e6,
	           (double)bench_pct_u64(ns, RUNS, 0.99) / 1e6, RUNS);
	return 0;
}
