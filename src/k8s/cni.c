/*
 * cni.c: the CNI plugin's pure half (CNI spec 1.1): the network
 * configuration on stdin, the CNI_* environment, and the result, error and
 * version JSON. No I/O: cni_run.c is the shell. docs/kubernetes.md.
 */
#include "iod/k8s.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const versions[] = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};

int iod_cni_fail(struct iod_cni_error *err, int code, const char *msg, const char *fmt, ...)
{
	va_list ap;
	err->code = code;
	snprintf(err->msg, sizeof(err->msg), "%s", msg);
	va_start(ap, fmt);
	vsnprintf(err->details, sizeof(err->details), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int iod_cni_cmd_parse(const char *s, enum iod_cni_cmd *cmd, struct iod_cni_error *err)
{
	static const char *const names[] = {"ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"};
	for (unsigned i = 0; s && i < IOD_ARRAY_LEN(names); i++)
		if (!strcmp(s, names[i])) {
			*cmd = (enum iod_cni_cmd)i;
			return 0;
		}
	return iod_cni_fail(err, IOD_CNI_E_ENV, "unknown CNI_COMMAND",
	                    "CNI_COMMAND=%s: want ADD, DEL, CHECK, GC, STATUS or VERSION",
	                    s ? s : "(unset)");
}

/* Alphanumerics plus extra; non-empty, shorter than max. */
static bool name_ok(const char *s, const char *extra, size_t max)
{
	size_t n = strlen(s);
	if (!n || n >= max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		             (ch >= '0' && ch <= '9');
		if (!alnum && (!i || !strchr(extra, ch)))
			return false;
	}
	return true;
}

/* An interface name the kernel takes: 1..15 bytes, not . or .., no / : or space. */
static bool ifname_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 15 || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] == ':' || (unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

int iod_cni_env_check(const struct iod_cni_env *env, struct iod_cni_error *err)
{
	bool need = env->cmd == IOD_CNI_ADD || env->cmd == IOD_CNI_DEL || env->cmd == IOD_CNI_CHECK;
	if (!need)
		return 0;
	if (!env->container_id || !env->container_id[0])
		return iod_cni_fail(err, IOD_CNI_E_ENV, "CNI_CONTAINERID is not set",
		                    "ADD, DEL and CHECK need CNI_CONTAINERID");
	if (!name_ok(env->container_id, "_.-", IOD_CNI_ID_MAX))
		return iod_cni_fail(err, IOD_CNI_E_ENV, "invalid CNI_CONTAINERID",
		                    "CNI_CONTAINERID must be alphanumerics, '_', '.' or '-' (not "
		                    "first), shorter than %d bytes",
		                    IOD_CNI_ID_MAX);
	if (!env->ifname || !env->ifname[0])
		return iod_cni_fail(err, IOD_CNI_E_ENV, "CNI_IFNAME is not set",
		                    "ADD, DEL and CHECK need CNI_IFNAME");
	if (!ifname_ok(env->ifname))
		return iod_cni_fail(err, IOD_CNI_E_ENV, "invalid CNI_IFNAME",
		                    "CNI_IFNAME=%s: 1 to 15 bytes, not . or .., no '/', ':' or "
		                    "whitespace",
		                    env->ifname);
	if (env->cmd != IOD_CNI_DEL && (!env->netns || !env->netns[0]))
		return iod_cni_fail(err, IOD_CNI_E_ENV, "CNI_NETNS is not set",
		                    "ADD and CHECK need CNI_NETNS, the container's netns path");
	return 0;
}

static int version_parse(const char *v, unsigned out[3])
{
	char *end;
	const char *p = v;
	for (int i = 0; i < 3; i++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		unsigned long x = strtoul(p, &end, 10);
		if (x > 1000)
			return -EINVAL;
		out[i] = (unsigned)x;
		p = end;
		if (i < 2 && *p++ != '.')
			return -EINVAL;
	}
	return *p ? -EINVAL : 0;
}

int iod_cni_version_cmp(const char *a, const char *b)
{
	unsigned x[3], y[3];
	bool xa = !version_parse(a, x), yb = !version_parse(b, y);
	if (!xa || !yb)
		return (int)xa - (int)yb;
	for (int i = 0; i < 3; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

bool iod_cni_version_supported(const char *v)
{
	for (unsigned i = 0; i < IOD_ARRAY_LEN(versions); i++)
		if (!strcmp(v, versions[i]))
			return true;
	return false;
}

/* A string member into buf: absent leaves buf; -EINVAL (err) when it is
 * not a string or too long. */
static int get_str(const json_t *o, const char *key, char *buf, size_t len,
                   struct iod_cni_error *err)
{
	const char *s;
	int rc = iod_json_get_str(o, key, &s);
	if (rc == -ENOENT)
		return 0;
	if (rc || strlen(s) >= len)
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "\"%s\" must be a string shorter than %zu bytes", key, len);
	memcpy(buf, s, strlen(s) + 1);
	return 0;
}

static int parse_valid(struct iod_cni_conf *c, const json_t *list, struct iod_cni_error *err)
{
	size_t n = json_array_size(list);
	if (!json_is_array(list) || n > IOD_CNI_VALID_MAX)
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "\"cni.dev/valid-attachments\" must be an array of at most %d "
		                    "{containerID, ifname}",
		                    IOD_CNI_VALID_MAX);
	c->has_valid = true;
	c->valid = calloc(n ? n : 1, sizeof(*c->valid));
	if (!c->valid)
		return iod_cni_fail(err, IOD_CNI_E_IO, "out of memory", "GC attachments");
	for (size_t i = 0; i < n; i++) {
		const json_t *a = json_array_get(list, i);
		struct iod_cni_attachment *v = &c->valid[c->valid_n];
		if (!json_is_object(a) ||
		    get_str(a, "containerID", v->container_id, sizeof(v->container_id), err) ||
		    get_str(a, "ifname", v->ifname, sizeof(v->ifname), err) || !v->container_id[0])
			return iod_cni_fail(
			    err, IOD_CNI_E_CONFIG, "invalid network config",
			    "cni.dev/valid-attachments[%zu]: want {\"containerID\": "
			    "string, \"ifname\": string}",
			    i);
		c->valid_n++;
	}
	return 0;
}

/* ipam: {"type": "iod", "subnet": CIDR, "dataDir": DIR}. */
static int parse_ipam(struct iod_cni_conf *c, const json_t *ipam, struct iod_cni_error *err)
{
	char type[IOD_NAME_MAX] = "iod";
	if (!json_is_object(ipam))
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "\"ipam\" must be an object with \"subnet\"");
	if (get_str(ipam, "type", type, sizeof(type), err) ||
	    get_str(ipam, "subnet", c->subnet, sizeof(c->subnet), err) ||
	    get_str(ipam, "dataDir", c->data_dir, sizeof(c->data_dir), err))
		return -EINVAL;
	if (strcmp(type, "iod"))
		return iod_cni_fail(
		    err, IOD_CNI_E_FIELD, "unsupported IPAM type",
		    "ipam.type \"%s\": iod allocates its own addresses (\"iod\"); it "
		    "delegates to no IPAM plugin",
		    type);
	if (!c->subnet[0])
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "ipam.subnet is required (an IPv4 CIDR /16 to /29, e.g. "
		                    "10.22.0.0/24)");
	if (c->data_dir[0] && c->data_dir[0] != '/')
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "ipam.dataDir must be an absolute path");
	return 0;
}

