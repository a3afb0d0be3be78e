/*
 * fuzz_state.c: libFuzzer target for the state machine's parsers: a command
 * (what the API and Raft hand to iod_state_apply), a group-commit batch
 * frame (iod_state_apply_batch), a snapshot
 * (iod_state_restore) and a deploy body (iod_ctrl_deploy_plan). None may
 * crash, leak or change the state on a rejected input.
 */
#include "iod/api.h"
#include "iod/ctrl.h"
#include "iod/state.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_state *s;
	struct iod_state_result r;
	struct iod_err e = {0};

	if (!s) {
		iod_state_new(&s);
		const char *seed = "{\"op\":\"put\",\"kind\":\"node\",\"name\":\"n1\",\"value\":"
		                   "{\"gpus\":8,\"cpus\":16}}";
		iod_state_apply(s, seed, strlen(seed), &r);
	}
	uint64_t before = iod_state_rev(s);
	if (iod_state_apply(s, data, size, &r) != 0 && iod_state_rev(s) != before)
		abort(); /* a rejected command must not change the revision */

	/* a group-commit batch frame (src/state/batch.c): all or nothing */
	struct iod_state_result br[8];
	uint32_t bn = 0;
	before = iod_state_rev(s);
	if (iod_state_apply_batch(s, data, size, br, 8, &bn) != 0 && iod_state_rev(s) != before)
		abort(); /* a malformed batch must not change anything */

	struct iod_state *t = NULL;
	if (iod_state_new(&t) == 0) {
		iod_state_restore(t, data, size, &e);
		iod_state_free(t);
	}

	char *cmd = NULL;
	json_t *answer = NULL;
	if (iod_ctrl_deploy_plan(s, (const char *)data, size, &cmd, &answer, &e) == 0 && cmd) {
		iod_state_apply(s, cmd, strlen(cmd), &r);
		if (r.code)
			abort(); /* a plan the adapter built must apply */
	}
	free(cmd);
	json_decref(answer);
	/* keep the shared state small so iterations stay fast */
	if (iod_state_total(s) > 1000) {
		iod_state_free(s);
		s = NULL;
	}
	return 0;
}
