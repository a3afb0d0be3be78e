/*
 * replica.c: a placement recorded on a Replica object, the one shape the
 * deploy plan and the lost-node rescheduling plan store (and `iod get
 * replicas`, `iod explain` and the agents read).
 *
 * Pure: scheduler structures in, a typed Replica out; no I/O, no clock.
 */
#include "iod/ctrl.h"
#include "iod/sched.h"

int iod_ctrl_replica_place(const struct iod_sched_cluster *cl, const struct iod_sched_placement *p,
                           struct iod_obj_replica *r)
{
	char gpus[128] = "", cpus[IOD_OBJ_SET_MAX] = "", affinity[IOD_OBJ_SET_MAX] = "";
	int rc = 0;

	IOD_ASSERT(p->placed);
	iod_sched_mask_format(p->gpu_mask, gpus, sizeof(gpus));
	iod_bitmap_format(&p->cpus, cpus, sizeof(cpus));
	iod_bitmap_format(&p->cpu_affinity, affinity, sizeof(affinity));
	rc |= iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_NODE, iod_sched_node_name(cl, p->node));
	rc |= iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_GPUS, gpus);
	rc |= iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_CPUS, cpus);
	rc |= iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_MEM_NUMA, p->mem_numa);
	rc |= iod_obj_replica_set_int(r, IOD_OBJ_REPLICA_NIC, p->nic);
	rc |= iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_CPU_AFFINITY, affinity);
	/* whole DPUs/FPGAs: their indexes ("0-1") and devices */
	iod_obj_replica_clear(r, IOD_OBJ_REPLICA_ACCELERATORS);
	iod_obj_replica_clear(r, IOD_OBJ_REPLICA_ACCELERATOR_DEVICES);
	if (p->acc_mask) {
		char list[128];
		iod_sched_mask_format(p->acc_mask, list, sizeof(list));
		rc |= iod_obj_replica_set_str(r, IOD_OBJ_REPLICA_ACCELERATORS, list);
		rc |= iod_obj_replica_set_json(r, IOD_OBJ_REPLICA_ACCELERATOR_DEVICES,
		                               iod_sched_accs_to_json(cl, p->node, p->acc_mask));
	}
	json_t *explain = iod_sched_explain_to_json(cl, &p->explain);
	if (explain)
		rc |= iod_obj_replica_set_json(r, IOD_OBJ_REPLICA_EXPLAIN, explain);
	return rc ? -E2BIG : 0;
}
