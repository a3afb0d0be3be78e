/*
 * seccomp.c: the replicas' seccomp filters, compiled with libseccomp once
 * and kept as classic BPF programs that every sandbox loads with one
 * prctl(PR_SET_SECCOMP) before it runs the workload.
 *
 * The default filter is an allowlist in the spirit of Docker's default
 * profile (moby/profiles/seccomp/default.json): about 350 syscalls a
 * program needs are allowed and every other one fails with EPERM. Kept out,
 * as there: mount and the new mount API, pivot_root, chroot, unshare,
 * setns and clone with namespace flags (clone3 answers ENOSYS so libc falls
 * back to clone, whose flags a filter can see), module loading, kexec,
 * reboot, swap, the clock setters, acct, quotactl, bpf, perf_event_open,
 * userfaultfd, keyctl, open_by_handle_at, iopl/ioperm, syslog, io_uring
 * (Docker 25 removed it), personality other than the harmless values, and
 * the obsolete calls. As in Docker, a capability the spec grants re-allows
 * the syscalls it is about (CAP_SYS_ADMIN: mount, setns, unshare, ...;
 * CAP_SYS_PTRACE: process_vm_readv, kcmp, ...), else granting it would be
 * pointless. ptrace itself stays allowed, as in Docker on kernels >= 4.8:
 * a replica runs as its own uid in its own PID namespace, so it can trace
 * only its own processes.
 *
 * Filters are built with libseccomp's binary-tree optimization
 * (SCMP_FLTATR_CTL_OPTIMIZE 2), so a syscall is found in O(log n) BPF
 * instructions, and only for the architecture the agent runs on (any other
 * kills the process, libseccomp's default for a foreign architecture).
 * Services may bring their own OCI / Docker JSON profile (spec/seccomp.c
 * parses it; here it is compiled). Each distinct (profile, capabilities)
 * pair is compiled once per agent and kept in a bounded store whose
 * entries never change after they are published, so sandboxes and health
 * checks read them without locks. Shell code: libseccomp and a memfd.
 */
#include "iod/agent_run.h"

#include <linux/filter.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

/* ---- the default allowlist ------------------------------------------------ */

