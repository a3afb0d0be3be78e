/*
 * mesh.c: L7 faults (delay and abort of a service's HTTP requests,
 * Istio's fault injection) as Fault objects on a lease of their duration
 * (include/iod/objects.h). Every node's mesh proxy learns a Fault from the
 * control plane's watch and applies it until its until_ms by its own clock;
 * the lease then deletes the object. The one home of writing and deleting
 * them: `iod chaos delay|abort service/NAME` (src/cli/cmd_chaos_mesh.c) and
 * the plan steps of `iod chaos run --plan` (run.c). docs/chaos.md.
 */
#include "iod/api.h"
#include "iod/chaos.h"
#include "iod/mesh.h"
#include "iod/objects.h"
#include "iod/state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void iod_chaos_l7_describe(const struct iod_chaos_l7 *f, char *buf, size_t len)
{
	if (!f->abort)
		snprintf(buf, len, "delay %ums of %u%% of service/%s's requests", f->delay_ms,
		         f->percent, f->service);
	else
		snprintf(buf, len, "abort %u%% of service/%s's requests with %u", f->percent,
		         f->service, f->status);
}

static int request(struct iod_api_client *c, const char *method, const char *path, json_t *body,
                   struct iod_api_response *r, struct iod_err *e)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (body && !text)
		return iod_err_set(e, -ENOMEM, "out of memory");
	int rc = iod_api_request(c, method, path, text ? "application/json" : NULL, text,
	                         text ? strlen(text) : 0, r, e);
	free(text);
	if (rc && e)
		e->code = -ENOTCONN; /* no server answered */
	return rc ? -ENOTCONN : 0;
}

/* The service must exist and be carried as HTTP by the mesh. */
static int check_service(struct iod_api_client *c, const char *name, struct iod_err *e)
{
	struct iod_api_response r = {0};
	char path[IOD_NAME_MAX + 32];
	snprintf(path, sizeof(path), "/v1/services/%s", name);
	int rc = request(c, "GET", path, NULL, &r, e);
	if (rc)
		;
	else if (r.status == 404)
		rc = iod_err_set(e, -EINVAL, "no service %s in the cluster (`iod get services`)",
		                 name);
	else if (r.status != 200)
		rc = iod_err_set(e, -EIO, "GET %s: %s (HTTP %d)", path, iod_api_error_text(&r),
		                 r.status);
	else if (iod_mesh_api_service_mode(json_object_get(r.json, "value")) != IOD_MESH_MODE_HTTP)
		rc = iod_err_set(
		    e, -EINVAL,
		    "service %s is carried as TCP (L4) by the mesh: delay and abort "
		    "of requests need an HTTP service (a first port named http or "
		    "http-*); `iod chaos delay|loss` on its replicas' nodes works at L4",
		    name);
	iod_api_response_free(&r);
	return rc;
}

int iod_chaos_l7_services(const char *apis, char names[][IOD_NAME_MAX], uint32_t max,
                          struct iod_err *e)
{
	struct iod_api_client c;
	struct iod_api_response r = {0};
	uint32_t n = 0;
	if (iod_api_client_init_config(&c, apis, e))
		return -EINVAL;
	int rc = request(&c, "GET", "/v1/services?consistent=1", NULL, &r, e);
	if (!rc && r.status != 200)
		rc = iod_err_set(e, -EIO, "GET /v1/services: %s (HTTP %d)", iod_api_error_text(&r),
		                 r.status);
	const json_t *it;
	size_t i;
	if (!rc)
		json_array_foreach(json_object_get(r.json, "items"), i, it)
		{
			const char *name = json_string_value(json_object_get(it, "name"));
			if (n < max && name && strlen(name) < IOD_NAME_MAX &&
			    iod_mesh_api_service_mode(json_object_get(it, "value")) ==
			        IOD_MESH_MODE_HTTP)
				snprintf(names[n++], IOD_NAME_MAX, "%s", name);
		}
	iod_api_response_free(&r);
	iod_api_client_close(&c);
	return rc ? rc : (int)n;
}

