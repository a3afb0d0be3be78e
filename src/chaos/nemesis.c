/*
 * nemesis.c: the shell of `iod chaos` (include/iod/chaos.h): it finds the
 * processes of an `iod up` cluster, applies faults to them (nftables
 * tables, cgroups, signals) and heals them, and it runs the keeper: the
 * small detached process that heals every fault at its deadline whoever
 * else dies.
 *
 * Records live in STATE_DIR/chaos/<id>.json, written whole (tmp, fsync,
 * rename) before the fault is applied, so that a crash at any point leaves
 * either nothing applied or a record that says how to heal it. Healing is
 * idempotent (a missing table, a process that is gone: nothing to do) and
 * checks process identity (pid and start time): a restarted process never
 * receives the SIGCONT, the cgroup move or the restart meant for its
 * predecessor, and the chaos cgroup a partition matches is made for the
 * fault and removed with it, so a new process can never be born inside it.
 *
 * Decisions (shapes, records, nft scripts) are fault.c's; this file only
 * does what they say.
 */
#include "iod/agent.h"
#include "iod/chaos.h"
#include "iod/objects.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t iod_chaos_now_ms(void)
{
	return iod_time_unix_ns() / IOD_NS_PER_MS;
}

static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	int err = errno;
	close(fd);
	if (n < 0)
		return -err;
	buf[n] = 0;
	return (int)n;
}

