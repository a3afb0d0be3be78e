#!/bin/sh
# ckpt_up.sh BUILD: the spec's storage: honoured on `iod up` (docs/storage.md,
# "Provisioning"): a stateful parameter server of a spec with two tiers gets
# its checkpoint store from the agent (one directory per tier in its data
# directory, $IOD_CKPT_TIERS / $IOD_CKPT_DIR in its environment), the demo
# picks it up with no --ckpt-dir, and its saves land in the fastest tier.
# Exit status: 0 pass, 77 skip, 1 fail.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
BASE=$((16000 + ($$ % 300) * 20))
export IOD_SERVER="127.0.0.1:$((BASE + 10))"
. "$(dirname "$0")/lib.sh"
cleanup() {
	stop_cluster 2s
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

start_cluster "$T/up.log" --nodes 1 --servers 1 --gpus-per-node 1 --lease-ttl 2s \
	--api-port $((BASE + 10)) --raft-port $((BASE + 0)) --no-mesh --election-timeout 1s \
	--heartbeat 100ms || exit 1
cat >"$T/spec.yaml" <<'EOF'
storage:
  replicas: 1
  tiers:
    - {medium: PMem, quota: 20%}
    - {medium: NVMe, quota: 80%}
services:
  - name: ps
    type: stateful
    command: iod
    args: [demo-worker, --role, parameter-server, --params, "1000", --ckpt-every, "5"]
  - name: w
    type: stateless
    command: iod
    args: [demo-worker, --role, worker, --ps-service, ps, --compute-ms, "1", --http-port, "0"]
    depends_on: [ps]
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }
pmem() { find "$IOD_STATE_DIR" -type d -path '*/replicas/ps-0/data/ckpt/PMem' 2>/dev/null | head -1; }
saved() { [ -n "$(pmem)" ] && ls "$(pmem)" 2>/dev/null | grep -q '^step-'; }
if wait_for 20 saved; then
	ok "stateful_replica_saves_into_its_provisioned_fastest_tier"
else
	bad "no checkpoint in the PMem tier: $(find "$IOD_STATE_DIR" -path '*ps-0*' | head -20)"
	"$IOD" logs ps-0 2>&1 | tail -20
	exit 1
fi
D=$(dirname "$(pmem)")
"$IOD" logs ps-0 >"$T/ps.log" 2>&1
if [ -d "$D/NVMe" ] && grep -q "checkpoint store from the spec: PMem:2000:$D/PMem,NVMe:8000:$D/NVMe" "$T/ps.log"; then
	ok "both_tiers_provisioned_and_passed_in_the_environment"
else
	bad "tiers: $(ls "$D") $(grep -i checkpoint "$T/ps.log" | head -3)"
	exit 1
fi
