#!/bin/sh
# sim_fabric.sh BUILD: `iod sim fabric` end to end: a quick run in text, CSV
# and JSON, byte-identical output for a seed, a sweep table, a YAML topology,
# errors with positions and exit codes, and that the whole-cluster mode runs
# (tests/integration/sim_cluster.sh and tests/unit/test_sim_cluster.c cover it).
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
IOD="$1/iod"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$IOD" sim fabric --duration 2ms --load 0.5 --quiet >"$tmp/a.txt" 2>&1 &&
	grep -q "slow_avg" "$tmp/a.txt" && grep -q "^  <100KB" "$tmp/a.txt" && ok text || bad text

"$IOD" sim fabric --duration 2ms --load 0.5 --seed 7 -o csv >"$tmp/1.csv" &&
	"$IOD" sim fabric --duration 2ms --load 0.5 --seed 7 -o csv >"$tmp/2.csv" &&
	"$IOD" sim fabric --duration 2ms --load 0.5 --seed 8 -o csv >"$tmp/3.csv" &&
	head -1 "$tmp/1.csv" | grep -q "^id,src,dst,size_bytes,start_ns,fct_ns,ideal_ns,slowdown" &&
	[ "$(wc -l <"$tmp/1.csv")" -gt 5 ] &&
	cmp -s "$tmp/1.csv" "$tmp/2.csv" && ! cmp -s "$tmp/1.csv" "$tmp/3.csv" &&
	ok "csv, same seed same bytes" || bad "csv, same seed same bytes"

"$IOD" sim fabric --duration 2ms --load 0.3 -o json >"$tmp/j.json" &&
	python3 -c "import json,sys; d=json.load(open('$tmp/j.json')); assert d['summary']['flows']==len(d['flows'])>0; assert d['summary']['all']['slowdown_avg']>=1" &&
	ok json || bad json

"$IOD" sim fabric --duration 1ms --loads 0.2,0.6 --quiet --plot "$tmp/fct.svg" >"$tmp/s.txt" &&
	grep -q "^ 0.20 " "$tmp/s.txt" && grep -q "^ 0.60 " "$tmp/s.txt" &&
	grep -q "<svg" "$tmp/fct.svg" && ok "sweep table and plot" || bad "sweep table and plot"

"$IOD" sim fabric --duration 1ms --loads 0.2,0.4 --quiet >"$tmp/s2.txt" &&
	"$IOD" sim fabric --duration 1ms --loads 0.2,0.4 --quiet >"$tmp/s3.txt" &&
	cmp -s "$tmp/s2.txt" "$tmp/s3.txt" && ok "sweep table byte-identical" ||
	bad "sweep table byte-identical"

cat >"$tmp/t.yaml" <<'Y'
switches: [s0, s1]
hosts:
  - {prefix: a, count: 2, attach: s0}
  - {prefix: b, count: 2, attach: s1}
links:
  - {a: s0, b: s1, rate: 10Gbps}
Y
"$IOD" sim fabric --topo "$tmp/t.yaml" --duration 1ms --quiet >/dev/null && ok yaml || bad yaml

printf 'switches: [s0]\nhosts: [h0]\nlinks:\n  - {a: h0, b: s9}\n' >"$tmp/bad.yaml"
"$IOD" sim fabric --topo "$tmp/bad.yaml" 2>"$tmp/err.txt"
[ $? -eq 2 ] && grep -q "bad.yaml:4:16: b: no node named \"s9\"" "$tmp/err.txt" &&
	ok "bad yaml: exit 2 and position" || bad "bad yaml: exit 2 and position"

"$IOD" sim fabric --load 2 2>/dev/null; [ $? -eq 2 ] && ok "bad load exit 2" || bad "bad load exit 2"
"$IOD" sim --nodes 4 --gpus 16 --quiet >"$tmp/nb.txt" &&
	grep -q "event log sha256: [0-9a-f]\{64\}" "$tmp/nb.txt" && ok "whole-cluster sim runs" ||
	bad "whole-cluster sim runs"
"$IOD" sim fabric --help | grep -q "usage: iod sim fabric" && "$IOD" sim --help >/dev/null &&
	ok help || bad help

"$IOD" sim fabric --topo leaf-spine:hosts=4,leaves=1,spines=1 --allreduce 4 --size 4MB \
	--quiet >"$tmp/ar.txt" && grep -q "busbw" "$tmp/ar.txt" && ok allreduce || bad allreduce

checks_ok
