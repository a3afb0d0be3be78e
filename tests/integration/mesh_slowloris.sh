#!/bin/sh
# mesh_slowloris.sh BUILD: the mesh proxy under a slow-header flood (issue 15
# item 3). 9,000 connections that never finish their request head made the
# proxy reset every new client: its connection pool was full, and a
# half-sent head never timed out (the idle timer only ran with nothing
# buffered, and every trickled byte reset it). Now each head has a deadline
# (IOD_MESH_HEAD_TIMEOUT_MS, per service "timeouts": {"head": ...}) and each
# client (address, and uid when known) a connection limit
# (IOD_MESH_CLIENT_CONNS_MAX, --client-conns). One `iod proxy run` (the
# sanitizer build when there is one), one worker (a pool of
# IOD_MESH_CONNS_MAX = 4096 connections), in front of `iod proxy backend`.
# One RESULT line for:
#   flood_new_client_served  while one client (127.0.0.2) holds as many
#                            half-sent heads as the box allows (5,000 when
#                            the fd limit permits: more than the pool), 5
#                            new clients from 127.0.0.1 each get 200 within
#                            1 s, and the flood is counted in
#                            iod_mesh_client_limited_total
#   trickled_heads_closed    10 clients that trickle a head one byte per
#                            100 ms to a service with "head": "1s" each get
#                            408 and EOF between 0.9 and 2.5 s after connecting
#                            (iod_mesh_head_timeouts_total counts them)
#   keepalive_not_cut        a keep-alive client that waits 1.5 s between two
#                            requests (idle, not a slow head) gets both answered
#   clean_exit               the proxy exits cleanly (sanitizers quiet)
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
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
FDS=$(ulimit -n)
N=5000
[ "$FDS" -lt $((N + 500)) ] && N=$((FDS - 500))
[ "$N" -ge 1500 ] || { echo "skip: fd limit $FDS is too low for a flood"; exit 77; }

T=$(mktemp -d)
cleanup() {
	stop_bg
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

base=$(free_port_block $$) || { echo "no free block of ports"; exit 77; }
oct=$(( 1 + (base / 100) % 250 )) # one per port block: no two scripts share it
VIP="127.82.$oct.1"
VIP2="127.82.$oct.2"
ADMIN="127.0.0.1:$((base + 40))"
UP=$((base + 1))

bg "$IOD" proxy backend --listen "127.0.0.1:$UP" --name up --size 16 >"$T/up.log" 2>&1
printf '{"node": "n1", "services": [
  {"name": "flood", "vip": "%s", "port": 8000, "mode": "http", "endpoints": [{"addr": "127.0.0.1:%s"}],
   "timeouts": {"head": "60s"}},
  {"name": "trickle", "vip": "%s", "port": 8000, "mode": "http", "endpoints": [{"addr": "127.0.0.1:%s"}],
   "timeouts": {"head": "1s"}}]}\n' "$VIP" "$UP" "$VIP2" "$UP" >"$T/mesh.json"
"$PROXY" proxy run --config "$T/mesh.json" --workers 1 --admin "$ADMIN" >"$T/proxy.log" 2>&1 &
PROXY_PID=$!
LIB_BG_PIDS="$LIB_BG_PIDS $PROXY_PID"
wait_http 10 "http://$ADMIN/healthz" || { echo "proxy did not start"; cat "$T/proxy.log"; exit 1; }
up_ok() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$VIP:8000/")" = 200 ]; }
wait_for 10 up_ok || { echo "no 200 through the proxy"; cat "$T/proxy.log" "$T/up.log"; exit 1; }

pass=0 fail=0 skip=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }
metric() {
	curl -s "http://$ADMIN/metrics" | sed -n "s/^$1{service=\"$2\"} \([0-9]*\).*/\1/p"
}

