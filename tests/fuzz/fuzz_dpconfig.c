/*
 * fuzz_dpconfig.c: libFuzzer target for the `iod dp run` YAML config parser
 * (src/flow/dpconfig.c): any bytes must give a config or an error message,
 * never a crash, a leak or an out-of-bounds access. Valid configs are also
 * built into a pipeline, which must succeed or fail cleanly.
 */
#include "iod/flow.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_flow_dp_config c;
	struct iod_err e = {0};
	if (size > 65536)
		return 0;
	if (iod_flow_dp_config_parse((const char *)data, size, "fuzz", &c, &e) == 0) {
		struct iod_flow_dp dp;
		c.ct_sessions = 64; /* keep builds small */
		if (iod_flow_dp_build(&c, 1, &dp, &e) == 0)
			iod_flow_dp_destroy(&dp);
	}
	iod_flow_dp_config_free(&c);
	return 0;
}
