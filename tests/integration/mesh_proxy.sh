#!/bin/sh
# mesh_proxy.sh BUILD: the mesh proxy on loopback, end to end (no root needed).
#
# Two HTTP services, "frontend" (2 replicas, each calling "param-server"
# through the mesh) and "param-server" (3 replicas), plus a TCP service, all
# served by one `iod proxy run` (the sanitizer build). Checks, one RESULT
# line each:
#   by_name      a client reaches services by their VIP from `iod proxy env`
#   tcp          the L4 (splice) path carries a request and its answer
#   kill         a replica killed under load: no failed client request
#                (retries cover the gap), it gets ejected, traffic rebalances
#   rejoin       the restarted replica takes traffic again after ejection
#   trace        one call frontend -> param-server: both spans share one trace
#                id and the inner span's parent is the outer span (`iod trace`)
#   trace_filters  `iod trace --since/--status` keep only matching calls
#   trace_retained past the span rings' size, `iod trace` says "N of M spans
#                retained" instead of pretending it saw every call
#   metrics      /metrics is Prometheus text with the expected families
#   dns          <service>.iod resolves to the VIP (skipped without python3)
# iod-test: parallel
set -u
B=${1:-build}
IOD="$B/iod"
PROXY="$B/san/iod"
[ -x "$PROXY" ] || PROXY="$IOD"
[ -x "$IOD" ] || { echo "no $IOD"; exit 77; }
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

T=$(mktemp -d)
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

# Ports and VIPs unique to this run so parallel runs do not meet: a block
# of 100 ports in which nothing listens or connects right now.
seed=$$
. "$(dirname "$0")/lib.sh"
base=$(free_port_block "$seed") || { echo "no free block of ports"; exit 77; }
oct=$(( 1 + (base / 100) % 250 )) # one per port block: no two scripts share it
VIP_FE="127.78.$oct.1"; VIP_PS="127.78.$oct.2"; VIP_KV="127.78.$oct.3"
ADMIN="127.0.0.1:$((base + 90))"; DNS="127.0.0.1:$((base + 91))"
PS1P=$((base + 1)); PS2P=$((base + 2)); PS3P=$((base + 3)); FE1P=$((base + 11)); FE2P=$((base + 12))

start() { # name port [extra...]
	n=$1 p=$2; shift 2
	"$IOD" proxy backend --listen "127.0.0.1:$p" --name "$n" --size 256 "$@" >"$T/$n.log" 2>&1 &
	eval "PID_$n=$!"
	PIDS="$PIDS $!"
}

start ps1 $PS1P; start ps2 $PS2P; start ps3 $PS3P
start fe1 $FE1P --call "http://$VIP_PS:8000/step"; start fe2 $FE2P --call "http://$VIP_PS:8000/step"

cat >"$T/mesh.json" <<JSON
{"node": "n1", "rack": "r1", "services": [
 {"name": "frontend", "vip": "$VIP_FE", "port": 8000, "mode": "http", "lb": "round_robin",
  "endpoints": [{"addr": "127.0.0.1:$FE1P", "node": "n1"}, {"addr": "127.0.0.1:$FE2P", "node": "n1"}]},
 {"name": "param-server", "vip": "$VIP_PS", "port": 8000, "mode": "http", "lb": "least_request",
  "outlier": {"consecutive_5xx": 3, "base_ejection_time": "1s", "max_ejection_percent": "50%"},
  "retry": {"max_per_request": 2, "backoff_base": "2ms", "backoff_max": "20ms"},
  "endpoints": [{"addr": "127.0.0.1:$PS1P"}, {"addr": "127.0.0.1:$PS2P"}, {"addr": "127.0.0.1:$PS3P"}]},
 {"name": "kv", "vip": "$VIP_KV", "port": 8001, "mode": "tcp",
  "endpoints": [{"addr": "127.0.0.1:$PS1P"}]}
]}
JSON

"$PROXY" proxy run --config "$T/mesh.json" --workers 2 --admin "$ADMIN" --dns "$DNS" \
	>"$T/proxy.log" 2>&1 &
PROXY_PID=$!
PIDS="$PIDS $PROXY_PID"
i=0
until curl -sf "http://$ADMIN/healthz" >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "proxy did not start"; cat "$T/proxy.log"; exit 1; }
	sleep 0.1
done

pass=0 fail=0 skip=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip $1: $2"; skip=$((skip + 1)); }

# by_name: the address comes from the discovery env var, not from a port we know.
ADDR=$("$IOD" proxy env --config "$T/mesh.json" | sed -n 's/^IOD_SVC_PARAM_SERVER_ADDR=//p')
code=$(curl -s -o "$T/body" -w '%{http_code}' "http://$ADDR/hello")
if [ "$ADDR" = "$VIP_PS:8000" ] && [ "$code" = 200 ] && grep -q '^ps' "$T/body"; then
	ok by_name
