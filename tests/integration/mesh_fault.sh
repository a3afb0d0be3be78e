#!/bin/sh
# mesh_fault.sh BUILD: L7 fault injection through the mesh (issue 20:
# `iod chaos delay|abort service/NAME`, Istio-style, per service, with a
# percentage) on a real `iod up` cluster, and its guaranteed heal. One
# RESULT line for:
#   abort_applies_and_heals_on_time  abort 100% for 3 s: the node's proxy
#                           answers 503 "x-iod-fault: abort" within 3 s of the
#                           command (the watch pushes it), still 0.7 s before
#                           the deadline, and 200 again within 1.5 s after it;
#                           `iod chaos list` shows it meanwhile
#   delay_percent_then_heal_now  delay 400 ms of 100%: requests take >= 0.4 s;
#                           `iod chaos heal ID` ends it at once (< 0.3 s again)
#   abort_share             abort 50%: of 60 requests, 10..50 are aborted
#   heal_when_command_and_leader_die  the chaos command is killed (-9) and the
#                           Raft leader too while a 4 s abort is on: requests are
#                           served again within 1.5 s of its deadline (each
#                           proxy ends it by its own clock)
#   bad_input_exits_2       unknown service, a TCP service, --status 99, no
#                           --latency, a replica target for abort: exit 2 and no
#                           Fault object in the cluster
#   fault_metrics           iod_mesh_fault_aborts_total and _delays_total count
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl needed"; exit 77; }

T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
unset IOD_TOKEN IOD_CA IOD_CERT IOD_KEY IOD_CONFIG IOD_CONTEXT IOD_SERVER
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
ADMIN="127.0.0.1:$((BASE + 15))"
cleanup() {
	stop_bg
	"$IOD" chaos heal --all >/dev/null 2>&1
	"$IOD" down --grace 5s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() {
	echo "FAIL $1"
	fail=$((fail + 1))
	tail -5 "$IOD_STATE_DIR"/node-1.log 2>/dev/null
}
finish() { echo "RESULT $pass $fail 0"; exit 0; }
now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }

"$IOD" up --nodes 1 --gpus-per-node 0 --api-port $((BASE + 10)) --raft-port $((BASE + 0)) \
	--mesh-port $((BASE + 15)) --telemetry-port 0 >"$T/up.log" 2>&1 ||
	{ cat "$T/up.log"; bad "iod up"; finish; }
cat >"$T/spec.yaml" <<'EOF'
services:
  - name: web
    type: stateless
    ports: [{name: http, port: 8080}]
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name web --size 16']
  - name: raw
    type: stateless
    ports: [{name: tcp, port: 8081}]
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name raw --size 16']
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad deploy; finish; }

# the VIP of web once the proxy has a healthy endpoint for it
vip() {
	curl -s --max-time 2 "http://$ADMIN/registry" 2>/dev/null | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)
except Exception:
    sys.exit(1)
for s in r["services"]:
    if s["name"] == "web" and any(e["healthy"] for e in s["endpoints"]):
        print(s["address"]); sys.exit(0)
sys.exit(1)' >"$T/vip" 2>/dev/null
}
wait_for 30 vip || { bad "web never healthy in the proxy"; finish; }
WEB=$(cat "$T/vip")
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$WEB/x"; }
is_code() { [ "$(code)" = "$1" ]; }
aborted() { curl -s -D - -o /dev/null --max-time 5 "http://$WEB/x" | grep -qi '^x-iod-fault: abort'; }
secs() { curl -s -o /dev/null -w '%{time_total}' --max-time 5 "http://$WEB/x"; }
slow() { python3 -c "import sys; sys.exit(0 if float('$(secs)') >= $1 else 1)"; }
fast() { python3 -c "import sys; sys.exit(0 if float('$(secs)') < $1 else 1)"; }
# ms from deadline $1 (unix ms) to the first 200, polling every 20 ms for up
# to $2 ms past it (prints "never" when none)
first_ok() {
	python3 - "$WEB" "$1" "$2" <<'PY'
import http.client, sys, time
host, port = sys.argv[1].rsplit(":", 1)
dl, upto = int(sys.argv[2]), int(sys.argv[3])
while time.time() * 1000 < dl + upto:
    try:
        c = http.client.HTTPConnection(host, int(port), timeout=2)
        c.request("GET", "/x"); r = c.getresponse(); r.read(); c.close()
        if r.status == 200:
            print(int(time.time() * 1000) - dl); sys.exit(0)
    except Exception:
        pass
    time.sleep(0.02)
print("never")
PY
}
wait_for 10 is_code 200 || { bad "web does not answer 200 through $WEB ($(code))"; finish; }

