/*
 * fuzz_sim_topo.c: libFuzzer target for the fabric simulator's topology
 * parsers: the YAML loader and the built-in "name:key=value,..." spelling
 * (the first input line), plus the flow-size CDF parser. Any input must give
 * a topology or an error message; an accepted topology must be consistent
 * (links name existing nodes, events name existing links).
 */
#include "iod/sim.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_sim_topo t;
	struct iod_sim_cdf c;
	struct iod_err e = {0};
	char *s;

	if (size > 65536)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	if (iod_sim_topo_parse_yaml(&t, s, size, "fuzz.yaml", &e) == 0) {
		for (uint32_t i = 0; i < t.n_links; i++)
			if (t.links[i].a >= t.n_nodes || t.links[i].b >= t.n_nodes ||
			    !t.links[i].rate_bps)
				abort();
		for (uint32_t i = 0; i < t.n_events; i++)
			if (t.events[i].link >= t.n_links)
				abort();
		if (!iod_sim_topo_host_count(&t))
			abort();
		iod_sim_topo_free(&t);
	} else if (!e.msg[0]) {
		abort();
	}
	/* the first line as a built-in name, if it is short (bounded sizes) */
	char line[128];
	size_t n = strcspn(s, "\n");
	if (n < sizeof(line) && !strstr(s, "hosts=") && !strstr(s, "k=")) {
		memcpy(line, s, n);
		line[n] = 0;
		e.msg[0] = 0;
		if (iod_sim_topo_builtin(&t, line, &e) == 0)
			iod_sim_topo_free(&t);
		else if (!e.msg[0])
			abort();
	}
	e.msg[0] = 0;
	if (iod_sim_cdf_parse(&c, s, "fuzz", &e) == 0) {
		if (c.n < 2 || c.p[c.n - 1] != 1.0)
			abort();
		struct iod_rng r;
		iod_rng_seed(&r, 1);
		uint64_t v = iod_sim_cdf_sample(&c, &r);
		if (v > c.bytes[c.n - 1] && v != 1)
			abort();
	} else if (!e.msg[0]) {
		abort();
	}
	free(s);
	return 0;
}