else
	bad by_name "addr=$ADDR code=$code"
fi

# tcp: a whole HTTP exchange through the L4 splice path.
code=$(curl -s -o "$T/tcpbody" -w '%{http_code}' "http://$VIP_KV:8001/")
if [ "$code" = 200 ] && [ "$(wc -c <"$T/tcpbody")" -eq 256 ]; then ok tcp; else bad tcp "code=$code"; fi

# kill: a client loop of sequential requests; kill ps2 in the middle.
load() { # n out
	n=$1; : >"$2"
	j=0
	while [ $j -lt "$n" ]; do
		curl -s -o /dev/null -w '%{http_code}\n' "http://$VIP_PS:8000/k" >>"$2"
		j=$((j + 1))
	done
}
load 60 "$T/before"
load 300 "$T/during" &
LOADER=$!
sleep 0.3
kill "$PID_ps2"; wait "$PID_ps2" 2>/dev/null
wait $LOADER
failed=$(grep -cv '^200$' "$T/during")
metrics() { curl -s "http://$ADMIN/metrics"; }
ejections=$(metrics | sed -n "s/^iod_mesh_endpoint_ejections_total{service=\"param-server\",endpoint=\"127.0.0.1:$PS2P\".*} //p")
retries=$(metrics | sed -n 's/^iod_mesh_retries_total{service="param-server"} //p')
# Rebalance: after the kill, the other two replicas carry everything.
r1=$(metrics | sed -n "s/^iod_mesh_endpoint_requests_total{service=\"param-server\",endpoint=\"127.0.0.1:$PS1P\".*} //p")
r3=$(metrics | sed -n "s/^iod_mesh_endpoint_requests_total{service=\"param-server\",endpoint=\"127.0.0.1:$PS3P\".*} //p")
if [ "$failed" -eq 0 ] && [ "${ejections:-0}" -ge 1 ] && [ "${r1:-0}" -gt 100 ] && [ "${r3:-0}" -gt 100 ]; then
	ok kill
else
	bad kill "failed=$failed ejections=$ejections retries=$retries ps1=$r1 ps3=$r3"
	grep -v '^200$' "$T/during" | sort | uniq -c
fi

# rejoin: restart ps2; after its ejection ends it serves again.
start ps2 $PS2P
before=$(metrics | sed -n "s/^iod_mesh_endpoint_requests_total{service=\"param-server\",endpoint=\"127.0.0.1:$PS2P\".*} //p")
i=0; after=$before
while [ $i -lt 40 ] && [ "${after:-0}" -le "${before:-0}" ]; do
	load 10 "$T/rejoin"
	after=$(metrics | sed -n "s/^iod_mesh_endpoint_requests_total{service=\"param-server\",endpoint=\"127.0.0.1:$PS2P\".*} //p")
	i=$((i + 1)); sleep 0.2
done
if [ "${after:-0}" -gt "${before:-0}" ] && ! grep -qv '^200$' "$T/rejoin"; then
	ok rejoin
else
	bad rejoin "ps2 requests before=$before after=$after"
fi

# trace: one call to frontend, which calls param-server; one trace id.
TP="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
curl -s -o /dev/null -H "traceparent: $TP" "http://$VIP_FE:8000/train"
sleep 0.2
"$IOD" trace -s frontend -o json --admin "$ADMIN" | grep 4bf92f3577b34da6a3ce929d0e0e4736 >"$T/fe.json"
"$IOD" trace -s param-server -o json --admin "$ADMIN" | grep 4bf92f3577b34da6a3ce929d0e0e4736 >"$T/ps.json"
fe_span=$(sed -n 's/.*"spanId":"\([0-9a-f]*\)".*/\1/p' "$T/fe.json" | head -1)
fe_parent=$(sed -n 's/.*"parentSpanId":"\([0-9a-f]*\)".*/\1/p' "$T/fe.json" | head -1)
ps_parent=$(sed -n 's/.*"parentSpanId":"\([0-9a-f]*\)".*/\1/p' "$T/ps.json" | head -1)
"$IOD" trace -s frontend --admin "$ADMIN" >"$T/fe.txt"
if [ -n "$fe_span" ] && [ "$fe_parent" = "00f067aa0ba902b7" ] && [ "$ps_parent" = "$fe_span" ] &&
	grep -q "trace=4bf92f3577b34da6a3ce929d0e0e4736" "$T/fe.txt"; then
	ok trace
else
	bad trace "fe_span=$fe_span fe_parent=$fe_parent ps_parent=$ps_parent"
