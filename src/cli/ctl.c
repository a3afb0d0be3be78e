/*
 * ctl.c: helpers shared by the commands that talk to the control plane API.
 */
#include "ctl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void iod_ctl_cluster_free(struct iod_ctl_cluster *f)
{
	json_decref(f->status);
	json_decref(f->nodes);
	json_decref(f->services);
	json_decref(f->replicas);
	json_decref(f->endpoints);
	json_decref(f->telemetry);
	free(f->mesh);
	memset(f, 0, sizeof(*f));
}

/* GET path; the JSON answer in *out, or an error in e. */
static int get_json(struct iod_api_client *c, const char *path, json_t **out, struct iod_err *e)
{
	struct iod_api_response r;
	int rc = iod_api_request(c, "GET", path, NULL, NULL, 0, &r, e);
	if (rc)
		return rc;
	if (r.status != 200 || !r.json) {
		iod_err_set(e, -EIO, "GET %s: %s (HTTP %d from %s)", path, iod_api_error_text(&r),
		            r.status, r.server);
		iod_api_response_free(&r);
		return -EIO;
	}
	*out = json_incref(r.json);
	iod_api_response_free(&r);
	return 0;
}

int iod_ctl_cluster_read(struct iod_api_client *c, const char *mesh, struct iod_ctl_cluster *f,
                         struct iod_err *e)
{
	memset(f, 0, sizeof(*f));
	if (get_json(c, "/v1/status", &f->status, e) || get_json(c, "/v1/nodes", &f->nodes, e) ||
	    get_json(c, "/v1/services", &f->services, e) ||
	    get_json(c, "/v1/replicas", &f->replicas, e) ||
	    get_json(c, "/v1/endpoints", &f->endpoints, e)) {
		iod_ctl_cluster_free(f);
		return -EIO;
	}
	/* agents' telemetry summaries: optional (an older server has none) */
	struct iod_err te = {0};
	if (get_json(c, "/v1/telemetry", &f->telemetry, &te))
		f->telemetry = NULL;
	if (mesh && mesh[0]) {
		/* the mesh is optional: its failure leaves the services' rates unknown */
		struct iod_http_conn fd = {0};
		struct iod_api_response r;
		struct iod_err me = {0};
		if (!iod_api_http_once(&fd, mesh, "GET", "/metrics", NULL, NULL, 0, 1000, &r,
		                       &me)) {
			if (r.status == 200 && r.body)
				f->mesh = strdup(r.body);
			iod_api_response_free(&r);
		}
		iod_http_conn_close(&fd);
	}
	return 0;
}
