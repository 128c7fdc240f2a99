#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# config.sh BUILD_DIR SRC_DIR - ingestd --config FILE, as an operator uses it:
#  1. a good file alone: ingestd listens, stores frames where the file says (data-dir,
#     port-file from the file), ingest-verify finds them;
#  2. a flag overrides the file: --data-dir on the command line wins, the file's data dir
#     is never created;
#  3. errors are one line naming FILE:LINE with exit 2, before anything starts: an
#     unknown key, a bad value, a line that is not `key = value`, a missing file;
#  4. the shipped deploy/ingestd.conf passes --check-config, and gives every duration a unit;
#  5. what operators write: comments after values, a bare boolean key (drain), compound
#     durations (2h30m) are taken; a key set twice is refused naming both lines, a key that
#     needs a value given bare names the value it needs.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

ing_test_setup ops-config "${1:-}" ingest-send ingest-verify
SRC=$(cd "${2:?usage: config.sh BUILD_DIR SRC_DIR}" && pwd)

cat >"$TMP/good.conf" <<CONF
# a comment, then settings with and without spaces and quotes
listen = 127.0.0.1:0
port-file=$TMP/port
data-dir = "$TMP/data-file"
pool = 1M:4,4M:4
workers = 1
   credits = 8
log-level = info
CONF

step "1. the file alone: frames land in its data dir"
"$INGESTD" --config "$TMP/good.conf" >"$TMP/ingestd.log" 2>&1 &
PID=$!
ing_wait_port "$PID" "$TMP/port" "$TMP/ingestd.log"
"$SEND" --server "$ING_SERVER" --count 6 --sizes 100K-3M --manifest "$TMP/m1" --quiet \
	|| fail "ingest-send against the configured node failed"
"$VERIFY" --data-dir "$TMP/data-file" --manifest "$TMP/m1" >"$TMP/v1" 2>&1 \
	|| fail "ingest-verify in the file's data dir: $(tail -3 "$TMP/v1")"
grep -q "credits 8" "$TMP/ingestd.log" || fail "the file's credits = 8 not in force"
ing_term_pid
n_file=$(find "$TMP/data-file/frames" -name '*.frame' | wc -l)
[ "$n_file" = 6 ] || fail "$n_file frame files in the file's data dir, want 6"
echo "ok: 6 frames stored in the file's data-dir, credits 8 in force"

step "2. a flag overrides the file"
rm -f "$TMP/port"
"$INGESTD" --config "$TMP/good.conf" --data-dir "$TMP/data-flag" --credits 5 \
	>"$TMP/ingestd.log" 2>&1 &
PID=$!
ing_wait_port "$PID" "$TMP/port" "$TMP/ingestd.log"
"$SEND" --server "$ING_SERVER" --count 4 --sizes 100K-1M --first-id 100 \
	--manifest "$TMP/m2" --quiet || fail "ingest-send failed"
"$VERIFY" --data-dir "$TMP/data-flag" --manifest "$TMP/m2" >"$TMP/v2" 2>&1 \
	|| fail "frames not in the flag's data dir: $(tail -3 "$TMP/v2")"
grep -q "credits 5" "$TMP/ingestd.log" || fail "--credits 5 did not override credits = 8"
ing_term_pid
[ "$(find "$TMP/data-file/frames" -name '*.frame' | wc -l)" = 6 ] \
	|| fail "frames of the second run went to the file's data dir"
echo "ok: --data-dir and --credits on the command line won over the file"

# expect_conf_error FILE LINE TEXT [ARGS...]: exit 2, exactly one line, naming FILE:LINE and TEXT
expect_conf_error() {
	local file=$1 line=$2 text=$3 rc
	shift 3
	timeout 20 "$INGESTD" --config "$file" "$@" >"$TMP/out" 2>&1
	rc=$?
	[ "$rc" = 2 ] || fail "$file: exit $rc, want 2: $(head -3 "$TMP/out")"
	[ "$(wc -l <"$TMP/out")" = 1 ] || fail "$file: want one line, got: $(cat "$TMP/out")"
	grep -qF -- "$file:$line:" "$TMP/out" || fail "$file: the line does not name $file:$line: $(cat "$TMP/out")"
	grep -qF -- "$text" "$TMP/out" || fail "$file: the line does not say '$text': $(cat "$TMP/out")"
	echo "ok: $(cat "$TMP/out")"
}

