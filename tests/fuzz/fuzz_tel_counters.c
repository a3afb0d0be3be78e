/*
 * fuzz_tel_counters.c: libFuzzer target for the simulated-GPU counters
 * protocol (iod_tel_counters_parse): a file any workload writes and the
 * agent reads every second. Any input parses or fails with a message;
 * never crash; a parsed reading always gives a sample within bounds.
 */
#include "iod/obs.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_tel_counters c, z = {0};
	struct iod_err e = {0};
	if (iod_tel_counters_parse((const char *)data, size, &c, &e)) {
		if (!e.msg[0])
			abort();
		return 0;
	}
	struct iod_tel_gpu_sample s;
	iod_tel_sim_gpu(&z, &c, 1000, 1 + (uint32_t)(size % 8), 80ull << 30, 1, &s);
	if (!(s.util_pct >= 0 && s.util_pct <= 100) || s.mem_used_bytes > (80ull << 30))
		abort();
	return 0;
}
