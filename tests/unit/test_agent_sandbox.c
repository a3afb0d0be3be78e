/*
 * test_agent_sandbox.c: the executor for real: a replica in its own PID, UTS
 * and mount namespaces, in cgroups with its limits, pinned to its CPU, with
 * its identity and GPUs in the environment, output in rotating logs, a data
 * directory that survives restarts; and the three health checks. Parts that
 * need root or cgroups skip with the reason when they cannot run.
 */
#include "harness.h"
#include "iod/agent_run.h"
#include "iod/sec.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct iod_agent_caps caps;
static bool caps_done;

static void setup(struct iod_agent_exec_config *c, const char *sub)
{
	if (!caps_done) {
		iod_agent_caps_probe(&caps);
		caps_done = true;
	}
	memset(c, 0, sizeof(*c));
	snprintf(c->node, sizeof(c->node), "node-t");
	snprintf(c->run_dir, sizeof(c->run_dir), "%s/%s", iod_test_tmpdir(), sub);
	snprintf(c->cgroup_prefix, sizeof(c->cgroup_prefix), "iod-test/%d", (int)getpid());
	c->log_max_bytes = 1 << 20;
	c->log_files = 2;
	c->use_namespaces = true;
	c->caps = &caps;
}

static struct iod_agent_replica shell(const char *name, const char *script)
{
	struct iod_agent_replica r;
	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "%s", name);
	snprintf(r.service, sizeof(r.service), "svc");
	r.ordinal = 3;
	r.numa_node = -1;
	iod_agent_replica_add_arg(&r, "/bin/sh");
	iod_agent_replica_add_arg(&r, "-c");
	iod_agent_replica_add_arg(&r, script);
	return r;
}

static int wait_exit(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void read_log(const struct iod_agent_exec_config *c, const char *name, struct iod_buf *b)
{
	char path[IOD_AGENT_PATH_MAX];
	iod_agent_replica_path(c->run_dir, name, "log", path, sizeof(path));
	iod_buf_init(b);
	iod_buf_read_file(b, path, 1 << 20, NULL);
}

TEST(runs_in_namespaces_with_identity)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p;
	struct iod_err e = {0};
	struct iod_buf b;
	setup(&c, "ns");
	if (!caps.ns_pid || !caps.ns_uts || !caps.ns_mount)
		SKIP("pid/uts/mount namespaces not permitted here (needs root)");
	struct iod_agent_replica r =
	    shell("web-3", "echo pid=$$; echo host=$(hostname); echo id=$IOD_SERVICE/$IOD_REPLICA/"
	                   "$IOD_ORDINAL/$IOD_NODE; echo gpus=$CUDA_VISIBLE_DEVICES/"
	                   "$NVIDIA_VISIBLE_DEVICES; echo peer=$PEER; echo procs=$(ls /proc | "
	                   "grep -c '^[0-9]')");
	iod_bitmap_set(&r.gpus, 1);
	iod_bitmap_set(&r.gpus, 2);
	iod_agent_replica_add_env(&r, "PEER", "127.0.0.1:9000");
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "web-3", &b);
	/* PID 1 is the sandbox's init; the workload is its first child. */
	CHECK_CONTAINS(b.data, "pid=2\n");
	CHECK_CONTAINS(b.data, "host=web-3\n");
	CHECK_CONTAINS(b.data, "id=svc/web-3/3/node-t\n");
	CHECK_CONTAINS(b.data, "gpus=1,2/1,2\n");
	CHECK_CONTAINS(b.data, "peer=127.0.0.1:9000\n");
	/* a private /proc shows only the sandbox's processes (init, sh, ls, grep) */
	const char *pr = strstr(b.data, "procs=");
	CHECK(pr && atoi(pr + 6) <= 5);
	iod_buf_free(&b);
}

/* Regression: the GPU set reached replicas as a cpulist ("0-3"), which CUDA
 * does not read; it is a comma list, also without namespaces (no root). */
