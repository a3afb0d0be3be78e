/*
 * test_agent_svid.c: the agent's SVID directory (src/agent/svid.c) keeps no
 * SVID of a service that left the node (issue 16): a pair the node was
 * issued (its OU names the node) for a service the view no longer places
 * there is removed; the pairs of services still here, and those another
 * agent of the host was issued (`iod up` shares one directory), stay; so
 * does a pair written or used in the last IOD_AGENT_SVID_INUSE_S.
 */
#include "harness.h"
#include "agent/internal.h"
#include "iod/agent_run.h"
#include "iod/sec.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

/* Write DIR/tenant/name.crt/.key: an SVID of tenant/name issued to node,
 * valid for an hour from nb_s. */
static int svid_at(const struct iod_sec_ca *ca, const char *dir, const char *tenant,
                   const char *name, const char *node, uint64_t nb_s)
{
	struct iod_sec_cert_req rq;
	struct iod_sec_pem pem;
	struct iod_err e = {0};
	char path[1024];
	memset(&rq, 0, sizeof(rq));
	rq.id.kind = IOD_SEC_KIND_SERVICE;
	snprintf(rq.id.name, sizeof(rq.id.name), "%s", name);
	snprintf(rq.id.tenant, sizeof(rq.id.tenant), "%s", tenant);
	snprintf(rq.node, sizeof(rq.node), "%s", node);
	rq.not_before_s = nb_s;
	rq.ttl_s = 3600;
	if (iod_sec_ca_issue(ca, &rq, &pem, &e))
		return -1;
	snprintf(path, sizeof(path), "%s/%s", dir, tenant);
	int rc = iod_sec_mkdirs(path, 0700, &e);
	snprintf(path, sizeof(path), "%s/%s/%s.crt", dir, tenant, name);
	rc = rc ? rc : iod_sec_write_file(path, pem.cert, strlen(pem.cert), 0600, &e);
	snprintf(path, sizeof(path), "%s/%s/%s.key", dir, tenant, name);
	rc = rc ? rc : iod_sec_write_file(path, pem.key, strlen(pem.key), 0600, &e);
	iod_sec_pem_free(&pem);
	return rc;
}

static int svid(const struct iod_sec_ca *ca, const char *dir, const char *tenant, const char *name,
                const char *node)
{
	return svid_at(ca, dir, tenant, name, node, 1000000);
}

static bool exists(const char *dir, const char *rel)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return access(path, F_OK) == 0;
}

TEST(svids_of_services_that_left_are_removed)
{
	static struct iod_agent_config c; /* large: not on the stack */
	struct iod_sec_ca *ca = NULL;
	struct iod_err e = {0};
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "node-1");
	snprintf(c.svid_dir, sizeof(c.svid_dir), "%s/svid", iod_test_tmpdir());
	CHECK_EQ(iod_sec_ca_create("local", 1000000, 3600 * 24, &ca, &e), 0);
	CHECK_EQ(svid(ca, c.svid_dir, "blue", "web", "node-1"), 0);
	CHECK_EQ(svid(ca, c.svid_dir, "blue", "gone", "node-1"), 0);
	CHECK_EQ(svid(ca, c.svid_dir, "red", "left", "node-1"), 0);
	CHECK_EQ(svid(ca, c.svid_dir, "blue", "theirs", "node-2"), 0);
	struct iod_mesh_svc_id want[1];
	/* an hour on: every pair written above is old */
	uint64_t later = (uint64_t)time(NULL) + 3600;
	memset(want, 0, sizeof(want));
	snprintf(want[0].tenant, sizeof(want[0].tenant), "blue");
	snprintf(want[0].service, sizeof(want[0].service), "web");
	CHECK_EQ(iod_agent_svids_prune(&c, want, 1, later, NULL), 2);
	CHECK(exists(c.svid_dir, "blue/web.crt") && exists(c.svid_dir, "blue/web.key"));
	CHECK(!exists(c.svid_dir, "blue/gone.crt") && !exists(c.svid_dir, "blue/gone.key"));
	CHECK(!exists(c.svid_dir, "red/left.crt") && !exists(c.svid_dir, "red/left.key"));
	/* node-2's, in the same directory: node-2's to remove */
	CHECK(exists(c.svid_dir, "blue/theirs.crt") && exists(c.svid_dir, "blue/theirs.key"));
	/* the node runs nothing now: its last SVID goes too; nothing twice */
	CHECK_EQ(iod_agent_svids_prune(&c, want, 0, later, NULL), 1);
	CHECK(!exists(c.svid_dir, "blue/web.crt"));
	CHECK_EQ(iod_agent_svids_prune(&c, want, 0, later, NULL), 0);
	CHECK(exists(c.svid_dir, "blue/theirs.crt"));
	iod_sec_ca_free(ca);
}

