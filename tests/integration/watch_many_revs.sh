#!/bin/sh
# watch_many_revs.sh BUILD: watch answers serialised off the loop (issue 15,
# server_watch.c's struct wenc) lose, repeat and reorder nothing. One
# `iod server` (the sanitizer build when there is one), 40 long-poll watchers
# of configs starting from 5 different revisions, while 150 PUTs of 20-110 KiB
# values (some over IOD_API_WATCH_LARGE_BYTES, so they wait their turn) are
# made one after another. Watchers that ask from the same revision share one
# serialisation; the others wait for the encoding slot
# (IOD_API_WATCH_ENCODES_MAX).
#   1. watch_events_exact: every watcher saw every revision after its start,
#      once each, in order (no timing is asserted: it reads until it has them)
#   2. watch_encodes_shared: iod_api_watch_encodes_total > 0 and smaller than
#      iod_api_watch_answers_total (answers shared an encoding)
#   3. clean_exit: the server exits 0 on SIGTERM, no sanitizer report
# iod-test: parallel
set -u
BUILD=${1:-build}
IOD="$BUILD/san/iod"
[ -x "$IOD" ] || IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $BUILD/iod not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/$(basename "$IOD")
command -v python3 >/dev/null || { echo "skip: python3 needed (the watchers)"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl needed"; exit 77; }

. "$(dirname "$0")/lib.sh"
BASE=$(free_port_block 31) || { echo "skip: no free port block"; exit 77; }
T=$(mktemp -d)
cleanup() {
	stop_bg
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
on_bad() { tail -15 "$T/s.log"; }

RAFT="127.0.0.1:$BASE"
API="127.0.0.1:$((BASE + 1))"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
bg "$IOD" server --id 1 --data-dir "$T/d" --raft "$RAFT" --api "$API" --insecure \
	--peers "1=$RAFT@$API" >"$T/s.log" 2>&1
SPID=$BG_PID
leads() { curl -s --max-time 1 "http://$API/v1/status" | grep -q '"leader"'; }
wait_for 30 leads || { bad "no leader in 30 s"; exit 1; }

cat >"$T/w.py" <<'EOF'
import json, sys, threading, urllib.request, urllib.error
api, N, W = sys.argv[1], 150, 40

def call(m, p, b=None):
    d = json.dumps(b).encode() if b is not None else None
    r = urllib.request.Request("http://%s%s" % (api, p), data=d, method=m,
                               headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=60) as x:
            return x.status, json.loads(x.read())
    except urllib.error.HTTPError as e:
        return e.code, None
    except (OSError, ValueError):
        return 0, None

for k in range(5):  # revisions to start from
    call("PUT", "/v1/config/pre%d" % k, {"k": k})
st, j = call("GET", "/v1/configs")
rev0 = j["rev"]
final = rev0 + N
seen = [[] for _ in range(W)]
fails = []

def watcher(i):
    start = rev = rev0 - i % 5
    while rev < final:
        st, j = call("GET", "/v1/configs?watch=1&rev=%d&timeout_ms=2000" % rev)
        if st != 200 or j is None:
            fails.append((i, st))
            return
        seen[i].extend(e["rev"] for e in j["events"])
        rev = j["rev"]

ts = [threading.Thread(target=watcher, args=(i,)) for i in range(W)]
for t in ts:
    t.start()
for k in range(N):
    st, _ = call("PUT", "/v1/config/w%d" % (k % 7), {"b": "x" * (20000 + 1000 * (k % 91))})
    if st != 200:
        fails.append(("put", k, st))
for t in ts:
    t.join()
bad = [i for i in range(W) if seen[i] != list(range(rev0 - i % 5 + 1, final + 1))]
for i in bad[:3]:
    print("watcher %d: %d revisions, first %s" % (i, len(seen[i]), seen[i][:5]))
print("watchers=%d writes=%d wrong=%d failed=%s" % (W, N, len(bad), fails[:3]))
sys.exit(1 if bad or fails else 0)
EOF
if python3 "$T/w.py" "$API" >"$T/w.out" 2>&1; then
	ok "watch_events_exact ($(tail -1 "$T/w.out"))"
else
	cat "$T/w.out"
	bad watch_events_exact "$(tail -1 "$T/w.out")"
fi

metric() { curl -s --max-time 5 "http://$API/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
ENC=$(metric iod_api_watch_encodes_total)
ANS=$(metric iod_api_watch_answers_total)
if [ -n "$ENC" ] && [ -n "$ANS" ] && [ "$ENC" -gt 0 ] && [ "$ENC" -lt "$ANS" ]; then
	ok "watch_encodes_shared ($ENC encodings for $ANS answers)"
else
	bad watch_encodes_shared "iod_api_watch_encodes_total '$ENC', iod_api_watch_answers_total '$ANS'"
fi

kill "$SPID"
wait "$SPID"
RC=$?
LIB_BG_PIDS=""
if [ "$RC" = 0 ] && ! grep -q -E "Sanitizer|runtime error:" "$T/s.log"; then
	ok clean_exit
else
	bad clean_exit "exit $RC"
fi
checks_ok