static const char *const allow_default[] = {"accept",
                                            "accept4",
                                            "access",
                                            "adjtimex",
                                            "alarm",
                                            "arch_prctl",
                                            "bind",
                                            "brk",
                                            "cachestat",
                                            "capget",
                                            "capset",
                                            "chdir",
                                            "chmod",
                                            "chown",
                                            "chown32",
                                            "clock_adjtime",
                                            "clock_adjtime64",
                                            "clock_getres",
                                            "clock_getres_time64",
                                            "clock_gettime",
                                            "clock_gettime64",
                                            "clock_nanosleep",
                                            "clock_nanosleep_time64",
                                            "close",
                                            "close_range",
                                            "connect",
                                            "copy_file_range",
                                            "creat",
                                            "dup",
                                            "dup2",
                                            "dup3",
                                            "epoll_create",
                                            "epoll_create1",
                                            "epoll_ctl",
                                            "epoll_ctl_old",
                                            "epoll_pwait",
                                            "epoll_pwait2",
                                            "epoll_wait",
                                            "epoll_wait_old",
                                            "eventfd",
                                            "eventfd2",
                                            "execve",
                                            "execveat",
                                            "exit",
                                            "exit_group",
                                            "faccessat",
                                            "faccessat2",
                                            "fadvise64",
                                            "fadvise64_64",
                                            "fallocate",
                                            "fanotify_mark",
                                            "fchdir",
                                            "fchmod",
                                            "fchmodat",
                                            "fchmodat2",
                                            "fchown",
                                            "fchown32",
                                            "fchownat",
                                            "fcntl",
                                            "fcntl64",
                                            "fdatasync",
                                            "fgetxattr",
                                            "flistxattr",
                                            "flock",
                                            "fork",
                                            "fremovexattr",
                                            "fsetxattr",
                                            "fstat",
                                            "fstat64",
                                            "fstatat64",
                                            "fstatfs",
                                            "fstatfs64",
                                            "fsync",
                                            "ftruncate",
                                            "ftruncate64",
                                            "futex",
                                            "futex_requeue",
                                            "futex_time64",
                                            "futex_wait",
                                            "futex_waitv",
                                            "futex_wake",
                                            "futimesat",
                                            "get_mempolicy",
                                            "get_robust_list",
                                            "get_thread_area",
                                            "getcpu",
                                            "getcwd",
                                            "getdents",
                                            "getdents64",
                                            "getegid",
                                            "getegid32",
                                            "geteuid",
                                            "geteuid32",
                                            "getgid",
                                            "getgid32",
                                            "getgroups",
                                            "getgroups32",
                                            "getitimer",
                                            "getpeername",
                                            "getpgid",
                                            "getpgrp",
                                            "getpid",
                                            "getppid",
                                            "getpriority",
                                            "getrandom",
                                            "getresgid",
                                            "getresgid32",
                                            "getresuid",
                                            "getresuid32",
                                            "getrlimit",
                                            "getrusage",
                                            "getsid",
                                            "getsockname",
                                            "getsockopt",
                                            "gettid",
                                            "gettimeofday",
                                            "getuid",
                                            "getuid32",
                                            "getxattr",
                                            "inotify_add_watch",
                                            "inotify_init",
                                            "inotify_init1",
                                            "inotify_rm_watch",
                                            "io_cancel",
                                            "io_destroy",
                                            "io_getevents",
                                            "io_pgetevents",
                                            "io_pgetevents_time64",
                                            "io_setup",
                                            "io_submit",
                                            "ioctl",
                                            "ioprio_get",
                                            "ioprio_set",
                                            "ipc",
                                            "kill",
                                            "landlock_add_rule",
                                            "landlock_create_ruleset",
                                            "landlock_restrict_self",
                                            "lchown",
                                            "lchown32",
                                            "lgetxattr",
                                            "link",
                                            "linkat",
                                            "listen",
                                            "listxattr",
                                            "llistxattr",
                                            "_llseek",
                                            "lremovexattr",
                                            "lseek",
                                            "lsetxattr",
                                            "lstat",
                                            "lstat64",
                                            "madvise",
                                            "map_shadow_stack",
                                            "mbind",
                                            "membarrier",
                                            "memfd_create",
                                            "memfd_secret",
                                            "mincore",
                                            "mkdir",
                                            "mkdirat",
                                            "mknod",
                                            "mknodat",
                                            "mlock",
                                            "mlock2",
                                            "mlockall",
                                            "mmap",
                                            "mmap2",
                                            "mprotect",
                                            "mq_getsetattr",
                                            "mq_notify",
                                            "mq_open",
                                            "mq_timedreceive",
                                            "mq_timedreceive_time64",
                                            "mq_timedsend",
                                            "mq_timedsend_time64",
                                            "mq_unlink",
                                            "mremap",
                                            "msgctl",
                                            "msgget",
                                            "msgrcv",
                                            "msgsnd",
                                            "msync",
                                            "munlock",
                                            "munlockall",
                                            "munmap",
                                            "name_to_handle_at",
                                            "nanosleep",
                                            "newfstatat",
                                            "_newselect",
                                            "open",
                                            "openat",
                                            "openat2",
                                            "pause",
                                            "pidfd_open",
                                            "pidfd_send_signal",
                                            "pipe",
                                            "pipe2",
                                            "pkey_alloc",
                                            "pkey_free",
                                            "pkey_mprotect",
                                            "poll",
                                            "ppoll",
                                            "ppoll_time64",
                                            "prctl",
                                            "pread64",
                                            "preadv",
                                            "preadv2",
                                            "prlimit64",
                                            "process_mrelease",
                                            "pselect6",
                                            "pselect6_time64",
                                            "ptrace",
                                            "pwrite64",
                                            "pwritev",
                                            "pwritev2",
                                            "read",
                                            "readahead",
                                            "readlink",
                                            "readlinkat",
                                            "readv",
                                            "recv",
                                            "recvfrom",
                                            "recvmmsg",
                                            "recvmmsg_time64",
                                            "recvmsg",
                                            "remap_file_pages",
                                            "removexattr",
                                            "rename",
                                            "renameat",
                                            "renameat2",
                                            "restart_syscall",
                                            "rmdir",
                                            "rseq",
                                            "rt_sigaction",
                                            "rt_sigpending",
                                            "rt_sigprocmask",
                                            "rt_sigqueueinfo",
                                            "rt_sigreturn",
                                            "rt_sigsuspend",
                                            "rt_sigtimedwait",
                                            "rt_sigtimedwait_time64",
                                            "rt_tgsigqueueinfo",
                                            "sched_get_priority_max",
                                            "sched_get_priority_min",
                                            "sched_getaffinity",
                                            "sched_getattr",
                                            "sched_getparam",
                                            "sched_getscheduler",
                                            "sched_rr_get_interval",
                                            "sched_rr_get_interval_time64",
                                            "sched_setaffinity",
                                            "sched_setattr",
                                            "sched_setparam",
                                            "sched_setscheduler",
                                            "sched_yield",
                                            "seccomp",
                                            "select",
                                            "semctl",
                                            "semget",
                                            "semop",
                                            "semtimedop",
                                            "semtimedop_time64",
                                            "send",
                                            "sendfile",
                                            "sendfile64",
                                            "sendmmsg",
                                            "sendmsg",
                                            "sendto",
                                            "set_mempolicy",
                                            "set_mempolicy_home_node",
                                            "set_robust_list",
                                            "set_thread_area",
                                            "set_tid_address",
                                            "setfsgid",
                                            "setfsgid32",
                                            "setfsuid",
                                            "setfsuid32",
                                            "setgid",
                                            "setgid32",
                                            "setgroups",
                                            "setgroups32",
                                            "setitimer",
                                            "setpgid",
                                            "setpriority",
                                            "setregid",
                                            "setregid32",
                                            "setresgid",
                                            "setresgid32",
                                            "setresuid",
                                            "setresuid32",
                                            "setreuid",
                                            "setreuid32",
                                            "setrlimit",
                                            "setsid",
                                            "setsockopt",
                                            "setuid",
                                            "setuid32",
                                            "setxattr",
                                            "shmat",
                                            "shmctl",
                                            "shmdt",
                                            "shmget",
                                            "shutdown",
                                            "sigaltstack",
                                            "signalfd",
                                            "signalfd4",
                                            "sigprocmask",
                                            "sigreturn",
                                            "socket",
                                            "socketcall",
                                            "socketpair",
                                            "splice",
                                            "stat",
                                            "stat64",
                                            "statfs",
                                            "statfs64",
                                            "statx",
                                            "symlink",
                                            "symlinkat",
                                            "sync",
                                            "sync_file_range",
                                            "syncfs",
                                            "sysinfo",
                                            "tee",
                                            "tgkill",
                                            "time",
                                            "timer_create",
                                            "timer_delete",
                                            "timer_getoverrun",
                                            "timer_gettime",
                                            "timer_gettime64",
                                            "timer_settime",
                                            "timer_settime64",
                                            "timerfd_create",
                                            "timerfd_gettime",
                                            "timerfd_gettime64",
                                            "timerfd_settime",
                                            "timerfd_settime64",
                                            "times",
                                            "tkill",
                                            "truncate",
                                            "truncate64",
                                            "ugetrlimit",
                                            "umask",
                                            "uname",
                                            "unlink",
                                            "unlinkat",
                                            "utime",
                                            "utimensat",
                                            "utimensat_time64",
                                            "utimes",
                                            "vfork",
                                            "vmsplice",
                                            "wait4",
                                            "waitid",
                                            "waitpid",
                                            "write",
                                            "writev"};

