/*
 * walfs.c: the file system under the Raft log (wal.c): the interface's
 * helpers and the POSIX implementation the daemon runs. The in-memory one
 * for tests and the whole-cluster simulator is walfs_mem.c.
 *
 * Why it exists: wal.c decides what damage is repaired and what is refused,
 * and that verdict should be tested (and exercised by the simulator) with
 * the same code the daemon runs. SQLite's OS layer is the model: the log
 * calls a small vtable (struct iod_walfs_ops, src/state/internal.h), the
 * POSIX one does exactly the system calls wal.c made before (pwrite,
 * fdatasync or fsync, renameat, unlinkat, ftruncate, fallocate), so the daemon's
 * durability and on-disk format do not change.
 *
 * Must never buffer or reorder: every call is the system call it names.
 */
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers over any implementation ------------------------------------ */

struct list_acc {
	char **names; /* malloc'd names */
	size_t n;     /* used */
	size_t cap;   /* allocated */
};

static int list_add(void *arg, const char *name)
{
	struct list_acc *a = arg;
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 32;
		char **p = realloc(a->names, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		a->names = p;
		a->cap = cap;
	}
	if (!(a->names[a->n] = strdup(name)))
		return -ENOMEM;
	a->n++;
	return 0;
}

int iod_walfs_list(struct iod_walfs *fs, int dir, char ***names, size_t *n)
{
	struct list_acc a = {0};
	int rv = fs->ops->list(fs, dir, list_add, &a);
	if (rv) {
		iod_walfs_names_free(a.names, a.n);
		return rv;
	}
	*names = a.names;
	*n = a.n;
	return 0;
}

void iod_walfs_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* ---- POSIX ----------------------------------------------------------------- */

static int px_dir_open(struct iod_walfs *fs, const char *path)
{
	(void)fs;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int px_list(struct iod_walfs *fs, int dir, int (*cb)(void *, const char *), void *arg)
{
	(void)fs;
	int dfd = dup(dir);
	if (dfd < 0)
		return -errno;
	DIR *d = fdopendir(dfd);
	if (!d) {
		int rv = -errno;
		close(dfd);
		return rv;
	}
	rewinddir(d);
	int rv = 0;
	for (struct dirent *de; !rv && (de = readdir(d));)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			rv = cb(arg, de->d_name);
	closedir(d);
	return rv;
}

static int px_open(struct iod_walfs *fs, int dir, const char *name, enum iod_walfs_mode mode)
{
	(void)fs;
	int flags = mode == IOD_WALFS_READ    ? O_RDONLY
	            : mode == IOD_WALFS_WRITE ? O_RDWR
	                                      : O_WRONLY | O_CREAT | O_TRUNC;
	int fd = openat(dir, name, flags | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

static int px_size(struct iod_walfs *fs, int fd, uint64_t *out)
{
	(void)fs;
	struct stat st;
	if (fstat(fd, &st))
		return -errno;
	*out = (uint64_t)st.st_size;
	return 0;
}

static ssize_t px_read(struct iod_walfs *fs, int fd, void *buf, size_t len, uint64_t off)
{
	(void)fs;
	for (;;) {
		ssize_t k = pread(fd, buf, len, (off_t)off);
		if (k >= 0)
			return k;
		if (errno != EINTR)
			return -errno;
	}
}

static int px_write(struct iod_walfs *fs, int fd, const void *buf, size_t len, uint64_t off)
{
	(void)fs;
	const char *p = buf;
	while (len) {
		ssize_t k = pwrite(fd, p, len, (off_t)off);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		len -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

static int px_sync(struct iod_walfs *fs, int fd, bool data_only)
{
	(void)fs;
	return (data_only ? fdatasync(fd) : fsync(fd)) ? -errno : 0;
}

static int px_truncate(struct iod_walfs *fs, int fd, uint64_t len)
{
	(void)fs;
	return ftruncate(fd, (off_t)len) ? -errno : 0;
}

static int px_allocate(struct iod_walfs *fs, int fd, uint64_t len)
{
	(void)fs;
	for (;;) {
		if (fallocate(fd, 0, 0, (off_t)len) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		/* a file system without it (tmpfs has it; some FUSE ones do not):
		 * appends then grow the file as before */
		return errno == EOPNOTSUPP || errno == ENOSYS ? 0 : -errno;
	}
}

static int px_rename(struct iod_walfs *fs, int dir, const char *from, const char *to)
{
	(void)fs;
	return renameat(dir, from, dir, to) ? -errno : 0;
}

static int px_unlink(struct iod_walfs *fs, int dir, const char *name)
{
	(void)fs;
	return unlinkat(dir, name, 0) ? -errno : 0;
}

static void px_close(struct iod_walfs *fs, int fd)
{
	(void)fs;
	close(fd);
}

static const struct iod_walfs_ops px_ops = {
    .dir_open = px_dir_open,
    .list = px_list,
    .open = px_open,
    .size = px_size,
    .read = px_read,
    .write = px_write,
    .sync = px_sync,
    .truncate = px_truncate,
    .allocate = px_allocate,
    .rename = px_rename,
    .unlink = px_unlink,
    .close = px_close,
};

static struct iod_walfs px_fs = {.ops = &px_ops};

struct iod_walfs *iod_walfs_posix(void)
{
	return &px_fs;
}
