#!/bin/sh
# vip_netns.sh BUILD: service VIPs on iod's own network (docs/network.md,
# "Service VIPs on the overlay"). `iod up --netns --nodes 2`; service echo
# (3 replicas spread over both nodes, each an HTTP backend that names itself
# in x-backend, restart: never) and a client replica that depends on it.
# Checks: the deploy gave echo a VIP in 10.200.240.0/20; the client's
# IOD_SVC_ECHO_ADDR is that VIP:port; from the client's namespace, many new
# connections to VIP:port all succeed and each of the 3 endpoints gets a
# share (Maglev in the node's virtual switch; endpoints on the other node
# over VXLAN); kill -9 of an endpoint on the other node: once its Endpoint
# is unhealthy and the client's switch follows (through the watch), no new
# connection fails (from fresh source ports, and from ports whose closed
# connections went to it) and the 2 left share them (the time that took is
# printed: BENCH net.vip_failover); a group on echo that denies client
# drops its connections to the VIP, those to an endpoint on the client's own
# node too, with the rule in `iod trace --drops`, and after its delete the
# VIP answers again. Environment: IOD_VIP_CONNS (connections
# per spread check, default 90). Exit 0 pass, 1 fail, 77 skip.
set -u
BUILD=${1:-build}
. "$(dirname "$0")/lib.sh"
netns_setup "$BUILD" "network namespaces, AF_PACKET" python3
CONNS=${IOD_VIP_CONNS:-90}
trap netns_cleanup EXIT
trap "exit 1" INT TERM
on_bad() { grep -h "vswitch.*service\|WARN" "$IOD_STATE_DIR"/node-*.log 2>/dev/null | tail -8; }

start_cluster "$T/up.out" --netns --nodes 2 --api-port "$BASE" --raft-port $((BASE + 10)) \
	--lease-ttl 2s || exit 1
cat >"$T/spec.yaml" <<'YAML'
services:
  - name: echo
    type: stateless
    replicas: 3
    restart: never
    placement: {strategy: spread}
    ports: [8080]
    command: [sh, -c, 'exec $IOD_BIN proxy backend --listen 0.0.0.0:$IOD_PORT --name $IOD_ADDR --size 16']
    health: {tcp: 1, interval: 200ms, timeout: 150ms}
  - name: client
    type: stateless
    replicas: 1
    depends_on: [echo]
    command: [sleep, '600']
YAML
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.out" 2>&1 || { cat "$T/deploy.out"; bad deploy; exit 1; }

# obj KIND NAME FIELD: a field of an object's value
obj() {
	"$IOD" get "$1" -o json 2>/dev/null | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('items', []):
    if i['name'] == '$2': print(i['value'].get('$3', ''))"
}
healthy() { [ "$(obj endpoints "$1" healthy)" = True ]; }
all_up() {
	for r in echo-0 echo-1 echo-2; do healthy $r || return 1; done
	obj replicas client-0 addr | grep -q '^10\.200\.'
}
wait_for 40 all_up || { bad "echo's 3 endpoints healthy and the client addressed"; exit 1; }
VIP=$(obj services echo vip)
case "$VIP" in
10.200.24[0-9].* | 10.200.25[0-5].*) ok "echo's VIP from the service CIDR 10.200.240.0/20: $VIP" ;;
*) bad "echo's VIP '$VIP' is not in 10.200.240.0/20"; exit 1 ;;
esac
CN=$(obj replicas client-0 node)
for r in echo-0 echo-1 echo-2; do
	echo "info $r on $(obj replicas $r node) at $(obj endpoints $r addr):$(obj endpoints $r port); client-0 on $CN"
done
ns() { ip netns | awk "/^iod-[0-9a-f]*-$1 /{print \$1} /^iod-[0-9a-f]*-$1\$/{print \$1}" | head -1; }
NSC=$(ns client-0)
[ -n "$NSC" ] || { bad "client-0's namespace"; exit 1; }
# the client's environment names the VIP (its sleep is the namespace's process)
envv=""
for p in $(ip netns pids "$NSC"); do
	v=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^IOD_SVC_ECHO_ADDR=//p')
	[ -n "$v" ] && envv=$v
done
[ "$envv" = "$VIP:8080" ] && ok "client-0's IOD_SVC_ECHO_ADDR=$envv (the overlay VIP)" ||
	bad "client-0's IOD_SVC_ECHO_ADDR is '$envv', not $VIP:8080"

