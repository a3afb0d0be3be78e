#!/bin/sh
# agent_netns.sh BUILD: per-replica network namespaces (`iod agent
# --netns-subnet`), as root: two replicas, each in its own netns with a veth
# pair and an address from the node's subnet, talk TCP to each other at
# those addresses (a demo worker pulls and pushes parameters to a parameter
# server); the agent's HTTP health check reaches the server at its address;
# a killed replica comes back with the same address; after the agent stops
# no netns, veth or bridge is left. Exit 0 pass, 77 skip, else fail.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: per-replica network namespaces need root"; exit 77; }
command -v ip >/dev/null || { echo "skip: ip (iproute2) not installed"; exit 77; }
ip netns add "iodprobe$$" 2>/dev/null || { echo "skip: cannot create network namespaces here"; exit 77; }
ip netns del "iodprobe$$"

T=$(mktemp -d)
NODE="nt$$"
# a subnet of its own per run: two runs at once must not share one
SUBNET="10.$((100 + $$ % 100)).$(($$ / 100 % 256)).0/24"
PORT=$((21000 + ($$ % 400) * 20))
APID=
TAG=
cleanup() {
	[ -n "$APID" ] && kill "$APID" 2>/dev/null && wait "$APID" 2>/dev/null
	if [ -n "$TAG" ]; then # only if the agent did not clean up (the test then failed)
		for n in $(ip netns 2>/dev/null | awk '{print $1}' | grep "^iod-$TAG-"); do
			ip netns del "$n"
		done
		ip link del "iodb$TAG" 2>/dev/null
	fi
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
fail() { echo "FAIL: $*"; tail -20 "$T/agent.log"; exit 1; }

cat >"$T/m.json" <<JSON
{"replicas": [
  {"name": "ps-0", "service": "ps", "port": $PORT,
   "command": ["iod", "demo-worker", "--role", "parameter-server", "--params", "16",
               "--http-port", "$((PORT + 1))"],
   "health": {"kind": "http", "port": $((PORT + 1)), "path": "/healthz",
              "interval_ms": 50, "timeout_ms": 1000}},
  {"name": "w-0", "service": "w", "port": $((PORT + 2)), "type": "stateful",
   "command": ["/bin/sh", "-c",
     "ip -4 -o addr show eth0; while [ ! -s \$IOD_DATA_DIR/ps.addr ]; do sleep 0.1; done; exec \$IOD_BIN demo-worker --role worker --servers \$(cat \$IOD_DATA_DIR/ps.addr) --compute-ms 1"]}
]}
JSON
"$IOD" agent --name "$NODE" --data-dir "$T/d" --manifest "$T/m.json" --netns-subnet "$SUBNET" \
	--stop-grace 2s --backoff 50ms >"$T/agent.log" 2>&1 &
APID=$!

. "$(dirname "$0")/lib.sh"
bridge_up() { grep -q "per-replica network namespaces on" "$T/agent.log"; }
wait_for 10 bridge_up || fail "no bridge: per-replica network namespaces not set up"
TAG=$(sed -n 's/.*bridge iodb\([0-9a-f]*\),.*/\1/p' "$T/agent.log" | head -1)
[ -n "$TAG" ] || fail "bridge name not in the agent's log"
# status.json: "addr" of a replica
# one line per replica (the nested health and sandbox objects removed)
status() { tr -d ' \n' <"$T/d/status.json" 2>/dev/null | sed 's/"health":{[^}]*}//g; s/"sandbox":{[^}]*}//g' | tr '{' '\n'; }
addr_of() { status | grep "\"name\":\"$1\"" |
	sed -n 's/.*"addr":"\([0-9.]*\)".*/\1/p'; }
ps_healthy() { "$IOD" events --data-dir "$T/d" 2>/dev/null | grep -q "ps-0 *healthy *ready"; }
wait_for 30 ps_healthy || fail "ps-0 never healthy (the agent's check must reach its netns address)"
PS_ADDR=$(addr_of ps-0)
W_ADDR=$(addr_of w-0)
NET=${SUBNET%.0/24}
case "$PS_ADDR" in "$NET".*) ;; *) fail "ps-0 address '$PS_ADDR' not in $SUBNET" ;; esac
case "$W_ADDR" in "$NET".*) ;; *) fail "w-0 address '$W_ADDR' not in $SUBNET" ;; esac
[ "$PS_ADDR" != "$W_ADDR" ] || fail "both replicas got $PS_ADDR"
# each replica sees only its own eth0 with its address, in its own netns
ip netns | grep -q "^iod-$TAG-ps-0" || fail "no netns iod-$TAG-ps-0"
ip -n "iod-$TAG-ps-0" -4 -o addr show eth0 | grep -q "$PS_ADDR/24" || fail "ps-0's eth0 lacks $PS_ADDR"
ip -n "iod-$TAG-ps-0" route | grep -q "default via $NET.1" || fail "ps-0 has no default route via $NET.1"
ip link show master "iodb$TAG" | grep -c "iv" | grep -q 2 || fail "two veths on the bridge expected"
# the worker talks TCP to the server at its netns address (told through its
# data directory: nothing else of the host is visible in its sandbox)
echo "$PS_ADDR:$PORT" >"$T/d/replicas/w-0/data/ps.addr"
steps() { grep -q "steps/s" "$T/d/replicas/w-0/log" 2>/dev/null; }
wait_for 30 steps || fail "w-0 never reached ps-0 at $PS_ADDR:$PORT: $(tail -3 "$T/d/replicas/w-0/log")"
grep -q "parameter servers ($PS_ADDR:$PORT)" "$T/d/replicas/w-0/log" || fail "w-0 did not use $PS_ADDR"
grep -q "$W_ADDR/24" "$T/d/replicas/w-0/log" || fail "w-0 did not see its own address on eth0"
# a killed replica restarts in a fresh netns with the same address
PID=$(status | grep '"name":"ps-0"' | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
[ -n "$PID" ] && [ "$PID" -gt 0 ] || fail "no pid for ps-0"
kill -9 "$PID"
restarted() { "$IOD" events --data-dir "$T/d" 2>/dev/null | grep "ps-0" | tail -1 | grep -q "healthy *ready" &&
	"$IOD" events --data-dir "$T/d" 2>/dev/null | grep -q "ps-0 *failed"; }
wait_for 30 restarted || fail "ps-0 not healthy again after SIGKILL"
[ "$(addr_of ps-0)" = "$PS_ADDR" ] || fail "ps-0 came back with $(addr_of ps-0), not $PS_ADDR"
kill "$APID"
wait "$APID"
rc=$?
APID=
[ $rc -eq 0 ] || fail "agent exit status $rc"
left=$(ip netns | grep "iod-$TAG-"; ip -o link | grep -e "iodb$TAG" -e "iv$(echo "$TAG" | cut -c3-)")
[ -z "$left" ] || fail "left behind after stop: $left"
TAG=
echo "ok   agent_netns (ps-0 $PS_ADDR, w-0 $W_ADDR, $SUBNET)"
exit 0
