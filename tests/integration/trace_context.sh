#!/bin/sh
# trace_context.sh BUILD: the proxy against the W3C Trace Context test
# harness's cases (level 2, STRICT_LEVEL 2).
#
# The public harness (w3c/trace-context, test/test.py) drives a service
# that calls back to it; here the "service" is the L7 proxy: a client sends
# each case's headers through `iod proxy run` to a Python backend that
# answers with the headers it received, and the harness's assertions are
# checked on those. The cases are written here after the harness's list
# (its 40 test methods, each with all of its sub-cases); one RESULT line
# counts them. Needs python3.
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
VIP="127.84.$(( 1 + (base / 100) % 250 )).1" # one per port block; not in the registry's 127.77/16
ADMIN="127.0.0.1:$((base + 9))"
BACK=$((base + 1))

# The backend: answers every request with its headers, one "name: value"
# line each, in the order received.
python3 - "$BACK" "$T/back.ready" >"$T/back.log" 2>&1 <<'PY' &
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
open(sys.argv[2], "w").close()
def serve(c):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                c.close(); return
            buf += d
        head, buf = buf.split(b"\r\n\r\n", 1)
        body = b"\n".join(head.split(b"\r\n")[1:]) + b"\n"
        c.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
bg_adopt $!

cat >"$T/mesh.json" <<JSON
{"node": "n1", "services": [
 {"name": "tc", "vip": "$VIP", "port": 8000, "mode": "http", "endpoints": [{"addr": "127.0.0.1:$BACK"}]}
]}
JSON
bg "$PROXY" proxy run --config "$T/mesh.json" --workers 1 --admin "$ADMIN" >"$T/proxy.log" 2>&1
PROXY_PID=$BG_PID
i=0
until curl -sf "http://$ADMIN/healthz" >/dev/null 2>&1 && [ -e "$T/back.ready" ]; do
	i=$((i + 1)); [ $i -gt 100 ] && { echo "proxy did not start"; cat "$T/proxy.log"; exit 1; }
	sleep 0.1
done

python3 - "$VIP" <<'PY'
import re, socket, sys
VIP = sys.argv[1]
TP_RE = re.compile(r'^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$')
ID = '12345678901234567890123456789012'
TP0 = '00-' + ID + '-1234567890123456-00'
TP1 = '00-' + ID + '-1234567890123456-01'

def call(headers):
    """Send one request with these headers through the proxy; the headers
    the backend received, as (name, value) pairs."""
    req = "GET /t HTTP/1.1\r\nHost: tc\r\n"
    for k, v in headers:
        req += k + ": " + v + "\r\n"
    c = socket.create_connection((VIP, 8000), timeout=5)
    c.sendall((req + "connection: close\r\n\r\n").encode())
    data = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        data += d
    c.close()
    head, body = data.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 200"):
        raise AssertionError("status: %r" % head[:40])
    out = []
    for line in body.decode().split("\n"):
        if ":" in line:
            k, v = line.split(":", 1)
            out.append((k, v.strip(" \t")))
    return out

def traceparent(hs):
    v = [b for a, b in hs if a.lower() == "traceparent"]
    if len(v) != 1:
        raise AssertionError("expected one traceparent, got %r" % v)
    m = TP_RE.match(v[0])
    if not m:
        raise AssertionError("bad traceparent %r" % v[0])
    return m.group(2), m.group(3)

def tracestate(hs):
    """All tracestate fields combined: (ordered text, dict)."""
    members = []
    for a, b in hs:
        if a.lower() != "tracestate":
            continue
        for mem in b.split(","):
            mem = mem.strip(" \t")
            if mem:
                members.append(mem)
    d = {}
    for mem in members:
        k, _, v = mem.partition("=")
        d[k] = v
    return ",".join(members), d

def ctx(headers):
    hs = call(headers)
    tid, pid = traceparent(hs)
    text, d = tracestate(hs)
    return tid, pid, text, d

cases = []
def case(f):
    cases.append(f)
    return f

def new_trace(tp_value, name="traceparent"):
    tid, _, _, _ = ctx([[name, tp_value]])
    assert tid != ID and tid != "0" * 32, "trace continued from %r" % tp_value

def same_trace(tp_value, name="traceparent"):
    tid, pid, _, _ = ctx([[name, tp_value]])
    assert tid == ID, "new trace for %r" % tp_value
    assert pid != "1234567890123456", "parent id not replaced"

@case
def both_traceparent_and_tracestate_missing():
    ctx([])
@case
def traceparent_included_tracestate_missing():
    same_trace(TP1)
@case
def traceparent_duplicated():
    tid, _, _, _ = ctx([["traceparent", "00-" + ID[:-1] + "1-1234567890123456-01"],
                        ["traceparent", TP1]])
    assert tid not in (ID, ID[:-1] + "1"), tid
