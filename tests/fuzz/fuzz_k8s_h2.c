/*
 * fuzz_k8s_h2.c: libFuzzer target for the device plugin's gRPC shell
 * (src/k8s/dp_serve.c): the bytes a client sends on the plugin's socket,
 * after HTTP/2's client preface, through nghttp2 and iod's handlers. It
 * never crashes; whatever it answers starts with the server's SETTINGS.
 * Seeds: requests grpcio sent (tests/fuzz/corpus/k8s_h2/).
 */
#include "iod/k8s.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct iod_topo_node topo;
static bool loaded;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char magic[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct iod_err e = {0};
	if (!loaded && iod_topo_model_load("dgx-h100", &topo, &e))
		abort();
	loaded = true;
	if (size < 1)
		return 0;
	/* a first byte 'P' means the input carries its own preface */
	size_t m = data[0] == 'P' ? 0 : sizeof(magic) - 1;
	uint8_t *in = malloc(m + size);
	struct iod_buf out;
	if (!in)
		return 0;
	memcpy(in, magic, m);
	memcpy(in + m, data, size);
	iod_buf_init(&out);
	int rc = iod_dp_feed(&topo, (enum iod_dp_resource)(size & 1), in, m + size, &out);
	if (rc && rc != -EPROTO && rc != -ENOMEM)
		abort();
	/* the server's preface: a SETTINGS frame (type 4 on stream 0) */
	if (out.len && (out.len < 9 || (uint8_t)out.data[3] != 4))
		abort();
	iod_buf_free(&out);
	free(in);
	return 0;
}
