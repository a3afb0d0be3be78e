/*
 * test_sched_units.c: the scheduler's compute units besides whole GPUs:
 * per-GPU memory requirements (gpu_mem / compute.memory) and accelerators
 * (DPUs, FPGAs) given whole to a replica, from the spec and from topo/
 * models through placement, reasons, release and adoption.
 */
#include "harness.h"
#include "iod/sched.h"
#include "iod/spec.h"
#include "iod/topo.h"

#include <stdlib.h>

#define GB 1000000000ull

/* 8 GPUs, no NVLink; GPU0-3 (80 GB) on NUMA 0, GPU4-7 (40 GB) on NUMA 1;
 * 32 PUs and 512 GB per NUMA node; DPU0 on NUMA 0 (32 GB), DPU1 on NUMA 1
 * (16 GB), an FPGA on NUMA 1. */
static void shape_mixed(struct iod_sched_shape *s)
{
	iod_sched_shape_init(s, "t-mixed", 8, 2);
	for (unsigned i = 0; i < 8; i++) {
		for (unsigned j = 0; j < 8; j++)
			if (i != j)
				s->pair_score[i][j] = s->gpu_numa[i] == s->gpu_numa[j] ? 40 : 10;
		s->gpu_mem_bytes[i] = i < 4 ? 80 * GB : 40 * GB;
	}
	iod_bitmap_set_range(&s->numa_cpus[0], 0, 31);
	iod_bitmap_set_range(&s->numa_cpus[1], 32, 63);
	s->numa_mem_bytes[0] = s->numa_mem_bytes[1] = 512 * GB;
	const struct {
		const char *name;
		enum iod_sched_acc_type type;
		int32_t numa;
		uint64_t mem;
	} accs[] = {{"DPU0", IOD_SCHED_ACC_DPU, 0, 32 * GB},
	            {"DPU1", IOD_SCHED_ACC_DPU, 1, 16 * GB},
	            {"FPGA0", IOD_SCHED_ACC_FPGA, 1, 8 * GB}};
	for (unsigned i = 0; i < 3; i++) {
		struct iod_sched_acc *a = &s->accs[s->accs_n++];
		snprintf(a->name, sizeof(a->name), "%s", accs[i].name);
		a->type = accs[i].type;
		a->numa = accs[i].numa;
		a->mem_bytes = accs[i].mem;
	}
	iod_sched_shape_finish(s);
}

static struct iod_sched_cluster *mk(const struct iod_sched_shape *sh, unsigned n,
                                    uint32_t accs_used)
{
	struct iod_sched_cluster *c;
	struct iod_err e = {0};
	uint32_t sid, nid;
	if (iod_sched_cluster_new(16, 256, &c, &e))
		return NULL;
	if (iod_sched_shape_add(c, sh, &sid, &e)) {
		iod_sched_cluster_free(c);
		return NULL;
	}
	for (unsigned i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "n%u", i);
		struct iod_sched_node_spec ns = {
		    .name = name, .shape = sid, .accs_used = accs_used};
		if (iod_sched_node_add(c, &ns, &nid, &e)) {
			iod_sched_cluster_free(c);
			return NULL;
		}
	}
	return c;
}

static struct iod_sched_request req(const char *name, uint32_t replicas, uint32_t gpus)
{
	struct iod_sched_request r;
	memset(&r, 0, sizeof(r));
	snprintf(r.service, sizeof(r.service), "%s", name);
	r.replicas = replicas;
	r.gpus = gpus;
	r.numa = IOD_SCHED_NUMA_BEST_EFFORT;
	return r;
}

static int place(struct iod_sched_cluster *c, const struct iod_sched_request *r, uint32_t n,
                 struct iod_sched_result *res)
{
	struct iod_sched_opts o;
	struct iod_err e = {0};
	iod_sched_opts_default(&o);
	if (iod_sched_result_init(res, 256, 16))
		return -ENOMEM;
	return iod_sched_place(c, r, n, &o, res, &e);
}

