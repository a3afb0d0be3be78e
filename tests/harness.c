/*
 * harness.c: runs the TEST()s of one test program and prints one line per
 * test and a closing "RESULT <pass> <fail> <skip>" line.
 *
 * Arguments are substrings: only tests whose name contains one of them run.
 * Tests run in registration (file) order, so output is deterministic.
 */
#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#define TESTS_MAX 1024

struct test {
	const char *file; /* source file, for the report */
	const char *name; /* TEST(name) */
	iod_test_fn fn;   /* the body */
};

static struct test tests[TESTS_MAX];
static int tests_n;
static int cur_failed;
static int cur_skipped;
static char cur_reason[512];
static char tmpdir[256];

void iod_test_register(const char *file, const char *name, iod_test_fn fn)
{
	if (tests_n == TESTS_MAX) {
		fprintf(stderr, "harness: more than %d tests\n", TESTS_MAX);
		abort();
	}
	tests[tests_n++] = (struct test){file, name, fn};
}

void iod_test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (cur_failed)
		return;
	cur_failed = 1;
	n = snprintf(cur_reason, sizeof(cur_reason), "%s:%d: ", file, line);
	va_start(ap, fmt);
	vsnprintf(cur_reason + n, sizeof(cur_reason) - (size_t)n, fmt, ap);
	va_end(ap);
}

void iod_test_skip(const char *reason)
{
	cur_skipped = 1;
	snprintf(cur_reason, sizeof(cur_reason), "%s", reason);
}

int iod_test_failed(void)
{
	return cur_failed;
}

const char *iod_test_tmpdir(void)
{
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/iod-test-XXXXXX");
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			abort();
		}
	}
	return tmpdir;
}

int iod_test_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	if (rc == -1)
		return -1;
	return (rc & 0x7f) ? -1 : (rc >> 8) & 0xff;
}

static int selected(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strstr(name, argv[i]))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int pass = 0, fail = 0, skip = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < tests_n; i++) {
		if (!selected(tests[i].name, argc, argv))
			continue;
		cur_failed = cur_skipped = 0;
		cur_reason[0] = 0;
		tests[i].fn();
		if (cur_failed) {
			fail++;
			printf("FAIL %s: %s\n", tests[i].name, cur_reason);
		} else if (cur_skipped) {
			skip++;
			printf("skip %s: %s\n", tests[i].name, cur_reason);
		} else {
			pass++;
			printf("ok   %s\n", tests[i].name);
		}
	}
	if (tmpdir[0]) {
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "harness: could not remove %s\n", tmpdir);
	}
	printf("RESULT %d %d %d\n", pass, fail, skip);
	return fail ? 1 : 0;
}
