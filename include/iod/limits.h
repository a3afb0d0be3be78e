/*
 * limits.h: every fixed limit of iod, in one place, each with its reason.
 *
 * TigerStyle and SQLite's sqliteLimit.h: everything is bounded, and the bound
 * is named here rather than scattered. Exceeding a limit is an explicit,
 * tested error (-ENOSPC, -E2BIG or a spec error), never a crash. Modules keep
 * their limits in their own section below.
 */
#ifndef IOD_LIMITS_H
#define IOD_LIMITS_H

/* ---- base -------------------------------------------------------------- */

/* One error message: room for file:line:col, an object name and a hint. */
#define IOD_ERR_MSG_MAX 512
/* Bits in a CPU or GPU set: 1024 PUs covers today's largest 2-socket
 * servers (2 x 192 cores x 2 threads = 768) with room to spare. */
#define IOD_BITMAP_BITS 1024
#define IOD_BITMAP_WORDS (IOD_BITMAP_BITS / 64)
/* Longest name of anything (service, node, device): DNS label rules allow
 * 63; we allow a little more for generated replica names "svc-123". */
#define IOD_NAME_MAX 64
/* One log line; longer messages are truncated, never split. */
#define IOD_LOG_LINE_MAX 2048

/* ---- spec -------------------------------------------------------------- */

/* A spec file is read whole: 4 MiB is hundreds of services with room. */
#define IOD_SPEC_FILE_MAX (4u << 20)
/* Services per spec: beyond this a topology is not hand-written YAML. */
#define IOD_SPEC_SERVICES_MAX 256
/* Replicas per service: 10,000 matches the scheduler benchmark's scale. */
#define IOD_SPEC_REPLICAS_MAX 10000
/* Errors reported per file before giving up: enough to fix a file in one
 * pass, few enough to stay readable. */
#define IOD_SPEC_ERRORS_MAX 20
/* YAML nesting depth: the spec is at most ~6 deep; bound recursion. */
#define IOD_SPEC_DEPTH_MAX 32
/* Per-service lists (env, ports, args, depends_on). */
#define IOD_SPEC_LIST_MAX 64
/* Storage tiers: PMem, NVMe, SSD, HDD, object store... */
#define IOD_SPEC_TIERS_MAX 8
/* YAML nodes per file: a hand-written spec of 256 services has ~50k; the
 * bound keeps a hostile 4 MiB file of tiny flow items from taking ~100 MB. */
#define IOD_SPEC_NODES_MAX 200000
/* Longest service name: 57 characters plus "-9999" (the largest replica
 * ordinal) and a NUL still fit a replica name in IOD_NAME_MAX. */
#define IOD_SPEC_NAME_LEN_MAX 57
/* Longest string value (command line, env value, health command, path). */
#define IOD_SPEC_STRING_MAX 4096
/* GPUs (and compute units, CPU cores) per replica: a replica's GPU and CPU
 * sets are iod_bitmaps of IOD_BITMAP_BITS. */
#define IOD_SPEC_UNITS_MAX IOD_BITMAP_BITS
/* Health check thresholds: beyond 100 consecutive results a check is not
 * a threshold but a way of never deciding. */
#define IOD_SPEC_THRESHOLD_MAX 100
/* Health interval bounds: faster than 1 ms turns checks into load; slower
 * than an hour means failures go unnoticed. */
#define IOD_SPEC_HEALTH_INTERVAL_MIN_NS 1000000ull
#define IOD_SPEC_HEALTH_INTERVAL_MAX_NS 3600000000000ull

/* ---- topo -------------------------------------------------------------- */

/* ---- sched ------------------------------------------------------------- */

/* ---- state / raft / api ------------------------------------------------ */

/* ---- agent ------------------------------------------------------------- */

/* ---- mesh -------------------------------------------------------------- */

/* ---- flow / net / io --------------------------------------------------- */

/* ---- net/ar (adaptive routing) ---------------------------------------- */

/* Paths kept per destination: Clove uses k = 4; 16 leaves room for wide
 * fabrics without making per-packet path scans long. */
#define IOD_AR_PATHS_MAX 16
/* Candidate ports probed while discovering paths (4 x k at k = 16). */
#define IOD_AR_DISCOVERY_MAX 64
/* Recently failed ports remembered per destination so their flows move. */
#define IOD_AR_DEAD_PORTS_MAX 8
/* Flow slots examined for aging per tick: bounds the work of one call. */
#define IOD_AR_AGE_SCAN 1024
/* Ports remembered per sending edge for ECN relay (Clove's receiver). */
#define IOD_AR_RX_PORTS_MAX 16

/* ---- sim / chaos ------------------------------------------------------- */

#endif
