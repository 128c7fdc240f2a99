#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# prune.sh BUILD_DIR - retention without a tier (ingest-catalog prune), as an operator runs it
# from cron beside a running node (docs/OPERATIONS.md, Retention and backup):
#  1. frames of three wafers, some made 40 days old in the catalog (durable_ns): --dry-run
#     counts them and deletes nothing;
#  2. beside a running ingestd: --wafer W --older-than 30d deletes only that wafer's old
#     frames, row and file; then every old frame; the recent ones stay; the node still
#     serves: a pruned frame is not found by ingest-get, a kept one comes back byte for byte;
#     ingestd stops with exit 0, check is consistent, ingest-verify passes the kept frames;
#  3. crash safety: prune killed (SIGKILL) as soon as its journal appears: check names the
#     interrupted prune and its fix, the next prune finishes it; whatever the moment of the
#     kill, rows and files agree and every old frame is gone;
#  4. a journal left before the rows' transaction committed (rows and files still there):
#     the next prune deletes both; rebuild deletes a journal's files before it rebuilds;
#  5. usage errors: prune without --older-than, an age without a unit, --dry-run with check;
#  6. with an object store tier (ingestd --tier, the store refusing connections: frames stay
#     queued, not verified) and a high-water mark: prune keeps and names the unverified
#     frames; the node refuses at its mark, and --include-unverified deletes them with their
#     queued uploads, after which the node takes frames again (it measures again within a
#     second); frames in the store (both, tiered: set in the catalog as the tier would) are
#     kept and named, --forget-in-store deletes them; check: the tier's counts against the
#     rows, a drifted count and a local frame not queued (exit 1, the fix: restart ingestd,
#     which mends both), an upload queued for a frame no longer in the catalog (a note;
#     ingestd drops it at start); rebuild: the tier's counts right again at the next start,
#     /metrics' local bytes the files on disk.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
NAME=ops-prune
. "$(dirname "$0")/catalog_lib.sh"
ing_need_built "$GET"
PRUNE=
CLEANUP_EXTRA='[ -z "$PRUNE" ] || kill -KILL "$PRUNE" 2>/dev/null || true'
files() { find "$D/frames/$1" -name '*.frame' 2>/dev/null | wc -l; }
rows() { q "SELECT count(*) FROM frames WHERE wafer_id = '$1'"; }
# age WAFER [MAX_ID]: make the wafer's frames (ids frame-1..MAX_ID) 40 days old
age() {
	q "UPDATE frames SET durable_ns = durable_ns - 40 * 86400 * 1000000000 WHERE wafer_id = '$1'
	   AND CAST(substr(frame_id, 7) AS INTEGER) <= ${2:-999999}"
}
# consistent: every row's file is there (or the row is tiered), every file has its row
consistent() {
	local r f
	r=$(q "SELECT count(*) FROM frames WHERE location <> 'tiered'")
	f=$(find "$D/frames" -name '*.frame' | wc -l)
	[ "$r" = "$f" ] || fail "$1: $r rows with a local copy, $f frame files"
	q "SELECT path FROM frames WHERE location <> 'tiered'" | while read -r p; do [ -f "$D/$p" ] || fail "$1: row $p without its file"; done
	"$CAT" check --data-dir "$D" >"$T/check" || fail "$1: check: $(cat "$T/check")"
}

step "1. three wafers, some frames 40 days old; --dry-run deletes nothing"
start
send --count 30 --sizes 4K-64K --wafer P-old --first-id 1
send --count 40 --sizes 4K-64K --wafer P-mix --first-id 1
send --count 20 --sizes 4K-64K --wafer P-new --first-id 1 --manifest "$T/new.m"
age P-old
age P-mix 20
"$CAT" prune --data-dir "$D" --older-than 30d --dry-run >"$T/out" || fail "dry-run: $(cat "$T/out")"
cat "$T/out"
grep -q "would delete 50 frames (.* MiB) of 2 wafers, DURABLE before .*; nothing deleted" "$T/out" ||
	fail "dry-run: $(cat "$T/out")"
[ "$(q 'SELECT count(*) FROM frames')" = 90 ] && [ "$(files P-old)" = 30 ] || fail "the dry run deleted something"
"$CAT" prune --data-dir "$D" --older-than 30d --wafer P-mix --dry-run --json >"$T/out"
[ "$(json "$T/out" frames)" = 20 ] && [ "$(json "$T/out" dryRun)" = True ] || fail "dry-run --json: $(cat "$T/out")"

