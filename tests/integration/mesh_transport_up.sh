#!/bin/sh
# mesh_transport_up.sh BUILD: `iod config set service_mesh.transport shm`
# changes the running mesh live (issue 22 steps 4-5), on `iod up` (1 node,
# node-1's agent hosts the proxy). Services: web (HTTP, `iod proxy backend
# --unix auto`: it listens on its TCP port and on
# $IOD_MESH_UNIX_DIR/ep/$IOD_REPLICA.sock) and pinned (the same, its spec
# says service_mesh.transport: tcp). One RESULT line for each of:
#   transport_tcp_by_default  unset: no AF_UNIX socket for web; a call
#                     through the VIP is tcp on both hops (iod trace
#                     transport=tcp/tcp, the proxy's counters)
#   transport_shm_live  set shm --wait: every node acks, `iod config status`
#                     shows shm; web's socket MESH_DIR/web.sock appears, a
#                     call through it runs shm on both hops (trace
#                     transport=shm/shm, counters, `iod top` TRANSPORT
#                     column), a keep-alive connection opened under tcp
#                     still answers on tcp, and no replica restarted
#   transport_spec_overrides  under cluster shm, pinned (spec tcp) has no
#                     socket, and /registry says tcp from the spec
#   transport_unset_back_to_tcp  unset --wait: web's socket is gone, a new
#                     call is tcp/tcp again, still no restart
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
need python3 curl

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
unset IOD_TOKEN IOD_CA IOD_CERT IOD_KEY IOD_CONFIG IOD_CONTEXT IOD_SERVER
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
ADMIN="127.0.0.1:$((BASE + 15))"
MESH_DIR="$IOD_STATE_DIR/mesh"
KEEP=""
cleanup() {
	[ -n "$KEEP" ] && kill "$KEEP" 2>/dev/null
	stop_bg
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
    ports: [{name: http, port: 8090}]
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name web --size 16 --unix auto']
  - name: pinned
    type: stateless
    ports: [{name: http, port: 8091}]
    service_mesh: {transport: tcp}
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name pinned --size 16 --unix auto']
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad deploy; finish; }

# registry FIELD of service $1 (python expression over s)
reg() {
	curl -s --max-time 2 "http://$ADMIN/registry" 2>/dev/null | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)
except Exception:
    sys.exit(1)
for s in r["services"]:
    if s["name"] == sys.argv[1]:
        v = eval(sys.argv[2])
        if v is None or v is False:
            sys.exit(1)
        print(v); sys.exit(0)
sys.exit(1)' "$1" "$2"
}
healthy() { reg web 'any(e["healthy"] for e in s["endpoints"])' >/dev/null &&
	reg pinned 'any(e["healthy"] for e in s["endpoints"])' >/dev/null; }
wait_for 30 healthy || { bad "web and pinned healthy in the proxy"; finish; }
WEB=$(reg web 's["address"]')
is_200() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$WEB/x")" = 200 ]; }
wait_for 10 is_200 || { bad "web does not answer 200 through $WEB"; curl -s -i --max-time 5 "http://$WEB/x" | head -5; "$IOD" get replicas; "$IOD" logs web-0 2>&1 | tail -5; ls -la "$MESH_DIR" "$MESH_DIR/ep"; finish; }
# the replicas' restart counts and pids (a live switch must keep both)
replicas() {
	"$IOD" get replicas -o json | python3 -c '
import json, sys
it = json.load(sys.stdin)["items"]
print(sum(i["value"].get("restarts", 0) for i in it), ",".join(sorted(str(i["value"].get("pid")) for i in it)))'
}
R0=$(replicas)
# the proxy's iod_mesh_transport_connections_total for service $1, hop $2, transport $3
conns() {
	curl -s --max-time 2 "http://$ADMIN/metrics" | awk -v k="iod_mesh_transport_connections_total{service=\"$1\",hop=\"$2\",transport=\"$3\"}" '$1 == k {print $2; f=1} END {if (!f) print 0}'
}
# the transport=... of the newest span of web whose client is $1 (a prefix)
last_tp() {
	"$IOD" trace -s web --admin "$ADMIN" 2>/dev/null | grep " $1" | tail -1 | sed -n 's/.*transport=\([a-z-]*\/[a-z-]*\).*/\1/p'
}
upath() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 --unix-socket "$MESH_DIR/web.sock" "http://web/x"; }

# 1. tcp by default (the upstream may be a pooled keep-alive connection:
# its count only has to be there)
c0=$(conns web client tcp)
curl -s -o /dev/null --max-time 5 "http://$WEB/x"
sleep 0.3
tp=$(last_tp 127.0.0.1)
c1=$(conns web client tcp); u1=$(conns web upstream tcp); s1=$(conns web upstream shm)
if [ ! -e "$MESH_DIR/web.sock" ] && [ "$tp" = tcp/tcp ] && [ "$c1" -gt "$c0" ] &&
	[ "$u1" -ge 1 ] && [ "$s1" = 0 ] && [ "$(reg web 's["transport"]')" = tcp ]; then
	ok "transport_tcp_by_default"
