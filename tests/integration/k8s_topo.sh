#!/bin/sh
# k8s_topo.sh BUILD: `iod topo --cluster --from FILE` over Node objects as
# `iod get nodes -o json` prints them (one with its registered topology, one
# with only its model, one with its rack as a label and no zone) gives the
# expected Slurm topology.yaml (tests/fixtures/k8s/from-nodes.topology.yaml)
# and the labels; a damaged topology is refused with exit 2 and its path.
# Exit 0 pass, 77 skip, else fail.
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
need python3
FIX=$(dirname "$0")/../fixtures/k8s
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$IOD" topo --model dgx-h100 -o json >"$T/topo.json" || fail "iod topo -o json"
python3 - "$T" <<'PY' || fail "writing the nodes"
import json, sys
t = sys.argv[1]
topo = json.load(open(t + "/topo.json"))
items = [{"kind": "node", "name": "gpu01", "rev": 3,
          "value": {"addr": "10.0.0.1", "model": "dgx-h100", "topology": topo, "rack": "r1", "zone": "z1"}},
         {"kind": "node", "name": "gpu02", "rev": 4, "value": {"model": "pcie-8gpu", "rack": "r1", "zone": "z1"}},
         {"kind": "node", "name": "gpu03", "rev": 5, "value": {"model": "pcie-8gpu", "labels": {"rack": "r2"}}}]
json.dump({"rev": 5, "items": items}, open(t + "/nodes.json", "w"))
PY
"$IOD" topo --cluster --from "$T/nodes.json" -o slurm >"$T/out.yaml" || fail "-o slurm"
diff -u "$FIX/from-nodes.topology.yaml" "$T/out.yaml" || fail "topology.yaml differs"
"$IOD" topo --cluster --from - -o json <"$T/nodes.json" >"$T/labels.json" || fail "-o json"
python3 - "$T/labels.json" <<'PY' || fail "labels: $(cat "$T/labels.json")"
import json, sys
l = json.load(open(sys.argv[1]))
assert l["gpu01"]["network.topology.nvidia.com/accelerator"] == "gpu01.nvl"
assert "network.topology.nvidia.com/accelerator" not in l["gpu02"]
assert l["gpu03"]["network.topology.nvidia.com/leaf"] == "r2"
assert l["gpu03"]["network.topology.nvidia.com/spine"] == "default"
assert l["gpu01"]["iod.dev/gpu.nvlink-largest"] == "8"
PY
echo '{"items":[{"name":"x","value":{"topology":{"bad":1}}}]}' >"$T/bad.json"
"$IOD" topo --cluster --from "$T/bad.json" 2>"$T/err"
[ $? = 2 ] && grep -q "node x: topology" "$T/err" || fail "damaged topology: $(cat "$T/err")"
echo "PASS"
