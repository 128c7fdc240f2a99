#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# e2e_fallback.sh BUILD_DIR - the gRPC fallback path end to end, real processes on loopback:
#  1. ingestd on 127.0.0.1 (port 0 + --port-file), temp data dir, small pool; its
#     persistence worker's cpus match the logged placement (unpinned: all of ours);
#  2. ingest-send: 40 synthetic frames of mixed sizes 64 KiB-4 MiB (unaligned) + 2 files;
#  3. ingest-verify: every frame file on disk, byte for byte, and its catalog row
#     (from the manifest, and again from the synthetic parameters alone);
#  4. the same frames again: all acked as duplicates, files not rewritten (inode + mtime);
#  5. the same frame id with other bytes: refused;
#     a frame file deleted and one truncated: the re-send rewrites them (not duplicates);
#  6. SIGTERM: ingestd exits 0; a corrupted frame file is then caught by ingest-verify.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

ing_test_setup e2e-fallback "${1:-}" ingest-send ingest-verify
DATA=$TMP/data

step "start ingestd"
ing_start "$INGESTD" "$TMP/port" "$TMP/ingestd.log" --data-dir "$DATA" --pool 1M:8,4M:12 \
	--workers 1 --sink file --log-level info
PID=$ING_PID
SERVER=$ING_SERVER
echo "ingestd pid $PID on $SERVER, data in $DATA"

