/*
 * fuzz_mesh_config.c: libFuzzer target for the proxy's JSON config loader
 * (services -> endpoints). Any input is either a registry whose services are
 * sorted with valid VIPs and faults in bounds, or an error with a message.
 */
#include "iod/mesh.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_mesh_registry r;
	struct iod_err e = {0};

	if (!r.svcs && iod_mesh_registry_init(&r, 0))
		abort();
	if (size > 65536)
		return 0;
	int rc = iod_mesh_config_parse((const char *)data, size, &r, &e);
	if (rc < 0) {
		if (!e.msg[0])
			abort();
		return 0;
	}
	for (uint32_t i = 0; i < r.svcs_n; i++) {
		if (i && strcmp(r.svcs[i - 1].name, r.svcs[i].name) >= 0)
			abort();
		if ((r.svcs[i].vip4 >> 24) != 127 || r.svcs[i].eps_n > IOD_MESH_ENDPOINTS_MAX)
			abort();
		const struct iod_mesh_fault *f = &r.svcs[i].fault;
		if (f->delay_pct > 100 || f->abort_pct > 100 ||
		    (f->abort_pct && (f->abort_status < 200 || f->abort_status > 599)) ||
		    (f->delay_pct && !f->delay_ns))
			abort();
	}
	return 0;
}
