/*
 * cmd_xfer_peer.c: `iod xfer peer`, run as a replica of a service: publish
 * this replica's libiod-xfer metadata through the control plane (an
 * XferPeer object, docs/transfer.md "Peers"), wait until all N replicas of
 * the service have, then write a buffer into the right neighbour's region
 * (ordinal+1 mod N) and check, by SHA-256, the buffer the left neighbour
 * wrote into ours. Exit 0 only when it is byte-exact.
 */
#include "cli.h"
#include "iod/api.h"
#include "iod/xfer.h"

#include <getopt.h>
#include <gnutls/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void peer_usage(FILE *f)
{
	fprintf(
	    f, "usage: iod xfer peer -n N [--service S] [--ordinal K] [--server ADDR]\n"
	       "                     [--transport shm|tcp|auto] [--size BYTES] [--deadline DUR]\n\n"
	       "As replica K of service S ($IOD_SERVICE, $IOD_ORDINAL by default): publish\n"
	       "this replica's libiod-xfer metadata through the control plane, find the\n"
	       "other N-1 replicas there, write SIZE bytes (default 1 MiB) into replica\n"
	       "K+1's memory and check by SHA-256 what replica K-1 wrote into ours.\n"
	       "Exit 0 when it is byte-exact (docs/transfer.md).\n");
}

/* The buffer ordinal k sends: xorshift64 from a seed of k, byte-reproducible. */
static void pattern(uint8_t *b, uint64_t n, uint32_t k)
{
	uint64_t s = 0x9e3779b97f4a7c15ull * (k + 1);
	for (uint64_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		b[i] = (uint8_t)(s >> 24);
	}
}

