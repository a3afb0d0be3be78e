#!/bin/sh
# ckpt_netns.sh BUILD: replicated checkpoints across machines over mutual
# TLS (docs/storage.md, "Replica credentials", "Peers run by the agents").
# `iod up --netns --nodes 4`: each agent on its own underlay address runs
# its checkpoint chunk server over mTLS; a stateful parameter server with
# storage.replicas: 3 is handed its own credentials (its service's SVID)
# and the other nodes' mTLS chunk servers, each through a relay on its
# gateway (its namespace reaches only that; relay.c carries the mTLS
# session end to end):
#   1. it saves with 3 copies, quorum 2, not undersized, and the copies land
#      in two other nodes' ckpt-peer/ps-0/ (over mTLS, as ps's identity);
#   2. that identity reaches nothing but its own replicas' namespaces on a
#      chunk server (403 for another's), and plain HTTP gets no answer;
#   3. the node holding ps-0 is lost (its agent and the replica SIGKILLed):
#      the replacement restores from a surviving copy, continues from the
#      checkpoint's step, makes the lost copy again on the fourth node
#      (re-replication: 3 of 3 copies, clean), and the time from the kill to
#      the restore is
#      printed as `BENCH storage.nodeloss p99_ms=... size_bytes=... load=...`
#      (one run: p99 of one sample is that sample).
# CKPT_NETNS_PARAMS (floats, default 262144 = 1 MiB) sizes the state (`make
# bench-storage-nodeloss CKPT_NETNS_PARAMS=N` runs it alone); the demo
# ships its whole shard to and from its worker on every update, so large
# sizes are slow here (docs/storage.md).
# Root only (network namespaces); take /tmp/iod-cluster.lock around it.
# Exit 0 pass, 1 fail, 77 skip.
set -u
BUILD=${1:-build}
IOD="$(cd "$(dirname "$BUILD/iod")" && pwd)/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: needs root (network namespaces)"; exit 77; }
for t in ip python3 curl; do
	command -v $t >/dev/null || { echo "skip: $t missing"; exit 77; }
done
ip netns add "iodprobe$$" 2>/dev/null || { echo "skip: cannot create network namespaces"; exit 77; }
ip netns del "iodprobe$$"
. "$(dirname "$0")/lib.sh"
PARAMS=${CKPT_NETNS_PARAMS:-262144}
# CKPT_NETNS_STATE (bytes, default 0): optimizer state checkpointed with the
# shard and never shipped to the worker (demo-worker --state-bytes), so the
# state a node loss restores can be 1 GiB (make bench-storage-nodeloss-1g)
STATE=${CKPT_NETNS_STATE:-0}
SIZE=$((PARAMS * 4 + STATE))
# seconds a save of SIZE may take here (one disk under four nodes, 3 copies)
SLOW=$((40 + SIZE / 20000000))
# room for the kept checkpoints and the one in flight (the agent's default
# capacity, 1 GiB, holds the default size many times over)
CAP=""
[ $((SIZE * 8)) -gt 1073741824 ] && CAP="--ckpt-capacity $((SIZE * 8))"

T=$(mktemp -d)
export IOD_STATE_DIR="$T/state"
export PATH="$(dirname "$IOD"):$PATH"
BASE=$(free_port_block $$)
cleanup() {
	"$IOD" down --grace 2s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
ms() { date +%s%3N; }
die() {
	bad "$1"
	"$IOD" logs ps-0 2>&1 | tail -15
	for f in "$IOD_STATE_DIR"/node-*.log; do echo "--- $f"; grep -i "ckpt\|credential\|svid\|ps-0" "$f" | tail -6; done
	echo "ckpt_netns: $pass passed, $fail failed"
	exit 1
}

"$IOD" up --netns --nodes 4 --api-port "$BASE" --raft-port $((BASE + 10)) --lease-ttl 1s \
	--stateful-grace 0s $CAP >"$T/up.out" 2>&1 || { cat "$T/up.out"; echo "FAIL iod up --netns"; exit 1; }
P=$(sed -n 's/^underlay \(iodu[0-9a-f]*\)-\*.*/\1/p' "$T/up.out" | head -1)
ok "iod up --netns --nodes 4: underlay $P"

cat >"$T/spec.yaml" <<YAML
storage:
  replicas: 3
  tiers:
    - {medium: NVMe, quota: 100%}
services:
  - name: ps
    type: stateful
    command: iod
    args: [demo-worker, --role, parameter-server, --params, "$PARAMS", --ckpt-every, "20",
           --ckpt-scrub, "0", --state-bytes, "$STATE"]
  - name: w
    type: stateless
    command: iod
    args: [demo-worker, --role, worker, --ps-service, ps, --compute-ms, "2", --http-port, "0"]
    depends_on: [ps]
YAML
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; die deploy; }
field() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$1':
        print(i['value'].get('$2', ''))"
}
placed() { [ -n "$(field ps-0 node)" ]; }
wait_for 30 placed || die "ps-0 not placed"
ON=$(field ps-0 node)

