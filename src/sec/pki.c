/*
 * pki.c: the cluster CA on GnuTLS: create or load it, issue keys and
 * certificates for servers, nodes, users and services, sign node CSRs
 * (TLS bootstrapping), and verify a peer's certificate into an identity.
 *
 * Every key is ECDSA P-256 (fast handshakes, small certificates; what
 * SPIRE and cert-manager default to); signatures are SHA-256. Identities
 * travel as one spiffe:// URI SAN (identity.c has the rules); a user's role
 * as the subject's O=. The CA certificate carries the trust domain as its
 * own URI SAN (spiffe://<cluster>), so loading a CA says which cluster it
 * is. A CSR contributes its public key only: what a certificate says is
 * decided here from the caller's request, never taken from the requester.
 *
 * Shell code in a small way: GnuTLS draws randomness for keys and serials.
 * It never reads the clock (times come from the caller) and never touches
 * files (files.c does).
 */
#include "iod/sec.h"

#include <arpa/inet.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdlib.h>
#include <string.h>

struct iod_sec_ca {
	gnutls_x509_crt_t crt;             /* the CA certificate */
	gnutls_x509_privkey_t key;         /* its key, or NULL (verify-only) */
	char *cert_pem;                    /* PEM of crt */
	char *key_pem;                     /* PEM of key, or NULL */
	char cluster[IOD_SEC_CLUSTER_MAX]; /* trust domain */
};

/* extendedKeyUsage entries read from a certificate: ours carry at most two
 * (clientAuth, serverAuth); more is someone else's and is not looked at. */
#define CERT_PURPOSES_MAX 16

#define GT(call)                                                                             \
	do {                                                                                 \
		int gt_rc_ = (call);                                                         \
		if (gt_rc_ < 0) {                                                            \
			rc = iod_err_set(e, -EIO, "%s: %s", #call, gnutls_strerror(gt_rc_)); \
			goto out;                                                            \
		}                                                                            \
	} while (0)

int iod_sec_random(void *buf, size_t len)
{
	return gnutls_rnd(GNUTLS_RND_KEY, buf, len) ? -EIO : 0;
}

void iod_sec_pem_free(struct iod_sec_pem *p)
{
	free(p->cert);
	if (p->key) {
		memset(p->key, 0, strlen(p->key));
		free(p->key);
	}
	p->cert = p->key = NULL;
}

static char *datum_str(gnutls_datum_t *d)
{
	char *s = malloc(d->size + 1);
	if (s) {
		memcpy(s, d->data, d->size);
		s[d->size] = 0;
	}
	gnutls_free(d->data);
	d->data = NULL;
	return s;
}

static char *crt_pem(gnutls_x509_crt_t crt)
{
	gnutls_datum_t d = {0};
	return gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &d) ? NULL : datum_str(&d);
}

static char *key_pem(gnutls_x509_privkey_t key)
{
	gnutls_datum_t d = {0};
	if (gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN,
	                                      &d))
		return NULL;
	char *s = datum_str(&d);
	return s;
}

static int new_key(gnutls_x509_privkey_t *key)
{
	if (gnutls_x509_privkey_init(key))
		return -ENOMEM;
	if (gnutls_x509_privkey_generate2(*key, GNUTLS_PK_ECDSA,
	                                  GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0, NULL,
	                                  0)) {
		gnutls_x509_privkey_deinit(*key);
		*key = NULL;
		return -EIO;
	}
	return 0;
}

/* Serial (positive, 128 bits), validity, version: what every certificate gets. */
static int common(gnutls_x509_crt_t crt, uint64_t not_before_s, uint64_t ttl_s, struct iod_err *e)
{
	uint8_t serial[16];
	int rc = 0;
	if (iod_sec_random(serial, sizeof(serial)))
		return iod_err_set(e, -EIO, "no randomness for a serial");
	serial[0] &= 0x7f;
	serial[0] |= 0x01; /* positive, no leading zero byte */
	GT(gnutls_x509_crt_set_version(crt, 3));
	GT(gnutls_x509_crt_set_serial(crt, serial, sizeof(serial)));
	/* a minute of slack for clocks that disagree a little */
	GT(gnutls_x509_crt_set_activation_time(crt,
	                                       (time_t)(not_before_s - IOD_SEC_CERT_BACKDATE_S)));
	GT(gnutls_x509_crt_set_expiration_time(crt, (time_t)(not_before_s + ttl_s)));
out:
	return rc;
}