# 1. abort for 3 s: applied through the watch, healed by the deadline
t0=$(now_ms)
if "$IOD" chaos abort service/web --duration 3s --detach -o json >"$T/a.json" 2>"$T/a.err"; then
	ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/a.json")
	DL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["deadline_ms"])' "$T/a.json")
	if wait_for 3 aborted; then
		t_on=$(( $(now_ms) - t0 ))
		"$IOD" chaos list >"$T/list" 2>&1
		left=$(( DL - $(now_ms) ))
		[ "$left" -gt 700 ] && sleep "$(python3 -c "print(($left - 700) / 1000)")"
		held=$(code)
		off=$(first_ok "$DL" 1500)
		if [ "$held" = 503 ] && grep -q "$ID" "$T/list" && [ "$off" != never ] && [ "$off" -ge -100 ]; then
			ok "abort_applies_and_heals_on_time (on after ${t_on} ms, off $off ms after the deadline)"
		else
			bad "abort_applies_and_heals_on_time (0.7 s before the end: $held; list: $(cat "$T/list"); off: $off)"
		fi
	else
		bad "abort_applies_and_heals_on_time (never aborted: $(code))"
	fi
else
	bad "abort_applies_and_heals_on_time ($(cat "$T/a.err"))"
fi

# 2. delay 400 ms, then heal now
if "$IOD" chaos delay service/web --latency 400ms --duration 30s --detach -o json >"$T/d.json" 2>"$T/d.err"; then
	ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/d.json")
	if wait_for 3 slow 0.4; then
		"$IOD" chaos heal "$ID" >"$T/heal" 2>&1
		if wait_for 2 fast 0.3; then
			ok "delay_percent_then_heal_now (delayed $(secs)s after the heal)"
		else
			bad "delay_percent_then_heal_now (still $(secs)s after heal: $(cat "$T/heal"))"
		fi
	else
		bad "delay_percent_then_heal_now (never slow: $(secs)s)"
	fi
else
	bad "delay_percent_then_heal_now ($(cat "$T/d.err"))"
fi

# 3. abort half of the requests
"$IOD" chaos abort service/web --percent 50 --status 502 --duration 20s --detach -o json >"$T/h.json" 2>&1
ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/h.json" 2>/dev/null)
got502() { [ "$(code)" = 502 ]; }
wait_for 3 got502
n=0
for i in $(seq 60); do [ "$(code)" = 502 ] && n=$((n + 1)); done
"$IOD" chaos heal "$ID" >/dev/null 2>&1
if [ -n "$ID" ] && [ "$n" -ge 10 ] && [ "$n" -le 50 ]; then ok "abort_share ($n of 60 at 50%)"; else
	bad "abort_share ($n of 60 aborted; $(cat "$T/h.json"))"; fi
wait_for 3 is_code 200

# 4. the command and the leader die; the proxy heals on time anyway
t0=$(now_ms)
bg "$IOD" chaos abort service/web --duration 4s -o json >"$T/k.json" 2>&1
if wait_for 3 aborted; then
	kill -9 $LIB_BG_PIDS 2>/dev/null
	"$IOD" chaos kill leader --restart-after 6s --detach >"$T/kill" 2>&1
	DL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["deadline_ms"])' "$T/k.json")
	off=$(first_ok "$DL" 1500)
	if [ "$off" != never ] && [ "$off" -ge -100 ]; then
		ok "heal_when_command_and_leader_die (200 again $off ms after the deadline; $(head -1 "$T/kill"))"
	else
		bad "heal_when_command_and_leader_die (off: $off ms from the deadline; $(cat "$T/kill"))"
	fi
else
	bad "heal_when_command_and_leader_die (never aborted: $(cat "$T/k.json"))"
fi
wait "$LIB_BG_PIDS" 2>/dev/null
LIB_BG_PIDS=""

# 5. bad input: exit 2, nothing applied
rcs=""
"$IOD" chaos abort service/nosuch --duration 2s --detach >/dev/null 2>&1; rcs="$rcs $?"
"$IOD" chaos abort service/raw --duration 2s --detach >/dev/null 2>&1; rcs="$rcs $?"
"$IOD" chaos abort service/web --status 99 --duration 2s --detach >/dev/null 2>&1; rcs="$rcs $?"
"$IOD" chaos delay service/web --duration 2s --detach >/dev/null 2>&1; rcs="$rcs $?"
"$IOD" chaos abort replica/web-0 --duration 2s --detach >/dev/null 2>&1; rcs="$rcs $?"
"$IOD" chaos loss service/web --percent 5 --duration 2s --detach >/dev/null 2>&1; rcs="$rcs $?"
sleep 6 # the leader killed above is back
left=$("$IOD" get faults -o json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d.get("items", d)))' 2>&1)
if [ "$rcs" = " 2 2 2 2 2 2" ] && [ "$left" = 0 ]; then ok "bad_input_exits_2"; else
	bad "bad_input_exits_2 (exits:$rcs; faults left: $left)"; fi

# 6. the proxy counts what it injected
m() { curl -s --max-time 5 "http://$ADMIN/metrics" | sed -n "s/^$1{service=\"web\"} \([0-9]*\).*/\1/p" | head -1; }
A=$(m iod_mesh_fault_aborts_total); D=$(m iod_mesh_fault_delays_total)
if [ "${A:-0}" -gt 0 ] && [ "${D:-0}" -gt 0 ]; then ok "fault_metrics (aborts $A, delays $D)"; else
	bad "fault_metrics (aborts '${A}', delays '${D}')"; fi
finish
