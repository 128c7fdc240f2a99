#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# rdma: ingestd + ingest-send over RDMA READ on Soft-RoCE, real processes, real verbs:
#  1. ingestd --rdma on (rdma_cm listener on the rxe netdev, adaptive poller);
#  2. 24 synthetic frames of 64 KiB-8 MiB with --transport rdma: all ok, transport rdma,
#     every stored frame byte-identical (ingest-verify: bytes, crc32c, catalog row);
#  3. AUTO picks RDMA and says so;
#  4. a bad rkey (test hook ING_TEST_FAULT_RDMA_BAD_RKEY in the test build of libingest,
#     tests/ingest_send_testhooks, logged as
#     "TEST HOOK ACTIVE") fails exactly that frame, the others of
#     the batch succeed (the QP is re-established with the same session; the producer
#     neither reconnects its gRPC session nor re-sends a frame) and are verified;
#  5. a FrameMeta whose range exceeds the producer's registered region (test hook
#     ING_TEST_FAULT_RDMA_BEYOND_MR: it bypasses libingest's own -EFAULT check): the node's READ
#     fails that frame only (ERROR_TRANSFER), the others succeed;
#  6. kill -9 of the producer mid-transfer: ingestd stays healthy, every slot comes back
#     (Stats poolSlotsFree == poolSlotsTotal, framesInFlight 0), a new producer works;
#  7. SIGTERM: ingestd exits 0.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}" "${RXE_IP:?}"
B=$ING_BUILD_DIR
T=$ING_RXE_TMP
OUT=$ING_RXE_OUT
INGESTD=$B/apps/ingestd SEND=$B/apps/ingest-send VERIFY=$B/apps/ingest-verify STATS=$B/tests/rxe_stats
SEND_HOOKS=$B/tests/ingest_send_testhooks   # ingest-send with libingest's test hooks compiled in
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$STATS" "$SEND_HOOKS"
PID=
trap ing_kill_pid EXIT
fail() {
	echo "FAIL: $*"
	echo "--- ingestd log (tail) ---"
	tail -n 60 "$OUT/ingestd.log" 2>/dev/null || true
	exit 1
}

step "start ingestd (--rdma on, adaptive poller)"
ing_start "$INGESTD" "$T/port" "$OUT/ingestd.log" --data-dir "$T/data" \
	--pool 64K:8,1M:16,8M:24 --workers 1 --credits 16 --rdma on --poll-mode adaptive \
	--log-level info
PID=$ING_PID
SERVER=$ING_SERVER
grep -q "RDMA READ yes" "$OUT/ingestd.log" || fail "ingestd does not offer RDMA"
grep -E "RDMA listener|transports:" "$OUT/ingestd.log"

step "24 frames of 64 KiB-8 MiB over RDMA READ, string ids with a path, spaces and non-ASCII"
S1=(--count 24 --sizes 64K-8M --seed 3 --first-id 1 --wafer RXE-w1 --id-prefix $'run 1/w\xc3\xa9-')
wd 200 "$SEND" --server "$SERVER" --transport rdma "${S1[@]}" --manifest "$T/m1" \
	--json --quiet >"$T/s1.json" || fail "ingest-send exited $? ($(cat "$T/s1.json"))"
cat "$T/s1.json"; echo
[ "$(jget "$T/s1.json" transport)" = rdma ] || fail "transport is not rdma"
[ "$(jget "$T/s1.json" ok)" = 24 ] || fail "not 24 frames ok"
[ "$(jget "$T/s1.json" failed)" = 0 ] || fail "frames failed"
step "every stored frame byte-identical (ingest-verify), under its escaped name, found by its id"
wd 200 "$VERIFY" --data-dir "$T/data" --manifest "$T/m1" || fail "ingest-verify"
[ -f "$T/data/frames/RXE-w1/run%201%2Fw%C3%A9-7.frame" ] || fail "frame 'run 1/w\xc3\xa9-7' not under its escaped name"
# (the sqlite3 shell, not python: a python start costs 10-20 s under TCG)
[ "$(sqlite3 "$T/data/catalog.db" "SELECT count(*) FROM frames WHERE wafer_id='RXE-w1' AND frame_id='$(printf 'run 1/w\xc3\xa9-7')'")" = 1 ] ||
	fail "the catalog does not find frame 'run 1/w\xc3\xa9-7' by its original id"

step "AUTO picks RDMA"
wd 100 "$SEND" --server "$SERVER" --count 4 --size 2M --first-id 100 --wafer RXE-w1 \
	--json --quiet >"$T/s2.json" || fail "ingest-send (auto) exited $?"
[ "$(jget "$T/s2.json" transport)" = rdma ] || fail "AUTO did not pick rdma: $(cat "$T/s2.json")"
echo "note: $(jget "$T/s2.json" transport_note)"

step "bad rkey fails exactly that frame"
set +e
ING_TEST_FAULT_RDMA_BAD_RKEY=frame-203 wd 150 "$SEND_HOOKS" --server "$SERVER" --transport rdma --count 8 \
	--size 1M --seed 4 --first-id 200 --wafer RXE-w2 --manifest "$T/m3" --json --quiet >"$T/s3.json" \
	2>"$T/s3.err"
set -e
cat "$T/s3.json"; echo
grep "TEST HOOK" "$T/s3.err" || fail "the bad-rkey test hook did not announce itself loudly"
[ "$(jget "$T/s3.json" ok)" = 7 ] || fail "bad rkey: expected 7 frames ok"
[ "$(jget "$T/s3.json" failed)" = 1 ] || fail "bad rkey: expected exactly 1 failed frame"
# one frame's failure is no lost connection: the gRPC session stays, nothing is re-sent
[ "$(jget "$T/s3.json" reconnects)" = 0 ] && [ "$(jget "$T/s3.json" resent)" = 0 ] ||
	fail "bad rkey: the frame's failure cost the session (reconnects $(jget "$T/s3.json" reconnects), resent $(jget "$T/s3.json" resent))"
