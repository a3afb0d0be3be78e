/*
 * fuzz_ckpt_env.c: libFuzzer target for the provisioned store's environment
 * parsers (src/storage/env.c). The input is $IOD_CKPT_TIERS, then after a
 * first newline (when there is one) a peer list ($IOD_CKPT_PEERS). Each
 * either parses (at most IOD_STOR_TIERS_MAX tiers, IOD_CKPT_PEERS_MAX peers)
 * into what formats back to the same values, or fails with a message;
 * never a crash. The whole input is also a chunk server's request target
 * for iod_ckpt_peer_service_may: allowed only under /ckpt/ps-<N>/.
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
	/* a chunk server's path check for a service identity: a request
	 * target it allows is one of ps's replicas' namespaces, nothing else */
	if (iod_ckpt_peer_service_may("ps", text) &&
	    (strncmp(text, "/ckpt/ps-", 9) || text[9] < '0' || text[9] > '9' ||
	     !strchr(text + 9, '/')))
		abort();
	char *nl = memchr(text, '\n', size);
	if (nl) {
		static struct iod_ckpt_env_peer p[IOD_CKPT_PEERS_MAX], q[IOD_CKPT_PEERS_MAX];
		static char list[IOD_CKPT_PEERS_MAX * (IOD_CKPT_PEER_ADDR_MAX + IOD_NAME_MAX + 2)];
		uint32_t n = 0, m = 0;
		*nl = 0;
		if (iod_ckpt_env_peers_parse(nl + 1, p, IOD_CKPT_PEERS_MAX, &n, &e) != 0) {
			if (!e.msg[0])
				abort();
		} else {
			if (n > IOD_CKPT_PEERS_MAX)
				abort();
			/* what parses formats, and parses back the same */
			if (iod_ckpt_env_peers_format(p, n, list, sizeof(list), &e) != 0 ||
			    iod_ckpt_env_peers_parse(list, q, IOD_CKPT_PEERS_MAX, &m, &e) != 0 ||
			    m != n)
				abort();
			for (uint32_t i = 0; i < n; i++)
				if (strcmp(p[i].node, q[i].node) || strcmp(p[i].addr, q[i].addr))
					abort();
		}
		e.msg[0] = 0;
	}
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