static int set_key_ids(gnutls_x509_crt_t crt, gnutls_x509_crt_t issuer, struct iod_err *e)
{
	unsigned char id[64];
	size_t n = sizeof(id);
	int rc = 0;
	GT(gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA1, id, &n));
	GT(gnutls_x509_crt_set_subject_key_id(crt, id, n));
	if (issuer) {
		unsigned crit = 0;
		n = sizeof(id);
		if (gnutls_x509_crt_get_subject_key_id(issuer, id, &n, &crit) == 0)
			GT(gnutls_x509_crt_set_authority_key_id(crt, id, n));
	}
out:
	return rc;
}

/* The spiffe:// URI SAN of a certificate (exactly one). */
static int crt_uri(gnutls_x509_crt_t crt, char *buf, size_t len, struct iod_err *e)
{
	bool found = false;
	for (unsigned i = 0; i < 64; i++) {
		char v[512];
		size_t n = sizeof(v) - 1;
		unsigned crit = 0;
		int t = gnutls_x509_crt_get_subject_alt_name(crt, i, v, &n, &crit);
		if (t == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
			break;
		if (t == GNUTLS_E_SHORT_MEMORY_BUFFER)
			return iod_err_set(e, -EINVAL, "certificate: a SAN is too long");
		if (t < 0)
			return iod_err_set(e, -EINVAL, "certificate SANs: %s", gnutls_strerror(t));
		if (t != GNUTLS_SAN_URI)
			continue;
		v[n] = 0;
		if (strlen(v) != n || strncmp(v, "spiffe://", 9))
			continue;
		if (found)
			return iod_err_set(e, -EINVAL,
			                   "certificate has more than one spiffe:// URI");
		if (n >= len)
			return iod_err_set(e, -EINVAL, "certificate URI too long");
		memcpy(buf, v, n + 1);
		found = true;
	}
	return found ? 0 : iod_err_set(e, -EINVAL, "certificate has no spiffe:// identity URI");
}

static int crt_dn(gnutls_x509_crt_t crt, const char *oid, char *buf, size_t len)
{
	size_t n = len;
	buf[0] = 0;
	if (gnutls_x509_crt_get_dn_by_oid(crt, oid, 0, 0, buf, &n))
		buf[0] = 0;
	buf[len - 1] = 0;
	return 0;
}

static int crt_info(gnutls_x509_crt_t crt, const char *want_cluster, struct iod_sec_cert_info *info,
                    struct iod_err *e)
{
	char uri[512], org[64];
	unsigned char serial[20];
	size_t sn = sizeof(serial);
	int rc;

	memset(info, 0, sizeof(*info));
	if ((rc = crt_uri(crt, uri, sizeof(uri), e)))
		return rc;
	crt_dn(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, org, sizeof(org));
	if ((rc = iod_sec_identity_from_uri(uri, org, want_cluster, &info->id, e)))
		return rc;
	if (info->id.kind == IOD_SEC_KIND_SERVICE) {
		/* the node an SVID was issued to (OU): a revoked node's are refused */
		crt_dn(crt, GNUTLS_OID_X520_ORGANIZATIONAL_UNIT_NAME, info->node,
		       sizeof(info->node));
		if (info->node[0] && !iod_sec_name_valid(info->node))
			return iod_err_set(e, -EINVAL,
			                   "service certificate: OU \"%.64s\" is not a node name",
			                   info->node);
	}
	/* extendedKeyUsage: what TLS side it may take (RFC 5280 4.2.1.12);
	 * without the extension a certificate is not restricted to a purpose:
	 * either side (a user's certificate from before iod wrote one) */
	unsigned purposes = 0;
	int kp = 0;
	for (; purposes < CERT_PURPOSES_MAX; purposes++) {
		char oid[128];
		size_t on = sizeof(oid);
		if ((kp = gnutls_x509_crt_get_key_purpose_oid(crt, purposes, oid, &on, NULL)) < 0)
			break;
		if (!strcmp(oid, GNUTLS_KP_TLS_WWW_SERVER))
			info->server_auth = true;
		else if (!strcmp(oid, GNUTLS_KP_TLS_WWW_CLIENT))
			info->client_auth = true;
	}
	if (!purposes && kp == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
		info->server_auth = info->client_auth = true;
	time_t nb = gnutls_x509_crt_get_activation_time(crt),
	       na = gnutls_x509_crt_get_expiration_time(crt);
	info->not_before_s = nb > 0 ? (uint64_t)nb : 0;
	info->not_after_s = na > 0 ? (uint64_t)na : 0;
	if (gnutls_x509_crt_get_serial(crt, serial, &sn) == 0) {
		for (size_t i = 0; i < sn && i < 20; i++)
			snprintf(info->serial + 2 * i, 3, "%02x", serial[i]);
	}
	return 0;
}

/* ---- the CA -------------------------------------------------------------- */

static int ca_alloc(struct iod_sec_ca **out, struct iod_err *e)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return iod_err_set(e, -ENOMEM, "out of memory");
	if (gnutls_x509_crt_init(&(*out)->crt)) {
		free(*out);
		*out = NULL;
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	return 0;
}

void iod_sec_ca_free(struct iod_sec_ca *ca)
{
	if (!ca)
		return;
	gnutls_x509_crt_deinit(ca->crt);
	if (ca->key)
		gnutls_x509_privkey_deinit(ca->key);
	free(ca->cert_pem);
	if (ca->key_pem) {
		memset(ca->key_pem, 0, strlen(ca->key_pem));
		free(ca->key_pem);
	}
	free(ca);
}

int iod_sec_ca_create(const char *cluster, uint64_t now_s, uint64_t ttl_s, struct iod_sec_ca **out,
                      struct iod_err *e)
{
	struct iod_sec_ca *ca = NULL;
	char cn[IOD_SEC_CLUSTER_MAX + 32], uri[IOD_SEC_CLUSTER_MAX + 16];
	int rc;

	*out = NULL;
	if (!iod_sec_cluster_valid(cluster))
		return iod_err_set(e, -EINVAL,
		                   "cluster name \"%.64s\" must be a DNS name ([a-z0-9.-], at most "
		                   "%d characters)",
		                   cluster ? cluster : "", IOD_SEC_CLUSTER_MAX - 1);
	if ((rc = ca_alloc(&ca, e)))
		return rc;
	snprintf(ca->cluster, sizeof(ca->cluster), "%s", cluster);
	if (new_key(&ca->key)) {
		rc = iod_err_set(e, -EIO, "generating the CA key failed");
		goto out;
	}
	if ((rc = common(ca->crt, now_s, ttl_s, e)))
		goto out;
	snprintf(cn, sizeof(cn), "iod cluster %s CA", cluster);
	snprintf(uri, sizeof(uri), "spiffe://%s", cluster);
	GT(gnutls_x509_crt_set_dn_by_oid(ca->crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, strlen(cn)));
	GT(gnutls_x509_crt_set_dn_by_oid(ca->crt, GNUTLS_OID_X520_ORGANIZATION_NAME, 0, "iod", 3));
	GT(gnutls_x509_crt_set_key(ca->crt, ca->key));
	GT(gnutls_x509_crt_set_subject_alt_name(ca->crt, GNUTLS_SAN_URI, uri, strlen(uri),
	                                        GNUTLS_FSAN_SET));
	GT(gnutls_x509_crt_set_basic_constraints(ca->crt, 1, 0));
	GT(gnutls_x509_crt_set_key_usage(ca->crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN |
	                                              GNUTLS_KEY_DIGITAL_SIGNATURE));
	if ((rc = set_key_ids(ca->crt, NULL, e)))
		goto out;
	GT(gnutls_x509_crt_sign2(ca->crt, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0));
	ca->cert_pem = crt_pem(ca->crt);
	ca->key_pem = key_pem(ca->key);
	if (!ca->cert_pem || !ca->key_pem) {
		rc = iod_err_set(e, -ENOMEM, "exporting the CA");
		goto out;
	}
	/* load it back: GnuTLS matches issuers by the encoded subject, which a
	 * certificate built in memory does not have until it is parsed */
	rc = iod_sec_ca_load(ca->cert_pem, ca->key_pem, out, e);
out:
	iod_sec_ca_free(ca);
	return rc;
}

int iod_sec_ca_load(const char *cert_pem, const char *key_pem_text, struct iod_sec_ca **out,
                    struct iod_err *e)
{
	struct iod_sec_ca *ca = NULL;
	char uri[512];
	unsigned ca_flag = 0;
	int rc;

	*out = NULL;
	if (!cert_pem || strlen(cert_pem) > IOD_SEC_PEM_MAX)
		return iod_err_set(e, -EINVAL, "CA certificate missing or larger than %u bytes",
		                   IOD_SEC_PEM_MAX);
	if ((rc = ca_alloc(&ca, e)))
		return rc;
	gnutls_datum_t d = {(unsigned char *)cert_pem, (unsigned)strlen(cert_pem)};
	if (gnutls_x509_crt_import(ca->crt, &d, GNUTLS_X509_FMT_PEM) < 0) {
		rc = iod_err_set(e, -EINVAL, "the CA certificate is not a PEM certificate");
		goto out;
	}
	if (gnutls_x509_crt_get_basic_constraints(ca->crt, NULL, &ca_flag, NULL) < 0 || !ca_flag) {
		rc = iod_err_set(e, -EINVAL, "the CA certificate is not a CA (basicConstraints)");
		goto out;
	}
	/* the trust domain is the CA's own URI: spiffe://<cluster> */
	bool found = false;
	for (unsigned i = 0; i < 16 && !found; i++) {
		size_t n = sizeof(uri) - 1;
		unsigned crit = 0;
		int t = gnutls_x509_crt_get_subject_alt_name(ca->crt, i, uri, &n, &crit);
		if (t < 0)
			break;
		uri[n] = 0;
		if (t == GNUTLS_SAN_URI && !strncmp(uri, "spiffe://", 9) &&
		    iod_sec_cluster_valid(uri + 9)) {
			snprintf(ca->cluster, sizeof(ca->cluster), "%s", uri + 9);
			found = true;
		}
	}
	if (!found) {
		rc =
		    iod_err_set(e, -EINVAL,
		                "the CA certificate names no cluster (URI SAN spiffe://<cluster>): "
		                "not an iod CA");
		goto out;
	}
	ca->cert_pem = strdup(cert_pem);
	if (key_pem_text) {
		gnutls_datum_t k = {(unsigned char *)key_pem_text, (unsigned)strlen(key_pem_text)};
		unsigned char a[64], b[64];
		size_t an = sizeof(a), bn = sizeof(b);
		if (gnutls_x509_privkey_init(&ca->key) ||
		    gnutls_x509_privkey_import2(ca->key, &k, GNUTLS_X509_FMT_PEM, NULL, 0) < 0) {
			rc = iod_err_set(e, -EINVAL, "the CA key is not a PEM private key");
			goto out;
		}
		/* the key must be the certificate's */
		if (gnutls_x509_privkey_get_key_id(ca->key, GNUTLS_KEYID_USE_SHA1, a, &an) ||
		    gnutls_x509_crt_get_key_id(ca->crt, GNUTLS_KEYID_USE_SHA1, b, &bn) ||
		    an != bn || memcmp(a, b, an)) {
			rc = iod_err_set(e, -EINVAL,
			                 "the CA key does not belong to the CA certificate");
			goto out;
		}
		ca->key_pem = strdup(key_pem_text);
	}
	if (!ca->cert_pem || (key_pem_text && !ca->key_pem))
		rc = iod_err_set(e, -ENOMEM, "out of memory");
out:
	if (rc)
		iod_sec_ca_free(ca);
	else
		*out = ca;
	return rc;
}

const char *iod_sec_ca_cluster(const struct iod_sec_ca *ca)
{
	return ca->cluster;
}
const char *iod_sec_ca_cert_pem(const struct iod_sec_ca *ca)
{
	return ca->cert_pem;
}
const char *iod_sec_ca_key_pem(const struct iod_sec_ca *ca)
{
	return ca->key_pem;
}
bool iod_sec_ca_can_sign(const struct iod_sec_ca *ca)
{
	return ca->key != NULL;
}

/* ---- issuing --------------------------------------------------------------- */

/* Fill crt (its key already set) from rq and sign it with the CA. */
static int fill_and_sign(const struct iod_sec_ca *ca, gnutls_x509_crt_t crt,
                         const struct iod_sec_cert_req *rq, struct iod_err *e)
{
	struct iod_sec_identity id = rq->id;
	char uri[512], cn[IOD_NAME_MAX * 2 + 16];
	int rc;

	if (!ca->key)
		return iod_err_set(e, -EPERM, "this CA has no key here: it cannot sign");
	if (!rq->ttl_s)
		return iod_err_set(e, -EINVAL, "a certificate needs a lifetime");
	snprintf(id.cluster, sizeof(id.cluster), "%s", ca->cluster);
	if (!iod_sec_name_valid(id.name) ||
	    (id.kind == IOD_SEC_KIND_SERVICE && !iod_sec_name_valid(id.tenant)))
		return iod_err_set(e, -EINVAL, "certificate subject \"%.64s\" is not a name",
		                   id.name);
	if (iod_sec_identity_uri(&id, uri, sizeof(uri)))
		return iod_err_set(e, -EINVAL, "no URI for a %s identity",
		                   iod_sec_kind_name(id.kind));
	if (id.kind == IOD_SEC_KIND_USER && id.role != IOD_SEC_ROLE_VIEWER &&
	    id.role != IOD_SEC_ROLE_DEPLOYER && id.role != IOD_SEC_ROLE_ADMIN)
		return iod_err_set(e, -EINVAL,
		                   "a user certificate needs role viewer, deployer or admin");
	if ((rc = common(crt, rq->not_before_s, rq->ttl_s, e)))
		return rc;
	if (id.kind == IOD_SEC_KIND_SERVICE)
		snprintf(cn, sizeof(cn), "%s.%s", id.name, id.tenant);
	else
		snprintf(cn, sizeof(cn), "%s", id.name);
	GT(gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, strlen(cn)));
	if (id.kind == IOD_SEC_KIND_USER) {
		const char *role = iod_sec_role_name(id.role);
		GT(gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, 0, role,
		                                 strlen(role)));
	}
	if (id.kind == IOD_SEC_KIND_SERVICE && rq->node[0]) {
		if (!iod_sec_name_valid(rq->node)) {
			rc = iod_err_set(e, -EINVAL, "node \"%.64s\" is not a name", rq->node);
			goto out;
		}
		GT(gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATIONAL_UNIT_NAME, 0,
		                                 rq->node, strlen(rq->node)));
	}
	GT(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_URI, uri, strlen(uri),
	                                        GNUTLS_FSAN_SET));
	for (uint32_t i = 0; i < rq->dns_n && i < IOD_SEC_SANS_MAX; i++)
		GT(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, rq->dns[i],
		                                        strlen(rq->dns[i]), GNUTLS_FSAN_APPEND));
	for (uint32_t i = 0; i < rq->ip_n && i < IOD_SEC_SANS_MAX; i++) {
		unsigned char raw[16];
		if (inet_pton(AF_INET, rq->ip[i], raw) == 1)
			GT(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, raw, 4,
			                                        GNUTLS_FSAN_APPEND));
		else if (inet_pton(AF_INET6, rq->ip[i], raw) == 1)
			GT(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, raw, 16,
			                                        GNUTLS_FSAN_APPEND));
		else {
			rc = iod_err_set(e, -EINVAL, "\"%.64s\" is not an IP address", rq->ip[i]);
			goto out;
		}
	}
	GT(gnutls_x509_crt_set_basic_constraints(crt, 0, -1));
	GT(gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE));
	GT(gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_CLIENT, 0));
	if (rq->server)
		GT(gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0));
	if ((rc = set_key_ids(crt, ca->crt, e)))
		goto out;
	GT(gnutls_x509_crt_sign2(crt, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0));
