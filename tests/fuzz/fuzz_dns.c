/*
 * fuzz_dns.c: libFuzzer target for the mesh DNS responder's query parser.
 * Any datagram gives either a drop (negative) or a reply that fits the
 * buffer and echoes the query id.
 */
#include "iod/mesh_proto.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t lookup(void *ctx, const char *name)
{
	(void)ctx;
	return strlen(name) % 2 ? 0x7f4d0001u : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[IOD_MESH_DNS_MSG_MAX];
	if (size > 4096)
		return 0;
	int n = iod_mesh_dns_answer(data, size, out, sizeof(out), lookup, NULL);
	if (n < 0)
		return 0;
	if ((size_t)n > sizeof(out) || n < 12 || out[0] != data[0] || out[1] != data[1])
		abort();
	return 0;
}
