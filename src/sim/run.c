/*
 * run.c: running a workload on the simulator: how large its flow table
 * must be, and the drain after the arrivals stop (until every flow is done
 * or a bound). `iod sim` and the benchmarks share them.
 *
 * Pure: the simulator's virtual time only.
 */
#include "iod/sim.h"

uint32_t iod_sim_flows_for(const struct iod_sim_topo *topo, double mean_bytes, double load,
                           uint64_t duration_ns, uint32_t allreduce_n)
{
	IOD_ASSERT(topo != NULL);
	uint32_t hosts = iod_sim_topo_host_count(topo);
	double host_bps = 0; /* the fastest host NIC bounds every host's arrivals */
	for (uint32_t l = 0; l < topo->n_links; l++) {
		const struct iod_sim_topo_link *lk = &topo->links[l];
		if (topo->nodes[lk->a].kind == IOD_SIM_HOST ||
		    topo->nodes[lk->b].kind == IOD_SIM_HOST)
			host_bps = IOD_MAX(host_bps, (double)lk->rate_bps);
	}
	double expect =
	    load > 0 && mean_bytes > 0
	        ? (double)hosts * host_bps * load * ((double)duration_ns / 1e9) / 8 / mean_bytes
	        : 0;
	double flows = 2 * expect + 4096 + (allreduce_n ? 2.0 * allreduce_n * allreduce_n : 0);
	return flows > IOD_SIM_FLOWS_DEFAULT ? IOD_SIM_FLOWS_DEFAULT : (uint32_t)flows;
}

int iod_sim_drain(struct iod_sim *s, uint64_t end_ns, uint64_t step_ns, struct iod_err *e)
{
	int rc = 0;
	if (!step_ns)
		step_ns = IOD_NS_PER_MS;
	while (!rc && iod_sim_flows_done(s) < iod_sim_flow_count(s) && iod_sim_now(s) < end_ns) {
		uint64_t until = iod_sim_now(s) + step_ns;
		rc = iod_sim_run(s, until < end_ns ? until : end_ns, e);
	}
	return rc;
}
