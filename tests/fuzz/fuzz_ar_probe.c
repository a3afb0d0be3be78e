/*
 * fuzz_ar_probe.c: libFuzzer target for the adaptive-routing probe frames.
 * Any bytes must parse to a probe or to -EINVAL; a parsed request must
 * reflect into a reply that parses with the same fields; never a crash.
 */
#include "iod/ar.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t f[256];
	struct iod_ar_probe_reply a, b;
	bool reply = false, reply2 = false;

	if (size > sizeof(f))
		size = sizeof(f);
	memcpy(f, data, size);
	if (iod_ar_probe_frame_parse(f, (uint32_t)size, 0, &reply, &a))
		return 0;
	if (reply) {
		/* a reply is never reflected again */
		if (iod_ar_probe_frame_reflect(f, (uint32_t)size, 0) == 0)
			abort();
		return 0;
	}
	if (iod_ar_probe_frame_reflect(f, (uint32_t)size, 0))
		abort();
	if (iod_ar_probe_frame_parse(f, (uint32_t)size, 0, &reply2, &b) || !reply2 ||
	    b.sport != a.sport || b.flow_hash != a.flow_hash || b.sent_ns != a.sent_ns ||
	    b.kind != a.kind)
		abort();
	return 0;
}
