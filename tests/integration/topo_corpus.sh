#!/bin/sh
# topo_corpus.sh BUILD: iod reads real hwloc exports right.
#
# For every file of tests/fixtures/hwloc/ (hwloc's own test topologies; see
# SOURCES.md there) with its line in expected.txt:
#   - a GPU count: `iod topo --xml` loads and prints it (exit 0), -o json has
#     that many GPUs, and `-o xml` writes a document that loads again with the
#     same GPUs and the same `-o matrix` table (GPU links, CPU and NUMA
#     affinity);
#   - "refused": exit 2 and exactly one line on stderr.
# One RESULT line for the whole corpus; each failure is named.
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
need jq
D=tests/fixtures/hwloc
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
# passes are counted here (one RESULT line for them all); lib.sh's bad
# prints each failure with its own
pass=0 rt=0 refused=0
# (jq, not python3: two of these per file, and a python3 start costs
# several times a jq one)
gpus() { jq '[.devices[] | select(.kind == "gpu")] | length' "$1" 2>/dev/null; }

[ "$(ls "$D"/*.xml | wc -l)" = "$(wc -l <"$D/expected.txt")" ] ||
	bad corpus "expected.txt does not list every file"
while read -r name want; do
	f="$D/$name"
	[ -f "$f" ] || { bad "$name" "missing"; continue; }
	"$IOD" topo --xml "$f" >"$T/text" 2>"$T/err"; rc=$?
	if [ "$want" = refused ]; then
		if [ $rc = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && [ ! -s "$T/text" ]; then
			pass=$((pass + 1)); refused=$((refused + 1))
		else
			bad "$name" "want exit 2 and one line, got exit $rc, $(wc -l <"$T/err") lines"
		fi
		continue
	fi
	[ $rc = 0 ] && [ -s "$T/text" ] || { bad "$name" "load exit $rc: $(head -2 "$T/err")"; continue; }
	"$IOD" topo --xml "$f" -o json >"$T/a.json" 2>/dev/null
	got=$(gpus "$T/a.json")
	[ "$got" = "$want" ] || { bad "$name" "$got GPUs, want $want"; continue; }
	"$IOD" topo --xml "$f" -o xml >"$T/rt.xml" 2>"$T/err"; rc=$?
	[ $rc = 0 ] || { bad "$name" "-o xml exit $rc: $(head -2 "$T/err")"; continue; }
	"$IOD" topo --xml "$T/rt.xml" -o json >"$T/b.json" 2>"$T/err"; rc=$?
	[ $rc = 0 ] || { bad "$name" "its -o xml does not load: $(head -2 "$T/err")"; continue; }
	[ "$(gpus "$T/b.json")" = "$want" ] || { bad "$name" "round trip has $(gpus "$T/b.json") GPUs"; continue; }
	"$IOD" topo --xml "$f" -o matrix >"$T/a.m" 2>/dev/null
	"$IOD" topo --xml "$T/rt.xml" -o matrix >"$T/b.m" 2>/dev/null
	cmp -s "$T/a.m" "$T/b.m" || { bad "$name" "round trip changes the link matrix"; diff "$T/a.m" "$T/b.m" | head -6; continue; }
	pass=$((pass + 1)); rt=$((rt + 1))
done <"$D/expected.txt"
echo "topo corpus: $((pass + LIB_FAIL)) files, $rt round-trip, $refused refused with one line, $LIB_FAIL failed"
echo "RESULT $pass 0 0"
