/*
 * auth.c: the API server's security shell: the TLS material it serves
 * with, who each request comes from, what it asks for, the audit trail,
 * and the two credential-issuing endpoints (tokens and certificates).
 *
 * Every decision is src/sec/'s: identities are mapped by identity.c,
 * tokens checked by token.c, requests decided by authz.c. This file turns
 * HTTP into their inputs (the classifier is pure and table-like), reads the
 * PKI directory at start, and writes the audit log. It runs on the server's
 * loop: nothing here blocks longer than a local file append.
 */
#include "auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Until every client speaks TLS (the HTTP client), a server without --pki
 * or --insecure on loopback runs as --insecure. */
#define IOD_API_PLAINTEXT_DEFAULT 1

bool iod_api_addr_is_loopback(const char *addr)
{
	char host[IOD_ADDR_MAX];
	const char *colon = strrchr(addr, ':');
	size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
	struct in_addr a4;
	struct in6_addr a6;

	if (n >= sizeof(host))
		return false;
	memcpy(host, addr, n);
	host[n] = 0;
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
		memmove(host, host + 1, n - 2);
		host[n - 2] = 0;
	}
	if (!strcmp(host, "localhost"))
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return false; /* "", 0.0.0.0, names: all interfaces or unknown */
}

/* ---- start-up ---------------------------------------------------------------- */

static void host_of(const char *addr, char *host, size_t len)
{
	const char *colon = strrchr(addr, ':');
	size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
	if (n >= len)
		n = len - 1;
	memcpy(host, addr, n);
	host[n] = 0;
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
		memmove(host, host + 1, n - 2);
		host[n - 2] = 0;
	}
}

static void add_ip(struct iod_sec_cert_req *rq, const char *ip)
{
	for (uint32_t i = 0; i < rq->ip_n; i++)
		if (!strcmp(rq->ip[i], ip))
			return;
	if (rq->ip_n < IOD_SEC_SANS_MAX)
		snprintf(rq->ip[rq->ip_n++], IOD_ADDR_MAX, "%s", ip);
}

static void add_dns(struct iod_sec_cert_req *rq, const char *name)
{
	for (uint32_t i = 0; i < rq->dns_n; i++)
		if (!strcmp(rq->dns[i], name))
			return;
	if (name[0] && rq->dns_n < IOD_SEC_SANS_MAX)
		snprintf(rq->dns[rq->dns_n++], IOD_ADDR_MAX, "%s", name);
}

/* The names a client may dial this server by: its bind addresses (every
 * interface's when it binds all), localhost and the host name. */
static void server_sans(struct iod_sec_cert_req *rq, const struct iod_server_config *c)
{
	const char *addrs[2] = {c->api_addr, c->raft_addr};
	char host[IOD_ADDR_MAX];
	unsigned char raw[16];
	bool any = false;

	add_ip(rq, "127.0.0.1");
	add_dns(rq, "localhost");
	for (int i = 0; i < 2; i++) {
		host_of(addrs[i], host, sizeof(host));
		if (!host[0] || !strcmp(host, "0.0.0.0") || !strcmp(host, "::"))
			any = true;
		else if (inet_pton(AF_INET, host, raw) == 1 || inet_pton(AF_INET6, host, raw) == 1)
			add_ip(rq, host);
		else
			add_dns(rq, host);
	}
	if (any) {
		struct ifaddrs *ifs = NULL;
		if (!getifaddrs(&ifs)) {
			for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
				char buf[INET6_ADDRSTRLEN];
				if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
					continue;
				inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
				          buf, sizeof(buf));
				add_ip(rq, buf);
			}
			freeifaddrs(ifs);
		}
	}
	if (!gethostname(host, sizeof(host)))
		add_dns(rq, host);
}

static int open_audit(struct iod_api_sec *s, struct iod_err *e)
{
	struct stat st;
	int fd = open(s->audit_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0 || !(s->audit = fdopen(fd, "a"))) {
		if (fd >= 0)
			close(fd);
		return iod_err_set(e, -errno, "audit log %s: %s", s->audit_path, strerror(errno));
	}
	s->audit_bytes = fstat(fd, &st) ? 0 : (uint64_t)st.st_size;
	return 0;
}

