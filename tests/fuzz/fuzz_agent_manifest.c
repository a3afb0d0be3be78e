/*
 * fuzz_agent_manifest.c: libFuzzer target for the agent's desired-replica
 * JSON (manifest files and control-plane Replica objects). Any input must
 * either parse into bounded records or fail with a message; never crash.
 */
#include "iod/agent.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_agent_replica *r;
	uint32_t n = 0;
	struct iod_err e = {0};

	if (!r)
		r = calloc(8, sizeof(*r));
	if (!r)
		return 0;
	if (iod_agent_manifest_parse((const char *)data, size, r, 8, &n, &e) == 0) {
		for (uint32_t i = 0; i < n; i++) {
			json_t *j = iod_agent_replica_to_json(&r[i]);
			json_decref(j);
		}
	} else if (!e.msg[0]) {
		abort(); /* every failure explains itself */
	}
	return 0;
}
