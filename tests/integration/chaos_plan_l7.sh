#!/bin/sh
# chaos_plan_l7.sh BUILD: L7 faults (delay and abort through the mesh) as
# steps of a chaos plan (issue 20): `iod chaos run --plan FILE` with a
# `services` selector. One RESULT line for:
#   plan_l7_abort_and_delay  a plan of two steps, abort 100% of `services`
#                           with 502 for 3 s, then delay service/web 500 ms
#                           for 2 s, during a register run: a poller of web
#                           sees injected 502 aborts and >= 0.45 s requests,
#                           the delay's Fault object is there at 7 s (web,
#                           500 ms, 100%), the report
#                           lists both faults, the run is valid, and no Fault
#                           object is left after it
#   plan_l7_bad_service_exits_2  a plan that selects service/nosuch, and one
#                           that selects the TCP service raw: exit 2 before
#                           the run, nothing written
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
need python3 curl

T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
unset IOD_TOKEN IOD_CA IOD_CERT IOD_KEY IOD_CONFIG IOD_CONTEXT IOD_SERVER
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
ADMIN="127.0.0.1:$((BASE + 15))"
cleanup() {
	stop_bg
	"$IOD" chaos heal --all >/dev/null 2>&1
	stop_cluster
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
finish() { exit 0; } # each check printed its RESULT line (lib.sh)

start_cluster "$T/up.log" --nodes 1 --gpus-per-node 0 --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --mesh-port $((BASE + 15)) --telemetry-port 0 \
	--election-timeout 1s --heartbeat 100ms || finish
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
is_200() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$WEB/x")" = 200 ]; }
wait_for 10 is_200 || { bad "web does not answer 200 through $WEB"; finish; }
faults_left() {
	"$IOD" get faults -o json 2>/dev/null |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d.get("items", d)))' 2>&1
}

# 1. bad services first: nothing may be written
cat >"$T/nosuch.yaml" <<'EOF'
duration: 6s
faults:
  - {action: abort, selector: service/nosuch, duration: 2s}
EOF
cat >"$T/raw.yaml" <<'EOF'
duration: 6s
faults:
  - {action: delay, selector: 'service/web,service/raw', latency: 100ms, duration: 2s}
EOF
"$IOD" chaos run --plan "$T/nosuch.yaml" >"$T/b1" 2>&1; r1=$?
"$IOD" chaos run --plan "$T/raw.yaml" >"$T/b2" 2>&1; r2=$?
left=$(faults_left)
if [ "$r1" = 2 ] && [ "$r2" = 2 ] && grep -q "service/nosuch" "$T/b1" && grep -q "service/raw" "$T/b2" &&
	[ "$left" = 0 ]; then
	ok "plan_l7_bad_service_exits_2"
else
	bad "plan_l7_bad_service_exits_2 (exits $r1 $r2, faults left $left: $(tail -1 "$T/b1"); $(tail -1 "$T/b2"))"
fi

# 2. a plan with two L7 steps; faults at 2-5 s and 6-8 s of an 11 s run.
# A regression test too: the node's proxy used to miss the second Fault of
# a run while the workload wrote (its mesh loop took a watch push that came
# late in a wait for an SVID-only timeout and dropped it until the 5 s
# resync: src/agent/meshhost.c); the delay must be seen in requests
cat >"$T/plan.yaml" <<'EOF'
workload: register
clients: 2
rate: 50
duration: 11s
interval: 1s
seed: 3
faults:
  - {action: abort, mode: all, selector: services, status: 502, duration: 3s}
  - {action: delay, selector: service/web, latency: 500ms, duration: 2s}
EOF
python3 - "$WEB" 12 >"$T/poll" <<'PY' &
import http.client, sys, time
host, port = sys.argv[1].rsplit(":", 1)
end = time.time() + float(sys.argv[2])
aborts = codes = slow = other = 0
while time.time() < end:
    t = time.time()
    try:
        c = http.client.HTTPConnection(host, int(port), timeout=5)
        c.request("GET", "/x"); r = c.getresponse(); r.read(); c.close()
        if r.getheader("x-iod-fault") is not None:
            aborts += 1
            codes += r.status == 502
        elif time.time() - t >= 0.45:
            slow += 1
    except Exception:
        other += 1
    time.sleep(0.05)
print("aborts=%d as502=%d slow=%d errors=%d" % (aborts, codes, slow, other))
PY
POLL=$!
bg_adopt $POLL
(sleep 7; "$IOD" get faults -o json >"$T/at7" 2>&1) &
AT7=$!
"$IOD" chaos run --plan "$T/plan.yaml" >"$T/run" 2>"$T/run.err"; rrc=$?
wait $POLL $AT7 2>/dev/null
P=$(cat "$T/poll")
D=$(python3 -c '
import json, sys
v = [i["value"] for i in json.load(open(sys.argv[1]))["items"]]
print(" ".join("%s:%s:%s:%s" % (x["service"], x["action"], x.get("delay_ms"), x["percent"]) for x in v))' \
	"$T/at7" 2>&1)
f() { echo "$P" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
left=$(faults_left)
if [ "$rrc" = 0 ] && [ "$(f aborts)" -gt 0 ] && [ "$(f aborts)" = "$(f as502)" ] && [ "$D" = "web:delay:500:100" ] &&
	[ "$(f slow)" -gt 0 ] &&
	grep -q "abort 100% of service/web's requests with 502" "$T/run" &&
	grep -q "delay 500ms of 100% of service/web's requests" "$T/run" &&
	grep -q "^valid: yes" "$T/run" && [ "$left" = 0 ]; then
	ok "plan_l7_abort_and_delay ($P; at 7 s: $D)"
else
	bad "plan_l7_abort_and_delay (exit $rrc, $P, at 7 s: $D, faults left $left: $(cat "$T/run" "$T/run.err" | tail -12))"
fi
finish
