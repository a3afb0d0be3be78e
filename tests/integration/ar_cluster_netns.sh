#!/bin/sh
# ar_cluster_netns.sh BUILD: adaptive routing of the overlay on a real
# cluster (docs/network.md, "Adaptive routing across nodes").
# `iod up --netns --nodes 2`: node-1 on leaf 1, node-2 on leaf 2, so every
# VXLAN packet between them crosses spine 1 or spine 2 (Linux ECMP, L4
# hash of the outer 5-tuple, whose source port the switch chooses). A
# service of 2 replicas on different nodes; FLOWS UDP flows (1000-byte
# datagrams, RATE per second each) from the node-1 replica to the node-2
# one. Per round: the flows run PRE seconds on two equal spines, then spine
# 2 is made slow (tbf 1 Mbit/s, 200 ms queue, on both its links, as
# `iod up --underlay slow=` does at start), and the flows go on POST
# seconds. dumpcap on spine 2's link from leaf 1 counts the data (outer
# frames over 600 bytes: probes are 82) that node-1's switch sends there.
# Checks, per round of minrtt (the default policy): spine 2 carried data
# before the change and none in the last 1.5 s; the move time is the last
# data packet on spine 2 after the change, minus the change. One round of
# `iod config set network.adaptive_routing ecmp`: spine 2 still carries
# data at the end (ecmp does not move). Rounds of a *cut* (spine 2
# forwards nothing: an nft drop-all in its namespace, which the leaves do
# not see, so their ECMP keeps using it): measured and checked the same.
# `iod dp dump --node node-1` shows the policy, the paths and their flows.
# Prints BENCH net.ar_move p50_ms= p99_ms= max_ms= rounds= flows= load=
# and BENCH net.ar_cut (the same keys).
# Environment: AR_ROUNDS (minrtt rounds, default 3: make test's check;
# `make bench-ar-cluster` runs 5 for the BENCH quantiles), AR_CUTS (2),
# AR_FLOWS (8), AR_RATE (datagrams per second per flow, 200).
# Exit 0 pass, 1 fail, 77 skip.
set -u
BUILD=${1:-build}
. "$(dirname "$0")/lib.sh"
netns_setup "$BUILD" "network namespaces, AF_PACKET, tc" tc nft python3 dumpcap tshark
ROUNDS=${AR_ROUNDS:-3}
CUTS=${AR_CUTS:-2}
FLOWS=${AR_FLOWS:-8}
RATE=${AR_RATE:-200}
PRE=2.5
POST=3.5
trap netns_cleanup EXIT
trap "exit 1" INT TERM
on_bad() { grep -h "adaptive routing" "$IOD_STATE_DIR"/node-*.log 2>/dev/null | tail -5; }

# the lease outlasts a cut (POST s, plus TCP's backoff after it): node-2's
# agent talks to the servers over the same underlay, and a connection that
# hashes onto the cut spine stalls; with 2 s its lease lapsed under load,
# ar-1 went 'lost', node-1's switch lost its only peer VTEP and its adaptive
# routing started over, so the dump check at the end saw no pinned flows
start_cluster "$T/up.out" --netns --nodes 2 --api-port "$BASE" --raft-port $((BASE + 10)) \
	--lease-ttl 8s || exit 1
P=$(sed -n 's/^underlay \(iodu[0-9a-f]*\)-\*.*/\1/p' "$T/up.out" | head -1)
[ -n "$P" ] || { cat "$T/up.out"; bad "no underlay name in iod up's output"; exit 1; }
S1="$P-s1" S2="$P-s2"
cat >"$T/spec.yaml" <<YAML
services:
  - name: ar
    type: stateless
    replicas: 2
    placement: {anti_affinity: node}
    command: iod demo-worker --role parameter-server --params 16
YAML
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.out" 2>&1 || { cat "$T/deploy.out"; bad deploy; exit 1; }
rep() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$1': print(i['value'].get('$2', ''))"
}
addrs() { for r in ar-0 ar-1; do rep $r addr | grep -q '^10\.200\.' || return 1; done; }
wait_for 30 addrs || { bad "replicas never got overlay addresses"; exit 1; }
if [ "$(rep ar-0 node)" = node-1 ]; then SRC=ar-0 DST=ar-1; else SRC=ar-1 DST=ar-0; fi
[ "$(rep $SRC node)" = node-1 ] && [ "$(rep $DST node)" = node-2 ] ||
	{ bad "placement: want one replica on each node"; exit 1; }
