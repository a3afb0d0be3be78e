/*
 * cli.h: what every `iod <command>` implementation shares: the command
 * signature, exit codes, output formats and option helpers.
 *
 * A command is `int cmd_<name>(int argc, char **argv)` with argv[0] the
 * command name; it returns an exit code from IOD_EXIT_CODES. Commands are
 * thin shells: they parse options, call module cores, and print.
 */
#ifndef IOD_CLI_H
#define IOD_CLI_H

#include "iod/base.h"

#include <signal.h>

/* Exit codes, documented by `iod help exit-codes`. */
#define IOD_EXIT_CODES(X)                                                                    \
	X(OK, 0, "success")                                                                  \
	X(ERROR, 1, "runtime failure (I/O, a server error, a crash of a child)")             \
	X(INVALID, 2, "invalid input: bad usage, a spec or file error; nothing was changed") \
	X(NOT_BUILT, 3, "the command is not built in this version of iod")                   \
	X(PARTIAL, 4, "valid request, partly done: e.g. some replicas could not be placed")  \
	X(UNAVAILABLE, 5, "the cluster could not be reached or has no leader")

enum iod_exit {
#define X(n, v, d) IOD_EXIT_##n = v,
	IOD_EXIT_CODES(X)
#undef X
};

/* Output formats a command may accept with -o. */
enum iod_output {
	IOD_OUT_TEXT,
	IOD_OUT_JSON,
	IOD_OUT_YAML,
	IOD_OUT_DOT,
	IOD_OUT_MATRIX,
	IOD_OUT_CSV,
	IOD_OUT_WIDE
};

/*
 * Parse "-o" values: allowed is a NULL-terminated list like
 * {"text", "json", NULL}. Prints an error naming the allowed values.
 */
int iod_cli_output(const char *cmd, const char *value, const char *const *allowed,
                   enum iod_output *out);

/* Print "iod CMD: message" to stderr and return code (for one-line returns). */
int iod_cli_fail(const char *cmd, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when argv[i] is --help or -h; commands print usage and return 0. */
int iod_cli_wants_help(int argc, char **argv);

typedef int (*iod_cmd_fn)(int argc, char **argv);

/* `iod xfer peer` (cmd_xfer_peer.c): argv[0] is "peer". */
int cmd_xfer_peer(int argc, char **argv);

/* ---- iod chaos delay|abort service/NAME (cmd_chaos_mesh.c) ---- */
struct iod_chaos_mesh_req {
	const char *apis;                  /* the cluster's API addresses */
	const char *service;               /* NAME of service/NAME */
	bool abort;                        /* abort; else delay */
	uint32_t percent;                  /* of the requests, 1..100 */
	uint64_t delay_ms;                 /* delay: how long */
	uint32_t status;                   /* abort: the HTTP status */
	uint64_t duration_ms;              /* how long the fault lasts */
	bool detach;                       /* return once applied */
	enum iod_output out;               /* text or json */
	const volatile sig_atomic_t *stop; /* Ctrl-C: heal now */
};
/* Apply an L7 fault (a Fault object on a lease) and, unless detached, wait
 * for its end. An exit code. */
int iod_chaos_mesh_apply(const struct iod_chaos_mesh_req *rq);
/* The cluster's L7 faults as `iod chaos list` records ({id, action, desc,
 * start_ms, deadline_ms, left_ms}); NULL (e says why) when unreachable. */
json_t *iod_chaos_mesh_list(const char *apis, struct iod_err *e);
/* Delete L7 fault id (NULL: all of them); *healed counts what went. An
 * exit code (0 also when id was not there: *healed is then 0). */
int iod_chaos_mesh_heal(const char *apis, const char *id, uint32_t *healed);

#endif
