#!/bin/sh
# topo_fake_nvml.sh BUILD: iod's NVML path (dlopen, NVLinks per link with the
# peer's PCI address, NVSwitch all-to-all, same board, UUID, memory) against
# a stand-in libnvidia-ml.so.1 (tests/fixtures/fake_nvml.c) over the
# pcie-8gpu model's hwloc XML. Prints a RESULT line per check.
# iod-test: parallel
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
IOD="$BUILD/san/iod"
[ -x "$IOD" ] || IOD="$BUILD/iod"
need cc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -shared -fPIC -O1 -o "$tmp/libnvidia-ml.so.1" tests/fixtures/fake_nvml.c || { bad "build fake NVML"; exit 1; }
xml=examples/topologies/pcie-8gpu.xml

run() { # mode
	FAKE_NVML_MODE=$1 LD_LIBRARY_PATH="$tmp" HWLOC_XMLFILE="$xml" "$IOD" topo --host "$2" "$3" 2>"$tmp/err"
}

# NVSwitch: every GPU pair NV18, otherwise the PCIe tree of pcie-8gpu
run switch -o matrix >"$tmp/m" || { bad "switch run"; cat "$tmp/err"; }
if awk -F'\t' '/^GPU[0-7]\t/ { for (i = 2; i <= 9; i++) if ($i != " X " && $i != "NV18") bad = 1 }
	END { exit bad }' "$tmp/m"; then ok switch_all_nv18; else bad switch_all_nv18; cat "$tmp/m"; fi
grep -q "^NIC0	PHB	PHB	PHB	PHB	SYS" "$tmp/m" && ok switch_keeps_pcie || { bad switch_keeps_pcie; cat "$tmp/m"; }
run switch -o json >"$tmp/j"
python3 - "$tmp/j" <<'PY' && ok switch_json || bad switch_json
import json, sys
d = json.load(open(sys.argv[1]))
g = [x for x in d["devices"] if x["kind"] == "gpu"]
assert len(g) == 8, len(g)
assert g[0]["model"] == "NVIDIA H200", g[0]["model"]
assert g[3]["uuid"].endswith("0003"), g[3]["uuid"]
assert g[0]["mem_bytes"] == 141 << 30
assert g[0]["nvlinks"] == 18 and g[0]["nvlink_bps"] == 25 * 8 * 10**9
assert g[0]["links"]["GPU1"]["nvswitch"] is True
assert g[0]["board"] >= 0 and g[0]["board"] == g[1]["board"]
assert g[2]["board"] == -1
assert len(d["nvlink_islands"]) == 1
PY

# hgx: NVSwitches without a PCI address (peer type SWITCH): still NV18 everywhere
run hgx -o matrix >"$tmp/m" || { bad "hgx run"; cat "$tmp/err"; }
if awk -F'\t' '/^GPU[0-7]\t/ { for (i = 2; i <= 9; i++) if ($i != " X " && $i != "NV18") bad = 1 }
	END { exit bad }' "$tmp/m"; then ok hgx_all_nv18; else bad hgx_all_nv18; cat "$tmp/m"; fi

# pairs: GPU 2k-2k+1 NV4 (each side reports the link: counted once), else PCIe
run pairs -o matrix >"$tmp/m" || { bad "pairs run"; cat "$tmp/err"; }
grep -q "^GPU0	 X 	NV4	PHB	PHB	SYS	SYS	SYS	SYS" "$tmp/m" && ok pairs_gpu0_row || { bad pairs_gpu0_row; cat "$tmp/m"; }
grep -q "^GPU5	SYS	SYS	SYS	SYS	NV4	 X 	PHB	PHB" "$tmp/m" && ok pairs_gpu5_row || { bad pairs_gpu5_row; cat "$tmp/m"; }

# without the library, discovery still works (NVML is optional)
HWLOC_XMLFILE="$xml" "$IOD" topo --host -o matrix >"$tmp/m" 2>"$tmp/err" && grep -q "^GPU0	 X 	PIX" "$tmp/m" \
	&& ok no_nvml_falls_back || { bad no_nvml_falls_back; cat "$tmp/err" "$tmp/m"; }
