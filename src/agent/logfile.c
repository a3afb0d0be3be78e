/*
 * logfile.c: size-bounded rotating log files for replica output.
 *
 * A replica's stdout and stderr go to <dir>/log; when a write would take it
 * past max_bytes the file is rotated (log -> log.1 -> ... -> log.N, the
 * oldest dropped), so a chatty replica can never fill the disk: its output
 * costs at most (files + 1) x max_bytes. Shell code: it writes files, and it
 * never blocks on anything but the local file system.
 *
 * A log may be opened relative to a directory fd (iod_agent_log_open_at):
 * the sandbox's init opens its replica directory before it moves into the
 * replica's own root, and keeps rotating there through that fd, though the
 * path no longer exists in its view.
 */
#include "iod/agent_run.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int iod_agent_log_open(struct iod_agent_log *l, const char *path, uint64_t max_bytes,
                       uint32_t files, struct iod_err *e)
{
	return iod_agent_log_open_at(l, AT_FDCWD, path, max_bytes, files, e);
}

int iod_agent_log_open_at(struct iod_agent_log *l, int dirfd, const char *path, uint64_t max_bytes,
                          uint32_t files, struct iod_err *e)
{
	struct stat st;

	memset(l, 0, sizeof(*l));
	l->fd = -1;
	l->dirfd = dirfd;
	if (!max_bytes || files > 99)
		return iod_err_set(e, -EINVAL, "log %s: max_bytes must be > 0 and files <= 99",
		                   path);
	if (iod_strlcpy(l->path, path, sizeof(l->path)))
		return iod_err_set(e, -ENAMETOOLONG, "log path too long: %s", path);
	l->max_bytes = max_bytes;
	l->files = files;
	l->fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (l->fd < 0)
		return iod_err_set(e, -errno, "log %s: %s", path, strerror(errno));
	l->size_bytes = fstat(l->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	return 0;
}

static int rotate(struct iod_agent_log *l)
{
	char from[IOD_AGENT_PATH_MAX + 8], to[IOD_AGENT_PATH_MAX + 8];

	close(l->fd);
	l->fd = -1;
	if (l->files) {
		for (uint32_t i = l->files; i > 1; i--) {
			snprintf(from, sizeof(from), "%s.%u", l->path, i - 1);
			snprintf(to, sizeof(to), "%s.%u", l->path, i);
			renameat(l->dirfd, from, l->dirfd, to); /* a missing older file is fine */
		}
		snprintf(to, sizeof(to), "%s.1", l->path);
		if (renameat(l->dirfd, l->path, l->dirfd, to) && errno != ENOENT)
			return -errno;
	}
	l->fd = openat(l->dirfd, l->path,
	               O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (l->fd < 0)
		return -errno;
	l->size_bytes = 0;
	return 0;
}

int iod_agent_log_write(struct iod_agent_log *l, const void *data, size_t len)
{
	const char *p = data;

	IOD_ASSERT(l->max_bytes > 0);
	while (len) {
		if (l->fd < 0)
			return -EBADF;
		if (l->size_bytes && l->size_bytes + len > l->max_bytes) {
			int rc = rotate(l);
			if (rc)
				return rc;
		}
		/* A single write larger than the file bound is cut in pieces. */
		size_t chunk = (size_t)IOD_MIN((uint64_t)len, l->max_bytes - l->size_bytes);
		if (!chunk)
			chunk = (size_t)IOD_MIN((uint64_t)len, l->max_bytes);
		ssize_t w = write(l->fd, p, chunk);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		l->size_bytes += (uint64_t)w;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

void iod_agent_log_close(struct iod_agent_log *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}
