#!/bin/sh
# ar_netns.sh BUILD: adaptive routing in the real data plane. Two `iod dp run`
# edges (VXLAN over AF_PACKET) joined by a leaf-spine underlay of network
# namespaces with Linux ECMP (L4 hash) over two spines; one spine is slow:
# tbf-limited and kept busy by other traffic, so its queue adds delay.
#
#   hA -veth- [dp1] -veth- L1 ==(S1 fast | S2 tbf + cross traffic)== L2 -veth- [dp2] -veth- hB
#
# For each policy (ecmp, minrtt) a handful of TCP flows hA -> hB run at once
# for 2 s; captures on L1's two uplinks tell which spine carried each flow's
# data, and each flow's throughput is printed. Checks: ecmp uses both spines;
# minrtt puts a clear majority (>= 2/3) of the flows on the fast spine; the
# edge's dump shows pinned flows and reflected probes. A minrtt round that
# misses the 2/3 is run once more (and says so) before the check fails.
# Needs root, network namespaces, tc tbf, tshark; exits 77 with a reason if
# not. Always removes its namespaces, links, processes and files.
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
IOD="$BUILD/iod"
PY=/usr/bin/python3
FLOWS=${AR_FLOWS:-12}
if [ "$(id -u)" != 0 ]; then echo "skip: needs root (network namespaces)"; exit 77; fi
for t in ip tc dumpcap tshark; do
	command -v $t >/dev/null 2>&1 || { echo "skip: $t missing"; exit 77; }
done
if [ ! -x "$PY" ]; then echo "skip: $PY missing"; exit 77; fi
if [ ! -x "$IOD" ]; then echo "skip: $IOD not built"; exit 77; fi

