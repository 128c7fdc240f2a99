#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctl: ControlStream backpressure, the producer's range check and the RDMA Stats counters,
# on real Soft-RoCE with real processes:
#  1. ingestd with a 2-slot pool (--pool 1M:2) and 16 credits; a producer with 16 credits
#     sends 24 frames over RDMA: the FrameMetas that find no free slot wait (the call is
#     paused, never answered BUSY), every frame ends DURABLE ok, byte-identical on disk,
#     Stats framesRefused stays 0 and ctlFramesParked counts the waits;
#  2. two producers at once on the same 2 slots: both complete, nothing refused;
#  3. libingest refuses a frame outside its registered pool with -EFAULT and a clear
#     message before any FrameMeta leaves (rdma_efault_check), a pool frame goes through;
#  4. Stats carries the data plane's per-lcore counters (rdmaBytesRead, rdmaReadsPosted,
#     rdmaCompletions, rdmaPollerPolls ...) and they add up;
#  5. SIGTERM: exit 0, every slot back.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}" "${RXE_IP:?}"
B=$ING_BUILD_DIR T=$ING_RXE_TMP OUT=$ING_RXE_OUT
INGESTD=$B/apps/ingestd SEND=$B/apps/ingest-send VERIFY=$B/apps/ingest-verify
STATS=$B/tests/rxe_stats EFAULT=$B/tests/rdma_efault_check
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$STATS" "$EFAULT"
PID=
trap ing_kill_pid EXIT
fail() {
	echo "FAIL: $*"
	echo "--- ingestd log (tail) ---"
	tail -n 60 "$OUT/ingestd.log" 2>/dev/null || true
	exit 1
}

step "start ingestd with a 2-slot pool (--pool 1M:2 --credits 16)"
ing_start "$INGESTD" "$T/port" "$OUT/ingestd.log" --data-dir "$T/data" --pool 1M:2 \
	--workers 1 --credits 16 --rdma on --poll-mode adaptive --log-level info
PID=$ING_PID
SERVER=$ING_SERVER
grep -q "RDMA READ yes" "$OUT/ingestd.log" || fail "ingestd does not offer RDMA"

step "24 frames of 1 MiB, 16 credits, 2 slots: every FrameMeta waits its turn, none refused"
wd 200 "$SEND" --server "$SERVER" --transport rdma --credits 16 --count 24 --size 1M \
	--seed 7 --first-id 1 --wafer CTL-w1 --manifest "$T/m1" --json --quiet \
	>"$T/s1.json" 2>"$T/s1.err" || fail "ingest-send exited $? ($(cat "$T/s1.json" "$T/s1.err"))"
cat "$T/s1.json"; echo
[ "$(jget "$T/s1.json" transport)" = rdma ] || fail "transport is not rdma"
[ "$(jget "$T/s1.json" ok)" = 24 ] || fail "not 24 frames ok"
[ "$(jget "$T/s1.json" failed)" = 0 ] || fail "frames failed (BUSY?): $(cat "$T/s1.err")"
grep -qi "busy" "$T/s1.err" && fail "the producer saw BUSY: $(grep -i busy "$T/s1.err" | head -3)"
"$STATS" "$SERVER" >"$OUT/stats1.txt"
cat "$OUT/stats1.txt"
[ "$(stat_of framesRefused)" = 0 ] || fail "the node refused FrameMetas (framesRefused $(stat_of framesRefused))"
[ "$(stat_of framesDurable)" = 24 ] || fail "framesDurable is not 24"
parked=$(stat_of ctlFramesParked)
[ "$parked" -ge 1 ] || fail "no FrameMeta waited for a slot (ctlFramesParked $parked): the test did not exercise backpressure"
echo "FrameMetas that waited for a slot/credit: $parked"
wd 200 "$VERIFY" --data-dir "$T/data" --manifest "$T/m1" || fail "ingest-verify"

step "two producers at once on the same 2 slots"
wd 200 "$SEND" --server "$SERVER" --transport rdma --credits 8 --count 12 --size 1M \
	--seed 8 --first-id 100 --wafer CTL-w2 --manifest "$T/m2" --json --quiet >"$T/s2.json" 2>"$T/s2.err" &
P2=$!
wd 200 "$SEND" --server "$SERVER" --transport rdma --credits 8 --count 12 --size 512K \
	--seed 9 --first-id 200 --wafer CTL-w3 --manifest "$T/m3" --json --quiet >"$T/s3.json" 2>"$T/s3.err" &
P3=$!
rc2=0 rc3=0
wait $P2 || rc2=$?
wait $P3 || rc3=$?
cat "$T/s2.json" "$T/s3.json"; echo
[ $rc2 = 0 ] && [ $rc3 = 0 ] || fail "a concurrent producer failed ($rc2/$rc3): $(cat "$T/s2.err" "$T/s3.err")"
[ "$(jget "$T/s2.json" ok)" = 12 ] && [ "$(jget "$T/s3.json" ok)" = 12 ] || fail "concurrent: not 12+12 ok"
[ "$(stat_of framesRefused)" = 0 ] || fail "concurrent: FrameMetas refused"
cat "$T/m2" "$T/m3" >"$T/m23"
wd 200 "$VERIFY" --data-dir "$T/data" --manifest "$T/m23" || fail "ingest-verify (concurrent)"

step "libingest: a frame outside the registered pool is -EFAULT (rdma_efault_check)"
set +e
wd 100 "$EFAULT" "$SERVER" 900 >"$T/ef.out" 2>"$T/ef.err"
rc=$?
set -e
cat "$T/ef.out" "$T/ef.err"
[ $rc = 0 ] || fail "rdma_efault_check exit $rc"
grep -q "not inside the registered frame pool" "$T/ef.err" || fail "no clear message for the -EFAULT refusal"
[ ! -e "$T/data/frames/EFAULT-w/efault-900-heap.frame" ] && [ ! -e "$T/data/frames/EFAULT-w/efault-900-beyond.frame" ] ||
	fail "a refused frame reached the node"
[ -e "$T/data/frames/EFAULT-w/efault-900-ok.frame" ] || fail "the valid frame was not stored"

step "Stats: the RDMA data plane's counters"
"$STATS" "$SERVER" >"$OUT/stats2.txt"
cat "$OUT/stats2.txt"
bytes=$(stat_of bytesReceived) rb=$(stat_of rdmaBytesRead) posted=$(stat_of rdmaReadsPosted)
compl=$(stat_of rdmaCompletions) polls=$(stat_of rdmaPollerPolls) idle=$(stat_of rdmaPollerIdlePolls)
busy=$(stat_of rdmaPollerBusyNs)
[ "$rb" -ge "$bytes" ] || fail "rdmaBytesRead $rb < bytesReceived $bytes"
[ "$posted" -ge 49 ] || fail "rdmaReadsPosted $posted < one per frame"
[ "$compl" -ge 1 ] && [ "$compl" -le "$posted" ] || fail "rdmaCompletions $compl not in 1..$posted"
[ "$polls" -gt "$idle" ] || fail "rdmaPollerPolls $polls not above rdmaPollerIdlePolls $idle"
[ "$busy" -gt 0 ] || fail "rdmaPollerBusyNs is 0"

step "SIGTERM"
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ $rc = 0 ] || fail "ingestd exit status $rc"
echo "ctl_in_guest: all checks passed"