DADDR=$(rep $DST addr)
ns() { ip netns | awk "/^iod-[0-9a-f]*-$1 /{print \$1} /^iod-[0-9a-f]*-$1\$/{print \$1}" | head -1; }
NSS=$(ns $SRC) NSD=$(ns $DST)
[ -n "$NSS" ] && [ -n "$NSD" ] || { bad "replica namespaces: '$NSS' '$NSD'"; exit 1; }
N1VTEP=$(ip netns exec "$P-h1" ip -4 -o addr show dev u0 | awk '{sub("/.*", "", $4); print $4}')

# policy POL: until node-1's switch runs it (it reads the cluster config
# each second)
dump_policy() {
	"$IOD" dp dump --node node-1 -o json 2>/dev/null | python3 -c "
import json, sys
print(json.load(sys.stdin).get('adaptive_routing', {}).get('policy', ''))" 2>/dev/null
}
is_policy() { [ "$(dump_policy)" = "$1" ]; }
PORT=$((BASE + 50))
ip netns exec "$NSD" python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('$DADDR', $PORT))
while True:
    s.recv(2048)" &
bg_adopt $!
sleep 1 # every replica's address in both switches' tables

slow() { # on|cut|off: spine 2's two links slow, or spine 2 forwarding nothing
	if [ "$1" = cut ]; then
		ip netns exec "$S2" nft add table ip iodarcut &&
			ip netns exec "$S2" nft add chain ip iodarcut blackhole \
				'{ type filter hook forward priority 0; policy drop; }' ||
			echo "info cannot cut spine 2 with nft" >&2
		return 0
	fi
	[ "$1" = off ] && ip netns exec "$S2" nft delete table ip iodarcut 2>/dev/null
	for l in l1 l2; do
		if [ "$1" = on ]; then
			ip netns exec "$S2" tc qdisc replace dev $l root tbf rate 1mbit burst 8kb latency 200ms
		else
			ip netns exec "$S2" tc qdisc del dev $l root 2>/dev/null
		fi
	done
	return 0
}

# round NAME FIRST_SPORT [on|cut]: prints "pre post tail move_ms" for spine 2
round() {
	_n=$1 _sp=$2 _how=${3:-on}
	slow off
	sleep 1 # spine 2's queue drains
	rm -f "$T/$_n.s2.pcap"
	ip netns exec "$S2" dumpcap -q -i l1 -f "src host $N1VTEP and udp dst port 4789 and greater 600" \
		-w "$T/$_n.s2.pcap" >/dev/null 2>&1 &
	_cap=$!
	# dumpcap writes the file's header once it captures (the first second
	# of the flows is not counted either: "pre" is the second before the
	# change, PRE - 1 s after they start)
	# (a loop of its own, 3 s at most)
	_w=30
	while [ $_w -gt 0 ] && [ ! -s "$T/$_n.s2.pcap" ]; do sleep 0.1; _w=$((_w - 1)); done
	sleep 0.2
	ip netns exec "$NSS" python3 -c "
import socket, time
socks = []
for i in range($FLOWS):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(('0.0.0.0', $_sp + i))
    socks.append(s)
msg = b'x' * 1000
gap = 1.0 / $RATE
start = time.time()
end = start + $PRE + $POST
nxt = start
while True:
    now = time.time()
    if now >= end:
        break
    if now < nxt:
        time.sleep(nxt - now)
        continue
    for s in socks:
        try:
            s.sendto(msg, ('$DADDR', $PORT))
        except OSError:
            pass
    nxt += gap
print('%.6f %.6f' % (start, time.time()))" >"$T/$_n.send" &
	_snd=$!
	sleep $PRE
	slow "$_how"
	date +%s.%N >"$T/$_n.change"
	wait $_snd
	kill $_cap 2>/dev/null
	wait $_cap 2>/dev/null
	tshark -r "$T/$_n.s2.pcap" -T fields -e frame.time_epoch 2>/dev/null >"$T/$_n.times"
	python3 -c "
import sys
change = float(open('$T/$_n.change').read())
start, end = map(float, open('$T/$_n.send').read().split())
ts = [float(x) for x in open('$T/$_n.times').read().split()]
pre = sum(1 for t in ts if change - 1.0 <= t < change)
post = [t for t in ts if t >= change]
tail = sum(1 for t in ts if t >= end - 1.5)
move = (max(post) - change) * 1000 if post else 0.0
print(pre, len(post), tail, '%.1f' % move)"
}

wait_for 10 is_policy minrtt || { bad "node-1's switch does not run minrtt by default: '$(dump_policy)'"; exit 1; }
ok "node-1's switch runs minrtt with no cluster config set (the default)"

