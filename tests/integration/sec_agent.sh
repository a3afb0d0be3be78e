#!/bin/sh
# sec_agent.sh BUILD: agent bootstrap with a join token (issue 16, item 4).
# On a secure `iod up` (1 node with a GPU), a second agent "joiner" with no
# certificate joins with `iod token create --role node --ttl 1h`:
#   1. join_token_buys_a_node_cert: it registers; its data dir holds a node
#      certificate for spiffe://local/node/joiner and a 0600 key;
#   2. join_token_buys_nothing_else: the token itself reads and deploys nothing (403);
#   3. rotates_without_restart: with --cert-ttl 12s its certificate is
#      renewed (a new serial) by the same process, which keeps its lease;
#   4. agent_cannot_write_other_nodes_replica: with joiner's certificate, a
#      PUT of node-1's replica, of node-1's Node and of an Endpoint naming
#      node-1's replica get 403;
#   5. revoked_node_refused: after `iod revoke node joiner` its certificate
#      gets 401, its lease lapses, and the join token cannot buy that name
#      a new certificate.
# Prints one RESULT line per check.
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
need python3 curl

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
unset IOD_TOKEN IOD_CA IOD_CERT IOD_KEY IOD_CONFIG IOD_CONTEXT
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
API="127.0.0.1:$((BASE + 10))"
export IOD_SERVER="$API,127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
PKI="$IOD_STATE_DIR/pki"
JPID=""
cleanup() {
	[ -n "$JPID" ] && kill "$JPID" 2>/dev/null && wait "$JPID" 2>/dev/null
	stop_cluster
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

on_bad() {
	for f in "$IOD_STATE_DIR"/*.log "$T"/joiner.log; do echo "--- $f"; tail -8 "$f"; done
}
J="$T/joiner"
# as joiner: its own certificate, against each server until one answers
as_joiner() { curl -s -o "$T/body" -w '%{http_code}' --max-time 5 --cacert "$PKI/ca.crt" \
	--cert "$J/node.crt" --key "$J/node.key" "$@"; }
node_lease() {
	"$IOD" get nodes -o json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(next((str(i.get('lease', 0)) for i in d.get('items', []) if i['name'] == '$1'), ''))"
}
registered() { l=$(node_lease "$1"); [ -n "$l" ] && [ "$l" != 0 ]; }
serial() { "$IOD" cert show "$J/node.crt" -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["serial"])'; }

start_cluster "$T/up.log" --nodes 1 --gpus-per-node 1 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --election-timeout 1s --heartbeat 100ms --no-mesh || exit 1
tok=$("$IOD" token create --role node --ttl 1h -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')

# 1. join
"$IOD" agent --server "$IOD_SERVER" --name joiner --join-token "$tok" --ca "$PKI/ca.crt" \
	--data-dir "$J" --gpus 0 --no-mesh --lease-ttl 2s --cert-ttl 12s >"$T/joiner.log" 2>&1 &
JPID=$!
who=$("$IOD" cert show "$J/node.crt" -o json 2>/dev/null)
if wait_for 20 registered joiner && [ "$(stat -c %a "$J/node.key")" = 600 ] &&
	"$IOD" cert show "$J/node.crt" -o json | grep -q 'spiffe://local/node/joiner'; then
	ok "join_token_buys_a_node_cert"
else
	bad "join_token_buys_a_node_cert"; echo "$who"; cat "$T/joiner.log"
fi

# 2. the token is good for nothing else
for a in $(echo "$IOD_SERVER" | tr , ' '); do # a follower may not know the token yet (503)
	t1=$(curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "https://$a/v1/nodes")
	t2=$(curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" -X POST -d x "https://$a/v1/deploy")
	[ "$t1" != 503 ] && [ "$t2" != 503 ] && break
done
if [ "$t1 $t2" = "403 403" ]; then ok "join_token_buys_nothing_else"; else bad "join_token_buys_nothing_else ($t1 $t2)"; fi

# 3. rotation in place
s0=$(serial)
rotated() { s=$(serial); [ -n "$s" ] && [ "$s" != "$s0" ]; }
if wait_for 20 rotated && sleep 3 && kill -0 "$JPID" 2>/dev/null && registered joiner &&
	grep -q "certificate renewed" "$T/joiner.log" && [ "$(as_joiner "https://$API/v1/nodes")" = 200 ]; then
	ok "rotates_without_restart (serial $s0 -> $(serial), pid $JPID)"
else
	bad "rotates_without_restart (serial $s0 -> $(serial))"; tail -5 "$T/joiner.log"
fi

# 4. joiner may not touch node-1's objects
cat >"$T/gpu.yaml" <<'EOF'
services:
  - name: gpu
    type: stateless
    resources: {gpu: 1}
    command: [sleep, '600']
EOF
"$IOD" deploy -f "$T/gpu.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; }
# a server that answers the read may not have applied the deploy yet
placed() { "$IOD" get replicas -o json 2>/dev/null | grep -q '"name": "gpu-0"'; }
wait_for 10 placed
val=$("$IOD" get replicas -o json | python3 -c "
import json, sys
d = json.load(sys.stdin)
v = next(i['value'] for i in d['items'] if i['name'] == 'gpu-0')
v['phase'] = 'failed'
print(json.dumps(v))")
ep='{"service":"gpu","replica":"gpu-0","node":"node-1","addr":"127.0.0.1","port":1}'
w1="" ; w2="" ; w3=""
for a in $(echo "$IOD_SERVER" | tr , ' '); do
	w1=$(as_joiner -X PUT -d "$val" "https://$a/v1/replicas/gpu-0"); grep -q "node-1" "$T/body" || w1="$w1?"
	w2=$(as_joiner -X PUT -d '{"addr":"10.9.9.9"}' "https://$a/v1/nodes/node-1")
	w3=$(as_joiner -X PUT -d "$ep" "https://$a/v1/endpoints/gpu-0")
	[ "$w1" != 503 ] && break
done
if [ "$w1 $w2 $w3" = "403 403 403" ] && echo "$val" | grep -q '"node": "node-1"'; then
	ok "agent_cannot_write_other_nodes_replica"
else
	bad "agent_cannot_write_other_nodes_replica ($w1 $w2 $w3; $val)"; cat "$T/body"
fi

# 5. revocation
"$IOD" revoke node joiner >"$T/revoke.log" 2>&1 || { cat "$T/revoke.log"; bad "revoke"; }
# every server refuses it once it has applied the revocation
refused() {
	for a in $(echo "$IOD_SERVER" | tr , ' '); do
		[ "$(as_joiner "https://$a/v1/nodes")" = 401 ] || return 1
	done
}
lapsed() { ! registered joiner; }
rejoin=0
wait_for 10 refused && wait_for 15 lapsed
"$IOD" agent --server "$IOD_SERVER" --name joiner --join-token "$tok" --ca "$PKI/ca.crt" \
	--data-dir "$T/joiner2" --gpus 0 --no-mesh --run-for 5s >"$T/rejoin.log" 2>&1 || rejoin=$?
if refused && lapsed && [ "$rejoin" != 0 ] && grep -q revoked "$T/rejoin.log"; then
	ok "revoked_node_refused (rejoin exit $rejoin)"
else
	bad "revoked_node_refused (lease $(node_lease joiner), rejoin exit $rejoin)"; cat "$T/rejoin.log" "$T/deploy.log"
fi
exit 0
