#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# push: RDMA WRITE push mode (docs/PUSH.md) on Soft-RoCE, real processes, real verbs:
#  1. ingestd --rdma on offers push with type-2 memory windows (rxe has them);
#  2. 16 frames of 64 KiB-4 MiB with --transport rdma-write: all ok, transport rdma-write,
#     every stored frame byte-identical (ingest-verify), Stats push counters move;
#  3. push, pull (RDMA READ) and fallback (gRPC stream) producers at the same time: all ok,
#     all byte-identical;
#  4. bad grants (test hooks of tests/ingest_send_testhooks, each logged "TEST HOOK"):
#     a stale grant id, a write one byte short, a write across the end of its grant: each
#     fails exactly that frame, the QP recovers (or is re-established within the session:
#     the producer neither reconnects its gRPC session nor re-sends a frame) and the other
#     frames of the batch succeed, byte-identical; Stats pushGrantErrors counts them;
#  5. sustained: 64 x 1 MiB pulled, then 256 x 1 MiB pushed into a null-sink ingestd, all
#     ok (the lcore -> control mailbox doorbell under load: one notice a frame, whatever
#     its size);
#  6. kill -9 of a push producer mid-write: ingestd healthy, every slot back (Stats
#     poolSlotsFree == poolSlotsTotal), a new push producer works;
#  7. SIGTERM: ingestd exits 0.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}" "${RXE_IP:?}"
B=$ING_BUILD_DIR
T=$ING_RXE_TMP
OUT=$ING_RXE_OUT
INGESTD=$B/apps/ingestd SEND=$B/apps/ingest-send VERIFY=$B/apps/ingest-verify STATS=$B/tests/rxe_stats
SEND_HOOKS=$B/tests/ingest_send_testhooks
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$STATS" "$SEND_HOOKS"
PID=
PID2=
trap 'ing_kill_pid; [ -z "$PID2" ] || kill -KILL "$PID2" 2>/dev/null || true' EXIT
fail() {
	echo "FAIL: $*"
	echo "--- ingestd log (tail) ---"
	tail -n 60 "$OUT/ingestd.log" 2>/dev/null || true
	exit 1
}

step "start ingestd (--rdma on, --rdma-write auto, grants expire after 10 s)"
ing_start "$INGESTD" "$T/port" "$OUT/ingestd.log" --data-dir "$T/data" \
	--pool 64K:8,1M:24,8M:16 --workers 1 --credits 16 --rdma on --rdma-write auto \
	--grant-ms 10000 --log-level info
PID=$ING_PID
SERVER=$ING_SERVER
grep "RDMA listener" "$OUT/ingestd.log" || fail "no RDMA listener"
grep -q "push memory windows" "$OUT/ingestd.log" || fail "push is not offered with memory windows on rxe"
[ "$(stat_of pushMemoryWindow)" = 1 ] || fail "Stats pushMemoryWindow is not 1"

step "16 frames of 64 KiB-4 MiB pushed with RDMA WRITE WITH IMM"
g0=$(stat_of pushGrants)
wd 200 "$SEND" --server "$SERVER" --transport rdma-write --credits 4 --count 16 --sizes 64K-4M --seed 7 \
	--first-id 1 --wafer PUSH-w1 --manifest "$T/m1" --json --quiet >"$T/s1.json" \
	|| fail "ingest-send exited $? ($(cat "$T/s1.json"))"
cat "$T/s1.json"; echo
[ "$(jget "$T/s1.json" transport)" = rdma-write ] || fail "transport is not rdma-write"
[ "$(jget "$T/s1.json" ok)" = 16 ] || fail "not 16 frames ok"
[ "$(jget "$T/s1.json" failed)" = 0 ] || fail "frames failed"
wd 200 "$VERIFY" --data-dir "$T/data" --manifest "$T/m1" || fail "ingest-verify (push)"
g1=$(stat_of pushGrants)
[ $((g1 - g0)) -ge 16 ] || fail "Stats pushGrants moved by $((g1 - g0)), not >= 16"
[ "$(stat_of pushFramesReceived)" -ge 16 ] || fail "Stats pushFramesReceived < 16"
[ "$(stat_of rdmaReadsPosted)" = 0 ] || fail "push frames were READ by the node"

step "push, pull and fallback producers at the same time"
wd 200 "$SEND" --server "$SERVER" --transport rdma-write --credits 4 --count 6 --sizes 1M-4M --seed 8 \
	--first-id 1 --wafer MIX-push --manifest "$T/mp" --json --quiet >"$T/mp.json" 2>"$T/mp.err" &
