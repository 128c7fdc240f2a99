#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# migrate.sh BUILD_DIR - a data dir written before frame ids were strings (catalog schema
# 1: INTEGER frame ids) is served after an upgrade, nothing misread:
#  1. ingestd stores 12 frames with numeric ids ("1".."12") on two wafers; stop it;
#  2. the catalog is turned back into schema 1 as the old ingestd wrote it (INTEGER
#     frame_id PRIMARY KEY), the files stay where they were;
#  3. restart (two persistence workers, each opening the catalog at once): it migrates,
#     says so in its log, every row is found by its decimal id (ingest-verify);
#  4. re-sending the same frames gives 12 duplicates (found, same crc), a frame with the
#     same id under a third wafer is a new frame, and a frame reusing an id with other
#     bytes is refused ERROR_DUPLICATE_CONFLICT.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

command -v sqlite3 >/dev/null || { echo "FAIL: sqlite3 (Debian sqlite3) not installed" >&2; exit 1; }
ing_test_setup review-migrate "${1:-}" ingest-send ingest-verify
DATA=$TMP/data
send() {   # WAFER FIRST COUNT SEED MANIFEST JSON
	timeout 60 "$SEND" --server "$SERVER" --transport grpc --count "$3" --size 100K --seed "$4" \
		--id-prefix "" --first-id "$2" --wafer "$1" --manifest "$5" --json --quiet >"$6"
}

step "ingestd stores frames 1..6 of wafer M-a and 7..12 of wafer M-b"
ing_start "$INGESTD" "$TMP/port" "$TMP/ingestd1.log" --data-dir "$DATA" --pool 1M:8 --workers 2
PID=$ING_PID SERVER=$ING_SERVER
send M-a 1 6 31 "$TMP/m-a" "$TMP/s1.json" || fail "first send"
send M-b 7 6 32 "$TMP/m-b" "$TMP/s2.json" || fail "second send"
ing_term_pid

step "turn the catalog back into schema 1 (INTEGER frame ids), as the old ingestd wrote it"
sqlite3 "$DATA/catalog.db" "
BEGIN;
CREATE TABLE old (frame_id INTEGER PRIMARY KEY, wafer_id TEXT NOT NULL, timestamp INTEGER,
  length INTEGER NOT NULL, crc32c INTEGER NOT NULL, path TEXT NOT NULL, transport INTEGER,
  received_ns INTEGER, durable_ns INTEGER);
INSERT INTO old SELECT CAST(frame_id AS INTEGER), wafer_id, timestamp, length, crc32c, path,
  transport, received_ns, durable_ns FROM frames;
DROP TABLE frames;
ALTER TABLE old RENAME TO frames;
CREATE INDEX frames_wafer ON frames(wafer_id);
PRAGMA user_version = 0;
COMMIT;" || fail "sqlite3"
[ "$(sqlite3 "$DATA/catalog.db" "SELECT type FROM pragma_table_info('frames') WHERE name='frame_id'")" = INTEGER ] ||
	fail "the test could not make a schema-1 catalog"

step "restart: the catalog is migrated, every frame found by its decimal id"
ing_start "$INGESTD" "$TMP/port" "$TMP/ingestd2.log" --data-dir "$DATA" --pool 1M:8 --workers 2 \
	--log-level info
PID=$ING_PID SERVER=$ING_SERVER
grep -q "catalog migrated to string frame ids (schema 1 -> 3, 12 rows)" "$TMP/ingestd2.log" ||
	fail "no migration line in the log"
[ "$(grep -c "catalog migrated" "$TMP/ingestd2.log")" = 1 ] || fail "migrated more than once"
timeout 60 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/m-a" || fail "ingest-verify M-a after the migration"
timeout 60 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/m-b" || fail "ingest-verify M-b after the migration"

step "re-send: 12 duplicates; id 3 under a new wafer is a new frame; id 4 with other bytes conflicts"
send M-a 1 6 31 "$TMP/m-a2" "$TMP/s3.json" || fail "re-send M-a"
send M-b 7 6 32 "$TMP/m-b2" "$TMP/s4.json" || fail "re-send M-b"
[ "$(json "$TMP/s3.json" duplicate)" = 6 ] && [ "$(json "$TMP/s4.json" duplicate)" = 6 ] ||
	fail "re-sent frames are not all duplicates: $(cat "$TMP/s3.json" "$TMP/s4.json")"
send M-c 3 1 33 "$TMP/m-c" "$TMP/s5.json" || fail "id 3 under wafer M-c"
[ "$(json "$TMP/s5.json" ok)" = 1 ] && [ "$(json "$TMP/s5.json" duplicate)" = 0 ] ||
	fail "id 3 under a new wafer was not stored as a new frame: $(cat "$TMP/s5.json")"
set +e
send M-a 4 1 99 "$TMP/m-x" "$TMP/s6.json" 2>"$TMP/s6.err"
rc=$?
set -e
[ $rc = 1 ] && [ "$(json "$TMP/s6.json" failed)" = 1 ] && grep -q "already stored" "$TMP/s6.err" ||
	fail "id 4 of M-a with other bytes was not refused as a conflict (exit $rc): $(cat "$TMP/s6.err")"
[ "$(sqlite3 "$DATA/catalog.db" "SELECT count(*) FROM frames")" = 13 ] || fail "catalog rows"
ing_term_pid
echo "migrate: all checks passed"
