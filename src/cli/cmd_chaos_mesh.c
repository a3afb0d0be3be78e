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

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int exit_of(int rc)
{
	return rc == -EINVAL     ? IOD_EXIT_INVALID
	       : rc == -ENOTCONN ? IOD_EXIT_UNAVAILABLE
	                         : IOD_EXIT_ERROR;
}

static json_t *record_json(const char *id, const struct iod_obj_fault *o, uint64_t now_ms)
{
	char desc[IOD_CHAOS_DESC_MAX];
	struct iod_chaos_l7 f = {.abort = !strcmp(o->action, "abort"),
	                         .percent = o->percent,
	                         .delay_ms = o->delay_ms,
	                         .status = o->status};
	snprintf(f.service, sizeof(f.service), "%s", o->service);
	iod_chaos_l7_describe(&f, desc, sizeof(desc));
	return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "id", id, "action", o->action, "desc",
	                 desc, "start_ms", (json_int_t)o->start_ms, "deadline_ms",
	                 (json_int_t)o->until_ms, "left_ms",
	                 (json_int_t)(o->until_ms > now_ms ? o->until_ms - now_ms : 0));
}

/* DELETE /v1/faults/ID: 1 deleted, 0 not there, or an exit code < 0. */
static int fault_delete(struct iod_api_client *c, const char *id)
{
	struct iod_err e = {0};
	int rc = iod_chaos_l7_delete(c, id, &e);
	return rc >= 0 ? rc : -iod_cli_fail("chaos", exit_of(rc), "%s", e.msg);
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
	struct iod_err e = {0};
	char desc[IOD_CHAOS_DESC_MAX];
	struct iod_chaos_l7 f = {.abort = rq->abort,
	                         .percent = rq->percent,
	                         .delay_ms = (uint32_t)rq->delay_ms,
	                         .status = rq->status,
	                         .duration_ms = rq->duration_ms};
	int rc;

	if (strlen(rq->service) >= sizeof(f.service) || !iod_state_name_valid(rq->service))
		return iod_cli_fail("chaos", IOD_EXIT_INVALID, "service/%s: not a service name",
		                    rq->service);
	snprintf(f.service, sizeof(f.service), "%s", rq->service);
	if ((rc = iod_chaos_l7_apply(rq->apis, &f, &e)))
		return iod_cli_fail("chaos", exit_of(rc), "%s", e.msg);
	iod_chaos_l7_describe(&f, desc, sizeof(desc));
	if (rq->out == IOD_OUT_JSON) {
		json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "id", f.id, "action",
		                      f.abort ? "abort" : "delay", "desc", desc, "start_ms",
		                      (json_int_t)f.start_ms, "deadline_ms", (json_int_t)f.until_ms,
		                      "left_ms", (json_int_t)f.duration_ms);
		iod_json_print(stdout, j, false);
		json_decref(j);
	} else {
		printf("%s  %s for %llus (every node's proxy; `iod chaos heal %s` ends it now)\n",
		       f.id, desc, (unsigned long long)(rq->duration_ms / 1000), f.id);
	}
	fflush(stdout);
	if (rq->detach)
		return 0;
	wait_until(f.until_ms, rq->stop);
	/* at the deadline the proxies have stopped applying it and its lease
	 * deletes it; on Ctrl-C it goes now */
	if (iod_api_client_init_config(&c, rq->apis, &e))
		return iod_cli_fail("chaos", IOD_EXIT_INVALID, "%s", e.msg);
	int d = fault_delete(&c, f.id);
	if (d < 0)
		rc = -d;
	else if (rq->out == IOD_OUT_TEXT)
		printf("%s  healed: %s\n", f.id, desc);
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
	if ((rc = iod_ctl_call("chaos", &c, "GET", "/v1/faults?consistent=1", NULL, NULL, 0, &r)))
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
