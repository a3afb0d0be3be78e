#!/bin/sh
# control_churn.sh BUILD: service churn against the sanitizer build (issue
# 15: "a workload of 10,000 services on 100 nodes ... crashed a running
# server (strlen(NULL) in libraft's uvClientInit), 2 of 2 runs"; the test
# asked for: "the 10k-service churn under ASan: 0 crashes").
#
# Three `iod server` members of BUILD/san/iod (ASan + UBSan, plaintext,
# --insecure) on loopback, 100 simulated nodes (Node objects, 8 GPUs each),
# then CHURN_ROUNDS (4) rounds: 8 deploys of 250 one-replica services each
# (IOD_SPEC_SERVICES_MAX is 256), then the previous round's services and
# replicas deleted in transactions. 8,000 services are deployed and 6,000
# deleted in all, while a reader long-polls a follower's replica watch and
# lists replicas. A write answered 503/504 (leadership moved) is retried
# at the new leader.
#   1. churn_completes: every deploy and every delete was answered 200
#      (after retries) and every deploy placed its 250 replicas;
#   2. servers_alive: all three processes are still running and answer
#      /v1/status (a server that died, of a crash or a sanitizer abort, fails
#      this check);
#   3. no_sanitizer_report: no AddressSanitizer/UBSan report in any log
#      (leak checking is off: a process stopped at the end is no crash);
#   4. converged: the three servers reach the same iod_state_revision;
#   5. elections: the highest iod_raft_term of the three moved by at most
#      3 + 1 per 30 s of the run (CHURN_ELECTIONS_MAX: a fixed bound; see
#      the reasons below).
# CHURN_KILL=1 kills one server after the first round: a self-test that
# servers_alive fails when a server dies.
# iod-test: parallel
set -u
BUILD=${1:-build}
IOD="$BUILD/san/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built (make $BUILD/san/iod)"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed (the churn client)"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl needed"; exit 77; }

. "$(dirname "$0")/lib.sh"
BASE=$(free_port_block 23) || { echo "skip: no free port block"; exit 77; }
T=$(mktemp -d)
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
on_bad() { for f in "$T"/s*.log; do echo "--- $f"; tail -15 "$f"; done; }

raft() { echo "127.0.0.1:$((BASE + $1))"; }
api() { echo "127.0.0.1:$((BASE + 10 + $1))"; }
PEERS="1=$(raft 1)@$(api 1),2=$(raft 2)@$(api 2),3=$(raft 3)@$(api 3)"
# abort on the first report, in the log; UBSan's too (the build does not recover)
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for i in 1 2 3; do
	"$IOD" server --id "$i" --data-dir "$T/d$i" --raft "$(raft "$i")" --api "$(api "$i")" \
		--insecure --election-timeout 300ms --heartbeat 30ms --peers "$PEERS" \
		>>"$T/s$i.log" 2>&1 &
	PIDS="$PIDS $!"
	eval "PID$i=$!"
