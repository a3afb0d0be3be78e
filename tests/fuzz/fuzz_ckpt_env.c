/*
 * fuzz_ckpt_env.c: libFuzzer target for the provisioned store's environment
 * parser (src/storage/env.c). Any input either parses into at most
 * IOD_STOR_TIERS_MAX tiers that format back to the same text, or fails with
 * a message; never a crash.
 */
#include "iod/ckpt.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_ckpt_env env;
	struct iod_err e = {0};
	const char *dirs[IOD_STOR_TIERS_MAX];
	char *text = malloc(size + 1), out[IOD_STOR_TIERS_MAX * (IOD_PATH_MAX + 24)];

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	if (iod_ckpt_env_parse(text, "1048576", "3", &env, &e) != 0) {
		if (!e.msg[0])
			abort(); /* every failure explains itself */
		free(text);
		return 0;
	}
	if (env.cfg.tiers_n == 0 || env.cfg.tiers_n > IOD_STOR_TIERS_MAX || env.replicas != 3)
		abort();
	for (uint32_t i = 0; i < env.cfg.tiers_n; i++)
		dirs[i] = env.dirs[i];
	/* canonical up to the medium's spelling and the quota's digits: parse
	 * what it formats and get the same tiers */
	if (iod_ckpt_env_format(env.cfg.tiers, dirs, env.cfg.tiers_n, out, sizeof(out), &e) == 0) {
		static struct iod_ckpt_env again;
		if (iod_ckpt_env_parse(out, "1048576", "3", &again, &e) != 0 ||
		    again.cfg.tiers_n != env.cfg.tiers_n ||
		    memcmp(again.cfg.tiers, env.cfg.tiers, sizeof(env.cfg.tiers)) ||
		    memcmp(again.dirs, env.dirs, sizeof(env.dirs)))
			abort();
	}
	free(text);
	return 0;
}
