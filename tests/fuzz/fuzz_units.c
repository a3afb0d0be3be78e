/*
 * fuzz_units.c: libFuzzer target for the unit parsers (sizes, bandwidths,
 * durations, percentages, bounds) and the cpulist parser. Any input must give
 * either a value or an error message; never a crash or a silent garbage value.
 */
#include "iod/base.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[256];
	struct iod_err e = {0};
	uint64_t v;
	uint32_t bp;
	struct iod_bound b;
	struct iod_bitmap bm;

	if (size >= sizeof(s))
		size = sizeof(s) - 1;
	memcpy(s, data, size);
	s[size] = 0;
	if (iod_parse_size(s, &v, &e) < 0 && !e.msg[0])
		abort();
	e.msg[0] = 0;
	if (iod_parse_bandwidth(s, &v, &e) < 0 && !e.msg[0])
		abort();
	e.msg[0] = 0;
	if (iod_parse_duration(s, &v, &e) < 0 && !e.msg[0])
		abort();
	e.msg[0] = 0;
	if (iod_parse_percent(s, &bp, &e) == 0 && bp > 10000)
		abort();
	iod_parse_bound(s, IOD_UNIT_DURATION, &b, &e);
	if (iod_bitmap_parse(s, &bm, &e) == 0) {
		char out[4096];
		struct iod_bitmap again;
		if (iod_bitmap_format(&bm, out, sizeof(out)) == 0 &&
		    (iod_bitmap_parse(out, &again, NULL) || !iod_bitmap_equal(&bm, &again)))
			abort();
	}
	return 0;
}
