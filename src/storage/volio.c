/*
 * volio.c: packing a data directory into a volume archive and unpacking one
 * (the shell around volume.c's codec; docs/storage.md "Volumes").
 *
 * Pack reads regular files whole and lists directories before what they
 * hold; symbolic links, devices, sockets and FIFOs are left out (counted).
 * Unpack writes every file through a temporary name, fsync and rename,
 * under the target directory only: paths are checked by the codec (relative,
 * no ".."), and each part is opened with O_NOFOLLOW, so a link already in
 * the directory is not followed out of it.
 */
#include "iod/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int read_all(int fd, uint8_t *p, uint64_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO; /* shorter than its size: changed under us */
		p += r;
		n -= (uint64_t)r;
	}
	return 0;
}

static int write_all(int fd, const uint8_t *p, uint64_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (uint64_t)w;
	}
	return 0;
}

struct pack {
	struct iod_ckpt_vol_buf *out;
	uint32_t skipped;
	char path[IOD_CKPT_VOL_PATH_MAX];
};

static int pack_dir(struct pack *k, int dfd, size_t plen, const char *skip, struct iod_err *e)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		int rc = -errno;
		close(dfd);
		return iod_err_set(e, rc, "volume: reading %s: %s", plen ? k->path : ".",
		                   strerror(-rc));
	}
	/* names sorted, so the same directory packs to the same bytes */
	struct dirent **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (skip && !strcmp(de->d_name, skip)))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			struct dirent **nn = realloc(names, cap * sizeof(*nn));
			if (!nn) {
				rc = iod_err_set(e, -ENOMEM, "volume: out of memory");
				break;
			}
			names = nn;
		}
		size_t sz = offsetof(struct dirent, d_name) + strlen(de->d_name) + 1;
		if (!(names[n] = malloc(sz))) {
			rc = iod_err_set(e, -ENOMEM, "volume: out of memory");
			break;
		}
		memcpy(names[n++], de, sz);
	}
	for (size_t i = 1; !rc && i < n; i++)
		for (size_t j = i; j > 0 && strcmp(names[j - 1]->d_name, names[j]->d_name) > 0;
		     j--) {
			struct dirent *t = names[j];
			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	for (size_t i = 0; !rc && i < n; i++) {
		const char *nm = names[i]->d_name;
		struct stat st;
		int w =
		    snprintf(k->path + plen, sizeof(k->path) - plen, "%s%s", plen ? "/" : "", nm);
		if (w < 0 || (size_t)w >= sizeof(k->path) - plen) {
			rc = iod_err_set(e, -ENAMETOOLONG, "volume: a path under %s is too long",
			                 plen ? k->path : ".");
			break;
		}
		size_t nlen = plen + (size_t)w;
		if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == ENOENT)
				continue; /* gone while we looked */
			rc = iod_err_set(e, -errno, "volume: %s: %s", k->path, strerror(errno));
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			struct iod_ckpt_vol_entry x = {true, st.st_mode & 0777, k->path, NULL, 0};
			int cfd =
			    openat(dirfd(d), nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0) {
				rc = iod_err_set(e, -errno, "volume: %s: %s", k->path,
				                 strerror(errno));
				break;
			}
			if ((rc = iod_ckpt_vol_add(k->out, &x, e)) ||
			    (rc = pack_dir(k, cfd, nlen, NULL, e)))
				break;
		} else if (S_ISREG(st.st_mode)) {
			int fd = openat(dirfd(d), nm, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			uint8_t *data = NULL;
			if (fd < 0) {
				rc = iod_err_set(e, -errno, "volume: %s: %s", k->path,
				                 strerror(errno));
				break;
			}
			if ((uint64_t)st.st_size > IOD_CKPT_VOL_BYTES_MAX)
				rc = iod_err_set(e, -E2BIG,
				                 "volume: %s: %lld bytes, more than a volume holds",
				                 k->path, (long long)st.st_size);
			else if (!(data = malloc(st.st_size ? (size_t)st.st_size : 1)))
				rc = iod_err_set(e, -ENOMEM, "volume: out of memory for %s",
				                 k->path);
			else if ((rc = read_all(fd, data, (uint64_t)st.st_size)))
				iod_err_set(e, rc, "volume: reading %s: %s", k->path,
				            strerror(-rc));
			close(fd);
			struct iod_ckpt_vol_entry x = {false, st.st_mode & 0777, k->path, data,
			                               (uint64_t)st.st_size};
			if (!rc)
				rc = iod_ckpt_vol_add(k->out, &x, e);
			free(data);
		} else {
			k->skipped++;
		}
		k->path[plen] = 0;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return rc;
}

