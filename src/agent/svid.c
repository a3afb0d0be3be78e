/*
 * svid.c: the SVIDs of this node's services, issued and rotated by the
 * agent itself (SPIRE's agent role, in the agent): for every service with
 * a replica on this node, spiffe://<cluster>/ns/<tenant>/svc/<service>,
 * signed by the cluster CA through the API (POST /v1/certificates, kind
 * "service") with the node's own certificate as the credential. The
 * server signs only for a service that has a replica on this node, in its
 * own tenant (iod_sec_authorize), so a node speaks for the services it
 * runs and for no one else. The key is made here and never leaves the
 * node.
 *
 * Files: DIR/ca.crt and DIR/<tenant>/<service>.key/.crt (0600, DIR 0700),
 * the layout the mesh proxy reads (proxy_mtls.c re-reads a pair when its
 * certificate changes, and refuses a half-written pair until both match).
 * The file is the state: a pair that is this identity's and not yet at two
 * thirds of its life (iod_sec_cert_renew_at) is kept, so a restart, or
 * another agent of the same host writing the same directory (`iod up`),
 * issues nothing new.
 *
 * A service that leaves the node leaves no SVID behind: a pair this node
 * was issued (the certificate's OU names the node) for a service the view
 * no longer places here is removed (iod_agent_svids_prune), so neither the
 * proxy nor anyone who reads the directory later can present it. Pairs
 * another agent of the host was issued are that agent's to remove.
 *
 * Shell code (files, the API); when is iod_sec_cert_renew_at's.
 */
#include "internal.h"
#include "iod/api.h"
#include "iod/sec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Does path hold a valid certificate of tenant/service? Its renewal time. */
static bool have_svid(const char *path, const struct iod_mesh_svc_id *id, uint64_t now_s,
                      uint64_t *renew_at_s)
{
	struct iod_sec_cert_info info;
	struct iod_err e = {0};
	char *pem = NULL;
	bool ok = false;
	if (!iod_sec_read_file(path, false, &pem, &e) &&
	    !iod_sec_cert_inspect(pem, strlen(pem), &info, &e)) {
		*renew_at_s = iod_sec_cert_renew_at(info.not_before_s, info.not_after_s);
		ok = info.id.kind == IOD_SEC_KIND_SERVICE && !strcmp(info.id.name, id->service) &&
		     !strcmp(info.id.tenant, id->tenant) && now_s < *renew_at_s;
	}
	free(pem);
	return ok;
}

/* The SVID of id from the cluster: *cert and *key (malloc'd PEM). */
static int request_svid(const struct iod_agent_config *c, struct iod_api_client *cl,
                        const struct iod_mesh_svc_id *id, char **cert, char **key,
                        struct iod_err *e)
{
	struct iod_sec_pem pem;
	struct iod_api_response r = {0};
	const char *crt = NULL;
	int rc;

	*cert = *key = NULL;
	if ((rc = iod_sec_csr_create(id->service, &pem, e)))
		return rc;
	json_t *body = json_pack("{s:s, s:s, s:s, s:s}", "kind", "service", "name", id->service,
	                         "tenant", id->tenant, "csr", pem.cert);
	if (body && c->svid_ttl_s)
		json_object_set_new(body, "ttl_s", json_integer((json_int_t)c->svid_ttl_s));
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	rc = text ? iod_api_request(cl, "POST", "/v1/certificates", "application/json", text,
	                            strlen(text), &r, e)
	          : iod_err_set(e, -ENOMEM, "out of memory");
	free(text);
	if (!rc && (r.status != 200 || iod_json_get_str(r.json, "cert", &crt)))
		rc = iod_err_set(e, r.status == 401 || r.status == 403 ? -EACCES : -EIO,
		                 "the cluster refused the SVID of %s/%s: %s (HTTP %d)", id->tenant,
		                 id->service, iod_api_error_text(&r), r.status);
	if (!rc && !(*cert = strdup(crt)))
		rc = iod_err_set(e, -ENOMEM, "out of memory");
	if (!rc) {
		*key = pem.key;
		pem.key = NULL;
	}
	iod_api_response_free(&r);
	iod_sec_pem_free(&pem);
	return rc;
}