TEST(gpu_env_is_a_comma_list)
{
	static const struct {
		const char *set, *want;
	} cases[] = {{"0-3", "gpus=0,1,2,3/0,1,2,3\n"},
	             {"0,2-3", "gpus=0,2,3/0,2,3\n"},
	             {"", "gpus=/void\n"}};
	for (size_t i = 0; i < IOD_ARRAY_LEN(cases); i++) {
		struct iod_agent_exec_config c;
		struct iod_agent_proc p;
		struct iod_err e = {0};
		struct iod_buf b;
		char sub[16], name[16];
		snprintf(sub, sizeof(sub), "gpu%zu", i);
		snprintf(name, sizeof(name), "gpu-%zu", i);
		setup(&c, sub);
		c.use_namespaces = false;
		struct iod_agent_replica r =
		    shell(name, "echo gpus=$CUDA_VISIBLE_DEVICES/$NVIDIA_VISIBLE_DEVICES");
		CHECK_EQ(iod_bitmap_parse(cases[i].set, &r.gpus, NULL), 0);
		CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
		CHECK_EQ(wait_exit(p.pid), 0);
		iod_agent_exec_cleanup(&p);
		read_log(&c, name, &b);
		CHECK_CONTAINS(b.data, cases[i].want);
		iod_buf_free(&b);
	}
}

TEST(exit_status_and_signals_pass_through)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p;
	struct iod_err e = {0};
	setup(&c, "exit");
	struct iod_agent_replica r = shell("ex-0", "exit 7");
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 7);
	iod_agent_exec_cleanup(&p);
	/* SIGTERM is forwarded to the workload even though init is PID 1. */
	r = shell("ex-1", "trap 'exit 42' TERM; echo ready; while :; do sleep 0.01; done");
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	struct iod_buf b;
	for (int i = 0; i < 500; i++) {
		read_log(&c, "ex-1", &b);
		bool ready = b.data && strstr(b.data, "ready");
		iod_buf_free(&b);
		if (ready)
			break;
		usleep(10000);
	}
	CHECK_EQ(iod_agent_exec_signal(&p, SIGTERM), 0);
	CHECK_EQ(wait_exit(p.pid), 42);
	iod_agent_exec_cleanup(&p);
	/* A workload that cannot start says why in its log and exits 127. */
	r = shell("ex-2", "");
	memset(r.argv_buf, 0, sizeof(r.argv_buf));
	r.argc = 0;
	iod_agent_replica_add_arg(&r, "/nonexistent/prog");
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 127);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "ex-2", &b);
	CHECK_CONTAINS(b.data, "cannot run /nonexistent/prog");
	iod_buf_free(&b);
}

TEST(cpu_affinity_follows_placement)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p;
	struct iod_err e = {0};
	struct iod_buf b;
	setup(&c, "aff");
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP("one CPU: affinity cannot be told apart");
	struct iod_agent_replica r = shell("aff-0", "grep Cpus_allowed_list /proc/self/status; "
	                                            "grep Mems_allowed_list /proc/self/status");
	iod_bitmap_set(&r.cpus, 1);
	r.numa_node = 0;
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "aff-0", &b);
	CHECK_CONTAINS(b.data, "Cpus_allowed_list:\t1\n");
	CHECK(!strstr(b.data, "warning"));
	iod_buf_free(&b);
	/* A CPU set of a simulated node that this machine lacks: a warning, no failure. */
	r = shell("aff-1", "true");
	iod_bitmap_set(&r.cpus, 1000);
	r.numa_node = 900;
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "aff-1", &b);
	CHECK_CONTAINS(b.data, "not on this machine");
	iod_buf_free(&b);
}

TEST(cgroup_limits_applied)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p;
	struct iod_err e = {0};
	struct iod_buf b;
	char path[IOD_AGENT_PATH_MAX + 64];
	setup(&c, "cg");
	if (!caps.cgroup_version)
		SKIP("no writable cgroup hierarchy (needs root and cgroups mounted)");
	struct iod_agent_replica r = shell("cg-0", "cat /proc/self/cgroup; sleep 5");
	r.mem_bytes = 64ull << 20;
	r.cpu_millis = 500;
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK(p.cgroup_mem[0]);
	if (caps.cgroup_version == 1) {
		snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", p.cgroup_mem);
		iod_buf_init(&b);
		CHECK_EQ(iod_buf_read_file(&b, path, 4096, NULL), 0);
		CHECK_EQ(strtoull(b.data, NULL, 10), 64ull << 20);
		iod_buf_free(&b);
		snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", p.cgroup_cpu);
		iod_buf_init(&b);
		CHECK_EQ(iod_buf_read_file(&b, path, 4096, NULL), 0);
		CHECK_EQ(atoi(b.data), 50000);
		iod_buf_free(&b);
	} else {
		snprintf(path, sizeof(path), "%s/memory.max", p.cgroup_mem);
		iod_buf_init(&b);
		CHECK_EQ(iod_buf_read_file(&b, path, 4096, NULL), 0);
		CHECK_EQ(strtoull(b.data, NULL, 10), 64ull << 20);
		iod_buf_free(&b);
	}
	/* the init and everything it forks are in the cgroup */
	snprintf(path, sizeof(path), "%s/cgroup.procs", p.cgroup_mem);
	iod_buf_init(&b);
	CHECK_EQ(iod_buf_read_file(&b, path, 4096, NULL), 0);
	char pid[32];
	snprintf(pid, sizeof(pid), "%d\n", (int)p.pid);
	CHECK_CONTAINS(b.data, pid);
	iod_buf_free(&b);
	iod_agent_exec_signal(&p, SIGKILL);
	CHECK_EQ(wait_exit(p.pid), 128 + SIGKILL);
	char dir[IOD_AGENT_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", p.cgroup_mem);
	iod_agent_exec_cleanup(&p);
	struct stat st;
	CHECK(stat(dir, &st) != 0); /* removed after exit */
}

