/*
 * fuzz_seccomp_profile.c: libFuzzer target for OCI / Docker seccomp profiles
 * (sandbox.seccomp in a spec, parsed again by the node agent before it
 * compiles the filter). Any input must either parse into a bounded profile,
 * whose every rule names at least one syscall and at most six argument
 * comparisons, or fail with a message; never crash.
 */
#include "iod/spec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_seccomp_profile *p = NULL;
	struct iod_err e = {0};

	if (iod_seccomp_profile_parse((const char *)data, size, &p, &e)) {
		if (!e.msg[0])
			abort(); /* every failure explains itself */
		return 0;
	}
	if (p->names_n > IOD_SECCOMP_NAMES_MAX || p->rules_n > IOD_SECCOMP_RULES_MAX)
		abort();
	for (uint32_t i = 0; i < p->rules_n; i++) {
		const struct iod_seccomp_rule *r = &p->rules[i];
		if (!r->names_n || r->names + r->names_n > p->names_n ||
		    r->args_n > IOD_SECCOMP_ARGS_MAX)
			abort();
		for (uint32_t k = 0; k < r->names_n; k++)
			if (!p->names[r->names + k][0])
				abort();
		for (uint32_t k = 0; k < r->args_n; k++)
			if (r->args[k].index > 5)
				abort();
	}
	iod_seccomp_profile_free(p);
	return 0;
}