# 1. three copies over mTLS, not undersized
peers_line() { "$IOD" logs ps-0 2>/dev/null | grep "copies per checkpoint"; }
wait_for 30 peers_line || die "ps-0 printed no copies line"
L=$(peers_line | tail -1)
case "$L" in
*"3 copies per checkpoint, quorum 2, peers: node-"*"=10."*" node-"*"=10."*)
	case "$L" in *undersized*) bad "undersized: $L" ;; *) ok "ps-0 saves 3 copies, quorum 2, to the other nodes' mTLS chunk servers ($L)" ;; esac ;;
*) bad "ps-0's peers: $L" ;;
esac
"$IOD" logs ps-0 2>/dev/null | grep -q "checkpoint peers over mTLS as .*/creds/svid.crt" &&
	ok "ps-0 speaks mTLS with its own credential" ||
	bad "ps-0 did not say it speaks mTLS: $("$IOD" logs ps-0 2>&1 | head -5)"
OTHERS=$(for n in node-1 node-2 node-3 node-4; do [ "$n" = "$ON" ] || echo "$n"; done)
held_on() {
	s=$(ls "$IOD_STATE_DIR/$1/ckpt-peer/ps-0" 2>/dev/null | grep '^step-' | tail -1)
	[ -n "$s" ] && [ -f "$IOD_STATE_DIR/$1/ckpt-peer/ps-0/$s/r0.manifest" ]
}
holders() { for n in $OTHERS; do held_on "$n" && echo "$n"; done; }
two_held() { [ "$(holders | wc -l)" -ge 2 ]; }
if wait_for $SLOW two_held; then
	ok "checkpoint copies on two other nodes ($ON -> $(holders | tr '\n' ' '))"
else
	die "copies of ps-0 not on two of $(echo $OTHERS): $(ls -R "$IOD_STATE_DIR"/node-*/ckpt-peer 2>&1 | head)"
fi
HOLDERS=$(holders | head -2)
SPARE=$(for n in $OTHERS; do echo "$HOLDERS" | grep -qx "$n" || echo "$n"; done | head -1)
"$IOD" logs ps-0 2>/dev/null | grep -q "checkpoint failed\|undersized" &&
	bad "a save failed or was undersized: $("$IOD" logs ps-0 | grep 'failed\|undersized' | head -2)"

# 2. ps's identity reaches only its own namespaces; plain HTTP nothing
C=$(ls -d "$IOD_STATE_DIR/$ON/replicas/ps-0/creds" 2>/dev/null)
O1=$(echo $HOLDERS | cut -d' ' -f1)
CP=$("$IOD" get nodes -o json | python3 -c "
import json, sys
for i in json.load(sys.stdin)['items']:
    if i['name'] == '$O1': print(i['value'].get('ckpt_peer', ''))")
HI=$(echo "$O1" | sed 's/node-//')
inhost() { ip netns exec "$P-h$HI" "$@"; }
code=$(inhost curl -s -o /dev/null -w '%{http_code}' -k --cert "$C/svid.crt" --key "$C/svid.key" \
	"https://$CP/ckpt/ps-0/latest?rank=0")
code2=$(inhost curl -s -o /dev/null -w '%{http_code}' -k --cert "$C/svid.crt" --key "$C/svid.key" \
	"https://$CP/ckpt/w-0/latest?rank=0")
plain=$(inhost curl -s -m 3 -o /dev/null -w '%{http_code}' "http://$CP/ckpt/ps-0/latest?rank=0")
if [ "$code" = 200 ] && [ "$code2" = 403 ] && [ "$plain" = 000 ]; then
	ok "on $O1's chunk server ($CP) ps's identity reads ps-0 (200), not w-0 (403); plain HTTP no answer"
else
	bad "chunk server $CP: ps-0 $code, w-0 $code2 (want 403), plain $plain (want 000)"
fi

# 3. lose the node holding ps-0
apid=$(cat "$IOD_STATE_DIR/$ON.pid" 2>/dev/null)
init=$(python3 -c "
import json
d = json.load(open('$IOD_STATE_DIR/$ON/status.json'))
print(next((r['pid'] for r in d['replicas'] if r['name'] == 'ps-0'), 0))")
[ -n "$apid" ] && [ "$init" -gt 0 ] 2>/dev/null || die "no agent or replica pid for $ON"
kids=$(pgrep -P "$init")
STEP=$(ls "$IOD_STATE_DIR/$O1/ckpt-peer/ps-0" | grep '^step-' | tail -1 | sed 's/^step-0*//')
LOAD=$(cut -d' ' -f1 /proc/loadavg)
T_KILL=$(ms)
kill -9 "$apid" "$init" $kids 2>/dev/null
gone() { ! "$IOD" get nodes -o json 2>/dev/null | grep -q "\"$ON\""; }
wait_for 15 gone || die "$ON not declared lost"
T_DETECT=$(ms)
moved() { n=$(field ps-0 node); [ -n "$n" ] && [ "$n" != "$ON" ]; }
wait_for 15 moved || die "ps-0 not rescheduled"
T_RESCHED=$(ms)
restored() { "$IOD" logs ps-0 2>/dev/null | grep -q "restored step .* (copy on node"; }
wait_for $SLOW restored || die "the replacement did not restore from a copy"
T_RESTORED=$(ms)
LINE=$("$IOD" logs ps-0 2>/dev/null | grep "restored step .* (copy on node" | tail -1)
GOT=$(echo "$LINE" | sed 's/.*restored step \([0-9]*\) .*/\1/')
resumed() { "$IOD" logs ps-0 2>/dev/null | sed -n '/(copy on node/,$p' | grep -q "updates,"; }
wait_for $SLOW resumed || die "the replacement did not continue"
T_RESUMED=$(ms)
if [ "$GOT" -ge "${STEP:-0}" ] 2>/dev/null && [ "$GOT" -gt 0 ]; then
	ok "replacement on $(field ps-0 node) restored step $GOT (>= $STEP held before the loss) over mTLS and continues ($LINE)"
else
	bad "restored step '$GOT', the surviving copies held $STEP"
fi
# re-replication: the copy lost with the node is made again elsewhere
rerep() { "$IOD" logs ps-0 2>/dev/null | grep -q "re-replicated step $GOT to node .*3 of 3 copies, clean"; }
if wait_for $SLOW rerep; then
	RL=$("$IOD" logs ps-0 | grep "re-replicated step $GOT" | tail -1)
	TO=$(echo "$RL" | sed 's/.* to node \([^ ]*\) .*/\1/')
	SD=$(printf 'step-%020d' "$GOT")
	if [ -f "$IOD_STATE_DIR/$TO/ckpt-peer/ps-0/$SD/r0.manifest" ]; then
		ok "step $GOT re-replicated to $TO, which holds it whole: 3 of 3 copies again ($RL)"
	else
		bad "re-replicated to $TO but $IOD_STATE_DIR/$TO/ckpt-peer/ps-0/$SD/r0.manifest is missing"
	fi
else
	bad "no re-replication of step $GOT: $("$IOD" logs ps-0 | grep -i 'replicat\|copies' | tail -3)"
fi
after=$("$IOD" logs ps-0 2>/dev/null | grep "copies per checkpoint" | tail -1)
echo "after the loss: $after"
if [ "$STATE" -gt 0 ]; then
	SL=$("$IOD" logs ps-0 2>/dev/null | grep "state of .* bytes restored" | tail -1)
	case "$SL" in
	*"saved at step $GOT, intact") ok "the $STATE bytes of state came back whole, saved at step $GOT ($SL)" ;;
	*) bad "the state after the restore: '$SL' (want saved at step $GOT, intact)" ;;
	esac