T=$$
HA=arhA$T HB=arhB$T L1=arL1$T L2=arL2$T S1=arS1$T S2=arS2$T
A1=ara$T B1=arb$T E1=are$T E2=arf$T
NSS="$HA $HB $L1 $L2 $S1 $S2"
DIR=$(mktemp -d)
cleanup() {
	stop_bg
	for n in $NSS; do ip netns del "$n" 2>/dev/null; done
	for l in "$A1" "$B1" "$E1" "$E2"; do ip link del "$l" 2>/dev/null; done
	rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

if ! ip netns add "$HA" 2>/dev/null; then echo "skip: cannot create network namespaces"; exit 77; fi
for n in $HB $L1 $L2 $S1 $S2; do ip netns add "$n" || exit 1; done
# ECMP hashes the full L4 5-tuple (policy 1), as the issue asks. Probes are
# VXLAN packets to UDP 4789 from the probed source port (a reserved VNI marks
# them), so each hashes exactly like the flow's data on that port.
for n in $NSS; do
	ip -n "$n" link set lo up
	ip netns exec "$n" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
		net.ipv4.conf.default.rp_filter=0
	if ! ip netns exec "$n" sysctl -qw net.ipv4.fib_multipath_hash_policy=1 2>/dev/null; then
		echo "skip: ECMP hash policy 1 (L4) not supported by this kernel"; exit 77
	fi
done
# Endpoints: root-side veth ends are the dp's host ports.
ip link add "$A1" type veth peer name a0 netns "$HA" || exit 1
ip link add "$B1" type veth peer name b0 netns "$HB" || exit 1
# Fabric: the dp's fabric port (root side) to a leaf.
ip link add "$E1" type veth peer name dn netns "$L1" || exit 1
ip link add "$E2" type veth peer name dn netns "$L2" || exit 1
for l in "$A1" "$B1" "$E1" "$E2"; do
	sysctl -qw "net.ipv6.conf.$l.disable_ipv6=1" 2>/dev/null
	ip link set "$l" up
done
# Leaf-spine links: L1.up1 - S1.d1, L1.up2 - S2.d1, S1.d2 - L2.up1, S2.d2 - L2.up2.
link() { # nsA ifA ipA nsB ifB ipB (/30s)
	ip link add "$2" netns "$1" type veth peer name "$5" netns "$4" || exit 1
	ip -n "$1" addr add "$3/30" dev "$2"; ip -n "$1" link set "$2" up
	ip -n "$4" addr add "$6/30" dev "$5"; ip -n "$4" link set "$5" up
}
link "$L1" up1 10.1.1.1 "$S1" d1 10.1.1.2
link "$L1" up2 10.1.2.1 "$S2" d1 10.1.2.2
link "$S1" d2 10.2.1.1 "$L2" up1 10.2.1.2
link "$S2" d2 10.2.2.1 "$L2" up2 10.2.2.2
# Leaves own the VTEP subnets; VTEPs are next to them (static neighbours:
# the dp's fabric port does not answer ARP).
ip -n "$L1" link set dn address 02:00:00:00:aa:f1 up
ip -n "$L1" addr add 10.10.1.254/24 dev dn
ip -n "$L1" neigh add 10.10.1.1 lladdr 02:00:00:00:aa:01 dev dn nud permanent
ip -n "$L2" link set dn address 02:00:00:00:aa:f2 up
ip -n "$L2" addr add 10.10.2.254/24 dev dn
ip -n "$L2" neigh add 10.10.2.1 lladdr 02:00:00:00:aa:02 dev dn nud permanent
ip -n "$L1" route add 10.10.2.0/24 nexthop via 10.1.1.2 nexthop via 10.1.2.2
ip -n "$L2" route add 10.10.1.0/24 nexthop via 10.2.1.1 nexthop via 10.2.2.1
ip -n "$S1" route replace 10.10.1.0/24 via 10.1.1.1
ip -n "$S1" route add 10.10.2.0/24 via 10.2.1.2
ip -n "$S2" route replace 10.10.1.0/24 via 10.1.2.1
ip -n "$S2" route add 10.10.2.0/24 via 10.2.2.2
# The slow spine: 20 Mbit/s towards L2, with up to 30 ms of queue, kept full
# by cross traffic from S2 itself (a UDP stream at about 40 Mbit/s).
if ! ip netns exec "$S2" tc qdisc add dev d2 root tbf rate 20mbit burst 16kb latency 30ms; then
	echo "skip: tc tbf not available"; exit 77
fi
cat >"$DIR/cross.py" <<'EOF2'
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b = bytes(1200)
while True:
    for _ in range(40):
        try: s.sendto(b, ("10.2.2.2", 9))
        except OSError: pass
    time.sleep(0.01)
EOF2
bg ip netns exec "$S2" "$PY" "$DIR/cross.py"
# Endpoints: /32 addresses, the rest via the overlay gateway .1; MTU and GSO
# such that every frame fits the underlay after 50 bytes of VXLAN.
ip -n "$HA" link set a0 address 02:00:00:00:00:02 mtu 1400 gso_max_segs 1 up
ip -n "$HA" addr add 192.168.0.2/32 dev a0
ip -n "$HA" route add 192.168.0.1 dev a0
ip -n "$HA" route add 192.168.0.0/24 via 192.168.0.1
ip -n "$HB" link set b0 address 02:00:00:00:00:03 mtu 1400 gso_max_segs 1 up
ip -n "$HB" addr add 192.168.0.3/32 dev b0
ip -n "$HB" route add 192.168.0.1 dev b0
ip -n "$HB" route add 192.168.0.0/24 via 192.168.0.1

node_config() { # file vtep vtep_mac gw_mac host_if fabric_if local_ep remote_ep policy
	cat >"$1" <<EOF2
vtep: $2
vtep_mac: $3
underlay_gw_mac: $4
ports:
  host: {backend: afpacket, iface: $5}
  fabric: {backend: afpacket, iface: $6}
networks:
  - name: blue
    vni: 100
    subnet: 192.168.0.0/24
    gateway: 192.168.0.1
    gateway_mac: 02:00:00:00:00:01
    adaptive_routing: {policy: $9, paths: 4, scatter: true, probe_timeout: 200ms, probe_interval: ${AR_PROBE_INTERVAL:-20ms}}
    endpoints:
      - $7
      - $8
EOF2
}
cat >"$DIR/srv.py" <<'EOF2'
import socket, threading
def drain(c):
    while c.recv(65536): pass
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("192.168.0.3", 5001)); s.listen(64)
while True:
    c, _ = s.accept(); threading.Thread(target=drain, args=(c,), daemon=True).start()