out:
	return rc;
}

int iod_sec_ca_issue(const struct iod_sec_ca *ca, const struct iod_sec_cert_req *rq,
                     struct iod_sec_pem *out, struct iod_err *e)
{
	gnutls_x509_privkey_t key = NULL;
	gnutls_x509_crt_t crt = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (new_key(&key))
		return iod_err_set(e, -EIO, "generating a key failed");
	if (gnutls_x509_crt_init(&crt)) {
		gnutls_x509_privkey_deinit(key);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	GT(gnutls_x509_crt_set_key(crt, key));
	if ((rc = fill_and_sign(ca, crt, rq, e)))
		goto out;
	out->cert = crt_pem(crt);
	out->key = key_pem(key);
	if (!out->cert || !out->key) {
		iod_sec_pem_free(out);
		rc = iod_err_set(e, -ENOMEM, "exporting the certificate");
	}
out:
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(key);
	return rc;
}

int iod_sec_csr_create(const char *common_name, struct iod_sec_pem *out, struct iod_err *e)
{
	gnutls_x509_privkey_t key = NULL;
	gnutls_x509_crq_t crq = NULL;
	gnutls_datum_t d = {0};
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (new_key(&key))
		return iod_err_set(e, -EIO, "generating a key failed");
	if (gnutls_x509_crq_init(&crq)) {
		gnutls_x509_privkey_deinit(key);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	GT(gnutls_x509_crq_set_version(crq, 1));
	GT(gnutls_x509_crq_set_dn_by_oid(crq, GNUTLS_OID_X520_COMMON_NAME, 0, common_name,
	                                 strlen(common_name)));
	GT(gnutls_x509_crq_set_key(crq, key));
	GT(gnutls_x509_crq_sign2(crq, key, GNUTLS_DIG_SHA256, 0));
	GT(gnutls_x509_crq_export2(crq, GNUTLS_X509_FMT_PEM, &d));
	out->cert = datum_str(&d);
	out->key = key_pem(key);
	if (!out->cert || !out->key) {
		iod_sec_pem_free(out);
		rc = iod_err_set(e, -ENOMEM, "exporting the CSR");
	}
out:
	gnutls_x509_crq_deinit(crq);
	gnutls_x509_privkey_deinit(key);
	return rc;
}

int iod_sec_ca_sign_csr(const struct iod_sec_ca *ca, const char *csr_pem, size_t csr_len,
                        const struct iod_sec_cert_req *rq, struct iod_sec_pem *out,
                        struct iod_err *e)
{
	gnutls_x509_crq_t crq = NULL;
	gnutls_x509_crt_t crt = NULL;
	gnutls_pubkey_t pub = NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!csr_pem || csr_len > IOD_SEC_PEM_MAX)
		return iod_err_set(e, -EINVAL, "CSR missing or larger than %u bytes",
		                   IOD_SEC_PEM_MAX);
	if (gnutls_x509_crq_init(&crq) || gnutls_x509_crt_init(&crt) || gnutls_pubkey_init(&pub)) {
		rc = iod_err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	gnutls_datum_t d = {(unsigned char *)csr_pem, (unsigned)csr_len};
	if (gnutls_x509_crq_import(crq, &d, GNUTLS_X509_FMT_PEM) < 0) {
		rc = iod_err_set(e, -EINVAL, "the CSR is not a PEM certificate request");
		goto out;
	}
	if (gnutls_x509_crq_verify(crq, 0) < 0) {
		rc = iod_err_set(e, -EINVAL, "the CSR's signature does not verify");
		goto out;
	}
	if (gnutls_pubkey_import_x509_crq(pub, crq, 0) < 0) {
		rc = iod_err_set(e, -EINVAL, "the CSR's public key cannot be read");
		goto out;
	}
	unsigned bits = 0;
	int algo = gnutls_pubkey_get_pk_algorithm(pub, &bits);
	if (!((algo == GNUTLS_PK_ECDSA && bits >= 256) || (algo == GNUTLS_PK_RSA && bits >= 2048) ||
	      algo == GNUTLS_PK_EDDSA_ED25519)) {
		rc = iod_err_set(e, -EINVAL,
		                 "the CSR's key is weak: want ECDSA P-256+, Ed25519 or "
		                 "RSA 2048+");
		goto out;
	}
	GT(gnutls_x509_crt_set_pubkey(crt, pub));
	if ((rc = fill_and_sign(ca, crt, rq, e)))
		goto out;
	out->cert = crt_pem(crt);
	if (!out->cert)
		rc = iod_err_set(e, -ENOMEM, "exporting the certificate");
out:
	if (pub)
		gnutls_pubkey_deinit(pub);
	if (crt)
		gnutls_x509_crt_deinit(crt);
	if (crq)
		gnutls_x509_crq_deinit(crq);
	return rc;
}

int iod_sec_cert_der(const char *pem, void **der, size_t *len)
{
	gnutls_datum_t in, out = {0};
	*der = NULL;
	*len = 0;
	if (!pem || strlen(pem) > IOD_SEC_PEM_MAX)
		return -EINVAL;
	in.data = (unsigned char *)pem;
	in.size = (unsigned)strlen(pem);
	if (gnutls_pem_base64_decode2("CERTIFICATE", &in, &out) < 0)
		return -EINVAL;
	*der = malloc(out.size ? out.size : 1);
	if (*der) {
		memcpy(*der, out.data, out.size);
		*len = out.size;
	}
	gnutls_free(out.data);
	return *der ? 0 : -ENOMEM;
}

/* ---- verifying -------------------------------------------------------------- */

int iod_sec_ca_verify_der(const struct iod_sec_ca *ca, const void *der, size_t len, uint64_t now_s,
                          struct iod_sec_cert_info *info, struct iod_err *e)
{
	gnutls_x509_crt_t crt = NULL;
	unsigned status = 0;
	int rc = 0;

	if (!der || !len || len > IOD_SEC_PEM_MAX)
		return iod_err_set(e, -EACCES, "no certificate");
	if (gnutls_x509_crt_init(&crt))
		return iod_err_set(e, -ENOMEM, "out of memory");
	gnutls_datum_t d = {(unsigned char *)der, (unsigned)len};
	if (gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_DER) < 0) {
		rc = iod_err_set(e, -EACCES, "the certificate cannot be read");
		goto out;
	}
	/* times are checked below against the caller's clock */
	int vr = gnutls_x509_crt_verify(
	    crt, &ca->crt, 1,
	    GNUTLS_VERIFY_DISABLE_TIME_CHECKS | GNUTLS_VERIFY_DISABLE_TRUSTED_TIME_CHECKS, &status);
	if (vr < 0 || status) {
		gnutls_datum_t why = {0};
		gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &why, 0);
		rc = iod_err_set(e, -EACCES,
		                 "the certificate is not signed by the %s cluster CA (%s)",
		                 ca->cluster, vr < 0 ? gnutls_strerror(vr) : (char *)why.data);
		gnutls_free(why.data);
		goto out;
	}
	if (crt_info(crt, ca->cluster, info, e)) {
		rc = -EACCES;
		e->code = rc;
		goto out;
	}
	time_t ca_end = gnutls_x509_crt_get_expiration_time(ca->crt);
	if (ca_end > 0 && now_s >= (uint64_t)ca_end)
		rc = iod_err_set(e, -EACCES,
		                 "the %s cluster CA itself expired: rotate it "
		                 "(docs/security.md)",
		                 ca->cluster);
	else if (now_s + 60 < info->not_before_s)
		rc = iod_err_set(e, -EACCES, "the certificate of %s is not valid yet",
		                 info->id.name);
	else if (now_s >= info->not_after_s)
		rc = iod_err_set(e, -EACCES, "the certificate of %s expired %llu s ago",
		                 info->id.name, (unsigned long long)(now_s - info->not_after_s));
out:
	gnutls_x509_crt_deinit(crt);
	return rc;
}

int iod_sec_cert_inspect(const void *data, size_t len, struct iod_sec_cert_info *info,
                         struct iod_err *e)
{
	gnutls_x509_crt_t crt = NULL;
	int rc;

	memset(info, 0, sizeof(*info));
	if (!data || !len || len > IOD_SEC_PEM_MAX)
		return iod_err_set(e, -EINVAL, "no certificate (or larger than %u bytes)",
		                   IOD_SEC_PEM_MAX);
	if (gnutls_x509_crt_init(&crt))
		return iod_err_set(e, -ENOMEM, "out of memory");
	gnutls_datum_t d = {(unsigned char *)data, (unsigned)len};
	bool pem = len > 10 && memmem(data, len, "-----BEGIN", 10);
	if (gnutls_x509_crt_import(crt, &d, pem ? GNUTLS_X509_FMT_PEM : GNUTLS_X509_FMT_DER) < 0) {
		rc = iod_err_set(e, -EINVAL, "not an X.509 certificate (PEM or DER)");
		goto out;
	}
	rc = crt_info(crt, NULL, info, e);
out:
	gnutls_x509_crt_deinit(crt);
	return rc;
}
