/*
 * cli.c: helpers shared by the command implementations.
 */
#include "cli.h"

#include <string.h>

static const char *const output_names[] = {"text", "json", "yaml", "dot", "matrix", "csv", "wide"};

int iod_cli_output(const char *cmd, const char *value, const char *const *allowed,
                   enum iod_output *out)
{
	for (const char *const *a = allowed; *a; a++) {
		if (strcmp(value, *a) != 0)
			continue;
		for (size_t i = 0; i < IOD_ARRAY_LEN(output_names); i++) {
			if (!strcmp(value, output_names[i])) {
				*out = (enum iod_output)i;
				return 0;
			}
		}
	}
	fprintf(stderr, "iod %s: -o %s is not supported; use one of:", cmd, value);
	for (const char *const *a = allowed; *a; a++)
		fprintf(stderr, " %s", *a);
	fputc('\n', stderr);
	return -EINVAL;
}

int iod_cli_fail(const char *cmd, int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "iod %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int iod_cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return 0;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	}
	return 0;
}