static int parse_body(struct iod_cni_conf *c, enum iod_cni_cmd cmd, struct iod_cni_error *err)
{
	const json_t *r = c->root;
	uint64_t mtu = 0;
	if (get_str(r, "name", c->name, sizeof(c->name), err) ||
	    get_str(r, "type", c->type, sizeof(c->type), err) ||
	    get_str(r, "bridge", c->bridge, sizeof(c->bridge), err))
		return -EINVAL;
	if (!name_ok(c->name, "_.-", sizeof(c->name)))
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "\"name\" is required: alphanumerics, then '_', '.' or '-'");
	if (!c->bridge[0])
		snprintf(c->bridge, sizeof(c->bridge), "iodcni0");
	if (!ifname_ok(c->bridge))
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "\"bridge\" %s is not an interface name", c->bridge);
	int rc = iod_json_get_u64(r, "mtu", &mtu);
	if (rc == -EINVAL || (!rc && (mtu < 576 || mtu > 65535)))
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "\"mtu\" must be a number from 576 to 65535");
	c->mtu = (uint32_t)mtu;
	const json_t *ipam = json_object_get(r, "ipam");
	if (!ipam && cmd != IOD_CNI_STATUS)
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "\"ipam\" is required: {\"type\": \"iod\", \"subnet\": CIDR}");
	if (ipam && parse_ipam(c, ipam, err))
		return -EINVAL;
	c->prev_result = json_object_get(r, "prevResult");
	if (c->prev_result && !json_is_object(c->prev_result))
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "\"prevResult\" must be an object");
	const json_t *valid = json_object_get(r, "cni.dev/valid-attachments");
	if (cmd == IOD_CNI_GC && valid && parse_valid(c, valid, err))
		return -EINVAL;
	return 0;
}

