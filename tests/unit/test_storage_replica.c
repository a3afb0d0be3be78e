/*
 * test_storage_replica.c: the replication core (src/storage/replica.c):
 * copies go to distinct failure domains (zones first, then racks), a dead or
 * full node is passed over, too few domains is a precise -ENOSPC; health in
 * Ceph's words and the 2-of-3 write quorum; the repair plan copies a corrupt
 * chunk from a live verified copy, is bounded and deterministic; the scrub's
 * token bucket.
 */
#include "harness.h"
#include "iod/storage.h"

#include <errno.h>
#include <string.h>

static struct iod_err err;

#define GiB (1ull << 30)

TEST(place_prefers_other_zones_then_racks)
{
	struct iod_stor_node n[] = {
	    {"a1", "r1", "z1", true, 10 * GiB}, /* the primary */
	    {"a2", "r1", "z1", true, 50 * GiB}, /* same rack: never */
	    {"b1", "r2", "z1", true, 40 * GiB}, /* same zone, other rack */
	    {"c1", "r3", "z2", true, 20 * GiB}, /* another zone */
	    {"d1", "r4", "z3", true, 5 * GiB},  /* another zone, less room */
	};
	uint32_t keep = 0, out[3];
	CHECK_MSG(iod_stor_place(n, 5, &keep, 1, 3, GiB, out, &err) == 0, "%s", err.msg);
	CHECK_EQ(out[0], 0);
	CHECK_EQ(out[1], 3); /* z2, most room among new zones */
	CHECK_EQ(out[2], 4); /* z3 before another rack of z1 */
	/* four copies: the fourth must take a new rack of a used zone */
	uint32_t out4[4];
	CHECK_EQ(iod_stor_place(n, 5, &keep, 1, 4, GiB, out4, &err), 0);
	CHECK_EQ(out4[3], 2);
	/* five: a2 shares a1's rack, so there is no fifth domain */
	uint32_t out5[5];
	CHECK_EQ(iod_stor_place(n, 5, &keep, 1, 5, GiB, out5, &err), -ENOSPC);
	CHECK_CONTAINS(err.msg, "only 4 node(s) in distinct failure domains");
	CHECK_CONTAINS(err.msg, "undersized");
}

TEST(place_skips_dead_and_full_nodes)
{
	struct iod_stor_node n[] = {
	    {"p", "r1", "z1", true, 10 * GiB},      {"dead", "r2", "z2", false, 90 * GiB},
	    {"full", "r3", "z3", true, GiB / 2},    {"ok", "r4", "z4", true, 2 * GiB},
	    {"norack1", NULL, NULL, true, 3 * GiB}, /* its own rack, zone default */
	};
	uint32_t keep = 0, out[3];
	CHECK_EQ(iod_stor_place(n, 5, &keep, 1, 3, GiB, out, &err), 0);
	CHECK_EQ(out[1], 4); /* zone "default" is new, most room */
	CHECK_EQ(out[2], 3);
	/* re-replication after a loss: keep p and ok, find one more */
	uint32_t keep2[2] = {0, 3}, out2[3];
	n[4].up = false;
	CHECK_EQ(iod_stor_place(n, 5, keep2, 2, 3, GiB, out2, &err), -ENOSPC);
	n[2].free_bytes = 4 * GiB;
	CHECK_EQ(iod_stor_place(n, 5, keep2, 2, 3, GiB, out2, &err), 0);
	CHECK_EQ(out2[0], 0);
	CHECK_EQ(out2[1], 3);
	CHECK_EQ(out2[2], 2);
}

