#!/bin/sh
# metrics.sh BUILD: every daemon's /metrics is valid Prometheus text and
# counts what happened, exactly.
#
#   proxy_counts     one `iod proxy run` before one backend, fed known traffic:
#                    5 keep-alive requests, 3 with "Connection: close", 1
#                    malformed: requests_total 8, errors_total 1 (the 400),
#                    duration histogram _count 8 and +Inf bucket 8. Before the
#                    fix a closing request counted as an error and twice in
#                    the histogram.
#   promtool_proxy   `promtool check metrics` on that proxy's /metrics
#   promtool_server_N   on each server's /metrics of a running `iod up`
#   promtool_mesh    on the /metrics of the mesh proxy `iod up` starts
#   promtool_agent   on the node agent's telemetry /metrics (GPU, replica and
#                    DCGM-exporter series; --telemetry-port)
# Needs promtool (Debian package prometheus, installed by scripts/deps.sh).
set -u
. "$(dirname "$0")/lib.sh"
B=${1:-build}
IOD="$B/iod"
PROXY="$B/san/iod"
[ -x "$PROXY" ] || PROXY="$IOD"
[ -x "$IOD" ] || { echo "no $IOD"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
need curl python3 promtool

T=$(mktemp -d)
export IOD_STATE_DIR="$T/cluster"
UP=0
cleanup() {
	stop_bg
	[ $UP = 1 ] && "$IOD" down --grace 5s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
VIP="127.76.$(( 1 + ($$ / 5) % 250 )).1"
ADMIN="127.0.0.1:$((BASE + 9))"
# promcheck NAME URL [CURL OPTIONS]: promtool check metrics on what URL serves
promcheck() {
	n=$1 u=$2
	shift 2
	if ! curl -sf "$@" "$u" >"$T/m.txt"; then
		bad "$n" "GET $u failed"
	elif promtool check metrics <"$T/m.txt" >"$T/pt.txt" 2>&1; then
		ok "$n"
	else
		bad "$n" "$(head -5 "$T/pt.txt")"
	fi
}

# Ports: BASE+0..2 Raft and BASE+10..12 API of `iod up`, BASE+15 its mesh
# proxy; BASE+5 the backend, BASE+9 the first proxy's admin.
bg "$IOD" proxy backend --listen "127.0.0.1:$((BASE + 5))" --name b --size 64 >"$T/b.log" 2>&1
cat >"$T/mesh.json" <<JSON
{"node": "n1", "services": [
 {"name": "m", "vip": "$VIP", "port": 8000, "mode": "http", "endpoints": [{"addr": "127.0.0.1:$((BASE + 5))"}]}
]}
JSON
bg "$PROXY" proxy run --config "$T/mesh.json" --workers 1 --admin "$ADMIN" >"$T/proxy.log" 2>&1
i=0
until curl -sf "http://$ADMIN/healthz" >/dev/null 2>&1 && curl -sf "http://$VIP:8000/" >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "proxy did not start"; cat "$T/proxy.log"; exit 1; }
	sleep 0.1
done
sleep 0.2
base_n=$(curl -sf "http://$ADMIN/metrics" | sed -n 's/^iod_mesh_requests_total{service="m"} //p')

# Known traffic: 5 kept-alive requests on one connection, 3 that close, 1 malformed.
curl -s -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
	"http://$VIP:8000/a" "http://$VIP:8000/b" "http://$VIP:8000/c" "http://$VIP:8000/d" \
	"http://$VIP:8000/e"
for k in 1 2 3; do curl -s -o /dev/null -H 'Connection: close' "http://$VIP:8000/close$k"; done
python3 - "$VIP" <<'PY'
import socket, sys
c = socket.create_connection((sys.argv[1], 8000), timeout=5)
c.sendall(b"GET / HTTP/1.1\r\nHost: m\r\nX: a\x01b\r\n\r\n")
while c.recv(4096): pass
PY
sleep 0.3
curl -sf "http://$ADMIN/metrics" >"$T/proxy.prom"
python3 - "$T/proxy.prom" "${base_n:-0}" <<'PY' >"$T/counts.txt" 2>&1
import re, sys
text = open(sys.argv[1]).read()
def v(name, extra=""):
    m = re.search(r'^%s\{service="m"%s\} (\S+)$' % (re.escape(name), extra), text, re.M)
    return float(m.group(1)) if m else None
base = float(sys.argv[2])  # the readiness probe's requests
want = {"iod_mesh_requests_total": base + 8, "iod_mesh_errors_total": 1,
        "iod_mesh_request_duration_seconds_count": base + 8}
got = {k: v(k) for k in want}
got["+Inf"] = v("iod_mesh_request_duration_seconds_bucket", r',le="\+Inf"')
want["+Inf"] = base + 8
bad = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
print(bad if bad else "exact")
sys.exit(1 if bad else 0)
PY
if [ $? = 0 ]; then ok proxy_counts; else bad proxy_counts "got, want: $(cat "$T/counts.txt")"; fi
promcheck promtool_proxy "http://$ADMIN/metrics"

# A running `iod up`: each server's /metrics and the mesh proxy's.
if "$IOD" up --nodes 1 --gpus-per-node 2 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --mesh-port $((BASE + 15)) --telemetry-port $((BASE + 16)) \
	--election-timeout 1s --heartbeat 100ms >"$T/up.log" 2>&1; then
	UP=1
	# the servers of `iod up` speak HTTPS: the admin credential it made
	PKI="$IOD_STATE_DIR/pki"
	for s in 0 1 2; do
		promcheck "promtool_server_$((s + 1))" "https://127.0.0.1:$((BASE + 10 + s))/metrics" \
			--cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key"
	done
	i=0
	until curl -sf "http://127.0.0.1:$((BASE + 15))/healthz" >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -gt 100 ] && break
		sleep 0.1
	done
	promcheck promtool_mesh "http://127.0.0.1:$((BASE + 15))/metrics"
	# the agent's first sample comes within its 1 s interval
	i=0
	until curl -sf "http://127.0.0.1:$((BASE + 16))/metrics" 2>/dev/null | grep -q '^DCGM_FI_DEV_GPU_UTIL{'; do
		i=$((i + 1)); [ $i -gt 50 ] && break
		sleep 0.1
	done
	promcheck promtool_agent "http://127.0.0.1:$((BASE + 16))/metrics"
else
	bad iod_up "$(tail -5 "$T/up.log")"
fi
