#!/bin/sh
# mesh_mtls_up.sh BUILD: proxy-to-proxy mutual TLS on by default in
# `iod up` (issue 16 items 1 and 2), with no certificate command run by hand.
# A secure `iod up --nodes 2 --svid-ttl 15s`: node-1's proxy serves the VIPs
# (the nodes share loopback), node-2's proxy only its mTLS listener. node-1
# is cordoned, so the backend ("web", HTTP, and "raw", TCP: every connection
# a new mTLS session) and the callers run on node-2, and every call goes
# caller -> node-1's proxy -> mTLS -> node-2's proxy -> backend. One RESULT
# line for:
#   node_objects_name_mtls  both Node objects carry their proxy's listener
#                           ("mesh_mtls"), which is how node-1's proxy finds
#                           node-2's (no flag names it)
#   svids_issued_by_agents  STATE/svid/blue/{web,raw,caller}.crt exist, 0600
#                           in a 0700 directory, with the SVID
#                           spiffe://local/ns/blue/svc/caller, issued for 15 s
#   calls_over_mtls         the caller gets 200 from web and raw; node-1's
#                           proxy counts outbound mTLS handshakes and
#                           node-2's endpoints serve the requests
#   red_denied              red/intruder (tenant red) gets 403 from web
#   rotation_under_load     for 22 s (two SVID renewals: at 2/3 of a
#                           15 s life, every ~10 s) the caller replica and 4 host
#                           threads (keep-alive and new-connection requests)
#                           call web and raw: 0 failed requests, while the
#                           caller's SVID serial changes and node-1's proxy
#                           swaps certificates in (iod_mesh_mtls_rotations_total)
#   svid_names_its_node     the caller's SVID carries the node it was issued
#                           to (its OU: node-2, whose agent asked for it)
#   revoked_service_refused `iod revoke service blue/caller`: node-2's proxy
#                           refuses the caller's SVID (its calls stop getting
#                           200), the host's calls (node-1's certificate) still get
#                           200; `iod revoke --undo` gives the caller 200 again
#   stale_svid_removed      `iod delete service intruder`: node-2's agent
#                           removes red/intruder.crt/.key; web's pair stays
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl needed"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: caller identities need per-replica uids (a root agent)"; exit 77; }

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
unset IOD_TOKEN IOD_CA IOD_CERT IOD_KEY IOD_CONFIG IOD_CONTEXT
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
export IOD_SERVER="127.0.0.1:$((BASE + 10)),127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
ADMIN="127.0.0.1:$((BASE + 15))"
PKI="$IOD_STATE_DIR/pki"
cleanup() {
	"$IOD" down --grace 5s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

pass=0 fail=0
ok() { echo "ok   $1 (t=$(($(date +%s) - T0))s)"; pass=$((pass + 1)); }
bad() {
	echo "FAIL $1"
	fail=$((fail + 1))
	for f in "$IOD_STATE_DIR"/node-*.log; do echo "--- $f"; grep -v "^.*debug" "$f" | tail -8; done
}
admin_curl() { curl -s --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
metric() { curl -s --max-time 5 "http://$ADMIN/metrics" | sed -n "s/^$1 \([0-9]*\).*/\1/p"; }

"$IOD" up --nodes 2 --gpus-per-node 0 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --mesh-port $((BASE + 15)) --mesh-mtls-port $((BASE + 40)) \
	--telemetry-port 0 --svid-ttl "${MESH_MTLS_UP_SVID_TTL:-15s}" --election-timeout 1s --heartbeat 100ms \
	>"$T/up.log" 2>&1 || { cat "$T/up.log"; bad "iod up"; echo "RESULT $pass $fail 0"; exit 1; }

# 1. the Node objects name their proxies' listeners
nodes_named() {
	"$IOD" get nodes -o json >"$T/nodes.json" 2>&1
	python3 - "$T/nodes.json" "$BASE" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
base = int(sys.argv[2])
got = {it["name"]: it["value"].get("mesh_mtls") for it in d.get("items", d)}
want = {"node-1": "127.0.0.1:%d" % (base + 40), "node-2": "127.0.0.1:%d" % (base + 41)}
sys.exit(0 if got == want else 1)
EOF
}
if wait_for 10 nodes_named; then
	ok node_objects_name_mtls
else
	bad "node_objects_name_mtls ($(head -c 600 "$T/nodes.json"))"
fi

# node-1 takes no new replicas: everything runs on node-2, behind its proxy
for a in $(echo "$IOD_SERVER" | tr , ' '); do
	admin_curl "https://$a/v1/nodes/node-1" >"$T/n1.json" && [ -s "$T/n1.json" ] && break
done
python3 - "$T/n1.json" >"$T/n1.put" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
v = d.get("value", d)
v["cordoned"] = True
print(json.dumps(v))
EOF
for a in $(echo "$IOD_SERVER" | tr , ' '); do
	code=$(admin_curl -o /dev/null -w '%{http_code}' -X PUT --data-binary @"$T/n1.put" "https://$a/v1/nodes/node-1")
	[ "$code" = 200 ] && break
done
cat >"$T/spec.yaml" <<'EOF'
services:
  - name: web
    type: stateless
    tenant: blue
    ports: [{name: http, port: 8080}]
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name web --size 64']
  - name: raw
    type: stateless
    tenant: blue
    ports: [{name: tcp, port: 8081}]
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name raw --size 64']
  - name: caller
    type: stateless
    tenant: blue
    depends_on: [web, raw]
    command: [sh, -c, 'while true; do curl -s -o /dev/null -w "web %{http_code} %{time_total}\n" --max-time 2 http://$IOD_SVC_WEB_ADDR/x; curl -s -o /dev/null -w "raw %{http_code} %{time_total} %{time_connect} %{time_starttransfer}\n" --max-time 2 http://$IOD_SVC_RAW_ADDR/x; date +%s.%N; sleep 0.05; done']
  - name: intruder
    type: stateless
    tenant: red
    depends_on: [web]
    command: [sh, -c, 'while true; do curl -s -o /dev/null -w "web %{http_code}\n" --max-time 2 http://$IOD_SVC_WEB_ADDR/x; sleep 0.3; done']
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; echo "RESULT $pass $fail 0"; exit 1; }
if grep -q "node-1" "$T/deploy.log"; then
	bad "placement (node-1 is cordoned: $(grep node-1 "$T/deploy.log" | head -2))"
fi
log() { ls "$IOD_STATE_DIR"/node-2/replicas/"$1"-0*/log 2>/dev/null | head -1; }
last() { l=$(log "$1"); [ -n "$l" ] && grep "^$2 " "$l" | tail -1 | cut -d' ' -f2; }
call_lines() { grep -E '^(web|raw) ' "$@"; }
is_last() { [ "$(last "$1" "$2")" = "$3" ]; }

# 2. the agents issued the SVIDs themselves
S="$IOD_STATE_DIR/svid"
svids() { [ -s "$S/blue/web.crt" ] && [ -s "$S/blue/raw.crt" ] && [ -s "$S/blue/caller.crt" ] && [ -s "$S/red/intruder.crt" ]; }
serial() { "$IOD" cert show "$S/blue/caller.crt" -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["serial"])'; }
if wait_for 30 svids && [ "$(stat -c %a "$S")" = 700 ] && [ "$(stat -c %a "$S/blue/caller.key")" = 600 ] &&
	"$IOD" cert show "$S/blue/caller.crt" -o json >"$T/svid.json" 2>&1 &&
	grep -q 'spiffe://local/ns/blue/svc/caller' "$T/svid.json" &&
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["not_after"]-d["not_before"] <= 15+60 else 1)' "$T/svid.json"; then
	ok svids_issued_by_agents
