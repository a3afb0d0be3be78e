/*
 * fuzz_sim_job.c: libFuzzer target for the whole-cluster simulator's job
 * and scenario files (src/sim/job.c over src/base/yaml.c). Any input gives
 * a job/scenario or an error message; an accepted one passes the job check
 * and names only nodes the cluster has.
 */
#include "iod/sim_cluster.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_simc_job j;
	struct iod_simc_scenario *sc;
	struct iod_err e = {0};
	char *s;

	if (size > 65536)
		return 0;
	s = malloc(size + 1);
	sc = malloc(sizeof(*sc));
	if (!s || !sc) {
		free(s);
		free(sc);
		return 0;
	}
	memcpy(s, data, size);
	s[size] = 0;
	iod_simc_job_default(&j);
	if (iod_simc_job_parse_yaml(&j, s, size, "fuzz.yaml", &e) == 0)
		IOD_ASSERT(iod_simc_job_check(&j, &e) == 0);
	else
		IOD_ASSERT(e.msg[0]);
	memset(sc, 0, sizeof(*sc));
	iod_simc_config_default(&sc->cfg);
	if (iod_simc_scenario_parse_yaml(sc, s, size, "fuzz.yaml", &e) == 0) {
		IOD_ASSERT(sc->cfg.nodes >= 1 && sc->cfg.faults_n <= IOD_SIMC_FAULTS_MAX);
		for (uint32_t i = 0; i < sc->cfg.faults_n; i++)
			IOD_ASSERT(sc->cfg.faults[i].node < sc->cfg.nodes);
	} else {
		IOD_ASSERT(e.msg[0]);
	}
	free(sc);
	free(s);
	return 0;
}
