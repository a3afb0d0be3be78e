/*
 * rootfs.c: a replica's own root file system, built by its sandbox's init
 * in the replica's private mount namespace and entered with pivot_root.
 *
 * The root is a small tmpfs, read-only once built, holding:
 *   /usr /bin /sbin /lib /lib32 /lib64 /libx32  read-only binds of the host's
 *                         (or the same symlinks, on a merged-/usr host);
 *   /etc                  only what programs need: the resolver and loader
 *                         files, TLS roots, time zone, Debian's
 *                         alternatives, read-only binds; passwd, group,
 *                         hosts and hostname written for the replica (its
 *                         uid has a name, no host account is listed);
 *   /proc                 mounted fresh in the replica's PID namespace, with
 *                         Docker's masked paths (kcore, keys, timer_list,
 *                         sched_debug, ... hidden behind /dev/null or an
 *                         empty read-only tmpfs) and /proc/sys, /proc/bus,
 *                         /proc/fs, /proc/irq, /proc/sysrq-trigger read-only;
 *   /sys                  a fresh sysfs, read-only, without the cgroup
 *                         hierarchies, /sys/firmware masked;
 *   /dev                  a tmpfs with null, zero, full, random, urandom and
 *                         tty bound from the host, a private devpts and
 *                         /dev/shm (up to its memory limit, else half of
 *                         RAM), and the NVIDIA device nodes of the GPUs
 *                         the replica was placed on (and only those);
 *   /tmp                  a private tmpfs (IOD_AGENT_TMP_BYTES);
 *   the data directory    read-write, at its host path ($IOD_DATA_DIR);
 *   the iod binary        read-only at its host path ($IOD_BIN);
 *   the mesh socket dir   read-write at its host path ($IOD_MESH_UNIX_DIR);
 *   /run/secrets          its secrets (a spec's `secrets:`), one 0400 file
 *                         each in a read-only tmpfs of its own (secrets.c).
 * Everything is nosuid and, outside /dev, nodev. Nothing else of the host
 * is reachable: the old root is detached after pivot_root.
 *
 * Shell code run by the init as root before the workload exists. It must
 * never leave the init half-confined: every failure returns with what and
 * where, and the init refuses to run the workload.
 */
#include "iod/agent_run.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct rf {
	const struct iod_agent_rootfs *in; /* what to build */
	char *err;                         /* the caller's message buffer */
	size_t len;
	char path[IOD_AGENT_PATH_MAX * 2]; /* scratch: root + a path */
};

static int fail(struct rf *f, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct rf *f, int err, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(f->err, f->len, "root file system: ");
	va_start(ap, fmt);
	vsnprintf(f->err + n, f->len - (size_t)n, fmt, ap);
	va_end(ap);
	size_t l = strlen(f->err);
	snprintf(f->err + l, f->len - l, ": %s", strerror(err));
	return -err;
}

/* root + p, into f->path. */
static const char *at(struct rf *f, const char *p)
{
	snprintf(f->path, sizeof(f->path), "%s%s", f->in->root, p);
	return f->path;
}

