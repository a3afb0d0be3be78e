#!/bin/sh
# mesh_emfile.sh BUILD: the mesh proxy out of file descriptors (issue 16
# item 4). accept() failing with EMFILE left the connection queued, so the
# level-triggered listener stayed readable and the worker spun at 100% CPU
# serving no one. Now a descriptor kept in reserve is given up to accept and
# close the queued connection at once (iod_fd_accept, counted in
# iod_mesh_accept_shed_total), and daemons raise RLIMIT_NOFILE to the hard
# limit at start. One `iod proxy run` (sanitizer build when there is one)
# under `ulimit -n 64` (soft and hard), one worker, in front of
# `iod proxy backend`. One RESULT line for:
#   served_after        once the flood goes, a new client gets 200
#   no_spin_at_emfile   while 150 clients hold half-sent heads (more than
#                       the descriptors it has), the proxy uses < 0.3 s of
#                       CPU in 2 s, and sheds (iod_mesh_accept_shed_total > 0)
#   clean_exit          the proxy exits cleanly (sanitizers quiet)
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
B=${1:-build}
IOD="$B/iod"
PROXY="$B/san/iod"
[ -x "$PROXY" ] || PROXY="$IOD"
[ -x "$IOD" ] || { echo "no $IOD"; exit 77; }
command -v curl >/dev/null || { echo "curl missing"; exit 77; }
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }

T=$(mktemp -d)
cleanup() {
	stop_bg
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

base=$(free_port_block $$) || { echo "no free block of ports"; exit 77; }
oct=$(( 1 + (base / 100) % 250 )) # one per port block: no two scripts share it
VIP="127.83.$oct.1"
ADMIN="127.0.0.1:$((base + 40))"
UP=$((base + 1))

bg "$IOD" proxy backend --listen "127.0.0.1:$UP" --name up --size 16 >"$T/up.log" 2>&1
printf '{"node": "n1", "services": [
  {"name": "web", "vip": "%s", "port": 8000, "mode": "http", "endpoints": [{"addr": "127.0.0.1:%s"}],
   "timeouts": {"head": "60s"}}]}\n' "$VIP" "$UP" >"$T/mesh.json"
(ulimit -n 64 && exec "$PROXY" proxy run --config "$T/mesh.json" --workers 1 --admin "$ADMIN" \
	--client-conns 100000) >"$T/proxy.log" 2>&1 &
PROXY_PID=$!
LIB_BG_PIDS="$LIB_BG_PIDS $PROXY_PID"
wait_http 10 "http://$ADMIN/healthz" || { echo "proxy did not start"; cat "$T/proxy.log"; exit 1; }
up_ok() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$VIP:8000/")" = 200 ]; }
wait_for 10 up_ok || { echo "no 200 through the proxy"; cat "$T/proxy.log" "$T/up.log"; exit 1; }

pass=0 fail=0 skip=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PROXY_PID/stat"; }

cat >"$T/flood.py" <<'PY'
import socket, sys, time
vip, n, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
socks = []
for i in range(n):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((vip, 8000))
        s.send(b"GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    except OSError:
        pass
    socks.append(s)
open(ready, "w").write("%d\n" % len(socks))
time.sleep(60)
PY
bg python3 "$T/flood.py" "$VIP" 150 "$T/flood.ready"
wait_for 30 test -s "$T/flood.ready"
sleep 0.5
hz=$(getconf CLK_TCK)
t0=$(cpu_ticks)
sleep 2
t1=$(cpu_ticks)
cpu_ms=$(( (t1 - t0) * 1000 / hz ))
kill "$(echo "$LIB_BG_PIDS" | awk '{print $NF}')" 2>/dev/null
# the admin endpoint sheds too while the table is full: read it after
if wait_for 10 up_ok; then ok served_after; else bad served_after "no 200 after the flood"; fi
shed=$(curl -s --max-time 2 "http://$ADMIN/metrics" | sed -n 's/^iod_mesh_accept_shed_total \([0-9]*\).*/\1/p')
if [ "$cpu_ms" -lt 300 ] && [ "${shed:-0}" -gt 0 ]; then
	ok "no_spin_at_emfile (${cpu_ms} ms CPU in 2 s, ${shed} connections shed)"
else
	bad no_spin_at_emfile "${cpu_ms} ms CPU in 2 s (spinning?), shed ${shed:-none}"
fi

kill "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
if [ $rc -ne 0 ] || grep -q "ERROR: AddressSanitizer\|runtime error" "$T/proxy.log"; then
	bad clean_exit "proxy exit $rc"; tail -30 "$T/proxy.log"
else
	ok clean_exit
fi
echo "RESULT $pass $fail $skip"
[ "$fail" -eq 0 ]
