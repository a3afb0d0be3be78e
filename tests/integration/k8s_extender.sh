#!/bin/sh
# k8s_extender.sh BUILD: `iod extender` as kube-scheduler calls it: HTTP
# POST <urlPrefix>/filter and /prioritize with ExtenderArgs fixtures shaped
# like kube-scheduler's (tests/fixtures/k8s/), on loopback. Filter keeps the
# node iod can place a 4-GPU NVLink pod on and names iod's reason for each
# other (unknown topology: unresolvable); prioritize scores every node 0..10;
# garbage gets an Error, GET 405; a non-loopback --listen is refused.
# Exit 0 pass, 77 skip, else fail.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 not installed"; exit 77; }
FIX=$(dirname "$0")/../fixtures/k8s
PORT=$((27000 + ($$ % 2000)))
T=$(mktemp -d)
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
fail() { echo "FAIL: $*"; cat "$T/log"; exit 1; }

"$IOD" extender --listen 0.0.0.0:$PORT >/dev/null 2>&1
[ $? = 2 ] || fail "a non-loopback --listen was not refused with exit 2"
"$IOD" extender --listen 127.0.0.1:$PORT --nodes 4 \
	--model dgx-h100,pcie-8gpu,hgx-a100-8,pcie-4gpu-nvlink-pairs >"$T/log" 2>&1 &
PID=$!
python3 - "$PORT" "$FIX" <<'PY' || fail "extender answers"
import json, sys, time, urllib.request, urllib.error
port, fix = sys.argv[1], sys.argv[2]
base = "http://127.0.0.1:%s/iod/" % port
def post(verb, body, method="POST"):
    for _ in range(100):
        try:
            req = urllib.request.Request(base + verb, data=body, method=method,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")
        except (ConnectionRefusedError, urllib.error.URLError):
            time.sleep(0.05)
    raise SystemExit("no extender on " + base)
st, f = post("filter", open(fix + "/filter-nodes.json", "rb").read())
assert st == 200 and f["Error"] == "", (st, f)
kept = [n["metadata"]["name"] for n in f["Nodes"]["items"]]
assert kept == ["dgx-a"], kept
assert "gpu-link" in f["FailedNodes"]["pcie-b"], f
assert "gpu-link" in f["FailedNodes"]["pairs-c"], f
assert f["FailedNodes"]["dgx-busy"].startswith("iod: gpus:"), f
assert "cpu-only" in f["FailedAndUnresolvableNodes"], f
st, p = post("prioritize", open(fix + "/prioritize-names.json", "rb").read())
assert st == 200 and [h["Host"] for h in p] == ["n0", "n1", "n2", "n3"], p
assert all(0 <= h["Score"] <= 10 for h in p) and max(h["Score"] for h in p) == 10, p
st, g = post("filter", b"{garbage")
assert st == 200 and g["Error"], (st, g)
st, g = post("prioritize", b"[]")
assert st == 400 and g["Error"], (st, g)
st, g = post("filter", None, method="GET")
assert st == 405, st
print("ok filter, prioritize, garbage, GET")
PY
kill "$PID"; wait "$PID" 2>/dev/null; PID=
echo "PASS"
