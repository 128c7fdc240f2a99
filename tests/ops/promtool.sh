#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# promtool.sh BUILD_DIR - /metrics as a scraper and Prometheus's own linter see it:
#  1. after traffic (stored frames, a duplicate, a conflicting copy), `promtool check
#     metrics` on the page prints nothing and exits 0 (names, units, _total, HELP/TYPE);
#  2. the page counts what was sent (frames and bytes by transport and result, every
#     histogram stage, pool slots per size class) and has no frame or session id label;
#  3. the HTTP side: HEAD /metrics 200 with no body, other paths 404, POST 405.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

ing_test_setup ops-promtool "${1:-}" ingest-send
command -v promtool >/dev/null || { echo "FAIL: promtool not installed (Debian package prometheus)" >&2; exit 1; }
command -v curl >/dev/null || { echo "FAIL: curl not installed" >&2; exit 1; }

step "start ingestd with --metrics-listen"
ing_start "$INGESTD" "$TMP/port" "$TMP/ingestd.log" --data-dir "$TMP/data" --pool 1M:4,4M:4 \
	--workers 1 --metrics-listen 127.0.0.1:0 --metrics-port-file "$TMP/mport"
PID=$ING_PID
ing_metrics_url "$TMP/mport"
M=$ING_METRICS

step "traffic: 8 frames, the same 8 again (duplicates), frame 1 with other bytes (a conflict: failed)"
"$SEND" --server "$ING_SERVER" --count 8 --sizes 64K-3M --quiet || fail "ingest-send failed"
"$SEND" --server "$ING_SERVER" --count 8 --sizes 64K-3M --quiet || fail "second ingest-send failed"
"$SEND" --server "$ING_SERVER" --count 1 --size 64K --seed 7 --quiet >/dev/null 2>&1
curl -sf "$M" >"$TMP/page" || fail "GET $M failed"

step "1. promtool check metrics"
promtool check metrics <"$TMP/page" >"$TMP/lint" 2>&1
rc=$?
[ "$rc" = 0 ] && [ ! -s "$TMP/lint" ] || fail "promtool check metrics (exit $rc): $(head -20 "$TMP/lint")"
echo "ok: promtool check metrics is clean ($(grep -vc '^#' "$TMP/page") samples)"

step "2. the page counts the traffic"
val() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/page"; }
want() {
	local got
	got=$(val "$1")
	[ "$got" = "$2" ] || fail "$1 = '$got', want $2"
	echo "ok: $1 $got"
}
want 'ingest_frames_total{transport="grpc",result="durable"}' 8
want 'ingest_frames_total{transport="grpc",result="duplicate"}' 8
want 'ingest_frames_total{transport="grpc",result="failed"}' 1
want 'ingest_received_frames_total{transport="grpc"}' 17
want 'ingest_ack_latency_seconds_count{stage="durable"}' 16
want 'ingest_ack_latency_seconds_count{stage="received"}' 17
want 'ingest_stage_seconds_count{stage="write"}' 8
want 'ingest_stage_seconds_count{stage="sync"}' 8
want 'ingest_stage_seconds_count{stage="commit"}' 8
want 'ingest_stage_seconds_count{stage="queue"}' 16
want 'ingest_pool_slots{size_class="1048576"}' 4
want 'ingest_pool_slots_in_use{size_class="4194304"}' 0
want 'ingest_persist_queue_frames' 0
bytes=$(val 'ingest_frame_bytes_total{transport="grpc",result="durable"}')
[ "${bytes:-0}" -gt $((8 * 64 * 1024)) ] || fail "durable bytes $bytes"
[ "$(val ingest_disk_free_bytes)" -gt 0 ] || fail "no ingest_disk_free_bytes"
grep -E '^ingest_lcore_busy_ratio|^# TYPE ingest_lcore_busy_ratio gauge' "$TMP/page" >/dev/null \
	|| fail "no ingest_lcore_busy_ratio family"
if grep -v '^#' "$TMP/page" | grep -Eq 'frame_?id=|session_?id=|wafer'; then
	fail "a frame, session or wafer id as a label"
fi

step "3. HTTP"
code() { curl -s -o "$TMP/body" -w '%{http_code}' "$@"; }
[ "$(code -I "$M")" = 200 ] || fail "HEAD /metrics"
[ "$(code "${M%/metrics}/")" = 404 ] || fail "GET / is not 404"
[ "$(code -X POST "$M")" = 405 ] || fail "POST /metrics is not 405"
[ "$(code "$M?x=1")" = 200 ] || fail "GET /metrics?x=1 is not 200"
echo "ok: HEAD 200, / 404, POST 405"
kill -TERM "$PID"
wait "$PID"
rc=$?
PID=
[ "$rc" = 0 ] || fail "ingestd exited $rc after SIGTERM"
echo "PASS: promtool check metrics"