step "3. errors: one line naming FILE:LINE, exit 2, nothing started"
printf 'listen = 127.0.0.1:0\ndata-dir = %s\n# fine so far\nworkerz = 2\n' "$TMP/nodata" >"$TMP/unknown.conf"
expect_conf_error "$TMP/unknown.conf" 4 "unknown key 'workerz'"
printf 'listen = 127.0.0.1:0\n\nworkers = 0\n' >"$TMP/badval.conf"
expect_conf_error "$TMP/badval.conf" 3 "workers: '0'"
printf 'pool = 4M:0\n' >"$TMP/badpool.conf"
expect_conf_error "$TMP/badpool.conf" 1 "pool: '4M:0'"
printf 'log-format = xml\n' >"$TMP/badfmt.conf"
expect_conf_error "$TMP/badfmt.conf" 1 "log-format"
printf 'listen 127.0.0.1:0\n' >"$TMP/noeq.conf"
expect_conf_error "$TMP/noeq.conf" 1 "key = value"
# a bad value in the file is an error even when a flag would override it
expect_conf_error "$TMP/badval.conf" 3 "workers" --workers 1
[ -e "$TMP/nodata" ] && fail "a refused config created its data dir"
timeout 20 "$INGESTD" --config "$TMP/missing.conf" >"$TMP/out" 2>&1
rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$TMP/out")" = 1 ] && grep -qF "$TMP/missing.conf" "$TMP/out" \
	|| fail "missing config file: exit $rc: $(cat "$TMP/out")"
echo "ok: $(cat "$TMP/out")"

step "4. the shipped example config is valid"
"$INGESTD" --config "$SRC/deploy/ingestd.conf" --check-config >"$TMP/out" 2>&1 \
	|| fail "deploy/ingestd.conf: $(cat "$TMP/out")"
echo "ok: $(cat "$TMP/out")"
# every duration key of the example has its unit (a bare number's unit is a guess)
durs=$("$INGESTD" --help | sed -n 's/^  --\([a-z-]*\) DURATION.*/\1/p')
[ "$(echo "$durs" | wc -w)" -ge 5 ] || fail "ingestd --help lists only '$durs' as durations"
for k in $durs; do
	if grep -Eq "^[[:space:]]*$k[[:space:]]*=[[:space:]]*[0-9.]+[[:space:]]*(#.*)?$" "$SRC/deploy/ingestd.conf"; then
		fail "deploy/ingestd.conf: $(grep -E "^[[:space:]]*$k[[:space:]]*=" "$SRC/deploy/ingestd.conf") has no unit"
	fi
done
echo "ok: every duration of deploy/ingestd.conf has a unit ($(grep -Ec "^($(echo $durs | tr ' ' '|'))[[:space:]]*=" "$SRC/deploy/ingestd.conf") set there)"

step "5. what operators write: comments after values, bare keys, compound durations"
cat >"$TMP/ops.conf" <<CONF
listen = 127.0.0.1:0   # any free port
data-dir = $TMP/data-ops  # frames and catalog
pool = 1M:4              # small
session-idle = 2h30m     # compound
frame-timeout = 1m30s
drain                    # start DRAINING
CONF
"$INGESTD" --config "$TMP/ops.conf" --check-config >"$TMP/out" 2>&1 || fail "ops.conf: $(cat "$TMP/out")"
echo "ok: comments after values, 'drain' bare, 2h30m and 1m30s: $(tail -1 "$TMP/out")"
printf 'listen = 127.0.0.1:0\nworkers = 1\n# again:\nworkers = 2\n' >"$TMP/twice.conf"
expect_conf_error "$TMP/twice.conf" 4 "workers: already set on line 2: keep one of the two lines"
printf 'handshake-timeout = 2s\nhandshake-timeout-ms = 300\n' >"$TMP/alias.conf"
expect_conf_error "$TMP/alias.conf" 2 "already set on line 1 (handshake-timeout is the same setting)"
printf 'workers\n' >"$TMP/bare.conf"
expect_conf_error "$TMP/bare.conf" 1 "workers: needs a value: 'workers = N'"
printf 'drain = maybe\n' >"$TMP/drain.conf"
expect_conf_error "$TMP/drain.conf" 1 "drain: 'maybe' is not on or off"
echo "PASS: config file"
