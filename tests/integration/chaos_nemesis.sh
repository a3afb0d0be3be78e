#!/bin/sh
# chaos_nemesis.sh BUILD [NEMESIS...]: the CI matrix of issue 20 on a
# 3-server loopback cluster: for each nemesis (default partition, kill,
# pause, partition+kill, partition+member) 14 s of a register workload
# with that nemesis (faults of 2 s: three per cell, at 2, 6 and 10 s, as
# many as 20 s of 3-s faults gave, 30 s less in all) and, at the same time,
# set, bank and append workloads
# that live through the same faults. Every cell must be valid: linearizable register, no lost or
# phantom set element, every bank read totals 500, no lost, reordered or
# stale append, at least one fault injected and every fault recovered (a
# write acknowledged after its heal); afterwards no chaos-* object is left.
# Needs root and nft. Prints RESULT lines.
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
[ $# -gt 0 ] && shift
NEMESES=${*:-partition kill pause partition+kill partition+member}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: needs root (nftables, cgroups)"; exit 77; }
need nft
nft list tables >/dev/null 2>&1 || { echo "skip: nft cannot list tables here"; exit 77; }
grep -q cgroup2 /proc/self/mounts || { echo "skip: no cgroup2 mounted"; exit 77; }
need jq curl
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
API=$((BASE + 10))
export IOD_SERVER="127.0.0.1:$API"
trap '"$IOD" chaos heal --all >/dev/null 2>&1; "$IOD" down --grace 2s >/dev/null 2>&1; rm -rf "$T"' EXIT
start_cluster "$T/up.log" --nodes 1 --gpus-per-node 0 --api-port "$API" --raft-port "$BASE" --no-mesh \
	--telemetry-port 0 --no-sandbox || exit 0
seed=11
DUR=14s FAULT=2s
# side: a workload run beside the register one, living through its faults
side() { # side WORKLOAD SEED: background run, json in $T/WORKLOAD.json
	"$IOD" chaos run --workload "$1" --clients 2 --rate "$3" --duration "$DUR" --nemesis none \
		--seed "$2" -o json >"$T/$1.json" 2>"$T/$1.err"
	echo $? >"$T/$1.rc"
}
side_ok() { # side_ok WORKLOAD: exit 0, valid, acked > 0, lost 0, no anomaly
	[ "$(cat "$T/$1.rc")" = 0 ] && [ "$(jq -r .valid "$T/$1.json" 2>/dev/null)" = true ] &&
		[ "$(jq .lost "$T/$1.json")" = 0 ] && [ "$(jq .anomalies "$T/$1.json")" = 0 ] &&
		[ "$(jq .ops.acknowledged_writes "$T/$1.json")" -gt 0 ]
}
for nem in $NEMESES; do
	seed=$((seed + 1))
	side set "$seed" 40 &
	sp=$!
	side bank "$seed" 30 &
	bp=$!
	side append "$seed" 30 &
	ap=$!
	"$IOD" chaos run --workload register --clients 3 --rate 60 --duration "$DUR" \
		--nemesis "$nem" --fault-duration "$FAULT" --seed "$seed" -o json >"$T/reg.json" 2>"$T/reg.err"
	rrc=$?
	wait "$sp" "$bp" "$ap"
	rv=$(jq -r .valid "$T/reg.json" 2>/dev/null)
	nf=$(jq '.faults | length' "$T/reg.json" 2>/dev/null)
	rec=$(jq '[.faults[] | select(.recovery_ms == null)] | length' "$T/reg.json" 2>/dev/null)
	p99=$(jq .recovery_p99_ms "$T/reg.json" 2>/dev/null)
	ops=$(jq .ops.attempted "$T/reg.json" 2>/dev/null)
	sides=""
	for w in set bank append; do
		side_ok "$w" || sides="$sides $w"
	done
	if [ "$rrc" = 0 ] && [ "$rv" = true ] && [ "${nf:-0}" -ge 1 ] && [ "$rec" = 0 ] &&
		[ -z "$sides" ]; then
		ok "$nem: register $ops ops valid, $nf faults, recovery p99 $p99 ms;\
 set $(jq .ops.acknowledged_writes "$T/set.json") acked,\
 bank $(jq .ops.acknowledged_writes "$T/bank.json") transfers,\
 append $(jq .ops.acknowledged_writes "$T/append.json") appends: 0 lost, 0 anomalies"
	else
		bad "$nem: register exit $rrc valid $rv faults $nf unrecovered $rec; failed:$sides"
		sed 's/^/  reg: /' "$T/reg.err" | tail -5
		for w in $sides; do
			echo "  $w: exit $(cat "$T/$w.rc") $(jq -c '{valid, lost, anomalies, check}' "$T/$w.json" 2>/dev/null | cut -c1-400)"
			sed "s/^/  $w: /" "$T/$w.err" | tail -5
		done
	fi
	"$IOD" chaos heal --all >/dev/null 2>&1
done
# the runs deleted their objects: no chaos-* config is left behind
PKI="$IOD_STATE_DIR/pki"
left=$(curl -s --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
	"https://$IOD_SERVER/v1/configs" | jq '[.items[] | select(.name | startswith("chaos-"))] | length')
if [ "$left" = 0 ]; then
	ok "workload_objects_deleted_after_runs"
else
	bad "workload_objects_deleted_after_runs ($left chaos-* configs left)"
fi
