#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# catalog_recovery.sh BUILD_DIR - a damaged catalog.db, as an operator meets it and mends it
# (docs/OPERATIONS.md, Catalog recovery):
#  1. frames stored under plain, escaped (space, '/', non-ASCII) and shortened (an id
#     whose escaped name passes 200 bytes) names; ingest-catalog check: consistent;
#  2. catalog.db overwritten at its start ("file is not a database"): ingestd refuses to
#     start (exit 1) with the fix as its last line; check says the same (exit 1);
#     ingest-catalog rebuild refuses while an ingestd runs on the dir (exit 1, untouched);
#  3. rebuild: every plain and escaped name catalogued with its ids, CRC-32C recomputed,
#     the shortened one listed as not catalogued (its id is not in its name), exit 1; the
#     damaged file kept; ingest-verify passes the manifests; ingestd starts again, a
#     re-sent frame is a duplicate, a new one is stored; check: consistent;
#  4. a catalog that lost rows (still readable): check names the mismatch; rebuild takes
#     the shortened name's id and every timestamp from the old rows (exit 0), and a frame
#     file damaged after it was stored keeps its acknowledged CRC, is reported (exit 1)
#     and ingest-verify catches it;
#  5. as root on a data dir owned by another user: the new catalog.db is that user's.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
NAME=ops-catalog
. "$(dirname "$0")/catalog_lib.sh"
LONG=$(printf 'ü%.0s' $(seq 1 60))   # 120 bytes; escaped 360: a shortened file name

step "1. frames under plain, escaped and shortened names"
start
send --count 5 --size 100K --wafer w-plain --manifest "$T/m1" || fail "send 1"
send --count 3 --size 60K --wafer "wafer 12/x" --id-prefix "fr é/" --manifest "$T/m2" || fail "send 2"
send --count 1 --size 30K --wafer w-long --id-prefix "$LONG" --manifest "$T/m3" || fail "send 3"
ing_term_pid
ls "$D/frames/w-long" | grep -q '~' || fail "no shortened file name under w-long: $(ls "$D/frames/w-long")"
"$CAT" check --data-dir "$D" >"$T/check" || fail "check of a good catalog: $(cat "$T/check")"
grep -q 'quick_check ok, 9 rows, 9 frame files' "$T/check" || fail "check: $(cat "$T/check")"
ts_before=$(q "SELECT timestamp FROM frames WHERE wafer_id='w-plain' AND frame_id='frame-2'")

step "2. catalog.db overwritten at its start"
cp "$D/catalog.db" "$T/catalog.good"
dd if=/dev/urandom of="$D/catalog.db" bs=100 count=1 conv=notrunc status=none
rc=0
timeout 60 "$INGESTD" --listen 127.0.0.1:0 --data-dir "$D" --pool 1M:8 --workers 1 >"$T/refused.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "ingestd on a damaged catalog exited $rc, want 1"
last=$(tail -n 1 "$T/refused.log")
echo "ingestd's last line: $last"
grep -q "catalog.db is damaged (file is not a database): stop ingestd, then rebuild it from the frame files: ingest-catalog rebuild --data-dir $D" <<<"$last" ||
	fail "ingestd's last line does not give the fix: $last"
rc=0
"$CAT" check --data-dir "$D" >"$T/check" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "ingest-catalog rebuild --data-dir $D" "$T/check" || fail "check of a damaged catalog: exit $rc: $(cat "$T/check")"
cp "$T/catalog.good" "$T/catalog.keep"
cp "$D/catalog.db" "$T/catalog.damaged"
# a running ingestd owns the dir: rebuild refuses and touches nothing (a good catalog for it)
cp "$T/catalog.good" "$D/catalog.db"
start
rc=0
"$CAT" rebuild --data-dir "$D" >"$T/rb" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "in use by another ingestd (pid $PID): stop it first" "$T/rb" || fail "rebuild beside a running ingestd: exit $rc: $(cat "$T/rb")"
ing_term_pid
if ls "$D" | grep -q damaged; then fail "a refused rebuild moved the catalog"; fi
cp "$T/catalog.damaged" "$D/catalog.db"
rm -f "$D/catalog.db-wal" "$D/catalog.db-shm"

