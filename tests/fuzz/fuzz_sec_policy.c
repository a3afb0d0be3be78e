/*
 * fuzz_sec_policy.c: libFuzzer target for service-policy parsing (the
 * spec's security.policies and Policy objects through the API). A set that
 * parses must render to JSON that parses to the same set, and every
 * decision over it must name the policy (or default) that decided.
 */
#include "iod/sec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct iod_sec_policy_set a, b;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_err e = {0};
	json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!j)
		return 0;
	a.n = b.n = 0;
	if (iod_sec_policy_parse(j, "default", &a, &e)) {
		if (!e.msg[0] || a.n)
			abort();
		json_decref(j);
		return 0;
	}
	json_decref(j);
	json_t *arr = json_array();
	for (uint32_t i = 0; i < a.n; i++)
		json_array_append_new(arr, iod_sec_policy_to_json(&a.p[i]));
	if (iod_sec_policy_parse(arr, "default", &b, &e) || b.n != a.n)
		abort();
	for (uint32_t i = 0; i < a.n; i++) {
		json_t *x = iod_sec_policy_to_json(&a.p[i]), *y = iod_sec_policy_to_json(&b.p[i]);
		if (!json_equal(x, y))
			abort();
		json_decref(x);
		json_decref(y);
	}
	json_decref(arr);
	for (uint32_t i = 0; i < a.n && i < 8; i++) {
		struct iod_sec_verdict v;
		const struct iod_sec_policy *p = &a.p[i];
		iod_sec_policy_decide(&a, p->from_tenant, p->from, p->to_tenant, p->to, "GET",
		                      p->ports_n ? p->ports[0] : 80, &v);
		if (!v.policy[0] || !v.reason[0])
			abort();
	}
	return 0;
}