cat >"$T/conns.py" <<'EOF'
# conns.py VIP PORT spread TIMEOUT N: N new connections, one request each;
#   prints {"ok": {backend: count}, "failed": n, "errors": {...},
#   "ports": {backend: [source ports]}}
# conns.py VIP PORT reuse TIMEOUT - SPORT...: the same from these source
#   ports (as a client's kernel reuses them); a port this side still holds
#   (its own TIME_WAIT) is not tried
# conns.py VIP PORT failover VICTIM PID...: SIGKILL the PIDs, then new
#   connections back to back (0.2 s each) until 30 in a row are answered
#   by another backend (at most 30 s); prints {"caught_up_ms": when that run began
#   (-1: never), "bad": connections that failed or reached VICTIM before,
#   "attempts": n}
import errno, json, os, signal, socket, sys, time
vip, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def one(to, sport=0):
    s = socket.socket()
    s.settimeout(to)
    if sport:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", sport))
    try:
        s.connect((vip, port))
        s.settimeout(to)
        s.sendall(b"GET / HTTP/1.1\r\nhost: echo\r\nconnection: close\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            b = s.recv(4096)
            if not b:
                break
            got += b
        me = s.getsockname()[1]
    finally:
        s.close()
    be = [l.split(b":", 1)[1].strip().decode() for l in got.split(b"\r\n")
          if l.lower().startswith(b"x-backend:")]
    if not be:
        raise OSError("no x-backend in %r" % got[:80])
    return be[0], me

def tally(res, b):
    res[b] = res.get(b, 0) + 1

if mode in ("spread", "reuse"):
    to = float(sys.argv[4])
    sports = [int(p) for p in sys.argv[6:]] if mode == "reuse" else [0] * int(sys.argv[5])
    ok, failed, errors, ports = {}, 0, {}, {}
    for sp in sports:
        try:
            b, me = one(to, sp)
            tally(ok, b)
            ports.setdefault(b, []).append(me)
        except OSError as e:
            if sp and e.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                tally(errors, "port still held here")  # our own TIME_WAIT: not tried
                continue
            failed += 1
            tally(errors, errno.errorcode.get(e.errno, type(e).__name__))
    print(json.dumps({"ok": ok, "failed": failed, "errors": errors, "ports": ports}))
else:
    victim, pids = sys.argv[4], [int(p) for p in sys.argv[5:]]
    t0 = time.monotonic()
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass  # gone already (the list was read before)
    bad = attempts = streak = 0
    start = t0
    while streak < 30 and time.monotonic() - t0 < 30:
        t = time.monotonic()
        attempts += 1
        try:
            good = one(0.2)[0] != victim
        except Exception:
            good = False
        if good:
            if streak == 0:
                start = t
            streak += 1
        else:
            bad += 1
            streak = 0
    print(json.dumps({"caught_up_ms": round((start - t0) * 1000) if streak >= 30 else -1,
                      "bad": bad, "attempts": attempts}))
EOF
conns() { ip netns exec "$NSC" python3 "$T/conns.py" "$VIP" 8080 spread "$2" "$1"; }
# field JSON EXPR: a python expression over d (the JSON)
field() { python3 -c "import json, sys; d = json.loads(sys.argv[1]); print($2)" "$1"; }

out=$(conns "$CONNS" 2)
echo "info $CONNS connections to $VIP:8080: $out"
n_be=$(field "$out" "len(d['ok'])")
min=$(field "$out" "min(d['ok'].values()) if d['ok'] else 0")
failed=$(field "$out" "d['failed']")
# a fair share is CONNS/3; Maglev over connection hashes gives each at least a third of that
if [ "$failed" = 0 ] && [ "$n_be" = 3 ] && [ "$min" -ge $((CONNS / 9)) ]; then
	ok "$CONNS connections to the VIP spread over the 3 endpoints (least $min), none failed"
else
	bad "spread over 3 endpoints: $out"
fi

# kill one endpoint on the other node (strategy spread puts one on each):
# the client's switch learns of it from the control plane's Endpoint (its
# own replicas' ports it sees go at once)
VICTIM="" VICTIM_ADDR=""
for r in echo-0 echo-1 echo-2; do
	[ -z "$VICTIM" ] && [ "$(obj replicas $r node)" != "$CN" ] && VICTIM=$r
done
[ -n "$VICTIM" ] && VICTIM_ADDR="$(obj endpoints $VICTIM addr):$(obj endpoints $VICTIM port)"
NSV=$(ns "$VICTIM")
PIDS=$(ip netns pids "$NSV" 2>/dev/null)
[ -n "$VICTIM" ] && [ -n "$PIDS" ] || { bad "the endpoint at $VICTIM_ADDR"; exit 1; }
r=$(ip netns exec "$NSC" python3 "$T/conns.py" "$VIP" 8080 failover "$VICTIM_ADDR" $PIDS)
echo "info after kill -9 of $VICTIM: $r"
ms=$(field "$r" "d['caught_up_ms']")
early=$(field "$r" "d['bad']")
if [ "$ms" -ge 0 ]; then
	ok "after kill -9 of $VICTIM ($VICTIM_ADDR, on $(obj replicas $VICTIM node)): health caught up in $ms ms ($early new connections failed or reached it before)"
else
	bad "after kill -9 of $VICTIM: new connections still fail or reach it after 30 s: $r"
fi
# the victim's closed connections are still in the switch's conntrack
# (TIME_WAIT): new connections from their source ports are new sessions,
# balanced anew, not sent to the closed ones' (dead) backend
OLDP=$(field "$out" "' '.join(str(p) for p in d['ports'].get('$VICTIM_ADDR', [])[:10])")
if [ -n "$OLDP" ]; then
	ru=$(ip netns exec "$NSC" python3 "$T/conns.py" "$VIP" 8080 reuse 2 - $OLDP)
	echo "info from the source ports of connections that went to $VICTIM: $ru"
	if [ "$(field "$ru" "d['failed'] + d['ok'].get('$VICTIM_ADDR', 0)")" = 0 ] &&
		[ "$(field "$ru" "sum(d['ok'].values())")" -ge 1 ]; then
		ok "new connections from reused source ports are balanced anew ($(field "$ru" "sum(d['ok'].values())") answered by the 2 left)"
	else
		bad "new connections from reused source ports: $ru"
	fi
fi
unhealthy() { ! healthy "$VICTIM"; }
wait_for 5 unhealthy && ok "$VICTIM's Endpoint is unhealthy" || bad "$VICTIM's Endpoint still healthy"
out=$(conns "$CONNS" 2)
echo "info $CONNS connections after the kill: $out"
failed=$(field "$out" "d['failed']")
n_be=$(field "$out" "len(d['ok'])")
min=$(field "$out" "min(d['ok'].values()) if d['ok'] else 0")
to_victim=$(field "$out" "d['ok'].get('$VICTIM_ADDR', 0)")
if [ "$failed" = 0 ] && [ "$to_victim" = 0 ] && [ "$n_be" = 2 ] && [ "$min" -ge $((CONNS / 6)) ]; then
	ok "no failed new connection once health caught up; the 2 left share them (least $min of $CONNS)"
else
	bad "after health caught up: $out (victim $VICTIM_ADDR)"
fi
echo "BENCH net.vip_failover caught_up_ms=$ms failed_before=$early conns=$CONNS load=$(cut -d' ' -f1 /proc/loadavg)"

# the backends' ingress group applies to sessions to the VIP, also for a
# backend on the client's own node (sgin after svc in the client's switch)
LOCAL=""
for r in echo-0 echo-1 echo-2; do
	[ "$r" != "$VICTIM" ] && [ "$(obj replicas $r node)" = "$CN" ] &&
		LOCAL="$LOCAL $(obj endpoints $r addr):$(obj endpoints $r port)"
done
cat >"$T/deny.yaml" <<'YAML'
security_groups:
  - name: echo-in
    service: echo
    ingress:
      - {name: no-client, action: deny, service: client}
YAML
"$IOD" policy apply -f "$T/deny.yaml" >"$T/apply.out" 2>&1 || bad "iod policy apply: $(cat "$T/apply.out")"
denied() { [ "$(field "$(conns 6 0.5)" "len(d['ok'])")" = 0 ]; }
if [ -z "$LOCAL" ]; then
	bad "no echo endpoint left on client-0's node $CN"
elif wait_for 5 denied; then
	out=$(conns 12 0.5)
	if [ "$(field "$out" "len(d['ok'])")" = 0 ]; then
		ok "echo-in denies client: none of 12 connections to the VIP answered (endpoints on $CN:$LOCAL)"
	else
		bad "echo-in denies client, yet: $out"
	fi
else
	bad "connections to the VIP still answered after echo-in: $(conns 6 0.5)"
fi
sleep 0.5
"$IOD" trace --drops -o json >"$T/drops.json" 2>&1
if python3 -c "
import json, sys
local = '$LOCAL'.split()
rs = [json.loads(l) for l in open('$T/drops.json') if l.strip()]
hit = [r for r in rs if r.get('rule') == 'echo-in/no-client' and '%s:%s' % (r.get('dst'), r.get('dport')) in local]
sys.exit(0 if hit else 1)"; then
	ok "iod trace --drops: a session to the VIP dropped by echo-in/no-client at a backend on $CN"
else
	bad "no drop by echo-in/no-client at$LOCAL: $(head -c 400 "$T/drops.json")"
fi
"$IOD" policy delete echo-in >"$T/del.out" 2>&1 || bad "iod policy delete: $(cat "$T/del.out")"
answered() { [ "$(field "$(conns 6 1)" "d['failed']")" = 0 ]; }
wait_for 5 answered && ok "after iod policy delete: the VIP answers again" ||
	bad "after delete: $(conns 6 1)"

stop_cluster 5s
checks_ok