else
	bad "svids_issued_by_agents ($(ls -lR "$S" 2>&1 | head -12); $(cat "$T/svid.json" 2>/dev/null))"
fi

# 3. calls go over mTLS to node-2's proxy
if wait_for 30 is_last caller web 200 && wait_for 10 is_last caller raw 200 &&
	[ "$(metric 'iod_mesh_mtls_handshakes_total{direction="out"}')" -gt 0 ]; then
	ok "calls_over_mtls (handshakes out $(metric 'iod_mesh_mtls_handshakes_total{direction="out"}'))"
else
	bad "calls_over_mtls (caller web $(last caller web) raw $(last caller raw))"
	curl -s "http://$ADMIN/metrics" | grep -E "mtls|endpoint_requests" | head
fi

# 4. the red tenant's caller is refused
if wait_for 20 is_last intruder web 403; then
	ok red_denied
else
	bad "red_denied (intruder $(last intruder web))"
fi

# 5. rotation under load: no failed request
cat >"$T/load.py" <<'EOF'
import http.client, socket, sys, threading, time
web, raw, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
ok = [0]; bad = []
lock = threading.Lock()
def keepalive(addr):
    h, p = addr.split(":")
    c = None
    end = time.time() + secs
    while time.time() < end:
        try:
            if c is None:
                c = http.client.HTTPConnection(h, int(p), timeout=3)
            c.request("GET", "/k")
            r = c.getresponse(); r.read()
            with lock:
                if r.status == 200: ok[0] += 1
                else: bad.append("ka %d" % r.status)
        except Exception as e:
            with lock: bad.append("ka %r" % e)
            c = None
