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

/* ---- yaml (src/base/yaml.c: specs, topology files, dp config) ---------- */

/* YAML nodes per document: a hand-written spec of 256 services has ~50k;
 * the bound keeps a hostile 4 MiB file of tiny flow items from taking
 * ~100 MB. Every YAML format iod reads shares it. */
#define IOD_YAML_NODES_MAX 200000
/* YAML nesting depth: every format is at most ~6 deep; bounds the
 * loader's stack and any recursive walk of the tree. */
#define IOD_YAML_DEPTH_MAX 32

/* ---- spec -------------------------------------------------------------- */

/* A spec file is read whole: 4 MiB is hundreds of services with room. */
#define IOD_SPEC_FILE_MAX (4u << 20)
/* Services per spec: beyond this a topology is not hand-written YAML. */
#define IOD_SPEC_SERVICES_MAX 256
/* Replicas per service: a service is deployed at once, and one deploy
 * places at most IOD_DEPLOY_REPLICAS_MAX (why that many: there). */
#define IOD_SPEC_REPLICAS_MAX 3000
/* Errors reported per file before giving up: enough to fix a file in one
 * pass, few enough to stay readable. */
#define IOD_SPEC_ERRORS_MAX 20
/* YAML nesting depth: the spec is at most ~6 deep; bound recursion. */
#define IOD_SPEC_DEPTH_MAX IOD_YAML_DEPTH_MAX
/* Per-service lists (env, ports, args, depends_on). */
#define IOD_SPEC_LIST_MAX 64
/* Storage tiers: PMem, NVMe, SSD, HDD, object store... */
#define IOD_SPEC_TIERS_MAX 8
/* YAML nodes per spec: the one YAML bound (spec's name for it). */
#define IOD_SPEC_NODES_MAX IOD_YAML_NODES_MAX
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

/* Seccomp profiles (sandbox.seccomp, OCI / Docker JSON): Docker's default
 * profile is ~20 KiB with ~60 rules naming ~450 syscalls over every
 * architecture; these bounds hold several times that. */
#define IOD_SECCOMP_PROFILE_BYTES_MAX (256 * 1024)
#define IOD_SECCOMP_RULES_MAX 1024
#define IOD_SECCOMP_NAMES_MAX 4096
/* A syscall name ("sched_rr_get_interval_time64" is 28 bytes). */
#define IOD_SECCOMP_NAME_MAX 64
/* Comparisons per rule: a syscall has six arguments. */
#define IOD_SECCOMP_ARGS_MAX 6

/* ---- topo -------------------------------------------------------------- */

/* CPU packages per node: 8-socket servers are the largest common machines;
 * 16 for the glueless 16-socket ones (hwloc's 96em64t test machine). */
#define IOD_TOPO_PACKAGES_MAX 16
/* NUMA nodes: 2 sockets x SNC4/NPS4 = 8, plus CXL and GPU-memory nodes
 * (Grace Hopper exposes HBM as NUMA nodes); 32 leaves room. */
#define IOD_TOPO_NUMA_MAX 32
/* Last-level caches: AMD EPYC has one L3 per CCD, up to 16 per socket. */
#define IOD_TOPO_CACHES_MAX 32
/* Host bridges + PCIe switches: a DGX has ~12 root complexes and ~8 switches;
 * 64 covers large PCIe expansion boxes. */
#define IOD_TOPO_BRIDGES_MAX 64
/* Devices we model (GPU, NIC, DPU, FPGA, NVMe): 8 GPUs + 10 NICs + 16 NVMe
 * fit with room. The link matrix is DEVICES^2 x 4 bytes (16 KiB), which is
 * what bounds it: a node must stay small enough to hold 1,000 of them. */
#define IOD_TOPO_DEVICES_MAX 64
/* GPUs per node: 8-16 in today's servers; 32 covers 20-GPU PCIe chassis. */
#define IOD_TOPO_GPUS_MAX 32
/* Compute units: one per device plus one CPU unit per NUMA node. */
#define IOD_TOPO_UNITS_MAX (IOD_TOPO_DEVICES_MAX + IOD_TOPO_NUMA_MAX)
/* NVLinks per GPU: NVLink 4/5 (H100, B200) have 18; NVML's link loop bound. */
#define IOD_TOPO_NVLINKS_MAX 18
/* Model, vendor, UUID strings: "GPU-" + 36-char UUID fits; longer names are
 * truncated (they are labels, not keys). */
#define IOD_TOPO_STR_MAX 48
/* Device labels "GPU12", "NIC10" and OS names "mlx5_10". */
#define IOD_TOPO_LABEL_MAX 24
/* An hwloc XML file is read whole: a 2-socket server with every PCI device
 * is ~200 KiB; 16 MiB leaves room for huge machines, bounds a bad file. */
#define IOD_TOPO_XML_MAX (16u << 20)
/* Seconds hwloc may take to parse a user's XML (in its child process):
 * a 200 KiB file takes milliseconds; this only stops a parser stuck in a loop. */
#define IOD_TOPO_XML_PARSE_S_MAX 10
/* PCI tree depth walked from a device to its host bridge (cycle guard). */
#define IOD_TOPO_PCI_DEPTH_MAX 16
/* GPUs per node of the parametric generic-N model. */
#define IOD_TOPO_GENERIC_GPUS_MAX 16

/* ---- sched ------------------------------------------------------------- */

/* GPUs per node: 16 covers every HGX/DGX board (8) and 16-GPU systems; GPU
 * sets are 32-bit masks and the exact set search stays affordable
 * (C(16,8) = 12,870 sets, memoized). */
#define IOD_SCHED_NODE_GPUS_MAX 16
/* NUMA nodes per node: 2 sockets x NPS4 on AMD. */
#define IOD_SCHED_NUMA_MAX 8
/* NICs per node: DGX H100 has 8 ConnectX-7 + 2 BlueField ports + mgmt. */
#define IOD_SCHED_NICS_MAX 16
/* Accelerator units (DPUs, FPGAs) per node: a mask in a uint32_t; real
 * servers carry 1-2 DPUs and at most a few FPGA cards. */
#define IOD_SCHED_ACCS_MAX 16
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
/* Registered topologies one cluster build remembers, to convert each kind of
 * machine once (src/ctrl/cluster.c); more kinds are converted per node. */
#define IOD_CTRL_TOPOS_SEEN_MAX 256
/* Memoized GPU-set searches per shape: (free mask, k, link) keys; 2^18
 * covers every key of an 8-GPU shape many times and bounds 16-GPU ones. */
#define IOD_SCHED_MEMO_MAX (1u << 18)
/* NUMA classes kept per memoized search (best set per NUMA-node mask):
 * 8 GPUs over 2-4 NUMA nodes give at most 15. */
#define IOD_SCHED_CLASSES_MAX 32
/* Nodes and placed replicas in one scheduler instance. */
#define IOD_SCHED_NODES_MAX 100000
#define IOD_SCHED_REPLICAS_MAX (1u << 20)
/* Replicas one deploy (one iod_sched_place call) may ask for: a result holds
 * ~0.8 KB per replica (its explanation and reason), so 10^5 is ~80 MB. */
#define IOD_SCHED_DEPLOY_MAX 100000
/* Replicas bound to one node: what its agent can run at once. */
#define IOD_SCHED_NODE_REPLICAS_MAX IOD_AGENT_REPLICAS_MAX
/* Services one scheduler instance tracks (spread, anti-affinity, moves). */
#define IOD_SCHED_SERVICES_MAX 65536

/* ---- state / raft / api ------------------------------------------------ */

/* Objects in the cluster state: 10,000 replicas + endpoints on 1,000 nodes
 * (the scheduler's scale) is ~21,000; ten times that leaves room for
 * services, policies and config without letting a runaway client fill RAM. */
#define IOD_STATE_OBJECTS_MAX 200000
/* Bytes of object values (compact JSON) in the whole state: a snapshot must
 * fit IOD_RAFT_SNAPSHOT_MAX (256 MiB) with names, revisions and leases, or
 * the log could never be compacted again; and RAM stays bounded. Past it,
 * writes that grow the state get 507 naming this limit. */
#define IOD_STATE_BYTES_MAX (192ull << 20)
/* One command (a Raft log entry): a deploy of 10,000 replicas at ~400 B of
 * JSON each is ~4 MB; 8 MiB bounds what one apply parses. */
