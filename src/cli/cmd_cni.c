/*
 * cmd_cni.c: iod as a CNI 1.1 plugin. A runtime runs /opt/cni/bin/iod (a
 * link to this binary) with CNI_COMMAND and friends in the environment and
 * the network config on stdin; main.c sends such a call here. The answer is
 * the spec's result or error JSON on stdout; a failure exits with the
 * spec's error code. `iod cni install` makes the link. docs/kubernetes.md.
 */
#include "cli.h"
#include "iod/k8s.h"

#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: iod cni install [--dir DIR] [--force]\n"
	        "       CNI_COMMAND=ADD|DEL|CHECK|GC|STATUS|VERSION ... iod <config.json\n\n"
	        "iod is a CNI 1.1 plugin (type \"iod\"): with CNI_COMMAND set and no\n"
	        "arguments it reads the network config on stdin and attaches the container's\n"
	        "netns (CNI_NETNS) to a Linux bridge of the node with a veth pair\n"
	        "(CNI_IFNAME inside) and an address from ipam.subnet. Config:\n"
	        "  {\"cniVersion\": \"1.1.0\", \"name\": \"pods\", \"type\": \"iod\",\n"
	        "   \"bridge\": \"iodcni0\", \"mtu\": 1500,\n"
	        "   \"ipam\": {\"type\": \"iod\", \"subnet\": \"10.22.0.0/24\",\n"
	        "            \"dataDir\": \"%s/<name>\"}}\n\n"
	        "  install         link DIR/iod (default /opt/cni/bin/iod) to this binary\n"
	        "  --force         replace an existing DIR/iod\n\n"
	        "A CNI call prints the spec's result (ADD, VERSION), nothing (DEL, CHECK,\n"
	        "GC, STATUS) or the spec's error JSON {cniVersion, code, msg, details}, and\n"
	        "exits 0 or with the error's code (1 version, 2 field, 3 container, 4 env,\n"
	        "5 I/O, 6 decode, 7 config, 50 unavailable, 100+ iod's). `install` exits\n"
	        "0 ok, 1 failed, 2 bad usage. See docs/kubernetes.md.\n",
	        IOD_CNI_DATA_DIR);
}

static int install(int argc, char **argv)
{
	const char *dir = "/opt/cni/bin";
	bool force = false;
	static const struct option opts[] = {
	    {"dir", required_argument, NULL, 'd'}, {"force", no_argument, NULL, 'f'}, {0}};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'd')
			dir = optarg;
		else if (c == 'f')
			force = true;
		else
			return IOD_EXIT_INVALID;
	}
	char self[PATH_MAX], link[PATH_MAX + 8];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return iod_cli_fail("cni install", IOD_EXIT_ERROR, "/proc/self/exe: %s",
		                    strerror(errno));
	self[n] = 0;
	if (mkdir(dir, 0755) && errno != EEXIST)
		return iod_cli_fail("cni install", IOD_EXIT_ERROR, "%s: %s", dir, strerror(errno));
	snprintf(link, sizeof(link), "%s/iod", dir);
	if (force)
		unlink(link);
	if (symlink(self, link))
		return iod_cli_fail("cni install", IOD_EXIT_ERROR, "%s -> %s: %s%s", link, self,
		                    strerror(errno),
		                    errno == EEXIST ? " (--force replaces it)" : "");
	printf("%s -> %s\n", link, self);
	return IOD_EXIT_OK;
}

/* stdin, whole, bounded (one more byte than allowed, so the parser refuses). */
static char *read_stdin(size_t *len)
{
	size_t cap = IOD_CNI_CONF_MAX + 1, n = 0, r;
	char *buf = malloc(cap);
	if (!buf)
		return NULL;
	while (n < cap && (r = fread(buf + n, 1, cap - n, stdin)) > 0)
		n += r;
	*len = n;
	return buf;
}

static int answer(json_t *out, const char *version, const struct iod_cni_error *err)
{
	if (err) {
		out = iod_cni_error_json(version, err);
		iod_json_print(stdout, out, false);
		json_decref(out);
		fflush(stdout);
		return err->code > 0 && err->code < 256 ? err->code : 1;
	}
	if (out)
		iod_json_print(stdout, out, false);
	json_decref(out);
	fflush(stdout);
	return 0;
}

/* One CNI call: the environment, stdin, the result. */
int iod_cli_cni_call(void);
int iod_cli_cni_call(void)
{
	struct iod_cni_env env = {
	    .container_id = getenv("CNI_CONTAINERID"),
	    .netns = getenv("CNI_NETNS"),
	    .ifname = getenv("CNI_IFNAME"),
	    .args = getenv("CNI_ARGS"),
	    .path = getenv("CNI_PATH"),
	};
	struct iod_cni_error err = {0};
	struct iod_cni_conf conf = {0};
	json_t *out = NULL;
	size_t len = 0;
	int rc;

	if (iod_cni_cmd_parse(getenv("CNI_COMMAND"), &env.cmd, &err))
		return answer(NULL, NULL, &err);
	char *text = read_stdin(&len);
	if (!text) {
		iod_cni_fail(&err, IOD_CNI_E_IO, "I/O failure", "reading stdin: out of memory");
		return answer(NULL, NULL, &err);
	}
	if (env.cmd == IOD_CNI_VERSION && len == 0) { /* no config: the latest */
		free(text);
		return answer(iod_cni_version_json(NULL), NULL, NULL);
	}
	rc = iod_cni_conf_parse(text, len, env.cmd, &conf, &err);
	free(text);
	if (!rc)
		rc = iod_cni_env_check(&env, &err);
	if (!rc)
		rc = iod_cni_run(&env, &conf, &out, &err);
	rc = answer(out, conf.version, rc ? &err : NULL);
	iod_cni_conf_free(&conf);
	return rc;
}

int cmd_cni(int argc, char **argv)
{
	if (getenv("CNI_COMMAND") && argc <= 1)
		return iod_cli_cni_call();
	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return IOD_EXIT_OK;
	}
	if (argc >= 2 && !strcmp(argv[1], "install"))
		return install(argc - 1, argv + 1);
	usage(stderr);
	return IOD_EXIT_INVALID;
}
