/*
 * fuzz_chaos_plan.c: libFuzzer target for chaos plans (src/chaos/plan.c,
 * through src/base/yaml.c). A plan that parses is within its bounds, and
 * every error says where and why.
 */
#include "iod/chaos.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_chaos_plan *p = calloc(1, sizeof(*p));
	struct iod_err e = {0};
	if (!p)
		abort();
	if (iod_chaos_plan_parse((const char *)data, size, "fuzz", p, &e)) {
		if (!e.msg[0])
			abort();
	} else {
		if (!p->nsteps || p->nsteps > IOD_CHAOS_PLAN_STEPS_MAX || !p->duration_ms)
			abort();
		for (uint32_t i = 0; i < p->nsteps; i++) {
			const struct iod_chaos_step *s = &p->steps[i];
			bool pick[IOD_CHAOS_MEMBERS_MAX];
			if (s->duration_ms < IOD_CHAOS_DURATION_MIN_MS ||
			    s->duration_ms > IOD_CHAOS_DURATION_MAX_MS ||
			    s->action >= IOD_CHAOS_ACT_COUNT)
				abort();
			/* L7 steps: delay or abort of services, a share of requests */
			bool l7 = iod_chaos_step_l7(s);
			char names[IOD_CHAOS_MEMBERS_MAX][IOD_NAME_MAX];
			if (l7 && ((s->action != IOD_CHAOS_ACT_DELAY &&
			            s->action != IOD_CHAOS_ACT_ABORT) ||
			           s->percent < 1 || s->percent > 100 ||
			           iod_chaos_services_parse(s->selector, names,
			                                    IOD_CHAOS_MEMBERS_MAX, NULL) < 0))
				abort();
			if (s->action == IOD_CHAOS_ACT_ABORT &&
			    (!l7 || s->status < 200 || s->status > 599 || s->latency_ms))
				abort();
			if (s->action == IOD_CHAOS_ACT_DELAY &&
			    (!s->latency_ms || s->latency_ms > IOD_CHAOS_LATENCY_MAX_MS))
				abort();
			uint32_t k = iod_chaos_plan_pick(s, 5, i, pick);
			if (k < 1 || k > 5)
				abort();
		}
	}
	free(p);
	return 0;
}
