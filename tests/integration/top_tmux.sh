#!/bin/sh
# top_tmux.sh BUILD: `iod top` on a real local cluster, driven through tmux
# (send-keys, capture-pane) as a person would use it:
#   1. the replicas view shows every replica of a deployed topology;
#   2. `/` filters the rows, `:` switches views, an unknown view is an error
#      on the status line;
#   3. a hung replica (SIGSTOP: its HTTP check times out) shows "unhealthy"
#      within 2 refreshes of the API saying so, and a killed one's restart
#      count rises on screen within 2 refreshes;
#   4. a tiny window and a resize back leave a whole screen;
#   5. `iod down` under it: the last data stays, a red status line says the
#      cluster is unreachable, the process lives on and `q` quits with 0;
#   6. `iod top --once -o json|text` print one snapshot; bad views and
#      filters fail with exit 2 and say why.
# Prints one RESULT line per check; skips without tmux or python3.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v tmux >/dev/null || { echo "skip: tmux not installed"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 needed to read JSON"; exit 77; }

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
BASE=$((14000 + ($$ % 300) * 20))
API="127.0.0.1:$((BASE + 10))"
export IOD_SERVER="$API,127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
TM="tmux -L iodtop$$ -f /dev/null"
STOPPED=""
cleanup() {
	[ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null
	$TM kill-server 2>/dev/null
	"$IOD" down --grace 5s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

ok() { echo "ok   $1 (t=$(($(date +%s) - T0))s)"; echo "RESULT 1 0 0"; }
bad() {
	echo "FAIL $1"
	echo "RESULT 0 1 0"
	echo "--- screen"; screen | sed 's/^/  /'
}
screen() { $TM capture-pane -p -t top 2>/dev/null; }
keys() { $TM send-keys -t top "$@"; }
# wait_screen SECONDS PATTERN: poll the pane until a line matches (grep -E)
wait_screen() {
	n=$(($1 * 10))
	while [ $n -gt 0 ]; do
		screen | grep -Eq "$2" && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}
. "$(dirname "$0")/lib.sh"
field() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$1':
        print(i['value'].get('$2', ''))
"
}
all_healthy() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
items = json.load(sys.stdin).get('items', [])
sys.exit(0 if len(items) == 3 and all(i['value'].get('phase') == 'healthy' for i in items) else 1)"
}
workload_pid() {
	node=$(field "$1" node)
	init=$(python3 -c "
import json
d = json.load(open('$IOD_STATE_DIR/$node/status.json'))
print(next((r['pid'] for r in d['replicas'] if r['name'] == '$1'), 0))")
	[ "$init" -gt 0 ] 2>/dev/null && pgrep -P "$init" | head -1
}

"$IOD" up --nodes 2 --gpus-per-node 2 --lease-ttl 3s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --no-mesh --election-timeout 1s --heartbeat 100ms \
	>"$T/up.log" 2>&1 || { cat "$T/up.log"; bad "iod up"; exit 1; }
cat >"$T/spec.yaml" <<'EOF'
services:
  - name: store
    type: stateful
    replicas: 1
    command: iod demo-worker --role parameter-server --params 1024
    health: {tcp: 1, interval: 200ms, unhealthy_threshold: 1}
  - name: web
    type: stateless
    replicas: 2
    resources: {gpu: 1}
    command: iod demo-worker --role worker --ps-service store --compute-ms 1
    depends_on: [store]
    health: {http: {port: 1, path: /healthz}, interval: 1s, timeout: 300ms, unhealthy_threshold: 1}
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }
wait_for 30 all_healthy || { "$IOD" get replicas; bad "deploy_all_healthy"; exit 1; }

$TM new-session -d -s top -x 150 -y 30 \
	"TERM=xterm-256color '$IOD' top --refresh 1s; echo TOP-EXITED rc=\$?; sleep 60"

# 1. the replicas view (the default) lists every replica
if wait_screen 10 '^store-0 +store +node-' && wait_screen 2 '^web-0 +web' &&
	wait_screen 2 '^web-1 +web'; then
	ok "top_shows_replicas"
else
	bad "top_shows_replicas"
fi

# 2. filter, view switch, a bad view
keys / web Enter
# wait for the applied filter on the status line first: web-0 is on screen
# before the keys are read too, and a loaded machine reads them late
if wait_screen 5 'rows  filter web' && screen | grep -q '^web-0' && ! screen | grep -q '^store-0'; then
	ok "top_filter"
else
	bad "top_filter"
fi
keys Escape
wait_screen 3 '^store-0' || bad "top_filter_cleared"
keys : nodes Enter
if wait_screen 3 '^NAME +MODEL +GPUS' && wait_screen 2 '^node-1 +generic-2 +[0-9]/2'; then
	ok "top_view_nodes"
else
	bad "top_view_nodes"
fi
keys : bogus Enter
if wait_screen 3 'unknown view "bogus"; views: cluster'; then ok "top_bad_view_status_line"; else
	bad "top_bad_view_status_line"; fi
