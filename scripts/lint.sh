#!/bin/sh
# lint.sh: the checks `make lint` runs: clang-format (the checked-in
# .clang-format), cppcheck, no GNU `?:`, and the purity of the pure cores (purity.py). Prints nothing but findings; exits non-zero on any.
set -u
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.h')
rc=0
fmt=$(mktemp /tmp/iod-lint-format.XXXXXX)
trap 'rm -f "$fmt"' EXIT
if ! clang-format --dry-run -Werror $files 2>"$fmt"; then
	grep -E '^[^ ].*: (error|warning)' "$fmt" | head -40
	echo "lint: clang-format differences (run \`make format\` to fix)"
	rc=1
fi
if ! cppcheck --quiet --error-exitcode=1 --std=c11 --enable=warning,portability \
	--inline-suppr --suppress=missingIncludeSystem -Iinclude -Isrc \
	-D__GNUC__ -DIOD_VERSION='"lint"' src tests bench 2>&1; then
	echo "lint: cppcheck findings"
	rc=1
fi
# no GNU `?:` (STYLE.md: C11; the shorthand hides a second evaluation rule).
# Matches `?:` outside string literals, after the literals are blanked.
elvis=$(sed -E 's/"([^"\\]|\\.)*"/""/g' $files | grep -n -E '[]A-Za-z0-9_)][[:space:]]*\?[[:space:]]*:' | head -5)
if [ -n "$elvis" ]; then
	for f in $files; do
		sed -E 's/"([^"\\]|\\.)*"/""/g' "$f" | grep -n -E '[]A-Za-z0-9_)][[:space:]]*\?[[:space:]]*:' |
			sed "s|^|$f:|" | head -5
	done
	echo "lint: GNU '?:' found (write 'x ? x : y')"
	rc=1
fi
# pure cores stay pure (scripts/pure.txt, scripts/purity.py)
if ! python3 scripts/purity.py; then
	rc=1
fi
[ $rc -eq 0 ] && echo "lint: clean"
exit $rc
