/*
 * peers.c: libiod-xfer peers through the control plane (include/iod/xfer.h,
 * docs/transfer.md "Peers"). A replica publishes its metadata blob as the
 * XferPeer object "<service>.<ordinal>" (hex in "md"); its peers poll the
 * API for ordinals 0..n-1 until all have published or the deadline passes,
 * and load each blob. The object codec (iod_xfer_peer_obj/_md) is pure;
 * the rest is the shell over the one API client (src/api/client.c).
 */
#include "iod/api.h"
#include "iod/objects.h"
#include "iod/xfer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

json_t *iod_xfer_peer_obj(const struct iod_xfer_self *me, const char *peer, const void *md,
                          size_t len)
{
	struct iod_obj_xferpeer p;
	char rep[IOD_NAME_MAX + 16];
	char *hex = len <= IOD_XFER_MD_BYTES_MAX ? malloc(2 * len + 1) : NULL;
	json_t *hj = NULL, *out = NULL;
	if (!hex || !me->service)
		goto done;
	iod_hex_encode(md, len, hex);
	if (me->replica)
		snprintf(rep, sizeof(rep), "%s", me->replica);
	else
		snprintf(rep, sizeof(rep), "%s-%u", me->service, me->ordinal);
	iod_obj_xferpeer_init(&p);
	hj = json_string(hex);
	if (!hj || iod_obj_xferpeer_set_str(&p, IOD_OBJ_XFERPEER_SERVICE, me->service) ||
	    iod_obj_xferpeer_set_int(&p, IOD_OBJ_XFERPEER_ORDINAL, me->ordinal) ||
	    iod_obj_xferpeer_set_str(&p, IOD_OBJ_XFERPEER_REPLICA, rep) ||
	    (me->node && me->node[0] &&
	     iod_obj_xferpeer_set_str(&p, IOD_OBJ_XFERPEER_NODE, me->node)) ||
	    (me->transport &&
	     iod_obj_xferpeer_set_str(&p, IOD_OBJ_XFERPEER_TRANSPORT, me->transport)) ||
	    (peer && iod_obj_xferpeer_set_str(&p, IOD_OBJ_XFERPEER_PEER, peer)) ||
	    iod_obj_xferpeer_set_json(&p, IOD_OBJ_XFERPEER_MD, hj)) {
		iod_obj_xferpeer_free(&p);
		goto done;
	}
	hj = NULL; /* the object owns it */
	out = iod_obj_xferpeer_to_json(&p);
	iod_obj_xferpeer_free(&p);
done:
	json_decref(hj);
	free(hex);
	return out;
}

int iod_xfer_peer_md(const json_t *v, uint8_t *buf, size_t cap, size_t *len, struct iod_err *e)
{
	struct iod_obj_xferpeer p;
	int rc = iod_obj_xferpeer_from_json(v, &p, e);
	if (!rc)
		rc = iod_obj_xferpeer_check(&p, e);
	if (!rc) {
		const char *hex = json_string_value(p.md);
		ssize_t n = iod_hex_decode(hex, strlen(hex), buf, cap);
		if (n < 0)
			rc = iod_err_set(e, (int)n, "xferpeer: \"md\" does not fit %zu bytes", cap);
		else
			*len = (size_t)n;
	}
	iod_obj_xferpeer_free(&p);
	return rc;
}

static int status_error(struct iod_api_response *r, const char *what, const char *name,
                        struct iod_err *e)
{
	const char *why = json_string_value(json_object_get(r->json, "error"));
	int rc = iod_err_set(e, -EIO, "xfer: %s xferpeer/%s: the control plane answered %d: %s",
	                     what, name, r->status, why ? why : "(no reason)");
	iod_api_response_free(r);
	return rc;
}

int iod_xfer_publish_api(struct iod_xfer *x, struct iod_api_client *c,
                         const struct iod_xfer_self *me, struct iod_err *e)
{
	uint8_t *md = malloc(IOD_XFER_MD_BYTES_MAX);
	size_t len = 0;
	char name[IOD_NAME_MAX + 16], path[IOD_NAME_MAX + 32];
	int rc;
	if (!md)
		return iod_err_set(e, -ENOMEM, "xfer: out of memory for the metadata blob");
	if ((rc = iod_xfer_md_get(x, md, IOD_XFER_MD_BYTES_MAX, &len, e))) {
		free(md);
		return rc;
	}
	json_t *obj = iod_xfer_peer_obj(me, iod_xfer_name(x), md, len);
	free(md);
	char *body = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!body)
		return iod_err_set(e, -EINVAL, "xfer: the xferpeer object of %s.%u does not fit",
		                   me->service ? me->service : "(no service)", me->ordinal);
	snprintf(name, sizeof(name), "%s.%u", me->service, me->ordinal);
	snprintf(path, sizeof(path), "/v1/xferpeer/%s", name);
	struct iod_api_response r;
	rc = iod_api_request(c, "PUT", path, "application/json", body, strlen(body), &r, e);
	free(body);
	if (rc)
		return rc;
	if (r.status / 100 != 2)
		return status_error(&r, "publishing", name, e);
	iod_api_response_free(&r);
	return 0;
}

static void nap_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* A blob that did not load (its process gone: an object a replica that
 * died left behind) is skipped until its replica publishes a new one. */
struct stale {
	char peer[IOD_NAME_MAX];       /* the "peer" of the object that failed, "" none */
	char why[IOD_ERR_MSG_MAX / 2]; /* its error */
};

