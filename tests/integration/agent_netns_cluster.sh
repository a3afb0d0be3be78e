#!/bin/sh
# agent_netns_cluster.sh BUILD: per-replica network namespaces under the
# control plane, as root: one server and one agent (`iod agent --server ...
# --netns-subnet CIDR --no-mesh`); deploy a parameter server with a TCP
# health check and a worker that depends on it. Checks that the server's
# Endpoint and Replica carry its netns (veth) address and it is healthy
# (the agent's check reaches it there), that the worker found it at that
# address in IOD_DEP_PARAMETER_SERVER and trains over TCP, and that after
# the agent stops no netns, veth or bridge is left. Exit 0 pass, 77 skip.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: per-replica network namespaces need root"; exit 77; }
command -v ip >/dev/null || { echo "skip: ip (iproute2) not installed"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 needed to read JSON"; exit 77; }
ip netns add "iodprobe$$" 2>/dev/null || { echo "skip: cannot create network namespaces here"; exit 77; }
ip netns del "iodprobe$$"

T=$(mktemp -d)
NODE="nc$$"
SUBNET="10.$((100 + ($$ + 7) % 100)).$((($$ + 7) / 100 % 256)).0/24"
BASE=$((13000 + ($$ % 400) * 20))
export IOD_SERVER="127.0.0.1:$((BASE + 1))"
SPID= APID= TAG=
cleanup() {
	[ -n "$APID" ] && kill "$APID" 2>/dev/null && wait "$APID" 2>/dev/null
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
	if [ -n "$TAG" ]; then
		for n in $(ip netns 2>/dev/null | awk '{print $1}' | grep "^iod-$TAG-"); do
			ip netns del "$n"
		done
		ip link del "iodb$TAG" 2>/dev/null
	fi
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
fail() { echo "FAIL: $*"; tail -15 "$T/agent.log"; tail -5 "$T/server.log"; exit 1; }
. "$(dirname "$0")/lib.sh"

"$IOD" server --id 1 --data-dir "$T/s" --raft "127.0.0.1:$BASE" --api "$IOD_SERVER" \
	>"$T/server.log" 2>&1 &
SPID=$!
"$IOD" agent --server "$IOD_SERVER" --name "$NODE" --data-dir "$T/a" --gpus 0 --no-mesh \
	--netns-subnet "$SUBNET" --lease-ttl 2s --stop-grace 2s >"$T/agent.log" 2>&1 &
APID=$!
bridge_up() { grep -q "per-replica network namespaces on" "$T/agent.log"; }
wait_for 10 bridge_up || fail "no bridge: per-replica network namespaces not set up"
TAG=$(sed -n 's/.*bridge iodb\([0-9a-f]*\),.*/\1/p' "$T/agent.log" | head -1)
registered() { "$IOD" get nodes 2>/dev/null | grep -q "$NODE"; }
wait_for 30 registered || fail "node $NODE never registered"

cat >"$T/spec.yaml" <<YAML
services:
  - name: parameter-server
    type: stateless
    replicas: 1
    command: iod demo-worker --role parameter-server --params 16
    health: {tcp: 1, interval: 200ms, timeout: 150ms}
  - name: worker
    type: stateless
    replicas: 1
    command: iod demo-worker --role worker --compute-ms 1
    depends_on: [parameter-server]
YAML
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.out" 2>&1 || fail "deploy: $(cat "$T/deploy.out")"

# endpoint NAME: "addr:port healthy" of a replica's Endpoint
endpoint() {
	"$IOD" get endpoints -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$1':
        v = i['value']
        print('%s:%s' % (v['addr'], v['port']) if 'addr' in v else '', v.get('healthy', False))
"
}
NET=${SUBNET%.0/24}
ps_healthy() { endpoint parameter-server-0 | grep -q "^$NET\.[0-9]*:[0-9]* True$"; }
wait_for 30 ps_healthy || fail "parameter-server-0's endpoint never healthy at a $SUBNET address: '$(endpoint parameter-server-0)'"
EP=$(endpoint parameter-server-0 | cut -d' ' -f1)
ADDR=$("$IOD" get replicas -o json | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == 'parameter-server-0':
        print(i['value'].get('addr', ''))
")
[ "${EP%:*}" = "$ADDR" ] || fail "Replica addr '$ADDR' is not the endpoint's host '${EP%:*}'"
ip netns | grep -q "^iod-$TAG-parameter-server-0" || fail "no netns for parameter-server-0"
trains() { "$IOD" logs worker-0 --data-dir "$T/a" 2>/dev/null | grep -q "steps/s"; }
wait_for 30 trains || fail "worker-0 never trained: $("$IOD" logs worker-0 --data-dir "$T/a" 2>&1 | tail -3)"
"$IOD" logs worker-0 --data-dir "$T/a" | grep -q "parameter servers ($EP)" ||
	fail "worker-0 did not reach the server at $EP: $("$IOD" logs worker-0 --data-dir "$T/a" | head -2)"
kill "$APID"
wait "$APID"
rc=$?
APID=
[ $rc -eq 0 ] || fail "agent exit status $rc"
left=$(ip netns | grep "iod-$TAG-"; ip -o link | grep -e "iodb$TAG" -e "iv$(echo "$TAG" | cut -c3-)")
[ -z "$left" ] || fail "left behind after stop: $left"
TAG=
echo "ok   agent_netns_cluster (parameter-server-0 at $EP)"
exit 0
