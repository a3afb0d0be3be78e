/*
 * token.c: bearer tokens: their text form, the hash a Token object stores,
 * and the check of a presented token against that object (pure).
 *
 * The secret has 192 random bits, so one SHA-256 is the right store (a slow
 * password hash protects low-entropy secrets; this one is not guessable),
 * and the comparison takes constant time so the answer's timing says
 * nothing about how much of a guess matched. The parser is strict and fed
 * by anyone who can reach the API: tests/fuzz/fuzz_sec_token.c. No I/O, no
 * clock (the caller passes now_ms).
 */
#include "iod/sec.h"

#include <gnutls/crypto.h>
#include <string.h>

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

int iod_sec_token_parse(const char *text, size_t len, struct iod_sec_token *out, struct iod_err *e)
{
	static const char prefix[] = "iod.";
	const size_t id_at = sizeof(prefix) - 1, sec_at = id_at + IOD_SEC_TOKEN_ID_HEX + 1;

	if (!text)
		return iod_err_set(e, -EINVAL, "no token");
	while (len && (text[0] == ' ' || text[0] == '\t' || text[0] == '\n' || text[0] == '\r')) {
		text++;
		len--;
	}
	while (len && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\n' ||
	               text[len - 1] == '\r'))
		len--;
	if (len != IOD_SEC_TOKEN_LEN || memcmp(text, prefix, id_at) || text[sec_at - 1] != '.')
		return iod_err_set(e, -EINVAL,
		                   "malformed token: want iod.<%d hex>.<%d hex> (from `iod token "
		                   "create`)",
		                   IOD_SEC_TOKEN_ID_HEX, IOD_SEC_TOKEN_SECRET_HEX);
	for (size_t i = 0; i < IOD_SEC_TOKEN_ID_HEX; i++)
		if (!is_hex(text[id_at + i]))
			return iod_err_set(e, -EINVAL,
			                   "malformed token: its id is not lower-case hex");
	for (size_t i = 0; i < IOD_SEC_TOKEN_SECRET_HEX; i++)
		if (!is_hex(text[sec_at + i]))
			return iod_err_set(e, -EINVAL,
			                   "malformed token: its secret is not lower-case hex");
	memcpy(out->id, text + id_at, IOD_SEC_TOKEN_ID_HEX);
	out->id[IOD_SEC_TOKEN_ID_HEX] = 0;
	memcpy(out->secret, text + sec_at, IOD_SEC_TOKEN_SECRET_HEX);
	out->secret[IOD_SEC_TOKEN_SECRET_HEX] = 0;
	return 0;
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = 0;
}

void iod_sec_token_from_bytes(const uint8_t rnd[30], struct iod_sec_token *out)
{
	hex(rnd, IOD_SEC_TOKEN_ID_HEX / 2, out->id);
	hex(rnd + IOD_SEC_TOKEN_ID_HEX / 2, IOD_SEC_TOKEN_SECRET_HEX / 2, out->secret);
}

void iod_sec_token_format(const struct iod_sec_token *t, char *buf, size_t len)
{
	snprintf(buf, len, "iod.%s.%s", t->id, t->secret);
}

void iod_sec_token_hash(const struct iod_sec_token *t, char *buf, size_t len)
{
	uint8_t d[32];
	char h[IOD_SEC_HASH_HEX + 1];
	IOD_ASSERT(gnutls_hash_fast(GNUTLS_DIG_SHA256, t->secret, strlen(t->secret), d) == 0);
	hex(d, sizeof(d), h);
	snprintf(buf, len, "sha256:%s", h);
}

/* Compare two equal-length strings in time independent of where they differ. */
static bool same_ct(const char *a, const char *b, size_t n)
{
	unsigned char diff = 0;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

int iod_sec_token_check(const struct iod_sec_token *t, const json_t *record, uint64_t now_ms,
                        const char *cluster, struct iod_sec_identity *out, struct iod_err *e)
{
	char want[8 + IOD_SEC_HASH_HEX + 1];
	const char *hash = NULL, *role_s = NULL, *user = NULL, *node = NULL;
	uint64_t expires = 0;
	enum iod_sec_role role;
	struct iod_sec_identity id;

	if (!record)
		return iod_err_set(e, -EACCES, "token %s is not known (revoked or never issued)",
		                   t->id);
	if (iod_json_get_str(record, "hash", &hash) || iod_json_get_str(record, "role", &role_s) ||
	    iod_sec_role_parse(role_s, &role) || role == IOD_SEC_ROLE_SERVER)
		return iod_err_set(e, -EACCES, "token %s has a malformed record", t->id);
	iod_sec_token_hash(t, want, sizeof(want));
	if (strlen(hash) != strlen(want) || !same_ct(hash, want, strlen(want)))
		return iod_err_set(e, -EACCES, "token %s: wrong secret", t->id);
	if (!iod_json_get_u64(record, "expires_ms", &expires) && expires && now_ms >= expires)
		return iod_err_set(e, -EACCES, "token %s expired %llu s ago", t->id,
		                   (unsigned long long)((now_ms - expires) / 1000));
	memset(&id, 0, sizeof(id));
	id.role = role;
	if (cluster)
		snprintf(id.cluster, sizeof(id.cluster), "%s", cluster);
	snprintf(id.via, sizeof(id.via), "token %s", t->id);
	if (role == IOD_SEC_ROLE_NODE) {
		/* a join token: it may only be exchanged for a node certificate */
		id.kind = IOD_SEC_KIND_BOOTSTRAP;
		if (!iod_json_get_str(record, "node", &node) && node[0] && iod_sec_name_valid(node))
			snprintf(id.name, sizeof(id.name), "%s", node);
	} else {
		id.kind = IOD_SEC_KIND_USER;
		if (!iod_json_get_str(record, "user", &user) && iod_sec_name_valid(user))
			snprintf(id.name, sizeof(id.name), "%s", user);
		else
			snprintf(id.name, sizeof(id.name), "token-%s", t->id);
	}
	*out = id;
	return 0;
}