/* DIR/ca.crt: the CA the node trusts (its own credentials'), when it differs. */
static int write_ca(const struct iod_agent_config *c, struct iod_err *e)
{
	char path[IOD_AGENT_PATH_MAX + 16], *old = NULL;
	struct iod_err ig = {0};
	const char *ca = iod_sec_ca_cert_pem(iod_sec_tls_creds_ca(c->creds));
	snprintf(path, sizeof(path), "%s/ca.crt", c->svid_dir);
	bool same = !iod_sec_read_file(path, false, &old, &ig) && !strcmp(old, ca);
	free(old);
	return same ? 0 : iod_sec_write_file(path, ca, strlen(ca), 0600, e);
}

/* Issue and write one SVID: key first, then the certificate. */
static int issue(const struct iod_agent_config *c, struct iod_api_client *cl,
                 const struct iod_mesh_svc_id *id, const char *base, struct iod_err *e)
{
	char dir[IOD_AGENT_PATH_MAX + IOD_NAME_MAX + 2], path[sizeof(dir) + IOD_NAME_MAX + 8];
	char *cert = NULL, *key = NULL;
	snprintf(dir, sizeof(dir), "%s/%s", c->svid_dir, id->tenant);
	int rc = iod_sec_mkdirs(dir, 0700, e);
	if (!rc)
		rc = request_svid(c, cl, id, &cert, &key, e);
	if (!rc) {
		snprintf(path, sizeof(path), "%s.key", base);
		rc = iod_sec_write_file(path, key, strlen(key), 0600, e);
	}
	if (!rc) {
		snprintf(path, sizeof(path), "%s.crt", base);
		rc = iod_sec_write_file(path, cert, strlen(cert), 0600, e);
	}
	free(cert);
	if (key) {
		memset(key, 0, strlen(key));
		free(key);
	}
	return rc;
}

/* Is tenant/service in want[0..n)? */
static bool wanted(const struct iod_mesh_svc_id *want, uint32_t n, const char *tenant,
                   const char *service)
{
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(want[i].tenant, tenant) && !strcmp(want[i].service, service))
			return true;
	return false;
}

/* Remove DIR/tenant's pairs issued to this node for services not wanted. */
static uint32_t prune_tenant(const struct iod_agent_config *c, const char *tenant,
                             const struct iod_mesh_svc_id *want, uint32_t n, uint64_t now_s,
                             uint64_t *retry_s)
{
	char dir[IOD_AGENT_PATH_MAX + IOD_NAME_MAX + 2];
	uint32_t removed = 0;
	snprintf(dir, sizeof(dir), "%s/%s", c->svid_dir, tenant);
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char svc[IOD_NAME_MAX], path[sizeof(dir) + IOD_NAME_MAX + 8], *pem = NULL;
		struct iod_sec_cert_info info;
		struct iod_err e = {0};
		size_t l = strlen(de->d_name);
		if (l <= 4 || l - 4 >= sizeof(svc) || strcmp(de->d_name + l - 4, ".crt"))
			continue;
		memcpy(svc, de->d_name, l - 4);
		svc[l - 4] = 0;
		if (wanted(want, n, tenant, svc))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		bool ours = !iod_sec_read_file(path, false, &pem, &e) &&
		            !iod_sec_cert_inspect(pem, strlen(pem), &info, &e) &&
		            info.id.kind == IOD_SEC_KIND_SERVICE && !strcmp(info.node, c->name);
		free(pem);
		if (!ours)
			continue;
		/* written or used (iod_agent_svid_ensure, a replica's start) in
		 * the last IOD_AGENT_SVID_INUSE_S: kept, and looked at again
		 * then. The proxy's view and the agent's replicas are two
		 * threads' views; one a moment behind the other removed a pair
		 * between a replica's ensure and its copy */
		struct stat st;
		if (!stat(path, &st) && (uint64_t)st.st_mtime + IOD_AGENT_SVID_INUSE_S > now_s) {
			if (retry_s)
				*retry_s = IOD_MIN(*retry_s,
				                   (uint64_t)st.st_mtime + IOD_AGENT_SVID_INUSE_S);
			continue;
		}
		/* the certificate first: a key without one is never loaded */
		if (unlink(path) && errno != ENOENT) {
			IOD_WARN("agent", "node %s: removing %s: %s", c->name, path,
			         strerror(errno));
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s.key", dir, svc);
		if (unlink(path) && errno != ENOENT)
			IOD_WARN("agent", "node %s: removing %s: %s", c->name, path,
			         strerror(errno));
		IOD_INFO("agent", "node %s: SVID of %s/%s removed: the service left the node",
		         c->name, tenant, svc);
		removed++;
	}
	closedir(d);
	return removed;
}