#define IOD_STATE_CMD_MAX (8u << 20)
/* Changes kept for watches. A watcher that falls further behind re-lists
 * (like etcd's compaction). 16,384 events cover a full deploy at scale
 * plus the churn of a few seconds. */
#define IOD_STATE_HISTORY_MAX 16384
/* Leases: one per node agent plus a few per service (1,000 nodes x 8). */
#define IOD_STATE_LEASES_MAX 8192
/* Of those, kept for node agents' leases (granted with "node": true by a
 * node identity): 8,192 day-long leases from one client once stopped every
 * agent from registering. 2,048 covers IOD_SCHED_NODES_MAX-scale clusters'
 * agents re-registering while old leases run out. */
#define IOD_STATE_LEASES_NODE_RESERVED 2048
/* Leases one client (one identity; one address without authentication)
 * may hold: a flood from one client leaves the rest of the pool to others. */
#define IOD_STATE_LEASES_PER_CLIENT_MAX 1024
/* Operations in one transaction: a deploy of IOD_SPEC_REPLICAS_MAX replicas
 * for a few services plus the deletions it implies. */
#define IOD_STATE_TXN_OPS_MAX 40000
/* Operations in one POST /v1/txn (more: 413 naming it, before anything is
 * proposed). The body is parsed and re-encoded on a worker thread, but the
 * apply still puts every object on each server's loop (~2.5 ms per 1,000
 * puts here, 3 servers on a 2-core machine, against a 30 ms election
 * timeout); a 4,000-put transaction used to cost an election. */
#define IOD_API_TXN_OPS_MAX 5000
/* Replicas one deploy places, all its services together (more: 413 naming
 * it, before anything is planned or proposed). The plan runs on a worker
 * thread, the command is parsed on the Raft log's worker, but applying it
 * (its objects put, sized and freed) and carrying it (~850 bytes a replica
 * with its placement explanation) still cost every server's loop about
 * 5 ms per 1,000 replicas (measured: 2,000 -> 7.5 ms, 5,000 -> 25 ms of
 * loop lag, 3 servers on a 2-core machine), against a 30 ms election
 * timeout. It was documented as 20,000 (IOD_STATE_TXN_OPS_MAX / 2) while
 * 10,000 did not fit one Raft entry and 1,500 cost an election. */
#define IOD_DEPLOY_REPLICAS_MAX 3000
/* Commands at least this long are parsed on the Raft log's worker thread
 * ahead of their apply (jansson parses ~35 MB/s here: 64 KiB is ~2 ms on
 * the loop); at most IOD_STATE_PREPARSED_MAX wait for their apply (a few
 * large entries in flight; more are parsed at apply, on the loop). */
#define IOD_STATE_PREPARSE_MIN (64u << 10)
#define IOD_STATE_PREPARSED_MAX 16
/* PUT and txn bodies at least this long are parsed (a txn's also checked
 * and encoded) on a worker thread before the loop proposes them: a 512 KiB
 * PUT held the loop ~15 ms, a 4,000-put txn (380 KB) 30-50 ms. */
#define IOD_API_PARSE_OFFLOOP_MIN IOD_STATE_PREPARSE_MIN
/* PUT and txn bodies at least this long are parsed (a txn's also checked
 * and encoded) on a worker thread before the loop proposes them: a 512 KiB
 * PUT held the loop ~15 ms, a 4,000-put txn (380 KB) 30-50 ms. */
#define IOD_API_PARSE_OFFLOOP_MIN IOD_STATE_PREPARSE_MIN
/* Commands the leader packs into one Raft entry (group commit): at 64
 * concurrent clients a loop iteration collects up to 64 writes; 256 bounds
 * the per-entry result array and one entry's apply time. The bytes are
 * bounded by IOD_STATE_CMD_MAX too. */
#define IOD_STATE_BATCH_MAX 256
/* A membership change that finds another in flight (raft takes one at a
 * time) is retried at every heartbeat for this long: a join's add+assign
 * commits in milliseconds, so a removal right after a join waits, not fails. */
#define IOD_STATE_CHANGE_WAIT_MS 2000
/* iod's Raft I/O (src/state/wal.c, rio.c). One log entry: a command is at
 * most IOD_STATE_CMD_MAX; a batch frame or configuration adds a little. */
#define IOD_RAFT_ENTRY_MAX (IOD_STATE_CMD_MAX + (1u << 16))
/* A segment is closed and a new one started past this size: small enough
 * that compaction frees space soon, large enough that rollover (two
 * fsyncs) is rare. */
#define IOD_RAFT_SEGMENT_BYTES (8u << 20)
/* A snapshot: IOD_STATE_OBJECTS_MAX objects at ~1 KiB of JSON each. */
#define IOD_RAFT_SNAPSHOT_MAX (256ull << 20)
/* One message on the Raft transport: a snapshot plus its header, or an
 * AppendEntries of up to a few maximal entries. Larger frames are refused
 * before anything is allocated. */
#define IOD_RAFT_MSG_MAX (IOD_RAFT_SNAPSHOT_MAX + (1u << 20))
/* Bytes queued to one peer (connecting or slow): beyond this, sends fail at
 * once and raft retries later, so a dead peer cannot grow the leader's RSS. */
#define IOD_RAFT_SEND_QUEUE_BYTES_MAX (64u << 20)
/* Incoming Raft connections: a few per peer (reconnects overlap). */
#define IOD_RAFT_CONNS_MAX 64
/* A Raft connection, either way, must finish its TLS handshake and iod's
 * hello within this (one or two round trips; seconds on a loaded LAN): a
 * peer that connected and sent nothing, or half a handshake, used to hold
 * its slot (of IOD_RAFT_CONNS_MAX) forever, and an outgoing one stuck
 * there held the peer's queue. Swept every IOD_RAFT_SWEEP_MS. */
#define IOD_RAFT_HANDSHAKE_TIMEOUT_MS 2000u
#define IOD_RAFT_SWEEP_MS 100u
/* With every incoming slot taken, a new connection closes the oldest one
 * still in its handshake after this long, so that silent connections
 * cannot keep a restarted peer out until they time out. */
#define IOD_RAFT_EVICT_HELLO_AGE_MS 200u
/* Raft appends in flight that a member times for its disk-latency metric
 * (src/state/member_io.c); more pass through untimed. */
#define IOD_RAFT_APPENDS_TIMED 256
/* Members in one process whose appends are timed: a server runs one, tests
 * a few (raft's append callback gets no io pointer, so each is searched). */
#define IOD_RAFT_MEMBERS_TIMED 8
/* The in-memory file system under the Raft log (src/state/walfs.c, tests
 * and the simulator): a log holds meta, a few live segments, a snapshot
 * and its .tmp; a simulated server's segments stay small. */
#define IOD_WALFS_MEM_FILES_MAX 256
#define IOD_WALFS_MEM_HANDLES_MAX 32
#define IOD_WALFS_MEM_FILE_BYTES_MAX (64u << 20)
/* Initial members named with --peers: Raft clusters are 3, 5 or 7. */
#define IOD_STATE_PEERS_MAX 9
/* host:port (or [v6]:port) of a server: 64 covers dotted IPv6 + port. */
#define IOD_ADDR_MAX 64
/* A data directory path. */
#define IOD_PATH_MAX 512
/* HTTP request body: a spec file is at most IOD_SPEC_FILE_MAX (4 MiB); one
 * object value far less. Larger bodies get 413 before they are buffered. */
#define IOD_API_BODY_MAX (4u << 20)
/* Request bodies one server holds while they arrive, all clients together,
 * and one client address (hashed into IOD_API_BODY_CLIENT_BUCKETS: clients
 * that share a bucket share its budget); the first IOD_API_BODY_ALWAYS bytes
 * of a body always fit (small writes are never refused). Over them a body is
 * dropped as it arrives and answered 503 "retry later": 200 half-sent 4 MiB
 * bodies took a follower from 30 to 830 MB (at most 24 MiB plus 1,024 x
 * 16 KiB now). 6 max-size specs fit at once. */
