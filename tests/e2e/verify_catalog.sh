#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ingest-verify reads the catalog through the node's own catalog code (dataplane/store/,
# read-only), and still catches every catalog fault it did with its own SQL:
#  1. ingestd on loopback stores 6 frames; ingestd stops; ingest-verify passes and leaves
#     catalog.db byte for byte as it was, its WAL empty (read-only: no migration, no write);
#  2. on copies of the data dir, one row at a time made wrong: length, crc32c, path, row
#     deleted: ingest-verify exits 1 and names the frame and the fault;
#  3. --allow-missing: the deleted row counts as missing (exit 0), a wrong row still fails;
#  4. no catalog, and a file that is not a catalog: exit 1 (a runtime failure, not usage) with the reason.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

command -v python3 >/dev/null || { echo "FAIL: python3 not installed" >&2; exit 1; }
ing_test_setup e2e-verify-cat "${1:-}" ingest-send ingest-verify
DATA=$TMP/data

step "ingestd stores 6 frames"
ing_start "$INGESTD" "$TMP/port" "$TMP/ingestd.log" --data-dir "$DATA" --pool 1M:8 \
	--workers 1 --sink file --log-level info
PID=$ING_PID
SYNTH=(--count 6 --sizes 4K-256K --seed 7 --first-id 1 --wafer VC-w1)
timeout 60 "$SEND" --server "$ING_SERVER" --transport grpc "${SYNTH[@]}" \
	--manifest "$TMP/manifest" --json --quiet >"$TMP/send.json" || fail "ingest-send exited $?"
[ "$(json "$TMP/send.json" 'ok')" = 6 ] || fail "not 6 frames ok: $(cat "$TMP/send.json")"
kill -TERM "$PID"
for _ in $(seq 1 300); do
	kill -0 "$PID" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$PID" 2>/dev/null && fail "ingestd still running 30 s after SIGTERM"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" = 0 ] || fail "ingestd exited $rc after SIGTERM"

step "verify passes and does not write the catalog"
# (a WAL reader makes an empty -wal and a -shm index beside the file: SQLite's own)
before=$(sha256sum <"$DATA/catalog.db")
timeout 60 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/manifest" || fail "ingest-verify on good data"
after=$(sha256sum <"$DATA/catalog.db")
[ "$before" = "$after" ] || fail "ingest-verify changed catalog.db"
[ ! -s "$DATA/catalog.db-wal" ] || fail "ingest-verify wrote to the catalog's WAL"

victim=$(awk '!/^#/ { print $1; exit }' "$TMP/manifest")
wafer=$(awk '!/^#/ { print $2; exit }' "$TMP/manifest")
# corrupt <name> <sql>: a copy of the data dir with one statement applied to its catalog
corrupt() {
	rm -rf "$TMP/$1"
	cp -a "$DATA" "$TMP/$1"
	python3 - "$TMP/$1/catalog.db" "$2" "$wafer" "$victim" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute(sys.argv[2], (sys.argv[3], sys.argv[4])).rowcount
db.commit()
sys.exit(0 if n == 1 else 1)
PY
}
# expect_bad <dir> <message> [verify args]
expect_bad() {
	local d=$1 msg=$2
	shift 2
	rc=0
	timeout 60 "$VERIFY" --data-dir "$TMP/$d" --manifest "$TMP/manifest" --quiet "$@" \
		2>"$TMP/$d.err" || rc=$?
	[ "$rc" = 1 ] || fail "$d: ingest-verify exited $rc, expected 1 ($(cat "$TMP/$d.err"))"
	grep -q "frame $victim (wafer $wafer): $msg" "$TMP/$d.err" || \
		fail "$d: no '$msg' for frame $victim in: $(cat "$TMP/$d.err")"
	echo "$d: $(grep "frame $victim" "$TMP/$d.err" | head -n 1)"
}

step "a wrong row is caught, field by field"
corrupt len "UPDATE frames SET length = length + 1 WHERE wafer_id = ? AND frame_id = ?" || fail "corrupt len"
expect_bad len "catalog length"
corrupt crc "UPDATE frames SET crc32c = (crc32c + 1) % 4294967296 WHERE wafer_id = ? AND frame_id = ?" || fail "corrupt crc"
expect_bad crc "catalog crc32c"
corrupt path "UPDATE frames SET path = 'frames/elsewhere/x.frame' WHERE wafer_id = ? AND frame_id = ?" || fail "corrupt path"
expect_bad path "catalog path 'frames/elsewhere/x.frame'"
corrupt gone "DELETE FROM frames WHERE wafer_id = ? AND frame_id = ?" || fail "corrupt gone"
expect_bad gone "no catalog row"

step "--allow-missing: a missing row is missing, a wrong row is still bad"
timeout 60 "$VERIFY" --data-dir "$TMP/gone" --manifest "$TMP/manifest" --allow-missing --json \
	>"$TMP/gone.json" 2>"$TMP/gone-am.err" || fail "--allow-missing with a missing row exited $?"
[ "$(json "$TMP/gone.json" 'missing')" = 1 ] || fail "missing is not 1: $(cat "$TMP/gone.json")"
[ "$(json "$TMP/gone.json" 'ok')" = 5 ] || fail "ok is not 5: $(cat "$TMP/gone.json")"
expect_bad crc "catalog crc32c" --allow-missing

step "no catalog / not a catalog: exit 1 (runtime, not usage) with the reason"
rm -rf "$TMP/nocat" && cp -a "$DATA" "$TMP/nocat" && rm -f "$TMP/nocat"/catalog.db*
rc=0
"$VERIFY" --data-dir "$TMP/nocat" --manifest "$TMP/manifest" 2>"$TMP/nocat.err" || rc=$?
[ "$rc" = 1 ] || fail "without catalog.db: exit $rc, expected 1"
grep -q "catalog.db" "$TMP/nocat.err" || fail "without catalog.db: no reason given: $(cat "$TMP/nocat.err")"
python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('create table t(x)')" "$TMP/nocat/catalog.db"
rc=0
"$VERIFY" --data-dir "$TMP/nocat" --manifest "$TMP/manifest" 2>"$TMP/notcat.err" || rc=$?
[ "$rc" = 1 ] || fail "a database without a frames table: exit $rc, expected 1"
grep -q "no frames table" "$TMP/notcat.err" || fail "not a catalog: no reason given: $(cat "$TMP/notcat.err")"
echo "verify_catalog: PASS"
