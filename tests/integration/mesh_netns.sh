#!/bin/sh
# mesh_netns.sh BUILD: the mesh proxy and <service>.iod DNS on iod's own
# network (docs/network.md, "The mesh proxy on the overlay"). `iod up
# --netns --nodes 2`; service web (service_mesh: {mode: l7}, an HTTP port,
# 2 replicas spread over both nodes), service echo (l4, the default, 1
# replica) and a client replica that depends on both. Checks: the Service
# object carries the mode; the client's IOD_SVC_WEB_ADDR is web's overlay
# VIP:port; from the client's namespace `web.iod` and `echo.iod` resolve at
# its gateway to the two VIPs, and another name is NXDOMAIN; HTTP requests
# to web's VIP are answered by both replicas (the one on the other node
# once the client's node's own replica is killed: the proxy prefers its
# node's endpoint) and counted by the client's node's proxy (the L7 path); echo's VIP is answered without that proxy seeing it (the
# switch's Maglev, L4); the proxy's VIP listener and the DNS responder do
# not answer from the underlay (a leaf routing the VIP and the gateway to
# the node: they are bound to the switch's host-stack port); a spec with
# service_mesh.mode l8 is refused with its position. Exit 0 pass, 1 fail,
# 77 skip.
set -u
BUILD=${1:-build}
. "$(dirname "$0")/lib.sh"
need_iod "$BUILD"
need_root "network namespaces, AF_PACKET"
need ip python3 curl
ip netns add "iodprobe$$" 2>/dev/null || { echo "skip: cannot create network namespaces"; exit 77; }
ip netns del "iodprobe$$"