grep -q "RDMA connection closed by the ingest node.*reconnecting" "$T/s3.err" ||
	fail "bad rkey: the producer did not re-establish its QP within the session"
[ ! -e "$T/data/frames/RXE-w2/frame-203.frame" ] || fail "frame-203 was stored"
awk '$1 != "frame-203"' "$T/m3" >"$T/m3.ok"
wd 100 "$VERIFY" --data-dir "$T/data" --manifest "$T/m3.ok" || fail "ingest-verify (bad rkey batch)"
[ "$(stat_of rdmaReadErrors)" -ge 1 ] || fail "Stats rdmaReadErrors not counted"

step "FrameMeta beyond the producer's registered region fails that frame only (node-side READ error)"
set +e
ING_TEST_FAULT_RDMA_BEYOND_MR=frame-302 wd 150 "$SEND_HOOKS" --server "$SERVER" --transport rdma --count 6 \
	--size 1M --seed 5 --first-id 300 --wafer RXE-w3 --manifest "$T/m4" --json --quiet >"$T/s4.json" \
	2>"$T/s4.err"
set -e
cat "$T/s4.json"; echo
grep "TEST HOOK" "$T/s4.err" || fail "the beyond-MR test hook did not announce itself loudly"
[ "$(jget "$T/s4.json" ok)" = 5 ] || fail "beyond-MR: expected 5 frames ok"
[ "$(jget "$T/s4.json" failed)" = 1 ] || fail "beyond-MR: expected exactly 1 failed frame"
[ "$(jget "$T/s4.json" reconnects)" = 0 ] && [ "$(jget "$T/s4.json" resent)" = 0 ] ||
	fail "beyond-MR: the frame's failure cost the session (reconnects $(jget "$T/s4.json" reconnects), resent $(jget "$T/s4.json" resent))"
awk '$1 != "frame-302"' "$T/m4" >"$T/m4.ok"
wd 100 "$VERIFY" --data-dir "$T/data" --manifest "$T/m4.ok" || fail "ingest-verify (beyond-MR batch)"

step "kill -9 the producer mid-transfer"
before=$(stat_of framesReceived)
"$SEND" --server "$SERVER" --transport rdma --count 400 --size 8M --first-id 1000 --wafer RXE-w4 \
	--quiet >"$T/s5.log" 2>&1 &
SPID=$!
for _ in $(seq 1 200); do
	now=$(stat_of framesReceived)
	[ "$now" -ge $((before + 3)) ] && break
	sleep 0.1
done
kill -KILL "$SPID"
wait "$SPID" 2>/dev/null || true
echo "killed the producer after $(( $(stat_of framesReceived) - before )) frames received"
ok=0
for i in $(seq 1 300); do
	free=$(stat_of poolSlotsFree) total=$(stat_of poolSlotsTotal) infl=$(stat_of framesInFlight)
	if [ "$free" = "$total" ] && [ "$infl" = 0 ]; then ok=1; break; fi
	sleep 0.1
done
"$STATS" "$SERVER"
[ $ok = 1 ] || fail "slots not back after the producer died: free $free of $total, in flight $infl"
echo "all $total slots back after $((i / 10)).$((i % 10)) s"
kill -0 "$PID" || fail "ingestd died"
wd 100 "$SEND" --server "$SERVER" --transport rdma --count 3 --size 4M --first-id 5000 \
	--wafer RXE-w5 --json --quiet >"$T/s6.json" || fail "a new producer failed after the kill"
[ "$(jget "$T/s6.json" ok)" = 3 ] || fail "new producer: not 3 ok"

step "fallback: a node without RDMA (--rdma off)"
ing_start "$INGESTD" "$T/port2" "$OUT/ingestd2.log" --data-dir "$T/data2" --pool 4M:8 \
	--workers 1 --rdma off --log-level info
PID2=$ING_PID
SERVER2=$ING_SERVER
grep -q "RDMA READ no" "$OUT/ingestd2.log" || { kill -KILL $PID2; fail "ingestd --rdma off still offers RDMA"; }
set +e
wd 60 "$SEND" --server "$SERVER2" --transport rdma --count 1 --size 1M --first-id 7000 >"$T/s7.log" 2>&1
rc=$?
set -e
cat "$T/s7.log"
[ $rc != 0 ] && grep -qi "rdma" "$T/s7.log" || { kill -KILL $PID2; fail "--transport rdma against a node without RDMA did not fail loudly"; }
wd 60 "$SEND" --server "$SERVER2" --count 2 --size 1M --first-id 7000 --json --quiet \
	>"$T/s8.json" 2>"$T/s8.err" || { kill -KILL $PID2; fail "AUTO fallback send failed"; }
cat "$T/s8.err"
[ "$(jget "$T/s8.json" transport)" = grpc ] || { kill -KILL $PID2; fail "AUTO did not fall back to grpc"; }
echo "fallback note: $(jget "$T/s8.json" transport_note)"
"$STATS" "$SERVER2" | grep -E "transportNote|sessionsFallback"
kill -TERM $PID2; wait $PID2 || true

step "SIGTERM"
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ $rc = 0 ] || fail "ingestd exit status $rc"
grep -cE "WARN|ERR" "$OUT/ingestd.log" | sed 's/^/ingestd warnings+errors: /'
echo "rdma_in_guest: all checks passed"
