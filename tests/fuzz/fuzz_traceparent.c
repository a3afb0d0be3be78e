/*
 * fuzz_traceparent.c: libFuzzer target for W3C traceparent and tracestate
 * parsing. A traceparent that parses must have non-zero ids and, for
 * version 00, format back to exactly the input. A tracestate list that is
 * kept is no longer than the input, and cleaning it again changes nothing.
 */
#include "iod/mesh_proto.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void tracestate(const uint8_t *data, size_t size)
{
	static char out[8192], again[8192];
	if (size > sizeof(out))
		return;
	int n = iod_mesh_tracestate_clean((const char *)data, size, out, sizeof(out));
	if (n < 0)
		return;
	if ((size_t)n > size)
		abort();
	int m = iod_mesh_tracestate_clean(out, (size_t)n, again, sizeof(again));
	if (m != n || memcmp(out, again, (size_t)n))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_mesh_traceparent tp;
	char out[56];
	bool nz = false;

	tracestate(data, size);

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
