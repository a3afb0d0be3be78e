/*
 * ctrl.h: the controller's decisions (pure): how the cluster's Node objects
 * become the scheduler's cluster (cluster.c), the deploy plan (deploy.c),
 * the lost-node rescheduling plan (reschedule.c), and how a placement is
 * recorded on a Replica (replica.c). The API server and the node agent
 * call the plans; the whole-cluster simulator will drive this same module.
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
#include "iod/state.h"

/* The scheduler's structures, used here by pointer only: callers of the
 * plans (the API server, the agent) do not include sched.h. */
struct iod_sched_cluster;
struct iod_sched_shape;
struct iod_sched_placement;
struct iod_state;

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

/* ---- the plans ------------------------------------------------------------- */

/*
 * The deploy plan: turn a deploy request body (YAML or JSON spec) into a
 * "deploy" state command using the nodes in st, and a JSON answer listing
 * placements and what could not be placed. Returns 0 (*cmd malloc'd; may be
 * NULL when nothing can be placed), -EINVAL (spec errors in *answer),
 * -E2BIG (more than IOD_DEPLOY_REPLICAS_MAX replicas, before any planning).
 */
int iod_ctrl_deploy_plan(const struct iod_state *st, const char *body, size_t len, char **cmd,
                         json_t **answer, struct iod_err *e);

/*
 * Service VIPs on the overlay (vip.c, docs/network.md): each Service gets
 * one address of IOD_SVC_VIP_NET/IOD_SVC_VIP_PREFIX, chosen by the deploy
 * plan and stored on the Service object ("vip"), because the control plane
 * sees every service and plans one deploy at a time: an address it gives
 * is unique in the cluster, and it stays the service's across redeploys.
 * The choice is deterministic: the slot hash(name) mod IOD_SVC_VIPS_MAX,
 * else the next free one after it (linear probe).
 *
 * iod_ctrl_vip_in_range: whether ip is a VIP address (not the /20's first
 * or last). iod_ctrl_vip_pick: the VIP of service `name` given the n
 * addresses taken by other services; `keep` (0 = none) is the address it
 * had, kept when in range and not taken. -ENOSPC when every VIP is taken.
 */
bool iod_ctrl_vip_in_range(uint32_t ip);
int iod_ctrl_vip_pick(const char *name, uint32_t keep, const uint32_t *taken, uint32_t n,
                      uint32_t *vip);

/*
 * What a deploy plan reads of the state, copied so that the plan runs off
 * the Raft/API loop (issue 15: planning 2,000 replicas held the loop for
 * 125 ms, past the election timeout). iod_ctrl_view_take copies, on the
 * loop and in O(n) without sorting, the Node, Replica and Service objects,
 * each with a reference to its value (stored values are never changed and
 * jansson's reference counts are atomic); iod_ctrl_deploy_plan_view then
 * touches only the view and its arguments, on any thread, and gives what
 * iod_ctrl_deploy_plan gives for the state the view was taken of.
 */
struct iod_ctrl_view {
	uint64_t rev;                   /* state revision it was taken at */
	struct iod_state_item *item[3]; /* nodes, replicas, services (unsorted until planned) */
	uint32_t n[3];                  /* how many of each */
	bool sorted;                    /* item[] sorted by name */
};
int iod_ctrl_view_take(const struct iod_state *st, struct iod_ctrl_view *v);
void iod_ctrl_view_free(struct iod_ctrl_view *v);
int iod_ctrl_deploy_plan_view(struct iod_ctrl_view *v, const char *body, size_t len, char **cmd,
                              json_t **answer, struct iod_err *e);

/*
 * Rescheduling a lost node's replicas (pure). A replica whose node is not in
 * nodes (its lease expired) is orphaned: a stateless one moves at once, a
 * stateful one once it has been lost for stateful_grace_ms (its "lost_ms" is
 * recorded first). Targets come from the topology-aware scheduler (sched/)
 * with a deploy's rules: live nodes' shapes from their models, every replica
 * on a live node adopted, each service's request from its stored spec; the
 * move gets the scheduler's node, GPUs, CPUs, NUMA node, NIC and
 * explanation. Returns a JSON array of writes [{"name","prev_rev","value"}]
 * (compare-and-swap puts of Replica objects) and, in *unplaced,
 * [{"replica","reason","why"}] (the scheduler's reason name and message)
 * for what fits nowhere; such a replica is also written once as pending
 * with that reason.
 */
json_t *iod_ctrl_resched_plan(const json_t *nodes, const json_t *replicas, const json_t *services,
                              uint64_t now_ms, uint64_t stateful_grace_ms, json_t **unplaced);

/*
 * The control plane's IPAM (pure, src/ctrl/ipam.c): the overlay address of
 * each replica of an `iod up --netns` cluster, chosen where the replica is
 * placed (the deploy plan, the lost-node rescheduling plan) and stored on
 * its Replica ("addr"), so that its agent, its peers' IOD_PEERS/IOD_DEP_*
 * and every node's VTEP table know it before the replica runs. A node takes
 * part when its Node object names its replicas' subnet ("subnet"). The
 * rules: a replica keeps its address when it stays on its node (a
 * redeploy, a restart); a stateful replica keeps it on any node (the
 * overlay routes an address by replica, not by subnet: its peers and
 * clients find it where it was); a stateless one that moves takes its new
 * node's lowest free address (an address of the node it left would be its
 * old node's). Free: no Replica (of any node) holds it, and no assignment
 * made earlier in the same plan. The host addresses of a subnet are
 * net + 2 .. net + 1 + min(hosts, IOD_AGENT_IPAM_MAX), as the agent's
 * allocator (src/agent/ipam.c) hands out its own; net + 1 is the gateway.
 */
struct iod_ctrl_ipam_entry {
	char name[IOD_NAME_MAX]; /* the replica */
	uint32_t ip;             /* its address, host order */
};
struct iod_ctrl_ipam {
	struct iod_ctrl_ipam_entry *e; /* owned */
	uint32_t n, cap;
};
/* Every address the Replica objects of list (a {"items":[...]} listing)
 * hold. -ENOMEM. */
int iod_ctrl_ipam_init(struct iod_ctrl_ipam *m, const json_t *replicas);
void iod_ctrl_ipam_free(struct iod_ctrl_ipam *m);
/* A Node value's subnet: 0 with net and prefix (host order), -ENOENT when
 * it names none, -EINVAL when it is not an IPv4 CIDR of /16../29. */
int iod_ctrl_ipam_subnet(const json_t *node_value, uint32_t *net, uint32_t *prefix);
/*
 * The address of replica name on a node of subnet net/prefix: cur (its
 * address now, 0 = none) when cur is in the subnet or keep_any (stateful)
 * and no other replica holds it; else the lowest free of the subnet.
 * Recorded as name's (its earlier entry replaced). 0 with *ip; -ENOSPC
 * (e says which subnet) when none is free.
 */
int iod_ctrl_ipam_assign(struct iod_ctrl_ipam *m, const char *name, uint32_t net, uint32_t prefix,
                         uint32_t cur, bool keep_any, uint32_t *ip, struct iod_err *e);

#endif