step "2. beside a running ingestd: one wafer, then everything old"
"$CAT" prune --data-dir "$D" --older-than 30d --wafer P-mix >"$T/out" || fail "prune --wafer: $(cat "$T/out")"
cat "$T/out"
grep -q "deleted 20 frames (.*, 20 files) DURABLE before .*, wafer P-mix (beside a running ingestd)" "$T/out" ||
	fail "prune --wafer: $(cat "$T/out")"
[ "$(rows P-mix)" = 20 ] && [ "$(files P-mix)" = 20 ] || fail "P-mix: $(rows P-mix) rows, $(files P-mix) files, want 20"
[ "$(q "SELECT min(CAST(substr(frame_id, 7) AS INTEGER)) FROM frames WHERE wafer_id = 'P-mix'")" = 21 ] ||
	fail "P-mix: a recent frame was deleted"
[ "$(rows P-old)" = 30 ] && [ "$(files P-old)" = 30 ] || fail "--wafer P-mix touched P-old"
"$CAT" prune --data-dir "$D" --older-than 30d --json >"$T/out" || fail "prune: $(cat "$T/out")"
cat "$T/out"
[ "$(json "$T/out" frames)" = 30 ] && [ "$(json "$T/out" files)" = 30 ] && [ "$(json "$T/out" ingestdRunning)" = True ] ||
	fail "prune --json: $(cat "$T/out")"
[ "$(rows P-old)" = 0 ] && [ "$(files P-old)" = 0 ] || fail "P-old: $(rows P-old) rows, $(files P-old) files left"
[ "$(rows P-new)" = 20 ] && [ "$(rows P-mix)" = 20 ] || fail "recent frames were deleted"
rc=0
timeout 60 "$GET" --server "$ING_SERVER" --wafer P-old --frame frame-3 --out "$T/gone" 2>"$T/err" || rc=$?
[ "$rc" = 1 ] && grep -q "not found" "$T/err" || fail "ingest-get of a pruned frame: exit $rc: $(cat "$T/err")"
timeout 60 "$GET" --server "$ING_SERVER" --wafer P-new --frame frame-3 --out "$T/kept" --quiet || fail "ingest-get of a kept frame"
cmp "$T/kept" "$D/frames/P-new/frame-3.frame" || fail "the kept frame differs from its file"
send --count 1 --size 4K --wafer P-old --first-id 3   # a pruned frame re-sent: stored again
[ "$(rows P-old)" = 1 ] && [ "$(files P-old)" = 1 ] || fail "a re-sent pruned frame was not stored again"
ing_term_pid
consistent "after the prunes"
"$VERIFY" --data-dir "$D" --manifest "$T/new.m" --quiet || fail "ingest-verify of the kept frames"
echo "ok: $(cat "$T/check")"

step "3. prune killed mid-way (SIGKILL as its journal appears), then run again"
start
send --count 1500 --size 4K --wafer K --first-id 1
ing_term_pid
age K
"$CAT" prune --data-dir "$D" --older-than 30d >"$T/killed.out" 2>&1 &
PRUNE=$!
for _ in $(seq 1 3000); do
	[ -e "$D/prune.journal" ] && break
	kill -0 "$PRUNE" 2>/dev/null || break
	sleep 0.01
done
kill -KILL "$PRUNE" 2>/dev/null || true
wait "$PRUNE" 2>/dev/null || true
PRUNE=
echo "killed with $(rows K) of 1500 rows and $(files K) files of wafer K left"
if [ -e "$D/prune.journal" ]; then
	rc=0
	"$CAT" check --data-dir "$D" >"$T/out" || rc=$?
	[ "$rc" = 1 ] && grep -q "an interrupted prune .*finish it: ingest-catalog prune --data-dir .* --older-than 36500d" "$T/out" ||
		fail "check with a journal: exit $rc: $(cat "$T/out")"
	echo "ok: $(cat "$T/out")"
	"$CAT" prune --data-dir "$D" --older-than 36500d >"$T/out" || fail "finishing: $(cat "$T/out")"
	grep -q "finished an interrupted prune" "$T/out" || fail "no word of the interrupted prune: $(cat "$T/out")"
	[ ! -e "$D/prune.journal" ] || fail "the journal is still there"
fi
consistent "after the killed prune was finished"
"$CAT" prune --data-dir "$D" --older-than 30d >"$T/out" || fail "prune after the kill: $(cat "$T/out")"
[ "$(rows K)" = 0 ] && [ "$(files K)" = 0 ] || fail "wafer K: $(rows K) rows, $(files K) files left"
[ ! -d "$D/frames/K" ] || fail "the emptied wafer's directory is still there (no ingestd was running)"
consistent "after the second prune"
echo "ok: every old frame gone, rows and files agree: $(cat "$T/check")"