@case
def traceparent_header_name():
    new_trace(TP1, "trace-parent"); new_trace(TP1, "trace.parent")
@case
def traceparent_header_name_valid_casing():
    for n in ("TraceParent", "TrAcEpArEnT", "TRACEPARENT"):
        same_trace(TP1, n)
@case
def traceparent_version_0x00():
    new_trace(TP1 + "."); new_trace(TP1 + "-what-the-future-will-be-like")
@case
def traceparent_version_0xcc():
    same_trace("cc" + TP1[2:]); same_trace("cc" + TP1[2:] + "-what-the-future-will-be-like")
    new_trace("cc" + TP1[2:] + ".what-the-future-will-be-like")
@case
def traceparent_version_0xff():
    new_trace("ff" + TP1[2:])
@case
def traceparent_version_illegal_characters():
    new_trace(".0" + TP1[2:]); new_trace("0." + TP1[2:])
@case
def traceparent_version_too_long():
    new_trace("000" + TP1[2:]); new_trace("0000" + TP1[2:])
@case
def traceparent_version_too_short():
    new_trace("0" + TP1[2:])
@case
def traceparent_trace_id_all_zero():
    tid, _, _, _ = ctx([["traceparent", "00-" + "0" * 32 + "-1234567890123456-01"]])
    assert tid != "0" * 32
@case
def traceparent_trace_id_illegal_characters():
    new_trace("00-." + ID[1:] + "-1234567890123456-01")
    new_trace("00-" + ID[:-1] + ".-1234567890123456-01")
@case
def traceparent_trace_id_too_long():
    new_trace("00-" + ID + "3-1234567890123456-01")
@case
def traceparent_trace_id_too_short():
    new_trace("00-" + ID[:-1] + "-1234567890123456-01")
@case
def traceparent_parent_id_all_zero():
    new_trace("00-" + ID + "-" + "0" * 16 + "-01")
@case
def traceparent_parent_id_illegal_characters():
    new_trace("00-" + ID + "-.234567890123456-01"); new_trace("00-" + ID + "-123456789012345.-01")
@case
def traceparent_parent_id_too_long():
    new_trace("00-" + ID + "-12345678901234567-01")
@case
def traceparent_parent_id_too_short():
    new_trace("00-" + ID + "-123456789012345-01")
@case
def traceparent_trace_flags_illegal_characters():
    new_trace(TP1[:-2] + ".0"); new_trace(TP1[:-2] + "0.")
@case
def traceparent_trace_flags_too_long():
    new_trace(TP1[:-2] + "001")
@case
def traceparent_trace_flags_too_short():
    new_trace(TP1[:-2] + "1")
@case
def traceparent_ows_handling():
    for v in (" " + TP1, "\t" + TP1, TP1 + " ", TP1 + "\t", "\t " + TP1 + " \t"):
        same_trace(v)
@case
def tracestate_included_traceparent_missing():
    _, _, t1, d1 = ctx([["tracestate", "foo=1"]])
    _, _, t2, d2 = ctx([["tracestate", "foo=1,bar=2"]])
    assert len(d1) == len(d2) == 0, (t1, t2)
@case
def tracestate_included_traceparent_included():
    tid, _, _, d = ctx([["traceparent", TP0], ["tracestate", "foo=1,bar=2"]])
    assert tid == ID and d.get("foo") == "1" and d.get("bar") == "2", d
@case
def tracestate_header_name():
    for n in ("trace-state", "trace.state"):
        _, _, _, d = ctx([["traceparent", TP0], [n, "foo=1"]])
        assert "foo" not in d
@case
def tracestate_header_name_valid_casing():
    for n in ("TraceState", "TrAcEsTaTe", "TRACESTATE"):
        _, _, _, d = ctx([["traceparent", TP0], [n, "foo=1"]])
        assert d.get("foo") == "1", (n, d)
@case
def tracestate_empty_header():
    tid, _, t, d = ctx([["traceparent", TP0], ["tracestate", ""]])
    assert tid == ID and t == "", t
    for hs in ([["tracestate", "foo=1"], ["tracestate", ""]],
               [["tracestate", ""], ["tracestate", "foo=1"]]):
        tid, _, _, d = ctx([["traceparent", TP0]] + hs)
        assert tid == ID and d.get("foo") == "1", d
@case
def tracestate_multiple_headers_different_keys():
    tid, _, t, _ = ctx([["traceparent", TP0], ["tracestate", "foo=1,bar=2"],
                        ["tracestate", "rojo=1,congo=2"], ["tracestate", "baz=3"]])
    want = ["foo=1", "bar=2", "rojo=1", "congo=2", "baz=3"]
    pos = [t.index(w) for w in want]
    assert tid == ID and pos == sorted(pos), t
