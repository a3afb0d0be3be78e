/*
 * internal.h: what the agent's files share and nobody else needs: the link
 * to the control plane (cluster.c) and the hosted mesh proxy (meshhost.c)
 * as the agent loop (agent.c) drives them.
 */
#ifndef IOD_AGENT_INTERNAL_H
#define IOD_AGENT_INTERNAL_H

#include "iod/agent_run.h"
#include "iod/api.h"
#include "iod/mesh_proxy.h"

struct iod_agent_cluster;

/* Register the node and start following the cluster; wake_fd (an eventfd)
 * is written whenever new desired state is ready. Services' own seccomp
 * profiles are compiled into seccomp (the agent's store); the secret values
 * its replicas mount are fetched into secrets. */
int iod_agent_cluster_start(struct iod_agent_cluster **out, const struct iod_agent_config *cfg,
                            int wake_fd, struct iod_agent_seccomp_store *seccomp,
                            struct iod_agent_secrets *secrets, struct iod_err *e);
/* New desired replicas since the last call? (copied into out, *n set).
 * *resync: the node (re-)registered: report every replica again. */
bool iod_agent_cluster_take(struct iod_agent_cluster *c, struct iod_agent_replica *out, uint32_t *n,
                            bool *resync);
/* Queue a phase report (coalesced per replica; never blocks on the network).
 * addr: the replica's own address (per-replica netns), "" = the node's;
 * uid: the uid its sandbox runs it as (0: none of its own). */
void iod_agent_cluster_report(struct iod_agent_cluster *c, const struct iod_agent_action *a,
                              const char *service, uint16_t port, const char *addr, uint32_t uid);
/* Flush pending reports, revoke the lease, stop the threads. */
void iod_agent_cluster_stop(struct iod_agent_cluster *c);
/* Has the node registered (it holds a lease now)? */
bool iod_agent_cluster_registered(struct iod_agent_cluster *c);
/* The overlay switch that gets the VTEP table from the watch (NULL = none). */
void iod_agent_cluster_set_vswitch(struct iod_agent_cluster *c, struct iod_agent_vswitch *v);

/* The node's mesh proxy (meshhost.c): started once the node registers,
 * following the control plane; stop closes its listeners and joins it. */
struct iod_agent_mesh;
int iod_agent_mesh_start(struct iod_agent_mesh **out, const struct iod_agent_config *cfg,
                         struct iod_agent_cluster *cluster, struct iod_err *e);
void iod_agent_mesh_stop(struct iod_agent_mesh *m);

/* The node certificate (certs.c): its validity as the file says, and a
 * renewal through cl (authenticated by the current certificate), swapped
 * into cfg->creds and the files. */
int iod_agent_cert_validity(const struct iod_agent_config *c, uint64_t *not_before_s,
                            uint64_t *not_after_s, bool *server_auth, struct iod_err *e);
int iod_agent_cert_renew(const struct iod_agent_config *c, struct iod_api_client *cl,
                         struct iod_err *e);

/* The SVIDs of the node's services (svid.c): for each of want[0..n) keep a
 * valid pair in cfg->svid_dir, issued through cl (the node's certificate)
 * when missing or at two thirds of its life. *issued: how many were
 * written; *next_s: when to look again (unix s). 0, or the first failure
 * (the others are still tried). */
int iod_agent_svids_sync(const struct iod_agent_config *c, struct iod_api_client *cl,
                         const struct iod_mesh_svc_id *want, uint32_t n, uint64_t now_s,
                         uint64_t *next_s, uint32_t *issued, struct iod_err *e);
/* One SVID (svid.c): a valid pair for id in cfg->svid_dir, issued through
 * cl when missing or due. *renew_at_s: when it is due; *issued: written now. */
int iod_agent_svid_ensure(const struct iod_agent_config *c, struct iod_api_client *cl,
                          const struct iod_mesh_svc_id *id, uint64_t now_s, uint64_t *renew_at_s,
                          bool *issued, struct iod_err *e);
/* Is a running replica's copy of its SVID (validity copy_*) to be replaced
 * by the agent's (src_*) at now_s? When the copy is at two thirds of its
 * life or past it and the agent's is newer and valid. Pure (credsplan.c). */
bool iod_agent_creds_refresh_due(uint64_t copy_not_before_s, uint64_t copy_not_after_s,
                                 uint64_t src_not_before_s, uint64_t src_not_after_s,
                                 uint64_t now_s);
/* Refresh the copy in dst (a running replica's creds directory) from
 * svid_dir when iod_agent_creds_refresh_due says so, keeping its owner;
 * each file through a temporary name and rename, the key before the
 * certificate. *copied: it was rewritten. No copy in dst: nothing. */
int iod_agent_svid_refresh_copy(const char *svid_dir, const char *tenant, const char *service,
                                const char *dst, uint64_t now_s, bool *copied, struct iod_err *e);
/* Remove the pairs in cfg->svid_dir this node was issued (their OU names
 * cfg->name) for services not in want[0..n): what sync does with a view
 * (want not NULL). A pair written or used (its .crt's mtime, touched by
 * every ensure that keeps it) in the IOD_AGENT_SVID_INUSE_S before now_s
 * (unix s) stays, and *retry_s (when not NULL) is lowered to when it may
 * go. How many were removed. The grace covers the moment the proxy
 * thread's view lags the agent's replicas (a pair between a replica's
 * ensure and its copy); a service that left goes one grace later. */
#define IOD_AGENT_SVID_INUSE_S 10
uint32_t iod_agent_svids_prune(const struct iod_agent_config *c, const struct iod_mesh_svc_id *want,
                               uint32_t n, uint64_t now_s, uint64_t *retry_s);

/* The telemetry thread (telemetry.c); NULL out when cfg->telemetry_interval_ns is 0. */
struct iod_agent_telemetry;
int iod_agent_telemetry_start(struct iod_agent_telemetry **out, const struct iod_agent_config *c,
                              struct iod_err *e);
void iod_agent_telemetry_stop(struct iod_agent_telemetry *t);
/* Report the node's virtual switch's ports (data-plane counters) from the
 * next sample on; v must outlive t (stop t first). NULL t: nothing. */
struct iod_agent_vswitch;
void iod_agent_telemetry_set_vswitch(struct iod_agent_telemetry *t, struct iod_agent_vswitch *v);
/* The Revocation names (iod_sec_revocation_key: "user.alice", ...) whose
 * certificates the HTTPS listener refuses (401), replacing the last list.
 * The thread sets it from GET /v1/revocations every second. NULL t: nothing. */
void iod_agent_telemetry_set_revoked(struct iod_agent_telemetry *t, const char *const *names,
                                     uint32_t n);

#endif
