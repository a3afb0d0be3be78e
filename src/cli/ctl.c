/*
 * ctl.c: helpers shared by the commands that talk to the control plane API.
 */
#include "ctl.h"

#include <string.h>

int iod_ctl_client(const char *cmd, const char *server, struct iod_api_client *c)
{
	struct iod_err e = {0};
	if (iod_api_client_init_config(c, server, &e))
		return iod_cli_fail(cmd, IOD_EXIT_INVALID, "%s", e.msg);
	/* an election takes well under a second; 3 s covers one and keeps a
	 * dead cluster from hanging a terminal */
	c->retry_ms = 3000;
	return IOD_EXIT_OK;
}

int iod_ctl_call(const char *cmd, struct iod_api_client *c, const char *method, const char *path,
                 const char *ctype, const void *body, size_t len, struct iod_api_response *r)
{
	struct iod_err e = {0};
	int rc = iod_api_request(c, method, path, ctype, body, len, r, &e);

	if (rc)
		return iod_cli_fail(
		    cmd, IOD_EXIT_UNAVAILABLE,
		    "%s\n  (is `iod server` running? pick the cluster with --server or "
		    "IOD_SERVER)",
		    e.msg);
	if (r->status >= 200 && r->status < 300)
		return IOD_EXIT_OK;
	int code = IOD_EXIT_ERROR;
	if (r->status == 400 || r->status == 404 || r->status == 409 || r->status == 413 ||
	    r->status == 422 || r->status == 410)
		code = IOD_EXIT_INVALID;
	if (r->status == 503)
		code = IOD_EXIT_UNAVAILABLE;
	iod_cli_fail(cmd, code, "%s (HTTP %d from %s)", iod_api_error_text(r), r->status,
	             r->server);
	return code;
}