static int mkdirs(const char *path, mode_t mode)
{
	char tmp[IOD_AGENT_PATH_MAX * 2];
	if (iod_strlcpy(tmp, path, sizeof(tmp)))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

/* An empty file at path (and its parent directories) to bind a file onto. */
static int touch(const char *path)
{
	char dir[IOD_AGENT_PATH_MAX * 2];
	iod_strlcpy(dir, path, sizeof(dir));
	char *sl = strrchr(dir, '/');
	if (sl && sl != dir) {
		*sl = 0;
		int rc = mkdirs(dir, 0755);
		if (rc)
			return rc;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	close(fd);
	return 0;
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

/*
 * Bind src onto root + dst (same kind: directory or file), then make the
 * bind read-only (a bind's own flags change only by a remount), nosuid and
 * nodev unless dev is set. Missing sources are skipped when optional.
 */
static int bind(struct rf *f, const char *src, const char *dst, bool rw, bool dev, bool optional)
{
	struct stat st;
	if (stat(src, &st)) {
		if (optional && errno == ENOENT)
			return 0;
		return fail(f, errno, "%s", src);
	}
	const char *t = at(f, dst);
	int rc = S_ISDIR(st.st_mode) ? mkdirs(t, 0755) : touch(t);
	if (rc)
		return fail(f, -rc, "creating %s", dst);
	if (mount(src, t, NULL, MS_BIND | MS_REC, NULL))
		return fail(f, errno, "binding %s", src);
	unsigned long fl =
	    MS_BIND | MS_REMOUNT | MS_NOSUID | (rw ? 0 : MS_RDONLY) | (dev ? 0 : MS_NODEV);
	if (mount(NULL, t, NULL, fl, NULL))
		return fail(f, errno, "making %s %s", dst, rw ? "nosuid" : "read-only");
	return 0;
}

/* A top-level host path: a symlink on a merged-/usr host, else a bind. */
static int host_dir(struct rf *f, const char *p)
{
	struct stat st;
	char target[IOD_AGENT_PATH_MAX];
	if (lstat(p, &st))
		return errno == ENOENT ? 0 : fail(f, errno, "%s", p);
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(p, target, sizeof(target) - 1);
		if (n <= 0)
			return fail(f, errno, "reading the link %s", p);
		target[n] = 0;
		if (symlink(target, at(f, p)) && errno != EEXIST)
			return fail(f, errno, "linking %s", p);
		return 0;
	}
	return bind(f, p, p, false, false, false);
}

static int tmpfs(struct rf *f, const char *dst, unsigned long flags, const char *opts)
{
	const char *t = at(f, dst);
	int rc = mkdirs(t, 0755);
	if (rc)
		return fail(f, -rc, "creating %s", dst);
	if (mount("tmpfs", t, "tmpfs", flags, opts))
		return fail(f, errno, "mounting a tmpfs on %s", dst);
	return 0;
}

static int link_in(struct rf *f, const char *target, const char *dst)
{
	if (symlink(target, at(f, dst)) && errno != EEXIST)
		return fail(f, errno, "linking %s", dst);
	return 0;
}

/* /etc: a few host files read-only, the identity files written here. */
static int etc(struct rf *f)
{
	static const char *const files[] = {"/etc/resolv.conf",     "/etc/nsswitch.conf",
	                                    "/etc/host.conf",       "/etc/gai.conf",
	                                    "/etc/ld.so.cache",     "/etc/ld.so.conf",
	                                    "/etc/ld.so.conf.d",    "/etc/ssl",
	                                    "/etc/ca-certificates", "/etc/ca-certificates.conf",
	                                    "/etc/alternatives",    "/etc/protocols",
	                                    "/etc/services",        "/etc/mime.types",
	                                    "/etc/os-release",      "/etc/debian_version",
	                                    "/etc/timezone",        "/etc/localtime",
	                                    "/etc/inputrc",         "/etc/bash.bashrc",
	                                    "/etc/profile",         "/etc/shells",
	                                    "/etc/login.defs"};
	char text[1024];
	const struct iod_agent_rootfs *in = f->in;
	int rc;

	if ((rc = mkdirs(at(f, "/etc"), 0755)))
		return fail(f, -rc, "creating /etc");
	for (unsigned i = 0; i < IOD_ARRAY_LEN(files); i++)
		if ((i || !in->nameserver) &&
		    (rc = bind(f, files[i], files[i], false, false, true)))
			return rc;
	/* on iod's overlay: the node's resolver at the gateway answers
	 * <service>.iod (docs/network.md); nothing else is reachable there */
	if (in->nameserver) {
		snprintf(text, sizeof(text),
		         "# iod: the node's resolver (<service>.iod)\n"
		         "nameserver %.40s\noptions ndots:1 timeout:1\n",
		         in->nameserver);
		if ((rc = write_text(at(f, "/etc/resolv.conf"), text)))
			return fail(f, -rc, "writing /etc/resolv.conf");
	}
	/* the replica's uid has a name; no host account is listed */
	snprintf(text, sizeof(text),
	         "root:x:0:0:root:/root:/usr/sbin/nologin\n"
	         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	         "%s%.40s:x:%u:%u:iod replica:%s:/usr/sbin/nologin\n",
	         in->uid ? "iod-" : "# ", in->hostname, in->uid, in->gid, in->home);
	if ((rc = write_text(at(f, "/etc/passwd"), in->uid
	                                               ? text
	                                               : "root:x:0:0:root:/root:/bin/sh\n"
	                                                 "nobody:x:65534:65534:nobody:/nonexistent:"
	                                                 "/usr/sbin/nologin\n")))
		return fail(f, -rc, "writing /etc/passwd");
	snprintf(text, sizeof(text), "root:x:0:\nnogroup:x:65534:\n%s%.40s:x:%u:\n",
	         in->gid ? "iod-" : "# ", in->hostname, in->gid);
	if ((rc = write_text(at(f, "/etc/group"), text)))
		return fail(f, -rc, "writing /etc/group");
	snprintf(text, sizeof(text),
	         "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	         "127.0.1.1\t%.64s\n",
	         in->hostname);
	if ((rc = write_text(at(f, "/etc/hosts"), text)))
		return fail(f, -rc, "writing /etc/hosts");
	snprintf(text, sizeof(text), "%.64s\n", in->hostname);
	if ((rc = write_text(at(f, "/etc/hostname"), text)))
		return fail(f, -rc, "writing /etc/hostname");
	return 0;
}

/* /dev: the harmless nodes, a private devpts and shm, the placed GPUs. */
static int dev(struct rf *f)
{
	static const char *const nodes[] = {"/dev/null",   "/dev/zero",    "/dev/full",
	                                    "/dev/random", "/dev/urandom", "/dev/tty"};
	static const char *const nvidia[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
	                                     "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
	                                     "/dev/nvidia-caps"};
	int rc;
	if ((rc = tmpfs(f, "/dev", MS_NOSUID | MS_NOEXEC, "mode=0755,size=256k")))
		return rc;
	for (unsigned i = 0; i < IOD_ARRAY_LEN(nodes); i++)
		if ((rc = bind(f, nodes[i], nodes[i], true, true, i == 5)))
			return rc;
	if ((rc = link_in(f, "/proc/self/fd", "/dev/fd")) ||
	    (rc = link_in(f, "/proc/self/fd/0", "/dev/stdin")) ||
	    (rc = link_in(f, "/proc/self/fd/1", "/dev/stdout")) ||
	    (rc = link_in(f, "/proc/self/fd/2", "/dev/stderr")) ||
	    (rc = link_in(f, "pts/ptmx", "/dev/ptmx")))
		return rc;
	if ((rc = mkdirs(at(f, "/dev/pts"), 0755)))
		return fail(f, -rc, "creating /dev/pts");
	if (mount("devpts", at(f, "/dev/pts"), "devpts", MS_NOSUID | MS_NOEXEC,
	          "newinstance,ptmxmode=0666,mode=0620"))
		return fail(f, errno, "mounting /dev/pts");
	/* shared memory for NCCL and data loaders: up to the replica's memory
	 * limit (its pages count there), else half of RAM as the host's */
	char shm[64];
	if (f->in->shm_bytes)
		snprintf(shm, sizeof(shm), "mode=1777,size=%llu",
		         (unsigned long long)f->in->shm_bytes);
	else
		snprintf(shm, sizeof(shm), "mode=1777,size=50%%");
	if ((rc = tmpfs(f, "/dev/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, shm)))
		return rc;
	if (f->in->gpus && !iod_bitmap_empty(f->in->gpus)) {
		for (unsigned i = 0; i < IOD_ARRAY_LEN(nvidia); i++)
			if ((rc = bind(f, nvidia[i], nvidia[i], true, true, true)))
				return rc;
		for (int g = iod_bitmap_next(f->in->gpus, 0); g >= 0;
		     g = iod_bitmap_next(f->in->gpus, (unsigned)g + 1)) {
			char n[32];
			snprintf(n, sizeof(n), "/dev/nvidia%d", g);
			if ((rc = bind(f, n, n, true, true, true)))
				return rc;
		}
	}
	return 0;
}

/* /proc of the replica's PID namespace, with Docker's masked paths. */
static int proc(struct rf *f)
{
	static const char *const mask_files[] = {"/proc/kcore",         "/proc/keys",
	                                         "/proc/latency_stats", "/proc/timer_list",
	                                         "/proc/timer_stats",   "/proc/sched_debug"};
	static const char *const mask_dirs[] = {"/proc/acpi", "/proc/scsi", "/proc/asound"};
	static const char *const ro[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
	                                 "/proc/sysrq-trigger"};
	struct stat st;
	int rc;
	if ((rc = mkdirs(at(f, "/proc"), 0555)))
		return fail(f, -rc, "creating /proc");
	if (mount("proc", at(f, "/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		return fail(f, errno, "mounting /proc");
	for (unsigned i = 0; i < IOD_ARRAY_LEN(mask_files); i++) {
		if (stat(at(f, mask_files[i]), &st))
			continue;
		if (mount("/dev/null", at(f, mask_files[i]), NULL, MS_BIND, NULL))
			return fail(f, errno, "masking %s", mask_files[i]);
	}
	for (unsigned i = 0; i < IOD_ARRAY_LEN(mask_dirs); i++) {
		if (stat(at(f, mask_dirs[i]), &st))
			continue;
		if (mount("tmpfs", at(f, mask_dirs[i]), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
		          "size=0"))
			return fail(f, errno, "masking %s", mask_dirs[i]);
	}
	for (unsigned i = 0; i < IOD_ARRAY_LEN(ro); i++) {
		const char *t = at(f, ro[i]);
		if (stat(t, &st))
			continue;
		if (mount(t, t, NULL, MS_BIND | MS_REC, NULL) ||
		    mount(NULL, t, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		          NULL))
			return fail(f, errno, "making %s read-only", ro[i]);
	}
	return 0;
}

/* A fresh sysfs, read-only: no cgroup hierarchy is mounted under it. */
static int sys(struct rf *f)
{
	struct stat st;
	int rc;
	if ((rc = mkdirs(at(f, "/sys"), 0555)))
		return fail(f, -rc, "creating /sys");
	if (mount("sysfs", at(f, "/sys"), "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          NULL))
		return fail(f, errno, "mounting /sys");
	static const char *const masked[] = {"/sys/firmware", "/sys/devices/virtual/powercap"};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(masked); i++) {
		if (stat(at(f, masked[i]), &st))
			continue;
		if (mount("tmpfs", at(f, masked[i]), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
		          "size=0"))
			return fail(f, errno, "masking %s", masked[i]);
	}
	return 0;
}

int iod_agent_rootfs_enter(const struct iod_agent_rootfs *in, char *err, size_t len)
{
	static const char *const top[] = {"/usr",   "/bin",   "/sbin",  "/lib",
	                                  "/lib32", "/lib64", "/libx32"};
	struct rf f = {.in = in, .err = err, .len = len};
	char opts[64];
	int rc;

	err[0] = 0;
	/* nothing done here may reach the host's mount namespace */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return fail(&f, errno, "making mounts private");
	if (mount("tmpfs", in->root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m"))
		return fail(&f, errno, "mounting the root tmpfs on %s", in->root);
	for (unsigned i = 0; i < IOD_ARRAY_LEN(top); i++)
		if ((rc = host_dir(&f, top[i])))
			return rc;
	if ((rc = etc(&f)) || (rc = dev(&f)) || (rc = proc(&f)) || (rc = sys(&f)))
		return rc;
	snprintf(opts, sizeof(opts), "mode=1777,size=%u", IOD_AGENT_TMP_BYTES);
	if ((rc = tmpfs(&f, "/tmp", MS_NOSUID | MS_NODEV, opts)))
		return rc;
	if ((rc = mkdirs(at(&f, "/run"), 0755)) || (rc = mkdirs(at(&f, "/var/tmp"), 01777)))
		return fail(&f, -rc, "creating /run");
	if (in->secrets && iod_agent_secrets_mount(at(&f, "/run/secrets"), in->secrets, in->uid,
	                                           in->gid, err, len))
		return -EIO;
	if (in->data && (rc = bind(&f, in->data, in->data, true, false, false)))
		return rc;
	if (in->creds && (rc = bind(&f, in->creds, in->creds, false, false, false)))
		return rc;
	/* service_mesh.transport shm: the proxy's sockets, and ep/ where the
	 * replica may listen (read-write: a connect and a bind both write) */
	if (in->mesh && (rc = bind(&f, in->mesh, in->mesh, true, false, true)))
		return rc;
	if (in->self_exe && in->self_exe[0] &&
	    (rc = bind(&f, in->self_exe, in->self_exe, false, false, true)))
		return rc;
	/* in: the new root replaces /, the old one is detached */
	if (chdir(in->root))
		return fail(&f, errno, "entering %s", in->root);
	if (syscall(SYS_pivot_root, ".", "."))
		return fail(&f, errno, "pivot_root");
	if (umount2(".", MNT_DETACH))
		return fail(&f, errno, "detaching the old root");
	if (chdir("/"))
		return fail(&f, errno, "chdir /");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL))
		return fail(&f, errno, "making / read-only");
	return 0;
}
