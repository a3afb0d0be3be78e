/*
 * fuzz_agent_addr.c: libFuzzer target for the agent's address text: the
 * node subnet (--netns-subnet CIDR, ipam.c) and the "host:port,..." lists
 * of IOD_PEERS / IOD_DEP_* that iod_agent_env_localize rewrites. The input
 * is "CIDR\nLIST": any CIDR must load or fail with a message; any list must
 * be rewritten within the environment buffer or left as it was; never crash.
 */
#include "iod/agent.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_agent_ipam *m;
	static struct iod_agent_replica *r;
	struct iod_err e = {0};
	char cidr[64], list[IOD_AGENT_ENV_BYTES_MAX / 2];
	size_t i = 0, k = 0;

	if (!m)
		m = calloc(1, sizeof(*m));
	if (!r)
		r = calloc(1, sizeof(*r));
	if (!m || !r)
		return 0;
	for (; i < size && data[i] != '\n' && k + 1 < sizeof(cidr); i++)
		cidr[k++] = data[i] ? (char)data[i] : '?';
	cidr[k] = 0;
	for (k = 0, i++; i < size && k + 1 < sizeof(list); i++)
		list[k++] = data[i] ? (char)data[i] : '?';
	list[k] = 0;
	if (iod_agent_ipam_init(m, cidr, &e)) {
		if (!e.msg[0])
			abort(); /* every failure explains itself */
		if (iod_agent_ipam_init(m, "10.213.0.0/29", &e))
			abort();
	}
	/* a few owners whose ports may appear in the list */
	iod_agent_ipam_alloc(m, "ps-0", NULL, NULL, &e);
	iod_agent_ipam_alloc(m, "w-0", NULL, NULL, &e);
	memset(r, 0, sizeof(*r));
	iod_agent_replica_add_env(r, "IOD_PEERS", list);
	iod_agent_replica_add_env(r, "IOD_DEP_PS", list);
	iod_agent_replica_add_env(r, "IOD_ADDR", list);
	uint32_t envc = r->envc;
	iod_agent_env_localize(r, "127.0.0.1", m);
	if (r->envc != envc)
		abort();
	for (uint32_t j = 0; j < r->envc; j++)
		if (!iod_agent_strv_at(r->env_buf, sizeof(r->env_buf), r->envc, j))
			abort();
	return 0;
}
