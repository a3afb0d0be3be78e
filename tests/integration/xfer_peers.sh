#!/bin/sh
# xfer_peers.sh BUILD: libiod-xfer peers found through the control plane
# (docs/transfer.md "Peers") on a local cluster (`iod up --no-sandbox`):
#   1. a service of 3 replicas runs `iod xfer peer -n 3`: each publishes
#      its metadata blob as xferpeer/<service>.<ordinal>, waits until all 3
#      have, writes 1 MiB into its right neighbour's shared memory and checks
#      by SHA-256 what its left neighbour wrote: every one says "exact";
#   2. `iod get xferpeers` lists the 3 objects, each naming its node and
#      carrying a hex blob; then replacements: 3 new processes as ordinals
#      0..2 of the same service, whose old objects (of processes gone) are
#      still there, find each other all the same (a blob that does not load
#      is skipped until its replica publishes anew) and move 64 KiB exact;
#   3. the demo worker's data-parallel mode (`--allreduce xfer`, asked for by
#      the spec's env IOD_ALLREDUCE): 3 replicas all-reduce their gradients
#      over libiod-xfer for 20 steps, each checked exact, ring size from
#      $IOD_PEERS; at the end each takes its object back;
#   4. a group of 2 where ordinal 1 never publishes: the waiter names the
#      ordinal missing and gives up at its deadline (exit 1, no hang).
# The replicas have no client config: they write with their own
# credentials, their service's SVID the agent hands them (IOD_CA, IOD_CERT,
# IOD_KEY, IOD_SERVER), and that identity may not read services or publish
# as another service.
# Replicas run as plain processes (--no-sandbox): shared memory between
# sandboxed replicas (IPC namespaces) is not what this checks.
# Exit status: 0 pass, 77 skip, 1 fail.
set -u
. "$(dirname "$0")/lib.sh"
B=${1:-build}
IOD="$B/iod"
need_iod "$B"
"$IOD" up --help >/dev/null 2>&1 || { echo "iod up is not built here"; exit 77; }
need curl

T=$(mktemp -d)
export IOD_STATE_DIR="$T/state"
unset IOD_CONFIG
cleanup() {
	"$IOD" down --state-dir "$T/state" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT INT TERM
base=$(free_port_block $$) || { echo "no free block of ports"; exit 77; }
API="127.0.0.1:$((base + 10))"
start_cluster "$T/up.log" --nodes 2 --servers 1 --no-mesh --no-sandbox \
	--api-port $((base + 10)) --raft-port $((base + 20)) --state-dir "$T/state" || exit 1

cat >"$T/spec.json" <<JSON
{"services": [{"name": "ring", "type": "stateless", "replicas": 3,
  "command": ["sh", "-c", "\"\$IOD_BIN\" xfer peer -n 3 --server $API --deadline 20s; echo \"peer-exit=\$?\"; sleep 600"]},
 {"name": "dp", "type": "stateless", "replicas": 3,
  "env": {"IOD_ALLREDUCE": "xfer", "IOD_XFER_TRANSPORT": "shm"},
  "command": ["sh", "-c", "\"\$IOD_BIN\" demo-worker --role worker --steps 20 --compute-ms 1 --params 65536 --server $API; echo \"dp-exit=\$?\"; sleep 600"]},
 {"name": "solo", "type": "stateless", "replicas": 1, "command": ["sleep", "600"]}]}
JSON
"$IOD" deploy -f "$T/spec.json" --server "$API" >"$T/deploy.log" 2>&1 ||
	{ echo "deploy failed"; cat "$T/deploy.log"; exit 1; }

logs() { cat "$T"/state/node-*/replicas/ring-*/log 2>/dev/null; }
done3() { [ "$(logs | grep -c '^peer-exit=')" -ge 3 ]; }
wait_for 30 done3 || true
EXACT=$(logs | grep -c "^xfer peer: ring ordinal .* sha256 [0-9a-f]\{64\} exact$")
if [ "$EXACT" = 3 ] && [ "$(logs | grep -c '^peer-exit=0$')" = 3 ]; then
	ok "3 replicas found each other through the API and moved 1 MiB sha256-exact"
	logs | grep "^xfer peer:" | sed 's/^/  /'
else
	bad "xfer peer: $EXACT of 3 exact"
	logs | tail -20
fi

"$IOD" get xferpeers --server "$API" >"$T/get.txt" 2>&1
if [ "$(grep -c '^ring\.[0-2] ' "$T/get.txt")" = 3 ]; then
	ok "iod get xferpeers lists ring.0..2"
else
	bad "iod get xferpeers: $(cat "$T/get.txt")"
fi
curl -s "http://$API/v1/xferpeer/ring.1" >"$T/one.json" 2>/dev/null ||
	"$IOD" get xferpeer ring.1 -o json --server "$API" >"$T/one.json" 2>&1
if grep -q '"md": *"494f4458' "$T/one.json" && grep -q '"node": *"node-' "$T/one.json"; then
	ok "xferpeer/ring.1 carries its node and an IODX blob in hex"
else
	bad "xferpeer/ring.1: $(head -c 300 "$T/one.json")"
fi

# 1b. the replicas wrote with credentials of their own (no client config
# in their env): their service's SVID, which may write only its own
# service's objects
C=$(ls -d "$T"/state/node-*/replicas/ring-0/creds 2>/dev/null | head -1)
if [ -n "$C" ] && [ -f "$C/svid.crt" ] && [ -f "$C/svid.key" ] && [ -f "$C/ca.crt" ] &&
	[ "$(stat -c %a "$C/svid.key")" = 400 ]; then
	ok "ring-0 holds its own credentials ($C: ca.crt svid.crt svid.key, key 0400)"
else
	bad "ring-0 has no credentials of its own: $(ls -l "$C" 2>&1)"
fi
asring() { env -u IOD_STATE_DIR IOD_CONFIG=/nonexistent IOD_CA="$C/ca.crt" IOD_CERT="$C/svid.crt" \
	IOD_KEY="$C/svid.key" "$@"; }
ascurl() { curl -s --cacert "$C/ca.crt" --cert "$C/svid.crt" --key "$C/svid.key" "$@"; }
W=$(ascurl "https://$API/v1/whoami" 2>&1)
case "$W" in
*svc/ring*) ok "the credential is ring's service identity ($(echo "$W" | grep -o 'spiffe://[^"]*'))" ;;
*) bad "whoami with ring-0's credential: $W" ;;
esac
if asring "$IOD" get services --server "$API" >"$T/svc.txt" 2>&1; then
	bad "ring's identity read the services: $(head -3 "$T/svc.txt")"
