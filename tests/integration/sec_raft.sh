#!/bin/sh
# sec_raft.sh BUILD: Raft between servers is mutual TLS (issue 16, item 3).
# Three `iod server --pki` members of cluster "raftsec" on loopback:
#   1. tls_cluster_replicates: they elect a leader and a write reaches every
#      member; each log says its peers connected over mutual TLS;
#   2. foreign_ca_refused: a server certificate of another CA (same cluster
#      name, same id as a member) is refused by the Raft port, and a real
#      `iod server` started with that CA cannot vote in the cluster: the
#      members' term and membership do not move;
#   3. client_cert_refused: the admin's certificate (this CA, but a user)
#      and a node's certificate are refused;
#   4. wrong_id_refused: server 3's certificate with a handshake naming
#      server 2 is refused;
#   5. plaintext_dropped: an iod Raft handshake in plaintext is dropped
#      (the connection is closed and the server logs why);
#   6. plaintext_nonloopback_refused: --raft-plaintext (and --insecure) on
#      a non-loopback --raft refuse to start, naming the flag.
# Each refusal is a log line "refused a connection from ...: <why>".
# Prints one RESULT line per check.
# iod-test: parallel
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed (TLS probes, JSON)"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl needed"; exit 77; }

T=$(mktemp -d)
T0=$(date +%s)
. "$(dirname "$0")/lib.sh"
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

ok() { echo "ok   $1 (t=$(($(date +%s) - T0))s)"; echo "RESULT 1 0 0"; }
bad() {
	echo "FAIL $1"
	echo "RESULT 0 1 0"
	for f in "$T"/s*.log; do echo "--- $f"; tail -12 "$f"; done
}
raft() { echo "127.0.0.1:$((BASE + $1))"; }
api() { echo "127.0.0.1:$((BASE + 10 + $1))"; }
PEERS="1=$(raft 1)@$(api 1),2=$(raft 2)@$(api 2),3=$(raft 3)@$(api 3)"
P="$T/pki"
"$IOD" init --cluster raftsec --pki "$P" --no-config --server "$(api 1)" >/dev/null ||
	{ bad "iod init"; exit 1; }
start() { # id pki [more args]
	id=$1; pki=$2; shift 2
	"$IOD" server --id "$id" --data-dir "$T/d$id" --raft "$(raft "$id")" --api "$(api "$id")" \
		--pki "$pki" --election-timeout 300ms --heartbeat 30ms "$@" >"$T/s$id.log" 2>&1 &
	PIDS="$PIDS $!"
}
for i in 1 2 3; do start $i "$P" --peers "$PEERS"; done

adm() { curl -s --max-time 5 --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "$@"; }
field() { # server field: from /v1/status
	adm "https://$(api "$1")/v1/status" 2>/dev/null | python3 -c "
import json, sys
try: print(json.load(sys.stdin).get('$2', ''))
except Exception: print('')"
}
leader() { for i in 1 2 3; do [ "$(field $i state)" = leader ] && { echo $i; return 0; }; done; return 1; }
has_leader() { leader >/dev/null; }
applied_all() { for i in 1 2 3; do [ "$(field $i applied_index)" -ge "$1" ] 2>/dev/null || return 1; done; }
refused() { grep -q "refused a connection from 127.0.0.1:[0-9]*: $2" "$T/s$1.log"; }

# 1. a TLS cluster elects and replicates
if wait_for 30 has_leader; then
	L=$(leader)
	code=$(adm -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
		-d '{"v": 1}' "https://$(api "$L")/v1/configs/raft-tls")
	ci=$(field "$L" commit_index)
	if [ "$code" = 200 ] && wait_for 10 applied_all "$ci" &&
		grep -q "connected (mutual TLS" "$T/s1.log" && ! grep -q "refused" "$T/s1.log"; then
		ok "tls_cluster_replicates (leader $L, commit $ci on all three)"
	else
		bad "tls_cluster_replicates: write $code, commit $ci, applied $(field 1 applied_index) $(field 2 applied_index) $(field 3 applied_index)"
	fi
else
	bad "tls_cluster_replicates: no leader"; exit 1
fi
TERM0=$(field "$L" term)

# TLS probes: connect to server 1's Raft port with CERT/KEY, send an iod
# Raft handshake naming ID, and say whether the server kept the connection.
probe() { # cert key id
	python3 - "$(raft 1)" "$1" "$2" "$3" <<'EOF'
import socket, ssl, struct, sys, time
addr, cert, key, sid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
host, port = addr.rsplit(":", 1)
me = b"127.0.0.1:1"
hello = struct.pack("<IIQH", 0x31485249, 1, sid, len(me)) + me
s = socket.create_connection((host, int(port)), timeout=5)
try:
    if cert != "-":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(cert, key)
        s = ctx.wrap_socket(s)
    s.sendall(hello)
    s.settimeout(3)
    data = s.recv(1)  # a server that refuses closes; one that accepts waits
    print("closed" if not data else "data")
except socket.timeout:
    print("kept")
except (ssl.SSLError, ConnectionError, OSError) as e:
    print("closed")
EOF
}

