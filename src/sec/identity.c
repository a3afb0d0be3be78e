/*
 * identity.c: who a caller is, and how a certificate's SPIFFE-style URI
 * maps to that (pure).
 *
 * One home for the identity rules: the API server, the Raft transport and
 * the mesh proxy all turn a verified certificate into an identity here, so
 * a node certificate means the same thing everywhere. The mapping is strict
 * (an unknown path shape is an error, not a guess) because it is fed by
 * whatever a peer presents; tests/fuzz/fuzz_sec_identity.c feeds it garbage.
 * It never does I/O or reads the clock.
 */
#include "iod/sec.h"

#include <string.h>

static const char *const kind_names[] = {
#define X(n, s) s,
    IOD_SEC_KINDS(X)
#undef X
};

static const char *const role_names[] = {
#define X(n, s) s,
    IOD_SEC_ROLES(X)
#undef X
};

const char *iod_sec_kind_name(enum iod_sec_kind k)
{
	return (unsigned)k < IOD_ARRAY_LEN(kind_names) ? kind_names[k] : "?";
}

bool iod_sec_kind_serves(enum iod_sec_kind k)
{
	return k == IOD_SEC_KIND_SERVER || k == IOD_SEC_KIND_NODE;
}

const char *iod_sec_role_name(enum iod_sec_role r)
{
	return (unsigned)r < IOD_ARRAY_LEN(role_names) ? role_names[r] : "?";
}

int iod_sec_role_parse(const char *s, enum iod_sec_role *out)
{
	for (unsigned i = 1; i < IOD_ARRAY_LEN(role_names); i++)
		if (s && !strcmp(s, role_names[i])) {
			*out = (enum iod_sec_role)i;
			return 0;
		}
	return -EINVAL;
}

void iod_sec_identity_anonymous(struct iod_sec_identity *id)
{
	memset(id, 0, sizeof(*id));
	id->kind = IOD_SEC_KIND_ANONYMOUS;
	id->role = IOD_SEC_ROLE_NONE;
}

