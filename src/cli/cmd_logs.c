/*
 * cmd_logs.c: `iod logs REPLICA [-f]`: print a replica's output (stdout and
 * stderr, as the sandbox's init wrote them to rotating files), oldest rotated
 * file first; -f keeps following across rotations. Thin shell over files.
 */
#include "cli.h"
#include "iod/agent_run.h"
#include "iod/state.h"

#include <fcntl.h>
#include <glob.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod logs REPLICA [-f] [--data-dir DIR] [--all]\n\n"
	           "Print a replica's output (stdout and stderr).\n"
	           "  -f, --follow      keep printing new output (Ctrl-C to stop)\n"
	           "  --all             include rotated files (oldest first)\n"
	           "  --data-dir DIR    the agent's data dir (default ~/.local/share/iod, then\n"
	           "                    the nodes of `iod up`; IOD_DATA_DIR overrides it)\n");
}

void iod_up_state_dir(char *buf, size_t len);

/* A replica of `iod up` lives under <state>/node-N/replicas/NAME: the newest
 * log wins (a replica that moved has an older one on its previous node). */
static bool find_in_cluster(const char *name, char *path, size_t len)
{
	char state[IOD_AGENT_PATH_MAX], pat[IOD_AGENT_PATH_MAX + 128];
	glob_t g;
	time_t best = 0;
	bool found = false;
	iod_up_state_dir(state, sizeof(state));
	snprintf(pat, sizeof(pat), "%s/node-*/replicas/%s/log", state, name);
	if (glob(pat, 0, NULL, &g))
		return false;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		struct stat st;
		if (!stat(g.gl_pathv[i], &st) && (!found || st.st_mtime >= best)) {
			best = st.st_mtime;
			found = !iod_strlcpy(path, g.gl_pathv[i], len);
		}
	}
	globfree(&g);
	return found;
}

static volatile sig_atomic_t stop;
static void on_sig(int s)
{
	(void)s;
	stop = 1;
}

static off_t copy_from(const char *path, off_t off)
{
	char buf[65536];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return off;
	if (lseek(fd, off, SEEK_SET) < 0) {
		close(fd);
		return off;
	}
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		fwrite(buf, 1, (size_t)n, stdout);
		off += n;
	}
	close(fd);
	fflush(stdout);
	return off;
}

int cmd_logs(int argc, char **argv)
{
	static const struct option opts[] = {{"follow", no_argument, 0, 'f'},
	                                     {"data-dir", required_argument, 0, 'd'},
	                                     {"all", no_argument, 0, 'a'},
	                                     {"help", no_argument, 0, 'h'},
	                                     {0, 0, 0, 0}};
	char dir[IOD_AGENT_PATH_MAX], path[IOD_AGENT_PATH_MAX], rot[IOD_AGENT_PATH_MAX + 8];
	const char *home = getenv("HOME"), *env = getenv("IOD_DATA_DIR");
	bool follow = false, all = false;
	int o;

	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	bool dir_given = env && env[0];
	if (dir_given)
		snprintf(dir, sizeof(dir), "%s", env);
	else
		snprintf(dir, sizeof(dir), "%s/.local/share/iod", home ? home : "/tmp");
	while ((o = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
		switch (o) {
		case 'f': follow = true; break;
		case 'a': all = true; break;
		case 'd':
			snprintf(dir, sizeof(dir), "%s", optarg);
			dir_given = true;
			break;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	const char *name = argv[optind];
	if (!iod_state_name_valid(name))
		return iod_cli_fail("logs", IOD_EXIT_INVALID,
		                    "\"%s\" is not a replica name (letters, digits, '-', '_', '.'; "
		                    "list replicas with `iod get replicas`)",
		                    name);
	if (iod_agent_replica_path(dir, name, "log", path, sizeof(path)))
		return iod_cli_fail("logs", IOD_EXIT_INVALID, "path too long");
	struct stat st;
	if (stat(path, &st) &&
	    (dir_given || !find_in_cluster(name, path, sizeof(path)) || stat(path, &st)))
		return iod_cli_fail(
		    "logs", IOD_EXIT_INVALID,
		    "no logs for replica \"%s\" in %s%s (is --data-dir the agent's? "
		    "list replicas with `iod get replicas`)",
		    name, dir, dir_given ? "" : " or the `iod up` cluster");
	if (all)
		for (int i = 99; i >= 1; i--) {
			snprintf(rot, sizeof(rot), "%s.%d", path, i);
			copy_from(rot, 0);
		}
	off_t off = copy_from(path, 0);
	ino_t ino = st.st_ino;
	if (!follow)
		return 0;
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	while (!stop) {
		usleep(100000);
		if (stat(path, &st))
			continue;
		if (st.st_ino != ino) { /* rotated: finish the old file, start the new */
			snprintf(rot, sizeof(rot), "%s.1", path);
			copy_from(rot, off);
			ino = st.st_ino;
			off = 0;
		}
		off = copy_from(path, off);
	}
	return 0;
}
