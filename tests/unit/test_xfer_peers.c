/*
 * test_xfer_peers.c: libiod-xfer peers through the control plane (issue
 * 22): the hex codec, the XferPeer object a blob becomes and back, and the
 * API's checks on it. The API round trip itself runs on a cluster
 * (tests/integration/xfer_peers.sh).
 */
#include "harness.h"
#include "api/validate.h"
#include "iod/objects.h"
#include "iod/xfer.h"

#include <stdlib.h>

TEST(hex_roundtrip_and_bad_input)
{
	uint8_t in[256], out[256];
	char hex[2 * sizeof(in) + 1];
	for (unsigned i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)i;
	iod_hex_encode(in, sizeof(in), hex);
	CHECK_EQ(strlen(hex), 512);
	CHECK(!strncmp(hex, "000102", 6));
	CHECK(!strcmp(hex + 506, "fdfeff"));
	CHECK_EQ(iod_hex_decode(hex, strlen(hex), out, sizeof(out)), 256);
	CHECK(!memcmp(in, out, sizeof(in)));
	CHECK_EQ(iod_hex_decode("ABcd", 4, out, 2), 2);
	CHECK_EQ(out[0], 0xab);
	CHECK_EQ(out[1], 0xcd);
	CHECK_EQ(iod_hex_decode("abc", 3, out, 8), -EINVAL);
	CHECK_EQ(iod_hex_decode("zz", 2, out, 8), -EINVAL);
	CHECK_EQ(iod_hex_decode("abcd", 4, out, 1), -ENOSPC);
	iod_hex_encode(in, 0, hex);
	CHECK_EQ(hex[0], 0);
}

static int validate(const struct iod_state *st, const char *name, const json_t *v,
                    struct iod_err *e)
{
	json_t *answer = NULL;
	int rc = iod_api_validate_put(st, IOD_STATE_XFERPEER, name, v, &answer, e);
	json_decref(answer);
	return rc;
}

TEST(peer_object_roundtrip_and_api_checks)
{
	struct iod_err e = {0};
	struct iod_state *st;
	uint8_t md[300], back[300];
	size_t len = 0;
	for (unsigned i = 0; i < sizeof(md); i++)
		md[i] = (uint8_t)(i * 13 + 5);
	struct iod_xfer_self me = {
	    .service = "train", .ordinal = 2, .node = "n1", .transport = "shm"};
	json_t *v = iod_xfer_peer_obj(&me, "train-2.77", md, sizeof(md));
	CHECK(v);
	CHECK_STR(iod_obj_peek_str(IOD_OBJ_KIND_XFERPEER, v, IOD_OBJ_XFERPEER_REPLICA), "train-2");
	CHECK_STR(iod_obj_peek_str(IOD_OBJ_KIND_XFERPEER, v, IOD_OBJ_XFERPEER_PEER), "train-2.77");
	CHECK_STR(iod_obj_peek_str(IOD_OBJ_KIND_XFERPEER, v, IOD_OBJ_XFERPEER_NODE), "n1");
	CHECK_EQ(iod_xfer_peer_md(v, back, sizeof(back), &len, &e), 0);
	CHECK_EQ(len, sizeof(md));
	CHECK(!memcmp(md, back, len));
	/* a short buffer, a broken blob */
	CHECK_EQ(iod_xfer_peer_md(v, back, 10, &len, &e), -ENOSPC);
	json_t *bad = json_deep_copy(v);
	json_object_set_new(bad, "md", json_string("0g"));
	CHECK_EQ(iod_xfer_peer_md(bad, back, sizeof(back), &len, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "byte 1 is not a hex digit");
	json_object_set_new(bad, "md", json_string("abc"));
	CHECK_EQ(iod_xfer_peer_md(bad, back, sizeof(back), &len, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "even number");
	json_object_del(bad, "md");
	CHECK_EQ(iod_xfer_peer_md(bad, back, sizeof(back), &len, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "\"md\"");

	/* the API: named service.ordinal, of a deployed service */
	CHECK_EQ(iod_state_new(&st), 0);
	CHECK_EQ(validate(st, "train.2", v, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "service train is not deployed");
	struct iod_state_result r;
	json_t *sv = json_pack("{s:s}", "name", "train");
	char *cmd = iod_state_cmd_put(IOD_STATE_SERVICE, "train", sv, 0, -1);
	CHECK_EQ(iod_state_apply(st, cmd, strlen(cmd), &r), 0);
	free(cmd);
	json_decref(sv);
	CHECK_MSG(validate(st, "train.2", v, &e) == 0, "%s", e.msg);
	CHECK_EQ(validate(st, "train.3", v, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "must be named train.2");
	CHECK_EQ(validate(st, "train.2", bad, &e), -EINVAL);
	iod_state_free(st);
	json_decref(bad);
	json_decref(v);
}
