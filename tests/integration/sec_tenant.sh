#!/bin/sh
# sec_tenant.sh BUILD: tenants from the spec (`tenant:`, issue 16 item 7).
# On a secure `iod up` (1 node, sandboxes, node-1's mesh proxy), one spec
# deploys an HTTP service "backend" in tenant blue and two callers that curl
# it through its VIP several times a second: "blue-caller" (tenant blue) and
# "red-caller" (tenant red). One RESULT line per check:
#   1. tenant_in_service_object: the stored Service objects carry the
#      tenants the spec gave them;
#   2. same_tenant_allowed: blue-caller gets 200 (default: allow within a
#      tenant);
#   3. cross_tenant_denied: red-caller gets 403, the proxy's span of it
#      names default-cross-tenant and the caller red/red-caller;
#   4. policy_flips_it: after a Policy "red-may-call" (allow
#      red/red-caller -> blue/backend) is written, red-caller gets 200.
# Callers are known by the uid that owns their socket (per-replica uids).
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
API="127.0.0.1:$((BASE + 10))"
export IOD_SERVER="$API,127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
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
	for f in "$IOD_STATE_DIR"/*.log; do echo "--- $f"; tail -8 "$f"; done
}
admin_curl() { curl -s --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
# the last status code a replica's log shows
last() { l=$(ls "$IOD_STATE_DIR"/node-1/replicas/"$1"-0*/log 2>/dev/null | head -1); [ -n "$l" ] && grep -E '^[0-9]{3}$' "$l" | tail -1; }
is_last() { [ "$(last "$1")" = "$2" ]; }

"$IOD" up --nodes 1 --gpus-per-node 0 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --mesh-port $((BASE + 15)) --election-timeout 1s \
	--heartbeat 100ms >"$T/up.log" 2>&1 || { cat "$T/up.log"; bad "iod up"; echo "RESULT $pass $fail 0"; exit 1; }
cat >"$T/spec.yaml" <<'EOF'
services:
  - name: backend
    type: stateless
    tenant: blue
    ports: [{name: http, port: 8080}]
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name b']
  - name: blue-caller
    type: stateless
    tenant: blue
    depends_on: [backend]
    command: [sh, -c, 'while true; do curl -s -o /dev/null -w "%{http_code}\n" --max-time 2 http://$IOD_SVC_BACKEND_ADDR/x; sleep 0.2; done']
  - name: red-caller
    type: stateless
    tenant: red
    depends_on: [backend]
    command: [sh, -c, 'while true; do curl -s -o /dev/null -w "%{http_code}\n" --max-time 2 http://$IOD_SVC_BACKEND_ADDR/x; sleep 0.2; done']
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; echo "RESULT $pass $fail 0"; exit 1; }

# 1. the Service objects carry the spec's tenants
tenants_stored() {
	"$IOD" get services -o json >"$T/svcs.json" 2>&1
	python3 - "$T/svcs.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
items = d.get("items", d) if isinstance(d, dict) else d
got = {}
for it in items:
    v = it.get("value", it)
    got[it.get("name", v.get("name"))] = v.get("tenant")
want = {"backend": "blue", "blue-caller": "blue", "red-caller": "red"}
sys.exit(0 if all(got.get(k) == t for k, t in want.items()) else 1)
EOF
}
# (a follower may answer before it applied the deploy: wait for it)
if wait_for 10 tenants_stored; then
	ok "tenant_in_service_object"
else
	bad "tenant_in_service_object"; head -c 1500 "$T/svcs.json"
fi

# 2. within a tenant: allowed
if wait_for 30 is_last blue-caller 200; then
	ok "same_tenant_allowed"
else
	bad "same_tenant_allowed (blue-caller $(last blue-caller))"
fi

# 3. across tenants: denied by default, and the span says so
has_span() {
	curl -s --max-time 5 "http://$ADMIN/spans?service=backend" >"$T/spans.json"
	python3 - "$T/spans.json" "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
def spans(x):
    if isinstance(x, dict):
        if "attributes" in x and "spanId" in x:
            yield x
        for v in x.values():
            yield from spans(v)
    elif isinstance(x, list):
        for v in x:
            yield from spans(v)
for s in spans(d):
    a = {k["key"]: list(k["value"].values())[0] for k in s["attributes"]}
    if a.get("iod.policy.denied_by") == sys.argv[3] and a.get("iod.caller") == sys.argv[2] \
            and str(a.get("http.response.status_code")) == "403":
        sys.exit(0)
sys.exit(1)
EOF
}
if wait_for 20 is_last red-caller 403 && sleep 1 && is_last red-caller 403 && is_last blue-caller 200 &&
	has_span red/red-caller default-cross-tenant; then
	ok "cross_tenant_denied"
else
	bad "cross_tenant_denied (red-caller $(last red-caller), blue-caller $(last blue-caller))"
	head -c 1500 "$T/spans.json"
fi

# 4. a Policy allows it
pol='{"name": "red-may-call", "from": "red/red-caller", "to": "blue/backend", "action": "allow"}'
for a in $(echo "$IOD_SERVER" | tr , ' '); do
	code=$(admin_curl -o "$T/pol.out" -w '%{http_code}' -X PUT -d "$pol" "https://$a/v1/policies/red-may-call")
	[ "$code" = 200 ] && break
done
if wait_for 20 is_last red-caller 200; then
	ok "policy_flips_it"
else
	bad "policy_flips_it (red-caller $(last red-caller); PUT $code: $(cat "$T/pol.out"))"
fi
echo "RESULT $pass $fail 0"
exit 0
