/*
 * cmd_xfer.c: `iod xfer ring`: a ring all-reduce between N processes over
 * libiod-xfer (include/iod/xfer.h), checked for the exact result. The
 * Python-free example of the API: each rank allocates one region (its
 * vector and a scratch area), loads its right neighbour's metadata (relayed
 * by this coordinating process over pipes), and runs the nccl ring
 * (iod_xfer_ring_allreduce, src/xfer/ring.c):
 * N-1 reduce-scatter steps, each a write of one chunk into the neighbour's
 * scratch plus a notification, then N-1 all-gather steps that write
 * reduced chunks straight into the neighbour's vector.
 *
 * Rank r holds v[j] = (r+1)*(j+1) as int64; the sum is (j+1)*N(N+1)/2,
 * checked element by element. algbw/busbw as nccl-tests define them.
 */
#include "cli.h"
#include "iod/xfer.h"

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RING_RANKS_MAX 16

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: iod xfer peer -n N ... (see iod xfer peer --help)\n"
	        "       iod xfer ring [-n RANKS] [--count N] [--transport shm|tcp|auto]\n"
	        "                     [--deadline DUR] [-o text|json]\n\n"
	        "Run a ring all-reduce of N int64 elements (default 1048576) between RANKS\n"
	        "processes (2..%d, default 4) over libiod-xfer and check the exact result.\n"
	        "Exit 0 when every rank holds the exact sum, 1 otherwise (docs/transfer.md).\n",
	        RING_RANKS_MAX);
}

/* What a rank sends back to the coordinator. */
struct ring_result {
	int32_t rc;                /* 0 ok, else a negative errno */
	uint32_t rank;             /* who */
	uint64_t wrong;            /* elements that differ from the exact sum */
	uint64_t ns;               /* the all-reduce, first write to last notification */
	char path[128];            /* UCX transports towards the right neighbour */
	char msg[IOD_ERR_MSG_MAX]; /* the error, if rc */
};

static int send_result(int wfd, struct ring_result *res)
{
	return write(wfd, res, sizeof(*res)) == (ssize_t)sizeof(*res) ? 0 : -EIO;
}

static int rank_main(unsigned rank, unsigned n, uint64_t count, enum iod_xfer_transport t,
                     uint64_t deadline_ms, int wfd, int rfd)
{
	struct ring_result res = {.rank = rank};
	struct iod_err e = {0};
	char name[IOD_NAME_MAX], right[IOD_NAME_MAX] = "", left[IOD_NAME_MAX];
	snprintf(name, sizeof(name), "rank-%u", rank);
	snprintf(left, sizeof(left), "rank-%u", (rank + n - 1) % n);
	uint64_t bytes = iod_xfer_ring_bytes(count, n);
	struct iod_xfer_opts o = {.name = name, .transport = t, .deadline_ms = deadline_ms};
	struct iod_xfer *x = NULL;
	int64_t *v = NULL;
	uint32_t id = 0;
	static uint8_t blob[IOD_XFER_MD_BYTES_MAX];
	size_t bl = 0;
	int rv = iod_xfer_create(&o, &x, &e);
	if (!rv)
		rv = iod_xfer_mem_alloc(x, bytes, (void **)&v, &id, &e);
	if (!rv)
		rv = iod_xfer_md_send_fd(x, wfd, &e);
	if (!rv)
		rv = iod_xfer_md_recv_fd(rfd, blob, sizeof(blob), &bl, deadline_ms, &e);
	if (!rv)
		rv = iod_xfer_md_load(x, blob, bl, right, &e);
	for (uint64_t j = 0; !rv && j < count; j++)
		v[j] = (int64_t)(rank + 1) * (int64_t)(j + 1);
	/* every rank is connected before anyone writes */
	uint8_t go = 0;
	if (!rv && (write(wfd, &go, 1) != 1 || read(rfd, &go, 1) != 1))
		rv = iod_err_set(&e, -EIO, "lost the coordinator");
	uint64_t t0 = iod_clock_now_ns();
	struct iod_xfer_ring g = {.n = n,
	                          .rank = rank,
	                          .left = left,
	                          .right = right,
	                          .id = id,
	                          .remote_id = 1,
	                          .count = count};
	if (!rv)
		rv = iod_xfer_ring_allreduce(x, &g, v, &e);
	res.ns = iod_clock_now_ns() - t0;
	if (!rv) {
		int64_t sum = (int64_t)n * (n + 1) / 2;
		for (uint64_t j = 0; j < count; j++)
			res.wrong += v[j] != sum * (int64_t)(j + 1);
		iod_xfer_peer_path(x, right, res.path, sizeof(res.path), NULL);
	}
	res.rc = rv;
	snprintf(res.msg, sizeof(res.msg), "%s", rv ? e.msg : "");
	/* stay until everyone is done: our region is someone's target */
	send_result(wfd, &res);
	if (read(rfd, &go, 1) < 0)
		go = 0;
	iod_xfer_destroy(x);
	return rv || res.wrong ? 1 : 0;
}

