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

/* ---- topo -------------------------------------------------------------- */

/* ---- sched ------------------------------------------------------------- */

/* GPUs per node: 16 covers every HGX/DGX board (8) and 16-GPU systems; GPU
 * sets are 32-bit masks and the exact set search stays affordable
 * (C(16,8) = 12,870 sets, memoized). */
#define IOD_SCHED_NODE_GPUS_MAX 16
/* NUMA nodes per node: 2 sockets x NPS4 on AMD. */
#define IOD_SCHED_NUMA_MAX 8
/* NICs per node: DGX H100 has 8 ConnectX-7 + 2 BlueField ports + mgmt. */
#define IOD_SCHED_NICS_MAX 16
/* Labels per node and selector terms per request. */
#define IOD_SCHED_LABELS_MAX 8
/* Candidates kept per decision for `iod explain`: enough to see the runner-up. */
#define IOD_SCHED_EXPLAIN_TOP 3
/* One reason line: a node name, a GPU list and counts fit easily. */
#define IOD_SCHED_WHY_MAX 320
/* Moves per rebalancing plan: disruption is bounded by design. */
#define IOD_SCHED_MOVES_MAX 64
/* Distinct node models in one cluster. */
#define IOD_SCHED_SHAPES_MAX 64
/* Memoized GPU-set searches per shape: (free mask, k, link) keys; 2^18
 * covers every key of an 8-GPU shape many times and bounds 16-GPU ones. */
#define IOD_SCHED_MEMO_MAX (1u << 18)
/* NUMA classes kept per memoized search (best set per NUMA-node mask):
 * 8 GPUs over 2-4 NUMA nodes give at most 15. */
#define IOD_SCHED_CLASSES_MAX 32
/* Nodes and placed replicas in one scheduler instance. */
#define IOD_SCHED_NODES_MAX 100000
#define IOD_SCHED_REPLICAS_MAX (1u << 20)
/* Services one scheduler instance tracks (spread, anti-affinity, moves). */
#define IOD_SCHED_SERVICES_MAX 65536

/* ---- state / raft / api ------------------------------------------------ */

/* ---- agent ------------------------------------------------------------- */

/* ---- mesh -------------------------------------------------------------- */

/* ---- flow / net / io --------------------------------------------------- */

/* ---- sim / chaos ------------------------------------------------------- */

#endif
