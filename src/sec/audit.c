/*
 * audit.c: the audit record of one API write or denied request (who, what,
 * when, result) as the JSON line the audit log and GET /v1/audit carry.
 *
 * Pure: the caller fills the record (time included); this only shapes it.
 * The file and the in-memory ring live with the server (src/api/).
 */
#include "iod/sec.h"

json_t *iod_sec_audit_to_json(const struct iod_sec_audit *a)
{
	json_t *j =
	    json_pack("{s:I, s:I, s:s, s:s, s:s, s:s, s:i, s:s}", "at_ms", (json_int_t)a->at_ms,
	              "seq", (json_int_t)a->seq, "who", a->who, "via", a->via, "method", a->method,
	              "path", a->path, "status", a->status, "remote", a->remote);
	if (j && a->detail[0])
		json_object_set_new(j, "detail", json_string(a->detail));
	return j;
}
