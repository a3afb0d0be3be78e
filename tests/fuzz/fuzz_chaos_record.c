/*
 * fuzz_chaos_record.c: libFuzzer target for what `iod chaos` parses besides
 * histories (src/chaos/fault.c): fault records as the keeper reads them back
 * from STATE_DIR/chaos, and user input (targets, durations, nemeses). A
 * record that parses must survive a round trip unchanged, its members and
 * cuts within bounds, and its nft script must build.
 */
#include "iod/chaos.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_err e = {0};
	char s[256];
	size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1;
	memcpy(s, data, n);
	s[n] = 0;
	struct iod_chaos_target t[IOD_CHAOS_MEMBERS_MAX];
	int k = iod_chaos_target_list_parse(s, t, IOD_CHAOS_MEMBERS_MAX, &e);
	if (k > IOD_CHAOS_MEMBERS_MAX)
		abort();
	uint64_t ms = 0;
	if (!iod_chaos_duration_parse(s, &ms, &e) &&
	    (ms < IOD_CHAOS_DURATION_MIN_MS || ms > IOD_CHAOS_DURATION_MAX_MS))
		abort();
	uint32_t mask = 0;
	iod_chaos_nemesis_parse(s, &mask, &e);

	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	if (!j)
		return 0;
	struct iod_chaos_fault *f = calloc(2, sizeof(*f));
	if (!f)
		abort();
	if (!iod_chaos_fault_from_json(j, &f[0], &e)) {
		if (f[0].n > IOD_CHAOS_MEMBERS_MAX)
			abort();
		for (uint32_t i = 0; i < f[0].n; i++)
			if (f[0].m[i].nsocks > IOD_CHAOS_SOCKS_MAX || f[0].m[i].nports > 2 ||
			    f[0].m[i].argv_len > IOD_CHAOS_CMDLINE_MAX)
				abort();
		json_t *back = iod_chaos_fault_to_json(&f[0]);
		if (!back || iod_chaos_fault_from_json(back, &f[1], &e))
			abort(); /* what we write we must read */
		if (strcmp(f[0].id, f[1].id) || f[0].n != f[1].n ||
		    memcmp(&f[0].g, &f[1].g, sizeof(f[0].g)))
			abort();
		json_decref(back);
		struct iod_buf b;
		iod_buf_init(&b);
		iod_chaos_nft_script(&f[0], &b, &e);
		iod_buf_free(&b);
	}
	free(f);
	json_decref(j);
	return 0;
}
