/*
 * demo.h: the built-in demo workloads, linked into `iod`: the demo training
 * workload (src/demo/worker.c, `iod demo-worker`) and the HTTP test backend
 * (src/demo/backend.c, `iod proxy backend`).
 *
 * Shells: they listen, dial, sleep and print; the CLI files only parse
 * options and call them.
 */
#ifndef IOD_DEMO_H
#define IOD_DEMO_H

#include "iod/base.h"
#include "iod/mesh.h"

/* Exit statuses the demo returns (the CLI's 0, 1 and 2). */
#define IOD_DEMO_EXIT_OK 0
#define IOD_DEMO_EXIT_ERROR 1
#define IOD_DEMO_EXIT_INVALID 2

/* One demo worker, its options checked by the caller. */
struct iod_demo_opts {
	const char *role;    /* "parameter-server" | "worker" */
	uint16_t port;       /* parameter-server: its TCP port (non-zero) */
	uint32_t params;     /* parameter-server: shard size, 1..IOD_DEMO_PARAMS_MAX */
	const char *servers; /* worker: "host:port,..." of the parameter servers */
	/* worker --via-mesh: the service's AF_UNIX socket on the node's proxy
	 * ($IOD_MESH_UNIX_DIR/SERVICE.sock), tried before servers at every
	 * (re)connect: there only while service_mesh.transport is not tcp */
	const char *mesh_unix;
	uint64_t compute_ns;      /* worker: synthetic compute per step */
	uint64_t steps;           /* worker: stop after this many steps (0 = until SIGTERM) */
	int http_port;            /* GET /healthz and /metrics here; <= 0 = none */
	const char *ckpt_dir;     /* parameter-server: checkpoint here (libiod-ckpt); NULL = none */
	uint64_t ckpt_every;      /* parameter-server: a checkpoint every N updates (>= 1) */
	const char *ckpt_server;  /* parameter-server: commit manifests through this control
	                            plane and restore the newest committed; NULL = local only */
	uint32_t ckpt_replicas;   /* copies the commit needs (storage.replicas; 0: 1) */
	uint64_t ckpt_scrub_ms;   /* parameter-server: a background scrub pass this often
	                            (0 = no scrub), results into the Checkpoint objects */
	uint64_t ckpt_scrub_rate; /* its bound, bytes/s (0 = IOD_CKPT_SCRUB_RATE_DEFAULT) */
	uint64_t state_bytes;     /* parameter-server: optimizer state checkpointed with the
	                            shard, not sent to workers (0 = none) */
	/* worker, data parallel: all-reduce the gradient across the service's
	 * replicas over libiod-xfer instead of pushing it to parameter servers */
	bool allreduce_xfer;        /* --allreduce xfer ($IOD_ALLREDUCE) */
	uint32_t ranks;             /* replicas in the ring (2..IOD_XFER_PEERS_MAX) */
	const char *xfer_transport; /* "shm" | "tcp" | "auto" */
	const char *api_server;     /* where peers publish (NULL: the client config) */
};

/* Run it until SIGTERM/SIGINT (or --steps): an exit status. */
int iod_demo_run(const struct iod_demo_opts *o);

/* The HTTP test backend's settings (`iod proxy backend`). */
struct iod_demo_backend {
	char name[IOD_NAME_MAX]; /* answers say who they are */
	size_t size;             /* response body bytes */
	int status;              /* response status */
	uint32_t call_ip;        /* --call target (0 = none; set from call) */
	uint16_t call_port;      /* its port */
	char call_path[256];     /* its path */
	char file[512];          /* --file: answer with this file's contents */
	char sink[512];          /* --sink: write each request's decoded body here */
	bool chunked;            /* --chunked: answer with chunked transfer encoding */
	uint64_t read_bps;       /* --read-rate: read request bodies this slowly (0 = no limit) */
	char unix_path[108];     /* --unix: also serve on this AF_UNIX socket ("" = none) */
};

/* Serve on listen_addr (IPv4:port) forever; call ("http://IPv4:port/path",
 * NULL = none) is the next hop each request calls. An exit status when it
 * cannot start. */
int iod_demo_backend_run(const struct iod_demo_backend *cfg, const char *listen_addr,
                         const char *call);

#endif
