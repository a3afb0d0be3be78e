/*
 * ctrl.h: the controller's decisions (pure): how the cluster's Node objects
 * become the scheduler's cluster, the one conversion the deploy plan
 * (src/api/deploy.c) and the lost-node rescheduling plan
 * (src/agent/reschedule.c) share.
 *
 * A node is scheduled from the topology it registered ("topology", what
 * iod_topo_to_json wrote: real discovery, an hwloc XML or a built-in
 * model), else from its built-in model name ("model"), else as a generic
 * node with its "gpus" count. A node none of these describe is skipped, and
 * the reason is said, never silently.
 *
 * Pure: JSON in, scheduler structures out; no I/O, no clock.
 */
#ifndef IOD_CTRL_H
#define IOD_CTRL_H

#include "iod/base.h"
#include "iod/objects.h"
#include "iod/sched.h"

/* How iod_ctrl_cluster_build treats the nodes. */
struct iod_ctrl_cluster_opts {
	uint32_t replicas_max;     /* replicas the cluster must hold (placed + adopted) */
	const uint32_t *gpus_used; /* per item: GPUs held outside the scheduler; NULL = none */
	const uint32_t *accs_used; /* per item: accelerators held outside; NULL = none */
	json_t *skipped;           /* if non-NULL, an array: {node, reason} per skipped item */
};

/*
 * The scheduler's shape of one Node value: from its registered topology,
 * else its model, else generic-<gpus>. The shape is named after the node's
 * "model" field (so identical machines share one shape). -EINVAL/-ENOENT/
 * -E2BIG with the reason in e.
 */
int iod_ctrl_node_shape(const json_t *node_value, struct iod_sched_shape *out, struct iod_err *e);

/*
 * Build the scheduler's cluster from a state list of Node objects
 * ({"items": [{"name", "value"}, ...]}). node_ids[i] receives the
 * scheduler's id of items[i], or UINT32_MAX when that node was skipped
 * (then its reason goes to opts->skipped). Identical shapes are registered
 * once. Fails only when the cluster cannot be built at all (memory, more
 * distinct shapes than IOD_SCHED_SHAPES_MAX).
 */
int iod_ctrl_cluster_build(const json_t *nodes, const struct iod_ctrl_cluster_opts *opts,
                           struct iod_sched_cluster **out, uint32_t *node_ids, struct iod_err *e);

/*
 * Record placement p (placed) on Replica r: its node, GPU, CPU and affinity
 * sets, memory NUMA node, NIC, whole accelerators (indexes and devices;
 * both removed when it has none) and, when the scheduler kept one, its
 * explanation. The one shape deploy and rescheduling store. -E2BIG when a
 * set does not fit its field, -ENOMEM.
 */
int iod_ctrl_replica_place(const struct iod_sched_cluster *cl, const struct iod_sched_placement *p,
                           struct iod_obj_replica *r);

#endif
