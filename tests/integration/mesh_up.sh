#!/bin/sh
# mesh_up.sh BUILD: the mesh on a real local cluster (`iod up`). First the
# proxy node-1's agent hosts: replicas get IOD_SVC_<NAME>_ADDR, a call to that
# address reaches a parameter server, and a worker started with --via-mesh
# trains through it. Then a standalone proxy (`iod proxy run --server`)
# follows the control plane too, and a client reaches a replica by its VIP.
# Skips (77) when this build has no `iod up` (the agent's branch not merged).
set -u
. "$(dirname "$0")/lib.sh"
B=${1:-build}
IOD="$B/iod"
need_iod "$B"
"$IOD" up --help >/dev/null 2>&1 || { echo "iod up is not built here"; exit 77; }
need python3 curl

T=$(mktemp -d)
# the client config `iod up` writes (its admin credential) is found here
export IOD_STATE_DIR="$T/state"
unset IOD_CONFIG
PROXY_PID=""
cleanup() {
	[ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null && wait "$PROXY_PID" 2>/dev/null
	"$IOD" down --state-dir "$T/state" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

# A block of free ports below the ephemeral range.
base=$(free_port_block $$) || { echo "no free block of ports"; exit 77; }
API="127.0.0.1:$((base + 10))"; ADMIN="127.0.0.1:$((base + 90))"
AGENT_ADMIN="127.0.0.1:$((base + 80))"

start_cluster "$T/up.log" --nodes 2 --api-port $((base + 10)) --raft-port $((base + 20)) \
	--mesh-port $((base + 80)) --state-dir "$T/state" || exit 1
cat >"$T/spec.json" <<JSON
{"services": [{"name": "parameter-server", "type": "stateful", "resources": {"gpu": 1},
  "replicas": 2, "command": "iod demo-worker --role parameter-server"},
 {"name": "trainer", "type": "stateless", "replicas": 1, "depends_on": ["parameter-server"],
  "command": "iod demo-worker --role worker --via-mesh --compute-ms 1"}]}
JSON
"$IOD" deploy -f "$T/spec.json" --server "$API" >"$T/deploy.log" 2>&1 ||
	{ echo "deploy failed"; cat "$T/deploy.log"; exit 1; }

# The VIP of a healthy parameter-server in the view of the proxy at $1.
healthy_vip() {
	curl -s "http://$1/registry" 2>/dev/null | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)
except Exception:
    sys.exit(0)
for s in r["services"]:
    if s["name"] == "parameter-server" and any(e["healthy"] for e in s["endpoints"]):
        print(s["address"])'
}

# Demo PULLs to $1 (host:port); prints how many of 4 were answered.
pulls() {
	python3 - "$1" <<'PY'
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
n = 0
for _ in range(4):
    try:
        s = socket.create_connection((host, int(port)), timeout=3)
        s.sendall(b"PULL" + struct.pack(">I", 4))
        if len(s.recv(64)) >= 4:
            n += 1
        s.close()
    except OSError:
        pass
print(n)
PY
}

# -- the proxy node-1's agent hosts (no other proxy runs yet) --
AVIP=""
i=0
while [ $i -lt 100 ]; do
	AVIP=$(healthy_vip "$AGENT_ADMIN")
	[ -n "$AVIP" ] && break
	i=$((i + 1)); sleep 0.1
done
if [ -n "$AVIP" ]; then ok "up_agent_proxy ($AVIP)"; else
	bad "up_agent_proxy: node-1's agent serves no healthy parameter-server"
	grep -i mesh "$T/state/node-1.log"; fi

# The replica's environment (the sandbox's process or its child) names the VIP.
# The pid in status.json can be a moment stale (a restart, a process between
# fork and exec shows an empty environ): look again for up to 5 s.
ENVADDR=""
i=0
while [ -z "$ENVADDR" ] && [ $i -lt 50 ]; do
	pid=$(python3 -c '
import json, sys
for r in json.load(open(sys.argv[1]))["replicas"]:
    if r["name"] == "parameter-server-0" and r["pid"]:
        print(r["pid"])' "$T/state/node-1/status.json" 2>/dev/null)
	for p in $pid $(pgrep -P "${pid:-0}" 2>/dev/null); do
		v=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^IOD_SVC_PARAMETER_SERVER_ADDR=//p')
		[ -n "$v" ] && ENVADDR=$v
	done
	[ -n "$ENVADDR" ] || sleep 0.1
	i=$((i + 1))
done
if [ -n "$ENVADDR" ] && [ "$ENVADDR" = "$AVIP" ]; then
	ok "up_replica_env (IOD_SVC_PARAMETER_SERVER_ADDR=$ENVADDR)"
else
	bad "up_replica_env: IOD_SVC_PARAMETER_SERVER_ADDR=\"$ENVADDR\", proxy serves \"$AVIP\" (pid ${pid:-none})"
fi

# A call to that address from the node reaches a parameter server.
if [ -n "$ENVADDR" ] && [ "$(pulls "$ENVADDR")" = 4 ]; then
	ok "up_call_by_env"
else
	bad "up_call_by_env: PULLs to \"$ENVADDR\" not all answered"
fi

# The worker (--via-mesh) trains through the VIP. Up to 30 s: in about one
# run in five here the worker's first line came more than 10 s after the
# deploy on a loaded machine (not understood yet; the wait is printed).
i=0
while [ $i -lt 300 ]; do
	grep -q "worker: step" "$T"/state/node-*/replicas/trainer-0/log 2>/dev/null && break
	i=$((i + 1)); sleep 0.1
done
if grep -q "1 parameter servers ($AVIP)" "$T"/state/node-*/replicas/trainer-0/log 2>/dev/null &&
	grep -q "worker: step" "$T"/state/node-*/replicas/trainer-0/log; then
	ok "up_worker_via_mesh (first step seen after $((i / 10)).$((i % 10)) s of waiting)"
else
	bad "up_worker_via_mesh: trainer-0 did not train through $AVIP in 30 s ($(date -u +%T.%N))"
	cat "$T"/state/node-*/replicas/trainer-0/log 2>/dev/null | tail -5
	"$IOD" get replicas --server "$API" 2>&1 | sed 's/^/  /'
	grep -h "trainer-0" "$T"/state/node-*.log 2>/dev/null | tail -8 | sed 's/^/  /'
fi

# -- a standalone proxy following the control plane --

"$IOD" proxy run --server "$API" --node node-0 --admin "$ADMIN" >"$T/proxy.log" 2>&1 &
PROXY_PID=$!

# Wait until the proxy's view has a healthy parameter-server endpoint.
VIP=""
i=0
while [ $i -lt 100 ]; do
	VIP=$(healthy_vip "$ADMIN")
	[ -n "$VIP" ] && break
	i=$((i + 1)); sleep 0.1
done
if [ -z "$VIP" ]; then
	bad "up_registry: no healthy parameter-server endpoint in the proxy's view"
	cat "$T/proxy.log"; "$IOD" get endpoints --server "$API"
	exit 0
fi
ok "up_registry ($VIP)"

# A demo PULL through the VIP must reach a parameter server and get bytes back
# (this proxy and node-1's share the VIP through SO_REUSEPORT).
got=$(pulls "$VIP")
if [ "$got" = 4 ]; then ok "up_call_by_vip"; else
	bad "up_call_by_vip: $got of 4 answered"; fi
