/*
 * fuzz_viz_rates.c: libFuzzer target for what the live view of `iod viz`
 * reads besides the API's objects: a mesh proxy's /spans answer, counted
 * into per-edge service rates (iod_viz_spans_add, iod_viz_edge_rates), and
 * the same document as telemetry summaries whose "links" colour a node's
 * link (iod_viz_graph), and its "records" as the dropped flows the nodes
 * show (drops.json's, as iod_ctl_drops_read gives them). Any input: rates are finite and non-negative, the
 * graph builds, never a crash.
 */
#include "iod/obs.h"

#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *doc = json_loadb((const char *)data, size, 0, NULL);
	if (!doc)
		return 0;
	json_t *st = json_object();
	iod_viz_spans_add(st, doc, 1000); /* primes */
	iod_viz_spans_add(st, doc, 2500);
	iod_viz_spans_add(st, doc, 4000);
	json_t *r = iod_viz_edge_rates(st, 4000);
	const char *k;
	json_t *v;
	json_object_foreach(r, k, v)
	{
		double rps = json_number_value(json_object_get(v, "rps"));
		if (k[0] && (!isfinite(rps) || rps < 0))
			abort();
	}
	json_t *nodes = json_loads("{\"items\": [{\"name\": \"n0\", \"lease\": 1, \"value\": "
	                           "{\"topology\": {\"devices\": [{\"kind\": \"nic\", \"name\": "
	                           "\"eth0\", \"port_bps\": 1000}]}}}, {\"name\": \"n1\", "
	                           "\"lease\": 1, \"value\": {}}]}",
	                           0, NULL);
	json_t *svcs = json_loads("{\"items\": [{\"name\": \"a\", \"value\": {\"depends_on\": "
	                          "[\"b\"]}}, {\"name\": \"b\", \"value\": {}}]}",
	                          0, NULL);
	struct iod_viz_input in = {.nodes = nodes,
	                           .services = svcs,
	                           .telemetry = doc,
	                           .edge_rates = r,
	                           .drops = json_object_get(doc, "records")};
	json_t *g = iod_viz_graph(&in);
	if (!g)
		abort();
	struct iod_buf b;
	iod_buf_init(&b);
	if (iod_viz_dot(g, &b))
		abort();
	iod_buf_free(&b);
	json_decref(g);
	json_decref(nodes);
	json_decref(svcs);
	json_decref(r);
	json_decref(st);
	json_decref(doc);
	return 0;
}
