#!/bin/sh
# chaos_broken.sh BUILD: the checker can fail. With IOD_TEST_BROKEN_READS=1
# the register workload reads without the read fence, each client from one
# fixed server (a follower answers from its local state); under partitions
# `iod chaos run` must report the history not linearizable, name the
# failing sub-history and exit 1. The same run with fenced reads is valid
# (chaos_nemesis.sh). Needs root and nft. Prints RESULT lines.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: needs root (nftables, cgroups)"; exit 77; }
command -v nft >/dev/null || { echo "skip: nft not installed"; exit 77; }
nft list tables >/dev/null 2>&1 || { echo "skip: nft cannot list tables here"; exit 77; }
grep -q cgroup2 /proc/self/mounts || { echo "skip: no cgroup2 mounted"; exit 77; }
command -v jq >/dev/null || { echo "skip: jq not installed"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
BASE=$((29000 + ($$ % 300) * 20))
API=$((BASE + 10))
export IOD_SERVER="127.0.0.1:$API"
trap '"$IOD" chaos heal --all >/dev/null 2>&1; "$IOD" down --grace 2s >/dev/null 2>&1; rm -rf "$T"' EXIT
"$IOD" up --nodes 1 --gpus-per-node 0 --api-port "$API" --raft-port "$BASE" --no-mesh \
	--telemetry-port 0 --no-sandbox >"$T/up.log" 2>&1 ||
	{ cat "$T/up.log"; echo "FAIL iod up"; echo "RESULT 0 1 0"; exit 0; }
IOD_TEST_BROKEN_READS=1 "$IOD" chaos run --workload register --clients 3 --duration 10s \
	--nemesis partition --fault-duration 2s --seed 5 -o json >"$T/r.json" 2>"$T/r.err"
rc=$?
v=$(jq -r .valid "$T/r.json" 2>/dev/null)
verdict=$(jq -r .check.verdict "$T/r.json" 2>/dev/null)
sub=$(jq '.check.failing_subhistory | length' "$T/r.json" 2>/dev/null)
if [ "$rc" = 1 ] && [ "$v" = false ] && [ "$verdict" = "not linearizable" ] && [ "${sub:-0}" -ge 2 ]; then
	echo "ok   broken_reads_reported_not_linearizable (sub-history of $sub ops)"
	echo "RESULT 1 0 0"
else
	echo "FAIL broken_reads_reported_not_linearizable (exit $rc, valid $v, verdict $verdict, $(cat "$T/r.err"))"
	echo "RESULT 0 1 0"
fi
