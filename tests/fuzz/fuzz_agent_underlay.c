/*
 * fuzz_agent_underlay.c: libFuzzer target for `iod up --netns --underlay`
 * (iod_agent_underlay_parse) and the plan built from what it accepts. Any
 * input gives a configuration within the limits or an error message; a
 * plan is built or refused with a message; never a crash.
 */
#include "iod/agent.h"
#include "iod/limits.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[256];
	struct iod_err e = {0};
	struct iod_agent_underlay_cfg c = {.leaves = 2, .spines = 2, .hosts = 1};
	if (size == 0)
		return 0;
	/* the first byte picks the number of hosts, the rest is the option */
	c.hosts = 1 + data[0] % IOD_UP_NODES_MAX;
	data++, size--;
	snprintf(c.prefix, sizeof(c.prefix), "iodu0fuzz0");
	if (size >= sizeof(s))
		size = sizeof(s) - 1;
	memcpy(s, data, size);
	s[size] = 0;
	if (iod_agent_underlay_parse(s, &c, &e) < 0) {
		if (!e.msg[0])
			abort();
		return 0;
	}
	if (c.leaves < 1 || c.leaves > IOD_UNDERLAY_LEAVES_MAX || c.spines < 1 ||
	    c.spines > IOD_UNDERLAY_SPINES_MAX || c.slow_spine > c.spines)
		abort();
	struct iod_agent_underlay_step *steps = calloc(IOD_UNDERLAY_STEPS_MAX, sizeof(*steps));
	if (!steps)
		return 0;
	uint32_t n = 0;
	e.msg[0] = 0;
	if (iod_agent_underlay_plan(&c, steps, IOD_UNDERLAY_STEPS_MAX, &n, &e) < 0 && !e.msg[0])
		abort();
	if (n > IOD_UNDERLAY_STEPS_MAX)
		abort();
	free(steps);
	return 0;
}