TEST(place_refuses_bad_requests)
{
	struct iod_stor_node n[] = {{"p", "r1", "z1", true, GiB}, {"q", "r2", "z1", true, GiB}};
	uint32_t keep[2] = {0, 0}, out[8];
	CHECK_EQ(iod_stor_place(n, 2, keep, 1, 0, 1, out, &err), -EINVAL);
	CHECK_EQ(iod_stor_place(n, 2, keep, 1, 8, 1, out, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "1 to 7");
	CHECK_EQ(iod_stor_place(n, 2, keep, 2, 2, 1, out, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "two copies");
	keep[0] = 5;
	CHECK_EQ(iod_stor_place(n, 2, keep, 1, 2, 1, out, &err), -EINVAL);
	/* replicas > nodes */
	keep[0] = 0;
	CHECK_EQ(iod_stor_place(n, 2, keep, 1, 3, 1, out, &err), -ENOSPC);
	CHECK_CONTAINS(err.msg, "storage replicas 3");
}

static struct iod_stor_rview view3(const uint8_t *good, uint32_t chunks)
{
	struct iod_stor_rview v = {.size = 3,
	                           .min_size = 2,
	                           .copies_n = 3,
	                           .up = {true, true, true},
	                           .good = good,
	                           .chunks_n = chunks};
	return v;
}

TEST(health_in_cephs_words_and_the_write_quorum)
{
	char buf[64];
	struct iod_stor_health h;
	uint8_t all[4] = {7, 7, 7, 7};
	struct iod_stor_rview v = view3(all, 4);
	CHECK_EQ(iod_stor_health_get(&v, &h, &err), 0);
	CHECK_EQ(h.flags, 0);
	CHECK(h.commit_ok);
	CHECK_STR(iod_stor_health_name(h.flags, buf, sizeof(buf)), "clean");
	/* a write in flight: chunk 2 acknowledged by the primary only */
	uint8_t w[4] = {7, 3, 1, 7};
	v = view3(w, 4);
	CHECK_EQ(iod_stor_health_get(&v, &h, &err), 0);
	CHECK(!h.commit_ok); /* 1 of 3: the manifest must not commit */
	CHECK_EQ(h.copies_min, 1);
	CHECK_EQ(h.chunks_degraded, 2);
	CHECK_STR(iod_stor_health_name(h.flags, buf, sizeof(buf)), "degraded");
	w[2] = 5; /* 2 of 3: quorum */
	CHECK_EQ(iod_stor_health_get(&v, &h, &err), 0);
	CHECK(h.commit_ok);
	/* a node dies: undersized+degraded, still writable at 2 */
	v = view3(all, 4);
	v.up[1] = false;
	CHECK_EQ(iod_stor_health_get(&v, &h, &err), 0);
	CHECK_STR(iod_stor_health_name(h.flags, buf, sizeof(buf)), "undersized+degraded");
	CHECK(h.commit_ok);
	CHECK_EQ(h.up_n, 2);
	/* two die: inactive, no commits, still restorable */
	v.up[2] = false;
	CHECK_EQ(iod_stor_health_get(&v, &h, &err), 0);
	CHECK_STR(iod_stor_health_name(h.flags, buf, sizeof(buf)), "inactive+undersized+degraded");
	CHECK(!h.commit_ok);
	CHECK_EQ(h.chunks_lost, 0);
	/* and the survivor's copy of chunk 0 is corrupt: lost */
	uint8_t c[4] = {6, 7, 7, 7};
	v.good = c;
	CHECK_EQ(iod_stor_health_get(&v, &h, &err), 0);
	CHECK(h.flags & IOD_STOR_H_LOST);
	CHECK_EQ(h.chunks_lost, 1);
	/* bad views */
	v.min_size = 4;
	CHECK_EQ(iod_stor_health_get(&v, &h, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "min_size 4");
}

TEST(repair_plan_copies_corrupt_chunks_from_a_verified_copy)
{
	struct iod_stor_repair r[8];
	uint32_t n = 0, lost = 0;
	/* chunk 1 corrupt on copy 0 (the primary), chunk 2 missing on copies 1, 2 */
	uint8_t g[3] = {7, 6, 1};
	struct iod_stor_rview v = view3(g, 3);
	CHECK_EQ(iod_stor_repair_plan(&v, r, 8, &n, &lost, &err), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(lost, 0);
	CHECK(r[0].chunk == 1 && r[0].from == 1 && r[0].to == 0);
	CHECK(r[1].chunk == 2 && r[1].from == 0 && r[1].to == 1);
	CHECK(r[2].chunk == 2 && r[2].from == 0 && r[2].to == 2);
	/* a dead copy is neither a source nor a target */
	v.up[0] = false;
	CHECK_EQ(iod_stor_repair_plan(&v, r, 8, &n, &lost, &err), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(lost, 1); /* chunk 2 only lived on copy 0 */
	/* bounded: -EAGAIN with what fits, the rest on the next call */
	v.up[0] = true;
	CHECK_EQ(iod_stor_repair_plan(&v, r, 2, &n, &lost, &err), -EAGAIN);
	CHECK_EQ(n, 2);
	/* after carrying them out the view is clean and the plan empty */
	uint8_t fixed[3] = {7, 7, 7};
	v.good = fixed;
	CHECK_EQ(iod_stor_repair_plan(&v, r, 8, &n, &lost, &err), 0);
	CHECK_EQ(n, 0);
}

TEST(scrub_budget_is_a_bounded_token_bucket)
{
	CHECK_U64(iod_stor_scrub_budget(100u << 20, 0, 0), 0);
	CHECK_U64(iod_stor_scrub_budget(100u << 20, 500000000ull, 0), 50u << 20);
	CHECK_U64(iod_stor_scrub_budget(100u << 20, 250000000ull, 10), (25u << 20) + 10);
	/* never more than one second of rate, however long it slept */
	CHECK_U64(iod_stor_scrub_budget(100u << 20, 3600ull * 1000000000ull, 0), 100u << 20);
	CHECK_U64(iod_stor_scrub_budget(100u << 20, 900000000ull, 99u << 20), 100u << 20);
	/* large rates do not overflow */
	CHECK_U64(iod_stor_scrub_budget(UINT64_MAX / 2, 999999999ull, 0) > UINT64_MAX / 4, 1);
}
