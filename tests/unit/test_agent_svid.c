/*
 * test_agent_svid.c: the agent's SVID directory (src/agent/svid.c) keeps no
 * SVID of a service that left the node (issue 16): a pair the node was
 * issued (its OU names the node) for a service the view no longer places
 * there is removed; the pairs of services still here, and those another
 * agent of the host was issued (`iod up` shares one directory), stay; so
 * does a pair written or used in the last minute.
 */
#include "harness.h"
#include "agent/internal.h"
#include "iod/agent_run.h"
#include "iod/sec.h"

#include <stdlib.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

/* Write DIR/tenant/name.crt/.key: an SVID of tenant/name issued to node. */
static int svid(const struct iod_sec_ca *ca, const char *dir, const char *tenant, const char *name,
                const char *node)
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
	rq.not_before_s = 1000000;
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
	CHECK_EQ(iod_agent_svids_prune(&c, want, 1, later), 2);
	CHECK(exists(c.svid_dir, "blue/web.crt") && exists(c.svid_dir, "blue/web.key"));
	CHECK(!exists(c.svid_dir, "blue/gone.crt") && !exists(c.svid_dir, "blue/gone.key"));
	CHECK(!exists(c.svid_dir, "red/left.crt") && !exists(c.svid_dir, "red/left.key"));
	/* node-2's, in the same directory: node-2's to remove */
	CHECK(exists(c.svid_dir, "blue/theirs.crt") && exists(c.svid_dir, "blue/theirs.key"));
	/* the node runs nothing now: its last SVID goes too; nothing twice */
	CHECK_EQ(iod_agent_svids_prune(&c, want, 0, later), 1);
	CHECK(!exists(c.svid_dir, "blue/web.crt"));
	CHECK_EQ(iod_agent_svids_prune(&c, want, 0, later), 0);
	CHECK(exists(c.svid_dir, "blue/theirs.crt"));
	iod_sec_ca_free(ca);
}

/* A pair written or used in the last minute stays though the view lacks its
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
	uint64_t now = (uint64_t)time(NULL);
	CHECK_EQ(iod_agent_svids_prune(&c, NULL, 0, now), 0);
	CHECK(exists(c.svid_dir, "blue/web.crt") && exists(c.svid_dir, "blue/web.key"));
	CHECK_EQ(iod_agent_svids_prune(&c, NULL, 0, now + IOD_AGENT_SVID_INUSE_S - 2), 0);
	CHECK_EQ(iod_agent_svids_prune(&c, NULL, 0, now + IOD_AGENT_SVID_INUSE_S + 2), 1);
	CHECK(!exists(c.svid_dir, "blue/web.crt") && !exists(c.svid_dir, "blue/web.key"));
	iod_sec_ca_free(ca);
}