int iod_cni_conf_parse(const char *text, size_t len, enum iod_cni_cmd cmd, struct iod_cni_conf *c,
                       struct iod_cni_error *err)
{
	struct iod_err e = {0};
	memset(c, 0, sizeof(*c));
	if (len > IOD_CNI_CONF_MAX)
		return iod_cni_fail(err, IOD_CNI_E_DECODE, "failed to decode content",
		                    "the network config is over %d bytes", IOD_CNI_CONF_MAX);
	if (iod_json_parse(text, len, &c->root, &e))
		return iod_cni_fail(err, IOD_CNI_E_DECODE, "failed to decode content",
		                    "network config on stdin: %s", e.msg);
	if (!json_is_object(c->root))
		return iod_cni_fail(err, IOD_CNI_E_DECODE, "failed to decode content",
		                    "the network config must be a JSON object");
	if (get_str(c->root, "cniVersion", c->version, sizeof(c->version), err))
		return -EINVAL;
	if (!c->version[0])
		return iod_cni_fail(err, IOD_CNI_E_CONFIG, "invalid network config",
		                    "\"cniVersion\" is required");
	if (cmd == IOD_CNI_VERSION) /* answered whatever the runtime speaks */
		return 0;
	if (!iod_cni_version_supported(c->version))
		return iod_cni_fail(
		    err, IOD_CNI_E_VERSION, "incompatible CNI version",
		    "cniVersion %s: iod speaks 0.3.0, 0.3.1, 0.4.0, 1.0.0 and 1.1.0", c->version);
	bool v11 = iod_cni_version_cmp(c->version, "1.1.0") >= 0;
	if ((cmd == IOD_CNI_GC || cmd == IOD_CNI_STATUS) && !v11)
		return iod_cni_fail(err, IOD_CNI_E_VERSION, "incompatible CNI version",
		                    "GC and STATUS need cniVersion 1.1.0 (the config says %s)",
		                    c->version);
	if (cmd == IOD_CNI_CHECK && iod_cni_version_cmp(c->version, "0.4.0") < 0)
		return iod_cni_fail(err, IOD_CNI_E_VERSION, "incompatible CNI version",
		                    "CHECK needs cniVersion 0.4.0 or later (the config says %s)",
		                    c->version);
	return parse_body(c, cmd, err);
}

void iod_cni_conf_free(struct iod_cni_conf *c)
{
	free(c->valid);
	json_decref(c->root);
	memset(c, 0, sizeof(*c));
}

void iod_cni_owner_key(const char *container_id, const char *ifname, char *buf, size_t len)
{
	char both[IOD_CNI_ID_MAX + 20];
	snprintf(both, sizeof(both), "%s/%s", container_id, ifname);
	snprintf(buf, len, "cni-%016llx", (unsigned long long)iod_hash_str(both));
}

static void ipv4(uint32_t a, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

static json_t *iface(const char *name, const char *mac, const char *sandbox)
{
	json_t *o = json_pack("{s:s}", "name", name);
	if (mac && mac[0])
		json_object_set_new(o, "mac", json_string(mac));
	if (sandbox)
		json_object_set_new(o, "sandbox", json_string(sandbox));
	return o;
}

/* The array member key of r (created when absent or not an array). */
static json_t *array_of(json_t *r, const char *key)
{
	json_t *a = json_object_get(r, key);
	if (!json_is_array(a)) {
		a = json_array();
		json_object_set_new(r, key, a);
	}
	return a;
}

json_t *iod_cni_result(const struct iod_cni_conf *c, const struct iod_cni_attach *a)
{
	char addr[24], gw[20];
	json_t *r = c->prev_result ? json_deep_copy(c->prev_result) : json_object();
	json_object_set_new(r, "cniVersion", json_string(c->version));
	json_t *ifs = array_of(r, "interfaces");
	json_array_append_new(ifs, iface(a->bridge, a->bridge_mac, NULL));
	json_array_append_new(ifs, iface(a->host_if, a->host_mac, NULL));
	json_array_append_new(ifs, iface(a->ifname, a->mac, a->sandbox));
	size_t index = json_array_size(ifs) - 1;
	ipv4(a->addr, addr, sizeof(addr));
	snprintf(addr + strlen(addr), sizeof(addr) - strlen(addr), "/%u", a->prefix);
	ipv4(a->gateway, gw, sizeof(gw));
	json_t *ip = json_pack("{s:s, s:s, s:i}", "address", addr, "gateway", gw, "interface",
	                       (json_int_t)index);
	if (iod_cni_version_cmp(c->version, "1.0.0") < 0)
		json_object_set_new(ip, "version", json_string("4"));
	json_array_append_new(array_of(r, "ips"), ip);
	json_array_append_new(array_of(r, "routes"),
	                      json_pack("{s:s, s:s}", "dst", "0.0.0.0/0", "gw", gw));
	if (!json_is_object(json_object_get(r, "dns")))
		json_object_set_new(r, "dns", json_object());
	return r;
}

json_t *iod_cni_error_json(const char *version, const struct iod_cni_error *err)
{
	const char *v =
	    version && iod_cni_version_supported(version) ? version : IOD_CNI_VERSION_LATEST;
	json_t *o = json_pack("{s:s, s:i, s:s}", "cniVersion", v, "code", (json_int_t)err->code,
	                      "msg", err->msg);
	if (err->details[0])
		json_object_set_new(o, "details", json_string(err->details));
	return o;
}

json_t *iod_cni_version_json(const char *version)
{
	json_t *list = json_array();
	for (unsigned i = 0; i < IOD_ARRAY_LEN(versions); i++)
		json_array_append_new(list, json_string(versions[i]));
	return json_pack("{s:s, s:o}", "cniVersion",
	                 version && version[0] ? version : IOD_CNI_VERSION_LATEST,
	                 "supportedVersions", list);
}