/* A pair written or used in the last IOD_AGENT_SVID_INUSE_S stays though the view lacks its
 * service: the mesh thread's view a moment behind the agent's replicas
 * removed blue/web between a replica's ensure and its copy (mesh_netns.sh,
 * "web.key: No such file or directory", restart: never kept it down). */
TEST(svid_in_use_is_not_pruned)
{
	static struct iod_agent_config c;
	struct iod_sec_ca *ca = NULL;
	struct iod_err e = {0};
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "node-1");
	snprintf(c.svid_dir, sizeof(c.svid_dir), "%s/svid-inuse", iod_test_tmpdir());
	CHECK_EQ(iod_sec_ca_create("local", 1000000, 3600 * 24, &ca, &e), 0);
	CHECK_EQ(svid(ca, c.svid_dir, "blue", "web", "node-1"), 0);
	uint64_t now = (uint64_t)time(NULL), retry = UINT64_MAX;
	CHECK_EQ(iod_agent_svids_prune(&c, NULL, 0, now, &retry), 0);
	/* when to look again: once its grace is over */
	CHECK(retry >= now + IOD_AGENT_SVID_INUSE_S - 2 && retry <= now + IOD_AGENT_SVID_INUSE_S);
	CHECK(exists(c.svid_dir, "blue/web.crt") && exists(c.svid_dir, "blue/web.key"));
	CHECK_EQ(iod_agent_svids_prune(&c, NULL, 0, now + IOD_AGENT_SVID_INUSE_S - 2, NULL), 0);
	CHECK_EQ(iod_agent_svids_prune(&c, NULL, 0, now + IOD_AGENT_SVID_INUSE_S + 2, NULL), 1);
	CHECK(!exists(c.svid_dir, "blue/web.crt") && !exists(c.svid_dir, "blue/web.key"));
	iod_sec_ca_free(ca);
}

/* The refresh decision for a running replica's copy, on an injected clock:
 * an SVID of an hour (backdated by the CA's margin) from t0. */
TEST(creds_refresh_due_at_two_thirds_with_a_newer_svid)
{
	uint64_t t0 = 1000000, na = t0 + 3600;
	uint64_t at = iod_sec_cert_renew_at(t0, na);
	CHECK(at > t0 && at < na);
	/* the agent's is the same one: nothing to give */
	CHECK(!iod_agent_creds_refresh_due(t0, na, t0, na, at + 1));
	/* a newer one, but the copy is young: keep it */
	CHECK(!iod_agent_creds_refresh_due(t0, na, at, at + 3600, at - 1));
	/* at two thirds: replace */
	CHECK(iod_agent_creds_refresh_due(t0, na, at, at + 3600, at));
	/* expired copy: replace */
	CHECK(iod_agent_creds_refresh_due(t0, na, at, at + 3600, na + 5));
	/* the agent's is expired as well, or not valid yet: no use */
	CHECK(!iod_agent_creds_refresh_due(t0, na, at, na + 1, na + 2));
	CHECK(!iod_agent_creds_refresh_due(t0, na, at + 600, at + 4200, at));
	/* an unreadable copy (no life) and a valid SVID: replace */
	CHECK(iod_agent_creds_refresh_due(0, 0, t0, na, t0 + 1));
}