P1=$!
wd 200 "$SEND" --server "$SERVER" --transport rdma --count 6 --sizes 1M-4M --seed 9 \
	--first-id 1 --wafer MIX-pull --manifest "$T/ml" --json --quiet >"$T/ml.json" 2>"$T/ml.err" &
P2=$!
wd 200 "$SEND" --server "$SERVER" --transport grpc --count 6 --sizes 1M-4M --seed 10 \
	--first-id 1 --wafer MIX-grpc --manifest "$T/mg" --json --quiet >"$T/mg.json" 2>"$T/mg.err" &
P3=$!
rc1=0 rc2=0 rc3=0
wait $P1 || rc1=$?
wait $P2 || rc2=$?
wait $P3 || rc3=$?
cat "$T/mp.json" "$T/ml.json" "$T/mg.json"; echo
[ $rc1 = 0 ] && [ $rc2 = 0 ] && [ $rc3 = 0 ] || fail "mixed: exit statuses push $rc1 pull $rc2 grpc $rc3 ($(cat "$T/mp.err" "$T/ml.err" "$T/mg.err"))"
[ "$(jget "$T/mp.json" transport)" = rdma-write ] || fail "mixed: push producer not on rdma-write"
[ "$(jget "$T/ml.json" transport)" = rdma ] || fail "mixed: pull producer not on rdma"
[ "$(jget "$T/mg.json" transport)" = grpc ] || fail "mixed: fallback producer not on grpc"
for m in mp ml mg; do
	[ "$(jget "$T/$m.json" ok)" = 6 ] || fail "mixed: $m not 6 frames ok"
	wd 100 "$VERIFY" --data-dir "$T/data" --manifest "$T/$m" || fail "ingest-verify (mixed $m)"
done

# hook_batch VAR FRAME FIRST TAG: 6 pushed frames with test hook VAR on frame FRAME; exactly
# that frame fails, the 5 others are stored byte-identical.
hook_batch() {
	local var=$1 bad=$2 first=$3 tag=$4
	set +e
	wd 150 env "$var=$bad" "$SEND_HOOKS" --server "$SERVER" --transport rdma-write \
		--credits 4 --count 6 --size 1M --seed "$first" --first-id "$first" --wafer "BAD-$tag" \
		--manifest "$T/h-$tag" --json --quiet >"$T/h-$tag.json" 2>"$T/h-$tag.err"
	local rc=$?
	set -e
	cat "$T/h-$tag.json"; echo
	grep "TEST HOOK" "$T/h-$tag.err" | head -3
	grep -q "TEST HOOK ACTIVE" "$T/h-$tag.err" || fail "$tag: the test hook did not announce itself"
	[ -s "$T/h-$tag.json" ] || fail "$tag: ingest-send exited $rc without a summary"
	[ "$(jget "$T/h-$tag.json" transport)" = rdma-write ] || fail "$tag: not pushed"
	[ "$(jget "$T/h-$tag.json" ok)" = 5 ] || fail "$tag: expected 5 frames ok"
	[ "$(jget "$T/h-$tag.json" failed)" = 1 ] || fail "$tag: expected exactly 1 failed frame"
	# one frame's failure is no lost connection: the gRPC session stays, nothing is re-sent
	[ "$(jget "$T/h-$tag.json" reconnects)" = 0 ] && [ "$(jget "$T/h-$tag.json" resent)" = 0 ] ||
		fail "$tag: one frame's failure cost the session (reconnects $(jget "$T/h-$tag.json" reconnects), resent $(jget "$T/h-$tag.json" resent))"
	[ ! -e "$T/data/frames/BAD-$tag/$bad.frame" ] || fail "$tag: $bad was stored"
	awk -v b="$bad" '$1 != b' "$T/h-$tag" >"$T/h-$tag.ok"
	wd 100 "$VERIFY" --data-dir "$T/data" --manifest "$T/h-$tag.ok" || fail "ingest-verify ($tag)"
}

