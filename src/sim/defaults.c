/*
 * defaults.c: the shell side of the whole-cluster simulator's timers: iod's
 * production defaults, read from the agent's, the server's and the
 * reconciler's configuration defaults (cluster.c stays pure and takes them
 * as numbers through iod_simc_timers_iod).
 */
#include "iod/agent.h"
#include "iod/agent_run.h"
#include "iod/base.h"
#include "iod/sim_cluster.h"
#include "iod/state.h"

#include <stdio.h>
#include <stdlib.h>

void iod_simc_timers_production(struct iod_simc_timers *t)
{
	struct iod_agent_config *ac = calloc(1, sizeof(*ac));
	struct iod_server_config *sc = calloc(1, sizeof(*sc));
	struct iod_agent_rec_config rc;
	IOD_ASSERT(ac && sc);
	iod_agent_config_default(ac);
	iod_server_config_default(sc);
	iod_agent_rec_config_default(&rc);
	iod_simc_timers_iod(t, ac->lease_ttl_ms, sc->lease_check_ms, sc->heartbeat_timeout_ms,
	                    ac->stateful_grace_ms, rc.backoff_base_ns, rc.backoff_max_ns);
	free(ac);
	free(sc);
}

void iod_simc_config_model(struct iod_simc_config *c, const char *model, uint32_t nodes,
                           uint32_t gpus_per_node)
{
	iod_simc_config_default(c);
	iod_simc_timers_production(&c->timers);
	c->nodes = nodes;
	snprintf(c->node_model, sizeof(c->node_model), "%s", model);
	c->gpus_per_node = gpus_per_node;
	c->job.gpus = nodes * gpus_per_node;
}
