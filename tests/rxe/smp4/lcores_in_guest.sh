#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lcores: several dataplane lcores and many producers on one node (docs/ARCHITECTURE.md
# "Several dataplane lcores"), on Soft-RoCE in the 4-vCPU guest, real processes:
#  1. ingestd --lcores 0-3: the control lcore and three dataplane lcores, RDMA READ and
#     WRITE push, its pool on the hugepages the guest reserved (Stats poolHugepages);
#  2. six producers at once, each on a wafer of its own: two RDMA READ pull, two RDMA
#     WRITE push, two gRPC fallback. One READ producer announces one frame with a bad rkey
#     (test hook: a QP error on its lcore, that frame fails, its session reconnects on the
#     same lcore); one WRITE producer is killed with kill -9 once 3 of its frames are
#     DURABLE (a moment the test controls);
#  3. the other four finish with every frame ok, the bad-rkey producer with all but that
#     frame; every stored frame is byte for byte what was sent (ingest-verify);
#  4. the placement rule spread the four RDMA sessions over the three lcores: Stats has one
#     entry per lcore and each took sessions and carried frames; the lcores where neither
#     the QP error nor the killed producer was show no failed frame and no error
#     completion; /metrics has the same per-lcore counters;
#  5. every pool slot comes back (nothing held by the killed producer's lcore after its
#     frames fail), and SIGTERM ends ingestd with exit 0.
set -euo pipefail
. "$(dirname "$0")/../../lib.sh"
step() { echo "== [${SECONDS}s] $*"; }   # where the time goes under TCG
: "${ING_BUILD_DIR:?}" "${ING_RXE_TMP:?}" "${ING_RXE_OUT:?}" "${RXE_IP:?}"
B=$ING_BUILD_DIR
T=$ING_RXE_TMP
OUT=$ING_RXE_OUT
INGESTD=$B/apps/ingestd SEND=$B/apps/ingest-send VERIFY=$B/apps/ingest-verify STATS=$B/tests/rxe_stats
SEND_HOOKS=$B/tests/ingest_send_testhooks
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$STATS" "$SEND_HOOKS"
PID=
KPID=
trap 'ing_kill_pid; [ -z "$KPID" ] || kill -KILL "$KPID" 2>/dev/null || true' EXIT
fail() {
	echo "FAIL: $*"
	echo "--- ingestd log (tail) ---"
	tail -n 60 "$OUT/ingestd.log" 2>/dev/null || true
	exit 1
}
[ "$(nproc)" -ge 4 ] || fail "this test needs the 4-vCPU guest (RXE_VM_SMP=4), it has $(nproc)"
METRICS=127.0.0.1:9464
# snap: the node's Stats into $T/stats once (a process start costs a second under TCG);
# sv KEY: one value of that snapshot
snap() { wd 60 "$STATS" "$SERVER" >"$T/stats" || fail "Stats of $SERVER: no answer"; }
sv() { awk -v k="$1" '$1 == k { print $2 }' "$T/stats"; }

step "ingestd --lcores 0-3: control + three dataplane lcores, READ and WRITE push, pool on hugepages"
# (its one rail named: the guest of this batch may have a second NIC, batch rails')
ing_start "$INGESTD" "$T/port" "$OUT/ingestd.log" --data-dir "$T/data" --rdma-dev "$RXE_DEV" --lcores 0-3 \
	--pool 256K:24,1M:32 --workers 2 --credits 8 --rdma on --rdma-write auto --poll-mode adaptive \
	--metrics-listen "$METRICS" --log-level info
PID=$ING_PID
SERVER=$ING_SERVER
grep -E "RDMA listener|dataplane|plan" "$OUT/ingestd.log" | head -n 8
grep -q "3 poller(s)" "$OUT/ingestd.log" || fail "the RDMA engine does not run three pollers"
snap
[ "$(sv lcores)" = 3 ] || fail "Stats lists $(sv lcores) lcores, not 3"
[ "$(sv poolHugepages)" = 1 ] || fail "the pool is not on hugepages (the guest reserved $(cat /proc/sys/vm/nr_hugepages))"

