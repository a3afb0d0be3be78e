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

/* Replicas one agent tracks at once (running + stopping): a node with 8
 * GPUs and a few hundred CPU-only sidecars fits with room. */
#define IOD_AGENT_REPLICAS_MAX 512
/* One health-check command line or program path. */
#define IOD_AGENT_CMD_MAX 512
/* A path (run dir, cgroup dir, HTTP check path): below PATH_MAX (4096)
 * on purpose, replica paths are short. */
#define IOD_AGENT_PATH_MAX 512
/* Program and arguments of one replica, NUL-separated: a long command line
 * is ~1 KiB; 4 KiB leaves room. */
#define IOD_AGENT_ARGV_BYTES_MAX 4096
/* Environment of one replica (identity, peers, dependencies, user env):
 * 64 peers x ~24 bytes plus user variables. */
#define IOD_AGENT_ENV_BYTES_MAX 8192
/* Arguments / variables counted out of those buffers. */
#define IOD_AGENT_ARGS_MAX 64
#define IOD_AGENT_ENVS_MAX 128
/* A phase reason ("exit status 1; restarting in 400 ms"). */
#define IOD_AGENT_REASON_MAX 160
/* Actions the agent takes per reconciler step before looping again. */
#define IOD_AGENT_ACTIONS_MAX 64
/* A manifest of desired replicas (JSON). */
#define IOD_AGENT_MANIFEST_MAX (4u << 20)
/* Bytes read from an HTTP health answer: the status line is all we need. */
#define IOD_AGENT_HTTP_READ_MAX 1024
/* The demo parameter server's vector: 1 Mi floats = 4 MiB per shard max. */
#define IOD_DEMO_PARAMS_MAX (1u << 20)
/* Parameter servers one demo worker talks to. */
#define IOD_DEMO_SERVERS_MAX 16

/* ---- mesh -------------------------------------------------------------- */

/* ---- flow / net / io --------------------------------------------------- */

/* ---- sim / chaos ------------------------------------------------------- */

#endif