int iod_api_sec_init(struct iod_api_sec *s, const struct iod_server_config *c, struct iod_err *e)
{
	struct iod_sec_cert_req rq;
	struct iod_sec_pem pem = {0};
	int rc;

	memset(s, 0, sizeof(*s));
	if (c->insecure || !c->pki_dir[0]) {
		const char *flag = !iod_api_addr_is_loopback(c->api_addr)    ? "--api"
		                   : !iod_api_addr_is_loopback(c->raft_addr) ? "--raft"
		                                                             : NULL;
		if (flag)
			return iod_err_set(
			    e, -EINVAL,
			    "%s %s is not a loopback address: serving it without TLS and "
			    "authentication would give the cluster to anyone on that network; give "
			    "--pki DIR (create one with `iod init`)",
			    flag, !strcmp(flag, "--api") ? c->api_addr : c->raft_addr);
		if (!c->insecure && !IOD_API_PLAINTEXT_DEFAULT)
			return iod_err_set(
			    e, -EINVAL,
			    "no --pki DIR: the API would have no TLS and no "
			    "authentication; create one with `iod init --pki DIR`, or "
			    "pass --insecure (loopback only, anyone on this machine "
			    "is admin)");
		if (!c->insecure)
			IOD_WARN(
			    "server",
			    "no --pki: serving %s in plaintext with no authentication (anyone on "
			    "this machine is admin); give --pki DIR (`iod init`), or --insecure "
			    "to say so",
			    c->api_addr);
		s->on = false;
	} else {
		s->on = true;
		if ((rc = iod_sec_pki_load_ca(c->pki_dir, true, &s->ca, e)))
			return rc;
		snprintf(s->cluster, sizeof(s->cluster), "%s", iod_sec_ca_cluster(s->ca));
		s->ca_pem = strdup(iod_sec_ca_cert_pem(s->ca));
		/* a fresh server certificate for the addresses it binds, each start */
		memset(&rq, 0, sizeof(rq));
		rq.id.kind = IOD_SEC_KIND_SERVER;
		rq.id.role = IOD_SEC_ROLE_SERVER;
		snprintf(rq.id.name, sizeof(rq.id.name), "%llu", (unsigned long long)c->id);
		rq.server = iod_sec_kind_serves(rq.id.kind);
		rq.not_before_s = (uint64_t)time(NULL);
		rq.ttl_s = IOD_SEC_SERVER_TTL_S;
		server_sans(&rq, c);
		if ((rc = iod_sec_ca_issue(s->ca, &rq, &pem, e))) {
			iod_api_sec_free(s);
			return rc;
		}
		s->cert_pem = pem.cert;
		s->key_pem = pem.key;
		if (!c->raft_plaintext &&
		    (rc = iod_sec_tls_creds_new(s->ca_pem, s->cert_pem, s->key_pem, &s->raft_tls,
		                                e))) {
			iod_api_sec_free(s);
			return rc;
		}
		if (iod_sec_pki_secrets_key(c->pki_dir, s->secrets_key, e) == 0)
			s->has_secrets_key = true;
		else
			IOD_WARN("server", "%s: secrets cannot be stored or opened here", e->msg);
		e->code = 0;
		e->msg[0] = 0;
	}
	s->ring = calloc(IOD_SEC_AUDIT_RING, sizeof(*s->ring));
	if (!s->ring || snprintf(s->audit_path, sizeof(s->audit_path), "%s/audit.log",
	                         c->data_dir) >= (int)sizeof(s->audit_path)) {
		iod_api_sec_free(s);
		return iod_err_set(e, -ENOMEM, "audit: out of memory or data dir too long");
	}
	mkdir(c->data_dir, 0700);
	if ((rc = open_audit(s, e))) {
		iod_api_sec_free(s);
		return rc;
	}
	return 0;
}

void iod_api_sec_free(struct iod_api_sec *s)
{
	iod_sec_ca_free(s->ca);
	iod_sec_tls_creds_free(s->raft_tls);
	free(s->ca_pem);
	free(s->cert_pem);
	if (s->key_pem) {
		memset(s->key_pem, 0, strlen(s->key_pem));
		free(s->key_pem);
	}
	memset(s->secrets_key, 0, sizeof(s->secrets_key));
	if (s->audit)
		fclose(s->audit);
	free(s->ring);
	memset(s, 0, sizeof(*s));
}

/* ---- who is calling -------------------------------------------------------------- */