int iod_ckpt_vol_pack(const char *dir, const char *skip, struct iod_ckpt_vol_buf *out,
                      uint32_t *skipped, struct iod_err *e)
{
	struct pack *k = calloc(1, sizeof(*k));
	int rc;
	memset(out, 0, sizeof(*out));
	if (!k)
		return iod_err_set(e, -ENOMEM, "volume: out of memory");
	k->out = out;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		rc = iod_err_set(e, -errno, "volume: %s: %s", dir, strerror(errno));
	else
		rc = pack_dir(k, dfd, 0, skip, e);
	if (!rc)
		rc = iod_ckpt_vol_finish(out, e);
	if (rc)
		iod_ckpt_vol_buf_free(out);
	if (skipped)
		*skipped = k->skipped;
	free(k);
	return rc;
}

struct unpack {
	int root;
	uint32_t files;
	uint64_t bytes;
};

/* The directory holding path's last part, opened part by part without
 * following links (missing parts made 0755); its fd, *leaf the last part. */
static int parent_of(int root, char *path, const char **leaf, struct iod_err *e)
{
	int fd = dup(root);
	char *p = path, *slash;
	while (fd >= 0 && (slash = strchr(p, '/'))) {
		*slash = 0;
		if (mkdirat(fd, p, 0755) && errno != EEXIST) {
			int rc = -errno;
			close(fd);
			*slash = '/';
			return iod_err_set(e, rc, "volume: making %s: %s", path, strerror(-rc));
		}
		int nfd = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int rc = nfd < 0 ? -errno : 0;
		close(fd);
		*slash = '/';
		if (rc)
			return iod_err_set(e, rc, "volume: opening the directories of %s: %s", path,
			                   strerror(-rc));
		fd = nfd;
		p = slash + 1;
	}
	if (fd < 0)
		return iod_err_set(e, -errno, "volume: %s", strerror(errno));
	*leaf = p;
	return fd;
}

static int unpack_one(void *ctx, const struct iod_ckpt_vol_entry *x, struct iod_err *e)
{
	struct unpack *u = ctx;
	char path[IOD_CKPT_VOL_PATH_MAX], tmp[NAME_MAX + 1];
	const char *leaf = "";
	int rc = 0;
	snprintf(path, sizeof(path), "%s", x->path);
	int dfd = parent_of(u->root, path, &leaf, e);
	if (dfd < 0)
		return dfd;
	if (x->dir) {
		if (mkdirat(dfd, leaf, x->mode) && errno != EEXIST)
			rc = iod_err_set(e, -errno, "volume: making %s: %s", x->path,
			                 strerror(errno));
		else
			fchmodat(dfd, leaf, x->mode, 0);
		close(dfd);
		return rc;
	}
	int w = snprintf(tmp, sizeof(tmp), ".%.200s.iod-vol-tmp", leaf);
	if (w < 0 || (size_t)w >= sizeof(tmp)) {
		close(dfd);
		return iod_err_set(e, -ENAMETOOLONG, "volume: %s: name too long", x->path);
	}
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, x->mode);
	if (fd < 0) {
		rc = iod_err_set(e, -errno, "volume: writing %s: %s", x->path, strerror(errno));
	} else {
		if ((rc = write_all(fd, x->data, x->size)) || (fsync(fd) && (rc = -errno)))
			iod_err_set(e, rc, "volume: writing %s: %s", x->path, strerror(-rc));
		fchmod(fd, x->mode);
		close(fd);
		if (!rc && renameat(dfd, tmp, dfd, leaf))
			rc = iod_err_set(e, -errno, "volume: renaming %s into place: %s", x->path,
			                 strerror(errno));
		if (rc)
			unlinkat(dfd, tmp, 0);
	}
	if (!rc) {
		fsync(dfd);
		u->files++;
		u->bytes += x->size;
	}
	close(dfd);
	return rc;
}

int iod_ckpt_vol_unpack(const char *dir, const uint8_t *buf, size_t len, uint32_t *files,
                        uint64_t *bytes, struct iod_err *e)
{
	struct unpack u = {.root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
	if (u.root < 0)
		return iod_err_set(e, -errno, "volume: %s: %s", dir, strerror(errno));
	int rc = iod_ckpt_vol_parse(buf, len, unpack_one, &u, e);
	close(u.root);
	if (files)
		*files = u.files;
	if (bytes)
		*bytes = u.bytes;
	return rc;
}
