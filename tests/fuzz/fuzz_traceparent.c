/*
 * fuzz_traceparent.c: libFuzzer target for W3C traceparent parsing. A value
 * that parses must have non-zero ids and, for version 00, format back to
 * exactly the input.
 */
#include "iod/mesh_proto.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_mesh_traceparent tp;
	char out[56];
	bool nz = false;

	if (iod_mesh_traceparent_parse((const char *)data, size, &tp))
		return 0;
	for (int i = 0; i < 16; i++)
		nz |= tp.trace_id[i] != 0;
	if (!nz)
		abort();
	nz = false;
	for (int i = 0; i < 8; i++)
		nz |= tp.span_id[i] != 0;
	if (!nz)
		abort();
	if (size == 55 && data[0] == '0' && data[1] == '0') {
		iod_mesh_traceparent_format(&tp, out);
		if (memcmp(out, data, 55))
			abort();
	}
	return 0;
}
