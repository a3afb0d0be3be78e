#!/bin/sh
# agent_manifest.sh BUILD: a standalone agent (`iod agent --manifest`) runs a
# healthy replica and a crashing one; checks phases and restarts with backoff
# in `iod events --data-dir`, the output in `iod logs`, a manifest change
# that removes a replica, and a clean stop. Exit 0 pass, 77 skip, else fail.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
T=$(mktemp -d)
PORT=$((12000 + ($$ % 400) * 20 + 15))
APID=
cleanup() {
	[ -n "$APID" ] && kill "$APID" 2>/dev/null && wait "$APID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
fail() { echo "FAIL: $*"; cat "$T/agent.log" | tail -20; exit 1; }

cat >"$T/m.json" <<EOF
{"replicas": [
  {"name": "ps-0", "service": "ps", "type": "stateful", "port": $PORT,
   "command": ["iod", "demo-worker", "--role", "parameter-server", "--params", "16",
               "--http-port", "$((PORT + 1))"],
   "health": {"kind": "http", "port": $((PORT + 1)), "path": "/healthz",
              "interval_ms": 20, "timeout_ms": 500}},
  {"name": "crash-0", "service": "crash", "restart": "on-failure",
   "command": ["/bin/sh", "-c", "echo crashing; exit 3"]}
]}
EOF
"$IOD" agent --name solo --data-dir "$T/d" --manifest "$T/m.json" --backoff 50ms \
	--stop-grace 2s >"$T/agent.log" 2>&1 &
APID=$!

. "$(dirname "$0")/lib.sh"
ev() { "$IOD" events --data-dir "$T/d" 2>/dev/null; }
healthy() { ev | grep -q "ps-0 *healthy *ready"; }
backoff() { ev | grep -q "crash-0 *failed .*exit status 3; restarting in 100 ms"; }

wait_for 30 healthy || fail "ps-0 never healthy"
wait_for 30 backoff || fail "crash-0: no doubling backoff"
"$IOD" logs crash-0 --data-dir "$T/d" | grep -q crashing || fail "iod logs crash-0"
"$IOD" events --data-dir "$T/d" -o json | head -1 | grep -q '"rev":1' || fail "events -o json"
# the manifest drops crash-0: it is reported removed
sed -i 's/"name": "crash-0"/"name": "crash-1"/' "$T/m.json"
removed() { "$IOD" events --data-dir "$T/d" -o json | grep -q '"replica":"crash-0".*"removed":true'; }
wait_for 30 removed || fail "crash-0 not removed after the manifest changed"
kill "$APID"
wait "$APID"
rc=$?
APID=
[ $rc -eq 0 ] || fail "agent exit status $rc"
ev | tail -1 | grep -q "agent-stopped" || fail "no agent-stopped event"
pgrep -f "$T/d" >/dev/null && fail "processes left"
ev | tail -12
echo "ok   agent_manifest"
exit 0
