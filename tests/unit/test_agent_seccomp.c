/*
 * test_agent_seccomp.c: seccomp profiles and filters. The OCI / Docker
 * profile parser (spec/seccomp.c) reads every field and refuses what it
 * cannot run, with the place named; the filters the agent compiles
 * (agent/seccomp.c) do what they say when a process loads them: the
 * default allowlist keeps a program's ordinary syscalls and refuses
 * mount, namespaces, module loading and the like; a granted capability
 * re-allows its syscalls; a service's own profile is applied as written;
 * the store compiles each (profile, capabilities) pair once.
 */
#include "harness.h"
#include "iod/agent_run.h"
#include "iod/spec.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *docker_like =
    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":1,"
    "\"archMap\":[{\"architecture\":\"SCMP_ARCH_X86_64\",\"subArchitectures\":"
    "[\"SCMP_ARCH_X86\",\"SCMP_ARCH_X32\"]}],"
    "\"syscalls\":[{\"names\":[\"read\",\"write\",\"exit_group\"],\"action\":\"SCMP_ACT_ALLOW\"},"
    "{\"names\":[\"personality\"],\"action\":\"SCMP_ACT_ALLOW\","
    "\"args\":[{\"index\":0,\"value\":8,\"op\":\"SCMP_CMP_EQ\"}]},"
    "{\"name\":\"clone\",\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,"
    "\"value\":2114060288,\"valueTwo\":0,\"op\":\"SCMP_CMP_MASKED_EQ\"}],"
    "\"excludes\":{\"caps\":[\"CAP_SYS_ADMIN\"]}},"
    "{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ALLOW\",\"includes\":{\"caps\":[\"SYS_ADMIN\"],"
    "\"minKernel\":\"4.8\",\"arches\":[\"SCMP_ARCH_X86_64\"]},\"comment\":\"admins\"}]}";

TEST(profile_parser_reads_every_field)
{
	struct iod_seccomp_profile *p = NULL;
	struct iod_err e = {0};
	CHECK_MSG(iod_seccomp_profile_parse(docker_like, strlen(docker_like), &p, &e) == 0, "%s",
	          e.msg);
	CHECK_EQ(p->default_action, IOD_SECCOMP_ERRNO);
	CHECK_EQ(p->default_errno, 1);
	CHECK(p->arches & (1u << IOD_SECCOMP_ARCH_X86_64));
	CHECK(p->arches & (1u << IOD_SECCOMP_ARCH_X32));
	CHECK_EQ(p->rules_n, 4);
	CHECK_EQ(p->names_n, 6);
	CHECK_EQ(p->rules[0].names_n, 3);
	CHECK_STR(p->names[p->rules[0].names + 2], "exit_group");
	CHECK_EQ(p->rules[1].args_n, 1);
	CHECK_U64(p->rules[1].args[0].value, 8);
	CHECK_EQ(p->rules[1].args[0].op, IOD_SECCOMP_OP_EQ);
	CHECK_STR(p->names[p->rules[2].names], "clone"); /* the old single "name" */
	CHECK_EQ(p->rules[2].args[0].op, IOD_SECCOMP_OP_MASKED_EQ);
	CHECK_U64(p->rules[2].excludes.caps, 1ull << 21);
	CHECK_U64(p->rules[3].includes.caps, 1ull << 21);
	CHECK_EQ(p->rules[3].includes.min_kernel, (4u << 16) | 8);
	iod_seccomp_profile_free(p);
}

