# lib.sh: what the integration scripts share (sourced: `. "$(dirname "$0")/lib.sh"`).
#
#   wait_for SECONDS CMD...    run CMD every 0.1 s until it succeeds (0) or
#                              SECONDS pass (1)
#   wait_http SECONDS URL      wait_for an HTTP answer (any status) from URL
#   free_port_block SEED       a block of 100 free TCP/UDP ports below the
#                              ephemeral range, printed as its first port
#                              (nothing when none is free)
#   bg CMD...                  start CMD in the background, remember its pid
#   stop_bg                    SIGTERM, then wait for, every process bg started
#
# Scripts keep their own cleanup trap and call stop_bg from it.

wait_for() {
	_n=$(($1 * 10)); shift
	while [ $_n -gt 0 ]; do
		"$@" && return 0
		sleep 0.1
		_n=$((_n - 1))
	done
	return 1
}

_http_up() { curl -s -o /dev/null --max-time 1 "$1"; }
wait_http() { wait_for "$1" _http_up "$2"; }

free_port_block() {
	for _try in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		_cand=$((10000 + ($1 * 7 + _try * 131) % 220 * 100))
		if ! command -v ss >/dev/null ||
			[ -z "$(ss -Hltun "( sport >= :$_cand and sport <= :$((_cand + 99)) )" 2>/dev/null)" ]; then
			echo "$_cand"
			return 0
		fi
	done
	return 1
}

LIB_BG_PIDS=""
bg() {
	"$@" &
	LIB_BG_PIDS="$LIB_BG_PIDS $!"
}
stop_bg() {
	for _p in $LIB_BG_PIDS; do kill "$_p" 2>/dev/null; done
	for _p in $LIB_BG_PIDS; do wait "$_p" 2>/dev/null; done
	LIB_BG_PIDS=""
}
