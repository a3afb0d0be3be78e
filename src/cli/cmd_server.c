/*
 * cmd_server.c: `iod server`: run one control-plane member.
 *
 * Parses options into an iod_server_config and runs the API server (raft +
 * state machine + HTTP) until SIGTERM or SIGINT. Option parsing only: the
 * work happens in src/api/server*.c and src/state/member*.c.
 */
#include "cli.h"
#include "iod/api.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: iod server --id N --data-dir DIR --raft HOST:PORT --api HOST:PORT\n"
	        "                  [--peers ID=RAFT[@API],...] [--join API_HOST:PORT]\n"
	        "                  [--election-timeout 30ms] [--heartbeat 3ms] [--no-pre-vote]\n"
	        "                  [--fast-votes] [--vote-tiebreak|--no-vote-tiebreak] "
	        "[--recover-from-peers]\n"
	        "                  [--snapshot-threshold N] [--snapshot-trailing N]\n"
	        "                  --pki DIR [--raft-plaintext] | --insecure\n\n"
	        "Run one control-plane member: Raft (canonical raft, iod's I/O) + the cluster\n"
	        "state machine + the HTTP/JSON API.\n\n"
	        "Forming a cluster:\n"
	        "  initial members: start each with the same --peers list naming all of them\n"
	        "    (every member bootstraps the same configuration; restarts resume from\n"
	        "    DIR). With neither --peers nor --join, a single-member cluster starts.\n"
	        "  later members: --join API_ADDR of any member; the leader adds it as a voter.\n\n"
	        "Example (3 members on one machine):\n"
	        "  P=1=127.0.0.1:7301@127.0.0.1:7401,2=127.0.0.1:7302@127.0.0.1:7402,"
	        "3=127.0.0.1:7303@127.0.0.1:7403\n"
	        "  iod server --id 1 --data-dir /tmp/iod1 --raft 127.0.0.1:7301 "
	        "--api 127.0.0.1:7401 --peers $P\n\n"
	        "Timeouts: election T is randomised in [T, 2T]; defaults (30 ms / 3 ms, pre-vote\n"
	        "on) give a leader-loss-to-next-write p99 under 100 ms on loopback/LAN; use\n"
	        "larger values across slower networks (docs/control-plane.md, \"Timeouts\").\n"
	        "--fast-votes: grant votes once the leader was silent for an election timeout\n"
	        "  (not only when this server's own timer fires): the election no longer waits\n"
	        "  for the later of two timers, but a leader stall just over the timeout may\n"
	        "  then cost an election (off by default).\n"
	        "--vote-tiebreak: a server whose election started with another's leaves the\n"
	        "  higher id's pre-vote unanswered, so the two do not split the vote\n"
	        "  (src/state/vote.c; off by default until its liveness under load is\n"
	        "  understood). --no-vote-tiebreak: answer every pre-vote request (the default).\n"
	        "SIGTERM/SIGINT: a leader transfers leadership first, then the server exits.\n"
	        "--recover-from-peers: a server that refused to start because its log is damaged\n"
	        "  (the message names the file and offset) is rebuilt from the most up-to-date\n"
	        "  copy of a peer's log (--peers); its own files move to DIR/damaged-<time>/.\n"
	        "  Never just delete DIR and restart: an empty log can vote.\n\n"
	        "Security (docs/security.md):\n"
	        "  --pki DIR    the cluster's PKI (`iod init`): the API is served over HTTPS and\n"
	        "               every request needs a client certificate or a bearer token;\n"
	        "               Raft is mutual TLS: a peer must present the cluster CA's\n"
	        "               certificate of a server (spiffe://<cluster>/server/<id>) or\n"
	        "               its connection is refused. The server's own certificate is\n"
	        "               issued from DIR/ca.key at start.\n"
	        "  --raft-plaintext  with --pki, Raft without TLS (benchmarks); refused unless\n"
	        "               --raft is a loopback address.\n"
	        "  --insecure   plaintext and no authentication: anyone who can connect is\n"
	        "               admin. Refused unless --api and --raft are loopback addresses.\n"
	        "One of the two is required.\n");
}

static int parse_ms(const char *opt, const char *v, uint32_t *out)
{
	struct iod_err e = {0};
	uint64_t ns = 0;
	char *end = NULL;
	unsigned long x = strtoul(v, &end, 10);

	if (v[0] && !*end) { /* bare number: milliseconds */
		*out = (uint32_t)x;
	} else if (iod_parse_duration(v, &ns, &e) == 0) {
		*out = (uint32_t)(ns / IOD_NS_PER_MS);
	} else {
		fprintf(stderr, "iod server: %s %s: %s\n", opt, v, e.msg);
		return -EINVAL;
	}
	if (*out == 0 || *out > 60000) {
		fprintf(stderr, "iod server: %s must be between 1ms and 60s\n", opt);
		return -EINVAL;
	}
	return 0;
}

