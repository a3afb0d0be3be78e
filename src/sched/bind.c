/*
 * bind.c: binding a candidate, unbinding, adopting replicas that already run,
 * releasing them, and free-island counts.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- binding ------------------------------------------------------------- */

static int replica_alloc(struct iod_sched_cluster *c, uint32_t *id)
{
	if (c->free_n) {
		*id = c->free_ids[--c->free_n];
		return 0;
	}
	if (c->replicas_hw >= c->replicas_max)
		return -ENOSPC;
	*id = c->replicas_hw++;
	return 0;
}

/* Take `want` PUs from the NUMA nodes in mask (lowest ids first). */
static uint32_t take_cpus(struct node *n, const struct shape *sh, uint8_t mask, uint32_t want,
                          struct iod_bitmap *got)
{
	uint32_t taken = 0;
	for (uint32_t i = 0; i < sh->s.numa_n && taken < want; i++) {
		if (!(mask >> i & 1))
			continue;
		struct iod_bitmap avail = sh->s.numa_cpus[i];
		iod_bitmap_and(&avail, &n->cpu_free);
		for (int b = iod_bitmap_next(&avail, 0); b >= 0 && taken < want;
		     b = iod_bitmap_next(&avail, (unsigned)b + 1)) {
			iod_bitmap_set(got, (unsigned)b);
			iod_bitmap_clear(&n->cpu_free, (unsigned)b);
			n->numa_cpu_free[i]--;
			taken++;
		}
	}
	return taken;
}

/*
 * The CPUs a replica should run on. A replica with exclusive PUs runs there;
 * one that asked for no CPUs shares the PUs of the NUMA nodes its GPUs and
 * memory sit on (NUMA-local, not reserved), so a GPU job without a cpu
 * request still does not cross the socket interconnect.
 */
void sched_placement_affinity(const struct iod_sched_cluster *c, const struct replica *rep,
                              struct iod_bitmap *out)
{
	const struct shape *sh = &c->shapes[c->nodes[rep->node].shape];
	uint32_t mask = 0;

	if (!iod_bitmap_empty(&rep->cpus)) {
		*out = rep->cpus;
		return;
	}
	iod_bitmap_zero(out);
	for (uint32_t g = 0; g < sh->s.gpus_n; g++)
		if (rep->gpu_mask >> g & 1)
			mask |= 1u << sh->s.gpu_numa[g];
	if (rep->mem_numa >= 0)
		mask |= 1u << rep->mem_numa;
	for (uint32_t i = 0; i < sh->s.numa_n; i++)
		if (mask >> i & 1)
			iod_bitmap_or(out, &sh->s.numa_cpus[i]);
}

int sched_bind(struct iod_sched_cluster *c, uint32_t svc, uint32_t ordinal, const struct cand *cd,
               uint32_t *replica_id)
{
	const struct iod_sched_request *r = &c->services[svc].req;
	struct node *n = &c->nodes[cd->pub.node];
	const struct shape *sh = &c->shapes[n->shape];
	uint32_t id;
	int rc = replica_alloc(c, &id);
	if (rc)
		return rc;
	struct replica *rep = &c->replicas[id];
	memset(rep, 0, sizeof(*rep));
	rep->live = true;
	rep->service = svc;
	rep->ordinal = ordinal;
	rep->node = cd->pub.node;
	IOD_ASSERT((n->gpu_free & cd->pub.gpu_mask) == cd->pub.gpu_mask);
	rep->gpu_mask = cd->pub.gpu_mask;
	n->gpu_free &= ~cd->pub.gpu_mask;
	IOD_ASSERT((n->acc_free & cd->pub.acc_mask) == cd->pub.acc_mask);
	rep->acc_mask = cd->pub.acc_mask;
	n->acc_free &= ~cd->pub.acc_mask;

	const uint8_t all = (uint8_t)((1u << sh->s.numa_n) - 1);
	uint32_t got = 0;
	if (r->numa == IOD_SCHED_NUMA_NONE)
		got = take_cpus(n, sh, all, r->cpus, &rep->cpus);
	else
		got = take_cpus(n, sh, cd->numa_mask, r->cpus, &rep->cpus);
	if (got < r->cpus &&
	    (r->numa == IOD_SCHED_NUMA_NONE || r->numa == IOD_SCHED_NUMA_BEST_EFFORT))
		got += take_cpus(n, sh, all, r->cpus - got, &rep->cpus);
	IOD_ASSERT(got == r->cpus);

	/* memory: one NUMA node when it fits, else interleaved (allowed nodes) */
	uint64_t need = r->mem_bytes;
	int32_t mn = cd->pub.mem_numa;
	if (need && mn >= 0 && n->numa_mem_free[mn] >= need) {
		n->numa_mem_free[mn] -= need;
		rep->mem_take[mn] = need;
		rep->mem_numa = mn;
	} else {
		uint8_t allowed = r->numa == IOD_SCHED_NUMA_RESTRICTED ? cd->numa_mask : all;
		rep->mem_numa = -1;
		for (uint32_t i = 0; i < sh->s.numa_n && need; i++) {
			if (!(allowed >> i & 1))
				continue;
			uint64_t t = IOD_MIN(need, n->numa_mem_free[i]);
			n->numa_mem_free[i] -= t;
			rep->mem_take[i] = t;
			need -= t;
		}
		IOD_ASSERT(need == 0);
		if (r->mem_bytes == 0)
			rep->mem_numa = mn;
	}
	rep->nic = cd->nic;
	if (cd->nic >= 0 && r->nic_bw_bps) {
		IOD_ASSERT(n->nic_free[cd->nic] >= r->nic_bw_bps);
		n->nic_free[cd->nic] -= r->nic_bw_bps;
		rep->nic_bw_bps = r->nic_bw_bps;
	}
	n->replicas++;
	c->services[svc].live++;
	c->cache[cd->pub.node].gen = 0;
	c->version++;
	*replica_id = id;
	return 0;
}