#define IOD_API_BODIES_HELD_MAX (24u << 20)
#define IOD_API_BODIES_HELD_PER_CLIENT_MAX (12u << 20)
#define IOD_API_BODY_ALWAYS (16u << 10)
#define IOD_API_BODY_CLIENT_BUCKETS 64
/* Request bodies one server holds while they arrive, all clients together,
 * and one client address (hashed into IOD_API_BODY_CLIENT_BUCKETS: clients
 * that share a bucket share its budget); the first IOD_API_BODY_ALWAYS bytes
 * of a body always fit (small writes are never refused). Over them a body is
 * dropped as it arrives and answered 503 "retry later": 200 half-sent 4 MiB
 * bodies took a follower from 30 to 830 MB (at most 24 MiB plus 1,024 x
 * 16 KiB now). 6 max-size specs fit at once. */
#define IOD_API_BODIES_HELD_MAX (24u << 20)
#define IOD_API_BODIES_HELD_PER_CLIENT_MAX (12u << 20)
#define IOD_API_BODY_ALWAYS (16u << 10)
#define IOD_API_BODY_CLIENT_BUCKETS 64
/* One object's value in a PUT (etcd allows 1.5 MiB per request). Measured
 * on a loaded 2-core machine with the 30 ms election timeout: three 1 MB
 * PUTs kept the term; a 3.9 MB PUT (under IOD_API_BODY_MAX) got 503 and an
 * election, the entry's parse, apply and replication holding the loops
 * past a heartbeat. Larger values get 413 naming this limit, before
 * anything is proposed. */
#define IOD_API_VALUE_MAX (1u << 20)
/* Concurrent HTTP connections per server; beyond this MHD refuses new ones
 * (clients retry another server). */
#define IOD_API_CONNECTIONS_MAX 1024
/* Of those, one client address may hold: 1,100 slow half-sent requests from
 * one address once left no new client able to connect for 40 s. A local
 * cluster (`iod up`: every agent, proxy and CLI on 127.0.0.1) uses a few
 * dozen; a quarter of the total leaves the rest to other addresses. */
#define IOD_API_CONNECTIONS_PER_IP_MAX 256
/* A connection idle this long (a slow or stuck client) is closed, so slow
 * clients cannot hold connections forever. Long-poll watches are suspended,
 * not idle, and have their own timeout. */
#define IOD_API_CONN_TIMEOUT_S 30
/* Slowloris (issue 15): the idle timeout above is reset by every byte, so a
 * client sending one byte a second held a slot forever, and 1,100 of them
 * from five addresses held every slot. A connection has this long from
 * accept (TLS handshake included), or from the end of its previous request
 * on a kept-alive connection, to deliver a whole request head, however the
 * bytes trickle. A head is a few hundred bytes (at most a few KiB): nginx's
 * client_header_timeout is 60 s for the open Internet; a control plane's
 * clients are agents, proxies and the CLI on the cluster's network. An idle
 * kept-alive connection is closed after it too (the client reconnects). */
#define IOD_API_HEADER_TIMEOUT_S 10
/* Then the body must arrive within IOD_API_BODY_TIMEOUT_S plus one second
 * per IOD_API_BODY_RATE_MIN_BPS bytes it declares (Apache mod_reqtimeout's
 * "body=N,MinRate=R"): a 4 MiB spec (IOD_API_BODY_MAX) may take 74 s, a
 * 1 KiB PUT 10 s; a chunked body is given the time of IOD_API_BODY_MAX. */
#define IOD_API_BODY_TIMEOUT_S 10
#define IOD_API_BODY_RATE_MIN_BPS (64u << 10)
/* When this few connection slots are left, a new connection closes the
 * oldest one still sending its request head, so that attackers who keep
 * re-opening slow connections from many addresses cannot keep a new client
 * out until the header deadline: a client whose head arrives at once is
 * never the oldest. A kept-alive connection between requests (answered
 * once) is closed for room only to keep the last slot free (server.c
 * conns_keep_room): 1,000 watchers must not lose 40 of them to this mark. */
#define IOD_API_CONNECTIONS_SPARE 64
/* ... but only one that has been sending its head this long: a burst of new
 * connections is accepted before their heads are read, and must not close
 * each other (1,000 watchers connecting at once). A real client's head
 * arrives within a round trip. */
#define IOD_API_EVICT_HEAD_AGE_MS 1000
/* How often the deadlines above are checked: closing is late by at most this. */
#define IOD_API_DEADLINE_SWEEP_MS 250
/* Longest and default long-poll of a watch before it answers "no change". */
#define IOD_API_WATCH_TIMEOUT_MS_MAX 60000
#define IOD_API_WATCH_TIMEOUT_MS_DEFAULT 30000
/* Large watch answers being sent at once: 1,000 watchers woken by one
 * 512 KiB write made MHD write 512 MB in one turn of the loop (215-644 ms
 * with no other request served). An answer of IOD_API_WATCH_LARGE_BYTES or
 * more waits (still watching, its text shared and kept) until fewer than
 * IOD_API_WATCH_LARGE_MAX such answers are in flight: one turn then writes
 * at most 2 x 1 MiB (IOD_API_VALUE_MAX). Measured with bench_control's
 * loop_lag: 8 at once gave a 10-16 ms p99, 2 gave 0.9-5 ms. */
#define IOD_API_WATCH_LARGE_BYTES (64u << 10)
#define IOD_API_WATCH_LARGE_MAX 2
/* An answer holds its place among those for at most this long: a watcher
 * that does not read (its socket full) must not stop every other large
 * answer until the idle timeout; it then goes on sending outside the cap. */
#define IOD_API_WATCH_LARGE_SLOT_MS 200
/* Events one watch answer carries; the client asks again from the last. */
#define IOD_API_WATCH_EVENTS_MAX 1024
/* Writes in flight (proposed to Raft, not yet committed): back-pressure,
 * answered 503 "overloaded" beyond it. */
#define IOD_API_PENDING_MAX 4096
/* A request that needs the leader, sent to a server that knows none (an
 * election is running), waits this long for one before answering 503: an
 * election takes 30-100 ms with the default timeouts and several hundred on
 * a loaded machine; a client of a partitioned minority server moves on after
 * it. */
#define IOD_API_LEADER_WAIT_MS 500

/* Lists are sorted and serialised on a worker thread (a 32k-object list
 * held the Raft/API loop 170-345 ms); at most this many such jobs run at
 * once: libuv's pool has 4 threads and the Raft log's disk writes (rio.c)
 * run there too, so they always find a free one. The rest wait their turn
 * (bounded by the connections). */
#define IOD_API_JOBS_MAX 2
/* Watch answers serialised on a worker thread at once (server_watch.c): the
 * 1,000-watcher broadcast of a 512 KiB value spent 4-6 ms of one loop turn
 * in json_dumps. A wake-up needs one encoding per distinct answer (the
 * watchers of one revision share it); others wait for the slot (still
 * watching, retried like a deferred large answer). Counted with
 * IOD_API_JOBS_MAX against libuv's 4 pool threads. */
#define IOD_API_WATCH_ENCODES_MAX 1
/* A page of a list: GET /v1/<kind>?limit=N&continue=NAME. Without limit a
 * list is whole (served off the loop all the same); with it at most this
 * many: 10,000 objects of ~200 B are ~2 MB of JSON. `iod get` pages with
 * IOD_API_LIST_PAGE_DEFAULT. */
#define IOD_API_LIST_PAGE_MAX 10000
#define IOD_API_LIST_PAGE_DEFAULT 1000

/* Local agents `iod up` starts: each is a process with its replicas. */
#define IOD_UP_NODES_MAX 64
/* `iod up --servers N`: control-plane servers, odd, at most this (their API
 * and Raft ports are P..P+N-1). */
#define IOD_UP_SERVERS_MAX 7
_Static_assert(IOD_UP_SERVERS_MAX <= IOD_STATE_PEERS_MAX, "every server is a peer");
/* `iod up --netns` underlay (docs/network.md): leaves and spines of the
 * leaf-spine of network namespaces. Each leaf/spine link is a /30 in
 * 10.253.<leaf>.0/24 (64 spines fit), each leaf's hosts a /24. */
#define IOD_UNDERLAY_LEAVES_MAX 16
#define IOD_UNDERLAY_SPINES_MAX 16
/* One step of the underlay plan: an `ip -batch` text. Sized for the
 * largest (a leaf's routes with every spine as a next hop). */
#define IOD_UNDERLAY_STEP_BYTES 8192
/* Steps of a plan: namespaces, links, per-namespace setup, tc. */
#define IOD_UNDERLAY_STEPS_MAX \
	(8 + 3 * (IOD_UNDERLAY_LEAVES_MAX + IOD_UNDERLAY_SPINES_MAX + IOD_UP_NODES_MAX))
