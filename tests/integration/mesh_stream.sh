#!/bin/sh
# mesh_stream.sh BUILD: bodies of any size stream through the L7 proxy.
#
# One `iod proxy run` (the sanitizer build when there is one) in front of
# iod's backend (`iod proxy backend --file/--sink/--chunked/--read-rate`),
# on loopback. Every transfer's content is verified with sha256sum. One
# RESULT line for:
#   up_1m, up_64m          Content-Length uploads (the backend writes the
#                          decoded body to a file; same checksum)
#   down_1m, down_64m      Content-Length downloads
#   up_chunked, down_chunked  Transfer-Encoding: chunked both ways
#   keepalive              two 1 MiB uploads and a GET on one client connection
#   slow_client            a client reading at 32 MiB/s: the proxy's resident
#                          memory does not grow with the 64 MiB it relays
#   slow_server            a backend reading at 32 MiB/s: the same for uploads
#   head_431               a 20 KiB request head is refused with 431
#   chunk_junk             a chunk-size line with junk and no ';' ("2 junk")
#                          gets 400 and a close, in the first read and mid-body
#                          (RFC 9112 7.1; needs python3)
#   retry_streamed         uploads to a service whose first endpoint refuses
#                          connections: retried on the other, content intact
#   early_answer           a server that answers 413 before reading the body:
#                          the client gets that answer (needs python3)
#   clean_exit             the proxy exits cleanly (sanitizers quiet)
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
B=${1:-build}
IOD="$B/iod"
PROXY="$B/san/iod"
[ -x "$PROXY" ] || PROXY="$IOD"
[ -x "$IOD" ] || { echo "no $IOD"; exit 77; }
need curl sha256sum

T=$(mktemp -d)
cleanup() {
	stop_bg
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

base=$(free_port_block $$) || { echo "no free block of ports"; exit 77; }
oct=$(( 1 + (base / 100) % 250 )) # one per port block: no two scripts share it
VIP="127.79.$oct"
ADMIN="127.0.0.1:$((base + 40))"

head -c 1048576 /dev/urandom >"$T/m1"
head -c 67108864 /dev/urandom >"$T/m64"
sum() { sha256sum "$1" | cut -d' ' -f1; }
S1=$(sum "$T/m1"); S64=$(sum "$T/m64")

start() { # name port [extra...]
	n=$1 p=$2; shift 2
	bg "$IOD" proxy backend --listen "127.0.0.1:$p" --name "$n" "$@" >"$T/$n.log" 2>&1
}
start sink $((base + 1)) --sink "$T/sink"
start big $((base + 2)) --file "$T/m64"
start mid $((base + 3)) --file "$T/m1"
start midc $((base + 4)) --file "$T/m1" --chunked
start slow $((base + 5)) --sink "$T/slowsink" --read-rate 32MiB

svc() { # name octet port
	printf '{"name": "%s", "vip": "%s.%s", "port": 8000, "mode": "http", "endpoints": [{"addr": "127.0.0.1:%s"}]}' \
		"$1" "$VIP" "$2" "$3"
}
{
	echo '{"node": "n1", "services": ['
	svc sink 1 $((base + 1)); echo ,
	svc big 2 $((base + 2)); echo ,
	svc mid 3 $((base + 3)); echo ,
	svc midc 4 $((base + 4)); echo ,
	svc slow 5 $((base + 5)); echo ,
	printf '{"name": "retry", "vip": "%s.6", "port": 8000, "mode": "http", "lb": "round_robin",
	  "outlier": {"consecutive_connect_failure": 100, "consecutive_5xx": 100},
	  "endpoints": [{"addr": "127.0.0.1:%s"}, {"addr": "127.0.0.1:%s"}]},' "$VIP" $((base + 9)) $((base + 1))
	svc early 7 $((base + 7))
	echo ']}'
} >"$T/mesh.json"

bg "$PROXY" proxy run --config "$T/mesh.json" --workers 1 --admin "$ADMIN" >"$T/proxy.log" 2>&1
PROXY_PID=$BG_PID
i=0
until curl -sf "http://$ADMIN/healthz" >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "proxy did not start"; cat "$T/proxy.log"; exit 1; }
	sleep 0.1
done


# upload NAME FILE WANTSUM [curl args...]: through the sink service
upload() {
	name=$1 file=$2 want=$3; shift 3
	rm -f "$T/sink"
	code=$(curl -s -o "$T/resp" -D "$T/hdr" -w '%{http_code}' -T "$file" "$@" "http://$VIP.1:8000/up")
	got=$(sum "$T/sink" 2>/dev/null)
	bytes=$(sed -n 's/^x-body-bytes: \([0-9]*\).*/\1/p' "$T/hdr")
	if [ "$code" = 200 ] && [ "$got" = "$want" ] && [ "$bytes" = "$(wc -c <"$file")" ]; then
		ok "$name"
	else
		bad "$name" "code=$code bytes=$bytes sum=$got want=$want"
	fi
}
# download NAME OCTET WANTSUM [curl args...]
download() {
	name=$1 o=$2 want=$3; shift 3
	rm -f "$T/got"
	code=$(curl -s -o "$T/got" -w '%{http_code}' "$@" "http://$VIP.$o:8000/down")
	got=$(sum "$T/got" 2>/dev/null)
	if [ "$code" = 200 ] && [ "$got" = "$want" ]; then ok "$name"; else bad "$name" "code=$code sum=$got want=$want"; fi
}

