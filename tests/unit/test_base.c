/*
 * test_base.c: unit tests for base/: units, bitmaps, map, rng, allocators,
 * strings, errors and the manual clock.
 */
#include "harness.h"
#include "iod/base.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

TEST(size_decimal_and_binary)
{
	uint64_t v;
	CHECK_EQ(iod_parse_size("64GB", &v, NULL), 0);
	CHECK_U64(v, 64000000000ull);
	CHECK_EQ(iod_parse_size("64GiB", &v, NULL), 0);
	CHECK_U64(v, 64ull << 30);
	CHECK_EQ(iod_parse_size("1.5 GB", &v, NULL), 0);
	CHECK_U64(v, 1500000000ull);
	CHECK_EQ(iod_parse_size("512", &v, NULL), 0);
	CHECK_U64(v, 512);
	CHECK_EQ(iod_parse_size("32Gi", &v, NULL), 0);
	CHECK_U64(v, 32ull << 30);
	CHECK_EQ(iod_parse_size("128gb", &v, NULL), 0);
	CHECK_U64(v, 128000000000ull);
}

TEST(size_errors)
{
	struct iod_err e = {0};
	uint64_t v;
	CHECK_EQ(iod_parse_size("-1GB", &v, &e), -ERANGE);
	CHECK_CONTAINS(e.msg, "negative");
	CHECK_EQ(iod_parse_size("GB", &v, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "no number");
	CHECK_EQ(iod_parse_size("", &v, &e), -EINVAL);
	CHECK_EQ(iod_parse_size("20000000PB", &v, &e), -ERANGE);
	CHECK_CONTAINS(e.msg, "too large");
	CHECK_EQ(iod_parse_size("99999999999999999999999", &v, &e), -ERANGE);
	CHECK_EQ(iod_parse_size("10XB", &v, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "unknown unit");
	CHECK_EQ(iod_parse_size("0.5B", &v, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "whole");
}

TEST(bandwidth)
{
	uint64_t v;
	struct iod_err e = {0};
	CHECK_EQ(iod_parse_bandwidth("100Gbps", &v, NULL), 0);
	CHECK_U64(v, 100000000000ull);
	CHECK_EQ(iod_parse_bandwidth("2.5 Tbps", &v, NULL), 0);
	CHECK_U64(v, 2500000000000ull);
	CHECK_EQ(iod_parse_bandwidth("10 Mb/s", &v, NULL), 0);
	CHECK_U64(v, 10000000ull);
	CHECK_EQ(iod_parse_bandwidth("100", &v, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "no unit");
}

TEST(duration)
{
	uint64_t v;
	struct iod_err e = {0};
	CHECK_EQ(iod_parse_duration("5us", &v, NULL), 0);
	CHECK_U64(v, 5000);
	CHECK_EQ(iod_parse_duration("5\xc2\xb5s", &v, NULL), 0);
	CHECK_U64(v, 5000);
	CHECK_EQ(iod_parse_duration("1.5ms", &v, NULL), 0);
	CHECK_U64(v, 1500000);
	CHECK_EQ(iod_parse_duration("2m", &v, NULL), 0);
	CHECK_U64(v, 120000000000ull);
	CHECK_EQ(iod_parse_duration("1h", &v, NULL), 0);
	CHECK_U64(v, 3600000000000ull);
	CHECK_EQ(iod_parse_duration("30", &v, &e), -EINVAL);
	CHECK_EQ(iod_parse_duration("0.1ns", &v, &e), -EINVAL);
	CHECK_EQ(iod_parse_duration("3M", &v, &e), -EINVAL);
}

TEST(percent)
{
	uint32_t bp;
	struct iod_err e = {0};
	CHECK_EQ(iod_parse_percent("20%", &bp, NULL), 0);
	CHECK_EQ(bp, 2000);
	CHECK_EQ(iod_parse_percent("12.5%", &bp, NULL), 0);
	CHECK_EQ(bp, 1250);
	CHECK_EQ(iod_parse_percent("101%", &bp, &e), -ERANGE);
	CHECK_EQ(iod_parse_percent("20", &bp, &e), -EINVAL);
	CHECK_EQ(iod_parse_percent("-5%", &bp, &e), -ERANGE);
	CHECK_EQ(iod_parse_percent("1.234%", &bp, &e), -EINVAL);
}

TEST(bounds)
{
	struct iod_bound b;
	CHECK_EQ(iod_parse_bound("<5us", IOD_UNIT_DURATION, &b, NULL), 0);
	CHECK_EQ(b.op, IOD_CMP_LT);
	CHECK_U64(b.value, 5000);
	CHECK(iod_bound_holds(&b, 4999));
	CHECK(!iod_bound_holds(&b, 5000));
	CHECK_EQ(iod_parse_bound(">= 100Gbps", IOD_UNIT_BANDWIDTH, &b, NULL), 0);
	CHECK_EQ(b.op, IOD_CMP_GE);
	CHECK(iod_bound_holds(&b, 100000000000ull));
	CHECK_EQ(iod_parse_bound("<=1GB", IOD_UNIT_SIZE, &b, NULL), 0);
	CHECK_EQ(b.op, IOD_CMP_LE);
	CHECK_EQ(iod_parse_bound(">2ms", IOD_UNIT_DURATION, &b, NULL), 0);
	CHECK_EQ(b.op, IOD_CMP_GT);
	CHECK_EQ(iod_parse_bound("64GB", IOD_UNIT_SIZE, &b, NULL), 0);
	CHECK_EQ(b.op, IOD_CMP_EQ);
	CHECK(iod_parse_bound("<", IOD_UNIT_DURATION, &b, NULL) < 0);
}

TEST(format_units)
{
	char buf[32];
	iod_format_size(64000000000ull, buf, sizeof(buf));
	CHECK_STR(buf, "64 GB");
	iod_format_bandwidth(100000000000ull, buf, sizeof(buf));
	CHECK_STR(buf, "100 Gbps");
	iod_format_duration(1500000, buf, sizeof(buf));
	CHECK_STR(buf, "1.5 ms");
	iod_format_size(0, buf, sizeof(buf));
	CHECK_STR(buf, "0 B");
}

TEST(bitmap_ops_and_text)
{
	struct iod_bitmap a, b;
	char buf[128];
	iod_bitmap_zero(&a);
	iod_bitmap_set_range(&a, 0, 3);
	iod_bitmap_set(&a, 8);
	iod_bitmap_set(&a, 10);
	iod_bitmap_set(&a, 11);
	iod_bitmap_set(&a, 5000); /* out of range: ignored, not a crash */
	CHECK_EQ(iod_bitmap_count(&a), 7);
	CHECK_EQ(iod_bitmap_format(&a, buf, sizeof(buf)), 0);
	CHECK_STR(buf, "0-3,8,10-11");
	CHECK_EQ(iod_bitmap_parse(buf, &b, NULL), 0);
	CHECK(iod_bitmap_equal(&a, &b));
	CHECK_EQ(iod_bitmap_next(&a, 4), 8);
	CHECK_EQ(iod_bitmap_next(&a, 12), -1);
	iod_bitmap_parse("2-9", &b, NULL);
	iod_bitmap_and(&b, &a);
	iod_bitmap_format(&b, buf, sizeof(buf));
	CHECK_STR(buf, "2-3,8");
	CHECK(iod_bitmap_subset(&b, &a));
	iod_bitmap_parse("1023", &b, NULL);
	CHECK(iod_bitmap_test(&b, 1023));
	struct iod_err e = {0};
	CHECK(iod_bitmap_parse("1024", &b, &e) < 0);
	CHECK(iod_bitmap_parse("3-1", &b, &e) < 0);
	CHECK(iod_bitmap_parse("1,,2", &b, &e) < 0);
	CHECK(iod_bitmap_parse("x", &b, &e) < 0);
	CHECK_EQ(iod_bitmap_format(&a, buf, 4), -ENOSPC);
	/* every index, no ranges (the GPU env lists) */
	CHECK_EQ(iod_bitmap_format_list(&a, buf, sizeof(buf)), 0);
	CHECK_STR(buf, "0,1,2,3,8,10,11");
	iod_bitmap_zero(&b);
	CHECK_EQ(iod_bitmap_format_list(&b, buf, sizeof(buf)), 0);
	CHECK_STR(buf, "");
	CHECK_EQ(iod_bitmap_format_list(&a, buf, 6), -ENOSPC);
}

TEST(map_put_get_del_against_model)
{
	struct iod_map m;
	struct iod_rng r;
	static uint64_t model[4096];
	CHECK_EQ(iod_map_init(&m, 4, 0), 0);
	iod_rng_seed(&r, 7);
	for (int i = 0; i < 200000; i++) {
		uint64_t k = iod_rng_below(&r, 4096);
		uint64_t op = iod_rng_below(&r, 3);
		uint64_t v;
		if (op == 0) {
			CHECK_EQ(iod_map_put(&m, k + 1, (uint64_t)i + 1), 0);
			model[k] = (uint64_t)i + 1;
		} else if (op == 1) {
			int rc = iod_map_del(&m, k + 1);
			CHECK_EQ(rc, model[k] ? 0 : -ENOENT);
			model[k] = 0;
		} else {
			int rc = iod_map_get(&m, k + 1, &v);
			CHECK_EQ(rc, model[k] ? 0 : -ENOENT);
			if (!rc)
				CHECK_U64(v, model[k]);
		}
	}
	uint32_t pos = 0, n = 0;
	uint64_t k, v;
	while (iod_map_next(&m, &pos, &k, &v)) {
		CHECK_U64(model[k - 1], v);
		n++;
	}
	CHECK_EQ(n, m.count);
	iod_map_destroy(&m);
}

TEST(map_bounded)
{
	struct iod_map m;
	CHECK_EQ(iod_map_init(&m, 4, 3), 0);
	CHECK_EQ(iod_map_put(&m, 1, 1), 0);
	CHECK_EQ(iod_map_put(&m, 2, 1), 0);
	CHECK_EQ(iod_map_put(&m, 3, 1), 0);
	CHECK_EQ(iod_map_put(&m, 4, 1), -ENOSPC);
	CHECK_EQ(iod_map_put(&m, 3, 9), 0); /* replace still works when full */
	iod_map_destroy(&m);
}

TEST(rng_deterministic_and_uniform)
{
	struct iod_rng a, b, c;
	iod_rng_seed(&a, 42);
	iod_rng_seed(&b, 42);
	iod_rng_seed(&c, 43);
	int same = 1, differ = 0;
	for (int i = 0; i < 100; i++) {
		uint64_t x = iod_rng_next(&a), y = iod_rng_next(&b), z = iod_rng_next(&c);
		same &= x == y;
		differ |= x != z;
	}
	CHECK(same);
	CHECK(differ);
	/* Chi-square-ish: 10 buckets of 100k draws within 2% of the mean. */
	unsigned hist[10] = {0};
	for (int i = 0; i < 100000; i++)
		hist[iod_rng_below(&a, 10)]++;
	for (int i = 0; i < 10; i++)
		CHECK_MSG(hist[i] > 9800 && hist[i] < 10200, "bucket %d = %u", i, hist[i]);
	double sum = 0;
	for (int i = 0; i < 100000; i++)
		sum += iod_rng_exp(&a, 3.0);
	CHECK(sum / 100000 > 2.95 && sum / 100000 < 3.05);
}

TEST(arena_and_pool)
{
	struct iod_arena a;
	iod_arena_init(&a, 128, 1024);
	char *s = iod_arena_strdup(&a, "hello");
	CHECK_STR(s, "hello");
	CHECK(((uintptr_t)iod_arena_alloc(&a, 3) & 15) == 0);
	CHECK(iod_arena_alloc(&a, 4096) == NULL); /* past the limit */
	iod_arena_free(&a);

	struct iod_pool p;
	CHECK_EQ(iod_pool_init(&p, 24, 3), 0);
	void *x = iod_pool_get(&p), *y = iod_pool_get(&p), *z = iod_pool_get(&p);
	CHECK(x && y && z);
	CHECK(iod_pool_get(&p) == NULL);
	CHECK_EQ(iod_pool_index(&p, x), 0);
	CHECK_EQ(iod_pool_in_use(&p), 3);
	iod_pool_put(&p, y);
	CHECK(iod_pool_get(&p) == y);
	iod_pool_destroy(&p);
}

TEST(strings_and_suggest)
{
	static const char *const keys[] = {"replicas", "resources", "placement", "name"};
	CHECK_STR(iod_suggest("replica", keys, 4), "replicas");
	CHECK_STR(iod_suggest("resorces", keys, 4), "resources");
	CHECK(iod_suggest("zzzzzz", keys, 4) == NULL);
	CHECK_EQ(iod_edit_distance("kitten", "sitting", 10), 3);
	char buf[4];
	CHECK_EQ(iod_strlcpy(buf, "abcdef", sizeof(buf)), -ENOSPC);
	CHECK_STR(buf, "abc");
	struct iod_buf b;
	iod_buf_init(&b);
	for (int i = 0; i < 1000; i++)
		iod_buf_printf(&b, "%d,", i);
	CHECK(b.len > 3000);
	CHECK(b.data[b.len] == 0);
	iod_buf_free(&b);
}

TEST(errors_and_clock)
{
	struct iod_err e = {0};
	CHECK_EQ(iod_err_set(&e, -EINVAL, "bad %s", "thing"), -EINVAL);
	iod_err_wrap(&e, "file.yaml");
	CHECK_STR(e.msg, "file.yaml: bad thing");
	CHECK_EQ(iod_err_set(NULL, -ENOENT, "x"), -ENOENT);
	/* its own message as an argument (validate.c's "fault/%s: %s", e->msg):
	 * formatting into the buffer it reads from garbled it */
	iod_err_set(&e, -EINVAL, "\"action\" is delay or abort");
	CHECK_EQ(iod_err_set(&e, -EPROTO, "fault/%s: %s", "f1", e.msg), -EPROTO);
	CHECK_STR(e.msg, "fault/f1: \"action\" is delay or abort");
	uint64_t t0 = iod_clock_now_ns(), t1 = iod_clock_now_ns();
	CHECK(t1 >= t0);
	CHECK(t0 > 0);
}

TEST(json_helpers)
{
#define J "{\"a\": 1, \"b\": \"x\", \"c\": true}"
	json_t *v;
	struct iod_err e = {0};
	CHECK_EQ(iod_json_parse(J, strlen(J), &v, &e), 0);
	uint64_t a;
	const char *b;
	bool c;
	CHECK_EQ(iod_json_get_u64(v, "a", &a), 0);
	CHECK_U64(a, 1);
	CHECK_EQ(iod_json_get_str(v, "b", &b), 0);
	CHECK_STR(b, "x");
	CHECK_EQ(iod_json_get_bool(v, "c", &c), 0);
	CHECK(c);
	CHECK_EQ(iod_json_get_str(v, "a", &b), -EINVAL);
	CHECK_EQ(iod_json_get_str(v, "zz", &b), -ENOENT);
	char *s = iod_json_string(v, true);
	CHECK_STR(s, "{\"a\":1,\"b\":\"x\",\"c\":true}");
	free(s);
	json_decref(v);
	CHECK(iod_json_parse("{\"a\": ", 6, &v, &e) < 0);
	CHECK_CONTAINS(e.msg, "invalid JSON");
	CHECK(iod_json_parse("{\"a\":1,\"a\":2}", 13, &v, &e) < 0);
}

static void maglev_keys(uint64_t *keys, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		keys[i] = iod_hash_u64(1000 + i);
}

TEST(maglev_balance_and_disruption)
{
	enum { N = 10, FLOWS = 200000 };
	uint64_t keys[N];
	struct iod_maglev a = {0}, b = {0};
	maglev_keys(keys, N);
	CHECK_EQ(iod_maglev_build(&a, 65537, keys, NULL, N), 0);
	unsigned count[N] = {0};
	for (uint32_t s = 0; s < a.table_size; s++)
		count[a.table[s]]++;
	for (int i = 0; i < N; i++) /* each owns 1/N of slots within 1% */
		CHECK_MSG(count[i] > 6488 && count[i] < 6620, "backend %d owns %u", i, count[i]);
	/* Remove backend 3: flows on other backends mostly stay. */
	uint64_t keys2[N - 1];
	for (int i = 0, j = 0; i < N; i++)
		if (i != 3)
			keys2[j++] = keys[i];
	CHECK_EQ(iod_maglev_build(&b, 65537, keys2, NULL, N - 1), 0);
	unsigned moved = 0, was_on_3 = 0;
	for (uint64_t f = 0; f < FLOWS; f++) {
		uint64_t h = iod_hash_u64(f * 7919 + 1);
		uint32_t x = iod_maglev_lookup(&a, h), y = iod_maglev_lookup(&b, h);
		uint64_t kx = keys[x], ky = keys2[y];
		if (x == 3)
			was_on_3++;
		else if (kx != ky)
			moved++;
	}
	/* Flows of the removed backend must move (~1/N); others move rarely. */
	CHECK(was_on_3 > FLOWS / N * 9 / 10 && was_on_3 < FLOWS / N * 11 / 10);
	CHECK_MSG(moved < FLOWS / 50, "moved %u of %u", moved, FLOWS);
	iod_maglev_free(&a);
	iod_maglev_free(&b);
}

TEST(maglev_weights_and_errors)
{
	uint64_t keys[3];
	uint32_t w[3] = {1, 2, 0};
	struct iod_maglev mg = {0};
	maglev_keys(keys, 3);
	CHECK_EQ(iod_maglev_build(&mg, 10007, keys, w, 3), 0);
	unsigned c[3] = {0};
	for (uint32_t s = 0; s < mg.table_size; s++)
		c[mg.table[s]]++;
	CHECK_EQ(c[2], 0);
	CHECK_MSG(c[1] > c[0] * 19 / 10 && c[1] < c[0] * 21 / 10, "%u vs %u", c[1], c[0]);
	CHECK_EQ(iod_maglev_build(&mg, 10000, keys, NULL, 3), -EINVAL); /* not prime */
	CHECK_EQ(iod_maglev_build(&mg, 7, keys, NULL, 0), 0);
	CHECK_EQ(iod_maglev_lookup(&mg, 5), UINT32_MAX);
	iod_maglev_free(&mg);
}

/* In a child with RLIMIT_NOFILE low and its table full: a queued
 * connection is shed (accepted and closed: the client sees EOF), the
 * listener is no longer readable (its loop would sleep, not spin), and
 * once descriptors are free again the next connection is accepted.
 * Exit status: 0 pass, else the failed step. */
static int emfile_child(void)
{
	struct rlimit rl = {.rlim_cur = 32, .rlim_max = 32};
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 16) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl))
		return 10;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return 11;
	int reserve = iod_fd_reserve_open();
	int cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (reserve < 0 || cli < 0 || connect(cli, (struct sockaddr *)&sa, sizeof(sa)))
		return 12;
	int fill[64], nfill = 0;
	while (nfill < 64 && (fill[nfill] = dup(lfd)) >= 0)
		nfill++;
	if (errno != EMFILE)
		return 13;
	int fd = iod_fd_accept(lfd, NULL, NULL, SOCK_CLOEXEC, &reserve);
	if (fd != -ECONNABORTED)
		return 14;
	struct pollfd pf = {.fd = lfd, .events = POLLIN};
	if (poll(&pf, 1, 50) != 0)
		return 15; /* still readable: the caller's loop would spin */
	char c;
	if (read(cli, &c, 1) > 0)
		return 16; /* the shed client must see its connection end */
	if (reserve < 0)
		return 17;
	close(cli);
	close(fill[--nfill]);
	close(fill[--nfill]);
	cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cli < 0 || connect(cli, (struct sockaddr *)&sa, sizeof(sa)))
		return 18;
	if (poll(&pf, 1, 1000) != 1)
		return 19;
	fd = iod_fd_accept(lfd, NULL, NULL, SOCK_CLOEXEC, &reserve);
	return fd >= 0 ? 0 : 20;
}

