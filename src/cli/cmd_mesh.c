/*
 * cmd_mesh.c: `iod mesh SUBCOMMAND`: the seed's spellings of mesh
 * operations. `iod mesh deploy -f FILE` is `iod deploy -f FILE`.
 */
#include "cli.h"

#include <string.h>

int cmd_deploy(int argc, char **argv);

static void usage(FILE *f)
{
	fprintf(f, "usage: iod mesh deploy -f FILE [options]\n\n"
	           "Service-mesh commands.\n"
	           "  deploy   deploy a service topology (same as `iod deploy`; see iod deploy --help)\n");
}

int cmd_mesh(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? IOD_EXIT_INVALID : IOD_EXIT_OK;
	}
	if (!strcmp(argv[1], "deploy"))
		return cmd_deploy(argc - 1, argv + 1);
	fprintf(stderr, "iod mesh: unknown subcommand \"%s\"; try `iod mesh deploy -f FILE`\n",
	        argv[1]);
	return IOD_EXIT_INVALID;
}
