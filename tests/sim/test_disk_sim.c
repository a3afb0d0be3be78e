/*
 * test_disk_sim.c: disk faults in the whole-cluster simulator, decided by
 * iod's real Raft log (src/state/wal.c) on a memory file system.
 *
 * Each simulated server's log is mirrored into wal.c (src/state/simdisk.c).
 * A disk fault damages it and restarts the server: a torn tail is repaired
 * and the server rejoins with its log, no rebuild; any other damage is
 * refused (file, offset, reason) and the server stays down until it is
 * rebuilt from the most up-to-date peer, as --recover-from-peers does. At
 * the end of each run every committed write must be on the disks as wal.c
 * loads them (on a majority once all servers are back), on top of the
 * run's own V6 checks. With every server's log refused there is no peer to
 * rebuild from and the check must see the writes lost.
 *
 * IOD_SIM_SEEDS=N runs N seeds per case (default 2).
 */
#include "harness.h"
#include "iod/sim_cluster.h"
#include "iod/state.h"

#include <stdlib.h>
#include <string.h>

static unsigned seeds(void)
{
	const char *v = getenv("IOD_SIM_SEEDS");
	return v && atoi(v) > 0 ? (unsigned)atoi(v) : 2;
}

static void base(struct iod_simc_config *c, uint64_t seed)
{
	iod_simc_config_default(c);
	iod_simc_timers_iod(&c->timers, 2000, 50, 3, 30000, 100 * IOD_NS_PER_MS, 10 * IOD_NS_PER_S);
	c->seed = seed;
	c->nodes = 4;
	c->gpus_per_node = 4;
	c->job.gpus = 16;
	c->job.steps = 800; /* runs past every repair */
	c->job.epochs = 0;
	c->fault_per_gpu_hour = 0;
	c->server_repair_ns = 5 * IOD_NS_PER_S;
	c->horizon_ns = 3600 * IOD_NS_PER_S;
}

static void disk(struct iod_simc_config *c, uint64_t at_s, uint32_t server,
                 enum iod_simdisk_damage d)
{
	c->faults[c->faults_n++] = (struct iod_simc_fault){
	    .at_ns = at_s * IOD_NS_PER_S,
	    .kind = IOD_SIMC_FAULT_DISK,
	    .node = server,
	    .damage = (uint32_t)d,
	};
}

static int run(struct iod_simc_config *c, struct iod_simc_result *r)
{
	struct iod_err e = {0};
	int rc = iod_simc_run(c, r, NULL, NULL, &e);
	if (rc)
		fprintf(stderr, "run: %s\n", e.msg);
	return rc;
}

TEST(torn_tail_rejoins_without_recovery)
{
	for (uint64_t seed = 1; seed <= seeds(); seed++) {
		struct iod_simc_config c;
		struct iod_simc_result r;
		base(&c, seed);
		disk(&c, 30, 1, IOD_SIMDISK_TORN);
		CHECK_EQ(run(&c, &r), 0);
		CHECK_EQ(r.disk_n, 1);
		CHECK_MSG(r.disk[0].rc == 0, "seed %llu: refused: %s", (unsigned long long)seed,
		          r.disk[0].why);
		CHECK(r.disk[0].torn_bytes > 0);
		CHECK(!strcmp(iod_simc_disk_verdict(&r.disk[0]), "repaired"));
		CHECK(!r.disk[0].rebuilt);
		CHECK_EQ(r.disk[0].back_ns, c.server_repair_ns);
		CHECK(r.disk[0].caught_up_ns >= r.disk[0].back_ns);
		CHECK(r.disk_writes_checked > 50);
		CHECK_MSG(r.invariant_violations == 0, "seed %llu: %s", (unsigned long long)seed,
		          r.invariant_first);
		CHECK(r.done);
		iod_simc_result_free(&r);
	}
}

/* Two of three servers damaged, each kind of damage on the first: nothing
 * committed is lost, the refused logs are rebuilt, everyone is back. */
