/*
 * fuzz_config.c: libFuzzer target for the cluster configuration's parsers
 * (src/config/schema.c): the first byte picks a mode. Mode 0: the input is a
 * stored config/cluster document (iod_config_doc_parse); an accepted one
 * must survive doc_next, rollback lookups and effective values. Otherwise:
 * "KEY=VALUE" as `iod config set` takes it; a parsed value must check,
 * format, and parse again to the same value. Never a crash, never an error
 * without a message.
 */
#include "iod/config.h"
#include "iod/limits.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void doc(const char *s, size_t n)
{
	struct iod_err e = {0};
	json_t *d = NULL, *a = NULL;
	struct iod_config_fallback fb[IOD_CONFIG_FALLBACKS_MAX];
	struct iod_config_caps caps = {.rdma = n & 1};
	size_t fb_n = 0;
	if (iod_config_doc_parse(s, n, &d, &e)) {
		if (!e.msg[0])
			abort();
		return;
	}
	const json_t *st = iod_config_doc_settings(d);
	if (iod_config_settings_check(st, &e))
		abort();
	json_t *next = iod_config_doc_next(d, 5, (json_t *)st, "fuzz", 1);
	if (!next || iod_config_doc_check(next, &e))
		abort();
	if (iod_config_doc_at(next, 6, 5, &e) == NULL)
		abort();
	if (iod_config_effective(st, &caps, &a, fb, IOD_ARRAY_LEN(fb), &fb_n) ||
	    iod_config_settings_check(a, &e))
		abort();
	json_decref(a);
	json_decref(next);
	json_decref(d);
}

static void kv(const char *s)
{
	struct iod_err e = {0};
	const struct iod_config_key *k;
	json_t *v = NULL, *again = NULL;
	char key[128], text[128];
	const char *eq = strchr(s, '=');
	if (!eq || (size_t)(eq - s) >= sizeof(key))
		return;
	memcpy(key, s, (size_t)(eq - s));
	key[eq - s] = 0;
	if (iod_config_key_find(key, &k, &e)) {
		if (!e.msg[0])
			abort();
		return;
	}
	if (iod_config_value_parse(k, eq + 1, &v, &e)) {
		if (!e.msg[0])
			abort();
		return;
	}
	if (iod_config_value_check(k, v, &e))
		abort();
	iod_config_value_format(k, v, text, sizeof(text));
	if (!text[0] || iod_config_value_parse(k, text, &again, &e) || !json_equal(v, again))
		abort();
	json_decref(v);
	json_decref(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;
	if (!size || size > 64 * 1024)
		return 0;
	s = malloc(size);
	if (!s)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = 0;
	if (data[0] % 2 == 0)
		doc(s, size - 1);
	else
		kv(s);
	free(s);
	return 0;
}
