/*
 * harness.h: the in-repo test runner every unit and sim test program uses.
 *
 * A test file defines TEST(name) functions; they register themselves before
 * main() and run in file order. CHECK() records a failure with file:line and
 * returns from the test; SKIP() records why a test cannot run here (no root,
 * no network namespaces). Each program ends with "RESULT <pass> <fail> <skip>",
 * which scripts/run-tests.sh sums into the final "N passed, N failed" line.
 * A test never prints on success: the runner prints one line per test.
 */
#ifndef IOD_TEST_HARNESS_H
#define IOD_TEST_HARNESS_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*iod_test_fn)(void);

void iod_test_register(const char *file, const char *name, iod_test_fn fn);
void iod_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void iod_test_skip(const char *reason);
/* Nonzero once the running test has failed: lets a helper stop early. */
int iod_test_failed(void);
/* A path under a fresh per-test temporary directory (removed at exit). */
const char *iod_test_tmpdir(void);
/* Run a shell command line; returns its exit status or -1. */
int iod_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define TEST(name)                                                     \
	static void test_##name(void);                                 \
	__attribute__((constructor)) static void test_reg_##name(void) \
	{                                                              \
		iod_test_register(__FILE__, #name, test_##name);       \
	}                                                              \
	static void test_##name(void)

#define CHECK(cond)                                                     \
	do {                                                            \
		if (!(cond)) {                                          \
			iod_test_fail(__FILE__, __LINE__, "%s", #cond); \
			return;                                         \
		}                                                       \
	} while (0)

#define CHECK_MSG(cond, ...)                                            \
	do {                                                            \
		if (!(cond)) {                                          \
			iod_test_fail(__FILE__, __LINE__, __VA_ARGS__); \
			return;                                         \
		}                                                       \
	} while (0)

#define CHECK_EQ(a, b)                                                                       \
	do {                                                                                 \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b);              \
		if (check_a_ != check_b_) {                                                  \
			iod_test_fail(__FILE__, __LINE__, "%s == %s (%lld != %lld)", #a, #b, \
			              check_a_, check_b_);                                   \
			return;                                                              \
		}                                                                            \
	} while (0)

#define CHECK_U64(a, b)                                                                            \
	do {                                                                                       \
		uint64_t check_a_ = (uint64_t)(a), check_b_ = (uint64_t)(b);                       \
		if (check_a_ != check_b_) {                                                        \
			iod_test_fail(__FILE__, __LINE__, "%s == %s (%" PRIu64 " != %" PRIu64 ")", \
			              #a, #b, check_a_, check_b_);                                 \
			return;                                                                    \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b)                                                                          \
	do {                                                                                     \
		const char *check_a_ = (a), *check_b_ = (b);                                     \
		if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_)) {                      \
			iod_test_fail(__FILE__, __LINE__, "%s == %s (\"%s\" != \"%s\")", #a, #b, \
			              check_a_ ? check_a_ : "(null)",                            \
			              check_b_ ? check_b_ : "(null)");                           \
			return;                                                                  \
		}                                                                                \
	} while (0)

#define CHECK_CONTAINS(hay, needle)                                                         \
	do {                                                                                \
		const char *check_h_ = (hay), *check_n_ = (needle);                         \
		if (!check_h_ || !strstr(check_h_, check_n_)) {                             \
			iod_test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", \
			              check_h_ ? check_h_ : "(null)", check_n_);            \
			return;                                                             \
		}                                                                           \
	} while (0)

#define SKIP(reason)                   \
	do {                           \
		iod_test_skip(reason); \
		return;                \
	} while (0)

#endif
