#!/bin/sh
# config_up.sh BUILD: `iod config` on a real local cluster (`iod up`, 3 servers,
# 3 agents, one running replica per node):
#   1. an unknown key and a bad value exit 2, with a suggestion, and write nothing;
#   2. a valid set reaches every agent and each acknowledges it within 1 s
#      (the ack's time minus the change's time, per node), no replica restarts;
#   3. rdma on nodes without an RDMA device: each falls back to tcp and says
#      so in `iod config status` and `iod events`; the drift gauge in /metrics;
#   4. rollback to the first revision restores shm on every node;
#   5. history lists every revision; -o json parses.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed to read JSON"; exit 77; }
[ -d /sys/class/infiniband ] && [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] && RDMA=1 || RDMA=0

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
BASE=$((14000 + ($$ % 300) * 20))
API="127.0.0.1:$((BASE + 10))"
TEL=$((BASE + 15))
export IOD_SERVER="$API,127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
cleanup() {
	"$IOD" down --grace 5s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
FAILED=0
ok() { echo "ok   $1 (t=$(($(date +%s) - T0))s)"; echo "RESULT 1 0 0"; }
bad() {
	echo "FAIL $1"; echo "RESULT 0 1 0"; FAILED=1
	for f in "$IOD_STATE_DIR"/node-*.log; do echo "--- $f"; grep -i config "$f" | tail -5; done
}
. "$(dirname "$0")/lib.sh"

"$IOD" up --nodes 3 --gpus-per-node 1 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --no-mesh --telemetry-port $TEL --election-timeout 1s \
	--heartbeat 100ms >"$T/up.log" 2>&1 || { cat "$T/up.log"; bad "iod up"; exit 1; }
cat >"$T/spec.yaml" <<'EOF'
services:
  - name: idle
    type: stateless
    replicas: 3
    command: [sh, -c, 'exec sleep 600']
    placement: {strategy: spread}
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }
running() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
it = json.load(sys.stdin)['items']
sys.exit(0 if len(it) == 3 and all(i['value'].get('phase') in ('running', 'healthy') for i in it) else 1)"
}
wait_for 30 running || { bad "replicas running"; "$IOD" get replicas; exit 1; }
restarts() {
	"$IOD" get replicas -o json | python3 -c "
import json, sys
print(sum(i['value'].get('restarts', 0) for i in json.load(sys.stdin)['items']))"
}
r0=$(restarts)

# 1. bad input: exit 2 with a suggestion, nothing written
out=$("$IOD" config set service_mesh.transprt shm 2>&1); rc1=$?
out2=$("$IOD" config set service_mesh.transport carrier-pigeon 2>&1); rc2=$?
out3=$("$IOD" config set telemetry.interval 1ms 2>&1); rc3=$?
hist=$("$IOD" config history 2>&1)
if [ $rc1 = 2 ] && [ $rc2 = 2 ] && [ $rc3 = 2 ] &&
	echo "$out" | grep -q 'did you mean "service_mesh.transport"' &&
	echo "$out2" | grep -q 'tcp|shm|rdma|auto' && echo "$hist" | grep -q "no configuration changes"; then
	ok "unknown_key_and_bad_value_exit_2"
else
	bad "unknown_key_and_bad_value_exit_2 ($rc1 $rc2 $rc3: $out / $out2 / $out3 / $hist)"
fi

# ack_lag REV VALUE: every node acknowledged REV with transport VALUE; prints
# the largest ack time - change time (ms)
ack_lag() {
	"$IOD" config status -o json >"$T/st.json" && "$IOD" config history -o json >"$T/h.json" &&
		python3 - "$1" "$2" "$T" <<'EOF'
import json, sys
rev, want, t = int(sys.argv[1]), sys.argv[2], sys.argv[3]
st = json.load(open(t + "/st.json"))
hist = {h["rev"]: h for h in json.load(open(t + "/h.json"))}
assert len(st["nodes"]) == 3, st
lag = 0
for n in st["nodes"]:
    assert n["applied"] and n["acked_rev"] >= rev, n
    assert n["values"].get("service_mesh.transport", "tcp") == want, n
    lag = max(lag, n["time_ms"] - hist[n["acked_rev"]]["time_ms"])
print(lag)
EOF
}

