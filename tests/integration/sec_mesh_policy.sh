#!/bin/sh
# sec_mesh_policy.sh BUILD: service policies enforced by the receiving proxy
# (issue 16, item 7, first step). On a secure `iod up` (1 node, sandboxes,
# node-1's mesh proxy), an HTTP service "backend" and two callers, "caller"
# and "other", each curl it through its VIP several times a second:
#   1. same_tenant_allowed: with no policy both get 200 (default: allow
#      within a tenant);
#   2. denied_service_gets_403: after a Policy "no-caller" (deny caller ->
#      backend) is written, caller gets 403 naming the policy while other
#      still gets 200;
#   3. deny_in_trace_and_metrics: the proxy's /spans has the refused call
#      with iod.policy.denied_by = no-caller and iod.caller = default/caller,
#      and iod_mesh_denied_total{service="backend"} counts it;
#   4. policy_removed_allows_again: deleting the Policy gives caller 200;
#   and viz_edge_rates_from_spans: `iod viz net-topology --live --mesh`
#   gives the caller->backend and other->backend edges their own req/s.
#   5. revoked_service_denied: `iod revoke service default/caller`: its own
#      node's proxy refuses caller (403, policy "revoked") while other still
#      gets 200; `iod revoke --undo` gives caller 200 again.
# The caller is known by the uid that owns its socket (each replica runs
# under its own uid, reported on its Endpoint). Prints one RESULT line per check.
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
need python3 curl
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
	stop_cluster
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

on_bad() {
	for f in "$IOD_STATE_DIR"/*.log; do echo "--- $f"; tail -8 "$f"; done
}
admin_curl() { curl -s --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
# the last status code a replica's log shows
last() { l=$(ls "$IOD_STATE_DIR"/node-1/replicas/"$1"-0*/log 2>/dev/null | head -1); [ -n "$l" ] && grep -E '^[0-9]{3}$' "$l" | tail -1; }
is_last() { [ "$(last "$1")" = "$2" ]; }

start_cluster "$T/up.log" --nodes 1 --gpus-per-node 0 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --mesh-port $((BASE + 15)) --election-timeout 1s \
	--heartbeat 100ms || exit 1
cat >"$T/spec.yaml" <<'EOF'
services:
  - name: backend
    type: stateless
    ports: [{name: http, port: 8080}]
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name b']
  - name: caller
    type: stateless
    depends_on: [backend]
    command: [sh, -c, 'while true; do curl -s -o /dev/null -w "%{http_code}\n" --max-time 2 http://$IOD_SVC_BACKEND_ADDR/x; sleep 0.2; done']
  - name: other
    type: stateless
    depends_on: [backend]
    command: [sh, -c, 'while true; do curl -s -o /dev/null -w "%{http_code}\n" --max-time 2 http://$IOD_SVC_BACKEND_ADDR/x; sleep 0.2; done']
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }

# 1. within a tenant: allowed
if wait_for 30 is_last caller 200 && wait_for 10 is_last other 200; then
	ok "same_tenant_allowed"
else
	bad "same_tenant_allowed (caller $(last caller), other $(last other))"
	"$IOD" get endpoints -o json | head -40
fi

# 1b. the live view gives each dependency edge its own calls, from the
# proxy's spans (caller -> callee, docs/observability.md)
VIEW="127.0.0.1:$((BASE + 90))" # +40.. are the mesh's mTLS ports
"$IOD" viz net-topology --live --listen "$VIEW" --mesh "$ADMIN" --refresh 200ms >"$T/view.log" 2>&1 &
VIEWPID=$!
bg_adopt "$VIEWPID"
edge_rps() {
	curl -s --max-time 2 "http://$VIEW/graph.json" | python3 -c "
import json, sys
g = json.load(sys.stdin)
e = {e['id']: e for e in g['edges']}
a, b = e.get('depends:svc:caller>svc:backend', {}), e.get('depends:svc:other>svc:backend', {})
print('%.1f %.1f %s' % (a.get('rps', -1), b.get('rps', -1), a.get('label', '')))" 2>/dev/null
}
# ~5 calls/s each (a curl every 0.2 s): each edge between 1 and 10
rated() { edge_rps | awk '$1 >= 1 && $1 <= 10 && $2 >= 1 && $2 <= 10 { ok = 1 } END { exit !ok }'; }
if wait_for 15 rated; then
	ok "viz_edge_rates_from_spans (caller>backend, other>backend: $(edge_rps))"
else
	bad "viz_edge_rates_from_spans ($(edge_rps))"; tail -5 "$T/view.log"
fi
kill "$VIEWPID" 2>/dev/null

# 2. a deny policy
pol='{"name": "no-caller", "from": "caller", "to": "backend", "action": "deny"}'
code=$(admin_curl -o "$T/pol.out" -w '%{http_code}' -X PUT -d "$pol" "https://$API/v1/policies/no-caller")
[ "$code" = 200 ] || { cat "$T/pol.out"; for a in $(echo "$IOD_SERVER" | tr , ' '); do admin_curl -o /dev/null -X PUT -d "$pol" "https://$a/v1/policies/no-caller"; done; }
if wait_for 20 is_last caller 403 && sleep 1 && is_last caller 403 && is_last other 200; then
	ok "denied_service_gets_403"
else
	bad "denied_service_gets_403 (caller $(last caller), other $(last other))"
fi

# 3. the deny is in the trace and the metrics
curl -s --max-time 5 "http://$ADMIN/spans?service=backend" >"$T/spans.json"
curl -s --max-time 5 "http://$ADMIN/metrics" >"$T/metrics.txt"
denied=$(sed -n 's/^iod_mesh_denied_total{service="backend"} //p' "$T/metrics.txt")
if python3 - "$T/spans.json" <<'EOF' && [ "${denied:-0}" -gt 0 ]; then
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
    if a.get("iod.policy.denied_by") == "no-caller" and a.get("iod.caller") == "default/caller" \
            and str(a.get("http.response.status_code")) == "403":
        sys.exit(0)
sys.exit(1)
EOF
	ok "deny_in_trace_and_metrics (iod_mesh_denied_total $denied)"
else
	bad "deny_in_trace_and_metrics (denied_total ${denied:-none})"; head -c 1500 "$T/spans.json"
fi

# 4. the policy goes: allowed again
for a in $(echo "$IOD_SERVER" | tr , ' '); do admin_curl -o /dev/null -X DELETE "https://$a/v1/policies/no-caller"; done
if wait_for 20 is_last caller 200; then
	ok "policy_removed_allows_again"
else
	bad "policy_removed_allows_again (caller $(last caller))"
fi

# 5. a revoked service calls no one, even on its own node
"$IOD" revoke service default/caller >"$T/revoke.out" 2>&1
if wait_for 20 is_last caller 403 && sleep 1 && is_last caller 403 && is_last other 200; then
	"$IOD" revoke --undo service default/caller >>"$T/revoke.out" 2>&1
	if wait_for 20 is_last caller 200; then
		ok "revoked_service_denied"
	else
		bad "revoked_service_denied (after --undo caller $(last caller); $(cat "$T/revoke.out"))"
	fi
else
	bad "revoked_service_denied (caller $(last caller), other $(last other); $(cat "$T/revoke.out"))"
	"$IOD" revoke --undo service default/caller >/dev/null 2>&1
fi
exit 0
