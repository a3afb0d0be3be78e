/*
 * fuzz_sec_token.c: libFuzzer target for bearer-token parsing (the
 * Authorization header anyone can send). A token that parses must format
 * back to its canonical text, and checking it against a record built from
 * itself must succeed, against a record of another secret fail.
 */
#include "iod/sec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_sec_token t;
	struct iod_sec_identity id;
	struct iod_err e = {0};
	char text[IOD_SEC_TOKEN_LEN + 1], hash[80], again[IOD_SEC_TOKEN_LEN + 1];

	if (iod_sec_token_parse((const char *)data, size, &t, &e)) {
		if (!e.msg[0])
			abort(); /* every refusal says why */
		return 0;
	}
	iod_sec_token_format(&t, text, sizeof(text));
	if (strlen(text) != IOD_SEC_TOKEN_LEN || !memmem(data, size, text, IOD_SEC_TOKEN_LEN))
		abort();
	struct iod_sec_token u;
	if (iod_sec_token_parse(text, strlen(text), &u, &e) || strcmp(u.id, t.id) ||
	    strcmp(u.secret, t.secret))
		abort();
	iod_sec_token_format(&u, again, sizeof(again));
	if (strcmp(text, again))
		abort();
	iod_sec_token_hash(&t, hash, sizeof(hash));
	json_t *rec = json_pack("{s:s, s:s}", "role", "viewer", "hash", hash);
	if (iod_sec_token_check(&t, rec, 1, "c", &id, &e) || id.role != IOD_SEC_ROLE_VIEWER)
		abort();
	u.secret[0] = u.secret[0] == '0' ? '1' : '0';
	if (iod_sec_token_check(&u, rec, 1, "c", &id, &e) != -EACCES)
		abort();
	json_decref(rec);
	return 0;
}