T=$(mktemp -d)
export IOD_STATE_DIR="$T/state"
export PATH="$(dirname "$IOD"):$PATH"
BASE=$(free_port_block $$)
MESH_PORT=$((BASE + 40))
cleanup() {
	stop_bg
	stop_cluster 2s
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
on_bad() { grep -h "mesh\|vswitch.*service\|WARN" "$IOD_STATE_DIR"/node-*.log 2>/dev/null | tail -12; }

# the mode is validated before anything starts
cat >"$T/bad.yaml" <<'YAML'
services:
  - name: web
    type: stateless
    service_mesh: {mode: l8}
YAML
if "$IOD" validate -f "$T/bad.yaml" >"$T/bad.out" 2>&1; then
	bad "service_mesh.mode l8 accepted"
elif grep -q 'bad.yaml:4:.*service_mesh.mode "l8" is not valid' "$T/bad.out"; then
	ok "service_mesh.mode l8 refused: $(head -1 "$T/bad.out")"
else
	bad "service_mesh.mode l8: $(cat "$T/bad.out")"
fi

start_cluster "$T/up.out" --netns --nodes 2 --api-port "$BASE" --raft-port $((BASE + 10)) \
	--mesh-port "$MESH_PORT" --lease-ttl 2s || exit 1
P=$(sed -n 's/^underlay \(iodu[0-9a-f]*\)-\*.*/\1/p' "$T/up.out")
[ -n "$P" ] || { bad "the underlay's prefix in: $(cat "$T/up.out")"; exit 1; }
cat >"$T/spec.yaml" <<'YAML'
services:
  - name: web
    type: stateless
    replicas: 2
    restart: never
    placement: {strategy: spread}
    ports: [{name: http, port: 8080}]
    service_mesh: {mode: l7}
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name $IOD_ADDR --size 16']
    health: {tcp: 1, interval: 200ms, timeout: 150ms}
  - name: echo
    type: stateless
    replicas: 1
    restart: never
    ports: [9090]
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name $IOD_ADDR --size 16']
    health: {tcp: 1, interval: 200ms, timeout: 150ms}
  - name: client
    type: stateless
    replicas: 1
    depends_on: [web, echo]
    command: [sleep, '600']
YAML
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.out" 2>&1 || { cat "$T/deploy.out"; bad deploy; exit 1; }

obj() {
	"$IOD" get "$1" -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$2': print(i['value'].get('$3', ''))"
}
healthy() { [ "$(obj endpoints "$1" healthy)" = True ]; }
all_up() {
	for r in web-0 web-1 echo-0; do healthy $r || return 1; done
	obj replicas client-0 addr | grep -q '^10\.200\.'
}
wait_for 90 all_up || { bad "web's 2 and echo's endpoints healthy, the client addressed (90 s)"; on_bad; exit 1; }
# every node's SVIDs in its own directory, as on separate machines (one
# shared state/svid let one node's prune or reissue race another's replica
# start: "web.key: No such file or directory", the replica down for good)
if [ -s "$IOD_STATE_DIR/node-1/svid/default/web.crt" ] && [ -s "$IOD_STATE_DIR/node-2/svid/default/web.crt" ] &&
	[ ! -e "$IOD_STATE_DIR/svid" ]; then
	ok "each node's SVIDs in its own directory (node-N/svid)"
else
	bad "SVID directories: $(cd "$IOD_STATE_DIR" && ls -d svid node-*/svid 2>&1 | tr '\n' ' ')"
fi
case "$(obj services web service_mesh)" in
*"'mode': 'l7'"*) ok "the Service object web carries service_mesh.mode l7" ;;
*) bad "web's service_mesh: '$(obj services web service_mesh)'" ;;
esac
VIP=$(obj services web vip)
EVIP=$(obj services echo vip)
CN=$(obj replicas client-0 node)
N=${CN#node-}
GW=10.200.$N.1
for r in web-0 web-1 echo-0; do
	echo "info $r on $(obj replicas $r node) at $(obj endpoints $r addr):$(obj endpoints $r port); client-0 on $CN"
done
ns() { ip netns | awk "/^iod-[0-9a-f]*-$1 /{print \$1} /^iod-[0-9a-f]*-$1\$/{print \$1}" | head -1; }
NSC=$(ns client-0)
[ -n "$NSC" ] || { bad "client-0's namespace"; exit 1; }
envv=""
for p in $(ip netns pids "$NSC"); do
	v=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^IOD_SVC_WEB_ADDR=//p')
	[ -n "$v" ] && envv=$v
done
[ "$envv" = "$VIP:8080" ] && ok "client-0's IOD_SVC_WEB_ADDR=$envv (web's overlay VIP)" ||
	bad "client-0's IOD_SVC_WEB_ADDR is '$envv', not $VIP:8080"

cat >"$T/dns.py" <<'EOF'
# dns.py SERVER NAME: one A query over UDP; prints the address, NXDOMAIN,
# REFUSED or TIMEOUT
import random, socket, struct, sys
srv, name = sys.argv[1], sys.argv[2]
qid = random.randrange(65536)
q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
for l in name.split("."):
    q += bytes([len(l)]) + l.encode()
q += b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1.0)
try:
    s.sendto(q, (srv, 53))
    a = s.recv(512)
except OSError:
    print("TIMEOUT"); sys.exit(0)
rc = a[3] & 0xf
if rc == 3: print("NXDOMAIN"); sys.exit(0)
if rc == 5: print("REFUSED"); sys.exit(0)
an = struct.unpack(">H", a[6:8])[0]
print(socket.inet_ntoa(a[-4:]) if an else "NODATA")
EOF
dns() { ip netns exec "$NSC" python3 "$T/dns.py" "$GW" "$1"; }
resolved() { [ "$(dns web.iod)" = "$VIP" ]; }
wait_for 10 resolved || true
a=$(dns web.iod)
b=$(dns echo.iod)
c=$(dns nosuch.iod)
if [ "$a" = "$VIP" ] && [ "$b" = "$EVIP" ] && [ "$c" = NXDOMAIN ]; then
	ok "DNS at the gateway $GW from client-0's namespace: web.iod=$a, echo.iod=$b, nosuch.iod $c"
else
	bad "DNS at $GW: web.iod '$a' (want $VIP), echo.iod '$b' (want $EVIP), nosuch.iod '$c'"
fi

# the client's own /etc/resolv.conf names its gateway, and its resolver
# finds web.iod there (getent in its mount and network namespaces)
CP=""
for p in $(ip netns pids "$NSC"); do
	grep -q "nameserver $GW" "/proc/$p/root/etc/resolv.conf" 2>/dev/null && CP=$p
