#!/bin/sh
# agent_probes.sh BUILD: health checks run concurrently in the agent: a
# replica whose exec check hangs until its 4 s timeout is listed first in
# the manifest (so it is checked first); a second replica with a quick check
# must be reported healthy before the hung check's verdict arrives. With
# checks run one after another the quick verdict would wait behind the hung
# one. Ordering by event revision, not wall-clock time: robust under load.
# Exit 0 pass, 77 skip, else fail.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
T=$(mktemp -d)
APID=
cleanup() {
	[ -n "$APID" ] && kill "$APID" 2>/dev/null && wait "$APID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
fail() { echo "FAIL: $*"; tail -20 "$T/agent.log"; exit 1; }

cat >"$T/m.json" <<JSON
{"replicas": [
  {"name": "hung-0", "service": "hung", "command": ["/bin/sh", "-c", "exec sleep 60"],
   "health": {"kind": "exec", "command": "exec sleep 60", "interval_ms": 4500,
              "timeout_ms": 4000}},
  {"name": "quick-0", "service": "quick", "command": ["/bin/sh", "-c", "exec sleep 60"],
   "health": {"kind": "exec", "command": "true", "interval_ms": 100, "timeout_ms": 2000}}
]}
JSON
"$IOD" agent --name probes --data-dir "$T/d" --manifest "$T/m.json" --stop-grace 1s \
	>"$T/agent.log" 2>&1 &
APID=$!
. "$(dirname "$0")/lib.sh"
ev() { "$IOD" events --data-dir "$T/d" -o json 2>/dev/null; }
# the revision of the first event matching a pattern
rev_of() { ev | grep "$1" | head -1 | sed -n 's/.*"rev":\([0-9]*\).*/\1/p'; }
hung_verdict() { ev | grep '"replica":"hung-0"' | grep -q "timed out"; }
wait_for 60 hung_verdict || fail "the hung check never timed out"
QUICK=$(rev_of '"replica":"quick-0".*"phase":"healthy"')
HUNG=$(rev_of '"replica":"hung-0".*timed out')
[ -n "$QUICK" ] || fail "quick-0 never healthy"
[ "$QUICK" -lt "$HUNG" ] || fail "quick-0 healthy at rev $QUICK, after the hung check's verdict (rev $HUNG)"
kill "$APID"
wait "$APID"
APID=
echo "ok   agent_probes (quick-0 healthy at rev $QUICK, hung-0's verdict at rev $HUNG)"
exit 0
