/*
 * test_storage_tier.c: the pure core of tiered checkpoint storage
 * (src/storage/tier.c): tier configuration errors, placement in the fastest
 * tier, draining of older checkpoints, eviction by quota and age that never
 * takes the newest complete checkpoint, and a full tier refused with a clear
 * error and nothing changed (the writer's backpressure).
 */
#include "harness.h"
#include "iod/storage.h"

#include <errno.h>
#include <string.h>

static struct iod_err err;
static struct iod_stor_acts acts;

static struct iod_stor_cfg cfg2(uint64_t cap, uint32_t pmem_bp, uint32_t nvme_bp)
{
	struct iod_stor_cfg c = {
	    .tiers_n = 2, .capacity_bytes = cap, .fast_keep = 1, .keep_max = 16};
	/* written slow first: the pool sorts fastest first */
	c.tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, nvme_bp};
	c.tiers[1] = (struct iod_stor_tier_cfg){IOD_STOR_PMEM, pmem_bp};
	return c;
}

static struct iod_stor_cfg cfg1(uint64_t cap)
{
	struct iod_stor_cfg c = {
	    .tiers_n = 1, .capacity_bytes = cap, .fast_keep = 1, .keep_max = 16};
	c.tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, 10000};
	return c;
}

/* admit + commit in one go; 0 or the failing call's errno */
static int save(struct iod_stor_pool *p, uint64_t step, uint64_t bytes)
{
	int rc = iod_stor_admit(p, step, bytes, &acts, &err);
	return rc ? rc : iod_stor_commit(p, step, &acts, &err);
}

static int tier_of(const struct iod_stor_pool *p, uint64_t step)
{
	const struct iod_stor_ckpt *c = iod_stor_find(p, step);
	return c ? (int)c->tier : -1;
}

TEST(media_parse_and_names)
{
	enum iod_stor_medium m;
	CHECK_EQ(iod_stor_medium_parse("pmem", &m, &err), 0);
	CHECK_EQ(m, IOD_STOR_PMEM);
	CHECK_STR(iod_stor_medium_name(m), "PMem");
	CHECK_EQ(iod_stor_medium_parse("NVME", &m, &err), 0);
	CHECK_EQ(m, IOD_STOR_NVME);
	CHECK_EQ(iod_stor_medium_parse("tape", &m, &err), -EINVAL);
	CHECK(strstr(err.msg, "\"tape\" is not known") && strstr(err.msg, "PMem"));
}

TEST(config_errors_are_precise)
{
	struct iod_stor_pool p;
	struct iod_stor_cfg c = cfg2(1000, 3000, 8000);
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), -EINVAL);
	CHECK_MSG(strstr(err.msg, "more than 100%") && strstr(err.msg, "110.00%"), "%s", err.msg);
	c = cfg2(1000, 0, 8000);
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), -EINVAL);
	CHECK_MSG(strstr(err.msg, "PMem") && strstr(err.msg, "above 0%"), "%s", err.msg);
	c = cfg2(1000, 2000, 8000);
	c.tiers[1].medium = IOD_STOR_NVME;
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), -EINVAL);
	CHECK_MSG(strstr(err.msg, "NVMe is listed twice"), "%s", err.msg);
	c = cfg2(0, 2000, 8000);
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), -EINVAL);
	CHECK(strstr(err.msg, "capacity is 0"));
	c = cfg2(1000, 2000, 8000);
	c.tiers_n = 0;
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), -EINVAL);
	c = cfg2(1000, 2000, 8000);
	c.tiers[0].medium = (enum iod_stor_medium)42;
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), -EINVAL);
	CHECK(strstr(err.msg, "unknown medium"));
	/* below 100% is allowed: the rest of the capacity is not checkpoints' */
	c = cfg2(1000, 2000, 5000);
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), 0);
}

TEST(tiers_fastest_first_with_exact_quotas)
{
	struct iod_stor_pool p;
	struct iod_stor_cfg c = cfg2(1000000000007ull, 2000, 8000);
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), 0);
	CHECK_EQ(p.tiers_n, 2);
	CHECK_EQ(p.tiers[0].medium, IOD_STOR_PMEM);
	CHECK_EQ(p.tiers[1].medium, IOD_STOR_NVME);
	CHECK_U64(p.tiers[0].quota_bytes, 200000000001ull);
	CHECK_U64(p.tiers[1].quota_bytes, 800000000005ull);
}