# 2. a valid set reaches every agent, each acknowledges within 1 s
"$IOD" config set service_mesh.transport shm --wait 5s >"$T/set.log" 2>&1; rc=$?
REV1=$(awk '/^revision/ {sub(":", "", $2); print $2; exit}' "$T/set.log")
lag=$(ack_lag "$REV1" shm 2>"$T/lag.err")
if [ $rc = 0 ] && [ -n "$lag" ] && [ "$lag" -le 1000 ] && [ "$(restarts)" = "$r0" ] &&
	[ "$("$IOD" config get service_mesh.transport)" = "shm" ]; then
	ok "set_reaches_every_agent_within_1s (rev $REV1, slowest ack ${lag} ms; $(tail -1 "$T/set.log" | sed 's/.*applied in //'))"
else
	bad "set_reaches_every_agent_within_1s (rc $rc lag '$lag' restarts $(restarts) vs $r0)"
	cat "$T/set.log" "$T/lag.err"
fi

# 3. rdma: without a device every node runs tcp and says why
"$IOD" config set service_mesh.transport rdma --wait 5s >"$T/rdma.log" 2>&1; rc=$?
REV2=$(awk '/^revision/ {sub(":", "", $2); print $2; exit}' "$T/rdma.log")
"$IOD" config status >"$T/status.txt" 2>&1
drift=$(curl -s "http://127.0.0.1:$TEL/metrics" | awk '$1 == "iod_config_drift" {print $2}')
if [ $RDMA = 1 ]; then
	[ $rc = 0 ] && ok "rdma_with_a_device_applies" || bad "rdma_with_a_device_applies"
elif [ $rc = 0 ] && [ "$(ack_lag "$REV2" tcp)" -le 1000 ] 2>/dev/null &&
	[ "$(grep -c 'service_mesh.transport=tcp (wanted rdma: no RDMA device' "$T/status.txt")" = 3 ] &&
	"$IOD" events 2>/dev/null | grep -q "config .*ack.node-1 .*fallback service_mesh.transport=tcp" &&
	[ "$drift" = 1 ]; then
	ok "rdma_without_a_device_falls_back_to_tcp (drift gauge $drift)"
else
	bad "rdma_without_a_device_falls_back_to_tcp (rc $rc, drift '$drift')"
	cat "$T/status.txt"; "$IOD" events 2>&1 | grep config | tail -3
fi

# 4. rollback to the first revision: shm everywhere again
"$IOD" config rollback "$REV1" --wait 5s >"$T/rb.log" 2>&1; rc=$?
REV3=$(awk '/^revision/ {sub(":", "", $2); print $2; exit}' "$T/rb.log")
lag=$(ack_lag "$REV3" shm 2>"$T/lag.err")
drift=$(curl -s "http://127.0.0.1:$TEL/metrics" | awk '$1 == "iod_config_drift" {print $2}')
if [ $rc = 0 ] && [ -n "$lag" ] && [ "$lag" -le 1000 ] && [ "$drift" = 0 ] &&
	[ "$(restarts)" = "$r0" ]; then
	ok "rollback_restores_everywhere (rev $REV3, slowest ack ${lag} ms, drift $drift)"
else
	bad "rollback_restores_everywhere (rc $rc lag '$lag' drift '$drift')"; cat "$T/rb.log" "$T/lag.err"
fi

# 5. history names every revision, newest first; -o json parses
if "$IOD" config history -o json | python3 -c "
import json, sys
h = [x['rev'] for x in json.load(sys.stdin)]
sys.exit(0 if h == [$REV3, $REV2, $REV1] else 1)" &&
	"$IOD" config view -o json | python3 -c "
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if d['settings'] == {'service_mesh.transport': 'shm'} and len(d['keys']) >= 5 else 1)"; then
	ok "history_and_view"
else
	bad "history_and_view"; "$IOD" config history; "$IOD" config view
fi
exit $FAILED
