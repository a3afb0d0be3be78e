#!/bin/sh
# run.sh IOD: the README's main job: a local 4-node cluster (3 control-plane
# servers + 4 node agents, 4 simulated GPUs each), the seed's service topology
# deployed onto it (what fits runs; what does not is reported with reasons),
# the replicas with their GPUs, phases and endpoints' health, a worker's
# output, then `iod down`. Leaves nothing running, even on Ctrl-C or error.
set -eu
IOD=${1:-build/iod}
export IOD_STATE_DIR="${IOD_STATE_DIR:-${TMPDIR:-/tmp}/iod-run-$$}"
VIEW_PID=""
cleanup() {
	[ -n "$VIEW_PID" ] && kill "$VIEW_PID" 2>/dev/null && wait "$VIEW_PID" 2>/dev/null
	echo
	echo "\$ iod down"
	"$IOD" down || true
	rm -rf "$IOD_STATE_DIR"
}
trap cleanup EXIT
trap "exit 1" INT TERM

echo "\$ iod up --nodes 4 --gpus-per-node 4"
"$IOD" up --nodes 4 --gpus-per-node 4
echo
echo "\$ iod deploy -f examples/service-topology.yaml"
rc=0
"$IOD" deploy -f examples/service-topology.yaml || rc=$?
# 0: everything placed; 4: partly placed (the unplaced ones are listed above)
[ "$rc" -eq 0 ] || [ "$rc" -eq 4 ] || exit "$rc"
# Wait (at most 10 s) until every placed replica runs or is healthy.
i=0
while [ $i -lt 100 ]; do
	pending=$("$IOD" get replicas -o json | grep -c '"phase": "\(pending\|starting\)"' || true)
	[ "$pending" -eq 0 ] && break
	sleep 0.1
	i=$((i + 1))
done
sleep 2 # let the workers report a first steps/s
echo
echo "\$ iod get replicas"
"$IOD" get replicas
echo
echo "\$ iod get endpoints"
"$IOD" get endpoints
echo
echo "\$ iod logs worker-node-0 | tail -2"
"$IOD" logs worker-node-0 | tail -2 || true
echo
echo "\$ iod top --once --view gpus"
"$IOD" top --once --view gpus || true
# The live view: the cluster as a picture, updated over SSE.
VIEW=${IOD_VIEW:-127.0.0.1:7700}
"$IOD" viz net-topology --live --listen "$VIEW" >/dev/null 2>&1 &
VIEW_PID=$!
echo
echo "open the live view:  http://$VIEW/"
echo "watch it in a terminal:  $IOD top   (: view, / filter, s sort, q quit)"
if [ -t 0 ]; then
	printf "press Enter to stop the cluster "
	read -r _ || true
fi
