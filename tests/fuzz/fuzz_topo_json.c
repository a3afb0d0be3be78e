/*
 * fuzz_topo_json.c: libFuzzer target for reading a node's topology back
 * from JSON (what agents register and the cluster state stores): any input
 * gives a finalized node or an error with a message; a node read back writes
 * JSON that reads back to the same node.
 */
#include "iod/topo.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_topo_node n, again;
	struct iod_err e = {0};
	json_t *j = NULL;

	if (size > 1 << 20 || iod_json_parse((const char *)data, size, &j, &e) < 0)
		return 0;
	int rc = iod_topo_from_json(j, &n, &e);
	json_decref(j);
	if (rc < 0) {
		if (!e.msg[0])
			abort();
		return 0;
	}
	if (n.nnuma == 0 || n.ngpus > n.ndevices)
		abort();
	/* what we accept, we can write and read back identically */
	json_t *out = iod_topo_to_json(&n);
	if (!out)
		abort();
	rc = iod_topo_from_json(out, &again, &e);
	json_decref(out);
	if (rc < 0 || !iod_topo_node_same(&n, &again, NULL, 0))
		abort();
	return 0;
}