int iod_xfer_peers_from_api(struct iod_xfer *x, struct iod_api_client *c, const char *service,
                            uint32_t n, uint32_t self, uint64_t deadline_ms,
                            char (*names)[IOD_NAME_MAX], struct iod_err *e)
{
	if (!n || n > IOD_XFER_PEERS_MAX || self >= n || !service)
		return iod_err_set(e, -EINVAL,
		                   "xfer: a group of %u peers (self %u): 1..%d, self below", n,
		                   self, IOD_XFER_PEERS_MAX);
	bool *have = calloc(n, sizeof(*have));
	struct stale *st = calloc(n, sizeof(*st));
	uint8_t *md = malloc(IOD_XFER_MD_BYTES_MAX);
	int rc = 0;
	if (!have || !md || !st) {
		free(have);
		free(st);
		free(md);
		return iod_err_set(e, -ENOMEM, "xfer: out of memory for %u peers", n);
	}
	uint64_t ms = deadline_ms ? deadline_ms : iod_xfer_deadline(x);
	uint64_t end = iod_clock_now_ns() + ms * 1000000ull;
	uint32_t left = n - 1;
	snprintf(names[self], IOD_NAME_MAX, "%s", iod_xfer_name(x));
	have[self] = true;
	unsigned pause = 10;
	while (left) {
		for (uint32_t i = 0; i < n && !rc; i++) {
			char path[IOD_NAME_MAX + 48];
			struct iod_api_response r;
			struct iod_err le = {0};
			size_t len = 0;
			if (have[i])
				continue;
			snprintf(path, sizeof(path), "/v1/xferpeer/%s.%u", service, i);
			if ((rc = iod_api_request(c, "GET", path, NULL, NULL, 0, &r, e)))
				break;
			if (r.status == 404) {
				iod_api_response_free(&r);
				continue;
			}
			if (r.status != 200) {
				char nm[IOD_NAME_MAX + 16];
				snprintf(nm, sizeof(nm), "%s.%u", service, i);
				rc = status_error(&r, "reading", nm, e);
				break;
			}
			/* GET /v1/KIND/NAME answers {"name", "rev", "value"} */
			const json_t *v = json_object_get(r.json, "value");
			const char *pn = iod_obj_peek_str(IOD_OBJ_KIND_XFERPEER, v ? v : r.json,
			                                  IOD_OBJ_XFERPEER_PEER);
			if (st[i].peer[0] && pn && !strcmp(pn, st[i].peer)) {
				iod_api_response_free(&r); /* the same dead blob: not yet */
				continue;
			}
			rc = iod_xfer_peer_md(v ? v : r.json, md, IOD_XFER_MD_BYTES_MAX, &len, e);
			if (rc) {
				iod_api_response_free(&r);
				iod_err_wrap(e, "xfer: peer %s.%u", service, i);
				break;
			}
			int lr = iod_xfer_md_load(x, md, len, names[i], &le);
			if (lr && lr != -ENOMEM && lr != -E2BIG && pn && pn[0]) {
				snprintf(st[i].peer, sizeof(st[i].peer), "%s", pn);
				snprintf(st[i].why, sizeof(st[i].why), "%s", le.msg);
				iod_api_response_free(&r);
				continue;
			}
			iod_api_response_free(&r);
			if (lr) {
				rc = iod_err_set(e, lr, "xfer: peer %s.%u: %s", service, i, le.msg);
				break;
			}
			have[i] = true;
			left--;
		}
		if (rc || !left)
			break;
		if (iod_clock_now_ns() >= end) {
			char missing[256] = "", why[IOD_ERR_MSG_MAX / 2] = "";
			for (uint32_t i = 0; i < n; i++) {
				if (!have[i] && strlen(missing) < sizeof(missing) - 16)
					snprintf(missing + strlen(missing),
					         sizeof(missing) - strlen(missing), "%s%u",
					         missing[0] ? "," : "", i);
				if (!have[i] && st[i].peer[0] && !why[0])
					snprintf(
					    why, sizeof(why),
					    "; ordinal %u's blob (peer %s) did not load, a replica "
					    "gone? %s",
					    i, st[i].peer, st[i].why);
			}
			rc = iod_err_set(e, -ETIMEDOUT,
			                 "xfer: %u of %u peers of %s had not published within %llu "
			                 "ms (ordinals %s missing: are those replicas running?)%s",
			                 left, n, service, (unsigned long long)ms, missing, why);
			break;
		}
		nap_ms(pause);
		pause = pause < 200 ? pause * 2 : 200;
	}
	free(have);
	free(st);
	free(md);
	return rc;
}

int iod_xfer_unpublish_api(struct iod_xfer *x, struct iod_api_client *c, const char *service,
                           uint32_t ordinal, struct iod_err *e)
{
	char path[IOD_NAME_MAX + 48];
	struct iod_api_response r;
	snprintf(path, sizeof(path), "/v1/xferpeer/%s.%u", service, ordinal);
	int rc = iod_api_request(c, "GET", path, NULL, NULL, 0, &r, e);
	if (rc)
		return rc;
	const json_t *v = json_object_get(r.json, "value");
	const char *pn = iod_obj_peek_str(IOD_OBJ_KIND_XFERPEER, v, IOD_OBJ_XFERPEER_PEER);
	bool ours = r.status == 200 && pn && !strcmp(pn, iod_xfer_name(x));
	iod_api_response_free(&r);
	if (!ours) /* gone, or already a successor's */
		return 0;
	rc = iod_api_request(c, "DELETE", path, NULL, NULL, 0, &r, e);
	if (rc)
		return rc;
	if (r.status / 100 != 2 && r.status != 404) {
		char nm[IOD_NAME_MAX + 16];
		snprintf(nm, sizeof(nm), "%s.%u", service, ordinal);
		return status_error(&r, "deleting", nm, e);
	}
	iod_api_response_free(&r);
	return 0;
}
