#!/bin/sh
# up_no_inherited_fds.sh BUILD: the daemons `iod up` starts inherit nothing
# but stdin/stdout/stderr from the command that started them. Before, every
# server and agent kept the caller's open files: a `flock` taken around
# `iod up` (or a socket) stayed held by the cluster long after the command
# ended. Prints RESULT lines.
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
export IOD_SERVER="127.0.0.1:$((BASE + 10))"
trap '"$IOD" down --grace 2s >/dev/null 2>&1; rm -rf "$T"' EXIT
(
	exec 9>"$T/held"
	"$IOD" up --nodes 1 --gpus-per-node 0 --api-port $((BASE + 10)) --raft-port $((BASE + 0)) \
		--no-mesh >"$T/up.log" 2>&1
) || { cat "$T/up.log"; bad "iod up"; exit 0; }
n=0 held=0
for p in $(pgrep -f "$IOD_STATE_DIR"); do
	n=$((n + 1))
	ls -l "/proc/$p/fd" 2>/dev/null | grep -q "$T/held" && held=$((held + 1))
done
if [ "$n" -ge 4 ] && [ "$held" -eq 0 ]; then
	ok "daemons_hold_no_inherited_fd ($n daemons)"
else
	bad "daemons_hold_no_inherited_fd ($held of $n daemons hold the caller's file)"
fi
