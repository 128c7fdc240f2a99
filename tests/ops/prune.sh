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
#  5. usage errors: prune without --older-than, an age without a unit, --dry-run with check.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
BUILD=$(cd "${1:?usage: prune.sh BUILD_DIR}" && pwd)
GET=$BUILD/apps/ingest-get
ing_need_built "$GET"
NAME=ops-prune
. "$(dirname "$0")/catalog_lib.sh"
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
	r=$(q "SELECT count(*) FROM frames")
	f=$(find "$D/frames" -name '*.frame' | wc -l)
	[ "$r" = "$f" ] || fail "$1: $r rows, $f frame files"
	q "SELECT path FROM frames" | while read -r p; do [ -f "$D/$p" ] || fail "$1: row $p without its file"; done
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
	 "check --data-dir $D --dry-run|--older-than, --wafer and --dry-run go with prune" \
	 "prune --data-dir $D --older-than 1d --wafer|--wafer needs a value"; do
	rc=0
	# shellcheck disable=SC2086
	"$CAT" ${a%%|*} >"$T/out" 2>&1 || rc=$?
	[ "$rc" = 2 ] && [ "$(wc -l <"$T/out")" = 1 ] && grep -qF -- "${a#*|}" "$T/out" ||
		fail "ingest-catalog ${a%%|*}: exit $rc: $(cat "$T/out")"
	echo "ok: $(cat "$T/out")"
done
echo "PASS: ingest-catalog prune"
