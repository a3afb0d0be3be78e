/*
 * seal.c: secrets at rest: AES-256-GCM under the cluster's secrets key,
 * the secret's name bound in as associated data (a sealed value moved to
 * another name does not open), in a printable "v1:<base64>" form that can
 * sit in a JSON object in the replicated state.
 *
 * The key never enters the state: each server reads it from its PKI
 * directory (0600). The nonce comes from the caller (96 random bits per
 * seal; GCM's limit of 2^32 messages per key is far away for secrets).
 * No I/O, no clock.
 */
#include "iod/sec.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>

#define NONCE_BYTES 12
#define TAG_BYTES 16

static int aead(const uint8_t key[IOD_SEC_KEY_BYTES], gnutls_aead_cipher_hd_t *h)
{
	gnutls_datum_t k = {(unsigned char *)key, IOD_SEC_KEY_BYTES};
	return gnutls_aead_cipher_init(h, GNUTLS_CIPHER_AES_256_GCM, &k) ? -EIO : 0;
}

int iod_sec_seal(const uint8_t key[IOD_SEC_KEY_BYTES], const uint8_t nonce[12], const char *name,
                 const void *plain, size_t len, char **out, struct iod_err *e)
{
	gnutls_aead_cipher_hd_t h;
	size_t n = NONCE_BYTES + len + TAG_BYTES, ct_len = len + TAG_BYTES;
	uint8_t *raw;
	gnutls_datum_t in, b64 = {0};
	int rc;

	*out = NULL;
	if (len > IOD_SEC_SECRET_MAX)
		return iod_err_set(e, -E2BIG, "secret %s: %zu bytes (at most %u)", name, len,
		                   IOD_SEC_SECRET_MAX);
	if (!(raw = malloc(n)))
		return iod_err_set(e, -ENOMEM, "out of memory");
	if (aead(key, &h)) {
		free(raw);
		return iod_err_set(e, -EIO, "AES-256-GCM is not available");
	}
	memcpy(raw, nonce, NONCE_BYTES);
	rc = gnutls_aead_cipher_encrypt(h, nonce, NONCE_BYTES, name, strlen(name), TAG_BYTES, plain,
	                                len, raw + NONCE_BYTES, &ct_len);
	gnutls_aead_cipher_deinit(h);
	if (rc || ct_len != len + TAG_BYTES) {
		free(raw);
		return iod_err_set(e, -EIO, "sealing secret %s: %s", name, gnutls_strerror(rc));
	}
	in.data = raw;
	in.size = (unsigned)n;
	rc = gnutls_base64_encode2(&in, &b64);
	free(raw);
	if (rc)
		return iod_err_set(e, -ENOMEM, "encoding secret %s", name);
	*out = malloc(b64.size + 4);
	if (*out) {
		memcpy(*out, "v1:", 3);
		memcpy(*out + 3, b64.data, b64.size);
		(*out)[3 + b64.size] = 0;
	}
	gnutls_free(b64.data);
	return *out ? 0 : iod_err_set(e, -ENOMEM, "out of memory");
}

int iod_sec_open(const uint8_t key[IOD_SEC_KEY_BYTES], const char *name, const char *sealed,
                 void **plain, size_t *len, struct iod_err *e)
{
	gnutls_aead_cipher_hd_t h;
	gnutls_datum_t in, raw = {0};
	size_t pt_len;
	uint8_t *pt;
	int rc;

	*plain = NULL;
	*len = 0;
	if (!sealed || strncmp(sealed, "v1:", 3))
		return iod_err_set(e, -EBADMSG, "secret %s: not a sealed value (want v1:...)",
		                   name);
	in.data = (unsigned char *)sealed + 3;
	in.size = (unsigned)strlen(sealed + 3);
	if (in.size > 2 * IOD_SEC_SECRET_MAX || gnutls_base64_decode2(&in, &raw))
		return iod_err_set(e, -EBADMSG, "secret %s: sealed value is not base64", name);
	if (raw.size < NONCE_BYTES + TAG_BYTES) {
		gnutls_free(raw.data);
		return iod_err_set(e, -EBADMSG, "secret %s: sealed value too short", name);
	}
	pt_len = raw.size - NONCE_BYTES - TAG_BYTES;
	pt = malloc(pt_len + 1);
	if (!pt || aead(key, &h)) {
		free(pt);
		gnutls_free(raw.data);
		return iod_err_set(e, -EIO, "AES-256-GCM is not available");
	}
	rc =
	    gnutls_aead_cipher_decrypt(h, raw.data, NONCE_BYTES, name, strlen(name), TAG_BYTES,
	                               raw.data + NONCE_BYTES, raw.size - NONCE_BYTES, pt, &pt_len);
	gnutls_aead_cipher_deinit(h);
	gnutls_free(raw.data);
	if (rc) {
		free(pt);
		return iod_err_set(e, -EBADMSG,
		                   "secret %s does not open: wrong key, wrong name or tampered",
		                   name);
	}
	pt[pt_len] = 0;
	*plain = pt;
	*len = pt_len;
	return 0;
}