step "six producers at once: READ x2 (one with a bad rkey), WRITE push x2 (one killed), gRPC x2"
COMMON=(--server "$SERVER" --count 24 --sizes 64K-1M --credits 4 --json --quiet)
ING_TEST_FAULT_RDMA_BAD_RKEY=frame-105 wd 400 "$SEND_HOOKS" "${COMMON[@]}" --transport rdma \
	--seed 1 --first-id 100 --wafer LC-read-bad --manifest "$T/m-rb" >"$T/rb.json" 2>"$T/rb.err" &
P_RB=$!
wd 400 "$SEND" "${COMMON[@]}" --transport rdma --seed 2 --first-id 200 --wafer LC-read \
	--manifest "$T/m-r" >"$T/r.json" 2>"$T/r.err" &
P_R=$!
wd 400 "$SEND" "${COMMON[@]}" --transport rdma-write --seed 3 --first-id 300 --wafer LC-push \
	--manifest "$T/m-w" >"$T/w.json" 2>"$T/w.err" &
P_W=$!
# the one that is killed: many frames, its session id from its start line
"$SEND" --server "$SERVER" --transport rdma-write --count 400 --size 1M --credits 4 --seed 4 \
	--first-id 400 --wafer LC-push-killed --durable-manifest "$T/m-k" >"$T/k.out" 2>"$T/k.err" &
KPID=$!
wd 400 "$SEND" "${COMMON[@]}" --transport grpc --seed 5 --first-id 500 --wafer LC-grpc1 \
	--manifest "$T/m-g1" >"$T/g1.json" 2>"$T/g1.err" &
P_G1=$!
wd 400 "$SEND" "${COMMON[@]}" --transport grpc --seed 6 --first-id 600 --wafer LC-grpc2 \
	--manifest "$T/m-g2" >"$T/g2.json" 2>"$T/g2.err" &
P_G2=$!
for _ in $(seq 1 1200); do
	[ "$(grep -vc '^#' "$T/m-k" 2>/dev/null || echo 0)" -ge 3 ] && break
	kill -0 "$KPID" 2>/dev/null || fail "the producer to be killed ended first: $(cat "$T/k.err")"
	sleep 0.1
done
[ "$(grep -vc '^#' "$T/m-k")" -ge 3 ] || fail "the producer to be killed had no 3 frames DURABLE in 120 s"
KSID=$(grep '^ingest-send: ' "$T/k.err" | sed -n 's/.*, session \([0-9][0-9]*\),.*/\1/p' | head -n1)
kill -KILL "$KPID"
wait "$KPID" 2>/dev/null || true
KPID=
echo "killed the WRITE producer (session $KSID) after $(grep -vc '^#' "$T/m-k") DURABLE frames"
rc=0
for p in $P_RB $P_R $P_W $P_G1 $P_G2; do wait "$p" || rc=$((rc + 1)); done
for j in rb r w g1 g2; do echo "$j: $(cat "$T/$j.json")"; done
[ "$(jget "$T/rb.json" ok)" = 23 ] && [ "$(jget "$T/rb.json" failed)" = 1 ] ||
	fail "bad-rkey producer: not 23 ok + 1 failed ($(cat "$T/rb.err"))"
[ "$(jget "$T/rb.json" reconnects)" = 0 ] && [ "$(jget "$T/rb.json" resent)" = 0 ] ||
	fail "bad-rkey producer: one frame's failure cost its session (reconnects $(jget "$T/rb.json" reconnects), resent $(jget "$T/rb.json" resent))"
for j in r w g1 g2; do
	[ "$(jget "$T/$j.json" ok)" = 24 ] && [ "$(jget "$T/$j.json" failed)" = 0 ] ||
		fail "producer $j: not 24 of 24 ok ($(cat "$T/$j.err"))"
done
[ "$(jget "$T/r.json" transport)" = rdma ] && [ "$(jget "$T/w.json" transport)" = rdma-write ] &&
	[ "$(jget "$T/g1.json" transport)" = grpc ] || fail "producers not on the transports asked"
grep -m 2 "TEST HOOK" "$T/rb.err" || fail "the bad-rkey test hook did not announce itself"

step "every stored frame byte for byte (ingest-verify)"
# one manifest of every frame acked ok (one ingest-verify start: a process costs under TCG)
{
	head -n 1 "$T/m-r"
	awk '$1 != "frame-105"' "$T/m-rb" "$T/m-r" "$T/m-w" "$T/m-g1" "$T/m-g2" "$T/m-k" | grep -v '^#'
} >"$T/m-all"
wd 300 "$VERIFY" --data-dir "$T/data" --manifest "$T/m-all" ||
	fail "ingest-verify: stored frames not byte for byte what was sent"
