/*
 * commit.c: committing checkpoint manifests through Raft (docs/storage.md).
 * The shell between libiod-ckpt's commit hook and the control plane: once a
 * save is durable on this node, the replication core (src/storage/replica.c)
 * says whether the copies that hold it meet the write quorum, and only then
 * is a Checkpoint object (src/state/objects.c) PUT through the API, which
 * commits it through Raft. A checkpoint without that object is invisible to
 * a restore elsewhere, so no torn checkpoint is ever visible to the cluster.
 *
 * Copies on peers (src/storage/peer.c) are reported by the store; without
 * peers the primary is the only copy, so replicas > 1 with a quorum of 2 is
 * refused here with that reason, never committed as if replicated.
 */
#include "iod/api.h"
#include "iod/ckpt.h"
#include "iod/objects.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void iod_ckpt_raft_name(const char *replica, uint32_t rank, uint64_t step, char *out, size_t cap)
{
	snprintf(out, cap, "%s.r%u.s%" PRIu64, replica, rank, step);
}

/* PUT body (malloc'd, freed here; NULL: out of memory) to path; an answer
 * other than 2xx is -EIO with the control plane's reason. */
static int put_checkpoint(struct iod_api_client *api, const char *path, const char *name,
                          char *body, struct iod_err *e)
{
	if (!body)
		return iod_err_set(e, -ENOMEM, "out of memory for a checkpoint object");
	struct iod_api_response resp;
	int rc =
	    iod_api_request(api, "PUT", path, "application/json", body, strlen(body), &resp, e);
	free(body);
	if (rc)
		return rc;
	if (resp.status / 100 != 2) {
		const char *why = json_string_value(json_object_get(resp.json, "error"));
		rc = iod_err_set(e, -EIO, "checkpoint %s: the control plane answered %d: %s", name,
		                 resp.status, why ? why : "(no reason)");
	}
	iod_api_response_free(&resp);
	return rc;
}

int iod_ckpt_raft_commit(void *ctx, const struct iod_ckpt_commit *k, struct iod_err *e)
{
	const struct iod_ckpt_raft *r = ctx;
	struct iod_obj_checkpoint *o = malloc(sizeof(*o));
	struct iod_stor_health h;
	/* the primary holds every chunk (the worker wrote them); peers that took
	 * the manifest hold every chunk too (the peer checks them first) */
	uint8_t good = 1;
	struct iod_stor_rview v = {.size = r->replicas ? r->replicas : 1,
	                           .min_size = r->min_size ? r->min_size : 1,
	                           .copies_n = 1 + k->peers_n,
	                           .up = {true},
	                           .good = &good,
	                           .chunks_n = 1};
	for (uint32_t i = 0; i < k->peers_n; i++) {
		v.up[i + 1] = true;
		good |= (uint8_t)(k->peer_ok[i] ? 1u << (i + 1) : 0);
	}
	if (v.copies_n > v.size)
		v.size = v.copies_n;
	char name[IOD_NAME_MAX + 48], hex[24], health[64], path[IOD_NAME_MAX + 80];
	int rc;
	if (!o)
		return iod_err_set(e, -ENOMEM, "out of memory for a checkpoint object");
	if ((rc = iod_stor_health_get(&v, &h, e))) {
		free(o);
		return rc;
	}
	if (!h.commit_ok) {
		free(o);
		return iod_err_set(e, -EAGAIN,
		                   "checkpoint step %" PRIu64 ": %u of %u copies hold its chunks, "
		                   "the write quorum is %u (%s); not committed",
		                   k->step, h.copies_min, v.size, v.min_size,
		                   k->peers_n ? "a peer did not take it" : "no peers configured");
	}
	iod_ckpt_raft_name(r->replica, k->rank, k->step, name, sizeof(name));
	snprintf(hex, sizeof(hex), "%016" PRIx64, k->manifest_xxh3);
	iod_stor_health_name(h.flags, health, sizeof(health));
	iod_obj_checkpoint_init(o);
	json_t *copies = json_pack("[{s:s, s:b}]", "node", r->node, "ok", 1);
	for (uint32_t i = 0; copies && i < k->peers_n; i++)
		json_array_append_new(
		    copies, json_pack("{s:s, s:b}", "node", k->peers[i], "ok", k->peer_ok[i]));
	if (iod_obj_checkpoint_set_str(o, IOD_OBJ_CHECKPOINT_SERVICE, r->service) ||
	    iod_obj_checkpoint_set_str(o, IOD_OBJ_CHECKPOINT_REPLICA, r->replica) ||
	    iod_obj_checkpoint_set_str(o, IOD_OBJ_CHECKPOINT_NODE, r->node) ||
	    iod_obj_checkpoint_set_int(o, IOD_OBJ_CHECKPOINT_RANK, k->rank) ||
	    iod_obj_checkpoint_set_int(o, IOD_OBJ_CHECKPOINT_STEP, (int64_t)k->step) ||
	    iod_obj_checkpoint_set_int(o, IOD_OBJ_CHECKPOINT_BYTES, (int64_t)k->bytes) ||
	    iod_obj_checkpoint_set_int(o, IOD_OBJ_CHECKPOINT_CHUNKS, k->chunks) ||
	    iod_obj_checkpoint_set_int(o, IOD_OBJ_CHECKPOINT_CHUNK_BYTES, k->chunk_bytes) ||
	    iod_obj_checkpoint_set_str(o, IOD_OBJ_CHECKPOINT_MANIFEST_XXH3, hex) ||
	    iod_obj_checkpoint_set_str(o, IOD_OBJ_CHECKPOINT_TIER, k->medium) ||
	    iod_obj_checkpoint_set_int(o, IOD_OBJ_CHECKPOINT_REPLICAS, v.size) ||
	    iod_obj_checkpoint_set_int(o, IOD_OBJ_CHECKPOINT_MIN_SIZE, v.min_size) ||
	    iod_obj_checkpoint_set_str(o, IOD_OBJ_CHECKPOINT_HEALTH, health) || !copies ||
	    iod_obj_checkpoint_set_json(o, IOD_OBJ_CHECKPOINT_COPIES, copies)) {
		iod_obj_checkpoint_free(o);
		free(o);
		return iod_err_set(e, -EINVAL, "checkpoint %s: a field does not fit", name);
	}
	json_t *j = iod_obj_checkpoint_to_json(o);
	char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	iod_obj_checkpoint_free(o);
	free(o);
	snprintf(path, sizeof(path), "/v1/checkpoint/%s", name);
	return put_checkpoint(r->api, path, name, body, e);
}