int iod_api_sec_identify(struct iod_api_sec *s, struct MHD_Connection *c,
                         const struct iod_state *st, struct iod_sec_identity *id,
                         uint64_t *cert_not_after_s, char *why, size_t why_len)
{
	struct iod_err e = {0};
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

	iod_sec_identity_anonymous(id);
	why[0] = 0;
	if (cert_not_after_s)
		*cert_not_after_s = 0;
	if (!s->on) {
		/* --insecure: everyone on loopback is admin, by the operator's choice */
		id->kind = IOD_SEC_KIND_USER;
		id->role = IOD_SEC_ROLE_ADMIN;
		snprintf(id->name, sizeof(id->name), "insecure");
		snprintf(id->via, sizeof(id->via), "--insecure");
		return 0;
	}
	if (auth) {
		struct iod_sec_token t;
		if (strncasecmp(auth, "Bearer ", 7)) {
			snprintf(why, why_len, "the Authorization header must be \"Bearer TOKEN\"");
			return -EACCES;
		}
		if (iod_sec_token_parse(auth + 7, strlen(auth + 7), &t, &e)) {
			snprintf(why, why_len, "%s", e.msg);
			return -EACCES;
		}
		const json_t *rec = iod_state_value(st, IOD_STATE_TOKEN, t.id);
		if (!rec) {
			snprintf(why, why_len, "token %s is not known (revoked, or never issued)",
			         t.id);
			return -ENOENT;
		}
		if (iod_sec_token_check(&t, rec, iod_time_unix_ns() / IOD_NS_PER_MS, s->cluster, id,
		                        &e)) {
			iod_sec_identity_anonymous(id);
			snprintf(why, why_len, "%s", e.msg);
			return -EACCES;
		}
		return 0;
	}
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return 0;
	unsigned n = 0;
	const gnutls_datum_t *chain =
	    gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &n);
	if (!chain || !n)
		return 0; /* no client certificate: anonymous */
	struct iod_sec_cert_info info;
	if (iod_sec_ca_verify_der(s->ca, chain[0].data, chain[0].size, (uint64_t)time(NULL), &info,
	                          &e)) {
		snprintf(why, why_len, "client certificate: %s", e.msg);
		return -EACCES;
	}
	*id = info.id;
	if (cert_not_after_s)
		*cert_not_after_s = info.not_after_s;
	return 0;
}

/* ---- what it asks ---------------------------------------------------------------- */

int iod_api_classify(const char *method, const char *url, const char *query_watch, const char *body,
                     size_t body_len, struct iod_sec_request *rq, char *name, size_t name_len,
                     json_t **value)
{
	char path[256], *seg[4] = {0};
	int nseg = 0;
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), put = !strcmp(method, "PUT"),
	     post = !strcmp(method, "POST"), del = !strcmp(method, "DELETE");
	enum iod_state_kind k;

	memset(rq, 0, sizeof(*rq));
	if (value)
		*value = NULL;
	name[0] = 0;
	rq->name = name;
	rq->verb = get    ? IOD_SEC_VERB_GET
	           : put  ? IOD_SEC_VERB_PUT
	           : post ? IOD_SEC_VERB_CREATE
	                  : IOD_SEC_VERB_DELETE;
	if (!strcmp(url, "/metrics")) {
		rq->res = IOD_SEC_RES_METRICS;
		rq->verb = IOD_SEC_VERB_GET;
		return 0;
	}
	if (iod_strlcpy(path, url, sizeof(path)) || strncmp(path, "/v1/", 4))
		return 1; /* unknown: any authenticated caller gets the 404 */
	for (char *p = path + 4, *save = NULL, *t = strtok_r(p, "/", &save); t;
	     t = strtok_r(NULL, "/", &save)) {
		if (nseg == 3)
			return 1;
		seg[nseg++] = t;
	}
	if (nseg == 0)
		return 1;
	if (nseg == 1 && !strcmp(seg[0], "ca"))
		return -ENOENT; /* public: the CA certificate */
	if (nseg == 1 && !strcmp(seg[0], "whoami"))
		return 1;
	if (!get && !put && !post && !del)
		return 1; /* the router answers 405 */
