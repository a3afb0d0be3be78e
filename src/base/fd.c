/*
 * fd.c: accepting connections when the process runs out of descriptors,
 * and the descriptor limit daemons start with.
 *
 * accept(2) failing with EMFILE/ENFILE leaves the connection queued, so a
 * level-triggered listener stays readable and its loop spins at 100% CPU
 * without serving anyone. iod_fd_accept keeps one descriptor in reserve
 * (/dev/null): when the table is full it gives the reserve up, accepts the
 * oldest queued connection, closes it (the client sees the connection end
 * at once instead of hanging) and takes the reserve back. The listener's
 * queue shrinks, so the loop sleeps again; the caller counts the shed
 * connections.
 *
 * Shell code (descriptors, rlimits); no decision in it worth a pure core.
 */
#include "iod/base.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

int iod_fd_reserve_open(void)
{
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

int iod_fd_accept(int lfd, struct sockaddr *sa, unsigned int *sl, int flags, int *reserve)
{
	int fd = accept4(lfd, sa, sl, flags);
	if (fd >= 0)
		return fd;
	int err = errno;
	if (err != EMFILE && err != ENFILE)
		return -err;
	if (!reserve || *reserve < 0)
		return -err; /* nothing to give up: the caller backs off */
	close(*reserve);
	*reserve = -1;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	*reserve = iod_fd_reserve_open();
	return fd >= 0 ? -ECONNABORTED : -err;
}

int iod_fd_limit_raise(uint64_t *soft_out)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit want = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
		if (!setrlimit(RLIMIT_NOFILE, &want))
			rl.rlim_cur = rl.rlim_max;
	}
	if (soft_out)
		*soft_out = (uint64_t)rl.rlim_cur;
	return 0;
}
