/*
 * ctl.h: what the API client commands (deploy, get, delete, status,
 * explain, mesh) share: --server handling, one call with error printing and
 * exit-code mapping, and table printing.
 */
#ifndef IOD_CLI_CTL_H
#define IOD_CLI_CTL_H

#include "cli.h"
#include "iod/api.h"

/* Connect-less init from --server (may be NULL: IOD_SERVER, then the default). */
int iod_ctl_client(const char *cmd, const char *server, struct iod_api_client *c);

/*
 * One request. Returns IOD_EXIT_OK with *r filled on a 2xx answer; otherwise
 * prints "iod CMD: <what>" and returns the exit code (5 unreachable / no
 * leader, 2 for 400/404/409/413/422, 1 otherwise) with *r freed.
 */
int iod_ctl_call(const char *cmd, struct iod_api_client *c, const char *method, const char *path,
                 const char *ctype, const void *body, size_t len, struct iod_api_response *r);

/* What `iod top` and `iod viz` read from the cluster in one refresh. */
struct iod_ctl_cluster {
	json_t *status, *nodes, *services, *replicas, *endpoints; /* API answers */
	json_t *telemetry;                                        /* or NULL (optional) */
	char *mesh;                                               /* a proxy's /metrics, or NULL */
};

/*
 * GET /v1/status, nodes, services, replicas, endpoints (required), and
 * /v1/telemetry and mesh's /metrics (optional). 0, or an error in e with
 * nothing kept. Prints nothing: a terminal UI calls it.
 */
int iod_ctl_cluster_read(struct iod_api_client *c, const char *mesh, struct iod_ctl_cluster *f,
                         struct iod_err *e);
void iod_ctl_cluster_free(struct iod_ctl_cluster *f);

/*
 * The flows the nodes' virtual switches dropped, with the rule that dropped
 * each: the records every node's agent writes to drops.json in its
 * directory of the `iod up` state dir (src/agent/drops.c, vswitch.c), each
 * with its "node", oldest first. node: one node ("node-2" or "2"), or NULL
 * for all. An empty array when there are none; NULL only without memory.
 * `iod trace --drops` prints them; the live view of `iod viz` draws them.
 */
json_t *iod_ctl_drops_read(const char *node);

/*
 * GET path from node's agent telemetry listener, the one its Node object
 * names (through the control plane at server): "https://IP:port" over
 * mutual TLS with the client config's credentials, the agent required to
 * present node's own certificate; "http://IP:port" (or a bare "IP:port",
 * an older agent) plain, loopback only. IOD_EXIT_OK with *r filled for any
 * HTTP answer (the caller judges the status); else the error printed as
 * "iod CMD: ..." and the exit code (2 no such node or no listener, 5 the
 * agent does not answer or is not that node).
 */
int iod_ctl_node_get(const char *cmd, const char *server, const char *node, const char *path,
                     uint32_t timeout_ms, struct iod_api_response *r);

/* The common option text for --server. */
#define IOD_CTL_SERVER_HELP                                                                \
	"  --server ADDR[,ADDR...]  API address(es) of the cluster (default $IOD_SERVER, " \
	"else " IOD_API_DEFAULT_SERVER ")\n"

#endif