TEST(profile_parser_refuses_what_it_cannot_run)
{
	const char *bad[] = {
	    "[]",
	    "{\"syscalls\":[]}",
	    "{\"defaultAction\":\"SCMP_ACT_NOTIFY\"}",
	    "{\"defaultAction\":\"SCMP_ACT_MAYBE\"}",
	    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"colour\":1}",
	    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[],\"action\":\"SCMP_"
	    "ACT_"
	    "ALLOW\"}]}",
	    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"]}]}",
	    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":"
	    "\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":6,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}]}]}",
	    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":"
	    "\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_ALMOST\"}]}]}",
	    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read; rm\"],"
	    "\"action\":\"SCMP_ACT_ALLOW\"}]}",
	    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":[\"read\"],\"action\":"
	    "\"SCMP_ACT_ALLOW\",\"includes\":{\"minKernel\":\"four\"}}]}",
	    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"architectures\":[\"SCMP_ARCH_Z80\"]}",
	    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":-1}",
	};
	const char *want[] = {
	    "object",    "defaultAction", "iod runs",       "iod runs", "unknown key",
	    "names no",  "action",        "index",          "op",       "not a syscall",
	    "minKernel", "SCMP_ARCH",     "defaultErrnoRet"};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		struct iod_seccomp_profile *p = NULL;
		struct iod_err e = {0};
		CHECK_MSG(iod_seccomp_profile_parse(bad[i], strlen(bad[i]), &p, &e) < 0,
		          "case %u accepted", i);
		CHECK_MSG(p == NULL, "case %u handed out a profile", i);
		CHECK_MSG(strstr(e.msg, want[i]), "case %u: \"%s\" lacks \"%s\"", i, e.msg,
		          want[i]);
	}
	/* bounded: more rules than IOD_SECCOMP_RULES_MAX */
	struct iod_buf b;
	iod_buf_init(&b);
	iod_buf_printf(&b, "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[");
	for (int i = 0; i <= IOD_SECCOMP_RULES_MAX; i++)
		iod_buf_printf(&b, "%s{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ALLOW\"}",
		               i ? "," : "");
	iod_buf_printf(&b, "]}");
	struct iod_seccomp_profile *p = NULL;
	struct iod_err e = {0};
	CHECK_EQ(iod_seccomp_profile_parse(b.data, b.len, &p, &e), -E2BIG);
	CHECK_CONTAINS(e.msg, "IOD_SECCOMP_RULES_MAX");
	iod_buf_free(&b);
}