done
if [ -z "$CP" ]; then
	bad "client-0's /etc/resolv.conf: $(cat /proc/$(ip netns pids "$NSC" | head -1)/root/etc/resolv.conf 2>&1 | head -3)"
elif command -v nsenter >/dev/null 2>&1; then
	g=$(nsenter -t "$CP" -m -n getent hosts web.iod 2>&1 | awk '{print $1}')
	[ "$g" = "$VIP" ] && ok "client-0's resolv.conf names $GW; getent hosts web.iod there gives $g" ||
		bad "client-0's getent hosts web.iod: '$g' (want $VIP)"
else
	ok "client-0's resolv.conf names $GW (no nsenter to resolve through it)"
fi

metric() { # metric NODE-N NAME SERVICE: the node's proxy's counter (0 if none)
	ip netns exec "$P-h$1" curl -s --max-time 2 "http://127.0.0.1:$MESH_PORT/metrics" |
		awk -v m="$2{service=\"$3\"" 'index($0, m) == 1 {print $2; f=1} END {if (!f) print 0}'
}
cat >"$T/get.py" <<'EOF'
# get.py ADDR PORT N: N HTTP requests, one connection each; prints
# "<failed> <backend>=<count>..."
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seen, failed = {}, 0
for i in range(n):
    try:
        s = socket.create_connection((host, port), timeout=2)
        s.sendall(b"GET / HTTP/1.1\r\nhost: web\r\nconnection: close\r\n\r\n")
        got = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
        s.close()
        be = [l.split(b":", 1)[1].strip().decode() for l in got.split(b"\r\n")
              if l.lower().startswith(b"x-backend:")]
        if not got.startswith(b"HTTP/1.1 200") or not be:
            failed += 1
            continue
        seen[be[0]] = seen.get(be[0], 0) + 1
    except OSError:
        failed += 1
print(failed, " ".join("%s=%d" % kv for kv in sorted(seen.items())))
EOF
before=$(metric "$N" iod_mesh_requests_total web)
out=$(ip netns exec "$NSC" python3 "$T/get.py" "$VIP" 8080 40)
after=$(metric "$N" iod_mesh_requests_total web)
echo "info 40 requests to web's VIP $VIP:8080: $out; $CN's proxy counted $before -> $after"
set -- $out
if [ "$1" = 0 ] && [ "$((after - before))" -ge 40 ]; then
	ok "l7: 40 requests to web's VIP answered through $CN's mesh proxy ($((after - before)) counted: $out)"
else
	bad "l7: $out; the proxy counted $before -> $after"
fi
# the proxy prefers its node's endpoint (locality); with that one killed,
# the one on the other node answers, through the two proxies' mutual TLS
LOCAL="" REMOTE=""
for r in web-0 web-1; do
	if [ "$(obj replicas $r node)" = "$CN" ]; then LOCAL=$r; else REMOTE=$r; fi
done
RA=$(obj endpoints "$REMOTE" addr):$(obj endpoints "$REMOTE" port)
NSL=$(ns "$LOCAL")
[ -n "$LOCAL" ] && [ -n "$REMOTE" ] && [ -n "$NSL" ] || { bad "web's replicas: local '$LOCAL' remote '$REMOTE'"; exit 1; }
kill -9 $(ip netns pids "$NSL") 2>/dev/null
remote_only() { o=$(ip netns exec "$NSC" python3 "$T/get.py" "$VIP" 8080 5); [ "$o" = "0 $RA=5" ]; }
wait_for 15 remote_only || true
before=$(metric "$N" iod_mesh_requests_total web)
out=$(ip netns exec "$NSC" python3 "$T/get.py" "$VIP" 8080 20)
after=$(metric "$N" iod_mesh_requests_total web)
if [ "$out" = "0 $RA=20" ] && [ "$((after - before))" -ge 20 ]; then
	ok "l7 across nodes: $LOCAL killed, 20 requests answered by $REMOTE ($RA on the other node) through the proxies' mTLS"
	# the mesh's tracing on this path: the backend saw the proxy's traceparent
	tp=$(ip netns exec "$NSC" curl -s -m 3 -D - -o /dev/null "http://$VIP:8080/" | tr -d '\r' |
		sed -n 's/^x-traceparent-seen: //p')
	[ -n "$tp" ] && ok "l7: the backend saw the proxy's traceparent $tp" ||
		bad "l7: no traceparent reached the backend"
