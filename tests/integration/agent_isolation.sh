#!/bin/sh
# agent_isolation.sh BUILD: one bad replica never stops its neighbours.
# On a real local cluster (`iod up`, 1 node), with a good replica running:
#   1. replica objects the agent cannot build, written straight into the
#      state (a bad `gpus` value, argv over the agent's limit, more peers
#      than the environment holds, a Service with a key the spec language
#      does not have) are each marked failed with their reason, and the
#      unrelated running replica, which sorts after all of them, keeps
#      running: same process, 0 restarts (the agent used to stop at the
#      first bad replica and drop every one after it);
#   2. a deploy whose replicas no agent could build (each replica's
#      IOD_PEERS over the environment limit) is refused with a 4xx naming
#      IOD_AGENT_ENV_BYTES_MAX, and nothing of it is stored ("520 placed",
#      exit 0, 0 started before); `iod validate` says the same.
# Prints one RESULT line per check. Skips when the binary or python3 is missing.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed to read JSON"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl needed for raw API writes"; exit 77; }

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
BASE=$((14000 + ($$ % 300) * 20))
API="127.0.0.1:$((BASE + 10))"
export IOD_SERVER="$API,127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
cleanup() {
	"$IOD" down --grace 5s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

ok() { echo "ok   $1 (t=$(($(date +%s) - T0))s)"; echo "RESULT 1 0 0"; }
bad() {
	echo "FAIL $1"
	echo "RESULT 0 1 0"
	for f in "$IOD_STATE_DIR"/*.log; do echo "--- $f"; tail -15 "$f"; done
}
field() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
for i in d.get('items', []):
    if i['name'] == '$1':
        print(i['value'].get('$2', ''))
"
}
. "$(dirname "$0")/lib.sh"
is_phase() { [ "$(field "$1" phase)" = "$2" ]; }
# the workload's pid (the child of the replica's sandbox init)
workload_pid() {
	init=$(python3 -c "
import json
d = json.load(open('$IOD_STATE_DIR/node-1/status.json'))
print(next((r['pid'] for r in d['replicas'] if r['name'] == '$1'), 0))")
	[ "$init" -gt 0 ] 2>/dev/null && pgrep -P "$init" | head -1
}

"$IOD" up --nodes 1 --gpus-per-node 2 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --election-timeout 1s --heartbeat 100ms --no-mesh \
	>"$T/up.log" 2>&1 || { cat "$T/up.log"; bad "iod up"; exit 1; }
cat >"$T/good.yaml" <<'EOF'
services:
  - name: zz
    type: stateless
    command: [sleep, '600']
EOF
"$IOD" deploy -f "$T/good.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }
if ! wait_for 20 is_phase zz-0 running; then
	bad "good replica running ($(field zz-0 phase): $(field zz-0 reason))"
	exit 1
fi
pid0=$(workload_pid zz-0)

# 1. bad replica objects, written around /v1/deploy in one transaction
python3 - "$T/txn.json" <<'EOF'
import json, sys
ops = []
def put(kind, name, value):
    ops.append({"op": "put", "kind": kind, "name": name, "value": value})
put("service", "argv", {"type": "stateless", "command": "true", "args": ["x" * 4000] * 8})
put("replica", "argv-0", {"service": "argv", "node": "node-1"})
put("replica", "a-gpus-0", {"service": "zz", "node": "node-1", "gpus": "0-x"})
put("node", "ghost", {"addr": "10.0.0.9", "gpus": 0})
put("service", "peers", {"type": "stateless", "command": "true"})
put("replica", "peers-0", {"service": "peers", "node": "node-1"})
for i in range(1, 1201):
    put("replica", "peers-%d" % i, {"service": "peers", "node": "ghost"})
put("service", "smuggled", {"type": "stateless", "command": "sh", "privileged": True})
put("replica", "smuggled-0", {"service": "smuggled", "node": "node-1"})
json.dump({"ops": ops}, open(sys.argv[1], "w"))
EOF
# raw writes go to the leader (a follower answers 503 with its address),
# with the admin credential `iod up` made
PKI="$IOD_STATE_DIR/pki"
post_txn() {
	for a in $(echo "$IOD_SERVER" | tr , ' '); do
		code=$(curl -s -o "$T/txn.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
			--cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
			--data-binary @"$T/txn.json" "https://$a/v1/txn")
		[ "$code" = 200 ] && return 0
	done
	echo "txn: HTTP $code: $(cat "$T/txn.out")"
	return 1
}
wait_for 10 post_txn
failed_with() { is_phase "$1" failed && field "$1" reason | grep -q "$2"; }
all_failed() {
	failed_with argv-0 IOD_AGENT_ARGV_BYTES_MAX && failed_with a-gpus-0 gpus &&
		failed_with peers-0 IOD_PEERS && failed_with smuggled-0 "does not validate"
}
if wait_for 20 all_failed; then
	ok "bad_replicas_failed_with_reasons"
else
	bad "bad_replicas_failed_with_reasons"
	for r in argv-0 a-gpus-0 peers-0 smuggled-0; do echo "$r: $(field $r phase): $(field $r reason)"; done
fi
sleep 1 # a stopped neighbour would show by now
pid1=$(workload_pid zz-0)
if is_phase zz-0 running && [ "$(field zz-0 restarts)" = 0 ] && [ -n "$pid0" ] && [ "$pid0" = "$pid1" ]; then
	ok "unrelated_replica_kept_running (pid $pid1, 0 restarts)"
else
	bad "unrelated_replica_kept_running (phase $(field zz-0 phase), restarts $(field zz-0 restarts), pid $pid0 -> $pid1)"
fi

# 2. a deploy no agent could run is refused with the limit named
cat >"$T/big.yaml" <<'EOF'
services:
  - name: big
    type: stateless
    replicas: 2000
    command: [sleep, '600']
EOF
rc=0
"$IOD" deploy -f "$T/big.yaml" >"$T/big.log" 2>&1 || rc=$?
"$IOD" validate -f "$T/big.yaml" >"$T/bigv.log" 2>&1
if [ "$rc" -ne 0 ] && grep -q IOD_AGENT_ENV_BYTES_MAX "$T/big.log" &&
	grep -q IOD_AGENT_ENV_BYTES_MAX "$T/bigv.log" && [ -z "$(field big-0 phase)" ]; then
	ok "unrunnable_deploy_refused (exit $rc)"
else
	bad "unrunnable_deploy_refused (exit $rc)"; cat "$T/big.log" "$T/bigv.log"
fi
exit 0