/* In a child: load prog, then run probe; its exit status is the answer. */
static int in_filter(const struct sock_fprog *prog, int (*probe)(void))
{
	pid_t pid = fork();
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog))
			_exit(99);
		_exit(probe());
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Each probe returns 0 when the syscall behaved as the filter should. */
static int p_ordinary(void)
{
	char buf[64];
	return getpid() > 0 && getcwd(buf, sizeof(buf)) && syscall(SYS_personality, 0xffffffff) >= 0
	           ? 0
	           : 1;
}
static int p_mount(void)
{
	return syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, NULL) < 0 && errno == EPERM ? 0 : 1;
}
static int p_unshare(void)
{
	return unshare(0) < 0 && errno == EPERM ? 0
	                                        : 1; /* a no-op unshare: only the filter refuses */
}
static int p_unshare_ok(void)
{
	return unshare(0) == 0 ? 0 : 1;
}
static int p_clone_ns(void)
{
	long r = syscall(SYS_clone, (unsigned long)CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
	if (r == 0)
		_exit(0);
	return r < 0 && errno == EPERM ? 0 : 1;
}
static int p_clone_plain(void)
{
	long r = syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
	if (r == 0)
		_exit(0);
	return r > 0 && waitpid((pid_t)r, NULL, 0) == (pid_t)r ? 0 : 1;
}
static int p_clone3(void)
{
	return syscall(435 /* clone3 */, NULL, 0) < 0 && errno == ENOSYS ? 0 : 1;
}
static int p_modules(void)
{
	return syscall(SYS_finit_module, 0, "", 0) < 0 && errno == EPERM &&
	               syscall(SYS_init_module, NULL, 0, "") < 0 && errno == EPERM &&
	               syscall(SYS_delete_module, "x", 0) < 0 && errno == EPERM &&
	               syscall(SYS_keyctl, 0, 0, 0, 0, 0) < 0 && errno == EPERM &&
	               syscall(SYS_personality, 0x0040000) < 0 && errno == EPERM
	           ? 0
	           : 1;
}
static int p_getcwd_denied(void)
{
	char buf[64];
	return !getcwd(buf, sizeof(buf)) && errno == EPERM && getpid() > 0 ? 0 : 1;
}

TEST(default_filter_allows_programs_and_refuses_the_rest)
{
	struct sock_fprog prog, admin;
	struct iod_err e = {0};
	CHECK_MSG(iod_agent_seccomp_default(0, &prog, &e) == 0, "%s", e.msg);
	CHECK(prog.len > 10 && prog.len < BPF_MAXINSNS);
	CHECK_EQ(in_filter(&prog, p_ordinary), 0);
	CHECK_EQ(in_filter(&prog, p_mount), 0);
	CHECK_EQ(in_filter(&prog, p_unshare), 0);
	CHECK_EQ(in_filter(&prog, p_clone_ns), 0);
	CHECK_EQ(in_filter(&prog, p_clone_plain), 0);
	CHECK_EQ(in_filter(&prog, p_clone3), 0);
	CHECK_EQ(in_filter(&prog, p_modules), 0);
	/* CAP_SYS_ADMIN granted: its syscalls are no longer the filter's to refuse */
	CHECK_MSG(iod_agent_seccomp_default(1ull << 21, &admin, &e) == 0, "%s", e.msg);
	CHECK_EQ(in_filter(&admin, p_unshare_ok), 0);
	free(prog.filter);
	free(admin.filter);
}

TEST(service_profile_is_applied_as_written)
{
	const char *text =
	    "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":"
	    "[\"getcwd\",\"no_such_syscall_anywhere\"],\"action\":\"SCMP_ACT_ERRNO\","
	    "\"errnoRet\":1}]}";
	struct iod_seccomp_profile *p = NULL;
	struct sock_fprog prog;
	struct iod_err e = {0};
	CHECK_EQ(iod_seccomp_profile_parse(text, strlen(text), &p, &e), 0);
	CHECK_MSG(iod_agent_seccomp_profile(p, 0, &prog, &e) == 0, "%s", e.msg);
	CHECK_EQ(in_filter(&prog, p_getcwd_denied), 0);
	free(prog.filter);
	iod_seccomp_profile_free(p);
	/* an allow-everything profile is not a filter: say unconfined instead */
	text = "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}";
	CHECK_EQ(iod_seccomp_profile_parse(text, strlen(text), &p, &e), 0);
	CHECK_EQ(iod_agent_seccomp_profile(p, 0, &prog, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "unconfined");
	iod_seccomp_profile_free(p);
}

TEST(store_compiles_each_filter_once)
{
	struct iod_agent_seccomp_store *s = NULL;
	struct iod_err e = {0};
	uint32_t a, b, c;
	CHECK_MSG(iod_agent_seccomp_store_new(&s, &e) == 0, "%s", e.msg);
	CHECK(iod_agent_seccomp_get(s, 0) != NULL); /* the default, built at start */
	CHECK_EQ(iod_agent_seccomp_store_add(s, NULL, 0, 0, &a, &e), 0);
	CHECK_EQ(a, 0);
	CHECK_EQ(iod_agent_seccomp_store_add(s, docker_like, strlen(docker_like), 0, &b, &e), 0);
	CHECK_EQ(iod_agent_seccomp_store_add(s, docker_like, strlen(docker_like), 0, &c, &e), 0);
	CHECK_EQ(b, c);
	CHECK_EQ(
	    iod_agent_seccomp_store_add(s, docker_like, strlen(docker_like), 1ull << 21, &c, &e),
	    0);
	CHECK(b != c); /* includes/excludes by caps: another filter */
	const struct sock_fprog *x = iod_agent_seccomp_get(s, b);
	CHECK(x && x->len > 0);
	CHECK(iod_agent_seccomp_get(s, 9999) == NULL);
	/* bounded */
	int rc = 0;
	for (uint64_t k = 1; k < 200 && !rc; k++)
		rc = iod_agent_seccomp_store_add(s, NULL, 0, k << 1, &c, &e);
	CHECK_EQ(rc, -ENOSPC);
	CHECK_CONTAINS(e.msg, "IOD_AGENT_SECCOMP_PROFILES_MAX");
	iod_agent_seccomp_store_free(s);
}