_Static_assert(IOD_UP_NODES_MAX <= 250, "a node's underlay address is 10.254.<leaf>.<1..250>");
/* Service VIPs on the overlay (docs/network.md, "Service VIPs"): the deploy
 * gives each Service one address of 10.200.240.0/20, inside the overlay
 * 10.200.0.0/16 whose 10.200.N.0/24 are node N's replicas (`iod up
 * --netns`), above every node's subnet: 4,094 VIPs (the /20 minus its first
 * and last address), one per service of the cluster. */
#define IOD_SVC_VIP_NET 0x0ac8f000u /* 10.200.240.0 */
#define IOD_SVC_VIP_PREFIX 20
#define IOD_SVC_VIPS_MAX ((1u << (32 - IOD_SVC_VIP_PREFIX)) - 2)
_Static_assert(IOD_UP_NODES_MAX < 240, "node subnets 10.200.N.0/24 stay below the service VIPs");
/* Services with an overlay VIP one virtual switch's table holds (the
 * cluster's; only those of the node's tenants are balanced there, at most
 * IOD_DP_SERVICES_MAX). */
#define IOD_AGENT_VIPS_MAX 256
/* Dropped new flows one virtual switch remembers (the newest; `iod trace
 * --drops`), and the rules it counts verdicts for (per tenant: two). */
#define IOD_AGENT_DROPS_MAX 256
#define IOD_AGENT_DROP_RULES_MAX 64
/* How often the switch writes its drops and verdict counters for readers
 * (<data_dir>/drops.json, dp_sg_verdicts.prom) when they changed. */
#define IOD_AGENT_DROPS_PUBLISH_MS 200
/* Replicas the overlay table of one agent's virtual switch holds (the
 * whole cluster's: it is the VTEP table); beyond it the rest are not
 * reachable over the overlay and the agent says so. */
#define IOD_AGENT_OVERLAY_EPS_MAX 1024
/* NetPolicy objects (security groups) one agent compiles, and their rules
 * in all (each named "<policy>/<rule>", plus a default deny per policy);
 * beyond them the rest are not enforced and the agent says so. */
#define IOD_AGENT_SGS_MAX 64
#define IOD_AGENT_SG_RULES_MAX 512
/* Conntrack sessions of one node's virtual switch (about 100 bytes each). */
#define IOD_AGENT_OVERLAY_CT_SESSIONS (1u << 16)
/* The virtual switch's wait when no port had a frame: bounds the CPU an
 * idle switch takes; a frame wakes it at once (its block retires in 1 ms). */
#define IOD_AGENT_VSWITCH_IDLE_MS 5
/* How long `iod dp dump --node` waits for the switch's thread to write its
 * dump (it answers between bursts, within IOD_AGENT_VSWITCH_IDLE_MS when idle;
 * a switch stuck longer is reported, not waited on) */
#define IOD_AGENT_VSWITCH_DUMP_WAIT_S 2
/* How often the virtual switch's thread publishes its ports' counters for
 * telemetry (a copy under its lock; the packet path never takes it). */
#define IOD_AGENT_VSWITCH_STATS_MS 200

/* ---- state/objects (typed cluster objects) ---------------------------- */

/* A CPU or GPU set as text ("0-3,8"): IOD_BITMAP_BITS listed one by one
 * would not fit, but sets are ranges; 512 bytes is what deploy formatted. */
#define IOD_OBJ_SET_MAX 512
/* A phase or health word ("pending", "unhealthy"). */
#define IOD_OBJ_WORD_MAX 32
/* A replica's one-line reason: the agent's reason plus the scheduler's why. */
#define IOD_OBJ_REASON_MAX 2048
/* Fields of one object kind: each kind's presence bits are one uint64_t. */
#define IOD_OBJ_FIELDS_MAX 64

/* ---- http (the codec and the client, src/http/) ------------------------ */

/* Header lines per HTTP message: nginx's default large_client_header is
 * 4 x 8k; 100 headers is what Go and Node.js accept. */
#define IOD_HTTP_HEADERS_MAX 100
/* An answer the client takes by default: a full state list of
 * IOD_STATE_OBJECTS_MAX small objects is a few MiB; four times the largest
 * request body leaves room. */
#define IOD_HTTP_BODY_MAX (4ull * IOD_API_BODY_MAX)
/* A stoppable request looks at its stop flag this often (the mesh's
 * control-plane watch is a long poll; a proxy asked to stop must not wait it out). */
#define IOD_HTTP_STOP_SLICE_MS 50
/* Longest chunk-size line or trailer line the codec accepts (RFC 9112
 * sets none; nginx and Node.js refuse beyond a few KiB). */
#define IOD_HTTP_CHUNK_LINE_MAX 4096
/* Extra request headers one client call sends. */
#define IOD_HTTP_REQ_HEADERS_MAX 8
/* A request body up to this size is sent in one write with its head (one
 * segment, one syscall); a larger one is written from the caller's buffer. */
#define IOD_HTTP_BODY_INLINE_MAX (16u << 10)

/* ---- agent ------------------------------------------------------------- */

/* Replicas one agent tracks at once (running + stopping): a node with 8
 * GPUs and a few hundred CPU-only sidecars fits with room. The scheduler
 * places at most this many on one node (IOD_SCHED_NODE_REPLICAS_MAX). */
#define IOD_AGENT_REPLICAS_MAX 512
/* One health-check command line or program path; the spec refuses a longer
 * health.exec (the agent never truncates one). */
#define IOD_AGENT_CMD_MAX 512
/* A path (run dir, cgroup dir, HTTP check path): below PATH_MAX (4096)
 * on purpose, replica paths are short. */
#define IOD_AGENT_PATH_MAX 512
/* Program and arguments of one replica, NUL-separated: a Java command line
 * with a long classpath is a few KiB; 16 KiB leaves room. Checked when a
 * spec is validated, so a deploy never places what an agent cannot run. */
#define IOD_AGENT_ARGV_BYTES_MAX 16384
/* Environment of one replica as the agent builds it (the spec's env, its
 * address, IOD_PEERS and IOD_DEP_<SERVICE> lists, mesh addresses): 32 KiB
 * holds the peer list of a ~1,400-replica service. Identity variables
 * (IOD_SERVICE, IOD_NODE, ...) are added outside it. The spec loader checks
 * each service's worst case against it (iod_spec_service_env_check). */
#define IOD_AGENT_ENV_BYTES_MAX 32768
/* What one "host:port," entry of IOD_PEERS / IOD_DEP_* takes at most for an
 * IPv4 node address ("255.255.255.255:65535,"); longer node addresses are
 * counted at their length when a deploy checks the environment. */
#define IOD_AGENT_PEER_ENTRY_BYTES 22
/* Room the environment check keeps for the agent's own variables besides
 * the peer lists: IOD_ADDR, IOD_PEERS=, the IOD_SVC_* and IOD_DEP_* names,
 * and the accelerator lists (IOD_ACCELERATORS, IOD_DPUS, IOD_FPGAS, at most
 * 256 bytes each). */
#define IOD_AGENT_ENV_RESERVED_BYTES 1024
/* Arguments / variables counted out of those buffers: the spec allows
 * IOD_SPEC_LIST_MAX arguments after the program, IOD_SPEC_LIST_MAX env
 * variables and IOD_SPEC_LIST_MAX dependencies (two variables each). */
#define IOD_AGENT_ARGS_MAX 65
#define IOD_AGENT_ENVS_MAX 256
/* A phase reason ("exit status 1; restarting in 400 ms", or why a replica
 * cannot be built, which quotes a limit or a spec error). */
#define IOD_AGENT_REASON_MAX 320
/* Actions the agent takes per reconciler step before looping again. */
#define IOD_AGENT_ACTIONS_MAX 64
/* A manifest of desired replicas (JSON). */
#define IOD_AGENT_MANIFEST_MAX (4u << 20)
/* The demo parameter server's vector: 1 Mi floats = 4 MiB per shard max. */
#define IOD_DEMO_PARAMS_MAX (1u << 20)
/* The demo parameter server's --state-bytes at most (16 GiB). */
#define IOD_DEMO_STATE_BYTES_MAX (16ull << 30)
/* Replica ports are derived from replica names in [BASE, BASE + RANGE):
 * above the ports common services use, below the Linux ephemeral range
 * (32768+) that outgoing connections draw from. */
