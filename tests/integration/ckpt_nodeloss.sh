#!/bin/sh
# ckpt_nodeloss.sh BUILD: replicated checkpoints across nodes on `iod up`
# and recovery from node loss (docs/storage.md, "Peers run by the agents",
# "Recovery on node loss"). Two nodes, a stateful parameter server with
# storage.replicas: 2:
#   1. each agent runs a checkpoint chunk server (its Node's ckpt_peer) and
#      the replica's saves are copied to the other node's, under the
#      replica's namespace (<data dir>/ckpt-peer/ps-0/step-*);
#   2. the node holding the replica is lost (its agent and the replica
#      SIGKILLed): the replacement on the other node restores from the
#      surviving copy and continues from the checkpoint's step; the phases
#      (detect, reschedule, fetch+verify, resume) are printed;
#   3. its data directory is a replicated volume (storage.volume): a file
#      written there before the last checkpoint comes back on the new node,
#      byte for byte (docs/storage.md "Volumes").
# Exit status: 0 pass, 77 skip, 1 fail.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed to read JSON"; exit 77; }
T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
BASE=$((19000 + ($$ % 300) * 20))
export IOD_SERVER="127.0.0.1:$((BASE + 10))"
. "$(dirname "$0")/lib.sh"
cleanup() {
	stop_cluster 2s
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
ms() { date +%s%3N; }

start_cluster "$T/up.log" --nodes 2 --servers 1 --gpus-per-node 1 --lease-ttl 1s \
	--stateful-grace 0s --api-port $((BASE + 10)) --raft-port $((BASE + 0)) --no-mesh \
	--election-timeout 1s --heartbeat 100ms || exit 1
cat >"$T/spec.yaml" <<'YAML'
storage:
  replicas: 2
  volume: {replicas: 2}
  tiers:
    - {medium: NVMe, quota: 100%}
services:
  - name: ps
    type: stateful
    command: iod
    args: [demo-worker, --role, parameter-server, --params, "20000", --ckpt-every, "20",
           --ckpt-scrub, "0"]
  - name: w
    type: stateless
    command: iod
    args: [demo-worker, --role, worker, --ps-service, ps, --compute-ms, "2", --http-port, "0"]
    depends_on: [ps]
YAML
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }
field() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$1':
        print(i['value'].get('$2', ''))"
}
fail() {
	bad "$1"
	"$IOD" logs ps-0 2>&1 | tail -15
	"$IOD" get replicas 2>&1; "$IOD" explain replica ps-0 2>&1 | tail -5
	for f in "$IOD_STATE_DIR"/node-*.log; do echo "--- $f"; tail -8 "$f"; done
	exit 1
}

# 1. copies on the other node's chunk server
placed() { [ -n "$(field ps-0 node)" ]; }
wait_for 20 placed ||
	fail "ps-0 not placed"
ON=$(field ps-0 node)
case "$ON" in node-1) OTHER=node-2 ;; *) OTHER=node-1 ;; esac
copy_steps() { ls "$IOD_STATE_DIR/$OTHER/ckpt-peer/ps-0" 2>/dev/null | grep '^step-'; }
held() {
	s=$(copy_steps | tail -1)
	[ -n "$s" ] && [ -f "$IOD_STATE_DIR/$OTHER/ckpt-peer/ps-0/$s/r0.manifest" ]
}
if wait_for 25 held; then
	ok "checkpoint_copied_to_the_other_nodes_chunk_server ($ON -> $OTHER: $(copy_steps | tail -1))"
else
	fail "no copy of ps-0's checkpoints on $OTHER: $(ls -R "$IOD_STATE_DIR/$OTHER/ckpt-peer" 2>&1 | head)"
fi
"$IOD" get nodes -o json 2>/dev/null | grep -q '"ckpt_peer"' ||
	fail "the Node objects carry no ckpt_peer"