struct child {
	pid_t pid; /* the rank's process */
	int wfd;   /* to it */
	int rfd;   /* from it */
};

static int coordinate(unsigned n, uint64_t count, enum iod_xfer_transport t, uint64_t deadline_ms,
                      bool json)
{
	struct child c[RING_RANKS_MAX];
	static uint8_t blobs[RING_RANKS_MAX][IOD_XFER_MD_BYTES_MAX];
	size_t lens[RING_RANKS_MAX];
	struct iod_err e = {0};
	unsigned started = 0;
	int rv = 0;
	signal(SIGPIPE, SIG_IGN);
	for (unsigned r = 0; r < n && !rv; r++) {
		int a[2], b[2];
		if (pipe(a) || pipe(b)) {
			rv = iod_err_set(&e, -errno, "pipe: %s", strerror(errno));
			break;
		}
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0) {
			close(a[1]);
			close(b[0]);
			char args[6][32];
			snprintf(args[0], 32, "%u", r);
			snprintf(args[1], 32, "%u", n);
			snprintf(args[2], 32, "%llu", (unsigned long long)count);
			snprintf(args[3], 32, "%d", (int)t);
			snprintf(args[4], 32, "%llu:%d:%d", (unsigned long long)deadline_ms, b[1],
			         a[0]);
			/* a fresh image: UCX's state does not survive fork() */
			execl("/proc/self/exe", "iod", "xfer", "ring-rank", args[0], args[1],
			      args[2], args[3], args[4], (char *)NULL);
			_exit(127);
		}
		close(a[0]);
		close(b[1]);
		c[r] = (struct child){pid, a[1], b[0]};
		started++;
	}
	for (unsigned r = 0; r < started && !rv; r++)
		rv = iod_xfer_md_recv_fd(c[r].rfd, blobs[r], sizeof(blobs[r]), &lens[r],
		                         deadline_ms, &e);
	/* each rank gets its right neighbour's blob, length-prefixed */
	for (unsigned r = 0; r < started && !rv; r++) {
		unsigned right = (r + 1) % n;
		uint8_t hdr[4] = {(uint8_t)lens[right], (uint8_t)(lens[right] >> 8),
		                  (uint8_t)(lens[right] >> 16), (uint8_t)(lens[right] >> 24)};
		if (write(c[r].wfd, hdr, 4) != 4 ||
		    write(c[r].wfd, blobs[right], lens[right]) != (ssize_t)lens[right])
			rv = iod_err_set(&e, -EIO, "rank %u went away", r);
	}
	uint8_t go = 1;
	for (unsigned r = 0; r < started && !rv; r++)
		if (read(c[r].rfd, &go, 1) != 1)
			rv = iod_err_set(&e, -EIO, "rank %u went away before the start", r);
	for (unsigned r = 0; r < started && !rv; r++)
		if (write(c[r].wfd, &go, 1) != 1)
			rv = iod_err_set(&e, -EIO, "rank %u went away", r);
	struct ring_result res[RING_RANKS_MAX];
	memset(res, 0, sizeof(res));
	uint64_t wrong = 0, ns = 0;
	bool all = !rv;
	for (unsigned r = 0; r < started && all; r++) {
		if (read(c[r].rfd, &res[r], sizeof(res[r])) != (ssize_t)sizeof(res[r])) {
			rv = iod_err_set(&e, -EIO, "rank %u died", r);
			all = false;
			break;
		}
		if (res[r].rc && !rv)
			rv = iod_err_set(&e, res[r].rc, "rank %u: %s", r, res[r].msg);
		wrong += res[r].wrong;
		if (res[r].ns > ns)
			ns = res[r].ns;
	}
	for (unsigned r = 0; r < started; r++) {
		if (write(c[r].wfd, &go, 1) < 0)
			go = 0;
		close(c[r].wfd);
	}
	for (unsigned r = 0; r < started; r++) {
		int st = 0;
		waitpid(c[r].pid, &st, 0);
		close(c[r].rfd);
	}
	if (rv)
		return iod_cli_fail("xfer", IOD_EXIT_ERROR, "%s", e.msg);
	double bytes = (double)count * 8;
	double algbw = ns ? bytes / (double)ns : 0;
	double busbw = algbw * 2.0 * (n - 1) / n;
	bool exact = wrong == 0;
	if (json)
		printf("{\"ranks\":%u,\"count\":%llu,\"bytes\":%.0f,\"transport\":\"%s\","
		       "\"path\":\"%s\",\"exact\":%s,\"wrong\":%llu,\"time_us\":%.1f,"
		       "\"algbw_gbps\":%.3f,\"busbw_gbps\":%.3f}\n",
		       n, (unsigned long long)count, bytes, iod_xfer_transport_name(t), res[0].path,
		       exact ? "true" : "false", (unsigned long long)wrong, (double)ns / 1000.0,
		       algbw, busbw);
	else
		printf("ring all-reduce: %u ranks, %llu int64 (%.0f bytes), transport %s (UCX %s)\n"
		       "exact: %s (%llu wrong), %.1f us, algbw %.3f GB/s, busbw %.3f GB/s\n",
		       n, (unsigned long long)count, bytes, iod_xfer_transport_name(t), res[0].path,
		       exact ? "yes" : "NO", (unsigned long long)wrong, (double)ns / 1000.0, algbw,
		       busbw);
	return exact ? IOD_EXIT_OK : IOD_EXIT_ERROR;
}

