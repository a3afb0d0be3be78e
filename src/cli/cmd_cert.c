/*
 * cmd_cert.c: `iod cert`: issue certificates from a PKI directory's CA
 * (offline, on a machine that holds ca.key) and show what a certificate
 * says (its identity, role and validity).
 *
 * Thin shell over src/sec/: the identity rules live in identity.c and the
 * issuing in pki.c.
 */
#include "cli.h"
#include "iod/sec.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void iod_init_default_pki(char *buf, size_t len);

static void usage(FILE *f)
{
	fprintf(f, "usage: iod cert create user NAME --role viewer|deployer|admin [options]\n"
	           "       iod cert create node NAME [options]\n"
	           "       iod cert create server ID [--addr IP|DNS]... [options]\n"
	           "       iod cert create service NAME [--tenant T] [--node N] [options]\n"
	           "       iod cert show FILE [-o text|json]\n\n"
	           "Issue a key and certificate signed by the cluster CA in --pki (needs ca.key),\n"
	           "written as OUT.crt and OUT.key (0600), or show a certificate's identity.\n\n"
	           "  --pki DIR      the PKI directory (default ~/.local/share/iod/pki)\n"
	           "  --out BASE     output path without extension (default DIR/KIND-NAME)\n"
	           "  --ttl DUR      lifetime (default: users and servers 365d... as 8760h,\n"
	           "                 nodes 24h, services 1h; at least 10s, as the API's)\n"
	           "  --addr A       servers: an IP address or DNS name clients dial (repeat)\n"
	           "  --tenant T     services: their tenant (default \"default\")\n"
	           "  --node N       services: the node it is issued to (its OU; proxies refuse\n"
	           "                 it once that node is revoked; agents' SVIDs carry theirs)\n"
	           "Identities are spiffe://CLUSTER/user/NAME, /node/NAME, /server/ID and\n"
	           "/ns/TENANT/svc/NAME (docs/security.md).\n");
}

static int show(int argc, char **argv)
{
	static const char *const outs[] = {"text", "json", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	struct iod_sec_cert_info info;
	struct iod_err e = {0};
	struct iod_buf b;
	const char *file = NULL;

	for (int i = 0; i < argc; i++) {
		if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) {
			if (iod_cli_output("cert", argv[++i], outs, &out))
				return IOD_EXIT_INVALID;
		} else if (!file) {
			file = argv[i];
		} else {
			return iod_cli_fail("cert", IOD_EXIT_INVALID, "unexpected argument %s",
			                    argv[i]);
		}
	}
	if (!file)
		return iod_cli_fail("cert", IOD_EXIT_INVALID, "cert show needs a FILE");
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, file, IOD_SEC_PEM_MAX, &e) ||
	    iod_sec_cert_inspect(b.data, b.len, &info, &e)) {
		iod_buf_free(&b);
		return iod_cli_fail("cert", IOD_EXIT_INVALID, "%s: %s", file, e.msg);
	}
	iod_buf_free(&b);
	char uri[512] = "", who[256];
	iod_sec_identity_uri(&info.id, uri, sizeof(uri));
	iod_sec_identity_format(&info.id, who, sizeof(who));
	uint64_t now = (uint64_t)time(NULL);
	if (out == IOD_OUT_JSON) {
		json_t *j =
		    json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:b}", "uri", uri, "kind",
		              iod_sec_kind_name(info.id.kind), "role",
		              iod_sec_role_name(info.id.role), "name", info.id.name, "cluster",
		              info.id.cluster, "not_before", (json_int_t)info.not_before_s,
		              "not_after", (json_int_t)info.not_after_s, "serial", info.serial,
		              "valid_now", now >= info.not_before_s && now < info.not_after_s);
		if (info.id.kind == IOD_SEC_KIND_SERVICE)
			json_object_set_new(j, "tenant", json_string(info.id.tenant));
		if (info.node[0])
			json_object_set_new(j, "node", json_string(info.node));
		json_object_set_new(j, "server_auth", json_boolean(info.server_auth));
		json_object_set_new(j, "client_auth", json_boolean(info.client_auth));
		iod_json_print(stdout, j, false);
		json_decref(j);
		return IOD_EXIT_OK;
	}
	printf("identity   %s\n           %s\n", uri, who);
	printf("valid      %llu .. %llu (Unix s)%s\n", (unsigned long long)info.not_before_s,
	       (unsigned long long)info.not_after_s,
	       now >= info.not_after_s   ? "  EXPIRED"
	       : now < info.not_before_s ? "  not yet"
	                                 : "");
	if (now < info.not_after_s)
		printf("expires in %llu h\n",
		       (unsigned long long)((info.not_after_s - now) / 3600));
	printf("serial     %s\n", info.serial);
	if (info.node[0])
		printf("issued to  node %s\n", info.node);
	printf("usage      %s%s%s\n", info.client_auth ? "clientAuth" : "",
	       info.client_auth && info.server_auth ? " " : "",
	       info.server_auth ? "serverAuth" : "");
	return IOD_EXIT_OK;
}

