#!/bin/sh
# sec_up.sh BUILD: a fresh `iod up` is secure by default (issue 16's
# findings, each a regression test), and the README's tour works unchanged
# because the CLI finds its credentials in the client config `iod up` wrote.
#   1. tour_works: iod deploy / get / status / audit with no flags;
#   2. keys_private: the CA, admin and node keys and the client config are 0600;
#   3. nobody_is_refused: an unprivileged user's curl to /v1/deploy, a raw
#      PUT of a Service and a Replica, and DELETE /v1/members/3 get 401 over
#      HTTPS and no answer in plaintext; it cannot read the admin key;
#   4. viewer_is_forbidden: a viewer token gets 403 naming the identity for
#      the same requests, 200 for a read;
#   5. replica_curl_gets_401: a replica's own curl to the API gets 401 (HTTPS
#      without credentials) and nothing in plaintext, and it sees no key of
#      the cluster, no token and no client config; the one credential it
#      holds is its own service identity ($IOD_CERT, docs/storage.md
#      "Replica credentials"), with which a deploy gets 403;
#   6. refusals_audited: `iod audit --denied` shows the refusals with who.
# Before this test (iod up without a PKI), 3 and 5 got 200 and ran the
# deploy. Prints one RESULT line per check.
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
need python3 curl