keys : replicas Enter
wait_screen 3 '^store-0' || bad "top_back_to_replicas"

# 3. a hung replica turns unhealthy on screen within 2 refreshes of the API
pid=$(workload_pid web-0)
if [ -n "$pid" ] && kill -STOP "$pid"; then
	STOPPED=$pid
	if wait_for 15 sh -c "[ \"\$('$IOD' get replicas -o json | python3 -c \"
import json, sys
print(next(i['value']['phase'] for i in json.load(sys.stdin)['items'] if i['name'] == 'web-0'))\")\" = unhealthy ]"; then
		t1=$(date +%s%N)
		if wait_screen 3 '^web-0 .* unhealthy'; then
			ms=$((($(date +%s%N) - t1) / 1000000))
			if [ "$ms" -le 2300 ]; then ok "top_hung_replica_unhealthy (${ms} ms after the API)"
			else bad "top_hung_replica_unhealthy: ${ms} ms after the API, more than 2 refreshes"; fi
		else
			bad "top_hung_replica_unhealthy: not on screen 3 s after the API"
		fi
	else
		bad "top_hung_replica_unhealthy: the API never said unhealthy (phase $(field web-0 phase))"
	fi
	kill -CONT "$pid" 2>/dev/null
	STOPPED=""
else
	bad "top_hung_replica_unhealthy: no workload pid for web-0"
fi
# a killed replica's restart shows within 2 refreshes of the API counting it
wait_for 20 all_healthy
before=$(field store-0 restarts)
pid=$(workload_pid store-0)
if [ -n "$pid" ] && kill -9 "$pid" &&
	wait_for 15 sh -c "[ \"\$('$IOD' get replicas -o json | python3 -c \"
import json, sys
print(next(i['value']['restarts'] for i in json.load(sys.stdin)['items'] if i['name'] == 'store-0'))\")\" -gt $before ]"; then
	want=$((before + 1))
	t1=$(date +%s%N)
	if wait_screen 3 "^store-0 .* $want( |\$)"; then
		ok "top_killed_replica_restart_count ($(( ($(date +%s%N) - t1) / 1000000 )) ms after the API)"
	else
		bad "top_killed_replica_restart_count: restarts $want not on screen within 3 s"
	fi
else
	bad "top_killed_replica_restart_count: no restart seen by the API (pid '$pid')"
fi

# 4. a tiny window, then a resize back
$TM resize-window -t top -x 20 -y 3
sleep 0.5
small=$(screen)
$TM resize-window -t top -x 150 -y 30
if echo "$small" | grep -q 'window too small' && wait_screen 3 '^store-0' &&
	wait_screen 2 '1:cluster +2:nodes' && ! screen | grep -q 'TOP-EXITED'; then
	ok "top_tiny_window_and_resize"
else
	echo "$small" | sed 's/^/  small: /'
	bad "top_tiny_window_and_resize"
fi

# 5. the cluster goes away under it
"$IOD" down --grace 5s >/dev/null 2>&1
if wait_screen 6 'cluster unreachable .*showing data from' && screen | grep -q '^store-0' &&
	! screen | grep -q 'TOP-EXITED'; then
	ok "top_cluster_gone_status_line"
else
	bad "top_cluster_gone_status_line"
fi
keys q
if wait_screen 3 'TOP-EXITED rc=0'; then ok "top_q_quits"; else bad "top_q_quits"; fi

# 6. --once (against a cluster again) and bad input
"$IOD" up --nodes 1 --gpus-per-node 1 --api-port $((BASE + 10)) --raft-port $((BASE + 0)) \
	--no-mesh --election-timeout 1s --heartbeat 100ms >"$T/up2.log" 2>&1 ||
	{ cat "$T/up2.log"; bad "iod up (2)"; exit 1; }
# every server's view has the node (reads go to whichever server answers)
has_node() { "$IOD" top --once --view nodes 2>/dev/null | grep -q '^node-1 '; }
wait_for 10 has_node
if "$IOD" top --once -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
v = d["views"]
assert set(v) == {"cluster", "nodes", "gpus", "replicas", "services", "links"}, v.keys()
assert [n["name"] for n in v["nodes"]] == ["node-1"], v["nodes"]
assert v["nodes"][0]["health"] == "ready"
assert len(v["gpus"]) == 1 and v["gpus"][0]["node"] == "node-1"
' && "$IOD" top --once --view nodes | grep -q '^node-1 '; then
	ok "top_once_json_text"
else
	bad "top_once_json_text"
fi
out=$("$IOD" top --once --view replicas --filter nosuch=1 2>&1); rc=$?
out2=$("$IOD" top --once --view bogus 2>&1); rc2=$?
if [ "$rc" = 2 ] && echo "$out" | grep -q 'unknown column "nosuch"' &&
	[ "$rc2" = 2 ] && echo "$out2" | grep -q 'unknown view "bogus"'; then
	ok "top_bad_input"
else
	echo "  $rc: $out"; echo "  $rc2: $out2"
	bad "top_bad_input"
fi