EOF2
cat >"$DIR/cli.py" <<'EOF2'
import socket, sys, threading, time
n, secs = int(sys.argv[1]), float(sys.argv[2])
res = {}
def flow(i):
    try:
        c = socket.create_connection(("192.168.0.3", 5001), timeout=3)
        port = c.getsockname()[1]; b = bytes(16384); sent = 0
        end = time.time() + secs
        while time.time() < end:
            sent += c.send(b)
        c.close(); res[port] = sent
    except OSError as e:
        res["err%d" % i] = 0
ts = [threading.Thread(target=flow, args=(i,)) for i in range(n)]
for t in ts: t.start(); time.sleep(0.02)
for t in ts: t.join()
for p, b in sorted(res.items(), key=lambda kv: str(kv[0])):
    print(p, "%.2f" % (b * 8 / secs / 1e6))
EOF2
bg ip netns exec "$HB" "$PY" "$DIR/srv.py"

check() { # name ok|no detail
	if [ "$2" = ok ]; then ok "$1"; else bad "$1" "$3"; fi
}

run_policy() { # policy -> $DIR/$1.flows: "port mbps spine"
	pol=$1
	node_config "$DIR/dp1.yaml" 10.10.1.1 02:00:00:00:aa:01 02:00:00:00:aa:f1 "$A1" "$E1" \
		"{ip: 192.168.0.2, mac: 02:00:00:00:00:02, local: true}" "{ip: 192.168.0.3, vtep: 10.10.2.1}" "$pol"
	node_config "$DIR/dp2.yaml" 10.10.2.1 02:00:00:00:aa:02 02:00:00:00:aa:f2 "$B1" "$E2" \
		"{ip: 192.168.0.3, mac: 02:00:00:00:00:03, local: true}" "{ip: 192.168.0.2, vtep: 10.10.1.1}" "$pol"
	rm -f "$DIR/dp1.json" "$DIR/dp2.json" # written 1 s after each loop starts
	"$IOD" dp run --config "$DIR/dp1.yaml" --state "$DIR/dp1.json" --duration 20s >"$DIR/dp1.$pol.out" 2>&1 &
	d1=$!
	"$IOD" dp run --config "$DIR/dp2.yaml" --state "$DIR/dp2.json" --duration 20s >"$DIR/dp2.$pol.out" 2>&1 &
	d2=$!
	ip netns exec "$L1" dumpcap -q -i up1 -s 128 -f "udp dst port 4789" -w "$DIR/$pol.up1.pcap" 2>/dev/null &
	c1=$!
	ip netns exec "$L1" dumpcap -q -i up2 -s 128 -f "udp dst port 4789" -w "$DIR/$pol.up2.pcap" 2>/dev/null &
	c2=$!
	for p in $d1 $d2 $c1 $c2; do bg_adopt "$p"; done
	# both loops running (a fixed sleep lost the race once under load: every
	# ecmp flow failed to connect), then the captures' start-up
	wait_for 15 test -s "$DIR/dp1.json" && wait_for 15 test -s "$DIR/dp2.json" ||
		echo "  (a data plane wrote no state within 15 s: $(tail -2 "$DIR/dp1.$pol.out" "$DIR/dp2.$pol.out"))"
	sleep 0.3
	ip netns exec "$HA" "$PY" "$DIR/cli.py" "$FLOWS" 2 >"$DIR/$pol.tput"
	sleep 1.2 # one more state write
	"$IOD" dp dump --state "$DIR/dp1.json" -o json >"$DIR/$pol.dump1.json" 2>&1
	"$IOD" dp dump --state "$DIR/dp1.json" 2>&1 | grep -A1 "^adaptive routing"
	"$IOD" dp dump --state "$DIR/dp2.json" -o json >"$DIR/$pol.dump2.json" 2>&1
	kill $d1 $d2 $c1 $c2 2>/dev/null
	wait $d1 $d2 $c1 $c2 2>/dev/null
	# data packets of each flow per uplink -> the spine that carried most
	for u in up1 up2; do
		tshark -r "$DIR/$pol.$u.pcap" -Y "tcp.len > 0 && tcp.dstport == 5001" \
			-T fields -e tcp.srcport 2>/dev/null | sort | uniq -c >"$DIR/$pol.$u.cnt"
	done
	: >"$DIR/$pol.flows"
	while read -r port mbps; do
		n1=$(awk -v p="$port" '$2 == p {print $1}' "$DIR/$pol.up1.cnt")
		n2=$(awk -v p="$port" '$2 == p {print $1}' "$DIR/$pol.up2.cnt")
		sp=none
		[ "${n1:-0}" -gt "${n2:-0}" ] && sp=fast
		[ "${n2:-0}" -gt "${n1:-0}" ] && sp=slow
		echo "$port $mbps $sp ${n1:-0} ${n2:-0}" >>"$DIR/$pol.flows"
	done <"$DIR/$pol.tput"
	fast=$(grep -c " fast " "$DIR/$pol.flows")
	slow=$(grep -c " slow " "$DIR/$pol.flows")
	total=$(awk '{s += $2} END {printf "%.1f", s}' "$DIR/$pol.flows")
	echo "$pol: $FLOWS flows, $fast on the fast spine, $slow on the slow one; total $total Mbit/s"
	echo "  per flow (inner sport, Mbit/s, spine, data packets via S1/S2):"
	sed 's/^/    /' "$DIR/$pol.flows"
}