done
state_of() { curl -s --max-time 1 "http://$(api "$1")/v1/status" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null; }
leader_known() { for i in 1 2 3; do [ "$(state_of "$i")" = leader ] && return 0; done; return 1; }
wait_for 30 leader_known || { bad "no leader in 30 s"; exit 1; }
T0=$(date +%s)
# a Raft metric of one server ("" when it does not answer)
metric_of() { curl -s --max-time 2 "http://$(api "$1")/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
# the highest term any server has seen: every election raises it by one
# (pre-vote is on, so a pre-vote that fails raises nothing)
max_term() {
	_m=0
	for i in 1 2 3; do
		_t=$(metric_of "$i" iod_raft_term)
		[ -n "$_t" ] && [ "$_t" -gt "$_m" ] && _m=$_t
	done
	echo "$_m"
}
TERM0=$(max_term)

cat >"$T/churn.py" <<'EOF'
import json, os, signal, sys, threading, time, urllib.request, urllib.error
apis = sys.argv[1].split(",")
rounds, per, batches = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
kill_pid = int(sys.argv[5]) if len(sys.argv) > 5 else 0
stats = {"deploys": 0, "deploys_ok": 0, "placed_short": 0, "txns": 0, "txns_ok": 0,
         "deleted": 0, "retries": 0, "watch_answers": 0, "watch_events": 0, "lists": 0}
leader = [apis[0]]
stop = threading.Event()

def call(api, method, path, body=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request("http://%s%s" % (api, path), data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"null")
        except ValueError:
            return e.code, None
    except (OSError, ValueError):
        return 0, None

def find_leader():
    for _ in range(100):
        for a in apis:
            st, j = call(a, "GET", "/v1/status", timeout=2)
            if st == 200 and j and j.get("state") == "leader":
                leader[0] = a
                return a
        time.sleep(0.1)
    return leader[0]

def write(method, path, body):
    """A write at the leader, retried there after 0/503/504 (a leader change)."""
    for attempt in range(8):
        st, j = call(leader[0], method, path, body)
        if st not in (0, 503, 504):
            return st, j
        stats["retries"] += 1
        time.sleep(0.2)
        find_leader()
    return st, j

def watcher():
    # a follower's replica watch, and now and then a whole list
    a = [x for x in apis if x != leader[0]][0]
    rev, n = 0, 0
    while not stop.is_set():
        if rev == 0 or n % 10 == 0:
            st, j = call(a, "GET", "/v1/replicas")
            if st == 200 and j:
                rev = j.get("rev", rev)
                stats["lists"] += 1
        st, j = call(a, "GET", "/v1/replicas?watch=1&rev=%d&timeout_ms=1000" % rev)
        if st == 200 and j:
            stats["watch_answers"] += 1
            stats["watch_events"] += len(j.get("events", []))
            rev = j.get("rev", rev)
        elif st == 410:
            rev = 0
        else:
            time.sleep(0.1)
        n += 1

find_leader()
st, j = write("POST", "/v1/txn", {"ops": [
    {"op": "put", "kind": "node", "name": "n%03d" % i,
     "value": {"model": "dgx-h100", "gpus": 8}} for i in range(100)]})
if st != 200:
    print("nodes: %d %s" % (st, j), flush=True)
    sys.exit(1)
w = threading.Thread(target=watcher, daemon=True)
w.start()
ok = True
for r in range(rounds):
    for b in range(batches):
        spec = {"services": [{"name": "c%d-%d-%d" % (r, b, i), "type": "stateless",
                              "replicas": 1, "command": "sleep 1000"} for i in range(per)]}
        stats["deploys"] += 1
        st, j = write("POST", "/v1/deploy", spec)
        if st == 200:
            stats["deploys_ok"] += 1
            if len((j or {}).get("placements", [])) != per:
                stats["placed_short"] += 1
        else:
            ok = False
            print("deploy c%d-%d: %d %.300s" % (r, b, st, json.dumps(j)), flush=True)
    if r == 0 and kill_pid:
        os.kill(kill_pid, signal.SIGKILL)
    if r == 0:
        continue
    # delete the previous round: its services and their replicas
    prefix = "c%d-" % (r - 1)
    ops = []
    for kind, plural in (("replica", "replicas"), ("service", "services")):
        st, j = call(leader[0], "GET", "/v1/" + plural)
        if st != 200:
            find_leader()
            st, j = call(leader[0], "GET", "/v1/" + plural)
        for it in (j or {}).get("items", []) if st == 200 else []:
            if it.get("name", "").startswith(prefix):
                ops.append({"op": "delete", "kind": kind, "name": it["name"]})
    for k in range(0, len(ops), 4000):
        stats["txns"] += 1
        st, j = write("POST", "/v1/txn", {"ops": ops[k:k + 4000]})
        if st == 200:
            stats["txns_ok"] += 1
            stats["deleted"] += len(ops[k:k + 4000])
        else:
            ok = False
            print("delete %s: %d %.300s" % (prefix, st, json.dumps(j)), flush=True)
stop.set()
w.join(5)
print("churn " + " ".join("%s=%d" % kv for kv in stats.items()), flush=True)
sys.exit(0 if ok and stats["placed_short"] == 0 and stats["deleted"] > 0 else 1)
EOF

ROUNDS=${CHURN_ROUNDS:-4}
KILL=""
[ "${CHURN_KILL:-0}" = 1 ] && KILL=$PID2
if python3 "$T/churn.py" "$(api 1),$(api 2),$(api 3)" "$ROUNDS" 250 8 $KILL >"$T/churn.out" 2>&1; then
	ok "churn_completes ($(tail -1 "$T/churn.out"))"
else
	cat "$T/churn.out"
	bad churn_completes "$(tail -1 "$T/churn.out")"
fi

ALIVE=yes
for i in 1 2 3; do
	eval "p=\$PID$i"
	if ! kill -0 "$p" 2>/dev/null; then
		ALIVE="server $i (pid $p) is gone"
		break
	fi
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$(api "$i")/v1/status")
	[ "$code" = 200 ] || { ALIVE="server $i answered /v1/status $code"; break; }
done
if [ "$ALIVE" = yes ]; then ok servers_alive; else bad servers_alive "$ALIVE"; fi

if grep -l -E "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|SUMMARY: (Address|Undefined)" \
	"$T"/s*.log >"$T/reports" 2>/dev/null; then
	bad no_sanitizer_report "in $(tr '\n' ' ' <"$T/reports")"
	for f in $(cat "$T/reports"); do grep -m 20 -A 20 -E "Sanitizer|runtime error" "$f"; done
else
	ok no_sanitizer_report
fi

rev_of() { curl -s --max-time 2 "http://$(api "$1")/metrics" | awk '/^iod_state_revision / {print $2}'; }
same_rev() {
	r1=$(rev_of 1); r2=$(rev_of 2); r3=$(rev_of 3)
	[ -n "$r1" ] && [ "$r1" = "$r2" ] && [ "$r2" = "$r3" ]
}
if wait_for 15 same_rev; then
	ok "converged (revision $r1)"
else
	bad converged "revisions $(rev_of 1) $(rev_of 2) $(rev_of 3)"
fi

# Elections over the churn. Issue 15 saw about 890 in 106 s (30 ms election
# timeout, libraft's I/O): big deploys, lists and snapshot sends stalled
# the loop past the followers' timers, ~8 elections a second. Since the
# deploy planning, lists and the log's writes left the loop, a run mostly
# holds one term throughout: 0, 1, 0 elections in runs of 20-33 s at load
# 8.5-9.7, and 2, 0, 0 in runs of 30-77 s at load 10-13, on the shared
# 2-core machine. The bound is 3 plus one per 30 s the run took, not 0: this
# runs under ASan there, where a descheduled process can still miss a 300 ms
# timeout now and then, and a loaded machine stretches the run; a regression
# of the loop stalls gives tens to hundreds, far past it.
# CHURN_ELECTIONS_MAX=N for a fixed bound.
TERM1=$(max_term)
ELECTIONS=$((TERM1 - TERM0))
LC=0
for i in 1 2 3; do _c=$(metric_of "$i" iod_raft_leader_changes_total); LC=$((LC + ${_c:-0})); done
DUR=$(($(date +%s) - T0))
EMAX=${CHURN_ELECTIONS_MAX:-$((3 + DUR / 30))}
if [ "$TERM0" -gt 0 ] && [ "$ELECTIONS" -le "$EMAX" ]; then
	ok "elections ($ELECTIONS over $DUR s: term $TERM0 -> $TERM1, bound $EMAX; leader changes seen $LC)"
else
	bad elections "$ELECTIONS elections (term $TERM0 -> $TERM1, bound $EMAX; leader changes seen $LC)"
fi
checks_ok
