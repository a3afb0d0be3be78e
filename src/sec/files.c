/*
 * files.c: the security module's files: the PKI directory (CA, keys,
 * issued certificates) and the client config with its contexts.
 *
 * One home for how credentials sit on disk: keys are written 0600 in 0700
 * directories, atomically (a temporary file renamed into place, so a
 * crash never leaves half a key), and refused on read when others could
 * read them. The client config is a small JSON file in the shape of a
 * kubeconfig; environment variables override it the way kubectl's flags
 * override a kubeconfig.
 *
 * Shell code: files and the environment. It never prints.
 */
#include "iod/sec.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int iod_sec_mkdirs(const char *dir, unsigned mode, struct iod_err *e)
{
	char p[IOD_PATH_MAX];
	if (iod_strlcpy(p, dir, sizeof(p)))
		return iod_err_set(e, -ENAMETOOLONG, "path too long: %.64s...", dir);
	for (char *s = p + 1;; s++) {
		if (*s == '/' || !*s) {
			char c = *s;
			*s = 0;
			if (mkdir(p, (mode_t)mode) && errno != EEXIST)
				return iod_err_set(e, -errno, "mkdir %s: %s", p, strerror(errno));
			*s = c;
			if (!c)
				break;
		}
	}
	return 0;
}

int iod_sec_write_file(const char *path, const char *text, size_t len, unsigned mode,
                       struct iod_err *e)
{
	char tmp[IOD_PATH_MAX + 16];
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return iod_err_set(e, -ENAMETOOLONG, "path too long: %.64s...", path);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
	if (fd < 0)
		return iod_err_set(e, -errno, "%s: %s", tmp, strerror(errno));
	/* the umask may have taken bits away; never added any */
	if (fchmod(fd, (mode_t)mode))
		rc = -errno;
	for (size_t off = 0; !rc && off < len;) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			rc = w < 0 ? -errno : -EIO;
		else
			off += (size_t)w;
	}
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return iod_err_set(e, rc, "writing %s: %s", path, strerror(-rc));
	}
	return 0;
}

int iod_sec_read_file(const char *path, bool secret, char **out, struct iod_err *e)
{
	struct iod_buf b;
	struct stat st;
	int rc;

	*out = NULL;
	if (stat(path, &st))
		return iod_err_set(e, -errno, "%s: %s", path, strerror(errno));
	if (secret && (st.st_mode & 077))
		return iod_err_set(e, -EPERM,
		                   "%s is readable by group or others (mode %03o): run `chmod 600 "
		                   "%s`",
		                   path, (unsigned)(st.st_mode & 0777), path);
	iod_buf_init(&b);
	if ((rc = iod_buf_read_file(&b, path, IOD_SEC_PEM_MAX, e))) {
		iod_buf_free(&b);
		return rc;
	}
	*out = b.data;
	return 0;
}

static int join(char *buf, size_t len, const char *dir, const char *name, struct iod_err *e)
{
	if (snprintf(buf, len, "%s/%s", dir, name) >= (int)len)
		return iod_err_set(e, -ENAMETOOLONG, "path too long: %.64s/%s", dir, name);
	return 0;
}

