/*
 * fuzz_netpolicy.c: libFuzzer target for the NetPolicy object the API takes
 * (PUT /v1/netpolicies/NAME, include/iod/objects.h): any JSON must pass
 * iod_obj_netpolicy_check or fail with a negative errno and a message; an
 * object that passes compiles into the agent's groups (src/agent/sg.c)
 * without error, and every rule of it parses on its own with bounded
 * ports (min <= max) and a prefix of at most 32.
 */
#include "iod/agent.h"
#include "iod/objects.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_agent_overlay_table t;
	struct iod_err e = {0};
	struct iod_obj_netpolicy p;
	json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	if (!v)
		return 0;
	int rc = iod_obj_netpolicy_from_json(v, &p, &e);
	if (!rc)
		rc = iod_obj_netpolicy_check(&p, &e);
	if (rc && (rc > 0 || !e.msg[0]))
		abort();
	if (!rc) {
		const json_t *dirs[2] = {p.ingress, p.egress};
		for (int d = 0; d < 2; d++)
			for (size_t i = 0; i < json_array_size(dirs[d]); i++) {
				struct iod_obj_netpolicy_rule r;
				if (iod_obj_netpolicy_rule_parse(json_array_get(dirs[d], i), &r,
				                                 &e) ||
				    r.port_min > r.port_max || r.prefix_len > 32)
					abort();
			}
		json_t *list = json_pack("{s:[{s:s,s:O}]}", "items", "name", "g", "value", v);
		if (list && iod_agent_sg_from_state(list, &t, &e))
			abort();
		json_decref(list);
	}
	iod_obj_netpolicy_free(&p);
	json_decref(v);
	return 0;
}
