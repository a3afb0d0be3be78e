#!/bin/sh
# run.sh IOD: the README's main job: a local 4-node cluster (3 control-plane
# servers + 4 node agents, 4 simulated GPUs each), the seed's service topology
# deployed onto it (what fits runs; what does not is reported with reasons),
# the replicas with their GPUs, phases and endpoints' health, a worker's
# output, then `iod down`. Leaves nothing running, even on Ctrl-C or error.
set -eu
IOD=${1:-build/iod}
export IOD_STATE_DIR="${IOD_STATE_DIR:-${TMPDIR:-/tmp}/iod-run-$$}"
cleanup() {
	echo
	echo "\$ iod down"
	"$IOD" down || true
	rm -rf "$IOD_STATE_DIR"
}
trap cleanup EXIT INT TERM

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
sleep 1 # let the workers report a first steps/s
echo
echo "\$ iod get replicas"
"$IOD" get replicas
echo
echo "\$ iod get endpoints"
"$IOD" get endpoints
echo
echo "\$ iod logs worker-node-0 | tail -2"
"$IOD" logs worker-node-0 | tail -2 || true
