/*
 * fuzz_k8s_extender.c: libFuzzer target for the ExtenderArgs JSON
 * kube-scheduler posts to `iod extender` (src/k8s/extender.c). The first
 * byte picks filter or prioritize; a refusal says why, an answer has the
 * spec's shape (an Error field, or one priority per node within 0..10).
 */
#include "iod/k8s.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct iod_k8s_ext_shape shapes[2];
static struct iod_k8s_ext_node nodes[2] = {{"n0", 0, "rack0", "zone0"},
                                           {"n1", 1, "rack1", "zone0"}};
static bool ready;

static void setup(void)
{
	static struct iod_topo_node t;
	static const char *const m[] = {"dgx-h100", "pcie-8gpu"};
	struct iod_err e = {0};
	for (int i = 0; i < 2; i++) {
		if (iod_topo_model_load(m[i], &t, &e) ||
		    iod_sched_shape_from_topo(&t, &shapes[i].shape, &e))
			abort();
		snprintf(shapes[i].model, sizeof(shapes[i].model), "%s", m[i]);
	}
	ready = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (!ready)
		setup();
	struct iod_k8s_ext x = {shapes, 2, nodes, 2};
	struct iod_err e = {0};
	json_t *out = NULL;
	const char *verb = data[0] & 1 ? "prioritize" : "filter";
	if (iod_k8s_ext_answer(&x, verb, (const char *)data + 1, size - 1, &out, &e)) {
		if (!e.msg[0] || out)
			abort();
		return 0;
	}
	if (data[0] & 1) {
		size_t i;
		json_t *h;
		if (!json_is_array(out))
			abort();
		json_array_foreach(out, i, h)
		{
			json_int_t s = json_integer_value(json_object_get(h, "Score"));
			if (s < 0 || s > IOD_K8S_EXT_SCORE_MAX)
				abort();
		}
	} else if (!json_is_string(json_object_get(out, "Error"))) {
		abort();
	}
	json_decref(out);
	return 0;
}
