#!/bin/sh
# qos_netns.sh BUILD: QoS from the spec on iod's own network (docs/network.md).
# `iod up --netns --nodes 2`; a service with resources.network.bandwidth
# 100Mbps, two replicas on different nodes (anti-affinity). Checks: each
# Replica carries nic_bw_bps 100000000 (the value the scheduler counted on
# the NIC, the rate of its egress meter); iperf3 TCP from replica 0 to
# replica 1 across nodes gets 100 Mbit/s (iperf3 counts TCP payload: the
# meter counts Ethernet frames, 1,348 of every 1,414 bytes are payload, so
# the expected figure is 95.3; 80-110 asserted, see below); iperf3 UDP
# offered 200 Mbit/s is received at 100 Mbit/s +- 10% of frames. Each run
# omits its first second (-O 1): the meter's bucket starts full. Printed for reference, not asserted: a
# replica without a limit on the same path (the switch's own ceiling on this
# loaded 2-core machine is 100-160 Mbit/s, docs/network.md).
# Environment: IOD_QOS_SECONDS (each iperf3 run, default 5).
# Exit 0 pass, 1 fail, 77 skip.
set -u
BUILD=${1:-build}
. "$(dirname "$0")/lib.sh"
netns_setup "$BUILD" "network namespaces, AF_PACKET" python3 iperf3
SECS=${IOD_QOS_SECONDS:-5}
trap netns_cleanup EXIT
trap "exit 1" INT TERM
on_bad() { tail -5 "$IOD_STATE_DIR"/node-*.log 2>/dev/null; }

start_cluster "$T/up.out" --netns --nodes 2 --api-port "$BASE" --raft-port $((BASE + 10)) \
	--lease-ttl 2s || exit 1
cat >"$T/spec.yaml" <<YAML
services:
  - name: limited
    type: stateless
    replicas: 2
    placement: {anti_affinity: node}
    resources: {network: {bandwidth: 100Mbps}}
    command: iod demo-worker --role parameter-server --params 16
  - name: free
    type: stateless
    replicas: 1
    command: iod demo-worker --role parameter-server --params 16
YAML
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.out" 2>&1 || { cat "$T/deploy.out"; bad deploy; exit 1; }
rep() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$1': print(i['value'].get('$2', ''))"
}
addrs() {
	for r in limited-0 limited-1 free-0; do rep $r addr | grep -q '^10\.200\.' || return 1; done
}
wait_for 30 addrs || { bad "replicas never got overlay addresses"; exit 1; }
A1=$(rep limited-1 addr)
N0=$(rep limited-0 node) N1=$(rep limited-1 node) NF=$(rep free-0 node)
B0=$(rep limited-0 nic_bw_bps) B1=$(rep limited-1 nic_bw_bps) BF=$(rep free-0 nic_bw_bps)
if [ "$B0" = 100000000 ] && [ "$B1" = 100000000 ] && [ -z "$BF" ]; then
	ok "Replicas carry the scheduler's NIC bandwidth: nic_bw_bps=$B0 (free-0: none)"
else
	bad "nic_bw_bps: limited-0 '$B0' limited-1 '$B1' free-0 '$BF'"
fi
ns() { ip netns | awk "/^iod-[0-9a-f]*-$1 /{print \$1} /^iod-[0-9a-f]*-$1\$/{print \$1}" | head -1; }
NS0=$(ns limited-0) NS1=$(ns limited-1) NSF=$(ns free-0)
[ -n "$NS0" ] && [ -n "$NS1" ] && [ -n "$NSF" ] || { bad "replica namespaces: '$NS0' '$NS1' '$NSF'"; exit 1; }
sleep 1 # the switches' next watch round: every replica's address in every table

# run CNS KIND OPTS...: iperf3 from CNS to limited-1; prints Mbit/s received
PORT=$((BASE + 50))
run() {
	_c=$1 _k=$2
	shift 2
	ip netns exec "$NS1" iperf3 -s -B "$A1" -p "$PORT" -1 >/dev/null 2>&1 &
	_s=$!
	sleep 0.5
	ip netns exec "$_c" timeout $((SECS + 15)) iperf3 -c "$A1" -p "$PORT" -t "$SECS" -O 1 -J "$@" \
		>"$T/$_k.json" 2>"$T/$_k.err"
	wait $_s 2>/dev/null
	python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
e = d['end']
s = e.get('sum_received') or e.get('sum')
print('%.1f' % (s['bits_per_second'] / 1e6))" "$T/$_k.json" 2>/dev/null || echo "error: $(head -c 200 "$T/$_k.json")"
}
in_range() { python3 -c "import sys; v=float(sys.argv[1]); sys.exit(0 if $2 <= v <= $3 else 1)" "$1" 2>/dev/null; }

tcp=$(run "$NS0" tcp)
echo "info limited-0 ($N0) -> limited-1 ($N1): TCP $tcp Mbit/s (payload), ${SECS}s"
# TCP's figure depends on how it recovers from the policer's drops on this
# loaded shared machine (93-99 measured): a looser lower bound than UDP's
if in_range "$tcp" 80 110; then
	ok "TCP held to 100 Mbit/s: $tcp Mbit/s of payload (95.3 expected, 80-110 asserted)"
else
	bad "TCP through a 100 Mbit/s meter: $tcp Mbit/s (want 80-110)"
fi
# UDP, 1,358-byte datagrams (1,400-byte frames at MTU 1400), 200 Mbit/s offered
udp=$(run "$NS0" udp -u -b 200M -l 1358)
udp_frames=$(python3 -c "print('%.1f' % (float('$udp') * 1400 / 1358))" 2>/dev/null || echo "$udp")
echo "info limited-0 -> limited-1: UDP offered 200 Mbit/s, received $udp Mbit/s payload = $udp_frames Mbit/s of frames"
if in_range "$udp_frames" 90 110; then
	ok "UDP offered 200 Mbit/s received at 100 Mbit/s +-10% of frames: $udp_frames"
else
	bad "UDP through a 100 Mbit/s meter: $udp_frames Mbit/s of frames (want 90-110)"
fi
free=$(run "$NSF" free)
echo "info free-0 ($NF) -> limited-1 ($N1), no limit: TCP $free Mbit/s (the path's ceiling here)"
echo "BENCH net.qos limit_mbps=100 tcp_mbps=$tcp udp_frames_mbps=$udp_frames unlimited_tcp_mbps=$free seconds=$SECS"

stop_cluster 5s
checks_ok
