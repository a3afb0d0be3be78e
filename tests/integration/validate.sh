#!/bin/sh
# validate.sh BUILD: `iod validate` end to end: the examples validate, the
# JSON output is itself a valid spec that normalizes to the same JSON, and
# broken specs exit 2 with file:line:col diagnostics on stderr only.
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
IOD="${1:-build}/iod"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for f in examples/*.yaml; do
	if "$IOD" validate -f "$f" >"$tmp/out" 2>"$tmp/err" && grep -q "valid" "$tmp/out" &&
		[ ! -s "$tmp/err" ]; then ok "text $f"; else bad "text $f"; fi
	if "$IOD" validate -f "$f" -o json >"$tmp/a.json" &&
		"$IOD" validate -f - -o json <"$tmp/a.json" >"$tmp/b.json" &&
		cmp -s "$tmp/a.json" "$tmp/b.json"; then ok "json round trip $f"; else bad "json round trip $f"; fi
done

"$IOD" validate -f examples/service-topology.yaml -o json >"$tmp/seed.json"
if grep -q '"mem_bytes": 32000000000' "$tmp/seed.json" && grep -q '"replicas": 8' "$tmp/seed.json"
then ok "seed json in base units"; else bad "seed json in base units"; fi

printf 'services:\n  - name: a\n    type: statefull\n    replica: 3\n' >"$tmp/bad.yaml"
"$IOD" validate -f "$tmp/bad.yaml" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] &&
	grep -q "^$tmp/bad.yaml:3:11: .*did you mean \"stateful\"" "$tmp/err" &&
	grep -q "^$tmp/bad.yaml:4:5: .*did you mean \"replicas\"" "$tmp/err" &&
	grep -q "invalid spec (2 errors)" "$tmp/err"
then ok "invalid spec exits 2 with positions"; else bad "invalid spec exits 2 (rc=$rc)"; cat "$tmp/err"; fi

printf 'services: [\n' | "$IOD" validate -f - 2>"$tmp/err" >/dev/null
rc=$?
if [ $rc -eq 2 ] && grep -q "^<stdin>:2:1: YAML syntax error" "$tmp/err"
then ok "syntax error on stdin"; else bad "syntax error on stdin (rc=$rc)"; cat "$tmp/err"; fi

"$IOD" validate -f "$tmp/nonexistent.yaml" 2>"$tmp/err" >/dev/null
rc=$?
if [ $rc -eq 2 ] && grep -q "No such file" "$tmp/err"; then ok "missing file exits 2"; else bad "missing file (rc=$rc)"; fi

"$IOD" validate >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && ok "no -f exits 2" || bad "no -f (rc=$rc)"
"$IOD" validate -f examples/resources.yaml -o yaml >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "text json" "$tmp/err" && ok "bad -o exits 2" || bad "bad -o (rc=$rc)"
"$IOD" validate --bogus >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && ok "unknown option exits 2" || bad "unknown option (rc=$rc)"
"$IOD" validate --help | grep -q "usage: iod validate" && ok "--help" || bad "--help"
"$IOD" help validate | grep -q "usage: iod validate" && ok "iod help validate" || bad "iod help validate"
out=$("$IOD" validate -q -f examples/full-topology.yaml); rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] && ok "-q is quiet" || bad "-q (rc=$rc)"

checks_ok