run_policy ecmp
e_fast=$fast e_slow=$slow
run_policy minrtt
if [ $((fast * 3)) -lt $((FLOWS * 2)) ]; then
	# the edges are user-space processes: on a starved machine (load ~9 from
	# parallel builds) probe replies wait for the CPU and ties go to the slow
	# spine. One more round, reported, before calling it a failure.
	echo "minrtt: $fast of $FLOWS on the fast spine; one more round"
	run_policy minrtt
fi
m_fast=$fast m_slow=$slow
[ "$e_fast" -gt 0 ] && [ "$e_slow" -gt 0 ] && s=ok || s=no
check ecmp_uses_both_spines $s "fast $e_fast slow $e_slow"
[ $((m_fast * 3)) -ge $((FLOWS * 2)) ] && s=ok || s=no
check minrtt_majority_on_fast_spine $s "fast $m_fast slow $m_slow of $FLOWS"
pinned=$("$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["adaptive_routing"]["networks"][0]["stats"]["flows_pinned"])' "$DIR/minrtt.dump1.json" 2>/dev/null)
refl=$("$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["adaptive_routing"]["probes_reflected"])' "$DIR/minrtt.dump2.json" 2>/dev/null)
[ "${pinned:-0}" -gt 0 ] && [ "${refl:-0}" -gt 0 ] && s=ok || s=no
check dump_shows_pinned_flows_and_reflected_probes $s "pinned=${pinned:-?} reflected=${refl:-?}"
if ! checks_ok; then
	for f in "$DIR"/dp*.out; do echo "--- $f"; cat "$f"; done
	for f in "$DIR"/minrtt.dump*.json; do
		"$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])).get("adaptive_routing")))' "$f"
	done
fi
checks_ok
