/*
 * certs.c: the node's certificate: TLS bootstrapping with a join token
 * (kubeadm's shape: `iod token create --role node --ttl 1h`, then
 * `iod agent --join-token T --ca ca.crt`) and rotation before expiry.
 *
 * Bootstrap: the agent makes a key and a PKCS#10 request, and POSTs the
 * request to /v1/certificates with the join token as its bearer
 * credential, over HTTPS to a server of the cluster (the CA file is what
 * it trusts). The server signs the public key only; the subject is
 * spiffe://<cluster>/node/<name> whatever the request says. The key never
 * leaves the node. Key and certificate go to the data dir (0600), so a
 * restart needs no token.
 *
 * Rotation: at two thirds of the certificate's life
 * (iod_sec_cert_renew_due) the agent asks for a new one the same way, now
 * authenticated by its current certificate, and swaps it into the live
 * credentials: new connections present it, open ones finish with the old
 * one, nothing restarts. A certificate without serverAuth (issued before
 * node certificates carried it: peers now refuse it as a listener) is
 * renewed at once, the same way. A revoked node is refused (401 on every request,
 * 403 for a new certificate).
 *
 * Shell code (files, the API); the decision of when is the pure
 * iod_sec_cert_renew_due.
 */
#include "internal.h"
#include "iod/agent.h"
#include "iod/api.h"
#include "iod/sec.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Ask the cluster to sign a new key for this node: *cert and *key (malloc'd PEM). */
static int request_cert(struct iod_api_client *cl, const struct iod_agent_config *c, char **cert,
                        char **key, struct iod_err *e)
{
	struct iod_sec_pem pem;
	struct iod_api_response r;
	int rc;

	*cert = *key = NULL;
	if ((rc = iod_sec_csr_create(c->name, &pem, e)))
		return rc;
	json_t *body =
	    json_pack("{s:s, s:s, s:s}", "kind", "node", "name", c->name, "csr", pem.cert);
	if (body && c->cert_ttl_s)
		json_object_set_new(body, "ttl_s", json_integer((json_int_t)c->cert_ttl_s));
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text) {
		iod_sec_pem_free(&pem);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	rc = iod_api_request(cl, "POST", "/v1/certificates", "application/json", text, strlen(text),
	                     &r, e);
	free(text);
	if (rc) {
		iod_sec_pem_free(&pem);
		return rc;
	}
	const char *crt = NULL;
	if (r.status != 200 || iod_json_get_str(r.json, "cert", &crt)) {
		rc = iod_err_set(e, r.status == 401 || r.status == 403 ? -EACCES : -EIO,
		                 "the cluster refused node %s a certificate: %s (HTTP %d)", c->name,
		                 iod_api_error_text(&r), r.status);
		iod_api_response_free(&r);
		iod_sec_pem_free(&pem);
		return rc;
	}
	*cert = strdup(crt);
	*key = pem.key;
	pem.key = NULL;
	iod_sec_pem_free(&pem);
	iod_api_response_free(&r);
	if (!*cert) {
		free(*key);
		*key = NULL;
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	return 0;
}

/* Key first, then the certificate, each atomically. */
static int save(const struct iod_agent_config *c, const char *cert, const char *key,
                struct iod_err *e)
{
	int rc = iod_sec_write_file(c->key_path, key, strlen(key), 0600, e);
	if (!rc)
		rc = iod_sec_write_file(c->cert_path, cert, strlen(cert), 0600, e);
	return rc;
}

static void free_key(char *key)
{
	if (key) {
		memset(key, 0, strlen(key));
		free(key);
	}
}

/* A usable certificate already in the data dir: this node's, not expired. */
static bool have_cert(const struct iod_agent_config *c, uint64_t now_s)
{
	struct iod_sec_cert_info info;
	struct iod_err e = {0};
	char *pem = NULL;
	bool ok = false;
	if (access(c->cert_path, R_OK) || access(c->key_path, R_OK))
		return false;
	if (!iod_sec_read_file(c->cert_path, false, &pem, &e) &&
	    !iod_sec_cert_inspect(pem, strlen(pem), &info, &e))
		ok = info.id.kind == IOD_SEC_KIND_NODE && !strcmp(info.id.name, c->name) &&
		     info.not_after_s > now_s;
	free(pem);
	return ok;
}

int iod_agent_bootstrap(struct iod_agent_config *c, const char *ca_path, const char *token,
                        struct iod_err *e)
{
	struct iod_sec_tls_creds *trust = NULL;
	struct iod_api_client cl;
	char *cert = NULL, *key = NULL;
	int rc;

	if (!c->cert_path[0] && snprintf(c->cert_path, sizeof(c->cert_path), "%s/node.crt",
	                                 c->data_dir) >= (int)sizeof(c->cert_path))
		return iod_err_set(e, -ENAMETOOLONG, "--data-dir too long");
	if (!c->key_path[0] && snprintf(c->key_path, sizeof(c->key_path), "%s/node.key",
	                                c->data_dir) >= (int)sizeof(c->key_path))
		return iod_err_set(e, -ENAMETOOLONG, "--data-dir too long");
	if (have_cert(c, (uint64_t)time(NULL))) {
		IOD_INFO("agent", "node %s: using its certificate %s (no join needed)", c->name,
		         c->cert_path);
	} else {
		if ((rc = iod_sec_mkdirs(c->data_dir, 0700, e)) ||
		    (rc = iod_sec_tls_creds_load(ca_path, NULL, NULL, &trust, e)) ||
		    (rc = iod_api_client_init(&cl, c->servers, e))) {
			iod_sec_tls_creds_free(trust);
			return rc;
		}
		iod_api_client_set_creds(&cl, trust, token);
		cl.retry_ms = 15000;
		rc = request_cert(&cl, c, &cert, &key, e);
		iod_api_client_close(&cl);
		iod_sec_tls_creds_free(trust);
		if (!rc)
			rc = save(c, cert, key, e);
		free(cert);
		free_key(key);
		if (rc)
			return rc;
		IOD_INFO("agent", "node %s: joined with a token; certificate in %s", c->name,
		         c->cert_path);
	}
	return iod_sec_tls_creds_load(ca_path, c->cert_path, c->key_path, &c->creds, e);
}

int iod_agent_cert_validity(const struct iod_agent_config *c, uint64_t *not_before_s,
                            uint64_t *not_after_s, bool *server_auth, struct iod_err *e)
{
	struct iod_sec_cert_info info;
	char *pem = NULL;
	int rc = iod_sec_read_file(c->cert_path, false, &pem, e);
	if (!rc)
		rc = iod_sec_cert_inspect(pem, strlen(pem), &info, e);
	free(pem);
	if (rc)
		return rc;
	*not_before_s = info.not_before_s;
	*not_after_s = info.not_after_s;
	*server_auth = info.server_auth;
	return 0;
}

int iod_agent_cert_renew(const struct iod_agent_config *c, struct iod_api_client *cl,
                         struct iod_err *e)
{
	char *cert = NULL, *key = NULL;
	int rc = request_cert(cl, c, &cert, &key, e);
	if (!rc)
		rc = save(c, cert, key, e);
	if (!rc)
		rc = iod_sec_tls_creds_rotate(c->creds, cert, key, e);
	free(cert);
	free_key(key);
	return rc;
}