/* Leave no test cgroups behind (replica cgroups go with their replicas). */
__attribute__((destructor)) static void remove_test_cgroups(void)
{
	char d[IOD_AGENT_PATH_MAX + 64];
	const char *roots[] = {caps.cgroup_mem, caps.cgroup_cpu};
	for (unsigned i = 0; caps_done && caps.cgroup_version && i < 2; i++) {
		snprintf(d, sizeof(d), "%s/iod-test/%d", roots[i], (int)getpid());
		rmdir(d);
		snprintf(d, sizeof(d), "%s/iod-test", roots[i]);
		rmdir(d);
	}
}

TEST(stateful_data_survives_restart)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p;
	struct iod_err e = {0};
	struct iod_buf b;
	setup(&c, "state");
	struct iod_agent_replica r =
	    shell("db-0", "n=$(cat $IOD_DATA_DIR/count 2>/dev/null || echo 0); n=$((n+1)); "
	                  "echo $n > $IOD_DATA_DIR/count; echo run=$n; pwd");
	r.stateful = true;
	for (int i = 0; i < 3; i++) {
		CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
		CHECK_EQ(wait_exit(p.pid), 0);
		iod_agent_exec_cleanup(&p);
	}
	read_log(&c, "db-0", &b);
	CHECK_CONTAINS(b.data, "run=1\n");
	CHECK_CONTAINS(b.data, "run=3\n");
	CHECK_CONTAINS(b.data, "/replicas/db-0/data\n");
	iod_buf_free(&b);
}

TEST(stateful_replica_gets_its_checkpoint_store)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p;
	struct iod_err e = {0};
	struct iod_buf b;
	char want[IOD_AGENT_PATH_MAX * 3], data[IOD_AGENT_PATH_MAX];
	setup(&c, "ckptstore");
	c.ckpt_capacity_bytes = 123456;
	/* the workload writes into each tier's directory (read-write in its
	 * sandbox) and prints what it was given */
	struct iod_agent_replica r =
	    shell("ps-0", "echo tiers=$IOD_CKPT_TIERS; echo dir=$IOD_CKPT_DIR; "
	                  "echo cap=$IOD_CKPT_CAPACITY reps=$IOD_CKPT_REPLICAS; "
	                  "echo x > $IOD_CKPT_DIR/w && echo y > $IOD_DATA_DIR/ckpt/NVMe/w && "
	                  "echo wrote=ok");
	r.stateful = true;
	r.ckpt_tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_PMEM, 2000};
	r.ckpt_tiers[1] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, 8000};
	r.ckpt_tiers_n = 2;
	r.ckpt_replicas = 3;
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	CHECK_EQ(iod_agent_replica_path(c.run_dir, "ps-0", "data", data, sizeof(data)), 0);
	read_log(&c, "ps-0", &b);
	snprintf(want, sizeof(want), "tiers=PMem:2000:%s/ckpt/PMem,NVMe:8000:%s/ckpt/NVMe\n", data,
	         data);
	CHECK_CONTAINS(b.data, want);
	snprintf(want, sizeof(want), "dir=%s/ckpt/PMem\n", data);
	CHECK_CONTAINS(b.data, want);
	CHECK_CONTAINS(b.data, "cap=123456 reps=3\n");
	CHECK_CONTAINS(b.data, "wrote=ok\n");
	iod_buf_free(&b);
	/* the directories are the agent's, kept across restarts */
	struct stat st;
	snprintf(want, sizeof(want), "%s/ckpt/NVMe/w", data);
	CHECK(stat(want, &st) == 0);
	/* a stateless replica, or one without storage:, gets none */
	r = shell("w-0", "echo tiers=${IOD_CKPT_TIERS:-none}");
	r.ckpt_tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, 10000};
	r.ckpt_tiers_n = 1;
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "w-0", &b);
	CHECK_CONTAINS(b.data, "tiers=none\n");
	iod_buf_free(&b);
}