else
	bad "l7 across nodes: $out (want 0 $RA=20); proxy counted $before -> $after"
fi
eb=$(metric "$N" iod_mesh_downstream_connections_total echo)
out=$(ip netns exec "$NSC" python3 "$T/get.py" "$EVIP" 9090 10)
ea=$(metric "$N" iod_mesh_downstream_connections_total echo)
set -- $out
if [ "$1" = 0 ] && [ "$eb" = "$ea" ]; then
	ok "l4: 10 requests to echo's VIP answered by the switch's Maglev, none through the proxy ($eb -> $ea)"
else
	bad "l4: $out; the proxy's echo connections $eb -> $ea"
fi

# the callee's ingress group on the l7 path (docs/network.md, "Security
# groups"): the proxy dials web's replicas from the host stack, so web-in
# is checked at the caller's switch. A group that admits only echo drops
# client-0's connections to web's VIP under web-in/default-deny; after
# `iod policy delete` the tenant default admits them again
cat >"$T/webin.yaml" <<'YAML'
security_groups:
  - name: web-in
    service: web
    ingress:
      - {name: from-echo, service: echo, protocol: tcp, ports: 8080}
YAML
"$IOD" policy apply -f "$T/webin.yaml" >"$T/webin.out" 2>&1 || bad "iod policy apply web-in: $(cat "$T/webin.out")"
refused() { o=$(ip netns exec "$NSC" python3 "$T/get.py" "$VIP" 8080 2); [ "${o%% *}" = 2 ]; }
if wait_for 10 refused; then
	sleep 0.5
	if "$IOD" trace --drops 2>&1 | grep -q "client-0 .*-> .*$VIP:8080 tcp SYN .*(rule web-in/default-deny"; then
		ok "l7: web-in (only echo) refuses client-0 at its switch, dropped under web-in/default-deny"
	else
		bad "l7: client-0 refused, but no drop by web-in/default-deny: $("$IOD" trace --drops 2>&1 | tail -3)"
	fi
else
	bad "l7: client-0 still reaches web's VIP past web-in: $(ip netns exec "$NSC" python3 "$T/get.py" "$VIP" 8080 2)"
fi
"$IOD" policy delete web-in >"$T/webdel.out" 2>&1 || bad "iod policy delete web-in: $(cat "$T/webdel.out")"
answered() { o=$(ip netns exec "$NSC" python3 "$T/get.py" "$VIP" 8080 2); [ "${o%% *}" = 0 ]; }
wait_for 10 answered && ok "l7: after iod policy delete web-in, client-0 reaches web's VIP again" ||
	bad "l7: client-0 refused after web-in was deleted"

# from the underlay: leaf 1 routes web's VIP and node N's gateway to the
# node's underlay address; neither the proxy's listener nor DNS answers
LEAF=$P-l$(((N - 1) % 2 + 1))
HA=$(ip netns exec "$P-h$N" ip -4 -o addr show dev u0 | awk '{print $4}' | cut -d/ -f1)
ip netns exec "$LEAF" ip route replace "$VIP/32" via "$HA"
ip netns exec "$LEAF" ip route replace "$GW/32" via "$HA"
u=$(ip netns exec "$LEAF" python3 "$T/get.py" "$VIP" 8080 1)
d=$(ip netns exec "$LEAF" python3 "$T/dns.py" "$GW" web.iod)
ip netns exec "$LEAF" ip route del "$VIP/32" 2>/dev/null
ip netns exec "$LEAF" ip route del "$GW/32" 2>/dev/null
if [ "${u%% *}" = 1 ] && [ "$d" = TIMEOUT ]; then
	ok "from the underlay ($LEAF via $HA): the proxy's VIP listener refuses ($u) and DNS does not answer"
else
	bad "from the underlay: a request got '$u' (want 1 failed), DNS '$d' (want TIMEOUT)"
fi

stop_cluster 5s
checks_ok
