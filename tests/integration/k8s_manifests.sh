#!/bin/sh
# k8s_manifests.sh: deploy/kubernetes/*.yaml checked client-side against the
# Kubernetes schema of the fields they use (tests/integration/k8s_manifests.py
# says why not kubectl), with a self-test that each kind of mistake is caught.
# No live API server is involved (docs/kubernetes.md). Needs no root.
# usage: sh tests/integration/k8s_manifests.sh BUILD_DIR
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:-build}
IOD="$ROOT/$BUILD/iod"
[ -x "$IOD" ] || IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "FAIL: no iod binary in $BUILD"; exit 1; }
PY=/usr/bin/python3
"$PY" -c 'import yaml' 2>/dev/null || { echo "skip: python3-yaml is not installed"; exit 77; }
"$PY" "$HERE/k8s_manifests.py" "$IOD" "$ROOT"/deploy/kubernetes/*.yaml --self-test