bool iod_sec_cluster_valid(const char *c)
{
	size_t n = c ? strlen(c) : 0;
	if (!n || n >= IOD_SEC_CLUSTER_MAX)
		return false;
	if (!((c[0] >= 'a' && c[0] <= 'z') || (c[0] >= '0' && c[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = c[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      ch == '.'))
			return false;
	}
	return c[n - 1] != '.' && c[n - 1] != '-';
}

bool iod_sec_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (!n || n >= IOD_NAME_MAX || name[0] == '.')
		return false;
	return iod_str_name_chars(name, n);
}

/* Copy path segment [p, p+n) into dst if it is a valid name. */
static int segment(const char *p, size_t n, char *dst, const char *what, struct iod_err *e)
{
	if (!n || n >= IOD_NAME_MAX)
		return iod_err_set(e, -EINVAL, "identity URI: %s is %s", what,
		                   n ? "too long" : "empty");
	memcpy(dst, p, n);
	dst[n] = 0;
	if (!iod_sec_name_valid(dst))
		return iod_err_set(e, -EINVAL,
		                   "identity URI: %s \"%.64s\" is not a name ([A-Za-z0-9._-])",
		                   what, dst);
	return 0;
}

int iod_sec_identity_from_uri(const char *uri, const char *org, const char *want_cluster,
                              struct iod_sec_identity *out, struct iod_err *e)
{
	static const char scheme[] = "spiffe://";
	const char *p, *slash, *segs[4];
	size_t lens[4], nseg = 0;
	struct iod_sec_identity id;
	int rc;

	memset(&id, 0, sizeof(id));
	if (!uri || strncmp(uri, scheme, sizeof(scheme) - 1))
		return iod_err_set(e, -EINVAL, "identity URI must start with spiffe://");
	p = uri + sizeof(scheme) - 1;
	slash = strchr(p, '/');
	if (!slash || (size_t)(slash - p) >= sizeof(id.cluster))
		return iod_err_set(e, -EINVAL, "identity URI: no trust domain or path");
	memcpy(id.cluster, p, (size_t)(slash - p));
	id.cluster[slash - p] = 0;
	if (!iod_sec_cluster_valid(id.cluster))
		return iod_err_set(e, -EINVAL,
		                   "identity URI: trust domain \"%.64s\" is not a "
		                   "cluster name ([a-z0-9.-])",
		                   id.cluster);
	if (want_cluster && strcmp(want_cluster, id.cluster))
		return iod_err_set(e, -EINVAL, "identity URI is for cluster \"%s\", not \"%s\"",
		                   id.cluster, want_cluster);
	for (p = slash + 1;;) {
		const char *q = strchr(p, '/');
		size_t n = q ? (size_t)(q - p) : strlen(p);
		if (nseg == IOD_ARRAY_LEN(segs))
			return iod_err_set(e, -EINVAL, "identity URI: path has too many parts");
		segs[nseg] = p;
		lens[nseg++] = n;
		if (!q)
			break;
		p = q + 1;
	}
#define SEG_IS(i, s) (lens[i] == sizeof(s) - 1 && !memcmp(segs[i], s, sizeof(s) - 1))
	if (nseg == 2 && (SEG_IS(0, "user") || SEG_IS(0, "node") || SEG_IS(0, "server"))) {
		id.kind = SEG_IS(0, "user")   ? IOD_SEC_KIND_USER
		          : SEG_IS(0, "node") ? IOD_SEC_KIND_NODE
		                              : IOD_SEC_KIND_SERVER;
		if ((rc = segment(segs[1], lens[1], id.name, "name", e)))
			return rc;
	} else if (nseg == 4 && SEG_IS(0, "ns") && SEG_IS(2, "svc")) {
		id.kind = IOD_SEC_KIND_SERVICE;
		if ((rc = segment(segs[1], lens[1], id.tenant, "tenant", e)) ||
		    (rc = segment(segs[3], lens[3], id.name, "service", e)))
			return rc;
	} else {
		return iod_err_set(e, -EINVAL,
		                   "identity URI path must be /user/NAME, /node/NAME, "
		                   "/server/ID or /ns/TENANT/svc/NAME");
	}
#undef SEG_IS
	switch (id.kind) {
	case IOD_SEC_KIND_USER:
		if (!org || iod_sec_role_parse(org, &id.role) ||
		    (id.role != IOD_SEC_ROLE_VIEWER && id.role != IOD_SEC_ROLE_DEPLOYER &&
		     id.role != IOD_SEC_ROLE_ADMIN))
			return iod_err_set(e, -EINVAL,
			                   "user certificate: O= must be viewer, deployer or "
			                   "admin, not \"%.32s\"",
			                   org ? org : "");
		break;
	case IOD_SEC_KIND_NODE:
	case IOD_SEC_KIND_SERVER:
	case IOD_SEC_KIND_SERVICE: {
		enum iod_sec_role want = id.kind == IOD_SEC_KIND_NODE     ? IOD_SEC_ROLE_NODE
		                         : id.kind == IOD_SEC_KIND_SERVER ? IOD_SEC_ROLE_SERVER
		                                                          : IOD_SEC_ROLE_NONE;
		enum iod_sec_role claimed;
		/* a node or service certificate cannot claim a person's role */
		if (org && org[0] && (iod_sec_role_parse(org, &claimed) || claimed != want))
			return iod_err_set(e, -EINVAL, "%s certificate claims role \"%.32s\"",
			                   iod_sec_kind_name(id.kind), org);
		id.role = want;
		break;
	}
	default: break;
	}
	snprintf(id.via, sizeof(id.via), "certificate");
	*out = id;
	return 0;
}

int iod_sec_identity_uri(const struct iod_sec_identity *id, char *buf, size_t len)
{
	int n;
	switch (id->kind) {
	case IOD_SEC_KIND_USER:
	case IOD_SEC_KIND_NODE:
	case IOD_SEC_KIND_SERVER:
		n = snprintf(buf, len, "spiffe://%s/%s/%s", id->cluster,
		             iod_sec_kind_name(id->kind), id->name);
		break;
	case IOD_SEC_KIND_SERVICE:
		n = snprintf(buf, len, "spiffe://%s/ns/%s/svc/%s", id->cluster,
		             id->tenant[0] ? id->tenant : "default", id->name);
		break;
	default: return -EINVAL;
	}
	return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

void iod_sec_identity_format(const struct iod_sec_identity *id, char *buf, size_t len)
{
	switch (id->kind) {
	case IOD_SEC_KIND_ANONYMOUS: snprintf(buf, len, "anonymous"); break;
	case IOD_SEC_KIND_SERVICE:
		snprintf(buf, len, "service \"%s/%s\" (%s)", id->tenant, id->name, id->via);
		break;
	case IOD_SEC_KIND_BOOTSTRAP: snprintf(buf, len, "join %s (role node)", id->via); break;
	default:
		snprintf(buf, len, "%s \"%s\" (%s, %s)", iod_sec_kind_name(id->kind), id->name,
		         iod_sec_role_name(id->role), id->via);
	}
}

void iod_sec_identity_subject(const struct iod_sec_identity *id, char *buf, size_t len)
{
	switch (id->kind) {
	case IOD_SEC_KIND_ANONYMOUS: snprintf(buf, len, "anonymous"); break;
	case IOD_SEC_KIND_SERVICE: snprintf(buf, len, "service:%s/%s", id->tenant, id->name); break;
	case IOD_SEC_KIND_BOOTSTRAP: snprintf(buf, len, "bootstrap:%s", id->name); break;
	default: snprintf(buf, len, "%s:%s", iod_sec_kind_name(id->kind), id->name);
	}
}

uint64_t iod_sec_cert_renew_at(uint64_t not_before_s, uint64_t not_after_s)
{
	/* the CA backdates not_before for clock skew: the life starts after that */
	uint64_t from = not_before_s + IOD_SEC_CERT_BACKDATE_S;
	if (not_after_s <= from)
		return 0;
	return from + (not_after_s - from) * 2 / 3;
}

bool iod_sec_cert_renew_due(uint64_t not_before_s, uint64_t not_after_s, uint64_t now_s)
{
	return now_s >= iod_sec_cert_renew_at(not_before_s, not_after_s);
}

int iod_sec_revocation_key(enum iod_sec_kind kind, const char *tenant, const char *name, char *buf,
                           size_t len)
{
	int n;
	if (!iod_sec_name_valid(name))
		return -EINVAL;
	switch (kind) {
	case IOD_SEC_KIND_USER:
	case IOD_SEC_KIND_NODE:
	case IOD_SEC_KIND_SERVER:
		n = snprintf(buf, len, "%s.%s", iod_sec_kind_name(kind), name);
		break;
	case IOD_SEC_KIND_SERVICE:
		if (!tenant || !tenant[0])
			tenant = "default";
		if (!iod_sec_name_valid(tenant) || strchr(tenant, '.') || strchr(name, '.'))
			return -EINVAL;
		n = snprintf(buf, len, "service.%s.%s", tenant, name);
		break;
	default: return -EINVAL;
	}
	return n < 0 || (size_t)n >= len || (size_t)n >= IOD_NAME_MAX ? -ENOSPC : 0;
}