upload up_1m "$T/m1" "$S1"
upload up_64m "$T/m64" "$S64"
download down_1m 3 "$S1"
download down_64m 2 "$S64"
upload up_chunked "$T/m1" "$S1" -H 'Transfer-Encoding: chunked'
download down_chunked 4 "$S1" -D "$T/chdr"
grep -qi '^transfer-encoding: chunked' "$T/chdr" || bad down_chunked_framing "the answer was not chunked"

# keepalive: two uploads and a GET on one client connection.
conns=$(curl -s -o /dev/null -o /dev/null -o /dev/null -w '%{http_code}:%{num_connects} ' \
	-T "$T/m1" "http://$VIP.1:8000/a" -T "$T/m1" "http://$VIP.1:8000/b" "http://$VIP.1:8000/c")
[ "$conns" = "200:1 200:0 200:0 " ] && ok keepalive || bad keepalive "codes:connects $conns"

rss() { sed -n 's/^VmRSS:[^0-9]*\([0-9]*\).*/\1/p' "/proc/$PROXY_PID/status"; }
# relay NAME SUMFILE WANTSUM curl-args...: run curl while sampling the
# proxy's resident memory; pass when the content matches and the peak grew
# by less than 16 MiB (the body is 64 MiB: buffering it would show).
relay() {
	name=$1 sfile=$2 want=$3; shift 3
	rm -f "$T/stop" "$T/peak"
	before=$(rss)
	(
		max=0
		while [ ! -e "$T/stop" ]; do
			r=$(rss); [ "${r:-0}" -gt "$max" ] && max=$r
			sleep 0.1
		done
		echo "$max" >"$T/peak"
	) &
	sampler=$!
	curl -s "$@"
	touch "$T/stop"
	wait $sampler
	peak=$(cat "$T/peak")
	grow=$((peak - before))
	echo "$name: proxy RSS ${before} KiB before, peak ${peak} KiB while relaying 64 MiB"
	if [ "$(sum "$sfile")" = "$want" ] && [ "$grow" -lt 16384 ]; then
		ok "$name"
	else
		bad "$name" "growth ${grow} KiB or content differs"
	fi
}
relay slow_client "$T/slowgot" "$S64" --limit-rate 32M -o "$T/slowgot" "http://$VIP.2:8000/down"
relay slow_server "$T/slowsink" "$S64" -o /dev/null -T "$T/m64" "http://$VIP.5:8000/up"

big=$(head -c 20480 /dev/zero | tr '\0' 'a')
code=$(curl -s -o /dev/null -w '%{http_code}' -H "x-big: $big" "http://$VIP.3:8000/")
[ "$code" = 431 ] && ok head_431 || bad head_431 "code=$code"

if command -v python3 >/dev/null; then
	if python3 - "$VIP.1" >"$T/junk.log" 2>&1 <<'PY'; then
import socket, sys, time
def ask(parts):
    c = socket.create_connection((sys.argv[1], 8000), timeout=5)
    for k, p in enumerate(parts):
        if k:
            time.sleep(0.3)
        c.sendall(p)
    data = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        data += d
    c.close()
    return data
head = b"POST /j HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
for name, parts in (("first", [head + b"2 erfrferferf\r\nab\r\n0\r\n\r\n"]),
                    ("mid", [head + b"5\r\nhello\r\n", b"a \r\n0123456789\r\n0\r\n\r\n"])):
    r = ask(parts)
    if not r.startswith(b"HTTP/1.1 400 ") or b"connection: close" not in r.lower():
        print(name, r[:200]); sys.exit(1)
PY
		ok chunk_junk
	else
		bad chunk_junk "$(cat "$T/junk.log")"
	fi
else
	skip_check chunk_junk "python3 missing"
fi

# retry_streamed: round robin sends one of each two to the dead endpoint
# first; nothing of the body reached a server, so it is resent.
r=""
for k in 1 2 3; do
	rm -f "$T/sink"
	code=$(curl -s -o /dev/null -w '%{http_code}' -T "$T/m1" "http://$VIP.6:8000/r$k")
	[ "$code" = 200 ] && [ "$(sum "$T/sink" 2>/dev/null)" = "$S1" ] || r="$r $k:$code"
done
[ -z "$r" ] && ok retry_streamed || bad retry_streamed "failed:$r"

if command -v python3 >/dev/null; then
	python3 - $((base + 7)) "$T/early.ready" >"$T/early.log" 2>&1 <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
open(sys.argv[2], "w").close()
c, _ = s.accept()
data = b""
while b"\r\n\r\n" not in data:
    d = c.recv(4096)
    if not d: break
    data += d
c.sendall(b"HTTP/1.1 413 Too Big\r\ncontent-length: 4\r\nconnection: close\r\n\r\nnope")
c.shutdown(socket.SHUT_WR)
c.settimeout(2)
try:
    while c.recv(65536): pass
except Exception: pass
c.close()
PY
	bg_adopt $!
	i=0
	while [ ! -e "$T/early.ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	code=$(curl -s -o "$T/early" -w '%{http_code}' -H 'Expect:' -T "$T/m64" "http://$VIP.7:8000/e")
	[ "$code" = 413 ] && [ "$(cat "$T/early")" = nope ] && ok early_answer ||
		bad early_answer "code=$code body=$(head -c 40 "$T/early")"
else
	skip_check early_answer "python3 missing"
fi

kill "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
if [ $rc -ne 0 ] || grep -q "ERROR: AddressSanitizer\|runtime error" "$T/proxy.log"; then
	bad clean_exit "proxy exit $rc"; tail -30 "$T/proxy.log"
else
	ok clean_exit
fi