void sched_unbind(struct iod_sched_cluster *c, uint32_t id)
{
	struct replica *rep = &c->replicas[id];
	IOD_ASSERT(rep->live);
	struct node *n = &c->nodes[rep->node];
	const struct shape *sh = &c->shapes[n->shape];
	IOD_ASSERT((n->gpu_free & rep->gpu_mask) == 0);
	n->gpu_free |= rep->gpu_mask;
	IOD_ASSERT((n->acc_free & rep->acc_mask) == 0);
	n->acc_free |= rep->acc_mask;
	for (uint32_t i = 0; i < sh->s.numa_n; i++) {
		struct iod_bitmap mine = rep->cpus;
		iod_bitmap_and(&mine, &sh->s.numa_cpus[i]);
		n->numa_cpu_free[i] += iod_bitmap_count(&mine);
		n->numa_mem_free[i] += rep->mem_take[i];
	}
	iod_bitmap_or(&n->cpu_free, &rep->cpus);
	if (rep->nic >= 0)
		n->nic_free[rep->nic] += rep->nic_bw_bps;
	n->replicas--;
	c->services[rep->service].live--;
	c->cache[rep->node].gen = 0;
	c->version++;
	rep->live = false;
	c->free_ids[c->free_n++] = id;
}

/* adopt_check: can replica X of R sit where it already runs? Every resource it names is free
 * and exists. Nothing is taken. */
static int adopt_check(const struct iod_sched_cluster *c, const struct iod_sched_request *r,
                       const struct iod_sched_existing *x, struct iod_err *e)
{
	if (x->node >= c->nodes_n)
		return iod_err_set(e, -ENOENT, "%s-%u: no node %u", r->service, x->ordinal,
		                   x->node);
	const struct node *n = &c->nodes[x->node];
	const struct shape *sh = &c->shapes[n->shape];
	char buf[128];
	if ((x->gpu_mask & n->gpu_free) != x->gpu_mask) {
		iod_sched_gpus_format(x->gpu_mask & ~n->gpu_free, buf, sizeof(buf));
		return iod_err_set(e, -EBUSY, "%s-%u: %s on %s not free", r->service, x->ordinal,
		                   buf, n->name);
	}
	if ((x->acc_mask & n->acc_free) != x->acc_mask) {
		uint32_t bad = x->acc_mask & ~n->acc_free;
		uint32_t i = (uint32_t)__builtin_ctz(bad);
		return iod_err_set(e, i < sh->s.accs_n ? -EBUSY : -ENOENT,
		                   "%s-%u: accelerator %u on %s %s", r->service, x->ordinal, i,
		                   n->name, i < sh->s.accs_n ? "not free" : "does not exist");
	}
	if (!iod_bitmap_subset(&x->cpus, &n->cpu_free)) {
		struct iod_bitmap taken = x->cpus;
		iod_bitmap_andnot(&taken, &n->cpu_free);
		iod_bitmap_format(&taken, buf, sizeof(buf));
		return iod_err_set(e, -EBUSY, "%s-%u: CPUs %s on %s not free", r->service,
		                   x->ordinal, buf, n->name);
	}
	if (x->nic >= (int32_t)sh->s.nics_n || x->mem_numa >= (int32_t)sh->s.numa_n)
		return iod_err_set(e, -ENOENT, "%s-%u: %s has no NIC %d or NUMA node %d",
		                   r->service, x->ordinal, n->name, x->nic, x->mem_numa);
	if (x->nic >= 0 && n->nic_free[x->nic] < r->nic_bw_bps)
		return iod_err_set(e, -EBUSY, "%s-%u: NIC %s on %s lacks the bandwidth", r->service,
		                   x->ordinal, sh->s.nics[x->nic].name, n->name);
	const uint8_t all = (uint8_t)((1u << sh->s.numa_n) - 1);
	if ((x->mem_numa >= 0 ? n->numa_mem_free[x->mem_numa] : mem_in(n, sh, all)) < r->mem_bytes)
		return iod_err_set(e, -EBUSY, "%s-%u: not enough free memory on %s", r->service,
		                   x->ordinal, n->name);
	return 0;
}

