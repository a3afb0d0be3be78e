#!/bin/sh
# ckpt_raft.sh BUILD: checkpoint manifests committed through Raft
# (docs/storage.md) against a one-member `iod server`:
#   1. the demo parameter server with --ckpt-server commits each save as a
#      Checkpoint object; `iod get checkpoints SERVICE` lists them (steps,
#      bytes, tier, copies, health) and -o json carries the same;
#   2. a save that is complete on disk but whose manifest is not committed
#      (its object deleted: the commit never happened) is not restored: the
#      replacement restores the newest committed step and prints it;
#   3. replicas 3 with no peer copies: the quorum (2) is not met, nothing is
#      committed, and the server says why; a PUT naming fewer copies than
#      the quorum is refused by the API (no torn checkpoint is visible);
#   4. the background scrub (--ckpt-scrub) finds a damaged chunk and writes
#      "damaged 1" into that step's Checkpoint object (`iod get checkpoints`);
#   5. retention: an evicted checkpoint's object is deleted with it.
# Exit status: 0 pass, 77 skip, 1 fail.
set -u
BUILD=${1:-build}
. "$(dirname "$0")/lib.sh"
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl needed"; exit 77; }
T=$(mktemp -d)
SRV="" PS=""
cleanup() {
	[ -n "$PS" ] && kill -9 "$PS" 2>/dev/null && wait "$PS" 2>/dev/null
	[ -n "$SRV" ] && kill "$SRV" 2>/dev/null && wait "$SRV" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
BASE=$(free_port_block 29) || { echo "skip: no free port block"; exit 77; }
API="127.0.0.1:$((BASE + 1))"
PORT=$((BASE + 5))
fail() {
	echo "FAIL: $*"
	for f in "$T"/*.log; do echo "--- $f"; tail -20 "$f"; done
	exit 1
}
"$IOD" server --id 1 --data-dir "$T/d" --raft "127.0.0.1:$((BASE + 2))" --api "$API" \
	>"$T/server.log" 2>&1 &
SRV=$!
put() { curl -s -o "$T/put.out" -w '%{http_code}' -XPUT "http://$API/v1/$1" -d "$2"; }
i=0
until [ "$(put node/n1 '{"addr": "127.0.0.1"}')" = 200 ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "server did not start"
	sleep 0.1
done
[ "$(put service/ps '{"type": "stateful", "command": "true"}')" = 200 ] ||
	fail "service: $(cat "$T/put.out")"
[ "$(put replica/ps-0 '{"service": "ps", "ordinal": 0, "node": "n1"}')" = 200 ] ||
	fail "replica: $(cat "$T/put.out")"
export IOD_SERVICE=ps IOD_REPLICA=ps-0 IOD_NODE=n1
unset IOD_CONFIG
start_ps() {
	"$IOD" demo-worker --role parameter-server --port "$PORT" --params 20000 \
		--ckpt-dir "$T/ck$2" --ckpt-every 10 --ckpt-server "$API" ${3:-} >"$T/$1.log" 2>&1 &
	PS=$!
	for _i in $(seq 1 50); do
		grep -qs "serving" "$T/$1.log" && return 0
		sleep 0.1
	done
	fail "parameter server did not start"
}
stop_ps() { kill "$PS"; wait "$PS"; PS=""; }
work() {
	"$IOD" demo-worker --role worker --servers "127.0.0.1:$PORT" --compute-ms 1 \
		--steps "$1" --http-port 0 >"$T/worker.log" 2>&1 || fail "worker failed"
}

# 1.
start_ps ps1 ""
grep -q "no committed checkpoint, starting at step 0" "$T/ps1.log" || fail "first start"
work 35
sleep 0.5
stop_ps
grep -q "checkpoint failed" "$T/ps1.log" && fail "a commit failed"
IOD_SERVER="$API" "$IOD" get checkpoints ps >"$T/get.txt" 2>&1 || fail "iod get checkpoints"
grep -q "^NAME .*STEP .*BYTES .*TIER .*COPIES .*HEALTH .*SCRUB" "$T/get.txt" || fail "no header"
ROWS=$(grep -c "^ps-0.r0.s" "$T/get.txt")
[ "$ROWS" -ge 2 ] || fail "$ROWS checkpoints listed: $(cat "$T/get.txt")"
grep "^ps-0.r0.s" "$T/get.txt" | grep -q " 80000 .*NVMe .*1/1 .*clean" ||
	fail "row: $(cat "$T/get.txt")"
IOD_SERVER="$API" "$IOD" get checkpoints ps -o json >"$T/get.json" || fail "-o json"
grep -q '"manifest_xxh3"' "$T/get.json" || fail "json: $(cat "$T/get.json")"
IOD_SERVER="$API" "$IOD" get checkpoints other >"$T/other.txt" 2>&1
grep -q "no checkpoints of other" "$T/other.txt" || fail "other service: $(cat "$T/other.txt")"
NEWEST=$(grep -o "^ps-0.r0.s[0-9]*" "$T/get.txt" | sed 's/.*\.s//' | sort -n | tail -1)
PREV=$(grep -o "^ps-0.r0.s[0-9]*" "$T/get.txt" | sed 's/.*\.s//' | sort -n | tail -2 | head -1)

# 2. the newest is complete on disk, its commit "never happened"
[ -f "$T/ck/$(printf 'step-%020d' "$NEWEST")/r0.manifest" ] || fail "step $NEWEST not on disk"
curl -sf -XDELETE "http://$API/v1/checkpoint/ps-0.r0.s$NEWEST" >/dev/null || fail "delete"
start_ps ps2 ""
grep -q "restored step $PREV from checkpoint" "$T/ps2.log" ||
	fail "want step $PREV (newest committed), got: $(grep restored "$T/ps2.log")"
stop_ps
echo "restored committed step $PREV, not uncommitted $NEWEST"

# 3.
start_ps ps3 3 "--ckpt-replicas 3"
work 12
sleep 0.5
stop_ps
grep -q "write quorum is 2 (no peers configured)" "$T/ps3.log" ||
	fail "replicas 3 was committed or silent: $(cat "$T/ps3.log")"
code=$(put checkpoint/ps-0.r0.s999 '{"service": "ps", "replica": "ps-0", "node": "n1",
	"step": 999, "replicas": 3, "min_size": 2, "copies": [{"node": "n1", "ok": true}]}')
[ "$code" = 400 ] || fail "a sub-quorum manifest was accepted ($code)"
grep -q "the write quorum is 2" "$T/put.out" || fail "reason: $(cat "$T/put.out")"

# 4. the background scrub writes its result into the Checkpoint objects: a
#    flipped byte in a chunk of a committed step shows as "damaged 1" (no
#    peer to repair it from), the others as "clean". Under load step 1 may
#    have written only PREV and NEWEST, and NEWEST's object is gone, so
#    NEWEST's clean verdict is read from the scrubber's log.
start_ps ps4 "" "--ckpt-scrub 200"
CH="$T/ck/$(printf 'step-%020d' "$PREV")/r0-0-0.chunk"
[ -f "$CH" ] || fail "no chunk $CH"
printf 'X' | dd of="$CH" bs=1 seek=100 conv=notrunc 2>/dev/null
scrubbed() {
	IOD_SERVER="$API" "$IOD" get checkpoints ps >"$T/get4.txt" 2>&1 &&
		grep "^ps-0.r0.s$PREV " "$T/get4.txt" | grep -q "damaged 1" &&
		! grep "^ps-0.r0.s" "$T/get4.txt" | grep -v "^ps-0.r0.s$PREV " | grep -vq " clean *$" &&
		grep -q "scrub step $NEWEST: clean" "$T/ps4.log"
}
wait_for 10 scrubbed || fail "scrub not recorded: $(cat "$T/get4.txt")"
grep -q "scrub step $PREV: damaged 1" "$T/ps4.log" || fail "scrub not printed"
stop_ps
curl -sf "http://$API/v1/checkpoint/ps-0.r0.s$PREV" | grep -q '"scrubbed_ms"' ||
	fail "no scrubbed_ms"
echo "scrub: step $PREV damaged, recorded in its Checkpoint object"

# 5. retention holds in Raft: another replica saving past keep_max (3) has
#    Checkpoint objects for exactly the steps left on its disk
[ "$(put replica/ps-1 '{"service": "ps", "ordinal": 1, "node": "n1"}')" = 200 ] ||
	fail "replica ps-1: $(cat "$T/put.out")"
export IOD_REPLICA=ps-1
start_ps ps5 5
work 65
sleep 0.5
stop_ps
DISK=$(ls "$T/ck5" | sed -n 's/^step-0*\([0-9][0-9]*\)$/\1/p' | sort -n | tr '\n' ' ')
IOD_SERVER="$API" "$IOD" get checkpoints ps >"$T/get5.txt" 2>&1 || fail "get checkpoints"
RAFT=$(grep -o "^ps-1.r0.s[0-9]*" "$T/get5.txt" | sed 's/.*\.s//' | sort -n | tr '\n' ' ')
[ "$(echo "$DISK" | wc -w)" -le 3 ] && [ "$(echo "$DISK" | wc -w)" -ge 1 ] ||
	fail "on disk: $DISK"
[ "$DISK" = "$RAFT" ] || fail "on disk: $DISK; committed: $RAFT"
echo "retention: steps $DISK on disk and in Raft"
echo "ok: manifests committed through Raft, only committed ones restored"
exit 0