int iod_sec_pki_create(const char *dir, const char *cluster, uint64_t now_s, struct iod_err *e)
{
	char path[IOD_PATH_MAX], hex[2 * IOD_SEC_KEY_BYTES + 2];
	uint8_t key[IOD_SEC_KEY_BYTES];
	struct iod_sec_ca *ca = NULL;
	int rc;

	if ((rc = join(path, sizeof(path), dir, "ca.key", e)))
		return rc;
	if (!access(path, F_OK))
		return iod_err_set(e, -EEXIST,
		                   "%s already exists: this directory has a CA (remove it to start "
		                   "a new cluster, which makes every credential it issued useless)",
		                   path);
	if ((rc = iod_sec_mkdirs(dir, 0700, e)))
		return rc;
	if ((rc = iod_sec_ca_create(cluster, now_s, IOD_SEC_CA_TTL_S, &ca, e)))
		return rc;
	rc = iod_sec_write_file(path, iod_sec_ca_key_pem(ca), strlen(iod_sec_ca_key_pem(ca)), 0600,
	                        e);
	if (!rc && !(rc = join(path, sizeof(path), dir, "ca.crt", e)))
		rc = iod_sec_write_file(path, iod_sec_ca_cert_pem(ca),
		                        strlen(iod_sec_ca_cert_pem(ca)), 0644, e);
	iod_sec_ca_free(ca);
	if (rc)
		return rc;
	if (iod_sec_random(key, sizeof(key)))
		return iod_err_set(e, -EIO, "no randomness for the secrets key");
	for (size_t i = 0; i < sizeof(key); i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	hex[2 * IOD_SEC_KEY_BYTES] = '\n';
	hex[2 * IOD_SEC_KEY_BYTES + 1] = 0;
	memset(key, 0, sizeof(key));
	if ((rc = join(path, sizeof(path), dir, "secrets.key", e)))
		return rc;
	rc = iod_sec_write_file(path, hex, strlen(hex), 0600, e);
	memset(hex, 0, sizeof(hex));
	return rc;
}

int iod_sec_pki_load_ca(const char *dir, bool want_key, struct iod_sec_ca **out, struct iod_err *e)
{
	char path[IOD_PATH_MAX], *crt = NULL, *key = NULL;
	int rc;

	*out = NULL;
	if ((rc = join(path, sizeof(path), dir, "ca.crt", e)) ||
	    (rc = iod_sec_read_file(path, false, &crt, e)))
		return rc;
	if (want_key && !(rc = join(path, sizeof(path), dir, "ca.key", e)))
		rc = iod_sec_read_file(path, true, &key, e);
	if (!rc)
		rc = iod_sec_ca_load(crt, key, out, e);
	free(crt);
	if (key) {
		memset(key, 0, strlen(key));
		free(key);
	}
	return rc;
}

int iod_sec_pki_secrets_key(const char *dir, uint8_t key[IOD_SEC_KEY_BYTES], struct iod_err *e)
{
	char path[IOD_PATH_MAX], *text = NULL;
	int rc;

	if ((rc = join(path, sizeof(path), dir, "secrets.key", e)) ||
	    (rc = iod_sec_read_file(path, true, &text, e)))
		return rc;
	size_t n = strlen(text);
	while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
		n--;
	rc = n == 2 * IOD_SEC_KEY_BYTES ? 0 : -EINVAL;
	for (size_t i = 0; !rc && i < IOD_SEC_KEY_BYTES; i++) {
		unsigned v;
		if (sscanf(text + 2 * i, "%2x", &v) != 1)
			rc = -EINVAL;
		key[i] = (uint8_t)v;
	}
	memset(text, 0, strlen(text));
	free(text);
	if (rc)
		return iod_err_set(e, rc, "%s: want %d hex digits", path, 2 * IOD_SEC_KEY_BYTES);
	return 0;
}

int iod_sec_pki_issue_files(const struct iod_sec_ca *ca, const char *dir, const char *base,
                            const struct iod_sec_cert_req *rq, struct iod_err *e)
{
	char path[IOD_PATH_MAX], name[IOD_NAME_MAX + 8];
	struct iod_sec_pem pem;
	int rc;

	if ((rc = iod_sec_ca_issue(ca, rq, &pem, e)))
		return rc;
	snprintf(name, sizeof(name), "%s.key", base);
	if (!(rc = join(path, sizeof(path), dir, name, e)))
		rc = iod_sec_write_file(path, pem.key, strlen(pem.key), 0600, e);
	snprintf(name, sizeof(name), "%s.crt", base);
	if (!rc && !(rc = join(path, sizeof(path), dir, name, e)))
		rc = iod_sec_write_file(path, pem.cert, strlen(pem.cert), 0644, e);
	iod_sec_pem_free(&pem);
	return rc;
}

/* ---- the client config ------------------------------------------------------ */

void iod_sec_config_path(char *buf, size_t len)
{
	const char *v = getenv("IOD_CONFIG");
	if (v && v[0]) {
		snprintf(buf, len, "%s", v);
		return;
	}
	v = getenv("IOD_STATE_DIR");
	if (v && v[0]) {
		snprintf(buf, len, "%s/config", v);
		if (!access(buf, F_OK))
			return;
	}
	v = getenv("XDG_CONFIG_HOME");
	if (v && v[0]) {
		snprintf(buf, len, "%s/iod/config", v);
		return;
	}
	v = getenv("HOME");
	snprintf(buf, len, "%s/.config/iod/config", v && v[0] ? v : "/tmp");
}

static int copy_field(const json_t *ctx, const char *key, char *dst, size_t len, const char *path,
                      const char *name, struct iod_err *e)
{
	const char *v;
	int rc = iod_json_get_str(ctx, key, &v);
	if (rc == -ENOENT)
		return 0;
	if (rc || iod_strlcpy(dst, v, len))
		return iod_err_set(e, -EINVAL,
		                   "%s: context %s: \"%s\" must be a string of at most "
		                   "%zu bytes",
		                   path, name, key, len - 1);
	return 0;
}

static void env_override(struct iod_sec_context *c)
{
	const char *v;
	if ((v = getenv("IOD_SERVER")) && v[0])
		snprintf(c->servers, sizeof(c->servers), "%s", v);
	if ((v = getenv("IOD_CA")) && v[0])
		snprintf(c->ca, sizeof(c->ca), "%s", v);
	if ((v = getenv("IOD_CERT")) && v[0])
		snprintf(c->cert, sizeof(c->cert), "%s", v);
	if ((v = getenv("IOD_KEY")) && v[0])
		snprintf(c->key, sizeof(c->key), "%s", v);
	if ((v = getenv("IOD_TOKEN")) && v[0]) {
		snprintf(c->token, sizeof(c->token), "%s", v);
		c->cert[0] = c->key[0] = 0; /* an explicit token wins over the file's cert */
	}
}

int iod_sec_context_load(const char *path, const char *name, struct iod_sec_context *out,
                         struct iod_err *e)
{
	char where[IOD_PATH_MAX];
	struct iod_buf b;
	json_t *root = NULL, *ctx, *servers;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!path) {
		iod_sec_config_path(where, sizeof(where));
		path = where;
	}
	iod_buf_init(&b);
	if (access(path, F_OK)) {
		env_override(out);
		return -ENOENT;
	}
	if ((rc = iod_buf_read_file(&b, path, 1u << 20, e)) ||
	    (rc = iod_json_parse(b.data, b.len, &root, e))) {
		iod_buf_free(&b);
		return iod_err_set(e, rc ? rc : -EINVAL, "client config %s: %s", path, e->msg);
	}
	iod_buf_free(&b);
	if (!name || !name[0])
		name = getenv("IOD_CONTEXT");
	if (!name || !name[0])
		iod_json_get_str(root, "current_context", &name);
	if (!name || !name[0]) {
		json_decref(root);
		return iod_err_set(e, -EINVAL, "client config %s names no current_context", path);
	}
	ctx = json_object_get(json_object_get(root, "contexts"), name);
	if (!json_is_object(ctx)) {
		rc = iod_err_set(e, -ENOENT, "client config %s has no context \"%s\"", path, name);
		json_decref(root);
		return rc;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	snprintf(out->path, sizeof(out->path), "%s", path);
	servers = json_object_get(ctx, "servers");
	if (json_is_array(servers)) {
		size_t i;
		json_t *x;
		json_array_foreach(servers, i, x)
		{
			size_t l = strlen(out->servers);
			if (!json_is_string(x))
				continue;
			snprintf(out->servers + l, sizeof(out->servers) - l, "%s%s", l ? "," : "",
			         json_string_value(x));
		}
	}
	if ((rc = copy_field(ctx, "cluster", out->cluster, sizeof(out->cluster), path, name, e)) ||
	    (rc = copy_field(ctx, "ca", out->ca, sizeof(out->ca), path, name, e)) ||
	    (rc = copy_field(ctx, "cert", out->cert, sizeof(out->cert), path, name, e)) ||
	    (rc = copy_field(ctx, "key", out->key, sizeof(out->key), path, name, e)) ||
	    (rc = copy_field(ctx, "token", out->token, sizeof(out->token), path, name, e))) {
		json_decref(root);
		return rc;
	}
	json_decref(root);
	env_override(out);
	return 0;
}

int iod_sec_context_save(const char *path, const struct iod_sec_context *c, bool make_current,
                         struct iod_err *e)
{
	char dir[IOD_PATH_MAX];
	struct iod_buf b;
	json_t *root = NULL, *ctxs, *ctx, *servers;
	int rc;

	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if ((rc = iod_sec_mkdirs(dir, 0700, e)))
			return rc;
	}
	iod_buf_init(&b);
	if (!access(path, F_OK)) {
		if ((rc = iod_buf_read_file(&b, path, 1u << 20, e)) ||
		    (rc = iod_json_parse(b.data, b.len, &root, e)) || !json_is_object(root)) {
			iod_buf_free(&b);
			json_decref(root);
			return iod_err_set(
			    e, rc ? rc : -EINVAL,
			    "client config %s is not a JSON object; move it away first", path);
		}
	}
	iod_buf_free(&b);
	if (!root)
		root = json_object();
	ctxs = json_object_get(root, "contexts");
	if (!json_is_object(ctxs)) {
		ctxs = json_object();
		json_object_set_new(root, "contexts", ctxs);
	}
	servers = json_array();
	for (const char *p = c->servers; *p;) {
		const char *q = strchr(p, ',');
		size_t n = q ? (size_t)(q - p) : strlen(p);
		if (n)
			json_array_append_new(servers, json_stringn(p, n));
		p += n + (q ? 1 : 0);
	}
	ctx = json_pack("{s:s, s:o}", "cluster", c->cluster, "servers", servers);
	if (c->ca[0])
		json_object_set_new(ctx, "ca", json_string(c->ca));
	if (c->cert[0]) {
		json_object_set_new(ctx, "cert", json_string(c->cert));
		json_object_set_new(ctx, "key", json_string(c->key));
	}
	if (c->token[0])
		json_object_set_new(ctx, "token", json_string(c->token));
	json_object_set_new(ctxs, c->name, ctx);
	if (make_current || !json_object_get(root, "current_context"))
		json_object_set_new(root, "current_context", json_string(c->name));
	char *text = json_dumps(root, JSON_INDENT(2));
	json_decref(root);
	if (!text)
		return iod_err_set(e, -ENOMEM, "out of memory");
	size_t n = strlen(text);
	char *t2 = realloc(text, n + 2);
	if (t2) {
		text = t2;
		text[n++] = '\n';
		text[n] = 0;
	}
	rc = iod_sec_write_file(path, text, n, 0600, e);
	free(text);
	return rc;
}