TEST(two_of_three_damaged_lose_no_committed_write)
{
	const enum iod_simdisk_damage kinds[] = {IOD_SIMDISK_FLIP, IOD_SIMDISK_TORN,
	                                         IOD_SIMDISK_ZERO, IOD_SIMDISK_MISSING,
	                                         IOD_SIMDISK_GARBAGE};
	for (uint64_t seed = 1; seed <= seeds(); seed++)
		for (unsigned k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			struct iod_simc_config c;
			struct iod_simc_result r;
			base(&c, seed);
			disk(&c, 30, 1, kinds[k]);
			disk(&c, 32, 2, IOD_SIMDISK_FLIP);
			CHECK_EQ(run(&c, &r), 0);
			CHECK_EQ(r.disk_n, 2);
			for (uint32_t i = 0; i < r.disk_n; i++) {
				const struct iod_simc_disk *d = &r.disk[i];
				bool torn = d->damage == IOD_SIMDISK_TORN;
				CHECK_MSG(torn ? d->rc == 0 : d->rc == -EUCLEAN,
				          "seed %llu %s: rc %d %s", (unsigned long long)seed,
				          iod_simdisk_damage_name(d->damage), d->rc, d->why);
				/* a refusal names the file and the offset */
				CHECK_MSG(
				    torn || (strstr(d->why, "seg-") && (strstr(d->why, "offset") ||
				                                        strstr(d->why, "missing"))),
				    "%s", d->why);
				CHECK_EQ(d->rebuilt, !torn);
				CHECK_MSG(d->back_ns > 0, "server %u never came back", d->server);
			}
			CHECK(r.disk_writes_checked > 50);
			CHECK_MSG(r.invariant_violations == 0, "seed %llu %s: %s",
			          (unsigned long long)seed, iod_simdisk_damage_name(kinds[k]),
			          r.invariant_first);
			iod_simc_result_free(&r);
		}
}

/* Every log refused: no peer to rebuild from, the servers stay down, and
 * the end-of-run check sees the committed writes on no disk. */
TEST(all_logs_refused_is_seen_as_lost)
{
	struct iod_simc_config c;
	struct iod_simc_result r;
	base(&c, 1);
	c.job.steps = 600;
	for (uint32_t i = 0; i < 3; i++)
		disk(&c, 30 + i, i, IOD_SIMDISK_FLIP);
	CHECK_EQ(run(&c, &r), 0);
	CHECK_EQ(r.disk_n, 3);
	for (uint32_t i = 0; i < 3; i++) {
		CHECK_EQ(r.disk[i].rc, -EUCLEAN);
		CHECK(!r.disk[i].rebuilt);
		CHECK_EQ(r.disk[i].back_ns, 0);
	}
	CHECK(r.invariant_violations > 0);
	CHECK_MSG(strstr(r.invariant_first, "servers' disks") != NULL, "%s", r.invariant_first);
	iod_simc_result_free(&r);
}

TEST(disk_faults_are_deterministic)
{
	struct iod_simc_config c;
	struct iod_simc_result a, b;
	base(&c, 7);
	disk(&c, 20, 0, IOD_SIMDISK_GARBAGE);
	disk(&c, 25, 2, IOD_SIMDISK_TORN);
	CHECK_EQ(run(&c, &a), 0);
	CHECK_EQ(run(&c, &b), 0);
	CHECK(!strcmp(a.log_sha256, b.log_sha256));
	CHECK_EQ(a.disk[0].back_ns, b.disk[0].back_ns);
	CHECK_EQ(a.invariant_violations, 0);
	iod_simc_result_free(&a);
	iod_simc_result_free(&b);
}

TEST(scenario_kind_disk_and_bad_damage)
{
	struct iod_simc_scenario sc;
	struct iod_err e = {0};
	const char *ok = "name: d\nfaults:\n  - {at: 30s, kind: disk, node: 1, damage: torn}\n"
	                 "  - {at: 40s, kind: disk, node: 2}\n";
	const char *bad = "name: d\nfaults:\n  - {at: 30s, kind: disk, node: 1, damage: melt}\n";
	const char *wrong = "name: d\nfaults:\n  - {at: 30s, kind: node, node: 1, damage: torn}\n";
	memset(&sc, 0, sizeof(sc));
	iod_simc_config_default(&sc.cfg);
	CHECK_MSG(iod_simc_scenario_parse_yaml(&sc, ok, strlen(ok), "d.yaml", &e) == 0, "%s",
	          e.msg);
	CHECK_EQ(sc.cfg.faults_n, 2);
	CHECK_EQ(sc.cfg.faults[0].kind, IOD_SIMC_FAULT_DISK);
	CHECK_EQ(sc.cfg.faults[0].damage, IOD_SIMDISK_TORN);
	CHECK_EQ(sc.cfg.faults[1].damage, IOD_SIMDISK_FLIP);
	CHECK(iod_simc_scenario_parse_yaml(&sc, bad, strlen(bad), "d.yaml", &e) < 0);
	CHECK_MSG(strstr(e.msg, "d.yaml:3") && strstr(e.msg, "melt"), "%s", e.msg);
	CHECK(iod_simc_scenario_parse_yaml(&sc, wrong, strlen(wrong), "d.yaml", &e) < 0);
}