@case
def tracestate_duplicated_keys():
    for hs in ([["tracestate", "foo=1,foo=1"]], [["tracestate", "foo=1,foo=2"]],
               [["tracestate", "foo=1"], ["tracestate", "foo=1"]],
               [["tracestate", "foo=1"], ["tracestate", "foo=2"]]):
        tid, _, _, d = ctx([["traceparent", TP0]] + hs)
        assert tid == ID and "foo" not in d, (hs, d)
@case
def tracestate_all_allowed_characters():
    key = "".join(map(chr, range(0x61, 0x7b))) + "0123456789_-*/"
    value = ("".join(map(chr, range(0x20, 0x2c))) + "".join(map(chr, range(0x2d, 0x3d))) +
             "".join(map(chr, range(0x3e, 0x7f))))
    for k in (key, key + "@a-z0-9_-*/"):
        _, _, _, d = ctx([["traceparent", TP0], ["tracestate", k + "=" + value]])
        assert d.get(k) == value, (k, d)
@case
def tracestate_ows_handling():
    for v in ("foo=1 \t , \t bar=2, \t baz=3", "foo=1\t \t,\t \tbar=2,\t \tbaz=3"):
        _, _, _, d = ctx([["traceparent", TP0], ["tracestate", v]])
        assert d == {"foo": "1", "bar": "2", "baz": "3"}, d
    for v in (" foo=1", "\tfoo=1", "foo=1 ", "foo=1\t", "\t foo=1 \t"):
        tid, _, _, d = ctx([["traceparent", TP0], ["tracestate", v]])
        assert tid == ID and d.get("foo") == "1", (v, d)
@case
def tracestate_key_illegal_characters():
    for v, k in (("foo =1", "foo "), ("FOO=1", "FOO"), ("foo.bar=1", "foo.bar")):
        _, _, _, d = ctx([["traceparent", TP0], ["tracestate", v]])
        assert k not in d, (v, d)
@case
def tracestate_key_illegal_vendor_format():
    for v in ("foo@=1,bar=2", "@foo=1,bar=2", "foo@@bar=1,bar=2", "foo@bar@baz=1,bar=2"):
        _, _, _, d = ctx([["traceparent", TP0], ["tracestate", v]])
        assert "bar" not in d, (v, d)
@case
def tracestate_member_count_limit():
    groups = [",".join("bar%02d=%02d" % (i, i) for i in range(a, b)) for a, b in
              ((1, 11), (11, 21), (21, 31))]
    hs = [["traceparent", TP0]] + [["tracestate", g] for g in groups]
    _, _, _, d = ctx(hs + [["tracestate", "bar31=31,bar32=32"]])
    assert d.get("bar01") == "01" and len(d) == 32, len(d)
    _, _, _, d = ctx(hs + [["tracestate", "bar31=31,bar32=32,bar33=33"]])
    assert "bar01" not in d, len(d)
@case
def tracestate_key_length_limit():
    for k, keep in (("z" * 256, True), ("z" * 257, False), ("t" * 241 + "@" + "v" * 14, True),
                    ("t" * 242 + "@v", False), ("t@" + "v" * 15, False)):
        _, _, _, d = ctx([["traceparent", TP0], ["tracestate", "foo=1"], ["tracestate", k + "=1"]])
        assert (d.get("foo") == "1") == keep, (len(k), d.get("foo"))
@case
def tracestate_value_illegal_characters():
    _, _, _, d = ctx([["traceparent", TP0], ["tracestate", "foo=bar=baz"]])
    assert "foo" not in d, d
    _, _, _, d = ctx([["traceparent", TP0], ["tracestate", "foo=,bar=3"]])
    assert "foo" not in d and "bar" not in d, d
def calls(headers, n):
    return [traceparent(call(headers)) for _ in range(n)]
@case
def multiple_requests_with_valid_traceparent():
    r = calls([["traceparent", TP1]], 3)
    assert set(t for t, _ in r) == {ID} and len(set(p for _, p in r)) == 3, r
@case
def multiple_requests_without_traceparent():
    r = calls([], 3)
    assert len(set(p for _, p in r)) == 3, r
@case
def multiple_requests_with_illegal_traceparent():
    r = calls([["traceparent", "00-" + "0" * 32 + "-1234567890123456-01"]], 3)
    assert "0" * 32 not in set(t for t, _ in r) and len(set(p for _, p in r)) == 3, r

p = f = 0
for c in cases:
    try:
        c()
        print("ok   " + c.__name__); p += 1
    except Exception as e:
        print("FAIL %s: %s" % (c.__name__, e)); f += 1
print("w3c trace-context cases: %d of %d pass" % (p, len(cases)))
print("RESULT %d %d 0" % (p, f))
PY