/* Syscalls a granted capability makes allowed (Docker's includes.caps). */
static const struct {
	unsigned cap;
	const char *names[14];
} allow_by_cap[] = {
    {21 /* SYS_ADMIN */,
     {"bpf", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick", "lookup_dcookie", "mount",
      "mount_setattr", "move_mount", "open_tree", "perf_event_open", "quotactl", "quotactl_fd"}},
    {21 /* SYS_ADMIN */,
     {"setdomainname", "sethostname", "setns", "syslog", "umount", "umount2", "unshare",
      "pivot_root"}},
    {22 /* SYS_BOOT */, {"reboot"}},
    {18 /* SYS_CHROOT */, {"chroot"}},
    {16 /* SYS_MODULE */, {"delete_module", "init_module", "finit_module"}},
    {20 /* SYS_PACCT */, {"acct"}},
    {19 /* SYS_PTRACE */,
     {"kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev"}},
    {17 /* SYS_RAWIO */, {"iopl", "ioperm"}},
    {25 /* SYS_TIME */, {"settimeofday", "stime", "clock_settime", "clock_settime64"}},
    {26 /* SYS_TTY_CONFIG */, {"vhangup"}},
    {23 /* SYS_NICE */, {"migrate_pages", "move_pages"}},
    {34 /* SYSLOG */, {"syslog"}},
    {39 /* BPF */, {"bpf"}},
    {38 /* PERFMON */, {"perf_event_open"}},
};