#define IOD_AGENT_PORT_BASE 20000u
#define IOD_AGENT_PORT_RANGE 12000u
/* Parameter servers one demo worker talks to. */
#define IOD_DEMO_SERVERS_MAX 16
/* Connections one demo parameter server serves at once. */
#define IOD_DEMO_CLIENTS_MAX 64
/* Replica addresses one node's subnet hands out (per-replica network
 * namespaces): one per replica the agent can track. A /23 or larger is
 * used only up to this many hosts. */
#define IOD_AGENT_IPAM_MAX IOD_AGENT_REPLICAS_MAX
/* Distinct seccomp filters one agent compiles and keeps (the default one
 * per set of granted capabilities, each service profile): a node runs a
 * few kinds of services; a new kind beyond this fails alone until the agent
 * restarts. */
#define IOD_AGENT_SECCOMP_PROFILES_MAX 64
/* Dynamic replica uids: each agent takes a block of IOD_AGENT_UID_BLOCK
 * uids from IOD_AGENT_UID_BASE on (0x70000000: above systemd's container
 * ranges, below 2^31, where 16-bit and signed-uid bugs live), chosen by a
 * hash of its node name and held with a lock file so that agents sharing a
 * host (`iod up`) never share a uid. 256 blocks of 65536. */
#define IOD_AGENT_UID_BASE 0x70000000u
#define IOD_AGENT_UID_BLOCK 65536u
#define IOD_AGENT_UID_BLOCKS 256u
/* The private /tmp of a replica (a tmpfs, charged to its memory cgroup). */
#define IOD_AGENT_TMP_BYTES (256u << 20)
/* Health checks in flight at once (one thread each): a hung check holds
 * one for at most its timeout; the others keep giving verdicts. */
#define IOD_AGENT_PROBE_WORKERS 8

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
/* Lingering close (Apache's and nginx's lingering_close; RFC 9112 9.6): a
 * client connection closed after an answer while the client may still be
 * sending (a 413 before the body was read) is shut down for writing, then
 * its input is read and discarded until EOF, for at most this long and this
 * many bytes, then closed. Closing with unread input makes the kernel send
 * RST, which can destroy the answer before the client has read it. 2 s is
 * Apache's MAX_SECS_TO_LINGER; a client that got the answer stops within a
 * round trip, so the byte cap only ends clients that ignore it. */
#define IOD_MESH_LINGER_MS 2000
#define IOD_MESH_LINGER_BYTES_MAX (16u << 20)
/* Lingering connections per worker: each keeps its slot of the connection
 * pool (and counts as an open downstream connection) until it ends. Past
 * this a connection is closed at once, so lingering clients can hold at
 * most a quarter of the pool and never starve new ones. */
#define IOD_MESH_LINGER_MAX (IOD_MESH_CONNS_MAX / 4)
/* Time a client has to send a whole request head (slowloris): from accept
 * for the first request, from its first byte for later ones on a keep-alive
 * connection (between requests the idle timeout applies). nginx's
 * client_header_timeout is 60 s, Apache's mod_reqtimeout 20-40 s; a mesh
 * client is a replica one local hop away whose head takes microseconds, so
 * 10 s only ends heads that trickle. Past it: 408 and close. Per service:
 * "timeouts": {"head": "10s"} (docs/mesh.md). */
#define IOD_MESH_HEAD_TIMEOUT_MS 10000
/* Client connections one client may hold open on one proxy (all workers
 * together; each worker takes its share, as breakers do). A client is its
 * IPv4 address and, when the proxy knows it (policies on), the uid that owns
 * its socket, so replicas sharing 127.0.0.1 are told apart. A quarter of one
 * worker's pool: a flood from one client (9,000 slow heads made the proxy
 * reset every new client, issue 15) leaves three quarters to everyone
 * else; past the limit a new connection is closed at accept and counted
 * (iod_mesh_client_limited_total). `iod proxy run --client-conns N`. */
#define IOD_MESH_CLIENT_CONNS_MAX (IOD_MESH_CONNS_MAX / 4)
/* Slots of a worker's per-client table: open addressing at most half full
 * (every client holds at least one of the worker's connections). */
#define IOD_MESH_CLIENT_SLOTS (2 * IOD_MESH_CONNS_MAX)
/* Callers a standalone proxy config names (uid -> service): one per
 * replica a node runs, at most IOD_SCHED_NODE_REPLICAS_MAX, with room. */
#define IOD_MESH_CALLERS_MAX 4096
/* Revocation objects a proxy's view holds (revoked nodes and services). */
#define IOD_MESH_REVOKED_MAX 4096
/* SVIDs one proxy presents when it dials other proxies: one per service
 * with replicas on its node (IOD_MESH_SERVICES_MAX services at most). */
#define IOD_MESH_MTLS_IDS_MAX IOD_MESH_SERVICES_MAX
/* Idle keep-alive connections kept per endpoint per worker. */
#define IOD_MESH_POOL_IDLE_MAX 64
/* Spans and flow records kept per worker ring (a power of two). */
#define IOD_MESH_SPANS_MAX 4096
/* Largest control-plane answer the mesh's API source reads (10,000
 * endpoints of ~300 bytes). */
#define IOD_MESH_API_REPLY_MAX (8u << 20)
/* Retries one request may make (Envoy's circuit breaker default is 3). */
#define IOD_MESH_RETRIES_MAX 8
/* Latency histogram buckets (Prometheus `le` bounds). */
#define IOD_MESH_LATENCY_BUCKETS 14
/* A DNS query is one UDP datagram; 512 bytes is RFC 1035's classic limit. */
#define IOD_MESH_DNS_MSG_MAX 512
/* The proxy config file is read whole. */
#define IOD_MESH_CONFIG_MAX (1u << 20)

/* ---- flow / net / io --------------------------------------------------- */

/* Rules per security group: AWS allows 60 inbound + 60 outbound by default;
 * 128 keeps the compiled ACL small enough for a linear, cache-resident scan. */
#define IOD_NET_SG_RULES_MAX 128
/* Backends per service: Maglev needs table size >> backends (65537 / 256 gives
 * each backend ~256 slots, under 1% imbalance). */
#define IOD_NET_LB_BACKENDS_MAX 256
/* Packets per burst: DPDK's and OVS's customary 32 amortises per-call costs
 * while a burst's metadata stays in L1. */
#define IOD_FLOW_BURST_MAX 32
/* Pipes per pipeline: DOCA-AR uses 4; the overlay pipeline ~8; room for tenants. */
#define IOD_FLOW_PIPES_MAX 64
/* Pipes one packet may traverse: bounds the walk (and catches fwd loops). */
#define IOD_FLOW_HOPS_MAX 16
/* Entries per pipe are set at pipe creation, up to this (16 M). */
#define IOD_FLOW_PIPE_ENTRIES_MAX (16u << 20)
/* Queued entry operations before entries_process must run. */
#define IOD_FLOW_QUEUE_MAX 65536
/* Worker cores one pipeline serves (per-core caches and counters). */
#define IOD_FLOW_CORES_MAX 64
/* Exact-match cache slots per core: 8192 x 128 B = 1 MiB, L2-resident, as OVS's EMC. */
#define IOD_FLOW_EMC_SLOTS 8192
/* ... and at most 1 M slots (128 MiB per core) when a deployment asks for more. */
#define IOD_FLOW_EMC_SLOTS_MAX (1u << 20)
/* Compiled fast path: flow slots per EMC slot (2-way sets at a load of 1/8
 * keep set overflows, flows thrashing back to the slow path, near 0.1 %);
 * 64 B each, so 2 MiB per core at the default EMC size. */
#define IOD_FLOW_FP_SLOTS_PER_EMC 4
/* Distinct compiled programs per core and pipeline generation: flows share
 * them (the overlay compiles one per backend and route); when full, new
 * flows take the slow path until the next generation. 1024 x ~600 B. */
#define IOD_FLOW_FP_PROGS 1024
/* Ops per program: the overlay needs ~9; a trace that would need more is
 * not compiled. */