#define IS(s) (!strcmp(seg[0], s))
	if (nseg == 1 && IS("status"))
		rq->res = IOD_SEC_RES_STATUS;
	else if (nseg == 1 && IS("deploy"))
		rq->res = IOD_SEC_RES_DEPLOY;
	else if (nseg == 1 && IS("txn"))
		rq->res = IOD_SEC_RES_TXN;
	else if (nseg == 1 && IS("watch"))
		rq->res = IOD_SEC_RES_WATCH_ALL;
	else if (nseg == 1 && IS("audit"))
		rq->res = IOD_SEC_RES_AUDIT;
	else if (nseg == 1 && IS("certificates"))
		rq->res = IOD_SEC_RES_CERTIFICATE;
	else if (nseg == 2 && IS("extender")) {
		/* a placement question: it reads nodes, changes nothing */
		rq->res = IOD_SEC_RES_EXTENDER;
		rq->verb = IOD_SEC_VERB_GET;
	} else if (nseg <= 2 && IS("leases")) {
		rq->res = IOD_SEC_RES_LEASE;
		if (nseg == 2)
			snprintf(name, name_len, "%s", seg[1]);
	} else if (nseg <= 2 && IS("members")) {
		rq->res = IOD_SEC_RES_MEMBER;
		if (nseg == 2) {
			snprintf(name, name_len, "%s", seg[1]);
		} else if (post && body && body_len) {
			json_t *j = json_loadb(body, body_len, 0, NULL);
			json_int_t id = json_integer_value(json_object_get(j, "id"));
			if (id > 0)
				snprintf(name, name_len, "%lld", (long long)id);
			json_decref(j);
		}
		if (get)
			rq->verb = IOD_SEC_VERB_LIST;
	} else if (nseg <= 2 && IS("telemetry")) {
		/* node summaries kept in the servers' memory: a node writes only
		 * its own, as with its Node object; reading them is reading nodes */
		rq->res = IOD_SEC_RES_NODE;
		if (nseg == 2)
			snprintf(name, name_len, "%s", seg[1]);
		else if (get)
			rq->verb = IOD_SEC_VERB_LIST;
	} else if (nseg == 2 && IS("secret-values")) {
		rq->res = IOD_SEC_RES_SECRET_VALUE;
		snprintf(name, name_len, "%s", seg[1]);
	} else if (!iod_state_kind_parse(seg[0], &k) && nseg <= 2) {
		rq->res = iod_sec_resource_of_kind(k);
		if (nseg == 2) {
			snprintf(name, name_len, "%s", seg[1]);
		} else if (get) {
			rq->verb = query_watch && (!strcmp(query_watch, "1") ||
			                           !strcmp(query_watch, "true"))
			               ? IOD_SEC_VERB_WATCH
			               : IOD_SEC_VERB_LIST;
		}
		if (put && body && body_len && value)
			*value = json_loadb(body, body_len, 0, NULL);
	} else {
		return 1;
	}
#undef IS
	return 0;
}

/* ---- the audit trail ------------------------------------------------------------- */

void iod_api_sec_audit(struct iod_api_sec *s, const struct iod_sec_identity *id, const char *method,
                       const char *url, int status, const char *remote, const char *detail)
{
	struct iod_sec_audit *a;
	if (!s->ring)
		return;
	a = &s->ring[s->ring_head];
	memset(a, 0, sizeof(*a));
	a->at_ms = iod_time_unix_ns() / IOD_NS_PER_MS;
	a->seq = ++s->seq;
	iod_sec_identity_subject(id, a->who, sizeof(a->who));
	snprintf(a->via, sizeof(a->via), "%s", id->via);
	snprintf(a->method, sizeof(a->method), "%s", method);
	snprintf(a->path, sizeof(a->path), "%s", url);
	a->status = status;
	snprintf(a->remote, sizeof(a->remote), "%s", remote ? remote : "");
	snprintf(a->detail, sizeof(a->detail), "%s", detail ? detail : "");
	s->ring_head = (s->ring_head + 1) % IOD_SEC_AUDIT_RING;
	if (s->ring_n < IOD_SEC_AUDIT_RING)
		s->ring_n++;
	if (status == 401 || status == 403)
		s->denied++;
	if (!s->audit)
		return;
	json_t *j = iod_sec_audit_to_json(a);
	char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (line) {
		int n = fprintf(s->audit, "%s\n", line);
		fflush(s->audit);
		if (n > 0)
			s->audit_bytes += (uint64_t)n;
		free(line);
	}
	if (s->audit_bytes > IOD_SEC_AUDIT_FILE_MAX) {
		/* keep one old file: audit.log.1 */
		char old[IOD_PATH_MAX + 4];
		struct iod_err e = {0};
		fclose(s->audit);
		s->audit = NULL;
		snprintf(old, sizeof(old), "%s.1", s->audit_path);
		rename(s->audit_path, old);
		if (open_audit(s, &e))
			IOD_ERROR("server", "%s", e.msg);
	}
}

