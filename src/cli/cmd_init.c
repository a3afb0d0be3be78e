/*
 * cmd_init.c: `iod init`: create a cluster's trust root: the CA, the
 * secrets-at-rest key, an admin credential, and a client-config context
 * that points the CLI at the cluster with that credential.
 *
 * This is the multi-machine starting point (`iod up` does the same for a
 * local cluster): copy the PKI directory (ca.crt, ca.key, secrets.key) to
 * each server machine and start `iod server --pki DIR`; agents join with a
 * token (`iod token create --role node`). Thin shell over src/sec/.
 */
#include "cli.h"
#include "iod/api.h"
#include "iod/sec.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: iod init [--cluster NAME] [--pki DIR] [--server ADDR[,ADDR...]]\n"
	        "                [--context NAME] [--admin NAME] [--no-config] [-o text|json]\n\n"
	        "Create a cluster's CA (ECDSA P-256, 10 years), its secrets key, an admin\n"
	        "client certificate, and a context in the client config so that `iod` finds\n"
	        "the cluster and its credential.\n\n"
	        "  --cluster NAME   trust domain, a DNS name (default \"iod\")\n"
	        "  --pki DIR        where the keys go (default ~/.local/share/iod/pki);\n"
	        "                   created 0700, keys 0600; refuses to overwrite a CA\n"
	        "  --server ADDRS   the API addresses clients use (default %s)\n"
	        "  --context NAME   context name in the client config (default: the cluster)\n"
	        "  --admin NAME     the admin user's name (default \"admin\")\n"
	        "  --no-config      do not touch the client config\n\n"
	        "Then, on each server machine (with the PKI directory copied there):\n"
	        "  iod server --pki DIR --id 1 --api 10.0.0.1:7400 --raft 10.0.0.1:7300 ...\n"
	        "and for each node: iod token create --role node --ttl 1h, then\n"
	        "  iod agent --server 10.0.0.1:7400 --join-token TOKEN --ca DIR/ca.crt\n"
	        "Client config: $IOD_CONFIG, else ~/.config/iod/config (docs/security.md).\n",
	        IOD_API_DEFAULT_SERVER);
}

void iod_init_default_pki(char *buf, size_t len);
void iod_init_default_pki(char *buf, size_t len)
{
	const char *home = getenv("HOME");
	snprintf(buf, len, "%s/.local/share/iod/pki", home && home[0] ? home : "/tmp");
}

/* Create the PKI in dir, an admin credential, and (unless config_path is NULL)
 * a client-config context: shared with `iod up`. */
int iod_init_cluster(const char *dir, const char *cluster, const char *servers, const char *admin,
                     const char *context, const char *config_path, bool make_current,
                     struct iod_err *e);
int iod_init_cluster(const char *dir, const char *cluster, const char *servers, const char *admin,
                     const char *context, const char *config_path, bool make_current,
                     struct iod_err *e)
{
	struct iod_sec_ca *ca = NULL;
	struct iod_sec_cert_req rq;
	struct iod_sec_context c;
	uint64_t now = (uint64_t)time(NULL);
	int rc;

	if ((rc = iod_sec_pki_create(dir, cluster, now, e)) ||
	    (rc = iod_sec_pki_load_ca(dir, true, &ca, e)))
		return rc;
	memset(&rq, 0, sizeof(rq));
	rq.id.kind = IOD_SEC_KIND_USER;
	rq.id.role = IOD_SEC_ROLE_ADMIN;
	snprintf(rq.id.name, sizeof(rq.id.name), "%s", admin);
	rq.not_before_s = now;
	rq.ttl_s = IOD_SEC_USER_TTL_S;
	rc = iod_sec_pki_issue_files(ca, dir, "admin", &rq, e);
	iod_sec_ca_free(ca);
	if (rc || !config_path)
		return rc;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", context);
	snprintf(c.cluster, sizeof(c.cluster), "%s", cluster);
	snprintf(c.servers, sizeof(c.servers), "%s", servers);
	if (snprintf(c.ca, sizeof(c.ca), "%s/ca.crt", dir) >= (int)sizeof(c.ca) ||
	    snprintf(c.cert, sizeof(c.cert), "%s/admin.crt", dir) >= (int)sizeof(c.cert) ||
	    snprintf(c.key, sizeof(c.key), "%s/admin.key", dir) >= (int)sizeof(c.key))
		return iod_err_set(e, -ENAMETOOLONG, "--pki path too long");
	return iod_sec_context_save(config_path, &c, make_current, e);
}