#define IOD_FLOW_FP_OPS_MAX 24
/* Conntrack sessions per table: 32 M keeps indexes in 32 bits with 2 slots each. */
#define IOD_NET_CT_SESSIONS_MAX (32u << 20)
/* Ports of one data plane (dp run): physical + virtual. */
#define IOD_IO_PORTS_MAX 16
/* Cores of a sharded benchmark run (iod_io_bench_run_rss): one thread and
 * one engine core each; more than the machines we measure on have. */
#define IOD_IO_BENCH_CORES_MAX 8
/* dp config: tenant networks, security groups, services, endpoints per
 * network: a node's share of an overlay, not a whole cloud's. */
#define IOD_DP_NETWORKS_MAX 16
#define IOD_DP_SGS_MAX 16
/* services: as many as the agent's table of the cluster's VIPs holds
 * (IOD_AGENT_VIPS_MAX), so a node's tenants never have more VIPs than its
 * switch balances; each costs its Maglev table (IOD_MAGLEV_DEFAULT_SIZE
 * slots of 4 B, 256 KiB) once it has a backend, and ~5 KiB of config. */
#define IOD_DP_SERVICES_MAX 256
#define IOD_DP_ENDPOINTS_MAX 256
/* Security-group entries bound to local endpoints (the agent's NetPolicy
 * objects compiled: a rule x its local members x its peer's replicas, plus
 * a default deny and a host exemption per member and direction); 16 B each.
 * Beyond it the agent keeps the tenant default and says so. */
#define IOD_DP_ACLS_MAX 4096
/* The first priority of the endpoint-bound entries in the "sg" and "sgin"
 * pipes (0 and 1 are established and related): entry i has
 * IOD_DP_ACL_PRIO + i, which is how counters find their rule. */
#define IOD_DP_ACL_PRIO 16u
/* A replica's egress meter (a policer: red is dropped) holds 300 ms of its
 * rate, at least 64 KiB. TCP through a policer loses bursts of segments when
 * the bucket runs dry; measured at 100 Mbit/s (qos_netns.sh, docs/network.md)
 * buckets of 5, 20 and 100 ms gave TCP 49, 24 and 68 Mbit/s, 300 ms 99. */
#define IOD_DP_EGRESS_BURST_MS 300u
#define IOD_DP_EGRESS_BURST_MIN (64u << 10)
/* Conntrack memory per data-plane core (iod_net_ct_bytes): the data plane
 * shares the node with its replicas; 512 MiB holds about 6 M sessions (the
 * default 1 M takes 76 MiB). A larger ct_sessions is a config error. */
#define IOD_DP_CT_BYTES_MAX (512ull << 20)
/* A dp config file is read whole; 1 MiB is far beyond hand-written YAML. */
#define IOD_DP_CONFIG_FILE_MAX (1u << 20)

/* The data-plane loop's maintenance per turn (src/io/dploop.c): queued
 * entry changes applied, aged entries looked at, conntrack sessions
 * expired. Bounded so that one turn never stalls the packet path; the
 * budgets drain a full table within a few thousand turns (milliseconds). */
#define IOD_DP_LOOP_ENTRIES_BUDGET 64
#define IOD_DP_LOOP_AGING_BUDGET 256
#define IOD_DP_LOOP_CT_BUDGET 1024

/* The engine's caches (src/flow/engine.c), as in OVS's dpif-netdev: entries
 * one exact-match slot remembers hitting (a walk of the overlay pipeline hits
 * at most 6); megaflow masks per start pipe (OVS's dpcls subtables: a handful
 * per pipeline); megaflow slots per core (16 K x ~150 B = 2.4 MiB, in L2/L3). */
#define IOD_FLOW_EMC_HITS_MAX 8
#define IOD_FLOW_MF_MASKS_MAX 8
#define IOD_FLOW_MF_SLOTS 16384
/* The AF_PACKET ring (TPACKET_V3, src/io/afpacket.c): 64 blocks of 256 KiB =
 * 16 MiB, frames up to 2 KiB, a block retired after 10 ms of quiet. */
#define IOD_IO_AFP_BLOCK_BYTES (256u << 10)
#define IOD_IO_AFP_BLOCKS 64u
#define IOD_IO_AFP_FRAME_BYTES 2048u
#define IOD_IO_AFP_RETIRE_MS 10u
/* afpacket without a ring (cfg.rx_recv): frames per recvmmsg, socket buffer */
#define IOD_IO_AFP_RECV_BURST 64u
#define IOD_IO_AFP_RECV_RCVBUF (4 << 20)
/* afpacket with vnet_hdr: super-frames per recvmmsg, the bytes of each
 * (a veth's GSO frames are at most 64 KiB of IP and the Ethernet header),
 * and the messages per sendmmsg */
#define IOD_IO_AFP_GSO_SLOTS 8u
#define IOD_IO_AFP_GSO_SLOT_BYTES (65536u + 256u)
#define IOD_IO_AFP_TX_BURST 64u
/* datagrams in one UDP_SEGMENT super-frame at most (the kernel's
 * UDP_MAX_SEGMENTS is 128) */
#define IOD_IO_AFP_UDP_GSO_SEGS 64u

/* ---- net/ar (adaptive routing) ---------------------------------------- */

/* Paths kept per destination: Clove uses k = 4; 16 leaves room for wide
 * fabrics without making per-packet path scans long. */
#define IOD_AR_PATHS_MAX 16
/* Candidate ports probed while discovering paths (4 x k at k = 16). */
#define IOD_AR_DISCOVERY_MAX 64
/* Recently failed ports remembered per destination so their flows move. */
#define IOD_AR_DEAD_PORTS_MAX 8
/* Consecutive liveness probes unanswered (one per probe interval) before a
 * path is dropped: the issue's "within 3 probe intervals"; one or two lost
 * probes on a lossy path do not move its flows. */
#define IOD_AR_MISSES_MAX 3
/* Upper bound of probes_inflight_max per destination (256 by default):
 * 64K probes of 82 bytes in flight is ~5 MB on the wire, far beyond need. */
#define IOD_AR_INFLIGHT_MAX 65536
/* Recent minrtt pins remembered per destination to break ties (the tie
 * window): enough for 64 flows starting together; older pins age out. */
#define IOD_AR_RECENT_PINS 64
/* Flow slots examined for aging per tick: bounds the work of one call. */
#define IOD_AR_AGE_SCAN 1024
/* Ports remembered per sending edge for ECN relay (Clove's receiver). */
#define IOD_AR_RX_PORTS_MAX 16
/* Simulator edge: probes waiting for the next tick, and probes in flight
 * per host (replies are matched by destination, port and send time). A
 * tick drains 64; 1024 covers 250 new minrtt flows starting at once. */
#define IOD_AR_SIM_PENDING_MAX 1024
#define IOD_AR_SIM_INFLIGHT_MAX 1024

/* ---- sim / chaos ------------------------------------------------------- */

/* Processes one chaos fault touches: `iod up` runs 3 servers and up to
 * IOD_UP_NODES_MAX agents; a partition names at most all of them. */
#define IOD_CHAOS_MEMBERS_MAX 16
/* TCP sockets of one process cut by port pair (those opened before the
 * fault): a server has one per peer each way plus API clients. */
#define IOD_CHAOS_SOCKS_MAX 64
/* A process's command line kept to restart it (`iod server ...` is ~400 B). */
#define IOD_CHAOS_CMDLINE_MAX 2048
/* A fault id: "c" and 16 hex digits. */
#define IOD_CHAOS_ID_MAX 24
/* One line describing a fault. */
#define IOD_CHAOS_DESC_MAX 512
/* Fault durations: at least 10 ms (a fault shorter than a Raft heartbeat
 * shows nothing), at most a day (a forgotten fault must still end). */
#define IOD_CHAOS_DURATION_MIN_MS 10u
#define IOD_CHAOS_DURATION_MAX_MS (24u * 3600u * 1000u)
/* Faults active at once in one state dir (the keeper's table). */
#define IOD_CHAOS_FAULTS_MAX 64
/* Workload clients of `iod chaos run`: each is a thread with a connection. */
#define IOD_CHAOS_CLIENTS_MAX 64
/* Faults listed in one chaos plan (a plan repeats them; 64 is pages of YAML). */
#define IOD_CHAOS_PLAN_STEPS_MAX 64
/* Faults one `iod chaos run` injects (recovery times kept per fault). */
#define IOD_CHAOS_RUN_FAULTS_MAX 1024
/* bytes of a cluster's API address list in a chaos record ("H:P,H:P,...") */
#define IOD_CHAOS_APIS_MAX 256
/* the longest latency `iod chaos delay` holds bytes for (1 minute) */
#define IOD_CHAOS_LATENCY_MAX_MS 60000
/* an underlay link's name ("leaf16-spine16") and its leaf's namespace */
#define IOD_CHAOS_LINK_MAX 32
_Static_assert(IOD_CHAOS_DURATION_MAX_MS < 0xffffffffu, "fault durations fit 32 bits of ms");

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

