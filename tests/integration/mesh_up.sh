#!/bin/sh
# mesh_up.sh BUILD: the mesh on a real local cluster (`iod up`): the proxy
# follows the control plane (`iod proxy run --server`), gives the deployed
# parameter-server a VIP, and a client reaches a replica through it by name.
# Skips (77) when this build has no `iod up` (the agent's branch not merged).
set -u
B=${1:-build}
IOD="$B/iod"
[ -x "$IOD" ] || { echo "no $IOD"; exit 77; }
"$IOD" up --help >/dev/null 2>&1 || { echo "iod up is not built here"; exit 77; }
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

T=$(mktemp -d)
PROXY_PID=""
cleanup() {
	[ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null && wait "$PROXY_PID" 2>/dev/null
	"$IOD" down --state-dir "$T/state" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

# A block of free ports below the ephemeral range.
base=0
for try in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
	cand=$(( 10000 + ($$ * 11 + try * 173) % 100 * 100 ))
	if ! command -v ss >/dev/null ||
		[ -z "$(ss -Hltun "( sport >= :$cand and sport <= :$((cand + 99)) )" 2>/dev/null)" ]; then
		base=$cand
		break
	fi
done
[ "$base" -gt 0 ] || { echo "no free block of ports"; exit 77; }
API="127.0.0.1:$((base + 10))"; ADMIN="127.0.0.1:$((base + 90))"

if ! "$IOD" up --nodes 2 --api-port $((base + 10)) --raft-port $((base + 20)) \
	--state-dir "$T/state" >"$T/up.log" 2>&1; then
	echo "iod up failed"; cat "$T/up.log"; exit 1
fi
cat >"$T/spec.json" <<JSON
{"services": [{"name": "parameter-server", "type": "stateful", "resources": {"gpu": 1},
  "replicas": 2, "command": "iod demo-worker --role parameter-server"}]}
JSON
"$IOD" deploy -f "$T/spec.json" --server "$API" >"$T/deploy.log" 2>&1 ||
	{ echo "deploy failed"; cat "$T/deploy.log"; exit 1; }

"$IOD" proxy run --server "$API" --node node-0 --admin "$ADMIN" >"$T/proxy.log" 2>&1 &
PROXY_PID=$!

# Wait until the proxy's view has a healthy parameter-server endpoint.
VIP=""
i=0
while [ $i -lt 100 ]; do
	VIP=$(curl -s "http://$ADMIN/registry" 2>/dev/null | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)
except Exception:
    sys.exit(0)
for s in r["services"]:
    if s["name"] == "parameter-server" and any(e["healthy"] for e in s["endpoints"]):
        print(s["address"])')
	[ -n "$VIP" ] && break
	i=$((i + 1)); sleep 0.1
done
pass=0 fail=0
if [ -z "$VIP" ]; then
	echo "FAIL up_registry: no healthy parameter-server endpoint in the proxy's view"
	cat "$T/proxy.log"; curl -s "http://$API/v1/endpoints"
	echo "RESULT 0 1 0"; exit 0
fi
echo "ok   up_registry ($VIP)"; pass=$((pass + 1))

# A demo PULL through the VIP must reach a parameter server and get bytes back.
got=$(python3 - "$VIP" <<'PY'
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
n = 0
for _ in range(4):
    s = socket.create_connection((host, int(port)), timeout=3)
    s.sendall(b"PULL" + struct.pack(">I", 4))
    if len(s.recv(64)) >= 4:
        n += 1
    s.close()
print(n)
PY
)
if [ "$got" = 4 ]; then echo "ok   up_call_by_vip"; pass=$((pass + 1)); else
	echo "FAIL up_call_by_vip: $got of 4 answered"; fail=$((fail + 1)); fi
echo "RESULT $pass $fail 0"