T=$(mktemp -d)
chmod 755 "$T"
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
unset IOD_SERVER IOD_TOKEN IOD_CA IOD_CERT IOD_KEY IOD_CONFIG IOD_CONTEXT
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
API="127.0.0.1:$((BASE + 10))"
PKI="$IOD_STATE_DIR/pki"
cleanup() {
	stop_cluster
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

on_bad() {
	for f in "$IOD_STATE_DIR"/*.log; do echo "--- $f"; tail -8 "$f"; done
}
# code [curl args...] PATH: the HTTP status of one request ("000" when none),
# asked of each server until one is not "not the leader / not applied yet" (503)
code() {
	for port in $((BASE + 10)) $((BASE + 11)) $((BASE + 12)); do
		c=$(curl -s -o "$T/body" -w '%{http_code}' --max-time 5 "$@" "https://127.0.0.1:$port$P")
		[ "$c" != 503 ] && break
	done
	echo "$c"
}
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

start_cluster "$T/up.log" --nodes 1 --gpus-per-node 0 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --mesh-port $((BASE + 15)) --election-timeout 1s \
	--heartbeat 100ms || exit 1

# 1. the tour, unchanged: no --server, no credentials on the command line
cat >"$T/probe.yaml" <<EOF
services:
  - name: probe
    type: stateless
    command: [sh, -c, 'echo "deploy=\$(curl -sk -o /dev/null -w "%{http_code}" -X POST -d x https://$API/v1/deploy)"; echo "plain=\$(curl -s -o /dev/null -w "%{http_code}" http://$API/v1/nodes)"; for f in $PKI/ca.key $PKI/admin.key $IOD_STATE_DIR/config; do cat \$f >/dev/null 2>&1 && echo "read=\$f"; done; echo "env=\$(env | grep -c -e IOD_TOKEN -e IOD_CONFIG)"; echo "own=\$(curl -sk -o /dev/null -w "%{http_code}" --cert \$IOD_CERT --key \$IOD_KEY -X POST -d x https://$API/v1/deploy)"; echo probe-done; sleep 600']
EOF
if "$IOD" deploy -f "$T/probe.yaml" >"$T/tour.log" 2>&1 && "$IOD" get replicas >>"$T/tour.log" 2>&1 &&
	"$IOD" get nodes -o json >>"$T/tour.log" 2>&1 && "$IOD" status >>"$T/tour.log" 2>&1 &&
	"$IOD" audit >>"$T/tour.log" 2>&1; then
	ok "tour_works"
else
	bad "tour_works"; cat "$T/tour.log"
fi

# 2. keys and the config are the owner's only
modes=$(stat -c '%a %n' "$PKI/ca.key" "$PKI/admin.key" "$PKI/node-1.key" "$PKI/secrets.key" \
	"$IOD_STATE_DIR/config")
if [ "$(echo "$modes" | grep -vc '^600 ')" = 0 ] && [ "$(stat -c %a "$PKI")" = 700 ]; then
	ok "keys_private"
else
	bad "keys_private"; echo "$modes"; stat -c '%a %n' "$PKI"
fi

# 3. an unprivileged user of this machine
svc='{"type":"stateless","command":"sh","args":["-c","id>/tmp/owned"]}'
rep='{"service":"evil","node":"node-1"}'
nb=""
for req in "-X POST -H Content-Type:application/yaml --data-binary @$T/probe.yaml https://$API/v1/deploy" \
	"-X PUT -d $svc https://$API/v1/services/evil" "-X PUT -d $rep https://$API/v1/replicas/evil-0" \
	"-X DELETE https://$API/v1/members/3"; do
	# shellcheck disable=SC2086
	nb="$nb $(as_nobody curl -sk -o /dev/null -w '%{http_code}' --max-time 5 $req)"
done
# shellcheck disable=SC2086
plain=$(as_nobody curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -d x "http://$API/v1/deploy")
as_nobody cat "$PKI/admin.key" >/dev/null 2>&1 && plain="$plain key-readable"
if [ "$nb" = " 401 401 401 401" ] && [ "$plain" = 000 ] && [ -z "$("$IOD" get services -o json | grep evil)" ]; then
	ok "nobody_is_refused (HTTPS:$nb, plaintext: $plain)"
else
	bad "nobody_is_refused (HTTPS:$nb, plaintext: $plain)"
fi

# 4. a viewer token: known, but not allowed to write
tok=$("$IOD" token create --role viewer --user vera --ttl 1h -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
H="Authorization: Bearer $tok"
v1=$(P=/v1/deploy code -k -H "$H" -X POST --data-binary @"$T/probe.yaml")
grep -q 'forbidden: user \\"vera\\" (viewer' "$T/body" || v1="$v1(no identity named: $(cat "$T/body"))"
v2=$(P=/v1/members/3 code -k -H "$H" -X DELETE)
v3=$(P=/v1/services/evil code -k -H "$H" -X PUT -d "$svc")
v4=$(P=/v1/nodes code -k -H "$H")
if [ "$v1 $v2 $v3 $v4" = "403 403 403 200" ]; then
	ok "viewer_is_forbidden"
else
	bad "viewer_is_forbidden ($v1 $v2 $v3 $v4)"
fi

# 5. the replica's own view
LOG=$(ls "$IOD_STATE_DIR"/node-1/replicas/probe-0*/log 2>/dev/null | head -1)
probe_done() { [ -n "$LOG" ] && grep -q probe-done "$LOG" 2>/dev/null || { LOG=$(ls "$IOD_STATE_DIR"/node-1/replicas/probe-0*/log 2>/dev/null | head -1); false; }; }
wait_for 20 probe_done
got=$(grep -e '^deploy=' -e '^plain=' -e '^read=' -e '^env=' -e '^own=' "$LOG" 2>/dev/null | tr '\n' ' ')
if [ "$got" = "deploy=401 plain=000 env=0 own=403 " ]; then
	ok "replica_curl_gets_401 ($got)"
else
	bad "replica_curl_gets_401 ($got)"; cat "$LOG" 2>/dev/null | tail -5
fi

# 6. the refusals are in the audit trail, with who
"$IOD" audit --denied -o json >"$T/audit.json" 2>&1
if grep -q '"who": *"anonymous"' "$T/audit.json" && grep -q '"who": *"user:vera"' "$T/audit.json" &&
	grep -q '/v1/members/3' "$T/audit.json"; then
	ok "refusals_audited"
else
	bad "refusals_audited"; head -c 2000 "$T/audit.json"
fi
exit 0
