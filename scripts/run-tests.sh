#!/bin/sh
# run-tests.sh BUILD: run every test of iod and print "N passed, N failed, N skipped".
#
# Unit and sim programs (BUILD/san/tests/{unit,sim}/*) print one line per test
# and "RESULT p f s"; a program that dies without that line counts as one
# failure. Integration scripts (tests/integration/*.sh) either print RESULT
# lines or count by exit status (0 pass, 77 skip, else fail); integration
# programs (tests/integration/*.c, which fork real servers) run with them,
# not with the unit tests. Fuzz targets
# (BUILD/fuzz/fuzz_*) run IOD_FUZZ_SECONDS (default 5) each over a copy of
# their seed corpus with libFuzzer seed IOD_FUZZ_SEED (default 1, so a commit's
# smoke run explores the same inputs on every machine and main stays green
# reproducibly; IOD_FUZZ_SEED=0 picks a random seed, as `make fuzz` does for long
# campaigns). IOD_TEST_ONLY=unit|sim|integration|fuzz narrows the run.
# IOD_TEST_LOCK=FILE runs each integration script under flock FILE, so
# several checkouts on one machine do not start clusters at the same time.
set -u
BUILD=${1:-build}
ONLY=${IOD_TEST_ONLY:-}
FUZZ_SECONDS=${IOD_FUZZ_SECONDS:-5}
FUZZ_SEED=${IOD_FUZZ_SEED:-1}
TIMEOUT=${IOD_TEST_TIMEOUT:-300}
pass=0 fail=0 skip=0
failed_names=""
log=$(mktemp)
export IOD_BUILD="$BUILD"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# count NAME: add the RESULT line of $log, or one failure if there is none.
count() {
	name=$1 rc=$2
	res=$(grep '^RESULT ' "$log" | awk '{p+=$2; f+=$3; s+=$4} END {if (NR) print p, f, s}')
	if [ -n "$res" ]; then
		set -- $res
		pass=$((pass + $1)); fail=$((fail + $2)); skip=$((skip + $3))
		[ "$2" -gt 0 ] && failed_names="$failed_names $name"
		if [ "$rc" -ne 0 ] && [ "$2" -eq 0 ]; then
			fail=$((fail + 1)); failed_names="$failed_names $name(exit=$rc)"
		fi
	elif [ "$rc" -eq 0 ]; then
		pass=$((pass + 1))
	elif [ "$rc" -eq 77 ]; then
		skip=$((skip + 1))
	else
		fail=$((fail + 1)); failed_names="$failed_names $name(exit=$rc)"
	fi
}

# took NAME T0: one line with the seconds NAME ran, to find the slow ones
# (grep '^-- took' LOG | sort -k4 -n).
took() {
	echo "-- took $1 $(($(date +%s) - $2)) s"
}

run_prog() { # section path...
	section=$1; shift
	for t in "$@"; do
		[ -x "$t" ] || continue
		echo "== $section $(basename "$t")"
		t0=$(date +%s)
		timeout "$TIMEOUT" "$t" >"$log" 2>&1
		rc=$?
		grep -v '^RESULT ' "$log" | sed 's/^/  /'
		count "$(basename "$t")" "$rc"
		took "$(basename "$t")" "$t0"
	done
}

if [ -z "$ONLY" ] || [ "$ONLY" = unit ]; then
	run_prog unit "$BUILD"/san/tests/unit/test_*
fi
if [ -z "$ONLY" ] || [ "$ONLY" = sim ]; then
	run_prog sim "$BUILD"/san/tests/sim/test_*
fi
if [ -z "$ONLY" ] || [ "$ONLY" = integration ]; then
	for t in tests/integration/*.sh; do
		[ -f "$t" ] || continue
		[ "$(basename "$t")" = lib.sh ] && continue # sourced by the scripts
		echo "== integration $(basename "$t")"
		t0=$(date +%s)
		if [ -n "${IOD_TEST_LOCK:-}" ]; then
			flock "$IOD_TEST_LOCK" timeout "$TIMEOUT" sh "$t" "$BUILD" >"$log" 2>&1
		else
			timeout "$TIMEOUT" sh "$t" "$BUILD" >"$log" 2>&1
		fi
		rc=$?
		grep -v '^RESULT ' "$log" | sed 's/^/  /'
		count "$(basename "$t")" "$rc"
		took "$(basename "$t")" "$t0"
	done
	# programs that fork servers (tests/integration/*.c, built like unit tests)
	run_prog integration "$BUILD"/san/tests/integration/test_*
fi
if [ -z "$ONLY" ] || [ "$ONLY" = fuzz ]; then
	for f in "$BUILD"/fuzz/fuzz_*; do
		[ -x "$f" ] || continue
		name=$(basename "$f")
		echo "== fuzz $name (${FUZZ_SECONDS}s, seed $FUZZ_SEED)"
		work=$(mktemp -d)
		seed="tests/fuzz/corpus/${name#fuzz_}"
		[ -d "$seed" ] && cp -r "$seed"/. "$work"/ 2>/dev/null
		timeout $((FUZZ_SECONDS + 60)) "$f" -max_total_time="$FUZZ_SECONDS" -seed="$FUZZ_SEED" \
			-rss_limit_mb=2048 -artifact_prefix="$work/" "$work" >"$log" 2>&1
		rc=$?
		if [ "$rc" -eq 0 ]; then
			tail -1 "$log" | sed 's/^/  /'
			echo "ok   $name"
			pass=$((pass + 1))
		else
			tail -40 "$log" | sed 's/^/  /'
			echo "FAIL $name: crash input kept in $work"
			fail=$((fail + 1)); failed_names="$failed_names $name"
			continue
		fi
		rm -rf "$work"
	done
fi
rm -f "$log"
[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
