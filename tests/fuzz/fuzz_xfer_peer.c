/*
 * fuzz_xfer_peer.c: libFuzzer target for the XferPeer object a replica
 * publishes (include/iod/xfer.h, iod_xfer_peer_md): any JSON must give a
 * blob or fail with -EINVAL/-ENOSPC and a message; a blob it gives must come
 * back the same through iod_xfer_peer_obj (hex of one spelling: lowercase).
 */
#include "iod/objects.h"
#include "iod/xfer.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t md[4096], back[4096];
	struct iod_err e = {0};
	size_t len = 0, len2 = 0;
	json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	if (!v)
		return 0;
	int rv = iod_xfer_peer_md(v, md, sizeof(md), &len, &e);
	if (rv && ((rv != -EINVAL && rv != -ENOSPC) || !e.msg[0]))
		abort();
	if (!rv) {
		struct iod_xfer_self me = {.service = "s", .ordinal = 0};
		json_t *o = iod_xfer_peer_obj(&me, "p", md, len);
		if (!o || iod_xfer_peer_md(o, back, sizeof(back), &len2, &e) || len2 != len ||
		    memcmp(md, back, len))
			abort();
		json_decref(o);
	}
	json_decref(v);
	return 0;
}