echo "$(grep -vc '^#' "$T/m-all") frames verified"
[ ! -e "$T/data/frames/LC-read-bad/frame-105.frame" ] || fail "the bad-rkey frame was stored"

step "the RDMA sessions spread over the three lcores; the error and the kill stayed on theirs"
# session -> lcore from the node's log (the first placement; a reconnect keeps it)
lcore_of() { sed -n "/session $1 accepted on lcore [0-9]* (placed/{s/.* accepted on lcore \([0-9]*\) .*/\1/p;q}" "$OUT/ingestd.log"; }
RB_L=$(lcore_of "$(jget "$T/rb.json" session_id)")
R_L=$(lcore_of "$(jget "$T/r.json" session_id)")
W_L=$(lcore_of "$(jget "$T/w.json" session_id)")
K_L=$(lcore_of "$KSID")
echo "lcores: READ(bad rkey) $RB_L, READ $R_L, WRITE $W_L, WRITE(killed) $K_L"
[ -n "$RB_L" ] && [ -n "$R_L" ] && [ -n "$W_L" ] && [ -n "$K_L" ] || fail "a session's lcore is not in the log"
grep -q "session $(jget "$T/rb.json" session_id) accepted on lcore $RB_L (its lcore: a reconnect" "$OUT/ingestd.log" ||
	fail "the bad-rkey session did not reconnect on its own lcore"
# every slot back: the killed producer's frames fail after the park time (5 s)
ok=0
for i in $(seq 1 300); do
	snap
	if [ "$(sv poolSlotsFree)" = "$(sv poolSlotsTotal)" ] && [ "$(sv framesInFlight)" = 0 ]; then
		ok=1
		break
	fi
	sleep 0.2
done
grep -E "^lcore\.|^pool|^framesInFlight|^rdmaReadErrors" "$T/stats" | tee "$OUT/stats"
[ $ok = 1 ] || fail "slots not back: free $(sv poolSlotsFree) of $(sv poolSlotsTotal), in flight $(sv framesInFlight)"
clean=0
for i in 0 1 2; do
	id=$(sv "lcore.$i.lcore")
	[ "$(sv "lcore.$i.sessions")" -ge 1 ] || fail "lcore $id took no session"
	[ "$(sv "lcore.$i.framesReceived")" -ge 1 ] || fail "lcore $id carried no frame"
	[ "$(sv "lcore.$i.framesHeld")" = 0 ] || fail "lcore $id still holds frames"
	[ "$(sv "lcore.$i.connections")" = 0 ] || fail "lcore $id still serves connections after every producer ended"
	if [ "$id" != "$RB_L" ] && [ "$id" != "$K_L" ]; then
		clean=$((clean + 1))
		[ "$(sv "lcore.$i.framesFailed")" = 0 ] || fail "lcore $id failed frames though the error and the kill were elsewhere"
		[ "$(sv "lcore.$i.completionErrors")" = 0 ] || fail "lcore $id saw error completions though the error was elsewhere"
	fi
done
echo "$clean lcore(s) without the QP error and the killed producer: no failed frame, no error completion"

step "/metrics per lcore"
# (no python: a start costs 10-20 s in the TCG guest) - every family, one sample per lcore,
# frames and sessions on each
exec 3<>"/dev/tcp/${METRICS%:*}/${METRICS#*:}"
printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$METRICS" >&3
cat <&3 >"$T/metrics"
exec 3<&-
for fam in ingest_lcore_frames_total ingest_lcore_bytes_total ingest_lcore_sessions_total \
	ingest_lcore_frames_failed_total ingest_lcore_connections; do
	rows=$(grep "^$fam{" "$T/metrics" || true)
	echo "$fam: $(tr '\n' ' ' <<<"$rows")"
	[ "$(grep -c . <<<"$rows")" = 3 ] || fail "/metrics: $fam has not one sample per lcore"
	case $fam in ingest_lcore_frames_total | ingest_lcore_sessions_total)
		awk '$2 < 1 { exit 1 }' <<<"$rows" || fail "/metrics: an lcore with no $fam";;
	esac
done

step "SIGTERM"
ing_term_pid
echo "lcores_in_guest: all checks passed"
