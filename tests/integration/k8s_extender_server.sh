#!/bin/sh
# k8s_extender_server.sh BUILD: the kube-scheduler extender served by
# `iod server` (POST /v1/extender/filter, /v1/extender/prioritize) on a real
# `iod up` cluster (2 dgx-h100 nodes, HTTPS with client certificates):
#   1. filter with kube-scheduler's Node objects (the fixture's pod: 4 GPUs
#      over NVLink) keeps the nodes iod knows by name, fails the one whose
#      GPUs are taken with iod's reason, and a node iod does not know is
#      unresolvable; with node names only (nodeCacheCapable) as well;
#   2. prioritize scores iod's nodes 0..10;
#   3. a viewer may ask (200) with a token or with a user certificate (what
#      kube-scheduler's tlsConfig presents); no credential gets 401; GET gets
#      405; an unknown verb 404; garbage gets an Error.
# Exit 0 pass, 77 skip, else fail.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 not installed"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not installed"; exit 77; }
. "$(dirname "$0")/lib.sh"
FIX=$(cd "$(dirname "$0")/../fixtures/k8s" && pwd)
unset IOD_TOKEN IOD_CA IOD_CERT IOD_KEY IOD_CONFIG IOD_CONTEXT
T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
BASE=$(free_port_block 24) || { echo "skip: no free port block"; exit 77; }
API="127.0.0.1:$((BASE + 10))"
export IOD_SERVER="$API,127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
PKI="$IOD_STATE_DIR/pki"
cleanup() {
	"$IOD" down --grace 5s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
fail() { echo "FAIL: $*"; for f in "$IOD_STATE_DIR"/server-*.log; do echo "--- $f"; tail -5 "$f"; done; exit 1; }

"$IOD" up --nodes 2 --model dgx-h100 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --election-timeout 1s --heartbeat 100ms --no-mesh \
	--mesh-mtls-port $((BASE + 30)) >"$T/up.log" 2>&1 || { cat "$T/up.log"; fail "iod up"; }
tok=$("$IOD" token create --role viewer --ttl 1h -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])') ||
	fail "viewer token"
"$IOD" cert create user kube-scheduler --role viewer --pki "$PKI" --out "$T/ks" >/dev/null ||
	fail "viewer certificate"
python3 - "$API" "$PKI" "$FIX" "$tok" "$IOD_SERVER" "$T/ks" <<'PY' || fail "extender answers"
import json, ssl, sys, time, urllib.request, urllib.error
api, pki, fix, tok, servers, ks = sys.argv[1:7]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.check_hostname = False
admin = ssl.create_default_context(cafile=pki + "/ca.crt")
admin.check_hostname = False
admin.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
def post(verb, body, method="POST", auth=None, c=admin, at=api):
    h = {"Content-Type": "application/json"}
    if auth:
        h["Authorization"] = "Bearer " + auth
    req = urllib.request.Request("https://%s/v1/extender/%s" % (at, verb), data=body,
                                 method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=10, context=c) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
fx = json.load(open(fix + "/filter-nodes.json"))
items = {n["metadata"]["name"]: n for n in fx["Nodes"]["items"]}
def named(src, name, labels=True):
    n = json.loads(json.dumps(items[src]))
    n["metadata"]["name"] = name
    if not labels:
        n["metadata"].pop("labels", None)
    return n
# iod's nodes (node-1, node-2) by name, no model label: the server knows
# them; node-2 with
# its GPUs 0-5 taken, and a node iod does not know
args = dict(fx, Nodes={"items": [named("dgx-a", "node-1", False), named("dgx-busy", "node-2", False),
                                 named("cpu-only", "stranger")]})
st, f = post("filter", json.dumps(args).encode())
assert st == 200 and f["Error"] == "", (st, f)
kept = [n["metadata"]["name"] for n in f["Nodes"]["items"]]
assert kept == ["node-1"], f
assert f["FailedNodes"]["node-2"].startswith("iod: gpus:"), f
assert "stranger" in f["FailedAndUnresolvableNodes"], f
print("ok filter: kept", kept, "node-2:", f["FailedNodes"]["node-2"])
# nodeCacheCapable (the manifest's): names in, names out
st, f = post("filter", json.dumps({"Pod": fx["Pod"], "NodeNames": ["node-1", "node-2", "stranger"]}).encode())
assert st == 200 and f["NodeNames"] == ["node-1", "node-2"], (st, f)
assert "stranger" in f["FailedAndUnresolvableNodes"], f
pr = json.load(open(fix + "/prioritize-names.json"))
pr["NodeNames"] = ["node-1", "node-2"]
st, p = post("prioritize", json.dumps(pr).encode())
assert st == 200 and [h["Host"] for h in p] == ["node-1", "node-2"], (st, p)
assert all(0 <= h["Score"] <= 10 for h in p) and max(h["Score"] for h in p) == 10, p
print("ok prioritize:", p)
# a viewer may ask, on any server (a follower answers from its state)
for at in servers.split(","):
    st, p = post("prioritize", json.dumps(pr).encode(), auth=tok, c=ctx, at=at)
    if st == 200:
        break
assert st == 200 and len(p) == 2, (st, p)
viewer = ssl.create_default_context(cafile=pki + "/ca.crt")
viewer.check_hostname = False
viewer.load_cert_chain(ks + ".crt", ks + ".key")
st, p = post("filter", json.dumps(args).encode(), c=viewer)
assert st == 200 and [n["metadata"]["name"] for n in p["Nodes"]["items"]] == ["node-1"], (st, p)
st, g = post("prioritize", json.dumps(pr).encode(), c=ctx)
assert st == 401, (st, g)
st, g = post("filter", None, method="GET")
assert st == 405, (st, g)
st, g = post("bind", b"{}")
assert st == 404, (st, g)
st, g = post("filter", b"{garbage")
assert st == 200 and g["Error"], (st, g)
st, g = post("prioritize", b"[]")
assert st == 400 and g["Error"], (st, g)
print("ok viewer token and certificate 200, anonymous 401, GET 405, bind 404, garbage Error")
PY
echo "PASS"