/* adopt_take: record replica ID of service SVC on the resources X names (adopt_check passed). */
static void adopt_take(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                       const struct iod_sched_existing *x, uint32_t svc, uint32_t id)
{
	struct node *n = &c->nodes[x->node];
	const struct shape *sh = &c->shapes[n->shape];
	struct replica *rep = &c->replicas[id];
	memset(rep, 0, sizeof(*rep));
	rep->live = true;
	rep->service = svc;
	rep->ordinal = x->ordinal;
	rep->node = x->node;
	rep->gpu_mask = x->gpu_mask;
	n->gpu_free &= ~x->gpu_mask;
	rep->acc_mask = x->acc_mask;
	n->acc_free &= ~x->acc_mask;
	rep->cpus = x->cpus;
	iod_bitmap_andnot(&n->cpu_free, &x->cpus);
	for (uint32_t i = 0; i < sh->s.numa_n; i++) {
		struct iod_bitmap mine = x->cpus;
		iod_bitmap_and(&mine, &sh->s.numa_cpus[i]);
		n->numa_cpu_free[i] -= iod_bitmap_count(&mine);
	}
	uint64_t need = r->mem_bytes;
	rep->mem_numa = x->mem_numa;
	for (uint32_t i = 0; i < sh->s.numa_n && need; i++) {
		uint32_t numa = x->mem_numa >= 0 ? (uint32_t)x->mem_numa : i;
		uint64_t t = IOD_MIN(need, n->numa_mem_free[numa]);
		n->numa_mem_free[numa] -= t;
		rep->mem_take[numa] += t;
		need -= t;
	}
	IOD_ASSERT(need == 0);
	rep->nic = x->nic;
	if (x->nic >= 0) {
		n->nic_free[x->nic] -= r->nic_bw_bps;
		rep->nic_bw_bps = r->nic_bw_bps;
	}
	n->replicas++;
	c->services[svc].live++;
	if (c->services[svc].next_ordinal <= x->ordinal)
		c->services[svc].next_ordinal = x->ordinal + 1;
	c->cache[x->node].gen = 0;
	c->version++;
}

int iod_sched_adopt(struct iod_sched_cluster *c, const struct iod_sched_request *r,
                    const struct iod_sched_existing *x, uint32_t *replica, struct iod_err *e)
{
	int rc = sched_request_check(r, e);
	if (!rc)
		rc = adopt_check(c, r, x, e);
	if (rc)
		return rc;
	uint32_t svc;
	rc = sched_service_get(c, r, &svc);
	if (rc)
		return iod_err_set(e, rc, "service %s: too many services", r->service);
	uint32_t id;
	rc = replica_alloc(c, &id);
	if (rc)
		return iod_err_set(e, rc, "the scheduler's replica table is full (%u)",
		                   c->replicas_max);
	adopt_take(c, r, x, svc, id);
	*replica = id;
	return 0;
}

int iod_sched_release(struct iod_sched_cluster *c, uint32_t replica)
{
	if (replica >= c->replicas_hw || !c->replicas[replica].live)
		return -ENOENT;
	sched_unbind(c, replica);
	return 0;
}

uint32_t sched_whole_islands(const struct iod_sched_cluster *c, uint32_t node_id)
{
	const struct node *n = &c->nodes[node_id];
	const struct shape *sh = &c->shapes[n->shape];
	uint32_t whole = 0;
	for (uint32_t i = 0; i < sh->islands_n; i++) {
		uint32_t isl = sh->islands[i];
		if (popc(isl) >= 2 && (isl & n->gpu_free) == isl)
			whole |= isl;
	}
	return whole;
}

uint32_t iod_sched_islands_free(const struct iod_sched_cluster *c, uint32_t min_size)
{
	uint32_t cnt = 0;
	for (uint32_t j = 0; j < c->nodes_n; j++) {
		const struct node *n = &c->nodes[j];
		const struct shape *sh = &c->shapes[n->shape];
		for (uint32_t i = 0; i < sh->islands_n; i++) {
			uint32_t isl = sh->islands[i];
			if (popc(isl) >= min_size && (isl & n->gpu_free) == isl)
				cnt++;
		}
	}
	return cnt;
}
