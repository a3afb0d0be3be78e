/*
 * fuzz_cni_config.c: libFuzzer target for the CNI network config a runtime
 * writes on the plugin's stdin (src/k8s/cni.c). The first byte picks the
 * command; every refusal carries a spec error code and a message, and an
 * accepted config builds a result and an error JSON in its own cniVersion.
 */
#include "iod/k8s.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_cni_conf c;
	struct iod_cni_error err = {0};
	if (size < 1)
		return 0;
	enum iod_cni_cmd cmd = (enum iod_cni_cmd)(data[0] % 6);
	int rc = iod_cni_conf_parse((const char *)data + 1, size - 1, cmd, &c, &err);
	if (rc) {
		if (err.code <= 0 || !err.msg[0])
			abort(); /* every refusal is a spec error with a message */
		json_t *j = iod_cni_error_json(c.version, &err);
		if (!j || !json_object_get(j, "code"))
			abort();
		json_decref(j);
		iod_cni_conf_free(&c);
		return 0;
	}
	if (!c.version[0])
		abort();
	if (cmd == IOD_CNI_ADD) {
		struct iod_cni_attach a = {.bridge = "br",
		                           .host_if = "h",
		                           .ifname = "eth0",
		                           .sandbox = "/run/netns/x",
		                           .addr = 0x0a000002,
		                           .gateway = 0x0a000001,
		                           .prefix = 24};
		json_t *r = iod_cni_result(&c, &a);
		json_t *ips = json_object_get(r, "ips");
		if (!json_is_array(ips) || !json_array_size(ips))
			abort();
		json_decref(r);
	}
	iod_cni_conf_free(&c);
	return 0;
}