uint32_t iod_agent_svids_prune(const struct iod_agent_config *c, const struct iod_mesh_svc_id *want,
                               uint32_t n, uint64_t now_s, uint64_t *retry_s)
{
	DIR *d = opendir(c->svid_dir);
	struct dirent *de;
	uint32_t removed = 0;
	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && iod_sec_name_valid(de->d_name) &&
		    strlen(de->d_name) < IOD_NAME_MAX)
			removed += prune_tenant(c, de->d_name, want, n, now_s, retry_s);
	closedir(d);
	return removed;
}

/* One service's SVID in c->svid_dir (the directory and CA written): kept
 * when it is valid and not due for renewal, else issued. *readable: it
 * reads back valid, *at then its renewal time. The issue's error, or 0. */
static int svid_one(const struct iod_agent_config *c, struct iod_api_client *cl,
                    const struct iod_mesh_svc_id *id, uint64_t now_s, uint64_t *at, bool *issued,
                    bool *readable, struct iod_err *e)
{
	char base[IOD_AGENT_PATH_MAX + 2 * IOD_NAME_MAX + 4], crt[sizeof(base) + 8];
	*issued = false;
	snprintf(base, sizeof(base), "%s/%s/%s", c->svid_dir, id->tenant, id->service);
	snprintf(crt, sizeof(crt), "%s.crt", base);
	if ((*readable = have_svid(crt, id, now_s, at))) {
		(void)utimensat(AT_FDCWD, crt, NULL, 0); /* in use: prune keeps it */
		return 0;
	}
	int rc = issue(c, cl, id, base, e);
	if (rc)
		return rc;
	*issued = true;
	*readable = have_svid(crt, id, now_s, at);
	IOD_INFO("agent", "node %s: SVID spiffe://%s/ns/%s/svc/%s issued (%s)", c->name,
	         iod_sec_ca_cluster(iod_sec_tls_creds_ca(c->creds)), id->tenant, id->service, crt);
	return 0;
}

int iod_agent_svid_ensure(const struct iod_agent_config *c, struct iod_api_client *cl,
                          const struct iod_mesh_svc_id *id, uint64_t now_s, uint64_t *renew_at_s,
                          bool *issued, struct iod_err *e)
{
	bool readable = false;
	int rc;
	*issued = false;
	*renew_at_s = now_s + 2;
	if (!c->creds)
		return iod_err_set(e, -EACCES, "node %s has no node certificate to ask with",
		                   c->name);
	if ((rc = iod_sec_mkdirs(c->svid_dir, 0700, e)) || (rc = write_ca(c, e)) ||
	    (rc = svid_one(c, cl, id, now_s, renew_at_s, issued, &readable, e)))
		return rc;
	if (!readable)
		return iod_err_set(e, -EIO, "the SVID of %s/%s in %s does not read back",
		                   id->tenant, id->service, c->svid_dir);
	return 0;
}

