/*
 * cmd_chaos_mesh.c: L7 faults of `iod chaos` (delay and abort of a
 * service's HTTP requests, Istio's fault injection) through the mesh.
 *
 * A fault is a Fault object (include/iod/objects.h) on a lease of its
 * duration: every node's proxy learns it from the control plane's watch
 * and applies it to the requests it routes to the service until its
 * until_ms, by its own clock, so it ends on time even if this command, the
 * leader and the lease's expiry all fail; the lease then deletes the
 * object. `iod chaos heal` deletes it at once. docs/chaos.md.
 */
#include "cli.h"
#include "ctl.h"

#include "iod/chaos.h"
#include "iod/mesh.h"
#include "iod/objects.h"
#include "iod/state.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int call(struct iod_api_client *c, const char *method, const char *path, json_t *body,
                struct iod_api_response *r)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (body && !text)
		return iod_cli_fail("chaos", IOD_EXIT_ERROR, "out of memory");
	int rc = iod_ctl_call("chaos", c, method, path, text ? "application/json" : NULL, text,
	                      text ? strlen(text) : 0, r);
	free(text);
	return rc;
}

/* The service must exist and be carried as HTTP by the mesh. */
static int check_service(struct iod_api_client *c, const char *name)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	char path[IOD_NAME_MAX + 32];
	snprintf(path, sizeof(path), "/v1/services/%s", name);
	int rc = iod_api_request(c, "GET", path, NULL, NULL, 0, &r, &e);
	if (rc) {
		iod_api_response_free(&r);
		return iod_cli_fail("chaos", IOD_EXIT_UNAVAILABLE, "%s", e.msg);
	}
	if (r.status == 404)
		rc = iod_cli_fail("chaos", IOD_EXIT_INVALID,
		                  "no service %s in the cluster (`iod get services`)", name);
	else if (r.status != 200)
		rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "GET %s: %s (HTTP %d)", path,
		                  iod_api_error_text(&r), r.status);
	else if (iod_mesh_api_service_mode(json_object_get(r.json, "value")) != IOD_MESH_MODE_HTTP)
		rc = iod_cli_fail(
		    "chaos", IOD_EXIT_INVALID,
		    "service %s is carried as TCP (L4) by the mesh: delay and abort "
		    "of requests need an HTTP service (a first port named http or "
		    "http-*); `iod chaos delay|loss` on its replicas' nodes works at L4",
		    name);
	iod_api_response_free(&r);
	return rc;
}

/* A lease of ttl_ms: its id, or 0 (an error was printed, *rc says the exit). */
static uint64_t lease_grant(struct iod_api_client *c, uint64_t ttl_ms, int *rc)
{
	struct iod_api_response r = {0};
	uint64_t id = 0;
	json_t *b = json_pack("{s:I}", "ttl_ms", (json_int_t)ttl_ms);
	*rc = b ? call(c, "POST", "/v1/leases", b, &r) : IOD_EXIT_ERROR;
	json_decref(b);
	if (!*rc && iod_json_get_u64(r.json, "lease", &id))
		*rc = iod_cli_fail("chaos", IOD_EXIT_ERROR, "the lease answer has no id");
	iod_api_response_free(&r);
	return *rc ? 0 : id;
}

static void describe(const struct iod_obj_fault *f, char *buf, size_t len)
{
	if (!strcmp(f->action, "delay"))
		snprintf(buf, len, "delay %ums of %u%% of service/%s's requests", f->delay_ms,
		         f->percent, f->service);
	else
		snprintf(buf, len, "abort %u%% of service/%s's requests with %u", f->percent,
		         f->service, f->status);
}

static json_t *record_json(const char *id, const struct iod_obj_fault *f, uint64_t now_ms)
{
	char desc[IOD_CHAOS_DESC_MAX];
	describe(f, desc, sizeof(desc));
	return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "id", id, "action", f->action, "desc",
	                 desc, "start_ms", (json_int_t)f->start_ms, "deadline_ms",
	                 (json_int_t)f->until_ms, "left_ms",
	                 (json_int_t)(f->until_ms > now_ms ? f->until_ms - now_ms : 0));
}

/* DELETE /v1/faults/ID: 1 deleted, 0 not there, or an exit code < 0. */
static int fault_delete(struct iod_api_client *c, const char *id)
{
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	char path[IOD_NAME_MAX + 32];
	snprintf(path, sizeof(path), "/v1/faults/%s", id);
	int rc = iod_api_request(c, "DELETE", path, NULL, NULL, 0, &r, &e);
	if (rc)
		rc = -iod_cli_fail("chaos", IOD_EXIT_UNAVAILABLE, "heal %s: %s", id, e.msg);
	else if (r.status == 404)
		rc = 0;
	else if (r.status / 100 == 2)
		rc = 1;
	else
		rc = -iod_cli_fail("chaos", IOD_EXIT_ERROR, "heal %s: %s (HTTP %d)", id,
		                   iod_api_error_text(&r), r.status);
	iod_api_response_free(&r);
	return rc;
}

