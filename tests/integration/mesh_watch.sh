#!/bin/sh
# mesh_watch.sh BUILD: endpoint changes reach the proxy as pushes.
#
# A one-member `iod server`, a Service with two Endpoints (iod's backend),
# and `iod proxy run --server` (the sanitizer build when there is one). A
# client sends requests through the service's VIP without pause; the test
# marks one endpoint unhealthy in the store (PUT healthy=false) and measures
# the time from the store's answer to the first of 40 answers in a row that
# did not come from it, then marks it healthy again. Five rounds with the
# watch (the default) and five with --no-watch (the 200 ms poll it replaced).
# RESULT lines:
#   stop_watch   with the watch, the endpoint stops getting requests
#   stop_poll    the same when polling
#   rejoin_*     marked healthy again, it gets requests again
# and a BENCH line per mode (median and max over the rounds; the machine is
# shared, so only the order of magnitude is asserted: both modes under 3 s).
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
B=${1:-build}
IOD="$B/iod"
PROXY="$B/san/iod"
[ -x "$PROXY" ] || PROXY="$IOD"
[ -x "$IOD" ] || { echo "no $IOD"; exit 77; }
need curl python3

T=$(mktemp -d)
cleanup() {
	stop_bg
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

base=$(free_port_block $$) || { echo "no free block of ports"; exit 77; }
API="127.0.0.1:$((base + 1))"
ADMIN="127.0.0.1:$((base + 3))"
SVC="mw$$"

bg "$IOD" server --id 1 --data-dir "$T/d" --raft "127.0.0.1:$((base + 2))" --api "$API" \
	>"$T/server.log" 2>&1
for p in 1 2; do
	bg "$IOD" proxy backend --listen "127.0.0.1:$((base + 10 + p))" --name "b$p" --size 64 \
		>"$T/b$p.log" 2>&1
done
i=0
until curl -sf -XPUT "http://$API/v1/service/$SVC" \
	-d "{\"type\": \"stateless\", \"ports\": [{\"name\": \"http\", \"port\": $((base + 20))}]}" >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "server did not start"; cat "$T/server.log"; exit 1; }
	sleep 0.1
done
ep() { # p healthy
	curl -sf -XPUT "http://$API/v1/endpoint/$SVC-$1" \
		-d "{\"service\": \"$SVC\", \"address\": \"127.0.0.1:$((base + 10 + $1))\", \"node\": \"n1\", \"healthy\": $2}" >/dev/null
}
ep 1 true; ep 2 true


measure() { # mode [proxy args...]
	mode=$1; shift
	"$PROXY" proxy run --server "$API" --node n1 --workers 1 --admin "$ADMIN" "$@" \
		>"$T/proxy-$mode.log" 2>&1 &
	pp=$!
	i=0
	until curl -sf "http://$ADMIN/registry" 2>/dev/null | grep -q "\"$SVC\""; do
		i=$((i + 1)); [ $i -gt 100 ] && { echo "proxy did not start"; cat "$T/proxy-$mode.log"; break; }
		sleep 0.1
	done
	python3 - "$API" "$ADMIN" "$SVC" "$mode" "$base" >"$T/m-$mode.txt" 2>&1 <<'PY'
import http.client, json, sys, time, urllib.request
api, admin, svc, mode, base = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
reg = json.load(urllib.request.urlopen("http://%s/registry" % admin, timeout=5))
addr = [s["address"] for s in reg["services"] if s["name"] == svc][0]
host, port = addr.split(":")
conn = http.client.HTTPConnection(host, int(port), timeout=5)

def call():
    global conn
    try:
        conn.request("GET", "/w")
        r = conn.getresponse()
        r.read()
        return r.getheader("x-backend") or "?"
    except Exception:
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        return "error"

def put(healthy):
    body = json.dumps({"service": svc, "address": "127.0.0.1:%d" % (base + 11),
                       "node": "n1", "healthy": healthy}).encode()
    req = urllib.request.Request("http://%s/v1/endpoint/%s-1" % (api, svc), data=body, method="PUT")
    urllib.request.urlopen(req, timeout=5).read()

def until(pred, limit_s):
    t_end = time.monotonic() + limit_s
    while time.monotonic() < t_end:
        if pred():
            return True
    return False

out, rejoined = [], True
for rnd in range(5):
    # both endpoints serve before each round
    seen = set()
    if not until(lambda: seen.add(call()) or "b1" in seen, 5):
        rejoined = False
    put(False)
    t0 = time.monotonic()
    run_start, run, t_stop = None, 0, None
    while time.monotonic() - t0 < 5:
        t = time.monotonic()
        b = call()
        if b == "b1" or b == "error":
            run = 0
            continue
        if run == 0:
            run_start = t
        run += 1
        if run >= 40:
            t_stop = run_start
            break
    out.append(None if t_stop is None else (t_stop - t0) * 1000)
    put(True)
print("ROUNDS", " ".join("-" if x is None else "%.1f" % x for x in out))
print("REJOINED", int(rejoined))
PY
	kill "$pp"; wait "$pp"
	cat "$T/m-$mode.txt"
	rounds=$(sed -n 's/^ROUNDS //p' "$T/m-$mode.txt")
	python3 - "$mode" "$rounds" <<'PY'
import sys
mode, rounds = sys.argv[1], sys.argv[2].split()
ms = sorted(float(x) for x in rounds if x != "-")
if ms:
    print("BENCH mesh.unhealthy_stop_ms mode=%s rounds=%d stopped=%d median=%.1f max=%.1f "
          "(store PUT answered -> 40 answers in a row from the other endpoint; shared machine)"
          % (mode, len(rounds), len(ms), ms[len(ms) // 2], ms[-1]))
PY
	n_ok=$(echo "$rounds" | tr ' ' '\n' | grep -c '^[0-9]')
	slow=$(echo "$rounds" | tr ' ' '\n' | awk '$1 != "-" && $1 > 3000' | wc -l)
	if [ "$n_ok" -eq 5 ] && [ "$slow" -eq 0 ]; then ok "stop_$mode"; else bad "stop_$mode" "rounds: $rounds"; fi
	grep -q '^REJOINED 1' "$T/m-$mode.txt" && ok "rejoin_$mode" || bad "rejoin_$mode" "b1 did not serve again"
	if grep -q "ERROR: AddressSanitizer\|runtime error" "$T/proxy-$mode.log"; then
		bad "clean_$mode" "sanitizer report"; tail -20 "$T/proxy-$mode.log"
	fi
}
measure watch
measure poll --no-watch