fi
# ... and a trace the proxy starts itself (no traceparent from the client).
curl -s -o /dev/null "http://$VIP_FE:8000/fresh"
sleep 0.2
"$IOD" trace -s frontend -o json --admin "$ADMIN" | grep '"url.path"' | grep '/fresh' >"$T/fresh.json"
tid=$(sed -n 's/.*"traceId":"\([0-9a-f]*\)".*/\1/p' "$T/fresh.json" | head -1)
if [ ${#tid} -eq 32 ] && "$IOD" trace -s param-server -o json --admin "$ADMIN" | grep -q "$tid"; then
	ok trace_created
else
	bad trace_created "trace id '$tid' not continued to param-server"
fi

# trace filters: --since keeps only recent calls, --status by outcome.
sleep 1.5
curl -s -o /dev/null "http://$VIP_FE:8000/since-probe"
sleep 0.2
"$IOD" trace -s frontend --since 1s --admin "$ADMIN" >"$T/since.txt"
"$IOD" trace -s frontend --status 2xx --admin "$ADMIN" >"$T/s2xx.txt"
"$IOD" trace -s frontend --status 4xx --admin "$ADMIN" >"$T/s4xx.txt"
"$IOD" trace -s frontend --admin "$ADMIN" >"$T/all.txt"
bad_status=$("$IOD" trace --status 6xx --admin "$ADMIN" 2>&1); bad_rc=$?
if grep -q '/since-probe' "$T/since.txt" && ! grep -q '/train' "$T/since.txt" &&
	[ "$(wc -l <"$T/s2xx.txt")" -gt 0 ] && [ ! -s "$T/s4xx.txt" ] &&
	[ "$(wc -l <"$T/s2xx.txt")" -le "$(wc -l <"$T/all.txt")" ] &&
	[ "$bad_rc" = 2 ] && echo "$bad_status" | grep -q 'want 2xx'; then
	ok trace_filters
else
	bad trace_filters "since: $(wc -l <"$T/since.txt") lines, 2xx $(wc -l <"$T/s2xx.txt"), 4xx $(wc -l <"$T/s4xx.txt"), rc $bad_rc"
fi
# the rings (IOD_MESH_SPANS_MAX per worker) overflow: "N of M spans retained"
if command -v wrk >/dev/null; then
	wrk -t1 -c8 -d3s "http://$VIP_FE:8000/flood" >"$T/wrk.txt" 2>&1
	"$IOD" trace --admin "$ADMIN" >/dev/null 2>"$T/retained.txt"
	n=$(sed -n 's/.* \([0-9][0-9]*\) of \([0-9][0-9]*\) spans retained.*/\1/p' "$T/retained.txt")
	m=$(sed -n 's/.* \([0-9][0-9]*\) of \([0-9][0-9]*\) spans retained.*/\2/p' "$T/retained.txt")
	if [ -n "$n" ] && [ -n "$m" ] && [ "$n" -lt "$m" ] && [ "$n" -le $((2 * 4096)) ]; then
		ok "trace_retained ($n of $m)"
	else
		bad trace_retained "stderr: $(cat "$T/retained.txt"); $(grep Requests/sec "$T/wrk.txt")"
	fi
else
	skip=$((skip + 1)); echo "skip trace_retained: wrk missing"
fi

# metrics: Prometheus families and a histogram with +Inf.
metrics >"$T/metrics.txt"
if grep -q '^# TYPE iod_mesh_request_duration_seconds histogram' "$T/metrics.txt" &&
	grep -q 'iod_mesh_request_duration_seconds_bucket{service="param-server",le="+Inf"}' "$T/metrics.txt" &&
	grep -q '^iod_mesh_breaker_trips_total{service="frontend",resource="connections"} 0' "$T/metrics.txt" &&
	grep -q '^# TYPE iod_mesh_endpoint_ejections_total counter' "$T/metrics.txt"; then
	ok metrics
else
	bad metrics "missing families"
fi

# dns: <service>.iod A -> VIP.
if command -v python3 >/dev/null; then
	got=$(python3 - "$DNS" <<'PY'
import socket, struct, sys
host, port = sys.argv[1].split(":")
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
for l in ("param-server", "iod"):
    q += bytes([len(l)]) + l.encode()
q += b"\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.sendto(q, (host, int(port))); r = s.recv(512)
print(socket.inet_ntoa(r[-4:]) if struct.unpack(">H", r[6:8])[0] == 1 else "none")
PY
)
	[ "$got" = "$VIP_PS" ] && ok dns || bad dns "got $got want $VIP_PS"
else
	skp dns "python3 missing"
fi

# The sanitizer build must shut down cleanly (leaks, races into freed memory).
kill "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
if [ $rc -ne 0 ] || grep -q "ERROR: AddressSanitizer\|runtime error" "$T/proxy.log"; then
	bad clean_exit "proxy exit $rc"; tail -30 "$T/proxy.log"
else
	ok clean_exit
fi
echo "RESULT $pass $fail $skip"
