#!/bin/sh
# topo_cli.sh BUILD: `iod topo` end to end: every model prints its matrix,
# DOT renders with graphviz, JSON parses, XML written by -o xml reads back
# (by iod and by lstopo), HWLOC_XMLFILE is honoured, bad input exits 2 with
# a reason, and discovery on this machine works. Prints a RESULT line per check.
# iod-test: parallel
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
IOD="$BUILD/san/iod"
[ -x "$IOD" ] || IOD="$BUILD/iod"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME WANT_RC CMD...: run, check the exit status
expect() {
	name=$1 want=$2
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ "$rc" -eq "$want" ]; then ok "$name"; else
		bad "$name (exit $rc, want $want)"; sed 's/^/    /' "$tmp/err" | head -5
	fi
}

expect help 0 "$IOD" topo --help
grep -q -- "--model NAME" "$tmp/out" || bad "help mentions --model"
expect list_models 0 "$IOD" topo --list-models
grep -q "dgx-h100" "$tmp/out" && grep -q "generic-N" "$tmp/out" && ok list_models_content || bad list_models_content
expect list_models_json 0 "$IOD" topo --list-models -o json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["models"])==5' "$tmp/out" \
	&& ok list_models_json_parses || bad list_models_json_parses

for m in dgx-h100 hgx-a100-8 pcie-8gpu pcie-4gpu-nvlink-pairs bf3-dpu generic-4; do
	expect "matrix_$m" 0 "$IOD" topo --model "$m" -o matrix
	grep -q "^Legend:" "$tmp/out" || bad "matrix_$m has a legend"
	expect "text_$m" 0 "$IOD" topo --model "$m"
	expect "json_$m" 0 "$IOD" topo --model "$m" -o json
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["model"]==sys.argv[2]' \
		"$tmp/out" "$m" && ok "json_parses_$m" || bad "json_parses_$m"
	"$IOD" topo --model "$m" -o dot >"$tmp/$m.dot" 2>"$tmp/err"
	if command -v dot >/dev/null 2>&1; then
		if dot -Tsvg "$tmp/$m.dot" >"$tmp/$m.svg" 2>"$tmp/err" && grep -q "<svg" "$tmp/$m.svg"; then
			ok "dot_renders_$m"
		else
			bad "dot_renders_$m"; head -5 "$tmp/err"
		fi
	else
		skip_check "dot_renders_$m" "graphviz (dot) is not installed"
	fi
done
grep -q "NV18" "$tmp/dgx-h100.svg" && ok dot_labels_nvlinks || bad dot_labels_nvlinks

# XML out and back in; lstopo reads it too
"$IOD" topo --model dgx-h100 -o xml >"$tmp/dgx.xml"
"$IOD" topo --model dgx-h100 -o matrix >"$tmp/m1"
"$IOD" topo --xml "$tmp/dgx.xml" -o matrix >"$tmp/m2"
cmp -s "$tmp/m1" "$tmp/m2" && ok xml_same_matrix || bad xml_same_matrix
HWLOC_XMLFILE="$tmp/dgx.xml" "$IOD" topo -o matrix >"$tmp/m3" 2>"$tmp/err"
cmp -s "$tmp/m1" "$tmp/m3" && ok hwloc_xmlfile_honoured || bad hwloc_xmlfile_honoured
if command -v lstopo >/dev/null 2>&1; then
	lstopo -i "$tmp/dgx.xml" --of console >"$tmp/ls" 2>&1 && grep -q "NUMANode" "$tmp/ls" \
		&& ok lstopo_reads_our_xml || bad lstopo_reads_our_xml
else
	skip_check lstopo_reads_our_xml "lstopo is not installed"
fi
for f in examples/topologies/*.xml; do
	expect "fixture_$(basename "$f" .xml)" 0 "$IOD" topo --xml "$f" -o matrix
done

# --gpus: the scheduler's view of a GPU set
expect gpus_query 0 "$IOD" topo --model dgx-h100 --gpus 4-5
grep -q "score 1850" "$tmp/out" && grep -q "nearest NIC: NIC4" "$tmp/out" && ok gpus_query_content || bad gpus_query_content
expect gpus_query_json 0 "$IOD" topo --model pcie-8gpu --gpus 0,1,4 -o json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["score"]==70 and d["nearest_nic"]=="NIC0" and d["nearest_numa"]==0' \
	"$tmp/out" && ok gpus_query_json_values || bad gpus_query_json_values
expect gpus_query_no_such_gpu 2 "$IOD" topo --model pcie-8gpu --gpus 8
grep -q "GPU 8 does not exist" "$tmp/err" && ok gpus_query_says_which || bad gpus_query_says_which

# bad input: exit 2 and a reason that names the problem
expect missing_file 2 "$IOD" topo --xml "$tmp/nope.xml"
grep -q "no such file" "$tmp/err" && ok missing_file_says_so || bad missing_file_says_so
printf '<?xml version="1.0"?>\n<topology version="2.0">\n<object type="Mach' >"$tmp/trunc.xml"
expect truncated_xml 2 "$IOD" topo --xml "$tmp/trunc.xml"
grep -q "truncated" "$tmp/err" && ok truncated_says_so || bad truncated_says_so
printf 'not xml at all\n' >"$tmp/text.xml"
expect not_xml 2 "$IOD" topo --xml "$tmp/text.xml"
grep -v NUMANode "$tmp/dgx.xml" >"$tmp/nonuma.xml"
expect no_numa 2 "$IOD" topo --xml "$tmp/nonuma.xml"
grep -q "no NUMA node" "$tmp/err" && ok no_numa_says_so || bad no_numa_says_so
sed 's/nodeset="[^"]*"//g' "$tmp/dgx.xml" >"$tmp/nonodeset.xml"
expect hwloc_rejects 2 "$IOD" topo --xml "$tmp/nonodeset.xml"
expect unknown_model 2 "$IOD" topo --model dgx-h10
grep -q 'did you mean "dgx-h100"' "$tmp/err" && ok did_you_mean || bad did_you_mean
expect bad_format 2 "$IOD" topo --model dgx-h100 -o yaml
expect both_sources 2 "$IOD" topo --model dgx-h100 --xml "$tmp/dgx.xml"
expect stray_argument 2 "$IOD" topo extra

# this machine: CPUs, NUMA and (if it has one on PCI) a NIC; stable output
if [ -n "${HWLOC_XMLFILE:-}" ]; then
	skip_check discover "HWLOC_XMLFILE is set"
else
	expect discover 0 "$IOD" topo
	grep -q "NUMANode" "$tmp/out" && grep -q "Compute units" "$tmp/out" && ok discover_numa || bad discover_numa
	# memory sizes aside: a VM's memory can change between two readings
	sed 's/[0-9.]* [KMGT]i\{0,1\}B//g' "$tmp/out" >"$tmp/d1"
	"$IOD" topo 2>/dev/null | sed 's/[0-9.]* [KMGT]i\{0,1\}B//g' >"$tmp/d2"
	cmp -s "$tmp/d1" "$tmp/d2" && ok discover_stable || bad discover_stable
	expect discover_json 0 "$IOD" topo -o json
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["pus"]>=1 and len(d["numa"])>=1' \
		"$tmp/out" && ok discover_json_parses || bad discover_json_parses
fi