/* A small file for the seeding test. */
static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/*
 * Issue 23, node loss: a stateful replica that starts with an empty store
 * on a node whose chunk server holds copies of it gets the newest step the
 * server holds whole (its manifest there) hard-linked into its tier with
 * the largest quota, and $IOD_CKPT_MOVED naming it; a newer step without a
 * manifest (a copy being received) is not linked. The links are the
 * server's files (same inode), not the replica's to change. Started again
 * with its own step there, nothing is linked and the variable is unset.
 */
TEST(moved_replica_gets_this_nodes_copy_linked)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p;
	struct iod_err e = {0};
	struct iod_buf b;
	char dir[IOD_AGENT_PATH_MAX + 64], f[IOD_AGENT_PATH_MAX + 128], data[IOD_AGENT_PATH_MAX];
	struct stat a, l;
	setup(&c, "ckptseed");
	const char *s5 = "step-00000000000000000005", *s7 = "step-00000000000000000007";
	snprintf(dir, sizeof(dir), "%s/ckpt-peer/ps-0/%s", c.run_dir, s5);
	CHECK_EQ(iod_sec_mkdirs(dir, 0755, &e), 0);
	snprintf(f, sizeof(f), "%s/r0-0-0.chunk", dir);
	put(f, "chunk bytes");
	snprintf(f, sizeof(f), "%s/r0.manifest", dir);
	put(f, "a manifest");
	snprintf(dir, sizeof(dir), "%s/ckpt-peer/ps-0/%s", c.run_dir, s7);
	CHECK_EQ(iod_sec_mkdirs(dir, 0755, &e), 0);
	snprintf(f, sizeof(f), "%s/r0-0-0.chunk", dir);
	put(f, "half of a copy");
	struct iod_agent_replica r = shell("ps-0", "echo moved=${IOD_CKPT_MOVED:-none}");
	r.stateful = true;
	r.ckpt_tiers[0] = (struct iod_stor_tier_cfg){IOD_STOR_PMEM, 2000};
	r.ckpt_tiers[1] = (struct iod_stor_tier_cfg){IOD_STOR_NVME, 8000};
	r.ckpt_tiers_n = 2;
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "ps-0", &b);
	snprintf(f, sizeof(f), "moved=%s\n", s5);
	CHECK_CONTAINS(b.data, f);
	iod_buf_free(&b);
	CHECK_EQ(iod_agent_replica_path(c.run_dir, "ps-0", "data", data, sizeof(data)), 0);
	snprintf(f, sizeof(f), "%s/ckpt/NVMe/%s/r0-0-0.chunk", data, s5);
	CHECK_EQ(stat(f, &l), 0);
	snprintf(f, sizeof(f), "%s/ckpt-peer/ps-0/%s/r0-0-0.chunk", c.run_dir, s5);
	CHECK_EQ(stat(f, &a), 0);
	CHECK(a.st_ino == l.st_ino && l.st_nlink == 2); /* the server's file itself */
	snprintf(f, sizeof(f), "%s/ckpt/NVMe/%s/r0.manifest", data, s5);
	CHECK_EQ(stat(f, &l), 0);
	snprintf(f, sizeof(f), "%s/ckpt/NVMe/%s", data, s7);
	CHECK(stat(f, &l) != 0); /* no manifest on the server: not linked */
	snprintf(f, sizeof(f), "%s/ckpt/PMem/%s", data, s5);
	CHECK(stat(f, &l) != 0); /* the tier with the largest quota only */
	/* started again with that step in its store: nothing more */
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "ps-0", &b);
	CHECK_CONTAINS(b.data, "moved=none\n");
	iod_buf_free(&b);
}

/* Issues 22/23: a replica whose record names its service's tenant gets
 * its own copy of the service's SVID (ca.crt, svid.crt, svid.key: 0400 in
 * a 0500 directory) and the variables that point at it; one without gets
 * none, and a missing SVID is a failed start, not a silent one. */