/* ---- sec --------------------------------------------------------------- */

/* A cluster name is the SPIFFE trust domain, a DNS name: 63 is a label's
 * limit and plenty for "prod-eu1.example". */
#define IOD_SEC_CLUSTER_MAX 64
/* DNS names and IP addresses in one server certificate: a host's names
 * and addresses, a few load-balancer names. */
#define IOD_SEC_SANS_MAX 8
/* Ports one service policy names. */
#define IOD_SEC_POLICY_PORTS_MAX 8
/* Service policies one proxy enforces: hand-written rules between a few
 * hundred services; a bigger set wants identity groups, not more rules. */
#define IOD_SEC_POLICIES_MAX 512
/* A certificate, key or CSR in PEM: a P-256 leaf is ~800 bytes; 16 KiB
 * allows a few intermediates and long SAN lists. */
#define IOD_SEC_PEM_MAX (16u << 10)
/* Request path kept in an audit record (longer paths are cut). */
#define IOD_SEC_AUDIT_PATH_MAX 256
/* Audit records a server keeps in memory for GET /v1/audit; the file keeps
 * more (IOD_SEC_AUDIT_FILE_MAX before it rotates once). */
#define IOD_SEC_AUDIT_RING 4096
#define IOD_SEC_AUDIT_FILE_MAX (64u << 20)
/* One secret's value: config files and keys, not data sets. */
#define IOD_SEC_SECRET_MAX (64u << 10)
/* Secrets one service mounts. */
#define IOD_SEC_SECRETS_PER_SERVICE_MAX 32
/* The shortest certificate life a CSR may ask for (`iod agent --cert-ttl`):
 * rotation happens at two thirds of it, so below ~10 s a loaded machine
 * could not renew in time. */
#define IOD_SEC_CERT_TTL_MIN_S 10
/* Certificates are valid from this long before they are issued: a peer's
 * clock a little behind the CA's must not see them as not yet valid. */
#define IOD_SEC_CERT_BACKDATE_S 60
/* Longest token lifetime: a year (kubeadm's bootstrap tokens default to a
 * day; people's tokens live longer, never forever). */
#define IOD_SEC_TOKEN_TTL_MAX_S (366ull * 24 * 3600)

/* ---- obs (iod top, telemetry) ------------------------------------------- */

/* Columns of one `iod top` view: the widest (replicas) has 9. */
#define IOD_TOP_COLS_MAX 12
/* One cell's text: a replica name (IOD_NAME_MAX) is the longest. */
#define IOD_TOP_CELL_MAX IOD_NAME_MAX
/* Rows of one view: one per GPU of the largest simulated cluster (1,000
 * nodes x 8 GPUs) with room; more is cut off and said so in the note. */
#define IOD_TOP_ROWS_MAX 16384
/* Services whose mesh counters `iod top` keeps between refreshes. */
#define IOD_TOP_SERVICES_MAX 256
/* A filter typed after `/`: a line of the terminal. */
#define IOD_TOP_FILTER_MAX 128
/* Samples in a GPU's sparkline: the last minute at the default 2 s refresh. */
#define IOD_TOP_SPARK_MAX 30

/* Samples kept per GPU and per replica by an agent's telemetry: two minutes
 * at the default 1 s sampling; older ones are overwritten (a ring). */
#define IOD_TEL_RING 120
/* GPUs one agent samples: an 8-GPU board twice over. */
#define IOD_TEL_GPUS_MAX 16
/* Replicas one agent samples (as many as it runs). */
#define IOD_TEL_REPLICAS_MAX 256
/* Data-plane ports one agent reports: its virtual switch's fabric and host
 * ports and one per replica. */
#define IOD_TEL_PORTS_MAX (IOD_AGENT_REPLICAS_MAX + 2)
/* Connections an agent's telemetry listener holds at once: a few scrapers,
 * `iod top`, `iod dp dump --node` and the other nodes; more wait in the
 * backlog. */
#define IOD_TEL_CONNS_MAX 64
/* An idle (or handshaking) telemetry connection is closed after this: a
 * scraper reads once a second or so, and a silent client holds no slot. */
#define IOD_TEL_CONN_TIMEOUT_S 10
/* Node telemetry summaries a server keeps in memory (one per node; the
 * largest simulated cluster has 1,000 nodes). */
#define IOD_TEL_NODES_MAX 4096
/* Cluster nodes per rack when `iod viz` groups a large cluster: a 42U rack
 * of 1U servers, rounded to what a leaf switch serves. */
#define IOD_VIZ_RACK_NODES 32
/* Dropped flows a node's detail in the live view lists, newest first (the
 * node's count covers them all). */
#define IOD_VIZ_NODE_DROPS_SHOWN 20
/* The window per-edge service rates (caller -> callee, from the mesh's
 * spans) are averaged over in the live view. */
#define IOD_VIZ_RATE_WINDOW_MS 10000
/* Browsers following one live view's events at once (SSE streams). */
#define IOD_VIZ_SSE_CLIENTS_MAX 32
/* Connections the live view's web server takes at once. */
#define IOD_VIZ_CONNECTIONS_MAX 64
/* Samples of a GPU's utilisation in the summary sent to the control plane. */
#define IOD_TEL_SUMMARY_HIST 16
/* Fastest sampling: reading NVML and /proc more often than this costs more
 * than it shows (nvidia-smi dmon's floor is 1 s; 100 ms for tests). */
#define IOD_TEL_INTERVAL_MIN_MS 100
/* A counters file (the simulated-GPU protocol): a few lines. */
#define IOD_TEL_COUNTERS_FILE_MAX 4096
/* "Busy but stalled": this many samples in a row at >= IOD_TEL_STALL_UTIL_PCT
 * utilisation while NVLink + PCIe bytes grew by less than IOD_TEL_STALL_BYTES. */
#define IOD_TEL_STALL_SAMPLES 5
#define IOD_TEL_STALL_UTIL_PCT 90.0
#define IOD_TEL_STALL_BYTES (1u << 20)

/* ---- cluster configuration (iod config, src/config/) ---- */
/* Previous versions config/cluster keeps for `iod config history` and
 * rollback: enough for an afternoon of changes, small enough that the
 * object stays a few KiB. */
#define IOD_CONFIG_HISTORY_MAX 32
/* The largest config/cluster value read back: the history at its limit
 * with every key set is about 20 KiB. */
#define IOD_CONFIG_DOC_MAX (256 * 1024)
/* Values one node may fail to honour at once (each listed in its ack). */
#define IOD_CONFIG_FALLBACKS_MAX 8

/* ---- the relations between limits that the code relies on ------------- */

/* A replica name is "<service>-<ordinal>" with an ordinal < IOD_SPEC_REPLICAS_MAX
 * (at most 4 digits) and a NUL: it fits a name. */
_Static_assert(IOD_SPEC_NAME_LEN_MAX + 1 + 4 + 1 <= IOD_NAME_MAX,
               "a replica name <service>-<ordinal> must fit IOD_NAME_MAX");
_Static_assert(IOD_SPEC_REPLICAS_MAX <= 10000, "ordinals have at most 4 digits");
/* GPU and accelerator sets of one node are uint32_t masks in the scheduler. */
_Static_assert(IOD_TOPO_GPUS_MAX <= 32, "a node's GPU set is a uint32_t mask");
_Static_assert(IOD_SCHED_ACCS_MAX <= 32, "a node's accelerator set is a uint32_t mask");
/* CPU and GPU sets are bitmaps of whole 64-bit words. */
_Static_assert(IOD_BITMAP_BITS % 64 == 0, "a bitmap is whole 64-bit words");
_Static_assert(IOD_SPEC_UNITS_MAX <= IOD_BITMAP_BITS, "a replica's units fit one bitmap");
/* The span ring indexes slots with a mask. */
/* Checkpoint storage (src/storage/, docs/storage.md). Tiers: one per medium
 * of the spec. Checkpoints per service and node: retention is a handful of
 * steps; 64 bounds the pool's fixed table. Actions of one decision: each
 * checkpoint moves down at most every tier once and is evicted once. */