int iod_chaos_l7_apply(const char *apis, struct iod_chaos_l7 *f, struct iod_err *e)
{
	struct iod_api_client c;
	struct iod_api_response r = {0};
	struct iod_obj_fault o;
	char path[IOD_CHAOS_ID_MAX + 64];
	uint64_t lease = 0;
	int rc;

	if (!iod_state_name_valid(f->service))
		return iod_err_set(e, -EINVAL, "service/%s: not a service name", f->service);
	if (iod_api_client_init_config(&c, apis, e))
		return -EINVAL;
	iod_obj_fault_init(&o);
	if ((rc = check_service(&c, f->service, e)))
		goto out;
	json_t *b = json_pack("{s:I}", "ttl_ms", (json_int_t)f->duration_ms);
	rc = b ? request(&c, "POST", "/v1/leases", b, &r, e) : iod_err_set(e, -ENOMEM, "oom");
	json_decref(b);
	if (!rc && r.status / 100 != 2)
		rc = iod_err_set(e, -EIO, "POST /v1/leases: %s (HTTP %d)", iod_api_error_text(&r),
		                 r.status);
	if (!rc && iod_json_get_u64(r.json, "lease", &lease))
		rc = iod_err_set(e, -EIO, "the lease answer has no id");
	iod_api_response_free(&r);
	if (rc)
		goto out;
	f->start_ms = iod_time_unix_ns() / IOD_NS_PER_MS;
	f->until_ms = f->start_ms + f->duration_ms;
	iod_obj_fault_set_str(&o, IOD_OBJ_FAULT_SERVICE, f->service);
	iod_obj_fault_set_str(&o, IOD_OBJ_FAULT_ACTION, f->abort ? "abort" : "delay");
	iod_obj_fault_set_int(&o, IOD_OBJ_FAULT_PERCENT, f->percent);
	if (f->abort)
		iod_obj_fault_set_int(&o, IOD_OBJ_FAULT_STATUS, f->status);
	else
		iod_obj_fault_set_int(&o, IOD_OBJ_FAULT_DELAY_MS, f->delay_ms);
	iod_obj_fault_set_int(&o, IOD_OBJ_FAULT_START_MS, (int64_t)f->start_ms);
	iod_obj_fault_set_int(&o, IOD_OBJ_FAULT_UNTIL_MS, (int64_t)f->until_ms);
	if (iod_obj_fault_check(&o, e)) {
		rc = -EINVAL;
		goto out;
	}
	iod_chaos_fault_id(f->id, sizeof(f->id), (uint64_t)getpid());
	snprintf(path, sizeof(path), "/v1/faults/%s?lease=%llu", f->id, (unsigned long long)lease);
	json_t *v = iod_obj_fault_to_json(&o);
	rc = v ? request(&c, "PUT", path, v, &r, e) : iod_err_set(e, -ENOMEM, "out of memory");
	json_decref(v);
	if (!rc && r.status / 100 != 2)
		rc = iod_err_set(e, r.status == 403 ? -EPERM : -EIO, "PUT %s: %s (HTTP %d)", path,
		                 iod_api_error_text(&r), r.status);
	iod_api_response_free(&r);
out:
	iod_obj_fault_free(&o);
	iod_api_client_close(&c);
	return rc;
}

int iod_chaos_l7_delete(struct iod_api_client *c, const char *id, struct iod_err *e)
{
	struct iod_api_response r = {0};
	char path[IOD_NAME_MAX + 32];
	snprintf(path, sizeof(path), "/v1/faults/%s", id);
	int rc = request(c, "DELETE", path, NULL, &r, e);
	if (rc)
		iod_err_wrap(e, "heal %s", id);
	else if (r.status == 404)
		rc = 0;
	else if (r.status / 100 == 2)
		rc = 1;
	else
		rc = iod_err_set(e, -EIO, "heal %s: %s (HTTP %d)", id, iod_api_error_text(&r),
		                 r.status);
	iod_api_response_free(&r);
	return rc;
}