/* Namespace flags of clone(2): allowed only with CAP_SYS_ADMIN. */
#define CLONE_NS_FLAGS 0x7E020000ull /* NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */

/* A comparison on the first argument (libseccomp's SCMP_A0 leaves datum_b
 * to the compiler, which clang's -Wmissing-field-initializers refuses). */
static struct scmp_arg_cmp arg0(enum scmp_compare op, uint64_t a, uint64_t b)
{
	struct scmp_arg_cmp c = {.arg = 0, .op = op, .datum_a = a, .datum_b = b};
	return c;
}

static int allow_name(scmp_filter_ctx ctx, const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR)
		return 0; /* not a syscall of this architecture or libseccomp version */
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	return rc == -EEXIST ? 0 : rc;
}

/* The compiled program as one malloc'd block (filter then instructions). */
static int export_prog(scmp_filter_ctx ctx, struct sock_fprog *out, struct iod_err *e)
{
	int fd = memfd_create("iod-seccomp", MFD_CLOEXEC);
	int rc;
	if (fd < 0)
		return iod_err_set(e, -errno, "seccomp: memfd: %s", strerror(errno));
	if ((rc = seccomp_export_bpf(ctx, fd))) {
		close(fd);
		return iod_err_set(e, rc, "seccomp: exporting the filter: %s", strerror(-rc));
	}
	off_t len = lseek(fd, 0, SEEK_END);
	if (len <= 0 || len % (off_t)sizeof(struct sock_filter) ||
	    len / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS) {
		close(fd);
		return iod_err_set(e, -E2BIG, "seccomp: the filter has %lld bytes", (long long)len);
	}
	struct sock_filter *ins = malloc((size_t)len);
	if (!ins || pread(fd, ins, (size_t)len, 0) != len) {
		free(ins);
		close(fd);
		return iod_err_set(e, -EIO, "seccomp: reading the filter back");
	}
	close(fd);
	out->filter = ins;
	out->len = (unsigned short)(len / (off_t)sizeof(struct sock_filter));
	return 0;
}

static scmp_filter_ctx new_ctx(uint32_t def_action)
{
	scmp_filter_ctx ctx = seccomp_init(def_action);
	if (!ctx)
		return NULL;
	/* binary tree of syscall numbers: O(log n) per syscall */
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	/* no NNP from libseccomp: the sandbox sets it itself, before loading */
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	return ctx;
}

int iod_agent_seccomp_default(uint64_t caps, struct sock_fprog *out, struct iod_err *e)
{
	scmp_filter_ctx ctx = new_ctx(SCMP_ACT_ERRNO(EPERM));
	int rc = 0;
	memset(out, 0, sizeof(*out));
	if (!ctx)
		return iod_err_set(e, -ENOMEM, "seccomp: cannot create a filter");
	for (size_t i = 0; !rc && i < IOD_ARRAY_LEN(allow_default); i++)
		rc = allow_name(ctx, allow_default[i]);
	for (size_t i = 0; !rc && i < IOD_ARRAY_LEN(allow_by_cap); i++) {
		if (!(caps & (1ull << allow_by_cap[i].cap)))
			continue;
		for (size_t k = 0;
		     !rc && k < IOD_ARRAY_LEN(allow_by_cap[i].names) && allow_by_cap[i].names[k];
		     k++)
			rc = allow_name(ctx, allow_by_cap[i].names[k]);
	}
	const bool admin = caps & (1ull << 21);
	/* clone: threads and processes, not namespaces (unless CAP_SYS_ADMIN) */
	if (!rc && admin)
		rc = allow_name(ctx, "clone");
	else if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
		                      arg0(SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS, 0));
	/* clone3's flags live in memory a filter cannot read: ENOSYS, and
	 * glibc falls back to clone */
	if (!rc && !admin)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	else if (!rc)
		rc = allow_name(ctx, "clone3");
	/* personality: only the values Docker allows (Linux, UNAME26, READ_IMPLIES_EXEC
	 * combinations, and the query 0xffffffff) */
	static const uint64_t persona[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
	for (size_t i = 0; !rc && i < IOD_ARRAY_LEN(persona); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
		                      arg0(SCMP_CMP_EQ, persona[i], 0));
	if (!rc)
		rc = export_prog(ctx, out, e);
	else
		iod_err_set(e, rc, "seccomp: building the default filter: %s", strerror(-rc));
	seccomp_release(ctx);
	return rc;
}

