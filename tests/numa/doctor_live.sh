#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The real ingest-doctor run on this machine (tests/numa.cmake: func.numa.doctor_live).
# usage: doctor_live.sh PATH/TO/ingest-doctor
set -uo pipefail
DOCTOR=${1:?usage: doctor_live.sh ingest-doctor}
fail() { echo "doctor_live: FAIL: $*" >&2; exit 1; }
[ -x "$DOCTOR" ] || fail "$DOCTOR is not built"

dir=$(mktemp -d /tmp/ing-doctor-live-XXXXXX) || fail "mktemp"
trap 'rm -rf "$dir"' EXIT
"$DOCTOR" --data-dir "$dir/data" > "$dir/out.txt" 2> "$dir/err.txt"
rc=$?
cat "$dir/out.txt"
[ -s "$dir/err.txt" ] && { echo "--- stderr:"; cat "$dir/err.txt"; }
[ $rc = 0 ] || [ $rc = 1 ] || fail "exit status $rc (0 or 1 expected)"
for s in rdma memory storage numa cpu; do
	grep -qx "\[$s\]" "$dir/out.txt" || fail "section [$s] missing"
done
summary=$(grep -E '^summary: [0-9]+ PASS, [0-9]+ WARN, [0-9]+ FAIL' "$dir/out.txt") || fail "no summary line"
nfail=$(sed -E 's/^summary: [0-9]+ PASS, [0-9]+ WARN, ([0-9]+) FAIL.*/\1/' <<<"$summary")
lines=$(grep -c '^  FAIL ' "$dir/out.txt")
[ "$nfail" = "$lines" ] || fail "summary says $nfail FAIL, $lines FAIL lines"
if [ "$nfail" -gt 0 ]; then [ $rc = 1 ] || fail "$nfail FAIL but exit $rc"; else [ $rc = 0 ] || fail "no FAIL but exit $rc"; fi
# every WARN/FAIL line carries a fix
bad=$(awk '/^  (WARN|FAIL) /{want=1; next} want && !/^        fix: /{print "no fix after a WARN/FAIL line"; exit} {want=0}' "$dir/out.txt")
[ -z "$bad" ] || fail "$bad"

"$DOCTOR" --data-dir "$dir/data" --json > "$dir/out.json"
rcj=$?
[ $rcj = $rc ] || fail "--json exit $rcj, text exit $rc"
python3 - "$dir/out.json" "$nfail" <<'PY' || fail "JSON output invalid or inconsistent"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["summary"]["fail"] == int(sys.argv[2]), d["summary"]
assert {c["section"] for c in d["checks"]} >= {"rdma", "memory", "storage", "numa", "cpu"}
assert all(c["status"] in ("PASS", "WARN", "FAIL") for c in d["checks"])
PY
echo "doctor_live: OK ($summary, exit $rc)"
