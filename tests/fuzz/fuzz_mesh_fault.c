/*
 * fuzz_mesh_fault.c: libFuzzer target for Fault objects (`iod chaos
 * delay|abort service/NAME`, include/iod/objects.h) as the API validates
 * them and every proxy reads them: any JSON is either a fault that checks,
 * whose fields are in bounds and which writes back and reads again the
 * same, or an error with a message.
 */
#include "iod/objects.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_obj_fault f, g;
	struct iod_err e = {0};
	json_t *v = NULL;

	if (size > 65536 || iod_json_parse((const char *)data, size, &v, &e))
		return 0;
	int rc = iod_obj_fault_from_json(v, &f, &e);
	if (!rc)
		rc = iod_obj_fault_check(&f, &e);
	if (rc) {
		if (!e.msg[0])
			abort();
	} else {
		if (f.percent < 1 || f.percent > 100 || !f.until_ms || !f.service[0])
			abort();
		if (strcmp(f.action, "delay") && strcmp(f.action, "abort"))
			abort();
		json_t *back = iod_obj_fault_to_json(&f);
		if (!back || iod_obj_fault_from_json(back, &g, &e) || iod_obj_fault_check(&g, &e) ||
		    g.percent != f.percent || g.until_ms != f.until_ms ||
		    strcmp(g.action, f.action))
			abort();
		iod_obj_fault_free(&g);
		json_decref(back);
	}
	iod_obj_fault_free(&f);
	json_decref(v);
	return 0;
}