TEST(fd_accept_sheds_at_emfile_instead_of_spinning)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(emfile_child());
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
}

TEST(fd_limit_raised_to_the_hard_limit)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct rlimit rl;
		uint64_t soft = 0;
		if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_max < 64)
			_exit(1);
		struct rlimit low = {.rlim_cur = 40, .rlim_max = rl.rlim_max};
		if (setrlimit(RLIMIT_NOFILE, &low) || iod_fd_limit_raise(&soft))
			_exit(2);
		getrlimit(RLIMIT_NOFILE, &rl);
		_exit(rl.rlim_cur == rl.rlim_max && soft == rl.rlim_max ? 0 : 3);
	}
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
}

static void *small_stack_thread(void *arg)
{
	return arg;
}

/* Static thread-local storage is paid by every thread's stack: 268 KiB of
 * __thread buffers (libiod-xfer's metadata blobs) once made every
 * pthread_create with a 256 KiB stack fail with EINVAL, and `iod proxy
 * backend` (tests/integration/mesh_proxy.sh) answered nothing. */
TEST(threads_start_with_256k_stacks)
{
	pthread_attr_t a;
	pthread_t t;
	static int token;
	void *out = NULL;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 * 1024);
	int rc = pthread_create(&t, &a, small_stack_thread, &token);
	pthread_attr_destroy(&a);
	CHECK_MSG(rc == 0, "pthread_create with a 256 KiB stack: %s (static TLS too large?)",
	          strerror(rc));
	pthread_join(t, &out);
	CHECK(out == &token);
}
