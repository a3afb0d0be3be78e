#!/bin/sh
# xfer_ring.sh BUILD: `iod xfer ring`, the ring all-reduce over libiod-xfer
# between separate processes, is exact over shared memory and over TCP
# (an odd element count: uneven chunks), reports the UCX path it used,
# and refuses bad usage with exit 2. One RESULT line per check (lib.sh).
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
check() { # name, then the command
	name=$1
	shift
	if "$@"; then ok "$name"; else bad "$name"; fi
}
ring() { # transport ranks count -> the JSON line
	timeout 120 "$IOD" xfer ring -n "$2" --count "$3" --transport "$1" -o json
}
out=$(ring shm 3 100003) || true
check "shm ring exact" sh -c "echo '$out' | grep -q '\"exact\":true'"
check "shm ring over shared memory" sh -c "echo '$out' | grep -Eq '\"path\":\"[^\"]*(posix|sysv|cma)'"
out=$(ring tcp 4 65537) || true
check "tcp ring exact" sh -c "echo '$out' | grep -q '\"exact\":true'"
check "tcp ring over tcp" sh -c "echo '$out' | grep -q '\"path\":\"tcp'"
"$IOD" xfer ring -n 1 >/dev/null 2>&1
check "-n 1 is a usage error" test $? -eq 2
"$IOD" xfer ring --transport nvlink >/dev/null 2>&1
check "unknown transport is a usage error" test $? -eq 2
checks_ok