TEST(gpu_memory_filters_gpus)
{
	struct iod_sched_shape s;
	shape_mixed(&s);
	struct iod_sched_cluster *c = mk(&s, 1, 0);
	CHECK(c != NULL);
	/* 4 GPUs with 60 GB: only GPU0-3 qualify */
	struct iod_sched_request big = req("big", 2, 4);
	big.gpu_mem_bytes = 60 * GB;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &big, 1, &res), 0);
	CHECK(res.p[0].placed);
	CHECK_EQ(res.p[0].gpu_mask, 0x0F);
	CHECK(!res.p[1].placed);
	CHECK_EQ(res.p[1].reason, IOD_SCHED_REASON_GPU_MEMORY);
	CHECK_CONTAINS(res.p[1].why, "needs 4 GPUs with 60 GB memory each");
	CHECK_CONTAINS(res.p[1].why, "has 0 such free");
	CHECK_CONTAINS(res.p[1].why, "at most 40 GB");
	iod_sched_result_free(&res);
	/* without a memory requirement the 40 GB GPUs are fine */
	struct iod_sched_request any = req("any", 1, 4);
	CHECK_EQ(place(c, &any, 1, &res), 0);
	CHECK(res.p[0].placed);
	CHECK_EQ(res.p[0].gpu_mask, 0xF0);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(gpu_memory_picks_qualifying_gpus_among_mixed)
{
	struct iod_sched_shape s;
	shape_mixed(&s);
	/* GPU2 is the only 80 GB GPU left after the first replica */
	struct iod_sched_cluster *c = mk(&s, 1, 0);
	struct iod_sched_request a = req("a", 1, 3);
	a.gpu_mem_bytes = 80 * GB;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &a, 1, &res), 0);
	CHECK_EQ(__builtin_popcount(res.p[0].gpu_mask & 0x0F), 3);
	iod_sched_result_free(&res);
	struct iod_sched_request b = req("b", 1, 1);
	b.gpu_mem_bytes = 80 * GB;
	CHECK_EQ(place(c, &b, 1, &res), 0);
	CHECK(res.p[0].placed);
	CHECK_EQ(__builtin_popcount(res.p[0].gpu_mask), 1);
	CHECK(res.p[0].gpu_mask & 0x0F);
	iod_sched_result_free(&res);
	CHECK_EQ(iod_sched_node_gpus_free(c, 0), 0xF0);
	iod_sched_cluster_free(c);
}

