#!/bin/sh
# k8s_manifests.sh: deploy/kubernetes/*.yaml checked client-side against the
# Kubernetes schema of the fields they use (tests/integration/k8s_manifests.py
# says why not kubectl), with a self-test that each kind of mistake is caught.
# No live API server is involved (docs/kubernetes.md). Needs no root.
# usage: sh tests/integration/k8s_manifests.sh BUILD_DIR
# iod-test: parallel
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:-build}
IOD="$ROOT/$BUILD/iod"
[ -x "$IOD" ] || IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "FAIL: no iod binary in $BUILD"; exit 1; }
PY=/usr/bin/python3
"$PY" -c 'import yaml' 2>/dev/null || { echo "skip: python3-yaml is not installed"; exit 77; }
T=$(mktemp -d /tmp/iod-manifests.XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
# `iod topo -o dra` output is checked by the same schema (ResourceSlice)
for m in dgx-h100 hgx-a100-8 pcie-8gpu pcie-4gpu-nvlink-pairs; do
	"$IOD" topo --model "$m" -o dra --node "node-$m" >"$T/dra-$m.yaml"
done
"$PY" "$HERE/k8s_manifests.py" "$IOD" "$ROOT"/deploy/kubernetes/*.yaml "$T"/dra-*.yaml --self-test