/* Copy one file to dst (0400, uid:gid): temporary name, then rename. */
static int copy_one(const char *src, const char *dst, uint32_t uid, uint32_t gid, struct iod_err *e)
{
	char *text = NULL, tmp[IOD_AGENT_PATH_MAX + 32];
	int rc = iod_sec_read_file(src, false, &text, e);
	if (rc)
		return rc;
	snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
	unlink(tmp);
	if (!(rc = iod_sec_write_file(tmp, text, strlen(text), 0400, e)) && chown(tmp, uid, gid) &&
	    geteuid() == 0)
		rc = iod_err_set(e, -errno, "chown %s: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, dst))
		rc = iod_err_set(e, -errno, "rename %s: %s", dst, strerror(errno));
	memset(text, 0, strlen(text));
	free(text);
	if (rc)
		unlink(tmp);
	return rc;
}

int iod_agent_svid_copy(const char *svid_dir, const char *tenant, const char *service,
                        const char *dst, uint32_t uid, uint32_t gid, struct iod_err *e)
{
	char src[IOD_AGENT_PATH_MAX + 2 * IOD_NAME_MAX + 8], to[IOD_AGENT_PATH_MAX + 16];
	/* the key before the certificate: a reader that sees the new
	 * certificate finds its key already there */
	static const char *const names[3][2] = {
	    {"ca.crt", "ca.crt"}, {".key", "svid.key"}, {".crt", "svid.crt"}};
	/* the directory: the replica's only, read and search */
	if (mkdir(dst, 0700) && errno != EEXIST)
		return iod_err_set(e, -errno, "creating %s: %s", dst, strerror(errno));
	if (chown(dst, uid, gid) && geteuid() == 0)
		return iod_err_set(e, -errno, "chown %s: %s", dst, strerror(errno));
	if (chmod(dst, 0500))
		return iod_err_set(e, -errno, "chmod %s: %s", dst, strerror(errno));
	for (int i = 0; i < 3; i++) {
		if (i == 0)
			snprintf(src, sizeof(src), "%s/ca.crt", svid_dir);
		else
			snprintf(src, sizeof(src), "%s/%s/%s%s", svid_dir, tenant, service,
			         names[i][0]);
		snprintf(to, sizeof(to), "%s/%s", dst, names[i][1]);
		/* the directory is 0500: the agent (root, or its owner) writes */
		chmod(dst, 0700);
		int rc = copy_one(src, to, uid, gid, e);
		chmod(dst, 0500);
		if (rc)
			return rc;
	}
	return 0;
}

/* Validity of the certificate in path. */
static int cert_times(const char *path, uint64_t *nb, uint64_t *na, struct iod_err *e)
{
	struct iod_sec_cert_info info = {0};
	char *pem = NULL;
	int rc = iod_sec_read_file(path, false, &pem, e);
	if (!rc)
		rc = iod_sec_cert_inspect(pem, strlen(pem), &info, e);
	free(pem);
	if (!rc) {
		*nb = info.not_before_s;
		*na = info.not_after_s;
	}
	return rc;
}

int iod_agent_svid_refresh_copy(const char *svid_dir, const char *tenant, const char *service,
                                const char *dst, uint64_t now_s, bool *copied, struct iod_err *e)
{
	char src[IOD_AGENT_PATH_MAX + 2 * IOD_NAME_MAX + 8], cp[IOD_AGENT_PATH_MAX + 16];
	uint64_t cnb = 0, cna = 0, snb = 0, sna = 0;
	struct stat st;
	int rc;
	*copied = false;
	snprintf(cp, sizeof(cp), "%s/svid.crt", dst);
	if (stat(cp, &st))
		return 0; /* no copy: a replica without credentials, or not started */
	snprintf(src, sizeof(src), "%s/%s/%s.crt", svid_dir, tenant, service);
	if ((rc = cert_times(src, &snb, &sna, e)))
		return rc;
	/* an unreadable copy is replaced: give it no life */
	if (cert_times(cp, &cnb, &cna, &(struct iod_err){0}))
		cnb = cna = 0;
	if (!iod_agent_creds_refresh_due(cnb, cna, snb, sna, now_s))
		return 0;
	/* its owner stays: the replica's uid, as the start gave it */
	if ((rc = iod_agent_svid_copy(svid_dir, tenant, service, dst, st.st_uid, st.st_gid, e)))
		return rc;
	*copied = true;
	return 0;
}

int iod_agent_svids_sync(const struct iod_agent_config *c, struct iod_api_client *cl,
                         const struct iod_mesh_svc_id *want, uint32_t n, uint64_t now_s,
                         uint64_t *next_s, uint32_t *issued, struct iod_err *e)
{
	int rc = 0;
	*issued = 0;
	*next_s = now_s + 60;
	if (!c->creds)
		return 0;
	if ((rc = iod_sec_mkdirs(c->svid_dir, 0700, e)) || (rc = write_ca(c, e))) {
		*next_s = now_s + 2;
		return rc;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t at = 0;
		bool got = false, readable = false;
		struct iod_err e2 = {0};
		int r = svid_one(c, cl, &want[i], now_s, &at, &got, &readable, &e2);
		if (r) {
			IOD_WARN("agent", "node %s: SVID of %s/%s: %s (retrying in 2 s)", c->name,
			         want[i].tenant, want[i].service, e2.msg);
			*next_s = IOD_MIN(*next_s, now_s + 2);
			if (!rc) {
				rc = r;
				*e = e2;
			}
			continue;
		}
		*issued += got;
		if (readable)
			*next_s = IOD_MIN(*next_s, at);
	}
	/* with a view (want given, even empty): the services that left */
	if (want)
		iod_agent_svids_prune(c, want, n, now_s, next_s); /* a kept one: look again */
	return rc;
}
