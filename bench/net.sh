#!/bin/sh
# bench/net.sh IOD: the measurements behind `make bench-net` (bench_net.c
# reads the "RAW <path> <key> <value>" lines and prints the BENCH lines).
#
# One `iod up --netns --nodes 2` cluster (2 leaves, 2 spines): two replicas
# on different nodes (anti-affinity), so every packet between them crosses
# leaf, spine, leaf. The same run builds the kernel path on the same hosts
# and underlay: in each host namespace a Linux bridge with a kernel VXLAN
# device (VNI 4242, UDP 4790, a static flood entry to the peer host), and a
# "replica" namespace on a veth in that bridge, MTU 1400 like iod's
# replicas (what flannel or Calico VXLAN build). Then, for each path:
#   tcp1/tcp8   iperf3 TCP, 1 and 8 streams (receiver's bits/s);
#   udp64       iperf3 UDP, 64-byte payloads, unlimited rate (received pps);
#   rr          UDP request/response at a fixed rate (p50/p99 of the RTT);
#   cpu         CPU seconds of both iperf3 ends (their own report), both
#               agents (utime+stime: the virtual switch threads) and the
#               machine's softirq time, during tcp1 and udp64.
# Environment: IOD_BENCH_SECONDS (each iperf3 run, default 3),
# IOD_BENCH_RR_RATE (requests/s, default 1000).
set -u
IOD=$1
SECS=${IOD_BENCH_SECONDS:-3}
RATE=${IOD_BENCH_RR_RATE:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tests/integration/lib.sh"
T=$(mktemp -d /tmp/iodbnet.XXXXXX)
export IOD_STATE_DIR="$T/state"
K="iodbk$$" # the kernel path's replica namespaces
BASE=$(free_port_block $$)
PORT=$((BASE + 50))
cleanup() {
	ip netns del "$K-1" 2>/dev/null
	ip netns del "$K-2" 2>/dev/null
	"$IOD" down --grace 2s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
die() {
	echo "net.sh: $*" >&2
	exit 1
}

"$IOD" up --netns --nodes 2 --api-port "$BASE" --raft-port $((BASE + 10)) >"$T/up.out" 2>&1 ||
	die "iod up --netns: $(tail -3 "$T/up.out")"
P=$(sed -n 's/^underlay \(iodu[0-9a-f]*\)-\*.*/\1/p' "$T/up.out" | head -1)
[ -n "$P" ] || die "no underlay name in: $(cat "$T/up.out")"
cat >"$T/spec.yaml" <<YAML
services:
  - name: bnet
    type: stateless
    replicas: 2
    placement: {anti_affinity: node}
    command: sleep 100000
YAML
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.out" 2>&1 || die "deploy: $(cat "$T/deploy.out")"
rep() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$1': print(i['value'].get('$2', ''))"
}
both() { rep bnet-0 addr | grep -q '^10\.200\.' && rep bnet-1 addr | grep -q '^10\.200\.'; }
wait_for 40 both || die "replicas never got overlay addresses"
A1=$(rep bnet-1 addr)
NS0=$(ip netns | awk '/^iod-[0-9a-f]*-bnet-0/{print $1}')
NS1=$(ip netns | awk '/^iod-[0-9a-f]*-bnet-1/{print $1}')
[ -n "$NS0" ] && [ -n "$NS1" ] || die "replica namespaces not found"
# reachable: a TCP connect to a closed port is refused (a reset came back)
tcp_reach() {
	ip netns exec "$1" python3 -c "
import socket, sys
try: socket.create_connection(('$2', 9), timeout=1)
except ConnectionRefusedError: sys.exit(0)
except OSError: sys.exit(1)" 2>/dev/null
}
reach() { tcp_reach "$NS0" "$A1"; }
wait_for 20 reach || die "iod path: $A1 not reachable from bnet-0"

# the kernel path on the same hosts
hip() { ip -n "$P-h$1" -4 -o addr show dev u0 | awk '{print $4}' | cut -d/ -f1; }
H1=$(hip 1) H2=$(hip 2)
for i in 1 2; do
	h="$P-h$i"
	[ $i = 1 ] && peer=$H2 || peer=$H1
	[ $i = 1 ] && self=$H1 || self=$H2
	ip netns add "$K-$i" || die "ip netns add $K-$i"
	ip -n "$h" link add kbr0 type bridge &&
		ip -n "$h" link add kvx0 type vxlan id 4242 local "$self" dstport 4790 nolearning dev u0 &&
		ip -n "$h" link set kvx0 master kbr0 &&
		bridge -n "$h" fdb append 00:00:00:00:00:00 dev kvx0 dst "$peer" &&
		ip -n "$h" link add kbh type veth peer name eth0 netns "$K-$i" &&
		ip -n "$h" link set kbh master kbr0 &&
		ip -n "$h" link set kvx0 up && ip -n "$h" link set kbh up && ip -n "$h" link set kbr0 up &&
		ip -n "$K-$i" addr add "10.199.0.$i/24" dev eth0 &&
		ip -n "$K-$i" link set eth0 mtu 1400 up && ip -n "$K-$i" link set lo up ||
		die "kernel path on $h"
done
kreach() { tcp_reach "$K-1" 10.199.0.2; }
wait_for 10 kreach || die "kernel path: 10.199.0.2 not reachable"

cat >"$T/rr.py" <<'EOF'
import socket, sys, time
mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if mode == "server":
    s.bind((addr, port))
    while True:
        b, a = s.recvfrom(2048)
        s.sendto(b, a)
rate, secs = float(sys.argv[4]), float(sys.argv[5])
s.settimeout(0.2)
gap, n, lat, lost = 1.0 / rate, int(rate * secs), [], 0
for _ in range(int(rate // 5)):  # warm up: caches, the switch's tables
    s.sendto(b"w" * 64, (addr, port))
    try: s.recv(2048)
    except socket.timeout: pass
t0 = time.perf_counter()
for i in range(n):
    nxt = t0 + i * gap
    while time.perf_counter() < nxt: pass
    msg = i.to_bytes(8, "big") + b"x" * 56
    a = time.perf_counter_ns()
    s.sendto(msg, (addr, port))
    try:
        while s.recv(2048)[:8] != msg[:8]: pass
        lat.append((time.perf_counter_ns() - a) / 1000.0)
    except socket.timeout:
        lost += 1
lat.sort()
pct = lambda p: lat[min(len(lat) - 1, int(p * (len(lat) - 1) + 0.5))] if lat else 0
print("%.1f %.1f %d %d" % (pct(0.5), pct(0.99), len(lat), lost))
EOF
cat >"$T/ipj.py" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); e = j.get("end", {}); c = e.get("cpu_utilization_percent", {})
secs = e.get("sum_received", e.get("sum", {})).get("seconds", 0) or 0
cpu = (c.get("host_total", 0) + c.get("remote_total", 0)) / 100.0 * secs
if sys.argv[2] == "tcp":
    r = e["sum_received"]; print("%.1f %d %.3f" % (r["bits_per_second"] / 1e6, r["bytes"], cpu))
else:
    s = e["sum"]; got = s["packets"] - s["lost_packets"]
    print("%.0f %d %.3f" % (got / s["seconds"], got, cpu))
EOF
AG=$(cat "$IOD_STATE_DIR"/node-*.pid 2>/dev/null)
ticks() { # both agents' utime+stime and the machine's softirq, in clock ticks
	t=0
	for p in $AG; do
		v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null)
		t=$((t + ${v:-0}))
	done
	echo $((t + $(awk '/^cpu /{print $8}' /proc/stat)))
}
HZ=$(getconf CLK_TCK)
# iperf PATH CNS SNS SIP KIND OPTS: one iperf3 run, RAW lines for it
iperf() {
	ip netns exec "$3" iperf3 -s -B "$4" -p "$PORT" -1 >/dev/null 2>&1 &
	sp=$!
	sleep 0.5
	t0=$(ticks)
	ip netns exec "$2" timeout $((SECS + 15)) iperf3 -c "$4" -p "$PORT" -t "$SECS" -J $6 \
		>"$T/$1-$5.json" 2>&1
	t1=$(ticks)
	wait $sp 2>/dev/null
	r=$(python3 "$T/ipj.py" "$T/$1-$5.json" "${5%%[0-9]*}" 2>/dev/null) || {
		echo "net.sh: $1 $5: $(head -c 300 "$T/$1-$5.json")" >&2
		return 1
	}
	set -- "$1" "$5" $r $(((t1 - t0)))
	cpu=$(python3 -c "print('%.3f' % ($5 + $6 / $HZ))")
	case $2 in
	tcp*) echo "RAW $1 ${2}_mbps $3"; echo "RAW $1 ${2}_bytes $4" ;;
	*) echo "RAW $1 ${2}_pps $3"; echo "RAW $1 ${2}_packets $4" ;;
	esac
	echo "RAW $1 ${2}_cpu_s $cpu"
}
# run PATH CNS SNS SIP
run() {
	iperf "$1" "$2" "$3" "$4" tcp1 ""
	iperf "$1" "$2" "$3" "$4" tcp8 "-P 8"
	iperf "$1" "$2" "$3" "$4" udp64 "-u -l 64 -b 0"
	ip netns exec "$3" python3 "$T/rr.py" server "$4" $((PORT + 1)) &
	rs=$!
	sleep 0.3
	set -- "$1" $(ip netns exec "$2" python3 "$T/rr.py" client "$4" $((PORT + 1)) "$RATE" "$SECS")
	kill $rs 2>/dev/null
	wait $rs 2>/dev/null
	echo "RAW $1 rr_p50_us $2"
	echo "RAW $1 rr_p99_us $3"
	echo "RAW $1 rr_samples $4"
	echo "RAW $1 rr_lost $5"
}
echo "net.sh: underlay $P, iod $NS0 -> $A1, kernel $K-1 -> 10.199.0.2, ${SECS}s runs" >&2
run iod "$NS0" "$NS1" "$A1"
run kernel "$K-1" "$K-2" 10.199.0.2
echo "RAW all load $(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)"
# IOD_BENCH_PROFILE=1: one more iperf3 TCP run on iod's path with perf stat
# on both agents (the switch threads): CPU and syscalls per GB, on stderr
if [ "${IOD_BENCH_PROFILE:-0}" = 1 ] && command -v perf >/dev/null; then
	pids=$(echo $AG | tr ' ' ,)
	ev=task-clock,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_poll
	perf stat -x, -e "$ev" -p "$pids" -o "$T/perf.txt" -- sleep $((SECS + 1)) &
	pf=$!
	ip netns exec "$NS1" iperf3 -s -B "$A1" -p "$PORT" -1 >/dev/null 2>&1 &
	sleep 0.3
	ip netns exec "$NS0" iperf3 -c "$A1" -p "$PORT" -t "$SECS" -J >"$T/prof.json" 2>&1
	wait $pf
	gb=$(python3 -c "import json; print(json.load(open('$T/prof.json'))['end']['sum_received']['bytes'] / 1e9)")
	awk -F, -v gb="$gb" '$1 ~ /^[0-9.]+$/ { printf "net.sh profile: agents %s %.0f per GB (%.3f GB moved)\n", $3, $1 / gb, gb }' "$T/perf.txt" >&2
fi
