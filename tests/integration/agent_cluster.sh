#!/bin/sh
# agent_cluster.sh BUILD: the runtime on a real local cluster (loopback):
# `iod up` (3 servers + 3 agents), deploy a spec with health checks, then
#   1. every placed replica becomes healthy;
#   2. a killed replica is restarted and its endpoint is healthy again;
#   3. a stateful replica's data directory survives its restart;
#   4. a stopped (SIGSTOP) agent's node is declared lost and its stateless
#      replica runs elsewhere, placed by the scheduler (reason, explanation);
#      the node, resumed, stops its stale copy;
#   5. `iod down` leaves nothing running.
# Prints one RESULT line per check. Skips when the binary is missing.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed to read JSON"; exit 77; }

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
BASE=$((12000 + ($$ % 400) * 20))
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

# field REPLICA KEY: a replica's value field (empty when absent)
field() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
for i in d.get('items', []):
    if i['name'] == '$1':
        print(i['value'].get('$2', ''))
"
}
# wait_for SECONDS CMD...: poll CMD until it succeeds
. "$(dirname "$0")/lib.sh"
all_healthy() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
items = d.get('items', [])
sys.exit(0 if len(items) == 3 and all(i['value'].get('phase') == 'healthy' for i in items) else 1)"
}
is_phase() { [ "$(field "$1" phase)" = "$2" ]; }
restarted() { [ "$(field "$1" restarts)" -ge 1 ] 2>/dev/null && is_phase "$1" healthy; }
endpoint_healthy() {
	"$IOD" get endpoints -o json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if any(i['name'] == '$1' and i['value'].get('healthy') for i in d.get('items', [])) else 1)"
}
# workload PID of a replica: the child of its sandbox's init (status.json pid)
workload_pid() {
	node=$(field "$1" node)
	init=$(python3 -c "
import json
d = json.load(open('$IOD_STATE_DIR/$node/status.json'))
print(next((r['pid'] for r in d['replicas'] if r['name'] == '$1'), 0))")
	[ "$init" -gt 0 ] 2>/dev/null && pgrep -P "$init" | head -1
}

cat >"$T/spec.yaml" <<'EOF'
services:
  - name: store
    type: stateful
    replicas: 1
    command: [sh, -c, 'n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo run=$n; exec $IOD_BIN demo-worker --role parameter-server --params 1024']
    health: {tcp: 1, interval: 50ms, unhealthy_threshold: 1}
  - name: web
    type: stateless
    replicas: 2
    resources: {gpu: 1}
    command: iod demo-worker --role worker --ps-service store --compute-ms 1
    depends_on: [store]
    health: {http: {port: 1, path: /healthz}, interval: 50ms, unhealthy_threshold: 1}
EOF

# Generous Raft and lease timing: other work loads these 2 cores too, and a
# test must not confuse a slow machine with a lost node (speed: bench_runtime).
"$IOD" up --nodes 3 --gpus-per-node 1 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --election-timeout 1s --heartbeat 100ms >"$T/up.log" 2>&1 || { cat "$T/up.log"; bad "iod up"; exit 1; }
echo "up at t=$(($(date +%s) - T0))s"
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }

# 1. deploy -> all healthy
if wait_for 20 all_healthy; then ok "deploy_all_healthy"; else bad "deploy_all_healthy"; "$IOD" get replicas; fi

# 2. kill a replica -> restarted, endpoint healthy again
pid=$(workload_pid web-0)
if [ -n "$pid" ] && kill -9 "$pid" && wait_for 15 restarted web-0 && wait_for 5 endpoint_healthy web-0; then
	ok "killed_replica_restarted"
else
	bad "killed_replica_restarted (pid '$pid', phase $(field web-0 phase), restarts $(field web-0 restarts))"
fi

# 3. a stateful replica's data survives its restart
pid=$(workload_pid store-0)
if [ -n "$pid" ] && kill -9 "$pid" && wait_for 15 restarted store-0 &&
	wait_for 5 sh -c "\"$IOD\" logs store-0 | grep -q run=2"; then
	ok "stateful_data_survives_restart"
else
	bad "stateful_data_survives_restart"; "$IOD" logs store-0 | tail -5
fi

# 4. SIGSTOP an agent -> node lost -> its stateless replica runs elsewhere
node=$(field web-1 node)
apid=$(cat "$IOD_STATE_DIR/$node.pid" 2>/dev/null)
moved() { n2=$(field web-1 node); [ -n "$n2" ] && [ "$n2" != "$node" ] && is_phase web-1 healthy; }
# placed by the topology-aware scheduler, as a deploy: its reason and the
# scheduler's explanation (`iod explain replica`) name the new node
explained() {
	field web-1 reasons | grep -q "rescheduled from lost node $node to $(field web-1 node)" &&
		"$IOD" explain replica web-1 2>/dev/null | grep -q "$(field web-1 node)"
}
if [ -n "$apid" ] && kill -STOP "$apid" && wait_for 20 moved && explained; then
	ok "lost_node_replica_runs_elsewhere ($node -> $(field web-1 node))"
else
	bad "lost_node_replica_runs_elsewhere (web-1 on $(field web-1 node), phase $(field web-1 phase))"
	field web-1 reasons
	"$IOD" explain replica web-1
fi
kill -CONT "$apid" 2>/dev/null
# the node comes back: it must stop its stale copy of web-1
stale_gone() {
	python3 -c "
import json, sys
d = json.load(open('$IOD_STATE_DIR/$node/status.json'))
sys.exit(1 if any(r['name'] == 'web-1' for r in d['replicas']) else 0)"
}
if wait_for 15 stale_gone; then ok "returning_node_stops_stale_replica"; else bad "returning_node_stops_stale_replica"; fi

# 5. iod down leaves nothing running
"$IOD" down --grace 5s >/dev/null 2>&1
if pgrep -f "$IOD_STATE_DIR" >/dev/null; then
	bad "down_leaves_nothing"; pgrep -af "$IOD_STATE_DIR"
else
	ok "down_leaves_nothing"
fi
exit 0
