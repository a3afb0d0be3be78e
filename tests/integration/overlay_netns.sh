#!/bin/sh
# overlay_netns.sh BUILD: every replica on iod's own network (docs/network.md).
# `iod up --netns --nodes 2`: agents in host namespaces on a 2x2 leaf-spine;
# two parameter servers on different nodes (anti-affinity). Checks: their
# namespaces talk TCP across nodes (an echo of 64 KiB; 16 MiB each way
# byte-exact with GSO on, frames on the underlay within the MTU, the GSO
# counters of both switches moved); a capture on leaf 1
# shows VXLAN with the tenant's VNI and the inner addresses; a replica of
# another tenant cannot connect (when the spec has `tenant:`); `iod down`
# leaves no namespace, link or process; node N0's agent serves the data
# plane's port counters (moved by the echo; read with `iod metrics --node`)
# and passes promtool; that telemetry listener on the underlay is mutual
# TLS: plain HTTP, TLS without a client certificate, another CA's
# certificate and a service identity are refused, a node's certificate
# reads it, and the Node object advertises https; `iod dp
# dump --node N0` shows its switch's pipes with moved counters and each
# entry's offload verdict; after kill -9 of every agent and
# server a new `iod up` sweeps and starts, and after kill -9 of the agents
# `iod down` still leaves nothing. Exit 0 pass, 1 fail, 77 skip.
set -u
BUILD=${1:-build}
. "$(dirname "$0")/lib.sh"
netns_setup "$BUILD" "network namespaces, AF_PACKET" python3 tshark
UP="--netns --nodes 2 --api-port $BASE --raft-port $((BASE + 10)) --lease-ttl 2s"
cleanup() {
	"$IOD" down --grace 2s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

"$IOD" up $UP >"$T/up.out" 2>&1 || { cat "$T/up.out"; echo "FAIL iod up --netns"; exit 1; }
P=$(sed -n 's/^underlay \(iodu[0-9a-f]*\)-\*.*/\1/p' "$T/up.out" | head -1)
[ -n "$P" ] || { cat "$T/up.out"; echo "FAIL no underlay name"; exit 1; }
ok "iod up --netns: underlay $P"
# an agent on an underlay (non-loopback) address serves its checkpoint
# chunk server over mTLS there (docs/storage.md, "Peers run by the agents")
mtls_peer() { grep -q "checkpoint chunk server on [0-9.]*:[0-9]* (mTLS)" "$IOD_STATE_DIR/node-1.log"; }
if wait_for 10 mtls_peer; then
	ok "checkpoint chunk server over mTLS: $(grep -o 'checkpoint chunk server on [0-9.:]* (mTLS)' "$IOD_STATE_DIR/node-1.log" | head -1)"
else
	bad "no mTLS checkpoint chunk server on node-1: $(grep 'chunk server' "$IOD_STATE_DIR/node-1.log" | head -2)"
fi

cat >"$T/spec.yaml" <<YAML
services:
  - name: parameter-server
    type: stateless
    replicas: 2
    placement: {anti_affinity: node}
    command: iod demo-worker --role parameter-server --params 16
    health: {tcp: 1, interval: 200ms, timeout: 150ms}
YAML
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.out" 2>&1 || { cat "$T/deploy.out"; bad deploy; exit 1; }
# rep NAME FIELD: a Replica's value field
rep() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$1': print(i['value'].get('$2', ''))"
}
both() { rep parameter-server-0 addr | grep -q '^10\.200\.' && rep parameter-server-1 addr | grep -q '^10\.200\.'; }
wait_for 30 both || { bad "replicas never got overlay addresses"; tail -5 "$IOD_STATE_DIR"/node-*.log; exit 1; }
A0=$(rep parameter-server-0 addr) A1=$(rep parameter-server-1 addr)
N0=$(rep parameter-server-0 node) N1=$(rep parameter-server-1 node)
[ "$N0" != "$N1" ] && ok "replicas on two nodes ($N0 $A0, $N1 $A1)" || bad "both replicas on $N0"
NS0=$(ip netns | awk '/^iod-[0-9a-f]*-parameter-server-0/{print $1}')
NS1=$(ip netns | awk '/^iod-[0-9a-f]*-parameter-server-1/{print $1}')
VNI=$(sed -n 's/.*default=vni:\([0-9]*\).*/\1/p' "$IOD_STATE_DIR/node-1.log" | tail -1)

