/*
 * walfs_mem.c: an in-memory file system under the Raft log (wal.c), for
 * the log's damage and crash tests and the whole-cluster simulator
 * (simdisk.c). The interface is in src/state/internal.h (walfs.c has the
 * POSIX one).
 *
 * It is pure: no clock, no I/O, no randomness. Each
 * file keeps what a read sees and what the last sync made durable; a crash
 * (iod_walfs_mem_crash) puts every file back to its durable bytes. Names
 * (create, rename, unlink) are durable at once, as on a file system
 * mounted with dirsync: wal.c syncs the directory after each of them
 * anyway. Faults (a flipped byte, a cut, zeros, a deleted file, trailing
 * bytes) change the durable bytes too: they are what the disk holds.
 * Single-threaded: the simulator and the tests call it from one thread.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct mem_inode {
	unsigned char *data;  /* what a read sees */
	size_t len, cap;      /* its bytes, allocated */
	unsigned char *dur;   /* durable bytes (the last sync) */
	size_t dur_len, dcap; /* their length, allocated */
	unsigned refs;        /* names + open handles */
};

struct mem_name {
	char path[IOD_PATH_MAX + 64]; /* "dir/name" */
	struct mem_inode *ino;        /* NULL: free slot */
};

struct mem_fs {
	struct iod_walfs base;                              /* first: the vtable */
	struct mem_name names[IOD_WALFS_MEM_FILES_MAX];     /* the namespace */
	struct mem_inode *fds[IOD_WALFS_MEM_HANDLES_MAX];   /* open handles (NULL: free) */
	char dirs[IOD_WALFS_MEM_HANDLES_MAX][IOD_PATH_MAX]; /* dir handles' paths ("" free) */
	bool dir_used[IOD_WALFS_MEM_HANDLES_MAX];           /* a dir handle slot is taken */
	uint64_t syncs_left; /* the disk dies at this sync from now (0: never) */
	bool dead;           /* it died: every write, sync and name change fails */
};

static struct mem_fs *mem(struct iod_walfs *fs)
{
	return (struct mem_fs *)fs;
}

static void ino_unref(struct mem_inode *i)
{
	if (--i->refs)
		return;
	free(i->data);
	free(i->dur);
	free(i);
}