step "4. a journal from before the rows' commit; rebuild with a journal"
for i in 21 22; do printf 'P-mix\tframe-%s\tframes/P-mix/frame-%s.frame\t0\n' $i $i; done >"$D/prune.journal"
"$CAT" prune --data-dir "$D" --older-than 36500d >"$T/out" || fail "$(cat "$T/out")"
grep -q "finished an interrupted prune: 2 frames" "$T/out" || fail "$(cat "$T/out")"
[ "$(rows P-mix)" = 18 ] && [ "$(files P-mix)" = 18 ] || fail "P-mix: $(rows P-mix) rows, $(files P-mix) files, want 18"
consistent "after a journal whose rows were still there"
printf 'P-mix\tframe-23\tframes/P-mix/frame-23.frame\t0\n' >"$D/prune.journal"
"$CAT" rebuild --data-dir "$D" >"$T/out" || fail "rebuild: $(cat "$T/out")"
grep -q "finished an interrupted prune first: 1 frame files deleted" "$T/out" || fail "rebuild: $(cat "$T/out")"
[ "$(rows P-mix)" = 17 ] && [ "$(files P-mix)" = 17 ] || fail "after rebuild: $(rows P-mix) rows, $(files P-mix) files"
consistent "after rebuild"
echo "ok: journals finished by prune and by rebuild"

step "5. usage errors"
for a in "prune --data-dir $D|prune needs --older-than AGE" \
	 "prune --data-dir $D --older-than 30|--older-than: '30' is not an age with a unit" \
	 "check --data-dir $D --dry-run|--older-than, --wafer, --dry-run, --include-unverified and --forget-in-store go with prune" \
	 "prune --data-dir $D --older-than 1d --wafer|--wafer needs a value"; do
	rc=0
	# shellcheck disable=SC2086
	"$CAT" ${a%%|*} >"$T/out" 2>&1 || rc=$?
	[ "$rc" = 2 ] && [ "$(wc -l <"$T/out")" = 1 ] && grep -qF -- "${a#*|}" "$T/out" ||
		fail "ingest-catalog ${a%%|*}: exit $rc: $(cat "$T/out")"
	echo "ok: $(cat "$T/out")"
done