uint64_t iod_chaos_start_ticks(int pid)
{
	char path[64], buf[1024];
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	/* after the command name, which may hold spaces: ") S ppid ..." */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	/* fields 3.. : state is field 3, starttime field 22 */
	for (int f = 3; f < 22 && p; f++) {
		p = strchr(p + 1, ' ');
	}
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

bool iod_chaos_member_alive(const struct iod_chaos_member *m)
{
	if (m->pid <= 0 || kill(m->pid, 0) != 0)
		return false;
	char st = iod_chaos_proc_state(m->pid);
	if (st == 'Z' || st == 'X')
		return false; /* dead, not yet reaped */
	return iod_chaos_start_ticks(m->pid) == m->start_ticks;
}

/* The process's state letter (R, S, T stopped, Z zombie) or 0. */
char iod_chaos_proc_state(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

static int read_pidfile(const char *path)
{
	char buf[32];
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	return atoi(buf);
}

/* Fill m from a running pid: identity, command line, ports (--raft, --api). */
static int member_from_pid(struct iod_chaos_member *m, int pid, const char *dir)
{
	char path[64];
	m->pid = pid;
	m->start_ticks = iod_chaos_start_ticks(pid);
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ESRCH;
	ssize_t n = read(fd, m->argv, sizeof(m->argv) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	m->argv[n] = 0;
	if (m->argv[n - 1])
		n++; /* truncated: end the last argument */
	m->argv_len = (uint32_t)n;
	bool ours = false;
	for (uint32_t o = 0; o < m->argv_len;) {
		const char *a = m->argv + o;
		size_t l = strlen(a);
		const char *next = o + l + 1 < m->argv_len ? a + l + 1 : NULL;
		if (strstr(a, dir))
			ours = true;
		if (next && (!strcmp(a, "--raft") || !strcmp(a, "--api"))) {
			const char *c = strrchr(next, ':');
			int port = c ? atoi(c + 1) : 0;
			if (port > 0 && port < 65536 && m->nports < IOD_ARRAY_LEN(m->ports)) {
				snprintf(m->addrs[m->nports], sizeof(m->addrs[0]), "%s", next);
				m->ports[m->nports++] = (uint16_t)port;
			}
		}
		o += (uint32_t)l + 1;
	}
	if (!ours || !m->start_ticks)
		return -ESRCH; /* a reused pid: not a process of this cluster */
	return 0;
}

static void load_group(struct iod_chaos_cluster *c, const char *prefix, enum iod_chaos_kind kind,
                       struct iod_chaos_member *out, uint32_t *n)
{
	*n = 0;
	for (uint32_t i = 1; i <= IOD_CHAOS_MEMBERS_MAX; i++) {
		struct iod_chaos_member *m = &out[*n];
		memset(m, 0, sizeof(*m));
		snprintf(m->pidfile, sizeof(m->pidfile), "%s/%s-%u.pid", c->dir, prefix, i);
		if (access(m->pidfile, F_OK))
			break;
		snprintf(m->name, sizeof(m->name), "%s-%u", prefix, i);
		snprintf(m->log, sizeof(m->log), "%s/%s-%u.log", c->dir, prefix, i);
		m->kind = kind;
		int pid = read_pidfile(m->pidfile);
		if (pid <= 0 || member_from_pid(m, pid, c->dir)) {
			m->pid = 0; /* known, not running */
			m->start_ticks = 0;
			m->nports = 0;
		}
		(*n)++;
	}
}

int iod_chaos_cluster_load(const char *dir_in, struct iod_chaos_cluster *c, struct iod_err *e)
{
	char dir[IOD_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", dir_in); /* dir_in may be c->dir */
	memset(c, 0, sizeof(*c));
	if (snprintf(c->dir, sizeof(c->dir), "%s", dir) >= (int)sizeof(c->dir) ||
	    snprintf(c->chaos_dir, sizeof(c->chaos_dir), "%s/chaos", dir) >=
	        (int)sizeof(c->chaos_dir))
		return iod_err_set(e, -ENAMETOOLONG, "state dir %s: path too long", dir);
	load_group(c, "server", IOD_CHAOS_SERVER, c->servers, &c->nservers);
	load_group(c, "node", IOD_CHAOS_NODE, c->nodes, &c->nnodes);
	if (!c->nservers)
		return iod_err_set(
		    e, -ENOENT,
		    "no cluster in %s (no server-1.pid): start one with `iod up`, or "
		    "name its --state-dir",
		    dir);
	for (uint32_t i = 0; i < c->nservers; i++) {
		size_t l = strlen(c->apis);
		const struct iod_chaos_member *m = &c->servers[i];
		/* where it listens (10.254.0.1 on `iod up --netns`), not 127.0.0.1 */
		if (m->nports == 2)
			snprintf(c->apis + l, sizeof(c->apis) - l, "%s%s", l ? "," : "",
			         m->addrs[1]);
	}
	return 0;
}

int iod_chaos_link_resolve(const struct iod_chaos_cluster *c, uint32_t leaf, uint32_t spine,
                           struct iod_chaos_fault *f, struct iod_err *e)
{
	struct iod_agent_underlay_cfg ul = {0};
	char dir[2 * IOD_PATH_MAX + 2], path[IOD_PATH_MAX + 64];
	char cwd[IOD_PATH_MAX];
	/* absolute as `iod up` made it (cwd/dir, not normalised): the hash names it */
	if (c->dir[0] != '/' && getcwd(cwd, sizeof(cwd)))
		snprintf(dir, sizeof(dir), "%s/%s", cwd, c->dir);
	else
		snprintf(dir, sizeof(dir), "%s", c->dir);
	iod_agent_underlay_prefix(dir, ul.prefix, sizeof(ul.prefix));
	for (uint32_t k = 1; k <= IOD_UNDERLAY_LEAVES_MAX; k++) {
		snprintf(path, sizeof(path), "/run/netns/%s-l%u", ul.prefix, k);
		if (access(path, F_OK))
			break;
		ul.leaves = k;
	}
	for (uint32_t k = 1; k <= IOD_UNDERLAY_SPINES_MAX; k++) {
		snprintf(path, sizeof(path), "/run/netns/%s-s%u", ul.prefix, k);
		if (access(path, F_OK))
			break;
		ul.spines = k;
	}
	if (!ul.leaves || !ul.spines)
		return iod_err_set(e, -ENOENT,
		                   "the cluster in %s has no underlay (no namespace %s-l1): links "
		                   "are those of `iod up --netns`",
		                   c->dir, ul.prefix);
	if (iod_agent_underlay_link(&ul, leaf, spine, f->link_ns, sizeof(f->link_ns), f->link_dev,
	                            sizeof(f->link_dev), e))
		return -EINVAL;
	snprintf(f->link, sizeof(f->link), "leaf%u-spine%u", leaf, spine);
	return 0;
}

/* The status.json node agent i wrote (its replicas, their pids), or NULL. */
static json_t *node_status(const struct iod_chaos_cluster *c, uint32_t i)
{
	char path[IOD_PATH_MAX + 32];
	struct iod_buf b;
	struct iod_err e1 = {0};
	snprintf(path, sizeof(path), "%s/%s/status.json", c->dir, c->nodes[i].name);
	iod_buf_init(&b);
	json_t *j =
	    iod_buf_read_file(&b, path, 4u << 20, &e1) ? NULL : json_loadb(b.data, b.len, 0, NULL);
	iod_buf_free(&b);
	return j;
}

uint32_t iod_chaos_service_replicas(const struct iod_chaos_cluster *c, const char *service,
                                    char names[][IOD_NAME_MAX], uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->nnodes; i++) {
		json_t *j = node_status(c, i), *r;
		if (!j)
			continue;
		size_t k;
		json_array_foreach(json_object_get(j, "replicas"), k, r)
		{
			const char *nm = NULL;
			uint64_t pid = 0;
			const char *svc =
			    iod_obj_peek_str(IOD_OBJ_KIND_REPLICA, r, IOD_OBJ_REPLICA_SERVICE);
			if (n < max && svc && !strcmp(svc, service) &&
			    !iod_json_get_str(r, "name", &nm) &&
			    !iod_json_get_u64(r, "pid", &pid) && pid && strlen(nm) < IOD_NAME_MAX)
				snprintf(names[n++], IOD_NAME_MAX, "%s", nm);
		}
		json_decref(j);
	}
	return n;
}

/* A replica's pid from the status.json of the node agent that runs it. */
int iod_chaos_replica_find(const struct iod_chaos_cluster *c, const char *name,
                           struct iod_chaos_member *m, struct iod_err *e)
{
	for (uint32_t i = 0; i < c->nnodes; i++) {
		json_t *j = node_status(c, i), *r;
		if (!j)
			continue;
		size_t k;
		json_array_foreach(json_object_get(j, "replicas"), k, r)
		{
			const char *n = NULL;
			uint64_t pid = 0;
			if (iod_json_get_str(r, "name", &n) || strcmp(n, name) ||
			    iod_json_get_u64(r, "pid", &pid) || !pid)
				continue;
			memset(m, 0, sizeof(*m));
			snprintf(m->name, sizeof(m->name), "%s", name);
			m->kind = IOD_CHAOS_REPLICA;
			m->pid = (int32_t)pid;
			m->start_ticks = iod_chaos_start_ticks((int)pid);
			json_decref(j);
			if (!m->start_ticks)
				break;
			return 0;
		}
		json_decref(j);
	}
	return iod_err_set(e, -ESRCH,
	                   "replica %s is not running on any node of %s (`iod get replicas`)", name,
	                   c->dir);
}

/* ---- cgroups and sockets ------------------------------------------------ */

/* The cgroup2 mount point, and its path as nft names cgroups ("" or "unified"). */
static int cgroup2_root(char *mnt, size_t mlen, char *nft, size_t nlen, struct iod_err *e)
{
	FILE *f = fopen("/proc/self/mounts", "r");
	char line[1024];
	mnt[0] = 0;
	if (!f)
		return iod_err_set(e, -errno, "/proc/self/mounts: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char dev[256], dir[512], type[64];
		if (sscanf(line, "%255s %511s %63s", dev, dir, type) == 3 &&
		    !strcmp(type, "cgroup2")) {
			snprintf(mnt, mlen, "%s", dir);
			break;
		}
	}
	fclose(f);
	if (!mnt[0])
		return iod_err_set(
		    e, -ENOTSUP,
		    "no cgroup2 file system is mounted: a loopback partition matches "
		    "each process's sockets by cgroup v2");
	if (!strcmp(mnt, "/sys/fs/cgroup"))
		nft[0] = 0;
	else if (!strncmp(mnt, "/sys/fs/cgroup/", 15))
		snprintf(nft, nlen, "%s/", mnt + 15);
	else
		return iod_err_set(
		    e, -ENOTSUP,
		    "cgroup2 is mounted at %s; nft finds cgroups under /sys/fs/cgroup "
		    "only",
		    mnt);
	return 0;
}

/* The cgroup2 path of pid ("/a/b"), from /proc/PID/cgroup's "0::" line. */
static int pid_cgroup2(int pid, char *buf, size_t len)
{
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	if (read_small(path, text, sizeof(text)) <= 0)
		return -ESRCH;
	for (char *l = text, *save = NULL, *t = strtok_r(l, "\n", &save); t;
	     t = strtok_r(NULL, "\n", &save))
		if (!strncmp(t, "0::", 3)) {
			snprintf(buf, len, "%s", t + 3);
			return 0;
		}
	return -ENOENT;
}

/* Port pairs of pid's TCP sockets that are not listening. */
static void pid_socks(struct iod_chaos_member *m)
{
	char path[300], link[128];
	unsigned long inodes[512];
	uint32_t ni = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", m->pid);
	DIR *d = opendir(path);
	struct dirent *de;
	m->nsocks = 0;
	if (!d)
		return;
	while ((de = readdir(d)) && ni < IOD_ARRAY_LEN(inodes)) {
		char fp[300];
		snprintf(fp, sizeof(fp), "%s/%s", path, de->d_name);
		ssize_t n = readlink(fp, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (!strncmp(link, "socket:[", 8))
			inodes[ni++] = strtoul(link + 8, NULL, 10);
	}
	closedir(d);
	const char *tables[] = {"tcp", "tcp6"};
	for (int t = 0; t < 2; t++) {
		snprintf(path, sizeof(path), "/proc/%d/net/%s", m->pid, tables[t]);
		FILE *f = fopen(path, "r");
		char line[512];
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f) && m->nsocks < IOD_CHAOS_SOCKS_MAX) {
			char la[64], ra[64];
			unsigned st = 0;
			unsigned long ino = 0;
			if (sscanf(line, " %*d: %63s %63s %x %*s %*s %*s %*s %*s %lu", la, ra, &st,
			           &ino) != 4 ||
			    st == 0x0A)
				continue;
			bool mine = false;
			for (uint32_t i = 0; i < ni && !mine; i++)
				mine = inodes[i] == ino;
			const char *lp = strrchr(la, ':'), *rp = strrchr(ra, ':');
			if (!mine || !lp || !rp)
				continue;
			m->socks[m->nsocks][0] = (uint16_t)strtoul(lp + 1, NULL, 16);
			m->socks[m->nsocks][1] = (uint16_t)strtoul(rp + 1, NULL, 16);
			if (m->socks[m->nsocks][0] && m->socks[m->nsocks][1])
				m->nsocks++;
		}
		fclose(f);
	}
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int err = errno;
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -err;
}

/* Move pid into the cgroup2 directory dir. */
static int cgroup_move(const char *dir, int pid)
{
	char path[IOD_PATH_MAX + 16], num[16];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(num, sizeof(num), "%d", pid);
	return write_file(path, num);
}

/* ---- records ------------------------------------------------------------ */

static void record_path(const char *chaos_dir, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.json", chaos_dir, id);
}

int iod_chaos_record_save(const char *chaos_dir, const struct iod_chaos_fault *f, struct iod_err *e)
{
	char path[IOD_PATH_MAX + 64], tmp[IOD_PATH_MAX + 64];
	json_t *j = iod_chaos_fault_to_json(f);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return iod_err_set(e, -ENOMEM, "out of memory");
	mkdir(chaos_dir, 0700);
	record_path(chaos_dir, f->id, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", chaos_dir, f->id);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(text);
		return iod_err_set(e, -errno, "%s: %s", tmp, strerror(errno));
	}
	size_t l = strlen(text);
	bool ok = write(fd, text, l) == (ssize_t)l && write(fd, "\n", 1) == 1 && !fsync(fd);
	free(text);
	close(fd);
	if (!ok || rename(tmp, path)) {
		unlink(tmp);
		return iod_err_set(e, -EIO, "cannot write fault record %s", path);
	}
	/* the rename itself must survive a crash */
	int dfd = open(chaos_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int iod_chaos_records_load(const char *chaos_dir, struct iod_chaos_fault **out, uint32_t *n,
                           struct iod_err *e)
{
	DIR *d = opendir(chaos_dir);
	struct dirent *de;
	*out = NULL;
	*n = 0;
	if (!d)
		return errno == ENOENT
		           ? 0
		           : iod_err_set(e, -errno, "%s: %s", chaos_dir, strerror(errno));
	struct iod_chaos_fault *v = calloc(IOD_CHAOS_FAULTS_MAX, sizeof(*v));
	if (!v) {
		closedir(d);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	while ((de = readdir(d)) && *n < IOD_CHAOS_FAULTS_MAX) {
		size_t l = strlen(de->d_name);
		char path[IOD_PATH_MAX + 300];
		if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", chaos_dir, de->d_name);
		json_t *j = json_load_file(path, 0, NULL);
		struct iod_err e1 = {0};
		if (j && !iod_chaos_fault_from_json(j, &v[*n], &e1))
			(*n)++;
		json_decref(j);
	}
	closedir(d);
	*out = v;
	return 0;
}

/* ---- apply and heal ----------------------------------------------------- */

/* `nft -f -` of script, in the network namespace ns (NULL: this one). */
static int run_nft(const char *script, bool quiet, const char *ns, struct iod_err *e)
{
	int in[2];
	if (pipe(in))
		return iod_err_set(e, -errno, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(in[0]);
		close(in[1]);
		return iod_err_set(e, -errno, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		dup2(in[0], 0);
		close(in[0]);
		close(in[1]);
		if (quiet) {
			int nul = open("/dev/null", O_WRONLY);
			if (nul >= 0)
				dup2(nul, 2);
		}
		if (ns)
			execlp("ip", "ip", "netns", "exec", ns, "nft", "-f", "-", (char *)NULL);
		else
			execlp("nft", "nft", "-f", "-", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	size_t l = strlen(script), o = 0;
	while (o < l) {
		ssize_t w = write(in[1], script + o, l - o);
		if (w <= 0)
			break;
		o += (size_t)w;
	}
	close(in[1]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return iod_err_set(e, -EIO, "nft -f failed (exit %d)%s",
		                   WIFEXITED(st) ? WEXITSTATUS(st) : -1,
		                   WIFEXITED(st) && WEXITSTATUS(st) == 127
		                       ? ": nft not installed (Debian package nftables)"
		                       : "");
	return 0;
}

/* The namespace a fault's table lives in: a link's leaf, else ours (NULL). */
static const char *fault_ns(const struct iod_chaos_fault *f)
{
	return f->link[0] ? f->link_ns : NULL;
}

bool iod_chaos_table_exists(const struct iod_chaos_fault *f)
{
	char table[IOD_CHAOS_ID_MAX + 16], cmd[128];
	iod_chaos_table_name(f, table, sizeof(table));
	snprintf(cmd, sizeof(cmd), "nft list table inet %s >/dev/null 2>&1", table);
	return system(cmd) == 0;
}

/* A fresh cgroup per member, under the cgroup2 root's iod-chaos/. */
static int prepare_cgroups(struct iod_chaos_fault *f, struct iod_err *e)
{
	char mnt[IOD_PATH_MAX], nft[IOD_PATH_MAX], cur[IOD_PATH_MAX];
	int rc = cgroup2_root(mnt, sizeof(mnt), nft, sizeof(nft), e);
	if (rc)
		return rc;
	char top[IOD_PATH_MAX + 16];
	snprintf(top, sizeof(top), "%s/iod-chaos", mnt);
	if (mkdir(top, 0755) && errno != EEXIST)
		return iod_err_set(e, -errno, "mkdir %s: %s", top, strerror(errno));
	for (uint32_t i = 0; i < f->n; i++) {
		struct iod_chaos_member *m = &f->m[i];
		bool sends = f->action == IOD_CHAOS_ACT_LOSS;
		for (uint32_t j = 0; j < f->n; j++)
			sends |= f->g.cut[i][j];
		if (!sends || m->pid <= 0)
			continue;
		if (pid_cgroup2(m->pid, cur, sizeof(cur)))
			return iod_err_set(e, -ESRCH, "%s (pid %d) has no cgroup2 path", m->name,
			                   (int)m->pid);
		if (strstr(cur, "/iod-chaos/"))
			return iod_err_set(
			    e, -EBUSY,
			    "%s is already in a chaos cgroup (%s): one network fault per "
			    "process at a time (`iod chaos list`)",
			    m->name, cur);
		snprintf(m->cgroup_home, sizeof(m->cgroup_home), "%s%s", mnt, cur);
		char id[IOD_CHAOS_ID_MAX], name[IOD_NAME_MAX];
		memcpy(id, f->id, sizeof(id));
		memcpy(name, m->name, sizeof(name));
		snprintf(m->cgroup_dir, sizeof(m->cgroup_dir), "%s/%s-%s", top, id, name);
		snprintf(m->cgroup, sizeof(m->cgroup), "%siod-chaos/%s-%s", nft, id, name);
		m->cgroup_level = 2;
	}
	return 0;
}

static int apply_net(struct iod_chaos_cluster *c, struct iod_chaos_fault *f, struct iod_err *e)
{
	for (uint32_t i = 0; i < f->n; i++) {
		struct iod_chaos_member *m = &f->m[i];
		if (!m->cgroup_dir[0])
			continue;
		if (mkdir(m->cgroup_dir, 0755) && errno != EEXIST)
			return iod_err_set(e, -errno, "mkdir %s: %s", m->cgroup_dir,
			                   strerror(errno));
		if (!iod_chaos_member_alive(m) || cgroup_move(m->cgroup_dir, m->pid))
			return iod_err_set(e, -ESRCH, "%s (pid %d) exited or cannot be moved to %s",
			                   m->name, (int)m->pid, m->cgroup_dir);
	}
	/* after the move: every socket made from now on is in the chaos cgroup;
	 * the ones made before are cut by their port pair */
	for (uint32_t i = 0; i < f->n; i++)
		if (f->m[i].cgroup_dir[0])
			pid_socks(&f->m[i]);
	int rc = iod_chaos_record_save(c->chaos_dir, f, e);
	if (rc)
		return rc;
	struct iod_buf b;
	iod_buf_init(&b);
	rc = iod_chaos_nft_script(f, &b, e);
	if (!rc)
		rc = run_nft(b.data, false, fault_ns(f), e);
	iod_buf_free(&b);
	return rc;
}

static void relay_stop(const struct iod_chaos_fault *f)
{
	if (f->relay_pid > 0 && f->relay_ticks &&
	    iod_chaos_start_ticks(f->relay_pid) == f->relay_ticks)
		kill(f->relay_pid, SIGKILL);
}

int iod_chaos_fault_heal(const char *chaos_dir, const struct iod_chaos_fault *f, struct iod_err *e)
{
	char table[IOD_CHAOS_ID_MAX + 16], script[128], path[IOD_PATH_MAX + 64];
	int rc = 0;
	switch (f->action) {
	case IOD_CHAOS_ACT_PARTITION:
	case IOD_CHAOS_ACT_DELAY:
	case IOD_CHAOS_ACT_LOSS: {
		iod_chaos_table_name(f, table, sizeof(table));
		if (f->link[0]) {
			/* in the leaf's namespace; gone with it (`iod down`) is healed.
			 * add-then-delete: whether or not the table is there */
			char nsp[IOD_CHAOS_LINK_MAX + 16];
			snprintf(nsp, sizeof(nsp), "/run/netns/%s", f->link_ns);
			snprintf(script, sizeof(script), "table inet %s\ndelete table inet %s\n",
			         table, table);
			if (access(nsp, F_OK) == 0)
				rc = run_nft(script, true, f->link_ns, e);
		} else if (iod_chaos_table_exists(f)) {
			snprintf(script, sizeof(script), "delete table inet %s\n", table);
			rc = run_nft(script, true, NULL, e);
		}
		for (uint32_t i = 0; i < f->n; i++) {
			const struct iod_chaos_member *m = &f->m[i];
			if (!m->cgroup_dir[0])
				continue;
			/* only the very process that was moved goes home */
			if (iod_chaos_member_alive(m) && m->cgroup_home[0])
				cgroup_move(m->cgroup_home, m->pid);
			for (int k = 0; k < 50 && rmdir(m->cgroup_dir) && errno == EBUSY; k++)
				usleep(2000);
		}
		/* after the table: new connections go direct, relayed ones reset */
		if (!rc)
			relay_stop(f);
		break;
	}
	case IOD_CHAOS_ACT_PAUSE:
		for (uint32_t i = 0; i < f->n; i++)
			if (iod_chaos_member_alive(&f->m[i]))
				kill(f->m[i].pid, SIGCONT);
		break;
	case IOD_CHAOS_ACT_MEMBER: rc = iod_chaos_member_readd(f, e); break;
	case IOD_CHAOS_ACT_KILL:
		for (uint32_t i = 0; i < f->n && f->restart; i++) {
			const struct iod_chaos_member *m = &f->m[i];
			/* a killed process takes a moment to go (threads, exit
			 * handlers); a signal it survives leaves nothing to restart */
			for (int k = 0; k < 300 && iod_chaos_member_alive(m); k++)
				usleep(10000);
			if (iod_chaos_member_alive(m) || !m->argv_len)
				continue;
			if (m->pidfile[0]) {
				/* someone (iod up, the user) started it again already */
				struct iod_chaos_member now = {0};
				int pid = read_pidfile(m->pidfile);
				char dir[IOD_PATH_MAX];
				snprintf(dir, sizeof(dir), "%s", chaos_dir);
				char *slash = strrchr(dir, '/');
				if (slash)
					*slash = 0;
				if (pid > 0 && pid != m->pid && !member_from_pid(&now, pid, dir))
					continue;
			}
			if (iod_chaos_respawn(m, e))
				rc = -EIO;
		}
		break;
	default: break;
	}
	record_path(chaos_dir, f->id, path, sizeof(path));
	if (!rc)
		unlink(path);
	return rc;
}

int iod_chaos_respawn(const struct iod_chaos_member *m, struct iod_err *e)
{
	char *argv[128];
	uint32_t n = 0;
	char buf[IOD_CHAOS_CMDLINE_MAX];
	memcpy(buf, m->argv, m->argv_len);
	for (uint32_t o = 0; o < m->argv_len && n < IOD_ARRAY_LEN(argv) - 1;) {
		argv[n++] = buf + o;
		o += (uint32_t)strlen(buf + o) + 1;
	}
	argv[n] = NULL;
	if (!n)
		return iod_err_set(e, -EINVAL, "%s: no command line to restart", m->name);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return iod_err_set(e, -errno, "fork: %s", strerror(errno));
	if (pid == 0) {
		setsid();
		int fd = m->log[0] ? open(m->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)
		                   : open("/dev/null", O_WRONLY | O_CLOEXEC);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (nul >= 0)
			dup2(nul, 0);
		close_range(3, ~0u, 0);
		execv(argv[0], argv);
		_exit(127);
	}
	if (m->pidfile[0]) {
		char tmp[IOD_PATH_MAX + 8], num[16];
		snprintf(tmp, sizeof(tmp), "%s.tmp", m->pidfile);
		snprintf(num, sizeof(num), "%d\n", (int)pid);
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			ssize_t w = write(fd, num, strlen(num));
			close(fd);
			if (w > 0)
				rename(tmp, m->pidfile);
		}
	}
	return 0;
}

/* delay: start the relay (a daemon that ends itself a second after the
 * deadline) and learn its port and identity from its port file. */
static int relay_start(const char *chaos_dir, struct iod_chaos_fault *f, struct iod_err *e)
{
	char exe[IOD_PATH_MAX], pf[IOD_PATH_MAX + 64], lat[16], until[24], buf[64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return iod_err_set(e, -ENOENT, "cannot find my own binary to start the relay");
	exe[n] = 0;
	mkdir(chaos_dir, 0700);
	snprintf(pf, sizeof(pf), "%s/%s.relay", chaos_dir, f->id);
	snprintf(lat, sizeof(lat), "%u", f->latency_ms);
	snprintf(until, sizeof(until), "%llu", (unsigned long long)(f->deadline_ms + 1000));
	unlink(pf);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return iod_err_set(e, -errno, "fork: %s", strerror(errno));
	if (pid == 0) {
		setsid();
		if (fork() != 0)
			_exit(0);
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
		}
		close_range(3, ~0u, 0);
		execl(exe, exe, "chaos", "relay", "--port-file", pf, "--latency-ms", lat,
		      "--until-ms", until, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	unsigned port = 0;
	int rpid = 0;
	for (int i = 0; i < 300 && !port; i++) {
		if (read_small(pf, buf, sizeof(buf)) > 0 && sscanf(buf, "%u %d", &port, &rpid) == 2)
			break;
		port = 0;
		usleep(10000);
	}
	unlink(pf);
	if (!port || port > 65535 || rpid <= 0)
		return iod_err_set(e, -ETIMEDOUT, "the delay relay did not start");
	f->relay_port = (uint16_t)port;
	f->relay_pid = rpid;
	f->relay_ticks = iod_chaos_start_ticks(rpid);
	return 0;
}

/* pid's network namespace is ours: the root one, where partition, loss and
 * delay tables hook (an agent of `iod up --netns` is in its host's). */
static bool same_netns(int pid)
{
	char path[64];
	struct stat a, b;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	if (stat(path, &a) || stat("/proc/self/ns/net", &b))
		return true; /* gone or unreadable: the liveness check reports it */
	return a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

int iod_chaos_fault_apply(struct iod_chaos_cluster *c, struct iod_chaos_fault *f, struct iod_err *e)
{
	int rc = 0;
	struct iod_err e2 = {0};
	for (uint32_t i = 0; i < f->n; i++)
		if (!iod_chaos_member_alive(&f->m[i]))
			return iod_err_set(e, -ESRCH, "%s is not running: nothing to %s",
			                   f->m[i].name, iod_chaos_action_name(f->action));
	bool net = f->action == IOD_CHAOS_ACT_PARTITION || f->action == IOD_CHAOS_ACT_LOSS ||
	           f->action == IOD_CHAOS_ACT_DELAY;
	for (uint32_t i = 0; net && i < f->n; i++)
		if (!same_netns(f->m[i].pid))
			return iod_err_set(
			    e, -EXDEV,
			    "%s runs in a network namespace of its own (`iod up --netns`): a %s "
			    "table in this namespace's hooks would not see what it sends; cut or "
			    "make lossy its leaf's link instead (link/leafL-spineS), or kill or "
			    "pause it",
			    f->m[i].name, iod_chaos_action_name(f->action));
	if (net && !f->link[0]) /* a link's table matches its interface, not processes */
		if ((rc = prepare_cgroups(f, e)))
			return rc;
	if (f->action == IOD_CHAOS_ACT_DELAY && (rc = relay_start(c->chaos_dir, f, e)))
		return rc;
	iod_chaos_fault_describe(f);
	/* the record first: from here on the keeper heals it, whatever happens */
	if ((rc = iod_chaos_record_save(c->chaos_dir, f, e)))
		return rc;
	if ((rc = iod_chaos_keeper_ensure(c->chaos_dir, e))) {
		iod_chaos_fault_heal(c->chaos_dir, f, &e2);
		return rc;
	}
	switch (f->action) {
	case IOD_CHAOS_ACT_PARTITION:
	case IOD_CHAOS_ACT_DELAY:
	case IOD_CHAOS_ACT_LOSS: rc = apply_net(c, f, e); break;
	case IOD_CHAOS_ACT_PAUSE:
		for (uint32_t i = 0; i < f->n && !rc; i++)
			if (kill(f->m[i].pid, SIGSTOP))
				rc = iod_err_set(e, -errno, "SIGSTOP %s: %s", f->m[i].name,
				                 strerror(errno));
		break;
	case IOD_CHAOS_ACT_KILL:
		for (uint32_t i = 0; i < f->n && !rc; i++)
			if (kill(f->m[i].pid, f->signal))
				rc = iod_err_set(e, -errno, "kill %s: %s", f->m[i].name,
				                 strerror(errno));
		break;
	case IOD_CHAOS_ACT_MEMBER: rc = iod_chaos_member_remove(f, e); break;
	default: rc = iod_err_set(e, -EINVAL, "unknown action");
	}
	if (rc)
		iod_chaos_fault_heal(c->chaos_dir, f, &e2);
	return rc;
}

/* ---- the keeper --------------------------------------------------------- */

static int lock_file(const char *chaos_dir, const char *name, bool wait)
{
	char path[IOD_PATH_MAX + 32];
	mkdir(chaos_dir, 0700);
	snprintf(path, sizeof(path), "%s/%s", chaos_dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB))) {
		close(fd);
		return -EWOULDBLOCK;
	}
	return fd;
}

int iod_chaos_heal_lock(const char *chaos_dir)
{
	return lock_file(chaos_dir, "heal.lock", true);
}

bool iod_chaos_keeper_running(const char *chaos_dir)
{
	int fd = lock_file(chaos_dir, "keeper.lock", false);
	if (fd >= 0) {
		close(fd);
		return false;
	}
	return fd == -EWOULDBLOCK;
}

int iod_chaos_keeper_pid(const char *chaos_dir)
{
	char path[IOD_PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/keeper.pid", chaos_dir);
	return read_pidfile(path);
}

int iod_chaos_keeper_ensure(const char *chaos_dir, struct iod_err *e)
{
	char exe[IOD_PATH_MAX], log[IOD_PATH_MAX + 32];
	if (iod_chaos_keeper_running(chaos_dir))
		return 0;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return iod_err_set(e, -ENOENT, "cannot find my own binary to start the keeper");
	exe[n] = 0;
	snprintf(log, sizeof(log), "%s/keeper.log", chaos_dir);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return iod_err_set(e, -errno, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* a daemon in its own session, a grandchild reparented to init:
		 * killing the chaos command, its terminal or its process group
		 * leaves it running */
		setsid();
		if (fork() != 0)
			_exit(0);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (nul >= 0)
			dup2(nul, 0);
		close_range(3, ~0u, 0);
		execl(exe, exe, "chaos", "keeper", "--chaos-dir", chaos_dir, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	/* ready when it holds the lock */
	for (int i = 0; i < 300; i++) {
		if (iod_chaos_keeper_running(chaos_dir))
			return 0;
		usleep(10000);
	}
	return iod_err_set(e, -ETIMEDOUT, "the chaos keeper did not start: see %s", log);
}

static void keeper_log(const char *fmt, const char *a, const char *b)
{
	time_t t = time(NULL);
	struct tm tm;
	char ts[32];
	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
	printf("%s ", ts);
	printf(fmt, a, b);
	printf("\n");
	fflush(stdout);
}

/*
 * A member of a network fault exited: its rules go, so that a process
 * started in its place (same ports, new identity) inherits nothing. The
 * rest of the fault stays until the deadline; the table is replaced in one
 * nft transaction.
 */
static void forget_exited(const char *chaos_dir, struct iod_chaos_fault *f)
{
	bool changed = false;
	if (f->action != IOD_CHAOS_ACT_PARTITION && f->action != IOD_CHAOS_ACT_LOSS &&
	    f->action != IOD_CHAOS_ACT_DELAY)
		return;
	for (uint32_t i = 0; i < f->n; i++) {
		struct iod_chaos_member *m = &f->m[i];
		if (m->pid <= 0 || iod_chaos_member_alive(m))
			continue;
		keeper_log("%s: %s exited: its rules are removed", f->id, m->name);
		m->pid = 0;
		m->nports = 0;
		m->nsocks = 0;
		m->cgroup[0] = 0; /* cgroup_dir stays: healing removes it */
		changed = true;
	}
	if (!changed)
		return;
	struct iod_err e = {0};
	struct iod_buf b;
	char table[IOD_CHAOS_ID_MAX + 16];
	int hl = iod_chaos_heal_lock(chaos_dir);
	char rp[IOD_PATH_MAX + 64];
	record_path(chaos_dir, f->id, rp, sizeof(rp));
	if (access(rp, F_OK) || iod_chaos_record_save(chaos_dir, f, &e)) {
		if (hl >= 0)
			close(hl);
		return; /* healed meanwhile */
	}
	iod_chaos_table_name(f, table, sizeof(table));
	iod_buf_init(&b);
	/* add-then-delete makes the delete safe whether or not it exists */
	iod_buf_printf(&b, "table inet %s\ndelete table inet %s\n", table, table);
	if (!iod_chaos_nft_script(f, &b, &e) && run_nft(b.data, false, fault_ns(f), &e))
		keeper_log("%s: replacing the table failed: %s", f->id, e.msg);
	iod_buf_free(&b);
	if (hl >= 0)
		close(hl);
}

int iod_chaos_keeper_run(const char *chaos_dir, uint32_t idle_exit_ms)
{
	int lk = lock_file(chaos_dir, "keeper.lock", false);
	if (lk < 0)
		return 0; /* another keeper holds it */
	char path[IOD_PATH_MAX + 32], num[16];
	snprintf(path, sizeof(path), "%s/keeper.pid", chaos_dir);
	snprintf(num, sizeof(num), "%d\n", (int)getpid());
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		ssize_t w = write(fd, num, strlen(num));
		(void)w; /* the pid file is informative */
		close(fd);
	}
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	/* member heals speak to the API with the cluster's own client config */
	char sdir[IOD_PATH_MAX];
	snprintf(sdir, sizeof(sdir), "%s", chaos_dir);
	char *slash = strrchr(sdir, '/');
	if (slash && slash != sdir) {
		*slash = 0;
		setenv("IOD_STATE_DIR", sdir, 1);
	}
	keeper_log("keeper %s started for %s", num, chaos_dir);
	uint64_t idle_since = iod_chaos_now_ms();
	for (;;) {
		struct iod_chaos_fault *v = NULL;
		uint32_t n = 0;
		struct iod_err e = {0};
		uint64_t now = iod_chaos_now_ms();
		iod_chaos_records_load(chaos_dir, &v, &n, &e);
		for (uint32_t i = 0; i < n; i++) {
			if (v[i].deadline_ms > now) {
				forget_exited(chaos_dir, &v[i]);
				continue;
			}
			int hl = iod_chaos_heal_lock(chaos_dir);
			struct iod_err he = {0};
			/* still there? `iod chaos heal` may have healed it meanwhile */
			char rp[IOD_PATH_MAX + 64];
			record_path(chaos_dir, v[i].id, rp, sizeof(rp));
			if (!access(rp, F_OK)) {
				int rc = iod_chaos_fault_heal(chaos_dir, &v[i], &he);
				keeper_log(rc ? "heal %s FAILED: %s" : "healed %s%s", v[i].id,
				           rc ? he.msg : "");
			}
			if (hl >= 0)
				close(hl);
		}
		free(v);
		if (n) {
			idle_since = now;
		} else if (now - idle_since > idle_exit_ms) {
			/* let go, then look once more: a command that wrote a record
			 * while this keeper still held the lock did not start another */
			unlink(path);
			close(lk);
			iod_chaos_records_load(chaos_dir, &v, &n, &e);
			free(v);
			if (!n || (lk = lock_file(chaos_dir, "keeper.lock", false)) < 0)
				break;
			idle_since = now;
		}
		usleep(20000);
	}
	keeper_log("keeper idle for %s%s: exits", "a while", "");
	return 0;
}
