/*
 * recover.c: `iod server --recover-from-peers`, rebuilding a server whose
 * log was refused (damaged) from a copy of a peer's durable log.
 *
 * A server that refused to start must not simply be started empty: an
 * empty log can vote, and with another damaged or lagging server it can
 * elect a leader that lacks acknowledged writes. Instead, explicitly asked,
 * it asks every peer named in --peers, over the Raft transport, for a copy
 * of its durable log (the newest snapshot plus every stored entry), takes
 * the most up-to-date one (last term, then last index: Raft's own
 * comparison), moves its own log files to DATA_DIR/damaged-<time>/ for
 * inspection, and writes the copy as its log, at a term above every term it
 * or the peers may have voted in, voting for itself, so it can never vote
 * twice in a term. It then starts as usual. With 2 of 3 servers damaged the
 * healthy one holds every write it acknowledged, so nothing acknowledged is
 * lost. It never decides anything about Raft beyond choosing the copy.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FETCH_TIMEOUT_MS 30000
/* Peers are asked again for this long while none answers: servers started
 * together may not be listening yet. */
#define RECOVER_WAIT_MS 30000
#define RECOVER_RETRY_MS 250

int iod_raft_member_recover_from_peers(const struct iod_server_config *c, struct iod_err *e)
{
	unsigned char *best = NULL;
	size_t best_len = 0;
	uint64_t best_term = 0, best_index = 0, max_term = 0;
	uint64_t best_id = 0;
	char errs[IOD_ERR_MSG_MAX] = "";
	size_t at = 0;
	int rv;

	if (!c->peers_n)
		return iod_err_set(
		    e, -EINVAL,
		    "--recover-from-peers needs --peers (where the other servers' Raft "
		    "ports are)");
	uint64_t give_up = iod_time_unix_ns() + (uint64_t)RECOVER_WAIT_MS * IOD_NS_PER_MS;
again:
	at = 0;
	errs[0] = 0;
	for (uint32_t i = 0; i < c->peers_n; i++) {
		const struct iod_server_peer *p = &c->peers[i];
		unsigned char *b = NULL;
		size_t len = 0;
		uint64_t term, li, lt;
		struct iod_err fe = {0};
		if (p->id == c->id)
			continue;
		rv = iod_rio_fetch_log(p->raft_addr, c->id, c->raft_addr, c->raft_tls,
		                       FETCH_TIMEOUT_MS, &b, &len, &fe);
		if (!rv && iod_wal_copy_summary(b, len, &term, &li, &lt))
			rv = iod_err_set(&fe, -EPROTO, "%s: unreadable log copy", p->raft_addr);
		if (rv) {
			IOD_INFO("raft", "recover: server %llu: %s", (unsigned long long)p->id,
			         fe.msg);
			at += (size_t)snprintf(errs + at, at < sizeof(errs) ? sizeof(errs) - at : 0,
			                       "%s%llu: %s", at ? "; " : "",
			                       (unsigned long long)p->id, fe.msg);
			at = IOD_MIN(at, sizeof(errs));
			free(b);
			continue;
		}
		IOD_INFO("raft",
		         "recover: server %llu holds the log to index %llu (term %llu), %zu bytes",
		         (unsigned long long)p->id, (unsigned long long)li, (unsigned long long)lt,
		         len);
		max_term = IOD_MAX(max_term, term);
		if (!best || lt > best_term || (lt == best_term && li > best_index)) {
			free(best);
			best = b;
			best_len = len;
			best_term = lt;
			best_index = li;
			best_id = p->id;
		} else {
			free(b);
		}
	}
	if (!best && iod_time_unix_ns() < give_up) {
		struct timespec ts = {0, RECOVER_RETRY_MS * 1000000L};
		nanosleep(&ts, NULL);
		goto again;
	}
	if (!best)
		return iod_err_set(
		    e, -EHOSTUNREACH,
		    "--recover-from-peers: no peer sent its log (%s); start at least one "
		    "healthy server first",
		    errs);
	uint64_t own = iod_wal_peek_term(c->data_dir);
	char where[IOD_PATH_MAX + 64];
	if ((rv = iod_wal_set_aside(c->data_dir, where, sizeof(where), e))) {
		free(best);
		return rv;
	}
	rv = iod_wal_rebuild(c->data_dir, best, best_len, c->id, IOD_MAX(own, max_term), e);
	free(best);
	if (rv)
		return rv;
	IOD_WARN(
	    "raft",
	    "recover: the log in %s was rebuilt from server %llu (to index %llu, term %llu)%s%s",
	    c->data_dir, (unsigned long long)best_id, (unsigned long long)best_index,
	    (unsigned long long)best_term, where[0] ? "; the old files are in " : "", where);
	return 0;
}