TEST(replica_gets_its_own_credentials)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p;
	struct iod_err e = {0};
	struct iod_buf b;
	char svid[IOD_AGENT_PATH_MAX], path[IOD_AGENT_PATH_MAX + 64], want[IOD_AGENT_PATH_MAX * 2];
	struct stat st;
	setup(&c, "creds");
	snprintf(svid, sizeof(svid), "%s/svid", c.run_dir);
	snprintf(path, sizeof(path), "%s/blue", svid);
	CHECK_EQ(iod_sec_mkdirs(path, 0700, &e), 0);
	snprintf(path, sizeof(path), "%s/ca.crt", svid);
	CHECK_EQ(iod_sec_write_file(path, "CA\n", 3, 0600, &e), 0);
	snprintf(path, sizeof(path), "%s/blue/ps.crt", svid);
	CHECK_EQ(iod_sec_write_file(path, "CERT\n", 5, 0600, &e), 0);
	snprintf(path, sizeof(path), "%s/blue/ps.key", svid);
	CHECK_EQ(iod_sec_write_file(path, "KEY\n", 4, 0600, &e), 0);
	snprintf(c.svid_dir, sizeof(c.svid_dir), "%s", svid);
	snprintf(c.api_servers, sizeof(c.api_servers), "127.0.0.1:7100");
	struct iod_agent_replica r =
	    shell("ps-0", "echo srv=$IOD_SERVER; echo ca=$IOD_CA; cat $IOD_CERT $IOD_KEY $IOD_CA");
	snprintf(r.service, sizeof(r.service), "ps");
	snprintf(r.svid_tenant, sizeof(r.svid_tenant), "blue");
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "ps-0", &b);
	CHECK_CONTAINS(b.data, "srv=127.0.0.1:7100\n");
	CHECK_CONTAINS(b.data, "CERT\nKEY\nCA\n");
	CHECK_EQ(iod_agent_replica_path(c.run_dir, "ps-0", "dir", path, sizeof(path)), 0);
	snprintf(want, sizeof(want), "ca=%s/creds/ca.crt\n", path);
	CHECK_CONTAINS(b.data, want);
	iod_buf_free(&b);
	snprintf(want, sizeof(want), "%s/creds/svid.key", path);
	CHECK(stat(want, &st) == 0);
	CHECK_EQ(st.st_mode & 0777, 0400);
	snprintf(want, sizeof(want), "%s/creds", path);
	CHECK(stat(want, &st) == 0);
	CHECK_EQ(st.st_mode & 0777, 0500);
	/* no tenant in its record: no credentials, no variables */
	r = shell("w-0", "echo cert=${IOD_CERT:-none}");
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "w-0", &b);
	CHECK_CONTAINS(b.data, "cert=none\n");
	iod_buf_free(&b);
	/* its service's SVID is not there: it does not start */
	r = shell("x-0", "true");
	snprintf(r.service, sizeof(r.service), "x");
	snprintf(r.svid_tenant, sizeof(r.svid_tenant), "blue");
	CHECK(iod_agent_exec_start(&c, &r, &p, &e) < 0);
	CHECK_CONTAINS(e.msg, "replica x-0: its credentials");
}

TEST(log_rotation_bounds_size)
{
	struct iod_agent_log l;
	struct iod_err e = {0};
	char path[IOD_AGENT_PATH_MAX], line[100];
	struct stat st;
	snprintf(path, sizeof(path), "%s/rot.log", iod_test_tmpdir());
	CHECK_EQ(iod_agent_log_open(&l, path, 1000, 2, &e), 0);
	memset(line, 'x', sizeof(line));
	line[99] = '\n';
	for (int i = 0; i < 100; i++)
		CHECK_EQ(iod_agent_log_write(&l, line, sizeof(line)), 0);
	iod_agent_log_close(&l);
	CHECK(stat(path, &st) == 0 && st.st_size <= 1000);
	char p1[IOD_AGENT_PATH_MAX + 4];
	snprintf(p1, sizeof(p1), "%s.2", path);
	CHECK(stat(p1, &st) == 0 && st.st_size == 1000);
	snprintf(p1, sizeof(p1), "%s.3", path);
	CHECK(stat(p1, &st) != 0); /* only 2 rotated files kept */
	CHECK_EQ(iod_agent_log_open(&l, path, 0, 2, &e), -EINVAL);
}

/* A one-shot server on loopback: answers `reply` to one connection. */
static pid_t serve(uint16_t *port, const char *reply)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4) ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl))
		return -1;
	*port = ntohs(sa.sin_port);
	pid_t pid = fork();
	if (pid == 0) {
		int c = accept(fd, NULL, NULL);
		char buf[512];
		if (c >= 0 && reply) {
			ssize_t n = read(c, buf, sizeof(buf));
			(void)n;
			n = write(c, reply, strlen(reply));
		}
		_exit(0);
	}
	close(fd);
	return pid;
}

