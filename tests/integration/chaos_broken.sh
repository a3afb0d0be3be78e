#!/bin/sh
# chaos_broken.sh BUILD: the checker can fail. With IOD_TEST_BROKEN_READS=1
# the register workload reads without the read fence, each client from one
# fixed server (a follower answers from its local state); under partitions
# `iod chaos run` must report the history not linearizable, name the
# failing sub-history and exit 1. The same run with fenced reads is valid
# (chaos_nemesis.sh). IOD_TEST_BROKEN_BANK=1 (a transfer as two blind puts)
# must give bank reads with a wrong total, IOD_TEST_BROKEN_APPEND=1 (blind
# appends from each client's own stale copy) lost acknowledged appends.
# Needs root and nft. Prints RESULT lines.
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: needs root (nftables, cgroups)"; exit 77; }
need nft
nft list tables >/dev/null 2>&1 || { echo "skip: nft cannot list tables here"; exit 77; }
grep -q cgroup2 /proc/self/mounts || { echo "skip: no cgroup2 mounted"; exit 77; }
need jq
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
API=$((BASE + 10))
export IOD_SERVER="127.0.0.1:$API"
trap '"$IOD" chaos heal --all >/dev/null 2>&1; "$IOD" down --grace 2s >/dev/null 2>&1; rm -rf "$T"' EXIT
start_cluster "$T/up.log" --nodes 1 --gpus-per-node 0 --api-port "$API" --raft-port "$BASE" --no-mesh \
	--telemetry-port 0 --no-sandbox || exit 0
# the bank and append switches need no fault: non-atomic transfers and
# blind appends from a stale copy break the invariants by themselves
IOD_TEST_BROKEN_BANK=1 "$IOD" chaos run --workload bank --clients 3 --rate 100 --duration 5s \
	--nemesis none --seed 5 -o json >"$T/b.json" 2>"$T/b.err" &
bp=$!
IOD_TEST_BROKEN_APPEND=1 "$IOD" chaos run --workload append --clients 3 --rate 100 --duration 5s \
	--nemesis none --seed 5 -o json >"$T/a.json" 2>"$T/a.err" &
ap=$!
IOD_TEST_BROKEN_READS=1 "$IOD" chaos run --workload register --clients 3 --duration 10s \
	--nemesis partition --fault-duration 2s --seed 5 -o json >"$T/r.json" 2>"$T/r.err"
rc=$?
wait "$bp"
brc=$?
wait "$ap"
arc=$?
v=$(jq -r .valid "$T/r.json" 2>/dev/null)
verdict=$(jq -r .check.verdict "$T/r.json" 2>/dev/null)
sub=$(jq '.check.failing_subhistory | length' "$T/r.json" 2>/dev/null)
if [ "$rc" = 1 ] && [ "$v" = false ] && [ "$verdict" = "not linearizable" ] && [ "${sub:-0}" -ge 2 ]; then
	ok "broken_reads_reported_not_linearizable (sub-history of $sub ops)"
else
	bad "broken_reads_reported_not_linearizable (exit $rc, valid $v, verdict $verdict, $(cat "$T/r.err"))"
fi
# bank: some read's total is not 500; the report shows that read and the
# transfers around it; `iod chaos check` on the saved history agrees
bad=$(jq .check.bad_reads "$T/b.json" 2>/dev/null)
bsub=$(jq '[.check.failing_subhistory[] | select(.f == "read")] | length' "$T/b.json" 2>/dev/null)
bh=$(jq -r .history "$T/b.json" 2>/dev/null)
"$IOD" chaos check "$bh" --workload bank >/dev/null 2>&1
bcrc=$?
if [ "$brc" = 1 ] && [ "$(jq -r .valid "$T/b.json")" = false ] && [ "${bad:-0}" -ge 1 ] &&
	[ "$bsub" = 1 ] && [ "$bcrc" = 1 ]; then
	ok "broken_bank_totals_reported ($bad reads with a wrong total; check exit $bcrc)"
else
	bad "broken_bank_totals_reported (exit $brc, bad reads $bad, sub reads $bsub, check exit $bcrc, $(tail -3 "$T/b.err"))"
fi
lost=$(jq .check.anomalies.lost "$T/a.json" 2>/dev/null)
kind=$(jq -r '.check.failing_subhistory[0].anomaly' "$T/a.json" 2>/dev/null)
ah=$(jq -r .history "$T/a.json" 2>/dev/null)
"$IOD" chaos check "$ah" --workload append >/dev/null 2>&1
acrc=$?
if [ "$arc" = 1 ] && [ "$(jq -r .valid "$T/a.json")" = false ] && [ "${lost:-0}" -ge 1 ] &&
	[ "$(jq .lost "$T/a.json")" = "$lost" ] && [ "$kind" = lost ] && [ "$acrc" = 1 ]; then
	ok "broken_append_lost_reported ($lost acknowledged appends lost; check exit $acrc)"
else
	bad "broken_append_lost_reported (exit $arc, lost $lost, first $kind, check exit $acrc, $(tail -3 "$T/a.err"))"
fi
