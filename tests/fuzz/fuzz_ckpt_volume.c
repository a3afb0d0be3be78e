/*
 * fuzz_ckpt_volume.c: libFuzzer target for the volume archive parser
 * (src/storage/volume.c). Any input either parses, and its entries written
 * again through iod_ckpt_vol_add give back the same bytes, or fails with a
 * message; never a crash.
 */
#include "iod/ckpt.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int again(void *ctx, const struct iod_ckpt_vol_entry *x, struct iod_err *e)
{
	if (iod_ckpt_vol_add(ctx, x, e))
		abort(); /* what the parser took, the writer writes */
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_ckpt_vol_buf b = {0};
	struct iod_err e = {0};
	if (iod_ckpt_vol_parse(data, size, again, &b, &e) != 0) {
		if (!e.msg[0])
			abort(); /* every failure explains itself */
		iod_ckpt_vol_buf_free(&b);
		return 0;
	}
	/* canonical: the entries written again are the input */
	if (iod_ckpt_vol_finish(&b, &e) || b.len != size || memcmp(b.buf, data, size))
		abort();
	iod_ckpt_vol_buf_free(&b);
	return 0;
}