cat >"$T/echo.py" <<'EOF'
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7777)); s.listen(8)
while True:
    c, _ = s.accept()
    while True:
        b = c.recv(65536)
        if not b: break
        c.sendall(b)
    c.close()
EOF
cat >"$T/cli.py" <<'EOF'
import socket, sys
s = socket.create_connection((sys.argv[1], 7777), timeout=3)
data = bytes(range(256)) * 256
s.sendall(data); s.shutdown(socket.SHUT_WR)
got = b""
while len(got) < len(data):
    b = s.recv(65536)
    if not b: break
    got += b
print("echoed" if got == data else "short %d" % len(got))
EOF
ip netns exec "$NS1" python3 "$T/echo.py" "$A1" &
ECHO=$!
sleep 0.5
# node-1's host is behind leaf 1: its bridge sees every frame of that host
ip netns exec "$P-l1" tshark -q -i br0 -f "udp dst port 4789" -a duration:6 -T fields \
	-e vxlan.vni -e ip.src -e ip.dst >"$T/cap.txt" 2>/dev/null &
CAP=$!
sleep 2
out=$(timeout 10 ip netns exec "$NS0" python3 "$T/cli.py" "$A1" 2>&1)
[ "$out" = echoed ] && ok "TCP $A0 -> $A1 across nodes: 64 KiB echoed" || bad "TCP across nodes: $out"
# GSO on the replica ports (docs/network.md, "GSO and GRO on the replica
# ports"): 16 MiB of random bytes each way arrive byte-exact (SHA-256), no
# inner packet on the underlay is over the MTU, and the
# switches split super-frames (rx_gso) and coalesced segments (tx_gro)
cat >"$T/sink.py" <<'EOF'
import hashlib, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7778)); s.listen(1)
c, _ = s.accept()
h = hashlib.sha256(); n = 0
while n < 16 << 20:
    b = c.recv(1 << 20)
    if not b: break
    h.update(b); n += len(b)
c.sendall(h.hexdigest().encode())
blob = open(sys.argv[2], "rb").read()
c.sendall(blob); c.close()
EOF
cat >"$T/src.py" <<'EOF'
import hashlib, socket, sys
blob = open(sys.argv[2], "rb").read()
s = socket.create_connection((sys.argv[1], 7778), timeout=10)
s.sendall(blob)
got = b""
while len(got) < 64:
    b = s.recv(64 - len(got))
    if not b: break
    got += b
h = hashlib.sha256(); n = 0
while n < len(blob):
    b = s.recv(1 << 20)
    if not b: break
    h.update(b); n += len(b)
want = hashlib.sha256(blob).hexdigest()
print("exact" if got.decode() == want and h.hexdigest() == want else "differ %s %s %d" % (got[:12], h.hexdigest()[:12], n))
EOF
head -c $((16 << 20)) /dev/urandom >"$T/blob"
ip netns exec "$NS1" python3 "$T/sink.py" "$A1" "$T/blob" &
SINK=$!
sleep 0.5
ip netns exec "$P-l1" tshark -q -i br0 -f "udp dst port 4789" -a duration:5 -T fields \
	-e frame.len -e ip.len >"$T/caplen.txt" 2>/dev/null &
