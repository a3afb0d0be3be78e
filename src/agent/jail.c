/*
 * jail.c: the last steps before a replica's program runs, shared by the
 * workload and the health checks that run inside its sandbox: who it runs
 * as and what it may still do.
 *
 * In order, in the single-threaded child that will exec the program:
 *   1. capabilities cut to what the spec lists (libcap-ng): the bounding
 *      set first (while CAP_SETPCAP is still held), so nothing dropped can
 *      come back through an exec; ambient capabilities cleared;
 *   2. supplementary groups dropped, gid then uid set (capng_change_id
 *      keeps the listed capabilities across the change; a non-root uid
 *      gets them as ambient capabilities, the only way they survive exec);
 *   3. where the kernel allows it, a user namespace of its own that maps
 *      only its own uid and gid (uid_map "U U 1"): every other host uid is
 *      "nobody" inside, and the capabilities a new user namespace hands out
 *      are dropped again at once; a health check joins the workload's;
 *   4. PR_SET_NO_NEW_PRIVS: no setuid binary or file capability can raise
 *      it again;
 *   5. the seccomp filter, last, because it may forbid what the steps
 *      above need.
 * Each step that fails stops the start with what failed; none is skipped
 * silently. Shell code: credential syscalls in a process about to exec.
 */
#include "iod/agent_run.h"

#include <cap-ng.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(char *err, size_t len, int code, const char *what)
{
	snprintf(err, len, "%s: %s", what, strerror(code > 0 ? code : -code));
	return code > 0 ? -code : code;
}

static int write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int rc = n == (ssize_t)strlen(text) ? 0 : -(n < 0 ? errno : EIO);
	close(fd);
	return rc;
}

/*
 * Entering a user namespace hands out a full set again, the bounding set
 * included: drop everything but the listed capabilities once more (we hold
 * CAP_SETPCAP in it now, so the bounding set can shrink).
 */
static int drop_gained(const struct iod_agent_jail *j, char *err, size_t len)
{
	capng_clear(CAPNG_SELECT_BOTH);
	for (unsigned c = 0; c < 64; c++)
		if (j->caps & (1ull << c))
			capng_update(CAPNG_ADD, CAPNG_BOUNDING_SET, c);
	if (capng_apply(CAPNG_SELECT_BOUNDS))
		return fail(err, len, errno ? errno : EPERM,
		            "dropping the user namespace's bounding set");
	capng_clear(CAPNG_SELECT_CAPS);
	if (capng_apply(CAPNG_SELECT_CAPS))
		return fail(err, len, errno ? errno : EPERM,
		            "dropping the user namespace's capabilities");
	return 0;
}

/* A user namespace of its own, mapping only the uid and gid it runs as. */
static int own_userns(const struct iod_agent_jail *j, char *err, size_t len)
{
	char map[64];
	int rc;
	/* the uid change made the process non-dumpable, which makes its /proc
	 * files root's: it could not write its own maps */
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	if (unshare(CLONE_NEWUSER))
		return fail(err, len, errno, "creating a user namespace");
	if ((rc = write_proc("/proc/self/setgroups", "deny")))
		return fail(err, len, rc, "user namespace: /proc/self/setgroups");
	snprintf(map, sizeof(map), "%u %u 1\n", j->uid, j->uid);
	if ((rc = write_proc("/proc/self/uid_map", map)))
		return fail(err, len, rc, "user namespace: /proc/self/uid_map");
	snprintf(map, sizeof(map), "%u %u 1\n", j->gid, j->gid);
	if ((rc = write_proc("/proc/self/gid_map", map)))
		return fail(err, len, rc, "user namespace: /proc/self/gid_map");
	return drop_gained(j, err, len);
}

int iod_agent_jail_enter(const struct iod_agent_jail *j, int userns_fd, char *err, size_t len)
{
	const bool root = j->uid == 0;
	int rc;

	err[0] = 0;
	/* 1. capabilities: bounding set first, while we may still change it */
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); /* EINVAL before 4.3 */
	if (geteuid() == 0) {
		capng_clear(CAPNG_SELECT_BOTH);
		for (unsigned c = 0; c < 64; c++)
			if (j->caps & (1ull << c) &&
			    capng_update(CAPNG_ADD,
			                 CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_INHERITABLE |
			                     CAPNG_BOUNDING_SET,
			                 c))
				return fail(err, len, EINVAL,
				            "a capability this kernel does not know");
		if (capng_apply(CAPNG_SELECT_BOUNDS))
			return fail(err, len, errno ? errno : EPERM, "dropping the bounding set");
		/* 2. groups, gid, uid (listed capabilities kept across the change) */
		if (root) {
			if (setgroups(0, NULL) || setresgid(j->gid, j->gid, j->gid))
				return fail(err, len, errno, "setting groups");
			if (capng_apply(CAPNG_SELECT_CAPS))
				return fail(err, len, errno ? errno : EPERM,
				            "dropping capabilities");
		} else {
			rc = capng_change_id((int)j->uid, (int)j->gid, CAPNG_DROP_SUPP_GRP);
			if (rc) {
				snprintf(err, len,
				         "changing to uid %u gid %u failed (libcap-ng %d: %s)",
				         j->uid, j->gid, rc, strerror(errno));
				return -EPERM;
			}
			for (unsigned c = 0; c < 64; c++)
				if (j->caps & (1ull << c) &&
				    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0))
					return fail(err, len, errno,
					            "raising an ambient capability");
		}
	} else {
		/* an unprivileged agent: its replicas run as its uid, with nothing */
		if (j->uid != geteuid())
			return fail(err, len, EPERM, "running as another uid needs a root agent");
		capng_clear(CAPNG_SELECT_CAPS);
		capng_apply(CAPNG_SELECT_CAPS);
	}
	/* 3. a user namespace that maps only itself (or the workload's, for a check) */
	if (j->userns) {
		if (userns_fd >= 0) {
			prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
			if (setns(userns_fd, CLONE_NEWUSER))
				return fail(err, len, errno,
				            "joining the replica's user namespace");
			if ((rc = drop_gained(j, err, len)))
				return rc;
		} else if ((rc = own_userns(j, err, len))) {
			return rc;
		}
	}
	/* 4. no way back up through exec */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return fail(err, len, errno, "PR_SET_NO_NEW_PRIVS");
	/* 5. the filter, last */
	if (j->seccomp &&
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, (const struct sock_fprog *)j->seccomp))
		return fail(err, len, errno, "loading the seccomp filter");
	return 0;
}
