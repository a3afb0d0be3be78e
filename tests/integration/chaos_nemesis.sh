#!/bin/sh
# chaos_nemesis.sh BUILD [NEMESIS...]: the CI matrix of issue 20 on a
# 3-server loopback cluster: for each nemesis (default partition, kill,
# pause, partition+kill) 20 s of a register workload with that nemesis and,
# at the same time, a set workload that lives through the same faults.
# Every cell must be valid: linearizable register, no lost or phantom set
# element, at least one fault injected and every fault recovered (a write
# acknowledged after its heal). Needs root and nft. Prints RESULT lines.
set -u
BUILD=${1:-build}
[ $# -gt 0 ] && shift
NEMESES=${*:-partition kill pause partition+kill}
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
BASE=$((26000 + ($$ % 300) * 20))
API=$((BASE + 10))
export IOD_SERVER="127.0.0.1:$API"
trap '"$IOD" chaos heal --all >/dev/null 2>&1; "$IOD" down --grace 2s >/dev/null 2>&1; rm -rf "$T"' EXIT
"$IOD" up --nodes 1 --gpus-per-node 0 --api-port "$API" --raft-port "$BASE" --no-mesh \
	--telemetry-port 0 --no-sandbox >"$T/up.log" 2>&1 ||
	{ cat "$T/up.log"; echo "FAIL iod up"; echo "RESULT 0 1 0"; exit 0; }
pass=0 fail=0 seed=11
for nem in $NEMESES; do
	seed=$((seed + 1))
	"$IOD" chaos run --workload set --clients 2 --rate 40 --duration 20s --nemesis none \
		--seed "$seed" -o json >"$T/set.json" 2>"$T/set.err" &
	sp=$!
	"$IOD" chaos run --workload register --clients 3 --rate 60 --duration 20s \
		--nemesis "$nem" --fault-duration 3s --seed "$seed" -o json >"$T/reg.json" 2>"$T/reg.err"
	rrc=$?
	wait "$sp"
	src=$?
	rv=$(jq -r .valid "$T/reg.json" 2>/dev/null)
	nf=$(jq '.faults | length' "$T/reg.json" 2>/dev/null)
	rec=$(jq '[.faults[] | select(.recovery_ms == null)] | length' "$T/reg.json" 2>/dev/null)
	sv=$(jq -r .valid "$T/set.json" 2>/dev/null)
	lost=$(jq .lost "$T/set.json" 2>/dev/null)
	acked=$(jq .ops.acknowledged_writes "$T/set.json" 2>/dev/null)
	p99=$(jq .recovery_p99_ms "$T/reg.json" 2>/dev/null)
	ops=$(jq .ops.attempted "$T/reg.json" 2>/dev/null)
	if [ "$rrc" = 0 ] && [ "$rv" = true ] && [ "${nf:-0}" -ge 1 ] && [ "$rec" = 0 ] &&
		[ "$src" = 0 ] && [ "$sv" = true ] && [ "$lost" = 0 ] && [ "${acked:-0}" -gt 0 ]; then
		echo "ok   $nem: register $ops ops valid, $nf faults, recovery p99 $p99 ms; set $acked acked, 0 lost"
		pass=$((pass + 1))
	else
		echo "FAIL $nem: register exit $rrc valid $rv faults $nf unrecovered $rec; set exit $src valid $sv lost $lost acked $acked"
		sed 's/^/  reg: /' "$T/reg.err" | tail -5
		sed 's/^/  set: /' "$T/set.err" | tail -5
		fail=$((fail + 1))
	fi
	"$IOD" chaos heal --all >/dev/null 2>&1
done
echo "RESULT $pass $fail 0"
