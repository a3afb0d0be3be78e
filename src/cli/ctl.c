/*
 * ctl.c: helpers shared by the commands that talk to the control plane API.
 */
#include "ctl.h"
#include "iod/agent.h"
#include "iod/objects.h"
#include "iod/sec.h"

#include <dirent.h>
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

void iod_up_state_dir(char *buf, size_t len);

/* One node's drops.json records into all (each with its "node"). */
static void drops_of(const char *dir, const char *node, json_t *all)
{
	char path[IOD_AGENT_PATH_MAX + 2 * IOD_NAME_MAX];
	snprintf(path, sizeof(path), "%s/%s/drops.json", dir, node);
	json_t *doc = json_load_file(path, 0, NULL);
	json_t *r;
	size_t i;
	json_array_foreach(json_object_get(doc, "records"), i, r)
	{
		json_object_set_new(r, "node", json_string(node));
		json_array_append(all, r);
	}
	json_decref(doc);
}

static int by_first(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "first_ms")),
	           y = json_integer_value(json_object_get(*(json_t *const *)b, "first_ms"));
	return x < y ? -1 : x > y;
}

json_t *iod_ctl_drops_read(const char *node)
{
	char dir[IOD_AGENT_PATH_MAX], name[IOD_NAME_MAX + 8];
	json_t *all = json_array();
	if (!all)
		return NULL;
	iod_up_state_dir(dir, sizeof(dir));
	if (node && node[0] >= '0' && node[0] <= '9')
		snprintf(name, sizeof(name), "node-%s", node);
	else if (node)
		snprintf(name, sizeof(name), "%s", node);
	if (node) {
		drops_of(dir, name, all);
	} else {
		DIR *d = opendir(dir);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (!strncmp(de->d_name, "node-", 5) && !strchr(de->d_name, '.'))
				drops_of(dir, de->d_name, all);
		if (d)
			closedir(d);
	}
	/* oldest first, across the nodes */
	size_t n = json_array_size(all);
	json_t **v = n ? calloc(n, sizeof(*v)) : NULL;
	for (size_t i = 0; v && i < n; i++)
		v[i] = json_incref(json_array_get(all, i));
	if (v) {
		qsort(v, n, sizeof(*v), by_first);
		json_array_clear(all);
		for (size_t i = 0; i < n; i++)
			json_array_append_new(all, v[i]);
	}
	free(v);
	return all;
}

/* The Node object of node (its "value"), looked up in GET /v1/nodes, into
 * *url (its telemetry listener, "" when it publishes none). */
static int node_telemetry(const char *cmd, struct iod_api_client *cl, const char *node, char *url,
                          size_t len)
{
	struct iod_api_response r = {0};
	int rc = iod_ctl_call(cmd, cl, "GET", "/v1/nodes", NULL, NULL, 0, &r);
	if (rc)
		return rc;
	const json_t *value = NULL;
	char names[256] = "";
	size_t i, used = 0;
	json_t *x;
	json_array_foreach(json_object_get(r.json, "items"), i, x)
	{
		const char *n = json_string_value(json_object_get(x, "name"));
		if (n && !strcmp(n, node))
			value = json_object_get(x, "value");
		if (n && used < sizeof(names)) {
			int k = snprintf(names + used, sizeof(names) - used, "%s%s",
			                 used ? ", " : "", n);
			used += k > 0 ? (size_t)k : 0;
		}
	}
	if (!value) {
		rc =
		    iod_cli_fail(cmd, IOD_EXIT_INVALID, "no node %s in the cluster (its nodes: %s)",
		                 node, names[0] ? names : "none");
		iod_api_response_free(&r);
		return rc;
	}
	const char *t = iod_obj_peek_str(IOD_OBJ_KIND_NODE, value, IOD_OBJ_NODE_TELEMETRY);
	iod_strlcpy(url, t ? t : "", len);
	iod_api_response_free(&r);
	if (!url[0])
		return iod_cli_fail(cmd, IOD_EXIT_INVALID,
		                    "node %s publishes no telemetry listener (its agent runs "
		                    "without --telemetry-addr), so it cannot be read",
		                    node);
	return IOD_EXIT_OK;
}

int iod_ctl_node_get(const char *cmd, const char *server, const char *node, const char *path,
                     uint32_t timeout_ms, struct iod_api_response *r)
{
	struct iod_api_client cl;
	char url[IOD_ADDR_MAX];
	memset(r, 0, sizeof(*r));
	int rc = iod_ctl_client(cmd, server, &cl);
	if (rc)
		return rc;
	if ((rc = node_telemetry(cmd, &cl, node, url, sizeof(url)))) {
		iod_api_client_close(&cl);
		return rc;
	}
	bool tls = !strncmp(url, "https://", 8);
	const char *addr = tls ? url + 8 : !strncmp(url, "http://", 7) ? url + 7 : url;
	struct iod_http_conn conn;
	iod_http_conn_init(&conn);
	if (tls) {
		if (!cl.creds) {
			iod_api_client_close(&cl);
			return iod_cli_fail(
			    cmd, IOD_EXIT_INVALID,
			    "node %s serves its telemetry over mutual TLS (%s), and "
			    "the client config names no CA and certificate "
			    "(`iod init`, or the context `iod up` writes)",
			    node, url);
		}
		/* the context's CA and certificate; the agent must be that node */
		conn.creds = cl.creds;
		conn.tls_peer_kind = IOD_SEC_KIND_NODE;
		conn.tls_peer_name = node;
	}
	struct iod_err e = {0};
	rc = iod_api_http_once(&conn, addr, "GET", path, NULL, NULL, 0, timeout_ms, r, &e);
	iod_http_conn_close(&conn);
	iod_api_client_close(&cl);
	if (rc)
		return iod_cli_fail(cmd, IOD_EXIT_UNAVAILABLE,
		                    "node %s's agent at %s does not answer: %s", node, url, e.msg);
	return IOD_EXIT_OK;
}
