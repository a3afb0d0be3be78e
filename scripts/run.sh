#!/bin/sh
# run.sh IOD: the README's main job. For now: validate the example topology
# and show this machine's hardware topology. Later issues turn it into a
# running local cluster (`iod up`, `iod deploy`, `iod get replicas`, `iod down`).
set -eu
IOD=${1:-build/iod}
echo "\$ iod validate -f examples/service-topology.yaml"
"$IOD" validate -f examples/service-topology.yaml
echo
echo "\$ iod topo"
"$IOD" topo