else
	grep -q "service identities are for the mesh" "$T/svc.txt" &&
		ok "ring's identity may not read services (403)" ||
		bad "get services as ring: $(cat "$T/svc.txt")"
fi
N1=$(ls -d "$T"/state/node-*/replicas/ring-0 | head -1 | sed 's,.*/\(node-[0-9]*\)/replicas/.*,\1,')
code=$(ascurl -o "$T/steal.txt" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
	-d "{\"service\": \"solo\", \"ordinal\": 0, \"replica\": \"solo-0\", \"node\": \"$N1\", \"md\": \"00\"}" \
	"https://$API/v1/xferpeer/solo.0")
if [ "$code" = 403 ] && ! "$IOD" get xferpeers --server "$API" | grep -q '^solo\.'; then
	ok "ring's identity may not publish as another service (xferpeer/solo.0: 403 $(head -c 160 "$T/steal.txt"))"
else
	bad "publishing solo.0 as ring: HTTP $code $(head -c 300 "$T/steal.txt")"
fi

# 2. replacements over the dead ones' objects
# (a sanitizer build: UCX 1.13 leaks a few bytes in libuct when a connect
# to a dead peer's segment fails, which is what these go through)
for k in 0 1 2; do
	ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
	"$IOD" xfer peer -n 3 --service ring --ordinal $k --server "$API" --size 65536 \
		--deadline 15s >"$T/re$k.log" 2>&1 &
	eval "RE$k=\$!"
done
RC=0
for p in "$RE0" "$RE1" "$RE2"; do wait "$p" || RC=1; done
if [ "$RC" = 0 ] && [ "$(cat "$T"/re*.log | grep -c '65536 bytes from .* exact$')" = 3 ]; then
	ok "3 replacements found each other past the stale objects of the dead ones"
else
	bad "replacements: rc=$RC"
	cat "$T"/re*.log | tail -20
fi

# 3. the demo worker's all-reduce
dplogs() { cat "$T"/state/node-*/replicas/dp-*/log 2>/dev/null; }
dpdone() { [ "$(dplogs | grep -c '^dp-exit=')" -ge 3 ]; }
wait_for 30 dpdone || true
if [ "$(dplogs | grep -c '^dp-exit=0$')" = 3 ] &&
	[ "$(dplogs | grep -c 'all-reduce over libiod-xfer, rank [0-2] of 3, 65536 int64, transport shm')" = 3 ] &&
	[ "$(dplogs | grep -c '^worker: stopped after 20 steps, every all-reduce exact$')" = 3 ]; then
	ok "demo workers all-reduced 20 steps over libiod-xfer, every one exact"
	dplogs | grep "all-reduce" | sed 's/^/  /'
	if "$IOD" get xferpeers --server "$API" | grep -q '^dp\.'; then
		bad "the demo workers' objects are still there"
	else
		ok "the demo workers took their objects back"
	fi
else
	bad "demo all-reduce"
	dplogs | tail -20
fi

# 4. ordinal 1 of solo never publishes
S=$(date +%s)
"$IOD" xfer peer -n 2 --service solo --ordinal 0 --server "$API" --deadline 2s \
	>"$T/missing.log" 2>&1
RC=$?
E=$(($(date +%s) - S))
if [ "$RC" = 1 ] && grep -q "ordinals 1 missing" "$T/missing.log" &&
	[ "$E" -le 8 ]; then
	ok "a missing peer: exit 1 after ${E}s naming it"
else
	bad "missing peer: rc=$RC after ${E}s: $(cat "$T/missing.log")"
fi
checks_ok
