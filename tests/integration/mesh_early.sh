#!/bin/sh
# mesh_early.sh BUILD: an upstream's early answer reaches an uploading client.
#
# A server may answer a request before reading its body (a 413 for an
# upload it will not take). The L7 proxy forwards that answer and closes the
# client connection while the client is still uploading: closed with unread
# input, a socket sends RST, which can destroy the answer before the client
# reads it (curl: code 000). The proxy closes such connections lingering:
# it shuts its side down and discards client input for a bounded time before
# closing. One `iod proxy run` (the sanitizer build when there is one) in
# front of a python server that answers 413 right after the request head.
# One RESULT line for:
#   early_curl       30 curl uploads of 8 MiB: every one gets the 413 and its body
#   early_socket     30 raw-socket uploads of 8 MiB that send until the answer
#                    is in: every one reads the 413, then EOF (no reset)
#   linger_bounded   a client that keeps uploading after the answer is cut off
#                    within the linger time (IOD_MESH_LINGER_MS, 2 s), and
#                    the proxy's connection gauge returns to 0
#   clean_exit       the proxy exits cleanly (sanitizers quiet)
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
VIP="127.81.$oct.1"
ADMIN="127.0.0.1:$((base + 40))"
UP=$((base + 1))

head -c 8388608 /dev/urandom >"$T/m8"

# The upstream: answers 413 after the head, shuts down, drains, closes.
cat >"$T/up.py" <<'PY'
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
open(sys.argv[2], "w").close()
def serve(c):
    try:
        data = b""
        while b"\r\n\r\n" not in data:
            d = c.recv(4096)
            if not d:
                return
            data += d
        c.sendall(b"HTTP/1.1 413 Too Big\r\ncontent-length: 4\r\nconnection: close\r\n\r\nnope")
        c.shutdown(socket.SHUT_WR)
        c.settimeout(5)
        while c.recv(65536):
            pass
    except Exception:
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
bg python3 "$T/up.py" "$UP" "$T/up.ready" >"$T/up.log" 2>&1
wait_for 10 test -e "$T/up.ready" || { echo "upstream did not start"; cat "$T/up.log"; exit 1; }

printf '{"node": "n1", "services": [{"name": "early", "vip": "%s", "port": 8000, "mode": "http", "endpoints": [{"addr": "127.0.0.1:%s"}]}]}\n' \
	"$VIP" "$UP" >"$T/mesh.json"
"$PROXY" proxy run --config "$T/mesh.json" --workers 1 --admin "$ADMIN" >"$T/proxy.log" 2>&1 &
PROXY_PID=$!
LIB_BG_PIDS="$LIB_BG_PIDS $PROXY_PID"
wait_http 10 "http://$ADMIN/healthz" || { echo "proxy did not start"; cat "$T/proxy.log"; exit 1; }

pass=0 fail=0 skip=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }

# early_curl: curl stops sending when the answer comes; it must get it.
r=""
for k in $(seq 1 30); do
	rm -f "$T/early"
	code=$(curl -s -o "$T/early" -w '%{http_code}' -H 'Expect:' -T "$T/m8" "http://$VIP:8000/e$k")
	[ "$code" = 413 ] && [ "$(cat "$T/early" 2>/dev/null)" = nope ] || r="$r $k:$code"
done
[ -z "$r" ] && ok early_curl || bad early_curl "runs without the 413 (run:code):$r"

# early_socket and linger_bounded: raw sockets, so that what the client sees
# (the answer, then EOF or a reset) is exact.
if python3 - "$VIP" >"$T/sock.log" 2>&1 <<'PY'; then
import select, socket, sys, time
vip = sys.argv[1]
BODY = 8 << 20
HEAD = b"PUT /s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % BODY
chunk = b"x" * 65536

def upload(keep_sending):
    """Send the body until the whole answer is in (or, keep_sending, past
    it); return (answer bytes, how the connection ended, seconds after the
    answer)."""
    c = socket.create_connection((vip, 8000), timeout=10)
    c.setblocking(False)
    out, sent, resp, answered = HEAD, 0, b"", None
    end = "timeout"
    deadline = time.time() + 10
    while time.time() < deadline:
        want_w = out and (answered is None or keep_sending)
        r, w, _ = select.select([c], [c] if want_w else [], [], 0.5)
        if w:
            try:
                n = c.send(out[:65536])
                out = out[n:]
                sent += n
                if not out and (keep_sending or sent < BODY + len(HEAD)):
                    out = chunk  # keep_sending: past the body, regardless
            except (BrokenPipeError, ConnectionResetError) as e:
                end = "reset-on-send"
                break
            except BlockingIOError:
                pass
        if r:
            try:
                d = c.recv(65536)
            except ConnectionResetError:
                end = "reset"
                break
            if not d:
                end = "eof"
                if not keep_sending:
                    break
                r = []  # the proxy shut its side: only writes from here
                while True:
                    try:
                        c.setblocking(True)
                        c.settimeout(10)
                        c.send(chunk)
                    except (BrokenPipeError, ConnectionResetError):
                        end = "reset-on-send"
                        break
                    except socket.timeout:
                        end = "timeout"
                        break
                break
            resp += d
            if answered is None and resp.endswith(b"\r\n\r\nnope"):
                answered = time.time()
    c.close()
    return resp, end, (time.time() - answered) if answered else None

bad = []
for k in range(30):
    resp, end, _ = upload(False)
    if not resp.startswith(b"HTTP/1.1 413 ") or not resp.endswith(b"nope") or end != "eof":
        bad.append("%d:%s:%r" % (k, end, resp[:12]))
print("early_socket", "ok" if not bad else "FAIL " + " ".join(bad))

resp, end, after = upload(True)
good = (resp.startswith(b"HTTP/1.1 413 ") and after is not None and after < 4.0 and
        end == "reset-on-send")
print("linger_bounded", "ok" if good else "FAIL", end, "%.3f s after the answer" % after if after else "no answer")
sys.exit(0)
PY
	:
fi
for n in early_socket linger_bounded; do
	line=$(grep "^$n " "$T/sock.log")
	case "$line" in
	"$n ok"*) ok "$n" ;;
	*) bad "$n" "${line:-$(tail -5 "$T/sock.log")}" ;;
	esac
done

# Every lingering connection is gone once the linger time has passed.
gauge() {
	curl -s "http://$ADMIN/metrics" |
		sed -n 's/^iod_mesh_downstream_connections_active{service="early"} \([0-9]*\).*/\1/p'
}
gauge_zero() { [ "$(gauge)" = 0 ]; }
wait_for 5 gauge_zero || bad linger_bounded "connections still open: $(gauge)"

kill "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
if [ $rc -ne 0 ] || grep -q "ERROR: AddressSanitizer\|runtime error" "$T/proxy.log"; then
	bad clean_exit "proxy exit $rc"; tail -30 "$T/proxy.log"
else
	ok clean_exit
fi
echo "RESULT $pass $fail $skip"