def fresh(addr):
    h, p = addr.split(":")
    end = time.time() + secs
    while time.time() < end:
        try:
            c = http.client.HTTPConnection(h, int(p), timeout=3)
            c.request("GET", "/n", headers={"Connection": "close"})
            r = c.getresponse(); r.read(); c.close()
            with lock:
                if r.status == 200: ok[0] += 1
                else: bad.append("new %d" % r.status)
        except Exception as e:
            with lock: bad.append("new %r" % e)
ts = [threading.Thread(target=f, args=(a,)) for f, a in
      ((keepalive, web), (fresh, web), (keepalive, raw), (fresh, raw))]
for t in ts: t.start()
for t in ts: t.join()
print("ok %d bad %d %s" % (ok[0], len(bad), "; ".join(bad[:5])))
EOF
# the VIPs, from node-1's proxy
curl -s --max-time 5 "http://$ADMIN/registry" >"$T/reg.json"
VIPS=$(python3 - "$T/reg.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
svcs = d.get("services", d)
def addr(n):
    for s in svcs:
        if s.get("name") == n:
            return s["address"]
print(addr("web"), addr("raw"))
EOF
)
set -- $VIPS
s0=$(serial)
r0=$(metric iod_mesh_mtls_rotations_total)
l=$(log caller)
c0=$(wc -l <"$l")
python3 "$T/load.py" "$1" "$2" 22 >"$T/load.out" 2>&1
c1=$(wc -l <"$l")
s1=$(serial)
r1=$(metric iod_mesh_mtls_rotations_total)
tail -n +"$((c0 + 1))" "$l" | head -n "$((c1 - c0))" | call_lines >"$T/replica.calls"
replica_n=$(wc -l <"$T/replica.calls")
replica_bad=$(grep -vc '^[a-z]* 200 ' "$T/replica.calls")
if grep -q "^ok [1-9][0-9]* bad 0 " "$T/load.out" && [ "$replica_bad" = 0 ] && [ "$replica_n" -gt 50 ] &&
	[ -n "$s0" ] && [ "$s0" != "$s1" ] && [ "${r1:-0}" -ge $((${r0:-0} + 2)) ]; then
	ok "rotation_under_load (host: $(cut -d' ' -f1-4 "$T/load.out"), caller replica: $replica_n calls 0 failed, rotations $r0 -> $r1, caller serial $s0 -> $s1)"
else
	bad "rotation_under_load (host: $(cat "$T/load.out"); replica: $replica_n calls, $replica_bad failed: $(grep -v '^[a-z]* 200 ' "$T/replica.calls" | tr '\n' ' '); rotations $r0 -> $r1; serial $s0 -> $s1)"
fi
# 6. the SVID names the node it was issued to
if "$IOD" cert show "$S/blue/caller.crt" -o json 2>/dev/null | grep -q '"node": "node-2"'; then
	ok svid_names_its_node
else
	bad "svid_names_its_node ($("$IOD" cert show "$S/blue/caller.crt" -o json 2>&1 | head -c 400))"
fi

# 7. a revoked service's SVID is refused by the receiving proxy
not_last() { l=$(log "$1"); [ -n "$l" ] && [ "$(grep "^$2 " "$l" | tail -1 | cut -d' ' -f2)" != "$3" ]; }
"$IOD" revoke service blue/caller --reason test >"$T/revoke.out" 2>&1
if wait_for 10 not_last caller web 200; then
	refused=$(last caller web)
	host=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://$1/h")
	"$IOD" revoke --undo service blue/caller >>"$T/revoke.out" 2>&1
	if [ "$host" = 200 ] && wait_for 15 is_last caller web 200; then
		ok "revoked_service_refused (caller: $refused, host 200; undone: 200)"
	else
		bad "revoked_service_refused (host $host; after --undo the caller has $(last caller web); $(cat "$T/revoke.out"))"
	fi
else
	bad "revoked_service_refused (the caller still gets $(last caller web); $(cat "$T/revoke.out"))"
	"$IOD" revoke --undo service blue/caller >/dev/null 2>&1
fi

# 8. a service that leaves the node leaves no SVID behind
"$IOD" delete service intruder >"$T/del.out" 2>&1
gone() { [ ! -e "$S/red/intruder.crt" ] && [ ! -e "$S/red/intruder.key" ]; }
if wait_for 30 gone && [ -s "$S/blue/web.crt" ]; then # (its pair stays IOD_AGENT_SVID_INUSE_S, 10 s, after its last use)
	ok stale_svid_removed
else
	bad "stale_svid_removed ($(cat "$T/del.out"); $(ls -l "$S/red" "$S/blue" 2>&1 | tr '\n' ' '))"
fi
echo "RESULT $pass $fail 0"
exit 0