/* ---- OCI / Docker profiles ----------------------------------------------------- */

static uint32_t to_action(enum iod_seccomp_action a, uint32_t errno_ret)
{
	switch (a) {
	case IOD_SECCOMP_KILL_THREAD: return SCMP_ACT_KILL_THREAD;
	case IOD_SECCOMP_KILL_PROCESS: return SCMP_ACT_KILL_PROCESS;
	case IOD_SECCOMP_TRAP: return SCMP_ACT_TRAP;
	case IOD_SECCOMP_ERRNO: return SCMP_ACT_ERRNO(errno_ret);
	case IOD_SECCOMP_TRACE: return SCMP_ACT_TRACE(errno_ret);
	case IOD_SECCOMP_ALLOW: return SCMP_ACT_ALLOW;
	case IOD_SECCOMP_LOG: return SCMP_ACT_LOG;
	}
	return SCMP_ACT_KILL_PROCESS;
}

static enum scmp_compare to_op(enum iod_seccomp_op op)
{
	switch (op) {
	case IOD_SECCOMP_OP_NE: return SCMP_CMP_NE;
	case IOD_SECCOMP_OP_LT: return SCMP_CMP_LT;
	case IOD_SECCOMP_OP_LE: return SCMP_CMP_LE;
	case IOD_SECCOMP_OP_EQ: return SCMP_CMP_EQ;
	case IOD_SECCOMP_OP_GE: return SCMP_CMP_GE;
	case IOD_SECCOMP_OP_GT: return SCMP_CMP_GT;
	case IOD_SECCOMP_OP_MASKED_EQ: return SCMP_CMP_MASKED_EQ;
	}
	return SCMP_CMP_EQ;
}

static enum iod_seccomp_arch native_arch(void)
{
#if defined(__x86_64__)
	return IOD_SECCOMP_ARCH_X86_64;
#elif defined(__aarch64__)
	return IOD_SECCOMP_ARCH_AARCH64;
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return IOD_SECCOMP_ARCH_PPC64LE;
#elif defined(__s390x__)
	return IOD_SECCOMP_ARCH_S390X;
#elif defined(__riscv) && __riscv_xlen == 64
	return IOD_SECCOMP_ARCH_RISCV64;
#else
	return IOD_SECCOMP_ARCHES_N;
#endif
}

static uint32_t kernel_now(void)
{
	struct utsname u;
	unsigned maj = 0, min = 0;
	if (uname(&u) == 0)
		sscanf(u.release, "%u.%u", &maj, &min);
	return maj << 16 | min;
}

/* Docker's includes/excludes: does the condition hold for this replica? */
static bool cond_holds(const struct iod_seccomp_cond *c, uint64_t caps, uint32_t kernel)
{
	if (c->caps && (c->caps & caps) != c->caps)
		return false;
	if (c->arches && !(c->arches & (1u << native_arch())))
		return false;
	if (c->min_kernel && kernel < c->min_kernel)
		return false;
	return true;
}
static bool cond_empty(const struct iod_seccomp_cond *c)
{
	return !c->caps && !c->arches && !c->min_kernel;
}