TEST(probes_tcp_http_exec)
{
	struct iod_agent_health h = {.timeout_ns = 500 * IOD_NS_PER_MS};
	char d[256];
	uint16_t port;
	pid_t srv;

	h.kind = IOD_HEALTH_TCP;
	srv = serve(&port, NULL);
	CHECK(srv > 0);
	CHECK_EQ(iod_agent_probe_run(&h, "127.0.0.1", port, d, sizeof(d)), 0);
	wait_exit(srv);
	CHECK(iod_agent_probe_run(&h, "127.0.0.1", port, d, sizeof(d)) < 0);
	CHECK_CONTAINS(d, "refused");

	h.kind = IOD_HEALTH_HTTP;
	snprintf(h.path, sizeof(h.path), "/healthz");
	srv = serve(&port, "HTTP/1.0 200 OK\r\n\r\nok");
	CHECK_EQ(iod_agent_probe_run(&h, "127.0.0.1", port, d, sizeof(d)), 0);
	wait_exit(srv);
	srv = serve(&port, "HTTP/1.1 503 Service Unavailable\r\n\r\n");
	CHECK(iod_agent_probe_run(&h, "127.0.0.1", port, d, sizeof(d)) < 0);
	CHECK_CONTAINS(d, "503");
	wait_exit(srv);
	srv = serve(&port, "garbage\n");
	CHECK(iod_agent_probe_run(&h, "127.0.0.1", port, d, sizeof(d)) < 0);
	CHECK_CONTAINS(d, "status line");
	wait_exit(srv);

	h.kind = IOD_HEALTH_EXEC;
	snprintf(h.command, sizeof(h.command), "true");
	CHECK_EQ(iod_agent_probe_run(&h, NULL, 0, d, sizeof(d)), 0);
	snprintf(h.command, sizeof(h.command), "exit 3");
	CHECK(iod_agent_probe_run(&h, NULL, 0, d, sizeof(d)) < 0);
	CHECK_CONTAINS(d, "exit status 3");
	snprintf(h.command, sizeof(h.command), "sleep 5");
	h.timeout_ns = 50 * IOD_NS_PER_MS;
	CHECK_EQ(iod_agent_probe_run(&h, NULL, 0, d, sizeof(d)), -ETIMEDOUT);
}

/* Processes whose command line is exactly argv0 arg1 (from /proc). */
static int count_procs(const char *argv0, const char *arg1)
{
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[300], buf[256];
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		ssize_t r = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (r <= 0)
			continue;
		buf[r] = 0;
		size_t l0 = strlen(buf);
		if (!strcmp(buf, argv0) && (size_t)r > l0 + 1 && !strcmp(buf + l0 + 1, arg1))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* A timed-out exec check is killed with everything it started: its whole
 * process group (before: only the shell died, 4 -> 17 orphans in 5 s). */
TEST(exec_check_leaves_no_process_behind)
{
	struct iod_agent_health h = {.kind = IOD_HEALTH_EXEC, .timeout_ns = 50 * IOD_NS_PER_MS};
	char d[256];
	snprintf(h.command, sizeof(h.command), "sleep 37.25 & sleep 37.25 | cat; wait");
	for (int i = 0; i < 5; i++)
		CHECK_EQ(iod_agent_probe_run(&h, NULL, 0, d, sizeof(d)), -ETIMEDOUT);
	usleep(20000); /* SIGKILL is delivered at once; give /proc a moment */
	CHECK_EQ(count_procs("sleep", "37.25"), 0);
	/* a check that passes but leaves a child behind: the child goes too */
	snprintf(h.command, sizeof(h.command), "sleep 37.5 & exit 0");
	h.timeout_ns = 2000 * IOD_NS_PER_MS;
	CHECK_EQ(iod_agent_probe_run(&h, NULL, 0, d, sizeof(d)), 0);
	usleep(20000);
	CHECK_EQ(count_procs("sleep", "37.5"), 0);
}

/* The workload's pid (the first child of its sandbox's init), or 0. */
static pid_t workload_of(pid_t init)
{
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)init, (int)init);
	for (int i = 0; i < 200; i++) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = 0;
			return (pid_t)atoi(buf);
		}
		usleep(5000);
	}
	return 0;
}

static void wait_log(const struct iod_agent_exec_config *c, const char *name, const char *what)
{
	struct iod_buf b;
	for (int i = 0; i < 1000; i++) {
		read_log(c, name, &b);
		bool done = b.data && strstr(b.data, what);
		iod_buf_free(&b);
		if (done)
			return;
		usleep(10000);
	}
}