static void sha_hex(const void *b, size_t n, char out[65])
{
	uint8_t d[32];
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, b, n, d)) {
		memset(out, '0', 64);
		out[64] = 0;
		return;
	}
	iod_hex_encode(d, sizeof(d), out);
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end = NULL;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int cmd_xfer_peer(int argc, char **argv)
{
	static const struct option opts[] = {{"help", no_argument, NULL, 'h'},
	                                     {"service", required_argument, NULL, 's'},
	                                     {"ordinal", required_argument, NULL, 'k'},
	                                     {"server", required_argument, NULL, 'S'},
	                                     {"transport", required_argument, NULL, 't'},
	                                     {"size", required_argument, NULL, 'z'},
	                                     {"deadline", required_argument, NULL, 'd'},
	                                     {NULL, 0, NULL, 0}};
	const char *service = getenv("IOD_SERVICE"), *ord_s = getenv("IOD_ORDINAL");
	const char *server = NULL;
	uint64_t n = 0, ord = 0, size = 1 << 20, deadline_ms = 20000;
	enum iod_xfer_transport t = IOD_XFER_SHM;
	struct iod_err e = {0};
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, ":hn:s:k:S:t:z:d:", opts, NULL)) != -1) {
		switch (o) {
		case 'h': peer_usage(stdout); return IOD_EXIT_OK;
		case 'n':
			if (parse_u64(optarg, 2, IOD_XFER_PEERS_MAX, &n))
				return iod_cli_fail("xfer peer", IOD_EXIT_INVALID,
				                    "-n %s: 2..%d replicas", optarg,
				                    IOD_XFER_PEERS_MAX);
			break;
		case 's': service = optarg; break;
		case 'k': ord_s = optarg; break;
		case 'S': server = optarg; break;
		case 't':
			if (iod_xfer_transport_parse(optarg, &t) || t == IOD_XFER_RDMA)
				return iod_cli_fail("xfer peer", IOD_EXIT_INVALID,
				                    "--transport %s: one of shm, tcp, auto",
				                    optarg);
			break;
		case 'z':
			if (parse_u64(optarg, 1, 1ull << 30, &size))
				return iod_cli_fail("xfer peer", IOD_EXIT_INVALID,
				                    "--size %s: 1..1073741824 bytes", optarg);
			break;
		case 'd': {
			uint64_t ns = 0;
			if (iod_parse_duration(optarg, &ns, &e) || ns < 1000000)
				return iod_cli_fail("xfer peer", IOD_EXIT_INVALID,
				                    "--deadline %s: %s", optarg,
				                    e.msg[0] ? e.msg : "at least 1ms");
			deadline_ms = ns / 1000000;
			break;
		}
		case ':':
			return iod_cli_fail("xfer peer", IOD_EXIT_INVALID,
			                    "%s needs a value; see --help", argv[optind - 1]);
		default:
			return iod_cli_fail("xfer peer", IOD_EXIT_INVALID,
			                    "unknown option %s; see --help", argv[optind - 1]);
		}
	}
	if (!n)
		return iod_cli_fail("xfer peer", IOD_EXIT_INVALID,
		                    "-n N (the replicas) is required");
	if (!service || !service[0] || !ord_s || parse_u64(ord_s, 0, n - 1, &ord))
		return iod_cli_fail("xfer peer", IOD_EXIT_INVALID,
		                    "--service and --ordinal (0..%llu) are required outside a "
		                    "replica ($IOD_SERVICE, $IOD_ORDINAL)",
		                    (unsigned long long)n - 1);

	char name[IOD_NAME_MAX], path[128] = "", got[65], want[65];
	static char names[IOD_XFER_PEERS_MAX][IOD_NAME_MAX];
	const char *rep = getenv("IOD_REPLICA");
	snprintf(name, sizeof(name), "%s.%ld", rep && rep[0] ? rep : service, (long)getpid());
	struct iod_xfer_opts xo = {.name = name, .transport = t, .deadline_ms = deadline_ms};
	struct iod_api_client api;
	struct iod_xfer *x = NULL;
	uint8_t *buf = NULL;
	uint32_t id = 0;
	uint32_t k = (uint32_t)ord, right = (k + 1) % (uint32_t)n,
	         left = (k + (uint32_t)n - 1) % (uint32_t)n;
	int rc = iod_api_client_init_config(&api, server, &e);
	if (rc)
		return iod_cli_fail("xfer peer", IOD_EXIT_ERROR, "control plane: %s", e.msg);
	rc = iod_xfer_create(&xo, &x, &e);
	if (!rc)
		rc = iod_xfer_mem_alloc(x, 2 * size, (void **)&buf, &id, &e);
	/* peers address our one region by the id its blob carries: the first */
	if (!rc && id != 1)
		rc = iod_err_set(&e, -EPROTO, "the region got id %u, not 1", id);
	if (!rc) {
		pattern(buf, size, k);
		memset(buf + size, 0, size);
		struct iod_xfer_self me = {.service = service,
		                           .ordinal = k,
		                           .replica = rep,
		                           .node = getenv("IOD_NODE"),
		                           .transport = iod_xfer_transport_name(t)};
		rc = iod_xfer_publish_api(x, &api, &me, &e);
	}
	if (!rc)
		rc = iod_xfer_peers_from_api(x, &api, service, (uint32_t)n, k, deadline_ms, names,
		                             &e);
	if (!rc) {
		struct iod_xfer_op op = {IOD_XFER_WRITE, {id, 0, size}, {1, size, size}};
		struct iod_xfer_req *r = NULL;
		rc = iod_xfer_post(x, names[right], &op, 1, "xfer-peer", 9, &r, &e);
		if (!rc)
			rc = iod_xfer_req_wait(x, r, &e);
		iod_xfer_req_free(x, r);
	}
	if (!rc) {
		char from[IOD_NAME_MAX], msg[16];
		size_t ml = 0;
		rc = iod_xfer_notif_wait(x, names[left], from, msg, sizeof(msg), &ml, deadline_ms,
		                         &e);
	}
	bool exact = false;
	if (!rc) {
		iod_xfer_peer_path(x, names[right], path, sizeof(path), NULL);
		sha_hex(buf + size, size, got);
		pattern(buf + size, size, left); /* our copy of what left sent */
		sha_hex(buf + size, size, want);
		exact = !strcmp(got, want);
		printf("xfer peer: %s ordinal %u of %llu: %llu bytes from ordinal %u (%s), to "
		       "ordinal %u over %s: sha256 %s %s\n",
		       service, k, (unsigned long long)n, (unsigned long long)size, left,
		       names[left], right, path[0] ? path : "?", got, exact ? "exact" : "MISMATCH");
		if (!exact)
			printf("  want sha256 %s\n", want);
		fflush(stdout);
		/* stay a moment: the left neighbour's endpoint to us may still flush */
		usleep(200000);
	}
	iod_xfer_destroy(x);
	iod_api_client_close(&api);
	if (rc)
		return iod_cli_fail("xfer peer", IOD_EXIT_ERROR, "%s", e.msg);
	return exact ? IOD_EXIT_OK : IOD_EXIT_ERROR;
}
