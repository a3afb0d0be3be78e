#!/bin/sh
# dp_netns.sh BUILD: two `iod dp run` nodes joined by a VXLAN overlay, with
# endpoints in network namespaces attached through AF_PACKET (TPACKET_V3).
#
#   ns A (192.168.0.2) -veth- [dp1 host|fabric] -veth- [dp2 fabric|host] -veth- ns B (.3, .4)
#
# Checks: a TCP connection A -> B:8080 passes (SG allows 8080); a connection
# to B:9090 is dropped (no SG rule); the service VIP 192.168.0.100:80
# balances connections from A across the two backends .3:8080 and .4:8080.
# Needs root and network namespaces; exits 77 (skip) with a reason if not.
# Always removes its namespaces, links, processes and files.
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
IOD="$BUILD/iod"
PY=/usr/bin/python3
if [ "$(id -u)" != 0 ]; then echo "skip: needs root (network namespaces)"; exit 77; fi
if ! command -v ip >/dev/null 2>&1; then echo "skip: iproute2 missing"; exit 77; fi
if [ ! -x "$PY" ]; then echo "skip: $PY missing"; exit 77; fi
if [ ! -x "$IOD" ]; then echo "skip: $IOD not built"; exit 77; fi

T=$$
NSA=iodA$T NSB=iodB$T
A1=ida$T B1=idb$T F1=idf$T F2=idg$T
DIR=$(mktemp -d)
cleanup() {
	stop_bg
	ip netns del "$NSA" 2>/dev/null
	ip netns del "$NSB" 2>/dev/null
	ip link del "$A1" 2>/dev/null
	ip link del "$B1" 2>/dev/null
	ip link del "$F1" 2>/dev/null
	rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

if ! ip netns add "$NSA" 2>/dev/null; then echo "skip: cannot create network namespaces"; exit 77; fi
ip netns add "$NSB" || exit 1
ip link add "$A1" type veth peer name a0 netns "$NSA" || exit 1
ip link add "$B1" type veth peer name b0 netns "$NSB" || exit 1
ip link add "$F1" type veth peer name "$F2" || exit 1
for l in "$A1" "$B1" "$F1" "$F2"; do
	sysctl -qw "net.ipv6.conf.$l.disable_ipv6=1" 2>/dev/null
	ip link set "$l" up
done
# Endpoints: /32 addresses, everything else via the overlay gateway .1.
ip -n "$NSA" link set lo up
ip -n "$NSA" link set a0 address 02:00:00:00:00:02 up
ip -n "$NSA" addr add 192.168.0.2/32 dev a0
ip -n "$NSA" route add 192.168.0.1 dev a0
ip -n "$NSA" route add 192.168.0.0/24 via 192.168.0.1
ip -n "$NSB" link set lo up
ip -n "$NSB" link set b0 address 02:00:00:00:00:03 up
ip -n "$NSB" addr add 192.168.0.3/32 dev b0
ip -n "$NSB" addr add 192.168.0.4/32 dev b0
ip -n "$NSB" route add 192.168.0.1 dev b0
ip -n "$NSB" route add 192.168.0.0/24 via 192.168.0.1

node_config() { # name vtep peer_vtep host_if fabric_if local_eps remote_eps
	cat >"$DIR/$1.yaml" <<EOF
vtep: $2
vtep_mac: 02:00:00:00:aa:0${2##*.}
underlay_gw_mac: 02:00:00:00:aa:0${3##*.}
ports:
  host: {backend: afpacket, iface: $4}
  fabric: {backend: afpacket, iface: $5}
security_groups:
  - name: web
    ingress: ["tcp any 80", "tcp any 8080"]
networks:
  - name: blue
    vni: 100
    subnet: 192.168.0.0/24
    gateway: 192.168.0.1
    gateway_mac: 02:00:00:00:00:01
    security_group: web
    endpoints:
$6
$7
services:
  - {name: web, network: blue, vip: 192.168.0.100, port: 80, proto: tcp,
     backends: ["192.168.0.3:8080", "192.168.0.4:8080"]}
EOF
}
EPA='      - {ip: 192.168.0.2, mac: 02:00:00:00:00:02, local: true}'
EPB='      - {ip: 192.168.0.3, mac: 02:00:00:00:00:03, local: true}
      - {ip: 192.168.0.4, mac: 02:00:00:00:00:03, local: true}'
node_config dp1 10.10.0.1 10.10.0.2 "$A1" "$F1" "$EPA" \
	"$(echo "$EPB" | sed 's/mac: [0-9a-f:]*, local: true/vtep: 10.10.0.2/')"
node_config dp2 10.10.0.2 10.10.0.1 "$B1" "$F2" "$EPB" \
	"$(echo "$EPA" | sed 's/mac: [0-9a-f:]*, local: true/vtep: 10.10.0.1/')"

MPORT=$(free_port_block $$)
bg "$IOD" dp run --config "$DIR/dp1.yaml" --state "$DIR/dp1.json" --duration 60s \
	--metrics "127.0.0.1:$MPORT" >"$DIR/dp1.out" 2>&1
bg "$IOD" dp run --config "$DIR/dp2.yaml" --state "$DIR/dp2.json" --duration 60s \
	>"$DIR/dp2.out" 2>&1

# Servers in B: each answers with the address it was reached on.
cat >"$DIR/srv.py" <<'EOF'
import socket, sys, threading
def serve(addr, port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall(addr.encode()); c.close()
for a, p in (("192.168.0.3", 8080), ("192.168.0.4", 8080), ("192.168.0.3", 9090)):
    threading.Thread(target=serve, args=(a, p), daemon=True).start()
threading.Event().wait()
EOF
bg ip netns exec "$NSB" "$PY" "$DIR/srv.py"
# both data-plane loops running (each writes its state 1 s after it starts;
# a fixed sleep lost the race once under load: the first connect timed out)
wait_for 15 test -s "$DIR/dp1.json" && wait_for 15 test -s "$DIR/dp2.json" ||
	echo "  (a data plane wrote no state within 15 s: $(tail -2 "$DIR/dp1.out" "$DIR/dp2.out"))"
sleep 0.3

cat >"$DIR/cli.py" <<'EOF'
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seen = {}
for i in range(n):
    try:
        c = socket.create_connection((host, port), timeout=2)
        d = c.recv(64).decode(); c.close()
        seen[d] = seen.get(d, 0) + 1
    except OSError as e:
        seen["error:" + type(e).__name__] = seen.get("error:" + type(e).__name__, 0) + 1
print(" ".join("%s=%d" % kv for kv in sorted(seen.items())))
EOF
check() { # name condition-result
	if [ "$2" = ok ]; then ok "$1"; else bad "$1" "$3"; fi
}
r=$(ip netns exec "$NSA" "$PY" "$DIR/cli.py" 192.168.0.3 8080 3)
[ "$r" = "192.168.0.3=3" ] && s=ok || s=no
check tcp_over_overlay_passes $s "$r"
r=$(ip netns exec "$NSA" "$PY" "$DIR/cli.py" 192.168.0.3 9090 1)
case "$r" in error:*) s=ok ;; *) s=no ;; esac
check denied_port_dropped $s "$r (expected a timeout)"
r=$(ip netns exec "$NSA" "$PY" "$DIR/cli.py" 192.168.0.100 80 24)
b3=$(echo "$r" | sed -n 's/.*192\.168\.0\.3=\([0-9]*\).*/\1/p')
b4=$(echo "$r" | sed -n 's/.*192\.168\.0\.4=\([0-9]*\).*/\1/p')
[ "${b3:-0}" -gt 0 ] && [ "${b4:-0}" -gt 0 ] && [ $((b3 + b4)) -eq 24 ] && s=ok || s=no
check vip_balances_two_backends $s "$r"
# the ports' counters on dp1's /metrics: the connections above crossed its
# host port (received) and its fabric port (sent), and promtool is clean
sleep 0.3
curl -s -m 2 "http://127.0.0.1:$MPORT/metrics" >"$DIR/metrics.txt"
hrx=$(awk 'index($0, "iod_dp_port_received_packets_total{") == 1 && /kind="host"/ { print $NF }' "$DIR/metrics.txt")
ftx=$(awk 'index($0, "iod_dp_port_sent_packets_total{") == 1 && /kind="fabric"/ { print $NF }' "$DIR/metrics.txt")
[ "${hrx:-0}" -gt 20 ] && [ "${ftx:-0}" -gt 20 ] && s=ok || s=no
check dp_metrics_port_counters $s "host rx ${hrx:-none}, fabric tx ${ftx:-none}: $(head -c 600 "$DIR/metrics.txt")"
if command -v promtool >/dev/null; then
	promtool check metrics <"$DIR/metrics.txt" >"$DIR/promtool.txt" 2>&1 && s=ok || s=no
	check dp_metrics_promtool $s "$(cat "$DIR/promtool.txt")"
fi
"$IOD" dp dump --state "$DIR/dp1.json" >"$DIR/dump.txt" 2>&1
grep -q "pipe svc" "$DIR/dump.txt" && s=ok || s=no
check dp_dump_of_running_node $s "$(head -5 "$DIR/dump.txt")"
if ! checks_ok; then
	echo "--- dp1"; cat "$DIR/dp1.out"; echo "--- dp2"; cat "$DIR/dp2.out"
	"$IOD" dp dump --state "$DIR/dp1.json" 2>&1 | head -60
	"$IOD" dp dump --state "$DIR/dp2.json" 2>&1 | head -60
fi
checks_ok