# 3 (before the loss). a file in ps-0's data directory, then a checkpoint
# taken after it held on the other node: the volume's recovery point
DATA="$IOD_STATE_DIR/$ON/replicas/ps-0/data"
[ -d "$DATA" ] || fail "no data directory $DATA"
"$IOD" logs ps-0 2>/dev/null | grep -q "volume $DATA rides in each checkpoint" ||
	fail "ps-0 did not take its data directory as a volume: $("$IOD" logs ps-0 2>&1 | head -5)"
mkdir -p "$DATA/db"
echo "row $$ written before the sync" >"$DATA/db/notes.txt"
WROTE=$(copy_steps | tail -1)
newer() {
	s=$(copy_steps | tail -1)
	[ -n "$s" ] && [ "$s" != "$WROTE" ] &&
		[ -f "$IOD_STATE_DIR/$OTHER/ckpt-peer/ps-0/$s/r0.manifest" ]
}
wait_for 25 newer || fail "no checkpoint after the write reached $OTHER"

# 2. lose the node holding ps-0: its agent and the replica, SIGKILLed
apid=$(cat "$IOD_STATE_DIR/$ON.pid" 2>/dev/null)
init=$(python3 -c "
import json
d = json.load(open('$IOD_STATE_DIR/$ON/status.json'))
print(next((r['pid'] for r in d['replicas'] if r['name'] == 'ps-0'), 0))")
[ -n "$apid" ] && [ "$init" -gt 0 ] 2>/dev/null || fail "no agent or replica pid for $ON"
kids=$(pgrep -P "$init")
STEP=$(copy_steps | tail -1 | sed 's/^step-0*//')
T_KILL=$(ms)
kill -9 "$apid" "$init" $kids 2>/dev/null
gone() { ! "$IOD" get nodes -o json 2>/dev/null | grep -q "\"$ON\""; }
wait_for 15 gone || fail "$ON not declared lost"
T_DETECT=$(ms)
moved() { [ "$(field ps-0 node)" = "$OTHER" ]; }
wait_for 15 moved || fail "ps-0 not rescheduled to $OTHER"
T_RESCHED=$(ms)
restored() { "$IOD" logs ps-0 2>/dev/null | grep -q "restored step .* (copy on node"; }
wait_for 20 restored || fail "the replacement did not restore from a copy"
T_RESTORED=$(ms)
LINE=$("$IOD" logs ps-0 2>/dev/null | grep "restored step .* (copy on node" | tail -1)
GOT=$(echo "$LINE" | sed 's/.*restored step \([0-9]*\) .*/\1/')
resumed() { "$IOD" logs ps-0 2>/dev/null | sed -n '/(copy on node/,$p' | grep -q "updates,"; }
wait_for 15 resumed || fail "the replacement did not continue"
T_RESUMED=$(ms)
FV=$(echo "$LINE" | sed 's/.*fetch_verify_ms=\([0-9.]*\).*/\1/')
if [ "$GOT" -ge "${STEP:-0}" ] 2>/dev/null && [ "$GOT" -gt 0 ]; then
	ok "replacement_resumes_from_the_checkpoint_step (step $GOT >= $STEP held before the loss; $LINE)"
else
	fail "restored step '$GOT', the surviving copy held $STEP"
fi
# 3. the volume on the new node
vol() { "$IOD" logs ps-0 2>/dev/null | grep -q "volume restored from step"; }
NEWDATA="$IOD_STATE_DIR/$OTHER/replicas/ps-0/data"
if wait_for 15 vol && [ "$(cat "$NEWDATA/db/notes.txt" 2>/dev/null)" = "row $$ written before the sync" ]; then
	ok "volume_file_written_before_the_last_sync_is_on_the_new_node ($("$IOD" logs ps-0 | grep 'volume restored' | tail -1))"
else
	fail "the volume on $OTHER: $(ls -R "$NEWDATA" 2>&1 | head -8); $("$IOD" logs ps-0 2>&1 | grep -i volume | tail -2)"
fi
echo "nodeloss phases (ms from the kill): detect=$((T_DETECT - T_KILL)) reschedule=$((T_RESCHED - T_KILL)) restored=$((T_RESTORED - T_KILL)) (fetch+verify $FV ms in the replica) resume=$((T_RESUMED - T_KILL))"
checks_ok