TEST(dpu_is_given_whole_and_numa_local)
{
	struct iod_sched_shape s;
	shape_mixed(&s);
	struct iod_sched_cluster *c = mk(&s, 1, 0);
	/* GPUs on NUMA 1 (40 GB ones are the only ones asked for by numa) and a
	 * DPU: DPU1 sits on NUMA 1 */
	struct iod_sched_request r = req("offload", 1, 4);
	r.numa = IOD_SCHED_NUMA_SINGLE;
	r.acc_type = IOD_SCHED_ACC_DPU;
	r.accs = 1;
	struct iod_sched_request first = req("fill", 1, 4);
	first.gpu_mem_bytes = 80 * GB; /* takes GPU0-3 on NUMA 0 */
	struct iod_sched_request both[2] = {first, r};
	struct iod_sched_result res;
	CHECK_EQ(place(c, both, 2, &res), 0);
	CHECK(res.p[0].placed && res.p[1].placed);
	CHECK_EQ(res.p[1].gpu_mask, 0xF0);
	CHECK_EQ(res.p[1].acc_mask, 0x2); /* DPU1, NUMA-local */
	iod_sched_result_free(&res);
	/* a CPU-only replica that wants a DPU gets the other one */
	struct iod_sched_request cpu = req("cpu", 2, 0);
	cpu.cpus = 2;
	cpu.acc_type = IOD_SCHED_ACC_DPU;
	cpu.accs = 1;
	CHECK_EQ(place(c, &cpu, 1, &res), 0);
	CHECK(res.p[0].placed);
	CHECK_EQ(res.p[0].acc_mask, 0x1);
	CHECK(!res.p[1].placed);
	CHECK_EQ(res.p[1].reason, IOD_SCHED_REASON_ACCELERATORS);
	CHECK_CONTAINS(res.p[1].why, "needs 1 DPU; best candidate n0 has 0 of its 2 free");
	uint32_t rid = res.p[0].replica;
	iod_sched_result_free(&res);
	/* release gives the DPU back */
	CHECK_EQ(iod_sched_release(c, rid), 0);
	cpu.replicas = 1;
	CHECK_EQ(place(c, &cpu, 1, &res), 0);
	CHECK(res.p[0].placed);
	CHECK_EQ(res.p[0].acc_mask, 0x1);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(accelerator_type_and_memory)
{
	struct iod_sched_shape s;
	shape_mixed(&s);
	struct iod_sched_cluster *c = mk(&s, 2, 0);
	struct iod_sched_request f = req("fpga", 3, 0);
	f.acc_type = IOD_SCHED_ACC_FPGA;
	f.accs = 1;
	struct iod_sched_request d = req("dpu-big", 3, 0);
	d.acc_type = IOD_SCHED_ACC_DPU;
	d.accs = 1;
	d.acc_mem_bytes = 20 * GB; /* DPU0 only (32 GB) */
	struct iod_sched_request both[2] = {f, d};
	struct iod_sched_result res;
	CHECK_EQ(place(c, both, 2, &res), 0);
	/* one FPGA per node: two placed, the third refused */
	CHECK(res.p[0].placed && res.p[1].placed && !res.p[2].placed);
	CHECK_EQ(res.p[0].acc_mask, 0x4);
	CHECK(res.p[0].node != res.p[1].node);
	CHECK_CONTAINS(res.p[2].why, "needs 1 FPGA");
	/* DPUs with 20 GB: DPU0 of each node */
	CHECK(res.p[3].placed && res.p[4].placed && !res.p[5].placed);
	CHECK_EQ(res.p[3].acc_mask, 0x1);
	CHECK_EQ(res.p[4].acc_mask, 0x1);
	CHECK_CONTAINS(res.p[5].why, "needs 1 DPU with 20 GB");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(no_node_has_the_accelerator)
{
	struct iod_sched_shape s;
	shape_mixed(&s);
	s.accs_n = 0;
	struct iod_sched_cluster *c = mk(&s, 2, 0);
	struct iod_sched_request d = req("d", 1, 1);
	d.acc_type = IOD_SCHED_ACC_DPU;
	d.accs = 1;
	struct iod_sched_result res;
	CHECK_EQ(place(c, &d, 1, &res), 0);
	CHECK(!res.p[0].placed);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_ACCELERATORS);
	CHECK_CONTAINS(res.p[0].why, "no node has one");
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(accelerators_used_elsewhere_and_adopted)
{
	struct iod_sched_shape s;
	shape_mixed(&s);
	/* DPU0 already taken outside this deploy */
	struct iod_sched_cluster *c = mk(&s, 1, 0x1);
	struct iod_sched_request d = req("d", 1, 0);
	d.acc_type = IOD_SCHED_ACC_DPU;
	d.accs = 1;
	struct iod_sched_existing x = {
	    .ordinal = 0, .node = 0, .acc_mask = 0x1, .mem_numa = -1, .nic = -1};
	uint32_t id;
	struct iod_err e = {0};
	CHECK_EQ(iod_sched_adopt(c, &d, &x, &id, &e), -EBUSY);
	CHECK_CONTAINS(e.msg, "accelerator 0 on n0 not free");
	x.acc_mask = 0x10; /* no such accelerator */
	CHECK_EQ(iod_sched_adopt(c, &d, &x, &id, &e), -ENOENT);
	x.acc_mask = 0x2;
	CHECK_EQ(iod_sched_adopt(c, &d, &x, &id, &e), 0);
	struct iod_sched_replica_info info;
	CHECK_EQ(iod_sched_replica_get(c, id, &info), 0);
	CHECK_EQ(info.acc_mask, 0x2);
	/* both DPUs are now taken */
	struct iod_sched_result res;
	CHECK_EQ(place(c, &d, 1, &res), 0);
	CHECK(!res.p[0].placed);
	CHECK_EQ(res.p[0].reason, IOD_SCHED_REASON_ACCELERATORS);
	iod_sched_result_free(&res);
	iod_sched_cluster_free(c);
}

TEST(invalid_accelerator_requests)
{
	struct iod_sched_shape s;
	shape_mixed(&s);
	struct iod_sched_cluster *c = mk(&s, 1, 0);
	struct iod_sched_request d = req("d", 1, 0);
	d.accs = 1; /* no type */
	struct iod_sched_result res;
	CHECK_EQ(place(c, &d, 1, &res), -EINVAL);
	iod_sched_result_free(&res);
	d.acc_type = IOD_SCHED_ACC_DPU;
	d.accs = IOD_SCHED_ACCS_MAX + 1;
	CHECK_EQ(place(c, &d, 1, &res), -EINVAL);
	iod_sched_result_free(&res);
	/* a shape whose accelerator sits on a NUMA node it does not have */
	struct iod_err e = {0};
	uint32_t sid;
	s.accs[0].numa = 5;
	CHECK_EQ(iod_sched_shape_add(c, &s, &sid, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "accelerator DPU0");
	iod_sched_cluster_free(c);
}

TEST(request_from_spec_units)
{
	struct iod_spec_service sv;
	memset(&sv, 0, sizeof(sv));
	sv.name = "offload";
	sv.replicas = 2;
	sv.res.compute.type = IOD_COMPUTE_DPU;
	sv.res.compute.count = 1;
	sv.res.compute.mem_bytes = 16 * GB;
	struct iod_sched_request r;
	struct iod_err e = {0};
	CHECK_EQ(iod_sched_request_from_spec(&sv, &r, &e), 0);
	CHECK_EQ(r.gpus, 0);
	CHECK_EQ(r.acc_type, IOD_SCHED_ACC_DPU);
	CHECK_EQ(r.accs, 1);
	CHECK_U64(r.acc_mem_bytes, 16 * GB);
	sv.res.compute.type = IOD_COMPUTE_FPGA;
	sv.res.compute.count = 99;
	CHECK_EQ(iod_sched_request_from_spec(&sv, &r, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "99 fpgas per replica");
	sv.res.compute.type = IOD_COMPUTE_TENSOR_CORE;
	sv.res.compute.count = 4;
	sv.res.compute.mem_bytes = 80 * GB;
	CHECK_EQ(iod_sched_request_from_spec(&sv, &r, &e), 0);
	CHECK_EQ(r.gpus, 4);
	CHECK_U64(r.gpu_mem_bytes, 80 * GB);
	CHECK_EQ(r.accs, 0);
	memset(&sv, 0, sizeof(sv));
	sv.name = "g";
	sv.res.gpu = 2;
	sv.res.gpu_mem_bytes = 40 * GB;
	CHECK_EQ(iod_sched_request_from_spec(&sv, &r, &e), 0);
	CHECK_U64(r.gpu_mem_bytes, 40 * GB);
}

TEST(shape_from_topo_has_gpu_memory_and_dpu)
{
	struct iod_topo_node *t = calloc(1, sizeof(*t));
	struct iod_sched_shape *s = calloc(1, sizeof(*s));
	struct iod_err e = {0};
	CHECK(t && s);
	CHECK_EQ(iod_topo_model_load("dgx-h100", t, &e), 0);
	CHECK_EQ(iod_sched_shape_from_topo(t, s, &e), 0);
	CHECK_EQ(s->gpus_n, 8);
	for (unsigned g = 0; g < 8; g++)
		CHECK_U64(s->gpu_mem_bytes[g], 80ull << 30);
	CHECK_EQ(s->accs_n, 1);
	CHECK_EQ(s->accs[0].type, IOD_SCHED_ACC_DPU);
	CHECK_STR(s->accs[0].os_name, "mlx5_8");
	CHECK_STR(s->accs[0].pci, "0000:1d:00.0");
	CHECK_EQ(s->accs[0].numa, 1);
	CHECK_U64(s->accs[0].mem_bytes, 32ull << 30);
	/* the L40S node has no DPU and 48 GiB GPUs */
	CHECK_EQ(iod_topo_model_load("pcie-8gpu", t, &e), 0);
	CHECK_EQ(iod_sched_shape_from_topo(t, s, &e), 0);
	CHECK_EQ(s->accs_n, 0);
	CHECK_U64(s->gpu_mem_bytes[0], 48ull << 30);
	free(t);
	free(s);
}