/* A copy of the stored value of replica's checkpoint (rank, step), to change
 * a few fields of and put back; name and path for the put. */
static int get_value(struct iod_api_client *api, const char *replica, uint32_t rank, uint64_t step,
                     char *name, size_t name_len, char *path, size_t path_len, json_t **out,
                     struct iod_err *e)
{
	struct iod_api_response resp;
	*out = NULL;
	iod_ckpt_raft_name(replica, rank, step, name, name_len);
	snprintf(path, path_len, "/v1/checkpoint/%s", name);
	int rc = iod_api_request(api, "GET", path, NULL, NULL, 0, &resp, e);
	if (rc)
		return rc;
	if (resp.status != 200) {
		rc = iod_err_set(e, resp.status == 404 ? -ENOENT : -EIO,
		                 "checkpoint %s: the control plane answered %d", name, resp.status);
		iod_api_response_free(&resp);
		return rc;
	}
	json_t *v = json_deep_copy(json_object_get(resp.json, "value"));
	iod_api_response_free(&resp);
	if (!json_is_object(v)) {
		json_decref(v);
		return iod_err_set(e, -EIO, "checkpoint %s: the control plane sent no value", name);
	}
	*out = v;
	return 0;
}

int iod_ckpt_raft_recopied(const struct iod_ckpt_raft *r, uint32_t rank, uint64_t step,
                           const char *const *nodes, uint32_t n, const char *health,
                           struct iod_err *e)
{
	char name[IOD_NAME_MAX + 48], path[IOD_NAME_MAX + 80];
	json_t *v;
	/* the stored value, only copies, health and node changed */
	int rc = get_value(r->api, r->replica, rank, step, name, sizeof(name), path, sizeof(path),
	                   &v, e);
	if (rc)
		return rc;
	json_t *copies = json_array();
	for (uint32_t i = 0; copies && i < n; i++)
		json_array_append_new(copies, json_pack("{s:s, s:b}", "node", nodes[i], "ok", 1));
	if (!copies) {
		json_decref(v);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	json_object_set_new(v, iod_obj_key(IOD_OBJ_KIND_CHECKPOINT, IOD_OBJ_CHECKPOINT_COPIES),
	                    copies);
	json_object_set_new(v, iod_obj_key(IOD_OBJ_KIND_CHECKPOINT, IOD_OBJ_CHECKPOINT_HEALTH),
	                    json_string(health));
	json_object_set_new(v, iod_obj_key(IOD_OBJ_KIND_CHECKPOINT, IOD_OBJ_CHECKPOINT_NODE),
	                    json_string(r->node));
	char *body = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	return put_checkpoint(r->api, path, name, body, e);
}

int iod_ckpt_raft_latest(struct iod_api_client *api, const char *replica, uint32_t rank,
                         uint64_t *step, struct iod_err *e)
{
	struct iod_api_response resp;
	bool found = false;
	*step = 0;
	/* a replica keeps a handful of checkpoints (IOD_STOR_CKPTS_MAX): one page */
	int rc = iod_api_request(api, "GET", "/v1/checkpoints?limit=1000", NULL, NULL, 0, &resp, e);
	if (rc)
		return rc;
	if (resp.status != 200) {
		iod_api_response_free(&resp);
		return iod_err_set(e, -EIO, "listing checkpoints: the control plane answered %d",
		                   resp.status);
	}
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(resp.json, "items"), i, x)
	{
		const json_t *v = json_object_get(x, "value");
		const char *rep =
		    iod_obj_peek_str(IOD_OBJ_KIND_CHECKPOINT, v, IOD_OBJ_CHECKPOINT_REPLICA);
		int64_t rk = 0, st = 0;
		if (!rep || strcmp(rep, replica) ||
		    iod_obj_peek_int(IOD_OBJ_KIND_CHECKPOINT, v, IOD_OBJ_CHECKPOINT_STEP, &st) ||
		    (iod_obj_peek_int(IOD_OBJ_KIND_CHECKPOINT, v, IOD_OBJ_CHECKPOINT_RANK, &rk) ==
		         0 &&
		     (uint64_t)rk != rank))
			continue;
		if (!found || (uint64_t)st > *step)
			*step = (uint64_t)st;
		found = true;
	}
	iod_api_response_free(&resp);
	return found ? 0
	             : iod_err_set(e, -ENOENT, "no committed checkpoint of replica %s rank %u",
	                           replica, rank);
}

