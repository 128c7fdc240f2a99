#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# restart_kill9.sh BUILD_DIR - kill -9 of ingestd mid-stream, then a restart on the same
# data dir (real processes on loopback, gRPC fallback):
#  1. ingestd; two producers at once: ingest-send --manifest (lists what it SENT) and
#     ingest-send --durable-manifest (what the node ACKed DURABLE, flushed per ack);
#  2. kill -9 ingestd while both are streaming;
#  3. with ingestd down: every DURABLE-acked frame is on disk and in the catalog, intact
#     (ingest-verify); every sent frame that has a catalog row is intact, the rest is
#     merely missing (ingest-verify --allow-missing);
#  4. restart on the same data dir: it starts, sweeps the dead writer's temp files;
#  5. re-send everything: all ok, the acked ones as duplicates; verify every frame.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

ing_test_setup review-kill9 "${1:-}" ingest-send ingest-verify
DATA=$TMP/data
PIDS=()
CLEANUP_EXTRA='for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done'

start_ingestd() {   # $1: log name
	ing_start "$INGESTD" "$TMP/port" "$TMP/$1.log" --data-dir "$DATA" --pool 1M:8,4M:8 \
		--workers 2 --log-level info
	PID=$ING_PID
	SERVER=$ING_SERVER
}

A=(--count 600 --sizes 64K-2M --seed 21 --first-id 1 --wafer K9-a)
B=(--count 600 --sizes 64K-2M --seed 22 --first-id 100001 --wafer K9-b)

step "start ingestd, two producers"
start_ingestd ingestd1
timeout 120 "$SEND" --server "$SERVER" --transport grpc --credits 8 "${A[@]}" \
	--manifest "$TMP/sent-a" --quiet >"$TMP/send-a.out" 2>&1 &
PIDS+=($!)
timeout 120 "$SEND" --server "$SERVER" --transport grpc --credits 8 "${B[@]}" \
	--durable-manifest "$TMP/acked-b" --quiet >"$TMP/send-b.out" 2>&1 &
PIDS+=($!)

# kill -9 once a good part (not all) of B has been acked DURABLE
for _ in $(seq 1 400); do
	n=$(grep -vc '^#' "$TMP/acked-b" 2>/dev/null || true)
	[ "${n:-0}" -ge 60 ] && break
	kill -0 "$PID" 2>/dev/null || fail "ingestd died on its own"
	sleep 0.05
done
step "kill -9 ingestd (B had ${n:-0} frames DURABLE)"
kill -KILL "$PID"
wait "$PID" 2>/dev/null || true
PID=
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()
nb=$(grep -vc '^#' "$TMP/acked-b" || true)
[ "$nb" -ge 1 ] || fail "no frame was acked DURABLE before the kill"
[ "$nb" -lt 600 ] || fail "all frames acked before the kill: the kill did not land mid-stream"
echo "acked DURABLE before the kill: $nb of 600; sent by ingest-send: $(grep -vc '^#' "$TMP/sent-a" || true)"

step "ingestd down: every DURABLE-acked frame intact"
timeout 120 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/acked-b" ||
	fail "a frame acked DURABLE is missing or damaged after kill -9"
step "ingestd down: every catalogued frame intact, the rest only missing"
timeout 120 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/sent-a" --allow-missing ||
	fail "a catalogued frame of the sent manifest is damaged after kill -9"

step "restart on the same data dir"
start_ingestd ingestd2
leftover=$(find "$DATA/frames" -name '*.tmp.*' | wc -l)
[ "$leftover" = 0 ] || fail "$leftover temp files of the killed writer left after restart"

step "re-send everything"
timeout 120 "$SEND" --server "$SERVER" --transport grpc --credits 8 "${A[@]}" \
	--manifest "$TMP/all-a" --json --quiet >"$TMP/resend-a.json" || fail "re-send A failed"
timeout 120 "$SEND" --server "$SERVER" --transport grpc --credits 8 "${B[@]}" \
	--manifest "$TMP/all-b" --json --quiet >"$TMP/resend-b.json" || fail "re-send B failed"
python3 - "$TMP/resend-a.json" "$TMP/resend-b.json" "$nb" <<'EOF' || fail "re-send results"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
nb = int(sys.argv[3])
for name, d in (("A", a), ("B", b)):
    if d["ok"] != 600 or d["failed"] != 0:
        sys.exit(f"re-send {name}: {d['ok']} ok, {d['failed']} failed of 600")
if b["duplicate"] < nb:
    sys.exit(f"re-send B: {b['duplicate']} duplicates, but {nb} frames had been acked DURABLE")
print(f"re-send: A {a['duplicate']} duplicates, B {b['duplicate']} duplicates (>= {nb} acked)")
EOF
step "verify every frame"
timeout 120 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/all-a" || fail "verify A after restart"
timeout 120 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/all-b" || fail "verify B after restart"

step "SIGTERM"
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" = 0 ] || fail "ingestd exited $rc on SIGTERM"
echo "PASS"