head -c 1000003 /dev/urandom >"$TMP/file-a.bin"
head -c 777 /dev/urandom >"$TMP/file-b.bin"
step "the persistence worker runs where the plan says, not on the control thread's cpu"
# the placement is logged once at start; a worker the plan leaves unpinned runs on every
# cpu this script may use (EAL pins only ingestd's main thread)
placed=$(sed -n 's/.*worker placement: 0: cpu \([0-9,-]*\).*/\1/p' "$TMP/ingestd.log" | head -n 1)
[ -n "$placed" ] || fail "no worker placement in the log"
got=
for t in /proc/"$PID"/task/*; do
	if [ "$(cat "$t/comm" 2>/dev/null)" = ing-persist0 ]; then
		got=$(awk '/^Cpus_allowed_list:/ { print $2 }' "$t/status")
	fi
done
[ -n "$got" ] || fail "no ing-persist0 thread in ingestd"
[ "$got" = "$placed" ] || fail "worker 0 runs on cpus $got, the log says $placed"
if grep -q "worker placement: 0: cpu [0-9,-]* (not pinned)" "$TMP/ingestd.log"; then
	want=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status)
	[ "$got" = "$want" ] || fail "unpinned worker 0 runs on cpus $got, not on all of $want"
fi
echo "worker 0 on cpus $got ($(grep -o 'worker placement: .*' "$TMP/ingestd.log" | head -n 1))"

SYNTH=(--count 40 --sizes 64K-4M --seed 11 --first-id 1000 --wafer E2E-w1)

step "send 40 synthetic frames + 2 files"
timeout 120 "$SEND" --server "$SERVER" --transport grpc --credits 16 "${SYNTH[@]}" \
	--manifest "$TMP/manifest" --json --quiet "$TMP/file-a.bin" "$TMP/file-b.bin" \
	>"$TMP/send1.json" || fail "ingest-send exited $? ($(cat "$TMP/send1.json" 2>/dev/null))"
cat "$TMP/send1.json"
[ "$(json "$TMP/send1.json" 'ok')" = 42 ] || fail "not 42 frames ok"
[ "$(json "$TMP/send1.json" 'failed')" = 0 ] || fail "frames failed"
[ "$(json "$TMP/send1.json" 'transport')" = grpc ] || fail "transport is not grpc"
[ "$(json "$TMP/send1.json" 'latency_ms["durable"]["count"]')" = 42 ] || fail "durable latencies missing"
[ "$(json "$TMP/send1.json" 'latency_ms["node_durable"]["count"]')" = 42 ] || fail "the node's own DURABLE latencies (Ack.latencyNs) missing"
# the node's share of a frame's DURABLE latency cannot exceed what the producer saw end to end
python3 -c "import json,sys; l=json.load(open(sys.argv[1]))[\"latency_ms\"]; sys.exit(0 if 0 < l[\"node_durable\"][\"p50\"] <= l[\"durable\"][\"p99\"] else 1)" "$TMP/send1.json" || fail "node DURABLE latency not within the end-to-end latency"
unaligned=$(awk '!/^#/ && $3 % 4096 { n++ } END { print n + 0 }' "$TMP/manifest")
[ "$unaligned" -ge 2 ] || fail "expected unaligned frame sizes in the manifest"
echo "manifest: $(grep -vc '^#' "$TMP/manifest") frames, $unaligned of unaligned size"

step "verify from the manifest (files, bytes, crc32c, catalog rows)"
timeout 120 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/manifest" || fail "ingest-verify (manifest)"
step "verify from the synthetic parameters alone"
timeout 120 "$VERIFY" --data-dir "$DATA" "${SYNTH[@]}" || fail "ingest-verify (synthetic)"
nrows=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from frames').fetchone()[0])" "$DATA/catalog.db")
[ "$nrows" = 42 ] || fail "catalog has $nrows rows, expected 42"

snapshot() { (cd "$DATA" && find frames -type f -name '*.frame' -printf '%p %i %T@ %s\n' | sort); }
snapshot >"$TMP/before"
[ "$(wc -l <"$TMP/before")" = 42 ] || fail "expected 42 frame files, found $(wc -l <"$TMP/before")"

step "re-send the same frames: all duplicates, nothing rewritten"
sleep 1  # a rewrite would then show in mtime even on coarse clocks
timeout 120 "$SEND" --server "$SERVER" --transport grpc "${SYNTH[@]}" --json --quiet \
	"$TMP/file-a.bin" "$TMP/file-b.bin" >"$TMP/send2.json" || fail "re-send exited $?"
cat "$TMP/send2.json"
[ "$(json "$TMP/send2.json" 'duplicate')" = 42 ] || fail "re-send: not 42 duplicates"
[ "$(json "$TMP/send2.json" 'ok')" = 42 ] || fail "re-send: not 42 ok"
snapshot >"$TMP/after"
diff -u "$TMP/before" "$TMP/after" || fail "frame files changed (inode/mtime/size) on duplicate"
nrows=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from frames').fetchone()[0])" "$DATA/catalog.db")
[ "$nrows" = 42 ] || fail "catalog has $nrows rows after the re-send"

step "same frame id, other bytes: refused"
if timeout 60 "$SEND" --server "$SERVER" --transport grpc --count 1 --size 100000 --seed 999 \
	--first-id 1000 --wafer E2E-w1 --json --quiet >"$TMP/send3.json"; then
	fail "a conflicting frame was accepted"
fi
cat "$TMP/send3.json"
[ "$(json "$TMP/send3.json" 'failed')" = 1 ] || fail "conflict not reported as a failure"
snapshot >"$TMP/after2"
diff -u "$TMP/before" "$TMP/after2" || fail "a refused frame changed the stored files"

step "catalogued frames whose files were lost or cut short: rewritten on re-send"
lost=$(awk '!/^#/ && $2 == "E2E-w1" { n++; if (n == 2) { print $2 "/" $1; exit } }' "$TMP/manifest")
short=$(awk '!/^#/ && $2 == "E2E-w1" { n++; if (n == 3) { print $2 "/" $1; exit } }' "$TMP/manifest")
[ -n "$lost" ] && [ -n "$short" ] || fail "no synthetic frames in the manifest"
rm -f "$DATA/frames/$lost.frame"
truncate -s 1000 "$DATA/frames/$short.frame"
timeout 120 "$SEND" --server "$SERVER" --transport grpc "${SYNTH[@]}" --json --quiet \
	>"$TMP/send4.json" || fail "re-send after the loss exited $?"
cat "$TMP/send4.json"
[ "$(json "$TMP/send4.json" 'ok')" = 40 ] || fail "re-send after the loss: not 40 ok"
[ "$(json "$TMP/send4.json" 'duplicate')" = 38 ] || \
	fail "re-send after the loss: the 2 frames without their files were acked as duplicates"
timeout 120 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/manifest" --quiet || \
	fail "ingest-verify after the rewrite"
nrows=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from frames').fetchone()[0])" "$DATA/catalog.db")
[ "$nrows" = 42 ] || fail "catalog has $nrows rows after the rewrite, expected 42"
grep -q "catalog row without its file: rewritten" "$TMP/ingestd.log" || fail "the rewrite was not logged"

step "open loop (--rate): 20 frames at 40 frames/s keep their schedule and are stored"
# Frame i may not start before i/40 s, so 20 frames take at least 19/40 = 0.475 s whatever
# the machine's speed: this checks the pacing, not a speed.
timeout 60 "$SEND" --server "$SERVER" --transport grpc --count 20 --size 256K --first-id 900000 \
	--rate 40 --manifest "$TMP/manifest-rate" --json --quiet >"$TMP/send-rate.json" \
	|| fail "ingest-send --rate exited $?"
[ "$(json "$TMP/send-rate.json" 'ok')" = 20 ] || fail "paced run: not 20 frames ok"
[ "$(json "$TMP/send-rate.json" 'rate_fps')" = 40 ] || fail "paced run: rate not reported"
python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['wall_s'] >= 0.475 else 1)" \
	"$TMP/send-rate.json" || fail "paced run finished before its schedule allows"
timeout 60 "$VERIFY" --data-dir "$DATA" --manifest "$TMP/manifest-rate" --quiet || fail "ingest-verify (paced run)"

step "SIGTERM: ingestd exits 0"
kill -TERM "$PID"
rc=0
for _ in $(seq 1 300); do
	kill -0 "$PID" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$PID" 2>/dev/null; then
	fail "ingestd still running 30 s after SIGTERM"
fi
wait "$PID" || rc=$?
PID=
[ "$rc" = 0 ] || fail "ingestd exited $rc after SIGTERM"

step "ingest-verify catches a corrupted frame"
victim=$(awk '!/^#/ { print $2 "/" $1; exit }' "$TMP/manifest")
python3 - "$DATA/frames/$victim.frame" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(12345)
    b = f.read(1)
    f.seek(12345)
    f.write(bytes([b[0] ^ 0x01]))
EOF
if "$VERIFY" --data-dir "$DATA" --manifest "$TMP/manifest" --quiet 2>"$TMP/verify-bad.txt"; then
	fail "ingest-verify accepted a corrupted frame"
fi
grep -q "frame ${victim#*/}" "$TMP/verify-bad.txt" || fail "ingest-verify did not name the corrupted frame"
cat "$TMP/verify-bad.txt"

echo "e2e_fallback: PASS"
