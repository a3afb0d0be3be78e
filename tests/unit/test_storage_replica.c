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
#include <stdlib.h>
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

/* Issue 23: after a node holding a copy is lost, the plan keeps the live
 * copies, picks a replacement in a new failure domain and fills it from a
 * surviving verified copy, chunk by chunk; applying the repairs makes the
 * checkpoint clean again. */
TEST(rereplicate_plan_brings_a_degraded_checkpoint_back_to_clean)
{
	struct iod_stor_node n[] = {
	    {"n1", "r1", "z1", true, 10 * GiB}, /* primary */
	    {"n2", "r2", "z2", true, 10 * GiB}, {"n3", "r3", "z3", true, 10 * GiB},
	    {"n4", "r4", "z4", true, 20 * GiB}, /* the spare */
	    {"n5", "r1", "z1", true, 90 * GiB}, /* n1's rack: never with n1 */
	};
	uint32_t copies[3] = {0, 1, 2};
	uint8_t good[4] = {7, 7, 7, 5}; /* chunk 3: copy 1 (n2) is damaged */
	struct iod_stor_rereplica *p = calloc(1, sizeof(*p));
	struct iod_stor_repair rep[16];
	uint32_t rn = 0;
	CHECK(p != NULL);
	/* nothing lost: nothing added, only the damaged chunk is repaired */
	CHECK_MSG(
	    iod_stor_rereplicate_plan(n, 5, copies, 3, good, 4, 3, GiB, p, rep, 16, &rn, &err) == 0,
	    "%s", err.msg);
	CHECK_EQ(p->added_n, 0);
	CHECK_EQ(p->dead_n, 0);
	CHECK_EQ(rn, 1);
	CHECK_EQ(rep[0].chunk, 3);
	CHECK_EQ(rep[0].to, 1);
	/* n1 (the primary) is lost: n2, n3 stay (copies 0, 1), n4 is added */
	n[0].up = false;
	struct iod_stor_rview before = {.size = 3,
	                                .min_size = 2,
	                                .copies_n = 3,
	                                .up = {false, true, true},
	                                .good = good,
	                                .chunks_n = 4};
	struct iod_stor_health h;
	CHECK_EQ(iod_stor_health_get(&before, &h, &err), 0);
	CHECK(h.flags & IOD_STOR_H_DEGRADED);
	CHECK_MSG(
	    iod_stor_rereplicate_plan(n, 5, copies, 3, good, 4, 3, GiB, p, rep, 16, &rn, &err) == 0,
	    "%s", err.msg);
	CHECK_EQ(p->dead_n, 1);
	CHECK_EQ(p->kept_n, 2);
	CHECK_EQ(p->added_n, 1);
	CHECK_EQ(p->nodes_n, 3);
	CHECK_EQ(p->nodes[0], 1);
	CHECK_EQ(p->nodes[1], 2);
	/* n5: the dead n1's rack and zone are free again; both n4 (z4) and n5
	 * (z1) are new zones, and n5 has the most room */
	CHECK_EQ(p->nodes[2], 4);
	/* every chunk goes to the new copy; chunk 3 also to n2 (damaged), from n3 */
	uint32_t to_new = 0;
	for (uint32_t i = 0; i < rn; i++) {
		CHECK(rep[i].from != rep[i].to);
		CHECK(p->good[rep[i].chunk] >> rep[i].from & 1u);
		to_new += rep[i].to == 2;
	}
	CHECK_EQ(to_new, 4);
	CHECK_EQ(rn, 5);
	/* carry the repairs out: the new placement is clean */
	for (uint32_t i = 0; i < rn; i++)
		p->good[rep[i].chunk] |= (uint8_t)(1u << rep[i].to);
	struct iod_stor_rview after = {.size = 3,
	                               .min_size = 2,
	                               .copies_n = p->nodes_n,
	                               .up = {true, true, true},
	                               .good = p->good,
	                               .chunks_n = 4};
	CHECK_EQ(iod_stor_health_get(&after, &h, &err), 0);
	CHECK_EQ(h.flags, 0);
	/* bounded: 2 repairs per call, -EAGAIN while more remain */
	CHECK_EQ(iod_stor_rereplicate_plan(n, 5, copies, 3, good, 4, 3, GiB, p, rep, 2, &rn, &err),
	         -EAGAIN);
	CHECK_EQ(rn, 2);
	/* no live node left in a new domain: -ENOSPC, stays undersized */
	n[3].up = false;
	n[4].up = false;
	CHECK_EQ(iod_stor_rereplicate_plan(n, 5, copies, 3, good, 4, 3, GiB, p, rep, 16, &rn, &err),
	         -ENOSPC);
	CHECK_CONTAINS(err.msg, "2 of 3 copies live");
	CHECK_CONTAINS(err.msg, "undersized");
	/* a chunk whose only verified copy died: lost, nothing to copy from */
	n[3].up = true;
	uint8_t good2[2] = {7, 1};
	CHECK_EQ(
	    iod_stor_rereplicate_plan(n, 5, copies, 3, good2, 2, 3, GiB, p, rep, 16, &rn, &err),
	    -ENOENT);
	CHECK_CONTAINS(err.msg, "chunk 1 has no verified copy on a live node");
	free(p);
}

/* What the Checkpoint object says after a re-replication: n1 lost, n2 and
 * n3 kept, one new copy. Made: 3 copies, clean; the copy failed: the two
 * survivors, undersized+degraded but committed (quorum 2). The old code
 * left the object at its commit-time copies (n1 listed, not n5). */
TEST(rereplicate_result_is_what_the_checkpoint_object_says)
{
	struct iod_stor_node n[] = {{"n1", "r1", "z1", false, 10 * GiB},
	                            {"n2", "r2", "z2", true, 10 * GiB},
	                            {"n3", "r3", "z3", true, 10 * GiB},
	                            {"n5", "r5", "z5", true, 90 * GiB}};
	uint32_t copies[3] = {0, 1, 2}, out[IOD_STOR_REPLICAS_MAX], on = 0;
	uint8_t good[2] = {7, 7};
	struct iod_stor_rereplica *p = calloc(1, sizeof(*p));
	struct iod_stor_repair rep[16];
	struct iod_stor_health h;
	char name[64];
	uint32_t rn = 0;
	CHECK(p != NULL);
	CHECK_MSG(
	    iod_stor_rereplicate_plan(n, 4, copies, 3, good, 2, 3, GiB, p, rep, 16, &rn, &err) == 0,
	    "%s", err.msg);
	CHECK_EQ(p->kept_n, 2);
	CHECK_EQ(p->added_n, 1);
	bool made[IOD_STOR_REPLICAS_MAX] = {true};
	CHECK_EQ(iod_stor_rereplicate_result(p, made, 3, 2, out, &on, &h, &err), 0);
	CHECK_EQ(on, 3);
	CHECK_EQ(out[0], 1);
	CHECK_EQ(out[1], 2);
	CHECK_EQ(out[2], 3);
	CHECK_EQ(h.flags, 0);
	CHECK_STR(iod_stor_health_name(h.flags, name, sizeof(name)), "clean");
	made[0] = false;
	CHECK_EQ(iod_stor_rereplicate_result(p, made, 3, 2, out, &on, &h, &err), 0);
	CHECK_EQ(on, 2);
	CHECK(h.flags & IOD_STOR_H_UNDERSIZED);
	CHECK(h.commit_ok);
	/* outside the limits: a quorum above the size */
	CHECK_EQ(iod_stor_rereplicate_result(p, made, 2, 3, out, &on, &h, &err), -EINVAL);
	free(p);
}
