/*
 * fuzz_sim_astra.c: libFuzzer target for the whole-cluster simulator's
 * ASTRA-sim text workload reader (iod_simc_astra_parse in src/sim/job.c).
 * Any input gives sums or an error message; accepted sums are consistent
 * (layers counted, all-reduce layers within them) and apply to a job or
 * are refused with a message.
 */
#include "iod/sim_cluster.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_simc_astra a;
	struct iod_simc_job j;
	struct iod_err e = {0};
	char *s;

	if (size > 65536)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	if (iod_simc_astra_parse(s, size, "fuzz.txt", &a, &e) == 0) {
		IOD_ASSERT(a.layers >= 1 && a.allreduce_layers <= a.layers);
		IOD_ASSERT(!strcmp(a.parallel, "DATA"));
		iod_simc_job_default(&j);
		if (iod_simc_job_apply_astra(&j, &a, 1.0, "fuzz.txt", &e) == 0)
			IOD_ASSERT(j.step_compute_s > 0 && j.grad_bytes == a.allreduce_bytes);
		else
			IOD_ASSERT(e.msg[0]);
	} else {
		IOD_ASSERT(e.msg[0]);
	}
	free(s);
	return 0;
}