#define IOD_STOR_TIERS_MAX IOD_SPEC_TIERS_MAX
#define IOD_STOR_CKPTS_MAX 64
#define IOD_STOR_ACTS_MAX (IOD_STOR_CKPTS_MAX * IOD_STOR_TIERS_MAX + 1)
/* Copies of a checkpoint: Ceph's pools rarely go past 5; 7 bounds it. */
#define IOD_STOR_REPLICAS_MAX 7
/* Manifest bounds: regions a caller saves at once, chunks of one rank's
 * checkpoint (64 Ki chunks of 4 MiB = 256 GiB), region name length, and the
 * manifest's size on disk (a chunk line is < 100 bytes). */
#define IOD_CKPT_REGIONS_MAX 64
#define IOD_CKPT_CHUNKS_MAX 65536
#define IOD_CKPT_NAME_MAX 64
#define IOD_CKPT_MANIFEST_MAX (8u << 20)
/* Default chunk size: large enough for sequential NVMe writes, small enough
 * to repair one chunk from a peer. */
#define IOD_CKPT_CHUNK_BYTES_DEFAULT (4u << 20)
/* A stateful replica's checkpoint capacity when the agent is given none
 * (iod agent --ckpt-capacity). */
#define IOD_CKPT_CAPACITY_DEFAULT (1ull << 30)
/* The background scrub's rate bound when none is given: a 1 GiB store is
 * verified in about 16 s of reads. */
#define IOD_CKPT_SCRUB_RATE_DEFAULT (64ull << 20)
/* Checkpoint peers an agent lists for a replica ($IOD_CKPT_PEERS): the other
 * nodes' chunk servers, enough for every copy and a few to restore from. */
#define IOD_CKPT_PEERS_MAX 16
/* A peer's address: "host:port/namespace" (the namespace a replica name). */
#define IOD_CKPT_PEER_ADDR_MAX (IOD_ADDR_MAX + IOD_NAME_MAX)
/* A chunk's PUT or GET to a peer (the value the peer code always used): a
 * dead peer costs a save or a restore at most this long. */
#define IOD_CKPT_PEER_TIMEOUT_MS 30000
/* A peer's "newest step" answer (a directory listing, a few bytes): a peer
 * that does not answer this soon is skipped for the next. */
#define IOD_CKPT_PEER_LATEST_TIMEOUT_MS 5000

_Static_assert((IOD_MESH_CLIENT_SLOTS & (IOD_MESH_CLIENT_SLOTS - 1)) == 0 &&
                   IOD_MESH_CLIENT_SLOTS >= 2 * IOD_MESH_CONNS_MAX,
               "the per-client table is a power of two, at most half full");
_Static_assert(IOD_MESH_CLIENT_CONNS_MAX >= 1 && IOD_MESH_CLIENT_CONNS_MAX < IOD_MESH_CONNS_MAX,
               "one client never takes a whole worker");
_Static_assert((IOD_MESH_SPANS_MAX & (IOD_MESH_SPANS_MAX - 1)) == 0,
               "the span ring is a power of two");
/* The megaflow cache indexes slots with a mask; a slot's hit list is uint8_t-counted. */
_Static_assert((IOD_FLOW_MF_SLOTS & (IOD_FLOW_MF_SLOTS - 1)) == 0,
               "the megaflow cache is a power of two");
_Static_assert(IOD_FLOW_EMC_HITS_MAX <= 255 && IOD_FLOW_MF_MASKS_MAX <= 255,
               "hit and mask counts are held in uint8_t");
/* A Replica's reason holds the agent's reason and the scheduler's why. */
_Static_assert(IOD_OBJ_REASON_MAX >= IOD_AGENT_REASON_MAX + IOD_SCHED_WHY_MAX,
               "a rescheduling reason fits a Replica's reason field");
/* A whole deploy is one transaction, replicas plus their deletions. */
_Static_assert(IOD_STATE_TXN_OPS_MAX >= 2 * IOD_SPEC_REPLICAS_MAX,
               "one deploy of IOD_SPEC_REPLICAS_MAX replicas fits a transaction");
_Static_assert(IOD_DEPLOY_REPLICAS_MAX * 1200ull <= IOD_STATE_CMD_MAX,
               "a deploy of IOD_DEPLOY_REPLICAS_MAX replicas fits one Raft entry");
_Static_assert(IOD_API_CONNECTIONS_SPARE < IOD_API_CONNECTIONS_MAX / 4,
               "eviction starts only when the table is nearly full");
_Static_assert(IOD_API_HEADER_TIMEOUT_S < IOD_API_CONN_TIMEOUT_S,
               "the header deadline is the tighter bound");
_Static_assert(IOD_API_EVICT_HEAD_AGE_MS < IOD_API_HEADER_TIMEOUT_S * 1000,
               "eviction comes before the header deadline");
_Static_assert(IOD_API_LIST_PAGE_DEFAULT <= IOD_API_LIST_PAGE_MAX, "the CLI's page is allowed");
_Static_assert(IOD_API_JOBS_MAX + IOD_API_WATCH_ENCODES_MAX < 4,
               "libuv's 4 pool threads keep one for the Raft log's disk");
/* The client takes any answer the API server may send (a list of objects). */
_Static_assert(IOD_HTTP_BODY_MAX >= IOD_API_BODY_MAX, "the client reads what the API sends");
_Static_assert(IOD_CONFIG_DOC_MAX <= IOD_API_VALUE_MAX, "a whole config history fits one PUT");

/* The CNI plugin (docs/kubernetes.md): a container id as runtimes send it
 * (containerd: 64 hex), the network config on stdin, GC's keep-list. */
#define IOD_CNI_ID_MAX 256
#define IOD_CNI_CONF_MAX (1 << 20)
#define IOD_CNI_VALID_MAX 65536

/* libiod-xfer (docs/transfer.md). Regions per context: a NIXL agent holds
 * a handful (one per buffer pool); 64 keeps the metadata blob under a page
 * per region key. A region is at most 64 GiB (a GPU's memory); a context
 * registers at most 128 GiB by default: pinning more than the node can spare
 * is refused with -E2BIG, not discovered by the OOM killer. A batch holds
 * IOD_XFER_BATCH_MAX operations (nccl-style bursts); notifications are small
 * (they ride UCX's eager path) and queue IOD_XFER_NOTIFS_MAX deep. */
#define IOD_XFER_REGIONS_MAX 64
#define IOD_XFER_REGION_BYTES_MAX (64ull << 30)
#define IOD_XFER_REG_BYTES_MAX (128ull << 30)
#define IOD_XFER_BATCH_MAX 256
#define IOD_XFER_NOTIF_BYTES_MAX 256
#define IOD_XFER_NOTIFS_MAX 1024
#define IOD_XFER_PEERS_MAX 64
#define IOD_XFER_REQS_MAX 256
#define IOD_XFER_ADDR_BYTES_MAX 4096
#define IOD_XFER_RKEY_BYTES_MAX 1024
#define IOD_XFER_MD_BYTES_MAX (128 * 1024)
/* Defaults of xfer.deadline and xfer.chunk_size (src/config/schema.c). */
/* An XferPeer object's "md": the blob in hex (docs/transfer.md, Peers). */
#define IOD_XFER_MD_HEX_MAX (2 * IOD_XFER_MD_BYTES_MAX)
_Static_assert(IOD_XFER_MD_HEX_MAX + 4096 <= IOD_API_BODY_MAX, "an XferPeer fits one API body");
#define IOD_XFER_DEADLINE_MS 5000
#define IOD_XFER_CHUNK_BYTES (1ull << 20)
_Static_assert(IOD_XFER_REGIONS_MAX *(25 + IOD_XFER_RKEY_BYTES_MAX) + IOD_XFER_ADDR_BYTES_MAX +
                       IOD_NAME_MAX + 32 <=
                   IOD_XFER_MD_BYTES_MAX,
               "a full metadata blob fits IOD_XFER_MD_BYTES_MAX");
_Static_assert(IOD_XFER_REGION_BYTES_MAX <= IOD_XFER_REG_BYTES_MAX, "one region fits the total");

#endif