step "3. ingest-catalog rebuild"
rc=0
"$CAT" rebuild --data-dir "$D" >"$T/rb" 2>&1 || rc=$?
cat "$T/rb"
[ "$rc" = 1 ] || fail "rebuild with an uncatalogued shortened name exited $rc, want 1"
grep -q "rebuilt $D/catalog.db: 8 of 9 frame files catalogued" "$T/rb" || fail "rebuild summary"
grep -q "frames/w-long/.*not catalogued: its name is shortened" "$T/rb" || fail "the shortened name is not listed"
kept=$(ls "$D" | grep '^catalog.db.damaged-') || fail "the damaged catalog was not kept"
cmp -s "$D/$kept" "$T/catalog.damaged" || fail "the kept file is not the damaged catalog"
timeout 60 "$VERIFY" --data-dir "$D" --manifest "$T/m1" --quiet || fail "verify m1 after the rebuild"
timeout 60 "$VERIFY" --data-dir "$D" --manifest "$T/m2" --quiet || fail "verify m2 (escaped ids) after the rebuild"
[ "$(q "SELECT count(*) FROM frames WHERE wafer_id='wafer 12/x' AND frame_id LIKE 'fr é/%'")" = 3 ] ||
	fail "the escaped ids did not come back: $(q 'SELECT wafer_id, frame_id FROM frames')"
start
send --count 5 --size 100K --wafer w-plain --json >"$T/dup.json" || fail "re-send"
[ "$(json "$T/dup.json" 'duplicate')" = 5 ] || fail "a re-sent frame is not a duplicate after the rebuild: $(cat "$T/dup.json")"
send --count 1 --size 100K --wafer w-new || fail "a new frame after the rebuild"
ing_term_pid
rm -f "$D/frames/w-long/"*   # left out above; the next check compares rows and files
rmdir "$D/frames/w-long"
"$CAT" check --data-dir "$D" >"$T/check" || fail "check after the rebuild: $(cat "$T/check")"
rm -f "$D"/catalog.db.damaged-*

step "4. a readable catalog that lost rows; a file damaged after it was stored"
rm -rf "$D"
start
send --count 5 --size 100K --wafer w-plain --manifest "$T/m1" || fail "send 1 (again)"
send --count 1 --size 30K --wafer w-long --id-prefix "$LONG" --manifest "$T/m3" || fail "send 3 (again)"
ing_term_pid
ts_before=$(q "SELECT timestamp FROM frames WHERE wafer_id='w-plain' AND frame_id='frame-2'")
q "DELETE FROM frames WHERE frame_id IN ('frame-4', 'frame-5')"
rc=0
"$CAT" check --data-dir "$D" >"$T/check" || rc=$?
[ "$rc" = 1 ] && grep -q "4 rows with a local copy for 6 frame files" "$T/check" || fail "check of a catalog that lost rows: $(cat "$T/check")"
f3=$D/frames/w-plain/frame-3.frame
printf 'X' | dd of="$f3" bs=1 seek=1000 conv=notrunc status=none
rc=0
"$CAT" rebuild --data-dir "$D" >"$T/rb" 2>&1 || rc=$?
cat "$T/rb"
[ "$rc" = 1 ] || fail "rebuild with a damaged file exited $rc, want 1"
grep -q "6 of 6 frame files catalogued.*ids: 5 from file names, 1 from the old catalog's 4 readable rows" "$T/rb" ||
	fail "rebuild summary (salvaged ids)"
grep -q "frame-3.frame: CRC-32C 0x[0-9a-f]*, the old catalog had 0x[0-9a-f]*: the file was damaged" "$T/rb" || fail "the damaged file is not named"
grep -q "1 files differ from the CRC-32C acknowledged" "$T/rb" || fail "the damaged file is not counted"
[ "$(q "SELECT timestamp FROM frames WHERE wafer_id='w-plain' AND frame_id='frame-2'")" = "$ts_before" ] ||
	fail "the producer's timestamp did not survive the rebuild"
[ "$(q "SELECT count(*) FROM frames WHERE wafer_id='w-long' AND frame_id='${LONG}1'")" = 1 ] ||
	fail "the shortened name's id was not taken from the old catalog"
rc=0
timeout 60 "$VERIFY" --data-dir "$D" --manifest "$T/m1" >"$T/v" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "frame-3" "$T/v" || fail "ingest-verify does not catch the damaged frame-3: exit $rc: $(cat "$T/v")"
timeout 60 "$VERIFY" --data-dir "$D" --manifest "$T/m3" --quiet || fail "verify m3 (shortened name) after the rebuild"

step "5. as root, a data dir of another user"
if [ "$(id -u)" = 0 ] && getent passwd nobody >/dev/null; then
	chown -R nobody "$D"
	"$CAT" rebuild --data-dir "$D" >"$T/rb" 2>&1 || true
	[ "$(stat -c %U "$D/catalog.db")" = nobody ] || fail "the rebuilt catalog belongs to $(stat -c %U "$D/catalog.db"), not the data dir's owner"
	echo "ok: the rebuilt catalog.db belongs to nobody, the data dir's owner"
else
	echo "(not root: the ownership case needs root; the rest ran)"
fi
echo "PASS: catalog recovery"