else
	bad "transport_tcp_by_default" "socket $(ls "$MESH_DIR" 2>&1), trace '$tp', client tcp $c0 -> $c1, upstream tcp $u1 shm $s1"
fi

# a keep-alive connection opened under tcp: it must finish on tcp after the switch
python3 - "$WEB" "$T/keep.go" "$T/keep.out" <<'PY' &
import http.client, os, sys, time
host, port = sys.argv[1].rsplit(":", 1)
c = http.client.HTTPConnection(host, int(port), timeout=10)
c.request("GET", "/before"); r = c.getresponse(); r.read()
first = r.status
for _ in range(300):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.05)
c.request("GET", "/after"); r = c.getresponse(); r.read()
open(sys.argv[3], "w").write("%d %d\n" % (first, r.status))
PY
KEEP=$!
sleep 0.5

# 2. shm, live
cs0=$(conns web client shm); us0=$(conns web upstream shm)
"$IOD" config set service_mesh.transport shm --wait 2s >"$T/set.log" 2>&1; rc=$?
"$IOD" config status >"$T/status.txt" 2>&1
sock_up() { [ -S "$MESH_DIR/web.sock" ]; }
wait_for 2 sock_up
code=$(upath)
sleep 0.3
tp_shm=$(last_tp unix/)
cs1=$(conns web client shm); us1=$(conns web upstream shm)
touch "$T/keep.go"
wait "$KEEP" 2>/dev/null; KEEP=""
keep=$(cat "$T/keep.out" 2>/dev/null)
tp_keep=$("$IOD" trace -s web --admin "$ADMIN" -o json 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    s = json.loads(l)
    a = {x["key"]: x["value"].get("stringValue") for x in s["attributes"]}
    if a.get("url.path") == "/after":
        print(a.get("iod.transport.client"))')
"$IOD" top --once --view services --mesh "$ADMIN" >"$T/top.txt" 2>&1
top_tp=$(awk '$1 == "web" {for (i = 1; i <= NF; i++) if ($i == "shm" && $(i+1) ~ /^shm=/) {print $i, $(i+1); exit}}' "$T/top.txt")
R1=$(replicas)
if [ $rc = 0 ] && grep -q "^node-1 .* shm " "$T/status.txt" && [ "$code" = 200 ] &&
	[ "$tp_shm" = shm/shm ] && [ "$cs1" -gt "$cs0" ] && [ "$us1" -gt "$us0" ] &&
	[ "$keep" = "200 200" ] && [ "$tp_keep" = tcp ] && [ -n "$top_tp" ] && [ "$R1" = "$R0" ]; then
	ok "transport_shm_live (top: $top_tp)"
else
	bad "transport_shm_live" "rc $rc, unix call $code, trace '$tp_shm', client shm $cs0 -> $cs1, upstream shm $us0 -> $us1, keep-alive '$keep' on '$tp_keep', top '$top_tp', replicas '$R0' -> '$R1'"
	cat "$T/set.log" "$T/status.txt"; grep -i "web\|TRANSPORT" "$T/top.txt"
fi

# 3. the spec's value wins over the cluster's
if [ ! -e "$MESH_DIR/pinned.sock" ] && [ "$(reg pinned 's["transport"]')" = tcp ] &&
	[ "$(reg pinned 's["transport_from"]')" = spec ] && [ "$(reg web 's["transport_from"]')" = config ]; then
	ok "transport_spec_overrides"
else
	bad "transport_spec_overrides" "$(ls "$MESH_DIR" 2>&1); pinned $(reg pinned 's["transport"]') from $(reg pinned 's["transport_from"]')"
fi

# 4. unset: back to tcp for new connections
"$IOD" config unset service_mesh.transport --wait 2s >"$T/unset.log" 2>&1; rc=$?
sock_gone() { [ ! -e "$MESH_DIR/web.sock" ]; }
wait_for 2 sock_gone
u2=$(conns web upstream tcp)
curl -s -o /dev/null --max-time 5 "http://$WEB/y"
sleep 0.3
tp=$(last_tp 127.0.0.1)
u3=$(conns web upstream tcp)
R2=$(replicas)
if [ $rc = 0 ] && sock_gone && [ "$tp" = tcp/tcp ] && [ "$u3" -gt "$u2" ] && [ "$R2" = "$R0" ]; then
	ok "transport_unset_back_to_tcp"
else
	bad "transport_unset_back_to_tcp" "rc $rc, socket $(ls "$MESH_DIR" 2>&1), trace '$tp', upstream tcp $u2 -> $u3, replicas '$R0' -> '$R2'"
fi
finish
