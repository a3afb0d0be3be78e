/*
 * fuzz_topo_xml.c: libFuzzer target for the topology XML loading path:
 * iod's own checks, hwloc's parser (in its child process, where a crash is
 * an error) and the conversion of what hwloc made of the input into an
 * iod_topo_node (in this process, under the sanitizers), then every output
 * format over the result. Any input must give a node or an error message;
 * never a crash, a hang or an error without a message.
 */
#include "iod/topo.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_topo_node n;
	struct iod_err e = {0};

	if (size > 256 * 1024)
		return 0;
	int rc = iod_topo_load_xml_buffer((const char *)data, size, &n, &e);
	if (rc < 0) {
		if (!e.msg[0])
			abort(); /* every error says what went wrong */
		return 0;
	}
	if (n.nnuma == 0 || n.ndevices > IOD_TOPO_DEVICES_MAX || n.ngpus > n.ndevices)
		abort(); /* finalize guarantees these */
	struct iod_buf b;
	iod_buf_init(&b);
	if (iod_topo_format_matrix(&n, &b) || iod_topo_format_text(&n, &b) ||
	    iod_topo_format_dot(&n, &b))
		abort();
	iod_buf_free(&b);
	json_t *j = iod_topo_to_json(&n);
	json_decref(j);
	struct iod_bitmap all;
	iod_bitmap_zero(&all);
	if (n.ngpus)
		iod_bitmap_set_range(&all, 0, n.ngpus - 1u);
	(void)iod_topo_gpu_set_score(&n, &all);
	(void)iod_topo_nearest_nic(&n, &all);
	return 0;
}
