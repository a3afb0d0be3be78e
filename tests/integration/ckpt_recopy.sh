#!/bin/sh
# ckpt_recopy.sh BUILD: after a node loss the Checkpoint object follows the
# copies re-replication left (docs/storage.md "Re-replication",
# iod_ckpt_raft_recopied). `iod up --nodes 4`, a parameter server with
# storage.replicas: 3 committing its saves through the control plane
# (--ckpt-server, with the service identity the agent hands it): the node
# holding ps-0 is SIGKILLed, the replacement restores, makes the lost copy
# again on the fourth node and rewrites the restored step's Checkpoint
# object: `iod get checkpoints` lists 3 copies on live nodes, clean.
# The worker's 100 ms steps space the saves (one every 2 s) so that the
# restored step is still kept (keep_max 3) when its object is read.
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

start_cluster "$T/up.log" --nodes 4 --servers 1 --gpus-per-node 1 --lease-ttl 1s \
	--stateful-grace 0s --api-port $((BASE + 10)) --raft-port $((BASE + 0)) --no-mesh \
	--election-timeout 1s --heartbeat 100ms || exit 1
cat >"$T/spec.yaml" <<YAML
storage:
  replicas: 3
  tiers:
    - {medium: NVMe, quota: 100%}
services:
  - name: ps
    type: stateful
    command: iod
    args: [demo-worker, --role, parameter-server, --params, "20000", --ckpt-every, "20",
           --ckpt-scrub, "0", --ckpt-server, "$IOD_SERVER"]
  - name: w
    type: stateless
    command: iod
    args: [demo-worker, --role, worker, --ps-service, ps, --compute-ms, "100", --http-port, "0"]
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
	"$IOD" get checkpoints ps 2>&1 | tail -5
	for f in "$IOD_STATE_DIR"/node-*.log; do echo "--- $f"; tail -5 "$f"; done
	exit 1
}
placed() { [ -n "$(field ps-0 node)" ]; }
wait_for 20 placed || fail "ps-0 not placed"
ON=$(field ps-0 node)
committed() { "$IOD" get checkpoints ps 2>/dev/null | grep -q " 3/3 "; }
wait_for 30 committed || fail "no checkpoint of ps committed with 3 copies"
ok "checkpoints_committed_with_3_copies ($("$IOD" get checkpoints ps | tail -1))"

apid=$(cat "$IOD_STATE_DIR/$ON.pid" 2>/dev/null)
init=$(python3 -c "
import json
d = json.load(open('$IOD_STATE_DIR/$ON/status.json'))
print(next((r['pid'] for r in d['replicas'] if r['name'] == 'ps-0'), 0))")
[ -n "$apid" ] && [ "$init" -gt 0 ] 2>/dev/null || fail "no agent or replica pid for $ON"
kids=$(pgrep -P "$init")
kill -9 "$apid" "$init" $kids 2>/dev/null
recopied() { "$IOD" logs ps-0 2>/dev/null | grep -q "checkpoint step [0-9]* committed as 3 copies, clean"; }
wait_for 40 recopied || fail "the replacement did not rewrite the Checkpoint object after re-replicating"
L=$("$IOD" logs ps-0 | grep "committed as 3 copies" | tail -1)
S=$(echo "$L" | sed 's/.*checkpoint step \([0-9]*\) committed.*/\1/')
OBJ=$("$IOD" get checkpoints ps -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    v = i['value']
    if v.get('step') == $S:
        print(json.dumps(v.get('copies')), v.get('health'), v.get('node'))")
case "$OBJ" in
*"$ON"*) fail "step $S's object still names the lost node $ON: $OBJ" ;;
*clean*) ok "checkpoint_object_follows_the_new_copies (step $S: $OBJ; $L)" ;;
*) fail "step $S's object after re-replication: '$OBJ'" ;;
esac
checks_ok