int cmd_xfer(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "ring-rank") && argc == 7) {
		unsigned long long dl = 0;
		int w = -1, r = -1;
		if (sscanf(argv[6], "%llu:%d:%d", &dl, &w, &r) != 3)
			return IOD_EXIT_INVALID;
		return rank_main((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]),
		                 strtoull(argv[4], NULL, 10),
		                 (enum iod_xfer_transport)atoi(argv[5]), dl, w, r);
	}
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? IOD_EXIT_INVALID : IOD_EXIT_OK;
	}
	if (!strcmp(argv[1], "peer"))
		return cmd_xfer_peer(argc - 1, argv + 1);
	if (strcmp(argv[1], "ring"))
		return iod_cli_fail("xfer", IOD_EXIT_INVALID,
		                    "unknown subcommand \"%s\"; the ones there are: ring, peer",
		                    argv[1]);
	static const struct option opts[] = {{"help", no_argument, NULL, 'h'},
	                                     {"count", required_argument, NULL, 'c'},
	                                     {"transport", required_argument, NULL, 't'},
	                                     {"deadline", required_argument, NULL, 'd'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const formats[] = {"text", "json", NULL};
	unsigned n = 4;
	uint64_t count = 1 << 20, deadline_ms = IOD_XFER_DEADLINE_MS;
	enum iod_xfer_transport t = IOD_XFER_SHM;
	const char *out_name = "text";
	struct iod_err e = {0};
	int o;
	optind = 1;
	while ((o = getopt_long(argc - 1, argv + 1, ":hn:c:t:d:o:", opts, NULL)) != -1) {
		switch (o) {
		case 'h': usage(stdout); return IOD_EXIT_OK;
		case 'n': {
			char *end = NULL;
			unsigned long v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v < 2 || v > RING_RANKS_MAX)
				return iod_cli_fail("xfer", IOD_EXIT_INVALID,
				                    "-n %s: ranks must be 2..%d", optarg,
				                    RING_RANKS_MAX);
			n = (unsigned)v;
			break;
		}
		case 'c': {
			char *end = NULL;
			unsigned long long v = strtoull(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > (1ull << 27))
				return iod_cli_fail("xfer", IOD_EXIT_INVALID,
				                    "--count %s: 1..134217728 elements", optarg);
			count = v;
			break;
		}
		case 't':
			if (iod_xfer_transport_parse(optarg, &t) || t == IOD_XFER_RDMA)
				return iod_cli_fail("xfer", IOD_EXIT_INVALID,
				                    "--transport %s: one of shm, tcp, auto",
				                    optarg);
			break;
		case 'd': {
			uint64_t ns = 0;
			if (iod_parse_duration(optarg, &ns, &e) || ns < 1000000)
				return iod_cli_fail("xfer", IOD_EXIT_INVALID, "--deadline %s: %s",
				                    optarg, e.msg[0] ? e.msg : "at least 1ms");
			deadline_ms = ns / 1000000;
			break;
		}
		case 'o': out_name = optarg; break;
		case ':':
			return iod_cli_fail("xfer", IOD_EXIT_INVALID,
			                    "%s needs a value; see --help", argv[optind]);
		default:
			return iod_cli_fail("xfer", IOD_EXIT_INVALID,
			                    "unknown option %s; see --help", argv[optind]);
		}
	}
	if (optind + 1 < argc)
		return iod_cli_fail("xfer", IOD_EXIT_INVALID,
		                    "unexpected argument \"%s\"; see --help", argv[optind + 1]);
	enum iod_output out = IOD_OUT_TEXT;
	if (iod_cli_output("xfer", out_name, formats, &out))
		return IOD_EXIT_INVALID;
	return coordinate(n, count, t, deadline_ms, out == IOD_OUT_JSON);
}