int cmd_server(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"id", required_argument, NULL, 'i'},
	    {"data-dir", required_argument, NULL, 'd'},
	    {"raft", required_argument, NULL, 'r'},
	    {"api", required_argument, NULL, 'a'},
	    {"join", required_argument, NULL, 'j'},
	    {"peers", required_argument, NULL, 'p'},
	    {"bootstrap", required_argument, NULL, 'p'},
	    {"election-timeout", required_argument, NULL, 'E'},
	    {"heartbeat", required_argument, NULL, 'H'},
	    {"no-pre-vote", no_argument, NULL, 'V'},
	    {"fast-votes", no_argument, NULL, 'F'},
	    {"no-vote-tiebreak", no_argument, NULL, 'B'},
	    {"vote-tiebreak", no_argument, NULL, 'b'},
	    {"recover-from-peers", no_argument, NULL, 'R'},
	    {"snapshot-threshold", required_argument, NULL, 'S'},
	    {"snapshot-trailing", required_argument, NULL, 'T'},
	    {"pki", required_argument, NULL, 'K'},
	    {"insecure", no_argument, NULL, 'I'},
	    {"raft-plaintext", no_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct iod_server_config c;
	struct iod_err e = {0};
	bool have_dir = false;
	int o;

	iod_server_config_default(&c);
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end = NULL;
		switch (o) {
		case 'i':
			c.id = strtoull(optarg, &end, 10);
			if (!c.id || *end)
				return iod_cli_fail("server", IOD_EXIT_INVALID,
				                    "--id %s: want a positive integer", optarg);
			break;
		case 'd':
			if (iod_strlcpy(c.data_dir, optarg, sizeof(c.data_dir)))
				return iod_cli_fail("server", IOD_EXIT_INVALID,
				                    "--data-dir too long");
			have_dir = true;
			break;
		case 'r':
		case 'a':
		case 'j': {
			char *dst = o == 'r' ? c.raft_addr : o == 'a' ? c.api_addr : c.join_addr;
			if (!strchr(optarg, ':') || iod_strlcpy(dst, optarg, IOD_ADDR_MAX))
				return iod_cli_fail("server", IOD_EXIT_INVALID,
				                    "%s: want HOST:PORT, got \"%s\"",
				                    argv[optind - 2], optarg);
			break;
		}
		case 'p':
			if (iod_server_peers_parse(&c, optarg, &e))
				return iod_cli_fail("server", IOD_EXIT_INVALID, "%s", e.msg);
			break;
		case 'E':
			if (parse_ms("--election-timeout", optarg, &c.election_timeout_ms))
				return IOD_EXIT_INVALID;
			break;
		case 'H':
			if (parse_ms("--heartbeat", optarg, &c.heartbeat_timeout_ms))
				return IOD_EXIT_INVALID;
			break;
		case 'V': c.pre_vote = false; break;
		case 'F': c.fast_votes = true; break;
		case 'B': c.no_vote_tiebreak = true; break;
		case 'b': c.no_vote_tiebreak = false; break;
		case 'R': c.recover_from_peers = true; break;
		case 'S':
		case 'T': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (!v || *end || v > 1000000)
				return iod_cli_fail("server", IOD_EXIT_INVALID,
				                    "snapshot options want 1..1000000 entries");
			if (o == 'S')
				c.snapshot_threshold = (uint32_t)v;
			else
				c.snapshot_trailing = (uint32_t)v;
			break;
		}
		case 'K':
			if (iod_strlcpy(c.pki_dir, optarg, sizeof(c.pki_dir)))
				return iod_cli_fail("server", IOD_EXIT_INVALID, "--pki too long");
			break;
		case 'I': c.insecure = true; break;
		case 'P': c.raft_plaintext = true; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("server", IOD_EXIT_INVALID, "unexpected argument \"%s\"",
		                    argv[optind]);
	if (!have_dir)
		snprintf(c.data_dir, sizeof(c.data_dir), "iod-data-%llu", (unsigned long long)c.id);
	if (c.heartbeat_timeout_ms >= c.election_timeout_ms)
		return iod_cli_fail("server", IOD_EXIT_INVALID,
		                    "--heartbeat (%u ms) must be shorter than --election-timeout "
		                    "(%u ms); a tenth of it is usual",
		                    c.heartbeat_timeout_ms, c.election_timeout_ms);
	if (c.insecure && c.pki_dir[0])
		return iod_cli_fail("server", IOD_EXIT_INVALID,
		                    "--pki and --insecure are exclusive");
	if (c.raft_plaintext && !c.pki_dir[0])
		return iod_cli_fail("server", IOD_EXIT_INVALID,
		                    "--raft-plaintext only means something with --pki (without it "
		                    "Raft is plaintext, on loopback addresses only)");
	if (c.peers_n) {
		bool self = false;
		for (uint32_t i = 0; i < c.peers_n; i++) {
			if (c.peers[i].id != c.id)
				continue;
			self = true;
			if (strcmp(c.peers[i].raft_addr, c.raft_addr))
				return iod_cli_fail(
				    "server", IOD_EXIT_INVALID,
				    "--peers gives id %llu the Raft address %s but --raft "
				    "is %s",
				    (unsigned long long)c.id, c.peers[i].raft_addr, c.raft_addr);
		}
		if (!self)
			return iod_cli_fail("server", IOD_EXIT_INVALID,
			                    "--peers must include this server (--id %llu)",
			                    (unsigned long long)c.id);
		if (c.join_addr[0])
			return iod_cli_fail(
			    "server", IOD_EXIT_INVALID,
			    "use --peers to form a new cluster or --join to enter an "
			    "existing one, not both");
	}
	iod_fd_limit_raise(NULL); /* a daemon: the hard limit of descriptors, not 1024 */
	if (iod_api_server_run(&c, &e))
		return iod_cli_fail("server", e.code == -EINVAL ? IOD_EXIT_INVALID : IOD_EXIT_ERROR,
		                    "%s", e.msg);
	return IOD_EXIT_OK;
}
