#!/bin/sh
# deps.sh: make sure the Debian packages iod builds and tests with are present.
#
# `make` runs this first. As root it installs what is missing (one
# `apt-get update`, then `apt-get install -y`); as another user it prints the
# exact command and fails, so nothing half-builds. It never downloads code any
# other way: every dependency is a Debian package (see docs/DEPENDENCIES.md).
set -eu

# Libraries and tools the build needs.
BUILD_PKGS="build-essential pkg-config libuv1-dev libraft-dev libyaml-dev \
libjansson-dev libhwloc-dev hwloc libpcap-dev libmicrohttpd-dev libdpdk-dev \
libseccomp-dev libcap-ng-dev libncurses-dev \
clang libclang-rt-14-dev libgnutls28-dev libxxhash-dev liburing-dev libnghttp2-dev libucx-dev"
# Tools the tests and benchmarks drive (independent dissector, peers, plots).
TEST_PKGS="tshark python3 graphviz gnuplot-nox iproute2 nftables etcd-server etcd-client \
haproxy wrk iperf3 nginx-light cppcheck clang-format tmux prometheus chromium chromium-driver python3-selenium fio containernetworking-plugins \
python3-grpcio python3-grpc-tools python3-protobuf ucx-utils"

# one dpkg-query for them all (a call per package took seconds on every make)
# shellcheck disable=SC2086
installed=$(dpkg-query -W -f='${Package} ${Status}\n' $BUILD_PKGS $TEST_PKGS 2>/dev/null |
	awk '/ install ok installed$/ {print $1}')
missing=""
for p in $BUILD_PKGS $TEST_PKGS; do
	echo "$installed" | grep -qx "$p" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "iod: missing Debian packages:$missing" >&2
	echo "iod: run as root:  apt-get update && apt-get install -y$missing" >&2
	exit 1
fi
echo "iod: installing Debian packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >&2