int cmd_cert(int argc, char **argv)
{
	static const struct option opts[] = {{"pki", required_argument, NULL, 'd'},
	                                     {"out", required_argument, NULL, 'O'},
	                                     {"ttl", required_argument, NULL, 't'},
	                                     {"role", required_argument, NULL, 'r'},
	                                     {"addr", required_argument, NULL, 'a'},
	                                     {"tenant", required_argument, NULL, 'T'},
	                                     {"node", required_argument, NULL, 'N'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	char dir[IOD_PATH_MAX], base[IOD_PATH_MAX];
	const char *out_base = NULL, *tenant = "default", *for_node = NULL;
	struct iod_sec_cert_req rq;
	struct iod_sec_ca *ca = NULL;
	struct iod_err e = {0};
	uint64_t ttl_ns = 0;
	bool role_set = false;
	unsigned char raw[16];
	int o;

	if (argc >= 2 && !strcmp(argv[1], "show"))
		return show(argc - 2, argv + 2);
	if (iod_cli_wants_help(argc, argv) || argc < 2) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? IOD_EXIT_INVALID : IOD_EXIT_OK;
	}
	if (strcmp(argv[1], "create"))
		return iod_cli_fail("cert", IOD_EXIT_INVALID,
		                    "unknown subcommand \"%s\"; want create or show", argv[1]);
	if (argc < 4)
		return iod_cli_fail(
		    "cert", IOD_EXIT_INVALID,
		    "cert create needs a KIND (user, node, server, service) and NAME");
	memset(&rq, 0, sizeof(rq));
	const char *kind = argv[2], *name = argv[3];
	if (!strcmp(kind, "user")) {
		rq.id.kind = IOD_SEC_KIND_USER;
	} else if (!strcmp(kind, "node")) {
		rq.id.kind = IOD_SEC_KIND_NODE;
		rq.id.role = IOD_SEC_ROLE_NODE;
	} else if (!strcmp(kind, "server")) {
		rq.id.kind = IOD_SEC_KIND_SERVER;
		rq.id.role = IOD_SEC_ROLE_SERVER;
	} else if (!strcmp(kind, "service")) {
		rq.id.kind = IOD_SEC_KIND_SERVICE;
	} else {
		return iod_cli_fail("cert", IOD_EXIT_INVALID,
		                    "unknown kind \"%s\": want user, node, server or service",
		                    kind);
	}
	rq.server = iod_sec_kind_serves(rq.id.kind); /* servers and nodes listen */
	if (!iod_sec_name_valid(name))
		return iod_cli_fail("cert", IOD_EXIT_INVALID, "\"%s\" is not a name", name);
	snprintf(rq.id.name, sizeof(rq.id.name), "%s", name);
	iod_init_default_pki(dir, sizeof(dir));
	optind = 4;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'd': snprintf(dir, sizeof(dir), "%s", optarg); break;
		case 'O': out_base = optarg; break;
		case 't':
			/* the API's minimum (IOD_SEC_CERT_TTL_MIN_S), not one of its own */
			if (iod_parse_duration(optarg, &ttl_ns, &e))
				return iod_cli_fail("cert", IOD_EXIT_INVALID, "--ttl %s: %s",
				                    optarg, e.msg);
			if (ttl_ns < IOD_NS_PER_S * IOD_SEC_CERT_TTL_MIN_S)
				return iod_cli_fail("cert", IOD_EXIT_INVALID,
				                    "--ttl %s: at least %ds", optarg,
				                    IOD_SEC_CERT_TTL_MIN_S);
			break;
		case 'r':
			if (iod_sec_role_parse(optarg, &rq.id.role))
				return iod_cli_fail("cert", IOD_EXIT_INVALID,
				                    "--role %s: want viewer, deployer or admin",
				                    optarg);
			role_set = true;
			break;
		case 'a':
			if (rq.dns_n + rq.ip_n >= IOD_SEC_SANS_MAX)
				return iod_cli_fail("cert", IOD_EXIT_INVALID, "at most %d --addr",
				                    IOD_SEC_SANS_MAX);
			if (inet_pton(AF_INET, optarg, raw) == 1 ||
			    inet_pton(AF_INET6, optarg, raw) == 1)
				snprintf(rq.ip[rq.ip_n++], IOD_ADDR_MAX, "%s", optarg);
			else
				snprintf(rq.dns[rq.dns_n++], IOD_ADDR_MAX, "%s", optarg);
			break;
		case 'T': tenant = optarg; break;
		case 'N': for_node = optarg; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind != argc)
		return iod_cli_fail("cert", IOD_EXIT_INVALID, "unexpected argument %s",
		                    argv[optind]);
	if (rq.id.kind == IOD_SEC_KIND_USER && !role_set)
		return iod_cli_fail("cert", IOD_EXIT_INVALID,
		                    "a user certificate needs --role viewer|deployer|admin");
	if (rq.id.kind != IOD_SEC_KIND_USER && role_set)
		return iod_cli_fail("cert", IOD_EXIT_INVALID, "--role is for user certificates");
	if (rq.id.kind == IOD_SEC_KIND_SERVICE) {
		if (!iod_sec_name_valid(tenant))
			return iod_cli_fail("cert", IOD_EXIT_INVALID,
			                    "--tenant \"%s\" is not a name", tenant);
		snprintf(rq.id.tenant, sizeof(rq.id.tenant), "%s", tenant);
		if (for_node && !iod_sec_name_valid(for_node))
			return iod_cli_fail("cert", IOD_EXIT_INVALID, "--node \"%s\" is not a name",
			                    for_node);
		if (for_node)
			snprintf(rq.node, sizeof(rq.node), "%s", for_node);
	} else if (for_node) {
		return iod_cli_fail("cert", IOD_EXIT_INVALID, "--node is for service certificates");
	}
	rq.not_before_s = (uint64_t)time(NULL);
	rq.ttl_s = ttl_ns                               ? ttl_ns / IOD_NS_PER_S
	           : rq.id.kind == IOD_SEC_KIND_NODE    ? IOD_SEC_NODE_TTL_S
	           : rq.id.kind == IOD_SEC_KIND_SERVICE ? IOD_SEC_SERVICE_TTL_S
	                                                : IOD_SEC_USER_TTL_S;
	if (rq.id.kind == IOD_SEC_KIND_SERVER) {
		snprintf(rq.ip[rq.ip_n++], IOD_ADDR_MAX, "127.0.0.1");
		if (rq.dns_n < IOD_SEC_SANS_MAX)
			snprintf(rq.dns[rq.dns_n++], IOD_ADDR_MAX, "localhost");
	}
	if (iod_sec_pki_load_ca(dir, true, &ca, &e))
		return iod_cli_fail("cert", IOD_EXIT_INVALID, "%s", e.msg);
	if (out_base)
		snprintf(base, sizeof(base), "%s", out_base);
	else
		snprintf(base, sizeof(base), "%s/%s-%s", dir, kind, name);
	/* iod_sec_pki_issue_files takes a directory and a base name */
	char odir[IOD_PATH_MAX], *slash;
	snprintf(odir, sizeof(odir), "%s", base);
	slash = strrchr(odir, '/');
	const char *bname = base;
	if (slash) {
		*slash = 0;
		bname = base + (slash - odir) + 1;
	} else {
		snprintf(odir, sizeof(odir), ".");
	}
	int rc = iod_sec_pki_issue_files(ca, odir, bname, &rq, &e);
	iod_sec_ca_free(ca);
	if (rc)
		return iod_cli_fail("cert", IOD_EXIT_ERROR, "%s", e.msg);
	printf("%s.crt and %s.key (0600): %s %s, valid %llu s (%.1f h)\n", base, base, kind, name,
	       (unsigned long long)rq.ttl_s, (double)rq.ttl_s / 3600.0);
	return IOD_EXIT_OK;
}
