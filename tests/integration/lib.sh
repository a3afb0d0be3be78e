# lib.sh: what the integration scripts share (sourced: `. "$(dirname "$0")/lib.sh"`).
#
#   wait_for SECONDS CMD...    run CMD every 0.1 s until it succeeds (0), or
#                              SECONDS x 10 tries or (after 10) 2 x SECONDS
#                              + 10 s of the wall clock pass (1)
#   wait_http SECONDS URL      wait_for an HTTP answer (any status) from URL
#   free_port_block SEED       a block of 100 free TCP/UDP ports below the
#                              ephemeral range, printed as its first port
#                              (nothing when none is free), reserved for
#                              this script ($$) until it exits
#   bg CMD...                  start CMD in the background, remember its pid
#                              (also in BG_PID)
#   bg_adopt PID               remember a pid started with a plain & (a
#                              here-document's command) for stop_bg too
#   stop_bg                    SIGTERM, then wait for, every process bg started
#
# Checks (each prints its line and its own RESULT line, which
# scripts/run-tests.sh sums, so a script that stops early still counts):
#   ok NAME                    "ok   NAME" (with " (t=Ns)" when T0 is set)
#   bad NAME [WHY]             "FAIL NAME[: WHY]", then the script's on_bad
#                              function when it defines one (to dump logs)
#   skip_check NAME WHY        "skip NAME: WHY"
#   checks_ok                  status 0 when no check failed (a last command)
#
# Preconditions (each skips the script, exit 77, with the reason):
#   need_iod BUILD             IOD=BUILD/iod as an absolute path
#   need CMD...                every CMD is on PATH
#   need_root WHY              running as root
#
# A local cluster:
#   start_cluster LOG ARGS...  `$IOD up ARGS` with its output in LOG; when it
#                              fails: LOG printed, `bad "iod up"`, status 1
#   stop_cluster [GRACE]       `$IOD down` (default grace 5s) if one was started
#
# Scripts keep their own cleanup trap and call stop_bg/stop_cluster from it.
#
# The `iod up --netns` scripts (ar_cluster_netns.sh, overlay_netns.sh,
# qos_netns.sh, sg_netns.sh, vip_netns.sh):
#   netns_setup BUILD WHY TOOL...  need_iod BUILD, need_root WHY, need ip
#                              TOOL..., a network namespace can be made (else
#                              skip, 77); then a temp dir T, IOD_STATE_DIR
#                              ($T/state) and PATH (IOD's directory first)
#                              exported, BASE a free_port_block
#   netns_cleanup              stop_bg, stop_cluster 2s, rm -rf $T (a trap)
#
# `iod chaos` on a loopback cluster (chaos_faults.sh, chaos_heal.sh,
# chaos_member_delay.sh):
#   need_chaos BUILD           need_iod, root, nft (listing tables), cgroup2,
#                              jq and curl, else skip (77)
#   chaos_up                   a temp dir T and `iod up` of 3 servers and a
#                              node (no mesh) there, IOD_STATE_DIR and
#                              IOD_SERVER exported, API the first API port,
#                              chaos_cleanup as the EXIT trap; when up fails
#                              `bad "iod up"` and exit 0
#   chaos_cleanup              heal everything, stop the cluster and keeper
#   now_ms                     the wall clock in ms
#   chaos_tables, chaos_records  iod_chaos_* nft tables, fault records now
#   chaos_leader               the leader's server index (iod status)
#   chaos_writes_ok [D]        a register run of D (2s) acknowledged a write


wait_for() {
	# SECONDS x 10 tries of CMD 0.1 s apart, as always, but no longer than
	# 2 x SECONDS + 10 s of the wall clock once 10 tries are done: counting
	# tries alone let a slow CMD (4 `iod get`s on a loaded machine) stretch
	# mesh_netns's 90 s wait past the 300 s test timeout, and a plain
	# SECONDS of wall clock was less patient than before with quick checks
	# under load (chaos_member_delay.sh's relay exit). Its own variable
	# names: callers keep _n and _end.
	_wf_max=$(($1 * 10)) _wf_end=$(($(date +%s) + 2 * $1 + 10)) _wf_n=0
	shift
	while :; do
		"$@" && return 0
		_wf_n=$((_wf_n + 1))
		[ "$_wf_n" -lt "$_wf_max" ] || return 1
		[ "$_wf_n" -lt 10 ] || [ "$(date +%s)" -lt "$_wf_end" ] || return 1
		sleep 0.1
	done
}

_http_up() { curl -s -o /dev/null --max-time 1 "$1"; }
wait_http() { wait_for "$1" _http_up "$2"; }

# log_at_ms PATTERN FILE...: the wall clock (unix ms) of the last line that
# matches PATTERN in iod's logs (each line starts with its ISO UTC time);
# nothing when none does. For phases timed from the logs, not from polls.
log_at_ms() {
	_la_p=$1
	shift
	_la_t=$(grep -h -- "$_la_p" "$@" 2>/dev/null | sort | tail -1 | cut -d' ' -f1)
	[ -n "$_la_t" ] && date -u -d "$_la_t" +%s%3N
}