/*
 * The sandbox is a boundary (issue 16): inside, a probe script finds an
 * ordinary uid, no capabilities (effective and bounding), no_new_privs and
 * seccomp filter mode; unmounting /proc, mounting, writing cgroup files,
 * writing outside the data directory, tracing or signalling another
 * replica and loading a kernel module all fail.
 */
TEST(sandbox_probe_finds_a_boundary)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p, q;
	struct iod_err e = {0};
	struct iod_buf b;
	char script[4096];
	setup(&c, "probe");
	if (!caps.rootfs || !caps.seccomp || !caps.ns_cgroup)
		SKIP("needs root, mount/PID/cgroup namespaces and seccomp (the sandbox would "
		     "refuse)");
	/* the other replica: a sleeper whose host pid the probe knows */
	struct iod_agent_replica other = shell("other-0", "echo up; exec sleep 30");
	CHECK_MSG(iod_agent_exec_start(&c, &other, &q, &e) == 0, "%s", e.msg);
	wait_log(&c, "other-0", "up");
	pid_t victim = workload_of(q.pid);
	CHECK(victim > 0);
	snprintf(script, sizeof(script),
	         "echo uid=$(id -u)\n"
	         "grep -E '^(CapEff|CapBnd|CapPrm|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status\n"
	         "umount /proc 2>/dev/null && echo BAD_umount_proc\n"
	         "mount -t tmpfs none /tmp 2>/dev/null && echo BAD_mount\n"
	         "grep memory /proc/self/cgroup\n"
	         "for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes "
	         "  /sys/fs/cgroup/memory/iod-test/%d/probe-0/memory.limit_in_bytes; do\n"
	         "  echo -1 > $f 2>/dev/null && echo BAD_cgroup_write $f; done\n"
	         "for d in / /usr /etc /bin /var %s %s/replicas/other-0; do\n"
	         "  touch $d/iod-probe-x 2>/dev/null && echo BAD_write $d; done\n"
	         "touch $IOD_DATA_DIR/ok && echo data_write=ok\n"
	         "touch /tmp/ok && echo tmp_write=ok\n"
	         "kill -0 %d 2>/dev/null && echo BAD_kill\n"
	         "python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); "
	         "r = l.ptrace(16, %d, 0, 0); print(\"ptrace=%%d errno=%%d\" %% (r, "
	         "ctypes.get_errno())); "
	         "fd = os.open(\"/usr/bin/true\", os.O_RDONLY); "
	         "r = l.syscall(313, fd, b\"\", 0); print(\"finit_module=%%d errno=%%d\" %% (r, "
	         "ctypes.get_errno()))'\n"
	         "echo done\n",
	         (int)getpid(), c.run_dir, c.run_dir, (int)victim, (int)victim);
	struct iod_agent_replica r = shell("probe-0", script);
	r.stateful = true;
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(wait_exit(p.pid), 0);
	iod_agent_exec_cleanup(&p);
	read_log(&c, "probe-0", &b);
	if (!b.data || !strstr(b.data, "CapBnd:\t0000000000000000\n") || strstr(b.data, "BAD_"))
		fprintf(stderr, "probe log:\n%s\n", b.data ? b.data : "(none)");
	CHECK_MSG(b.data && strstr(b.data, "done\n"), "%s", b.data ? b.data : "(no log)");
	CHECK_MSG(!strstr(b.data, "uid=0\n") && strstr(b.data, "uid="), "%s", b.data);
	CHECK_CONTAINS(b.data, "CapEff:\t0000000000000000\n");
	CHECK_CONTAINS(b.data, "CapPrm:\t0000000000000000\n");
	CHECK_CONTAINS(b.data, "CapBnd:\t0000000000000000\n");
	CHECK_CONTAINS(b.data, "CapAmb:\t0000000000000000\n");
	CHECK_CONTAINS(b.data, "NoNewPrivs:\t1\n");
	CHECK_CONTAINS(b.data, "Seccomp:\t2\n");
	CHECK_MSG(!strstr(b.data, "BAD_"), "%s", b.data);
	CHECK_CONTAINS(b.data, "memory:/\n"); /* its own cgroup is the root it sees */
	CHECK_CONTAINS(b.data, "data_write=ok\n");
	CHECK_CONTAINS(b.data, "tmp_write=ok\n");
	CHECK_CONTAINS(b.data, "ptrace=-1 errno=3\n");       /* ESRCH: not even visible */
	CHECK_CONTAINS(b.data, "finit_module=-1 errno=1\n"); /* EPERM: the filter */
	iod_buf_free(&b);
	/* the other replica was not touched */
	CHECK_EQ(kill(victim, 0), 0);
	iod_agent_exec_signal(&q, SIGKILL);
	CHECK_EQ(wait_exit(q.pid), 128 + SIGKILL);
	iod_agent_exec_cleanup(&q);
	/* nothing written outside landed on the host */
	struct stat st;
	CHECK(stat("/usr/iod-probe-x", &st) != 0 && stat("/iod-probe-x", &st) != 0);
}