# 2. another CA: same cluster name, same id as a member
E="$T/evil"
"$IOD" init --cluster raftsec --pki "$E" --no-config >/dev/null &&
	"$IOD" cert create server 2 --pki "$E" --out "$T/evil2" >/dev/null 2>&1
r=$(probe "$T/evil2.crt" "$T/evil2.key" 2)
# a real server of the other CA claiming id 2 with server 1 as its peer
"$IOD" server --id 2 --data-dir "$T/d9" --raft "$(raft 9)" --api "$(api 9)" --pki "$E" \
	--election-timeout 300ms --heartbeat 30ms --peers "1=$(raft 1)@$(api 1),2=$(raft 9)@$(api 9)" \
	>"$T/s9.log" 2>&1 &
EVIL=$!
PIDS="$PIDS $EVIL"
sleep 3
kill $EVIL 2>/dev/null
members=$(adm "https://$(api "$L")/v1/members" | python3 -c '
import json, sys
d = json.load(sys.stdin)
m = d.get("members", d.get("items", d)) if isinstance(d, dict) else d
print(",".join(sorted(str(x.get("id")) for x in m)))' 2>/dev/null)
if [ "$r" = closed ] && refused 1 "the certificate is not signed by the raftsec cluster CA" &&
	grep -q "server 1 ($(raft 1)): refused: the certificate is not signed" "$T/s9.log" &&
	! grep -q "leader is now" "$T/s9.log" &&
	[ "$(field "$L" term)" = "$TERM0" ] && [ "$(leader)" = "$L" ] && [ "$members" = "1,2,3" ]; then
	ok "foreign_ca_refused (term stays $TERM0, members $members)"
else
	bad "foreign_ca_refused: probe $r, term $TERM0 -> $(field "$L" term), members $members"
	grep refused "$T/s1.log" | tail -3
fi

# 3. this CA, but not a server: a user's and a node's certificate
"$IOD" cert create node n1 --pki "$P" --out "$T/node" >/dev/null 2>&1
r1=$(probe "$P/admin.crt" "$P/admin.key" 2)
r2=$(probe "$T/node.crt" "$T/node.key" 2)
if [ "$r1" = closed ] && [ "$r2" = closed ] &&
	refused 1 'it presented the certificate of user "admin".*not of a server of the cluster' &&
	refused 1 'it presented the certificate of node "n1".*not of a server of the cluster'; then
	ok "client_cert_refused"
else
	bad "client_cert_refused: user $r1, node $r2"
	grep refused "$T/s1.log" | tail -3
fi

# 4. a server's certificate, another server's id
"$IOD" cert create server 3 --pki "$P" --out "$T/srv3" >/dev/null 2>&1
r=$(probe "$T/srv3.crt" "$T/srv3.key" 2)
if [ "$r" = closed ] && refused 1 "its handshake says server 2 but its certificate is server 3's"; then
	ok "wrong_id_refused"
else
	bad "wrong_id_refused: $r"
fi

# 5. plaintext
r=$(probe - - 2)
if [ "$r" = closed ] && refused 1 "TLS handshake"; then
	ok "plaintext_dropped"
else
	bad "plaintext_dropped: $r"
	grep refused "$T/s1.log" | tail -3
fi
if [ "$(leader)" != "$L" ] || [ "$(field "$L" term)" != "$TERM0" ]; then
	bad "the probes moved the cluster: leader $(leader), term $(field "$L" term)"
fi

# 6. plaintext Raft on a non-loopback address does not start
out1=$("$IOD" server --id 7 --data-dir "$T/d7" --raft 0.0.0.0:$((BASE + 7)) --api "$(api 7)" \
	--pki "$P" --raft-plaintext 2>&1)
rc1=$?
out2=$("$IOD" server --id 8 --data-dir "$T/d8" --raft 0.0.0.0:$((BASE + 8)) --api "$(api 8)" \
	--insecure 2>&1)
rc2=$?
if [ $rc1 -ne 0 ] && [ $rc2 -ne 0 ] &&
	echo "$out1" | grep -q -- "--raft 0.0.0.0:$((BASE + 7)) is not a loopback address" &&
	echo "$out2" | grep -q -- "--raft 0.0.0.0:$((BASE + 8)) is not a loopback address"; then
	ok "plaintext_nonloopback_refused"
else
	bad "plaintext_nonloopback_refused: rc $rc1 $rc2: $out1 / $out2"
fi