TEST(new_checkpoint_goes_fast_and_older_drain)
{
	struct iod_stor_pool p;
	struct iod_stor_cfg c = cfg2(1000, 2000, 8000); /* PMem 200, NVMe 800 */
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), 0);
	CHECK_EQ(iod_stor_admit(&p, 1, 150, &acts, &err), 0);
	CHECK_EQ(acts.n, 1);
	CHECK_EQ(acts.a[0].kind, IOD_STOR_ACT_WRITE);
	CHECK_EQ(acts.a[0].to, 0);
	CHECK(iod_stor_latest(&p) == NULL); /* being written: not visible */
	CHECK_EQ(iod_stor_commit(&p, 1, &acts, &err), 0);
	CHECK_EQ(acts.n, 0);
	CHECK_EQ(iod_stor_latest(&p)->step, 1);
	/* step 2 needs PMem: step 1 moves to NVMe first, then 2 is written */
	CHECK_EQ(iod_stor_admit(&p, 2, 150, &acts, &err), 0);
	CHECK_EQ(acts.n, 2);
	CHECK_EQ(acts.a[0].kind, IOD_STOR_ACT_MOVE);
	CHECK_EQ(acts.a[0].step, 1);
	CHECK_EQ(acts.a[0].from, 0);
	CHECK_EQ(acts.a[0].to, 1);
	CHECK_EQ(acts.a[1].kind, IOD_STOR_ACT_WRITE);
	CHECK_EQ(tier_of(&p, 2), 0);
	CHECK_EQ(iod_stor_commit(&p, 2, &acts, &err), 0);
	/* a small one fits beside: commit drains the older one (fast_keep 1) */
	CHECK_EQ(iod_stor_admit(&p, 3, 40, &acts, &err), 0);
	CHECK_EQ(acts.n, 1);
	CHECK_EQ(tier_of(&p, 3), 0);
	CHECK_EQ(iod_stor_commit(&p, 3, &acts, &err), 0);
	CHECK_EQ(acts.n, 1);
	CHECK_EQ(acts.a[0].kind, IOD_STOR_ACT_MOVE);
	CHECK_EQ(acts.a[0].step, 2);
	CHECK_EQ(tier_of(&p, 2), 1);
	CHECK_EQ(tier_of(&p, 3), 0);
	CHECK_U64(p.tiers[0].used_bytes, 40);
	CHECK_U64(p.tiers[1].used_bytes, 300);
	/* larger than the fast tier: straight to NVMe */
	CHECK_EQ(iod_stor_admit(&p, 4, 300, &acts, &err), 0);
	CHECK_EQ(acts.a[acts.n - 1].kind, IOD_STOR_ACT_WRITE);
	CHECK_EQ(acts.a[acts.n - 1].to, 1);
}

TEST(ten_saves_keep_quotas_and_the_newest)
{
	struct iod_stor_pool p;
	struct iod_stor_cfg c = cfg2(1000, 2000, 8000);
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), 0);
	for (uint64_t s = 1; s <= 10; s++) {
		CHECK_MSG(save(&p, s, 150) == 0, "step %llu: %s", (unsigned long long)s, err.msg);
		for (uint32_t t = 0; t < p.tiers_n; t++)
			CHECK(p.tiers[t].used_bytes <= p.tiers[t].quota_bytes);
		CHECK_EQ(iod_stor_latest(&p)->step, s);
		CHECK_EQ(tier_of(&p, s), 0);
	}
	/* NVMe holds 5 x 150 of 800: steps 5..9; 1..4 were evicted oldest first */
	CHECK_EQ(p.n, 6);
	for (uint64_t s = 1; s <= 4; s++)
		CHECK(iod_stor_find(&p, s) == NULL);
	for (uint64_t s = 5; s <= 9; s++)
		CHECK_EQ(tier_of(&p, s), 1);
}

TEST(quota_eviction_keeps_the_newest_complete_checkpoint)
{
	struct iod_stor_pool p, before;
	struct iod_stor_cfg c = cfg1(100);
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), 0);
	for (uint64_t s = 1; s <= 3; s++)
		CHECK_EQ(save(&p, s, 30), 0);
	/* 60 bytes: evicting steps 1 and 2 (oldest first) is enough */
	before = p;
	CHECK_EQ(iod_stor_admit(&p, 4, 60, &acts, &err), 0);
	CHECK_EQ(acts.n, 3);
	CHECK_EQ(acts.a[0].kind, IOD_STOR_ACT_EVICT);
	CHECK_EQ(acts.a[0].step, 1);
	CHECK_EQ(acts.a[1].kind, IOD_STOR_ACT_EVICT);
	CHECK_EQ(acts.a[1].step, 2);
	CHECK(iod_stor_find(&p, 3) != NULL);
	/* 75 bytes would need step 3, the newest complete: refused, nothing evicted */
	p = before;
	CHECK_EQ(iod_stor_admit(&p, 4, 75, &acts, &err), -ENOSPC);
	CHECK_EQ(acts.n, 0);
	CHECK(memcmp(&p, &before, sizeof(p)) == 0);
	CHECK_MSG(strstr(err.msg, "newest complete step 3 is kept") &&
	              strstr(err.msg, "nothing was evicted"),
	          "%s", err.msg);
	/* once step 4 is complete, step 3 is no longer the newest */
	CHECK_EQ(iod_stor_admit(&p, 4, 40, &acts, &err), 0);
	CHECK_EQ(iod_stor_commit(&p, 4, &acts, &err), 0);
	CHECK_EQ(iod_stor_admit(&p, 5, 60, &acts, &err), 0);
	CHECK(iod_stor_find(&p, 3) == NULL);
	CHECK(iod_stor_find(&p, 4) != NULL);
}

