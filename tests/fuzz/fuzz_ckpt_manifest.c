/*
 * fuzz_ckpt_manifest.c: libFuzzer target for the checkpoint manifest parser
 * (src/storage/manifest.c). Any input either parses into a bounded manifest
 * that formats back to the same text, or fails with a message; never a crash.
 */
#include "iod/ckpt.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_ckpt_manifest m;
	struct iod_err e = {0};
	char *text;
	size_t len;

	if (iod_ckpt_manifest_parse((const char *)data, size, &m, &e) != 0) {
		if (!e.msg[0])
			abort(); /* every failure explains itself */
		return 0;
	}
	/* the text form is canonical: a parsed manifest formats to its input */
	if (iod_ckpt_manifest_format(&m, &text, &len, &e) != 0)
		abort();
	if (len != size || memcmp(text, data, size))
		abort();
	free(text);
	iod_ckpt_manifest_free(&m);
	return 0;
}