/*
 * health.exec runs inside the replica's sandbox: its uid, hostname, root
 * and PID namespace, with no capabilities; it cannot see or signal another
 * replica; a timed-out check leaves no process behind, in the sandbox or
 * on the host.
 */
TEST(exec_check_runs_inside_the_sandbox)
{
	struct iod_agent_exec_config c;
	struct iod_agent_proc p, q;
	struct iod_err e = {0};
	char d[256];
	setup(&c, "incheck");
	if (!caps.rootfs || !caps.seccomp || !caps.ns_cgroup)
		SKIP("needs root, mount/PID/cgroup namespaces and seccomp (the sandbox would "
		     "refuse)");
	struct iod_agent_replica other = shell("neighbour-0", "echo up; exec sleep 30");
	struct iod_agent_replica r = shell("checked-0", "echo up; exec sleep 30");
	CHECK_MSG(iod_agent_exec_start(&c, &other, &q, &e) == 0, "%s", e.msg);
	CHECK_MSG(iod_agent_exec_start(&c, &r, &p, &e) == 0, "%s", e.msg);
	wait_log(&c, "neighbour-0", "up");
	wait_log(&c, "checked-0", "up");
	pid_t victim = workload_of(q.pid);
	CHECK(victim > 0 && p.jail.init == p.pid && p.jail.uid != 0);
	struct iod_agent_health h = {.kind = IOD_HEALTH_EXEC, .timeout_ns = 5 * IOD_NS_PER_S};
	snprintf(h.command, sizeof(h.command),
	         "[ \"$(id -u)\" = %u ] && [ \"$(hostname)\" = checked-0 ] && "
	         "grep -q '^CapEff:.0000000000000000' /proc/self/status && "
	         "grep -q '^Seccomp:.2' /proc/self/status && [ ! -e /usr/iod-nowhere ] && "
	         "! kill -0 %d 2>/dev/null && [ \"$(ls /proc | grep -c '^[0-9]')\" -le 6 ] && "
	         "! touch /usr/x 2>/dev/null",
	         p.jail.uid, (int)victim);
	CHECK_MSG(iod_agent_probe_run_in(&h, &p.jail, NULL, 0, d, sizeof(d)) == 0, "%s", d);
	/* a jail whose init is not the process it names (a reused pid) is
	 * never entered */
	struct iod_agent_jail stale = p.jail;
	stale.init_start++;
	CHECK(iod_agent_probe_run_in(&h, &stale, NULL, 0, d, sizeof(d)) < 0);
	CHECK_CONTAINS(d, "could not enter");
	/* the same check on the host is not the replica: it fails */
	CHECK(iod_agent_probe_run_in(&h, NULL, NULL, 0, d, sizeof(d)) < 0);
	/* a check that kills: it can reach only the replica's own processes */
	snprintf(h.command, sizeof(h.command), "kill -9 %d", (int)victim);
	CHECK(iod_agent_probe_run_in(&h, &p.jail, NULL, 0, d, sizeof(d)) < 0);
	CHECK_EQ(kill(victim, 0), 0);
	/* timed out inside the sandbox: the check and all it started are gone */
	snprintf(h.command, sizeof(h.command), "sleep 37.75 & sleep 37.75 | cat; wait");
	h.timeout_ns = 100 * IOD_NS_PER_MS;
	for (int i = 0; i < 3; i++)
		CHECK_EQ(iod_agent_probe_run_in(&h, &p.jail, NULL, 0, d, sizeof(d)), -ETIMEDOUT);
	usleep(50000);
	CHECK_EQ(count_procs("sleep", "37.75"), 0);
	iod_agent_exec_signal(&p, SIGKILL);
	iod_agent_exec_signal(&q, SIGKILL);
	CHECK_EQ(wait_exit(p.pid), 128 + SIGKILL);
	CHECK_EQ(wait_exit(q.pid), 128 + SIGKILL);
	iod_agent_exec_cleanup(&p);
	iod_agent_exec_cleanup(&q);
}