MOVES=""
fails=0
r=1
while [ $r -le "$ROUNDS" ]; do
	set -- $(round minrtt$r $((BASE + 60 + r * 20)))
	echo "info minrtt round $r: spine 2 data packets: 1 s before the change $1, after $2, last 1.5 s $3; moved in $4 ms"
	if [ "$1" -gt 0 ] && [ "$3" -eq 0 ]; then
		MOVES="$MOVES $4"
	else
		fails=$((fails + 1))
		echo "info round $r: $( [ "$1" -eq 0 ] && echo "no flow was on spine 2" || echo "spine 2 still carried $3 packets at the end")"
	fi
	r=$((r + 1))
done
CUTMOVES=""
c=1
while [ $c -le "$CUTS" ]; do
	set -- $(round cut$c $((BASE + 60 + (ROUNDS + c) * 20)) cut)
	echo "info minrtt cut $c: spine 2 data packets: 1 s before the cut $1, after $2, last 1.5 s $3; moved in $4 ms"
	[ "$1" -gt 0 ] && [ "$3" -eq 0 ] && CUTMOVES="$CUTMOVES $4"
	c=$((c + 1))
done
slow off
if [ "$CUTS" -gt 0 ] && [ "$(echo $CUTMOVES | wc -w)" -ge $((CUTS - 1)) ]; then
	ok "minrtt: flows left the cut spine (forwarding nothing) in $(echo $CUTMOVES | wc -w) of $CUTS rounds"
elif [ "$CUTS" -gt 0 ]; then
	bad "minrtt: flows left the cut spine in $(echo $CUTMOVES | wc -w) of $CUTS rounds"
fi
"$IOD" dp dump --node node-1 >"$T/dump.txt" 2>&1
"$IOD" dp dump --node node-1 -o json >"$T/dump.json" 2>&1
grep -A3 "^adaptive routing" "$T/dump.txt" | head -6
NMOVES=$(echo $MOVES | wc -w)
if [ "$NMOVES" -ge $((ROUNDS - 1)) ] && [ "$NMOVES" -ge 1 ]; then
	ok "minrtt: flows left the slowed spine in $NMOVES of $ROUNDS rounds (no data on it in the last 1.5 s)"
else
	bad "minrtt: flows left the slowed spine in only $NMOVES of $ROUNDS rounds"
fi
if python3 -c "
import json, sys
j = json.load(open('$T/dump.json'))['adaptive_routing']
n = j['networks'][0]
paths = n['destinations'][0]['paths']
assert j['policy'] == 'minrtt' and n['stats']['flows_pinned'] > 0 and n['stats']['paths_failed'] > 0
assert any(p['flows'] > 0 and p['rtt_us'] > 0 for p in paths)
" 2>/dev/null && grep -q "rtt .* us, .* flows" "$T/dump.txt"; then
	ok "iod dp dump --node node-1 shows the policy, pinned flows, failed paths and each path's RTT and flows"
else
	bad "iod dp dump --node node-1: adaptive routing state missing" "$(head -c 600 "$T/dump.json")"
fi

"$IOD" config set network.adaptive_routing ecmp --wait 5s >"$T/cfg.out" 2>&1 || { cat "$T/cfg.out"; bad "iod config set"; }
wait_for 10 is_policy ecmp || bad "node-1's switch did not take ecmp: '$(dump_policy)'"
set -- $(round ecmp $((BASE + 40)))
echo "info ecmp: spine 2 data packets: 1 s before the change $1, after $2, last 1.5 s $3"
if [ "$1" -gt 0 ] && [ "$3" -gt 0 ]; then
	ok "ecmp: flows stay on the slowed spine ($3 data packets on it in the last 1.5 s)"
elif [ "$1" -eq 0 ]; then
	skip_check "ecmp stays" "the L4 hash put no flow on spine 2 this run"
else
	bad "ecmp: spine 2 carried no data at the end ($1 before the change)"
fi

LOAD=$(cut -d' ' -f1 /proc/loadavg)
quantiles() {
	python3 -c "
import math, sys
v = sorted(float(x) for x in sys.argv[1:])
q = lambda p: v[max(0, math.ceil(p * len(v)) - 1)] if v else 0  # nearest rank
print('p50_ms=%.0f p99_ms=%.0f max_ms=%.0f' % (q(0.5), q(0.99), v[-1] if v else 0))" "$@"
}
echo "BENCH net.ar_move $(quantiles $MOVES) rounds=$NMOVES flows=$FLOWS load=$LOAD"
[ "$CUTS" -gt 0 ] &&
	echo "BENCH net.ar_cut $(quantiles $CUTMOVES) rounds=$(echo $CUTMOVES | wc -w) flows=$FLOWS load=$LOAD"
stop_cluster 5s
checks_ok