# The flood: N half-sent heads from 127.0.0.2, held until killed.
cat >"$T/flood.py" <<'PY'
import socket, sys, time
vip, n, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
socks, failed = [], 0
for i in range(n):
    s = socket.socket()
    try:
        s.bind(("127.0.0.2", 0))
        s.settimeout(2)
        s.connect((vip, 8000))
        s.send(b"GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        socks.append(s)
    except OSError:
        failed += 1
        s.close()
time.sleep(0.5)
# still open: a peek that would block (no EOF, no reset)
alive = 0
for s in socks:
    s.setblocking(False)
    try:
        alive += 0 if s.recv(1, socket.MSG_PEEK) == b"" else 1
    except BlockingIOError:
        alive += 1
    except OSError:
        pass
open(ready, "w").write("%d %d %d\n" % (len(socks), failed, alive))
time.sleep(120)
PY
bg python3 "$T/flood.py" "$VIP" "$N" "$T/flood.ready"
wait_for 60 test -s "$T/flood.ready"
read -r opened failed alive <"$T/flood.ready" || opened="?"
r=""
for k in 1 2 3 4 5; do
	out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 1 "http://$VIP:8000/new$k")
	case "$out" in 200\ *) ;; *) r="$r $k:[$out]" ;; esac
done
limited=$(metric iod_mesh_client_limited_total flood)
if [ -z "$r" ] && [ "${limited:-0}" -gt 0 ]; then
	ok "flood_new_client_served ($N slow heads sent, $alive held open, $limited refused at accept)"
else
	bad flood_new_client_served "new clients not served within 1 s:$r (flood: $opened opened, $failed failed, ${alive:-?} open; limited ${limited:-none})"
fi
stop_bg_flood() { kill "$(echo "$LIB_BG_PIDS" | awk '{print $NF}')" 2>/dev/null; }
stop_bg_flood

# Trickled heads: one byte per 100 ms never completes a head in 1 s.
if python3 - "$VIP2" >"$T/trickle.log" 2>&1 <<'PY'; then
import socket, sys, time
vip = sys.argv[1]
head = b"GET /t HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 200 + b"\r\n\r\n"
conns = []
for i in range(10):
    s = socket.socket()
    s.bind(("127.0.0.3", 0))
    s.connect((vip, 8000))
    s.setblocking(False)
    conns.append([s, time.time(), 0, b"", None])
deadline = time.time() + 6
while time.time() < deadline and any(c[4] is None for c in conns):
    for c in conns:
        s, t0, sent, got, end = c
        if end is not None:
            continue
        try:
            d = s.recv(4096)
            if d == b"":
                c[4] = time.time() - t0
                continue
            c[3] += d
        except BlockingIOError:
            pass
        except OSError:
            c[4] = -(time.time() - t0)
            continue
        if sent < len(head):
            try:
                s.send(head[sent:sent + 1])
                c[2] += 1
            except OSError:
                pass
    time.sleep(0.1)
bad = []
for i, (s, t0, sent, got, end) in enumerate(conns):
    if end is None or not (0.9 <= end <= 2.5) or not got.startswith(b"HTTP/1.1 408 "):
        bad.append("%d: end %s, got %r" % (i, end, got[:20]))
print("trickle", "ok" if not bad else "FAIL " + "; ".join(bad))
PY
	:
fi
timeouts=$(metric iod_mesh_head_timeouts_total trickle)
if grep -q "^trickle ok" "$T/trickle.log" && [ "${timeouts:-0}" -ge 10 ]; then
	ok "trickled_heads_closed (iod_mesh_head_timeouts_total $timeouts)"
else
	bad trickled_heads_closed "$(tail -3 "$T/trickle.log"); head timeouts ${timeouts:-none}"
fi

# Keep-alive: the idle wait between requests is no slow head.
if python3 - "$VIP2" >"$T/ka.log" 2>&1 <<'PY'; then
import socket, sys, time
s = socket.create_connection((sys.argv[1], 8000), timeout=5)
codes = []
for i in range(2):
    if i:
        time.sleep(1.5)
    s.sendall(b"GET /ka HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 16:
        d = s.recv(4096)
        if not d:
            break
        got += d
    codes.append(got[:12].decode(errors="replace"))
print("ka", "ok" if all(c.startswith("HTTP/1.1 200") for c in codes) else "FAIL %r" % codes)
PY
	:
fi
grep -q "^ka ok" "$T/ka.log" && ok keepalive_not_cut || bad keepalive_not_cut "$(tail -3 "$T/ka.log")"

kill "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
if [ $rc -ne 0 ] || grep -q "ERROR: AddressSanitizer\|runtime error" "$T/proxy.log"; then
	bad clean_exit "proxy exit $rc"; tail -30 "$T/proxy.log"
else
	ok clean_exit
fi
echo "RESULT $pass $fail $skip"