json_t *iod_api_sec_audit_list(const struct iod_api_sec *s, uint64_t after, uint32_t limit)
{
	json_t *items = json_array();
	uint32_t start = (s->ring_head + IOD_SEC_AUDIT_RING - s->ring_n) % IOD_SEC_AUDIT_RING;
	for (uint32_t i = 0; i < s->ring_n && json_array_size(items) < limit; i++) {
		const struct iod_sec_audit *a = &s->ring[(start + i) % IOD_SEC_AUDIT_RING];
		if (a->seq > after)
			json_array_append_new(items, iod_sec_audit_to_json(a));
	}
	return json_pack("{s:o, s:I}", "items", items, "seq", (json_int_t)s->seq);
}

/* ---- issuing credentials --------------------------------------------------------- */

int iod_api_sec_token_new(const json_t *body, const struct iod_sec_identity *by, uint64_t now_ms,
                          char *id, size_t id_len, char *token, size_t token_len, json_t **value,
                          struct iod_err *e)
{
	const char *role_s = NULL, *user = NULL, *node = NULL, *desc = NULL;
	enum iod_sec_role role;
	uint64_t ttl_ms = 0;
	uint8_t rnd[30];
	struct iod_sec_token t;
	char hash[80], who[IOD_NAME_MAX + 16];

	*value = NULL;
	if (!json_is_object(body) || iod_json_get_str(body, "role", &role_s) ||
	    iod_sec_role_parse(role_s, &role) ||
	    (role != IOD_SEC_ROLE_VIEWER && role != IOD_SEC_ROLE_DEPLOYER &&
	     role != IOD_SEC_ROLE_ADMIN && role != IOD_SEC_ROLE_NODE))
		return iod_err_set(e, -EINVAL,
		                   "a token body is {\"role\": \"viewer\"|\"deployer\"|\"admin\"|"
		                   "\"node\", \"ttl_ms\": N, \"user\": NAME, \"node\": NAME}");
	int rc = iod_json_get_u64(body, "ttl_ms", &ttl_ms);
	if (rc == -EINVAL || ttl_ms > IOD_SEC_TOKEN_TTL_MAX_S * 1000)
		return iod_err_set(e, -EINVAL, "ttl_ms must be 0 (no expiry) .. %llu (a year)",
		                   (unsigned long long)(IOD_SEC_TOKEN_TTL_MAX_S * 1000));
	if (role == IOD_SEC_ROLE_NODE && !ttl_ms)
		return iod_err_set(e, -EINVAL, "a join token (role node) needs a ttl (e.g. 1h)");
	if (!iod_json_get_str(body, "user", &user) && !iod_sec_name_valid(user))
		return iod_err_set(e, -EINVAL, "user \"%.64s\" is not a name", user);
	if (!iod_json_get_str(body, "node", &node) && !iod_sec_name_valid(node))
		return iod_err_set(e, -EINVAL, "node \"%.64s\" is not a name", node);
	iod_json_get_str(body, "description", &desc);
	if (iod_sec_random(rnd, sizeof(rnd)))
		return iod_err_set(e, -EIO, "no randomness for a token");
	iod_sec_token_from_bytes(rnd, &t);
	memset(rnd, 0, sizeof(rnd));
	iod_sec_token_hash(&t, hash, sizeof(hash));
	iod_sec_token_format(&t, token, token_len);
	snprintf(id, id_len, "%s", t.id);
	memset(&t, 0, sizeof(t));
	iod_sec_identity_subject(by, who, sizeof(who));
	*value = json_pack("{s:s, s:s, s:I, s:I, s:s}", "role", iod_sec_role_name(role), "hash",
	                   hash, "created_ms", (json_int_t)now_ms, "expires_ms",
	                   (json_int_t)(ttl_ms ? now_ms + ttl_ms : 0), "created_by", who);
	if (user)
		json_object_set_new(*value, "user", json_string(user));
	if (node)
		json_object_set_new(*value, "node", json_string(node));
	if (desc)
		json_object_set_new(*value, "description",
		                    json_stringn(desc, IOD_MIN(strlen(desc), 200)));
	return *value ? 0 : iod_err_set(e, -ENOMEM, "out of memory");
}