int iod_ckpt_raft_scrub(struct iod_ckpt_raft *raft, const struct iod_ckpt_scrub_result *s,
                        struct iod_err *e)
{
	char name[IOD_NAME_MAX + 48], path[IOD_NAME_MAX + 80];
	json_t *v;
	/* the stored value, only scrub and scrubbed_ms changed */
	int rc = get_value(raft->api, raft->replica, s->rank, s->step, name, sizeof(name), path,
	                   sizeof(path), &v, e);
	if (rc)
		return rc;
	json_object_set_new(v, iod_obj_key(IOD_OBJ_KIND_CHECKPOINT, IOD_OBJ_CHECKPOINT_SCRUB),
	                    json_string(s->status));
	json_object_set_new(v, iod_obj_key(IOD_OBJ_KIND_CHECKPOINT, IOD_OBJ_CHECKPOINT_SCRUBBED_MS),
	                    json_integer((json_int_t)s->at_ms));
	char *body = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	return put_checkpoint(raft->api, path, name, body, e);
}

int iod_ckpt_raft_evict(void *ctx, uint32_t rank, uint64_t step, struct iod_err *e)
{
	const struct iod_ckpt_raft *raft = ctx;
	char name[IOD_NAME_MAX + 48], path[IOD_NAME_MAX + 80];
	struct iod_api_response resp;
	iod_ckpt_raft_name(raft->replica, rank, step, name, sizeof(name));
	snprintf(path, sizeof(path), "/v1/checkpoint/%s", name);
	int rc = iod_api_request(raft->api, "DELETE", path, NULL, NULL, 0, &resp, e);
	if (rc)
		return rc;
	if (resp.status / 100 != 2 && resp.status != 404)
		rc = iod_err_set(e, -EIO,
		                 "checkpoint %s: deleting it, the control plane answered %d", name,
		                 resp.status);
	iod_api_response_free(&resp);
	return rc;
}
