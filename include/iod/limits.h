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

/* Services one node's proxy serves: each gets a loopback VIP and a listener
 * per worker; 256 matches IOD_SPEC_SERVICES_MAX. */
#define IOD_MESH_SERVICES_MAX 256
/* Endpoints per service: replicas of one service seen by one proxy. Tables
 * per endpoint (pools, counters) are sized by it. */
#define IOD_MESH_ENDPOINTS_MAX 256
/* Ring-hash points per unit of weight: Envoy's default minimum ring is 1024
 * entries; 64 points per endpoint keeps the spread within a few percent. */
#define IOD_MESH_RING_POINTS 64
/* Ring entries in total: endpoints x points x max weight share, bounded. */
#define IOD_MESH_RING_MAX 16384
/* Worker threads of one proxy: one per core of a large node is plenty. */
#define IOD_MESH_WORKERS_MAX 64
/* Connections (client + upstream) per worker, allocated at start-up. */
#define IOD_MESH_CONNS_MAX 4096
/* One HTTP message head or a whole buffered request: requests must fit to
 * be retryable; larger ones get 413 (docs/mesh.md). */
#define IOD_MESH_HTTP_BUF 16384
/* Header lines per HTTP message: nginx's default large_client_header is
 * 4 x 8k; 100 headers is what Go and Node.js accept. */
#define IOD_MESH_HTTP_HEADERS_MAX 100
/* Idle keep-alive connections kept per endpoint per worker. */
#define IOD_MESH_POOL_IDLE_MAX 64
/* Spans and flow records kept per worker ring (a power of two). */
#define IOD_MESH_SPANS_MAX 4096
/* Retries one request may make (Envoy's circuit breaker default is 3). */
#define IOD_MESH_RETRIES_MAX 8
/* Latency histogram buckets (Prometheus `le` bounds). */
#define IOD_MESH_LATENCY_BUCKETS 14
/* A DNS query is one UDP datagram; 512 bytes is RFC 1035's classic limit. */
#define IOD_MESH_DNS_MSG_MAX 512
/* The proxy config file is read whole. */
#define IOD_MESH_CONFIG_MAX (1u << 20)

/* ---- flow / net / io --------------------------------------------------- */

/* ---- sim / chaos ------------------------------------------------------- */

#endif