static char *slurp(const char *path)
{
	char *t = NULL;
	struct iod_err e = {0};
	return iod_sec_read_file(path, false, &t, &e) ? NULL : t;
}

/* The files of a replica's copy change when due, stay a matching pair of
 * this CA, and keep their owner and modes. */
TEST(creds_copy_is_rewritten_when_due_and_stays_valid)
{
	struct iod_sec_ca *ca = NULL;
	struct iod_err e = {0};
	char sd[1024], dst[1100], p[1200];
	uint64_t t0 = 1000000;
	snprintf(sd, sizeof(sd), "%s/svid2", iod_test_tmpdir());
	snprintf(dst, sizeof(dst), "%s/creds", iod_test_tmpdir());
	CHECK_EQ(iod_sec_ca_create("local", t0 - 60, 3600 * 24, &ca, &e), 0);
	snprintf(p, sizeof(p), "%s/ca.crt", sd);
	CHECK_EQ(iod_sec_mkdirs(sd, 0700, &e), 0);
	CHECK_EQ(iod_sec_write_file(p, iod_sec_ca_cert_pem(ca), strlen(iod_sec_ca_cert_pem(ca)),
	                            0644, &e),
	         0);
	CHECK_EQ(svid_at(ca, sd, "blue", "ps", "node-1", t0), 0);
	bool copied = true;
	/* no copy yet (the replica has not started): nothing */
	CHECK_EQ(iod_agent_svid_refresh_copy(sd, "blue", "ps", dst, t0 + 10, &copied, &e), 0);
	CHECK(!copied);
	CHECK_EQ(
	    iod_agent_svid_copy(sd, "blue", "ps", dst, (uint32_t)getuid(), (uint32_t)getgid(), &e),
	    0);
	snprintf(p, sizeof(p), "%s/svid.crt", dst);
	char *old_crt = slurp(p);
	CHECK(old_crt != NULL);
	/* the agent renews its SVID at two thirds; the copy follows then */
	uint64_t at = iod_sec_cert_renew_at(t0 - IOD_SEC_CERT_BACKDATE_S, t0 + 3600);
	CHECK_EQ(svid_at(ca, sd, "blue", "ps", "node-1", at - 5), 0);
	CHECK_EQ(iod_agent_svid_refresh_copy(sd, "blue", "ps", dst, at - 1, &copied, &e), 0);
	CHECK(!copied);
	char *same = slurp(p);
	CHECK(same && !strcmp(same, old_crt));
	CHECK_MSG(iod_agent_svid_refresh_copy(sd, "blue", "ps", dst, at, &copied, &e) == 0, "%s",
	          e.msg);
	CHECK(copied);
	char *new_crt = slurp(p);
	CHECK(new_crt && strcmp(new_crt, old_crt));
	/* a matching pair of this CA, valid now, with the replica's modes */
	char pk[1200];
	snprintf(pk, sizeof(pk), "%s/svid.key", dst);
	char *key = slurp(pk);
	struct iod_sec_tls_creds *tc = NULL;
	CHECK_MSG(key && iod_sec_tls_creds_new(iod_sec_ca_cert_pem(ca), new_crt, key, &tc, &e) == 0,
	          "%s", e.msg);
	void *der = NULL;
	size_t dl = 0;
	struct iod_sec_cert_info info;
	CHECK_EQ(iod_sec_cert_der(new_crt, &der, &dl), 0);
	CHECK_MSG(iod_sec_ca_verify_der(ca, der, dl, at + 1, &info, &e) == 0, "%s", e.msg);
	CHECK_STR(info.id.name, "ps");
	CHECK(!info.server_auth && info.client_auth);
	struct stat st;
	CHECK_EQ(stat(pk, &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0400);
	CHECK_EQ(stat(dst, &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0500);
	/* and not twice */
	CHECK_EQ(iod_agent_svid_refresh_copy(sd, "blue", "ps", dst, at + 2, &copied, &e), 0);
	CHECK(!copied);
	free(der);
	iod_sec_tls_creds_free(tc);
	free(key);
	free(new_crt);
	free(same);
	free(old_crt);
	iod_sec_ca_free(ca);
}