TEST(fill_a_tier_clear_error_nothing_lost)
{
	struct iod_stor_pool p, before;
	struct iod_stor_cfg c = cfg1(150);
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), 0);
	CHECK_EQ(iod_stor_admit(&p, 1, 60, &acts, &err), 0);
	CHECK_EQ(iod_stor_admit(&p, 2, 60, &acts, &err), 0);
	/* two saves in flight fill it: the third waits */
	before = p;
	CHECK_EQ(iod_stor_admit(&p, 3, 60, &acts, &err), -ENOSPC);
	CHECK(memcmp(&p, &before, sizeof(p)) == 0);
	CHECK_MSG(strstr(err.msg, "storage is full") && strstr(err.msg, "step 3") &&
	              strstr(err.msg, "NVMe holds 120 of 150 bytes") &&
	              strstr(err.msg, "2 checkpoint(s) being written"),
	          "%s", err.msg);
	/* step 1 done: it is the newest complete one, still kept */
	CHECK_EQ(iod_stor_commit(&p, 1, &acts, &err), 0);
	CHECK_EQ(iod_stor_admit(&p, 3, 60, &acts, &err), -ENOSPC);
	CHECK(iod_stor_find(&p, 1) && iod_stor_find(&p, 2));
	/* step 2 done: step 1 may go, step 3 is admitted */
	CHECK_EQ(iod_stor_commit(&p, 2, &acts, &err), 0);
	CHECK_EQ(iod_stor_admit(&p, 3, 60, &acts, &err), 0);
	CHECK_EQ(acts.a[0].kind, IOD_STOR_ACT_EVICT);
	CHECK_EQ(acts.a[0].step, 1);
	/* larger than any tier: its own message */
	CHECK_EQ(iod_stor_admit(&p, 9, 151, &acts, &err), -ENOSPC);
	CHECK(strstr(err.msg, "larger than every storage tier"));
	/* an aborted (torn) write frees its reservation and nothing else */
	CHECK_EQ(iod_stor_abort(&p, 3, &err), 0);
	CHECK_U64(p.tiers[0].used_bytes, 60);
	CHECK_EQ(iod_stor_latest(&p)->step, 2);
	CHECK_EQ(iod_stor_abort(&p, 3, &err), -ENOENT);
}

TEST(retention_by_age_and_step_order)
{
	struct iod_stor_pool p;
	struct iod_stor_cfg c = cfg1(1000);
	c.keep_max = 2;
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), 0);
	CHECK_EQ(save(&p, 10, 10), 0);
	CHECK_EQ(save(&p, 20, 10), 0);
	CHECK_EQ(save(&p, 30, 10), 0);
	CHECK_EQ(acts.n, 1);
	CHECK_EQ(acts.a[0].kind, IOD_STOR_ACT_EVICT);
	CHECK_EQ(acts.a[0].step, 10);
	CHECK_EQ(p.n, 2);
	CHECK_EQ(iod_stor_admit(&p, 30, 10, &acts, &err), -ERANGE);
	CHECK_EQ(iod_stor_admit(&p, 25, 10, &acts, &err), -ERANGE);
	CHECK_EQ(iod_stor_commit(&p, 99, &acts, &err), -ENOENT);
}

TEST(adopt_rebuilds_from_disk)
{
	struct iod_stor_pool p;
	struct iod_stor_cfg c = cfg2(1000, 2000, 8000);
	CHECK_EQ(iod_stor_pool_init(&p, &c, &err), 0);
	CHECK_EQ(iod_stor_adopt(&p, 7, 100, 1, &err), 0);
	CHECK_EQ(iod_stor_adopt(&p, 9, 100, 0, &err), 0);
	CHECK_EQ(iod_stor_adopt(&p, 8, 100, 1, &err), 0);
	CHECK_EQ(iod_stor_adopt(&p, 8, 100, 1, &err), -EEXIST);
	CHECK_EQ(iod_stor_adopt(&p, 5, 100, 2, &err), -EINVAL);
	CHECK_EQ(p.ck[0].step, 7);
	CHECK_EQ(p.ck[1].step, 8);
	CHECK_EQ(iod_stor_latest(&p)->step, 9);
	CHECK_U64(p.tiers[1].used_bytes, 200);
}

TEST(replicas_against_nodes_and_domains)
{
	CHECK_EQ(iod_stor_replicas_check(3, 3, 3, &err), 0);
	CHECK_EQ(iod_stor_replicas_check(3, 2, 2, &err), -EINVAL);
	CHECK_MSG(strstr(err.msg, "replicas 3 need 3 nodes, the cluster has 2"), "%s", err.msg);
	CHECK_EQ(iod_stor_replicas_check(3, 5, 2, &err), -EINVAL);
	CHECK(strstr(err.msg, "3 failure domains"));
	CHECK_EQ(iod_stor_replicas_check(0, 5, 5, &err), -EINVAL);
	CHECK_EQ(iod_stor_replicas_check(8, 9, 9, &err), -EINVAL);
}
