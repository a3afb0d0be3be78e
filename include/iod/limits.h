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

/* ---- state / raft / api ------------------------------------------------ */

/* ---- agent ------------------------------------------------------------- */

/* ---- mesh -------------------------------------------------------------- */

/* ---- flow / net / io --------------------------------------------------- */

/* ---- sim / chaos ------------------------------------------------------- */

/* Nodes of a simulated fabric: a k=16 fat-tree has 1024 hosts + 320
 * switches; 65536 bounds the routing table (nodes x hosts entries). */
#define IOD_SIM_NODES_MAX 65536
/* Links: a k=16 fat-tree has 3072; parallel links count one each. */
#define IOD_SIM_LINKS_MAX 262144
/* Timed link changes (failures, degradations) per topology. */
#define IOD_SIM_TOPO_EVENTS_MAX 4096
/* Routing entries (switch ports x hosts): 64 Mi x 4 B = 256 MiB at most. */
#define IOD_SIM_ROUTES_MAX (64u << 20)
/* Flow-size CDF points: published CDFs have 10-30. */
#define IOD_SIM_CDF_POINTS_MAX 256
/* A topology or CDF file is read whole: 1 MiB is thousands of links. */
#define IOD_SIM_FILE_MAX (1u << 20)
/* YAML nodes in one topology file (bounds the parser's tree). */
#define IOD_SIM_YAML_NODES_MAX 200000
/* YAML nesting depth: the format is at most 4 deep. */
#define IOD_SIM_YAML_DEPTH_MAX 16
/* Congestion window ceiling in packets: 65536 x 1.5 KB = 96 MB in flight,
 * far above any data-center BDP. */
#define IOD_SIM_CWND_MAX_PKTS 65536
/* Default packet pool: 2 Mi packets x 64 B = 128 MiB. */
#define IOD_SIM_PACKETS_DEFAULT (2u << 20)
/* Default flow table: 4 Mi flows x ~128 B = 512 MiB worst case; sized to
 * the workload in practice. */
#define IOD_SIM_FLOWS_DEFAULT (4u << 20)
/* Unresponsive packet sources (queue-theory checks). */
#define IOD_SIM_RAW_MAX 1024
/* Hops of one path (iod_sim_path, ideal FCT): a 3-tier fabric has 6. */
#define IOD_SIM_PATH_MAX 16
/* Probes one host's policy may ask for per probe interval. */
#define IOD_SIM_PROBES_PER_TICK_MAX 64
/* Loads in one sweep. */
#define IOD_SIM_SWEEP_MAX 32

#endif
