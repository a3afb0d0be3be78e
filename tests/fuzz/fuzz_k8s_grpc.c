/*
 * fuzz_k8s_grpc.c: libFuzzer target for what a device plugin client sends
 * (src/k8s/dp_wire.c): a gRPC request body (5-byte prefix and a protobuf
 * message) of GetPreferredAllocation, Allocate or PreStartContainer. The
 * first byte picks the method; the rest is the body, and is also decoded as
 * a bare message. Every refusal carries a message; an accepted request is
 * answered on the DGX-H100 model and the answer encoded, as the shell does.
 */
#include "iod/k8s.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct iod_topo_node topo;
static bool loaded;

static void answer(enum iod_dp_req_kind kind, const struct iod_dp_req *q)
{
	struct iod_buf out;
	iod_buf_init(&out);
	for (uint32_t i = 0; i < q->n; i++) {
		const struct iod_dp_creq *c = &q->c[i];
		const struct iod_dp_ids *all[] = {&c->available, &c->must, &c->ids};
		for (unsigned k = 0; k < 3; k++)
			for (uint32_t j = 0; j < all[k]->n; j++)
				if (!all[k]->id[j][0] || strlen(all[k]->id[j]) >= IOD_DP_ID_MAX)
					abort(); /* ids are non-empty and NUL-terminated */
		struct iod_err e = {0};
		for (int r = 0; r < 2; r++) {
			if (kind == IOD_DP_REQ_PREFERRED) {
				struct iod_dp_ids ids;
				if (!iod_dp_preferred(&topo, (enum iod_dp_resource)r, c, &ids,
				                      &e)) {
					if (ids.n != (uint32_t)c->size)
						abort(); /* exactly the size asked */
					iod_dp_enc_preferred(&out, &ids, 1);
				} else if (!e.msg[0]) {
					abort();
				}
			} else {
				struct iod_dp_alloc a;
				if (!iod_dp_allocate(&topo, (enum iod_dp_resource)r, &c->ids, &a,
				                     &e))
					iod_dp_enc_allocate(&out, &a, 1);
				else if (!e.msg[0])
					abort();
			}
		}
	}
	iod_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_err e = {0};
	if (!loaded && iod_topo_model_load("dgx-h100", &topo, &e))
		abort();
	loaded = true;
	if (size < 1)
		return 0;
	enum iod_dp_req_kind kind = (enum iod_dp_req_kind)(data[0] % 3);
	const uint8_t *msg = NULL;
	size_t mlen = 0;
	struct iod_dp_req *q = malloc(sizeof(*q));
	if (!q)
		return 0;
	long k = iod_grpc_frame_parse(data + 1, size - 1, 1u << 16, &msg, &mlen, &e);
	if (k < 0 && !e.msg[0])
		abort();
	if (k > 0 && (msg != data + 6 || (size_t)k != 5 + mlen || (size_t)k > size - 1))
		abort(); /* the message lies inside the input */
	if (k > 0 && !iod_dp_req_decode(kind, msg, mlen, q, &e))
		answer(kind, q);
	memset(&e, 0, sizeof(e));
	if (!iod_dp_req_decode(kind, data + 1, size - 1, q, &e))
		answer(kind, q);
	else if (!e.msg[0])
		abort(); /* every refusal says why */
	free(q);
	return 0;
}