free_port_block() {
	# A block is reserved for the calling script ($$, also inside $(...)) by
	# a file in $_pb naming it; one whose script is gone is free again. The
	# choice is made under a lock, so scripts run side by side (run-tests.sh's
	# parallel lane, other checkouts) never get the same block.
	_pb=${TMPDIR:-/tmp}/iod-port-blocks
	# (world-writable and sticky like /tmp, for every user's scripts; the
	# lock is taken on a read-only fd, so a .lock made by another user works)
	[ -d "$_pb" ] || { mkdir -p "$_pb" && chmod 1777 "$_pb"; } 2>/dev/null
	{ [ -e "$_pb/.lock" ] || : >"$_pb/.lock"; } 2>/dev/null
	if command -v flock >/dev/null && [ -r "$_pb/.lock" ]; then
		exec 9<"$_pb/.lock"
		flock 9
	fi
	for _try in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		_cand=$((10000 + ($1 * 7 + _try * 131) % 220 * 100))
		_owner=$(cat "$_pb/$_cand" 2>/dev/null)
		# (a live owner: /proc, so another user's script counts too)
		[ -n "$_owner" ] && [ "$_owner" != $$ ] && [ -d "/proc/$_owner" ] && continue
		if ! command -v ss >/dev/null ||
			[ -z "$(ss -Hltun "( sport >= :$_cand and sport <= :$((_cand + 99)) )" 2>/dev/null)" ]; then
			{ echo $$ >"$_pb/$_cand"; } 2>/dev/null
			exec 9>&-
			echo "$_cand"
			return 0
		fi
	done
	exec 9>&-
	return 1
}

LIB_BG_PIDS=""
bg() {
	"$@" &
	BG_PID=$!
	LIB_BG_PIDS="$LIB_BG_PIDS $BG_PID"
}
bg_adopt() { LIB_BG_PIDS="$LIB_BG_PIDS $1"; }
stop_bg() {
	for _p in $LIB_BG_PIDS; do kill "$_p" 2>/dev/null; done
	for _p in $LIB_BG_PIDS; do wait "$_p" 2>/dev/null; done
	LIB_BG_PIDS=""
}

LIB_PASS=0
LIB_FAIL=0
LIB_SKIP=0
ok() {
	echo "ok   $1${T0:+ (t=$(($(date +%s) - T0))s)}"
	echo "RESULT 1 0 0"
	LIB_PASS=$((LIB_PASS + 1))
}
bad() {
	if [ $# -gt 1 ]; then echo "FAIL $1: $2"; else echo "FAIL $1"; fi
	echo "RESULT 0 1 0"
	LIB_FAIL=$((LIB_FAIL + 1))
	if command -v on_bad >/dev/null 2>&1; then on_bad; fi
	return 0
}
skip_check() {
	echo "skip $1: $2"
	echo "RESULT 0 0 1"
	LIB_SKIP=$((LIB_SKIP + 1))
}
checks_ok() { [ "$LIB_FAIL" -eq 0 ]; }

need_iod() {
	IOD="${1:-build}/iod"
	[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
	IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
}
need() {
	for _c in "$@"; do
		command -v "$_c" >/dev/null 2>&1 || { echo "skip: $_c not installed"; exit 77; }
	done
}
need_root() {
	[ "$(id -u)" = 0 ] || { echo "skip: needs root ($1)"; exit 77; }
}

LIB_UP=0
start_cluster() {
	_log=$1
	shift
	if "$IOD" up "$@" >"$_log" 2>&1; then
		LIB_UP=1
		return 0
	fi
	LIB_UP=1 # a half-started cluster is stopped too
	cat "$_log"
	bad "iod up"
	return 1
}
stop_cluster() {
	[ "$LIB_UP" = 1 ] && "$IOD" down --grace "${1:-5s}" >/dev/null 2>&1
	LIB_UP=0
}

netns_setup() {
	need_iod "$1"
	need_root "$2"
	shift 2
	need ip "$@"
	ip netns add "iodprobe$$" 2>/dev/null || { echo "skip: cannot create network namespaces"; exit 77; }
	ip netns del "iodprobe$$"
	T=$(mktemp -d)
	export IOD_STATE_DIR="$T/state"
	export PATH="$(dirname "$IOD"):$PATH"
	BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
}
netns_cleanup() {
	stop_bg
	stop_cluster 2s
	rm -rf "$T"
}

need_chaos() {
	need_iod "$1"
	need_root "nftables, cgroups"
	need nft jq curl
	nft list tables >/dev/null 2>&1 || { echo "skip: nft cannot list tables here"; exit 77; }
	grep -q cgroup2 /proc/self/mounts || { echo "skip: no cgroup2 mounted"; exit 77; }
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
chaos_tables() { nft list tables 2>/dev/null | grep -c "inet iod_chaos_"; }
chaos_records() { ls "$IOD_STATE_DIR/chaos/"*.json 2>/dev/null | wc -l; }
chaos_leader() { "$IOD" status -o json 2>/dev/null | jq -r .leader; }
chaos_writes_ok() {
	"$IOD" chaos run --workload register --clients 2 --duration "${1:-2s}" --nemesis none \
		-o json >"$T/w.json" 2>"$T/w.err" &&
		[ "$(jq .ops.acknowledged_writes "$T/w.json")" -gt 0 ]
}
chaos_cleanup() {
	"$IOD" chaos heal --all >/dev/null 2>&1
	stop_cluster 2s
	_kp=$(cat "$IOD_STATE_DIR/chaos/keeper.pid" 2>/dev/null)
	[ -n "$_kp" ] && kill "$_kp" 2>/dev/null
	rm -rf "$T"
}
chaos_up() {
	T=$(mktemp -d)
	export IOD_STATE_DIR="$T/cluster"
	BASE=$((23000 + ($$ % 300) * 20))
	API=$((BASE + 10))
	export IOD_SERVER="127.0.0.1:$API,127.0.0.1:$((API + 1)),127.0.0.1:$((API + 2))"
	trap chaos_cleanup EXIT
	start_cluster "$T/up.log" --nodes 1 --gpus-per-node 0 --api-port "$API" --raft-port "$BASE" \
		--no-mesh --telemetry-port 0 --no-sandbox || exit 0
}