step "6. with an object store tier: what prune keeps and why; check and rebuild of the tier's tables"
# a store that refuses connections: a port held bound and never listening (no network)
python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1], flush=True); time.sleep(3600)' >"$T/store.port" &
HOLDER=$!
CLEANUP_EXTRA="$CLEANUP_EXTRA; kill $HOLDER 2>/dev/null || true"
wait_for "a port held for the store" 60 test -s "$T/store.port"
(umask 077; printf 'access_key = K\nsecret_key = S\n' >"$T/creds")
bytes_on_disk() { find "$D/frames" -name '*.frame' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
# the mark: what is stored now, 20 frames of 64 KiB and half of one more
MARK=$(($(bytes_on_disk) + 20 * 65536 + 32768))
TIER=(--tier "s3://127.0.0.1:$(cat "$T/store.port")/frames" --tier-credentials "$T/creds"
      --local-high-water "$MARK" --metrics-listen 127.0.0.1:0 --metrics-port-file "$T/mport")
# tier_start: ingestd with the tier, its /metrics in METRICS
tier_start() {
	rm -f "$T/mport"
	start "${TIER[@]}"
	ing_metrics_url "$T/mport"
	METRICS=$ING_METRICS
}
tier_start
# metric NAME: its value on /metrics; local_bytes_are_files: the node's count of local bytes
# (what the mark holds to) reaches the files on disk (a cap for a hang: it measures each second)
metric() { curl -sf --max-time 10 "$METRICS" | awk -v n="$1" '$1 == n { print $2 }'; }
local_bytes_are_files() {
	local want i
	want=$(bytes_on_disk)
	for i in $(seq 1 600); do
		[ "$(metric ingest_tier_local_bytes)" = "$want" ] && return 0
		sleep 0.1
	done
	fail "$1: /metrics ingest_tier_local_bytes $(metric ingest_tier_local_bytes), $want bytes of frame files"
}
queued() { q "SELECT count(*) FROM tier_outbox WHERE wafer_id = '$1'"; }
# tier_set_up: the node's tier thread has set up its tables (its first step; a cap for a hang)
tier_set_up() {
	for _ in $(seq 1 600); do
		grep -q "tier .*catalog: [0-9]* frames local" "$T/ingestd.log" && return 0
		sleep 0.1
	done
	fail "the tier did not set up its tables"
}
send --count 20 --size 64K --wafer T1 --first-id 1
age T1
[ "$(queued T1)" = 20 ] || fail "T1: $(queued T1) frames queued for the store, want 20"
local_bytes_are_files "20 frames in"
rc=0
send --count 1 --size 64K --wafer T2 --first-id 1 >"$T/out" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "storage full.*--local-high-water.*retryable" "$T/out" ||
	fail "a frame past the mark: exit $rc: $(tail -2 "$T/out")"
"$CAT" prune --data-dir "$D" --older-than 30d --dry-run --json >"$T/out"
[ "$(json "$T/out" frames)" = 0 ] && [ "$(json "$T/out" keptUnverified)" = 20 ] ||
	fail "dry-run with the store down: $(cat "$T/out")"
"$CAT" prune --data-dir "$D" --older-than 30d >"$T/out" || fail "prune: $(cat "$T/out")"
cat "$T/out"
grep -q "deleted 0 frames" "$T/out" &&
	grep -q "kept 20 frames (1.2 MiB) queued for the object store and not verified there: their local copy is their only one. They are in the tier's backlog .*--include-unverified" "$T/out" ||
	fail "prune with the store down: $(cat "$T/out")"
[ "$(rows T1)" = 20 ] && [ "$(files T1)" = 20 ] && [ "$(queued T1)" = 20 ] || fail "T1 touched by the prune"
# the store is gone for good: the operator drops what it never got
"$CAT" prune --data-dir "$D" --older-than 30d --include-unverified --json >"$T/out" || fail "$(cat "$T/out")"
[ "$(json "$T/out" frames)" = 20 ] && [ "$(json "$T/out" files)" = 20 ] && [ "$(json "$T/out" uploadsDropped)" = 20 ] ||
	fail "prune --include-unverified: $(cat "$T/out")"
[ "$(rows T1)" = 0 ] && [ "$(files T1)" = 0 ] && [ "$(queued T1)" = 0 ] || fail "T1 left: rows, files or uploads"
local_bytes_are_files "after --include-unverified"
# the node, refusing at its mark with nothing finishing, takes frames again
for i in $(seq 1 60); do
	send --count 10 --size 64K --wafer T2 --first-id 1 >"$T/out" 2>&1 && break
	grep -q "storage full.*retryable" "$T/out" || fail "T2: $(tail -2 "$T/out")"
	sleep 1
done
[ "$(rows T2)" = 10 ] || fail "the node still refuses frames after the prune made room: $(tail -2 "$T/out")"
echo "ok: unverified frames kept and named; --include-unverified deleted them and their uploads; the node took frames again"

# frames in the store, as the tier leaves them: 1-3 both (verified, local copy kept), 4-6
# tiered (local copy deleted)
age T2
q "BEGIN; UPDATE frames SET location = 'both', object_md5 = '00112233445566778899aabbccddeeff',
     tiered_ns = durable_ns WHERE wafer_id = 'T2' AND frame_id IN ('frame-1', 'frame-2', 'frame-3');
   UPDATE frames SET location = 'tiered', object_md5 = '00112233445566778899aabbccddeeff',
     tiered_ns = durable_ns WHERE wafer_id = 'T2' AND frame_id IN ('frame-4', 'frame-5', 'frame-6');
   DELETE FROM tier_outbox WHERE wafer_id = 'T2' AND frame_id IN ('frame-1', 'frame-2', 'frame-3',
     'frame-4', 'frame-5', 'frame-6'); COMMIT;"
rm "$D"/frames/T2/frame-[456].frame
"$CAT" check --data-dir "$D" >"$T/check" || fail "check with a tier: $(cat "$T/check")"
grep -q "object store tier: .* 3 both, 3 only in the store; the tier's counts match the rows" "$T/check" ||
	fail "check does not show the tier: $(cat "$T/check")"
"$CAT" prune --data-dir "$D" --older-than 30d >"$T/out" || fail "$(cat "$T/out")"
cat "$T/out"
grep -q "deleted 0 frames" "$T/out" && grep -q "kept 4 frames (0.2 MiB) queued for the object store" "$T/out" &&
	grep -q "kept 6 frames verified in the object store (3 of them with a local copy, 0.2 MiB): their catalog row is how ingest-get .*--forget-in-store" "$T/out" ||
	fail "prune beside frames in the store: $(cat "$T/out")"
"$CAT" prune --data-dir "$D" --older-than 30d --forget-in-store --json >"$T/out" || fail "$(cat "$T/out")"
[ "$(json "$T/out" frames)" = 6 ] && [ "$(json "$T/out" files)" = 3 ] && [ "$(json "$T/out" keptUnverified)" = 4 ] &&
	[ "$(json "$T/out" keptInStore)" = 0 ] || fail "prune --forget-in-store: $(cat "$T/out")"
[ "$(rows T2)" = 4 ] && [ "$(files T2)" = 4 ] && [ "$(queued T2)" = 4 ] || fail "T2: $(rows T2) rows, $(files T2) files"
local_bytes_are_files "after --forget-in-store"
echo "ok: frames in the store kept and named; --forget-in-store deleted their rows and local copies"

# check: an upload queued for a frame no longer in the catalog (as a prune that did not know
# the tier left them) is a note; the node drops it at start
q "INSERT INTO tier_outbox (wafer_id, frame_id, length, crc32c, path, queued_ms)
   VALUES ('T9', 'gone', 1, 1, 'frames/T9/gone.frame', 1)"
"$CAT" check --data-dir "$D" >"$T/check" || fail "check with a stale upload: $(cat "$T/check")"
grep -q "1 queued uploads name frames no longer in the catalog .*ingestd drops them" "$T/check" ||
	fail "check: $(cat "$T/check")"
ing_term_pid
# a count that drifted, a local frame not queued: check says so and what mends it
q "UPDATE tier_usage SET bytes = bytes + 1 WHERE location = 'local'"
rc=0
"$CAT" check --data-dir "$D" >"$T/check" || rc=$?
[ "$rc" = 1 ] && grep -q "count of where the frames are (tier_usage.*) is not the rows' .*: restart ingestd" "$T/check" ||
	fail "check with a drifted count: exit $rc: $(cat "$T/check")"
q "DELETE FROM tier_outbox WHERE wafer_id = 'T2' AND frame_id = 'frame-7'"
q "UPDATE tier_usage SET bytes = bytes - 1 WHERE location = 'local'"
rc=0
"$CAT" check --data-dir "$D" >"$T/check" || rc=$?
[ "$rc" = 1 ] && grep -q "1 local frames are not queued for the object store .*restart ingestd" "$T/check" ||
	fail "check with a frame not queued: exit $rc: $(cat "$T/check")"
q "UPDATE tier_usage SET frames = frames + 5 WHERE location = 'both'"
tier_start
tier_set_up
ing_term_pid
grep -q "1 local frames were not queued for the object store: queued now" "$T/ingestd.log" &&
	grep -q "1 queued uploads of frames no longer in the catalog .* dropped" "$T/ingestd.log" ||
	fail "ingestd did not mend the queue at start"
consistent "after the node mended the tier's tables"
[ "$(queued T2)" = 4 ] && [ "$(q "SELECT count(*) FROM tier_outbox WHERE wafer_id = 'T9'")" = 0 ] ||
	fail "the upload queue after the restart"
echo "ok: check names a drifted count and an unqueued frame, the node mends both at start"

# rebuild: the tier's tables start again empty; the next start counts them from the rows
q "UPDATE frames SET location = 'tiered', object_md5 = '00112233445566778899aabbccddeeff',
   tiered_ns = durable_ns, local_deleted_ns = durable_ns WHERE wafer_id = 'T2' AND frame_id = 'frame-7';
   DELETE FROM tier_outbox WHERE wafer_id = 'T2' AND frame_id = 'frame-7'"
rm "$D/frames/T2/frame-7.frame"
"$CAT" rebuild --data-dir "$D" >"$T/out" || fail "rebuild: $(cat "$T/out")"
[ "$(q "SELECT location FROM frames WHERE wafer_id = 'T2' AND frame_id = 'frame-7'")" = tiered ] ||
	fail "rebuild lost a frame only in the store"
[ "$(q "SELECT count(*) FROM sqlite_master WHERE name LIKE 'tier_%'")" = 0 ] || fail "rebuild carried tier tables over"
tier_start
local_bytes_are_files "after rebuild"
[ "$(metric 'ingest_tier_frames{location="tiered"}')" = 1 ] || fail "after rebuild: /metrics tiered $(metric 'ingest_tier_frames{location="tiered"}')"
[ "$(q "SELECT count(*) FROM tier_outbox")" = "$(q "SELECT count(*) FROM frames WHERE location = 'local'")" ] ||
	fail "after rebuild: not every local frame is queued"
ing_term_pid
consistent "after rebuild and a start with --tier"
grep -q "the tier's counts match the rows" "$T/check" || fail "check after rebuild: $(cat "$T/check")"
echo "ok: rebuilt: the tier's counts are the rows' and the files' at the next start, every local frame queued"
echo "PASS: ingest-catalog prune"
