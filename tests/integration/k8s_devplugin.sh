#!/bin/sh
# k8s_devplugin.sh: `iod devplugin` against a fake kubelet written with
# Debian's python3-grpcio (tests/integration/k8s_fake_kubelet.py), from
# iod's own src/k8s/deviceplugin.proto. Needs no root.
# usage: sh tests/integration/k8s_devplugin.sh BUILD_DIR
# iod-test: parallel
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:-build}
IOD="$ROOT/$BUILD/iod"
[ -x "$IOD" ] || IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "FAIL: no iod binary in $BUILD"; exit 1; }
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: /usr/bin/python3 (Debian's) is not installed"; exit 77; }
"$PY" -c 'import grpc' 2>/dev/null || { echo "skip: python3-grpcio is not installed"; exit 77; }
"$PY" -c 'import grpc_tools.protoc' 2>/dev/null ||
	{ echo "skip: python3-grpc-tools is not installed"; exit 77; }
"$PY" -c 'import google.protobuf' 2>/dev/null ||
	{ echo "skip: python3-protobuf is not installed"; exit 77; }
T=$(mktemp -d /tmp/iod-devplugin.XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
mkdir -p "$T/pairs"
# the python side stops every plugin it starts, also on failure
"$PY" "$HERE/k8s_fake_kubelet.py" "$IOD" "$ROOT/src/k8s/deviceplugin.proto" "$T"