CAPL=$!
sleep 2
out=$(timeout 30 ip netns exec "$NS0" python3 "$T/src.py" "$A1" "$T/blob" 2>&1)
[ "$out" = exact ] && ok "TCP $A0 <-> $A1 across nodes: 16 MiB each way, SHA-256 equal" ||
	bad "TCP bulk across nodes: $out"
kill $SINK 2>/dev/null
wait $CAPL 2>/dev/null
# each line: the frame's length, then the outer and the inner IP lengths.
# The switch sends a run of one flow's VXLAN datagrams as one UDP_SEGMENT
# super-frame (docs/network.md), so a capture on a veth sees frames over
# 1464 bytes; each datagram the kernel cuts from one carries one inner
# segment, so every inner IP packet must fit the MTU (1400) and the
# datagrams cut from a super-frame are inner + 50 + 14 bytes at most
caps=$(awk -F'[\t,]' 'NF >= 3 { n++; if ($3 > m) m = $3; if ($1 > 1464) s++ }
	END { printf "%d %d %d", n, m, s }' "$T/caplen.txt")
capn=${caps%% *} caps=${caps#* }
capmax=${caps%% *} capsup=${caps#* }
if [ "${capn:-0}" -gt 0 ] && [ "$capmax" -le 1400 ]; then
	ok "underlay: $capn VXLAN frames captured, every inner packet at most $capmax bytes (MTU 1400; $capsup UDP_SEGMENT super-frames, each cut into datagrams of at most $((capmax + 64)) bytes)"
else
	bad "underlay: inner packet of ${capmax:-none} bytes (over 1400, or none captured in ${capn:-0} frames)"
fi
gso() {
	"$IOD" dp dump --node "$1" -o json 2>/dev/null | python3 -c "
import json, sys
p = [x for x in json.load(sys.stdin)['ports'] if x['name'] == '$2'][0]
print(p['$3'])"
}
g0=$(gso "$N0" parameter-server-0 rx_gso) g1=$(gso "$N1" parameter-server-1 tx_gro)
if [ "${g0:-0}" -gt 0 ] && [ "${g1:-0}" -gt 0 ]; then
	ok "GSO: $N0 split $g0 super-frames from parameter-server-0, $N1 sent $g1 coalesced to parameter-server-1"
else
	bad "GSO counters: rx_gso ${g0:-none} on $N0, tx_gro ${g1:-none} on $N1"
fi
# the data plane's port counters on the agent's /metrics (docs/observability.md):
# the echo crossed node N0's fabric port and its replica's port
NI=${N0#node-}
NADDR=$("$IOD" get nodes -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$N0': print(i['value'].get('addr', ''))")
TP=$((BASE + 200))
# through the one HTTP client, with the client config's admin certificate:
# the listener is mutual TLS on the underlay (docs/security.md)
dpm() { "$IOD" metrics --node "$N0" 2>"$T/dpm.err"; }
# the value of family $1 on the port whose labels contain $2
dpv() { dpm | awk -v f="$1" -v l="$2" 'index($0, f "{") == 1 && index($0, l) { v = $NF } END { print v + 0 }'; }
moved() { [ "$(dpv iod_dp_port_sent_bytes_total 'kind="fabric"')" -ge 65536 ] &&
	[ "$(dpv iod_dp_port_received_bytes_total 'port="parameter-server-0"')" -ge 65536 ]; }
if wait_for 5 moved; then
	ok "dp port counters on $N0's /metrics: fabric sent $(dpv iod_dp_port_sent_bytes_total 'kind="fabric"') B, parameter-server-0's port received $(dpv iod_dp_port_received_bytes_total 'port="parameter-server-0"') B"
else
	bad "dp port counters on $N0's /metrics ($NADDR): $(dpm | grep '^iod_dp_port_s' | head -4) $(cat "$T/dpm.err")"
fi
# no listener beyond loopback without authentication and TLS: from the other
# node's host (on the underlay), N0's telemetry refuses plain HTTP, TLS
# without a client certificate and a certificate of another CA (even one
# of the same trust domain name), and a service identity; the Node object
# advertises https; a node's certificate and the admin's read it
OI=$((3 - NI))
tel_probe() { # tel_probe CERT|- KEY|- PATH: the status line, or "refused: why"
	ip netns exec "$P-h$OI" python3 - "$NADDR" "$TP" "$1" "$2" "$3" <<'PY'
import socket, ssl, sys
host, port, cert, key, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE  # a probe of the server's refusals, not a reader
if cert != "-":
    ctx.load_cert_chain(cert, key)
try:
    with socket.create_connection((host, port), timeout=3) as raw:
        with ctx.wrap_socket(raw) as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
    text = data.decode("utf-8", "replace")
    head, _, body = text.partition("\r\n\r\n")
    fams = sum(l.startswith("# TYPE iod_") for l in body.split("\n"))
    print(head.split("\r\n")[0], "|", "%d iod_ families |" % fams, body.replace("\n", " ")[:300])
except Exception as e:
    print("refused:", type(e).__name__, e)
PY
}
plain=$(ip netns exec "$P-h$OI" curl -s -m 3 "http://$NADDR:$TP/metrics")
if [ -n "$NADDR" ] && ! echo "$plain" | grep -q '^iod_'; then
	ok "telemetry on $NADDR:$TP refuses plain HTTP ($(echo "$plain" | wc -c) bytes back, no metrics)"
else bad "telemetry on $NADDR:$TP answers plain HTTP: $(echo "$plain" | head -3)"; fi
nocert=$(tel_probe - - /metrics)
if echo "$nocert" | grep -q '^HTTP/1.1 401 Unauthorized | 0 iod_ families | .*needs a client certificate of the cluster CA'; then ok "telemetry refuses TLS without a client certificate: $nocert"
else bad "telemetry without a client certificate: $nocert"; fi
nodump=$(tel_probe - - /v1/dp/dump)
if echo "$nodump" | grep -q '^HTTP/1.1 401 Unauthorized | 0 iod_ families |' && ! echo "$nodump" | grep -q '"pipes"'; then
	ok "telemetry refuses /v1/dp/dump without a client certificate"
else bad "telemetry /v1/dp/dump without a client certificate: $nodump"; fi
"$IOD" init --cluster local --pki "$T/otherpki" --no-config >/dev/null 2>&1
foreign=$(tel_probe "$T/otherpki/admin.crt" "$T/otherpki/admin.key" /metrics)
if [ -f "$T/otherpki/admin.crt" ] && echo "$foreign" | grep -q '^HTTP/1.1 401 Unauthorized | 0 iod_ families | .*not signed by'; then ok "telemetry refuses another CA's certificate: $foreign"
else bad "telemetry with another CA's certificate: $foreign"; fi
PKI="$IOD_STATE_DIR/pki"
"$IOD" cert create service intruder --tenant default --pki "$PKI" --out "$T/svc" >"$T/svc.out" 2>&1
svc=$(tel_probe "$T/svc.crt" "$T/svc.key" /metrics)
if [ -f "$T/svc.crt" ] && echo "$svc" | grep -q '^HTTP/1.1 403 Forbidden | 0 iod_ families |'; then
	ok "telemetry refuses a service identity: $svc"
else bad "telemetry with a service's certificate: $svc ($(head -2 "$T/svc.out"))"; fi
peer=$(tel_probe "$PKI/node-$OI.crt" "$PKI/node-$OI.key" /metrics)
if echo "$peer" | grep -q '^HTTP/1.1 200 OK | [1-9][0-9]* iod_ families'; then
	ok "node-$OI's certificate reads $N0's /metrics ($(echo "$peer" | cut -d'|' -f2))"
else bad "node-$OI's certificate on $N0's telemetry: $peer"; fi
# `iod revoke user` reaches the agents' telemetry listeners within about a
# second (they read the Revocation objects), not at the certificate's expiry
"$IOD" cert create user snoop --role viewer --pki "$PKI" --out "$T/snoop" >"$T/snoop.out" 2>&1
snoop_st() { tel_probe "$T/snoop.crt" "$T/snoop.key" /metrics | cut -d' ' -f2; }
revoked_out() { tel_probe "$T/snoop.crt" "$T/snoop.key" /metrics | grep -q '^HTTP/1.1 401 .*user.snoop: its credential is revoked'; }
s0=$(snoop_st)
"$IOD" revoke user snoop >"$T/revoke.out" 2>&1
if [ "$s0" = 200 ] && wait_for 5 revoked_out; then
	ok "a revoked user's certificate is refused by $N0's telemetry (200 before \`iod revoke\`, 401 after)"
else bad "revoked user on $N0's telemetry: before $s0, after $(tel_probe "$T/snoop.crt" "$T/snoop.key" /metrics) ($(cat "$T/revoke.out" "$T/snoop.out" | head -3))"; fi
"$IOD" revoke --undo user snoop >/dev/null 2>&1
adv=$("$IOD" get nodes -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$N0': print(i['value'].get('telemetry', ''))")
[ "$adv" = "https://$NADDR:$TP" ] && ok "Node $N0 advertises its telemetry as $adv" ||
	bad "Node $N0 advertises telemetry \"$adv\", not https://$NADDR:$TP"
# the live switch's pipeline through the control plane: `iod dp dump --node`
# finds N0's agent in its Node object; the echo moved its pipes' counters,
# and each entry carries its offload verdict
dumped() {
	"$IOD" dp dump --node "$N0" -o json >"$T/dump.json" 2>"$T/dump.err" &&
		python3 - "$T/dump.json" >"$T/dump.chk" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pipes = d["pipes"]
ents = [e for p in pipes for e in p["entries"]]
hit = [p["name"] for p in pipes if p["hits"] > 0]
assert d["node"] and pipes and ents, "no pipes or entries"
assert hit and sum(e["packets"] for e in ents) > 0, "no counter moved"
assert all(e["offload"] in ("translates", "software") and e["offload_note"] for e in ents)
tr = sum(e["offload"] == "translates" for e in ents)
assert d["offload"]["rules"] == len(ents) and d["offload"]["translates"] == tr
assert 0 < tr < len(ents), "want both verdicts (%d of %d translate)" % (tr, len(ents))
print("%d pipes, %d entries, pipes hit: %s; %d translate to rte_flow, %d software"
      % (len(pipes), len(ents), ",".join(hit), tr, len(ents) - tr))
PY
}
if wait_for 5 dumped; then
	ok "iod dp dump --node $N0 -o json: $(cat "$T/dump.chk")"
else
	bad "iod dp dump --node $N0: $(cat "$T/dump.err" "$T/dump.chk" 2>/dev/null | head -5)"
fi
"$IOD" dp dump --node "$N0" >"$T/dump.txt" 2>&1
if grep -q "^pipe " "$T/dump.txt" && grep -q " translates$" "$T/dump.txt" &&
	grep -q " software$" "$T/dump.txt" && grep -q "^offload verdicts:" "$T/dump.txt"; then
	ok "iod dp dump --node $N0 (text): $(grep -c '^pipe ' "$T/dump.txt") pipes; $(grep '^offload verdicts:' "$T/dump.txt")"
else
	bad "iod dp dump --node $N0 (text): $(head -5 "$T/dump.txt")"
fi
# an unknown node is named as such; so is a node without a switch's listener
if "$IOD" dp dump --node node-99 >"$T/nd.out" 2>&1; then
	bad "dp dump --node node-99 succeeded"
elif grep -q "no node node-99 in the cluster (its nodes: node-1, node-2)" "$T/nd.out"; then
	ok "dp dump --node node-99: $(cat "$T/nd.out")"
else bad "dp dump --node node-99: $(cat "$T/nd.out")"; fi
if command -v promtool >/dev/null; then
	dpm >"$T/dpm.prom"
	if grep -q '^iod_dp_port_' "$T/dpm.prom" && promtool check metrics <"$T/dpm.prom" >"$T/promtool" 2>&1; then
		ok "promtool check metrics: $N0's agent with dp ports ($(wc -l <"$T/dpm.prom") lines)"
	else bad "promtool on $N0's agent: $(head -3 "$T/promtool" "$T/dpm.err")"; fi
fi
# the live view's model colours N0's link to its leaf from those counters
# once a summary reached the control plane (every 5 s)
linked() {
	"$IOD" viz net-topology -o json 2>/dev/null | python3 -c "
import json, sys
g = json.load(sys.stdin)
e = [e for e in g['edges'] if e['kind'] == 'net' and e['from'].startswith('node:$N0') and 'bps' in e]
print(e[0]['label'] + (' util %.4f' % e[0]['util'] if 'util' in e[0] else '') if e else '')" | grep .
}
if wait_for 12 linked >/dev/null && l=$(linked); then ok "iod viz: $N0's link to its leaf from its data plane ($l)"
else bad "iod viz: no rated link for $N0"; fi
wait $CAP 2>/dev/null
if [ -n "$VNI" ] && grep -q "^$VNI[[:space:]].*,$A0[[:space:]].*,$A1" "$T/cap.txt"; then
	ok "capture on leaf 1: VXLAN VNI $VNI (tenant default) carrying $A0 -> $A1"
else
	bad "capture: no VXLAN VNI '$VNI' $A0 -> $A1 in: $(head -3 "$T/cap.txt")"
fi

# another tenant
cat >"$T/other.yaml" <<YAML
services:
  - name: intruder
    type: stateless
    replicas: 1
    tenant: other
    command: iod demo-worker --role parameter-server --params 16
YAML
if "$IOD" deploy -f "$T/other.yaml" >"$T/other.out" 2>&1; then
	has_addr() { rep intruder-0 addr | grep -q '^10\.200\.'; }
	wait_for 30 has_addr || bad "intruder-0 never got an address"
	NSI=$(ip netns | awk '/^iod-[0-9a-f]*-intruder-0/{print $1}')
	sleep 1
	out=$(timeout 10 ip netns exec "$NSI" python3 "$T/cli.py" "$A1" 2>&1 | tail -1)
	case "$out" in
	echoed) bad "a replica of tenant other reached tenant default's $A1" ;;
	*) ok "tenant other cannot connect to $A1 (${out##*: })" ;;
	esac
	# the drop is in `iod trace --drops` with its rule and in the verdict
	# counters (<node dir>/dp_sg_verdicts.prom, what the agent's /metrics serves)
	sleep 0.5 # the switch writes its records every 200 ms
	"$IOD" trace --drops >"$T/drops.txt" 2>&1
	if grep -q "other/intruder-0 .* -> parameter-server-1 $A1:7777 tcp SYN policy denied DROPPED (rule tenant-other/deny-other-tenants" "$T/drops.txt"; then
		ok "iod trace --drops: $(grep -m1 intruder-0 "$T/drops.txt")"
	else
		bad "iod trace --drops has no intruder-0 -> $A1 drop with its rule: $(head -3 "$T/drops.txt")"
	fi
	NX=$(rep intruder-0 node)
	"$IOD" trace --drops --node "$NX" -o json | grep -q '"rule":"tenant-other/deny-other-tenants"' &&
		ok "iod trace --drops --node $NX -o json names the rule" ||
		bad "iod trace --drops --node $NX -o json: $(head -c 300 "$T/drops.txt")"
	# the picture shows the same records on that node, with the rule
	vd=$("$IOD" viz net-topology -o json 2>/dev/null | python3 -c "
import json, sys
n = [n for n in json.load(sys.stdin)['nodes'] if n['id'] == 'node:$NX']
d = n[0].get('detail', {}).get('drops', {}) if n else {}
r = d.get('rules', {}).get('tenant-other/deny-other-tenants', 0)
print('%d dropped, %d by tenant-other/deny-other-tenants' % (n[0].get('drops', 0), r) if r else '')")
	[ -n "$vd" ] && ok "iod viz: $NX $vd" || bad "iod viz: no drops with their rule on $NX"
	if grep -Eq '^iod_dp_sg_verdicts_total\{rule="tenant-other/deny-other-tenants",verdict="dropped"\} [1-9]' \
		"$IOD_STATE_DIR/$NX/dp_sg_verdicts.prom" 2>/dev/null &&
		grep -Eq '^iod_dp_sg_verdicts_total\{rule="tenant-default/allow-same-tenant",verdict="forwarded"\} [1-9]' \
			"$IOD_STATE_DIR"/node-*/dp_sg_verdicts.prom 2>/dev/null; then
		ok "verdict counters: $(grep -h 'deny-other-tenants",verdict="dropped"' "$IOD_STATE_DIR/$NX/dp_sg_verdicts.prom")"
	else
		bad "verdict counters: $(cat "$IOD_STATE_DIR"/node-*/dp_sg_verdicts.prom 2>&1 | grep -v '^#' | head -4)"
	fi
else
	echo "skip tenant isolation: this build's spec has no tenant: key ($(head -1 "$T/other.out"))"
fi
kill $ECHO 2>/dev/null

left() {
	{ ip netns | grep -e "^$P-" -e "^iod-"; ip -o link | grep -e "$P" -e iodk -e iodp
		ps -eo args | grep "$IOD_STATE_DIR" | grep -v grep; } 2>/dev/null
}
"$IOD" down --grace 5s >/dev/null 2>&1
l=$(left)
[ -z "$l" ] && ok "iod down: no namespace, link or process left" || bad "iod down left: $l"

# a crash of everything, then iod up: it sweeps what is left
"$IOD" up $UP >"$T/up2.out" 2>&1 || bad "second iod up: $(tail -2 "$T/up2.out")"
"$IOD" deploy -f "$T/spec.yaml" >/dev/null 2>&1
wait_for 30 both || bad "replicas after the second up"
for f in "$IOD_STATE_DIR"/node-*.pid "$IOD_STATE_DIR"/server-*.pid; do kill -9 "$(cat "$f")" 2>/dev/null; done
sleep 0.5
if "$IOD" up $UP >"$T/up3.out" 2>&1; then
	stale=$(ip netns | grep -c "^iod-")
	[ "$stale" = 0 ] && ok "iod up after kill -9 of everything: swept and started" ||
		bad "iod up after a crash left $stale replica namespaces"
else
	bad "iod up after kill -9: $(tail -2 "$T/up3.out")"
fi
"$IOD" deploy -f "$T/spec.yaml" >/dev/null 2>&1
wait_for 30 both || bad "replicas after the third up"
for f in "$IOD_STATE_DIR"/node-*.pid; do kill -9 "$(cat "$f")"; done
# its Node object outlives the agent for a lease: the dump says who is silent
"$IOD" dp dump --node node-1 >"$T/gone.out" 2>&1
rc=$?
if [ $rc = 5 ] && grep -q "node node-1's agent at https://10\.254\.[0-9.]*:[0-9]* does not answer" "$T/gone.out"; then
	ok "dp dump --node of a killed agent: $(cat "$T/gone.out")"
else bad "dp dump --node of a killed agent: rc $rc $(cat "$T/gone.out")"; fi
"$IOD" down --grace 5s >/dev/null 2>&1
l=$(left)
[ -z "$l" ] && ok "kill -9 of every agent, iod down: nothing left" || bad "left after kill -9 + down: $l"

echo "overlay_netns: $pass passed, $fail failed"
[ $fail -eq 0 ]