static int grow(unsigned char **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	unsigned char *q = realloc(*p, c);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static int path_of(struct mem_fs *m, int dir, const char *name, char *out, size_t cap)
{
	if (dir < 0 || dir >= IOD_WALFS_MEM_HANDLES_MAX || !m->dir_used[dir])
		return -EBADF;
	int n = snprintf(out, cap, "%s/%s", m->dirs[dir], name);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static struct mem_name *find(struct mem_fs *m, const char *path)
{
	for (size_t i = 0; i < IOD_WALFS_MEM_FILES_MAX; i++)
		if (m->names[i].ino && !strcmp(m->names[i].path, path))
			return &m->names[i];
	return NULL;
}

static int mem_dir_open(struct iod_walfs *fs, const char *path)
{
	struct mem_fs *m = mem(fs);
	for (int i = 0; i < IOD_WALFS_MEM_HANDLES_MAX; i++)
		if (!m->dir_used[i]) {
			if (iod_strlcpy(m->dirs[i], path, sizeof(m->dirs[i])))
				return -ENAMETOOLONG;
			m->dir_used[i] = true;
			return i + IOD_WALFS_MEM_HANDLES_MAX; /* dir handles: above file handles */
		}
	return -EMFILE;
}

static int mem_list(struct iod_walfs *fs, int dir, int (*cb)(void *, const char *), void *arg)
{
	struct mem_fs *m = mem(fs);
	dir -= IOD_WALFS_MEM_HANDLES_MAX;
	if (dir < 0 || dir >= IOD_WALFS_MEM_HANDLES_MAX || !m->dir_used[dir])
		return -EBADF;
	size_t dl = strlen(m->dirs[dir]);
	/* in slot order: deterministic */
	for (size_t i = 0; i < IOD_WALFS_MEM_FILES_MAX; i++) {
		const char *p = m->names[i].path;
		if (!m->names[i].ino || strncmp(p, m->dirs[dir], dl) || p[dl] != '/' ||
		    strchr(p + dl + 1, '/'))
			continue;
		int rv = cb(arg, p + dl + 1);
		if (rv)
			return rv;
	}
	return 0;
}

static int mem_open(struct iod_walfs *fs, int dir, const char *name, enum iod_walfs_mode mode)
{
	struct mem_fs *m = mem(fs);
	char path[IOD_PATH_MAX + 64];
	int fd = -1, rv;
	if ((rv = path_of(m, dir - IOD_WALFS_MEM_HANDLES_MAX, name, path, sizeof(path))))
		return rv;
	for (int i = 0; i < IOD_WALFS_MEM_HANDLES_MAX && fd < 0; i++)
		if (!m->fds[i])
			fd = i;
	if (fd < 0)
		return -EMFILE;
	struct mem_name *nm = find(m, path);
	if (!nm && mode != IOD_WALFS_CREATE)
		return -ENOENT;
	if (m->dead && mode == IOD_WALFS_CREATE)
		return -EIO;
	if (!nm) {
		for (size_t i = 0; i < IOD_WALFS_MEM_FILES_MAX && !nm; i++)
			if (!m->names[i].ino)
				nm = &m->names[i];
		if (!nm)
			return -ENOSPC;
		if (!(nm->ino = calloc(1, sizeof(*nm->ino))))
			return -ENOMEM;
		nm->ino->refs = 1;
		iod_strlcpy(nm->path, path, sizeof(nm->path));
	} else if (mode == IOD_WALFS_CREATE) {
		nm->ino->len = 0; /* O_TRUNC */
	}
	nm->ino->refs++;
	m->fds[fd] = nm->ino;
	return fd;
}

static struct mem_inode *fd_ino(struct mem_fs *m, int fd)
{
	return fd >= 0 && fd < IOD_WALFS_MEM_HANDLES_MAX ? m->fds[fd] : NULL;
}

static int mem_size(struct iod_walfs *fs, int fd, uint64_t *out)
{
	struct mem_inode *i = fd_ino(mem(fs), fd);
	if (!i)
		return -EBADF;
	*out = i->len;
	return 0;
}

static ssize_t mem_read(struct iod_walfs *fs, int fd, void *buf, size_t len, uint64_t off)
{
	struct mem_inode *i = fd_ino(mem(fs), fd);
	if (!i)
		return -EBADF;
	if (off >= i->len)
		return 0;
	size_t n = IOD_MIN(len, i->len - (size_t)off);
	memcpy(buf, i->data + off, n);
	return (ssize_t)n;
}

static int mem_write(struct iod_walfs *fs, int fd, const void *buf, size_t len, uint64_t off)
{
	struct mem_inode *i = fd_ino(mem(fs), fd);
	if (!i)
		return -EBADF;
	if (mem(fs)->dead)
		return -EIO;
	if (off + len > IOD_WALFS_MEM_FILE_BYTES_MAX)
		return -EFBIG;
	if (grow(&i->data, &i->cap, (size_t)off + len))
		return -ENOMEM;
	if (off > i->len)
		memset(i->data + i->len, 0, (size_t)off - i->len);
	if (len)
		memcpy(i->data + off, buf, len);
	if (off + len > i->len)
		i->len = (size_t)off + len;
	return 0;
}

static int ino_sync(struct mem_inode *i)
{
	if (grow(&i->dur, &i->dcap, i->len ? i->len : 1))
		return -ENOMEM;
	if (i->len)
		memcpy(i->dur, i->data, i->len);
	i->dur_len = i->len;
	return 0;
}

static int mem_sync(struct iod_walfs *fs, int fd, bool data_only)
{
	struct mem_fs *m = mem(fs);
	(void)data_only;
	if (m->dead)
		return -EIO;
	if (m->syncs_left && --m->syncs_left == 0) {
		m->dead = true; /* the power went during this sync */
		return -EIO;
	}
	if (fd >= IOD_WALFS_MEM_HANDLES_MAX)
		return 0; /* a directory: names are durable at once */
	struct mem_inode *i = fd_ino(mem(fs), fd);
	return i ? ino_sync(i) : -EBADF;
}

static int mem_truncate(struct iod_walfs *fs, int fd, uint64_t len)
{
	struct mem_inode *i = fd_ino(mem(fs), fd);
	if (!i)
		return -EBADF;
	if (mem(fs)->dead)
		return -EIO;
	if (len > i->len) {
		if (grow(&i->data, &i->cap, (size_t)len))
			return -ENOMEM;
		memset(i->data + i->len, 0, (size_t)len - i->len);
	}
	i->len = (size_t)len;
	return 0;
}

/* fallocate: the file grows with zeros (never shrinks); durable at the
 * next sync, like the size change it is. */
static int mem_allocate(struct iod_walfs *fs, int fd, uint64_t len)
{
	struct mem_inode *i = fd_ino(mem(fs), fd);
	if (!i)
		return -EBADF;
	if (mem(fs)->dead)
		return -EIO;
	if (len <= i->len)
		return 0;
	if (len > IOD_WALFS_MEM_FILE_BYTES_MAX)
		return -EFBIG;
	return mem_truncate(fs, fd, len);
}

static int mem_rename(struct iod_walfs *fs, int dir, const char *from, const char *to)
{
	struct mem_fs *m = mem(fs);
	char pf[IOD_PATH_MAX + 64], pt[IOD_PATH_MAX + 64];
	int rv;
	if (m->dead)
		return -EIO;
	if ((rv = path_of(m, dir - IOD_WALFS_MEM_HANDLES_MAX, from, pf, sizeof(pf))) ||
	    (rv = path_of(m, dir - IOD_WALFS_MEM_HANDLES_MAX, to, pt, sizeof(pt))))
		return rv;
	struct mem_name *a = find(m, pf), *b = find(m, pt);
	if (!a)
		return -ENOENT;
	if (a == b)
		return 0;
	if (b) {
		ino_unref(b->ino);
		b->ino = NULL;
	}
	iod_strlcpy(a->path, pt, sizeof(a->path));
	return 0;
}

static int mem_unlink(struct iod_walfs *fs, int dir, const char *name)
{
	struct mem_fs *m = mem(fs);
	char p[IOD_PATH_MAX + 64];
	int rv;
	if (m->dead)
		return -EIO;
	if ((rv = path_of(m, dir - IOD_WALFS_MEM_HANDLES_MAX, name, p, sizeof(p))))
		return rv;
	struct mem_name *nm = find(m, p);
	if (!nm)
		return -ENOENT;
	ino_unref(nm->ino);
	nm->ino = NULL;
	return 0;
}

static void mem_close(struct iod_walfs *fs, int fd)
{
	struct mem_fs *m = mem(fs);
	if (fd >= IOD_WALFS_MEM_HANDLES_MAX) {
		int d = fd - IOD_WALFS_MEM_HANDLES_MAX;
		if (d < IOD_WALFS_MEM_HANDLES_MAX)
			m->dir_used[d] = false;
		return;
	}
	struct mem_inode *i = fd_ino(m, fd);
	if (!i)
		return;
	m->fds[fd] = NULL;
	ino_unref(i);
}

static const struct iod_walfs_ops mem_ops = {
    .dir_open = mem_dir_open,
    .list = mem_list,
    .open = mem_open,
    .size = mem_size,
    .read = mem_read,
    .write = mem_write,
    .sync = mem_sync,
    .truncate = mem_truncate,
    .allocate = mem_allocate,
    .rename = mem_rename,
    .unlink = mem_unlink,
    .close = mem_close,
};

struct iod_walfs *iod_walfs_mem_new(void)
{
	struct mem_fs *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->base.ops = &mem_ops;
	return &m->base;
}

void iod_walfs_mem_free(struct iod_walfs *fs)
{
	if (!fs)
		return;
	struct mem_fs *m = mem(fs);
	for (size_t i = 0; i < IOD_WALFS_MEM_HANDLES_MAX; i++)
		if (m->fds[i])
			ino_unref(m->fds[i]);
	for (size_t i = 0; i < IOD_WALFS_MEM_FILES_MAX; i++)
		if (m->names[i].ino)
			ino_unref(m->names[i].ino);
	free(m);
}

void iod_walfs_mem_die_at_sync(struct iod_walfs *fs, uint64_t n)
{
	mem(fs)->syncs_left = n;
}

void iod_walfs_mem_crash(struct iod_walfs *fs)
{
	struct mem_fs *m = mem(fs);
	m->dead = false; /* the machine comes back */
	m->syncs_left = 0;
	for (size_t i = 0; i < IOD_WALFS_MEM_FILES_MAX; i++) {
		struct mem_inode *n = m->names[i].ino;
		if (!n)
			continue;
		if (grow(&n->data, &n->cap, n->dur_len ? n->dur_len : 1) == 0) {
			if (n->dur_len)
				memcpy(n->data, n->dur, n->dur_len);
			n->len = n->dur_len;
		}
	}
}

int iod_walfs_mem_size(struct iod_walfs *fs, const char *path, uint64_t *size)
{
	struct mem_name *nm = find(mem(fs), path);
	if (!nm)
		return -ENOENT;
	*size = nm->ino->len;
	return 0;
}

int iod_walfs_mem_names(struct iod_walfs *fs, const char *dir, char ***names, size_t *n)
{
	int d = mem_dir_open(fs, dir);
	if (d < 0)
		return d;
	int rv = iod_walfs_list(fs, d, names, n);
	mem_close(fs, d);
	return rv;
}

int iod_walfs_mem_fault(struct iod_walfs *fs, const char *path, enum iod_walfs_fault kind,
                        uint64_t off, const void *bytes, size_t len)
{
	struct mem_fs *m = mem(fs);
	struct mem_name *nm = find(m, path);
	if (!nm)
		return -ENOENT;
	struct mem_inode *i = nm->ino;
	switch (kind) {
	case IOD_WALFS_FLIP:
		if (off >= i->len)
			return -ERANGE;
		i->data[off] ^= 0x10;
		break;
	case IOD_WALFS_CUT:
		if (off > i->len)
			return -ERANGE;
		i->len = (size_t)off;
		break;
	case IOD_WALFS_ZERO: memset(i->data, 0, i->len); break;
	case IOD_WALFS_DELETE:
		ino_unref(i);
		nm->ino = NULL;
		return 0;
	case IOD_WALFS_APPEND:
		if (i->len + len > IOD_WALFS_MEM_FILE_BYTES_MAX)
			return -EFBIG;
		if (grow(&i->data, &i->cap, i->len + len))
			return -ENOMEM;
		if (len)
			memcpy(i->data + i->len, bytes, len);
		i->len += len;
		break;
	default: return -EINVAL;
	}
	/* damage is what the disk holds: durable at once */
	return ino_sync(i);
}
