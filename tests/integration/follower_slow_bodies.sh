#!/bin/sh
# follower_slow_bodies.sh BUILD: a follower's memory under half-sent request
# bodies (issue 15: "200 half-sent bodies pushed a follower from 30 to
# 830 MB"). Three `iod server` members on loopback (plaintext, --insecure);
# on a follower's API, 200 connections each declare a 4 MiB body
# (IOD_API_BODY_MAX) for a PUT, send all of it but its last byte, and hold.
#   1. follower_rss_bounded: the follower's VmRSS (from /proc) grows by at
#      most 64 MiB while they are held (before: by their 800 MB of bodies);
#   2. follower_still_serves: a new client gets /v1/status from it within 1 s
#      while they are held, and a write through the cluster still commits.
# Prints one RESULT line per check.
# iod-test: parallel
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed (socket clients)"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl needed"; exit 77; }

. "$(dirname "$0")/lib.sh"
BASE=$(free_port_block 15) || { echo "skip: no free port block"; exit 77; }
T=$(mktemp -d)
PIDS=""
HOLD=""
cleanup() {
	[ -n "$HOLD" ] && kill "$HOLD" 2>/dev/null && wait "$HOLD" 2>/dev/null
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

ok() { echo "ok   $1"; echo "RESULT 1 0 0"; }
bad() {
	echo "FAIL $1"
	echo "RESULT 0 1 0"
	for f in "$T"/s*.log; do echo "--- $f"; tail -8 "$f"; done
}
raft() { echo "127.0.0.1:$((BASE + $1))"; }
api() { echo "127.0.0.1:$((BASE + 10 + $1))"; }
PEERS="1=$(raft 1)@$(api 1),2=$(raft 2)@$(api 2),3=$(raft 3)@$(api 3)"
for i in 1 2 3; do
	"$IOD" server --id "$i" --data-dir "$T/d$i" --raft "$(raft "$i")" --api "$(api "$i")" \
		--insecure --election-timeout 300ms --heartbeat 30ms --peers "$PEERS" \
		>>"$T/s$i.log" 2>&1 &
	PIDS="$PIDS $!"
	eval "PID$i=$!"
done
state_of() { curl -s --max-time 1 "http://$(api "$1")/v1/status" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null; }
FOL=""
find_follower() {
	L=""
	for i in 1 2 3; do [ "$(state_of "$i")" = leader ] && L=$i; done
	[ -n "$L" ] || return 1
	for i in 1 2 3; do
		[ "$i" != "$L" ] && [ "$(state_of "$i")" = follower ] && { FOL=$i; return 0; }
	done
	return 1
}
wait_for 20 find_follower || { bad "no leader and follower in 20 s"; exit 1; }
eval "FPID=\$PID$FOL"
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
RSS0=$(rss_kb "$FPID")

# 200 half-sent 4 MiB bodies, from 4 loopback addresses (50 each: under the
# per-address connection limit); held until killed
cat >"$T/hold.py" <<'EOF'
import socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = 4 << 20
chunk = b"x" * (1 << 20)
socks = []
for i in range(n):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (20 + i % 4), 0))
    s.connect((host, port))
    s.sendall(("PUT /v1/config/slow%d HTTP/1.1\r\nHost: x\r\n"
               "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
               % (i, size)).encode())
    s.setblocking(False)
    socks.append([s, size - 1])
# send what the server takes (a server that answers early and closes takes
# no more), for up to 8 s, then hold
end = time.time() + 8
while time.time() < end and any(left for _, left in socks):
    for e in socks:
        s, left = e
        if not left:
            continue
        try:
            e[1] -= s.send(chunk[:min(left, len(chunk))])
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            e[1] = 0
    time.sleep(0.01)
sent = sum(size - 1 - left for _, left in socks)
print("sent %d MB" % (sent >> 20), flush=True)
time.sleep(600)
EOF
python3 "$T/hold.py" 127.0.0.1 "$((BASE + 10 + FOL))" 200 >"$T/hold.out" 2>&1 &
HOLD=$!
sent_done() { grep -q "^sent" "$T/hold.out"; }
wait_for 30 sent_done || { bad "the slow clients did not finish sending: $(cat "$T/hold.out")"; exit 1; }
sleep 1
RSS1=$(rss_kb "$FPID")
GROWTH=$(((RSS1 - RSS0) / 1024))
echo "follower $FOL: VmRSS ${RSS0} kB -> ${RSS1} kB (+${GROWTH} MB) with 200 half-sent bodies ($(cat "$T/hold.out"))"
if [ "$GROWTH" -le 64 ]; then ok follower_rss_bounded; else bad "follower_rss_bounded: +${GROWTH} MB (bound 64 MB)"; fi

T1=$(date +%s%N)
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$(api "$FOL")/v1/status")
MS=$((($(date +%s%N) - T1) / 1000000))
W=no
for i in 1 2 3; do
	[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X PUT -H 'Content-Type: application/json' \
		--data '{"x":1}' "http://$(api "$i")/v1/config/after-slow")" = 200 ] && W=yes
done
if [ "$CODE" = 200 ] && [ "$W" = yes ]; then
	ok "follower_still_serves (/v1/status in ${MS} ms, write committed)"
else
	bad "follower_still_serves: /v1/status $CODE in ${MS} ms, write committed: $W"
fi
