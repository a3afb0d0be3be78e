#!/bin/sh
# sched_cli.sh: `iod schedule` end to end on the seed's example: the placement
# of what fits, the exact reasons for the rest, exit code 4 for a partial
# placement, 0 when everything fits, 2 for bad usage, byte-identical JSON on
# reruns. $1 is the build directory; uses the sanitizer binary.
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
IOD="$1/san/iod"
[ -x "$IOD" ] || IOD="$1/iod"
SPEC=examples/service-topology.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # check DESCRIPTION COMMAND...: ok or bad as COMMAND succeeds
	d=$1
	shift
	if "$@"; then ok "$d"; else bad "$d"; fi
}

"$IOD" schedule -f $SPEC --nodes 4 --gpus 16 >"$tmp/out" 2>&1
rc=$?
check "16 GPUs: exit 4 (partial), got $rc" [ $rc -eq 4 ]
check "parameter servers placed" grep -q '^parameter-server-2 ' "$tmp/out"
check "one worker placed" grep -q '^worker-node-0 .*GPU0, GPU1, GPU2, GPU3' "$tmp/out"
check "exact reason for worker-node-7" grep -q \
	'worker-node-7: needs 4 GPUs on one node; best candidate n0 has 3 free (GPU1, GPU2, GPU3)' \
	"$tmp/out"
check "summary" grep -q '4 of 11 replicas placed' "$tmp/out"

"$IOD" schedule -f $SPEC --nodes 5 --model dgx-h100 >"$tmp/fit" 2>&1
rc=$?
check "5 x dgx-h100 fits everything: exit 0, got $rc" [ $rc -eq 0 ]
check "11 of 11" grep -q '11 of 11 replicas placed' "$tmp/fit"

"$IOD" schedule -f $SPEC --nodes 4 --gpus 16 -o json --explain >"$tmp/a.json" 2>&1
"$IOD" schedule -f $SPEC --nodes 4 --gpus 16 -o json --explain >"$tmp/b.json" 2>&1
check "json is byte-identical across runs" cmp -s "$tmp/a.json" "$tmp/b.json"
check "json has explanations" grep -q '"candidates"' "$tmp/a.json"
check "json names reasons" grep -q '"reason": "gpus"' "$tmp/a.json"

"$IOD" schedule -f $SPEC --nodes 4 --gpus 15 >"$tmp/bad" 2>&1
rc=$?
check "uneven --gpus: exit 2, got $rc" [ $rc -eq 2 ]
check "uneven --gpus says why" grep -q 'does not divide evenly' "$tmp/bad"
"$IOD" schedule -f $SPEC --nodes 4 >"$tmp/bad" 2>&1
check "missing --model/--gpus: exit 2" [ $? -eq 2 ]
"$IOD" schedule -f $SPEC --nodes 4 --model no-such-model >"$tmp/bad" 2>&1
check "unknown model: exit 2" [ $? -eq 2 ]
"$IOD" schedule --help >"$tmp/help" 2>&1
check "--help" grep -q 'usage: iod schedule' "$tmp/help"

"$IOD" schedule -f $SPEC --nodes 4 --gpus 16 --strict >"$tmp/strict" 2>&1
rc=$?
check "strict: exit 4, got $rc" [ $rc -eq 4 ]
check "strict: nothing placed" grep -q '0 of 11 replicas placed (strict deploy rolled back)' \
	"$tmp/strict"
checks_ok