int iod_sec_tls_creds_load(const char *ca_path, const char *cert_path, const char *key_path,
                           struct iod_sec_tls_creds **out, struct iod_err *e)
{
	char *ca = NULL, *crt = NULL, *key = NULL;
	bool with_cert = cert_path && cert_path[0];
	int rc;

	*out = NULL;
	if ((rc = iod_sec_read_file(ca_path, false, &ca, e)))
		return rc;
	if (with_cert && !(rc = iod_sec_read_file(cert_path, false, &crt, e)))
		rc = iod_sec_read_file(key_path, true, &key, e);
	if (!rc)
		rc = iod_sec_tls_creds_new(ca, crt, key, out, e);
	free(ca);
	free(crt);
	if (key) {
		memset(key, 0, strlen(key));
		free(key);
	}
	return rc;
}

int iod_sec_context_creds(const struct iod_sec_context *c, struct iod_sec_tls_creds **out,
                          struct iod_err *e)
{
	*out = NULL;
	if (!c->ca[0])
		return 0;
	int rc = iod_sec_tls_creds_load(c->ca, c->token[0] ? NULL : c->cert, c->key, out, e);
	if (rc)
		return iod_err_set(e, rc, "client config %s: %s", c->path[0] ? c->path : "(env)",
		                   e->msg);
	return 0;
}
