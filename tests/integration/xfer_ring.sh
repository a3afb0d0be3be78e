#!/bin/sh
# xfer_ring.sh BUILD: `iod xfer ring`, the ring all-reduce over libiod-xfer
# between separate processes, is exact over shared memory and over TCP
# (an odd element count: uneven chunks), reports the UCX path it used,
# and refuses bad usage with exit 2. Prints one RESULT line.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
pass=0
fail=0
check() { # name, then the command
	name=$1
	shift
	if "$@"; then pass=$((pass + 1)); echo "ok   $name"; else fail=$((fail + 1)); echo "FAIL $name"; fi
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
echo "RESULT $pass $fail 0"
[ "$fail" -eq 0 ]