int cmd_init(int argc, char **argv)
{
	static const struct option opts[] = {{"cluster", required_argument, NULL, 'c'},
	                                     {"pki", required_argument, NULL, 'd'},
	                                     {"server", required_argument, NULL, 's'},
	                                     {"context", required_argument, NULL, 'x'},
	                                     {"admin", required_argument, NULL, 'a'},
	                                     {"no-config", no_argument, NULL, 'N'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	char dir[IOD_PATH_MAX], config[IOD_PATH_MAX], full[IOD_PATH_MAX];
	const char *cluster = "iod", *servers = IOD_API_DEFAULT_SERVER, *context = NULL,
	           *admin = "admin";
	enum iod_output out = IOD_OUT_TEXT;
	bool no_config = false;
	struct iod_err e = {0};
	int o;

	iod_init_default_pki(dir, sizeof(dir));
	while ((o = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (o) {
		case 'c': cluster = optarg; break;
		case 'd':
			if (iod_strlcpy(dir, optarg, sizeof(dir)))
				return iod_cli_fail("init", IOD_EXIT_INVALID, "--pki too long");
			break;
		case 's': servers = optarg; break;
		case 'x': context = optarg; break;
		case 'a': admin = optarg; break;
		case 'N': no_config = true; break;
		case 'o':
			if (iod_cli_output("init", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind != argc)
		return iod_cli_fail("init", IOD_EXIT_INVALID, "unexpected argument %s",
		                    argv[optind]);
	if (!iod_sec_cluster_valid(cluster))
		return iod_cli_fail("init", IOD_EXIT_INVALID,
		                    "--cluster \"%s\": want a DNS name ([a-z0-9.-], e.g. prod-eu1)",
		                    cluster);
	if (!iod_sec_name_valid(admin))
		return iod_cli_fail("init", IOD_EXIT_INVALID, "--admin \"%s\" is not a name",
		                    admin);
	if (!context)
		context = cluster;
	if (!iod_sec_name_valid(context))
		return iod_cli_fail("init", IOD_EXIT_INVALID, "--context \"%s\" is not a name",
		                    context);
	/* the config records absolute paths: it is read from anywhere */
	if (dir[0] != '/' && realpath(".", full) && strlen(full) + strlen(dir) + 2 < sizeof(full)) {
		strcat(full, "/");
		strcat(full, dir);
		snprintf(dir, sizeof(dir), "%s", full);
	}
	iod_sec_config_path(config, sizeof(config));
	if (iod_init_cluster(dir, cluster, servers, admin, context, no_config ? NULL : config, true,
	                     &e))
		return iod_cli_fail("init",
		                    e.code == -EEXIST || e.code == -EINVAL ? IOD_EXIT_INVALID
		                                                           : IOD_EXIT_ERROR,
		                    "%s", e.msg);
	if (out == IOD_OUT_JSON) {
		json_t *j = json_pack("{s:s, s:s, s:s, s:s?, s:s}", "cluster", cluster, "pki", dir,
		                      "servers", servers, "config", no_config ? NULL : config,
		                      "context", context);
		iod_json_print(stdout, j, false);
		json_decref(j);
		return IOD_EXIT_OK;
	}
	printf("cluster %s: CA, secrets key and admin credential in %s (keys 0600)\n", cluster,
	       dir);
	if (!no_config)
		printf("client config %s: context \"%s\" (servers %s, user %s, role admin)\n",
		       config, context, servers, admin);
	printf("next: iod server --pki %s --id 1 --api HOST:7400 --raft HOST:7300 ...\n", dir);
	return IOD_EXIT_OK;
}
