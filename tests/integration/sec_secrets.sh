#!/bin/sh
# sec_secrets.sh BUILD: a spec's `secrets:` (issue 16, item 8). On a secure
# `iod up` (1 node, sandboxes on), `iod secret create db --from-file F`, then
# a service that mounts it:
#   1. secret_reaches_replica_as_tmpfs_file: /run/secrets/db in the replica
#      holds the value (same SHA-256), on a tmpfs, mode 0400, owned by the
#      replica's uid, read-only; IOD_SECRETS_DIR says where; the value is in
#      no variable of its environment;
#   2. secret_never_in_clear: the value is in no file under the cluster's
#      state dir (Raft logs and snapshots, audit trails, agent and replica
#      logs) and in no `iod get -o json` answer (secrets, services, replicas);
#   3. secret_values_only_for_their_nodes: a viewer cannot list secrets, the
#      admin cannot read a value, node-1 cannot read it for a replica that
#      does not mount it (403 each);
#   4. missing_secret_fails_alone: a replica whose secret does not exist is
#      failed with the secret named, and the first keeps running.
# Prints one RESULT line per check.
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
need python3 curl
[ "$(id -u)" = 0 ] || { echo "skip: secrets need a root agent (sandboxes with their own root)"; exit 77; }

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
unset IOD_TOKEN IOD_CA IOD_CERT IOD_KEY IOD_CONFIG IOD_CONTEXT
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
API="127.0.0.1:$((BASE + 10))"
export IOD_SERVER="$API,127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
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
field() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
for i in d.get('items', []):
    if i['name'] == '$1':
        print(i['value'].get('$2', ''))
"
}

start_cluster "$T/up.log" --nodes 1 --gpus-per-node 0 --lease-ttl 2s --api-port $((BASE + 10)) \
	--raft-port $((BASE + 0)) --election-timeout 1s --heartbeat 100ms --no-mesh || exit 1

VALUE="s3cr3t-$$-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s' "$VALUE" >"$T/db.txt"
WANT=$(sha256sum <"$T/db.txt" | cut -c1-64)
"$IOD" secret create db --from-file "$T/db.txt" >"$T/create.log" 2>&1 || { cat "$T/create.log"; bad "secret create"; exit 1; }
rm -f "$T/db.txt"
cat >"$T/spec.yaml" <<'EOF'
services:
  - name: app
    type: stateless
    secrets: [db]
    command: [sh, -c, 'f=$IOD_SECRETS_DIR/db; echo "sha=$(sha256sum < $f | cut -c1-64)"; echo "fs=$(stat -f -c %T $IOD_SECRETS_DIR)"; echo "mode=$(stat -c %a $f)"; echo "own=$(stat -c %u $f)/$(id -u)"; echo "env=$(env | grep -cF "$(cat $f)")"; (echo x > $f) 2>/dev/null && echo writable; echo probe-done; sleep 600']
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }

# 1. the file in the sandbox
LOG=""
probe_done() { LOG=$(ls "$IOD_STATE_DIR"/node-1/replicas/app-0*/log 2>/dev/null | head -1); [ -n "$LOG" ] && grep -q probe-done "$LOG"; }
wait_for 20 probe_done
got=$(grep -e '^sha=' -e '^fs=' -e '^mode=' -e '^own=' -e '^env=' -e writable "$LOG" 2>/dev/null | tr '\n' ' ')
own=$(sed -n 's/^own=//p' "$LOG" 2>/dev/null)
if [ "$got" = "sha=$WANT fs=tmpfs mode=400 own=$own env=0 " ] && [ "${own%/*}" = "${own#*/}" ] && [ "${own%/*}" != 0 ]; then
	ok "secret_reaches_replica_as_tmpfs_file (own $own)"
else
	bad "secret_reaches_replica_as_tmpfs_file (want sha=$WANT; got: $got)"; tail -5 "$LOG" 2>/dev/null
	echo "phase $(field app-0 phase): $(field app-0 reason)"
fi

# 2. nowhere in the clear
hits=$(grep -rlaF "$VALUE" "$IOD_STATE_DIR" 2>/dev/null)
for what in secrets services replicas endpoints; do
	"$IOD" get $what -o json 2>/dev/null | grep -qF "$VALUE" && hits="$hits get-$what"
done
"$IOD" get secrets -o json >"$T/secrets.json" 2>&1
if [ -z "$hits" ] && grep -q '"sealed"' "$T/secrets.json"; then
	ok "secret_never_in_clear"
else
	bad "secret_never_in_clear (found in: $hits)"; head -c 600 "$T/secrets.json"
fi

# 3. who may have it
tok=$("$IOD" token create --role viewer --ttl 1h -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
# a follower that has not applied the new token yet sends us on (503)
for a in $(echo "$IOD_SERVER" | tr , ' '); do
	c1=$(curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "https://$a/v1/secrets")
	[ "$c1" != 503 ] && break
done
c2=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
	"https://$API/v1/secret-values/db?replica=app-0")
c3=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI/ca.crt" --cert "$PKI/node-1.crt" --key "$PKI/node-1.key" \
	"https://$API/v1/secret-values/db?replica=other-0")
if [ "$c1 $c2 $c3" = "403 403 403" ]; then
	ok "secret_values_only_for_their_nodes"
else
	bad "secret_values_only_for_their_nodes (viewer list $c1, admin value $c2, node for another replica $c3)"
fi

# 4. a secret that does not exist
cat >"$T/bad.yaml" <<'EOF'
services:
  - name: nosecret
    type: stateless
    secrets: [nope]
    command: [sleep, '600']
EOF
"$IOD" deploy -f "$T/bad.yaml" >"$T/bad.log" 2>&1
failed() { [ "$(field nosecret-0 phase)" = failed ] && field nosecret-0 reason | grep -q "secret nope"; }
if wait_for 20 failed && [ "$(field app-0 phase)" = running ]; then
	ok "missing_secret_fails_alone ($(field nosecret-0 reason))"
else
	bad "missing_secret_fails_alone ($(field nosecret-0 phase): $(field nosecret-0 reason); app-0 $(field app-0 phase))"
fi
exit 0