int iod_agent_seccomp_profile(const struct iod_seccomp_profile *p, uint64_t caps,
                              struct sock_fprog *out, struct iod_err *e)
{
	scmp_filter_ctx ctx;
	uint32_t kernel = kernel_now();
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (p->default_action == IOD_SECCOMP_ALLOW && !p->rules_n)
		return iod_err_set(e, -EINVAL,
		                   "seccomp profile: allows everything; write "
		                   "seccomp: unconfined to run without a filter");
	ctx = new_ctx(to_action(p->default_action, p->default_errno));
	if (!ctx)
		return iod_err_set(e, -ENOMEM, "seccomp: cannot create a filter");
	if (p->log)
		seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1);
	for (uint32_t i = 0; !rc && i < p->rules_n; i++) {
		const struct iod_seccomp_rule *r = &p->rules[i];
		if (!cond_holds(&r->includes, caps, kernel) ||
		    (!cond_empty(&r->excludes) && cond_holds(&r->excludes, caps, kernel)))
			continue;
		uint32_t act = to_action(r->action, r->has_errno ? r->errno_ret : p->default_errno);
		if (act == to_action(p->default_action, p->default_errno))
			continue; /* libseccomp refuses rules that repeat the default */
		struct scmp_arg_cmp cmp[IOD_SECCOMP_ARGS_MAX];
		for (uint32_t k = 0; k < r->args_n; k++) {
			cmp[k].arg = r->args[k].index;
			cmp[k].op = to_op(r->args[k].op);
			cmp[k].datum_a = r->args[k].value;
			cmp[k].datum_b = r->args[k].value_two;
		}
		for (uint32_t k = 0; !rc && k < r->names_n; k++) {
			int nr = seccomp_syscall_resolve_name(p->names[r->names + k]);
			if (nr == __NR_SCMP_ERROR)
				continue; /* another architecture's syscall: skipped, as Docker does */
			rc = seccomp_rule_add_array(ctx, act, nr, r->args_n, cmp);
			if (rc == -EEXIST)
				rc = 0;
			if (rc)
				iod_err_set(e, rc, "seccomp profile: syscalls[%u] (%s): %s", i,
				            p->names[r->names + k], strerror(-rc));
		}
	}
	if (!rc)
		rc = export_prog(ctx, out, e);
	seccomp_release(ctx);
	return rc;
}

/* ---- the store ---------------------------------------------------------------- */

struct entry {
	uint64_t hash;          /* of the profile text; 0 = the default filter */
	uint64_t caps;          /* capabilities it was built for */
	struct sock_fprog prog; /* the program */
};

struct iod_agent_seccomp_store {
	pthread_mutex_t mu;                             /* serializes adds */
	uint32_t n;                                     /* published entries */
	struct entry e[IOD_AGENT_SECCOMP_PROFILES_MAX]; /* immutable once published */
};

int iod_agent_seccomp_store_new(struct iod_agent_seccomp_store **out, struct iod_err *e)
{
	struct iod_agent_seccomp_store *s = calloc(1, sizeof(*s));
	uint32_t id;
	int rc;
	*out = NULL;
	if (!s)
		return iod_err_set(e, -ENOMEM, "out of memory");
	pthread_mutex_init(&s->mu, NULL);
	/* the common case, built at start-up: default filter, no capabilities */
	if ((rc = iod_agent_seccomp_store_add(s, NULL, 0, 0, &id, e))) {
		iod_agent_seccomp_store_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int iod_agent_seccomp_store_add(struct iod_agent_seccomp_store *s, const char *profile, size_t len,
                                uint64_t caps, uint32_t *id, struct iod_err *e)
{
	uint64_t h = profile ? iod_hash_bytes(profile, len, 0) | 1 : 0;
	int rc = 0;
	pthread_mutex_lock(&s->mu);
	for (uint32_t i = 0; i < s->n; i++)
		if (s->e[i].hash == h && s->e[i].caps == caps) {
			*id = i;
			pthread_mutex_unlock(&s->mu);
			return 0;
		}
	if (s->n >= IOD_AGENT_SECCOMP_PROFILES_MAX) {
		pthread_mutex_unlock(&s->mu);
		return iod_err_set(
		    e, -ENOSPC,
		    "this agent holds %d distinct seccomp filters "
		    "(IOD_AGENT_SECCOMP_PROFILES_MAX); restart it to forget old ones",
		    IOD_AGENT_SECCOMP_PROFILES_MAX);
	}
	struct entry *x = &s->e[s->n];
	if (!profile) {
		rc = iod_agent_seccomp_default(caps, &x->prog, e);
	} else {
		struct iod_seccomp_profile *p = NULL;
		rc = iod_seccomp_profile_parse(profile, len, &p, e);
		if (!rc)
			rc = iod_agent_seccomp_profile(p, caps, &x->prog, e);
		iod_seccomp_profile_free(p);
	}
	if (!rc) {
		x->hash = h;
		x->caps = caps;
		*id = s->n;
		__atomic_store_n(&s->n, s->n + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

const struct sock_fprog *iod_agent_seccomp_get(const struct iod_agent_seccomp_store *s, uint32_t id)
{
	if (!s || id >= __atomic_load_n(&s->n, __ATOMIC_ACQUIRE))
		return NULL;
	return &s->e[id].prog;
}

void iod_agent_seccomp_store_free(struct iod_agent_seccomp_store *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n; i++)
		free(s->e[i].prog.filter);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