int iod_api_sec_cert_subject(const json_t *body, const char *cluster,
                             struct iod_sec_identity *subject, struct iod_err *e)
{
	const char *kind = NULL, *name = NULL, *role = NULL, *tenant = "default";
	memset(subject, 0, sizeof(*subject));
	if (!json_is_object(body) || iod_json_get_str(body, "kind", &kind) ||
	    iod_json_get_str(body, "name", &name) || !iod_sec_name_valid(name))
		return iod_err_set(
		    e, -EINVAL,
		    "a certificate request is {\"kind\": \"node\"|\"user\"|\"service\", "
		    "\"name\": NAME, \"role\": ROLE (users), \"csr\": PEM}");
	snprintf(subject->name, sizeof(subject->name), "%s", name);
	snprintf(subject->cluster, sizeof(subject->cluster), "%s", cluster);
	if (!strcmp(kind, "node")) {
		subject->kind = IOD_SEC_KIND_NODE;
		subject->role = IOD_SEC_ROLE_NODE;
	} else if (!strcmp(kind, "user")) {
		subject->kind = IOD_SEC_KIND_USER;
		if (iod_json_get_str(body, "role", &role) ||
		    iod_sec_role_parse(role, &subject->role) ||
		    (subject->role != IOD_SEC_ROLE_VIEWER &&
		     subject->role != IOD_SEC_ROLE_DEPLOYER && subject->role != IOD_SEC_ROLE_ADMIN))
			return iod_err_set(e, -EINVAL,
			                   "a user certificate needs role viewer, "
			                   "deployer or admin");
	} else if (!strcmp(kind, "service")) {
		subject->kind = IOD_SEC_KIND_SERVICE;
		iod_json_get_str(body, "tenant", &tenant);
		if (!iod_sec_name_valid(tenant))
			return iod_err_set(e, -EINVAL, "tenant \"%.64s\" is not a name", tenant);
		snprintf(subject->tenant, sizeof(subject->tenant), "%s", tenant);
	} else {
		return iod_err_set(e, -EINVAL, "kind \"%.32s\": want node, user or service", kind);
	}
	return 0;
}

int iod_api_sec_cert_sign(struct iod_api_sec *s, const json_t *body,
                          const struct iod_sec_identity *subject, const struct iod_sec_identity *by,
                          uint64_t now_s, json_t **answer, struct iod_err *e)
{
	struct iod_sec_cert_req rq;
	struct iod_sec_pem pem;
	const char *csr = NULL;
	uint64_t ttl_s = 0;
	int rc;

	*answer = NULL;
	if (!s->ca || !iod_sec_ca_can_sign(s->ca))
		return iod_err_set(e, -EPERM, "this server has no CA key: it cannot sign");
	if (iod_json_get_str(body, "csr", &csr))
		return iod_err_set(e, -EINVAL, "\"csr\": a PEM certificate request is required");
	memset(&rq, 0, sizeof(rq));
	rq.id = *subject;
	rq.server = iod_sec_kind_serves(subject->kind); /* nodes; SVIDs are clients only */
	if (subject->kind == IOD_SEC_KIND_SERVICE && by && by->kind == IOD_SEC_KIND_NODE)
		iod_strlcpy(rq.node, by->name, sizeof(rq.node));
	rq.not_before_s = now_s;
	rq.ttl_s = subject->kind == IOD_SEC_KIND_NODE      ? IOD_SEC_NODE_TTL_S
	           : subject->kind == IOD_SEC_KIND_SERVICE ? IOD_SEC_SERVICE_TTL_S
	                                                   : IOD_SEC_USER_TTL_S;
	if (!iod_json_get_u64(body, "ttl_s", &ttl_s)) {
		/* the same minimum as `iod cert --ttl` and `iod agent --cert-ttl` */
		if (ttl_s < IOD_SEC_CERT_TTL_MIN_S)
			return iod_err_set(e, -EINVAL, "\"ttl_s\": at least %d s, not %llu",
			                   IOD_SEC_CERT_TTL_MIN_S, (unsigned long long)ttl_s);
		if (ttl_s < rq.ttl_s)
			rq.ttl_s = ttl_s; /* shorter on request (tests of rotation), never longer */
	}
	if ((rc = iod_sec_ca_sign_csr(s->ca, csr, strlen(csr), &rq, &pem, e)))
		return rc;
	*answer = json_pack("{s:s, s:s, s:I, s:I}", "cert", pem.cert, "ca", s->ca_pem, "not_before",
	                    (json_int_t)now_s, "not_after", (json_int_t)(now_s + rq.ttl_s));
	iod_sec_pem_free(&pem);
	return *answer ? 0 : iod_err_set(e, -ENOMEM, "out of memory");
}