/* Sleep until deadline_ms (unix) or *stop. */
static void wait_until(uint64_t deadline_ms, const volatile sig_atomic_t *stop)
{
	while (!*stop && iod_time_unix_ns() / IOD_NS_PER_MS < deadline_ms) {
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

int iod_chaos_mesh_apply(const struct iod_chaos_mesh_req *rq)
{
	struct iod_api_client c;
	struct iod_api_response r = {0};
	struct iod_obj_fault f;
	struct iod_err e = {0};
	char id[IOD_CHAOS_ID_MAX], path[IOD_CHAOS_ID_MAX + 64], desc[IOD_CHAOS_DESC_MAX];
	int rc;

	iod_obj_fault_init(&f);
	if (!iod_state_name_valid(rq->service))
		return iod_cli_fail("chaos", IOD_EXIT_INVALID, "service/%s: not a service name",
		                    rq->service);
	if (iod_api_client_init_config(&c, rq->apis, &e))
		return iod_cli_fail("chaos", IOD_EXIT_INVALID, "%s", e.msg);
	if ((rc = check_service(&c, rq->service)))
		goto out;
	uint64_t lease = lease_grant(&c, rq->duration_ms, &rc);
	if (!lease)
		goto out;
	uint64_t now = iod_time_unix_ns() / IOD_NS_PER_MS;
	iod_obj_fault_set_str(&f, IOD_OBJ_FAULT_SERVICE, rq->service);
	iod_obj_fault_set_str(&f, IOD_OBJ_FAULT_ACTION, rq->abort ? "abort" : "delay");
	iod_obj_fault_set_int(&f, IOD_OBJ_FAULT_PERCENT, rq->percent);
	if (rq->abort)
		iod_obj_fault_set_int(&f, IOD_OBJ_FAULT_STATUS, rq->status);
	else
		iod_obj_fault_set_int(&f, IOD_OBJ_FAULT_DELAY_MS, (int64_t)rq->delay_ms);
	iod_obj_fault_set_int(&f, IOD_OBJ_FAULT_START_MS, (int64_t)now);
	iod_obj_fault_set_int(&f, IOD_OBJ_FAULT_UNTIL_MS, (int64_t)(now + rq->duration_ms));
	if (iod_obj_fault_check(&f, &e)) {
		rc = iod_cli_fail("chaos", IOD_EXIT_INVALID, "%s", e.msg);
		goto out;
	}
	iod_chaos_fault_id(id, sizeof(id), (uint64_t)getpid());
	snprintf(path, sizeof(path), "/v1/faults/%s?lease=%llu", id, (unsigned long long)lease);
	json_t *v = iod_obj_fault_to_json(&f);
	rc = v ? call(&c, "PUT", path, v, &r) : IOD_EXIT_ERROR;
	json_decref(v);
	iod_api_response_free(&r);
	if (rc)
		goto out;
	describe(&f, desc, sizeof(desc));
	if (rq->out == IOD_OUT_JSON) {
		json_t *j = record_json(id, &f, now);
		iod_json_print(stdout, j, false);
		json_decref(j);
	} else {
		printf("%s  %s for %llus (every node's proxy; `iod chaos heal %s` ends it now)\n",
		       id, desc, (unsigned long long)(rq->duration_ms / 1000), id);
	}
	fflush(stdout);
	if (rq->detach)
		goto out;
	wait_until(f.until_ms, rq->stop);
	/* at the deadline the proxies have stopped applying it and its lease
	 * deletes it; on Ctrl-C it goes now */
	int d = fault_delete(&c, id);
	if (d < 0)
		rc = -d;
	else if (rq->out == IOD_OUT_TEXT)
		printf("%s  healed: %s\n", id, desc);
out:
	iod_obj_fault_free(&f);
	iod_api_client_close(&c);
	return rc;
}

json_t *iod_chaos_mesh_list(const char *apis, struct iod_err *e)
{
	struct iod_api_client c;
	struct iod_api_response r = {0};
	json_t *items = NULL;
	if (iod_api_client_init_config(&c, apis, e))
		return NULL;
	c.retry_ms = 2000;
	if (iod_api_request(&c, "GET", "/v1/faults?consistent=1", NULL, NULL, 0, &r, e))
		goto out;
	if (r.status != 200) {
		iod_err_set(e, -EIO, "GET /v1/faults: %s (HTTP %d)", iod_api_error_text(&r),
		            r.status);
		goto out;
	}
	items = json_array();
	uint64_t now = iod_time_unix_ns() / IOD_NS_PER_MS;
	const json_t *it;
	size_t i;
	json_array_foreach(json_object_get(r.json, "items"), i, it)
	{
		struct iod_obj_fault f;
		const char *name = json_string_value(json_object_get(it, "name"));
		if (!iod_obj_fault_from_json(json_object_get(it, "value"), &f, NULL) && name &&
		    !iod_obj_fault_check(&f, NULL))
			json_array_append_new(items, record_json(name, &f, now));
		iod_obj_fault_free(&f);
	}
out:
	iod_api_response_free(&r);
	iod_api_client_close(&c);
	return items;
}

int iod_chaos_mesh_heal(const char *apis, const char *id, uint32_t *healed)
{
	struct iod_api_client c;
	struct iod_api_response r = {0};
	struct iod_err e = {0};
	int rc = 0;
	*healed = 0;
	if (iod_api_client_init_config(&c, apis, &e))
		return iod_cli_fail("chaos", IOD_EXIT_INVALID, "%s", e.msg);
	if (id) {
		int d = fault_delete(&c, id);
		rc = d < 0 ? -d : 0;
		*healed = d > 0;
		goto out;
	}
	if ((rc = call(&c, "GET", "/v1/faults?consistent=1", NULL, &r)))
		goto out;
	const json_t *it;
	size_t i;
	json_array_foreach(json_object_get(r.json, "items"), i, it)
	{
		const char *name = json_string_value(json_object_get(it, "name"));
		int d = name ? fault_delete(&c, name) : 0;
		if (d < 0)
			rc = -d;
		else if (d > 0)
			(*healed)++;
	}
out:
	iod_api_response_free(&r);
	iod_api_client_close(&c);
	return rc;
}