fi
# the phases, each from the clock of the one who saw it (same machine):
# detect = kill -> the Node gone (the test's poll: an upper bound), moved =
# kill -> the rescheduler's write of the Replica (its agent's log), start =
# -> the new node starting the replacement (its agent's log), find and
# fetch_verify = the replica's own (asking the copies; every chunk read and
# its XXH3 checked as it arrives), restored = kill -> its restore done (its
# wall clock, at_ms): p99_ms. resume = -> its first updates seen (the demo
# prints once a second: up to 1 s coarse; it re-replicates first).
FIND=$(echo "$LINE" | sed -n 's/.*find_ms=\([0-9.]*\).*/\1/p')
FV=$(echo "$LINE" | sed -n 's/.*fetch_verify_ms=\([0-9.]*\).*/\1/p')
AT=$(echo "$LINE" | sed -n 's/.* at_ms=\([0-9]*\).*/\1/p')
MOVED_AT=$(log_at_ms "ps-0: rescheduled from lost node" "$IOD_STATE_DIR"/node-*.log)
START_AT=$(log_at_ms "ps-0: starting" "$IOD_STATE_DIR"/node-*.log)
: "${AT:=$T_RESTORED}" "${MOVED_AT:=$T_RESCHED}" "${START_AT:=$MOVED_AT}"
P99=$((AT - T_KILL))
echo "nodeloss phases (ms from the kill): detect<=$((T_DETECT - T_KILL)) moved=$((MOVED_AT - T_KILL)) started=$((START_AT - T_KILL)) restored=$P99 (in the replica: find ${FIND:-?} ms, fetch+verify ${FV:-?} ms) resume=$((T_RESUMED - T_KILL)); as polled by the test: reschedule=$((T_RESCHED - T_KILL)) restored=$((T_RESTORED - T_KILL))"
echo "BENCH storage.nodeloss p99_ms=$P99 size_bytes=$SIZE load=$LOAD transport=mtls nodes=4 samples=1 detect_ms=$((T_DETECT - T_KILL)) moved_ms=$((MOVED_AT - T_KILL)) start_ms=$((START_AT - MOVED_AT)) find_ms=${FIND:-0} fetch_verify_ms=${FV:-0} restore_ms=$((AT - START_AT)) resume_ms=$((T_RESUMED - AT)) state_bytes=$STATE"
echo "ckpt_netns: $pass passed, $fail failed"
[ "$fail" = 0 ]
