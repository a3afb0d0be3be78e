#!/bin/sh
# lint_purity.sh BUILD: the purity check `make lint` runs (scripts/purity.py)
# passes on the tree and fails on a pure core that reads the clock, opens a
# socket, prints, or includes a shell header; comments and strings that name
# such calls do not count.
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
need python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM

python3 scripts/purity.py >"$T/tree.out" 2>&1 && ok tree_is_pure || { bad tree_is_pure; cat "$T/tree.out"; }

mkdir -p "$T/scripts" "$T/src/sched"
printf 'src/sched/*.c\n' >"$T/scripts/pure.txt"
cat >"$T/src/sched/core.c" <<'C'
/* core.c: mentions clock_gettime() and printf("x") in a comment only */
#include <string.h>
static const char *s = "socket(";
int core(int x) { return x + (int)strlen(s); }
C
python3 scripts/purity.py "$T" >/dev/null 2>&1 && ok comments_and_strings_ignored || bad comments_and_strings_ignored
for what in 'clock_gettime(0, 0)' 'socket(1, 2, 3)' 'printf("x")' 'pthread_create(0, 0, 0, 0)'; do
	printf '#include <string.h>\nvoid f(void) { %s; }\n' "$what" >"$T/src/sched/core.c"
	if python3 scripts/purity.py "$T" >"$T/out" 2>&1 || ! grep -q "core.c:2: calls" "$T/out"; then
		bad "finds $what"; cat "$T/out"
	else ok "finds ${what%%(*}"; fi
done
printf '#include <pthread.h>\nint f(void);\n' >"$T/src/sched/core.c"
python3 scripts/purity.py "$T" 2>&1 | grep -q "core.c:1: includes <pthread.h>" && ok finds_shell_header || bad finds_shell_header
checks_ok
