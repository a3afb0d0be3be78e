/*
 * fuzz_top.c: libFuzzer target for the text `iod top` reads: a mesh
 * proxy's /metrics exposition (iod_top_mesh_parse) and a filter typed
 * after `/` (iod_top_table_filter). The input is "FILTER\nMETRICS". Any
 * metrics text must parse into at most the bound of services with a
 * finite p99 or none; any filter must apply or fail with a message;
 * never crash.
 */
#include "iod/obs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_top_snapshot s;
	char filter[IOD_TOP_FILTER_MAX + 8];
	size_t i = 0, k = 0;
	struct iod_err e = {0};

	for (; i < size && data[i] != '\n' && k + 1 < sizeof(filter); i++)
		filter[k++] = data[i] ? (char)data[i] : '?';
	filter[k] = 0;
	char *text = malloc(size - (i < size ? i : size) + 1);
	if (!text)
		return 0;
	size_t n = i < size ? size - i - 1 : 0;
	if (n)
		memcpy(text, data + i + 1, n);
	text[n] = 0;

	struct iod_top_input in = {.mesh_metrics = text, .now_ms = 1};
	iod_top_snapshot_build(&s, &in, NULL);
	if (s.mesh_n > IOD_TOP_SERVICES_MAX)
		abort();
	for (uint32_t m = 0; m < s.mesh_n; m++)
		if (isnan(s.mesh[m].p99_s) || !s.mesh[m].name[0])
			abort();
	for (int v = 0; v < IOD_TOP_VIEW_COUNT; v++) {
		int rc = iod_top_table_filter(&s.views[v], filter, &e);
		if (rc && !e.msg[0])
			abort(); /* every refusal explains itself */
		struct iod_buf b;
		iod_buf_init(&b);
		iod_top_table_format(&s.views[v], 80, &b);
		iod_buf_free(&b);
	}
	iod_top_snapshot_free(&s);
	free(text);
	return 0;
}
