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

/* The common option text for --server. */
#define IOD_CTL_SERVER_HELP                                                          \
	"  --server ADDR[,ADDR...]  API address(es) of the cluster (default $IOD_SERVER, " \
	"else " IOD_API_DEFAULT_SERVER ")\n"

#endif
