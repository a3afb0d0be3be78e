/*
 * fuzz_xfer_wire.c: libFuzzer target for libiod-xfer's wire format (the
 * metadata blob and the notification, include/iod/xfer.h). Any input must
 * decode or fail with -EPROTO and a message; what decodes must re-encode to
 * the same bytes (the format has one spelling per message).
 */
#include "iod/xfer.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_xfer_wire_md m;
	static uint8_t out[IOD_XFER_MD_BYTES_MAX];
	struct iod_xfer_wire_notif n;
	struct iod_err e = {0};
	int rv = iod_xfer_wire_md_decode(data, size, &m, &e);
	if (rv && (rv != -EPROTO || !e.msg[0]))
		abort();
	if (!rv) {
		int len = iod_xfer_wire_md_encode(&m, out, sizeof(out), &e);
		if (len < 0 || (size_t)len != size || memcmp(out, data, size))
			abort();
	}
	e.msg[0] = 0;
	rv = iod_xfer_wire_notif_decode(data, size, &n, &e);
	if (rv && (rv != -EPROTO || !e.msg[0]))
		abort();
	if (!rv) {
		int len = iod_xfer_wire_notif_encode(&n, out, sizeof(out), &e);
		if (len < 0 || (size_t)len != size || memcmp(out, data, size))
			abort();
	}
	return 0;
}
