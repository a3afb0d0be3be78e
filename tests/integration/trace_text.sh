#!/bin/sh
# trace_text.sh BUILD: `iod trace`'s text line shows each of a span's
# numbers: a canned /spans answer (python3 on a free loopback port, as the
# proxy's admin endpoint would give it) with bytes in 111, bytes out 2222
# and 3 attempts, one as an OTLP/JSON string and one as a JSON integer.
# Before, the numbers shared one buffer and the line read in=3B out=3B
# attempts=3. One RESULT line per check (lib.sh).
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
need python3
T=$(mktemp -d)
trap 'kill $SRV 2>/dev/null; rm -rf "$T"' EXIT INT TERM
cat >"$T/srv.py" <<'PY'
import http.server, json, sys
span = {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7",
        "startTimeUnixNano": "1796685130000000000", "endTimeUnixNano": "1796685130001500000",
        "attributes": [
            {"key": "iod.kind", "value": {"stringValue": "tcp"}},
            {"key": "iod.service", "value": {"stringValue": "web"}},
            {"key": "client.address", "value": {"stringValue": "10.200.1.2:40000"}},
            {"key": "server.address", "value": {"stringValue": "10.200.2.2:8080"}},
            {"key": "iod.errno", "value": {"intValue": "0"}},
            {"key": "iod.bytes_in", "value": {"intValue": "111"}},
            {"key": "iod.bytes_out", "value": {"intValue": 2222}},
            {"key": "iod.attempts", "value": {"intValue": "3"}}]}
class H(http.server.BaseHTTPRequestHandler):
    n = 0
    def do_GET(self):
        H.n += 1
        doc = {"spans": [span] if H.n == 1 else [], "read": 1 if H.n == 1 else 0,
               "cursor": "1", "overwritten": 0}
        b = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$T/srv.py" >"$T/port" &
SRV=$!
wait_for 10 test -s "$T/port" || { bad "the canned admin endpoint did not start"; exit 1; }
out=$("$IOD" trace --admin "127.0.0.1:$(cat "$T/port")" 2>&1)
case "$out" in
*" in=111B out=2222B attempts=3 "*) ok "iod trace: each number in its place ($out)" ;;
*) bad "iod trace: want in=111B out=2222B attempts=3 in: $out" ;;
esac
checks_ok