step "bad grant: a stale grant id (the node ignores the write; the frame's grant expires)"
e0=$(stat_of pushGrantErrors)
hook_batch ING_TEST_FAULT_PUSH_STALE_GRANT frame-203 200 stale
step "bad grant: one byte short of the grant (that frame fails, the QP stays up)"
hook_batch ING_TEST_FAULT_PUSH_SHORT_WRITE frame-303 300 short
step "bad grant: a write across the end of its grant (memory window refuses it, QP re-established)"
hook_batch ING_TEST_FAULT_PUSH_OUTSIDE_GRANT frame-402 400 outside
grep -E "remote access|REM_ACCESS|reconnect" "$T/h-outside.err" | head -3 || true
e1=$(stat_of pushGrantErrors)
[ $((e1 - e0)) -ge 2 ] || fail "Stats pushGrantErrors moved by $((e1 - e0)), expected >= 2"
ok=0
for i in $(seq 1 200); do
	free=$(stat_of poolSlotsFree) total=$(stat_of poolSlotsTotal)
	[ "$free" = "$total" ] && { ok=1; break; }
	sleep 0.1
done
[ $ok = 1 ] || fail "slots not back after the bad grants: free $free of $total"

step "sustained: 64 x 1 MiB pulled, then 256 x 1 MiB pushed, null sink (every notice reaches control)"
# Each frame's RECEIVED (and each push grant) goes from the lcore to the control thread on
# its mailbox (once a notice ring). A doorbell lost there stalled every later grant and RECEIVED of the lcore
# for good (seen at frame 64-91 of this very sequence, in bench/rdma.sh): rxe's softirqs
# on the lcore's vCPU widen the window in which it was lost. A second ingestd with the
# null sink (the guest's tmpfs stays small); --reuse-buffers keeps the producer's CPU out.
# What is at stake is the number of notices (one RECEIVED, and for push one grant, a
# frame), not bytes: 1 MiB frames give the same 64 + 256 notices, closer together, for a
# quarter of the bytes (4 MiB frames: 1.3 GB, 45 s of the qemu process's CPU; 1 MiB: 22 s).
ing_start "$INGESTD" "$T/port2" "$OUT/ingestd-sus.log" --data-dir "$T/data-sus" --sink null \
	--pool 1M:20 --workers 1 --credits 16 --rdma on --rdma-port 7473 --log-level info
PID2=$ING_PID
S2=$ING_SERVER
# short sessions first (their QPs come and go on the same lcore), as bench/rdma.sh does
wd 60 "$SEND" --server "$S2" --transport rdma --count 4 --size 1M --first-id 900 --quiet ||
	fail "sustained: warm-up pull"
wd 150 "$SEND" --server "$S2" --transport rdma --credits 16 --count 64 --size 1M \
	--first-id 1 --reuse-buffers --json --quiet >"$T/sl.json" 2>"$T/sl.err" ||
	fail "sustained pull: exit $? ($(tail -3 "$T/sl.err"))"
wd 60 "$SEND" --server "$S2" --transport rdma-write --count 4 --size 1M --first-id 800 --quiet ||
	fail "sustained: warm-up push"
wd 150 "$SEND" --server "$S2" --transport rdma-write --credits 16 --count 256 --size 1M \
	--first-id 1000 --reuse-buffers --json --quiet >"$T/sp.json" 2>"$T/sp.err" ||
	fail "sustained push: exit $? ($(tail -3 "$T/sp.err"))"
[ "$(jget "$T/sl.json" ok)" = 64 ] || fail "sustained pull: not 64 ok"
[ "$(jget "$T/sp.json" ok)" = 256 ] || fail "sustained push: not 256 ok"
echo "sustained: pull $(jget "$T/sl.json" mb_s) MB/s, push $(jget "$T/sp.json" mb_s) MB/s"
kill -TERM "$PID2"
wait "$PID2" || fail "the null-sink ingestd exited $?"
PID2=

step "kill -9 a push producer mid-write"
before=$(stat_of framesReceived)
"$SEND" --server "$SERVER" --transport rdma-write --credits 4 --count 400 --size 8M --first-id 1000 \
	--wafer PUSH-kill --quiet >"$T/k.log" 2>&1 &
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
wd 100 "$SEND" --server "$SERVER" --transport rdma-write --count 3 --size 4M --first-id 5000 \
	--wafer PUSH-after --json --quiet >"$T/s6.json" || fail "a new push producer failed after the kill"
[ "$(jget "$T/s6.json" ok)" = 3 ] || fail "new push producer: not 3 ok"

step "SIGTERM"
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ $rc = 0 ] || fail "ingestd exit status $rc"
grep -cE "WARN|ERR" "$OUT/ingestd.log" | sed 's/^/ingestd warnings+errors: /'
echo "push_in_guest: all checks passed"
