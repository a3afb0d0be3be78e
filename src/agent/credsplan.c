/*
 * credsplan.c: when a running replica's own copy of its SVID
 * (<replica dir>/creds, docs/storage.md "Replica credentials") is
 * refreshed. The copy is made at start; without a refresh it would expire
 * with the SVID (1 h) while the replica runs on.
 *
 * Pure: the caller reads both certificates and the clock. Never does I/O.
 */
#include "internal.h"
#include "iod/sec.h"

bool iod_agent_creds_refresh_due(uint64_t copy_not_before_s, uint64_t copy_not_after_s,
                                 uint64_t src_not_before_s, uint64_t src_not_after_s,
                                 uint64_t now_s)
{
	/* the copy at two thirds of its life (the rotation point of every
	 * iod certificate), or already past it, and a newer SVID to give */
	bool due = iod_sec_cert_renew_due(copy_not_before_s, copy_not_after_s, now_s) ||
	           now_s >= copy_not_after_s;
	bool newer = src_not_after_s > copy_not_after_s && src_not_before_s <= now_s + 60 &&
	             now_s < src_not_after_s;
	return due && newer;
}
